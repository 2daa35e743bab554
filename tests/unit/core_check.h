/*
 * core_check.h - helpers shared by the search tests (test_search.c and
 * test_search_reference.c): building grids from text and checking that a
 * returned path obeys the movement rules.
 *
 * The path check is written from the rules in pd_search.h, not from
 * pd_search.c: every step moves to one of the eight (or four) neighbours,
 * every cell on the path is passable, a diagonal step needs both orthogonal
 * neighbours passable, and a step costs its length times the cost byte of the
 * cell it enters. Include after <cmocka.h>.
 */
#ifndef CORE_CHECK_H
#define CORE_CHECK_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "pd_mapfile.h"
#include "pd_search.h"

#define CORE_SQRT2 1.41421356237309504880
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

/*
 * Checks the path runs start..goal through legal steps and returns its cost,
 * summed step by step from the start. Fails the test on any broken rule.
 */
static inline double core_check_path(const pd_grid *g, pd_connectivity conn, const pd_point *path,
                                     size_t len, pd_point start, pd_point goal)
{
    assert_true(len >= 1);
    if (path[0].x != start.x || path[0].y != start.y)
        fail_msg("path starts at (%d,%d), want (%d,%d)", path[0].x, path[0].y, start.x, start.y);
    if (path[len - 1].x != goal.x || path[len - 1].y != goal.y)
        fail_msg("path ends at (%d,%d), want (%d,%d)", path[len - 1].x, path[len - 1].y, goal.x,
                 goal.y);
    double cost = 0.0;
    for (size_t i = 0; i < len; i++) {
        if (!pd_grid_in_bounds(g, path[i].x, path[i].y) || pd_grid_get(g, path[i].x, path[i].y) == 0)
            fail_msg("path cell %zu (%d,%d) is outside or blocked", i, path[i].x, path[i].y);
        if (i == 0)
            continue;
        int32_t dx = path[i].x - path[i - 1].x, dy = path[i].y - path[i - 1].y;
        if (dx < -1 || dx > 1 || dy < -1 || dy > 1 || (dx == 0 && dy == 0))
            fail_msg("step %zu (%d,%d)->(%d,%d) is not to a neighbour", i, path[i - 1].x,
                     path[i - 1].y, path[i].x, path[i].y);
        double entered = (double)pd_grid_get(g, path[i].x, path[i].y);
        if (dx != 0 && dy != 0) {
            if (conn == PD_CONNECT_4)
                fail_msg("diagonal step %zu in a 4-connected search", i);
            if (pd_grid_get(g, path[i - 1].x + dx, path[i - 1].y) == 0 ||
                pd_grid_get(g, path[i - 1].x, path[i - 1].y + dy) == 0)
                fail_msg("step %zu (%d,%d)->(%d,%d) cuts a corner", i, path[i - 1].x,
                         path[i - 1].y, path[i].x, path[i].y);
            cost += CORE_SQRT2 * entered;
        } else {
            cost += entered;
        }
    }
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
