/*
 * test_journal.c - the journal (issue 12, "Durable"): the record format
 * (every record type encoded and decoded back; a torn last record cut at
 * every byte offset; a bad checksum in the middle stops the scan there),
 * and the files: changes appended through the API replay into a fresh
 * registry with the same versions and cells (compared cell by cell and
 * against the authored state RESTORE brings back), a torn or corrupt log
 * is reported with its file and offset and truncated to the last good
 * record, RESET records go back to the config's scenes, and compaction
 * (snapshot plus tail) replays to the same state with instances still
 * sharing their template's cells. A full disk (RLIMIT_FSIZE here) loses
 * nothing acknowledged: a log whose magic could not be written is not left
 * behind, an empty one gets its magic before any record, and a change the
 * log refused is never served, so its version is never shown twice.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "pd_journal.h"
#include "pd_store.h"
#include "same_scene.h"
#include "test_rng.h"

static const uint32_t UNITS_12[] = { 1, 2 };

static pd_conf_scene entry(const char *name)
{
    pd_conf_scene cs;
    memset(&cs, 0, sizeof cs);
    snprintf(cs.name, sizeof cs.name, "%s", name);
    cs.format = PD_MAP_ASCII;
    cs.cell_size = 0.5;
    cs.origin_x = -3;
    cs.origin_y = 7.25;
    memcpy(cs.unit_sizes, UNITS_12, sizeof UNITS_12);
    cs.n_unit_sizes = 2;
    return cs;
}

static uint8_t *random_cells(uint64_t *rng, int32_t w, int32_t h)
{
    uint8_t *c = malloc((size_t)w * (size_t)h);
    assert_non_null(c);
    for (size_t i = 0; i < (size_t)w * (size_t)h; i++) {
        int32_t r = rng_below(rng, 100);
        c[i] = r < 20 ? 0 : r < 25 ? (uint8_t)(2 + rng_below(rng, 8)) : 1;
    }
    return c;
}

static pd_scene *scene_of(const char *name, const uint8_t *cells, int32_t w, int32_t h)
{
    pd_conf_scene cs = entry(name);
    char err[256];
    pd_scene *s = pd_scene_from_cells(&cs, w, h, cells, err, sizeof err);
    if (!s)
        fail_msg("%s", err);
    return s;
}

/* ---- the record format ---------------------------------------------------- */

static void encode(const pd_journal_record *rec, uint8_t **buf, size_t *len)
{
    assert_int_equal(pd_journal_encode(rec, buf, len), 0);
    assert_true(*len > PD_JOURNAL_HEADER_BYTES);
}

static void decode(const uint8_t *framed, size_t len, pd_journal_record *out)
{
    char err[128];
    pd_journal_scan_result res;
    pd_journal_scan(framed, len, NULL, NULL, &res);
    assert_int_equal(res.records, 1);
    assert_false(res.damaged);
    if (pd_journal_decode(framed + PD_JOURNAL_HEADER_BYTES, len - PD_JOURNAL_HEADER_BYTES, out, err, sizeof err) != 0)
        fail_msg("decode: %s", err);
}

