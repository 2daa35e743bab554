/*
 * test_components.c - connected-component labels and their local repair.
 *
 * The reference partition is a union-find over 4-neighbour pairs of passable
 * cells, written here from the rule, not from pd_components.c. Labels must
 * induce exactly that partition (the same-label relation equals "same
 * reference set" for every pair of cells, checked through a bijection between
 * labels and sets), be 0 exactly on blocked cells and padding, stay below
 * next_label, and `count` must equal the number of sets. After every random
 * update (blocks and opens, rectangles and single cells, mixed and cost-only
 * changes) the repaired labels must pass the same check and match a fresh
 * build's partition. Labels are held in the narrowest width (8, 16 or 32
 * bits) their lineage needs: a full build's is the narrowest for its
 * count, and lineages that hand out labels past 255 and past 65535 widen
 * under updates, checked against a fresh build at every step, with the
 * diffs bringing a second copy to the same labels and width. The
 * generator is a fixed-seed xorshift.
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
#include "pd_components.h"
#include "test_rng.h"

#define CC_RANDOM_GRIDS 120
#define CC_MAX_SIDE 60
#define CC_UPDATES_PER_GRID 40

/* ------------------------------------------------- reference partition */

static int32_t uf_find(int32_t *parent, int32_t i)
{
    while (parent[i] != i) {
        parent[i] = parent[parent[i]];
        i = parent[i];
    }
    return i;
}

/* Fills root[] (w*h) with a set id per passable cell (-1 on blocked ones)
 * and returns the number of sets. */
static int32_t reference_sets(const pd_grid *g, int32_t *root)
{
    int32_t w = g->width, h = g->height;
    for (int32_t i = 0; i < w * h; i++)
        root[i] = i;
    for (int32_t y = 0; y < h; y++) {
        for (int32_t x = 0; x < w; x++) {
            if (pd_grid_get(g, x, y) == PD_CELL_BLOCKED)
                continue;
            if (pd_grid_get(g, x + 1, y) != PD_CELL_BLOCKED)
                root[uf_find(root, y * w + x)] = uf_find(root, y * w + x + 1);
            if (pd_grid_get(g, x, y + 1) != PD_CELL_BLOCKED)
                root[uf_find(root, y * w + x)] = uf_find(root, (y + 1) * w + x);
        }
    }
    int32_t sets = 0;
    for (int32_t y = 0; y < h; y++) {
        for (int32_t x = 0; x < w; x++) {
            int32_t i = y * w + x;
            if (pd_grid_get(g, x, y) == PD_CELL_BLOCKED)
                continue;
            if (uf_find(root, i) == i)
                sets++;
        }
    }
    for (int32_t y = 0; y < h; y++)
        for (int32_t x = 0; x < w; x++)
            root[y * w + x] = pd_grid_get(g, x, y) == PD_CELL_BLOCKED ? -1 : uf_find(root, y * w + x);
    return sets;
}

