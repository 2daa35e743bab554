/*
 * test_pool.c - the worker pool (pd_pool.h), an executor of opaque tasks:
 * queue limits, key order, cancels, deadlines, pausing, teardown, batched
 * completions, statistics and context trimming. The tasks are the test's
 * own (the pool knows nothing of what it runs, and neither do these
 * tests): a spin task counts steps of a checksum, polling its task every
 * SPIN_POLL steps the way a search polls, and may grow its worker's
 * context; one with steps SPIN_UNTIL_STOPPED runs until a cancel, a
 * deadline or the pool's destroy stops it. What searches do on the pool
 * (stopped part way, their contexts trimmed) is test_query_pipeline.c's.
 *
 * To hold a worker still without sleeping, the wake callback can be gated
 * (pool_waker.h): a worker that has just finished a task blocks inside
 * wake until the test opens the gate, so tasks submitted meanwhile stay
 * queued.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pd_pool.h"
#include "pool_waker.h"

/* ---- the test's tasks and worker contexts ---- */

/* Steps between two polls of the task: a search polls every thousand
 * expansions or so. */
#define SPIN_POLL 1024u
/* A spin task that runs until something stops it; it gives up by itself
 * after SPIN_CAP steps (tens of seconds), so a stop that never comes fails
 * the test (PD_OK where PD_CANCELLED was due) instead of hanging it. */
#define SPIN_UNTIL_STOPPED UINT64_MAX
#define SPIN_CAP (1ull << 36)

/* Tasks alive (made and not yet freed): every task the pool took must come
 * back to the test, whatever happened to it. */
static atomic_long live_tasks;

typedef struct spin_task {
    pd_task task;              /* first: the pool hands back this pointer */
    uint64_t steps;            /* to run, or SPIN_UNTIL_STOPPED */
    uint64_t done;             /* steps run */
    uint64_t sum;              /* the checksum of the steps run */
    size_t grow;               /* bytes its worker's context holds while it runs */
    int ran;                   /* the run function was called */
} spin_task;

/* The checksum of steps 0..n-1 from seed: what a spin task must return. */
static uint64_t spin_sum(uint64_t seed, uint64_t n)
{
    uint64_t x = seed, sum = 0;
    for (uint64_t i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        sum += x >> 33;
    }
    return sum;
}

/* A worker's context: a buffer a task may grow, as a search grows its
 * node pool. */
typedef struct spin_ctx {
    unsigned char *buf;
    size_t bytes;
} spin_ctx;

static void *spin_ctx_create(void *user)
{
    (void)user;
    return calloc(1, sizeof(spin_ctx));
}

static void spin_ctx_destroy(void *ctx)
{
    spin_ctx *c = ctx;
    free(c->buf);
    free(c);
}

/* Keeps at most *retained bytes (everything when user is NULL). */
static size_t spin_ctx_trim(void *ctx, void *user)
{
    spin_ctx *c = ctx;
    const size_t *retained = user;
    if (retained && c->bytes > *retained) {
        free(c->buf);
        c->buf = *retained ? malloc(*retained) : NULL;
        c->bytes = c->buf ? *retained : 0;
    }
    return sizeof *c + c->bytes;
}

static const pd_pool_thread_ops spin_ops = {spin_ctx_create, spin_ctx_destroy, spin_ctx_trim};

static pd_status spin_run(pd_task *task, void *thread_ctx)
{
    spin_task *t = (spin_task *)task;
    spin_ctx *c = thread_ctx;
    t->ran = 1;
    if (t->grow > c->bytes) {
        unsigned char *grown = realloc(c->buf, t->grow);
        if (!grown)
            return PD_INTERNAL;
        memset(grown, 1, t->grow); /* touched, as a search's nodes are */
        c->buf = grown;
        c->bytes = t->grow;
    }
    uint64_t limit = t->steps == SPIN_UNTIL_STOPPED ? SPIN_CAP : t->steps;
    uint64_t x = task->tag;
    while (t->done < limit) {
        if (t->done % SPIN_POLL == 0) {
            pd_status why = pd_task_interrupt(task);
            if (why != PD_OK)
                return why;
        }
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        t->sum += x >> 33;
        t->done++;
    }
    return PD_OK;
}

/* A spin task of `steps` for (owner, tag); the tag seeds its checksum. */
static spin_task *spin_new(uint64_t owner, uint64_t tag, uint64_t steps)
{
    spin_task *t = calloc(1, sizeof *t);
    assert_non_null(t);
    pd_task_init(&t->task, spin_run);
    t->task.owner = owner;
    t->task.tag = tag;
    t->steps = steps;
    atomic_fetch_add(&live_tasks, 1);
    return t;
}

