/*
 * test_scene_reload.c - a reload keeps the living state (issue 12): a config
 * scene whose definition did not change is kept as served - the same
 * snapshot, its version and its updates, no structure built again - and
 * only the scenes whose map or entry changed are built anew, with versions
 * that go on past the old ones. What counts as the definition: the grid
 * the map parses to (a comment edited in the file keeps the scene; an
 * external Tiled tileset edited rebuilds it), origin, cell size, unit
 * sizes, "search" and the per-character costs. A kept scene updated
 * between the prepare and the publish is published as updated; one
 * dropped meanwhile refuses the publish. Instances of a template the
 * reload replaces keep the cells they share. The journal records no RESET
 * for a kept scene, and a replay after the reload gives the same scenes.
 * The reload's world takes a kept scene's route tables from the running
 * world (no search) and computes them again for a snapshot that moved
 * between the prepare and the publish. Updates running on another thread
 * while reloads keep the scene lose nothing (TSan runs this file too). A
 * stopped registry's loads build nothing.
 *
 * Maps are written into a temporary directory, so the test can change
 * them between reloads as a designer would.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pd_conf.h"
#include "pd_journal.h"
#include "pd_store.h"
#include "pd_scene.h"
#include "pd_world.h"

/* An 8x5 open room: the wall column the tests close is x = 4. */
static const char *const MAP_A = "........\n........\n........\n........\n........\n";
static const char *const MAP_B = "......\n.##...\n......\n";

typedef struct fixture {
    char dir[64];
} fixture;

static void write_file(const fixture *f, const char *name, const char *text)
{
    char path[160];
    snprintf(path, sizeof path, "%s/%s", f->dir, name);
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(text, 1, strlen(text), fp), strlen(text));
    assert_int_equal(fclose(fp), 0);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/pd-reload-XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    write_file(f, "a.txt", MAP_A);
    write_file(f, "b.txt", MAP_B);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    int rc = system(cmd);
    free(f);
    return rc == 0 ? 0 : -1;
}

/* The config: scene "a" from a.txt with `a_extra` in its entry (e.g.
 * ", \"origin\": [1, 0]"), scene "b" from b.txt, map paths relative to the
 * fixture's directory. */
static void conf_of(const fixture *f, const char *a_extra, pd_conf *c)
{
    char json[1024], err[256] = "";
    snprintf(json, sizeof json,
             "{\"scenes\": [{\"name\": \"a\", \"map\": \"a.txt\", \"format\": \"ascii\"%s},"
             " {\"name\": \"b\", \"map\": \"b.txt\", \"format\": \"ascii\"}]}",
             a_extra ? a_extra : "");
    if (pd_conf_load_buffer(json, strlen(json), "test", f->dir, c, err, sizeof err) != 0)
        fail_msg("config: %s", err);
}

/* Prepares a reload of r to the config and publishes it; returns what
 * publish returned, with the set's counts. */
static int reload(pd_registry *r, const pd_conf *c, size_t *kept, size_t *built)
{
    char err[256] = "";
    pd_scene_set *set = pd_registry_prepare_reload(r, c, err, sizeof err);
    if (!set)
        fail_msg("prepare: %s", err);
    pd_scene_set_counts(set, kept, built);
    return pd_registry_publish(r, set);
}

static void reload_expect(pd_registry *r, const fixture *f, const char *a_extra, size_t want_kept,
                          size_t want_built)
{
    pd_conf c;
    conf_of(f, a_extra, &c);
    size_t kept = 99, built = 99;
    assert_int_equal(reload(r, &c, &kept, &built), 0);
    pd_conf_free(&c);
    assert_int_equal(kept, want_kept);
    assert_int_equal(built, want_built);
}

static pd_registry *loaded(const fixture *f)
{
    pd_registry *r = pd_registry_create();
    assert_non_null(r);
    reload_expect(r, f, NULL, 0, 2); /* an empty registry keeps nothing */
    return r;
}

/* Closes column 4 of "a" but for its last row: the way from the left half
 * to the right half now runs through row 4. */
static uint64_t close_wall(pd_registry *r)
{
    pd_scene_update u = { .op = PD_UPDATE_BLOCK, .is_rect = 1, .rect_min = { 4, 0 }, .rect_max = { 4, 3 } };
    pd_scene_update_result res;
    assert_int_equal(pd_registry_update(r, "a", &u, &res), PD_OK);
    return res.version;
}

