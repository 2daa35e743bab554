/*
 * pd_sipp.c - SIPP against the reservation table (pd_sipp.h).
 *
 * Nodes. Each anchor the search touches gets a record in a lazy node pool
 * (pd_nodepool.h, as pd_search's): the first of its nodes and how many.
 * The nodes of an anchor are its safe intervals from t0 on, made when the
 * search first reaches it and stored contiguously in one growing array,
 * plus at most one *static* node for the part of the search past a
 * handover (pd_sipp.h), which ignores the table. The open list is a binary
 * heap on arrival + heuristic, later arrivals first among equal keys (the
 * deeper node, as pd_search's tie-breaking); a node is pushed again when its
 * arrival improves and stale entries are skipped when popped. With the
 * planner's own exact static times (pd__rra) the heap holds tens of states
 * (the search follows the way at once and stops at the handover), so a
 * binary heap is enough; the reverse search, which does the work, runs on
 * pd_search's ring (pd_ring.h).
 *
 * Reading the table. Expanding an anchor p looks up the spans of every cell
 * of the (K+2) x (K+2) square around p's footprint once: every successor's
 * footprint and every move's box lies inside it. A move's earliest
 * departure is found on the box's cells' own sorted span arrays (binary
 * search, then a sweep until no cell pushes it later), without gathering
 * or sorting; a successor's first useful safe interval by binary search.
 * Only making an anchor's safe intervals gathers and sorts its footprint's
 * spans, once per anchor and plan (for K = 1, one array already sorted).
 * When no other agent holds anything, no lookup is made at all.
 *
 * Where the time goes: with the octile heuristic (before the reverse
 * search) about nine in ten expansions were the static rest after the
 * handover (den520d, 500 agents, 8 s windows). Now the reverse search is
 * most of it, about one A* from the goal to the start per plan.
 *
 * Durations are a table of 2 x 256 per plan: a step's duration depends only
 * on its kind and the cost byte of the cell entered.
 */
#include "pd_sipp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pd_clearance.h"
#include "pd_nodepool.h"
#include "pd_ring.h"
#include "pd_search_common.h"
#include "pd_sipp_direct.h"

#define PD__NO_NODE UINT32_MAX
#define PD__UNSET UINT32_MAX
/* Side of the neighbourhood read per expansion, at its largest. */
#define PD__NB_SIDE (PD_UNIT_SIZE_MAX + 2)
/* Gathered spans are sorted by insertion up to this many, by qsort above. */
#define PD__INSERTION_SORT_MAX 48

enum { PD__SPACE_TIME, PD__HANDOVER, PD__STATIC };

typedef struct pd__snode {
    int64_t g;               /* earliest arrival found; INT64_MAX until reached */
    int64_t lo, hi;          /* the safe interval (static nodes: [0, FOREVER)) */
    uint32_t parent;
    uint32_t cell;           /* padded index in the unit grid */
    uint8_t mode;
    uint8_t closed;
} pd__snode;

/* Per anchor, in the node pool: 16 bytes, 256 to a 4 KiB block. */
typedef struct pd__scell {
    uint32_t gen;
    uint32_t first;          /* its safe-interval nodes: first .. first + n - 1 */
    uint32_t n;              /* PD__UNSET until made */
    uint32_t stat;           /* its static node, or PD__NO_NODE */
} pd__scell;

/* Per cell of the reverse search (see pd__rra): 16 bytes, 4 KiB a block. */
typedef struct pd__rnode {
    int64_t g;               /* milliseconds from the goal, exact once closed */
    uint32_t gen;
    uint16_t tag;            /* pushes this search; PD__RCLOSED once expanded */
    uint16_t unused;
} pd__rnode;
#define PD__RCLOSED UINT16_MAX

/* Per cell whose exact static time a probe (pd__probe) found: 16 bytes. */
typedef struct pd__knode {
    int64_t g;               /* milliseconds to the goal, exact */
    uint32_t gen;
    uint32_t unused;
} pd__knode;

/* Jump points the probes of one plan may expand before the reverse search
 * takes over (pd__exact). On Berlin_0_1024 with 2,000 agents the most any
 * plan needed was about 27,000 (153 probes; median 10 probes, 224 jump
 * points), where one reverse search costs about a million cell expansions:
 * the bound only keeps a pathological crowd from paying both for long. */
#define PD__PROBE_BUDGET 32768u

typedef struct pd__open {
    double f;
    int64_t g;
    uint32_t node;
    uint32_t exact;          /* f holds the exact static time (pd__h) */
} pd__open;

typedef struct pd__iv {
    int64_t t0, t1;
} pd__iv;

struct pd_sipp_ctx {
    pd_nodepool cells;
    pd_nodepool rcells;      /* the reverse search's records */
    pd_nodepool kcells;      /* exact times the probes found (pd__probe) */
    pd_ring ropen;           /* its open list: pd_search's ring */
    pd__snode *nodes;
    uint32_t n_nodes, cap_nodes;
    pd__open *heap;
    size_t n_heap, cap_heap;
    pd__iv *busy;            /* gathered spans, sorted by t0 */
    size_t n_busy, cap_busy;
    pd_waypoint *wp;         /* the last plan */
    size_t n_wp, cap_wp;
    pd_sipp_direct *direct;  /* the fast path's (pd_sipp_direct.h), made at first use */
    /* The spans of the neighbourhood of the anchor being expanded. */
    const pd_reserve_span *nb_s[PD__NB_SIDE * PD__NB_SIDE];
    uint32_t nb_n[PD__NB_SIDE * PD__NB_SIDE];
};

/* What one plan reads everywhere. */
typedef struct pd__srun {
    pd_sipp_ctx *ctx;
    const pd_reserve *table;
    const pd_grid *grid;
    const pd_sipp_params *p;
    uint32_t self;           /* the agent's slot: its own spans do not count */
    int use_table;           /* 0 when no other agent holds anything */
    int eight;
    int32_t k, stride;
    uint32_t gen;
    uint32_t goal;           /* padded index */
    int32_t gx, gy;          /* goal, padded */
    double ms_per_cell;      /* 1000 / speed */
    int64_t t_end;           /* t0 + window, or FOREVER without one */
    uint64_t pushes;
    int32_t nb_x, nb_y;      /* top-left cell of the neighbourhood read */
    int nb_quiet;            /* it holds no span at all */
    int64_t dur[2][256];     /* [diagonal][cost byte of the cell entered] */
    /* The reverse resumable search (pd__rra), when the caller gives no
     * heuristic: exact static times to the goal. */
    int exact;
    uint32_t rgen;
    int32_t sx, sy;          /* its own target, the start, padded */
    pd_status stop;          /* why a reverse search stopped early (OOM, budget, poll) */
    uint64_t rexpanded;
    double rkey_scale;       /* ring keys per millisecond */
    size_t n_cells;          /* padded cells of the grid */
    int rra_begun;           /* the reverse search is made at its first use */
    /* Probes (pd__probe): exact times from static shortest paths. */
    int probing;             /* 0 once they do not apply or ran out */
    uint32_t kgen;
    uint32_t probes;
    uint64_t pexpanded;      /* the probes' jump points */
    /* The exact static time of the state being expanded (-INFINITY when
     * not known), and the floor it puts under the successor being offered:
     * that time less the step (pd__push). */
    double h_parent, h_floor;
} pd__srun;

