/*
 * pd_components.c - 4-neighbour component labels and their local repair
 * (see pd_components.h).
 *
 * Storage: 8, 16 or 32 bits per label, the narrowest that holds the
 * lineage's labels (see pd_components.h): 8 bits for a grid with at most
 * 254 components of more than PD_COMPONENTS_SMALL_CELLS cells, the
 * smaller ones escaped, 1 byte per cell beside the 1-byte grid. A full
 * build floods in 32 bits and narrows at the end. The update floods need
 * 32 bits too (the marks live in the top bits), so an update reads and
 * writes labels through an overlay of the cells it touched (pd__get,
 * pd__set) and writes it back at the end: an update's work is the cells it
 * visits, never a pass over the map, except the one pass that widens the
 * labels, once and for good, when the lineage gives out a label their
 * width cannot hold. One accessor pair (pd_components_at, pd__put) reads
 * and writes every width.
 *
 * Every flood here is a breadth-first search over an explicit queue of padded
 * cell indices, never recursion, so map size cannot exhaust the stack. The
 * padding is always 0 (blocked), so neighbours are read without bounds checks.
 *
 * While a flood runs, cells it has visited are marked in their working label
 * with PD__VISITED, and seed cells with PD__SEED; the queue doubles as the
 * list of marked cells, so the marks are cleared (or turned into the final
 * label) without another scan. Real labels therefore stay below
 * PD__LABEL_LIMIT.
 *
 * Update, after the cells of a rectangle changed:
 *  0. (8 bits) Every escaped component the update can meet - those within
 *     one cell of the rectangle - gets a temporary label, on all its cells,
 *     so steps 1 and 2 work on labels that name one component each. New
 *     components get temporary labels too; the write-back keeps the small
 *     ones escaped and gives the others new labels (pd__final_labels).
 *  1. Cells that became blocked get label 0. For each old label they carried,
 *     the open cells next to them ("seeds") are the only places the component
 *     can have been cut: any path between two surviving cells that ran
 *     through the closed cells can be rerouted through the seeds if the seeds
 *     still reach each other. A flood bounded to the rectangle grown by
 *     PD_COMPONENTS_REPAIR_MARGIN tries to prove that. If it cannot, one
 *     flood per seed runs in lock step, floods that meet join, and each
 *     group that runs out of cells is a part cut off, given a new label;
 *     the last group still growing keeps the old label unflooded, so a small
 *     piece cut off a big component costs only the piece.
 *  2. Cells that became passable are grouped into connected regions; a region
 *     joins the components it touches. They merge into the largest one,
 *     found by flooding all of them in lock step until only one is still
 *     growing, so the work is bounded by the smaller components' sizes.
 *     A region that touches nothing gets a new label.
 */
#include "pd_components.h"

#include <stdlib.h>
#include <string.h>

/* How far beyond the changed rectangle, in cells, the flood that tries to
 * prove a closed area did not split its component may look. Detours around a
 * small obstacle are short; a longer one is settled by the lock-step floods
 * instead, which cost more. */
#define PD_COMPONENTS_REPAIR_MARGIN 16

/* Transient marks kept in the top bits of a label during a flood. */
#define PD__VISITED 0x80000000u
#define PD__SEED 0x40000000u
#define PD__MARKS (PD__VISITED | PD__SEED)
/* Labels an update in 8 bits gives the components it works on that have
 * no label of their own (escaped ones, and new ones), until its end
 * decides which of them stay escaped (pd__final_labels): PD__TEMP_BASE +
 * a number, below the marks. */
#define PD__TEMP_BASE 0x20000000u
/* Stored labels stay below the temporary ones; the update refuses (asks
 * for a rebuild) before reaching it. */
#define PD__LABEL_LIMIT PD__TEMP_BASE

/* A growable array of padded cell indices, used as a BFS queue that keeps
 * everything ever pushed. */
typedef struct pd__cells {
    uint32_t *v;
    size_t n, cap;
} pd__cells;

static int pd__cells_push(pd__cells *q, uint32_t cell)
{
    if (q->n == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 256;
        uint32_t *v = realloc(q->v, cap * sizeof *v);
        if (!v)
            return -1;
        q->v = v;
        q->cap = cap;
    }
    q->v[q->n++] = cell;
    return 0;
}

static size_t pd__cells_total(int32_t width, int32_t height)
{
    return (size_t)(width + 2) * (size_t)(height + 2);
}

/* Writes label v at padded index i, in the labels' width (v fits it);
 * written as pd_components_at is, for the same reason. */
static inline void pd__put(pd_components *c, size_t i, uint32_t v)
{
    if (c->label_bytes == 1)
        ((uint8_t *)c->labels)[i] = (uint8_t)v;
    else if (c->label_bytes == 2)
        ((uint16_t *)c->labels)[i] = (uint16_t)v;
    else
        ((uint32_t *)c->labels)[i] = v;
}

/* A pd_components with 32-bit labels, all 0. */
static pd_components *pd__components_alloc(int32_t width, int32_t height)
{
    pd_components *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->width = width;
    c->height = height;
    c->stride = width + 2;
    c->label_bytes = sizeof(uint32_t);
    c->labels = calloc(pd__cells_total(width, height), c->label_bytes);
    if (!c->labels) {
        free(c);
        return NULL;
    }
    c->next_label = 1;
    return c;
}

/* Stores the labels `bytes` wide (every label must fit): wider when an
 * update gives a label the width cannot hold, narrower after a full build.
 * One pass over the labels. Returns 0, or -1 (memory; c unchanged). */
static int pd__set_width(pd_components *c, uint32_t bytes)
{
    if (bytes == c->label_bytes)
        return 0;
    const size_t n = pd__cells_total(c->width, c->height);
    pd_components to = *c;
    to.label_bytes = bytes;
    to.labels = malloc(n * bytes);
    if (!to.labels)
        return -1;
    for (size_t i = 0; i < n; i++)
        pd__put(&to, i, pd_components_at(c, i));
    free(c->labels);
    *c = to;
    return 0;
}

void pd_components_destroy(pd_components *c)
{
    if (!c)
        return;
    free(c->labels);
    free(c);
}

uint64_t pd_components_bytes(const pd_components *c)
{
    return (uint64_t)pd__cells_total(c->width, c->height) * c->label_bytes;
}

int pd_components_assign(pd_components *to, const pd_components *from)
{
    const size_t bytes = pd__cells_total(from->width, from->height) * from->label_bytes;
    if (to->labels && to->label_bytes != from->label_bytes) {
        free(to->labels);
        to->labels = NULL;
    }
    to->label_bytes = from->label_bytes;
    if (!to->labels && !(to->labels = malloc(bytes)))
        return -1;
    memcpy(to->labels, from->labels, bytes);
    to->width = from->width;
    to->height = from->height;
    to->stride = from->stride;
    to->next_label = from->next_label;
    to->count = from->count;
    return 0;
}

