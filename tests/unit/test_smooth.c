/*
 * test_smooth.c - pd_line_of_sight, pd_path_smooth, pd_path_length and
 * pd_path_times.
 *
 * Line of sight is checked on hand-made cases (straight lines, corners with
 * one or both sides blocked, a == b, points off the grid) and against an
 * independent reference on many random segments: smooth_check.h decides per
 * cell, by exact segment/square clipping, which cells a segment touches.
 *
 * Smoothing is checked for its promises on ~300 random grids with paths from
 * pd_search_astar, including paths of larger units searched on unit grids
 * built here from a naively computed clearance: same start and goal, a
 * subsequence of the input, every segment visible (by the reference) and
 * clear for the unit's whole footprint on the base grid, never longer.
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
#include "pd_path.h"
#include "pd_smooth.h"
#include "smooth_check.h"

/* Floating sums of the same lengths in a different order may differ in the
 * last bits; 1e-9 cells is far below anything a real lengthening would show. */
#define LENGTH_EPS 1e-9
#define TIME_EPS 1e-9

static pd_point pt(int32_t x, int32_t y)
{
    return (pd_point){x, y};
}

/* ---- line of sight: hand-made cases ---- */

static void test_los_straight(void **state)
{
    (void)state;
    pd_grid *g = core_grid("......\n"
                           "..#...\n"
                           "......\n");
    assert_true(pd_line_of_sight(g, pt(0, 0), pt(5, 0)));
    assert_true(pd_line_of_sight(g, pt(5, 2), pt(0, 2)));
    assert_true(pd_line_of_sight(g, pt(0, 0), pt(0, 2)));
    assert_false(pd_line_of_sight(g, pt(0, 1), pt(5, 1)));  /* through the wall */
    assert_false(pd_line_of_sight(g, pt(2, 0), pt(2, 2)));
    assert_true(pd_line_of_sight(g, pt(3, 0), pt(3, 2)));
    /* The centre line (0,0) -> (5,2) is at y = 1.1..1.5 across column 2, so
     * it enters the blocked (2,1); (1,0) -> (5,1) reaches row 1 only at
     * x = 3.5. */
    assert_false(pd_line_of_sight(g, pt(0, 0), pt(5, 2)));
    assert_true(pd_line_of_sight(g, pt(1, 0), pt(5, 1)));
    pd_grid_destroy(g);
}

static void test_los_corners(void **state)
{
    (void)state;
    /* A diagonal step is visible iff both orthogonal cells are open,
     * exactly the search's corner rule. */
    pd_grid *g = core_grid("..\n"
                           "..\n");
    assert_true(pd_line_of_sight(g, pt(0, 0), pt(1, 1)));
    assert_true(pd_line_of_sight(g, pt(1, 0), pt(0, 1)));
    pd_grid_set(g, 1, 0, PD_CELL_BLOCKED);
    assert_false(pd_line_of_sight(g, pt(0, 0), pt(1, 1)));
    assert_false(pd_line_of_sight(g, pt(1, 1), pt(0, 0)));
    pd_grid_destroy(g);

    /* (0,0) -> (2,2) passes exactly through two cell corners, with the
     * cells (1,0),(0,1) beside the first and (2,1),(1,2) beside the second. */
    g = core_open_grid(3, 3);
    assert_true(pd_line_of_sight(g, pt(0, 0), pt(2, 2)));
    pd_grid_set(g, 1, 2, PD_CELL_BLOCKED);
    assert_false(pd_line_of_sight(g, pt(0, 0), pt(2, 2)));
    assert_true(pd_line_of_sight(g, pt(0, 0), pt(1, 1)));
    pd_grid_set(g, 1, 2, PD_CELL_FREE);
    pd_grid_set(g, 2, 1, PD_CELL_BLOCKED);
    assert_false(pd_line_of_sight(g, pt(2, 2), pt(0, 0)));
    pd_grid_destroy(g);
}

