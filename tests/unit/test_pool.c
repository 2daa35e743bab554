/*
 * test_pool.c - the worker pool (an executor of opaque tasks) running query
 * tasks: results, queue limits, cancels, deadlines, ordered tasks,
 * preparation, statistics and teardown; and the query pipelines themselves.
 *
 * Scenes are built by hand (pd_scene is a public struct) so the tests need no
 * map files. To hold a worker still without sleeping, the wake callback can
 * be gated: a worker that has just finished a job blocks inside wake until
 * the test opens the gate, so jobs submitted meanwhile stay queued.
 *
 * Long searches run on a BIG_SIDE square open grid whose goal cell is
 * walled in: it is passable, so the search cannot refuse it up front, and it
 * is unreachable, so A* keeps expanding until something stops it.
 *
 * The issue-4 pipeline (unit grids, snapping, reachability, fallback goals,
 * avoid cells, windows, cut-off paths, smoothing, timing, cell updates) is
 * the query layer's (pd_query.h): those tests call it directly through
 * run_one, with no threads, on scenes loaded from tests/data/wire4_*.txt through pd_scene_load, so
 * they carry real unit grids and component labels.
 *
 * Route jobs run on the world of tests/data/route_world.json (four scenes
 * joined by portals; see test_world.c): each leg is checked cell by cell and
 * priced again by an independent A* between its ends.
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
#include "pd_path.h"
#include "pd_pool.h"
#include "query_job.h"
#include "pd_smooth.h"

#define SMALL_SIDE 10
/* 2000x2000: an exhausting search takes 170-250 ms in an optimised build
 * (measured), several times the deadline and stop bound used here, while its
 * context stays around 70 MiB. */
#define BIG_SIDE 2000
/* A one-row corridor longer than the worker's starting path buffer. */
#define CORRIDOR_LEN 3000
/* How long a test waits for results before failing: a guard against a
 * hang, not a measurement. Generous, because the TSan build runs the
 * searches many times slower: on the shared 2-core machine under parallel
 * ctest, test_jump_points_match_astar's exhaustive search of the big grid
 * outlasted 60 s there. */
#define COLLECT_TIMEOUT_NS (240ull * 1000000000ull)
#define MAX_COLLECT 1024

static const double SQRT2 = 1.41421356237309504880;

/* ---- wake callback with an optional gate ---- */

typedef struct test_waker {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    unsigned wakes;        /* times wake was called */
    unsigned blocked;      /* workers waiting at the closed gate right now */
    uint64_t last_wake_ns; /* pd_pool_now_ns() of the latest wake */
    int gate_closed;
} test_waker;

static void waker_init(test_waker *w, int gate_closed)
{
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    w->wakes = 0;
    w->blocked = 0;
    w->last_wake_ns = 0;
    w->gate_closed = gate_closed;
}

static void waker_destroy(test_waker *w)
{
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
}

static void waker_wake(void *user)
{
    test_waker *w = user;
    pthread_mutex_lock(&w->lock);
    w->wakes++;
    w->last_wake_ns = pd_pool_now_ns();
    pthread_cond_broadcast(&w->cond);
    while (w->gate_closed) {
        w->blocked++;
        pthread_cond_broadcast(&w->cond);
        pthread_cond_wait(&w->cond, &w->lock);
        w->blocked--;
    }
    pthread_mutex_unlock(&w->lock);
}

