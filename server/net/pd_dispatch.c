/*
 * pd_dispatch.c - a frame's way through the server: decode, look the kind
 * up in the request-kind table (pd_kind.h: its role, where it runs), and
 * answer at once - the kinds the server serves itself, in one switch - or
 * prepare a job (the kind's prepare, against the snapshot) and submit it to
 * the worker pool; encode the job's result when it comes back.
 *
 * A job (pd_job.h) is a pd_task (the pool's opaque unit of work) with the
 * query and result of one request kind around it; the pool runs it with
 * the worker's pd_query_scratch as its thread context and knows nothing
 * else about it; after each job the worker trims that scratch to the
 * configured retained size (limits.worker_retained_bytes).
 * The connection and request ids travel as the task's owner and tag, so a
 * result whose connection has gone is dropped and a closed connection's
 * queued jobs are cancelled by owner.
 *
 * A Batch is a job that is never submitted: each of its items is a task of
 * its own (pd_job_item), queued, charged and counted like the same request
 * sent alone, and the batch answers in one frame once its last item is
 * back (pd__handle_batch).
 *
 * Everything here runs on the loop thread except pd__run_job, pd__run_item
 * (and the kinds' run hooks they call) and the thread ops, which run on
 * workers.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_clock.h"
#include "pd_dispatch.h"
#include "pd_job.h"
#include "pd_kind.h"
#include "pd_kind_reserve.h"
#include "pd_log.h"
#include "pd_movement.h"
#include "pd_query.h"
#include "pd_replica.h"
#include "pd_scene_reserve.h"
#include "pd_server_internal.h"

/* Fair queueing keys (pd__submit): a job's start tag shifted by this many
 * bits, and below it its connection's jobs in flight, capped at
 * PD__FAIR_TIE_MAX, to break ties. 48 bits of start tags are 2^48 requests. */
#define PD__FAIR_TIE_BITS 16
#define PD__FAIR_TIE_MAX ((1u << PD__FAIR_TIE_BITS) - 1u)

/* Sets job up as a new job of connection c for request_id. */
static void pd__job_setup(pd_job *job, pd__conn *c, uint64_t request_id, pd_request_kind kind, pd_task_run_fn run)
{
    pd_task_init(&job->task, run);
    job->kind = kind;
    job->ops = pd_kind_of(kind);
    job->task.owner = c->id;
    job->task.tag = request_id;
    job->arrival_ns = c->server->dispatch.answering_since_ns;
    job->jump_points = c->server->conf.jump_point_search;
    job->max_chunk = c->server->conf.max_waypoints_per_chunk;
}

static pd_job *pd__job_new(pd__conn *c, uint64_t request_id, pd_request_kind kind, pd_task_run_fn run)
{
    pd_job *job = pd_job_new(kind, run);
    if (job)
        pd__job_setup(job, c, request_id, kind, run);
    return job;
}

/* The job and the server's wire it may hold. */
static void pd__job_free(pd_job *job)
{
    if (!job)
        return;
    pd__wire_release(job->wire);
    pd_job_free(job);
}

/* ---- on the workers ---------------------------------------------------- */

/* The answer to a finished job with its timing, taken now: whoever encodes
 * it (its worker, or the loop) hands it to the socket next. NULL when
 * encoding ran out of memory. */
static uint8_t *pd__encode_job(pd_job *job, size_t *len)
{
    uint8_t *buf = pd_codec_encode_job(job, len);
    pd__stamp_answer(&buf, len, job->arrival_ns, pd_job_search_us(job));
    return buf;
}

/* Settles and encodes a finished job's answer on the worker that ran it
 * (every run function ends here): the loop thread, which every request and
 * answer passes through, is the server's narrowest stage under load, and
 * then only queues the bytes. */
static pd_status pd__answer_on_worker(pd_job *job, pd_status st)
{
    job->task.status = st;
    pd_job_settle_status(job);
    job->answer = pd__encode_job(job, &job->answer_len);
    if (job->answer) {
        job->answer_sent = pd__wire_try_send(job->wire, job->answer, job->answer_len, 1);
        /* The answer holds what the loop needs now. What the search
         * allocated goes back here, to this worker's malloc arena: freed on
         * the loop it would take that arena's lock against this worker's
         * next search. */
        pd_job_drop_results(job);
    }
    return st;
}

/* Every job's task: its kind's run, then its answer encoded here. */
static pd_status pd__run_job(pd_task *task, void *scratch)
{
    pd_job *job = (pd_job *)task;
    pd_query_control ctl = {pd_task_poll, task, job->jump_points};
    return pd__answer_on_worker(job, job->ops->run(job, scratch, &ctl));
}

/* One more of the batch's items has its result: the last one encodes the
 * batch's answer, on the worker that ran it when a worker did (as a job's
 * answer is), and gives back what the items' searches allocated. Runs on a
 * worker, or on the loop for an item that never ran (and for the hold the
 * loop keeps while it submits). */
static void pd__item_settled(pd_job *batch)
{
    if (atomic_fetch_sub(&batch->items_left, 1) != 1)
        return;
    batch->answer = pd__encode_job(batch, &batch->answer_len);
    if (batch->answer)
        for (size_t i = 0; i < batch->n_moves; i++)
            pd_move_result_free(&batch->move_results[i]);
}

/* One item of a Batch: its query polls this task (its own deadline, and
 * the batch's cancel) while it searches. */
static pd_status pd__run_item(pd_task *task, void *scratch)
{
    pd_job_item *item = (pd_job_item *)task;
    pd_job *batch = item->batch;
    item->ran = 1;
    pd_status st = pd_move_run(scratch, &batch->move_queries[item->index], &batch->move_results[item->index]);
    pd__item_settled(batch);
    return st;
}

static void *pd__scratch_create(void *user)
{
    (void)user;
    return pd_query_scratch_create();
}

static void pd__scratch_destroy(void *scratch)
{
    pd_query_scratch_destroy(scratch);
}

static size_t pd__scratch_trim(void *scratch, void *user)
{
    pd_server *s = user;
    return pd_query_scratch_trim(scratch, atomic_load(&s->dispatch.worker_retained_bytes));
}

static const pd_pool_thread_ops pd__thread_ops = {
    pd__scratch_create,
    pd__scratch_destroy,
    pd__scratch_trim,
};

/* Workers that can fill every core yield between tasks every
 * limits.worker_yield_us, so the loop thread gets a core soon after it
 * wakes rather than at the end of a worker's time slice; with a core to
 * spare for the loop they never need to (docs/ARCHITECTURE.md, "Threads"). */