static void test_los_corner_on_steep_line(void **state)
{
    (void)state;
    /* (0,0) -> (2,6): the centre line x = 0.5 + (y - 0.5) / 3 meets the
     * lattice point (1,2), going from cell (0,1) into (1,2); (1,1) and (0,2)
     * are the cells beside that corner and must both be open. */
    pd_grid *g = core_open_grid(3, 7);
    assert_true(pd_line_of_sight(g, pt(0, 0), pt(2, 6)));
    pd_grid_set(g, 1, 1, PD_CELL_BLOCKED);
    assert_false(pd_line_of_sight(g, pt(0, 0), pt(2, 6)));
    pd_grid_set(g, 1, 1, PD_CELL_FREE);
    pd_grid_set(g, 0, 2, PD_CELL_BLOCKED);
    assert_false(pd_line_of_sight(g, pt(0, 0), pt(2, 6)));
    pd_grid_set(g, 0, 2, PD_CELL_FREE);
    pd_grid_set(g, 2, 1, PD_CELL_BLOCKED); /* not touched by the line */
    assert_true(pd_line_of_sight(g, pt(0, 0), pt(2, 6)));
    pd_grid_destroy(g);
}

static void test_los_same_cell_and_outside(void **state)
{
    (void)state;
    pd_grid *g = core_grid(".#\n");
    assert_true(pd_line_of_sight(g, pt(0, 0), pt(0, 0)));
    assert_false(pd_line_of_sight(g, pt(1, 0), pt(1, 0)));
    assert_false(pd_line_of_sight(g, pt(0, 0), pt(-1, 0)));
    assert_false(pd_line_of_sight(g, pt(5, 5), pt(0, 0)));
    assert_false(pd_line_of_sight(g, pt(INT32_MIN, INT32_MAX), pt(0, 0)));
    assert_false(pd_line_of_sight(NULL, pt(0, 0), pt(0, 0)));
    pd_grid_destroy(g);
}

/* ---- line of sight against the reference ---- */

static void test_los_matches_reference(void **state)
{
    (void)state;
    uint64_t rng = 0x5eedf00dULL;
    size_t visible = 0, hidden = 0;
    for (int round = 0; round < 150; round++) {
        int32_t w = check_rand_range(&rng, 1, 48), h = check_rand_range(&rng, 1, 48);
        pd_grid *g = check_random_grid(&rng, w, h, round % 2);
        for (int k = 0; k < 60; k++) {
            pd_point a = pt(check_rand_range(&rng, 0, w - 1), check_rand_range(&rng, 0, h - 1));
            pd_point b = pt(check_rand_range(&rng, 0, w - 1), check_rand_range(&rng, 0, h - 1));
            if (k % 5 == 0) { /* exact diagonals pass through a corner at every step */
                int32_t d = b.x - a.x;
                b = pt(a.x + d, a.y + (k % 2 ? d : -d));
            }
            int want = check_visible(g, a, b);
            int got = pd_line_of_sight(g, a, b);
            if (got != want)
                fail_msg("round %d: los (%d,%d)->(%d,%d) = %d, reference %d", round, a.x, a.y,
                         b.x, b.y, got, want);
            assert_int_equal(pd_line_of_sight(g, b, a), got);
            if (got)
                visible++;
            else
                hidden++;
        }
        pd_grid_destroy(g);
    }
    /* Both answers must actually occur, or the comparison proves little. */
    assert_true(visible > 500);
    assert_true(hidden > 500);
}

static void test_los_long_segments(void **state)
{
    (void)state;
    uint64_t rng = 0xabcdef12345ULL;
    pd_grid *g = core_open_grid(300, 300);
    for (int i = 0; i < 60; i++)
        pd_grid_set(g, check_rand_range(&rng, 0, 299), check_rand_range(&rng, 0, 299),
                    PD_CELL_BLOCKED);
    size_t visible = 0;
    for (int k = 0; k < 150; k++) {
        pd_point a = pt(check_rand_range(&rng, 0, 299), check_rand_range(&rng, 0, 299));
        pd_point b = pt(check_rand_range(&rng, 0, 299), check_rand_range(&rng, 0, 299));
        int want = check_visible(g, a, b);
        if (pd_line_of_sight(g, a, b) != want)
            fail_msg("los (%d,%d)->(%d,%d) disagrees with the reference (%d)", a.x, a.y, b.x,
                     b.y, want);
        visible += (size_t)want;
    }
    assert_true(visible > 10 && visible < 140);
    pd_grid_destroy(g);
}

/* ---- smoothing ---- */

