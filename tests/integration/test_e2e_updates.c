/*
 * test_e2e_updates.c - live cell updates through the real daemon (issue 4).
 *
 * UpdateCells must produce a new scene version that the next path runs on
 * and reports, with the per-unit grids and component labels repaired (a
 * blocked corridor is detoured around, a cut-off unit gets NO_PATH without
 * searching, an opened wall lets a bigger unit through); undoing a change
 * restores the old cost; a change that changes nothing keeps the version;
 * bad updates get a clear status and change nothing; a search already in
 * flight finishes on the version it started on. Finally several connections
 * on their own threads send updates to distinct cells while others keep
 * asking for paths: every update lands (the versions they got are exactly
 * initial+1 .. initial+count) and no path uses a cell whose blocking was
 * acknowledged before the path was asked for.
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

#define T_EPS 1e-6
#define T_UNITS_MAP PD_TEST_DATA_DIR "/e2e4_units.txt"
#define T_TERRAIN_MAP PD_TEST_DATA_DIR "/e2e4_terrain.txt"
/* The open scene the concurrent updates go to: side in cells. */
#define T_OPEN_SIDE 64
/* Threads sending updates, updates each, and threads asking for paths
 * meanwhile. Every update blocks one cell of the lattice of odd (x, y),
 * so no update can cut the open scene apart. */
#define T_UPDATERS 4
#define T_UPDATES_EACH 16
#define T_PATHERS 2
#define T_UPDATE_TOTAL (T_UPDATERS * T_UPDATES_EACH)
#define T_LATTICE_ROW ((T_OPEN_SIDE - 1) / 2)
/* Room for the scenes this file adds to the harness config. */
#define T_SCENES_JSON 1024

typedef struct t_state {
    pdi_daemon *d;
    char open_map[PDI_PATH_MAX];
} t_state;

static int setup(void **state)
{
    t_state *t = calloc(1, sizeof *t);
    if (!t)
        return -1;
    char text[T_OPEN_SIDE * (T_OPEN_SIDE + 1) + 1];
    for (int y = 0; y < T_OPEN_SIDE; y++) {
        memset(text + y * (T_OPEN_SIDE + 1), '.', T_OPEN_SIDE);
        text[y * (T_OPEN_SIDE + 1) + T_OPEN_SIDE] = '\n';
    }
    text[sizeof text - 1] = '\0';
    if (pdi_write_temp_map(text, t->open_map, sizeof t->open_map) != 0) {
        free(t);
        return -1;
    }
    char scenes[T_SCENES_JSON];
    snprintf(scenes, sizeof scenes,
             ",\n    {\"name\": \"upd_units\", \"map\": \"%s\", \"format\": \"ascii\", \"unit_sizes\": [1, 2, 3]}"
             ",\n    {\"name\": \"upd_terrain\", \"map\": \"%s\", \"format\": \"ascii\"}"
             ",\n    {\"name\": \"open\", \"map\": \"%s\", \"format\": \"ascii\"}",
             T_UNITS_MAP, T_TERRAIN_MAP, t->open_map);
    pdi_limits l = {0};
    l.extra_scenes_json = scenes;
    void *d = NULL;
    if (pdi_fixture_start(&d, &l) != 0) {
        unlink(t->open_map);
        free(t);
        return -1;
    }
    t->d = d;
    *state = t;
    return 0;
}

static int teardown(void **state)
{
    t_state *t = *state;
    void *d = t->d;
    int rc = pdi_fixture_stop(&d);
    unlink(t->open_map);
    free(t);
    return rc;
}

static uint64_t t_version(pdc_conn *c, const char *scene)
{
    pdc_scene_details info = {0};
    assert_int_equal(pdc_scene_info(c, scene, &info), PDC_OK);
    uint64_t v = info.version;
    pdc_scene_details_free(&info);
    return v;
}

static int t_path(pdc_conn *c, const char *scene, uint32_t unit, int32_t sx, int32_t sy, int32_t gx, int32_t gy,
                  pdc_path_result *r)
{
    pdc_path_req req = {0};
    req.scene = scene;
    req.unit_size = unit;
    req.start = pdc_cell(sx, sy);
    req.goal = pdc_cell(gx, gy);
    memset(r, 0, sizeof *r);
    return pdc_find_path(c, &req, r);
}