/* Checks c's labels induce the reference partition of g. */
static void check_partition(const pd_components *c, const pd_grid *g, const char *what)
{
    int32_t w = g->width, h = g->height;
    assert_int_equal(c->width, w);
    assert_int_equal(c->height, h);
    assert_int_equal(c->stride, g->stride);
    int32_t *root = malloc((size_t)w * (size_t)h * sizeof *root);
    assert_non_null(root);
    int32_t sets = reference_sets(g, root);
    /* label -> set and set -> label must both be functions. */
    int32_t *set_of_label = malloc((size_t)c->next_label * sizeof *set_of_label);
    uint32_t *label_of_set = calloc((size_t)w * (size_t)h, sizeof *label_of_set);
    assert_non_null(set_of_label);
    assert_non_null(label_of_set);
    for (uint32_t l = 0; l < c->next_label; l++)
        set_of_label[l] = -1;
    int32_t labels_seen = 0;
    for (int32_t y = 0; y < h; y++) {
        for (int32_t x = 0; x < w; x++) {
            pd_point p = { x, y };
            uint32_t l = pd_components_label(c, p);
            int32_t s = root[y * w + x];
            if (s < 0) {
                if (l != 0)
                    fail_msg("%s: blocked (%d,%d) has label %u", what, x, y, l);
                continue;
            }
            if (l == 0 || l >= c->next_label)
                fail_msg("%s: open (%d,%d) has label %u (next_label %u)", what, x, y, l,
                         c->next_label);
            if (set_of_label[l] < 0) {
                set_of_label[l] = s;
                labels_seen++;
            } else if (set_of_label[l] != s) {
                fail_msg("%s: label %u spans two components (at (%d,%d))", what, l, x, y);
            }
            if (label_of_set[s] == 0)
                label_of_set[s] = l;
            else if (label_of_set[s] != l)
                fail_msg("%s: component at (%d,%d) has labels %u and %u", what, x, y,
                         label_of_set[s], l);
        }
    }
    if (labels_seen != sets || c->count != (uint32_t)sets)
        fail_msg("%s: %d labels, count %u, %d components", what, labels_seen, c->count, sets);
    size_t n = (size_t)c->stride * (size_t)(h + 2);
    for (size_t i = 0; i < n; i++) {
        int32_t x = (int32_t)(i % (size_t)c->stride) - 1, y = (int32_t)(i / (size_t)c->stride) - 1;
        if ((x < 0 || y < 0 || x >= w || y >= h) && pd_components_at(c, i) != 0)
            fail_msg("%s: padding index %zu has label %u", what, i, pd_components_at(c, i));
    }
    free(label_of_set);
    free(set_of_label);
    free(root);
}

/* Both labelings must group cells the same way. */
static void check_same_partition(const pd_components *a, const pd_components *b)
{
    size_t n = (size_t)a->stride * (size_t)(a->height + 2);
    uint32_t *a_to_b = calloc(a->next_label, sizeof *a_to_b);
    uint32_t *b_to_a = calloc(b->next_label, sizeof *b_to_a);
    assert_non_null(a_to_b);
    assert_non_null(b_to_a);
    for (size_t i = 0; i < n; i++) {
        uint32_t la = pd_components_at(a, i), lb = pd_components_at(b, i);
        assert_int_equal(la == 0, lb == 0);
        if (la == 0)
            continue;
        if (a_to_b[la] == 0)
            a_to_b[la] = lb;
        if (b_to_a[lb] == 0)
            b_to_a[lb] = la;
        assert_int_equal(a_to_b[la], lb);
        assert_int_equal(b_to_a[lb], la);
    }
    assert_int_equal(a->count, b->count);
    free(a_to_b);
    free(b_to_a);
}

/* -------------------------------------------------------------- tests */

/* The width the documented rule gives labels below next_label, written
 * here from pd_components.h's text rather than from its code: 8 bits for
 * labels up to 255, 16 up to 65535, else 32. */
static uint32_t rule_bytes(uint32_t next_label)
{
    uint32_t highest = next_label - 1;
    return highest <= 255u ? 1u : highest <= 65535u ? 2u : 4u;
}


static void test_small_map(void **state)
{
    pd_grid *g = core_grid("..#..\n"
                           "..#..\n"
                           "###.#\n"
                           ".#...\n");
    pd_components *c = pd_components_build(g);
    assert_non_null(c);
    assert_int_equal(c->count, 3);
    pd_point a = { 0, 0 }, b = { 1, 1 }, r = { 4, 0 }, d = { 3, 3 }, lone = { 0, 3 };
    pd_point wall = { 2, 0 }, outside = { -1, 0 };
    assert_true(pd_components_connected(c, a, b));
    assert_true(pd_components_connected(c, r, d));
    assert_false(pd_components_connected(c, a, r));
    assert_false(pd_components_connected(c, lone, d));
    assert_false(pd_components_connected(c, wall, wall));
    assert_false(pd_components_connected(c, outside, outside));
    assert_int_equal(pd_components_label(c, outside), 0);
    check_partition(c, g, "small map");
    /* Labels run from 1, one per component. */
    assert_int_equal(c->next_label, 4);
    pd_components_destroy(c);
    pd_grid_destroy(g);
}

