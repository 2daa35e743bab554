/*
 * test_fallback.c - pd_fallback_nearest (snapping and the NEAREST goal
 * mode) and pd_fallback_line (the LINE goal mode).
 *
 * Hand-made cases pin down each rule: the open point itself, blocked and
 * off-grid points, deterministic ties, component restriction, the radius,
 * a nearer cell in a later ring than the first hit, and the corner order of
 * the line walk. Random grids then compare both functions with brute force
 * written from the definitions: NEAREST scans every cell of the grid, LINE
 * orders the cells the segment touches by where it first meets them
 * (smooth_check.h's exact clipping). Component labels come from the test's
 * own flood fill, so these tests do not depend on pd_components.c.
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
#include "pd_fallback.h"
#include "smooth_check.h"

static pd_point pt(int32_t x, int32_t y)
{
    return (pd_point){x, y};
}

static void assert_point(pd_point got, int32_t x, int32_t y)
{
    if (got.x != x || got.y != y)
        fail_msg("got (%d,%d), want (%d,%d)", got.x, got.y, x, y);
}

/* A w x h grid that is blocked everywhere except the listed cells. */
static pd_grid *sparse_grid(int32_t w, int32_t h, const pd_point *open, size_t n)
{
    pd_grid *g = pd_grid_create(w, h);
    assert_non_null(g);
    for (size_t i = 0; i < n; i++)
        pd_grid_set(g, open[i].x, open[i].y, PD_CELL_FREE);
    return g;
}

/* ---- nearest ---- */

static void test_nearest_open_point(void **state)
{
    (void)state;
    pd_grid *g = core_grid("...\n"
                           ".#.\n"
                           "...\n");
    pd_components *c = check_components(g);
    pd_point out = pt(-9, -9);
    assert_int_equal(pd_fallback_nearest(g, NULL, 0, pt(2, 1), 5, &out), PD_OK);
    assert_point(out, 2, 1);
    assert_int_equal(pd_fallback_nearest(g, c, pd_components_label(c, pt(0, 0)), pt(2, 1), 0, &out),
                     PD_OK);
    assert_point(out, 2, 1);
    check_components_free(c);
    pd_grid_destroy(g);
}

static void test_nearest_blocked_point(void **state)
{
    (void)state;
    /* From (3,3): (5,3) is 2 away, (2,6) sqrt(10); a radius of 1 finds
     * neither. */
    pd_point open[2] = {{5, 3}, {2, 6}};
    pd_grid *g = sparse_grid(7, 7, open, 2);
    pd_point out;
    assert_int_equal(pd_fallback_nearest(g, NULL, 0, pt(3, 3), 8, &out), PD_OK);
    assert_point(out, 5, 3);
    assert_int_equal(pd_fallback_nearest(g, NULL, 0, pt(3, 3), 1, &out), PD_NO_PATH);
    assert_int_equal(pd_fallback_nearest(g, NULL, 0, pt(3, 3), 2, &out), PD_OK);
    assert_point(out, 5, 3);
    pd_grid_set(g, 5, 3, PD_CELL_BLOCKED);
    assert_int_equal(pd_fallback_nearest(g, NULL, 0, pt(3, 3), 2, &out), PD_NO_PATH);
    assert_int_equal(pd_fallback_nearest(g, NULL, 0, pt(3, 3), 3, &out), PD_OK);
    assert_point(out, 2, 6);
    pd_grid_set(g, 2, 6, PD_CELL_BLOCKED);
    assert_int_equal(pd_fallback_nearest(g, NULL, 0, pt(3, 3), PD_FALLBACK_MAX_RADIUS, &out),
                     PD_NO_PATH);
    pd_grid_destroy(g);
}

