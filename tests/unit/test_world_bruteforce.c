/*
 * test_world_bruteforce.c - the cross-scene planner is optimal.
 *
 * On small random worlds (2-5 scenes of up to 20x20 cells with blocked cells
 * and costs 1-4, random portals: one-way or two-way, costs from 0, some with
 * a unit-size limit, some on blocked cells), every planned total must equal
 * Dijkstra over the explicit union graph of all scenes' cells joined by the
 * portals, within 1e-9, and the planner must answer NO_PATH exactly when the
 * union graph has no path. The union graph is written here from the rules,
 * not from the planner: 8-connected moves without corner cutting, length 1
 * or sqrt(2) times the cost of the cell entered; unit size 2 stands on a
 * cell when its 2x2 footprint is open and pays the most expensive cell under
 * it; a portal joins its two cells with its cost when both are standable and
 * the unit is within the portal's limit. Maps are written as ASCII files and
 * loaded through the registry like the daemon's. Fixed-seed xorshift.
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

#include "pd_conf.h"
#include "pd_conf_world.h"
#include "pd_scene.h"
#include "pd_world.h"
#include "test_rng.h"

#define BF_WORLDS 100
#define BF_MAX_SCENES 5
#define BF_MAX_SIDE 20
#define BF_MAX_PORTALS 10
#define BF_QUERIES_PER_WORLD 12
#define BF_MAX_NODES (BF_MAX_SCENES * BF_MAX_SIDE * BF_MAX_SIDE)

/* A random scene as the test sees it: cost per cell, 0 = blocked. */
typedef struct bf_scene {
    int w, h;
    uint8_t cost[BF_MAX_SIDE][BF_MAX_SIDE];
} bf_scene;

typedef struct bf_world {
    int n_scenes;
    bf_scene scenes[BF_MAX_SCENES];
    pd_conf_world cw;
    pd_conf_portal portals[BF_MAX_PORTALS];
} bf_world;

/* Cost of standing at (x, y) for a unit of size `unit` (0 = it cannot). */
static int stand_cost(const bf_scene *s, int unit, int x, int y)
{
    int worst = 0;
    for (int dy = 0; dy < unit; dy++) {
        for (int dx = 0; dx < unit; dx++) {
            int cx = x + dx, cy = y + dy;
            if (cx < 0 || cy < 0 || cx >= s->w || cy >= s->h || s->cost[cy][cx] == 0)
                return 0;
            if (s->cost[cy][cx] > worst)
                worst = s->cost[cy][cx];
        }
    }
    return worst;
}

/* ---- the union graph ---------------------------------------------------- */

typedef struct bf_open {
    double d;
    int node;
} bf_open;

static void heap_push(bf_open *h, size_t *n, bf_open e)
{
    size_t i = (*n)++;
    while (i > 0 && h[(i - 1) / 2].d > e.d) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = e;
}

static bf_open heap_pop(bf_open *h, size_t *n)
{
    bf_open top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && h[c + 1].d < h[c].d)
            c++;
        if (h[c].d >= last.d)
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0)
        h[i] = last;
    return top;
}

static int node_of(int scene, int x, int y)
{
    return (scene * BF_MAX_SIDE + y) * BF_MAX_SIDE + x;
}