static void test_random_build(void **state)
{
    uint64_t rng = 0x0DDB1A5E5BAD5EEDull;
    int widths[5] = { 0 };
    for (int i = 0; i < CC_RANDOM_GRIDS; i++) {
        int32_t w = 1 + rng_below(&rng, CC_MAX_SIDE), h = 1 + rng_below(&rng, CC_MAX_SIDE);
        int density = rng_below(&rng, 70);
        pd_grid *g = pd_grid_create(w, h);
        assert_non_null(g);
        for (int32_t y = 0; y < h; y++)
            for (int32_t x = 0; x < w; x++)
                pd_grid_set(g, x, y, rng_below(&rng, 100) < density ? 0 : (uint8_t)(1 + rng_below(&rng, 3)));
        pd_components *c = pd_components_build(g);
        assert_non_null(c);
        check_partition(c, g, "random build");
        /* Whatever the count, the narrowest width that holds it. */
        assert_int_equal(c->label_bytes, rule_bytes(c->count + 1));
        widths[c->label_bytes]++;
        pd_components_destroy(c);
        pd_grid_destroy(g);
    }
    /* Both sides of the 8-bit limit were built. */
    assert_true(widths[1] > 0 && widths[2] > 0);
}

/* Closing one cell of a long corridor cuts it in two far beyond the repair
 * margin; opening it again joins the halves. Closing a cell with a short
 * detour around it keeps one component. */
static void test_split_and_join(void **state)
{
    pd_grid *g = pd_grid_create(80, 3);
    assert_non_null(g);
    for (int32_t x = 0; x < 80; x++)
        pd_grid_set(g, x, 1, PD_CELL_FREE);
    pd_components *c = pd_components_build(g);
    assert_non_null(c);
    assert_int_equal(c->count, 1);
    pd_point left = { 0, 1 }, right = { 79, 1 };
    pd_grid_set(g, 40, 1, PD_CELL_BLOCKED);
    assert_int_equal(pd_components_update(c, g, 40, 1, 40, 1), 0);
    assert_int_equal(c->count, 2);
    assert_false(pd_components_connected(c, left, right));
    check_partition(c, g, "corridor cut");
    pd_grid_set(g, 40, 1, PD_CELL_FREE);
    assert_int_equal(pd_components_update(c, g, 40, 1, 40, 1), 0);
    assert_int_equal(c->count, 1);
    assert_true(pd_components_connected(c, left, right));
    check_partition(c, g, "corridor joined");
    /* A bypass above the cut: closing the cell no longer splits anything. */
    for (int32_t x = 39; x <= 41; x++)
        pd_grid_set(g, x, 0, PD_CELL_FREE);
    assert_int_equal(pd_components_update(c, g, 39, 0, 41, 0), 0);
    uint32_t before = pd_components_label(c, left);
    pd_grid_set(g, 40, 1, PD_CELL_BLOCKED);
    assert_int_equal(pd_components_update(c, g, 40, 1, 40, 1), 0);
    assert_int_equal(c->count, 1);
    assert_true(pd_components_connected(c, left, right));
    /* The local proof keeps the label: nothing was relabelled. */
    assert_int_equal(pd_components_label(c, left), before);
    check_partition(c, g, "corridor bypassed");
    pd_components_destroy(c);
    pd_grid_destroy(g);
}

/* Opening cells between three components merges them, relabelling only
 * the smaller ones: the largest keeps its label. */