pd_components *pd_components_clone(const pd_components *c)
{
    if (!c || !c->labels)
        return NULL;
    pd_components *copy = calloc(1, sizeof *copy);
    if (!copy)
        return NULL;
    if (pd_components_assign(copy, c) != 0) {
        pd_components_destroy(copy);
        return NULL;
    }
    return copy;
}

/* The frontier of a full build's floods: the cells a flood reached but
 * has not expanded yet, taken from the front of a buffer and added at its
 * back; when the back nears the buffer's end, the cells left move to the
 * front, into a buffer twice as large when they fill more than half of it.
 * A breadth-first flood's frontier (the cells at one or two distances
 * from its start) is far smaller than its cells on most maps, so the
 * build's only large work array is its 32-bit labels. A queue of one slot
 * per cell made that 8 bytes a cell (8 MB at 1024 x 1024), which glibc
 * gave back to the kernel after a build when nothing was allocated above
 * it, and the next build faulted in again page by page (see
 * BENCHMARKS.md, escaped small components). */
typedef struct pd__frontier {
    uint32_t *v;
    size_t cap;
} pd__frontier;

/* Cells a build's frontier buffer starts with (4 KB): the frontier of a
 * flood from the corner of an open map 1024 cells wide. */
#define PD__FRONTIER_FIRST_CAP 1024

/* Moves the cells v[head..tail) to the front of the buffer, into a new one
 * twice as large when they fill more than half of it (the first buffer,
 * when there is none: PD__FRONTIER_FIRST_CAP cells). Returns 0, or -1
 * (memory; nothing moved). */
static int pd__frontier_compact(pd__frontier *f, size_t head, size_t tail)
{
    const size_t n = tail - head;
    if (!f->v || n > f->cap / 2) {
        size_t cap = f->cap ? f->cap * 2 : PD__FRONTIER_FIRST_CAP;
        uint32_t *v = malloc(cap * sizeof *v);
        if (!v)
            return -1;
        if (n > 0)
            memcpy(v, &f->v[head], n * sizeof *v);
        free(f->v);
        f->v = v;
        f->cap = cap;
    } else {
        memmove(f->v, &f->v[head], n * sizeof *f->v);
    }
    return 0;
}

/* Floods from `start` over passable cells of g still labelled 0 in labels
 * (of type T), writing `label`, through the frontier buffer (made by the
 * caller); *cells: the cells flooded. A flood of at most
 * PD__FRONTIER_FIRST_CAP - 4 cells never compacts the buffer, so its cells
 * are then frontier->v[0 .. *cells). Returns 0, or -1 (memory). One
 * function per label width. */
