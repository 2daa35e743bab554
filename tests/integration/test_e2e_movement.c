/*
 * test_e2e_movement.c - the movement queries and Batch through the daemon
 * (issue 11 part 2), on the harness's "rooms" scene (24x12, origin
 * (-10.5, 4), cell size 0.5; walls at x = 11 with a door at (11,5), a
 * sealed pocket at (17,4)).
 *
 * Each kind answers through the C client as the query layer computes it
 * (hand-checked cells on this map), a Batch answers every item exactly as
 * the same query sent alone, a bad item fails only itself, a batch holds
 * one in-flight slot per item (GetLimits' max_batch_items is the in-flight
 * cap, and one item past it is LIMIT_EXCEEDED), and
 * pathctl's batch command prints one JSON object per input line, in order,
 * in frames the server admits.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "harness.h"

#define T_INFLIGHT 8

static int setup(void **state)
{
    pdi_limits l = {0};
    l.max_inflight_per_conn = T_INFLIGHT;
    return pdi_fixture_start(state, &l);
}

static int teardown(void **state)
{
    return pdi_fixture_stop(state);
}

static pdc_query q_of(pdc_query_kind kind, pdc_point a, pdc_point b)
{
    pdc_query q = {0};
    q.kind = kind;
    q.scene = "rooms";
    q.a = a;
    q.b = b;
    return q;
}

static void test_each_kind(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    pdc_query_result r;

    pdc_query q = q_of(PDC_Q_RAYCAST, pdc_cell(1, 1), pdc_cell(10, 1));
    assert_int_equal(pdc_query_run(c, &q, &r), PDC_OK);
    assert_true(r.yes);
    assert_true(r.version >= 1);
    q.b = pdc_cell(20, 1);
    assert_int_equal(pdc_query_run(c, &q, &r), PDC_OK);
    assert_false(r.yes);
    assert_true(r.has_hit && r.hit.x == 11 && r.hit.y == 1);
    assert_true(r.cell.x == 10 && r.cell.y == 1);
    /* The wall face at x = 11 is world x -10.5 + 11 * 0.5 = -5. */
    assert_true(r.wx < -5.0 && r.wx > -5.001);

    /* World points: the centre of (1,1) is (-9.75, 4.75). */
    q = q_of(PDC_Q_RAYCAST, pdc_world(-9.75, 4.75), pdc_world(-9.75 + 19 * 0.5, 4.75));
    assert_int_equal(pdc_query_run(c, &q, &r), PDC_OK);
    assert_true(!r.yes && r.hit.x == 11);

    q = q_of(PDC_Q_REACHABLE, pdc_cell(1, 1), pdc_cell(20, 10));
    assert_int_equal(pdc_query_run(c, &q, &r), PDC_OK);
    assert_true(r.yes);
    q.b = pdc_cell(17, 4); /* the sealed pocket */
    assert_int_equal(pdc_query_run(c, &q, &r), PDC_OK);
    assert_false(r.yes);

    q = q_of(PDC_Q_NEAREST, pdc_cell(11, 2), pdc_cell(0, 0));
    q.radius = 3;
    assert_int_equal(pdc_query_run(c, &q, &r), PDC_OK);
    assert_true(r.cell.x == 10 && r.cell.y == 2 && fabs(r.distance - 1) < 1e-9);
    /* Only in the pocket's component: the pocket itself, 4 rows and 6 columns away. */
    q = q_of(PDC_Q_NEAREST, pdc_cell(17, 2), pdc_cell(17, 4));
    q.has_b = 1;
    q.radius = 5;
    assert_int_equal(pdc_query_run(c, &q, &r), PDC_OK);
    assert_true(r.cell.x == 17 && r.cell.y == 4);

    q = q_of(PDC_Q_DISTANCE_TO_WALL, pdc_cell(5, 6), pdc_cell(0, 0));
    assert_int_equal(pdc_query_run(c, &q, &r), PDC_OK);
    assert_true(r.has_hit && fabs(r.distance - 2) < 1e-9); /* the wall row 8 */

    q = q_of(PDC_Q_MOVE_ALONG, pdc_cell(9, 1), pdc_cell(0, 0));
    q.dx = 5;
    q.dy = 2;
    assert_int_equal(pdc_query_run(c, &q, &r), PDC_OK);
    assert_true(r.yes && r.cell.x == 10 && r.cell.y == 3);

    q = q_of(PDC_Q_RANDOM_POINT, pdc_cell(1, 1), pdc_cell(0, 0));
    q.radius = 3;
    q.seed = 99;
    assert_int_equal(pdc_query_run(c, &q, &r), PDC_OK);
    pdc_xy first = r.cell;
    assert_int_equal(r.seed, 99);
    assert_int_equal(pdc_query_run(c, &q, &r), PDC_OK);
    assert_true(r.cell.x == first.x && r.cell.y == first.y);

    pdc_timed_point moves[3] = {{pdc_cell(8, 2), 0}, {pdc_cell(10, 2), 1}, {pdc_cell(14, 2), 2}};
    q = q_of(PDC_Q_VALIDATE_MOVE, pdc_cell(0, 0), pdc_cell(0, 0));
    q.moves = moves;
    q.move_count = 3;
    q.max_speed = 10;
    assert_int_equal(pdc_query_run(c, &q, &r), PDC_OK);
    assert_false(r.yes);
    assert_int_equal(r.first_invalid, 2);
    assert_int_equal(r.reason, PDC_MOVE_BLOCKED_SEGMENT);
    assert_true(r.cell.x == 10 && r.cell.y == 2);

    /* Refusals: unknown scene, out of bounds, bad radius - each with a message. */
    q = q_of(PDC_Q_RAYCAST, pdc_cell(1, 1), pdc_cell(99, 1));
    assert_int_equal(pdc_query_run(c, &q, &r), PDC_OUT_OF_BOUNDS);
    assert_non_null(strstr(r.message, "outside scene 'rooms'"));
    q.scene = "nope";
    assert_int_equal(pdc_query_run(c, &q, &r), PDC_UNKNOWN_SCENE);
    q = q_of(PDC_Q_NEAREST, pdc_cell(1, 1), pdc_cell(0, 0));
    q.radius = 5000;
    assert_int_equal(pdc_query_run(c, &q, &r), PDC_INVALID_ARGUMENT);
    assert_non_null(strstr(r.message, "nearest.radius"));
    pdc_close(c);
    pdi_assert_daemon_serves(d);
}