static void test_unchanged_scene_keeps_its_updates(void **state)
{
    fixture *f = *state;
    pd_registry *r = loaded(f);
    assert_int_equal(close_wall(r), 2);
    pd_scene *before = pd_registry_acquire(r, "a");
    pd_scene *b_before = pd_registry_acquire(r, "b");

    /* Nothing changed: both kept, the very snapshots served before. */
    reload_expect(r, f, NULL, 2, 0);
    pd_scene *a = pd_registry_acquire(r, "a");
    assert_ptr_equal(a, before);
    assert_int_equal(a->version, 2);
    assert_int_equal(pd_grid_get(a->grid, 4, 0), PD_CELL_BLOCKED);
    pd_scene_release(a);

    /* Only b's map changed: b is built anew past its version, a stays as
     * it is, its unit grid and labels not built again. */
    write_file(f, "b.txt", "......\n.#....\n......\n");
    reload_expect(r, f, NULL, 1, 1);
    a = pd_registry_acquire(r, "a");
    pd_scene *b = pd_registry_acquire(r, "b");
    assert_ptr_equal(a, before);
    assert_ptr_equal(a->units[0].components, before->units[0].components);
    assert_int_equal(a->version, 2);
    assert_ptr_not_equal(b, b_before);
    assert_int_equal(b->version, b_before->version + 1);
    assert_int_equal(pd_grid_get(b->grid, 2, 1), 1);
    assert_int_equal(pd_grid_get(b_before->grid, 2, 1), PD_CELL_BLOCKED);
    /* The labels the kept scene serves still split nothing the wall did not. */
    assert_true(pd_components_connected(a->units[0].components, (pd_point){ 0, 0 }, (pd_point){ 7, 0 }));
    pd_scene_release(a);
    pd_scene_release(b);

    /* A comment added to a.txt changes its bytes, not its grid: kept. */
    write_file(f, "a.txt", "; the room\n........\n........\n........\n........\n........\n");
    reload_expect(r, f, NULL, 2, 0);
    a = pd_registry_acquire(r, "a");
    assert_ptr_equal(a, before);
    pd_scene_release(a);

    /* One cell of a.txt changed: a is built anew from the file, and the
     * update is gone with the map it was made on. */
    write_file(f, "a.txt", "........\n........\n........\n........\n.......#\n");
    reload_expect(r, f, NULL, 1, 1);
    a = pd_registry_acquire(r, "a");
    assert_int_equal(a->version, 3);
    assert_int_equal(pd_grid_get(a->grid, 4, 0), 1);
    assert_int_equal(pd_grid_get(a->grid, 7, 4), PD_CELL_BLOCKED);
    pd_scene_release(a);
    pd_scene_release(before);
    pd_scene_release(b_before);
    pd_registry_destroy(r);
}

/* Every part of the entry that shapes the scene rebuilds it when it
 * changes; the version goes on from the one served. */
static void test_entry_changes_rebuild(void **state)
{
    fixture *f = *state;
    pd_registry *r = loaded(f);
    close_wall(r);
    static const char *const entries[] = {
        ", \"origin\": [1, 0]",
        ", \"origin\": [1, 0], \"cell_size\": 0.5",
        ", \"origin\": [1, 0], \"cell_size\": 0.5, \"unit_sizes\": [1, 2]",
        ", \"origin\": [1, 0], \"cell_size\": 0.5, \"unit_sizes\": [1, 2], \"search\": \"astar\"",
    };
    uint64_t version = 2;
    for (size_t i = 0; i < sizeof entries / sizeof *entries; i++) {
        reload_expect(r, f, entries[i], 1, 1);
        pd_scene *a = pd_registry_acquire(r, "a");
        assert_int_equal(a->version, ++version);
        assert_int_equal(pd_grid_get(a->grid, 4, 0), 1); /* built from the file */
        pd_scene_release(a);
        /* The same entry again: kept. */
        reload_expect(r, f, entries[i], 2, 0);
    }
    pd_scene *a = pd_registry_acquire(r, "a");
    assert_true(a->origin_x == 1.0 && a->cell_size == 0.5 && a->n_unit_sizes == 2);
    assert_int_equal(a->search, PD_CONF_SEARCH_ASTAR);
    pd_scene_release(a);
    pd_registry_destroy(r);
}

static uint64_t incarnation_of(pd_registry *r, const char *name)
{
    pd_scene *s = pd_registry_acquire(r, name);
    assert_non_null(s);
    uint64_t inc = s->incarnation;
    pd_scene_release(s);
    return inc;
}