#define PD__FLOOD_UNLABELLED(name, T)                                                             \
    static int name(T *labels, int32_t stride, const pd_grid *g, pd__frontier *frontier,           \
                    uint32_t start, T label, uint32_t *cells)                                      \
    {                                                                                              \
        const uint32_t step[4] = { 1u, (uint32_t)-1, (uint32_t)stride, (uint32_t)-stride };        \
        size_t head = 0, tail = 0, moved_out = 0;                                                  \
        labels[start] = label;                                                                     \
        frontier->v[tail++] = start;                                                               \
        while (head < tail) {                                                                      \
            /* A cell adds at most 4 cells: the loop below expands as many as                      \
             * have room for theirs before the buffer's end, so its writes need                    \
             * no check. */                                                                        \
            if (frontier->cap - tail < 4) {                                                        \
                if (pd__frontier_compact(frontier, head, tail) < 0)                                \
                    return -1;                                                                     \
                moved_out += head;                                                                 \
                tail -= head;                                                                      \
                head = 0;                                                                          \
            }                                                                                      \
            uint32_t *v = frontier->v;                                                             \
            const size_t fit = (frontier->cap - tail) / 4;                                         \
            const size_t end = head + (tail - head < fit ? tail - head : fit);                     \
            while (head < end) {                                                                   \
                const uint32_t cell = v[head++];                                                   \
                for (int d = 0; d < 4; d++) {                                                      \
                    uint32_t n = cell + step[d];                                                   \
                    if (g->cells[n] != PD_CELL_BLOCKED && labels[n] == 0) {                        \
                        labels[n] = label;                                                         \
                        v[tail++] = n;                                                             \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        *cells = (uint32_t)(moved_out + tail);                                                     \
        return 0;                                                                                  \
    }

PD__FLOOD_UNLABELLED(pd__flood_unlabelled, uint32_t)
PD__FLOOD_UNLABELLED(pd__flood_unlabelled16, uint16_t)
PD__FLOOD_UNLABELLED(pd__flood_unlabelled8, uint8_t)

/* Narrows a full build's 32-bit labels 1..count (sizes[l]: cells of
 * component l) to 8 bits when they fit with escapes: the components of
 * more than PD_COMPONENTS_SMALL_CELLS cells numbered anew in scan order,
 * the others escaped. Returns 1 when done, 0 when more than 254 are
 * large (or memory ran out: the labels then stay as they were). */
static int pd__narrow_with_escapes(pd_components *c, const uint32_t *sizes)
{
    uint8_t *to_label = malloc((size_t)c->count + 1);
    if (!to_label)
        return 0;
    uint32_t large = 0;
    to_label[0] = 0;
    for (uint32_t l = 1; l <= c->count; l++) {
        if (sizes[l] <= PD_COMPONENTS_SMALL_CELLS)
            to_label[l] = PD_COMPONENTS_ESCAPED;
        else if (++large < PD_COMPONENTS_ESCAPED)
            to_label[l] = (uint8_t)large;
    }
    const size_t n = pd__cells_total(c->width, c->height);
    uint8_t *narrow = large < PD_COMPONENTS_ESCAPED ? malloc(n) : NULL;
    if (narrow) {
        const uint32_t *wide = c->labels;
        for (size_t i = 0; i < n; i++)
            narrow[i] = to_label[wide[i]];
        free(c->labels);
        c->labels = narrow;
        c->label_bytes = 1;
        c->next_label = large + 1;
    }
    free(to_label);
    return narrow != NULL;
}

/* The labels pd_components_build gives, built as they were before it
 * built them narrow: 32 bits a cell, then narrowed (4 bytes a cell of
 * scratch). Kept as the reference the narrow build is tested against. */
pd_components *pd_components_build_wide(const pd_grid *g)
{
    if (!g || !g->cells)
        return NULL;
    pd_components *c = pd__components_alloc(g->width, g->height);
    if (!c)
        return NULL;
    /* sizes.v[l]: the cells of component l (v[0] for label 0), grown as
     * labels are given: a map with few components allocates little.
     * Without them escapes are off (16 or 32 bits). */
    pd__cells sizes = { NULL, 0, 0 };
    if (pd__cells_push(&sizes, 0) < 0) {
        free(sizes.v);
        sizes.v = NULL;
    }
    pd__frontier frontier = { NULL, 0 };
    if (pd__frontier_compact(&frontier, 0, 0) < 0) {
        free(sizes.v);
        pd_components_destroy(c);
        return NULL;
    }
    uint32_t *labels = c->labels;
    for (int32_t y = 0; y < g->height; y++) {
        for (int32_t x = 0; x < g->width; x++) {
            uint32_t i = (uint32_t)pd_grid_index(g, x, y);
            if (g->cells[i] != PD_CELL_BLOCKED && labels[i] == 0) {
                uint32_t cells;
                if (pd__flood_unlabelled(labels, c->stride, g, &frontier, i, c->next_label++, &cells) < 0) {
                    free(frontier.v);
                    free(sizes.v);
                    pd_components_destroy(c);
                    return NULL;
                }
                c->count++;
                if (sizes.v && pd__cells_push(&sizes, cells) < 0) {
                    free(sizes.v);
                    sizes.v = NULL;
                }
            }
        }
    }
    free(frontier.v);
    /* Short of memory for the narrow copy, the labels stay 32 bits wide:
     * right, only larger. */
    if (pd_components_bytes_for(c->next_label) == 1 || !sizes.v || !pd__narrow_with_escapes(c, sizes.v))
        (void)pd__set_width(c, pd_components_bytes_for(c->next_label));
    free(sizes.v);
    return c;
}

/* Labels c (its labels: 8 bits, all 0) as pd_components_build_wide
 * would, straight into 8 bits: components numbered 1..n in scan order
 * while n <= 254; at the 255th, the ones found so far are renumbered
 * (large ones in scan order, small ones escaped) and the rest follow that
 * rule: a small component is flooded with a label and then escaped from
 * the frontier buffer, which still holds its cells. Returns 1 when done,
 * 0 when the labels need more than 8 bits (more than 254 large
 * components), -1 (memory). */
static int pd__build8(pd_components *c, const pd_grid *g, pd__frontier *frontier)
{
    uint8_t *labels = c->labels;
    uint32_t sizes[PD_COMPONENTS_ESCAPED];   /* cells of components 1..254, before escaping */
    int escaping = 0;
    uint32_t large = 0;                      /* escaping: the large components labelled */
    for (int32_t y = 0; y < g->height; y++) {
        for (int32_t x = 0; x < g->width; x++) {
            uint32_t i = (uint32_t)pd_grid_index(g, x, y);
            if (g->cells[i] == PD_CELL_BLOCKED || labels[i] != 0)
                continue;
            if (!escaping && c->count == PD_COMPONENTS_ESCAPED - 1) {
                uint8_t to_label[PD_COMPONENTS_ESCAPED + 1] = { 0 };
                for (uint32_t l = 1; l < PD_COMPONENTS_ESCAPED; l++)
                    to_label[l] = sizes[l] <= PD_COMPONENTS_SMALL_CELLS ? PD_COMPONENTS_ESCAPED
                                                                         : (uint8_t)++large;
                const size_t n = pd__cells_total(c->width, c->height);
                for (size_t k = 0; k < n; k++)
                    labels[k] = to_label[labels[k]];
                escaping = 1;
            }
            /* Escaping, a flood's label is the next large one (any nonzero
             * value would do: the cells it meets labelled are its own). */
            uint8_t label = (uint8_t)(!escaping ? c->count + 1
                                                : large < PD_COMPONENTS_ESCAPED - 1 ? large + 1
                                                                                   : large);
            uint32_t cells;
            if (pd__flood_unlabelled8(labels, c->stride, g, frontier, i, label, &cells) < 0)
                return -1;
            c->count++;
            if (!escaping)
                sizes[c->count] = cells;
            else if (cells <= PD_COMPONENTS_SMALL_CELLS)
                for (uint32_t k = 0; k < cells; k++)
                    labels[frontier->v[k]] = PD_COMPONENTS_ESCAPED;
            else if (++large >= PD_COMPONENTS_ESCAPED)
                return 0;
        }
    }
    c->next_label = escaping ? large + 1 : c->count + 1;
    return 1;
}

/* Labels c (its labels: 16 bits, all 0) 1..n in scan order. Returns 1
 * when done, 0 when n > 65535, -1 (memory). */
static int pd__build16(pd_components *c, const pd_grid *g, pd__frontier *frontier)
{
    uint16_t *labels = c->labels;
    for (int32_t y = 0; y < g->height; y++) {
        for (int32_t x = 0; x < g->width; x++) {
            uint32_t i = (uint32_t)pd_grid_index(g, x, y);
            if (g->cells[i] == PD_CELL_BLOCKED || labels[i] != 0)
                continue;
            if (c->count == UINT16_MAX)
                return 0;
            uint32_t cells;
            if (pd__flood_unlabelled16(labels, c->stride, g, frontier, i, (uint16_t)(c->count + 1),
                                       &cells) < 0)
                return -1;
            c->count++;
        }
    }
    c->next_label = c->count + 1;
    return 1;
}

/* Built in the narrowest width that may hold the labels, wider only when
 * a build finds they do not fit: a map of few large components (most
 * maps) takes 1 byte a cell of work, not the 4 of 32-bit labels narrowed
 * afterwards (67 MB at 4096 x 4096). */
pd_components *pd_components_build(const pd_grid *g)
{
    if (!g || !g->cells)
        return NULL;
    pd_components *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->width = g->width;
    c->height = g->height;
    c->stride = g->width + 2;
    pd__frontier frontier = { NULL, 0 };
    if (pd__frontier_compact(&frontier, 0, 0) < 0) {
        free(c);
        return NULL;
    }
    const size_t n = pd__cells_total(g->width, g->height);
    int rc = 0;
    for (uint32_t bytes = 1; bytes <= 2 && rc == 0; bytes *= 2) {
        free(c->labels);
        c->label_bytes = bytes;
        c->count = 0;
        c->next_label = 1;
        if (!(c->labels = calloc(n, bytes)))
            rc = -1;
        else
            rc = bytes == 1 ? pd__build8(c, g, &frontier) : pd__build16(c, g, &frontier);
    }
    free(frontier.v);
    if (rc == 1)
        return c;
    pd_components_destroy(c);
    return rc == 0 ? pd_components_build_wide(g) : NULL;
}

/* ------------------------------------------------ escaped components */

/* The visited set of a small flood: open addressing over twice the cells
 * it can hold, padded index + 1 per slot (0 = empty). */
#define PD__SMALL_SLOTS (2 * PD_COMPONENTS_SMALL_CELLS)

static int pd__small_add(uint32_t *seen, uint32_t cell)
{
    uint32_t at = (cell * 0x9E3779B1u) >> 25; /* 7 bits: PD__SMALL_SLOTS */
    while (seen[at] != 0) {
        if (seen[at] == cell + 1)
            return 0;
        at = (at + 1) & (PD__SMALL_SLOTS - 1);
    }
    seen[at] = cell + 1;
    return 1;
}

/* Floods the escaped component holding padded index `from` into cells[]
 * (breadth-first), stopping once it reaches `stop` (UINT32_MAX: never).
 * Returns the cells found; *reached tells whether stop was among them.
 * The cap keeps a broken invariant from writing past cells[]. */
static uint32_t pd__small_flood(const pd_components *c, uint32_t from, uint32_t stop, uint32_t *cells,
                                int *reached)
{
    const uint32_t step[4] = { 1u, (uint32_t)-1, (uint32_t)c->stride, (uint32_t)-c->stride };
    const uint8_t *v = c->labels;
    uint32_t seen[PD__SMALL_SLOTS];
    memset(seen, 0, sizeof seen);
    uint32_t n = 0;
    (void)pd__small_add(seen, from);
    cells[n++] = from;
    *reached = from == stop;
    for (uint32_t head = 0; head < n && !*reached; head++) {
        for (int d = 0; d < 4 && n < PD_COMPONENTS_SMALL_CELLS; d++) {
            uint32_t nb = cells[head] + step[d];
            if (v[nb] != PD_COMPONENTS_ESCAPED || !pd__small_add(seen, nb))
                continue;
            cells[n++] = nb;
            if (nb == stop) {
                *reached = 1;
                break;
            }
        }
    }
    return n;
}

uint32_t pd_components_small_label(const pd_components *c, size_t i)
{
    uint32_t cells[PD_COMPONENTS_SMALL_CELLS];
    int reached;
    uint32_t n = pd__small_flood(c, (uint32_t)i, UINT32_MAX, cells, &reached);
    uint32_t first = cells[0];
    for (uint32_t k = 1; k < n; k++)
        first = cells[k] < first ? cells[k] : first;
    return PD_COMPONENTS_SMALL_LABEL | first;
}

int pd_components_small_connected(const pd_components *c, size_t a, size_t b)
{
    /* A component of at most PD_COMPONENTS_SMALL_CELLS cells spans fewer
     * steps than that: cells farther apart need no flood. */
    const size_t s = (size_t)c->stride;
    size_t dx = a % s > b % s ? a % s - b % s : b % s - a % s;
    size_t dy = a / s > b / s ? a / s - b / s : b / s - a / s;
    if (dx + dy >= PD_COMPONENTS_SMALL_CELLS)
        return 0;
    uint32_t cells[PD_COMPONENTS_SMALL_CELLS];
    int reached;
    (void)pd__small_flood(c, (uint32_t)a, (uint32_t)b, cells, &reached);
    return reached;
}

static int pd__compare_cell(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

void pd_components_match_init(pd_components_match *m, const pd_components *c, uint32_t label)
{
    m->stored = label == 0 || (label & PD_COMPONENTS_SMALL_LABEL) ? UINT32_MAX : label;
    m->n = 0;
    if (!(label & PD_COMPONENTS_SMALL_LABEL))
        return;
    /* A small label names its first cell, which must be escaped (else the
     * label is not one of c's and matches nothing). */
    size_t first = label & ~PD_COMPONENTS_SMALL_LABEL;
    if (first >= pd__cells_total(c->width, c->height) || !pd_components_escaped(c, pd_components_at(c, first)))
        return;
    int reached;
    m->n = pd__small_flood(c, (uint32_t)first, UINT32_MAX, m->cells, &reached);
    qsort(m->cells, m->n, sizeof *m->cells, pd__compare_cell);
    m->stored = PD_COMPONENTS_ESCAPED;
}

int pd_components_match_small(const pd_components_match *m, size_t i)
{
    uint32_t lo = 0, hi = m->n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (m->cells[mid] == i)
            return 1;
        if (m->cells[mid] < i)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

/* ------------------------------------------------------------ update */

/* The labels an update works on: the stored ones (8, 16 or 32 bits) seen
 * through an overlay that holds every cell the update wrote, marks
 * included. Marks need 32 bits, so the overlay is what lets an update leave
 * narrow labels narrow without a pass over the map: its work is the
 * cells it visits. Open addressing, one 64-bit slot per cell (padded index
 * + 1 in the high half, 0 = empty; the working label in the low half, so a
 * probe reads one cache line), linear probing, grown at half full. At the
 * end the overlay is written back, mark-free, in one step
 * (pd__overlay_flush). */
typedef struct pd__overlay {
    uint64_t *slots;
    size_t n;
    uint32_t bits;            /* capacity is 1 << bits, or 0 when bits is 0 */
} pd__overlay;

/* Slots an overlay starts with: a one-cell update's floods fit. */
#define PD__OVERLAY_FIRST_BITS 10

static size_t pd__overlay_slot(const pd__overlay *o, uint32_t key)
{
    size_t mask = ((size_t)1 << o->bits) - 1;
    size_t at = (size_t)((key * 0x9E3779B1u) >> (32 - o->bits));
    while (o->slots[at] != 0 && (uint32_t)(o->slots[at] >> 32) != key)
        at = (at + 1) & mask;
    return at;
}

static int pd__overlay_grow(pd__overlay *o)
{
    uint32_t bits = o->bits ? o->bits + 1 : PD__OVERLAY_FIRST_BITS;
    pd__overlay bigger = { bits > 31 ? NULL : calloc((size_t)1 << bits, sizeof(uint64_t)), o->n, bits };
    if (!bigger.slots)
        return -1;
    size_t cap = o->bits ? (size_t)1 << o->bits : 0;
    for (size_t i = 0; i < cap; i++) {
        if (o->slots[i] != 0)
            bigger.slots[pd__overlay_slot(&bigger, (uint32_t)(o->slots[i] >> 32))] = o->slots[i];
    }
    free(o->slots);
    *o = bigger;
    return 0;
}

/* One of several floods run side by side, one cell each per round, so the
 * work stays proportional to the smaller parts they explore. */
typedef struct pd__lockstep {
    uint32_t label;           /* the label it floods (merges) */
    pd__cells queue;          /* every cell it marked, in visiting order */
    size_t head;
} pd__lockstep;

/* Scratch shared by the steps of one update; freed at the end. */
typedef struct pd__repair {
    pd_components *c;
    const pd_grid *g;
    pd__overlay ov;           /* the labels this update wrote */
    int32_t x0, y0, x1, y1;   /* the changed rectangle, clipped */
    uint32_t step[4];         /* index offsets of the four neighbours */
    pd__cells closed;         /* cells that became blocked */
    pd__cells seeds;          /* open neighbours of one label's closed cells */
    pd__cells queue;          /* the current flood */
    pd__cells region;         /* a connected group of newly opened cells */
    pd__cells touched;        /* (label, cell) pairs next to a region */
    pd__lockstep *floods;
    size_t n_floods, floods_cap;
    uint32_t n_temps;         /* temporary labels given (PD__TEMP_BASE + 0..n_temps-1) */
} pd__repair;

/* The working label (marks included) of padded cell `cell`. */
static inline uint32_t pd__get(const pd__repair *r, uint32_t cell)
{
    if (r->ov.n) {
        uint64_t slot = r->ov.slots[pd__overlay_slot(&r->ov, cell + 1)];
        if (slot)
            return (uint32_t)slot;
    }
    return pd_components_at(r->c, cell);
}

/* Writes a working label. Returns 0, or -1 when memory ran out. */
static int pd__set(pd__repair *r, uint32_t cell, uint32_t v)
{
    pd__overlay *o = &r->ov;
    if (o->bits == 0 || 2 * (o->n + 1) > ((size_t)1 << o->bits)) {
        if (pd__overlay_grow(o) < 0)
            return -1;
    }
    size_t at = pd__overlay_slot(o, cell + 1);
    o->n += o->slots[at] == 0;
    o->slots[at] = (uint64_t)(cell + 1) << 32 | v;
    return 0;
}

static int pd__new_label(pd_components *c, uint32_t *label)
{
    if (c->next_label >= PD__LABEL_LIMIT)
        return -1;
    *label = c->next_label++;
    return 0;
}

/* Makes room in diff for `more` pairs. Returns 0, or -1 (memory). */
static int pd__diff_reserve(pd_components_diff *diff, size_t more)
{
    if (diff->n + more <= diff->cap)
        return 0;
    size_t cap = diff->cap ? diff->cap : 256;
    while (cap < diff->n + more)
        cap *= 2;
    uint32_t *grown = realloc(diff->pairs, 2 * cap * sizeof *grown);
    if (!grown)
        return -1;
    diff->pairs = grown;
    diff->cap = cap;
    return 0;
}

/* Appends (cell, label) to diff. Returns 0, or -1 (memory). */
static int pd__diff_push(pd_components_diff *diff, uint32_t cell, uint32_t label)
{
    if (pd__diff_reserve(diff, 1) < 0)
        return -1;
    diff->pairs[2 * diff->n] = cell;
    diff->pairs[2 * diff->n + 1] = label;
    diff->n++;
    return 0;
}

static int pd__overlay_has(const pd__overlay *o, uint32_t cell)
{
    return o->n && o->slots[pd__overlay_slot(o, cell + 1)] != 0;
}

/*
 * Widens 8-bit labels to 32 bits, giving each escaped component outside
 * the overlay a new label (in index order; the overlay's cells get theirs
 * from the overlay), and appends those writes to diff (may be NULL): a
 * copy widened without escapes resolved, then given the pairs, ends the
 * same. Returns 0, or -1 (memory; c unchanged).
 */
static int pd__widen_escaped(pd__repair *r, pd_components_diff *diff)
{
    pd_components *c = r->c;
    const size_t n = pd__cells_total(c->width, c->height);
    const uint8_t *narrow = c->labels;
    uint32_t *wide = malloc(n * sizeof *wide);
    if (!wide)
        return -1;
    for (size_t i = 0; i < n; i++)
        wide[i] = narrow[i] == PD_COMPONENTS_ESCAPED ? 0 : narrow[i];
    for (size_t i = 0; i < n; i++) {
        if (narrow[i] != PD_COMPONENTS_ESCAPED || wide[i] != 0 || pd__overlay_has(&r->ov, (uint32_t)i))
            continue;
        uint32_t label = c->next_label++;
        r->queue.n = 0;
        wide[i] = label;
        if (pd__cells_push(&r->queue, (uint32_t)i) < 0)
            goto fail;
        for (size_t head = 0; head < r->queue.n; head++) {
            uint32_t cell = r->queue.v[head];
            if (diff && pd__diff_push(diff, cell, label) < 0)
                goto fail;
            for (int d = 0; d < 4; d++) {
                uint32_t nb = cell + r->step[d];
                if (narrow[nb] != PD_COMPONENTS_ESCAPED || wide[nb] != 0)
                    continue;
                wide[nb] = label;
                if (pd__cells_push(&r->queue, nb) < 0)
                    goto fail;
            }
        }
    }
    free(c->labels);
    c->labels = wide;
    c->label_bytes = sizeof *wide;
    return 0;
fail:
    free(wide);
    return -1;
}

/*
 * The stored label of each temporary one (final[t] for PD__TEMP_BASE + t):
 * a component of at most PD_COMPONENTS_SMALL_CELLS cells stays escaped, a
 * larger one gets a new label. Every cell of a temporary label is in the
 * overlay (escaped components are resolved whole, new parts are flooded
 * whole), so counting the overlay sizes them. When the new labels do not
 * fit 8 bits the labels widen (pd__widen_escaped) and every temporary
 * label gets a label of its own, the width then the narrowest that holds
 * next_label. Returns 0, or -1 (memory).
 */
static int pd__final_labels(pd__repair *r, pd_components_diff *diff, uint32_t *final)
{
    pd_components *c = r->c;
    uint32_t *sizes = calloc(r->n_temps, sizeof *sizes);
    if (!sizes)
        return -1;
    size_t cap = r->ov.bits ? (size_t)1 << r->ov.bits : 0;
    for (size_t i = 0; i < cap; i++) {
        uint32_t label = (uint32_t)r->ov.slots[i];
        if (r->ov.slots[i] != 0 && label >= PD__TEMP_BASE)
            sizes[label - PD__TEMP_BASE]++;
    }
    uint32_t large = 0;
    for (uint32_t t = 0; t < r->n_temps; t++)
        large += sizes[t] > PD_COMPONENTS_SMALL_CELLS;
    int widen = pd_components_bytes_for(c->next_label + large) > 1;
    if (widen && pd__widen_escaped(r, diff) < 0) {
        free(sizes);
        return -1;
    }
    int rc = 0;
    for (uint32_t t = 0; t < r->n_temps && rc == 0; t++) {
        final[t] = PD_COMPONENTS_ESCAPED;
        if (sizes[t] > (widen ? 0 : PD_COMPONENTS_SMALL_CELLS))
            rc = pd__new_label(c, &final[t]);
    }
    free(sizes);
    /* Short of memory for the narrower copy, the labels stay 32 bits
     * wide (the diff says so): right, only larger. */
    if (widen)
        (void)pd__set_width(c, pd_components_bytes_for(c->next_label));
    return rc;
}

/* Writes the overlay (now free of marks) back into the stored labels,
 * temporary labels replaced by their final ones, widening first if a new
 * label does not fit their width, and appends what it wrote to diff (may
 * be NULL). */
static int pd__overlay_flush(pd__repair *r, pd_components_diff *diff)
{
    pd_components *c = r->c;
    uint32_t *final = NULL;
    if (r->n_temps > 0) {
        if (!(final = malloc(r->n_temps * sizeof *final)) || pd__final_labels(r, diff, final) < 0) {
            free(final);
            return -1;
        }
    } else {
        uint32_t need = pd_components_bytes_for(c->next_label);
        if (need > c->label_bytes && pd__set_width(c, need) != 0)
            return -1;
    }
    if (diff && pd__diff_reserve(diff, r->ov.n) < 0) {
        free(final);
        return -1;
    }
    size_t cap = r->ov.bits ? (size_t)1 << r->ov.bits : 0;
    for (size_t i = 0; i < cap; i++) {
        uint64_t slot = r->ov.slots[i];
        if (slot == 0)
            continue;
        uint32_t at = (uint32_t)(slot >> 32) - 1, label = (uint32_t)slot;
        if (label >= PD__TEMP_BASE)
            label = final[label - PD__TEMP_BASE];
        pd__put(c, at, label);
        if (diff)
            (void)pd__diff_push(diff, at, label); /* room reserved above */
    }
    free(final);
    if (diff) {
        diff->next_label = c->next_label;
        diff->count = c->count;
        diff->label_bytes = c->label_bytes;
    }
    return 0;
}

int pd_components_apply_diff(pd_components *c, const pd_components_diff *diff)
{
    /* c may already be wider than the diff's width (it then stays so):
     * every label the diff holds fits either, but an escape does not mean
     * one in wider labels. A copy the diff's updates started from is never
     * wider than they end (widths only grow), so that is refused. */
    if (diff->label_bytes == 1 && c->label_bytes > 1 && diff->n > 0)
        return -1;
    if (diff->label_bytes > c->label_bytes && pd__set_width(c, diff->label_bytes) != 0)
        return -1;
    for (size_t i = 0; i < diff->n; i++)
        pd__put(c, diff->pairs[2 * i], diff->pairs[2 * i + 1]);
    if (diff->n > 0) {
        c->next_label = diff->next_label;
        c->count = diff->count;
    }
    return 0;
}

void pd_components_diff_free(pd_components_diff *diff)
{
    free(diff->pairs);
    memset(diff, 0, sizeof *diff);
}

/* The label a component the update makes starts with: in 8 bits a
 * temporary one (the end decides whether it stays escaped), else a new
 * label. */
static int pd__new_component_label(pd__repair *r, uint32_t *label)
{
    if (r->c->label_bytes != 1)
        return pd__new_label(r->c, label);
    if (r->n_temps >= PD__SEED - PD__TEMP_BASE)
        return -1;
    *label = PD__TEMP_BASE + r->n_temps++;
    return 0;
}

/*
 * Gives every escaped component within one cell of the changed rectangle
 * a temporary label of its own, on all its cells, in the overlay, so the
 * repair tells escaped components apart as it does labelled ones. Those
 * are all it can meet: it reads the rectangle's cells and their
 * neighbours, and floods only components met there (an escaped cell's
 * neighbours outside the rectangle are in its own component).
 */
static int pd__resolve_escaped(pd__repair *r)
{
    if (r->c->label_bytes != 1)
        return 0;
    for (int32_t y = r->y0 - 1; y <= r->y1 + 1; y++) {
        for (int32_t x = r->x0 - 1; x <= r->x1 + 1; x++) {
            uint32_t i = (uint32_t)pd_grid_index(r->g, x, y);
            if (pd__get(r, i) != PD_COMPONENTS_ESCAPED)
                continue;
            uint32_t temp;
            r->queue.n = 0;
            if (pd__new_component_label(r, &temp) < 0 || pd__set(r, i, temp) < 0 ||
                pd__cells_push(&r->queue, i) < 0)
                return -1;
            for (size_t head = 0; head < r->queue.n; head++) {
                for (int d = 0; d < 4; d++) {
                    uint32_t nb = r->queue.v[head] + r->step[d];
                    if (pd__get(r, nb) != PD_COMPONENTS_ESCAPED)
                        continue;
                    if (pd__set(r, nb, temp) < 0 || pd__cells_push(&r->queue, nb) < 0)
                        return -1;
                }
            }
        }
    }
    return 0;
}

static void pd__coords(const pd_components *c, uint32_t cell, int32_t *x, int32_t *y)
{
    *x = (int32_t)(cell % (uint32_t)c->stride) - 1;
    *y = (int32_t)(cell / (uint32_t)c->stride) - 1;
}

/* Orders (label, cell) pairs, stored flat in a pd__cells, by label. */
static int pd__compare_pair(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/*
 * Groups the seeds by what reaches what inside [bx0..bx1] x [by0..by1]:
 * floods the cells labelled `label` from the first seed, then from each seed
 * no flood has reached yet, each flood giving its seeds its group number
 * (group[i] for seed i). One group proves the closed cells cut nothing.
 * Every cell of the box is visited at most once in all, and the first
 * flood stops as soon as it has reached every seed. Marks are cleared again
 * before returning; seed marks stay. Returns the number of groups, or -1
 * (allocation failure).
 */
static long pd__group_seeds(pd__repair *r, uint32_t label, int32_t bx0, int32_t by0, int32_t bx1,
                            int32_t by1, uint32_t *group)
{
    size_t reached = 0;
    long groups = 0;
    int failed = 0;
    r->queue.n = 0;
    for (size_t s = 0; s < r->seeds.n && !failed && reached < r->seeds.n; s++) {
        uint32_t first = r->seeds.v[s];
        uint32_t lab = pd__get(r, first);
        if (lab & PD__VISITED)
            continue;
        uint32_t mark = PD__VISITED | (uint32_t)groups++;
        size_t head = r->queue.n;
        if (pd__set(r, first, (lab & PD__SEED) | mark) < 0 || pd__cells_push(&r->queue, first) < 0)
            return -1;
        for (; head < r->queue.n; head++) {
            uint32_t cell = r->queue.v[head];
            if ((pd__get(r, cell) & PD__SEED) && ++reached == r->seeds.n)
                break;
            int32_t x, y;
            pd__coords(r->c, cell, &x, &y);
            for (int d = 0; d < 4 && !failed; d++) {
                uint32_t n = cell + r->step[d];
                uint32_t nl = pd__get(r, n);
                if ((nl & ~PD__SEED) != label)
                    continue;
                int32_t nx = x + (d == 0) - (d == 1), ny = y + (d == 2) - (d == 3);
                if (nx < bx0 || nx > bx1 || ny < by0 || ny > by1)
                    continue;
                failed = pd__set(r, n, (nl & PD__SEED) | mark) < 0 || pd__cells_push(&r->queue, n) < 0;
            }
            if (failed)
                break;
        }
    }
    if (failed)
        return -1;
    for (size_t i = 0; i < r->seeds.n; i++)
        group[i] = pd__get(r, r->seeds.v[i]) & ~(PD__MARKS);
    /* Every queued cell is in the overlay already: clearing cannot fail. */
    for (size_t i = 0; i < r->queue.n; i++) {
        uint32_t lab = pd__get(r, r->queue.v[i]);
        (void)pd__set(r, r->queue.v[i], (lab & PD__SEED) | label);
    }
    return groups;
}

/* Makes room for n lock-step floods, each starting with an empty queue. */
static int pd__reserve_floods(pd__repair *r, size_t n)
{
    if (n > r->floods_cap) {
        pd__lockstep *floods = realloc(r->floods, n * sizeof *floods);
        if (!floods)
            return -1;
        memset(&floods[r->floods_cap], 0, (n - r->floods_cap) * sizeof *floods);
        r->floods = floods;
        r->floods_cap = n;
    }
    for (size_t i = 0; i < n; i++) {
        r->floods[i].queue.n = 0;
        r->floods[i].head = 0;
    }
    r->n_floods = n;
    return 0;
}

static size_t pd__set_find(size_t *parent, size_t i)
{
    while (parent[i] != i) {
        parent[i] = parent[parent[i]];
        i = parent[i];
    }
    return i;
}

/*
 * Splits the old component `label` into its parts after the local proof
 * failed. One flood starts from each group of seeds (pd__group_seeds: seeds
 * the bounded flood found connected start one flood together, so floods
 * that would only meet again around the closed cells are one from the
 * start); a cell carries PD__VISITED plus the index of the flood that
 * reached it, and floods that meet join one set. A set whose floods are
 * all exhausted is a whole part and gets a new label. Once a single set is
 * still growing, everything not yet claimed belongs to it (each surviving
 * cell reaches some seed), so it keeps `label` without being flooded to
 * the end: a few cells cut off a big component cost only their own size.
 */
static int pd__split_component(pd__repair *r, uint32_t label, const uint32_t *group, size_t n)
{
    pd_components *c = r->c;
    if (pd__reserve_floods(r, n) < 0)
        return -1;
    /* parent: union-find over floods; growing: live floods per set root;
     * fresh: the new label given to an exhausted set's root. */
    size_t *parent = malloc(n * sizeof *parent);
    size_t *growing = malloc(n * sizeof *growing);
    uint32_t *fresh = calloc(n, sizeof *fresh);
    int rc = -1;
    if (!parent || !growing || !fresh)
        goto out;
    for (size_t i = 0; i < n; i++) {
        parent[i] = i;
        growing[i] = 1;
    }
    for (size_t s = 0; s < r->seeds.n; s++) {
        if (pd__set(r, r->seeds.v[s], PD__VISITED | group[s]) < 0 ||
            pd__cells_push(&r->floods[group[s]].queue, r->seeds.v[s]) < 0)
            goto out;
    }
    size_t live_sets = n;
    while (live_sets > 1) {
        for (size_t i = 0; i < n && live_sets > 1; i++) {
            pd__lockstep *f = &r->floods[i];
            if (f->head == f->queue.n)
                continue;
            uint32_t cell = f->queue.v[f->head++];
            for (int d = 0; d < 4; d++) {
                uint32_t nb = cell + r->step[d];
                uint32_t lab = pd__get(r, nb);
                if (lab == label) {
                    if (pd__set(r, nb, PD__VISITED | (uint32_t)i) < 0 || pd__cells_push(&f->queue, nb) < 0)
                        goto out;
                } else if (lab & PD__VISITED) {
                    size_t a = pd__set_find(parent, i);
                    size_t b = pd__set_find(parent, lab & ~PD__VISITED);
                    if (a != b) {
                        parent[b] = a;
                        growing[a] += growing[b];
                        live_sets--;
                    }
                }
            }
            if (f->head == f->queue.n && --growing[pd__set_find(parent, i)] == 0)
                live_sets--;
        }
    }
    uint32_t parts = 1;
    for (size_t i = 0; i < n; i++) {
        size_t root = pd__set_find(parent, i);
        uint32_t to = label;
        if (growing[root] == 0) {
            if (fresh[root] == 0) {
                if (pd__new_component_label(r, &fresh[root]) < 0)
                    goto out;
                parts++;
            }
            to = fresh[root];
        }
        pd__lockstep *f = &r->floods[i];
        for (size_t j = 0; j < f->queue.n; j++)
            (void)pd__set(r, f->queue.v[j], to); /* in the overlay already */
    }
    c->count += parts - 1;
    rc = 0;
out:
    free(parent);
    free(growing);
    free(fresh);
    return rc;
}

/*
 * Repairs one old label after its cells in closed[from..to) were blocked.
 * closed[] holds (label, cell) pairs sorted by label.
 */
static int pd__repair_label(pd__repair *r, uint32_t label, size_t from, size_t to)
{
    pd_components *c = r->c;
    r->seeds.n = 0;
    for (size_t i = from; i < to; i += 2) {
        uint32_t cell = r->closed.v[i + 1];
        for (int d = 0; d < 4; d++) {
            uint32_t n = cell + r->step[d];
            if (pd__get(r, n) != label)
                continue; /* closed, opened this time, already a seed */
            if (pd__set(r, n, label | PD__SEED) < 0 || pd__cells_push(&r->seeds, n) < 0)
                return -1;
        }
    }
    if (r->seeds.n == 0) {
        /* Every cell of the component was closed. */
        c->count--;
        return 0;
    }
    long groups = 1;
    uint32_t *group = NULL;
    if (r->seeds.n > 1) {
        int32_t m = PD_COMPONENTS_REPAIR_MARGIN;
        if (!(group = malloc(r->seeds.n * sizeof *group)))
            return -1;
        groups = pd__group_seeds(r, label, r->x0 - m, r->y0 - m, r->x1 + m, r->y1 + m, group);
    }
    int rc = groups < 0 ? -1 : 0;
    if (groups == 1)
        for (size_t i = 0; i < r->seeds.n; i++)
            (void)pd__set(r, r->seeds.v[i], label); /* in the overlay already */
    else if (groups > 1)
        rc = pd__split_component(r, label, group, (size_t)groups);
    free(group);
    return rc;
}

/* Step 1: blocks the cells that closed and repairs the labels they had. */
static int pd__apply_closed(pd__repair *r)
{
    for (int32_t y = r->y0; y <= r->y1; y++) {
        for (int32_t x = r->x0; x <= r->x1; x++) {
            uint32_t i = (uint32_t)pd_grid_index(r->g, x, y);
            uint32_t lab = pd__get(r, i);
            if (lab == 0 || r->g->cells[i] != PD_CELL_BLOCKED)
                continue;
            if (pd__cells_push(&r->closed, lab) < 0 || pd__cells_push(&r->closed, i) < 0 ||
                pd__set(r, i, 0) < 0)
                return -1;
        }
    }
    if (r->closed.n == 0)
        return 0;
    qsort(r->closed.v, r->closed.n / 2, 2 * sizeof *r->closed.v, pd__compare_pair);
    for (size_t from = 0; from < r->closed.n;) {
        uint32_t label = r->closed.v[from];
        size_t to = from;
        while (to < r->closed.n && r->closed.v[to] == label)
            to += 2;
        if (pd__repair_label(r, label, from, to) < 0)
            return -1;
        from = to;
    }
    return 0;
}

/* Collects the connected group of newly opened cells containing `start`
 * (marked PD__VISITED with label 0) and the labelled cells around it. */
static int pd__collect_region(pd__repair *r, uint32_t start)
{
    r->region.n = 0;
    r->touched.n = 0;
    if (pd__set(r, start, PD__VISITED) < 0 || pd__cells_push(&r->region, start) < 0)
        return -1;
    for (size_t head = 0; head < r->region.n; head++) {
        uint32_t cell = r->region.v[head];
        for (int d = 0; d < 4; d++) {
            uint32_t n = cell + r->step[d];
            uint32_t lab = pd__get(r, n);
            if (lab == PD__VISITED)
                continue;
            if (lab != 0) {
                if (pd__cells_push(&r->touched, lab) < 0 || pd__cells_push(&r->touched, n) < 0)
                    return -1;
                continue;
            }
            /* Label 0 and passable is an opened cell, and those lie only
             * inside the rectangle. */
            if (r->g->cells[n] == PD_CELL_BLOCKED)
                continue;
            if (pd__set(r, n, PD__VISITED) < 0 || pd__cells_push(&r->region, n) < 0)
                return -1;
        }
    }
    return 0;
}

/* Advances one lock-step flood by one cell; returns 0 when it is exhausted,
 * 1 while it still grows, -1 on allocation failure. */
static int pd__lockstep_step(pd__repair *r, pd__lockstep *f)
{
    if (f->head == f->queue.n)
        return 0;
    uint32_t cell = f->queue.v[f->head++];
    for (int d = 0; d < 4; d++) {
        uint32_t n = cell + r->step[d];
        if (pd__get(r, n) != f->label)
            continue;
        if (pd__set(r, n, f->label | PD__VISITED) < 0 || pd__cells_push(&f->queue, n) < 0)
            return -1;
    }
    return 1;
}

/*
 * Gives the region just collected its label: a new one when it touches no
 * component, else the label of the largest component it touches, into which
 * the others are relabelled.
 */
static int pd__join_region(pd__repair *r)
{
    pd_components *c = r->c;
    size_t pairs = r->touched.n / 2;
    if (pairs > 0)
        qsort(r->touched.v, pairs, 2 * sizeof *r->touched.v, pd__compare_pair);
    r->n_floods = 0;
    for (size_t i = 0; i < pairs; i++) {
        uint32_t label = r->touched.v[2 * i], cell = r->touched.v[2 * i + 1];
        if (i > 0 && label == r->touched.v[2 * (i - 1)])
            continue;
        pd__lockstep *f = &r->floods[r->n_floods++];
        f->label = label;
        f->queue.n = 0;
        f->head = 0;
        if (pd__set(r, cell, label | PD__VISITED) < 0 || pd__cells_push(&f->queue, cell) < 0)
            return -1;
    }
    uint32_t target;
    size_t keeper = 0;
    if (r->n_floods == 0) {
        if (pd__new_component_label(r, &target) < 0)
            return -1;
        c->count++;
    } else {
        /* Flood all touched components one cell each per round; the one
         * still growing when all others are exhausted is the largest. */
        size_t growing = r->n_floods;
        char *done = calloc(r->n_floods, 1);
        if (!done)
            return -1;
        while (growing > 1) {
            for (size_t i = 0; i < r->n_floods && growing > 1; i++) {
                if (done[i])
                    continue;
                int s = pd__lockstep_step(r, &r->floods[i]);
                if (s < 0) {
                    free(done);
                    return -1;
                }
                if (s == 0) {
                    done[i] = 1;
                    growing--;
                }
            }
        }
        /* The loop stops as soon as one flood is left growing. */
        for (size_t i = 0; i < r->n_floods; i++)
            if (!done[i])
                keeper = i;
        free(done);
        target = r->floods[keeper].label;
        /* Exhausted floods hold whole components; the keeper's holds only
         * the cells it marked, which just lose the mark. All are in the
         * overlay already. */
        for (size_t i = 0; i < r->n_floods; i++) {
            pd__lockstep *f = &r->floods[i];
            for (size_t j = 0; j < f->queue.n; j++)
                (void)pd__set(r, f->queue.v[j], target);
        }
        c->count -= (uint32_t)(r->n_floods - 1);
    }
    for (size_t i = 0; i < r->region.n; i++)
        (void)pd__set(r, r->region.v[i], target); /* in the overlay already */
    return 0;
}

/* Step 2: gives the cells that opened their labels. */
static int pd__apply_opened(pd__repair *r)
{
    for (int32_t y = r->y0; y <= r->y1; y++) {
        for (int32_t x = r->x0; x <= r->x1; x++) {
            uint32_t i = (uint32_t)pd_grid_index(r->g, x, y);
            if (pd__get(r, i) != 0 || r->g->cells[i] == PD_CELL_BLOCKED)
                continue;
            if (pd__collect_region(r, i) < 0)
                return -1;
            /* A region touches at most as many components as it has
             * labelled neighbours. */
            if (pd__reserve_floods(r, r->touched.n / 2) < 0)
                return -1;
            if (pd__join_region(r) < 0)
                return -1;
        }
    }
    return 0;
}

int pd_components_update(pd_components *c, const pd_grid *g, int32_t x0, int32_t y0, int32_t x1,
                         int32_t y1)
{
    return pd_components_update_diff(c, g, x0, y0, x1, y1, NULL);
}

int pd_components_update_diff(pd_components *c, const pd_grid *g, int32_t x0, int32_t y0, int32_t x1,
                              int32_t y1, pd_components_diff *diff)
{
    if (!c || !c->labels || !g || !g->cells || c->width != g->width || c->height != g->height)
        return -1;
    if (x0 > x1) {
        int32_t t = x0;
        x0 = x1;
        x1 = t;
    }
    if (y0 > y1) {
        int32_t t = y0;
        y0 = y1;
        y1 = t;
    }
    if (x1 < 0 || y1 < 0 || x0 >= g->width || y0 >= g->height)
        return 0;
    pd__repair r;
    memset(&r, 0, sizeof r);
    r.c = c;
    r.g = g;
    r.x0 = x0 < 0 ? 0 : x0;
    r.y0 = y0 < 0 ? 0 : y0;
    r.x1 = x1 >= g->width ? g->width - 1 : x1;
    r.y1 = y1 >= g->height ? g->height - 1 : y1;
    r.step[0] = 1u;
    r.step[1] = (uint32_t)-1;
    r.step[2] = (uint32_t)c->stride;
    r.step[3] = (uint32_t)-c->stride;
    int rc = pd__resolve_escaped(&r);
    if (rc == 0)
        rc = pd__apply_closed(&r);
    if (rc == 0)
        rc = pd__apply_opened(&r);
    /* The stored labels change only here, all at once: a failed update
     * leaves them as they were, unless the write-back had widened them
     * (8 bits, escapes labelled) when it failed: they are then right for
     * the old cells but not the new, so the caller rebuilds (pd_scene_update.c
     * does, on any failure). */
    if (rc == 0)
        rc = pd__overlay_flush(&r, diff);
    free(r.ov.slots);
    free(r.closed.v);
    free(r.seeds.v);
    free(r.queue.v);
    free(r.region.v);
    free(r.touched.v);
    for (size_t i = 0; i < r.floods_cap; i++)
        free(r.floods[i].queue.v);
    free(r.floods);
    return rc;
}
