/*
 * test_search.c - pd_search_astar on hand-made grids: statuses and their
 * order, degenerate grids, corner cutting, 4- vs 8-connectivity, cell costs,
 * the expansion budget, the poll callback, the caller's path buffer and
 * pd_search_extract, and one context reused across grids of different sizes.
 *
 * Expected costs are worked out by hand in the comments next to each case.
 * Every path that comes back is checked step by step (core_check.h) and its
 * summed cost compared with metrics.cost. Optimality on many random grids is
 * test_search_reference.c's job.
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

#define PATH_CAP 4096

static pd_point pt(int32_t x, int32_t y)
{
    pd_point p = { x, y };
    return p;
}

static pd_grid *load_data_grid(const char *name, int movingai)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", PD_TEST_DATA_DIR, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    pd_grid *g = movingai ? pd_map_parse_movingai(buf, n, NULL) : pd_map_parse_ascii(buf, n, NULL);
    assert_non_null(g);
    return g;
}

static int setup_ctx(void **state)
{
    *state = pd_search_ctx_create();
    return *state ? 0 : -1;
}

static int teardown_ctx(void **state)
{
    pd_search_ctx_destroy(*state);
    return 0;
}

/* Searches and asserts OK with the given cost and path length. */
static void expect_path(pd_search_ctx *ctx, const pd_grid *g, pd_connectivity conn, pd_point s,
                        pd_point t, double cost, size_t len)
{
    pd_point path[PATH_CAP];
    pd_search_metrics m;
    pd_status st = core_search(ctx, g, conn, s, t, path, PATH_CAP, &m);
    if (st != PD_OK)
        fail_msg("(%d,%d)->(%d,%d) conn %d: %s, want OK", s.x, s.y, t.x, t.y, conn,
                 pd_status_name(st));
    if (fabs(m.cost - cost) > CORE_COST_EPS)
        fail_msg("(%d,%d)->(%d,%d) conn %d: cost %.12f, want %.12f", s.x, s.y, t.x, t.y, conn,
                 m.cost, cost);
    assert_int_equal(m.path_len, len);
}

/* Searches and asserts a failure status with an empty result. */
static void expect_status(pd_search_ctx *ctx, const pd_grid *g, const pd_search_params *p,
                          pd_status want)
{
    pd_point path[16];
    pd_search_metrics m;
    memset(&m, 0xA5, sizeof m);
    pd_status st = pd_search_astar(ctx, g, p, path, 16, &m);
    if (st != want)
        fail_msg("(%d,%d)->(%d,%d) conn %d: %s, want %s", p->start.x, p->start.y, p->goal.x,
                 p->goal.y, p->connectivity, pd_status_name(st), pd_status_name(want));
    assert_true(m.cost == 0.0);
    assert_int_equal(m.path_len, 0);
    size_t len = 99;
    assert_int_equal(pd_search_extract(ctx, path, 16, &len), PD_NO_PATH);
    assert_int_equal(len, 0);
}

static pd_search_params params(pd_point s, pd_point t, int conn)
{
    pd_search_params p;
    memset(&p, 0, sizeof p);
    p.start = s;
    p.goal = t;
    p.connectivity = (pd_connectivity)conn;
    return p;
}

static void test_start_equals_goal(void **state)
{
    pd_search_ctx *ctx = *state;
    pd_grid *g = core_grid("...\n.5.\n...\n");
    for (int conn = 4; conn <= 8; conn += 4) {
        pd_point path[4] = { { -7, -7 }, { -7, -7 } };
        pd_search_metrics m;
        assert_int_equal(core_search(ctx, g, (pd_connectivity)conn, pt(1, 1), pt(1, 1), path, 4, &m),
                         PD_OK);
        assert_true(m.cost == 0.0);
        assert_int_equal(m.path_len, 1);
        assert_int_equal(path[0].x, 1);
        assert_int_equal(path[0].y, 1);
        assert_int_equal(path[1].x, -7); /* nothing written past path_len */
    }
    pd_grid_destroy(g);
}

static void test_one_by_one(void **state)
{
    pd_search_ctx *ctx = *state;
    pd_grid *g = core_grid(".\n");
    expect_path(ctx, g, PD_CONNECT_8, pt(0, 0), pt(0, 0), 0.0, 1);
    expect_path(ctx, g, PD_CONNECT_4, pt(0, 0), pt(0, 0), 0.0, 1);
    pd_search_params p = params(pt(0, 0), pt(1, 0), 8);
    expect_status(ctx, g, &p, PD_OUT_OF_BOUNDS);
    pd_grid_destroy(g);

    g = core_grid("#\n");
    p = params(pt(0, 0), pt(0, 0), 8);
    expect_status(ctx, g, &p, PD_START_BLOCKED);
    pd_grid_destroy(g);
}

