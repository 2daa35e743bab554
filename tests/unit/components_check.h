/*
 * components_check.h - whether two component labellings of one grid describe
 * the same components, for tests and fuzz targets that compare a scene
 * repaired by updates with a fresh build. Label numbers may differ (updates
 * never reuse a label), so the check is a bijection between labels, not
 * equal arrays. Escaped cells (pd_components.h) answer a
 * PD_COMPONENTS_SMALL_LABEL value; the checks also hold them to their
 * rule, written here from the header's text: such a component has at most
 * PD_COMPONENTS_SMALL_CELLS cells and its value names its first cell in
 * index order. components_reference_bytes gives the width a full build
 * must pick, from a flood of its own.
 */
#ifndef COMPONENTS_CHECK_H
#define COMPONENTS_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include "pd_components.h"

/* Slots for labels of c: stored ones (below next_label), then one per
 * padded cell for small labels. */
static inline size_t components_keys(const pd_components *c)
{
    return (size_t)c->next_label + (size_t)c->stride * (size_t)(c->height + 2);
}

/* The slot of label l (see components_keys); (size_t)-1 when l is neither
 * below next_label nor a small label of a padded cell. */
static inline size_t components_key(const pd_components *c, uint32_t l)
{
    if (l & PD_COMPONENTS_SMALL_LABEL) {
        size_t cell = l & ~PD_COMPONENTS_SMALL_LABEL;
        return cell < (size_t)c->stride * (size_t)(c->height + 2) ? (size_t)c->next_label + cell : (size_t)-1;
    }
    return l < c->next_label ? l : (size_t)-1;
}

/* 0 when c's small labels keep their rule: each names the padded index of
 * its component's first cell in scan order (= index order) and covers at
 * most PD_COMPONENTS_SMALL_CELLS cells, and only 8-bit labels have them;
 * otherwise 1 with the first break described in why. */
static inline int components_small_rule_broken(const pd_components *c, char *why, size_t whylen)
{
    uint32_t *cells = calloc(components_keys(c), sizeof *cells);
    int broken = 0;
    if (!cells) {
        snprintf(why, whylen, "out of memory");
        return 1;
    }
    for (int32_t y = 0; y < c->height && !broken; y++) {
        for (int32_t x = 0; x < c->width && !broken; x++) {
            uint32_t l = pd_components_label(c, (pd_point){ x, y });
            if (!(l & PD_COMPONENTS_SMALL_LABEL))
                continue;
            size_t key = components_key(c, l), at = (size_t)(y + 1) * (size_t)c->stride + (size_t)(x + 1);
            if (c->label_bytes != 1 || key == (size_t)-1) {
                snprintf(why, whylen, "cell (%d, %d): small label %#x in %u-byte labels", (int)x, (int)y,
                         (unsigned)l, (unsigned)c->label_bytes);
                broken = 1;
            } else if (cells[key]++ == 0 && (l & ~PD_COMPONENTS_SMALL_LABEL) != at) {
                snprintf(why, whylen, "cell (%d, %d): first cell of small label %#x is %zu", (int)x, (int)y,
                         (unsigned)l, at);
                broken = 1;
            } else if (cells[key] > PD_COMPONENTS_SMALL_CELLS) {
                snprintf(why, whylen, "cell (%d, %d): small label %#x has more than %d cells", (int)x, (int)y,
                         (unsigned)l, PD_COMPONENTS_SMALL_CELLS);
                broken = 1;
            }
        }
    }
    free(cells);
    return broken;
}

/* 0 when a and b partition the cells alike (and keep the small-label
 * rule); otherwise 1 with the first difference described in why. */
static inline int components_differ(const pd_components *a, const pd_components *b, char *why, size_t whylen)
{
    if (a->width != b->width || a->height != b->height || a->count != b->count) {
        snprintf(why, whylen, "%dx%d with %u components vs %dx%d with %u", (int)a->width, (int)a->height,
                 (unsigned)a->count, (int)b->width, (int)b->height, (unsigned)b->count);
        return 1;
    }
    if (components_small_rule_broken(a, why, whylen) || components_small_rule_broken(b, why, whylen))
        return 1;
    uint32_t *a_to_b = calloc(components_keys(a), sizeof *a_to_b);
    uint32_t *b_to_a = calloc(components_keys(b), sizeof *b_to_a);
    int differ = 0;
    if (!a_to_b || !b_to_a) {
        snprintf(why, whylen, "out of memory");
        differ = 1;
    }
    for (int32_t y = 0; y < a->height && !differ; y++) {
        for (int32_t x = 0; x < a->width && !differ; x++) {
            pd_point p = { x, y };
            uint32_t la = pd_components_label(a, p), lb = pd_components_label(b, p);
            size_t ka = components_key(a, la), kb = components_key(b, lb);
            if ((la == 0) != (lb == 0)) {
                snprintf(why, whylen, "cell (%d, %d): labels %u and %u disagree on passability", (int)x,
                         (int)y, (unsigned)la, (unsigned)lb);
                differ = 1;
            } else if (ka == (size_t)-1 || kb == (size_t)-1) {
                snprintf(why, whylen, "cell (%d, %d): label %u or %u past next_label", (int)x, (int)y,
                         (unsigned)la, (unsigned)lb);
                differ = 1;
            } else if (la != 0) {
                /* Stored +1 so that 0 means "not seen" for every key. */
                if (a_to_b[ka] == 0)
                    a_to_b[ka] = (uint32_t)kb + 1;
                if (b_to_a[kb] == 0)
                    b_to_a[kb] = (uint32_t)ka + 1;
                if (a_to_b[ka] != kb + 1 || b_to_a[kb] != ka + 1) {
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

/* The label width a full build of g must pick, from pd_components.h's
 * rule and a flood of this file's own: 1 byte when g has at most 254
 * components, or at most 254 of more than PD_COMPONENTS_SMALL_CELLS
 * cells; else 2 for up to 65535 components, 4 beyond. 0 on no memory. */
static inline uint32_t components_reference_bytes(const pd_grid *g)
{
    size_t n = (size_t)g->width * (size_t)g->height;
    uint8_t *seen = calloc(n ? n : 1, 1);
    int32_t *queue = malloc((n ? n : 1) * sizeof *queue);
    uint32_t components = 0, large = 0;
    if (!seen || !queue) {
        free(seen);
        free(queue);
        return 0;
    }
    for (size_t s = 0; s < n; s++) {
        if (seen[s] || pd_grid_get(g, (int32_t)(s % (size_t)g->width), (int32_t)(s / (size_t)g->width)) ==
                           PD_CELL_BLOCKED)
            continue;
        size_t head = 0, tail = 0;
        seen[s] = 1;
        queue[tail++] = (int32_t)s;
        while (head < tail) {
            int32_t x = queue[head] % g->width, y = queue[head] / g->width;
            head++;
            const int32_t nx[4] = { x + 1, x - 1, x, x }, ny[4] = { y, y, y + 1, y - 1 };
            for (int d = 0; d < 4; d++) {
                if (pd_grid_get(g, nx[d], ny[d]) == PD_CELL_BLOCKED || seen[ny[d] * g->width + nx[d]])
                    continue;
                seen[ny[d] * g->width + nx[d]] = 1;
                queue[tail++] = ny[d] * g->width + nx[d];
            }
        }
        components++;
        large += tail > PD_COMPONENTS_SMALL_CELLS;
    }
    free(seen);
    free(queue);
    return components <= 254 || large <= 254 ? 1u : components <= 65535 ? 2u : 4u;
}

#endif