static void spin_free(spin_task *t)
{
    if (t)
        atomic_fetch_sub(&live_tasks, 1);
    free(t);
}

static void spin_free_all(spin_task **tasks, size_t n)
{
    for (size_t i = 0; i < n; i++)
        spin_free(tasks[i]);
}

static void submit_ok(pd_pool *pool, spin_task *t)
{
    assert_int_equal(pd_pool_submit(pool, &t->task), PD_OK);
}

/* Takes completed tasks until `n` have arrived, in completion order. */
static size_t collect(pd_pool *pool, test_waker *w, spin_task **out, size_t n)
{
    return collect_tasks(pool, w, (void **)out, n, NULL);
}

/* A pool of `threads` spin workers keeping `retained` bytes (NULL: all)
 * and `cap` queue slots whose wake is w's (gate closed or open). */
static pd_pool *pool_open(test_waker *w, unsigned threads, size_t cap, int gate_closed,
                          size_t *retained)
{
    waker_init(w, gate_closed);
    return pd_pool_create(threads, cap, &spin_ops, retained, waker_wake, w);
}

/* Destroys the pool, freeing the tasks it still held, and the waker. */
static void pool_close(pd_pool *pool, test_waker *w)
{
    for (pd_task *t = pd_pool_destroy(pool); t;) {
        pd_task *next = t->next;
        spin_free((spin_task *)t);
        t = next;
    }
    waker_destroy(w);
}

/* Runs one task of a million steps so the worker's thread is up and the
 * pool has a mean task time to estimate queues with. */
static void warm_up(pd_pool *pool, test_waker *w)
{
    submit_ok(pool, spin_new(0, 0, 1000000));
    spin_task *warm[1];
    collect(pool, w, warm, 1);
    assert_int_equal(warm[0]->task.status, PD_OK);
    spin_free_all(warm, 1);
}

static int setup(void **state)
{
    (void)state;
    atomic_store(&live_tasks, 0);
    return 0;
}

/* Every task came back and was freed, whatever happened to it. */
static int teardown(void **state)
{
    (void)state;
    assert_int_equal(atomic_load(&live_tasks), 0);
    return 0;
}

/* ---- tests ---- */

static void test_bad_arguments(void **state)
{
    (void)state;
    assert_null(pd_pool_create(0, 4, &spin_ops, NULL, NULL, NULL));
    assert_null(pd_pool_create(1, 0, &spin_ops, NULL, NULL, NULL));
    pd_pool_thread_ops no_create = {NULL, spin_ctx_destroy, NULL};
    assert_null(pd_pool_create(1, 4, &no_create, NULL, NULL, NULL));

    pd_pool *pool = pd_pool_create(1, 4, &spin_ops, NULL, NULL, NULL);
    assert_non_null(pool);
    assert_int_equal(pd_pool_submit(pool, NULL), PD_INVALID_ARGUMENT);
    /* A task with nothing to run is refused; the submitter still holds it. */
    spin_task *no_run = spin_new(1, 1, 1);
    no_run->task.run = NULL;
    assert_int_equal(pd_pool_submit(pool, &no_run->task), PD_INVALID_ARGUMENT);
    spin_free(no_run);
    spin_task *t = spin_new(1, 1, 1);
    assert_int_equal(pd_pool_submit(NULL, &t->task), PD_INVALID_ARGUMENT);
    spin_free(t);
    assert_int_equal(pd_pool_cancel(pool, 1, 1), 0);
    assert_null(pd_pool_destroy(pool));
}

#define MANY_TASKS 600

