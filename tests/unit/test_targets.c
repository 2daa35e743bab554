/*
 * test_targets.c - FindPath to within range of a goal (optionally in line of
 * sight) and to the nearest of several goals (pd_targets.h) against brute
 * force.
 *
 * Random small grids (uniform and weighted, open and cluttered), searched on
 * the unit grids of sizes 1-3, 8- and 4-connected, sometimes inside a
 * window: a Dijkstra written in the tests (ref_dijkstra.h) gives the cost
 * from the start to every cell, and the least cost over every qualifying
 * cell (within range of a goal by Euclidean distance between centres, and
 * seen through pd_move_raycast when line of sight is asked) is what A* must
 * match. A* must also return a legal path whose end qualifies for the goal
 * index it reports, the lowest such index, and NO_PATH exactly where no
 * qualifying cell is reachable. Fixed-seed generator: failures reproduce.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core_check.h"
#include "pd_clearance.h"
#include "pd_move.h"
#include "pd_targets.h"
#include "ref_dijkstra.h"
#include "test_rng.h"

#define T_GRIDS 160
#define T_MAX_SIDE 28
#define T_QUERIES 12

typedef struct t_tally {
    int reached, unreached, blocked_goal_reached, los_queries, multi_queries, start_qualifies;
} t_tally;

/* The reference's own qualification test: in range by integer arithmetic,
 * and the goal seen along the exact ray (the definition of line of sight). */
static int t_qualifies(const pd_grid *g, pd_point c, pd_point goal, double range, int los)
{
    int64_t dx = c.x - goal.x, dy = c.y - goal.y;
    if (range <= 0 ? (dx != 0 || dy != 0) : (double)(dx * dx + dy * dy) > range * range)
        return 0;
    if (!los)
        return 1;
    pd_ray_result ray;
    if (pd_move_raycast(g, pd_move_cell_center(c), pd_move_cell_center(goal), &ray) != PD_OK)
        return 0;
    return ray.clear || (ray.hit.x == goal.x && ray.hit.y == goal.y);
}

static void t_check(pd_search_ctx *ctx, const pd_grid *g, const ref_map *m, const double *dist,
                    const pd_search_params *p, const pd_targets *t, t_tally *tally, const char *what)
{
    /* Brute force: the least cost over all qualifying reachable cells. */
    double want = REF_UNREACHED;
    for (int32_t y = 0; y < m->h; y++)
        for (int32_t x = 0; x < m->w; x++) {
            double d = dist[y * m->w + x];
            if (d < 0)
                continue;
            for (size_t i = 0; i < t->n_goals; i++)
                if (t_qualifies(g, (pd_point){ x, y }, t->goals[i], t->range, t->line_of_sight) &&
                    (want < 0 || d < want))
                    want = d;
        }

    static pd_point path[T_MAX_SIDE * T_MAX_SIDE * 4];
    pd_search_metrics met;
    pd_status st = pd_search_astar(ctx, g, p, path, sizeof path / sizeof path[0], &met);
    if (want < 0) {
        int all_blocked = t->range <= 0;
        for (size_t i = 0; i < t->n_goals; i++)
            all_blocked &= pd_grid_get(g, t->goals[i].x, t->goals[i].y) == PD_CELL_BLOCKED;
        pd_status expect = all_blocked ? PD_GOAL_BLOCKED : PD_NO_PATH;
        if (st != expect)
            fail_msg("%s: %s, want %s", what, pd_status_name(st), pd_status_name(expect));
        tally->unreached++;
        return;
    }
    if (st != PD_OK)
        fail_msg("%s: %s, brute force finds cost %.12f", what, pd_status_name(st), want);
    if (fabs(met.cost - want) > CORE_COST_EPS)
        fail_msg("%s: A* cost %.12f, brute force %.12f", what, met.cost, want);
    pd_point end = path[met.path_len - 1];
    assert_int_equal(end.x, met.end.x);
    assert_int_equal(end.y, met.end.y);
    double summed = core_check_path(g, p->connectivity, path, met.path_len, p->start, end);
    assert_true(fabs(summed - met.cost) < CORE_COST_EPS);
    assert_true(met.target < t->n_goals);
    if (!t_qualifies(g, end, t->goals[met.target], t->range, t->line_of_sight))
        fail_msg("%s: end (%d,%d) does not qualify for goal %u", what, end.x, end.y, met.target);
    for (uint32_t i = 0; i < met.target; i++)
        if (t_qualifies(g, end, t->goals[i], t->range, t->line_of_sight))
            fail_msg("%s: end qualifies for goal %u too, reported %u", what, i, met.target);
    if (p->has_window)
        assert_true(end.x >= p->window_min.x && end.x <= p->window_max.x && end.y >= p->window_min.y &&
                    end.y <= p->window_max.y);
    tally->reached++;
    tally->start_qualifies += met.path_len == 1;
    for (size_t i = 0; i < t->n_goals; i++)
        if (met.target == i && pd_grid_get(g, t->goals[i].x, t->goals[i].y) == PD_CELL_BLOCKED)
            tally->blocked_goal_reached++;
}

