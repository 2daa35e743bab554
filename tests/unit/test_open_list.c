/*
 * test_open_list.c - the two open lists: the radix heap (pd_radix.h, jump
 * point search) and the ring of f buckets (pd_ring.h, A*), both monotone
 * priority queues.
 *
 * Checked against a plain model, a multiset of live (key, id, tag) entries in
 * an array whose minimum is found by a linear scan. Random workloads push keys
 * at or above the last key popped (as A* does: small steps above it, repeats
 * of it, and for the radix heap far jumps that exercise the high buckets; for
 * the ring, steps up to its window, across many ring turns), and every pop
 * must return an entry of the model with the model's smallest key. Also: equal
 * keys come out newest first (the tie-breaking A* relies on), a key below the
 * last one popped is queued as that key, reset empties the queue but keeps
 * its arrays, and keys that differ only in the top bit sort correctly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pd_radix.h"
#include "pd_ring.h"
#include "test_rng.h"

#define MODEL_MAX 4096

typedef struct model {
    pd_radix_entry e[MODEL_MAX];
    size_t n;
} model;

/* Removes the model's entry equal to got; fails if there is none or if a
 * live entry has a smaller key. */
static void model_take(model *m, const pd_radix_entry *got)
{
    size_t found = m->n;
    for (size_t i = 0; i < m->n; i++) {
        assert_true(m->e[i].key >= got->key);
        if (found == m->n && m->e[i].key == got->key && m->e[i].id == got->id && m->e[i].tag == got->tag)
            found = i;
    }
    assert_true(found < m->n);
    m->e[found] = m->e[--m->n];
}

/* Either open list behind one interface, so one workload drives both. */
typedef struct queue {
    int ring;               /* 1: pd_ring, 0: pd_radix */
    uint64_t window;        /* the ring's window */
    pd_radix radix;
    pd_ring r;
} queue;

static void q_reset(queue *q, uint64_t first_key)
{
    if (q->ring)
        assert_int_equal(pd_ring_reset(&q->r, first_key, q->window), 0);
    else
        pd_radix_reset(&q->radix, first_key);
}

static void q_push(queue *q, pd_radix_entry e)
{
    if (q->ring)
        assert_int_equal(pd_ring_push(&q->r, e.key, e.id, e.tag), 0);
    else
        assert_int_equal(pd_radix_push(&q->radix, e.key, e.id, e.tag), 0);
}

static pd_radix_entry q_pop(queue *q)
{
    pd_radix_entry got = { 0, 0, 0 };
    if (q->ring)
        assert_int_equal(pd_ring_pop(&q->r, &got), 0);
    else
        assert_int_equal(pd_radix_pop(&q->radix, &got), 0);
    return got;
}

static uint64_t q_last(const queue *q)
{
    return q->ring ? q->r.last : q->radix.last;
}

static size_t q_size(const queue *q)
{
    return q->ring ? q->r.size : q->radix.size;
}

static void q_free(queue *q)
{
    pd_radix_free(&q->radix);
    pd_ring_free(&q->r);
}

/* Next key to push: mostly near `last`, sometimes equal, sometimes far (up
 * to the ring's window for the ring, anywhere above for the radix heap). */
static uint64_t next_key(const queue *q, uint64_t *rng, uint64_t last)
{
    uint64_t r = rng_next(rng);
    switch (r % 8) {
    case 0:
    case 1:
        return last;
    case 2:
        if (q->ring)
            return last + rng_next(rng) % (q->window + 1);
        return last + (rng_next(rng) >> 20); /* a jump into the high buckets */
    default:
        return last + (rng_next(rng) % 4096);
    }
}