static void test_status_order(void **state)
{
    pd_search_ctx *ctx = *state;
    /* (0,0) open, (1,0) blocked, (2,0) open ... */
    pd_grid *g = core_grid(".#.\n...\n#..\n");
    pd_search_params p;

    /* Bad connectivity wins over everything else. */
    static const int bad_conn[] = { 1, 2, 6, 16, -8 };
    for (size_t i = 0; i < sizeof bad_conn / sizeof bad_conn[0]; i++) {
        p = params(pt(-1, 0), pt(1, 0), bad_conn[i]);
        expect_status(ctx, g, &p, PD_INVALID_ARGUMENT);
        p = params(pt(0, 0), pt(2, 2), bad_conn[i]);
        expect_status(ctx, g, &p, PD_INVALID_ARGUMENT);
    }

    /* Out of bounds on every side, for start and for goal. */
    static const pd_point outside[] = { { -1, 0 }, { 0, -1 }, { 3, 0 }, { 0, 3 }, { 3, 3 },
                                        { INT32_MIN, 0 }, { 0, INT32_MAX } };
    for (size_t i = 0; i < sizeof outside / sizeof outside[0]; i++) {
        p = params(outside[i], pt(2, 2), 8);
        expect_status(ctx, g, &p, PD_OUT_OF_BOUNDS);
        p = params(pt(0, 0), outside[i], 4);
        expect_status(ctx, g, &p, PD_OUT_OF_BOUNDS);
        /* A blocked start does not hide an out-of-bounds goal. */
        p = params(pt(1, 0), outside[i], 8);
        expect_status(ctx, g, &p, PD_OUT_OF_BOUNDS);
    }
    /* Start blocked is reported before goal blocked. */
    p = params(pt(1, 0), pt(0, 2), 8);
    expect_status(ctx, g, &p, PD_START_BLOCKED);
    p = params(pt(1, 0), pt(2, 2), 4);
    expect_status(ctx, g, &p, PD_START_BLOCKED);
    p = params(pt(0, 0), pt(0, 2), 8);
    expect_status(ctx, g, &p, PD_GOAL_BLOCKED);
    p = params(pt(0, 0), pt(1, 0), 4);
    expect_status(ctx, g, &p, PD_GOAL_BLOCKED);
    /* start == goal on a blocked cell. */
    p = params(pt(1, 0), pt(1, 0), 8);
    expect_status(ctx, g, &p, PD_START_BLOCKED);

    /* connectivity 0 means 8: (0,1)->(2,2) is (1,1) straight, then a diagonal
     * whose orthogonals (2,1) and (1,2) are open: 1 + sqrt(2). (The diagonal
     * (0,1)->(1,2) is refused because (0,2) is blocked.) */
    pd_point path[8];
    pd_search_metrics m;
    assert_int_equal(core_search(ctx, g, (pd_connectivity)0, pt(0, 1), pt(2, 2), path, 8, &m), PD_OK);
    assert_true(fabs(m.cost - (1.0 + CORE_SQRT2)) < CORE_COST_EPS);
    pd_grid_destroy(g);
}

static void test_unreachable_goal(void **state)
{
    pd_search_ctx *ctx = *state;
    /* The goal (6,1) sits in a walled pocket. The start's region: rows 0-2,
     * columns 0-3 (12 cells) and row 3 minus its '#' (6 cells) = 18 cells. */
    pd_grid *g = core_grid("....#..\n....#..\n....###\n.#.....\n");
    for (int conn = 4; conn <= 8; conn += 4) {
        pd_search_params p = params(pt(0, 0), pt(6, 1), conn);
        pd_search_metrics m;
        assert_int_equal(pd_search_astar(ctx, g, &p, NULL, 0, &m), PD_NO_PATH);
        assert_true(m.cost == 0.0);
        assert_int_equal(m.path_len, 0);
        /* With no way to the goal every reachable cell is expanded once. */
        assert_int_equal(m.expanded, 18);
        assert_int_equal(m.generated, 18);
        expect_status(ctx, g, &p, PD_NO_PATH);
    }
    /* Diagonal-only contact is no contact: (0,0) and (1,1) touch at a corner. */
    pd_grid *d = core_grid(".#\n#.\n");
    pd_search_params p = params(pt(0, 0), pt(1, 1), 8);
    expect_status(ctx, d, &p, PD_NO_PATH);
    p = params(pt(1, 1), pt(0, 0), 8);
    expect_status(ctx, d, &p, PD_NO_PATH);
    pd_grid_destroy(d);
    pd_grid_destroy(g);
}