/* Each kind's answer carries its server time and the query's own; a
 * refused query ran nothing; a batch is timed whole (its items together). */
static void test_queries_are_timed(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    static const pdc_timed_point moves[2] = {{{0, 1, 1, 0, 0}, 0}, {{0, 3, 3, 0, 0}, 1}};
    pdc_query qs[PDC_Q_DISTANCE_TO_WALL];
    pdc_query_result r, out[PDC_Q_DISTANCE_TO_WALL];
    for (int k = PDC_Q_RAYCAST; k <= PDC_Q_DISTANCE_TO_WALL; k++) {
        pdc_query q = q_of((pdc_query_kind)k, pdc_cell(2, 2), pdc_cell(9, 6));
        q.radius = 4;
        q.seed = 5;
        q.dx = 3;
        q.moves = moves;
        q.move_count = 2;
        q.max_speed = 4;
        qs[k - 1] = q;
        uint64_t sent_ns = pdi_now_ns();
        assert_int_equal(pdc_query_run(c, &q, &r), PDC_OK);
        pdi_check_timing(pdc_last_timing(c), sent_ns, 1, "movement query");
    }
    pdc_query bad = q_of(PDC_Q_RAYCAST, pdc_cell(1, 1), pdc_cell(99, 1));
    uint64_t sent_ns = pdi_now_ns();
    assert_int_equal(pdc_query_run(c, &bad, &r), PDC_OUT_OF_BOUNDS);
    pdi_check_timing(pdc_last_timing(c), sent_ns, 0, "refused movement query");

    sent_ns = pdi_now_ns();
    assert_int_equal(pdc_batch(c, qs, PDC_Q_DISTANCE_TO_WALL, out), PDC_OK);
    pdi_check_timing(pdc_last_timing(c), sent_ns, 1, "Batch");
    pdc_close(c);
}

/* A batch answers each item as the same query alone would; a bad item
 * fails alone. */