static void test_many_tasks_four_workers(void **state)
{
    (void)state;
    test_waker w;
    pd_pool *pool = pool_open(&w, 4, MANY_TASKS, 0, NULL);
    assert_non_null(pool);
    /* Four workers on a machine with fewer cores is the case the yield is
     * for: every task must still run once and come back once. */
    pd_pool_set_yield_interval(pool, 1);

    uint32_t seed = 12345;
    for (uint64_t id = 0; id < MANY_TASKS; id++) {
        seed = seed * 1103515245u + 12345u;
        submit_ok(pool, spin_new(id % 7, id, 1000 + (seed >> 16) % 20000));
    }

    static spin_task *done[MANY_TASKS];
    static int seen[MANY_TASKS];
    memset(seen, 0, sizeof seen);
    collect(pool, &w, done, MANY_TASKS);
    uint64_t steps = 0;
    for (size_t i = 0; i < MANY_TASKS; i++) {
        spin_task *t = done[i];
        assert_true(t->task.tag < MANY_TASKS);
        assert_int_equal(seen[t->task.tag], 0);
        seen[t->task.tag] = 1;
        assert_int_equal(t->task.status, PD_OK);
        assert_int_equal(t->task.owner, t->task.tag % 7);
        assert_int_equal(t->done, t->steps);
        assert_int_equal(t->sum, spin_sum(t->task.tag, t->steps));
        assert_true(t->task.finished_ns >= t->task.submitted_ns);
        steps += t->done;
    }
    /* Nothing more arrives: each task completed exactly once. */
    assert_null(pd_pool_take_completed(pool));

    unsigned wakes = waker_wakes(&w);
    assert_true(wakes >= 1 && wakes <= MANY_TASKS);
    pd_pool_stats st;
    pd_pool_get_stats(pool, &st);
    assert_int_equal(st.threads, 4);
    assert_int_equal(st.threads_ready, 4);
    assert_int_equal(st.yield_interval_ns, 1);
    assert_int_equal(st.queue_depth, 0);
    assert_int_equal(st.running, 0);
    assert_int_equal(st.tasks_done, MANY_TASKS);
    assert_true(steps > 0);
    assert_true(st.busy_ns > 0);

    spin_free_all(done, MANY_TASKS);
    pool_close(pool, &w);
}

static void test_queue_full_overloaded(void **state)
{
    (void)state;
    test_waker w;
    pd_pool *pool = pool_open(&w, 1, 2, 1, NULL);
    assert_non_null(pool);

    submit_ok(pool, spin_new(1, 1, 10));
    waker_wait_blocked(&w, 1);
    submit_ok(pool, spin_new(1, 2, 10));
    submit_ok(pool, spin_new(1, 3, 10));
    spin_task *extra = spin_new(1, 4, 10);
    assert_int_equal(pd_pool_submit(pool, &extra->task), PD_OVERLOADED);
    /* The caller still owns the refused task, untouched. */
    assert_int_equal(extra->task.status, PD_OK);
    assert_false(extra->ran);

    pd_pool_stats st;
    pd_pool_get_stats(pool, &st);
    assert_int_equal(st.queue_depth, 2);
    assert_int_equal(st.running, 0);
    assert_int_equal(st.tasks_done, 1);

    waker_open_gate(&w);
    spin_task *done[3];
    collect(pool, &w, done, 3);
    /* One worker and a FIFO queue: results come back in submission order. */
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(done[i]->task.tag, i + 1);
        assert_int_equal(done[i]->task.status, PD_OK);
    }
    spin_free_all(done, 3);

    /* With room again, the refused task goes through. */
    submit_ok(pool, extra);
    collect(pool, &w, done, 1);
    assert_ptr_equal(done[0], extra);
    assert_int_equal(extra->task.status, PD_OK);
    assert_int_equal(extra->sum, spin_sum(4, 10));
    spin_free_all(done, 1);
    pool_close(pool, &w);
}

/* Queued tasks run lowest key first (submission order among equal keys),
 * ordered tasks ahead of them and one at a time; the virtual time follows
 * the key of the task taken last. This is what the server's fair queueing
 * between connections rests on. */
static void test_keys_order_the_queue(void **state)
{
    (void)state;
    test_waker w;
    pd_pool *pool = pool_open(&w, 1, 16, 0, NULL);
    assert_non_null(pool);
    pd_pool_set_paused(pool, 1);
    static const uint64_t keys[] = {5, 3, 9, 3, 1};
    for (uint64_t i = 0; i < 5; i++) {
        spin_task *t = spin_new(1, i + 1, 10);
        t->task.key = keys[i];
        submit_ok(pool, t);
    }
    /* An update-like ordered task goes first, whatever the keys. */
    spin_task *ord = spin_new(2, 99, 10);
    ord->task.key = 100;
    ord->task.ordered = 1;
    submit_ok(pool, ord);
    assert_int_equal(pd_pool_virtual_time(pool), 0);
    pd_pool_set_paused(pool, 0);
    spin_task *done[6];
    collect(pool, &w, done, 6);
    static const uint64_t want[] = {99, 5, 2, 4, 1, 3};
    for (size_t i = 0; i < 6; i++) {
        assert_int_equal(done[i]->task.status, PD_OK);
        if (done[i]->task.tag != want[i])
            fail_msg("task %zu done was %llu, want %llu", i, (unsigned long long)done[i]->task.tag,
                     (unsigned long long)want[i]);
    }
    assert_int_equal(pd_pool_virtual_time(pool), 9);
    spin_free_all(done, 6);
    pool_close(pool, &w);
}

