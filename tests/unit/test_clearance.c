/*
 * test_clearance.c - clearance values and per-unit-size grids.
 *
 * Everything is checked against brute force written here from the rules in
 * pd_clearance.h, not from pd_clearance.c: a cell's clearance is the side of
 * the largest all-passable square anchored there (capped), and a unit grid
 * cell is passable when the whole k x k footprint is, costing the largest
 * cost byte under it. Updates after random rectangle changes must leave
 * exactly what a fresh build gives, padding included. Random grids come from
 * a fixed-seed xorshift, so a failure reproduces.
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
#include "test_rng.h"

#define CL_RANDOM_GRIDS 150
#define CL_MAX_SIDE 48
#define CL_UPDATES_PER_GRID 25

/* A random cell value: blocked with `density` percent, else cost 1 or,
 * on weighted grids, 1..9. */
static uint8_t random_cell(uint64_t *rng, int density, int weighted)
{
    if (rng_below(rng, 100) < density)
        return PD_CELL_BLOCKED;
    return weighted && rng_below(rng, 3) == 0 ? (uint8_t)(1 + rng_below(rng, 9)) : PD_CELL_FREE;
}

static pd_grid *random_grid(uint64_t *rng, int32_t max_side, int *density_out, int *weighted_out)
{
    int32_t w = 1 + rng_below(rng, max_side), h = 1 + rng_below(rng, max_side);
    /* Low densities matter most: they produce large clearances and caps. */
    int density = rng_below(rng, 4) == 0 ? 0 : rng_below(rng, 35);
    int weighted = rng_below(rng, 2);
    pd_grid *g = pd_grid_create(w, h);
    assert_non_null(g);
    for (int32_t y = 0; y < h; y++)
        for (int32_t x = 0; x < w; x++)
            pd_grid_set(g, x, y, random_cell(rng, density, weighted));
    *density_out = density;
    *weighted_out = weighted;
    return g;
}

/* The largest all-passable square at (x, y), capped, by looking at it. */
static int brute_clearance(const pd_grid *g, int32_t x, int32_t y)
{
    int side = 0;
    while (side < PD_CLEARANCE_CAP) {
        int s = side + 1;
        for (int32_t dy = 0; dy < s; dy++)
            for (int32_t dx = 0; dx < s; dx++)
                if (pd_grid_get(g, x + dx, y + dy) == PD_CELL_BLOCKED)
                    return side;
        side = s;
    }
    return side;
}

static void check_against_brute(const pd_clearance *c, const pd_grid *g)
{
    assert_int_equal(c->width, g->width);
    assert_int_equal(c->height, g->height);
    for (int32_t y = 0; y < g->height; y++)
        for (int32_t x = 0; x < g->width; x++)
            if (pd_clearance_get(c, x, y) != brute_clearance(g, x, y))
                fail_msg("%dx%d clearance at (%d,%d) = %d, want %d", g->width, g->height, x, y,
                         pd_clearance_get(c, x, y), brute_clearance(g, x, y));
    /* Padding stays 0 and reads outside give 0. */
    size_t n = (size_t)c->stride * (size_t)(c->height + 2);
    for (size_t i = 0; i < n; i++) {
        int32_t x = (int32_t)(i % (size_t)c->stride) - 1, y = (int32_t)(i / (size_t)c->stride) - 1;
        if (!pd_grid_in_bounds(g, x, y))
            assert_int_equal(c->values[i], 0);
    }
    assert_int_equal(pd_clearance_get(c, -1, 0), 0);
    assert_int_equal(pd_clearance_get(c, 0, g->height), 0);
}

