/*
 * test_e2e_client_flow.c - the C client's flow control against the real
 * daemon (issue 33, item 1): GetLimits read on connect, never more than the
 * connection's in-flight cap outstanding (a Batch counting its items), the
 * rest queued locally up to a bound with a clear error past it, OVERLOADED
 * from the server's own job queue retried with jittered backoff until a
 * deadline, and WatchEvent.incarnation; and the C client's reservation
 * calls (issue 34): ReservePath with yield_after_ms and its displaced
 * plans, the AGENTS_DISPLACED event, UpdateCells' agents_cut.
 *
 * The serpent scene's search (hundreds of ms) holds a slot while the test
 * sends more; the server's overloaded_total, read on a second connection,
 * proves the server never had to refuse the flow-controlled client.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "harness.h"

/* The in-flight cap of the first daemon. */
#define T_CAP 4
/* Requests pipelined past the cap in the queueing test. */
#define T_MANY 30

static int setup_cap(void **state)
{
    pdi_limits l = {0};
    l.max_inflight_per_conn = T_CAP;
    return pdi_fixture_start(state, &l);
}

/* One worker and one queue place: a few serpent searches fill the server's
 * job queue for every connection. */
static int setup_tiny_queue(void **state)
{
    pdi_limits l = {0};
    l.threads = 1;
    l.job_queue_capacity = 1;
    return pdi_fixture_start(state, &l);
}

#define T_TOKEN "flow-query-token-0123456789"

/* A server with a token: GetLimits is refused until pdc_auth. */
static int setup_auth(void **state)
{
    pdi_limits l = {0};
    l.max_inflight_per_conn = T_CAP;
    l.auth_json = "{\"tokens\": [{\"token\": \"" T_TOKEN "\", \"role\": \"query\"}]}";
    return pdi_fixture_start(state, &l);
}

static pdc_path_req serpent_req(void)
{
    pdc_path_req r = {0};
    int32_t gx, gy;
    pdi_serpent_goal(&gx, &gy);
    r.scene = "serpent";
    r.start = pdc_cell(0, 0);
    r.goal = pdc_cell(gx, gy);
    r.style = PDC_STYLE_CORNERS;
    return r;
}

static pdc_path_req den_req(const pdi_scenario *sc)
{
    pdc_path_req r = {0};
    r.scene = "den520d";
    r.start = pdc_cell(sc->sx, sc->sy);
    r.goal = pdc_cell(sc->gx, sc->gy);
    return r;
}

/* The server's overloaded_total, read on a connection of its own. */
static uint64_t overloaded_total(const pdi_daemon *d)
{
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    pdc_server_stats st;
    assert_int_equal(pdc_stats(c, &st), PDC_OK);
    pdc_close(c);
    return st.overloaded_total;
}

/* Receives n pipelined paths: each OK and one of ids, each once; the slots
 * in flight never pass the cap. */
static void expect_all_ok(pdc_conn *c, const uint64_t *ids, size_t n)
{
    int seen[T_MANY + 8] = {0};
    assert_true(n <= sizeof seen / sizeof seen[0]);
    for (size_t k = 0; k < n; k++) {
        pdc_path_result r;
        int st = pdc_recv_result(c, PDI_CALL_TIMEOUT_MS, &r);
        if (st != PDC_OK)
            fail_msg("answer %zu: %s (%s)", k, pdc_status_name(st), r.message);
        assert_true(pdc_slots_in_flight(c) <= T_CAP);
        size_t i = 0;
        while (i < n && ids[i] != r.id)
            i++;
        assert_true(i < n);
        assert_false(seen[i]);
        seen[i] = 1;
        pdc_path_result_free(&r);
    }
    assert_int_equal(pdc_in_flight(c), 0);
}