static void test_smooth_corridor(void **state)
{
    (void)state;
    /* The only way from (0,0) to (0,2) is along row 0, down column 5 and
     * back along row 2; the wall makes (5,0) and (5,2) necessary corners:
     * (0,0) cannot see (5,1) (its line crosses row 1 left of x=5) and (5,0)
     * cannot see (4,2) (its line passes between (4,1) and (5,1) at y=1.5). */
    pd_grid *g = core_grid("......\n"
                           "#####.\n"
                           "......\n");
    pd_search_ctx *ctx = pd_search_ctx_create();
    pd_point path[64];
    pd_search_metrics m;
    assert_int_equal(core_search(ctx, g, PD_CONNECT_8, pt(0, 0), pt(0, 2), path, 64, &m), PD_OK);
    size_t n = pd_path_smooth(g, path, m.path_len);
    pd_point want[4] = {{0, 0}, {5, 0}, {5, 2}, {0, 2}};
    assert_int_equal(n, 4);
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(path[i].x, want[i].x);
        assert_int_equal(path[i].y, want[i].y);
    }
    pd_search_ctx_destroy(ctx);
    pd_grid_destroy(g);
}

static void test_smooth_direct_line_and_small(void **state)
{
    (void)state;
    pd_grid *g = core_open_grid(12, 8);
    pd_search_ctx *ctx = pd_search_ctx_create();
    pd_point path[128];
    pd_search_metrics m;
    assert_int_equal(core_search(ctx, g, PD_CONNECT_8, pt(0, 0), pt(11, 4), path, 128, &m),
                     PD_OK);
    assert_true(m.path_len > 2);
    assert_int_equal(pd_path_smooth(g, path, m.path_len), 2);
    assert_int_equal(path[0].x, 0);
    assert_int_equal(path[1].x, 11);
    assert_int_equal(path[1].y, 4);

    assert_int_equal(pd_path_smooth(g, NULL, 0), 0);
    pd_point one[1] = {{3, 3}};
    assert_int_equal(pd_path_smooth(g, one, 1), 1);
    pd_point two[2] = {{3, 3}, {4, 4}};
    assert_int_equal(pd_path_smooth(g, two, 2), 2);
    assert_int_equal(two[1].x, 4);
    pd_search_ctx_destroy(ctx);
    pd_grid_destroy(g);
}

/* Largest k such that the k x k square anchored (top-left) at (x, y) is all
 * open: the definition of clearance, computed by brute force. */
static int32_t naive_clearance(const pd_grid *g, int32_t x, int32_t y)
{
    int32_t k = 0;
    for (;;) {
        for (int32_t i = 0; i <= k; i++)
            if (pd_grid_get(g, x + k, y + i) == PD_CELL_BLOCKED ||
                pd_grid_get(g, x + i, y + k) == PD_CELL_BLOCKED)
                return k;
        k++;
    }
}

/* The grid a unit of size k searches: open where the footprint fits, with
 * the largest cost under the footprint. */
static pd_grid *naive_unit_grid(const pd_grid *base, int32_t k)
{
    pd_grid *u = pd_grid_create(base->width, base->height);
    assert_non_null(u);
    for (int32_t y = 0; y < base->height; y++) {
        for (int32_t x = 0; x < base->width; x++) {
            if (naive_clearance(base, x, y) < k)
                continue;
            uint8_t cost = 1;
            for (int32_t j = 0; j < k; j++)
                for (int32_t i = 0; i < k; i++)
                    if (pd_grid_get(base, x + i, y + j) > cost)
                        cost = pd_grid_get(base, x + i, y + j);
            pd_grid_set(u, x, y, cost);
        }
    }
    return u;
}

/* Every cell the segment touches, taken as the anchor of a k x k footprint,
 * covers only open cells of the base grid. */
static void assert_footprint_clear(const pd_grid *base, int32_t k, pd_point a, pd_point b)
{
    int32_t x0 = a.x < b.x ? a.x : b.x, x1 = a.x > b.x ? a.x : b.x;
    int32_t y0 = a.y < b.y ? a.y : b.y, y1 = a.y > b.y ? a.y : b.y;
    for (int32_t y = y0; y <= y1; y++)
        for (int32_t x = x0; x <= x1; x++) {
            if (!check_segment_cell(a, b, pt(x, y)).touched)
                continue;
            for (int32_t j = 0; j < k; j++)
                for (int32_t i = 0; i < k; i++)
                    if (pd_grid_get(base, x + i, y + j) == PD_CELL_BLOCKED)
                        fail_msg("unit %d on (%d,%d)->(%d,%d) overlaps blocked (%d,%d)", k,
                                 a.x, a.y, b.x, b.y, x + i, y + j);
        }
}

