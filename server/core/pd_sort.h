/*
 * pd_sort.h - qsort(3) comparators more than one file sorts with, defined
 * once (the u64 one was copied into three files of the scene layer).
 */
#ifndef PD_SORT_H
#define PD_SORT_H

/* Ascending uint64_t: for qsort and bsearch over uint64_t arrays (agent
 * ids, journal generations). */
int pd_cmp_u64(const void *a, const void *b);

#endif