/* A scene's incarnation goes with its versions: updates and a reload that
 * builds it again keep it; dropped and made again under its name (a
 * reload that adds it back, CreateScene) it is another scene, and so is
 * an instance. */
static void test_incarnations(void **state)
{
    fixture *f = *state;
    pd_registry *r = loaded(f);
    uint64_t a = incarnation_of(r, "a");
    assert_int_not_equal(a, 0);
    assert_int_not_equal(incarnation_of(r, "b"), a);
    pd_scene_update u = { .op = PD_UPDATE_BLOCK, .is_rect = 1, .rect_min = { 4, 0 }, .rect_max = { 4, 3 } };
    pd_scene_update_result res;
    assert_int_equal(pd_registry_update(r, "a", &u, &res), PD_OK);
    assert_int_equal(res.incarnation, a);
    assert_int_equal(incarnation_of(r, "a"), a);
    reload_expect(r, f, ", \"origin\": [1, 0]", 1, 1);
    assert_int_equal(incarnation_of(r, "a"), a);
    char err[256];
    assert_int_equal(pd_registry_instance(r, "copy", "a", NULL, err, sizeof err), PD_OK);
    assert_int_not_equal(incarnation_of(r, "copy"), a);
    assert_int_equal(pd_registry_drop(r, "a", NULL), PD_OK);
    reload_expect(r, f, ", \"origin\": [1, 0]", 1, 1);
    uint64_t again = incarnation_of(r, "a");
    assert_int_not_equal(again, a);
    pd_scene *s = pd_registry_acquire(r, "a");
    assert_int_equal(s->version, 1);
    pd_scene_release(s);
    pd_registry_destroy(r);
}

/* A server that stops ends the loads of its config (issue 29 finding 6):
 * once pd_registry_stop_loads, a scene the reload must build fails its
 * derive with CANCELLED (a Tiled map's parse too, test_tiled_cost.c) and
 * the registry keeps serving what it served; a scene kept as served needs
 * no build. */
static void test_stopped_loads(void **state)
{
    fixture *f = *state;
    pd_registry *r = loaded(f);
    pd_registry_stop_loads(r);
    pd_conf c;
    conf_of(f, ", \"origin\": [1, 0]", &c);
    char err[256] = "";
    assert_null(pd_registry_prepare_reload(r, &c, err, sizeof err));
    assert_string_equal(err, "scene 'a': stopped while building its unit grids and labels: CANCELLED");
    pd_conf_free(&c);
    pd_scene *a = pd_registry_acquire(r, "a");
    assert_true(a->origin_x == 0.0 && a->version == 1);
    pd_scene_release(a);
    reload_expect(r, f, NULL, 2, 0);
    pd_registry_destroy(r);
}

/* Moving AI per-character costs shape the grid, so they count. */
static void test_costs_count(void **state)
{
    fixture *f = *state;
    write_file(f, "m.map", "type octile\nheight 2\nwidth 3\nmap\n.S.\n...\n");
    char json[512], err[256] = "";
    pd_registry *r = pd_registry_create();
    const char *costs[] = { "", ", \"costs\": {\"S\": 3}", ", \"costs\": {\"S\": 3}" };
    const size_t want_kept[] = { 0, 0, 1 };
    for (size_t i = 0; i < 3; i++) {
        snprintf(json, sizeof json, "{\"scenes\": [{\"name\": \"m\", \"map\": \"m.map\", \"format\": \"movingai\"%s}]}",
                 costs[i]);
        pd_conf c;
        assert_int_equal(pd_conf_load_buffer(json, strlen(json), "test", f->dir, &c, err, sizeof err), 0);
        size_t kept = 9, built = 9;
        assert_int_equal(reload(r, &c, &kept, &built), 0);
        pd_conf_free(&c);
        assert_int_equal(kept, want_kept[i]);
        assert_int_equal(built, 1 - want_kept[i]);
    }
    pd_scene *m = pd_registry_acquire(r, "m");
    assert_int_equal(m->version, 2);
    assert_int_equal(pd_grid_get(m->grid, 1, 0), 3);
    pd_scene_release(m);
    pd_registry_destroy(r);
}

/* A Tiled map's external tileset is part of its definition: the .tmx is
 * the same bytes, the .tsx makes a wall a floor, and the scene is built
 * again. */
