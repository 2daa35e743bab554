/*
 * test_unit_search.c - A* on unit grids against a footprint-graph Dijkstra.
 *
 * The claim of pd_clearance.h is that the ordinary A* run on the unit grid
 * for size k is exactly the footprint rule. This test checks it against a
 * reference written from the rule alone, not from pd_clearance.c: on small
 * random maps it builds an explicit graph with one node per anchor whose
 * whole k x k footprint lies on passable cells, and an edge for each of the
 * eight moves whose destination footprint fits and, for a diagonal, whose two
 * orthogonal intermediate footprints fit too; a move costs its length times
 * the largest cost byte under the destination footprint. Dijkstra over that
 * graph must agree with A* on cost (within 1e-9) and reachability, the path
 * A* returns must be a walk in that graph, and the component labels of the
 * unit grid must agree with the reference's reachability.
 *
 * A last test prints (does not assert) how long the derived data takes to
 * build and repair on a 1024 x 1024 random map.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "core_check.h"
#include "pd_clearance.h"
#include "pd_components.h"
#include "test_rng.h"

#define US_GRIDS 200
#define US_MAX_SIDE 30
#define US_MAX_UNIT 3
#define US_GOALS_PER_START 8
#define US_UNREACHED (-1.0)
#define US_TIMING_SIDE 1024

/* ------------------------------------------------ reference footprint graph */

/* The test's own copy of a map: w*h cost bytes, 0 = blocked. */
typedef struct fp_map {
    int32_t w, h;
    uint8_t *cells;
} fp_map;

/* Largest cost under the k x k footprint at (x, y), or 0 when any of it is
 * blocked or off the map. */
static int fp_footprint_cost(const fp_map *m, int k, int32_t x, int32_t y)
{
    if (x < 0 || y < 0 || x + k > m->w || y + k > m->h)
        return 0;
    int worst = 0;
    for (int32_t dy = 0; dy < k; dy++) {
        for (int32_t dx = 0; dx < k; dx++) {
            int v = m->cells[(y + dy) * m->w + x + dx];
            if (v == 0)
                return 0;
            if (v > worst)
                worst = v;
        }
    }
    return worst;
}

typedef struct fp_edge {
    int32_t to;
    double cost;
} fp_edge;

/* Adjacency lists: node i's edges are edges[first[i] .. first[i + 1]). */
typedef struct fp_graph {
    int32_t n;
    int32_t *first;
    fp_edge *edges;
} fp_graph;

static void fp_graph_build(const fp_map *m, int k, fp_graph *gr)
{
    gr->n = m->w * m->h;
    gr->first = calloc((size_t)gr->n + 1, sizeof *gr->first);
    gr->edges = malloc((size_t)gr->n * 8 * sizeof *gr->edges);
    assert_non_null(gr->first);
    assert_non_null(gr->edges);
    int32_t e = 0;
    for (int32_t y = 0; y < m->h; y++) {
        for (int32_t x = 0; x < m->w; x++) {
            gr->first[y * m->w + x] = e;
            if (!fp_footprint_cost(m, k, x, y))
                continue;
            for (int32_t dy = -1; dy <= 1; dy++) {
                for (int32_t dx = -1; dx <= 1; dx++) {
                    if (dx == 0 && dy == 0)
                        continue;
                    int cost = fp_footprint_cost(m, k, x + dx, y + dy);
                    if (!cost)
                        continue;
                    int diagonal = dx != 0 && dy != 0;
                    if (diagonal && (!fp_footprint_cost(m, k, x + dx, y) ||
                                     !fp_footprint_cost(m, k, x, y + dy)))
                        continue;
                    gr->edges[e].to = (y + dy) * m->w + x + dx;
                    gr->edges[e].cost = (diagonal ? CORE_SQRT2 : 1.0) * cost;
                    e++;
                }
            }
        }
    }
    gr->first[gr->n] = e;
}

static void fp_graph_free(fp_graph *gr)
{
    free(gr->first);
    free(gr->edges);
}

/* The cost of the edge a -> b, or a negative number when there is none. */
static double fp_edge_cost(const fp_graph *gr, int32_t a, int32_t b)
{
    for (int32_t e = gr->first[a]; e < gr->first[a + 1]; e++)
        if (gr->edges[e].to == b)
            return gr->edges[e].cost;
    return -1.0;
}

