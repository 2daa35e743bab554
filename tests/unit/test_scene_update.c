/*
 * test_scene_update.c - live cell updates: pd_scene_apply_update and
 * pd_registry_update.
 *
 * The central check: after any sequence of updates (rectangles, clustered
 * and scattered cell lists, blocking, opening, cost changes), the repaired
 * scene must equal a scene loaded fresh from the updated map text - grid,
 * clearance and every unit grid byte for byte, component labels as the same
 * partition of cells, the passable-cell count, and the passability and
 * stop bitsets of the grid and of every unit grid bit for bit (updates flip
 * bits in place, a load builds them whole). After updates on small uniform maps,
 * jump point search must agree with A* on every pair of cells of every unit
 * grid (units 1-3), since it reads those bits. Besides that: every
 * validation error, the source snapshot staying untouched, version numbers,
 * updates that change nothing, and the registry under concurrent updaters
 * and readers (labelled "threaded" for the TSan run).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "components_check.h"
#include "pd_conf.h"
#include "pd_jps.h"
#include "pd_scene.h"

/* A map held as cell values (0 blocked, 1..9 cost), written out as the ASCII
 * format so a fresh scene can be loaded from it. */
typedef struct model {
    int32_t w, h;
    uint8_t *v;
} model;

static uint64_t rng_state;