static void test_one_by_n_and_n_by_one(void **state)
{
    pd_search_ctx *ctx = *state;
    static const int32_t sizes[] = { 2, 3, 17, 500 };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        int32_t n = sizes[i];
        pd_grid *row = core_open_grid(n, 1);
        pd_grid *col = core_open_grid(1, n);
        for (int conn = 4; conn <= 8; conn += 4) {
            expect_path(ctx, row, (pd_connectivity)conn, pt(0, 0), pt(n - 1, 0), n - 1, (size_t)n);
            expect_path(ctx, row, (pd_connectivity)conn, pt(n - 1, 0), pt(0, 0), n - 1, (size_t)n);
            expect_path(ctx, col, (pd_connectivity)conn, pt(0, 0), pt(0, n - 1), n - 1, (size_t)n);
            expect_path(ctx, col, (pd_connectivity)conn, pt(0, n - 1), pt(0, n / 2), n - 1 - n / 2,
                        (size_t)(n - n / 2));
        }
        /* A blocked cell in the corridor cuts it. */
        pd_grid_set(row, n / 2, 0, PD_CELL_BLOCKED);
        pd_search_params p = params(pt(0, 0), pt(n - 1, 0), 8);
        expect_status(ctx, row, &p, n / 2 == 0 || n / 2 == n - 1 ? PD_GOAL_BLOCKED : PD_NO_PATH);
        pd_grid_destroy(row);
        pd_grid_destroy(col);
    }
}

static void test_corner_cutting(void **state)
{
    pd_search_ctx *ctx = *state;
    static const int dirs[4][2] = { { 1, 1 }, { 1, -1 }, { -1, 1 }, { -1, -1 } };
    for (int d = 0; d < 4; d++) {
        int dx = dirs[d][0], dy = dirs[d][1];
        pd_point s = pt(1, 1), t = pt(1 + dx, 1 + dy);
        /* Both orthogonals open: one diagonal step. */
        pd_grid *g = core_open_grid(3, 3);
        expect_path(ctx, g, PD_CONNECT_8, s, t, CORE_SQRT2, 2);
        expect_path(ctx, g, PD_CONNECT_4, s, t, 2.0, 3);

        /* One orthogonal blocked (either one): the diagonal is refused, the
         * way round the other orthogonal costs 2. */
        for (int which = 0; which < 2; which++) {
            pd_grid_set(g, which ? 1 + dx : 1, which ? 1 : 1 + dy, PD_CELL_BLOCKED);
            expect_path(ctx, g, PD_CONNECT_8, s, t, 2.0, 3);
            pd_grid_set(g, which ? 1 + dx : 1, which ? 1 : 1 + dy, PD_CELL_FREE);
        }
        /* Both orthogonals blocked: the target's only other neighbours in
         * the 3x3 are exactly those two cells, so there is no path at all. */
        pd_grid_set(g, 1 + dx, 1, PD_CELL_BLOCKED);
        pd_grid_set(g, 1, 1 + dy, PD_CELL_BLOCKED);
        pd_search_params p = params(s, t, 8);
        expect_status(ctx, g, &p, PD_NO_PATH);
        pd_grid_destroy(g);
    }

    /* (0,1)->(1,2) squeezes between two blocked cells, (1,1) and (0,2):
     * refused. Every other diagonal nearby also touches (1,1), so the only
     * way is all the way round: (0,0) (1,0) (2,0) (2,1) (2,2) (1,2) = 6
     * straight steps, in 8- and 4-connected mode alike. */
    pd_grid *g = core_grid("...\n.#.\n#..\n");
    expect_path(ctx, g, PD_CONNECT_8, pt(0, 1), pt(1, 2), 6.0, 7);
    expect_path(ctx, g, PD_CONNECT_4, pt(0, 1), pt(1, 2), 6.0, 7);
    pd_grid_destroy(g);
}

static void test_four_vs_eight(void **state)
{
    pd_search_ctx *ctx = *state;
    pd_grid *g = core_open_grid(10, 10);
    expect_path(ctx, g, PD_CONNECT_8, pt(0, 0), pt(9, 9), 9 * CORE_SQRT2, 10);
    expect_path(ctx, g, PD_CONNECT_4, pt(0, 0), pt(9, 9), 18.0, 19);
    expect_path(ctx, g, PD_CONNECT_8, pt(9, 0), pt(0, 9), 9 * CORE_SQRT2, 10);
    expect_path(ctx, g, PD_CONNECT_4, pt(0, 9), pt(9, 0), 18.0, 19);
    /* Octile: 7 straight + 2 diagonal. */
    expect_path(ctx, g, PD_CONNECT_8, pt(0, 0), pt(9, 2), 7 + 2 * CORE_SQRT2, 10);
    expect_path(ctx, g, PD_CONNECT_4, pt(0, 0), pt(9, 2), 11.0, 12);
    pd_grid_destroy(g);

    /* A wall in column 2 with its only gap at (2,4). 4-connected: 4 down,
     * 4 right, 4 up = 12. 8-connected: the gap can only be entered from
     * (1,4) and left to (3,4) (the diagonals need (2,3), which is wall), so
     * octile (0,0)->(1,4) = 3 + sqrt(2), 2 through the gap, and
     * (3,4)->(4,0) = 3 + sqrt(2) again: 8 + 2*sqrt(2) in 10 steps. */
    g = core_grid("..#..\n..#..\n..#..\n..#..\n.....\n");
    expect_path(ctx, g, PD_CONNECT_4, pt(0, 0), pt(4, 0), 12.0, 13);
    expect_path(ctx, g, PD_CONNECT_8, pt(0, 0), pt(4, 0), 8 + 2 * CORE_SQRT2, 11);
    pd_grid_destroy(g);
}

