/*
 * test_e2e_redis_snapshot.c - snapshots in Redis and the local cache
 * through the real daemon (config "log" with "snapshot_every", issue 32
 * "Start and catch-up"), on a redis-server of the test's own. pathd A
 * makes 3N updates of a scene: its snapshots appear in Redis, the two
 * newest kept, and the stream holds nothing below the oldest. pathd B,
 * started with an empty data_dir on the same Redis, starts the scene from
 * Redis's snapshot and serves the same version and cells, cell by cell.
 * A restarted on its own data_dir starts from its local cache and serves
 * the same again, and its local journal of the updates after the snapshot
 * (the stream read only after them); a journal the log went back from is
 * discarded, the log's cells served. A reload (SIGHUP) that removes a scene goes through the
 * log: the log goes on taking changes, the dropped scene's stream is
 * trimmed to its DROP, and a restart serves what the reload left; so
 * does one made while Redis is stopped, its DROP sent again by the
 * server's timer once Redis goes on.
 */
#include <setjmp.h>
#include <signal.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>
#include <hiredis/hiredis.h>

#include "harness.h"
#include "../unit/redis_server.h"

/* Versions between snapshots (config log.snapshot_every). */
#define EVERY 5
/* How long a snapshot may take to appear (the server's 1 s timer). */
#define SNAPSHOT_WAIT_MS 10000

typedef struct fixture {
    redis_srv redis;
    char dir_a[64], dir_b[64];
    char extra_a[512], extra_b[512];
    pdi_daemon a, b;
} fixture;

/* The config's extra scene "annex" (integ_rooms.txt). */
#define ANNEX_JSON ",\n    {\"name\": \"annex\", \"map\": \"" PD_TEST_DATA_DIR "/integ_rooms.txt\", \"format\": \"ascii\"}"
/* How long a reload may take to show. */
#define RELOAD_WAIT_MS 10000

/* pathd d's limits: data_dir, the Redis log, snapshots; with annex or not. */
static pdi_limits limits_of(fixture *f, char *extra, size_t len, const char *data_dir, int annex)
{
    snprintf(extra, len,
             "\"data_dir\": \"%s\", \"log\": {\"redis\": \"127.0.0.1:%d\", \"timeout_ms\": 500, "
             "\"snapshot_every\": %d, \"snapshot_keep\": 2},",
             data_dir, f->redis.port, EVERY);
    return (pdi_limits){ .extra_json = extra, .extra_scenes_json = annex ? ANNEX_JSON : NULL };
}

static void start_pathd_with(fixture *f, pdi_daemon *d, char *extra, size_t len, const char *data_dir, int annex)
{
    pdi_limits l = limits_of(f, extra, len, data_dir, annex);
    assert_int_equal(pdi_daemon_start(d, &l), 0);
}

static void start_pathd(fixture *f, pdi_daemon *d, char *extra, size_t len, const char *data_dir)
{
    start_pathd_with(f, d, extra, len, data_dir, 0);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    f->a.stderr_fd = f->a.log_fd = f->b.stderr_fd = f->b.log_fd = -1;
    redis_srv_temp_dir(f->dir_a, sizeof f->dir_a, "e2e_snap_a");
    redis_srv_temp_dir(f->dir_b, sizeof f->dir_b, "e2e_snap_b");
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    pdi_daemon_cleanup(&f->a);
    pdi_daemon_cleanup(&f->b);
    int rc = redis_srv_remove(&f->redis);
    if (redis_srv_rm_dir(f->dir_a) != 0 || redis_srv_rm_dir(f->dir_b) != 0)
        rc = -1;
    free(f);
    return rc;
}

/* A Redis command's answer as text ("" for nil; an XRANGE: its first id). */
static void redis_text(fixture *f, char *out, size_t len, const char *cmd)
{
    redisContext *c = redis_srv_connect(&f->redis);
    assert_non_null(c);
    redisReply *r = redisCommand(c, cmd);
    assert_non_null(r);
    if (r->type == REDIS_REPLY_INTEGER)
        snprintf(out, len, "%lld", r->integer);
    else if (r->type == REDIS_REPLY_STRING)
        snprintf(out, len, "%s", r->str);
    else if (r->type == REDIS_REPLY_ARRAY && r->elements && r->element[0]->type == REDIS_REPLY_ARRAY)
        snprintf(out, len, "%s", r->element[0]->element[0]->str);
    else
        out[0] = '\0';
    freeReplyObject(r);
    redisFree(c);
}

/* Waits until arena's newest snapshot is past version `after` (the
 * server's timer writes it at the version it then serves, after the one
 * that made it due); its version. */
