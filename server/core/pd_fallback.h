/*
 * pd_fallback.h - substitute points when the asked-for one will not do:
 * a blocked start or goal snapped to the nearest open cell, and an
 * unreachable goal replaced by the nearest reachable cell (NEAREST) or the
 * first reachable cell on the line back toward the start (LINE).
 *
 * "Reachable" means: in the given component (see pd_components.h). All
 * searches are deterministic: distance is Euclidean in cells, and ties go to
 * the smaller y, then the smaller x.
 */
#ifndef PD_FALLBACK_H
#define PD_FALLBACK_H

#include <stdint.h>

#include "pd_components.h"
#include "pd_grid.h"
#include "pd_search.h"

/* Rings searched outward at most; bounds the work for a point deep inside
 * a large blocked region. */
#define PD_FALLBACK_MAX_RADIUS 256

/* Nearest passable cell to p (p itself if it is passable and, when label is
 * non-zero, in that component). label 0 = any component (comps may then be
 * NULL). p may lie outside the grid. Returns PD_OK with *out, PD_NO_PATH
 * when nothing qualifies within max_radius rings (Chebyshev distance), or
 * PD_INVALID_ARGUMENT (NULL g/out, max_radius < 0, a label without comps or
 * comps of another size). Once a cell within max_radius is found, the answer
 * is the Euclidean nearest of the whole grid: the rings that confirm it may
 * reach up to max_radius * sqrt(2). */
pd_status pd_fallback_nearest(const pd_grid *g, const pd_components *comps, uint32_t label,
                              pd_point p, int32_t max_radius, pd_point *out);

/* Walks the supercover line from goal to start and returns the first cell
 * in start's component; where the line passes exactly through a corner, the
 * two cells beside it come before the diagonal cell, the smaller y first.
 * PD_OK with *out, PD_NO_PATH (only when start is blocked: otherwise the
 * walk ends at start), PD_OUT_OF_BOUNDS (start or goal off the grid) or
 * PD_INVALID_ARGUMENT (NULL g/comps/out, comps of another size). */
pd_status pd_fallback_line(const pd_grid *g, const pd_components *comps,
                           pd_point start, pd_point goal, pd_point *out);

#endif
