/*
 * test_e2e_terrain.c - terrain costs, per-request avoid cells and search
 * windows, and the Tiled demo scene, through the real daemon (issue 4).
 *
 * Costs: on e2e4_terrain a path must walk around an expensive patch exactly
 * when that is cheaper than crossing it; the harness's Dijkstra decides,
 * with the patch as it is and with the patch blocked. Avoid cells and
 * windows on e2e4_units must force the detours (or NO_PATH) that the same
 * Dijkstra finds with those restrictions, and leave the shared scene as it
 * was. The courtyard scene is read from config/scenes/courtyard.tmj, and its
 * ASCII picture (tests/data/scene4_courtyard.txt) is the oracle's map.
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
#define T_TERRAIN_MAP PD_TEST_DATA_DIR "/e2e4_terrain.txt"
#define T_UNITS_MAP PD_TEST_DATA_DIR "/e2e4_units.txt"
#define T_COURTYARD_PICTURE PD_TEST_DATA_DIR "/scene4_courtyard.txt"

static int setup(void **state)
{
    pdi_limits l = {0};
    l.extra_scenes_json =
        ",\n    {\"name\": \"terrain\", \"map\": \"" T_TERRAIN_MAP "\", \"format\": \"ascii\"}"
        ",\n    {\"name\": \"units\", \"map\": \"" T_UNITS_MAP "\", \"format\": \"ascii\", \"unit_sizes\": [1, 2, 3]}"
        ",\n    {\"name\": \"courtyard\", \"map\": \"" PD_SOURCE_DIR "/config/scenes/courtyard.tmj\","
        " \"format\": \"tiled\", \"layer\": \"walls\", \"unit_sizes\": [1, 2]}";
    return pdi_fixture_start(state, &l);
}

static pdc_path_req t_req(const char *scene, uint32_t unit, int32_t sx, int32_t sy, int32_t gx, int32_t gy)
{
    pdc_path_req req = {0};
    req.scene = scene;
    req.unit_size = unit;
    req.start = pdc_cell(sx, sy);
    req.goal = pdc_cell(gx, gy);
    return req;
}

static int t_path(pdc_conn *c, const pdc_path_req *req, pdc_path_result *r)
{
    memset(r, 0, sizeof *r);
    return pdc_find_path(c, req, r);
}

/* The answer is legal under the rules and as cheap as the oracle says. */
static void t_check_optimal(const pdi_grid *g, const pdi_rules *rules, const pdc_path_req *req,
                            const pdc_path_result *r)
{
    char why[256];
    double walked = 0;
    int32_t sx = req->start.x, sy = req->start.y, gx = req->goal.x, gy = req->goal.y;
    assert_true(r->count >= 1);
    assert_int_equal(r->waypoints[0].x, sx);
    assert_int_equal(r->waypoints[0].y, sy);
    assert_int_equal(r->waypoints[r->count - 1].x, gx);
    assert_int_equal(r->waypoints[r->count - 1].y, gy);
    if (pdi_rules_path_cost(g, rules, r->waypoints, r->count, &walked, why, sizeof why) != 0)
        fail_msg("%s (%d,%d)->(%d,%d): %s", req->scene, sx, sy, gx, gy, why);
    assert_true(fabs(walked - r->cost) <= T_EPS);
    double oracle = pdi_rules_dijkstra(g, rules, sx, sy, gx, gy);
    if (fabs(oracle - r->cost) > T_EPS)
        fail_msg("%s (%d,%d)->(%d,%d): cost %.9f, Dijkstra %.9f", req->scene, sx, sy, gx, gy, r->cost, oracle);
}

/* A copy of g in which every cell costing more than 1 is blocked (blocked)
 * or costs 1 (flat). */
static void t_variant(const pdi_grid *g, pdi_grid *out, int blocked)
{
    size_t n = (size_t)g->width * (size_t)g->height;
    *out = *g;
    out->cost = malloc(n);
    assert_non_null(out->cost);
    for (size_t i = 0; i < n; i++)
        out->cost[i] = g->cost[i] > 1 ? (blocked ? 0 : 1) : g->cost[i];
}