/* Random start and goal, drawn (a bounded number of times) until both are
 * open and connected, so most rounds produce a path to smooth. */
static void pick_connected_pair(uint64_t *rng, const pd_grid *g, pd_point *s, pd_point *t)
{
    pd_components *c = check_components(g);
    for (int tries = 0; tries < 200; tries++) {
        *s = pt(check_rand_range(rng, 0, g->width - 1), check_rand_range(rng, 0, g->height - 1));
        *t = pt(check_rand_range(rng, 0, g->width - 1), check_rand_range(rng, 0, g->height - 1));
        if (pd_components_connected(c, *s, *t))
            break;
    }
    check_components_free(c);
}

static void test_smooth_random_properties(void **state)
{
    (void)state;
    uint64_t rng = 0x12345678ULL;
    pd_search_ctx *ctx = pd_search_ctx_create();
    assert_non_null(ctx);
    size_t cases = 0, shortened = 0, per_unit[4] = {0};
    size_t points_before = 0, points_after = 0;
    for (int round = 0; round < 300; round++) {
        int32_t w = check_rand_range(&rng, 4, 40), h = check_rand_range(&rng, 4, 40);
        pd_grid *base = check_random_grid(&rng, w, h, round % 3 == 0);
        int32_t k = 1 + round % 3;
        pd_grid *g = k == 1 ? base : naive_unit_grid(base, k);
        pd_point s, t;
        pick_connected_pair(&rng, g, &s, &t);
        pd_connectivity conn = round % 7 == 0 ? PD_CONNECT_4 : PD_CONNECT_8;
        size_t cap = (size_t)w * (size_t)h;
        pd_point *path = malloc(cap * sizeof *path), *orig = malloc(cap * sizeof *orig);
        assert_non_null(path);
        assert_non_null(orig);
        pd_search_metrics m;
        pd_status st = pd_grid_get(g, s.x, s.y) && pd_grid_get(g, t.x, t.y)
                           ? core_search(ctx, g, conn, s, t, path, cap, &m)
                           : PD_NO_PATH;
        if (st == PD_OK) {
            size_t n = m.path_len;
            memcpy(orig, path, n * sizeof *path);
            size_t sn = pd_path_smooth(g, path, n);
            assert_true(sn >= (n > 1 ? 2u : 1u) && sn <= n);
            assert_int_equal(path[0].x, s.x);
            assert_int_equal(path[0].y, s.y);
            assert_int_equal(path[sn - 1].x, t.x);
            assert_int_equal(path[sn - 1].y, t.y);
            /* A subsequence of the original, in order. */
            size_t j = 0;
            for (size_t i = 0; i < sn; i++) {
                while (j < n && (orig[j].x != path[i].x || orig[j].y != path[i].y))
                    j++;
                if (j == n)
                    fail_msg("round %d: smoothed point %zu is not a later path point", round, i);
                j++;
            }
            for (size_t i = 1; i < sn; i++) {
                if (!check_visible(g, path[i - 1], path[i]))
                    fail_msg("round %d: segment %zu (%d,%d)->(%d,%d) is not clear", round, i,
                             path[i - 1].x, path[i - 1].y, path[i].x, path[i].y);
                assert_footprint_clear(base, k, path[i - 1], path[i]);
            }
            /* On uniform ground a visible goal is always taken directly; with
             * terrain costs only when the line is no dearer than the path. */
            if (check_visible(g, s, t) && g->uniform_cost)
                assert_int_equal(sn, n > 1 ? 2 : 1);
            double before = pd_path_length(orig, n), after = pd_path_length(path, sn);
            if (g->uniform_cost && after > before + LENGTH_EPS)
                fail_msg("round %d: smoothing lengthened %.12f -> %.12f", round, before, after);
            /* Never costlier: walking time at speed 1 is the path's cost. */
            double *t_orig = malloc(n * sizeof *t_orig), *t_path = malloc(sn * sizeof *t_path);
            assert_non_null(t_orig);
            assert_non_null(t_path);
            pd_path_times(g, orig, n, 1.0, 0.0, t_orig);
            pd_path_times(g, path, sn, 1.0, 0.0, t_path);
            if (t_path[sn - 1] > t_orig[n - 1] + LENGTH_EPS)
                fail_msg("round %d: smoothing made the path costlier %.12f -> %.12f", round,
                         t_orig[n - 1], t_path[sn - 1]);
            free(t_orig);
            free(t_path);
            cases++;
            per_unit[k]++;
            shortened += after < before - 1e-6;
            points_before += n;
            points_after += sn;
        }
        free(path);
        free(orig);
        if (g != base)
            pd_grid_destroy(g);
        pd_grid_destroy(base);
    }
    pd_search_ctx_destroy(ctx);
    print_message("smoothed %zu paths (unit 1/2/3: %zu/%zu/%zu), %zu shorter, points %zu -> %zu\n",
                  cases, per_unit[1], per_unit[2], per_unit[3], shortened, points_before,
                  points_after);
    /* Enough real cases for every unit size, and smoothing does something. */
    assert_true(cases >= 250);
    for (int k = 1; k <= 3; k++)
        assert_true(per_unit[k] >= 60);
    assert_true(shortened >= cases / 2);
    assert_true(points_after * 2 < points_before);
}

