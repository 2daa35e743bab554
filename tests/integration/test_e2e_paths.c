/*
 * test_e2e_paths.c - the daemon finds correct paths: costs against the Moving
 * AI optimal lengths and against an independent Dijkstra, every returned path
 * walked move by move, world coordinates, chunked streaming and the corners
 * style, all through the real pathd and the C client library.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "harness.h"

/* Scenarios taken from den520d.map.scen, spread over all its length buckets. */
#define T_SCENARIOS 50
/* Small chunks, so long paths arrive as many PathChunk frames that the
 * client has to put back together. */
#define T_CHUNK_WAYPOINTS 16
/* Two costs of the same path computed in different orders agree this well. */
#define T_SUM_EPSILON 1e-6

static int setup(void **state)
{
    pdi_limits l = {0};
    l.max_waypoints_per_chunk = T_CHUNK_WAYPOINTS;
    return pdi_fixture_start(state, &l);
}

static void check_path_shape(const pdi_grid *g, const pdc_path_result *r, int32_t sx, int32_t sy,
                             int32_t gx, int32_t gy)
{
    char why[256];
    double walked = 0;
    assert_true(r->count >= 1);
    assert_int_equal(r->waypoints[0].x, sx);
    assert_int_equal(r->waypoints[0].y, sy);
    assert_int_equal(r->waypoints[r->count - 1].x, gx);
    assert_int_equal(r->waypoints[r->count - 1].y, gy);
    if (pdi_grid_path_cost(g, r->waypoints, r->count, &walked, why, sizeof why) != 0)
        fail_msg("path %d,%d -> %d,%d: %s", sx, sy, gx, gy, why);
    if (fabs(walked - r->cost) > T_SUM_EPSILON)
        fail_msg("path %d,%d -> %d,%d: reported cost %.9f but its moves cost %.9f", sx, sy, gx, gy,
                 r->cost, walked);
}

/* ~50 Moving AI problems pipelined on one connection, answers matched by id. */
static void test_movingai_costs_pipelined(void **state)
{
    pdi_daemon *d = *state;
    pdi_scenario sc[T_SCENARIOS];
    size_t n = pdi_load_scenarios(sc, T_SCENARIOS);
    assert_int_equal(n, T_SCENARIOS);
    pdi_grid g;
    assert_int_equal(pdi_grid_load_den520d(&g), 0);

    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    uint64_t ids[T_SCENARIOS], sent_ns[T_SCENARIOS];
    for (size_t i = 0; i < n; i++) {
        pdc_path_req req = {0};
        req.scene = "den520d";
        req.start = pdc_cell(sc[i].sx, sc[i].sy);
        req.goal = pdc_cell(sc[i].gx, sc[i].gy);
        sent_ns[i] = pdi_now_ns();
        assert_int_equal(pdc_send_find_path(c, &req, &ids[i]), PDC_OK);
    }
    int answered[T_SCENARIOS] = {0};
    size_t chunks_needed = 0;
    for (size_t k = 0; k < n; k++) {
        pdc_path_result r = {0};
        int st = pdc_recv_result(c, PDI_CALL_TIMEOUT_MS, &r);
        size_t i = 0;
        while (i < n && ids[i] != r.id)
            i++;
        if (i == n)
            fail_msg("answer for unknown id %llu (status %s)", (unsigned long long)r.id, pdc_status_name(st));
        assert_int_equal(answered[i], 0);
        answered[i] = 1;
        if (st != PDC_OK)
            fail_msg("scenario %zu: %s (%s)", i, pdc_status_name(st), r.message);
        if (fabs(r.cost - sc[i].optimal) > sc[i].tolerance)
            fail_msg("scenario %zu (%d,%d)->(%d,%d): cost %.9f, optimal %.9f (tolerance %g)", i, sc[i].sx,
                     sc[i].sy, sc[i].gx, sc[i].gy, r.cost, sc[i].optimal, sc[i].tolerance);
        check_path_shape(&g, &r, sc[i].sx, sc[i].sy, sc[i].gx, sc[i].gy);
        assert_true(r.scene_version >= 1);
        assert_true(r.expansions >= 1);
        /* Timed on the final chunk, whatever chunks went before it. */
        pdi_check_timing(r.timing, sent_ns[i], 1, "pipelined FindPath");
        assert_int_equal(r.timing.search_us, r.search_micros);
        if (r.count > T_CHUNK_WAYPOINTS)
            chunks_needed++;
        pdc_path_result_free(&r);
    }
    /* The spread of scenarios must include paths that needed several chunks,
     * or the streaming would not have been exercised. */
    assert_true(chunks_needed >= T_SCENARIOS / 2);
    assert_int_equal(pdc_in_flight(c), 0);
    pdc_close(c);
    pdi_grid_free(&g);
}

/* The blocking call on the same problems (a handful: the pipelined test
 * covers the spread). */
