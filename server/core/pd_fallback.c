/*
 * pd_fallback.c - substitute start/goal cells (see pd_fallback.h).
 *
 * NEAREST / snapping searches square (Chebyshev) rings outward from the
 * asked-for point, because rings touch only cells near it and stop early in
 * the common case of an open cell next door. A ring is not a Euclidean
 * circle, though: a hit in ring r may lie as far as r*sqrt(2) away while a
 * cell in a later ring lies closer, so after the first hit the search goes on
 * through every ring whose nearest possible cell (distance = its radius) is
 * not farther than the best hit. Distances are compared as exact squared
 * integers, and ties go to the smaller y, then the smaller x.
 *
 * LINE walks the exact supercover from the goal back to the start
 * (pd_supercover.h) and stops at the first cell in the start's component.
 */
#include "pd_fallback.h"

#include <stddef.h>

#include "pd_supercover.h"

typedef struct pd__nearest {
    const pd_grid *g;
    const pd_components *comps;
    uint32_t label;
    pd_components_match in;          /* label, when non-zero */
    int64_t px, py;
    int found;
    uint64_t best_d2;     /* squared Euclidean distance of best */
    pd_point best;
} pd__nearest;

static inline int pd__qualifies(const pd__nearest *s, int32_t x, int32_t y)
{
    if (pd_grid_get(s->g, x, y) == PD_CELL_BLOCKED)
        return 0;
    return s->label == 0 || pd_components_in(s->comps, &s->in, (pd_point){x, y});
}

/* Only rings up to about sqrt(2) * max_radius (<= sqrt(2) * INT32_MAX) are
 * scanned, so a squared distance stays below 4 * INT32_MAX^2 < 2^64 and
 * unsigned 64-bit arithmetic on it is exact. */
static uint64_t pd__abs64(int64_t v)
{
    return (uint64_t)(v < 0 ? -v : v);
}

static inline void pd__consider(pd__nearest *s, int64_t x, int64_t y)
{
    if (!pd__qualifies(s, (int32_t)x, (int32_t)y))
        return;
    uint64_t ax = pd__abs64(x - s->px), ay = pd__abs64(y - s->py);
    uint64_t d2 = ax * ax + ay * ay;
    if (s->found) {
        if (d2 > s->best_d2)
            return;
        if (d2 == s->best_d2 &&
            (y > s->best.y || (y == s->best.y && x > s->best.x)))
            return;
    }
    s->found = 1;
    s->best_d2 = d2;
    s->best = (pd_point){(int32_t)x, (int32_t)y};
}

static int64_t pd__max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

static int64_t pd__min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* Visits the cells of ring r (Chebyshev distance exactly r from p) that lie
 * inside the grid; the parts outside are clipped away, not walked. */
static void pd__scan_ring(pd__nearest *s, int64_t r)
{
    int64_t w = s->g->width, h = s->g->height;
    int64_t x0 = pd__max64(s->px - r, 0), x1 = pd__min64(s->px + r, w - 1);
    int64_t top = s->py - r, bottom = s->py + r;
    if (r == 0) {
        if (s->px >= 0 && s->px < w && s->py >= 0 && s->py < h)
            pd__consider(s, s->px, s->py);
        return;
    }
    if (top >= 0 && top < h)
        for (int64_t x = x0; x <= x1; x++)
            pd__consider(s, x, top);
    if (bottom >= 0 && bottom < h)
        for (int64_t x = x0; x <= x1; x++)
            pd__consider(s, x, bottom);
    int64_t y0 = pd__max64(top + 1, 0), y1 = pd__min64(bottom - 1, h - 1);
    int64_t left = s->px - r, right = s->px + r;
    if (left >= 0 && left < w)
        for (int64_t y = y0; y <= y1; y++)
            pd__consider(s, left, y);
    if (right >= 0 && right < w)
        for (int64_t y = y0; y <= y1; y++)
            pd__consider(s, right, y);
}

/* Chebyshev distance from p to the nearest / farthest grid cell: rings
 * before the first cannot touch the grid, rings after the second neither. */
static int64_t pd__axis_gap(int64_t v, int64_t size)
{
    return v < 0 ? -v : (v >= size ? v - (size - 1) : 0);
}

static int64_t pd__axis_reach(int64_t v, int64_t size)
{
    return pd__max64((int64_t)pd__abs64(v), (int64_t)pd__abs64(size - 1 - v));
}

pd_status pd_fallback_nearest(const pd_grid *g, const pd_components *comps, uint32_t label,
                              pd_point p, int32_t max_radius, pd_point *out)
{
    if (!g || !out || max_radius < 0)
        return PD_INVALID_ARGUMENT;
    if (label != 0 && (!comps || comps->width != g->width || comps->height != g->height))
        return PD_INVALID_ARGUMENT;

    /* Set field by field: an initialiser would clear the match's cells
     * array (264 bytes) on every call, the ones answered at once too. */
    pd__nearest s;
    s.g = g;
    s.comps = comps;
    s.label = label;
    if (label != 0)
        pd_components_match_init(&s.in, comps, label);
    s.px = p.x;
    s.py = p.y;
    s.found = 0;
    s.best_d2 = 0;
    s.best = (pd_point){0, 0};
    int64_t first_ring = pd__max64(pd__axis_gap(s.px, g->width), pd__axis_gap(s.py, g->height));
    int64_t last_ring = pd__max64(pd__axis_reach(s.px, g->width), pd__axis_reach(s.py, g->height));
    /* The first hit must lie within max_radius rings; the rings checked after
     * it only confirm it is the Euclidean nearest, so they may go beyond. */
    for (int64_t r = first_ring; r <= last_ring; r++) {
        if (!s.found && r > max_radius)
            break;
        if (s.found && (uint64_t)r * (uint64_t)r > s.best_d2)
            break;
        pd__scan_ring(&s, r);
    }
    if (!s.found)
        return PD_NO_PATH;
    *out = s.best;
    return PD_OK;
}

pd_status pd_fallback_line(const pd_grid *g, const pd_components *comps,
                           pd_point start, pd_point goal, pd_point *out)
{
    if (!g || !comps || !out || comps->width != g->width || comps->height != g->height)
        return PD_INVALID_ARGUMENT;
    if (!pd_grid_in_bounds(g, start.x, start.y) || !pd_grid_in_bounds(g, goal.x, goal.y))
        return PD_OUT_OF_BOUNDS;
    uint32_t label = pd_components_label(comps, start);
    if (label == 0)
        return PD_NO_PATH;
    pd_components_match in;
    pd_components_match_init(&in, comps, label);

    pd__supercover w;
    pd__supercover_init(&w, goal, start);
    pd_point side[2];
    pd__supercover_move m = PD__SUPERCOVER_STRAIGHT;
    for (;;) {
        if (m == PD__SUPERCOVER_CORNER) {
            for (int i = 0; i < 2; i++) {
                if (pd_grid_get(g, side[i].x, side[i].y) != PD_CELL_BLOCKED &&
                    pd_components_in(comps, &in, side[i])) {
                    *out = side[i];
                    return PD_OK;
                }
            }
        }
        pd_point c = pd__supercover_cell(&w);
        if (pd_grid_get(g, c.x, c.y) != PD_CELL_BLOCKED && pd_components_in(comps, &in, c)) {
            *out = c;
            return PD_OK;
        }
        m = pd__supercover_step(&w, side);
        if (m == PD__SUPERCOVER_DONE)
            return PD_NO_PATH;
    }
}