/* Applies op to the rectangle, requiring OK; returns the answer. */
static pdc_update_result t_update_rect(pdc_conn *c, const char *scene, int32_t x0, int32_t y0, int32_t x1,
                                       int32_t y1, pdc_update_op op, uint32_t cost)
{
    pdc_update_req up = {0};
    up.scene = scene;
    up.is_rect = 1;
    up.rect_min = (pdc_xy){x0, y0};
    up.rect_max = (pdc_xy){x1, y1};
    up.op = op;
    up.cost = cost;
    pdc_update_result ur;
    memset(&ur, 0, sizeof ur);
    int st = pdc_update_cells(c, &up, &ur);
    if (st != PDC_OK)
        fail_msg("update %s (%d,%d)-(%d,%d) op %d: %s (%s)", scene, x0, y0, x1, y1, (int)op, pdc_status_name(st),
                 pdc_last_error(c));
    return ur;
}

/* Mirrors an update in the oracle's grid (cost 0 = blocked). */
static void t_grid_set(pdi_grid *g, int32_t x0, int32_t y0, int32_t x1, int32_t y1, uint8_t cost)
{
    for (int32_t y = y0; y <= y1; y++)
        for (int32_t x = x0; x <= x1; x++)
            g->cost[(size_t)y * (size_t)g->width + (size_t)x] = cost;
}

/* The path is legal on g for the unit and as cheap as the oracle says. */
static void t_check(const pdi_grid *g, uint32_t unit, const pdc_path_result *r, int32_t sx, int32_t sy, int32_t gx,
                    int32_t gy)
{
    pdi_rules rules = {.unit = unit};
    char why[256];
    double walked = 0;
    assert_true(r->count >= 1);
    assert_int_equal(r->waypoints[0].x, sx);
    assert_int_equal(r->waypoints[0].y, sy);
    assert_int_equal(r->waypoints[r->count - 1].x, gx);
    assert_int_equal(r->waypoints[r->count - 1].y, gy);
    if (pdi_rules_path_cost(g, &rules, r->waypoints, r->count, &walked, why, sizeof why) != 0)
        fail_msg("unit %u (%d,%d)->(%d,%d) at version %llu: %s", unit, sx, sy, gx, gy,
                 (unsigned long long)r->scene_version, why);
    double oracle = pdi_rules_dijkstra(g, &rules, sx, sy, gx, gy);
    if (fabs(oracle - r->cost) > T_EPS || fabs(walked - r->cost) > T_EPS)
        fail_msg("unit %u (%d,%d)->(%d,%d) at version %llu: cost %.9f, walked %.9f, Dijkstra %.9f", unit, sx, sy,
                 gx, gy, (unsigned long long)r->scene_version, r->cost, walked, oracle);
}

