/*
 * pd_pool.c - the worker pool (see pd_pool.h): threads, job queue,
 * completion queue, cancels, deadlines, per-thread statistics, and the
 * request pipeline a path job runs through.
 *
 * Locking: one pool mutex guards the job queue, every worker's `current`
 * pointer, every worker's statistics and the "an update is running" flag; a
 * second mutex guards the completion list so the loop thread taking results
 * never waits for a submit or a cancel. A worker clears `current` under the
 * pool mutex before it pushes the job onto the completion list: from that
 * moment the loop thread may free the job, so cancel must no longer be able
 * to reach it.
 *
 * Each worker creates its search context on its own thread (its memory is
 * first touched there) and keeps it, and a growing path buffer, for every
 * job it runs: after warm-up a job allocates only its exact-size result.
 * pd_pool_reserve does the warm-up ahead of time: the pool records the
 * largest grid asked for, and a worker looking for work grows its contexts
 * to it first (unlocked, since that takes ~0.2 s on a 2000^2 grid), so no
 * job's search spends its deadline faulting in pages.
 *
 * Request pipeline of a path job, in this order:
 *  1. Unit grid: pd_scene_unit_for(scene, unit_size) gives the grid the unit
 *     searches (unit 1: the scene grid) and its component labels. start and
 *     goal are anchor cells on it.
 *  2. Blocked start or goal: with snap, pd_fallback_nearest (any component)
 *     substitutes the nearest open cell and the answer becomes PARTIAL with
 *     start_used / goal_used; without it, START_BLOCKED / GOAL_BLOCKED -
 *     except a blocked goal under goal_mode NEAREST or LINE, which step 3
 *     treats as unreachable (a click on a wall still gets the nearest spot).
 *  3. Components: when start and goal carry different labels, goal_mode
 *     EXACT answers NO_PATH without searching (0 expansions); NEAREST takes
 *     the cell of the start's component nearest the goal as asked, LINE the
 *     first such cell on the line from that goal back to the start (PARTIAL,
 *     goal_used).
 *  4. Search: A* with the request's avoid cells as blockers, its window and
 *     partial_on_cutoff. Labels ignore avoid and window, so this may still
 *     end in NO_PATH, which is then reported as it is. A path cut off by the
 *     budget or the deadline ends at goal_used, with metrics.cutoff set.
 *  5. Style: every cell, corners (pd_path_corners) or smoothed
 *     (pd_path_smooth on the unit grid, with the avoid cells blocked too).
 *  6. Timing when speed > 0: pd_path_times on the unit grid with
 *     speed / cell_size cells per second, over the final waypoints.
 * A scene built without component labels (hand-made scenes in tests) skips
 * step 3: the search itself then finds out that the goal is unreachable.
 *
 * A route job plans on the world it holds (pd_world_plan with this thread's
 * search context). On NO_PATH or GOAL_BLOCKED under goal_mode NEAREST or
 * LINE it substitutes the goal in the last scene among the components
 * pd_world_arrivals names (NEAREST: per component the cell nearest the goal;
 * LINE: per arrival cell the first cell of its component on the line from
 * the goal back to it; the candidate nearest the goal wins, the first on a
 * tie) and plans again (PARTIAL, goal_used). Each leg then runs steps 4-6
 * above on its scene's snapshot from the world: A* from the leg's first to
 * its last cell (8-connected, the request's budget, no avoid or window),
 * style, and timing. Times run on across legs: a portal's cost counts as
 * that many cells of travel at the departing scene's speed, so crossing it
 * takes portal_cost * cell_size / speed seconds.
 */
#include "pd_pool.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pd_fallback.h"
#include "pd_jps.h"
#include "pd_path.h"
#include "pd_smooth.h"

/* Points the per-thread path buffer starts with (8 KiB): enough for most
 * paths on game maps, so the buffer seldom grows; it grows on demand to the
 * longest path the thread has seen. */
#define PD_POOL_INITIAL_PATH_CAP 1024

typedef struct pd__worker_stats {
    uint64_t jobs_done;
    uint64_t paths_found;
    uint64_t expansions;
    uint64_t busy_ns;
} pd__worker_stats;

typedef struct pd__worker {
    pd_pool *pool;
    pthread_t thread;
    pd_job *current;          /* guarded by pool->lock; NULL when idle */
    pd__worker_stats stats;   /* guarded by pool->lock */
    size_t reserved_astar;    /* guarded by pool->lock: padded cells pd_pool_reserve */
    size_t reserved_jps;      /* has grown the A* / jump point context to */
} pd__worker;

struct pd_pool {
    pthread_mutex_t lock;     /* job queue, workers' current and stats */
    pthread_cond_t work_ready;
    pd_job *queue_head, *queue_tail;
    uint32_t queue_len;
    uint32_t queue_capacity;
    atomic_int stopping;      /* written under lock, also read lock-free by poll */
    int paused;               /* guarded by lock; see pd_pool_set_paused */
    atomic_int jump_points;   /* see pd_pool_set_jump_points */
    int update_running;       /* guarded by lock: updates run one at a time, in order */
    int32_t reserve_width;    /* guarded by lock: the grid pd_pool_reserve asked for, */
    int32_t reserve_height;   /* the largest by padded area; */
    size_t reserve_cells;     /* its padded cells, 0 = none asked for */