static void test_limits_are_read_on_connect(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    assert_int_equal(pdc_inflight_cap(c), T_CAP);
    pdc_limits l;
    assert_int_equal(pdc_conn_limits(c, &l), 1);
    assert_int_equal(l.max_inflight_per_conn, T_CAP);
    assert_int_equal(l.max_batch_items, T_CAP);
    /* The connect-time GetLimits does not take the caller's first id. */
    uint64_t id;
    pdc_path_req r = serpent_req();
    assert_int_equal(pdc_send_find_path(c, &r, &id), PDC_OK);
    assert_int_equal(id, 1);
    pdc_set_flow_control(c, 0);
    assert_int_equal(pdc_inflight_cap(c), 0);
    pdc_close(c);
}

static void test_pipelining_past_the_cap_queues_and_all_arrive(void **state)
{
    pdi_daemon *d = *state;
    pdi_scenario sc[T_MANY];
    assert_int_equal(pdi_load_scenarios(sc, T_MANY), T_MANY);
    const uint64_t before = overloaded_total(d);
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    uint64_t ids[T_MANY + 8];
    pdc_path_req slow = serpent_req();
    assert_int_equal(pdc_send_find_path(c, &slow, &ids[0]), PDC_OK);
    for (size_t i = 1; i < T_MANY; i++) {
        pdc_path_req r = den_req(&sc[i]);
        assert_int_equal(pdc_send_find_path(c, &r, &ids[i]), PDC_OK);
    }
    /* The serpent search holds its slot: all but T_CAP wait here. */
    assert_int_equal(pdc_slots_in_flight(c), T_CAP);
    assert_int_equal(pdc_queued(c), T_MANY - T_CAP);
    /* Several in one write: queued behind the others, all or nothing. */
    pdc_path_req more[8];
    for (size_t i = 0; i < 8; i++)
        more[i] = den_req(&sc[i]);
    assert_int_equal(pdc_send_find_paths(c, more, 8, &ids[T_MANY]), PDC_OK);
    assert_int_equal(pdc_queued(c), T_MANY - T_CAP + 8);
    assert_int_equal(pdc_in_flight(c), T_MANY + 8);
    expect_all_ok(c, ids, T_MANY + 8);
    assert_int_equal(pdc_slots_in_flight(c), 0);
    assert_int_equal(pdc_queued(c), 0);
    pdc_close(c);
    assert_int_equal(overloaded_total(d), before);
}

static void test_a_full_queue_is_a_clear_error(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    pdc_set_max_queued(c, 2);
    uint64_t ids[T_CAP + 2];
    pdc_path_req slow = serpent_req();
    for (size_t i = 0; i < T_CAP + 2; i++)
        assert_int_equal(pdc_send_find_path(c, &slow, &ids[i]), PDC_OK);
    assert_int_equal(pdc_queued(c), 2);
    uint64_t id;
    assert_int_equal(pdc_send_find_path(c, &slow, &id), PDC_ERR_QUEUE_FULL);
    assert_string_equal(pdc_status_name(PDC_ERR_QUEUE_FULL), "QUEUE_FULL");
    assert_non_null(strstr(pdc_last_error(c), "max_queued"));
    pdc_path_result r;
    assert_int_equal(pdc_find_path(c, &slow, &r), PDC_ERR_QUEUE_FULL);
    pdc_path_result_free(&r);
    uint64_t three[3];
    pdc_path_req reqs[3] = {slow, slow, slow};
    assert_int_equal(pdc_send_find_paths(c, reqs, 3, three), PDC_ERR_QUEUE_FULL);
    /* Nothing of the refused calls is in flight or queued. */
    assert_int_equal(pdc_in_flight(c), T_CAP + 2);
    assert_int_equal(pdc_queued(c), 2);
    /* A request that takes no slot is never queued. */
    assert_int_equal(pdc_ping(c, NULL), PDC_OK);
    for (size_t k = 0; k < T_CAP + 2; k++) {
        assert_int_equal(pdc_recv_result(c, PDI_CALL_TIMEOUT_MS, &r), PDC_OK);
        pdc_path_result_free(&r);
    }
    pdc_close(c);
}

