/*
 * test_path.c - pd_path_corners: waypoint compression of cell paths.
 *
 * Paths are built from a start and a string of compass steps so each case
 * reads like the route it describes; the expected corners are worked out by
 * hand from that route.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pd_path.h"

#define MAX_TEST_PATH 64

/* Steps: 'E' +x, 'W' -x, 'S' +y, 'N' -y (y grows downwards, as in the grid),
 * diagonals as laid out on a numeric keypad: '9' NE, '3' SE, '7' NW, '1' SW.
 * '.' repeats the current cell. */
static size_t build_path(pd_point *out, pd_point start, const char *steps)
{
    size_t n = 0;
    out[n++] = start;
    for (const char *c = steps; *c; c++) {
        pd_point p = out[n - 1];
        switch (*c) {
        case 'E': p.x++; break;
        case 'W': p.x--; break;
        case 'S': p.y++; break;
        case 'N': p.y--; break;
        case '9': p.x++; p.y--; break;
        case '3': p.x++; p.y++; break;
        case '7': p.x--; p.y--; break;
        case '1': p.x--; p.y++; break;
        case '.': break;
        default: fail_msg("bad step '%c'", *c);
        }
        assert_true(n < MAX_TEST_PATH);
        out[n++] = p;
    }
    return n;
}

static void assert_points(const pd_point *got, size_t n_got, const pd_point *want, size_t n_want)
{
    assert_int_equal(n_got, n_want);
    for (size_t i = 0; i < n_want; i++) {
        if (got[i].x != want[i].x || got[i].y != want[i].y)
            fail_msg("point %zu: got (%d,%d), want (%d,%d)", i, got[i].x, got[i].y,
                     want[i].x, want[i].y);
    }
}

static void test_empty_and_single(void **state)
{
    (void)state;
    assert_int_equal(pd_path_corners(NULL, 0), 0);

    pd_point one[1] = {{4, 5}};
    assert_int_equal(pd_path_corners(one, 1), 1);
    assert_int_equal(one[0].x, 4);
    assert_int_equal(one[0].y, 5);
}

static void test_two_points_kept(void **state)
{
    (void)state;
    pd_point pts[2] = {{0, 0}, {1, 1}};
    pd_point want[2] = {{0, 0}, {1, 1}};
    assert_points(pts, pd_path_corners(pts, 2), want, 2);
}

static void test_straight_line(void **state)
{
    (void)state;
    pd_point pts[MAX_TEST_PATH];
    size_t n = build_path(pts, (pd_point){2, 3}, "EEEEEEE");
    assert_int_equal(n, 8);
    pd_point want[] = {{2, 3}, {9, 3}};
    assert_points(pts, pd_path_corners(pts, n), want, 2);
}

static void test_l_shape(void **state)
{
    (void)state;
    pd_point pts[MAX_TEST_PATH];
    size_t n = build_path(pts, (pd_point){0, 0}, "EEESSSS");
    pd_point want[] = {{0, 0}, {3, 0}, {3, 4}};
    assert_points(pts, pd_path_corners(pts, n), want, 3);
}

static void test_pure_diagonal_is_straight(void **state)
{
    (void)state;
    pd_point pts[MAX_TEST_PATH];
    size_t n = build_path(pts, (pd_point){5, 5}, "7777");
    pd_point want[] = {{5, 5}, {1, 1}};
    assert_points(pts, pd_path_corners(pts, n), want, 2);
}

/* A staircase of alternating orthogonal steps turns at every cell. */
static void test_staircase_keeps_every_turn(void **state)
{
    (void)state;
    pd_point pts[MAX_TEST_PATH];
    size_t n = build_path(pts, (pd_point){0, 0}, "ESESES");
    pd_point want[MAX_TEST_PATH];
    memcpy(want, pts, n * sizeof pts[0]);
    assert_points(pts, pd_path_corners(pts, n), want, n);
}

/* The shape octile A* produces: a diagonal run, then a straight run. */
static void test_diagonal_then_straight(void **state)
{
    (void)state;
    pd_point pts[MAX_TEST_PATH];
    size_t n = build_path(pts, (pd_point){0, 0}, "333EEEE9N");
    pd_point want[] = {{0, 0}, {3, 3}, {7, 3}, {8, 2}, {8, 1}};
    assert_points(pts, pd_path_corners(pts, n), want, 5);
}

/* Going back the way it came is a change of direction. */
static void test_reversal_is_a_corner(void **state)
{
    (void)state;
    pd_point pts[MAX_TEST_PATH];
    size_t n = build_path(pts, (pd_point){0, 0}, "EEWW");
    pd_point want[] = {{0, 0}, {2, 0}, {0, 0}};
    assert_points(pts, pd_path_corners(pts, n), want, 3);
}

static void test_repeats_merged(void **state)
{
    (void)state;
    pd_point pts[MAX_TEST_PATH];
    size_t n = build_path(pts, (pd_point){0, 0}, "E.E..S.");
    pd_point want[] = {{0, 0}, {2, 0}, {2, 1}};
    assert_points(pts, pd_path_corners(pts, n), want, 3);

    pd_point same[3] = {{7, 7}, {7, 7}, {7, 7}};
    pd_point want_one[] = {{7, 7}};
    assert_points(same, pd_path_corners(same, 3), want_one, 1);
}

static void test_idempotent(void **state)
{
    (void)state;
    pd_point pts[MAX_TEST_PATH];
    size_t n = build_path(pts, (pd_point){10, 10}, "NNN777WWWW1SSSEE");
    size_t once = pd_path_corners(pts, n);
    assert_true(once < n);
    pd_point first[MAX_TEST_PATH];
    memcpy(first, pts, once * sizeof pts[0]);
    assert_points(pts, pd_path_corners(pts, once), first, once);
}

/* Coordinates at the int32 extremes must not overflow the direction test. */
static void test_extreme_coordinates(void **state)
{
    (void)state;
    pd_point pts[3] = {{INT32_MIN, INT32_MIN}, {0, 0}, {INT32_MAX, INT32_MAX}};
    /* (2^31, 2^31) and (2^31 - 1, 2^31 - 1) point the same way. */
    pd_point want_straight[] = {{INT32_MIN, INT32_MIN}, {INT32_MAX, INT32_MAX}};
    assert_points(pts, pd_path_corners(pts, 3), want_straight, 2);

    pd_point bent[3] = {{INT32_MIN, INT32_MIN}, {0, 0}, {INT32_MAX, 0}};
    pd_point want_bent[] = {{INT32_MIN, INT32_MIN}, {0, 0}, {INT32_MAX, 0}};
    assert_points(bent, pd_path_corners(bent, 3), want_bent, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_and_single),
        cmocka_unit_test(test_two_points_kept),
        cmocka_unit_test(test_straight_line),
        cmocka_unit_test(test_l_shape),
        cmocka_unit_test(test_pure_diagonal_is_straight),
        cmocka_unit_test(test_staircase_keeps_every_turn),
        cmocka_unit_test(test_diagonal_then_straight),
        cmocka_unit_test(test_reversal_is_a_corner),
        cmocka_unit_test(test_repeats_merged),
        cmocka_unit_test(test_idempotent),
        cmocka_unit_test(test_extreme_coordinates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