static void test_movingai_costs_blocking(void **state)
{
    pdi_daemon *d = *state;
    pdi_scenario sc[10];
    assert_int_equal(pdi_load_scenarios(sc, 10), 10);
    pdi_grid g;
    assert_int_equal(pdi_grid_load_den520d(&g), 0);
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    for (size_t i = 0; i < 10; i++) {
        pdc_path_req req = {0};
        req.scene = "den520d";
        req.start = pdc_cell(sc[i].sx, sc[i].sy);
        req.goal = pdc_cell(sc[i].gx, sc[i].gy);
        pdc_path_result r = {0};
        uint64_t sent_ns = pdi_now_ns();
        assert_int_equal(pdc_find_path(c, &req, &r), PDC_OK);
        pdi_check_timing(r.timing, sent_ns, 1, "FindPath");
        assert_int_equal(r.timing.search_us, r.search_micros);
        assert_int_equal(pdc_last_timing(c).server_us, r.timing.server_us);
        assert_true(fabs(r.cost - sc[i].optimal) <= sc[i].tolerance);
        check_path_shape(&g, &r, sc[i].sx, sc[i].sy, sc[i].gx, sc[i].gy);
        pdc_path_result_free(&r);
    }
    pdc_close(c);
    pdi_grid_free(&g);
}

/* Every pair of a set of cells of the hand-made rooms scene (weighted patch,
 * door, lower-wall gap) against Dijkstra; the sealed pocket is NO_PATH. */
static void test_rooms_against_dijkstra(void **state)
{
    pdi_daemon *d = *state;
    static const int32_t cells[][2] = {
        {1, 1}, {10, 1}, {2, 4}, {6, 4}, {4, 4}, {12, 1}, {22, 10}, {1, 10}, {10, 9}, {19, 4}, {15, 4},
    };
    const size_t n = sizeof cells / sizeof cells[0];
    pdi_grid g, flat;
    assert_int_equal(pdi_grid_load_rooms(&g), 0);
    assert_int_equal(pdi_grid_load_rooms(&flat), 0);
    for (int32_t k = 0; k < flat.width * flat.height; k++)
        flat.cost[k] = flat.cost[k] ? 1 : 0;
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    size_t weighted_differs = 0;
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < n; j++) {
            if (i == j)
                continue;
            pdc_path_req req = {0};
            req.scene = "rooms";
            req.start = pdc_cell(cells[i][0], cells[i][1]);
            req.goal = pdc_cell(cells[j][0], cells[j][1]);
            pdc_path_result r = {0};
            int st = pdc_find_path(c, &req, &r);
            double oracle = pdi_grid_dijkstra(&g, cells[i][0], cells[i][1], cells[j][0], cells[j][1]);
            assert_true(oracle > 0);
            if (st != PDC_OK)
                fail_msg("rooms (%d,%d)->(%d,%d): %s", cells[i][0], cells[i][1], cells[j][0], cells[j][1],
                         pdc_status_name(st));
            if (fabs(r.cost - oracle) > T_SUM_EPSILON)
                fail_msg("rooms (%d,%d)->(%d,%d): cost %.9f, Dijkstra %.9f", cells[i][0], cells[i][1],
                         cells[j][0], cells[j][1], r.cost, oracle);
            check_path_shape(&g, &r, cells[i][0], cells[i][1], cells[j][0], cells[j][1]);
            /* Where the cost ignoring weights is lower, the cost-3 patch
             * mattered: the set must contain such pairs. */
            if (pdi_grid_dijkstra(&flat, cells[i][0], cells[i][1], cells[j][0], cells[j][1]) < oracle - 1e-9)
                weighted_differs++;
            pdc_path_result_free(&r);
        }
    }
    assert_true(weighted_differs > 0);

    /* The pocket at (17,4) is sealed on all eight sides. */
    assert_true(pdi_grid_dijkstra(&g, 1, 1, 17, 4) < 0);
    pdc_path_req req = {0};
    req.scene = "rooms";
    req.start = pdc_cell(1, 1);
    req.goal = pdc_cell(17, 4);
    pdc_path_result r = {0};
    assert_int_equal(pdc_find_path(c, &req, &r), PDC_NO_PATH);
    assert_int_equal(r.count, 0);
    pdc_path_result_free(&r);
    pdc_close(c);
    pdi_grid_free(&g);
    pdi_grid_free(&flat);
}

/* World points map to cells by floor((p - origin) / cell_size), and every
 * waypoint carries its cell centre: rooms has origin (-10.5, 4), cell 0.5. */
