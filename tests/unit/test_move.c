/*
 * test_move.c - the movement geometry (pd_move.c) against brute force.
 *
 *  - Rays: the reference samples the segment finely in long double and
 *    bisects between samples until each change of cell is one straight step
 *    or the interval is below 1e-15 (then the segment passes through a
 *    corner, which needs both cells beside it open). Samples avoid simple
 *    fractions of the segment, so none lands exactly on a corner. Random grids, segments
 *    between cell centres and between arbitrary fixed points; clear, hit,
 *    last_free and the cells walked must agree.
 *  - Nearest open cell and distance to the wall: full scans of every
 *    candidate cell (cells outside the grid count as walls).
 *  - Cells within a walking distance: a plain O(n^2) Dijkstra over the
 *    whole grid under the search's step rules.
 *  - Slides: hand-made walls, and on random grids the end always lies in an
 *    open cell and a clear move ends exactly at its target.
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

#include "pd_components.h"
#include "pd_move.h"
#include "test_rng.h"

#define F PD_MOVE_SUBCELL

static pd_grid *random_grid(uint64_t *rng, int32_t w, int32_t h, int density_pct, int weighted)
{
    pd_grid *g = pd_grid_create(w, h);
    assert_non_null(g);
    for (int32_t y = 0; y < h; y++)
        for (int32_t x = 0; x < w; x++) {
            uint8_t v = rng_below(rng, 100) < density_pct ? 0 : 1;
            if (v && weighted)
                v = (uint8_t)(1 + rng_below(rng, 4));
            pd_grid_set(g, x, y, v);
        }
    pd_grid_refresh_flags(g);
    return g;
}

static int open_cell(const pd_grid *g, int64_t x, int64_t y)
{
    return x >= 0 && y >= 0 && x < g->width && y < g->height && pd_grid_get(g, (int32_t)x, (int32_t)y) != 0;
}

/* ---- reference ray ------------------------------------------------------ */

typedef struct ref_ray {
    int clear;
    pd_point hit, last_free;
    uint32_t cells;
    int done;          /* stopped at a blocked cell */
} ref_ray;

typedef struct ref_seg {
    long double ax, ay, dx, dy;
} ref_seg;

static pd_point ref_cell(const ref_seg *s, long double t)
{
    return (pd_point){(int32_t)floorl(s->ax + t * s->dx), (int32_t)floorl(s->ay + t * s->dy)};
}

static void ref_enter(const pd_grid *g, ref_ray *r, pd_point from, pd_point to, int corner)
{
    if (r->done)
        return;
    if (corner) {
        pd_point side_x = {to.x, from.y}, side_y = {from.x, to.y};
        pd_point first = to.y < from.y ? side_y : side_x, second = to.y < from.y ? side_x : side_y;
        if (!open_cell(g, first.x, first.y)) {
            r->hit = first;
            r->done = 1;
            return;
        }
        if (!open_cell(g, second.x, second.y)) {
            r->hit = second;
            r->done = 1;
            return;
        }
    }
    if (!open_cell(g, to.x, to.y)) {
        r->hit = to;
        r->done = 1;
        return;
    }
    r->last_free = to;
    r->cells++;
}

static void ref_visit(const pd_grid *g, const ref_seg *s, ref_ray *r, long double t0, pd_point c0,
                      long double t1, pd_point c1)
{
    if (r->done || (c0.x == c1.x && c0.y == c1.y))
        return;
    int ddx = abs(c1.x - c0.x), ddy = abs(c1.y - c0.y);
    if (ddx + ddy == 1) {
        ref_enter(g, r, c0, c1, 0);
        return;
    }
    if (ddx == 1 && ddy == 1 && t1 - t0 < 1e-15L) {
        ref_enter(g, r, c0, c1, 1);
        return;
    }
    /* Not the midpoint: a segment through a corner would be sampled exactly
     * on it (t = 1/2 often is one), where floor names a third cell. */
    long double tm = t0 + (t1 - t0) * 0.41421356237L;
    pd_point cm = ref_cell(s, tm);
    ref_visit(g, s, r, t0, c0, tm, cm);
    ref_visit(g, s, r, tm, cm, t1, c1);
}