static void test_round_trip_every_type(void **state)
{
    (void)state;
    uint64_t rng = 0x5eed;
    uint8_t *cells = random_cells(&rng, 37, 11), *authored = random_cells(&rng, 37, 11);
    pd_point pts[3] = { { 1, 2 }, { -5, 70000 }, { 36, 10 } };
    pd_scene_update ops[3] = {
        { .op = PD_UPDATE_BLOCK, .is_rect = 1, .rect_min = { 2, 3 }, .rect_max = { 9, 10 } },
        { .op = PD_UPDATE_COST, .cost = 200, .cells = pts, .n_cells = 3 },
        { .op = PD_UPDATE_RESTORE, .is_rect = 0, .cells = pts, .n_cells = 0 },
    };
    pd_journal_record recs[] = {
        { .type = PD_JOURNAL_SCENE, .scene = "arena", .version = 7, .runtime = 1, .origin_x = -3.5,
          .origin_y = 1e9, .cell_size = 0.125, .unit_sizes = { 1, 3, 16 }, .n_unit_sizes = 3,
          .search = PD_CONF_SEARCH_JPS, .width = 37, .height = 11, .cells = cells, .authored = authored },
        { .type = PD_JOURNAL_BASE, .scene = "b", .version = 1, .base_id = 4, .cell_size = 1, .unit_sizes = { 2 },
          .n_unit_sizes = 1, .width = 37, .height = 11, .cells = cells },
        { .type = PD_JOURNAL_INSTANCE, .scene = "arena-1", .version = 1, .tmpl = "arena", .tmpl_version = 7 },
        { .type = PD_JOURNAL_INSTANCE_OF_BASE, .scene = "arena-2", .version = 3, .base_id = 4 },
        { .type = PD_JOURNAL_DROP, .scene = "arena-1", .version = 9 },
        { .type = PD_JOURNAL_RESET, .scene = "town", .version = 12345678901234ull },
        { .type = PD_JOURNAL_UPDATE, .scene = "arena", .version = 8, .ops = ops, .n_ops = 3 },
    };
    for (size_t i = 0; i < sizeof recs / sizeof *recs; i++) {
        const pd_journal_record *in = &recs[i];
        uint8_t *buf;
        size_t len;
        encode(in, &buf, &len);
        pd_journal_record out;
        decode(buf, len, &out);
        assert_int_equal(out.type, in->type);
        assert_string_equal(out.scene, in->scene);
        assert_int_equal(out.version, in->version);
        if (in->type == PD_JOURNAL_SCENE || in->type == PD_JOURNAL_BASE) {
            assert_int_equal(out.runtime, in->runtime);
            assert_true(out.origin_x == in->origin_x && out.origin_y == in->origin_y && out.cell_size == in->cell_size);
            assert_int_equal(out.n_unit_sizes, in->n_unit_sizes);
            assert_memory_equal(out.unit_sizes, in->unit_sizes, in->n_unit_sizes * sizeof *in->unit_sizes);
            assert_int_equal(out.search, in->search);
            assert_int_equal(out.width, 37);
            assert_int_equal(out.height, 11);
            assert_memory_equal(out.cells, cells, 37 * 11);
            if (in->authored)
                assert_memory_equal(out.authored, authored, 37 * 11);
            else
                assert_null(out.authored);
            assert_int_equal(out.base_id, in->base_id);
        }
        if (in->type == PD_JOURNAL_INSTANCE) {
            assert_string_equal(out.tmpl, in->tmpl);
            assert_int_equal(out.tmpl_version, in->tmpl_version);
        }
        if (in->type == PD_JOURNAL_INSTANCE_OF_BASE)
            assert_int_equal(out.base_id, in->base_id);
        if (in->type == PD_JOURNAL_UPDATE) {
            assert_int_equal(out.n_ops, 3);
            for (size_t k = 0; k < 3; k++) {
                assert_int_equal(out.ops[k].op, ops[k].op);
                assert_int_equal(out.ops[k].cost, ops[k].cost);
                assert_int_equal(out.ops[k].is_rect, ops[k].is_rect);
                if (ops[k].is_rect) {
                    assert_memory_equal(&out.ops[k].rect_min, &ops[k].rect_min, sizeof ops[k].rect_min);
                    assert_memory_equal(&out.ops[k].rect_max, &ops[k].rect_max, sizeof ops[k].rect_max);
                } else {
                    assert_int_equal(out.ops[k].n_cells, ops[k].n_cells);
                    if (ops[k].n_cells)
                        assert_memory_equal(out.ops[k].cells, ops[k].cells, ops[k].n_cells * sizeof *pts);
                }
            }
        }
        /* Every byte of the payload counts: one less is refused. */
        char err[128];
        pd_journal_record shorter;
        assert_int_equal(pd_journal_decode(buf + PD_JOURNAL_HEADER_BYTES, len - PD_JOURNAL_HEADER_BYTES - 1,
                                           &shorter, err, sizeof err),
                         -1);
        pd_journal_record_free(&out);
        free(buf);
    }
    free(cells);
    free(authored);
}

/* Three records one after the other; offsets[i] is where record i starts. */
static uint8_t *three_records(size_t offsets[4])
{
    pd_point cell = { 3, 4 };
    pd_scene_update op = { .op = PD_UPDATE_BLOCK, .cells = &cell, .n_cells = 1 };
    pd_journal_record recs[3] = {
        { .type = PD_JOURNAL_INSTANCE, .scene = "i", .version = 1, .tmpl = "t", .tmpl_version = 2 },
        { .type = PD_JOURNAL_UPDATE, .scene = "i", .version = 2, .ops = &op, .n_ops = 1 },
        { .type = PD_JOURNAL_UPDATE, .scene = "i", .version = 3, .ops = &op, .n_ops = 1 },
    };
    uint8_t *all = NULL;
    offsets[0] = 0;
    for (int i = 0; i < 3; i++) {
        uint8_t *buf;
        size_t len;
        encode(&recs[i], &buf, &len);
        all = realloc(all, offsets[i] + len);
        assert_non_null(all);
        memcpy(all + offsets[i], buf, len);
        offsets[i + 1] = offsets[i] + len;
        free(buf);
    }
    return all;
}

static void test_torn_tail_at_every_offset(void **state)
{
    (void)state;
    size_t off[4];
    uint8_t *all = three_records(off);
    pd_journal_scan_result res;
    pd_journal_scan(all, off[3], NULL, NULL, &res);
    assert_int_equal(res.records, 3);
    assert_int_equal(res.good_end, off[3]);
    assert_false(res.damaged);
    for (size_t cut = off[2]; cut < off[3]; cut++) {
        pd_journal_scan(all, cut, NULL, NULL, &res);
        assert_int_equal(res.records, 2);
        assert_int_equal(res.good_end, off[2]);
        assert_int_equal(res.damaged, cut > off[2]);
        if (cut > off[2])
            assert_non_null(strstr(res.why, "torn"));
    }
    free(all);
}

