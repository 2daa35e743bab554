/*
 * test_tiled_cost.c - what a Tiled or LDtk map may cost before it is
 * refused (issue 29, findings 6 and 7): polygon colliders drawn row by row
 * to exactly the cells the per-cell rule gives (compared with that rule on
 * random polygons), the colliders' work budget, the cells cap checked
 * before a layer is decoded, and the control's poll stopping a load.
 *
 * Work is measured by the poll's calls (one per PD_MAP_POLL_CELLS cells of
 * work), never by the clock.
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

#include "pd_ldtk.h"
#include "pd_tiled.h"
#include "test_rng.h"
#include "zero_map.h"

#define DEG (3.14159265358979323846 / 180.0)

/* ---- the per-cell rule, as pd_tiled.h states it ---- */

typedef struct ref_poly {
    double x, y, rot;
    double pts[2 * 64];
    size_t n;
} ref_poly;

/* Whether the centre (px, py) lies inside p: local frame, crossing number;
 * the expression pd_tiled.c evaluated at every cell before the fill. */
static int ref_covers(const ref_poly *p, double px, double py)
{
    double c = cos(p->rot * DEG), s = sin(p->rot * DEG);
    double dx = px - p->x, dy = py - p->y;
    double lx = c * dx + s * dy, ly = -s * dx + c * dy;
    int inside = 0;
    for (size_t i = 0, j = p->n - 1; i < p->n; j = i++) {
        double xi = p->pts[2 * i], yi = p->pts[2 * i + 1];
        double xj = p->pts[2 * j], yj = p->pts[2 * j + 1];
        if ((yi > ly) != (yj > ly) && lx < (xj - xi) * (ly - yi) / (yj - yi) + xi)
            inside = !inside;
    }
    return inside;
}

/* Distance from (px, py) to p's outline in the map's frame. */
static double ref_edge_distance(const ref_poly *p, double px, double py)
{
    double c = cos(p->rot * DEG), s = sin(p->rot * DEG), best = INFINITY;
    for (size_t i = 0, j = p->n - 1; i < p->n; j = i++) {
        double ax = p->x + c * p->pts[2 * j] - s * p->pts[2 * j + 1];
        double ay = p->y + s * p->pts[2 * j] + c * p->pts[2 * j + 1];
        double bx = p->x + c * p->pts[2 * i] - s * p->pts[2 * i + 1];
        double by = p->y + s * p->pts[2 * i] + c * p->pts[2 * i + 1];
        double ex = bx - ax, ey = by - ay, len2 = ex * ex + ey * ey;
        double t = len2 > 0 ? ((px - ax) * ex + (py - ay) * ey) / len2 : 0;
        t = t < 0 ? 0 : t > 1 ? 1 : t;
        best = fmin(best, hypot(px - (ax + t * ex), py - (ay + t * ey)));
    }
    return best;
}

/* A random polygon of one of the shapes that trip a fill up. */
static void random_poly(uint64_t *rng, double w_px, double h_px, double tw, double th, ref_poly *p)
{
    int kind = rng_below(rng, 6);
    p->x = (rng_below(rng, 2001) - 500) / 1000.0 * w_px;
    p->y = (rng_below(rng, 2001) - 500) / 1000.0 * h_px;
    if (kind == 2) {
        p->x = round(p->x / (tw / 2)) * (tw / 2);
        p->y = round(p->y / (th / 2)) * (th / 2);
    }
    p->n = 3 + (size_t)rng_below(rng, 40);
    double span = fmax(w_px, h_px);
    for (size_t i = 0; i < p->n; i++) {
        double x, y;
        switch (kind) {
        case 0: /* anywhere: self-crossing, concave */
            x = (rng_below(rng, 2001) - 1000) / 1000.0 * span;
            y = (rng_below(rng, 2001) - 1000) / 1000.0 * span;
            break;
        case 1: { /* a star around the origin */
            double a = 2 * 3.14159265358979 * (double)i / (double)p->n;
            double r = (0.2 + rng_below(rng, 801) / 1000.0) * span / 2;
            x = r * cos(a);
            y = r * sin(a);
            break;
        }
        case 2: /* on half cells: vertices on centres, edges along centre rows */
            x = (rng_below(rng, 41) - 20) * tw / 2;
            y = (rng_below(rng, 41) - 20) * th / 2;
            break;
        case 3: /* tiny: within a cell, or collinear */
            x = rng_below(rng, 3) * tw / 7;
            y = (i % 2 ? x : rng_below(rng, 3) * th / 5);
            break;
        case 4: /* self-touching: a bow tie through one repeated vertex */
            x = (i % 3 == 0) ? 0 : (rng_below(rng, 201) - 100) / 100.0 * span / 2;
            y = (i % 3 == 0) ? 0 : (i % 2 ? 1 : -1) * rng_below(rng, 101) / 100.0 * span / 2;
            break;
        default: /* repeated points and horizontal runs */
            x = (i / 2) * tw * 1.5;
            y = ((i + 1) / 2 % 2) * th * 3 + th / 2;
            break;
        }
        p->pts[2 * i] = x;
        p->pts[2 * i + 1] = y;
    }
}

