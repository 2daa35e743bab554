/*
 * pd_jps.c - Jump Point Search on uniform-cost 8-connected grids without
 * corner cutting (see pd_jps.h for the contract).
 *
 * Pruning rules. With corner cutting forbidden the forced neighbours differ
 * from the AAAI 2011 paper; they follow from a "diagonal first" canonical
 * ordering (among optimal paths, prefer the one that takes diagonal steps
 * as early as possible). For a cell x reached from its parent p:
 *
 *  - Diagonal arrival, say north-east (p is x's south-west neighbour). The
 *    step p -> x was legal, so x's west and south neighbours are open. West,
 *    south: reached from p in one straight step. North-west: p -> west ->
 *    north-west costs 2 < 2*sqrt(2). South-east: likewise through south. So
 *    only the natural north, east and north-east remain: no forced
 *    neighbours at all.
 *  - Straight arrival, say east (p is x's west neighbour). North is reached
 *    from p by one diagonal step (sqrt(2) < 2) unless p's north (x's
 *    north-west, the "behind" cell) is blocked: then north is forced. North-
 *    east costs 1 + sqrt(2) through x, and equally much through p -> north
 *    -> north-east, which the diagonal-first order prefers; that route is
 *    gone exactly when north-west is blocked, so north-east is forced
 *    together with north (it also needs north and east open, like any
 *    diagonal step). South and south-east mirror this.
 *
 * A straight scan therefore stops at a cell with an open side whose behind
 * cell is blocked; a diagonal scan stops where either straight scan along its
 * component directions finds something. Both stop at the goal. The padding
 * around a pd_grid ends every scan without a bounds check. Tests compare the
 * result against A* exhaustively on random grids and on the Moving AI set.
 *
 * The open list is the radix heap of pd_radix.h, with A*'s keys,
 * tie-breaking and push tags (A* itself uses a ring of f buckets, whose
 * window a long jump would overrun); node records are 16 bytes stamped with
 * a generation, in the lazy node pool of pd_nodepool.h, so a context is
 * reused without clearing and holds memory only for the blocks of 256 cells
 * where jump points were recorded. Each jump point remembers its parent jump
 * point; extraction walks those and fills in the straight or diagonal run
 * between each pair.
 */
#include "pd_jps.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pd_nodepool.h"
#include "pd_radix.h"
#include "pd_search_common.h"

#define PD__CLOSED UINT32_MAX
#define PD__NO_PARENT UINT32_MAX
/* As in pd_search.c: improvements smaller than float noise are ignored. */
#define PD__IMPROVE_EPS 1e-9

typedef struct pd__jnode {
    double g;
    uint32_t gen;
    uint32_t tag;        /* counts the node's pushes this search (see
                            pd_search.c); PD__CLOSED once expanded */
} pd__jnode;

/* A node pool block: 256 cells' records, then their parents' padded
 * indices. */
typedef struct pd__jblock {
    pd__jnode n[PD_NODEPOOL_BLOCK_CELLS];
    uint32_t parent[PD_NODEPOOL_BLOCK_CELLS];
} pd__jblock;

#define PD__SLOT(i) ((i) & (PD_NODEPOOL_BLOCK_CELLS - 1u))

struct pd_jps_ctx {
    pd_nodepool nodes;   /* pd__jblock per 256 cells holding a jump point */
    pd_radix open;       /* its arrays are kept across searches */

    /* What pd_jps_extract needs from the last search. */
    int have_path;
    int32_t last_stride;
    uint32_t last_goal;
    size_t last_path_len;
};

pd_jps_ctx *pd_jps_ctx_create(void)
{
    pd_jps_ctx *ctx = calloc(1, sizeof *ctx);
    if (ctx)
        pd_nodepool_init(&ctx->nodes, sizeof(pd__jblock));
    return ctx;
}

void pd_jps_ctx_destroy(pd_jps_ctx *ctx)
{
    if (!ctx)
        return;
    pd_nodepool_free(&ctx->nodes);
    pd_radix_free(&ctx->open);
    free(ctx);
}

size_t pd_jps_ctx_footprint(const pd_jps_ctx *ctx)
{
    return sizeof *ctx + pd_nodepool_footprint(&ctx->nodes) + pd_radix_footprint(&ctx->open);
}