static void test_bad_checksum_in_the_middle(void **state)
{
    (void)state;
    size_t off[4];
    uint8_t *all = three_records(off);
    /* One bit of the second record's payload, then of its length. */
    size_t spots[2] = { off[1] + PD_JOURNAL_HEADER_BYTES + 3, off[1] };
    for (int k = 0; k < 2; k++) {
        all[spots[k]] ^= 0x10;
        pd_journal_scan_result res;
        pd_journal_scan(all, off[3], NULL, NULL, &res);
        assert_int_equal(res.records, 1);
        assert_int_equal(res.good_end, off[1]);
        assert_true(res.damaged);
        all[spots[k]] ^= 0x10;
    }
    free(all);
}

/* ---- the files -------------------------------------------------------------- */

#define W 40
#define H 30

typedef struct warned {
    char text[8][512];
    int n;
} warned;

static void on_warn(void *user, const char *msg)
{
    warned *w = user;
    if (w->n < 8)
        snprintf(w->text[w->n], sizeof w->text[w->n], "%s", msg);
    w->n++;
}

/* A registry holding the "config": scene "town" from cells. */
static pd_registry *config_registry(const uint8_t *town)
{
    pd_registry *r = pd_registry_create();
    assert_non_null(r);
    assert_int_equal(pd_registry_put(r, scene_of("town", town, W, H)), PD_OK);
    return r;
}

static pd_journal *open_at(const char *dir, pd_registry *r, warned *w, pd_journal_replay_stats *st)
{
    pd_journal_opts o = { .dir = dir, .fsync = PD_CONF_FSYNC_ALWAYS, .compact_bytes = 1u << 30,
                          .warn = on_warn, .warn_user = w };
    char err[512];
    pd_journal *j = pd_journal_open(&o, r, NULL, st, err, sizeof err);
    if (!j)
        fail_msg("open: %s", err);
    return j;
}

static void tmpdir(char *out, size_t cap)
{
    snprintf(out, cap, "/tmp/pd-journal-XXXXXX");
    assert_non_null(mkdtemp(out));
}

static void rm_rf(const char *dir)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* Applies one journalled update as the daemon does, through a store with
 * the journal as its log (the scene's writer lock, then the journal's:
 * the order every update takes). */
static void update(pd_journal *j, pd_registry *r, const char *name, const pd_scene_update *ops, size_t n)
{
    pd_store *st = pd_store_create(r, NULL);
    assert_non_null(st);
    pd_store_set_log(st, pd_journal_changelog(j));
    pd_store_update out;
    if (pd_store_update_cells(st, name, ops, n, &out) != PD_OK)
        fail_msg("update of %s: %s", name, out.message);
    pd_store_destroy(st);
}

/* One random update: 1 or 2 operations of any op, over the 4 cells of
 * pts and a small rectangle, into ops; returns how many. */
static size_t random_ops(uint64_t *rng, pd_point pts[4], pd_scene_update ops[2])
{
    for (int k = 0; k < 4; k++)
        pts[k] = (pd_point){ rng_below(rng, W), rng_below(rng, H) };
    int32_t x = rng_below(rng, W - 4), y = rng_below(rng, H - 4);
    ops[0] = (pd_scene_update){ .op = (pd_update_op)rng_below(rng, 4), .cost = (uint8_t)(1 + rng_below(rng, 9)),
                                .cells = pts, .n_cells = 4 };
    ops[1] = (pd_scene_update){ .op = (pd_update_op)rng_below(rng, 4), .cost = 3, .is_rect = 1,
                                .rect_min = { x, y }, .rect_max = { x + 3, y + 2 } };
    return 1 + (size_t)rng_below(rng, 2);
}

/* A world of changes: the config scene updated, a run-time scene created,
 * updated and instanced, one instance updated, one dropped, random updates
 * with RESTORE among them. */
static void make_changes(pd_journal *j, pd_registry *r, uint64_t *rng, int rounds)
{
    uint8_t *cells = random_cells(rng, W, H);
    pd_scene *arena = scene_of("arena", cells, W, H);
    free(cells);
    assert_int_equal(pd_journal_lock(j), 0);
    pd_scene_retain(arena);
    assert_int_equal(pd_registry_add(r, arena, NULL, 0), PD_OK);
    assert_int_equal(pd_journal_append_scene(j, arena), 0);
    pd_scene_release(arena);
    const char *names[] = { "arena-1", "arena-2", "arena-3" };
    for (int i = 0; i < 3; i++) {
        uint64_t v;
        assert_int_equal(pd_registry_instance(r, names[i], "arena", &v, NULL, 0), PD_OK);
        assert_int_equal(pd_journal_append_instance(j, names[i], v, "arena", 1), 0);
    }
    assert_int_equal(pd_registry_drop(r, "arena-3", NULL), PD_OK);
    assert_int_equal(pd_journal_append_drop(j, "arena-3", 1), 0);
    pd_journal_unlock(j);
    const char *targets[] = { "town", "arena", "arena-1" };
    for (int i = 0; i < rounds; i++) {
        pd_point pts[4];
        pd_scene_update ops[2];
        size_t n = random_ops(rng, pts, ops);
        update(j, r, targets[i % 3], ops, n);
    }
}