/* A w x h .tmj (its cell (0, 0) tile (ox, oy): infinite when not 0) whose
 * one object is p; malloc'd. */
static char *poly_map(int w, int h, double tw, double th, int ox, int oy, const ref_poly *p)
{
    size_t room = 4096 + (size_t)w * h * 3 + p->n * 64;
    char *t = malloc(room);
    assert_non_null(t);
    int inf = ox != 0 || oy != 0;
    size_t n = (size_t)snprintf(t, room,
                                "{\"infinite\": %s, \"width\": %d, \"height\": %d, \"tilewidth\": %.17g, "
                                "\"tileheight\": %.17g, \"layers\": [{\"type\": \"tilelayer\", %s",
                                inf ? "true" : "false", w, h, tw, th, inf ? "\"chunks\": [{" : "");
    if (inf)
        n += (size_t)snprintf(t + n, room - n, "\"x\": %d, \"y\": %d, \"width\": %d, \"height\": %d, ", ox, oy,
                              w, h);
    n += (size_t)snprintf(t + n, room - n, "\"data\": [");
    for (int i = 0; i < w * h; i++)
        n += (size_t)snprintf(t + n, room - n, "%s0", i ? "," : "");
    n += (size_t)snprintf(t + n, room - n, "]%s}, {\"type\": \"objectgroup\", \"objects\": [{\"x\": %.17g, "
                          "\"y\": %.17g, \"rotation\": %.17g, \"polygon\": [", inf ? "}]" : "", p->x, p->y, p->rot);
    for (size_t i = 0; i < p->n; i++)
        n += (size_t)snprintf(t + n, room - n, "%s{\"x\": %.17g, \"y\": %.17g}", i ? ", " : "", p->pts[2 * i],
                              p->pts[2 * i + 1]);
    snprintf(t + n, room - n, "]}]}]}");
    return t;
}

/* Loads random polygons, unrotated or rotated, and compares every cell with
 * the rule; a rotated one may differ only on its outline (within a
 * millionth of the map's extent). */