static ref_ray ref_raycast(const pd_grid *g, pd_fpoint a, pd_fpoint b)
{
    ref_seg s = {(long double)a.x / F, (long double)a.y / F, (long double)(b.x - a.x) / F,
                 (long double)(b.y - a.y) / F};
    ref_ray r = {0};
    pd_point c = ref_cell(&s, 0);
    r.last_free = c;
    r.cells = 1;
    int samples = 16 * (int)(fabsl(s.dx) + fabsl(s.dy) + 1);
    long double tp = 0;
    for (int i = 1; i <= samples && !r.done; i++) {
        long double t = i == samples ? 1.0L : (i - 0.31830988618L) / samples;
        pd_point cn = ref_cell(&s, t);
        ref_visit(g, &s, &r, tp, c, t, cn);
        c = cn;
        tp = t;
    }
    r.clear = !r.done;
    return r;
}

static void check_ray(const pd_grid *g, pd_fpoint a, pd_fpoint b)
{
    pd_ray_result got;
    assert_int_equal(pd_move_raycast(g, a, b, &got), PD_OK);
    ref_ray want = ref_raycast(g, a, b);
    if (got.clear != want.clear || got.cells != want.cells || got.last_free.x != want.last_free.x ||
        got.last_free.y != want.last_free.y || (!want.clear && (got.hit.x != want.hit.x || got.hit.y != want.hit.y)))
        fail_msg("ray (%f,%f)->(%f,%f): got clear %d hit (%d,%d) last (%d,%d) cells %u; want clear %d hit "
                 "(%d,%d) last (%d,%d) cells %u",
                 (double)a.x / F, (double)a.y / F, (double)b.x / F, (double)b.y / F, got.clear, got.hit.x,
                 got.hit.y, got.last_free.x, got.last_free.y, got.cells, want.clear, want.hit.x, want.hit.y,
                 want.last_free.x, want.last_free.y, want.cells);
    /* The stop point lies in last_free, and on a clear ray it is b. */
    pd_point sc = pd_move_cell_of(got.stop);
    assert_int_equal(sc.x, got.last_free.x);
    assert_int_equal(sc.y, got.last_free.y);
    if (got.clear) {
        assert_true(got.stop.x == b.x && got.stop.y == b.y);
    }
}

static pd_fpoint random_open_point(uint64_t *rng, const pd_grid *g, int centre)
{
    for (;;) {
        pd_point c = {rng_below(rng, g->width), rng_below(rng, g->height)};
        if (!open_cell(g, c.x, c.y))
            continue;
        if (centre)
            return pd_move_cell_center(c);
        return (pd_fpoint){(int64_t)c.x * F + rng_below(rng, F), (int64_t)c.y * F + rng_below(rng, F)};
    }
}

static void test_raycast_matches_sampling(void **state)
{
    (void)state;
    uint64_t rng = 0x9e3779b97f4a7c15u;
    size_t rays = 0, clear = 0;
    for (int k = 0; k < 150; k++) {
        pd_grid *g = random_grid(&rng, 1 + rng_below(&rng, 40), 1 + rng_below(&rng, 40), rng_below(&rng, 40), 0);
        int any = 0;
        for (int32_t i = 0; i < g->width * g->height && !any; i++)
            any = open_cell(g, i % g->width, i / g->width);
        for (int q = 0; any && q < 60; q++) {
            pd_fpoint a = random_open_point(&rng, g, q % 2);
            pd_fpoint b = random_open_point(&rng, g, q % 2);
            if (q % 5 == 0) /* exact diagonals, through cell corners */
                b = (pd_fpoint){a.x + (b.y - a.y), b.y};
            if (b.x < 0 || b.x >= (int64_t)g->width * F)
                continue;
            check_ray(g, a, b);
            pd_ray_result r;
            pd_move_raycast(g, a, b, &r);
            clear += (size_t)r.clear;
            rays++;
        }
        pd_grid_destroy(g);
    }
    print_message("rays: %zu checked, %zu clear\n", rays, clear);
    assert_true(rays > 5000);
    assert_true(clear > rays / 10 && clear < rays);
}

/* A diagonal pinch: two blocked cells touching at a corner stop a ray that
 * passes exactly through that corner, but not one that passes beside it. */
