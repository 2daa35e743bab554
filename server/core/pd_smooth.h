/*
 * pd_smooth.h - line of sight, path smoothing and waypoint timing.
 *
 * Line of sight is tested on the grid the unit searched (its unit grid), so
 * "visible" means the unit's whole footprint can slide along the segment.
 * The segment's supercover - every cell the ideal line touches - must be
 * passable; where the line passes exactly through a cell corner, both cells
 * beside the corner must be passable (the corner-cutting rule).
 *
 * Smoothing is string pulling: from each kept waypoint, jump to the farthest
 * later path point still in sight. The result is never longer than the input
 * (each jump replaces a sub-path by a straight segment between its ends), and
 * on ground with terrain costs a jump is taken only when the segment costs no
 * more than the sub-path it replaces, so it never costs more either.
 */
#ifndef PD_SMOOTH_H
#define PD_SMOOTH_H

#include <stddef.h>

#include "pd_grid.h"
#include "pd_search.h"

/* 1 if the segment between the centres of a and b is clear, else 0 (also
 * for a NULL grid or an endpoint off the grid). a == b: visible iff open.
 * Exact integer arithmetic; a diagonal step is visible iff its two
 * orthogonal cells are open, as in the search. */
int pd_line_of_sight(const pd_grid *g, pd_point a, pd_point b);

/* Smooths pts in place; returns the new count (<= n). Start and goal stay;
 * the kept points are a subsequence of the input, and when start sees the
 * goal the result is just those two. */
size_t pd_path_smooth(const pd_grid *g, pd_point *pts, size_t n);

/* Euclidean length of the polyline, in cells. */
double pd_path_length(const pd_point *pts, size_t n);

/*
 * Arrival time at every waypoint: times[0] = start_time, and each segment
 * takes (its Euclidean length x the mean cost of the cells it enters along
 * its supercover) / speed_cells_per_s. For a cell-by-cell path that is
 * exactly: straight step 1/speed, diagonal sqrt(2)/speed, times the cost of
 * the cell entered (cells beside an exact corner are touched, not entered,
 * and do not count). speed_cells_per_s must be > 0: otherwise (or with a
 * NULL grid or pts) every time is start_time.
 */
void pd_path_times(const pd_grid *g, const pd_point *pts, size_t n,
                   double speed_cells_per_s, double start_time, double *times);

#endif
