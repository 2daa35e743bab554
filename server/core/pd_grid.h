/*
 * pd_grid.h - a tile grid padded with one blocked cell on every side.
 *
 * Each cell is one byte: 0 means blocked, 1..255 is the traversal cost
 * multiplier of entering that cell (1 = ordinary ground). Keeping passability
 * and cost in one byte halves the memory the search touches, and the padding
 * lets the search read all eight neighbours of any interior cell without a
 * bounds check.
 *
 * Coordinates: (0,0) is the top-left cell, x is the column, y the row (the
 * Moving AI convention). Cell (x, y) is stored at index
 * (y + 1) * stride + (x + 1), where stride = width + 2.
 *
 * Passability bitsets: every grid also keeps one bit per padded cell (set =
 * passable), row-major in `bits` and transposed (column-major) after it, so
 * jump point search (pd_jps.c) can scan 64 cells per machine word along
 * either axis (block-based JPS, Harabor & Grastien, ICAPS 2014). Padded row
 * py occupies row_words words from its first bit, its cell px at bit px;
 * padded column px occupies col_words words after the rows, its cell py at
 * bit py. Lines carry no padding words: every scan stops at the latest at
 * its line's padding cell, which is blocked, so it never reads past the
 * line, and a line's first and last bits are padding cells, whose stop bits
 * do not depend on what lies beyond them (pd_grid.c). Zero words before
 * and after every line cost 12% more bits on 512-cell lines and 24% on
 * 256-cell ones. The bits
 * follow pd_grid_set and pd_grid_refresh_flags; code that writes cells[]
 * directly and must not pay a full rebuild calls pd_grid_sync_bits on the
 * rectangle it wrote, which flips only the bits that changed.
 *
 * Stop bitsets: after the passability bits, four more sets say per cell
 * where a straight scan in one direction must stop: the cell is blocked, or
 * a neighbour line opens there where it was closed one cell before along the
 * scan (a forced neighbour, see pd_jps.c). East and west scans use row-major
 * sets laid out like the rows, south and north scans transposed ones laid
 * out like the columns, so a scan is one load, a mask and a count of
 * trailing zeros per 64 cells. Only interior lines carry stop bits (scans
 * run along no padding line), and only positions of the line's cells. They
 * are derived from the passability bits and follow them through every
 * function here that changes those: a cell's passability changes the stop
 * bits of its own line and of its two neighbour lines, at its own position
 * and the next one along the scan.
 *
 * Lifetime: pd_grid_create allocates, pd_grid_destroy frees. A grid handed to
 * a search must not change while that search runs (scenes share grids as
 * immutable snapshots).
 */
#ifndef PD_GRID_H
#define PD_GRID_H

#include <stddef.h>
#include <stdint.h>

/* Largest side we accept: keeps (w+2)*(h+2) well inside uint32_t cell
 * indices, which the search uses to keep its node arrays compact. */
#define PD_GRID_MAX_SIDE 16384

#define PD_CELL_BLOCKED 0
#define PD_CELL_FREE 1

typedef struct pd_grid {
    int32_t width;
    int32_t height;
    int32_t stride;      /* width + 2 */
    uint8_t *cells;      /* (width + 2) * (height + 2) bytes */
    int uniform_cost;    /* 1 when every passable cell has cost 1 */
    uint64_t *bits;      /* (height + 2) rows of row_words, then stride
                            columns of col_words, then the stop sets
                            (see above) */
    uint32_t row_words;
    uint32_t col_words;
} pd_grid;

/* All interior cells start blocked. Returns NULL when a side is < 1 or
 * > PD_GRID_MAX_SIDE, or on allocation failure. */
pd_grid *pd_grid_create(int32_t width, int32_t height);
void pd_grid_destroy(pd_grid *g);
pd_grid *pd_grid_clone(const pd_grid *g);

static inline size_t pd_grid_index(const pd_grid *g, int32_t x, int32_t y)
{
    return (size_t)(y + 1) * (size_t)g->stride + (size_t)(x + 1);
}

static inline int pd_grid_in_bounds(const pd_grid *g, int32_t x, int32_t y)
{
    return x >= 0 && y >= 0 && x < g->width && y < g->height;
}