static const int8_t pd__dx[8] = { 0, 0, 1, -1, 1, -1, 1, -1 };
static const int8_t pd__dy[8] = { -1, 1, 0, 0, -1, -1, 1, 1 };

pd_sipp_ctx *pd_sipp_ctx_create(void)
{
    pd_sipp_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return NULL;
    pd_nodepool_init(&ctx->cells, PD_NODEPOOL_BLOCK_CELLS * sizeof(pd__scell));
    pd_nodepool_init(&ctx->rcells, PD_NODEPOOL_BLOCK_CELLS * sizeof(pd__rnode));
    pd_nodepool_init(&ctx->kcells, PD_NODEPOOL_BLOCK_CELLS * sizeof(pd__knode));
    return ctx;
}

void pd_sipp_ctx_destroy(pd_sipp_ctx *ctx)
{
    if (!ctx)
        return;
    pd_nodepool_free(&ctx->cells);
    pd_nodepool_free(&ctx->rcells);
    pd_nodepool_free(&ctx->kcells);
    pd_ring_free(&ctx->ropen);
    free(ctx->nodes);
    free(ctx->heap);
    free(ctx->busy);
    free(ctx->wp);
    pd_sipp_direct_destroy(ctx->direct);
    free(ctx);
}

size_t pd_sipp_ctx_footprint(const pd_sipp_ctx *ctx)
{
    return sizeof *ctx + pd_nodepool_footprint(&ctx->cells) + pd_nodepool_footprint(&ctx->rcells) +
           pd_nodepool_footprint(&ctx->kcells) +
           pd_ring_footprint(&ctx->ropen) + (size_t)ctx->cap_nodes * sizeof *ctx->nodes +
           ctx->cap_heap * sizeof *ctx->heap + ctx->cap_busy * sizeof *ctx->busy + ctx->cap_wp * sizeof *ctx->wp +
           pd_sipp_direct_footprint(ctx->direct);
}

void pd_sipp_ctx_trim(pd_sipp_ctx *ctx, size_t keep_bytes)
{
    if (pd_sipp_ctx_footprint(ctx) <= keep_bytes)
        return;
    /* The scratch arrays are rebuilt by the next plan; the pool keeps what
     * is left over, as pd_search_ctx_trim does. */
    free(ctx->nodes);
    free(ctx->heap);
    free(ctx->busy);
    ctx->nodes = NULL;
    ctx->heap = NULL;
    ctx->busy = NULL;
    ctx->cap_nodes = ctx->n_nodes = 0;
    ctx->cap_heap = ctx->n_heap = 0;
    ctx->cap_busy = ctx->n_busy = 0;
    pd_ring_free(&ctx->ropen);
    pd_nodepool_trim(&ctx->rcells, 0);
    pd_nodepool_trim(&ctx->kcells, 0);
    size_t rest = pd_sipp_ctx_footprint(ctx) - pd_nodepool_footprint(&ctx->cells);
    pd_nodepool_trim(&ctx->cells, keep_bytes > rest ? keep_bytes - rest : 0);
    /* The fast path's search keeps what is left after that. */
    if (pd_sipp_ctx_footprint(ctx) > keep_bytes) {
        rest = pd_sipp_ctx_footprint(ctx) - pd_sipp_direct_footprint(ctx->direct);
        pd_sipp_direct_trim(ctx->direct, keep_bytes > rest ? keep_bytes - rest : 0);
    }
}

/* Doubles *buf until it holds `need` items of `size` bytes. 0 or -1. */
static int pd__grow(void **buf, size_t *cap, size_t need, size_t size)
{
    return pd__grow_array(buf, cap, need, size);
}

/* ---- goal and heuristic: where goal sets and ranges (targets) enter ---- */

static int pd__at_goal(const pd__srun *r, uint32_t cell)
{
    if (r->p->park_ok)
        return r->p->park_ok(r->p->park_user, (int32_t)(cell % (uint32_t)r->stride) - 1,
                             (int32_t)(cell / (uint32_t)r->stride) - 1);
    if (r->p->targets) {
        const pd_point c = { (int32_t)(cell % (uint32_t)r->stride) - 1, (int32_t)(cell / (uint32_t)r->stride) - 1 };
        uint32_t which;
        return pd_targets_accepts(r->p->targets, r->grid, c, &which);
    }
    return cell == r->goal;
}

/* Whether the caller lets the agent hold padded cell `cell` as a handover
 * (pd_sipp_params.hold_ok); its start always: it stands there already. */
static int pd__may_hold(const pd__srun *r, uint32_t cell)
{
    if (!r->p->hold_ok)
        return 1;
    const int32_t x = (int32_t)(cell % (uint32_t)r->stride), y = (int32_t)(cell / (uint32_t)r->stride);
    return (x == r->sx && y == r->sy) || r->p->hold_ok(r->p->hold_user, x - 1, y - 1);
}

/* Whether another agent's span counts: the agent's own never do, nor holds
 * for good that the caller will move aside (pd_sipp_params.passable), nor
 * spans the caller will cut (ignore_span). */
static inline int pd__ignored(const pd__srun *r, const pd_reserve_span *s)
{
    return s->slot == r->self ||
           (s->t1 == PD_RESERVE_FOREVER && r->p->passable && r->p->passable(r->p->passable_user, s->slot)) ||
           (r->p->ignore_span && r->p->ignore_span(r->p->ignore_user, s));
}

/* ---- the reverse resumable search: exact static times to the goal ----
 *
 * Silver's RRA* (the heuristic of WHCA*): an A* from the goal toward the
 * start over the static grid, in the planner's own integer milliseconds
 * (the durations table, so the times are exactly what the forward search
 * would sum), kept open between lookups. Asking for a cell resumes it until
 * that cell is closed; a closed cell's time is exact because the reverse
 * heuristic (octile to the start, rounded down to a millisecond: rounding a
 * consistent heuristic down keeps it consistent under integer step costs)
 * is consistent. Moves are symmetric on the grid (corner cutting tests the
 * same two cells both ways), so a reverse step from c to n costs the
 * forward step n -> c: the duration of entering c. The open list is
 * pd_search's ring (pd_ring.h); keys are f in cells, as A*'s.
 */

static uint64_t pd__rkey(const pd__srun *r, int64_t f_ms)
{
    /* pd__f_key(f_ms / ms_per_cell) with the division made once per plan:
     * a product by a positive constant keeps the keys' order. */
    return (uint64_t)((double)f_ms * r->rkey_scale + 0.5);
}

static pd__rnode *pd__rrec(pd__srun *r, uint32_t cell)
{
    unsigned char *b = pd_nodepool_block(&r->ctx->rcells, cell);
    if (!b)
        return NULL;
    pd__rnode *n = &((pd__rnode *)(void *)b)[cell & (PD_NODEPOOL_BLOCK_CELLS - 1u)];
    if (n->gen != r->rgen)
        *n = (pd__rnode){ .g = INT64_MAX, .gen = r->rgen, .tag = 0 };
    return n;
}

