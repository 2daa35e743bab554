/*
 * pd_kind_reserve.h - the reservation family's kinds (issue 34):
 * ReservePath, ReleaseAgent and GetReservations, each an ordered task in
 * its scene's lane against the scene's reservation table
 * (pd_scene_reserve.h). What a job of them holds (job->ext) is declared
 * here for the codec, which encodes the answers.
 */
#ifndef PD_KIND_RESERVE_H
#define PD_KIND_RESERVE_H

#include <stddef.h>
#include <stdint.h>

#include "pd_query.h"
#include "pd_request.h"
#include "pd_reserve.h"
#include "pd_scene.h"

/* GetReservations answers at most this many entries (about 40 bytes each
 * on the wire: well inside one frame); max_entries 0 means this many. */
#define PD_RESERVE_MAX_LIST 16384u

typedef struct pd_reserve_job {
    pd_reserve_req req;
    pd_registry *registry;
    uint64_t default_max_expansions;
    pd_status status;
    char message[PD_QUERY_MESSAGE_MAX];
    uint64_t scene_version;
    /* ReservePath */
    pd_waypoint *waypoints;           /* malloc'd */
    size_t n_waypoints;
    int64_t reserved_until_ms;        /* PD_RESERVE_FOREVER: no end */
    double cost;
    uint64_t expanded, micros;
    int has_blocker;
    uint64_t blocker;
    int was_cut;
    /* ReleaseAgent */
    int released;
    /* GetReservations */
    pd_reserve_entry *entries;        /* malloc'd */
    size_t n_entries;
    uint64_t matching;
    pd_reserve_stats stats;
} pd_reserve_job;

/* The calling worker thread's planner context, made at its first use and
 * freed when the thread ends; NULL when out of memory. Trim it after a
 * plan (pd_sipp_ctx_trim, PD_KIND_RESERVE_SIPP_KEEP_BYTES). */
#define PD_KIND_RESERVE_SIPP_KEEP_BYTES (4u << 20)
struct pd_sipp_ctx *pd_kind_reserve_sipp_ctx(void);

/* 1 when the unit's static components put start and goal apart (both open
 * and in bounds): no plan can join them, at any time. */
int pd_kind_reserve_apart(const pd_scene_unit *u, pd_point start, pd_point goal);

/* FindPath with avoid_reserved (q->avoid_reserved), on a worker in the
 * scene's lane: SIPP (pd_sipp_plan) from q->t0_ms at q->speed /
 * cell_size cells per second against the scene's table, which it does not
 * change, to the goal (VANISH: reaching it is enough). `arrived` is the
 * snapshot FindPath was checked against; the plan uses the scene current
 * in the lane when it is the same scene (an update queued before it has
 * applied), else `arrived`. The answer is FindPath's: every cell with its
 * arrival time in seconds, a wait as the cell twice (arrival, then
 * departure); PARTIAL with goal_used when the table's longest window
 * (limits.max_reservation_window_ms) ends before the goal. Returns out's
 * status. */
pd_status pd_kind_reserve_find_path(pd_registry *registry, pd_scene *arrived, const pd_path_query *q,
                                    const pd_query_control *ctl, pd_path_result *out);

/* The config's name of a reservation limit ("limits.max_agents_per_scene"). */
const char *pd_kind_reserve_limit_key(pd_reserve_limit l);

#endif
