/*
 * pd_components.h - connected-component labels, so "start and goal are not
 * connected" costs O(1) instead of a search that floods half the map.
 *
 * Labels are computed on a (unit) grid with 4-neighbour connectivity. Under
 * the no-corner-cutting rule every diagonal step can be replaced by two
 * straight ones, so the same labels serve 8- and 4-connected searches.
 *
 * Updates after a local change stay local where they can: opening cells
 * merges the components they touch (relabelling the smaller); closing cells
 * first checks, with a flood bounded to a margin around the rectangle,
 * whether the open cells around it still reach each other, and relabels the
 * affected component only when that check fails.
 */
#ifndef PD_COMPONENTS_H
#define PD_COMPONENTS_H

#include <stdint.h>

#include "pd_grid.h"
#include "pd_search.h"

/* Labels are stored in the narrowest of 8, 16 and 32 bits per cell that
 * holds every label ever given in the lineage: 8 while next_label <= 255
 * (labels 1..254; the value 255 is the escape below), 16 while
 * next_label <= 65536, 32 otherwise.
 *
 * Escaped components. In 8-bit labels a component of at most
 * PD_COMPONENTS_SMALL_CELLS cells may be stored as PD_COMPONENTS_ESCAPED
 * on every one of its cells instead of a label of its own; reads of such a
 * cell flood it (at most that many cells, no side table, so no memory per
 * cell). Invariant: every escaped cell's component is small and entirely
 * escaped; a direct label's component may be of any size. So a map with
 * thousands of walled-in pockets (random walls, the demo forest's trees)
 * still takes 8 bits when at most 254 of its components are larger.
 * A full build numbers the components 1..n in scan order when n <= 254;
 * otherwise, when at most 254 of them have more than
 * PD_COMPONENTS_SMALL_CELLS cells, it numbers those and escapes the rest;
 * else it takes 16 (32) bits and numbers them all, with no escapes.
 * An update in 8 bits escapes the small components it makes and gives
 * the large ones new labels; it keeps the width unless it hands out a
 * label the width cannot hold: it then widens (one pass over the labels,
 * which gives every escaped component a label of its own: wider labels
 * have no escapes) and stays that wide for good, because labels are never
 * reused within a lineage: a scene whose doors split rooms 300 times into
 * large parts holds 16-bit labels even if it has 3 components left. The
 * next full build (pd_components_build: a reload, or the rebuild after a
 * failed update) narrows to the smallest width that fits.
 * pd_components_bytes reports the width held. */
typedef struct pd_components {
    int32_t width, height, stride;   /* as the grid */
    void *labels;                    /* padded, label_bytes each; 0 = blocked (and padding) */
    uint32_t label_bytes;            /* 1, 2 or 4 */
    uint32_t next_label;             /* labels are never reused within one lineage */
    uint32_t count;                  /* components currently present, escaped ones included */
} pd_components;

/* The most cells an escaped component has. A read of an escaped cell
 * floods at most this many cells, so it bounds the cost of such a read
 * (about a microsecond) as well as which components may go unlabelled. */
#define PD_COMPONENTS_SMALL_CELLS 64
/* The stored 8-bit value of an escaped cell. */
#define PD_COMPONENTS_ESCAPED 255u
/* pd_components_label's answer for an escaped cell: this bit plus the
 * padded index of the component's first cell in index order, so one value
 * per component, above every stored label (those stay below 2^29). */
#define PD_COMPONENTS_SMALL_LABEL 0x80000000u

/* The bytes per label that hold labels below next_label: 1, 2 or 4. */
static inline uint32_t pd_components_bytes_for(uint32_t next_label)
{
    return next_label <= PD_COMPONENTS_ESCAPED ? 1u : next_label <= (1u << 16) ? 2u : 4u;
}

pd_components *pd_components_build(const pd_grid *g);
/* The same labels, built 32 bits wide and then narrowed: the reference
 * pd_components_build is tested against (and its fallback past 65535
 * components). */
pd_components *pd_components_build_wide(const pd_grid *g);
/* Bytes its labels take. */
uint64_t pd_components_bytes(const pd_components *c);
pd_components *pd_components_clone(const pd_components *c);
/* Makes to (of the same size) a copy of from, reusing its memory where the
 * widths agree. Returns 0, or -1 on allocation failure (to is then left
 * without labels: destroy it). */
int pd_components_assign(pd_components *to, const pd_components *from);
void pd_components_destroy(pd_components *c);

/* The stored value at padded index i: a label, 0, or (8 bits only)
 * PD_COMPONENTS_ESCAPED. The width is the same for every read of a
 * search, so the branches are predicted; 8 bits, the common width, is
 * tested first. Tests rather than a switch: GCC unswitches a loop on an
 * if, not on a switch, so a loop over labels (pd__set_width's copy)
 * becomes one plain loop per width. */
static inline uint32_t pd_components_at(const pd_components *c, size_t i)
{
    if (c->label_bytes == 1)
        return ((const uint8_t *)c->labels)[i];
    if (c->label_bytes == 2)
        return ((const uint16_t *)c->labels)[i];
    return ((const uint32_t *)c->labels)[i];
}

/* Whether a stored value v (pd_components_at) marks an escaped cell. The
 * value is tested first: it is in a register, and rarely 255. */
