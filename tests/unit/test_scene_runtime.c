/*
 * test_scene_runtime.c - scenes made at run time (issue 12): pd_scene_build
 * and pd_scene_from_cells against each other, instances that share their
 * template's structures until an update and then diverge (every version
 * compared with a fresh build of the same cells, unit sizes 1-3), the
 * registry's caps and names (nothing half-made remains after a refusal),
 * drops with snapshots still held, run-time scenes kept across a publish,
 * several operations as one version and restoring authored cells (random
 * batches against a model, each compared with a fresh build), the caps
 * and the poll pd_scene_build takes (checked before the work they bound,
 * issue 29 finding 7), the config parser serving CreateScene's fields, and
 * the registry's index: adds, drops, lookups and listings against a model,
 * and an add that costs the same with 20,000 scenes as with a few (issue
 * 29, finding 13).
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
#include "pd_conf.h"
#include "pd_scene.h"
#include "test_rng.h"
#include "zero_map.h"

static const uint32_t UNITS_123[] = { 1, 2, 3 };

static pd_conf_scene entry(const char *name, const uint32_t *units, size_t n_units)
{
    pd_conf_scene cs;
    memset(&cs, 0, sizeof cs);
    snprintf(cs.name, sizeof cs.name, "%s", name);
    cs.format = PD_MAP_ASCII;
    cs.cell_size = 1.0;
    memcpy(cs.unit_sizes, units, n_units * sizeof *units);
    cs.n_unit_sizes = n_units;
    pd_tiled_rules_default(&cs.tiled);
    return cs;
}

/* w x h cells, about blocked_percent blocked, some costly. */
static uint8_t *random_cells(uint64_t *rng, int32_t w, int32_t h, int blocked_percent)
{
    uint8_t *c = malloc((size_t)w * (size_t)h);
    assert_non_null(c);
    for (size_t i = 0; i < (size_t)w * (size_t)h; i++) {
        int32_t r = rng_below(rng, 100);
        c[i] = r < blocked_percent ? 0 : r < blocked_percent + 5 ? (uint8_t)(2 + rng_below(rng, 8)) : 1;
    }
    return c;
}

static pd_scene *fresh(const char *name, const uint8_t *cells, int32_t w, int32_t h)
{
    pd_conf_scene cs = entry(name, UNITS_123, 3);
    char err[256];
    pd_scene *s = pd_scene_from_cells(&cs, w, h, cells, err, sizeof err);
    if (!s)
        fail_msg("%s", err);
    return s;
}

static size_t padded(const pd_grid *g)
{
    return (size_t)(g->width + 2) * (size_t)(g->height + 2);
}

/* s holds exactly what a fresh build of cells holds. */
static void expect_equals_fresh(const pd_scene *s, const uint8_t *cells)
{
    pd_scene *f = fresh("fresh", cells, s->grid->width, s->grid->height);
    assert_memory_equal(s->grid->cells, f->grid->cells, padded(f->grid));
    assert_int_equal(s->grid->uniform_cost, f->grid->uniform_cost);
    assert_true(s->passable_cells == f->passable_cells);
    assert_memory_equal(s->clearance->values, f->clearance->values, padded(f->grid));
    for (size_t i = 0; i < f->n_unit_sizes; i++) {
        assert_memory_equal(s->units[i].grid->cells, f->units[i].grid->cells, padded(f->grid));
        char why[160];
        if (components_differ(s->units[i].components, f->units[i].components, why, sizeof why))
            fail_msg("unit %u labels: %s", (unsigned)s->units[i].unit, why);
    }
    pd_scene_release(f);
}

static void test_build_from_text_equals_cells(void **state)
{
    (void)state;
    static const char text[] = "..#.\n.3..\n#..9\n";
    static const uint8_t cells[] = { 1, 1, 0, 1, 1, 3, 1, 1, 0, 1, 1, 9 };
    pd_conf_scene cs = entry("txt", UNITS_123, 3);
    char err[256];
    pd_scene *a = pd_scene_build(&cs, text, sizeof text - 1, NULL, NULL, err, sizeof err);
    if (!a)
        fail_msg("%s", err);
    expect_equals_fresh(a, cells);
    assert_int_equal(a->version, 1);
    pd_scene_release(a);

    static const char movingai[] = "type octile\nheight 2\nwidth 3\nmap\n.@.\nT..\n";
    cs.format = PD_MAP_MOVINGAI;
    pd_scene *m = pd_scene_build(&cs, movingai, sizeof movingai - 1, NULL, NULL, err, sizeof err);
    if (!m)
        fail_msg("%s", err);
    static const uint8_t mcells[] = { 1, 0, 1, 0, 1, 1 };
    expect_equals_fresh(m, mcells);
    pd_scene_release(m);

    /* A bad map names the scene, "map" and the line and column. */
    cs.format = PD_MAP_ASCII;
    assert_null(pd_scene_build(&cs, "..\n.x\n", 6, NULL, NULL, err, sizeof err));
    assert_non_null(strstr(err, "scene 'txt': map:2:2:"));
    /* Raw cells: each side 1..PD_GRID_MAX_SIDE. */
    assert_null(pd_scene_from_cells(&cs, 0, 3, cells, err, sizeof err));
    assert_non_null(strstr(err, "each side"));
}

