/*
 * test_pool.c - the worker pool (an executor of opaque tasks): queue
 * limits, key order, cancels, deadlines, ordered tasks, pausing, batched
 * completions, statistics, scratch trimming and teardown. The tasks are
 * FindPath jobs because they give a search that runs until stopped; what
 * the searches answer (costs, path shapes, JPS against A*) is
 * test_query_pipeline.c's.
 *
 * Scenes are built by hand (pd_scene is a public struct) so the tests need no
 * map files. To hold a worker still without sleeping, the wake callback can
 * be gated: a worker that has just finished a job blocks inside wake until
 * the test opens the gate, so jobs submitted meanwhile stay queued.
 *
 * Long searches run on a BIG_SIDE square open grid whose goal cell is
 * walled in: it is passable, so the search cannot refuse it up front, and it
 * is unreachable, so A* keeps expanding until something stops it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pd_conf.h"
#include "pd_pool.h"
#include "pool_fixture.h"
#include "query_job.h"

#define MAX_COLLECT 1024

/* Runs one short job on the big grid so the worker's thread is up and its
 * context has grown to that grid: a timed test then measures the search,
 * not a one-off allocation. */
static void warm_up(pd_pool *pool, test_waker *w, pool_fixture *f)
{
    submit_ok(pool, make_job(f->big, 0, 0, 0, 0, 5, 5));
    pd_job *warm[1];
    collect(pool, w, warm, 1);
    assert_int_equal(warm[0]->task.status, PD_OK);
    free_jobs(warm, 1);
}

/* ---- tests ---- */

static void test_bad_arguments(void **state)
{
    pool_fixture *f = *state;
    assert_null(pd_pool_create(0, 4, &qj_thread_ops, NULL, NULL, NULL));
    assert_null(pd_pool_create(1, 0, &qj_thread_ops, NULL, NULL, NULL));

    pd_pool *pool = pd_pool_create(1, 4, &qj_thread_ops, NULL, NULL, NULL);
    assert_non_null(pool);
    assert_int_equal(pd_pool_submit(pool, NULL), PD_INVALID_ARGUMENT);
    /* A task with nothing to run is refused; the submitter still holds it. */
    pd_job *no_run = qj_new();
    assert_non_null(no_run);
    no_run->task.run = NULL;
    assert_int_equal(pd_pool_submit(pool, &no_run->task), PD_INVALID_ARGUMENT);
    pd_job_free(no_run);
    /* A path query with no scene is the query layer's to refuse. */
    pd_job *no_scene = run_now(qj_new());
    assert_int_equal(no_scene->task.status, PD_INVALID_ARGUMENT);
    pd_job_free(no_scene);
    pd_job *job = make_job(f->small, 1, 1, 0, 0, 1, 1);
    assert_int_equal(pd_pool_submit(NULL, &job->task), PD_INVALID_ARGUMENT);
    pd_job_free(job);
    assert_int_equal(pd_pool_cancel(pool, 1, 1), 0);
    qj_pool_destroy(pool);
}

#define MANY_JOBS 600
#define MANY_SIDE 24

