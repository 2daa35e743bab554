/*
 * pool_waker.h - what every test of the worker pool shares, whatever its
 * tasks are: a wake callback that counts wakes and can hold a worker at a
 * gate (a worker that has just finished blocks inside wake until the test
 * opens the gate, so work submitted meanwhile stays queued: order shown
 * without sleeping), waits with a hang guard, and wait_running. Static
 * inline, so each test binary takes only what it uses.
 */
#ifndef POOL_WAKER_H
#define POOL_WAKER_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <time.h>

#include "pd_pool.h"

/* How long a test waits for results before failing: a guard against a
 * hang, not a measurement. Generous, because the TSan build runs the
 * searches many times slower: on the shared 2-core machine under parallel
 * ctest, test_jump_points_match_astar's exhaustive search of the big grid
 * outlasted 60 s there. */
#define COLLECT_TIMEOUT_NS (240ull * 1000000000ull)

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

/* Waits (5 ms at a time) for the next wake, or until the time is up. */
static inline void waker_wait_a_moment(test_waker *w)
{
    pthread_mutex_lock(&w->lock);
    struct timespec ts = abs_time_after_ms(5);
    pthread_cond_timedwait(&w->cond, &w->lock, &ts);
    pthread_mutex_unlock(&w->lock);
}

/* Takes completed tasks until `n` have arrived, in completion order,
 * passing each to settle (NULL: none) and storing what it returns (the
 * task itself without settle). Fails the test after COLLECT_TIMEOUT_NS. */
static inline size_t collect_tasks(pd_pool *pool, test_waker *w, void **out, size_t n,
                                   void *(*settle)(pd_task *))
{
    size_t got = 0;
    uint64_t give_up = pd_pool_now_ns() + COLLECT_TIMEOUT_NS;
    while (got < n) {
        for (pd_task *task = pd_pool_take_completed(pool); task;) {
            pd_task *next = task->next;
            assert_true(got < n);
            out[got++] = settle ? settle(task) : (void *)task;
            task = next;
        }
        if (got >= n)
            break;
        assert_true(pd_pool_now_ns() < give_up);
        waker_wait_a_moment(w);
    }
    return got;
}

#endif
