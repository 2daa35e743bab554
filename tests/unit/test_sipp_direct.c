/*
 * test_sipp_direct.c - ReservePath's fast path (pd_sipp_direct.h) against
 * SIPP alone (pd_sipp_params.sipp_only), and jump point search in
 * milliseconds (pd_search_jps_weighted) against a Dijkstra of its own.
 *
 * The fast path claims that the static shortest path, when the table
 * leaves it free, is an optimal plan. So on random grids with random
 * reservations made by earlier agents, every request is planned both ways
 * on the same table and must get the same status and the same objective:
 * the arrival at the goal (OK), or for PARTIAL the handover's arrival plus
 * the exact static time from there (SIPP's objective), computed here by a
 * Dijkstra in the planner's millisecond durations. The fast path's plan is
 * then reserved, which pd_reserve_replace refuses on any overlap with
 * another agent (it checks every cell), so each answer is also checked
 * legal against the table. The runs must see the fast path answer and
 * decline (a conflict) many times each, or they proved nothing.
 *
 * SIPP's exact static times by probes (static shortest paths) are compared
 * with its reverse search alone the same way.
 *
 * Goal sets and ranges (SIPP alone: the fast path declines them) are
 * compared with the best plan to any single cell the set accepts.
 *
 * Hand-made: a corridor crossed by another agent's plan makes the fast
 * path decline and SIPP wait; a goal another agent parks on later makes it
 * decline for PARK but not for VANISH.
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

#include "core_check.h"
#include "pd_clearance.h"
#include "pd_jps.h"
#include "pd_reserve.h"
#include "pd_sipp.h"
#include "test_rng.h"

#define FOREVER PD_RESERVE_FOREVER

/* The planner's step duration (pd_sipp.h): ceil(cost * 1000 / speed), at
 * least 1 ms. Written out again here on purpose: the test's own arithmetic. */
static int64_t step_ms(int diagonal, double speed)
{
    const double cost = diagonal ? sqrt(2.0) : 1.0;
    const double ms = ceil(cost * 1000.0 / speed - 1e-9);
    return ms < 1.0 ? 1 : (int64_t)ms;
}

/* Exact static times (ms) from every cell to `goal` on unit grid g (no
 * corner cutting, 8-connected), by a plain O(n^2) Dijkstra: INT64_MAX where
 * the goal cannot be reached. */
static int64_t *static_times(const pd_grid *g, pd_point goal, double speed)
{
    const int32_t w = g->width, h = g->height, n = w * h;
    int64_t *d = malloc((size_t)n * sizeof *d);
    char *done = calloc((size_t)n, 1);
    assert_non_null(d);
    assert_non_null(done);
    for (int32_t i = 0; i < n; i++)
        d[i] = INT64_MAX;
    d[goal.y * w + goal.x] = 0;
    for (;;) {
        int32_t best = -1;
        for (int32_t i = 0; i < n; i++)
            if (!done[i] && d[i] != INT64_MAX && (best < 0 || d[i] < d[best]))
                best = i;
        if (best < 0)
            break;
        done[best] = 1;
        const int32_t bx = best % w, by = best / w;
        for (int dy = -1; dy <= 1; dy++)
            for (int dx = -1; dx <= 1; dx++) {
                const int32_t qx = bx + dx, qy = by + dy;
                if ((!dx && !dy) || qx < 0 || qy < 0 || qx >= w || qy >= h)
                    continue;
                if (pd_grid_get(g, qx, qy) == PD_CELL_BLOCKED)
                    continue;
                if (dx && dy && (pd_grid_get(g, bx + dx, by) == PD_CELL_BLOCKED ||
                                 pd_grid_get(g, bx, by + dy) == PD_CELL_BLOCKED))
                    continue;
                /* Moves are symmetric: q -> best costs the step into best,
                 * and every cell costs 1 here. */
                const int64_t nd = d[best] + step_ms(dx && dy, speed);
                if (nd < d[qy * w + qx])
                    d[qy * w + qx] = nd;
            }
    }
    free(done);
    return d;
}

typedef struct world {
    pd_grid *g;
    pd_clearance *c;
    pd_grid *unit[3];
} world;

