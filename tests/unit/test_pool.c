/*
 * test_pool.c - the worker pool: results, queue limits, cancels, deadlines,
 * waypoint styles, statistics and teardown.
 *
 * Scenes are built by hand (pd_scene is a public struct) so the tests need no
 * map files. To hold a worker still without sleeping, the wake callback can
 * be gated: a worker that has just finished a job blocks inside wake until
 * the test opens the gate, so jobs submitted meanwhile stay queued.
 *
 * Long searches run on a 1000x1000 open grid whose goal cell is walled in: it
 * is passable, so the search cannot refuse it up front, and it is
 * unreachable, so A* keeps expanding until something stops it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pd_path.h"
#include "pd_pool.h"

#define SMALL_SIDE 10
/* 1000x1000: an exhausting search takes a few hundred milliseconds even in
 * an optimised build (far beyond the deadlines used here) while its context
 * stays around 40 MiB. */
#define BIG_SIDE 1000
/* A one-row corridor longer than the worker's starting path buffer. */
#define CORRIDOR_LEN 3000
/* How long a test waits for results before failing: generous, because the
 * TSan build runs the searches many times slower. */
#define COLLECT_TIMEOUT_NS (60ull * 1000000000ull)
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
        for (pd_job *job = pd_pool_take_completed(pool); job;) {
            pd_job *next = job->next;
            assert_true(got < n);
            out[got++] = job;
            job = next;
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
    assert_int_equal(pd_pool_submit(pool, job), PD_OK);
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
    assert_null(pd_pool_create(0, 4, NULL, NULL));
    assert_null(pd_pool_create(1, 0, NULL, NULL));

    pd_pool *pool = pd_pool_create(1, 4, NULL, NULL);
    assert_non_null(pool);
    assert_int_equal(pd_pool_submit(pool, NULL), PD_INVALID_ARGUMENT);
    pd_job *no_scene = pd_job_new();
    assert_non_null(no_scene);
    assert_int_equal(pd_pool_submit(pool, no_scene), PD_INVALID_ARGUMENT);
    pd_job_free(no_scene);
    pd_job *job = make_job(f->small, 1, 1, 0, 0, 1, 1);
    assert_int_equal(pd_pool_submit(NULL, job), PD_INVALID_ARGUMENT);
    pd_job_free(job);
    assert_int_equal(pd_pool_cancel(pool, 1, 1), 0);
    pd_pool_destroy(pool);
}

static void test_costs_on_open_grid(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    waker_init(&w, 0);
    pd_pool *pool = pd_pool_create(2, 16, waker_wake, &w);
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
        assert_true(job->finished_ns >= job->submitted_ns);
    }
    free_jobs(done, 6);
    assert_true(waker_wakes(&w) >= 1);
    pd_pool_destroy(pool);
    waker_destroy(&w);
}

/* Paths longer than the worker's starting buffer come back whole. */
static void test_long_path(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    waker_init(&w, 0);
    pd_pool *pool = pd_pool_create(1, 4, waker_wake, &w);
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
    pd_pool_destroy(pool);
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
    pd_pool *pool = pd_pool_create(4, MANY_JOBS, waker_wake, &w);
    assert_non_null(pool);

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
    assert_int_equal(st.queue_depth, 0);
    assert_int_equal(st.running, 0);
    assert_int_equal(st.jobs_done, MANY_JOBS);
    assert_int_equal(st.paths_found, MANY_JOBS);
    assert_int_equal(st.expansions, expanded);
    assert_true(st.busy_ns > 0);

    free_jobs(done, MANY_JOBS);
    pd_pool_destroy(pool);
    waker_destroy(&w);
    assert_int_equal(atomic_load(&scene->refs), 1);
    pd_scene_release(scene);
}

static void test_queue_full_overloaded(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    waker_init(&w, 1);
    pd_pool *pool = pd_pool_create(1, 2, waker_wake, &w);
    assert_non_null(pool);

    submit_ok(pool, make_job(f->small, 1, 1, 0, 0, 3, 3));
    waker_wait_blocked(&w, 1);
    submit_ok(pool, make_job(f->small, 1, 2, 0, 0, 4, 4));
    submit_ok(pool, make_job(f->small, 1, 3, 0, 0, 5, 5));
    pd_job *extra = make_job(f->small, 1, 4, 0, 0, 6, 6);
    assert_int_equal(pd_pool_submit(pool, extra), PD_OVERLOADED);
    /* The caller still owns the refused job. */
    assert_int_equal(extra->status, PD_OK);
    assert_null(extra->path);

    pd_pool_stats st;
    pd_pool_get_stats(pool, &st);
    assert_int_equal(st.queue_depth, 2);
    assert_int_equal(st.running, 0);
    assert_int_equal(st.jobs_done, 1);

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
    pd_pool_destroy(pool);
    waker_destroy(&w);
}