static void test_world_coordinates(void **state)
{
    pdi_daemon *d = *state;
    const double ox = -10.5, oy = 4.0, cs = 0.5;
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);

    pdc_scene_details info = {0};
    assert_int_equal(pdc_scene_info(c, "rooms", &info), PDC_OK);
    assert_int_equal(info.width, 24);
    assert_int_equal(info.height, 12);
    assert_true(info.origin_x == ox && info.origin_y == oy && info.cell_size == cs);
    pdc_scene_details_free(&info);

    pdc_path_req req = {0};
    req.scene = "rooms";
    /* (-9.8, 4.6) lies in cell (1, 1); (-5.01, 8.74) in cell (10, 9). */
    req.start = pdc_world(-9.8, 4.6);
    req.goal = pdc_world(-5.01, 8.74);
    req.want_world = 1;
    pdc_path_result r = {0};
    assert_int_equal(pdc_find_path(c, &req, &r), PDC_OK);
    assert_true(r.count >= 2);
    assert_int_equal(r.waypoints[0].x, 1);
    assert_int_equal(r.waypoints[0].y, 1);
    assert_int_equal(r.waypoints[r.count - 1].x, 10);
    assert_int_equal(r.waypoints[r.count - 1].y, 9);
    for (size_t i = 0; i < r.count; i++) {
        assert_true(fabs(r.waypoints[i].wx - (ox + (r.waypoints[i].x + 0.5) * cs)) < 1e-9);
        assert_true(fabs(r.waypoints[i].wy - (oy + (r.waypoints[i].y + 0.5) * cs)) < 1e-9);
    }
    pdc_path_result_free(&r);

    /* Without want_world the same cells come back and no world coordinates:
     * the wire carries them only when asked. */
    req.want_world = 0;
    assert_int_equal(pdc_find_path(c, &req, &r), PDC_OK);
    assert_true(r.count >= 2);
    assert_int_equal(r.waypoints[r.count - 1].x, 10);
    for (size_t i = 0; i < r.count; i++)
        assert_true(r.waypoints[i].wx == 0.0 && r.waypoints[i].wy == 0.0);
    pdc_path_result_free(&r);

    /* Just left of the origin is cell -1: outside. */
    req.start = pdc_world(ox - 0.01, 4.1);
    assert_int_equal(pdc_find_path(c, &req, &r), PDC_OUT_OF_BOUNDS);
    pdc_path_result_free(&r);
    pdc_close(c);
}

/* The corners style returns exactly the cells where the cells-style path
 * turns, plus its two ends. */
static void test_corners_style(void **state)
{
    pdi_daemon *d = *state;
    pdi_scenario sc[2];
    assert_int_equal(pdi_load_scenarios(sc, 2), 2);
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    pdc_path_req req = {0};
    req.scene = "den520d";
    req.start = pdc_cell(sc[1].sx, sc[1].sy);
    req.goal = pdc_cell(sc[1].gx, sc[1].gy);
    pdc_path_result cells = {0}, corners = {0};
    assert_int_equal(pdc_find_path(c, &req, &cells), PDC_OK);
    req.style = PDC_STYLE_CORNERS;
    assert_int_equal(pdc_find_path(c, &req, &corners), PDC_OK);
    assert_true(fabs(cells.cost - corners.cost) < T_SUM_EPSILON);

    size_t k = 0;
    for (size_t i = 0; i < cells.count; i++) {
        int turn = i == 0 || i + 1 == cells.count;
        if (!turn) {
            int32_t dx0 = cells.waypoints[i].x - cells.waypoints[i - 1].x;
            int32_t dy0 = cells.waypoints[i].y - cells.waypoints[i - 1].y;
            int32_t dx1 = cells.waypoints[i + 1].x - cells.waypoints[i].x;
            int32_t dy1 = cells.waypoints[i + 1].y - cells.waypoints[i].y;
            turn = dx0 != dx1 || dy0 != dy1;
        }
        if (!turn)
            continue;
        assert_true(k < corners.count);
        assert_int_equal(corners.waypoints[k].x, cells.waypoints[i].x);
        assert_int_equal(corners.waypoints[k].y, cells.waypoints[i].y);
        k++;
    }
    assert_int_equal(k, corners.count);
    assert_true(corners.count < cells.count);
    pdc_path_result_free(&cells);
    pdc_path_result_free(&corners);
    pdc_close(c);
}

/* The long search the other tests lean on: its one path has a known cost. */
static void test_serpent_long_path(void **state)
{
    pdi_daemon *d = *state;
    int32_t gx, gy;
    pdi_serpent_goal(&gx, &gy);
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    pdc_path_req req = {0};
    req.scene = "serpent";
    req.start = pdc_cell(0, 0);
    req.goal = pdc_cell(gx, gy);
    req.style = PDC_STYLE_CORNERS;
    pdc_path_result r = {0};
    assert_int_equal(pdc_find_path(c, &req, &r), PDC_OK);
    assert_true(fabs(r.cost - pdi_serpent_cost()) < T_SUM_EPSILON);
    /* Two corners per corridor: where it is entered and where it is left. */
    assert_int_equal(r.count, (size_t)(PDI_SERPENT_SIZE + 1));
    assert_true(r.expansions >= (uint64_t)pdi_serpent_cost());
    print_message("serpent search: %llu expansions in %llu us\n", (unsigned long long)r.expansions,
                  (unsigned long long)r.search_micros);
    pdc_path_result_free(&r);
    pdc_close(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_movingai_costs_pipelined, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_movingai_costs_blocking, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_rooms_against_dijkstra, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_world_coordinates, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_corners_style, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_serpent_long_path, setup, pdi_fixture_stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