static void test_instances_share_until_changed(void **state)
{
    (void)state;
    uint64_t rng = 12;
    const int32_t w = 64, h = 48;
    uint8_t *cells = random_cells(&rng, w, h, 25);
    pd_registry *r = pd_registry_create();
    char err[256];
    assert_int_equal(pd_registry_add(r, fresh("tmpl", cells, w, h), err, sizeof err), PD_OK);
    uint64_t with_template = pd_registry_bytes(r);
    uint64_t version = 0;
    assert_int_equal(pd_registry_instance(r, "a", "tmpl", &version, err, sizeof err), PD_OK);
    assert_int_equal(version, 1);
    assert_int_equal(pd_registry_instance(r, "b", "tmpl", NULL, err, sizeof err), PD_OK);

    pd_scene *t = pd_registry_acquire(r, "tmpl");
    pd_scene *a = pd_registry_acquire(r, "a");
    pd_scene *b = pd_registry_acquire(r, "b");
    /* Shared: the same structures, a struct's worth of memory each. */
    assert_ptr_equal(a->grid, t->grid);
    assert_ptr_equal(a->clearance, t->clearance);
    for (size_t i = 0; i < 3; i++) {
        assert_ptr_equal(a->units[i].grid, t->units[i].grid);
        assert_ptr_equal(a->units[i].components, t->units[i].components);
    }
    assert_ptr_equal(a->base, t);
    assert_true(a->runtime);
    assert_true(pd_scene_own_bytes(a) < 1024);
    assert_true(pd_registry_bytes(r) - with_template == pd_scene_own_bytes(a) + pd_scene_own_bytes(b));
    /* An instance of an instance reads the same owner. */
    assert_int_equal(pd_registry_instance(r, "a2", "a", NULL, err, sizeof err), PD_OK);
    pd_scene *a2 = pd_registry_acquire(r, "a2");
    assert_ptr_equal(a2->base, t);
    pd_scene_release(a2);

    /* The first update of a copies what it reads, and only a changes. */
    pd_scene_update u = { .op = PD_UPDATE_BLOCK, .is_rect = 1, .rect_min = { 10, 10 }, .rect_max = { 20, 12 } };
    pd_scene_update_result res;
    assert_int_equal(pd_registry_update(r, "a", &u, &res), PD_OK);
    uint8_t *mine = malloc((size_t)w * h);
    memcpy(mine, cells, (size_t)w * h);
    for (int32_t y = 10; y <= 12; y++)
        for (int32_t x = 10; x <= 20; x++)
            mine[(size_t)y * w + x] = 0;
    pd_scene *a_next = pd_registry_acquire(r, "a");
    assert_int_equal(a_next->version, 2);
    assert_null(a_next->base);
    assert_ptr_not_equal(a_next->grid, t->grid);
    expect_equals_fresh(a_next, mine);
    expect_equals_fresh(t, cells);
    expect_equals_fresh(b, cells);
    assert_ptr_equal(b->grid, t->grid);
    /* The snapshot a reader held before the update still reads the template. */
    assert_ptr_equal(a->grid, t->grid);
    pd_scene_release(a_next);

    /* Thousands of random one-cell changes on the diverged instance stay
     * equal to a fresh build (labels included), and the template and the
     * other instance never move. */
    for (int i = 0; i < 3000; i++) {
        pd_point p = { rng_below(&rng, w), rng_below(&rng, h) };
        int op = rng_below(&rng, 3);
        uint8_t cost = (uint8_t)(2 + rng_below(&rng, 5));
        pd_scene_update cu = { .op = (pd_update_op)op, .cost = op == PD_UPDATE_COST ? cost : 0, .cells = &p, .n_cells = 1 };
        assert_int_equal(pd_registry_update(r, "a", &cu, NULL), PD_OK);
        mine[(size_t)p.y * w + p.x] = op == PD_UPDATE_BLOCK ? 0 : op == PD_UPDATE_PASS ? 1 : cost;
        if (i % 500 == 499) {
            pd_scene *now = pd_registry_acquire(r, "a");
            expect_equals_fresh(now, mine);
            pd_scene_release(now);
        }
    }
    expect_equals_fresh(t, cells);
    expect_equals_fresh(b, cells);

    /* Dropping the template leaves its instances reading it. */
    assert_int_equal(pd_registry_drop(r, "tmpl", &version), PD_OK);
    assert_int_equal(version, 1);
    assert_null(pd_registry_acquire(r, "tmpl"));
    pd_scene_release(t);
    pd_scene_release(a);
    pd_scene_release(b);
    b = pd_registry_acquire(r, "b");
    expect_equals_fresh(b, cells);
    pd_scene_release(b);
    pd_registry_destroy(r);
    free(mine);
    free(cells);
}

