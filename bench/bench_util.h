/*
 * bench_util.h - what every benchmark needs besides pathd: a fixed-seed
 * random generator (xorshift64*, so a run's inputs are the same each time)
 * and a monotonic clock.
 */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include <stdint.h>
#include <time.h>

/* The generator's state: a benchmark may reseed it (any value but 0). */
static uint64_t bench_rng = 0x2545F4914F6CDD1Dull;

static inline uint32_t bench_rand(void)
{
    bench_rng ^= bench_rng >> 12;
    bench_rng ^= bench_rng << 25;
    bench_rng ^= bench_rng >> 27;
    return (uint32_t)((bench_rng * 0x2545F4914F6CDD1Dull) >> 32);
}

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
