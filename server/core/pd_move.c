/*
 * pd_move.c - geometry for authoritative movement (see pd_move.h).
 *
 * The ray walk is a grid traversal in the manner of Amanatides & Woo, done
 * in integers: which grid line the segment meets next is decided by
 * comparing |boundary - a| * |d_other| for the two axes (128-bit products),
 * so equal means the segment passes exactly through the corner. Positions
 * stay below 2^31 in magnitude for any grid side up to PD_GRID_MAX_SIDE and
 * any displacement the query layer admits, so the products fit easily.
 */
#include "pd_move.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PD__F ((int64_t)PD_MOVE_SUBCELL)
#define PD__SQRT2 1.41421356237309504880

static int64_t pd__floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

pd_fpoint pd_move_cell_center(pd_point cell)
{
    return (pd_fpoint){(int64_t)cell.x * PD__F + PD__F / 2, (int64_t)cell.y * PD__F + PD__F / 2};
}

pd_point pd_move_cell_of(pd_fpoint p)
{
    return (pd_point){(int32_t)pd__floor_div(p.x, PD__F), (int32_t)pd__floor_div(p.y, PD__F)};
}

static int pd__open(const pd_grid *g, int64_t x, int64_t y)
{
    if (x < 0 || y < 0 || x >= g->width || y >= g->height)
        return 0;
    return pd_grid_get(g, (int32_t)x, (int32_t)y) != 0;
}