static void world_random(world *wd, uint64_t *r, int32_t w, int32_t h, int wall_percent)
{
    wd->g = core_open_grid(w, h);
    for (int32_t y = 0; y < h; y++)
        for (int32_t x = 0; x < w; x++)
            if ((int)rng_below(r, 100) < wall_percent)
                pd_grid_set(wd->g, x, y, PD_CELL_BLOCKED);
    wd->c = pd_clearance_build(wd->g);
    assert_non_null(wd->c);
    for (uint32_t k = 1; k <= 2; k++) {
        wd->unit[k] = pd_unit_grid_build(wd->g, wd->c, k);
        assert_non_null(wd->unit[k]);
    }
}

static void world_free(world *wd)
{
    for (uint32_t k = 1; k <= 2; k++)
        pd_grid_destroy(wd->unit[k]);
    pd_clearance_destroy(wd->c);
    pd_grid_destroy(wd->g);
}

static pd_point random_open(const pd_grid *g, uint64_t *r)
{
    for (;;) {
        pd_point p = { (int32_t)rng_below(r, g->width), (int32_t)rng_below(r, g->height) };
        if (pd_grid_get(g, p.x, p.y) != PD_CELL_BLOCKED)
            return p;
    }
}

/* SIPP's objective for an answer: arrival at the goal, or for PARTIAL the
 * handover's hold start plus the static rest. */
static int64_t objective(pd_status st, const pd_sipp_result *res, const int64_t *times, int32_t w, int64_t t_end)
{
    const pd_waypoint *last = &res->waypoints[res->n_waypoints - 1];
    if (st == PD_OK)
        return last->t_arrive_ms;
    const int64_t from = last->t_arrive_ms > t_end ? last->t_arrive_ms : t_end;
    const int64_t rest = times[last->y * w + last->x];
    assert_true(rest != INT64_MAX);
    return from + rest;
}