/* The unit grid for k by looking at every footprint. */
static void check_unit_grid(const pd_grid *ug, const pd_grid *g, int k)
{
    assert_int_equal(ug->width, g->width);
    assert_int_equal(ug->height, g->height);
    assert_int_equal(ug->stride, g->stride);
    int uniform = 1;
    for (int32_t y = 0; y < g->height; y++) {
        for (int32_t x = 0; x < g->width; x++) {
            int want = 0;
            for (int32_t dy = 0; dy < k && want >= 0; dy++) {
                for (int32_t dx = 0; dx < k; dx++) {
                    uint8_t v = pd_grid_get(g, x + dx, y + dy);
                    if (v == PD_CELL_BLOCKED) {
                        want = -1;
                        break;
                    }
                    if (v > want)
                        want = v;
                }
            }
            if (want < 0)
                want = PD_CELL_BLOCKED;
            if (want > PD_CELL_FREE)
                uniform = 0;
            if (pd_grid_get(ug, x, y) != want)
                fail_msg("%dx%d unit %d at (%d,%d) = %d, want %d", g->width, g->height, k, x, y,
                         pd_grid_get(ug, x, y), want);
        }
    }
    size_t n = (size_t)ug->stride * (size_t)(ug->height + 2);
    for (size_t i = 0; i < n; i++) {
        int32_t x = (int32_t)(i % (size_t)ug->stride) - 1, y = (int32_t)(i / (size_t)ug->stride) - 1;
        if (!pd_grid_in_bounds(ug, x, y))
            assert_int_equal(ug->cells[i], PD_CELL_BLOCKED);
    }
    if (ug->uniform_cost != uniform)
        fail_msg("unit %d uniform_cost %d, want %d", k, ug->uniform_cost, uniform);
}

/* A hand-checked map: the open 3x3 room gives clearance 3 at its corner,
 * the corridor cells 1, walls 0. */
static void test_small_map(void **state)
{
    pd_grid *g = core_grid("...#.\n"
                           "...#.\n"
                           "...#.\n"
                           ".....\n");
    pd_clearance *c = pd_clearance_build(g);
    assert_non_null(c);
    assert_int_equal(pd_clearance_get(c, 0, 0), 3);
    assert_int_equal(pd_clearance_get(c, 1, 0), 2);
    assert_int_equal(pd_clearance_get(c, 2, 0), 1);
    assert_int_equal(pd_clearance_get(c, 3, 0), 0);
    assert_int_equal(pd_clearance_get(c, 0, 1), 3);
    assert_int_equal(pd_clearance_get(c, 4, 0), 1);
    assert_int_equal(pd_clearance_get(c, 0, 3), 1);
    pd_grid *u3 = pd_unit_grid_build(g, c, 3);
    assert_non_null(u3);
    assert_int_equal(pd_grid_get(u3, 0, 0), 1);
    assert_int_equal(pd_grid_get(u3, 0, 1), 1);
    assert_int_equal(pd_grid_get(u3, 1, 0), 0);
    assert_int_equal(pd_grid_get(u3, 0, 2), 0);
    check_against_brute(c, g);
    pd_grid_destroy(u3);
    pd_clearance_destroy(c);
    pd_grid_destroy(g);
}

/* A fully open map saturates at the cap and counts down towards the far
 * edges. */
static void test_cap(void **state)
{
    pd_grid *g = core_open_grid(40, 37);
    pd_clearance *c = pd_clearance_build(g);
    assert_non_null(c);
    assert_int_equal(pd_clearance_get(c, 0, 0), PD_CLEARANCE_CAP);
    assert_int_equal(pd_clearance_get(c, 39, 0), 1);
    assert_int_equal(pd_clearance_get(c, 30, 30), 7);
    check_against_brute(c, g);
    pd_grid *u = pd_unit_grid_build(g, c, PD_UNIT_SIZE_MAX);
    assert_non_null(u);
    check_unit_grid(u, g, PD_UNIT_SIZE_MAX);
    pd_grid_destroy(u);
    pd_clearance_destroy(c);
    pd_grid_destroy(g);
}