static uint64_t pd__yield_interval_ns(const pd_conf *conf, uint32_t threads)
{
    return threads >= uv_available_parallelism() ? (uint64_t)conf->worker_yield_us * 1000u : 0;
}

pd_pool *pd__dispatch_pool_create(pd_server *s, uint32_t threads, pd_pool_wake_fn wake, void *wake_arg)
{
    pd_pool *pool = pd_pool_create(threads, s->conf.job_queue_capacity, &pd__thread_ops, s, wake, wake_arg);
    pd_pool_set_yield_interval(pool, pd__yield_interval_ns(&s->conf, threads));
    return pool;
}

void pd__dispatch_apply_conf(pd_server *s)
{
    pd_pool_stats st;
    pd_pool_get_stats(s->pool, &st);
    pd_pool_set_yield_interval(s->pool, pd__yield_interval_ns(&s->conf, st.threads));
}

/* The pool's tasks given back at its end: a batch goes with its last item. */
static void pd__free_tasks(pd_task *task)
{
    while (task) {
        pd_task *next = task->next;
        if (task->run == pd__run_item) {
            pd_job *batch = ((pd_job_item *)task)->batch;
            if (--batch->items_out == 0)
                pd__job_free(batch);
        } else if (task->run == pd_kind_reserve_sweep_run) {
            pd_kind_reserve_sweep_free((pd_reserve_sweep *)task);
        } else {
            pd__job_free((pd_job *)task);
        }
        task = next;
    }
}

void pd__dispatch_pool_destroy(pd_pool *pool)
{
    pd__free_tasks(pd_pool_destroy(pool));
}

/* ---- requests ---------------------------------------------------------- */

/* Answers OVERLOADED when `weight` more requests (a batch's items) would
 * take the connection past its in-flight limit; returns 1 when the request
 * may go on. */
/* The refusal of one request past the in-flight cap (pd__inflight_ok,
 * pd__refused_unpacked), given the count in flight. */
#define PD__FULL_MESSAGE "%" PRIu32 " requests already in flight on this connection (the limit)"

static int pd__inflight_ok(pd__conn *c, uint64_t id, size_t weight)
{
    uint32_t limit = c->server->conf.max_inflight_per_conn;
    uint32_t waiting = pd__conn_waiting(c);
    if (waiting < limit && weight <= limit - waiting)
        return 1;
    pd_metrics_observe_overloaded(c->server->metrics, PD_METRICS_LIMIT_CONN_IN_FLIGHT);
    if (weight > 1)
        pd__send_error(c, id, PD_OVERLOADED,
                       "%zu queries with %" PRIu32 " already in flight exceed this connection's limit of %" PRIu32,
                       weight, waiting, limit);
    else
        pd__send_error(c, id, PD_OVERLOADED, PD__FULL_MESSAGE, waiting);
    return 0;
}

/* Hands a task of connection c to the pool and counts it in flight (one
 * slot), or returns why not: the pool's refusal (pd__refusal).
 *
 * Fairness between connections is start-time fair queueing (Goyal, Vin
 * and Cheng, SIGCOMM 1996): a task's start tag is its connection's previous
 * finish tag or the pool's virtual time (the start tag of the task a worker
 * took last), whichever is later; its finish tag adds its cost, one per
 * request (a Batch's items are requests of their own); the pool runs the
 * lowest start tag first. A client that was idle starts at the virtual
 * time, so it is served next after what is running, however many a busy
 * client has queued. Ordering by finish tags instead would put it behind
 * one queued task of every busy client. Among equal start tags the
 * connection with fewer tasks in flight goes first: the key carries the
 * start tag above PD__FAIR_TIE_BITS and that count below. */
static pd_status pd__enqueue(pd__conn *c, pd_task *task)
{
    pd_server *s = c->server;
    uint64_t now = pd_pool_virtual_time(s->pool) >> PD__FAIR_TIE_BITS;
    uint64_t start = c->fair_key > now ? c->fair_key : now;
    uint64_t backlog = c->in_flight < PD__FAIR_TIE_MAX ? c->in_flight : PD__FAIR_TIE_MAX;
    task->key = start << PD__FAIR_TIE_BITS | backlog;
    pd_status st = pd_pool_submit(s->pool, task);
    if (st != PD_OK)
        return st;
    c->fair_key = start + 1;
    c->in_flight++;
    s->dispatch.in_flight++;
    return PD_OK;
}

/* The answer to a request the pool refused with st (pd__enqueue): its
 * status, with why in msg. A full queue is counted by its limit. */
static pd_status pd__refusal(pd_server *s, pd_status st, char *msg, size_t len)
{
    if (st == PD_DEADLINE_EXCEEDED) {
        snprintf(msg, len, "the work queued ahead would outlast this request's deadline");
        return st;
    }
    pd_metrics_observe_overloaded(s->metrics, PD_METRICS_LIMIT_JOB_QUEUE);
    snprintf(msg, len, "job queue full (%" PRIu32 " jobs)", s->conf.job_queue_capacity);
    return PD_OVERLOADED;
}

/* Hands a job to the pool (pd__enqueue), or answers why not and frees it. */
static void pd__submit(pd__conn *c, pd_job *job)
{
    pd_server *s = c->server;
    uint64_t id = job->task.tag;
    /* A connection with nothing else in flight is waiting on this answer
     * alone: batching its completion with the worker's next tasks would
     * only delay it (by up to a whole search), and saves no wakeup. */
    job->task.hand_over_at_once = c->in_flight == 0;
    if (job->task.hand_over_at_once)
        job->wire = pd__wire_retain(c->wire);
    /* The store hears of each ordered job in its lane's order, so it may
     * append a scene's queued updates together (pd_kind_lane_submit). */
    pd_kind_lane_submit(job, s->store);
    pd_status st = pd__enqueue(c, &job->task);
    pd_kind_lane_submitted(job, s->store, st == PD_OK);
    if (st != PD_OK) {
        char msg[PD__MESSAGE_MAX];
        pd__job_free(job);
        st = pd__refusal(s, st, msg, sizeof msg);
        pd__send_error(c, id, st, "%s", msg);
    }
}

/* Counts an answered request in the server's totals and /metrics; since_ns
 * is when its frame arrived (or its job was submitted). Its latency is
 * observed unless `untimed` (it named no served scene: a refusal). */
static void pd__count_answer(pd_server *s, pd_request_kind kind, pd_status status, uint64_t expanded,
                             const char *scene, int untimed, uint64_t since_ns)
{
    if ((status == PD_OK || status == PD_PARTIAL) && pd_kind_of(kind)->counts_paths)
        s->dispatch.paths_found++;
    s->dispatch.expansions_total += expanded;
    pd_metrics_observe(s->metrics, kind, status, expanded);
    if (!untimed)
        pd_metrics_observe_duration(s->metrics, kind, scene, (pd_pool_now_ns() - since_ns) / 1000u);
}

