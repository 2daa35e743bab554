/*
 * test_heap.c - the open list (pd_heap): order, decrease-key and the
 * position map, checked against a plain reference model.
 *
 * The model is an array of (f, g) per id plus an "in heap" flag; the best
 * entry is found by a linear scan. Random pushes, pops and decreases run on
 * both, and after every operation the heap must pass pd_heap_is_valid, every
 * id's recorded position must point at that id, and slots of the position
 * array that belong to nobody (stride 4) must be untouched. Keys are small
 * multiples of 0.25 so they are exact in the heap's float g and ties on f
 * are frequent.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pd_heap.h"

#define MODEL_IDS 257
#define POS_SENTINEL 0xDEADBEEFu
/* The widest position stride tested, like the search's 16-byte node record. */
#define MAX_STRIDE 4

/* xorshift64: a fixed-seed generator of our own, so runs are reproducible. */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static uint32_t rng_below(uint64_t *s, uint32_t n)
{
    return (uint32_t)(rng_next(s) % n);
}

typedef struct model {
    double f[MODEL_IDS];
    double g[MODEL_IDS];
    int in_heap[MODEL_IDS];
    size_t count;
} model;

typedef struct fixture {
    pd_heap heap;
    pd_heap_entry entries[MODEL_IDS];
    uint32_t pos[MODEL_IDS * MAX_STRIDE];
    size_t stride;
    model m;
} fixture;

static void fixture_init(fixture *fx, size_t stride)
{
    memset(fx, 0, sizeof *fx);
    fx->stride = stride;
    assert_true(stride >= 1 && stride <= MAX_STRIDE);
    for (size_t i = 0; i < MODEL_IDS * stride; i++)
        fx->pos[i] = POS_SENTINEL;
    fx->heap.entries = fx->entries;
    fx->heap.size = 0;
    fx->heap.pos_base = fx->pos;
    fx->heap.pos_stride = stride;
}

/* Is (fa, ga) strictly better than (fb, gb) under the documented order? */
static int key_before(double fa, double ga, double fb, double gb)
{
    return fa < fb || (fa == fb && ga > gb);
}

static void check_consistent(const fixture *fx)
{
    assert_int_equal(fx->heap.size, fx->m.count);
    assert_true(pd_heap_is_valid(&fx->heap));
    for (uint32_t id = 0; id < MODEL_IDS; id++) {
        if (!fx->m.in_heap[id])
            continue;
        uint32_t p = fx->pos[(size_t)id * fx->stride];
        assert_true(p < fx->heap.size);
        assert_int_equal(fx->entries[p].id, id);
        assert_true(fx->entries[p].f == fx->m.f[id]);
        assert_true((double)fx->entries[p].g == fx->m.g[id]);
    }
    /* The heap only ever writes pos[id * stride]. */
    for (size_t i = 0; i < MODEL_IDS * fx->stride; i++)
        if (i % fx->stride != 0)
            assert_int_equal(fx->pos[i], POS_SENTINEL);
}

static void do_push(fixture *fx, uint32_t id, double f, double g)
{
    pd_heap_push(&fx->heap, f, g, id);
    fx->m.f[id] = f;
    fx->m.g[id] = g;
    fx->m.in_heap[id] = 1;
    fx->m.count++;
}

static void do_pop(fixture *fx)
{
    /* The reference best key; several ids may share it. */
    int have = 0;
    double bf = 0, bg = 0;
    for (uint32_t id = 0; id < MODEL_IDS; id++) {
        if (fx->m.in_heap[id] && (!have || key_before(fx->m.f[id], fx->m.g[id], bf, bg))) {
            bf = fx->m.f[id];
            bg = fx->m.g[id];
            have = 1;
        }
    }
    assert_true(have);
    pd_heap_entry e = pd_heap_pop(&fx->heap);
    assert_true(e.id < MODEL_IDS);
    assert_true(fx->m.in_heap[e.id]);
    if (e.f != bf || (double)e.g != bg)
        fail_msg("popped id %u (f=%g g=%g), best is f=%g g=%g", e.id, e.f, (double)e.g, bf, bg);
    assert_true(fx->m.f[e.id] == bf && fx->m.g[e.id] == bg);
    fx->m.in_heap[e.id] = 0;
    fx->m.count--;
}

static void do_decrease(fixture *fx, uint32_t id, double f, double g)
{
    pd_heap_decrease(&fx->heap, fx->pos[(size_t)id * fx->stride], f, g);
    fx->m.f[id] = f;
    fx->m.g[id] = g;
}

static double quarter(uint64_t *rng, uint32_t max_units)
{
    return rng_below(rng, max_units * 4 + 1) * 0.25;
}

/* Random mix of operations; decreases follow the search's use: f strictly
 * lower (g may go anywhere), or f equal with g larger (a better tie). */
