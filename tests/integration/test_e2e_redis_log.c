/*
 * test_e2e_redis_log.c - the change log on Redis Streams (config "log",
 * issue 32) through the real daemon and a redis-server of the test's own:
 * a scene created, updated and instanced, the config's scene updated, then
 * kill -9 of pathd right after an acknowledged update; a pathd started on
 * the same Redis serves the same versions and cells. With Redis killed an
 * update is answered the retryable UNAVAILABLE, nothing served; with Redis
 * back (its AOF fsynced before each answer) the same update goes through
 * at the next version, on the same pathd. Updates sent together go
 * through in order at dense versions (the replica gathers them into one
 * pipeline of appends), and with Redis killed while they are in flight
 * each answers UNAVAILABLE, and each applies exactly once when resent.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <hiredis/hiredis.h>

#include "harness.h"
#include "../unit/redis_server.h"

/* pathd.v1.Status UNAVAILABLE: the change log cannot be reached (the C
 * client names statuses up to WATCH_OVERFLOW). */
#define UNAVAILABLE 43

typedef struct fixture {
    redis_srv redis;
    char extra[256];
    pdi_daemon d;
} fixture;

static void start_pathd(fixture *f)
{
    snprintf(f->extra, sizeof f->extra, "\"log\": {\"redis\": \"127.0.0.1:%d\", \"timeout_ms\": 500},", f->redis.port);
    pdi_limits l = { .extra_json = f->extra };
    assert_int_equal(pdi_daemon_start(&f->d, &l), 0);
    if (!pdi_log_contains(&f->d, "change log on Redis 127.0.0.1:")) {
        pdi_print_log(&f->d);
        fail_msg("no log line of the Redis change log's replay");
    }
}

/* Redis, then pathd over it, and a client connection to pathd. */
static pdc_conn *start_all(fixture *f)
{
    redis_srv_start(&f->redis);
    start_pathd(f);
    pdc_conn *c = pdi_connect(&f->d);
    assert_non_null(c);
    return c;
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
    int rc = redis_srv_remove(&f->redis);
    free(f);
    return rc;
}

/* A scene's version and its unit-1 grid, read through the daemon. */
static void scene_read(pdc_conn *c, const char *name, uint64_t *version, pdc_grid *g)
{
    pdc_scene_details info;
    assert_int_equal(pdc_scene_info(c, name, &info), PDC_OK);
    *version = info.version;
    pdc_scene_details_free(&info);
    assert_int_equal(pdc_scene_grid(c, name, 1, g), PDC_OK);
}

static void test_restart_and_redis_down(void **state)
{
    fixture *f = *state;
    pdc_conn *c = start_all(f);
    uint8_t cells[32 * 24];
    for (size_t i = 0; i < sizeof cells; i++)
        cells[i] = (uint8_t)(i % 7 == 0 ? 0 : 1 + i % 5);
    pdc_create_scene_req req = { .name = "arena", .width = 32, .height = 24, .cells = cells };
    pdc_scene_change out;
    assert_int_equal(pdc_create_scene(c, &req, &out), PDC_OK);
    uint64_t v = 0;
    assert_int_equal(pdi_update_rect(c, "arena", PDC_UPDATE_BLOCK, 0, 2, 2, 9, 3, &v), PDC_OK);
    assert_int_equal(v, 2);
    assert_int_equal(pdc_create_instance(c, "arena-1", "arena", &out), PDC_OK);
    assert_int_equal(pdi_update_rect(c, "arena-1", PDC_UPDATE_PASS, 0, 2, 2, 4, 3, &v), PDC_OK);
    assert_int_equal(pdi_update_rect(c, "rooms", PDC_UPDATE_BLOCK, 0, 5, 5, 5, 8, &v), PDC_OK);
    assert_int_equal(pdi_update_rect(c, "arena", PDC_UPDATE_BLOCK, 0, 20, 10, 21, 12, &v), PDC_OK);
    assert_int_equal(v, 3);
    /* arena, arena-1 and rooms: every scene but the harness's big ones. */
    pdi_world before;
    pdi_world_read(c, &before);
    assert_int_equal(before.n, 3);
    pdc_close(c);

    /* kill -9 right after the acknowledged update; a new pathd replays. */
    pdi_daemon_kill9(&f->d);
    start_pathd(f);
    c = pdi_connect(&f->d);
    assert_non_null(c);
    pdi_world after;
    pdi_world_read(c, &after);
    pdi_world_assert_equal(&before, &after);
    pdi_world_free(&before);
    pdi_world_free(&after);

    /* Redis down: retryable, nothing served; back: the same update goes
     * through at the next version. */
    redis_srv_stop(&f->redis, SIGKILL);
    assert_int_equal(pdi_update_rect(c, "arena", PDC_UPDATE_PASS, 0, 2, 2, 9, 3, &v), UNAVAILABLE);
    assert_non_null(strstr(pdc_last_error(c), "try again"));
    assert_int_equal(pdi_update_rect(c, "arena", PDC_UPDATE_PASS, 0, 2, 2, 9, 3, &v), UNAVAILABLE);
    pdc_scene_details info;
    assert_int_equal(pdc_scene_info(c, "arena", &info), PDC_OK);
    assert_int_equal(info.version, 3);
    pdc_scene_details_free(&info);
    pdc_grid now;
    assert_int_equal(pdc_scene_grid(c, "arena", 1, &now), PDC_OK);
    assert_int_equal(now.cells[2 * now.width + 2], 0); /* still blocked */
    pdc_grid_free(&now);
    redis_srv_start(&f->redis);
    /* The log's reconnect backs off (at most PD_REDIS_BACKOFF_MAX_MS). */
    int st = UNAVAILABLE;
    for (int i = 0; i < 200 && st == UNAVAILABLE; i++) {
        if ((st = pdi_update_rect(c, "arena", PDC_UPDATE_PASS, 0, 2, 2, 9, 3, &v)) == UNAVAILABLE)
            pdi_sleep_ms(20);
    }
    assert_int_equal(st, PDC_OK);
    assert_int_equal(v, 4);
    pdc_close(c);
    assert_int_equal(pdi_daemon_stop(&f->d), 0);
    pdi_daemon_cleanup(&f->d);
}