static void waker_open_gate(test_waker *w)
{
    pthread_mutex_lock(&w->lock);
    w->gate_closed = 0;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

static unsigned waker_wakes(test_waker *w)
{
    pthread_mutex_lock(&w->lock);
    unsigned n = w->wakes;
    pthread_mutex_unlock(&w->lock);
    return n;
}

static struct timespec abs_time_after_ms(long ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (ms % 1000) * 1000000L;
    ts.tv_sec += ms / 1000 + ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    return ts;
}

/* Waits until `count` workers sit at the closed gate. */
static void waker_wait_blocked(test_waker *w, unsigned count)
{
    uint64_t give_up = pd_pool_now_ns() + COLLECT_TIMEOUT_NS;
    pthread_mutex_lock(&w->lock);
    while (w->blocked < count) {
        assert_true(pd_pool_now_ns() < give_up);
        struct timespec ts = abs_time_after_ms(10);
        pthread_cond_timedwait(&w->cond, &w->lock, &ts);
    }
    pthread_mutex_unlock(&w->lock);
}

/* Takes completed jobs until `n` have arrived, in completion order. */
static size_t collect(pd_pool *pool, test_waker *w, pd_job **out, size_t n)
{
    size_t got = 0;
    uint64_t give_up = pd_pool_now_ns() + COLLECT_TIMEOUT_NS;
    while (got < n) {
        for (pd_task *task = pd_pool_take_completed(pool); task;) {
            pd_task *next = task->next;
            assert_true(got < n);
            out[got++] = qj_settled(task);
            task = next;
        }
        if (got >= n)
            break;
        assert_true(pd_pool_now_ns() < give_up);
        pthread_mutex_lock(&w->lock);
        struct timespec ts = abs_time_after_ms(5);
        pthread_cond_timedwait(&w->cond, &w->lock, &ts);
        pthread_mutex_unlock(&w->lock);
    }
    return got;
}

static void free_jobs(pd_job **jobs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        pd_job_free(jobs[i]);
}

/* Polls the pool's statistics until `running` jobs are on a worker. */
static void wait_running(pd_pool *pool, uint64_t running)
{
    uint64_t give_up = pd_pool_now_ns() + COLLECT_TIMEOUT_NS;
    pd_pool_stats st;
    for (;;) {
        pd_pool_get_stats(pool, &st);
        if (st.running >= running)
            return;
        assert_true(pd_pool_now_ns() < give_up);
        struct timespec pause = {0, 1000000L};
        nanosleep(&pause, NULL);
    }
}

/* ---- scenes ---- */

static pd_scene *scene_open(int32_t w, int32_t h)
{
    pd_scene *s = calloc(1, sizeof *s);
    assert_non_null(s);
    atomic_init(&s->refs, 1);
    strcpy(s->name, "test");
    s->grid = pd_grid_create(w, h);
    assert_non_null(s->grid);
    for (int32_t y = 0; y < h; y++)
        memset(&s->grid->cells[pd_grid_index(s->grid, 0, y)], PD_CELL_FREE, (size_t)w);
    pd_grid_refresh_flags(s->grid);
    s->cell_size = 1.0;
    s->unit_sizes[0] = 1;
    s->n_unit_sizes = 1;
    s->version = 1;
    return s;
}

typedef struct pool_fixture {
    pd_scene *small;   /* SMALL_SIDE square, open */
    pd_scene *big;     /* BIG_SIDE square, open, bottom-right cell walled in */
    pd_scene *corridor;/* CORRIDOR_LEN x 1, open */
} pool_fixture;

static int setup(void **state)
{
    pool_fixture *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    f->small = scene_open(SMALL_SIDE, SMALL_SIDE);
    f->big = scene_open(BIG_SIDE, BIG_SIDE);
    f->corridor = scene_open(CORRIDOR_LEN, 1);
    pd_grid_set(f->big->grid, BIG_SIDE - 2, BIG_SIDE - 1, PD_CELL_BLOCKED);
    pd_grid_set(f->big->grid, BIG_SIDE - 2, BIG_SIDE - 2, PD_CELL_BLOCKED);
    pd_grid_set(f->big->grid, BIG_SIDE - 1, BIG_SIDE - 2, PD_CELL_BLOCKED);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    pool_fixture *f = *state;
    /* Every job released its reference: only the fixture's own is left. */
    assert_int_equal(atomic_load(&f->small->refs), 1);
    assert_int_equal(atomic_load(&f->big->refs), 1);
    assert_int_equal(atomic_load(&f->corridor->refs), 1);
    pd_scene_release(f->small);
    pd_scene_release(f->big);
    pd_scene_release(f->corridor);
    free(f);
    return 0;
}

static pd_job *make_job(pd_scene *scene, uint64_t conn, uint64_t req,
                        int32_t sx, int32_t sy, int32_t gx, int32_t gy)
{
    pd_job *job = pd_job_new();
    assert_non_null(job);
    pd_scene_retain(scene);
    job->scene = scene;
    job->conn_id = conn;
    job->request_id = req;
    job->params.start = (pd_point){sx, sy};
    job->params.goal = (pd_point){gx, gy};
    job->params.connectivity = PD_CONNECT_8;
    job->style = PD_STYLE_CELLS;
    return job;
}

static pd_job *make_long_job(pool_fixture *f, uint64_t conn, uint64_t req)
{
    return make_job(f->big, conn, req, 0, 0, BIG_SIDE - 1, BIG_SIDE - 1);
}

static void submit_ok(pd_pool *pool, pd_job *job)
{
    assert_int_equal(qj_submit(pool, job), PD_OK);
}

/* Runs one short job on the big grid so the worker's thread is up and its
 * context has grown to that grid: a timed test then measures the search,
 * not a one-off allocation. */
static void warm_up(pd_pool *pool, test_waker *w, pool_fixture *f)
{
    submit_ok(pool, make_job(f->big, 0, 0, 0, 0, 5, 5));
    pd_job *warm[1];
    collect(pool, w, warm, 1);
    assert_int_equal(warm[0]->status, PD_OK);
    free_jobs(warm, 1);
}

/* Octile distance: the exact shortest cost on an open 8-connected grid. */
static double octile(pd_point a, pd_point b)
{
    double dx = fabs((double)a.x - b.x), dy = fabs((double)a.y - b.y);
    return fmax(dx, dy) + (SQRT2 - 1.0) * fmin(dx, dy);
}

/* The path starts and ends where asked, moves one cell at a time through
 * passable cells, and its step lengths add up to the reported cost. */
static void assert_cell_path(const pd_job *job)
{
    const pd_grid *g = job->scene->grid;
    assert_non_null(job->path);
    assert_true(job->path_len >= 1);
    assert_int_equal(job->path[0].x, job->params.start.x);
    assert_int_equal(job->path[0].y, job->params.start.y);
    assert_int_equal(job->path[job->path_len - 1].x, job->params.goal.x);
    assert_int_equal(job->path[job->path_len - 1].y, job->params.goal.y);
    double cost = 0;
    for (size_t i = 1; i < job->path_len; i++) {
        int dx = abs(job->path[i].x - job->path[i - 1].x);
        int dy = abs(job->path[i].y - job->path[i - 1].y);
        assert_true(dx <= 1 && dy <= 1 && dx + dy >= 1);
        assert_int_not_equal(pd_grid_get(g, job->path[i].x, job->path[i].y), PD_CELL_BLOCKED);
        cost += dx + dy == 2 ? SQRT2 : 1.0;
    }
    assert_float_equal(cost, job->metrics.cost, 1e-9);
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
    pd_job *no_run = pd_job_new();
    assert_non_null(no_run);
    no_run->task.run = NULL;
    assert_int_equal(pd_pool_submit(pool, &no_run->task), PD_INVALID_ARGUMENT);
    pd_job_free(no_run);
    /* A path query with no scene is the query layer's to refuse. */
    pd_job *no_scene = run_now(pd_job_new());
    assert_int_equal(no_scene->status, PD_INVALID_ARGUMENT);
    pd_job_free(no_scene);
    pd_job *job = make_job(f->small, 1, 1, 0, 0, 1, 1);
    assert_int_equal(pd_pool_submit(NULL, &job->task), PD_INVALID_ARGUMENT);
    pd_job_free(job);
    assert_int_equal(pd_pool_cancel(pool, 1, 1), 0);
    qj_pool_destroy(pool);
}

static void test_costs_on_open_grid(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    waker_init(&w, 0);
    pd_pool *pool = pd_pool_create(2, 16, &qj_thread_ops, NULL, waker_wake, &w);
    assert_non_null(pool);

    submit_ok(pool, make_job(f->small, 1, 1, 0, 0, 9, 9));
    submit_ok(pool, make_job(f->small, 1, 2, 0, 0, 9, 0));
    submit_ok(pool, make_job(f->small, 1, 3, 2, 7, 9, 3));
    submit_ok(pool, make_job(f->small, 1, 4, 5, 5, 5, 5));
    pd_job *four = make_job(f->small, 1, 5, 0, 0, 9, 9);
    four->params.connectivity = PD_CONNECT_4;
    submit_ok(pool, four);
    submit_ok(pool, make_job(f->small, 1, 6, 0, 0, SMALL_SIDE, 0));

    pd_job *done[6];
    collect(pool, &w, done, 6);
    for (size_t i = 0; i < 6; i++) {
        pd_job *job = done[i];
        if (job->request_id == 6) {
            assert_int_equal(job->status, PD_OUT_OF_BOUNDS);
            assert_null(job->path);
            continue;
        }
        assert_int_equal(job->status, PD_OK);
        assert_cell_path(job);
        if (job->request_id == 5) {
            assert_float_equal(job->metrics.cost, 18.0, 1e-9);
            assert_int_equal(job->path_len, 19);
        } else {
            assert_float_equal(job->metrics.cost, octile(job->params.start, job->params.goal), 1e-9);
        }
        if (job->request_id == 1) {
            assert_float_equal(job->metrics.cost, 9 * SQRT2, 1e-9);
            assert_int_equal(job->path_len, 10);
        }
        assert_true(job->task.finished_ns >= job->task.submitted_ns);
    }
    free_jobs(done, 6);
    assert_true(waker_wakes(&w) >= 1);
    qj_pool_destroy(pool);
    waker_destroy(&w);
}

/* Paths longer than the worker's starting buffer come back whole. */
static void test_long_path(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    waker_init(&w, 0);
    pd_pool *pool = pd_pool_create(1, 4, &qj_thread_ops, NULL, waker_wake, &w);
    assert_non_null(pool);

    submit_ok(pool, make_job(f->corridor, 1, 1, 0, 0, CORRIDOR_LEN - 1, 0));
    submit_ok(pool, make_job(f->corridor, 1, 2, CORRIDOR_LEN - 1, 0, 0, 0));
    pd_job *corners = make_job(f->corridor, 1, 3, 5, 0, CORRIDOR_LEN - 5, 0);
    corners->style = PD_STYLE_CORNERS;
    submit_ok(pool, corners);
    pd_job *done[3];
    collect(pool, &w, done, 3);
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(done[i]->status, PD_OK);
        assert_cell_path(done[i]);
        assert_int_equal(done[i]->path_len, CORRIDOR_LEN);
        assert_float_equal(done[i]->metrics.cost, CORRIDOR_LEN - 1, 1e-9);
    }
    /* Grown buffer, then compressed: a straight corridor is two points. */
    assert_int_equal(corners->status, PD_OK);
    assert_int_equal(corners->path_len, 2);
    assert_int_equal(corners->path[0].x, 5);
    assert_int_equal(corners->path[1].x, CORRIDOR_LEN - 5);
    free_jobs(done, 3);
    qj_pool_destroy(pool);
    waker_destroy(&w);
}

#define MANY_JOBS 600
#define MANY_SIDE 24

static void test_many_jobs_four_workers(void **state)
{
    (void)state;
    pd_scene *scene = scene_open(MANY_SIDE, MANY_SIDE);
    test_waker w;
    waker_init(&w, 0);
    pd_pool *pool = pd_pool_create(4, MANY_JOBS, &qj_thread_ops, NULL, waker_wake, &w);
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
        job->style = id % 2 ? PD_STYLE_CORNERS : PD_STYLE_CELLS;
        submit_ok(pool, job);
    }

    static pd_job *done[MANY_JOBS];
    static int seen[MANY_JOBS];
    memset(seen, 0, sizeof seen);
    collect(pool, &w, done, MANY_JOBS);
    uint64_t expanded = 0;
    for (size_t i = 0; i < MANY_JOBS; i++) {
        pd_job *job = done[i];
        assert_true(job->request_id < MANY_JOBS);
        assert_int_equal(seen[job->request_id], 0);
        seen[job->request_id] = 1;
        assert_int_equal(job->status, PD_OK);
        assert_int_equal(job->conn_id, job->request_id % 7);
        assert_float_equal(job->metrics.cost, octile(job->params.start, job->params.goal), 1e-9);
        if (job->style == PD_STYLE_CELLS)
            assert_cell_path(job);
        expanded += job->metrics.expanded;
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
    qj_pool_destroy(pool);
    waker_destroy(&w);
    assert_int_equal(atomic_load(&scene->refs), 1);
    pd_scene_release(scene);
}

static void test_queue_full_overloaded(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    waker_init(&w, 1);
    pd_pool *pool = pd_pool_create(1, 2, &qj_thread_ops, NULL, waker_wake, &w);
    assert_non_null(pool);

    submit_ok(pool, make_job(f->small, 1, 1, 0, 0, 3, 3));
    waker_wait_blocked(&w, 1);
    submit_ok(pool, make_job(f->small, 1, 2, 0, 0, 4, 4));
    submit_ok(pool, make_job(f->small, 1, 3, 0, 0, 5, 5));
    pd_job *extra = make_job(f->small, 1, 4, 0, 0, 6, 6);
    assert_int_equal(qj_submit(pool, extra), PD_OVERLOADED);
    /* The caller still owns the refused job. */
    assert_int_equal(extra->status, PD_OK);
    assert_null(extra->path);

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
        assert_int_equal(done[i]->request_id, i + 1);
        assert_int_equal(done[i]->status, PD_OK);
    }
    free_jobs(done, 3);

    /* With room again, the refused job goes through. */
    submit_ok(pool, extra);
    collect(pool, &w, done, 1);
    assert_ptr_equal(done[0], extra);
    assert_int_equal(extra->status, PD_OK);
    assert_float_equal(extra->metrics.cost, 6 * SQRT2, 1e-9);
    free_jobs(done, 1);
    qj_pool_destroy(pool);
    waker_destroy(&w);
}

/* Queued tasks run lowest key first (submission order among equal keys),
 * ordered tasks ahead of them and one at a time; the virtual time follows
 * the key of the task taken last. This is what the server's fair queueing
 * between connections rests on. */