static inline int pd_components_escaped(const pd_components *c, uint32_t v)
{
    return v == PD_COMPONENTS_ESCAPED && c->label_bytes == 1;
}

static inline int pd_components_in_bounds(const pd_components *c, pd_point p)
{
    return p.x >= 0 && p.y >= 0 && p.x < c->width && p.y < c->height;
}

/* The padded index of p (in bounds). */
static inline size_t pd_components_index(const pd_components *c, pd_point p)
{
    return (size_t)(p.y + 1) * (size_t)c->stride + (size_t)(p.x + 1);
}

/* pd_components_label and pd_components_connected for escaped cells: a
 * flood of at most PD_COMPONENTS_SMALL_CELLS cells. Pure (they read,
 * never write), so a loop that may call them still reads the width once:
 * GCC unswitches it on label_bytes as before. */
uint32_t pd_components_small_label(const pd_components *c, size_t i) __attribute__((pure));
int pd_components_small_connected(const pd_components *c, size_t a, size_t b) __attribute__((pure));

/* p's component as one value: 0 when blocked or outside, equal for two
 * cells exactly when they are connected. Escaped cells get a
 * PD_COMPONENTS_SMALL_LABEL value (a flood); a scan comparing many cells
 * with one label uses pd_components_match instead. */
static inline uint32_t pd_components_label(const pd_components *c, pd_point p)
{
    if (!pd_components_in_bounds(c, p))
        return 0;
    size_t i = pd_components_index(c, p);
    uint32_t v = pd_components_at(c, i);
    return pd_components_escaped(c, v) ? pd_components_small_label(c, i) : v;
}

/* Reads two stored values and compares them; floods only when both cells
 * are escaped (a direct label's component has no escaped cell). */
static inline int pd_components_connected(const pd_components *c, pd_point a, pd_point b)
{
    if (!pd_components_in_bounds(c, a) || !pd_components_in_bounds(c, b))
        return 0;
    size_t ia = pd_components_index(c, a), ib = pd_components_index(c, b);
    uint32_t la = pd_components_at(c, ia);
    if (la == 0 || la != pd_components_at(c, ib))
        return 0;
    return !pd_components_escaped(c, la) || pd_components_small_connected(c, ia, ib);
}

/* "Is this cell in component `label`?" for scans that ask it of many
 * cells: one read and compare per cell, and for a small component's label
 * a search of its (at most PD_COMPONENTS_SMALL_CELLS) cells, found once by
 * pd_components_match_init, instead of a flood per cell. */
typedef struct pd_components_match {
    uint32_t stored;                           /* the stored value that may match (UINT32_MAX: none) */
    uint32_t n;                                /* cells of label's small component (0: a stored label) */
    uint32_t cells[PD_COMPONENTS_SMALL_CELLS]; /* their padded indices, ascending */
} pd_components_match;

/* label as pd_components_label gives it (0 matches nothing). */
void pd_components_match_init(pd_components_match *m, const pd_components *c, uint32_t label);
int pd_components_match_small(const pd_components_match *m, size_t i) __attribute__((pure));

/* A scan mostly meets cells that do not match: one compare with the
 * stored value (the label, or PD_COMPONENTS_ESCAPED for a small
 * component) settles those; only an escaped cell against a small
 * component's match looks further. */
static inline int pd_components_in(const pd_components *c, const pd_components_match *m, pd_point p)
{
    if (!pd_components_in_bounds(c, p))
        return 0;
    size_t i = pd_components_index(c, p);
    uint32_t v = pd_components_at(c, i);
    if (v != m->stored)
        return 0;
    return m->n == 0 || pd_components_match_small(m, i);
}

/* g already holds the new cells for [x0..x1] x [y0..y1]. Returns 0, or -1
 * on allocation failure (labels are then left as a full rebuild would need:
 * call pd_components_build). */
int pd_components_update(pd_components *c, const pd_grid *g,
                         int32_t x0, int32_t y0, int32_t x1, int32_t y1);

/* What updates wrote into labels: (padded index, label) pairs in the order
 * written, and the counters after the last of them. Applied to another copy
 * of the labels those updates started from (pd_components_apply_diff), it
 * gives the same labels without a flood: how a scene brings a retired
 * version up to date (pd_scene_update.c). */
typedef struct pd_components_diff {
    uint32_t *pairs;
    size_t n, cap;                   /* pairs held (2 entries each), room */
    uint32_t next_label, count;
    uint32_t label_bytes;            /* the width the labels ended at (0: nothing recorded) */
} pd_components_diff;

/* pd_components_update, appending what it wrote to diff. Returns 0, or -1
 * (memory: the labels as pd_components_update leaves them; the diff is
 * then incomplete, do not apply it). */
int pd_components_update_diff(pd_components *c, const pd_grid *g, int32_t x0, int32_t y0, int32_t x1,
                              int32_t y1, pd_components_diff *diff);

/* Writes diff into c, first widening c's labels to the diff's width when
 * they are narrower. Returns 0, or -1 (memory for widening them). */
int pd_components_apply_diff(pd_components *c, const pd_components_diff *diff);

/* Frees what the diff holds; it is empty afterwards. */
void pd_components_diff_free(pd_components_diff *diff);

#endif