/* Random grids, random agents planned one after another on one table. */
static void test_fast_path_matches_sipp(void **state)
{
    (void)state;
    /* The fast speeds round a diagonal far from sqrt(2) straight steps
     * (250 cells/s: 4 and 6 ms, 333: 4 and 5), where the octile metric's
     * shortest path is often not the shortest in milliseconds. */
    static const double speeds[] = { 1.0, 1.5, 2.3, 3.0, 7.0, 13.0, 250.0, 333.0 };
    pd_sipp_ctx *ctx = pd_sipp_ctx_create();
    assert_non_null(ctx);
    unsigned direct = 0, declined = 0, compared = 0;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        uint64_t r = seed * 7919u;
        world wd;
        world_random(&wd, &r, 10 + (int32_t)rng_below(&r, 12), 10 + (int32_t)rng_below(&r, 12),
                     (int)rng_below(&r, 30));
        pd_reserve *t = pd_reserve_create(NULL);
        assert_non_null(t);
        int64_t now = 0;
        for (int q = 0; q < 60; q++) {
            const uint32_t unit = rng_below(&r, 5) == 0 ? 2 : 1;
            const pd_grid *ug = wd.unit[unit];
            pd_sipp_params p = { .agent = 1 + rng_below(&r, 12),
                                 .unit = unit,
                                 .start = random_open(ug, &r),
                                 .goal = random_open(ug, &r),
                                 .t0_ms = now,
                                 .speed = speeds[rng_below(&r, 8)],
                                 .window_ms = rng_below(&r, 3) == 0 ? 0 : 1000 + 500 * (int64_t)rng_below(&r, 8),
                                 .hold_ms = rng_below(&r, 3) == 0 ? 1500 : 0,
                                 .at_goal = rng_below(&r, 4) == 0 ? PD_AT_GOAL_VANISH : PD_AT_GOAL_PARK,
                                 .max_expansions = 200000 };
            now += (int64_t)rng_below(&r, 300);
            pd_sipp_result fast, slow;
            const pd_status fs = pd_sipp_plan(ctx, t, ug, &p, &fast);
            /* Copy the fast answer before the context plans again. */
            pd_waypoint *fw = NULL;
            if (fs == PD_OK || fs == PD_PARTIAL) {
                fw = malloc(fast.n_waypoints * sizeof *fw);
                assert_non_null(fw);
                memcpy(fw, fast.waypoints, fast.n_waypoints * sizeof *fw);
            }
            p.sipp_only = 1;
            const pd_status ss = pd_sipp_plan(ctx, t, ug, &p, &slow);
            assert_false(slow.direct);
            if (ss == PD_BUDGET_EXCEEDED) {
                free(fw);
                continue; /* a window of 0 on a crowded table may search long */
            }
            if (fs != ss)
                fail_msg("seed %llu query %d: fast path %s, SIPP %s", (unsigned long long)seed, q,
                         pd_status_name(fs), pd_status_name(ss));
            if (fs == PD_OK || fs == PD_PARTIAL) {
                int64_t *times = static_times(ug, p.goal, p.speed);
                const int64_t t_end = p.window_ms ? p.t0_ms + p.window_ms : FOREVER;
                const int64_t want = objective(ss, &slow, times, ug->width, t_end);
                pd_sipp_result fr = fast;
                fr.waypoints = fw;
                const int64_t got = objective(fs, &fr, times, ug->width, t_end);
                if (got != want)
                    fail_msg("seed %llu query %d (%s): objective %lld by the fast path (direct %d), %lld by SIPP",
                             (unsigned long long)seed, q, pd_status_name(fs), (long long)got, fast.direct,
                             (long long)want);
                assert_int_equal(fast.reserved_until_ms, fw[fast.n_waypoints - 1].t_leave_ms);
                if (fast.direct) {
                    direct++;
                    /* A direct plan never waits, and is the static time long. */
                    for (size_t i = 0; i + 1 < fast.n_waypoints; i++)
                        assert_int_equal(fw[i].t_leave_ms, fw[i].t_arrive_ms);
                    if (fs == PD_OK)
                        assert_int_equal(fw[fast.n_waypoints - 1].t_arrive_ms - p.t0_ms,
                                         times[p.start.y * ug->width + p.start.x]);
                } else {
                    declined++;
                }
                compared++;
                free(times);
                /* Reserve the fast answer: the table refuses any overlap. */
                pd_reserve_refusal why;
                const pd_status rs = pd_reserve_replace(t, p.agent, p.unit, p.t0_ms, fw, fast.n_waypoints, &why);
                if (rs != PD_OK)
                    fail_msg("seed %llu query %d: the table refused the plan: %s (agent %llu)",
                             (unsigned long long)seed, q, pd_status_name(rs), (unsigned long long)why.agent);
            }
            free(fw);
        }
        pd_reserve_destroy(t);
        world_free(&wd);
    }
    print_message("compared %u plans: %u by the fast path, %u by SIPP after it declined\n", compared, direct,
                  declined);
    assert_true(direct >= 200);
    assert_true(declined >= 50);
    pd_sipp_ctx_destroy(ctx);
}

/* Probes (pd_sipp.h: exact static times from static shortest paths by jump
 * point search, seeded with the fast path's declined path, and the bound
 * of the expanded state's time less the step) against the reverse search
 * alone (reverse_only): on random grids with crowded random tables, every
 * request gets the same status and objective both ways, with the fast path
 * before SIPP (seeded probes) and with SIPP alone (unseeded). Many plans
 * must have been answered by probes, or this compared nothing. A fifth of
 * the requests are 4-connected (compared by status and SIPP's own ranking,
 * the test's Dijkstra being 8-connected), and 5,000 cells/s rounds both
 * steps to 1 ms, where jump point search does not apply to 8-connected
 * moves and the reverse search answers alone. */