/* Crosses the patch exactly when crossing is cheaper than going around. */
static void test_costs_detour_exactly_when_cheaper(void **state)
{
    pdi_daemon *d = *state;
    pdi_grid g, around, flat;
    assert_int_equal(pdi_grid_load_ascii(&g, T_TERRAIN_MAP), 0);
    t_variant(&g, &around, 1);
    t_variant(&g, &flat, 0);
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    pdi_rules u1 = {.unit = 1};
    /* Upper hall: around the cost-9 patch. Lower hall: across the cost-2
     * patch. Then the same halls from other rows. */
    const int32_t q[][4] = {{1, 2, 18, 2}, {1, 8, 18, 8}, {1, 1, 18, 3}, {1, 10, 18, 7}, {3, 5, 16, 1}};
    const int want_cross[] = {0, 1, -1, -1, -1};
    size_t crossed = 0, detoured = 0;
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
        pdc_path_req req = t_req("terrain", 1, q[i][0], q[i][1], q[i][2], q[i][3]);
        pdc_path_result r;
        assert_int_equal(t_path(c, &req, &r), PDC_OK);
        t_check_optimal(&g, &u1, &req, &r);
        double cost_around = pdi_rules_dijkstra(&around, &u1, q[i][0], q[i][1], q[i][2], q[i][3]);
        double cost_flat = pdi_rules_dijkstra(&flat, &u1, q[i][0], q[i][1], q[i][2], q[i][3]);
        assert_true(cost_around > 0);
        /* In the two designed queries the patch lies across the straight
         * way, so ignoring costs would be cheaper than honouring them. */
        if (want_cross[i] >= 0)
            assert_true(cost_flat < r.cost - T_EPS);
        size_t on_patch = 0;
        for (size_t k = 0; k < r.count; k++)
            on_patch += g.cost[(size_t)r.waypoints[k].y * (size_t)g.width + (size_t)r.waypoints[k].x] > 1;
        int cheaper_to_cross = r.cost < cost_around - T_EPS;
        if (cheaper_to_cross != (on_patch > 0))
            fail_msg("(%d,%d)->(%d,%d): cost %.6f, around %.6f, yet %zu waypoints on the patch", q[i][0], q[i][1],
                     q[i][2], q[i][3], r.cost, cost_around, on_patch);
        if (want_cross[i] >= 0)
            assert_int_equal(cheaper_to_cross, want_cross[i]);
        crossed += cheaper_to_cross;
        detoured += !cheaper_to_cross;
        pdc_path_result_free(&r);
    }
    assert_true(crossed > 0 && detoured > 0);
    pdc_close(c);
    pdi_grid_free(&g);
    pdi_grid_free(&around);
    pdi_grid_free(&flat);
}

static int t_contains(const pdc_path_result *r, int32_t x, int32_t y)
{
    for (size_t i = 0; i < r->count; i++)
        if (r->waypoints[i].x == x && r->waypoints[i].y == y)
            return 1;
    return 0;
}

/* Avoid cells: a blocker in the 1-wide corridor sends unit 1 over the top,
 * at the cost of the Dijkstra with that cell blocked; the scene itself is
 * untouched (the next plain query takes the corridor again). */
