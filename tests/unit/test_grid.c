/*
 * test_grid.c - pd_grid: size limits, the blocked padding, bounds-checked
 * reads and writes, the uniform_cost bookkeeping and cloning.
 *
 * The padding is what lets the search skip bounds checks, so these tests read
 * the raw cells[] array as well as going through pd_grid_get: a write that
 * leaked into the border would turn into paths that leave the map.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pd_grid.h"

/* Every cell of the one-cell border around the interior must stay blocked. */
static void assert_padding_blocked(const pd_grid *g)
{
    for (int32_t y = -1; y <= g->height; y++) {
        for (int32_t x = -1; x <= g->width; x++) {
            if (x >= 0 && y >= 0 && x < g->width && y < g->height)
                continue;
            size_t i = (size_t)(y + 1) * (size_t)g->stride + (size_t)(x + 1);
            if (g->cells[i] != PD_CELL_BLOCKED)
                fail_msg("padding cell (%d,%d) is %u, want blocked", x, y, g->cells[i]);
        }
    }
}

static void test_create_rejects_bad_sides(void **state)
{
    assert_null(pd_grid_create(0, 5));
    assert_null(pd_grid_create(5, 0));
    assert_null(pd_grid_create(0, 0));
    assert_null(pd_grid_create(-1, 5));
    assert_null(pd_grid_create(5, -1));
    assert_null(pd_grid_create(INT32_MIN, INT32_MIN));
    assert_null(pd_grid_create(PD_GRID_MAX_SIDE + 1, 1));
    assert_null(pd_grid_create(1, PD_GRID_MAX_SIDE + 1));
    assert_null(pd_grid_create(INT32_MAX, 1));
}

static void test_create_accepts_limits(void **state)
{
    pd_grid *g = pd_grid_create(PD_GRID_MAX_SIDE, 1);
    assert_non_null(g);
    assert_int_equal(g->width, PD_GRID_MAX_SIDE);
    assert_int_equal(g->height, 1);
    assert_int_equal(g->stride, PD_GRID_MAX_SIDE + 2);
    pd_grid_destroy(g);

    g = pd_grid_create(1, PD_GRID_MAX_SIDE);
    assert_non_null(g);
    assert_int_equal(g->width, 1);
    assert_int_equal(g->height, PD_GRID_MAX_SIDE);
    assert_int_equal(g->stride, 3);
    pd_grid_destroy(g);

    g = pd_grid_create(1, 1);
    assert_non_null(g);
    assert_int_equal(g->stride, 3);
    assert_int_equal(pd_grid_get(g, 0, 0), PD_CELL_BLOCKED);
    assert_padding_blocked(g);
    pd_grid_destroy(g);
}

static void test_new_grid_is_blocked_and_uniform(void **state)
{
    pd_grid *g = pd_grid_create(7, 4);
    assert_non_null(g);
    assert_int_equal(g->stride, 9);
    for (int32_t y = 0; y < 4; y++)
        for (int32_t x = 0; x < 7; x++)
            assert_int_equal(pd_grid_get(g, x, y), PD_CELL_BLOCKED);
    assert_int_equal(g->uniform_cost, 1);
    assert_padding_blocked(g);
    pd_grid_destroy(g);
}

static void test_index_layout(void **state)
{
    pd_grid *g = pd_grid_create(5, 3);
    assert_non_null(g);
    /* (x, y) lives at (y + 1) * stride + (x + 1): check the corners. */
    assert_int_equal(pd_grid_index(g, 0, 0), 1 * 7 + 1);
    assert_int_equal(pd_grid_index(g, 4, 0), 1 * 7 + 5);
    assert_int_equal(pd_grid_index(g, 0, 2), 3 * 7 + 1);
    assert_int_equal(pd_grid_index(g, 4, 2), 3 * 7 + 5);
    pd_grid_set(g, 3, 1, 7);
    assert_int_equal(g->cells[2 * 7 + 4], 7);
    pd_grid_destroy(g);
}

static void test_get_out_of_bounds_is_blocked(void **state)
{
    pd_grid *g = pd_grid_create(4, 3);
    assert_non_null(g);
    for (int32_t y = 0; y < 3; y++)
        for (int32_t x = 0; x < 4; x++)
            pd_grid_set(g, x, y, PD_CELL_FREE);
    assert_int_equal(pd_grid_get(g, 0, 0), PD_CELL_FREE);
    assert_int_equal(pd_grid_get(g, 3, 2), PD_CELL_FREE);
    assert_int_equal(pd_grid_get(g, -1, 0), PD_CELL_BLOCKED);
    assert_int_equal(pd_grid_get(g, 0, -1), PD_CELL_BLOCKED);
    assert_int_equal(pd_grid_get(g, 4, 0), PD_CELL_BLOCKED);
    assert_int_equal(pd_grid_get(g, 0, 3), PD_CELL_BLOCKED);
    assert_int_equal(pd_grid_get(g, 4, 3), PD_CELL_BLOCKED);
    assert_int_equal(pd_grid_get(g, INT32_MAX, 0), PD_CELL_BLOCKED);
    assert_int_equal(pd_grid_get(g, 0, INT32_MIN), PD_CELL_BLOCKED);
    assert_int_equal(pd_grid_get(g, 1000000, 1000000), PD_CELL_BLOCKED);
    assert_false(pd_grid_in_bounds(g, -1, 0));
    assert_false(pd_grid_in_bounds(g, 4, 0));
    assert_true(pd_grid_in_bounds(g, 3, 2));
    assert_padding_blocked(g);
    pd_grid_destroy(g);
}