/* Replays dir into a fresh registry over the config `town`: no warning,
 * the same world as live. Returns the replay's stats. */
static pd_journal_replay_stats replay_matches(const char *dir, const uint8_t *town, pd_registry *live)
{
    pd_registry *again = config_registry(town);
    warned w = { 0 };
    pd_journal_replay_stats st;
    pd_journal *j = open_at(dir, again, &w, &st);
    if (w.n)
        fail_msg("replay warned: %s", w.text[0]);
    assert_int_equal(st.skipped, 0);
    assert_same_world(live, again);
    pd_journal_close(j);
    pd_registry_destroy(again);
    return st;
}

/* A live registry over a random config `town` (*town_out, the caller
 * frees it) with a journal in a new directory (dir) and the changes of
 * make_changes. spare_min_cells as pd_registry_set_spare_min_cells. */
static pd_journal *live_world(char *dir, size_t cap, uint64_t *rng, int rounds, uint64_t spare_min_cells,
                              uint8_t **town_out, pd_registry **live_out)
{
    tmpdir(dir, cap);
    *town_out = random_cells(rng, W, H);
    *live_out = config_registry(*town_out);
    pd_registry_set_spare_min_cells(*live_out, spare_min_cells);
    warned w = { 0 };
    pd_journal *j = open_at(dir, *live_out, &w, NULL);
    make_changes(j, *live_out, rng, rounds);
    return j;
}

static void test_replay_restores_scenes_and_versions(void **state)
{
    (void)state;
    char dir[64];
    uint64_t rng = 77;
    uint8_t *town;
    pd_registry *live;
    warned w = { 0 };
    pd_journal *j = live_world(dir, sizeof dir, &rng, 200, PD_SCENE_SPARE_MIN_CELLS, &town, &live);
    pd_journal_close(j);

    pd_journal_replay_stats st = replay_matches(dir, town, live);
    assert_true(st.records > 5);
    pd_registry *again = config_registry(town);
    j = open_at(dir, again, &w, &st);
    pd_scene *a2 = pd_registry_acquire(again, "arena-2");
    assert_non_null(a2);
    assert_non_null(a2->base); /* an unchanged instance shares its template's cells again */
    pd_scene_release(a2);
    pd_journal_close(j);
    pd_registry_destroy(live);
    pd_registry_destroy(again);
    free(town);
    rm_rf(dir);
}

typedef struct scene_updater {
    pd_store *store;
    const char *name;
    uint64_t rng;
    int failures;
} scene_updater;

/* 150 random journalled updates of one scene, of every op. */
static void *scene_updater_main(void *p)
{
    scene_updater *u = p;
    for (int i = 0; i < 150; i++) {
        pd_point pts[4];
        pd_scene_update ops[2];
        size_t n = random_ops(&u->rng, pts, ops);
        pd_store_update out;
        if (pd_store_update_cells(u->store, u->name, ops, n, &out) != PD_OK)
            u->failures++;
    }
    return NULL;
}

/* Updates of three scenes from three threads at once, journalled the way
 * the daemon does it (through the store) now that different scenes
 * update in parallel: the log
 * must still hold each scene's versions in order, so a replay gives the
 * same world (versions, cells, authored state). Labelled "threaded". */
static void test_parallel_scene_updates_replay(void **state)
{
    (void)state;
    char dir[64];
    uint64_t rng = 99;
    uint8_t *town;
    pd_registry *live;
    /* Spares whatever the size: versions written into retired ones too. */
    pd_journal *j = live_world(dir, sizeof dir, &rng, 0, 0, &town, &live);
    pd_store *store = pd_store_create(live, NULL);
    pd_store_set_log(store, pd_journal_changelog(j));
    scene_updater u[3] = { { store, "town", 1, 0 }, { store, "arena", 2, 0 }, { store, "arena-1", 3, 0 } };
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&t[i], NULL, scene_updater_main, &u[i]), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        assert_int_equal(u[i].failures, 0);
    }
    pd_store_destroy(store);
    pd_journal_close(j);
    replay_matches(dir, town, live);
    pd_registry_destroy(live);
    free(town);
    rm_rf(dir);
}

static off_t file_size(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return st.st_size;
}

/* A log cut inside its last record (at several offsets) or with a flipped
 * byte in the middle: start reports the file and offset, keeps the records
 * before, truncates the file there, and the state is what those records
 * make. */