static void test_caps_and_names(void **state)
{
    (void)state;
    uint64_t rng = 5;
    uint8_t *cells = random_cells(&rng, 32, 32, 20);
    pd_registry *r = pd_registry_create();
    char err[256];
    const pd_registry_caps caps = { .max_scenes = 3, .max_scene_cells = 32 * 32, .max_scene_bytes = 0 };
    pd_registry_set_caps(r, &caps);
    assert_int_equal(pd_registry_add(r, fresh("one", cells, 32, 32), err, sizeof err), PD_OK);
    assert_int_equal(pd_registry_add(r, fresh("one", cells, 32, 32), err, sizeof err), PD_SCENE_EXISTS);
    assert_non_null(strstr(err, "'one' exists"));
    assert_int_equal(pd_registry_instance(r, "one", "one", NULL, err, sizeof err), PD_SCENE_EXISTS);
    assert_int_equal(pd_registry_instance(r, "x", "none", NULL, err, sizeof err), PD_UNKNOWN_SCENE);
    /* Over the cells cap: refused, and nothing is served or charged. */
    uint64_t bytes = pd_registry_bytes(r);
    uint8_t *big = random_cells(&rng, 33, 32, 20);
    assert_int_equal(pd_registry_add(r, fresh("big", big, 33, 32), err, sizeof err), PD_LIMIT_EXCEEDED);
    assert_non_null(strstr(err, "limits.max_scene_cells"));
    assert_null(pd_registry_acquire(r, "big"));
    assert_true(pd_registry_bytes(r) == bytes);
    /* The scene count cap counts instances too. */
    assert_int_equal(pd_registry_instance(r, "i1", "one", NULL, err, sizeof err), PD_OK);
    assert_int_equal(pd_registry_instance(r, "i2", "one", NULL, err, sizeof err), PD_OK);
    assert_int_equal(pd_registry_instance(r, "i3", "one", NULL, err, sizeof err), PD_LIMIT_EXCEEDED);
    assert_non_null(strstr(err, "limits.max_scenes"));
    assert_null(pd_registry_acquire(r, "i3"));
    /* The memory cap: one more full scene would pass it. */
    assert_int_equal(pd_registry_drop(r, "i2", NULL), PD_OK);
    const pd_registry_caps tight = { .max_scenes = 10, .max_scene_bytes = pd_registry_bytes(r) + 1000 };
    pd_registry_set_caps(r, &tight);
    assert_int_equal(pd_registry_add(r, fresh("two", cells, 32, 32), err, sizeof err), PD_LIMIT_EXCEEDED);
    assert_non_null(strstr(err, "limits.max_scene_bytes"));
    assert_int_equal(pd_registry_instance(r, "i2", "one", NULL, err, sizeof err), PD_OK);
    /* Drops: unknown names, and a held snapshot stays readable. */
    assert_int_equal(pd_registry_drop(r, "nope", NULL), PD_UNKNOWN_SCENE);
    pd_scene *held = pd_registry_acquire(r, "one");
    assert_int_equal(pd_registry_drop(r, "one", NULL), PD_OK);
    expect_equals_fresh(held, cells);
    pd_scene_release(held);
    pd_scene **list = NULL;
    size_t n = pd_registry_list(r, &list);
    assert_int_equal(n, 2);
    assert_string_equal(list[0]->name, "i1");
    assert_string_equal(list[1]->name, "i2");
    pd_registry_release_list(list, n);
    pd_registry_destroy(r);
    free(big);
    free(cells);
}

/* Issue 29 finding 9: an instance's first update copies its template's
 * structures, so updates count against limits.max_scene_bytes like the
 * scenes they make: with room for the template and a few copies, updates
 * of many instances stop at LIMIT_EXCEEDED before the registry passes the
 * cap, the refused instance serves its version unchanged, and an update
 * of one already copied (no new copy) still goes through. Before the fix
 * every update was served and the registry ended at ~12x its cap. */