static void test_a_batch_counts_its_items(void **state)
{
    pdi_daemon *d = *state;
    const uint64_t before = overloaded_total(d);
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    uint64_t slow_id;
    pdc_path_req slow = serpent_req();
    assert_int_equal(pdc_send_find_path(c, &slow, &slow_id), PDC_OK);
    /* T_CAP items beside the one search in flight would be refused
     * OVERLOADED: the batch waits for the search's answer instead. */
    pdc_query q[T_CAP];
    pdc_query_result out[T_CAP];
    for (size_t i = 0; i < T_CAP; i++) {
        memset(&q[i], 0, sizeof q[i]);
        q[i].kind = PDC_Q_REACHABLE;
        q[i].scene = "rooms";
        q[i].a = pdc_cell(1, 1);
        q[i].b = pdc_cell(2, 2);
    }
    assert_int_equal(pdc_batch(c, q, T_CAP, out), PDC_OK);
    for (size_t i = 0; i < T_CAP; i++)
        assert_int_equal(out[i].status, PDC_OK);
    assert_int_equal(pdc_overloaded_retries(c), 0);
    /* The search finished first, and its answer was kept. */
    pdc_path_result r;
    assert_int_equal(pdc_recv_result(c, 0, &r), PDC_OK);
    assert_int_equal(r.id, slow_id);
    pdc_path_result_free(&r);
    assert_int_equal(overloaded_total(d), before);

    /* Without flow control the server refuses the same batch. */
    assert_int_equal(pdc_send_find_path(c, &slow, &slow_id), PDC_OK);
    pdc_set_flow_control(c, 0);
    pdc_set_retry(c, 1, -1);
    assert_int_equal(pdc_batch(c, q, T_CAP, out), PDC_OVERLOADED);
    assert_true(overloaded_total(d) > before);
    assert_int_equal(pdc_recv_result(c, PDI_CALL_TIMEOUT_MS, &r), PDC_OK);
    pdc_path_result_free(&r);
    pdc_close(c);
}

static void test_cancel_of_a_queued_request_never_sends_it(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    pdc_path_req slow = serpent_req();
    uint64_t busy[T_CAP], queued;
    for (size_t i = 0; i < T_CAP; i++)
        assert_int_equal(pdc_send_find_path(c, &slow, &busy[i]), PDC_OK);
    assert_int_equal(pdc_send_find_path(c, &slow, &queued), PDC_OK);
    assert_int_equal(pdc_queued(c), 1);
    assert_int_equal(pdc_send_cancel(c, queued), PDC_OK);
    assert_int_equal(pdc_queued(c), 0);
    pdc_path_result r;
    assert_int_equal(pdc_recv_result(c, 0, &r), PDC_CANCELLED);
    assert_int_equal(r.id, queued);
    pdc_path_result_free(&r);
    expect_all_ok(c, busy, T_CAP);
    pdc_close(c);
}

/* ---- OVERLOADED from the server's job queue ------------------------------- */

typedef struct hog {
    const pdi_daemon *d;
    atomic_int stop;
    atomic_int ready;
    atomic_int failed;           /* written by the hog while the test reads it */
} hog;

/* Keeps the one worker and the one queue place taken with serpent
 * searches, sending a refused one again at once, until stop. */
static void *hog_main(void *arg)
{
    hog *h = arg;
    pdc_conn *c = pdi_connect(h->d);
    if (!c) {
        h->failed = 1;
        atomic_store(&h->ready, 1);
        return NULL;
    }
    pdc_set_flow_control(c, 0);
    pdc_path_req slow = serpent_req();
    uint64_t id;
    for (int i = 0; i < 3; i++)
        h->failed |= pdc_send_find_path(c, &slow, &id) != PDC_OK;
    h->failed |= pdc_ping(c, NULL) != PDC_OK; /* the searches have been read */
    atomic_store(&h->ready, 1);
    while (!atomic_load(&h->stop) && !h->failed) {
        pdc_path_result r;
        int st = pdc_recv_result(c, PDI_CALL_TIMEOUT_MS, &r);
        pdc_path_result_free(&r);
        h->failed |= st != PDC_OK && st != PDC_OVERLOADED;
        h->failed |= pdc_send_find_path(c, &slow, &id) != PDC_OK;
    }
    while (pdc_in_flight(c) > 0) {
        pdc_path_result r;
        pdc_recv_result(c, PDI_CALL_TIMEOUT_MS, &r);
        pdc_path_result_free(&r);
    }
    pdc_close(c);
    return NULL;
}