static int64_t pd__clamp(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

static int64_t pd__abs64(int64_t v)
{
    return v < 0 ? -v : v;
}

/* The point of segment a + t*d at the crossing of an x line (across = x)
 * or y line, kept inside cell (cx, cy). */
static pd_fpoint pd__stop_point(pd_fpoint a, int64_t dx, int64_t dy, int64_t cx, int64_t cy, int on_x,
                                int64_t boundary)
{
    pd_fpoint p;
    if (on_x) {
        p.x = boundary;
        p.y = a.y + (int64_t)((__int128)dy * (boundary - a.x) / dx);
    } else {
        p.y = boundary;
        p.x = a.x + (int64_t)((__int128)dx * (boundary - a.y) / dy);
    }
    p.x = pd__clamp(p.x, cx * PD__F, cx * PD__F + PD__F - 1);
    p.y = pd__clamp(p.y, cy * PD__F, cy * PD__F + PD__F - 1);
    return p;
}

pd_status pd_move_raycast(const pd_grid *g, pd_fpoint a, pd_fpoint b, pd_ray_result *out)
{
    memset(out, 0, sizeof *out);
    pd_point start = pd_move_cell_of(a), end = pd_move_cell_of(b);
    if (!pd_grid_in_bounds(g, start.x, start.y))
        return PD_OUT_OF_BOUNDS;
    if (!pd__open(g, start.x, start.y))
        return PD_START_BLOCKED;

    int64_t cx = start.x, cy = start.y;
    const int64_t dx = b.x - a.x, dy = b.y - a.y;
    const int64_t sx = dx < 0 ? -1 : (dx > 0 ? 1 : 0), sy = dy < 0 ? -1 : (dy > 0 ? 1 : 0);
    const int64_t adx = pd__abs64(dx), ady = pd__abs64(dy);
    /* Each move brings the cell one step (two at a corner) nearer the end
     * cell in Manhattan distance, so this many moves always suffice. */
    int64_t moves_left = pd__abs64((int64_t)end.x - cx) + pd__abs64((int64_t)end.y - cy);

    out->cells = 1;
    while ((cx != end.x || cy != end.y) && moves_left-- > 0) {
        int64_t xb = sx > 0 ? (cx + 1) * PD__F : cx * PD__F;
        int64_t yb = sy > 0 ? (cy + 1) * PD__F : cy * PD__F;
        int order; /* < 0: x line first, > 0: y line first, 0: the corner */
        if (sx == 0)
            order = 1;
        else if (sy == 0)
            order = -1;
        else {
            __int128 tx = (__int128)pd__abs64(xb - a.x) * ady, ty = (__int128)pd__abs64(yb - a.y) * adx;
            order = tx < ty ? -1 : (tx > ty ? 1 : 0);
        }
        int64_t nx = cx, ny = cy;
        if (order < 0)
            nx += sx;
        else if (order > 0)
            ny += sy;
        else {
            nx += sx;
            ny += sy;
            /* Both cells beside the corner must be open, as for a diagonal
             * step; the one with the smaller y is named first. */
            pd_point beside_x = {(int32_t)nx, (int32_t)cy}, beside_y = {(int32_t)cx, (int32_t)ny};
            pd_point first = sy < 0 ? beside_y : beside_x, second = sy < 0 ? beside_x : beside_y;
            pd_point blocked;
            int pinched = 1;
            if (!pd__open(g, first.x, first.y))
                blocked = first;
            else if (!pd__open(g, second.x, second.y))
                blocked = second;
            else
                pinched = 0;
            if (pinched || !pd__open(g, nx, ny)) {
                out->hit = pinched ? blocked : (pd_point){(int32_t)nx, (int32_t)ny};
                out->face = PD_MOVE_FACE_CORNER;
                out->last_free = (pd_point){(int32_t)cx, (int32_t)cy};
                out->stop = pd__stop_point(a, dx, dy, cx, cy, 1, xb);
                return PD_OK;
            }
            cx = nx;
            cy = ny;
            out->cells++;
            continue;
        }
        if (!pd__open(g, nx, ny)) {
            out->hit = (pd_point){(int32_t)nx, (int32_t)ny};
            out->face = order < 0 ? PD_MOVE_FACE_X : PD_MOVE_FACE_Y;
            out->last_free = (pd_point){(int32_t)cx, (int32_t)cy};
            out->stop = pd__stop_point(a, dx, dy, cx, cy, order < 0, order < 0 ? xb : yb);
            return PD_OK;
        }
        cx = nx;
        cy = ny;
        out->cells++;
    }
    out->clear = 1;
    out->last_free = (pd_point){(int32_t)cx, (int32_t)cy};
    out->stop = b;
    return PD_OK;
}

pd_status pd_move_slide(const pd_grid *g, pd_fpoint a, pd_fpoint d, pd_fpoint *end, int *slid)
{
    pd_fpoint pos = a;
    *slid = 0;
    for (int i = 0; i < PD_MOVE_MAX_SLIDES && (d.x != 0 || d.y != 0); i++) {
        pd_fpoint target = {pos.x + d.x, pos.y + d.y};
        pd_ray_result ray;
        pd_status st = pd_move_raycast(g, pos, target, &ray);
        if (st != PD_OK)
            return st;
        if (ray.clear) {
            pos = target;
            break;
        }
        *slid = 1;
        pos = ray.stop;
        if (ray.face == PD_MOVE_FACE_CORNER)
            break;
        /* What is left of the move, without its part into the wall. */
        d = (pd_fpoint){target.x - pos.x, target.y - pos.y};
        if (ray.face == PD_MOVE_FACE_X)
            d.x = 0;
        else
            d.y = 0;
    }
    *end = pos;
    return PD_OK;
}

/* Ring search shared by the nearest open cell and the nearest wall: the
 * cell within radius nearest to `at` (squared Euclidean distance between
 * centres, ties to the smaller y then x) for which want() holds. Cells in
 * Chebyshev ring r are at least r away, so the rings stop once r^2 exceeds
 * the best distance found. */
typedef int (*pd__cell_test)(const pd_grid *g, int64_t x, int64_t y, const void *user);

static int pd__ring_search(const pd_grid *g, pd_point at, uint32_t radius, pd__cell_test want,
                           const void *user, pd_point *cell, uint64_t *dist2)
{
    const uint64_t limit2 = (uint64_t)radius * radius;
    uint64_t best2 = UINT64_MAX;
    int64_t bx = 0, by = 0;
    for (int64_t r = 0; r <= (int64_t)radius && (uint64_t)(r * r) <= best2; r++) {
        for (int64_t dy = -r; dy <= r; dy++) {
            int64_t step = (dy == -r || dy == r || r == 0) ? 1 : 2 * r;
            for (int64_t dx = -r; dx <= r; dx += step) {
                uint64_t d2 = (uint64_t)(dx * dx + dy * dy);
                if (d2 > limit2 || d2 > best2)
                    continue;
                int64_t x = at.x + dx, y = at.y + dy;
                if (d2 == best2 && (y > by || (y == by && x > bx)))
                    continue;
                if (!want(g, x, y, user))
                    continue;
                best2 = d2;
                bx = x;
                by = y;
            }
        }
    }
    if (best2 == UINT64_MAX)
        return 0;
    *cell = (pd_point){(int32_t)bx, (int32_t)by};
    *dist2 = best2;
    return 1;
}

typedef struct pd__open_in {
    const pd_components *labels;
    uint32_t label;
    const pd_components_match *in;   /* label, when labels and label are set */
} pd__open_in;

static int pd__want_open(const pd_grid *g, int64_t x, int64_t y, const void *user)
{
    const pd__open_in *in = user;
    if (!pd__open(g, x, y))
        return 0;
    return !in->labels || in->label == 0 || pd_components_in(in->labels, in->in, (pd_point){(int32_t)x, (int32_t)y});
}

static int pd__want_blocked(const pd_grid *g, int64_t x, int64_t y, const void *user)
{
    (void)user;
    return !pd__open(g, x, y);
}

pd_status pd_move_nearest_open(const pd_grid *g, pd_point at, uint32_t radius, const pd_components *labels,
                               uint32_t label, pd_point *cell, double *dist)
{
    pd_components_match match;
    if (labels && label)
        pd_components_match_init(&match, labels, label);
    pd__open_in in = {labels, label, &match};
    uint64_t d2;
    if (!pd__ring_search(g, at, radius, pd__want_open, &in, cell, &d2))
        return PD_NO_PATH;
    *dist = sqrt((double)d2);
    return PD_OK;
}

int pd_move_distance_to_wall(const pd_grid *g, pd_point at, uint32_t cap, double *dist, pd_point *wall)
{
    uint64_t d2;
    if (!pd__ring_search(g, at, cap, pd__want_blocked, NULL, wall, &d2)) {
        *dist = cap;
        return 0;
    }
    *dist = sqrt((double)d2);
    return 1;
}

/* ---- cells within a walking distance ----------------------------------- */

#define PD__UNSEEN UINT32_MAX
#define PD__SETTLED (UINT32_MAX - 1)

void pd_move_area_free(pd_move_area *a)
{
    if (!a)
        return;
    free(a->cost);
    free(a->pos);
    free(a->heap);
    free(a->cells);
    memset(a, 0, sizeof *a);
}

size_t pd_move_area_bytes(const pd_move_area *a)
{
    return a->cap * (sizeof *a->cost + sizeof *a->pos + sizeof *a->heap + sizeof *a->cells);
}

static int pd__area_grow(pd_move_area *a, size_t n)
{
    if (n <= a->cap)
        return 0;
    double *cost = realloc(a->cost, n * sizeof *cost);
    if (cost)
        a->cost = cost;
    uint32_t *pos = realloc(a->pos, n * sizeof *pos);
    if (pos)
        a->pos = pos;
    uint32_t *heap = realloc(a->heap, n * sizeof *heap);
    if (heap)
        a->heap = heap;
    pd_point *cells = realloc(a->cells, n * sizeof *cells);
    if (cells)
        a->cells = cells;
    if (!cost || !pos || !heap || !cells)
        return -1;
    a->cap = n;
    return 0;
}

static void pd__heap_swap(pd_move_area *a, uint32_t i, uint32_t j)
{
    uint32_t t = a->heap[i];
    a->heap[i] = a->heap[j];
    a->heap[j] = t;
    a->pos[a->heap[i]] = i;
    a->pos[a->heap[j]] = j;
}

static void pd__heap_up(pd_move_area *a, uint32_t i)
{
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (a->cost[a->heap[parent]] <= a->cost[a->heap[i]])
            break;
        pd__heap_swap(a, i, parent);
        i = parent;
    }
}

