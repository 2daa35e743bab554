/*
 * test_e2e_journal.c - the journal (config "data_dir", issue 12 "Durable")
 * through the real daemon: scenes created, updated (several ops as one
 * version, RESTORE among them), instanced and dropped, the config's scene
 * updated, then kill -9 right after an acknowledged update; a daemon
 * started on the same data_dir serves every scene with the same version
 * (SceneInfo) and the same cells (GetSceneGrid, unit grids included), and
 * the dropped ones not at all. A log with a torn tail starts, says where
 * it cut and how many records it kept, and serves what those records
 * made. A journal past journal_compact_bytes is compacted (snapshot plus
 * tail) and a restart from it gives the same world; so does one with a
 * reload (SIGHUP) between changes. --check-config checks data_dir. On a
 * full disk (the daemon's RLIMIT_FSIZE lowered to its log's size) an
 * update is answered INTERNAL and never served, later changes are refused,
 * and a restart serves exactly the acknowledged world.
 */
#define _GNU_SOURCE /* prlimit */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"

#define T_W 96
#define T_H 64
static const uint32_t T_UNITS[] = { 1, 2 };

typedef struct fixture {
    char data_dir[64];
    char extra[256];
    pdi_daemon d;
} fixture;

static void start(fixture *f, const char *fsync_policy, uint64_t compact_bytes)
{
    if (!f->data_dir[0]) {
        snprintf(f->data_dir, sizeof f->data_dir, "/tmp/pathd-e2e-journal-XXXXXX");
        assert_non_null(mkdtemp(f->data_dir));
    }
    size_t n = (size_t)snprintf(f->extra, sizeof f->extra, "\"data_dir\": \"%s/data\", \"journal_fsync\": \"%s\",",
                                f->data_dir, fsync_policy);
    if (compact_bytes)
        snprintf(f->extra + n, sizeof f->extra - n, " \"journal_compact_bytes\": %llu,",
                 (unsigned long long)compact_bytes);
    pdi_limits l = { .extra_json = f->extra, .metrics = 1 };
    assert_int_equal(pdi_daemon_start(&f->d, &l), 0);
}

static void stop(fixture *f)
{
    assert_int_equal(pdi_daemon_stop(&f->d), 0);
    pdi_daemon_cleanup(&f->d);
}

/* Starts pathd on f's data_dir again, requires the log to say `says` and
 * `also` (may be NULL), and the world it serves to be `before` (which is
 * freed); then stops it. */
static void restart_and_compare(fixture *f, const char *fsync_policy, uint64_t compact_bytes, const char *says,
                                const char *also, pdi_world *before)
{
    start(f, fsync_policy, compact_bytes);
    if (!pdi_log_contains(&f->d, says) || (also && !pdi_log_contains(&f->d, also))) {
        pdi_print_log(&f->d);
        fail_msg("no log line with \"%s\" and \"%s\"", says, also ? also : "");
    }
    pdc_conn *c = pdi_connect(&f->d);
    assert_non_null(c);
    pdi_world after;
    pdi_world_read(c, &after);
    pdi_world_assert_equal(before, &after);
    pdi_world_free(before);
    pdi_world_free(&after);
    pdc_close(c);
    stop(f);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    pdi_daemon_init(&f->d);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    pdi_daemon_cleanup(&f->d);
    if (f->data_dir[0]) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->data_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", f->data_dir);
    }
    free(f);
    return 0;
}

static uint8_t *random_cells(uint32_t seed, int32_t w, int32_t h)
{
    uint8_t *c = malloc((size_t)w * (size_t)h);
    assert_non_null(c);
    uint64_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < (size_t)w * (size_t)h; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        unsigned r = (unsigned)(x % 100);
        c[i] = r < 20 ? 0 : r < 25 ? (uint8_t)(2 + x % 7) : 1;
    }
    return c;
}

/* An acknowledged rect update; its version. */
static uint64_t update_rect(pdc_conn *c, const char *scene, pdc_update_op op, uint32_t cost, int32_t x0, int32_t y0,
                            int32_t x1, int32_t y1)
{
    uint64_t v = 0;
    assert_int_equal(pdi_update_rect(c, scene, op, cost, x0, y0, x1, y1, &v), PDC_OK);
    return v;
}

/* The changes every test makes: a created scene with updates (one of
 * several ops with RESTORE), two instances, one updated, one dropped, and
 * the config's "rooms" updated. */