static void test_cancel_queued(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    waker_init(&w, 1);
    pd_pool *pool = pd_pool_create(1, 8, waker_wake, &w);
    assert_non_null(pool);

    submit_ok(pool, make_job(f->small, 1, 1, 0, 0, 3, 3));
    waker_wait_blocked(&w, 1);
    submit_ok(pool, make_job(f->small, 1, 2, 0, 0, 9, 9));
    submit_ok(pool, make_job(f->small, 1, 3, 0, 0, 9, 9));
    submit_ok(pool, make_job(f->small, 2, 2, 0, 0, 9, 9));

    assert_int_equal(pd_pool_cancel(pool, 1, 2), 1);
    assert_int_equal(pd_pool_cancel(pool, 1, 99), 0);
    assert_int_equal(pd_pool_cancel(pool, 3, 2), 0);
    /* The finished job is no longer the pool's to cancel. */
    assert_int_equal(pd_pool_cancel(pool, 1, 1), 0);

    waker_open_gate(&w);
    pd_job *done[4];
    collect(pool, &w, done, 4);
    assert_int_equal(done[0]->status, PD_OK);
    assert_int_equal(done[1]->request_id, 2);
    assert_int_equal(done[1]->conn_id, 1);
    assert_int_equal(done[1]->status, PD_CANCELLED);
    assert_int_equal(done[1]->metrics.expanded, 0);
    assert_null(done[1]->path);
    assert_int_equal(done[2]->status, PD_OK);
    assert_int_equal(done[3]->conn_id, 2);
    assert_int_equal(done[3]->status, PD_OK);
    free_jobs(done, 4);

    pd_pool_stats st;
    pd_pool_get_stats(pool, &st);
    assert_int_equal(st.jobs_done, 4);
    assert_int_equal(st.paths_found, 3);
    pd_pool_destroy(pool);
    waker_destroy(&w);
}

static void test_cancel_running(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    waker_init(&w, 0);
    pd_pool *pool = pd_pool_create(1, 4, waker_wake, &w);
    assert_non_null(pool);

    submit_ok(pool, make_long_job(f, 5, 1));
    wait_running(pool, 1);
    assert_int_equal(pd_pool_cancel(pool, 5, 1), 1);
    pd_job *done[1];
    collect(pool, &w, done, 1);
    assert_int_equal(done[0]->status, PD_CANCELLED);
    assert_null(done[0]->path);
    free_jobs(done, 1);
    pd_pool_destroy(pool);
    waker_destroy(&w);
}

/* cancel_conn reaches both the running job and the queued ones of that
 * connection, and leaves other connections alone. */
static void test_cancel_conn(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    waker_init(&w, 0);
    pd_pool *pool = pd_pool_create(1, 8, waker_wake, &w);
    assert_non_null(pool);

    submit_ok(pool, make_long_job(f, 7, 1));
    wait_running(pool, 1);
    submit_ok(pool, make_job(f->small, 7, 2, 0, 0, 9, 9));
    submit_ok(pool, make_job(f->small, 8, 1, 0, 0, 9, 9));
    submit_ok(pool, make_job(f->small, 7, 3, 0, 0, 9, 9));
    pd_pool_cancel_conn(pool, 7);

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
    pd_pool_destroy(pool);
    waker_destroy(&w);
}

static void test_deadline_already_passed(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    waker_init(&w, 0);
    pd_pool *pool = pd_pool_create(1, 4, waker_wake, &w);
    assert_non_null(pool);

    pd_job *late = make_job(f->small, 1, 1, 0, 0, 9, 9);
    late->deadline_ns = pd_pool_now_ns() - 1;
    submit_ok(pool, late);
    pd_job *in_time = make_job(f->small, 1, 2, 0, 0, 9, 9);
    in_time->deadline_ns = pd_pool_now_ns() + COLLECT_TIMEOUT_NS;
    submit_ok(pool, in_time);

    pd_job *done[2];
    collect(pool, &w, done, 2);
    assert_ptr_equal(done[0], late);
    assert_int_equal(late->status, PD_DEADLINE_EXCEEDED);
    assert_int_equal(late->metrics.expanded, 0);
    assert_null(late->path);
    assert_int_equal(in_time->status, PD_OK);
    free_jobs(done, 2);
    pd_pool_destroy(pool);
    waker_destroy(&w);
}

