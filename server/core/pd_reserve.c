/*
 * pd_reserve.c - the reservation table of pd_reserve.h.
 *
 * Two open-addressing hash maps (uint64 key -> uint32 index, linear probing,
 * backward-shift deletion) find an agent's record by its id and a cell's
 * span array by (x, y). Records live in two arrays whose free slots are
 * chained, so an index stays valid while its agent or cell lives: a span
 * names its holder by slot, and the planner compares slots, not ids.
 *
 * Atomic replace: pd_reserve_replace first checks what can refuse without
 * reading cells (the plan's shape, the limits), then in one pass over the
 * new entries' cells finds or makes each cell, checks it for another
 * agent's overlapping span, and notes its index; then it allocates the rest
 * the change could need (the agent's record and entry array, room for one
 * more span per entry in each cell) before it changes anything. Truncation
 * and insertion after that only move data inside what exists (the noted
 * indices: no second lookup), so they cannot fail halfway. A refused or
 * failed preparation undoes only its own additions: cells it created empty.
 *
 * Why it is shaped so (ReservePath on an empty table is a JPS plus this):
 * one hash lookup per cell an entry covers, not three; the entries and the
 * indices in scratch arrays the table keeps; and a cell record that empties
 * keeps a small span array for the next cell made in its place, so the
 * cells a plan makes cost no allocation in the steady state.
 */
#include "pd_reserve.h"

#include <stdlib.h>
#include <string.h>

#include "pd_clearance.h"

#define PD__NONE UINT32_MAX
/* Anchors stay below this so that x + unit and the boxes never overflow. */
#define PD__MAX_COORD (INT32_MAX - 2 * PD_UNIT_SIZE_MAX)

/* A wait (dx = dy = 0) at anchor (x, y), or a move from (x, y) by (dx, dy);
 * either holds its box (pd__box) over [t0, t1). The public pd_reserve_raw
 * itself, so that pd_reserve_export hands out the agent's array as it is. */
typedef pd_reserve_raw pd__entry;

typedef struct pd__agent {
    uint64_t id;
    pd__entry *e;            /* time order; they tile [e[0].t0, e[n-1].t1) */
    uint32_t n, cap;
    int64_t renewed_ms;
    uint64_t bytes;          /* accounted, see pd__entry_bytes */
    uint64_t spans;          /* spans it holds on cells */
    uint32_t next_free;      /* chains free records */
    int live;
    int64_t cut_ms;          /* pd_reserve_block_cells' mark: PD__NO_CUT outside it */
    int was_cut;             /* cut by a block since its last replace */
    uint32_t next_cut;       /* chains the marked agents */
    double speed;            /* pd_reserve_note_speed's; 0 unknown */
} pd__agent;

#define PD__NO_CUT INT64_MAX

typedef struct pd__cell {
    uint64_t key;
    pd_reserve_span *s;      /* sorted, disjoint */
    uint32_t n, cap;
    uint32_t pending;        /* spans the replace being prepared may add here */
    uint32_t next_free;
} pd__cell;

typedef struct pd__map {
    uint64_t *keys;
    uint32_t *vals;          /* PD__NONE marks an empty slot */
    uint32_t cap, n;         /* cap: 0 or a power of two */
} pd__map;

struct pd_reserve {
    pd_reserve_limits limits;

    pd__map agent_map;
    pd__agent *agents;
    uint32_t n_agents, cap_agents;   /* records used (live or free) and allocated */
    uint32_t free_agent, live_agents;

    pd__map cell_map;
    pd__cell *cells;
    uint32_t n_cells, cap_cells;
    uint32_t free_cell, live_cells;

    uint64_t entries, spans;

    /* The latest game time heard of (t0 of a replace, touch; the largest
     * renewal, live or released: pd_reserve_set_renewed takes back a
     * replace that was no renewal), and when pd_reserve_maintain last ran;
     * gone_ms: the largest renewal of the agents removed. */
    int64_t now_ms, maintained_ms, gone_ms;

    /* pd_reserve_replace's scratch: the cells it prepared, the plan's
     * entries, and the cell of each (entry, cell of its box) in order. */
    uint32_t *touched;
    uint32_t n_touched, cap_touched;
    pd__entry *ne;
    uint32_t cap_ne;
    uint32_t *boxci;
    uint32_t cap_boxci;

    /* pd_reserve_set_observer's: told every change that was made. */
    pd_reserve_observer observer;
    void *observer_user;
};

/* A cell record that empties keeps a span array of up to this many spans
 * for the next cell made in its place (so the free records hold at most
 * that much each: bounded by the most cells the table ever held). */
#define PD__KEEP_SPANS 8u
#define PD__KEEP_ENTRIES 64u

/* ---- the observer hook (pd_reserve_set_observer; the reservation log) ---- */

void pd_reserve_set_observer(pd_reserve *t, pd_reserve_observer fn, void *user)
{
    t->observer = fn;
    t->observer_user = user;
}

static void pd__observe(const pd_reserve *t, const pd_reserve_op *op)
{
    if (t->observer)
        t->observer(t->observer_user, op);
}

/* ---- hash maps ---- */

static uint32_t pd__hash(uint64_t k, uint32_t cap)
{
    /* The MurmurHash3 finaliser: cell keys and sequential agent ids both
     * spread over the table. */
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return (uint32_t)k & (cap - 1u);
}

static uint32_t pd__map_find(const pd__map *m, uint64_t key)
{
    if (m->cap == 0)
        return PD__NONE;
    for (uint32_t i = pd__hash(key, m->cap);; i = (i + 1u) & (m->cap - 1u)) {
        if (m->vals[i] == PD__NONE)
            return PD__NONE;
        if (m->keys[i] == key)
            return m->vals[i];
    }
}

/* Makes room for `need` keys at a load of at most one half. 0, or -1 with
 * the map unchanged. */
static int pd__map_reserve(pd__map *m, uint64_t need)
{
    if (need * 2u <= m->cap)
        return 0;
    uint64_t cap = m->cap ? m->cap : 16u;
    while (cap < need * 2u)
        cap *= 2u;
    if (cap > ((uint64_t)1 << 31))
        return -1;
    uint64_t *keys = malloc(cap * sizeof *keys);
    uint32_t *vals = malloc(cap * sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return -1;
    }
    memset(vals, 0xff, cap * sizeof *vals);
    pd__map old = *m;
    m->keys = keys;
    m->vals = vals;
    m->cap = (uint32_t)cap;
    m->n = 0;
    for (uint32_t i = 0; i < old.cap; i++) {
        if (old.vals[i] == PD__NONE)
            continue;
        uint32_t j = pd__hash(old.keys[i], m->cap);
        while (m->vals[j] != PD__NONE)
            j = (j + 1u) & (m->cap - 1u);
        m->keys[j] = old.keys[i];
        m->vals[j] = old.vals[i];
        m->n++;
    }
    free(old.keys);
    free(old.vals);
    return 0;
}

/* Adds a key that is not in the map; room must have been reserved. */
static void pd__map_put(pd__map *m, uint64_t key, uint32_t val)
{
    uint32_t i = pd__hash(key, m->cap);
    while (m->vals[i] != PD__NONE)
        i = (i + 1u) & (m->cap - 1u);
    m->keys[i] = key;
    m->vals[i] = val;
    m->n++;
}

