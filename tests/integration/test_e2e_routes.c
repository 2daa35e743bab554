/*
 * test_e2e_routes.c - FindRoute through the real daemon on the demo world of
 * config/default.json (town, house, cellar, forest joined by portals, with a
 * one-way well, a gate closed to units above size 2 and a pinned route).
 *
 * The harness starts pathd on its own config; the group setup then writes
 * the demo config (its scenes with absolute map paths, its portals and
 * routes; the listen address stays the harness's) and reloads it with
 * SIGHUP, so the reload path that rebuilds the world is exercised too.
 *
 * Costs are never taken on trust: every leg is priced again with a FindPath
 * between its first and last cell on the same scene, and the route total
 * must equal those plus the portal costs. The demo route's total (41.657,
 * the figure the issue quotes) is checked on top.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "harness.h"

#define T_DEMO_CONFIG PD_SOURCE_DIR "/config/default.json"
/* The demo route town:3,4 -> cellar:10,2 through the inn and its stairs. */
#define T_DEMO_TOTAL 41.657
#define T_COST_EPS 1e-3
/* How long the reload of the demo config may take (sanitizer builds). */
#define T_RELOAD_TIMEOUT_MS 20000
/* Largest pathctl output read back. */
#define T_OUTPUT_MAX (256 * 1024)
/* Concurrency check: threads asking for routes while the door is toggled. */
#define T_ROUTE_THREADS 2
#define T_ROUTES_PER_THREAD 30
#define T_DOOR_TOGGLES 10
/* A portal cell column past the right edge of every demo map. */
#define T_MISFIT_X 999

/* The demo config with map paths made absolute (the harness's temp dir is
 * elsewhere), the harness's listen address, and no metrics listener. With
 * misfit set, the first portal's "a" cell lies outside its scene's map,
 * which the config accepts and the world build refuses. */
static char *demo_config_text(const pdi_daemon *d, int misfit)
{
    FILE *f = fopen(T_DEMO_CONFIG, "rb");
    assert_non_null(f);
    char *text = malloc(64 * 1024);
    assert_non_null(text);
    size_t n = fread(text, 1, 64 * 1024 - 1, f);
    fclose(f);
    text[n] = '\0';
    cJSON *root = cJSON_Parse(text);
    free(text);
    assert_non_null(root);
    cJSON_ReplaceItemInObject(root, "listen", cJSON_CreateString(d->addr));
    cJSON_DeleteItemFromObject(root, "metrics_listen");
    cJSON_ReplaceItemInObject(root, "threads", cJSON_CreateNumber(2));
    cJSON *scene;
    cJSON_ArrayForEach(scene, cJSON_GetObjectItem(root, "scenes"))
    {
        char path[PDI_PATH_MAX];
        snprintf(path, sizeof path, "%s/config/%s", PD_SOURCE_DIR, cJSON_GetObjectItem(scene, "map")->valuestring);
        cJSON_ReplaceItemInObject(scene, "map", cJSON_CreateString(path));
    }
    if (misfit) {
        cJSON *end = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "portals"), 0), "a");
        assert_non_null(end);
        const int cell[2] = {T_MISFIT_X, 5};
        cJSON_ReplaceItemInObject(end, "cell", cJSON_CreateIntArray(cell, 2));
    }
    char *out = cJSON_Print(root);
    cJSON_Delete(root);
    assert_non_null(out);
    return out;
}

static int setup(void **state)
{
    if (pdi_fixture_start(state, NULL) != 0)
        return -1;
    pdi_daemon *d = *state;
    /* "listening on" (what the harness waits for) comes before the signal
     * handlers are installed; "pathd started" comes after, and a SIGHUP
     * before it would end the process. */
    if (!pdi_wait_log(d, "pathd started", T_RELOAD_TIMEOUT_MS)) {
        pdi_print_log(d);
        return -1;
    }
    char *text = demo_config_text(d, 0);
    int rc = pdi_write_config_text(d, text);
    free(text);
    if (rc != 0 || pdi_daemon_signal(d, SIGHUP) != 0)
        return -1;
    if (!pdi_wait_log(d, "reloaded ", T_RELOAD_TIMEOUT_MS)) {
        fprintf(stderr, "the demo config was not reloaded\n");
        pdi_print_log(d);
        return -1;
    }
    return 0;
}