/* Counts a finished job (or one answered on the loop) as its kind says:
 * its status, expansions and scene label. */
static void pd__count_job(pd_server *s, const pd_job *job, uint64_t since_ns)
{
    const pd_kind *k = job->ops;
    pd_status st = k->status ? k->status(job) : job->task.status;
    pd__count_answer(s, job->kind, st, pd_job_expanded(job), k->scene ? k->scene(job) : NULL,
                     k->unserved ? k->unserved(job) : 0, since_ns);
}

/* What a kind's prepare may read of the server. */
static pd_kind_env pd__kind_env(const pd_server *s)
{
    pd_kind_env env = {s->registry, s->world_store, s->store, s->conf.default_max_expansions};
    return env;
}

/* Jump points a lone request may spend on the loop (pd__answer_inline):
 * den520d's searches take a few hundred; one jump point's scans are bounded
 * by the map's width in 64-cell words. */
#define PD__INLINE_LONE_JUMP_POINTS 2048u

/* Answers a prepared job on the loop thread when its kind can finish it
 * within limits.inline_max_expansions (FindPath: pd_query_find_path_small):
 * a request with its goal a few cells away costs less than the futex and
 * eventfd wakeups of a worker's round trip, so it takes none. Returns 0
 * when it must go to a worker after all, having spent at most that many
 * expansions. */
static int pd__answer_inline(pd__conn *c, pd_job *job)
{
    pd_server *s = c->server;
    if (s->conf.inline_max_expansions == 0)
        return 0;
    if (!s->dispatch.inline_scratch && !(s->dispatch.inline_scratch = pd_query_scratch_create()))
        return 0;
    /* A connection with nothing else in flight and nothing more read (a
     * game server asking one path at a time) is searched here as a worker
     * would, within PD__INLINE_LONE_JUMP_POINTS: under overload its
     * request would otherwise wait for a worker that has a core, behind
     * whatever the workers run, while the loop, which has the core now,
     * reads on (issue 30, item 5). A pipelining connection keeps the small
     * budget, its backlog going to the workers in fair turns: the bytes of
     * its next frames already read say so even while each one before was
     * answered here and left nothing in flight. */
    const int lone = pd__conn_waiting(c) == 0 && pd_frame_reader_pending(&c->reader) == 0;
    const uint64_t budget = lone && s->conf.inline_max_expansions < PD__INLINE_LONE_JUMP_POINTS
                                ? PD__INLINE_LONE_JUMP_POINTS
                                : s->conf.inline_max_expansions;
    const int answered = job->ops->run_inline(job, s->dispatch.inline_scratch, budget, lone);
    /* Small searches all over a large map would otherwise keep a node
     * block for every area they touched: the loop's scratch keeps what a
     * worker's does. */
    pd_query_scratch_trim(s->dispatch.inline_scratch, s->conf.worker_retained_bytes);
    if (!answered)
        return 0;
    s->dispatch.answering_search_us = pd_job_search_us(job);
    pd__count_job(s, job, job->arrival_ns);
    size_t len = 0;
    uint8_t *buf = pd_codec_encode_job(job, &len);
    pd__conn_send(c, buf, len);
    return 1;
}

/* A kind that runs on a worker (pd_kind.runs WORKER or LANE): checked
 * against the snapshot current now by its prepare, which takes what the
 * job needs from the request; refused at once with prepare's status, else
 * answered on the loop when the kind can do that cheaply, else queued (an
 * ordered task in its scene's lane for LANE). */
/* A replica's scene behind a request's min_version: the frame waits for
 * the tail (pd_replica.c) up to limits.max_behind_wait_ms from its first
 * dispatch; 1 when parked (nothing to answer now), 0 when the
 * STALE_VERSION is to be answered (no replica, the wait is over, or it
 * cannot wait). */
static int pd__park_behind(pd__conn *c)
{
    pd_server *s = c->server;
    if (!s->replica || !s->dispatch.frame || s->conf.max_behind_wait_ms == 0)
        return 0;
    uint64_t now = uv_hrtime();
    uint64_t deadline = s->dispatch.park_deadline_ns
                            ? s->dispatch.park_deadline_ns
                            : now + (uint64_t)s->conf.max_behind_wait_ms * 1000000u;
    if (now >= deadline ||
        pd__replica_park(s->replica, c->id, s->dispatch.frame, s->dispatch.frame_len, s->dispatch.frame_arrival_ns,
                         deadline) != 0) {
        pd__replica_count_behind(s->replica);
        return 0;
    }
    return 1;
}

/* A query's min_version (0: none, or a kind without one): a replica parks
 * an unknown scene only for a query that names a version of it (the scene
 * may be made on another replica and not have reached this one yet). */
static uint64_t pd__request_min_version(const pd_request *req)
{
    if (req->kind == PD_REQ_FIND_PATH)
        return req->u.find_path.min_version;
    if (pd_request_is_move(req->kind))
        return req->u.move.min_version;
    return 0;
}

/* The scene a prepared job is about, for a replica's refusal. */
static const char *pd__job_scene_name(const pd_job *job)
{
    if (job->scene)
        return job->scene->name;
    if (job->kind == PD_REQ_UPDATE_CELLS)
        return job->update_req.scene;
    if (pd_request_is_scene_change(job->kind))
        return job->change.name;
    return NULL;
}

void pd__dispatch_parked(pd__conn *c, const uint8_t *payload, size_t len, uint64_t arrival_ns,
                         uint64_t deadline_ns)
{
    pd_server *s = c->server;
    s->dispatch.requests_total--; /* counted when it first came */
    s->dispatch.park_deadline_ns = deadline_ns;
    pd__dispatch_frame(c, payload, len, arrival_ns);
    s->dispatch.park_deadline_ns = 0;
}

