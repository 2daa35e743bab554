/*
 * smooth_check.h - reference helpers shared by test_smooth.c and
 * test_fallback.c, written from the definitions in pd_smooth.h and
 * pd_fallback.h rather than from the code under test:
 *
 *  - which cells a segment between two cell centres touches, decided per
 *    cell by an exact segment/square clipping test (Liang-Barsky on doubled
 *    integer coordinates), not by walking the line;
 *  - component labels by a plain breadth-first flood;
 *  - a small seeded random generator and random grids.
 *
 * Include after <cmocka.h>.
 */
#ifndef SMOOTH_CHECK_H
#define SMOOTH_CHECK_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pd_components.h"
#include "pd_grid.h"
#include "pd_search.h"

/* ---- random numbers (xorshift64*, fixed seeds so failures reproduce) ---- */

static inline uint64_t check_rand(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ULL;
}

/* Uniform in [lo, hi]. */
static inline int32_t check_rand_range(uint64_t *s, int32_t lo, int32_t hi)
{
    return lo + (int32_t)(check_rand(s) % (uint64_t)(hi - lo + 1));
}

/* ---- exact segment / cell tests ---- */

/* A parameter value t = num / den along the segment, den > 0. */
typedef struct check_frac {
    int64_t num, den;
} check_frac;

static inline int check_frac_less(check_frac a, check_frac b)
{
    return a.num * b.den < b.num * a.den;
}

typedef struct check_touch {
    int touched;      /* the closed segment meets the closed cell square */
    int interior;     /* ... and its interior (not just a corner point) */
    check_frac enter; /* smallest t where the segment meets the square */
} check_touch;

/* Narrows [lo, hi] to where coordinate a0 + t*d lies in [c0, c0 + 2]
 * (doubled coordinates). Returns 0 when that is nowhere. */
static inline int check_clip_axis(int64_t a0, int64_t d, int64_t c0, check_frac *lo,
                                  check_frac *hi)
{
    if (d == 0)
        return a0 >= c0 && a0 <= c0 + 2;
    check_frac t1 = {c0 - a0, d}, t2 = {c0 + 2 - a0, d};
    if (d < 0) {
        t1 = (check_frac){a0 - c0, -d};
        t2 = (check_frac){a0 - c0 - 2, -d};
    }
    check_frac from = check_frac_less(t1, t2) ? t1 : t2;
    check_frac to = check_frac_less(t1, t2) ? t2 : t1;
    if (check_frac_less(*lo, from))
        *lo = from;
    if (check_frac_less(to, *hi))
        *hi = to;
    return 1;
}

/* How the segment from the centre of a to the centre of b meets cell c. */
static inline check_touch check_segment_cell(pd_point a, pd_point b, pd_point c)
{
    check_touch r = {0, 0, {0, 1}};
    int64_t ax = 2 * (int64_t)a.x + 1, ay = 2 * (int64_t)a.y + 1;
    int64_t dx = 2 * ((int64_t)b.x - a.x), dy = 2 * ((int64_t)b.y - a.y);
    check_frac lo = {0, 1}, hi = {1, 1};
    if (!check_clip_axis(ax, dx, 2 * (int64_t)c.x, &lo, &hi) ||
        !check_clip_axis(ay, dy, 2 * (int64_t)c.y, &lo, &hi))
        return r;
    if (check_frac_less(hi, lo))
        return r;
    r.touched = 1;
    r.interior = check_frac_less(lo, hi);
    r.enter = lo;
    return r;
}

/* Visible by definition: every cell the closed segment touches is open
 * (which includes both cells beside a corner it passes through). */
