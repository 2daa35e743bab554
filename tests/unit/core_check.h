/*
 * core_check.h - helpers shared by the search tests (test_search.c and
 * test_search_reference.c): building grids from text and checking that a
 * returned path obeys the movement rules.
 *
 * The path check is path_rules.h's: the movement rules of pd_search.h.
 * Include after <cmocka.h>.
 */
#ifndef CORE_CHECK_H
#define CORE_CHECK_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "pd_mapfile.h"
#include "pd_search.h"
#include "path_rules.h"

#define CORE_SQRT2 PATH_RULES_SQRT2
/* Two sums of the same kind of steps may round differently in the last bits. */
#define CORE_COST_EPS 1e-9

/* Builds a grid from ASCII rows ('.', '#', '1'..'9'), failing the test on error. */
static inline pd_grid *core_grid(const char *text)
{
    pd_parse_error err;
    pd_grid *g = pd_map_parse_ascii(text, strlen(text), &err);
    if (!g)
        fail_msg("test grid refused at %d:%d: %s", err.line, err.column, err.message);
    return g;
}

/* A grid of w x h passable cells of cost 1. */
static inline pd_grid *core_open_grid(int32_t w, int32_t h)
{
    pd_grid *g = pd_grid_create(w, h);
    assert_non_null(g);
    for (int32_t y = 0; y < h; y++)
        for (int32_t x = 0; x < w; x++)
            pd_grid_set(g, x, y, PD_CELL_FREE);
    return g;
}

/* Checks the path runs start..goal through legal steps (path_rules.h) and
 * returns its cost, summed step by step from the start. Fails the test on
 * any broken rule. */
static inline double core_check_path(const pd_grid *g, pd_connectivity conn, const pd_point *path,
                                     size_t len, pd_point start, pd_point goal)
{
    double cost;
    char why[160];
    if (path_breaks_rules(g, conn, path, len, start, goal, &cost, why, sizeof why))
        fail_msg("%s", why);
    return cost;
}

/* Runs a search with a path buffer of `cap` cells and checks an OK result
 * fully (path legal, summed cost == metrics cost, path_len right). */
static inline pd_status core_search(pd_search_ctx *ctx, const pd_grid *g, pd_connectivity conn,
                                    pd_point s, pd_point t, pd_point *out, size_t cap,
                                    pd_search_metrics *m)
{
    pd_search_params p;
    memset(&p, 0, sizeof p);
    p.start = s;
    p.goal = t;
    p.connectivity = conn;
    memset(m, 0xA5, sizeof *m);
    pd_status st = pd_search_astar(ctx, g, &p, out, cap, m);
    if (st == PD_OK && out) {
        double summed = core_check_path(g, conn, out, m->path_len, s, t);
        if (fabs(summed - m->cost) > CORE_COST_EPS)
            fail_msg("summed path cost %.12f != metrics cost %.12f", summed, m->cost);
    }
    if (st == PD_OK) {
        assert_true(m->path_len >= 1);
        assert_true(m->expanded <= m->generated);
    }
    return st;
}

#endif