/* The reverse heuristic: a lower bound on the time from padded (x, y) to
 * the start, whole milliseconds. */
static int64_t pd__rh(const pd__srun *r, int32_t x, int32_t y)
{
    const double d = r->eight ? pd__octile(x - r->sx, y - r->sy) : pd__manhattan(x - r->sx, y - r->sy);
    return (int64_t)(d * r->ms_per_cell); /* d >= 0: truncation is the floor */
}

/* Offers padded cell `cell` at (x, y) a time g from the goal. */
static int pd__rpush(pd__srun *r, uint32_t cell, int32_t x, int32_t y, int64_t g)
{
    pd__rnode *n = pd__rrec(r, cell);
    if (!n)
        return -1;
    if (n->tag == PD__RCLOSED || g >= n->g)
        return 0;
    if (n->g != INT64_MAX)
        n->tag++; /* at most 8 pushes a cell: never reaches PD__RCLOSED */
    n->g = g;
    return pd_ring_push(&r->ctx->ropen, pd__rkey(r, g + pd__rh(r, x, y)), cell, n->tag);
}

static int pd__rra_begin(pd__srun *r, size_t n_cells)
{
    pd_sipp_ctx *c = r->ctx;
    if (pd_nodepool_begin(&c->rcells, n_cells) != 0)
        return -1;
    r->rgen = c->rcells.gen;
    r->rkey_scale = (double)(1u << PD__KEY_FRACTION_BITS) / r->ms_per_cell;
    /* The largest cost byte is not tracked on a weighted grid (as in
     * pd_search): 255 stands for it. A window far too wide would put many
     * distinct keys in one bucket, and the ring scans a bucket per level. */
    const int64_t maxdur = r->dur[r->eight][r->grid->uniform_cost ? 1 : 255];
    /* A push exceeds the last key popped by at most a step's duration plus
     * the heuristic's change over the step (no more than the duration). */
    const int64_t h0 = pd__rh(r, r->gx, r->gy);
    if (pd_ring_reset(&c->ropen, pd__rkey(r, h0), pd__rkey(r, 2 * maxdur + 1) + 1) != 0)
        return -1;
    return pd__rpush(r, r->goal, r->gx, r->gy, 0);
}

/* The exact static time in milliseconds from padded cell `cell` to the
 * goal, INFINITY where the goal cannot be reached (or when the search had
 * to stop: r->stop says why). */
static double pd__rra(pd__srun *r, uint32_t cell)
{
    pd_sipp_ctx *c = r->ctx;
    if (!r->rra_begun) {
        if (r->stop != PD_OK)
            return INFINITY;
        if (pd__rra_begin(r, r->n_cells) != 0) {
            r->stop = PD_INTERNAL;
            return INFINITY;
        }
        r->rra_begun = 1;
    }
    const pd__rnode *want = (const pd__rnode *)(const void *)pd_nodepool_peek(&c->rcells, cell);
    if (want) {
        want += cell & (PD_NODEPOOL_BLOCK_CELLS - 1u);
        if (want->gen == r->rgen && want->tag == PD__RCLOSED)
            return (double)want->g;
    }
    if (r->stop != PD_OK)
        return INFINITY;
    const uint8_t *cells = r->grid->cells;
    while (c->ropen.size > 0) {
        pd_radix_entry top;
        if (pd_ring_pop(&c->ropen, &top) != 0) {
            r->stop = PD_INTERNAL;
            return INFINITY;
        }
        pd__rnode *n = pd__rrec(r, top.id);
        if (!n) {
            r->stop = PD_INTERNAL;
            return INFINITY;
        }
        if (n->tag != top.tag)
            continue;
        n->tag = PD__RCLOSED;
        const int64_t g = n->g;
        const uint32_t cur = top.id;
        const uint8_t cc = cells[cur];
        const int32_t cx = (int32_t)(cur % (uint32_t)r->stride), cy = (int32_t)(cur / (uint32_t)r->stride);
        /* Shares the forward search's budget and poll: a reverse search
         * that must cover a whole component stops on a deadline too. */
        const pd_status go = pd__count_expansion_with(r->p->max_expansions, r->p->poll, r->p->poll_user,
                                                      &r->rexpanded);
        if (go != PD_OK) {
            r->stop = go;
            return INFINITY;
        }
        for (int dir = 0; dir < (r->eight ? 8 : 4); dir++) {
            const int32_t dx = pd__dx[dir], dy = pd__dy[dir];
            const uint32_t q = (uint32_t)((int64_t)cur + dy * r->stride + dx);
            if (!cells[q])
                continue;
            const int diag = dx != 0 && dy != 0;
            if (diag && (!cells[cur + (uint32_t)dx] || !cells[(uint32_t)((int64_t)cur + dy * r->stride)]))
                continue;
            if (pd__rpush(r, q, cx + dx, cy + dy, g + r->dur[diag][cc]) != 0) {
                r->stop = PD_INTERNAL;
                return INFINITY;
            }
        }
        if (cur == cell)
            return (double)g;
    }
    return INFINITY;
}

/* The exact static time from padded cell `cell` when the reverse search
 * has already closed it, else a negative number. */
static double pd__rra_known(const pd__srun *r, uint32_t cell)
{
    if (!r->rra_begun)
        return -1.0;
    const pd__rnode *n = (const pd__rnode *)(const void *)pd_nodepool_peek(&r->ctx->rcells, cell);
    if (!n)
        return -1.0;
    n += cell & (PD_NODEPOOL_BLOCK_CELLS - 1u);
    return n->gen == r->rgen && n->tag == PD__RCLOSED ? (double)n->g : -1.0;
}

/* ---- probes: exact static times from static shortest paths ----
 *
 * The reverse search above pays about one A* from the goal to the start
 * for the few tens of cells the space-time search takes out of its open
 * list. On a uniform grid a cell's exact time is also the length of a
 * static shortest path from it to the goal, which jump point search finds
 * for a fraction of A*'s expansions (pd_sipp_direct_static_path: the fast
 * path's own search, in the same milliseconds), and every cell of that path
 * learns its exact time with it (a suffix of a shortest path is shortest).
 * The fast path's declined path seeds them (the start and the way it meant
 * to go). A cell the forward search needs that no path has passed costs a
 * probe; past PD__PROBE_BUDGET jump points of probes in one plan the
 * reverse search takes over (crowds: many cells off every path so far).
 * Both give the same exact times; which one answered changes only which
 * of equally good plans a tie picks.
 */

/* The exact time a probe's path gave padded cell `cell`, else negative. */
static double pd__known(const pd__srun *r, uint32_t cell)
{
    if (r->kgen == 0)
        return -1.0; /* no probe store this plan */
    const pd__knode *n = (const pd__knode *)(const void *)pd_nodepool_peek(&r->ctx->kcells, cell);
    if (!n)
        return -1.0;
    n += cell & (PD_NODEPOOL_BLOCK_CELLS - 1u);
    return n->gen == r->kgen ? (double)n->g : -1.0;
}

/* Notes the exact times along a static shortest path to the goal (every
 * cell, unpadded, the goal last). 0, or -1 on allocation failure. */