static void test_random_build(void **state)
{
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    int weighted_seen = 0;
    for (int i = 0; i < CL_RANDOM_GRIDS; i++) {
        int density, weighted;
        pd_grid *g = random_grid(&rng, CL_MAX_SIDE, &density, &weighted);
        weighted_seen += weighted;
        pd_clearance *c = pd_clearance_build(g);
        assert_non_null(c);
        check_against_brute(c, g);
        /* Every unit size on a few grids, the common ones on all. */
        int kmax = i % 10 == 0 ? PD_UNIT_SIZE_MAX : 4;
        for (int k = 1; k <= kmax; k++) {
            pd_grid *ug = pd_unit_grid_build(g, c, (uint32_t)k);
            assert_non_null(ug);
            check_unit_grid(ug, g, k);
            pd_grid_destroy(ug);
        }
        pd_clearance_destroy(c);
        pd_grid_destroy(g);
    }
    assert_true(weighted_seen > CL_RANDOM_GRIDS / 4);
}

/* Unit 1 is a copy of the grid, not the grid itself. */
static void test_unit_one_is_copy(void **state)
{
    pd_grid *g = core_grid(".3#\n2.1\n");
    pd_clearance *c = pd_clearance_build(g);
    assert_non_null(c);
    pd_grid *u1 = pd_unit_grid_build(g, c, 1);
    assert_non_null(u1);
    assert_ptr_not_equal(u1, g);
    assert_ptr_not_equal(u1->cells, g->cells);
    assert_memory_equal(u1->cells, g->cells, (size_t)g->stride * (size_t)(g->height + 2));
    assert_int_equal(u1->uniform_cost, 0);
    pd_grid_destroy(u1);
    pd_clearance_destroy(c);
    pd_grid_destroy(g);
}

static void test_bad_arguments(void **state)
{
    pd_grid *g = core_open_grid(5, 4);
    pd_grid *other = core_open_grid(4, 5);
    pd_clearance *c = pd_clearance_build(g);
    assert_non_null(c);
    assert_null(pd_clearance_build(NULL));
    assert_null(pd_clearance_clone(NULL));
    assert_null(pd_unit_grid_build(g, c, 0));
    assert_null(pd_unit_grid_build(g, c, PD_UNIT_SIZE_MAX + 1));
    assert_null(pd_unit_grid_build(NULL, c, 2));
    assert_null(pd_unit_grid_build(g, NULL, 2));
    assert_null(pd_unit_grid_build(other, c, 2));
    /* Mismatched or missing arguments leave everything untouched. */
    pd_clearance *before = pd_clearance_clone(c);
    assert_non_null(before);
    pd_grid_set(other, 0, 0, PD_CELL_BLOCKED);
    pd_clearance_update(c, other, 0, 0, 3, 3);
    pd_clearance_update(NULL, g, 0, 0, 3, 3);
    pd_clearance_update(c, NULL, 0, 0, 3, 3);
    assert_memory_equal(c->values, before->values, (size_t)c->stride * (size_t)(c->height + 2));
    pd_grid *u2 = pd_unit_grid_build(g, c, 2);
    assert_non_null(u2);
    pd_grid *u2_before = pd_grid_clone(u2);
    assert_non_null(u2_before);
    pd_unit_grid_update(u2, other, c, 2, 0, 0, 3, 3);
    pd_unit_grid_update(u2, g, c, 0, 0, 0, 3, 3);
    pd_unit_grid_update(u2, g, c, PD_UNIT_SIZE_MAX + 1, 0, 0, 3, 3);
    pd_unit_grid_update(NULL, g, c, 2, 0, 0, 3, 3);
    assert_memory_equal(u2->cells, u2_before->cells, (size_t)g->stride * (size_t)(g->height + 2));
    /* A rectangle entirely outside changes nothing either. */
    pd_grid_set(g, 0, 0, PD_CELL_BLOCKED);
    pd_clearance_update(c, g, 10, 10, 20, 20);
    pd_clearance_update(c, g, -9, -9, -1, -1);
    assert_memory_equal(c->values, before->values, (size_t)c->stride * (size_t)(c->height + 2));
    pd_clearance_destroy(NULL);
    pd_grid_destroy(u2_before);
    pd_grid_destroy(u2);
    pd_clearance_destroy(before);
    pd_clearance_destroy(c);
    pd_grid_destroy(other);
    pd_grid_destroy(g);
}