void pd_jps_ctx_trim(pd_jps_ctx *ctx, size_t keep_bytes)
{
    if (pd_jps_ctx_footprint(ctx) <= keep_bytes)
        return;
    /* As pd_search_ctx_trim: the records keep what the open list leaves. */
    ctx->have_path = 0;
    size_t rest = pd_jps_ctx_footprint(ctx) - pd_nodepool_footprint(&ctx->nodes);
    pd_nodepool_trim(&ctx->nodes, keep_bytes > rest ? keep_bytes - rest : 0);
    if (pd_jps_ctx_footprint(ctx) <= keep_bytes)
        return;
    pd_radix_free(&ctx->open);
    rest = pd_jps_ctx_footprint(ctx) - pd_nodepool_footprint(&ctx->nodes);
    pd_nodepool_trim(&ctx->nodes, keep_bytes > rest ? keep_bytes - rest : 0);
}

/* The block of a cell that holds a record this search. */
static inline pd__jblock *pd__jblk(const pd_jps_ctx *ctx, uint32_t v)
{
    return (pd__jblock *)(void *)ctx->nodes.dir[v >> PD_NODEPOOL_BLOCK_SHIFT];
}

static inline int32_t pd__sign(int32_t v)
{
    return (v > 0) - (v < 0);
}

int pd_jps_applicable(const pd_grid *grid, const pd_search_params *params)
{
    if (!grid || !params)
        return 0;
    return (params->connectivity == 0 || params->connectivity == PD_CONNECT_8) && grid->uniform_cost &&
           params->n_blockers == 0 && !params->has_window && !params->partial_on_cutoff;
}

typedef struct pd__jrun {
    pd_jps_ctx *ctx;
    uint32_t gen;        /* the node pool's, for this search */
    const uint8_t *cells;
    int32_t stride;
    const uint8_t *goal;
    const uint8_t *cells_end;  /* one past the last padded cell */
    int32_t gx, gy;      /* goal in padded coordinates */
    uint64_t generated;
    int out_of_memory;   /* the open list could not grow */
} pd__jrun;

/*
 * Horizontal scans read eight cells of the row and of the rows above and
 * below at once (the block-based scanning of Harabor & Grastien, ICAPS 2014,
 * on bytes rather than bits): per 64-bit word they compute "blocked or
 * forced" for all eight cells and jump to the first. This needs
 * little-endian byte order; elsewhere the cell-by-cell loop does all scans.
 */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && defined(__GNUC__)
#define PD__JPS_WORDS 1
#else
#define PD__JPS_WORDS 0
#endif
#define PD__WORD_CELLS 8
#define PD__LOW7 0x7f7f7f7f7f7f7f7fULL