static void compare_random_polygons(int rotated, int cases)
{
    static const double tiles[][2] = { { 16, 16 }, { 10, 7 }, { 7.5, 7.5 }, { 1, 1 }, { 0.3, 0.25 } };
    uint64_t rng = rotated ? 0x5EED0F0157A7EDull : 0x5EED0F0ACE11ull;
    int near_edge = 0;
    for (int k = 0; k < cases; k++) {
        int w = 1 + rng_below(&rng, 24), h = 1 + rng_below(&rng, 18);
        const double *t = tiles[rng_below(&rng, 5)];
        int ox = rng_below(&rng, 3) == 0 ? rng_below(&rng, 9) - 4 : 0;
        int oy = ox ? rng_below(&rng, 9) - 4 : 0;
        ref_poly p;
        random_poly(&rng, w * t[0], h * t[1], t[0], t[1], &p);
        p.x += ox * t[0];
        p.y += oy * t[1];
        p.rot = rotated ? (rng_below(&rng, 4) == 0 ? 90.0 * rng_below(&rng, 5) : rng_below(&rng, 72001) / 100.0 - 360)
                        : 0;
        char *map = poly_map(w, h, t[0], t[1], ox, oy, &p);
        char err[512] = "";
        pd_tiled_rules r;
        pd_tiled_rules_default(&r);
        pd_grid *g = pd_tiled_load(map, strlen(map), &r, NULL, NULL, NULL, NULL, err, sizeof err);
        if (!g)
            fail_msg("case %d refused: %s\n%s", k, err, map);
        double extent = fmax(fabs(p.x), fabs(p.y)) + fmax(w * t[0], h * t[1]);
        for (size_t i = 0; i < p.n; i++)
            extent = fmax(extent, fabs(p.pts[2 * i]) + fabs(p.pts[2 * i + 1]));
        for (int y = 0; y < h; y++) {
            for (int x = 0; x < w; x++) {
                double px = (x + ox + 0.5) * t[0], py = (y + oy + 0.5) * t[1];
                int want = ref_covers(&p, px, py), got = pd_grid_get(g, x, y) == PD_CELL_BLOCKED;
                if (want == got)
                    continue;
                if (rotated && ref_edge_distance(&p, px, py) <= extent * 1e-6) {
                    near_edge++;
                    continue;
                }
                fail_msg("case %d: cell (%d, %d) is %s, the rule says %s\n%s", k, x, y, got ? "blocked" : "open",
                         want ? "blocked" : "open", map);
            }
        }
        pd_grid_destroy(g);
        free(map);
    }
    if (rotated)
        print_message("%d cells of %d rotated polygons lie on their outline\n", near_edge, cases);
}

/* The row-by-row fill gives every cell the per-cell rule gives, on
 * self-crossing, concave, self-touching, tiny and degenerate polygons,
 * with vertices and horizontal edges on cell centres, on finite and
 * infinite maps (whose cell (0, 0) is not tile (0, 0)). */
static void test_polygon_fill_is_the_rule(void **state)
{
    (void)state;
    compare_random_polygons(0, 1500);
}

/* A rotated polygon is drawn in the map's frame: the same cells, but for
 * a centre on its outline. */
static void test_rotated_polygon_fill(void **state)
{
    (void)state;
    compare_random_polygons(1, 600);
}

/* ---- what the work costs ---- */

typedef struct poll_count {
    unsigned calls;
    unsigned stop_at;           /* 0: never stop */
    pd_status stop_with;
} poll_count;

static pd_status count_poll(void *user)
{
    poll_count *pc = user;
    pc->calls++;
    return pc->stop_at && pc->calls >= pc->stop_at ? pc->stop_with : PD_OK;
}

/* The jagged ring bench/abuse/map-cost.py sends (issue 29 finding 6): 65,536
 * points over a 4096 x 4096 map of 1 px tiles, ~1.1e12 edge tests cell by
 * cell. Drawn row by row it costs the map's cells and its crossings: a few
 * hundred polls of PD_MAP_POLL_CELLS; the per-cell rule would need 16.7
 * million (the poll stops it at 4000). A sample of cells is checked
 * against the rule. */
