/*
 * pd_joint.h - crossing jointly's search (pd_yield.h, "Crossing jointly"):
 * the plans of two agents together, one past the other, where planning
 * one round the other's fixed plan finds nothing (a street too narrow for
 * both, one met head-on inside it).
 *
 * A space-time A* over R (a[0]) and one crosser C (a[1]) together, on
 * their unit grids, one tick (the slower one's straight step) at a time,
 * each agent waiting or taking a straight step per tick (no diagonals, so
 * no corner to cut), and only onto a cell it crosses within the tick. The
 * table's other reservations are walls in time (each agent's box, from
 * and to, over the whole tick, checked against every other agent's spans,
 * its own slot aside), and R and C may not share a cell within a tick
 * (their boxes apart). Cost: the ticks each spends away from its target,
 * or moving (so a target reached may be waited on for free); heuristic:
 * the static straight-step distances to the targets. C stands on its cut
 * from tc (its spans before tc are still in the table) and moves from the
 * first tick at or after it.
 *
 * Bounds: `budget` expansions (each up to 25 successors), 512 ticks, and
 * only scenes up to 512 x 512 cells (its static distances cover the whole
 * grid). The context's buffers grow at the first search to about 4.6 MB
 * plus 12 bytes a cell (4,000 expansions) and stay until it is destroyed
 * (pd_yield_ctx_trim destroys it after a request that grew it).
 */
#ifndef PD_JOINT_H
#define PD_JOINT_H

#include <stddef.h>
#include <stdint.h>

#include "pd_grid.h"
#include "pd_reserve.h"
#include "pd_sipp.h"

typedef struct pd_joint_ctx pd_joint_ctx;

/* Its horizon, in ticks, and so the most waypoints a joint plan has. */
#define PD_JOINT_MAX_TICKS 512
#define PD_JOINT_MAX_WAYPOINTS (PD_JOINT_MAX_TICKS + 1)

/* One of the two agents: its unit grid, unit, table slot, speed, start
 * and target (an anchor on its grid). */
typedef struct pd_joint_agent {
    const pd_grid *g;
    uint32_t k, slot;
    double speed;
    int32_t sx, sy, tx, ty;
} pd_joint_agent;

/* NULL on allocation failure. */
pd_joint_ctx *pd_joint_ctx_create(void);
void pd_joint_ctx_destroy(pd_joint_ctx *jc);
/* The bytes it holds (0 for NULL). */
size_t pd_joint_ctx_bytes(const pd_joint_ctx *jc);

/* The joint plans of a[0] (R, from t0) and a[1] (C, from tc >= t0) to
 * their targets, into jw[0..1] (room for PD_JOINT_MAX_WAYPOINTS each; n_jw
 * waypoints each, each ending with a wait until the tick both stand on their
 * targets). 1 found; 0 none within `budget` expansions (or memory, or a
 * scene too large, or grids of different sizes); *spent the expansions. */
int pd_joint_search(pd_joint_ctx *jc, const pd_reserve *t, const pd_joint_agent a[2], int64_t t0, int64_t tc,
                    uint64_t budget, pd_waypoint *const jw[2], size_t n_jw[2], uint64_t *spent);

#endif