/* Block the 1-wide corridor, detour, no-op, unblock, restored. */
static void test_block_corridor_and_restore(void **state)
{
    t_state *t = *state;
    pdi_grid g;
    assert_int_equal(pdi_grid_load_ascii(&g, T_UNITS_MAP), 0);
    pdc_conn *c = pdi_connect(t->d);
    assert_non_null(c);
    const char *s = "upd_units";
    uint64_t v0 = t_version(c, s);
    pdc_path_result r, r2;

    assert_int_equal(t_path(c, s, 1, 2, 6, 26, 6, &r), PDC_OK);
    assert_int_equal(r.scene_version, v0);
    t_check(&g, 1, &r, 2, 6, 26, 6);
    double before = r.cost;
    pdc_path_result_free(&r);
    assert_int_equal(t_path(c, s, 2, 2, 8, 25, 8, &r2), PDC_OK);
    double before2 = r2.cost;
    pdc_path_result_free(&r2);

    pdc_update_result ur = t_update_rect(c, s, 10, 8, 12, 8, PDC_UPDATE_BLOCK, 0);
    assert_int_equal(ur.version, v0 + 1);
    assert_int_equal(ur.cells_changed, 3);
    t_grid_set(&g, 10, 8, 12, 8, 0);
    assert_int_equal(t_version(c, s), v0 + 1);
    assert_int_equal(t_path(c, s, 1, 2, 6, 26, 6, &r), PDC_OK);
    assert_int_equal(r.scene_version, v0 + 1);
    t_check(&g, 1, &r, 2, 6, 26, 6);
    assert_true(r.cost > before + 1);
    pdc_path_result_free(&r);
    /* Unit 2 never used that corridor: same cost, on the new version. */
    assert_int_equal(t_path(c, s, 2, 2, 8, 25, 8, &r2), PDC_OK);
    assert_int_equal(r2.scene_version, v0 + 1);
    assert_true(fabs(r2.cost - before2) <= T_EPS);
    pdc_path_result_free(&r2);

    /* Blocking blocked cells changes nothing: same version. */
    ur = t_update_rect(c, s, 10, 8, 12, 8, PDC_UPDATE_BLOCK, 0);
    assert_int_equal(ur.version, v0 + 1);
    assert_int_equal(ur.cells_changed, 0);
    assert_int_equal(t_version(c, s), v0 + 1);

    /* A list of cells, partly changing: only the open one counts. */
    const pdc_xy cells[] = {{11, 8}, {15, 8}};
    pdc_update_req up = {0};
    up.scene = s;
    up.cells = cells;
    up.cell_count = 2;
    up.op = PDC_UPDATE_BLOCK;
    assert_int_equal(pdc_update_cells(c, &up, &ur), PDC_OK);
    assert_int_equal(ur.version, v0 + 2);
    assert_int_equal(ur.cells_changed, 1);

    /* Unblocking restores the old cost. */
    ur = t_update_rect(c, s, 7, 8, 22, 8, PDC_UPDATE_PASS, 0);
    assert_int_equal(ur.version, v0 + 3);
    assert_int_equal(ur.cells_changed, 4);
    t_grid_set(&g, 7, 8, 22, 8, 1);
    assert_int_equal(t_path(c, s, 1, 2, 6, 26, 6, &r), PDC_OK);
    assert_int_equal(r.scene_version, v0 + 3);
    assert_true(fabs(r.cost - before) <= T_EPS);
    t_check(&g, 1, &r, 2, 6, 26, 6);
    pdc_path_result_free(&r);
    pdc_close(c);
    pdi_grid_free(&g);
}

/* Updates repair the per-unit grids and component labels: cutting unit 2's
 * only corridor makes its query NO_PATH without a search, opening the wall
 * under the 1-wide corridor gives unit 2 the short way (but not unit 3). */
static void test_unit_grids_follow_updates(void **state)
{
    t_state *t = *state;
    pdi_grid g;
    assert_int_equal(pdi_grid_load_ascii(&g, T_UNITS_MAP), 0);
    pdc_conn *c = pdi_connect(t->d);
    assert_non_null(c);
    const char *s = "upd_units";
    uint64_t v0 = t_version(c, s);
    pdc_path_result r;

    assert_int_equal(t_update_rect(c, s, 15, 1, 15, 1, PDC_UPDATE_BLOCK, 0).version, v0 + 1);
    assert_int_equal(t_path(c, s, 2, 2, 8, 25, 8, &r), PDC_NO_PATH);
    assert_int_equal(r.expansions, 0);
    assert_int_equal(r.scene_version, v0 + 1);
    pdc_path_result_free(&r);
    /* Unit 1 still squeezes past on row 2. */
    t_grid_set(&g, 15, 1, 15, 1, 0);
    assert_int_equal(t_path(c, s, 1, 4, 1, 25, 2, &r), PDC_OK);
    t_check(&g, 1, &r, 4, 1, 25, 2);
    pdc_path_result_free(&r);
    assert_int_equal(t_update_rect(c, s, 15, 1, 15, 1, PDC_UPDATE_PASS, 0).version, v0 + 2);
    t_grid_set(&g, 15, 1, 15, 1, 1);
    assert_int_equal(t_path(c, s, 2, 2, 8, 25, 8, &r), PDC_OK);
    t_check(&g, 2, &r, 2, 8, 25, 8);
    double over_the_top = r.cost;
    pdc_path_result_free(&r);

    /* Row 9 under the corridor opens: a 2-wide passage. */
    pdc_update_result ur = t_update_rect(c, s, 7, 9, 22, 9, PDC_UPDATE_PASS, 0);
    assert_int_equal(ur.version, v0 + 3);
    assert_int_equal(ur.cells_changed, 16);
    t_grid_set(&g, 7, 9, 22, 9, 1);
    assert_int_equal(t_path(c, s, 2, 2, 8, 25, 8, &r), PDC_OK);
    t_check(&g, 2, &r, 2, 8, 25, 8);
    assert_true(r.cost < over_the_top - 1);
    pdc_path_result_free(&r);
    assert_int_equal(t_path(c, s, 3, 2, 8, 24, 8, &r), PDC_NO_PATH);
    assert_int_equal(r.expansions, 0);
    pdc_path_result_free(&r);

    assert_int_equal(t_update_rect(c, s, 7, 9, 22, 9, PDC_UPDATE_BLOCK, 0).version, v0 + 4);
    t_grid_set(&g, 7, 9, 22, 9, 0);
    assert_int_equal(t_path(c, s, 2, 2, 8, 25, 8, &r), PDC_OK);
    assert_true(fabs(r.cost - over_the_top) <= T_EPS);
    pdc_path_result_free(&r);
    pdc_close(c);
    pdi_grid_free(&g);
}

