/* pd_grid.c - allocation and bookkeeping for padded tile grids, their
 * passability bitsets and the stop bitsets derived from those (see
 * pd_grid.h). */
#include "pd_grid.h"

#include <stdlib.h>
#include <string.h>

/* Passability rows and columns, then the stop sets: two of each. */
static size_t pd__bits_words(const pd_grid *g)
{
    return 3 * ((size_t)(g->height + 2) * g->row_words + (size_t)g->stride * g->col_words);
}

/* The bits of word w that hold positions of a line's len cells. */
static uint64_t pd__line_mask(size_t w, size_t len)
{
    const size_t lo = w * 64, hi = lo + 64;
    const size_t end = len < hi ? len : hi;
    if (lo >= end)
        return 0;
    return ~0ull >> (64 - (end - lo));
}

/*
 * Recomputes the stop bits of lines l0..l1 at positions p0..p1 (indices
 * along the line, whole words around them) on one axis (rows: lines are
 * rows, positions columns; else transposed), clipped to the interior lines
 * and the line's cells. A position stops a forward scan where the cell is
 * blocked or a neighbour line is open and was closed one position before;
 * a backward one likewise with the position after. This is the test
 * pd_jps.c's scans made on the passability words, done once here.
 */
static void pd__stop_recompute(pd_grid *g, int rows, int32_t l0, int32_t l1, int32_t p0, int32_t p1)
{
    const int32_t last_line = rows ? g->height : g->width;
    const size_t len = rows ? (size_t)g->stride : (size_t)g->height + 2;
    const size_t words = rows ? g->row_words : g->col_words;
    l0 = l0 < 1 ? 1 : l0;
    l1 = l1 > last_line ? last_line : l1;
    p0 = p0 < 0 ? 0 : p0;
    p1 = p1 >= (int32_t)len ? (int32_t)len - 1 : p1;
    if (l0 > l1 || p0 > p1)
        return;
    const size_t rows_n = (size_t)(g->height + 2) * g->row_words, cols_n = (size_t)g->stride * g->col_words;
    const uint64_t *open = rows ? g->bits : g->bits + rows_n;
    uint64_t *fwd = (uint64_t *)pd_grid_stop_set(g, rows ? PD_GRID_STOP_EAST : PD_GRID_STOP_SOUTH);
    uint64_t *bwd = fwd + (rows ? rows_n : cols_n);
    const size_t w0 = (size_t)p0 >> 6, w1 = (size_t)p1 >> 6;
    for (int32_t l = l0; l <= l1; l++) {
        const uint64_t *me = open + (size_t)l * words, *a = me - words, *b = me + words;
        for (size_t w = w0; w <= w1; w++) {
            /* The bit shifted in from w - 1 lands on position 0 when w
             * is 0: the padding cell, blocked, which stops both scans
             * whatever its neighbours say, so nothing is read there. The
             * one from w + 1 lands on position 64 * words - 1: past the
             * line (masked off), or, when the line fills its last word,
             * its last padding cell, likewise; so w + 1 may be the next
             * line's first word (lines a and b are passability lines, and
             * the stop sets follow the last of them). */
            const uint64_t m = pd__line_mask(w, len);
            const uint64_t pa = (a[w] << 1) | (w ? a[w - 1] >> 63 : 0);
            const uint64_t pb = (b[w] << 1) | (w ? b[w - 1] >> 63 : 0);
            const uint64_t na = (a[w] >> 1) | (a[w + 1] << 63);
            const uint64_t nb = (b[w] >> 1) | (b[w + 1] << 63);
            fwd[(size_t)l * words + w] = (~me[w] | (a[w] & ~pa) | (b[w] & ~pb)) & m;
            bwd[(size_t)l * words + w] = (~me[w] | (a[w] & ~na) | (b[w] & ~nb)) & m;
        }
    }
}

/* The stop bits that passability changes in padded [px0..px1] x
 * [py0..py1] can have changed: one line and one position around it. */
static void pd__stop_sync(pd_grid *g, int32_t px0, int32_t py0, int32_t px1, int32_t py1)
{
    pd__stop_recompute(g, 1, py0 - 1, py1 + 1, px0 - 1, px1 + 1);
    pd__stop_recompute(g, 0, px0 - 1, px1 + 1, py0 - 1, py1 + 1);
}

/* A grid's sides and the line lengths of its bitsets. */
static void pd__set_shape(pd_grid *g, int32_t width, int32_t height)
{
    g->width = width;
    g->height = height;
    g->stride = width + 2;
    /* A line: the lead word, its cells, and a zero word after them. */
    g->row_words = (uint32_t)(((size_t)g->stride + 63) / 64);
    g->col_words = (uint32_t)(((size_t)height + 2 + 63) / 64);
}

uint64_t pd_grid_bytes_for(int32_t width, int32_t height)
{
    pd_grid g;
    pd__set_shape(&g, width, height);
    return (uint64_t)g.stride * (uint64_t)(height + 2) + pd__bits_words(&g) * sizeof *g.bits;
}

