/* pd_heap.c - the out-of-line part of the open list: a consistency check. */
#include "pd_heap.h"

int pd_heap_is_valid(const pd_heap *h)
{
    for (size_t i = 0; i < h->size; i++) {
        if (h->pos_base[(size_t)h->entries[i].id * h->pos_stride] != i)
            return 0;
        if (i > 0 && pd_heap_before(&h->entries[i], &h->entries[(i - 1) / PD_HEAP_ARITY]))
            return 0;
    }
    return 1;
}
