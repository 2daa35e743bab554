/*
 * pd_pool.c - the worker pool (see pd_pool.h): threads, job queue,
 * completion queue, cancels, deadlines and per-thread statistics.
 *
 * Locking: one pool mutex guards the job queue, every worker's `current`
 * pointer and every worker's statistics; a second mutex guards the
 * completion list so the loop thread taking results never waits for a
 * submit or a cancel. A worker clears `current` under the pool mutex before
 * it pushes the job onto the completion list: from that moment the loop
 * thread may free the job, so cancel must no longer be able to reach it.
 *
 * Each worker creates its search context on its own thread (its memory is
 * first touched there) and keeps it, and a growing path buffer, for every
 * job it runs: after warm-up a job allocates only its exact-size result.
 */
#include "pd_pool.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pd_path.h"

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
} pd__worker;

struct pd_pool {
    pthread_mutex_t lock;     /* job queue, workers' current and stats */
    pthread_cond_t work_ready;
    pd_job *queue_head, *queue_tail;
    uint32_t queue_len;
    uint32_t queue_capacity;
    atomic_int stopping;      /* written under lock, also read lock-free by poll */
    int paused;               /* guarded by lock; see pd_pool_set_paused */

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
    pd_point *buf;
    size_t cap;
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
 * re-searching) when the path does not fit, then hands the job an exact-size
 * copy in the requested waypoint style. */
static pd_status pd__search(const pd_pool *p, pd__scratch *s, pd_job *job)
{
    if (!s->ctx)
        s->ctx = pd_search_ctx_create();
    if (!s->ctx || pd__scratch_reserve(s, PD_POOL_INITIAL_PATH_CAP) != 0)
        return PD_INTERNAL;

    pd__poll_ctx pc = {p, job};
    pd_search_params params = job->params;
    params.poll = pd__poll;
    params.poll_user = &pc;

    pd_status st = pd_search_astar(s->ctx, job->scene->grid, &params, s->buf, s->cap,
                                   &job->metrics);
    size_t len = job->metrics.path_len;
    if (st == PD_BUFFER_TOO_SMALL) {
        if (pd__scratch_reserve(s, len) != 0)
            return PD_INTERNAL;
        st = pd_search_extract(s->ctx, s->buf, s->cap, &len);
    }
    if ((st != PD_OK && st != PD_PARTIAL) || len == 0)
        return st;

    if (job->style == PD_STYLE_CORNERS)
        len = pd_path_corners(s->buf, len);
    job->path = malloc(len * sizeof *job->path);
    if (!job->path)
        return PD_INTERNAL;
    memcpy(job->path, s->buf, len * sizeof *job->path);
    job->path_len = len;
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

static void pd__run_job(pd_pool *p, pd__worker *w, pd__scratch *s, pd_job *job)
{
    uint64_t started = pd_pool_now_ns();
    pd_status st = pd__job_interrupt(p, job);
    if (st == PD_OK)
        st = pd__search(p, s, job);
    job->status = st;
    job->finished_ns = pd_pool_now_ns();

    pthread_mutex_lock(&p->lock);
    w->current = NULL;
    w->stats.jobs_done++;
    if (st == PD_OK || st == PD_PARTIAL)
        w->stats.paths_found++;
    w->stats.expansions += job->metrics.expanded;
    w->stats.busy_ns += job->finished_ns - started;
    pthread_mutex_unlock(&p->lock);

    pd__complete(p, job);
    if (p->wake)
        p->wake(p->wake_user);
}

/* Unlinks the job a worker should run next: the queue head, or while the
 * pool is paused the first cancelled job (it only needs its CANCELLED answer).
 * Returns NULL when there is none. Caller holds p->lock. */
static pd_job *pd__take_job(pd_pool *p)
{
    pd_job *prev = NULL, *job = p->queue_head;
    if (p->paused)
        for (; job && !atomic_load(&job->cancelled); prev = job, job = job->next)
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
    return job;
}

static void *pd__worker_main(void *arg)
{
    pd__worker *w = arg;
    pd_pool *p = w->pool;
    pd__scratch s = {pd_search_ctx_create(), NULL, 0};

    pthread_mutex_lock(&p->lock);
    for (;;) {
        pd_job *job = NULL;
        while (!atomic_load(&p->stopping) && !(job = pd__take_job(p)))
            pthread_cond_wait(&p->work_ready, &p->lock);
        if (atomic_load(&p->stopping)) {
            if (job) { /* put it back: destroy answers every queued job */
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

        pd__run_job(p, w, &s, job);

        pthread_mutex_lock(&p->lock);
    }
    pthread_mutex_unlock(&p->lock);

    pd_search_ctx_destroy(s.ctx);
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
    if (!p || !job || !job->scene || !job->scene->grid)
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
    for (uint32_t i = 0; i < p->n_workers; i++) {
        const pd__worker *w = &p->workers[i];
        if (w->current)
            out->running++;
        out->jobs_done += w->stats.jobs_done;
        out->paths_found += w->stats.paths_found;
        out->expansions += w->stats.expansions;
        out->busy_ns += w->stats.busy_ns;
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