static int pd__learn(pd__srun *r, const pd_point *path, size_t n)
{
    int64_t g = 0;
    for (size_t i = n; i-- > 0;) {
        const uint32_t cell = (uint32_t)((path[i].y + 1) * r->stride + path[i].x + 1);
        unsigned char *b = pd_nodepool_block(&r->ctx->kcells, cell);
        if (!b)
            return -1;
        ((pd__knode *)(void *)b)[cell & (PD_NODEPOOL_BLOCK_CELLS - 1u)] = (pd__knode){ .g = g, .gen = r->kgen };
        if (i > 0) {
            const int diag = path[i].x != path[i - 1].x && path[i].y != path[i - 1].y;
            g += r->dur[diag][r->grid->cells[cell]];
        }
    }
    return 0;
}

/* A probe from padded cell `cell`: its exact time, INFINITY when the goal
 * cannot be reached from it (or a budget or poll stopped the probe:
 * r->stop), or a negative number when probes do not apply here (they are
 * then off for the plan). */
static double pd__probe(pd__srun *r, uint32_t cell)
{
    uint64_t budget = 0;
    if (r->p->max_expansions) {
        if (r->rexpanded >= r->p->max_expansions) {
            r->stop = PD_BUDGET_EXCEEDED;
            return INFINITY;
        }
        budget = r->p->max_expansions - r->rexpanded;
    }
    const pd_point from = { (int32_t)(cell % (uint32_t)r->stride) - 1, (int32_t)(cell / (uint32_t)r->stride) - 1 };
    const pd_point *path;
    pd_status st;
    uint64_t expanded;
    const size_t n = pd_sipp_direct_static_path(&r->ctx->direct, r->grid, r->p, from, budget, &path, &st, &expanded);
    r->rexpanded += expanded;
    r->pexpanded += expanded;
    if (n == 0) {
        if (st == PD_NO_PATH) {
            r->probes++;
            return INFINITY;
        }
        if (st == PD_INVALID_ARGUMENT || st == PD_INTERNAL) {
            r->probing = 0; /* the reverse search answers instead */
            return -1.0;
        }
        r->stop = st; /* the budget or the poll */
        return INFINITY;
    }
    if (pd__learn(r, path, n) != 0) {
        r->probing = 0;
        return -1.0;
    }
    r->probes++;
    return pd__known(r, cell);
}

/* The exact static time from padded cell `cell` to the goal (INFINITY
 * where it cannot be reached, or when a search had to stop: r->stop). */
static double pd__exact(pd__srun *r, uint32_t cell)
{
    const double k = pd__known(r, cell);
    if (k >= 0.0)
        return k;
    if (r->probing && r->pexpanded < PD__PROBE_BUDGET) {
        const double v = pd__probe(r, cell);
        if (v >= 0.0 || r->stop != PD_OK)
            return v >= 0.0 ? v : INFINITY;
    }
    return pd__rra(r, cell);
}

/* Milliseconds, a lower bound on the time from padded (x, y) to the goal:
 * the caller's static distance when it gives one (infinite where the goal
 * cannot be reached), else octile or Manhattan. With exact static times on
 * (r->exact), the exact time where the reverse search already knows it, and
 * *exact says which: the others are made exact when popped (pd_sipp_plan),
 * so the reverse search closes only cells the forward search takes out of
 * its open list, not every neighbour it offers (those around the start,
 * behind it, would widen the reverse search far past A*'s). */
static double pd__h(pd__srun *r, uint32_t cell, int32_t x, int32_t y, int *exact)
{
    *exact = 0;
    if (r->exact) {
        double k = pd__known(r, cell);
        if (k < 0.0)
            k = pd__rra_known(r, cell);
        if (k >= 0.0) {
            *exact = 1;
            return k;
        }
    }
    const double d = r->p->heuristic   ? r->p->heuristic(r->p->heuristic_user, x - 1, y - 1)
                     : r->p->targets   ? pd_targets_h(r->p->targets, r->eight ? PD_CONNECT_8 : PD_CONNECT_4, x - 1, y - 1)
                     : r->eight        ? pd__octile(x - r->gx, y - r->gy)
                                       : pd__manhattan(x - r->gx, y - r->gy);
    const double h = d * r->ms_per_cell;
    /* With exact times, the expanded state's less the step is a bound too
     * (the triangle inequality: the way back is no longer than the step),
     * and a far tighter one where octile misses the walls: a successor off
     * every known path is then not taken out (and probed) before the
     * states that follow the known way, unless it may be as good. */
    return r->exact && r->h_floor > h ? r->h_floor : h;
}

/* ---- open list ---- */

static int pd__before(const pd__open *a, const pd__open *b)
{
    return a->f < b->f || (a->f == b->f && a->g > b->g);
}

static int pd__heap_insert(pd_sipp_ctx *c, pd__open e)
{
    if (pd__grow((void **)&c->heap, &c->cap_heap, c->n_heap + 1u, sizeof *c->heap) != 0)
        return -1;
    size_t i = c->n_heap++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!pd__before(&e, &c->heap[up]))
            break;
        c->heap[i] = c->heap[up];
        i = up;
    }
    c->heap[i] = e;
    return 0;
}

static int pd__push(pd__srun *r, uint32_t node)
{
    pd_sipp_ctx *c = r->ctx;
    const pd__snode *n = &c->nodes[node];
    const int32_t x = (int32_t)(n->cell % (uint32_t)r->stride), y = (int32_t)(n->cell / (uint32_t)r->stride);
    int exact;
    pd__open e = { .f = (double)n->g + pd__h(r, n->cell, x, y, &exact), .g = n->g, .node = node };
    e.exact = (uint32_t)exact;
    if (!isfinite(e.f))
        return 0; /* the caller's heuristic says the goal is out of reach */
    r->pushes++;
    return pd__heap_insert(c, e);
}

static pd__open pd__pop(pd_sipp_ctx *c)
{
    pd__open top = c->heap[0], last = c->heap[--c->n_heap];
    size_t i = 0, n = c->n_heap;
    for (;;) {
        size_t kid = 2 * i + 1;
        if (kid >= n)
            break;
        if (kid + 1 < n && pd__before(&c->heap[kid + 1], &c->heap[kid]))
            kid++;
        if (!pd__before(&c->heap[kid], &last))
            break;
        c->heap[i] = c->heap[kid];
        i = kid;
    }
    if (n > 0)
        c->heap[i] = last;
    return top;
}

/* ---- reading the table ---- */

/* Reads the spans of the neighbourhood of anchor (x, y), unpadded. */
static void pd__read_neighbourhood(pd__srun *r, int32_t x, int32_t y)
{
    pd_sipp_ctx *c = r->ctx;
    const int32_t side = r->k + 2;
    r->nb_x = x - 1;
    r->nb_y = y - 1;
    r->nb_quiet = 1;
    for (int32_t j = 0; j < side; j++)
        for (int32_t i = 0; i < side; i++) {
            size_t n = 0;
            const int32_t cx = r->nb_x + i, cy = r->nb_y + j;
            const pd_reserve_span *s = cx >= 0 && cy >= 0 ? pd_reserve_cell(r->table, cx, cy, &n) : NULL;
            c->nb_s[j * side + i] = s;
            c->nb_n[j * side + i] = (uint32_t)n;
            if (n)
                r->nb_quiet = 0;
        }
}