/* Plain Dijkstra with an O(n) scan for the next node: slow, obviously right,
 * and plenty for maps of at most 900 nodes. */
static void fp_dijkstra(const fp_graph *gr, int32_t source, double *dist)
{
    char *done = calloc((size_t)gr->n, 1);
    assert_non_null(done);
    for (int32_t i = 0; i < gr->n; i++)
        dist[i] = US_UNREACHED;
    dist[source] = 0.0;
    for (;;) {
        int32_t best = -1;
        for (int32_t i = 0; i < gr->n; i++)
            if (!done[i] && dist[i] >= 0 && (best < 0 || dist[i] < dist[best]))
                best = i;
        if (best < 0)
            break;
        done[best] = 1;
        for (int32_t e = gr->first[best]; e < gr->first[best + 1]; e++) {
            double nd = dist[best] + gr->edges[e].cost;
            int32_t to = gr->edges[e].to;
            if (dist[to] < 0 || nd < dist[to])
                dist[to] = nd;
        }
    }
    free(done);
}

/* ---------------------------------------------------------- comparison */

typedef struct us_tally {
    int reached, unreached, goal_blocked, start_blocked;
} us_tally;

/* The path must be a walk in the footprint graph from s to t whose summed
 * edge costs are the reported cost. */
static void check_walk(const fp_graph *gr, const fp_map *m, const pd_point *path, size_t len,
                       pd_point s, pd_point t, double cost, const char *what)
{
    assert_true(len >= 1);
    assert_true(path[0].x == s.x && path[0].y == s.y);
    assert_true(path[len - 1].x == t.x && path[len - 1].y == t.y);
    double summed = 0.0;
    for (size_t i = 1; i < len; i++) {
        double c = fp_edge_cost(gr, path[i - 1].y * m->w + path[i - 1].x, path[i].y * m->w + path[i].x);
        if (c < 0)
            fail_msg("%s: step %zu (%d,%d)->(%d,%d) is not a legal footprint move", what, i,
                     path[i - 1].x, path[i - 1].y, path[i].x, path[i].y);
        summed += c;
    }
    if (fabs(summed - cost) > CORE_COST_EPS)
        fail_msg("%s: path sums to %.12f, reported %.12f", what, summed, cost);
}

static void compare_one(pd_search_ctx *ctx, const pd_grid *ug, const pd_components *cc,
                        const fp_graph *gr, const fp_map *m, int k, pd_point s, pd_point t,
                        const double *dist, us_tally *tally, const char *what)
{
    static pd_point path[US_MAX_SIDE * US_MAX_SIDE * 2];
    pd_search_params p;
    memset(&p, 0, sizeof p);
    p.start = s;
    p.goal = t;
    p.connectivity = PD_CONNECT_8;
    pd_search_metrics met;
    pd_status st = pd_search_astar(ctx, ug, &p, path, sizeof path / sizeof path[0], &met);
    int goal_fits = fp_footprint_cost(m, k, t.x, t.y) != 0;
    double want = dist[t.y * m->w + t.x];
    int connected = pd_components_connected(cc, s, t);
    if (!goal_fits) {
        if (st != PD_GOAL_BLOCKED)
            fail_msg("%s unit %d (%d,%d)->(%d,%d): %s, want GOAL_BLOCKED", what, k, s.x, s.y, t.x,
                     t.y, pd_status_name(st));
        assert_false(connected);
        tally->goal_blocked++;
        return;
    }
    if (want < 0) {
        if (st != PD_NO_PATH)
            fail_msg("%s unit %d (%d,%d)->(%d,%d): %s (cost %.12f), reference finds no path", what,
                     k, s.x, s.y, t.x, t.y, pd_status_name(st), met.cost);
        if (connected)
            fail_msg("%s unit %d (%d,%d)->(%d,%d): components say connected, reference does not",
                     what, k, s.x, s.y, t.x, t.y);
        tally->unreached++;
        return;
    }
    if (st != PD_OK)
        fail_msg("%s unit %d (%d,%d)->(%d,%d): %s, reference cost %.12f", what, k, s.x, s.y, t.x,
                 t.y, pd_status_name(st), want);
    if (fabs(met.cost - want) > CORE_COST_EPS)
        fail_msg("%s unit %d (%d,%d)->(%d,%d): A* cost %.12f, reference %.12f", what, k, s.x, s.y,
                 t.x, t.y, met.cost, want);
    if (!connected)
        fail_msg("%s unit %d (%d,%d)->(%d,%d): reachable but components say not connected", what,
                 k, s.x, s.y, t.x, t.y);
    check_walk(gr, m, path, met.path_len, s, t, met.cost, what);
    tally->reached++;
}

