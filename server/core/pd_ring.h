/*
 * pd_ring.h - A*'s open list: a ring of f buckets over a sliding window.
 *
 * In A* with a consistent heuristic, f never falls below the f being
 * expanded, and a successor's f exceeds its parent's by at most its step cost
 * plus the step's length (the heuristic changes by no more than the length):
 * 2*sqrt(2) on a uniform octile grid. So every key pushed lies in a window
 * [last, last + window] above the last key popped, and a ring of fixed-width
 * buckets that covers the window holds the whole open list. An entry goes into
 * the bucket of its key, once; when the current f level runs out, the lowest
 * bucket that holds entries gives up those with its smallest key, which
 * become the next level (buckets are narrow, so they rarely hold more than one
 * or two distinct keys). The level is a stack, and a key equal to the level's
 * goes straight onto it: among equal f the successor just generated along a
 * run toward the goal is expanded next.
 *
 * Measured against the radix heap (pd_radix.h), which A* used first: the
 * radix heap moved each entry about three times between its buckets (perf:
 * a third of A*'s time); this ring moves it at most once, onto the level
 * stack, and A* runs 20-25% faster on the Dragon Age maps. Jump point search keeps the
 * radix heap: a jump can raise f by up to twice the map's side, too wide a
 * window for a ring.
 *
 * There is no decrease-key: the search pushes a node again with its lower key
 * and skips the older entry when it comes out (entries carry a tag the search
 * compares with its node's). Bucket arrays grow by doubling and are kept
 * across searches.
 */
#ifndef PD_RING_H
#define PD_RING_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pd_radix.h"

/* Buckets are 2^PD_RING_MIN_SHIFT keys wide or wider: 2^-5 in f with the
 * search's 2^24 keys per unit, narrow enough that a bucket seldom holds two
 * distinct f on an octile grid. */
#define PD_RING_MIN_SHIFT 19
/* At most this many buckets; wider windows (terrain costs) get wider buckets. */
#define PD_RING_MAX_BUCKETS 4096u

typedef struct pd_ring {
    pd_radix_bucket *b;   /* nb buckets; entry arrays as in the radix heap */
    uint64_t *bits;       /* bit i set when bucket i may hold entries */
    uint32_t nb;          /* buckets allocated (a power of two) */
    uint32_t mask;        /* buckets in use this search, minus one */
    unsigned shift;       /* a key's bucket is (key >> shift) & mask */
    pd_radix_bucket level;/* entries whose key is `last`, newest on top */
    uint64_t last;        /* the key of the current level: no key below it may be pushed */
    uint64_t cur;         /* key >> shift of the lowest bucket that may hold entries */
    size_t size;          /* entries in the level and all buckets */
} pd_ring;

/*
 * Empties the ring for a search whose first key is first_key and whose pushes
 * never exceed the last key popped by more than window_keys. Keeps the bucket
 * arrays. Returns 0, or -1 when it cannot allocate the buckets.
 */
static inline int pd_ring_reset(pd_ring *q, uint64_t first_key, uint64_t window_keys)
{
    /* Empty the buckets the last search left entries in. */
    for (uint32_t w = 0; w < q->nb / 64; w++)
        for (uint64_t word = q->bits[w]; word; word &= word - 1)
            q->b[w * 64 + (uint32_t)__builtin_ctzll(word)].n = 0;

    unsigned shift = PD_RING_MIN_SHIFT;
    while ((window_keys >> shift) + 2 > PD_RING_MAX_BUCKETS)
        shift++;
    uint32_t nb = 64;
    while (nb < (window_keys >> shift) + 2)
        nb *= 2;
    if (nb > q->nb) {
        pd_radix_bucket *b = realloc(q->b, (size_t)nb * sizeof *b);
        if (!b)
            return -1;
        memset(b + q->nb, 0, (size_t)(nb - q->nb) * sizeof *b);
        q->b = b;
        uint64_t *bits = realloc(q->bits, (size_t)nb / 64 * sizeof *bits);
        if (!bits)
            return -1;
        q->bits = bits;
        q->nb = nb;
    }
    memset(q->bits, 0, (size_t)q->nb / 64 * sizeof *q->bits);
    q->mask = nb - 1;
    q->shift = shift;
    q->last = first_key;
    q->cur = first_key >> shift;
    q->level.n = 0;
    q->size = 0;
    return 0;
}