static void make_changes(pdc_conn *c)
{
    uint8_t *cells = random_cells(7, T_W, T_H);
    pdc_create_scene_req req = { .name = "arena", .width = T_W, .height = T_H, .cells = cells,
                                 .unit_sizes = T_UNITS, .unit_size_count = 2, .cell_size = 0.5,
                                 .origin_x = -4, .origin_y = 2 };
    pdc_scene_change out;
    assert_int_equal(pdc_create_scene(c, &req, &out), PDC_OK);
    free(cells);
    update_rect(c, "arena", PDC_UPDATE_BLOCK, 0, 10, 10, 30, 12);
    pdc_xy pts[3] = { { 1, 1 }, { 50, 40 }, { 95, 63 } };
    pdc_update_req many[3] = {
        { .scene = "arena", .is_rect = 1, .rect_min = { 10, 10 }, .rect_max = { 15, 11 }, .op = PDC_UPDATE_RESTORE },
        { .scene = "arena", .cells = pts, .cell_count = 3, .op = PDC_UPDATE_COST, .cost = 9 },
        { .scene = "arena", .is_rect = 1, .rect_min = { 60, 5 }, .rect_max = { 62, 50 }, .op = PDC_UPDATE_BLOCK },
    };
    pdc_update_result r;
    assert_int_equal(pdc_update_cells_many(c, many, 3, &r), PDC_OK);
    assert_int_equal(r.version, 3);
    assert_int_equal(pdc_create_instance(c, "arena-1", "arena", &out), PDC_OK);
    assert_int_equal(pdc_create_instance(c, "arena-2", "arena", &out), PDC_OK);
    assert_int_equal(pdc_create_instance(c, "arena-3", "arena", &out), PDC_OK);
    update_rect(c, "arena-1", PDC_UPDATE_PASS, 0, 60, 20, 62, 22);
    assert_int_equal(pdc_drop_scene(c, "arena-2", 0, &out), PDC_OK);
    update_rect(c, "rooms", PDC_UPDATE_COST, 5, 1, 1, 3, 2);
    update_rect(c, "rooms", PDC_UPDATE_BLOCK, 0, 5, 5, 5, 8);
    /* Made and dropped: it must stay gone. */
    req.name = "gone";
    req.cells = cells = random_cells(9, 8, 8);
    req.width = req.height = 8;
    assert_int_equal(pdc_create_scene(c, &req, &out), PDC_OK);
    free(cells);
    assert_int_equal(pdc_drop_scene(c, "gone", 0, &out), PDC_OK);
}

static void test_kill9_after_an_acknowledged_update(void **state)
{
    fixture *f = *state;
    start(f, "everysec", 0);
    pdc_conn *c = pdi_connect(&f->d);
    assert_non_null(c);
    make_changes(c);
    pdi_world before;
    pdi_world_read(c, &before);
    assert_true(pdi_world_has(&before, "arena-1") && pdi_world_has(&before, "arena-3") && !pdi_world_has(&before, "arena-2"));
    /* The last change, acknowledged, then the process dies at once: the
     * expected world is the one read before with that change made. */
    uint64_t v = update_rect(c, "arena-3", PDC_UPDATE_BLOCK, 0, 0, 0, T_W - 1, 0);
    pdi_daemon_kill9(&f->d);
    pdc_close(c);
    for (size_t i = 0; i < before.n; i++)
        if (strcmp(before.names[i], "arena-3") == 0) {
            assert_int_equal(v, before.versions[i] + 1);
            before.versions[i] = v;
            memset(before.grids[i].cells, 0, T_W);
            pdc_grid_free(&before.unit2[i]);
        }

    start(f, "everysec", 0);
    assert_true(pdi_log_contains(&f->d, "journal"));
    assert_true(pdi_log_contains(&f->d, " 0 skipped, 0 bytes of damaged tail truncated"));
    c = pdi_connect(&f->d);
    pdi_world after;
    pdi_world_read(c, &after);
    /* arena-3's unit-2 grid was dropped from the expectation above (its
     * first row changed): compare it by recomputation instead. */
    for (size_t i = 0; i < after.n; i++)
        if (strcmp(after.names[i], "arena-3") == 0) {
            const pdc_grid *g = &after.grids[i], *u = &after.unit2[i];
            for (int32_t x = 0; x + 1 < u->width; x++)
                assert_int_equal(u->cells[x], 0); /* row 0 is a wall for a 2x2 unit */
            assert_int_equal(g->cells[0], 0);
            pdc_grid_free(&after.unit2[i]);
        }
    pdi_world_assert_equal(&before, &after);
    /* The replayed scenes answer queries. */
    pdi_assert_daemon_serves(&f->d);
    pdi_world_free(&before);
    pdi_world_free(&after);
    pdc_close(c);
    stop(f);
}

