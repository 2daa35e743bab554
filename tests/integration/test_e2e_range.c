/*
 * test_e2e_range.c - FindPath to within range of a goal (optionally in line
 * of sight), to the nearest of several goals, and FindPath items inside a
 * Batch, through the daemon (issue 11 item 8), on the harness's "rooms"
 * scene (24x12, walls at x = 11 with a door at (11,5), a sealed pocket at
 * (17,4)) and its serpent.
 *
 * Ranges: for many starts, goals (wall cells among them: an enemy stands on
 * a blocked cell) and ranges, with and without line of sight, the answer's
 * cost must equal the least Dijkstra cost (the harness's oracle) over every
 * qualifying cell - within range by Euclidean distance between centres, and
 * seen through the daemon's own Raycast when asked - and the path must be
 * legal and end on such a cell. Goal sets: the goal reached is the cheapest
 * and goal_index names it. Batch: FindPath items answer exactly as the same
 * requests alone, a path over the item cap is that item's FRAME_TOO_LARGE,
 * and too many FindPath items refuse the batch. Bad combinations get
 * INVALID_ARGUMENT naming the field. pathctl's --range, --los and --goals.
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
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

#define T_EPS 1e-6

static int setup(void **state)
{
    return pdi_fixture_start(state, NULL);
}

static int teardown(void **state)
{
    return pdi_fixture_stop(state);
}

static pdc_path_req t_req(pdc_point start, pdc_point goal, double range, int los)
{
    pdc_path_req r;
    memset(&r, 0, sizeof r);
    r.scene = "rooms";
    r.start = start;
    r.goal = goal;
    r.range = range;
    r.line_of_sight = los;
    return r;
}

/* Does cell (x, y) qualify for goal g: the reference's own test. */
static int t_qualifies(pdc_conn *c, int32_t x, int32_t y, pdc_xy g, double range, int los)
{
    double dx = x - g.x, dy = y - g.y;
    if (dx * dx + dy * dy > range * range)
        return 0;
    if (!los || (x == g.x && y == g.y))
        return 1;
    pdc_query q;
    memset(&q, 0, sizeof q);
    q.kind = PDC_Q_RAYCAST;
    q.scene = "rooms";
    q.a = pdc_cell(x, y);
    q.b = pdc_cell(g.x, g.y);
    pdc_query_result r;
    assert_int_equal(pdc_query_run(c, &q, &r), PDC_OK);
    return r.yes || (r.has_hit && r.hit.x == g.x && r.hit.y == g.y);
}

/* Least oracle cost from s over cells qualifying for any goal; -1 when none
 * is reachable. *best_goal: the lowest goal index that cheapest end serves
 * is not unique in general, so only the cost is compared. */
static double t_brute(pdc_conn *c, const pdi_grid *g, pdc_xy s, const pdc_xy *goals, size_t n, double range,
                      int los)
{
    double best = -1;
    for (int32_t y = 0; y < g->height; y++)
        for (int32_t x = 0; x < g->width; x++) {
            if (!pdi_grid_open(g, x, y))
                continue;
            int q = 0;
            for (size_t i = 0; i < n && !q; i++)
                q = range > 0 ? t_qualifies(c, x, y, goals[i], range, los) : (x == goals[i].x && y == goals[i].y);
            if (!q)
                continue;
            double d = pdi_grid_dijkstra(g, s.x, s.y, x, y);
            if (d >= 0 && (best < 0 || d < best))
                best = d;
        }
    return best;
}

static void t_check_answer(pdc_conn *c, const pdi_grid *g, const pdc_path_req *req, const pdc_path_result *res,
                           const pdc_xy *goals, size_t n, double want)
{
    if (want < 0) {
        assert_int_equal(res->status, PDC_NO_PATH);
        return;
    }
    if (res->status != PDC_OK)
        fail_msg("start (%d,%d) range %g los %d: status %d (%s), oracle cost %g", req->start.x, req->start.y,
                 req->range, req->line_of_sight, res->status, res->message, want);
    if (fabs(res->cost - want) > T_EPS)
        fail_msg("start (%d,%d) goal (%d,%d) range %g los %d: cost %.9f, oracle %.9f", req->start.x, req->start.y,
                 goals[0].x, goals[0].y, req->range, req->line_of_sight, res->cost, want);
    double walked;
    char why[160];
    if (pdi_grid_path_cost(g, res->waypoints, res->count, &walked, why, sizeof why) != 0)
        fail_msg("illegal path: %s", why);
    assert_true(fabs(walked - res->cost) < T_EPS);
    assert_false(res->has_goal_used); /* ending in range is not a substitute */
    assert_true(res->goal_index < n);
    const pdc_waypoint *end = &res->waypoints[res->count - 1];
    pdc_xy gi = goals[res->goal_index];
    if (req->range > 0)
        assert_true(t_qualifies(c, end->x, end->y, gi, req->range, req->line_of_sight));
    else
        assert_true(end->x == gi.x && end->y == gi.y);
}