static void test_damaged_log_is_truncated_and_reported(void **state)
{
    (void)state;
    uint64_t rng = 99;
    uint8_t *town = random_cells(&rng, W, H);
    for (int damage = 0; damage < 4; damage++) {
        char dir[64], log[128];
        tmpdir(dir, sizeof dir);
        snprintf(log, sizeof log, "%s/log.%016x", dir, 1);
        pd_registry *live = config_registry(town);
        warned w = { 0 };
        pd_journal *j = open_at(dir, live, &w, NULL);
        make_changes(j, live, &rng, 20);
        off_t good = file_size(log);
        /* What the state is before the last record, to compare with. */
        pd_registry *expect = config_registry(town);
        pd_journal *je = NULL;
        {
            char dir2[64];
            tmpdir(dir2, sizeof dir2);
            char cmd[512];
            snprintf(cmd, sizeof cmd, "cp '%s' '%s/'", log, dir2);
            assert_int_equal(system(cmd), 0);
            je = open_at(dir2, expect, &w, NULL);
            pd_journal_close(je);
            rm_rf(dir2);
        }
        pd_point p = { 1, 1 };
        pd_scene *t = pd_registry_acquire(live, "town");
        pd_scene_update op = { .op = pd_grid_get(t->grid, 1, 1) ? PD_UPDATE_BLOCK : PD_UPDATE_PASS, .cells = &p,
                               .n_cells = 1 };
        pd_scene_release(t);
        update(j, live, "town", &op, 1);
        pd_journal_close(j);
        off_t full = file_size(log);
        assert_true(full > good);
        FILE *f;
        if (damage < 3) {
            /* Torn: cut 1 byte in, in the middle, 1 byte short. */
            off_t cut = damage == 0 ? good + 1 : damage == 1 ? (good + full) / 2 : full - 1;
            assert_int_equal(truncate(log, cut), 0);
        } else {
            /* Corrupt: a flipped byte inside the last record's payload. */
            assert_non_null(f = fopen(log, "r+b"));
            assert_int_equal(fseek(f, (long)good + 12, SEEK_SET), 0);
            int ch = fgetc(f);
            assert_int_equal(fseek(f, (long)good + 12, SEEK_SET), 0);
            fputc(ch ^ 0x40, f);
            fclose(f);
        }
        pd_registry *again = config_registry(town);
        warned w2 = { 0 };
        pd_journal_replay_stats st;
        j = open_at(dir, again, &w2, &st);
        assert_int_equal(w2.n, 1);
        char where[64];
        snprintf(where, sizeof where, "damaged at offset %lld", (long long)good);
        if (!strstr(w2.text[0], log) || !strstr(w2.text[0], where) || !strstr(w2.text[0], "records kept"))
            fail_msg("report: %s", w2.text[0]);
        assert_int_equal(file_size(log), good);
        assert_true(st.truncated_bytes > 0);
        assert_same_world(expect, again);
        /* Appends go on after the cut. */
        update(j, again, "town", &op, 1);
        pd_journal_close(j);
        assert_true(file_size(log) > good);
        pd_registry_destroy(live);
        pd_registry_destroy(expect);
        pd_registry_destroy(again);
        rm_rf(dir);
    }
    free(town);
}

static void test_compaction_keeps_the_state(void **state)
{
    (void)state;
    char dir[64];
    tmpdir(dir, sizeof dir);
    uint64_t rng = 1234;
    uint8_t *town = random_cells(&rng, W, H);
    pd_registry *live = config_registry(town);
    warned w = { 0 };
    pd_journal *j = open_at(dir, live, &w, NULL);
    make_changes(j, live, &rng, 150);
    uint64_t log_before, snap;
    pd_journal_sizes(j, &log_before, &snap);
    char err[512];
    if (pd_journal_compact(j, live, err, sizeof err) != 0)
        fail_msg("compact: %s", err);
    uint64_t log_after;
    pd_journal_sizes(j, &log_after, &snap);
    assert_int_equal(log_after, PD_JOURNAL_MAGIC_BYTES);
    assert_true(snap > PD_JOURNAL_MAGIC_BYTES);
    /* The tail after the snapshot. */
    pd_point p = { 5, 5 };
    pd_scene_update op = { .op = PD_UPDATE_COST, .cost = 9, .cells = &p, .n_cells = 1 };
    update(j, live, "arena", &op, 1);
    update(j, live, "arena-1", &op, 1);
    pd_journal_close(j);
    char path[128];
    snprintf(path, sizeof path, "%s/log.%016x", dir, 1);
    assert_int_not_equal(access(path, F_OK), 0);   /* the old log is gone */
    snprintf(path, sizeof path, "%s/snapshot.%016x", dir, 2);
    assert_int_equal(access(path, F_OK), 0);

    pd_journal_replay_stats st = replay_matches(dir, town, live);
    assert_int_equal(st.files, 2);
    /* arena-2 was never changed, while arena was after it was made: from
     * the snapshot it still shares the cells of the arena version it was
     * made of (a BASE record) instead of holding a copy. */
    pd_registry *again = config_registry(town);
    j = open_at(dir, again, &w, &st);
    pd_scene *a2 = pd_registry_acquire(again, "arena-2"), *l2 = pd_registry_acquire(live, "arena-2");
    assert_non_null(a2);
    assert_non_null(l2->base);
    assert_non_null(a2->base);
    pd_scene_release(a2);
    pd_scene_release(l2);
    pd_journal_close(j);
    pd_registry_destroy(again);
    pd_registry_destroy(live);
    free(town);
    rm_rf(dir);
}