static void pd__map_del(pd__map *m, uint64_t key)
{
    const uint32_t mask = m->cap - 1u;
    uint32_t i = pd__hash(key, m->cap);
    while (m->keys[i] != key || m->vals[i] == PD__NONE) {
        if (m->vals[i] == PD__NONE)
            return;
        i = (i + 1u) & mask;
    }
    /* Backward shift: pull later keys of the probe run into the hole when
     * the hole lies between their home and where they sit. */
    for (uint32_t j = (i + 1u) & mask; m->vals[j] != PD__NONE; j = (j + 1u) & mask) {
        uint32_t home = pd__hash(m->keys[j], m->cap);
        if (((j - home) & mask) >= ((j - i) & mask)) {
            m->keys[i] = m->keys[j];
            m->vals[i] = m->vals[j];
            i = j;
        }
    }
    m->vals[i] = PD__NONE;
    m->n--;
}

static void pd__map_free(pd__map *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

/* Doubles *buf (from `first` items) until it holds `need` items of `size`
 * bytes; 0, or -1 with *buf as it was. Counts stay below 2^31, so the
 * uint32_t counts and indices never wrap. */
static int pd__grow(void **buf, uint32_t *cap, uint64_t need, size_t size, uint32_t first)
{
    if (need <= *cap)
        return 0;
    uint64_t c = *cap ? *cap : first;
    while (c < need)
        c *= 2u;
    if (c > ((uint64_t)1 << 31))
        return -1;
    void *b = realloc(*buf, (size_t)c * size);
    if (!b)
        return -1;
    *buf = b;
    *cap = (uint32_t)c;
    return 0;
}

/* ---- entries and cells ---- */

static uint64_t pd__cell_key(int32_t x, int32_t y)
{
    return ((uint64_t)(uint32_t)y << 32) | (uint32_t)x;
}

/* The cells an entry holds, inclusive. */
static void pd__box(const pd__entry *e, int32_t *x0, int32_t *y0, int32_t *x1, int32_t *y1)
{
    const int32_t bx = e->x + e->dx, by = e->y + e->dy, k = e->unit;
    *x0 = e->x < bx ? e->x : bx;
    *y0 = e->y < by ? e->y : by;
    *x1 = (e->x > bx ? e->x : bx) + k - 1;
    *y1 = (e->y > by ? e->y : by) + k - 1;
}

static uint64_t pd__entry_bytes(const pd__entry *e)
{
    int32_t x0, y0, x1, y1;
    pd__box(e, &x0, &y0, &x1, &y1);
    return sizeof(pd__entry) + (uint64_t)(x1 - x0 + 1) * (uint64_t)(y1 - y0 + 1) * sizeof(pd_reserve_span);
}

/* Entries of a plan: each waypoint's wait when it lasts, and each move. */
static size_t pd__plan_entries(const pd_waypoint *wp, size_t n, uint32_t unit, pd__entry *out)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (wp[i].t_leave_ms > wp[i].t_arrive_ms) {
            if (out)
                out[m] = (pd__entry){ .t0 = wp[i].t_arrive_ms, .t1 = wp[i].t_leave_ms, .x = wp[i].x,
                                      .y = wp[i].y, .unit = (uint8_t)unit };
            m++;
        }
        if (i + 1 < n) {
            if (out)
                out[m] = (pd__entry){ .t0 = wp[i].t_leave_ms, .t1 = wp[i + 1].t_arrive_ms, .x = wp[i].x,
                                      .y = wp[i].y, .dx = (int8_t)(wp[i + 1].x - wp[i].x),
                                      .dy = (int8_t)(wp[i + 1].y - wp[i].y), .unit = (uint8_t)unit };
            m++;
        }
    }
    return m;
}

/* Index of the first span on c that ends after t. */
static uint32_t pd__first_after(const pd__cell *c, int64_t t)
{
    return (uint32_t)pd_reserve_first_ending_after(c->s, c->n, sizeof *c->s, t);
}

static void pd__cell_free(pd_reserve *t, uint32_t ci)
{
    pd__cell *c = &t->cells[ci];
    pd__map_del(&t->cell_map, c->key);
    pd_reserve_span *keep = c->cap <= PD__KEEP_SPANS ? c->s : NULL;
    if (!keep)
        free(c->s);
    *c = (pd__cell){ .s = keep, .cap = keep ? c->cap : 0u, .next_free = t->free_cell };
    t->free_cell = ci;
    t->live_cells--;
}

/* A cell that lost its last span leaves the map, unless a replace being
 * committed is about to add to it. */
static void pd__cell_settle(pd_reserve *t, uint32_t ci)
{
    if (t->cells[ci].n == 0 && t->cells[ci].pending == 0)
        pd__cell_free(t, ci);
}

/* Keeps slot's spans on cell ci to [from, until): the rest goes, and a span
 * across either end is trimmed to it. */
static void pd__cell_clip(pd_reserve *t, uint32_t ci, uint32_t slot, int64_t from, int64_t until)
{
    pd__cell *c = &t->cells[ci];
    uint32_t w = 0;
    uint64_t removed = 0;
    for (uint32_t r = 0; r < c->n; r++) {
        pd_reserve_span s = c->s[r];
        if (s.slot == slot) {
            if (s.t1 <= from || s.t0 >= until) {
                removed++;
                continue;
            }
            s.t0 = s.t0 > from ? s.t0 : from;
            s.t1 = s.t1 < until ? s.t1 : until;
        }
        c->s[w++] = s;
    }
    c->n = w;
    t->spans -= removed;
    t->agents[slot].spans -= removed;
    pd__cell_settle(t, ci);
}

/* pd__cell_clip on every cell of e's box that holds spans. */
static void pd__clip_box(pd_reserve *t, const pd__entry *e, uint32_t slot, int64_t from, int64_t until)
{
    int32_t x0, y0, x1, y1;
    pd__box(e, &x0, &y0, &x1, &y1);
    for (int32_t y = y0; y <= y1; y++)
        for (int32_t x = x0; x <= x1; x++) {
            uint32_t ci = pd__map_find(&t->cell_map, pd__cell_key(x, y));
            if (ci != PD__NONE)
                pd__cell_clip(t, ci, slot, from, until);
        }
}

/* Adds slot's span [t0, t1) to cell ci, merging with the slot's spans it
 * touches. Room was reserved and no other span overlaps it. */
static void pd__cell_add(pd_reserve *t, uint32_t ci, uint32_t slot, int64_t t0, int64_t t1)
{
    pd__cell *c = &t->cells[ci];
    uint32_t pos = pd__first_after(c, t0);
    int joins_prev = pos > 0 && c->s[pos - 1].slot == slot && c->s[pos - 1].t1 == t0;
    int joins_next = pos < c->n && c->s[pos].slot == slot && c->s[pos].t0 == t1;
    if (joins_prev && joins_next) {
        c->s[pos - 1].t1 = c->s[pos].t1;
        memmove(&c->s[pos], &c->s[pos + 1], (size_t)(c->n - pos - 1u) * sizeof *c->s);
        c->n--;
        t->spans--;
        t->agents[slot].spans--;
    } else if (joins_prev) {
        c->s[pos - 1].t1 = t1;
    } else if (joins_next) {
        c->s[pos].t0 = t0;
    } else {
        memmove(&c->s[pos + 1], &c->s[pos], (size_t)(c->n - pos) * sizeof *c->s);
        c->s[pos] = (pd_reserve_span){ .t0 = t0, .t1 = t1, .slot = slot };
        c->n++;
        t->spans++;
        t->agents[slot].spans++;
    }
}