static uint32_t rng_next(void)
{
    /* xorshift64*: deterministic, so a failure reproduces. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 2685821657736338717ull) >> 32);
}

static int32_t rng_below(int32_t n)
{
    return (int32_t)(rng_next() % (uint32_t)n);
}

/* A random map: blocked_percent walls, costly_percent cells of cost 2..9
 * (0 gives a uniform-cost map), the rest cost 1. */
static model model_random_costs(int32_t w, int32_t h, int blocked_percent, int costly_percent)
{
    model m = { w, h, malloc((size_t)w * (size_t)h) };
    assert_non_null(m.v);
    for (int32_t i = 0; i < w * h; i++) {
        int r = rng_below(100);
        m.v[i] = r < blocked_percent                    ? 0
                 : r < blocked_percent + costly_percent ? (uint8_t)(2 + rng_below(8))
                                                        : 1;
    }
    return m;
}

static model model_random(int32_t w, int32_t h, int blocked_percent)
{
    return model_random_costs(w, h, blocked_percent, 10);
}

static char *model_text(const model *m)
{
    char *text = malloc((size_t)(m->w + 1) * (size_t)m->h + 1);
    assert_non_null(text);
    char *p = text;
    for (int32_t y = 0; y < m->h; y++) {
        for (int32_t x = 0; x < m->w; x++) {
            uint8_t v = m->v[y * m->w + x];
            *p++ = v == 0 ? '#' : v == 1 ? '.' : (char)('0' + v);
        }
        *p++ = '\n';
    }
    *p = '\0';
    return text;
}

/* A fresh build of the model's cells (pd_scene_from_cells: updates can
 * wall a scene up whole, which a map file would be refused for). */
static pd_scene *model_scene_search(const model *m, const uint32_t *units, size_t n_units, pd_conf_search search)
{
    pd_conf_scene cs;
    memset(&cs, 0, sizeof cs);
    snprintf(cs.name, sizeof cs.name, "upd");
    cs.cell_size = 1.0;
    memcpy(cs.unit_sizes, units, n_units * sizeof *units);
    cs.n_unit_sizes = n_units;
    cs.search = search;
    char err[512] = "";
    pd_scene *s = pd_scene_from_cells(&cs, m->w, m->h, m->v, err, sizeof err);
    if (!s)
        fail_msg("%s", err);
    return s;
}

static pd_scene *model_scene(const model *m, const uint32_t *units, size_t n_units)
{
    return model_scene_search(m, units, n_units, PD_CONF_SEARCH_DEFAULT);
}

static size_t padded_cells(const pd_grid *g)
{
    return (size_t)(g->width + 2) * (size_t)(g->height + 2);
}

/* The label width pd_components.h documents for labels below next_label:
 * 8 bits up to label 254 (255 is the escape), 16 up to 65535, else 32. */
static uint32_t rule_label_bytes(uint32_t next_label)
{
    return next_label - 1 <= 254u ? 1u : next_label - 1 <= 65535u ? 2u : 4u;
}

/* Every unit's labels are held in the width the rule gives its lineage
 * (an update widens exactly when it hands out a label past the width, and
 * never narrows), and the scene's memory report counts them at that
 * width. Fills bytes[i] with unit i's width. */
static void expect_label_widths(const pd_scene *s, uint32_t *bytes)
{
    uint64_t want = 0;
    for (size_t i = 0; i < s->n_unit_sizes; i++) {
        const pd_components *c = s->units[i].components;
        if (c->label_bytes != rule_label_bytes(c->next_label))
            fail_msg("unit %u: labels %u bytes wide, next_label %u", s->units[i].unit, c->label_bytes,
                     c->next_label);
        want += padded_cells(s->grid) * c->label_bytes;
        bytes[i] = c->label_bytes;
    }
    pd_scene_bytes b;
    pd_scene_get_bytes(s, &b);
    assert_true(b.by[PD_SCENE_LABELS] == want);
}

/* Two labellings describe the same components (components_check.h). */
static void expect_same_partition(const pd_components *a, const pd_components *b)
{
    char why[160];
    if (components_differ(a, b, why, sizeof why))
        fail_msg("%s", why);
}

/* The strongest check: s (built by updates) equals a fresh load of m. */
static void expect_equals_fresh(const pd_scene *s, const model *m)
{
    pd_scene *f = model_scene(m, s->unit_sizes, s->n_unit_sizes);
    assert_int_equal(s->grid->width, f->grid->width);
    assert_int_equal(s->grid->height, f->grid->height);
    assert_memory_equal(s->grid->cells, f->grid->cells, padded_cells(f->grid));
    assert_int_equal(s->grid->uniform_cost, f->grid->uniform_cost);
    if (memcmp(s->grid->bits, f->grid->bits, pd_grid_bits_bytes(f->grid)) != 0)
        fail_msg("grid bitsets differ from a fresh build");
    assert_true(s->passable_cells == f->passable_cells);
    assert_int_equal(s->clearance != NULL, f->clearance != NULL);
    if (f->clearance)
        assert_memory_equal(s->clearance->values, f->clearance->values, padded_cells(f->grid));
    assert_int_equal(s->n_unit_sizes, f->n_unit_sizes);
    for (size_t i = 0; i < f->n_unit_sizes; i++) {
        const pd_scene_unit *su = &s->units[i], *fu = &f->units[i];
        assert_int_equal(su->unit, fu->unit);
        if (su->unit == 1)
            assert_ptr_equal(su->grid, s->grid);
        else
            assert_ptr_not_equal(su->grid, s->grid);
        if (memcmp(su->grid->cells, fu->grid->cells, padded_cells(f->grid)) != 0)
            fail_msg("unit %u grid differs from a fresh build", su->unit);
        if (memcmp(su->grid->bits, fu->grid->bits, pd_grid_bits_bytes(f->grid)) != 0)
            fail_msg("unit %u grid bitsets differ from a fresh build", su->unit);
        assert_int_equal(su->grid->uniform_cost, fu->grid->uniform_cost);
        expect_same_partition(su->components, fu->components);
        /* A full build narrows to the smallest width the rule allows. */
        assert_int_equal(fu->components->label_bytes, components_reference_bytes(fu->grid));
    }
    pd_scene_release(f);
}

/* Mirrors an update into the model, RESTORE writing the cells of
 * `authored` (the map as loaded; may be NULL when u is no RESTORE);
 * returns how many cells change. */
static uint64_t model_apply_authored(model *m, const uint8_t *authored, const pd_scene_update *u)
{
    uint8_t v = u->op == PD_UPDATE_BLOCK ? 0 : u->op == PD_UPDATE_PASS ? 1 : u->cost;
    uint64_t changed = 0;
    size_t n = u->is_rect ? (size_t)(u->rect_max.x - u->rect_min.x + 1) * (size_t)(u->rect_max.y - u->rect_min.y + 1)
                          : u->n_cells;
    for (size_t i = 0; i < n; i++) {
        int32_t x = u->is_rect ? u->rect_min.x + (int32_t)(i % (size_t)(u->rect_max.x - u->rect_min.x + 1))
                               : u->cells[i].x;
        int32_t y = u->is_rect ? u->rect_min.y + (int32_t)(i / (size_t)(u->rect_max.x - u->rect_min.x + 1))
                               : u->cells[i].y;
        uint8_t *c = &m->v[y * m->w + x];
        uint8_t to = u->op == PD_UPDATE_RESTORE ? authored[y * m->w + x] : v;
        changed += *c != to;
        *c = to;
    }
    return changed;
}

static uint64_t model_apply(model *m, const pd_scene_update *u)
{
    return model_apply_authored(m, NULL, u);
}

/* Copies of everything a snapshot holds, to prove an update left it alone. */
typedef struct snapshot {
    uint8_t *grid, *clearance, *unit_grids[PD_CONF_MAX_UNIT_SIZES];
    uint32_t *labels[PD_CONF_MAX_UNIT_SIZES];
    uint64_t version, passable;
} snapshot;

static void *dup_bytes(const void *p, size_t n)
{
    void *c = malloc(n);
    assert_non_null(c);
    memcpy(c, p, n);
    return c;
}

/* The labels of c at every padded index, whatever their width. */
static uint32_t *labels_copy(const pd_components *c, size_t n)
{
    uint32_t *v = malloc(n * sizeof *v);
    assert_non_null(v);
    for (size_t i = 0; i < n; i++)
        v[i] = pd_components_at(c, i);
    return v;
}

static snapshot snapshot_take(const pd_scene *s)
{
    snapshot t;
    memset(&t, 0, sizeof t);
    size_t n = padded_cells(s->grid);
    t.grid = dup_bytes(s->grid->cells, n);
    if (s->clearance)
        t.clearance = dup_bytes(s->clearance->values, n);
    for (size_t i = 0; i < s->n_unit_sizes; i++) {
        t.unit_grids[i] = dup_bytes(s->units[i].grid->cells, n);
        t.labels[i] = labels_copy(s->units[i].components, n);
    }
    t.version = s->version;
    t.passable = s->passable_cells;
    return t;
}

static void snapshot_check_and_free(snapshot *t, const pd_scene *s)
{
    size_t n = padded_cells(s->grid);
    assert_memory_equal(t->grid, s->grid->cells, n);
    if (s->clearance)
        assert_memory_equal(t->clearance, s->clearance->values, n);
    for (size_t i = 0; i < s->n_unit_sizes; i++) {
        assert_memory_equal(t->unit_grids[i], s->units[i].grid->cells, n);
        uint32_t *now = labels_copy(s->units[i].components, n);
        assert_memory_equal(t->labels[i], now, n * sizeof(uint32_t));
        free(now);
        free(t->unit_grids[i]);
        free(t->labels[i]);
    }
    assert_true(t->version == s->version);
    assert_true(t->passable == s->passable_cells);
    free(t->grid);
    free(t->clearance);
}

static pd_scene_update rect_update(pd_update_op op, uint8_t cost, int32_t x0, int32_t y0, int32_t x1,
                                   int32_t y1)
{
    pd_scene_update u;
    memset(&u, 0, sizeof u);
    u.op = op;
    u.cost = cost;
    u.is_rect = 1;
    u.rect_min = (pd_point){ x0, y0 };
    u.rect_max = (pd_point){ x1, y1 };
    return u;
}

static pd_scene_update list_update(pd_update_op op, uint8_t cost, const pd_point *cells, size_t n)
{
    pd_scene_update u;
    memset(&u, 0, sizeof u);
    u.op = op;
    u.cost = cost;
    u.cells = cells;
    u.n_cells = n;
    return u;
}

/* Applies u to *s, checks the result against the model (RESTORE reading
 * `authored`, which may be NULL when u is no RESTORE) and a fresh build,
 * and moves *s on to the new version. */
static void apply_and_check_authored(pd_scene **s, model *m, const uint8_t *authored, const pd_scene_update *u)
{
    uint64_t want_changed = model_apply_authored(m, authored, u);
    snapshot before = snapshot_take(*s);
    pd_scene *next = (pd_scene *)&next;
    pd_scene_update_result res;
    memset(&res, 0xEE, sizeof res);
    assert_int_equal(pd_scene_apply_update(*s, u, &next, &res), PD_OK);
    snapshot_check_and_free(&before, *s);
    assert_true(res.cells_changed == want_changed);
    if (want_changed == 0) {
        assert_null(next);
        assert_true(res.version == (*s)->version);
        return;
    }
    assert_non_null(next);
    assert_true(res.version == (*s)->version + 1);
    assert_true(next->version == res.version);
    assert_int_equal(atomic_load(&next->refs), 1);
    assert_string_equal(next->name, (*s)->name);
    expect_equals_fresh(next, m);
    pd_scene_release(*s);
    *s = next;
}

static void apply_and_check(pd_scene **s, model *m, const pd_scene_update *u)
{
    apply_and_check_authored(s, m, NULL, u);
}

static void test_unit_data_after_load(void **state)
{
    (void)state;
    rng_state = 0x9E3779B97F4A7C15ull;
    model m = model_random(30, 20, 25);
    /* The most unit sizes a scene may list, up to the largest allowed. */
    static const uint32_t units[] = { 1, 2, 3, 4, 6, 9, 13, 16 };
    pd_scene *s = model_scene(&m, units, 8);
    assert_non_null(s->clearance);
    uint64_t passable = 0;
    for (int32_t i = 0; i < m.w * m.h; i++)
        passable += m.v[i] != 0;
    assert_true(s->passable_cells == passable);
    for (size_t i = 0; i < 8; i++) {
        const pd_scene_unit *u = pd_scene_unit_for(s, units[i]);
        assert_ptr_equal(u, &s->units[i]);
        assert_int_equal(u->unit, units[i]);
        assert_non_null(u->components);
        /* A unit fits at an anchor when its whole footprint is open; its
         * cost is the dearest cell under it. Checked by brute force. */
        int32_t k = (int32_t)units[i];
        for (int32_t y = 0; y < m.h; y++) {
            for (int32_t x = 0; x < m.w; x++) {
                uint8_t want = 0;
                int fits = x + k <= m.w && y + k <= m.h;
                for (int32_t dy = 0; fits && dy < k; dy++) {
                    for (int32_t dx = 0; fits && dx < k; dx++) {
                        uint8_t c = m.v[(y + dy) * m.w + x + dx];
                        fits = c != 0;
                        if (c > want)
                            want = c;
                    }
                }
                if (pd_grid_get(u->grid, x, y) != (fits ? want : 0))
                    fail_msg("unit %d at (%d, %d): %u, want %u", k, x, y, pd_grid_get(u->grid, x, y),
                             fits ? want : 0);
                /* Labels exist exactly on cells where the unit fits. */
                assert_int_equal(pd_components_label(u->components, (pd_point){ x, y }) != 0, fits);
            }
        }
    }
    assert_ptr_equal(s->units[0].grid, s->grid);
    assert_null(pd_scene_unit_for(s, 5));
    assert_null(pd_scene_unit_for(s, 0));
    assert_null(pd_scene_unit_for(s, 17));
    pd_scene_release(s);

    /* Unit 1 alone needs no clearance map. */
    static const uint32_t one[] = { 1 };
    s = model_scene(&m, one, 1);
    assert_null(s->clearance);
    assert_ptr_equal(pd_scene_unit_for(s, 1)->grid, s->grid);
    assert_null(pd_scene_unit_for(s, 2));
    pd_scene_release(s);
    free(m.v);
}

static void test_validation_errors(void **state)
{
    (void)state;
    rng_state = 42;
    model m = model_random(20, 10, 20);
    static const uint32_t units[] = { 1, 2 };
    pd_scene *s = model_scene(&m, units, 2);
    snapshot before = snapshot_take(s);
    pd_scene_update_result res;
    pd_scene *out;
    static const pd_point ok_cell[] = { { 3, 3 } };
    struct {
        pd_scene_update u;
        pd_status want;
    } cases[] = {
        { rect_update((pd_update_op)4, 0, 0, 0, 1, 1), PD_INVALID_ARGUMENT },
        { rect_update((pd_update_op)-1, 0, 0, 0, 1, 1), PD_INVALID_ARGUMENT },
        { rect_update(PD_UPDATE_COST, 0, 0, 0, 1, 1), PD_INVALID_ARGUMENT },
        { list_update(PD_UPDATE_COST, 0, ok_cell, 1), PD_INVALID_ARGUMENT },
        { rect_update(PD_UPDATE_BLOCK, 0, 5, 0, 4, 1), PD_INVALID_ARGUMENT },
        { rect_update(PD_UPDATE_BLOCK, 0, 0, 5, 1, 4), PD_INVALID_ARGUMENT },
        { rect_update(PD_UPDATE_BLOCK, 0, -1, 0, 1, 1), PD_OUT_OF_BOUNDS },
        { rect_update(PD_UPDATE_BLOCK, 0, 0, -1, 1, 1), PD_OUT_OF_BOUNDS },
        { rect_update(PD_UPDATE_BLOCK, 0, 0, 0, 20, 1), PD_OUT_OF_BOUNDS },
        { rect_update(PD_UPDATE_BLOCK, 0, 0, 0, 1, 10), PD_OUT_OF_BOUNDS },
        { rect_update(PD_UPDATE_BLOCK, 0, 20, 10, 20, 10), PD_OUT_OF_BOUNDS },
        { list_update(PD_UPDATE_BLOCK, 0, ok_cell, 0), PD_INVALID_ARGUMENT },
        { list_update(PD_UPDATE_BLOCK, 0, NULL, 1), PD_INVALID_ARGUMENT },
        /* The count is checked before a single cell is read. */
        { list_update(PD_UPDATE_BLOCK, 0, ok_cell, (size_t)PD_SCENE_MAX_UPDATE_CELLS + 1), PD_INVALID_ARGUMENT },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        out = (pd_scene *)&out;
        memset(&res, 0xEE, sizeof res);
        pd_status st = pd_scene_apply_update(s, &cases[i].u, &out, &res);
        if (st != cases[i].want)
            fail_msg("case %zu: %s, want %s", i, pd_status_name(st), pd_status_name(cases[i].want));
        assert_null(out);
        assert_true(res.cells_changed == 0);
    }
    /* Bad cells anywhere in a list: the update is refused whole. */
    static const pd_point bad_lists[][3] = {
        { { 3, 3 }, { -1, 0 }, { 4, 4 } },
        { { 3, 3 }, { 4, 4 }, { 20, 0 } },
        { { 0, 10 }, { 3, 3 }, { 4, 4 } },
        { { 3, 3 }, { 0, -7 }, { 4, 4 } },
    };
    for (size_t i = 0; i < sizeof bad_lists / sizeof bad_lists[0]; i++) {
        pd_scene_update u = list_update(PD_UPDATE_BLOCK, 0, bad_lists[i], 3);
        out = (pd_scene *)&out;
        assert_int_equal(pd_scene_apply_update(s, &u, &out, &res), PD_OUT_OF_BOUNDS);
        assert_null(out);
    }
    pd_scene_update good = list_update(PD_UPDATE_BLOCK, 0, ok_cell, 1);
    assert_int_equal(pd_scene_apply_update(NULL, &good, &out, &res), PD_INVALID_ARGUMENT);
    assert_int_equal(pd_scene_apply_update(s, NULL, &out, &res), PD_INVALID_ARGUMENT);
    assert_int_equal(pd_scene_apply_update(s, &good, NULL, &res), PD_INVALID_ARGUMENT);
    snapshot_check_and_free(&before, s);
    pd_scene_release(s);
    free(m.v);

    /* A rectangle of more than PD_SCENE_MAX_UPDATE_CELLS cells is refused
     * even though it lies inside the grid. */
    m = (model){ 1025, 1024, malloc(1025u * 1024u) };
    assert_non_null(m.v);
    memset(m.v, 1, 1025u * 1024u);
    s = model_scene(&m, units, 1);
    pd_scene_update big = rect_update(PD_UPDATE_BLOCK, 0, 0, 0, 1024, 1023);
    out = (pd_scene *)&out;
    assert_int_equal(pd_scene_apply_update(s, &big, &out, &res), PD_INVALID_ARGUMENT);
    assert_null(out);
    /* Exactly the limit is fine. */
    big = rect_update(PD_UPDATE_BLOCK, 0, 1, 0, 1024, 1023);
    assert_int_equal(pd_scene_apply_update(s, &big, &out, &res), PD_OK);
    assert_non_null(out);
    assert_true(res.cells_changed == PD_SCENE_MAX_UPDATE_CELLS);
    assert_true(out->passable_cells == 1024);
    pd_scene_release(out);
    pd_scene_release(s);
    free(m.v);
}

static void test_single_updates_match_fresh_build(void **state)
{
    (void)state;
    rng_state = 7;
    model m = model_random(40, 30, 25);
    static const uint32_t units[] = { 1, 2, 3, 5 };
    pd_scene *s = model_scene(&m, units, 4);
    assert_true(s->version == 1);

    /* Close a corridor-sized rectangle, reopen part of it, give it a cost. */
    pd_scene_update u = rect_update(PD_UPDATE_BLOCK, 0, 10, 0, 12, 29);
    apply_and_check(&s, &m, &u);
    assert_true(s->version == 2);
    u = rect_update(PD_UPDATE_PASS, 0, 10, 14, 12, 16);
    apply_and_check(&s, &m, &u);
    u = rect_update(PD_UPDATE_COST, 6, 0, 0, 39, 3);
    apply_and_check(&s, &m, &u);
    /* Cost 1 through COST is the same as PASS; on a costly area it drops
     * the costs back to 1. */
    u = rect_update(PD_UPDATE_COST, 1, 0, 0, 39, 3);
    apply_and_check(&s, &m, &u);
    /* One cell, at each corner (clearance and unit footprints are clipped
     * there). */
    static const pd_point corners[] = { { 0, 0 }, { 39, 0 }, { 0, 29 }, { 39, 29 } };
    for (size_t i = 0; i < 4; i++) {
        u = list_update(PD_UPDATE_BLOCK, 0, &corners[i], 1);
        apply_and_check(&s, &m, &u);
        u = list_update(PD_UPDATE_COST, 9, &corners[i], 1);
        apply_and_check(&s, &m, &u);
    }
    /* Everything blocked, then everything open again. */
    u = rect_update(PD_UPDATE_BLOCK, 0, 0, 0, 39, 29);
    apply_and_check(&s, &m, &u);
    assert_true(s->passable_cells == 0);
    u = rect_update(PD_UPDATE_PASS, 0, 0, 0, 39, 29);
    apply_and_check(&s, &m, &u);
    assert_true(s->passable_cells == 40 * 30);
    assert_int_equal(s->grid->uniform_cost, 1);
    pd_scene_release(s);
    free(m.v);
}

/* Random updates of every op (BLOCK, PASS, COST 1..9, RESTORE) as
 * rectangles, clustered lists and scattered lists, each result compared
 * with a fresh build of every derived grid, for unit sizes from 1 up to
 * PD_UNIT_SIZE_MAX (footprints wider than the changed boxes, and as wide
 * as the clearance cap). Returns how many anchors of the largest unit were
 * open after the last update, so a caller can tell that unit took part. */
static uint64_t random_updates_match_fresh_build(model *mp, uint64_t seed)
{
    model m = *mp;
    rng_state = seed;
    uint8_t *authored = dup_bytes(m.v, (size_t)m.w * (size_t)m.h);
    static const uint32_t units[] = { 1, 2, 3, 4, 5, 7, 11, PD_UNIT_SIZE_MAX };
    pd_scene *s = model_scene(&m, units, sizeof units / sizeof *units);
    pd_point cells[64];
    for (int step = 0; step < 60; step++) {
        pd_update_op op = (pd_update_op)rng_below(4);
        uint8_t cost = (uint8_t)(1 + rng_below(9));
        pd_scene_update u;
        switch (rng_below(3)) {
        case 0: {
            int32_t x0 = rng_below(m.w), y0 = rng_below(m.h);
            int32_t x1 = x0 + rng_below(12), y1 = y0 + rng_below(12);
            u = rect_update(op, cost, x0, y0, x1 < m.w ? x1 : m.w - 1, y1 < m.h ? y1 : m.h - 1);
            break;
        }
        case 1: {
            /* Clustered: repaired as one box. */
            size_t n = 1 + (size_t)rng_below(20);
            int32_t cx = rng_below(m.w - 8), cy = rng_below(m.h - 8);
            for (size_t i = 0; i < n; i++)
                cells[i] = (pd_point){ cx + rng_below(8), cy + rng_below(8) };
            u = list_update(op, cost, cells, n);
            break;
        }
        default: {
            /* Scattered over the whole map: repaired cell by cell. Duplicates
             * happen and must count once. */
            size_t n = 2 + (size_t)rng_below(10);
            for (size_t i = 0; i < n; i++)
                cells[i] = (pd_point){ rng_below(m.w), rng_below(m.h) };
            cells[n] = cells[0];
            u = list_update(op, cost, cells, n + 1);
            break;
        }
        }
        uint64_t version = s->version;
        apply_and_check_authored(&s, &m, authored, &u);
        assert_true(s->version == version || s->version == version + 1);
    }
    const pd_grid *largest = s->units[s->n_unit_sizes - 1].grid;
    uint64_t open = 0;
    for (int32_t y = 0; y < largest->height; y++)
        for (int32_t x = 0; x < largest->width; x++)
            open += pd_grid_get(largest, x, y) != PD_CELL_BLOCKED;
    pd_scene_release(s);
    free(authored);
    free(m.v);
    return open;
}

static void test_random_updates_match_fresh_build_weighted(void **state)
{
    (void)state;
    rng_state = 0xC0FFEEull;
    /* Large enough that a handful of scattered cells spans more than the
     * box threshold, so both repair strategies run. */
    model m = model_random(120, 90, 22);
    random_updates_match_fresh_build(&m, 0xC0FFEEull);
    /* Walls at 22% leave almost no anchor open for units of 5 and more:
     * with 1% a good share of them fits, up to unit 16. */
    m = model_random(120, 90, 1);
    assert_true(random_updates_match_fresh_build(&m, 0xBEEFull) > 0);
}

static void test_random_updates_match_fresh_build_uniform(void **state)
{
    (void)state;
    /* Starts with every open cell at cost 1, so the first costly update
     * turns the scene weighted mid-update. */
    for (uint64_t seed = 1; seed <= 4; seed++) {
        rng_state = seed * 0x9E3779B97F4A7C15ull;
        /* The last seed on a map with few walls, so the large units fit. */
        model m = model_random_costs(120, 90, seed == 4 ? 1 : 22, 0);
        uint64_t open = random_updates_match_fresh_build(&m, seed);
        if (seed == 4)
            assert_true(open > 0);
    }
}

/* JPS against A* on every ordered pair of open cells of every uniform unit
 * grid of s, 8- and 4-connected: same status, same cost. */
static void expect_jps_matches_astar(const pd_scene *s, pd_jps_ctx *jps, pd_search_ctx *astar)
{
    for (size_t i = 0; i < s->n_unit_sizes; i++) {
        const pd_grid *g = s->units[i].grid;
        if (!g->uniform_cost)
            continue;
        for (int32_t a = 0; a < g->width * g->height; a++) {
            pd_point from = { a % g->width, a / g->width };
            if (pd_grid_get(g, from.x, from.y) == PD_CELL_BLOCKED)
                continue;
            for (int32_t b = 0; b < g->width * g->height; b++) {
                pd_point to = { b % g->width, b / g->width };
                if (pd_grid_get(g, to.x, to.y) == PD_CELL_BLOCKED)
                    continue;
                static const pd_connectivity conns[] = { PD_CONNECT_8, PD_CONNECT_4 };
                for (size_t c = 0; c < sizeof conns / sizeof *conns; c++) {
                    const pd_connectivity conn = conns[c];
                    pd_search_params p = { .start = from, .goal = to, .connectivity = conn };
                    pd_search_metrics ma, mj;
                    pd_status sa = pd_search_astar(astar, g, &p, NULL, 0, &ma);
                    pd_status sj = pd_search_jps(jps, g, &p, NULL, 0, &mj);
                    if (sa != sj || (sa == PD_OK && fabs(ma.cost - mj.cost) > 1e-9))
                        fail_msg("unit %u, %d-connected (%d,%d)->(%d,%d): A* %s %.9f, JPS %s %.9f",
                                 s->units[i].unit, conn, from.x, from.y, to.x, to.y, pd_status_name(sa), ma.cost,
                                 pd_status_name(sj), mj.cost);
                }
            }
        }
    }
}

/* Jump point search reads the bitsets that updates flip in place: after
 * every update of a small uniform map (blocking and opening rectangles and
 * cell lists, repaired as boxes and cell by cell), it must still agree with
 * A* on every pair of cells, 8- and 4-connected, for units 1, 2 and 3. */
static void test_jps_after_updates_matches_astar(void **state)
{
    (void)state;
    pd_jps_ctx *jps = pd_jps_ctx_create();
    pd_search_ctx *astar = pd_search_ctx_create();
    assert_non_null(jps);
    assert_non_null(astar);
    static const uint32_t units[] = { 1, 2, 3 };
    for (uint64_t seed = 1; seed <= 3; seed++) {
        rng_state = seed * 0xD1B54A32D192ED03ull;
        model m = model_random_costs(14, 11, 18, 0);
        pd_scene *s = model_scene(&m, units, 3);
        expect_jps_matches_astar(s, jps, astar);
        pd_point cells[8];
        for (int step = 0; step < 16; step++) {
            pd_update_op op = rng_below(2) ? PD_UPDATE_BLOCK : PD_UPDATE_PASS;
            pd_scene_update u;
            if (rng_below(2)) {
                int32_t x0 = rng_below(m.w), y0 = rng_below(m.h);
                int32_t x1 = x0 + rng_below(4), y1 = y0 + rng_below(4);
                u = rect_update(op, 0, x0, y0, x1 < m.w ? x1 : m.w - 1, y1 < m.h ? y1 : m.h - 1);
            } else {
                size_t n = 1 + (size_t)rng_below(8);
                for (size_t i = 0; i < n; i++)
                    cells[i] = (pd_point){ rng_below(m.w), rng_below(m.h) };
                u = list_update(op, 0, cells, n);
            }
            apply_and_check(&s, &m, &u);
            expect_jps_matches_astar(s, jps, astar);
        }
        pd_scene_release(s);
        free(m.v);
    }
    pd_jps_ctx_destroy(jps);
    pd_search_ctx_destroy(astar);
}

/* The scene's "search" config per unit size: forced picks stay through
 * updates; "auto" measures (JPS or A*, never "default"), picks A* where JPS
 * cannot serve (a weighted map), and measures again only once updates have
 * changed more than 1/PD_SCENE_REPICK_FRACTION of the passable cells. */
static void test_search_pick(void **state)
{
    (void)state;
    static const uint32_t units[] = { 1, 2, 3 };
    rng_state = 99;
    model m = model_random_costs(64, 48, 15, 0);
    static const struct {
        pd_conf_search search;
        pd_scene_pick pick;
    } forced[] = {
        { PD_CONF_SEARCH_DEFAULT, PD_SCENE_PICK_DEFAULT },
        { PD_CONF_SEARCH_JPS, PD_SCENE_PICK_JPS },
        { PD_CONF_SEARCH_ASTAR, PD_SCENE_PICK_ASTAR },
    };
    for (size_t f = 0; f < sizeof forced / sizeof *forced; f++) {
        pd_scene *s = model_scene_search(&m, units, 3, forced[f].search);
        pd_scene_update u = rect_update(PD_UPDATE_BLOCK, 0, 0, 0, 40, 40);
        pd_scene *n = NULL;
        assert_int_equal(pd_scene_apply_update(s, &u, &n, NULL), PD_OK);
        for (size_t i = 0; i < 3; i++) {
            assert_int_equal(s->units[i].pick, forced[f].pick);
            assert_int_equal(n->units[i].pick, forced[f].pick);
        }
        assert_string_equal(pd_scene_search_name(n->search),
                            forced[f].search == PD_CONF_SEARCH_JPS     ? "jps"
                            : forced[f].search == PD_CONF_SEARCH_ASTAR ? "astar"
                                                                       : "default");
        pd_scene_release(n);
        pd_scene_release(s);
    }

    pd_scene *s = model_scene_search(&m, units, 3, PD_CONF_SEARCH_AUTO);
    for (size_t i = 0; i < 3; i++)
        assert_true(s->units[i].pick == PD_SCENE_PICK_JPS || s->units[i].pick == PD_SCENE_PICK_ASTAR);
    assert_true(s->changed_since_pick == 0);
    /* A small change is counted, not measured. */
    pd_scene_update small = rect_update(PD_UPDATE_BLOCK, 0, 10, 10, 11, 11);
    uint64_t small_cells = model_apply(&m, &small);
    assert_true(small_cells > 0 && small_cells * PD_SCENE_REPICK_FRACTION <= s->passable_cells);
    pd_scene *n = NULL;
    assert_int_equal(pd_scene_apply_update(s, &small, &n, NULL), PD_OK);
    assert_true(n->changed_since_pick == small_cells);
    pd_scene_release(s);
    s = n;
    /* A large one measures again and starts counting anew. */
    pd_scene_update large = rect_update(PD_UPDATE_BLOCK, 0, 0, 20, 63, 40);
    uint64_t large_cells = model_apply(&m, &large);
    assert_true((small_cells + large_cells) * PD_SCENE_REPICK_FRACTION > s->passable_cells);
    assert_int_equal(pd_scene_apply_update(s, &large, &n, NULL), PD_OK);
    assert_true(n->changed_since_pick == 0);
    for (size_t i = 0; i < 3; i++)
        assert_true(n->units[i].pick == PD_SCENE_PICK_JPS || n->units[i].pick == PD_SCENE_PICK_ASTAR);
    pd_scene_release(n);
    pd_scene_release(s);
    free(m.v);

    /* Weighted: jump point search cannot serve, so "auto" picks A*. */
    rng_state = 7;
    m = model_random(40, 30, 15);
    s = model_scene_search(&m, units, 3, PD_CONF_SEARCH_AUTO);
    for (size_t i = 0; i < 3; i++) {
        assert_false(s->units[i].grid->uniform_cost);
        assert_int_equal(s->units[i].pick, PD_SCENE_PICK_ASTAR);
    }
    pd_scene_release(s);
    free(m.v);
}

/* Regression: the first COST above 1 on a uniform scene must reach the unit
 * grids of sizes 2 and up (their repair used to run while the scene still
 * said it was uniform, so they kept cost 1). Every update shape: a
 * rectangle, a clustered list and a scattered list (repaired cell by cell). */
static void test_first_cost_on_uniform_scene_reaches_unit_grids(void **state)
{
    (void)state;
    static const uint32_t units[] = { 1, 2, 3 };
    for (int shape = 0; shape < 3; shape++) {
        rng_state = 99 + (uint64_t)shape;
        model m = model_random_costs(120, 90, 0, 0);
        pd_scene *s = model_scene(&m, units, 3);
        assert_int_equal(s->grid->uniform_cost, 1);
        static const pd_point clustered[] = { { 10, 10 }, { 11, 10 }, { 10, 11 } };
        static const pd_point scattered[] = { { 2, 3 }, { 110, 80 }, { 60, 5 }, { 7, 85 } };
        pd_scene_update u = shape == 0   ? rect_update(PD_UPDATE_COST, 7, 20, 20, 23, 24)
                            : shape == 1 ? list_update(PD_UPDATE_COST, 7, clustered, 3)
                                         : list_update(PD_UPDATE_COST, 7, scattered, 4);
        apply_and_check(&s, &m, &u);
        assert_int_equal(s->grid->uniform_cost, 0);
        for (size_t i = 0; i < s->n_unit_sizes; i++)
            assert_int_equal(s->units[i].grid->uniform_cost, 0);
        pd_scene_release(s);
        free(m.v);
    }
}

static void test_update_that_changes_nothing(void **state)
{
    (void)state;
    rng_state = 99;
    model m = model_random(16, 16, 30);
    static const uint32_t units[] = { 1, 2 };
    pd_scene *s = model_scene(&m, units, 2);
    /* Find a blocked cell and an open one. */
    pd_point blocked = { -1, -1 }, open = { -1, -1 };
    for (int32_t i = 0; i < 256; i++) {
        pd_point p = { i % 16, i / 16 };
        if (m.v[i] == 0)
            blocked = p;
        else if (m.v[i] == 1)
            open = p;
    }
    assert_true(blocked.x >= 0 && open.x >= 0);
    pd_scene_update_result res;
    pd_scene *out = (pd_scene *)&out;
    pd_point twice[] = { blocked, blocked };
    pd_scene_update u = list_update(PD_UPDATE_BLOCK, 0, twice, 2);
    assert_int_equal(pd_scene_apply_update(s, &u, &out, &res), PD_OK);
    assert_null(out);
    assert_true(res.version == 1 && res.cells_changed == 0);
    u = list_update(PD_UPDATE_PASS, 0, &open, 1);
    assert_int_equal(pd_scene_apply_update(s, &u, &out, &res), PD_OK);
    assert_null(out);
    u = rect_update(PD_UPDATE_COST, 1, open.x, open.y, open.x, open.y);
    assert_int_equal(pd_scene_apply_update(s, &u, &out, &res), PD_OK);
    assert_null(out);
    /* res may be NULL. */
    assert_int_equal(pd_scene_apply_update(s, &u, &out, NULL), PD_OK);
    /* The same cell listed twice changes once. */
    pd_point open_twice[] = { open, open };
    u = list_update(PD_UPDATE_BLOCK, 0, open_twice, 2);
    assert_int_equal(pd_scene_apply_update(s, &u, &out, &res), PD_OK);
    assert_non_null(out);
    assert_true(res.cells_changed == 1 && res.version == 2);
    assert_true(out->passable_cells == s->passable_cells - 1);
    pd_scene_release(out);
    pd_scene_release(s);
    free(m.v);
}

/* Regression (fuzz_scene_update, regressions/fuzz_scene_update/
 * restore_as_one_op): RESTORE sent as the only operation through
 * pd_scene_apply_update wrote cost-1 cells instead of the authored ones, so
 * restoring untouched cells "changed" them. It must put back the authored
 * cells, costs included, and change nothing that is already authored. */
static void test_restore_as_one_operation(void **state)
{
    (void)state;
    rng_state = 7;
    model m = model_random_costs(20, 16, 20, 9);
    static const uint32_t units[] = { 1, 2 };
    pd_scene *s = model_scene(&m, units, 2);
    uint8_t authored[20 * 16];
    memcpy(authored, m.v, sizeof authored);
    pd_scene_update_result res;
    pd_scene *out = (pd_scene *)&out;
    pd_scene_update u = rect_update(PD_UPDATE_RESTORE, 0, 0, 0, 19, 15);
    assert_int_equal(pd_scene_apply_update(s, &u, &out, &res), PD_OK);
    assert_null(out);
    assert_true(res.cells_changed == 0 && res.version == s->version);
    /* Block everything, then restore a rectangle: its cells are authored again. */
    pd_scene_update block = rect_update(PD_UPDATE_BLOCK, 0, 0, 0, 19, 15);
    apply_and_check(&s, &m, &block);
    pd_scene_update restore = rect_update(PD_UPDATE_RESTORE, 0, 2, 3, 12, 9);
    assert_int_equal(pd_scene_apply_update(s, &restore, &out, &res), PD_OK);
    assert_non_null(out);
    for (int32_t y = 0; y < 16; y++)
        for (int32_t x = 0; x < 20; x++) {
            int inside = x >= 2 && x <= 12 && y >= 3 && y <= 9;
            uint8_t want = inside ? authored[y * 20 + x] : PD_CELL_BLOCKED;
            assert_int_equal(pd_grid_get(out->grid, x, y), want);
        }
    pd_scene_release(out);
    pd_scene_release(s);
    free(m.v);
}

static const char *conf_two =
    "{\"scenes\": ["
    " {\"name\": \"alpha\", \"map\": \"scene_small.txt\", \"format\": \"ascii\", \"unit_sizes\": [1, 2]},"
    " {\"name\": \"beta\", \"map\": \"scene_alt.txt\", \"format\": \"ascii\"}"
    "]}";

static pd_registry *registry_with(const char *json)
{
    pd_conf c;
    char err[256] = "";
    int rc = pd_conf_load_buffer(json, strlen(json), "test", PD_TEST_DATA_DIR, &c, err, sizeof err);
    if (rc != 0)
        fail_msg("%s", err);
    pd_registry *r = pd_registry_create();
    assert_non_null(r);
    rc = pd_registry_load(r, &c, err, sizeof err);
    if (rc != 0)
        fail_msg("%s", err);
    pd_conf_free(&c);
    return r;
}

static void test_registry_update(void **state)
{
    (void)state;
    pd_registry *r = registry_with(conf_two);
    pd_scene_update_result res;
    static const pd_point cell[] = { { 0, 0 } };
    pd_scene_update u = list_update(PD_UPDATE_BLOCK, 0, cell, 1);
    assert_int_equal(pd_registry_update(r, "gamma", &u, &res), PD_UNKNOWN_SCENE);
    assert_int_equal(pd_registry_update(r, NULL, &u, &res), PD_UNKNOWN_SCENE);
    assert_int_equal(pd_registry_update(r, "alpha", NULL, &res), PD_INVALID_ARGUMENT);

    pd_scene *held = pd_registry_acquire(r, "alpha");
    assert_int_not_equal(pd_grid_get(held->grid, 0, 0), PD_CELL_BLOCKED);
    assert_int_equal(pd_registry_update(r, "alpha", &u, &res), PD_OK);
    assert_true(res.version == 2 && res.cells_changed == 1);
    pd_scene *now = pd_registry_acquire(r, "alpha");
    assert_ptr_not_equal(now, held);
    assert_true(now->version == 2);
    assert_int_equal(pd_grid_get(now->grid, 0, 0), PD_CELL_BLOCKED);
    assert_true(now->passable_cells == held->passable_cells - 1);
    /* The held snapshot is intact; a scene this small keeps no spare for
     * the next update (PD_SCENE_SPARE_MIN_CELLS), so ours is its only
     * reference. */
    assert_int_not_equal(pd_grid_get(held->grid, 0, 0), PD_CELL_BLOCKED);
    assert_int_equal(atomic_load(&held->refs), 1);
    pd_scene_release(held);
    pd_scene_release(now);

    /* A refused or empty update publishes nothing. */
    u = list_update(PD_UPDATE_BLOCK, 0, cell, 0);
    assert_int_equal(pd_registry_update(r, "alpha", &u, &res), PD_INVALID_ARGUMENT);
    u = list_update(PD_UPDATE_BLOCK, 0, cell, 1);
    assert_int_equal(pd_registry_update(r, "alpha", &u, &res), PD_OK);
    assert_true(res.version == 2 && res.cells_changed == 0);
    /* res may be NULL. */
    u = list_update(PD_UPDATE_PASS, 0, cell, 1);
    assert_int_equal(pd_registry_update(r, "alpha", &u, NULL), PD_OK);

    /* The set stays sorted and whole; beta is untouched. */
    pd_scene **list;
    size_t n = pd_registry_list(r, &list);
    assert_int_equal(n, 2);
    assert_string_equal(list[0]->name, "alpha");
    assert_true(list[0]->version == 3);
    assert_string_equal(list[1]->name, "beta");
    assert_true(list[1]->version == 1);
    pd_registry_release_list(list, n);

    /* A reload after updates carries the version on. */
    pd_conf c;
    char err[256];
    assert_int_equal(pd_conf_load_buffer(conf_two, strlen(conf_two), "test", PD_TEST_DATA_DIR, &c, err,
                                         sizeof err), 0);
    assert_int_equal(pd_registry_load(r, &c, err, sizeof err), 0);
    pd_conf_free(&c);
    now = pd_registry_acquire(r, "alpha");
    assert_true(now->version == 4);
    pd_scene_release(now);
    pd_registry_destroy(r);
}

/* A registry serving the model as scene "m" with the given unit sizes. */
static pd_registry *registry_from_model(const model *m, const char *units_json)
{
    char *text = model_text(m);
    char path[512];
    snprintf(path, sizeof path, "%s/test_scene_update_reg_%ld.txt", PD_BINARY_DIR, (long)getpid());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
    free(text);
    char json[1024];
    snprintf(json, sizeof json,
             "{\"scenes\": [{\"name\": \"m\", \"map\": \"%s\", \"format\": \"ascii\", \"unit_sizes\": %s}]}",
             path, units_json);
    pd_registry *r = registry_with(json);
    remove(path);
    return r;
}

/* The registry writes a new version into the snapshot the previous update
 * replaced, once no one holds it: the result must still equal a fresh
 * build, and a snapshot a reader holds must never be written. */
static void test_registry_reuses_retired_snapshots(void **state)
{
    (void)state;
    rng_state = 2024;
    model m = model_random(50, 40, 22);
    pd_registry *r = registry_from_model(&m, "[1, 2, 3]");
    pd_registry_set_spare_min_cells(r, 0); /* a scene this small keeps a spare too */
    pd_scene *v1 = pd_registry_acquire(r, "m");
    const pd_scene *v1_address = v1;
    pd_scene_release(v1);

    pd_point cells[16];
    pd_scene *held = NULL;
    snapshot held_copy;
    for (int step = 0; step < 30; step++) {
        size_t n = 1 + (size_t)rng_below(16);
        for (size_t i = 0; i < n; i++)
            cells[i] = (pd_point){ rng_below(m.w), rng_below(m.h) };
        pd_update_op op = step % 2 ? PD_UPDATE_PASS : PD_UPDATE_BLOCK;
        pd_scene_update u = step % 3 ? list_update(op, 0, cells, n)
                                     : rect_update(PD_UPDATE_COST, (uint8_t)(2 + step % 8), cells[0].x,
                                                   cells[0].y, cells[0].x + (cells[0].x < m.w - 3 ? 2 : 0),
                                                   cells[0].y + (cells[0].y < m.h - 3 ? 2 : 0));
        uint64_t want_changed = model_apply(&m, &u);
        pd_scene_update_result res;
        assert_int_equal(pd_registry_update(r, "m", &u, &res), PD_OK);
        assert_true(res.cells_changed == want_changed);
        pd_scene *now = pd_registry_acquire(r, "m");
        assert_true(now->version == res.version);
        expect_equals_fresh(now, &m);
        if (step == 1) {
            /* Version 3 went into version 1's buffers: nobody held them. */
            assert_ptr_equal(now, v1_address);
        }
        /* From step 10 to 20 a reader holds one snapshot across updates. */
        if (step == 10) {
            held = now;
            held_copy = snapshot_take(held);
        } else {
            pd_scene_release(now);
        }
        if (step == 20) {
            snapshot_check_and_free(&held_copy, held);
            pd_scene_release(held);
        }
    }
    pd_registry_destroy(r);
    free(m.v);
}

/* A random operation for registry_random_updates: any op (BLOCK, PASS,
 * COST 1..9, RESTORE) over a rectangle, a clustered list or a list
 * scattered over the map (repaired cell by cell); cells[] (64 entries)
 * holds a list's cells. */
static pd_scene_update random_op(const model *m, pd_point *cells)
{
    pd_update_op op = (pd_update_op)rng_below(4);
    uint8_t cost = (uint8_t)(1 + rng_below(9));
    switch (rng_below(3)) {
    case 0: {
        int32_t x0 = rng_below(m->w), y0 = rng_below(m->h);
        int32_t x1 = x0 + rng_below(12), y1 = y0 + rng_below(12);
        return rect_update(op, cost, x0, y0, x1 < m->w ? x1 : m->w - 1, y1 < m->h ? y1 : m->h - 1);
    }
    case 1: {
        size_t n = 1 + (size_t)rng_below(20);
        int32_t cx = rng_below(m->w - 8), cy = rng_below(m->h - 8);
        for (size_t i = 0; i < n; i++)
            cells[i] = (pd_point){ cx + rng_below(8), cy + rng_below(8) };
        return list_update(op, cost, cells, n);
    }
    default: {
        size_t n = 2 + (size_t)rng_below(10);
        for (size_t i = 0; i < n; i++)
            cells[i] = (pd_point){ rng_below(m->w), rng_below(m->h) };
        return list_update(op, cost, cells, n);
    }
    }
}

/* `updates` random updates through the registry, a quarter of them
 * carrying 2..4 operations as one version, on the model's scene with units
 * 1, 2, 3, 5, 8 and 16 (PD_UNIT_SIZE_MAX) and a spare kept whatever its
 * size: so nearly every version is built by replaying the update before on
 * the version it replaced, then applying its own (pd_scene_update.c). Every 97th
 * version and the last must equal a fresh build (grid, bitsets, clearance,
 * unit grids, labels as a partition, passable count). From time to time a reader holds a version across a few
 * updates, so the spare is sometimes busy and a copy is made instead, and
 * the held version must stay untouched. Every version served holds its
 * labels at the width its lineage needs (expect_label_widths), widening
 * only; widths gets each unit's width at the start and at the end (may be
 * NULL). */
typedef struct lineage_widths {
    uint32_t first[PD_CONF_MAX_UNIT_SIZES], last[PD_CONF_MAX_UNIT_SIZES];
} lineage_widths;

/* Makes the next update (cells: room for its cell list). */
typedef pd_scene_update (*op_maker)(const model *m, pd_point *cells);

static void registry_random_updates(model *mp, uint64_t seed, int updates, op_maker make_op,
                                    lineage_widths *widths)
{
    model m = *mp;
    rng_state = seed;
    uint8_t *authored = dup_bytes(m.v, (size_t)m.w * (size_t)m.h);
    pd_registry *r = registry_from_model(&m, "[1, 2, 3, 5, 8, 16]");
    pd_registry_set_spare_min_cells(r, 0);
    pd_point cells[4][64];
    pd_scene *held = NULL;
    snapshot held_copy;
    uint64_t version = 1;
    lineage_widths seen;
    pd_scene *first = pd_registry_acquire(r, "m");
    expect_label_widths(first, seen.first);
    memcpy(seen.last, seen.first, sizeof seen.last);
    pd_scene_release(first);
    for (int step = 0; step < updates; step++) {
        pd_scene_update ops[4];
        size_t n_ops = rng_below(4) == 0 ? 2 + (size_t)rng_below(3) : 1;
        uint64_t want_changed = 0;
        for (size_t k = 0; k < n_ops; k++) {
            ops[k] = make_op(&m, cells[k]);
            want_changed += model_apply_authored(&m, authored, &ops[k]);
        }
        pd_scene_update_result res;
        assert_int_equal(pd_registry_update_many(r, "m", ops, n_ops, &res), PD_OK);
        assert_true(res.cells_changed == want_changed);
        if (want_changed > 0)
            version++;
        assert_true(res.version == version);
        pd_scene *now = pd_registry_acquire(r, "m");
        assert_true(now->version == version);
        uint32_t bytes[PD_CONF_MAX_UNIT_SIZES];
        expect_label_widths(now, bytes);
        for (size_t i = 0; i < now->n_unit_sizes; i++) {
            assert_true(bytes[i] >= seen.last[i]);
            seen.last[i] = bytes[i];
        }
        if (step % 97 == 0 || step == updates - 1)
            expect_equals_fresh(now, &m);
        pd_scene_release(now);
        if (!held && step % 50 == 7) {
            held = pd_registry_acquire(r, "m");
            held_copy = snapshot_take(held);
        } else if (held && step % 50 == 10) {
            snapshot_check_and_free(&held_copy, held);
            pd_scene_release(held);
            held = NULL;
        }
    }
    if (held) {
        snapshot_check_and_free(&held_copy, held);
        pd_scene_release(held);
    }
    pd_registry_destroy(r);
    free(authored);
    free(m.v);
    if (widths)
        *widths = seen;
}

static void test_registry_random_updates_uniform(void **state)
{
    (void)state;
    rng_state = 77;
    model m = model_random_costs(120, 90, 22, 0);
    registry_random_updates(&m, 77, 2000, random_op, NULL);
}

static void test_registry_random_updates_weighted(void **state)
{
    (void)state;
    rng_state = 78;
    model m = model_random(120, 90, 22);
    registry_random_updates(&m, 78, 2000, random_op, NULL);
}

/* Corridors 3 cells tall and w long, one wall row apart, the rest of the
 * cells as model_random_costs gives them with no walls (costly_percent of
 * cost 2..9): a few large components, so every unit's labels start 8 bits
 * wide. Blocks that cut a corridor in two large parts (a rectangle across
 * it for unit 1, a single cell for unit 3, whose anchors lie on one row)
 * need a new label each, RESTORE joins the parts again, and small pieces
 * cut off go escaped. */
static model model_corridors(int32_t w, int32_t h, int costly_percent)
{
    model m = model_random_costs(w, h, 0, costly_percent);
    for (int32_t y = 3; y < h; y += 4)
        for (int32_t x = 0; x < w; x++)
            m.v[y * w + x] = 0;
    return m;
}

/* Mostly cuts across one of model_corridors' corridors at a column that
 * leaves both parts large for every unit (70..128 of 200), or RESTOREs of
 * a whole corridor joining its parts again; a quarter random_op. */
static pd_scene_update corridor_op(const model *m, pd_point *cells)
{
    int32_t y = 4 * rng_below(m->h / 4);
    switch (rng_below(4)) {
    case 0: return random_op(m, cells);
    case 1: return rect_update(PD_UPDATE_RESTORE, 0, 0, y > 0 ? y - 1 : 0, m->w - 1, y + 3);
    default: {
        int32_t x = 70 + rng_below(59);
        return rect_update(PD_UPDATE_BLOCK, 0, x, y, x, y + 2);
    }
    }
}

/* A lineage of every op whose labels start 8 bits wide for units 1-3 and
 * pass 254 for each of them: they widen to 16 bits on the version
 * served and on the retired versions the diffs bring up to date, stay
 * equal to a fresh build (which would hold 8 or 16 bits as the rule
 * allows), and never narrow under updates. */
static void registry_labels_cross_255(model *m, uint64_t seed)
{
    lineage_widths widths;
    registry_random_updates(m, seed, 1500, corridor_op, &widths);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(widths.first[i], 1);
        assert_int_equal(widths.last[i], 2);
    }
}