static void test_avoid_cells(void **state)
{
    pdi_daemon *d = *state;
    pdi_grid g;
    assert_int_equal(pdi_grid_load_ascii(&g, T_UNITS_MAP), 0);
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    pdc_path_result plain, r;
    pdi_rules u1 = {.unit = 1};
    pdc_path_req req = t_req("units", 1, 2, 6, 26, 6);
    assert_int_equal(t_path(c, &req, &plain), PDC_OK);
    t_check_optimal(&g, &u1, &req, &plain);
    assert_true(t_contains(&plain, 15, 8));

    /* Other agents: one in the corridor, two in the rooms, one outside the
     * grid (ignored). */
    const pdc_xy avoid[] = {{15, 8}, {3, 6}, {24, 7}, {-5, 40}};
    req.avoid = avoid;
    req.avoid_count = 4;
    pdi_rules ru = {.unit = 1, .avoid = avoid, .avoid_count = 4};
    assert_int_equal(t_path(c, &req, &r), PDC_OK);
    t_check_optimal(&g, &ru, &req, &r);
    assert_false(t_contains(&r, 15, 8));
    assert_true(r.cost > plain.cost + 1);
    pdc_path_result_free(&r);

    /* The shared scene did not change. */
    req.avoid = NULL;
    req.avoid_count = 0;
    assert_int_equal(t_path(c, &req, &r), PDC_OK);
    assert_true(fabs(r.cost - plain.cost) <= T_EPS);
    assert_true(r.scene_version == plain.scene_version);
    pdc_path_result_free(&r);
    pdc_path_result_free(&plain);

    /* An avoid cell on the goal. */
    const pdc_xy on_goal[] = {{26, 6}};
    req.avoid = on_goal;
    req.avoid_count = 1;
    assert_int_equal(t_path(c, &req, &r), PDC_GOAL_BLOCKED);
    pdc_path_result_free(&r);

    /* Unit 2: avoid cells are anchors. Keeping a 2x2 unit off cell (15,1)
     * of the 2-wide corridor takes the anchors x 14..15, y 0..1 (as
     * docs/PROTOCOL.md says); only the search can find out that nothing is
     * left: NO_PATH after expanding. */
    pdc_xy keep_off[4];
    size_t n = 0;
    for (int32_t y = 0; y <= 1; y++)
        for (int32_t x = 14; x <= 15; x++)
            keep_off[n++] = (pdc_xy){x, y};
    pdi_rules r2 = {.unit = 2, .avoid = keep_off, .avoid_count = n};
    assert_true(pdi_rules_dijkstra(&g, &r2, 2, 8, 25, 8) < 0);
    req = t_req("units", 2, 2, 8, 25, 8);
    req.avoid = keep_off;
    req.avoid_count = n;
    assert_int_equal(t_path(c, &req, &r), PDC_NO_PATH);
    assert_true(r.expansions > 0);
    pdc_path_result_free(&r);
    /* Avoiding the cell (15,2) names the anchor (15,2), where the unit
     * never stands (its square would reach the wall on row 3): nothing
     * changes, although the unit's square covers that cell on its way. */
    const pdc_xy lower = {15, 2};
    pdi_rules u2 = {.unit = 2};
    req.avoid = &lower;
    req.avoid_count = 1;
    assert_int_equal(t_path(c, &req, &r), PDC_OK);
    t_check_optimal(&g, &u2, &req, &r);
    pdc_path_result_free(&r);

    pdc_close(c);
    pdi_grid_free(&g);
}

/* The status of one FindPath sent as raw frames, for fields the client
 * library would refuse to send. */
static int t_raw_window_status(const pdi_daemon *d, int32_t x0, int32_t y0, int32_t x1, int32_t y1, int with_max)
{
    int fd = pdi_raw_connect(d->port);
    assert_true(fd >= 0);
    pdi_fp_msg m;
    pdi_fp_init(&m, 7, "units", 2, 6, 26, 6);
    Pathd__V1__Rect rect = PATHD__V1__RECT__INIT;
    Pathd__V1__Cell lo = PATHD__V1__CELL__INIT, hi = PATHD__V1__CELL__INIT;
    lo.x = x0;
    lo.y = y0;
    hi.x = x1;
    hi.y = y1;
    rect.min = &lo;
    rect.max = with_max ? &hi : NULL;
    m.fp.window = &rect;
    assert_int_equal(pdi_raw_send_request(fd, &m.req), 0);
    Pathd__V1__Response *resp = pdi_raw_recv_final(fd, 7, PDI_CALL_TIMEOUT_MS);
    assert_non_null(resp);
    int st = (int)resp->status;
    pathd__v1__response__free_unpacked(resp, NULL);
    close(fd);
    return st;
}

/* Windows: one that leaves out the short corridor forces the long way, one
 * that leaves out both ways gives NO_PATH; a start outside the window is a
 * bad request, a goal outside it has no path. */
