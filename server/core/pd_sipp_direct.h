/*
 * pd_sipp_direct.h - ReservePath's fast path: the static shortest path,
 * timed without waits, taken as the plan when the reservation table does
 * not stand in its way; SIPP (pd_sipp.h) runs only when it does.
 *
 * Why the answer is still SIPP's optimum. Let P be a path that is shortest
 * on the static grid in the planner's own step durations (each step
 * ceil(cost * 1000 / speed) ms, pd_sipp.h) and T its time. Every space-time
 * plan walks some static path and may only add waits, so no plan reaches
 * the goal before t0 + T, and with a window no plan's handover-plus-static-
 * rest (SIPP's objective) is below t0 + T either. P timed from t0 with no
 * waits reaches each of its cells at the earliest time any plan could
 * along it; if every move's box is free over [depart, arrive), and its end
 * is one SIPP would accept (the goal held from arrival on for PARK, free
 * at the arrival itself for VANISH, as SIPP arrives only inside a safe
 * interval; or, with a window, the first cell reached at or
 * after t0 + window whose footprint stays free for the hold: the
 * handover), that plan reaches SIPP's lower bound, so it is optimal. Ties
 * may make it another optimal plan than SIPP's: the arrival (or the
 * objective, with a window) is the same, tests/unit/test_reserve.c compares
 * both on random grids and tables. When any check fails the fast path
 * declines and SIPP plans as before: it never answers anything SIPP would
 * not accept as optimal.
 *
 * The static search is jump point search in milliseconds
 * (pd_search_jps_weighted): the octile metric's shortest path need not be
 * shortest in rounded milliseconds (a diagonal's rounding differs from
 * sqrt(2) straight ones', so over many steps another mix of moves can win),
 * and exactness needs the planner's metric. So it applies where JPS does:
 * uniform-cost unit grids, 8-connected with straight < diagonal < 2 x
 * straight in ms (every speed below about 1,400 cells per second) or
 * 4-connected. Weighted grids, and goal sets and ranges, go to SIPP.
 *
 * The answer has SIPP's form: one waypoint per cell, start first, each
 * leaving when it arrives (no waits); the last holds as pd_sipp_extract
 * would (FOREVER to park or for an unbounded PARTIAL hold, arrival +
 * hold_ms for a bounded one, its arrival to vanish); cost summed as SIPP
 * sums it.
 */
#ifndef PD_SIPP_DIRECT_H
#define PD_SIPP_DIRECT_H

#include <stddef.h>
#include <stdint.h>

#include "pd_grid.h"
#include "pd_reserve.h"
#include "pd_sipp.h"
#include "pd_status.h"

typedef struct pd_sipp_direct pd_sipp_direct;

void pd_sipp_direct_destroy(pd_sipp_direct *d);
size_t pd_sipp_direct_footprint(const pd_sipp_direct *d);
/* Frees the search's scratch; the last answer's waypoints stay valid. */
void pd_sipp_direct_trim(pd_sipp_direct *d, size_t keep_bytes);

/*
 * Tries the fast path for a request pd_sipp_plan has checked (arguments,
 * bounds, start and goal open, the start free at t0). *d is made at first
 * use (NULL stays NULL when memory ran out: the fast path then declines).
 * self is the agent's slot (its own spans do not count), use_table 0 when
 * no other agent holds anything, t_end the window's end (FOREVER without
 * one). Steps take pd_sipp_step_ms.
 * Returns 1 with *st PD_OK or PD_PARTIAL and *res filled (waypoints owned
 * by *d, valid until its next use), or 0: declined, nothing filled.
 * *micros gets its search's time (pd_search_metrics.micros; 0 when none
 * ran), answered or declined.
 */
int pd_sipp_direct_plan(pd_sipp_direct **d, const pd_reserve *table, const pd_grid *grid, const pd_sipp_params *p,
                        uint32_t self, int use_table, int64_t t_end,
                        pd_sipp_result *res, pd_status *st, uint64_t *micros);

/* After pd_sipp_direct_plan declined (returned 0) having found the static
 * path (start first, goal last, every cell): that path, whose suffixes are
 * exact static times to the goal, for SIPP's heuristic (pd_sipp.c); *n = 0
 * when it found none, or answered. Valid until the next use of d. */
const pd_point *pd_sipp_direct_declined_path(const pd_sipp_direct *d, size_t *n);

/*
 * SIPP's probe for an exact static time (pd_sipp.c): the static shortest
 * path from `from` to p->goal in pd_sipp_step_ms steps, by the fast path's
 * jump point search (uniform grids; p->targets none), every cell, `from`
 * first. Returns its length with *path (owned by *d, valid until its next
 * use), or 0 with *st saying why (PD_INVALID_ARGUMENT where jump point
 * search does not apply - a weighted grid, a speed too high -, PD_NO_PATH,
 * PD_BUDGET_EXCEEDED past max_expansions (0: none), the poll's status,
 * PD_INTERNAL). *expanded gets the jump points it expanded.
 */
size_t pd_sipp_direct_static_path(pd_sipp_direct **d, const pd_grid *grid, const pd_sipp_params *p, pd_point from,
                                  uint64_t max_expansions, const pd_point **path, pd_status *st, uint64_t *expanded);

#endif
