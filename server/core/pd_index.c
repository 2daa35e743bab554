/*
 * pd_index.c - names to entries by open addressing (see pd_index.h).
 */
#include "pd_index.h"

#include <stdlib.h>
#include <string.h>

/* FNV-1a 64's published parameters (offset basis and prime, from the FNV
 * reference, www.isthe.com/chongo/tech/comp/fnv). The hash is only ever
 * used in memory (index slots, watch buckets, pool lanes): nothing stores
 * it, so these may be corrected without migrating any file. */
#define PD_FNV1A64_OFFSET 14695981039346656037ull
#define PD_FNV1A64_PRIME 1099511628211ull

size_t pd_index_hash(const char *name)
{
    uint64_t h = PD_FNV1A64_OFFSET;
    for (; *name; name++)
        h = (h ^ (uint8_t)*name) * PD_FNV1A64_PRIME;
    return (size_t)h;
}

size_t pd_index_cap_for(size_t n)
{
    size_t cap = PD_INDEX_MIN_CAP;
    while (cap < 2 * n)
        cap *= 2;
    return cap;
}

size_t pd_index_slot(const uint32_t *slots, size_t cap, const char *name, pd_index_name_fn name_of,
                     const void *ctx, uint64_t *work)
{
    size_t mask = cap - 1, i = pd_index_hash(name) & mask;
    for (;; i = (i + 1) & mask) {
        if (work)
            (*work)++;
        if (slots[i] == 0 || strcmp(name_of(ctx, slots[i] - 1), name) == 0)
            return i;
    }
}

uint32_t *pd_index_build(size_t cap, size_t n, pd_index_name_fn name_of, const void *ctx, uint64_t *work)
{
    uint32_t *slots = calloc(cap, sizeof *slots);
    for (size_t e = 0; slots && e < n; e++) {
        const char *name = name_of(ctx, (uint32_t)e);
        if (name)
            slots[pd_index_slot(slots, cap, name, name_of, ctx, work)] = (uint32_t)(e + 1);
    }
    return slots;
}

void pd_index_remove(uint32_t *slots, size_t cap, size_t slot, pd_index_name_fn name_of, const void *ctx)
{
    size_t mask = cap - 1, i = slot;
    for (size_t j = (i + 1) & mask; slots[j] != 0; j = (j + 1) & mask) {
        size_t home = pd_index_hash(name_of(ctx, slots[j] - 1)) & mask;
        /* j's entry stays unless its home lies cyclically outside (i, j]. */
        int stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (!stays) {
            slots[i] = slots[j];
            i = j;
        }
    }
    slots[i] = 0;
}