static unsigned wait_snapshot_after(fixture *f, unsigned after)
{
    char got[128] = "";
    unsigned inc = 0, v = 0;
    for (int waited = 0; waited < SNAPSHOT_WAIT_MS; waited += 50) {
        redis_text(f, got, sizeof got, "HGET pathd:{arena}:meta snap");
        if (sscanf(got, "%u-%u", &inc, &v) == 2 && v > after) {
            assert_int_equal(inc, 1);
            return v;
        }
        struct timespec ts = { 0, 50 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    fail_msg("no snapshot of arena past version %u after %d ms (newest: \"%s\")", after, SNAPSHOT_WAIT_MS, got);
    return 0;
}

/* Blocks cell (x, y) of scene: its status, and the version made. */
static int block_at(pdc_conn *c, const char *scene, int32_t x, int32_t y, uint64_t *version)
{
    pdc_update_req u = { .scene = scene, .is_rect = 1, .rect_min = { x, y }, .rect_max = { x, y },
                         .op = PDC_UPDATE_BLOCK };
    pdc_update_result r;
    int st = pdc_update_cells(c, &u, &r);
    *version = st == PDC_OK ? r.version : 0;
    return st;
}

/* Blocks cell (x, 0) of arena: a new version each time. */
static uint64_t block(pdc_conn *c, int32_t x)
{
    uint64_t v;
    assert_int_equal(block_at(c, "arena", x, 0, &v), PDC_OK);
    return v;
}

/* The scene's version as served, or 0 when it is not served. */
static uint64_t served_version(pdi_daemon *d, const char *scene)
{
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    pdc_scene_details info;
    int st = pdc_scene_info(c, scene, &info);
    uint64_t v = 0;
    if (st == PDC_OK) {
        v = info.version;
        pdc_scene_details_free(&info);
    } else {
        assert_int_equal(st, PDC_UNKNOWN_SCENE);
    }
    pdc_close(c);
    return v;
}

/* The daemons serve arena at the same version with the same cells. */
static void assert_same_arena(pdi_daemon *x, pdi_daemon *y)
{
    pdc_conn *cx = pdi_connect(x), *cy = pdi_connect(y);
    assert_non_null(cx);
    assert_non_null(cy);
    pdc_scene_details ix, iy;
    assert_int_equal(pdc_scene_info(cx, "arena", &ix), PDC_OK);
    assert_int_equal(pdc_scene_info(cy, "arena", &iy), PDC_OK);
    assert_int_equal(ix.version, iy.version);
    pdc_scene_details_free(&ix);
    pdc_scene_details_free(&iy);
    pdc_grid gx, gy;
    assert_int_equal(pdc_scene_grid(cx, "arena", 1, &gx), PDC_OK);
    assert_int_equal(pdc_scene_grid(cy, "arena", 1, &gy), PDC_OK);
    assert_int_equal(gx.width, gy.width);
    assert_int_equal(gx.height, gy.height);
    for (int32_t i = 0; i < gx.width * gx.height; i++)
        if (gx.cells[i] != gy.cells[i])
            fail_msg("cell (%d, %d): %u and %u", i % gx.width, i / gx.width, gx.cells[i], gy.cells[i]);
    pdc_grid_free(&gx);
    pdc_grid_free(&gy);
    pdc_close(cx);
    pdc_close(cy);
}

/* Redis and pathd A started, scene arena made on A: a connection to A. */
static pdc_conn *start_a_with_arena(fixture *f)
{
    redis_srv_start(&f->redis);
    start_pathd(f, &f->a, f->extra_a, sizeof f->extra_a, f->dir_a);
    pdc_conn *c = pdi_connect(&f->a);
    assert_non_null(c);
    uint8_t cells[32 * 24];
    for (size_t i = 0; i < sizeof cells; i++)
        cells[i] = (uint8_t)(1 + i % 5);
    pdc_create_scene_req req = { .name = "arena", .width = 32, .height = 24, .cells = cells };
    pdc_scene_change out;
    assert_int_equal(pdc_create_scene(c, &req, &out), PDC_OK);
    return c;
}

/* A's log holds line, and A and B serve the same arena; both stopped. */
static void assert_a_logged_then_same(fixture *f, const char *line)
{
    if (!pdi_log_contains(&f->a, line))
        fail_msg("A's log has no \"%s\"", line);
    assert_same_arena(&f->a, &f->b);
    assert_int_equal(pdi_daemon_stop(&f->a), 0);
    assert_int_equal(pdi_daemon_stop(&f->b), 0);
}

static void test_start_from_redis_and_from_cache(void **state)
{
    fixture *f = *state;
    pdc_conn *c = start_a_with_arena(f);
    /* 3N updates, each N waited for: a snapshot after each, the two
     * newest kept, the stream trimmed below the older. */
    int32_t x = 0;
    unsigned snap_v[3] = { 0 };
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < EVERY; i++)
            block(c, x++);
        snap_v[round] = wait_snapshot_after(f, round ? snap_v[round - 1] : 0);
    }
    char s[64], want[64];
    snprintf(want, sizeof want, "1-%u 1-%u", snap_v[1], snap_v[2]);
    redis_text(f, s, sizeof s, "HGET pathd:{arena}:meta snaps");
    assert_string_equal(s, want);
    snprintf(want, sizeof want, "1-%u", snap_v[1]);
    redis_text(f, s, sizeof s, "XRANGE pathd:{arena}:log - + COUNT 1");
    assert_string_equal(s, want);
    redis_text(f, s, sizeof s, "XLEN pathd:{arena}:log");
    assert_int_equal(atoi(s), 3 * EVERY + 1 - (int)snap_v[1] + 1);
    assert_int_equal(block(c, x++), 3 * EVERY + 2);
    pdc_close(c);

    /* B: an empty data_dir; the scene from Redis's snapshot and the tail. */
    char line[128];
    snprintf(line, sizeof line, "scene 'arena' starts at entry 1-%u from its snapshot in Redis", snap_v[2]);
    start_pathd(f, &f->b, f->extra_b, sizeof f->extra_b, f->dir_b);
    if (!pdi_log_contains(&f->b, line))
        fail_msg("B's log has no \"%s\"", line);
    assert_same_arena(&f->a, &f->b);

    /* A again on its data_dir: from its local cache, and the tail. */
    assert_int_equal(pdi_daemon_stop(&f->a), 0);
    pdi_daemon_cleanup(&f->a);
    start_pathd(f, &f->a, f->extra_a, sizeof f->extra_a, f->dir_a);
    snprintf(line, sizeof line, "scene 'arena' starts at entry 1-%u from the local cache", snap_v[2]);
    if (!pdi_log_contains(&f->a, line))
        fail_msg("A's log has no \"%s\"", line);
    /* ... then its local journal: the updates after the snapshot its tail
     * applied (its own, come back through the log); the stream is read
     * only after the last of them. */
    snprintf(line, sizeof line, "scene 'arena': %u entries from the local journal; the stream is read after entry 1-%d",
             3 * EVERY + 2 - snap_v[2], 3 * EVERY + 2);
    assert_a_logged_then_same(f, line);
}