static void test_nearest_outside_grid(void **state)
{
    (void)state;
    pd_grid *g = core_open_grid(5, 5);
    pd_point out;
    assert_int_equal(pd_fallback_nearest(g, NULL, 0, pt(-3, 1), 10, &out), PD_OK);
    assert_point(out, 0, 1);
    assert_int_equal(pd_fallback_nearest(g, NULL, 0, pt(-3, -3), 10, &out), PD_OK);
    assert_point(out, 0, 0);
    assert_int_equal(pd_fallback_nearest(g, NULL, 0, pt(10, 2), 10, &out), PD_OK);
    assert_point(out, 4, 2);
    assert_int_equal(pd_fallback_nearest(g, NULL, 0, pt(2, -1), 1, &out), PD_OK);
    assert_point(out, 2, 0);
    /* The grid's first ring from (-3,1) is ring 3. */
    assert_int_equal(pd_fallback_nearest(g, NULL, 0, pt(-3, 1), 2, &out), PD_NO_PATH);
    assert_int_equal(pd_fallback_nearest(g, NULL, 0, pt(-3, 1), 3, &out), PD_OK);
    /* Extreme coordinates: no overflow, nothing within the radius, and with
     * an unbounded radius the corner cell nearest to the far point. */
    assert_int_equal(pd_fallback_nearest(g, NULL, 0, pt(INT32_MIN, INT32_MAX),
                                         PD_FALLBACK_MAX_RADIUS, &out),
                     PD_NO_PATH);
    assert_int_equal(pd_fallback_nearest(g, NULL, 0, pt(INT32_MIN + 1, INT32_MAX), INT32_MAX,
                                         &out),
                     PD_OK);
    assert_point(out, 0, 4);
    assert_int_equal(pd_fallback_nearest(g, NULL, 0, pt(INT32_MAX, INT32_MIN + 1), INT32_MAX,
                                         &out),
                     PD_OK);
    assert_point(out, 4, 0);
    /* INT32_MIN is 2^31 cells from column 0: one ring beyond any radius. */
    assert_int_equal(pd_fallback_nearest(g, NULL, 0, pt(INT32_MIN, 0), INT32_MAX, &out),
                     PD_NO_PATH);
    pd_grid_destroy(g);
}

static void test_nearest_ties(void **state)
{
    (void)state;
    /* Four cells 2 away from (2,2): ties go to the smaller y, then x. */
    pd_point open[4] = {{2, 4}, {4, 2}, {0, 2}, {2, 0}};
    pd_grid *g = sparse_grid(5, 5, open, 4);
    pd_point out;
    assert_int_equal(pd_fallback_nearest(g, NULL, 0, pt(2, 2), 4, &out), PD_OK);
    assert_point(out, 2, 0);
    pd_grid_set(g, 2, 0, PD_CELL_BLOCKED);
    assert_int_equal(pd_fallback_nearest(g, NULL, 0, pt(2, 2), 4, &out), PD_OK);
    assert_point(out, 0, 2);
    pd_grid_set(g, 0, 2, PD_CELL_BLOCKED);
    assert_int_equal(pd_fallback_nearest(g, NULL, 0, pt(2, 2), 4, &out), PD_OK);
    assert_point(out, 4, 2);
    pd_grid_set(g, 4, 2, PD_CELL_BLOCKED);
    assert_int_equal(pd_fallback_nearest(g, NULL, 0, pt(2, 2), 4, &out), PD_OK);
    assert_point(out, 2, 4);
    pd_grid_destroy(g);

    /* A tie across rings: (13,14) in ring 4 and (15,10) in ring 5 are both
     * 5 from (10,10); the later ring's cell has the smaller y and wins. */
    pd_point across[2] = {{13, 14}, {15, 10}};
    g = sparse_grid(20, 20, across, 2);
    assert_int_equal(pd_fallback_nearest(g, NULL, 0, pt(10, 10), 8, &out), PD_OK);
    assert_point(out, 15, 10);
    pd_grid_destroy(g);
}

static void test_nearest_euclidean_beats_first_ring(void **state)
{
    (void)state;
    /* (13,13) is the first hit (ring 3) but sqrt(18) away; (14,10) in ring
     * 4 is 4 away. Also when the first hit is at the radius limit: the
     * confirming rings may go past it. */
    pd_point open[2] = {{13, 13}, {14, 10}};
    pd_grid *g = sparse_grid(20, 20, open, 2);
    pd_point out;
    assert_int_equal(pd_fallback_nearest(g, NULL, 0, pt(10, 10), 10, &out), PD_OK);
    assert_point(out, 14, 10);
    assert_int_equal(pd_fallback_nearest(g, NULL, 0, pt(10, 10), 3, &out), PD_OK);
    assert_point(out, 14, 10);
    assert_int_equal(pd_fallback_nearest(g, NULL, 0, pt(10, 10), 2, &out), PD_NO_PATH);
    pd_grid_destroy(g);
}