static void test_batch_matches_singles(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    pdc_query qs[T_INFLIGHT];
    pdc_query_result batch[T_INFLIGHT], single;
    for (int i = 0; i < T_INFLIGHT - 1; i++) {
        qs[i] = q_of((pdc_query_kind)(PDC_Q_RAYCAST + (i % 7)), pdc_cell(1 + i, 1 + i % 4), pdc_cell(20 - i, 9));
        qs[i].radius = 4;
        qs[i].seed = 7 + (uint64_t)i;
        qs[i].dx = 3;
        qs[i].dy = -2;
    }
    static const pdc_timed_point moves[2] = {{{0, 1, 1, 0, 0}, 0}, {{0, 3, 3, 0, 0}, 1}};
    qs[1].moves = moves;
    qs[1].move_count = 2;
    qs[1].max_speed = 2;
    qs[T_INFLIGHT - 1] = q_of(PDC_Q_RAYCAST, pdc_cell(1, 1), pdc_cell(2, 2));
    qs[T_INFLIGHT - 1].scene = "no-such-scene";
    assert_int_equal(pdc_batch(c, qs, T_INFLIGHT, batch), PDC_OK);
    for (int i = 0; i < T_INFLIGHT; i++) {
        int st = pdc_query_run(c, &qs[i], &single);
        assert_int_equal(batch[i].status, st);
        if (st != PDC_OK) {
            assert_string_equal(batch[i].message, single.message);
            continue;
        }
        assert_int_equal(batch[i].yes, single.yes);
        assert_int_equal(batch[i].has_cell, single.has_cell);
        assert_true(batch[i].cell.x == single.cell.x && batch[i].cell.y == single.cell.y);
        assert_true(batch[i].hit.x == single.hit.x && batch[i].hit.y == single.hit.y);
        assert_true(batch[i].distance == single.distance && batch[i].first_invalid == single.first_invalid);
        assert_true(batch[i].wx == single.wx && batch[i].wy == single.wy);
    }
    assert_int_equal(batch[T_INFLIGHT - 1].status, PDC_UNKNOWN_SCENE);
    assert_int_equal(batch[0].status, PDC_OK);

    /* Each item takes an in-flight slot, so the largest batch GetLimits
     * advertises is the in-flight cap, and one item past it is refused up
     * front, naming the cap (issue 29 finding 11: the server advertised
     * 256 and refused anything over 64 as OVERLOADED, which no retry
     * could cure). */
    pdc_limits lim;
    assert_int_equal(pdc_get_limits(c, &lim), PDC_OK);
    assert_int_equal(lim.max_batch_items, T_INFLIGHT);
    pdc_query many[T_INFLIGHT + 1];
    pdc_query_result out[T_INFLIGHT + 1];
    for (int i = 0; i <= T_INFLIGHT; i++)
        many[i] = q_of(PDC_Q_REACHABLE, pdc_cell(1, 1), pdc_cell(2, 2));
    assert_int_equal(pdc_batch(c, many, T_INFLIGHT + 1, out), PDC_LIMIT_EXCEEDED);
    assert_non_null(strstr(pdc_last_error(c), "max_inflight_per_conn"));
    assert_int_equal(pdc_batch(c, many, T_INFLIGHT, out), PDC_OK);
    for (int i = 0; i < T_INFLIGHT; i++)
        assert_true(out[i].status == PDC_OK && out[i].yes);
    pdc_close(c);
}

static int setup_metrics(void **state)
{
    pdi_limits l = {0};
    l.max_inflight_per_conn = T_INFLIGHT;
    l.metrics = 1;
    return pdi_fixture_start(state, &l);
}

/* The value of sample `name` in a scrape; 0 when the series is absent (a
 * latency series appears with its first observation). */
static double t_sample(const char *text, const char *name)
{
    const size_t len = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, name, len) == 0 && p[len] == ' ')
            return strtod(p + len + 1, NULL);
    return 0.0;
}

/* What one round of requests adds to the counters of Stats and /metrics. */
enum { T_TYPES = 6, T_STATUSES = 4, T_TIMED = 2 };
static const char *const t_types[T_TYPES] = {"find_path", "raycast", "nearest", "reachable", "distance_to_wall",
                                             "batch"};
static const char *const t_statuses[T_STATUSES] = {"OK", "NO_PATH", "UNKNOWN_SCENE", "OUT_OF_BOUNDS"};
static const char *const t_timed[T_TIMED] = {"find_path", "raycast"};

typedef struct t_counts {
    uint64_t requests, paths_found, expansions;
    double metric_expansions;
    double by_type[T_TYPES][T_STATUSES];
    double timed[T_TIMED];
} t_counts;