static void test_clone(void **state)
{
    pd_grid *g = core_grid("..#.\n....\n.#..\n");
    pd_clearance *c = pd_clearance_build(g);
    assert_non_null(c);
    pd_clearance *copy = pd_clearance_clone(c);
    assert_non_null(copy);
    assert_ptr_not_equal(copy->values, c->values);
    assert_memory_equal(copy->values, c->values, (size_t)c->stride * (size_t)(c->height + 2));
    pd_grid_set(g, 0, 0, PD_CELL_BLOCKED);
    pd_clearance_update(copy, g, 0, 0, 0, 0);
    assert_int_equal(pd_clearance_get(copy, 0, 0), 0);
    assert_int_equal(pd_clearance_get(c, 0, 0), 2);
    pd_clearance_destroy(copy);
    pd_clearance_destroy(c);
    pd_grid_destroy(g);
}

/* Applies one random change to a random rectangle: all blocked, all open,
 * one cost, a random mix, or a single cell. The rectangle may stick out of
 * the grid, and its corners may come in either order. */
static void random_change(uint64_t *rng, pd_grid *g, int32_t r[4])
{
    int32_t w = g->width, h = g->height;
    int kind = rng_below(rng, 5);
    int32_t x0 = rng_below(rng, w + 4) - 2, y0 = rng_below(rng, h + 4) - 2;
    int32_t x1 = x0, y1 = y0;
    if (kind != 4) {
        x1 = x0 + rng_below(rng, 9) - 1;
        y1 = y0 + rng_below(rng, 9) - 1;
    }
    uint8_t fixed = kind == 0 ? PD_CELL_BLOCKED : kind == 1 ? PD_CELL_FREE : (uint8_t)(1 + rng_below(rng, 9));
    int32_t lx = x0 < x1 ? x0 : x1, hx = x0 < x1 ? x1 : x0;
    int32_t ly = y0 < y1 ? y0 : y1, hy = y0 < y1 ? y1 : y0;
    for (int32_t y = ly; y <= hy; y++)
        for (int32_t x = lx; x <= hx; x++)
            pd_grid_set(g, x, y, kind >= 3 ? random_cell(rng, 40, 1) : fixed);
    r[0] = x0;
    r[1] = y0;
    r[2] = x1;
    r[3] = y1;
}

static void test_update_matches_rebuild(void **state)
{
    uint64_t rng = 0xB5AD4ECEDA1CE2A9ull;
    int changed_cells = 0;
    for (int i = 0; i < CL_RANDOM_GRIDS; i++) {
        int density, weighted;
        pd_grid *g = random_grid(&rng, CL_MAX_SIDE, &density, &weighted);
        pd_clearance *c = pd_clearance_build(g);
        assert_non_null(c);
        uint32_t ks[3] = { 1, 2 + (uint32_t)rng_below(&rng, 3), 5 + (uint32_t)rng_below(&rng, 12) };
        pd_grid *ug[3];
        for (int j = 0; j < 3; j++) {
            ug[j] = pd_unit_grid_build(g, c, ks[j]);
            assert_non_null(ug[j]);
        }
        for (int u = 0; u < CL_UPDATES_PER_GRID; u++) {
            pd_clearance *old = pd_clearance_clone(c);
            assert_non_null(old);
            int32_t r[4];
            random_change(&rng, g, r);
            pd_clearance_update(c, g, r[0], r[1], r[2], r[3]);
            pd_clearance *fresh = pd_clearance_build(g);
            assert_non_null(fresh);
            size_t n = (size_t)c->stride * (size_t)(c->height + 2);
            if (memcmp(c->values, fresh->values, n) != 0)
                fail_msg("grid %d update %d rect (%d,%d)-(%d,%d): clearance differs from rebuild", i,
                         u, r[0], r[1], r[2], r[3]);
            changed_cells += memcmp(old->values, c->values, n) != 0;
            for (int j = 0; j < 3; j++) {
                pd_unit_grid_update(ug[j], g, c, ks[j], r[0], r[1], r[2], r[3]);
                pd_grid *ref = pd_unit_grid_build(g, fresh, ks[j]);
                assert_non_null(ref);
                if (memcmp(ug[j]->cells, ref->cells, n) != 0)
                    fail_msg("grid %d update %d unit %u: differs from rebuild", i, u, ks[j]);
                assert_int_equal(ug[j]->uniform_cost, ref->uniform_cost);
                pd_grid_destroy(ref);
            }
            pd_clearance_destroy(fresh);
            pd_clearance_destroy(old);
        }
        for (int j = 0; j < 3; j++) {
            check_unit_grid(ug[j], g, (int)ks[j]);
            pd_grid_destroy(ug[j]);
        }
        pd_clearance_destroy(c);
        pd_grid_destroy(g);
    }
    /* The changes must really have moved clearance values. */
    assert_true(changed_cells > CL_RANDOM_GRIDS * CL_UPDATES_PER_GRID / 3);
}