static void test_nearest_label(void **state)
{
    (void)state;
    /* The wall splits left (label of (0,0)) from right. From (4,1), which is
     * blocked, three right-side cells are 1 away - (4,0) wins on its smaller
     * y - and the left side's nearest, (2,1), is 2 away. */
    pd_grid *g = core_grid("...#....\n"
                           "...##...\n"
                           "...#....\n");
    pd_components *c = check_components(g);
    uint32_t left = pd_components_label(c, pt(0, 0)), right = pd_components_label(c, pt(7, 0));
    assert_true(left != 0 && right != 0 && left != right);
    pd_point out;
    assert_int_equal(pd_fallback_nearest(g, c, 0, pt(4, 1), 5, &out), PD_OK);
    assert_point(out, 4, 0);
    assert_int_equal(pd_fallback_nearest(g, c, right, pt(4, 1), 5, &out), PD_OK);
    assert_point(out, 4, 0);
    assert_int_equal(pd_fallback_nearest(g, c, left, pt(4, 1), 5, &out), PD_OK);
    assert_point(out, 2, 1);
    /* An open point of the wrong component is not its own answer. */
    assert_int_equal(pd_fallback_nearest(g, c, left, pt(6, 1), 5, &out), PD_OK);
    assert_point(out, 2, 1);
    assert_int_equal(pd_fallback_nearest(g, c, left, pt(6, 1), 3, &out), PD_NO_PATH);
    assert_int_equal(pd_fallback_nearest(g, c, 999, pt(6, 1), 50, &out), PD_NO_PATH);
    check_components_free(c);
    pd_grid_destroy(g);
}

static void test_nearest_bad_arguments(void **state)
{
    (void)state;
    pd_grid *g = core_open_grid(3, 3);
    pd_grid *other = core_open_grid(4, 3);
    pd_components *c = check_components(other);
    pd_point out;
    assert_int_equal(pd_fallback_nearest(NULL, NULL, 0, pt(0, 0), 3, &out), PD_INVALID_ARGUMENT);
    assert_int_equal(pd_fallback_nearest(g, NULL, 0, pt(0, 0), 3, NULL), PD_INVALID_ARGUMENT);
    assert_int_equal(pd_fallback_nearest(g, NULL, 0, pt(0, 0), -1, &out), PD_INVALID_ARGUMENT);
    assert_int_equal(pd_fallback_nearest(g, NULL, 1, pt(0, 0), 3, &out), PD_INVALID_ARGUMENT);
    /* Labels of a grid with another shape. */
    assert_int_equal(pd_fallback_nearest(g, c, 1, pt(0, 0), 3, &out), PD_INVALID_ARGUMENT);
    check_components_free(c);
    pd_grid_destroy(other);
    pd_grid_destroy(g);
}

/* Brute force from the definition: among every qualifying cell of the grid
 * the smallest squared distance, then y, then x; none if no qualifying cell
 * is within max_radius in Chebyshev distance. */
static int reference_nearest(const pd_grid *g, const pd_components *c, uint32_t label,
                             pd_point p, int32_t max_radius, pd_point *out)
{
    int found = 0, in_radius = 0;
    int64_t best = 0;
    for (int32_t y = 0; y < g->height; y++)
        for (int32_t x = 0; x < g->width; x++) {
            if (pd_grid_get(g, x, y) == PD_CELL_BLOCKED)
                continue;
            if (label && pd_components_label(c, pt(x, y)) != label)
                continue;
            int64_t dx = (int64_t)x - p.x, dy = (int64_t)y - p.y;
            int64_t cheb = llabs(dx) > llabs(dy) ? llabs(dx) : llabs(dy);
            in_radius |= cheb <= max_radius;
            int64_t d2 = dx * dx + dy * dy;
            if (!found || d2 < best) { /* scan order already gives the tie rule */
                found = 1;
                best = d2;
                *out = pt(x, y);
            }
        }
    return found && in_radius;
}

static void test_nearest_matches_reference(void **state)
{
    (void)state;
    uint64_t rng = 0xfa11bac4ULL;
    size_t ok = 0, none = 0, moved = 0;
    for (int round = 0; round < 300; round++) {
        int32_t w = check_rand_range(&rng, 1, 30), h = check_rand_range(&rng, 1, 30);
        pd_grid *g = check_random_grid(&rng, w, h, 0);
        pd_components *c = check_components(g);
        for (int k = 0; k < 20; k++) {
            pd_point p = pt(check_rand_range(&rng, -8, w + 7), check_rand_range(&rng, -8, h + 7));
            int32_t radius = check_rand_range(&rng, 0, 12);
            uint32_t label = 0;
            if (k % 2 && c->count > 0)
                label = (uint32_t)check_rand_range(&rng, 1, (int32_t)c->count);
            pd_point want = pt(-1, -1), got = pt(-2, -2);
            int has = reference_nearest(g, c, label, p, radius, &want);
            pd_status st = pd_fallback_nearest(g, label ? c : NULL, label, p, radius, &got);
            if (st != (has ? PD_OK : PD_NO_PATH))
                fail_msg("round %d: (%d,%d) r=%d label=%u: status %d, reference %s", round, p.x,
                         p.y, radius, label, st, has ? "found" : "none");
            if (has) {
                if (got.x != want.x || got.y != want.y)
                    fail_msg("round %d: (%d,%d) r=%d label=%u: got (%d,%d), want (%d,%d)", round,
                             p.x, p.y, radius, label, got.x, got.y, want.x, want.y);
                ok++;
                moved += got.x != p.x || got.y != p.y;
            } else {
                none++;
            }
        }
        check_components_free(c);
        pd_grid_destroy(g);
    }
    assert_true(ok > 1000 && moved > 500 && none > 100);
}

