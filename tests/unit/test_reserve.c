/*
 * test_reserve.c - space-time reservations (issue 34): the table
 * (pd_reserve.h) on hand-made plans, and ReservePath's planner (pd_sipp.h)
 * on scenes built to need it.
 *
 * The table: insert, replace from t0, release, collect, expire, expiry on
 * the table's own "now" (pd_reserve_maintain), query, the cut of a blocked
 * rectangle and of a cell list (a twin table blocked cell by cell must stay
 * equal to one blocked by rectangle), and every limit refusing with the table unchanged
 * (a snapshot of all entries and counters compared before and after). After
 * every randomized step the two views of the table must agree: each cell's
 * spans are exactly the merged entries that cover it, and no two agents'
 * spans on a cell overlap.
 *
 * The planner: scenarios (head-on in a corridor with a side pocket, 20
 * agents through one door, a 2x2 unit crossing 1x1 units, an update that
 * cuts a plan, START_BLOCKED, PARTIAL with a short window, PARK against
 * VANISH), one agent on an empty table against pd_search_astar's cost, and
 * a randomized simulation: agents of units 1 and 2 with random speeds and
 * goals re-reserving on a shared clock while cells get blocked under them.
 *
 * Every answer with a plan is written to a JSON-lines file and replayed by
 * the independent checker, tests/agents/check_plans.py (it shares no code
 * with the planner): each scenario ends by running it, and fails on any
 * conflict, illegal move, move faster than cost/speed, or jump.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <cmocka.h>

#include "core_check.h"
#include "pd_clearance.h"
#include "pd_joint.h"
#include "pd_reserve.h"
#include "pd_sipp.h"
#include "pd_yield.h"

#ifndef PD_AGENTS_PYTHON
#define PD_AGENTS_PYTHON "/usr/bin/python3"
#endif

#define FOREVER PD_RESERVE_FOREVER
#define MAX_UNIT 3

/* ---- answers for the checker ---- */

typedef struct answers {
    FILE *f;
    char path[1024];
} answers;

static void answers_open(answers *a, const char *name, const pd_grid *g)
{
    char dir[900];
    snprintf(dir, sizeof dir, "%s/tests/reserve-answers", PD_BINARY_DIR);
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        fail_msg("cannot make %s", dir);
    snprintf(a->path, sizeof a->path, "%s/%s.jsonl", dir, name);
    a->f = fopen(a->path, "w");
    assert_non_null(a->f);
    fprintf(a->f, "{\"type\":\"grid\",\"width\":%d,\"height\":%d,\"cells\":[", g->width, g->height);
    for (int32_t y = 0; y < g->height; y++)
        for (int32_t x = 0; x < g->width; x++)
            fprintf(a->f, "%s%u", x || y ? "," : "", pd_grid_get(g, x, y));
    fprintf(a->f, "]}\n");
}

static void answers_plan(answers *a, uint64_t agent, uint32_t unit, double speed, int64_t t0,
                         const pd_waypoint *wp, size_t n)
{
    if (!a)
        return;
    fprintf(a->f, "{\"type\":\"plan\",\"agent\":%llu,\"unit\":%u,\"speed\":%.17g,\"t0\":%lld,\"waypoints\":[",
            (unsigned long long)agent, unit, speed, (long long)t0);
    for (size_t i = 0; i < n; i++) {
        fprintf(a->f, "%s[%d,%d,%lld,", i ? "," : "", wp[i].x, wp[i].y, (long long)wp[i].t_arrive_ms);
        if (wp[i].t_leave_ms == FOREVER)
            fprintf(a->f, "null]");
        else
            fprintf(a->f, "%lld]", (long long)wp[i].t_leave_ms);
    }
    fprintf(a->f, "]}\n");
}

static void answers_block(answers *a, int32_t x0, int32_t y0, int32_t x1, int32_t y1, int64_t t)
{
    fprintf(a->f, "{\"type\":\"block\",\"x0\":%d,\"y0\":%d,\"x1\":%d,\"y1\":%d,\"t\":%lld}\n", x0, y0, x1, y1,
            (long long)t);
}

static void answers_cut(answers *a, const char *kind, uint64_t agent, int64_t t)
{
    fprintf(a->f, "{\"type\":\"%s\",\"agent\":%llu,\"t\":%lld}\n", kind, (unsigned long long)agent, (long long)t);
}

/* Closes the file and runs the checker on it: every count must be zero. */
static void answers_check(answers *a)
{
    fclose(a->f);
    a->f = NULL;
    char cmd[2600];
    snprintf(cmd, sizeof cmd, "%s %s/tests/agents/check_plans.py %s", PD_AGENTS_PYTHON, PD_SOURCE_DIR, a->path);
    fflush(stdout);
    int rc = system(cmd);
    if (rc != 0)
        fail_msg("the checker found problems in %s (exit %d)", a->path, rc);
}

/* ---- scenes: a base grid and the unit grids the planner reads ---- */

typedef struct scene {
    pd_grid *g;
    pd_clearance *c;
    pd_grid *unit[MAX_UNIT + 1];
} scene;

static void scene_init(scene *s, pd_grid *g)
{
    memset(s, 0, sizeof *s);
    s->g = g;
    s->c = pd_clearance_build(g);
    assert_non_null(s->c);
    for (uint32_t k = 1; k <= MAX_UNIT; k++) {
        s->unit[k] = pd_unit_grid_build(g, s->c, k);
        assert_non_null(s->unit[k]);
    }
}

static void scene_free(scene *s)
{
    for (uint32_t k = 1; k <= MAX_UNIT; k++)
        pd_grid_destroy(s->unit[k]);
    pd_clearance_destroy(s->c);
    pd_grid_destroy(s->g);
}

/* The world changes: cells x0..x1 by y0..y1 become walls. */
static void scene_block(scene *s, int32_t x0, int32_t y0, int32_t x1, int32_t y1)
{
    for (int32_t y = y0; y <= y1; y++)
        for (int32_t x = x0; x <= x1; x++)
            pd_grid_set(s->g, x, y, PD_CELL_BLOCKED);
    pd_clearance_update(s->c, s->g, x0, y0, x1, y1);
    for (uint32_t k = 1; k <= MAX_UNIT; k++)
        pd_unit_grid_update(s->unit[k], s->g, s->c, k, x0, y0, x1, y1);
}

/* Exact static distances to a goal, for pd_sipp_params.heuristic (below). */
typedef struct dist_table dist_table;
static double dist_lookup(void *user, int32_t x, int32_t y);

typedef struct ask {
    uint64_t agent;
    uint32_t unit;
    pd_point from, to;
    int64_t t0;
    double speed;
    int64_t window;
    int64_t hold;
    pd_at_goal at_goal;
    dist_table *heuristic;  /* exact static distances to `to`, or NULL */
} ask;

/* ReservePath; answers with a plan go to the log (may be NULL). */
static pd_status reserve(scene *s, pd_reserve *t, pd_sipp_ctx *ctx, answers *log, const ask *q, pd_sipp_result *r)
{
    pd_sipp_params p = { .agent = q->agent,
                         .unit = q->unit ? q->unit : 1,
                         .start = q->from,
                         .goal = q->to,
                         .t0_ms = q->t0,
                         .speed = q->speed > 0 ? q->speed : 1.0,
                         .window_ms = q->window,
                         .hold_ms = q->hold,
                         .heuristic = q->heuristic ? dist_lookup : NULL,
                         .heuristic_user = q->heuristic,
                         .at_goal = q->at_goal };
    /* A unit the scene has no grid for is the planner's to refuse. */
    const pd_grid *ug = s->unit[p.unit <= MAX_UNIT ? p.unit : 1];
    pd_status st = pd_sipp_reserve(ctx, t, ug, &p, r);
    if (st == PD_OK || st == PD_PARTIAL) {
        assert_true(r->n_waypoints >= 1);
        assert_int_equal(r->waypoints[0].x, q->from.x);
        assert_int_equal(r->waypoints[0].y, q->from.y);
        assert_int_equal(r->waypoints[0].t_arrive_ms, q->t0);
        assert_int_equal(r->waypoints[r->n_waypoints - 1].t_leave_ms, r->reserved_until_ms);
        answers_plan(log, p.agent, p.unit, p.speed, p.t0_ms, r->waypoints, r->n_waypoints);
    }
    return st;
}

static void expect_status(pd_status got, pd_status want, const char *what)
{
    if (got != want)
        fail_msg("%s: %s, want %s", what, pd_status_name(got), pd_status_name(want));
}

/* ---- the table's two views agree ---- */

typedef struct span_want {
    uint64_t agent;
    int64_t t0, t1;
} span_want;

static int cmp_span_want(const void *a, const void *b)
{
    const span_want *x = a, *y = b;
    return x->t0 < y->t0 ? -1 : x->t0 > y->t0;
}

/* Every cell's spans are the merged entries over it; spans never overlap. */
static void check_table(const pd_reserve *t, int32_t w, int32_t h)
{
    size_t n = pd_reserve_query(t, 0, 0, w + MAX_UNIT, h + MAX_UNIT, INT64_MIN, INT64_MAX, NULL, 0);
    pd_reserve_entry *e = calloc(n ? n : 1, sizeof *e);
    span_want *want = calloc(n ? n : 1, sizeof *want);
    assert_non_null(e);
    assert_non_null(want);
    assert_int_equal(pd_reserve_query(t, 0, 0, w + MAX_UNIT, h + MAX_UNIT, INT64_MIN, INT64_MAX, e, n), n);
    pd_reserve_stats st;
    pd_reserve_get_stats(t, &st);
    assert_int_equal(st.entries, n);
    uint64_t spans = 0, cells = 0;
    for (int32_t y = 0; y < h + MAX_UNIT; y++)
        for (int32_t x = 0; x < w + MAX_UNIT; x++) {
            size_t m = 0;
            for (size_t i = 0; i < n; i++)
                if (x >= e[i].x && x < e[i].x + e[i].w && y >= e[i].y && y < e[i].y + e[i].h)
                    want[m++] = (span_want){ e[i].agent, e[i].t0_ms, e[i].t1_ms };
            qsort(want, m, sizeof *want, cmp_span_want);
            size_t k = 0;
            for (size_t i = 0; i < m; i++) {
                if (k > 0 && want[k - 1].agent == want[i].agent && want[k - 1].t1 == want[i].t0)
                    want[k - 1].t1 = want[i].t1;
                else
                    want[k++] = want[i];
            }
            size_t got_n;
            const pd_reserve_span *got = pd_reserve_cell(t, x, y, &got_n);
            if (got_n != k)
                fail_msg("cell (%d,%d): %zu spans, entries make %zu", x, y, got_n, k);
            for (size_t i = 0; i < k; i++) {
                if (pd_reserve_slot_agent(t, got[i].slot) != want[i].agent || got[i].t0 != want[i].t0 ||
                    got[i].t1 != want[i].t1)
                    fail_msg("cell (%d,%d) span %zu: agent %llu [%lld,%lld), entries say agent %llu [%lld,%lld)", x,
                             y, i, (unsigned long long)pd_reserve_slot_agent(t, got[i].slot),
                             (long long)got[i].t0, (long long)got[i].t1, (unsigned long long)want[i].agent,
                             (long long)want[i].t0, (long long)want[i].t1);
                if (i > 0 && got[i - 1].t1 > got[i].t0)
                    fail_msg("cell (%d,%d): spans %zu and %zu overlap", x, y, i - 1, i);
            }
            spans += k;
            cells += k > 0;
        }
    assert_int_equal(st.spans, spans);
    assert_int_equal(st.cells, cells);
    free(e);
    free(want);
}

/* All entries and counters: equal snapshots mean an unchanged table. */
typedef struct snapshot {
    pd_reserve_entry e[256];
    size_t n;
    pd_reserve_stats st;
} snapshot;

static void take(const pd_reserve *t, snapshot *s)
{
    memset(s, 0, sizeof *s);
    s->n = pd_reserve_query(t, 0, 0, 1000, 1000, INT64_MIN, INT64_MAX, s->e, 256);
    assert_true(s->n <= 256);
    pd_reserve_get_stats(t, &s->st);
    s->st.bytes = 0; /* capacities may grow in a refused preparation */
}

static void assert_unchanged(const pd_reserve *t, const snapshot *before)
{
    snapshot now;
    take(t, &now);
    assert_int_equal(now.n, before->n);
    assert_memory_equal(&now, before, sizeof now);
}

/* ---- the table on hand-made plans ---- */

static pd_waypoint wp(int32_t x, int32_t y, int64_t ta, int64_t tl)
{
    return (pd_waypoint){ x, y, ta, tl };
}

static void test_table_insert_and_query(void **state)
{
    (void)state;
    pd_reserve *t = pd_reserve_create(NULL);
    assert_non_null(t);
    /* Waits at (0,0) a second, moves east for a second, parks on (1,0). */
    const pd_waypoint plan[] = { wp(0, 0, 0, 1000), wp(1, 0, 2000, FOREVER) };
    assert_int_equal(pd_reserve_replace(t, 7, 1, 0, plan, 2, NULL), PD_OK);
    pd_reserve_entry e[8];
    assert_int_equal(pd_reserve_query(t, 0, 0, 9, 9, 0, FOREVER, e, 8), 3);
    assert_true(e[0].agent == 7 && e[0].x == 0 && e[0].w == 1 && e[0].t0_ms == 0 && e[0].t1_ms == 1000);
    assert_true(e[1].x == 0 && e[1].w == 2 && e[1].h == 1 && e[1].t0_ms == 1000 && e[1].t1_ms == 2000);
    assert_true(e[2].x == 1 && e[2].w == 1 && e[2].t0_ms == 2000 && e[2].t1_ms == FOREVER);
    /* Spans merge where one agent's holds touch: (0,0) is one span. */
    size_t n;
    const pd_reserve_span *s = pd_reserve_cell(t, 0, 0, &n);
    assert_int_equal(n, 1);
    assert_true(s[0].t0 == 0 && s[0].t1 == 2000);
    s = pd_reserve_cell(t, 1, 0, &n);
    assert_int_equal(n, 1);
    assert_true(s[0].t0 == 1000 && s[0].t1 == FOREVER);
    assert_null(pd_reserve_cell(t, 2, 0, &n));
    assert_int_equal(n, 0);
    /* The query's rectangle and time range. */
    assert_int_equal(pd_reserve_query(t, 1, 0, 1, 0, 0, 1000, e, 8), 0);
    assert_int_equal(pd_reserve_query(t, 1, 0, 1, 0, 0, 1001, e, 8), 1);
    assert_int_equal(pd_reserve_query(t, 0, 0, 0, 0, 1500, 5000, e, 8), 1);
    assert_int_equal(pd_reserve_query(t, 5, 5, 9, 9, 0, FOREVER, e, 8), 0);
    pd_reserve_cut end;
    assert_true(pd_reserve_agent_end(t, 7, &end));
    assert_true(end.x == 1 && end.y == 0 && end.until_ms == FOREVER && !end.mid_move);
    assert_false(pd_reserve_agent_end(t, 8, &end));
    check_table(t, 8, 8);
    pd_reserve_destroy(t);
}

static void test_table_replace_from_t0(void **state)
{
    (void)state;
    pd_reserve *t = pd_reserve_create(NULL);
    const pd_waypoint first[] = { wp(0, 0, 0, 0), wp(1, 0, 1000, 1000), wp(2, 0, 2000, FOREVER) };
    assert_int_equal(pd_reserve_replace(t, 1, 1, 0, first, 3, NULL), PD_OK);
    /* At 1000 it is on (1,0): turn south instead. The move to (2,0) and the
     * park there go; (1,0) stays one span across the seam. */
    const pd_waypoint again[] = { wp(1, 0, 1000, 1500), wp(1, 1, 2500, FOREVER) };
    assert_int_equal(pd_reserve_replace(t, 1, 1, 1000, again, 2, NULL), PD_OK);
    size_t n;
    assert_null(pd_reserve_cell(t, 2, 0, &n));
    const pd_reserve_span *s = pd_reserve_cell(t, 1, 0, &n);
    assert_int_equal(n, 1);
    assert_true(s[0].t0 == 0 && s[0].t1 == 2500);
    pd_reserve_entry e[8];
    /* Kept: the move to (1,0); new: the wait there, the move south, the park. */
    assert_int_equal(pd_reserve_query(t, 0, 0, 9, 9, INT64_MIN, INT64_MAX, e, 8), 4);
    check_table(t, 8, 8);
    /* Replacing from before its first entry drops everything it held. */
    const pd_waypoint elsewhere[] = { wp(5, 5, 0, FOREVER) };
    assert_int_equal(pd_reserve_replace(t, 1, 2, 0, elsewhere, 1, NULL), PD_OK);
    assert_int_equal(pd_reserve_query(t, 0, 0, 9, 9, INT64_MIN, INT64_MAX, e, 8), 1);
    assert_true(e[0].x == 5 && e[0].w == 2 && e[0].h == 2);
    check_table(t, 8, 8);
    pd_reserve_stats st;
    pd_reserve_get_stats(t, &st);
    assert_true(st.agents == 1 && st.entries == 1 && st.spans == 4 && st.cells == 4);
    pd_reserve_destroy(t);
}

static void test_table_refuses_overlaps_and_bad_plans(void **state)
{
    (void)state;
    pd_reserve *t = pd_reserve_create(NULL);
    const pd_waypoint a[] = { wp(0, 0, 0, 0), wp(1, 0, 1000, 1000), wp(2, 0, 2000, FOREVER) };
    assert_int_equal(pd_reserve_replace(t, 1, 1, 0, a, 3, NULL), PD_OK);
    snapshot before;
    take(t, &before);
    pd_reserve_refusal why;
    /* Following too closely: enters (1,0) before agent 1 has arrived on (2,0). */
    const pd_waypoint early[] = { wp(0, 1, 0, 1500), wp(1, 0, 1999, FOREVER) };
    assert_int_equal(pd_reserve_replace(t, 2, 1, 0, early, 2, &why), PD_INTERNAL);
    assert_true(why.has_agent && why.agent == 1);
    assert_unchanged(t, &before);
    /* A diagonal that crosses agent 1's first move: only the boxes meet. */
    const pd_waypoint cross[] = { wp(1, 1, 0, 0), wp(0, 0, 1415, FOREVER) };
    assert_int_equal(pd_reserve_replace(t, 2, 1, 0, cross, 2, &why), PD_INTERNAL);
    assert_unchanged(t, &before);
    /* Following once it has arrived is fine. */
    const pd_waypoint after[] = { wp(0, 1, 0, 2000), wp(1, 0, 3000, 3000), wp(1, 1, 4000, FOREVER) };
    assert_int_equal(pd_reserve_replace(t, 2, 1, 0, after, 3, &why), PD_OK);
    take(t, &before);
    /* Malformed plans. */
    const pd_waypoint leap[] = { wp(0, 3, 0, 0), wp(2, 3, 1000, FOREVER) };
    const pd_waypoint same[] = { wp(0, 3, 0, 0), wp(0, 3, 1000, FOREVER) };
    const pd_waypoint back[] = { wp(0, 3, 0, 500), wp(1, 3, 500, FOREVER) };
    const pd_waypoint late[] = { wp(0, 3, 10, FOREVER) };
    const pd_waypoint mid_forever[] = { wp(0, 3, 0, FOREVER), wp(1, 3, 1000, FOREVER) };
    const pd_waypoint neg[] = { wp(-1, 3, 0, FOREVER) };
    assert_int_equal(pd_reserve_replace(t, 3, 1, 0, leap, 2, NULL), PD_INVALID_ARGUMENT);
    assert_int_equal(pd_reserve_replace(t, 3, 1, 0, same, 2, NULL), PD_INVALID_ARGUMENT);
    assert_int_equal(pd_reserve_replace(t, 3, 1, 0, back, 2, NULL), PD_INVALID_ARGUMENT);
    assert_int_equal(pd_reserve_replace(t, 3, 1, 0, late, 1, NULL), PD_INVALID_ARGUMENT);
    assert_int_equal(pd_reserve_replace(t, 3, 1, 0, mid_forever, 2, NULL), PD_INVALID_ARGUMENT);
    assert_int_equal(pd_reserve_replace(t, 3, 1, 0, neg, 1, NULL), PD_INVALID_ARGUMENT);
    assert_int_equal(pd_reserve_replace(t, 3, 0, 0, late, 1, NULL), PD_INVALID_ARGUMENT);
    assert_int_equal(pd_reserve_replace(t, 3, PD_UNIT_SIZE_MAX + 1, 10, late, 1, NULL), PD_INVALID_ARGUMENT);
    assert_int_equal(pd_reserve_replace(t, 3, 1, 0, late, 0, NULL), PD_INVALID_ARGUMENT);
    assert_unchanged(t, &before);
    check_table(t, 8, 8);
    pd_reserve_destroy(t);
}

static void test_table_release_collect_expire(void **state)
{
    (void)state;
    pd_reserve *t = pd_reserve_create(NULL);
    const pd_waypoint a[] = { wp(0, 0, 0, 1000), wp(1, 0, 2000, 2000), wp(2, 0, 3000, 3000) }; /* vanishes */
    const pd_waypoint b[] = { wp(0, 2, 0, 0), wp(1, 2, 1000, FOREVER) };                       /* parks */
    const pd_waypoint c[] = { wp(4, 4, 5000, 6000), wp(4, 5, 7000, 9000) };
    assert_int_equal(pd_reserve_replace(t, 1, 1, 0, a, 3, NULL), PD_OK);
    assert_int_equal(pd_reserve_replace(t, 2, 1, 0, b, 2, NULL), PD_OK);
    assert_int_equal(pd_reserve_replace(t, 3, 1, 5000, c, 2, NULL), PD_OK);
    check_table(t, 8, 8);
    /* Collect what ended by 1500: agent 1's wait; the merged span on (0,0)
     * keeps only the move's part. */
    assert_int_equal(pd_reserve_collect(t, 1500), 2); /* agent 1's wait, agent 2's move */
    check_table(t, 8, 8);
    size_t n;
    const pd_reserve_span *s = pd_reserve_cell(t, 0, 0, &n);
    assert_int_equal(n, 1);
    assert_true(s[0].t0 == 1000 && s[0].t1 == 2000);
    /* By 3000 agent 1 has nothing left and leaves the table. */
    pd_reserve_collect(t, 3000);
    assert_int_equal(pd_reserve_agent_slot(t, 1), PD_RESERVE_NO_SLOT);
    check_table(t, 8, 8);
    /* Expiry: agent 2 renewed at 0, agent 3 at 5000. */
    uint64_t gone[4];
    assert_int_equal(pd_reserve_expire(t, 0, gone, 4), 0);
    assert_true(pd_reserve_touch(t, 2, 4000));
    assert_false(pd_reserve_touch(t, 99, 4000));
    assert_int_equal(pd_reserve_expire(t, 4500, gone, 4), 1);
    assert_int_equal(gone[0], 2);
    assert_int_equal(pd_reserve_agent_slot(t, 2), PD_RESERVE_NO_SLOT);
    check_table(t, 8, 8);
    /* Release takes the past too. */
    assert_int_equal(pd_reserve_release(t, 3), 1);
    assert_int_equal(pd_reserve_release(t, 3), 0);
    pd_reserve_stats st;
    pd_reserve_get_stats(t, &st);
    assert_true(st.agents == 0 && st.entries == 0 && st.spans == 0 && st.cells == 0);
    /* Slots are reused. */
    assert_int_equal(pd_reserve_replace(t, 4, 1, 0, b, 2, NULL), PD_OK);
    check_table(t, 8, 8);
    pd_reserve_destroy(t);
}