static void test_registry_labels_cross_255_uniform(void **state)
{
    (void)state;
    rng_state = 255;
    model m = model_corridors(200, 90, 0);
    registry_labels_cross_255(&m, 255);
}

static void test_registry_labels_cross_255_weighted(void **state)
{
    (void)state;
    rng_state = 256;
    model m = model_corridors(200, 90, 10);
    registry_labels_cross_255(&m, 256);
}

/* 255 runs of 65 cells (one more than a small component) on the even rows
 * at the top, then a checkerboard: 65,245 single cells. 255 large
 * components cannot all have 8-bit labels, so unit 1's labels start 16
 * bits wide with every component labelled (units 2 and 3 fit nowhere: 8
 * bits, no labels). Opening cells joins them; RESTORE cuts an opened area
 * back into single cells, each a new label, and the lineage passes 65535:
 * 32 bits. */
static void test_registry_labels_cross_65535(void **state)
{
    (void)state;
    rng_state = 65535;
    /* Run k lies on row 2 * (k / per_row), from column (k % per_row) * (run + 1). */
    const int32_t run = PD_COMPONENTS_SMALL_CELLS + 1, per_row = 400 / (run + 1), runs = 255;
    const int32_t first_single_row = 2 * ((runs + per_row - 1) / per_row);
    model m = model_random_costs(400, 413, 0, 10);
    uint32_t singles = 0;
    for (int32_t y = 0; y < m.h; y++) {
        for (int32_t x = 0; x < m.w; x++) {
            int32_t k = (y / 2) * per_row + x / (run + 1);
            int open = y < first_single_row ? y % 2 == 0 && x / (run + 1) < per_row && x % (run + 1) < run && k < runs
                                            : (x + y) % 2 == 0 && singles < 65245;
            singles += open && y >= first_single_row;
            if (!open)
                m.v[y * m.w + x] = 0;
        }
    }
    assert_int_equal(singles, 65245);
    lineage_widths widths;
    registry_random_updates(&m, 65535, 300, random_op, &widths);
    assert_int_equal(widths.first[0], 2);
    assert_int_equal(widths.last[0], 4);
}

