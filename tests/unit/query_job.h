/*
 * query_job.h - for tests of the worker pool and the query layer: a pool
 * task that runs one query (path, route or cell update) through the query
 * layer, with the request and the result side by side as the tests read
 * them, the pool's thread ops for query scratches, and run_now, which runs
 * a job's query on the calling thread with no pool at all.
 *
 * The server's own job (pd_dispatch.c) is the same idea; this copy exists so
 * the pool and the query layer can be tested below the net layer.
 */
#ifndef QUERY_JOB_H
#define QUERY_JOB_H

#include <stdlib.h>
#include <string.h>

#include "pd_pool.h"
#include "pd_query.h"

typedef enum pd_job_kind {
    PD_JOB_FIND_PATH = 0,
    PD_JOB_UPDATE_CELLS = 1,
    PD_JOB_FIND_ROUTE = 2,
} pd_job_kind;

typedef struct pd_job {
    pd_task task;                 /* first: the pool hands back &job->task */
    pd_job_kind kind;
    uint64_t conn_id, request_id; /* copied into task.owner / task.tag on submit */
    int jump_points;

    /* request */
    pd_scene *scene;              /* retained */
    uint32_t unit_size;
    pd_search_params params;
    pd_waypoint_style style;
    pd_goal_mode goal_mode;
    int snap;
    double speed, start_time;
    pd_point *avoid;              /* owned */
    size_t n_avoid;
    pd_registry *registry;
    char update_scene[PD_CONF_MAX_NAME];
    pd_scene_update update;
    pd_point *update_cells;       /* owned */
    pd_world_store *world_store;
    pd_world *world;              /* retained until the route runs */
    char route_from[PD_CONF_MAX_NAME], route_to[PD_CONF_MAX_NAME];

    /* result */
    pd_status status;
    pd_path_result path_result;
    pd_route_result route_result;
    pd_update_outcome update_outcome;
    /* The result's fields under the names the tests read, set by qj_settle
     * (they alias the arrays above: never freed through these). */
    pd_search_metrics metrics;
    pd_point *path;
    size_t path_len;
    double *times;
    int start_substituted, goal_substituted;
    pd_point start_used, goal_used;
    pd_route_leg *legs;
    size_t n_legs;
    int route_pinned;
    pd_scene_update_result update_result;
    pd_status world_refresh;
} pd_job;

static inline pd_job *pd_job_new(void);

static inline pd_status qj_run(pd_job *job, pd_query_scratch *scratch, const pd_query_control *ctl)
{
    switch (job->kind) {
    case PD_JOB_UPDATE_CELLS: {
        pd_update_cells_req req;
        memset(&req, 0, sizeof req);
        memcpy(req.scene, job->update_scene, sizeof req.scene);
        req.update = job->update;
        req.cells = job->update_cells;
        pd_store *store = pd_store_create(job->registry, job->world_store);
        if (!store)
            return PD_INTERNAL;
        pd_status st = pd_query_update_cells(store, &req, &job->update_outcome);
        pd_store_destroy(store);
        return st;
    }
    case PD_JOB_FIND_ROUTE: {
        pd_route_query q;
        memset(&q, 0, sizeof q);
        memcpy(q.from_scene, job->route_from, sizeof q.from_scene);
        memcpy(q.to_scene, job->route_to, sizeof q.to_scene);
        q.start = job->params.start;
        q.goal = job->params.goal;
        q.unit_size = job->unit_size;
        q.style = job->style;
        q.goal_mode = job->goal_mode;
        q.speed = job->speed;
        q.start_time = job->start_time;
        q.max_expansions = job->params.max_expansions;
        pd_status st = pd_query_find_route(scratch, job->world, &q, ctl, &job->route_result);
        pd_world_release(job->world);
        job->world = NULL;
        return st;
    }
    case PD_JOB_FIND_PATH:
    default: {
        pd_path_query q;
        memset(&q, 0, sizeof q);
        q.unit_size = job->unit_size;
        q.params = job->params;
        q.style = job->style;
        q.goal_mode = job->goal_mode;
        q.snap = job->snap;
        q.speed = job->speed;
        q.start_time = job->start_time;
        q.avoid = job->avoid;
        q.n_avoid = job->n_avoid;
        return pd_query_find_path(scratch, job->scene, &q, ctl, &job->path_result);
    }
    }
}