/* The size of f's newest log. */
static off_t newest_log_size(const fixture *f)
{
    off_t size = -1;
    for (unsigned gen = 1; gen < 16; gen++) {
        char path[160];
        struct stat st;
        snprintf(path, sizeof path, "%s/data/log.%016x", f->data_dir, gen);
        if (stat(path, &st) == 0)
            size = st.st_size;
    }
    assert_true(size > 0);
    return size;
}

/* Issue 29 finding 3, through the daemon: the disk fills (its file size
 * limit is set to its log's size, so the next append fails with EFBIG as
 * with ENOSPC). The update is answered INTERNAL; the scene still serves
 * the version acknowledged before, to readers and in SceneInfo; later
 * changes are refused. After a restart with room again, the world is the
 * acknowledged one and the next update takes the refused update's number
 * without anyone having seen that number before. */
static void test_full_disk_refuses_and_serves_nothing_unjournalled(void **state)
{
    fixture *f = *state;
    start(f, "always", 0);
    pdc_conn *c = pdi_connect(&f->d);
    assert_non_null(c);
    make_changes(c);
    pdi_world before;
    pdi_world_read(c, &before);
    struct rlimit full = { .rlim_cur = (rlim_t)newest_log_size(f), .rlim_max = RLIM_INFINITY };
    assert_int_equal(prlimit(f->d.pid, RLIMIT_FSIZE, &full, NULL), 0);
    pdc_update_req u = { .scene = "arena", .is_rect = 1, .rect_min = { 0, 0 }, .rect_max = { 3, 3 },
                         .op = PDC_UPDATE_BLOCK };
    pdc_update_result r;
    assert_int_equal(pdc_update_cells(c, &u, &r), PDC_INTERNAL);
    /* Served as before: the same versions and cells everywhere. */
    pdi_world now;
    pdi_world_read(c, &now);
    pdi_world_assert_equal(&before, &now);
    pdi_world_free(&now);
    pdc_scene_change out;
    assert_int_equal(pdc_create_instance(c, "late", "arena", &out), PDC_INTERNAL);
    pdc_close(c);
    pdi_daemon_kill9(&f->d);
    restart_and_compare(f, "always", 0, "journal", NULL, &before);
}

static void test_torn_tail_is_reported_and_cut(void **state)
{
    fixture *f = *state;
    start(f, "always", 0);
    pdc_conn *c = pdi_connect(&f->d);
    make_changes(c);
    pdi_world before;
    pdi_world_read(c, &before);
    pdc_close(c);
    stop(f);
    /* Half a record at the end of the log: a header claiming 100 bytes
     * and 10 of them, as a crash mid-append leaves it. */
    char log[160];
    snprintf(log, sizeof log, "%s/data/log.%016x", f->data_dir, 1);
    struct stat st;
    assert_int_equal(stat(log, &st), 0);
    FILE *fp = fopen(log, "ab");
    assert_non_null(fp);
    const uint8_t torn[18] = { 100, 0, 0, 0, 1, 2, 3, 4, 4, 5, 'a', 'r', 'e', 'n', 'a', 1, 2, 3 };
    assert_int_equal(fwrite(torn, 1, sizeof torn, fp), sizeof torn);
    fclose(fp);

    char where[300];
    snprintf(where, sizeof where, "journal %s: damaged at offset %lld (torn record", log, (long long)st.st_size);
    restart_and_compare(f, "always", 0, where, "records kept, 18 bytes truncated", &before);
    struct stat after_st;
    assert_int_equal(stat(log, &after_st), 0);
    assert_int_equal(after_st.st_size, st.st_size);
}

static void test_compaction_preserves_the_world(void **state)
{
    fixture *f = *state;
    /* The smallest threshold: the created scene's cells alone pass it. */
    start(f, "always", 65536);
    pdc_conn *c = pdi_connect(&f->d);
    make_changes(c);
    uint8_t *cells = random_cells(11, 800, 800);
    pdc_create_scene_req req = { .name = "big", .width = 800, .height = 800, .cells = cells };
    pdc_scene_change out;
    assert_int_equal(pdc_create_scene(c, &req, &out), PDC_OK);
    free(cells);
    assert_true(pdi_wait_log(&f->d, "compacted: snapshot", 20000));
    /* /metrics shows the new snapshot and a healthy journal. */
    char *m = pdi_metrics_get(&f->d);
    assert_non_null(m);
    const char *snap_line = strstr(m, "pathd_journal_bytes{file=\"snapshot\"} ");
    assert_non_null(snap_line);
    assert_true(strtoull(snap_line + strlen("pathd_journal_bytes{file=\"snapshot\"} "), NULL, 10) > 65536);
    assert_non_null(strstr(m, "pathd_journal_failed 0\n"));
    free(m);
    /* The tail after the snapshot. */
    update_rect(c, "big", PDC_UPDATE_COST, 4, 0, 0, 10, 10);
    update_rect(c, "arena-3", PDC_UPDATE_BLOCK, 0, 0, 0, 5, 5);
    pdi_world before;
    pdi_world_read(c, &before);
    pdc_close(c);
    pdi_daemon_kill9(&f->d);
    char snap[160];
    snprintf(snap, sizeof snap, "%s/data/snapshot.%016x", f->data_dir, 2);
    assert_int_equal(access(snap, F_OK), 0);

    restart_and_compare(f, "always", 65536, "from 2 files", NULL, &before);
}

