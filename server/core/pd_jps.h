/*
 * pd_jps.h - Jump Point Search (Harabor & Grastien, AAAI 2011): an optimal
 * search for 8- and 4-connected grids where every passable cell costs 1.
 *
 * JPS exists because on uniform octile grids most of A*'s work is spent on
 * symmetric paths: it expands only "jump points" (cells where an optimal path
 * may have to turn) and scans the straight and diagonal runs between them
 * without touching the open list. Straight scans read the grid's passability
 * bitsets 64 cells at a time (block-based JPS, Harabor & Grastien, ICAPS
 * 2014), and diagonal jump points are never pushed (intermediate pruning,
 * same paper), so the grid's bits must be current (pd_grid.h). It returns the same cost as pd_search_astar
 * and the same kind of path (every cell, start first, goal last).
 *
 * Rules: those of pd_search.h. 8-connected (Moving AI / GPPC): straight
 * step 1, diagonal step sqrt(2), a diagonal step needs both orthogonal
 * neighbours passable (no corner cutting), octile heuristic. 4-connected
 * (the canonical ordering of JPS4, pd_jps.c): step 1, Manhattan heuristic.
 * Ties on f go to the larger g.
 *
 * Where it applies (pd_jps_applicable): connectivity 8 (or 0, meaning 8) or
 * 4, grid->uniform_cost set, no per-request blockers, no window and no
 * partial_on_cutoff. Any other request gets PD_INVALID_ARGUMENT before
 * anything else is checked, so a caller can fall back to pd_search_astar,
 * which then gives the request its proper answer.
 *
 * Context: one pd_jps_ctx per thread, reused without clearing (node records
 * carry a search generation) and holding records only for the blocks of
 * cells its searches touched, exactly like pd_search_ctx but independent of
 * it.
 */
#ifndef PD_JPS_H
#define PD_JPS_H

#include <stddef.h>

#include "pd_grid.h"
#include "pd_search.h"
#include "pd_status.h"

typedef struct pd_jps_ctx pd_jps_ctx;

/* Returns NULL on allocation failure. */
pd_jps_ctx *pd_jps_ctx_create(void);
void pd_jps_ctx_destroy(pd_jps_ctx *ctx);

/* Bytes the context currently holds (grows with the cells its searches
 * record jump points in). */
size_t pd_jps_ctx_footprint(const pd_jps_ctx *ctx);
/* As pd_search_ctx_trim, for jump point search (pd_jps_extract likewise
 * answers PD_NO_PATH after a trim that freed anything). */
void pd_jps_ctx_trim(pd_jps_ctx *ctx, size_t keep_bytes);

/* 1 when pd_search_jps can answer this request, 0 when it would return
 * PD_INVALID_ARGUMENT for the reasons listed in the file comment (endpoints
 * are not looked at). */
int pd_jps_applicable(const pd_grid *grid, const pd_search_params *params);

/*
 * Finds a shortest path like pd_search_astar, with the same statuses checked
 * in the same order after the applicability check above:
 *  PD_INVALID_ARGUMENT (not applicable, or a connectivity other than 0/4/8),
 *  PD_OUT_OF_BOUNDS, PD_START_BLOCKED, PD_GOAL_BLOCKED, then PD_NO_PATH,
 *  PD_BUDGET_EXCEEDED, whatever the poll function returned,
 *  PD_BUFFER_TOO_SMALL (metrics->path_len says how many points; copy them
 *  with pd_jps_extract), PD_INTERNAL (allocation failure).
 * metrics->expanded counts jump points expanded (the goal not counted; with
 * intermediate pruning only straight jump points and the start), and
 * max_expansions bounds that count; the poll runs every
 * PD_SEARCH_POLL_INTERVAL expansions. metrics->generated counts jump points
 * pushed onto the open list, the start included.
 */
pd_status pd_search_jps(pd_jps_ctx *ctx, const pd_grid *grid, const pd_search_params *params,
                        pd_point *out, size_t out_cap, pd_search_metrics *metrics);

/*
 * pd_search_jps with other step costs: `straight` for a straight step and
 * `diagonal` for a diagonal one (8-connected), metrics->cost summed in
 * them. ReservePath's fast path (pd_sipp_direct.h) uses its durations in
 * milliseconds, ceil(1000 / speed) and ceil(sqrt(2) * 1000 / speed), to get
 * the path that is shortest in its own rounded times, which the octile
 * metric's need not be. The pruning rules (pd_jps.c) hold for any
 * straight < diagonal < 2 * straight; outside that (and for a straight
 * cost not in (0, 1e12]) PD_INVALID_ARGUMENT, as for an inapplicable
 * request. 4-connected searches use `straight` alone. Keys are f in
 * straight steps, as pd_search_jps's: distinct costs must differ by more
 * than 2^-24 straight steps (integers of milliseconds do).
 */
pd_status pd_search_jps_weighted(pd_jps_ctx *ctx, const pd_grid *grid, const pd_search_params *params,
                                 double straight, double diagonal, pd_point *out, size_t out_cap,
                                 pd_search_metrics *metrics);

/* Copies the full path found by the last successful pd_search_jps on ctx.
 * Returns PD_OK, PD_BUFFER_TOO_SMALL, or PD_NO_PATH when it found none. */
pd_status pd_jps_extract(const pd_jps_ctx *ctx, pd_point *out, size_t out_cap, size_t *path_len);

/* The same path as pd_jps_extract would copy, reduced as pd_path_corners
 * reduces it (the start, every cell where the step's direction changes, the
 * goal), taken from the jump points without writing every cell: the corners
 * waypoint style's answer. out_cap must hold the full path's cell count
 * (metrics->path_len of the search); *n_out gets the points written.
 * Returns PD_OK, PD_BUFFER_TOO_SMALL or PD_NO_PATH. */
pd_status pd_jps_extract_corners(const pd_jps_ctx *ctx, pd_point *out, size_t out_cap, size_t *n_out);

/* Sample queries pd_jps_pick times with both searches: enough that one
 * unlucky pair does not decide, few enough to keep a scene load short. */
#define PD_JPS_PICK_PAIRS 16
/* Expansion budget of each A* sample: bounds a pick on a huge open map,
 * where A* is the slow one anyway (a cut-off run still counts its time). */
#define PD_JPS_PICK_MAX_EXPANSIONS 100000

typedef struct pd_jps_pick_result {
    int jps;              /* 1: JPS was faster on the samples */
    unsigned pairs;       /* sample queries timed (0: no two open cells) */
    uint64_t jps_ns;      /* their summed time, warm, per search */
    uint64_t astar_ns;
} pd_jps_pick_result;

/*
 * Measures which search answers g's queries faster: PD_JPS_PICK_PAIRS pairs
 * of open cells drawn with seed (deterministic for a grid and seed) are run
 * once untimed by each search (their contexts fault in memory, as a
 * worker's have), then timed. Returns 0, or -1 when a context cannot be
 * made. A grid jump point search cannot serve (weighted) or with fewer than
 * two open cells gets jps = 0. The timing makes the result depend on the
 * machine's load; both searches run interleaved, pair by pair, so a slow
 * spell hits both.
 */
int pd_jps_pick(const pd_grid *g, uint64_t seed, pd_jps_pick_result *out);

#endif
