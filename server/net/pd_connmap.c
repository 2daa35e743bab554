/*
 * pd_connmap.c - the connection map: connection id -> connection, for
 * completions, which arrive carrying only the id. Open addressing with
 * linear probing, kept at most half full.
 */
#include "pd_conn.h"

#include <stdlib.h>

static size_t pd__map_home(const pd__conn_map *m, uint64_t id)
{
    /* splitmix64 finaliser: ids are sequential, so spread them. */
    uint64_t z = id + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (size_t)z & (m->n_slots - 1);
}

int pd__map_grow(pd__conn_map *m)
{
    size_t n = m->n_slots ? m->n_slots * 2 : PD__MAP_INITIAL_SLOTS;
    pd__conn **slots = calloc(n, sizeof *slots);
    if (!slots)
        return -1;
    pd__conn_map grown = {slots, n, 0};
    for (size_t i = 0; i < m->n_slots; i++) {
        pd__conn *c = m->slots[i];
        if (!c)
            continue;
        size_t j = pd__map_home(&grown, c->id);
        while (grown.slots[j])
            j = (j + 1) & (n - 1);
        grown.slots[j] = c;
        grown.count++;
    }
    free(m->slots);
    *m = grown;
    return 0;
}

int pd__map_insert(pd__conn_map *m, pd__conn *c)
{
    if ((m->count + 1) * 2 > m->n_slots && pd__map_grow(m) != 0)
        return -1;
    size_t j = pd__map_home(m, c->id);
    while (m->slots[j])
        j = (j + 1) & (m->n_slots - 1);
    m->slots[j] = c;
    m->count++;
    return 0;
}

static size_t pd__map_slot(const pd__conn_map *m, uint64_t id)
{
    if (m->n_slots == 0)
        return SIZE_MAX;
    size_t j = pd__map_home(m, id);
    while (m->slots[j]) {
        if (m->slots[j]->id == id)
            return j;
        j = (j + 1) & (m->n_slots - 1);
    }
    return SIZE_MAX;
}

pd__conn *pd__map_find(const pd__conn_map *m, uint64_t id)
{
    size_t j = pd__map_slot(m, id);
    return j == SIZE_MAX ? NULL : m->slots[j];
}

/* Removes by shifting later members of the probe run back, so lookups never
 * need tombstones. */
void pd__map_remove(pd__conn_map *m, uint64_t id)
{
    size_t mask = m->n_slots - 1;
    size_t hole = pd__map_slot(m, id);
    if (hole == SIZE_MAX)
        return;
    m->slots[hole] = NULL;
    m->count--;
    for (size_t j = (hole + 1) & mask; m->slots[j]; j = (j + 1) & mask) {
        size_t home = pd__map_home(m, m->slots[j]->id);
        /* The entry at j may move into the hole only if its home is not in
         * the cyclic range (hole, j]. */
        int home_in_range = hole < j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!home_in_range) {
            m->slots[hole] = m->slots[j];
            m->slots[j] = NULL;
            hole = j;
        }
    }
}
