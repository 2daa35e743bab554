/*
 * pool_fixture.h - test_query_pipeline.c's fixture: the hand-built scenes
 * (small, big with a walled-in corner, corridor), FindPath jobs on them,
 * collect(), which takes completed jobs off a pool with a hang guard, and
 * the checks of a cell path (octile, assert_cell_path). The wake callback
 * and waits are pool_waker.h's. Static inline, like query_job.h, so each test binary takes
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
#include "pool_waker.h"
#include "query_job.h"

#define SMALL_SIDE 10
/* 2000x2000: an exhausting search takes 170-250 ms in an optimised build
 * (measured), several times the deadline and stop bound used here, while its
 * context stays around 70 MiB. */
#define BIG_SIDE 2000
/* A one-row corridor longer than the worker's starting path buffer. */
#define CORRIDOR_LEN 3000
static const double SQRT2 = 1.41421356237309504880;

static inline void *collect_settle(pd_task *task)
{
    return qj_settled(task);
}

/* Takes completed jobs until `n` have arrived, in completion order. */
static inline size_t collect(pd_pool *pool, test_waker *w, pd_job **out, size_t n)
{
    return collect_tasks(pool, w, (void **)out, n, collect_settle);
}

static inline void free_jobs(pd_job **jobs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        pd_job_free(jobs[i]);
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
