/*
 * pd_targets.c - goal sets and ranges for A* (see pd_targets.h).
 */
#include "pd_targets.h"

#include <math.h>

#include "pd_move.h"
#include "pd_search_common.h"

/* The largest ratio of the octile distance to the Euclidean one, reached at
 * 22.5 degrees: sqrt(4 - 2*sqrt(2)). */
#define PD__OCTILE_OVER_EUCLID 1.08239220029239396880
/* The same for the Manhattan distance, at 45 degrees. */
#define PD__MANHATTAN_OVER_EUCLID PD__SQRT2

/*
 * Why this heuristic is admissible and consistent.
 *
 * Let D be the search's exact obstacle-free distance (octile when
 * 8-connected, Manhattan when 4-connected), E the Euclidean distance and
 * K = max D/E (PD__OCTILE_OVER_EUCLID or PD__MANHATTAN_OVER_EUCLID). Every
 * step costs its length times a cost byte >= 1, so any path from n to a
 * cell c costs at least D(n, c), and D(n, c) >= E(n, c). For a qualifying c
 * of goal g, E(c, g) <= R, so by the triangle inequality of each norm:
 *   cost(n -> c) >= D(n, c) >= D(n, g) - D(c, g) >= D(n, g) - K*R
 *   cost(n -> c) >= E(n, c) >= E(n, g) - E(c, g) >= E(n, g) - R
 * and the cost is >= 0. So h_g(n) = max(0, E(n,g) - R, D(n,g) - K*R) never
 * overestimates the cost to reach g's range, and h(n) = min over goals of
 * h_g(n) never overestimates the cost to reach any qualifying cell (line of
 * sight only removes qualifying cells, so it cannot make h too high).
 * Consistency: E(., g) and D(., g) change by at most E(n, m) <= D(n, m) =
 * the step's length between neighbours n, m (Manhattan: 1 per 4-connected
 * step), and a step costs at least its length; subtracting a constant,
 * taking max with 0, and min or max over such functions keep that bound.
 * A qualifying cell gets h = 0 (E <= R and D <= K*E <= K*R), so with the
 * goal test made when a node is popped the first qualifying cell popped
 * ends a least-cost path. With R = 0 the bound is D(n, g) itself (E <= D),
 * the ordinary heuristic.
 */
static double pd__h_goal(const pd_targets *t, int eight, int32_t dx, int32_t dy)
{
    if (t->range <= 0)
        return eight ? pd__octile(dx, dy) : pd__manhattan(dx, dy);
    const double e = sqrt((double)dx * dx + (double)dy * dy) - t->range;
    const double d = eight ? pd__octile(dx, dy) - PD__OCTILE_OVER_EUCLID * t->range
                           : pd__manhattan(dx, dy) - PD__MANHATTAN_OVER_EUCLID * t->range;
    const double h = e > d ? e : d;
    return h > 0 ? h : 0;
}

double pd_targets_h(const pd_targets *t, pd_connectivity connectivity, int32_t x, int32_t y)
{
    const int eight = connectivity != PD_CONNECT_4;
    double best = INFINITY;
    for (size_t i = 0; i < t->n_goals; i++) {
        double h = pd__h_goal(t, eight, x - t->goals[i].x, y - t->goals[i].y);
        if (h < best)
            best = h;
    }
    return best;
}

int pd_targets_in_range(double range, pd_point c, pd_point goal)
{
    const int64_t dx = (int64_t)c.x - goal.x, dy = (int64_t)c.y - goal.y;
    /* Squared integers are exact; range * range only rounds in its last bit,
     * which the comparison of doubles below absorbs for any range a request
     * may carry. */
    return (double)(dx * dx + dy * dy) <= range * range;
}

/* The ray from c's centre to the goal's meets nothing blocked before the
 * goal's own cell. */
static int pd__sees(const pd_grid *g, pd_point c, pd_point goal)
{
    pd_ray_result ray;
    if (pd_move_raycast(g, pd_move_cell_center(c), pd_move_cell_center(goal), &ray) != PD_OK)
        return 0;
    return ray.clear || (ray.hit.x == goal.x && ray.hit.y == goal.y);
}

int pd_targets_accepts(const pd_targets *t, const pd_grid *g, pd_point c, uint32_t *which)
{
    for (size_t i = 0; i < t->n_goals; i++) {
        const pd_point goal = t->goals[i];
        const int hit = t->range <= 0 ? c.x == goal.x && c.y == goal.y
                                      : pd_targets_in_range(t->range, c, goal) &&
                                            (!t->line_of_sight || pd__sees(g, c, goal));
        if (hit) {
            *which = (uint32_t)i;
            return 1;
        }
    }
    return 0;
}