/* Index of the first entry of a that ends after t. */
static uint32_t pd__entry_after(const pd__agent *a, int64_t t)
{
    return (uint32_t)pd_reserve_first_ending_after(a->e, a->n, sizeof *a->e, t);
}

/* Drops the agent's reservations from `from` on: entries that start at or
 * after it go, the one across it ends there. Cannot fail. */
static void pd__agent_truncate(pd_reserve *t, uint32_t slot, int64_t from)
{
    pd__agent *a = &t->agents[slot];
    const uint32_t k = pd__entry_after(a, from);
    for (uint32_t i = k; i < a->n; i++)
        pd__clip_box(t, &a->e[i], slot, INT64_MIN, from);
    uint32_t keep = k;
    if (k < a->n && a->e[k].t0 < from) {
        a->e[k].t1 = from;
        a->e[k].cut = a->e[k].dx != 0 || a->e[k].dy != 0;
        keep = k + 1u;
    }
    for (uint32_t i = keep; i < a->n; i++)
        a->bytes -= pd__entry_bytes(&a->e[i]);
    t->entries -= a->n - keep;
    a->n = keep;
}

static void pd__agent_remove(pd_reserve *t, uint32_t slot)
{
    pd__agent_truncate(t, slot, INT64_MIN);
    pd__agent *a = &t->agents[slot];
    if (a->renewed_ms > t->gone_ms)
        t->gone_ms = a->renewed_ms;
    pd__map_del(&t->agent_map, a->id);
    /* As a cell keeps its spans (PD__KEEP_SPANS): a small entry array
     * stays with the free record for the next agent made in it. */
    pd__entry *keep = a->cap <= PD__KEEP_ENTRIES ? a->e : NULL;
    if (!keep)
        free(a->e);
    *a = (pd__agent){ .e = keep, .cap = keep ? a->cap : 0u, .next_free = t->free_agent };
    t->free_agent = slot;
    t->live_agents--;
    /* The last agent gone: the table forgets its clock (pd_reserve_now).
     * Kept, one bad t0 - or a game clock that started over - would expire
     * every agent reserved after it, and a replay does the same here. */
    if (t->live_agents == 0)
        t->now_ms = t->maintained_ms = t->gone_ms = 0;
}

/* ---- public ---- */

const char *pd_reserve_limit_name(pd_reserve_limit l)
{
    switch (l) {
    case PD_RESERVE_LIMIT_AGENTS:
        return "agents";
    case PD_RESERVE_LIMIT_ENTRIES:
        return "entries";
    case PD_RESERVE_LIMIT_WINDOW:
        return "window";
    case PD_RESERVE_LIMIT_AGENT_BYTES:
        return "agent_bytes";
    default:
        return "none";
    }
}

pd_reserve *pd_reserve_create(const pd_reserve_limits *limits)
{
    pd_reserve *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    if (limits)
        t->limits = *limits;
    t->free_agent = t->free_cell = PD__NONE;
    return t;
}

void pd_reserve_set_limits(pd_reserve *t, const pd_reserve_limits *limits)
{
    t->limits = *limits;
}

void pd_reserve_destroy(pd_reserve *t)
{
    if (!t)
        return;
    for (uint32_t i = 0; i < t->n_agents; i++)
        free(t->agents[i].e);
    for (uint32_t i = 0; i < t->n_cells; i++)
        free(t->cells[i].s);
    free(t->agents);
    free(t->cells);
    free(t->touched);
    free(t->ne);
    free(t->boxci);
    pd__map_free(&t->agent_map);
    pd__map_free(&t->cell_map);
    free(t);
}

const pd_reserve_limits *pd_reserve_get_limits(const pd_reserve *t)
{
    return &t->limits;
}

void pd_reserve_get_stats(const pd_reserve *t, pd_reserve_stats *out)
{
    size_t bytes = sizeof *t + (size_t)t->cap_agents * sizeof *t->agents + (size_t)t->cap_cells * sizeof *t->cells +
                   t->cap_touched * sizeof *t->touched + (size_t)t->cap_ne * sizeof *t->ne +
                   (size_t)t->cap_boxci * sizeof *t->boxci +
                   ((size_t)t->agent_map.cap + t->cell_map.cap) * (sizeof(uint64_t) + sizeof(uint32_t));
    for (uint32_t i = 0; i < t->n_agents; i++)
        bytes += (size_t)t->agents[i].cap * sizeof(pd__entry);
    for (uint32_t i = 0; i < t->n_cells; i++)
        bytes += (size_t)t->cells[i].cap * sizeof(pd_reserve_span);
    *out = (pd_reserve_stats){ .agents = t->live_agents, .entries = t->entries, .spans = t->spans,
                               .cells = t->live_cells, .bytes = bytes };
}

/* A plan pd_reserve_replace accepts: see pd_reserve.h. */
static int pd__plan_ok(uint32_t unit, int64_t t0, const pd_waypoint *wp, size_t n)
{
    if (unit < 1 || unit > PD_UNIT_SIZE_MAX || n == 0 || !wp || t0 < 0 || t0 > PD_RESERVE_MAX_TIME ||
        wp[0].t_arrive_ms != t0 || n > UINT32_MAX / 4u)
        return 0;
    for (size_t i = 0; i < n; i++) {
        const pd_waypoint *w = &wp[i];
        if (w->x < 0 || w->y < 0 || w->x > PD__MAX_COORD || w->y > PD__MAX_COORD)
            return 0;
        if (w->t_leave_ms < w->t_arrive_ms || w->t_arrive_ms > PD_RESERVE_MAX_TIME)
            return 0;
        if (w->t_leave_ms > PD_RESERVE_MAX_TIME && !(i + 1 == n && w->t_leave_ms == PD_RESERVE_FOREVER))
            return 0;
        if (i + 1 < n) {
            const int32_t dx = wp[i + 1].x - w->x, dy = wp[i + 1].y - w->y;
            if (dx < -1 || dx > 1 || dy < -1 || dy > 1 || (dx == 0 && dy == 0))
                return 0;
            if (!(w->t_leave_ms < wp[i + 1].t_arrive_ms))
                return 0;
        }
    }
    return 1;
}

/* The agent in another slot than `self` whose span on cell c overlaps
 * [t0, t1), or PD__NONE. */
static uint32_t pd__overlap(const pd__cell *c, int64_t t0, int64_t t1, uint32_t self)
{
    for (uint32_t i = pd__first_after(c, t0); i < c->n && c->s[i].t0 < t1; i++)
        if (c->s[i].slot != self)
            return c->s[i].slot;
    return PD__NONE;
}

/* Undoes a failed preparation: cells it created hold nothing. */
static void pd__unprepare(pd_reserve *t)
{
    for (size_t i = 0; i < t->n_touched; i++) {
        t->cells[t->touched[i]].pending = 0;
        pd__cell_settle(t, t->touched[i]);
    }
    t->n_touched = 0;
}

/* Finds or creates cell (x, y) and counts one more pending span on it.
 * Its index, or PD__NONE on allocation failure. */