/* Reads the counters once nothing is in flight: an answer a worker wrote
 * itself can reach the client before the loop has counted its request.
 * The Stats requests these reads take (*asked, all of them so far) are
 * not counted in out->requests. */
static void t_read_counts(const pdi_daemon *d, pdc_conn *c, uint64_t *asked, t_counts *out)
{
    pdc_server_stats st;
    for (int tries = 0;; tries++) {
        assert_true(tries < 10000);
        assert_int_equal(pdc_stats(c, &st), PDC_OK);
        ++*asked;
        if (st.in_flight == 0)
            break;
        pdi_sleep_ms(1);
    }
    out->requests = st.requests_total - *asked;
    out->paths_found = st.paths_found;
    out->expansions = st.expansions_total;
    char *text = pdi_metrics_get(d);
    assert_non_null(text);
    out->metric_expansions = t_sample(text, "pathd_expansions_total");
    char name[160];
    for (int t = 0; t < T_TYPES; t++)
        for (int s = 0; s < T_STATUSES; s++) {
            snprintf(name, sizeof name, "pathd_requests_total{type=\"%s\",status=\"%s\"}", t_types[t], t_statuses[s]);
            out->by_type[t][s] = t_sample(text, name);
        }
    for (int k = 0; k < T_TIMED; k++) {
        snprintf(name, sizeof name, "pathd_request_duration_seconds_count{kind=\"%s\",scene=\"rooms\"}", t_timed[k]);
        out->timed[k] = t_sample(text, name);
    }
    free(text);
}

/* Issue 30 item 3: every item of a Batch counts in Stats and /metrics as
 * the same request sent alone does - by its own kind, with its status and
 * expansions, its latency observed - and the Batch frame once more as
 * type "batch". The same eight requests are sent alone and then as one
 * Batch, and what each round adds is compared. (Before, Stats.paths_found
 * and the expansions stayed put for the Batch, and /metrics had one
 * type="batch" answer; a movement query sent alone was counted OK whatever
 * its answer said.) */
static void test_batch_items_counted_like_singles(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    pdc_path_req found = {0}, none = {0};
    found.scene = none.scene = "rooms";
    found.start = none.start = pdc_cell(1, 1);
    found.goal = pdc_cell(20, 10);  /* through the door: a worker's search */
    none.goal = pdc_cell(17, 4);    /* the sealed pocket */
    pdc_query qs[T_INFLIGHT];
    qs[0] = q_of(PDC_Q_FIND_PATH, pdc_cell(0, 0), pdc_cell(0, 0));
    qs[0].path = &found;
    qs[1] = q_of(PDC_Q_FIND_PATH, pdc_cell(0, 0), pdc_cell(0, 0));
    qs[1].path = &none;
    qs[2] = q_of(PDC_Q_RAYCAST, pdc_cell(1, 1), pdc_cell(10, 1));
    qs[3] = q_of(PDC_Q_NEAREST, pdc_cell(1, 1), pdc_cell(17, 4)); /* none of the pocket within 2 */
    qs[3].has_b = 1;
    qs[3].radius = 2;
    qs[4] = q_of(PDC_Q_RAYCAST, pdc_cell(1, 1), pdc_cell(2, 2));
    qs[4].scene = "no-such-scene";
    qs[5] = q_of(PDC_Q_RAYCAST, pdc_cell(1, 1), pdc_cell(99, 1));
    qs[6] = q_of(PDC_Q_REACHABLE, pdc_cell(1, 1), pdc_cell(20, 10));
    qs[7] = q_of(PDC_Q_DISTANCE_TO_WALL, pdc_cell(5, 6), pdc_cell(0, 0));
    const int want[T_INFLIGHT] = {PDC_OK, PDC_NO_PATH, PDC_OK, PDC_NO_PATH, PDC_UNKNOWN_SCENE, PDC_OUT_OF_BOUNDS,
                                  PDC_OK, PDC_OK};

    t_counts before, alone, batched;
    uint64_t asked = 0;
    t_read_counts(d, c, &asked, &before);
    for (int i = 0; i < T_INFLIGHT; i++) {
        if (qs[i].kind == PDC_Q_FIND_PATH) {
            pdc_path_result r;
            assert_int_equal(pdc_find_path(c, qs[i].path, &r), want[i]);
            pdc_path_result_free(&r);
        } else {
            pdc_query_result r;
            assert_int_equal(pdc_query_run(c, &qs[i], &r), want[i]);
            pdc_query_result_free(&r);
        }
    }
    t_read_counts(d, c, &asked, &alone);
    pdc_query_result out[T_INFLIGHT];
    assert_int_equal(pdc_batch(c, qs, T_INFLIGHT, out), PDC_OK);
    for (int i = 0; i < T_INFLIGHT; i++) {
        assert_int_equal(out[i].status, want[i]);
        pdc_query_result_free(&out[i]);
    }
    t_read_counts(d, c, &asked, &batched);
    pdc_close(c);

    /* The batch is one frame more than its items. */
    assert_int_equal(alone.requests - before.requests, T_INFLIGHT);
    assert_int_equal(batched.requests - alone.requests, T_INFLIGHT + 1);
    assert_int_equal(alone.paths_found - before.paths_found, 1);
    assert_int_equal(batched.paths_found - alone.paths_found, 1);
    assert_true(alone.expansions - before.expansions > 0);
    assert_int_equal(batched.expansions - alone.expansions, alone.expansions - before.expansions);
    assert_true(batched.metric_expansions - alone.metric_expansions == alone.metric_expansions - before.metric_expansions);
    for (int t = 0; t < T_TYPES; t++)
        for (int s = 0; s < T_STATUSES; s++) {
            double single = alone.by_type[t][s] - before.by_type[t][s];
            double batch = batched.by_type[t][s] - alone.by_type[t][s];
            double extra = strcmp(t_types[t], "batch") == 0 && strcmp(t_statuses[s], "OK") == 0;
            if (batch != single + extra)
                fail_msg("pathd_requests_total{type=\"%s\",status=\"%s\"}: +%.0f alone, +%.0f in a Batch", t_types[t],
                         t_statuses[s], single, batch);
        }
    for (int k = 0; k < T_TIMED; k++) {
        double single = alone.timed[k] - before.timed[k];
        double batch = batched.timed[k] - alone.timed[k];
        if (single == 0 || batch != single)
            fail_msg("latency of %s on rooms observed %.0f times alone, %.0f in a Batch", t_timed[k], single, batch);
    }
}

