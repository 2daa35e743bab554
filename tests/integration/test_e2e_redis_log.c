/*
 * test_e2e_redis_log.c - the change log on Redis Streams (config "log",
 * issue 32) through the real daemon and a redis-server of the test's own:
 * a scene created, updated and instanced, the config's scene updated, then
 * kill -9 of pathd right after an acknowledged update; a pathd started on
 * the same Redis serves the same versions and cells. With Redis killed an
 * update is answered the retryable UNAVAILABLE, nothing served; with Redis
 * back (its AOF fsynced before each answer) the same update goes through
 * at the next version, on the same pathd.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static void test_restart_and_redis_down(void **state)
{
    fixture *f = *state;
    redis_srv_start(&f->redis);
    start_pathd(f);
    pdc_conn *c = pdi_connect(&f->d);
    assert_non_null(c);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_restart_and_redis_down, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