static void pd__handle_job(pd__conn *c, pd_request *req, const pd_kind *k)
{
    pd_server *s = c->server;
    if (!pd__inflight_ok(c, req->id, k->weight ? k->weight(req) : 1))
        return;
    /* A kind that may be answered on the loop is prepared in the loop's
     * own job, reused from one request to the next: its prepare and inline
     * run overwrite all they read (pd_query_path_prepare and
     * pd_query_find_path_small start from zero), and pd_job_clear gives back
     * what they took. Only when it must go to a worker does it move to a
     * job of its own. */
    const int try_inline = k->run_inline && s->conf.inline_max_expansions > 0 &&
                           (s->dispatch.inline_job || (s->dispatch.inline_job = calloc(1, sizeof *s->dispatch.inline_job)));
    pd_job *job;
    if (try_inline) {
        job = s->dispatch.inline_job;
        pd__job_setup(job, c, req->id, req->kind, pd__run_job);
    } else if (!(job = pd__job_new(c, req->id, req->kind, pd__run_job))) {
        pd__send_error(c, req->id, PD_INTERNAL, "out of memory");
        return;
    }
    job->task.ordered = k->runs == PD_KIND_LANE;
    pd_kind_env env = pd__kind_env(s);
    pd_kind_refusal why;
    why.message[0] = '\0';
    why.version = 0;
    pd_status st = k->prepare(job, req, &env, &why);
    const char *scene_name = st == PD_OK && s->replica ? pd__job_scene_name(job) : NULL;
    if (scene_name && pd__replica_refuses(s->replica, scene_name, why.message, sizeof why.message))
        st = PD_UNAVAILABLE;
    if (st != PD_OK) {
        if ((st == PD_STALE_VERSION || (st == PD_UNKNOWN_SCENE && pd__request_min_version(req) > 0)) &&
            pd__park_behind(c))
            ; /* answered when the tail catches up, or its wait ends */
        else if (st == PD_STALE_VERSION)
            pd__send_stale(c, req->id, why.version, why.message);
        else
            pd__send_error(c, req->id, st, "%s", why.message);
        if (try_inline)
            pd_job_clear(job);
        else
            pd__job_free(job);
        return;
    }
    if (try_inline) {
        if (pd__answer_inline(c, job)) {
            pd_job_clear(job);
            return;
        }
        pd_job *own = malloc(sizeof *own);
        if (!own) {
            pd__send_error(c, req->id, PD_INTERNAL, "out of memory");
            pd_job_clear(job);
            return;
        }
        /* The job's references and arrays go with it: the loop's job is
         * left holding none. */
        memcpy(own, job, sizeof *own);
        memset(job, 0, sizeof *job);
        job = own;
    }
    pd__submit(c, job);
}

/* Counts item i of a batch in the server's totals and /metrics as the same
 * request sent alone would be: by its kind, with its status and
 * expansions, and its latency since since_ns unless `untimed` (refused
 * before it was queued, as such a request would be at the door). */
static void pd__count_item(pd_server *s, const pd_job *batch, size_t i, int untimed, uint64_t since_ns)
{
    const pd_move_req *item = &batch->move_reqs[i];
    const pd_move_result *r = &batch->move_results[i];
    uint64_t expanded = r->path.metrics.expanded; /* 0 but for a FindPath item */
    if (r->status == PD_OVERLOADED)
        s->dispatch.overloaded_total++;
    pd__count_answer(s, item->kind, r->status, expanded, item->scene, untimed, since_ns);
}

/* Item i of a batch, prepared (pd_kind_batch_prepare_item), as a task of
 * its own with its deadline. Returns 1 when the pool holds it, 0 when it
 * is refused (its result says why). */
static int pd__submit_item(pd__conn *c, pd_job *batch, size_t i, uint64_t deadline_ns)
{
    pd_server *s = c->server;
    pd_job_item *item = &batch->items[i];
    pd_move_result *r = &batch->move_results[i];
    pd_task_init(&item->task, pd__run_item);
    item->task.owner = batch->task.owner;
    item->task.tag = batch->task.tag;
    item->task.deadline_ns = deadline_ns;
    item->batch = batch;
    item->index = i;
    batch->move_queries[i].control = (pd_query_control){pd_task_poll, &item->task, batch->jump_points};
    pd_status st = pd__enqueue(c, &item->task);
    if (st == PD_OK)
        return 1;
    r->status = pd__refusal(s, st, r->message, sizeof r->message);
    return 0;
}

/* Answers a batch whose items all have their results (and so its answer,
 * or NULL when encoding ran out of memory), unless its connection has
 * gone; counts it as a Batch frame (its items were counted as they
 * finished); frees it. */
static void pd__finish_batch(pd_server *s, pd_job *batch);

/* A Batch: each item is checked against the scene current now
 * (pd_move_prepare) and, unless that refuses it, becomes a task of its own
 * (pd_job_item) queued like the same request sent alone - its own fair
 * queueing start tag, in-flight slot, budget and deadline - so a batch's
 * items interleave with other connections' requests as single requests
 * would, and many workers may share one batch. The batch itself, a job
 * never submitted, holds the items' queries and results and answers in
 * one BatchResult once the last item is back. A batch of more items than
 * the in-flight cap could never be admitted: LIMIT_EXCEEDED, naming it
 * (GetLimits' max_batch_items says it); one that does not fit beside what
 * the connection has in flight now is OVERLOADED as a whole. */
/* 1 when an item of the batch names a version (min_version) of its scene
 * that this replica does not serve yet, or a scene it does not serve. */
static int pd__batch_behind(pd_server *s, const pd_job *batch, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const pd_move_req *item = &batch->move_reqs[i];
        if (item->status != PD_OK || item->min_version == 0)
            continue;
        pd_scene *scene = pd_registry_acquire(s->registry, item->scene);
        int behind = !scene || scene->version < item->min_version;
        pd_scene_release(scene);
        if (behind)
            return 1;
    }
    return 0;
}

static void pd__handle_batch(pd__conn *c, pd_request *req, const pd_kind *k, uint64_t arrival_ns)
{
    pd_server *s = c->server;
    size_t n = k->weight(req);
    if (n > s->conf.max_inflight_per_conn) {
        pd__send_error(c, req->id, PD_LIMIT_EXCEEDED,
                       "a Batch of %zu items is over limits.max_inflight_per_conn (%" PRIu32
                       "): each item takes one in-flight slot; GetLimits.max_batch_items is the largest batch",
                       n, s->conf.max_inflight_per_conn);
        return;
    }
    if (!pd__inflight_ok(c, req->id, n))
        return;
    pd_job *batch = pd__job_new(c, req->id, req->kind, NULL);
    pd_kind_env env = pd__kind_env(s);
    pd_kind_refusal why;
    why.message[0] = '\0';
    pd_status st = batch ? k->prepare(batch, req, &env, &why) : PD_INTERNAL;
    if (st != PD_OK) {
        pd__send_error(c, req->id, st, "%s", why.message[0] ? why.message : "out of memory");
        pd__job_free(batch);
        return;
    }
    /* A replica behind an item's min_version parks the whole frame, as it
     * parks a FindPath sent alone: answered once the tail caught up, or
     * its wait ended (the items behind then answer STALE_VERSION). */
    if (s->replica && pd__batch_behind(s, batch, n) && pd__park_behind(c)) {
        pd__job_free(batch);
        return;
    }
    batch->task.submitted_ns = arrival_ns;
    s->dispatch.requests_total += n;
    /* The loop's hold: no item's worker encodes the answer before every
     * item is submitted or refused. */
    atomic_init(&batch->items_left, n + 1);
    for (size_t i = 0; i < n; i++) {
        uint64_t deadline_ns;
        if (pd_kind_batch_prepare_item(batch, i, &env, &deadline_ns) == PD_OK &&
            pd__submit_item(c, batch, i, deadline_ns)) {
            batch->items_out++;
            continue;
        }
        pd__count_item(s, batch, i, 1, arrival_ns);
        atomic_fetch_sub(&batch->items_left, 1);
    }
    pd__item_settled(batch);
    if (batch->items_out == 0)
        pd__finish_batch(s, batch);
}