static void test_merge_keeps_largest(void **state)
{
    pd_grid *g = core_grid("...##....\n"
                           "...##....\n"
                           "#####....\n"
                           ".#..#....\n");
    pd_components *c = pd_components_build(g);
    assert_non_null(c);
    assert_int_equal(c->count, 4);
    check_partition(c, g, "before merge");
    pd_point room = { 0, 0 }, big = { 6, 1 }, tiny = { 0, 3 }, pair = { 2, 3 };
    uint32_t big_label = pd_components_label(c, big);
    /* (3,1), (4,1) and (3,2) open: the region touches the 3x2 room, the big
     * room on the right and the pair of cells below. */
    pd_grid_set(g, 3, 1, PD_CELL_FREE);
    pd_grid_set(g, 4, 1, PD_CELL_FREE);
    pd_grid_set(g, 3, 2, PD_CELL_FREE);
    assert_int_equal(pd_components_update(c, g, 3, 1, 4, 2), 0);
    assert_int_equal(c->count, 2);
    assert_true(pd_components_connected(c, room, big));
    assert_true(pd_components_connected(c, pair, big));
    assert_int_equal(pd_components_label(c, big), big_label);
    assert_false(pd_components_connected(c, tiny, pair));
    check_partition(c, g, "after merge");
    /* An isolated opened cell gets a label of its own. */
    pd_grid *g2 = core_grid("#####\n#####\n");
    pd_components *c2 = pd_components_build(g2);
    assert_non_null(c2);
    assert_int_equal(c2->count, 0);
    pd_grid_set(g2, 2, 1, PD_CELL_FREE);
    assert_int_equal(pd_components_update(c2, g2, 2, 1, 2, 1), 0);
    assert_int_equal(c2->count, 1);
    check_partition(c2, g2, "isolated open");
    /* Closing it again removes the component. */
    pd_grid_set(g2, 2, 1, PD_CELL_BLOCKED);
    assert_int_equal(pd_components_update(c2, g2, 2, 1, 2, 1), 0);
    assert_int_equal(c2->count, 0);
    check_partition(c2, g2, "isolated closed");
    pd_components_destroy(c2);
    pd_grid_destroy(g2);
    pd_components_destroy(c);
    pd_grid_destroy(g);
}

/* One random change in a random rectangle (possibly reversed or sticking
 * out): all blocked, all open, a cost only, a random mix, a single cell, or a
 * wall line across the map (the kind that splits components). */
static void random_change(uint64_t *rng, pd_grid *g, int density, int32_t r[4], int *kind_out,
                          int *closing_out, int *opening_out)
{
    int32_t w = g->width, h = g->height;
    int kind = rng_below(rng, 6);
    int32_t x0 = rng_below(rng, w + 4) - 2, y0 = rng_below(rng, h + 4) - 2;
    int32_t x1 = x0 + rng_below(rng, 7) - 1, y1 = y0 + rng_below(rng, 7) - 1;
    if (kind == 4) {
        x1 = x0;
        y1 = y0;
    } else if (kind == 5) {
        /* A long, thin wall or opening: a row or column segment. */
        if (rng_below(rng, 2)) {
            x0 = rng_below(rng, w);
            x1 = x0 + rng_below(rng, w);
            y1 = y0;
        } else {
            y0 = rng_below(rng, h);
            y1 = y0 + rng_below(rng, h);
            x1 = x0;
        }
    }
    uint8_t open = (uint8_t)(1 + rng_below(rng, 3));
    int32_t lx = x0 < x1 ? x0 : x1, hx = x0 < x1 ? x1 : x0;
    int32_t ly = y0 < y1 ? y0 : y1, hy = y0 < y1 ? y1 : y0;
    int block_all = rng_below(rng, 2);
    for (int32_t y = ly; y <= hy; y++) {
        for (int32_t x = lx; x <= hx; x++) {
            if (!pd_grid_in_bounds(g, x, y))
                continue;
            uint8_t v;
            switch (kind) {
            case 0: v = PD_CELL_BLOCKED; break;
            case 1: v = open; break;
            case 2: v = pd_grid_get(g, x, y) == PD_CELL_BLOCKED ? PD_CELL_BLOCKED : open; break;
            case 3: v = rng_below(rng, 100) < density ? PD_CELL_BLOCKED : open; break;
            default: v = block_all ? PD_CELL_BLOCKED : open; break;
            }
            pd_grid_set(g, x, y, v);
        }
    }
    r[0] = x0;
    r[1] = y0;
    r[2] = x1;
    r[3] = y1;
    *kind_out = kind;
    *closing_out = kind == 0 || (kind >= 4 && block_all);
    *opening_out = kind == 1 || (kind >= 4 && !block_all);
}

