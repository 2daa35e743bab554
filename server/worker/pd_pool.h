/*
 * pd_pool.h - the worker pool: an executor of opaque tasks. N threads, each
 * owning one context its thread ops made, a bounded queue in and a
 * completion list out. It knows nothing of what its tasks do (like libuv's
 * uv_work_t): the submitter embeds a pd_task in its own struct and gets it
 * back, finished, from pd_pool_take_completed.
 *
 * No libuv here. A worker runs tasks and pushes them onto the completion
 * list in batches, calling the wake function (the net layer passes one that
 * calls uv_async_send) once per batch: a worker with more queued work keeps
 * its finished tasks for up to PD_POOL_BATCH_NS or PD_POOL_BATCH_TASKS
 * tasks, and hands them over before it sleeps, before an ordered task's
 * successor may start, after a task marked `hand_over_at_once`, and from
 * pd_task_poll (so a long search holds earlier results back by at most one
 * poll interval). Trivial requests thus cost the loop one wakeup per batch,
 * not one per request, while a task whose submitter waits on it alone is
 * not held behind the next task's search. Wake-ups
 * may coalesce, so whoever is woken must take the whole completion list.
 *
 * Tasks carry an owner and a tag, never a pointer to their submitter:
 * pd_pool_cancel marks one (owner, tag), pd_pool_cancel_owner all of an
 * owner's, so no worker spends time on work nobody will read. Several
 * tasks may share an (owner, tag): a cancel marks them all. Ordered tasks
 * carry one or two lanes (opaque keys the submitter picks, for instance a
 * hash of the scene a change is for): tasks that share a lane run one at a
 * time, in the order they were submitted, and complete in that order;
 * tasks with no lane in common run in parallel. An ordered task that
 * cannot start holds back the later ones of its lanes only. Ordered tasks
 * that can start go ahead of the others.
 * The others run in the order of their keys, lowest first (submission order
 * among equal keys): the submitter's policy, for instance fair queueing
 * between clients (pd_pool_virtual_time).
 *
 * Lifetime: the submitter initialises the task with pd_task_init, fills its
 * own fields and submits it; the pool holds it from PD_OK until it comes
 * back from pd_pool_take_completed.
 *
 * Threads: submit, take_completed, cancel, cancel_owner, set_paused
 * and get_stats may be called from any thread (normally the loop thread);
 * destroy from the thread that created the pool, once nothing else calls
 * into it.
 */
#ifndef PD_POOL_H
#define PD_POOL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "pd_status.h"

typedef struct pd_pool pd_pool;
typedef struct pd_task pd_task;

/* Runs on a worker with that worker's context; the returned status is
 * stored in task->status. It should poll pd_task_interrupt (or hand
 * pd_task_poll to a search) so cancels and deadlines stop it early. */
typedef pd_status (*pd_task_run_fn)(pd_task *task, void *thread_ctx);

struct pd_task {
    /* Set by the submitter (pd_task_init zeroes the rest). */
    pd_task_run_fn run;
    uint64_t owner;               /* cancel key: pd_pool_cancel_owner */
    uint64_t tag;                 /* cancel key with owner: pd_pool_cancel */
    uint64_t deadline_ns;         /* pd_pool_now_ns() clock; 0 = none */
    int ordered;                  /* one at a time per lane, in submission order */
    uint64_t lane;                /* an ordered task's lane */
    uint64_t lane2;               /* and a second one (lane again when it has one) */
    uint64_t key;                 /* unordered tasks run lowest key first */
    int hand_over_at_once;        /* complete it (and the worker's batch so
                                     far) as soon as it finishes, unbatched */

    /* Set by the pool. */
    uint64_t submitted_ns;        /* pd_pool_submit sets it when left 0 */
    uint64_t finished_ns;
    pd_status status;             /* what run returned; PD_CANCELLED or
                                     PD_DEADLINE_EXCEEDED when it never ran */
    atomic_int cancelled;         /* set by pd_pool_cancel*; read by pd_task_interrupt */
    uint64_t seq;                 /* submission order among equal keys */
    const pd_pool *pool;
    pd_task *next;                /* queue link, owned by whoever holds the task */
};

void pd_task_init(pd_task *task, pd_task_run_fn run);

/* Why a running task should stop: PD_CANCELLED (cancelled, or the pool is
 * being destroyed: nobody is left to read the result), PD_DEADLINE_EXCEEDED,
 * or PD_OK to carry on. */
pd_status pd_task_interrupt(const pd_task *task);

/* pd_task_interrupt with a void * (the pd_task), the shape of a search's
 * poll callback. */
pd_status pd_task_poll(void *task);

/* CLOCK_MONOTONIC in nanoseconds; the clock deadlines are measured on. */
uint64_t pd_pool_now_ns(void);

/* What each worker thread keeps. create runs on the worker's own thread (its
 * memory is first touched there) and may return NULL only on failure (the
 * worker then runs tasks with a NULL context); destroy frees it. trim (may
 * be NULL) runs on the worker after each task it ran, before the task is
 * completed, and after create: it gives back what the context holds beyond
 * what it should keep and returns the bytes it holds, which the statistics
 * report. user is the pool's thread_user. */
typedef struct pd_pool_thread_ops {
    void *(*create)(void *user);
    void (*destroy)(void *ctx);
    size_t (*trim)(void *ctx, void *user);
} pd_pool_thread_ops;

typedef void (*pd_pool_wake_fn)(void *user);

/* Queued ordered tasks a worker looks past, when the first ones wait for
 * their lanes, to find one that can start; beyond them it waits too (the
 * order within each lane holds either way). Bounds the time a pick holds
 * the pool's lock. */