/* ---- length and timing ---- */

static void test_length(void **state)
{
    (void)state;
    assert_true(pd_path_length(NULL, 0) == 0.0);
    pd_point one[1] = {{2, 2}};
    assert_true(pd_path_length(one, 1) == 0.0);
    pd_point pyth[2] = {{1, 1}, {4, 5}};
    assert_true(fabs(pd_path_length(pyth, 2) - 5.0) < LENGTH_EPS);
    pd_point steps[4] = {{0, 0}, {1, 1}, {1, 3}, {1, 3}};
    assert_true(fabs(pd_path_length(steps, 4) - (CORE_SQRT2 + 2.0)) < LENGTH_EPS);
}

static void test_times_uniform_cell_path(void **state)
{
    (void)state;
    uint64_t rng = 77;
    pd_grid *g = check_random_grid(&rng, 30, 30, 0);
    pd_grid_set(g, 0, 0, PD_CELL_FREE);
    pd_grid_set(g, 29, 29, PD_CELL_FREE);
    pd_search_ctx *ctx = pd_search_ctx_create();
    pd_point path[900];
    pd_search_metrics m;
    assert_int_equal(core_search(ctx, g, PD_CONNECT_8, pt(0, 0), pt(29, 29), path, 900, &m),
                     PD_OK);
    double times[900];
    const double speed = 2.5, t0 = 100.0;
    pd_path_times(g, path, m.path_len, speed, t0, times);
    assert_true(times[0] == t0);
    size_t diagonals = 0;
    for (size_t i = 1; i < m.path_len; i++) {
        int diag = path[i].x != path[i - 1].x && path[i].y != path[i - 1].y;
        double want = (diag ? CORE_SQRT2 : 1.0) / speed;
        if (fabs(times[i] - times[i - 1] - want) > TIME_EPS)
            fail_msg("step %zu took %.12f, want %.12f", i, times[i] - times[i - 1], want);
        diagonals += (size_t)diag;
    }
    assert_true(diagonals > 0 && diagonals < m.path_len - 1);
    assert_true(fabs(times[m.path_len - 1] - t0 - m.cost / speed) < TIME_EPS);
    pd_search_ctx_destroy(ctx);
    pd_grid_destroy(g);
}

static void test_times_costs(void **state)
{
    (void)state;
    /* (0,0) -> (2,1): the centre line crosses x=1 at y=0.75, y=1 at x=1.5
     * and x=2 at y=1.25, so it enters (1,0), (1,1), (2,1) with costs 2, 3,
     * 4: mean 3, length sqrt(5). */
    pd_grid *g = core_grid("92..\n"
                           "934.\n");
    double times[3];
    pd_point seg[2] = {{0, 0}, {2, 1}};
    pd_path_times(g, seg, 2, 2.0, 1.0, times);
    assert_true(fabs(times[1] - (1.0 + sqrt(5.0) * 3.0 / 2.0)) < TIME_EPS);

    /* A diagonal step through a corner costs sqrt(2) x the cell entered; the
     * two cells beside the corner (cost 9 and 3 here) do not count. */
    pd_point diag[2] = {{0, 1}, {1, 0}};
    pd_path_times(g, diag, 2, 1.0, 0.0, times);
    assert_true(fabs(times[1] - CORE_SQRT2 * 2.0) < TIME_EPS);

    /* Straight: (1,0) -> (3,0) enters cost 1, 1 ('.'); then (3,0) -> (3,1)
     * enters cost 1; back (3,1) -> (1,1) enters 4 then 3: 2 x 3.5 = 7. */
    pd_point run[4] = {{1, 0}, {3, 0}, {3, 1}, {1, 1}};
    double four[4];
    pd_path_times(g, run, 4, 1.0, 0.0, four);
    assert_true(four[0] == 0.0);
    assert_true(fabs(four[1] - 2.0) < TIME_EPS);
    assert_true(fabs(four[2] - 3.0) < TIME_EPS);
    assert_true(fabs(four[3] - 10.0) < TIME_EPS);

    /* A repeated point takes no time. */
    pd_point still[2] = {{1, 1}, {1, 1}};
    pd_path_times(g, still, 2, 1.0, 5.0, times);
    assert_true(times[1] == 5.0);
    pd_grid_destroy(g);
}