static void hog_start(hog *h, pthread_t *t, const pdi_daemon *d)
{
    memset(h, 0, sizeof *h);
    h->d = d;
    assert_int_equal(pthread_create(t, NULL, hog_main, h), 0);
    while (!atomic_load(&h->ready)) {
        struct timespec ms = {0, 1000000L};
        nanosleep(&ms, NULL);
    }
    assert_false(h->failed);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void *stop_later(void *arg)
{
    struct timespec pause = {0, 300 * 1000000L};
    nanosleep(&pause, NULL);
    atomic_store(&((hog *)arg)->stop, 1);
    return NULL;
}

/* A connection whose blocking calls retry OVERLOADED `attempts` times in
 * all within deadline_ms, with a timeout far beyond both. */
static pdc_conn *retrying_client(const pdi_daemon *d, int attempts, int deadline_ms)
{
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    pdc_set_timeout(c, 60000);
    pdc_set_retry(c, attempts, deadline_ms);
    return c;
}

static void test_server_overloaded_is_retried_until_it_succeeds(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = retrying_client(d, 1000, 60000);
    hog h;
    pthread_t t, stopper;
    pdc_path_req slow = serpent_req();
    /* The hog leaves the queue's place free for a moment after each of its
     * answers, so a call may slip in unrefused: try again, with a new hog,
     * (up to 10 times) until a call was refused, retried, and served once
     * its hog stopped. */
    for (int i = 0; i < 10 && pdc_overloaded_retries(c) == 0; i++) {
        hog_start(&h, &t, d);
        assert_int_equal(pthread_create(&stopper, NULL, stop_later, &h), 0);
        pdc_path_result r;
        assert_int_equal(pdc_find_path(c, &slow, &r), PDC_OK);
        pdc_path_result_free(&r);
        pthread_join(stopper, NULL);
        pthread_join(t, NULL);
        assert_false(h.failed);
    }
    /* Refused while the hog held the queue, retried, then served. */
    assert_true(pdc_overloaded_retries(c) > 0);
    pdc_close(c);
}

static void test_server_overloaded_fails_cleanly_at_the_deadline(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = retrying_client(d, 50, 100);
    hog h;
    pthread_t t;
    hog_start(&h, &t, d);
    pdc_path_req slow = serpent_req();
    /* A retry may land in the hog's free moment (see above): call again,
     * up to 20 times, until a call gives up. */
    int st = PDC_OK;
    int64_t waited = 0;
    for (int i = 0; i < 20 && st == PDC_OK; i++) {
        pdc_path_result r;
        const int64_t started = now_ms();
        st = pdc_find_path(c, &slow, &r);
        waited = now_ms() - started;
        pdc_path_result_free(&r);
    }
    atomic_store(&h.stop, 1);
    pthread_join(t, NULL);
    assert_false(h.failed);
    assert_int_equal(st, PDC_OVERLOADED);
    /* Retried, then gave up at the deadline: long before 50 attempts'
     * backoff (about 40 s) or the timeout; nothing is left behind. */
    assert_true(pdc_overloaded_retries(c) > 0);
    assert_true(waited < 5000);
    assert_int_equal(pdc_slots_in_flight(c), 0);
    assert_int_equal(pdc_queued(c), 0);
    assert_int_equal(pdc_ping(c, NULL), PDC_OK);
    pdc_close(c);
}

static void test_limits_refused_before_the_token_are_read_after_auth(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    pdc_limits l;
    assert_int_equal(pdc_conn_limits(c, &l), 0);
    assert_int_equal(pdc_inflight_cap(c), PDC_DEFAULT_INFLIGHT_CAP);
    assert_int_equal(pdc_auth(c, T_TOKEN, NULL, 0), PDC_OK);
    assert_int_equal(pdc_conn_limits(c, &l), 1);
    assert_int_equal(pdc_inflight_cap(c), T_CAP);
    /* A reconnect authenticates, then reads them again. */
    assert_int_equal(pdc_reconnect(c), PDC_OK);
    assert_int_equal(pdc_inflight_cap(c), T_CAP);
    assert_int_equal(pdc_ping(c, NULL), PDC_OK);
    pdc_close(c);
}

/* ---- a pool ---------------------------------------------------------------- */

#define T_POOL 3
#define T_POOL_THREADS 8

typedef struct pool_job {
    pdc_pool *pool;
    const pdi_scenario *sc;
    int ok;
} pool_job;

/* Borrows a connection for each of a few searches. */
static void *pool_worker(void *arg)
{
    pool_job *j = arg;
    for (int k = 0; k < 3; k++) {
        pdc_conn *c = pdc_pool_acquire(j->pool);
        pdc_path_req r = k == 0 ? serpent_req() : den_req(j->sc);
        pdc_path_result out;
        j->ok += pdc_find_path(c, &r, &out) == PDC_OK;
        pdc_path_result_free(&out);
        pdc_pool_release(j->pool, c);
    }
    return NULL;
}

static void test_a_pool_spreads_work_over_its_connections(void **state)
{
    pdi_daemon *d = *state;
    pdi_scenario sc[T_POOL_THREADS];
    assert_int_equal(pdi_load_scenarios(sc, T_POOL_THREADS), T_POOL_THREADS);
    const uint64_t before = overloaded_total(d);
    char err[PDC_MESSAGE_MAX];
    pdc_pool *pool = pdc_pool_connect(d->addr, T_POOL, PDI_CALL_TIMEOUT_MS, err, sizeof err);
    if (!pool)
        fail_msg("pool: %s", err);
    assert_int_equal(pdc_pool_size(pool), T_POOL);
    /* Free connections are handed out in turn, a borrowed one never. */
    pdc_conn *got[T_POOL];
    for (size_t i = 0; i < T_POOL; i++) {
        got[i] = pdc_pool_acquire(pool);
        for (size_t k = 0; k < i; k++)
            assert_true(got[k] != got[i]);
        assert_int_equal(pdc_inflight_cap(got[i]), T_CAP);
    }
    /* One connection past its cap while the others stay idle: the next
     * borrower gets an idle one. */
    pdc_path_req slow = serpent_req();
    uint64_t ids[T_CAP + 1];
    for (size_t i = 0; i <= T_CAP; i++)
        assert_int_equal(pdc_send_find_path(got[0], &slow, &ids[i]), PDC_OK);
    for (size_t i = 0; i < T_POOL; i++)
        pdc_pool_release(pool, got[i]);
    for (size_t i = 0; i < 2 * T_POOL; i++) {
        pdc_conn *c = pdc_pool_acquire(pool);
        assert_true(c != got[0]);
        pdc_pool_release(pool, c);
    }
    expect_all_ok(got[0], ids, T_CAP + 1);
    /* Threads sharing the pool: every search served, none refused. */
    pthread_t t[T_POOL_THREADS];
    pool_job jobs[T_POOL_THREADS];
    for (size_t i = 0; i < T_POOL_THREADS; i++) {
        jobs[i] = (pool_job){pool, &sc[i], 0};
        assert_int_equal(pthread_create(&t[i], NULL, pool_worker, &jobs[i]), 0);
    }
    for (size_t i = 0; i < T_POOL_THREADS; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(jobs[i].ok, 3);
    }
    pdc_pool_close(pool);
    assert_int_equal(overloaded_total(d), before);
}

/* ---- WatchEvent.incarnation --------------------------------------------- */

static uint64_t started_incarnation(pdc_conn *c, const char *scene)
{
    const char *names[1] = {scene};
    uint64_t watch_id;
    assert_int_equal(pdc_watch(c, names, 1, &watch_id), PDC_OK);
    pdc_watch_event e;
    assert_int_equal(pdc_watch_next(c, PDI_CALL_TIMEOUT_MS, &e), PDC_OK);
    assert_int_equal(e.kind, PDC_WATCH_STARTED);
    const uint64_t incarnation = e.incarnation;
    pdc_watch_event_free(&e);
    assert_int_equal(pdc_unwatch(c, watch_id), PDC_OK);
    assert_int_equal(pdc_watch_next(c, PDI_CALL_TIMEOUT_MS, &e), PDC_OK);
    assert_int_equal(e.kind, PDC_WATCH_ENDED);
    pdc_watch_event_free(&e);
    return incarnation;
}

static void test_watch_events_carry_the_incarnation(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    const uint8_t cells[4] = {1, 1, 1, 1};
    pdc_create_scene_req req = {0};
    req.name = "again";
    req.width = 2;
    req.height = 2;
    req.cells = cells;
    pdc_scene_change ch;
    assert_int_equal(pdc_create_scene(c, &req, &ch), PDC_OK);
    const uint64_t first = started_incarnation(c, "again");
    assert_true(first != 0);
    assert_int_equal(started_incarnation(c, "again"), first);
    /* Dropped and made again: another scene of the same name. */
    assert_int_equal(pdc_drop_scene(c, "again", 0, &ch), PDC_OK);
    assert_int_equal(pdc_create_scene(c, &req, &ch), PDC_OK);
    const uint64_t second = started_incarnation(c, "again");
    assert_true(second != 0 && second != first);
    pdc_close(c);
}

/* ---- reservations: agents moved aside, agents cut ---------------------- */

static pdc_reserve_req corridor_req(uint64_t agent, pdc_xy from, pdc_xy to, int64_t t0)
{
    pdc_reserve_req q = {0};
    q.scene = "corridor";
    q.agent = agent;
    q.start = from;
    q.goal = to;
    q.t0_ms = t0;
    q.speed = 1.0;
    return q;
}

/* A one-wide corridor with a side pocket above (8, 1). B (2) stands at
 * (8, 1) from 0, A (1) at (6, 1) from 1000; at 4000 B (stood 4000 ms, A
 * 3000) heads for the left room with yield_after_ms: A is moved aside and
 * the answer carries its plan; a watcher hears AGENTS_DISPLACED. Then a
 * wall dropped on A's new place cuts it: pdc_update_result.agents_cut. */
static void test_reservations_yield_and_cut(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d), *w = pdi_connect(d);
    assert_non_null(c);
    assert_non_null(w);
    static const char rows[3][16] = {"...#####.###...", "...............", "...#########..."};
    uint8_t cells[3 * 15];
    for (int y = 0; y < 3; y++)
        for (int x = 0; x < 15; x++)
            cells[y * 15 + x] = rows[y][x] == '#' ? 0 : 1;
    pdc_create_scene_req req = {0};
    req.name = "corridor";
    req.width = 15;
    req.height = 3;
    req.cells = cells;
    pdc_scene_change ch;
    assert_int_equal(pdc_create_scene(c, &req, &ch), PDC_OK);
    const char *names[1] = {"corridor"};
    uint64_t watch_id;
    pdc_watch_event e;
    assert_int_equal(pdc_watch(w, names, 1, &watch_id), PDC_OK);
    assert_int_equal(pdc_watch_next(w, PDI_CALL_TIMEOUT_MS, &e), PDC_OK);
    assert_int_equal(e.kind, PDC_WATCH_STARTED);
    pdc_watch_event_free(&e);

    pdc_reserve_result r;
    pdc_reserve_req q = corridor_req(2, (pdc_xy){8, 1}, (pdc_xy){8, 1}, 0);
    assert_int_equal(pdc_reserve_path(c, &q, &r), PDC_OK);
    assert_int_equal(r.n_displaced, 0);
    pdc_reserve_result_free(&r);
    q = corridor_req(1, (pdc_xy){6, 1}, (pdc_xy){6, 1}, 1000);
    assert_int_equal(pdc_reserve_path(c, &q, &r), PDC_OK);
    pdc_reserve_result_free(&r);
    q = corridor_req(2, (pdc_xy){8, 1}, (pdc_xy){1, 1}, 4000);
    q.has_window = 1;
    q.window_ms = 4000;
    q.yield_after_ms = 2000;
    int st = pdc_reserve_path(c, &q, &r);
    assert_true(st == PDC_OK || st == PDC_PARTIAL);
    assert_int_equal(r.n_displaced, 1);
    const pdc_displaced_plan *dp = &r.displaced[0];
    assert_int_equal(dp->agent, 1);
    assert_true(dp->count >= 2);
    assert_int_equal(dp->waypoints[0].x, 6);
    assert_int_equal(dp->waypoints[0].y, 1);
    assert_int_equal(dp->waypoints[0].t_arrive_ms, dp->t0_ms);
    assert_int_equal(dp->reserved_until_ms, dp->waypoints[dp->count - 1].t_leave_ms);
    const pdc_xy aside = {dp->waypoints[dp->count - 1].x, dp->waypoints[dp->count - 1].y};
    const uint64_t version = r.scene_version;
    pdc_reserve_result_free(&r);
    assert_int_equal(pdc_watch_next(w, PDI_CALL_TIMEOUT_MS, &e), PDC_OK);
    assert_int_equal(e.kind, PDC_WATCH_AGENTS_DISPLACED);
    assert_string_equal(pdc_watch_kind_name(e.kind), "agents_displaced");
    assert_int_equal(e.version, version);
    assert_int_equal(e.agent_count, 1);
    assert_int_equal(e.agents[0], 1);
    pdc_watch_event_free(&e);

    /* Out of range: refused, nothing moved. */
    q = corridor_req(3, (pdc_xy){0, 0}, (pdc_xy){0, 0}, 0);
    q.yield_after_ms = -1;
    assert_int_equal(pdc_reserve_path(c, &q, &r), PDC_INVALID_ARGUMENT);
    pdc_reserve_result_free(&r);

    /* A wall where A now stands for good cuts A alone. */
    pdc_update_req up = {0};
    up.scene = "corridor";
    up.is_rect = 1;
    up.rect_min = up.rect_max = aside;
    up.op = PDC_UPDATE_BLOCK;
    pdc_update_result ur;
    assert_int_equal(pdc_update_cells(c, &up, &ur), PDC_OK);
    assert_int_equal(ur.n_agents_cut, 1);
    assert_int_equal(ur.agents_cut[0], 1);
    pdc_close(w);
    pdc_close(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_limits_are_read_on_connect, setup_cap, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_pipelining_past_the_cap_queues_and_all_arrive, setup_cap,
                                        pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_a_full_queue_is_a_clear_error, setup_cap, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_a_batch_counts_its_items, setup_cap, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_cancel_of_a_queued_request_never_sends_it, setup_cap,
                                        pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_server_overloaded_is_retried_until_it_succeeds, setup_tiny_queue,
                                        pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_server_overloaded_fails_cleanly_at_the_deadline, setup_tiny_queue,
                                        pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_limits_refused_before_the_token_are_read_after_auth, setup_auth,
                                        pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_a_pool_spreads_work_over_its_connections, setup_cap,
                                        pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_watch_events_carry_the_incarnation, setup_cap, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_reservations_yield_and_cut, setup_cap, pdi_fixture_stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
