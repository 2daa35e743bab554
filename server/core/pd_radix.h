/*
 * pd_radix.h - jump point search's open list: a radix heap, a priority queue
 * for keys that never fall below the last key popped. Also the open-list
 * entry and the growable entry array that A*'s ring (pd_ring.h) uses.
 *
 * A search with a consistent heuristic pops f-values in non-decreasing order,
 * so it can use a monotone queue. A radix heap keeps entries in 65 buckets by
 * the highest bit in which their key differs from the last key popped: bucket
 * 0 holds keys equal to it, bucket b keys that first differ in bit b-1. A pop
 * takes from bucket 0; only when that is empty does it find the smallest key
 * in the lowest non-empty bucket and spread that bucket over the lower ones.
 * Each entry moves down at most 64 times (about 3 times in A* on the Dragon
 * Age maps, measured). It replaced a 4-ary heap whose sift-down was half of
 * A*'s time; A* has since moved on to the ring, whose window a jump cannot
 * respect (a jump raises f by up to twice the map's side), so JPS stays here.
 *
 * Bucket 0 is a stack, so among equal keys the newest entry goes first: the
 * successor just generated along a straight run toward the goal is expanded
 * next, which is the tie-breaking toward deeper nodes octile grids want.
 *
 * There is no decrease-key: the search pushes the node again with its lower
 * key and skips the older entry when it comes out (an entry carries a tag
 * for the search's own use; JPS tells stale entries by its records' expanded
 * bit and lets the tag carry the direction a jump point was reached in,
 * pd_jps.c). Each bucket is an array, so spreading a
 * bucket reads it front to back instead of chasing list links (which cost a
 * quarter of A*'s time in a linked-list version). The arrays grow by doubling
 * and are kept across searches; each keeps the size of its own busiest moment,
 * which is small for JPS, whose open list holds jump points only.
 */
#ifndef PD_RADIX_H
#define PD_RADIX_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define PD_RADIX_BUCKETS 65
/* A bucket's first capacity; doubling takes it from there. */
#define PD_RADIX_MIN_BUCKET 64u
/* Entries one bucket can hold (uint32_t counts). */
#define PD_RADIX_MAX_BUCKET (UINT32_MAX / 2u)

typedef struct pd_radix_entry {
    uint64_t key;
    uint32_t id;
    uint32_t tag;   /* the caller's; lets it tell a current entry from a stale one */
} pd_radix_entry;

typedef struct pd_radix_bucket {
    pd_radix_entry *e;
    uint32_t n;
    uint32_t cap;
} pd_radix_bucket;

typedef struct pd_radix {
    pd_radix_bucket b[PD_RADIX_BUCKETS];
    uint64_t nonempty;     /* bit k-1 set when bucket k (1..64) holds entries */
    uint64_t last;         /* the last key popped: no key below it may be pushed */
    size_t size;           /* entries in all buckets */
    size_t bytes;          /* what the buckets' arrays hold: pd_radix_footprint,
                              kept as they grow rather than summed over the
                              buckets after every search (the workers' trim) */
} pd_radix;

/* Empties the queue and sets the smallest key it will accept; keeps the arrays. */
static inline void pd_radix_reset(pd_radix *q, uint64_t first_key)
{
    for (int k = 0; k < PD_RADIX_BUCKETS; k++)
        q->b[k].n = 0;
    q->nonempty = 0;
    q->last = first_key;
    q->size = 0;
}

static inline void pd_radix_free(pd_radix *q)
{
    for (int k = 0; k < PD_RADIX_BUCKETS; k++) {
        free(q->b[k].e);
        q->b[k].e = NULL;
        q->b[k].n = q->b[k].cap = 0;
    }
    q->bytes = 0;
}

/* Bytes the queue's arrays hold. */
static inline size_t pd_radix_footprint(const pd_radix *q)
{
    return q->bytes;
}

/* Without branches: whether a key equals the last one is anyone's guess. */
static inline int pd_radix_bucket_of(uint64_t key, uint64_t last)
{
    const uint64_t d = key ^ last;
    return 64 - __builtin_clzll(d | 1u) - (d == 0);
}

/* Doubles bucket k; returns 0, or -1 when it cannot grow. */
static inline int pd_radix__grow(pd_radix_bucket *bk)
{
    if (bk->cap >= PD_RADIX_MAX_BUCKET)
        return -1;
    uint32_t cap = bk->cap ? bk->cap * 2u : PD_RADIX_MIN_BUCKET;
    if (cap > PD_RADIX_MAX_BUCKET)
        cap = PD_RADIX_MAX_BUCKET;
    pd_radix_entry *e = realloc(bk->e, (size_t)cap * sizeof *e);
    if (!e)
        return -1;
    bk->e = e;
    bk->cap = cap;
    return 0;
}

static inline int pd_radix__append(pd_radix *q, int k, pd_radix_entry entry)
{
    pd_radix_bucket *bk = &q->b[k];
    if (bk->n == bk->cap) {
        const uint32_t before = bk->cap;
        if (pd_radix__grow(bk) != 0)
            return -1;
        q->bytes += (size_t)(bk->cap - before) * sizeof(pd_radix_entry);
    }
    bk->e[bk->n++] = entry;
    q->nonempty |= (uint64_t)(k != 0) << ((k - 1) & 63); /* bucket 0 has no bit */
    return 0;
}

/*
 * Queues (key, id, tag). Returns 0, or -1 when a bucket cannot grow. A key
 * below the last one popped is queued as that key: the search only produces
 * such keys from rounding noise on equal f.
 */
static inline int pd_radix_push(pd_radix *q, uint64_t key, uint32_t id, uint32_t tag)
{
    if (key < q->last)
        key = q->last;
    pd_radix_entry entry = { key, id, tag };
    if (pd_radix__append(q, pd_radix_bucket_of(key, q->last), entry) != 0)
        return -1;
    q->size++;
    return 0;
}

/*
 * Removes and returns an entry with the smallest key; the queue must not be
 * empty. Returns -1 (and leaves *out unset) only when spreading a bucket needs
 * memory it cannot get; the queue is then no longer usable until a reset.
 */
static inline int pd_radix_pop(pd_radix *q, pd_radix_entry *out)
{
    pd_radix_bucket *b0 = &q->b[0];
    if (b0->n == 0) {
        int k = __builtin_ctzll(q->nonempty) + 1;
        pd_radix_bucket *bk = &q->b[k];
        if (bk->n == 1) {
            /* Spreading would move it to bucket 0 and pop it at once: in
             * jump point search most buckets spread hold one entry. */
            *out = bk->e[0];
            q->last = out->key;
            q->nonempty &= ~(1ull << (k - 1));
            bk->n = 0;
            q->size--;
            return 0;
        }
        uint64_t min = bk->e[0].key;
        for (uint32_t i = 1; i < bk->n; i++)
            if (bk->e[i].key < min)
                min = bk->e[i].key;
        q->last = min;
        q->nonempty &= ~(1ull << (k - 1));
        /* Every key here differs from min below bit k-1: all move down. */
        for (uint32_t i = 0; i < bk->n; i++)
            if (pd_radix__append(q, pd_radix_bucket_of(bk->e[i].key, min), bk->e[i]) != 0)
                return -1;
        bk->n = 0;
    }
    *out = b0->e[--b0->n];
    q->size--;
    return 0;
}

#endif