static void test_raycast_pinch_and_statuses(void **state)
{
    (void)state;
    pd_grid *g = pd_grid_create(4, 4);
    for (int32_t y = 0; y < 4; y++)
        for (int32_t x = 0; x < 4; x++)
            pd_grid_set(g, x, y, 1);
    pd_grid_set(g, 2, 1, 0);
    pd_grid_set(g, 1, 2, 0);
    pd_grid_refresh_flags(g);
    pd_ray_result r;
    assert_int_equal(pd_move_raycast(g, pd_move_cell_center((pd_point){0, 0}), pd_move_cell_center((pd_point){3, 3}), &r),
                     PD_OK);
    assert_false(r.clear);
    assert_int_equal(r.face, PD_MOVE_FACE_CORNER);
    assert_int_equal(r.hit.x, 2);  /* the side with the smaller y */
    assert_int_equal(r.hit.y, 1);
    assert_int_equal(r.last_free.x, 1);
    assert_int_equal(r.last_free.y, 1);
    /* The corner itself is the stop point, kept inside (1,1). */
    assert_true(r.stop.x == 2 * (int64_t)F - 1 && r.stop.y == 2 * (int64_t)F - 1);
    /* The same diagonal a third of a cell lower leaves (1,1) through its
     * bottom face into the blocked (1,2): a wall face, not the pinch. */
    assert_int_equal(pd_move_raycast(g, (pd_fpoint){F / 2, F / 2 + F / 3}, (pd_fpoint){3 * (int64_t)F + F / 2, 3 * (int64_t)F + F / 2 + F / 3}, &r),
                     PD_OK);
    assert_false(r.clear);
    assert_int_equal(r.face, PD_MOVE_FACE_Y);
    assert_int_equal(r.hit.x, 1);
    assert_int_equal(r.hit.y, 2);
    /* An open row: clear, four cells. */
    assert_int_equal(pd_move_raycast(g, pd_move_cell_center((pd_point){0, 0}), pd_move_cell_center((pd_point){3, 0}), &r),
                     PD_OK);
    assert_true(r.clear);
    assert_int_equal(r.cells, 4);
    /* Blocked start, start outside. */
    assert_int_equal(pd_move_raycast(g, pd_move_cell_center((pd_point){2, 1}), pd_move_cell_center((pd_point){0, 0}), &r),
                     PD_START_BLOCKED);
    assert_int_equal(pd_move_raycast(g, (pd_fpoint){-1, 0}, pd_move_cell_center((pd_point){0, 0}), &r),
                     PD_OUT_OF_BOUNDS);
    /* Past the edge: the edge is a wall. */
    assert_int_equal(pd_move_raycast(g, pd_move_cell_center((pd_point){0, 0}), (pd_fpoint){-3 * (int64_t)F, F / 2}, &r),
                     PD_OK);
    assert_false(r.clear);
    assert_int_equal(r.hit.x, -1);
    assert_int_equal(r.stop.x, 0);
    pd_grid_destroy(g);
}

/* ---- slides ------------------------------------------------------------- */

