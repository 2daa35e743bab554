/*
 * test_e2e_redis_snapshot.c - snapshots in Redis and the local cache
 * through the real daemon (config "log" with "snapshot_every", issue 32
 * "Start and catch-up"), on a redis-server of the test's own. pathd A
 * makes 3N updates of a scene: its snapshots appear in Redis, the two
 * newest kept, and the stream holds nothing below the oldest. pathd B,
 * started with an empty data_dir on the same Redis, starts the scene from
 * Redis's snapshot and serves the same version and cells, cell by cell.
 * A restarted on its own data_dir starts from its local cache and serves
 * the same again.
 */
#include <setjmp.h>
#include <signal.h>
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

static void start_pathd(fixture *f, pdi_daemon *d, char *extra, size_t len, const char *data_dir)
{
    snprintf(extra, len,
             "\"data_dir\": \"%s\", \"log\": {\"redis\": \"127.0.0.1:%d\", \"timeout_ms\": 500, "
             "\"snapshot_every\": %d, \"snapshot_keep\": 2},",
             data_dir, f->redis.port, EVERY);
    pdi_limits l = { .extra_json = extra };
    assert_int_equal(pdi_daemon_start(d, &l), 0);
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

/* Blocks cell (x, 0) of arena: a new version each time. */
static uint64_t block(pdc_conn *c, int32_t x)
{
    pdc_update_req u = { .scene = "arena", .is_rect = 1, .rect_min = { x, 0 }, .rect_max = { x, 0 },
                         .op = PDC_UPDATE_BLOCK };
    pdc_update_result r;
    assert_int_equal(pdc_update_cells(c, &u, &r), PDC_OK);
    return r.version;
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

static void test_start_from_redis_and_from_cache(void **state)
{
    fixture *f = *state;
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
    assert_same_arena(&f->a, &f->b);
    assert_int_equal(pdi_daemon_stop(&f->a), 0);
    assert_int_equal(pdi_daemon_stop(&f->b), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_start_from_redis_and_from_cache, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
