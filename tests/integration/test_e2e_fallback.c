/*
 * test_e2e_fallback.c - what the daemon does when the asked-for path cannot
 * be had (issue 4): blocked endpoints with and without snapping, a goal in a
 * sealed room under each goal mode, and an expansion budget with and without
 * partial results.
 *
 * Every substitute cell is checked against a brute force written here from
 * docs/PROTOCOL.md: snapping picks the passable cell (any component) nearest
 * in Euclidean distance, NEAREST the nearest cell the start can reach, ties
 * to the smaller y then the smaller x; LINE the first reachable cell on the
 * supercover from the goal back to the start. Reachability and path costs
 * come from the harness's footprint Dijkstra. The scene is e2e4_fallback.txt.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "harness.h"

#define T_EPS 1e-6
#define T_SCENE "fallback"
#define T_MAP PD_TEST_DATA_DIR "/e2e4_fallback.txt"
/* The expansion budget that cuts the long search short. */
#define T_SMALL_BUDGET 5

static int setup(void **state)
{
    pdi_limits l = {0};
    l.extra_scenes_json = ",\n    {\"name\": \"" T_SCENE "\", \"map\": \"" T_MAP "\", \"format\": \"ascii\","
                          " \"unit_sizes\": [1, 2]}";
    return pdi_fixture_start(state, &l);
}

/* The cell nearest p (Euclidean; ties smaller y, then x) among those where
 * the rules' unit fits and, when dist is given, that are reachable. Returns
 * how many cells share the winning distance (0: none qualified). */
static size_t t_nearest(const pdi_grid *g, const pdi_rules *rules, const double *dist, pdc_xy p, pdc_xy *out)
{
    int64_t best = -1;
    size_t ties = 0;
    /* Scanning rows top-down and columns left-right and keeping only a
     * strictly better cell is exactly the tie rule. */
    for (int32_t y = 0; y < g->height; y++)
        for (int32_t x = 0; x < g->width; x++) {
            if (!pdi_rules_open(g, rules, x, y))
                continue;
            if (dist && dist[(size_t)y * (size_t)g->width + (size_t)x] == INFINITY)
                continue;
            int64_t d2 = (int64_t)(x - p.x) * (x - p.x) + (int64_t)(y - p.y) * (y - p.y);
            if (best < 0 || d2 < best) {
                best = d2;
                *out = (pdc_xy){x, y};
                ties = 1;
            } else if (d2 == best) {
                ties++;
            }
        }
    return ties;
}

static int t_path(pdc_conn *c, const pdc_path_req *req, pdc_path_result *r)
{
    memset(r, 0, sizeof *r);
    return pdc_find_path(c, req, r);
}

static pdc_path_req t_req(int32_t sx, int32_t sy, int32_t gx, int32_t gy)
{
    pdc_path_req req = {0};
    req.scene = T_SCENE;
    req.start = pdc_cell(sx, sy);
    req.goal = pdc_cell(gx, gy);
    return req;
}

/* The path runs from `from` to `to`, is legal, and is optimal for the unit. */
static void t_check_path(const pdi_grid *g, const pdi_rules *rules, const pdc_path_result *r, pdc_xy from,
                         pdc_xy to)
{
    char why[256];
    double walked = 0;
    assert_true(r->count >= 1);
    assert_int_equal(r->waypoints[0].x, from.x);
    assert_int_equal(r->waypoints[0].y, from.y);
    assert_int_equal(r->waypoints[r->count - 1].x, to.x);
    assert_int_equal(r->waypoints[r->count - 1].y, to.y);
    if (pdi_rules_path_cost(g, rules, r->waypoints, r->count, &walked, why, sizeof why) != 0)
        fail_msg("(%d,%d)->(%d,%d): %s", from.x, from.y, to.x, to.y, why);
    assert_true(fabs(walked - r->cost) <= T_EPS);
    double oracle = pdi_rules_dijkstra(g, rules, from.x, from.y, to.x, to.y);
    if (fabs(oracle - r->cost) > T_EPS)
        fail_msg("(%d,%d)->(%d,%d): cost %.9f, Dijkstra %.9f", from.x, from.y, to.x, to.y, r->cost, oracle);
}

/* A start inside the thick wall band: START_BLOCKED, or with snap the
 * nearest open cell (a tie above and below, won by the smaller y). */