static void test_keys_order_the_queue(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    waker_init(&w, 0);
    pd_pool *pool = pd_pool_create(1, 16, &qj_thread_ops, NULL, waker_wake, &w);
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
        assert_int_equal(done[i]->status, PD_OK);
        if (done[i]->task.tag != want[i])
            fail_msg("task %zu done was %llu, want %llu", i, (unsigned long long)done[i]->task.tag,
                     (unsigned long long)want[i]);
    }
    assert_int_equal(pd_pool_virtual_time(pool), 9);
    free_jobs(done, 6);
    qj_pool_destroy(pool);
    waker_destroy(&w);
}

/* A task whose deadline the queue ahead of it would outlast is refused at
 * submission (the caller keeps it), once the pool has a mean task time to
 * go by; one with room to spare, or with no deadline, is queued. */
static void test_deadline_refused_when_queue_outlasts_it(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    waker_init(&w, 0);
    pd_pool *pool = pd_pool_create(1, 64, &qj_thread_ops, NULL, waker_wake, &w);
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
    qj_pool_destroy(pool);
    waker_destroy(&w);
}

static void test_cancel_queued(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    waker_init(&w, 1);
    pd_pool *pool = pd_pool_create(1, 8, &qj_thread_ops, NULL, waker_wake, &w);
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
    assert_int_equal(done[0]->status, PD_OK);
    assert_int_equal(done[1]->request_id, 2);
    assert_int_equal(done[1]->conn_id, 1);
    assert_int_equal(done[1]->status, PD_CANCELLED);
    assert_int_equal(done[1]->metrics.expanded, 0);
    assert_null(done[1]->path);
    assert_int_equal(done[2]->status, PD_OK);
    assert_int_equal(done[3]->conn_id, 2);
    assert_int_equal(done[3]->status, PD_OK);
    assert_int_equal(done[4]->request_id, 2);
    assert_int_equal(done[4]->conn_id, 1);
    assert_int_equal(done[4]->status, PD_CANCELLED);
    free_jobs(done, 5);

    pd_pool_stats st;
    pd_pool_get_stats(pool, &st);
    assert_int_equal(st.tasks_done, 5);
    qj_pool_destroy(pool);
    waker_destroy(&w);
}

static void test_cancel_running(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    waker_init(&w, 0);
    pd_pool *pool = pd_pool_create(1, 4, &qj_thread_ops, NULL, waker_wake, &w);
    assert_non_null(pool);

    submit_ok(pool, make_long_job(f, 5, 1));
    wait_running(pool, 1);
    assert_int_equal(pd_pool_cancel(pool, 5, 1), 1);
    pd_job *done[1];
    collect(pool, &w, done, 1);
    assert_int_equal(done[0]->status, PD_CANCELLED);
    assert_null(done[0]->path);
    free_jobs(done, 1);
    qj_pool_destroy(pool);
    waker_destroy(&w);
}

/* cancel_conn reaches both the running job and the queued ones of that
 * connection, and leaves other connections alone. */
static void test_cancel_conn(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    waker_init(&w, 0);
    pd_pool *pool = pd_pool_create(1, 8, &qj_thread_ops, NULL, waker_wake, &w);
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
        if (done[i]->conn_id == 7) {
            assert_int_equal(done[i]->status, PD_CANCELLED);
            assert_null(done[i]->path);
        } else {
            assert_int_equal(done[i]->status, PD_OK);
            assert_float_equal(done[i]->metrics.cost, 9 * SQRT2, 1e-9);
        }
    }
    free_jobs(done, 4);
    qj_pool_destroy(pool);
    waker_destroy(&w);
}

static void test_deadline_already_passed(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    waker_init(&w, 0);
    pd_pool *pool = pd_pool_create(1, 4, &qj_thread_ops, NULL, waker_wake, &w);
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
    assert_int_equal(late->status, PD_DEADLINE_EXCEEDED);
    assert_int_equal(late->metrics.expanded, 0);
    assert_null(late->path);
    assert_int_equal(in_time->status, PD_OK);
    free_jobs(done, 2);
    qj_pool_destroy(pool);
    waker_destroy(&w);
}

/* A search that would exhaust four million cells (170-250 ms in an
 * optimised build) stops at its deadline, part way through. */
#define SHORT_DEADLINE_NS (20ull * 1000000ull)

static void test_deadline_stops_long_search(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    waker_init(&w, 0);
    pd_pool *pool = pd_pool_create(1, 4, &qj_thread_ops, NULL, waker_wake, &w);
    assert_non_null(pool);

    warm_up(pool, &w, f);
    pd_job *job = make_long_job(f, 1, 1);
    job->task.deadline_ns = pd_pool_now_ns() + SHORT_DEADLINE_NS;
    submit_ok(pool, job);
    pd_job *done[1];
    collect(pool, &w, done, 1);
    assert_int_equal(job->status, PD_DEADLINE_EXCEEDED);
    assert_true(job->metrics.expanded > 0);
    assert_true(job->metrics.expanded < (uint64_t)BIG_SIDE * BIG_SIDE);
    assert_true(job->task.finished_ns >= job->task.deadline_ns);
    assert_null(job->path);
    free_jobs(done, 1);
    qj_pool_destroy(pool);
    waker_destroy(&w);
}

static void test_corners_style(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    waker_init(&w, 0);
    pd_pool *pool = pd_pool_create(1, 8, &qj_thread_ops, NULL, waker_wake, &w);
    assert_non_null(pool);

    submit_ok(pool, make_job(f->small, 1, 1, 0, 0, 9, 4));
    pd_job *corners = make_job(f->small, 1, 2, 0, 0, 9, 4);
    corners->style = PD_STYLE_CORNERS;
    submit_ok(pool, corners);
    pd_job *straight = make_job(f->small, 1, 3, 0, 6, 9, 6);
    straight->style = PD_STYLE_CORNERS;
    submit_ok(pool, straight);

    pd_job *done[3];
    collect(pool, &w, done, 3);
    pd_job *cells = done[0];
    assert_int_equal(cells->status, PD_OK);
    assert_int_equal(corners->status, PD_OK);
    assert_int_equal(cells->path_len, 10);
    assert_float_equal(corners->metrics.cost, 4 * SQRT2 + 5, 1e-9);

    /* The corners are exactly the cell path compressed; the search is
     * deterministic, so both jobs found the same cells. A path that turns
     * from diagonal to straight has at least one corner between its ends. */
    pd_point expect[10];
    memcpy(expect, cells->path, sizeof expect);
    size_t n = pd_path_corners(expect, 10);
    assert_true(n >= 3 && n < 10);
    assert_int_equal(corners->path_len, n);
    assert_memory_equal(corners->path, expect, n * sizeof expect[0]);

    assert_int_equal(straight->status, PD_OK);
    assert_int_equal(straight->path_len, 2);
    assert_int_equal(straight->path[0].x, 0);
    assert_int_equal(straight->path[1].x, 9);
    assert_int_equal(straight->path[1].y, 6);
    free_jobs(done, 3);
    qj_pool_destroy(pool);
    waker_destroy(&w);
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
    waker_init(&w, 0);
    pd_pool *pool = pd_pool_create(2, 8, &qj_thread_ops, NULL, waker_wake, &w);
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
    assert_int_equal(done[0]->request_id, 3);
    assert_int_equal(done[0]->status, PD_CANCELLED);
    pd_pool_get_stats(pool, &st);
    assert_int_equal(st.queue_depth, 3);
    assert_int_equal(st.tasks_done, 1);
    free_jobs(done, 1);

    pd_pool_set_paused(pool, 0);
    collect(pool, &w, done, 3);
    size_t ok = 0;
    for (size_t i = 0; i < 3; i++) {
        assert_int_not_equal(done[i]->request_id, 3);
        ok += done[i]->status == PD_OK;
    }
    assert_int_equal(ok, 3);
    free_jobs(done, 3);
    qj_pool_destroy(pool);
    waker_destroy(&w);
}

