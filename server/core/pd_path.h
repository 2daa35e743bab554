/*
 * pd_path.h - post-processing of cell paths found by the search.
 *
 * The search returns every cell it walks through. Many clients (NPC movement
 * that steers between waypoints) only want the points where the path turns,
 * which is far less to send and to follow; this turns the first form into the
 * second without losing any information, since the dropped cells lie on the
 * straight segments between the kept ones.
 *
 * Pure C11: no I/O, no allocation, no threads.
 */
#ifndef PD_PATH_H
#define PD_PATH_H

#include <stddef.h>

#include "pd_search.h"

/*
 * Compresses a path in place to its start, every point where the step
 * direction changes, and its goal. Returns the new number of points (never
 * more than n; pts may be NULL when n is 0).
 *
 * Two steps count as the same direction when they point the same way, even
 * if their lengths differ, so the function is idempotent: compressing an
 * already compressed path keeps it as it is. A point repeated back to back
 * (a zero-length step, which has no direction) is kept once.
 */
size_t pd_path_corners(pd_point *pts, size_t n);

#endif
