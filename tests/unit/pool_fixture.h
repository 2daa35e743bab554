/*
 * pool_fixture.h - what test_pool.c and test_query_pipeline.c share: the
 * hand-built scenes of the fixture (small, big with a walled-in corner,
 * corridor), FindPath jobs on them, a wake callback that can hold a worker
 * at a gate, collect(), which takes completed jobs off a pool with a hang
 * guard, and the checks of a cell path (octile, assert_cell_path). Static inline, like query_job.h, so each test binary takes
 * only what it uses.
 */
#ifndef POOL_FIXTURE_H
#define POOL_FIXTURE_H

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

#include "pd_pool.h"
#include "query_job.h"

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

static inline void waker_init(test_waker *w, int gate_closed)
{
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    w->wakes = 0;
    w->blocked = 0;
    w->last_wake_ns = 0;
    w->gate_closed = gate_closed;
}

static inline void waker_destroy(test_waker *w)
{
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
}

static inline void waker_wake(void *user)
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

static inline void waker_open_gate(test_waker *w)
{
    pthread_mutex_lock(&w->lock);
    w->gate_closed = 0;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

static inline unsigned waker_wakes(test_waker *w)
{
    pthread_mutex_lock(&w->lock);
    unsigned n = w->wakes;
    pthread_mutex_unlock(&w->lock);
    return n;
}

static inline struct timespec abs_time_after_ms(long ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (ms % 1000) * 1000000L;
    ts.tv_sec += ms / 1000 + ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    return ts;
}

/* Waits until `count` workers sit at the closed gate. */
static inline void waker_wait_blocked(test_waker *w, unsigned count)
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
static inline size_t collect(pd_pool *pool, test_waker *w, pd_job **out, size_t n)
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

static inline void free_jobs(pd_job **jobs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        pd_job_free(jobs[i]);
}

/* Polls the pool's statistics until `running` jobs are on a worker. */
static inline void wait_running(pd_pool *pool, uint64_t running)
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

static inline pd_scene *scene_open(int32_t w, int32_t h)
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

static inline int setup(void **state)
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

static inline int teardown(void **state)
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

static inline pd_job *make_job(pd_scene *scene, uint64_t conn, uint64_t req,
                        int32_t sx, int32_t sy, int32_t gx, int32_t gy)
{
    pd_job *job = qj_new();
    assert_non_null(job);
    pd_scene_retain(scene);
    job->scene = scene;
    job->task.owner = conn;
    job->task.tag = req;
    job->path_query.params.start = (pd_point){sx, sy};
    job->path_query.params.goal = (pd_point){gx, gy};
    job->path_query.params.connectivity = PD_CONNECT_8;
    job->path_query.style = PD_STYLE_CELLS;
    return job;
}

static inline pd_job *make_long_job(pool_fixture *f, uint64_t conn, uint64_t req)
{
    return make_job(f->big, conn, req, 0, 0, BIG_SIDE - 1, BIG_SIDE - 1);
}

/* Octile distance: the exact shortest cost on an open 8-connected grid. */
static inline double octile(pd_point a, pd_point b)
{
    double dx = fabs((double)a.x - b.x), dy = fabs((double)a.y - b.y);
    return fmax(dx, dy) + (SQRT2 - 1.0) * fmin(dx, dy);
}

/* The path starts and ends where asked, moves one cell at a time through
 * passable cells, and its step lengths add up to the reported cost. */
static inline void assert_cell_path(const pd_job *job)
{
    const pd_grid *g = job->scene->grid;
    assert_non_null(job->path.path);
    assert_true(job->path.path_len >= 1);
    assert_int_equal(job->path.path[0].x, job->path_query.params.start.x);
    assert_int_equal(job->path.path[0].y, job->path_query.params.start.y);
    assert_int_equal(job->path.path[job->path.path_len - 1].x, job->path_query.params.goal.x);
    assert_int_equal(job->path.path[job->path.path_len - 1].y, job->path_query.params.goal.y);
    double cost = 0;
    for (size_t i = 1; i < job->path.path_len; i++) {
        int dx = abs(job->path.path[i].x - job->path.path[i - 1].x);
        int dy = abs(job->path.path[i].y - job->path.path[i - 1].y);
        assert_true(dx <= 1 && dy <= 1 && dx + dy >= 1);
        assert_int_not_equal(pd_grid_get(g, job->path.path[i].x, job->path.path[i].y), PD_CELL_BLOCKED);
        cost += dx + dy == 2 ? SQRT2 : 1.0;
    }
    assert_float_equal(cost, job->path.metrics.cost, 1e-9);
}

/* A pool of `threads` query workers and `cap` queue slots whose wake is
 * w's (gate closed or open); NULL when creating it failed. */
static inline pd_pool *pool_open(test_waker *w, unsigned threads, size_t cap, int gate_closed)
{
    waker_init(w, gate_closed);
    return pd_pool_create(threads, cap, &qj_thread_ops, NULL, waker_wake, w);
}

/* Destroys what pool_open made, with the jobs the pool still held. */
static inline void pool_close(pd_pool *pool, test_waker *w)
{
    qj_pool_destroy(pool);
    waker_destroy(w);
}

static inline void submit_ok(pd_pool *pool, pd_job *job)
{
    assert_int_equal(qj_submit(pool, job), PD_OK);
}

#endif