    pthread_mutex_t done_lock;
    pd_job *done_head, *done_tail;

    pd_pool_wake_fn wake;
    void *wake_user;

    uint32_t n_workers;
    pd__worker *workers;
};

/* What the search's poll callback needs to decide whether to stop. */
typedef struct pd__poll_ctx {
    const pd_pool *pool;
    pd_job *job;
} pd__poll_ctx;

pd_job *pd_job_new(void)
{
    pd_job *job = calloc(1, sizeof *job);
    if (job)
        atomic_init(&job->cancelled, 0);
    return job;
}

void pd_job_free(pd_job *job)
{
    if (!job)
        return;
    pd_scene_release(job->scene);
    free(job->path);
    free(job->times);
    free(job->avoid);
    free(job->update_cells);
    pd_world_release(job->world);
    for (size_t i = 0; i < job->n_legs; i++) {
        pd_scene_release(job->legs[i].scene);
        free(job->legs[i].path);
        free(job->legs[i].times);
    }
    free(job->legs);
    free(job);
}

uint64_t pd_pool_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Why a job should stop (or not start): PD_OK means carry on. Destroying
 * the pool counts as a cancel, since nobody is left to read the result. */
static pd_status pd__job_interrupt(const pd_pool *p, pd_job *job)
{
    if (atomic_load_explicit(&job->cancelled, memory_order_relaxed) ||
        atomic_load_explicit(&p->stopping, memory_order_relaxed))
        return PD_CANCELLED;
    if (job->deadline_ns != 0 && pd_pool_now_ns() >= job->deadline_ns)
        return PD_DEADLINE_EXCEEDED;
    return PD_OK;
}

static pd_status pd__poll(void *user)
{
    const pd__poll_ctx *pc = user;
    return pd__job_interrupt(pc->pool, pc->job);
}

/* The per-thread scratch a worker keeps across jobs. */
typedef struct pd__scratch {
    pd_search_ctx *ctx;
    pd_jps_ctx *jps;          /* created on first use */
    pd_point *buf;
    size_t cap;
    /* Padded cells of the largest pd_pool_reserve request this thread has
     * tried to grow each context to, whether or not the allocation worked:
     * a failure is left to the searches' own lazy growth, not retried in a
     * loop. */
    size_t tried_astar;
    size_t tried_jps;
} pd__scratch;

static int pd__scratch_reserve(pd__scratch *s, size_t need)
{
    if (need <= s->cap)
        return 0;
    size_t cap = s->cap ? s->cap : PD_POOL_INITIAL_PATH_CAP;
    while (cap < need)
        cap *= 2;
    pd_point *buf = realloc(s->buf, cap * sizeof *buf);
    if (!buf)
        return -1;
    s->buf = buf;
    s->cap = cap;
    return 0;
}

/* Searches into the thread's buffer, growing it and re-extracting (never
 * re-searching) when the path does not fit. Returns the search's status with
 * the path in s->buf[0..*len).
 *
 * Jump point search answers whatever it can: uniform-cost 8-connected grids
 * without avoid cells, window or partial_on_cutoff. It finds the same optimal
 * cost as A* an order of magnitude faster on open maps; everything else goes
 * to A*. metrics.expanded then counts jump points. */
static pd_status pd__search(const pd_pool *p, pd__scratch *s, pd_job *job, const pd_grid *grid,
                           const pd_search_params *base, size_t *len)
{
    if (!s->ctx)
        s->ctx = pd_search_ctx_create();
    if (!s->ctx || pd__scratch_reserve(s, PD_POOL_INITIAL_PATH_CAP) != 0)
        return PD_INTERNAL;

    pd__poll_ctx pc = {p, job};
    pd_search_params params = *base;
    params.poll = pd__poll;
    params.poll_user = &pc;
    params.blockers = job->avoid;
    params.n_blockers = job->avoid ? job->n_avoid : 0;

    const int jps = atomic_load(&p->jump_points) && pd_jps_applicable(grid, &params) &&
                    (s->jps || (s->jps = pd_jps_ctx_create()));
    pd_status st = jps ? pd_search_jps(s->jps, grid, &params, s->buf, s->cap, &job->metrics)
                       : pd_search_astar(s->ctx, grid, &params, s->buf, s->cap, &job->metrics);
    *len = job->metrics.path_len;
    if (st == PD_BUFFER_TOO_SMALL) {
        if (pd__scratch_reserve(s, *len) != 0)
            return PD_INTERNAL;
        st = jps ? pd_jps_extract(s->jps, s->buf, s->cap, len)
                 : pd_search_extract(s->ctx, s->buf, s->cap, len);
        /* A cut-off path that did not fit comes back as BUFFER_TOO_SMALL
         * with the cutoff recorded: it is still a PARTIAL answer. */
        if (st == PD_OK && job->metrics.cutoff != PD_OK)
            st = PD_PARTIAL;
    }
    return st;
}

