/*
 * pd_pool.c - the worker pool (see pd_pool.h): threads, task queue,
 * completion list, cancels, deadlines, ordered tasks, context trimming
 * and per-thread statistics.
 *
 * Queue: tasks wait in a binary min-heap ordered by (key, submission
 * order), so the submitter decides who goes first (the server gives each
 * connection its own sequence of keys: start-time fair queueing); ordered
 * tasks wait apart, in one FIFO: a worker takes the first one none of
 * whose lanes a worker holds or an earlier queued ordered task waits on,
 * so each lane keeps its order and different lanes run side by side.
 *
 * Locking: one pool mutex guards the task queue, every worker's `current`
 * pointer, every worker's statistics and the lanes each worker holds; a
 * second mutex guards the completion list so the loop thread taking
 * results never waits for a submit or a cancel. A submit does not take
 * the pool mutex either (unless its task has a deadline to check against
 * the queue): it pushes the task onto an incoming stack with a
 * compare-and-swap, and whoever next holds the mutex (a worker looking for work,
 * a cancel, destroy) moves the incoming tasks into the queue in the order
 * they were submitted. The loop thread thus never waits for a worker
 * holding the mutex, nor wakes one that waits for it: under a pipelined
 * load those waits and wakes were most of the server's futex calls.
 * A worker about to sleep counts itself in `sleepers` before its last
 * look at the incoming stack; a submit that sees the count above zero
 * takes the mutex, signals one sleeper and uncounts it, so no task is left
 * behind a sleeping worker and the next submits do not take the mutex
 * again for the same sleeper. The count changes only under the mutex and
 * is never below the number of workers blocked in the wait (a worker woken
 * spuriously may stay counted: that costs one signal nobody needed); each
 * broadcast, which wakes them all, sets it to zero. A worker clears `current`
 * under the pool mutex before it pushes the task onto the completion list:
 * from that moment the loop thread may free the task, so cancel must no
 * longer be able to reach it.
 *
 * Each worker creates its context on its own thread (its memory is first
 * touched there) and keeps it for every task it runs. After each task it
 * trims the context (unlocked: trimming may unmap memory) before completing
 * the task, so whoever reads the statistics after a result arrived sees the
 * context as the next task will find it.
 */
#include "pd_pool.h"
#include "pd_clock.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct pd__worker_stats {
    uint64_t tasks_done;
    uint64_t busy_ns;
} pd__worker_stats;

typedef struct pd__worker {
    pd_pool *pool;
    pthread_t thread;
    pd_task *current;         /* guarded by pool->lock; NULL when idle */
    pd__worker_stats stats;   /* guarded by pool->lock */
    size_t context_bytes;     /* guarded by pool->lock: as the last trim reported */
    int ready;                /* guarded by pool->lock: the thread made its context and
                                 waits for tasks (a health check reads it) */
    int holds_lanes;          /* guarded by pool->lock: it runs an ordered task whose
                                 lanes are these, until its batch is handed over */
    uint64_t lane, lane2;
} pd__worker;

/* Tasks a worker finished and has not handed over yet (see pd_pool.h). */
typedef struct pd__batch {
    pd_pool *pool;
    pd_task *head, *tail;
    uint32_t n;
    uint64_t first_ns;        /* when the oldest one finished */
} pd__batch;

/* The calling worker's batch, so pd_task_poll can hand it over in the
 * middle of a long task; NULL on threads that are not workers. */
static _Thread_local pd__batch *pd__my_batch;

