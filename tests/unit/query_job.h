/*
 * query_job.h - for tests of the query layer through the worker pool: the
 * server's own job (pd_job.h, the one struct; no copy here) run as a pool
 * task through its kind's run hook (pd_kind_of(kind)->run, as the server's
 * dispatch runs it), the pool's thread ops for query scratches, and
 * run_now, which runs a job's query on the calling thread with no pool.
 *
 * A test fills the job as its kind's prepare would (path_query, scene;
 * route_query, world; update_req, store) and reads the kind's result
 * (job->path, job->route, job->update) and the task's status.
 */
#ifndef QUERY_JOB_H
#define QUERY_JOB_H

#include <stdlib.h>
#include <string.h>

#include "pd_job.h"
#include "pd_kind.h"
#include "pd_pool.h"
#include "pd_query.h"

/* What the server's dispatch and the kind's prepare set before a job runs:
 * its kind's descriptor, and path_query.avoid borrowing the job's owned
 * avoid array. Called as the job starts, so a test that fills the job by
 * hand or submits its task directly needs no step of its own. */
static inline void qj_prepare(pd_job *job)
{
    job->ops = pd_kind_of(job->kind);
    if (job->kind == PD_REQ_FIND_PATH)
        job->path_query.avoid = job->avoid;
}

static inline pd_status qj_task_run(pd_task *task, void *scratch)
{
    pd_job *job = (pd_job *)task;
    pd_query_control ctl = {pd_task_poll, task, job->jump_points};
    qj_prepare(job);
    return job->ops->run(job, scratch, &ctl);
}

/* A zeroed FindPath job (set kind before submitting for another). */
static inline pd_job *qj_new(void)
{
    return pd_job_new(PD_REQ_FIND_PATH, qj_task_run);
}

/* The job once it is back from the pool. */
static inline pd_job *qj_settled(pd_task *task)
{
    return (pd_job *)task;
}

/* Submits the job; update jobs are ordered, as the server does. */
static inline pd_status qj_submit(pd_pool *pool, pd_job *job)
{
    if (!job)
        return pd_pool_submit(pool, NULL);
    job->task.ordered = job->kind == PD_REQ_UPDATE_CELLS;
    return pd_pool_submit(pool, &job->task);
}

/* Runs the job's query here and now, with a scratch of its own. */
static inline pd_job *run_now(pd_job *job)
{
    pd_query_scratch *scratch = pd_query_scratch_create();
    pd_query_control ctl = {NULL, NULL, job->jump_points};
    qj_prepare(job);
    job->task.status = job->ops->run(job, scratch, &ctl);
    pd_query_scratch_destroy(scratch);
    return job;
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