static uint32_t pd__prepare_cell(pd_reserve *t, int32_t x, int32_t y)
{
    const uint64_t key = pd__cell_key(x, y);
    uint32_t ci = pd__map_find(&t->cell_map, key);
    if (ci == PD__NONE) {
        if (pd__map_reserve(&t->cell_map, (uint64_t)t->live_cells + 1u) != 0)
            return PD__NONE;
        if (t->free_cell == PD__NONE &&
            pd__grow((void **)&t->cells, &t->cap_cells, (uint64_t)t->n_cells + 1u, sizeof *t->cells, 64u) != 0)
            return PD__NONE;
        if (t->free_cell != PD__NONE) {
            ci = t->free_cell;
            t->free_cell = t->cells[ci].next_free;
        } else {
            ci = t->n_cells++;
            t->cells[ci] = (pd__cell){ 0 };
        }
        /* A free record keeps its span array (pd__cell_free). */
        pd__cell *c = &t->cells[ci];
        *c = (pd__cell){ .key = key, .s = c->s, .cap = c->cap, .next_free = PD__NONE };
        pd__map_put(&t->cell_map, key, ci);
        t->live_cells++;
    }
    pd__cell *c = &t->cells[ci];
    if (c->pending++ == 0) {
        if (pd__grow((void **)&t->touched, &t->cap_touched, (uint64_t)t->n_touched + 1u, sizeof *t->touched,
                     256u) != 0) {
            c->pending--;
            pd__cell_settle(t, ci);
            return PD__NONE;
        }
        t->touched[t->n_touched++] = ci;
    }
    return ci;
}

/* Allocates all a replace may need and checks the invariant; see the file
 * comment. *slot is the agent's record, PD__NONE for a new agent, which
 * gets one here (not yet live: the commit makes it so). The cell of each
 * (entry, cell of its box), in pd__box's order, goes to t->boxci. 0; 1
 * when a cell of a new entry is another agent's at the same time (*other
 * names it; the agent's own later spans are about to go, so they do not
 * count); or -1 on allocation failure; on both, the table is as it was. */
static int pd__prepare(pd_reserve *t, uint32_t *slot, uint32_t entries_after, const pd__entry *ne, size_t m,
                       uint64_t box_cells, uint32_t *other)
{
    t->n_touched = 0;
    if (pd__grow((void **)&t->boxci, &t->cap_boxci, box_cells, sizeof *t->boxci, 64u) != 0)
        return -1;
    uint64_t k = 0;
    for (size_t i = 0; i < m; i++) {
        int32_t x0, y0, x1, y1;
        pd__box(&ne[i], &x0, &y0, &x1, &y1);
        for (int32_t y = y0; y <= y1; y++)
            for (int32_t x = x0; x <= x1; x++) {
                const uint32_t ci = pd__prepare_cell(t, x, y);
                if (ci == PD__NONE)
                    goto fail;
                *other = pd__overlap(&t->cells[ci], ne[i].t0, ne[i].t1, *slot);
                if (*other != PD__NONE) {
                    pd__unprepare(t);
                    return 1;
                }
                t->boxci[k++] = ci;
            }
    }
    for (size_t i = 0; i < t->n_touched; i++) {
        pd__cell *c = &t->cells[t->touched[i]];
        if (pd__grow((void **)&c->s, &c->cap, (uint64_t)c->n + c->pending, sizeof *c->s, 2u) != 0)
            goto fail;
    }
    if (*slot == PD__NONE) {
        if (pd__map_reserve(&t->agent_map, (uint64_t)t->live_agents + 1u) != 0)
            goto fail;
        if (t->free_agent == PD__NONE &&
            pd__grow((void **)&t->agents, &t->cap_agents, (uint64_t)t->n_agents + 1u, sizeof *t->agents, 16u) != 0)
            goto fail;
        uint32_t s = t->free_agent != PD__NONE ? t->free_agent : t->n_agents;
        pd__agent *a = &t->agents[s];
        if (s != t->free_agent)
            *a = (pd__agent){ 0 };
        /* A free record may keep an entry array (pd__agent_remove). */
        pd__entry *e = a->e;
        uint32_t cap = a->cap;
        if (pd__grow((void **)&e, &cap, entries_after ? entries_after : 1u, sizeof *e, 4u) != 0)
            goto fail;
        if (s == t->free_agent)
            t->free_agent = a->next_free;
        else
            t->n_agents++;
        *a = (pd__agent){ .e = e, .cap = cap, .next_free = PD__NONE, .cut_ms = PD__NO_CUT };
        *slot = s;
    } else {
        pd__agent *a = &t->agents[*slot];
        if (pd__grow((void **)&a->e, &a->cap, entries_after, sizeof *a->e, 4u) != 0)
            goto fail;
    }
    return 0;
fail:
    pd__unprepare(t);
    return -1;
}

/* pd__prepare as a status: PD_OK; PD_INTERNAL with why->agent when a cell
 * is another agent's at the same time, or on allocation failure. */
static pd_status pd__prepare_or_refuse(pd_reserve *t, uint32_t *slot, uint32_t entries_after, const pd__entry *ne,
                                       size_t m, uint64_t box_cells, pd_reserve_refusal *why)
{
    uint32_t other = PD__NONE;
    const int prep = pd__prepare(t, slot, entries_after, ne, m, box_cells, &other);
    if (prep == 0)
        return PD_OK;
    if (prep == 1) {
        why->has_agent = 1;
        why->agent = t->agents[other].id;
    }
    return PD_INTERNAL;
}

/* The record pd__prepare made in slot becomes agent's. */
static void pd__agent_live(pd_reserve *t, uint32_t slot, uint64_t agent)
{
    pd__agent *a = &t->agents[slot];
    a->id = agent;
    a->live = 1;
    pd__map_put(&t->agent_map, agent, slot);
    t->live_agents++;
}

/* Appends ne[0..m) to the agent in slot and its spans to the cells
 * pd__prepare noted, in its order (no lookup). Cannot fail. */
static void pd__commit(pd_reserve *t, uint32_t slot, const pd__entry *ne, size_t m)
{
    pd__agent *a = &t->agents[slot];
    uint64_t k = 0;
    for (size_t i = 0; i < m; i++) {
        a->e[a->n++] = ne[i];
        a->bytes += pd__entry_bytes(&ne[i]);
        int32_t x0, y0, x1, y1;
        pd__box(&ne[i], &x0, &y0, &x1, &y1);
        for (int32_t y = y0; y <= y1; y++)
            for (int32_t x = x0; x <= x1; x++)
                pd__cell_add(t, t->boxci[k++], slot, ne[i].t0, ne[i].t1);
    }
    t->entries += m;
    for (size_t i = 0; i < t->n_touched; i++)
        t->cells[t->touched[i]].pending = 0;
    t->n_touched = 0;
}

