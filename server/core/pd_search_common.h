/*
 * pd_search_common.h - the small pieces A* (pd_search.c) and jump point
 * search (pd_jps.c) share: the diagonal step length, the octile heuristic
 * and the clock their metrics are timed on. Internal to server/core.
 */
#ifndef PD_SEARCH_COMMON_H
#define PD_SEARCH_COMMON_H

#include <stdint.h>
#include <time.h>

#define PD__SQRT2 1.41421356237309504880

/* Octile distance: the exact cost of an obstacle-free 8-connected path. */
static inline double pd__octile(int32_t dx, int32_t dy)
{
    dx = dx < 0 ? -dx : dx;
    dy = dy < 0 ? -dy : dy;
    return dx > dy ? dx + (PD__SQRT2 - 1.0) * dy : dy + (PD__SQRT2 - 1.0) * dx;
}

static inline uint64_t pd__now_micros(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

#endif
