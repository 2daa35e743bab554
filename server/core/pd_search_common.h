/*
 * pd_search_common.h - the small pieces A* (pd_search.c) and jump point
 * search (pd_jps.c) share: the diagonal step length, the octile and
 * Manhattan heuristics, the open-list key of an f value and the clock their
 * metrics are timed on; and the planners' array growth.
 * Internal to server/core.
 */
#ifndef PD_SEARCH_COMMON_H
#define PD_SEARCH_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "pd_clock.h"
#include "pd_search.h"

#define PD__SQRT2 1.41421356237309504880

/* Octile distance: the exact cost of an obstacle-free 8-connected path. */
static inline double pd__octile(int32_t dx, int32_t dy)
{
    dx = dx < 0 ? -dx : dx;
    dy = dy < 0 ? -dy : dy;
    return dx > dy ? dx + (PD__SQRT2 - 1.0) * dy : dy + (PD__SQRT2 - 1.0) * dx;
}

/* Manhattan distance: the exact cost of an obstacle-free 4-connected path. */
static inline double pd__manhattan(int32_t dx, int32_t dy)
{
    return (double)(dx < 0 ? -(int64_t)dx : dx) + (double)(dy < 0 ? -(int64_t)dy : dy);
}

/*
 * The open list (pd_radix.h) orders integer keys: f becomes
 * round(f * 2^PD__KEY_FRACTION_BITS). Distinct f on a uniform octile grid are
 * a + b*sqrt(2) for integers a, b and differ by at least about 1/(3|b|), far
 * above 2^-24 for any path on a PD_GRID_MAX_SIDE grid, so they keep their
 * order; equal f reached along different routes differ only by float
 * rounding (~1e-12) and mostly share a key, so ties stay ties. Two f closer
 * than 2^-24 (possible only with terrain costs) may come out in either
 * order, which can cost at most that much. The largest f (255 * sqrt(2) per
 * cell of a 16386^2 padded grid, ~1e11) times 2^24 stays below 2^64.
 */
#define PD__KEY_FRACTION_BITS 24

static inline uint64_t pd__f_key(double f)
{
    return (uint64_t)(f * (double)(1u << PD__KEY_FRACTION_BITS) + 0.5);
}

/*
 * Counts one more expansion if the budget (0: none) allows it, and asks the
 * caller's poll every PD_SEARCH_POLL_INTERVAL expansions. Returns PD_OK to
 * go on, or why the search stops: PD_BUDGET_EXCEEDED, or what the poll
 * returned. The space-time planner (pd_sipp.c) has its own parameters, so
 * this takes the three fields rather than a pd_search_params.
 */
static inline pd_status pd__count_expansion_with(uint64_t max_expansions, pd_search_poll_fn poll, void *poll_user,
                                                 uint64_t *expanded)
{
    if (max_expansions && *expanded >= max_expansions)
        return PD_BUDGET_EXCEEDED;
    ++*expanded;
    if (poll && (*expanded & (PD_SEARCH_POLL_INTERVAL - 1)) == 0)
        return poll(poll_user);
    return PD_OK;
}

static inline pd_status pd__count_expansion(const pd_search_params *p, uint64_t *expanded)
{
    return pd__count_expansion_with(p->max_expansions, p->poll, p->poll_user, expanded);
}

/* Grows *buf (doubling from 64) until it holds `need` items of `size`
 * bytes: the planner's scratch arrays (pd_sipp.c, pd_sipp_direct.c).
 * 0, or -1 with *buf unchanged. */
static inline int pd__grow_array(void **buf, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 64u;
    while (c < need)
        c *= 2u;
    void *b = realloc(*buf, c * size);
    if (!b)
        return -1;
    *buf = b;
    *cap = c;
    return 0;
}

#endif