static void test_large_polygon_costs_cells_and_crossings(void **state)
{
    (void)state;
    enum { SIDE = 4096, POINTS = 65536 };
    size_t room = 256 + (size_t)POINTS * 16;
    char *obj = malloc(room);
    double *pts = malloc(2 * POINTS * sizeof *pts);
    assert_true(obj && pts);
    size_t n = (size_t)snprintf(obj, room, " <objectgroup name=\"walls\"><object x=\"%d\" y=\"%d\"><polygon points=\"",
                                SIDE / 2, SIDE / 2);
    for (int k = 0; k < POINTS; k++) {
        double a = 2 * 3.14159265358979323846 * k / POINTS;
        double r = SIDE / 2.0 * (0.95 + 0.05 * ((k * 7919) % 101) / 100.0);
        pts[2 * k] = round(r * cos(a));
        pts[2 * k + 1] = round(r * sin(a));
        n += (size_t)snprintf(obj + n, room - n, "%s%.0f,%.0f", k ? " " : "", pts[2 * k], pts[2 * k + 1]);
    }
    snprintf(obj + n, room - n, "\"/></object></objectgroup>\n");
    char *map = zero_map_tmx(SIDE, SIDE, 1, 1, obj);
    assert_non_null(map);
    pd_tiled_rules r;
    pd_tiled_rules_default(&r);
    poll_count pc = { 0, 4000, PD_CANCELLED };
    pd_map_control ctl = { .poll = count_poll, .poll_user = &pc };
    char err[256] = "";
    pd_grid *g = pd_tiled_load_ctl(map, strlen(map), &r, NULL, &ctl, NULL, NULL, NULL, err, sizeof err);
    if (!g)
        fail_msg("refused after %u polls: %s", pc.calls, err);
    assert_int_equal(ctl.status, PD_OK);
    assert_true(pc.calls < 1000);
    /* The rule on a sample of cells (each test costs 65,536 edges). */
    uint64_t rng = 0xC0FFEE;
    int inside = 0;
    for (int k = 0; k < 400; k++) {
        int x = rng_below(&rng, SIDE), y = rng_below(&rng, SIDE);
        double lx = x + 0.5 - SIDE / 2, ly = y + 0.5 - SIDE / 2;
        int in = 0;
        for (size_t i = 0, j = POINTS - 1; i < POINTS; j = i++) {
            double xi = pts[2 * i], yi = pts[2 * i + 1], xj = pts[2 * j], yj = pts[2 * j + 1];
            if ((yi > ly) != (yj > ly) && lx < (xj - xi) * (ly - yi) / (yj - yi) + xi)
                in = !in;
        }
        inside += in;
        assert_int_equal(pd_grid_get(g, x, y) == PD_CELL_BLOCKED, in);
    }
    assert_true(inside > 100 && inside < 400);
    pd_grid_destroy(g);
    free(map);
    free(obj);
    free(pts);
}

/* The colliders' work is bounded before any is drawn: objects x cells (a
 * 256 x 256 map with rectangles over all of it: the 273rd passes 16 per
 * cell + 16 Mi) and edges x rows (one zigzag polygon whose 16,384 edges
 * each cross all 2048 rows). */
static void test_collider_budget(void **state)
{
    (void)state;
    const char *head = "{\"width\": 256, \"height\": 256, \"tilewidth\": 8, \"tileheight\": 8, \"layers\": ["
                       "{\"type\": \"tilelayer\", \"encoding\": \"base64\", \"compression\": \"zstd\", \"data\": \"";
    char *zeros = zero_map_frame_b64(256 * 256 * 4);
    assert_non_null(zeros);
    size_t room = 4096 + strlen(zeros) + 400 * 64;
    char *map = malloc(room);
    assert_non_null(map);
    pd_tiled_rules r;
    pd_tiled_rules_default(&r);
    char err[512], want[512];
    for (int objects = 272; objects <= 400; objects += 128) {
        size_t n = (size_t)snprintf(map, room, "%s%s\"}, {\"type\": \"objectgroup\", \"objects\": [", head, zeros);
        for (int i = 0; i < objects; i++)
            n += (size_t)snprintf(map + n, room - n, "%s{\"x\": 0, \"y\": 0, \"width\": 2048, \"height\": 2048}",
                                  i ? ", " : "");
        snprintf(map + n, room - n, "]}]}");
        pd_grid *g = pd_tiled_load(map, strlen(map), &r, NULL, NULL, NULL, NULL, err, sizeof err);
        if (objects == 272) {
            /* 272 x 65536 is the budget itself. */
            if (!g)
                fail_msg("%s", err);
            assert_int_equal(pd_grid_get(g, 255, 255), PD_CELL_BLOCKED);
            pd_grid_destroy(g);
            continue;
        }
        assert_null(g);
        snprintf(want, sizeof want, "$.layers[1].objects[272]: the colliders up to this one cost %llu cell tests; "
                 "a 256 x 256 map allows %llu (PD_TILED_COLLIDER_WORK_PER_CELL 16 per cell + "
                 "PD_TILED_COLLIDER_WORK_BASE 16777216)", 273ull * 65536, 272ull * 65536);
        assert_string_equal(err, want);
    }
    free(map);
    free(zeros);

    enum { EDGES = 16384, ROWS = 2048 };
    room = 1024 + (size_t)EDGES * 48;
    char *zig = malloc(room);
    assert_non_null(zig);
    size_t n = (size_t)snprintf(zig, room, "{\"width\": 64, \"height\": %d, \"tilewidth\": 1, \"tileheight\": 1, "
                                "\"layers\": [{\"type\": \"tilelayer\", \"encoding\": \"base64\", "
                                "\"compression\": \"zstd\", \"data\": \"", ROWS);
    zeros = zero_map_frame_b64(64 * ROWS * 4);
    n += (size_t)snprintf(zig + n, room - n, "%s\"}, {\"type\": \"objectgroup\", \"objects\": [{\"x\": 0, "
                          "\"y\": 0, \"polygon\": [", zeros);
    for (int i = 0; i < EDGES; i++)
        n += (size_t)snprintf(zig + n, room - n, "%s{\"x\": %.6f, \"y\": %d}", i ? ", " : "",
                              64.0 * i / EDGES, i % 2 ? ROWS : 0);
    snprintf(zig + n, room - n, "]}]}]}");
    assert_null(pd_tiled_load(zig, strlen(zig), &r, NULL, NULL, NULL, NULL, err, sizeof err));
    const char *says = "$.layers[1].objects[0]: the colliders up to this one cost ";
    if (strncmp(err, says, strlen(says)) != 0)
        fail_msg("got %s", err);
    unsigned long long cost = strtoull(err + strlen(says), NULL, 10);
    /* Its cells, points and crossings: every edge but the closing one
     * crosses every row. */
    assert_true(cost >= (unsigned long long)(EDGES - 1) * ROWS);
    free(zig);
    free(zeros);
}