static void test_random_updates(void **state)
{
    uint64_t rng = 0xA0761D6478BD642Full;
    int splits = 0, merges = 0, vanished = 0, created = 0;
    for (int i = 0; i < CC_RANDOM_GRIDS; i++) {
        int32_t w = 1 + rng_below(&rng, CC_MAX_SIDE), h = 1 + rng_below(&rng, CC_MAX_SIDE);
        /* Densities near the percolation threshold give many components
         * that single changes split and join. */
        int density = 15 + rng_below(&rng, 45);
        pd_grid *g = pd_grid_create(w, h);
        assert_non_null(g);
        for (int32_t y = 0; y < h; y++)
            for (int32_t x = 0; x < w; x++)
                pd_grid_set(g, x, y, rng_below(&rng, 100) < density ? 0 : PD_CELL_FREE);
        pd_components *c = pd_components_build(g);
        assert_non_null(c);
        for (int u = 0; u < CC_UPDATES_PER_GRID; u++) {
            int32_t r[4];
            int kind, closing, opening;
            uint32_t count_before = c->count, next_before = c->next_label;
            pd_grid *old = pd_grid_clone(g);
            assert_non_null(old);
            random_change(&rng, g, density, r, &kind, &closing, &opening);
            assert_int_equal(pd_components_update(c, g, r[0], r[1], r[2], r[3]), 0);
            char what[96];
            snprintf(what, sizeof what, "grid %d (%dx%d) update %d kind %d rect (%d,%d)-(%d,%d)", i,
                     w, h, u, kind, r[0], r[1], r[2], r[3]);
            check_partition(c, g, what);
            assert_true(c->next_label >= next_before);
            pd_components *fresh = pd_components_build(g);
            assert_non_null(fresh);
            check_same_partition(c, fresh);
            pd_components_destroy(fresh);
            /* Tally what kinds of repair happened, via the reference. */
            int32_t *root = malloc((size_t)w * (size_t)h * sizeof *root);
            assert_non_null(root);
            int32_t before = reference_sets(old, root);
            free(root);
            if ((int32_t)c->count > before && closing)
                splits++;
            if ((int32_t)c->count < before && opening)
                merges++;
            if ((int32_t)c->count < before && closing)
                vanished++;
            if ((int32_t)c->count > before && opening)
                created++;
            assert_int_equal(before, (int32_t)count_before);
            pd_grid_destroy(old);
        }
        pd_components_destroy(c);
        pd_grid_destroy(g);
    }
    print_message("splits %d, merges %d, vanished %d, created %d\n", splits, merges, vanished,
                  created);
    /* Every repair path must really have been taken. */
    assert_true(splits > 20);
    assert_true(merges > 20);
    assert_true(vanished > 5);
    assert_true(created > 5);
}

/* Cuts whose detours lie beyond the repair margin: a wall with a gap keeps
 * a room whole, closing the gap splits it, and a ring corridor cut once
 * stays one component. */
static void test_long_wall(void **state)
{
    pd_grid *g = core_open_grid(100, 100);
    pd_components *c = pd_components_build(g);
    assert_non_null(c);
    for (int32_t y = 0; y < 99; y++)
        pd_grid_set(g, 50, y, PD_CELL_BLOCKED);
    assert_int_equal(pd_components_update(c, g, 50, 0, 50, 98), 0);
    assert_int_equal(c->count, 1);
    check_partition(c, g, "wall with gap");
    pd_grid_set(g, 50, 99, PD_CELL_BLOCKED);
    assert_int_equal(pd_components_update(c, g, 50, 99, 50, 99), 0);
    assert_int_equal(c->count, 2);
    check_partition(c, g, "wall closed");
    pd_components_destroy(c);
    pd_grid_destroy(g);

    /* A ring corridor cut once stays one component, but the way round lies
     * beyond the margin, so only the unbounded floods can find it; they
     * meet, and the component keeps its label. */
    g = pd_grid_create(60, 60);
    assert_non_null(g);
    for (int32_t i = 0; i < 60; i++) {
        pd_grid_set(g, i, 0, PD_CELL_FREE);
        pd_grid_set(g, i, 59, PD_CELL_FREE);
        pd_grid_set(g, 0, i, PD_CELL_FREE);
        pd_grid_set(g, 59, i, PD_CELL_FREE);
    }
    c = pd_components_build(g);
    assert_non_null(c);
    pd_point corner = { 59, 59 };
    uint32_t before = pd_components_label(c, corner);
    pd_grid_set(g, 30, 0, PD_CELL_BLOCKED);
    assert_int_equal(pd_components_update(c, g, 30, 0, 30, 0), 0);
    assert_int_equal(c->count, 1);
    assert_int_equal(pd_components_label(c, corner), before);
    check_partition(c, g, "ring cut once");
    pd_components_destroy(c);
    pd_grid_destroy(g);
}