/* The scene a read-only request names, retained, or NULL once its refusal
 * is sent: UNKNOWN_SCENE, or STALE_VERSION for a snapshot older than
 * min_version. */
static pd_scene *pd__acquire_fresh(pd__conn *c, uint64_t id, const char *name, uint64_t min_version)
{
    char err[PD_QUERY_MESSAGE_MAX];
    pd_scene *scene = pd_registry_acquire(c->server->registry, name);
    if (!scene) {
        if (min_version == 0 || !pd__park_behind(c))
            pd__send_error(c, id, PD_UNKNOWN_SCENE, "unknown scene '%s'", name);
        return NULL;
    }
    if (c->server->replica && pd__replica_refuses(c->server->replica, name, err, sizeof err)) {
        pd__send_error(c, id, PD_UNAVAILABLE, "%s", err);
        pd_scene_release(scene);
        return NULL;
    }
    if (pd_query_check_version(scene, min_version, err, sizeof err) != PD_OK) {
        if (!pd__park_behind(c))
            pd__send_stale(c, id, scene->version, err);
        pd_scene_release(scene);
        return NULL;
    }
    return scene;
}

/* GetSceneGrid: one band of rows of the scene grid (unit 1) or a unit grid,
 * read from the snapshot current now and answered on the loop thread. A band
 * is one memcpy per row of at most PD_SCENE_GRID_BAND_BYTES, cheap enough not
 * to need a worker; the client stitches bands together and starts over when
 * the version changes between them. */
static void pd__handle_scene_grid(pd__conn *c, const pd_request *req)
{
    const pd_scene_grid_req *gr = &req->u.grid;
    pd_scene *scene = pd__acquire_fresh(c, req->id, gr->scene, gr->min_version);
    if (!scene)
        return;
    const pd_grid *grid = scene->grid;
    if (gr->unit_size > 1) {
        const pd_scene_unit *unit = pd_scene_unit_for(scene, gr->unit_size);
        if (!unit) {
            pd__send_error(c, req->id, PD_INVALID_ARGUMENT, "scene '%s' does not serve unit size %" PRIu32,
                           scene->name, gr->unit_size);
            pd_scene_release(scene);
            return;
        }
        grid = unit->grid;
    }
    if (gr->row_start >= grid->height) {
        pd__send_error(c, req->id, PD_OUT_OF_BOUNDS, "row %" PRId32 " is outside scene '%s' (%" PRId32 " rows)",
                       gr->row_start, scene->name, grid->height);
        pd_scene_release(scene);
        return;
    }
    int32_t rows = grid->height - gr->row_start;
    int32_t band_rows = (int32_t)(PD_SCENE_GRID_BAND_BYTES / (uint32_t)grid->width);
    if (band_rows < 1)
        band_rows = 1;
    if (rows > band_rows)
        rows = band_rows;
    if (gr->row_count > 0 && rows > gr->row_count)
        rows = gr->row_count;
    size_t len = 0;
    uint8_t *buf = pd_codec_encode_scene_grid(req->id, grid, scene->version, gr->row_start, rows, &len);
    pd_scene_release(scene);
    pd__conn_send(c, buf, len);
}

/* What a connection may do under conf: everything while the server has
 * no tokens (it listens on loopback, or protected mode was turned off), else
 * what its Auth granted. */
static pd_role pd__conn_role_in(const pd__conn *c, const pd_conf *conf)
{
    return conf->n_tokens == 0 ? PD_ROLE_ADMIN : c->role;
}

static pd_role pd__conn_role(const pd__conn *c)
{
    return pd__conn_role_in(c, &c->server->conf);
}

/* A reload changes the tokens under open connections: each keeps what its
 * own token grants in the new config, looked up by the text the old config
 * holds at c->token (in constant time, like an Auth). A connection that
 * never authenticated while there were tokens had nothing to lose; one
 * served while there were none holds no token, so new tokens leave it
 * nothing. Nothing is read from a connection that is closing, lingering or
 * waiting out a wrong token's delay: it is left to that. */
void pd__auth_recheck(pd_server *s, const pd_conf *next)
{
    const pd_conf *old = &s->conf;
    for (pd__conn *c = s->table.conns; c; c = c->next) {
        if (c->closing || c->lingering || c->auth_failed_ms)
            continue;
        pd_role was = pd__conn_role_in(c, old);
        int token = -1;
        if (next->n_tokens > 0 && old->n_tokens > 0 && c->token >= 0) {
            const char *t = old->tokens[c->token].token;
            token = pd_conf_token_find(next, t, strlen(t));
        }
        pd_role now = next->n_tokens == 0 ? PD_ROLE_ADMIN : token >= 0 ? next->tokens[token].role : PD_ROLE_NONE;
        c->token = token;
        c->role = next->n_tokens == 0 ? PD_ROLE_NONE : now;
        /* Without tokens everyone may do everything: nothing to say. */
        if (now == was || was == PD_ROLE_NONE || next->n_tokens == 0)
            continue;
        char peer[PD_CONF_MAX_ADDRESS];
        if (now != PD_ROLE_NONE) {
            pd_log_info("conn %" PRIu64 " (%s): role %s -> %s: the reload changed auth.tokens", c->id,
                        pd__conn_peer(c, peer), pd_role_name(was), pd_role_name(now));
            continue;
        }
        pd_log_info("conn %" PRIu64 " (%s): role %s -> none: the reload changed auth.tokens; closing", c->id,
                    pd__conn_peer(c, peer), pd_role_name(was));
        pd__send_error(c, 0, PD_UNAUTHENTICATED,
                       "the reloaded configuration does not accept this connection's token%s; connect again and "
                       "send Auth",
                       old->n_tokens == 0 ? " (it had none: the server had no tokens)" : "");
        pd__conn_linger(c);
    }
}