struct pd_pool {
    pthread_mutex_t lock;     /* task queue, workers' current and stats */
    pthread_cond_t work_ready;
    pd_task **heap;           /* unordered tasks, min-heap by (key, seq) */
    uint32_t heap_len;
    pd_task *ord_head, *ord_tail;  /* ordered tasks, FIFO */
    _Atomic(pd_task *) incoming;  /* submitted, not yet queued: a stack, newest first */
    atomic_uint queued;       /* tasks waiting for a worker (incoming ones too):
                                 counted by submit, uncounted by a worker's pick */
    atomic_uint sleepers;     /* written under lock: see the top of this file */
    uint64_t next_seq;        /* submission order, ties between equal keys */
    atomic_uint_fast64_t virtual_time;  /* key of the task taken last */
    uint32_t queue_capacity;
    atomic_int stopping;      /* written under lock, also read lock-free by polls */
    int paused;               /* guarded by lock; see pd_pool_set_paused */
    atomic_uint_fast64_t yield_interval_ns; /* see pd_pool_set_yield_interval */
    _Atomic(pd_pool_yield_check_fn) yield_check; /* see pd_pool_set_yield_check */
    _Atomic(void *) yield_check_user;
    atomic_uint_fast64_t yields, yields_skipped;

    pthread_mutex_t done_lock;
    pd_task *done_head, *done_tail;

    const pd_pool_thread_ops *ops;
    void *thread_user;
    pd_pool_wake_fn wake;
    void *wake_user;

    uint32_t n_workers;
    pd__worker *workers;
};

void pd_task_init(pd_task *task, pd_task_run_fn run)
{
    memset(task, 0, sizeof *task);
    task->run = run;
    atomic_init(&task->cancelled, 0);
}

uint64_t pd_pool_now_ns(void)
{
    return pd_clock_ns();
}

static void pd__publish(pd_pool *p, pd__batch *b);

/* Takes one worker off the sleepers' count; 0 when none was counted.
 * Caller holds p->lock. */
static int pd__uncount_sleeper(pd_pool *p)
{
    unsigned n = atomic_load(&p->sleepers);
    if (n == 0)
        return 0;
    atomic_store(&p->sleepers, n - 1);
    return 1;
}

/* Wakes every waiting worker. Caller holds p->lock. */
static void pd__wake_all(pd_pool *p)
{
    atomic_store(&p->sleepers, 0);
    pthread_cond_broadcast(&p->work_ready);
}

/* Whether task must stop now (cancelled, pool stopping, past its deadline). */
static pd_status pd__interrupted(const pd_task *task)
{
    if (atomic_load_explicit(&task->cancelled, memory_order_relaxed) ||
        (task->pool && atomic_load_explicit(&task->pool->stopping, memory_order_relaxed)))
        return PD_CANCELLED;
    if (task->deadline_ns != 0 && pd_pool_now_ns() >= task->deadline_ns)
        return PD_DEADLINE_EXCEEDED;
    return PD_OK;
}

pd_status pd_task_interrupt(const pd_task *task)
{
    /* A long task polls: results finished before it must not wait for it. */
    if (pd__my_batch && pd__my_batch->head)
        pd__publish(pd__my_batch->pool, pd__my_batch);
    return pd__interrupted(task);
}

pd_status pd_task_poll(void *task)
{
    return pd_task_interrupt(task);
}

/* Appends the tasks head..tail to the completion list in one step. */
static void pd__append_done(pd_pool *p, pd_task *head, pd_task *tail)
{
    pthread_mutex_lock(&p->done_lock);
    if (p->done_tail)
        p->done_tail->next = head;
    else
        p->done_head = head;
    p->done_tail = tail;
    pthread_mutex_unlock(&p->done_lock);
}

/* Hands b's tasks over and wakes the loop once; b is empty afterwards. */
static void pd__publish(pd_pool *p, pd__batch *b)
{
    if (!b->head)
        return;
    pd__append_done(p, b->head, b->tail);
    b->head = b->tail = NULL;
    b->n = 0;
    if (p->wake)
        p->wake(p->wake_user);
}

static void pd__batch_add(pd__batch *b, pd_task *task)
{
    task->next = NULL;
    if (b->tail)
        b->tail->next = task;
    else {
        b->head = task;
        b->first_ns = task->finished_ns;
    }
    b->tail = task;
    b->n++;
}

/* Completes a task outside any worker (destroy): straight onto the list,
 * with no wake. */
static void pd__complete(pd_pool *p, pd_task *task)
{
    task->next = NULL;
    pd__append_done(p, task, task);
}

