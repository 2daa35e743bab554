/*
 * pd_supercover.h - internal to core: a walk over the supercover of the
 * segment between two cell centres, i.e. every cell the ideal line touches.
 *
 * Line of sight (pd_smooth.c), waypoint timing (pd_smooth.c) and the LINE
 * goal fallback (pd_fallback.c) all need the same cells in the same order, so
 * the walk lives here once, as static inline code with no state beyond the
 * walker struct.
 *
 * The walk is exact: it compares where the line crosses the next vertical and
 * the next horizontal grid line with one integer error term on doubled
 * coordinates (Bresenham style), never with floats. Each step moves to a
 * straight neighbour, or - where the line passes exactly through a cell
 * corner - diagonally, after naming the two cells beside that corner. The
 * main cells therefore form a legal grid walk under the search's rules when
 * every named cell is open: straight steps, plus diagonal steps whose two
 * orthogonal cells were checked.
 *
 * Coordinates are int64 internally so segments between any int32 points are
 * safe; the error term stays within a few times the longer side.
 */
#ifndef PD_SUPERCOVER_H
#define PD_SUPERCOVER_H

#include <stdint.h>

#include "pd_search.h"

typedef struct pd__supercover {
    int64_t x, y;      /* the current main cell */
    int64_t nx, ny;    /* |dx|, |dy| of the whole segment */
    int64_t sx, sy;    /* step signs: -1, 0 or +1 */
    int64_t ix, iy;    /* vertical / horizontal grid lines crossed so far */
    int64_t err;       /* (2ix+1)*ny - (2iy+1)*nx: which line the segment meets first */
} pd__supercover;

typedef enum pd__supercover_move {
    PD__SUPERCOVER_DONE = 0,     /* the current cell is the end cell; nothing moved */
    PD__SUPERCOVER_STRAIGHT = 1, /* moved to a straight neighbour */
    PD__SUPERCOVER_CORNER = 2,   /* moved diagonally through a corner; side[] filled */
} pd__supercover_move;

static inline void pd__supercover_init(pd__supercover *w, pd_point a, pd_point b)
{
    int64_t dx = (int64_t)b.x - a.x, dy = (int64_t)b.y - a.y;
    w->x = a.x;
    w->y = a.y;
    w->nx = dx < 0 ? -dx : dx;
    w->ny = dy < 0 ? -dy : dy;
    w->sx = dx < 0 ? -1 : (dx > 0 ? 1 : 0);
    w->sy = dy < 0 ? -1 : (dy > 0 ? 1 : 0);
    w->ix = 0;
    w->iy = 0;
    w->err = w->ny - w->nx;
}

static inline pd_point pd__supercover_cell(const pd__supercover *w)
{
    return (pd_point){(int32_t)w->x, (int32_t)w->y};
}

/*
 * Advances to the next main cell. On a corner crossing, side[0] and side[1]
 * receive the two cells beside the corner, the one with the smaller y first
 * (then the smaller x), matching the tie rule used across core.
 *
 * The line meets the next vertical grid line at parameter (2ix+1)/(2nx) and
 * the next horizontal one at (2iy+1)/(2ny); err compares the two without
 * division. Once every vertical line is crossed err is positive (and
 * symmetrically), so the walk never steps past the end cell.
 */
static inline pd__supercover_move pd__supercover_step(pd__supercover *w, pd_point side[2])
{
    if (w->ix == w->nx && w->iy == w->ny)
        return PD__SUPERCOVER_DONE;
    if (w->err < 0) {
        w->x += w->sx;
        w->ix++;
        w->err += 2 * w->ny;
        return PD__SUPERCOVER_STRAIGHT;
    }
    if (w->err > 0) {
        w->y += w->sy;
        w->iy++;
        w->err -= 2 * w->nx;
        return PD__SUPERCOVER_STRAIGHT;
    }
    pd_point beside_x = {(int32_t)(w->x + w->sx), (int32_t)w->y};
    pd_point beside_y = {(int32_t)w->x, (int32_t)(w->y + w->sy)};
    if (w->sy < 0) {
        side[0] = beside_y;
        side[1] = beside_x;
    } else {
        side[0] = beside_x;
        side[1] = beside_y;
    }
    w->x += w->sx;
    w->y += w->sy;
    w->ix++;
    w->iy++;
    w->err += 2 * (w->ny - w->nx);
    return PD__SUPERCOVER_CORNER;
}

#endif