/* Auth: the token's role, or - for a wrong token - nothing more read from
 * this connection, and the answer and close after
 * PD_SERVER_AUTH_FAIL_DELAY_MS (the sweep's job). Tokens are never logged. */
static void pd__handle_auth(pd__conn *c, const pd_request *req)
{
    pd_server *s = c->server;
    size_t len = 0;
    if (s->conf.n_tokens == 0) {
        uint8_t *buf = pd_codec_encode_auth(req->id, pd_role_name(PD_ROLE_ADMIN), &len);
        pd__observe(s, PD_OK);
        pd__conn_send(c, buf, len);
        return;
    }
    int token = pd_conf_token_find(&s->conf, req->u.auth.token, req->u.auth.len);
    pd_role role = token >= 0 ? s->conf.tokens[token].role : PD_ROLE_NONE;
    if (role == PD_ROLE_NONE) {
        pd_log_info("conn %" PRIu64 ": wrong token; closing in %d ms", c->id, PD_SERVER_AUTH_FAIL_DELAY_MS);
        c->auth_failed_ms = uv_now(s->loop);
        c->auth_failed_id = req->id;
        pd__conn_read_stop(c);
        return;
    }
    c->role = role;
    c->token = token;
    uint8_t *buf = pd_codec_encode_auth(req->id, pd_role_name(role), &len);
    pd__observe(s, PD_OK);
    pd__conn_send(c, buf, len);
}

static void pd__handle_request(pd__conn *c, pd_request *req, uint64_t arrival_ns)
{
    pd_server *s = c->server;
    size_t len = 0;
    uint8_t *buf;

    /* A draining replica takes nothing new: the client sends it on a new
     * connection, which the balancer gives another replica. Ping (which
     * says so), and Cancel and Unwatch (they end work already taken on)
     * are still served. */
    if (req->kind != PD_REQ_PING && req->kind != PD_REQ_CANCEL && req->kind != PD_REQ_UNWATCH &&
        s->dispatch.up.serving(s) == PD_SERVING_DRAINING) {
        /* The first one is logged at once: a balancer that still routes
         * new connections here is what an operator wants to see early. */
        if (s->dispatch.draining_refused++ == 0)
            pd_log_info("a new request refused DRAINING (the first of this drain; the drain's end "
                        "logs how many)");
        pd__send_error(c, req->id, PD_DRAINING, "this replica is draining: send it on a new connection");
        return;
    }
    const pd_kind *k = pd_kind_of(req->kind);
    pd_role have = pd__conn_role(c), need = k->role;
    if (have < need) {
        if (have == PD_ROLE_NONE)
            pd__send_error(c, req->id, PD_UNAUTHENTICATED,
                           "authenticate first: send Auth with a token (only Ping and Auth are served before)");
        else
            pd__send_error(c, req->id, PD_PERMISSION_DENIED, "role %s may not send %s (it needs %s)",
                           pd_role_name(have), pd_request_kind_name(req->kind), pd_role_name(need));
        return;
    }

    if (k->runs == PD_KIND_WORKER || k->runs == PD_KIND_LANE) {
        pd__handle_job(c, req, k);
        return;
    }
    if (k->runs == PD_KIND_BATCH) {
        pd__handle_batch(c, req, k, arrival_ns);
        return;
    }
    /* The kinds the server serves itself (PD_KIND_SERVED): they touch the
     * connection's or the server's state, or read a snapshot at once. */
    switch (req->kind) {
    case PD_REQ_AUTH:
        pd__handle_auth(c, req);
        return;
    case PD_REQ_RELOAD:
        s->dispatch.up.reload(s);
        buf = pd_codec_encode_ack(req->id, PD_OK, &len);
        break;
    case PD_REQ_CANCEL:
        if (pd_pool_cancel(s->pool, c->id, req->u.cancel_target))
            buf = pd_codec_encode_ack(req->id, PD_OK, &len);
        else {
            pd__send_error(c, req->id, PD_INVALID_ARGUMENT,
                           "no request %" PRIu64 " in flight on this connection", req->u.cancel_target);
            return;
        }
        break;
    case PD_REQ_LIST_SCENES: {
        pd_scene **list = NULL;
        size_t n = pd_registry_list(s->registry, &list);
        buf = pd_codec_encode_scene_list(req->id, list, n, &len);
        pd_registry_release_list(list, n);
        break;
    }
    case PD_REQ_SCENE_INFO: {
        pd_scene *scene = pd__acquire_fresh(c, req->id, req->u.scene_info.scene, req->u.scene_info.min_version);
        if (!scene)
            return;
        buf = pd_codec_encode_scene_info(req->id, scene, &len);
        pd_scene_release(scene);
        break;
    }
    case PD_REQ_SCENE_GRID:
        pd__handle_scene_grid(c, req);
        return;
    case PD_REQ_WATCH:
        pd__watch_start(c, req);
        return;
    case PD_REQ_UNWATCH:
        pd__watch_stop(c, req);
        return;
    case PD_REQ_STATS: {
        pd_server_stats st;
        s->dispatch.up.stats(s, &st);
        buf = pd_codec_encode_stats(req->id, &st, &len);
        break;
    }
    case PD_REQ_PING:
        buf = pd_codec_encode_pong(req->id, req->u.ping_nonce, s->dispatch.up.serving(s), &len);
        break;
    case PD_REQ_GET_LIMITS: {
        pd_codec_limits lim = {
            .max_frame_bytes = s->conf.max_frame_bytes,
            .max_inflight_per_conn = s->conf.max_inflight_per_conn,
            .max_waypoints_per_chunk = s->conf.max_waypoints_per_chunk,
            .max_connections = s->conf.max_connections,
            .job_queue_capacity = s->conf.job_queue_capacity,
            .idle_timeout_ms = s->conf.idle_timeout_ms,
            .frame_timeout_ms = s->conf.frame_timeout_ms,
            .default_max_expansions = s->conf.default_max_expansions,
            .max_message_bytes = PD__MESSAGE_MAX - 1,
            .watch_buffer_bytes = s->conf.watch_buffer_bytes,
            .max_watch_scenes = s->conf.max_watch_scenes,
            .max_watchers = s->conf.max_watchers,
            .max_watches_per_conn = s->conf.max_watches_per_conn,
            .reservation_ttl_ms = s->conf.reservation_ttl_ms,
            .max_agents_per_scene = s->conf.max_agents_per_scene,
            .max_reservation_entries = s->conf.max_reservation_entries,
            .max_reservation_window_ms = s->conf.max_reservation_window_ms,
            .max_agent_bytes = s->conf.max_agent_bytes,
            .max_clock_step_ms = s->conf.max_clock_step_ms,
        };
        pd_codec_limits_fixed(&lim);
        /* Each item takes an in-flight slot: a larger batch is refused
         * (pd__handle_batch). */
        if (lim.max_batch_items > s->conf.max_inflight_per_conn)
            lim.max_batch_items = s->conf.max_inflight_per_conn;
        buf = pd_codec_encode_limits(req->id, &lim, &len);
        break;
    }
    case PD_REQ_NONE:
    default:
        pd__send_error(c, req->id, PD_INVALID_ARGUMENT, "request has no body");
        return;
    }
    pd__observe(s, PD_OK);
    pd__conn_send(c, buf, len);
}