/* ---- the cells cap and the poll ---- */

/* A map above the control's max_cells is refused on its header (finite)
 * or its chunks' bounding box (infinite), LIMIT_EXCEEDED, before a layer
 * is decoded: the poll is asked only around the parse. At the cap it
 * loads. Without a control the format's own PD_TILED_MAX_CELLS holds. */
static void test_cells_cap_before_decoding(void **state)
{
    (void)state;
    pd_tiled_rules r;
    pd_tiled_rules_default(&r);
    char err[256];
    poll_count pc = { 0 };
    pd_map_control ctl = { .max_cells = 4096u * 4096u, .max_cells_name = "limits.max_scene_cells",
                           .poll = count_poll, .poll_user = &pc };
    char *big = zero_map_tmx(8192, 8192, 16, 4, "");
    assert_non_null(big);
    assert_null(pd_tiled_load_ctl(big, strlen(big), &r, NULL, &ctl, NULL, NULL, NULL, err, sizeof err));
    assert_int_equal(ctl.status, PD_LIMIT_EXCEEDED);
    assert_string_equal(err, "$: 8192 x 8192 cells is more than limits.max_scene_cells (16777216)");
    assert_true(pc.calls <= 8);
    free(big);

    const char *inf = "{\"infinite\": true, \"tilewidth\": 16, \"tileheight\": 16, \"layers\": [{\"type\": "
                      "\"tilelayer\", \"chunks\": [{\"x\": 0, \"y\": 0, \"width\": 1, \"height\": 1, \"data\": [0]}, "
                      "{\"x\": 8191, \"y\": 8191, \"width\": 1, \"height\": 1, \"data\": [0]}]}]}";
    pc.calls = 0;
    assert_null(pd_tiled_load_ctl(inf, strlen(inf), &r, NULL, &ctl, NULL, NULL, NULL, err, sizeof err));
    assert_int_equal(ctl.status, PD_LIMIT_EXCEEDED);
    assert_string_equal(err, "$: 8192 x 8192 cells is more than limits.max_scene_cells (16777216)");

    /* At the cap exactly, and a cap above the format's. */
    ctl.max_cells = 100;
    char *at = zero_map_tmx(10, 10, 16, 1, "");
    char *over = zero_map_tmx(10, 11, 16, 1, "");
    pd_grid *g = pd_tiled_load_ctl(at, strlen(at), &r, NULL, &ctl, NULL, NULL, NULL, err, sizeof err);
    assert_non_null(g);
    assert_int_equal(ctl.status, PD_OK);
    pd_grid_destroy(g);
    assert_null(pd_tiled_load_ctl(over, strlen(over), &r, NULL, &ctl, NULL, NULL, NULL, err, sizeof err));
    assert_string_equal(err, "$: 10 x 11 cells is more than limits.max_scene_cells (100)");
    ctl.max_cells = 1ull << 40;
    big = zero_map_tmx(16384, 8193, 1, 1, "");
    assert_null(pd_tiled_load_ctl(big, strlen(big), &r, NULL, &ctl, NULL, NULL, NULL, err, sizeof err));
    assert_int_equal(ctl.status, PD_INVALID_ARGUMENT);
    assert_string_equal(err, "$: 16384 x 8193 cells is more than PD_TILED_MAX_CELLS (67108864)");
    free(big);
    free(at);
    free(over);

    /* LDtk: the level's size against the cap, then its values before its
     * grid. */
    pd_ldtk_rules lr;
    memset(&lr, 0, sizeof lr);
    double ox, oy;
    const char *level = "{\"levels\": [{\"identifier\": \"L\", \"layerInstances\": [{\"__identifier\": \"C\", "
                        "\"__type\": \"IntGrid\", \"__cWid\": 8192, \"__cHei\": 8192, \"__gridSize\": 16, "
                        "\"intGridCsv\": []}]}]}";
    ctl.max_cells = 4096u * 4096u;
    assert_null(pd_ldtk_load_ctl(level, strlen(level), &lr, &ctl, &ox, &oy, err, sizeof err));
    assert_int_equal(ctl.status, PD_LIMIT_EXCEEDED);
    assert_string_equal(err, "$.levels[0].layerInstances[0] (layer \"C\"): 8192 x 8192 cells is more than "
                             "limits.max_scene_cells (16777216)");
    assert_null(pd_ldtk_load_ctl(level, strlen(level), &lr, NULL, &ox, &oy, err, sizeof err));
    assert_string_equal(err, "$.levels[0].layerInstances[0] (layer \"C\").intGridCsv: has 0 values, the layer "
                             "needs 67108864 (8192 x 8192)");
}