/* Runs a task and adds it to the worker's batch; an ordered task's batch is
 * handed over before its lanes' next task may start, so the tasks of a
 * lane also complete in order. Returns how long it ran (once handed over,
 * the task is no longer the worker's to read). */
static uint64_t pd__run_task(pd_pool *p, pd__worker *w, void *ctx, pd_task *task, int holds_order, pd__batch *b)
{
    uint64_t started = pd_pool_now_ns();
    pd_status st = pd__interrupted(task);
    if (st == PD_OK)
        st = task->run(task, ctx);
    task->status = st;
    task->finished_ns = pd_pool_now_ns();
    const size_t bytes = p->ops->trim && ctx ? p->ops->trim(ctx, p->thread_user) : 0;

    pthread_mutex_lock(&p->lock);
    w->context_bytes = bytes;
    w->current = NULL;
    w->stats.tasks_done++;
    w->stats.busy_ns += task->finished_ns - started;
    pthread_mutex_unlock(&p->lock);

    const uint64_t ran_ns = task->finished_ns - started;
    pd__batch_add(b, task);
    if (holds_order || task->hand_over_at_once || b->n >= PD_POOL_BATCH_TASKS || task->finished_ns - b->first_ns >= PD_POOL_BATCH_NS)
        pd__publish(p, b);
    if (holds_order) {
        pthread_mutex_lock(&p->lock);
        w->holds_lanes = 0;
        /* Any waiting worker may now find a task of these lanes. */
        pd__wake_all(p);
        pthread_mutex_unlock(&p->lock);
    }
    return ran_ns;
}

static int pd__before(const pd_task *a, const pd_task *b)
{
    return a->key < b->key || (a->key == b->key && a->seq < b->seq);
}

static void pd__heap_up(pd_pool *p, uint32_t i)
{
    pd_task *t = p->heap[i];
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (!pd__before(t, p->heap[parent]))
            break;
        p->heap[i] = p->heap[parent];
        i = parent;
    }
    p->heap[i] = t;
}

static void pd__heap_down(pd_pool *p, uint32_t i)
{
    pd_task *t = p->heap[i];
    for (;;) {
        uint32_t child = 2 * i + 1;
        if (child >= p->heap_len)
            break;
        if (child + 1 < p->heap_len && pd__before(p->heap[child + 1], p->heap[child]))
            child++;
        if (!pd__before(p->heap[child], t))
            break;
        p->heap[i] = p->heap[child];
        i = child;
    }
    p->heap[i] = t;
}

/* Takes heap entry i out, keeping the heap in order. */
static pd_task *pd__heap_remove(pd_pool *p, uint32_t i)
{
    pd_task *t = p->heap[i];
    p->heap_len--;
    if (i < p->heap_len) {
        p->heap[i] = p->heap[p->heap_len];
        pd__heap_down(p, i);
        pd__heap_up(p, i);
    }
    return t;
}

/* Unlinks ordered task t, which follows prev (NULL: t is the head). */
static pd_task *pd__ord_unlink(pd_pool *p, pd_task *prev, pd_task *t)
{
    if (prev)
        prev->next = t->next;
    else
        p->ord_head = t->next;
    if (p->ord_tail == t)
        p->ord_tail = prev;
    t->next = NULL;
    return t;
}

static pd_task *pd__ord_pop(pd_pool *p)
{
    return pd__ord_unlink(p, NULL, p->ord_head);
}

static int pd__lanes_meet(const pd_task *t, uint64_t a, uint64_t b)
{
    return t->lane == a || t->lane == b || t->lane2 == a || t->lane2 == b;
}

/* The first queued ordered task that may start now: a cancelled one (it
 * will not run), or one none of whose lanes a worker holds or an earlier
 * queued task waits on; NULL when none within PD_POOL_LANE_LOOKAHEAD
 * waiting tasks. Caller holds p->lock. */