static int tail_town(pd_store *st, uint64_t from, tailed *t)
{
    return tail_of(st, "town", from, t);
}

/* The file journal as the store opens it (pd_journal_file_log replayed by
 * pd_store_replay): a tail from a version gives the scene's later records
 * from the log file in order; after a compaction an older point is gone,
 * the snapshot's version goes on; the store closes the journal, and a
 * second store replays it to the same scenes. */
static void test_store_opens_and_tails_the_file_journal(void **state)
{
    (void)state;
    char dir[64];
    tmpdir(dir, sizeof dir);
    uint64_t rng = 99;
    uint8_t *town = random_cells(&rng, W, H);
    pd_registry *live = config_registry(town);
    pd_journal_opts o = { .dir = dir, .fsync = PD_CONF_FSYNC_ALWAYS, .compact_bytes = 1u << 30 };
    char err[512];
    pd_store *st = pd_store_create(live, NULL);
    pd_changelog log = pd_journal_file_log(&o, err, sizeof err);
    assert_non_null(log.ops);
    if (pd_store_replay(st, log, NULL, err, sizeof err) != 0)
        fail_msg("replay: %s", err);
    pd_store_own_log(st, log, PD_CONF_FSYNC_ALWAYS);
    for (int i = 0; i < 5; i++) {
        pd_point p = { i, 1 };
        pd_scene_update op = { .op = PD_UPDATE_COST, .cost = (uint8_t)(2 + i), .cells = &p, .n_cells = 1 };
        pd_store_update out;
        assert_int_equal(pd_store_update_cells(st, "town", &op, 1, &out), PD_OK);
        assert_int_equal(out.update.version, 2 + i);
    }
    tailed t;
    assert_int_equal(tail_town(st, 3, &t), 0);
    assert_int_equal(t.n, 3);
    for (size_t i = 0; i < t.n; i++) {
        assert_int_equal(t.types[i], PD_JOURNAL_UPDATE);
        assert_int_equal(t.versions[i], 4 + i);
    }
    assert_int_equal(tail_town(st, 0, &t), 0);  /* the whole history the log holds */
    assert_int_equal(t.n, 5);
    assert_int_equal(tail_town(st, 1, &t), 0);  /* as the config loaded it: the same */
    assert_int_equal(t.n, 5);
    assert_int_equal(t.versions[0], 2);
    assert_int_equal(tail_town(st, 6, &t), 0);
    assert_int_equal(t.n, 0);
    assert_int_equal(tail_town(st, 9, &t), 1);  /* never at 9 */

    assert_int_equal(pd_store_compact(st, err, sizeof err), 0);
    assert_int_equal(tail_town(st, 3, &t), 1);
    pd_point p = { 0, 1 }; /* cost 2 since the first update: blocking it changes it */
    pd_scene_update op = { .op = PD_UPDATE_BLOCK, .cells = &p, .n_cells = 1 };
    pd_store_update out;
    assert_int_equal(pd_store_update_cells(st, "town", &op, 1, &out), PD_OK);
    assert_int_equal(tail_town(st, 6, &t), 0);
    assert_int_equal(t.n, 1);
    assert_int_equal(t.versions[0], 7);
    uint64_t log_bytes, snap_bytes;
    int failed;
    assert_int_equal(pd_store_log_state(st, &log_bytes, &snap_bytes, &failed), 1);
    assert_true(log_bytes > PD_JOURNAL_MAGIC_BYTES && snap_bytes > PD_JOURNAL_MAGIC_BYTES);
    pd_store_destroy(st); /* closes the journal: its directory lock goes */

    pd_registry *again = config_registry(town);
    pd_store *st2 = pd_store_create(again, NULL);
    log = pd_journal_file_log(&o, err, sizeof err);
    if (pd_store_replay(st2, log, NULL, err, sizeof err) != 0)
        fail_msg("replay: %s", err);
    pd_store_own_log(st2, log, PD_CONF_FSYNC_NO);
    assert_same_world(live, again);
    pd_store_destroy(st2);
    pd_registry_destroy(again);
    pd_registry_destroy(live);
    free(town);
    rm_rf(dir);
}

/* A reload that replaced the config scene (RESET: replay goes back to the
 * config's cells at that version, and later updates apply on it), then one
 * that dropped it (DROP: it stays gone). */
