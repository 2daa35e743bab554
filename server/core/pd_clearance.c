/*
 * pd_clearance.c - clearance map and per-unit-size grids (see pd_clearance.h).
 *
 * Clearance is the classic largest-square dynamic programme run from the
 * bottom-right corner: a cell's square can only grow as far as the squares of
 * its right, lower and lower-right neighbours allow. Capping at
 * PD_CLEARANCE_CAP keeps every value in a byte and makes updates local.
 *
 * A unit grid's cost is the largest cost byte under the k x k footprint. It
 * is computed as a separable sliding maximum (rows first, then columns) with
 * the van Herk / Gil-Werman block trick, so each output cell costs a constant
 * number of comparisons whatever k is. The work is done in fixed-size tiles
 * whose scratch lives on the stack: building and updating never allocate
 * beyond the output grid, so an update cannot fail half-way.
 */
#include "pd_clearance.h"

#include <stdlib.h>
#include <string.h>

/* Side of the square tile of unit-grid cells computed in one go, in cells.
 * Each tile reads (side + k - 1)^2 source cells, so a larger tile wastes less
 * on overlap; 64 keeps the two scratch buffers at about 10 KiB of stack. */
#define PD__UNIT_TILE 64
/* Longest run one sliding-max pass looks at: a tile side plus the footprint
 * overhang of the largest unit. */
#define PD__UNIT_SPAN (PD__UNIT_TILE + PD_UNIT_SIZE_MAX - 1)

static size_t pd__cells_total(int32_t width, int32_t height)
{
    return (size_t)(width + 2) * (size_t)(height + 2);
}

static uint8_t pd__max_u8(uint8_t a, uint8_t b)
{
    return a > b ? a : b;
}

/* Clips an inclusive rectangle (in either corner order) to the grid.
 * Returns 0 when nothing of it lies inside. */
static int pd__clip_rect(int32_t width, int32_t height, int32_t *x0, int32_t *y0, int32_t *x1,
                         int32_t *y1)
{
    if (*x0 > *x1) {
        int32_t t = *x0;
        *x0 = *x1;
        *x1 = t;
    }
    if (*y0 > *y1) {
        int32_t t = *y0;
        *y0 = *y1;
        *y1 = t;
    }
    if (*x1 < 0 || *y1 < 0 || *x0 >= width || *y0 >= height)
        return 0;
    if (*x0 < 0)
        *x0 = 0;
    if (*y0 < 0)
        *y0 = 0;
    if (*x1 >= width)
        *x1 = width - 1;
    if (*y1 >= height)
        *y1 = height - 1;
    return 1;
}

/* Recomputes clearance over [x0..x1] x [y0..y1] from the bottom-right corner,
 * trusting the values right of and below the rectangle. */
static void pd__clearance_fill(pd_clearance *c, const pd_grid *g, int32_t x0, int32_t y0,
                               int32_t x1, int32_t y1)
{
    size_t stride = (size_t)c->stride;
    for (int32_t y = y1; y >= y0; y--) {
        size_t row = (size_t)(y + 1) * stride;
        for (int32_t x = x1; x >= x0; x--) {
            size_t i = row + (size_t)(x + 1);
            if (g->cells[i] == PD_CELL_BLOCKED) {
                c->values[i] = 0;
                continue;
            }
            uint8_t m = c->values[i + 1];
            if (c->values[i + stride] < m)
                m = c->values[i + stride];
            if (c->values[i + stride + 1] < m)
                m = c->values[i + stride + 1];
            c->values[i] = m >= PD_CLEARANCE_CAP ? PD_CLEARANCE_CAP : (uint8_t)(m + 1);
        }
    }
}

static pd_clearance *pd__clearance_alloc(int32_t width, int32_t height)
{
    pd_clearance *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->width = width;
    c->height = height;
    c->stride = width + 2;
    /* calloc leaves the padding 0, which the recurrence relies on. */
    c->values = calloc(pd__cells_total(width, height), 1);
    if (!c->values) {
        free(c);
        return NULL;
    }
    return c;
}

