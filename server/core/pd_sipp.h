/*
 * pd_sipp.h - ReservePath's planner: safe interval path planning (SIPP,
 * Phillips & Likhachev, ICRA 2011) for one agent against a scene's
 * reservation table (pd_reserve.h), and the reservation of what it finds.
 *
 * Movement rules are pd_search's, on the unit grid of the agent's size
 * (pd_clearance.h): 8-connected without corner cutting (or 4-connected), a
 * step into a cell of cost c costs c straight and c * sqrt(2) diagonally.
 * A step takes ceil(cost * 1000 / speed) milliseconds (at least 1), speed
 * in cells per second. Waiting in place is allowed anywhere the agent is
 * safe. Occupancy is pd_reserve.h's: the footprint while waiting, the
 * bounding box of both footprints while moving.
 *
 * The search. A state is (anchor, safe interval): a maximal time interval
 * in which no other agent holds any cell of the footprint there. From a
 * state reached at time g the agent may leave at any d >= g, as long as the
 * move's box is free over [d, d + duration) and it arrives inside a safe
 * interval of the next anchor; each successor gets the earliest such
 * arrival, so the first goal state taken from the open list (ordered by
 * arrival + the exact static time to the goal, or the caller's static
 * distance * 1000 / speed instead) is a fastest plan. On an empty table
 * that is A* over time: the same path cost as pd_search_astar.
 *
 * The exact static times are asked for only for the states the
 * space-time search takes out of its open list; the others are keyed by a
 * lower bound until then (octile, or the expanded state's exact time less
 * the step, whichever is higher). On a uniform grid they come from probes
 * first: the static shortest path from the state's cell to the goal, by
 * jump point search in the plan's own step durations
 * (pd_sipp_direct_static_path), which gives every cell along it its exact
 * time too; the fast path's declined path seeds them. Past a budget of the
 * probes' jump points in one plan (a crowd: many cells off every path so
 * far), and on weighted grids, they come from a reverse search from the
 * goal toward the start (Silver's reverse resumable A*, WHCA*'s
 * heuristic), over the static grid in the plan's own step durations,
 * resumed until the cell asked for is closed: about one A* from the goal
 * to the start, where a probe is about one jump point search. Both give
 * the same times (reverse_only forces the second, for comparison). With
 * exact times a state past the handover (below) ends the search when it is
 * taken out: its key is the whole plan's arrival, so the static rest costs
 * no search.
 *
 * The window (window_ms > 0) bounds what is reserved, not what is planned.
 * Let t_end = t0 + window_ms and hold = max(arrival, t_end). A state whose
 * cell stays safe from hold on (for hold_ms, when that is set) is a
 * *handover*: from there the search goes on as plain A* that ignores the
 * table (the rest of the way as a static path), starting at hold (a state
 * reached before t_end waits in place for it). So the plan that wins
 * minimises the time to the handover plus the static time from there to
 * the goal (WHCA*'s rule with exact static distances, and no dead ends that
 * a heuristic guess would walk into), and an agent that cannot get anywhere
 * yet stays where it is. Only the part up to the handover is reserved, and
 * the answer is PD_PARTIAL: the agent holds the handover cell from its
 * arrival on, and must reserve again to go on. With hold_ms = 0 (the
 * default) it holds it until it does (reserved_until_ms =
 * PD_RESERVE_FOREVER), as a parked agent; with hold_ms > 0, until
 * reserved_until_ms = hold + hold_ms, and it must reserve again before then.
 * A bounded hold lets later plans run through the cell once it ends, so an
 * agent that then cannot reserve again (its neighbours taken) is left
 * standing unreserved in their way; the unbounded hold never is, at the
 * price of others routing round it. A goal reached before any handover is
 * PD_OK, even if arrival there falls after the window. window_ms = 0 plans
 * all the way in space-time, and answers PD_NO_PATH when the goal cannot
 * be reached (or parked on) at any time: callers check static connectivity
 * first (pd_components), as for FindPath, since proving it costs a search
 * of every state.
 *
 * At the goal: PD_AT_GOAL_PARK takes a goal state whose interval never ends
 * (the agent holds the goal until it reserves again or is released;
 * reserved_until_ms = PD_RESERVE_FOREVER); PD_AT_GOAL_VANISH takes any goal
 * state and leaves the table on arrival (reserved_until_ms = arrival).
 *
 * Goals. One goal cell, or FindPath's goal sets and ranges
 * (pd_sipp_params.targets, pd_targets.h: any of up to 64 goals, or any
 * cell within a Euclidean range of one): they change the goal test
 * (pd__at_goal) and the bound (pd__h: pd_targets_h), and turn the reverse
 * search off: such a plan is keyed by pd_targets_h, a consistent lower
 * bound, and the static rest after a handover is searched as A* (the
 * octile planner; exact, slower). The fast path declines them. A blocked
 * goal is never reached rather than refused. (Seeding the reverse search
 * with every accepted cell would key them exactly too; its ring bounds
 * how far apart its first keys may lie.)
 *
 * The fast path (pd_sipp_direct.h): before any of the above, the static
 * shortest path in the plan's own step durations (jump point search),
 * timed without waits, is checked against the table; when its moves are
 * free up to the end SIPP would take (the goal, or the handover), it is an
 * optimal plan and is the answer (pd_sipp_result.direct). On an empty
 * table that is every plan; the search above runs only when another
 * agent's hold is in the way (or on weighted grids).
 *
 * Context: one pd_sipp_ctx per thread, reused without clearing (node
 * records carry a generation, as pd_search's). The search allocates only
 * when a scratch array must grow past its largest size so far, never per
 * expansion; pd_sipp_ctx_trim gives memory back.
 */
