/*
 * pd_path.c - waypoint compression for cell paths (see pd_path.h).
 *
 * Works in place in two passes: the first merges back-to-back repeats so
 * every remaining step has a direction, the second keeps only the points
 * where the direction changes. Both passes write at an index no greater than
 * the one they read, so the array never needs a copy.
 */
#include "pd_path.h"

#include <stdint.h>

static int pd__same_point(pd_point a, pd_point b)
{
    return a.x == b.x && a.y == b.y;
}

static uint64_t pd__gcd(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

/* A step's direction as its smallest integer vector: (2,-4) -> (1,-2).
 * Differences of int32 coordinates fit in int64, and dividing by the gcd
 * compares directions exactly, with no products that could overflow. */
static void pd__direction(pd_point from, pd_point to, int64_t *dx, int64_t *dy)
{
    int64_t x = (int64_t)to.x - from.x, y = (int64_t)to.y - from.y;
    /* A step to a neighbour cell - every step of a cell path - is its own
     * smallest vector: no divisions (they were most of the corners style's
     * cost on long paths). */
    if (x >= -1 && x <= 1 && y >= -1 && y <= 1) {
        *dx = x;
        *dy = y;
        return;
    }
    int64_t g = (int64_t)pd__gcd((uint64_t)(x < 0 ? -x : x), (uint64_t)(y < 0 ? -y : y));
    *dx = x / g;
    *dy = y / g;
}

/* Both steps are non-zero: repeats are merged before this is asked. */
static int pd__same_direction(pd_point from_a, pd_point to_a, pd_point from_b, pd_point to_b)
{
    int64_t ax, ay, bx, by;
    pd__direction(from_a, to_a, &ax, &ay);
    pd__direction(from_b, to_b, &bx, &by);
    return ax == bx && ay == by;
}

static size_t pd__merge_repeats(pd_point *pts, size_t n)
{
    size_t kept = 1;
    for (size_t i = 1; i < n; i++) {
        if (!pd__same_point(pts[i], pts[kept - 1]))
            pts[kept++] = pts[i];
    }
    return kept;
}

size_t pd_path_corners(pd_point *pts, size_t n)
{
    if (n < 2)
        return n;
    n = pd__merge_repeats(pts, n);
    if (n < 3)
        return n;

    /* prev holds the original point before pts[i]: the slot it came from may
     * already have been overwritten by a kept point. */
    pd_point prev = pts[0];
    size_t kept = 1;
    for (size_t i = 1; i + 1 < n; i++) {
        pd_point here = pts[i];
        if (!pd__same_direction(prev, here, here, pts[i + 1]))
            pts[kept++] = here;
        prev = here;
    }
    pts[kept++] = pts[n - 1];
    return kept;
}