static void test_table_limits(void **state)
{
    (void)state;
    /* Two agents, 6 entries, 200 bytes per agent: a 1x1 plan of two
     * waypoints with a wait costs 3 entries, (32 + 24) + (32 + 48) + (32 + 24)
     * = 192 bytes. */
    pd_reserve_limits lim = { .max_agents = 2, .max_entries = 6, .max_agent_bytes = 200, .max_window_ms = 10000 };
    pd_reserve *t = pd_reserve_create(&lim);
    const pd_waypoint p3[] = { wp(0, 0, 0, 500), wp(1, 0, 1500, FOREVER) };
    const pd_waypoint q3[] = { wp(0, 3, 0, 500), wp(1, 3, 1500, FOREVER) };
    const pd_waypoint r1[] = { wp(0, 6, 0, FOREVER) };
    assert_int_equal(pd_reserve_replace(t, 1, 1, 0, p3, 2, NULL), PD_OK);
    assert_int_equal(pd_reserve_replace(t, 2, 1, 0, q3, 2, NULL), PD_OK);
    snapshot before;
    take(t, &before);
    pd_reserve_refusal why;
    assert_int_equal(pd_reserve_replace(t, 3, 1, 0, r1, 1, &why), PD_LIMIT_EXCEEDED);
    assert_int_equal(why.limit, PD_RESERVE_LIMIT_AGENTS);
    assert_string_equal(pd_reserve_limit_name(why.limit), "agents");
    assert_unchanged(t, &before);
    /* Agent 1 replacing from 1500 keeps 2 entries and adds 3: 7 > 6. */
    const pd_waypoint more[] = { wp(1, 0, 1500, 2000), wp(1, 1, 3000, FOREVER) };
    assert_int_equal(pd_reserve_replace(t, 1, 1, 1500, more, 2, &why), PD_LIMIT_EXCEEDED);
    assert_int_equal(why.limit, PD_RESERVE_LIMIT_ENTRIES);
    assert_unchanged(t, &before);
    /* Replacing from 0 drops all three first: fits the entries, but a 2x2
     * wait of 4 cells is 32 + 96 bytes and the move (6 cells) 32 + 144:
     * past 200. */
    const pd_waypoint big[] = { wp(4, 0, 0, 500), wp(5, 0, 1500, 1500) };
    assert_int_equal(pd_reserve_replace(t, 1, 2, 0, big, 2, &why), PD_LIMIT_EXCEEDED);
    assert_int_equal(why.limit, PD_RESERVE_LIMIT_AGENT_BYTES);
    assert_unchanged(t, &before);
    /* The window limit is the planner's. */
    scene s;
    scene_init(&s, core_open_grid(8, 8));
    pd_sipp_ctx *ctx = pd_sipp_ctx_create();
    pd_sipp_result r;
    ask q = { .agent = 1, .from = { 1, 0 }, .to = { 3, 0 }, .t0 = 1500, .window = 10001 };
    expect_status(reserve(&s, t, ctx, NULL, &q, &r), PD_LIMIT_EXCEEDED, "window past the limit");
    assert_int_equal(r.limit, PD_RESERVE_LIMIT_WINDOW);
    q.window = 0;
    expect_status(reserve(&s, t, ctx, NULL, &q, &r), PD_LIMIT_EXCEEDED, "all the way, with a limit");
    /* The planner's table refusals leave the table as it was too. */
    q.window = 10000;
    q.to = (pd_point){ 7, 0 };
    expect_status(reserve(&s, t, ctx, NULL, &q, &r), PD_LIMIT_EXCEEDED, "a longer plan");
    assert_int_equal(r.n_waypoints, 0);
    assert_unchanged(t, &before);
    check_table(t, 8, 8);
    pd_sipp_ctx_destroy(ctx);
    scene_free(&s);
    pd_reserve_destroy(t);
}

/* Agent 1 walks east along y = 0 from 0 to 5, one cell a second, and
 * parks there. */
static void walk_east(pd_reserve *t)
{
    pd_waypoint a[6];
    for (int i = 0; i < 6; i++)
        a[i] = wp(i, 0, i * 1000, i == 5 ? FOREVER : i * 1000);
    assert_int_equal(pd_reserve_replace(t, 1, 1, 0, a, 6, NULL), PD_OK);
}

static void test_table_block_cuts(void **state)
{
    (void)state;
    pd_reserve *t = pd_reserve_create(NULL);
    walk_east(t);
    /* Agent 2 parks on (3,2), away from it. */
    const pd_waypoint b[] = { wp(3, 2, 0, FOREVER) };
    assert_int_equal(pd_reserve_replace(t, 2, 1, 0, b, 1, NULL), PD_OK);
    /* (4,0) becomes a wall at 1500: agent 1 enters it from 3000 on, so it
     * keeps its plan up to (3,0), reached at 3000. */
    pd_reserve_cut cut[4];
    assert_int_equal(pd_reserve_block(t, 4, 0, 4, 0, 1500, cut, 4), 1);
    assert_true(cut[0].agent == 1 && cut[0].x == 3 && cut[0].y == 0 && cut[0].until_ms == 3000 && !cut[0].mid_move);
    assert_true(pd_reserve_was_cut(t, 1));
    assert_false(pd_reserve_was_cut(t, 2));
    assert_false(pd_reserve_was_cut(t, 99));
    pd_reserve_entry e[16];
    assert_int_equal(pd_reserve_query(t, 4, 0, 9, 0, INT64_MIN, INT64_MAX, e, 16), 0);
    pd_reserve_cut end;
    assert_true(pd_reserve_agent_end(t, 1, &end));
    assert_true(end.x == 3 && end.until_ms == 3000);
    check_table(t, 8, 8);
    /* A wall landing on agent 1 while it moves from (1,0) to (2,0): cut at
     * once, mid-move, left at (1,0). */
    assert_int_equal(pd_reserve_block(t, 2, 0, 2, 0, 1500, cut, 4), 1);
    assert_true(cut[0].agent == 1 && cut[0].x == 1 && cut[0].until_ms == 1500 && cut[0].mid_move);
    /* A wall under a parked agent cuts it where it stands. */
    assert_int_equal(pd_reserve_block(t, 3, 2, 3, 2, 9000, cut, 4), 1);
    assert_true(cut[0].agent == 2 && cut[0].x == 3 && cut[0].y == 2 && cut[0].until_ms == 9000);
    /* Nothing left to cut there; the count is not bounded by cap. */
    assert_int_equal(pd_reserve_block(t, 3, 2, 3, 2, 9000, cut, 4), 0);
    assert_int_equal(pd_reserve_block(t, 0, 0, 7, 7, 0, NULL, 0), 2);
    check_table(t, 8, 8);
    /* Both are cut to nothing now. A collect (the server's idle sweep runs
     * one every sixteenth of the TTL) keeps them, was_cut, so their next
     * ReservePath still says so; expiry (by their renewal) still takes
     * them. Without that the sweep dropped them and was_cut with them. */
    pd_reserve_collect(t, 500);
    assert_true(pd_reserve_was_cut(t, 1) && pd_reserve_was_cut(t, 2));
    assert_int_not_equal(pd_reserve_agent_slot(t, 1), PD_RESERVE_NO_SLOT);
    uint64_t gone[4];
    assert_int_equal(pd_reserve_expire(t, 1, gone, 4), 2);
    assert_int_equal(pd_reserve_agent_slot(t, 1), PD_RESERVE_NO_SLOT);
    check_table(t, 8, 8);
    pd_reserve_destroy(t);
}

static int cmp_cut(const void *a, const void *b)
{
    const pd_reserve_cut *x = a, *y = b;
    return (x->agent > y->agent) - (x->agent < y->agent);
}

/* Reading a plan on the clock: standing, moving, after the end. */
static void test_plan_on_the_clock(void **state)
{
    (void)state;
    const pd_waypoint p[] = { wp(0, 0, 0, 500), wp(1, 0, 1500, 1500), wp(2, 0, 2500, 4000) };
    assert_int_equal(pd_plan_index_at(p, 3, 0), 0);
    assert_int_equal(pd_plan_index_at(p, 3, 500), 0);      /* leaving: still there */
    assert_int_equal(pd_plan_index_at(p, 3, 501), -1);     /* moving */
    assert_int_equal(pd_plan_index_at(p, 3, 1500), 1);     /* passing through */
    assert_int_equal(pd_plan_index_at(p, 3, 3000), 2);
    assert_int_equal(pd_plan_index_at(p, 3, 9000), 2);     /* after the hold ended */
    assert_int_equal(pd_plan_next_stop(p, 3, 200), 200);
    assert_int_equal(pd_plan_next_stop(p, 3, 501), 1500);
    assert_int_equal(pd_plan_next_stop(p, 3, 1501), 2500);
    assert_int_equal(pd_plan_next_stop(p, 3, 9000), 9000);
}

/* The table's clock (pd_reserve_now) is forgotten when its last agent
 * goes, by a release, an expiry or pd_reserve_release_all: one t0 far
 * ahead (a game bug) kept as "now" expired every agent reserved at the
 * game's real times, and a game whose clock started over had its new
 * agents expired at once. While agents are held, pd_reserve_clock_fits
 * tells the request layer which t0 to refuse. */
static void test_clock_forgotten_when_empty(void **state)
{
    (void)state;
    const pd_reserve_limits lim = { .max_clock_step_ms = 3600000 };
    pd_reserve *t = pd_reserve_create(&lim);
    const int64_t ttl = 30000, far = (int64_t)1 << 60;
    /* No agent: no clock to compare with, any t0 fits. */
    assert_int_equal(pd_reserve_clock_fits(t, 0, far, ttl), PD_RESERVE_CLOCK_OK);
    const pd_waypoint a[] = { wp(0, 0, 100000, FOREVER) };
    assert_int_equal(pd_reserve_replace(t, 1, 1, 100000, a, 1, NULL), PD_OK);
    assert_int_equal(pd_reserve_clock_fits(t, 0, 100000 + 3600000, ttl), PD_RESERVE_CLOCK_OK);
    assert_int_equal(pd_reserve_clock_fits(t, 0, 100000 + 3600001, ttl), PD_RESERVE_CLOCK_AHEAD);
    assert_int_equal(pd_reserve_clock_fits(t, 0, far, ttl), PD_RESERVE_CLOCK_AHEAD);
    assert_int_equal(pd_reserve_clock_fits(t, 0, 100000 - 30000, ttl), PD_RESERVE_CLOCK_OK);
    assert_int_equal(pd_reserve_clock_fits(t, 0, 100000 - 30001, ttl), PD_RESERVE_CLOCK_BEHIND);
    assert_int_equal(pd_reserve_clock_fits(t, 0, 0, 0), PD_RESERVE_CLOCK_OK); /* no TTL: nothing expires */
    const pd_reserve_limits none = { 0 };
    pd_reserve_set_limits(t, &none);
    assert_int_equal(pd_reserve_clock_fits(t, 0, far, ttl), PD_RESERVE_CLOCK_OK); /* no step limit */
    pd_reserve_set_limits(t, &lim);

    /* The table itself takes any time (replay, pd_yield): a far t0 is its
     * clock while an agent is held ... */
    const pd_waypoint b[] = { wp(2, 0, far, FOREVER) };
    assert_int_equal(pd_reserve_replace(t, 2, 1, far, b, 1, NULL), PD_OK);
    assert_int_equal(pd_reserve_now(t), far);
    assert_int_equal(pd_reserve_release(t, 2), 1);
    assert_int_equal(pd_reserve_now(t), far);
    /* ... and gone with the last one. */
    assert_int_equal(pd_reserve_release(t, 1), 1);
    assert_int_equal(pd_reserve_now(t), 0);
    /* A clock from 0 again: nothing expires the new agents. */
    const pd_waypoint c[] = { wp(4, 0, 500, FOREVER) };
    assert_int_equal(pd_reserve_replace(t, 3, 1, 500, c, 1, NULL), PD_OK);
    assert_int_equal(pd_reserve_now(t), 500);
    uint64_t gone[4];
    assert_int_equal(pd_reserve_maintain(t, ttl, gone, 4, NULL), 0);
    assert_int_not_equal(pd_reserve_agent_slot(t, 3), PD_RESERVE_NO_SLOT);

    /* An expiry that empties the table forgets it too, and maintain is due
     * at once on the next clock. */
    assert_true(pd_reserve_touch(t, 3, 200000));
    assert_int_equal(pd_reserve_maintain(t, ttl, gone, 4, NULL), 0);
    const pd_waypoint d[] = { wp(6, 0, 300000, FOREVER) };
    assert_int_equal(pd_reserve_replace(t, 4, 1, 300000, d, 1, NULL), PD_OK);
    pd_reserve_set_renewed(t, 4, 100);
    assert_true(pd_reserve_touch(t, 3, 100));
    assert_int_equal(pd_reserve_expire(t, 1000, gone, 4), 2);
    assert_int_equal(pd_reserve_now(t), 0);
    assert_int_equal(pd_reserve_maintain_due(t, ttl), 0); /* no clock: nothing to run on */

    /* pd_reserve_release_all: every agent, and the clock. */
    assert_int_equal(pd_reserve_replace(t, 5, 1, far, b, 1, NULL), PD_OK);
    const pd_waypoint e[] = { wp(0, 0, far, FOREVER) };
    assert_int_equal(pd_reserve_replace(t, 6, 1, far, e, 1, NULL), PD_OK);
    uint64_t ids[1];
    assert_int_equal(pd_reserve_release_all(t, ids, 1), 2); /* both go; one id fits */
    assert_true(ids[0] == 5 || ids[0] == 6);
    pd_reserve_stats st;
    pd_reserve_get_stats(t, &st);
    assert_int_equal(st.agents, 0);
    assert_int_equal(st.entries, 0);
    assert_int_equal(st.cells, 0);
    assert_int_equal(pd_reserve_now(t), 0);
    assert_int_equal(pd_reserve_release_all(t, NULL, 0), 0);
    assert_int_equal(pd_reserve_replace(t, 7, 1, 500, c, 1, NULL), PD_OK);
    assert_int_equal(pd_reserve_now(t), 500);
    check_table(t, 8, 8);
    pd_reserve_destroy(t);
}

/* A step within the TTL expires nobody the clock had renewed (only agents
 * already idle, as any ReservePath's expiry does): a slow game with a TTL
 * longer than max_clock_step_ms (a turn a day, the TTL a day) was refused
 * its next turn two hours on, and stayed refused until the idle sweep had
 * expired every agent a TTL of real time later. */
static void test_clock_step_within_the_ttl(void **state)
{
    (void)state;
    const pd_reserve_limits lim = { .max_clock_step_ms = 3600000 };
    pd_reserve *t = pd_reserve_create(&lim);
    const int64_t day = 86400000, hours2 = 7200000;
    const pd_waypoint a[] = { wp(0, 0, 100000, FOREVER) };
    assert_int_equal(pd_reserve_replace(t, 1, 1, 100000, a, 1, NULL), PD_OK);
    assert_int_equal(pd_reserve_clock_fits(t, 0, 100000 + hours2, day), PD_RESERVE_CLOCK_OK);
    assert_int_equal(pd_reserve_clock_fits(t, 0, 100000 + day, day), PD_RESERVE_CLOCK_OK);
    assert_int_equal(pd_reserve_clock_fits(t, 0, 100000 + day + 1, day), PD_RESERVE_CLOCK_AHEAD);
    /* The TTL shorter than the step: the step is the limit, as before. */
    assert_int_equal(pd_reserve_clock_fits(t, 0, 100000 + 3600000, 30000), PD_RESERVE_CLOCK_OK);
    assert_int_equal(pd_reserve_clock_fits(t, 0, 100000 + 3600001, 30000), PD_RESERVE_CLOCK_AHEAD);
    pd_reserve_destroy(t);
}

/* A table holding only the requester: its clock is that agent's alone, and
 * any t0 of it is a fresh clock (as an empty table forgets its clock). A
 * game with one NPC that restarted its clock was refused (BEHIND) though
 * nothing else could conflict; and had the table taken the t0 keeping its
 * old clock, the NPC renewed at it was expired by the next maintain. */
static void test_clock_of_the_only_agent(void **state)
{
    (void)state;
    const pd_reserve_limits lim = { .max_clock_step_ms = 3600000 };
    pd_reserve *t = pd_reserve_create(&lim);
    const int64_t ttl = 30000, far = (int64_t)1 << 40;
    uint64_t gone[2];
    const pd_waypoint a[] = { wp(0, 0, 500000, 501000), wp(1, 0, 502000, FOREVER) };
    assert_int_equal(pd_reserve_replace(t, 1, 1, 500000, a, 2, NULL), PD_OK);
    assert_true(pd_reserve_holds_only(t, 1));
    assert_false(pd_reserve_holds_only(t, 2));
    /* Another agent would be expired by the clock, or expire the NPC. */
    assert_int_equal(pd_reserve_clock_fits(t, 2, 0, ttl), PD_RESERVE_CLOCK_BEHIND);
    assert_int_equal(pd_reserve_clock_fits(t, 2, far, ttl), PD_RESERVE_CLOCK_AHEAD);
    /* The NPC itself: any t0 back, none far ahead (one bad t0 of a lone
     * NPC would move the clock away from every agent that joins later).
     * Its clock restarts at 0 ... */
    assert_int_equal(pd_reserve_clock_fits(t, 1, 0, ttl), PD_RESERVE_CLOCK_OK);
    assert_int_equal(pd_reserve_clock_fits(t, 1, far, ttl), PD_RESERVE_CLOCK_AHEAD);
    assert_int_equal(pd_reserve_clock_fits(t, 1, 500000 + 3600000, ttl), PD_RESERVE_CLOCK_OK);
    const pd_waypoint b[] = { wp(0, 0, 0, FOREVER) };
    assert_int_equal(pd_reserve_clock_restarts(t, 1, 0), 1);
    assert_int_equal(pd_reserve_clock_restarts(t, 2, 0), 0);
    assert_int_equal(pd_reserve_replace(t, 1, 1, 0, b, 1, NULL), PD_OK);
    /* The replace alone never moves the clock back (a log's REPLACE
     * means what it meant to an older pathd); the request restarts it. */
    assert_int_equal(pd_reserve_now(t), 500000);
    assert_int_equal(pd_reserve_restart_clock(t, 2), 0);
    assert_int_equal(pd_reserve_restart_clock(t, 1), 1);
    assert_int_equal(pd_reserve_now(t), 0);
    assert_int_equal(pd_reserve_restart_clock(t, 1), 0); /* at its clock: nothing to restart */
    /* ... and it is kept: renewed at the clock, not 500000 - ttl behind. */
    assert_int_equal(pd_reserve_maintain(t, ttl, gone, 2, NULL), 0);
    const pd_waypoint c[] = { wp(0, 0, 40000, FOREVER) };
    assert_int_equal(pd_reserve_replace(t, 1, 1, 40000, c, 1, NULL), PD_OK);
    assert_int_equal(pd_reserve_maintain(t, ttl, gone, 2, NULL), 0);
    assert_int_not_equal(pd_reserve_agent_slot(t, 1), PD_RESERVE_NO_SLOT);
    /* A jump ahead is its clock too, and expires nobody. */
    const pd_waypoint d[] = { wp(0, 0, far, FOREVER) };
    assert_int_equal(pd_reserve_replace(t, 1, 1, far, d, 1, NULL), PD_OK);
    assert_int_equal(pd_reserve_restart_clock(t, 1), 0);
    assert_int_equal(pd_reserve_now(t), far);
    assert_int_equal(pd_reserve_maintain(t, ttl, gone, 2, NULL), 0);
    assert_int_not_equal(pd_reserve_agent_slot(t, 1), PD_RESERVE_NO_SLOT);
    /* With a second agent the clock is shared again: the NPC's step back
     * is refused, as any other's. */
    const pd_waypoint e[] = { wp(5, 5, far, FOREVER) };
    assert_int_equal(pd_reserve_replace(t, 2, 1, far, e, 1, NULL), PD_OK);
    assert_false(pd_reserve_holds_only(t, 1));
    assert_int_equal(pd_reserve_clock_fits(t, 1, 0, ttl), PD_RESERVE_CLOCK_BEHIND);
    assert_int_equal(pd_reserve_clock_restarts(t, 1, 0), 0);
    check_table(t, 8, 8);
    pd_reserve_destroy(t);
}

/* The clock goes back only through pd_reserve_restart_clock, never inside
 * a replace: a REPLACE in a log must mean what it meant to the pathd that
 * wrote it and to an older one applying it (a replica in a rolling
 * upgrade, a downgrade's replay), which keeps the clock - decided inside
 * the replace, that pathd kept the old clock, and its expiry removed the
 * agent on every replica. A guard standing since 500, renewed two hours
 * on, replaced from its hold's start (as a log may hold it): the clock
 * stays. The restart is told to the observer as a CLOCK op of its own,
 * so the log carries it (test_reserve_compact replays it). */
static void note_kind(void *user, const pd_reserve_op *op)
{
    *(pd_reserve_op_kind *)user = op->kind;
}

static void test_clock_goes_back_only_by_restart(void **state)
{
    (void)state;
    const pd_reserve_limits lim = { .max_clock_step_ms = 3600000 };
    pd_reserve *t = pd_reserve_create(&lim);
    pd_reserve_op_kind last = 0;
    pd_reserve_set_observer(t, note_kind, &last);
    const int64_t hours2 = 7200000;
    const pd_waypoint h0[] = { wp(4, 4, 500, FOREVER) };
    const pd_waypoint h1[] = { wp(4, 4, 500 + hours2, FOREVER) };
    assert_int_equal(pd_reserve_replace(t, 7, 1, 500, h0, 1, NULL), PD_OK);
    assert_int_equal(pd_reserve_replace(t, 7, 1, 500 + hours2, h1, 1, NULL), PD_OK);
    assert_int_equal(pd_reserve_replace(t, 7, 1, 500, h0, 1, NULL), PD_OK);
    pd_reserve_set_renewed(t, 7, 500 + hours2);
    assert_int_equal(last, PD_RESERVE_OP_RENEWED);
    assert_int_equal(pd_reserve_now(t), 500 + hours2);
    assert_int_equal(pd_reserve_clock_fits(t, 8, 500 + hours2 + 100, 0), PD_RESERVE_CLOCK_OK);
    /* The guard's own restart, as pd_kind_reserve makes it. */
    const pd_waypoint h2[] = { wp(4, 4, 100, FOREVER) };
    assert_int_equal(pd_reserve_replace(t, 7, 1, 100, h2, 1, NULL), PD_OK);
    assert_int_equal(last, PD_RESERVE_OP_REPLACE);
    assert_int_equal(pd_reserve_now(t), 500 + hours2);
    assert_int_equal(pd_reserve_restart_clock(t, 7), 1);
    assert_int_equal(last, PD_RESERVE_OP_CLOCK);
    assert_int_equal(pd_reserve_now(t), 100);
    check_table(t, 8, 8);
    pd_reserve_destroy(t);
}

/* Expiry as the server runs it: pd_reserve_maintain on the table's own
 * "now" (the latest t0 heard of), at most once per ttl / 16. */
static void test_table_maintain(void **state)
{
    (void)state;
    pd_reserve *t = pd_reserve_create(NULL);
    const int64_t ttl = 30000;
    uint64_t gone[4], collected = 99;
    assert_int_equal(pd_reserve_now(t), 0);
    assert_int_equal(pd_reserve_maintain(t, ttl, gone, 4, &collected), 0);
    assert_int_equal(collected, 0);
    /* Agent 1 walks from 0 and parks; agent 2 arrives at 20000. */
    const pd_waypoint a[] = { wp(0, 0, 0, 1000), wp(1, 0, 2000, FOREVER) };
    const pd_waypoint b[] = { wp(5, 5, 20000, 21000), wp(5, 6, 22000, FOREVER) };
    assert_int_equal(pd_reserve_replace(t, 1, 1, 0, a, 2, NULL), PD_OK);
    assert_int_equal(pd_reserve_replace(t, 2, 1, 20000, b, 2, NULL), PD_OK);
    assert_int_equal(pd_reserve_now(t), 20000);
    /* Nothing is older than the TTL yet. */
    assert_int_equal(pd_reserve_maintain(t, ttl, gone, 4, &collected), 0);
    assert_int_equal(collected, 0);
    /* Agent 3 plans at 40000: agent 1 (renewed at 0) is past the TTL. A
     * t0 in the past does not move "now" back. */
    const pd_waypoint c[] = { wp(7, 0, 40000, FOREVER) };
    const pd_waypoint c_old[] = { wp(7, 0, 100, FOREVER) };
    assert_int_equal(pd_reserve_replace(t, 3, 1, 40000, c, 1, NULL), PD_OK);
    assert_int_equal(pd_reserve_replace(t, 4, 1, 100, c_old, 1, NULL), PD_INTERNAL); /* 3 holds (7,0) forever */
    assert_int_equal(pd_reserve_now(t), 40000);
    assert_int_equal(pd_reserve_maintain(t, ttl, gone, 4, &collected), 1);
    assert_int_equal(gone[0], 1);
    assert_int_equal(pd_reserve_agent_slot(t, 1), PD_RESERVE_NO_SLOT);
    assert_int_not_equal(pd_reserve_agent_slot(t, 2), PD_RESERVE_NO_SLOT);
    assert_int_equal(collected, 0); /* agent 2's entries end at 22000 or never */
    check_table(t, 8, 8);
    /* Agent 5 last renewed at 10999 (a late answer); at 41000, within
     * ttl / 16 of the last run, nothing is done; at 42000 it goes. */
    const pd_waypoint d[] = { wp(0, 7, 10999, FOREVER) };
    assert_int_equal(pd_reserve_replace(t, 5, 1, 10999, d, 1, NULL), PD_OK);
    assert_true(pd_reserve_touch(t, 2, 41000));
    assert_int_equal(pd_reserve_maintain(t, ttl, gone, 4, &collected), 0);
    assert_int_not_equal(pd_reserve_agent_slot(t, 5), PD_RESERVE_NO_SLOT);
    assert_true(pd_reserve_touch(t, 2, 42000));
    assert_int_equal(pd_reserve_maintain(t, ttl, gone, 4, &collected), 1);
    assert_int_equal(gone[0], 5);
    /* At 71000 (touch of 2), agent 3 is 31000 old: released; agent 2's
     * wait and move that ended at 22000 are collected, its park stays. */
    assert_true(pd_reserve_touch(t, 2, 71000));
    assert_int_equal(pd_reserve_maintain(t, ttl, gone, 4, &collected), 1);
    assert_int_equal(gone[0], 3);
    assert_int_equal(collected, 2);
    pd_reserve_entry e[4];
    assert_int_equal(pd_reserve_query(t, 0, 0, 9, 9, INT64_MIN, INT64_MAX, e, 4), 1);
    assert_true(e[0].agent == 2 && e[0].x == 5 && e[0].y == 6 && e[0].t0_ms == 22000 && e[0].t1_ms == FOREVER);
    check_table(t, 8, 8);
    /* ttl 0: nothing ever expires. */
    assert_int_equal(pd_reserve_maintain(t, 0, gone, 4, &collected), 0);
    pd_reserve_destroy(t);
}

