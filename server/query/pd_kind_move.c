/*
 * pd_kind_move.c - the movement family's kinds: the seven movement queries
 * (pd_movement.h), each a job with one query, and Batch, a job never
 * submitted whose items - movement queries and FindPaths - are pool tasks
 * of their own (the server's pd_job_item), each queued, charged and
 * counted like the same request sent alone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_kind.h"

/* A movement query alone: checked against the scene current now
 * (pd_move_prepare); the job owns the query and its arrays. */
static pd_status pd__move_prepare(pd_job *job, pd_request *req, const pd_kind_env *env, pd_kind_refusal *why)
{
    job->move_queries = calloc(1, sizeof *job->move_queries);
    job->move_results = calloc(1, sizeof *job->move_results);
    job->move_reqs = malloc(sizeof *job->move_reqs);
    if (!job->move_queries || !job->move_results || !job->move_reqs) {
        snprintf(why->message, sizeof why->message, "out of memory");
        return PD_INTERNAL;
    }
    job->move_reqs[0] = req->u.move;
    req->u.move.moves = NULL;
    req->u.move.n_moves = 0;
    job->n_moves = 1;
    pd_scene *scene = pd_registry_acquire(env->registry, job->move_reqs[0].scene);
    const pd_move_result *r = &job->move_results[0];
    if (pd_move_prepare(scene, &job->move_reqs[0], &job->move_queries[0], &job->move_results[0]) == PD_OK)
        return PD_OK;
    snprintf(why->message, sizeof why->message, "%s", r->message);
    why->version = r->version;
    return r->status;
}

static pd_status pd__move_run(pd_job *job, pd_query_scratch *scratch, const pd_query_control *ctl)
{
    (void)ctl;
    pd_move_run(scratch, &job->move_queries[0], &job->move_results[0]);
    return PD_OK;
}

/* The one scene the job's queries named and that was served, or NULL for
 * none or several (only the items that named a served scene: the others
 * were refused without a scene to label). */
static const char *pd__move_scene(const pd_job *job)
{
    const char *name = NULL;
    for (size_t i = 0; i < job->n_moves; i++) {
        if (!job->move_queries[i].scene)
            continue;
        if (name && strcmp(job->move_reqs[i].scene, name) != 0)
            return NULL;
        name = job->move_reqs[i].scene;
    }
    return name;
}

/* Whether no query named a served scene. */
static int pd__move_unserved(const pd_job *job)
{
    if (job->n_moves == 0)
        return 0;
    for (size_t i = 0; i < job->n_moves; i++)
        if (job->move_queries[i].scene)
            return 0;
    return 1;
}

/* A movement query answers with its result's status. */
static pd_status pd__move_status(const pd_job *job)
{
    return job->move_results[0].status;
}

#define PD__MOVE_KIND(var, label)                                                                            \
    const pd_kind var = {                                                                                    \
        .name = label,                                                                                       \
        .role = PD_ROLE_QUERY,                                                                               \
        .runs = PD_KIND_WORKER,                                                                              \
        .prepare = pd__move_prepare,                                                                         \
        .run = pd__move_run,                                                                                 \
        .scene = pd__move_scene,                                                                             \
        .unserved = pd__move_unserved,                                                                       \
        .status = pd__move_status,                                                                           \
    }

PD__MOVE_KIND(pd_kind_raycast, "raycast");
PD__MOVE_KIND(pd_kind_validate_move, "validate_move");
PD__MOVE_KIND(pd_kind_move_along, "move_along");
PD__MOVE_KIND(pd_kind_nearest, "nearest");
PD__MOVE_KIND(pd_kind_reachable, "reachable");
PD__MOVE_KIND(pd_kind_random_point, "random_point");
PD__MOVE_KIND(pd_kind_distance_to_wall, "distance_to_wall");

/* ---- Batch ----------------------------------------------------------------- */

/* The batch owns the items (and their arrays) now; every item's query and
 * result has its place, and every item its task. */
static pd_status pd__batch_prepare(pd_job *job, pd_request *req, const pd_kind_env *env, pd_kind_refusal *why)
{
    (void)env;
    size_t n = req->u.batch.n_items;
    job->move_queries = calloc(n, sizeof *job->move_queries);
    job->move_results = calloc(n, sizeof *job->move_results);
    job->items = calloc(n, sizeof *job->items);
    if (!job->move_queries || !job->move_results || !job->items) {
        snprintf(why->message, sizeof why->message, "out of memory");
        return PD_INTERNAL;
    }
    job->move_reqs = req->u.batch.items;
    job->n_moves = n;
    req->u.batch.items = NULL;
    req->u.batch.n_items = 0;
    return PD_OK;
}

pd_status pd_kind_batch_prepare_item(pd_job *batch, size_t i, const pd_kind_env *env, uint64_t *deadline_ns)
{
    pd_move_req *item = &batch->move_reqs[i];
    pd_scene *scene = item->status == PD_OK ? pd_registry_acquire(env->registry, item->scene) : NULL;
    if (item->kind == PD_REQ_FIND_PATH && item->path && item->path->max_expansions == 0)
        item->path->max_expansions = env->default_max_expansions;
    *deadline_ns = 0;
    if (item->kind == PD_REQ_FIND_PATH && item->path && item->path->avoid_reserved) {
        /* It runs in its scene's lane, a batch's items on any worker. */
        pd_scene_release(scene);
        pd_move_result *r = &batch->move_results[i];
        r->status = PD_INVALID_ARGUMENT;
        snprintf(r->message, sizeof r->message, "find_path.avoid_reserved is not served in a Batch: send it alone");
        return PD_INVALID_ARGUMENT;
    }
    if (item->kind == PD_REQ_FIND_PATH && item->path && item->path->deadline_ms)
        *deadline_ns = batch->arrival_ns + (uint64_t)item->path->deadline_ms * 1000000u;
    return pd_move_prepare(scene, item, &batch->move_queries[i], &batch->move_results[i]);
}

/* Each item takes an in-flight slot. */
static size_t pd__batch_weight(const pd_request *req)
{
    return req->u.batch.n_items;
}

/* The Batch frame is counted OK: its items are counted as they finish. */
static pd_status pd__batch_status(const pd_job *job)
{
    (void)job;
    return PD_OK;
}

const pd_kind pd_kind_batch = {
    .name = "batch",
    .role = PD_ROLE_QUERY,
    .runs = PD_KIND_BATCH,
    .prepare = pd__batch_prepare,
    .scene = pd__move_scene,
    .unserved = pd__move_unserved,
    .status = pd__batch_status,
    .weight = pd__batch_weight,
};