static void test_destroy_with_queued_jobs(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    waker_init(&w, 1);
    pd_pool *pool = pd_pool_create(2, 16, &qj_thread_ops, NULL, waker_wake, &w);
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
    waker_init(&w, 0);
    pd_pool *pool = pd_pool_create(1, N, &qj_thread_ops, NULL, waker_wake, &w);
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
    waker_init(&w, 0);
    pd_pool *pool = pd_pool_create(1, 4, &qj_thread_ops, NULL, waker_wake, &w);
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
    waker_init(&w, 0);
    pd_pool *pool = pd_pool_create(1, 4, &qj_thread_ops, NULL, waker_wake, &w);
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
    assert_int_equal(running->status, PD_CANCELLED);
    assert_true(running->metrics.expanded > 0);
    assert_true(running->metrics.expanded < (uint64_t)BIG_SIDE * BIG_SIDE);
    assert_null(running->path);
    assert_int_equal(queued->status, PD_CANCELLED);
    assert_int_equal(queued->metrics.expanded, 0);
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
    assert_int_equal(job->status, PD_OK);
    assert_cell_path(job);
    assert_float_equal(job->metrics.cost, octile(job->params.start, job->params.goal), 1e-9);
    pd_pool_get_stats(pool, &st);
    free_jobs(done, 1);
    qj_pool_destroy(pool);
    waker_destroy(&w);
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

/* ---- issue 4: the request pipeline ---- */

/* Loads tests/data/<file> as an ASCII scene serving unit sizes 1 and 2. */
static pd_conf_scene wire4_entry(const char *name, const char *file, char *path, size_t pathlen)
{
    pd_conf_scene cs;
    memset(&cs, 0, sizeof cs);
    snprintf(cs.name, sizeof cs.name, "%s", name);
    snprintf(path, pathlen, "%s/%s", PD_TEST_DATA_DIR, file);
    cs.map_path = path;
    cs.format = PD_MAP_ASCII;
    cs.cell_size = 0.5;
    cs.unit_sizes[0] = 1;
    cs.unit_sizes[1] = 2;
    cs.n_unit_sizes = 2;
    return cs;
}

static pd_scene *wire4_load(const char *file)
{
    char path[512], err[256];
    pd_conf_scene cs = wire4_entry("wire4", file, path, sizeof path);
    pd_scene *s = pd_scene_load(&cs, err, sizeof err);
    if (!s)
        fail_msg("%s", err);
    return s;
}

/* Runs one job's query on this thread, straight through the query layer
 * (no pool, no threads), and returns it completed. */
static pd_job *run_one(pd_job *job)
{
    return run_now(job);
}

/* Runs the same jobs on two pools, A* only and with jump points, and
 * returns nothing: every answer must agree in status, cost and endpoints, and
 * the JPS pool must expand fewer nodes in total (it expands jump points). */
static void test_jump_points_match_astar(void **state)
{
    pool_fixture *f = *state;
    enum { N = 40 };
    test_waker wa, wj;
    waker_init(&wa, 0);
    waker_init(&wj, 0);
    pd_pool *astar = pd_pool_create(1, N, &qj_thread_ops, NULL, waker_wake, &wa);
    pd_pool *jps = pd_pool_create(1, N, &qj_thread_ops, NULL, waker_wake, &wj);
    assert_non_null(astar);
    assert_non_null(jps);
    /* Deterministic pairs on the big grid (uniform cost, 8-connected):
     * spread over the map, plus the walled-in goal (NO_PATH both ways). */
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (uint64_t id = 1; id <= N; id++) {
        int32_t c[4];
        for (int k = 0; k < 4; k++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            c[k] = (int32_t)(x % 400);
        }
        if (id == N) { c[2] = BIG_SIDE - 1; c[3] = BIG_SIDE - 1; }
        submit_ok(astar, make_job(f->big, 1, id, c[0], c[1], c[2], c[3]));
        pd_job *jj = make_job(f->big, 1, id, c[0], c[1], c[2], c[3]);
        jj->jump_points = 1;
        submit_ok(jps, jj);
    }
    pd_job *a[N], *j[N];
    collect(astar, &wa, a, N);
    collect(jps, &wj, j, N);
    uint64_t exp_a = 0, exp_j = 0;
    for (size_t i = 0; i < N; i++) {
        assert_int_equal(a[i]->request_id, j[i]->request_id);
        assert_int_equal(a[i]->status, j[i]->status);
        assert_float_equal(a[i]->metrics.cost, j[i]->metrics.cost, 1e-9);
        if (a[i]->status == PD_OK) {
            assert_int_equal(a[i]->path_len > 0, 1);
            assert_int_equal(j[i]->path[0].x, a[i]->path[0].x);
            assert_int_equal(j[i]->path[j[i]->path_len - 1].y, a[i]->path[a[i]->path_len - 1].y);
        }
        exp_a += a[i]->metrics.expanded;
        exp_j += j[i]->metrics.expanded;
    }
    assert_true(exp_j < exp_a);
    free_jobs(a, N);
    free_jobs(j, N);
    qj_pool_destroy(astar);
    qj_pool_destroy(jps);
    waker_destroy(&wa);
    waker_destroy(&wj);
}

/* A scene's search pick per unit size overrides the server's
 * jump_point_search both ways: "astar" answers with A* (its expansion
 * count) although the job asks for jump points, "jps" with JPS although it
 * does not; "default" follows the job. */
static void test_scene_pick_overrides_server(void **state)
{
    pool_fixture *f = *state;
    pd_job *runs[6];
    static const struct {
        pd_scene_pick pick;
        int jump_points;
    } cases[6] = {
        { PD_SCENE_PICK_DEFAULT, 0 }, { PD_SCENE_PICK_DEFAULT, 1 }, { PD_SCENE_PICK_ASTAR, 1 },
        { PD_SCENE_PICK_ASTAR, 0 },   { PD_SCENE_PICK_JPS, 0 },     { PD_SCENE_PICK_JPS, 1 },
    };
    for (size_t i = 0; i < 6; i++) {
        f->big->units[0] = (pd_scene_unit){ 1, f->big->grid, NULL, cases[i].pick };
        pd_job *job = make_job(f->big, 1, i + 1, 3, 5, 390, 311);
        job->jump_points = cases[i].jump_points;
        runs[i] = run_one(job);
        assert_int_equal(runs[i]->status, PD_OK);
        assert_float_equal(runs[i]->metrics.cost, runs[0]->metrics.cost, 1e-9);
    }
    f->big->units[0] = (pd_scene_unit){ 0 };
    const uint64_t astar = runs[0]->metrics.expanded, jps = runs[1]->metrics.expanded;
    assert_true(jps < astar);
    assert_true(runs[2]->metrics.expanded == astar);
    assert_true(runs[3]->metrics.expanded == astar);
    assert_true(runs[4]->metrics.expanded == jps);
    assert_true(runs[5]->metrics.expanded == jps);
    free_jobs(runs, 6);
}

static int path_contains(const pd_job *job, int32_t x, int32_t y)
{
    for (size_t i = 0; i < job->path_len; i++)
        if (job->path[i].x == x && job->path[i].y == y)
            return 1;
    return 0;
}

/* Every step moves to a neighbour that is passable on `grid`. */
static void assert_steps_on(const pd_grid *grid, const pd_job *job)
{
    for (size_t i = 0; i < job->path_len; i++) {
        assert_int_not_equal(pd_grid_get(grid, job->path[i].x, job->path[i].y), PD_CELL_BLOCKED);
        if (i > 0) {
            assert_true(abs(job->path[i].x - job->path[i - 1].x) <= 1);
            assert_true(abs(job->path[i].y - job->path[i - 1].y) <= 1);
        }
    }
}

/* Unit size 2 on wire4_units: its 2x2 footprint cannot pass the 1-wide gap
 * at x = 3, so it crosses row 2 at the wide gap (anchor x = 10); a unit of
 * size 1 on the same request takes the short way through x = 3. */
static void test_unit_size_two_avoids_narrow_gap(void **state)
{
    (void)state;
    pd_scene *s = wire4_load("wire4_units.txt");
    pd_job *small = make_job(s, 1, 1, 0, 0, 0, 4);
    small = run_one(small);
    assert_int_equal(small->status, PD_OK);
    assert_true(path_contains(small, 3, 2));

    pd_job *big = make_job(s, 1, 2, 0, 0, 0, 4);
    big->unit_size = 2;
    big = run_one(big);
    assert_int_equal(big->status, PD_OK);
    assert_steps_on(pd_scene_unit_for(s, 2)->grid, big);
    for (size_t i = 0; i < big->path_len; i++) {
        pd_point a = big->path[i];
        /* The whole footprint stays on open scene cells... */
        for (int dy = 0; dy < 2; dy++)
            for (int dx = 0; dx < 2; dx++)
                assert_int_not_equal(pd_grid_get(s->grid, a.x + dx, a.y + dy), PD_CELL_BLOCKED);
        /* ...so wherever it overlaps the wall row it is in the wide gap. */
        if (a.y == 1 || a.y == 2)
            assert_int_equal(a.x, 10);
    }
    assert_true(big->metrics.cost > small->metrics.cost);
    assert_int_equal(big->path[big->path_len - 1].x, 0);
    assert_int_equal(big->path[big->path_len - 1].y, 4);

    /* A unit size the scene does not serve is refused by the worker too. */
    pd_job *odd = make_job(s, 1, 3, 0, 0, 0, 4);
    odd->unit_size = 3;
    odd = run_one(odd);
    assert_int_equal(odd->status, PD_INVALID_ARGUMENT);
    pd_job_free(small);
    pd_job_free(big);
    pd_job_free(odd);
    pd_scene_release(s);
}

/* Blocked endpoints: refused without snap, substituted (PARTIAL) with it.
 * (10,2) is wall; its open neighbours (9,2) and (11,2) tie at distance 1,
 * and ties go to the smaller x. */
static void test_snap_blocked_endpoints(void **state)
{
    (void)state;
    pd_scene *s = wire4_load("wire4_rooms.txt");
    pd_job *job = run_one(make_job(s, 1, 1, 10, 2, 1, 2));
    assert_int_equal(job->status, PD_START_BLOCKED);
    assert_null(job->path);
    pd_job_free(job);

    job = make_job(s, 1, 2, 10, 2, 1, 2);
    job->snap = 1;
    job = run_one(job);
    assert_int_equal(job->status, PD_PARTIAL);
    assert_int_equal(job->start_substituted, 1);
    assert_int_equal(job->start_used.x, 9);
    assert_int_equal(job->start_used.y, 2);
    assert_int_equal(job->goal_substituted, 0);
    assert_int_equal(job->path[0].x, 9);
    assert_int_equal(job->path[0].y, 2);
    assert_int_equal(job->path[job->path_len - 1].x, 1);
    assert_float_equal(job->metrics.cost, 8.0, 1e-9);
    pd_job_free(job);

    job = run_one(make_job(s, 1, 3, 1, 4, 10, 0));
    assert_int_equal(job->status, PD_GOAL_BLOCKED);
    pd_job_free(job);

    job = make_job(s, 1, 4, 1, 4, 10, 0);
    job->snap = 1;
    job = run_one(job);
    assert_int_equal(job->status, PD_PARTIAL);
    assert_int_equal(job->start_substituted, 0);
    assert_int_equal(job->goal_substituted, 1);
    assert_int_equal(job->goal_used.x, 9);
    assert_int_equal(job->goal_used.y, 0);
    assert_int_equal(job->path[job->path_len - 1].x, 9);
    assert_int_equal(job->path[job->path_len - 1].y, 0);
    pd_job_free(job);

    /* A goal on the wall under NEAREST needs no snap: it is unreachable, so
     * the nearest reachable cell is used; EXACT still refuses it. */
    job = make_job(s, 1, 5, 1, 4, 10, 0);
    job->goal_mode = PD_GOAL_NEAREST;
    job = run_one(job);
    assert_int_equal(job->status, PD_PARTIAL);
    assert_int_equal(job->goal_substituted, 1);
    assert_int_equal(job->goal_used.x, 9);
    assert_int_equal(job->goal_used.y, 0);
    pd_job_free(job);
    pd_scene_release(s);
}

/* Start and goal in different rooms: EXACT answers NO_PATH from the labels
 * without expanding a node; NEAREST goes to the cell of the start's room
 * nearest the goal; LINE to the first such cell on the line back. */
static void test_unreachable_goal_modes(void **state)
{
    (void)state;
    pd_scene *s = wire4_load("wire4_rooms.txt");
    pd_job *exact = run_one(make_job(s, 1, 1, 1, 4, 14, 0));
    assert_int_equal(exact->status, PD_NO_PATH);
    assert_int_equal(exact->metrics.expanded, 0);
    assert_int_equal(exact->metrics.generated, 0);
    assert_null(exact->path);
    pd_job_free(exact);

    pd_job *nearest = make_job(s, 1, 2, 1, 4, 14, 0);
    nearest->goal_mode = PD_GOAL_NEAREST;
    nearest = run_one(nearest);
    assert_int_equal(nearest->status, PD_PARTIAL);
    assert_int_equal(nearest->goal_substituted, 1);
    assert_int_equal(nearest->goal_used.x, 9);
    assert_int_equal(nearest->goal_used.y, 0);
    assert_int_equal(nearest->path[nearest->path_len - 1].x, 9);
    assert_int_equal(nearest->path[nearest->path_len - 1].y, 0);
    assert_steps_on(s->grid, nearest);

    /* The line from (14,0) to (1,4) crosses x = 9.5 at y ~ 1.9, in row 1. */
    pd_job *line = make_job(s, 1, 3, 1, 4, 14, 0);
    line->goal_mode = PD_GOAL_LINE;
    line = run_one(line);
    assert_int_equal(line->status, PD_PARTIAL);
    assert_int_equal(line->goal_substituted, 1);
    assert_int_equal(line->goal_used.x, 9);
    assert_int_equal(line->goal_used.y, 1);
    assert_int_equal(line->path[line->path_len - 1].y, 1);
    assert_int_equal(line->start_substituted, 0);

    /* A reachable goal is never substituted, whatever the mode. */
    pd_job *same = make_job(s, 1, 4, 1, 4, 8, 0);
    same->goal_mode = PD_GOAL_NEAREST;
    same = run_one(same);
    assert_int_equal(same->status, PD_OK);
    assert_int_equal(same->goal_substituted, 0);
    pd_job_free(nearest);
    pd_job_free(line);
    pd_job_free(same);
    pd_scene_release(s);
}

/* Avoid cells act as walls for one request only: a column of them at x = 5
 * (rows 0..8) forces the path through (5,9); the same request without them
 * goes straight. */
static void test_avoid_cells(void **state)
{
    pool_fixture *f = *state;
    pd_job *plain = run_one(make_job(f->small, 1, 1, 0, 5, 9, 5));
    assert_int_equal(plain->status, PD_OK);
    assert_float_equal(plain->metrics.cost, 9.0, 1e-9);

    pd_job *job = make_job(f->small, 1, 2, 0, 5, 9, 5);
    job->n_avoid = 9;
    job->avoid = malloc(job->n_avoid * sizeof *job->avoid);
    assert_non_null(job->avoid);
    for (int32_t y = 0; y < 9; y++)
        job->avoid[y] = (pd_point){5, y};
    job = run_one(job);
    assert_int_equal(job->status, PD_OK);
    assert_true(path_contains(job, 5, 9));
    for (size_t i = 0; i < job->path_len; i++)
        assert_false(job->path[i].x == 5 && job->path[i].y < 9);
    assert_true(job->metrics.cost > plain->metrics.cost);
    assert_int_equal(job->goal_substituted, 0);

    /* An avoid cell on the goal is the goal being blocked. */
    pd_job *on_goal = make_job(f->small, 1, 3, 0, 5, 9, 5);
    on_goal->n_avoid = 1;
    on_goal->avoid = malloc(sizeof *on_goal->avoid);
    assert_non_null(on_goal->avoid);
    on_goal->avoid[0] = (pd_point){9, 5};
    on_goal = run_one(on_goal);
    assert_int_equal(on_goal->status, PD_GOAL_BLOCKED);
    pd_job_free(plain);
    pd_job_free(job);
    pd_job_free(on_goal);
}

/* A window keeps the search inside it: from (8,0) to (8,4) on wire4_units
 * the short way crosses the wall at x = 10; a window x 0..8 forces the
 * narrow gap at x = 3. A goal outside the window is NO_PATH, a start
 * outside it INVALID_ARGUMENT. */
static void test_search_window(void **state)
{
    (void)state;
    pd_scene *s = wire4_load("wire4_units.txt");
    pd_job *free_run = run_one(make_job(s, 1, 1, 8, 0, 8, 4));
    assert_int_equal(free_run->status, PD_OK);
    assert_false(path_contains(free_run, 3, 2));

    pd_job *job = make_job(s, 1, 2, 8, 0, 8, 4);
    job->params.has_window = 1;
    job->params.window_min = (pd_point){0, 0};
    job->params.window_max = (pd_point){8, 5};
    job = run_one(job);
    assert_int_equal(job->status, PD_OK);
    assert_true(path_contains(job, 3, 2));
    for (size_t i = 0; i < job->path_len; i++)
        assert_true(job->path[i].x <= 8);
    assert_true(job->metrics.cost > free_run->metrics.cost);

    pd_job *outside = make_job(s, 1, 3, 0, 0, 11, 4);
    outside->params.has_window = 1;
    outside->params.window_min = (pd_point){0, 0};
    outside->params.window_max = (pd_point){8, 5};
    outside = run_one(outside);
    assert_int_equal(outside->status, PD_NO_PATH);
    pd_job *start_out = make_job(s, 1, 4, 11, 4, 0, 0);
    start_out->params = outside->params;
    start_out->params.start = (pd_point){11, 4};
    start_out->params.goal = (pd_point){0, 0};
    start_out = run_one(start_out);
    assert_int_equal(start_out->status, PD_INVALID_ARGUMENT);
    pd_job_free(start_out);
    pd_job_free(free_run);
    pd_job_free(job);
    pd_job_free(outside);
    pd_scene_release(s);
}

/* A tiny budget on an unreachable goal: without partial_on_cutoff the job
 * fails with BUDGET_EXCEEDED; with it, the path to the best node comes back
 * as PARTIAL with cutoff BUDGET_EXCEEDED and goal_used at its end. */
static void test_partial_on_cutoff(void **state)
{
    pool_fixture *f = *state;
    pd_job *job = make_long_job(f, 1, 1);
    job->params.max_expansions = 50;
    job = run_one(job);
    assert_int_equal(job->status, PD_BUDGET_EXCEEDED);
    assert_null(job->path);
    pd_job_free(job);

    job = make_long_job(f, 1, 2);
    job->params.max_expansions = 50;
    job->params.partial_on_cutoff = 1;
    job = run_one(job);
    assert_int_equal(job->status, PD_PARTIAL);
    assert_int_equal(job->metrics.cutoff, PD_BUDGET_EXCEEDED);
    assert_true(job->metrics.expanded <= 50);
    assert_int_equal(job->goal_substituted, 1);
    assert_non_null(job->path);
    assert_true(job->path_len >= 2);
    assert_int_equal(job->path[0].x, 0);
    assert_int_equal(job->path[0].y, 0);
    pd_point end = job->path[job->path_len - 1];
    assert_int_equal(end.x, job->goal_used.x);
    assert_int_equal(end.y, job->goal_used.y);
    assert_true(end.x > 0 && end.y > 0); /* it moved toward the goal */
    assert_steps_on(f->big->grid, job);
    pd_job_free(job);
}

/* Smoothing: fewer waypoints than cells, the same ends, every segment in
 * line of sight on the unit grid, and never longer than the cell path;
 * for unit 2 too, on its own grid. */
static void test_smooth_style(void **state)
{
    (void)state;
    pd_scene *s = wire4_load("wire4_units.txt");
    for (uint32_t unit = 1; unit <= 2; unit++) {
        const pd_grid *ug = pd_scene_unit_for(s, unit)->grid;
        pd_job *cells = make_job(s, 1, 1, 0, 0, 0, 4);
        cells->unit_size = unit;
        cells = run_one(cells);
        pd_job *smooth = make_job(s, 1, 2, 0, 0, 0, 4);
        smooth->unit_size = unit;
        smooth->style = PD_STYLE_SMOOTH;
        smooth = run_one(smooth);
        assert_int_equal(cells->status, PD_OK);
        assert_int_equal(smooth->status, PD_OK);
        assert_true(smooth->path_len >= 2 && smooth->path_len < cells->path_len);
        assert_memory_equal(&smooth->path[0], &cells->path[0], sizeof smooth->path[0]);
        assert_memory_equal(&smooth->path[smooth->path_len - 1], &cells->path[cells->path_len - 1],
                            sizeof smooth->path[0]);
        for (size_t i = 1; i < smooth->path_len; i++)
            assert_true(pd_line_of_sight(ug, smooth->path[i - 1], smooth->path[i]));
        assert_true(pd_path_length(smooth->path, smooth->path_len) <=
                    pd_path_length(cells->path, cells->path_len) + 1e-9);
        pd_job_free(cells);
        pd_job_free(smooth);
    }

    /* With avoid cells, smoothing must not cut through them either: the
     * straight line from (0,3) to (11,5) crosses row 4 at x = 4..8, so with
     * (5,4) and (6,4) avoided the smoothed path has to bend. */
    pd_job *job = make_job(s, 1, 3, 0, 3, 11, 5);
    job->style = PD_STYLE_SMOOTH;
    job->n_avoid = 2;
    job->avoid = malloc(2 * sizeof *job->avoid);
    assert_non_null(job->avoid);
    job->avoid[0] = (pd_point){5, 4};
    job->avoid[1] = (pd_point){6, 4};
    job = run_one(job);
    assert_int_equal(job->status, PD_OK);
    pd_grid *g = pd_grid_clone(s->grid);
    assert_non_null(g);
    assert_true(pd_line_of_sight(g, (pd_point){0, 3}, (pd_point){11, 5}));
    for (size_t k = 0; k < job->n_avoid; k++)
        pd_grid_set(g, job->avoid[k].x, job->avoid[k].y, PD_CELL_BLOCKED);
    assert_false(pd_line_of_sight(g, (pd_point){0, 3}, (pd_point){11, 5}));
    assert_true(job->path_len >= 3);
    for (size_t i = 1; i < job->path_len; i++)
        assert_true(pd_line_of_sight(g, job->path[i - 1], job->path[i]));
    pd_grid_destroy(g);
    pd_job_free(job);
    pd_scene_release(s);
}

/* Times: speed in world units per second over the cell size gives cells per
 * second (wire4 scenes: cell size 0.5, so speed 2 is 4 cells/s); straight
 * steps take 1/4 s, and corners-style waypoints get the same arrival times
 * as the cells they keep. */
static void test_waypoint_times(void **state)
{
    (void)state;
    pd_scene *rooms = wire4_load("wire4_rooms.txt");
    pd_job *job = make_job(rooms, 1, 1, 0, 0, 3, 3);
    job->speed = 2.0;
    job->start_time = 100.0;
    job = run_one(job);
    assert_int_equal(job->status, PD_OK);
    assert_non_null(job->times);
    assert_int_equal(job->path_len, 4);
    for (size_t i = 0; i < job->path_len; i++)
        assert_float_equal(job->times[i], 100.0 + (double)i * SQRT2 / 4.0, 1e-9);
    pd_job_free(job);
    pd_scene_release(rooms);

    pd_scene *s = wire4_load("wire4_units.txt");

    job = make_job(s, 1, 2, 0, 0, 0, 4);
    job->speed = 2.0;
    job->start_time = 1.0;
    job->style = PD_STYLE_CORNERS;
    job = run_one(job);
    pd_job *cells = make_job(s, 1, 3, 0, 0, 0, 4);
    cells->speed = 2.0;
    cells->start_time = 1.0;
    cells = run_one(cells);
    assert_int_equal(job->status, PD_OK);
    assert_non_null(job->times);
    assert_float_equal(job->times[0], 1.0, 1e-12);
    size_t k = 0;
    for (size_t i = 0; i < job->path_len; i++) {
        while (cells->path[k].x != job->path[i].x || cells->path[k].y != job->path[i].y)
            k++;
        assert_float_equal(job->times[i], cells->times[k], 1e-9);
    }
    /* The arrival time at the goal is the path cost over the speed. */
    assert_float_equal(cells->times[cells->path_len - 1], 1.0 + cells->metrics.cost / 4.0, 1e-9);

    /* No speed, no times. */
    pd_job *untimed = run_one(make_job(s, 1, 4, 0, 0, 3, 3));
    assert_null(untimed->times);
    pd_job_free(job);
    pd_job_free(cells);
    pd_job_free(untimed);
    pd_scene_release(s);
}

/* Arrival times that overflow to infinity (found by fuzz_find_path): a
 * positive but subnormal speed, or a start time near DBL_MAX, has no answer
 * in seconds, so the run refuses it instead of sending inf. */
static void test_waypoint_times_that_overflow(void **state)
{
    (void)state;
    pd_scene *rooms = wire4_load("wire4_rooms.txt");
    pd_job *slow = make_job(rooms, 1, 1, 0, 0, 3, 3);
    slow->speed = 5.9e-309;
    slow = run_one(slow);
    assert_int_equal(slow->status, PD_INVALID_ARGUMENT);
    assert_null(slow->path);
    assert_null(slow->times);
    /* DBL_MAX plus a 7e294 s step is infinity; plus 0.35 s it stays DBL_MAX. */
    pd_job *late = make_job(rooms, 1, 2, 0, 0, 3, 3);
    late->speed = 1e-295;
    late->start_time = 1.7976931348623157e308;
    late = run_one(late);
    assert_int_equal(late->status, PD_INVALID_ARGUMENT);
    pd_job *still = make_job(rooms, 1, 3, 0, 0, 3, 3);
    still->speed = 2.0;
    still->start_time = 1.7976931348623157e308;
    still = run_one(still);
    assert_int_equal(still->status, PD_OK);
    assert_true(still->times[still->path_len - 1] == still->start_time);
    pd_job_free(slow);
    pd_job_free(late);
    pd_job_free(still);
    pd_scene_release(rooms);
}

/* UpdateCells jobs: applied through the registry on a worker, in order.
 * Blocking the narrow gap gives version 2; a later search detours; while
 * the pool is paused, a block and an unblock of the same cell queue up and
 * are applied in submission order by four workers. */
static void test_update_cells_jobs(void **state)
{
    (void)state;
    char path[512], err[256];
    pd_conf conf;
    memset(&conf, 0, sizeof conf);
    pd_conf_scene cs = wire4_entry("units", "wire4_units.txt", path, sizeof path);
    conf.scenes = &cs;
    conf.n_scenes = 1;
    pd_registry *reg = pd_registry_create();
    assert_non_null(reg);
    assert_int_equal(pd_registry_load(reg, &conf, err, sizeof err), 0);

    test_waker w;
    waker_init(&w, 0);
    pd_pool *pool = pd_pool_create(4, 16, &qj_thread_ops, NULL, waker_wake, &w);
    assert_non_null(pool);

    pd_job *bad = pd_job_new();
    bad->kind = PD_JOB_UPDATE_CELLS;
    assert_int_equal(run_now(bad)->status, PD_INVALID_ARGUMENT); /* no registry */
    pd_job_free(bad);

    pd_job *up = pd_job_new();
    assert_non_null(up);
    up->kind = PD_JOB_UPDATE_CELLS;
    up->registry = reg;
    strcpy(up->update_scene, "units");
    up->update.op = PD_UPDATE_BLOCK;
    up->update.is_rect = 1;
    up->update.rect_min = up->update.rect_max = (pd_point){3, 2};
    submit_ok(pool, up);
    pd_job *done[8];
    collect(pool, &w, done, 1);
    assert_int_equal(done[0]->status, PD_OK);
    assert_int_equal(done[0]->update_result.version, 2);
    assert_int_equal(done[0]->update_result.cells_changed, 1);
    free_jobs(done, 1);

    pd_scene *s = pd_registry_acquire(reg, "units");
    assert_non_null(s);
    assert_int_equal(s->version, 2);
    submit_ok(pool, make_job(s, 1, 2, 0, 0, 0, 4));
    collect(pool, &w, done, 1);
    assert_int_equal(done[0]->status, PD_OK);
    assert_false(path_contains(done[0], 3, 2));
    assert_true(path_contains(done[0], 10, 2) || path_contains(done[0], 11, 2));
    free_jobs(done, 1);
    pd_scene_release(s);

    /* An unknown scene and a cell list outside the grid fail cleanly. */
    pd_job *unknown = pd_job_new();
    unknown->kind = PD_JOB_UPDATE_CELLS;
    unknown->registry = reg;
    strcpy(unknown->update_scene, "nowhere");
    unknown->update.is_rect = 1;
    submit_ok(pool, unknown);
    pd_job *outside = pd_job_new();
    outside->kind = PD_JOB_UPDATE_CELLS;
    outside->registry = reg;
    strcpy(outside->update_scene, "units");
    outside->update_cells = malloc(sizeof *outside->update_cells);
    assert_non_null(outside->update_cells);
    outside->update_cells[0] = (pd_point){12, 0};
    outside->update.n_cells = 1;
    submit_ok(pool, outside);
    collect(pool, &w, done, 2);
    assert_int_equal(unknown->status, PD_UNKNOWN_SCENE);
    assert_int_equal(outside->status, PD_OUT_OF_BOUNDS);
    free_jobs(done, 2);

    /* Ordered: pass/block (3,2) alternately six times, ending blocked. */
    pd_pool_set_paused(pool, 1);
    for (int i = 0; i < 6; i++) {
        pd_job *u = pd_job_new();
        assert_non_null(u);
        u->kind = PD_JOB_UPDATE_CELLS;
        u->registry = reg;
        u->request_id = (uint64_t)i;
        strcpy(u->update_scene, "units");
        u->update.op = i % 2 == 0 ? PD_UPDATE_PASS : PD_UPDATE_BLOCK;
        u->update.is_rect = 1;
        u->update.rect_min = u->update.rect_max = (pd_point){3, 2};
        submit_ok(pool, u);
    }
    pd_pool_set_paused(pool, 0);
    collect(pool, &w, done, 6);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(done[i]->status, PD_OK);
        /* Completion order is submission order, and each made a version. */
        assert_int_equal(done[i]->request_id, (uint64_t)i);
        assert_int_equal(done[i]->update_result.version, 3 + (uint64_t)i);
        assert_int_equal(done[i]->update_result.cells_changed, 1);
    }
    free_jobs(done, 6);
    s = pd_registry_acquire(reg, "units");
    assert_int_equal(s->version, 8);
    assert_int_equal(pd_grid_get(s->grid, 3, 2), PD_CELL_BLOCKED);
    pd_scene_release(s);

    /* Blocking it again changes nothing and keeps the version. */
    pd_job *noop = pd_job_new();
    assert_non_null(noop);
    noop->kind = PD_JOB_UPDATE_CELLS;
    noop->registry = reg;
    strcpy(noop->update_scene, "units");
    noop->update.op = PD_UPDATE_BLOCK;
    noop->update.is_rect = 1;
    noop->update.rect_min = noop->update.rect_max = (pd_point){3, 2};
    submit_ok(pool, noop);
    collect(pool, &w, done, 1);
    assert_int_equal(done[0]->status, PD_OK);
    assert_int_equal(done[0]->update_result.cells_changed, 0);
    assert_int_equal(done[0]->update_result.version, 8);
    free_jobs(done, 1);

    qj_pool_destroy(pool);
    waker_destroy(&w);
    pd_registry_destroy(reg);
}