pd_status pd_reserve_replace(pd_reserve *t, uint64_t agent, uint32_t unit, int64_t t0_ms,
                             const pd_waypoint *wp, size_t n, pd_reserve_refusal *refusal)
{
    pd_reserve_refusal why = { 0 };
    pd_status st = PD_OK;
    if (!pd__plan_ok(unit, t0_ms, wp, n)) {
        st = PD_INVALID_ARGUMENT;
        goto done;
    }
    /* At most two entries a waypoint (pd__plan_ok bounds n). */
    if (pd__grow((void **)&t->ne, &t->cap_ne, 2u * (uint64_t)n, sizeof *t->ne, 16u) != 0) {
        st = PD_INTERNAL;
        goto done;
    }
    pd__entry *ne = t->ne;
    const size_t m = pd__plan_entries(wp, n, unit, ne);

    /* What the agent keeps: its entries before t0 (the one across t0 cut
     * short), and what they are accounted at. */
    uint32_t slot = pd__map_find(&t->agent_map, agent);
    uint64_t kept = 0, bytes = 0, old_n = 0;
    if (slot != PD__NONE) {
        const pd__agent *a = &t->agents[slot];
        const uint32_t k = pd__entry_after(a, t0_ms);
        kept = k + (k < a->n && a->e[k].t0 < t0_ms);
        old_n = a->n;
        bytes = a->bytes;
        for (uint64_t i = kept; i < a->n; i++)
            bytes -= pd__entry_bytes(&a->e[i]);
    }
    uint64_t box_cells = 0;
    for (size_t i = 0; i < m; i++) {
        const uint64_t b = pd__entry_bytes(&ne[i]);
        bytes += b;
        box_cells += (b - sizeof(pd__entry)) / sizeof(pd_reserve_span);
    }
    const pd_reserve_limits *lim = &t->limits;
    if (slot == PD__NONE && lim->max_agents && t->live_agents >= lim->max_agents)
        why.limit = PD_RESERVE_LIMIT_AGENTS;
    else if (lim->max_entries && t->entries - old_n + kept + m > lim->max_entries)
        why.limit = PD_RESERVE_LIMIT_ENTRIES;
    else if (lim->max_agent_bytes && bytes > lim->max_agent_bytes)
        why.limit = PD_RESERVE_LIMIT_AGENT_BYTES;
    if (why.limit != PD_RESERVE_LIMIT_NONE || kept + m > UINT32_MAX / 2u) {
        st = PD_LIMIT_EXCEEDED;
        goto done;
    }

    /* The invariant (no cell of a new entry is another agent's at the same
     * time) is checked while preparing, cell by cell. */
    const int is_new = slot == PD__NONE;
    if ((st = pd__prepare_or_refuse(t, &slot, (uint32_t)(kept + m), ne, m, box_cells, &why)) != PD_OK)
        goto done;

    /* From here on nothing can fail. */
    pd__agent *a = &t->agents[slot];
    if (is_new) {
        /* The first agent of an empty table: it has no clock, whatever a
         * dump said (one written before tables forgot theirs - a
         * compaction, a replicas' snapshot - carried the old game time,
         * and a game whose clock started over had this agent expired by
         * the next maintain). */
        if (t->live_agents == 0)
            t->now_ms = t->maintained_ms = t->gone_ms = 0;
        pd__agent_live(t, slot, agent);
    } else {
        /* The clock never goes back here, even for the table's only
         * agent (pd_reserve_restart_clock does that, as an op of its
         * own): a REPLACE in a log means what it meant to the pathd that
         * wrote it, and to an older one applying it. */
        pd__agent_truncate(t, slot, t0_ms);
    }
    pd__commit(t, slot, ne, m);
    a->renewed_ms = t0_ms;
    a->was_cut = 0;
    if (t0_ms > t->now_ms)
        t->now_ms = t0_ms;
    pd__observe(t, &(pd_reserve_op){ .kind = PD_RESERVE_OP_REPLACE, .agent = agent, .unit = unit, .at_ms = t0_ms,
                                     .wp = wp, .n = n });
done:
    if (refusal)
        *refusal = why;
    return st;
}

int pd_reserve_release(pd_reserve *t, uint64_t agent)
{
    uint32_t slot = pd__map_find(&t->agent_map, agent);
    if (slot == PD__NONE)
        return 0;
    pd__agent_remove(t, slot);
    pd__observe(t, &(pd_reserve_op){ .kind = PD_RESERVE_OP_RELEASE, .agent = agent });
    return 1;
}

size_t pd_reserve_release_all(pd_reserve *t, uint64_t *out, size_t cap)
{
    size_t n = 0;
    for (uint32_t slot = 0; slot < t->n_agents; slot++)
        if (t->agents[slot].live) {
            if (n < cap)
                out[n] = t->agents[slot].id;
            n++;
            pd__agent_remove(t, slot);
        }
    /* An empty table forgets its clock as its last agent goes; one that
     * held none forgets it here too (nothing else could have set it). */
    t->now_ms = t->maintained_ms = t->gone_ms = 0;
    if (n)
        pd__observe(t, &(pd_reserve_op){ .kind = PD_RESERVE_OP_RELEASE_ALL });
    return n;
}

int pd_reserve_holds_only(const pd_reserve *t, uint64_t agent)
{
    return t->live_agents == 0 || (t->live_agents == 1 && pd__map_find(&t->agent_map, agent) != PD__NONE);
}

int pd_reserve_clock_restarts(const pd_reserve *t, uint64_t agent, int64_t t0_ms)
{
    return t->live_agents == 1 && t0_ms < t->now_ms && pd__map_find(&t->agent_map, agent) != PD__NONE;
}

int pd_reserve_restart_clock(pd_reserve *t, uint64_t agent)
{
    const uint32_t slot = pd__map_find(&t->agent_map, agent);
    if (slot == PD__NONE || !pd_reserve_clock_restarts(t, agent, t->agents[slot].renewed_ms))
        return 0;
    /* As pd__agent_remove forgets the clock of an empty table: the
     * expiry's mark and the removed agents' renewals were the old clock's. */
    t->now_ms = t->agents[slot].renewed_ms;
    t->maintained_ms = t->gone_ms = 0;
    pd__observe(t, &(pd_reserve_op){ .kind = PD_RESERVE_OP_CLOCK, .at_ms = t->now_ms, .maintained_ms = 0 });
    return 1;
}

pd_reserve_clock_fit pd_reserve_clock_fits(const pd_reserve *t, uint64_t agent, int64_t t0_ms, int64_t ttl_ms)
{
    /* The only agent may take its game's clock back (a restart: nothing
     * else could conflict), not far ahead: one bad t0 (microseconds,
     * 2^60) would move the clock away from every agent that joins. */
    if (t->live_agents == 0 || (t0_ms <= t->now_ms && pd_reserve_holds_only(t, agent)))
        return PD_RESERVE_CLOCK_OK;
    /* A step within the TTL expires only agents already idle (as any
     * ReservePath's expiry does): a TTL longer than the step (a slow game)
     * is the limit then. */
    const int64_t step = t->limits.max_clock_step_ms > 0 && ttl_ms > t->limits.max_clock_step_ms
                             ? ttl_ms
                             : t->limits.max_clock_step_ms;
    /* now_ms is a replace's t0 (0 .. PD_RESERVE_MAX_TIME) and a step or
     * TTL far below 2^62: with t0 > now, t0 - now cannot overflow for any
     * t0 a request brings, nor now - ttl. */
    if (step > 0 && t0_ms > t->now_ms && t0_ms - t->now_ms > step)
        return PD_RESERVE_CLOCK_AHEAD;
    if (ttl_ms > 0 && t0_ms < t->now_ms - ttl_ms)
        return PD_RESERVE_CLOCK_BEHIND;
    return PD_RESERVE_CLOCK_OK;
}