static void test_reset_and_drop_of_config_scenes(void **state)
{
    (void)state;
    char dir[64];
    tmpdir(dir, sizeof dir);
    uint64_t rng = 5;
    uint8_t *town = random_cells(&rng, W, H);
    pd_registry *live = config_registry(town);
    warned w = { 0 };
    pd_journal *j = open_at(dir, live, &w, NULL);
    pd_point p = { 2, 2 };
    pd_scene_update op = { .op = PD_UPDATE_COST, .cost = 7, .cells = &p, .n_cells = 1 };
    update(j, live, "town", &op, 1);   /* version 2 */
    /* The reload: the config's town again, at version 3. */
    pd_scene *fresh = scene_of("town", town, W, H);
    fresh->version = 3;
    assert_int_equal(pd_journal_lock(j), 0);
    assert_int_equal(pd_registry_put(live, fresh), PD_OK);
    assert_int_equal(pd_journal_append_reset(j, "town", 3), 0);
    pd_journal_unlock(j);
    op.cost = 4;
    update(j, live, "town", &op, 1);   /* version 4 */
    pd_journal_close(j);
    replay_matches(dir, town, live);

    j = open_at(dir, live, &w, NULL);
    assert_int_equal(pd_journal_lock(j), 0);
    assert_int_equal(pd_registry_drop(live, "town", NULL), PD_OK);
    assert_int_equal(pd_journal_append_drop(j, "town", 4), 0);
    pd_journal_unlock(j);
    pd_journal_close(j);
    assert_int_equal(replay_matches(dir, town, live).records, 4);
    pd_registry_destroy(live);
    free(town);
    rm_rf(dir);
}

static void test_second_opener_is_refused(void **state)
{
    (void)state;
    char dir[64];
    tmpdir(dir, sizeof dir);
    pd_registry *r = pd_registry_create();
    warned w = { 0 };
    pd_journal *j = open_at(dir, r, &w, NULL);
    pd_journal_opts o = { .dir = dir };
    char err[512];
    assert_null(pd_journal_open(&o, r, NULL, NULL, err, sizeof err));
    assert_non_null(strstr(err, "another pathd uses this data_dir"));
    pd_journal_close(j);
    pd_registry_destroy(r);
    rm_rf(dir);
}

/* Files may grow to `bytes` (RLIMIT_FSIZE; SIGXFSZ ignored, so a write
 * past it fails with EFBIG as on a full disk); RLIM_INFINITY lifts it. */
static void file_size_limit(rlim_t bytes)
{
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &lim), 0);
    lim.rlim_cur = bytes == RLIM_INFINITY ? lim.rlim_max : bytes;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
}

static void log_path(const char *dir, unsigned gen, char *out, size_t cap)
{
    snprintf(out, cap, "%s/log.%016x", dir, gen);
}

/* Issue 29 finding 1: a compaction whose new log cannot get its magic (no
 * byte may be written) fails and leaves no file behind; the changes that
 * follow, across two restarts, all replay. Before the fix the empty log.2
 * stayed, the first restart appended to it without a header and the
 * second cut it away as "no journal header". */
static void test_failed_log_creation_leaves_no_file(void **state)
{
    (void)state;
    char dir[64], path[128];
    uint64_t rng = 4242;
    uint8_t *town;
    pd_registry *live;
    pd_journal *j = live_world(dir, sizeof dir, &rng, 10, PD_SCENE_SPARE_MIN_CELLS, &town, &live);
    char err[512];
    file_size_limit(0);
    int rc = pd_journal_compact(j, live, err, sizeof err);
    file_size_limit(RLIM_INFINITY);
    assert_int_not_equal(rc, 0);
    assert_non_null(strstr(err, "log.0000000000000002"));
    log_path(dir, 2, path, sizeof path);
    assert_int_not_equal(access(path, F_OK), 0);
    assert_int_equal(pd_journal_failed(j), 0);
    for (int i = 0; i < 5; i++) {
        pd_point p = { i, 1 };
        pd_scene_update op = { .op = PD_UPDATE_COST, .cost = (uint8_t)(20 + i), .cells = &p, .n_cells = 1 };
        update(j, live, "town", &op, 1);
    }
    pd_journal_close(j);
    warned w = { 0 };
    pd_registry *again = config_registry(town);
    j = open_at(dir, again, &w, NULL);
    pd_point p = { 7, 7 };
    pd_scene_update op = { .op = PD_UPDATE_COST, .cost = 33, .cells = &p, .n_cells = 1 };
    update(j, live, "town", &op, 1);
    pd_journal_close(j);
    pd_registry_destroy(again);
    replay_matches(dir, town, live);
    pd_registry_destroy(live);
    free(town);
    rm_rf(dir);
}

/* An empty newest log (a crash between making the file and writing its
 * magic, or one left by an older pathd) gets its magic before the first
 * record appended to it, so the records survive the next start. */
static void test_empty_log_gets_its_magic(void **state)
{
    (void)state;
    char dir[64], path[128];
    uint64_t rng = 777;
    uint8_t *town;
    pd_registry *live;
    pd_journal *j = live_world(dir, sizeof dir, &rng, 10, PD_SCENE_SPARE_MIN_CELLS, &town, &live);
    pd_journal_close(j);
    log_path(dir, 2, path, sizeof path);
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fclose(fp), 0);
    warned w = { 0 };
    pd_registry *again = config_registry(town);
    j = open_at(dir, again, &w, NULL);
    assert_int_equal(file_size(path), PD_JOURNAL_MAGIC_BYTES);
    pd_point p = { 3, 3 };
    pd_scene_update op = { .op = PD_UPDATE_BLOCK, .cells = &p, .n_cells = 1 };
    update(j, live, "arena", &op, 1);
    pd_journal_close(j);
    pd_registry_destroy(again);
    assert_true(file_size(path) > PD_JOURNAL_MAGIC_BYTES);
    replay_matches(dir, town, live);
    pd_registry_destroy(live);
    free(town);
    rm_rf(dir);
}