static void test_weighted_cells(void **state)
{
    pd_search_ctx *ctx = *state;
    /* The cost of a step is length x the entered cell's cost: entering the
     * cost-5 corner diagonally costs 5*sqrt(2) = 7.07, straight 1 + 5 = 6. */
    pd_grid *g = core_grid("..\n.5\n");
    expect_path(ctx, g, PD_CONNECT_8, pt(0, 0), pt(1, 1), 6.0, 3);
    /* Leaving a costly cell costs nothing extra. */
    expect_path(ctx, g, PD_CONNECT_8, pt(1, 1), pt(0, 0), CORE_SQRT2, 2);
    expect_path(ctx, g, PD_CONNECT_4, pt(1, 1), pt(0, 0), 2.0, 3);
    pd_grid_destroy(g);

    /* Cost 2: diagonal 2*sqrt(2) = 2.83 beats 1 + 2 = 3. */
    g = core_grid("..\n.2\n");
    expect_path(ctx, g, PD_CONNECT_8, pt(0, 0), pt(1, 1), 2 * CORE_SQRT2, 2);
    pd_grid_destroy(g);

    /* core_weighted.txt: a marsh cell of cost 9 in the middle row. Straight
     * along row 2 costs 7 + 9 = 16; round the top (or bottom) costs
     * 2 up + 8 across + 2 down = 12, since the wall rows forbid diagonals. */
    g = load_data_grid("core_weighted.txt", 0);
    pd_point path[PATH_CAP];
    pd_search_metrics m;
    for (int conn = 4; conn <= 8; conn += 4) {
        assert_int_equal(core_search(ctx, g, (pd_connectivity)conn, pt(0, 2), pt(8, 2), path,
                                     PATH_CAP, &m), PD_OK);
        assert_true(fabs(m.cost - 12.0) < CORE_COST_EPS);
        for (size_t i = 0; i < m.path_len; i++)
            assert_false(path[i].y == 2 && path[i].x > 0 && path[i].x < 8);
    }
    /* Make the marsh cost 3: straight is now 7 + 3 = 10 and must be taken. */
    pd_grid_set(g, 4, 2, 3);
    for (int conn = 4; conn <= 8; conn += 4) {
        assert_int_equal(core_search(ctx, g, (pd_connectivity)conn, pt(0, 2), pt(8, 2), path,
                                     PATH_CAP, &m), PD_OK);
        assert_true(fabs(m.cost - 10.0) < CORE_COST_EPS);
        assert_int_equal(m.path_len, 9);
        for (size_t i = 0; i < m.path_len; i++)
            assert_int_equal(path[i].y, 2);
    }
    /* Cost 5 ties the detour at 12: either route will do, at cost 12. */
    pd_grid_set(g, 4, 2, 5);
    assert_int_equal(core_search(ctx, g, PD_CONNECT_8, pt(0, 2), pt(8, 2), path, PATH_CAP, &m),
                     PD_OK);
    assert_true(fabs(m.cost - 12.0) < CORE_COST_EPS);
    pd_grid_destroy(g);
}

static void test_data_room(void **state)
{
    pd_search_ctx *ctx = *state;
    pd_grid *g = load_data_grid("core_room.map", 1);
    pd_point path[PATH_CAP];
    pd_search_metrics m;
    /* Across the wall at column 5, whose only gap is (5,7). core_search
     * checks every step; here the path must use the gap, and its cost is at
     * least the distance through it: octile (0,0)->(5,7) = 5*sqrt(2) + 2
     * plus (5,7)->(11,0) = 6*sqrt(2) + 1, or Manhattan 12 + 13. The exact
     * optimum is test_search_reference.c's business. */
    for (int conn = 4; conn <= 8; conn += 4) {
        assert_int_equal(core_search(ctx, g, (pd_connectivity)conn, pt(0, 0), pt(11, 0), path,
                                     PATH_CAP, &m), PD_OK);
        int through_gap = 0;
        for (size_t i = 0; i < m.path_len; i++)
            through_gap |= path[i].x == 5 && path[i].y == 7;
        assert_true(through_gap);
        double lower = conn == 8 ? (2 + 5 * CORE_SQRT2) + (1 + 6 * CORE_SQRT2) : 12.0 + 13.0;
        assert_true(m.cost >= lower - CORE_COST_EPS);
    }
    pd_grid_destroy(g);
}