/* A side x side grid, blocked but for k isolated single cells on the even
 * rows and columns (in scan order): exactly k components. */
static pd_grid *isolated_cells(int32_t side, uint32_t k)
{
    pd_grid *g = pd_grid_create(side, side);
    assert_non_null(g);
    uint32_t opened = 0;
    for (int32_t y = 0; y < side && opened < k; y += 2)
        for (int32_t x = 0; x < side && opened < k; x += 2, opened++)
            pd_grid_set(g, x, y, PD_CELL_FREE);
    assert_int_equal(opened, k);
    return g;
}

/* Labels take the narrowest width that holds them after a full build: 255
 * components fit 8 bits, 256 take 16, 65535 still 16, 65536 take 32; and
 * pd_components_bytes counts the padded cells at that width. */
static void test_label_width_after_build(void **state)
{
    (void)state;
    static const struct {
        int32_t side;
        uint32_t components, bytes;
    } cases[] = { { 40, 0, 1 }, { 40, 1, 1 }, { 40, 255, 1 }, { 40, 256, 2 }, { 512, 65535, 2 }, { 512, 65536, 4 } };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        pd_grid *g = isolated_cells(cases[i].side, cases[i].components);
        pd_components *c = pd_components_build(g);
        assert_non_null(c);
        assert_int_equal(c->count, cases[i].components);
        assert_int_equal(c->next_label, cases[i].components + 1);
        assert_int_equal(c->label_bytes, cases[i].bytes);
        assert_int_equal(pd_components_bytes_for(c->next_label), cases[i].bytes);
        size_t padded = (size_t)(cases[i].side + 2) * (size_t)(cases[i].side + 2);
        assert_int_equal(pd_components_bytes(c), padded * cases[i].bytes);
        char what[64];
        snprintf(what, sizeof what, "%u isolated cells", cases[i].components);
        check_partition(c, g, what);
        /* A clone keeps the width, in memory of its own. */
        pd_components *copy = pd_components_clone(c);
        assert_non_null(copy);
        assert_int_equal(copy->label_bytes, c->label_bytes);
        assert_ptr_not_equal(copy->labels, c->labels);
        assert_memory_equal(copy->labels, c->labels, padded * c->label_bytes);
        pd_components_destroy(copy);
        pd_components_destroy(c);
        pd_grid_destroy(g);
    }
}

/* The labels of a and b are the same numbers at every padded index, at the
 * same width, with the same counters. */
static void check_identical(const pd_components *a, const pd_components *b, const char *what)
{
    if (a->label_bytes != b->label_bytes || a->next_label != b->next_label || a->count != b->count)
        fail_msg("%s: width %u/%u, next_label %u/%u, count %u/%u", what, a->label_bytes, b->label_bytes,
                 a->next_label, b->next_label, a->count, b->count);
    size_t n = (size_t)a->stride * (size_t)(a->height + 2);
    assert_int_equal(pd_components_bytes(a), n * a->label_bytes);
    if (memcmp(a->labels, b->labels, n * a->label_bytes) != 0)
        fail_msg("%s: labels differ", what);
}

/*
 * One lineage of updates that hands out labels until next_label passes
 * `cross` (256 or 65536), so the labels widen under it. The grid starts
 * with `isolated` single-cell components; each step is one random change
 * (random_change: blocks, opens, costs, mixes, single cells, wall lines)
 * or a toggle of a cell on the even rows and columns near the last of
 * those cells, which opened alone is a component of its own, a new label. After every step:
 * - the labels pass check_partition and group cells as a fresh build does;
 * - their width is the one the rule gives next_label (widened exactly when
 *   a label passed the width, never narrowed by an update), and the fresh
 *   build's is the narrowest for its count;
 * and every few steps the diff recorded since the last apply brings a
 * follower copy of the labels (the scene's retired version) to exactly
 * the same labels and width, whatever widths the chunk crossed.
 */
