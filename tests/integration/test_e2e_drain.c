/*
 * test_e2e_drain.c - draining a replica (issue 32; docs/OPERATIONS.md):
 * SIGUSR1 with long searches in flight tells the connection DRAINING once
 * (id 0) and still answers every search it owed; after it Ping says
 * DRAINING_STATE, Cancel is still served, every other request (on that
 * connection and on a new one) is answered DRAINING, and the agent-check
 * port says "drain";
 * SIGUSR2 serves again ("up ready", SERVING, paths) and sends nothing;
 * SIGTERM's stop still exits 0 from a drain. The daemon runs under the
 * sanitizers of the build (the harness fails a test whose log has a
 * report). tests/cluster/test_cluster.py does the same through HAProxy.
 */
#include <errno.h>
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

/* Long enough for the in-flight searches even under TSan. */
#define T_GRACE_MS 30000
/* Long searches in flight when SIGUSR1 arrives (two per worker). */
#define T_IN_FLIGHT 4
/* How long a signal may take to show in the log. */
#define T_SIGNAL_TIMEOUT_MS 10000
/* How long the connection is watched for a frame that must not come after
 * SIGUSR2 (the answer to a Ping sent behind it bounds the wait in fact). */
#define T_QUIET_MS 200

static int setup(void **state)
{
    pdi_limits l = {0};
    l.shutdown_grace_ms = T_GRACE_MS;
    l.extra_json = "\"agent_check\": \"127.0.0.1:0\",";
    return pdi_fixture_start(state, &l);
}

