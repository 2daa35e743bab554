/*
 * test_e2e_concurrency.c - many clients at once and answers out of order,
 * through the real daemon and the client library's pipelined API.
 *
 * 32 client threads, each on its own connection, pipeline 16 Moving AI
 * problems and must get every answer back exactly once, matched by id, with
 * the optimal cost. Then one connection shows out-of-order completion: short
 * searches sent after a long one are answered before it.
 *
 * cmocka's asserts are not thread-safe, so client threads only record what
 * went wrong; the main thread asserts.
 */
#include <math.h>
#include <pthread.h>
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

#define T_CONNECTIONS 32
#define T_PIPELINE 16
#define T_SCENARIOS 64
/* Short searches sent behind the long one in the ordering test. */
#define T_SHORT_AFTER_LONG 4

static int setup(void **state)
{
    return pdi_fixture_start(state, NULL);
}

typedef struct client_job {
    const pdi_daemon *d;
    const pdi_scenario *sc;
    size_t n_sc;
    int index;
    int answered;
    int correct;
    char error[256];
} client_job;

static void *client_main(void *arg)
{
    client_job *j = arg;
    pdc_conn *c = pdi_connect(j->d);
    if (!c) {
        snprintf(j->error, sizeof j->error, "connect failed");
        return NULL;
    }
    uint64_t ids[T_PIPELINE];
    size_t which[T_PIPELINE];
    int seen[T_PIPELINE] = {0};
    for (int i = 0; i < T_PIPELINE; i++) {
        which[i] = ((size_t)j->index * T_PIPELINE + (size_t)i) % j->n_sc;
        pdc_path_req req = {0};
        req.scene = "den520d";
        req.start = pdc_cell(j->sc[which[i]].sx, j->sc[which[i]].sy);
        req.goal = pdc_cell(j->sc[which[i]].gx, j->sc[which[i]].gy);
        int st = pdc_send_find_path(c, &req, &ids[i]);
        if (st != PDC_OK) {
            snprintf(j->error, sizeof j->error, "send %d: %s", i, pdc_status_name(st));
            pdc_close(c);
            return NULL;
        }
    }
    for (int k = 0; k < T_PIPELINE; k++) {
        pdc_path_result r = {0};
        int st = pdc_recv_result(c, PDI_CALL_TIMEOUT_MS, &r);
        int i = 0;
        while (i < T_PIPELINE && ids[i] != r.id)
            i++;
        if (i == T_PIPELINE || seen[i]) {
            snprintf(j->error, sizeof j->error, "answer %d: id %llu unknown or repeated (%s)", k,
                     (unsigned long long)r.id, pdc_status_name(st));
            pdc_path_result_free(&r);
            break;
        }
        seen[i] = 1;
        j->answered++;
        const pdi_scenario *s = &j->sc[which[i]];
        if (st == PDC_OK && fabs(r.cost - s->optimal) <= s->tolerance && r.count > 0 &&
            r.waypoints[0].x == s->sx && r.waypoints[r.count - 1].y == s->gy)
            j->correct++;
        else if (!j->error[0])
            snprintf(j->error, sizeof j->error, "id %llu: %s cost %.6f, optimal %.6f",
                     (unsigned long long)r.id, pdc_status_name(st), r.cost, s->optimal);
        pdc_path_result_free(&r);
    }
    pdc_close(c);
    return NULL;
}

static void test_32_connections_16_pipelined(void **state)
{
    pdi_daemon *d = *state;
    static pdi_scenario sc[T_SCENARIOS];
    size_t n = pdi_load_scenarios(sc, T_SCENARIOS);
    assert_int_equal(n, T_SCENARIOS);

    client_job jobs[T_CONNECTIONS];
    pthread_t threads[T_CONNECTIONS];
    memset(jobs, 0, sizeof jobs);
    double t0 = pdi_now_ms();
    for (int i = 0; i < T_CONNECTIONS; i++) {
        jobs[i].d = d;
        jobs[i].sc = sc;
        jobs[i].n_sc = n;
        jobs[i].index = i;
        assert_int_equal(pthread_create(&threads[i], NULL, client_main, &jobs[i]), 0);
    }
    for (int i = 0; i < T_CONNECTIONS; i++)
        pthread_join(threads[i], NULL);
    double elapsed = pdi_now_ms() - t0;
    int answered = 0, correct = 0;
    for (int i = 0; i < T_CONNECTIONS; i++) {
        if (jobs[i].error[0])
            print_error("client %d: %s\n", i, jobs[i].error);
        answered += jobs[i].answered;
        correct += jobs[i].correct;
    }
    print_message("%d connections x %d pipelined: %d answers in %.0f ms\n", T_CONNECTIONS, T_PIPELINE,
                  answered, elapsed);
    assert_int_equal(answered, T_CONNECTIONS * T_PIPELINE);
    assert_int_equal(correct, T_CONNECTIONS * T_PIPELINE);

    /* The server saw every connection close and has nothing left over. */
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    pdc_server_stats st = {0};
    double deadline = pdi_now_ms() + PDI_CALL_TIMEOUT_MS;
    do {
        assert_int_equal(pdc_stats(c, &st), PDC_OK);
        if (st.connections == 1 && st.in_flight == 0)
            break;
        pdi_sleep_ms(10);
    } while (pdi_now_ms() < deadline);
    assert_int_equal(st.connections, 1);
    assert_int_equal(st.in_flight, 0);
    assert_true(st.paths_found >= T_CONNECTIONS * T_PIPELINE);
    pdc_close(c);
}