static void test_range_against_oracle(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    pdi_grid g;
    assert_int_equal(pdi_grid_load_rooms(&g), 0);
    const pdc_xy starts[] = { { 1, 1 }, { 9, 9 }, { 20, 10 } };
    /* Open goals, wall cells (11,2) and (16,4), and the sealed pocket (17,4). */
    const pdc_xy goals[] = { { 15, 2 }, { 11, 2 }, { 16, 4 }, { 17, 4 }, { 4, 10 }, { 22, 6 } };
    const double ranges[] = { 1, 2.5, 4 };
    int answered = 0, blocked_goal = 0;
    for (size_t si = 0; si < sizeof starts / sizeof starts[0]; si++)
        for (size_t gi = 0; gi < sizeof goals / sizeof goals[0]; gi++)
            for (size_t ri = 0; ri < sizeof ranges / sizeof ranges[0]; ri++)
                for (int los = 0; los <= 1; los++) {
                    pdc_path_req req = t_req(pdc_cell(starts[si].x, starts[si].y),
                                             pdc_cell(goals[gi].x, goals[gi].y), ranges[ri], los);
                    pdc_path_result res;
                    pdc_find_path(c, &req, &res);
                    double want = t_brute(c, &g, starts[si], &goals[gi], 1, ranges[ri], los);
                    t_check_answer(c, &g, &req, &res, &goals[gi], 1, want);
                    answered += want >= 0;
                    blocked_goal += want >= 0 && !pdi_grid_open(&g, goals[gi].x, goals[gi].y);
                    pdc_path_result_free(&res);
                }
    assert_true(answered > 60);
    assert_true(blocked_goal > 10);
    pdi_grid_free(&g);
    pdc_close(c);
}

static void test_goal_sets(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    pdi_grid g;
    assert_int_equal(pdi_grid_load_rooms(&g), 0);
    /* The pocket first (unreachable), then two exits; from (9,2) the door
     * makes (20,2) dearer than (2,10) although it is nearer in a line. */
    const pdc_xy goals[] = { { 17, 4 }, { 20, 2 }, { 2, 10 } };
    pdc_point pts[3];
    for (int i = 0; i < 3; i++)
        pts[i] = pdc_cell(goals[i].x, goals[i].y);
    for (double range = 0; range <= 3; range += 1.5) {
        pdc_path_req req = t_req(pdc_cell(9, 2), pdc_cell(0, 0), range, 0);
        req.goals = pts;
        req.goal_count = 3;
        pdc_path_result res;
        pdc_find_path(c, &req, &res);
        t_check_answer(c, &g, &req, &res, goals, 3, t_brute(c, &g, (pdc_xy){ 9, 2 }, goals, 3, range, 0));
        if (range == 0)
            assert_int_equal(res.goal_index, 2);
        pdc_path_result_free(&res);
    }
    /* Only the pocket: NO_PATH decided without a search. */
    pdc_path_req req = t_req(pdc_cell(1, 1), pdc_cell(0, 0), 0, 0);
    req.goals = pts;
    req.goal_count = 1;
    pdc_path_result res;
    assert_int_equal(pdc_find_path(c, &req, &res), PDC_NO_PATH);
    assert_int_equal(res.expansions, 0);
    pdc_path_result_free(&res);
    /* Range 1 around the pocket holds only walls: NO_PATH at once, or with
     * GOAL_NEAREST the reachable cell nearest the pocket (PARTIAL). Range 2
     * reaches cells outside its walls. */
    req = t_req(pdc_cell(1, 1), pdc_cell(17, 4), 1, 0);
    assert_int_equal(pdc_find_path(c, &req, &res), PDC_NO_PATH);
    assert_int_equal(res.expansions, 0);
    pdc_path_result_free(&res);
    req.goal_mode = PDC_GOAL_NEAREST;
    assert_int_equal(pdc_find_path(c, &req, &res), PDC_PARTIAL);
    assert_true(res.has_goal_used && res.count > 0);
    pdc_xy end = { res.waypoints[res.count - 1].x, res.waypoints[res.count - 1].y };
    assert_true(end.x == res.goal_used.x && end.y == res.goal_used.y);
    assert_true((end.x - 17) * (end.x - 17) + (end.y - 4) * (end.y - 4) == 4); /* (15,4) or (17,2), (17,6), (19,4) */
    pdc_path_result_free(&res);
    req = t_req(pdc_cell(1, 1), pdc_cell(17, 4), 2, 0);
    assert_int_equal(pdc_find_path(c, &req, &res), PDC_OK);
    assert_false(res.has_goal_used);
    pdc_path_result_free(&res);
    /* The pocket's walls hide it from every cell in range: only the search
     * finds that out (labels know nothing of sight). */
    req.line_of_sight = 1;
    assert_int_equal(pdc_find_path(c, &req, &res), PDC_NO_PATH);
    assert_true(res.expansions > 0);
    pdc_path_result_free(&res);

    /* Unit 2 (which fits through neither 1-wide opening) and world points:
     * the second goal, cell (2,6), is the nearer. */
    req = t_req(pdc_world(-10.5 + 1.25, 4 + 1.25), pdc_cell(0, 0), 2, 0);
    req.unit_size = 2;
    pdc_point two[2] = { pdc_cell(8, 6), pdc_world(-10.5 + 2 * 0.5 + 0.25, 4 + 6 * 0.5 + 0.25) };
    req.goals = two;
    req.goal_count = 2;
    assert_int_equal(pdc_find_path(c, &req, &res), PDC_OK);
    assert_int_equal(res.goal_index, 1);
    pdc_path_result_free(&res);
    pdi_grid_free(&g);
    pdc_close(c);
}

