/*
 * test_index.c - pd_index: its hash is FNV-1a 64 (checked against the
 * published test vectors, which caught an offset basis missing a digit),
 * and the table finds, adds and removes names, backward-shift deletion
 * keeping every other name reachable.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pd_index.h"

/* From the FNV reference's test suite (www.isthe.com/chongo/tech/comp/fnv,
 * "FNV-1a 64 bit"). */
static void test_hash_is_fnv1a_64(void **state)
{
    (void)state;
    assert_true(pd_index_hash("") == (size_t)0xcbf29ce484222325ull);
    assert_true(pd_index_hash("a") == (size_t)0xaf63dc4c8601ec8cull);
    assert_true(pd_index_hash("b") == (size_t)0xaf63df4c8601f1a5ull);
    assert_true(pd_index_hash("foobar") == (size_t)0x85944171f73967e8ull);
}

/* Bytes are hashed unsigned: a name with a byte above 0x7f hashes as the
 * byte's value, not a sign-extended one. */
static void test_hash_reads_bytes_unsigned(void **state)
{
    (void)state;
    uint64_t h = 14695981039346656037ull;
    h = (h ^ 0xe9u) * 1099511628211ull;
    assert_true(pd_index_hash("\xe9") == (size_t)h);
}

#define N_NAMES 200

typedef struct names {
    char name[N_NAMES][16];
    int hole[N_NAMES];
} names;

static const char *name_of(const void *ctx, uint32_t e)
{
    const names *n = ctx;
    return n->hole[e] ? NULL : n->name[e];
}

static void test_find_add_remove(void **state)
{
    (void)state;
    names *n = calloc(1, sizeof *n);
    assert_non_null(n);
    for (int i = 0; i < N_NAMES; i++)
        snprintf(n->name[i], sizeof n->name[i], "scene-%d", i);
    assert_int_equal(pd_index_cap_for(0), PD_INDEX_MIN_CAP);
    size_t cap = pd_index_cap_for(N_NAMES);
    assert_true(cap >= 2 * N_NAMES);
    assert_int_equal(cap & (cap - 1), 0);

    uint64_t work = 0;
    uint32_t *slots = pd_index_build(cap, N_NAMES, name_of, n, &work);
    assert_non_null(slots);
    assert_true(work >= N_NAMES);
    for (uint32_t e = 0; e < N_NAMES; e++) {
        size_t s = pd_index_slot(slots, cap, n->name[e], name_of, n, NULL);
        assert_int_equal(slots[s], e + 1);
    }
    size_t s = pd_index_slot(slots, cap, "absent", name_of, n, NULL);
    assert_int_equal(slots[s], 0);

    /* Remove every third name; the rest stay found, the removed ones not. */
    for (uint32_t e = 0; e < N_NAMES; e += 3) {
        size_t at = pd_index_slot(slots, cap, n->name[e], name_of, n, NULL);
        assert_int_equal(slots[at], e + 1);
        pd_index_remove(slots, cap, at, name_of, n);
        n->hole[e] = 1;
    }
    for (uint32_t e = 0; e < N_NAMES; e++) {
        size_t at = pd_index_slot(slots, cap, n->name[e], name_of, n, NULL);
        assert_int_equal(slots[at], e % 3 == 0 ? 0 : e + 1);
    }
    free(slots);
    free(n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hash_is_fnv1a_64),
        cmocka_unit_test(test_hash_reads_bytes_unsigned),
        cmocka_unit_test(test_find_add_remove),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
