/*
 * pd_targets.h - a set of acceptable path ends for A*: "reach any of these
 * goals" and "stop within range of a goal" (optionally with line of sight),
 * in one search that stays optimal.
 *
 * A cell c qualifies for goal i when the Euclidean distance between the
 * centres of c and goals[i] is at most range (in cells; range 0: c is the
 * goal itself) and, with line_of_sight, the exact ray of pd_move_raycast
 * from c's centre to the goal's centre on the searched grid meets no blocked
 * cell before the goal's own (the goal may stand on a blocked cell: an enemy
 * occupies its cell). The search ends at the first qualifying cell it pops,
 * so the path is one of least cost among all paths ending in a qualifying
 * cell; pd_targets_h is the admissible, consistent heuristic that makes
 * that so (proof at its definition in pd_targets.c).
 */
#ifndef PD_TARGETS_H
#define PD_TARGETS_H

#include <stddef.h>
#include <stdint.h>

#include "pd_grid.h"
#include "pd_search.h"

/* Most goals one search takes: the heuristic is a minimum over them, paid on
 * every node generated, so the cap bounds that cost (64 goals: about 64
 * square roots per node). */
#define PD_TARGETS_MAX_GOALS 64

typedef struct pd_targets {
    const pd_point *goals;   /* 1..PD_TARGETS_MAX_GOALS cells, inside the grid */
    size_t n_goals;
    double range;            /* cells, >= 0 */
    int line_of_sight;       /* also require a clear ray to the goal */
} pd_targets;

/* Lower bound on the cost from (x, y) to any qualifying cell, under the
 * search's rules for `connectivity` (4 or 8). Consistent: it changes by no
 * more than a step's length between neighbours. */
double pd_targets_h(const pd_targets *t, pd_connectivity connectivity, int32_t x, int32_t y);

/* 1 when c qualifies on grid g (see the top of this file), with *which the
 * lowest index of a goal it qualifies for; 0 otherwise. */
int pd_targets_accepts(const pd_targets *t, const pd_grid *g, pd_point c, uint32_t *which);

/* 1 when c lies within range of goal (distance only, no line of sight). */
int pd_targets_in_range(double range, pd_point c, pd_point goal);

#endif