/* What the agent-check port says: all it sends before it closes. */
static void expect_agent_word(uint16_t port, const char *want)
{
    int fd = pdi_raw_connect(port);
    assert_true(fd >= 0);
    char buf[64];
    size_t got = 0;
    for (;;) {
        ssize_t n = read(fd, buf + got, sizeof buf - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        assert_true(n >= 0);
        if (n == 0)
            break;
        got += (size_t)n;
        assert_true(got < sizeof buf - 1);
    }
    close(fd);
    buf[got] = '\0';
    assert_string_equal(buf, want);
}

/* A short rooms path on fd; returns its status. */
static Pathd__V1__Status short_path(int fd, uint64_t id)
{
    pdi_fp_msg m;
    pdi_fp_init(&m, id, "rooms", 1, 1, 5, 1);
    assert_int_equal(pdi_raw_send_request(fd, &m.req), 0);
    Pathd__V1__Response *r = pdi_raw_recv_final(fd, id, PDI_CALL_TIMEOUT_MS);
    assert_non_null(r);
    Pathd__V1__Status st = r->status;
    pathd__v1__response__free_unpacked(r, NULL);
    return st;
}

static void test_drain_and_back(void **state)
{
    pdi_daemon *d = *state;
    uint16_t agent = pdi_log_port(d, "agent-check on 127.0.0.1:");
    assert_true(agent > 0);
    expect_agent_word(agent, "up ready\n");

    int fd = pdi_raw_connect(d->port);
    assert_true(fd >= 0);
    assert_int_equal(pdi_raw_ping(fd, 100, 100), PATHD__V1__SERVING_STATE__SERVING);
    pdi_warm_up(fd);
    /* Long searches, then a Ping behind them: once its Pong is back every
     * search has been read, and with two workers at least two are running. */
    for (uint64_t id = 1; id <= T_IN_FLIGHT; id++)
        pdi_send_serpent(fd, id, 0);
    pdi_small_msg ping;
    pdi_ping_init(&ping, 101, 101);
    assert_int_equal(pdi_raw_send_request(fd, &ping.req), 0);
    int ok = 0, drained = 0, pong = 0;
    while (!pong) {
        Pathd__V1__Response *r = pdi_raw_recv(fd, PDI_CALL_TIMEOUT_MS, NULL);
        assert_non_null(r);
        if (r->id == 101)
            pong = 1;
        else if (r->final && r->status == PATHD__V1__STATUS__OK)
            ok++;
        pathd__v1__response__free_unpacked(r, NULL);
    }
    assert_int_equal(pdi_daemon_signal(d, SIGUSR1), 0);
    assert_true(pdi_wait_log(d, "draining: ", T_SIGNAL_TIMEOUT_MS));
    /* There was work owed, or this test would prove nothing. */
    assert_false(pdi_log_contains(d, "told, 0 requests in flight"));
    while (ok < T_IN_FLIGHT || !drained) {
        Pathd__V1__Response *r = pdi_raw_recv(fd, PDI_CALL_TIMEOUT_MS, NULL);
        assert_non_null(r);
        if (r->id == 0) {
            /* Once, final, with why. */
            assert_false(drained);
            assert_int_equal(r->status, PATHD__V1__STATUS__DRAINING);
            assert_true(r->final);
            assert_non_null(r->error);
            assert_non_null(strstr(r->error->message, "draining"));
            drained = 1;
        } else if (r->final) {
            /* An answer owed: in full, as if nothing had happened. */
            assert_true(r->id >= 1 && r->id <= T_IN_FLIGHT);
            assert_int_equal(r->status, PATHD__V1__STATUS__OK);
            assert_true(r->path->cost == pdi_serpent_cost());
            ok++;
        }
        pathd__v1__response__free_unpacked(r, NULL);
    }

    /* Draining: Ping says so, anything else is refused, here and on a new
     * connection; the agent says drain. */
    assert_int_equal(pdi_raw_ping(fd, 102, 102), PATHD__V1__SERVING_STATE__DRAINING_STATE);
    assert_int_equal(short_path(fd, 103), PATHD__V1__STATUS__DRAINING);
    /* Cancel still is: it ends work already taken on (none is left here). */
    pdi_small_msg cancel;
    pdi_cancel_init(&cancel, 109, 1);
    assert_int_equal(pdi_raw_send_request(fd, &cancel.req), 0);
    Pathd__V1__Response *cr = pdi_raw_recv_final(fd, 109, PDI_CALL_TIMEOUT_MS);
    assert_non_null(cr);
    assert_int_equal(cr->status, PATHD__V1__STATUS__INVALID_ARGUMENT);
    pathd__v1__response__free_unpacked(cr, NULL);
    int late = pdi_raw_connect(d->port);
    assert_true(late >= 0);
    assert_int_equal(pdi_raw_ping(late, 104, 104), PATHD__V1__SERVING_STATE__DRAINING_STATE);
    assert_int_equal(short_path(late, 105), PATHD__V1__STATUS__DRAINING);
    expect_agent_word(agent, "drain\n");
    /* A second SIGUSR1 changes nothing: no second DRAINING frame. */
    assert_int_equal(pdi_daemon_signal(d, SIGUSR1), 0);
    /* Wait until it was handled: signals sent back to back may reach the
     * loop in either order, and a SIGUSR1 after the SIGUSR2 would drain
     * again. */
    assert_true(pdi_wait_log(d, "SIGUSR1 again: already draining", T_SIGNAL_TIMEOUT_MS));

    /* Back: served again, nothing sent for it. */
    assert_int_equal(pdi_daemon_signal(d, SIGUSR2), 0);
    assert_true(pdi_wait_log(d, "ready: serving new requests again", T_SIGNAL_TIMEOUT_MS));
    /* The operator's count: the two FindPaths refused (103, 105), not the
     * Pings or the Cancel; the first was logged when it came. */
    assert_true(pdi_log_contains(d, "(2 new requests were refused DRAINING while draining)"));
    assert_int_equal(pdi_log_count(d, "refused DRAINING (the first of this drain"), 1);
    assert_int_equal(pdi_log_count(d, "connections told"), 1);
    assert_null(pdi_raw_recv(fd, T_QUIET_MS, NULL));
    assert_int_equal(pdi_raw_ping(fd, 106, 106), PATHD__V1__SERVING_STATE__SERVING);
    assert_int_equal(short_path(fd, 107), PATHD__V1__STATUS__OK);
    assert_int_equal(short_path(late, 108), PATHD__V1__STATUS__OK);
    expect_agent_word(agent, "up ready\n");
    close(late);
    close(fd);
}

/* SIGTERM's stop from a drain: the teardown requires exit 0 in time. */
static void test_stop_while_draining(void **state)
{
    pdi_daemon *d = *state;
    int fd = pdi_raw_connect(d->port);
    assert_true(fd >= 0);
    assert_int_equal(pdi_daemon_signal(d, SIGUSR1), 0);
    Pathd__V1__Response *r = pdi_raw_recv(fd, PDI_CALL_TIMEOUT_MS, NULL);
    assert_non_null(r);
    assert_int_equal(r->id, 0);
    assert_int_equal(r->status, PATHD__V1__STATUS__DRAINING);
    pathd__v1__response__free_unpacked(r, NULL);
    assert_int_equal(short_path(fd, 1), PATHD__V1__STATUS__DRAINING);
    assert_int_equal(pdi_daemon_stop(d), 0);
    /* The stop closed the drained connection. */
    assert_true(pdi_raw_wait_closed(fd, PDI_CALL_TIMEOUT_MS));
    /* Drain then stop is the usual way down (no SIGUSR2): the stop's line
     * gives the drain's count. */
    assert_true(pdi_log_contains(d, "; 1 new requests were refused DRAINING while draining"));
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_drain_and_back, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_stop_while_draining, setup, pdi_fixture_stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