pd_clearance *pd_clearance_build(const pd_grid *g)
{
    if (!g || !g->cells)
        return NULL;
    pd_clearance *c = pd__clearance_alloc(g->width, g->height);
    if (!c)
        return NULL;
    pd__clearance_fill(c, g, 0, 0, g->width - 1, g->height - 1);
    return c;
}

pd_clearance *pd_clearance_clone(const pd_clearance *c)
{
    if (!c || !c->values)
        return NULL;
    pd_clearance *copy = pd__clearance_alloc(c->width, c->height);
    if (!copy)
        return NULL;
    memcpy(copy->values, c->values, pd__cells_total(c->width, c->height));
    return copy;
}

void pd_clearance_destroy(pd_clearance *c)
{
    if (!c)
        return;
    free(c->values);
    free(c);
}

void pd_clearance_update(pd_clearance *c, const pd_grid *g, int32_t x0, int32_t y0, int32_t x1,
                         int32_t y1)
{
    if (!c || !g || c->width != g->width || c->height != g->height)
        return;
    if (!pd__clip_rect(g->width, g->height, &x0, &y0, &x1, &y1))
        return;
    /* A cell's capped value depends only on the CAP x CAP square it anchors,
     * so nothing further up or left than CAP - 1 cells can change. */
    x0 -= PD_CLEARANCE_CAP - 1;
    y0 -= PD_CLEARANCE_CAP - 1;
    pd__clearance_fill(c, g, x0 < 0 ? 0 : x0, y0 < 0 ? 0 : y0, x1, y1);
}

/*
 * Sliding maximum over windows of k along one run: out[i] = max(in[i ..
 * i + k - 1]) for i < n_out, where in[] holds n_out + k - 1 values. The run
 * is cut into blocks of k; a window then spans the tail of one block and the
 * head of the next, so it is the larger of a suffix maximum and a prefix
 * maximum. Three comparisons per value, whatever k is.
 */
static void pd__sliding_max(const uint8_t *in, int n_out, int k, uint8_t *out)
{
    uint8_t prefix[PD__UNIT_SPAN], suffix[PD__UNIT_SPAN];
    int n = n_out + k - 1;
    for (int i = 0; i < n; i++)
        prefix[i] = i % k == 0 ? in[i] : pd__max_u8(prefix[i - 1], in[i]);
    for (int i = n - 1; i >= 0; i--)
        suffix[i] = (i % k == k - 1 || i == n - 1) ? in[i] : pd__max_u8(suffix[i + 1], in[i]);
    for (int i = 0; i < n_out; i++)
        out[i] = pd__max_u8(suffix[i], prefix[i + k - 1]);
}

/*
 * Writes the unit grid cells of one tile [tx0, tx0 + tw) x [ty0, ty0 + th)
 * (tw, th <= PD__UNIT_TILE). Source cells beyond the grid read as 0; they
 * only ever fall under footprints that do not fit, which the clearance test
 * blocks anyway. Returns whether any written cell costs more than
 * PD_CELL_FREE, and sets *lost_costly when a costlier cell was overwritten.
 */
static int pd__unit_tile(pd_grid *ug, const pd_grid *g, const pd_clearance *c, int k,
                         int32_t tx0, int32_t ty0, int tw, int th, int *lost_costly)
{
    /* rows[r][i]: max over g cells (tx0+i .. tx0+i+k-1, ty0+r). */
    uint8_t rows[PD__UNIT_SPAN][PD__UNIT_TILE];
    uint8_t run[PD__UNIT_SPAN], col[PD__UNIT_TILE];
    int src_w = tw + k - 1, src_h = th + k - 1;
    for (int r = 0; r < src_h; r++) {
        int32_t y = ty0 + r;
        for (int i = 0; i < src_w; i++) {
            int32_t x = tx0 + i;
            run[i] = (x < g->width && y < g->height) ? g->cells[pd_grid_index(g, x, y)] : 0;
        }
        pd__sliding_max(run, tw, k, rows[r]);
    }
    int costly = 0;
    for (int i = 0; i < tw; i++) {
        for (int r = 0; r < src_h; r++)
            run[r] = rows[r][i];
        pd__sliding_max(run, th, k, col);
        int32_t x = tx0 + i;
        for (int r = 0; r < th; r++) {
            int32_t y = ty0 + r;
            size_t at = pd_grid_index(ug, x, y);
            uint8_t v = c->values[at] >= k ? col[r] : PD_CELL_BLOCKED;
            if (ug->cells[at] > PD_CELL_FREE && v <= PD_CELL_FREE)
                *lost_costly = 1;
            if (v > PD_CELL_FREE)
                costly = 1;
            ug->cells[at] = v;
        }
    }
    return costly;
}