static void lineage_crossing(int32_t side, uint32_t isolated, uint32_t cross, int steps, uint64_t seed)
{
    uint64_t rng = seed;
    pd_grid *g = isolated_cells(side, isolated);
    pd_components *c = pd_components_build(g);
    assert_non_null(c);
    const uint32_t start_bytes = c->label_bytes;
    assert_int_equal(start_bytes, rule_bytes(cross - 1));
    /* Room for the toggles: 64 slots before the last isolated cell and
     * 64 after it. */
    assert_true(isolated >= 64 && (uint32_t)((side + 1) / 2) * (uint32_t)((side + 1) / 2) >= isolated + 64);
    pd_components *follower = pd_components_clone(c);
    assert_non_null(follower);
    pd_components_diff diff;
    memset(&diff, 0, sizeof diff);
    int crossed_at = -1;
    for (int u = 0; u < steps; u++) {
        int32_t r[4];
        int kind = -1, closing, opening;
        uint32_t bytes_before = c->label_bytes;
        if (rng_below(&rng, 3) == 0) {
            random_change(&rng, g, 40, r, &kind, &closing, &opening);
        } else {
            /* Toggles near the last isolated cell: about half of them open
             * a blocked one. */
            int32_t slot = (int32_t)isolated - 64 + rng_below(&rng, 128), per_row = (side + 1) / 2;
            int32_t x = 2 * (slot % per_row), y = 2 * (slot / per_row);
            pd_grid_set(g, x, y, pd_grid_get(g, x, y) == PD_CELL_BLOCKED ? PD_CELL_FREE : PD_CELL_BLOCKED);
            r[0] = r[2] = x;
            r[1] = r[3] = y;
        }
        assert_int_equal(pd_components_update_diff(c, g, r[0], r[1], r[2], r[3], &diff), 0);
        char what[128];
        snprintf(what, sizeof what, "%dx%d lineage step %d kind %d rect (%d,%d)-(%d,%d), next_label %u", side,
                 side, u, kind, r[0], r[1], r[2], r[3], c->next_label);
        check_partition(c, g, what);
        assert_int_equal(c->label_bytes, rule_bytes(c->next_label));
        assert_true(c->label_bytes >= bytes_before);
        if (c->label_bytes > bytes_before)
            crossed_at = u;
        pd_components *fresh = pd_components_build(g);
        assert_non_null(fresh);
        check_same_partition(c, fresh);
        assert_int_equal(fresh->label_bytes, rule_bytes(fresh->count + 1));
        pd_components_destroy(fresh);
        if (u % 7 == 6 || u == steps - 1) {
            assert_int_equal(pd_components_apply_diff(follower, &diff), 0);
            check_identical(follower, c, what);
            pd_components_diff_free(&diff);
        }
    }
    print_message("%dx%d: %u isolated cells, widened from %u to %u bytes at step %d, next_label %u\n", side, side,
                  isolated, start_bytes, c->label_bytes, crossed_at, c->next_label);
    /* The lineage really crossed the width: labels past `cross` were
     * given, and they are held wider than at the start. */
    assert_true(c->next_label > cross);
    assert_int_equal(c->label_bytes, rule_bytes(cross + 1));
    assert_true(crossed_at >= 0);
    /* A full build of the same cells narrows again when the count fits. */
    pd_components *rebuilt = pd_components_build(g);
    assert_non_null(rebuilt);
    assert_int_equal(rebuilt->label_bytes, rule_bytes(rebuilt->count + 1));
    check_same_partition(c, rebuilt);
    pd_components_destroy(rebuilt);
    pd_components_diff_free(&diff);
    pd_components_destroy(follower);
    pd_components_destroy(c);
    pd_grid_destroy(g);
}

/* A lineage from 8 to 16 bits: 240 components to start with, so a few
 * dozen new labels cross 255. */
static void test_lineage_crosses_255(void **state)
{
    (void)state;
    lineage_crossing(40, 240, 256, 400, 0x8B17C0FFEE000001ull);
}

/* A lineage from 16 to 32 bits: 65,510 components to start with. */
static void test_lineage_crosses_65535(void **state)
{
    (void)state;
    lineage_crossing(516, 65510, 65536, 160, 0x16B17C0FFEE00002ull);
}