/* Between frames: what the server sends now answers no frame. */
static void pd__answered(pd_server *s)
{
    s->dispatch.answering = -1;
    s->dispatch.answering_conn = NULL;
}

/* A connection past its in-flight cap sends a request of a kind that
 * takes one slot (a FindPath, say): it is refused OVERLOADED as
 * pd__handle_job would refuse it, from the frame's scan alone
 * (pd_codec_peek_request), before protobuf-c unpacks it. Under overload
 * that refusal is most of what the loop does for the excess requests, and
 * the loop shares the cores with the workers everyone waits on
 * (docs/BENCHMARKS.md, "Overload"). A frame the scan cannot place, a kind
 * with a weight or served by the loop, and a role the connection lacks go
 * the usual way. Such a frame's own fields go unchecked: one that would
 * not decode is refused OVERLOADED too, and its connection stays open
 * (docs/PROTOCOL.md, "Limits"). Returns 1 when the frame was answered. */
static int pd__refused_unpacked(pd__conn *c, const uint8_t *payload, size_t len, uint64_t arrival_ns)
{
    pd_server *s = c->server;
    /* What is waiting never exceeds what was handed out: most frames stop
     * here, without the wire's lock pd__conn_waiting takes. */
    if (c->in_flight < s->conf.max_inflight_per_conn)
        return 0;
    const uint32_t waiting = pd__conn_waiting(c);
    if (waiting < s->conf.max_inflight_per_conn)
        return 0;
    uint64_t id;
    pd_request_kind kind;
    if (pd_codec_peek_request(payload, len, &id, &kind) != PD_OK)
        return 0;
    const pd_kind *k = pd_kind_of(kind);
    if ((k->runs != PD_KIND_WORKER && k->runs != PD_KIND_LANE) || k->weight || pd__conn_role(c) < k->role)
        return 0;
    /* The answer pd__inflight_ok gives, byte for byte, from a body encoded
     * once for this count (protobuf-c's packing and the message's
     * formatting were most of what was left of a refusal's cost). */
    if (!s->dispatch.full_refusal || s->dispatch.full_refusal_waiting != waiting) {
        char msg[PD__MESSAGE_MAX];
        size_t n = 0;
        snprintf(msg, sizeof msg, PD__FULL_MESSAGE, waiting);
        uint8_t *frame = pd_codec_encode_error(0, PD_OVERLOADED, msg, &n);
        if (!frame || n < PD_FRAME_HEADER_BYTES) {
            free(frame);
            return 0;
        }
        memmove(frame, frame + PD_FRAME_HEADER_BYTES, n - PD_FRAME_HEADER_BYTES);
        free(s->dispatch.full_refusal);
        s->dispatch.full_refusal = frame;
        s->dispatch.full_refusal_len = n - PD_FRAME_HEADER_BYTES;
        s->dispatch.full_refusal_waiting = waiting;
    }
    s->dispatch.answering = (int)kind;
    s->dispatch.answering_since_ns = arrival_ns;
    s->dispatch.answering_conn = c;
    s->dispatch.answering_search_us = 0;
    pd_metrics_observe_overloaded(s->metrics, PD_METRICS_LIMIT_CONN_IN_FLIGHT);
    s->dispatch.overloaded_total++;
    pd__observe(s, PD_OVERLOADED);
    size_t n = 0;
    uint8_t *buf = pd_codec_frame_with_id(id, s->dispatch.full_refusal, s->dispatch.full_refusal_len, &n);
    pd__conn_send(c, buf, n);
    pd__answered(s);
    return 1;
}

void pd__dispatch_frame(pd__conn *c, const uint8_t *payload, size_t len, uint64_t arrival_ns)
{
    pd_server *s = c->server;
    pd_request req;
    char err[PD__MESSAGE_MAX];

    s->dispatch.requests_total++;
    if (pd__refused_unpacked(c, payload, len, arrival_ns))
        return;
    s->dispatch.frame = payload;
    s->dispatch.frame_len = len;
    s->dispatch.frame_arrival_ns = arrival_ns;
    err[0] = '\0';
    /* The decoder zeroes req itself. */
    pd_status st = pd_codec_decode_request(payload, len, &req, err, sizeof err);
    s->dispatch.answering = (int)req.kind;
    s->dispatch.answering_since_ns = arrival_ns;
    s->dispatch.answering_conn = c;
    s->dispatch.answering_search_us = 0;
    if (st == PD_MALFORMED) {
        s->dispatch.malformed_total++;
        pd_log_debug("conn %" PRIu64 ": malformed frame: %s; closing", c->id, err);
        pd__send_error(c, 0, PD_MALFORMED, "%s", err[0] ? err : "frame is not a pathd.v1.Request");
        pd__answered(s);
        pd__conn_linger(c);
        return;
    }
    if (st != PD_OK) {
        pd__send_error(c, req.id, st, "%s", err[0] ? err : pd_status_name(st));
        pd__answered(s);
        /* A frame refused for its shape: the peer's stream is in an unknown
         * state (and may be a flood of such frames), so, as for MALFORMED,
         * the answer goes out and the connection closes. */
        if (req.structural) {
            pd_log_debug("conn %" PRIu64 ": %s; closing", c->id, err);
            pd__conn_linger(c);
        }
        return;
    }
    pd__handle_request(c, &req, arrival_ns);
    s->dispatch.frame = NULL;
    pd__answered(s);
    pd_request_free(&req);
}

/* ---- completions ------------------------------------------------------- */

/* Tells the scene's watchers about the version a finished job made (or
 * the scene it dropped, or the instance it copied, or the agents its
 * update cut), before anyone is answered: the change is served already.
 * A kind may have several events, published in its order, one at a time
 * through one struct. A dropped scene's metrics series go with it. */