int pd_reserve_touch(pd_reserve *t, uint64_t agent, int64_t now_ms)
{
    uint32_t slot = pd__map_find(&t->agent_map, agent);
    if (slot == PD__NONE)
        return 0;
    t->agents[slot].renewed_ms = now_ms;
    if (now_ms > t->now_ms)
        t->now_ms = now_ms;
    pd__observe(t, &(pd_reserve_op){ .kind = PD_RESERVE_OP_TOUCH, .agent = agent, .at_ms = now_ms });
    return 1;
}

/* ---- the log's compaction: the state as ops (pd_reserve_export) ---- */

size_t pd_reserve_export(const pd_reserve *t, pd_reserve_observer fn, void *user)
{
    fn(user, &(pd_reserve_op){ .kind = PD_RESERVE_OP_CLOCK, .at_ms = t->now_ms, .maintained_ms = t->maintained_ms });
    size_t n = 0;
    for (uint32_t slot = 0; slot < t->n_agents; slot++) {
        const pd__agent *a = &t->agents[slot];
        if (!a->live)
            continue;
        fn(user, &(pd_reserve_op){ .kind = PD_RESERVE_OP_RESTORE, .agent = a->id, .at_ms = a->renewed_ms,
                                   .speed = a->speed, .was_cut = a->was_cut, .raw = a->e, .n = a->n });
        n++;
    }
    return n;
}

/* Entries a RESTORE may carry: see pd_reserve_restore. */
static int pd__raw_ok(const pd_reserve_raw *e, size_t n)
{
    /* n may be 0: a replace whose plan ends where it starts leaves the
     * agent in the table holding nothing. */
    if ((n && !e) || n > UINT32_MAX / 4u)
        return 0;
    for (size_t i = 0; i < n; i++) {
        const int moves = e[i].dx != 0 || e[i].dy != 0;
        if (e[i].unit < 1 || e[i].unit > PD_UNIT_SIZE_MAX || e[i].x < 0 || e[i].y < 0 ||
            e[i].x > PD__MAX_COORD - 1 || e[i].y > PD__MAX_COORD - 1 || e[i].dx < -1 || e[i].dx > 1 ||
            e[i].dy < -1 || e[i].dy > 1 || (e[i].x == 0 && e[i].dx < 0) || (e[i].y == 0 && e[i].dy < 0) ||
            e[i].cut > 1 || (e[i].cut && !moves) || e[i].t0 < 0 || !(e[i].t0 < e[i].t1))
            return 0;
        if (e[i].t1 > PD_RESERVE_MAX_TIME && !(i + 1 == n && e[i].t1 == PD_RESERVE_FOREVER))
            return 0;
        /* In time order and disjoint; not always touching: a replace from
         * after the agent's last entry ended leaves a gap. */
        if (i + 1 < n && e[i + 1].t0 < e[i].t1)
            return 0;
    }
    return 1;
}

pd_status pd_reserve_restore(pd_reserve *t, const pd_reserve_op *op, pd_reserve_refusal *refusal)
{
    pd_reserve_refusal why = { 0 };
    pd_status st = PD_OK;
    if (op->kind == PD_RESERVE_OP_CLOCK) {
        t->now_ms = op->at_ms;
        t->maintained_ms = op->maintained_ms;
        /* A dump's CLOCK comes first (nothing removed yet); a restart's
         * (pd_reserve_restart_clock) forgets the old clock's removals. */
        t->gone_ms = 0;
        pd__observe(t, op);
        goto done;
    }
    if (op->kind != PD_RESERVE_OP_RESTORE || !pd__raw_ok(op->raw, op->n) ||
        pd__map_find(&t->agent_map, op->agent) != PD__NONE) {
        st = PD_INVALID_ARGUMENT;
        goto done;
    }
    if (pd__grow((void **)&t->ne, &t->cap_ne, op->n, sizeof *t->ne, 16u) != 0) {
        st = PD_INTERNAL;
        goto done;
    }
    uint64_t box_cells = 0;
    for (size_t i = 0; i < op->n; i++) {
        t->ne[i] = op->raw[i];
        t->ne[i].unused = 0;
        box_cells += (pd__entry_bytes(&t->ne[i]) - sizeof(pd__entry)) / sizeof(pd_reserve_span);
    }
    uint32_t slot = PD__NONE;
    if ((st = pd__prepare_or_refuse(t, &slot, (uint32_t)op->n, t->ne, op->n, box_cells, &why)) != PD_OK)
        goto done;
    pd__agent *a = &t->agents[slot];
    pd__agent_live(t, slot, op->agent);
    pd__commit(t, slot, t->ne, op->n);
    a->renewed_ms = op->at_ms;
    a->speed = op->speed;
    a->was_cut = op->was_cut != 0;
    pd__observe(t, op);
done:
    if (refusal)
        *refusal = why;
    return st;
}

int64_t pd_reserve_now(const pd_reserve *t)
{
    return t->now_ms;
}

int pd_reserve_maintain_due(const pd_reserve *t, int64_t ttl_ms)
{
    if (ttl_ms <= 0 || t->now_ms - ttl_ms < 0)
        return 0;
    /* Both passes read every agent: run them once per sixteenth of the TTL
     * of game time, so a ReservePath pays O(agents) only that often and an
     * agent outlives its TTL by at most that sixteenth. */
    const int64_t every = ttl_ms / 16 > 0 ? ttl_ms / 16 : 1;
    return t->maintained_ms == 0 || t->now_ms - t->maintained_ms >= every;
}

size_t pd_reserve_maintain(pd_reserve *t, int64_t ttl_ms, uint64_t *out, size_t cap, uint64_t *collected)
{
    if (collected)
        *collected = 0;
    if (!pd_reserve_maintain_due(t, ttl_ms))
        return 0;
    t->maintained_ms = t->now_ms;
    /* Taken before the expiry, which may empty the table and so forget
     * its clock: the collect uses the same time (a replay applies both). */
    const int64_t before = t->now_ms - ttl_ms;
    const size_t n = pd_reserve_expire(t, before, out, cap);
    const uint64_t c = pd_reserve_collect(t, before);
    if (collected)
        *collected = c;
    return n;
}

uint64_t pd_reserve_collect(pd_reserve *t, int64_t before_ms)
{
    uint64_t removed = 0, gone = 0;
    for (uint32_t slot = 0; slot < t->n_agents; slot++) {
        pd__agent *a = &t->agents[slot];
        if (!a->live)
            continue;
        /* Entries tile time, so the ended ones are a prefix, and what
         * remains starts where they end: a span merged across that point
         * keeps only its later part. */
        uint32_t k = pd__entry_after(a, before_ms);
        const int64_t rest = k < a->n ? a->e[k].t0 : PD_RESERVE_FOREVER;
        for (uint32_t i = 0; i < k; i++) {
            pd__clip_box(t, &a->e[i], slot, rest, PD_RESERVE_FOREVER);
            a->bytes -= pd__entry_bytes(&a->e[i]);
        }
        memmove(a->e, a->e + k, (size_t)(a->n - k) * sizeof *a->e);
        a->n -= k;
        t->entries -= k;
        removed += k;
        /* An agent a block cut to nothing stays (it holds nothing) until
         * it reserves again, is released or expires: its next answer must
         * still say was_cut. */
        if (a->n == 0 && !a->was_cut) {
            pd__agent_remove(t, slot);
            gone++;
        }
    }
    /* An agent that held nothing goes with no entry removed: logged too,
     * else a replay of the log keeps it. */
    if (removed || gone)
        pd__observe(t, &(pd_reserve_op){ .kind = PD_RESERVE_OP_COLLECT, .at_ms = before_ms });
    return removed;
}