/* A blocked endpoint: snapped to the nearest open cell when the request
 * allows it (any component: step 3 decides reachability). */
static pd_status pd__snap(const pd_job *job, const pd_grid *grid, const pd_components *comps,
                          pd_point *pt, int *substituted, pd_status blocked)
{
    if (pd_grid_get(grid, pt->x, pt->y) != PD_CELL_BLOCKED)
        return PD_OK;
    if (!job->snap)
        return blocked;
    pd_point open;
    if (pd_fallback_nearest(grid, comps, 0, *pt, PD_FALLBACK_MAX_RADIUS, &open) != PD_OK)
        return blocked;
    *pt = open;
    *substituted = 1;
    return PD_OK;
}

/* Step 3 of the pipeline: NO_PATH in O(1), or a substitute goal. */
static pd_status pd__reachable_goal(const pd_job *job, const pd_grid *grid, const pd_components *comps,
                                    pd_point start, pd_point *goal, int *substituted)
{
    if (!comps || pd_components_connected(comps, start, *goal))
        return PD_OK;
    pd_point sub;
    pd_status st;
    switch (job->goal_mode) {
    case PD_GOAL_NEAREST:
        st = pd_fallback_nearest(grid, comps, pd_components_label(comps, start), job->params.goal,
                                 PD_FALLBACK_MAX_RADIUS, &sub);
        break;
    case PD_GOAL_LINE:
        st = pd_fallback_line(grid, comps, start, job->params.goal, &sub);
        break;
    case PD_GOAL_EXACT:
    default:
        return PD_NO_PATH;
    }
    if (st != PD_OK)
        return PD_NO_PATH;
    *goal = sub;
    *substituted = 1;
    return PD_OK;
}

/* Smooths the path on the unit grid. With avoid cells, line of sight must
 * treat them as blocked too, so it runs on a copy of the path's bounding box
 * with those cells blocked: every segment between two path points stays
 * inside that box, and cells outside a grid read as blocked. Returns the new
 * length, or 0 on allocation failure. */
static size_t pd__smooth(const pd_job *job, const pd_grid *grid, pd_point *pts, size_t n)
{
    if (job->n_avoid == 0 || !job->avoid)
        return pd_path_smooth(grid, pts, n);
    int32_t x0 = pts[0].x, y0 = pts[0].y, x1 = x0, y1 = y0;
    for (size_t i = 1; i < n; i++) {
        x0 = pts[i].x < x0 ? pts[i].x : x0;
        y0 = pts[i].y < y0 ? pts[i].y : y0;
        x1 = pts[i].x > x1 ? pts[i].x : x1;
        y1 = pts[i].y > y1 ? pts[i].y : y1;
    }
    pd_grid *box = pd_grid_create(x1 - x0 + 1, y1 - y0 + 1);
    if (!box)
        return 0;
    for (int32_t y = y0; y <= y1; y++)
        memcpy(&box->cells[pd_grid_index(box, 0, y - y0)], &grid->cells[pd_grid_index(grid, x0, y)],
               (size_t)(x1 - x0 + 1));
    for (size_t i = 0; i < job->n_avoid; i++) {
        pd_point a = job->avoid[i];
        if (a.x >= x0 && a.x <= x1 && a.y >= y0 && a.y <= y1)
            box->cells[pd_grid_index(box, a.x - x0, a.y - y0)] = PD_CELL_BLOCKED;
    }
    pd_grid_refresh_flags(box);
    for (size_t i = 0; i < n; i++) {
        pts[i].x -= x0;
        pts[i].y -= y0;
    }
    n = pd_path_smooth(box, pts, n);
    for (size_t i = 0; i < n; i++) {
        pts[i].x += x0;
        pts[i].y += y0;
    }
    pd_grid_destroy(box);
    return n;
}

/* Runs a path job through the pipeline (see the top of this file) and hands
 * the job an exact-size copy of the path in the requested style. */