static void test_slide_along_walls(void **state)
{
    (void)state;
    /* 6x6 open room with a wall column at x = 3. */
    pd_grid *g = pd_grid_create(6, 6);
    for (int32_t y = 0; y < 6; y++)
        for (int32_t x = 0; x < 6; x++)
            pd_grid_set(g, x, y, x == 3 ? 0 : 1);
    pd_grid_refresh_flags(g);
    pd_fpoint end;
    int slid;
    /* From (1.5, 1.5) by (+3, +2): meets the wall at x = 3, keeps +2 in y. */
    assert_int_equal(pd_move_slide(g, (pd_fpoint){F + F / 2, F + F / 2}, (pd_fpoint){3 * (int64_t)F, 2 * (int64_t)F},
                                   &end, &slid),
                     PD_OK);
    assert_true(slid);
    assert_int_equal(end.x, 3 * (int64_t)F - 1);
    assert_int_equal(end.y, 3 * (int64_t)F + F / 2);
    /* A clear move ends at its target. */
    assert_int_equal(pd_move_slide(g, (pd_fpoint){F / 2, F / 2}, (pd_fpoint){F, 2 * (int64_t)F}, &end, &slid), PD_OK);
    assert_false(slid);
    assert_true(end.x == F + F / 2 && end.y == 2 * (int64_t)F + F / 2);
    /* Into the bottom edge: slides along it. */
    assert_int_equal(pd_move_slide(g, (pd_fpoint){F / 2, 5 * (int64_t)F + F / 2}, (pd_fpoint){F, 4 * (int64_t)F}, &end,
                                   &slid),
                     PD_OK);
    assert_true(slid);
    assert_int_equal(end.y, 6 * (int64_t)F - 1);
    assert_int_equal(end.x, F + F / 2);

    uint64_t rng = 12345;
    for (int k = 0; k < 40; k++) {
        pd_grid *rg = random_grid(&rng, 5 + rng_below(&rng, 30), 5 + rng_below(&rng, 30), 30, 0);
        for (int q = 0; q < 100; q++) {
            int32_t cx = rng_below(&rng, rg->width), cy = rng_below(&rng, rg->height);
            if (!open_cell(rg, cx, cy))
                continue;
            pd_fpoint a = {(int64_t)cx * F + rng_below(&rng, F), (int64_t)cy * F + rng_below(&rng, F)};
            pd_fpoint d = {(int64_t)(rng_below(&rng, 20 * F) - 10 * F), (int64_t)(rng_below(&rng, 20 * F) - 10 * F)};
            assert_int_equal(pd_move_slide(rg, a, d, &end, &slid), PD_OK);
            pd_point ec = pd_move_cell_of(end);
            assert_true(open_cell(rg, ec.x, ec.y));
            if (!slid)
                assert_true(end.x == a.x + d.x && end.y == a.y + d.y);
            /* The walk from a to the end is itself clear. */
            pd_ray_result r;
            if (!slid) {
                assert_int_equal(pd_move_raycast(rg, a, end, &r), PD_OK);
                assert_true(r.clear);
            }
        }
        pd_grid_destroy(rg);
    }
    pd_grid_destroy(g);
}

/* ---- nearest open cell and distance to the wall ------------------------ */

static int better(int64_t d2, int64_t x, int64_t y, int64_t bd2, int64_t bx, int64_t by)
{
    return d2 < bd2 || (d2 == bd2 && (y < by || (y == by && x < bx)));
}

static void test_nearest_and_wall_match_scans(void **state)
{
    (void)state;
    uint64_t rng = 777;
    size_t found = 0, none = 0;
    for (int k = 0; k < 120; k++) {
        pd_grid *g = random_grid(&rng, 1 + rng_below(&rng, 30), 1 + rng_below(&rng, 30), rng_below(&rng, 90), 0);
        pd_components *labels = pd_components_build(g);
        assert_non_null(labels);
        for (int q = 0; q < 40; q++) {
            pd_point at = {rng_below(&rng, g->width + 10) - 5, rng_below(&rng, g->height + 10) - 5};
            uint32_t radius = (uint32_t)rng_below(&rng, 12);
            pd_point from = {rng_below(&rng, g->width), rng_below(&rng, g->height)};
            uint32_t label = q % 2 ? pd_components_label(labels, from) : 0;
            int64_t bd2 = INT64_MAX, bx = 0, by = 0;
            for (int32_t y = 0; y < g->height; y++)
                for (int32_t x = 0; x < g->width; x++) {
                    int64_t d2 = (int64_t)(x - at.x) * (x - at.x) + (int64_t)(y - at.y) * (y - at.y);
                    if (!open_cell(g, x, y) || d2 > (int64_t)radius * radius)
                        continue;
                    if (label && pd_components_label(labels, (pd_point){x, y}) != label)
                        continue;
                    if (better(d2, x, y, bd2, bx, by)) {
                        bd2 = d2;
                        bx = x;
                        by = y;
                    }
                }
            pd_point cell;
            double dist;
            pd_status st = pd_move_nearest_open(g, at, radius, labels, label, &cell, &dist);
            if (bd2 == INT64_MAX) {
                assert_int_equal(st, PD_NO_PATH);
                none++;
            } else {
                assert_int_equal(st, PD_OK);
                assert_int_equal(cell.x, bx);
                assert_int_equal(cell.y, by);
                assert_true(fabs(dist - sqrt((double)bd2)) < 1e-12);
                found++;
            }

            /* Walls: every blocked cell and every cell of a ring of width
             * cap around the grid. */
            pd_point c = {rng_below(&rng, g->width), rng_below(&rng, g->height)};
            uint32_t cap = (uint32_t)rng_below(&rng, 10);
            bd2 = INT64_MAX;
            for (int32_t y = -(int32_t)cap - 1; y < g->height + (int32_t)cap + 1; y++)
                for (int32_t x = -(int32_t)cap - 1; x < g->width + (int32_t)cap + 1; x++) {
                    int64_t d2 = (int64_t)(x - c.x) * (x - c.x) + (int64_t)(y - c.y) * (y - c.y);
                    if (open_cell(g, x, y) || d2 > (int64_t)cap * cap)
                        continue;
                    if (better(d2, x, y, bd2, bx, by)) {
                        bd2 = d2;
                        bx = x;
                        by = y;
                    }
                }
            pd_point wall;
            int hit = pd_move_distance_to_wall(g, c, cap, &dist, &wall);
            if (bd2 == INT64_MAX) {
                assert_false(hit);
                assert_true(dist == cap);
            } else {
                assert_true(hit);
                assert_int_equal(wall.x, bx);
                assert_int_equal(wall.y, by);
                assert_true(fabs(dist - sqrt((double)bd2)) < 1e-12);
            }
        }
        pd_components_destroy(labels);
        pd_grid_destroy(g);
    }
    print_message("nearest: %zu found, %zu none within radius\n", found, none);
    assert_true(found > 1000 && none > 50);
}

