/*
 * test_e2e_waypoints.c - waypoint styles and timing through the real daemon
 * (issue 4).
 *
 * For the same query asked as every cell, as corners and smoothed, the test
 * checks what docs/PROTOCOL.md promises, with its own references:
 *  - corners are exactly the cell path's start, direction changes and goal;
 *  - a smoothed path keeps both ends, has fewer waypoints, every straight
 *    segment is clear for the whole unit (a supercover walk over the anchors
 *    the unit fits on, written in the harness), it is never longer than the
 *    cell path, and it is the direct line when start and goal see each other;
 *  - with speed S and start time T, t[0] = T and every step of a cell path
 *    takes length x cost entered / (S / cell_size), diagonals sqrt(2) longer.
 *  - on ground with terrain costs, a smoothed path must not cost more than
 *    the optimal cell path it was pulled from: by the server's own timing
 *    (length x mean cost entered per segment) it must not arrive later.
 * Scenes: the harness's rooms (cell size 0.5, a cost-3 patch, units 1 and 2),
 * den520d, e2e4_units (a unit-2 route with bends) and the demo town (grass
 * cost 2, a market cost 3).
 */
#include <math.h>
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

#define T_EPS 1e-6
/* den520d scenarios smoothed on top of the hand-made queries. */
#define T_DEN_SCENARIOS 12
/* Times are sums of a few hundred terms at most: this is far above their
 * rounding error and far below any real mistake (one step is >= 0.01 s). */
#define T_TIME_EPS 1e-9
/* The rooms scene's cell size (world units per cell), see harness.h. */
#define T_ROOMS_CELL 0.5

static int setup(void **state)
{
    pdi_limits l = {0};
    l.extra_scenes_json = ",\n    {\"name\": \"units\", \"map\": \"" PD_TEST_DATA_DIR "/e2e4_units.txt\","
                          " \"format\": \"ascii\", \"unit_sizes\": [1, 2, 3]}"
                          ",\n    {\"name\": \"town\", \"map\": \"" PD_SOURCE_DIR "/config/scenes/town.txt\","
                          " \"format\": \"ascii\"}";
    return pdi_fixture_start(state, &l);
}

typedef struct t_query {
    const char *scene;
    uint32_t unit;
    int32_t sx, sy, gx, gy;
} t_query;

static const t_query t_queries[] = {
    {"rooms", 1, 1, 1, 22, 10},  {"rooms", 1, 1, 9, 20, 1}, {"rooms", 1, 2, 4, 9, 6},
    {"rooms", 2, 1, 1, 9, 6},    {"rooms", 2, 1, 6, 8, 1},  {"units", 2, 2, 8, 25, 8},
    {"units", 1, 2, 13, 27, 5},  {"units", 3, 1, 5, 4, 12},
};

static int t_style_path(pdc_conn *c, const t_query *q, pdc_style style, double speed, double t0,
                        pdc_path_result *r)
{
    pdc_path_req req = {0};
    req.scene = q->scene;
    req.unit_size = q->unit;
    req.start = pdc_cell(q->sx, q->sy);
    req.goal = pdc_cell(q->gx, q->gy);
    req.style = style;
    req.speed = speed;
    req.start_time = t0;
    memset(r, 0, sizeof *r);
    return pdc_find_path(c, &req, r);
}

/* t_style_path that must answer OK; names the query when it does not. */
static void t_must(pdc_conn *c, const t_query *q, pdc_style style, double speed, double t0, pdc_path_result *r)
{
    int st = t_style_path(c, q, style, speed, t0, r);
    if (st != PDC_OK)
        fail_msg("%s unit %u (%d,%d)->(%d,%d) style %d: %s (%s)", q->scene, q->unit, q->sx, q->sy, q->gx, q->gy,
                 (int)style, pdc_status_name(st), r->message);
}

static void t_load(const char *scene, pdi_grid *g)
{
    if (strcmp(scene, "rooms") == 0)
        assert_int_equal(pdi_grid_load_rooms(g), 0);
    else if (strcmp(scene, "den520d") == 0)
        assert_int_equal(pdi_grid_load_den520d(g), 0);
    else
        assert_int_equal(pdi_grid_load_ascii(g, PD_TEST_DATA_DIR "/e2e4_units.txt"), 0);
}

/* The smoothing promises for one query. Returns 1 when start and goal see
 * each other (so the direct line was required). */
