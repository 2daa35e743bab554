/*
 * pd_pool.h - the worker pool: N threads, each owning one reusable search
 * context, a bounded job queue in and a completion queue out.
 *
 * No libuv here. The loop thread submits jobs; a worker runs the search and
 * pushes the finished job onto the completion queue, then calls the wake
 * function (the net layer passes one that calls uv_async_send). Wake-ups may
 * coalesce, so whoever is woken must take the whole completion list.
 *
 * Jobs carry a connection id, never a pointer to a connection: the net layer
 * drops results whose connection has gone, and pd_pool_cancel_conn marks a
 * closed connection's queued jobs so no worker spends time on them.
 *
 * Three kinds of job: a path search (the request pipeline described at the
 * top of pd_pool.c), a cross-scene route (pd_world_plan, then one path
 * search per leg) and a live obstacle update (pd_registry_update, then the
 * world's route tables for that scene), which copies and repairs a scene and
 * so belongs on a worker, never on the loop thread. Updates run one at a
 * time, in the order they were submitted, so two updates to one scene can
 * never overtake each other.
 *
 * Lifetime: the submitter allocates a job with pd_job_new, fills the request
 * half and submits it; ownership passes to the pool on PD_OK and comes back
 * with pd_pool_take_completed. pd_job_free releases the scene and world
 * references and every array the job owns.
 *
 * Threads: submit, take_completed, cancel, cancel_conn, reserve and
 * get_stats may be called from any thread (normally the loop thread); destroy
 * from the thread that created the pool, once nothing else calls into it.
 */
#ifndef PD_POOL_H
#define PD_POOL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "pd_scene.h"
#include "pd_search.h"
#include "pd_world.h"

typedef enum pd_waypoint_style {
    PD_STYLE_CELLS = 0,     /* every cell */
    PD_STYLE_CORNERS = 1,   /* start, direction changes, goal */
    PD_STYLE_SMOOTH = 2,    /* string-pulled on the unit grid (pd_path_smooth) */
} pd_waypoint_style;

/* What to do when start and goal are not connected (see the pipeline at the
 * top of pd_pool.c). */
typedef enum pd_goal_mode {
    PD_GOAL_EXACT = 0,      /* NO_PATH, decided in O(1) from component labels */
    PD_GOAL_NEAREST = 1,    /* the reachable cell nearest the goal (PARTIAL) */
    PD_GOAL_LINE = 2,       /* the first reachable cell on the line goal -> start (PARTIAL) */
} pd_goal_mode;

typedef enum pd_job_kind {
    PD_JOB_FIND_PATH = 0,   /* a path search on job->scene */
    PD_JOB_UPDATE_CELLS = 1,/* pd_registry_update on job->registry */
    PD_JOB_FIND_ROUTE = 2,  /* a cross-scene route on job->world */
} pd_job_kind;

/* One leg of a finished route: everything the encoder needs, so the worker
 * can release the world as soon as the legs are searched. */
typedef struct pd_job_leg {
    pd_scene *scene;              /* retained snapshot the leg was searched on;
                                     released by pd_job_free */
    pd_point *path;               /* malloc'd, path_len anchor cells in the requested style */
    size_t path_len;
    double *times;                /* malloc'd arrival times when speed > 0; else NULL */
    double cost;                  /* in-scene path cost of the leg */
    int has_portal;               /* 0 on the last leg */
    char portal[PD_CONF_MAX_NAME];/* the portal the leg ends at */
    pd_point portal_exit;         /* equals the leg's last cell */
    char next_scene[PD_CONF_MAX_NAME];
    pd_point portal_entry;        /* the next leg's first cell */
    double portal_cost;
} pd_job_leg;

