/*
 * test_e2e_status.c - every wire status the daemon can give, provoked through
 * the real pathd over a raw socket, each checked for the right id, the final
 * flag and the body the protocol promises (docs/PROTOCOL.md, section 7).
 *
 * PARTIAL is provoked the documented way: a budget cut-off with
 * partial_on_cutoff set returns the path to the best node so far. INTERNAL
 * has no honest trigger (only an allocation failure inside the daemon gives
 * it) and is deliberately not faked.
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

/* A low per-connection limit, so OVERLOADED needs only a few long searches. */
#define T_MAX_INFLIGHT 4
/* A tiny job queue (plus a worker per core busy) for the queue-full case. */
#define T_QUEUE_CAPACITY 2
#define T_MAX_CONNECTIONS 2

static int setup(void **state)
{
    pdi_limits l = {0};
    l.max_inflight_per_conn = T_MAX_INFLIGHT;
    return pdi_fixture_start(state, &l);
}

static int setup_small_queue(void **state)
{
    pdi_limits l = {0};
    l.job_queue_capacity = T_QUEUE_CAPACITY;
    l.max_connections = T_MAX_CONNECTIONS;
    return pdi_fixture_start(state, &l);
}

/* Receives the final answer for id and checks its status; returns it. */
static Pathd__V1__Response *expect(int fd, uint64_t id, Pathd__V1__Status status)
{
    Pathd__V1__Response *r = pdi_raw_recv_final(fd, id, PDI_CALL_TIMEOUT_MS);
    if (!r)
        fail_msg("no final answer for request %llu", (unsigned long long)id);
    if (r->status != status)
        fail_msg("request %llu: status %d, expected %d (%s)", (unsigned long long)id, r->status, status,
                 r->body_case == PATHD__V1__RESPONSE__BODY_ERROR ? r->error->message : "");
    assert_true(r->final);
    return r;
}

static void expect_and_free(int fd, uint64_t id, Pathd__V1__Status status)
{
    pathd__v1__response__free_unpacked(expect(fd, id, status), NULL);
}

/* A failed search is answered with one final PathChunk and no waypoints. */
/* A search that ran and found nothing: a final empty PathChunk whose
 * Response.message says why (not empty) and contains `why`. */
static void expect_empty_path(int fd, uint64_t id, Pathd__V1__Status status, const char *why)
{
    Pathd__V1__Response *r = expect(fd, id, status);
    assert_int_equal(r->body_case, PATHD__V1__RESPONSE__BODY_PATH);
    assert_null(r->path->points);
    if (!r->message || !r->message[0] || !strstr(r->message, why))
        fail_msg("request %llu: message '%s' lacks '%s'", (unsigned long long)id, r->message ? r->message : "", why);
    pathd__v1__response__free_unpacked(r, NULL);
}

/* A request refused before any search is answered with an Error body. */
static void expect_error(int fd, uint64_t id, Pathd__V1__Status status)
{
    Pathd__V1__Response *r = expect(fd, id, status);
    assert_int_equal(r->body_case, PATHD__V1__RESPONSE__BODY_ERROR);
    assert_true(r->error->message && r->error->message[0]);
    pathd__v1__response__free_unpacked(r, NULL);
}

static void send_fp(int fd, uint64_t id, const char *scene, int32_t sx, int32_t sy, int32_t gx, int32_t gy)
{
    pdi_fp_msg m;
    pdi_fp_init(&m, id, scene, sx, sy, gx, gy);
    assert_int_equal(pdi_raw_send_request(fd, &m.req), 0);
}

