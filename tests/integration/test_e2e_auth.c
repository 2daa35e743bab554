/*
 * test_e2e_auth.c - authentication through the real daemon (issue 10):
 * until a connection authenticates only Ping and Auth are served; each
 * role does what it may and is refused the rest (query cannot update,
 * write cannot reload or read stats); a wrong token is answered after the
 * fixed delay and the connection closed; tokens never reach the log; and
 * protected mode refuses to start a daemon listening off loopback with no
 * token, for the request port and the metrics port alike.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"

#define T_QUERY "query-token-0123456789"
#define T_WRITE "write-token-0123456789"
#define T_ADMIN "admin-token-0123456789"
/* PD_SERVER_AUTH_FAIL_DELAY_MS in server/net/pd_server.h. */
#define T_FAIL_DELAY_MS 1000

static int setup(void **state)
{
    pdi_limits l = {0};
    l.auth_json = "{\"tokens\": ["
                  "{\"token\": \"" T_QUERY "\", \"role\": \"query\"},"
                  "{\"token\": \"" T_WRITE "\", \"role\": \"write\"},"
                  "{\"token\": \"" T_ADMIN "\", \"role\": \"admin\"}]}";
    return pdi_fixture_start(state, &l);
}

static pdc_conn *connect_as(const pdi_daemon *d, const char *token, const char *want_role)
{
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    char role[16] = "";
    assert_int_equal(pdc_auth(c, token, role, sizeof role), PDC_OK);
    assert_string_equal(role, want_role);
    return c;
}

static int try_path(pdc_conn *c)
{
    pdc_path_req req;
    memset(&req, 0, sizeof req);
    req.scene = "serpent";
    req.start = (pdc_point){0, 0, 0, 0, 0};
    req.goal = (pdc_point){0, 2, 0, 0, 0};
    pdc_path_result r;
    int st = pdc_find_path(c, &req, &r);
    pdc_path_result_free(&r);
    return st;
}

static int try_update(pdc_conn *c)
{
    pdc_update_req u;
    memset(&u, 0, sizeof u);
    u.scene = "serpent";
    u.op = PDC_UPDATE_PASS;
    u.is_rect = 1;
    u.rect_min = (pdc_xy){0, 0};
    u.rect_max = (pdc_xy){0, 0};
    pdc_update_result res;
    return pdc_update_cells(c, &u, &res);
}

static int try_stats(pdc_conn *c)
{
    pdc_server_stats st;
    return pdc_stats(c, &st);
}

/* Before Auth: Ping answers, everything else is UNAUTHENTICATED and the
 * connection stays open for the Auth that follows. */
static void test_unauthenticated_only_ping(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    assert_int_equal(pdc_ping(c, NULL), PDC_OK);
    assert_int_equal(try_path(c), PDC_UNAUTHENTICATED);
    pdc_scene_list list;
    assert_int_equal(pdc_list_scenes(c, &list), PDC_UNAUTHENTICATED);
    assert_int_equal(try_stats(c), PDC_UNAUTHENTICATED);
    char role[16];
    assert_int_equal(pdc_auth(c, T_QUERY, role, sizeof role), PDC_OK);
    assert_int_equal(try_path(c), PDC_OK);
    pdc_close(c);
}

static void test_query_role(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = connect_as(d, T_QUERY, "query");
    assert_int_equal(try_path(c), PDC_OK);
    pdc_scene_list list;
    assert_int_equal(pdc_list_scenes(c, &list), PDC_OK);
    pdc_scene_list_free(&list);
    assert_int_equal(try_update(c), PDC_PERMISSION_DENIED);
    assert_non_null(strstr(pdc_last_error(c), "needs write"));
    pdc_scene_change sc;
    assert_int_equal(pdc_create_instance(c, "rooms-copy", "rooms", &sc), PDC_PERMISSION_DENIED);
    assert_int_equal(pdc_drop_scene(c, "rooms", 0, &sc), PDC_PERMISSION_DENIED);
    assert_int_equal(try_stats(c), PDC_PERMISSION_DENIED);
    assert_int_equal(pdc_reload(c), PDC_PERMISSION_DENIED);
    pdc_close(c);
}

