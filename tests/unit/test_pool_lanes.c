/*
 * test_pool_lanes.c - ordered tasks in lanes (pd_pool.h): tasks that share
 * a lane run one at a time in submission order and complete in that order;
 * tasks of different lanes run side by side, so a slow one in one lane
 * holds back nothing in another; a task with two lanes waits for both and
 * holds both. Plain pd_tasks whose run function records what ran and may
 * wait at a gate the test opens, so every claim is shown by the order of
 * events, never by timing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "pd_pool.h"

/* A guard against a hang, not a measurement (the TSan build is slow). */
#define WAIT_TIMEOUT_NS (120ull * 1000000000ull)
#define MAX_EVENTS 1024

/* What the tasks of one test share: a log of starts, and gates. */
typedef struct lane_log {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int started[MAX_EVENTS];   /* task ids in the order they started */
    size_t n_started;
    int in_lane[8];            /* tasks running right now, by lane % 8 */
    int overlaps;              /* times a task started while its lane ran another */
    int gate_open;
} lane_log;

typedef struct lane_task {
    pd_task task;              /* first: the pool hands back this pointer */
    lane_log *log;
    int id;
    int gated;                 /* waits at the log's gate before finishing */
} lane_task;

static pd_status lane_run(pd_task *t, void *ctx)
{
    (void)ctx;
    lane_task *lt = (lane_task *)t;
    lane_log *log = lt->log;
    pthread_mutex_lock(&log->lock);
    log->started[log->n_started++] = lt->id;
    int *a = &log->in_lane[t->lane % 8], *b = &log->in_lane[t->lane2 % 8];
    log->overlaps += *a > 0 || (b != a && *b > 0);
    (*a)++;
    if (b != a)
        (*b)++;
    pthread_cond_broadcast(&log->cond);
    while (lt->gated && !log->gate_open)
        pthread_cond_wait(&log->cond, &log->lock);
    (*a)--;
    if (b != a)
        (*b)--;
    pthread_mutex_unlock(&log->lock);
    return PD_OK;
}

static void *ctx_create(void *user)
{
    (void)user;
    return malloc(1);
}

static const pd_pool_thread_ops thread_ops = { ctx_create, free, NULL };

static void log_init(lane_log *log)
{
    memset(log, 0, sizeof *log);
    pthread_mutex_init(&log->lock, NULL);
    pthread_cond_init(&log->cond, NULL);
}

static void log_destroy(lane_log *log)
{
    pthread_cond_destroy(&log->cond);
    pthread_mutex_destroy(&log->lock);
}

static lane_task *submit(pd_pool *p, lane_log *log, int id, uint64_t lane, uint64_t lane2, int gated)
{
    lane_task *lt = calloc(1, sizeof *lt);
    assert_non_null(lt);
    pd_task_init(&lt->task, lane_run);
    lt->task.ordered = 1;
    lt->task.lane = lane;
    lt->task.lane2 = lane2;
    lt->task.tag = (uint64_t)id;
    lt->log = log;
    lt->id = id;
    lt->gated = gated;
    assert_int_equal(pd_pool_submit(p, &lt->task), PD_OK);
    return lt;
}

/* Waits until task `id` has started. */
static void wait_started(lane_log *log, int id)
{
    uint64_t give_up = pd_pool_now_ns() + WAIT_TIMEOUT_NS;
    pthread_mutex_lock(&log->lock);
    for (;;) {
        for (size_t i = 0; i < log->n_started; i++) {
            if (log->started[i] == id) {
                pthread_mutex_unlock(&log->lock);
                return;
            }
        }
        assert_true(pd_pool_now_ns() < give_up);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 10 * 1000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&log->cond, &log->lock, &ts);
    }
}

static int has_started(lane_log *log, int id)
{
    pthread_mutex_lock(&log->lock);
    int found = 0;
    for (size_t i = 0; i < log->n_started; i++)
        found |= log->started[i] == id;
    pthread_mutex_unlock(&log->lock);
    return found;
}

static void open_gate(lane_log *log)
{
    pthread_mutex_lock(&log->lock);
    log->gate_open = 1;
    pthread_cond_broadcast(&log->cond);
    pthread_mutex_unlock(&log->lock);
}

/* Takes completed tasks until `want` have come back; their ids in
 * completion order go to ids[]. */
static void collect(pd_pool *p, int *ids, size_t want)
{
    uint64_t give_up = pd_pool_now_ns() + WAIT_TIMEOUT_NS;
    size_t n = 0;
    while (n < want) {
        assert_true(pd_pool_now_ns() < give_up);
        pd_task *t = pd_pool_take_completed(p);
        if (!t) {
            struct timespec ts = { 0, 1000000L };
            nanosleep(&ts, NULL);
            continue;
        }
        while (t) {
            pd_task *next = t->next;
            lane_task *lt = (lane_task *)t;
            assert_int_equal(t->status, PD_OK);
            assert_true(n < want);
            ids[n++] = lt->id;
            free(lt);
            t = next;
        }
    }
}