/* A hook that holds an update at the moment its version is about to be
 * served, until the test lets it go. */
typedef struct publish_gate {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int arrived, open, published;
} publish_gate;

static int gate_before_publish(void *user)
{
    publish_gate *g = user;
    pthread_mutex_lock(&g->lock);
    g->arrived = 1;
    pthread_cond_broadcast(&g->cond);
    while (!g->open)
        pthread_cond_wait(&g->cond, &g->lock);
    pthread_mutex_unlock(&g->lock);
    return 0;
}

static void gate_after_publish(void *user, int published, const pd_scene_update_result *res)
{
    publish_gate *g = user;
    (void)res;
    pthread_mutex_lock(&g->lock);
    g->published = published;
    pthread_mutex_unlock(&g->lock);
}

typedef struct gated_update {
    pd_registry *r;
    publish_gate *gate;
    pd_status st;
} gated_update;

static void *gated_update_main(void *p)
{
    gated_update *a = p;
    static const pd_point cell = { 0, 0 };
    pd_scene_update u = list_update(PD_UPDATE_BLOCK, 0, &cell, 1);
    const pd_registry_update_hooks hooks = { .before_publish = gate_before_publish,
                                             .after_publish = gate_after_publish, .user = a->gate };
    a->st = pd_registry_update_hooked(a->r, "alpha", &u, 1, &hooks, NULL);
    return NULL;
}