/* The grid's cells as the reference's map; cells outside the window blocked
 * (the search may not enter them; line of sight still sees the real grid). */
static void t_ref_map(const pd_grid *g, const pd_search_params *p, ref_map *m)
{
    m->w = g->width;
    m->h = g->height;
    m->cells = malloc((size_t)m->w * (size_t)m->h);
    assert_non_null(m->cells);
    for (int32_t y = 0; y < m->h; y++)
        for (int32_t x = 0; x < m->w; x++) {
            int out = p->has_window && (x < p->window_min.x || x > p->window_max.x || y < p->window_min.y ||
                                        y > p->window_max.y);
            m->cells[y * m->w + x] = out ? 0 : pd_grid_get(g, x, y);
        }
}

static void t_run_grid(pd_search_ctx *ctx, uint64_t *rng, const pd_grid *g, int grid_no, t_tally *tally)
{
    pd_point start = { -1, -1 };
    for (int k = 0; k < 50 && start.x < 0; k++) {
        pd_point c = { rng_below(rng, g->width), rng_below(rng, g->height) };
        if (pd_grid_get(g, c.x, c.y) != PD_CELL_BLOCKED)
            start = c;
    }
    if (start.x < 0)
        return;
    double *dist = malloc((size_t)g->width * (size_t)g->height * sizeof *dist);
    assert_non_null(dist);
    for (int conn = 4; conn <= 8; conn += 4) {
        pd_search_params p = { .start = start, .connectivity = (pd_connectivity)conn };
        if (rng_below(rng, 3) == 0) {
            p.has_window = 1;
            p.window_min = (pd_point){ rng_below(rng, start.x + 1), rng_below(rng, start.y + 1) };
            p.window_max = (pd_point){ start.x + rng_below(rng, g->width - start.x),
                                       start.y + rng_below(rng, g->height - start.y) };
        }
        ref_map m;
        t_ref_map(g, &p, &m);
        ref_dijkstra(&m, conn, start.x, start.y, dist);
        for (int q = 0; q < T_QUERIES; q++) {
            pd_point goals[PD_TARGETS_MAX_GOALS];
            pd_targets t = { .goals = goals, .n_goals = rng_below(rng, 3) == 0 ? 1 + rng_below(rng, 6) : 1 };
            for (size_t i = 0; i < t.n_goals; i++)
                goals[i] = (pd_point){ rng_below(rng, g->width), rng_below(rng, g->height) };
            /* Whole and fractional ranges, 0 among them. */
            t.range = rng_below(rng, 4) == 0 ? 0.0 : rng_below(rng, 80) / 10.0;
            t.line_of_sight = rng_below(rng, 2);
            tally->los_queries += t.line_of_sight && t.range > 0;
            tally->multi_queries += t.n_goals > 1;
            p.targets = &t;
            char what[160];
            snprintf(what, sizeof what, "grid %d conn %d start (%d,%d) goals %zu first (%d,%d) range %.1f los %d%s",
                     grid_no, conn, start.x, start.y, t.n_goals, goals[0].x, goals[0].y, t.range,
                     t.line_of_sight, p.has_window ? " window" : "");
            t_check(ctx, g, &m, dist, &p, &t, tally, what);
        }
        free(m.cells);
    }
    free(dist);
}

static void test_random_grids_and_units(void **state)
{
    (void)state;
    pd_search_ctx *ctx = pd_search_ctx_create();
    assert_non_null(ctx);
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    t_tally tally = { 0 };
    for (int i = 0; i < T_GRIDS; i++) {
        int32_t w = 2 + rng_below(&rng, T_MAX_SIDE - 1), h = 2 + rng_below(&rng, T_MAX_SIDE - 1);
        int density = rng_below(&rng, 40), weighted = i % 2;
        pd_grid *g = pd_grid_create(w, h);
        assert_non_null(g);
        for (int32_t y = 0; y < h; y++)
            for (int32_t x = 0; x < w; x++)
                pd_grid_set(g, x, y, rng_below(&rng, 100) < density ? 0
                                     : weighted                       ? (uint8_t)(1 + rng_below(&rng, 9))
                                                                      : 1);
        pd_grid_refresh_flags(g);
        pd_clearance *c = pd_clearance_build(g);
        assert_non_null(c);
        for (uint32_t unit = 1; unit <= 3; unit++) {
            pd_grid *ug = unit == 1 ? g : pd_unit_grid_build(g, c, unit);
            assert_non_null(ug);
            t_run_grid(ctx, &rng, ug, i, &tally);
            if (ug != g)
                pd_grid_destroy(ug);
        }
        pd_clearance_destroy(c);
        pd_grid_destroy(g);
    }
    /* Every kind of case must actually have come up. */
    assert_true(tally.reached > 1500);
    assert_true(tally.unreached > 100);
    assert_true(tally.blocked_goal_reached > 50);
    assert_true(tally.los_queries > 1000);
    assert_true(tally.multi_queries > 500);
    assert_true(tally.start_qualifies > 50);
    pd_search_ctx_destroy(ctx);
}