static inline void pd_ring_free(pd_ring *q)
{
    for (uint32_t i = 0; i < q->nb; i++)
        free(q->b[i].e);
    free(q->b);
    free(q->bits);
    free(q->level.e);
    memset(q, 0, sizeof *q);
}

/* Bytes the ring holds. */
static inline size_t pd_ring_footprint(const pd_ring *q)
{
    size_t bytes = (size_t)q->nb * sizeof(pd_radix_bucket) + (size_t)q->nb / 8 +
                   (size_t)q->level.cap * sizeof(pd_radix_entry);
    for (uint32_t i = 0; i < q->nb; i++)
        bytes += (size_t)q->b[i].cap * sizeof(pd_radix_entry);
    return bytes;
}

static inline int pd_ring__append(pd_radix_bucket *bk, pd_radix_entry e)
{
    if (bk->n == bk->cap && pd_radix__grow(bk) != 0)
        return -1;
    bk->e[bk->n++] = e;
    return 0;
}

/*
 * Queues (key, id, tag). Returns 0, or -1 when an array cannot grow. A key
 * below the last one popped is queued as that key: the search only produces
 * such keys from rounding noise on equal f. A key above last + window breaks
 * the ring; the caller's window must be a true bound.
 */
static inline int pd_ring_push(pd_ring *q, uint64_t key, uint32_t id, uint32_t tag)
{
    if (key < q->last)
        key = q->last;
    const pd_radix_entry e = { key, id, tag };
    if (key == q->last) {
        if (pd_ring__append(&q->level, e) != 0)
            return -1;
    } else {
        const uint32_t i = (uint32_t)(key >> q->shift) & q->mask;
        if (pd_ring__append(&q->b[i], e) != 0)
            return -1;
        q->bits[i >> 6] |= 1ull << (i & 63);
    }
    q->size++;
    return 0;
}

/*
 * Removes an entry with the smallest key, the newest among equal keys, into
 * *out. The ring must not be empty. Returns -1 (and leaves *out unset) only
 * when the level stack needs memory it cannot get.
 */
static inline int pd_ring_pop(pd_ring *q, pd_radix_entry *out)
{
    if (q->level.n == 0) {
        /* The next level: the lowest bucket with entries (one exists). */
        uint32_t i = (uint32_t)q->cur & q->mask;
        uint32_t w = i >> 6;
        uint64_t word = q->bits[w] & (~0ull << (i & 63));
        while (!word) {
            w = (w + 1) & (q->mask >> 6);
            word = q->bits[w];
        }
        const uint32_t j = (w << 6) + (uint32_t)__builtin_ctzll(word);
        q->cur += (uint64_t)((j - i) & q->mask);
        pd_radix_bucket *bk = &q->b[j];
        uint64_t min = bk->e[0].key;
        for (uint32_t k = 1; k < bk->n; k++)
            if (bk->e[k].key < min)
                min = bk->e[k].key;
        q->last = min;
        /* Its entries with that key go onto the level stack in push order;
         * the rest stay in the bucket, in order. */
        uint32_t kept = 0;
        for (uint32_t k = 0; k < bk->n; k++) {
            if (bk->e[k].key != min)
                bk->e[kept++] = bk->e[k];
            else if (pd_ring__append(&q->level, bk->e[k]) != 0)
                return -1;
        }
        bk->n = kept;
        if (kept == 0)
            q->bits[j >> 6] &= ~(1ull << (j & 63));
    }
    q->size--;
    *out = q->level.e[--q->level.n];
    return 0;
}

#endif