/* ---- line ---- */

static void test_line_walks_back(void **state)
{
    (void)state;
    /* Column 5 is a wall: from the goal (8,1) back toward (1,1), the first
     * cell on the start's side is (4,1). */
    pd_grid *g = core_grid(".....#....\n"
                           ".....#....\n"
                           ".....#....\n");
    pd_components *c = check_components(g);
    pd_point out;
    assert_int_equal(pd_fallback_line(g, c, pt(1, 1), pt(8, 1), &out), PD_OK);
    assert_point(out, 4, 1);
    /* A sloped line: (0,0) <- (9,2) has y = 0.5 + (x - 0.5) * 2/9, which is
     * 1.5..1.72 across column 5 and 1.28..1.5 across column 4, so the first
     * start-side cell back from the wall is (4,1). */
    assert_int_equal(pd_fallback_line(g, c, pt(0, 0), pt(9, 2), &out), PD_OK);
    assert_point(out, 4, 1);
    /* The goal itself when it is already in the start's component. */
    assert_int_equal(pd_fallback_line(g, c, pt(0, 0), pt(3, 2), &out), PD_OK);
    assert_point(out, 3, 2);
    check_components_free(c);
    pd_grid_destroy(g);
}

static void test_line_start_when_nothing_between(void **state)
{
    (void)state;
    /* Between start (0,0) and goal (6,0): walls and another component. */
    pd_grid *g = core_grid(".#..#..\n");
    pd_components *c = check_components(g);
    pd_point out;
    assert_int_equal(pd_fallback_line(g, c, pt(0, 0), pt(6, 0), &out), PD_OK);
    assert_point(out, 0, 0);
    assert_int_equal(pd_fallback_line(g, c, pt(0, 0), pt(0, 0), &out), PD_OK);
    assert_point(out, 0, 0);
    assert_int_equal(pd_fallback_line(g, c, pt(2, 0), pt(6, 0), &out), PD_OK);
    assert_point(out, 3, 0);
    check_components_free(c);
    pd_grid_destroy(g);
}

static void test_line_corner_order(void **state)
{
    (void)state;
    /* The goal is blocked and the line leaves it through a corner: of the
     * two cells beside that corner, the one with the smaller y comes first. */
    pd_grid *g = core_open_grid(4, 4);
    pd_components *c;
    pd_point out;

    pd_grid_set(g, 3, 3, PD_CELL_BLOCKED);
    c = check_components(g);
    assert_int_equal(pd_fallback_line(g, c, pt(0, 0), pt(3, 3), &out), PD_OK);
    assert_point(out, 3, 2);
    check_components_free(c);

    pd_grid_set(g, 3, 3, PD_CELL_FREE);
    pd_grid_set(g, 0, 0, PD_CELL_BLOCKED);
    c = check_components(g);
    assert_int_equal(pd_fallback_line(g, c, pt(3, 3), pt(0, 0), &out), PD_OK);
    assert_point(out, 1, 0);
    check_components_free(c);

    pd_grid_set(g, 0, 0, PD_CELL_FREE);
    pd_grid_set(g, 0, 3, PD_CELL_BLOCKED);
    c = check_components(g);
    assert_int_equal(pd_fallback_line(g, c, pt(3, 0), pt(0, 3), &out), PD_OK);
    assert_point(out, 0, 2);
    check_components_free(c);
    pd_grid_destroy(g);
}