static void test_ok_partial_no_path_and_search_outcomes(void **state)
{
    pdi_daemon *d = *state;
    int fd = pdi_raw_connect(d->port);
    assert_true(fd >= 0);

    pdi_small_msg ping;
    pdi_ping_init(&ping, 1, 77);
    assert_int_equal(pdi_raw_send_request(fd, &ping.req), 0);
    Pathd__V1__Response *r = expect(fd, 1, PATHD__V1__STATUS__OK);
    assert_int_equal(r->body_case, PATHD__V1__RESPONSE__BODY_PONG);
    assert_int_equal(r->pong->nonce, 77);
    pathd__v1__response__free_unpacked(r, NULL);

    send_fp(fd, 2, "rooms", 1, 1, 10, 1);
    r = expect(fd, 2, PATHD__V1__STATUS__OK);
    assert_int_equal(r->body_case, PATHD__V1__RESPONSE__BODY_PATH);
    assert_int_equal(r->path->total_waypoints, 10);
    assert_true(r->path->cost == 9.0);
    pathd__v1__response__free_unpacked(r, NULL);

    send_fp(fd, 3, "rooms", 1, 1, 17, 4); /* the sealed pocket */
    expect_empty_path(fd, 3, PATHD__V1__STATUS__NO_PATH, "no walk joins them");
    send_fp(fd, 4, "rooms", 11, 1, 1, 1); /* start on the wall */
    expect_empty_path(fd, 4, PATHD__V1__STATUS__START_BLOCKED, "start cell (11,1) of scene 'rooms' is a wall");
    send_fp(fd, 5, "rooms", 1, 1, 11, 2); /* goal on the wall */
    expect_empty_path(fd, 5, PATHD__V1__STATUS__GOAL_BLOCKED, "goal cell (11,2) of scene 'rooms' is a wall");

    pdi_scenario sc[2];
    assert_int_equal(pdi_load_scenarios(sc, 2), 2);
    pdi_fp_msg m;
    pdi_fp_init(&m, 6, "den520d", sc[1].sx, sc[1].sy, sc[1].gx, sc[1].gy);
    m.fp.max_expansions = 10;
    assert_int_equal(pdi_raw_send_request(fd, &m.req), 0);
    r = expect(fd, 6, PATHD__V1__STATUS__BUDGET_EXCEEDED);
    assert_int_equal(r->body_case, PATHD__V1__RESPONSE__BODY_PATH);
    assert_true(r->path->expansions <= 10);
    pathd__v1__response__free_unpacked(r, NULL);

    /* The same cut-off with partial_on_cutoff: PARTIAL, a usable path from
     * the start towards the goal, and the cause in cutoff. */
    pdi_fp_init(&m, 8, "den520d", sc[1].sx, sc[1].sy, sc[1].gx, sc[1].gy);
    m.fp.max_expansions = 100;
    m.fp.partial_on_cutoff = 1;
    assert_int_equal(pdi_raw_send_request(fd, &m.req), 0);
    r = expect(fd, 8, PATHD__V1__STATUS__PARTIAL);
    assert_int_equal(r->body_case, PATHD__V1__RESPONSE__BODY_PATH);
    assert_non_null(r->path->points);
    assert_true(r->path->points->n_dx >= 2);
    assert_int_equal(r->path->points->dx[0], sc[1].sx); /* the first cell is absolute */
    assert_int_equal(r->path->points->dy[0], sc[1].sy);
    assert_int_equal(r->path->cutoff, PATHD__V1__STATUS__BUDGET_EXCEEDED);
    assert_non_null(r->path->goal_used);
    assert_false(r->path->goal_used->x == sc[1].gx && r->path->goal_used->y == sc[1].gy);
    pathd__v1__response__free_unpacked(r, NULL);

    /* 1 ms is far less than the ~0.5 M expansions the serpent needs. */
    pdi_send_serpent(fd, 7, 1);
    /* Cut off in the search or before a worker took it (an empty path), or
     * refused at the door when the deadline had passed before it could be
     * queued (an Error: the loop's first small search took that 1 ms, as
     * it can on a loaded machine): each says why. */
    r = expect(fd, 7, PATHD__V1__STATUS__DEADLINE_EXCEEDED);
    if (r->body_case == PATHD__V1__RESPONSE__BODY_ERROR) {
        assert_true(r->error->message && strstr(r->error->message, "deadline"));
    } else {
        assert_int_equal(r->body_case, PATHD__V1__RESPONSE__BODY_PATH);
        assert_null(r->path->points);
        assert_true(r->message && r->message[0]);
    }
    pathd__v1__response__free_unpacked(r, NULL);
    close(fd);
}