/* A task whose deadline the queue ahead of it would outlast is refused at
 * submission (the caller keeps it), once the pool has a mean task time to
 * go by; one with room to spare, or with no deadline, is queued. */
static void test_deadline_refused_when_queue_outlasts_it(void **state)
{
    (void)state;
    test_waker w;
    pd_pool *pool = pool_open(&w, 1, 64, 0, NULL);
    assert_non_null(pool);
    warm_up(pool, &w); /* one finished task: a mean to estimate with */
    pd_pool_set_paused(pool, 1);
    for (uint64_t i = 1; i <= 32; i++)
        submit_ok(pool, spin_new(1, i, 100000));
    spin_task *late = spin_new(2, 100, 10);
    late->task.deadline_ns = pd_pool_now_ns() + 1000; /* 1 us: far less than 32 tasks */
    assert_int_equal(pd_pool_submit(pool, &late->task), PD_DEADLINE_EXCEEDED);
    assert_false(late->ran);
    late->task.deadline_ns = pd_pool_now_ns() + 60ull * 1000000000ull;
    submit_ok(pool, late);
    spin_task *none = spin_new(3, 101, 10); /* no deadline: always queued */
    submit_ok(pool, none);
    pd_pool_set_paused(pool, 0);
    spin_task *done[34];
    collect(pool, &w, done, 34);
    for (size_t i = 0; i < 34; i++)
        assert_int_equal(done[i]->task.status, PD_OK);
    spin_free_all(done, 34);
    pool_close(pool, &w);
}

static void test_cancel_queued(void **state)
{
    (void)state;
    test_waker w;
    pd_pool *pool = pool_open(&w, 1, 8, 1, NULL);
    assert_non_null(pool);

    submit_ok(pool, spin_new(1, 1, 10));
    waker_wait_blocked(&w, 1);
    submit_ok(pool, spin_new(1, 2, 10));
    submit_ok(pool, spin_new(1, 3, 10));
    submit_ok(pool, spin_new(2, 2, 10));
    /* Tasks may share an (owner, tag), as a Batch's items do: the cancel
     * reaches every one of them. */
    submit_ok(pool, spin_new(1, 2, 10));

    assert_int_equal(pd_pool_cancel(pool, 1, 2), 1);
    assert_int_equal(pd_pool_cancel(pool, 1, 99), 0);
    assert_int_equal(pd_pool_cancel(pool, 3, 2), 0);
    /* The finished task is no longer the pool's to cancel. */
    assert_int_equal(pd_pool_cancel(pool, 1, 1), 0);

    waker_open_gate(&w);
    spin_task *done[5];
    collect(pool, &w, done, 5);
    assert_int_equal(done[0]->task.status, PD_OK);
    assert_int_equal(done[1]->task.tag, 2);
    assert_int_equal(done[1]->task.owner, 1);
    assert_int_equal(done[1]->task.status, PD_CANCELLED);
    assert_false(done[1]->ran);
    assert_int_equal(done[2]->task.status, PD_OK);
    assert_int_equal(done[3]->task.owner, 2);
    assert_int_equal(done[3]->task.status, PD_OK);
    assert_int_equal(done[4]->task.tag, 2);
    assert_int_equal(done[4]->task.owner, 1);
    assert_int_equal(done[4]->task.status, PD_CANCELLED);
    assert_false(done[4]->ran);
    spin_free_all(done, 5);

    pd_pool_stats st;
    pd_pool_get_stats(pool, &st);
    assert_int_equal(st.tasks_done, 5);
    pool_close(pool, &w);
}

/* A running task that polls is stopped by a cancel, part way. */
static void test_cancel_running(void **state)
{
    (void)state;
    test_waker w;
    pd_pool *pool = pool_open(&w, 1, 4, 0, NULL);
    assert_non_null(pool);

    submit_ok(pool, spin_new(5, 1, SPIN_UNTIL_STOPPED));
    wait_running(pool, 1);
    assert_int_equal(pd_pool_cancel(pool, 5, 1), 1);
    spin_task *done[1];
    collect(pool, &w, done, 1);
    assert_int_equal(done[0]->task.status, PD_CANCELLED);
    assert_true(done[0]->ran);
    assert_true(done[0]->done < SPIN_CAP);
    spin_free_all(done, 1);
    pool_close(pool, &w);
}