typedef struct pd_job {
    /* Request half: written by the submitter before pd_pool_submit. */
    pd_job_kind kind;
    uint64_t conn_id;
    uint64_t request_id;
    uint64_t deadline_ns;         /* pd_pool_now_ns() clock; 0 = none */
    uint64_t submitted_ns;        /* pd_pool_submit sets it when left 0 */
    atomic_int cancelled;         /* set by pd_pool_cancel*; read by the worker */

    /* PD_JOB_FIND_PATH. start/goal are anchor cells on the unit grid of
     * unit_size (unit 1: plain cells). */
    pd_scene *scene;              /* retained reference; released by pd_job_free */
    uint32_t unit_size;           /* 0 means 1 (also for routes) */
    pd_search_params params;      /* start, goal, connectivity, max_expansions,
                                     window and partial_on_cutoff are used; poll,
                                     poll_user, blockers and n_blockers are ignored:
                                     the worker installs its own poll and `avoid` */
    pd_waypoint_style style;
    pd_goal_mode goal_mode;
    int snap;                     /* blocked start/goal: use the nearest open cell */
    double speed;                 /* world units per second; > 0 adds `times` */
    double start_time;            /* seconds at the first waypoint */
    pd_point *avoid;              /* malloc'd, owned by the job (pd_job_free frees it):
                                     cells blocked for this request only */
    size_t n_avoid;

    /* PD_JOB_UPDATE_CELLS. The registry must outlive the pool's work on the
     * job; update.cells, when used, points at update_cells. */
    pd_registry *registry;
    char update_scene[PD_CONF_MAX_NAME];
    pd_scene_update update;
    pd_point *update_cells;       /* malloc'd, owned by the job */
    pd_world_store *world_store;  /* may be NULL; else, after a successful update, the
                                     store's world gets the scene's new route tables
                                     (pd_world_store_refresh); must outlive the job */

    /* PD_JOB_FIND_ROUTE. params.start / params.goal are anchor cells on the
     * unit grids of route_from / route_to; params.max_expansions bounds each
     * leg's search; unit_size, style, goal_mode, speed and start_time are
     * used as for a path (goal_mode's fallbacks apply in route_to; snap,
     * avoid, window and connectivity do not: route tables are 8-connected). */
    pd_world *world;              /* retained; the worker releases it once the legs are
                                     searched, pd_job_free if it is still held */
    char route_from[PD_CONF_MAX_NAME];
    char route_to[PD_CONF_MAX_NAME];

    /* Result half: written by the worker. */
    pd_status status;
    pd_search_metrics metrics;    /* metrics.cutoff says why a PARTIAL path was cut off */
    pd_point *path;               /* malloc'd by the worker, exactly path_len entries in
                                     the requested style; NULL unless PD_OK/PD_PARTIAL */
    size_t path_len;
    double *times;                /* malloc'd, path_len arrival times in seconds when
                                     speed > 0 and there is a path; else NULL */
    int start_substituted;        /* 1: the start was snapped to start_used */
    pd_point start_used;
    int goal_substituted;         /* 1: the path ends at goal_used, not at the goal
                                     (snapped, NEAREST/LINE, or cut off) */
    pd_point goal_used;
    pd_scene_update_result update_result;  /* PD_JOB_UPDATE_CELLS on PD_OK */
    pd_status world_refresh;      /* PD_JOB_UPDATE_CELLS with a world_store: how the
                                     route-table refresh went (PD_OK when nothing had
                                     to change); the update itself stands either way */
    char world_refresh_error[160];/* the reason when world_refresh != PD_OK */
    /* PD_JOB_FIND_ROUTE, on PD_OK / PD_PARTIAL: the legs in travel order.
     * metrics.cost is the total (legs + portals), metrics.expanded counts the
     * planner's and the legs' searches, metrics.micros the whole job. A
     * GOAL_NEAREST/LINE substitute sets goal_substituted / goal_used. */
    pd_job_leg *legs;             /* malloc'd, n_legs entries */
    size_t n_legs;
    int route_pinned;             /* 1: a pinned route from the config was followed */
    uint64_t finished_ns;

    struct pd_job *next;          /* queue link, owned by whoever holds the job */
} pd_job;

pd_job *pd_job_new(void);         /* zeroed; NULL on allocation failure */
/* Releases the scene and world references and frees path, times, avoid,
 * update_cells and the route legs. NULL is a no-op. */
void pd_job_free(pd_job *job);

/* CLOCK_MONOTONIC in nanoseconds; the clock deadlines are measured on. */
uint64_t pd_pool_now_ns(void);

typedef void (*pd_pool_wake_fn)(void *user);