static void test_probes_match_reverse_search(void **state)
{
    (void)state;
    static const double speeds[] = { 1.0, 1.5, 2.3, 3.0, 7.0, 13.0, 250.0, 333.0, 5000.0 };
    pd_sipp_ctx *ctx = pd_sipp_ctx_create();
    assert_non_null(ctx);
    unsigned compared = 0, probed = 0, several = 0;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        uint64_t r = seed * 104729u;
        world wd;
        world_random(&wd, &r, 12 + (int32_t)rng_below(&r, 14), 12 + (int32_t)rng_below(&r, 14),
                     (int)rng_below(&r, 30));
        pd_reserve *t = pd_reserve_create(NULL);
        assert_non_null(t);
        int64_t now = 0;
        for (int q = 0; q < 60; q++) {
            const uint32_t unit = rng_below(&r, 5) == 0 ? 2 : 1;
            const pd_grid *ug = wd.unit[unit];
            pd_sipp_params p = { .agent = 1 + rng_below(&r, 16),
                                 .unit = unit,
                                 .start = random_open(ug, &r),
                                 .goal = random_open(ug, &r),
                                 .t0_ms = now,
                                 .speed = speeds[rng_below(&r, 9)],
                                 .window_ms = rng_below(&r, 4) == 0 ? 0 : 1000 + 500 * (int64_t)rng_below(&r, 8),
                                 .hold_ms = rng_below(&r, 3) == 0 ? 1500 : 0,
                                 .at_goal = rng_below(&r, 4) == 0 ? PD_AT_GOAL_VANISH : PD_AT_GOAL_PARK,
                                 .connectivity = rng_below(&r, 5) == 0 ? PD_CONNECT_4 : PD_CONNECT_8,
                                 .max_expansions = 200000 };
            const int four = p.connectivity == PD_CONNECT_4;
            now += (int64_t)rng_below(&r, 200);
            pd_sipp_result res;
            int64_t obj[3] = { 0, 0, 0 }, eta[3] = { 0, 0, 0 };
            pd_status st[3];
            pd_waypoint *keep = NULL;
            size_t n_keep = 0;
            int64_t *times = static_times(ug, p.goal, p.speed);
            const int64_t t_end = p.window_ms ? p.t0_ms + p.window_ms : FOREVER;
            /* 0: as served (fast path, then SIPP with seeded probes);
             * 1: SIPP alone with probes; 2: SIPP with the reverse search. */
            for (int way = 0; way < 3; way++) {
                p.sipp_only = way > 0;
                p.reverse_only = way == 2;
                st[way] = pd_sipp_plan(ctx, t, ug, &p, &res);
                if (way == 2 || (p.speed > 1000.0 && !four))
                    assert_int_equal(res.probes, 0);
                if (way == 1 && res.probes > 0) {
                    probed++;
                    several += res.probes > 1;
                }
                if (st[way] == PD_OK || st[way] == PD_PARTIAL) {
                    obj[way] = four ? 0 : objective(st[way], &res, times, ug->width, t_end);
                    eta[way] = res.eta_ms;
                    if (way == 0) {
                        n_keep = res.n_waypoints;
                        keep = malloc(n_keep * sizeof *keep);
                        assert_non_null(keep);
                        memcpy(keep, res.waypoints, n_keep * sizeof *keep);
                    }
                }
            }
            free(times);
            if (st[2] == PD_BUDGET_EXCEEDED || st[1] == PD_BUDGET_EXCEEDED) {
                free(keep);
                continue; /* the two count a budget differently (pd_sipp.h) */
            }
            for (int way = 0; way < 2; way++) {
                if (st[way] != st[2])
                    fail_msg("seed %llu query %d: %s with probes (%s), %s by the reverse search",
                             (unsigned long long)seed, q, pd_status_name(st[way]),
                             way ? "SIPP alone" : "fast path first", pd_status_name(st[2]));
                if (obj[way] != obj[2])
                    fail_msg("seed %llu query %d (%s): objective %lld with probes (%s), %lld by the reverse search",
                             (unsigned long long)seed, q, pd_status_name(st[2]), (long long)obj[way],
                             way ? "SIPP alone" : "fast path first", (long long)obj[2]);
            }
            /* SIPP ranks its plan by the same number both ways. */
            assert_int_equal(eta[1], eta[2]);
            compared++;
            if (keep) {
                pd_reserve_refusal why;
                const pd_status rs = pd_reserve_replace(t, p.agent, p.unit, p.t0_ms, keep, n_keep, &why);
                if (rs != PD_OK)
                    fail_msg("seed %llu query %d: the table refused the plan: %s", (unsigned long long)seed, q,
                             pd_status_name(rs));
            }
            free(keep);
        }
        pd_reserve_destroy(t);
        world_free(&wd);
    }
    print_message("compared %u requests three ways: %u answered by SIPP with probes, %u with more than one\n",
                  compared, probed, several);
    assert_true(probed >= 500);
    assert_true(several >= 100);
    pd_sipp_ctx_destroy(ctx);
}