static void pd__job_events(pd_server *s, const pd_job *job)
{
    pd_watch_event ev;
    for (size_t i = 0; job->ops->event && job->ops->event(job, i, &ev); i++) {
        if (ev.kind == PD_WATCH_DROPPED)
            pd_metrics_forget_scene(s->metrics, ev.scene);
        pd__watch_publish(s, &ev);
    }
}

/* What the job's kind asks the log to say of it. */
static void pd__job_note(const pd_job *job)
{
    char line[sizeof job->change_out.built + 512];
    pd_kind_note level = job->ops->note ? job->ops->note(job, line, sizeof line) : PD_KIND_NOTE_NONE;
    if (level == PD_KIND_NOTE_WARN)
        pd_log_warn("%s", line);
    else if (level == PD_KIND_NOTE_INFO)
        pd_log_info("%s", line);
}

/* Gives back the in-flight slot of a finished task of connection `owner`;
 * returns that connection, or NULL when it has gone. */
static pd__conn *pd__release_slot(pd_server *s, uint64_t owner)
{
    s->dispatch.in_flight -= s->dispatch.in_flight > 0;
    pd__conn *c = pd__map_find(&s->table.map, owner);
    if (c) {
        c->in_flight -= c->in_flight > 0;
        if (c->full && c->in_flight <= s->conf.max_inflight_per_conn / 2)
            pd__conn_unfull(c);
    }
    return c;
}

/* Queues a finished job's answer - its worker's encoding, or one made now
 * (when that ran out of memory, or the job never ran) - for c, unless c
 * lingers after a protocol error. */
static void pd__send_answer(pd__conn *c, pd_job *job)
{
    if (c->lingering)
        return;
    size_t len = job->answer_len;
    uint8_t *buf = job->answer ? job->answer : pd__encode_job(job, &len);
    job->answer = NULL;
    pd__conn_send(c, buf, len);
}

/* Counts a finished job and answers it, unless its connection has gone;
 * frees the job. */
static void pd__finish_job(pd_server *s, pd_job *job)
{
    pd_task *task = &job->task;
    if (!job->answer)
        pd_job_settle_status(job);
    pd__count_job(s, job, task->submitted_ns);
    pd__job_note(job);
    pd__job_events(s, job);
    if (job->wire && job->answer_sent > 0 && job->answer_sent == job->answer_len)
        pd__wire_collected(job->wire);
    pd__conn *c = pd__release_slot(s, task->owner);
    if (c) {
        if (job->answer_sent > 0) {
            /* Its worker wrote the answer, or its start: a finished write,
             * which restarts the idle clock as the loop's writes do
             * (pd__conn_written). */
            c->last_active_ms = uv_now(s->loop);
            if (job->answer_sent < job->answer_len) {
                size_t rest = job->answer_len - job->answer_sent;
                memmove(job->answer, job->answer + job->answer_sent, rest);
                pd__conn_send_rest(c, job->answer, rest);
                job->answer = NULL;
            }
        } else {
            pd__send_answer(c, job);
        }
    }
    pd__job_free(job);
}

/* An idle table's sweep (pd__dispatch_reserve_sweep) came back: the
 * agents it released to the scene's watchers (AGENTS_EXPIRED). */
static void pd__finish_sweep(pd_server *s, pd_reserve_sweep *sw)
{
    if (sw->released)
        pd_log_info("scene '%s': %zu agents released (not renewed within limits.reservation_ttl_ms; "
                    "the scene idle)", sw->scene, sw->released);
    pd_watch_event ev;
    for (size_t part = 0; pd_kind_reserve_sweep_event(sw, part, &ev) == 0; part++)
        pd__watch_publish(s, &ev);
    pd_kind_reserve_sweep_free(sw);
}

static void pd__finish_batch(pd_server *s, pd_job *batch)
{
    pd__count_job(s, batch, batch->task.submitted_ns);
    pd__conn *c = pd__map_find(&s->table.map, batch->task.owner);
    if (c)
        pd__send_answer(c, batch);
    pd__job_free(batch);
}

/* Counts a finished item of a batch as the request it is, and answers the
 * batch when it was the last one out. */
static void pd__finish_item(pd_server *s, pd_job_item *item)
{
    pd_job *batch = item->batch;
    if (!item->ran) {
        /* Cancelled, or its deadline passed, before a worker took it. */
        pd_job_move_fail(&batch->move_results[item->index], item->task.status);
        pd__item_settled(batch);
    }
    pd__release_slot(s, item->task.owner);
    pd__count_item(s, batch, item->index, 0, item->task.submitted_ns);
    if (--batch->items_out == 0)
        pd__finish_batch(s, batch);
}

size_t pd__dispatch_completions(pd_server *s)
{
    if (!s->pool)
        return 0;
    size_t n = 0;
    pd_task *task = pd_pool_take_completed(s->pool);
    for (; task; n++) {
        pd_task *next = task->next;
        if (task->run == pd__run_item)
            pd__finish_item(s, (pd_job_item *)task);
        else if (task->run == pd_kind_reserve_sweep_run)
            pd__finish_sweep(s, (pd_reserve_sweep *)task);
        else
            pd__finish_job(s, (pd_job *)task);
        task = next;
    }
    return n;
}

/* Idle tables a tick posts sweeps for, at most: a server with more idle
 * scenes than this sweeps them over several ticks, the queue never full of
 * them. */
#define PD__RESERVE_SWEEPS_PER_TICK 64u

void pd__dispatch_reserve_sweep(pd_server *s)
{
    if (!s->pool || !s->registry)
        return;
    char names[PD__RESERVE_SWEEPS_PER_TICK][PD_CONF_MAX_NAME];
    const uint64_t now = pd_clock_ns();
    const size_t n = pd_reservations_idle(pd_registry_reservations(s->registry), now, names,
                                          PD__RESERVE_SWEEPS_PER_TICK);
    for (size_t i = 0; i < n; i++) {
        pd_reserve_sweep *sw = pd_kind_reserve_sweep_new(s->registry, names[i], now);
        /* Refused (a full queue): the table stays due, and the next tick
         * tries again. */
        if (sw && pd_pool_submit(s->pool, &sw->task) != PD_OK)
            pd_kind_reserve_sweep_free(sw);
    }
}

void pd__dispatch_free_inline(pd_server *s)
{
    pd_query_scratch_destroy(s->dispatch.inline_scratch);
    s->dispatch.inline_scratch = NULL;
    pd_job_free(s->dispatch.inline_job);
    s->dispatch.inline_job = NULL;
    free(s->dispatch.full_refusal);
    s->dispatch.full_refusal = NULL;
}