static pdc_route_req route_req(const char *from, int32_t sx, int32_t sy, const char *to, int32_t gx, int32_t gy)
{
    pdc_route_req r;
    memset(&r, 0, sizeof r);
    r.from_scene = from;
    r.start = pdc_cell(sx, sy);
    r.to_scene = to;
    r.goal = pdc_cell(gx, gy);
    return r;
}

/* Cost of a FindPath between two cells of a scene (unit `unit`). */
static double path_cost(pdc_conn *c, const char *scene, uint32_t unit, pdc_xy a, pdc_xy b)
{
    pdc_path_req p;
    memset(&p, 0, sizeof p);
    p.scene = scene;
    p.start = pdc_cell(a.x, a.y);
    p.goal = pdc_cell(b.x, b.y);
    p.unit_size = unit;
    pdc_path_result r;
    int st = pdc_find_path(c, &p, &r);
    if (st != PDC_OK)
        fail_msg("FindPath %s (%d,%d)->(%d,%d): %s %s", scene, a.x, a.y, b.x, b.y, pdc_status_name(st), r.message);
    double cost = r.cost;
    pdc_path_result_free(&r);
    return cost;
}

/* The legs chain (each starts where the previous portal comes out, ends
 * where its portal is entered), start and end where asked, each leg costs
 * what FindPath says for its ends, and the total is legs plus portals. */
static void check_route(pdc_conn *c, const pdc_route_result *r, const pdc_route_req *q, const char *const *scenes,
                        size_t n_scenes)
{
    assert_int_equal(r->leg_count, n_scenes);
    double total = 0;
    for (size_t i = 0; i < r->leg_count; i++) {
        const pdc_route_leg *leg = &r->legs[i];
        assert_string_equal(leg->scene, scenes[i]);
        assert_true(leg->count >= 1);
        pdc_xy first = {leg->waypoints[0].x, leg->waypoints[0].y};
        pdc_xy last = {leg->waypoints[leg->count - 1].x, leg->waypoints[leg->count - 1].y};
        if (i == 0) {
            assert_int_equal(first.x, q->start.x);
            assert_int_equal(first.y, q->start.y);
        } else {
            assert_string_equal(r->legs[i - 1].portal_to_scene, leg->scene);
            assert_int_equal(first.x, r->legs[i - 1].portal_entry.x);
            assert_int_equal(first.y, r->legs[i - 1].portal_entry.y);
        }
        if (i + 1 < r->leg_count) {
            assert_true(leg->has_portal);
            assert_int_equal(last.x, leg->portal_exit.x);
            assert_int_equal(last.y, leg->portal_exit.y);
        } else {
            assert_false(leg->has_portal);
            if (!r->has_goal_used) {
                assert_int_equal(last.x, q->goal.x);
                assert_int_equal(last.y, q->goal.y);
            }
        }
        assert_float_equal(leg->cost, path_cost(c, leg->scene, q->unit_size, first, last), 1e-9);
        total += leg->cost + (leg->has_portal ? leg->portal_cost : 0);
    }
    assert_float_equal(r->total_cost, total, 1e-9);
}

static const char *leg_portal(const pdc_route_result *r, size_t i)
{
    assert_true(i < r->leg_count && r->legs[i].has_portal);
    return r->legs[i].portal;
}

/* The demo route: town -> house -> cellar, 41.657 in all, with
 * times that run on across both portals. */