#ifndef PD_SIPP_H
#define PD_SIPP_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "pd_grid.h"
#include "pd_reserve.h"
#include "pd_search.h"
#include "pd_status.h"
#include "pd_targets.h"

/* Speeds outside [MIN, MAX] cells per second are PD_INVALID_ARGUMENT: the
 * slowest keeps any plan's times far below PD_RESERVE_MAX_TIME, the fastest
 * is far beyond any game's. */
#define PD_SIPP_MIN_SPEED 0.001
#define PD_SIPP_MAX_SPEED 1e6
/* The largest window and t0 a request may name (about 35 years and 36
 * million years): every time a plan reaches, window and hold included,
 * then stays below PD_RESERVE_MAX_TIME. */
#define PD_SIPP_MAX_WINDOW_MS ((int64_t)1 << 40)
#define PD_SIPP_MAX_T0 ((int64_t)1 << 60)

/* A step's duration in milliseconds: its cost as pd_search sums it (c
 * straight, c * sqrt(2) diagonally, c the cost byte of the cell entered)
 * * 1000 / speed, rounded up (a hair of float noise below an integer stays
 * on it), at least 1. */
static inline int64_t pd_sipp_step_ms(int diagonal, int cost_byte, double speed)
{
    const double cost = diagonal ? 1.41421356237309504880 * cost_byte : (double)cost_byte;
    const double ms = ceil(cost * 1000.0 / speed - 1e-9);
    return ms < 1.0 ? 1 : (int64_t)ms;
}

typedef enum pd_at_goal {
    PD_AT_GOAL_PARK = 0,
    PD_AT_GOAL_VANISH = 1,
} pd_at_goal;

/* A lower bound on the static cost (pd_search's: octile x terrain) from
 * anchor (x, y) to the goal, consistent (it falls by no more than a step's
 * cost from a cell to its neighbour), INFINITY where the goal cannot be
 * reached. See pd_sipp_params.heuristic. */
typedef double (*pd_sipp_heuristic_fn)(void *user, int32_t x, int32_t y);

typedef struct pd_sipp_params {
    uint64_t agent;
    uint32_t unit;                 /* footprint side; grid is its unit grid */
    pd_point start, goal;          /* anchors */
    int64_t t0_ms;                 /* 0 .. PD_SIPP_MAX_T0 */
    double speed;                  /* cells per second */
    int64_t window_ms;             /* 0: all the way (see above) */
    int64_t hold_ms;               /* PARTIAL's hold: 0 until reserved again */
    pd_at_goal at_goal;
    pd_connectivity connectivity;  /* 0 means PD_CONNECT_8 */
    uint64_t max_expansions;       /* 0: no budget; bounds each search */
    pd_search_poll_fn poll;        /* as pd_search's; may be NULL */
    void *poll_user;
    /* NULL: the planner's own reverse search (above) gives exact static
     * times. A caller that keeps the scene's static distances to the goal
     * (a reverse Dijkstra per goal) may give them here instead: a lower
     * bound in cells, consistent; the static rest after the handover is
     * then searched as an A* under it, as it must be for a bound that may
     * not be exact. */
    pd_sipp_heuristic_fn heuristic;
    void *heuristic_user;
    /* 1: skip the fast path (pd_sipp_direct.h), plan with SIPP alone; for
     * tests and benchmarks that compare the two. */
    int sipp_only;
    /* 1: exact static times from the reverse search alone, no probes (see
     * "The exact static times" above); for tests and benchmarks that
     * compare the two. */
    int reverse_only;
    /* Goal sets and ranges (FindPath's, pd_targets.h): NULL for the one
     * `goal`; else `goal` is unused and the plan ends at the first cell the
     * set accepts, keyed by pd_targets_h (see "Goals" above). */
    const pd_targets *targets;
    /* Moving holders aside (pd_yield.h). passable: spans held for good
     * (t1 = PD_RESERVE_FOREVER) by the agent in `slot` are ignored when it
     * returns nonzero - a plan through standing agents that will be moved.
     * park_ok: when set, the goal is any anchor (x, y) it accepts that the
     * agent can hold for good from its arrival (set goal = start and give
     * a zero heuristic): where a holder steps aside to. */
    int (*passable)(void *user, uint32_t slot);
    void *passable_user;
    int (*park_ok)(void *user, int32_t x, int32_t y);
    void *park_user;
    /* hold_ok: when set, a handover may only be an anchor it accepts (or
     * the start): the search goes on past the window's end until one is
     * reached, so PARTIAL's hold is never where the caller says it blocks
     * others (pd_yield.h: never mid-corridor). Asked only of a state the
     * agent could otherwise hold (its interval long enough), as it may
     * be dear. */
    int (*hold_ok)(void *user, int32_t x, int32_t y);
    void *hold_user;
    /* ignore_span: when set, another agent's span it returns nonzero for
     * is not there for this plan - pd_yield's crossing (pd_yield.h): plans
     * that reach R's way only after a while give way to a requester that
     * stood long, and are re-planned round it. */
    int (*ignore_span)(void *user, const pd_reserve_span *s);
    void *ignore_user;
} pd_sipp_params;