/* ---- routes ---- */

#define ROUTE_WORLD_JSON PD_TEST_DATA_DIR "/route_world.json"

/* The route test world: its scenes in a registry, its portals parsed, and a
 * world store built over them. */
typedef struct route_fixture {
    pd_registry *reg;
    pd_conf_world cw;
    pd_world_store *store;
} route_fixture;

static void route_fixture_init(route_fixture *rf)
{
    static const char *const names[] = {"plaza", "hall", "tunnel", "vault"};
    pd_conf conf = pd_conf_defaults;
    char err[256];
    conf.scenes = calloc(4, sizeof *conf.scenes);
    assert_non_null(conf.scenes);
    conf.n_scenes = 4;
    for (size_t i = 0; i < 4; i++) {
        pd_conf_scene *cs = &conf.scenes[i];
        char path[512];
        snprintf(cs->name, sizeof cs->name, "%s", names[i]);
        snprintf(path, sizeof path, "%s/route_%s.txt", PD_TEST_DATA_DIR, names[i]);
        cs->map_path = strdup(path);
        assert_non_null(cs->map_path);
        cs->format = PD_MAP_ASCII;
        cs->cell_size = i == 3 ? 0.5 : 1.0; /* the vault's cells are smaller: timing crosses scales */
        cs->unit_sizes[0] = 1;
        cs->unit_sizes[1] = 2;
        cs->n_unit_sizes = 2;
    }
    rf->reg = pd_registry_create();
    assert_non_null(rf->reg);
    if (pd_registry_load(rf->reg, &conf, err, sizeof err) != 0)
        fail_msg("%s", err);
    pd_conf_free(&conf);

    FILE *f = fopen(ROUTE_WORLD_JSON, "rb");
    assert_non_null(f);
    char json[8192];
    size_t len = fread(json, 1, sizeof json, f);
    fclose(f);
    assert_true(len > 0 && len < sizeof json);
    if (pd_conf_world_parse_buffer(json, len, ROUTE_WORLD_JSON, names, 4, &rf->cw, err, sizeof err) != 0)
        fail_msg("%s", err);
    rf->store = pd_world_store_create();
    assert_non_null(rf->store);
    if (pd_world_store_rebuild(rf->store, &rf->cw, rf->reg, err, sizeof err) != 0)
        fail_msg("%s", err);
}

