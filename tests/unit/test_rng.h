/*
 * test_rng.h - the tests' random numbers: xorshift64 from a fixed seed, so a
 * failing random case reproduces on every machine and every run.
 */
#ifndef TEST_RNG_H
#define TEST_RNG_H

#include <stdint.h>

static inline uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* Uniform enough in [0, n) for test cases; n > 0. */
static inline int32_t rng_below(uint64_t *s, int32_t n)
{
    return (int32_t)(rng_next(s) % (uint64_t)n);
}

#endif