/* Updates of different scenes do not wait for each other: while an update
 * of "alpha" is held just before its version is served (its hook waits at
 * a gate), an update of "beta" on this thread completes and is served, and
 * "alpha" still serves version 1. Opened, alpha's update is served. */
static void test_threads_scenes_update_in_parallel(void **state)
{
    (void)state;
    pd_registry *r = registry_with(conf_two);
    publish_gate gate = { .arrived = 0 };
    pthread_mutex_init(&gate.lock, NULL);
    pthread_cond_init(&gate.cond, NULL);
    gated_update a = { r, &gate, PD_INTERNAL };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, gated_update_main, &a), 0);
    pthread_mutex_lock(&gate.lock);
    while (!gate.arrived)
        pthread_cond_wait(&gate.cond, &gate.lock);
    pthread_mutex_unlock(&gate.lock);

    static const pd_point cell = { 0, 0 };
    pd_scene_update u = list_update(PD_UPDATE_BLOCK, 0, &cell, 1);
    pd_scene_update_result res;
    assert_int_equal(pd_registry_update(r, "beta", &u, &res), PD_OK);
    assert_true(res.version == 2 && res.cells_changed == 1);
    pd_scene *beta = pd_registry_acquire(r, "beta"), *alpha = pd_registry_acquire(r, "alpha");
    assert_true(beta->version == 2 && alpha->version == 1);
    pd_scene_release(beta);
    pd_scene_release(alpha);

    pthread_mutex_lock(&gate.lock);
    gate.open = 1;
    pthread_cond_broadcast(&gate.cond);
    pthread_mutex_unlock(&gate.lock);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(a.st, PD_OK);
    assert_int_equal(gate.published, 1);
    alpha = pd_registry_acquire(r, "alpha");
    assert_true(alpha->version == 2);
    assert_int_equal(pd_grid_get(alpha->grid, 0, 0), PD_CELL_BLOCKED);
    pd_scene_release(alpha);
    pthread_cond_destroy(&gate.cond);
    pthread_mutex_destroy(&gate.lock);
    pd_registry_destroy(r);
}