/* 90,000 components take 32 bits from the build; an update of 32-bit
 * labels keeps them 32 bits and right, and the open grid's one component
 * takes 8 bits, which a split leaves 8 bits wide. */
static void test_label_width(void **state)
{
    (void)state;
    /* 600x600 with every other cell of every other row open: 90,000
     * single-cell components. */
    pd_grid *g = isolated_cells(600, 90000);
    pd_components *c = pd_components_build(g);
    assert_non_null(c);
    assert_int_equal(c->count, 90000);
    assert_int_equal(c->label_bytes, 4);
    assert_int_equal(pd_components_bytes(c), 602u * 602u * 4u);
    check_partition(c, g, "90000 components");
    /* Opening a row joins 300 of them; still too many labels for 16 bits. */
    for (int32_t x = 0; x < 600; x++)
        pd_grid_set(g, x, 0, PD_CELL_FREE);
    assert_int_equal(pd_components_update(c, g, 0, 0, 599, 0), 0);
    assert_int_equal(c->label_bytes, 4);
    check_partition(c, g, "a row opened");
    pd_components_destroy(c);

    /* The open grid has one component: 8 bits, 1 byte per padded cell;
     * an update leaves them 8 bits wide and correct. */
    for (int32_t y = 0; y < 600; y++)
        for (int32_t x = 0; x < 600; x++)
            pd_grid_set(g, x, y, PD_CELL_FREE);
    c = pd_components_build(g);
    assert_non_null(c);
    assert_int_equal(c->label_bytes, 1);
    assert_int_equal(pd_components_bytes(c), 602u * 602u * 1u);
    for (int32_t y = 0; y < 600; y++)
        pd_grid_set(g, 300, y, PD_CELL_BLOCKED);
    assert_int_equal(pd_components_update(c, g, 300, 0, 300, 599), 0);
    assert_int_equal(c->label_bytes, 1);
    assert_int_equal(c->count, 2);
    check_partition(c, g, "split in two");
    pd_components_destroy(c);
    pd_grid_destroy(g);
}

static void test_clone_and_bad_arguments(void **state)
{
    pd_grid *g = core_grid("..#\n..#\n");
    pd_grid *other = core_open_grid(2, 2);
    pd_components *c = pd_components_build(g);
    assert_non_null(c);
    pd_components *copy = pd_components_clone(c);
    assert_non_null(copy);
    /* Few labels: 8 bits each, in memory of its own. */
    assert_int_equal(copy->label_bytes, 1);
    assert_ptr_not_equal(copy->labels, c->labels);
    check_same_partition(c, copy);
    assert_int_equal(copy->next_label, c->next_label);
    pd_grid_set(g, 2, 0, PD_CELL_FREE);
    assert_int_equal(pd_components_update(copy, g, 2, 0, 2, 0), 0);
    pd_point p = { 2, 0 };
    assert_int_equal(pd_components_label(c, p), 0);
    assert_int_not_equal(pd_components_label(copy, p), 0);
    assert_null(pd_components_build(NULL));
    assert_null(pd_components_clone(NULL));
    assert_int_equal(pd_components_update(NULL, g, 0, 0, 0, 0), -1);
    assert_int_equal(pd_components_update(c, NULL, 0, 0, 0, 0), -1);
    assert_int_equal(pd_components_update(c, other, 0, 0, 0, 0), -1);
    /* A rectangle outside the grid is a no-op, not an error. */
    assert_int_equal(pd_components_update(copy, g, 5, 5, 9, 9), 0);
    check_partition(copy, g, "after outside rect");
    pd_components_destroy(NULL);
    pd_components_destroy(copy);
    pd_components_destroy(c);
    pd_grid_destroy(other);
    pd_grid_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_map),
        cmocka_unit_test(test_random_build),
        cmocka_unit_test(test_split_and_join),
        cmocka_unit_test(test_merge_keeps_largest),
        cmocka_unit_test(test_random_updates),
        cmocka_unit_test(test_long_wall),
        cmocka_unit_test(test_clone_and_bad_arguments),
        cmocka_unit_test(test_label_width),
        cmocka_unit_test(test_label_width_after_build),
        cmocka_unit_test(test_lineage_crosses_255),
        cmocka_unit_test(test_lineage_crosses_65535),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