/* A reload between journalled changes: whatever the reload does to the
 * config's scenes (replace them, or keep their updates), a restart after
 * kill -9 serves what the daemon served before it died. */
static void test_reload_between_changes(void **state)
{
    fixture *f = *state;
    start(f, "everysec", 0);
    pdc_conn *c = pdi_connect(&f->d);
    make_changes(c);
    assert_int_equal(pdi_daemon_signal(&f->d, SIGHUP), 0);
    assert_true(pdi_wait_log(&f->d, "reloaded", 20000));
    update_rect(c, "rooms", PDC_UPDATE_COST, 7, 2, 2, 2, 2);
    update_rect(c, "arena-1", PDC_UPDATE_BLOCK, 0, 3, 3, 4, 4);
    pdi_world before;
    pdi_world_read(c, &before);
    pdc_close(c);
    pdi_daemon_kill9(&f->d);

    restart_and_compare(f, "everysec", 0, " 0 skipped, 0 bytes of damaged tail truncated", NULL, &before);
}

/* --check-config names the journal and refuses a data_dir that cannot be
 * one; a bad fsync policy is refused with the key's path. */
static void test_check_config(void **state)
{
    fixture *f = *state;
    snprintf(f->data_dir, sizeof f->data_dir, "/tmp/pathd-e2e-journal-XXXXXX");
    assert_non_null(mkdtemp(f->data_dir));
    struct {
        const char *body;
        int status;
        const char *says;
    } cases[] = {
        { "\"data_dir\": \"%s/data\"", 0, "journal: %s/data (made at start), fsync everysec" },
        { "\"data_dir\": \"%s/data/x/y\"", 1, "error: data_dir %s/data/x/y: its parent %s/data/x is not a directory" },
        { "\"data_dir\": \"%s/file\"", 1, "error: data_dir %s/file is not a directory" },
        { "\"data_dir\": \"%s\", \"journal_fsync\": \"sometimes\"", 1,
          "$.journal_fsync: must be one of \"always\", \"everysec\", \"no\", not \"sometimes\"" },
    };
    char file[96], conf[96];
    snprintf(file, sizeof file, "%s/file", f->data_dir);
    snprintf(conf, sizeof conf, "%s/c.json", f->data_dir);
    FILE *fp = fopen(file, "w");
    assert_non_null(fp);
    fclose(fp);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char body[256], want[256], out[4096];
        snprintf(body, sizeof body, cases[i].body, f->data_dir);
        snprintf(want, sizeof want, cases[i].says, f->data_dir, f->data_dir);
        fp = fopen(conf, "w");
        assert_non_null(fp);
        fprintf(fp, "{%s}\n", body);
        fclose(fp);
        const char *args[] = { "--check-config", "--config", conf, NULL };
        int st = pdi_run_pathd(args, 30000, out, sizeof out);
        if (st != cases[i].status || !strstr(out, want))
            fail_msg("case %zu: exit %d (want %d), output:\n%s\nwanted: %s", i, st, cases[i].status, out, want);
    }
    /* --data-dir overrides the config's. */
    fp = fopen(conf, "w");
    assert_non_null(fp);
    fprintf(fp, "{\"data_dir\": \"%s/file\"}\n", f->data_dir);
    fclose(fp);
    char dir[96], want[160], out[4096];
    snprintf(dir, sizeof dir, "%s/other", f->data_dir);
    const char *args[] = { "--check-config", "--config", conf, "--data-dir", dir, NULL };
    snprintf(want, sizeof want, "journal: %s (made at start)", dir);
    int st = pdi_run_pathd(args, 30000, out, sizeof out);
    if (st != 0 || !strstr(out, want))
        fail_msg("--data-dir: exit %d, output:\n%s", st, out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_kill9_after_an_acknowledged_update, setup, teardown),
        cmocka_unit_test_setup_teardown(test_torn_tail_is_reported_and_cut, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_disk_refuses_and_serves_nothing_unjournalled, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compaction_preserves_the_world, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reload_between_changes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_check_config, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