/* Dijkstra over all scenes' cells plus portal edges; INFINITY if none. */
static double union_cost(const bf_world *bw, int unit, int s, int sx, int sy, int t, int tx, int ty)
{
    static double dist[BF_MAX_NODES];
    static unsigned char done[BF_MAX_NODES];
    /* Each node is pushed at most once per incoming edge: 8 moves + portals. */
    static bf_open heap[BF_MAX_NODES * 8 + 4 * BF_MAX_PORTALS + 1];
    for (int i = 0; i < BF_MAX_NODES; i++) {
        dist[i] = INFINITY;
        done[i] = 0;
    }
    size_t n = 0;
    int src = node_of(s, sx, sy), dst = node_of(t, tx, ty);
    dist[src] = 0.0;
    heap_push(heap, &n, (bf_open){ 0.0, src });
    static const int dxs[8] = { 1, -1, 0, 0, 1, 1, -1, -1 };
    static const int dys[8] = { 0, 0, 1, -1, 1, -1, 1, -1 };
    while (n > 0) {
        bf_open top = heap_pop(heap, &n);
        if (done[top.node])
            continue;
        done[top.node] = 1;
        if (top.node == dst)
            return top.d;
        int sc = top.node / (BF_MAX_SIDE * BF_MAX_SIDE);
        int rest = top.node % (BF_MAX_SIDE * BF_MAX_SIDE);
        int x = rest % BF_MAX_SIDE, y = rest / BF_MAX_SIDE;
        const bf_scene *g = &bw->scenes[sc];
        for (int k = 0; k < 8; k++) {
            int nx = x + dxs[k], ny = y + dys[k];
            int c = stand_cost(g, unit, nx, ny);
            if (c == 0)
                continue;
            /* No corner cutting: both orthogonal neighbours must be standable. */
            if (k >= 4 && (!stand_cost(g, unit, x + dxs[k], y) || !stand_cost(g, unit, x, y + dys[k])))
                continue;
            double len = k >= 4 ? sqrt(2.0) : 1.0;
            int v = node_of(sc, nx, ny);
            double nd = top.d + len * c;
            if (nd < dist[v]) {
                dist[v] = nd;
                heap_push(heap, &n, (bf_open){ nd, v });
            }
        }
        for (size_t p = 0; p < bw->cw.n_portals; p++) {
            const pd_conf_portal *pp = &bw->cw.portals[p];
            if (pp->max_unit && (uint32_t)unit > pp->max_unit)
                continue;
            int sa = (int)(pp->a.scene[1] - '0'), sb = (int)(pp->b.scene[1] - '0');
            if (!stand_cost(&bw->scenes[sa], unit, pp->a.x, pp->a.y) ||
                !stand_cost(&bw->scenes[sb], unit, pp->b.x, pp->b.y))
                continue;
            int ends[2] = { node_of(sa, pp->a.x, pp->a.y), node_of(sb, pp->b.x, pp->b.y) };
            for (int side = 0; side < 2; side++) {
                if (ends[side] != top.node || (side == 1 && !pp->two_way))
                    continue;
                int v = ends[1 - side];
                double nd = top.d + pp->cost;
                if (nd < dist[v]) {
                    dist[v] = nd;
                    heap_push(heap, &n, (bf_open){ nd, v });
                }
            }
        }
    }
    return INFINITY;
}

/* ---- building random worlds --------------------------------------------- */

static void random_world(uint64_t *seed, bf_world *bw)
{
    memset(bw, 0, sizeof *bw);
    bw->n_scenes = 2 + rng_below(seed, BF_MAX_SCENES - 1);
    for (int i = 0; i < bw->n_scenes; i++) {
        bf_scene *s = &bw->scenes[i];
        s->w = 3 + rng_below(seed, BF_MAX_SIDE - 2);
        s->h = 3 + rng_below(seed, BF_MAX_SIDE - 2);
        int density = 5 + rng_below(seed, 25);    /* percent blocked */
        for (int y = 0; y < s->h; y++) {
            for (int x = 0; x < s->w; x++) {
                int r = rng_below(seed, 100);
                s->cost[y][x] = r < density ? 0 : (r < 85 ? 1 : (uint8_t)(2 + rng_below(seed, 3)));
            }
        }
    }
    int n_portals = 1 + rng_below(seed, BF_MAX_PORTALS);
    for (int p = 0; p < n_portals; p++) {
        pd_conf_portal *pp = &bw->portals[p];
        snprintf(pp->name, sizeof pp->name, "p%d", p);
        do {
            int sa = rng_below(seed, bw->n_scenes), sb = rng_below(seed, bw->n_scenes);
            snprintf(pp->a.scene, sizeof pp->a.scene, "s%d", sa);
            snprintf(pp->b.scene, sizeof pp->b.scene, "s%d", sb);
            pp->a.x = rng_below(seed, bw->scenes[sa].w);
            pp->a.y = rng_below(seed, bw->scenes[sa].h);
            pp->b.x = rng_below(seed, bw->scenes[sb].w);
            pp->b.y = rng_below(seed, bw->scenes[sb].h);
        } while (strcmp(pp->a.scene, pp->b.scene) == 0 && pp->a.x == pp->b.x && pp->a.y == pp->b.y);
        pp->two_way = rng_below(seed, 10) >= 3;
        /* Quarter steps keep some totals exactly tied between ways. */
        pp->cost = rng_below(seed, 4) == 0 ? 0.0 : rng_below(seed, 24) * 0.25;
        int lim = rng_below(seed, 6);
        pp->max_unit = lim < 3 ? 0 : (lim < 5 ? 1 : 2);
    }
    bw->cw.portals = bw->portals;
    bw->cw.n_portals = (size_t)n_portals;
}

static void write_map(const char *path, const bf_scene *s)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int y = 0; y < s->h; y++) {
        for (int x = 0; x < s->w; x++)
            fputc(s->cost[y][x] == 0 ? '#' : (s->cost[y][x] == 1 ? '.' : '0' + s->cost[y][x]), f);
        fputc('\n', f);
    }
    assert_int_equal(fclose(f), 0);
}