static void run_workload(queue *q, uint64_t seed, int ops, int pop_percent)
{
    static model m;
    m.n = 0;
    q_reset(q, 1000);
    uint64_t rng = seed;
    uint32_t next_id = 0;
    uint64_t prev = 0;
    for (int op = 0; op < ops; op++) {
        int pop = m.n > 0 && ((int)(rng_next(&rng) % 100) < pop_percent || m.n == MODEL_MAX);
        if (pop) {
            pd_radix_entry got = q_pop(q);
            assert_int_equal(got.key, q_last(q));
            assert_true(got.key >= prev);
            prev = got.key;
            model_take(&m, &got);
        } else {
            pd_radix_entry e = { next_key(q, &rng, q_last(q)), next_id++, (uint32_t)(rng_next(&rng) % 9) };
            q_push(q, e);
            m.e[m.n++] = e;
        }
        assert_int_equal(q_size(q), m.n);
    }
    while (m.n > 0) {
        pd_radix_entry got = q_pop(q);
        model_take(&m, &got);
    }
    assert_int_equal(q_size(q), 0);
}

static void test_random_workloads_radix(void **state)
{
    (void)state;
    queue q;
    memset(&q, 0, sizeof q);
    for (uint64_t seed = 1; seed <= 40; seed++)
        run_workload(&q, seed * 0x9E3779B97F4A7C15ull, 6000, 20 + (int)(seed % 4) * 15);
    q_free(&q);
}

/* The ring with the windows A* gives it: a uniform octile grid's (the
 * narrowest buckets), a weighted grid's (the widest window, wider buckets),
 * and one window per seed in between; the same queue is reused across
 * windows, as a search context reuses it across grids. */
static void test_random_workloads_ring(void **state)
{
    (void)state;
    queue q;
    memset(&q, 0, sizeof q);
    q.ring = 1;
    const uint64_t unit = 1ull << 24; /* keys per unit of f, as in the search */
    for (uint64_t seed = 1; seed <= 40; seed++) {
        q.window = seed == 1 ? 3 * unit : seed == 2 ? 363 * unit : (seed * 7919) % (400 * unit);
        run_workload(&q, seed * 0x9E3779B97F4A7C15ull, 6000, 20 + (int)(seed % 4) * 15);
    }
    q_free(&q);
}

static void check_equal_keys_newest_first(queue *q)
{
    q_reset(q, 0);
    /* Equal keys pushed before and after a pop: both batches newest first,
     * also when a larger key shares their ring bucket (51) or not (70). */
    for (uint32_t id = 0; id < 3; id++)
        q_push(q, (pd_radix_entry){ 50, id, 0 });
    q_push(q, (pd_radix_entry){ 70, 99, 0 });
    q_push(q, (pd_radix_entry){ 51, 98, 0 });
    pd_radix_entry got = q_pop(q);
    assert_int_equal(got.key, 50);
    assert_int_equal(got.id, 2);
    for (uint32_t id = 10; id < 12; id++)
        q_push(q, (pd_radix_entry){ 50, id, 0 });
    q_push(q, (pd_radix_entry){ 52, 97, 0 });
    const uint32_t want[] = { 11, 10, 1, 0, 98, 97, 99 };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        got = q_pop(q);
        assert_int_equal(got.id, want[i]);
    }
    assert_int_equal(q_size(q), 0);
}

static void test_equal_keys_newest_first(void **state)
{
    (void)state;
    queue q;
    memset(&q, 0, sizeof q);
    check_equal_keys_newest_first(&q);
    q.ring = 1;
    q.window = 1000;
    check_equal_keys_newest_first(&q);
    q_free(&q);
}

static void check_key_below_last_is_raised(queue *q)
{
    q_reset(q, 0);
    q_push(q, (pd_radix_entry){ 100, 1, 0 });
    q_push(q, (pd_radix_entry){ 200, 2, 0 });
    pd_radix_entry got = q_pop(q);
    assert_int_equal(got.key, 100);
    /* Rounding noise can produce a key one below the current one. */
    q_push(q, (pd_radix_entry){ 99, 3, 7 });
    got = q_pop(q);
    assert_int_equal(got.key, 100);
    assert_int_equal(got.id, 3);
    assert_int_equal(got.tag, 7);
    got = q_pop(q);
    assert_int_equal(got.id, 2);
}

static void test_key_below_last_is_raised(void **state)
{
    (void)state;
    queue q;
    memset(&q, 0, sizeof q);
    check_key_below_last_is_raised(&q);
    q.ring = 1;
    q.window = 1000;
    check_key_below_last_is_raised(&q);
    q_free(&q);
}