static void test_updates_count_against_the_byte_cap(void **state)
{
    (void)state;
    uint64_t rng = 29;
    uint8_t *cells = random_cells(&rng, 96, 96, 20);
    pd_registry *r = pd_registry_create();
    pd_registry_set_spare_min_cells(r, 0); /* a copied instance keeps a spare: later updates copy nothing */
    char err[256];
    assert_int_equal(pd_registry_add(r, fresh("tmpl", cells, 96, 96), err, sizeof err), PD_OK);
    uint64_t one = pd_registry_bytes(r);
    const pd_registry_caps caps = { .max_scenes = 100, .max_scene_bytes = one * 4 };
    pd_registry_set_caps(r, &caps);
    char names[40][8];
    for (int i = 0; i < 40; i++) {
        snprintf(names[i], sizeof names[i], "i%d", i);
        assert_int_equal(pd_registry_instance(r, names[i], "tmpl", NULL, err, sizeof err), PD_OK);
    }
    int served = 0, refused = 0;
    for (int i = 0; i < 40; i++) {
        pd_point p = { i, 0 };
        pd_scene_update u = { .op = PD_UPDATE_COST, .cost = 7, .cells = &p, .n_cells = 1 };
        pd_scene_update_result res;
        pd_status st = pd_registry_update(r, names[i], &u, &res);
        if (st == PD_OK) {
            served++;
            assert_int_equal(res.version, 2);
        } else {
            assert_int_equal(st, PD_LIMIT_EXCEEDED);
            assert_true(res.bytes_held + res.bytes_needed > caps.max_scene_bytes);
            assert_int_equal(res.version, 1);
            pd_scene *s = pd_registry_acquire(r, names[i]);
            assert_int_equal(s->version, 1);
            assert_non_null(s->base); /* still shares the template */
            pd_scene_release(s);
            refused++;
        }
        assert_true(pd_registry_bytes(r) <= caps.max_scene_bytes);
    }
    assert_true(served >= 1);
    assert_true(refused >= 30);
    /* A scene whose update has a spare to write into copies nothing: once
     * i0 holds one (its second update, with the cap lifted), its updates
     * go through at a cap set to what the registry holds. */
    pd_point p = { 5, 5 };
    pd_scene_update u = { .op = PD_UPDATE_COST, .cost = 3, .cells = &p, .n_cells = 1 };
    const pd_registry_caps open = { .max_scenes = 100 };
    pd_registry_set_caps(r, &open);
    assert_int_equal(pd_registry_update(r, "i0", &u, NULL), PD_OK);
    const pd_registry_caps full = { .max_scenes = 100, .max_scene_bytes = pd_registry_bytes(r) };
    pd_registry_set_caps(r, &full);
    for (uint8_t cost = 4; cost < 8; cost++) {
        u.cost = cost;
        assert_int_equal(pd_registry_update(r, "i0", &u, NULL), PD_OK);
        assert_true(pd_registry_bytes(r) <= full.max_scene_bytes);
    }
    assert_int_equal(pd_registry_update(r, "i1", &u, NULL), PD_LIMIT_EXCEEDED);
    pd_registry_destroy(r);
    free(cells);
}

static void test_runtime_scenes_survive_publish(void **state)
{
    (void)state;
    uint64_t rng = 9;
    uint8_t *cells = random_cells(&rng, 16, 16, 10);
    pd_registry *r = pd_registry_create();
    char err[256];
    assert_int_equal(pd_registry_add(r, fresh("made", cells, 16, 16), err, sizeof err), PD_OK);
    pd_conf conf = pd_conf_defaults;
    pd_scene_set *set = pd_registry_prepare(&conf, err, sizeof err);
    assert_non_null(set);
    pd_registry_publish(r, set);
    pd_scene *s = pd_registry_acquire(r, "made");
    assert_non_null(s);
    assert_int_equal(s->version, 1);
    pd_scene_release(s);
    pd_registry_destroy(r);
    free(cells);
}

/* Every scene r serves, listed: sorted by name, exactly the model's (and
 * "tmpl" when it is served). */
static void expect_listing(pd_registry *r, const unsigned char *present, size_t n_names)
{
    pd_scene **list = NULL;
    pd_scene *t = pd_registry_acquire(r, "tmpl");
    size_t n = pd_registry_list(r, &list), want = t != NULL;
    pd_scene_release(t);
    for (size_t i = 0; i < n_names; i++)
        want += present[i];
    assert_int_equal(n, want);
    assert_int_equal(pd_registry_count(r), want);
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && strcmp(list[i - 1]->name, list[i]->name) >= 0)
            fail_msg("listing out of order at %zu: '%s' then '%s'", i, list[i - 1]->name, list[i]->name);
        unsigned k = 0;
        if (strcmp(list[i]->name, "tmpl") == 0)
            continue;
        assert_int_equal(sscanf(list[i]->name, "s%u", &k), 1);
        assert_true(k < n_names && present[k]);
    }
    pd_registry_release_list(list, n);
}

