/*
 * components_check.h - whether two component labellings of one grid describe
 * the same components, for tests and fuzz targets that compare a scene
 * repaired by updates with a fresh build. Label numbers may differ (updates
 * never reuse a label), so the check is a bijection between labels, not
 * equal arrays.
 */
#ifndef COMPONENTS_CHECK_H
#define COMPONENTS_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include "pd_components.h"

/* 0 when a and b partition the cells alike; otherwise 1 with the first
 * difference described in why. */
static inline int components_differ(const pd_components *a, const pd_components *b, char *why, size_t whylen)
{
    if (a->width != b->width || a->height != b->height || a->count != b->count) {
        snprintf(why, whylen, "%dx%d with %u components vs %dx%d with %u", (int)a->width, (int)a->height,
                 (unsigned)a->count, (int)b->width, (int)b->height, (unsigned)b->count);
        return 1;
    }
    uint32_t *a_to_b = calloc((size_t)a->next_label + 1, sizeof *a_to_b);
    uint32_t *b_to_a = calloc((size_t)b->next_label + 1, sizeof *b_to_a);
    int differ = 0;
    if (!a_to_b || !b_to_a) {
        snprintf(why, whylen, "out of memory");
        differ = 1;
    }
    for (int32_t y = 0; y < a->height && !differ; y++) {
        for (int32_t x = 0; x < a->width && !differ; x++) {
            pd_point p = { x, y };
            uint32_t la = pd_components_label(a, p), lb = pd_components_label(b, p);
            if ((la == 0) != (lb == 0)) {
                snprintf(why, whylen, "cell (%d, %d): labels %u and %u disagree on passability", (int)x,
                         (int)y, (unsigned)la, (unsigned)lb);
                differ = 1;
            } else if (la > a->next_label || lb > b->next_label) {
                snprintf(why, whylen, "cell (%d, %d): label %u or %u past next_label", (int)x, (int)y,
                         (unsigned)la, (unsigned)lb);
                differ = 1;
            } else if (la != 0) {
                if (a_to_b[la] == 0)
                    a_to_b[la] = lb;
                if (b_to_a[lb] == 0)
                    b_to_a[lb] = la;
                if (a_to_b[la] != lb || b_to_a[lb] != la) {
                    snprintf(why, whylen, "cell (%d, %d): component %u/%u is split or merged differently",
                             (int)x, (int)y, (unsigned)la, (unsigned)lb);
                    differ = 1;
                }
            }
        }
    }
    free(a_to_b);
    free(b_to_a);
    return differ;
}

#endif