/* A search that would exhaust a million cells (a few hundred milliseconds
 * even in an optimised build) stops at its deadline, part way through. */
#define SHORT_DEADLINE_NS (50ull * 1000000ull)

static void test_deadline_stops_long_search(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    waker_init(&w, 0);
    pd_pool *pool = pd_pool_create(1, 4, waker_wake, &w);
    assert_non_null(pool);

    warm_up(pool, &w, f);
    pd_job *job = make_long_job(f, 1, 1);
    job->deadline_ns = pd_pool_now_ns() + SHORT_DEADLINE_NS;
    submit_ok(pool, job);
    pd_job *done[1];
    collect(pool, &w, done, 1);
    assert_int_equal(job->status, PD_DEADLINE_EXCEEDED);
    assert_true(job->metrics.expanded > 0);
    assert_true(job->metrics.expanded < (uint64_t)BIG_SIDE * BIG_SIDE);
    assert_true(job->finished_ns >= job->deadline_ns);
    assert_null(job->path);
    free_jobs(done, 1);
    pd_pool_destroy(pool);
    waker_destroy(&w);
}

static void test_corners_style(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    waker_init(&w, 0);
    pd_pool *pool = pd_pool_create(1, 8, waker_wake, &w);
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
    pd_pool_destroy(pool);
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
    pd_pool *pool = pd_pool_create(2, 8, waker_wake, &w);
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
    assert_int_equal(st.jobs_done, 1);
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
    pd_pool_destroy(pool);
    waker_destroy(&w);
}

static void test_destroy_with_queued_jobs(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    waker_init(&w, 1);
    pd_pool *pool = pd_pool_create(2, 16, waker_wake, &w);
    assert_non_null(pool);

    submit_ok(pool, make_job(f->small, 1, 1, 0, 0, 3, 3));
    submit_ok(pool, make_job(f->small, 1, 2, 0, 0, 4, 4));
    waker_wait_blocked(&w, 2);
    for (uint64_t id = 3; id < 12; id++)
        submit_ok(pool, make_job(f->small, 1, id, 0, 0, 9, 9));
    assert_true(atomic_load(&f->small->refs) > 1);

    /* Workers are held in wake, so destroy must wait for the gate; open it
     * from another thread while destroy is joining. */
    gate_opener g = {&w, 50};
    pthread_t opener;
    assert_int_equal(pthread_create(&opener, NULL, open_gate_later, &g), 0);
    pd_pool_destroy(pool);
    pthread_join(opener, NULL);
    assert_int_equal(atomic_load(&f->small->refs), 1);
    waker_destroy(&w);
}

/* Destroy does not wait for a long search to finish on its own: it stops it
 * at the next poll, a thousand expansions away. Exhausting the big grid takes
 * a few hundred milliseconds even in an optimised build (seconds under the
 * sanitizers), so a search left to run would blow this bound, while one that
 * is stopped completes (and wakes) within milliseconds. The bound is checked
 * on the wake time, not on destroy's return, because freeing a context is
 * itself slow under TSan. A short job first grows the worker's context to the
 * big grid, so the long search starts at once rather than spending the bound
 * on its first allocation. */
#define STOP_BOUND_NS (150ull * 1000000ull)

static void test_destroy_stops_running_search(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    waker_init(&w, 0);
    pd_pool *pool = pd_pool_create(1, 4, waker_wake, &w);
    assert_non_null(pool);
    warm_up(pool, &w, f);

    submit_ok(pool, make_long_job(f, 1, 1));
    submit_ok(pool, make_long_job(f, 1, 2));
    wait_running(pool, 1);
    uint64_t before = pd_pool_now_ns();
    pd_pool_destroy(pool);
    /* The running search completed (one more wake); the queued one never ran. */
    assert_int_equal(waker_wakes(&w), 2);
    assert_true(w.last_wake_ns - before < STOP_BOUND_NS);
    assert_int_equal(atomic_load(&f->big->refs), 1);
    waker_destroy(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_costs_on_open_grid),
        cmocka_unit_test(test_long_path),
        cmocka_unit_test(test_many_jobs_four_workers),
        cmocka_unit_test(test_queue_full_overloaded),
        cmocka_unit_test(test_cancel_queued),
        cmocka_unit_test(test_cancel_running),
        cmocka_unit_test(test_cancel_conn),
        cmocka_unit_test(test_deadline_already_passed),
        cmocka_unit_test(test_deadline_stops_long_search),
        cmocka_unit_test(test_corners_style),
        cmocka_unit_test(test_pause_holds_work),
        cmocka_unit_test(test_destroy_with_queued_jobs),
        cmocka_unit_test(test_destroy_stops_running_search),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