typedef struct pd_sipp_result {
    /* The plan, start first: owned by the context, valid until its next
     * plan. Waypoints are distinct consecutive anchors; t_leave_ms of the
     * last is reserved_until_ms. */
    const pd_waypoint *waypoints;
    size_t n_waypoints;
    int64_t reserved_until_ms;
    double cost;                   /* summed step cost of the waypoints */
    /* PD_START_BLOCKED by another agent: has_blocker and its id (a wall
     * under the start is PD_START_BLOCKED without one). */
    int has_blocker;
    uint64_t blocker;
    pd_reserve_limit limit;        /* behind PD_LIMIT_EXCEEDED */
    uint64_t expanded, generated;  /* the space-time search's */
    /* Wall time: the fast path's static search (its own metrics, as
     * FindPath reports a search) plus SIPP's when it ran; 0 for a request
     * refused before any search. */
    uint64_t micros;
    /* The reverse search's expansions (exact static times, when the caller
     * gives no heuristic); max_expansions bounds it on its own too. */
    uint64_t reverse_expanded;
    /* Exact static times found by probes instead (static shortest paths by
     * jump point search, see above): how many; their jump points expanded
     * count in reverse_expanded. */
    uint64_t probes;
    /* 1 when the fast path (pd_sipp_direct.h) answered: the static shortest
     * path was free; the searches above then did not run. */
    int direct;
    /* The plan's arrival at the goal as the search ranked it: the goal's
     * arrival (OK), or the handover's time plus the static rest (PARTIAL). */
    int64_t eta_ms;
} pd_sipp_result;

typedef struct pd_sipp_ctx pd_sipp_ctx;

pd_sipp_ctx *pd_sipp_ctx_create(void);
void pd_sipp_ctx_destroy(pd_sipp_ctx *ctx);
size_t pd_sipp_ctx_footprint(const pd_sipp_ctx *ctx);
/* As pd_search_ctx_trim; the last result's waypoints stay valid (the fast
 * path's too: pd_sipp_direct_trim keeps them). */
void pd_sipp_ctx_trim(pd_sipp_ctx *ctx, size_t keep_bytes);

/*
 * Plans without changing the table. Statuses, checked in this order:
 * PD_INVALID_ARGUMENT (unit 0 or above PD_UNIT_SIZE_MAX, speed out of
 * range, window, hold or t0 out of range, bad connectivity or at_goal),
 * PD_LIMIT_EXCEEDED (window past the table's max_window_ms; limit = WINDOW),
 * PD_OUT_OF_BOUNDS, PD_START_BLOCKED (a wall: the unit does not fit),
 * PD_GOAL_BLOCKED, PD_START_BLOCKED (another agent holds a cell of the start
 * footprint at t0: has_blocker), then PD_OK / PD_PARTIAL with a plan, or
 * PD_NO_PATH, PD_BUDGET_EXCEEDED, whatever the poll returned, PD_INTERNAL.
 * The agent's own reservations are ignored: the plan is meant to replace
 * them from t0 on.
 */
pd_status pd_sipp_plan(pd_sipp_ctx *ctx, const pd_reserve *table, const pd_grid *grid,
                       const pd_sipp_params *p, pd_sipp_result *r);

/*
 * ReservePath: pd_sipp_plan, then pd_reserve_replace of the agent's
 * reservations from t0 on with the plan (atomically: on any failure,
 * including PD_LIMIT_EXCEEDED for the table's limits, nothing changed).
 */
/* Writes a plan that pd_sipp_plan answered `st` for into the table (when
 * st is OK or PARTIAL): st, or the table's refusal with *out emptied and
 * its limit named. The second half of pd_sipp_reserve, for planners that
 * plan their own way (pd_yield's long plans). */
pd_status pd_sipp_commit(pd_reserve *table, const pd_sipp_params *p, pd_status st, pd_sipp_result *out);
pd_status pd_sipp_reserve(pd_sipp_ctx *ctx, pd_reserve *table, const pd_grid *grid,
                          const pd_sipp_params *p, pd_sipp_result *r);

#endif