static void test_demo_route(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    pdc_route_req q = route_req("town", 3, 4, "cellar", 10, 2);
    pdc_route_result r;
    uint64_t sent_ns = pdi_now_ns();
    assert_int_equal(pdc_find_route(c, &q, &r), PDC_OK);
    pdi_check_timing(r.timing, sent_ns, 1, "FindRoute");
    assert_int_equal(r.timing.search_us, r.micros);
    static const char *const scenes[] = {"town", "house", "cellar"};
    check_route(c, &r, &q, scenes, 3);
    assert_string_equal(leg_portal(&r, 0), "inn-door");
    assert_string_equal(leg_portal(&r, 1), "house-stairs");
    assert_float_equal(r.total_cost, T_DEMO_TOTAL, T_COST_EPS);
    assert_false(r.pinned);
    assert_true(r.expansions > 0);
    pdc_route_result_free(&r);

    /* With a speed: each leg starts when the previous one ended plus the
     * portal's cost in cells of the departing scene at that speed. */
    pdc_scene_details town, house;
    assert_int_equal(pdc_scene_info(c, "town", &town), PDC_OK);
    assert_int_equal(pdc_scene_info(c, "house", &house), PDC_OK);
    q.speed = 2.0;
    q.start_time = 100.0;
    q.style = PDC_STYLE_CORNERS;
    assert_int_equal(pdc_find_route(c, &q, &r), PDC_OK);
    check_route(c, &r, &q, scenes, 3);
    assert_float_equal(r.legs[0].waypoints[0].t, 100.0, 1e-9);
    const double cell_size[2] = {town.cell_size, house.cell_size};
    for (size_t i = 1; i < r.leg_count; i++) {
        const pdc_route_leg *prev = &r.legs[i - 1];
        double expect = prev->waypoints[prev->count - 1].t + prev->portal_cost * cell_size[i - 1] / q.speed;
        assert_float_equal(r.legs[i].waypoints[0].t, expect, 1e-9);
        assert_true(r.legs[i].waypoints[r.legs[i].count - 1].t > expect);
    }
    pdc_route_result_free(&r);
    pdc_scene_details_free(&town);
    pdc_scene_details_free(&house);
    pdc_close(c);
}

/* The well only goes cellar -> town: the way back up takes it, the way
 * down never does. */
static void test_one_way_well(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    pdc_route_req q = route_req("cellar", 10, 2, "town", 3, 4);
    pdc_route_result r;
    assert_int_equal(pdc_find_route(c, &q, &r), PDC_OK);
    static const char *const up[] = {"cellar", "town"};
    check_route(c, &r, &q, up, 2);
    assert_string_equal(leg_portal(&r, 0), "cellar-well");
    pdc_route_result_free(&r);
    pdc_close(c);
}

static void set_door(pdc_conn *c, int open)
{
    pdc_update_req u;
    memset(&u, 0, sizeof u);
    u.scene = "town";
    u.is_rect = 1;
    u.rect_min = u.rect_max = (pdc_xy){11, 5};
    u.op = open ? PDC_UPDATE_PASS : PDC_UPDATE_BLOCK;
    pdc_update_result res;
    assert_int_equal(pdc_update_cells(c, &u, &res), PDC_OK);
}

/* Blocking the inn door sends the route out of the east gate, through the
 * forest and its cave; opening it restores the inn route and its cost. */
static void test_blocked_door_reroutes(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    pdc_route_req q = route_req("town", 3, 4, "cellar", 10, 2);
    pdc_route_result r;

    set_door(c, 0);
    assert_int_equal(pdc_find_route(c, &q, &r), PDC_OK);
    static const char *const around[] = {"town", "forest", "cellar"};
    check_route(c, &r, &q, around, 3);
    assert_string_equal(leg_portal(&r, 0), "east-gate");
    assert_string_equal(leg_portal(&r, 1), "forest-cave");
    assert_true(r.total_cost > T_DEMO_TOTAL);
    pdc_route_result_free(&r);

    set_door(c, 1);
    assert_int_equal(pdc_find_route(c, &q, &r), PDC_OK);
    static const char *const inn[] = {"town", "house", "cellar"};
    check_route(c, &r, &q, inn, 3);
    assert_string_equal(leg_portal(&r, 0), "inn-door");
    assert_float_equal(r.total_cost, T_DEMO_TOTAL, T_COST_EPS);
    pdc_route_result_free(&r);
    pdc_close(c);
}

/* house -> town is pinned through the cellar and its well, although going
 * straight back out of the inn door is cheaper. */
