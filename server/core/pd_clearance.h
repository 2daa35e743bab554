/*
 * pd_clearance.h - clearance values and per-unit-size grids.
 *
 * A unit of size k standing at cell (x, y) covers x..x+k-1 by y..y+k-1 (top-
 * left anchor, y down). The clearance of a cell is the side of the largest
 * all-passable square anchored there, capped at PD_CLEARANCE_CAP, so a unit
 * of size k may stand at (x, y) exactly when clearance >= k.
 *
 * From one clearance map every unit size gets its own *unit grid*: an
 * ordinary pd_grid in which a cell is passable when the unit fits there, and
 * costs the most expensive cell under the footprint. Searching a unit grid
 * with the ordinary A* (no corner cutting) is then exactly the footprint rule:
 * a diagonal step needs the unit to fit at both orthogonal neighbours, which
 * is the swept area of the square. Unit size 1's grid is the scene grid.
 *
 * Both structures use the padded layout of pd_grid (index = pd_grid_index),
 * with 0 in the padding. Updates recompute only what a changed rectangle can
 * reach: clearance looks right and down, so a change moves values at most
 * PD_CLEARANCE_CAP - 1 cells up and left of the rectangle.
 */
#ifndef PD_CLEARANCE_H
#define PD_CLEARANCE_H

#include <stdint.h>

#include "pd_grid.h"

/* Largest unit size the core serves; the config's limit must not exceed it. */
#define PD_UNIT_SIZE_MAX 16
/* Clearance values saturate here: nothing needs to know more than whether
 * the largest unit fits. */
#define PD_CLEARANCE_CAP PD_UNIT_SIZE_MAX

typedef struct pd_clearance {
    int32_t width, height, stride;   /* as the grid it was built from */
    uint8_t *values;                 /* padded; 0 on blocked cells and padding */
} pd_clearance;

pd_clearance *pd_clearance_build(const pd_grid *g);
pd_clearance *pd_clearance_clone(const pd_clearance *c);
void pd_clearance_destroy(pd_clearance *c);

static inline uint8_t pd_clearance_get(const pd_clearance *c, int32_t x, int32_t y)
{
    if (x < 0 || y < 0 || x >= c->width || y >= c->height)
        return 0;
    return c->values[(size_t)(y + 1) * (size_t)c->stride + (size_t)(x + 1)];
}

/* After cells of g in [x0..x1] x [y0..y1] (inclusive, clipped to the grid)
 * changed, recomputes every clearance value they can affect. */
void pd_clearance_update(pd_clearance *c, const pd_grid *g,
                         int32_t x0, int32_t y0, int32_t x1, int32_t y1);

/* The unit grid for unit size `unit` (1..PD_UNIT_SIZE_MAX); NULL on a bad
 * size or allocation failure. For unit 1 it is a copy of g. */
pd_grid *pd_unit_grid_build(const pd_grid *g, const pd_clearance *c, uint32_t unit);

/* After cells of g in the rectangle changed (and c was updated), recomputes
 * the unit grid cells whose footprint overlaps it. */
void pd_unit_grid_update(pd_grid *ug, const pd_grid *g, const pd_clearance *c, uint32_t unit,
                         int32_t x0, int32_t y0, int32_t x1, int32_t y1);

#endif