/* The registry's index (issue 29, finding 13: adds no longer insert into a
 * sorted array) against a model: 30,000 random adds, instances, drops,
 * replacements and lookups over 2,000 names, with listings (sorted, every
 * scene once) and publishes in between, across many of the index's grows
 * and the array's sorts. */
static void test_registry_index_against_a_model(void **state)
{
    (void)state;
    enum { NAMES = 2000, OPS = 30000 };
    uint64_t rng = 29;
    pd_registry *r = pd_registry_create();
    char err[256];
    uint8_t *cells = random_cells(&rng, 8, 8, 0);
    assert_int_equal(pd_registry_add(r, fresh("tmpl", cells, 8, 8), err, sizeof err), PD_OK);
    unsigned char *present = calloc(NAMES, 1);
    assert_non_null(present);
    for (int op = 0; op < OPS; op++) {
        unsigned k = (unsigned)rng_below(&rng, NAMES);
        char name[32];
        snprintf(name, sizeof name, "s%04u", k);
        int what = rng_below(&rng, 10);
        pd_status st;
        if (what < 4) {
            st = pd_registry_instance(r, name, "tmpl", NULL, err, sizeof err);
            assert_int_equal(st, present[k] ? PD_SCENE_EXISTS : PD_OK);
            present[k] = 1;
        } else if (what < 5) {
            st = pd_registry_add(r, fresh(name, cells, 8, 8), err, sizeof err);
            assert_int_equal(st, present[k] ? PD_SCENE_EXISTS : PD_OK);
            present[k] = 1;
        } else if (what < 8) {
            uint64_t v = 0;
            assert_int_equal(pd_registry_drop(r, name, &v), present[k] ? PD_OK : PD_UNKNOWN_SCENE);
            present[k] = 0;
        } else if (what < 9) {
            pd_scene *s = fresh(name, cells, 8, 8);
            s->runtime = 1;
            assert_int_equal(pd_registry_put(r, s), PD_OK);
            present[k] = 1;
        }
        pd_scene *s = pd_registry_acquire(r, name);
        assert_int_equal(s != NULL, present[k]);
        if (s)
            assert_string_equal(s->name, name);
        pd_scene_release(s);
        if (op % 997 == 0)
            expect_listing(r, present, NAMES);
        if (op % 7919 == 0) {
            pd_conf conf = pd_conf_defaults;
            pd_scene_set *set = pd_registry_prepare(&conf, err, sizeof err);
            assert_non_null(set);
            assert_int_equal(pd_registry_publish(r, set), 0);
        }
    }
    pd_registry_drop(r, "tmpl", NULL);
    expect_listing(r, present, NAMES);
    free(present);
    free(cells);
    pd_registry_destroy(r);
}

/* Issue 29, finding 13: CreateInstance slowed from 7,217/s to 209/s at
 * 100,000 scenes, each add inserting into a sorted array (a scan to the
 * place and a copy of the whole array). Counted, not timed: over the last
 * 5,000 of 20,000 instances an add visits at most PD__MAX_ADD_WORK
 * registry entries on average (its index probes, and its share of the
 * array's growth and of the sorts, one per n/16 adds: about 50 at any
 * size), where the sorted array visited about 17,500. */
#define PD__MAX_ADD_WORK 128
static void test_instance_adds_cost_the_same_at_any_size(void **state)
{
    (void)state;
    enum { TOTAL = 20000, LAST = 5000 };
    uint64_t rng = 13;
    pd_registry *r = pd_registry_create();
    char err[256];
    uint8_t *cells = random_cells(&rng, 8, 8, 0);
    assert_int_equal(pd_registry_add(r, fresh("tmpl", cells, 8, 8), err, sizeof err), PD_OK);
    uint64_t first = pd_registry_work(r), at_last = 0;
    for (unsigned i = 0; i < TOTAL; i++) {
        if (i == TOTAL - LAST)
            at_last = pd_registry_work(r);
        char name[32];
        /* Names in no order, as clients make them. */
        snprintf(name, sizeof name, "inst-%08x", (unsigned)(i * 2654435761u));
        assert_int_equal(pd_registry_instance(r, name, "tmpl", NULL, err, sizeof err), PD_OK);
    }
    uint64_t end = pd_registry_work(r);
    double early = (double)(at_last - first) / (TOTAL - LAST), late = (double)(end - at_last) / LAST;
    print_message("registry work per add: %.1f over the first %d, %.1f over the last %d\n", early,
                  TOTAL - LAST, late, LAST);
    if (late > PD__MAX_ADD_WORK)
        fail_msg("an add at %d scenes visits %.1f entries on average (at most %d)", TOTAL, late,
                 PD__MAX_ADD_WORK);
    assert_int_equal(pd_registry_count(r), TOTAL + 1);
    free(cells);
    pd_registry_destroy(r);
}