/* cancel_owner reaches both the running task and the queued ones of that
 * owner, and leaves other owners alone. */
static void test_cancel_owner(void **state)
{
    (void)state;
    test_waker w;
    pd_pool *pool = pool_open(&w, 1, 8, 0, NULL);
    assert_non_null(pool);

    submit_ok(pool, spin_new(7, 1, SPIN_UNTIL_STOPPED));
    wait_running(pool, 1);
    submit_ok(pool, spin_new(7, 2, 10));
    submit_ok(pool, spin_new(8, 1, 10));
    submit_ok(pool, spin_new(7, 3, 10));
    pd_pool_cancel_owner(pool, 7);

    spin_task *done[4];
    collect(pool, &w, done, 4);
    for (size_t i = 0; i < 4; i++) {
        if (done[i]->task.owner == 7) {
            assert_int_equal(done[i]->task.status, PD_CANCELLED);
            assert_true(done[i]->done < SPIN_CAP);
        } else {
            assert_int_equal(done[i]->task.status, PD_OK);
            assert_int_equal(done[i]->sum, spin_sum(1, 10));
        }
    }
    spin_free_all(done, 4);
    pool_close(pool, &w);
}

static void test_deadline_already_passed(void **state)
{
    (void)state;
    test_waker w;
    pd_pool *pool = pool_open(&w, 1, 4, 0, NULL);
    assert_non_null(pool);

    spin_task *late = spin_new(1, 1, 10);
    late->task.deadline_ns = pd_pool_now_ns() - 1;
    submit_ok(pool, late);
    spin_task *in_time = spin_new(1, 2, 10);
    in_time->task.deadline_ns = pd_pool_now_ns() + COLLECT_TIMEOUT_NS;
    submit_ok(pool, in_time);

    spin_task *done[2];
    collect(pool, &w, done, 2);
    assert_ptr_equal(done[0], late);
    assert_int_equal(late->task.status, PD_DEADLINE_EXCEEDED);
    assert_false(late->ran);
    assert_int_equal(in_time->task.status, PD_OK);
    assert_int_equal(in_time->sum, spin_sum(2, 10));
    spin_free_all(done, 2);
    pool_close(pool, &w);
}

/* A task that would run until stopped stops at its deadline, part way,
 * and not before it. */
#define SHORT_DEADLINE_NS (20ull * 1000000ull)

static void test_deadline_stops_running_task(void **state)
{
    (void)state;
    test_waker w;
    pd_pool *pool = pool_open(&w, 1, 4, 0, NULL);
    assert_non_null(pool);

    spin_task *t = spin_new(1, 1, SPIN_UNTIL_STOPPED);
    t->task.deadline_ns = pd_pool_now_ns() + SHORT_DEADLINE_NS;
    submit_ok(pool, t);
    spin_task *done[1];
    collect(pool, &w, done, 1);
    assert_int_equal(t->task.status, PD_DEADLINE_EXCEEDED);
    assert_true(t->ran);
    assert_true(t->done > 0 && t->done < SPIN_CAP);
    assert_true(t->task.finished_ns >= t->task.deadline_ns);
    spin_free_all(done, 1);
    pool_close(pool, &w);
}

/* A paused pool starts no task; a cancelled task still comes back while
 * paused, and resuming runs the rest. */
static void test_pause_holds_work(void **state)
{
    (void)state;
    test_waker w;
    pd_pool *pool = pool_open(&w, 2, 8, 0, NULL);
    assert_non_null(pool);
    pd_pool_set_paused(pool, 1);
    spin_task *mine[4];
    for (uint64_t id = 1; id <= 4; id++)
        submit_ok(pool, mine[id - 1] = spin_new(7, id, 10));

    pd_pool_stats st;
    pd_pool_get_stats(pool, &st);
    assert_int_equal(st.queue_depth, 4);

    assert_int_equal(pd_pool_cancel(pool, 7, 3), 1);
    spin_task *done[4];
    collect(pool, &w, done, 1);
    assert_int_equal(done[0]->task.tag, 3);
    assert_int_equal(done[0]->task.status, PD_CANCELLED);
    pd_pool_get_stats(pool, &st);
    assert_int_equal(st.queue_depth, 3);
    assert_int_equal(st.tasks_done, 1);
    /* Nothing else ran while paused. */
    for (size_t i = 0; i < 4; i++)
        assert_false(mine[i]->ran);
    spin_free_all(done, 1);

    pd_pool_set_paused(pool, 0);
    collect(pool, &w, done, 3);
    for (size_t i = 0; i < 3; i++) {
        assert_int_not_equal(done[i]->task.tag, 3);
        assert_int_equal(done[i]->task.status, PD_OK);
        assert_true(done[i]->ran);
    }
    spin_free_all(done, 3);
    pool_close(pool, &w);
}

