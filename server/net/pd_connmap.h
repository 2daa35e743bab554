/*
 * pd_connmap.h - connection id -> connection, for completions that arrive
 * carrying only the id (pd_connmap.c). Calls nothing else in the net layer.
 */
#ifndef PD_CONNMAP_H
#define PD_CONNMAP_H

#include <stddef.h>
#include <stdint.h>

/* Hash map sizing: a power of two, kept at most half full so linear probes
 * stay short even with 10,000+ connections. */
#define PD__MAP_INITIAL_SLOTS 64

typedef struct pd__conn pd__conn;

typedef struct pd__conn_map {
    pd__conn **slots;
    size_t n_slots;              /* power of two */
    size_t count;
} pd__conn_map;

int pd__map_grow(pd__conn_map *m);
int pd__map_insert(pd__conn_map *m, pd__conn *c);
pd__conn *pd__map_find(const pd__conn_map *m, uint64_t id);
void pd__map_remove(pd__conn_map *m, uint64_t id);

#endif
