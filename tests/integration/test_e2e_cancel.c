/*
 * test_e2e_cancel.c - Cancel and deadlines through the real daemon: a
 * running search and a queued one are cancelled (answered CANCELLED, the
 * Cancel itself acknowledged), a cancel cannot reach another connection's
 * request or one already answered, and deadlines stop searches both while
 * they run and while they wait in the queue.
 *
 * The long search is the serpent scene's (see harness.h); the daemon has two
 * workers, so two long searches keep both busy and a third one waits. Only
 * orderings are relied on (a queued request waits for a whole long search),
 * never how many milliseconds a search takes.
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

static int setup(void **state)
{
    return pdi_fixture_start(state, NULL);
}

/* Upper bound on attempts to catch a search mid-run (below). */
#define T_RUNNING_ATTEMPTS 20

/* A search cancelled while it runs stops part-way. Whether a cancel sent a
 * few milliseconds after the search lands mid-run depends on the machine's
 * speed, so the test tries a few delays and requires that one attempt
 * catches it; every attempt must still be answered correctly either way. */
static void test_cancel_running(void **state)
{
    pdi_daemon *d = *state;
    int fd = pdi_raw_connect(d->port);
    assert_true(fd >= 0);
    pdi_warm_up(fd);
    int caught = 0;
    for (int attempt = 0; attempt < T_RUNNING_ATTEMPTS && !caught; attempt++) {
        uint64_t target = 100 + 2 * (uint64_t)attempt, cancel = target + 1;
        pdi_send_serpent(fd, target, 0);
        pdi_sleep_ms(1 + attempt % 4);
        pdi_send_cancel(fd, cancel, target);
        const uint64_t ids[] = {target, cancel};
        Pathd__V1__Response *r[2];
        pdi_raw_collect(fd, ids, r, 2);
        assert_int_equal(r[0]->body_case, PATHD__V1__RESPONSE__BODY_PATH);
        if (r[0]->status == PATHD__V1__STATUS__CANCELLED) {
            /* Acknowledged with OK and no body. */
            assert_int_equal(r[1]->status, PATHD__V1__STATUS__OK);
            assert_int_equal(r[1]->body_case, PATHD__V1__RESPONSE__BODY__NOT_SET);
            assert_null(r[0]->path->points);
            assert_true(r[0]->path->expansions < (uint64_t)pdi_serpent_cost());
            caught = r[0]->path->expansions > 0;
        } else {
            /* It finished first: a full answer. The ack says whether the
             * cancel still found it in flight (past its last check) or not. */
            assert_int_equal(r[0]->status, PATHD__V1__STATUS__OK);
            assert_true(r[1]->status == PATHD__V1__STATUS__OK ||
                        r[1]->status == PATHD__V1__STATUS__INVALID_ARGUMENT);
        }
        pdi_raw_free_all(r, 2);
    }
    assert_true(caught);
    close(fd);
}

/* With both workers on long searches, a third request waits in the queue;
 * cancelled there, it is answered CANCELLED without ever being searched,
 * while the others finish normally. Cancelling an answered request is
 * refused. */
static void test_cancel_queued(void **state)
{
    pdi_daemon *d = *state;
    int fd = pdi_raw_connect(d->port);
    assert_true(fd >= 0);
    pdi_warm_up(fd);
    pdi_send_serpent(fd, 10, 0);
    pdi_send_serpent(fd, 11, 0);
    pdi_send_serpent(fd, 12, 0);
    pdi_send_cancel(fd, 22, 12);
    const uint64_t ids[] = {12, 22, 10, 11};
    Pathd__V1__Response *r[4];
    pdi_raw_collect(fd, ids, r, 4);
    assert_int_equal(r[0]->status, PATHD__V1__STATUS__CANCELLED);
    assert_int_equal(r[0]->body_case, PATHD__V1__RESPONSE__BODY_PATH);
    assert_null(r[0]->path->points);
    assert_int_equal(r[0]->path->expansions, 0);
    assert_int_equal(r[1]->status, PATHD__V1__STATUS__OK);
    assert_int_equal(r[1]->body_case, PATHD__V1__RESPONSE__BODY__NOT_SET);
    for (int i = 2; i < 4; i++) {
        assert_int_equal(r[i]->status, PATHD__V1__STATUS__OK);
        assert_true(r[i]->path->cost == pdi_serpent_cost());
    }
    pdi_raw_free_all(r, 4);

    pdi_send_cancel(fd, 30, 11);
    Pathd__V1__Response *ack = pdi_raw_recv_final(fd, 30, PDI_CALL_TIMEOUT_MS);
    assert_non_null(ack);
    assert_int_equal(ack->status, PATHD__V1__STATUS__INVALID_ARGUMENT);
    pathd__v1__response__free_unpacked(ack, NULL);
    close(fd);
}

/* Ids belong to a connection: another connection's Cancel with the same
 * number must not touch it. */