/* A pool of `workers` running task 1 of lane 1, which waits at the gate. */
static pd_pool *pool_with_slow_task(lane_log *log, uint32_t workers)
{
    log_init(log);
    pd_pool *p = pd_pool_create(workers, 16, &thread_ops, NULL, NULL, NULL);
    assert_non_null(p);
    submit(p, log, 1, 1, 1, 1);
    wait_started(log, 1);
    return p;
}

/* One scenario behind a slow task: tasks submitted after task 1 (lane 1,
 * waiting at the gate), the one that must complete while it waits, the
 * ones that must not have started by then, and the order the rest must
 * complete in once the gate opens. */
typedef struct behind_slow {
    uint32_t workers;
    struct { int id; uint64_t lane, lane2; } later[3];
    size_t n_later;
    int done_first;
    int not_started[2];
    size_t n_not_started;
    int rest[3];
    size_t n_rest;
} behind_slow;

static void run_behind_slow(const behind_slow *b)
{
    lane_log log;
    pd_pool *p = pool_with_slow_task(&log, b->workers);
    for (size_t i = 0; i < b->n_later; i++)
        submit(p, &log, b->later[i].id, b->later[i].lane, b->later[i].lane2, 0);
    int ids[4];
    collect(p, ids, 1);
    assert_int_equal(ids[0], b->done_first);
    for (size_t i = 0; i < b->n_not_started; i++)
        assert_false(has_started(&log, b->not_started[i]));
    open_gate(&log);
    collect(p, ids, b->n_rest);
    for (size_t i = 0; i < b->n_rest; i++)
        assert_int_equal(ids[i], b->rest[i]);
    assert_null(pd_pool_destroy(p));
    log_destroy(&log);
}

/* Two workers; lane 1's first task is slow (it waits at the gate). Lane 2's
 * task, submitted after lane 1's second, runs and completes while the slow
 * one still runs, and lane 1's second does not start before the slow one
 * is done: a slow update of one scene holds back its own later updates and
 * no other scene's. */
static void test_slow_lane_holds_back_only_itself(void **state)
{
    (void)state;
    static const behind_slow b = { 2, { { 2, 1, 1 }, { 3, 2, 2 } }, 2, 3, { 2 }, 1, { 1, 2 }, 2 };
    run_behind_slow(&b);
}

/* While the pool is paused, tasks of three lanes are queued interleaved;
 * with four workers each lane's tasks must start and complete in the order
 * they were submitted, and no two tasks of one lane run at once. */
static void test_each_lane_keeps_its_order(void **state)
{
    (void)state;
    enum { LANES = 3, PER_LANE = 40 };
    lane_log log;
    log_init(&log);
    pd_pool *p = pd_pool_create(4, LANES * PER_LANE, &thread_ops, NULL, NULL, NULL);
    assert_non_null(p);
    pd_pool_set_paused(p, 1);
    for (int k = 0; k < PER_LANE; k++)
        for (int lane = 0; lane < LANES; lane++)
            submit(p, &log, lane * 1000 + k, 100 + (uint64_t)lane, 100 + (uint64_t)lane, 0);
    pd_pool_set_paused(p, 0);
    int ids[LANES * PER_LANE];
    collect(p, ids, LANES * PER_LANE);
    int next_done[LANES] = { 0 }, next_started[LANES] = { 0 };
    for (size_t i = 0; i < LANES * PER_LANE; i++) {
        int lane = ids[i] / 1000;
        assert_int_equal(ids[i] % 1000, next_done[lane]++);
        lane = log.started[i] / 1000;
        assert_int_equal(log.started[i] % 1000, next_started[lane]++);
    }
    assert_int_equal(log.overlaps, 0);
    assert_null(pd_pool_destroy(p));
    log_destroy(&log);
}

/* A task with lanes 1 and 2 (an instance of scene 2 named in lane 1) waits
 * for the slow task of lane 1 even though lane 2 is free, and a later task
 * of lane 2 waits behind it; lane 3 is not held back by either. */
static void test_two_lanes_wait_for_both(void **state)
{
    (void)state;
    static const behind_slow b = { 3, { { 2, 1, 2 }, { 3, 2, 2 }, { 4, 3, 3 } }, 3, 4, { 2, 3 }, 2, { 1, 2, 3 }, 3 };
    run_behind_slow(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slow_lane_holds_back_only_itself),
        cmocka_unit_test(test_each_lane_keeps_its_order),
        cmocka_unit_test(test_two_lanes_wait_for_both),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
