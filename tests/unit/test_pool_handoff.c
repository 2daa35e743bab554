/*
 * test_pool_handoff.c - the pool's hand-off of submitted tasks to workers
 * (pd_pool.h): submits push onto an incoming stack without the pool's lock,
 * and a worker about to sleep counts itself so a submit knows to wake it.
 * Several threads submit one task at a time and wait for it, so the workers
 * go to sleep and are woken thousands of times, racing the submits: a
 * wakeup lost there would leave a task waiting with every worker asleep,
 * which the bounded wait turns into a failure instead of a hang. Under TSan
 * (ctest -L threaded) the same run checks the stack's memory ordering.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pd_pool.h"

/* A guard against a hang, not a measurement (the TSan build is slow). */
#define WAIT_TIMEOUT_NS (120ull * 1000000000ull)
#define SUBMITTERS 3
#define TASKS_EACH 2000

typedef struct handoff_task {
    pd_task task;              /* first: the pool hands back this pointer */
    atomic_int ran;            /* times run (must end at 1) */
} handoff_task;

typedef struct submitter {
    pthread_t thread;
    pd_pool *pool;
    handoff_task *tasks;       /* TASKS_EACH of them */
    int lost;                  /* a task not run within WAIT_TIMEOUT_NS */
    int refused;               /* a submit not answered PD_OK */
} submitter;

static pd_status handoff_run(pd_task *t, void *ctx)
{
    (void)ctx;
    atomic_fetch_add(&((handoff_task *)t)->ran, 1);
    return PD_OK;
}

static void *ctx_create(void *user)
{
    (void)user;
    return malloc(1);
}

static const pd_pool_thread_ops thread_ops = {ctx_create, free, NULL};

static void pause_briefly(void)
{
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
}

/* Submits its tasks one at a time, each once the one before has run, so
 * the workers mostly sleep when a task arrives. */
static void *submitter_main(void *arg)
{
    submitter *s = arg;
    for (int i = 0; i < TASKS_EACH && !s->lost && !s->refused; i++) {
        handoff_task *t = &s->tasks[i];
        pd_task_init(&t->task, handoff_run);
        atomic_init(&t->ran, 0);
        t->task.owner = (uint64_t)(uintptr_t)s;
        t->task.tag = (uint64_t)i;
        if (pd_pool_submit(s->pool, &t->task) != PD_OK) {
            s->refused = 1;
            break;
        }
        const uint64_t give_up = pd_pool_now_ns() + WAIT_TIMEOUT_NS;
        while (!atomic_load(&t->ran)) {
            if (pd_pool_now_ns() > give_up) {
                s->lost = 1;
                break;
            }
            pause_briefly();
        }
    }
    return NULL;
}

static void test_submits_reach_sleeping_workers(void **state)
{
    (void)state;
    pd_pool *pool = pd_pool_create(2, 64, &thread_ops, NULL, NULL, NULL);
    assert_non_null(pool);
    submitter subs[SUBMITTERS];
    memset(subs, 0, sizeof subs);
    for (int i = 0; i < SUBMITTERS; i++) {
        subs[i].pool = pool;
        subs[i].tasks = calloc(TASKS_EACH, sizeof *subs[i].tasks);
        assert_non_null(subs[i].tasks);
        assert_int_equal(pthread_create(&subs[i].thread, NULL, submitter_main, &subs[i]), 0);
    }
    for (int i = 0; i < SUBMITTERS; i++)
        pthread_join(subs[i].thread, NULL);

    /* Every task came back on the completion list, once, having run once. */
    size_t completed = 0;
    const uint64_t give_up = pd_pool_now_ns() + WAIT_TIMEOUT_NS;
    while (completed < (size_t)SUBMITTERS * TASKS_EACH && pd_pool_now_ns() < give_up) {
        for (pd_task *t = pd_pool_take_completed(pool); t; t = t->next) {
            assert_int_equal(t->status, PD_OK);
            completed++;
        }
        if (completed < (size_t)SUBMITTERS * TASKS_EACH)
            pause_briefly();
    }
    for (int i = 0; i < SUBMITTERS; i++) {
        assert_false(subs[i].refused);
        assert_false(subs[i].lost);
        for (int k = 0; k < TASKS_EACH; k++)
            assert_int_equal(atomic_load(&subs[i].tasks[k].ran), 1);
    }
    assert_int_equal(completed, (size_t)SUBMITTERS * TASKS_EACH);

    pd_pool_stats st;
    pd_pool_get_stats(pool, &st);
    assert_int_equal(st.queue_depth, 0);
    assert_int_equal(st.tasks_done, (uint64_t)SUBMITTERS * TASKS_EACH);
    assert_null(pd_pool_destroy(pool));
    for (int i = 0; i < SUBMITTERS; i++)
        free(subs[i].tasks);
}

/* Tasks still on the incoming stack when the pool is destroyed (no worker
 * took the lock since they were submitted: the only one is held in a task
 * that runs until told to stop) come back cancelled without running, and
 * the queue depth counts them before. */
typedef struct held_task {
    pd_task task;
    atomic_int entered;
} held_task;

static pd_status held_run(pd_task *t, void *ctx)
{
    (void)ctx;
    atomic_store(&((held_task *)t)->entered, 1);
    pd_status st;
    while ((st = pd_task_interrupt(t)) == PD_OK)
        pause_briefly();
    return st;
}

static void test_destroy_answers_incoming_tasks(void **state)
{
    (void)state;
    pd_pool *pool = pd_pool_create(1, 8, &thread_ops, NULL, NULL, NULL);
    assert_non_null(pool);
    held_task held;
    pd_task_init(&held.task, held_run);
    atomic_init(&held.entered, 0);
    assert_int_equal(pd_pool_submit(pool, &held.task), PD_OK);
    const uint64_t give_up = pd_pool_now_ns() + WAIT_TIMEOUT_NS;
    while (!atomic_load(&held.entered)) {
        assert_true(pd_pool_now_ns() < give_up);
        pause_briefly();
    }

    handoff_task waiting[3];
    for (int i = 0; i < 3; i++) {
        pd_task_init(&waiting[i].task, handoff_run);
        atomic_init(&waiting[i].ran, 0);
        assert_int_equal(pd_pool_submit(pool, &waiting[i].task), PD_OK);
    }
    pd_pool_stats st;
    pd_pool_get_stats(pool, &st);
    assert_int_equal(st.queue_depth, 3);
    assert_int_equal(st.running, 1);

    size_t cancelled = 0, n = 0;
    for (pd_task *t = pd_pool_destroy(pool); t; t = t->next, n++)
        cancelled += t->status == PD_CANCELLED;
    assert_int_equal(n, 4); /* the held task and the three waiting */
    assert_int_equal(cancelled, 4);
    for (int i = 0; i < 3; i++)
        assert_int_equal(atomic_load(&waiting[i].ran), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_submits_reach_sleeping_workers),
        cmocka_unit_test(test_destroy_answers_incoming_tasks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