typedef struct pd_pool_stats {
    uint32_t threads;
    uint64_t queue_depth;         /* jobs waiting for a worker */
    uint64_t running;             /* jobs a worker is on right now */
    uint64_t jobs_done;
    uint64_t paths_found;         /* done with PD_OK or PD_PARTIAL */
    uint64_t expansions;
    uint64_t busy_ns;             /* summed over threads */
    uint64_t reserved_cells;      /* padded cells, (width + 2) * (height + 2), that
                                     every worker's contexts have been grown to by
                                     pd_pool_reserve: the smallest over the workers,
                                     counting the jump point context too while jump
                                     points are on. 0 until all have done so; stays
                                     below the request for a worker whose allocation
                                     failed (its searches then grow lazily) */
} pd_pool_stats;

typedef struct pd_pool pd_pool;

/* threads >= 1, queue_capacity >= 1 (NULL otherwise, or when a thread cannot
 * be started). wake may be NULL; otherwise a worker calls it once after each
 * job it pushes onto the completion list, outside every pool lock. Each
 * worker creates its search context on its own thread and reuses it. */
pd_pool *pd_pool_create(uint32_t threads, uint32_t queue_capacity,
                        pd_pool_wake_fn wake, void *wake_user);

/* PD_OK (the pool owns the job now) or PD_OVERLOADED (queue full; the caller
 * still owns the job). PD_INVALID_ARGUMENT when p or job is NULL, a path job
 * has no scene or grid, a route job no world, or an update job has no
 * registry (the caller still owns it). Never blocks.
 *
 * A job found cancelled or past its deadline when a worker takes it
 * completes at once (PD_CANCELLED / PD_DEADLINE_EXCEEDED) without searching;
 * a running search checks both every PD_SEARCH_POLL_INTERVAL expansions. */
pd_status pd_pool_submit(pd_pool *p, pd_job *job);

/* Takes every completed job, oldest first, as a list linked by ->next. */
pd_job *pd_pool_take_completed(pd_pool *p);

/* Marks one queued or running job of that connection as cancelled: it
 * completes with PD_CANCELLED. Returns 1 if such a job was found, 0 if not
 * (including a job that has already completed: its result stands). */
int pd_pool_cancel(pd_pool *p, uint64_t conn_id, uint64_t request_id);

/* Marks every queued or running job of that connection as cancelled. */
void pd_pool_cancel_conn(pd_pool *p, uint64_t conn_id);

/* While paused, workers start no new search: queued jobs wait (and still
 * count against the queue capacity), except cancelled ones, which complete
 * with PD_CANCELLED as usual. Running searches are not interrupted. Lets an
 * operator or a test hold work back deterministically. */
void pd_pool_set_paused(pd_pool *p, int paused);

/* Lets workers answer with jump point search where it applies (see
 * pd_jps_applicable); off by default. Thread-safe; affects jobs that start
 * after the call. Turning it on also makes each worker grow its new jump
 * point context to the size pd_pool_reserve asked for, as below. */
void pd_pool_set_jump_points(pd_pool *p, int on);

/* Prepares the workers for grids up to width x height (the largest scene,
 * at start-up and after a reload), so that no request pays for growing a
 * search context: on a VM that costs about 10 us per 4 KiB page, ~0.2 s for
 * a 2000^2 grid, all of it before the search's first deadline poll. The pool
 * keeps the larger, by padded area, of this and every earlier request
 * (contexts never shrink). Returns at once: each worker grows its A*
 * context, and its jump point context while jump points are on, the next
 * time it looks for work - before it takes another job, paused or not - and
 * never while holding a pool lock. A job queued meanwhile waits for that,
 * and its deadline is checked when a worker takes it. If an allocation
 * fails, the worker goes on as before (its searches grow the context when
 * they need it, PD_INTERNAL if that fails too) and reserved_cells in
 * pd_pool_stats stays below the request. Sides outside 1..PD_GRID_MAX_SIDE
 * and a NULL pool are ignored. */
void pd_pool_reserve(pd_pool *p, int32_t width, int32_t height);

void pd_pool_get_stats(pd_pool *p, pd_pool_stats *out);

/* Stops the threads: a running search is stopped at its next poll (nobody is
 * left to read its result), queued jobs complete as PD_CANCELLED, and every
 * job still on the completion list is freed with pd_job_free. wake is not
 * called for the jobs destroy drains itself. NULL is a no-op. */
void pd_pool_destroy(pd_pool *p);

#endif