/* Reads a cell; out-of-bounds reads return PD_CELL_BLOCKED. */
static inline uint8_t pd_grid_get(const pd_grid *g, int32_t x, int32_t y)
{
    return pd_grid_in_bounds(g, x, y) ? g->cells[pd_grid_index(g, x, y)] : PD_CELL_BLOCKED;
}

/* Writes an in-bounds cell and keeps uniform_cost up to date. */
void pd_grid_set(pd_grid *g, int32_t x, int32_t y, uint8_t value);

/* Recomputes uniform_cost and the bitsets after bulk writes to cells[]. */
void pd_grid_refresh_flags(pd_grid *g);

/* Recomputes uniform_cost alone (the bits already follow the cells). */
void pd_grid_refresh_uniform(pd_grid *g);

/* Brings the bitsets up to date with cells[] over the in-bounds cells
 * [x0..x1] x [y0..y1] (clipped to the grid), flipping only the bits whose
 * passability changed. Returns the number of cells flipped. */
uint64_t pd_grid_sync_bits(pd_grid *g, int32_t x0, int32_t y0, int32_t x1, int32_t y1);

/* Makes dst (same width and height) a copy of src: cells, flag and bits,
 * without allocating. */
void pd_grid_assign(pd_grid *dst, const pd_grid *src);

/* Bytes of all bitsets (passability and stop). */
size_t pd_grid_bits_bytes(const pd_grid *g);

/* Bytes pd_grid_create(width, height) allocates: padded cells and bitsets
 * (sides 1..PD_GRID_MAX_SIDE), so a caller can tell before allocating. */
uint64_t pd_grid_bytes_for(int32_t width, int32_t height);

/* Whether padded cell (px, py) is passable according to the row-major and
 * the transposed bitset (the tests compare both with cells[]). */
static inline int pd_grid_bit_row(const pd_grid *g, int32_t px, int32_t py)
{
    size_t b = (size_t)px;
    return (int)((g->bits[(size_t)py * g->row_words + (b >> 6)] >> (b & 63)) & 1u);
}

static inline int pd_grid_bit_col(const pd_grid *g, int32_t px, int32_t py)
{
    size_t b = (size_t)py;
    const uint64_t *cols = g->bits + (size_t)(g->height + 2) * g->row_words;
    return (int)((cols[(size_t)px * g->col_words + (b >> 6)] >> (b & 63)) & 1u);
}

/* The stop sets, in this order after the passability bits. */
typedef enum pd_grid_stop_dir {
    PD_GRID_STOP_EAST,   /* rows, x increasing */
    PD_GRID_STOP_WEST,   /* rows, x decreasing */
    PD_GRID_STOP_SOUTH,  /* columns, y increasing */
    PD_GRID_STOP_NORTH,  /* columns, y decreasing */
} pd_grid_stop_dir;

/* The first word of stop set dir (lines as in the passability set of the
 * same axis: row py at py * row_words, column px at px * col_words). */
static inline const uint64_t *pd_grid_stop_set(const pd_grid *g, pd_grid_stop_dir dir)
{
    const size_t rows = (size_t)(g->height + 2) * g->row_words, cols = (size_t)g->stride * g->col_words;
    const uint64_t *first = g->bits + rows + cols;
    switch (dir) {
    case PD_GRID_STOP_EAST:
        return first;
    case PD_GRID_STOP_WEST:
        return first + rows;
    case PD_GRID_STOP_SOUTH:
        return first + 2 * rows;
    default:
        return first + 2 * rows + cols;
    }
}

/* Whether a scan along dir stops at padded cell (px, py). */
static inline int pd_grid_bit_stop(const pd_grid *g, pd_grid_stop_dir dir, int32_t px, int32_t py)
{
    const int rows = dir == PD_GRID_STOP_EAST || dir == PD_GRID_STOP_WEST;
    const size_t b = (size_t)(rows ? px : py);
    const size_t line = rows ? (size_t)py * g->row_words : (size_t)px * g->col_words;
    return (int)((pd_grid_stop_set(g, dir)[line + (b >> 6)] >> (b & 63)) & 1u);
}

#endif