uint64_t pd_reserve_collectable(const pd_reserve *t, int64_t before_ms)
{
    uint64_t n = 0;
    for (uint32_t slot = 0; slot < t->n_agents; slot++)
        if (t->agents[slot].live)
            n += pd__entry_after(&t->agents[slot], before_ms);
    return n;
}

size_t pd_reserve_expire(pd_reserve *t, int64_t renewed_before_ms, uint64_t *out, size_t cap)
{
    size_t n = 0;
    for (uint32_t slot = 0; slot < t->n_agents; slot++) {
        pd__agent *a = &t->agents[slot];
        if (!a->live || a->renewed_ms >= renewed_before_ms)
            continue;
        if (n < cap)
            out[n] = a->id;
        n++;
        pd__agent_remove(t, slot);
    }
    if (n)
        pd__observe(t, &(pd_reserve_op){ .kind = PD_RESERVE_OP_EXPIRE, .at_ms = renewed_before_ms });
    return n;
}

static int pd__end_of(const pd__agent *a, pd_reserve_cut *out)
{
    if (a->n == 0)
        return 0;
    const pd__entry *e = &a->e[a->n - 1];
    const int moved = (e->dx != 0 || e->dy != 0) && !e->cut;
    *out = (pd_reserve_cut){ .agent = a->id,
                             .x = moved ? e->x + e->dx : e->x,
                             .y = moved ? e->y + e->dy : e->y,
                             .until_ms = e->t1,
                             .mid_move = e->cut };
    return 1;
}

int pd_reserve_was_cut(const pd_reserve *t, uint64_t agent)
{
    uint32_t slot = pd__map_find(&t->agent_map, agent);
    return slot != PD__NONE && t->agents[slot].was_cut;
}

size_t pd_reserve_agent_plan(const pd_reserve *t, uint64_t agent, int64_t from_ms, pd_waypoint *out, size_t cap)
{
    const uint32_t slot = pd__map_find(&t->agent_map, agent);
    if (slot == PD__NONE)
        return 0;
    const pd__agent *a = &t->agents[slot];
    size_t n = 0;
    pd_waypoint last = { 0 }; /* out[n - 1], kept here too when out is full */
    int64_t end = 0;          /* where the entries read so far end */
    for (uint32_t i = pd__entry_after(a, from_ms); i < a->n; i++) {
        const pd__entry *e = &a->e[i];
        if (e->t0 < from_ms && n == 0)
            continue; /* its waypoint arrived before from_ms */
        /* A move a block cut, or a gap (the agent left the table and a
         * later replace brought it back): no replace gives these back,
         * and waypoints across them would invent a move. */
        if (e->cut || (n && e->t0 != end))
            return 0;
        end = e->t1;
        if (e->dx == 0 && e->dy == 0) {
            if (n && last.x == e->x && last.y == e->y && last.t_leave_ms == e->t0)
                last.t_leave_ms = e->t1; /* the wait after the move there */
            else
                last = (pd_waypoint){ e->x, e->y, e->t0, e->t1 }, n++;
        } else {
            if (n == 0) {
                last = (pd_waypoint){ e->x, e->y, e->t0, e->t0 };
                if (cap)
                    out[0] = last;
                n = 1;
            }
            last = (pd_waypoint){ e->x + e->dx, e->y + e->dy, e->t1, e->t1 };
            n++;
        }
        if (n <= cap)
            out[n - 1] = last;
    }
    return n;
}

int pd_reserve_agent_end(const pd_reserve *t, uint64_t agent, pd_reserve_cut *out)
{
    uint32_t slot = pd__map_find(&t->agent_map, agent);
    return slot != PD__NONE && pd__end_of(&t->agents[slot], out);
}

static int pd__box_meets(const pd__entry *e, int32_t x0, int32_t y0, int32_t x1, int32_t y1)
{
    int32_t bx0, by0, bx1, by1;
    pd__box(e, &bx0, &by0, &bx1, &by1);
    return bx0 <= x1 && bx1 >= x0 && by0 <= y1 && by1 >= y0;
}

/* Cuts the agent in slot from `cut` on and reports it as out[i] (when
 * i < cap). A cut before its first entry leaves it where its plan began. */
static void pd__cut_agent(pd_reserve *t, uint32_t slot, int64_t cut, pd_reserve_cut *out, size_t cap, size_t i)
{
    pd__agent *a = &t->agents[slot];
    pd_reserve_cut c = { .agent = a->id, .x = a->e[0].x, .y = a->e[0].y, .until_ms = cut };
    a->was_cut = 1;
    pd__agent_truncate(t, slot, cut);
    pd__end_of(a, &c);
    if (i < cap)
        out[i] = c;
}

size_t pd_reserve_block(pd_reserve *t, int32_t x0, int32_t y0, int32_t x1, int32_t y1,
                        int64_t at_ms, pd_reserve_cut *out, size_t cap)
{
    size_t n = 0;
    /* One pass over the entries still running at at_ms: the first that
     * meets the rectangle gives the cut time, entries being in time order. */
    for (uint32_t slot = 0; slot < t->n_agents; slot++) {
        pd__agent *a = &t->agents[slot];
        if (!a->live)
            continue;
        for (uint32_t i = pd__entry_after(a, at_ms); i < a->n; i++) {
            if (!pd__box_meets(&a->e[i], x0, y0, x1, y1))
                continue;
            pd__cut_agent(t, slot, a->e[i].t0 > at_ms ? a->e[i].t0 : at_ms, out, cap, n++);
            break;
        }
    }
    if (n)
        pd__observe(t, &(pd_reserve_op){ .kind = PD_RESERVE_OP_BLOCK, .at_ms = at_ms, .x0 = x0, .y0 = y0, .x1 = x1,
                                         .y1 = y1 });
    return n;
}

size_t pd_reserve_block_cells(pd_reserve *t, const pd_point *cells, size_t n_cells, int64_t at_ms,
                              pd_reserve_cut *out, size_t cap)
{
    /* Each blocked cell's spans name the agents holding it and from when;
     * the earliest that ends after at_ms is where that agent is cut, as
     * pd_reserve_block finds it from the entries (a span starting before
     * at_ms runs across it: the entry holding the cell at at_ms). Marks
     * go in the agents' records (cut_ms), so the cost is the cells named
     * plus the spans on them, never the table. */
    size_t n = 0;
    uint32_t first = PD__NONE;   /* chain of the agents marked, through next_cut */
    for (size_t k = 0; k < n_cells; k++) {
        uint32_t ci = pd__map_find(&t->cell_map, pd__cell_key(cells[k].x, cells[k].y));
        if (ci == PD__NONE)
            continue;
        const pd__cell *c = &t->cells[ci];
        for (uint32_t i = pd__first_after(c, at_ms); i < c->n; i++) {
            pd__agent *a = &t->agents[c->s[i].slot];
            const int64_t cut = c->s[i].t0 > at_ms ? c->s[i].t0 : at_ms;
            if (a->cut_ms == PD__NO_CUT) {
                a->next_cut = first;
                first = c->s[i].slot;
                a->cut_ms = cut;
            } else if (cut < a->cut_ms) {
                a->cut_ms = cut;
            }
        }
    }
    while (first != PD__NONE) {
        const uint32_t slot = first;
        pd__agent *a = &t->agents[slot];
        first = a->next_cut;
        const int64_t cut = a->cut_ms;
        a->cut_ms = PD__NO_CUT;
        pd__cut_agent(t, slot, cut, out, cap, n++);
    }
    if (n)
        pd__observe(t, &(pd_reserve_op){ .kind = PD_RESERVE_OP_BLOCK_CELLS, .at_ms = at_ms, .cells = cells,
                                         .n_cells = n_cells });
    return n;
}