static void test_pinned_route(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    pdc_route_req q = route_req("house", 5, 7, "town", 3, 4);
    pdc_route_result r;
    assert_int_equal(pdc_find_route(c, &q, &r), PDC_OK);
    static const char *const pinned[] = {"house", "cellar", "town"};
    check_route(c, &r, &q, pinned, 3);
    assert_true(r.pinned);
    assert_string_equal(leg_portal(&r, 0), "house-stairs");
    assert_string_equal(leg_portal(&r, 1), "cellar-well");
    /* The inn door back: the house start is the door's house end (cost 0
     * to reach), the door costs 1, then town from (11,5). */
    double by_door = 1.0 + path_cost(c, "town", 0, (pdc_xy){11, 5}, (pdc_xy){3, 4});
    assert_true(by_door < r.total_cost);
    pdc_route_result_free(&r);
    pdc_close(c);
}

static pdc_xy open_anchor(pdc_conn *c, const char *scene, uint32_t unit, int32_t x0, int32_t y0);

static void test_errors(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    pdc_route_result r;

    pdc_route_req q = route_req("attic", 3, 4, "cellar", 10, 2);
    assert_int_equal(pdc_find_route(c, &q, &r), PDC_UNKNOWN_SCENE);
    assert_non_null(strstr(r.message, "attic"));
    pdc_route_result_free(&r);
    q = route_req("town", 3, 4, "attic", 10, 2);
    assert_int_equal(pdc_find_route(c, &q, &r), PDC_UNKNOWN_SCENE);
    pdc_route_result_free(&r);

    /* No portal joins the town to the dungeon at all: for unit size 1 the
     * message says so without a word on max_unit (it used to add
     * "portals with a max_unit below 1 are closed to it"). */
    q = route_req("town", 3, 4, "dungeon", 1, 1);
    pdc_xy dungeon_goal = open_anchor(c, "dungeon", 1, 1, 1);
    q.goal = pdc_cell(dungeon_goal.x, dungeon_goal.y);
    assert_int_equal(pdc_find_route(c, &q, &r), PDC_NO_PATH);
    assert_non_null(strstr(r.message, "for unit size 1: the ends are in parts of their scenes no portal open to "
                                      "this unit size connects"));
    if (strstr(r.message, "max_unit"))
        fail_msg("message: %s", r.message);
    pdc_route_result_free(&r);

    q = route_req("town", 3, 4, "cellar", 500, 2);
    assert_int_equal(pdc_find_route(c, &q, &r), PDC_OUT_OF_BOUNDS);
    assert_non_null(strstr(r.message, "goal"));
    pdc_route_result_free(&r);

    /* A wall of the cellar as the goal: GOAL_BLOCKED, or with NEAREST the
     * nearest cell the route reaches (PARTIAL, goal_used), where it ends. */
    q = route_req("town", 3, 4, "cellar", 0, 0);
    assert_int_equal(pdc_find_route(c, &q, &r), PDC_GOAL_BLOCKED);
    assert_int_equal(r.leg_count, 0);
    pdc_route_result_free(&r);
    q.goal_mode = PDC_GOAL_NEAREST;
    assert_int_equal(pdc_find_route(c, &q, &r), PDC_PARTIAL);
    assert_true(r.has_goal_used);
    assert_true(abs(r.goal_used.x) + abs(r.goal_used.y) <= 3);
    const pdc_route_leg *last = &r.legs[r.leg_count - 1];
    assert_string_equal(last->scene, "cellar");
    assert_int_equal(last->waypoints[last->count - 1].x, r.goal_used.x);
    assert_int_equal(last->waypoints[last->count - 1].y, r.goal_used.y);
    static const char *const scenes[] = {"town", "house", "cellar"};
    check_route(c, &r, &q, scenes, 3);
    pdc_route_result_free(&r);
    pdc_close(c);
}

/* A passable anchor of the unit-`unit` grid of a scene, scanning from
 * (x0, y0) row by row. */