static void test_budget(void **state)
{
    pd_search_ctx *ctx = *state;
    /* 30x30 with a long wall: the search must expand far more than 5 nodes. */
    pd_grid *g = core_open_grid(30, 30);
    for (int32_t y = 0; y < 29; y++)
        pd_grid_set(g, 15, y, PD_CELL_BLOCKED);
    static const uint64_t budgets[] = { 1, 2, 5, 50 };
    for (size_t i = 0; i < sizeof budgets / sizeof budgets[0]; i++) {
        for (int conn = 4; conn <= 8; conn += 4) {
            pd_search_params p = params(pt(0, 0), pt(29, 0), conn);
            p.max_expansions = budgets[i];
            pd_point path[PATH_CAP];
            pd_search_metrics m;
            pd_status st = pd_search_astar(ctx, g, &p, path, PATH_CAP, &m);
            assert_int_equal(st, PD_BUDGET_EXCEEDED);
            assert_true(m.expanded <= budgets[i]);
            assert_true(m.expanded > 0);
            assert_true(m.cost == 0.0);
            assert_int_equal(m.path_len, 0);
            size_t len = 5;
            assert_int_equal(pd_search_extract(ctx, path, PATH_CAP, &len), PD_NO_PATH);
        }
    }
    /* Learn how many expansions the full search needs, then grant exactly
     * that many (OK) and one less (exceeded). */
    for (int conn = 4; conn <= 8; conn += 4) {
        pd_search_params p = params(pt(0, 0), pt(29, 0), conn);
        pd_point path[PATH_CAP];
        pd_search_metrics full;
        assert_int_equal(pd_search_astar(ctx, g, &p, path, PATH_CAP, &full), PD_OK);
        assert_true(full.expanded > 50);
        pd_search_metrics m;
        p.max_expansions = full.expanded;
        assert_int_equal(pd_search_astar(ctx, g, &p, path, PATH_CAP, &m), PD_OK);
        assert_true(m.cost == full.cost);
        assert_int_equal(m.expanded, full.expanded);
        p.max_expansions = full.expanded - 1;
        assert_int_equal(pd_search_astar(ctx, g, &p, path, PATH_CAP, &m), PD_BUDGET_EXCEEDED);
        assert_true(m.expanded <= full.expanded - 1);
    }
    pd_grid_destroy(g);
}

typedef struct poll_state {
    int calls;
    int stop_at;        /* call number that stops the search; 0 = never */
    pd_status stop_with;
} poll_state;

static pd_status count_poll(void *user)
{
    poll_state *ps = user;
    ps->calls++;
    return ps->stop_at && ps->calls >= ps->stop_at ? ps->stop_with : PD_OK;
}

static void test_poll_cancels(void **state)
{
    pd_search_ctx *ctx = *state;
    /* 120x120 open grid with the goal's 3x3 corner boxed in by 7 blocked
     * cells: the search expands all 14,384 reachable cells unless the poll
     * stops it. */
    pd_grid *g = core_open_grid(120, 120);
    for (int32_t y = 116; y < 120; y++)
        for (int32_t x = 116; x < 120; x++)
            if (y == 116 || x == 116)
                pd_grid_set(g, x, y, PD_CELL_BLOCKED);
    const uint64_t reachable = 120 * 120 - 16;

    pd_search_params p = params(pt(0, 0), pt(118, 118), 8);
    p.poll = count_poll;
    poll_state ps = { 0, 0, PD_OK };
    p.poll_user = &ps;
    pd_search_metrics m;
    assert_int_equal(pd_search_astar(ctx, g, &p, NULL, 0, &m), PD_NO_PATH);
    assert_int_equal(m.expanded, reachable);
    /* Polled every PD_SEARCH_POLL_INTERVAL expansions. */
    assert_int_equal(ps.calls, (int)(reachable / PD_SEARCH_POLL_INTERVAL));

    ps = (poll_state){ 0, 1, PD_CANCELLED };
    assert_int_equal(pd_search_astar(ctx, g, &p, NULL, 0, &m), PD_CANCELLED);
    assert_int_equal(ps.calls, 1);
    assert_int_equal(m.expanded, PD_SEARCH_POLL_INTERVAL);
    assert_true(m.cost == 0.0);
    assert_int_equal(m.path_len, 0);

    ps = (poll_state){ 0, 3, PD_DEADLINE_EXCEEDED };
    p.connectivity = PD_CONNECT_4;
    assert_int_equal(pd_search_astar(ctx, g, &p, NULL, 0, &m), PD_DEADLINE_EXCEEDED);
    assert_int_equal(ps.calls, 3);
    assert_int_equal(m.expanded, 3 * PD_SEARCH_POLL_INTERVAL);
    size_t len = 1;
    assert_int_equal(pd_search_extract(ctx, NULL, 0, &len), PD_NO_PATH);

    /* A reachable goal with a poll that never objects: a normal answer. */
    ps = (poll_state){ 0, 0, PD_OK };
    pd_point path[PATH_CAP];
    p.goal = pt(115, 119);
    p.connectivity = PD_CONNECT_8;
    assert_int_equal(pd_search_astar(ctx, g, &p, path, PATH_CAP, &m), PD_OK);
    core_check_path(g, PD_CONNECT_8, path, m.path_len, p.start, p.goal);
    pd_grid_destroy(g);
}