/* A cost update decides whether the patch is crossed or walked around. */
static void test_cost_update_changes_route(void **state)
{
    t_state *t = *state;
    pdi_grid g;
    assert_int_equal(pdi_grid_load_ascii(&g, T_TERRAIN_MAP), 0);
    pdc_conn *c = pdi_connect(t->d);
    assert_non_null(c);
    const char *s = "upd_terrain";
    uint64_t v0 = t_version(c, s);
    pdc_path_result r;
    /* The lower hall's cost-2 patch (x 9..10, rows 7..10) is crossed. */
    assert_int_equal(t_path(c, s, 1, 1, 8, 18, 8, &r), PDC_OK);
    t_check(&g, 1, &r, 1, 8, 18, 8);
    double crossing = r.cost;
    size_t on_patch = 0;
    for (size_t i = 0; i < r.count; i++)
        on_patch += r.waypoints[i].x >= 9 && r.waypoints[i].x <= 10 && r.waypoints[i].y <= 10;
    assert_true(on_patch > 0);
    pdc_path_result_free(&r);

    pdc_update_result ur = t_update_rect(c, s, 9, 7, 10, 10, PDC_UPDATE_COST, 9);
    assert_int_equal(ur.version, v0 + 1);
    assert_int_equal(ur.cells_changed, 8);
    t_grid_set(&g, 9, 7, 10, 10, 9);
    assert_int_equal(t_path(c, s, 1, 1, 8, 18, 8, &r), PDC_OK);
    t_check(&g, 1, &r, 1, 8, 18, 8);
    for (size_t i = 0; i < r.count; i++)
        assert_false(r.waypoints[i].x >= 9 && r.waypoints[i].x <= 10 && r.waypoints[i].y <= 10);
    assert_true(r.cost > crossing);
    pdc_path_result_free(&r);

    ur = t_update_rect(c, s, 9, 7, 10, 10, PDC_UPDATE_COST, 2);
    assert_int_equal(ur.version, v0 + 2);
    assert_int_equal(t_path(c, s, 1, 1, 8, 18, 8, &r), PDC_OK);
    assert_true(fabs(r.cost - crossing) <= T_EPS);
    pdc_path_result_free(&r);
    pdc_close(c);
    pdi_grid_free(&g);
}

/* One UpdateCells sent as raw frames: the status of its answer. */
typedef struct t_raw_update {
    const char *scene;
    int target;                    /* 0 none, 1 rect, 2 cells */
    int32_t x0, y0, x1, y1;        /* rect, or the one cell (x0, y0) */
    int has_max;                   /* rect: 0 leaves max unset */
    size_t n_cells;                /* cells: 0 or 1 */
    int op;
    uint32_t cost;
} t_raw_update;