static int t_check_smooth(pdc_conn *c, const pdi_grid *g, const t_query *q)
{
    pdi_rules rules = {.unit = q->unit};
    pdc_path_result cells, smooth;
    t_must(c, q, PDC_STYLE_CELLS, 0, 0, &cells);
    t_must(c, q, PDC_STYLE_SMOOTH, 0, 0, &smooth);
    assert_true(smooth.count >= 2 || cells.count == 1);
    if (cells.count > 2 && smooth.count >= cells.count)
        fail_msg("%s unit %u (%d,%d)->(%d,%d): smoothing kept %zu of %zu waypoints", q->scene, q->unit, q->sx,
                 q->sy, q->gx, q->gy, smooth.count, cells.count);
    assert_int_equal(smooth.waypoints[0].x, q->sx);
    assert_int_equal(smooth.waypoints[0].y, q->sy);
    assert_int_equal(smooth.waypoints[smooth.count - 1].x, q->gx);
    assert_int_equal(smooth.waypoints[smooth.count - 1].y, q->gy);
    for (size_t i = 1; i < smooth.count; i++) {
        pdc_xy a = {smooth.waypoints[i - 1].x, smooth.waypoints[i - 1].y};
        pdc_xy b = {smooth.waypoints[i].x, smooth.waypoints[i].y};
        if (!pdi_segment_clear(g, &rules, a, b))
            fail_msg("%s unit %u: smoothed segment (%d,%d)->(%d,%d) is not clear for the unit", q->scene,
                     q->unit, a.x, a.y, b.x, b.y);
    }
    /* Length and the direct line are promises on uniform ground; with
     * terrain costs smoothing promises "never costlier" instead, which
     * test_smooth_never_costlier_on_weighted_ground checks. */
    int uniform = 1;
    for (size_t i = 0; i < (size_t)g->width * (size_t)g->height; i++)
        uniform &= g->cost[i] <= 1;
    double lc = pdi_polyline_length(cells.waypoints, cells.count);
    double ls = pdi_polyline_length(smooth.waypoints, smooth.count);
    if (uniform && ls > lc + T_EPS)
        fail_msg("%s unit %u (%d,%d)->(%d,%d): smoothed length %.6f > cell path %.6f", q->scene, q->unit, q->sx,
                 q->sy, q->gx, q->gy, ls, lc);
    int sees = pdi_segment_clear(g, &rules, (pdc_xy){q->sx, q->sy}, (pdc_xy){q->gx, q->gy});
    if (sees && uniform)
        assert_int_equal(smooth.count, 2);
    pdc_path_result_free(&cells);
    pdc_path_result_free(&smooth);
    return sees;
}

static void test_smooth_paths(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    size_t direct = 0;
    for (size_t i = 0; i < sizeof t_queries / sizeof t_queries[0]; i++) {
        pdi_grid g;
        t_load(t_queries[i].scene, &g);
        direct += (size_t)t_check_smooth(c, &g, &t_queries[i]);
        pdi_grid_free(&g);
    }
    /* A hand-made query has start and goal in sight of each other. */
    assert_true(direct >= 1);

    pdi_scenario sc[T_DEN_SCENARIOS];
    assert_int_equal(pdi_load_scenarios(sc, T_DEN_SCENARIOS), T_DEN_SCENARIOS);
    pdi_grid den;
    t_load("den520d", &den);
    for (size_t i = 0; i < T_DEN_SCENARIOS; i++) {
        t_query q = {"den520d", 1, sc[i].sx, sc[i].sy, sc[i].gx, sc[i].gy};
        t_check_smooth(c, &den, &q);
    }
    pdi_grid_free(&den);
    pdc_close(c);
}