static inline int check_visible(const pd_grid *g, pd_point a, pd_point b)
{
    int32_t x0 = (a.x < b.x ? a.x : b.x) - 1, x1 = (a.x > b.x ? a.x : b.x) + 1;
    int32_t y0 = (a.y < b.y ? a.y : b.y) - 1, y1 = (a.y > b.y ? a.y : b.y) + 1;
    for (int32_t y = y0; y <= y1; y++)
        for (int32_t x = x0; x <= x1; x++)
            if (check_segment_cell(a, b, (pd_point){x, y}).touched &&
                pd_grid_get(g, x, y) == PD_CELL_BLOCKED)
                return 0;
    return 1;
}

/* ---- grids and components ---- */

/* w x h grid: random rectangles and scattered cells blocked, costs 1 or
 * (with_costs) 1..5. */
static inline pd_grid *check_random_grid(uint64_t *rng, int32_t w, int32_t h, int with_costs)
{
    pd_grid *g = pd_grid_create(w, h);
    assert_non_null(g);
    for (int32_t y = 0; y < h; y++)
        for (int32_t x = 0; x < w; x++)
            pd_grid_set(g, x, y, with_costs ? (uint8_t)check_rand_range(rng, 1, 5) : PD_CELL_FREE);
    int rects = check_rand_range(rng, 0, (w * h) / 40);
    for (int i = 0; i < rects; i++) {
        int32_t rx = check_rand_range(rng, 0, w - 1), ry = check_rand_range(rng, 0, h - 1);
        int32_t rw = check_rand_range(rng, 1, 6), rh = check_rand_range(rng, 1, 6);
        for (int32_t y = ry; y < ry + rh && y < h; y++)
            for (int32_t x = rx; x < rx + rw && x < w; x++)
                pd_grid_set(g, x, y, PD_CELL_BLOCKED);
    }
    int32_t noise_percent = check_rand_range(rng, 0, 15);
    for (int32_t y = 0; y < h; y++)
        for (int32_t x = 0; x < w; x++)
            if (check_rand_range(rng, 0, 99) < noise_percent)
                pd_grid_set(g, x, y, PD_CELL_BLOCKED);
    return g;
}

/* 4-neighbour labels by breadth-first flood, numbered 1, 2, ... in scan order. */
static inline pd_components *check_components(const pd_grid *g)
{
    pd_components *c = calloc(1, sizeof *c);
    assert_non_null(c);
    c->width = g->width;
    c->height = g->height;
    c->stride = g->width + 2;
    size_t cells = (size_t)(g->width + 2) * (size_t)(g->height + 2);
    uint32_t *labels = calloc(cells, sizeof *labels);
    pd_point *queue = malloc((size_t)g->width * (size_t)g->height * sizeof *queue);
    assert_non_null(labels);
    assert_non_null(queue);
    c->labels = labels;
    c->label_bytes = sizeof *labels;
    uint32_t next = 1;
    for (int32_t y = 0; y < g->height; y++) {
        for (int32_t x = 0; x < g->width; x++) {
            if (pd_grid_get(g, x, y) == PD_CELL_BLOCKED ||
                labels[pd_grid_index(g, x, y)] != 0)
                continue;
            size_t head = 0, tail = 0;
            queue[tail++] = (pd_point){x, y};
            labels[pd_grid_index(g, x, y)] = next;
            while (head < tail) {
                pd_point p = queue[head++];
                static const int32_t dirs[4][2] = {{1, 0}, {-1, 0}, {0, 1}, {0, -1}};
                for (int d = 0; d < 4; d++) {
                    int32_t nx = p.x + dirs[d][0], ny = p.y + dirs[d][1];
                    if (pd_grid_get(g, nx, ny) == PD_CELL_BLOCKED ||
                        labels[pd_grid_index(g, nx, ny)] != 0)
                        continue;
                    labels[pd_grid_index(g, nx, ny)] = next;
                    queue[tail++] = (pd_point){nx, ny};
                }
            }
            next++;
        }
    }
    free(queue);
    c->next_label = next;
    c->count = next - 1;
    return c;
}

static inline void check_components_free(pd_components *c)
{
    if (!c)
        return;
    free(c->labels);
    free(c);
}

#endif