/* An agent crossing the corridor when the fast path's agent would pass:
 * the fast path declines and SIPP's plan waits, arriving later than the
 * static time; without the crossing the fast path answers. */
static void test_fast_path_declines_on_conflict(void **state)
{
    (void)state;
    world wd = { 0 };
    wd.g = core_grid("#####.####\n"
                     "..........\n"
                     "#####.####\n");
    wd.c = pd_clearance_build(wd.g);
    for (uint32_t k = 1; k <= 2; k++)
        wd.unit[k] = pd_unit_grid_build(wd.g, wd.c, k);
    const pd_grid *ug = wd.unit[1];
    pd_reserve *t = pd_reserve_create(NULL);
    pd_sipp_ctx *ctx = pd_sipp_ctx_create();
    pd_sipp_params p = { .agent = 1, .unit = 1, .start = { 0, 1 }, .goal = { 9, 1 }, .speed = 1.0 };
    pd_sipp_result res;
    assert_int_equal(pd_sipp_plan(ctx, t, ug, &p, &res), PD_OK);
    assert_true(res.direct);
    assert_int_equal(res.waypoints[res.n_waypoints - 1].t_arrive_ms, 9000);
    assert_int_equal(res.reserved_until_ms, FOREVER);
    /* Agent 2 goes down the side passage through (5, 1) at 4.5-6.5 s,
     * then vanishes. */
    const pd_waypoint cross[] = { { 5, 0, 4500, 4500 }, { 5, 1, 5500, 5500 }, { 5, 2, 6500, 6500 } };
    pd_reserve_refusal why;
    assert_int_equal(pd_reserve_replace(t, 2, 1, 4500, cross, 3, &why), PD_OK);
    assert_int_equal(pd_sipp_plan(ctx, t, ug, &p, &res), PD_OK);
    assert_false(res.direct);
    assert_true(res.waypoints[res.n_waypoints - 1].t_arrive_ms > 9000);
    assert_int_equal(pd_reserve_replace(t, 1, 1, 0, res.waypoints, res.n_waypoints, &why), PD_OK);
    /* Starting after the crossing, the static path is free again. */
    p.agent = 3;
    p.start = (pd_point){ 0, 1 };
    p.goal = (pd_point){ 3, 1 };
    p.t0_ms = 10000;
    assert_int_equal(pd_sipp_plan(ctx, t, ug, &p, &res), PD_OK);
    assert_true(res.direct);
    /* A goal another agent holds later: PARK declines (SIPP then finds no
     * way to park there for good within the window, and holds short of
     * it), VANISH takes the direct plan. */
    const pd_waypoint park[] = { { 3, 1, 20000, FOREVER } };
    assert_int_equal(pd_reserve_replace(t, 4, 1, 20000, park, 1, &why), PD_OK);
    p.window_ms = 4000;
    pd_status st = pd_sipp_plan(ctx, t, ug, &p, &res);
    assert_false(res.direct);
    assert_true(st == PD_PARTIAL || st == PD_NO_PATH);
    p.at_goal = PD_AT_GOAL_VANISH;
    assert_int_equal(pd_sipp_plan(ctx, t, ug, &p, &res), PD_OK);
    assert_true(res.direct);
    assert_int_equal(res.reserved_until_ms, 13000);
    pd_sipp_ctx_destroy(ctx);
    pd_reserve_destroy(t);
    world_free(&wd);
}

/* VANISH at a goal another agent takes at the very moment of arrival: the
 * agent holds nothing there, but SIPP arrives only inside a safe interval,
 * so the fast path declines too (it answered 3,000 ms before the fix). */
