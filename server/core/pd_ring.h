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
 * stack, and A* runs 15-25% faster on the Dragon Age maps (about 15% with
 * the chunked buckets below, which cost a little speed for bounded memory).
 * Jump point search keeps the radix heap: a jump can raise f by up to twice
 * the map's side, too wide a window for a ring.
 *
 * There is no decrease-key: the search pushes a node again with its lower key
 * and skips the older entry when it comes out (entries carry a tag the search
 * compares with its node's).
 *
 * Memory: a bucket is a list of 64-entry chunks drawn from one pool shared by
 * all buckets, and a bucket's chunks return to the pool when the bucket is
 * emptied. The ring so holds about as many entries as are open at the worst
 * moment of a search. (Buckets as separate growing arrays each kept the
 * capacity of their own busiest moment; over the Moving AI set that summed to
 * 178 MB for one context.) The pool and the level stack grow by doubling and
 * are kept across searches.
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
/* Entries per chunk: 1 KiB, read front to back when a bucket is emptied. */
#define PD_RING_CHUNK 64u
/* Chunk indices are uint32_t; this one means "none". */
#define PD_RING_NIL UINT32_MAX
#define PD_RING_MAX_CHUNKS (UINT32_MAX / 2u)

typedef struct pd_ring_chunk {
    pd_radix_entry e[PD_RING_CHUNK];
    uint32_t n;
    uint32_t next;        /* next chunk of the bucket, or of the free list */
} pd_ring_chunk;

typedef struct pd_ring_list {
    uint32_t head, tail;  /* chunks, PD_RING_NIL when empty; entries go in at the tail */
} pd_ring_list;

typedef struct pd_ring {
    pd_ring_list *b;      /* nb buckets */
    uint64_t *bits;       /* bit i set when bucket i holds entries */
    uint32_t nb;          /* buckets allocated (a power of two, at least 64) */
    uint32_t mask;        /* buckets in use this search, minus one */
    unsigned shift;       /* a key's bucket is (key >> shift) & mask */
    pd_ring_chunk *pool;  /* every bucket's chunks */
    uint32_t pool_cap;    /* chunks allocated */
    uint32_t pool_used;   /* chunks handed out since the last reset */
    uint32_t free_head;   /* chunks returned by emptied buckets */
    pd_radix_bucket level;/* entries whose key is `last`, newest on top */
    uint64_t last;        /* the key of the current level: no key below it may be pushed */
    uint64_t cur;         /* key >> shift of the lowest bucket that may hold entries */
    size_t size;          /* entries in the level and all buckets */
} pd_ring;

/*
 * Empties the ring for a search whose first key is first_key and whose pushes
 * never exceed the last key popped by more than window_keys. Keeps the pool
 * and the level stack. Returns 0, or -1 when it cannot allocate the buckets.
 */
static inline int pd_ring_reset(pd_ring *q, uint64_t first_key, uint64_t window_keys)
{
    unsigned shift = PD_RING_MIN_SHIFT;
    while ((window_keys >> shift) + 2 > PD_RING_MAX_BUCKETS)
        shift++;
    uint32_t nb = 64;
    while (nb < (window_keys >> shift) + 2)
        nb *= 2;
    if (nb > q->nb) {
        pd_ring_list *b = realloc(q->b, (size_t)nb * sizeof *b);
        if (!b)
            return -1;
        q->b = b;
        uint64_t *bits = realloc(q->bits, (size_t)nb / 64 * sizeof *bits);
        if (!bits)
            return -1;
        q->bits = bits;
        q->nb = nb;
    }
    for (uint32_t i = 0; i < nb; i++)
        q->b[i].head = q->b[i].tail = PD_RING_NIL;
    memset(q->bits, 0, (size_t)nb / 64 * sizeof *q->bits);
    q->mask = nb - 1;
    q->shift = shift;
    q->pool_used = 0;
    q->free_head = PD_RING_NIL;
    q->level.n = 0;
    q->last = first_key;
    q->cur = first_key >> shift;
    q->size = 0;
    return 0;
}

static inline void pd_ring_free(pd_ring *q)
{
    free(q->b);
    free(q->bits);
    free(q->pool);
    free(q->level.e);
    memset(q, 0, sizeof *q);
}

/* Bytes the ring holds. */
static inline size_t pd_ring_footprint(const pd_ring *q)
{
    return (size_t)q->nb * sizeof(pd_ring_list) + (size_t)q->nb / 8 +
           (size_t)q->pool_cap * sizeof(pd_ring_chunk) + (size_t)q->level.cap * sizeof(pd_radix_entry);
}

/* A chunk from the free list or the pool, or PD_RING_NIL when the pool
 * cannot grow. */
static inline uint32_t pd_ring__chunk(pd_ring *q)
{
    uint32_t c = q->free_head;
    if (c != PD_RING_NIL) {
        q->free_head = q->pool[c].next;
    } else {
        if (q->pool_used == q->pool_cap) {
            if (q->pool_cap >= PD_RING_MAX_CHUNKS)
                return PD_RING_NIL;
            uint32_t cap = q->pool_cap ? q->pool_cap * 2u : 64u;
            pd_ring_chunk *pool = realloc(q->pool, (size_t)cap * sizeof *pool);
            if (!pool)
                return PD_RING_NIL;
            q->pool = pool;
            q->pool_cap = cap;
        }
        c = q->pool_used++;
    }
    q->pool[c].n = 0;
    q->pool[c].next = PD_RING_NIL;
    return c;
}

/* Appends e to bucket i; returns 0, or -1 when the pool cannot grow. */
static inline int pd_ring__append(pd_ring *q, uint32_t i, pd_radix_entry e)
{
    pd_ring_list *l = &q->b[i];
    uint32_t t = l->tail;
    if (t == PD_RING_NIL || q->pool[t].n == PD_RING_CHUNK) {
        uint32_t c = pd_ring__chunk(q);
        if (c == PD_RING_NIL)
            return -1;
        if (t == PD_RING_NIL) {
            l->head = c;
            q->bits[i >> 6] |= 1ull << (i & 63);
        } else {
            q->pool[t].next = c;
        }
        l->tail = t = c;
    }
    q->pool[t].e[q->pool[t].n++] = e;
    return 0;
}

static inline int pd_ring__level_push(pd_ring *q, pd_radix_entry e)
{
    pd_radix_bucket *l = &q->level;
    if (l->n == l->cap && pd_radix__grow(l) != 0)
        return -1;
    l->e[l->n++] = e;
    return 0;
}

/*
 * Queues (key, id, tag). Returns 0, or -1 when memory runs out. A key below
 * the last one popped is queued as that key: the search only produces such
 * keys from rounding noise on equal f. A key above last + window breaks the
 * ring; the caller's window must be a true bound.
 */
static inline int pd_ring_push(pd_ring *q, uint64_t key, uint32_t id, uint32_t tag)
{
    if (key < q->last)
        key = q->last;
    const pd_radix_entry e = { key, id, tag };
    if (key == q->last) {
        if (pd_ring__level_push(q, e) != 0)
            return -1;
    } else if (pd_ring__append(q, (uint32_t)(key >> q->shift) & q->mask, e) != 0) {
        return -1;
    }
    q->size++;
    return 0;
}

/*
 * Removes an entry with the smallest key, the newest among equal keys, into
 * *out. The ring must not be empty. Returns -1 (and leaves *out unset) only
 * when memory runs out; the ring then needs a reset.
 */
static inline int pd_ring_pop(pd_ring *q, pd_radix_entry *out)
{
    if (q->level.n == 0) {
        /* The next level: the lowest bucket with entries (one exists). */
        const uint32_t i = (uint32_t)q->cur & q->mask;
        uint32_t w = i >> 6;
        uint64_t word = q->bits[w] & (~0ull << (i & 63));
        while (!word) {
            w = (w + 1) & (q->mask >> 6);
            word = q->bits[w];
        }
        const uint32_t j = (w << 6) + (uint32_t)__builtin_ctzll(word);
        q->cur += (uint64_t)((j - i) & q->mask);
        const uint32_t first = q->b[j].head;
        uint64_t min = UINT64_MAX;
        for (uint32_t c = first; c != PD_RING_NIL; c = q->pool[c].next)
            for (uint32_t k = 0; k < q->pool[c].n; k++)
                if (q->pool[c].e[k].key < min)
                    min = q->pool[c].e[k].key;
        q->last = min;
        /* Entries with that key go onto the level stack in push order; the
         * rest go back into the emptied bucket, in order, each chunk
         * returning to the pool once read. */
        q->b[j].head = q->b[j].tail = PD_RING_NIL;
        q->bits[j >> 6] &= ~(1ull << (j & 63));
        for (uint32_t c = first; c != PD_RING_NIL;) {
            for (uint32_t k = 0; k < q->pool[c].n; k++) {
                const pd_radix_entry e = q->pool[c].e[k];
                if ((e.key == min ? pd_ring__level_push(q, e) : pd_ring__append(q, j, e)) != 0)
                    return -1;
            }
            const uint32_t next = q->pool[c].next;
            q->pool[c].next = q->free_head;
            q->free_head = c;
            c = next;
        }
    }
    q->size--;
    *out = q->level.e[--q->level.n];
    return 0;
}

#endif