/* ---- cells within a walking distance ------------------------------------ */

static void ref_costs(const pd_grid *g, pd_point from, double *cost)
{
    int32_t w = g->width, n = g->width * g->height;
    char *done = calloc((size_t)n, 1);
    for (int32_t i = 0; i < n; i++)
        cost[i] = INFINITY;
    cost[from.y * w + from.x] = 0;
    for (;;) {
        int32_t best = -1;
        for (int32_t i = 0; i < n; i++)
            if (!done[i] && isfinite(cost[i]) && (best < 0 || cost[i] < cost[best]))
                best = i;
        if (best < 0)
            break;
        done[best] = 1;
        int32_t x = best % w, y = best / w;
        for (int dy = -1; dy <= 1; dy++)
            for (int dx = -1; dx <= 1; dx++) {
                if ((!dx && !dy) || !open_cell(g, x + dx, y + dy))
                    continue;
                if (dx && dy && (!open_cell(g, x + dx, y) || !open_cell(g, x, y + dy)))
                    continue;
                double c = cost[best] + ((dx && dy) ? 1.41421356237309504880 : 1.0) * pd_grid_get(g, x + dx, y + dy);
                int32_t j = (y + dy) * w + x + dx;
                if (c < cost[j])
                    cost[j] = c;
            }
    }
    free(done);
}

static void test_within_matches_dijkstra(void **state)
{
    (void)state;
    uint64_t rng = 4242;
    pd_move_area area = {0};
    size_t total = 0;
    for (int k = 0; k < 60; k++) {
        pd_grid *g = random_grid(&rng, 2 + rng_below(&rng, 25), 2 + rng_below(&rng, 25), rng_below(&rng, 35), k % 2);
        double *cost = malloc(sizeof(double) * (size_t)(g->width * g->height));
        for (int q = 0; q < 10; q++) {
            pd_point from = {rng_below(&rng, g->width), rng_below(&rng, g->height)};
            double radius = rng_below(&rng, 120) / 10.0;
            size_t n = 0;
            pd_status st = pd_move_within(g, from, radius, &area, &n);
            if (!open_cell(g, from.x, from.y)) {
                assert_int_equal(st, PD_START_BLOCKED);
                continue;
            }
            assert_int_equal(st, PD_OK);
            ref_costs(g, from, cost);
            size_t want = 0;
            for (int32_t i = 0; i < g->width * g->height; i++)
                want += cost[i] <= radius + 1e-9;
            assert_int_equal(n, want);
            for (size_t i = 0; i < n; i++) {
                pd_point c = area.cells[i];
                assert_true(cost[c.y * g->width + c.x] <= radius + 1e-9);
            }
            total += n;
        }
        free(cost);
        pd_grid_destroy(g);
    }
    pd_move_area_free(&area);
    assert_true(total > 1000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_raycast_matches_sampling),
        cmocka_unit_test(test_raycast_pinch_and_statuses),
        cmocka_unit_test(test_slide_along_walls),
        cmocka_unit_test(test_nearest_and_wall_match_scans),
        cmocka_unit_test(test_within_matches_dijkstra),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
