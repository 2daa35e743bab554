/*
 * pd_kind_paths.c - the path family's kinds: FindPath (one scene, the path
 * pipeline of pd_query.c) and FindRoute (across scenes through the world's
 * portals). Both are prepared on the loop against the snapshot current
 * when they arrive - so an unknown scene, a unit size not served or a point
 * outside is answered at once - and searched on a worker. A FindPath with
 * avoid_reserved is planned by ReservePath's planner, without reserving
 * (pd_kind_reserve_find_path), in the scene's lane.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_kind.h"
#include "pd_kind_reserve.h"

static uint64_t pd__deadline_ns(uint32_t deadline_ms, uint64_t arrival_ns)
{
    return deadline_ms ? arrival_ns + (uint64_t)deadline_ms * 1000000u : 0;
}

/* FindPath: the scene retained into the job with the checked query; the
 * job takes the request's avoid array (path_query.avoid points at it). */
static pd_status pd__path_prepare(pd_job *job, pd_request *req, const pd_kind_env *env, pd_kind_refusal *why)
{
    pd_find_path_req *fp = &req->u.find_path;
    pd_scene *scene = pd_registry_acquire(env->registry, fp->scene);
    if (!scene) {
        snprintf(why->message, sizeof why->message, "unknown scene '%s'", fp->scene);
        return PD_UNKNOWN_SCENE;
    }
    job->scene = scene; /* the job owns the reference now */
    pd_status st = pd_query_path_prepare(scene, fp, env->default_max_expansions, &job->path_query, why->message,
                                         sizeof why->message);
    if (st != PD_OK) {
        why->version = scene->version;
        return st;
    }
    job->avoid = fp->avoid;
    fp->avoid = NULL;
    fp->n_avoid = 0;
    job->want_world = fp->want_world;
    job->task.deadline_ns = pd__deadline_ns(fp->deadline_ms, job->arrival_ns);
    if (job->path_query.avoid_reserved) {
        /* Around the reservations: an ordered task in the scene's lane, as
         * ReservePath is, so it sees every reservation and cut that arrived
         * before it, and none half made. */
        job->task.ordered = 1;
        job->task.lane = job->task.lane2 = pd_kind_scene_lane(scene->name);
        job->store = env->store;
    }
    return PD_OK;
}

/* Ends at most this many cells apart (Chebyshev) are searched with A* on
 * the loop even where the worker would use jump points: A* expands about
 * as many cells as such a path has, where jump point search's first
 * expansion alone scans every direction out to the walls. On the open
 * 64x64 map of bench-server.sh, a neighbouring goal costs 1,656
 * instructions by A* and 5,934 by jump points (callgrind). */
#define PD__INLINE_ASTAR_CELLS 8

/* A search within `budget` expansions on the loop thread
 * (pd_query_find_path_small): a goal a few cells away costs less than a
 * worker's wakeups. Beyond PD__INLINE_ASTAR_CELLS it searches as the
 * worker would (jump points where the scene and the server use them, so
 * the answer is the worker's own path), the budget then counting jump
 * points. For a pipelining connection only ends less than `budget` cells
 * apart (Chebyshev) are tried, as for A*: on den520d's corners nearly all
 * of those finish within it, where A* gave up on a quarter of its
 * attempts, which a worker then searched again. A lone request (a larger
 * budget) is searched as the worker would, whatever its distance. */
static int pd__path_inline(pd_job *job, pd_query_scratch *scratch, uint64_t budget, int lone)
{
    if (job->path_query.avoid_reserved)
        return 0; /* its lane's, not the loop's */
    const pd_point a = job->path_query.params.start, b = job->path_query.params.goal;
    const int64_t dx = llabs((int64_t)a.x - b.x), dy = llabs((int64_t)a.y - b.y);
    const uint64_t dist = (uint64_t)(dx > dy ? dx : dy);
    if (!lone && dist >= budget)
        return 0;
    const int jump_points = job->jump_points && (lone || dist > PD__INLINE_ASTAR_CELLS);
    if (pd_query_find_path_small(scratch, job->scene, &job->path_query, budget, jump_points, &job->path))
        return 1;
    memset(&job->path, 0, sizeof job->path);
    return 0;
}

static pd_status pd__path_run(pd_job *job, pd_query_scratch *scratch, const pd_query_control *ctl)
{
    if (job->path_query.avoid_reserved)
        return pd_kind_reserve_find_path(pd_store_registry(job->store), job->scene, &job->path_query, ctl,
                                         &job->path);
    return pd_query_find_path(scratch, job->scene, &job->path_query, ctl, &job->path);
}

static const char *pd__path_scene(const pd_job *job)
{
    return job->scene->name;
}

static pd_status pd__path_status(const pd_job *job)
{
    return job->path.status;
}

const pd_kind pd_kind_find_path = {
    .name = "find_path",
    .role = PD_ROLE_QUERY,
    .runs = PD_KIND_WORKER,
    .counts_paths = 1,
    .prepare = pd__path_prepare,
    .run_inline = pd__path_inline,
    .run = pd__path_run,
    .scene = pd__path_scene,
    .status = pd__path_status,
};

/* FindRoute: checked against the world current now, and queued holding
 * it; the worker plans, searches the legs and releases it. */
static pd_status pd__route_prepare(pd_job *job, pd_request *req, const pd_kind_env *env, pd_kind_refusal *why)
{
    const pd_find_route_req *fr = &req->u.find_route;
    job->world = env->world_store ? pd_world_store_acquire(env->world_store) : NULL;
    if (!job->world) {
        snprintf(why->message, sizeof why->message, "this server has no world loaded: routes are not served");
        return PD_INVALID_ARGUMENT;
    }
    pd_status st = pd_query_route_prepare(job->world, fr, env->default_max_expansions, &job->route_query,
                                          why->message, sizeof why->message);
    if (st != PD_OK)
        return st;
    job->want_world = fr->want_world;
    job->task.deadline_ns = pd__deadline_ns(fr->deadline_ms, job->arrival_ns);
    return PD_OK;
}

/* Releases the world as soon as the legs are searched: they hold what the
 * answer needs. */
static pd_status pd__route_run(pd_job *job, pd_query_scratch *scratch, const pd_query_control *ctl)
{
    pd_status st = pd_query_find_route(scratch, job->world, &job->route_query, ctl, &job->route);
    pd_world_release(job->world);
    job->world = NULL;
    return st;
}

static const char *pd__route_scene(const pd_job *job)
{
    return job->route_query.from_scene;
}

const pd_kind pd_kind_find_route = {
    .name = "find_route",
    .role = PD_ROLE_QUERY,
    .runs = PD_KIND_WORKER,
    .counts_paths = 1,
    .prepare = pd__route_prepare,
    .run = pd__route_run,
    .scene = pd__route_scene,
};