/* The answer's status; message (may be NULL) gets its message. */
static int t_raw_update_status(const pdi_daemon *d, uint64_t id, const t_raw_update *u, char *message, size_t cap)
{
    Pathd__V1__Request req = PATHD__V1__REQUEST__INIT;
    Pathd__V1__UpdateCells uc = PATHD__V1__UPDATE_CELLS__INIT;
    Pathd__V1__Rect rect = PATHD__V1__RECT__INIT;
    Pathd__V1__Cell lo = PATHD__V1__CELL__INIT, hi = PATHD__V1__CELL__INIT;
    Pathd__V1__CellList list = PATHD__V1__CELL_LIST__INIT;
    Pathd__V1__Cell *one[1] = {&lo};
    lo.x = u->x0;
    lo.y = u->y0;
    hi.x = u->x1;
    hi.y = u->y1;
    uc.scene = (char *)u->scene;
    uc.op = (Pathd__V1__UpdateOp)u->op;
    uc.cost = u->cost;
    if (u->target == 1) {
        rect.min = &lo;
        rect.max = u->has_max ? &hi : NULL;
        uc.target_case = PATHD__V1__UPDATE_CELLS__TARGET_RECT;
        uc.rect = &rect;
    } else if (u->target == 2) {
        list.n_cells = u->n_cells;
        list.cells = one;
        uc.target_case = PATHD__V1__UPDATE_CELLS__TARGET_CELLS;
        uc.cells = &list;
    }
    req.id = id;
    req.body_case = PATHD__V1__REQUEST__BODY_UPDATE_CELLS;
    req.update_cells = &uc;
    int fd = pdi_raw_connect(d->port);
    assert_true(fd >= 0);
    assert_int_equal(pdi_raw_send_request(fd, &req), 0);
    Pathd__V1__Response *resp = pdi_raw_recv_final(fd, id, PDI_CALL_TIMEOUT_MS);
    assert_non_null(resp);
    int st = (int)resp->status;
    if (message)
        snprintf(message, cap, "%s",
                 resp->body_case == PATHD__V1__RESPONSE__BODY_ERROR && resp->error->message ? resp->error->message : "");
    pathd__v1__response__free_unpacked(resp, NULL);
    close(fd);
    return st;
}

/* Bad updates get their status and change nothing; one outside the scene
 * names the cell or rectangle and the scene's size (the message used to
 * be "update of scene 'upd_units' failed: OUT_OF_BOUNDS", no more). */