/* pd_reserve_block_cells on hand-made plans: each agent cut once, at its
 * earliest cell, and cells nobody holds cost nothing. */
static void test_table_block_cells(void **state)
{
    (void)state;
    pd_reserve *t = pd_reserve_create(NULL);
    walk_east(t);
    const pd_waypoint b[] = { wp(3, 2, 0, FOREVER) };
    assert_int_equal(pd_reserve_replace(t, 2, 2, 0, b, 1, NULL), PD_OK); /* 2x2 on (3..4, 2..3) */
    /* (4,0) and (2,0) from 1500: agent 1 is cut where it first meets them,
     * mid-move toward (2,0); (4,3) lies under agent 2's footprint; (7,7)
     * nobody holds. */
    const pd_point cells[] = { { 4, 0 }, { 7, 7 }, { 2, 0 }, { 4, 3 } };
    pd_reserve_cut cut[4];
    assert_int_equal(pd_reserve_block_cells(t, cells, 4, 1500, cut, 4), 2);
    qsort(cut, 2, sizeof *cut, cmp_cut);
    assert_true(cut[0].agent == 1 && cut[0].x == 1 && cut[0].until_ms == 1500 && cut[0].mid_move);
    assert_true(cut[1].agent == 2 && cut[1].x == 3 && cut[1].y == 2 && cut[1].until_ms == 1500 && !cut[1].mid_move);
    check_table(t, 8, 8);
    assert_true(pd_reserve_was_cut(t, 1) && pd_reserve_was_cut(t, 2));
    /* A new plan clears the mark. */
    const pd_waypoint again[] = { wp(6, 6, 1600, FOREVER) };
    assert_int_equal(pd_reserve_replace(t, 1, 1, 1600, again, 1, NULL), PD_OK);
    assert_false(pd_reserve_was_cut(t, 1));
    /* Again: nothing is left on them from 1500 on. */
    assert_int_equal(pd_reserve_block_cells(t, cells, 4, 1500, cut, 4), 0);
    /* The count is not bounded by cap. */
    const pd_point under[] = { { 0, 0 }, { 3, 2 } };
    assert_int_equal(pd_reserve_block_cells(t, under, 2, 0, NULL, 0), 2);
    check_table(t, 8, 8);
    pd_reserve_destroy(t);
}

/* Random replace / release / collect / block on a small area, with the
 * table's views compared after every step. Plans come from a random walk
 * and are only offered: overlapping ones must be refused unchanged. */
static uint64_t rng_state;

static uint32_t rnd(uint32_t n)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rng_state >> 33) % n;
}

static void test_table_random_ops(void **state)
{
    (void)state;
    rng_state = 12345;
    pd_reserve *t = pd_reserve_create(NULL);
    /* A twin given the same changes, but blocked through
     * pd_reserve_block_cells with the rectangle's cells: the two must stay
     * equal, cut for cut. */
    pd_reserve *twin = pd_reserve_create(NULL);
    int64_t now = 0;
    int cuts = 0;
    int accepted = 0, refused = 0;
    for (int step = 0; step < 600; step++) {
        const uint64_t agent = 1 + rnd(6);
        const uint32_t op = rnd(10);
        if (op < 7) {
            pd_waypoint plan[12];
            const uint32_t unit = 1 + rnd(2);
            const size_t n = 1 + rnd(12);
            int32_t x = (int32_t)rnd(8), y = (int32_t)rnd(8);
            int64_t tm = now;
            for (size_t i = 0; i < n; i++) {
                if (i > 0) {
                    int32_t dx, dy;
                    do {
                        dx = (int32_t)rnd(3) - 1;
                        dy = (int32_t)rnd(3) - 1;
                    } while ((dx == 0 && dy == 0) || x + dx < 0 || y + dy < 0);
                    x += dx;
                    y += dy;
                    tm += 1 + rnd(900);
                }
                plan[i] = wp(x, y, tm, 0);
                tm += rnd(3) ? 0 : rnd(700);
                plan[i].t_leave_ms = tm;
            }
            if (rnd(3) == 0)
                plan[n - 1].t_leave_ms = FOREVER;
            snapshot before;
            take(t, &before);
            pd_reserve_refusal why;
            pd_status st = pd_reserve_replace(t, agent, unit, now, plan, n, &why);
            assert_int_equal(pd_reserve_replace(twin, agent, unit, now, plan, n, NULL), st);
            if (st == PD_OK) {
                accepted++;
            } else {
                assert_int_equal(st, PD_INTERNAL);
                assert_true(why.has_agent && why.agent != agent);
                assert_unchanged(t, &before);
                refused++;
            }
        } else if (op == 7) {
            assert_int_equal(pd_reserve_release(t, agent), pd_reserve_release(twin, agent));
        } else if (op == 8) {
            const int64_t before = now - (int64_t)rnd(3000);
            assert_int_equal(pd_reserve_collect(t, before), pd_reserve_collect(twin, before));
        } else {
            const int32_t x = (int32_t)rnd(10), y = (int32_t)rnd(10);
            const int32_t x1 = x + (int32_t)rnd(2), y1 = y + (int32_t)rnd(2);
            const int64_t at = now + rnd(2000);
            pd_point cells[4];
            size_t nc = 0;
            for (int32_t cy = y; cy <= y1; cy++)
                for (int32_t cx = x; cx <= x1; cx++)
                    cells[nc++] = (pd_point){ cx, cy };
            pd_reserve_cut a[8], b[8];
            const size_t na = pd_reserve_block(t, x, y, x1, y1, at, a, 8);
            const size_t nb = pd_reserve_block_cells(twin, cells, nc, at, b, 8);
            assert_int_equal(na, nb);
            assert_true(na <= 8);
            qsort(a, na, sizeof *a, cmp_cut);
            qsort(b, nb, sizeof *b, cmp_cut);
            for (size_t i = 0; i < na; i++)
                assert_memory_equal(&a[i], &b[i], sizeof a[i]);
            cuts += (int)na;
        }
        check_table(t, 14, 14);
        snapshot mine, theirs;
        take(t, &mine);
        take(twin, &theirs);
        assert_memory_equal(&mine, &theirs, sizeof mine);
        now += rnd(400);
    }
    assert_true(accepted > 50 && refused > 50 && cuts > 10);
    pd_reserve_destroy(t);
    pd_reserve_destroy(twin);
}

/* ---- the planner on scenarios ---- */

typedef struct fixture {
    pd_reserve *t;
    pd_sipp_ctx *ctx;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    f->t = pd_reserve_create(NULL);
    f->ctx = pd_sipp_ctx_create();
    *state = f;
    return f->t && f->ctx ? 0 : -1;
}

static int teardown(void **state)
{
    fixture *f = *state;
    pd_reserve_destroy(f->t);
    pd_sipp_ctx_destroy(f->ctx);
    free(f);
    return 0;
}

/* Time the plan spends waiting: leave minus arrive, the last hold aside. */
static int64_t waited(const pd_sipp_result *r)
{
    int64_t w = 0;
    for (size_t i = 0; i + 1 < r->n_waypoints; i++)
        w += r->waypoints[i].t_leave_ms - r->waypoints[i].t_arrive_ms;
    return w;
}

static int visits(const pd_sipp_result *r, int32_t x, int32_t y)
{
    for (size_t i = 0; i < r->n_waypoints; i++)
        if (r->waypoints[i].x == x && r->waypoints[i].y == y)
            return 1;
    return 0;
}

/* A scenario: its scene, its answers log and the last answer. */
typedef struct stage {
    fixture *f;
    scene s;
    answers log;
    pd_sipp_result r;
} stage;

static void stage_begin(stage *st, void **state, const char *name, pd_grid *g)
{
    st->f = *state;
    scene_init(&st->s, g);
    answers_open(&st->log, name, g);
}

static pd_status stage_reserve(stage *st, const ask *q)
{
    return reserve(&st->s, st->f->t, st->f->ctx, &st->log, q, &st->r);
}

/* The table's views agree, the checker finds nothing, and the scene goes. */
static void stage_end(stage *st)
{
    answers_check(&st->log);
    check_table(st->f->t, st->s.g->width, st->s.g->height);
    scene_free(&st->s);
}

static void test_head_on_with_pocket(void **state)
{
    stage st;
    /* A corridor one cell wide with a pocket above x = 8. */
    stage_begin(&st, state, "head_on_pocket", core_grid("########.####\n"
                                                        ".............\n"
                                                        "#############\n"));
    ask a = { .agent = 1, .from = { 2, 1 }, .to = { 12, 1 } };
    expect_status(stage_reserve(&st, &a), PD_OK, "A");
    assert_int_equal(waited(&st.r), 0);
    assert_int_equal(st.r.reserved_until_ms, FOREVER);
    /* B stands on A's way at t0: it must step into the pocket and let A by. */
    ask b = { .agent = 2, .from = { 10, 1 }, .to = { 0, 1 } };
    expect_status(stage_reserve(&st, &b), PD_OK, "B");
    assert_true(visits(&st.r, 8, 0));
    assert_true(waited(&st.r) > 0);
    /* Optimal for B: into the pocket by 3000, out once A has reached (9,1)
     * at 7000 (leaving (8,1) free), then 8 cells west: 1000 to step out,
     * 8000 to walk. */
    assert_int_equal(st.r.waypoints[st.r.n_waypoints - 1].t_arrive_ms, 7000 + 1000 + 8000);
    stage_end(&st);
}

static void test_twenty_through_one_door(void **state)
{
    stage st;
    stage_begin(&st, state, "door_20", core_grid("..........#..........\n"
                                                 "..........#..........\n"
                                                 "..........#..........\n"
                                                 "..........#..........\n"
                                                 "..........#..........\n"
                                                 ".....................\n"
                                                 "..........#..........\n"
                                                 "..........#..........\n"
                                                 "..........#..........\n"
                                                 "..........#..........\n"
                                                 "..........#..........\n"));
    pd_point from[20], to[20];
    for (int i = 0; i < 20; i++) {
        from[i] = (pd_point){ 1 + 2 * (i % 4), 1 + 2 * (i / 4) };
        to[i] = (pd_point){ 13 + 2 * (i % 4), 1 + 2 * (i / 4) };
        /* Everyone stands where they are before anyone moves. */
        ask q = { .agent = (uint64_t)i + 1, .from = from[i], .to = from[i] };
        expect_status(stage_reserve(&st, &q), PD_OK, "standing");
    }
    int64_t last = 0, total_wait = 0;
    for (int i = 0; i < 20; i++) {
        /* Nearest the door first. */
        const int k = (i * 7) % 20;
        ask q = { .agent = (uint64_t)k + 1, .from = from[k], .to = to[k], .speed = 2.0 };
        expect_status(stage_reserve(&st, &q), PD_OK, "through the door");
        assert_true(visits(&st.r, 10, 5));
        total_wait += waited(&st.r);
        if (st.r.waypoints[st.r.n_waypoints - 1].t_arrive_ms > last)
            last = st.r.waypoints[st.r.n_waypoints - 1].t_arrive_ms;
    }
    /* One door, one agent at a time, 500 ms a cell: the twentieth cannot
     * be through before 20 door crossings. */
    assert_true(last >= 20 * 500);
    assert_true(total_wait > 0);
    stage_end(&st);
}

static void cross_units(fixture *f, int big_first, const char *name)
{
    scene s;
    scene_init(&s, core_open_grid(14, 12));
    answers log;
    answers_open(&log, name, s.g);
    pd_sipp_result r;
    ask big = { .agent = 100, .unit = 2, .from = { 0, 5 }, .to = { 12, 5 }, .speed = 1.5, .at_goal = PD_AT_GOAL_VANISH };
    if (big_first)
        expect_status(reserve(&s, f->t, f->ctx, &log, &big, &r), PD_OK, "2x2");
    for (int i = 0; i < 5; i++) {
        ask small = { .agent = (uint64_t)i + 1,
                      .from = { 2 + 2 * i, i % 2 ? 0 : 11 },
                      .to = { 3 + 2 * i, i % 2 ? 11 : 0 },
                      .speed = 1.0 + 0.5 * i };
        expect_status(reserve(&s, f->t, f->ctx, &log, &small, &r), PD_OK, "1x1");
    }
    if (!big_first)
        expect_status(reserve(&s, f->t, f->ctx, &log, &big, &r), PD_OK, "2x2 last");
    answers_check(&log);
    check_table(f->t, 14, 12);
    scene_free(&s);
}

static void test_two_by_two_crossing(void **state)
{
    fixture *f = *state;
    cross_units(f, 0, "unit2_cross_last");
    pd_reserve_destroy(f->t);
    f->t = pd_reserve_create(NULL);
    cross_units(f, 1, "unit2_cross_first");
}

static void test_update_cuts_a_plan(void **state)
{
    stage st;
    /* Two ways from west to east: the short one along y = 1, the long one
     * round by y = 5. */
    stage_begin(&st, state, "update_cut", core_grid("#############\n"
                                                    ".............\n"
                                                    ".###########.\n"
                                                    ".###########.\n"
                                                    ".###########.\n"
                                                    ".............\n"
                                                    "......#######\n"));
    ask a = { .agent = 1, .from = { 0, 1 }, .to = { 12, 1 } };
    expect_status(stage_reserve(&st, &a), PD_OK, "A");
    assert_true(visits(&st.r, 6, 1));
    /* B parks below the long way, never touched by the cut. */
    ask b = { .agent = 2, .from = { 0, 6 }, .to = { 3, 6 } };
    expect_status(stage_reserve(&st, &b), PD_OK, "B");
    /* At 2500 a door shuts on (6,1); A is at (2,1)..(3,1) then. */
    const int64_t at = 2500;
    scene_block(&st.s, 6, 1, 6, 1);
    answers_block(&st.log, 6, 1, 6, 1, at);
    pd_reserve_cut cut[4];
    assert_int_equal(pd_reserve_block(st.f->t, 6, 1, 6, 1, at, cut, 4), 1);
    answers_cut(&st.log, "cut", cut[0].agent, cut[0].until_ms);
    /* A keeps its plan to (5,1), reached at 5000, the last waypoint before. */
    assert_true(cut[0].agent == 1 && cut[0].x == 5 && cut[0].y == 1 && cut[0].until_ms == 5000);
    pd_reserve_entry e[8];
    assert_int_equal(pd_reserve_query(st.f->t, 6, 1, 12, 1, 0, FOREVER, e, 8), 0);
    /* It plans again from where the cut leaves it, the long way round. */
    ask again = { .agent = 1, .from = { cut[0].x, cut[0].y }, .to = { 12, 1 }, .t0 = cut[0].until_ms };
    expect_status(stage_reserve(&st, &again), PD_OK, "A again");
    assert_true(visits(&st.r, 6, 5));
    /* A new plan from 1000, before the cut point, works as well: the rest of
     * the old plan is replaced. */
    ask earlier = { .agent = 1, .from = { 1, 1 }, .to = { 12, 1 }, .t0 = 1000 };
    expect_status(stage_reserve(&st, &earlier), PD_OK, "A from earlier");
    stage_end(&st);
}

static void test_start_blocked(void **state)
{
    fixture *f = *state;
    scene s;
    scene_init(&s, core_open_grid(8, 8));
    pd_sipp_result r;
    ask a = { .agent = 1, .from = { 2, 2 }, .to = { 2, 2 } };
    expect_status(reserve(&s, f->t, f->ctx, NULL, &a, &r), PD_OK, "A stands");
    snapshot before;
    take(f->t, &before);
    ask b = { .agent = 2, .from = { 2, 2 }, .to = { 6, 6 }, .t0 = 500 };
    expect_status(reserve(&s, f->t, f->ctx, NULL, &b, &r), PD_START_BLOCKED, "B on A");
    assert_true(r.has_blocker && r.blocker == 1 && r.n_waypoints == 0);
    /* A 2x2 unit whose footprint covers A's cell. */
    ask c = { .agent = 3, .unit = 2, .from = { 1, 1 }, .to = { 5, 5 } };
    expect_status(reserve(&s, f->t, f->ctx, NULL, &c, &r), PD_START_BLOCKED, "2x2 over A");
    assert_true(r.has_blocker && r.blocker == 1);
    assert_unchanged(f->t, &before);
    /* A wall under the start is START_BLOCKED without an agent; the unit
     * must fit. */
    pd_grid_set(s.unit[1], 7, 7, PD_CELL_BLOCKED);
    ask d = { .agent = 4, .from = { 7, 7 }, .to = { 0, 0 } };
    expect_status(reserve(&s, f->t, f->ctx, NULL, &d, &r), PD_START_BLOCKED, "wall");
    assert_false(r.has_blocker);
    ask e = { .agent = 4, .unit = 2, .from = { 7, 0 }, .to = { 0, 0 } };
    expect_status(reserve(&s, f->t, f->ctx, NULL, &e, &r), PD_START_BLOCKED, "2x2 off the edge");
    ask g = { .agent = 4, .from = { 0, 0 }, .to = { 7, 7 } };
    expect_status(reserve(&s, f->t, f->ctx, NULL, &g, &r), PD_GOAL_BLOCKED, "goal on a wall");
    ask h = { .agent = 4, .from = { 0, 0 }, .to = { 8, 7 } };
    expect_status(reserve(&s, f->t, f->ctx, NULL, &h, &r), PD_OUT_OF_BOUNDS, "goal off the map");
    ask bad[] = { { .agent = 4, .unit = PD_UNIT_SIZE_MAX + 1, .to = { 1, 1 } },
                  { .agent = 4, .to = { 1, 1 }, .speed = 2e6 },
                  { .agent = 4, .to = { 1, 1 }, .window = -1 },
                  { .agent = 4, .to = { 1, 1 }, .t0 = -5 },
                  { .agent = 4, .to = { 1, 1 }, .at_goal = (pd_at_goal)7 } };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_status(reserve(&s, f->t, f->ctx, NULL, &bad[i], &r), PD_INVALID_ARGUMENT, "bad argument");
    assert_unchanged(f->t, &before);
    /* Its own reservation never blocks an agent. */
    ask own = { .agent = 1, .from = { 2, 2 }, .to = { 5, 2 }, .t0 = 500 };
    expect_status(reserve(&s, f->t, f->ctx, NULL, &own, &r), PD_OK, "A moves on");
    scene_free(&s);
}

static void test_partial_with_short_window(void **state)
{
    stage st;
    stage_begin(&st, state, "partial_window", core_grid("..............................\n"));
    ask q = { .agent = 1, .from = { 0, 0 }, .to = { 29, 0 }, .window = 3000, .hold = 3000, .speed = 1.0 };
    int rounds = 0;
    pd_status got;
    for (;;) {
        got = stage_reserve(&st, &q);
        rounds++;
        if (got != PD_PARTIAL)
            break;
        /* Handed over at the first cell reached at t0 + window, held for
         * hold_ms from there. */
        const pd_waypoint *last = &st.r.waypoints[st.r.n_waypoints - 1];
        assert_true(last->t_arrive_ms >= q.t0 + 3000 && last->t_arrive_ms < q.t0 + 4000);
        assert_int_equal(st.r.reserved_until_ms, last->t_arrive_ms + 3000);
        assert_true(rounds < 20);
        /* Reserve again from there, halfway through the hold. */
        q.from = (pd_point){ last->x, last->y };
        q.t0 = last->t_arrive_ms + 1500;
    }
    expect_status(got, PD_OK, "the last round");
    assert_int_equal(rounds, 10);
    assert_int_equal(st.r.waypoints[st.r.n_waypoints - 1].x, 29);
    /* Without a bound the handover cell is held until it reserves again. */
    ask back = { .agent = 1, .from = { 29, 0 }, .to = { 0, 0 }, .t0 = q.t0 + 60000, .window = 3000 };
    expect_status(stage_reserve(&st, &back), PD_PARTIAL, "unbounded hold");
    assert_int_equal(st.r.reserved_until_ms, FOREVER);
    assert_int_equal(st.r.waypoints[st.r.n_waypoints - 1].x, 26);
    stage_end(&st);
}

static void test_park_and_vanish(void **state)
{
    stage st;
    stage_begin(&st, state, "park_vanish", core_grid("...........\n"));
    /* A goes to the middle and vanishes there: B may then walk through. */
    ask a = { .agent = 1, .from = { 0, 0 }, .to = { 5, 0 }, .at_goal = PD_AT_GOAL_VANISH };
    expect_status(stage_reserve(&st, &a), PD_OK, "A vanishes");
    assert_int_equal(st.r.reserved_until_ms, 5000);
    assert_int_equal(st.r.waypoints[st.r.n_waypoints - 1].t_leave_ms, 5000);
    ask b = { .agent = 2, .from = { 10, 0 }, .to = { 0, 0 }, .at_goal = PD_AT_GOAL_VANISH };
    expect_status(stage_reserve(&st, &b), PD_OK, "B through");
    /* B waits for A to reach (5,0) and vanish, then walks on: it enters
     * (5,0) from 5000 on, so it is at (0,0) no earlier than 10000. */
    assert_true(st.r.waypoints[st.r.n_waypoints - 1].t_arrive_ms >= 10000);
    /* Now A parks in the middle instead (B released first: on a line, A
     * could not keep out of its way): B has no way past. */
    pd_reserve_release(st.f->t, 2);
    answers_cut(&st.log, "release", 2, 0);
    a.at_goal = PD_AT_GOAL_PARK;
    expect_status(stage_reserve(&st, &a), PD_OK, "A parks");
    assert_int_equal(st.r.reserved_until_ms, FOREVER);
    snapshot before;
    take(st.f->t, &before);
    expect_status(stage_reserve(&st, &b), PD_NO_PATH, "B blocked by a parked agent");
    assert_unchanged(st.f->t, &before);
    /* With a window it gets as close as it can and holds there. */
    b.window = 4000;
    expect_status(stage_reserve(&st, &b), PD_PARTIAL, "B windowed");
    assert_true(st.r.waypoints[st.r.n_waypoints - 1].x >= 6);
    /* Vanishing at the start leaves nothing in the table. */
    pd_reserve_release(st.f->t, 2);
    answers_cut(&st.log, "release", 2, 0);
    ask c = { .agent = 3, .from = { 9, 0 }, .to = { 9, 0 }, .at_goal = PD_AT_GOAL_VANISH };
    expect_status(stage_reserve(&st, &c), PD_OK, "vanish in place");
    assert_int_equal(st.r.n_waypoints, 1);
    pd_reserve_entry e[4];
    assert_int_equal(pd_reserve_query(st.f->t, 9, 0, 9, 0, INT64_MIN, INT64_MAX, e, 4), 0);
    stage_end(&st);
}

/* ---- one agent alone: SIPP is A* over time ---- */