static pd_status pd__find_path(const pd_pool *p, pd__scratch *s, pd_job *job)
{
    uint32_t unit = job->unit_size ? job->unit_size : 1;
    const pd_scene_unit *su = pd_scene_unit_for(job->scene, unit);
    const pd_grid *grid = su && su->grid ? su->grid : NULL;
    const pd_components *comps = su ? su->components : NULL;
    /* A scene built by hand (tests) may list no unit data: unit 1 is then
     * simply the scene grid, without labels. */
    if (!grid && unit == 1)
        grid = job->scene->grid;
    if (!grid)
        return PD_INVALID_ARGUMENT;

    pd_search_params params = job->params;
    if (!pd_grid_in_bounds(grid, params.start.x, params.start.y) ||
        !pd_grid_in_bounds(grid, params.goal.x, params.goal.y))
        return PD_OUT_OF_BOUNDS;

    pd_status st = pd__snap(job, grid, comps, &params.start, &job->start_substituted, PD_START_BLOCKED);
    const int goal_falls_back = job->goal_mode != PD_GOAL_EXACT && comps;
    if (st == PD_OK && !(goal_falls_back && !job->snap))
        st = pd__snap(job, grid, comps, &params.goal, &job->goal_substituted, PD_GOAL_BLOCKED);
    if (st == PD_OK)
        st = pd__reachable_goal(job, grid, comps, params.start, &params.goal, &job->goal_substituted);
    if (job->start_substituted)
        job->start_used = params.start;
    if (st != PD_OK)
        return st;

    size_t len = 0;
    st = pd__search(p, s, job, grid, &params, &len);
    if ((st != PD_OK && st != PD_PARTIAL) || len == 0)
        return st;
    if (st == PD_PARTIAL)
        params.goal = job->metrics.end;
    if (params.goal.x != job->params.goal.x || params.goal.y != job->params.goal.y)
        job->goal_substituted = 1;
    if (job->goal_substituted)
        job->goal_used = params.goal;
    if (job->start_substituted || job->goal_substituted)
        st = PD_PARTIAL;

    if (job->style == PD_STYLE_CORNERS)
        len = pd_path_corners(s->buf, len);
    else if (job->style == PD_STYLE_SMOOTH && (len = pd__smooth(job, grid, s->buf, len)) == 0)
        return PD_INTERNAL;
    job->path = malloc(len * sizeof *job->path);
    if (!job->path)
        return PD_INTERNAL;
    memcpy(job->path, s->buf, len * sizeof *job->path);
    job->path_len = len;

    double speed_cells = job->speed / job->scene->cell_size;
    if (job->speed > 0 && speed_cells > 0 && isfinite(speed_cells)) {
        job->times = malloc(len * sizeof *job->times);
        if (!job->times) {
            free(job->path);
            job->path = NULL;
            job->path_len = 0;
            return PD_INTERNAL;
        }
        pd_path_times(grid, job->path, len, speed_cells, job->start_time, job->times);
    }
    return st;
}

/* Squared Euclidean distance: only compared, never reported. */
static int64_t pd__dist2(pd_point a, pd_point b)
{
    int64_t dx = (int64_t)a.x - b.x, dy = (int64_t)a.y - b.y;
    return dx * dx + dy * dy;
}

/* The goal_mode fallback of a route (see the top of this file): a
 * substitute goal in q->to_scene that the unit can reach, or PD_NO_PATH. */
static pd_status pd__route_substitute(pd__scratch *s, const pd_job *job, const pd_world_query *q,
                                      pd_point *sub)
{
    const pd_scene *to = pd_world_scene(job->world, q->to_scene);
    const pd_scene_unit *su = to ? pd_scene_unit_for(to, q->unit_size) : NULL;
    if (!su || !su->grid || !su->components)
        return PD_NO_PATH;
    size_t n = 0;
    pd_status st = pd_world_arrivals(job->world, s->ctx, q, NULL, 0, &n);
    if (st != PD_OK)
        return st;
    if (n == 0)
        return PD_NO_PATH;
    pd_point *arrivals = malloc(n * sizeof *arrivals);
    if (!arrivals)
        return PD_INTERNAL;
    st = pd_world_arrivals(job->world, s->ctx, q, arrivals, n, &n);

    int found = 0;
    int64_t best = 0;
    for (size_t i = 0; st == PD_OK && i < n; i++) {
        uint32_t label = pd_components_label(su->components, arrivals[i]);
        if (label == 0)
            continue;
        pd_point cand;
        pd_status fs = job->goal_mode == PD_GOAL_LINE
                           ? pd_fallback_line(su->grid, su->components, arrivals[i], q->goal, &cand)
                           : pd_fallback_nearest(su->grid, su->components, label, q->goal,
                                                 PD_FALLBACK_MAX_RADIUS, &cand);
        if (fs != PD_OK)
            continue;
        int64_t d = pd__dist2(cand, q->goal);
        if (!found || d < best) {
            found = 1;
            best = d;
            *sub = cand;
        }
    }
    free(arrivals);
    if (st != PD_OK)
        return st;
    return found ? PD_OK : PD_NO_PATH;
}

/* Searches one leg of a planned route on its scene's unit grid and fills
 * *out with an exact-size copy of its path in the requested style, and its
 * arrival times from *t (advanced to the leg's last waypoint). */