static void test_many_jobs_four_workers(void **state)
{
    (void)state;
    pd_scene *scene = scene_open(MANY_SIDE, MANY_SIDE);
    test_waker w;
    pd_pool *pool = pool_open(&w, 4, MANY_JOBS, 0);
    assert_non_null(pool);
    /* Four workers on a machine with fewer cores is the case the yield is
     * for: every job must still run once and come back once. */
    pd_pool_set_yield_interval(pool, 1);

    uint32_t seed = 12345;
    for (uint64_t id = 0; id < MANY_JOBS; id++) {
        int32_t c[4];
        for (int k = 0; k < 4; k++) {
            seed = seed * 1103515245u + 12345u;
            c[k] = (int32_t)((seed >> 16) % MANY_SIDE);
        }
        pd_job *job = make_job(scene, id % 7, id, c[0], c[1], c[2], c[3]);
        job->path_query.style = id % 2 ? PD_STYLE_CORNERS : PD_STYLE_CELLS;
        submit_ok(pool, job);
    }

    static pd_job *done[MANY_JOBS];
    static int seen[MANY_JOBS];
    memset(seen, 0, sizeof seen);
    collect(pool, &w, done, MANY_JOBS);
    uint64_t expanded = 0;
    for (size_t i = 0; i < MANY_JOBS; i++) {
        pd_job *job = done[i];
        assert_true(job->task.tag < MANY_JOBS);
        assert_int_equal(seen[job->task.tag], 0);
        seen[job->task.tag] = 1;
        assert_int_equal(job->task.status, PD_OK);
        assert_int_equal(job->task.owner, job->task.tag % 7);
        assert_float_equal(job->path.metrics.cost, octile(job->path_query.params.start, job->path_query.params.goal), 1e-9);
        if (job->path_query.style == PD_STYLE_CELLS)
            assert_cell_path(job);
        expanded += job->path.metrics.expanded;
    }
    /* Nothing more arrives: each job completed exactly once. */
    assert_null(pd_pool_take_completed(pool));

    unsigned wakes = waker_wakes(&w);
    assert_true(wakes >= 1 && wakes <= MANY_JOBS);
    pd_pool_stats st;
    pd_pool_get_stats(pool, &st);
    assert_int_equal(st.threads, 4);
    assert_int_equal(st.yield_interval_ns, 1);
    assert_int_equal(st.queue_depth, 0);
    assert_int_equal(st.running, 0);
    assert_int_equal(st.tasks_done, MANY_JOBS);
    assert_true(expanded > 0);
    assert_true(st.busy_ns > 0);

    free_jobs(done, MANY_JOBS);
    pool_close(pool, &w);
    assert_int_equal(atomic_load(&scene->refs), 1);
    pd_scene_release(scene);
}

static void test_queue_full_overloaded(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    pd_pool *pool = pool_open(&w, 1, 2, 1);
    assert_non_null(pool);

    submit_ok(pool, make_job(f->small, 1, 1, 0, 0, 3, 3));
    waker_wait_blocked(&w, 1);
    submit_ok(pool, make_job(f->small, 1, 2, 0, 0, 4, 4));
    submit_ok(pool, make_job(f->small, 1, 3, 0, 0, 5, 5));
    pd_job *extra = make_job(f->small, 1, 4, 0, 0, 6, 6);
    assert_int_equal(qj_submit(pool, extra), PD_OVERLOADED);
    /* The caller still owns the refused job. */
    assert_int_equal(extra->task.status, PD_OK);
    assert_null(extra->path.path);

    pd_pool_stats st;
    pd_pool_get_stats(pool, &st);
    assert_int_equal(st.queue_depth, 2);
    assert_int_equal(st.running, 0);
    assert_int_equal(st.tasks_done, 1);

    waker_open_gate(&w);
    pd_job *done[3];
    collect(pool, &w, done, 3);
    /* One worker and a FIFO queue: results come back in submission order. */
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(done[i]->task.tag, i + 1);
        assert_int_equal(done[i]->task.status, PD_OK);
    }
    free_jobs(done, 3);

    /* With room again, the refused job goes through. */
    submit_ok(pool, extra);
    collect(pool, &w, done, 1);
    assert_ptr_equal(done[0], extra);
    assert_int_equal(extra->task.status, PD_OK);
    assert_float_equal(extra->path.metrics.cost, 6 * SQRT2, 1e-9);
    free_jobs(done, 1);
    pool_close(pool, &w);
}

/* Queued tasks run lowest key first (submission order among equal keys),
 * ordered tasks ahead of them and one at a time; the virtual time follows
 * the key of the task taken last. This is what the server's fair queueing
 * between connections rests on. */