/* ---- updates in flight together ------------------------------------------ */

#define PIPE_N 40

/* Sends UpdateCells blocking cell (i % 32, i / 32) of "arena" under key
 * "KIND-i", id base + i, for i in [from, to), all before reading any
 * answer. */
static void send_blocks(int fd, const char *kind, int from, int to, uint64_t base)
{
    for (int i = from; i < to; i++) {
        Pathd__V1__Request req = PATHD__V1__REQUEST__INIT;
        Pathd__V1__UpdateCells uc = PATHD__V1__UPDATE_CELLS__INIT;
        Pathd__V1__CellList list = PATHD__V1__CELL_LIST__INIT;
        Pathd__V1__Cell cell = PATHD__V1__CELL__INIT;
        Pathd__V1__Cell *cells[1] = { &cell };
        cell.x = i % 32;
        cell.y = i / 32;
        list.n_cells = 1;
        list.cells = cells;
        char key[32];
        snprintf(key, sizeof key, "%s-%d", kind, i);
        uc.scene = "arena";
        uc.target_case = PATHD__V1__UPDATE_CELLS__TARGET_CELLS;
        uc.cells = &list;
        uc.op = PATHD__V1__UPDATE_OP__UPDATE_BLOCK;
        uc.idempotency_key = key;
        req.id = base + (uint64_t)i;
        req.body_case = PATHD__V1__REQUEST__BODY_UPDATE_CELLS;
        req.update_cells = &uc;
        assert_int_equal(pdi_raw_send_request(fd, &req), 0);
    }
}

/* The answers to ids base + [from, to): their statuses, and versions. */
static void collect(int fd, int from, int to, uint64_t base, int *status, uint64_t *version)
{
    uint64_t ids[PIPE_N];
    Pathd__V1__Response *r[PIPE_N];
    int n = to - from;
    for (int i = 0; i < n; i++)
        ids[i] = base + (uint64_t)(from + i);
    pdi_raw_collect(fd, ids, r, (size_t)n);
    for (int i = 0; i < n; i++) {
        status[i] = r[i]->status;
        version[i] = r[i]->status == PATHD__V1__STATUS__OK && r[i]->body_case == PATHD__V1__RESPONSE__BODY_UPDATE
                         ? r[i]->update->version
                         : 0;
    }
    pdi_raw_free_all(r, (size_t)n);
}

static long long stream_len_of(redis_srv *srv, const char *scene)
{
    redisContext *c = redis_srv_connect(srv);
    assert_non_null(c);
    redisReply *r = redisCommand(c, "XLEN pathd:{%s}:log", scene);
    assert_non_null(r);
    long long n = r->integer;
    freeReplyObject(r);
    redisFree(c);
    return n;
}