static void test_snap_blocked_start_and_goal(void **state)
{
    pdi_daemon *d = *state;
    pdi_grid g;
    assert_int_equal(pdi_grid_load_ascii(&g, T_MAP), 0);
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    pdi_rules u1 = {.unit = 1};
    pdc_path_result r;

    pdc_path_req req = t_req(6, 11, 20, 13);
    assert_int_equal(t_path(c, &req, &r), PDC_START_BLOCKED);
    assert_int_equal(r.count, 0);
    pdc_path_result_free(&r);

    pdc_xy want;
    assert_true(t_nearest(&g, &u1, NULL, (pdc_xy){6, 11}, &want) >= 2);
    req.snap = 1;
    assert_int_equal(t_path(c, &req, &r), PDC_PARTIAL);
    assert_true(r.has_start_used);
    assert_false(r.has_goal_used);
    assert_int_equal(r.start_used.x, want.x);
    assert_int_equal(r.start_used.y, want.y);
    t_check_path(&g, &u1, &r, want, (pdc_xy){20, 13});
    pdc_path_result_free(&r);

    /* A blocked goal: GOAL_BLOCKED, or snapped; both ends at once. */
    req = t_req(20, 13, 8, 11);
    assert_int_equal(t_path(c, &req, &r), PDC_GOAL_BLOCKED);
    pdc_path_result_free(&r);
    pdc_xy want_goal;
    assert_true(t_nearest(&g, &u1, NULL, (pdc_xy){8, 11}, &want_goal) >= 2);
    req.snap = 1;
    assert_int_equal(t_path(c, &req, &r), PDC_PARTIAL);
    assert_false(r.has_start_used);
    assert_true(r.has_goal_used);
    assert_int_equal(r.goal_used.x, want_goal.x);
    assert_int_equal(r.goal_used.y, want_goal.y);
    t_check_path(&g, &u1, &r, (pdc_xy){20, 13}, want_goal);
    pdc_path_result_free(&r);

    req = t_req(6, 11, 8, 11);
    req.snap = 1;
    assert_int_equal(t_path(c, &req, &r), PDC_PARTIAL);
    assert_true(r.has_start_used && r.has_goal_used);
    assert_int_equal(r.start_used.x, want.x);
    assert_int_equal(r.start_used.y, want.y);
    assert_int_equal(r.goal_used.x, want_goal.x);
    assert_int_equal(r.goal_used.y, want_goal.y);
    t_check_path(&g, &u1, &r, want, want_goal);
    pdc_path_result_free(&r);

    /* Unit 2 at (6,9) would cover the band's top row: snapped to where a
     * 2x2 square fits. */
    pdi_rules u2 = {.unit = 2};
    pdc_xy want2;
    assert_true(t_nearest(&g, &u2, NULL, (pdc_xy){6, 10}, &want2) >= 1);
    req = t_req(6, 10, 20, 2);
    req.unit_size = 2;
    req.snap = 1;
    assert_int_equal(t_path(c, &req, &r), PDC_PARTIAL);
    assert_true(r.has_start_used);
    assert_int_equal(r.start_used.x, want2.x);
    assert_int_equal(r.start_used.y, want2.y);
    t_check_path(&g, &u2, &r, want2, (pdc_xy){20, 2});
    pdc_path_result_free(&r);

    /* Snap never moves off an avoid cell. */
    pdc_xy avoid = {3, 3};
    req = t_req(3, 3, 20, 13);
    req.snap = 1;
    req.avoid = &avoid;
    req.avoid_count = 1;
    assert_int_equal(t_path(c, &req, &r), PDC_START_BLOCKED);
    pdc_path_result_free(&r);

    pdc_close(c);
    pdi_grid_free(&g);
}

/* The goal inside the sealed room, under EXACT, NEAREST and LINE. */
static void t_goal_modes(pdc_conn *c, const pdi_grid *g, uint32_t unit, pdc_xy s, pdc_xy goal)
{
    pdi_rules rules = {.unit = unit};
    static double dist[PDI_ORACLE_MAX_CELLS];
    assert_int_equal(pdi_rules_dijkstra_all(g, &rules, s.x, s.y, dist), 0);
    assert_true(pdi_rules_open(g, &rules, goal.x, goal.y));
    assert_true(dist[(size_t)goal.y * (size_t)g->width + (size_t)goal.x] == INFINITY);
    pdc_path_result r;

    pdc_path_req req = t_req(s.x, s.y, goal.x, goal.y);
    req.unit_size = unit;
    assert_int_equal(t_path(c, &req, &r), PDC_NO_PATH);
    assert_int_equal(r.expansions, 0);
    assert_int_equal(r.count, 0);
    pdc_path_result_free(&r);

    pdc_xy nearest;
    assert_true(t_nearest(g, &rules, dist, goal, &nearest) >= 1);
    req.goal_mode = PDC_GOAL_NEAREST;
    assert_int_equal(t_path(c, &req, &r), PDC_PARTIAL);
    assert_true(r.has_goal_used);
    assert_false(r.has_start_used);
    if (r.goal_used.x != nearest.x || r.goal_used.y != nearest.y)
        fail_msg("unit %u NEAREST: goal_used (%d,%d), brute force (%d,%d)", unit, r.goal_used.x, r.goal_used.y,
                 nearest.x, nearest.y);
    t_check_path(g, &rules, &r, s, nearest);
    pdc_path_result_free(&r);

    /* LINE: the first reachable cell walking from the goal to the start. */
    pdc_xy line[256];
    size_t n = pdi_supercover(goal, s, line, 256);
    assert_true(n <= 256);
    size_t first = 0;
    while (first < n && !(pdi_rules_open(g, &rules, line[first].x, line[first].y) &&
                          dist[(size_t)line[first].y * (size_t)g->width + (size_t)line[first].x] < INFINITY))
        first++;
    assert_true(first < n);
    req.goal_mode = PDC_GOAL_LINE;
    assert_int_equal(t_path(c, &req, &r), PDC_PARTIAL);
    assert_true(r.has_goal_used);
    if (r.goal_used.x != line[first].x || r.goal_used.y != line[first].y)
        fail_msg("unit %u LINE: goal_used (%d,%d), brute force (%d,%d) (cell %zu of the line)", unit,
                 r.goal_used.x, r.goal_used.y, line[first].x, line[first].y, first);
    t_check_path(g, &rules, &r, s, line[first]);
    pdc_path_result_free(&r);
}