static void test_fast_path_vanish_needs_a_free_arrival(void **state)
{
    (void)state;
    world wd = { 0 };
    wd.g = core_open_grid(5, 3);
    wd.c = pd_clearance_build(wd.g);
    for (uint32_t k = 1; k <= 2; k++)
        wd.unit[k] = pd_unit_grid_build(wd.g, wd.c, k);
    pd_reserve *t = pd_reserve_create(NULL);
    pd_sipp_ctx *ctx = pd_sipp_ctx_create();
    /* Agent 5 waits at (3, 0) until 3,000, then crosses (3, 1) to (3, 2). */
    const pd_waypoint cross[] = { { 3, 0, 0, 3000 }, { 3, 1, 4000, 4000 }, { 3, 2, 5000, 5000 } };
    pd_reserve_refusal why;
    assert_int_equal(pd_reserve_replace(t, 5, 1, 0, cross, 3, &why), PD_OK);
    pd_sipp_params p = { .agent = 1, .unit = 1, .start = { 0, 1 }, .goal = { 3, 1 }, .speed = 1.0,
                         .at_goal = PD_AT_GOAL_VANISH };
    pd_sipp_result fast, slow;
    assert_int_equal(pd_sipp_plan(ctx, t, wd.unit[1], &p, &fast), PD_OK);
    assert_false(fast.direct);
    const int64_t got = fast.waypoints[fast.n_waypoints - 1].t_arrive_ms;
    assert_true(got > 3000);
    p.sipp_only = 1;
    assert_int_equal(pd_sipp_plan(ctx, t, wd.unit[1], &p, &slow), PD_OK);
    assert_int_equal(slow.waypoints[slow.n_waypoints - 1].t_arrive_ms, got);
    pd_sipp_ctx_destroy(ctx);
    pd_reserve_destroy(t);
    world_free(&wd);
}

/* A PARTIAL answer from the fast path ends at the first cell at or past
 * the window's end, held for good (or for hold_ms), as SIPP's does. */
static void test_fast_path_window(void **state)
{
    (void)state;
    world wd = { 0 };
    wd.g = core_open_grid(30, 3);
    wd.c = pd_clearance_build(wd.g);
    for (uint32_t k = 1; k <= 2; k++)
        wd.unit[k] = pd_unit_grid_build(wd.g, wd.c, k);
    pd_reserve *t = pd_reserve_create(NULL);
    pd_sipp_ctx *ctx = pd_sipp_ctx_create();
    pd_sipp_params p = { .agent = 1, .unit = 1, .start = { 0, 1 }, .goal = { 29, 1 }, .t0_ms = 100,
                         .speed = 2.0, .window_ms = 2600 };
    pd_sipp_result fast, slow;
    assert_int_equal(pd_sipp_plan(ctx, t, wd.unit[1], &p, &fast), PD_PARTIAL);
    assert_true(fast.direct);
    /* 500 ms a step: the first arrival at or past 2,700 is cell 6 at 3,100. */
    assert_int_equal(fast.n_waypoints, 7);
    assert_int_equal(fast.waypoints[6].x, 6);
    assert_int_equal(fast.waypoints[6].t_arrive_ms, 3100);
    assert_int_equal(fast.reserved_until_ms, FOREVER);
    const size_t n = fast.n_waypoints;
    p.sipp_only = 1;
    assert_int_equal(pd_sipp_plan(ctx, t, wd.unit[1], &p, &slow), PD_PARTIAL);
    assert_int_equal(slow.n_waypoints, n);
    assert_int_equal(slow.waypoints[n - 1].t_arrive_ms, 3100);
    p.sipp_only = 0;
    p.hold_ms = 1000;
    assert_int_equal(pd_sipp_plan(ctx, t, wd.unit[1], &p, &fast), PD_PARTIAL);
    assert_int_equal(fast.reserved_until_ms, 4100);
    pd_sipp_ctx_destroy(ctx);
    pd_reserve_destroy(t);
    world_free(&wd);
}

/* Jump point search in other step costs finds the shortest path in them:
 * the cost of a Dijkstra in the same costs, on random grids and speeds;
 * outside straight < diagonal < 2 x straight it refuses. */