static pd_task *pd__take_ordered(pd_pool *p)
{
    uint64_t waiting[2 * PD_POOL_LANE_LOOKAHEAD];
    size_t n_waiting = 0;
    for (pd_task *prev = NULL, *t = p->ord_head; t; prev = t, t = t->next) {
        int free_now = atomic_load(&t->cancelled);
        if (!free_now) {
            free_now = 1;
            for (uint32_t i = 0; i < p->n_workers && free_now; i++)
                free_now = !(p->workers[i].holds_lanes &&
                             pd__lanes_meet(t, p->workers[i].lane, p->workers[i].lane2));
            for (size_t i = 0; i < n_waiting && free_now; i++)
                free_now = !pd__lanes_meet(t, waiting[i], waiting[i]);
        }
        if (free_now)
            return pd__ord_unlink(p, prev, t);
        if (n_waiting == 2 * PD_POOL_LANE_LOOKAHEAD)
            return NULL;
        waiting[n_waiting++] = t->lane;
        waiting[n_waiting++] = t->lane2;
    }
    return NULL;
}

/* While paused: the first cancelled task anywhere (it only needs its
 * CANCELLED answer), or NULL. */
static pd_task *pd__take_cancelled(pd_pool *p)
{
    if (p->ord_head && atomic_load(&p->ord_head->cancelled))
        return pd__ord_pop(p);
    for (uint32_t i = 0; i < p->heap_len; i++)
        if (atomic_load(&p->heap[i]->cancelled))
            return pd__heap_remove(p, i);
    return NULL;
}

/* Unlinks the task worker w (NULL: the pool is being destroyed) should
 * run next, or returns NULL: while paused only a cancelled one; otherwise
 * the first ordered task that may start (pd__take_ordered), else the
 * heap's first. *holds_order is set when the task takes its lanes, which w
 * then holds. Caller holds p->lock. */
static pd_task *pd__take_task(pd_pool *p, pd__worker *w, int *holds_order)
{
    pd_task *task = NULL;
    *holds_order = 0;
    if (p->paused)
        task = pd__take_cancelled(p);
    else if (!(p->ord_head && (task = pd__take_ordered(p))) && p->heap_len > 0)
        task = pd__heap_remove(p, 0);
    if (!task)
        return NULL;
    atomic_fetch_sub(&p->queued, 1);
    task->next = NULL;
    if (!task->ordered)
        atomic_store_explicit(&p->virtual_time, task->key, memory_order_relaxed);
    *holds_order = task->ordered && !atomic_load(&task->cancelled);
    if (*holds_order && w) {
        w->holds_lanes = 1;
        w->lane = task->lane;
        w->lane2 = task->lane2;
    }
    return task;
}

/* Queues a task (counted in p->queued already). Caller holds p->lock. */
static void pd__enqueue(pd_pool *p, pd_task *task)
{
    task->next = NULL;
    if (task->ordered) {
        if (p->ord_tail)
            p->ord_tail->next = task;
        else
            p->ord_head = task;
        p->ord_tail = task;
    } else {
        task->seq = p->next_seq++;
        p->heap[p->heap_len++] = task;
        pd__heap_up(p, p->heap_len - 1);
    }
}

/* Moves the incoming tasks into the queue, oldest first. Caller holds
 * p->lock. */
static void pd__drain_incoming(pd_pool *p)
{
    if (!atomic_load(&p->incoming))
        return;
    pd_task *newest_first = atomic_exchange(&p->incoming, NULL);
    pd_task *oldest_first = NULL;
    while (newest_first) {
        pd_task *next = newest_first->next;
        newest_first->next = oldest_first;
        oldest_first = newest_first;
        newest_first = next;
    }
    while (oldest_first) {
        pd_task *next = oldest_first->next;
        pd__enqueue(p, oldest_first);
        oldest_first = next;
    }
}

/* A yield that is due: made, unless the yield check says the thread it is
 * for does not need a core now (a context switch each, where something
 * else is runnable). */