static void test_bad_combinations(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    pdc_path_result res;
    pdc_point pts[2] = { pdc_cell(20, 2), pdc_cell(2, 10) };

    /* The client refuses these itself; the raw frames below reach the server. */
    pdc_path_req req = t_req(pdc_cell(1, 1), pdc_cell(5, 5), 0, 1);
    assert_int_equal(pdc_find_path(c, &req, &res), PDC_ERR_ARG);

    req = t_req(pdc_cell(1, 1), pdc_cell(5, 5), 0, 0);
    req.goals = pts;
    req.goal_count = 2;
    req.goal_mode = PDC_GOAL_NEAREST;
    assert_int_equal(pdc_find_path(c, &req, &res), PDC_INVALID_ARGUMENT);
    assert_non_null(strstr(res.message, "find_path.goal_mode"));
    pdc_path_result_free(&res);

    pts[1] = pdc_cell(40, 2);
    req.goal_mode = PDC_GOAL_EXACT;
    assert_int_equal(pdc_find_path(c, &req, &res), PDC_OUT_OF_BOUNDS);
    assert_non_null(strstr(res.message, "find_path.goals[1]"));
    pdc_path_result_free(&res);

    /* Raw: range over the cap, line of sight without range. */
    int fd = pdi_raw_connect(d->port);
    pdi_fp_msg m;
    pdi_fp_init(&m, 7, "rooms", 1, 1, 5, 5);
    m.fp.range = 1000;
    assert_int_equal(pdi_raw_send_request(fd, &m.req), 0);
    Pathd__V1__Response *resp = pdi_raw_recv(fd, 5000, NULL);
    assert_non_null(resp);
    assert_int_equal(resp->status, PATHD__V1__STATUS__INVALID_ARGUMENT);
    assert_non_null(strstr(resp->error->message, "find_path.range"));
    pathd__v1__response__free_unpacked(resp, NULL);
    m.fp.range = 0;
    m.fp.line_of_sight = 1;
    assert_int_equal(pdi_raw_send_request(fd, &m.req), 0);
    resp = pdi_raw_recv(fd, 5000, NULL);
    assert_non_null(resp);
    assert_int_equal(resp->status, PATHD__V1__STATUS__INVALID_ARGUMENT);
    assert_non_null(strstr(resp->error->message, "find_path.line_of_sight"));
    pathd__v1__response__free_unpacked(resp, NULL);
    close(fd);
    pdi_assert_daemon_serves(d);
    pdc_close(c);
}