static void run_random(size_t stride, uint64_t seed, int ops)
{
    fixture fx;
    fixture_init(&fx, stride);
    uint64_t rng = seed;
    for (int op = 0; op < ops; op++) {
        uint32_t kind = rng_below(&rng, 10);
        uint32_t id = rng_below(&rng, MODEL_IDS);
        if (kind < 4) {
            if (!fx.m.in_heap[id])
                do_push(&fx, id, quarter(&rng, 12), quarter(&rng, 6));
        } else if (kind < 7) {
            if (fx.m.count > 0)
                do_pop(&fx);
        } else {
            /* Find an id in the heap, starting from the random one. */
            for (uint32_t k = 0; k < MODEL_IDS && fx.m.count > 0; k++) {
                uint32_t cand = (id + k) % MODEL_IDS;
                if (!fx.m.in_heap[cand])
                    continue;
                double f = fx.m.f[cand], g = fx.m.g[cand];
                if (f > 0 && rng_below(&rng, 2)) {
                    double nf = f - quarter(&rng, 3);
                    if (nf >= f)
                        nf = f - 0.25;
                    if (nf < 0)
                        nf = 0;
                    do_decrease(&fx, cand, nf, quarter(&rng, 6));
                } else {
                    do_decrease(&fx, cand, f, g + quarter(&rng, 2));
                }
                break;
            }
        }
        check_consistent(&fx);
    }
    /* Drain: pops must come out in non-decreasing key order. */
    double last_f = -1, last_g = 0;
    while (fx.m.count > 0) {
        size_t before = fx.heap.size;
        pd_heap_entry top = fx.entries[0];
        do_pop(&fx);
        assert_int_equal(fx.heap.size, before - 1);
        assert_false(key_before(top.f, (double)top.g, last_f, last_g) && last_f >= 0);
        last_f = top.f;
        last_g = (double)top.g;
        check_consistent(&fx);
    }
}

static void test_random_stride1(void **state)
{
    run_random(1, 0x9E3779B97F4A7C15ull, 6000);
    run_random(1, 12345, 6000);
}

static void test_random_stride4(void **state)
{
    run_random(4, 0xC0FFEEull, 6000);
    run_random(4, 777, 6000);
}

static void test_equal_f_larger_g_first(void **state)
{
    fixture fx;
    fixture_init(&fx, 1);
    do_push(&fx, 0, 10.0, 1.0);
    do_push(&fx, 1, 10.0, 5.0);
    do_push(&fx, 2, 9.0, 0.0);
    do_push(&fx, 3, 10.0, 3.0);
    do_push(&fx, 4, 11.0, 9.0);
    check_consistent(&fx);
    static const uint32_t want[] = { 2, 1, 3, 0, 4 };
    for (size_t i = 0; i < 5; i++) {
        pd_heap_entry e = pd_heap_pop(&fx.heap);
        fx.m.in_heap[e.id] = 0;
        fx.m.count--;
        assert_int_equal(e.id, want[i]);
        check_consistent(&fx);
    }
}

static void test_decrease_moves_to_top(void **state)
{
    fixture fx;
    fixture_init(&fx, 4);
    for (uint32_t id = 0; id < 100; id++)
        do_push(&fx, id, 50.0 + id, 1.0);
    check_consistent(&fx);
    do_decrease(&fx, 99, 1.0, 1.0);
    check_consistent(&fx);
    assert_int_equal(fx.entries[0].id, 99);
    assert_int_equal(fx.pos[99 * 4], 0);
    do_pop(&fx);
    assert_int_equal(fx.entries[0].id, 0);
    check_consistent(&fx);
}

static void test_pop_single_and_refill(void **state)
{
    fixture fx;
    fixture_init(&fx, 1);
    do_push(&fx, 7, 3.0, 1.0);
    do_pop(&fx);
    assert_int_equal(fx.heap.size, 0);
    check_consistent(&fx);
    do_push(&fx, 7, 2.0, 1.0);
    do_push(&fx, 8, 1.0, 1.0);
    assert_int_equal(fx.entries[0].id, 8);
    check_consistent(&fx);
}

/*
 * pd_heap_decrease documents only "f must not increase". Keeping f and
 * lowering g moves the entry later in the order (larger g goes first), so the
 * heap must still be valid afterwards and pop the other entry first.
 */
static void test_decrease_equal_f_lower_g(void **state)
{
    fixture fx;
    fixture_init(&fx, 1);
    do_push(&fx, 0, 5.0, 3.0);
    do_push(&fx, 1, 5.0, 2.0);
    assert_int_equal(fx.entries[0].id, 0);
    do_decrease(&fx, 0, 5.0, 1.0);
    assert_true(pd_heap_is_valid(&fx.heap));
    do_pop(&fx);
    check_consistent(&fx);
}

static void test_is_valid_detects_damage(void **state)
{
    fixture fx;
    fixture_init(&fx, 1);
    for (uint32_t id = 0; id < 20; id++)
        do_push(&fx, id, (double)(20 - id), 0.0);
    assert_true(pd_heap_is_valid(&fx.heap));
    /* A wrong position entry. */
    uint32_t saved = fx.pos[fx.entries[3].id];
    fx.pos[fx.entries[3].id] = 4;
    assert_false(pd_heap_is_valid(&fx.heap));
    fx.pos[fx.entries[3].id] = saved;
    assert_true(pd_heap_is_valid(&fx.heap));
    /* A child better than its parent. */
    double saved_f = fx.entries[5].f;
    fx.entries[5].f = -1.0;
    assert_false(pd_heap_is_valid(&fx.heap));
    fx.entries[5].f = saved_f;
    assert_true(pd_heap_is_valid(&fx.heap));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_stride1),
        cmocka_unit_test(test_random_stride4),
        cmocka_unit_test(test_equal_f_larger_g_first),
        cmocka_unit_test(test_decrease_moves_to_top),
        cmocka_unit_test(test_pop_single_and_refill),
        cmocka_unit_test(test_decrease_equal_f_lower_g),
        cmocka_unit_test(test_is_valid_detects_damage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