static void test_keys_order_the_queue(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    pd_pool *pool = pool_open(&w, 1, 16, 0);
    assert_non_null(pool);
    pd_pool_set_paused(pool, 1);
    static const uint64_t keys[] = {5, 3, 9, 3, 1};
    for (uint64_t i = 0; i < 5; i++) {
        pd_job *job = make_job(f->small, 1, i + 1, 0, 0, 3, 3);
        job->task.key = keys[i];
        submit_ok(pool, job);
    }
    /* An update-like ordered task goes first, whatever the keys. */
    pd_job *ord = make_job(f->small, 2, 99, 0, 0, 3, 3);
    ord->task.key = 100;
    ord->task.owner = 2;
    ord->task.tag = 99;
    ord->task.ordered = 1;
    assert_int_equal(pd_pool_submit(pool, &ord->task), PD_OK);
    assert_int_equal(pd_pool_virtual_time(pool), 0);
    pd_pool_set_paused(pool, 0);
    pd_job *done[6];
    collect(pool, &w, done, 6);
    static const uint64_t want[] = {99, 5, 2, 4, 1, 3};
    for (size_t i = 0; i < 6; i++) {
        assert_int_equal(done[i]->task.status, PD_OK);
        if (done[i]->task.tag != want[i])
            fail_msg("task %zu done was %llu, want %llu", i, (unsigned long long)done[i]->task.tag,
                     (unsigned long long)want[i]);
    }
    assert_int_equal(pd_pool_virtual_time(pool), 9);
    free_jobs(done, 6);
    pool_close(pool, &w);
}

/* A task whose deadline the queue ahead of it would outlast is refused at
 * submission (the caller keeps it), once the pool has a mean task time to
 * go by; one with room to spare, or with no deadline, is queued. */
static void test_deadline_refused_when_queue_outlasts_it(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    pd_pool *pool = pool_open(&w, 1, 64, 0);
    assert_non_null(pool);
    warm_up(pool, &w, f); /* one finished task: a mean to estimate with */
    pd_pool_set_paused(pool, 1);
    for (uint64_t i = 1; i <= 32; i++)
        submit_ok(pool, make_job(f->big, 1, i, 0, 0, 400, 400));
    pd_job *late = make_job(f->small, 2, 100, 0, 0, 3, 3);
    late->task.deadline_ns = pd_pool_now_ns() + 1000; /* 1 us: far less than 32 searches */
    assert_int_equal(qj_submit(pool, late), PD_DEADLINE_EXCEEDED);
    late->task.deadline_ns = pd_pool_now_ns() + 60ull * 1000000000ull;
    assert_int_equal(qj_submit(pool, late), PD_OK);
    pd_pool_set_paused(pool, 0);
    pd_job *done[33];
    collect(pool, &w, done, 33);
    free_jobs(done, 33);
    pool_close(pool, &w);
}

static void test_cancel_queued(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    pd_pool *pool = pool_open(&w, 1, 8, 1);
    assert_non_null(pool);

    submit_ok(pool, make_job(f->small, 1, 1, 0, 0, 3, 3));
    waker_wait_blocked(&w, 1);
    submit_ok(pool, make_job(f->small, 1, 2, 0, 0, 9, 9));
    submit_ok(pool, make_job(f->small, 1, 3, 0, 0, 9, 9));
    submit_ok(pool, make_job(f->small, 2, 2, 0, 0, 9, 9));
    /* Tasks may share an (owner, tag), as a Batch's items do: the cancel
     * reaches every one of them. */
    submit_ok(pool, make_job(f->small, 1, 2, 0, 0, 9, 9));

    assert_int_equal(pd_pool_cancel(pool, 1, 2), 1);
    assert_int_equal(pd_pool_cancel(pool, 1, 99), 0);
    assert_int_equal(pd_pool_cancel(pool, 3, 2), 0);
    /* The finished job is no longer the pool's to cancel. */
    assert_int_equal(pd_pool_cancel(pool, 1, 1), 0);

    waker_open_gate(&w);
    pd_job *done[5];
    collect(pool, &w, done, 5);
    assert_int_equal(done[0]->task.status, PD_OK);
    assert_int_equal(done[1]->task.tag, 2);
    assert_int_equal(done[1]->task.owner, 1);
    assert_int_equal(done[1]->task.status, PD_CANCELLED);
    assert_int_equal(done[1]->path.metrics.expanded, 0);
    assert_null(done[1]->path.path);
    assert_int_equal(done[2]->task.status, PD_OK);
    assert_int_equal(done[3]->task.owner, 2);
    assert_int_equal(done[3]->task.status, PD_OK);
    assert_int_equal(done[4]->task.tag, 2);
    assert_int_equal(done[4]->task.owner, 1);
    assert_int_equal(done[4]->task.status, PD_CANCELLED);
    free_jobs(done, 5);

    pd_pool_stats st;
    pd_pool_get_stats(pool, &st);
    assert_int_equal(st.tasks_done, 5);
    pool_close(pool, &w);
}