static void random_map(uint64_t *rng, fp_map *m, int *weighted_out)
{
    m->w = 1 + rng_below(rng, US_MAX_SIDE);
    m->h = 1 + rng_below(rng, US_MAX_SIDE);
    int density = rng_below(rng, 41);
    int weighted = rng_below(rng, 3) == 0;
    m->cells = malloc((size_t)m->w * (size_t)m->h);
    assert_non_null(m->cells);
    for (int32_t i = 0; i < m->w * m->h; i++) {
        if (rng_below(rng, 100) < density)
            m->cells[i] = 0;
        else
            m->cells[i] = weighted ? (uint8_t)(1 + rng_below(rng, 5)) : 1;
    }
    *weighted_out = weighted;
}

/* Checks one unit size on one map: a random legal start (or, when none
 * fits, the START_BLOCKED answer), random goals (legal anchors and arbitrary
 * cells), the start itself and the farthest reachable anchor; then the
 * component labels against reachability for every anchor. */
static void check_unit(pd_search_ctx *ctx, uint64_t *rng, const fp_map *m, const pd_grid *g,
                       const pd_clearance *cl, int k, us_tally *tally, const char *what)
{
    pd_grid *ug = pd_unit_grid_build(g, cl, (uint32_t)k);
    assert_non_null(ug);
    pd_components *cc = pd_components_build(ug);
    assert_non_null(cc);
    fp_graph gr;
    fp_graph_build(m, k, &gr);
    int32_t n = m->w * m->h;
    int32_t *anchors = malloc((size_t)n * sizeof *anchors);
    double *dist = malloc((size_t)n * sizeof *dist);
    assert_non_null(anchors);
    assert_non_null(dist);
    int32_t n_anchors = 0;
    for (int32_t i = 0; i < n; i++)
        if (fp_footprint_cost(m, k, i % m->w, i / m->w))
            anchors[n_anchors++] = i;
    if (n_anchors == 0) {
        pd_search_params p;
        memset(&p, 0, sizeof p);
        p.start.x = rng_below(rng, m->w);
        p.start.y = rng_below(rng, m->h);
        p.goal = p.start;
        pd_search_metrics met;
        assert_int_equal(pd_search_astar(ctx, ug, &p, NULL, 0, &met), PD_START_BLOCKED);
        assert_int_equal(cc->count, 0);
        tally->start_blocked++;
    } else {
        int32_t si = anchors[rng_below(rng, n_anchors)];
        pd_point s = { si % m->w, si / m->w };
        fp_dijkstra(&gr, si, dist);
        compare_one(ctx, ug, cc, &gr, m, k, s, s, dist, tally, what);
        for (int j = 0; j < US_GOALS_PER_START; j++) {
            int32_t ti = j % 2 ? anchors[rng_below(rng, n_anchors)] : rng_below(rng, n);
            pd_point t = { ti % m->w, ti / m->w };
            compare_one(ctx, ug, cc, &gr, m, k, s, t, dist, tally, what);
        }
        int32_t far = si;
        for (int32_t i = 0; i < n; i++)
            if (dist[i] > dist[far])
                far = i;
        pd_point t = { far % m->w, far / m->w };
        compare_one(ctx, ug, cc, &gr, m, k, s, t, dist, tally, what);
        /* Labels: connected to the start exactly where the reference
         * reaches, and 0 exactly where no footprint fits. */
        for (int32_t i = 0; i < n; i++) {
            pd_point q = { i % m->w, i / m->w };
            int fits = fp_footprint_cost(m, k, q.x, q.y) != 0;
            assert_int_equal(pd_components_label(cc, q) != 0, fits);
            if (pd_components_connected(cc, s, q) != (dist[i] >= 0))
                fail_msg("%s unit %d: components and reference disagree on (%d,%d)->(%d,%d)",
                         what, k, s.x, s.y, q.x, q.y);
        }
    }
    free(dist);
    free(anchors);
    fp_graph_free(&gr);
    pd_components_destroy(cc);
    pd_grid_destroy(ug);
}