static pd_status pd__route_leg(const pd_pool *p, pd__scratch *s, pd_job *job, const pd_world_leg *leg,
                               uint32_t unit, double *t, uint64_t *expanded, pd_job_leg *out)
{
    const pd_scene_unit *su = pd_scene_unit_for(leg->scene, unit);
    const pd_grid *grid = su && su->grid ? su->grid : NULL;
    if (!grid && unit == 1)
        grid = leg->scene->grid;
    if (!grid)
        return PD_INTERNAL;

    /* The snapshot belongs to the world, which the job releases before the
     * answer is encoded; the leg keeps the scene itself alive. Retaining
     * only touches the reference count. */
    out->scene = (pd_scene *)leg->scene;
    pd_scene_retain(out->scene);
    out->has_portal = leg->has_portal;
    if (leg->has_portal) {
        snprintf(out->portal, sizeof out->portal, "%s", leg->portal);
        snprintf(out->next_scene, sizeof out->next_scene, "%s", leg->next_scene->name);
        out->portal_exit = leg->portal_exit;
        out->portal_entry = leg->portal_entry;
        out->portal_cost = leg->portal_cost;
    }

    pd_search_params params = {0};
    params.start = leg->from;
    params.goal = leg->to;
    params.connectivity = PD_CONNECT_8;
    params.max_expansions = job->params.max_expansions;
    size_t len = 0;
    pd_status st = pd__search(p, s, job, grid, &params, &len);
    *expanded += job->metrics.expanded;
    if (st != PD_OK)
        return st == PD_PARTIAL || st == PD_NO_PATH ? PD_INTERNAL : st;
    out->cost = job->metrics.cost;

    if (job->style == PD_STYLE_CORNERS)
        len = pd_path_corners(s->buf, len);
    else if (job->style == PD_STYLE_SMOOTH)
        len = pd_path_smooth(grid, s->buf, len);
    out->path = malloc(len * sizeof *out->path);
    if (!out->path)
        return PD_INTERNAL;
    memcpy(out->path, s->buf, len * sizeof *out->path);
    out->path_len = len;

    double speed_cells = job->speed / leg->scene->cell_size;
    if (job->speed > 0 && speed_cells > 0 && isfinite(speed_cells)) {
        out->times = malloc(len * sizeof *out->times);
        if (!out->times)
            return PD_INTERNAL;
        pd_path_times(grid, out->path, len, speed_cells, *t, out->times);
        *t = out->times[len - 1];
        if (leg->has_portal)
            *t += leg->portal_cost / speed_cells;
    }
    return PD_OK;
}

/* Plans a route on the job's world, applies the goal_mode fallback, and
 * searches every leg (see the top of this file). Releases the world before
 * returning: the legs hold what the encoder needs. */
static pd_status pd__find_route(const pd_pool *p, pd__scratch *s, pd_job *job)
{
    uint64_t started = pd_pool_now_ns();
    if (!s->ctx)
        s->ctx = pd_search_ctx_create();
    if (!s->ctx)
        return PD_INTERNAL;
    pd__poll_ctx pc = {p, job};
    pd_world_query q = {
        .from_scene = job->route_from,
        .start = job->params.start,
        .to_scene = job->route_to,
        .goal = job->params.goal,
        .unit_size = job->unit_size ? job->unit_size : 1,
        .poll = pd__poll,
        .poll_user = &pc,
    };
    pd_world_route route = {0};
    pd_status st = pd_world_plan(job->world, s->ctx, &q, &route);
    uint64_t expanded = route.expanded;
    if ((st == PD_NO_PATH || st == PD_GOAL_BLOCKED) && job->goal_mode != PD_GOAL_EXACT) {
        pd_point sub;
        pd_status fs = pd__route_substitute(s, job, &q, &sub);
        if (fs == PD_OK) {
            pd_world_route_free(&route);
            q.goal = sub;
            st = pd_world_plan(job->world, s->ctx, &q, &route);
            expanded += route.expanded;
            if (st == PD_OK) {
                job->goal_substituted = 1;
                job->goal_used = sub;
            }
        } else if (fs != PD_NO_PATH) {
            st = fs;
        }
    }

    double total = 0, t = job->start_time;
    if (st == PD_OK) {
        job->route_pinned = route.pinned;
        job->legs = calloc(route.n_legs, sizeof *job->legs);
        if (!job->legs)
            st = PD_INTERNAL;
    }
    for (size_t i = 0; st == PD_OK && i < route.n_legs; i++) {
        job->n_legs = i + 1;
        st = pd__route_leg(p, s, job, &route.legs[i], q.unit_size, &t, &expanded, &job->legs[i]);
        total += job->legs[i].cost + (job->legs[i].has_portal ? job->legs[i].portal_cost : 0);
    }
    pd_world_route_free(&route);
    pd_world_release(job->world);
    job->world = NULL;

    memset(&job->metrics, 0, sizeof job->metrics);
    job->metrics.expanded = expanded;
    job->metrics.micros = (pd_pool_now_ns() - started) / 1000u;
    if (st != PD_OK) {
        for (size_t i = 0; i < job->n_legs; i++) {
            pd_scene_release(job->legs[i].scene);
            free(job->legs[i].path);
            free(job->legs[i].times);
        }
        free(job->legs);
        job->legs = NULL;
        job->n_legs = 0;
        job->goal_substituted = 0;
        return st;
    }
    job->metrics.cost = total;
    return job->goal_substituted ? PD_PARTIAL : PD_OK;
}

