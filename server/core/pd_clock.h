/*
 * pd_clock.h - the one monotonic clock every layer times things with
 * (search and update durations, deadlines, replay times, queue waits):
 * CLOCK_MONOTONIC, so a wall-clock step never makes a duration negative.
 */
#ifndef PD_CLOCK_H
#define PD_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t pd_clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t pd_clock_us(void)
{
    return pd_clock_ns() / 1000u;
}

/* Microseconds since t0_ns (pd_clock_ns), rounded up: a search that ran at
 * all reports at least 1. */
static inline uint64_t pd_clock_us_since(uint64_t t0_ns)
{
    return (pd_clock_ns() - t0_ns + 999u) / 1000u;
}

#endif