static void test_search_window(void **state)
{
    pdi_daemon *d = *state;
    pdi_grid g;
    assert_int_equal(pdi_grid_load_ascii(&g, T_UNITS_MAP), 0);
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    pdc_path_result r;
    pdc_path_req req = t_req("units", 1, 2, 6, 26, 6);
    double shortest = pdi_rules_dijkstra(&g, &(pdi_rules){.unit = 1}, 2, 6, 26, 6);

    /* Rows 0..7: the corridor on row 8 is outside. */
    req.has_window = 1;
    req.window_min = (pdc_xy){0, 0};
    req.window_max = (pdc_xy){29, 7};
    pdi_rules top = {.unit = 1, .has_window = 1, .window_min = req.window_min, .window_max = req.window_max};
    assert_int_equal(t_path(c, &req, &r), PDC_OK);
    t_check_optimal(&g, &top, &req, &r);
    assert_true(r.cost > shortest + 1);
    for (size_t i = 0; i < r.count; i++)
        assert_true(r.waypoints[i].y <= 7);
    pdc_path_result_free(&r);

    /* Rows 5..15 (and beyond the grid, which is ignored): the short way. */
    req.window_min = (pdc_xy){0, 5};
    req.window_max = (pdc_xy){100, 100};
    assert_int_equal(t_path(c, &req, &r), PDC_OK);
    assert_true(fabs(r.cost - shortest) <= T_EPS);
    pdc_path_result_free(&r);

    /* Rows 5..15 and an agent in the corridor: no way at all. */
    const pdc_xy agent = {15, 8};
    req.avoid = &agent;
    req.avoid_count = 1;
    assert_int_equal(t_path(c, &req, &r), PDC_NO_PATH);
    pdc_path_result_free(&r);
    req.avoid = NULL;
    req.avoid_count = 0;

    /* The window must hold the start; a goal outside it is unreachable. */
    req.window_min = (pdc_xy){10, 0};
    req.window_max = (pdc_xy){29, 15};
    assert_int_equal(t_path(c, &req, &r), PDC_INVALID_ARGUMENT);
    pdc_path_result_free(&r);
    req.window_min = (pdc_xy){0, 0};
    req.window_max = (pdc_xy){20, 15};
    assert_int_equal(t_path(c, &req, &r), PDC_NO_PATH);
    pdc_path_result_free(&r);

    /* Malformed windows on the wire. */
    assert_int_equal(t_raw_window_status(d, 5, 0, 2, 15, 1), PDC_INVALID_ARGUMENT);
    assert_int_equal(t_raw_window_status(d, -1, 0, 29, 15, 1), PDC_INVALID_ARGUMENT);
    assert_int_equal(t_raw_window_status(d, 0, 0, 29, 15, 0), PDC_INVALID_ARGUMENT);
    assert_int_equal(t_raw_window_status(d, 0, 0, 29, 15, 1), PDC_OK);
    /* Corners far past the scene mean "to the edge" (INT32_MAX used to
     * overflow in the search and answer NO_PATH); a window wholly past it
     * does not hold the start. */
    assert_int_equal(t_raw_window_status(d, 0, 0, INT32_MAX, INT32_MAX, 1), PDC_OK);
    assert_int_equal(t_raw_window_status(d, 0, 5, INT32_MAX, 15, 1), PDC_OK);
    assert_int_equal(t_raw_window_status(d, INT32_MAX, INT32_MAX, INT32_MAX, INT32_MAX, 1), PDC_INVALID_ARGUMENT);
    pdc_close(c);
    pdi_grid_free(&g);
}

/* The Tiled courtyard: walls and the fountain block, the mud costs 3. */
static void test_tiled_courtyard_costs(void **state)
{
    pdi_daemon *d = *state;
    pdi_grid g, flat;
    assert_int_equal(pdi_grid_load_ascii(&g, T_COURTYARD_PICTURE), 0);
    t_variant(&g, &flat, 0);
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    pdc_scene_details info = {0};
    assert_int_equal(pdc_scene_info(c, "courtyard", &info), PDC_OK);
    assert_int_equal(info.width, g.width);
    assert_int_equal(info.height, g.height);
    pdc_scene_details_free(&info);

    /* From inside the mud, across it, around the fountain, in through the
     * west gate, and a 2x2 unit through the north gate. */
    const int32_t q[][5] = {
        {1, 3, 11, 14, 6}, {1, 1, 13, 7, 12}, {1, 1, 7, 20, 3}, {1, 0, 7, 14, 8}, {2, 11, 0, 3, 11},
    };
    size_t mud_mattered = 0;
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
        pdc_path_req req = t_req("courtyard", (uint32_t)q[i][0], q[i][1], q[i][2], q[i][3], q[i][4]);
        pdi_rules rules = {.unit = (uint32_t)q[i][0]};
        pdc_path_result r;
        int st = t_path(c, &req, &r);
        if (st != PDC_OK)
            fail_msg("courtyard query %zu: %s (%s)", i, pdc_status_name(st), r.message);
        t_check_optimal(&g, &rules, &req, &r);
        double flat_cost = pdi_rules_dijkstra(&flat, &rules, q[i][1], q[i][2], q[i][3], q[i][4]);
        mud_mattered += flat_cost < r.cost - T_EPS;
        pdc_path_result_free(&r);
    }
    assert_true(mud_mattered >= 2);
    pdc_close(c);
    pdi_grid_free(&g);
    pdi_grid_free(&flat);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_costs_detour_exactly_when_cheaper),
        cmocka_unit_test(test_avoid_cells),
        cmocka_unit_test(test_search_window),
        cmocka_unit_test(test_tiled_courtyard_costs),
    };
    return cmocka_run_group_tests(tests, setup, pdi_fixture_stop);
}