static void t_same_path(int item, const pdc_path_result *a, const pdc_path_result *b)
{
    if (a->status != b->status || a->count != b->count || a->has_goal_used != b->has_goal_used ||
        a->has_start_used != b->has_start_used)
        fail_msg("item %d: batch status %d count %zu goal_used %d start_used %d; alone %d %zu %d %d", item,
                 a->status, a->count, a->has_goal_used, a->has_start_used, b->status, b->count, b->has_goal_used,
                 b->has_start_used);
    assert_int_equal(a->count, b->count);
    assert_true(fabs(a->cost - b->cost) < T_EPS);
    assert_int_equal(a->goal_index, b->goal_index);
    assert_int_equal(a->has_goal_used, b->has_goal_used);
    assert_int_equal(a->has_start_used, b->has_start_used);
    assert_int_equal(a->scene_version, b->scene_version);
    for (size_t i = 0; i < a->count; i++) {
        assert_int_equal(a->waypoints[i].x, b->waypoints[i].x);
        assert_int_equal(a->waypoints[i].y, b->waypoints[i].y);
        assert_true(fabs(a->waypoints[i].wx - b->waypoints[i].wx) < 1e-9);
        assert_true(fabs(a->waypoints[i].t - b->waypoints[i].t) < 1e-9);
    }
}

static void test_batch_paths_equal_singles(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    pdc_point pts[3] = { pdc_cell(17, 4), pdc_cell(20, 2), pdc_cell(2, 10) };
    enum { N = 8 };
    pdc_path_req reqs[N];
    reqs[0] = t_req(pdc_cell(1, 1), pdc_cell(22, 10), 0, 0);           /* plain */
    reqs[1] = t_req(pdc_cell(1, 1), pdc_cell(11, 2), 3, 1);            /* range + LOS on a wall */
    reqs[2] = t_req(pdc_cell(9, 2), pdc_cell(0, 0), 0, 0);             /* goals */
    reqs[2].goals = pts;
    reqs[2].goal_count = 3;
    reqs[3] = t_req(pdc_cell(1, 1), pdc_cell(20, 9), 2, 0);            /* unit 2, corners, times */
    reqs[3].unit_size = 2;
    reqs[3].style = PDC_STYLE_CORNERS;
    reqs[3].speed = 2;
    reqs[4] = t_req(pdc_cell(11, 1), pdc_cell(5, 5), 0, 0);            /* blocked start */
    reqs[5] = t_req(pdc_cell(1, 1), pdc_cell(17, 4), 0, 0);            /* the pocket: NO_PATH */
    reqs[6] = t_req(pdc_cell(1, 1), pdc_cell(17, 4), 0, 0);            /* NEAREST: PARTIAL */
    reqs[6].goal_mode = PDC_GOAL_NEAREST;
    reqs[7] = t_req(pdc_cell(1, 1), pdc_cell(22, 10), 2, 0);           /* 4-connected, smooth */
    reqs[7].connectivity = 4;
    reqs[7].style = PDC_STYLE_SMOOTH;
    pdc_query q[N + 1];
    memset(q, 0, sizeof q);
    for (int i = 0; i < N; i++) {
        q[i].kind = PDC_Q_FIND_PATH;
        q[i].path = &reqs[i];
    }
    /* A movement query among them still answers as before. */
    q[N].kind = PDC_Q_REACHABLE;
    q[N].scene = "rooms";
    q[N].a = pdc_cell(1, 1);
    q[N].b = pdc_cell(20, 10);
    pdc_query_result out[N + 1];
    assert_int_equal(pdc_batch(c, q, N + 1, out), PDC_OK);
    for (int i = 0; i < N; i++) {
        pdc_path_result alone;
        pdc_find_path(c, &reqs[i], &alone);
        t_same_path(i, &out[i].path, &alone);
        assert_int_equal(out[i].status, alone.status);
        pdc_path_result_free(&alone);
    }
    assert_int_equal(out[4].status, PDC_START_BLOCKED);
    assert_int_equal(out[5].status, PDC_NO_PATH);
    assert_int_equal(out[6].status, PDC_PARTIAL);
    assert_true(out[6].path.count > 0 && out[6].path.has_goal_used);
    assert_int_equal(out[N].status, PDC_OK);
    assert_true(out[N].yes);
    for (int i = 0; i <= N; i++)
        pdc_query_result_free(&out[i]);
    pdc_close(c);
}