/* Concurrency: UPDATERS threads each block UPDATES_EACH distinct cells of
 * one open scene, one cell per update, while readers check every snapshot
 * they see: each update blocks exactly one new cell, so a snapshot of
 * version v must have exactly (v - 1) fewer passable cells, in its count
 * and in its grid. A lost update would show as a final version short. */
#define UPDATERS 4
#define UPDATES_EACH 150
#define UPD_READERS 2
/* Big enough that one update takes long enough for updaters to overlap. */
#define OPEN_SIDE 128

typedef struct updater_arg {
    pd_registry *r;
    pthread_barrier_t *start;
    int index;
    int failures;
} updater_arg;

typedef struct upd_reader_arg {
    pd_registry *r;
    atomic_int *stop;
    uint64_t passable0;
    int failures;
    atomic_ulong seen;
} upd_reader_arg;

static void *updater_main(void *p)
{
    updater_arg *a = p;
    /* All updaters start together, so their updates contend. */
    pthread_barrier_wait(a->start);
    for (int k = 0; k < UPDATES_EACH; k++) {
        int i = a->index * UPDATES_EACH + k;
        pd_point cell = { i % OPEN_SIDE, i / OPEN_SIDE };
        pd_scene_update u = list_update(PD_UPDATE_BLOCK, 0, &cell, 1);
        pd_scene_update_result res;
        if (pd_registry_update(a->r, "open", &u, &res) != PD_OK || res.cells_changed != 1)
            a->failures++;
    }
    return NULL;
}

