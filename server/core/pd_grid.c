/* pd_grid.c - allocation and bookkeeping for padded tile grids. */
#include "pd_grid.h"

#include <stdlib.h>
#include <string.h>

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
    /* calloc leaves every cell, padding included, PD_CELL_BLOCKED. */
    g->cells = calloc((size_t)(width + 2) * (size_t)(height + 2), 1);
    if (!g->cells) {
        free(g);
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
    free(g);
}

pd_grid *pd_grid_clone(const pd_grid *g)
{
    pd_grid *c = pd_grid_create(g->width, g->height);
    if (!c)
        return NULL;
    memcpy(c->cells, g->cells, (size_t)(g->width + 2) * (size_t)(g->height + 2));
    c->uniform_cost = g->uniform_cost;
    return c;
}

void pd_grid_set(pd_grid *g, int32_t x, int32_t y, uint8_t value)
{
    if (!pd_grid_in_bounds(g, x, y))
        return;
    uint8_t old = g->cells[pd_grid_index(g, x, y)];
    g->cells[pd_grid_index(g, x, y)] = value;
    if (value > PD_CELL_FREE)
        g->uniform_cost = 0;
    else if (old > PD_CELL_FREE)
        pd_grid_refresh_flags(g); /* the last costly cell may just have gone */
}

void pd_grid_refresh_flags(pd_grid *g)
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