static void test_cancel_running(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    pd_pool *pool = pool_open(&w, 1, 4, 0);
    assert_non_null(pool);

    submit_ok(pool, make_long_job(f, 5, 1));
    wait_running(pool, 1);
    assert_int_equal(pd_pool_cancel(pool, 5, 1), 1);
    pd_job *done[1];
    collect(pool, &w, done, 1);
    assert_int_equal(done[0]->task.status, PD_CANCELLED);
    assert_null(done[0]->path.path);
    free_jobs(done, 1);
    pool_close(pool, &w);
}

/* cancel_conn reaches both the running job and the queued ones of that
 * connection, and leaves other connections alone. */
static void test_cancel_conn(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    pd_pool *pool = pool_open(&w, 1, 8, 0);
    assert_non_null(pool);

    submit_ok(pool, make_long_job(f, 7, 1));
    wait_running(pool, 1);
    submit_ok(pool, make_job(f->small, 7, 2, 0, 0, 9, 9));
    submit_ok(pool, make_job(f->small, 8, 1, 0, 0, 9, 9));
    submit_ok(pool, make_job(f->small, 7, 3, 0, 0, 9, 9));
    pd_pool_cancel_owner(pool, 7);

    pd_job *done[4];
    collect(pool, &w, done, 4);
    for (size_t i = 0; i < 4; i++) {
        if (done[i]->task.owner == 7) {
            assert_int_equal(done[i]->task.status, PD_CANCELLED);
            assert_null(done[i]->path.path);
        } else {
            assert_int_equal(done[i]->task.status, PD_OK);
            assert_float_equal(done[i]->path.metrics.cost, 9 * SQRT2, 1e-9);
        }
    }
    free_jobs(done, 4);
    pool_close(pool, &w);
}

static void test_deadline_already_passed(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    pd_pool *pool = pool_open(&w, 1, 4, 0);
    assert_non_null(pool);

    pd_job *late = make_job(f->small, 1, 1, 0, 0, 9, 9);
    late->task.deadline_ns = pd_pool_now_ns() - 1;
    submit_ok(pool, late);
    pd_job *in_time = make_job(f->small, 1, 2, 0, 0, 9, 9);
    in_time->task.deadline_ns = pd_pool_now_ns() + COLLECT_TIMEOUT_NS;
    submit_ok(pool, in_time);

    pd_job *done[2];
    collect(pool, &w, done, 2);
    assert_ptr_equal(done[0], late);
    assert_int_equal(late->task.status, PD_DEADLINE_EXCEEDED);
    assert_int_equal(late->path.metrics.expanded, 0);
    assert_null(late->path.path);
    assert_int_equal(in_time->task.status, PD_OK);
    free_jobs(done, 2);
    pool_close(pool, &w);
}

/* A search that would exhaust four million cells (170-250 ms in an
 * optimised build) stops at its deadline, part way through. */
#define SHORT_DEADLINE_NS (20ull * 1000000ull)