static void test_external_tileset_counts(void **state)
{
    fixture *f = *state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "cp -r '%s/tiled/external.tmx' '%s/tiled/walls.tsx' '%s/tiled/sub' '%s/'",
             PD_TEST_DATA_DIR, PD_TEST_DATA_DIR, PD_TEST_DATA_DIR, f->dir);
    assert_int_equal(system(cmd), 0);
    const char *json = "{\"scenes\": [{\"name\": \"t\", \"map\": \"external.tmx\", \"format\": \"tiled\"}]}";
    char err[256] = "";
    pd_conf c;
    if (pd_conf_load_buffer(json, strlen(json), "test", f->dir, &c, err, sizeof err) != 0)
        fail_msg("%s", err);
    pd_registry *r = pd_registry_create();
    size_t kept, built;
    assert_int_equal(reload(r, &c, &kept, &built), 0);
    pd_scene *t = pd_registry_acquire(r, "t");
    /* Tile 4 (walls.tsx's tile 1) at 0,1 is a wall. */
    assert_int_equal(pd_grid_get(t->grid, 0, 1), PD_CELL_BLOCKED);
    pd_scene_release(t);
    assert_int_equal(reload(r, &c, &kept, &built), 0);
    assert_int_equal(kept, 1);

    snprintf(cmd, sizeof cmd, "sed -i 's/name=\"blocked\" type=\"bool\" value=\"true\"/name=\"cost\" type=\"int\" value=\"5\"/' '%s/walls.tsx'",
             f->dir);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(reload(r, &c, &kept, &built), 0);
    assert_int_equal(kept, 0);
    assert_int_equal(built, 1);
    t = pd_registry_acquire(r, "t");
    assert_int_equal(t->version, 2);
    assert_int_equal(pd_grid_get(t->grid, 0, 1), 5);
    pd_scene_release(t);
    pd_conf_free(&c);
    pd_registry_destroy(r);
}

/* Between the prepare and the publish the served scene goes on: an update
 * then is published with it; a drop refuses the publish, which changes
 * nothing, and the next prepare builds the scene from its file. */
static void test_changes_between_prepare_and_publish(void **state)
{
    fixture *f = *state;
    pd_registry *r = loaded(f);
    pd_conf c;
    conf_of(f, NULL, &c);
    char err[256];
    pd_scene_set *set = pd_registry_prepare_reload(r, &c, err, sizeof err);
    assert_non_null(set);
    assert_int_equal(close_wall(r), 2);
    assert_int_equal(pd_registry_publish(r, set), 0);
    pd_scene *a = pd_registry_acquire(r, "a");
    assert_int_equal(a->version, 2);
    assert_int_equal(pd_grid_get(a->grid, 4, 0), PD_CELL_BLOCKED);
    pd_scene_release(a);

    set = pd_registry_prepare_reload(r, &c, err, sizeof err);
    assert_non_null(set);
    pd_scene *b = pd_registry_acquire(r, "b");
    assert_int_equal(pd_registry_drop(r, "a", NULL), PD_OK);
    assert_int_equal(pd_registry_publish(r, set), -1);
    assert_null(pd_registry_acquire(r, "a"));
    pd_scene *b_now = pd_registry_acquire(r, "b");
    assert_ptr_equal(b_now, b);
    pd_scene_release(b_now);
    pd_scene_release(b);

    size_t kept, built;
    assert_int_equal(reload(r, &c, &kept, &built), 0);
    assert_int_equal(kept, 1);
    assert_int_equal(built, 1);
    a = pd_registry_acquire(r, "a");
    assert_int_equal(a->version, 1);
    assert_int_equal(pd_grid_get(a->grid, 4, 0), 1);
    pd_scene_release(a);
    pd_conf_free(&c);
    pd_registry_destroy(r);
}

/* A scene made at run time under a config scene's name is replaced by the
 * config's, never kept, even with the same cells. */
static void test_runtime_scene_is_replaced(void **state)
{
    fixture *f = *state;
    pd_registry *r = pd_registry_create();
    pd_conf c;
    conf_of(f, NULL, &c);
    char err[256];
    pd_scene *made = pd_scene_load(&c.scenes[0], err, sizeof err);
    assert_non_null(made);
    assert_int_equal(pd_registry_add(r, made, err, sizeof err), PD_OK);
    size_t kept, built;
    assert_int_equal(reload(r, &c, &kept, &built), 0);
    assert_int_equal(kept, 0);
    assert_int_equal(built, 2);
    pd_scene *a = pd_registry_acquire(r, "a");
    assert_int_equal(a->runtime, 0);
    assert_int_equal(a->version, 2);
    pd_scene_release(a);
    pd_conf_free(&c);
    pd_registry_destroy(r);
}