static void test_jps_weighted(void **state)
{
    (void)state;
    pd_jps_ctx *jc = pd_jps_ctx_create();
    assert_non_null(jc);
    static const double speeds[] = { 0.7, 1.0, 2.3, 3.0, 7.0, 13.0, 333.0 };
    unsigned found = 0;
    for (uint64_t seed = 1; seed <= 60; seed++) {
        uint64_t r = seed * 104729u;
        pd_grid *g = core_open_grid(8 + (int32_t)rng_below(&r, 30), 8 + (int32_t)rng_below(&r, 30));
        const int walls = (int)rng_below(&r, 40);
        for (int32_t y = 0; y < g->height; y++)
            for (int32_t x = 0; x < g->width; x++)
                if ((int)rng_below(&r, 100) < walls)
                    pd_grid_set(g, x, y, PD_CELL_BLOCKED);
        for (int q = 0; q < 8; q++) {
            const double speed = speeds[rng_below(&r, 7)];
            const pd_point a = random_open(g, &r), b = random_open(g, &r);
            int64_t *times = static_times(g, b, speed);
            const pd_search_params sp = { .start = a, .goal = b, .connectivity = PD_CONNECT_8 };
            pd_search_metrics m;
            pd_point path[2048];
            const pd_status st = pd_search_jps_weighted(jc, g, &sp, (double)step_ms(0, speed),
                                                        (double)step_ms(1, speed), path, 2048, &m);
            const int64_t want = times[a.y * g->width + a.x];
            if (want == INT64_MAX) {
                assert_int_equal(st, PD_NO_PATH);
            } else {
                assert_int_equal(st, PD_OK);
                assert_true(fabs(m.cost - (double)want) < 1e-6);
                /* The path is legal and its steps sum to that cost. */
                core_check_path(g, PD_CONNECT_8, path, m.path_len, a, b);
                int64_t sum = 0;
                for (size_t i = 1; i < m.path_len; i++)
                    sum += step_ms(path[i].x != path[i - 1].x && path[i].y != path[i - 1].y, speed);
                assert_int_equal(sum, want);
                found++;
            }
            free(times);
        }
        pd_grid_destroy(g);
    }
    assert_true(found >= 200);
    pd_grid *g = core_open_grid(5, 5);
    const pd_search_params sp = { .start = { 0, 0 }, .goal = { 4, 4 }, .connectivity = PD_CONNECT_8 };
    pd_search_metrics m;
    assert_int_equal(pd_search_jps_weighted(jc, g, &sp, 1.0, 1.0, NULL, 0, &m), PD_INVALID_ARGUMENT);
    assert_int_equal(pd_search_jps_weighted(jc, g, &sp, 1.0, 2.0, NULL, 0, &m), PD_INVALID_ARGUMENT);
    assert_int_equal(pd_search_jps_weighted(jc, g, &sp, 0.0, 1.5, NULL, 0, &m), PD_INVALID_ARGUMENT);
    assert_int_equal(pd_search_jps_weighted(jc, g, &sp, 2.0, 3.0, NULL, 0, &m), PD_OK);
    assert_true(fabs(m.cost - 12.0) < 1e-9);
    pd_grid_destroy(g);
    pd_jps_ctx_destroy(jc);
}

/* The open cells of g that the set accepts, into out (room for every cell). */
static size_t accepted_cells(const pd_targets *set, const pd_grid *g, pd_point *out)
{
    size_t n = 0;
    for (int32_t y = 0; y < g->height; y++)
        for (int32_t x = 0; x < g->width; x++) {
            uint32_t which;
            if (pd_grid_get(g, x, y) != PD_CELL_BLOCKED && pd_targets_accepts(set, g, (pd_point){ x, y }, &which))
                out[n++] = (pd_point){ x, y };
        }
    return n;
}

/* Goal sets and ranges (pd_sipp_params.targets): on random grids and
 * tables, a set's plan must be as good as the best plan to any one cell
 * the set accepts, each planned alone on the same table (SIPP's optimum
 * per cell; the objective as above, with the static rest to that cell),
 * and end on an accepted cell. */