static int pd__cmp_iv(const void *a, const void *b)
{
    const pd__iv *x = a, *y = b;
    return x->t0 < y->t0 ? -1 : x->t0 > y->t0;
}

/* Gathers into ctx->busy, sorted by start, the other agents' spans on cells
 * x0..x1 by y0..y1 (unpadded) that end after `after`: from the
 * neighbourhood read, or straight from the table. For making a footprint's
 * safe intervals, once per anchor and plan. */
static int pd__gather(pd__srun *r, int32_t x0, int32_t y0, int32_t x1, int32_t y1, int64_t after,
                      int from_neighbourhood)
{
    pd_sipp_ctx *c = r->ctx;
    c->n_busy = 0;
    if (from_neighbourhood && r->nb_quiet)
        return 0;
    const int32_t side = r->k + 2;
    for (int32_t y = y0; y <= y1; y++)
        for (int32_t x = x0; x <= x1; x++) {
            size_t n;
            const pd_reserve_span *s;
            if (from_neighbourhood) {
                const int32_t at = (y - r->nb_y) * side + (x - r->nb_x);
                s = c->nb_s[at];
                n = c->nb_n[at];
            } else {
                s = pd_reserve_cell(r->table, x, y, &n);
            }
            for (size_t i = pd_reserve_first_ending_after(s, n, sizeof *s, after); i < n; i++) {
                if (pd__ignored(r, &s[i]))
                    continue;
                if (pd__grow((void **)&c->busy, &c->cap_busy, c->n_busy + 1u, sizeof *c->busy) != 0)
                    return -1;
                pd__iv v = { s[i].t0, s[i].t1 };
                size_t j = c->n_busy++;
                if (c->n_busy <= PD__INSERTION_SORT_MAX)
                    for (; j > 0 && c->busy[j - 1].t0 > v.t0; j--)
                        c->busy[j] = c->busy[j - 1];
                c->busy[j] = v;
            }
        }
    if (c->n_busy > PD__INSERTION_SORT_MAX)
        qsort(c->busy, c->n_busy, sizeof *c->busy, pd__cmp_iv);
    return 0;
}

/*
 * The earliest d >= from at which [d, d + dur) meets no other agent's span
 * on the cells x0..x1 by y0..y1 of the neighbourhood read, or some d >=
 * limit when there is none before limit. Sweeps the cells' own sorted
 * arrays until a pass moves d no further: no gathering, no sorting, and a
 * binary search per cell per pass.
 */
static int64_t pd__earliest(const pd__srun *r, int32_t x0, int32_t y0, int32_t x1, int32_t y1, int64_t from,
                            int64_t dur, int64_t limit)
{
    const pd_sipp_ctx *c = r->ctx;
    const int32_t side = r->k + 2;
    int64_t d = from;
    if (r->nb_quiet)
        return d;
    for (int moved = 1; moved;) {
        moved = 0;
        for (int32_t y = y0; y <= y1; y++)
            for (int32_t x = x0; x <= x1; x++) {
                const int32_t at = (y - r->nb_y) * side + (x - r->nb_x);
                const pd_reserve_span *s = c->nb_s[at];
                const size_t n = c->nb_n[at];
                for (size_t i = pd_reserve_first_ending_after(s, n, sizeof *s, d); i < n && s[i].t0 < d + dur; i++) {
                    if (pd__ignored(r, &s[i]))
                        continue;
                    d = s[i].t1; /* later spans here start at or after it */
                    moved = 1;
                    if (d >= limit)
                        return d;
                }
            }
    }
    return d;
}

/* The first of the nodes first..first+n-1 (safe intervals in time order)
 * whose interval ends after t. */
static uint32_t pd__interval_after(const pd_sipp_ctx *c, uint32_t first, uint32_t n, int64_t t)
{
    uint32_t lo = first, hi = first + n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2u;
        if (c->nodes[mid].hi > t)
            hi = mid;
        else
            lo = mid + 1u;
    }
    return lo;
}

/* ---- nodes ---- */

static pd__scell *pd__rec(pd__srun *r, uint32_t cell)
{
    unsigned char *b = pd_nodepool_block(&r->ctx->cells, cell);
    if (!b)
        return NULL;
    pd__scell *s = &((pd__scell *)(void *)b)[cell & (PD_NODEPOOL_BLOCK_CELLS - 1u)];
    if (s->gen != r->gen)
        *s = (pd__scell){ .gen = r->gen, .first = PD__NO_NODE, .n = PD__UNSET, .stat = PD__NO_NODE };
    return s;
}

/* Appends `count` nodes; the index of the first, or PD__NO_NODE. */
static uint32_t pd__new_nodes(pd__srun *r, uint32_t count)
{
    pd_sipp_ctx *c = r->ctx;
    if ((uint64_t)c->n_nodes + count >= PD__NO_NODE)
        return PD__NO_NODE;
    if (c->n_nodes + count > c->cap_nodes) {
        size_t cap = c->cap_nodes;
        if (pd__grow((void **)&c->nodes, &cap, (size_t)c->n_nodes + count, sizeof *c->nodes) != 0 ||
            cap >= PD__NO_NODE)
            return PD__NO_NODE;
        c->cap_nodes = (uint32_t)cap;
    }
    uint32_t first = c->n_nodes;
    c->n_nodes += count;
    return first;
}

/* Makes the safe-interval nodes of the anchor at padded cell (from t0 on),
 * reading the neighbourhood or the table. 0, or -1 on allocation failure. */
static int pd__make_intervals(pd__srun *r, pd__scell *rec, uint32_t cell, int from_neighbourhood)
{
    const int64_t t0 = r->p->t0_ms;
    const int32_t x = (int32_t)(cell % (uint32_t)r->stride) - 1, y = (int32_t)(cell / (uint32_t)r->stride) - 1;
    pd_sipp_ctx *c = r->ctx;
    c->n_busy = 0;
    if (r->use_table &&
        pd__gather(r, x, y, x + r->k - 1, y + r->k - 1, t0, from_neighbourhood) != 0)
        return -1;
    /* The complement of the busy spans, from t0 on: at most one more
     * interval than spans. */
    uint32_t first = pd__new_nodes(r, (uint32_t)c->n_busy + 1u);
    if (first == PD__NO_NODE)
        return -1;
    uint32_t n = 0;
    int64_t cur = t0;
    for (size_t i = 0; i < c->n_busy && cur < PD_RESERVE_FOREVER; i++) {
        const pd__iv *b = &c->busy[i];
        if (b->t1 <= cur)
            continue;
        if (b->t0 > cur)
            c->nodes[first + n++] = (pd__snode){ .lo = cur, .hi = b->t0 };
        cur = b->t1;
    }
    if (cur < PD_RESERVE_FOREVER)
        c->nodes[first + n++] = (pd__snode){ .lo = cur, .hi = PD_RESERVE_FOREVER };
    for (uint32_t i = 0; i < n; i++) {
        pd__snode *nd = &c->nodes[first + i];
        nd->g = INT64_MAX;
        nd->parent = PD__NO_NODE;
        nd->cell = cell;
        nd->mode = PD__SPACE_TIME;
    }
    /* Give back the slots the complement did not use. */
    c->n_nodes = first + n;
    rec->first = first;
    rec->n = n;
    return 0;
}