static void test_line_bad_arguments(void **state)
{
    (void)state;
    pd_grid *g = core_grid("..#\n");
    pd_components *c = check_components(g);
    pd_point out;
    assert_int_equal(pd_fallback_line(NULL, c, pt(0, 0), pt(1, 0), &out), PD_INVALID_ARGUMENT);
    assert_int_equal(pd_fallback_line(g, NULL, pt(0, 0), pt(1, 0), &out), PD_INVALID_ARGUMENT);
    assert_int_equal(pd_fallback_line(g, c, pt(0, 0), pt(1, 0), NULL), PD_INVALID_ARGUMENT);
    assert_int_equal(pd_fallback_line(g, c, pt(-1, 0), pt(1, 0), &out), PD_OUT_OF_BOUNDS);
    assert_int_equal(pd_fallback_line(g, c, pt(0, 0), pt(3, 0), &out), PD_OUT_OF_BOUNDS);
    /* A blocked start has no component: nothing can be in it. */
    assert_int_equal(pd_fallback_line(g, c, pt(2, 0), pt(0, 0), &out), PD_NO_PATH);
    check_components_free(c);
    pd_grid_destroy(g);
}

/* Brute force: the qualifying cell the segment goal -> start meets first;
 * at one parameter value, a cell touched only at a corner point comes before
 * the cell entered there, and then the smaller y, then x. */
static int reference_line(const pd_grid *g, const pd_components *c, pd_point start,
                          pd_point goal, pd_point *out)
{
    uint32_t label = pd_components_label(c, start);
    int found = 0;
    check_touch best = {0, 0, {0, 1}};
    for (int32_t y = 0; y < g->height; y++)
        for (int32_t x = 0; x < g->width; x++) {
            check_touch t = check_segment_cell(goal, start, pt(x, y));
            if (!t.touched || pd_grid_get(g, x, y) == PD_CELL_BLOCKED ||
                pd_components_label(c, pt(x, y)) != label)
                continue;
            int better = !found || check_frac_less(t.enter, best.enter) ||
                         (!check_frac_less(best.enter, t.enter) && t.interior < best.interior);
            if (better) { /* scan order already gives the y, x rule */
                found = 1;
                best = t;
                *out = pt(x, y);
            }
        }
    return found;
}

static void test_line_matches_reference(void **state)
{
    (void)state;
    uint64_t rng = 0x11e5ULL;
    size_t checked = 0, substituted = 0, corner_picks = 0;
    for (int round = 0; round < 200; round++) {
        int32_t w = check_rand_range(&rng, 2, 32), h = check_rand_range(&rng, 2, 32);
        pd_grid *g = check_random_grid(&rng, w, h, 0);
        pd_components *c = check_components(g);
        for (int k = 0; k < 20; k++) {
            pd_point s = pt(check_rand_range(&rng, 0, w - 1), check_rand_range(&rng, 0, h - 1));
            pd_point t = pt(check_rand_range(&rng, 0, w - 1), check_rand_range(&rng, 0, h - 1));
            if (k % 4 == 0) { /* exact diagonals: every step through a corner */
                int32_t d = t.x - s.x;
                t.y = s.y + (k % 8 ? d : -d);
                if (!pd_grid_in_bounds(g, t.x, t.y))
                    continue;
            }
            if (pd_grid_get(g, s.x, s.y) == PD_CELL_BLOCKED)
                continue;
            pd_point want = pt(-1, -1), got = pt(-2, -2);
            assert_true(reference_line(g, c, s, t, &want));
            assert_int_equal(pd_fallback_line(g, c, s, t, &got), PD_OK);
            if (got.x != want.x || got.y != want.y)
                fail_msg("round %d: line (%d,%d) <- (%d,%d): got (%d,%d), want (%d,%d)", round,
                         s.x, s.y, t.x, t.y, got.x, got.y, want.x, want.y);
            checked++;
            substituted += got.x != t.x || got.y != t.y;
            corner_picks += !check_segment_cell(t, s, got).interior;
        }
        check_components_free(c);
        pd_grid_destroy(g);
    }
    assert_true(checked > 1500 && substituted > 300 && corner_picks > 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nearest_open_point),
        cmocka_unit_test(test_nearest_blocked_point),
        cmocka_unit_test(test_nearest_outside_grid),
        cmocka_unit_test(test_nearest_ties),
        cmocka_unit_test(test_nearest_euclidean_beats_first_ring),
        cmocka_unit_test(test_nearest_label),
        cmocka_unit_test(test_nearest_bad_arguments),
        cmocka_unit_test(test_nearest_matches_reference),
        cmocka_unit_test(test_line_walks_back),
        cmocka_unit_test(test_line_start_when_nothing_between),
        cmocka_unit_test(test_line_corner_order),
        cmocka_unit_test(test_line_bad_arguments),
        cmocka_unit_test(test_line_matches_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