size_t pd_reserve_query(const pd_reserve *t, int32_t x0, int32_t y0, int32_t x1, int32_t y1,
                        int64_t from_ms, int64_t to_ms, pd_reserve_entry *out, size_t cap)
{
    size_t n = 0;
    for (uint32_t slot = 0; slot < t->n_agents; slot++) {
        const pd__agent *a = &t->agents[slot];
        if (!a->live)
            continue;
        for (uint32_t i = pd__entry_after(a, from_ms); i < a->n && a->e[i].t0 < to_ms; i++) {
            const pd__entry *e = &a->e[i];
            if (!pd__box_meets(e, x0, y0, x1, y1))
                continue;
            if (n < cap) {
                int32_t bx0, by0, bx1, by1;
                pd__box(e, &bx0, &by0, &bx1, &by1);
                out[n] = (pd_reserve_entry){ .agent = a->id, .x = bx0, .y = by0, .w = bx1 - bx0 + 1,
                                             .h = by1 - by0 + 1, .t0_ms = e->t0, .t1_ms = e->t1 };
            }
            n++;
        }
    }
    return n;
}

int pd_plan_index_at(const pd_waypoint *wp, size_t n, int64_t t)
{
    for (size_t i = 0; i < n; i++) {
        if (wp[i].t_arrive_ms <= t && t <= wp[i].t_leave_ms)
            return (int)i;
        if (wp[i].t_arrive_ms > t)
            return -1;
    }
    return (int)n - 1;
}

int64_t pd_plan_next_stop(const pd_waypoint *wp, size_t n, int64_t t)
{
    if (pd_plan_index_at(wp, n, t) >= 0)
        return t;
    for (size_t i = 0; i < n; i++)
        if (wp[i].t_arrive_ms > t)
            return wp[i].t_arrive_ms;
    return t;
}

const pd_reserve_span *pd_reserve_cell(const pd_reserve *t, int32_t x, int32_t y, size_t *n)
{
    uint32_t ci = pd__map_find(&t->cell_map, pd__cell_key(x, y));
    if (ci == PD__NONE) {
        *n = 0;
        return NULL;
    }
    *n = t->cells[ci].n;
    return t->cells[ci].s;
}

uint32_t pd_reserve_agent_slot(const pd_reserve *t, uint64_t agent)
{
    return pd__map_find(&t->agent_map, agent);
}

uint64_t pd_reserve_slot_agent(const pd_reserve *t, uint32_t slot)
{
    return slot < t->n_agents ? t->agents[slot].id : 0;
}

uint64_t pd_reserve_spans_except(const pd_reserve *t, uint32_t slot)
{
    return t->spans - (slot < t->n_agents && t->agents[slot].live ? t->agents[slot].spans : 0);
}

/* ---- the yielding planner's reads (pd_reserve.h) ---- */

static int pd__waits_at(const pd__entry *e, int32_t x, int32_t y)
{
    return e->dx == 0 && e->dy == 0 && e->x == x && e->y == y;
}

/* The start of the unbroken waits at (x, y) that end with entry i. */
static int64_t pd__stood_from(const pd__agent *a, uint32_t i, int32_t x, int32_t y)
{
    while (i > 0 && pd__waits_at(&a->e[i - 1], x, y) && a->e[i - 1].t1 == a->e[i].t0)
        i--;
    return a->e[i].t0;
}

int pd_reserve_agent_info_get(const pd_reserve *t, uint64_t agent, pd_reserve_agent_info *out)
{
    uint32_t slot = pd__map_find(&t->agent_map, agent);
    if (slot == PD__NONE)
        return 0;
    const pd__agent *a = &t->agents[slot];
    *out = (pd_reserve_agent_info){ .speed = a->speed, .renewed_ms = a->renewed_ms };
    if (a->n == 0)
        return 1;
    const pd__entry *last = &a->e[a->n - 1];
    out->unit = last->unit;
    if (last->t1 == PD_RESERVE_FOREVER && last->dx == 0 && last->dy == 0) {
        out->holds = 1;
        out->x = last->x;
        out->y = last->y;
        out->hold_since = pd__stood_from(a, a->n - 1u, last->x, last->y);
    }
    return 1;
}

int64_t pd_reserve_standing_since(const pd_reserve *t, uint64_t agent, int32_t x, int32_t y, int64_t at)
{
    uint32_t slot = pd__map_find(&t->agent_map, agent);
    if (slot == PD__NONE)
        return at;
    const pd__agent *a = &t->agents[slot];
    uint32_t i = pd__entry_after(a, at);
    /* The wait running across `at`, or the one that ends there. */
    if (i < a->n && a->e[i].t0 <= at && pd__waits_at(&a->e[i], x, y))
        return pd__stood_from(a, i, x, y);
    if (i > 0 && a->e[i - 1].t1 == at && pd__waits_at(&a->e[i - 1], x, y))
        return pd__stood_from(a, i - 1u, x, y);
    return at;
}

void pd_reserve_note_speed(pd_reserve *t, uint64_t agent, double speed)
{
    uint32_t slot = pd__map_find(&t->agent_map, agent);
    if (slot != PD__NONE) {
        t->agents[slot].speed = speed;
        pd__observe(t, &(pd_reserve_op){ .kind = PD_RESERVE_OP_SPEED, .agent = agent, .speed = speed });
    }
}

void pd_reserve_set_renewed(pd_reserve *t, uint64_t agent, int64_t renewed_ms)
{
    uint32_t slot = pd__map_find(&t->agent_map, agent);
    if (slot != PD__NONE) {
        const int64_t was = t->agents[slot].renewed_ms;
        t->agents[slot].renewed_ms = renewed_ms;
        /* A holder pd_yield moved: its replace's t0 (when its hold began,
         * maybe far ahead of the game) was no renewal, nor game time heard
         * of; left as "now" it expired agents renewed within the TTL
         * (issue 34). Now is again the largest renewal. Only when this
         * agent's was the largest: O(agents) then, as pd_yield moves. */
        if (renewed_ms < was && was >= t->now_ms) {
            int64_t now = t->gone_ms;
            for (uint32_t s = 0; s < t->n_agents; s++)
                if (t->agents[s].live && t->agents[s].renewed_ms > now)
                    now = t->agents[s].renewed_ms;
            t->now_ms = now;
        }
        pd__observe(t, &(pd_reserve_op){ .kind = PD_RESERVE_OP_RENEWED, .agent = agent, .at_ms = renewed_ms });
    }
}
