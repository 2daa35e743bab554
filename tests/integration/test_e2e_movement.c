/*
 * test_e2e_movement.c - the movement queries and Batch through the daemon
 * (issue 11 part 2), on the harness's "rooms" scene (24x12, origin
 * (-10.5, 4), cell size 0.5; walls at x = 11 with a door at (11,5), a
 * sealed pocket at (17,4)).
 *
 * Each kind answers through the C client as the query layer computes it
 * (hand-checked cells on this map), a Batch answers every item exactly as
 * the same query sent alone, a bad item fails only itself, a batch holds
 * one in-flight slot per item (one past the limit is OVERLOADED), and
 * pathctl's batch command prints one JSON object per input line, in order.
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

    /* One item past the in-flight limit: the whole batch is refused. */
    pdc_query many[T_INFLIGHT + 1];
    pdc_query_result out[T_INFLIGHT + 1];
    for (int i = 0; i <= T_INFLIGHT; i++)
        many[i] = q_of(PDC_Q_REACHABLE, pdc_cell(1, 1), pdc_cell(2, 2));
    assert_int_equal(pdc_batch(c, many, T_INFLIGHT + 1, out), PDC_OVERLOADED);
    assert_int_equal(pdc_batch(c, many, T_INFLIGHT, out), PDC_OK);
    for (int i = 0; i < T_INFLIGHT; i++)
        assert_true(out[i].status == PDC_OK && out[i].yes);
    pdc_close(c);
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
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_kind),
        cmocka_unit_test(test_queries_are_timed),
        cmocka_unit_test(test_batch_matches_singles),
        cmocka_unit_test(test_pathctl_batch),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