static pd_status pd__update_cells(pd_job *job)
{
    if (job->update_cells)
        job->update.cells = job->update_cells;
    pd_status st = pd_registry_update(job->registry, job->update_scene, &job->update, &job->update_result);
    /* Refreshing the world before the answer goes out means a route asked
     * for after the update's answer already plans around the change. */
    if (st == PD_OK && job->world_store)
        job->world_refresh = pd_world_store_refresh(job->world_store, job->registry, job->update_scene,
                                                    job->world_refresh_error,
                                                    sizeof job->world_refresh_error);
    return st;
}

static void pd__complete(pd_pool *p, pd_job *job)
{
    job->next = NULL;
    pthread_mutex_lock(&p->done_lock);
    if (p->done_tail)
        p->done_tail->next = job;
    else
        p->done_head = job;
    p->done_tail = job;
    pthread_mutex_unlock(&p->done_lock);
}

static void pd__run_job(pd_pool *p, pd__worker *w, pd__scratch *s, pd_job *job, int holds_update)
{
    uint64_t started = pd_pool_now_ns();
    pd_status st = pd__job_interrupt(p, job);
    if (st == PD_OK)
        st = job->kind == PD_JOB_UPDATE_CELLS ? pd__update_cells(job)
             : job->kind == PD_JOB_FIND_ROUTE ? pd__find_route(p, s, job)
                                              : pd__find_path(p, s, job);
    job->status = st;
    job->finished_ns = pd_pool_now_ns();

    pthread_mutex_lock(&p->lock);
    w->current = NULL;
    w->stats.jobs_done++;
    if (job->kind != PD_JOB_UPDATE_CELLS && (st == PD_OK || st == PD_PARTIAL))
        w->stats.paths_found++;
    w->stats.expansions += job->metrics.expanded;
    w->stats.busy_ns += job->finished_ns - started;
    pthread_mutex_unlock(&p->lock);

    pd__complete(p, job);
    /* The next update may start only now that this one is on the completion
     * list, so updates also complete in the order they were applied. */
    if (holds_update) {
        pthread_mutex_lock(&p->lock);
        p->update_running = 0;
        pthread_cond_signal(&p->work_ready);
        pthread_mutex_unlock(&p->lock);
    }
    if (p->wake)
        p->wake(p->wake_user);
}

/* Whether a worker may start this job now: while paused only cancelled jobs
 * (they only need their CANCELLED answer), and an update only when no other
 * update is running. Caller holds p->lock. */
static int pd__can_start(const pd_pool *p, pd_job *job)
{
    int cancelled = atomic_load(&job->cancelled);
    if (p->paused && !cancelled)
        return 0;
    return cancelled || job->kind != PD_JOB_UPDATE_CELLS || !p->update_running;
}

/* Unlinks the job a worker should run next: the first one it may start.
 * Updates keep their order among themselves: one that cannot start blocks
 * every later one for the same reason. *holds_update is set when the job
 * takes the pool's single update slot. Returns NULL when there is none.
 * Caller holds p->lock. */
static pd_job *pd__take_job(pd_pool *p, int *holds_update)
{
    pd_job *prev = NULL, *job = p->queue_head;
    for (; job && !pd__can_start(p, job); prev = job, job = job->next)
        ;
    if (!job)
        return NULL;
    if (prev)
        prev->next = job->next;
    else
        p->queue_head = job->next;
    if (p->queue_tail == job)
        p->queue_tail = prev;
    p->queue_len--;
    job->next = NULL;
    *holds_update = job->kind == PD_JOB_UPDATE_CELLS && !atomic_load(&job->cancelled);
    if (*holds_update)
        p->update_running = 1;
    return job;
}

/* The context growth a worker owes the pool (see pd_pool_reserve). */
typedef struct pd__reservation {
    int32_t width, height;
    size_t cells;
    int astar, jps;           /* which contexts to grow */
    int astar_ok, jps_ok;     /* filled in by pd__reserve_contexts */
} pd__reservation;

static size_t pd__padded_cells(int32_t width, int32_t height)
{
    return (size_t)(width + 2) * (size_t)(height + 2);
}

/* Whether this worker still has to grow a context for the pool's latest
 * reservation; fills *r. Caller holds p->lock. */
static int pd__reservation_due(const pd_pool *p, const pd__scratch *s, pd__reservation *r)
{
    memset(r, 0, sizeof *r);
    r->width = p->reserve_width;
    r->height = p->reserve_height;
    r->cells = p->reserve_cells;
    r->astar = r->cells > s->tried_astar;
    r->jps = atomic_load(&p->jump_points) && r->cells > s->tried_jps;
    return r->astar || r->jps;
}

/* Grows the contexts r names. Runs without any pool lock: growing touches
 * every page of the new arrays. */