static void test_against_footprint_reference(void **state)
{
    pd_search_ctx *ctx = pd_search_ctx_create();
    assert_non_null(ctx);
    uint64_t rng = 0x853C49E6748FEA9Bull;
    us_tally tally[US_MAX_UNIT + 1];
    memset(tally, 0, sizeof tally);
    int weighted_maps = 0;
    for (int i = 0; i < US_GRIDS; i++) {
        fp_map m;
        int weighted;
        random_map(&rng, &m, &weighted);
        weighted_maps += weighted;
        pd_grid *g = pd_grid_create(m.w, m.h);
        assert_non_null(g);
        for (int32_t y = 0; y < m.h; y++)
            for (int32_t x = 0; x < m.w; x++)
                pd_grid_set(g, x, y, m.cells[y * m.w + x]);
        pd_clearance *cl = pd_clearance_build(g);
        assert_non_null(cl);
        char what[64];
        snprintf(what, sizeof what, "map %d (%dx%d)", i, m.w, m.h);
        for (int k = 1; k <= US_MAX_UNIT; k++)
            check_unit(ctx, &rng, &m, g, cl, k, &tally[k], what);
        pd_clearance_destroy(cl);
        pd_grid_destroy(g);
        free(m.cells);
    }
    for (int k = 1; k <= US_MAX_UNIT; k++)
        print_message("unit %d: %d reached, %d unreached, %d goal blocked, %d no fitting start\n", k,
                      tally[k].reached, tally[k].unreached, tally[k].goal_blocked,
                      tally[k].start_blocked);
    /* The generator must have produced every kind of case for every size. */
    assert_true(weighted_maps > US_GRIDS / 5);
    for (int k = 1; k <= US_MAX_UNIT; k++) {
        assert_true(tally[k].reached > 300);
        assert_true(tally[k].unreached > 20);
        assert_true(tally[k].goal_blocked > 50);
    }
    assert_true(tally[US_MAX_UNIT].start_blocked > 5);
    pd_search_ctx_destroy(ctx);
}

/* A hand-made case: a 2-wide unit passes a 2-wide gap but not a 1-wide one,
 * and may not cut the corner of a wall even where a 1-unit could. */
static void test_gaps(void **state)
{
    pd_grid *g = core_grid("......\n"
                           "......\n"
                           "###..#\n"
                           "......\n"
                           "......\n");
    pd_clearance *cl = pd_clearance_build(g);
    assert_non_null(cl);
    pd_grid *u2 = pd_unit_grid_build(g, cl, 2);
    assert_non_null(u2);
    pd_search_ctx *ctx = pd_search_ctx_create();
    assert_non_null(ctx);
    pd_point path[64];
    pd_search_metrics met;
    /* From the top-left to the bottom-left anchor: through the gap at x 3..4. */
    pd_status st = core_search(ctx, u2, PD_CONNECT_8, (pd_point){ 0, 0 }, (pd_point){ 0, 3 }, path,
                               64, &met);
    assert_int_equal(st, PD_OK);
    for (size_t i = 0; i < met.path_len; i++) {
        /* Every anchor on the way keeps the whole 2x2 square on open cells. */
        for (int32_t dy = 0; dy < 2; dy++)
            for (int32_t dx = 0; dx < 2; dx++)
                assert_int_not_equal(pd_grid_get(g, path[i].x + dx, path[i].y + dy), 0);
    }
    pd_grid_set(g, 4, 2, PD_CELL_BLOCKED);
    pd_clearance_update(cl, g, 4, 2, 4, 2);
    pd_unit_grid_update(u2, g, cl, 2, 4, 2, 4, 2);
    st = core_search(ctx, u2, PD_CONNECT_8, (pd_point){ 0, 0 }, (pd_point){ 0, 3 }, path, 64, &met);
    assert_int_equal(st, PD_NO_PATH);
    pd_search_ctx_destroy(ctx);
    pd_grid_destroy(u2);
    pd_clearance_destroy(cl);
    pd_grid_destroy(g);
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) * 1e-9;
}