static pdc_xy open_anchor(pdc_conn *c, const char *scene, uint32_t unit, int32_t x0, int32_t y0)
{
    pdc_grid g;
    assert_int_equal(pdc_scene_grid(c, scene, unit, &g), PDC_OK);
    for (int32_t y = y0; y < g.height; y++)
        for (int32_t x = y == y0 ? x0 : 0; x < g.width; x++)
            if (g.cells[(size_t)y * (size_t)g.width + (size_t)x] != 0) {
                pdc_grid_free(&g);
                return (pdc_xy){x, y};
            }
    pdc_grid_free(&g);
    fail_msg("no open unit-%u anchor in %s", unit, scene);
    return (pdc_xy){0, 0};
}

/* The east gate is the only way from town to the forest and lets units up
 * to size 2 through (max_unit 2): a size-1 unit takes it; a size-3 unit,
 * which town and forest both serve, is refused and has no other way.
 * (Its town end, (38,14), is one cell from the east wall, so a size-2 unit
 * cannot stand there either: the unit-size limit proper is covered by
 * test_pool's plaza-hall portal.) */
static void test_unit_size_limit(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    pdc_xy start = open_anchor(c, "town", 3, 30, 13);
    pdc_xy goal = open_anchor(c, "forest", 3, 10, 10);
    pdc_route_req q = route_req("town", start.x, start.y, "forest", goal.x, goal.y);
    pdc_route_result r;

    q.unit_size = 1;
    assert_int_equal(pdc_find_route(c, &q, &r), PDC_OK);
    static const char *const scenes[] = {"town", "forest"};
    check_route(c, &r, &q, scenes, 2);
    assert_string_equal(leg_portal(&r, 0), "east-gate");
    pdc_route_result_free(&r);

    q.unit_size = 3;
    assert_int_equal(pdc_find_route(c, &q, &r), PDC_NO_PATH);
    assert_int_equal(r.leg_count, 0);
    assert_non_null(strstr(r.message, "no walk joins 'town'"));
    assert_non_null(strstr(r.message, "for unit size 3"));
    pdc_route_result_free(&r);

    /* Size 2 is within the gate's max_unit, but cannot stand on its town
     * end: the message names that reason too (it used to blame only a
     * max_unit below 2, which the gate does not have). */
    q.unit_size = 2;
    start = open_anchor(c, "town", 2, 30, 13);
    goal = open_anchor(c, "forest", 2, 10, 10);
    q.start = pdc_cell(start.x, start.y);
    q.goal = pdc_cell(goal.x, goal.y);
    assert_int_equal(pdc_find_route(c, &q, &r), PDC_NO_PATH);
    if (!strstr(r.message, "or with an end a unit of size 2 does not fit on, are closed to it"))
        fail_msg("message: %s", r.message);
    pdc_route_result_free(&r);

    /* The cellar serves unit 1 only. */
    q = route_req("town", start.x, start.y, "cellar", 10, 2);
    q.unit_size = 3;
    assert_int_equal(pdc_find_route(c, &q, &r), PDC_INVALID_ARGUMENT);
    assert_non_null(strstr(r.message, "cellar"));
    pdc_route_result_free(&r);
    pdc_close(c);
}