static void *upd_reader_main(void *p)
{
    upd_reader_arg *a = p;
    uint64_t last = 0;
    while (!atomic_load(a->stop)) {
        pd_scene *s = pd_registry_acquire(a->r, "open");
        if (!s) {
            a->failures++;
            continue;
        }
        uint64_t open = 0;
        for (int32_t y = 0; y < s->grid->height; y++) {
            for (int32_t x = 0; x < s->grid->width; x++)
                open += pd_grid_get(s->grid, x, y) != PD_CELL_BLOCKED;
        }
        if (s->version < last || open != s->passable_cells ||
            open + (s->version - 1) != a->passable0 ||
            pd_grid_get(s->units[1].grid, 0, 0) > pd_grid_get(s->grid, 0, 0))
            a->failures++;
        last = s->version;
        atomic_fetch_add(&a->seen, 1);
        pd_scene_release(s);
    }
    return NULL;
}

static void test_threads_concurrent_updates(void **state)
{
    (void)state;
    /* An open OPEN_SIDE x OPEN_SIDE map. */
    model m = { OPEN_SIDE, OPEN_SIDE, malloc(OPEN_SIDE * OPEN_SIDE) };
    assert_non_null(m.v);
    memset(m.v, 1, OPEN_SIDE * OPEN_SIDE);
    char *text = model_text(&m);
    char path[512];
    snprintf(path, sizeof path, "%s/test_scene_update_open_%ld.txt", PD_BINARY_DIR, (long)getpid());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    free(text);
    char json[1024];
    snprintf(json, sizeof json,
             "{\"scenes\": [{\"name\": \"open\", \"map\": \"%s\", \"format\": \"ascii\", \"unit_sizes\": [1, 2]},"
             " {\"name\": \"other\", \"map\": \"scene_alt.txt\", \"format\": \"ascii\"}]}",
             path);
    pd_registry *r = registry_with(json);
    pd_registry_set_spare_min_cells(r, 0); /* updates write into retired versions */
    remove(path);

    atomic_int stop;
    atomic_init(&stop, 0);
    upd_reader_arg readers[UPD_READERS];
    pthread_t reader_threads[UPD_READERS], updater_threads[UPDATERS];
    updater_arg updaters[UPDATERS];
    for (int t = 0; t < UPD_READERS; t++) {
        readers[t] = (upd_reader_arg){ .r = r, .stop = &stop, .passable0 = OPEN_SIDE * OPEN_SIDE };
        atomic_init(&readers[t].seen, 0);
        assert_int_equal(pthread_create(&reader_threads[t], NULL, upd_reader_main, &readers[t]), 0);
    }
    /* Every reader is running before the first update, whatever the
     * scheduler does. */
    for (int t = 0; t < UPD_READERS; t++) {
        while (atomic_load(&readers[t].seen) == 0)
            sched_yield();
    }
    pthread_barrier_t start;
    assert_int_equal(pthread_barrier_init(&start, NULL, UPDATERS), 0);
    for (int t = 0; t < UPDATERS; t++) {
        updaters[t] = (updater_arg){ .r = r, .start = &start, .index = t };
        assert_int_equal(pthread_create(&updater_threads[t], NULL, updater_main, &updaters[t]), 0);
    }
    for (int t = 0; t < UPDATERS; t++) {
        assert_int_equal(pthread_join(updater_threads[t], NULL), 0);
        assert_int_equal(updaters[t].failures, 0);
    }
    pthread_barrier_destroy(&start);
    atomic_store(&stop, 1);
    for (int t = 0; t < UPD_READERS; t++) {
        assert_int_equal(pthread_join(reader_threads[t], NULL), 0);
        assert_int_equal(readers[t].failures, 0);
        assert_true(atomic_load(&readers[t].seen) > 0);
    }

    pd_scene *s = pd_registry_acquire(r, "open");
    if (s->version != 1 + UPDATERS * UPDATES_EACH)
        print_error("final version %" PRIu64 ": updates were lost\n", s->version);
    assert_true(s->version == 1 + UPDATERS * UPDATES_EACH);
    assert_true(s->passable_cells == OPEN_SIDE * OPEN_SIDE - UPDATERS * UPDATES_EACH);
    for (int i = 0; i < OPEN_SIDE * OPEN_SIDE; i++) {
        uint8_t want = i < UPDATERS * UPDATES_EACH ? PD_CELL_BLOCKED : PD_CELL_FREE;
        assert_int_equal(pd_grid_get(s->grid, i % OPEN_SIDE, i / OPEN_SIDE), want);
        m.v[i] = want;
    }
    /* The repaired data of the last version is still right. */
    expect_equals_fresh(s, &m);
    pd_scene_release(s);
    pd_scene *other = pd_registry_acquire(r, "other");
    assert_true(other->version == 1);
    pd_scene_release(other);
    pd_registry_destroy(r);
    free(m.v);
}

