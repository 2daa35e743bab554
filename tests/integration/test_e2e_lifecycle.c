/*
 * test_e2e_lifecycle.c - the daemon as a process: graceful stop on SIGTERM
 * and SIGINT with work in flight, config reload on SIGHUP (a good config
 * swaps scenes in, a broken one is refused and the old scenes keep serving),
 * --check-config, --help, --version and bad arguments.
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

#include "harness.h"

/* Long enough for the in-flight searches even under TSan; the daemon exits
 * as soon as they are done, so a passing test never waits this long. */
#define T_GRACE_MS 30000
/* Long searches in flight when SIGTERM arrives (four per worker). */
#define T_IN_FLIGHT 8
/* How long a short-lived `pathd --check-config` etc. may take. */
#define T_RUN_TIMEOUT_MS 20000
/* How long a reload may take to show. */
#define T_RELOAD_TIMEOUT_MS 10000

static int setup(void **state)
{
    pdi_limits l = {0};
    l.shutdown_grace_ms = T_GRACE_MS;
    return pdi_fixture_start(state, &l);
}

/* SIGTERM (or SIGINT) with searches in flight: every one is answered in
 * full, new connections are refused, and the exit status is 0. */
static void stop_with_work_in_flight(pdi_daemon *d, int sig)
{
    /* Before the signal, the daemon must have read every request: its
     * request counter says so (asked on another connection, whose own Stats
     * requests count too, so no answer on fd is consumed here). */
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    pdc_server_stats st = {0};
    assert_int_equal(pdc_stats(c, &st), PDC_OK);
    uint64_t base = st.requests_total;
    int fd = pdi_raw_connect(d->port);
    assert_true(fd >= 0);
    for (uint64_t id = 1; id <= T_IN_FLIGHT; id++)
        pdi_send_serpent(fd, id, 0);
    uint64_t polls = 0;
    double deadline = pdi_now_ms() + PDI_CALL_TIMEOUT_MS;
    do {
        assert_int_equal(pdc_stats(c, &st), PDC_OK);
        polls++;
    } while (st.requests_total < base + polls + T_IN_FLIGHT && pdi_now_ms() < deadline);
    assert_true(st.requests_total >= base + polls + T_IN_FLIGHT);
    pdc_close(c);
    Pathd__V1__Response *r;
    assert_int_equal(pdi_daemon_signal(d, sig), 0);
    assert_true(pdi_wait_log(d, sig == SIGTERM ? "received SIGTERM" : "received SIGINT", T_RELOAD_TIMEOUT_MS));
    /* The daemon logs "stopping: N connections, M jobs in flight": there
     * was work left to finish, or this test would prove nothing. */
    assert_true(pdi_wait_log(d, "jobs in flight", T_RELOAD_TIMEOUT_MS));
    assert_true(pdi_log_contains(d, "connections, ") && !pdi_log_contains(d, "connections, 0 jobs in flight"));
    /* No longer accepting. */
    int late = pdi_raw_connect(d->port);
    if (late >= 0) {
        /* Accepted by the kernel's backlog at most: never served. */
        assert_true(pdi_raw_wait_closed(late, PDI_CALL_TIMEOUT_MS));
        close(late);
    }
    for (int k = 0; k < T_IN_FLIGHT; k++) {
        r = pdi_raw_recv(fd, T_GRACE_MS, NULL);
        assert_non_null(r);
        if (!r->final) {
            pathd__v1__response__free_unpacked(r, NULL);
            k--;
            continue;
        }
        assert_true(r->id >= 1 && r->id <= T_IN_FLIGHT);
        assert_int_equal(r->status, PATHD__V1__STATUS__OK);
        assert_true(r->path->cost == pdi_serpent_cost());
        pathd__v1__response__free_unpacked(r, NULL);
    }
    /* Then the daemon closes the connection and exits 0. */
    assert_true(pdi_raw_wait_closed(fd, PDI_CALL_TIMEOUT_MS));
    close(fd);
    assert_int_equal(pdi_daemon_wait_exit(d, T_GRACE_MS + PDI_STOP_SLACK_MS), 0);
    assert_int_equal(pdi_daemon_check_exit(d), 0);
}

