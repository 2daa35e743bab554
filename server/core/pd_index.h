/*
 * pd_index.h - an index from names to the entries of the caller's array:
 * open addressing with linear probing over a power-of-two table kept at
 * most half full, FNV-1a of the name, deletion by backward shift (no
 * tombstones). A slot holds 0 (empty) or 1 + an entry number; the caller
 * keeps the names (name_of(ctx, entry)) and the table, grows it by
 * building a larger one, and locks around it. Finding, adding and removing
 * a name cost the same on average however many there are.
 *
 * Used by the scene registry (name -> scene) and the metrics' per-scene
 * request counts.
 */
#ifndef PD_INDEX_H
#define PD_INDEX_H

#include <stddef.h>
#include <stdint.h>

/* Smallest table pd_index_cap_for gives. */
#define PD_INDEX_MIN_CAP 64

/* The name of entry e of ctx; NULL: e is not indexed (a hole). */
typedef const char *(*pd_index_name_fn)(const void *ctx, uint32_t e);

/* FNV-1a 64 of the name (truncated to size_t where that is narrower); in
 * memory only, never stored. */
size_t pd_index_hash(const char *name);

/* The smallest table (a power of two, at least PD_INDEX_MIN_CAP) that
 * holds n names at most half full. */
size_t pd_index_cap_for(size_t n);

/* The slot of slots[0, cap) that holds name, or the empty one where it
 * would go. Each slot looked at adds 1 to *work (NULL: not counted). */
size_t pd_index_slot(const uint32_t *slots, size_t cap, const char *name, pd_index_name_fn name_of,
                     const void *ctx, uint64_t *work);

/* A new table of cap slots over entries 0..n-1 of ctx (holes left out);
 * NULL when memory ran out. cap must be at least pd_index_cap_for(n). */
uint32_t *pd_index_build(size_t cap, size_t n, pd_index_name_fn name_of, const void *ctx, uint64_t *work);

/* Empties slot, moving the later entries of its run back so that every
 * lookup still finds them. name_of must still name them. */
void pd_index_remove(uint32_t *slots, size_t cap, size_t slot, pd_index_name_fn name_of, const void *ctx);

#endif