/* `pathctl route --json` prints one object with the legs and the total. */
static void test_pathctl_route_json(void **state)
{
    pdi_daemon *d = *state;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' --server %s --timeout %d --json route --from town:3,4 --to cellar:10,2",
             pdi_pathctl_binary(), d->addr, PDI_CALL_TIMEOUT_MS);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char *out = malloc(T_OUTPUT_MAX + 1);
    assert_non_null(out);
    size_t len = fread(out, 1, T_OUTPUT_MAX, p);
    out[len] = '\0';
    int st = pclose(p);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* One object on one line. */
    assert_true(len > 0 && strchr(out, '\n') == out + len - 1);

    cJSON *o = cJSON_Parse(out);
    free(out);
    assert_non_null(o);
    assert_string_equal(cJSON_GetObjectItem(o, "status")->valuestring, "OK");
    assert_float_equal(cJSON_GetObjectItem(o, "total_cost")->valuedouble, T_DEMO_TOTAL, T_COST_EPS);
    assert_true(cJSON_IsNumber(cJSON_GetObjectItem(o, "expansions")));
    assert_true(cJSON_IsNumber(cJSON_GetObjectItem(o, "micros")));
    cJSON *legs = cJSON_GetObjectItem(o, "legs");
    assert_int_equal(cJSON_GetArraySize(legs), 3);
    static const char *const scenes[] = {"town", "house", "cellar"};
    static const char *const portals[] = {"inn-door", "house-stairs", NULL};
    double sum = 0;
    for (int i = 0; i < 3; i++) {
        cJSON *leg = cJSON_GetArrayItem(legs, i);
        assert_string_equal(cJSON_GetObjectItem(leg, "scene")->valuestring, scenes[i]);
        assert_true(cJSON_GetArraySize(cJSON_GetObjectItem(leg, "waypoints")) >= 1);
        sum += cJSON_GetObjectItem(leg, "cost")->valuedouble;
        cJSON *portal = cJSON_GetObjectItem(leg, "portal");
        if (!portals[i]) {
            assert_true(cJSON_IsNull(portal));
            continue;
        }
        assert_string_equal(cJSON_GetObjectItem(portal, "name")->valuestring, portals[i]);
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(portal, "exit")), 2);
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(portal, "entry")), 2);
        sum += cJSON_GetObjectItem(portal, "cost")->valuedouble;
    }
    assert_float_equal(sum, cJSON_GetObjectItem(o, "total_cost")->valuedouble, 1e-9);
    cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(legs, 0), "waypoints"), 0);
    assert_int_equal(cJSON_GetArrayItem(first, 0)->valuedouble, 3);
    assert_int_equal(cJSON_GetArrayItem(first, 1)->valuedouble, 4);
    cJSON_Delete(o);
}

/* Routes from several connections while another toggles the inn door: each
 * answer is one of the two routes, whole, with its own total. */
typedef struct route_worker {
    const pdi_daemon *d;
    int bad;
    int via_inn, via_forest;
} route_worker;

static void *route_worker_main(void *arg)
{
    route_worker *w = arg;
    pdc_conn *c = pdi_connect(w->d);
    if (!c) {
        w->bad++;
        return NULL;
    }
    pdc_route_req q = route_req("town", 3, 4, "cellar", 10, 2);
    for (int i = 0; i < T_ROUTES_PER_THREAD; i++) {
        pdc_route_result r;
        if (pdc_find_route(c, &q, &r) != PDC_OK || r.leg_count != 3 || !r.legs[0].has_portal) {
            w->bad++;
        } else {
            double sum = 0;
            for (size_t k = 0; k < r.leg_count; k++)
                sum += r.legs[k].cost + (r.legs[k].has_portal ? r.legs[k].portal_cost : 0);
            if (fabs(sum - r.total_cost) > 1e-9)
                w->bad++;
            else if (!strcmp(r.legs[0].portal, "inn-door") && fabs(r.total_cost - T_DEMO_TOTAL) < T_COST_EPS)
                w->via_inn++;
            else if (!strcmp(r.legs[0].portal, "east-gate"))
                w->via_forest++;
            else
                w->bad++;
        }
        pdc_route_result_free(&r);
    }
    pdc_close(c);
    return NULL;
}

static void test_routes_while_door_toggles(void **state)
{
    pdi_daemon *d = *state;
    route_worker w[T_ROUTE_THREADS];
    pthread_t t[T_ROUTE_THREADS];
    for (int i = 0; i < T_ROUTE_THREADS; i++) {
        w[i] = (route_worker){d, 0, 0, 0};
        assert_int_equal(pthread_create(&t[i], NULL, route_worker_main, &w[i]), 0);
    }
    pdc_conn *c = pdi_connect(d);
    for (int i = 0; i < T_DOOR_TOGGLES; i++) {
        set_door(c, i % 2);
        pdi_sleep_ms(5);
    }
    set_door(c, 1);
    int via_inn = 0, via_forest = 0;
    for (int i = 0; i < T_ROUTE_THREADS; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(w[i].bad, 0);
        via_inn += w[i].via_inn;
        via_forest += w[i].via_forest;
    }
    assert_int_equal(via_inn + via_forest, T_ROUTE_THREADS * T_ROUTES_PER_THREAD);
    /* The door is open again: the next route is the inn route. */
    pdc_route_req q = route_req("town", 3, 4, "cellar", 10, 2);
    pdc_route_result r;
    assert_int_equal(pdc_find_route(c, &q, &r), PDC_OK);
    assert_string_equal(leg_portal(&r, 0), "inn-door");
    pdc_route_result_free(&r);
    pdc_close(c);
}