static pd_grid *random_grid(int32_t w, int32_t h, int wall_pct, int terrain)
{
    pd_grid *g = pd_grid_create(w, h);
    assert_non_null(g);
    for (int32_t y = 0; y < h; y++)
        for (int32_t x = 0; x < w; x++) {
            uint8_t v = (int)rnd(100) < wall_pct ? PD_CELL_BLOCKED : (uint8_t)(terrain ? 1 + rnd(4) : 1);
            pd_grid_set(g, x, y, v);
        }
    return g;
}

static pd_point random_open(const pd_grid *ug)
{
    for (;;) {
        pd_point p = { (int32_t)rnd((uint32_t)ug->width), (int32_t)rnd((uint32_t)ug->height) };
        if (pd_grid_get(ug, p.x, p.y))
            return p;
    }
}

static void test_alone_matches_astar(void **state)
{
    fixture *f = *state;
    rng_state = 777;
    pd_search_ctx *sctx = pd_search_ctx_create();
    pd_point path[4096];
    int compared = 0;
    for (int map = 0; map < 12; map++) {
        /* Half the maps with another agent's reservation far off the map:
         * the planner then reads the table for every node, and must find
         * the same. */
        if (map % 4 >= 2) {
            const pd_waypoint far[] = { wp(5000, 5000, 0, FOREVER) };
            assert_int_equal(pd_reserve_replace(f->t, 99, 1, 0, far, 1, NULL), PD_OK);
        } else {
            pd_reserve_release(f->t, 99);
        }
        scene s;
        scene_init(&s, random_grid(40, 30, 25, map % 2));
        for (int q = 0; q < 80; q++) {
            const uint32_t unit = 1 + (uint32_t)(q % 3 == 2);
            const pd_grid *ug = s.unit[unit];
            pd_point a = { (int32_t)rnd(40), (int32_t)rnd(30) }, b = { (int32_t)rnd(40), (int32_t)rnd(30) };
            if (!pd_grid_get(ug, a.x, a.y) || !pd_grid_get(ug, b.x, b.y))
                continue;
            /* One query in five 4-connected. */
            const pd_connectivity conn = q % 5 == 4 ? PD_CONNECT_4 : PD_CONNECT_8;
            pd_search_params sp = { .start = a, .goal = b, .connectivity = conn };
            pd_search_metrics m;
            pd_status want = pd_search_astar(sctx, ug, &sp, path, 4096, &m);
            pd_sipp_result r;
            /* At 0.01 cells a second a step's time is its cost times 1e5
             * ms, rounded up by less than 1 ms: far below the gap between
             * two path costs on maps this small, so the fastest plan is a
             * cheapest path. */
            pd_sipp_params p = { .agent = 1, .unit = unit, .start = a, .goal = b, .speed = 0.01, .connectivity = conn };
            pd_status got = pd_sipp_plan(f->ctx, f->t, ug, &p, &r);
            expect_status(got, want, "SIPP against A*");
            if (got != PD_OK)
                continue;
            if (fabs(r.cost - m.cost) > 1e-9)
                fail_msg("(%d,%d)->(%d,%d) unit %u: SIPP cost %.9f, A* %.9f", a.x, a.y, b.x, b.y, unit, r.cost,
                         m.cost);
            /* No waiting alone, and the arrival is the sum of the steps. */
            const int64_t arrive = r.waypoints[r.n_waypoints - 1].t_arrive_ms;
            assert_int_equal(waited(&r), 0);
            const int64_t exact = (int64_t)(m.cost * 1e5);
            assert_true(arrive >= exact - 1 && arrive <= exact + (int64_t)r.n_waypoints);
            compared++;
        }
        scene_free(&s);
    }
    assert_true(compared > 200);
    pd_search_ctx_destroy(sctx);
}

/* ---- the caller's heuristic: exact static distances ---- */

struct dist_table {
    int32_t w, h;
    double *d;               /* static cost to the goal, INFINITY if none */
};

typedef struct heap_item {
    double d;
    uint32_t cell;
} heap_item;

/* A reverse Dijkstra from goal on unit grid ug, with pd_search's step
 * costs (entering a cell of cost c: c, or c * sqrt(2) diagonally, no
 * corner cutting): what a server would keep per goal. */
static void dist_build(dist_table *t, const pd_grid *ug, pd_point goal)
{
    t->w = ug->width;
    t->h = ug->height;
    const size_t n = (size_t)t->w * (size_t)t->h;
    t->d = malloc(n * sizeof *t->d);
    heap_item *heap = malloc(8 * n * sizeof *heap + sizeof *heap);
    assert_non_null(t->d);
    assert_non_null(heap);
    for (size_t i = 0; i < n; i++)
        t->d[i] = INFINITY;
    size_t hn = 0;
    t->d[goal.y * t->w + goal.x] = 0.0;
    heap[hn++] = (heap_item){ 0.0, (uint32_t)(goal.y * t->w + goal.x) };
    while (hn > 0) {
        heap_item top = heap[0], last = heap[--hn];
        size_t i = 0;
        for (size_t k; (k = 2 * i + 1) < hn; i = k) {
            if (k + 1 < hn && heap[k + 1].d < heap[k].d)
                k++;
            if (heap[k].d >= last.d)
                break;
            heap[i] = heap[k];
        }
        heap[i] = last;
        if (top.d > t->d[top.cell])
            continue;
        const int32_t px = (int32_t)(top.cell % (uint32_t)t->w), py = (int32_t)(top.cell / (uint32_t)t->w);
        const uint8_t cp = pd_grid_get(ug, px, py);
        for (int dy = -1; dy <= 1; dy++)
            for (int dx = -1; dx <= 1; dx++) {
                const int32_t qx = px + dx, qy = py + dy;
                if ((dx == 0 && dy == 0) || !pd_grid_get(ug, qx, qy))
                    continue;
                if (dx && dy && (!pd_grid_get(ug, px, qy) || !pd_grid_get(ug, qx, py)))
                    continue;
                /* The forward step q -> p enters p. */
                const double nd = top.d + (dx && dy ? CORE_SQRT2 * cp : (double)cp);
                double *dq = &t->d[qy * t->w + qx];
                if (nd < *dq) {
                    *dq = nd;
                    size_t j = hn++;
                    for (; j > 0 && heap[(j - 1) / 2].d > nd; j = (j - 1) / 2)
                        heap[j] = heap[(j - 1) / 2];
                    heap[j] = (heap_item){ nd, (uint32_t)(qy * t->w + qx) };
                }
            }
    }
    free(heap);
}

static double dist_lookup(void *user, int32_t x, int32_t y)
{
    const dist_table *t = user;
    return t->d[y * t->w + x];
}

/* Without a caller's heuristic the planner finds exact static times itself
 * (a reverse search from the goal, or probes: static shortest paths), so
 * the static rest after the handover costs no search: on a serpentine 200
 * steps long, a 3 s window expands a handful of states, not the whole way
 * (the octile planner before it expanded every cell of the rest). The plan
 * is the same as with the caller's exact distances, and with probes as with
 * the reverse search alone, which probes spare: one jump point search
 * instead of a search of the whole serpentine. */
static void test_static_rest_not_searched(void **state)
{
    fixture *f = *state;
    /* 21 x 19: open rows joined by a gap at alternate ends. */
    char rows[19][23];
    for (int y = 0; y < 19; y++) {
        for (int x = 0; x < 21; x++)
            rows[y][x] = y % 2 == 0 ? '.' : (y % 4 == 1 ? (x == 20 ? '.' : '#') : (x == 0 ? '.' : '#'));
        rows[y][21] = '\n';
        rows[y][22] = 0;
    }
    char text[19 * 22 + 1] = "";
    for (int y = 0; y < 19; y++)
        strcat(text, rows[y]);
    scene s;
    scene_init(&s, core_grid(text));
    dist_table dt;
    const pd_point goal = { 20, 18 };
    dist_build(&dt, s.unit[1], goal);
    /* SIPP's own search is what this measures: the fast path
     * (pd_sipp_direct.h) would answer an empty table without it. */
    pd_sipp_params p = { .agent = 1, .unit = 1, .start = { 0, 0 }, .goal = goal, .speed = 1.0, .window_ms = 3000,
                         .sipp_only = 1, .reverse_only = 1 };
    pd_sipp_result r;
    expect_status(pd_sipp_plan(f->ctx, f->t, s.unit[1], &p, &r), PD_PARTIAL, "serpentine, own distances");
    assert_int_equal(r.probes, 0);
    print_message("serpentine: %llu expansions, %llu in the reverse search\n", (unsigned long long)r.expanded,
                  (unsigned long long)r.reverse_expanded);
    assert_true(r.expanded <= 12);
    assert_true(r.reverse_expanded >= 190);
    const pd_waypoint last = r.waypoints[r.n_waypoints - 1];
    assert_int_equal(last.x, 3);
    assert_int_equal(last.y, 0);
    assert_int_equal(r.reserved_until_ms, FOREVER);
    /* Probes: the same handover at the same time, from one static path
     * (the start's: its cells are the way the plan goes), a few jump
     * points instead of the serpentine's cells. */
    p.reverse_only = 0;
    expect_status(pd_sipp_plan(f->ctx, f->t, s.unit[1], &p, &r), PD_PARTIAL, "serpentine, probes");
    print_message("serpentine with probes: %llu expansions, %llu probes, %llu jump points\n",
                  (unsigned long long)r.expanded, (unsigned long long)r.probes,
                  (unsigned long long)r.reverse_expanded);
    assert_int_equal(r.probes, 1);
    assert_true(r.reverse_expanded < 190);
    assert_int_equal(r.waypoints[r.n_waypoints - 1].x, last.x);
    assert_int_equal(r.waypoints[r.n_waypoints - 1].y, last.y);
    assert_int_equal(r.waypoints[r.n_waypoints - 1].t_arrive_ms, last.t_arrive_ms);
    p.reverse_only = 1;
    /* The caller's exact distances: the same handover. */
    p.heuristic = dist_lookup;
    p.heuristic_user = &dt;
    expect_status(pd_sipp_plan(f->ctx, f->t, s.unit[1], &p, &r), PD_PARTIAL, "serpentine, caller's distances");
    assert_int_equal(r.waypoints[r.n_waypoints - 1].x, last.x);
    assert_int_equal(r.waypoints[r.n_waypoints - 1].t_arrive_ms, last.t_arrive_ms);
    /* The budget bounds the reverse search as well. */
    p.heuristic = NULL;
    p.max_expansions = 50;
    expect_status(pd_sipp_plan(f->ctx, f->t, s.unit[1], &p, &r), PD_BUDGET_EXCEEDED, "reverse search budget");
    free(dt.d);
    scene_free(&s);
}

static void test_exact_heuristic(void **state)
{
    fixture *f = *state;
    rng_state = 99;
    scene s;
    scene_init(&s, random_grid(36, 28, 22, 1));
    /* A busy table first: 25 agents crossing it (and leaving at their goals,
     * so that most goals stay reachable). */
    for (int i = 0; i < 25; i++) {
        pd_point a = random_open(s.unit[1]), b = random_open(s.unit[1]);
        pd_sipp_result r;
        ask q = { .agent = 500 + (uint64_t)i, .from = a, .to = b, .speed = 1.5, .at_goal = PD_AT_GOAL_VANISH };
        pd_status st = reserve(&s, f->t, f->ctx, NULL, &q, &r);
        assert_true(st == PD_OK || st == PD_NO_PATH || st == PD_START_BLOCKED);
    }
    uint64_t octile_exp = 0, exact_exp = 0;
    int compared = 0;
    for (int q = 0; q < 160; q++) {
        const uint32_t unit = 1 + (uint32_t)(q % 4 == 3);
        pd_point a = random_open(s.unit[unit]), b = random_open(s.unit[unit]);
        dist_table dt;
        dist_build(&dt, s.unit[unit], b);
        pd_sipp_params p = { .agent = 1, .unit = unit, .start = a, .goal = b, .speed = 1.0,
                             .window_ms = q % 2 ? 0 : 5000 };
        pd_sipp_result r1, r2;
        pd_status s1 = pd_sipp_plan(f->ctx, f->t, s.unit[unit], &p, &r1);
        const int64_t t1 = s1 == PD_OK ? r1.waypoints[r1.n_waypoints - 1].t_arrive_ms : -1;
        const uint64_t e1 = r1.expanded + r1.reverse_expanded;
        p.heuristic = dist_lookup;
        p.heuristic_user = &dt;
        pd_status s2 = pd_sipp_plan(f->ctx, f->t, s.unit[unit], &p, &r2);
        expect_status(s2, s1, "the caller's exact heuristic against the planner's own");
        assert_int_equal(r2.reverse_expanded, 0);
        if (s1 == PD_OK) {
            /* Both fastest: the same arrival, whatever way each took. */
            assert_int_equal(r2.waypoints[r2.n_waypoints - 1].t_arrive_ms, t1);
            compared++;
        }
        if (s1 == PD_OK || s1 == PD_PARTIAL) {
            octile_exp += e1;
            exact_exp += r2.expanded;
        }
        free(dt.d);
    }
    print_message("caller's static distances: %llu expansions, the planner's reverse search %llu (%d arrivals "
                  "compared)\n",
                  (unsigned long long)exact_exp, (unsigned long long)octile_exp, compared);
    assert_true(compared > 30);
    assert_true(exact_exp < octile_exp);
    scene_free(&s);
}

/* ---- a randomized simulation on a shared clock ---- */

typedef struct agent {
    uint64_t id;
    uint32_t unit;
    double speed;
    pd_point goal;
    pd_waypoint *plan;      /* its current plan (copied out of the context) */
    size_t n;
    int64_t next;           /* when it decides again */
    int at_goal;            /* the plan was OK: it ends at the goal */
    int cut;                /* its plan was cut since it last got one */
    dist_table dt;          /* static distances to dt_goal, when asked for */
    pd_point dt_goal;
} agent;

/* A random goal the unit can reach from `from` on the map as it is. */
static pd_point random_goal(pd_search_ctx *sctx, const pd_grid *ug, pd_point from)
{
    pd_point g = from;
    for (int tries = 0; tries < 20; tries++) {
        g = random_open(ug);
        pd_search_params sp = { .start = from, .goal = g };
        if (pd_search_astar(sctx, ug, &sp, NULL, 0, NULL) == PD_OK)
            break;
    }
    return g;
}

static void keep_plan(agent *a, const pd_sipp_result *r)
{
    free(a->plan);
    a->plan = malloc(r->n_waypoints * sizeof *a->plan);
    assert_non_null(a->plan);
    memcpy(a->plan, r->waypoints, r->n_waypoints * sizeof *a->plan);
    a->n = r->n_waypoints;
}

typedef struct sim_stats {
    int exact;              /* plan with exact static distances (no blocks) */
    double table_micros;    /* time spent building them */
    uint64_t plans, ok, partial, no_path, stranded, cuts;
    double micros;          /* summed CPU time of the ReservePath calls */
    double *each;           /* each call's, when asked for (a benchmark) */
    size_t n_each, cap_each;
} sim_stats;

