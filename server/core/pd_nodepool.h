/*
 * pd_nodepool.h - per-cell search records that exist only where a search has
 * been: the memory of A* (pd_search.c), jump point search (pd_jps.c) and the
 * per-request blockers grows with the area searched, not with the map.
 *
 * Cells are grouped in blocks of PD_NODEPOOL_BLOCK_CELLS consecutive padded
 * indices (part of one grid row). A directory holds one pointer per block,
 * NULL until a search first touches a cell of it; the block then comes from
 * the current slab, zeroed. Records carry the generation of the search that
 * last wrote them (the caller's layout; 0 is never a current generation), so
 * a new search bumps the generation and clears nothing. The directory and the
 * blocks are indexed by cell number alone, so grids of any shape share them.
 *
 * Slabs (PD_NODEPOOL_SLAB_BYTES, from mmap) rather than one malloc per block:
 * a slab handed back with munmap really leaves the process, where freed heap
 * chunks mostly stay in the allocator's arenas. pd_nodepool_trim hands back
 * the newest slabs first - those of the search that grew the pool last - and
 * clears the directory entries that pointed into them.
 *
 * Modelled on Warthog's node pool (one pointer per block of cells, blocks on
 * first touch) and Detour's search generation. Not thread-safe: one pool
 * belongs to one search context, which belongs to one thread.
 */
#ifndef PD_NODEPOOL_H
#define PD_NODEPOOL_H

#include <stddef.h>
#include <stdint.h>

/* Cells per block: 256 records of 16 bytes fill a 4 KiB page, and a block
 * covers a run of a row, so a straight scan or a row of neighbours mostly
 * stays in it. Measured on the Moving AI set against 64-cell blocks: the
 * directory is a quarter the size and A* misses L1 about a fifth less. */
#define PD_NODEPOOL_BLOCK_SHIFT 8
#define PD_NODEPOOL_BLOCK_CELLS (1u << PD_NODEPOOL_BLOCK_SHIFT)
/* Bytes per slab: big enough that a large search makes few mmap calls,
 * small enough that trimming can stop close to the retained size. */
#define PD_NODEPOOL_SLAB_BYTES (128u * 1024u)

typedef struct pd_nodepool {
    unsigned char **dir;     /* block i of cells (i << SHIFT ...), or NULL */
    size_t dir_len;          /* blocks the directory covers */
    unsigned char **slabs;   /* every slab, oldest first */
    uint32_t *owner;         /* per slab, per block handed out: its directory index */
    size_t n_slabs, slabs_cap;
    size_t slab_used;        /* blocks handed out from the newest slab */
    size_t block_bytes;      /* bytes of one block (the caller's records) */
    size_t blocks_per_slab;
    uint32_t gen;            /* the current search's generation, 1.. */
} pd_nodepool;

/* An empty pool whose blocks are block_bytes each (at most a slab).
 * Allocates nothing. */
void pd_nodepool_init(pd_nodepool *p, size_t block_bytes);
void pd_nodepool_free(pd_nodepool *p);

/* Starts a search over cells 0 .. cells-1: the directory grows to cover them
 * (new entries NULL) and the generation moves on. When it wraps past
 * UINT32_MAX every block is zeroed once and the generation restarts at 1.
 * Returns 0, or -1 when the directory cannot grow (the pool is unchanged). */
int pd_nodepool_begin(pd_nodepool *p, size_t cells);

/* The zeroed block for a cell whose directory entry is still NULL; NULL when
 * no slab can be had. Called by pd_nodepool_block only. */
unsigned char *pd_nodepool__grow(pd_nodepool *p, size_t block);

/* The block holding cell (its record is number cell & (BLOCK_CELLS - 1)), created on
 * first touch; NULL on allocation failure. cell must be below the cells
 * given to pd_nodepool_begin. */
static inline unsigned char *pd_nodepool_block(pd_nodepool *p, uint32_t cell)
{
    unsigned char *b = p->dir[cell >> PD_NODEPOOL_BLOCK_SHIFT];
    if (__builtin_expect(b == NULL, 0))
        b = pd_nodepool__grow(p, cell >> PD_NODEPOOL_BLOCK_SHIFT);
    return b;
}

/* The block holding cell if a search has touched it, else NULL. Never
 * allocates: for lookups where an untouched cell has a known answer. */
static inline const unsigned char *pd_nodepool_peek(const pd_nodepool *p, uint32_t cell)
{
    return p->dir[cell >> PD_NODEPOOL_BLOCK_SHIFT];
}

/* Bytes the pool holds: directory, slabs and the lists of slabs and owners. */
size_t pd_nodepool_footprint(const pd_nodepool *p);

/* Hands back the newest slabs, then the directory, until the footprint is
 * at most keep_bytes (or nothing is left). Records in the surviving blocks
 * keep their stamps, so the next search needs no clearing either. */
void pd_nodepool_trim(pd_nodepool *p, size_t keep_bytes);

#endif