static void test_sigterm_with_work_in_flight(void **state)
{
    stop_with_work_in_flight(*state, SIGTERM);
}

static void test_sigint_with_work_in_flight(void **state)
{
    stop_with_work_in_flight(*state, SIGINT);
}

static int has_scene(const pdi_daemon *d, const char *name)
{
    pdc_conn *c = pdi_connect(d);
    if (!c)
        return -1;
    pdc_scene_list l = {0};
    int found = 0;
    if (pdc_list_scenes(c, &l) != PDC_OK)
        found = -1;
    for (size_t i = 0; i < l.count; i++)
        found |= strcmp(l.scenes[i].name, name) == 0;
    pdc_scene_list_free(&l);
    pdc_close(c);
    return found;
}

static void test_sighup_reload(void **state)
{
    pdi_daemon *d = *state;
    assert_int_equal(has_scene(d, "annex"), 0);

    /* A good config with one more scene: it appears, and paths on it work. */
    pdi_limits l = {0};
    l.shutdown_grace_ms = T_GRACE_MS;
    l.extra_scenes_json = ",\n    {\"name\": \"annex\", \"map\": \"" PD_TEST_DATA_DIR "/integ_rooms.txt\", "
                          "\"format\": \"ascii\", \"origin\": [100, 100]}";
    assert_int_equal(pdi_write_config(d, &l), 0);
    assert_int_equal(pdi_daemon_signal(d, SIGHUP), 0);
    double deadline = pdi_now_ms() + T_RELOAD_TIMEOUT_MS;
    while (has_scene(d, "annex") != 1 && pdi_now_ms() < deadline)
        pdi_sleep_ms(20);
    assert_int_equal(has_scene(d, "annex"), 1);
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    pdc_path_req req = {0};
    req.scene = "annex";
    req.start = pdc_world(101.5, 101.5); /* cell (1,1) of the annex */
    req.goal = pdc_cell(10, 1);
    pdc_path_result r = {0};
    assert_int_equal(pdc_find_path(c, &req, &r), PDC_OK);
    assert_int_equal(r.waypoints[0].x, 1);
    assert_int_equal(r.waypoints[0].y, 1);
    assert_true(r.cost == 9.0);
    pdc_path_result_free(&r);
    pdc_close(c);
    pdi_assert_daemon_serves(d);

    /* A broken file is refused; the running scenes, annex included, stay. */
    assert_int_equal(pdi_write_config_text(d, "{ \"listen\": \"127.0.0.1:0\", \"scenes\": [ "), 0);
    assert_int_equal(pdi_daemon_signal(d, SIGHUP), 0);
    assert_true(pdi_wait_log(d, "reload refused", T_RELOAD_TIMEOUT_MS));
    assert_int_equal(has_scene(d, "annex"), 1);
    pdi_assert_daemon_serves(d);

    /* So is a well-formed config naming a map that does not exist (nothing
     * may be half-loaded): the scene it would drop stays too. */
    l.extra_scenes_json = ",\n    {\"name\": \"ghost\", \"map\": \"/nonexistent/ghost.map\", \"format\": \"movingai\"}";
    assert_int_equal(pdi_write_config(d, &l), 0);
    assert_int_equal(pdi_daemon_signal(d, SIGHUP), 0);
    deadline = pdi_now_ms() + T_RELOAD_TIMEOUT_MS;
    while (pdi_log_count(d, "reload refused") < 2 && pdi_now_ms() < deadline)
        pdi_sleep_ms(20);
    assert_int_equal(pdi_log_count(d, "reload refused"), 2);
    assert_int_equal(has_scene(d, "ghost"), 0);
    assert_int_equal(has_scene(d, "annex"), 1);
    pdi_assert_daemon_serves(d);

    /* And a good config after the bad ones is taken again (annex removed). */
    l.extra_scenes_json = NULL;
    assert_int_equal(pdi_write_config(d, &l), 0);
    assert_int_equal(pdi_daemon_signal(d, SIGHUP), 0);
    deadline = pdi_now_ms() + T_RELOAD_TIMEOUT_MS;
    while (has_scene(d, "annex") != 0 && pdi_now_ms() < deadline)
        pdi_sleep_ms(20);
    assert_int_equal(has_scene(d, "annex"), 0);
    pdi_assert_daemon_serves(d);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

static void test_check_config(void **state)
{
    pdi_daemon *d = *state;
    char out[8192];
    /* The fixture's own config is good: all three scenes load. */
    const char *good[] = {"--check-config", "--config", d->config_path, NULL};
    assert_int_equal(pdi_run_pathd(good, T_RUN_TIMEOUT_MS, out, sizeof out), 0);
    assert_non_null(strstr(out, "3 scenes"));
    assert_non_null(strstr(out, "den520d"));

    char bad[PDI_PATH_MAX + 32];
    const char *bad_args[] = {"--check-config", "--config", bad, NULL};
    /* Each broken config, and a text its error must contain: the config
     * file for errors in the file itself (NULL below), the map file for a
     * map that cannot be read. */
    static const char *const broken[][2] = {
        {"{ \"scenes\": [ ", NULL},                                            /* not JSON */
        {"{ \"listen\": \"127.0.0.1:0\", \"threadz\": 2 }", NULL},             /* unknown key */
        {"{ \"limits\": { \"max_frame_bytes\": 1 } }", NULL},                  /* out of range */
        {"{ \"scenes\": [ {\"name\": \"x\", \"map\": \"/nonexistent.map\", \"format\": \"movingai\"} ] }",
         "/nonexistent.map"},
    };
    for (size_t i = 0; i < sizeof broken / sizeof broken[0]; i++) {
        snprintf(bad, sizeof bad, "%s/bad%zu.json", d->dir, i);
        write_file(bad, broken[i][0]);
        int st = pdi_run_pathd(bad_args, T_RUN_TIMEOUT_MS, out, sizeof out);
        if (st != 1)
            fail_msg("--check-config on bad config %zu exited %d: %s", i, st, out);
        const char *named = broken[i][1] ? broken[i][1] : bad;
        if (!strstr(out, named))
            fail_msg("--check-config on bad config %zu does not name %s: %s", i, named, out);
        unlink(bad);
    }
    /* A missing config file is a bad config too. */
    snprintf(bad, sizeof bad, "%s/missing.json", d->dir);
    assert_int_equal(pdi_run_pathd(bad_args, T_RUN_TIMEOUT_MS, out, sizeof out), 1);
}

static void test_command_line(void **state)
{
    (void)state;
    char out[8192];
    const char *help[] = {"--help", NULL};
    assert_int_equal(pdi_run_pathd(help, T_RUN_TIMEOUT_MS, out, sizeof out), 0);
    assert_non_null(strstr(out, "usage"));
    const char *version[] = {"--version", NULL};
    assert_int_equal(pdi_run_pathd(version, T_RUN_TIMEOUT_MS, out, sizeof out), 0);
    assert_non_null(strstr(out, "pathd"));
    static const char *const bad[][3] = {
        {"--frobnicate", NULL, NULL},
        {"--threads", "many", NULL},
        {"--threads", "100000", NULL},
        {"--listen", "nowhere", NULL},
        {"--log-level", "loud", NULL},
        {"--config", NULL, NULL}, /* missing value */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *args[3] = {bad[i][0], bad[i][1], NULL};
        int st = pdi_run_pathd(args, T_RUN_TIMEOUT_MS, out, sizeof out);
        if (st != 2)
            fail_msg("pathd %s %s exited %d, expected 2: %s", bad[i][0], bad[i][1] ? bad[i][1] : "", st, out);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sigterm_with_work_in_flight, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_sigint_with_work_in_flight, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_sighup_reload, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_check_config, setup, pdi_fixture_stop),
        cmocka_unit_test(test_command_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