static void test_batch_path_caps(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    /* Along the serpent's first corridor: over a thousand cells, over the
     * item cap; its corners (the two ends) fit. */
    pdc_path_req far;
    memset(&far, 0, sizeof far);
    far.scene = "serpent";
    far.start = pdc_cell(0, 0);
    far.goal = pdc_cell(PDI_SERPENT_SIZE - 1, 0);
    pdc_path_req corners = far;
    corners.style = PDC_STYLE_CORNERS;
    pdc_query q[2];
    memset(q, 0, sizeof q);
    q[0].kind = q[1].kind = PDC_Q_FIND_PATH;
    q[0].path = &far;
    q[1].path = &corners;
    pdc_query_result out[2];
    assert_int_equal(pdc_batch(c, q, 2, out), PDC_OK);
    pdc_path_result alone;
    assert_int_equal(pdc_find_path(c, &far, &alone), PDC_OK);
    assert_true(alone.count > PDC_MAX_BATCH_PATH_WAYPOINTS);
    pdc_path_result_free(&alone);
    assert_int_equal(out[0].status, PDC_FRAME_TOO_LARGE);
    assert_non_null(strstr(out[0].message, "at most 512"));
    assert_int_equal(out[1].status, PDC_OK);
    assert_true(out[1].path.count > 1 && out[1].path.count <= PDC_MAX_BATCH_PATH_WAYPOINTS);
    pdc_query_result_free(&out[0]);
    pdc_query_result_free(&out[1]);

    /* One FindPath item too many refuses the whole batch, naming the limit. */
    pdc_path_req small = t_req(pdc_cell(1, 1), pdc_cell(3, 3), 0, 0);
    pdc_query many[PDC_MAX_BATCH_PATHS + 1];
    pdc_query_result many_out[PDC_MAX_BATCH_PATHS + 1];
    memset(many, 0, sizeof many);
    for (int i = 0; i <= PDC_MAX_BATCH_PATHS; i++) {
        many[i].kind = PDC_Q_FIND_PATH;
        many[i].path = &small;
    }
    assert_int_equal(pdc_batch(c, many, PDC_MAX_BATCH_PATHS + 1, many_out), PDC_INVALID_ARGUMENT);
    assert_int_equal(pdc_batch(c, many, PDC_MAX_BATCH_PATHS, many_out), PDC_OK);
    for (int i = 0; i < PDC_MAX_BATCH_PATHS; i++) {
        assert_int_equal(many_out[i].status, PDC_OK);
        pdc_query_result_free(&many_out[i]);
    }
    pdc_close(c);
}

/* Runs pathctl with args against the daemon; its stdout in out, exit code back. */
static int t_pathctl(const pdi_daemon *d, const char *args, char *out, size_t cap)
{
    char cmd[768];
    snprintf(cmd, sizeof cmd, "%s --server %s %s 2>/dev/null", pdi_pathctl_binary(), d->addr, args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int rc = pclose(p);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void test_pathctl_range_and_goals(void **state)
{
    pdi_daemon *d = *state;
    char out[8192];
    /* Two cells short of a wall cell: the path stops at (9,2), 2 cells away. */
    assert_int_equal(t_pathctl(d, "--json path --scene rooms --from 1,2 --to 11,2 --range 2 --los", out, sizeof out), 0);
    assert_non_null(strstr(out, "\"status\":\"OK\""));
    assert_non_null(strstr(out, "[9,2]]"));
    assert_non_null(strstr(out, "\"goal_used\":null"));
    assert_int_equal(t_pathctl(d, "--json path --scene rooms --from 9,2 --goals \"17,4;20,2;2,10\"", out, sizeof out), 0);
    assert_non_null(strstr(out, "\"goal_index\":2"));
    assert_non_null(strstr(out, "[2,10]]"));
    assert_int_equal(t_pathctl(d, "path --scene rooms --from 9,2 --goals \"17,4;20,2\"", out, sizeof out), 0);
    assert_non_null(strstr(out, "goal_index 1"));
    /* Usage errors: --los without --range, both --to and --goals. */
    assert_int_equal(t_pathctl(d, "path --scene rooms --from 1,1 --to 5,5 --los", out, sizeof out), 2);
    assert_int_equal(t_pathctl(d, "path --scene rooms --from 1,1 --to 5,5 --goals 3,3", out, sizeof out), 2);
    assert_int_equal(t_pathctl(d, "route --from rooms:1,1 --to rooms:5,5 --range 2", out, sizeof out), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_range_against_oracle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_goal_sets, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_combinations, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_paths_equal_singles, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_path_caps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pathctl_range_and_goals, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