typedef struct gate_opener {
    test_waker *waker;
    long delay_ms;
} gate_opener;

static void *open_gate_later(void *arg)
{
    gate_opener *g = arg;
    struct timespec pause = {g->delay_ms / 1000, (g->delay_ms % 1000) * 1000000L};
    nanosleep(&pause, NULL);
    waker_open_gate(g->waker);
    return NULL;
}

/* Destroy with tasks queued, some waiting to be taken and workers held in
 * wake: destroy waits for the gate and hands back every task it held, so
 * each is freed (the teardown counts them; ASan would report a leak). */
static void test_destroy_with_queued_tasks(void **state)
{
    (void)state;
    test_waker w;
    pd_pool *pool = pool_open(&w, 2, 16, 1, NULL);
    assert_non_null(pool);

    submit_ok(pool, spin_new(1, 1, 10));
    submit_ok(pool, spin_new(1, 2, 10));
    /* One worker may run both before it hands them over in one batch. */
    waker_wait_blocked(&w, 1);
    for (uint64_t id = 3; id < 12; id++)
        submit_ok(pool, spin_new(1, id, 10));
    assert_int_equal(atomic_load(&live_tasks), 11);

    /* Workers are held in wake, so destroy must wait for the gate; open it
     * from another thread while destroy is joining. */
    gate_opener g = {&w, 50};
    pthread_t opener;
    assert_int_equal(pthread_create(&opener, NULL, open_gate_later, &g), 0);
    pool_close(pool, &w);
    pthread_join(opener, NULL);
    assert_int_equal(atomic_load(&live_tasks), 0);
}

/* Destroy does not wait for a running task to finish on its own: it stops
 * it at its next poll. The running task comes back CANCELLED part way and
 * the queued one never ran; the running one's completion is the one wake. */
static void test_destroy_stops_running_task(void **state)
{
    (void)state;
    test_waker w;
    pd_pool *pool = pool_open(&w, 1, 4, 0, NULL);
    assert_non_null(pool);

    spin_task *running = spin_new(1, 1, SPIN_UNTIL_STOPPED);
    spin_task *queued = spin_new(1, 2, SPIN_UNTIL_STOPPED);
    submit_ok(pool, running);
    submit_ok(pool, queued);
    wait_running(pool, 1);
    size_t left = 0;
    for (pd_task *t = pd_pool_destroy(pool); t; left++)
        t = t->next;
    assert_int_equal(left, 2);
    assert_int_equal(running->task.status, PD_CANCELLED);
    assert_true(running->ran);
    assert_true(running->done > 0 && running->done < SPIN_CAP);
    assert_int_equal(queued->task.status, PD_CANCELLED);
    assert_false(queued->ran);
    assert_int_equal(waker_wakes(&w), 1);
    spin_free(running);
    spin_free(queued);
    waker_destroy(&w);
}

/* A task that only counts: the pool's own overhead, nothing else. */
typedef struct count_task {
    pd_task task;
    atomic_uint *runs;
} count_task;

static pd_status count_task_run(pd_task *task, void *ctx)
{
    (void)ctx;
    atomic_fetch_add(((count_task *)task)->runs, 1);
    return PD_OK;
}

/* Completions come back in batches: 48 trivial tasks queued while the pool
 * is paused and then run by one worker are handed over with far fewer
 * wakes than tasks (one per PD_POOL_BATCH_NS or PD_POOL_BATCH_TASKS, and
 * one before the worker sleeps; a worker preempted mid-batch adds a few),
 * every task comes back once, and in the order they ran. */
static void test_completions_come_back_in_batches(void **state)
{
    enum { N = 48 };
    (void)state;
    test_waker w;
    pd_pool *pool = pool_open(&w, 1, N, 0, NULL);
    assert_non_null(pool);
    atomic_uint runs;
    atomic_init(&runs, 0);
    count_task tasks[N];
    pd_pool_set_paused(pool, 1);
    for (int i = 0; i < N; i++) {
        pd_task_init(&tasks[i].task, count_task_run);
        tasks[i].task.tag = (uint64_t)i;
        tasks[i].runs = &runs;
        assert_int_equal(pd_pool_submit(pool, &tasks[i].task), PD_OK);
    }
    pd_pool_set_paused(pool, 0);

    size_t got = 0;
    uint64_t give_up = pd_pool_now_ns() + COLLECT_TIMEOUT_NS;
    while (got < N) {
        for (pd_task *t = pd_pool_take_completed(pool); t; t = t->next) {
            assert_int_equal(t->tag, got);
            assert_int_equal(t->status, PD_OK);
            got++;
        }
        assert_true(pd_pool_now_ns() < give_up);
        if (got < N)
            waker_wait_a_moment(&w);
    }
    assert_int_equal(atomic_load(&runs), N);
    assert_true(waker_wakes(&w) < N / 4);
    assert_null(pd_pool_destroy(pool));
    waker_destroy(&w);
}