#define PD_POOL_LANE_LOOKAHEAD 64u

/* Longest a worker keeps a finished task back while it runs more (200 us:
 * about a LAN round trip, some forty den520d searches; at 50 us a 2 x 64
 * pipelined load's answers left in about twice as many wakeups and
 * writes: issue 30, item 6), and most tasks it gathers before handing
 * them over. A task whose submitter waits on it alone is not held
 * (hand_over_at_once), nor are results behind a long search (the poll). */
#define PD_POOL_BATCH_NS 200000u
#define PD_POOL_BATCH_TASKS 64u

typedef struct pd_pool_stats {
    uint32_t threads;
    uint32_t threads_ready;       /* threads that made their context and take tasks; fewer
                                     while they start, or when a context could not be made */
    uint64_t queue_depth;         /* tasks waiting for a worker */
    uint64_t running;             /* tasks a worker is on right now */
    uint64_t tasks_done;
    uint64_t busy_ns;             /* summed over threads */
    uint64_t context_bytes;       /* bytes the workers' contexts hold, summed, as
                                     their last trim reported (0 without trim) */
    uint64_t context_bytes_max;   /* the largest one worker's context holds */
    uint64_t yield_interval_ns;   /* pd_pool_set_yield_interval */
    uint64_t yields;              /* sched_yield calls the workers made */
    uint64_t yields_skipped;      /* yields due that the yield check skipped */
} pd_pool_stats;

/* threads >= 1, queue_capacity >= 1, ops with create and destroy (NULL
 * otherwise, or when a thread cannot be started); ops must outlive the
 * pool. wake may be NULL; otherwise a worker calls it once after each batch
 * of tasks it pushes onto the completion list, outside every pool lock. */
pd_pool *pd_pool_create(uint32_t threads, uint32_t queue_capacity, const pd_pool_thread_ops *ops,
                        void *thread_user, pd_pool_wake_fn wake, void *wake_user);

/* PD_OK (the pool holds the task now), PD_OVERLOADED (queue full) or
 * PD_DEADLINE_EXCEEDED (an unordered task with a deadline that the tasks
 * ahead of it would already outlast: their count over the workers times
 * the mean task time so far); the caller still holds a refused task.
 * PD_INVALID_ARGUMENT for a NULL pool, task or run. Never blocks. A task
 * found cancelled or past its deadline when a worker takes it completes at
 * once without running. */
pd_status pd_pool_submit(pd_pool *p, pd_task *task);

/* Takes every completed task, oldest first, as a list linked by ->next. */
pd_task *pd_pool_take_completed(pd_pool *p);

/* Marks every queued or running task (owner, tag) as cancelled: one
 * request may be several tasks (a batch's items, say), which share it.
 * Returns 1 if such a task was found, 0 if not (including one that has
 * already completed: its result stands). */
int pd_pool_cancel(pd_pool *p, uint64_t owner, uint64_t tag);

/* Marks every queued or running task of owner as cancelled. */
void pd_pool_cancel_owner(pd_pool *p, uint64_t owner);

/* While paused, workers start no new task: queued ones wait (and still
 * count against the queue capacity), except cancelled ones, which complete
 * as PD_CANCELLED. Running tasks are not interrupted. Lets an operator or a
 * test hold work back deterministically. */
void pd_pool_set_paused(pd_pool *p, int paused);

/* With interval_ns above 0, a worker calls sched_yield() between tasks
 * once it has run tasks for at least interval_ns since it last did (its
 * tasks' own time, not the wall clock's: a worker that others preempted
 * has had no slice to give up), unless the yield check says no
 * (pd_pool_set_yield_check). For a pool
 * whose workers can occupy every core while another thread (the
 * submitter's event loop) must answer promptly: under Linux's CFS a woken
 * thread waits for the running one's time slice (milliseconds) unless it
 * has run much less than it lately, and a busy loop thread has not, so
 * without the yield it can wait behind a worker's whole slice for each
 * request it reads and each answer it writes. The interval trades that
 * wait against the yields' cost: each is a context switch when something
 * else is runnable, and the submitter then runs more often on less work.
 * 0 (the default): never. */
void pd_pool_set_yield_interval(pd_pool *p, uint64_t interval_ns);

/* Whether the thread the yields are for (the submitter's event loop) may
 * be waiting for a core now; called by a worker, with user, when a yield
 * is due, instead of yielding unconditionally: 0 means "it is not" (say,
 * it sleeps with nothing to wake it), and that yield is skipped until the
 * next interval. NULL (the default): always yield. Set it before the
 * workers run tasks, or from the thread that submits. */
typedef int (*pd_pool_yield_check_fn)(void *user);
void pd_pool_set_yield_check(pd_pool *p, pd_pool_yield_check_fn check, void *user);

void pd_pool_get_stats(pd_pool *p, pd_pool_stats *out);

/* The key of the unordered task a worker took last: a submitter doing fair
 * queueing starts each client's next key from at least this, so a client
 * that was idle does not jump ahead of everything queued meanwhile, nor
 * wait behind keys other clients ran through long ago. Thread-safe. */
uint64_t pd_pool_virtual_time(const pd_pool *p);

/* Stops the threads: a running task is told to stop at its next poll
 * (pd_task_interrupt says CANCELLED), queued tasks complete as
 * PD_CANCELLED and stay on the completion list with the rest, for the
 * caller to take and free after destroy returns through the list it gets
 * from pd_pool_destroy. wake is not called for them. NULL is a no-op and
 * returns NULL. */
pd_task *pd_pool_destroy(pd_pool *p);

#endif