/* Instances stay served through a reload whatever happens to their
 * template: one of a kept template still shares its cells; one of a
 * replaced template keeps the cells it shared (the old snapshot lives on
 * for it) and its version. */
static void test_instances_of_kept_and_replaced_templates(void **state)
{
    fixture *f = *state;
    pd_registry *r = loaded(f);
    close_wall(r);
    uint64_t v;
    char err[256];
    assert_int_equal(pd_registry_instance(r, "a-copy", "a", &v, err, sizeof err), PD_OK);
    assert_int_equal(pd_registry_instance(r, "b-copy", "b", &v, err, sizeof err), PD_OK);
    /* b's map walled up but for one cell (a map with none is refused). */
    write_file(f, "b.txt", "######\n######\n#####.\n");
    reload_expect(r, f, NULL, 1, 1);
    pd_scene *a = pd_registry_acquire(r, "a"), *ac = pd_registry_acquire(r, "a-copy");
    pd_scene *b = pd_registry_acquire(r, "b"), *bc = pd_registry_acquire(r, "b-copy");
    assert_non_null(ac);
    assert_non_null(bc);
    assert_ptr_equal(ac->grid, a->grid);
    assert_int_equal(ac->version, 1);
    assert_int_equal(bc->version, 1);
    assert_int_equal(b->version, 2);
    assert_ptr_not_equal(bc->grid, b->grid);
    assert_int_equal(pd_grid_get(bc->grid, 0, 0), 1);
    assert_int_equal(pd_grid_get(bc->grid, 1, 1), PD_CELL_BLOCKED);
    assert_int_equal(pd_grid_get(b->grid, 0, 0), PD_CELL_BLOCKED);
    pd_scene_release(a);
    pd_scene_release(ac);
    pd_scene_release(b);
    pd_scene_release(bc);
    pd_registry_destroy(r);
}

/* A store over r with j as its change log, as the daemon makes changes
 * (pd_store.h); free it with pd_store_destroy. */
static pd_store *store_of(pd_journal *j, pd_registry *r)
{
    pd_store *st = pd_store_create(r, NULL);
    assert_non_null(st);
    pd_store_set_log(st, pd_journal_changelog(j));
    return st;
}

static void journalled_update(pd_journal *j, pd_registry *r, const char *name, const pd_scene_update *u)
{
    pd_store *st = store_of(j, r);
    pd_store_update out;
    if (pd_store_update_cells(st, name, u, 1, &out) != PD_OK)
        fail_msg("update of %s: %s", name, out.message);
    pd_store_destroy(st);
}

static void journalled_instance(pd_journal *j, pd_registry *r, const char *name, const char *tmpl)
{
    pd_store *st = store_of(j, r);
    pd_store_change out;
    if (pd_store_add_instance(st, name, tmpl, &out) != PD_OK)
        fail_msg("instance %s of %s: %s", name, tmpl, out.message);
    pd_store_destroy(st);
}

/* Every scene of a is served by b with the same version and cells. */
static void assert_same_scenes(pd_registry *a, pd_registry *b)
{
    pd_scene **la, **lb;
    size_t na = pd_registry_list(a, &la), nb = pd_registry_list(b, &lb);
    assert_int_equal(na, nb);
    for (size_t i = 0; i < na; i++) {
        const pd_scene *x = la[i], *y = lb[i];
        assert_string_equal(x->name, y->name);
        if (x->version != y->version)
            fail_msg("scene '%s': version %llu served, %llu replayed", x->name, (unsigned long long)x->version,
                     (unsigned long long)y->version);
        assert_int_equal(x->grid->width, y->grid->width);
        assert_int_equal(x->grid->height, y->grid->height);
        for (int32_t yy = 0; yy < x->grid->height; yy++)
            for (int32_t xx = 0; xx < x->grid->width; xx++)
                if (pd_grid_get(x->grid, xx, yy) != pd_grid_get(y->grid, xx, yy))
                    fail_msg("scene '%s' cell (%d, %d): %d served, %d replayed", x->name, xx, yy,
                             pd_grid_get(x->grid, xx, yy), pd_grid_get(y->grid, xx, yy));
    }
    pd_registry_release_list(la, na);
    pd_registry_release_list(lb, nb);
}

/* A registry loaded from c with the journal at o replayed over it, as a
 * restart makes it. */