pd_grid *pd_grid_create(int32_t width, int32_t height)
{
    if (width < 1 || height < 1 || width > PD_GRID_MAX_SIDE || height > PD_GRID_MAX_SIDE)
        return NULL;
    pd_grid *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    pd__set_shape(g, width, height);
    /* calloc leaves every cell, padding included, PD_CELL_BLOCKED, and
     * every passability bit clear, which says the same; every cell then
     * stops every scan. */
    g->cells = calloc((size_t)(width + 2) * (size_t)(height + 2), 1);
    g->bits = calloc(pd__bits_words(g), sizeof *g->bits);
    if (!g->cells || !g->bits) {
        pd_grid_destroy(g);
        return NULL;
    }
    pd__stop_sync(g, 1, 1, width, height);
    g->uniform_cost = 1;
    return g;
}

void pd_grid_destroy(pd_grid *g)
{
    if (!g)
        return;
    free(g->cells);
    free(g->bits);
    free(g);
}

void pd_grid_assign(pd_grid *dst, const pd_grid *src)
{
    memcpy(dst->cells, src->cells, (size_t)(src->width + 2) * (size_t)(src->height + 2));
    memcpy(dst->bits, src->bits, pd__bits_words(src) * sizeof *src->bits);
    dst->uniform_cost = src->uniform_cost;
}

pd_grid *pd_grid_clone(const pd_grid *g)
{
    pd_grid *c = pd_grid_create(g->width, g->height);
    if (c)
        pd_grid_assign(c, g);
    return c;
}

size_t pd_grid_bits_bytes(const pd_grid *g)
{
    return pd__bits_words(g) * sizeof *g->bits;
}

/* Sets padded cell (px, py)'s bit in both sets to `open`. */
static void pd__put_bit(pd_grid *g, int32_t px, int32_t py, int open)
{
    size_t b = (size_t)px;
    uint64_t *w = &g->bits[(size_t)py * g->row_words + (b >> 6)];
    uint64_t m = (uint64_t)1 << (b & 63);
    *w = open ? *w | m : *w & ~m;
    b = (size_t)py;
    w = &g->bits[(size_t)(g->height + 2) * g->row_words + (size_t)px * g->col_words + (b >> 6)];
    m = (uint64_t)1 << (b & 63);
    *w = open ? *w | m : *w & ~m;
}

uint64_t pd_grid_sync_bits(pd_grid *g, int32_t x0, int32_t y0, int32_t x1, int32_t y1)
{
    x0 = x0 < 0 ? 0 : x0;
    y0 = y0 < 0 ? 0 : y0;
    x1 = x1 >= g->width ? g->width - 1 : x1;
    y1 = y1 >= g->height ? g->height - 1 : y1;
    uint64_t flipped = 0;
    for (int32_t y = y0; y <= y1; y++) {
        const uint8_t *row = g->cells + pd_grid_index(g, 0, y);
        for (int32_t x = x0; x <= x1; x++) {
            int open = row[x] != PD_CELL_BLOCKED;
            if (pd_grid_bit_row(g, x + 1, y + 1) != open) {
                pd__put_bit(g, x + 1, y + 1, open);
                flipped++;
            }
        }
    }
    if (flipped)
        pd__stop_sync(g, x0 + 1, y0 + 1, x1 + 1, y1 + 1);
    return flipped;
}

void pd_grid_set(pd_grid *g, int32_t x, int32_t y, uint8_t value)
{
    if (!pd_grid_in_bounds(g, x, y))
        return;
    uint8_t old = g->cells[pd_grid_index(g, x, y)];
    g->cells[pd_grid_index(g, x, y)] = value;
    if ((old == PD_CELL_BLOCKED) != (value == PD_CELL_BLOCKED)) {
        pd__put_bit(g, x + 1, y + 1, value != PD_CELL_BLOCKED);
        pd__stop_sync(g, x + 1, y + 1, x + 1, y + 1);
    }
    if (value > PD_CELL_FREE)
        g->uniform_cost = 0;
    else if (old > PD_CELL_FREE)
        pd_grid_refresh_uniform(g); /* the last costly cell may just have gone */
}

void pd_grid_refresh_uniform(pd_grid *g)
{
    size_t n = (size_t)(g->width + 2) * (size_t)(g->height + 2);
    g->uniform_cost = 1;
    for (size_t i = 0; i < n; i++) {
        if (g->cells[i] > PD_CELL_FREE) {
            g->uniform_cost = 0;
            return;
        }
    }
}

void pd_grid_refresh_flags(pd_grid *g)
{
    pd_grid_refresh_uniform(g);
    /* Whole words at a time: a bulk write may have changed any cell. */
    memset(g->bits, 0, pd_grid_bits_bytes(g));
    uint64_t *cols = g->bits + (size_t)(g->height + 2) * g->row_words;
    for (int32_t py = 1; py <= g->height; py++) {
        const uint8_t *row = g->cells + (size_t)py * (size_t)g->stride;
        uint64_t *rw = g->bits + (size_t)py * g->row_words;
        const size_t cb = (size_t)py;
        const uint64_t cm = (uint64_t)1 << (cb & 63);
        for (int32_t px = 1; px <= g->width; px++) {
            if (row[px] == PD_CELL_BLOCKED)
                continue;
            const size_t b = (size_t)px;
            rw[b >> 6] |= (uint64_t)1 << (b & 63);
            cols[(size_t)px * g->col_words + (cb >> 6)] |= cm;
        }
    }
    pd__stop_sync(g, 1, 1, g->width, g->height);
}