/* A path request on c, timed: its answer's status, the timing checked. */
static int timed_path(pdc_conn *c, const char *scene, int32_t sx, int32_t sy, int32_t gx, int32_t gy, int searched,
                      const char *what)
{
    pdc_path_req req = {0};
    pdc_path_result r = {0};
    req.scene = scene;
    req.start = pdc_cell(sx, sy);
    req.goal = pdc_cell(gx, gy);
    uint64_t sent_ns = pdi_now_ns();
    int st = pdc_find_path(c, &req, &r);
    pdi_check_timing(r.timing, sent_ns, searched, what);
    assert_int_equal(r.timing.search_us, r.search_micros);
    pdc_path_result_free(&r);
    return st;
}

/* Every answer to a request carries server_us, within the client's round
 * trip, and search_us only when a search ran: answers made on the loop
 * (Ping, Stats, refusals, a short path searched inline) and on a worker. */
static void test_answers_are_timed(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);

    uint64_t sent_ns = pdi_now_ns();
    assert_int_equal(pdc_ping(c, NULL), PDC_OK);
    pdi_check_timing(pdc_last_timing(c), sent_ns, 0, "Ping");
    pdc_server_stats stats;
    sent_ns = pdi_now_ns();
    assert_int_equal(pdc_stats(c, &stats), PDC_OK);
    pdi_check_timing(pdc_last_timing(c), sent_ns, 0, "GetStats");
    pdc_scene_details info;
    sent_ns = pdi_now_ns();
    assert_int_equal(pdc_scene_info(c, "no-such-scene", &info), PDC_UNKNOWN_SCENE);
    pdi_check_timing(pdc_last_timing(c), sent_ns, 0, "GetSceneInfo refused");
    pdc_scene_details_free(&info);

    assert_int_equal(timed_path(c, "no-such-scene", 0, 0, 1, 1, 0, "FindPath of an unknown scene"),
                     PDC_UNKNOWN_SCENE);
    assert_int_equal(timed_path(c, "rooms", 11, 1, 1, 1, 0, "FindPath from a wall"), PDC_START_BLOCKED);
    assert_int_equal(timed_path(c, "rooms", 1, 1, 10, 1, 1, "short FindPath"), PDC_OK);
    pdi_scenario sc[2];
    assert_int_equal(pdi_load_scenarios(sc, 2), 2);
    assert_int_equal(timed_path(c, "den520d", sc[1].sx, sc[1].sy, sc[1].gx, sc[1].gy, 1, "den520d FindPath"),
                     PDC_OK);
    int32_t gx, gy;
    pdi_serpent_goal(&gx, &gy);
    assert_int_equal(timed_path(c, "serpent", 0, 0, gx, gy, 1, "serpent FindPath"), PDC_OK);
    /* A search of ~0.5 M expansions is most of its answer's time. */
    assert_true(pdc_last_timing(c).search_us >= 100);
    pdc_close(c);
}