/* A restart after the log went back (a failover to a Redis that lost the
 * newest entries): the local journal holds entries the log does not; it
 * is discarded, the scene serves the log's version and cells (those of a
 * replica with an empty data_dir), not the cache's. */
static void test_journal_of_a_log_that_went_back(void **state)
{
    fixture *f = *state;
    pdc_conn *c = start_a_with_arena(f);
    int32_t x = 0;
    for (int i = 0; i < EVERY; i++)
        block(c, x++);
    unsigned snap = wait_snapshot_after(f, 0);
    uint64_t last = 0;
    for (int i = 0; i < 3; i++)
        last = block(c, x++);
    pdc_close(c);
    /* The tail has journaled the last update once A serves it back from
     * the log: wait until the stream's newest entry is the last one. */
    char s[64], want[64], cmd[128];
    snprintf(want, sizeof want, "1-%" PRIu64, last);
    redis_text(f, s, sizeof s, "XREVRANGE pathd:{arena}:log + - COUNT 1");
    assert_string_equal(s, want);
    struct timespec ts = { 0, 300 * 1000 * 1000 };
    nanosleep(&ts, NULL);
    assert_int_equal(pdi_daemon_stop(&f->a), 0);
    pdi_daemon_cleanup(&f->a);

    /* The log loses its two newest entries. */
    for (uint64_t v = last; v > last - 2; v--) {
        snprintf(cmd, sizeof cmd, "XDEL pathd:{arena}:log 1-%" PRIu64, v);
        redis_text(f, s, sizeof s, cmd);
        assert_string_equal(s, "1");
    }
    snprintf(cmd, sizeof cmd, "HSET pathd:{arena}:meta v %" PRIu64, last - 2);
    redis_text(f, s, sizeof s, cmd);

    start_pathd(f, &f->a, f->extra_a, sizeof f->extra_a, f->dir_a);
    char line[256];
    snprintf(line, sizeof line, "scene 'arena' starts at entry 1-%u from the local cache", snap);
    if (!pdi_log_contains(&f->a, line))
        fail_msg("A's log has no \"%s\"", line);
    assert_int_equal(served_version(&f->a, "arena"), last - 2);
    start_pathd(f, &f->b, f->extra_b, sizeof f->extra_b, f->dir_b);
    snprintf(line, sizeof line, "the local journal (data_dir) holds entry 1-%" PRIu64 ", which the log does not", last);
    assert_a_logged_then_same(f, line);
}

