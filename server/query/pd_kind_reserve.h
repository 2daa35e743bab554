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

#include "pd_pool.h"
#include "pd_query.h"
#include "pd_request.h"
#include "pd_reserve.h"
#include "pd_scene.h"
#include "pd_watch.h"

/* GetReservations answers at most this many entries (about 40 bytes each
 * on the wire: well inside one frame); max_entries 0 means this many. */
#define PD_RESERVE_MAX_LIST 16384u

/* An agent a ReservePath moved aside (pd_yield.h): its plan from t0_ms on,
 * as ReservePathResult.displaced carries it. */
typedef struct pd_reserve_displaced {
    uint64_t agent;
    int64_t t0_ms;
    int64_t reserved_until_ms;        /* PD_RESERVE_FOREVER: no end */
    pd_waypoint *waypoints;           /* malloc'd */
    size_t n_waypoints;
} pd_reserve_displaced;

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
    uint64_t incarnation;             /* the scene's, for the AGENTS_DISPLACED event */
    pd_reserve_displaced *displaced;  /* malloc'd; in the order they were moved */
    size_t n_displaced;
    uint64_t *expired;                /* malloc'd, ascending: the TTL released them meanwhile */
    size_t n_expired;
    /* ReleaseAgent */
    int released;
    uint64_t *released_ids;           /* all: malloc'd, ascending (AGENTS_RELEASED) */
    size_t n_released;                /* agents released (all: may exceed the ids kept
                                         when out of memory) */
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
/* What the thread's yield context may keep after a request: its plans'
 * buffers, not a joint search's (pd_yield_ctx_trim; several MB, and
 * seldom needed again soon). */
#define PD_KIND_RESERVE_YIELD_KEEP_BYTES (1u << 20)
struct pd_sipp_ctx *pd_kind_reserve_sipp_ctx(void);

/* The maintenance of an idle scene's table (pd_reservations_sweep), posted
 * by the server's timer into the scene's lane as a pool task of its own
 * (not a pd_job: nobody waits for an answer). */
typedef struct pd_reserve_sweep {
    pd_task task;                     /* first: the pool hands this back */
    pd_registry *registry;
    char scene[PD_CONF_MAX_NAME];
    uint64_t listed_ns;               /* when the timer found it idle */
    size_t released;                  /* agents the sweep released */
    uint64_t *agents;                 /* their ids, ascending (NULL: none, or no memory) */
    uint64_t incarnation, version;    /* the scene swept, as served then */
} pd_reserve_sweep;

/* A sweep of scene `name` in its lane (task.run is pd_kind_reserve_sweep_run),
 * listed idle at listed_ns; NULL when out of memory. Free with
 * pd_kind_reserve_sweep_free. */
pd_reserve_sweep *pd_kind_reserve_sweep_new(pd_registry *registry, const char *name, uint64_t listed_ns);
pd_status pd_kind_reserve_sweep_run(pd_task *task, void *thread_ctx);
void pd_kind_reserve_sweep_free(pd_reserve_sweep *sw);
/* The sweep's AGENTS_EXPIRED event number `part` (from 0): 0, or -1 past
 * the last (none when it released no agent it could list). */
int pd_kind_reserve_sweep_event(const pd_reserve_sweep *sw, size_t part, pd_watch_event *ev);

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
