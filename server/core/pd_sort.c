/*
 * pd_sort.c - the shared qsort comparators (pd_sort.h).
 */
#include "pd_sort.h"

#include <stdint.h>

int pd_cmp_u64(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    /* Not x - y: the difference of two u64 does not fit an int. */
    return (x > y) - (x < y);
}