static void route_fixture_free(route_fixture *rf)
{
    pd_world_store_destroy(rf->store);
    pd_conf_world_free(&rf->cw);
    pd_registry_destroy(rf->reg);
}

static pd_job *make_route_job(route_fixture *rf, uint64_t req, const char *from, pd_point start, const char *to,
                              pd_point goal, uint32_t unit)
{
    pd_job *job = pd_job_new();
    assert_non_null(job);
    job->kind = PD_JOB_FIND_ROUTE;
    job->request_id = req;
    job->world = pd_world_store_acquire(rf->store);
    assert_non_null(job->world);
    snprintf(job->route_from, sizeof job->route_from, "%s", from);
    snprintf(job->route_to, sizeof job->route_to, "%s", to);
    job->params.start = start;
    job->params.goal = goal;
    job->unit_size = unit;
    return job;
}

/* Independent A* cost between two cells of a scene's unit grid. */
static double route_walk_cost(const pd_scene *scene, uint32_t unit, pd_point a, pd_point b)
{
    pd_search_ctx *ctx = pd_search_ctx_create();
    assert_non_null(ctx);
    const pd_scene_unit *su = pd_scene_unit_for(scene, unit);
    assert_non_null(su);
    pd_search_params p = {.start = a, .goal = b, .connectivity = PD_CONNECT_8};
    pd_search_metrics m;
    pd_status st = pd_search_astar(ctx, su->grid, &p, NULL, 0, &m);
    pd_search_ctx_destroy(ctx);
    return st == PD_OK ? m.cost : INFINITY;
}