/* Issue 29 finding 3: an update, a CreateScene and a CreateInstance the
 * log refuses (the disk is full) are never served: the registry still
 * serves the version before, so that number is not shown to anyone and
 * the world after a restart is the world served. Before the fix the
 * refused update was served as the next version. */
static void test_refused_change_is_never_served(void **state)
{
    (void)state;
    char dir[64];
    uint64_t rng = 31337;
    uint8_t *town;
    pd_registry *live;
    pd_journal *j = live_world(dir, sizeof dir, &rng, 10, PD_SCENE_SPARE_MIN_CELLS, &town, &live);
    pd_scene *before = pd_registry_acquire(live, "arena");
    uint64_t log_bytes, snap;
    pd_journal_sizes(j, &log_bytes, &snap);

    pd_store *store = pd_store_create(live, NULL);
    pd_store_set_log(store, pd_journal_changelog(j));
    file_size_limit((rlim_t)log_bytes);
    pd_point p = { 1, 1 };
    pd_scene_update op = { .op = PD_UPDATE_BLOCK, .cells = &p, .n_cells = 1 };
    if (pd_grid_get(before->grid, 1, 1) == PD_CELL_BLOCKED)
        op.op = PD_UPDATE_PASS;
    pd_store_update out;
    pd_status st = pd_store_update_cells(store, "arena", &op, 1, &out);
    file_size_limit(RLIM_INFINITY);
    assert_int_equal(st, PD_INTERNAL);
    assert_non_null(strstr(out.message, "not applied, the journal did not take it"));
    assert_int_equal(out.update.version, before->version);
    pd_scene *now = pd_registry_acquire(live, "arena");
    assert_ptr_equal(now, before);
    pd_scene_release(now);
    assert_true(pd_journal_failed(j));

    /* Once failed, the journal refuses new scenes before anything is served. */
    uint8_t *cells = random_cells(&rng, W, H);
    pd_store_change change;
    assert_int_equal(pd_store_add_scene(store, scene_of("late", cells, W, H), &change), PD_INTERNAL);
    assert_non_null(strstr(change.message, "changes are refused until pathd restarts"));
    assert_int_equal(pd_store_add_instance(store, "late-1", "arena", &change), PD_INTERNAL);
    free(cells);
    assert_null(pd_registry_acquire(live, "late"));
    assert_null(pd_registry_acquire(live, "late-1"));
    pd_store_destroy(store);
    pd_journal_close(j);
    replay_matches(dir, town, live);
    pd_scene_release(before);
    pd_registry_destroy(live);
    free(town);
    rm_rf(dir);
}

/* A scene commit on a full disk: the scene is not served and the journal
 * holds no part of its record. */
static void test_refused_new_scene_is_never_served(void **state)
{
    (void)state;
    char dir[64];
    uint64_t rng = 5150;
    uint8_t *town;
    pd_registry *live;
    pd_journal *j = live_world(dir, sizeof dir, &rng, 4, PD_SCENE_SPARE_MIN_CELLS, &town, &live);
    uint64_t log_bytes, snap;
    pd_journal_sizes(j, &log_bytes, &snap);
    uint8_t *cells = random_cells(&rng, W, H);
    pd_store *store = pd_store_create(live, NULL);
    pd_store_set_log(store, pd_journal_changelog(j));
    pd_store_change change;
    file_size_limit((rlim_t)log_bytes + 10);
    pd_status st = pd_store_add_scene(store, scene_of("late", cells, W, H), &change);
    file_size_limit(RLIM_INFINITY);
    pd_store_destroy(store);
    free(cells);
    assert_non_null(strstr(change.message, "not served, the journal did not take it"));
    assert_int_equal(change.applied, 0);
    assert_int_equal(st, PD_INTERNAL);
    assert_null(pd_registry_acquire(live, "late"));
    pd_journal_close(j);
    replay_matches(dir, town, live);
    pd_registry_destroy(live);
    free(town);
    rm_rf(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_every_type),
        cmocka_unit_test(test_torn_tail_at_every_offset),
        cmocka_unit_test(test_bad_checksum_in_the_middle),
        cmocka_unit_test(test_replay_restores_scenes_and_versions),
        cmocka_unit_test(test_parallel_scene_updates_replay),
        cmocka_unit_test(test_damaged_log_is_truncated_and_reported),
        cmocka_unit_test(test_compaction_keeps_the_state),
        cmocka_unit_test(test_store_opens_and_tails_the_file_journal),
        cmocka_unit_test(test_reset_and_drop_of_config_scenes),
        cmocka_unit_test(test_second_opener_is_refused),
        cmocka_unit_test(test_failed_log_creation_leaves_no_file),
        cmocka_unit_test(test_empty_log_gets_its_magic),
        cmocka_unit_test(test_refused_change_is_never_served),
        cmocka_unit_test(test_refused_new_scene_is_never_served),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
