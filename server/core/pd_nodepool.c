/*
 * pd_nodepool.c - the slow paths of the lazy node pool (see pd_nodepool.h):
 * growing the directory, handing out blocks from mmap'ed slabs, clearing the
 * stamps when the generation wraps, and handing slabs back.
 *
 * A slab holds only blocks (page aligned, so 4 KiB blocks are pages); the
 * directory index each block serves is kept beside, in `owner`, so trimming
 * can clear exactly those entries. Fresh anonymous mappings are zero, which
 * is "never seen" for every record layout the searches use.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS under -std=c11 */
#include "pd_nodepool.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

void pd_nodepool_init(pd_nodepool *p, size_t block_bytes)
{
    memset(p, 0, sizeof *p);
    p->block_bytes = block_bytes;
    p->blocks_per_slab = PD_NODEPOOL_SLAB_BYTES / block_bytes;
}

void pd_nodepool_free(pd_nodepool *p)
{
    for (size_t i = 0; i < p->n_slabs; i++)
        munmap(p->slabs[i], PD_NODEPOOL_SLAB_BYTES);
    free(p->slabs);
    free(p->owner);
    free(p->dir);
    pd_nodepool_init(p, p->block_bytes);
}

int pd_nodepool_begin(pd_nodepool *p, size_t cells)
{
    size_t need = (cells + PD_NODEPOOL_BLOCK_CELLS - 1) >> PD_NODEPOOL_BLOCK_SHIFT;
    if (need > p->dir_len) {
        /* calloc, not realloc + memset: a large directory then comes as
         * untouched zero pages, and only those a search reaches are ever
         * faulted in. */
        unsigned char **dir = calloc(need, sizeof *dir);
        if (!dir)
            return -1;
        if (p->dir_len)
            memcpy(dir, p->dir, p->dir_len * sizeof *dir);
        free(p->dir);
        p->dir = dir;
        p->dir_len = need;
    }
    if (++p->gen == 0) {
        /* 2^32 searches later the stamps could match again: zero every
         * block once, which makes each record "never seen". */
        for (size_t s = 0; s < p->n_slabs; s++) {
            size_t used = s + 1 == p->n_slabs ? p->slab_used : p->blocks_per_slab;
            memset(p->slabs[s], 0, used * p->block_bytes);
        }
        p->gen = 1;
    }
    return 0;
}

unsigned char *pd_nodepool__grow(pd_nodepool *p, size_t block)
{
    if (p->n_slabs == 0 || p->slab_used == p->blocks_per_slab) {
        if (p->n_slabs == p->slabs_cap) {
            size_t cap = p->slabs_cap ? p->slabs_cap * 2 : 16;
            unsigned char **slabs = realloc(p->slabs, cap * sizeof *slabs);
            if (!slabs)
                return NULL;
            p->slabs = slabs;
            uint32_t *owner = realloc(p->owner, cap * p->blocks_per_slab * sizeof *owner);
            if (!owner)
                return NULL;
            p->owner = owner;
            p->slabs_cap = cap;
        }
        void *m = mmap(NULL, PD_NODEPOOL_SLAB_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return NULL;
        p->slabs[p->n_slabs++] = m;
        p->slab_used = 0;
    }
    const size_t s = p->n_slabs - 1;
    p->owner[s * p->blocks_per_slab + p->slab_used] = (uint32_t)block;
    unsigned char *b = p->slabs[s] + p->slab_used++ * p->block_bytes;
    p->dir[block] = b;
    return b;
}

size_t pd_nodepool_footprint(const pd_nodepool *p)
{
    return p->dir_len * sizeof *p->dir + p->n_slabs * (size_t)PD_NODEPOOL_SLAB_BYTES +
           p->slabs_cap * (sizeof *p->slabs + p->blocks_per_slab * sizeof *p->owner);
}

void pd_nodepool_trim(pd_nodepool *p, size_t keep_bytes)
{
    while (p->n_slabs > 0 && pd_nodepool_footprint(p) > keep_bytes) {
        const size_t s = --p->n_slabs;
        for (size_t i = 0; i < p->slab_used; i++)
            p->dir[p->owner[s * p->blocks_per_slab + i]] = NULL;
        munmap(p->slabs[s], PD_NODEPOOL_SLAB_BYTES);
        p->slab_used = p->n_slabs > 0 ? p->blocks_per_slab : 0;
    }
    if (p->n_slabs == 0 && pd_nodepool_footprint(p) > keep_bytes) {
        free(p->slabs);
        free(p->owner);
        p->slabs = NULL;
        p->owner = NULL;
        p->slabs_cap = 0;
        free(p->dir);
        p->dir = NULL;
        p->dir_len = 0;
    }
}