static void pd__yield(pd_pool *p)
{
    pd_pool_yield_check_fn check = atomic_load_explicit(&p->yield_check, memory_order_acquire);
    if (check && !check(atomic_load_explicit(&p->yield_check_user, memory_order_relaxed))) {
        atomic_fetch_add_explicit(&p->yields_skipped, 1, memory_order_relaxed);
        return;
    }
    atomic_fetch_add_explicit(&p->yields, 1, memory_order_relaxed);
    sched_yield();
}

static void *pd__worker_main(void *arg)
{
    pd__worker *w = arg;
    pd_pool *p = w->pool;
    void *ctx = p->ops->create(p->thread_user);
    const size_t bytes = p->ops->trim && ctx ? p->ops->trim(ctx, p->thread_user) : 0;
    pd__batch batch = {p, NULL, NULL, 0, 0};
    pd__my_batch = &batch;
    /* Time spent running tasks since the last yield (or the yield check's
     * "no"): the worker's own run, not the wall clock, which on a loaded
     * machine also counts the time others ran, and made nearly every task
     * after a preemption yield again. */
    uint64_t ran_since_yield_ns = 0;

    pthread_mutex_lock(&p->lock);
    w->context_bytes = bytes;
    w->ready = ctx != NULL;
    for (;;) {
        pd_task *task = NULL;
        int holds_order = 0;
        while (!atomic_load(&p->stopping)) {
            pd__drain_incoming(p);
            if ((task = pd__take_task(p, w, &holds_order)))
                break;
            if (batch.head) {
                /* Nothing more to run now: hand the batch over before
                 * sleeping, then look at the queue again. */
                pthread_mutex_unlock(&p->lock);
                pd__publish(p, &batch);
                pthread_mutex_lock(&p->lock);
                continue;
            }
            /* Counted before the last look: a submit either pushed before
             * it (seen here) or sees the count and signals. */
            atomic_fetch_add(&p->sleepers, 1);
            if (atomic_load(&p->incoming)) {
                pd__uncount_sleeper(p);
                continue;
            }
            pthread_cond_wait(&p->work_ready, &p->lock);
        }
        if (atomic_load(&p->stopping)) {
            if (task) { /* put it back: destroy answers every queued task */
                w->holds_lanes = 0;
                atomic_fetch_add(&p->queued, 1);
                pd__enqueue(p, task);
            }
            break;
        }
        w->current = task;
        pthread_mutex_unlock(&p->lock);

        ran_since_yield_ns += pd__run_task(p, w, ctx, task, holds_order, &batch);
        const uint64_t interval_ns = atomic_load_explicit(&p->yield_interval_ns, memory_order_relaxed);
        if (interval_ns != 0 && ran_since_yield_ns >= interval_ns) {
            pd__yield(p);
            ran_since_yield_ns = 0;
        }

        pthread_mutex_lock(&p->lock);
    }
    w->ready = 0;
    pthread_mutex_unlock(&p->lock);
    pd__publish(p, &batch);
    pd__my_batch = NULL;

    if (ctx)
        p->ops->destroy(ctx);
    return NULL;
}

static void pd__stop_and_join(pd_pool *p, uint32_t started)
{
    pthread_mutex_lock(&p->lock);
    atomic_store(&p->stopping, 1);
    pd__wake_all(p);
    pthread_mutex_unlock(&p->lock);
    for (uint32_t i = 0; i < started; i++)
        pthread_join(p->workers[i].thread, NULL);
}

static void pd__pool_free(pd_pool *p)
{
    pthread_mutex_destroy(&p->done_lock);
    pthread_cond_destroy(&p->work_ready);
    pthread_mutex_destroy(&p->lock);
    free(p->heap);
    free(p->workers);
    free(p);
}

