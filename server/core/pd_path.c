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

static size_t pd__merge_repeats(pd_point *pts, size_t n)
{
    /* A search's path has no repeats: it is only read, up to the first. */
    size_t i = 1;
    while (i < n && !pd__same_point(pts[i], pts[i - 1]))
        i++;
    size_t kept = i;
    for (; i < n; i++) {
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

    /* Each step's direction is worked out once and carried to the next
     * point (comparing both steps at every point did it twice: most of the
     * corners style's cost on a long path). pts[i] and pts[i + 1] are
     * still the originals when read: every write so far went below i. */
    int64_t ax, ay;
    pd__direction(pts[0], pts[1], &ax, &ay);
    size_t kept = 1;
    for (size_t i = 1; i + 1 < n; i++) {
        int64_t bx, by;
        pd__direction(pts[i], pts[i + 1], &bx, &by);
        if (bx != ax || by != ay)
            pts[kept++] = pts[i];
        ax = bx;
        ay = by;
    }
    pts[kept++] = pts[n - 1];
    return kept;
}