/* Recomputes the unit grid over [x0..x1] x [y0..y1] (already clipped): from
 * clearance alone on a grid without costs, else tile by tile. uniform_cost
 * is kept true without rescanning unless a costly cell may have been the
 * last one. */
static void pd__unit_fill(pd_grid *ug, const pd_grid *g, const pd_clearance *c, int k,
                          int32_t x0, int32_t y0, int32_t x1, int32_t y1)
{
    int costly = 0, lost_costly = 0;
    if (g->uniform_cost) {
        /* Every open cell costs 1, so every footprint that fits does too:
         * the clearance alone decides, and no maximum is needed. */
        for (int32_t y = y0; y <= y1; y++) {
            for (int32_t x = x0; x <= x1; x++) {
                size_t at = pd_grid_index(ug, x, y);
                if (ug->cells[at] > PD_CELL_FREE)
                    lost_costly = 1;
                ug->cells[at] = c->values[at] >= k ? PD_CELL_FREE : PD_CELL_BLOCKED;
            }
        }
        pd_grid_sync_bits(ug, x0, y0, x1, y1);
        if (lost_costly)
            pd_grid_refresh_uniform(ug);
        return;
    }
    for (int32_t ty = y0; ty <= y1; ty += PD__UNIT_TILE) {
        int th = y1 - ty + 1 < PD__UNIT_TILE ? (int)(y1 - ty + 1) : PD__UNIT_TILE;
        for (int32_t tx = x0; tx <= x1; tx += PD__UNIT_TILE) {
            int tw = x1 - tx + 1 < PD__UNIT_TILE ? (int)(x1 - tx + 1) : PD__UNIT_TILE;
            costly |= pd__unit_tile(ug, g, c, k, tx, ty, tw, th, &lost_costly);
        }
    }
    /* The bitsets flip only where passability changed in the rectangle. */
    pd_grid_sync_bits(ug, x0, y0, x1, y1);
    if (costly)
        ug->uniform_cost = 0;
    else if (lost_costly && !ug->uniform_cost)
        pd_grid_refresh_uniform(ug);
}

static int pd__unit_args_ok(const pd_grid *g, const pd_clearance *c, uint32_t unit)
{
    return g && c && g->cells && c->values && c->width == g->width && c->height == g->height &&
           unit >= 1 && unit <= PD_UNIT_SIZE_MAX;
}

pd_grid *pd_unit_grid_build(const pd_grid *g, const pd_clearance *c, uint32_t unit)
{
    if (!pd__unit_args_ok(g, c, unit))
        return NULL;
    if (unit == 1)
        return pd_grid_clone(g);
    pd_grid *ug = pd_grid_create(g->width, g->height);
    if (!ug)
        return NULL;
    pd__unit_fill(ug, g, c, (int)unit, 0, 0, g->width - 1, g->height - 1);
    return ug;
}

void pd_unit_grid_update(pd_grid *ug, const pd_grid *g, const pd_clearance *c, uint32_t unit,
                         int32_t x0, int32_t y0, int32_t x1, int32_t y1)
{
    if (!ug || !ug->cells || !pd__unit_args_ok(g, c, unit) || ug->width != g->width ||
        ug->height != g->height)
        return;
    if (!pd__clip_rect(g->width, g->height, &x0, &y0, &x1, &y1))
        return;
    /* Every anchor whose footprint reaches into the rectangle. */
    x0 -= (int32_t)unit - 1;
    y0 -= (int32_t)unit - 1;
    pd__unit_fill(ug, g, c, (int)unit, x0 < 0 ? 0 : x0, y0 < 0 ? 0 : y0, x1, y1);
}