static void test_buffer_too_small_and_extract(void **state)
{
    pd_search_ctx *ctx = *state;
    /* A closed box in the middle and a plug at (5,2): the one shortest way
     * from (0,4) to (5,0) is up column 0 and along row 0, 9 steps. */
    pd_grid *g = core_grid("......\n.####.\n.#..##\n.####.\n......\n");
    pd_point s = pt(0, 4), t = pt(5, 0);

    pd_point want[PATH_CAP];
    pd_search_metrics full;
    pd_search_ctx *other = pd_search_ctx_create();
    assert_non_null(other);
    assert_int_equal(core_search(other, g, PD_CONNECT_8, s, t, want, PATH_CAP, &full), PD_OK);
    assert_int_equal(full.path_len, 10);
    assert_true(full.cost == 9.0);

    pd_point small[PATH_CAP];
    for (size_t i = 0; i < PATH_CAP; i++)
        small[i] = pt(-9, -9);
    pd_search_metrics m;
    pd_search_params p = params(s, t, 8);
    assert_int_equal(pd_search_astar(ctx, g, &p, small, full.path_len - 1, &m), PD_BUFFER_TOO_SMALL);
    assert_int_equal(m.path_len, full.path_len);
    assert_true(m.cost == full.cost);
    pd_search_metrics after_search = m;

    /* Extract again: too small still says so and reports the length. */
    size_t len = 0;
    assert_int_equal(pd_search_extract(ctx, small, full.path_len - 1, &len), PD_BUFFER_TOO_SMALL);
    assert_int_equal(len, full.path_len);
    assert_int_equal(pd_search_extract(ctx, NULL, 0, &len), PD_BUFFER_TOO_SMALL);
    assert_int_equal(len, full.path_len);
    /* Big enough: the same path, nothing written past it. */
    len = 0;
    assert_int_equal(pd_search_extract(ctx, small, full.path_len, &len), PD_OK);
    assert_int_equal(len, full.path_len);
    assert_memory_equal(small, want, full.path_len * sizeof *want);
    assert_int_equal(small[full.path_len].x, -9);
    assert_memory_equal(&m, &after_search, sizeof m);
    double summed = core_check_path(g, PD_CONNECT_8, small, len, s, t);
    assert_true(fabs(summed - m.cost) < CORE_COST_EPS);
    /* path_len may be NULL, and extraction can be repeated. */
    assert_int_equal(pd_search_extract(ctx, small, PATH_CAP, NULL), PD_OK);
    assert_memory_equal(small, want, full.path_len * sizeof *want);

    /* A later search replaces what extract returns. */
    assert_int_equal(core_search(ctx, g, PD_CONNECT_8, pt(0, 0), pt(1, 0), NULL, 0, &m), PD_OK);
    assert_int_equal(pd_search_extract(ctx, small, PATH_CAP, &len), PD_OK);
    assert_int_equal(len, 2);
    assert_int_equal(small[0].x, 0);
    assert_int_equal(small[1].x, 1);
    /* A failed search leaves nothing to extract. */
    p = params(pt(2, 2), t, 8);
    expect_status(ctx, g, &p, PD_NO_PATH);
    pd_search_ctx_destroy(other);
    pd_grid_destroy(g);
}

static void test_cost_only(void **state)
{
    pd_search_ctx *ctx = *state;
    pd_grid *g = core_open_grid(10, 10);
    pd_search_params p = params(pt(0, 0), pt(9, 9), 8);
    pd_search_metrics m;
    assert_int_equal(pd_search_astar(ctx, g, &p, NULL, 0, &m), PD_OK);
    assert_true(fabs(m.cost - 9 * CORE_SQRT2) < CORE_COST_EPS);
    assert_int_equal(m.path_len, 10);
    /* The path is still there to extract afterwards. */
    pd_point path[10];
    size_t len = 0;
    assert_int_equal(pd_search_extract(ctx, path, 10, &len), PD_OK);
    assert_int_equal(len, 10);
    core_check_path(g, PD_CONNECT_8, path, len, p.start, p.goal);
    /* metrics may be NULL. */
    assert_int_equal(pd_search_astar(ctx, g, &p, path, 10, NULL), PD_OK);
    assert_int_equal(pd_search_astar(ctx, g, &p, NULL, 0, NULL), PD_OK);
    pd_grid_destroy(g);
}

static void test_extract_before_any_search(void **state)
{
    pd_search_ctx *ctx = *state;
    pd_point path[4];
    size_t len = 77;
    assert_int_equal(pd_search_extract(ctx, path, 4, &len), PD_NO_PATH);
    assert_int_equal(len, 0);
    assert_true(pd_search_ctx_footprint(ctx) > 0);
}

/* Queries with answers worked out by hand, for the reuse test. */
typedef struct known_query {
    const pd_grid *g;
    pd_connectivity conn;
    pd_point s, t;
    pd_status status;
    double cost;
} known_query;