/* What op writes at (x, y) of a model, given the authored cells. */
static uint8_t model_value(const pd_scene_update *u, const uint8_t *authored, int32_t w, int32_t x, int32_t y)
{
    switch (u->op) {
    case PD_UPDATE_BLOCK:
        return 0;
    case PD_UPDATE_PASS:
        return 1;
    case PD_UPDATE_COST:
        return u->cost;
    default:
        return authored[(size_t)y * w + x];
    }
}

static void model_apply(uint8_t *m, const uint8_t *authored, int32_t w, const pd_scene_update *u)
{
    if (u->is_rect) {
        for (int32_t y = u->rect_min.y; y <= u->rect_max.y; y++)
            for (int32_t x = u->rect_min.x; x <= u->rect_max.x; x++)
                m[(size_t)y * w + x] = model_value(u, authored, w, x, y);
    } else {
        for (size_t i = 0; i < u->n_cells; i++)
            m[(size_t)u->cells[i].y * w + u->cells[i].x] = model_value(u, authored, w, u->cells[i].x, u->cells[i].y);
    }
}

static void test_several_ops_and_restore(void **state)
{
    (void)state;
    uint64_t rng = 77;
    const int32_t w = 48, h = 40;
    uint8_t *authored = random_cells(&rng, w, h, 20);
    uint8_t *m = malloc((size_t)w * h);
    memcpy(m, authored, (size_t)w * h);
    pd_registry *r = pd_registry_create();
    char err[256];
    assert_int_equal(pd_registry_add(r, fresh("door", authored, w, h), err, sizeof err), PD_OK);

    /* Close door A, open door B, re-cost a strip: one version. */
    const pd_point b_cells[] = { { 3, 3 }, { 40, 30 } };
    const pd_scene_update ops[] = {
        { .op = PD_UPDATE_BLOCK, .is_rect = 1, .rect_min = { 10, 0 }, .rect_max = { 10, h - 1 } },
        { .op = PD_UPDATE_PASS, .cells = b_cells, .n_cells = 2 },
        { .op = PD_UPDATE_COST, .cost = 7, .is_rect = 1, .rect_min = { 20, 5 }, .rect_max = { 30, 6 } },
    };
    pd_scene_update_result res;
    assert_int_equal(pd_registry_update_many(r, "door", ops, 3, &res), PD_OK);
    assert_int_equal(res.version, 2);
    assert_true(res.cells_changed > 0);
    for (size_t k = 0; k < 3; k++)
        model_apply(m, authored, w, &ops[k]);
    pd_scene *s = pd_registry_acquire(r, "door");
    expect_equals_fresh(s, m);
    pd_scene_release(s);

    /* A bad operation anywhere refuses the whole update. */
    const pd_scene_update bad[] = {
        ops[0],
        { .op = PD_UPDATE_PASS, .is_rect = 1, .rect_min = { 0, 0 }, .rect_max = { w, 0 } },
    };
    assert_int_equal(pd_registry_update_many(r, "door", bad, 2, &res), PD_OUT_OF_BOUNDS);
    assert_int_equal(res.version, 2);
    /* Changing nothing makes no version. */
    assert_int_equal(pd_registry_update_many(r, "door", ops, 1, &res), PD_OK);
    assert_int_equal(res.cells_changed, 0);
    assert_int_equal(res.version, 2);

    /* Random batches with restores, each one version, against the model. */
    uint64_t version = 2;
    for (int round = 0; round < 400; round++) {
        pd_scene_update batch[4];
        pd_point cells[4][3];
        size_t n = 1 + (size_t)rng_below(&rng, 4);
        for (size_t k = 0; k < n; k++) {
            pd_scene_update *u = &batch[k];
            memset(u, 0, sizeof *u);
            u->op = (pd_update_op)rng_below(&rng, 4);
            if (u->op == PD_UPDATE_COST)
                u->cost = (uint8_t)(2 + rng_below(&rng, 9));
            if (rng_below(&rng, 2)) {
                u->is_rect = 1;
                u->rect_min = (pd_point){ rng_below(&rng, w - 6), rng_below(&rng, h - 6) };
                u->rect_max = (pd_point){ u->rect_min.x + rng_below(&rng, 6), u->rect_min.y + rng_below(&rng, 6) };
            } else {
                for (int i = 0; i < 3; i++)
                    cells[k][i] = (pd_point){ rng_below(&rng, w), rng_below(&rng, h) };
                u->cells = cells[k];
                u->n_cells = 3;
            }
        }
        assert_int_equal(pd_registry_update_many(r, "door", batch, n, &res), PD_OK);
        for (size_t k = 0; k < n; k++)
            model_apply(m, authored, w, &batch[k]);
        if (res.cells_changed > 0)
            version++;
        assert_int_equal(res.version, version);
        if (round % 50 == 49) {
            s = pd_registry_acquire(r, "door");
            expect_equals_fresh(s, m);
            pd_scene_release(s);
        }
    }
    /* Restoring everything gives back the authored scene, costs included. */
    const pd_scene_update all = { .op = PD_UPDATE_RESTORE, .is_rect = 1, .rect_min = { 0, 0 },
                                  .rect_max = { w - 1, h - 1 } };
    assert_int_equal(pd_registry_update_many(r, "door", &all, 1, &res), PD_OK);
    s = pd_registry_acquire(r, "door");
    expect_equals_fresh(s, authored);
    pd_scene_release(s);

    /* An instance's authored state is the cells it was made with. */
    const pd_scene_update wall = { .op = PD_UPDATE_BLOCK, .is_rect = 1, .rect_min = { 0, 5 }, .rect_max = { w - 1, 5 } };
    assert_int_equal(pd_registry_update(r, "door", &wall, &res), PD_OK);
    assert_int_equal(pd_registry_instance(r, "copy", "door", NULL, err, sizeof err), PD_OK);
    memcpy(m, authored, (size_t)w * h);
    model_apply(m, authored, w, &wall);
    const pd_scene_update open_all = { .op = PD_UPDATE_PASS, .is_rect = 1, .rect_min = { 0, 0 },
                                       .rect_max = { w - 1, h - 1 } };
    assert_int_equal(pd_registry_update(r, "copy", &open_all, &res), PD_OK);
    const pd_scene_update back = { .op = PD_UPDATE_RESTORE, .is_rect = 1, .rect_min = { 0, 0 },
                                   .rect_max = { w - 1, h - 1 } };
    assert_int_equal(pd_registry_update(r, "copy", &back, &res), PD_OK);
    s = pd_registry_acquire(r, "copy");
    expect_equals_fresh(s, m);
    pd_scene_release(s);
    pd_registry_destroy(r);
    free(m);
    free(authored);
}