static void pd__reserve_contexts(pd__scratch *s, pd__reservation *r)
{
    if (r->astar) {
        s->tried_astar = r->cells;
        if (!s->ctx)
            s->ctx = pd_search_ctx_create();
        r->astar_ok = s->ctx && pd_search_ctx_reserve(s->ctx, r->width, r->height) == 0;
    }
    if (r->jps) {
        s->tried_jps = r->cells;
        if (!s->jps)
            s->jps = pd_jps_ctx_create();
        r->jps_ok = s->jps && pd_jps_ctx_reserve(s->jps, r->width, r->height) == 0;
    }
}

static void *pd__worker_main(void *arg)
{
    pd__worker *w = arg;
    pd_pool *p = w->pool;
    pd__scratch s = {pd_search_ctx_create(), NULL, NULL, 0, 0, 0};

    pthread_mutex_lock(&p->lock);
    for (;;) {
        pd_job *job = NULL;
        int holds_update = 0;
        pd__reservation r;
        /* A reservation comes before the next job: a job waiting for it
         * still has its deadline checked when it is taken, whereas a search
         * that grew the context itself would run far past it unpolled. */
        while (!atomic_load(&p->stopping)) {
            if (pd__reservation_due(p, &s, &r)) {
                pthread_mutex_unlock(&p->lock);
                pd__reserve_contexts(&s, &r);
                pthread_mutex_lock(&p->lock);
                if (r.astar_ok)
                    w->reserved_astar = r.cells;
                if (r.jps_ok)
                    w->reserved_jps = r.cells;
                continue;
            }
            if ((job = pd__take_job(p, &holds_update)))
                break;
            pthread_cond_wait(&p->work_ready, &p->lock);
        }
        if (atomic_load(&p->stopping)) {
            if (job) { /* put it back: destroy answers every queued job */
                if (holds_update)
                    p->update_running = 0;
                job->next = p->queue_head;
                p->queue_head = job;
                if (!p->queue_tail)
                    p->queue_tail = job;
                p->queue_len++;
            }
            break;
        }
        w->current = job;
        pthread_mutex_unlock(&p->lock);

        pd__run_job(p, w, &s, job, holds_update);

        pthread_mutex_lock(&p->lock);
    }
    pthread_mutex_unlock(&p->lock);

    pd_search_ctx_destroy(s.ctx);
    pd_jps_ctx_destroy(s.jps);
    free(s.buf);
    return NULL;
}

static void pd__stop_and_join(pd_pool *p, uint32_t started)
{
    pthread_mutex_lock(&p->lock);
    atomic_store(&p->stopping, 1);
    pthread_cond_broadcast(&p->work_ready);
    pthread_mutex_unlock(&p->lock);
    for (uint32_t i = 0; i < started; i++)
        pthread_join(p->workers[i].thread, NULL);
}

static void pd__free_list(pd_job *job)
{
    while (job) {
        pd_job *next = job->next;
        pd_job_free(job);
        job = next;
    }
}

static void pd__pool_free(pd_pool *p)
{
    pthread_mutex_destroy(&p->done_lock);
    pthread_cond_destroy(&p->work_ready);
    pthread_mutex_destroy(&p->lock);
    free(p->workers);
    free(p);
}

pd_pool *pd_pool_create(uint32_t threads, uint32_t queue_capacity,
                        pd_pool_wake_fn wake, void *wake_user)
{
    if (threads < 1 || queue_capacity < 1)
        return NULL;
    pd_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->workers = calloc(threads, sizeof *p->workers);
    if (!p->workers)
        goto fail_workers;
    if (pthread_mutex_init(&p->lock, NULL) != 0)
        goto fail_lock;
    if (pthread_cond_init(&p->work_ready, NULL) != 0)
        goto fail_cond;
    if (pthread_mutex_init(&p->done_lock, NULL) != 0)
        goto fail_done_lock;
    atomic_init(&p->stopping, 0);
    atomic_init(&p->jump_points, 0);
    p->queue_capacity = queue_capacity;
    p->wake = wake;
    p->wake_user = wake_user;
    p->n_workers = threads;

    for (uint32_t i = 0; i < threads; i++) {
        p->workers[i].pool = p;
        if (pthread_create(&p->workers[i].thread, NULL, pd__worker_main, &p->workers[i]) != 0) {
            pd__stop_and_join(p, i);
            pd__pool_free(p);
            return NULL;
        }
    }
    return p;

fail_done_lock:
    pthread_cond_destroy(&p->work_ready);
fail_cond:
    pthread_mutex_destroy(&p->lock);
fail_lock:
    free(p->workers);
fail_workers:
    free(p);
    return NULL;
}

pd_status pd_pool_submit(pd_pool *p, pd_job *job)
{
    if (!p || !job)
        return PD_INVALID_ARGUMENT;
    if (job->kind == PD_JOB_UPDATE_CELLS  ? !job->registry
        : job->kind == PD_JOB_FIND_ROUTE ? !job->world
                                         : !job->scene || !job->scene->grid)
        return PD_INVALID_ARGUMENT;
    if (job->submitted_ns == 0)
        job->submitted_ns = pd_pool_now_ns();
    job->next = NULL;

    pthread_mutex_lock(&p->lock);
    if (p->queue_len >= p->queue_capacity) {
        pthread_mutex_unlock(&p->lock);
        return PD_OVERLOADED;
    }
    if (p->queue_tail)
        p->queue_tail->next = job;
    else
        p->queue_head = job;
    p->queue_tail = job;
    p->queue_len++;
    pthread_cond_signal(&p->work_ready);
    pthread_mutex_unlock(&p->lock);
    return PD_OK;
}