static pd_registry *replayed(const pd_journal_opts *o, const pd_conf *c, pd_journal_replay_stats *st)
{
    char err[512];
    pd_registry *r = pd_registry_create();
    assert_int_equal(pd_registry_load(r, c, err, sizeof err), 0);
    pd_journal *j = pd_journal_open(o, r, NULL, st, err, sizeof err);
    if (!j)
        fail_msg("replay: %s", err);
    pd_journal_close(j);
    return r;
}

/* A reload of r to c as the daemon journals it (the change lock around
 * the publish). */
static void journalled_reload(pd_journal *j, pd_registry *r, const pd_conf *c)
{
    char err[256] = "";
    pd_scene_set *set = pd_registry_prepare_reload(r, c, err, sizeof err);
    if (!set)
        fail_msg("prepare: %s", err);
    pd_store *st = store_of(j, r);
    void *rl = pd_store_reload_begin(st, set);
    assert_int_equal(pd_registry_publish(r, set), 0);
    pd_store_reload_end(st, rl);
    pd_store_destroy(st);
}

/* The journal of a reload that keeps "a" (updated) and rebuilds "b": one
 * RESET, for b; a replay into a registry loaded from the config as it is
 * now gives the same scenes, versions and cells. */
static void test_journal_of_a_reload(void **state)
{
    fixture *f = *state;
    char data[96];
    snprintf(data, sizeof data, "%s/data", f->dir);
    pd_registry *live = loaded(f);
    pd_journal_opts o = { .dir = data, .fsync = PD_CONF_FSYNC_NO, .compact_bytes = 1u << 30 };
    char err[512];
    pd_journal *j = pd_journal_open(&o, live, NULL, NULL, err, sizeof err);
    assert_non_null(j);
    pd_scene_update u = { .op = PD_UPDATE_BLOCK, .is_rect = 1, .rect_min = { 4, 0 }, .rect_max = { 4, 3 } };
    pd_scene_update_result res;
    assert_int_equal(pd_journal_lock(j), 0);
    assert_int_equal(pd_registry_update(live, "a", &u, &res), PD_OK);
    assert_int_equal(pd_journal_append_update(j, "a", res.version, &u, 1), 0);
    pd_journal_unlock(j);

    write_file(f, "b.txt", "......\n......\n......\n");
    pd_conf c;
    conf_of(f, NULL, &c);
    journalled_reload(j, live, &c);
    pd_journal_close(j);

    pd_journal_replay_stats st;
    pd_registry *again = replayed(&o, &c, &st);
    assert_int_equal(st.records, 2); /* UPDATE a, RESET b */
    assert_int_equal(st.skipped, 0);
    assert_same_scenes(live, again);
    pd_conf_free(&c);
    pd_registry_destroy(again);
    pd_registry_destroy(live);
}

/* Issue 29 finding 2: instances of a config scene that a reload builds
 * anew, then a crash before the compaction the reload asks for. The log
 * then holds their INSTANCE records (naming the template by name and
 * version) before the reload's RESET; the config now loads the new map
 * at version 1, so those records alone would replay the instances onto
 * the new map. The reload records their cells, and a replay into a
 * registry loaded from the new config serves every scene as it was served
 * - an unchanged instance, a changed one, an instance of an instance, and
 * updates made after the reload. Before the fix a-1 and a-3 came back
 * with the new map's wall. */
static void test_journal_keeps_instances_of_a_replaced_template(void **state)
{
    fixture *f = *state;
    char data[96], err[512];
    snprintf(data, sizeof data, "%s/data", f->dir);
    pd_registry *live = loaded(f);
    pd_journal_opts o = { .dir = data, .fsync = PD_CONF_FSYNC_NO, .compact_bytes = 1u << 30 };
    pd_journal *j = pd_journal_open(&o, live, NULL, NULL, err, sizeof err);
    assert_non_null(j);
    journalled_instance(j, live, "a-1", "a");
    journalled_instance(j, live, "a-2", "a");
    pd_scene_update u = { .op = PD_UPDATE_COST, .cost = 5, .is_rect = 1, .rect_min = { 0, 0 }, .rect_max = { 1, 1 } };
    journalled_update(j, live, "a-2", &u);
    journalled_instance(j, live, "a-3", "a-1");

    /* The designer walls off column 2 of a; the reload builds a anew at
     * version 2 (the config loads it at 1 after a restart). */
    write_file(f, "a.txt", "..#.....\n..#.....\n..#.....\n..#.....\n........\n");
    pd_conf c;
    conf_of(f, NULL, &c);
    journalled_reload(j, live, &c);
    pd_scene *a1 = pd_registry_acquire(live, "a-1");
    assert_int_equal(pd_grid_get(a1->grid, 2, 0), 1); /* still the old map's open cell */
    pd_scene_release(a1);
    u.cost = 7;
    journalled_update(j, live, "a-1", &u);
    journalled_update(j, live, "a-3", &u);
    journalled_instance(j, live, "a-4", "a"); /* of the new map */
    pd_journal_close(j);  /* no compaction: the crash came first */

    pd_journal_replay_stats st;
    pd_registry *again = replayed(&o, &c, &st);
    assert_int_equal(st.skipped, 0);
    assert_same_scenes(live, again);
    pd_conf_free(&c);
    pd_registry_destroy(again);
    pd_registry_destroy(live);
}