/* Offers node `to` an arrival at g from `from`. 0, or -1 on failure. */
static int pd__relax(pd__srun *r, uint32_t to, int64_t g, uint32_t from)
{
    pd__snode *n = &r->ctx->nodes[to];
    if (n->closed || g >= n->g)
        return 0;
    n->g = g;
    n->parent = from;
    return pd__push(r, to);
}

static int pd__relax_static(pd__srun *r, uint32_t cell, int64_t g, uint32_t from)
{
    pd__scell *rec = pd__rec(r, cell);
    if (!rec)
        return -1;
    if (rec->stat == PD__NO_NODE) {
        uint32_t i = pd__new_nodes(r, 1);
        if (i == PD__NO_NODE)
            return -1;
        r->ctx->nodes[i] = (pd__snode){ .g = INT64_MAX, .lo = 0, .hi = PD_RESERVE_FOREVER, .parent = PD__NO_NODE,
                                        .cell = cell, .mode = PD__STATIC };
        rec->stat = i;
    }
    return pd__relax(r, rec->stat, g, from);
}

/* Successors of node `at` (closed). 0, or -1 on allocation failure. */
static int pd__expand(pd__srun *r, uint32_t at)
{
    pd_sipp_ctx *c = r->ctx;
    const pd__snode here = c->nodes[at];
    const uint32_t cell = here.cell;
    const int32_t px = (int32_t)(cell % (uint32_t)r->stride) - 1, py = (int32_t)(cell / (uint32_t)r->stride) - 1;
    const uint8_t *cells = r->grid->cells;
    const int timed = here.mode == PD__SPACE_TIME;
    if (timed && r->use_table)
        pd__read_neighbourhood(r, px, py);
    for (int dir = 0; dir < (r->eight ? 8 : 4); dir++) {
        const int32_t dx = pd__dx[dir], dy = pd__dy[dir];
        const uint32_t q = (uint32_t)((int64_t)cell + dy * r->stride + dx);
        const uint8_t cq = cells[q];
        if (!cq)
            continue;
        const int diag = dx != 0 && dy != 0;
        /* No corner cutting: on a unit grid this is the footprint's sweep. */
        if (diag && (!cells[cell + (uint32_t)dx] || !cells[(uint32_t)((int64_t)cell + dy * r->stride)]))
            continue;
        const int64_t dur = r->dur[diag][cq];
        r->h_floor = r->h_parent - (double)dur;
        if (!timed) {
            if (pd__relax_static(r, q, here.g + dur, at) != 0)
                return -1;
            continue;
        }
        pd__scell *rec = pd__rec(r, q);
        if (!rec || (rec->n == PD__UNSET && pd__make_intervals(r, rec, q, 1) != 0))
            return -1;
        if (!r->use_table) {
            /* One interval everywhere, [t0, FOREVER): no waiting needed. */
            if (pd__relax(r, rec->first, here.g + dur, at) != 0)
                return -1;
            continue;
        }
        /* The move's box: both footprints. */
        const int32_t bx0 = dx < 0 ? px - 1 : px, by0 = dy < 0 ? py - 1 : py;
        const int32_t bx1 = (dx > 0 ? px + 1 : px) + r->k - 1, by1 = (dy > 0 ? py + 1 : py) + r->k - 1;
        for (uint32_t j = pd__interval_after(c, rec->first, rec->n, here.g + dur); j < rec->first + rec->n; j++) {
            const pd__snode *iv = &c->nodes[j];
            if (iv->lo >= here.hi)
                break;
            /* Leave no earlier than arrival here and the interval's start
             * there, at the first moment the whole box is free for the
             * move, and while the agent may still wait here. */
            const int64_t d = pd__earliest(r, bx0, by0, bx1, by1, here.g > iv->lo ? here.g : iv->lo, dur, here.hi);
            if (d >= here.hi)
                break;
            if (d + dur >= iv->hi)
                continue;
            if (pd__relax(r, j, d + dur, at) != 0)
                return -1;
        }
    }
    return 0;
}

/* Another agent's slot holding a cell of the footprint at anchor (x, y) at
 * time t, or PD_RESERVE_NO_SLOT. */
static uint32_t pd__holder(const pd__srun *r, int32_t x, int32_t y, int64_t t)
{
    for (int32_t j = y; j < y + r->k; j++)
        for (int32_t i = x; i < x + r->k; i++) {
            size_t n;
            const pd_reserve_span *s = pd_reserve_cell(r->table, i, j, &n);
            for (size_t a = pd_reserve_first_ending_after(s, n, sizeof *s, t); a < n && s[a].t0 <= t; a++)
                if (!pd__ignored(r, &s[a]))
                    return s[a].slot;
        }
    return PD_RESERVE_NO_SLOT;
}

/* Whether another agent holds a cell of the footprint at anchor (x, y)
 * for good (a park): only the last span of a cell can be open-ended. */
static int pd__parked_on(const pd__srun *r, int32_t x, int32_t y)
{
    for (int32_t j = y; j < y + r->k; j++)
        for (int32_t i = x; i < x + r->k; i++) {
            size_t n;
            const pd_reserve_span *s = pd_reserve_cell(r->table, i, j, &n);
            if (n && s[n - 1].t1 == PD_RESERVE_FOREVER && !pd__ignored(r, &s[n - 1]))
                return 1;
        }
    return 0;
}

/* Builds the waypoints from the end node back: for a static end, only up to
 * the handover, which holds its cell for hold_ms from the window's end or
 * its arrival, whichever is later (or for good). 0, or -1 on allocation
 * failure. */
static int pd__extract(pd__srun *r, uint32_t end, pd_sipp_result *res)
{
    pd_sipp_ctx *c = r->ctx;
    const int partial = c->nodes[end].mode != PD__SPACE_TIME;
    while (c->nodes[end].mode == PD__STATIC)
        end = c->nodes[end].parent;
    size_t len = 0;
    for (uint32_t v = end; v != PD__NO_NODE; v = c->nodes[v].parent)
        len++;
    if (pd__grow((void **)&c->wp, &c->cap_wp, len, sizeof *c->wp) != 0)
        return -1;
    c->n_wp = len;
    double cost = 0.0;
    size_t i = len;
    int64_t next_depart = 0;
    for (uint32_t v = end; v != PD__NO_NODE; v = c->nodes[v].parent) {
        const pd__snode *n = &c->nodes[v];
        const int32_t x = (int32_t)(n->cell % (uint32_t)r->stride), y = (int32_t)(n->cell / (uint32_t)r->stride);
        pd_waypoint *w = &c->wp[--i];
        w->x = x - 1;
        w->y = y - 1;
        w->t_arrive_ms = n->g;
        if (i + 1 == len)
            w->t_leave_ms = partial && r->p->hold_ms ? (n->g > r->t_end ? n->g : r->t_end) + r->p->hold_ms
                            : r->p->at_goal == PD_AT_GOAL_VANISH && !partial ? n->g
                                                                               : PD_RESERVE_FOREVER;
        else
            w->t_leave_ms = next_depart;
        if (n->parent != PD__NO_NODE) {
            const pd__snode *from = &c->nodes[n->parent];
            const int32_t fx = (int32_t)(from->cell % (uint32_t)r->stride);
            const int32_t fy = (int32_t)(from->cell / (uint32_t)r->stride);
            const int diag = fx != x && fy != y;
            const uint8_t cq = r->grid->cells[n->cell];
            cost += diag ? PD__SQRT2 * cq : (double)cq;
            next_depart = n->g - r->dur[diag][cq];
        }
    }
    res->waypoints = c->wp;
    res->n_waypoints = len;
    res->reserved_until_ms = c->wp[len - 1].t_leave_ms;
    res->cost = cost;
    return 0;
}

