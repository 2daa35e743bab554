/*
 * pd_move.h - geometry on one grid for authoritative movement: rays,
 * sliding moves, the nearest open cell, the distance to the nearest wall,
 * and the cells within a walking distance.
 *
 * The grid is whatever a unit walks on (a scene grid, or a unit-K grid whose
 * open cells are the anchors where the K x K footprint fits), so every
 * function serves every unit size. Cells outside the grid count as blocked:
 * the map edge is a wall.
 *
 * Positions are continuous, in cell units, as fixed point with
 * PD_MOVE_SUBCELL steps per cell: cell (x, y) spans [x, x + 1) x [y, y + 1)
 * and its centre is x + 1/2. Integer arithmetic keeps every decision exact:
 * a ray that passes exactly through a cell corner is a diagonal step, and
 * like a diagonal step of the search it needs both cells beside that corner
 * open (no corner cutting through a pinch). World points therefore keep
 * 1/65536 of a cell of precision.
 */
#ifndef PD_MOVE_H
#define PD_MOVE_H

#include <stddef.h>
#include <stdint.h>

#include "pd_components.h"
#include "pd_grid.h"
#include "pd_search.h"

/* Fixed-point steps per cell. */
#define PD_MOVE_SUBCELL 65536

/* A continuous position in fixed point (cell units * PD_MOVE_SUBCELL). */
typedef struct pd_fpoint {
    int64_t x, y;
} pd_fpoint;

/* The centre of a cell, and the cell a position lies in (floor). */
pd_fpoint pd_move_cell_center(pd_point cell);
pd_point pd_move_cell_of(pd_fpoint p);

/* Which side of the blocked cell a ray met. */
typedef enum pd_move_face {
    PD_MOVE_FACE_NONE = 0,   /* clear */
    PD_MOVE_FACE_X = 1,      /* crossed a vertical grid line (moving in x) */
    PD_MOVE_FACE_Y = 2,      /* crossed a horizontal grid line (moving in y) */
    PD_MOVE_FACE_CORNER = 3, /* through a corner: a pinch, or the diagonal cell */
} pd_move_face;

typedef struct pd_ray_result {
    int clear;               /* 1: every cell on the segment is open */
    pd_point hit;            /* !clear: the first blocked cell met (may lie outside
                                the grid: the edge) */
    pd_point last_free;      /* the last open cell walked (the end cell when clear) */
    pd_fpoint stop;          /* where the segment meets the blocked cell, kept inside
                                last_free; the end point when clear */
    pd_move_face face;
    uint32_t cells;          /* cells walked, the start cell included */
} pd_ray_result;

/* Walks the cells the segment a -> b touches, in order. Returns PD_OK (the
 * answer in *out), PD_OUT_OF_BOUNDS (a outside the grid) or
 * PD_START_BLOCKED (a's cell is blocked). */
pd_status pd_move_raycast(const pd_grid *g, pd_fpoint a, pd_fpoint b, pd_ray_result *out);

/* Moves from a by the displacement d, sliding along walls: where the ray
 * meets a wall face the rest of the move keeps only its component along the
 * face (Detour's moveAlongSurface on a grid); a corner stops it. At most
 * PD_MOVE_MAX_SLIDES slides. *end receives the final position (inside an
 * open cell); *slid is set when a wall changed the move. Same statuses as
 * pd_move_raycast. */
#define PD_MOVE_MAX_SLIDES 4
pd_status pd_move_slide(const pd_grid *g, pd_fpoint a, pd_fpoint d, pd_fpoint *end, int *slid);

/* The open cell nearest to `at` by Euclidean distance between cell centres,
 * within radius (inclusive), ties to the smaller y, then the smaller x. With
 * labels and label != 0 only cells of that component count. Returns PD_OK
 * with *cell and *dist, or PD_NO_PATH when no such cell lies within radius.
 * `at` may be any cell, even outside the grid. */
pd_status pd_move_nearest_open(const pd_grid *g, pd_point at, uint32_t radius, const pd_components *labels,
                               uint32_t label, pd_point *cell, double *dist);

/* Euclidean distance between the centres of `at` and the nearest blocked
 * cell (cells outside the grid included), looking no further than cap; 0
 * when `at` is blocked. Returns 1 with *dist and *wall when one lies within
 * cap, 0 when none does (*dist = cap). */
int pd_move_distance_to_wall(const pd_grid *g, pd_point at, uint32_t cap, double *dist, pd_point *wall);

/* Reusable memory for pd_move_within; zero-initialise, free with
 * pd_move_area_free. */
typedef struct pd_move_area {
    double *cost;            /* walking cost per cell of the (2r+1)^2 window around
                                the start, r = floor(radius): a step costs at least
                                1, so nothing farther is within reach */
    uint32_t *pos;           /* per window cell: heap slot, or unseen / settled */
    uint32_t *heap;          /* window indices, a binary heap on cost */
    pd_point *cells;         /* the cells found, in order of walking cost */
    size_t cap;              /* entries of each array */
} pd_move_area;

void pd_move_area_free(pd_move_area *a);
/* Bytes the area holds (what a worker's trim weighs). */
size_t pd_move_area_bytes(const pd_move_area *a);

/* Every open cell whose walking cost from `from` (8-connected, no corner
 * cutting, step length times the cost of the cell entered: the search's
 * rules) is at most radius, in area->cells[0..*n). Returns PD_OK,
 * PD_START_BLOCKED, PD_OUT_OF_BOUNDS or PD_INTERNAL (no memory). */
pd_status pd_move_within(const pd_grid *g, pd_point from, double radius, pd_move_area *area, size_t *n);

#endif