static void test_deadline_stops_long_search(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    pd_pool *pool = pool_open(&w, 1, 4, 0);
    assert_non_null(pool);

    warm_up(pool, &w, f);
    pd_job *job = make_long_job(f, 1, 1);
    job->task.deadline_ns = pd_pool_now_ns() + SHORT_DEADLINE_NS;
    submit_ok(pool, job);
    pd_job *done[1];
    collect(pool, &w, done, 1);
    assert_int_equal(job->task.status, PD_DEADLINE_EXCEEDED);
    assert_true(job->path.metrics.expanded > 0);
    assert_true(job->path.metrics.expanded < (uint64_t)BIG_SIDE * BIG_SIDE);
    assert_true(job->task.finished_ns >= job->task.deadline_ns);
    assert_null(job->path.path);
    free_jobs(done, 1);
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

/* Destroy with jobs queued, one waiting to be taken and workers busy: every
 * job is freed (the scene's reference count returns to the fixture's one,
 * and ASan would report any leak). */
/* A paused pool starts no search; a cancelled job still gets its answer
 * while paused, and resuming runs the rest in order. */
static void test_pause_holds_work(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    pd_pool *pool = pool_open(&w, 2, 8, 0);
    assert_non_null(pool);
    pd_pool_set_paused(pool, 1);
    for (uint64_t id = 1; id <= 4; id++)
        submit_ok(pool, make_job(f->small, 7, id, 0, 0, 9, 9));

    pd_pool_stats st;
    pd_pool_get_stats(pool, &st);
    assert_int_equal(st.queue_depth, 4);

    assert_int_equal(pd_pool_cancel(pool, 7, 3), 1);
    pd_job *done[4];
    collect(pool, &w, done, 1);
    assert_int_equal(done[0]->task.tag, 3);
    assert_int_equal(done[0]->task.status, PD_CANCELLED);
    pd_pool_get_stats(pool, &st);
    assert_int_equal(st.queue_depth, 3);
    assert_int_equal(st.tasks_done, 1);
    free_jobs(done, 1);

    pd_pool_set_paused(pool, 0);
    collect(pool, &w, done, 3);
    size_t ok = 0;
    for (size_t i = 0; i < 3; i++) {
        assert_int_not_equal(done[i]->task.tag, 3);
        ok += done[i]->task.status == PD_OK;
    }
    assert_int_equal(ok, 3);
    free_jobs(done, 3);
    pool_close(pool, &w);
}

static void test_destroy_with_queued_jobs(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    pd_pool *pool = pool_open(&w, 2, 16, 1);
    assert_non_null(pool);

    submit_ok(pool, make_job(f->small, 1, 1, 0, 0, 3, 3));
    submit_ok(pool, make_job(f->small, 1, 2, 0, 0, 4, 4));
    /* One worker may run both before it hands them over in one batch. */
    waker_wait_blocked(&w, 1);
    for (uint64_t id = 3; id < 12; id++)
        submit_ok(pool, make_job(f->small, 1, id, 0, 0, 9, 9));
    assert_true(atomic_load(&f->small->refs) > 1);

    /* Workers are held in wake, so destroy must wait for the gate; open it
     * from another thread while destroy is joining. */
    gate_opener g = {&w, 50};
    pthread_t opener;
    assert_int_equal(pthread_create(&opener, NULL, open_gate_later, &g), 0);
    qj_pool_destroy(pool);
    pthread_join(opener, NULL);
    assert_int_equal(atomic_load(&f->small->refs), 1);
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
    pd_pool *pool = pool_open(&w, 1, N, 0);
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
        if (got < N) {
            pthread_mutex_lock(&w.lock);
            struct timespec ts = abs_time_after_ms(5);
            pthread_cond_timedwait(&w.cond, &w.lock, &ts);
            pthread_mutex_unlock(&w.lock);
        }
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
    while (!(done = pd_pool_take_completed(pool)) && pd_pool_now_ns() < give_up) {
        pthread_mutex_lock(&w->lock);
        struct timespec ts = abs_time_after_ms(5);
        pthread_cond_timedwait(&w->cond, &w->lock, &ts);
        pthread_mutex_unlock(&w->lock);
    }
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
    pd_pool *pool = pool_open(&w, 1, 4, 0);
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

/* Destroy does not wait for a long search to finish on its own: it stops it
 * at the next poll, a thousand expansions away. The running search comes
 * back CANCELLED part way through the grid (a search left to run would
 * exhaust all of it and answer NO_PATH) and the queued one never ran.
 * Judged by the search's own expansion count, not by a wall-clock bound,
 * which a loaded machine (parallel ctest beside a CPU hog) can blow by
 * descheduling the worker; exhausting the grid takes 4 M expansions. */
static void test_destroy_stops_running_search(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    pd_pool *pool = pool_open(&w, 1, 4, 0);
    assert_non_null(pool);
    warm_up(pool, &w, f);

    pd_job *running = make_long_job(f, 1, 1), *queued = make_long_job(f, 1, 2);
    submit_ok(pool, running);
    submit_ok(pool, queued);
    wait_running(pool, 1);
    size_t left = 0;
    for (pd_task *t = pd_pool_destroy(pool); t; left++) {
        pd_task *next = t->next;
        qj_settled(t);
        t = next;
    }
    assert_int_equal(left, 2);
    assert_int_equal(running->task.status, PD_CANCELLED);
    assert_true(running->path.metrics.expanded > 0);
    assert_true(running->path.metrics.expanded < (uint64_t)BIG_SIDE * BIG_SIDE);
    assert_null(running->path.path);
    assert_int_equal(queued->task.status, PD_CANCELLED);
    assert_int_equal(queued->path.metrics.expanded, 0);
    /* The running search completed (one more wake); the queued one never ran. */
    assert_int_equal(waker_wakes(&w), 2);
    pd_job_free(running);
    pd_job_free(queued);
    assert_int_equal(atomic_load(&f->big->refs), 1);
    waker_destroy(&w);
}

/* Runs one long job (A* across the big grid, or jump point search) on a
 * fresh 2-worker pool keeping `retained` bytes per worker; returns the
 * pool's statistics after it, checking the path. */
static pd_pool_stats run_long_and_stat(pool_fixture *f, size_t *retained, int jump_points)
{
    test_waker w;
    waker_init(&w, 0);
    pd_pool *pool = pd_pool_create(2, 8, &qj_thread_ops, retained, waker_wake, &w);
    assert_non_null(pool);
    pd_pool_stats st;
    pd_pool_get_stats(pool, &st);
    /* Nothing sized for any grid before the first task. */
    assert_true(st.context_bytes_max < 64 * 1024);

    pd_job *job = make_job(f->big, 1, 1, 0, 0, BIG_SIDE - 3, BIG_SIDE - 1);
    job->jump_points = jump_points;
    submit_ok(pool, job);
    pd_job *done[1];
    collect(pool, &w, done, 1);
    assert_int_equal(job->task.status, PD_OK);
    assert_cell_path(job);
    assert_float_equal(job->path.metrics.cost, octile(job->path_query.params.start, job->path_query.params.goal), 1e-9);
    pd_pool_get_stats(pool, &st);
    free_jobs(done, 1);
    pool_close(pool, &w);
    return st;
}

/* A worker's context grows with its search and, after the task and before
 * it completes, gives back whatever exceeds the retained size: with
 * everything kept the long search leaves megabytes behind, with 256 KiB
 * retained the statistics show at most that, for A* and for jump points. */
static void test_workers_trim_contexts(void **state)
{
    pool_fixture *f = *state;
    size_t retained = 256 * 1024;
    for (int jps = 0; jps <= 1; jps++) {
        pd_pool_stats kept = run_long_and_stat(f, NULL, jps);
        assert_true(kept.context_bytes_max > retained);
        assert_true(kept.context_bytes >= kept.context_bytes_max);
        pd_pool_stats trimmed = run_long_and_stat(f, &retained, jps);
        assert_true(trimmed.context_bytes_max <= retained);
        assert_true(trimmed.context_bytes <= 2 * retained);
        assert_true(trimmed.context_bytes_max > 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_completions_come_back_in_batches),
        cmocka_unit_test(test_hand_over_at_once_is_not_batched),
        cmocka_unit_test(test_many_jobs_four_workers),
        cmocka_unit_test(test_queue_full_overloaded),
        cmocka_unit_test(test_keys_order_the_queue),
        cmocka_unit_test(test_deadline_refused_when_queue_outlasts_it),
        cmocka_unit_test(test_cancel_queued),
        cmocka_unit_test(test_cancel_running),
        cmocka_unit_test(test_cancel_conn),
        cmocka_unit_test(test_deadline_already_passed),
        cmocka_unit_test(test_deadline_stops_long_search),
        cmocka_unit_test(test_pause_holds_work),
        cmocka_unit_test(test_destroy_with_queued_jobs),
        cmocka_unit_test(test_destroy_stops_running_search),
        cmocka_unit_test(test_workers_trim_contexts),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