static double clock_micros(clockid_t which)
{
    struct timespec ts;
    clock_gettime(which, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Plans are timed on the thread's CPU clock: the machines the tests run on
 * are shared, and wall time would count other processes' turns. */
static double now_micros(void)
{
    return clock_micros(CLOCK_THREAD_CPUTIME_ID);
}

/* A free cell (no one holds it at now) becomes a wall; the plans through
 * it are cut, and so are the simulation's copies of them. */
static void sim_block(scene *s, pd_reserve *t, answers *log, agent *ag, int64_t now, sim_stats *st)
{
    for (int tries = 0; tries < 50; tries++) {
        pd_point c = random_open(s->g);
        if (pd_reserve_query(t, c.x, c.y, c.x, c.y, now, now + 1, NULL, 0) != 0)
            continue;
        scene_block(s, c.x, c.y, c.x, c.y);
        answers_block(log, c.x, c.y, c.x, c.y, now);
        pd_reserve_cut cut[64];
        size_t n = pd_reserve_block(t, c.x, c.y, c.x, c.y, now, cut, 64);
        assert_true(n <= 64);
        for (size_t i = 0; i < n; i++) {
            answers_cut(log, "cut", cut[i].agent, cut[i].until_ms);
            /* Nobody held the cell at now, so every cut is later and none
             * lands on an agent. */
            assert_true(cut[i].until_ms > now && !cut[i].mid_move);
            agent *b = &ag[cut[i].agent - 1000];
            size_t keep = 0;
            while (keep < b->n && b->plan[keep].t_arrive_ms <= cut[i].until_ms)
                keep++;
            assert_true(keep > 0);
            b->n = keep;
            b->plan[keep - 1].t_leave_ms = cut[i].until_ms;
            /* The cut leaves it on the last waypoint before the wall. */
            assert_true(b->plan[keep - 1].x == cut[i].x && b->plan[keep - 1].y == cut[i].y);
            b->at_goal = 0;
            b->cut = 1;
            if (b->next > cut[i].until_ms)
                b->next = cut[i].until_ms;
            st->cuts++;
        }
        return;
    }
}

/* When an agent decides again: `ahead` waypoints on; on the last one,
 * halfway through its hold, or idle_min + up to idle_spread ms later when
 * it parks. */
static int64_t next_decision(const agent *a, int64_t now, int ahead, int64_t idle_min, uint32_t idle_spread)
{
    const int cur = pd_plan_index_at(a->plan, a->n, now);
    assert_true(cur >= 0);
    if (cur + 1 < (int)a->n)
        return a->plan[cur + ahead < (int)a->n ? cur + ahead : (int)a->n - 1].t_arrive_ms;
    const int64_t leave = a->plan[a->n - 1].t_leave_ms;
    return leave == FOREVER || leave <= now ? now + idle_min + rnd(idle_spread) : now + 1 + (leave - now) / 2;
}

/*
 * n_agents agents on scene s, deciding in time order on one clock: at a
 * decision an agent stands on a waypoint of its plan and reserves again from
 * there, toward a new random goal once it has reached its goal. Deciding
 * again a few waypoints on, before reserved_until_ms, is what a game does
 * at 10 Hz. Every `block_every` decisions a free cell becomes a wall.
 * A failed reservation leaves the old plan standing; an agent whose hold
 * ran out stands unreserved ("stranded") until it gets a plan again. With
 * bounded_holds the PARTIAL holds end (pd_sipp.h's hold_ms); without, every
 * plan ends in a hold for good, so only a cut can strand an agent.
 */
static void simulate(scene *s, pd_reserve *t, pd_sipp_ctx *ctx, answers *log, int n_agents, int64_t until,
                     int block_every, int unit2_pct, int bounded_holds, int64_t window, sim_stats *out)
{
    agent *ag = calloc((size_t)n_agents, sizeof *ag);
    pd_search_ctx *sctx = pd_search_ctx_create();
    assert_non_null(ag);
    assert_non_null(sctx);
    sim_stats st = { .exact = out->exact, .each = out->each, .cap_each = out->cap_each };
    /* Everyone stands first, where no one else stands. */
    for (int i = 0; i < n_agents; i++) {
        agent *a = &ag[i];
        a->id = 1000 + (uint64_t)i;
        a->unit = (int)rnd(100) < unit2_pct ? 2 : 1;
        a->speed = 1.0 + rnd(4) * 0.5;
        pd_sipp_result r;
        for (int tries = 0;; tries++) {
            assert_true(tries < 1000);
            a->goal = random_open(s->unit[a->unit]);
            ask q = { .agent = a->id, .unit = a->unit, .from = a->goal, .to = a->goal, .speed = a->speed };
            pd_status rs = reserve(s, t, ctx, log, &q, &r);
            if (rs == PD_OK)
                break;
            expect_status(rs, PD_START_BLOCKED, "standing");
        }
        keep_plan(a, &r);
        a->at_goal = 1;
        a->next = (int64_t)rnd(1000);
    }
    uint64_t decisions = 0;
    for (;;) {
        int who = 0;
        for (int i = 1; i < n_agents; i++)
            if (ag[i].next < ag[who].next)
                who = i;
        agent *a = &ag[who];
        const int64_t now = a->next;
        if (now >= until)
            break;
        const int at = pd_plan_index_at(a->plan, a->n, now);
        assert_true(at >= 0);
        const pd_waypoint here = a->plan[at];
        if (a->at_goal && at + 1 == (int)a->n)
            a->goal = random_goal(sctx, s->unit[a->unit], (pd_point){ here.x, here.y });
        ask q = { .agent = a->id,
                  .unit = a->unit,
                  .from = { here.x, here.y },
                  .to = a->goal,
                  .t0 = now,
                  .speed = a->speed,
                  .window = window >= 0 ? window : rnd(4) == 0 ? 0 : 4000 + 2000 * (int64_t)rnd(3) };
        if (bounded_holds)
            q.hold = q.window;
        if (st.exact && (!a->dt.d || a->dt_goal.x != a->goal.x || a->dt_goal.y != a->goal.y)) {
            const double began = now_micros();
            free(a->dt.d);
            dist_build(&a->dt, s->unit[a->unit], a->goal);
            a->dt_goal = a->goal;
            st.table_micros += now_micros() - began;
        }
        q.heuristic = st.exact ? &a->dt : NULL;
        pd_sipp_result r;
        const double began = now_micros();
        pd_status rs = reserve(s, t, ctx, log, &q, &r);
        const double took = now_micros() - began;
        st.plans++;
        st.micros += took;
        if (st.n_each < st.cap_each)
            st.each[st.n_each++] = took;
        if (rs == PD_OK || rs == PD_PARTIAL) {
            st.ok += rs == PD_OK;
            st.partial += rs == PD_PARTIAL;
            keep_plan(a, &r);
            a->at_goal = rs == PD_OK;
            a->cut = 0;
        } else if (rs == PD_NO_PATH || rs == PD_GOAL_BLOCKED) {
            /* Out of reach (walls, or someone parked on it): another goal. */
            st.no_path++;
            a->goal = random_goal(sctx, s->unit[a->unit], (pd_point){ here.x, here.y });
            a->at_goal = 0;
        } else {
            /* Another agent on its cell is only possible once its own
             * reservations have run out. */
            pd_reserve_cut end;
            if (rs != PD_START_BLOCKED || (pd_reserve_agent_end(t, a->id, &end) && end.until_ms > now) ||
                (!bounded_holds && !a->cut))
                fail_msg("agent %llu at %lld: %s", (unsigned long long)a->id, (long long)now, pd_status_name(rs));
            st.stranded++;
        }
        /* Decide again a few waypoints on; on the last one, halfway
         * through its hold (or a while later when it parks). */
        a->next = pd_plan_next_stop(a->plan, a->n, next_decision(a, now, 4, 500, 2000));

        if (block_every && ++decisions % (uint64_t)block_every == 0)
            sim_block(s, t, log, ag, now, &st);
        if (decisions % 64 == 0)
            pd_reserve_collect(t, now - 20000);
    }
    for (int i = 0; i < n_agents; i++) {
        free(ag[i].plan);
        free(ag[i].dt.d);
    }
    free(ag);
    pd_search_ctx_destroy(sctx);
    *out = st;
}

static void test_random_simulation(void **state)
{
    fixture *f = *state;
    for (int round = 0; round < 3; round++) {
        rng_state = 4242 + (uint64_t)round;
        scene s;
        scene_init(&s, random_grid(32, 32, 12, round == 1));
        answers log;
        char name[64];
        snprintf(name, sizeof name, "random_sim_%d", round);
        answers_open(&log, name, s.g);
        pd_reserve_destroy(f->t);
        f->t = pd_reserve_create(NULL);
        sim_stats st = { 0 };
        /* Round 1 bounds the PARTIAL holds (pd_sipp.h): agents get left
         * standing unreserved ("stranded") more often. */
        simulate(&s, f->t, f->ctx, &log, 30, 120000, 40, 20, round == 1, -1, &st);
        print_message("round %d: %llu plans (%llu OK, %llu PARTIAL, %llu NO_PATH, %llu stranded), %llu cuts, "
                      "mean %.0f us\n",
                      round, (unsigned long long)st.plans, (unsigned long long)st.ok, (unsigned long long)st.partial,
                      (unsigned long long)st.no_path, (unsigned long long)st.stranded, (unsigned long long)st.cuts,
                      st.micros / (double)st.plans);
        assert_true(st.ok > 50 && st.partial > 20 && st.cuts > 0);
        check_table(f->t, 32, 32);
        answers_check(&log);
        scene_free(&s);
    }
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* A figure, not a check: PD_RESERVE_BENCH=1 runs 500 agents (20% of unit
 * 2) on den520d for PD_RESERVE_BENCH_MS of game time (default 60 s) with
 * windows of PD_RESERVE_BENCH_WINDOW ms (default 8000; -1 mixes 0 and
 * 4000..8000 as the randomized test does) and prints ReservePath's rate
 * and latency; the checker replays every answer. PD_RESERVE_BENCH_EXACT=1
 * gives each agent a reverse Dijkstra table to its goal as the heuristic
 * (built when the goal changes, timed apart: a server would cache them). */
static void test_bench_den520d(void **state)
{
    fixture *f = *state;
    if (!getenv("PD_RESERVE_BENCH"))
        skip();
    const int64_t until = getenv("PD_RESERVE_BENCH_MS") ? atoll(getenv("PD_RESERVE_BENCH_MS")) : 60000;
    char path[1024];
    snprintf(path, sizeof path, "%s/maps/den520d.map", PD_MOVINGAI_DIR);
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    static char buf[1 << 20];
    size_t len = fread(buf, 1, sizeof buf, fp);
    fclose(fp);
    scene s;
    scene_init(&s, pd_map_parse_movingai(buf, len, NULL));
    answers log;
    answers_open(&log, "bench_den520d", s.g);
    rng_state = 520;
    sim_stats st = { .cap_each = 1u << 22, .exact = getenv("PD_RESERVE_BENCH_EXACT") && atoi(getenv("PD_RESERVE_BENCH_EXACT")) };
    st.each = malloc(st.cap_each * sizeof *st.each);
    assert_non_null(st.each);
    const double began = clock_micros(CLOCK_MONOTONIC);
    const int64_t window = getenv("PD_RESERVE_BENCH_WINDOW") ? atoll(getenv("PD_RESERVE_BENCH_WINDOW"))
                                                            : PD_RESERVE_DEFAULT_WINDOW_MS;
    simulate(&s, f->t, f->ctx, &log, 500, until, 0, 20, 0, window, &st);
    const double wall = (clock_micros(CLOCK_MONOTONIC) - began) / 1e6;
    qsort(st.each, st.n_each, sizeof *st.each, cmp_double);
    pd_reserve_stats ts;
    pd_reserve_get_stats(f->t, &ts);
    print_message("den520d, 500 agents, %s, %lld s of game time: %llu ReservePath (%llu OK, %llu PARTIAL, %llu NO_PATH, "
                  "%llu stranded) in %.2f CPU s of planning, %.0f per CPU second; mean %.0f us, p50 %.0f us, p99 %.0f us, "
                  "max %.0f us; simulation wall time %.1f s (%.2f s building distance tables); table %llu entries, %zu "
                  "KiB\n",
                  st.exact ? "exact static distances" : "octile", (long long)(until / 1000), (unsigned long long)st.plans, (unsigned long long)st.ok,
                  (unsigned long long)st.partial, (unsigned long long)st.no_path, (unsigned long long)st.stranded,
                  st.micros / 1e6, (double)st.plans / (st.micros / 1e6), st.micros / (double)st.plans,
                  st.each[st.n_each / 2], st.each[st.n_each * 99 / 100], st.each[st.n_each - 1], wall,
                  st.table_micros / 1e6,
                  (unsigned long long)ts.entries, ts.bytes / 1024);
    free(st.each);
    answers_check(&log);
    scene_free(&s);
}

/* ---- moving holders aside (pd_yield.h) ---- */

/* One agent of a small simulation: its plan as the game keeps it. */
typedef struct yagent {
    uint64_t id;
    pd_point goal;
    pd_waypoint wp[256];
    size_t n;
} yagent;

static void yagent_set(yagent *a, const pd_waypoint *wp, size_t n)
{
    assert_true(n <= 256);
    memcpy(a->wp, wp, n * sizeof *wp);
    a->n = n;
}

/* Where a's plan has it standing from t on, and when. */
static pd_point yagent_at(const yagent *a, int64_t t, int64_t *t0)
{
    *t0 = pd_plan_next_stop(a->wp, a->n, t);
    const int i = pd_plan_index_at(a->wp, a->n, *t0);
    assert_true(i >= 0);
    return (pd_point){ a->wp[i].x, a->wp[i].y };
}

/* ReservePath through pd_yield_reserve (after_ms 0: never moves anyone);
 * every plan, the displaced agents' too, to the log, and the displaced
 * agents' new plans taken as the game would take them. */
static pd_status yreserve(stage *st, pd_yield_ctx *yc, yagent *ag, size_t n_ag, yagent *a, int64_t t,
                          int64_t window, int64_t after_ms, pd_yield_result *yr)
{
    const pd_grid *grids[2] = { NULL, st->s.unit[1] };
    const pd_yield_params y = { .after_ms = after_ms, .unit_grids = grids, .max_unit = 1 };
    int64_t t0;
    const pd_point from = yagent_at(a, t, &t0);
    const pd_sipp_params p = { .agent = a->id, .unit = 1, .start = from, .goal = a->goal, .t0_ms = t0,
                               .speed = 1.0, .window_ms = window };
    pd_status got = pd_yield_reserve(yc, st->f->ctx, st->f->t, st->s.unit[1], &p, &y, &st->r, yr);
    if (got == PD_OK || got == PD_PARTIAL) {
        answers_plan(&st->log, a->id, 1, 1.0, t0, st->r.waypoints, st->r.n_waypoints);
        yagent_set(a, st->r.waypoints, st->r.n_waypoints);
    }
    for (size_t d = 0; d < yr->n_displaced; d++) {
        const pd_displaced *dp = &yr->displaced[d];
        assert_true(dp->agent != a->id);
        answers_plan(&st->log, dp->agent, dp->unit, dp->speed, dp->t0_ms, dp->waypoints, dp->n_waypoints);
        for (size_t i = 0; i < n_ag; i++)
            if (ag[i].id == dp->agent) {
                /* It was standing on its hold: the new plan starts there. */
                assert_int_equal(ag[i].wp[ag[i].n - 1].x, dp->waypoints[0].x);
                assert_int_equal(ag[i].wp[ag[i].n - 1].y, dp->waypoints[0].y);
                assert_int_equal(dp->waypoints[0].t_arrive_ms, dp->t0_ms);
                yagent_set(&ag[i], dp->waypoints, dp->n_waypoints);
            }
    }
    return got;
}

/* Two agents head on in a one-wide corridor with no pocket, between two
 * small rooms, each standing in the corridor in the other's way. Plain
 * prioritised planning leaves them there for good (each plans around the
 * other's hold); with holders moved aside the one that waited longer sends
 * the other back into its room and both reach their goals. Returns the time
 * both stood on their goals, or -1 when they did not within 120 s. */
static int64_t corridor_duel(void **state, int64_t after_ms, const char *name)
{
    stage st;
    stage_begin(&st, state, name, core_grid("...#########...\n"
                                            "...............\n"
                                            "...#########...\n"));
    pd_yield_ctx *yc = pd_yield_ctx_create();
    assert_non_null(yc);
    yagent ag[2] = { { .id = 1, .goal = { 13, 1 } }, { .id = 2, .goal = { 1, 1 } } };
    const pd_point at[2] = { { 6, 1 }, { 8, 1 } };
    pd_yield_result yr;
    /* B stands first (t = 0), A from t = 1000: B has waited longer. */
    for (int i = 1; i >= 0; i--) {
        const pd_waypoint hold = { at[i].x, at[i].y, i ? 0 : 1000, FOREVER };
        yagent_set(&ag[i], &hold, 1);
        const pd_sipp_params p = { .agent = ag[i].id, .unit = 1, .start = at[i], .goal = at[i],
                                   .t0_ms = hold.t_arrive_ms, .speed = 1.0 };
        expect_status(pd_yield_reserve(yc, st.f->ctx, st.f->t, st.s.unit[1], &p, NULL, &st.r, &yr), PD_OK,
                      "stand");
        answers_plan(&st.log, p.agent, 1, 1.0, p.t0_ms, st.r.waypoints, st.r.n_waypoints);
    }
    int64_t done = -1;
    for (int64_t t = 3000; t <= 120000 && done < 0; t += 500) {
        for (int i = 0; i < 2; i++) {
            int64_t t0;
            const pd_point here = yagent_at(&ag[i], t, &t0);
            if (here.x == ag[i].goal.x && here.y == ag[i].goal.y && ag[i].wp[ag[i].n - 1].t_leave_ms == FOREVER &&
                ag[i].wp[ag[i].n - 1].x == here.x && ag[i].wp[ag[i].n - 1].y == here.y)
                continue;
            const pd_status got = yreserve(&st, yc, ag, 2, &ag[i], t, 4000, after_ms, &yr);
            assert_true(got == PD_OK || got == PD_PARTIAL);
            if (after_ms > 0 && t == 3000) {
                /* At 3000 A has stood 2000 ms, B 3000: A may not move B
                 * (B waited longer), but B may move A. */
                assert_int_equal(yr.n_displaced, i == 0 ? 0 : 1);
                if (i == 1)
                    assert_int_equal(yr.displaced[0].agent, 1);
            }
        }
        int64_t t0a, t0b;
        const pd_point pa = yagent_at(&ag[0], t, &t0a), pb = yagent_at(&ag[1], t, &t0b);
        if (pa.x == 13 && pa.y == 1 && pb.x == 1 && pb.y == 1)
            done = t;
    }
    stage_end(&st);
    pd_yield_ctx_destroy(yc);
    return done;
}

static void test_yield_corridor_head_on(void **state)
{
    /* Without moving holders: a deadlock, the test's premise. */
    assert_int_equal(corridor_duel(state, 0, "yield_off_corridor"), -1);
    /* With it: both arrive, and the checker finds nothing wrong. */
    const int64_t done = corridor_duel(state, 2000, "yield_corridor");
    assert_true(done > 0);
    assert_true(done <= 40000);
}

/* The parking rule's test on its own: a footprint blocks no one when the
 * free cells around it form one run. */
static void test_yield_clear_hold_rule(void **state)
{
    (void)state;
    pd_grid *g = core_grid("...#########...\n"
                           "...............\n"
                           "...#########...\n"
                           "...............\n"
                           "...............\n");
    const pd_grid *one[2] = { NULL, g };
    assert_int_equal(pd_yield_clear_hold(one, 1, NULL, 1, 6, 1), 0);  /* mid corridor */
    assert_int_equal(pd_yield_clear_hold(one, 1, NULL, 1, 3, 1), 0);  /* its end */
    assert_int_equal(pd_yield_clear_hold(one, 1, NULL, 1, 2, 1), 0);  /* its mouth, in the room */
    assert_int_equal(pd_yield_clear_hold(one, 1, NULL, 1, 0, 1), 1);  /* against the room's wall */
    assert_int_equal(pd_yield_clear_hold(one, 1, NULL, 1, 1, 0), 1);  /* the map's edge is a wall */
    assert_int_equal(pd_yield_clear_hold(one, 1, NULL, 1, 6, 3), 1);  /* a two-wide hall: one lane left */
    assert_int_equal(pd_yield_clear_hold(one, 1, NULL, 2, 6, 3), 0);  /* a 2 x 2 unit fills it */
    assert_int_equal(pd_yield_clear_hold(one, 1, NULL, 2, 0, 0), 1);
    pd_grid_destroy(g);
}

/* The rule for the larger units: a hold that leaves a lane a 1 x 1 can
 * pass but a 2 x 2 cannot blocks the 2 x 2s, and another agent's hold for
 * good narrows a street as a wall does. */
static void test_yield_clear_hold_units(void **state)
{
    (void)state;
    scene s3, s5;
    scene_init(&s3, core_grid("............\n"
                              "............\n"
                              "............\n")); /* a three-wide street */
    scene_init(&s5, core_grid("..............\n"
                              "..............\n"
                              "..............\n"
                              "..............\n"
                              "..............\n")); /* a five-wide street */
    const pd_grid *const *u3 = (const pd_grid *const *)s3.unit, *const *u5 = (const pd_grid *const *)s5.unit;
    /* A 2 x 2 against the top wall, a 1 x 1 in the middle: the unit-1
     * ring is one run round each, and no 2 x 2 gets by. */
    assert_int_equal(pd_yield_clear_hold(u3, 1, NULL, 2, 5, 0), 1);
    assert_int_equal(pd_yield_clear_hold(u3, 2, NULL, 2, 5, 0), 0);
    assert_int_equal(pd_yield_clear_hold(u3, 1, NULL, 1, 5, 1), 1);
    assert_int_equal(pd_yield_clear_hold(u3, 2, NULL, 1, 5, 1), 0);
    assert_int_equal(pd_yield_clear_hold(u3, 2, NULL, 1, 0, 1), 1);  /* the street's end: nothing beyond */
    /* Five wide: a 1 x 1 one cell off the top wall leaves three rows
     * below it, room for a 2 x 2. */
    assert_int_equal(pd_yield_clear_hold(u5, 2, NULL, 1, 6, 1), 1);
    /* Another agent holding (6, 3) for good leaves one row between them:
     * clear for a 1 x 1 (the holds are not beside each other), not for a
     * 2 x 2. A hold that ends is no wall. */
    pd_reserve *t = pd_reserve_create(NULL);
    assert_non_null(t);
    const pd_waypoint held = { 6, 3, 0, PD_RESERVE_FOREVER };
    assert_int_equal(pd_reserve_replace(t, 9, 1, 0, &held, 1, NULL), PD_OK);
    assert_int_equal(pd_yield_clear_hold(u5, 1, t, 1, 6, 1), 1);
    assert_int_equal(pd_yield_clear_hold(u5, 2, t, 1, 6, 1), 0);
    assert_int_equal(pd_yield_clear_hold(u5, 2, t, 1, 6, 0), 1);  /* against the wall: two rows left */
    const pd_waypoint until = { 6, 3, 0, 5000 };
    assert_int_equal(pd_reserve_replace(t, 9, 1, 0, &until, 1, NULL), PD_OK);
    assert_int_equal(pd_yield_clear_hold(u5, 2, t, 1, 6, 1), 1);
    pd_reserve_destroy(t);
    scene_free(&s3);
    scene_free(&s5);
}

/* A 2 x 2's PARTIAL plan through a three-wide street: with the rule for
 * the larger units it reserves on to the far side, where nothing it
 * leaves behind closes the street; with the unit-1 ring alone it holds
 * in the street, where no other 2 x 2 can pass it. */
static void test_yield_clear_hold_plan_units(void **state)
{
    stage st;
    stage_begin(&st, state, "yield_clear_hold_units", core_grid("....############............\n"
                                                                "............................\n"
                                                                "............................\n"
                                                                "............................\n"
                                                                "....############............\n"));
    pd_yield_ctx *yc = pd_yield_ctx_create();
    assert_non_null(yc);
    for (uint32_t max_unit = 1; max_unit <= 2; max_unit++) {
        const pd_yield_params y = { .unit_grids = (const pd_grid *const *)st.s.unit, .max_unit = max_unit,
                                    .clear_holds = 1 };
        const pd_sipp_params p = { .agent = max_unit, .unit = 2, .start = { 0, 1 }, .goal = { 26, 2 },
                                   .t0_ms = 100000 * (max_unit - 1), .speed = 1.0, .window_ms = 6000 };
        pd_yield_result yr;
        expect_status(pd_yield_reserve(yc, st.f->ctx, st.f->t, st.s.unit[2], &p, &y, &st.r, &yr), PD_PARTIAL,
                      "a 2 x 2 into the street");
        answers_plan(&st.log, p.agent, 2, 1.0, p.t0_ms, st.r.waypoints, st.r.n_waypoints);
        const pd_waypoint *last = &st.r.waypoints[st.r.n_waypoints - 1];
        if (max_unit == 2)
            assert_true(last->x >= 16 && last->x < 26); /* past the street (x 4..15) */
        else
            assert_true(last->x >= 4 && last->x <= 14); /* in it */
        pd_reserve_release(st.f->t, p.agent);
        answers_cut(&st.log, "release", p.agent, 100000 * (max_unit - 1) + 99999);
    }
    pd_yield_ctx_destroy(yc);
    stage_end(&st);
}

/* hold_ok records each anchor it is asked about. */
typedef struct hold_asked {
    pd_point cell;
    int calls, asked_cell;
} hold_asked;

static int hold_ok_counting(void *user, int32_t x, int32_t y)
{
    hold_asked *h = user;
    h->calls++;
    h->asked_cell += x == h->cell.x && y == h->cell.y;
    return 1;
}

/* hold_ok is asked only where the agent could hold: pd_yield's clear
 * holds read the table round the anchor for every unit size the scene
 * has, and was asked of every state the search tried, most of which could
 * never be a handover (Berlin_0_256, 500 agents, 120 s, the scene's unit
 * sizes 1 to 16: SIPP's p99 6.4 ms, 5.0 asked only where holdable; 1.5
 * with the unit-1 ring alone). Agent 2 parks at (3, 1) from 5 s on: agent
 * 1, passing it before then, could never hold there. */
static void test_sipp_hold_ok_asked_where_holdable(void **state)
{
    (void)state;
    pd_grid *g = core_grid("..........\n"
                           "..........\n"
                           "..........\n");
    pd_reserve *t = pd_reserve_create(NULL);
    pd_sipp_ctx *ctx = pd_sipp_ctx_create();
    assert_non_null(g);
    assert_non_null(t);
    assert_non_null(ctx);
    const pd_waypoint parked = { 3, 1, 5000, PD_RESERVE_FOREVER };
    assert_int_equal(pd_reserve_replace(t, 2, 1, 5000, &parked, 1, NULL), PD_OK);
    hold_asked h = { .cell = { 3, 1 } };
    const pd_sipp_params p = { .agent = 1, .unit = 1, .start = { 0, 1 }, .goal = { 9, 1 }, .t0_ms = 0,
                               .speed = 1.0, .window_ms = 2500, .sipp_only = 1, .hold_ok = hold_ok_counting,
                               .hold_user = &h };
    pd_sipp_result r;
    memset(&r, 0, sizeof r);
    expect_status(pd_sipp_plan(ctx, t, g, &p, &r), PD_PARTIAL, "past the parked agent's cell");
    assert_true(r.waypoints[r.n_waypoints - 1].x >= 3); /* it went by (3, 1) */
    assert_true(h.calls > 0);
    assert_int_equal(h.asked_cell, 0);
    pd_sipp_ctx_destroy(ctx);
    pd_reserve_destroy(t);
    pd_grid_destroy(g);
}

/* With clear holds a PARTIAL plan does not stop in a corridor: it reserves
 * on to the far side. Without, it holds where the window ends. */
static void test_yield_clear_hold_plan(void **state)
{
    stage st;
    stage_begin(&st, state, "yield_clear_hold", core_grid("...#########...\n"
                                                          "...............\n"
                                                          "...#########...\n"));
    pd_yield_ctx *yc = pd_yield_ctx_create();
    assert_non_null(yc);
    const pd_grid *grids[2] = { NULL, st.s.unit[1] };
    for (int clear = 0; clear < 2; clear++) {
        const pd_yield_params y = { .unit_grids = grids, .max_unit = 1, .clear_holds = clear };
        const pd_sipp_params p = { .agent = 1 + (uint64_t)clear, .unit = 1, .start = { 0, 1 }, .goal = { 14, 1 },
                                   .t0_ms = 100000 * clear, .speed = 1.0, .window_ms = 4000 };
        pd_yield_result yr;
        expect_status(pd_yield_reserve(yc, st.f->ctx, st.f->t, st.s.unit[1], &p, &y, &st.r, &yr), PD_PARTIAL,
                      "through the corridor");
        answers_plan(&st.log, p.agent, 1, 1.0, p.t0_ms, st.r.waypoints, st.r.n_waypoints);
        const pd_waypoint *last = &st.r.waypoints[st.r.n_waypoints - 1];
        if (clear)
            assert_true(last->x >= 12 && pd_yield_clear_hold(grids, 1, NULL, 1, last->x, last->y));
        else
            assert_true(last->x <= 4);
        assert_int_equal(yr.n_displaced, 0);
        if (!clear) {
            pd_reserve_release(st.f->t, p.agent);
            answers_cut(&st.log, "release", p.agent, 100000);
        }
    }
    pd_yield_ctx_destroy(yc);
    stage_end(&st);
}

/* test_yield_undone's stage: A stands at (5, 0) from 0, B at (6, 0) from
 * 500 (A waited longer), on one row of 8 cells. */
static void undone_stage(stage *st, pd_yield_ctx *yc, const pd_yield_params *y)
{
    pd_yield_result yr;
    const pd_sipp_params a0 = { .agent = 1, .unit = 1, .start = { 5, 0 }, .goal = { 5, 0 }, .speed = 1.0 };
    const pd_sipp_params b0 = { .agent = 2, .unit = 1, .start = { 6, 0 }, .goal = { 6, 0 }, .t0_ms = 500,
                                .speed = 1.0 };
    expect_status(pd_yield_reserve(yc, st->f->ctx, st->f->t, st->s.unit[1], &a0, y, &st->r, &yr), PD_OK, "A");
    answers_plan(&st->log, 1, 1, 1.0, 0, st->r.waypoints, st->r.n_waypoints);
    expect_status(pd_yield_reserve(yc, st->f->ctx, st->f->t, st->s.unit[1], &b0, y, &st->r, &yr), PD_OK, "B");
    answers_plan(&st->log, 2, 1, 1.0, 500, st->r.waypoints, st->r.n_waypoints);
}

/* A holder that has nowhere off the requester's way to go stays exactly
 * as it was, and the requester gets its usual plan. */
static void test_yield_undone(void **state)
{
    stage st;
    stage_begin(&st, state, "yield_undone", core_grid("........\n"));
    pd_yield_ctx *yc = pd_yield_ctx_create();
    assert_non_null(yc);
    const pd_grid *grids[2] = { NULL, st.s.unit[1] };
    const pd_yield_params y = { .after_ms = 1000, .unit_grids = grids, .max_unit = 1 };
    pd_yield_result yr;
    undone_stage(&st, yc, &y);
    pd_reserve_entry before[16], after[16];
    const size_t nb = pd_reserve_query(st.f->t, 6, 0, 6, 0, 0, FOREVER, before, 16);
    /* A, standing 3000 ms, asks for (7, 0) beyond B: B may be moved, but
     * the one cell left to it is on A's way. */
    const pd_sipp_params a1 = { .agent = 1, .unit = 1, .start = { 5, 0 }, .goal = { 7, 0 }, .t0_ms = 3000,
                                .speed = 1.0, .window_ms = 4000 };
    expect_status(pd_yield_reserve(yc, st.f->ctx, st.f->t, st.s.unit[1], &a1, &y, &st.r, &yr), PD_PARTIAL, "A again");
    answers_plan(&st.log, 1, 1, 1.0, 3000, st.r.waypoints, st.r.n_waypoints);
    assert_true(yr.tried);
    assert_true(yr.undone);
    assert_int_equal(yr.n_displaced, 0);
    /* A holds where it stands, short of B, as plain planning has it. */
    assert_int_equal(st.r.n_waypoints, 1);
    assert_int_equal(st.r.waypoints[0].x, 5);
    /* B's reservations are what they were, renewal time included. */
    const size_t na = pd_reserve_query(st.f->t, 6, 0, 6, 0, 0, FOREVER, after, 16);
    assert_int_equal(na, nb);
    assert_memory_equal(after, before, na * sizeof *after);
    pd_reserve_agent_info info;
    assert_true(pd_reserve_agent_info_get(st.f->t, 2, &info));
    assert_int_equal(info.renewed_ms, 500);
    assert_true(info.holds);
    assert_int_equal(info.hold_since, 500);
    assert_int_equal(pd_reserve_standing_since(st.f->t, 1, 5, 0, 3000), 0);
    assert_int_equal(pd_reserve_standing_since(st.f->t, 1, 4, 0, 3000), 3000);
    pd_yield_ctx_destroy(yc);
    stage_end(&st);
}

/* Moving aside after moving ahead (aside_after_ahead): two 2 x 2s of the
 * agents bench on Berlin_0_256 that stood for good side by side. A parks
 * at `a` (t0 0), B at `b` (t0 500, so A stood longer); A then asks for
 * `goal` (t0 3000), and B is on its way. Moving ahead is undone (`why`),
 * every attempt; moved aside, B steps off A's whole way first and A waits
 * for it. Returns whether A's plan reached its goal. */
typedef struct pair_stage {
    const char *grid;
    pd_point a, b, goal;
    int why;
} pair_stage;

static int pair_moves(void **state, const pair_stage *ps, int aside_after_ahead, const char *name)
{
    stage st;
    stage_begin(&st, state, name, core_grid(ps->grid));
    pd_yield_ctx *yc = pd_yield_ctx_create();
    assert_non_null(yc);
    const pd_yield_params y = { .after_ms = 2000, .unit_grids = (const pd_grid *const *)st.s.unit, .max_unit = 2,
                                .clear_holds = 1, .move_ahead = 1, .park_any = 1,
                                .aside_after_ahead = aside_after_ahead };
    pd_yield_result yr;
    const pd_sipp_params a0 = { .agent = 1, .unit = 2, .start = ps->a, .goal = ps->a, .speed = 1.5 };
    const pd_sipp_params b0 = { .agent = 2, .unit = 2, .start = ps->b, .goal = ps->b, .t0_ms = 500, .speed = 1.5 };
    expect_status(pd_yield_reserve(yc, st.f->ctx, st.f->t, st.s.unit[2], &a0, &y, &st.r, &yr), PD_OK, "A parks");
    answers_plan(&st.log, 1, 2, 1.5, 0, st.r.waypoints, st.r.n_waypoints);
    expect_status(pd_yield_reserve(yc, st.f->ctx, st.f->t, st.s.unit[2], &b0, &y, &st.r, &yr), PD_OK, "B parks");
    answers_plan(&st.log, 2, 2, 1.5, 500, st.r.waypoints, st.r.n_waypoints);
    const pd_sipp_params a1 = { .agent = 1, .unit = 2, .start = ps->a, .goal = ps->goal, .t0_ms = 3000,
                                .speed = 1.5, .window_ms = 8000 };
    const pd_status sa = pd_yield_reserve(yc, st.f->ctx, st.f->t, st.s.unit[2], &a1, &y, &st.r, &yr);
    assert_true(sa == PD_OK || sa == PD_PARTIAL);
    answers_plan(&st.log, 1, 2, 1.5, 3000, st.r.waypoints, st.r.n_waypoints);
    assert_true(yr.tried);
    assert_true(yr.ahead);
    const pd_waypoint *last = &st.r.waypoints[st.r.n_waypoints - 1];
    const int reached = sa == PD_OK && last->x == ps->goal.x && last->y == ps->goal.y;
    if (reached) {
        assert_int_equal(yr.outcome, PD_YIELD_OUT_KEPT_ASIDE);
        assert_int_equal(yr.undone, 0);
        assert_int_equal(yr.n_displaced, 1);
        const pd_displaced *d = &yr.displaced[0];
        assert_int_equal(d->agent, 2);
        answers_plan(&st.log, 2, 2, 1.5, d->t0_ms, d->waypoints, d->n_waypoints);
        /* B parks off every footprint of A's way (the checker below
         * judges the times). */
        const pd_waypoint *bl = &d->waypoints[d->n_waypoints - 1];
        assert_int_equal(bl->t_leave_ms, FOREVER);
        for (size_t i = 0; i < st.r.n_waypoints; i++)
            assert_true(abs(bl->x - st.r.waypoints[i].x) >= 2 || abs(bl->y - st.r.waypoints[i].y) >= 2);
    } else {
        assert_int_equal(yr.outcome, PD_YIELD_OUT_AHEAD_UNDONE);
        assert_int_equal(yr.undone_why, ps->why);
        assert_int_equal(yr.n_displaced, 0);
    }
    pd_yield_ctx_destroy(yc);
    stage_end(&st);
    return reached;
}

/* The dead end at x 229-244, y 122-130: A parked at the pocket's top
 * (9, 2) wants out to (11, 5); B parked at its mouth (10, 5), where A's
 * way ends. Moving ahead reserves A's way from t0 on, so B, whose only way
 * off it is west past the pocket's mouth, finds no anchor in time (2). */
static void test_yield_aside_after_ahead(void **state)
{
    const pair_stage ps = { ".....######.####\n"
                                            "...#######..####\n"
                                            "..#######...####\n"
                                            "...#####....####\n"
                                            "#...##.......###\n"
                                            "#............###\n"
                                            "##...........###\n"
                                            "##........######\n"
                                            "###.....########\n", { 9, 2 }, { 10, 5 }, { 11, 5 }, 2 };
    assert_int_equal(pair_moves(state, &ps, 0, "yield_pocket_ahead_only"), 0);
    assert_int_equal(pair_moves(state, &ps, 1, "yield_pocket_aside_after_ahead"), 1);
}

/* The chamber at x 226-245, y 118-133 (seed 1: agents 474 and 45): A
 * parked at (8, 9) wants the pocket up at (12, 6); B parked beside it at
 * (10, 8), on A's way. A's first move already touches B's footprint, so
 * moving ahead has nothing to cut (4). */
static void test_yield_aside_when_ahead_meets_at_once(void **state)
{
    const pair_stage ps = { "..............######\n"
                                            ".............#######\n"
                                            "...........#########\n"
                                            ".........###########\n"
                                            "........######.#####\n"
                                            "......#######..#####\n"
                                            ".....#######...#####\n"
                                            "..#...#####....#####\n"
                                            "####...##.......####\n"
                                            "####............####\n"
                                            "#####...........####\n"
                                            "#####........#######\n"
                                            "######.....#########\n"
                                            "#######..###########\n"
                                            "#######...##########\n"
                                            "########...#########\n", { 8, 9 }, { 10, 8 }, { 12, 6 }, 4 };
    assert_int_equal(pair_moves(state, &ps, 0, "yield_chamber_ahead_only"), 0);
    assert_int_equal(pair_moves(state, &ps, 1, "yield_chamber_aside_after_ahead"), 1);
}

/* Backing off (retry_max_ms): a requester whose attempt was undone, still
 * standing, does not try again (plans no P1) on its next request until its
 * wait crosses the next threshold (after_ms 1000: 1000, 2000, 4000, ...
 * since its last request); with the rule off (< 0) it tries on every
 * request. Returns how many of its three requests tried. */
static int backoff_tries(void **state, int64_t retry_max_ms, const char *name)
{
    stage st;
    stage_begin(&st, state, name, core_grid("........\n"));
    pd_yield_ctx *yc = pd_yield_ctx_create();
    assert_non_null(yc);
    const pd_grid *grids[2] = { NULL, st.s.unit[1] };
    const pd_yield_params y = { .after_ms = 1000, .unit_grids = grids, .max_unit = 1, .retry_max_ms = retry_max_ms };
    pd_yield_result yr;
    /* As test_yield_undone: B has nowhere off A's way to (7, 0). */
    undone_stage(&st, yc, &y);
    /* A asks for (7, 0) at 3000 (tried, undone), 3500 (its wait, 3000 at
     * its last request, crossed no threshold) and 4000 (crossed 4000). */
    static const int64_t at[3] = { 3000, 3500, 4000 };
    int tries = 0;
    for (int i = 0; i < 3; i++) {
        const pd_sipp_params a1 = { .agent = 1, .unit = 1, .start = { 5, 0 }, .goal = { 7, 0 }, .t0_ms = at[i],
                                    .speed = 1.0, .window_ms = 4000 };
        expect_status(pd_yield_reserve(yc, st.f->ctx, st.f->t, st.s.unit[1], &a1, &y, &st.r, &yr), PD_PARTIAL,
                      "A again");
        answers_plan(&st.log, 1, 1, 1.0, at[i], st.r.waypoints, st.r.n_waypoints);
        /* Tried or not, the same plan: A holds short of B, who stays. */
        assert_int_equal(st.r.n_waypoints, 1);
        assert_int_equal(st.r.waypoints[0].x, 5);
        assert_int_equal(yr.n_displaced, 0);
        assert_int_equal(yr.undone, yr.tried);
        if (i != 1)
            assert_true(yr.tried);
        tries += yr.tried;
    }
    pd_reserve_agent_info info;
    assert_true(pd_reserve_agent_info_get(st.f->t, 2, &info));
    assert_int_equal(info.hold_since, 500);
    pd_yield_ctx_destroy(yc);
    stage_end(&st);
    return tries;
}

static void test_yield_backoff(void **state)
{
    assert_int_equal(backoff_tries(state, 0, "yield_backoff"), 2);
    assert_int_equal(backoff_tries(state, -1, "yield_no_backoff"), 3);
}

/* The way round (take_free_way): a one-wide corridor (row 0) where H
 * stands for good - it stood before R, so R may not move it - and a longer
 * way round by row 3. R's windowed plans bet on the corridor (the static
 * rest after the window knows nothing of H): it walks up to H and stands
 * there, every move back costing more than standing. R's P1 goes round and
 * crosses no hold, so there is nobody to move: without the rule R stands
 * for good, with it R takes P1. Returns when R stood on its goal, -1 when
 * not within 120 s. */
static int64_t way_round(void **state, int take, const char *name)
{
    stage st;
    stage_begin(&st, state, name, core_grid("...............\n"
                                            ".#############.\n"
                                            ".#############.\n"
                                            "...............\n"));
    pd_yield_ctx *yc = pd_yield_ctx_create();
    assert_non_null(yc);
    const pd_grid *grids[2] = { NULL, st.s.unit[1] };
    const pd_yield_params y = { .after_ms = 1000, .unit_grids = grids, .max_unit = 1, .take_free_way = take };
    const uint64_t h = take ? 21 : 11, rid = h + 1;
    yagent r = { .id = rid, .goal = { 13, 0 } };
    pd_yield_result yr;
    const pd_sipp_params hp = { .agent = h, .unit = 1, .start = { 9, 0 }, .goal = { 9, 0 }, .speed = 1.0 };
    expect_status(pd_yield_reserve(yc, st.f->ctx, st.f->t, st.s.unit[1], &hp, NULL, &st.r, &yr), PD_OK, "H stands");
    answers_plan(&st.log, h, 1, 1.0, 0, st.r.waypoints, st.r.n_waypoints);
    const pd_waypoint stand = { 3, 0, 1000, FOREVER };
    yagent_set(&r, &stand, 1);
    const pd_sipp_params rp = { .agent = rid, .unit = 1, .start = { 3, 0 }, .goal = { 3, 0 }, .t0_ms = 1000,
                                .speed = 1.0 };
    expect_status(pd_yield_reserve(yc, st.f->ctx, st.f->t, st.s.unit[1], &rp, NULL, &st.r, &yr), PD_OK, "R stands");
    answers_plan(&st.log, rid, 1, 1.0, 1000, st.r.waypoints, st.r.n_waypoints);
    int64_t done = -1;
    for (int64_t t = 2000; t <= 120000 && done < 0; t += 500) {
        int64_t t0;
        const pd_point here = yagent_at(&r, t, &t0);
        if (here.x == r.goal.x && here.y == r.goal.y && r.wp[r.n - 1].t_leave_ms == FOREVER &&
            r.wp[r.n - 1].x == here.x && r.wp[r.n - 1].y == here.y) {
            done = t;
            break;
        }
        if (t0 > t)
            continue;
        const pd_sipp_params p = { .agent = rid, .unit = 1, .start = here, .goal = r.goal, .t0_ms = t0,
                                   .speed = 1.0, .window_ms = 4000 };
        const pd_status got = pd_yield_reserve(yc, st.f->ctx, st.f->t, st.s.unit[1], &p, &y, &st.r, &yr);
        assert_true(got == PD_OK || got == PD_PARTIAL);
        assert_int_equal(yr.n_displaced, 0); /* H stood longer: never moved */
        answers_plan(&st.log, rid, 1, 1.0, t0, st.r.waypoints, st.r.n_waypoints);
        yagent_set(&r, st.r.waypoints, st.r.n_waypoints);
    }
    pd_reserve_release(st.f->t, h);
    pd_reserve_release(st.f->t, rid);
    answers_cut(&st.log, "release", h, 130000);
    answers_cut(&st.log, "release", rid, 130000);
    pd_yield_ctx_destroy(yc);
    stage_end(&st);
    return done;
}

static void test_yield_takes_the_way_round(void **state)
{
    assert_int_equal(way_round(state, 0, "yield_no_way_round"), -1);
    const int64_t done = way_round(state, 1, "yield_way_round");
    assert_true(done > 0);
    assert_true(done <= 60000);
}

/* Stands agent id (speed 1) on `at` from t0 for good, through
 * pd_yield_reserve with no rule, and logs it. */
static void stand_at(stage *st, pd_yield_ctx *yc, uint64_t id, pd_point at, int64_t t0)
{
    pd_yield_result yr;
    const pd_sipp_params p = { .agent = id, .unit = 1, .start = at, .goal = at, .t0_ms = t0, .speed = 1.0 };
    expect_status(pd_yield_reserve(yc, st->f->ctx, st->f->t, st->s.unit[1], &p, NULL, &st->r, &yr), PD_OK, "stand");
    answers_plan(&st->log, id, 1, 1.0, t0, st->r.waypoints, st->r.n_waypoints);
}

/* Logs R's answer and the plans of the agents it moved (for the checker). */
static void log_moves(stage *st, uint64_t rid, int64_t t0, const pd_yield_result *yr)
{
    answers_plan(&st->log, rid, 1, 1.0, t0, st->r.waypoints, st->r.n_waypoints);
    for (size_t d = 0; d < yr->n_displaced; d++) {
        const pd_displaced *dp = &yr->displaced[d];
        answers_plan(&st->log, dp->agent, dp->unit, dp->speed, dp->t0_ms, dp->waypoints, dp->n_waypoints);
    }
}

/* The stage of the corridor tests below: a one-wide corridor (row 1, x
 * 3-11) between two rooms, and a yield context. */
static pd_yield_ctx *yield_begin(stage *st, void **state, const char *name, pd_grid *g)
{
    stage_begin(st, state, name, g);
    pd_yield_ctx *yc = pd_yield_ctx_create();
    assert_non_null(yc);
    return yc;
}

static pd_yield_ctx *corridor_begin(stage *st, void **state, const char *name)
{
    return yield_begin(st, state, name, core_grid("...#########......\n"
                                                  "..................\n"
                                                  "...#########......\n"));
}

/* Releases agents first..last (logged for the checker) and ends the stage. */
static void agents_end(stage *st, pd_yield_ctx *yc, uint64_t first, uint64_t last)
{
    for (uint64_t id = first; id <= last; id++) {
        pd_reserve_release(st->f->t, id);
        answers_cut(&st->log, "release", id, 90000);
    }
    pd_yield_ctx_destroy(yc);
    stage_end(st);
}

/* Moving holders ahead (move_ahead): a one-wide corridor (row 1, x 3-11)
 * between two rooms. R (from 0) stands at its west mouth (2, 1), H1 (from
 * 1000) in it at (4, 1) and H2 at (9, 1); R's goal is in the east room.
 * Off R's whole way (row 1) H1 cannot get: H2 holds the corridor east of
 * it and R its mouth west - so moving holders aside fails, and H2, beyond
 * R's 3 s window, is not even asked. Moved ahead in time, both walk east
 * before R into the room and park there, and R's plan reaches its goal. */
static void moves_ahead(void **state, int ahead, const char *name)
{
    stage st;
    pd_yield_ctx *yc = corridor_begin(&st, state, name);
    const pd_grid *grids[2] = { NULL, st.s.unit[1] };
    const pd_yield_params y = { .after_ms = 1000, .unit_grids = grids, .max_unit = 1, .move_ahead = ahead };
    const uint64_t base = ahead ? 60 : 50, rid = base + 1, h1 = base + 2, h2 = base + 3;
    stand_at(&st, yc, rid, (pd_point){ 2, 1 }, 0);
    stand_at(&st, yc, h1, (pd_point){ 4, 1 }, 1000);
    stand_at(&st, yc, h2, (pd_point){ 9, 1 }, 1000);
    pd_yield_result yr;
    const pd_sipp_params p = { .agent = rid, .unit = 1, .start = { 2, 1 }, .goal = { 16, 1 }, .t0_ms = 3000,
                               .speed = 1.0, .window_ms = 3000 };
    const pd_status got = pd_yield_reserve(yc, st.f->ctx, st.f->t, st.s.unit[1], &p, &y, &st.r, &yr);
    assert_true(got == PD_OK || got == PD_PARTIAL);
    log_moves(&st, rid, 3000, &yr);
    assert_true(yr.tried);
    if (ahead) {
        expect_status(got, PD_OK, "R all the way");
        assert_int_equal(yr.n_displaced, 2);
        assert_int_equal(st.r.waypoints[st.r.n_waypoints - 1].x, 16);
        /* Both stand in the east room at the end, off the corridor. */
        for (size_t d = 0; d < 2; d++)
            assert_true(yr.displaced[d].waypoints[yr.displaced[d].n_waypoints - 1].x >= 12);
    } else {
        assert_int_equal(yr.n_displaced, 0);
        expect_status(got, PD_PARTIAL, "R short of H1");
    }
    agents_end(&st, yc, rid, h2);
}

static void test_yield_moves_ahead(void **state)
{
    moves_ahead(state, 0, "yield_no_move_ahead");
    moves_ahead(state, 1, "yield_move_ahead");
}

/* A chain longer than 4 (PD_YIELD_MAX_DISPLACED, raised from 4 to 16 for
 * Berlin_0_256's jams): a one-wide corridor (row 1, x 3-15) between two
 * rooms, R at its west mouth (2, 1) from 0 and six holders in it from 1000
 * at x 4, 6, ..., 14; R's goal is in the east room. Moving ahead moves a
 * chain whole or not at all, so with a cap of 4 holders (max_displaced 4,
 * the old limit) no one moves and R stays short of the first; with the
 * default cap all six walk east before R and park in the room. */
static void moves_a_chain(void **state, uint32_t cap, const char *name)
{
    stage st;
    stage_begin(&st, state, name, core_grid("...#############........\n"
                                            "........................\n"
                                            "...#############........\n"));
    pd_yield_ctx *yc = pd_yield_ctx_create();
    assert_non_null(yc);
    const pd_grid *grids[2] = { NULL, st.s.unit[1] };
    const pd_yield_params y = { .after_ms = 1000, .unit_grids = grids, .max_unit = 1, .move_ahead = 1,
                                .max_displaced = cap };
    const uint64_t base = cap ? 110 : 90, rid = base + 1;
    enum { CHAIN = 6 };
    stand_at(&st, yc, rid, (pd_point){ 2, 1 }, 0);
    for (int i = 0; i < CHAIN; i++)
        stand_at(&st, yc, rid + 1 + (uint64_t)i, (pd_point){ 4 + 2 * i, 1 }, 1000);
    pd_yield_result yr;
    const pd_sipp_params p = { .agent = rid, .unit = 1, .start = { 2, 1 }, .goal = { 22, 1 }, .t0_ms = 3000,
                               .speed = 1.0, .window_ms = 3000 };
    const pd_status got = pd_yield_reserve(yc, st.f->ctx, st.f->t, st.s.unit[1], &p, &y, &st.r, &yr);
    assert_true(got == PD_OK || got == PD_PARTIAL);
    log_moves(&st, rid, 3000, &yr);
    assert_true(yr.tried);
    if (!cap) {
        expect_status(got, PD_OK, "R all the way");
        assert_int_equal(yr.n_displaced, CHAIN);
        assert_int_equal(st.r.waypoints[st.r.n_waypoints - 1].x, 22);
        /* All stand in the east room at the end, off the corridor. */
        for (size_t d = 0; d < CHAIN; d++)
            assert_true(yr.displaced[d].waypoints[yr.displaced[d].n_waypoints - 1].x >= 16);
    } else {
        assert_int_equal(yr.n_displaced, 0);
        expect_status(got, PD_PARTIAL, "R short of the first holder");
    }
    for (uint64_t id = rid; id <= rid + CHAIN; id++) {
        pd_reserve_release(st.f->t, id);
        answers_cut(&st.log, "release", id, 90000);
    }
    pd_yield_ctx_destroy(yc);
    stage_end(&st);
}

static void test_yield_moves_a_chain(void **state)
{
    moves_a_chain(state, 4, "yield_chain_capped");
    moves_a_chain(state, 0, "yield_chain");
}

/* Giving way (give_way_ms): the holder that stood longest gives way to
 * one still standing behind it. A one-wide corridor (row 1, x 3-11)
 * between two rooms: H has stood in it at (5, 1) since 0 (its own goal,
 * say, or stuck), R at its west mouth (2, 1) since 1000, and R's goal is
 * in the east room. At 20 s R has stood 19 s, less than H, so by the
 * priority rule alone H may not be moved and R stays short of it for good
 * (Berlin_0_256's knots: a longest waiter whose way no one may clear).
 * With give_way_ms 16 s, H, standing past it, is moved ahead of R into
 * the east room and R's plan reaches its goal. */
static void gives_way(void **state, int64_t give_way_ms, const char *name)
{
    stage st;
    pd_yield_ctx *yc = corridor_begin(&st, state, name);
    const pd_grid *grids[2] = { NULL, st.s.unit[1] };
    const pd_yield_params y = { .after_ms = 1000, .unit_grids = grids, .max_unit = 1, .move_ahead = 1,
                                .give_way_ms = give_way_ms };
    const uint64_t base = give_way_ms ? 130 : 120, rid = base + 1, h = base + 2;
    stand_at(&st, yc, h, (pd_point){ 5, 1 }, 0);
    stand_at(&st, yc, rid, (pd_point){ 2, 1 }, 1000);
    pd_yield_result yr;
    const pd_sipp_params p = { .agent = rid, .unit = 1, .start = { 2, 1 }, .goal = { 16, 1 }, .t0_ms = 20000,
                               .speed = 1.0, .window_ms = 3000 };
    const pd_status got = pd_yield_reserve(yc, st.f->ctx, st.f->t, st.s.unit[1], &p, &y, &st.r, &yr);
    assert_true(got == PD_OK || got == PD_PARTIAL);
    log_moves(&st, rid, 20000, &yr);
    assert_true(yr.tried);
    if (give_way_ms) {
        expect_status(got, PD_OK, "R all the way");
        assert_int_equal(yr.n_displaced, 1);
        assert_int_equal(yr.displaced[0].agent, h);
        assert_int_equal(st.r.waypoints[st.r.n_waypoints - 1].x, 16);
        assert_true(yr.displaced[0].waypoints[yr.displaced[0].n_waypoints - 1].x >= 12);
    } else {
        assert_int_equal(yr.n_displaced, 0);
        expect_status(got, PD_PARTIAL, "R short of H");
        assert_true(st.r.waypoints[st.r.n_waypoints - 1].x < 5);
    }
    agents_end(&st, yc, rid, h);
}

static void test_yield_gives_way(void **state)
{
    gives_way(state, 0, "yield_no_give_way");
    gives_way(state, 16000, "yield_give_way");
}

/* Coming in at its own door (door_ms): R stands in a pocket at (5, 3),
 * one step below its goal (5, 2) in a corridor (row 2) that a ring (rows
 * 0-2, open at both ends) joins back to itself. M, planned all the way
 * from the east end (20, 2) at 1 s to park at the west end (0, 2), crosses
 * R's goal at about 15 s, far after R's window (t0 3 s + 3 s), and a hold
 * is for good: without the rule R may not park, and stands short of its
 * goal (den520d's agents at their door, docs/BENCHMARKS.md, seventh
 * pass). With door_ms 1 s M keeps its plan up to its first waypoint from
 * 6 s on (15, 2), R parks on its goal, and M is re-planned from there
 * round the ring to its old end, never through R's goal. */
static void comes_in_at_door(void **state, int64_t door_ms, const char *name)
{
    stage st;
    pd_yield_ctx *yc = yield_begin(&st, state, name, core_grid(".....................\n"
                                                               ".###################.\n"
                                                               ".....................\n"
                                                               "#####.###############\n"));
    const pd_grid *grids[2] = { NULL, st.s.unit[1] };
    const pd_yield_params y = { .after_ms = 1000, .unit_grids = grids, .max_unit = 1, .move_ahead = 1,
                                .door_ms = door_ms };
    const uint64_t base = door_ms ? 150 : 140, rid = base + 1, m = base + 2;
    stand_at(&st, yc, rid, (pd_point){ 5, 3 }, 0);
    pd_yield_result yr;
    const pd_sipp_params pm = { .agent = m, .unit = 1, .start = { 20, 2 }, .goal = { 0, 2 }, .t0_ms = 1000,
                                .speed = 1.0 };
    expect_status(pd_yield_reserve(yc, st.f->ctx, st.f->t, st.s.unit[1], &pm, NULL, &st.r, &yr), PD_OK, "M");
    answers_plan(&st.log, m, 1, 1.0, 1000, st.r.waypoints, st.r.n_waypoints);
    assert_true(visits(&st.r, 5, 2));
    const pd_sipp_params p = { .agent = rid, .unit = 1, .start = { 5, 3 }, .goal = { 5, 2 }, .t0_ms = 3000,
                               .speed = 1.0, .window_ms = 3000 };
    const pd_status got = pd_yield_reserve(yc, st.f->ctx, st.f->t, st.s.unit[1], &p, &y, &st.r, &yr);
    assert_true(got == PD_OK || got == PD_PARTIAL);
    log_moves(&st, rid, 3000, &yr);
    if (door_ms) {
        expect_status(got, PD_OK, "R parks on its goal");
        assert_int_equal(yr.outcome, PD_YIELD_OUT_KEPT_DOOR);
        const pd_waypoint *end = &st.r.waypoints[st.r.n_waypoints - 1];
        assert_true(end->x == 5 && end->y == 2 && end->t_leave_ms == FOREVER);
        assert_int_equal(yr.n_displaced, 1);
        const pd_displaced *d = &yr.displaced[0];
        assert_int_equal(d->agent, m);
        assert_true(d->t0_ms >= 6000);
        assert_true(d->waypoints[0].x == 15 && d->waypoints[0].y == 2 && d->waypoints[0].t_arrive_ms == d->t0_ms);
        const pd_waypoint *mend = &d->waypoints[d->n_waypoints - 1];
        assert_true(mend->x == 0 && mend->y == 2 && mend->t_leave_ms == FOREVER);
        for (size_t i = 0; i < d->n_waypoints; i++)
            assert_false(d->waypoints[i].x == 5 && d->waypoints[i].y == 2);
    } else {
        expect_status(got, PD_PARTIAL, "R short of its goal");
        assert_int_equal(yr.n_displaced, 0);
    }
    agents_end(&st, yc, rid, m);
}

static void test_yield_comes_in_at_door(void **state)
{
    comes_in_at_door(state, 0, "yield_no_door");
    comes_in_at_door(state, 1000, "yield_door");
}

/* The stage of the door reviews below: R stands below its goal at
 * `pocket` from 0, and M is planned all the way (no yield) from `from` at
 * 1 s to park at `to`, across R's goal far after R's window. */
static pd_yield_ctx *door_begin(stage *st, void **state, const char *name, pd_grid *g, uint64_t rid, pd_point pocket,
                                uint64_t m, pd_point from, pd_point to)
{
    pd_yield_ctx *yc = yield_begin(st, state, name, g);
    stand_at(st, yc, rid, pocket, 0);
    pd_yield_result yr;
    const pd_sipp_params pm = { .agent = m, .unit = 1, .start = from, .goal = to, .t0_ms = 1000, .speed = 1.0 };
    expect_status(pd_yield_reserve(yc, st->f->ctx, st->f->t, st->s.unit[1], &pm, NULL, &st->r, &yr), PD_OK, "M");
    answers_plan(&st->log, m, 1, 1.0, 1000, st->r.waypoints, st->r.n_waypoints);
    return yc;
}

/* R's request at 3 s (window 3 s, door_ms 1 s) from `pocket` to the cell
 * above it. */
static pd_status door_request(stage *st, pd_yield_ctx *yc, uint64_t rid, pd_point pocket, pd_yield_result *yr)
{
    const pd_grid *grids[2] = { NULL, st->s.unit[1] };
    const pd_yield_params y = { .after_ms = 1000, .unit_grids = grids, .max_unit = 1, .move_ahead = 1,
                                .door_ms = 1000 };
    const pd_sipp_params p = { .agent = rid, .unit = 1, .start = pocket, .goal = { pocket.x, pocket.y - 1 },
                               .t0_ms = 3000, .speed = 1.0, .window_ms = 3000 };
    return pd_yield_reserve(yc, st->f->ctx, st->f->t, st->s.unit[1], &p, &y, &st->r, yr);
}

/* Coming in at its own door with no way round (review of issue 34's
 * eighth pass): the corridor of comes_in_at_door without its ring. R
 * stands in the pocket (5, 1) below its goal (5, 0); M, planned all the
 * way from (20, 0) to park at (0, 0), crosses R's goal far after R's
 * window. The only way from M's cut to its end is through R's goal: once
 * R parks there for good M can never reach its end, so the rule must not
 * park R. Before the fix M's new plan was a PARTIAL one holding (12, 0)
 * for good, behind R's hold. */
static void test_yield_door_no_way_round(void **state)
{
    stage st;
    const uint64_t rid = 161, m = 162;
    pd_yield_ctx *yc = door_begin(&st, state, "yield_door_no_way_round",
                                  core_grid(".....................\n"
                                            "#####.###############\n"),
                                  rid, (pd_point){ 5, 1 }, m, (pd_point){ 20, 0 }, (pd_point){ 0, 0 });
    pd_yield_result yr;
    const pd_status got = door_request(&st, yc, rid, (pd_point){ 5, 1 }, &yr);
    assert_true(got == PD_OK || got == PD_PARTIAL);
    log_moves(&st, rid, 3000, &yr);
    for (size_t d = 0; d < yr.n_displaced; d++) {
        const pd_displaced *dp = &yr.displaced[d];
        const pd_waypoint *e = &dp->waypoints[dp->n_waypoints - 1];
        assert_true(e->x == 0 && e->y == 0); /* M's new plan still reaches where its old one ended */
    }
    agents_end(&st, yc, rid, m);
}

/* First come at a goal: M, planned all the way from (20, 0) at 1 s, is to
 * park on (5, 0) at about 16 s - the goal R stands one step below. Two
 * goals over one cell; R is there first. Before, a hold crossing R's goal
 * stopped the door (a hold was the holders' business, and M was not
 * holding yet): R stood below its goal until M came, for good. Now R
 * parks, and M's plan, cut at (15, 0) at 6 s, stops short of the goal
 * taken (PARTIAL): the game sees it cannot get there while R stands. */
static void test_yield_door_first_come(void **state)
{
    stage st;
    const uint64_t rid = 195, m = 196;
    pd_yield_ctx *yc = door_begin(&st, state, "yield_door_first_come",
                                  core_grid(".....................\n"
                                            "#####.###############\n"),
                                  rid, (pd_point){ 5, 1 }, m, (pd_point){ 20, 0 }, (pd_point){ 5, 0 });
    pd_yield_result yr;
    const pd_status got = door_request(&st, yc, rid, (pd_point){ 5, 1 }, &yr);
    log_moves(&st, rid, 3000, &yr);
    expect_status(got, PD_OK, "R parks on its goal");
    assert_int_equal(yr.outcome, PD_YIELD_OUT_KEPT_DOOR);
    const pd_waypoint *end = &st.r.waypoints[st.r.n_waypoints - 1];
    assert_true(end->x == 5 && end->y == 0 && end->t_leave_ms == FOREVER);
    assert_int_equal(yr.n_displaced, 1);
    const pd_displaced *d = &yr.displaced[0];
    assert_int_equal(d->agent, m);
    assert_true(d->waypoints[0].x == 15 && d->waypoints[0].y == 0 && d->t0_ms == 6000);
    const pd_waypoint *mend = &d->waypoints[d->n_waypoints - 1];
    assert_false(mend->x == 5 && mend->y == 0);
    agents_end(&st, yc, rid, m);
}

/* Coming in at its own door, undone under a lowered limit (review of
 * issue 34's eighth pass): comes_in_at_door's ring, but the table's
 * max_entries is lowered (as a config reload does: pd_reservations_lock
 * sets the limits on every lock) below what it holds once M has planned.
 * M's plan round the ring needs more entries than its straight one, so
 * its re-plan is refused and the door is undone; the undo must give M its
 * plan back exactly. Before the fix the limit refused the restore and M
 * was left cut at its waypoint (21 waypoints, then 6), untold. */
static void test_yield_door_undo_under_limit(void **state)
{
    stage st;
    const uint64_t rid = 171, m = 172;
    pd_yield_ctx *yc = door_begin(&st, state, "yield_door_undo_limit",
                                  core_grid(".....................\n"
                                            ".###################.\n"
                                            ".....................\n"
                                            "#####.###############\n"),
                                  rid, (pd_point){ 5, 3 }, m, (pd_point){ 20, 2 }, (pd_point){ 0, 2 });
    pd_waypoint before[64], after[64];
    const size_t nb = pd_reserve_agent_plan(st.f->t, m, 0, before, 64);
    assert_true(nb > 2 && nb <= 64);
    pd_reserve_stats stats;
    pd_reserve_get_stats(st.f->t, &stats);
    const pd_reserve_limits lowered = { .max_entries = stats.entries - 1 }, none = { 0 };
    pd_reserve_set_limits(st.f->t, &lowered);
    pd_yield_result yr;
    const pd_status got = door_request(&st, yc, rid, (pd_point){ 5, 3 }, &yr);
    pd_reserve_set_limits(st.f->t, &none);
    assert_false(yr.outcome == PD_YIELD_OUT_KEPT_DOOR);
    assert_int_equal(pd_reserve_agent_plan(st.f->t, m, 0, after, 64), nb); /* M's plan as it was */
    assert_memory_equal(after, before, nb * sizeof *before);
    if (got == PD_OK || got == PD_PARTIAL)
        log_moves(&st, rid, 3000, &yr);
    agents_end(&st, yc, rid, m);
}

/* When agent `slot` first holds cell (x, y) at or after `from` (INT64_MAX:
 * never). */
static int64_t first_hold(const pd_reserve *t, uint32_t slot, int32_t x, int32_t y, int64_t from)
{
    size_t n;
    const pd_reserve_span *s = pd_reserve_cell(t, x, y, &n);
    for (size_t i = 0; i < n; i++)
        if (s[i].slot == slot && s[i].t1 > from)
            return s[i].t0 > from ? s[i].t0 : from;
    return INT64_MAX;
}

/* Coming in at its own door, undone over a gap in M's reservations
 * (review of issue 34's eighth pass): the corridor without a ring of
 * test_yield_door_no_way_round. M's first plan from (20, 0) at 1 s
 * crosses R's goal at about 16 s and vanishes on (0, 0) at 21 s; M then
 * reserved again from (0, 0) at 30 s to park on (1, 0). M has no way
 * round R's goal, so the door is undone (or not tried). Before the fix
 * pd_reserve_agent_plan read M's two plans as one (no waypoint for the
 * 30 s start), and the restore made a move from (0, 0) at 21 s to (1, 0)
 * at 31 s: M held (1, 0) from 21 s, a cell it had left free until 30 s. */
static void test_yield_door_undo_over_a_gap(void **state)
{
    stage st;
    const uint64_t rid = 181, m = 182;
    pd_yield_ctx *yc = yield_begin(&st, state, "yield_door_undo_gap", core_grid(".....................\n"
                                                                               "#####.###############\n"));
    stand_at(&st, yc, rid, (pd_point){ 5, 1 }, 0);
    pd_yield_result yr;
    const pd_sipp_params pm = { .agent = m, .unit = 1, .start = { 20, 0 }, .goal = { 0, 0 }, .t0_ms = 1000,
                                .speed = 1.0, .at_goal = PD_AT_GOAL_VANISH };
    expect_status(pd_yield_reserve(yc, st.f->ctx, st.f->t, st.s.unit[1], &pm, NULL, &st.r, &yr), PD_OK, "M");
    answers_plan(&st.log, m, 1, 1.0, 1000, st.r.waypoints, st.r.n_waypoints);
    const pd_sipp_params pm2 = { .agent = m, .unit = 1, .start = { 0, 0 }, .goal = { 1, 0 }, .t0_ms = 30000,
                                 .speed = 1.0 };
    expect_status(pd_yield_reserve(yc, st.f->ctx, st.f->t, st.s.unit[1], &pm2, NULL, &st.r, &yr), PD_OK, "M again");
    const uint32_t ms = pd_reserve_agent_slot(st.f->t, m);
    const int64_t before = first_hold(st.f->t, ms, 1, 0, 25000);
    assert_int_equal(before, 30000);
    const pd_status got = door_request(&st, yc, rid, (pd_point){ 5, 1 }, &yr);
    assert_true(got == PD_OK || got == PD_PARTIAL);
    assert_false(yr.outcome == PD_YIELD_OUT_KEPT_DOOR);
    assert_int_equal(first_hold(st.f->t, ms, 1, 0, 25000), before); /* M's reservations as they were */
    pd_yield_ctx_destroy(yc);
    for (uint64_t id = rid; id <= m; id++)
        pd_reserve_release(st.f->t, id);
    check_table(st.f->t, st.s.g->width, st.s.g->height);
    scene_free(&st.s);
    fclose(st.log.f);
}

/* Crossing at last (cross_ms): a T - a street (row 0) and a one-wide
 * lane down from (10, 0). R stands at the street's west end (0, 0) from
 * 0 and wants its east end (20, 0); M, planned all the way from the lane's
 * foot (10, 10) at 1 s, comes up the lane to park at (10, 0) at 11 s, for
 * good across R's way. R asks at 5 s (window 3 s): every plan on the
 * table stops short of (10, 0) for good. With the rule M's plan is cut at
 * its first waypoint from 8 s on ((10, 3) at 8 s), R gets its way to the
 * goal, and M comes up behind R to park where it meant to. */
static void crosses_at_last(void **state, int64_t cross_ms, uint64_t long_expansions, uint64_t max_expansions,
                            const char *name)
{
    stage st;
    const uint64_t rid = 191, m = 192;
    pd_yield_ctx *yc = yield_begin(&st, state, name,
                                   core_grid(".....................\n"
                                             "##########.##########\n"
                                             "##########.##########\n"
                                             "##########.##########\n"
                                             "##########.##########\n"
                                             "##########.##########\n"
                                             "##########.##########\n"
                                             "##########.##########\n"
                                             "##########.##########\n"
                                             "##########.##########\n"
                                             "##########.##########\n"));
    stand_at(&st, yc, rid, (pd_point){ 0, 0 }, 0);
    pd_yield_result yr;
    const pd_sipp_params pm = { .agent = m, .unit = 1, .start = { 10, 10 }, .goal = { 10, 0 }, .t0_ms = 1000,
                                .speed = 1.0 };
    expect_status(pd_yield_reserve(yc, st.f->ctx, st.f->t, st.s.unit[1], &pm, NULL, &st.r, &yr), PD_OK, "M");
    answers_plan(&st.log, m, 1, 1.0, 1000, st.r.waypoints, st.r.n_waypoints);
    const pd_grid *grids[2] = { NULL, st.s.unit[1] };
    const pd_yield_params y = { .after_ms = 1000, .unit_grids = grids, .max_unit = 1, .move_ahead = 1,
                                .cross_ms = cross_ms, .long_expansions = long_expansions };
    const pd_sipp_params p = { .agent = rid, .unit = 1, .start = { 0, 0 }, .goal = { 20, 0 }, .t0_ms = 5000,
                               .speed = 1.0, .window_ms = 3000, .max_expansions = max_expansions };
    const pd_status got = pd_yield_reserve(yc, st.f->ctx, st.f->t, st.s.unit[1], &p, &y, &st.r, &yr);
    log_moves(&st, rid, 5000, &yr);
    const pd_waypoint *end = &st.r.waypoints[st.r.n_waypoints - 1];
    if (cross_ms && !max_expansions) {
        expect_status(got, PD_OK, "R reaches its goal");
        assert_int_equal(yr.outcome, PD_YIELD_OUT_KEPT_CROSS);
        assert_int_equal(yr.cross_why, 0);
        assert_true(end->x == 20 && end->y == 0 && end->t_leave_ms == FOREVER);
        assert_int_equal(yr.n_displaced, 1);
        const pd_displaced *d = &yr.displaced[0];
        assert_int_equal(d->agent, m);
        assert_int_equal(d->t0_ms, 8000);
        assert_true(d->waypoints[0].x == 10 && d->waypoints[0].y == 3 && d->waypoints[0].t_arrive_ms == 8000);
        const pd_waypoint *mend = &d->waypoints[d->n_waypoints - 1];
        assert_true(mend->x == 10 && mend->y == 0 && mend->t_leave_ms == FOREVER);
        int64_t r_left = -1;
        for (size_t i = 0; i < st.r.n_waypoints; i++)
            if (st.r.waypoints[i].x == 10 && st.r.waypoints[i].y == 0)
                r_left = st.r.waypoints[i].t_leave_ms;
        assert_true(r_left > 0 && mend->t_arrive_ms >= r_left); /* M parks behind R */
    } else {
        expect_status(got, PD_PARTIAL, "R short of its goal");
        assert_true(end->x < 10 && end->t_leave_ms == FOREVER);
        assert_int_equal(yr.n_displaced, 0);
        /* Not tried (0), or R's plan through M's ran past the request's
         * own budget (1). */
        assert_int_equal(yr.cross_why, cross_ms ? 1 : 0);
    }
    agents_end(&st, yc, rid, m);
}

static void test_yield_crosses_at_last(void **state)
{
    crosses_at_last(state, 0, 0, 0, "yield_no_cross");
    crosses_at_last(state, 2000, 0, 0, "yield_cross");
    /* The request's own max_expansions, when lower, bounds it: R's plan
     * through M's takes 20 here. */
    crosses_at_last(state, 2000, 0, 10, "yield_cross_request_capped");
    /* The crossing's plan has its own budget: the long plans' (here one
     * expansion) does not bound it. */
    crosses_at_last(state, 2000, 1, 0, "yield_cross_long_capped");
}

/* Crossing jointly (joint): two rooms joined by a street two cells high
 * (rows 2-3, x 6-19), too narrow for two 2 x 2 units. R (2 x 2, speed 2)
 * stands in the west room at (1, 4) from 0 and wants the east room's
 * (24, 2); M (2 x 2, speed 1), planned all the way at 1 s from the east
 * room's (22, 2), comes west through the street to park at (0, 0). R asks
 * at 5 s (window 3 s): M's plan fills the street until about 20 s, so R
 * stands short. Crossing at last cuts M at its first waypoint from 8 s on,
 * already in the street, and R, twice as fast, would catch it before it
 * could back out: M's re-plan round R finds no path (cross_why 11) and R
 * stays short. Planned together (R and M, one tick at a time), R steps
 * back into the west room off the street's rows, M comes through past it,
 * and R goes east through the street behind M; M parks where it meant to. */
static void crosses_jointly(void **state, int joint, int wide, const char *name)
{
    stage st;
    const uint64_t rid = 211, m = 212;
    static const char *const rows[6] = { "......##############......", "......##############......",
                                         "..........................", "..........................",
                                         "......##############......", "......##############......" };
    /* wide: the same street in the corner of a 600 x 500 scene, walls
     * elsewhere - past the joint search's 512 x 512 cells. */
    const int w = wide ? 600 : 26, h = wide ? 500 : 6;
    char *text = malloc((size_t)(w + 1) * (size_t)h + 1), *c = text;
    assert_non_null(text);
    for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++)
            *c++ = y < 6 && x < 26 ? rows[y][x] : '#';
        *c++ = '\n';
    }
    *c = 0;
    pd_yield_ctx *yc = yield_begin(&st, state, name, core_grid(text));
    free(text);
    pd_yield_result yr;
    const pd_sipp_params pr = { .agent = rid, .unit = 2, .start = { 1, 4 }, .goal = { 1, 4 }, .speed = 2.0 };
    expect_status(pd_yield_reserve(yc, st.f->ctx, st.f->t, st.s.unit[2], &pr, NULL, &st.r, &yr), PD_OK, "R stands");
    answers_plan(&st.log, rid, 2, 2.0, 0, st.r.waypoints, st.r.n_waypoints);
    const pd_sipp_params pm = { .agent = m, .unit = 2, .start = { 22, 2 }, .goal = { 0, 0 }, .t0_ms = 1000,
                                .speed = 1.0 };
    expect_status(pd_yield_reserve(yc, st.f->ctx, st.f->t, st.s.unit[2], &pm, NULL, &st.r, &yr), PD_OK, "M");
    answers_plan(&st.log, m, 2, 1.0, 1000, st.r.waypoints, st.r.n_waypoints);
    const pd_grid *grids[3] = { NULL, st.s.unit[1], st.s.unit[2] };
    const pd_yield_params y = { .after_ms = 1000, .unit_grids = grids, .max_unit = 2, .move_ahead = 1,
                                .cross_ms = 2000, .joint = joint };
    const pd_sipp_params p = { .agent = rid, .unit = 2, .start = { 1, 4 }, .goal = { 24, 2 }, .t0_ms = 5000,
                               .speed = 2.0, .window_ms = 3000 };
    const pd_status got = pd_yield_reserve(yc, st.f->ctx, st.f->t, st.s.unit[2], &p, &y, &st.r, &yr);
    answers_plan(&st.log, rid, 2, 2.0, 5000, st.r.waypoints, st.r.n_waypoints);
    for (size_t d = 0; d < yr.n_displaced; d++) {
        const pd_displaced *dp = &yr.displaced[d];
        answers_plan(&st.log, dp->agent, dp->unit, dp->speed, dp->t0_ms, dp->waypoints, dp->n_waypoints);
    }
    const pd_waypoint *end = &st.r.waypoints[st.r.n_waypoints - 1];
    if (!joint || wide) {
        expect_status(got, PD_PARTIAL, "R short of its goal");
        assert_int_equal(yr.outcome, PD_YIELD_OUT_CROSS_UNDONE);
        assert_int_equal(yr.cross_why, wide ? 12 : 11); /* M found no way out ahead of R */
        assert_int_equal(yr.culprit, m);
        assert_int_equal(yr.joint, wide ? 1 : 0);
        /* Refused for its size before its buffers grew (~4 MB). */
        assert_true(pd_yield_ctx_bytes(yc) < 1000000);
        assert_true(end->x < 6 && end->t_leave_ms == FOREVER);
        assert_int_equal(yr.n_displaced, 0);
    } else {
        expect_status(got, PD_OK, "R reaches its goal");
        assert_int_equal(yr.outcome, PD_YIELD_OUT_KEPT_CROSS);
        assert_int_equal(yr.cross_why, 0);
        assert_int_equal(yr.joint, 2);
        assert_true(end->x == 24 && end->y == 2 && end->t_leave_ms == FOREVER);
        /* Its cost is its waypoints' (pd_sipp_result.cost), the joint part's
         * steps included. */
        double cost = 0;
        for (size_t i = 1; i < st.r.n_waypoints; i++) {
            const pd_waypoint *u = &st.r.waypoints[i - 1], *v = &st.r.waypoints[i];
            if (u->x != v->x || u->y != v->y)
                cost += (u->x != v->x && u->y != v->y ? 1.41421356237309504880 : 1.0) *
                        pd_grid_get(st.s.unit[2], v->x, v->y);
        }
        assert_float_equal(st.r.cost, cost, 1e-6);
        assert_int_equal(yr.n_displaced, 1);
        const pd_displaced *d = &yr.displaced[0];
        assert_int_equal(d->agent, m);
        assert_int_equal(d->t0_ms, 8000); /* cut where the crossing cut it */
        assert_true(d->waypoints[0].t_arrive_ms == 8000 && d->waypoints[0].x >= 6 && d->waypoints[0].x < 20);
        /* R, the faster, steps back off the street's rows into the west
         * room (y >= 4) and stands there while M comes out of the street
         * past it (M's first waypoint west of x 5). */
        int64_t m_out = -1;
        for (size_t i = 0; i < d->n_waypoints && m_out < 0; i++)
            if (d->waypoints[i].x < 5)
                m_out = d->waypoints[i].t_arrive_ms;
        int stood_aside = 0;
        for (size_t i = 0; i < st.r.n_waypoints; i++)
            stood_aside |= st.r.waypoints[i].y >= 4 && st.r.waypoints[i].t_arrive_ms > 5000 &&
                           st.r.waypoints[i].t_arrive_ms <= m_out && st.r.waypoints[i].t_leave_ms >= m_out;
        assert_true(m_out > 0 && stood_aside);
        const pd_waypoint *mend = &d->waypoints[d->n_waypoints - 1];
        assert_true(mend->x == 0 && mend->y == 0 && mend->t_leave_ms == FOREVER);
        /* The joint search's buffers (several MB) are the context's until
         * pd_yield_ctx_trim gives them back, as the server does after each
         * request; the plans above are not in them. */
        assert_true(pd_yield_ctx_bytes(yc) > 2000000);
        assert_true(pd_yield_ctx_trim(yc, 1u << 20) < 1000000);
        assert_true(d->waypoints[0].t_arrive_ms == 8000 && mend->x == 0);
    }
    agents_end(&st, yc, rid, m);
}

/* The joint search with C's cut 2^32 ticks and one after R's t0 (a plan
 * reserved far ahead): C may not move before its cut, whatever the tick
 * count comes to - no joint plan within the horizon, rather than one
 * leaving before it arrives. */
static void test_joint_cut_far_ahead(void **state)
{
    fixture *f = *state;
    pd_grid *g = core_grid("........\n");
    pd_joint_ctx *jc = pd_joint_ctx_create();
    assert_non_null(jc);
    pd_waypoint w0[PD_JOINT_MAX_WAYPOINTS], w1[PD_JOINT_MAX_WAYPOINTS];
    pd_waypoint *const jw[2] = { w0, w1 };
    size_t n[2] = { 0, 0 };
    uint64_t spent = 0;
    const pd_joint_agent a[2] = {
        { .g = g, .k = 1, .slot = PD_RESERVE_NO_SLOT, .speed = 1.0, .sx = 0, .sy = 0, .tx = 0, .ty = 0 },
        { .g = g, .k = 1, .slot = PD_RESERVE_NO_SLOT, .speed = 1.0, .sx = 7, .sy = 0, .tx = 6, .ty = 0 },
    };
    const int64_t tick = pd_sipp_step_ms(0, 1, 1.0), tc = 5000 + (((int64_t)1 << 32) + 1) * tick;
    const int found = pd_joint_search(jc, f->t, a, 5000, tc, 4000, jw, n, &spent);
    for (int i = 0; found && i < 2; i++)
        for (size_t j = 0; j < n[i]; j++)
            assert_true(jw[i][j].t_leave_ms >= jw[i][j].t_arrive_ms);
    assert_int_equal(found, 0);
    /* the same within the horizon: C steps west once its cut comes */
    assert_int_equal(pd_joint_search(jc, f->t, a, 5000, 5000 + 3 * tick, 4000, jw, n, &spent), 1);
    assert_int_equal(n[1], 2);
    assert_true(w1[0].t_arrive_ms == 5000 + 3 * tick && w1[0].t_leave_ms >= w1[0].t_arrive_ms && w1[1].x == 6);
    pd_joint_ctx_destroy(jc);
    pd_grid_destroy(g);
}

static void test_yield_crosses_jointly(void **state)
{
    crosses_jointly(state, 0, 0, "yield_no_joint");
    crosses_jointly(state, 1, 0, "yield_joint");
    crosses_jointly(state, 1, 1, "yield_joint_wide");
}

/* Parking anywhere when nowhere is clear (park_any): a corridor (row 1)
 * with a two-cell pocket above it at (8, 0) and (9, 0); X parks for good
 * at (9, 0), so (8, 0), beside X's hold, is not clear (clear_holds), and
 * it is the only cell off R's way. H (from 1000 at (4, 1)) stands in the
 * way of R (from 0 at (2, 1), its goal (13, 1)). Without the rule H finds
 * nowhere to go and R stays short of it; with it H steps into (8, 0). */
static void parks_anywhere(void **state, int any, const char *name)
{
    stage st;
    stage_begin(&st, state, name, core_grid("########..####\n"
                                            "..............\n"));
    pd_yield_ctx *yc = pd_yield_ctx_create();
    assert_non_null(yc);
    const pd_grid *grids[2] = { NULL, st.s.unit[1] };
    const pd_yield_params y = { .after_ms = 1000, .unit_grids = grids, .max_unit = 1, .clear_holds = 1,
                                .park_any = any };
    const uint64_t base = any ? 80 : 70, rid = base + 1, h = base + 2, x = base + 3;
    stand_at(&st, yc, x, (pd_point){ 9, 0 }, 0);
    stand_at(&st, yc, rid, (pd_point){ 2, 1 }, 0);
    stand_at(&st, yc, h, (pd_point){ 4, 1 }, 1000);
    pd_yield_result yr;
    const pd_sipp_params p = { .agent = rid, .unit = 1, .start = { 2, 1 }, .goal = { 13, 1 }, .t0_ms = 3000,
                               .speed = 1.0, .window_ms = 4000 };
    const pd_status got = pd_yield_reserve(yc, st.f->ctx, st.f->t, st.s.unit[1], &p, &y, &st.r, &yr);
    assert_true(got == PD_OK || got == PD_PARTIAL);
    log_moves(&st, rid, 3000, &yr);
    assert_true(yr.tried);
    if (any) {
        assert_int_equal(yr.n_displaced, 1);
        const pd_displaced *dp = &yr.displaced[0];
        assert_int_equal(dp->agent, h);
        assert_int_equal(dp->waypoints[dp->n_waypoints - 1].x, 8);
        assert_int_equal(dp->waypoints[dp->n_waypoints - 1].y, 0);
    } else {
        assert_int_equal(yr.n_displaced, 0);
        assert_true(yr.undone);
    }
    for (uint64_t id = rid; id <= x; id++) {
        pd_reserve_release(st.f->t, id);
        answers_cut(&st.log, "release", id, 90000);
    }
    pd_yield_ctx_destroy(yc);
    stage_end(&st);
}

static void test_yield_parks_anywhere(void **state)
{
    parks_anywhere(state, 0, "yield_no_park_any");
    parks_anywhere(state, 1, "yield_park_any");
}

/* The long plans' budget (long_expansions): an agent whose reservations
 * reach its goal plans all the way; past the budget it gets the request's
 * own window instead of PD_BUDGET_EXCEEDED. */
static void test_yield_long_budget(void **state)
{
    stage st;
    stage_begin(&st, state, "yield_long_budget", core_grid("...............\n"
                                                           "...............\n"));
    pd_yield_ctx *yc = pd_yield_ctx_create();
    assert_non_null(yc);
    const pd_grid *grids[2] = { NULL, st.s.unit[1] };
    for (int capped = 0; capped < 2; capped++) {
        const pd_yield_params y = { .after_ms = 1000, .unit_grids = grids, .max_unit = 1,
                                    .long_expansions = capped ? 1 : 0 };
        const uint64_t id = 31 + (uint64_t)capped;
        const int64_t t0 = 100000 * capped;
        pd_yield_result yr;
        /* All the way first: its reservations then end on its goal. */
        const pd_sipp_params p0 = { .agent = id, .unit = 1, .start = { 0, capped }, .goal = { 14, capped },
                                    .t0_ms = t0, .speed = 1.0 };
        expect_status(pd_yield_reserve(yc, st.f->ctx, st.f->t, st.s.unit[1], &p0, &y, &st.r, &yr), PD_OK, "first");
        answers_plan(&st.log, id, 1, 1.0, t0, st.r.waypoints, st.r.n_waypoints);
        /* Two cells on, a 3 s window: all the way (OK), or the window
         * (PARTIAL). SIPP alone: the fast path counts no expansions. */
        const pd_sipp_params p1 = { .agent = id, .unit = 1, .start = { 2, capped }, .goal = { 14, capped },
                                    .t0_ms = t0 + 2000, .speed = 1.0, .window_ms = 3000, .sipp_only = 1 };
        expect_status(pd_yield_reserve(yc, st.f->ctx, st.f->t, st.s.unit[1], &p1, &y, &st.r, &yr),
                      capped ? PD_PARTIAL : PD_OK, "again");
        answers_plan(&st.log, id, 1, 1.0, t0 + 2000, st.r.waypoints, st.r.n_waypoints);
        pd_reserve_release(st.f->t, id);
        answers_cut(&st.log, "release", id, t0 + 90000);
    }
    pd_yield_ctx_destroy(yc);
    stage_end(&st);
}

/* Issue 34, found by the agents bench (Berlin_0_256, a conflict at 564 s):
 * pd_yield moves a standing holder with a replace at the holder's t0 (when
 * its hold begins, possibly far ahead of the game) and then gives it back
 * its renewal time (pd_reserve_set_renewed: being moved is not a renewal).
 * That replace's t0 must not become the table's "now" either: it did, and
 * pd_reserve_maintain then expired agents that had renewed within the TTL
 * of the game's real time (the bench saw now 586 s at game time 564 s),
 * and others planned through the cells the game still had them on. */
static void test_moved_holder_keeps_the_clock(void **state)
{
    (void)state;
    pd_reserve *t = pd_reserve_create(NULL);
    assert_non_null(t);
    /* Agent 1 renews at 40000; agent 2 stands from 10000 and is moved at
     * 70000 (its hold's start far ahead), its renewal restored to 10000. */
    const pd_waypoint a1[] = { { 0, 0, 40000, PD_RESERVE_FOREVER } };
    assert_int_equal(pd_reserve_replace(t, 1, 1, 40000, a1, 1, NULL), PD_OK);
    const pd_waypoint a2[] = { { 5, 5, 10000, PD_RESERVE_FOREVER } };
    assert_int_equal(pd_reserve_replace(t, 2, 1, 10000, a2, 1, NULL), PD_OK);
    const pd_waypoint moved[] = { { 5, 5, 70000, 71000 }, { 6, 5, 71500, PD_RESERVE_FOREVER } };
    assert_int_equal(pd_reserve_replace(t, 2, 1, 70000, moved, 2, NULL), PD_OK);
    pd_reserve_set_renewed(t, 2, 10000);
    assert_int_equal(pd_reserve_now(t), 40000);
    /* So at the TTL of 30000 agent 1 (renewed at 40000) stays; agent 2
     * (at 10000) goes. */
    uint64_t gone[4];
    assert_int_equal(pd_reserve_maintain(t, 30000, gone, 4, NULL), 0);
    pd_reserve_touch(t, 1, 45000);
    assert_int_equal(pd_reserve_now(t), 45000);
    assert_int_equal(pd_reserve_maintain(t, 30000, gone, 4, NULL), 1);
    assert_int_equal(gone[0], 2);
    assert_int_not_equal(pd_reserve_agent_slot(t, 1), PD_RESERVE_NO_SLOT);
    /* A released agent's renewals stay heard of while others are held;
     * the last one gone, the table forgets its clock
     * (test_clock_forgotten_when_empty). */
    const pd_waypoint a3[] = { { 9, 9, 20000, PD_RESERVE_FOREVER } };
    assert_int_equal(pd_reserve_replace(t, 3, 1, 20000, a3, 1, NULL), PD_OK);
    assert_int_equal(pd_reserve_release(t, 1), 1);
    assert_int_equal(pd_reserve_now(t), 45000);
    assert_int_equal(pd_reserve_release(t, 3), 1);
    assert_int_equal(pd_reserve_now(t), 0);
    pd_reserve_destroy(t);
}

/* ---- every rule at once, at random: the table is what the answers say ----
 *
 * Agents on small random maps reserve through pd_yield_reserve with the
 * server's rules on (crossing at last, the door, moving ahead and aside)
 * at thresholds low enough that they fire often. After every request each
 * agent's plan in the table from the request's time on must be exactly
 * its copy built from the answers alone (R's plan and every displaced
 * plan, each replacing from its t0_ms); a displaced plan never starts
 * before the request; and the checker replays the answers. */
static void yield_sim_merge(agent *a, int64_t t0, const pd_waypoint *wp, size_t n)
{
    size_t keep = 0;
    while (keep < a->n && a->plan[keep].t_arrive_ms < t0)
        keep++;
    pd_waypoint *b = malloc((keep + n) * sizeof *b);
    assert_non_null(b);
    memcpy(b, a->plan, keep * sizeof *b);
    if (keep && b[keep - 1].t_leave_ms > t0)
        b[keep - 1].t_leave_ms = t0;
    /* A wait that goes on where it was is one waypoint in the table. */
    size_t skip = 0;
    if (keep && n && b[keep - 1].x == wp[0].x && b[keep - 1].y == wp[0].y && b[keep - 1].t_leave_ms == t0) {
        b[keep - 1].t_leave_ms = wp[0].t_leave_ms;
        skip = 1;
    }
    memcpy(b + keep, wp + skip, (n - skip) * sizeof *b);
    free(a->plan);
    a->plan = b;
    a->n = keep + n - skip;
}

static void yield_sim_expect_table(const pd_reserve *t, const agent *a, int64_t now, uint64_t request)
{
    size_t k = 0;
    while (k < a->n && a->plan[k].t_arrive_ms < now)
        k++;
    const size_t want = a->n - k;
    pd_waypoint *got = malloc((want + 1) * sizeof *got);
    assert_non_null(got);
    /* From its first waypoint arriving from now on (the table reads a
     * plan from within a wait as starting at the wait's end). */
    const size_t n = want ? pd_reserve_agent_plan(t, a->id, a->plan[k].t_arrive_ms, got, want + 1) : 0;
    if (n != want) {
        for (size_t i = 0; i < n && i <= want; i++)
            print_message("table   %zu: (%d,%d %lld-%lld)\n", i, got[i].x, got[i].y, (long long)got[i].t_arrive_ms,
                          (long long)got[i].t_leave_ms);
        for (size_t i = 0; i < a->n; i++)
            print_message("answers %zu: (%d,%d %lld-%lld)\n", i, a->plan[i].x, a->plan[i].y,
                          (long long)a->plan[i].t_arrive_ms, (long long)a->plan[i].t_leave_ms);
    }
    if (n != want)
        fail_msg("request %llu at %lld: agent %llu holds %zu waypoints from then, its answers %zu",
                 (unsigned long long)request, (long long)now, (unsigned long long)a->id, n, want);
    for (size_t i = 0; i < n; i++) {
        const pd_waypoint *w = &a->plan[k + i];
        if (got[i].x != w->x || got[i].y != w->y || got[i].t_arrive_ms != w->t_arrive_ms ||
            got[i].t_leave_ms != w->t_leave_ms)
            fail_msg("request %llu at %lld: agent %llu waypoint %zu: table (%d,%d %lld-%lld), answers (%d,%d "
                     "%lld-%lld)",
                     (unsigned long long)request, (long long)now, (unsigned long long)a->id, i, got[i].x, got[i].y,
                     (long long)got[i].t_arrive_ms, (long long)got[i].t_leave_ms, w->x, w->y,
                     (long long)w->t_arrive_ms, (long long)w->t_leave_ms);
    }
    free(got);
}

static void yield_random_round(fixture *f, int round, uint64_t *crossed, uint64_t *joint, uint64_t *moved)
{
    rng_state = 9100 + (uint64_t)round;
    scene s;
    const int32_t w = 12 + (int32_t)rnd(8), h = 10 + (int32_t)rnd(8);
    scene_init(&s, random_grid(w, h, 15 + (int)rnd(15), 0));
    answers log;
    char name[64];
    snprintf(name, sizeof name, "yield_random_%d", round);
    answers_open(&log, name, s.g);
    pd_reserve_destroy(f->t);
    f->t = pd_reserve_create(NULL);
    pd_yield_ctx *yc = pd_yield_ctx_create();
    pd_search_ctx *sctx = pd_search_ctx_create();
    assert_non_null(yc);
    assert_non_null(sctx);
    const pd_grid *grids[3] = { NULL, s.unit[1], s.unit[2] };
    const pd_yield_params y = { .after_ms = 500, .unit_grids = grids, .max_unit = 2, .clear_holds = 1,
                                .move_ahead = 1, .park_any = 1, .give_way_ms = 1500, .door_ms = 1000,
                                .aside_after_ahead = 1, .cross_ms = 1500, .retry_max_ms = 1000, .joint = 1 };
    const int n_agents = 10 + (int)rnd(14);
    agent *ag = calloc((size_t)n_agents, sizeof *ag);
    assert_non_null(ag);
    for (int i = 0; i < n_agents; i++) {
        agent *a = &ag[i];
        a->id = 1000 + (uint64_t)i;
        a->unit = rnd(100) < 15 ? 2u : 1u;
        a->speed = 1.0 + rnd(3) * 0.5;
        pd_sipp_result r;
        pd_yield_result yr;
        for (int tries = 0;; tries++) {
            assert_true(tries < 1000);
            a->goal = random_open(s.unit[a->unit]);
            const pd_sipp_params p = { .agent = a->id, .unit = (uint32_t)a->unit, .start = a->goal,
                                       .goal = a->goal, .speed = a->speed };
            if (pd_yield_reserve(yc, f->ctx, f->t, s.unit[a->unit], &p, &y, &r, &yr) == PD_OK)
                break;
        }
        answers_plan(&log, a->id, (uint32_t)a->unit, a->speed, 0, r.waypoints, r.n_waypoints);
        keep_plan(a, &r);
        a->at_goal = 1;
        a->next = (int64_t)rnd(1000);
    }
    for (uint64_t request = 0;; request++) {
        int who = 0;
        for (int i = 1; i < n_agents; i++)
            if (ag[i].next < ag[who].next)
                who = i;
        agent *a = &ag[who];
        const int64_t now = a->next;
        if (now >= 90000)
            break;
        const int at = pd_plan_index_at(a->plan, a->n, now);
        assert_true(at >= 0);
        const pd_waypoint here = a->plan[at];
        if (a->at_goal && at + 1 == (int)a->n)
            a->goal = random_goal(sctx, s.unit[a->unit], (pd_point){ here.x, here.y });
        const pd_sipp_params p = { .agent = a->id, .unit = (uint32_t)a->unit, .start = { here.x, here.y },
                                   .goal = a->goal, .t0_ms = now, .speed = a->speed,
                                   .window_ms = 2000 + 1000 * (int64_t)rnd(3), .max_expansions = 200000 };
        pd_sipp_result r;
        pd_yield_result yr;
        const pd_status rs = pd_yield_reserve(yc, f->ctx, f->t, s.unit[a->unit], &p, &y, &r, &yr);
        if (rs == PD_OK || rs == PD_PARTIAL) {
            answers_plan(&log, a->id, (uint32_t)a->unit, a->speed, now, r.waypoints, r.n_waypoints);
            yield_sim_merge(a, now, r.waypoints, r.n_waypoints);
            a->at_goal = rs == PD_OK;
        } else if (rs == PD_NO_PATH || rs == PD_GOAL_BLOCKED || rs == PD_BUDGET_EXCEEDED) {
            a->goal = random_goal(sctx, s.unit[a->unit], (pd_point){ here.x, here.y });
            a->at_goal = 0;
        } else {
            fail_msg("request %llu: agent %llu at %lld: %s", (unsigned long long)request,
                     (unsigned long long)a->id, (long long)now, pd_status_name(rs));
        }
        *crossed += yr.outcome == PD_YIELD_OUT_KEPT_CROSS;
        *joint += yr.outcome == PD_YIELD_OUT_KEPT_CROSS && yr.joint == 2;
        for (size_t d = 0; d < yr.n_displaced; d++) {
            const pd_displaced *dp = &yr.displaced[d];
            assert_true(dp->agent >= 1000 && dp->agent < 1000 + (uint64_t)n_agents && dp->agent != a->id);
            if (dp->t0_ms < now)
                fail_msg("request %llu at %lld: agent %llu displaced from %lld", (unsigned long long)request,
                         (long long)now, (unsigned long long)dp->agent, (long long)dp->t0_ms);
            assert_true(dp->n_waypoints >= 1 && dp->waypoints[0].t_arrive_ms == dp->t0_ms);
            answers_plan(&log, dp->agent, dp->unit, dp->speed, dp->t0_ms, dp->waypoints, dp->n_waypoints);
            agent *b = &ag[dp->agent - 1000];
            yield_sim_merge(b, dp->t0_ms, dp->waypoints, dp->n_waypoints);
            b->at_goal = 0;
            b->next = pd_plan_next_stop(b->plan, b->n, b->next > now ? b->next : now + 1);
            (*moved)++;
        }
        for (int i = 0; i < n_agents; i++)
            yield_sim_expect_table(f->t, &ag[i], now, request);
        const int64_t when = next_decision(a, now, 3, 200, 800);
        /* The copy keeps R's last waypoint before now, ending at now. */
        a->next = pd_plan_next_stop(a->plan, a->n, when > now ? when : now + 200 + rnd(800));
        assert_true(a->next > now);
    }
    check_table(f->t, w, h);
    answers_check(&log);
    for (int i = 0; i < n_agents; i++)
        free(ag[i].plan);
    free(ag);
    pd_search_ctx_destroy(sctx);
    pd_yield_ctx_destroy(yc);
    scene_free(&s);
}

static void test_yield_random(void **state)
{
    fixture *f = *state;
    const int rounds = getenv("PD_YIELD_RANDOM_ROUNDS") ? atoi(getenv("PD_YIELD_RANDOM_ROUNDS")) : 6;
    uint64_t crossed = 0, joint = 0, moved = 0;
    for (int round = 0; round < rounds; round++)
        yield_random_round(f, round, &crossed, &joint, &moved);
    print_message("%d rounds: %llu crossings kept (%llu jointly), %llu plans displaced\n", rounds,
                  (unsigned long long)crossed, (unsigned long long)joint, (unsigned long long)moved);
    assert_true(crossed > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_insert_and_query),
        cmocka_unit_test(test_table_replace_from_t0),
        cmocka_unit_test(test_table_refuses_overlaps_and_bad_plans),
        cmocka_unit_test(test_table_release_collect_expire),
        cmocka_unit_test(test_moved_holder_keeps_the_clock),
        cmocka_unit_test(test_table_limits),
        cmocka_unit_test(test_table_block_cuts),
        cmocka_unit_test(test_plan_on_the_clock),
        cmocka_unit_test(test_table_maintain),
        cmocka_unit_test(test_clock_forgotten_when_empty),
        cmocka_unit_test(test_clock_step_within_the_ttl),
        cmocka_unit_test(test_clock_of_the_only_agent),
        cmocka_unit_test(test_clock_goes_back_only_by_restart),
        cmocka_unit_test(test_table_block_cells),
        cmocka_unit_test(test_table_random_ops),
        cmocka_unit_test_setup_teardown(test_head_on_with_pocket, setup, teardown),
        cmocka_unit_test_setup_teardown(test_twenty_through_one_door, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_by_two_crossing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_cuts_a_plan, setup, teardown),
        cmocka_unit_test_setup_teardown(test_start_blocked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_partial_with_short_window, setup, teardown),
        cmocka_unit_test_setup_teardown(test_park_and_vanish, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alone_matches_astar, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exact_heuristic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_static_rest_not_searched, setup, teardown),
        cmocka_unit_test_setup_teardown(test_random_simulation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bench_den520d, setup, teardown),
        cmocka_unit_test_setup_teardown(test_yield_corridor_head_on, setup, teardown),
        cmocka_unit_test(test_yield_clear_hold_rule),
        cmocka_unit_test(test_yield_clear_hold_units),
        cmocka_unit_test_setup_teardown(test_yield_aside_after_ahead, setup, teardown),
        cmocka_unit_test_setup_teardown(test_yield_aside_when_ahead_meets_at_once, setup, teardown),
        cmocka_unit_test(test_sipp_hold_ok_asked_where_holdable),
        cmocka_unit_test_setup_teardown(test_yield_clear_hold_plan_units, setup, teardown),
        cmocka_unit_test_setup_teardown(test_yield_clear_hold_plan, setup, teardown),
        cmocka_unit_test_setup_teardown(test_yield_undone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_yield_backoff, setup, teardown),
        cmocka_unit_test_setup_teardown(test_yield_takes_the_way_round, setup, teardown),
        cmocka_unit_test_setup_teardown(test_yield_long_budget, setup, teardown),
        cmocka_unit_test_setup_teardown(test_yield_moves_ahead, setup, teardown),
        cmocka_unit_test_setup_teardown(test_yield_parks_anywhere, setup, teardown),
        cmocka_unit_test_setup_teardown(test_yield_comes_in_at_door, setup, teardown),
        cmocka_unit_test_setup_teardown(test_yield_door_no_way_round, setup, teardown),
        cmocka_unit_test_setup_teardown(test_yield_door_first_come, setup, teardown),
        cmocka_unit_test_setup_teardown(test_yield_door_undo_under_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_yield_door_undo_over_a_gap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_yield_crosses_at_last, setup, teardown),
        cmocka_unit_test_setup_teardown(test_yield_crosses_jointly, setup, teardown),
        cmocka_unit_test_setup_teardown(test_joint_cut_far_ahead, setup, teardown),
        cmocka_unit_test_setup_teardown(test_yield_random, setup, teardown),
        cmocka_unit_test_setup_teardown(test_yield_moves_a_chain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_yield_gives_way, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