/* Portals a(0,2)-b(5,1) and a(7,2)-b(0,1): a's table prices the way
 * across a, from one end to the other. */
static void conf_with_portals(const fixture *f, pd_conf *c)
{
    const char *json =
        "{\"scenes\": [{\"name\": \"a\", \"map\": \"a.txt\", \"format\": \"ascii\"},"
        " {\"name\": \"b\", \"map\": \"b.txt\", \"format\": \"ascii\"}],"
        " \"portals\": [{\"name\": \"west\", \"a\": {\"scene\": \"a\", \"cell\": [0, 2]}, \"b\": {\"scene\": \"b\", \"cell\": [5, 1]}},"
        " {\"name\": \"east\", \"a\": {\"scene\": \"a\", \"cell\": [7, 2]}, \"b\": {\"scene\": \"b\", \"cell\": [0, 1]}}]}";
    char err[256] = "";
    if (pd_conf_load_buffer(json, strlen(json), "test", f->dir, c, err, sizeof err) != 0)
        fail_msg("config: %s", err);
}

/* Routes b(1,0) -> b(4,2) and b(1,0) -> a(7,4) cost on w what they cost
 * on a world built from scratch over the scenes r serves. */
static void assert_route_as_fresh(pd_world *w, pd_registry *r, const pd_conf *c)
{
    char err[256];
    pd_world *fresh = pd_world_build_from_registry(&c->world, r, err, sizeof err);
    assert_non_null(fresh);
    pd_search_ctx *ctx = pd_search_ctx_create();
    pd_world_query q = { .from_scene = "b", .start = { 1, 0 }, .to_scene = "b", .goal = { 4, 2 } };
    pd_world_route x, y;
    assert_int_equal(pd_world_plan(w, ctx, &q, &x), PD_OK);
    assert_int_equal(pd_world_plan(fresh, ctx, &q, &y), PD_OK);
    assert_true(x.total_cost == y.total_cost);
    q.to_scene = "a";
    q.goal = (pd_point){ 7, 4 };
    pd_world_route_free(&x);
    pd_world_route_free(&y);
    assert_int_equal(pd_world_plan(w, ctx, &q, &x), PD_OK);
    assert_int_equal(pd_world_plan(fresh, ctx, &q, &y), PD_OK);
    assert_true(x.total_cost == y.total_cost);
    pd_world_route_free(&x);
    pd_world_route_free(&y);
    pd_search_ctx_destroy(ctx);
    pd_world_release(fresh);
}