static pd_status pd__check(const pd_reserve *table, const pd_grid *grid, const pd_sipp_params *p,
                           pd_sipp_result *res)
{
    const pd_connectivity conn = p->connectivity ? p->connectivity : PD_CONNECT_8;
    if (p->unit < 1 || p->unit > PD_UNIT_SIZE_MAX || !(p->speed >= PD_SIPP_MIN_SPEED) ||
        !(p->speed <= PD_SIPP_MAX_SPEED) || p->window_ms < 0 || p->window_ms > PD_SIPP_MAX_WINDOW_MS ||
        p->hold_ms < 0 || p->hold_ms > PD_SIPP_MAX_WINDOW_MS ||
        p->t0_ms < 0 || p->t0_ms > PD_SIPP_MAX_T0 || (conn != PD_CONNECT_8 && conn != PD_CONNECT_4) ||
        (p->at_goal != PD_AT_GOAL_PARK && p->at_goal != PD_AT_GOAL_VANISH))
        return PD_INVALID_ARGUMENT;
    const int64_t max_window = pd_reserve_get_limits(table)->max_window_ms;
    if (max_window > 0 && (p->window_ms == 0 || p->window_ms > max_window)) {
        res->limit = PD_RESERVE_LIMIT_WINDOW;
        return PD_LIMIT_EXCEEDED;
    }
    if (p->targets) {
        /* Goal sets and ranges (pd_targets.h): every goal inside; a blocked
         * one (or all) is no refusal, it is never reached (NO_PATH). */
        if (p->targets->n_goals < 1 || p->targets->n_goals > PD_TARGETS_MAX_GOALS || !(p->targets->range >= 0))
            return PD_INVALID_ARGUMENT;
        for (size_t i = 0; i < p->targets->n_goals; i++)
            if (!pd_grid_in_bounds(grid, p->targets->goals[i].x, p->targets->goals[i].y))
                return PD_OUT_OF_BOUNDS;
        if (!pd_grid_in_bounds(grid, p->start.x, p->start.y))
            return PD_OUT_OF_BOUNDS;
        return pd_grid_get(grid, p->start.x, p->start.y) == PD_CELL_BLOCKED ? PD_START_BLOCKED : PD_OK;
    }
    if (!pd_grid_in_bounds(grid, p->start.x, p->start.y) || !pd_grid_in_bounds(grid, p->goal.x, p->goal.y))
        return PD_OUT_OF_BOUNDS;
    if (pd_grid_get(grid, p->start.x, p->start.y) == PD_CELL_BLOCKED)
        return PD_START_BLOCKED;
    if (pd_grid_get(grid, p->goal.x, p->goal.y) == PD_CELL_BLOCKED)
        return PD_GOAL_BLOCKED;
    return PD_OK;
}