static void test_invalid_updates(void **state)
{
    t_state *t = *state;
    pdc_conn *c = pdi_connect(t->d);
    assert_non_null(c);
    const char *s = "upd_units";
    uint64_t v0 = t_version(c, s);
    static const struct {
        t_raw_update u;
        int want;
        const char *message; /* in the answer's message, when not NULL */
    } cases[] = {
        {{"upd_units", 1, 25, 0, 30, 5, 1, 0, 0, 0}, PDC_OUT_OF_BOUNDS,        /* x 30 is past the edge */
         "update of scene 'upd_units' failed: rect (25,0)-(30,5) reaches outside the scene (30x16)"},
        {{"upd_units", 1, -1, 0, 3, 3, 1, 0, 0, 0}, PDC_OUT_OF_BOUNDS,
         "rect (-1,0)-(3,3) reaches outside the scene (30x16)"},
        {{"upd_units", 2, 3, 16, 0, 0, 0, 1, 0, 0}, PDC_OUT_OF_BOUNDS,         /* cell below the last row */
         "update of scene 'upd_units' failed: cell (3,16) is outside the scene (30x16)"},
        {{"upd_units", 1, 5, 5, 2, 2, 1, 0, 0, 0}, PDC_INVALID_ARGUMENT, NULL},      /* min > max */
        {{"upd_units", 1, 5, 5, 0, 0, 0, 0, 0, 0}, PDC_INVALID_ARGUMENT, NULL},      /* no max corner */
        {{"upd_units", 2, 0, 0, 0, 0, 0, 0, 0, 0}, PDC_INVALID_ARGUMENT, NULL},      /* empty cell list */
        {{"upd_units", 0, 0, 0, 0, 0, 0, 0, 0, 0}, PDC_INVALID_ARGUMENT, NULL},      /* no target */
        {{"upd_units", 1, 1, 5, 2, 6, 1, 0, 2, 0}, PDC_INVALID_ARGUMENT, NULL},      /* UPDATE_COST, cost 0 */
        {{"upd_units", 1, 1, 5, 2, 6, 1, 0, 2, 256}, PDC_INVALID_ARGUMENT, NULL},    /* cost above 255 */
        {{"upd_units", 1, 1, 5, 2, 6, 1, 0, 0, 5}, PDC_INVALID_ARGUMENT, NULL},      /* a cost with BLOCK */
        {{"upd_units", 1, 1, 5, 2, 6, 1, 0, 1, 5}, PDC_INVALID_ARGUMENT, NULL},      /* a cost with PASS */
        {{"upd_units", 1, 1, 5, 2, 6, 1, 0, 7, 0}, PDC_INVALID_ARGUMENT, NULL},      /* unknown op */
        {{"no_such_scene", 1, 1, 5, 2, 6, 1, 0, 0, 0}, PDC_UNKNOWN_SCENE, NULL},
        {{"", 1, 1, 5, 2, 6, 1, 0, 0, 0}, PDC_INVALID_ARGUMENT, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char message[256];
        int st = t_raw_update_status(t->d, 50 + i, &cases[i].u, message, sizeof message);
        if (st != cases[i].want)
            fail_msg("invalid update case %zu: %s, expected %s", i, pdc_status_name(st),
                     pdc_status_name(cases[i].want));
        if (cases[i].message && !strstr(message, cases[i].message))
            fail_msg("invalid update case %zu: message \"%s\", expected \"%s\" in it", i, message,
                     cases[i].message);
    }
    assert_int_equal(t_version(c, s), v0);
    /* The client library refuses what it can see is wrong before sending. */
    pdc_update_req up = {0};
    up.scene = s;
    up.is_rect = 1;
    up.rect_min = (pdc_xy){1, 5};
    up.rect_max = (pdc_xy){2, 6};
    up.op = PDC_UPDATE_COST;
    up.cost = 0;
    pdc_update_result ur;
    int st = pdc_update_cells(c, &up, &ur);
    assert_int_equal(st, PDC_ERR_ARG);
    assert_int_equal(t_version(c, s), v0);
    pdc_close(c);
}

/* A search that arrived before an update runs on the old version, even
 * though the update is answered first. */
static void test_inflight_search_keeps_its_version(void **state)
{
    t_state *t = *state;
    pdc_conn *c = pdi_connect(t->d);
    assert_non_null(c);
    uint64_t v0 = t_version(c, "serpent");
    int32_t gx, gy;
    pdi_serpent_goal(&gx, &gy);
    pdc_path_req req = {0};
    req.scene = "serpent";
    req.start = pdc_cell(0, 0);
    req.goal = pdc_cell(gx, gy);
    req.style = PDC_STYLE_CORNERS;
    uint64_t id;
    assert_int_equal(pdc_send_find_path(c, &req, &id), PDC_OK);
    /* The first wall's gap is at its right end: closing it cuts the path. */
    pdc_update_result ur = t_update_rect(c, "serpent", PDI_SERPENT_SIZE - 1, 1, PDI_SERPENT_SIZE - 1, 1,
                                         PDC_UPDATE_BLOCK, 0);
    assert_int_equal(ur.version, v0 + 1);
    pdc_path_result r;
    memset(&r, 0, sizeof r);
    assert_int_equal(pdc_recv_result(c, PDI_CALL_TIMEOUT_MS, &r), PDC_OK);
    assert_int_equal(r.id, id);
    assert_int_equal(r.scene_version, v0);
    assert_true(fabs(r.cost - pdi_serpent_cost()) <= T_EPS);
    pdc_path_result_free(&r);

    /* Asked now, the goal is cut off: NO_PATH from the labels. */
    assert_int_equal(pdc_find_path(c, &req, &r), PDC_NO_PATH);
    assert_int_equal(r.scene_version, v0 + 1);
    assert_int_equal(r.expansions, 0);
    pdc_path_result_free(&r);
    ur = t_update_rect(c, "serpent", PDI_SERPENT_SIZE - 1, 1, PDI_SERPENT_SIZE - 1, 1, PDC_UPDATE_PASS, 0);
    assert_int_equal(ur.version, v0 + 2);
    pdc_close(c);
}

/* ---- concurrent updates -------------------------------------------------- */

typedef struct t_shared {
    const pdi_daemon *d;
    pthread_mutex_t lock;
    /* Per lattice cell: the version its update produced, once acknowledged. */
    uint64_t acked[T_UPDATE_TOTAL];
    int updaters_done;
    char failure[256];
} t_shared;

typedef struct t_worker {
    t_shared *sh;
    int index;
    size_t answered;
} t_worker;

static pdc_xy t_lattice_cell(int k)
{
    return (pdc_xy){1 + 2 * (k % T_LATTICE_ROW), 1 + 2 * (k / T_LATTICE_ROW)};
}

static void t_fail(t_shared *sh, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void t_fail(t_shared *sh, const char *fmt, ...)
{
    pthread_mutex_lock(&sh->lock);
    if (!sh->failure[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(sh->failure, sizeof sh->failure, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&sh->lock);
}

static void *t_updater(void *arg)
{
    t_worker *w = arg;
    pdc_conn *c = pdi_connect(w->sh->d);
    if (!c) {
        t_fail(w->sh, "updater %d cannot connect", w->index);
        return NULL;
    }
    for (int i = 0; i < T_UPDATES_EACH; i++) {
        int k = w->index * T_UPDATES_EACH + i;
        pdc_update_req up = {0};
        pdc_xy cell = t_lattice_cell(k);
        up.scene = "open";
        up.cells = &cell;
        up.cell_count = 1;
        up.op = PDC_UPDATE_BLOCK;
        pdc_update_result ur;
        int st = pdc_update_cells(c, &up, &ur);
        if (st != PDC_OK || ur.cells_changed != 1) {
            t_fail(w->sh, "update of (%d,%d): %s, %llu cells changed", cell.x, cell.y, pdc_status_name(st),
                   (unsigned long long)ur.cells_changed);
            break;
        }
        pthread_mutex_lock(&w->sh->lock);
        w->sh->acked[k] = ur.version;
        pthread_mutex_unlock(&w->sh->lock);
        w->answered++;
    }
    pdc_close(c);
    return NULL;
}

/* Asks for corner-to-corner paths until the updaters are done; a path must
 * run on a version at least as new as every update acknowledged before it
 * was asked for, and must not enter any of those cells. */
static void *t_pather(void *arg)
{
    t_worker *w = arg;
    t_shared *sh = w->sh;
    pdc_conn *c = pdi_connect(sh->d);
    if (!c) {
        t_fail(sh, "pather %d cannot connect", w->index);
        return NULL;
    }
    for (int last = 0; !last;) {
        uint64_t acked[T_UPDATE_TOTAL];
        pthread_mutex_lock(&sh->lock);
        memcpy(acked, sh->acked, sizeof acked);
        last = sh->updaters_done;
        pthread_mutex_unlock(&sh->lock);
        pdc_path_result r;
        memset(&r, 0, sizeof r);
        pdc_path_req req = {0};
        req.scene = "open";
        req.start = pdc_cell(w->index ? T_OPEN_SIDE - 1 : 0, 0);
        req.goal = pdc_cell(w->index ? 0 : T_OPEN_SIDE - 1, T_OPEN_SIDE - 1);
        int st = pdc_find_path(c, &req, &r);
        if (st != PDC_OK) {
            t_fail(sh, "pather %d: %s (%s)", w->index, pdc_status_name(st), r.message);
            pdc_path_result_free(&r);
            break;
        }
        for (int k = 0; k < T_UPDATE_TOTAL; k++) {
            if (!acked[k])
                continue;
            pdc_xy cell = t_lattice_cell(k);
            if (r.scene_version < acked[k])
                t_fail(sh, "path ran on version %llu after version %llu was acknowledged",
                       (unsigned long long)r.scene_version, (unsigned long long)acked[k]);
            for (size_t i = 0; i < r.count; i++)
                if (r.waypoints[i].x == cell.x && r.waypoints[i].y == cell.y)
                    t_fail(sh, "path at version %llu enters (%d,%d), blocked at version %llu",
                           (unsigned long long)r.scene_version, cell.x, cell.y, (unsigned long long)acked[k]);
        }
        pdc_path_result_free(&r);
        w->answered++;
    }
    pdc_close(c);
    return NULL;
}

static void test_concurrent_updates_all_land(void **state)
{
    t_state *t = *state;
    pdc_conn *c = pdi_connect(t->d);
    assert_non_null(c);
    pdc_scene_details info = {0};
    assert_int_equal(pdc_scene_info(c, "open", &info), PDC_OK);
    uint64_t v0 = info.version, passable0 = info.passable_cells;
    pdc_scene_details_free(&info);

    t_shared *sh = calloc(1, sizeof *sh);
    assert_non_null(sh);
    sh->d = t->d;
    pthread_mutex_init(&sh->lock, NULL);
    t_worker up[T_UPDATERS], pa[T_PATHERS];
    pthread_t up_t[T_UPDATERS], pa_t[T_PATHERS];
    for (int i = 0; i < T_PATHERS; i++) {
        pa[i] = (t_worker){sh, i, 0};
        assert_int_equal(pthread_create(&pa_t[i], NULL, t_pather, &pa[i]), 0);
    }
    for (int i = 0; i < T_UPDATERS; i++) {
        up[i] = (t_worker){sh, i, 0};
        assert_int_equal(pthread_create(&up_t[i], NULL, t_updater, &up[i]), 0);
    }
    for (int i = 0; i < T_UPDATERS; i++)
        pthread_join(up_t[i], NULL);
    pthread_mutex_lock(&sh->lock);
    sh->updaters_done = 1;
    pthread_mutex_unlock(&sh->lock);
    for (int i = 0; i < T_PATHERS; i++)
        pthread_join(pa_t[i], NULL);
    pthread_mutex_destroy(&sh->lock);
    if (sh->failure[0]) {
        char msg[sizeof sh->failure];
        memcpy(msg, sh->failure, sizeof msg);
        free(sh);
        pdc_close(c);
        fail_msg("%s", msg);
    }
    for (int i = 0; i < T_PATHERS; i++)
        assert_true(pa[i].answered >= 1);

    /* Every update got its own version, and together they are exactly
     * v0+1 .. v0+count: none lost, none applied twice. */
    uint64_t versions[T_UPDATE_TOTAL];
    memcpy(versions, sh->acked, sizeof versions);
    free(sh);
    qsort(versions, T_UPDATE_TOTAL, sizeof versions[0], pdi_cmp_u64);
    for (int k = 0; k < T_UPDATE_TOTAL; k++)
        assert_int_equal(versions[k], v0 + 1 + (uint64_t)k);
    assert_int_equal(pdc_scene_info(c, "open", &info), PDC_OK);
    assert_int_equal(info.version, v0 + T_UPDATE_TOTAL);
    assert_int_equal(info.passable_cells, passable0 - T_UPDATE_TOTAL);
    pdc_scene_details_free(&info);
    /* And each cell is blocked now. */
    for (int k = 0; k < T_UPDATE_TOTAL; k++) {
        pdc_xy cell = t_lattice_cell(k);
        pdc_path_result r;
        memset(&r, 0, sizeof r);
        pdc_path_req req = {0};
        req.scene = "open";
        req.start = pdc_cell(0, 0);
        req.goal = pdc_cell(cell.x, cell.y);
        assert_int_equal(pdc_find_path(c, &req, &r), PDC_GOAL_BLOCKED);
        pdc_path_result_free(&r);
    }
    print_message("concurrent updates: %d updates from %d connections; %zu + %zu paths answered meanwhile\n",
                  T_UPDATE_TOTAL, T_UPDATERS, pa[0].answered, pa[1].answered);
    pdc_close(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_block_corridor_and_restore),
        cmocka_unit_test(test_unit_grids_follow_updates),
        cmocka_unit_test(test_cost_update_changes_route),
        cmocka_unit_test(test_invalid_updates),
        cmocka_unit_test(test_inflight_search_keeps_its_version),
        cmocka_unit_test(test_concurrent_updates_all_land),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