static void test_write_role(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = connect_as(d, T_WRITE, "write");
    assert_int_equal(try_path(c), PDC_OK);
    assert_int_equal(try_update(c), PDC_OK);
    pdc_scene_change sc;
    assert_int_equal(pdc_create_instance(c, "rooms-copy", "rooms", &sc), PDC_OK);
    assert_int_equal(pdc_drop_scene(c, "rooms-copy", 0, &sc), PDC_OK);
    assert_int_equal(pdc_reload(c), PDC_PERMISSION_DENIED);
    assert_int_equal(try_stats(c), PDC_PERMISSION_DENIED);
    assert_false(pdi_log_contains(d, "reloading"));
    pdc_close(c);
}

static void test_admin_role(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = connect_as(d, T_ADMIN, "admin");
    assert_int_equal(try_update(c), PDC_OK);
    assert_int_equal(try_stats(c), PDC_OK);
    assert_int_equal(pdc_reload(c), PDC_OK);
    assert_true(pdi_wait_log(d, "reloaded", PDI_CALL_TIMEOUT_MS));
    pdc_close(c);
}

/* A wrong token: no answer before the delay, then UNAUTHENTICATED and the
 * close; the token is nowhere in the log, the right ones neither. */
static void test_wrong_token_closed_after_delay(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    pdc_set_timeout(c, 5000);
    double t0 = pdi_now_ms();
    assert_int_equal(pdc_auth(c, "wrong-token-0123456789", NULL, 0), PDC_UNAUTHENTICATED);
    double took = pdi_now_ms() - t0;
    /* Not before the delay. No upper bound is timed: an answer held back
     * past the client's 5 s timeout would have failed the call above. */
    assert_true(took >= T_FAIL_DELAY_MS * 0.9);
    pdc_close(c);
    assert_true(pdi_wait_log(d, "wrong token", PDI_CALL_TIMEOUT_MS));
    assert_false(pdi_log_contains(d, "wrong-token-0123456789"));
    assert_false(pdi_log_contains(d, T_QUERY));
    assert_false(pdi_log_contains(d, T_ADMIN));
    /* Others are served as before. */
    pdc_conn *ok = connect_as(d, T_QUERY, "query");
    assert_int_equal(try_path(ok), PDC_OK);
    pdc_close(ok);
}

/* Protected mode: off loopback with no token the daemon will not start,
 * and says why; an explicit "protected_mode": false lets it. */
static void test_protected_mode(void **state)
{
    (void)state;
    char dir[] = "/tmp/pathd_auth_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char map[PDI_PATH_MAX], conf[PDI_PATH_MAX];
    snprintf(map, sizeof map, "%s/m.txt", dir);
    snprintf(conf, sizeof conf, "%s/c.json", dir);
    FILE *f = fopen(map, "w");
    assert_non_null(f);
    fputs("....\n....\n", f);
    fclose(f);
    static const char *const listens[][2] = {
        {"0.0.0.0:0", NULL},
        {"127.0.0.1:0", "0.0.0.0:0"},
    };
    char out[4096];
    for (size_t i = 0; i < 2; i++) {
        f = fopen(conf, "w");
        assert_non_null(f);
        fprintf(f, "{\"listen\": \"%s\", %s%s%s \"scenes\": [{\"name\": \"m\", \"map\": \"m.txt\", "
                   "\"format\": \"ascii\"}]}",
                listens[i][0], listens[i][1] ? "\"metrics_listen\": \"" : "", listens[i][1] ? listens[i][1] : "",
                listens[i][1] ? "\"," : "");
        fclose(f);
        const char *args[] = {"--config", conf, NULL};
        int rc = pdi_run_pathd(args, 10000, out, sizeof out);
        assert_int_equal(rc, 1);
        assert_non_null(strstr(out, "protected mode"));
        const char *check[] = {"--check-config", "--config", conf, NULL};
        assert_int_not_equal(pdi_run_pathd(check, 10000, out, sizeof out), 0);
    }
    /* Turned off on purpose: --check-config passes. */
    f = fopen(conf, "w");
    assert_non_null(f);
    fputs("{\"listen\": \"0.0.0.0:0\", \"auth\": {\"protected_mode\": false}, \"scenes\": "
          "[{\"name\": \"m\", \"map\": \"m.txt\", \"format\": \"ascii\"}]}",
          f);
    fclose(f);
    const char *check[] = {"--check-config", "--config", conf, NULL};
    assert_int_equal(pdi_run_pathd(check, 10000, out, sizeof out), 0);
    remove(map);
    remove(conf);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_unauthenticated_only_ping, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_query_role, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_write_role, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_admin_role, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_wrong_token_closed_after_delay, setup, pdi_fixture_stop),
        cmocka_unit_test(test_protected_mode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
