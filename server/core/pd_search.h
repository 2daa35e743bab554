/*
 * pd_search.h - A* on a pd_grid with a reusable per-thread context.
 *
 * Rules (the Moving AI / GPPC rule set, so benchmark files check optimality):
 *  - 8-connected: straight step length 1, diagonal sqrt(2); a diagonal step
 *    needs both orthogonal neighbours passable (no corner cutting); octile
 *    heuristic.
 *  - 4-connected: unit steps, Manhattan heuristic.
 *  - The cost of a step is its length times the cost byte of the cell entered,
 *    so with costs >= 1 both heuristics stay admissible and consistent.
 *  - Among equal f, the node generated last is expanded first, so a run of
 *    successors toward the goal is followed before the plateau around it.
 *
 * Context: one pd_search_ctx per thread, reused without clearing: every node
 * record carries the search generation that last wrote it. Records are
 * allocated in blocks of 256 cells when a search first touches them
 * (pd_nodepool.h), so a context holds memory for the area its searches have
 * covered, not for the map; pd_search_ctx_trim gives memory back.
 *
 * Output: the caller owns the path buffer (pointer + capacity). If the path
 * does not fit, the search returns PD_BUFFER_TOO_SMALL with metrics->path_len
 * set to the number needed; pd_search_extract can then copy it out of the same
 * context, without searching again, until the next search on that context.
 */
#ifndef PD_SEARCH_H
#define PD_SEARCH_H

#include <stddef.h>
#include <stdint.h>

#include "pd_grid.h"
#include "pd_status.h"

typedef struct pd_point {
    int32_t x;
    int32_t y;
} pd_point;

typedef enum pd_connectivity {
    PD_CONNECT_8 = 8,
    PD_CONNECT_4 = 4,
} pd_connectivity;

/* Called every PD_SEARCH_POLL_INTERVAL expansions; returning non-zero stops the
 * search with the status it returns (e.g. PD_DEADLINE_EXCEEDED, PD_CANCELLED).
 * It lets the worker layer enforce deadlines and cancels without core/ knowing
 * about clocks or threads. */
typedef pd_status (*pd_search_poll_fn)(void *user);
#define PD_SEARCH_POLL_INTERVAL 1024

typedef struct pd_search_params {
    pd_point start;
    pd_point goal;
    pd_connectivity connectivity;  /* 0 means PD_CONNECT_8 */
    uint64_t max_expansions;       /* 0 means no budget */
    pd_search_poll_fn poll;        /* may be NULL */
    void *poll_user;

    /* Cells treated as blocked for this search only (e.g. other agents),
     * without touching the shared grid; also for the corner-cutting rule.
     * Cells outside the grid are ignored. A blocker on the start or goal
     * gives PD_START_BLOCKED / PD_GOAL_BLOCKED. */
    const pd_point *blockers;
    size_t n_blockers;

    /* When set, the search never enters a cell outside [window_min ..
     * window_max] (inclusive; clipped to the grid): bounded re-pathing.
     * A start outside it is PD_INVALID_ARGUMENT; a goal outside it is
     * PD_NO_PATH. */
    int has_window;
    pd_point window_min, window_max;

    /* When the budget or the poll's deadline stops the search, return the
     * path to the expanded node closest to the goal (lowest heuristic; ties
     * to the lower g) with PD_PARTIAL instead of failing; metrics->cutoff
     * then says why. Cancels still end with PD_CANCELLED. */
    int partial_on_cutoff;

    /* When set, goal is ignored: the search ends at the first cell that
     * qualifies for any of these goals, within their range and, if asked,
     * in line of sight (pd_targets.h); metrics->target says which goal.
     * Goals must lie inside the grid (else PD_OUT_OF_BOUNDS); a goal may be
     * blocked when range > 0, and with range 0 PD_GOAL_BLOCKED means every
     * goal is. Goals outside the window or under blockers simply cannot be
     * reached. A* only: jump point search (pd_jps.h) does not read this
     * field, so callers hand goal sets to pd_search_astar. */
    const struct pd_targets *targets;
} pd_search_params;

typedef struct pd_search_metrics {
    double cost;            /* path cost; 0 when no path */
    uint64_t expanded;      /* nodes whose successors were generated (the goal
                               is not counted); max_expansions bounds this */
    uint64_t generated;     /* nodes pushed onto the open list (incl. start) */
    uint64_t micros;        /* wall time of search + extraction, rounded up (>= 1) */
    size_t path_len;        /* waypoints in the full path, start and goal included */
    pd_point end;           /* last point of the path: the goal, or the best node of a PARTIAL */
    pd_status cutoff;       /* PD_BUDGET_EXCEEDED / PD_DEADLINE_EXCEEDED behind a PARTIAL, else PD_OK */
    uint32_t target;        /* with params->targets: the index of the goal the path
                               reached (the lowest when the end qualifies for several) */
} pd_search_metrics;

typedef struct pd_search_ctx pd_search_ctx;

pd_search_ctx *pd_search_ctx_create(void);
void pd_search_ctx_destroy(pd_search_ctx *ctx);

/* Bytes the context currently holds: it grows with the cells its searches
 * touch and stops growing once they cover nothing new (tests use this to
 * prove reuse). */
size_t pd_search_ctx_footprint(const pd_search_ctx *ctx);

/* Gives memory back until the footprint is at most keep_bytes, or as close
 * as it gets (the context itself and, for a map too large for keep_bytes,
 * nothing more). A no-op when already within it. After a trim that freed
 * anything, pd_search_extract answers PD_NO_PATH until the next search. */
void pd_search_ctx_trim(pd_search_ctx *ctx, size_t keep_bytes);

/*
 * Finds a shortest path from params->start to params->goal.
 * Returns PD_OK with the path (every cell, start first, goal last) in
 * out[0..metrics->path_len), PD_PARTIAL (see partial_on_cutoff), or:
 *  PD_INVALID_ARGUMENT (bad connectivity), PD_OUT_OF_BOUNDS, PD_START_BLOCKED,
 *  PD_GOAL_BLOCKED (checked in that order before searching), PD_NO_PATH,
 *  PD_BUDGET_EXCEEDED,
 *  whatever the poll function returned, PD_BUFFER_TOO_SMALL, PD_INTERNAL
 *  (allocation failure).
 * out may be NULL when out_cap is 0 (cost-only queries). PD_BUFFER_TOO_SMALL
 * is also returned for a partial path that does not fit: metrics->cutoff
 * then says it was PARTIAL.
 */
pd_status pd_search_astar(pd_search_ctx *ctx, const pd_grid *grid,
                          const pd_search_params *params,
                          pd_point *out, size_t out_cap,
                          pd_search_metrics *metrics);

/* Copies the path found by the last successful search on ctx. Returns PD_OK,
 * PD_BUFFER_TOO_SMALL, or PD_NO_PATH when the last search found none. */
pd_status pd_search_extract(const pd_search_ctx *ctx, pd_point *out, size_t out_cap,
                            size_t *path_len);

#endif