pd_job *pd_pool_take_completed(pd_pool *p)
{
    if (!p)
        return NULL;
    pthread_mutex_lock(&p->done_lock);
    pd_job *list = p->done_head;
    p->done_head = p->done_tail = NULL;
    pthread_mutex_unlock(&p->done_lock);
    return list;
}

/* Marks every queued or running job of conn_id (and of request_id too, when
 * one_request is set) as cancelled; stops at the first when one_request is
 * set. Returns how many were marked. Caller holds p->lock. */
static size_t pd__mark_cancelled(pd_pool *p, uint64_t conn_id, int one_request,
                                 uint64_t request_id)
{
    size_t marked = 0;
    for (pd_job *job = p->queue_head; job; job = job->next) {
        if (job->conn_id == conn_id && (!one_request || job->request_id == request_id)) {
            atomic_store(&job->cancelled, 1);
            marked++;
            if (one_request)
                return marked;
        }
    }
    for (uint32_t i = 0; i < p->n_workers; i++) {
        pd_job *job = p->workers[i].current;
        if (job && job->conn_id == conn_id && (!one_request || job->request_id == request_id)) {
            atomic_store(&job->cancelled, 1);
            marked++;
            if (one_request)
                return marked;
        }
    }
    return marked;
}

int pd_pool_cancel(pd_pool *p, uint64_t conn_id, uint64_t request_id)
{
    if (!p)
        return 0;
    pthread_mutex_lock(&p->lock);
    size_t marked = pd__mark_cancelled(p, conn_id, 1, request_id);
    if (marked && p->paused)
        pthread_cond_broadcast(&p->work_ready);
    pthread_mutex_unlock(&p->lock);
    return marked > 0;
}

void pd_pool_cancel_conn(pd_pool *p, uint64_t conn_id)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    if (pd__mark_cancelled(p, conn_id, 0, 0) && p->paused)
        pthread_cond_broadcast(&p->work_ready);
    pthread_mutex_unlock(&p->lock);
}

void pd_pool_set_jump_points(pd_pool *p, int on)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    atomic_store(&p->jump_points, on != 0);
    /* Idle workers grow their jump point contexts to the reservation now. */
    pthread_cond_broadcast(&p->work_ready);
    pthread_mutex_unlock(&p->lock);
}

void pd_pool_reserve(pd_pool *p, int32_t width, int32_t height)
{
    if (!p || width < 1 || height < 1 || width > PD_GRID_MAX_SIDE || height > PD_GRID_MAX_SIDE)
        return;
    size_t cells = pd__padded_cells(width, height);
    pthread_mutex_lock(&p->lock);
    if (cells > p->reserve_cells) {
        p->reserve_width = width;
        p->reserve_height = height;
        p->reserve_cells = cells;
        pthread_cond_broadcast(&p->work_ready);
    }
    pthread_mutex_unlock(&p->lock);
}

void pd_pool_set_paused(pd_pool *p, int paused)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->paused = paused != 0;
    pthread_cond_broadcast(&p->work_ready);
    pthread_mutex_unlock(&p->lock);
}

void pd_pool_get_stats(pd_pool *p, pd_pool_stats *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    out->threads = p->n_workers;
    out->queue_depth = p->queue_len;
    const int jps = atomic_load(&p->jump_points);
    for (uint32_t i = 0; i < p->n_workers; i++) {
        const pd__worker *w = &p->workers[i];
        if (w->current)
            out->running++;
        out->jobs_done += w->stats.jobs_done;
        out->paths_found += w->stats.paths_found;
        out->expansions += w->stats.expansions;
        out->busy_ns += w->stats.busy_ns;
        size_t reserved = jps && w->reserved_jps < w->reserved_astar ? w->reserved_jps : w->reserved_astar;
        if (i == 0 || reserved < out->reserved_cells)
            out->reserved_cells = reserved;
    }
    pthread_mutex_unlock(&p->lock);
}

void pd_pool_destroy(pd_pool *p)
{
    if (!p)
        return;
    pd__stop_and_join(p, p->n_workers);

    /* No thread is left, so the queues need no lock from here on. */
    pd_job *queued = p->queue_head;
    p->queue_head = p->queue_tail = NULL;
    p->queue_len = 0;
    while (queued) {
        pd_job *next = queued->next;
        queued->status = PD_CANCELLED;
        queued->finished_ns = pd_pool_now_ns();
        pd__complete(p, queued);
        queued = next;
    }
    pd__free_list(pd_pool_take_completed(p));
    pd__pool_free(p);
}