/* Reloads the config text and waits until the daemon has logged
 * "reloaded " `count` times in all. */
static void reload_demo(pdi_daemon *d, int misfit, int count)
{
    char *text = demo_config_text(d, misfit);
    assert_int_equal(pdi_write_config_text(d, text), 0);
    free(text);
    assert_int_equal(pdi_daemon_signal(d, SIGHUP), 0);
    double deadline = pdi_now_ms() + T_RELOAD_TIMEOUT_MS;
    while (pdi_log_count(d, "reloaded ") < count && pdi_now_ms() < deadline)
        pdi_sleep_ms(20);
    assert_int_equal(pdi_log_count(d, "reloaded "), count);
}

/* The demo route, checked in full. */
static void expect_demo_route(pdc_conn *c)
{
    pdc_route_req q = route_req("town", 3, 4, "cellar", 10, 2);
    pdc_route_result r;
    assert_int_equal(pdc_find_route(c, &q, &r), PDC_OK);
    static const char *const scenes[] = {"town", "house", "cellar"};
    check_route(c, &r, &q, scenes, 3);
    assert_string_equal(leg_portal(&r, 0), "inn-door");
    assert_float_equal(r.total_cost, T_DEMO_TOTAL, T_COST_EPS);
    pdc_route_result_free(&r);
}

/* A reload whose portals do not fit its maps changes nothing: one
 * transaction, so the scenes stay at their versions (and keep their
 * updates) and the previous world keeps answering routes; the next reload
 * that fits replaces everything. */
static void test_reload_world_refused(void **state)
{
    pdi_daemon *d = *state;
    int reloaded = pdi_log_count(d, "reloaded ");
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    pdc_scene_details before;
    assert_int_equal(pdc_scene_info(c, "town", &before), PDC_OK);
    assert_int_equal(pdi_log_count(d, "portals and routes of"), 0);
    char *text = demo_config_text(d, 1);
    assert_int_equal(pdi_write_config_text(d, text), 0);
    free(text);
    assert_int_equal(pdi_daemon_signal(d, SIGHUP), 0);
    assert_int_equal(pdi_wait_log(d, "portals and routes of", T_RELOAD_TIMEOUT_MS), 1);
    assert_true(pdi_log_contains(d, "reload refused: portals and routes of"));
    assert_true(pdi_log_contains(d, "portal 'inn-door': cell 999,5 is outside scene 'town'"));
    assert_int_equal(pdi_log_count(d, "reloaded "), reloaded);
    pdc_scene_details after;
    assert_int_equal(pdc_scene_info(c, "town", &after), PDC_OK);
    assert_int_equal(after.version, before.version);
    pdc_scene_details_free(&before);
    pdc_scene_details_free(&after);
    expect_demo_route(c);

    reload_demo(d, 0, reloaded + 1);
    assert_int_equal(pdi_log_count(d, "portals and routes of"), 1);
    expect_demo_route(c);
    pdc_close(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_demo_route),
        cmocka_unit_test(test_one_way_well),
        cmocka_unit_test(test_blocked_door_reroutes),
        cmocka_unit_test(test_pinned_route),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_unit_size_limit),
        cmocka_unit_test(test_pathctl_route_json),
        cmocka_unit_test(test_routes_while_door_toggles),
        cmocka_unit_test(test_reload_world_refused),
    };
    return cmocka_run_group_tests(tests, setup, pdi_fixture_stop);
}