pd_status pd_sipp_plan(pd_sipp_ctx *ctx, const pd_reserve *table, const pd_grid *grid, const pd_sipp_params *p,
                       pd_sipp_result *res)
{
    /* Clock reads cost up to half a microsecond on a VM's clock source,
     * a fair part of a short fast-path plan: the fast path's time comes
     * from its search's own metrics, and only SIPP reads the clock. */
    uint64_t started = 0, direct_us = 0;
    pd_sipp_result out = { 0 };
    pd_status st = pd__check(table, grid, p, &out);
    if (st != PD_OK)
        goto done;

    pd__srun *r = &(pd__srun){ 0 };
    r->ctx = ctx;
    r->table = table;
    r->grid = grid;
    r->p = p;
    r->self = pd_reserve_agent_slot(table, p->agent);
    r->use_table = pd_reserve_spans_except(table, r->self) > 0;
    r->eight = (p->connectivity ? p->connectivity : PD_CONNECT_8) == PD_CONNECT_8;
    r->k = (int32_t)p->unit;
    r->stride = grid->stride;
    /* With targets, goal is unused (pd__at_goal, pd__h read the set). */
    r->goal = p->targets ? UINT32_MAX : (uint32_t)pd_grid_index(grid, p->goal.x, p->goal.y);
    r->gx = p->goal.x + 1;
    r->gy = p->goal.y + 1;
    r->ms_per_cell = 1000.0 / p->speed;
    r->t_end = p->window_ms ? p->t0_ms + p->window_ms : PD_RESERVE_FOREVER;
    /* Goal sets and ranges are keyed by pd_targets_h (the reverse search
     * has one goal): the octile planner, exact but slower. */
    r->exact = p->heuristic == NULL && p->targets == NULL;
    r->sx = p->start.x + 1;
    r->sy = p->start.y + 1;
    r->stop = PD_OK;
    r->h_parent = r->h_floor = -INFINITY;
    if (r->use_table) {
        uint32_t holder = pd__holder(r, p->start.x, p->start.y, p->t0_ms);
        if (holder != PD_RESERVE_NO_SLOT) {
            out.has_blocker = 1;
            out.blocker = pd_reserve_slot_agent(table, holder);
            st = PD_START_BLOCKED;
            goto done;
        }
    }

    /* Parking where another agent parks can never be: without a window
     * the search would try every state it can reach before saying so. */
    if (r->use_table && p->at_goal == PD_AT_GOAL_PARK && p->window_ms == 0 && !p->targets && !p->park_ok &&
        pd__parked_on(r, p->goal.x, p->goal.y)) {
        st = PD_NO_PATH;
        goto done;
    }

    /* The static shortest path, when the table leaves it free, is optimal
     * (pd_sipp_direct.h): no search over time at all. Not for pd_yield's
     * plans through holders (passable), past later plans (ignore_span) or
     * to any parking cell (park_ok), which the fast path knows nothing of; and a PARTIAL one only where
     * the rule on holds (hold_ok, which restricts handovers, not a goal
     * reached) accepts its last cell. */
    const int tried_direct = !p->sipp_only && !p->passable && !p->park_ok && !p->ignore_span;
    if (tried_direct &&
        pd_sipp_direct_plan(&ctx->direct, table, grid, p, r->self, r->use_table, r->t_end, &out, &st, &direct_us)) {
        const pd_waypoint *last = out.n_waypoints ? &out.waypoints[out.n_waypoints - 1] : NULL;
        /* A free static path is the earliest arrival there is: its eta is
         * the goal's (OK) or, PARTIAL, at least its handover's - nothing
         * pd_yield could gain on by moving holders. */
        if (last)
            out.eta_ms = last->t_arrive_ms;
        if (st != PD_PARTIAL || !p->hold_ok || (last && p->hold_ok(p->hold_user, last->x, last->y)))
            goto done;
        pd_sipp_result none = { 0 };
        out = none;
        st = PD_OK;
    }
    started = pd_clock_us();
    /* Made after the fast path, which needs two of them (510 ceil()s are
     * a fair part of its time on a short query). */
    for (int c = 1; c < 256; c++)
        for (int diag = 0; diag < 2; diag++)
            r->dur[diag][c] = pd_sipp_step_ms(diag, c, p->speed);

    const size_t n_cells = (size_t)(grid->width + 2) * (size_t)(grid->height + 2);
    ctx->n_nodes = 0;
    ctx->n_heap = 0;
    ctx->n_wp = 0;
    if (pd_nodepool_begin(&ctx->cells, n_cells) != 0) {
        st = PD_INTERNAL;
        goto done;
    }
    r->gen = ctx->cells.gen;
    r->n_cells = n_cells;
    /* Probes where jump point search applies (pd_sipp_direct.h); the
     * reverse search is begun at its first use. */
    r->probing = r->exact && grid->uniform_cost && !p->reverse_only;
    if (r->probing) {
        if (pd_nodepool_begin(&ctx->kcells, n_cells) != 0) {
            st = PD_INTERNAL;
            goto done;
        }
        r->kgen = ctx->kcells.gen;
        size_t n_seed = 0;
        const pd_point *seed = tried_direct ? pd_sipp_direct_declined_path(ctx->direct, &n_seed) : NULL;
        if (n_seed && pd__learn(r, seed, n_seed) != 0)
            r->probing = 0;
    }
    const uint32_t start = (uint32_t)pd_grid_index(grid, p->start.x, p->start.y);
    pd__scell *srec = pd__rec(r, start);
    if (!srec || pd__make_intervals(r, srec, start, 0) != 0) {
        st = PD_INTERNAL;
        goto done;
    }
    /* Free at t0 (checked above), so the first interval starts there. */
    if (pd__relax(r, srec->first, p->t0_ms, PD__NO_NODE) != 0) {
        st = r->stop != PD_OK ? r->stop : PD_INTERNAL;
        goto done;
    }
    uint32_t end = PD__NO_NODE;
    double end_key = 0.0;
    st = PD_NO_PATH;
    while (ctx->n_heap > 0) {
        const pd__open top = pd__pop(ctx);
        pd__snode *n = &ctx->nodes[top.node];
        if (n->closed || top.g != n->g)
            continue;
        if (r->exact && !top.exact) {
            /* Its key was a lower bound: make it exact, and put it back if
             * that raised it. */
            const double h = pd__exact(r, n->cell);
            if (r->stop != PD_OK) {
                st = r->stop;
                break;
            }
            if (!isfinite(h))
                continue; /* the goal cannot be reached from there */
            const pd__open e = { .f = (double)top.g + h, .g = top.g, .node = top.node, .exact = 1 };
            if (e.f > top.f) {
                if (pd__heap_insert(ctx, e) != 0) {
                    st = PD_INTERNAL;
                    break;
                }
                continue;
            }
        }
        n->closed = 1;
        /* With exact static times (pd__rra), a static node's key is the
         * whole plan's arrival at the goal, and the smallest key open: the
         * static rest needs no search. */
        if (r->exact && n->mode == PD__STATIC) {
            end = top.node;
            end_key = top.f;
            st = PD_PARTIAL;
            break;
        }
        if (pd__at_goal(r, n->cell)) {
            if (n->mode == PD__STATIC) {
                end = top.node;
                end_key = top.f;
                st = PD_PARTIAL;
                break;
            }
            if (p->at_goal == PD_AT_GOAL_VANISH || n->hi == PD_RESERVE_FOREVER) {
                end = top.node;
                end_key = top.f;
                st = PD_OK;
                break;
            }
        }
        pd_status go = pd__count_expansion_with(p->max_expansions, p->poll, p->poll_user, &out.expanded);
        if (go != PD_OK) {
            st = go;
            break;
        }
        /* The handover (see pd_sipp.h): somewhere the agent may stay from
         * the window's end, or from its arrival past it, for one more
         * window. Reached past the end, the state goes on as static; reached
         * before, it may also wait there for the end (its static twin at
         * t_end), which is how an agent that cannot get anywhere yet holds
         * its cell. */
        if (n->mode == PD__SPACE_TIME && p->window_ms > 0) {
            const int64_t hold_from = n->g > r->t_end ? n->g : r->t_end;
            /* The interval first: it is one comparison, and hold_ok is
             * the dear test (pd_yield's clear holds read the table round
             * the anchor for every unit size the scene has). */
            if ((p->hold_ms ? n->hi - hold_from >= p->hold_ms : n->hi == PD_RESERVE_FOREVER) &&
                pd__may_hold(r, n->cell)) {
                if (n->g >= r->t_end) {
                    n->mode = PD__HANDOVER;
                    if (r->exact) {
                        end = top.node; /* as a static node, above */
                        end_key = top.f;
                        st = PD_PARTIAL;
                        break;
                    }
                } else if (pd__relax_static(r, n->cell, r->t_end, top.node) != 0) {
                    st = r->stop != PD_OK ? r->stop : PD_INTERNAL;
                    break;
                }
            }
        }
        r->h_parent = r->exact ? top.f - (double)top.g : -INFINITY;
        const int ex = pd__expand(r, top.node);
        r->h_floor = r->h_parent = -INFINITY;
        if (ex != 0) {
            st = r->stop != PD_OK ? r->stop : PD_INTERNAL;
            break;
        }
    }
    out.generated = r->pushes;
    out.reverse_expanded = r->rexpanded;
    out.probes = r->probes;
    if ((st == PD_OK || st == PD_PARTIAL) && pd__extract(r, end, &out) != 0)
        st = PD_INTERNAL;
    out.eta_ms = (int64_t)end_key;
done:
    out.micros = direct_us + (started ? pd_clock_us() - started : 0);
    if (res)
        *res = out;
    return st;
}

pd_status pd_sipp_commit(pd_reserve *table, const pd_sipp_params *p, pd_status st, pd_sipp_result *out)
{
    if (st != PD_OK && st != PD_PARTIAL)
        return st;
    pd_reserve_refusal why;
    const pd_status rs = pd_reserve_replace(table, p->agent, p->unit, p->t0_ms, out->waypoints, out->n_waypoints, &why);
    if (rs == PD_OK)
        return st;
    out->limit = why.limit;
    out->waypoints = NULL;
    out->n_waypoints = 0;
    out->reserved_until_ms = 0;
    return rs;
}

pd_status pd_sipp_reserve(pd_sipp_ctx *ctx, pd_reserve *table, const pd_grid *grid, const pd_sipp_params *p,
                          pd_sipp_result *res)
{
    pd_sipp_result out;
    const pd_status st = pd_sipp_commit(table, p, pd_sipp_plan(ctx, table, grid, p, &out), &out);
    if (res)
        *res = out;
    return st;
}