/* A finished route: legs chain through their portals from start to end,
 * every leg is a cell path on its scene's unit grid whose cost an
 * independent A* confirms, and the total adds legs and portals. */
static void assert_route(const pd_job *job, const char *from, pd_point start, const char *to, pd_point end,
                         uint32_t unit)
{
    assert_true(job->n_legs >= 1);
    assert_null(job->world);   /* released by the worker */
    double total = 0;
    for (size_t i = 0; i < job->n_legs; i++) {
        const pd_route_leg *leg = &job->legs[i];
        const pd_grid *g = pd_scene_unit_for(leg->scene, unit)->grid;
        assert_true(leg->path_len >= 1);
        if (i == 0) {
            assert_string_equal(leg->scene->name, from);
            assert_int_equal(leg->path[0].x, start.x);
            assert_int_equal(leg->path[0].y, start.y);
        } else {
            const pd_route_leg *prev = &job->legs[i - 1];
            assert_string_equal(prev->next_scene, leg->scene->name);
            assert_int_equal(leg->path[0].x, prev->portal_entry.x);
            assert_int_equal(leg->path[0].y, prev->portal_entry.y);
        }
        pd_point last = leg->path[leg->path_len - 1];
        if (i + 1 == job->n_legs) {
            assert_false(leg->has_portal);
            assert_string_equal(leg->scene->name, to);
            assert_int_equal(last.x, end.x);
            assert_int_equal(last.y, end.y);
        } else {
            assert_true(leg->has_portal);
            assert_int_equal(last.x, leg->portal_exit.x);
            assert_int_equal(last.y, leg->portal_exit.y);
        }
        for (size_t k = 1; k < leg->path_len; k++) {
            int dx = abs(leg->path[k].x - leg->path[k - 1].x), dy = abs(leg->path[k].y - leg->path[k - 1].y);
            assert_true(dx <= 1 && dy <= 1 && dx + dy >= 1);
            assert_int_not_equal(pd_grid_get(g, leg->path[k].x, leg->path[k].y), PD_CELL_BLOCKED);
        }
        assert_float_equal(leg->cost, route_walk_cost(leg->scene, unit, leg->path[0], last), 1e-9);
        total += leg->cost + (leg->has_portal ? leg->portal_cost : 0);
    }
    assert_float_equal(job->metrics.cost, total, 1e-9);
}

