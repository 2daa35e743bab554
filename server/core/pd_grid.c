/* pd_grid.c - allocation and bookkeeping for padded tile grids and their
 * passability bitsets (see pd_grid.h). */
#include "pd_grid.h"

#include <stdlib.h>
#include <string.h>

static size_t pd__bits_words(const pd_grid *g)
{
    return (size_t)(g->height + 2) * g->row_words + (size_t)g->stride * g->col_words;
}

pd_grid *pd_grid_create(int32_t width, int32_t height)
{
    if (width < 1 || height < 1 || width > PD_GRID_MAX_SIDE || height > PD_GRID_MAX_SIDE)
        return NULL;
    pd_grid *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->width = width;
    g->height = height;
    g->stride = width + 2;
    /* A line: the lead word, its cells, and a zero word after them. */
    g->row_words = (uint32_t)((PD_GRID_BITS_LEAD + (size_t)g->stride + 63) / 64 + 1);
    g->col_words = (uint32_t)((PD_GRID_BITS_LEAD + (size_t)height + 2 + 63) / 64 + 1);
    /* calloc leaves every cell, padding included, PD_CELL_BLOCKED, and
     * every bit clear, which says the same. */
    g->cells = calloc((size_t)(width + 2) * (size_t)(height + 2), 1);
    g->bits = calloc(pd__bits_words(g), sizeof *g->bits);
    if (!g->cells || !g->bits) {
        pd_grid_destroy(g);
        return NULL;
    }
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
    size_t b = PD_GRID_BITS_LEAD + (size_t)px;
    uint64_t *w = &g->bits[(size_t)py * g->row_words + (b >> 6)];
    uint64_t m = (uint64_t)1 << (b & 63);
    *w = open ? *w | m : *w & ~m;
    b = PD_GRID_BITS_LEAD + (size_t)py;
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
    return flipped;
}

void pd_grid_set(pd_grid *g, int32_t x, int32_t y, uint8_t value)
{
    if (!pd_grid_in_bounds(g, x, y))
        return;
    uint8_t old = g->cells[pd_grid_index(g, x, y)];
    g->cells[pd_grid_index(g, x, y)] = value;
    if ((old == PD_CELL_BLOCKED) != (value == PD_CELL_BLOCKED))
        pd__put_bit(g, x + 1, y + 1, value != PD_CELL_BLOCKED);
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
        const size_t cb = PD_GRID_BITS_LEAD + (size_t)py;
        const uint64_t cm = (uint64_t)1 << (cb & 63);
        for (int32_t px = 1; px <= g->width; px++) {
            if (row[px] == PD_CELL_BLOCKED)
                continue;
            const size_t b = PD_GRID_BITS_LEAD + (size_t)px;
            rw[b >> 6] |= (uint64_t)1 << (b & 63);
            cols[(size_t)px * g->col_words + (cb >> 6)] |= cm;
        }
    }
}