/* A task that waits, without polling, until the test lets it finish: it
 * stands for a long search that follows another task on the same worker. */
typedef struct held_task {
    pd_task task;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int released;
} held_task;

static pd_status held_task_run(pd_task *task, void *ctx)
{
    (void)ctx;
    held_task *h = (held_task *)task;
    pthread_mutex_lock(&h->lock);
    while (!h->released)
        pthread_cond_wait(&h->cond, &h->lock);
    pthread_mutex_unlock(&h->lock);
    return PD_OK;
}

/* The completion list as soon as it is not empty, or NULL after timeout_ns. */
static pd_task *take_completed_within(pd_pool *pool, test_waker *w, uint64_t timeout_ns)
{
    pd_task *done;
    uint64_t give_up = pd_pool_now_ns() + timeout_ns;
    while (!(done = pd_pool_take_completed(pool)) && pd_pool_now_ns() < give_up)
        waker_wait_a_moment(w);
    return done;
}

/* A task marked hand_over_at_once comes back while the worker is still
 * busy with the next queued task; batched, it would wait for that task
 * (here: forever, until the test gives up). The held task comes back once
 * released. */
static void test_hand_over_at_once_is_not_batched(void **state)
{
    (void)state;
    test_waker w;
    pd_pool *pool = pool_open(&w, 1, 4, 0, NULL);
    assert_non_null(pool);
    atomic_uint runs;
    atomic_init(&runs, 0);
    count_task urgent;
    pd_task_init(&urgent.task, count_task_run);
    urgent.task.tag = 1;
    urgent.task.hand_over_at_once = 1;
    urgent.runs = &runs;
    held_task held;
    pd_task_init(&held.task, held_task_run);
    held.task.tag = 2;
    pthread_mutex_init(&held.lock, NULL);
    pthread_cond_init(&held.cond, NULL);
    held.released = 0;
    pd_pool_set_paused(pool, 1);
    assert_int_equal(pd_pool_submit(pool, &urgent.task), PD_OK);
    assert_int_equal(pd_pool_submit(pool, &held.task), PD_OK);
    pd_pool_set_paused(pool, 0);

    pd_task *first = take_completed_within(pool, &w, 10ull * 1000000000ull);
    assert_non_null(first);
    assert_int_equal(first->tag, 1);
    assert_null(first->next);
    assert_int_equal(atomic_load(&runs), 1);

    pthread_mutex_lock(&held.lock);
    held.released = 1;
    pthread_cond_signal(&held.cond);
    pthread_mutex_unlock(&held.lock);
    pd_task *second = take_completed_within(pool, &w, COLLECT_TIMEOUT_NS);
    assert_non_null(second);
    assert_int_equal(second->tag, 2);
    assert_int_equal(second->status, PD_OK);
    assert_null(pd_pool_destroy(pool));
    pthread_cond_destroy(&held.cond);
    pthread_mutex_destroy(&held.lock);
    waker_destroy(&w);
}

/* Runs one task growing its worker's context to `grow` bytes on a fresh
 * 2-worker pool keeping `retained` bytes per worker; returns the pool's
 * statistics after it. */
static pd_pool_stats run_growing_and_stat(size_t grow, size_t *retained)
{
    test_waker w;
    pd_pool *pool = pool_open(&w, 2, 8, 0, retained);
    assert_non_null(pool);
    pd_pool_stats st;
    pd_pool_get_stats(pool, &st);
    /* Nothing grown before the first task. */
    assert_true(st.context_bytes_max < 1024);

    spin_task *t = spin_new(1, 1, 10);
    t->grow = grow;
    submit_ok(pool, t);
    spin_task *done[1];
    collect(pool, &w, done, 1);
    assert_int_equal(t->task.status, PD_OK);
    pd_pool_get_stats(pool, &st);
    spin_free_all(done, 1);
    pool_close(pool, &w);
    return st;
}