static void run_known(pd_search_ctx *ctx, const known_query *q)
{
    pd_point path[PATH_CAP];
    pd_search_metrics m;
    pd_status st = core_search(ctx, q->g, q->conn, q->s, q->t, path, PATH_CAP, &m);
    if (st != q->status)
        fail_msg("%dx%d (%d,%d)->(%d,%d): %s, want %s", q->g->width, q->g->height, q->s.x, q->s.y,
                 q->t.x, q->t.y, pd_status_name(st), pd_status_name(q->status));
    if (st == PD_OK && fabs(m.cost - q->cost) > CORE_COST_EPS)
        fail_msg("%dx%d (%d,%d)->(%d,%d): cost %.12f, want %.12f", q->g->width, q->g->height,
                 q->s.x, q->s.y, q->t.x, q->t.y, m.cost, q->cost);
}

static void test_context_reuse_across_sizes(void **state)
{
    pd_search_ctx *ctx = pd_search_ctx_create();
    assert_non_null(ctx);
    /* Small: a 5x4 grid with a wall; big: 300x200 open with a wall that has
     * one gap; small again. The big grid's cells overlap the small ones'
     * slots, so stale node state from it would show up in the small answers. */
    pd_grid *small = core_grid(".....\n.###.\n...#.\n.#...\n");
    pd_grid *big = core_open_grid(300, 200);
    for (int32_t y = 1; y < 200; y++)
        pd_grid_set(big, 150, y, PD_CELL_BLOCKED);
    pd_grid *tiny = core_grid("..\n");

    const known_query queries[] = {
        /* (0,0)->(4,3): 4-conn 4 right + 3 down = 7. 8-conn: every useful
         * diagonal touches a '#' ((3,0)->(4,1) needs (3,1)), so also 7,
         * either over the top or round the bottom-left. */
        { small, PD_CONNECT_4, { 0, 0 }, { 4, 3 }, PD_OK, 7.0 },
        { small, PD_CONNECT_8, { 0, 0 }, { 4, 3 }, PD_OK, 7.0 },
        /* (0,2)->(2,3): the diagonal (1,2)->(2,3) needs (1,3), a '#', so
         * (1,2) (2,2) (2,3) = 3. (0,3)->(4,3) goes up and round: 6. */
        { small, PD_CONNECT_8, { 0, 2 }, { 2, 3 }, PD_OK, 3.0 },
        { small, PD_CONNECT_8, { 0, 0 }, { 1, 1 }, PD_GOAL_BLOCKED, 0.0 },
        /* Big: (0,199)->(299,199) must go up to the gap at (150,0):
         * 4-conn 199 up + 299 right + 199 down = 697. */
        { big, PD_CONNECT_4, { 0, 199 }, { 299, 199 }, PD_OK, 697.0 },
        /* 8-conn: the gap is entered from (149,0) and left to (151,0) (its
         * diagonals need wall cells), so octile (0,199)->(149,0) =
         * 149*sqrt(2) + 50, then 2 straight, then (151,0)->(299,199) =
         * 148*sqrt(2) + 51. */
        { big, PD_CONNECT_8, { 0, 199 }, { 299, 199 }, PD_OK, 297 * CORE_SQRT2 + 103 },
        { big, PD_CONNECT_8, { 0, 0 }, { 299, 0 }, PD_OK, 299.0 },
        { tiny, PD_CONNECT_8, { 0, 0 }, { 1, 0 }, PD_OK, 1.0 },
        { small, PD_CONNECT_4, { 4, 3 }, { 0, 0 }, PD_OK, 7.0 },
        { small, PD_CONNECT_8, { 0, 3 }, { 4, 3 }, PD_OK, 6.0 },
    };
    const size_t nq = sizeof queries / sizeof queries[0];

    run_known(ctx, &queries[0]);
    run_known(ctx, &queries[1]);
    size_t fp_small = pd_search_ctx_footprint(ctx);
    for (size_t i = 0; i < nq; i++)
        run_known(ctx, &queries[i]);
    size_t fp_big = pd_search_ctx_footprint(ctx);
    assert_true(fp_big > fp_small);
    /* The context holds the big grid's cells and not much more. */
    assert_true(fp_big >= (size_t)302 * 202);
    for (size_t i = 0; i < nq; i++) {
        run_known(ctx, &queries[nq - 1 - i]);
        assert_int_equal(pd_search_ctx_footprint(ctx), fp_big);
    }

    /* 10,000 more queries over the same grids: the footprint never moves.
     * The long big-grid queries are kept rare so the run stays short. */
    for (int i = 0; i < 10000; i++) {
        size_t k = (size_t)i % nq;
        if ((k == 4 || k == 5) && (size_t)i % 500 >= nq)
            k = 6 + (size_t)i % 4;
        run_known(ctx, &queries[k]);
        if (pd_search_ctx_footprint(ctx) != fp_big)
            fail_msg("footprint changed at query %d: %zu -> %zu", i, fp_big,
                     pd_search_ctx_footprint(ctx));
    }
    pd_search_ctx_destroy(ctx);
    pd_grid_destroy(small);
    pd_grid_destroy(big);
    pd_grid_destroy(tiny);
}