static void test_cancel_is_per_connection(void **state)
{
    pdi_daemon *d = *state;
    int a = pdi_raw_connect(d->port), b = pdi_raw_connect(d->port);
    assert_true(a >= 0 && b >= 0);
    pdi_send_serpent(a, 1, 0);
    pdi_send_cancel(b, 2, 1);
    Pathd__V1__Response *ack = pdi_raw_recv_final(b, 2, PDI_CALL_TIMEOUT_MS);
    assert_non_null(ack);
    assert_int_equal(ack->status, PATHD__V1__STATUS__INVALID_ARGUMENT);
    pathd__v1__response__free_unpacked(ack, NULL);
    Pathd__V1__Response *r = pdi_raw_recv_final(a, 1, PDI_CALL_TIMEOUT_MS);
    assert_non_null(r);
    assert_int_equal(r->status, PATHD__V1__STATUS__OK);
    pathd__v1__response__free_unpacked(r, NULL);
    close(a);
    close(b);
}

/* The client library's cancel: the target comes back CANCELLED through
 * pdc_recv_result. */
static void test_cancel_through_client_library(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    int32_t gx, gy;
    pdi_serpent_goal(&gx, &gy);
    pdc_path_req req = {0};
    req.scene = "serpent";
    req.start = pdc_cell(0, 0);
    req.goal = pdc_cell(gx, gy);
    req.style = PDC_STYLE_CORNERS;
    uint64_t busy[2], target;
    assert_int_equal(pdc_send_find_path(c, &req, &busy[0]), PDC_OK);
    assert_int_equal(pdc_send_find_path(c, &req, &busy[1]), PDC_OK);
    assert_int_equal(pdc_send_find_path(c, &req, &target), PDC_OK);
    assert_int_equal(pdc_send_cancel(c, target), PDC_OK);
    int seen_target = 0;
    for (int k = 0; k < 3; k++) {
        pdc_path_result r = {0};
        int st = pdc_recv_result(c, PDI_CALL_TIMEOUT_MS, &r);
        if (r.id == target) {
            assert_int_equal(st, PDC_CANCELLED);
            assert_int_equal(r.count, 0);
            seen_target = 1;
        } else {
            assert_true(r.id == busy[0] || r.id == busy[1]);
            assert_int_equal(st, PDC_OK);
        }
        pdc_path_result_free(&r);
    }
    assert_true(seen_target);
    assert_int_equal(pdc_in_flight(c), 0);
    pdc_close(c);
}

static void test_deadlines(void **state)
{
    pdi_daemon *d = *state;
    int fd = pdi_raw_connect(d->port);
    assert_true(fd >= 0);
    pdi_warm_up(fd);

    /* 1 ms on an idle daemon: the search starts, then passes its deadline.
     * Queueing counts, so a worker slow to wake (a sanitizer build on a busy
     * machine) can make the deadline pass before the search starts (an
     * Error body): then again with twice the time, up to 64 ms, still far
     * below the search's own time. */
    int ran = 0;
    Pathd__V1__Response *r;
    for (uint32_t ms = 1, id = 20; !ran && ms <= 64; ms *= 2, id++) {
        pdi_send_serpent(fd, id, ms);
        r = pdi_raw_recv_final(fd, id, PDI_CALL_TIMEOUT_MS);
        assert_non_null(r);
        assert_int_equal(r->status, PATHD__V1__STATUS__DEADLINE_EXCEEDED);
        if (r->body_case == PATHD__V1__RESPONSE__BODY_PATH) {
            assert_null(r->path->points);
            assert_true(r->path->expansions < (uint64_t)pdi_serpent_cost());
            ran = 1;
        } else {
            assert_int_equal(r->body_case, PATHD__V1__RESPONSE__BODY_ERROR);
        }
        pathd__v1__response__free_unpacked(r, NULL);
    }
    assert_true(ran);

    /* A deadline far beyond the search time does not interfere. */
    pdi_send_serpent(fd, 3, 600000);
    r = pdi_raw_recv_final(fd, 3, PDI_CALL_TIMEOUT_MS);
    assert_non_null(r);
    assert_int_equal(r->status, PATHD__V1__STATUS__OK);
    pathd__v1__response__free_unpacked(r, NULL);

    /* Queueing time counts: with both workers on long searches, a 1 ms
     * request expires before it starts - or is refused as it arrives, when
     * the pool already expects the work ahead to outlast it (an Error body
     * then, since no search ran). */
    pdi_send_serpent(fd, 10, 0);
    pdi_send_serpent(fd, 11, 0);
    pdi_send_serpent(fd, 12, 1);
    const uint64_t ids[] = {10, 11, 12};
    Pathd__V1__Response *all[3];
    pdi_raw_collect(fd, ids, all, 3);
    assert_int_equal(all[0]->status, PATHD__V1__STATUS__OK);
    assert_int_equal(all[1]->status, PATHD__V1__STATUS__OK);
    assert_int_equal(all[2]->status, PATHD__V1__STATUS__DEADLINE_EXCEEDED);
    if (all[2]->body_case == PATHD__V1__RESPONSE__BODY_PATH)
        assert_int_equal(all[2]->path->expansions, 0);
    else
        assert_int_equal(all[2]->body_case, PATHD__V1__RESPONSE__BODY_ERROR);
    pdi_raw_free_all(all, 3);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cancel_running, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_cancel_queued, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_cancel_is_per_connection, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_cancel_through_client_library, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_deadlines, setup, pdi_fixture_stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