/* Walk into attack range behind a wall: the goal (an enemy on a blocked
 * cell) is 3 cells away through a wall; range 4 alone stops at once, line
 * of sight has to go round to the gap. */
static void test_line_of_sight_goes_round(void **state)
{
    (void)state;
    pd_grid *g = core_grid("..........\n"
                           "....#.....\n"
                           "....#.....\n"
                           "....#.....\n"
                           "....#.....\n"
                           "....#.....\n"
                           "..........\n");
    pd_search_ctx *ctx = pd_search_ctx_create();
    pd_point goal = { 6, 3 };
    pd_grid_set(g, goal.x, goal.y, PD_CELL_BLOCKED);
    pd_grid_refresh_flags(g);
    pd_targets t = { .goals = &goal, .n_goals = 1, .range = 4.0 };
    pd_search_params p = { .start = { 1, 3 }, .targets = &t };
    pd_point path[64];
    pd_search_metrics met;
    assert_int_equal(pd_search_astar(ctx, g, &p, path, 64, &met), PD_OK);
    assert_int_equal(met.path_len, 2); /* (2,3) is 4 cells from the goal */
    assert_int_equal(met.end.x, 2);
    t.line_of_sight = 1;
    assert_int_equal(pd_search_astar(ctx, g, &p, path, 64, &met), PD_OK);
    assert_true(met.end.y == 0 || met.end.y == 6); /* round the wall's end */
    assert_int_equal(met.target, 0);
    /* Range 0 on a blocked goal: nothing can qualify. */
    t.range = 0;
    t.line_of_sight = 0;
    assert_int_equal(pd_search_astar(ctx, g, &p, path, 64, &met), PD_GOAL_BLOCKED);
    pd_search_ctx_destroy(ctx);
    pd_grid_destroy(g);
}

/* The nearest of several goals by path cost, not by straight distance. */
static void test_nearest_goal_by_cost(void **state)
{
    (void)state;
    pd_grid *g = core_grid("..#.......\n"
                           "..#.......\n"
                           "..#.......\n"
                           "..........\n");
    pd_search_ctx *ctx = pd_search_ctx_create();
    pd_point goals[2] = { { 0, 0 }, { 6, 2 } }; /* the first is nearer as the crow flies from (3,0) */
    pd_targets t = { .goals = goals, .n_goals = 2 };
    pd_search_params p = { .start = { 3, 0 }, .targets = &t };
    pd_point path[64];
    pd_search_metrics met;
    assert_int_equal(pd_search_astar(ctx, g, &p, path, 64, &met), PD_OK);
    assert_int_equal(met.target, 1);
    /* Out of bounds goals and bad sets are refused. */
    goals[1] = (pd_point){ 10, 0 };
    assert_int_equal(pd_search_astar(ctx, g, &p, path, 64, &met), PD_OUT_OF_BOUNDS);
    t.n_goals = 0;
    assert_int_equal(pd_search_astar(ctx, g, &p, path, 64, &met), PD_INVALID_ARGUMENT);
    t.n_goals = 1;
    t.range = -1;
    assert_int_equal(pd_search_astar(ctx, g, &p, path, 64, &met), PD_INVALID_ARGUMENT);
    pd_search_ctx_destroy(ctx);
    pd_grid_destroy(g);
}

/* The heuristic never exceeds the true cost to the nearest qualifying cell
 * on an open grid (where that cost is the octile distance), and is 0 on
 * qualifying cells. */
static void test_heuristic_admissible(void **state)
{
    (void)state;
    pd_point goal = { 20, 20 };
    for (int r10 = 0; r10 <= 120; r10 += 7) {
        pd_targets t = { .goals = &goal, .n_goals = 1, .range = r10 / 10.0 };
        for (int32_t y = 0; y <= 40; y++)
            for (int32_t x = 0; x <= 40; x++) {
                double best8 = INFINITY, best4 = INFINITY;
                for (int32_t cy = 0; cy <= 40; cy++)
                    for (int32_t cx = 0; cx <= 40; cx++) {
                        if (!pd_targets_in_range(t.range, (pd_point){ cx, cy }, goal) &&
                            !(cx == goal.x && cy == goal.y))
                            continue;
                        int32_t dx = abs(x - cx), dy = abs(y - cy);
                        double o = dx > dy ? dx + (CORE_SQRT2 - 1) * dy : dy + (CORE_SQRT2 - 1) * dx;
                        best8 = o < best8 ? o : best8;
                        best4 = dx + dy < best4 ? dx + dy : best4;
                    }
                assert_true(pd_targets_h(&t, PD_CONNECT_8, x, y) <= best8 + 1e-9);
                assert_true(pd_targets_h(&t, PD_CONNECT_4, x, y) <= best4 + 1e-9);
                if (best8 == 0)
                    assert_true(pd_targets_h(&t, PD_CONNECT_8, x, y) == 0);
            }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_grids_and_units),
        cmocka_unit_test(test_line_of_sight_goes_round),
        cmocka_unit_test(test_nearest_goal_by_cost),
        cmocka_unit_test(test_heuristic_admissible),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
