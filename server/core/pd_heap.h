/*
 * pd_heap.h - the open list: a d-ary min-heap with decrease-key.
 *
 * Entries are ordered by f, and among equal f by larger g (deeper nodes
 * first), which keeps A* from fanning out across the many equal-f plateaus of
 * octile grids. The heap records where each id sits so a shorter route to an
 * open node can move it up in place (decrease-key) instead of pushing a
 * duplicate.
 *
 * Where a position lives is up to the owner: pos(id) is pos_base[id * pos_stride].
 * The search keeps it inside its per-cell node record, so one cache line holds
 * everything a relaxation touches. PD_HEAP_ARITY was measured on the Moving AI
 * maps (arena2, den520d, Aftershock): 2 and 4 within noise of each other, 8
 * about 10% slower; 4 is kept for its shallower tree (four 16-byte children
 * share a cache line). Lazy deletion (duplicates instead of decrease-key)
 * was not measured.
 *
 * The heap never allocates; its owner sizes `entries` to the number of ids.
 */
#ifndef PD_HEAP_H
#define PD_HEAP_H

#include <stddef.h>
#include <stdint.h>

#ifndef PD_HEAP_ARITY
#define PD_HEAP_ARITY 4
#endif

/* 16 bytes, so four children of a 4-ary node share one cache line. g is only
 * the tie-breaker here (the search keeps the exact g per node), so float
 * precision is enough: misordering two nearly equal g values costs nothing
 * but an expansion order A* allows anyway. */
typedef struct pd_heap_entry {
    double f;
    float g;
    uint32_t id;
} pd_heap_entry;

typedef struct pd_heap {
    pd_heap_entry *entries;
    size_t size;
    uint32_t *pos_base;
    size_t pos_stride;
} pd_heap;

static inline int pd_heap_before(const pd_heap_entry *a, const pd_heap_entry *b)
{
    return a->f < b->f || (a->f == b->f && a->g > b->g);
}

static inline void pd_heap__place(pd_heap *h, size_t i, pd_heap_entry e)
{
    h->entries[i] = e;
    h->pos_base[(size_t)e.id * h->pos_stride] = (uint32_t)i;
}

static inline void pd_heap_sift_up(pd_heap *h, size_t i)
{
    pd_heap_entry e = h->entries[i];
    while (i > 0) {
        size_t parent = (i - 1) / PD_HEAP_ARITY;
        if (!pd_heap_before(&e, &h->entries[parent]))
            break;
        pd_heap__place(h, i, h->entries[parent]);
        i = parent;
    }
    pd_heap__place(h, i, e);
}

static inline void pd_heap_sift_down(pd_heap *h, size_t i)
{
    pd_heap_entry e = h->entries[i];
    for (;;) {
        size_t first = i * PD_HEAP_ARITY + 1;
        if (first >= h->size)
            break;
        size_t last = first + PD_HEAP_ARITY;
        if (last > h->size)
            last = h->size;
        size_t best = first;
        for (size_t c = first + 1; c < last; c++)
            if (pd_heap_before(&h->entries[c], &h->entries[best]))
                best = c;
        if (!pd_heap_before(&h->entries[best], &e))
            break;
        pd_heap__place(h, i, h->entries[best]);
        i = best;
    }
    pd_heap__place(h, i, e);
}

static inline void pd_heap_push(pd_heap *h, double f, double g, uint32_t id)
{
    pd_heap_entry e = { f, (float)g, id };
    h->entries[h->size] = e;
    pd_heap_sift_up(h, h->size++);
}

/* Removes and returns the best entry; the heap must not be empty. */
static inline pd_heap_entry pd_heap_pop(pd_heap *h)
{
    pd_heap_entry top = h->entries[0];
    if (--h->size > 0) {
        h->entries[0] = h->entries[h->size];
        pd_heap_sift_down(h, 0);
    }
    return top;
}

/* Gives the entry at heap index i a new (f, g) that is no worse than before
 * (f not higher). With equal f a lower g ranks later, so the entry may have to
 * move down as well as up. */
static inline void pd_heap_decrease(pd_heap *h, size_t i, double f, double g)
{
    const uint32_t id = h->entries[i].id;
    h->entries[i].f = f;
    h->entries[i].g = (float)g;
    pd_heap_sift_up(h, i);
    if (h->pos_base[(size_t)id * h->pos_stride] == i)
        pd_heap_sift_down(h, i);
}

/* Checks the heap order and position map (tests and debug builds). */
int pd_heap_is_valid(const pd_heap *h);

#endif
