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

#include "components_check.h"
#include "core_check.h"
#include "pd_components.h"
#include "test_rng.h"

#define CC_RANDOM_GRIDS 120
#define CC_MAX_SIDE 60
#define CC_UPDATES_PER_GRID 40
/* check_queries asks about every cell of grids up to this size, and
 * about every CC_QUERY_STRIDE-th cell of larger ones (a prime, so that
 * the sample walks across rows and columns). */
#define CC_QUERY_ALL_CELLS 40000
#define CC_QUERY_STRIDE 7

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

/* The queries against the reference sets root[] (w*h, -1 on blocked):
 * pd_components_connected for pairs of every class (the same cell, a
 * neighbour, cells a few steps apart and far apart; stored and escaped
 * labels alike, since every open cell is paired), and pd_components_in for
 * the labels of a sample of cells against every cell. Grids of more than
 * CC_QUERY_ALL_CELLS cells are sampled: every CC_QUERY_STRIDE-th cell. */
static void check_queries(const pd_components *c, const int32_t *root, const char *what)
{
    const int32_t w = c->width, h = c->height, stride = w * h > CC_QUERY_ALL_CELLS ? CC_QUERY_STRIDE : 1;
    static const int32_t off[][2] = { { 0, 0 }, { 1, 0 }, { 0, 1 }, { 2, 1 }, { -3, 2 }, { 5, 5 }, { 40, -7 } };
    for (int32_t at = 0; at < w * h; at += stride) {
        const int32_t x = at % w, y = at / w;
        for (size_t k = 0; k < sizeof off / sizeof *off; k++) {
            int32_t bx = ((x + off[k][0]) % w + w) % w, by = ((y + off[k][1]) % h + h) % h;
            int want = root[at] >= 0 && root[at] == root[by * w + bx];
            if (pd_components_connected(c, (pd_point){ x, y }, (pd_point){ bx, by }) != want)
                fail_msg("%s: connected (%d,%d)-(%d,%d) should be %d", what, x, y, bx, by, want);
        }
    }
    assert_false(pd_components_connected(c, (pd_point){ -1, 0 }, (pd_point){ 0, 0 }));
    const int32_t every = w * h / 8 + 1;
    for (int32_t at = 0; at < w * h; at += every) {
        if (root[at] < 0)
            continue;
        pd_components_match m;
        pd_components_match_init(&m, c, pd_components_label(c, (pd_point){ at % w, at / w }));
        for (int32_t i = 0; i < w * h; i += stride) {
            if (pd_components_in(c, &m, (pd_point){ i % w, i / w }) != (root[i] == root[at]))
                fail_msg("%s: (%d,%d) in the component of (%d,%d) should be %d", what, i % w, i / w, at % w,
                         at / w, root[i] == root[at]);
        }
        assert_false(pd_components_in(c, &m, (pd_point){ w, 0 }));
    }
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
    /* label -> set and set -> label must both be functions (labels by
     * their components_key, small ones included). */
    const size_t keys = components_keys(c);
    int32_t *set_of_label = malloc(keys * sizeof *set_of_label);
    uint32_t *label_of_set = calloc((size_t)w * (size_t)h, sizeof *label_of_set);
    assert_non_null(set_of_label);
    assert_non_null(label_of_set);
    for (size_t l = 0; l < keys; l++)
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
            size_t k = components_key(c, l);
            if (l == 0 || k == (size_t)-1)
                fail_msg("%s: open (%d,%d) has label %u (next_label %u)", what, x, y, l,
                         c->next_label);
            if (set_of_label[k] < 0) {
                set_of_label[k] = s;
                labels_seen++;
            } else if (set_of_label[k] != s) {
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
    char why[160];
    if (components_small_rule_broken(c, why, sizeof why))
        fail_msg("%s: %s", what, why);
    check_queries(c, root, what);
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
    char why[160];
    if (components_differ(a, b, why, sizeof why))
        fail_msg("%s", why);
}

/* -------------------------------------------------------------- tests */

/* The width the documented rule gives labels below next_label, written
 * here from pd_components.h's text rather than from its code: 8 bits for
 * labels up to 254 (255 is the escape), 16 up to 65535, else 32. */
static uint32_t rule_bytes(uint32_t next_label)
{
    uint32_t highest = next_label - 1;
    return highest <= 254u ? 1u : highest <= 65535u ? 2u : 4u;
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

/* Whether some cell of c is stored escaped. */
static int has_escapes(const pd_components *c)
{
    size_t n = (size_t)c->stride * (size_t)(c->height + 2);
    for (size_t i = 0; i < n; i++)
        if (pd_components_escaped(c, pd_components_at(c, i)))
            return 1;
    return 0;
}

static void test_random_build(void **state)
{
    uint64_t rng = 0x0DDB1A5E5BAD5EEDull;
    int escaped[2] = { 0 };
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
        /* Whatever the count, the narrowest width the rule allows. */
        assert_int_equal(c->label_bytes, components_reference_bytes(g));
        escaped[has_escapes(c)]++;
        pd_components_destroy(c);
        pd_grid_destroy(g);
    }
    /* Builds with and without escaped components. */
    assert_true(escaped[0] > 0 && escaped[1] > 0);
}

/* Builds whose floods hold more than a thousand cells at once between
 * their edge and their start (the frontier), so the build's frontier ring
 * grows past its first capacity while its cells wrap around its end: an
 * open square flooded from its corner (the frontier is a diagonal of up
 * to 1,500 cells) and the same square with 20% random walls. */
static void test_build_wide_frontier(void **state)
{
    (void)state;
    const int32_t side = 1500;
    uint64_t rng = 0xF407713EF7011EAFull;
    for (int walls = 0; walls <= 20; walls += 20) {
        pd_grid *g = pd_grid_create(side, side);
        assert_non_null(g);
        for (int32_t y = 0; y < side; y++)
            for (int32_t x = 0; x < side; x++)
                pd_grid_set(g, x, y, rng_below(&rng, 100) < walls ? 0 : 1);
        pd_components *c = pd_components_build(g);
        assert_non_null(c);
        check_partition(c, g, walls ? "1500 x 1500, 20% walls" : "open 1500 x 1500");
        assert_int_equal(c->label_bytes, components_reference_bytes(g));
        pd_components_destroy(c);
        pd_grid_destroy(g);
    }
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

/* What random_updates saw: updates that split, merged, removed and
 * created components, and grids built with escaped components. */
typedef struct repairs {
    int splits, merges, vanished, created, escaped;
} repairs;

/* Random updates on `grids` random grids of min_side..max_side a side,
 * `updates` each, checked against the reference and a fresh build after
 * every one. */
static repairs random_updates(uint64_t rng, int grids, int32_t min_side, int32_t max_side, int updates)
{
    int splits = 0, merges = 0, vanished = 0, created = 0, escaped = 0;
    for (int i = 0; i < grids; i++) {
        int32_t w = min_side + rng_below(&rng, max_side - min_side + 1);
        int32_t h = min_side + rng_below(&rng, max_side - min_side + 1);
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
        escaped += has_escapes(c);
        for (int u = 0; u < updates; u++) {
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
            assert_int_equal(c->label_bytes, rule_bytes(c->next_label));
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
    print_message("%dx%d..%dx%d: splits %d, merges %d, vanished %d, created %d; %d of %d built with escapes\n",
                  min_side, min_side, max_side, max_side, splits, merges, vanished, created, escaped, grids);
    return (repairs){ splits, merges, vanished, created, escaped };
}

/* Small grids: few enough components that builds label them all; updates
 * escape the small parts they make. */
static void test_random_updates(void **state)
{
    (void)state;
    repairs r = random_updates(0xA0761D6478BD642Full, CC_RANDOM_GRIDS, 1, CC_MAX_SIDE, CC_UPDATES_PER_GRID);
    /* Every repair path must really have been taken. */
    assert_true(r.splits > 20);
    assert_true(r.merges > 20);
    assert_true(r.vanished > 5);
    assert_true(r.created > 5);
}

/* Larger grids near the percolation threshold: hundreds of pockets, so
 * most builds escape the small ones and updates meet escaped components. */
static void test_random_updates_escaped(void **state)
{
    (void)state;
    repairs r = random_updates(0x5EED0E5CA9E00017ull, 16, 90, 130, 60);
    assert_true(r.escaped >= 6);
    assert_true(r.splits > 20);
    assert_true(r.merges > 20);
    assert_true(r.vanished > 5);
    assert_true(r.created > 0);
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

/* Where run r of runs_grid lies: runs of run_len cells, one blocked cell
 * apart, on the even rows from the top. */
static pd_point run_at(int32_t width, int32_t run_len, uint32_t r)
{
    uint32_t per_row = (uint32_t)(width + 1) / (uint32_t)(run_len + 1);
    return (pd_point){ (int32_t)(r % per_row) * (run_len + 1), 2 * (int32_t)(r / per_row) };
}

/* Where single cell k of runs_grid lies: on the even rows and columns from
 * row `first_row`, in scan order. */
static pd_point single_at(int32_t width, int32_t first_row, uint32_t k)
{
    uint32_t per_row = (uint32_t)(width + 1) / 2;
    return (pd_point){ 2 * (int32_t)(k % per_row), first_row + 2 * (int32_t)(k / per_row) };
}

/* The first row of runs_grid's single cells. */
static int32_t singles_row(int32_t width, uint32_t runs, int32_t run_len)
{
    return runs ? run_at(width, run_len, runs - 1).y + 2 : 0;
}

/* A width x height grid, blocked but for `runs` runs of run_len cells
 * (run_at) and then k single cells (single_at): exactly runs + k
 * components. */
static pd_grid *runs_grid(int32_t width, int32_t height, uint32_t runs, int32_t run_len, uint32_t k)
{
    pd_grid *g = pd_grid_create(width, height);
    assert_non_null(g);
    for (uint32_t r = 0; r < runs; r++) {
        pd_point p = run_at(width, run_len, r);
        assert_true(p.y < height);
        for (int32_t x = 0; x < run_len; x++)
            pd_grid_set(g, p.x + x, p.y, PD_CELL_FREE);
    }
    const int32_t first = singles_row(width, runs, run_len);
    for (uint32_t i = 0; i < k; i++) {
        pd_point p = single_at(width, first, i);
        assert_true(p.y < height);
        pd_grid_set(g, p.x, p.y, PD_CELL_FREE);
    }
    return g;
}

/* A side x side grid, blocked but for k isolated single cells on the even
 * rows and columns (in scan order): exactly k components. */
static pd_grid *isolated_cells(int32_t side, uint32_t k)
{
    return runs_grid(side, side, 0, 1, k);
}

/* Labels take the narrowest width the rule allows after a full build, at
 * its boundaries: up to 254 components take 8 bits with a label each;
 * more take 8 bits while at most 254 have more than
 * PD_COMPONENTS_SMALL_CELLS cells (the others escaped, however many), else
 * 16 up to 65535 components and 32 beyond; a run of exactly the limit is
 * escaped, one cell more is not. pd_components_bytes counts the padded
 * cells at that width, and a clone keeps it. */
static void test_label_width_after_build(void **state)
{
    (void)state;
    const int32_t small = PD_COMPONENTS_SMALL_CELLS;
    static const struct {
        int32_t width, height;
        uint32_t runs;
        int32_t run_len;
        uint32_t singles, bytes, next_label;
    } cases[] = {
        { 40, 40, 0, 1, 0, 1, 1 },
        { 40, 40, 0, 1, 1, 1, 2 },
        { 40, 40, 0, 1, 254, 1, 255 },
        /* 255 single cells: all escaped, no label given. */
        { 40, 40, 0, 1, 255, 1, 1 },
        /* 254 large runs and many small pieces: 8 bits. */
        { 600, 200, 254, PD_COMPONENTS_SMALL_CELLS + 1, 3000, 1, 255 },
        /* One large run more: 16 bits, every component labelled. */
        { 600, 200, 255, PD_COMPONENTS_SMALL_CELLS + 1, 3000, 2, 3256 },
        { 600, 200, 255, PD_COMPONENTS_SMALL_CELLS + 1, 0, 2, 256 },
        /* 255 runs of exactly the limit: escaped, 8 bits. */
        { 600, 200, 255, PD_COMPONENTS_SMALL_CELLS, 0, 1, 1 },
        /* Single cells alone never widen: 65,536 of them in 8 bits. */
        { 512, 512, 0, 1, 65536, 1, 1 },
        { 600, 600, 255, PD_COMPONENTS_SMALL_CELLS + 1, 65280, 2, 65536 },
        { 600, 600, 255, PD_COMPONENTS_SMALL_CELLS + 1, 65281, 4, 65537 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        pd_grid *g = runs_grid(cases[i].width, cases[i].height, cases[i].runs, cases[i].run_len, cases[i].singles);
        pd_components *c = pd_components_build(g);
        assert_non_null(c);
        char what[96];
        snprintf(what, sizeof what, "%u runs of %d and %u single cells", cases[i].runs, cases[i].run_len,
                 cases[i].singles);
        if (c->count != cases[i].runs + cases[i].singles || c->label_bytes != cases[i].bytes ||
            c->next_label != cases[i].next_label)
            fail_msg("%s: count %u, %u bytes, next_label %u", what, c->count, c->label_bytes, c->next_label);
        assert_int_equal(c->label_bytes, components_reference_bytes(g));
        size_t padded = (size_t)(cases[i].width + 2) * (size_t)(cases[i].height + 2);
        assert_int_equal(pd_components_bytes(c), padded * cases[i].bytes);
        check_partition(c, g, what);
        /* Escaped exactly when 8 bits could not label every component,
         * and then exactly the small ones. */
        int escapes = c->label_bytes == 1 && c->count > 254;
        for (uint32_t r = 0; r < cases[i].runs; r++) {
            pd_point p = run_at(cases[i].width, cases[i].run_len, r);
            int escaped = pd_components_escaped(c, pd_components_at(c, pd_components_index(c, p)));
            assert_int_equal(escaped, escapes && cases[i].run_len <= small);
        }
        if (cases[i].singles > 0) {
            pd_point p = single_at(cases[i].width, singles_row(cases[i].width, cases[i].runs, cases[i].run_len),
                                   cases[i].singles - 1);
            assert_int_equal(pd_components_escaped(c, pd_components_at(c, pd_components_index(c, p))), escapes);
        }
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

/* A build straight into the narrow width gives the labels of the build in
 * 32 bits narrowed afterwards (pd_components_build_wide), number for
 * number: on random grids of every wall density (few components, many
 * small ones escaped, more than 255 and more than 65535 components), and
 * on the runs grids around each width's edge (254/255 large components,
 * runs of exactly the small limit, 65535/65536 components). */
static void test_build_narrow_equals_wide(void **state)
{
    (void)state;
    uint64_t rng = 0x5EED0F1A8B0DD5ull;
    uint32_t widths[5] = { 0 };
    for (int i = 0; i < 60; i++) {
        int32_t w = 1 + rng_below(&rng, i < 40 ? CC_MAX_SIDE : 700);
        int32_t h = 1 + rng_below(&rng, i < 40 ? CC_MAX_SIDE : 700);
        int density = rng_below(&rng, 75);
        pd_grid *g = pd_grid_create(w, h);
        assert_non_null(g);
        for (int32_t y = 0; y < h; y++)
            for (int32_t x = 0; x < w; x++)
                pd_grid_set(g, x, y, rng_below(&rng, 100) < density ? 0 : (uint8_t)(1 + rng_below(&rng, 3)));
        pd_components *narrow = pd_components_build(g), *wide = pd_components_build_wide(g);
        assert_non_null(narrow);
        assert_non_null(wide);
        char what[96];
        snprintf(what, sizeof what, "random %d x %d, %d%% walls", (int)w, (int)h, density);
        check_identical(narrow, wide, what);
        widths[narrow->label_bytes] += 1 + (narrow->label_bytes == 1 && has_escapes(narrow));
        pd_components_destroy(narrow);
        pd_components_destroy(wide);
        pd_grid_destroy(g);
    }
    assert_true(widths[1] > 0);
    static const struct {
        int32_t width, height;
        uint32_t runs;
        int32_t run_len;
        uint32_t singles;
    } cases[] = {
        { 40, 40, 0, 1, 254 },
        { 40, 40, 0, 1, 255 },
        { 600, 200, 254, PD_COMPONENTS_SMALL_CELLS + 1, 3000 },
        { 600, 200, 255, PD_COMPONENTS_SMALL_CELLS + 1, 3000 },
        { 600, 200, 255, PD_COMPONENTS_SMALL_CELLS, 0 },
        { 600, 200, 300, PD_COMPONENTS_SMALL_CELLS + 1, 0 },
        { 600, 600, 255, PD_COMPONENTS_SMALL_CELLS + 1, 65280 },
        { 600, 600, 255, PD_COMPONENTS_SMALL_CELLS + 1, 65281 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        pd_grid *g = runs_grid(cases[i].width, cases[i].height, cases[i].runs, cases[i].run_len,
                               cases[i].singles);
        pd_components *narrow = pd_components_build(g), *wide = pd_components_build_wide(g);
        assert_non_null(narrow);
        assert_non_null(wide);
        char what[96];
        snprintf(what, sizeof what, "%u runs of %d and %u single cells", cases[i].runs,
                 cases[i].run_len, cases[i].singles);
        check_identical(narrow, wide, what);
        widths[narrow->label_bytes]++;
        pd_components_destroy(narrow);
        pd_components_destroy(wide);
        pd_grid_destroy(g);
    }
    assert_true(widths[1] > 0 && widths[2] > 0 && widths[4] > 0);
}

/*
 * One lineage of updates that hands out labels until next_label passes
 * `cross` (256 or 65536), so the labels widen under it. The grid starts
 * as runs_grid(side, side, runs, run_len, singles); each step is one
 * random change (random_change: blocks, opens, costs, mixes, single
 * cells, wall lines) or a toggle: with split_runs, of the middle cell of a
 * run (closing it cuts two large parts, so the cut-off one needs a label),
 * else of a cell on the even rows and columns near the last single cell
 * (opened alone it is a component of its own). After every step:
 * - the labels pass check_partition and group cells as a fresh build does;
 * - their width is the one the rule gives next_label (widened exactly when
 *   a label passed the width, never narrowed by an update), and the fresh
 *   build's is the narrowest the rule allows;
 * and every few steps the diff recorded since the last apply brings a
 * follower copy of the labels (the scene's retired version) to exactly
 * the same labels and width, whatever widths the chunk crossed.
 */
typedef struct lineage {
    int32_t side;
    uint32_t runs;
    int32_t run_len;
    uint32_t singles, cross;
    int split_runs, steps;
    uint64_t seed;
} lineage;

static void lineage_crossing(const lineage *l)
{
    uint64_t rng = l->seed;
    const int32_t side = l->side;
    pd_grid *g = runs_grid(side, side, l->runs, l->run_len, l->singles);
    const int32_t first_single = singles_row(side, l->runs, l->run_len);
    pd_components *c = pd_components_build(g);
    assert_non_null(c);
    const uint32_t start_bytes = c->label_bytes;
    assert_int_equal(start_bytes, rule_bytes(l->cross - 1));
    const int started_escaped = has_escapes(c);
    /* Room for the toggles: 64 slots before the last single cell and 64
     * after it. */
    assert_true(l->split_runs || (l->singles >= 64 && single_at(side, first_single, l->singles + 63).y < side));
    pd_components *follower = pd_components_clone(c);
    assert_non_null(follower);
    pd_components_diff diff;
    memset(&diff, 0, sizeof diff);
    int crossed_at = -1;
    for (int u = 0; u < l->steps; u++) {
        int32_t r[4];
        int kind = -1, closing, opening;
        uint32_t bytes_before = c->label_bytes;
        if (rng_below(&rng, 3) == 0) {
            random_change(&rng, g, 40, r, &kind, &closing, &opening);
        } else {
            pd_point p = l->split_runs ? run_at(side, l->run_len, (uint32_t)rng_below(&rng, (int)l->runs))
                                       : single_at(side, first_single, l->singles - 64 + (uint32_t)rng_below(&rng, 128));
            if (l->split_runs)
                p.x += l->run_len / 2;
            pd_grid_set(g, p.x, p.y, pd_grid_get(g, p.x, p.y) == PD_CELL_BLOCKED ? PD_CELL_FREE : PD_CELL_BLOCKED);
            r[0] = r[2] = p.x;
            r[1] = r[3] = p.y;
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
        assert_int_equal(fresh->label_bytes, components_reference_bytes(g));
        pd_components_destroy(fresh);
        if (u % 7 == 6 || u == l->steps - 1) {
            assert_int_equal(pd_components_apply_diff(follower, &diff), 0);
            check_identical(follower, c, what);
            pd_components_diff_free(&diff);
        }
    }
    print_message("%dx%d: %u runs of %d, %u single cells%s, widened from %u to %u bytes at step %d, next_label %u\n",
                  side, side, l->runs, l->run_len, l->singles, started_escaped ? " (escaped)" : "", start_bytes,
                  c->label_bytes, crossed_at, c->next_label);
    /* The lineage really crossed the width: labels past `cross` were
     * given, and they are held wider than at the start. */
    assert_true(c->next_label > l->cross);
    assert_int_equal(c->label_bytes, rule_bytes(l->cross + 1));
    assert_true(crossed_at >= 0);
    /* Wider labels have no escapes. */
    assert_false(has_escapes(c));
    /* A full build of the same cells narrows again when the rule allows. */
    pd_components *rebuilt = pd_components_build(g);
    assert_non_null(rebuilt);
    assert_int_equal(rebuilt->label_bytes, components_reference_bytes(g));
    check_same_partition(c, rebuilt);
    pd_components_destroy(rebuilt);
    pd_components_diff_free(&diff);
    pd_components_destroy(follower);
    pd_components_destroy(c);
    pd_grid_destroy(g);
}

/* A lineage from 8 to 16 bits with escaped components: 240 runs of 140
 * cells (labelled) and 400 single cells (escaped); cutting runs in two
 * hands out labels until they pass 254, and the widening gives the
 * escaped components labels of their own. */
static void test_lineage_crosses_255(void **state)
{
    (void)state;
    const lineage l = { 300, 240, 140, 400, 256, 1, 120, 0x8B17C0FFEE000001ull };
    lineage_crossing(&l);
}

/* A lineage from 16 to 32 bits: 255 large runs (so no escapes) and 65,280
 * single cells to start with. */
static void test_lineage_crosses_65535(void **state)
{
    (void)state;
    const lineage l = { 600, 255, PD_COMPONENTS_SMALL_CELLS + 1, 65255, 65536, 0, 100, 0x16B17C0FFEE00002ull };
    lineage_crossing(&l);
}

/* 90,000 single cells take 8 bits, all escaped, and opening a row joins
 * 300 of them into a large component, which gets a label; 255 large runs
 * and 65,281 single cells take 32 bits from the build, and an update of
 * 32-bit labels keeps them 32 bits and right; the open grid's one
 * component takes 8 bits, which a split leaves 8 bits wide. */
static void test_label_width(void **state)
{
    (void)state;
    /* 600x600 with every other cell of every other row open: 90,000
     * single-cell components. */
    pd_grid *g = isolated_cells(600, 90000);
    pd_components *c = pd_components_build(g);
    assert_non_null(c);
    assert_int_equal(c->count, 90000);
    assert_int_equal(c->label_bytes, 1);
    assert_int_equal(c->next_label, 1);
    assert_int_equal(pd_components_bytes(c), 602u * 602u * 1u);
    check_partition(c, g, "90000 components");
    for (int32_t x = 0; x < 600; x++)
        pd_grid_set(g, x, 0, PD_CELL_FREE);
    assert_int_equal(pd_components_update(c, g, 0, 0, 599, 0), 0);
    assert_int_equal(c->label_bytes, 1);
    assert_int_equal(c->next_label, 2);
    assert_int_equal(pd_components_label(c, (pd_point){ 0, 0 }), 1);
    assert_true(pd_components_label(c, (pd_point){ 0, 2 }) & PD_COMPONENTS_SMALL_LABEL);
    check_partition(c, g, "a row of escaped cells opened");
    /* A match of a small label holds its one cell; one naming a cell that
     * is not escaped, or label 0, matches nothing. */
    pd_components_match m;
    pd_components_match_init(&m, c, pd_components_label(c, (pd_point){ 2, 2 }));
    assert_true(pd_components_in(c, &m, (pd_point){ 2, 2 }));
    assert_false(pd_components_in(c, &m, (pd_point){ 0, 2 }));
    assert_false(pd_components_in(c, &m, (pd_point){ 2, 0 }));
    const uint32_t fake[] = { 0, PD_COMPONENTS_SMALL_LABEL | (uint32_t)pd_components_index(c, (pd_point){ 0, 0 }),
                              PD_COMPONENTS_SMALL_LABEL | (uint32_t)pd_components_index(c, (pd_point){ 1, 1 }),
                              PD_COMPONENTS_SMALL_LABEL | 0x7FFFFFFFu };
    for (size_t k = 0; k < sizeof fake / sizeof *fake; k++) {
        pd_components_match_init(&m, c, fake[k]);
        for (int32_t y = 0; y < 4; y++)
            for (int32_t x = 0; x < 4; x++)
                assert_false(pd_components_in(c, &m, (pd_point){ x, y }));
    }
    pd_components_destroy(c);
    pd_grid_destroy(g);

    g = runs_grid(600, 600, 255, PD_COMPONENTS_SMALL_CELLS + 1, 65281);
    c = pd_components_build(g);
    assert_non_null(c);
    assert_int_equal(c->label_bytes, 4);
    assert_int_equal(pd_components_bytes(c), 602u * 602u * 4u);
    /* Opening a row joins 300 single cells; still too many labels for 16
     * bits. */
    const int32_t row = singles_row(600, 255, PD_COMPONENTS_SMALL_CELLS + 1);
    for (int32_t x = 0; x < 600; x++)
        pd_grid_set(g, x, row, PD_CELL_FREE);
    assert_int_equal(pd_components_update(c, g, 0, row, 599, row), 0);
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
        cmocka_unit_test(test_build_wide_frontier),
        cmocka_unit_test(test_split_and_join),
        cmocka_unit_test(test_merge_keeps_largest),
        cmocka_unit_test(test_random_updates),
        cmocka_unit_test(test_random_updates_escaped),
        cmocka_unit_test(test_long_wall),
        cmocka_unit_test(test_clone_and_bad_arguments),
        cmocka_unit_test(test_label_width),
        cmocka_unit_test(test_label_width_after_build),
        cmocka_unit_test(test_build_narrow_equals_wide),
        cmocka_unit_test(test_lineage_crosses_255),
        cmocka_unit_test(test_lineage_crosses_65535),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