static pd_registry *load_world(const bf_world *bw, const char *dir)
{
    pd_conf conf = pd_conf_defaults;
    conf.scenes = calloc((size_t)bw->n_scenes, sizeof *conf.scenes);
    assert_non_null(conf.scenes);
    conf.n_scenes = (size_t)bw->n_scenes;
    for (int i = 0; i < bw->n_scenes; i++) {
        pd_conf_scene *cs = &conf.scenes[i];
        char path[512];
        snprintf(path, sizeof path, "%s/s%d.txt", dir, i);
        write_map(path, &bw->scenes[i]);
        snprintf(cs->name, sizeof cs->name, "s%d", i);
        cs->map_path = strdup(path);
        assert_non_null(cs->map_path);
        cs->format = PD_MAP_ASCII;
        cs->cell_size = 1.0;
        cs->unit_sizes[0] = 1;
        cs->unit_sizes[1] = 2;
        cs->n_unit_sizes = 2;
    }
    pd_registry *r = pd_registry_create();
    assert_non_null(r);
    char err[256];
    if (pd_registry_load(r, &conf, err, sizeof err) != 0)
        fail_msg("%s", err);
    pd_conf_free(&conf);
    return r;
}

/* A random cell where the unit can stand, or 0 when the scene has none. */
static int random_open_cell(uint64_t *seed, const bf_scene *s, int unit, int *x, int *y)
{
    for (int tries = 0; tries < 200; tries++) {
        *x = rng_below(seed, s->w);
        *y = rng_below(seed, s->h);
        if (stand_cost(s, unit, *x, *y))
            return 1;
    }
    return 0;
}

static void test_planner_matches_union_dijkstra(void **state)
{
    (void)state;
    char dir[] = "/tmp/pathd-route-bf-XXXXXX";
    assert_non_null(mkdtemp(dir));
    uint64_t seed = 0x9e3779b97f4a7c15ULL;
    pd_search_ctx *ctx = pd_search_ctx_create();
    int compared = 0, no_path = 0, cross = 0;
    static bf_world bw;
    for (int world = 0; world < BF_WORLDS; world++) {
        random_world(&seed, &bw);
        pd_registry *r = load_world(&bw, dir);
        char err[256];
        pd_world *w = pd_world_build_from_registry(&bw.cw, r, err, sizeof err);
        if (!w)
            fail_msg("world %d: %s", world, err);
        for (int q = 0; q < BF_QUERIES_PER_WORLD; q++) {
            int unit = rng_below(&seed, 2) == 0 ? 2 : 1;
            int s = rng_below(&seed, bw.n_scenes), t = rng_below(&seed, bw.n_scenes);
            int sx, sy, tx, ty;
            if (!random_open_cell(&seed, &bw.scenes[s], unit, &sx, &sy) ||
                !random_open_cell(&seed, &bw.scenes[t], unit, &tx, &ty))
                continue;
            char sname[8], tname[8];
            snprintf(sname, sizeof sname, "s%d", s);
            snprintf(tname, sizeof tname, "s%d", t);
            pd_world_query wq = { .from_scene = sname, .start = { sx, sy }, .to_scene = tname,
                                  .goal = { tx, ty }, .unit_size = (uint32_t)unit };
            pd_world_route rt;
            pd_status st = pd_world_plan(w, ctx, &wq, &rt);
            double expect = union_cost(&bw, unit, s, sx, sy, t, tx, ty);
            if (isinf(expect)) {
                if (st != PD_NO_PATH)
                    fail_msg("world %d query %d: union graph has no path, planner says %s (%.6f)",
                             world, q, pd_status_name(st), rt.total_cost);
                no_path++;
            } else {
                if (st != PD_OK)
                    fail_msg("world %d query %d: union cost %.9f, planner says %s", world, q,
                             expect, pd_status_name(st));
                if (fabs(rt.total_cost - expect) > 1e-9)
                    fail_msg("world %d query %d (unit %d, s%d:%d,%d -> s%d:%d,%d): planner %.12f, "
                             "union %.12f", world, q, unit, s, sx, sy, t, tx, ty, rt.total_cost,
                             expect);
                double sum = 0.0;
                for (size_t i = 0; i < rt.n_legs; i++)
                    sum += rt.legs[i].cost + (rt.legs[i].has_portal ? rt.legs[i].portal_cost : 0.0);
                assert_true(fabs(sum - expect) < 1e-9);
                assert_string_equal(rt.legs[0].scene->name, sname);
                assert_string_equal(rt.legs[rt.n_legs - 1].scene->name, tname);
                cross += rt.n_legs > 1;
                compared++;
            }
            pd_world_route_free(&rt);
        }
        pd_world_release(w);
        pd_registry_destroy(r);
        for (int i = 0; i < bw.n_scenes; i++) {
            char path[512];
            snprintf(path, sizeof path, "%s/s%d.txt", dir, i);
            unlink(path);
        }
    }
    rmdir(dir);
    pd_search_ctx_destroy(ctx);
    /* The random worlds must exercise both answers and real portal use. */
    print_message("compared %d routes (%d through portals), %d NO_PATH\n", compared, cross, no_path);
    assert_true(compared > 300);
    assert_true(cross > 100);
    assert_true(no_path > 50);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_planner_matches_union_dijkstra),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