/* The poll stops a load where it is, with its status: between layers, in
 * a layer's rows, in a polygon's rows; it is not asked again once it said
 * stop. */
static void test_poll_stops_the_load(void **state)
{
    (void)state;
    pd_tiled_rules r;
    pd_tiled_rules_default(&r);
    char err[256];
    char *map = zero_map_tmx(1024, 1024, 1, 8,
                             " <objectgroup><object x=\"0\" y=\"0\"><polygon points=\"0,0 1024,0 0,1024\"/>"
                             "</object></objectgroup>\n");
    assert_non_null(map);
    /* How many times a whole load asks. */
    poll_count pc = { 0 };
    pd_map_control ctl = { .poll = count_poll, .poll_user = &pc };
    pd_grid *g = pd_tiled_load_ctl(map, strlen(map), &r, NULL, &ctl, NULL, NULL, NULL, err, sizeof err);
    assert_non_null(g);
    pd_grid_destroy(g);
    unsigned whole = pc.calls;
    /* Eight layers of 16 rows of 65,536 cells, and the triangle's. */
    assert_true(whole >= 8 * 16);
    static const pd_status stops[] = { PD_CANCELLED, PD_DEADLINE_EXCEEDED };
    const unsigned at[] = { 1, 3, whole / 2, whole };
    for (size_t k = 0; k < sizeof at / sizeof at[0]; k++) {
        pc = (poll_count){ 0, at[k], stops[k % 2] };
        assert_null(pd_tiled_load_ctl(map, strlen(map), &r, NULL, &ctl, NULL, NULL, NULL, err, sizeof err));
        assert_int_equal(ctl.status, stops[k % 2]);
        assert_int_equal(pc.calls, at[k]);
        char want[128];
        snprintf(want, sizeof want, "$: stopped while loading the map: %s", pd_status_name(stops[k % 2]));
        assert_string_equal(err, want);
    }
    free(map);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_polygon_fill_is_the_rule),
        cmocka_unit_test(test_rotated_polygon_fill),
        cmocka_unit_test(test_large_polygon_costs_cells_and_crossings),
        cmocka_unit_test(test_collider_budget),
        cmocka_unit_test(test_cells_cap_before_decoding),
        cmocka_unit_test(test_poll_stops_the_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