pd_pool *pd_pool_create(uint32_t threads, uint32_t queue_capacity, const pd_pool_thread_ops *ops,
                        void *thread_user, pd_pool_wake_fn wake, void *wake_user)
{
    if (threads < 1 || queue_capacity < 1 || !ops || !ops->create || !ops->destroy)
        return NULL;
    pd_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->workers = calloc(threads, sizeof *p->workers);
    p->heap = calloc(queue_capacity, sizeof *p->heap);
    if (!p->workers || !p->heap)
        goto fail_workers;
    if (pthread_mutex_init(&p->lock, NULL) != 0)
        goto fail_lock;
    if (pthread_cond_init(&p->work_ready, NULL) != 0)
        goto fail_cond;
    if (pthread_mutex_init(&p->done_lock, NULL) != 0)
        goto fail_done_lock;
    atomic_init(&p->stopping, 0);
    atomic_init(&p->virtual_time, 0);
    atomic_init(&p->incoming, NULL);
    atomic_init(&p->queued, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->yield_check, NULL);
    atomic_init(&p->yield_check_user, NULL);
    atomic_init(&p->yields, 0);
    atomic_init(&p->yields_skipped, 0);
    p->queue_capacity = queue_capacity;
    p->ops = ops;
    p->thread_user = thread_user;
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
fail_workers:
    free(p->heap);
    free(p->workers);
    free(p);
    return NULL;
}

/* When a worker would likely start this task: the tasks that would go
 * before it, spread over the workers, times the mean time a task has taken
 * so far. 0 (no estimate) before any task has finished. Caller holds
 * p->lock. */
static uint64_t pd__expected_start_ns(const pd_pool *p, const pd_task *task)
{
    uint64_t done = 0, busy = 0;
    for (uint32_t i = 0; i < p->n_workers; i++) {
        done += p->workers[i].stats.tasks_done;
        busy += p->workers[i].stats.busy_ns;
    }
    if (done == 0)
        return 0;
    uint64_t ahead = 0;
    for (pd_task *t = p->ord_head; t; t = t->next)
        ahead++;
    for (uint32_t i = 0; i < p->heap_len; i++)
        ahead += p->heap[i]->key <= task->key;
    return pd_pool_now_ns() + ahead * (busy / done) / p->n_workers;
}

pd_status pd_pool_submit(pd_pool *p, pd_task *task)
{
    if (!p || !task || !task->run)
        return PD_INVALID_ARGUMENT;
    if (task->submitted_ns == 0)
        task->submitted_ns = pd_pool_now_ns();
    task->pool = p;
    task->next = NULL;

    unsigned queued = atomic_load(&p->queued);
    do {
        if (queued >= p->queue_capacity)
            return PD_OVERLOADED;
    } while (!atomic_compare_exchange_weak(&p->queued, &queued, queued + 1));

    if (task->deadline_ns != 0 && !task->ordered) {
        /* The estimate counts the tasks queued ahead: it needs the queue. */
        pthread_mutex_lock(&p->lock);
        pd__drain_incoming(p);
        if (pd__expected_start_ns(p, task) >= task->deadline_ns) {
            pthread_mutex_unlock(&p->lock);
            atomic_fetch_sub(&p->queued, 1);
            return PD_DEADLINE_EXCEEDED;
        }
        pd__enqueue(p, task);
        pthread_cond_signal(&p->work_ready);
        pthread_mutex_unlock(&p->lock);
        return PD_OK;
    }
    pd_task *head = atomic_load(&p->incoming);
    do
        task->next = head;
    while (!atomic_compare_exchange_weak(&p->incoming, &head, task));
    if (atomic_load(&p->sleepers) > 0) {
        /* Under the lock, a counted worker waits already, or looks at the
         * incoming stack before it would. */
        pthread_mutex_lock(&p->lock);
        if (pd__uncount_sleeper(p))
            pthread_cond_signal(&p->work_ready);
        pthread_mutex_unlock(&p->lock);
    }
    return PD_OK;
}

pd_task *pd_pool_take_completed(pd_pool *p)
{
    if (!p)
        return NULL;
    pthread_mutex_lock(&p->done_lock);
    pd_task *list = p->done_head;
    p->done_head = p->done_tail = NULL;
    pthread_mutex_unlock(&p->done_lock);
    return list;
}

/* Marks every queued or running task of owner (and of tag too, when
 * by_tag is set) as cancelled. Returns how many were marked. Caller holds
 * p->lock. */