/* A worker's context grows with its task and, after the task and before
 * it completes, gives back whatever exceeds the retained size: with
 * everything kept the statistics show the megabytes the task grew, with
 * 256 KiB retained at most that. */
static void test_workers_trim_contexts(void **state)
{
    (void)state;
    size_t retained = 256 * 1024, grow = 4u << 20;
    pd_pool_stats kept = run_growing_and_stat(grow, NULL);
    assert_true(kept.context_bytes_max >= grow);
    assert_true(kept.context_bytes >= kept.context_bytes_max);
    pd_pool_stats trimmed = run_growing_and_stat(grow, &retained);
    assert_true(trimmed.context_bytes_max <= retained + sizeof(spin_ctx));
    assert_true(trimmed.context_bytes_max >= retained);
    assert_true(trimmed.context_bytes <= 2 * (retained + sizeof(spin_ctx)));
}

/* The yield check's answers, in turn: no, yes, no, ... (counted). */
static atomic_uint yield_checks;

static int alternate_check(void *user)
{
    assert_ptr_equal(user, &yield_checks);
    return atomic_fetch_add(&yield_checks, 1) % 2;
}

/* A yield that is due asks the check first, and one it says no to is not
 * made: every task of a nanosecond interval makes one yield due. */
static void test_yield_check_decides(void **state)
{
    (void)state;
    test_waker w;
    pd_pool *pool = pool_open(&w, 1, 64, 0, NULL);
    assert_non_null(pool);
    atomic_store(&yield_checks, 0);
    pd_pool_set_yield_interval(pool, 1);
    pd_pool_set_yield_check(pool, alternate_check, &yield_checks);
    enum { N = 40 };
    for (uint64_t id = 0; id < N; id++)
        submit_ok(pool, spin_new(1, id, 2000));
    spin_task *done[N];
    collect(pool, &w, done, N);
    spin_free_all(done, N);
    /* The worker checks after a task's completion is on its batch: read
     * the counts once every check has been made. */
    while (atomic_load(&yield_checks) < N)
        sched_yield();
    pd_pool_stats st;
    pd_pool_get_stats(pool, &st);
    assert_int_equal(atomic_load(&yield_checks), N);
    assert_int_equal(st.yields, N / 2);
    assert_int_equal(st.yields_skipped, N / 2);
    pool_close(pool, &w);
}

/* The interval is the worker's own running time: time it spent waiting
 * for work makes no yield due. Two short tasks 30 ms apart against a
 * 10 ms interval: no yield, no check (by the wall clock the second one
 * would have yielded). */
static void test_yield_interval_counts_running_time(void **state)
{
    (void)state;
    test_waker w;
    pd_pool *pool = pool_open(&w, 1, 4, 0, NULL);
    assert_non_null(pool);
    atomic_store(&yield_checks, 0);
    pd_pool_set_yield_interval(pool, 10u * 1000u * 1000u);
    pd_pool_set_yield_check(pool, alternate_check, &yield_checks);
    for (uint64_t id = 0; id < 2; id++) {
        if (id > 0) {
            struct timespec gap = {0, 30 * 1000 * 1000};
            nanosleep(&gap, NULL);
        }
        submit_ok(pool, spin_new(1, id, 2000));
        spin_task *done[1];
        collect(pool, &w, done, 1);
        spin_free_all(done, 1);
    }
    pd_pool_stats st;
    pd_pool_get_stats(pool, &st);
    assert_int_equal(atomic_load(&yield_checks), 0);
    assert_int_equal(st.yields + st.yields_skipped, 0);
    pool_close(pool, &w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_completions_come_back_in_batches),
        cmocka_unit_test(test_hand_over_at_once_is_not_batched),
        cmocka_unit_test(test_many_tasks_four_workers),
        cmocka_unit_test(test_queue_full_overloaded),
        cmocka_unit_test(test_keys_order_the_queue),
        cmocka_unit_test(test_deadline_refused_when_queue_outlasts_it),
        cmocka_unit_test(test_cancel_queued),
        cmocka_unit_test(test_cancel_running),
        cmocka_unit_test(test_cancel_owner),
        cmocka_unit_test(test_deadline_already_passed),
        cmocka_unit_test(test_deadline_stops_running_task),
        cmocka_unit_test(test_pause_holds_work),
        cmocka_unit_test(test_destroy_with_queued_tasks),
        cmocka_unit_test(test_destroy_stops_running_task),
        cmocka_unit_test(test_workers_trim_contexts),
        cmocka_unit_test(test_yield_check_decides),
        cmocka_unit_test(test_yield_interval_counts_running_time),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