static void test_world_of_a_reload(void **state)
{
    fixture *f = *state;
    pd_conf c;
    conf_with_portals(f, &c);
    char err[256];
    pd_registry *r = pd_registry_create();
    pd_world_store *store = pd_world_store_create();
    pd_scene_set *set = pd_registry_prepare_reload(r, &c, err, sizeof err);
    assert_non_null(set);
    pd_world *w = pd_world_build_from_set(&c.world, set, NULL, err, sizeof err);
    assert_non_null(w);
    assert_int_equal(pd_world_store_publish_reload(store, r, set, w), 0);
    assert_int_equal(close_wall(r), 2);
    assert_int_equal(pd_world_store_refresh(store, r, "a", err, sizeof err), PD_OK);

    /* Nothing changed: every table comes from the running world. */
    pd_world *running = pd_world_store_acquire(store);
    set = pd_registry_prepare_reload(r, &c, err, sizeof err);
    w = pd_world_build_from_set(&c.world, set, running, err, sizeof err);
    assert_non_null(w);
    pd_world_stats st;
    pd_world_get_stats(w, &st);
    assert_int_equal(st.table_searches, 0);
    pd_world_release(running);
    assert_int_equal(pd_world_store_publish_reload(store, r, set, w), 0);
    pd_world *now = pd_world_store_acquire(store);
    assert_ptr_equal(now, w);
    assert_route_as_fresh(now, r, &c);
    pd_world_release(now);

    /* b's map changed, and a is updated after the prepare: b's tables and
     * a's are computed, over the snapshots the registry serves. */
    write_file(f, "b.txt", "......\n......\n.#....\n");
    running = pd_world_store_acquire(store);
    set = pd_registry_prepare_reload(r, &c, err, sizeof err);
    w = pd_world_build_from_set(&c.world, set, running, err, sizeof err);
    pd_world_release(running);
    assert_non_null(w);
    pd_world_get_stats(w, &st);
    assert_int_equal(st.table_searches, 2); /* b's two ends, both ways; a's copied */
    pd_scene_update open_row = { .op = PD_UPDATE_PASS, .is_rect = 1, .rect_min = { 4, 2 }, .rect_max = { 4, 2 } };
    assert_int_equal(pd_registry_update(r, "a", &open_row, NULL), PD_OK);
    assert_int_equal(pd_world_store_publish_reload(store, r, set, w), 0);
    now = pd_world_store_acquire(store);
    pd_scene *a = pd_registry_acquire(r, "a");
    assert_int_equal(a->version, 3);
    assert_ptr_equal(pd_world_scene(now, "a"), a);
    assert_route_as_fresh(now, r, &c);
    pd_scene_release(a);
    pd_world_release(now);
    pd_world_store_destroy(store);
    pd_registry_destroy(r);
    pd_conf_free(&c);
}

/* Updates on one thread while the main thread reloads the unchanged
 * config: every reload keeps both scenes, and every update lands - the
 * version at the end counts them all, and no version seen goes back. */
#define T_UPDATES 400
#define T_MIN_RELOADS 20

typedef struct updater {
    pd_registry *r;
    atomic_int done;
    int bad;
} updater;

static void *updater_main(void *arg)
{
    updater *u = arg;
    for (int i = 0; i < T_UPDATES; i++) {
        pd_scene_update op = { .op = i % 2 ? PD_UPDATE_PASS : PD_UPDATE_BLOCK, .is_rect = 1,
                               .rect_min = { 2, 2 }, .rect_max = { 2, 2 } };
        pd_scene_update_result res;
        if (pd_registry_update(u->r, "a", &op, &res) != PD_OK || res.version != (uint64_t)i + 2)
            u->bad++;
    }
    atomic_store(&u->done, 1);
    return NULL;
}

static void test_updates_during_reloads(void **state)
{
    fixture *f = *state;
    pd_registry *r = loaded(f);
    pd_conf c;
    conf_of(f, NULL, &c);
    updater u = { .r = r };
    atomic_init(&u.done, 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, updater_main, &u), 0);
    int reloads = 0;
    uint64_t last = 0;
    while (!atomic_load(&u.done) || reloads < T_MIN_RELOADS) {
        size_t kept = 0, built = 0;
        assert_int_equal(reload(r, &c, &kept, &built), 0);
        assert_int_equal(kept, 2);
        pd_scene *a = pd_registry_acquire(r, "a");
        assert_true(a->version >= last);
        last = a->version;
        pd_scene_release(a);
        reloads++;
    }
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(u.bad, 0);
    pd_scene *a = pd_registry_acquire(r, "a");
    assert_int_equal(a->version, T_UPDATES + 1);
    assert_int_equal(pd_grid_get(a->grid, 2, 2), 1); /* the last update opened it */
    pd_scene_release(a);
    pd_conf_free(&c);
    pd_registry_destroy(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_unchanged_scene_keeps_its_updates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_entry_changes_rebuild, setup, teardown),
        cmocka_unit_test_setup_teardown(test_incarnations, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stopped_loads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_costs_count, setup, teardown),
        cmocka_unit_test_setup_teardown(test_external_tileset_counts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_changes_between_prepare_and_publish, setup, teardown),
        cmocka_unit_test_setup_teardown(test_runtime_scene_is_replaced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_instances_of_kept_and_replaced_templates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_journal_of_a_reload, setup, teardown),
        cmocka_unit_test_setup_teardown(test_journal_keeps_instances_of_a_replaced_template, setup, teardown),
        cmocka_unit_test_setup_teardown(test_world_of_a_reload, setup, teardown),
        cmocka_unit_test_setup_teardown(test_updates_during_reloads, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