static void test_refusals(void **state)
{
    pdi_daemon *d = *state;
    int fd = pdi_raw_connect(d->port);
    assert_true(fd >= 0);

    send_fp(fd, 1, "no-such-scene", 0, 0, 1, 1);
    expect_error(fd, 1, PATHD__V1__STATUS__UNKNOWN_SCENE);
    Pathd__V1__Request req = PATHD__V1__REQUEST__INIT;
    Pathd__V1__GetSceneInfo info = PATHD__V1__GET_SCENE_INFO__INIT;
    info.scene = "no-such-scene";
    req.id = 2;
    req.body_case = PATHD__V1__REQUEST__BODY_SCENE_INFO;
    req.scene_info = &info;
    assert_int_equal(pdi_raw_send_request(fd, &req), 0);
    expect_error(fd, 2, PATHD__V1__STATUS__UNKNOWN_SCENE);

    send_fp(fd, 3, "rooms", 24, 0, 1, 1); /* x == width */
    expect_error(fd, 3, PATHD__V1__STATUS__OUT_OF_BOUNDS);
    send_fp(fd, 4, "rooms", 1, 1, 1, -1);
    expect_error(fd, 4, PATHD__V1__STATUS__OUT_OF_BOUNDS);

    /* INVALID_ARGUMENT, one bad field at a time. */
    pdi_fp_msg m;
    pdi_fp_init(&m, 10, "rooms", 1, 1, 2, 2);
    m.fp.unit_size = 3; /* rooms serves 1 and 2 */
    assert_int_equal(pdi_raw_send_request(fd, &m.req), 0);
    expect_error(fd, 10, PATHD__V1__STATUS__INVALID_ARGUMENT);
    pdi_fp_init(&m, 11, "rooms", 1, 1, 2, 2);
    m.fp.connectivity = 5;
    assert_int_equal(pdi_raw_send_request(fd, &m.req), 0);
    expect_error(fd, 11, PATHD__V1__STATUS__INVALID_ARGUMENT);
    pdi_fp_init(&m, 12, "", 1, 1, 2, 2);
    assert_int_equal(pdi_raw_send_request(fd, &m.req), 0);
    expect_error(fd, 12, PATHD__V1__STATUS__INVALID_ARGUMENT);
    pdi_fp_init(&m, 13, "rooms", 1, 1, 2, 2);
    m.fp.start = NULL;
    assert_int_equal(pdi_raw_send_request(fd, &m.req), 0);
    expect_error(fd, 13, PATHD__V1__STATUS__INVALID_ARGUMENT);
    pdi_fp_init(&m, 14, "rooms", 1, 1, 2, 2);
    m.fp.deadline_ms = 600001;
    assert_int_equal(pdi_raw_send_request(fd, &m.req), 0);
    expect_error(fd, 14, PATHD__V1__STATUS__INVALID_ARGUMENT);
    pdi_fp_init(&m, 15, "rooms", 1, 1, 2, 2);
    m.fp.style = 7;
    assert_int_equal(pdi_raw_send_request(fd, &m.req), 0);
    expect_error(fd, 15, PATHD__V1__STATUS__INVALID_ARGUMENT);
    Pathd__V1__Request empty = PATHD__V1__REQUEST__INIT;
    empty.id = 16;
    assert_int_equal(pdi_raw_send_request(fd, &empty), 0);
    expect_error(fd, 16, PATHD__V1__STATUS__INVALID_ARGUMENT);
    /* Cancelling what is not in flight is refused with an empty body. */
    pdi_send_cancel(fd, 17, 9999);
    Pathd__V1__Response *r = expect(fd, 17, PATHD__V1__STATUS__INVALID_ARGUMENT);
    pathd__v1__response__free_unpacked(r, NULL);

    /* The connection survived every refusal. */
    pdi_small_msg ping;
    pdi_ping_init(&ping, 18, 5);
    assert_int_equal(pdi_raw_send_request(fd, &ping.req), 0);
    expect_and_free(fd, 18, PATHD__V1__STATUS__OK);
    close(fd);
}

/* Connects and sends T_MAX_INFLIGHT long searches (ids 1..T_MAX_INFLIGHT),
 * which fill the connection's allowance, then one more (id 100), which is
 * refused at once. */
static int connect_and_fill(const pdi_daemon *d)
{
    int fd = pdi_raw_connect(d->port);
    assert_true(fd >= 0);
    for (uint64_t id = 1; id <= T_MAX_INFLIGHT; id++)
        pdi_send_serpent(fd, id, 0);
    pdi_send_serpent(fd, 100, 0);
    return fd;
}