static void test_route_jobs(void **state)
{
    (void)state;
    route_fixture rf;
    route_fixture_init(&rf);
    test_waker w;
    waker_init(&w, 0);
    pd_pool *pool = pd_pool_create(2, 16, &qj_thread_ops, NULL, waker_wake, &w);
    assert_non_null(pool);

    /* A route job needs a world. */
    pd_job *bad = pd_job_new();
    assert_non_null(bad);
    bad->kind = PD_JOB_FIND_ROUTE;
    assert_int_equal(run_now(bad)->status, PD_INVALID_ARGUMENT);
    pd_job_free(bad);

    /* Unit 1 goes through the hall; unit 2 may not take plaza-hall
     * (max_unit 1), so it goes another way and pays more. */
    pd_point start = {2, 2}, goal = {5, 2};
    submit_ok(pool, make_route_job(&rf, 1, "plaza", start, "vault", goal, 1));
    submit_ok(pool, make_route_job(&rf, 2, "plaza", start, "vault", goal, 2));
    /* Unknown scenes and blocked goals come back as the planner says. */
    submit_ok(pool, make_route_job(&rf, 3, "plaza", start, "attic", goal, 1));
    submit_ok(pool, make_route_job(&rf, 4, "plaza", start, "vault", (pd_point){0, 3}, 1));
    pd_job *done[4];
    collect(pool, &w, done, 4);
    pd_job *by_id[5] = {0};
    for (int i = 0; i < 4; i++)
        by_id[done[i]->request_id] = done[i];

    assert_int_equal(by_id[1]->status, PD_OK);
    assert_route(by_id[1], "plaza", start, "vault", goal, 1);
    assert_int_equal(by_id[1]->n_legs, 3);
    assert_string_equal(by_id[1]->legs[0].portal, "plaza-hall");
    assert_string_equal(by_id[1]->legs[1].portal, "hall-vault");
    assert_true(by_id[1]->metrics.expanded > 0);
    assert_null(by_id[1]->legs[0].times);

    assert_int_equal(by_id[2]->status, PD_OK);
    assert_route(by_id[2], "plaza", start, "vault", goal, 2);
    for (size_t i = 0; i < by_id[2]->n_legs; i++)
        if (by_id[2]->legs[i].has_portal)
            assert_string_not_equal(by_id[2]->legs[i].portal, "plaza-hall");
    assert_true(by_id[2]->metrics.cost > by_id[1]->metrics.cost);

    assert_int_equal(by_id[3]->status, PD_UNKNOWN_SCENE);
    assert_null(by_id[3]->legs);
    assert_int_equal(by_id[4]->status, PD_GOAL_BLOCKED);
    assert_null(by_id[4]->legs);
    free_jobs(done, 4);

    /* Corners and times: times run on across each portal, which takes
     * portal_cost * cell_size / speed seconds of the departing scene. */
    pd_job *timed = make_route_job(&rf, 5, "plaza", start, "vault", goal, 1);
    timed->style = PD_STYLE_CORNERS;
    timed->speed = 2.0;
    timed->start_time = 5.0;
    submit_ok(pool, timed);
    collect(pool, &w, done, 1);
    assert_int_equal(done[0]->status, PD_OK);
    double t = 5.0;
    for (size_t i = 0; i < done[0]->n_legs; i++) {
        const pd_route_leg *leg = &done[0]->legs[i];
        double speed_cells = 2.0 / leg->scene->cell_size;
        assert_non_null(leg->times);
        assert_float_equal(leg->times[0], t, 1e-9);
        double expect[64];
        assert_true(leg->path_len <= 64);
        pd_path_times(pd_scene_unit_for(leg->scene, 1)->grid, leg->path, leg->path_len, speed_cells, t, expect);
        for (size_t k = 0; k < leg->path_len; k++)
            assert_float_equal(leg->times[k], expect[k], 1e-9);
        t = leg->times[leg->path_len - 1] + (leg->has_portal ? leg->portal_cost / speed_cells : 0);
        /* Corners: no three consecutive waypoints on one straight line. */
        for (size_t k = 2; k < leg->path_len; k++) {
            int dx1 = leg->path[k - 1].x - leg->path[k - 2].x, dy1 = leg->path[k - 1].y - leg->path[k - 2].y;
            int dx2 = leg->path[k].x - leg->path[k - 1].x, dy2 = leg->path[k].y - leg->path[k - 1].y;
            assert_true((long)dx1 * dy2 != (long)dy1 * dx2 || (long)dx1 * dx2 + (long)dy1 * dy2 < 0);
        }
    }
    free_jobs(done, 1);

    /* NEAREST: a goal in the vault's wall becomes the nearest cell the route
     * can reach (PARTIAL, goal_used), and the route ends there. */
    pd_job *nearest = make_route_job(&rf, 6, "plaza", start, "vault", (pd_point){0, 3}, 1);
    nearest->goal_mode = PD_GOAL_NEAREST;
    submit_ok(pool, nearest);
    collect(pool, &w, done, 1);
    assert_int_equal(done[0]->status, PD_PARTIAL);
    assert_true(done[0]->goal_substituted);
    assert_int_equal(done[0]->goal_used.x, 1);
    assert_int_equal(done[0]->goal_used.y, 3);
    assert_route(done[0], "plaza", start, "vault", done[0]->goal_used, 1);
    free_jobs(done, 1);

    /* An update through the pool refreshes the world's tables: with the
     * plaza end of plaza-hall blocked, unit 1 no longer goes through the
     * hall; opening it again brings the hall back. */
    for (int round = 0; round < 2; round++) {
        pd_job *u = pd_job_new();
        assert_non_null(u);
        u->kind = PD_JOB_UPDATE_CELLS;
        u->registry = rf.reg;
        u->world_store = rf.store;
        strcpy(u->update_scene, "plaza");
        u->update.op = round == 0 ? PD_UPDATE_BLOCK : PD_UPDATE_PASS;
        u->update.is_rect = 1;
        u->update.rect_min = u->update.rect_max = (pd_point){9, 1};
        submit_ok(pool, u);
        collect(pool, &w, done, 1);
        assert_int_equal(done[0]->status, PD_OK);
        assert_int_equal(done[0]->world_refresh, PD_OK);
        free_jobs(done, 1);

        submit_ok(pool, make_route_job(&rf, 7, "plaza", start, "vault", goal, 1));
        collect(pool, &w, done, 1);
        assert_int_equal(done[0]->status, PD_OK);
        assert_route(done[0], "plaza", start, "vault", goal, 1);
        int via_hall = 0;
        for (size_t i = 0; i < done[0]->n_legs; i++)
            via_hall |= done[0]->legs[i].has_portal && !strcmp(done[0]->legs[i].portal, "plaza-hall");
        assert_int_equal(via_hall, round == 1);
        free_jobs(done, 1);
    }

    qj_pool_destroy(pool);
    waker_destroy(&w);
    route_fixture_free(&rf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_costs_on_open_grid),
        cmocka_unit_test(test_completions_come_back_in_batches),
        cmocka_unit_test(test_hand_over_at_once_is_not_batched),
        cmocka_unit_test(test_long_path),
        cmocka_unit_test(test_many_jobs_four_workers),
        cmocka_unit_test(test_queue_full_overloaded),
        cmocka_unit_test(test_keys_order_the_queue),
        cmocka_unit_test(test_deadline_refused_when_queue_outlasts_it),
        cmocka_unit_test(test_cancel_queued),
        cmocka_unit_test(test_cancel_running),
        cmocka_unit_test(test_cancel_conn),
        cmocka_unit_test(test_deadline_already_passed),
        cmocka_unit_test(test_deadline_stops_long_search),
        cmocka_unit_test(test_corners_style),
        cmocka_unit_test(test_pause_holds_work),
        cmocka_unit_test(test_jump_points_match_astar),
        cmocka_unit_test(test_scene_pick_overrides_server),
        cmocka_unit_test(test_destroy_with_queued_jobs),
        cmocka_unit_test(test_destroy_stops_running_search),
        cmocka_unit_test(test_workers_trim_contexts),
        cmocka_unit_test(test_unit_size_two_avoids_narrow_gap),
        cmocka_unit_test(test_snap_blocked_endpoints),
        cmocka_unit_test(test_unreachable_goal_modes),
        cmocka_unit_test(test_avoid_cells),
        cmocka_unit_test(test_search_window),
        cmocka_unit_test(test_partial_on_cutoff),
        cmocka_unit_test(test_smooth_style),
        cmocka_unit_test(test_waypoint_times),
        cmocka_unit_test(test_waypoint_times_that_overflow),
        cmocka_unit_test(test_update_cells_jobs),
        cmocka_unit_test(test_route_jobs),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