static inline uint64_t pd__load8(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The high bit of every byte of w that is non-zero, all other bits clear. */
static inline uint64_t pd__nonzero_bytes(uint64_t w)
{
    return (((w & PD__LOW7) + PD__LOW7) | w) & ~PD__LOW7;
}

/* Cell by cell: the first cell after p along step (side = the perpendicular
 * offset) that is the goal or has a forced neighbour; NULL when a blocked
 * cell comes first. */
static inline const uint8_t *pd__scan_cells(const uint8_t *p, ptrdiff_t step, ptrdiff_t side, const uint8_t *goal)
{
    for (;;) {
        p += step;
        if (!*p)
            return NULL;
        if (p == goal)
            return p;
        if ((p[side] && !p[side - step]) || (p[-side] && !p[-side - step]))
            return p;
    }
}

/* The first stop after p along a row (dx = +1 or -1), word by word while the
 * words stay inside the grid's cells, then cell by cell. */
static inline const uint8_t *pd__scan_row(const pd__jrun *r, const uint8_t *p, const ptrdiff_t dx)
{
#if PD__JPS_WORDS
    const ptrdiff_t s = r->stride;
    if (dx > 0) {
        /* Words cover q .. q+7; reads reach q-s-1 .. q+s+7. */
        for (const uint8_t *q = p + 1; q - r->cells >= s + 1 && r->cells_end - q >= s + PD__WORD_CELLS;
             q += PD__WORD_CELLS) {
            uint64_t stop = ~pd__nonzero_bytes(pd__load8(q)) & ~PD__LOW7;
            stop |= pd__nonzero_bytes(pd__load8(q - s)) & ~pd__nonzero_bytes(pd__load8(q - s - 1));
            stop |= pd__nonzero_bytes(pd__load8(q + s)) & ~pd__nonzero_bytes(pd__load8(q + s - 1));
            stop &= ~PD__LOW7;
            const uint8_t *at = stop ? q + __builtin_ctzll(stop) / 8 : q + PD__WORD_CELLS - 1;
            if (r->goal >= q && r->goal <= at)
                return r->goal;
            if (stop)
                return *at ? at : NULL;
            p = at;
        }
    } else {
        /* Words cover q-7 .. q; reads reach q-s-7 .. q+s+1. */
        for (const uint8_t *q = p - 1; q - r->cells >= s + PD__WORD_CELLS - 1 && r->cells_end - q >= s + 2;
             q -= PD__WORD_CELLS) {
            const uint8_t *b = q - (PD__WORD_CELLS - 1);
            uint64_t stop = ~pd__nonzero_bytes(pd__load8(b)) & ~PD__LOW7;
            stop |= pd__nonzero_bytes(pd__load8(b - s)) & ~pd__nonzero_bytes(pd__load8(b - s + 1));
            stop |= pd__nonzero_bytes(pd__load8(b + s)) & ~pd__nonzero_bytes(pd__load8(b + s + 1));
            stop &= ~PD__LOW7;
            const uint8_t *at = stop ? b + (63 - __builtin_clzll(stop)) / 8 : b;
            if (r->goal <= q && r->goal >= at)
                return r->goal;
            if (stop)
                return *at ? at : NULL;
            p = at;
        }
    }
    /* The rest (near the first or last rows, where a word would leave the
     * array) cell by cell from the last cell the words passed. */
#endif
    return pd__scan_cells(p, dx, r->stride, r->goal);
}

/* Scans from p in a straight line (step = +-1 or +-stride) and returns the
 * first cell that is the goal or has a forced neighbour, or NULL when a
 * blocked cell comes first. */
static inline const uint8_t *pd__jump_straight(const pd__jrun *r, const uint8_t *p, ptrdiff_t step)
{
    if (step == 1 || step == -1)
        return pd__scan_row(r, p, step);
    return pd__scan_cells(p, step, 1, r->goal);
}

/* Scans diagonally from p (dx = +-1, dys = +-stride) and returns the first
 * cell that is the goal or from which a straight scan along dx or dys finds
 * a jump point; NULL when the diagonal is cut (a blocked cell or corner). */
static inline const uint8_t *pd__jump_diag(const pd__jrun *r, const uint8_t *p, ptrdiff_t dx, ptrdiff_t dys)
{
    for (;;) {
        if (!p[dx] || !p[dys])
            return NULL;
        p += dx + dys;
        if (!*p)
            return NULL;
        if (p == r->goal)
            return p;
        if (pd__jump_straight(r, p, dx) || pd__jump_straight(r, p, dys))
            return p;
    }
}


/* Records jump point j (a padded-grid cell pointer) as reached from cur with
 * cost ng, exactly as pd_search.c relaxes a neighbour. */
static void pd__jps_relax(pd__jrun *r, const uint8_t *j, uint32_t cur, double ng)
{
    const uint32_t nb = (uint32_t)(j - r->cells);
    pd__jblock *b = (pd__jblock *)(void *)pd_nodepool_block(&r->ctx->nodes, nb);
    if (!b) {
        r->out_of_memory = 1; /* the loop stops before its next pop */
        return;
    }
    pd__jnode *n = &b->n[PD__SLOT(nb)];
    const int32_t nx = (int32_t)(nb % (uint32_t)r->stride), ny = (int32_t)(nb / (uint32_t)r->stride);
    if (n->gen == r->gen) {
        if (n->tag == PD__CLOSED || !(ng < n->g - PD__IMPROVE_EPS))
            return;
        n->tag++; /* one per expanded jump point that improves it: far below PD__CLOSED */
    } else {
        n->gen = r->gen;
        n->tag = 0;
        r->generated++;
    }
    n->g = ng;
    b->parent[PD__SLOT(nb)] = cur;
    if (pd_radix_push(&r->ctx->open, pd__f_key(ng + pd__octile(nx - r->gx, ny - r->gy)), nb, n->tag) != 0)
        r->out_of_memory = 1; /* the loop stops before its next pop */
}

/* Cells between a and b on one straight or diagonal line (steps taken). */
static inline int32_t pd__run_steps(uint32_t a, uint32_t b, int32_t stride)
{
    int32_t dx = (int32_t)(a % (uint32_t)stride) - (int32_t)(b % (uint32_t)stride);
    int32_t dy = (int32_t)(a / (uint32_t)stride) - (int32_t)(b / (uint32_t)stride);
    dx = dx < 0 ? -dx : dx;
    dy = dy < 0 ? -dy : dy;
    return dx > dy ? dx : dy;
}

static inline void pd__try_straight(pd__jrun *r, uint32_t cur, double g, ptrdiff_t step)
{
    const uint8_t *j = pd__jump_straight(r, r->cells + cur, step);
    if (j)
        pd__jps_relax(r, j, cur, g + (double)pd__run_steps(cur, (uint32_t)(j - r->cells), r->stride));
}

static inline void pd__try_diag(pd__jrun *r, uint32_t cur, double g, ptrdiff_t dx, ptrdiff_t dys)
{
    const uint8_t *j = pd__jump_diag(r, r->cells + cur, dx, dys);
    if (j)
        pd__jps_relax(r, j, cur, g + PD__SQRT2 * pd__run_steps(cur, (uint32_t)(j - r->cells), r->stride));
}

/* Generates the successors of jump point cur, pruned by the direction it was
 * reached in (dx, dy each -1/0/1; both 0 for the start). */
static void pd__jps_expand(pd__jrun *r, uint32_t cur, double g, int32_t dx, int32_t dy)
{
    const ptrdiff_t s = r->stride;
    const uint8_t *p = r->cells + cur;
    if (dx == 0 && dy == 0) {
        pd__try_straight(r, cur, g, 1);
        pd__try_straight(r, cur, g, -1);
        pd__try_straight(r, cur, g, s);
        pd__try_straight(r, cur, g, -s);
        pd__try_diag(r, cur, g, 1, s);
        pd__try_diag(r, cur, g, 1, -s);
        pd__try_diag(r, cur, g, -1, s);
        pd__try_diag(r, cur, g, -1, -s);
    } else if (dx != 0 && dy != 0) {
        pd__try_straight(r, cur, g, dx);
        pd__try_straight(r, cur, g, dy * s);
        pd__try_diag(r, cur, g, dx, dy * s);
    } else {
        const ptrdiff_t step = dx + dy * s, side = dx ? s : 1;
        pd__try_straight(r, cur, g, step);
        for (int k = 0; k < 2; k++) {
            const ptrdiff_t sd = k ? -side : side;
            if (p[sd] && !p[sd - step]) {
                pd__try_straight(r, cur, g, sd);
                pd__try_diag(r, cur, g, dx ? dx : sd, dx ? sd : dy * s);
            }
        }
    }
}

static pd_status pd__jps_loop(pd__jrun *r, uint32_t goal, const pd_search_params *p, uint64_t *expanded_out)
{
    const uint32_t stride = (uint32_t)r->stride;
    uint64_t expanded = 0;
    pd_status st = PD_NO_PATH;

    pd_radix *open = &r->ctx->open;
    while (open->size > 0) {
        pd_radix_entry top;
        if (r->out_of_memory || pd_radix_pop(open, &top) != 0) {
            st = PD_INTERNAL;
            break;
        }
        const uint32_t cur = top.id;
        pd__jblock *cb = pd__jblk(r->ctx, cur); /* a pushed node's block exists */
        pd__jnode *node = &cb->n[PD__SLOT(cur)];
        if (node->tag != top.tag)
            continue; /* superseded by a lower g, or already expanded */
        node->tag = PD__CLOSED;
        if (cur == goal) {
            st = PD_OK;
            break;
        }
        const pd_status go = pd__count_expansion(p, &expanded);
        if (go != PD_OK) {
            st = go;
            break;
        }
        int32_t dx = 0, dy = 0;
        const uint32_t par = cb->parent[PD__SLOT(cur)];
        if (par != PD__NO_PARENT) {
            dx = pd__sign((int32_t)(cur % stride) - (int32_t)(par % stride));
            dy = pd__sign((int32_t)(cur / stride) - (int32_t)(par / stride));
        }
        pd__jps_expand(r, cur, node->g, dx, dy);
    }
    *expanded_out = expanded;
    return st;
}

static size_t pd__jps_path_length(const pd_jps_ctx *ctx)
{
    size_t len = 1;
    for (uint32_t v = ctx->last_goal, u; (u = pd__jblk(ctx, v)->parent[PD__SLOT(v)]) != PD__NO_PARENT; v = u)
        len += (size_t)pd__run_steps(v, u, ctx->last_stride);
    return len;
}

pd_status pd_jps_extract(const pd_jps_ctx *ctx, pd_point *out, size_t out_cap, size_t *path_len)
{
    if (!ctx->have_path) {
        if (path_len)
            *path_len = 0;
        return PD_NO_PATH;
    }
    const size_t len = ctx->last_path_len;
    if (path_len)
        *path_len = len;
    if (out_cap < len || !out)
        return PD_BUFFER_TOO_SMALL;
    const uint32_t stride = (uint32_t)ctx->last_stride;
    int32_t x = (int32_t)(ctx->last_goal % stride), y = (int32_t)(ctx->last_goal / stride);
    size_t i = len - 1;
    out[i] = (pd_point){ x - 1, y - 1 };
    for (uint32_t u = pd__jblk(ctx, ctx->last_goal)->parent[PD__SLOT(ctx->last_goal)]; u != PD__NO_PARENT;
         u = pd__jblk(ctx, u)->parent[PD__SLOT(u)]) {
        const int32_t ux = (int32_t)(u % stride), uy = (int32_t)(u / stride);
        const int32_t sx = pd__sign(ux - x), sy = pd__sign(uy - y);
        while (x != ux || y != uy) {
            x += sx;
            y += sy;
            out[--i] = (pd_point){ x - 1, y - 1 };
        }
    }
    return PD_OK;
}

pd_status pd_search_jps(pd_jps_ctx *ctx, const pd_grid *grid, const pd_search_params *params, pd_point *out,
                        size_t out_cap, pd_search_metrics *metrics)
{
    uint64_t t0 = pd__now_micros();
    pd_search_metrics m = { 0 };
    pd_status st;
    ctx->have_path = 0;

    const pd_point s = params->start, t = params->goal;
    if (!pd_jps_applicable(grid, params)) {
        st = PD_INVALID_ARGUMENT;
        goto done;
    }
    if (!pd_grid_in_bounds(grid, s.x, s.y) || !pd_grid_in_bounds(grid, t.x, t.y)) {
        st = PD_OUT_OF_BOUNDS;
        goto done;
    }
    if (pd_grid_get(grid, s.x, s.y) == PD_CELL_BLOCKED) {
        st = PD_START_BLOCKED;
        goto done;
    }
    if (pd_grid_get(grid, t.x, t.y) == PD_CELL_BLOCKED) {
        st = PD_GOAL_BLOCKED;
        goto done;
    }
    size_t cells = (size_t)(grid->width + 2) * (size_t)(grid->height + 2);
    const uint32_t start = (uint32_t)pd_grid_index(grid, s.x, s.y);
    pd__jblock *sb;
    if (pd_nodepool_begin(&ctx->nodes, cells) != 0 ||
        !(sb = (pd__jblock *)(void *)pd_nodepool_block(&ctx->nodes, start))) {
        st = PD_INTERNAL;
        goto done;
    }

    const uint32_t goal = (uint32_t)pd_grid_index(grid, t.x, t.y);
    const double h0 = pd__octile(s.x - t.x, s.y - t.y);
    pd__jrun r = {
        .ctx = ctx,
        .gen = ctx->nodes.gen,
        .cells = grid->cells,
        .stride = grid->stride,
        .goal = grid->cells + goal,
        .cells_end = grid->cells + cells,
        .gx = t.x + 1,
        .gy = t.y + 1,
    };
    sb->n[PD__SLOT(start)] = (pd__jnode){ .g = 0.0, .gen = ctx->nodes.gen, .tag = 0 };
    sb->parent[PD__SLOT(start)] = PD__NO_PARENT;
    pd_radix_reset(&ctx->open, pd__f_key(h0));
    if (pd_radix_push(&ctx->open, pd__f_key(h0), start, 0) != 0) {
        st = PD_INTERNAL;
        goto done;
    }
    r.generated = 1;

    st = pd__jps_loop(&r, goal, params, &m.expanded);
    m.generated = r.generated;

    if (st == PD_OK) {
        ctx->have_path = 1;
        ctx->last_stride = grid->stride;
        ctx->last_goal = goal;
        ctx->last_path_len = pd__jps_path_length(ctx);
        m.cost = pd__jblk(ctx, goal)->n[PD__SLOT(goal)].g;
        m.path_len = ctx->last_path_len;
        m.end = t;
        if (out_cap > 0 || out)
            st = pd_jps_extract(ctx, out, out_cap, NULL);
    }
done:
    m.micros = pd__now_micros() - t0;
    if (metrics)
        *metrics = m;
    return st;
}