/* Corners are the cell path's turning points, computed here. */
static void test_corners_are_turns(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    for (size_t i = 0; i < sizeof t_queries / sizeof t_queries[0]; i++) {
        const t_query *q = &t_queries[i];
        pdc_path_result cells, corners;
        t_must(c, q, PDC_STYLE_CELLS, 0, 0, &cells);
        t_must(c, q, PDC_STYLE_CORNERS, 0, 0, &corners);
        size_t k = 0;
        for (size_t j = 0; j < cells.count; j++) {
            int turn = j == 0 || j + 1 == cells.count;
            if (!turn) {
                int32_t dx0 = cells.waypoints[j].x - cells.waypoints[j - 1].x;
                int32_t dy0 = cells.waypoints[j].y - cells.waypoints[j - 1].y;
                int32_t dx1 = cells.waypoints[j + 1].x - cells.waypoints[j].x;
                int32_t dy1 = cells.waypoints[j + 1].y - cells.waypoints[j].y;
                turn = dx0 != dx1 || dy0 != dy1;
            }
            if (!turn)
                continue;
            if (k >= corners.count || corners.waypoints[k].x != cells.waypoints[j].x ||
                corners.waypoints[k].y != cells.waypoints[j].y)
                fail_msg("%s unit %u: corner %zu should be cell path point %zu (%d,%d)", q->scene, q->unit, k, j,
                         cells.waypoints[j].x, cells.waypoints[j].y);
            k++;
        }
        assert_int_equal(k, corners.count);
        assert_true(fabs(cells.cost - corners.cost) <= T_EPS);
        pdc_path_result_free(&cells);
        pdc_path_result_free(&corners);
    }
    pdc_close(c);
}

/* Arrival times on cell paths: each step's time from its length and the
 * cost it enters, checked through the cost-3 patch and for a 2x2 unit. */
static void test_timing(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    pdi_grid g;
    assert_int_equal(pdi_grid_load_rooms(&g), 0);
    const double speed = 2.0, t0 = 10.0, cells_per_s = speed / T_ROOMS_CELL;
    /* Into and out of the cost-3 patch at x 3..5, y 3..5, with diagonals
     * (a 2x2 unit at (2,2) already overlaps it). */
    const t_query qs[] = {{"rooms", 1, 1, 1, 4, 4}, {"rooms", 2, 9, 1, 2, 2}, {"rooms", 1, 4, 5, 22, 10}};
    size_t weighted_steps = 0, diagonal_steps = 0;
    for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++) {
        const t_query *q = &qs[i];
        pdc_path_result r;
        t_must(c, q, PDC_STYLE_CELLS, speed, t0, &r);
        assert_true(r.count >= 2);
        assert_true(fabs(r.waypoints[0].t - t0) <= T_TIME_EPS);
        for (size_t j = 1; j < r.count; j++) {
            int diag = r.waypoints[j].x != r.waypoints[j - 1].x && r.waypoints[j].y != r.waypoints[j - 1].y;
            double cost = pdi_unit_cost(&g, q->unit, r.waypoints[j].x, r.waypoints[j].y);
            double want = (diag ? sqrt(2.0) : 1.0) * cost / cells_per_s;
            double got = r.waypoints[j].t - r.waypoints[j - 1].t;
            if (fabs(got - want) > T_TIME_EPS)
                fail_msg("unit %u step %zu (%d,%d)->(%d,%d): took %.9f s, expected %.9f", q->unit, j,
                         r.waypoints[j - 1].x, r.waypoints[j - 1].y, r.waypoints[j].x, r.waypoints[j].y, got, want);
            weighted_steps += cost > 1;
            diagonal_steps += diag;
        }
        /* So the goal is reached at T + cost x cell_size / speed. */
        assert_true(fabs(r.waypoints[r.count - 1].t - (t0 + r.cost * T_ROOMS_CELL / speed)) <= T_TIME_EPS);
        pdc_path_result_free(&r);

        /* Without a speed, no times. */
        t_must(c, q, PDC_STYLE_CELLS, 0, t0, &r);
        for (size_t j = 0; j < r.count; j++)
            assert_true(r.waypoints[j].t == 0.0);
        pdc_path_result_free(&r);
    }
    assert_true(weighted_steps > 0);
    assert_true(diagonal_steps > 0);

    /* On uniform ground a corner arrives when the same cell does in the
     * every-cell answer, and a smoothed segment takes length / speed. */
    pdi_scenario sc[4];
    assert_int_equal(pdi_load_scenarios(sc, 4), 4);
    for (size_t i = 1; i < 4; i++) {
        t_query q = {"den520d", 1, sc[i].sx, sc[i].sy, sc[i].gx, sc[i].gy};
        pdc_path_result cells, corners, smooth;
        t_must(c, &q, PDC_STYLE_CELLS, speed, t0, &cells);
        t_must(c, &q, PDC_STYLE_CORNERS, speed, t0, &corners);
        t_must(c, &q, PDC_STYLE_SMOOTH, speed, t0, &smooth);
        size_t j = 0;
        for (size_t k = 0; k < corners.count; k++) {
            while (j < cells.count && (cells.waypoints[j].x != corners.waypoints[k].x ||
                                       cells.waypoints[j].y != corners.waypoints[k].y))
                j++;
            assert_true(j < cells.count);
            assert_true(fabs(cells.waypoints[j].t - corners.waypoints[k].t) <= T_TIME_EPS * (double)cells.count);
        }
        assert_true(fabs(smooth.waypoints[0].t - t0) <= T_TIME_EPS);
        for (size_t k = 1; k < smooth.count; k++) {
            double len = hypot((double)smooth.waypoints[k].x - smooth.waypoints[k - 1].x,
                               (double)smooth.waypoints[k].y - smooth.waypoints[k - 1].y);
            assert_true(fabs(smooth.waypoints[k].t - smooth.waypoints[k - 1].t - len / speed) <= T_TIME_EPS);
        }
        pdc_path_result_free(&cells);
        pdc_path_result_free(&corners);
        pdc_path_result_free(&smooth);
    }

    /* Bad speeds and start times: the client library refuses them before
     * sending, and the server refuses them on the wire. */
    pdc_path_result r;
    assert_int_equal(t_style_path(c, &qs[0], PDC_STYLE_CELLS, -1.0, 0, &r), PDC_ERR_ARG);
    pdc_path_result_free(&r);
    const double bad[][2] = {{-1.0, 0}, {INFINITY, 0}, {NAN, 0}, {1.0, NAN}, {1.0, -INFINITY}};
    int fd = pdi_raw_connect(d->port);
    assert_true(fd >= 0);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pdi_fp_msg m;
        pdi_fp_init(&m, 100 + i, "rooms", 1, 1, 4, 4);
        m.fp.speed = bad[i][0];
        m.fp.start_time = bad[i][1];
        assert_int_equal(pdi_raw_send_request(fd, &m.req), 0);
        Pathd__V1__Response *resp = pdi_raw_recv_final(fd, 100 + i, PDI_CALL_TIMEOUT_MS);
        assert_non_null(resp);
        int st = (int)resp->status;
        pathd__v1__response__free_unpacked(resp, NULL);
        if (st != PDC_INVALID_ARGUMENT)
            fail_msg("speed %g start_time %g: %s, expected INVALID_ARGUMENT", bad[i][0], bad[i][1],
                     pdc_status_name(st));
    }
    close(fd);
    pdi_grid_free(&g);
    pdc_close(c);
}