/* An argument is a cmocka test filter: the TSan run passes "test_threads_*",
 * the tests that start threads; under TSan the single-threaded random
 * update tests take minutes and check nothing it can see. */
int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unit_data_after_load),
        cmocka_unit_test(test_validation_errors),
        cmocka_unit_test(test_single_updates_match_fresh_build),
        cmocka_unit_test(test_random_updates_match_fresh_build_weighted),
        cmocka_unit_test(test_random_updates_match_fresh_build_uniform),
        cmocka_unit_test(test_first_cost_on_uniform_scene_reaches_unit_grids),
        cmocka_unit_test(test_jps_after_updates_matches_astar),
        cmocka_unit_test(test_search_pick),
        cmocka_unit_test(test_update_that_changes_nothing),
        cmocka_unit_test(test_restore_as_one_operation),
        cmocka_unit_test(test_registry_update),
        cmocka_unit_test(test_registry_reuses_retired_snapshots),
        cmocka_unit_test(test_registry_random_updates_uniform),
        cmocka_unit_test(test_registry_random_updates_weighted),
        cmocka_unit_test(test_registry_labels_cross_255_uniform),
        cmocka_unit_test(test_registry_labels_cross_255_weighted),
        cmocka_unit_test(test_registry_labels_cross_65535),
        cmocka_unit_test(test_threads_scenes_update_in_parallel),
        cmocka_unit_test(test_threads_concurrent_updates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