/* The last costly cell going away must turn uniform_cost back on, and a new
 * costly cell under a footprint must turn it off. */
static void test_uniform_flag_tracking(void **state)
{
    pd_grid *g = core_open_grid(20, 20);
    pd_clearance *c = pd_clearance_build(g);
    assert_non_null(c);
    pd_grid *u3 = pd_unit_grid_build(g, c, 3);
    assert_non_null(u3);
    assert_int_equal(u3->uniform_cost, 1);
    pd_grid_set(g, 10, 10, 5);
    pd_clearance_update(c, g, 10, 10, 10, 10);
    pd_unit_grid_update(u3, g, c, 3, 10, 10, 10, 10);
    assert_int_equal(u3->uniform_cost, 0);
    assert_int_equal(pd_grid_get(u3, 8, 8), 5);
    assert_int_equal(pd_grid_get(u3, 7, 8), 1);
    pd_grid_set(g, 10, 10, PD_CELL_FREE);
    pd_clearance_update(c, g, 10, 10, 10, 10);
    pd_unit_grid_update(u3, g, c, 3, 10, 10, 10, 10);
    assert_int_equal(u3->uniform_cost, 1);
    check_unit_grid(u3, g, 3);
    pd_grid_destroy(u3);
    pd_clearance_destroy(c);
    pd_grid_destroy(g);
}

/* A map larger than one internal tile in both directions, with a change
 * straddling tile edges. */
static void test_large_map(void **state)
{
    uint64_t rng = 0x1234567887654321ull;
    pd_grid *g = pd_grid_create(150, 131);
    assert_non_null(g);
    for (int32_t y = 0; y < g->height; y++)
        for (int32_t x = 0; x < g->width; x++)
            pd_grid_set(g, x, y, random_cell(&rng, 3, 1));
    pd_clearance *c = pd_clearance_build(g);
    assert_non_null(c);
    check_against_brute(c, g);
    for (uint32_t k = 1; k <= PD_UNIT_SIZE_MAX; k += 5) {
        pd_grid *ug = pd_unit_grid_build(g, c, k);
        assert_non_null(ug);
        check_unit_grid(ug, g, (int)k);
        for (int32_t y = 60; y < 70; y++)
            for (int32_t x = 60; x < 70; x++)
                pd_grid_set(g, x, y, (x + y) % 3 == 0 ? PD_CELL_BLOCKED : (uint8_t)(1 + (x % 4)));
        pd_clearance_update(c, g, 60, 60, 69, 69);
        pd_unit_grid_update(ug, g, c, k, 60, 60, 69, 69);
        check_against_brute(c, g);
        check_unit_grid(ug, g, (int)k);
        pd_grid_destroy(ug);
    }
    pd_clearance_destroy(c);
    pd_grid_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_map),
        cmocka_unit_test(test_cap),
        cmocka_unit_test(test_random_build),
        cmocka_unit_test(test_unit_one_is_copy),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_clone),
        cmocka_unit_test(test_update_matches_rebuild),
        cmocka_unit_test(test_uniform_flag_tracking),
        cmocka_unit_test(test_large_map),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