/* Smoothing checks only passability, so a string-pulled segment may cut
 * through cells the optimal path went around because they cost more. The
 * issue promises smoothing never makes a path worse and docs/PROTOCOL.md
 * that cost and waypoints describe the path returned; the server's own
 * times (mean cost entered per segment) measure what the smoothed path
 * really costs, so it must not arrive later than the cell path. */
static void test_smooth_never_costlier_on_weighted_ground(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    const double speed = 1.0;
    /* Town: around the market (cost 3) and the park (grass, cost 2);
     * rooms: past its cost-3 patch. */
    const t_query qs[] = {
        {"town", 1, 3, 4, 31, 19}, {"town", 1, 3, 4, 34, 10}, {"rooms", 1, 1, 2, 9, 6}, {"rooms", 1, 2, 6, 7, 1},
    };
    char worse[512] = "";
    size_t len = 0;
    for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++) {
        pdc_path_result cells, smooth;
        t_must(c, &qs[i], PDC_STYLE_CELLS, speed, 0, &cells);
        t_must(c, &qs[i], PDC_STYLE_SMOOTH, speed, 0, &smooth);
        double t_cells = cells.waypoints[cells.count - 1].t, t_smooth = smooth.waypoints[smooth.count - 1].t;
        if (t_smooth > t_cells + T_EPS && len < sizeof worse)
            len += (size_t)snprintf(worse + len, sizeof worse - len,
                                    " %s (%d,%d)->(%d,%d): cell path arrives at %.3f s, smoothed at %.3f s;",
                                    qs[i].scene, qs[i].sx, qs[i].sy, qs[i].gx, qs[i].gy, t_cells, t_smooth);
        pdc_path_result_free(&cells);
        pdc_path_result_free(&smooth);
    }
    pdc_close(c);
    if (worse[0])
        fail_msg("smoothing cut through dearer cells:%s", worse);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_smooth_paths),
        cmocka_unit_test(test_corners_are_turns),
        cmocka_unit_test(test_timing),
        cmocka_unit_test(test_smooth_never_costlier_on_weighted_ground),
    };
    return cmocka_run_group_tests(tests, setup, pdi_fixture_stop);
}