/* Memory follows the area searched, not the map: a short search on a big
 * grid holds a few node blocks, a search across it holds blocks for the
 * cells it touched, and a trim gives them back while the next search still
 * answers exactly as before. */
static void test_memory_follows_search(void **state)
{
    (void)state;
    pd_search_ctx *ctx = pd_search_ctx_create();
    assert_non_null(ctx);
    const size_t empty = pd_search_ctx_footprint(ctx);
    pd_grid *big = core_open_grid(2000, 2000);
    const size_t full_arrays = (size_t)2002 * 2002 * 17; /* the old 16-byte record + parent byte per cell */

    known_query near = { big, PD_CONNECT_8, { 1000, 1000 }, { 1003, 1001 }, PD_OK, 2 + CORE_SQRT2 };
    run_known(ctx, &near);
    const size_t small = pd_search_ctx_footprint(ctx);
    /* The directory (8 bytes per 256 cells, 1/544 of the old arrays), a
     * slab and the open list: under 1/50 of the old arrays. */
    assert_true(small < full_arrays / 50);

    known_query across = { big, PD_CONNECT_4, { 0, 0 }, { 1999, 1999 }, PD_OK, 3998.0 };
    run_known(ctx, &across);
    const size_t grown = pd_search_ctx_footprint(ctx);
    assert_true(grown > small);

    /* Trimmed to what the short search needed, the context still answers
     * both queries; trimmed to nothing, it keeps only itself. */
    pd_search_ctx_trim(ctx, small);
    assert_true(pd_search_ctx_footprint(ctx) <= small);
    run_known(ctx, &near);
    run_known(ctx, &across);
    pd_search_ctx_trim(ctx, 0);
    assert_int_equal(pd_search_ctx_footprint(ctx), empty);
    /* A trim that freed the path ends what extract can copy. */
    pd_point one;
    size_t len = 1;
    assert_int_equal(pd_search_extract(ctx, &one, 1, &len), PD_NO_PATH);
    run_known(ctx, &near);
    pd_grid_destroy(big);
    pd_search_ctx_destroy(ctx);
}

/* A window is clipped to the grid before any arithmetic: corners at
 * INT32_MAX (or anywhere past the edge) mean "to the edge", and the answer
 * equals the windowless one (the +1 of the padded coordinates used to
 * overflow there). A window wholly past the grid holds neither end. */
static void test_window_past_the_grid(void **state)
{
    pd_search_ctx *ctx = *state;
    pd_grid *g = core_grid("....\n.##.\n....\n");
    for (int conn = 4; conn <= 8; conn += 4) {
        pd_point path[PATH_CAP];
        pd_search_metrics plain, windowed;
        assert_int_equal(core_search(ctx, g, (pd_connectivity)conn, pt(0, 0), pt(3, 2), path, PATH_CAP, &plain),
                         PD_OK);
        static const int32_t far[] = { 3, 4, 1000, INT32_MAX - 1, INT32_MAX };
        for (size_t i = 0; i < sizeof far / sizeof far[0]; i++) {
            pd_search_params p = params(pt(0, 0), pt(3, 2), conn);
            p.has_window = 1;
            p.window_min = pt(0, 0);
            p.window_max = pt(far[i], far[i]);
            memset(&windowed, 0, sizeof windowed);
            pd_status st = pd_search_astar(ctx, g, &p, path, PATH_CAP, &windowed);
            if (st != PD_OK)
                fail_msg("window max %d: %s, want OK", far[i], pd_status_name(st));
            assert_true(fabs(windowed.cost - plain.cost) <= CORE_COST_EPS);
        }
        pd_search_params p = params(pt(0, 0), pt(3, 2), conn);
        p.has_window = 1;
        p.window_min = pt(INT32_MAX, INT32_MAX);
        p.window_max = pt(INT32_MAX, INT32_MAX);
        expect_status(ctx, g, &p, PD_INVALID_ARGUMENT);
    }
    pd_grid_destroy(g);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup_ctx, teardown_ctx)
    const struct CMUnitTest tests[] = {
        T(test_extract_before_any_search),
        T(test_start_equals_goal),
        T(test_one_by_one),
        T(test_status_order),
        T(test_unreachable_goal),
        T(test_one_by_n_and_n_by_one),
        T(test_corner_cutting),
        T(test_four_vs_eight),
        T(test_weighted_cells),
        T(test_data_room),
        T(test_budget),
        T(test_poll_cancels),
        T(test_buffer_too_small_and_extract),
        T(test_cost_only),
        T(test_window_past_the_grid),
        cmocka_unit_test(test_context_reuse_across_sizes),
        cmocka_unit_test(test_memory_follows_search),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