static void test_pathctl_batch(void **state)
{
    pdi_daemon *d = *state;
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "printf 'raycast --scene rooms --from 1,1 --to 20,1\\nnonsense\\nreachable --scene rooms --from 1,1 "
             "--to 17,4\\nclearance --scene rooms --at 5,6\\n' | %s --server %s --json batch",
             pdi_pathctl_binary(), d->addr);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char lines[4][512];
    int n = 0;
    while (n < 4 && fgets(lines[n], sizeof lines[n], p))
        n++;
    char extra[64];
    assert_null(fgets(extra, sizeof extra, p));
    int rc = pclose(p);
    assert_int_equal(n, 4);
    assert_non_null(strstr(lines[0], "\"clear\":false"));
    assert_non_null(strstr(lines[0], "\"hit\":[11,1]"));
    assert_non_null(strstr(lines[1], "INVALID_ARGUMENT"));
    assert_non_null(strstr(lines[2], "\"reachable\":false"));
    assert_non_null(strstr(lines[3], "\"distance\":2"));
    assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);

    /* More lines than the largest batch the server admits (GetLimits'
     * max_batch_items, the in-flight cap): pathctl sends them in frames of
     * that size, and every line is answered. */
    enum { MANY = 2 * T_INFLIGHT + 3 };
    snprintf(cmd, sizeof cmd, "for i in $(seq %d); do echo 'reachable --scene rooms --from 1,1 --to 20,10'; done | "
             "%s --server %s --json batch", MANY, pdi_pathctl_binary(), d->addr);
    p = popen(cmd, "r");
    assert_non_null(p);
    n = 0;
    while (fgets(lines[0], sizeof lines[0], p)) {
        if (!strstr(lines[0], "\"reachable\":true"))
            fail_msg("line %d: %s", n, lines[0]);
        n++;
    }
    rc = pclose(p);
    assert_int_equal(n, MANY);
    assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_kind),
        cmocka_unit_test(test_queries_are_timed),
        cmocka_unit_test(test_batch_matches_singles),
        cmocka_unit_test_setup_teardown(test_batch_items_counted_like_singles, setup_metrics, teardown),
        cmocka_unit_test(test_pathctl_batch),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