/* Updates of one scene sent together (one replica gathers them into
 * pipelined appends): every one answered OK, at the versions after the
 * scene's, dense and in the order sent. Then Redis stopped, updates sent
 * together, Redis killed -9 with them in flight: every one answered the
 * retryable UNAVAILABLE and nothing served; Redis back, the same updates
 * (same keys) sent again apply exactly once each, in the order taken. */
static void test_updates_in_flight_together(void **state)
{
    fixture *f = *state;
    pdc_conn *c = start_all(f);
    uint8_t cells[32 * 24];
    memset(cells, 1, sizeof cells);
    pdc_create_scene_req req = { .name = "arena", .width = 32, .height = 24, .cells = cells };
    pdc_scene_change out;
    assert_int_equal(pdc_create_scene(c, &req, &out), PDC_OK);
    int fd = pdi_raw_connect(f->d.port);
    assert_true(fd >= 0);
    int status[PIPE_N];
    uint64_t version[PIPE_N];
    const int half = PIPE_N / 2;
    send_blocks(fd, "p", 0, half, 1000);
    collect(fd, 0, half, 1000, status, version);
    for (int i = 0; i < half; i++) {
        assert_int_equal(status[i], PATHD__V1__STATUS__OK);
        assert_int_equal(version[i], 2 + (uint64_t)i);
    }
    assert_int_equal(stream_len_of(&f->redis, "arena"), 1 + half);

    kill(f->redis.pid, SIGSTOP);
    send_blocks(fd, "p", half, PIPE_N, 1000);
    pdi_sleep_ms(200);
    redis_srv_stop(&f->redis, SIGKILL);
    collect(fd, half, PIPE_N, 1000, status, version);
    for (int i = 0; i < half; i++)
        assert_int_equal(status[i], UNAVAILABLE);
    uint64_t v;
    pdc_grid g;
    scene_read(c, "arena", &v, &g);
    assert_int_equal(v, 1 + (uint64_t)half);
    for (int i = half; i < PIPE_N; i++)
        assert_int_not_equal(g.cells[(i / 32) * g.width + i % 32], 0);
    pdc_grid_free(&g);

    /* Redis back: the whole batch resent until every one is OK. The log
     * reconnects with a backoff, so one send can straddle it - its first
     * updates refused, its later ones taken (each update stands alone,
     * docs/PROTOCOL.md) - and the refused ones then go in on a later
     * send. So: each update is taken once, at the version it keeps on
     * every later send (its key), and the order of first acceptance,
     * send by send and in each send the order sent, is the version order. */
    redis_srv_start(&f->redis);
    int ok = 0;
    int taken_on[PIPE_N / 2];
    uint64_t taken_at[PIPE_N / 2];
    for (int i = 0; i < half; i++)
        taken_on[i] = -1;
    for (int tries = 0; tries < 200 && !ok; tries++) {
        send_blocks(fd, "p", half, PIPE_N, 2000 + 100 * (uint64_t)tries);
        collect(fd, half, PIPE_N, 2000 + 100 * (uint64_t)tries, status, version);
        ok = 1;
        for (int i = 0; i < half; i++) {
            if (status[i] != PATHD__V1__STATUS__OK) {
                assert_int_equal(status[i], UNAVAILABLE);
                assert_int_equal(taken_on[i], -1); /* once taken, always OK */
                ok = 0;
                continue;
            }
            if (taken_on[i] < 0) {
                taken_on[i] = tries;
                taken_at[i] = version[i];
            }
            assert_int_equal(version[i], taken_at[i]);
        }
        if (!ok)
            pdi_sleep_ms(20);
    }
    assert_true(ok);
    for (int next = 0; next < half; next++) { /* the (try, i)-least not yet counted gets 22, 23, ... */
        int best = -1;
        for (int i = 0; i < half; i++)
            if (taken_on[i] >= 0 && (best < 0 || taken_on[i] < taken_on[best]))
                best = i;
        assert_true(best >= 0);
        assert_int_equal(taken_at[best], 2 + (uint64_t)(half + next));
        taken_on[best] = -1;
    }
    assert_int_equal(stream_len_of(&f->redis, "arena"), 1 + PIPE_N);
    scene_read(c, "arena", &v, &g);
    assert_int_equal(v, 1 + (uint64_t)PIPE_N);
    for (int i = 0; i < PIPE_N; i++)
        assert_int_equal(g.cells[(i / 32) * g.width + i % 32], 0);
    pdc_grid_free(&g);
    close(fd);
    pdc_close(c);
    assert_int_equal(pdi_daemon_stop(&f->d), 0);
    pdi_daemon_cleanup(&f->d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_restart_and_redis_down, setup, teardown),
        cmocka_unit_test_setup_teardown(test_updates_in_flight_together, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
