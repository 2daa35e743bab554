/*
 * test_radix.c - the open list (pd_radix.h): a monotone priority queue.
 *
 * Checked against a plain model, a multiset of live (key, id, tag) entries in
 * an array whose minimum is found by a linear scan. Random workloads push keys
 * at or above the last key popped (as A* does: small steps above it, repeats
 * of it, and far jumps that exercise the high buckets), and every pop must
 * return an entry of the model with the model's smallest key. Also: equal
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

#define MODEL_MAX 4096

/* xorshift64: a fixed-seed generator of our own, so runs are reproducible. */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

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

/* Next key to push: mostly near `last`, sometimes equal, sometimes far. */
static uint64_t next_key(uint64_t *rng, uint64_t last)
{
    uint64_t r = rng_next(rng);
    switch (r % 8) {
    case 0:
    case 1:
        return last;
    case 2:
        return last + (rng_next(rng) >> 20); /* a jump into the high buckets */
    default:
        return last + (rng_next(rng) % 4096);
    }
}

static void run_workload(uint64_t seed, int ops, int pop_percent)
{
    static model m;
    m.n = 0;
    pd_radix q;
    memset(&q, 0, sizeof q);
    pd_radix_reset(&q, 1000);
    uint64_t rng = seed;
    uint32_t next_id = 0;
    uint64_t prev = 0;
    for (int op = 0; op < ops; op++) {
        int pop = m.n > 0 && ((int)(rng_next(&rng) % 100) < pop_percent || m.n == MODEL_MAX);
        if (pop) {
            pd_radix_entry got;
            assert_int_equal(pd_radix_pop(&q, &got), 0);
            assert_int_equal(got.key, q.last);
            assert_true(got.key >= prev);
            prev = got.key;
            model_take(&m, &got);
        } else {
            pd_radix_entry e = { next_key(&rng, q.last), next_id++, (uint32_t)(rng_next(&rng) % 9) };
            assert_int_equal(pd_radix_push(&q, e.key, e.id, e.tag), 0);
            m.e[m.n++] = e;
        }
        assert_int_equal(q.size, m.n);
    }
    while (m.n > 0) {
        pd_radix_entry got;
        assert_int_equal(pd_radix_pop(&q, &got), 0);
        model_take(&m, &got);
    }
    assert_int_equal(q.size, 0);
    pd_radix_free(&q);
}

static void test_random_workloads(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 40; seed++)
        run_workload(seed * 0x9E3779B97F4A7C15ull, 6000, 20 + (int)(seed % 4) * 15);
}

static void test_equal_keys_newest_first(void **state)
{
    (void)state;
    pd_radix q;
    memset(&q, 0, sizeof q);
    pd_radix_reset(&q, 0);
    /* Equal keys pushed before and after a pop: both batches newest first. */
    for (uint32_t id = 0; id < 3; id++)
        assert_int_equal(pd_radix_push(&q, 50, id, 0), 0);
    assert_int_equal(pd_radix_push(&q, 70, 99, 0), 0);
    pd_radix_entry got;
    assert_int_equal(pd_radix_pop(&q, &got), 0);
    assert_int_equal(got.key, 50);
    assert_int_equal(got.id, 2);
    for (uint32_t id = 10; id < 12; id++)
        assert_int_equal(pd_radix_push(&q, 50, id, 0), 0);
    const uint32_t want[] = { 11, 10, 1, 0, 99 };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        assert_int_equal(pd_radix_pop(&q, &got), 0);
        assert_int_equal(got.id, want[i]);
    }
    assert_int_equal(q.size, 0);
    pd_radix_free(&q);
}

static void test_key_below_last_is_raised(void **state)
{
    (void)state;
    pd_radix q;
    memset(&q, 0, sizeof q);
    pd_radix_reset(&q, 0);
    assert_int_equal(pd_radix_push(&q, 100, 1, 0), 0);
    assert_int_equal(pd_radix_push(&q, 200, 2, 0), 0);
    pd_radix_entry got;
    assert_int_equal(pd_radix_pop(&q, &got), 0);
    assert_int_equal(got.key, 100);
    /* Rounding noise can produce a key one below the current one. */
    assert_int_equal(pd_radix_push(&q, 99, 3, 7), 0);
    assert_int_equal(pd_radix_pop(&q, &got), 0);
    assert_int_equal(got.key, 100);
    assert_int_equal(got.id, 3);
    assert_int_equal(got.tag, 7);
    assert_int_equal(pd_radix_pop(&q, &got), 0);
    assert_int_equal(got.id, 2);
    pd_radix_free(&q);
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
        cmocka_unit_test(test_random_workloads),
        cmocka_unit_test(test_equal_keys_newest_first),
        cmocka_unit_test(test_key_below_last_is_raised),
        cmocka_unit_test(test_extreme_keys),
        cmocka_unit_test(test_reset_keeps_arrays),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