static void test_goal_sets_match_single_goals(void **state)
{
    (void)state;
    pd_sipp_ctx *ctx = pd_sipp_ctx_create();
    assert_non_null(ctx);
    unsigned compared = 0, sets_no_path = 0;
    for (uint64_t seed = 1; seed <= 25; seed++) {
        uint64_t r = seed * 15485863u;
        world wd;
        world_random(&wd, &r, 8 + (int32_t)rng_below(&r, 8), 8 + (int32_t)rng_below(&r, 8), (int)rng_below(&r, 25));
        const pd_grid *ug = wd.unit[1];
        pd_reserve *t = pd_reserve_create(NULL);
        assert_non_null(t);
        for (int q = 0; q < 30; q++) {
            pd_point goals[3];
            pd_targets set = { .goals = goals, .n_goals = 1 + (size_t)rng_below(&r, 3),
                               .range = rng_below(&r, 3) == 0 ? 1.5 : 0.0 };
            for (size_t i = 0; i < set.n_goals; i++)
                goals[i] = random_open(ug, &r);
            pd_sipp_params p = { .agent = 1 + rng_below(&r, 8), .unit = 1, .start = random_open(ug, &r),
                                 .t0_ms = 100 * q, .speed = 2.0,
                                 .window_ms = rng_below(&r, 2) ? 0 : 2500,
                                 .at_goal = rng_below(&r, 3) == 0 ? PD_AT_GOAL_VANISH : PD_AT_GOAL_PARK,
                                 .max_expansions = 500000, .targets = &set };
            const int64_t t_end = p.window_ms ? p.t0_ms + p.window_ms : FOREVER;
            pd_sipp_result res;
            const pd_status st = pd_sipp_plan(ctx, t, ug, &p, &res);
            assert_false(res.direct);
            if (st == PD_BUDGET_EXCEEDED || st == PD_START_BLOCKED)
                continue; /* a start another agent stands on: nothing to compare */
            int64_t got = INT64_MAX;
            size_t n_wp = 0;
            pd_waypoint *wp = NULL;
            if (st == PD_OK || st == PD_PARTIAL) {
                n_wp = res.n_waypoints;
                wp = malloc(n_wp * sizeof *wp);
                assert_non_null(wp);
                memcpy(wp, res.waypoints, n_wp * sizeof *wp);
                if (st == PD_OK) {
                    uint32_t which;
                    assert_true(pd_targets_accepts(&set, ug, (pd_point){ wp[n_wp - 1].x, wp[n_wp - 1].y }, &which));
                    got = wp[n_wp - 1].t_arrive_ms;
                }
            } else {
                assert_int_equal(st, PD_NO_PATH);
                sets_no_path++;
            }
            /* The best single cell the set accepts. */
            pd_point cells[16 * 16];
            const size_t n_cells = accepted_cells(&set, ug, cells);
            int64_t want = INT64_MAX;
            for (size_t i = 0; i < n_cells; i++) {
                pd_sipp_params one = p;
                one.targets = NULL;
                one.goal = cells[i];
                one.sipp_only = 1;
                pd_sipp_result o;
                const pd_status os = pd_sipp_plan(ctx, t, ug, &one, &o);
                if (os != PD_OK && os != PD_PARTIAL)
                    continue;
                int64_t *times = static_times(ug, one.goal, p.speed);
                const int64_t v = objective(os, &o, times, ug->width, t_end);
                free(times);
                if (v < want)
                    want = v;
            }
            if (st == PD_PARTIAL) {
                /* The set's objective: its hold start plus the static rest
                 * to the nearest accepted cell. */
                const pd_waypoint *last = &wp[n_wp - 1];
                int64_t rest = INT64_MAX;
                for (size_t i = 0; i < n_cells; i++) {
                    int64_t *times = static_times(ug, cells[i], p.speed);
                    if (times[last->y * ug->width + last->x] < rest)
                        rest = times[last->y * ug->width + last->x];
                    free(times);
                }
                got = (last->t_arrive_ms > t_end ? last->t_arrive_ms : t_end) + rest;
            }
            if (got != want)
                fail_msg("seed %llu query %d: the set's plan %s objective %lld, best single cell %lld",
                         (unsigned long long)seed, q, pd_status_name(st), (long long)got, (long long)want);
            if (wp) {
                pd_reserve_refusal why;
                assert_int_equal(pd_reserve_replace(t, p.agent, 1, p.t0_ms, wp, n_wp, &why), PD_OK);
                compared++;
            }
            free(wp);
        }
        pd_reserve_destroy(t);
        world_free(&wd);
    }
    print_message("goal sets: %u plans compared, %u NO_PATH\n", compared, sets_no_path);
    assert_true(compared >= 300);
    pd_sipp_ctx_destroy(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fast_path_matches_sipp),
        cmocka_unit_test(test_fast_path_declines_on_conflict),
        cmocka_unit_test(test_probes_match_reverse_search),
        cmocka_unit_test(test_fast_path_window),
        cmocka_unit_test(test_fast_path_vanish_needs_a_free_arrival),
        cmocka_unit_test(test_jps_weighted),
        cmocka_unit_test(test_goal_sets_match_single_goals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