static void test_cancelled_and_overloaded(void **state)
{
    int fd = connect_and_fill(*state);
    /* Then all are cancelled: with 2 workers at least two are still
     * queued, and a queued job is always cancelled; a running one may
     * finish first. Frames are taken in whatever order they come. */
    int refused = 0, answered = 0, acked = 0, cancelled = 0;
    while (!refused || answered < T_MAX_INFLIGHT || acked < T_MAX_INFLIGHT) {
        Pathd__V1__Response *r = pdi_raw_recv(fd, PDI_CALL_TIMEOUT_MS, NULL);
        assert_non_null(r);
        if (r->id == 100) {
            assert_true(r->final);
            assert_int_equal(r->status, PATHD__V1__STATUS__OVERLOADED);
            assert_int_equal(r->body_case, PATHD__V1__RESPONSE__BODY_ERROR);
            assert_false(refused);
            refused = 1;
            for (uint64_t id = 1; id <= T_MAX_INFLIGHT; id++)
                pdi_send_cancel(fd, 200 + id, id);
        } else if (r->final && r->id >= 1 && r->id <= T_MAX_INFLIGHT) {
            assert_true(r->status == PATHD__V1__STATUS__CANCELLED || r->status == PATHD__V1__STATUS__OK);
            assert_int_equal(r->body_case, PATHD__V1__RESPONSE__BODY_PATH);
            cancelled += r->status == PATHD__V1__STATUS__CANCELLED;
            answered++;
        } else if (r->id > 200 && r->id <= 200 + T_MAX_INFLIGHT) {
            /* The ack: OK while the target was in flight, INVALID_ARGUMENT
             * if it had already been answered. */
            assert_true(r->final);
            assert_true(r->status == PATHD__V1__STATUS__OK || r->status == PATHD__V1__STATUS__INVALID_ARGUMENT);
            assert_int_equal(r->body_case, PATHD__V1__RESPONSE__BODY__NOT_SET);
            acked++;
        }
        pathd__v1__response__free_unpacked(r, NULL);
    }
    assert_true(cancelled >= T_MAX_INFLIGHT - 2);
    close(fd);
}

/* A connection at its cap is not read until half of its requests are
 * answered, or until a millisecond has passed: a Ping (or Cancel) it sends
 * meanwhile is answered at once, well before any of the long searches
 * holding the cap, and once they are gone the connection is served again. */
static void test_full_connection_is_still_read(void **state)
{
    int fd = connect_and_fill(*state);
    /* The refusal shows the server read up to the cap and went full. */
    Pathd__V1__Response *r = pdi_raw_recv(fd, PDI_CALL_TIMEOUT_MS, NULL);
    assert_non_null(r);
    assert_int_equal(r->id, 100);
    assert_int_equal(r->status, PATHD__V1__STATUS__OVERLOADED);
    pathd__v1__response__free_unpacked(r, NULL);

    pdi_small_msg ping;
    pdi_ping_init(&ping, 300, 7);
    assert_int_equal(pdi_raw_send_request(fd, &ping.req), 0);
    pdi_send_serpent(fd, 301, 0);
    /* Both are answered before any search: the ping, and the search that
     * finds the connection still at its cap. */
    for (int i = 0; i < 2; i++) {
        r = pdi_raw_recv(fd, PDI_CALL_TIMEOUT_MS, NULL);
        assert_non_null(r);
        assert_true(r->final);
        if (r->id == 300)
            assert_int_equal(r->status, PATHD__V1__STATUS__OK);
        else if (r->id == 301)
            assert_int_equal(r->status, PATHD__V1__STATUS__OVERLOADED);
        else
            fail_msg("request %llu answered before the ping and the refusal", (unsigned long long)r->id);
        pathd__v1__response__free_unpacked(r, NULL);
    }

    for (uint64_t id = 1; id <= T_MAX_INFLIGHT; id++)
        pdi_send_cancel(fd, 200 + id, id);
    uint64_t ids[2 * T_MAX_INFLIGHT];
    for (uint64_t i = 0; i < T_MAX_INFLIGHT; i++) {
        ids[i] = i + 1;
        ids[T_MAX_INFLIGHT + i] = 201 + i;
    }
    Pathd__V1__Response *out[2 * T_MAX_INFLIGHT];
    pdi_raw_collect(fd, ids, out, 2 * T_MAX_INFLIGHT);
    pdi_raw_free_all(out, 2 * T_MAX_INFLIGHT);
    pdi_ping_init(&ping, 400, 8);
    assert_int_equal(pdi_raw_send_request(fd, &ping.req), 0);
    expect_and_free(fd, 400, PATHD__V1__STATUS__OK);
    pdi_send_serpent(fd, 401, 0);
    Pathd__V1__Response *last = expect(fd, 401, PATHD__V1__STATUS__OK);
    assert_int_equal(last->body_case, PATHD__V1__RESPONSE__BODY_PATH);
    pathd__v1__response__free_unpacked(last, NULL);
    close(fd);
}

