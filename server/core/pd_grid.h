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

/* Recomputes uniform_cost after bulk writes to cells[]. */
void pd_grid_refresh_flags(pd_grid *g);

#endif