static inline pd_status qj_task_run(pd_task *task, void *scratch)
{
    pd_job *job = (pd_job *)task;
    pd_query_control ctl = {pd_task_poll, task, job->jump_points};
    return qj_run(job, scratch, &ctl);
}

static inline pd_job *pd_job_new(void)
{
    pd_job *job = calloc(1, sizeof *job);
    if (job)
        pd_task_init(&job->task, qj_task_run);
    return job;
}

static inline void pd_job_free(pd_job *job)
{
    if (!job)
        return;
    pd_scene_release(job->scene);
    free(job->avoid);
    free(job->update_cells);
    pd_world_release(job->world);
    pd_path_result_free(&job->path_result);
    pd_route_result_free(&job->route_result);
    free(job);
}

/* Fills the result's aliases once job->status is final. */
static inline pd_job *qj_settle(pd_job *job)
{
    if (job->kind == PD_JOB_FIND_ROUTE) {
        const pd_route_result *r = &job->route_result;
        job->metrics = r->metrics;
        job->legs = r->legs;
        job->n_legs = r->n_legs;
        job->route_pinned = r->pinned;
        job->goal_substituted = r->goal_substituted;
        job->goal_used = r->goal_used;
    } else if (job->kind == PD_JOB_UPDATE_CELLS) {
        job->update_result = job->update_outcome.update;
        job->world_refresh = job->update_outcome.world_refresh;
    } else {
        const pd_path_result *r = &job->path_result;
        job->metrics = r->metrics;
        job->path = r->path;
        job->path_len = r->path_len;
        job->times = r->times;
        job->start_substituted = r->start_substituted;
        job->start_used = r->start_used;
        job->goal_substituted = r->goal_substituted;
        job->goal_used = r->goal_used;
    }
    return job;
}

/* Copies the task's verdict into the job once it is back from the pool. */
static inline pd_job *qj_settled(pd_task *task)
{
    pd_job *job = (pd_job *)task;
    job->status = task->status;
    return qj_settle(job);
}

/* Submits with the job's ids; update jobs are ordered, as the server does. */
static inline pd_status qj_submit(pd_pool *pool, pd_job *job)
{
    if (!job)
        return pd_pool_submit(pool, NULL);
    job->task.owner = job->conn_id;
    job->task.tag = job->request_id;
    job->task.ordered = job->kind == PD_JOB_UPDATE_CELLS;
    return pd_pool_submit(pool, &job->task);
}

/* Runs the job's query here and now, with a scratch of its own. */
static inline pd_job *run_now(pd_job *job)
{
    pd_query_scratch *scratch = pd_query_scratch_create();
    pd_query_control ctl = {NULL, NULL, job->jump_points};
    job->status = qj_run(job, scratch, &ctl);
    pd_query_scratch_destroy(scratch);
    return qj_settle(job);
}

/* Thread ops giving every worker a query scratch; user is a size_t *, the
 * bytes each worker keeps after a task (NULL: keep everything). */
static inline void *qj_scratch_create(void *user)
{
    (void)user;
    return pd_query_scratch_create();
}

static inline void qj_scratch_destroy(void *scratch)
{
    pd_query_scratch_destroy(scratch);
}

static inline size_t qj_scratch_trim(void *scratch, void *user)
{
    return pd_query_scratch_trim(scratch, user ? *(const size_t *)user : SIZE_MAX);
}

static const pd_pool_thread_ops qj_thread_ops = {qj_scratch_create, qj_scratch_destroy, qj_scratch_trim};

/* Destroys the pool and frees the jobs it still held. */
static inline void qj_pool_destroy(pd_pool *pool)
{
    pd_task *t = pd_pool_destroy(pool);
    while (t) {
        pd_task *next = t->next;
        pd_job_free((pd_job *)t);
        t = next;
    }
}

#endif