/* A connection with nothing else in flight gets its answer written by the
 * worker that found it, and the rest of an answer larger than the socket
 * takes goes through the loop, ahead of anything answered meanwhile. Here
 * the client reads nothing while a path of half a million cells (the
 * serpentine, every cell, with arrival times: about 5 MB, more than the
 * kernel's largest send buffer, 4 MiB) is answered, and Pings follow it
 * every 20 ms; then everything is read: each frame must decode, the
 * path's chunks come in order up to its final one with all its waypoints,
 * and every Pong comes, in order. */
static void test_worker_written_answer_stays_whole(void **state)
{
    pdi_daemon *d = *state;
    int fd = pdi_raw_connect_small_window(d->port);
    assert_true(fd >= 0);
    int32_t gx, gy;
    pdi_serpent_goal(&gx, &gy);
    pdi_fp_msg m;
    pdi_fp_init(&m, 1, "serpent", 0, 0, gx, gy);
    m.fp.speed = 1.0;
    assert_int_equal(pdi_raw_send_request(fd, &m.req), 0);
    enum { PINGS = 60 };
    for (uint64_t i = 0; i < PINGS; i++) {
        pdi_sleep_ms(20);
        pdi_small_msg ping;
        pdi_ping_init(&ping, 2 + i, 1000 + i);
        assert_int_equal(pdi_raw_send_request(fd, &ping.req), 0);
    }
    uint32_t next_seq = 0;
    uint64_t waypoints = 0, next_pong = 2;
    int path_done = 0;
    while (!path_done || next_pong < 2 + PINGS) {
        Pathd__V1__Response *r = pdi_raw_recv(fd, PDI_CALL_TIMEOUT_MS, NULL);
        if (!r)
            fail_msg("stream ended or a frame did not decode: chunk %u, pong %llu next", next_seq,
                     (unsigned long long)next_pong);
        if (r->id == 1) {
            assert_false(path_done);
            assert_int_equal(r->status, PATHD__V1__STATUS__OK);
            assert_int_equal(r->body_case, PATHD__V1__RESPONSE__BODY_PATH);
            assert_int_equal(r->path->seq, next_seq);
            next_seq++;
            assert_non_null(r->path->points);
            waypoints += r->path->points->n_dx;
            assert_int_equal(r->path->points->n_t, r->path->points->n_dx);
            if (r->final) {
                path_done = 1;
                assert_int_equal(r->path->total_waypoints, waypoints);
            }
        } else {
            assert_int_equal(r->id, next_pong);
            assert_int_equal(r->body_case, PATHD__V1__RESPONSE__BODY_PONG);
            assert_int_equal(r->pong->nonce, 1000 + (next_pong - 2));
            next_pong++;
        }
        pathd__v1__response__free_unpacked(r, NULL);
    }
    /* Every cell of the serpentine's corridors and gaps: far more than a
     * socket takes at once. */
    assert_true(waypoints > 500000);
    close(fd);
    pdi_assert_daemon_serves(d);
}