/* Repairs everything derived for units 1..US_MAX_UNIT after the grid
 * changed in [x0..x1] x [y0..y1]; returns the seconds it took. */
static double timed_repair(pd_grid *g, pd_clearance *cl, pd_grid **ug, pd_components **cc,
                           int32_t x0, int32_t y0, int32_t x1, int32_t y1)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pd_clearance_update(cl, g, x0, y0, x1, y1);
    for (int k = 1; k <= US_MAX_UNIT; k++) {
        pd_unit_grid_update(ug[k], g, cl, (uint32_t)k, x0, y0, x1, y1);
        /* A unit grid changes over the rectangle grown by k - 1 up and left. */
        assert_int_equal(pd_components_update(cc[k], ug[k], x0 - k + 1, y0 - k + 1, x1, y1), 0);
    }
    return seconds_since(&t0);
}

/* Not a timed test: prints how long building and repairing the derived data
 * takes on a 1024 x 1024 map with 20% random obstacles, and checks the
 * repaired labels against a rebuild so the work timed is the real work. */
static void test_timing_1024(void **state)
{
    uint64_t rng = 0x6A09E667F3BCC909ull;
    pd_grid *g = pd_grid_create(US_TIMING_SIDE, US_TIMING_SIDE);
    assert_non_null(g);
    for (int32_t y = 0; y < g->height; y++)
        for (int32_t x = 0; x < g->width; x++)
            g->cells[pd_grid_index(g, x, y)] = rng_below(&rng, 100) < 20 ? 0 : PD_CELL_FREE;
    pd_grid_refresh_flags(g);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pd_clearance *cl = pd_clearance_build(g);
    assert_non_null(cl);
    double t_clearance = seconds_since(&t0);
    pd_grid *ug[US_MAX_UNIT + 1];
    pd_components *cc[US_MAX_UNIT + 1];
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int k = 1; k <= US_MAX_UNIT; k++) {
        ug[k] = pd_unit_grid_build(g, cl, (uint32_t)k);
        assert_non_null(ug[k]);
    }
    double t_units = seconds_since(&t0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int k = 1; k <= US_MAX_UNIT; k++) {
        cc[k] = pd_components_build(ug[k]);
        assert_non_null(cc[k]);
    }
    double t_components = seconds_since(&t0);
    print_message("1024x1024 build: clearance %.2f ms, unit grids 1..%d %.2f ms, components "
                  "1..%d %.2f ms, total %.2f ms\n",
                  t_clearance * 1e3, US_MAX_UNIT, t_units * 1e3, US_MAX_UNIT, t_components * 1e3,
                  (t_clearance + t_units + t_components) * 1e3);

    pd_grid_set(g, 500, 500, PD_CELL_BLOCKED);
    double t_one = timed_repair(g, cl, ug, cc, 500, 500, 500, 500);
    for (int32_t y = 300; y < 332; y++)
        for (int32_t x = 300; x < 332; x++)
            pd_grid_set(g, x, y, (x + y) % 2 ? PD_CELL_BLOCKED : PD_CELL_FREE);
    double t_block = timed_repair(g, cl, ug, cc, 300, 300, 331, 331);
    print_message("1024x1024 repair, units 1..%d: 1 cell %.3f ms, 32x32 %.3f ms\n", US_MAX_UNIT,
                  t_one * 1e3, t_block * 1e3);

    for (int k = 1; k <= US_MAX_UNIT; k++) {
        pd_components *fresh = pd_components_build(ug[k]);
        assert_non_null(fresh);
        assert_int_equal(fresh->count, cc[k]->count);
        pd_components_destroy(fresh);
        pd_components_destroy(cc[k]);
        pd_grid_destroy(ug[k]);
    }
    pd_clearance_destroy(cl);
    pd_grid_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_footprint_reference),
        cmocka_unit_test(test_gaps),
        cmocka_unit_test(test_timing_1024),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