/* Counts its calls; from call stop_at on (0: never) says CANCELLED. */
typedef struct stop_poll {
    unsigned calls, stop_at;
} stop_poll;

static pd_status stop_poll_fn(void *user)
{
    stop_poll *p = user;
    p->calls++;
    return p->stop_at && p->calls >= p->stop_at ? PD_CANCELLED : PD_OK;
}

/* What CreateScene's build checks before the work: a Tiled map's cells on
 * its header (LIMIT_EXCEEDED, naming limits.max_scene_cells, the 8192 x
 * 8192 zstd map of issue 29 refused before its layer is decoded: the poll
 * is asked only around the parse), a text map's before its unit grids;
 * the scene's bytes, estimated exactly for one-byte labels, before they
 * are built; and the poll stops the derive. */
static void test_build_limits(void **state)
{
    (void)state;
    char err[256];
    pd_status st;
    stop_poll sp = { 0 };
    pd_scene_limits lim = { .max_cells = 4096u * 4096u, .poll = stop_poll_fn, .poll_user = &sp };
    pd_conf_scene cs = entry("big", UNITS_123, 3);
    cs.format = PD_MAP_TILED;
    char *big = zero_map_tmx(8192, 8192, 16, 1, "");
    assert_non_null(big);
    assert_null(pd_scene_build(&cs, big, strlen(big), &lim, &st, err, sizeof err));
    assert_int_equal(st, PD_LIMIT_EXCEEDED);
    assert_string_equal(err, "scene 'big': map: $: 8192 x 8192 cells is more than limits.max_scene_cells (16777216)");
    assert_true(sp.calls <= 2);
    free(big);

    /* A text map: 40 x 30 open cells. */
    char text[41 * 30 + 1];
    for (int y = 0; y < 30; y++) {
        memset(text + y * 41, '.', 40);
        text[y * 41 + 40] = '\n';
    }
    text[sizeof text - 1] = '\0';
    cs = entry("field", UNITS_123, 3);
    lim = (pd_scene_limits){ .max_cells = 1000 };
    assert_null(pd_scene_build(&cs, text, strlen(text), &lim, &st, err, sizeof err));
    assert_int_equal(st, PD_LIMIT_EXCEEDED);
    assert_string_equal(err, "scene 'field': 1200 cells, limits.max_scene_cells is 1000");

    /* The estimate is what the scene holds (one component: one-byte
     * labels); one byte short of it is refused. */
    pd_scene *s = pd_scene_build(&cs, text, strlen(text), NULL, &st, err, sizeof err);
    assert_non_null(s);
    assert_int_equal(st, PD_OK);
    uint64_t own = pd_scene_own_bytes(s);
    assert_true(pd_scene_estimate_bytes(40, 30, UNITS_123, 3) == own);
    pd_scene_release(s);
    lim = (pd_scene_limits){ .bytes_cap = 5000000, .bytes_held = 5000000 - own + 1 };
    assert_null(pd_scene_build(&cs, text, strlen(text), &lim, &st, err, sizeof err));
    assert_int_equal(st, PD_LIMIT_EXCEEDED);
    char want[256];
    snprintf(want, sizeof want, "scene 'field': needs at least %llu bytes, scenes hold %llu, "
             "limits.max_scene_bytes is 5000000", (unsigned long long)own, (unsigned long long)(5000000 - own + 1));
    assert_string_equal(err, want);
    lim.bytes_held--;
    s = pd_scene_build(&cs, text, strlen(text), &lim, &st, err, sizeof err);
    assert_non_null(s);
    pd_scene_release(s);

    /* The derive asks the poll before each structure: 1 + 2 per unit size
     * + 1; stopped at any of them, nothing is built. */
    for (unsigned at = 1; at <= 8; at++) {
        sp = (stop_poll){ 0, at };
        lim = (pd_scene_limits){ .poll = stop_poll_fn, .poll_user = &sp };
        assert_null(pd_scene_build(&cs, text, strlen(text), &lim, &st, err, sizeof err));
        assert_int_equal(st, PD_CANCELLED);
        assert_int_equal(sp.calls, at);
        assert_string_equal(err, "scene 'field': stopped while building its unit grids and labels: CANCELLED");
    }
    sp = (stop_poll){ 0, 9 };
    s = pd_scene_build(&cs, text, strlen(text), &lim, &st, err, sizeof err);
    assert_non_null(s);
    assert_int_equal(sp.calls, 8);
    pd_scene_release(s);
}