/* With two workers, short searches sent behind a long one on the same
 * connection come back first: answers are matched by id, not by order.
 * Whether the second worker gets the CPU before the first finishes the long
 * search (~20 ms) is up to the scheduler on a busy 2-core machine, so the test
 * tries a few rounds and requires one in which every short answer overtakes
 * the long one; every answer of every round must be right. */
#define T_ORDER_ATTEMPTS 5

static void test_out_of_order_completion(void **state)
{
    pdi_daemon *d = *state;
    pdi_scenario sc[T_SHORT_AFTER_LONG];
    assert_int_equal(pdi_load_scenarios(sc, T_SHORT_AFTER_LONG), T_SHORT_AFTER_LONG);
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    int32_t gx, gy;
    pdi_serpent_goal(&gx, &gy);
    pdc_path_req req = {0};
    req.scene = "serpent";
    req.start = pdc_cell(0, 0);
    req.goal = pdc_cell(gx, gy);
    req.style = PDC_STYLE_CORNERS;
    int overtaken = 0;
    for (int attempt = 0; attempt < T_ORDER_ATTEMPTS && !overtaken; attempt++) {
        uint64_t long_id, short_ids[T_SHORT_AFTER_LONG];
        assert_int_equal(pdc_send_find_path(c, &req, &long_id), PDC_OK);
        for (int i = 0; i < T_SHORT_AFTER_LONG; i++) {
            pdc_path_req s = {0};
            s.scene = "den520d";
            s.start = pdc_cell(sc[i].sx, sc[i].sy);
            s.goal = pdc_cell(sc[i].gx, sc[i].gy);
            assert_int_equal(pdc_send_find_path(c, &s, &short_ids[i]), PDC_OK);
            assert_true(short_ids[i] > long_id);
        }
        int long_at = -1;
        for (int k = 0; k <= T_SHORT_AFTER_LONG; k++) {
            pdc_path_result r = {0};
            assert_int_equal(pdc_recv_result(c, PDI_CALL_TIMEOUT_MS, &r), PDC_OK);
            if (r.id == long_id) {
                /* The long answer arrives, complete. */
                assert_int_equal(long_at, -1);
                long_at = k;
                assert_true(fabs(r.cost - pdi_serpent_cost()) < 1e-6);
            } else {
                int i = 0;
                while (i < T_SHORT_AFTER_LONG && short_ids[i] != r.id)
                    i++;
                assert_true(i < T_SHORT_AFTER_LONG);
                assert_true(fabs(r.cost - sc[i].optimal) <= sc[i].tolerance);
            }
            pdc_path_result_free(&r);
        }
        assert_true(long_at >= 0);
        overtaken = long_at == T_SHORT_AFTER_LONG;
    }
    assert_true(overtaken);
    pdc_close(c);

    /* A ping (answered on the loop thread) overtakes a long search too: the
     * very first frame back is the pong. */
    int fd = pdi_raw_connect(d->port);
    assert_true(fd >= 0);
    pdi_fp_msg m;
    pdi_fp_init(&m, 1, "serpent", 0, 0, gx, gy);
    m.fp.style = PATHD__V1__WAYPOINT_STYLE__STYLE_CORNERS;
    assert_int_equal(pdi_raw_send_request(fd, &m.req), 0);
    pdi_small_msg ping;
    pdi_ping_init(&ping, 2, 9);
    assert_int_equal(pdi_raw_send_request(fd, &ping.req), 0);
    Pathd__V1__Response *first = pdi_raw_recv(fd, PDI_CALL_TIMEOUT_MS, NULL);
    assert_non_null(first);
    assert_int_equal(first->id, 2);
    assert_int_equal(first->body_case, PATHD__V1__RESPONSE__BODY_PONG);
    pathd__v1__response__free_unpacked(first, NULL);
    Pathd__V1__Response *last = pdi_raw_recv_final(fd, 1, PDI_CALL_TIMEOUT_MS);
    assert_non_null(last);
    assert_int_equal(last->status, PATHD__V1__STATUS__OK);
    pathd__v1__response__free_unpacked(last, NULL);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_32_connections_16_pipelined, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_out_of_order_completion, setup, pdi_fixture_stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
