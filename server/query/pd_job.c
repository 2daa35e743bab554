/*
 * pd_job.c - what every job shares whatever its kind (see pd_job.h):
 * making and freeing one, settling a job that never ran, and the figures
 * its answer and the server's stats read. A kind's own parts are its
 * pd_kind hooks (pd_kind.h); this file calls them only through the job's
 * ops pointer, so it depends on no kind's file.
 */
#include "pd_job.h"

#include <stdio.h>
#include <stdlib.h>

#include "pd_kind.h"

pd_job *pd_job_new(pd_request_kind kind, pd_task_run_fn run)
{
    pd_job *job = calloc(1, sizeof *job);
    if (!job)
        return NULL;
    pd_task_init(&job->task, run);
    job->kind = kind;
    return job;
}

void pd_job_clear(pd_job *job)
{
    if (job->ops && job->ops->release)
        job->ops->release(job);
    if (job->scene) {
        pd_scene_release(job->scene);
        job->scene = NULL;
    }
    if (job->avoid) {
        free(job->avoid);
        job->avoid = NULL;
    }
    if (job->path.path || job->path.times)
        pd_path_result_free(&job->path);
    if (job->world) {
        pd_world_release(job->world);
        job->world = NULL;
    }
    /* Each kind fills one part: the rest is skipped without a call. */
    if (job->route.legs)
        pd_route_result_free(&job->route);
    if (job->update_req.cells || job->update_req.ops)
        pd_update_cells_req_free(&job->update_req);
    if (job->change.map || job->change.scene)
        pd_scene_change_req_free(&job->change);
    for (size_t i = 0; i < job->n_moves; i++) {
        if (job->move_queries)
            pd_move_query_release(&job->move_queries[i]);
        if (job->move_reqs)
            pd_move_req_free(&job->move_reqs[i]);
        if (job->move_results)
            pd_move_result_free(&job->move_results[i]);
    }
    if (job->move_reqs || job->move_queries || job->move_results || job->items) {
        free(job->move_reqs);
        free(job->move_queries);
        free(job->move_results);
        free(job->items);
        job->move_reqs = NULL;
        job->move_queries = NULL;
        job->move_results = NULL;
        job->items = NULL;
        job->n_moves = 0;
    }
    if (job->answer) {
        free(job->answer);
        job->answer = NULL;
        job->answer_len = 0;
    }
}

void pd_job_free(pd_job *job)
{
    if (!job)
        return;
    pd_job_clear(job);
    free(job);
}

void pd_job_move_fail(pd_move_result *r, pd_status st)
{
    r->status = st;
    snprintf(r->message, sizeof r->message, "%s", pd_status_name(st));
}

void pd_job_settle_status(pd_job *job)
{
    pd_status st = job->task.status;
    job->path.status = st;
    job->route.status = st;
    job->update.status = st;
    if (st != PD_OK && st != PD_PARTIAL) {
        const char *why = st == PD_CANCELLED ? "cancelled before a worker finished it"
                          : st == PD_DEADLINE_EXCEEDED ? "its deadline passed before a worker finished it"
                                                       : pd_status_name(st);
        if (!job->path.message[0])
            snprintf(job->path.message, sizeof job->path.message, "%s", why);
        if (!job->route.message[0])
            snprintf(job->route.message, sizeof job->route.message, "%s", why);
    }
    if (st != PD_OK && pd_request_is_scene_change(job->kind) && job->change_out.change.status == PD_OK) {
        job->change_out.change.status = st;
        snprintf(job->change_out.change.message, sizeof job->change_out.change.message, "%s", pd_status_name(st));
    }
    if (st != PD_OK)
        for (size_t i = 0; i < job->n_moves; i++)
            if (job->move_results[i].status == PD_OK)
                pd_job_move_fail(&job->move_results[i], st);
}

uint64_t pd_job_search_us(const pd_job *job)
{
    /* Only one of path, route and the movement queries ever ran. */
    uint64_t us = job->path.metrics.micros + job->route.metrics.micros;
    for (size_t i = 0; i < job->n_moves; i++)
        us += job->move_results[i].micros;
    return us;
}

uint64_t pd_job_expanded(const pd_job *job)
{
    /* Only one of the two ever searched. */
    return job->path.metrics.expanded + job->route.metrics.expanded;
}

void pd_job_drop_results(pd_job *job)
{
    pd_path_result_free(&job->path);
    pd_route_result_free(&job->route);
    for (size_t i = 0; job->move_results && i < job->n_moves; i++)
        pd_move_result_free(&job->move_results[i]);
}