static void test_times_corners_match_cells(void **state)
{
    (void)state;
    /* On cost grids the time at each corner of a compressed path equals the
     * time the cell-by-cell path reaches the same point: a straight or
     * diagonal run's mean cost times its length is the sum over its cells. */
    uint64_t rng = 4242;
    pd_search_ctx *ctx = pd_search_ctx_create();
    size_t checked = 0;
    for (int round = 0; round < 40; round++) {
        pd_grid *g = check_random_grid(&rng, 25, 25, 1);
        pd_point s = pt(check_rand_range(&rng, 0, 24), check_rand_range(&rng, 0, 24));
        pd_point t = pt(check_rand_range(&rng, 0, 24), check_rand_range(&rng, 0, 24));
        pd_grid_set(g, s.x, s.y, 1);
        pd_grid_set(g, t.x, t.y, 1);
        pd_point cells[625], corners[625];
        double cell_times[625], corner_times[625];
        pd_search_metrics m;
        if (core_search(ctx, g, PD_CONNECT_8, s, t, cells, 625, &m) == PD_OK) {
            pd_path_times(g, cells, m.path_len, 1.5, 3.0, cell_times);
            /* The search charges length x cost of the cell entered. */
            assert_true(fabs(cell_times[m.path_len - 1] - 3.0 - m.cost / 1.5) < TIME_EPS);
            memcpy(corners, cells, m.path_len * sizeof *cells);
            size_t nc = pd_path_corners(corners, m.path_len);
            pd_path_times(g, corners, nc, 1.5, 3.0, corner_times);
            size_t j = 0;
            for (size_t i = 0; i < nc; i++) {
                while (cells[j].x != corners[i].x || cells[j].y != corners[i].y)
                    j++;
                if (fabs(corner_times[i] - cell_times[j]) > TIME_EPS)
                    fail_msg("round %d corner %zu: %.12f vs cell time %.12f", round, i,
                             corner_times[i], cell_times[j]);
            }
            checked++;
        }
        pd_grid_destroy(g);
    }
    assert_true(checked >= 20);
    pd_search_ctx_destroy(ctx);
}

static void test_times_bad_input(void **state)
{
    (void)state;
    pd_grid *g = core_open_grid(4, 4);
    pd_point pts[3] = {{0, 0}, {3, 0}, {3, 3}};
    double times[3];
    pd_path_times(g, pts, 3, 0.0, 7.0, times);
    for (int i = 0; i < 3; i++)
        assert_true(times[i] == 7.0);
    pd_path_times(g, pts, 3, NAN, 8.0, times);
    for (int i = 0; i < 3; i++)
        assert_true(times[i] == 8.0);
    pd_path_times(g, pts, 3, -1.0, 9.0, times);
    assert_true(times[2] == 9.0);
    pd_path_times(g, pts, 0, 1.0, 0.0, NULL);
    pd_path_times(g, pts, 3, 1.0, 0.0, times);
    assert_true(fabs(times[2] - 6.0) < TIME_EPS);
    pd_grid_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_los_straight),
        cmocka_unit_test(test_los_corners),
        cmocka_unit_test(test_los_corner_on_steep_line),
        cmocka_unit_test(test_los_same_cell_and_outside),
        cmocka_unit_test(test_los_matches_reference),
        cmocka_unit_test(test_los_long_segments),
        cmocka_unit_test(test_smooth_corridor),
        cmocka_unit_test(test_smooth_direct_line_and_small),
        cmocka_unit_test(test_smooth_random_properties),
        cmocka_unit_test(test_length),
        cmocka_unit_test(test_times_uniform_cell_path),
        cmocka_unit_test(test_times_costs),
        cmocka_unit_test(test_times_corners_match_cells),
        cmocka_unit_test(test_times_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
