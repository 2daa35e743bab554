/*
 * path_rules.h - whether a path obeys the movement rules of pd_search.h,
 * written from those rules, not from pd_search.c: every step moves to one
 * of the eight (or four) neighbours, every cell on the path is passable, a
 * diagonal step needs both orthogonal neighbours passable, and a step costs
 * its length times the cost byte of the cell it enters. Shared by the
 * cmocka search tests (core_check.h) and the fuzz targets, so it reports
 * instead of failing.
 */
#ifndef PATH_RULES_H
#define PATH_RULES_H

#include <stdio.h>

#include "pd_grid.h"
#include "pd_search.h"

#define PATH_RULES_SQRT2 1.41421356237309504880

/* 0 when path[0..len) runs start..goal through legal steps on g, with its
 * cost summed step by step from the start in *cost; otherwise 1 with the
 * first broken rule in why. */
static inline int path_breaks_rules(const pd_grid *g, pd_connectivity conn, const pd_point *path, size_t len,
                                    pd_point start, pd_point goal, double *cost, char *why, size_t whylen)
{
    *cost = 0.0;
    if (len < 1) {
        snprintf(why, whylen, "empty path");
        return 1;
    }
    if (path[0].x != start.x || path[0].y != start.y) {
        snprintf(why, whylen, "path starts at (%d,%d), want (%d,%d)", path[0].x, path[0].y, start.x, start.y);
        return 1;
    }
    if (path[len - 1].x != goal.x || path[len - 1].y != goal.y) {
        snprintf(why, whylen, "path ends at (%d,%d), want (%d,%d)", path[len - 1].x, path[len - 1].y, goal.x,
                 goal.y);
        return 1;
    }
    for (size_t i = 0; i < len; i++) {
        if (!pd_grid_in_bounds(g, path[i].x, path[i].y) || pd_grid_get(g, path[i].x, path[i].y) == 0) {
            snprintf(why, whylen, "path cell %zu (%d,%d) is outside or blocked", i, path[i].x, path[i].y);
            return 1;
        }
        if (i == 0)
            continue;
        int32_t dx = path[i].x - path[i - 1].x, dy = path[i].y - path[i - 1].y;
        if (dx < -1 || dx > 1 || dy < -1 || dy > 1 || (dx == 0 && dy == 0)) {
            snprintf(why, whylen, "step %zu (%d,%d)->(%d,%d) is not to a neighbour", i, path[i - 1].x,
                     path[i - 1].y, path[i].x, path[i].y);
            return 1;
        }
        double entered = (double)pd_grid_get(g, path[i].x, path[i].y);
        if (dx != 0 && dy != 0) {
            if (conn == PD_CONNECT_4) {
                snprintf(why, whylen, "diagonal step %zu in a 4-connected search", i);
                return 1;
            }
            if (pd_grid_get(g, path[i - 1].x + dx, path[i - 1].y) == 0 ||
                pd_grid_get(g, path[i - 1].x, path[i - 1].y + dy) == 0) {
                snprintf(why, whylen, "step %zu (%d,%d)->(%d,%d) cuts a corner", i, path[i - 1].x,
                         path[i - 1].y, path[i].x, path[i].y);
                return 1;
            }
            *cost += PATH_RULES_SQRT2 * entered;
        } else {
            *cost += entered;
        }
    }
    return 0;
}

#endif