/* Redis and pathd A with annex, changed once (its stream has a history),
 * and A's config rewritten without it, for the reload to come. */
static void annex_changed_then_config_without(fixture *f)
{
    redis_srv_start(&f->redis);
    start_pathd_with(f, &f->a, f->extra_a, sizeof f->extra_a, f->dir_a, 1);
    pdc_conn *c = pdi_connect(&f->a);
    assert_non_null(c);
    uint64_t v;
    assert_int_equal(block_at(c, "annex", 1, 1, &v), PDC_OK);
    assert_int_equal(v, 2);
    pdc_close(c);
    pdi_limits l = limits_of(f, f->extra_a, sizeof f->extra_a, f->dir_a, 0);
    assert_int_equal(pdi_write_config(&f->a, &l), 0);
}

/* SIGHUP to A, and the wait until it serves no annex. */
static void reload_without_annex(fixture *f)
{
    assert_int_equal(pdi_daemon_signal(&f->a, SIGHUP), 0);
    double deadline = pdi_now_ms() + RELOAD_WAIT_MS;
    while (served_version(&f->a, "annex") != 0 && pdi_now_ms() < deadline)
        pdi_sleep_ms(20);
    assert_int_equal(served_version(&f->a, "annex"), 0);
}

/* After the reload: annex's stream trimmed to its DROP (the compaction
 * after it), the log takes changes, and a restart on the reloaded config
 * serves the same. */
static void assert_reload_recorded(fixture *f)
{
    char s[64] = "";
    for (double deadline = pdi_now_ms() + SNAPSHOT_WAIT_MS; pdi_now_ms() < deadline; pdi_sleep_ms(50)) {
        redis_text(f, s, sizeof s, "XLEN pathd:{annex}:log");
        if (strcmp(s, "1") == 0)
            break;
    }
    assert_string_equal(s, "1"); /* the DROP alone */
    pdc_conn *c = pdi_connect(&f->a);
    assert_non_null(c);
    uint64_t v;
    if (block_at(c, "rooms", 1, 1, &v) != PDC_OK)
        fail_msg("an update after the reload: %s", pdc_last_error(c));
    assert_int_equal(v, 2);
    pdc_close(c);

    assert_int_equal(pdi_daemon_stop(&f->a), 0);
    pdi_daemon_cleanup(&f->a);
    start_pathd(f, &f->a, f->extra_a, sizeof f->extra_a, f->dir_a);
    assert_int_equal(served_version(&f->a, "annex"), 0);
    assert_int_equal(served_version(&f->a, "rooms"), 2);
    assert_int_equal(pdi_daemon_stop(&f->a), 0);
}

/* A reload that removes a scene the log has a history of: DROP through
 * the log, which goes on taking changes (it failed before); the stream
 * trimmed to the drop; a restart on the reloaded config serves the same. */
static void test_reload_removes_a_scene(void **state)
{
    fixture *f = *state;
    annex_changed_then_config_without(f);
    reload_without_annex(f);
    assert_reload_recorded(f);
}

/* A reload that removes a scene while Redis is stopped past the 500 ms
 * timeout: served at once, its DROP held, not lost; the server's 1 s
 * timer sends it again (its key answers the try Redis ran once it went
 * on), with no client change needed: the stream is trimmed to the drop,
 * the log takes changes, a restart serves what the reload left. Fails
 * without the fix: the unanswered DROP failed the log (the update after
 * it INTERNAL, "restart pathd"), and nothing trimmed the stream. */
static void test_reload_while_redis_is_stopped(void **state)
{
    fixture *f = *state;
    annex_changed_then_config_without(f);
    assert_int_equal(kill(f->redis.pid, SIGSTOP), 0);
    reload_without_annex(f);
    pdi_sleep_ms(1500); /* the timer's retries meet a silent Redis */
    assert_int_equal(kill(f->redis.pid, SIGCONT), 0);
    assert_reload_recorded(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_start_from_redis_and_from_cache, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reload_removes_a_scene, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reload_while_redis_is_stopped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_journal_of_a_log_that_went_back, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