static void test_protocol_errors(void **state)
{
    pdi_daemon *d = *state;
    /* MALFORMED: a frame whose payload is not a Request (a varint that never
     * ends), answered with id 0, then the connection closes. */
    int fd = pdi_raw_connect(d->port);
    assert_true(fd >= 0);
    uint8_t bad[4 + 16] = {0, 0, 0, 16};
    memset(bad + 4, 0xff, 16);
    assert_int_equal(pdi_raw_send(fd, bad, sizeof bad), 0);
    Pathd__V1__Response *r = expect(fd, 0, PATHD__V1__STATUS__MALFORMED);
    pathd__v1__response__free_unpacked(r, NULL);
    assert_true(pdi_raw_wait_closed(fd, PDI_CALL_TIMEOUT_MS));
    close(fd);

    /* FRAME_TOO_LARGE: a header one byte above the 1 MiB default. */
    fd = pdi_raw_connect(d->port);
    assert_true(fd >= 0);
    const uint8_t big[4] = {0x00, 0x10, 0x00, 0x01};
    assert_int_equal(pdi_raw_send(fd, big, sizeof big), 0);
    r = expect(fd, 0, PATHD__V1__STATUS__FRAME_TOO_LARGE);
    pathd__v1__response__free_unpacked(r, NULL);
    assert_true(pdi_raw_wait_closed(fd, PDI_CALL_TIMEOUT_MS));
    close(fd);
    pdi_assert_daemon_serves(d);
}

/* OVERLOADED from the two global limits: the job queue and the connection
 * count. */
static void test_overloaded_global_limits(void **state)
{
    pdi_daemon *d = *state;
    int fd = pdi_raw_connect(d->port);
    assert_true(fd >= 0);
    /* 2 workers + T_QUEUE_CAPACITY queued slots: the fifth long search at the
     * latest finds the queue full. */
    const uint64_t n = 2 + T_QUEUE_CAPACITY + 1;
    for (uint64_t id = 1; id <= n; id++)
        pdi_send_serpent(fd, id, 0);
    int overloaded = 0;
    for (uint64_t k = 0; k < n; k++) {
        Pathd__V1__Response *r = pdi_raw_recv(fd, PDI_CALL_TIMEOUT_MS, NULL);
        assert_non_null(r);
        if (!r->final) {
            pathd__v1__response__free_unpacked(r, NULL);
            k--;
            continue;
        }
        if (r->status == PATHD__V1__STATUS__OVERLOADED) {
            assert_int_equal(r->body_case, PATHD__V1__RESPONSE__BODY_ERROR);
            assert_non_null(strstr(r->error->message, "queue"));
            overloaded++;
            /* Refusals come at once; end the rest early. */
            if (overloaded == 1)
                for (uint64_t id = 1; id <= n; id++)
                    pdi_send_cancel(fd, 100 + id, id);
        } else if (r->id >= 100) {
            k--; /* a cancel ack */
        } else {
            assert_true(r->status == PATHD__V1__STATUS__CANCELLED || r->status == PATHD__V1__STATUS__OK);
        }
        pathd__v1__response__free_unpacked(r, NULL);
    }
    assert_true(overloaded >= 1);

    /* This connection plus one more reach T_MAX_CONNECTIONS; a third is
     * accepted, told OVERLOADED with id 0, and closed. */
    int fd2 = pdi_raw_connect(d->port);
    assert_true(fd2 >= 0);
    pdi_small_msg ping;
    pdi_ping_init(&ping, 1, 1);
    assert_int_equal(pdi_raw_send_request(fd2, &ping.req), 0);
    expect_and_free(fd2, 1, PATHD__V1__STATUS__OK);
    int fd3 = pdi_raw_connect(d->port);
    assert_true(fd3 >= 0);
    Pathd__V1__Response *r = expect(fd3, 0, PATHD__V1__STATUS__OVERLOADED);
    pathd__v1__response__free_unpacked(r, NULL);
    assert_true(pdi_raw_wait_closed(fd3, PDI_CALL_TIMEOUT_MS));
    close(fd3);
    close(fd2);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ok_partial_no_path_and_search_outcomes, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_answers_are_timed, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_refusals, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_cancelled_and_overloaded, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_full_connection_is_still_read, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_worker_written_answer_stays_whole, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_protocol_errors, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_overloaded_global_limits, setup_small_queue, pdi_fixture_stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