static size_t pd__mark_cancelled(pd_pool *p, uint64_t owner, int by_tag, uint64_t tag)
{
    size_t marked = 0;
    for (pd_task *task = p->ord_head; task; task = task->next)
        if (task->owner == owner && (!by_tag || task->tag == tag)) {
            atomic_store(&task->cancelled, 1);
            marked++;
        }
    for (uint32_t i = 0; i < p->heap_len; i++) {
        pd_task *task = p->heap[i];
        if (task->owner == owner && (!by_tag || task->tag == tag)) {
            atomic_store(&task->cancelled, 1);
            marked++;
        }
    }
    for (uint32_t i = 0; i < p->n_workers; i++) {
        pd_task *task = p->workers[i].current;
        if (task && task->owner == owner && (!by_tag || task->tag == tag)) {
            atomic_store(&task->cancelled, 1);
            marked++;
        }
    }
    return marked;
}

int pd_pool_cancel(pd_pool *p, uint64_t owner, uint64_t tag)
{
    if (!p)
        return 0;
    pthread_mutex_lock(&p->lock);
    pd__drain_incoming(p);
    size_t marked = pd__mark_cancelled(p, owner, 1, tag);
    if (marked && p->paused)
        pd__wake_all(p);
    pthread_mutex_unlock(&p->lock);
    return marked > 0;
}

void pd_pool_cancel_owner(pd_pool *p, uint64_t owner)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    pd__drain_incoming(p);
    if (pd__mark_cancelled(p, owner, 0, 0) && p->paused)
        pd__wake_all(p);
    pthread_mutex_unlock(&p->lock);
}

void pd_pool_set_paused(pd_pool *p, int paused)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->paused = paused != 0;
    pd__wake_all(p);
    pthread_mutex_unlock(&p->lock);
}

void pd_pool_set_yield_interval(pd_pool *p, uint64_t interval_ns)
{
    if (p)
        atomic_store(&p->yield_interval_ns, interval_ns);
}

void pd_pool_set_yield_check(pd_pool *p, pd_pool_yield_check_fn check, void *user)
{
    if (!p)
        return;
    /* The user first: a worker that sees the new check reads it after. */
    atomic_store_explicit(&p->yield_check_user, user, memory_order_relaxed);
    atomic_store_explicit(&p->yield_check, check, memory_order_release);
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
    out->yield_interval_ns = atomic_load(&p->yield_interval_ns);
    out->yields = atomic_load(&p->yields);
    out->yields_skipped = atomic_load(&p->yields_skipped);
    out->queue_depth = atomic_load(&p->queued);
    for (uint32_t i = 0; i < p->n_workers; i++) {
        const pd__worker *w = &p->workers[i];
        if (w->current)
            out->running++;
        if (w->ready)
            out->threads_ready++;
        out->tasks_done += w->stats.tasks_done;
        out->busy_ns += w->stats.busy_ns;
        out->context_bytes += w->context_bytes;
        if (w->context_bytes > out->context_bytes_max)
            out->context_bytes_max = w->context_bytes;
    }
    pthread_mutex_unlock(&p->lock);
}

pd_task *pd_pool_destroy(pd_pool *p)
{
    if (!p)
        return NULL;
    pd__stop_and_join(p, p->n_workers);

    /* No thread is left, so the queues need no lock from here on. */
    p->paused = 0;
    pd__drain_incoming(p);
    pd_task *queued;
    int holds_order;
    while ((queued = pd__take_task(p, NULL, &holds_order))) {
        queued->status = PD_CANCELLED;
        queued->finished_ns = pd_pool_now_ns();
        pd__complete(p, queued);
    }
    pd_task *left = pd_pool_take_completed(p);
    for (pd_task *t = left; t; t = t->next)
        t->pool = NULL;
    pd__pool_free(p);
    return left;
}

uint64_t pd_pool_virtual_time(const pd_pool *p)
{
    return p ? atomic_load_explicit(&p->virtual_time, memory_order_relaxed) : 0;
}