static void test_goal_modes_sealed_room(void **state)
{
    pdi_daemon *d = *state;
    pdi_grid g;
    assert_int_equal(pdi_grid_load_ascii(&g, T_MAP), 0);
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    t_goal_modes(c, &g, 1, (pdc_xy){2, 2}, (pdc_xy){14, 5});
    t_goal_modes(c, &g, 1, (pdc_xy){20, 13}, (pdc_xy){12, 4});
    t_goal_modes(c, &g, 2, (pdc_xy){2, 2}, (pdc_xy){13, 4});

    /* A reachable goal is answered in full, whatever the mode. */
    pdc_path_req req = t_req(2, 2, 20, 13);
    req.goal_mode = PDC_GOAL_NEAREST;
    pdc_path_result r;
    assert_int_equal(t_path(c, &req, &r), PDC_OK);
    assert_false(r.has_goal_used);
    pdi_rules u1 = {.unit = 1};
    t_check_path(&g, &u1, &r, (pdc_xy){2, 2}, (pdc_xy){20, 13});
    pdc_path_result_free(&r);
    pdc_close(c);
    pdi_grid_free(&g);
}

/* An expansion budget: BUDGET_EXCEEDED, or with partial_on_cutoff the path
 * to the best node so far, which must itself be optimal (A* has settled
 * every node it expanded). */
static void test_budget_cut_partial(void **state)
{
    pdi_daemon *d = *state;
    pdi_grid g;
    assert_int_equal(pdi_grid_load_ascii(&g, T_MAP), 0);
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    pdi_rules u1 = {.unit = 1};
    pdc_path_result r;

    pdc_path_req req = t_req(1, 1, 22, 14);
    req.max_expansions = T_SMALL_BUDGET;
    assert_int_equal(t_path(c, &req, &r), PDC_BUDGET_EXCEEDED);
    assert_int_equal(r.count, 0);
    pdc_path_result_free(&r);

    req.partial_on_cutoff = 1;
    assert_int_equal(t_path(c, &req, &r), PDC_PARTIAL);
    assert_int_equal(r.cutoff, PDC_BUDGET_EXCEEDED);
    assert_true(r.has_goal_used);
    assert_false(r.has_start_used);
    assert_true(r.expansions <= T_SMALL_BUDGET);
    assert_true(r.count >= 2);
    assert_int_equal(r.goal_used.x, r.waypoints[r.count - 1].x);
    assert_int_equal(r.goal_used.y, r.waypoints[r.count - 1].y);
    t_check_path(&g, &u1, &r, (pdc_xy){1, 1}, r.goal_used);
    /* It made progress toward the goal. */
    assert_true(hypot(22 - r.goal_used.x, 14 - r.goal_used.y) < hypot(22 - 1, 14 - 1));
    pdc_path_result_free(&r);

    /* Enough budget: the whole path, no cut-off reported. */
    req.max_expansions = 100000;
    assert_int_equal(t_path(c, &req, &r), PDC_OK);
    assert_int_equal(r.cutoff, PDC_OK);
    assert_false(r.has_goal_used);
    t_check_path(&g, &u1, &r, (pdc_xy){1, 1}, (pdc_xy){22, 14});
    pdc_path_result_free(&r);
    pdc_close(c);
    pdi_grid_free(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_snap_blocked_start_and_goal),
        cmocka_unit_test(test_goal_modes_sealed_room),
        cmocka_unit_test(test_budget_cut_partial),
    };
    return cmocka_run_group_tests(tests, setup, pdi_fixture_stop);
}