static void test_extreme_keys(void **state)
{
    (void)state;
    pd_radix q;
    memset(&q, 0, sizeof q);
    pd_radix_reset(&q, 0);
    const uint64_t keys[] = { UINT64_MAX, 1ull << 63, (1ull << 63) - 1, 1, 0 };
    for (uint32_t i = 0; i < 5; i++)
        assert_int_equal(pd_radix_push(&q, keys[i], i, 0), 0);
    for (int i = 4; i >= 0; i--) {
        pd_radix_entry got;
        assert_int_equal(pd_radix_pop(&q, &got), 0);
        assert_int_equal(got.key, keys[i]);
    }
    pd_radix_free(&q);
}

/* A ring reset after a search that left entries behind starts empty, and a
 * reset for a narrower window keeps the buckets it has. */
static void test_ring_reset_after_unfinished_search(void **state)
{
    (void)state;
    pd_ring r;
    memset(&r, 0, sizeof r);
    assert_int_equal(pd_ring_reset(&r, 0, 1ull << 33), 0);
    for (uint32_t i = 0; i < 3000; i++)
        assert_int_equal(pd_ring_push(&r, (uint64_t)i << 20, i, 0), 0);
    pd_radix_entry got;
    assert_int_equal(pd_ring_pop(&r, &got), 0);
    assert_int_equal(got.id, 0);
    const size_t grown = pd_ring_footprint(&r);
    assert_int_equal(pd_ring_reset(&r, 5, 1000), 0);
    assert_int_equal(r.size, 0);
    assert_int_equal(pd_ring_footprint(&r), grown);
    assert_int_equal(pd_ring_push(&r, 7, 42, 1), 0);
    assert_int_equal(pd_ring_push(&r, 6, 43, 1), 0);
    assert_int_equal(pd_ring_pop(&r, &got), 0);
    assert_int_equal(got.id, 43);
    assert_int_equal(pd_ring_pop(&r, &got), 0);
    assert_int_equal(got.id, 42);
    assert_int_equal(r.size, 0);
    pd_ring_free(&r);
}

static void test_reset_keeps_arrays(void **state)
{
    (void)state;
    pd_radix q;
    memset(&q, 0, sizeof q);
    pd_radix_reset(&q, 0);
    for (uint32_t i = 0; i < 5000; i++)
        assert_int_equal(pd_radix_push(&q, i % 7, i, 0), 0);
    size_t grown = pd_radix_footprint(&q);
    assert_true(grown >= 5000 * sizeof(pd_radix_entry));
    /* The running count is every bucket's array, pops spreading entries
     * over further buckets included. */
    pd_radix_entry e;
    for (uint32_t i = 0; i < 2500; i++)
        assert_int_equal(pd_radix_pop(&q, &e), 0);
    for (uint32_t i = 0; i < 3000; i++)
        assert_int_equal(pd_radix_push(&q, q.last + (i * 2654435761u) % 100000u, i, 0), 0);
    size_t sum = 0;
    for (int k = 0; k < PD_RADIX_BUCKETS; k++)
        sum += (size_t)q.b[k].cap * sizeof(pd_radix_entry);
    assert_int_equal(pd_radix_footprint(&q), sum);
    grown = sum;
    pd_radix_reset(&q, 3);
    assert_int_equal(q.size, 0);
    assert_int_equal(pd_radix_footprint(&q), grown);
    assert_int_equal(pd_radix_push(&q, 3, 42, 1), 0);
    pd_radix_entry got;
    assert_int_equal(pd_radix_pop(&q, &got), 0);
    assert_int_equal(got.id, 42);
    assert_int_equal(pd_radix_footprint(&q), grown);
    pd_radix_free(&q);
    assert_int_equal(pd_radix_footprint(&q), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_workloads_radix),
        cmocka_unit_test(test_random_workloads_ring),
        cmocka_unit_test(test_ring_reset_after_unfinished_search),
        cmocka_unit_test(test_equal_keys_newest_first),
        cmocka_unit_test(test_key_below_last_is_raised),
        cmocka_unit_test(test_extreme_keys),
        cmocka_unit_test(test_reset_keeps_arrays),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