static void test_conf_fields(void **state)
{
    (void)state;
    static const uint32_t units[] = { 3, 1 };
    pd_conf_scene cs;
    char err[256];
    pd_conf_scene_fields f = { .name = "ok", .format = "movingai", .origin_x = -4, .cell_size = 0.5,
                               .unit_sizes = units, .n_unit_sizes = 2 };
    assert_int_equal(pd_conf_scene_from_fields(&f, &cs, err, sizeof err), 0);
    assert_string_equal(cs.name, "ok");
    assert_int_equal(cs.format, PD_MAP_MOVINGAI);
    assert_true(cs.origin_x == -4 && cs.cell_size == 0.5);
    /* Sorted as the config stores them. */
    assert_int_equal(cs.n_unit_sizes, 2);
    assert_int_equal(cs.unit_sizes[0], 1);
    assert_int_equal(cs.unit_sizes[1], 3);
    assert_null(cs.map_path);
    /* Defaults: cell size 1, unit sizes [1]. */
    pd_conf_scene_fields d = { .name = "d", .format = "ascii" };
    assert_int_equal(pd_conf_scene_from_fields(&d, &cs, err, sizeof err), 0);
    assert_true(cs.cell_size == 1.0);
    assert_int_equal(cs.n_unit_sizes, 1);
    /* Each error names its field as the config would. */
    pd_conf_scene_fields bad = f;
    bad.name = "no spaces";
    assert_int_equal(pd_conf_scene_from_fields(&bad, &cs, err, sizeof err), -1);
    assert_non_null(strstr(err, "scene.name"));
    bad = f;
    bad.format = "png";
    assert_int_equal(pd_conf_scene_from_fields(&bad, &cs, err, sizeof err), -1);
    assert_non_null(strstr(err, "scene.format"));
    bad = f;
    bad.cell_size = -1;
    assert_int_equal(pd_conf_scene_from_fields(&bad, &cs, err, sizeof err), -1);
    assert_non_null(strstr(err, "scene.cell_size"));
    static const uint32_t dup[] = { 2, 2 };
    bad = f;
    bad.unit_sizes = dup;
    assert_int_equal(pd_conf_scene_from_fields(&bad, &cs, err, sizeof err), -1);
    assert_non_null(strstr(err, "scene.unit_sizes"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_build_from_text_equals_cells),
        cmocka_unit_test(test_instances_share_until_changed),
        cmocka_unit_test(test_caps_and_names),
        cmocka_unit_test(test_updates_count_against_the_byte_cap),
        cmocka_unit_test(test_runtime_scenes_survive_publish),
        cmocka_unit_test(test_several_ops_and_restore),
        cmocka_unit_test(test_build_limits),
        cmocka_unit_test(test_conf_fields),
        cmocka_unit_test(test_registry_index_against_a_model),
        cmocka_unit_test(test_instance_adds_cost_the_same_at_any_size),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