static void pd__heap_down(pd_move_area *a, uint32_t i, uint32_t n)
{
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && a->cost[a->heap[l]] < a->cost[a->heap[m]])
            m = l;
        if (r < n && a->cost[a->heap[r]] < a->cost[a->heap[m]])
            m = r;
        if (m == i)
            return;
        pd__heap_swap(a, i, m);
        i = m;
    }
}

pd_status pd_move_within(const pd_grid *g, pd_point from, double radius, pd_move_area *area, size_t *n)
{
    *n = 0;
    if (!pd_grid_in_bounds(g, from.x, from.y))
        return PD_OUT_OF_BOUNDS;
    if (!pd__open(g, from.x, from.y))
        return PD_START_BLOCKED;
    const int64_t r = (int64_t)floor(radius), side = 2 * r + 1;
    const size_t cells = (size_t)(side * side);
    if (pd__area_grow(area, cells) != 0)
        return PD_INTERNAL;
    for (size_t i = 0; i < cells; i++)
        area->pos[i] = PD__UNSEEN;
    /* Costs are sums of sqrt(2) and integers; the slack keeps a cell whose
     * exact cost equals the radius from falling out by rounding. */
    const double limit = radius + 1e-9;
    const int64_t x0 = from.x - r, y0 = from.y - r;
    uint32_t heap_n = 0;
    uint32_t start = (uint32_t)(r * side + r);
    area->cost[start] = 0;
    area->heap[heap_n] = start;
    area->pos[start] = heap_n++;

    static const int8_t dirs[8][2] = {{1, 0}, {-1, 0}, {0, 1}, {0, -1}, {1, 1}, {1, -1}, {-1, 1}, {-1, -1}};
    while (heap_n > 0) {
        uint32_t cur = area->heap[0];
        pd__heap_swap(area, 0, --heap_n);
        pd__heap_down(area, 0, heap_n);
        area->pos[cur] = PD__SETTLED;
        int64_t cx = x0 + cur % (uint32_t)side, cy = y0 + cur / (uint32_t)side;
        area->cells[(*n)++] = (pd_point){(int32_t)cx, (int32_t)cy};
        for (int k = 0; k < 8; k++) {
            int64_t nx = cx + dirs[k][0], ny = cy + dirs[k][1];
            int64_t wx = nx - x0, wy = ny - y0;
            if (wx < 0 || wy < 0 || wx >= side || wy >= side || !pd__open(g, nx, ny))
                continue;
            int diagonal = dirs[k][0] != 0 && dirs[k][1] != 0;
            if (diagonal && (!pd__open(g, nx, cy) || !pd__open(g, cx, ny)))
                continue;
            uint32_t idx = (uint32_t)(wy * side + wx);
            if (area->pos[idx] == PD__SETTLED)
                continue;
            double c = area->cost[cur] + (diagonal ? PD__SQRT2 : 1.0) * pd_grid_get(g, (int32_t)nx, (int32_t)ny);
            if (c > limit)
                continue;
            if (area->pos[idx] == PD__UNSEEN) {
                area->cost[idx] = c;
                area->heap[heap_n] = idx;
                area->pos[idx] = heap_n;
                pd__heap_up(area, heap_n++);
            } else if (c < area->cost[idx]) {
                area->cost[idx] = c;
                pd__heap_up(area, area->pos[idx]);
            }
        }
    }
    return PD_OK;
}