static void test_set_out_of_bounds_is_ignored(void **state)
{
    pd_grid *g = pd_grid_create(3, 3);
    assert_non_null(g);
    size_t n = (size_t)(3 + 2) * (3 + 2);
    uint8_t before[25];
    memcpy(before, g->cells, n);
    pd_grid_set(g, -1, 0, PD_CELL_FREE);
    pd_grid_set(g, 0, -1, 5);
    pd_grid_set(g, 3, 0, PD_CELL_FREE);
    pd_grid_set(g, 0, 3, 9);
    pd_grid_set(g, -1, -1, PD_CELL_FREE);
    pd_grid_set(g, 3, 3, PD_CELL_FREE);
    assert_memory_equal(before, g->cells, n);
    /* An ignored costly write must not clear the uniform flag either. */
    assert_int_equal(g->uniform_cost, 1);
    assert_padding_blocked(g);
    pd_grid_destroy(g);
}

static void test_uniform_cost_bookkeeping(void **state)
{
    pd_grid *g = pd_grid_create(4, 4);
    assert_non_null(g);
    pd_grid_set(g, 0, 0, PD_CELL_FREE);
    pd_grid_set(g, 1, 0, PD_CELL_FREE);
    assert_int_equal(g->uniform_cost, 1);

    pd_grid_set(g, 2, 2, 5);
    assert_int_equal(g->uniform_cost, 0);
    pd_grid_set(g, 3, 3, 3);
    assert_int_equal(g->uniform_cost, 0);
    /* One costly cell left: still not uniform. */
    pd_grid_set(g, 2, 2, PD_CELL_FREE);
    assert_int_equal(g->uniform_cost, 0);
    /* The last costly cell becomes blocked: uniform again. */
    pd_grid_set(g, 3, 3, PD_CELL_BLOCKED);
    assert_int_equal(g->uniform_cost, 1);
    /* Overwriting a costly cell with another cost keeps it non-uniform. */
    pd_grid_set(g, 1, 1, 255);
    pd_grid_set(g, 1, 1, 2);
    assert_int_equal(g->uniform_cost, 0);
    pd_grid_set(g, 1, 1, PD_CELL_FREE);
    assert_int_equal(g->uniform_cost, 1);
    assert_int_equal(pd_grid_get(g, 1, 1), PD_CELL_FREE);
    assert_int_equal(pd_grid_get(g, 3, 3), PD_CELL_BLOCKED);
    assert_padding_blocked(g);
    pd_grid_destroy(g);
}

static void test_refresh_flags_after_bulk_writes(void **state)
{
    pd_grid *g = pd_grid_create(3, 2);
    assert_non_null(g);
    g->cells[pd_grid_index(g, 1, 1)] = 4;
    pd_grid_refresh_flags(g);
    assert_int_equal(g->uniform_cost, 0);
    g->cells[pd_grid_index(g, 1, 1)] = PD_CELL_FREE;
    pd_grid_refresh_flags(g);
    assert_int_equal(g->uniform_cost, 1);
    pd_grid_destroy(g);
}

static void test_clone_is_deep_and_equal(void **state)
{
    pd_grid *g = pd_grid_create(6, 5);
    assert_non_null(g);
    for (int32_t y = 0; y < 5; y++)
        for (int32_t x = 0; x < 6; x++)
            pd_grid_set(g, x, y, (uint8_t)((x * 7 + y * 3) % 10));
    assert_int_equal(g->uniform_cost, 0);

    pd_grid *c = pd_grid_clone(g);
    assert_non_null(c);
    assert_ptr_not_equal(c, g);
    assert_ptr_not_equal(c->cells, g->cells);
    assert_int_equal(c->width, 6);
    assert_int_equal(c->height, 5);
    assert_int_equal(c->stride, 8);
    assert_int_equal(c->uniform_cost, 0);
    assert_memory_equal(c->cells, g->cells, (size_t)8 * 7);
    assert_padding_blocked(c);

    /* Changing the clone leaves the original alone. */
    pd_grid_set(c, 0, 0, 9);
    assert_int_equal(pd_grid_get(g, 0, 0), 0);
    assert_int_equal(pd_grid_get(c, 0, 0), 9);
    pd_grid_destroy(g);
    pd_grid_destroy(c);

    g = pd_grid_create(2, 2);
    assert_non_null(g);
    pd_grid_set(g, 1, 0, PD_CELL_FREE);
    c = pd_grid_clone(g);
    assert_non_null(c);
    assert_int_equal(c->uniform_cost, 1);
    assert_int_equal(pd_grid_get(c, 1, 0), PD_CELL_FREE);
    assert_int_equal(pd_grid_get(c, 0, 0), PD_CELL_BLOCKED);
    pd_grid_destroy(g);
    pd_grid_destroy(c);
}

static void test_destroy_null_is_safe(void **state)
{
    pd_grid_destroy(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_rejects_bad_sides),
        cmocka_unit_test(test_create_accepts_limits),
        cmocka_unit_test(test_new_grid_is_blocked_and_uniform),
        cmocka_unit_test(test_index_layout),
        cmocka_unit_test(test_get_out_of_bounds_is_blocked),
        cmocka_unit_test(test_set_out_of_bounds_is_ignored),
        cmocka_unit_test(test_uniform_cost_bookkeeping),
        cmocka_unit_test(test_refresh_flags_after_bulk_writes),
        cmocka_unit_test(test_clone_is_deep_and_equal),
        cmocka_unit_test(test_destroy_null_is_safe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
