/*
 * pd_jps.c - Jump Point Search on uniform-cost grids: 8-connected without
 * corner cutting, and 4-connected (see pd_jps.h for the contract).
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
 * cell is blocked, or at the goal. Straight scans run over the grid's
 * stop bitsets, which mark exactly those cells and the blocked ones, 64
 * cells per step (pd__scan_fwd). Diagonal walks use
 * intermediate pruning (pd__walk_diag): the cells of a diagonal are never
 * pushed, their straight scans' finds are. The padding around a pd_grid ends
 * every scan without a bounds check. Tests compare the result against A*
 * exhaustively on random grids, on grids changed by scene updates (units
 * 1-3) and on the Moving AI set.
 *
 * The open list is the radix heap of pd_radix.h, with A*'s keys and
 * tie-breaking (A* itself uses a ring of f buckets, whose window a long jump
 * would overrun); node records are 16 bytes (g, a generation stamp, the
 * parent and an "expanded" bit: one cache line per recorded jump point), in
 * the lazy node pool of pd_nodepool.h, so a context is reused without
 * clearing and holds memory only for the blocks of 256 cells where jump
 * points were recorded. Each jump point remembers the jump point
 * it was found from; extraction walks those and fills in the run between
 * each pair: diagonal steps first, then straight ones (the shape a diagonal
 * walk with intermediate pruning gives; a purely straight or diagonal run is
 * the special case).
 *
 * 4-connected grids (after JPS4, J. Baum, "Jump Point Search Pathfinding in
 * 4-connected Grids", arXiv:2501.14816, 2025, whose canonical ordering is
 * also one axis first; derived here for our scans). Among a cell's optimal
 * paths take the one whose moves, read from the start, put vertical steps
 * as early as possible. In it a vertical step may follow a horizontal one
 * only where swapping the two is impossible: for a horizontal arrival at x,
 * say east from p, the side cell north of x is reached by p -> north of p ->
 * north at the same cost, which vertical-first prefers, unless north of p
 * (the "behind" cell) is blocked. So:
 *
 *  - Horizontal arrival: natural is the next cell ahead; a side is forced
 *    when it is open and its behind cell is blocked - the very cells where
 *    the 8-connected straight scans stop, so pd__scan_fwd/bwd serve both.
 *  - Vertical arrival: ahead and both sides are natural, no forced ones
 *    (a vertical step may always be followed by a horizontal one).
 *
 * Vertical runs therefore play the part diagonals play above: pd__walk_vert
 * walks one with intermediate pruning, running the horizontal scans both
 * ways from every cell of it and recording their finds as successors of the
 * cell the walk started from, and a run of vertical steps followed by
 * horizontal ones is what extraction rebuilds. Edge costs are Manhattan
 * distances and the heuristic Manhattan, as A* uses for 4-connectivity.
 */
#include "pd_jps.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pd_nodepool.h"
#include "pd_radix.h"
#include "pd_search_common.h"

/* A record's link: the parent's padded index (below 2^31 on any grid up to
 * PD_GRID_MAX_SIDE) and, in the top bit, "expanded". */
#define PD__CLOSED 0x80000000u
#define PD__NO_PARENT 0x7fffffffu
/* As in pd_search.c: improvements smaller than float noise are ignored. */
#define PD__IMPROVE_EPS 1e-9

/* 16 bytes, so that recording a jump point touches one cache line. No push
 * count tells stale open-list entries apart: a node's newer entry has the
 * lower key (a lower g, the same h; distinct g differ by far more than key
 * rounding, pd_search_common.h), or an equal one pushed later, which the
 * radix heap's LIFO buckets pop first; so when an older entry comes out its
 * node is already expanded, and the expanded bit skips it. */
typedef struct pd__jnode {
    double g;
    uint32_t gen;
    uint32_t link;       /* parent | PD__CLOSED once expanded */
} pd__jnode;

/* A node pool block: 256 cells' records, one page. */
typedef struct pd__jblock {
    pd__jnode n[PD_NODEPOOL_BLOCK_CELLS];
} pd__jblock;

#define PD__SLOT(i) ((i) & (PD_NODEPOOL_BLOCK_CELLS - 1u))

struct pd_jps_ctx {
    pd_nodepool nodes;   /* pd__jblock per 256 cells holding a jump point */
    pd_radix open;       /* its arrays are kept across searches */

    /* What pd_jps_extract needs from the last search. */
    int have_path;
    int32_t last_stride;
    int last_four;       /* runs are vertical then horizontal (4-connected) */
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

/* The parent of a jump point this search recorded. */
static inline uint32_t pd__parent(const pd_jps_ctx *ctx, uint32_t v)
{
    return pd__jblk(ctx, v)->n[PD__SLOT(v)].link & ~PD__CLOSED;
}

static inline int32_t pd__sign(int32_t v)
{
    return (v > 0) - (v < 0);
}

int pd_jps_applicable(const pd_grid *grid, const pd_search_params *params)
{
    if (!grid || !params)
        return 0;
    return (params->connectivity == 0 || params->connectivity == PD_CONNECT_8 ||
            params->connectivity == PD_CONNECT_4) &&
           grid->uniform_cost &&
           params->n_blockers == 0 && !params->has_window && !params->partial_on_cutoff;
}

typedef struct pd__jrun {
    pd_jps_ctx *ctx;
    int four;            /* 4-connected: the rules at the end of the file comment */
    uint32_t gen;        /* the node pool's, for this search */
    const uint8_t *cells;
    int32_t stride;
    const uint64_t *stop_e, *stop_w; /* the grid's stop sets (rows) */
    const uint64_t *stop_s, *stop_n; /* and (columns) */
    /* From a line of each stop set to the same line of passability bits. */
    ptrdiff_t open_e, open_w, open_s, open_n;
    size_t row_words, col_words;
    uint32_t goal;       /* padded index */
    int32_t gx, gy;      /* goal in padded coordinates */
    uint64_t generated;
    int out_of_memory;   /* the open list could not grow */
    /* Step costs (pd_search_jps: 1 and sqrt(2); pd_search_jps_weighted:
     * the caller's) and the open list's keys per unit of f: f in straight
     * steps, as pd__f_key, whatever the unit. */
    double cs, cd, key_scale;
} pd__jrun;

/*
 * Straight scans are block-based (Harabor & Grastien, ICAPS 2014), over the
 * grid's stop bitsets (pd_grid.h): one set per direction (rows for
 * horizontal scans, transposed columns for vertical ones) whose bits mark
 * the cells that are blocked or have a forced neighbour ("a neighbour line
 * opens where it was closed one cell before"), so a scan takes 64 cells per
 * step with one load and jumps to the first marked cell; the passability
 * line, `to_open` words from the stop line, tells a jump point from a
 * blocked cell. Positions are bit positions in a line: the cell's index
 * along it.
 */

/* Forward along a line (index increasing) from index c, exclusive: the bit
 * position of the first cell that is blocked or has a forced neighbour;
 * *open is 1 when that cell is open (a jump point), 0 when it is blocked.
 * The padding blocks every line's end, so the loop always stops. */
static inline size_t pd__stop_fwd(const uint64_t *stops, ptrdiff_t to_open, int32_t c, unsigned *open)
{
    const size_t pos = (size_t)c + 1;
    size_t w = pos >> 6;
    uint64_t stop = stops[w] & (~0ull << (pos & 63u)); /* positions from pos on */
    while (!stop)
        stop = stops[++w];
    const unsigned i = (unsigned)__builtin_ctzll(stop);
    *open = (unsigned)(stops[(ptrdiff_t)w + to_open] >> i) & 1u;
    return (w << 6) + i;
}

/* As pd__stop_fwd, backward (index decreasing). */
static inline size_t pd__stop_bwd(const uint64_t *stops, ptrdiff_t to_open, int32_t c, unsigned *open)
{
    const size_t pos = (size_t)c - 1;
    size_t w = pos >> 6;
    uint64_t stop = stops[w] & (~0ull >> (63u - (pos & 63u))); /* positions up to pos */
    while (!stop)
        stop = stops[--w];
    const unsigned i = 63u - (unsigned)__builtin_clzll(stop);
    *open = (unsigned)(stops[(ptrdiff_t)w + to_open] >> i) & 1u;
    return (w << 6) + i;
}

/* Forward along a line from index c, exclusive: the index of the first
 * cell that is the goal (goal = its index when it lies ahead on this line,
 * else INT32_MAX) or has a forced neighbour, or -1 when a blocked cell
 * comes first. */
static inline int32_t pd__scan_fwd(const uint64_t *stops, ptrdiff_t to_open, int32_t c, int32_t goal)
{
    unsigned open;
    const int32_t at = (int32_t)pd__stop_fwd(stops, to_open, c, &open);
    if (goal <= at)
        return goal;
    return open ? at : -1;
}

/* As pd__scan_fwd, backward (index decreasing; goal INT32_MIN when it does
 * not lie behind c on this line). */
static inline int32_t pd__scan_bwd(const uint64_t *stops, ptrdiff_t to_open, int32_t c, int32_t goal)
{
    unsigned open;
    const int32_t at = (int32_t)pd__stop_bwd(stops, to_open, c, &open);
    if (goal >= at)
        return goal;
    return open ? at : -1;
}

/* The direction of the last step of a run, as an open-list entry's tag
 * (each of dx, dy -1, 0 or 1). */
#define PD__DIR_TAG(dx, dy) ((uint32_t)((dx) + 1) | (uint32_t)((dy) + 1) << 2)

static inline int32_t pd__abs(int32_t v)
{
    return v < 0 ? -v : v;
}

/* Records jump point (x, y) (padded) as reached from cur with cost ng,
 * exactly as pd_search.c relaxes a neighbour. */
static void pd__jps_relax(pd__jrun *r, int32_t x, int32_t y, uint32_t cur, double ng, uint32_t dir)
{
    const uint32_t nb = (uint32_t)y * (uint32_t)r->stride + (uint32_t)x;
    pd__jblock *b = (pd__jblock *)(void *)pd_nodepool_block(&r->ctx->nodes, nb);
    if (!b) {
        r->out_of_memory = 1; /* the loop stops before its next pop */
        return;
    }
    pd__jnode *n = &b->n[PD__SLOT(nb)];
    if (n->gen == r->gen) {
        if ((n->link & PD__CLOSED) || !(ng < n->g - PD__IMPROVE_EPS))
            return;
    } else {
        n->gen = r->gen;
        r->generated++;
    }
    n->g = ng;
    n->link = cur;
    /* pd__octile and pd__manhattan, to the bit, and pd__f_key, without
     * their branches (a jump point's side of the goal is anyone's guess):
     * the larger and smaller distance by selection, and f converted as
     * signed, which it fits (f < 2^39 on any grid jump point search serves). */
    const int32_t ax = pd__abs(x - r->gx), ay = pd__abs(y - r->gy);
    const int32_t lo = ax < ay ? ax : ay, hi = ax < ay ? ay : ax;
    const double h = r->four ? r->cs * ((double)ax + (double)ay) : r->cs * (double)hi + (r->cd - r->cs) * (double)lo;
    const uint64_t key = (uint64_t)(int64_t)((ng + h) * r->key_scale + 0.5);
    if (pd_radix_push(&r->ctx->open, key, nb, dir) != 0)
        r->out_of_memory = 1; /* the loop stops before its next pop */
}

/* Cells between a and b (padded indices) on a run of diagonal steps
 * followed by straight ones (the larger coordinate difference), or of
 * vertical steps followed by horizontal ones (four: their sum). */
static inline int32_t pd__run_steps(uint32_t a, uint32_t b, int32_t stride, int four)
{
    const int32_t dx = pd__abs((int32_t)(a % (uint32_t)stride) - (int32_t)(b % (uint32_t)stride));
    const int32_t dy = pd__abs((int32_t)(a / (uint32_t)stride) - (int32_t)(b / (uint32_t)stride));
    return four ? dx + dy : dx > dy ? dx : dy;
}

/* The straight scans from padded (x, y), reached from cur with cost g, along
 * dx (0 for none) and dy (0 for none); what they find is a successor of cur. */
static inline __attribute__((always_inline)) void pd__scan_straight(pd__jrun *r, uint32_t cur, double g,
                                                                     int32_t x, int32_t y, int32_t dx, int32_t dy)
{
    if (dx) {
        const uint64_t *line = (dx > 0 ? r->stop_e : r->stop_w) + (size_t)y * r->row_words;
        const int on_line = y == r->gy;
        const int32_t j = dx > 0 ? pd__scan_fwd(line, r->open_e, x, on_line && r->gx > x ? r->gx : INT32_MAX)
                                 : pd__scan_bwd(line, r->open_w, x, on_line && r->gx < x ? r->gx : INT32_MIN);
        if (j >= 0)
            pd__jps_relax(r, j, y, cur, g + r->cs * (double)pd__abs(j - x), PD__DIR_TAG(dx, 0));
    }
    if (dy) {
        const uint64_t *line = (dy > 0 ? r->stop_s : r->stop_n) + (size_t)x * r->col_words;
        const int on_line = x == r->gx;
        const int32_t j = dy > 0 ? pd__scan_fwd(line, r->open_s, y, on_line && r->gy > y ? r->gy : INT32_MAX)
                                 : pd__scan_bwd(line, r->open_n, y, on_line && r->gy < y ? r->gy : INT32_MIN);
        if (j >= 0)
            pd__jps_relax(r, x, j, cur, g + r->cs * (double)pd__abs(j - y), PD__DIR_TAG(0, dy));
    }
}

/*
 * Walks the diagonal from cur (padded (x, y)) along (dx, dy) with
 * intermediate pruning (Harabor & Grastien, ICAPS 2014): every cell of the
 * diagonal would be a jump point whose only successors (a diagonal arrival
 * has no forced neighbours, see the file comment) are its two straight scans
 * and the next diagonal step, so instead of pushing it the walk runs those
 * scans at once and records what they find as successors of cur, and goes
 * on. Diagonal jump points therefore never enter the open list; the goal is
 * the exception. A successor's path from cur is "diagonal first, then
 * straight", which is what extraction rebuilds.
 *
 * The walk is the search's inner loop on open maps (two scans per step,
 * most of them ending inside their first word, so a step's fixed cost is
 * what counts), so it is compiled once per direction (dx, dy are constants
 * in each copy; pd__walk_diag dispatches): each scan's direction is fixed,
 * the row and column pointers advance by one line per step instead of a
 * multiplication per scan, and a step's cost is computed only when one of
 * its scans finds a jump point. A step whose cell shares neither the goal's
 * row nor its column (all but one or two per walk) asks its scans only
 * whether either stopped at an open cell, one branch rarely taken; what
 * the predictor cannot learn costs more here than instructions do.
 * (docs/BENCHMARKS.md, "Third round" and "Fifth round", list what else was
 * measured here and dropped.)
 */
/* Records what one step's scans found, jh along the row and jv along the
 * column (-1: nothing, not both), from the step at padded (x, y), k
 * diagonal steps from cur. */
static inline __attribute__((always_inline)) void pd__walk_found(pd__jrun *r, uint32_t cur, double g, int32_t k,
                                                                  int32_t x, int32_t y, const int32_t dx,
                                                                  const int32_t dy, int32_t jh, int32_t jv)
{
    const double dg = g + r->cd * k;
    if (jh >= 0)
        pd__jps_relax(r, jh, y, cur, dg + r->cs * (double)(dx * (jh - x)), PD__DIR_TAG(dx, 0));
    if (jv >= 0)
        pd__jps_relax(r, x, jv, cur, dg + r->cs * (double)(dy * (jv - y)), PD__DIR_TAG(0, dy));
}

/* One step's two scans from padded (x, y), k diagonal steps from cur, and
 * the records of what they find; hg and vg are the goal's index along the
 * row and the column when it lies ahead on them (pd__scan_fwd). */
static inline __attribute__((always_inline)) void pd__walk_scans(pd__jrun *r, uint32_t cur, double g, int32_t k,
                                                                  int32_t x, int32_t y, const int32_t dx,
                                                                  const int32_t dy, const uint64_t *row,
                                                                  const uint64_t *col, int32_t hg, int32_t vg)
{
    const ptrdiff_t row_open = dx > 0 ? r->open_e : r->open_w, col_open = dy > 0 ? r->open_s : r->open_n;
    const int32_t jh = dx > 0 ? pd__scan_fwd(row, row_open, x, hg) : pd__scan_bwd(row, row_open, x, hg);
    const int32_t jv = dy > 0 ? pd__scan_fwd(col, col_open, y, vg) : pd__scan_bwd(col, col_open, y, vg);
    if (jh >= 0 || jv >= 0)
        pd__walk_found(r, cur, g, k, x, y, dx, dy, jh, jv);
}

static inline __attribute__((always_inline)) void pd__walk_diag_dir(pd__jrun *r, uint32_t cur, double g,
                                                                     const int32_t x0, const int32_t y0,
                                                                     const int32_t dx, const int32_t dy)
{
    const ptrdiff_t rw = (ptrdiff_t)r->row_words, cw = (ptrdiff_t)r->col_words;
    const ptrdiff_t ds = dy * (ptrdiff_t)r->stride;
    const uint8_t *p = r->cells + cur;
    /* The current cell's row and column in the stop sets of the walk's
     * scan directions. */
    const uint64_t *row = (dx > 0 ? r->stop_e : r->stop_w) + (size_t)y0 * r->row_words;
    const uint64_t *col = (dy > 0 ? r->stop_s : r->stop_n) + (size_t)x0 * r->col_words;
    const ptrdiff_t row_open = dx > 0 ? r->open_e : r->open_w, col_open = dy > 0 ? r->open_s : r->open_n;
    const int32_t gx = r->gx, gy = r->gy;
    /* A scan finds the goal only from the step whose cell shares its row
     * (step ky) or its column (step kx), and only if it lies ahead; every
     * other step scans without looking for it. */
    const int32_t no_goal = dx > 0 ? INT32_MAX : INT32_MIN;
    const int32_t no_goal_v = dy > 0 ? INT32_MAX : INT32_MIN;
    const int32_t kx = (gx - x0) * dx > 0 ? (gx - x0) * dx : INT32_MAX;
    const int32_t ky = (gy - y0) * dy > 0 ? (gy - y0) * dy : INT32_MAX;
    int32_t kgoal = kx < ky ? kx : ky;
    for (int32_t k = 1;; k++) {
        if (!(p[dx] & p[ds] & p[dx + ds]))
            return;
        p += dx + ds;
        row += dy * rw;
        col += dx * cw;
        const int32_t x = x0 + dx * k, y = y0 + dy * k;
        if (__builtin_expect(k != kgoal, 1)) {
            /* Neither scan can meet the goal: whether either found a jump
             * point is all the common step needs. */
            unsigned oh, ov;
            const size_t bh = dx > 0 ? pd__stop_fwd(row, row_open, x, &oh) : pd__stop_bwd(row, row_open, x, &oh);
            const size_t bv = dy > 0 ? pd__stop_fwd(col, col_open, y, &ov) : pd__stop_bwd(col, col_open, y, &ov);
            if (__builtin_expect(!(oh | ov), 1))
                continue;
            pd__walk_found(r, cur, g, k, x, y, dx, dy, oh ? (int32_t)bh : -1,
                           ov ? (int32_t)bv : -1);
            continue;
        }
        if (kx == ky) { /* the goal itself */
            pd__jps_relax(r, x, y, cur, g + r->cd * k, PD__DIR_TAG(dx, dy));
            return;
        }
        pd__walk_scans(r, cur, g, k, x, y, dx, dy, row, col, k == ky && (gx - x) * dx > 0 ? gx : no_goal,
                       k == kx && (gy - y) * dy > 0 ? gy : no_goal_v);
        kgoal = k == kx ? ky : kx;
    }
}

static __attribute__((noinline)) void pd__walk_se(pd__jrun *r, uint32_t cur, double g, int32_t x, int32_t y)
{
    pd__walk_diag_dir(r, cur, g, x, y, 1, 1);
}

static __attribute__((noinline)) void pd__walk_ne(pd__jrun *r, uint32_t cur, double g, int32_t x, int32_t y)
{
    pd__walk_diag_dir(r, cur, g, x, y, 1, -1);
}

static __attribute__((noinline)) void pd__walk_sw(pd__jrun *r, uint32_t cur, double g, int32_t x, int32_t y)
{
    pd__walk_diag_dir(r, cur, g, x, y, -1, 1);
}

static __attribute__((noinline)) void pd__walk_nw(pd__jrun *r, uint32_t cur, double g, int32_t x, int32_t y)
{
    pd__walk_diag_dir(r, cur, g, x, y, -1, -1);
}

/* Inlined, so that a caller whose direction is a constant calls its copy
 * of the walk without testing the direction. */
static inline __attribute__((always_inline)) void pd__walk_diag(pd__jrun *r, uint32_t cur, double g, int32_t x,
                                                                int32_t y, int32_t dx, int32_t dy)
{
    if (dx > 0) {
        if (dy > 0)
            pd__walk_se(r, cur, g, x, y);
        else
            pd__walk_ne(r, cur, g, x, y);
    } else {
        if (dy > 0)
            pd__walk_sw(r, cur, g, x, y);
        else
            pd__walk_nw(r, cur, g, x, y);
    }
}

/*
 * 4-connected: walks the vertical run from cur (padded (x, y)) along dy
 * with intermediate pruning, as pd__walk_diag walks a diagonal: a cell
 * reached vertically has both sides and the cell ahead as natural
 * successors and nothing forced, so the walk runs the horizontal scans both
 * ways from each of its cells, records their finds as successors of cur,
 * and goes on; only the goal is pushed from the run itself.
 */
static void pd__walk_vert(pd__jrun *r, uint32_t cur, double g, int32_t x, int32_t y, int32_t dy)
{
    const ptrdiff_t ds = dy * (ptrdiff_t)r->stride;
    const uint8_t *p = r->cells + cur;
    for (int32_t k = 1; p[ds]; k++) {
        p += ds;
        y += dy;
        const double dg = g + r->cs * (double)k;
        if (x == r->gx && y == r->gy) {
            pd__jps_relax(r, x, y, cur, dg, PD__DIR_TAG(0, dy));
            return;
        }
        pd__scan_straight(r, cur, dg, x, y, 1, 0);
        pd__scan_straight(r, cur, dg, x, y, -1, 0);
    }
}

/* 4-connected: the successors of jump point cur at padded (x, y), pruned by
 * the direction it was reached in (both 0 for the start). */
static void pd__jps4_expand(pd__jrun *r, uint32_t cur, double g, int32_t x, int32_t y, int32_t dx, int32_t dy)
{
    const ptrdiff_t s = r->stride;
    const uint8_t *p = r->cells + cur;
    if (dx == 0) {
        /* The start, or (kept for completeness, as above) the goal reached
         * vertically: the natural successors of a vertical arrival. */
        pd__scan_straight(r, cur, g, x, y, 1, 0);
        pd__scan_straight(r, cur, g, x, y, -1, 0);
        for (int k = -1; k <= 1; k += 2)
            if (dy != -k)
                pd__walk_vert(r, cur, g, x, y, k);
    } else {
        pd__scan_straight(r, cur, g, x, y, dx, 0);
        /* A side open whose behind cell is blocked is forced: the vertical
         * run that starts there. */
        for (int k = -1; k <= 1; k += 2)
            if (p[k * s] && !p[k * s - dx])
                pd__walk_vert(r, cur, g, x, y, k);
    }
}

/* The successors of jump point cur reached straight along (dx, dy), one of
 * them 0 (see pd__jps_expand). */
static inline __attribute__((always_inline)) void pd__jps_expand_straight(pd__jrun *r, uint32_t cur, double g,
                                                                           int32_t x, int32_t y,
                                                                           const int32_t dx, const int32_t dy)
{
    const ptrdiff_t s = r->stride;
    const uint8_t *p = r->cells + cur;
    const ptrdiff_t step = dx + dy * s;
    pd__scan_straight(r, cur, g, x, y, dx, dy);
    /* The two sides across the direction of travel: a side open whose
     * cell behind is blocked is forced, with the diagonal beside it. */
    for (int k = -1; k <= 1; k += 2) {
        const int32_t sx = dx ? 0 : k, sy = dx ? k : 0;
        const ptrdiff_t sd = sx + sy * s;
        if (p[sd] > p[sd - step]) {
            pd__scan_straight(r, cur, g, x, y, sx, sy);
            pd__walk_diag(r, cur, g, x, y, dx ? dx : sx, dy ? dy : sy);
        }
    }
}

/* Generates the successors of jump point cur at padded (x, y), pruned by
 * the direction it was reached in (dx, dy each -1/0/1; both 0 for the
 * start). A straight arrival, the common case, is compiled once per
 * direction, like the diagonal walk. */
static void pd__jps_expand(pd__jrun *r, uint32_t cur, double g, int32_t x, int32_t y, int32_t dx, int32_t dy)
{
    if (dx == 0 && dy == 0) {
        pd__scan_straight(r, cur, g, x, y, 1, 1);
        pd__scan_straight(r, cur, g, x, y, -1, -1);
        pd__walk_diag(r, cur, g, x, y, 1, 1);
        pd__walk_diag(r, cur, g, x, y, 1, -1);
        pd__walk_diag(r, cur, g, x, y, -1, 1);
        pd__walk_diag(r, cur, g, x, y, -1, -1);
    } else if (dx != 0 && dy != 0) {
        /* Only the goal arrives diagonally, and it is never expanded; kept
         * for completeness of the pruning rules. */
        pd__scan_straight(r, cur, g, x, y, dx, dy);
        pd__walk_diag(r, cur, g, x, y, dx, dy);
    } else if (dx > 0) {
        pd__jps_expand_straight(r, cur, g, x, y, 1, 0);
    } else if (dx < 0) {
        pd__jps_expand_straight(r, cur, g, x, y, -1, 0);
    } else if (dy > 0) {
        pd__jps_expand_straight(r, cur, g, x, y, 0, 1);
    } else {
        pd__jps_expand_straight(r, cur, g, x, y, 0, -1);
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
        pd__jnode *node = &pd__jblk(r->ctx, cur)->n[PD__SLOT(cur)]; /* a pushed node's block exists */
        if (node->link & PD__CLOSED)
            continue; /* already expanded (by a newer entry, see pd__jnode) */
        node->link |= PD__CLOSED;
        if (cur == goal) {
            st = PD_OK;
            break;
        }
        const pd_status go = pd__count_expansion(p, &expanded);
        if (go != PD_OK) {
            st = go;
            break;
        }
        /* The direction of the last step from the parent, which the
         * entry carries: the first entry of a node to come out is its
         * newest (see pd__jnode), pushed with the node's current parent. */
        const int32_t y = (int32_t)(cur / stride), x = (int32_t)(cur - (uint32_t)y * stride);
        const int32_t dx = (int32_t)(top.tag & 3u) - 1, dy = (int32_t)(top.tag >> 2) - 1;
        if (r->four)
            pd__jps4_expand(r, cur, node->g, x, y, dx, dy);
        else
            pd__jps_expand(r, cur, node->g, x, y, dx, dy);
    }
    *expanded_out = expanded;
    return st;
}

static size_t pd__jps_path_length(const pd_jps_ctx *ctx)
{
    size_t len = 1;
    for (uint32_t v = ctx->last_goal, u; (u = pd__parent(ctx, v)) != PD__NO_PARENT; v = u)
        len += (size_t)pd__run_steps(v, u, ctx->last_stride, ctx->last_four);
    return len;
}

/* Writes the n cells of a run of steps (sx, sy) from padded (*x, *y),
 * backwards into out below index i (path coordinates are unpadded);
 * returns the index of the last cell written. */
static inline size_t pd__emit_run(pd_point *out, size_t i, int32_t *x, int32_t *y, int32_t sx, int32_t sy,
                                  int32_t n)
{
    int32_t px = *x - 1, py = *y - 1;
    for (int32_t k = 0; k < n; k++) {
        px += sx;
        py += sy;
        out[--i] = (pd_point){ px, py };
    }
    *x = px + 1;
    *y = py + 1;
    return i;
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
    for (uint32_t u = pd__parent(ctx, ctx->last_goal); u != PD__NO_PARENT; u = pd__parent(ctx, u)) {
        /* Backwards over "diagonal first, then straight": straight steps
         * until both differences are equal, then diagonal ones; over
         * "vertical first, then horizontal" (4-connected): horizontal steps,
         * then vertical ones. */
        const int32_t ux = (int32_t)(u % stride), uy = (int32_t)(u / stride);
        const int32_t sx = pd__sign(ux - x), sy = pd__sign(uy - y);
        const int32_t ax = pd__abs(ux - x), ay = pd__abs(uy - y);
        if (ctx->last_four) {
            i = pd__emit_run(out, i, &x, &y, sx, 0, ax);
            i = pd__emit_run(out, i, &x, &y, 0, sy, ay);
        } else {
            if (ax >= ay)
                i = pd__emit_run(out, i, &x, &y, sx, 0, ax - ay);
            else
                i = pd__emit_run(out, i, &x, &y, 0, sy, ay - ax);
            i = pd__emit_run(out, i, &x, &y, sx, sy, ax < ay ? ax : ay);
        }
    }
    return PD_OK;
}

/* One run of n steps (sx, sy) walked backwards from (*x, *y) (unpadded) for
 * pd_jps_extract_corners: where its direction differs from the run before
 * (*dx, *dy; 0, 0 before the first), the point where it starts is a corner,
 * written at out[k]. Returns the new count. */
static inline size_t pd__corner_run(pd_point *out, size_t k, int32_t *x, int32_t *y, int32_t *dx, int32_t *dy,
                                    int32_t sx, int32_t sy, int32_t n)
{
    if (n <= 0)
        return k;
    if ((*dx != 0 || *dy != 0) && (sx != *dx || sy != *dy))
        out[k++] = (pd_point){ *x, *y };
    *dx = sx;
    *dy = sy;
    *x += sx * n;
    *y += sy * n;
    return k;
}

pd_status pd_jps_extract_corners(const pd_jps_ctx *ctx, pd_point *out, size_t out_cap, size_t *n_out)
{
    *n_out = 0;
    if (!ctx->have_path)
        return PD_NO_PATH;
    if (out_cap < ctx->last_path_len || !out)
        return PD_BUFFER_TOO_SMALL;
    /* Backwards from the goal over the same runs as pd_jps_extract, keeping
     * the goal, each point where the step's direction changes and the
     * start: no more points than the path has cells. Then reversed. */
    const uint32_t stride = (uint32_t)ctx->last_stride;
    int32_t x = (int32_t)(ctx->last_goal % stride) - 1, y = (int32_t)(ctx->last_goal / stride) - 1;
    int32_t dx = 0, dy = 0;
    size_t k = 0;
    out[k++] = (pd_point){ x, y };
    for (uint32_t u = pd__parent(ctx, ctx->last_goal); u != PD__NO_PARENT; u = pd__parent(ctx, u)) {
        const int32_t ux = (int32_t)(u % stride) - 1, uy = (int32_t)(u / stride) - 1;
        const int32_t sx = pd__sign(ux - x), sy = pd__sign(uy - y);
        const int32_t ax = pd__abs(ux - x), ay = pd__abs(uy - y);
        if (ctx->last_four) {
            k = pd__corner_run(out, k, &x, &y, &dx, &dy, sx, 0, ax);
            k = pd__corner_run(out, k, &x, &y, &dx, &dy, 0, sy, ay);
        } else {
            if (ax >= ay)
                k = pd__corner_run(out, k, &x, &y, &dx, &dy, sx, 0, ax - ay);
            else
                k = pd__corner_run(out, k, &x, &y, &dx, &dy, 0, sy, ay - ax);
            k = pd__corner_run(out, k, &x, &y, &dx, &dy, sx, sy, ax < ay ? ax : ay);
        }
    }
    if (dx != 0 || dy != 0)
        out[k++] = (pd_point){ x, y };
    for (size_t i = 0, j = k - 1; i < j; i++, j--) {
        const pd_point t = out[i];
        out[i] = out[j];
        out[j] = t;
    }
    *n_out = k;
    return PD_OK;
}

/* pd_search_jps with step costs cs (straight) and cd (diagonal). */
static pd_status pd__search_jps(pd_jps_ctx *ctx, const pd_grid *grid, const pd_search_params *params, double cs,
                                double cd, pd_point *out, size_t out_cap, pd_search_metrics *metrics)
{
    uint64_t t0 = pd_clock_ns();
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
    const int four = params->connectivity == PD_CONNECT_4;
    const int32_t adx = s.x > t.x ? s.x - t.x : t.x - s.x, ady = s.y > t.y ? s.y - t.y : t.y - s.y;
    const double h0 = four ? cs * ((double)adx + (double)ady)
                           : cs * (double)(adx > ady ? adx : ady) + (cd - cs) * (double)(adx > ady ? ady : adx);
    pd__jrun r = {
        .ctx = ctx,
        .four = four,
        .gen = ctx->nodes.gen,
        .cells = grid->cells,
        .stride = grid->stride,
        .stop_e = pd_grid_stop_set(grid, PD_GRID_STOP_EAST),
        .stop_w = pd_grid_stop_set(grid, PD_GRID_STOP_WEST),
        .stop_s = pd_grid_stop_set(grid, PD_GRID_STOP_SOUTH),
        .stop_n = pd_grid_stop_set(grid, PD_GRID_STOP_NORTH),
        .row_words = grid->row_words,
        .col_words = grid->col_words,
        .goal = goal,
        .gx = t.x + 1,
        .gy = t.y + 1,
        .cs = cs,
        .cd = cd,
        .key_scale = (double)(1u << PD__KEY_FRACTION_BITS) / cs,
    };
    const uint64_t *rows = grid->bits, *cols = grid->bits + (size_t)(grid->height + 2) * grid->row_words;
    r.open_e = rows - r.stop_e;
    r.open_w = rows - r.stop_w;
    r.open_s = cols - r.stop_s;
    r.open_n = cols - r.stop_n;
    sb->n[PD__SLOT(start)] = (pd__jnode){ .g = 0.0, .gen = ctx->nodes.gen, .link = PD__NO_PARENT };
    const uint64_t k0 = (uint64_t)(h0 * r.key_scale + 0.5);
    pd_radix_reset(&ctx->open, k0);
    if (pd_radix_push(&ctx->open, k0, start, PD__DIR_TAG(0, 0)) != 0) {
        st = PD_INTERNAL;
        goto done;
    }
    r.generated = 1;

    st = pd__jps_loop(&r, goal, params, &m.expanded);
    m.generated = r.generated;

    if (st == PD_OK) {
        ctx->have_path = 1;
        ctx->last_stride = grid->stride;
        ctx->last_four = four;
        ctx->last_goal = goal;
        ctx->last_path_len = pd__jps_path_length(ctx);
        m.cost = pd__jblk(ctx, goal)->n[PD__SLOT(goal)].g;
        m.path_len = ctx->last_path_len;
        m.end = t;
        if (out_cap > 0 || out)
            st = pd_jps_extract(ctx, out, out_cap, NULL);
    }
done:
    m.micros = pd_clock_us_since(t0);
    if (metrics)
        *metrics = m;
    return st;
}

pd_status pd_search_jps(pd_jps_ctx *ctx, const pd_grid *grid, const pd_search_params *params, pd_point *out,
                        size_t out_cap, pd_search_metrics *metrics)
{
    return pd__search_jps(ctx, grid, params, 1.0, PD__SQRT2, out, out_cap, metrics);
}

pd_status pd_search_jps_weighted(pd_jps_ctx *ctx, const pd_grid *grid, const pd_search_params *params,
                                 double straight, double diagonal, pd_point *out, size_t out_cap,
                                 pd_search_metrics *metrics)
{
    /* The pruning rules hold for straight < diagonal < 2 * straight (the
     * file comment's inequalities); 4-connected paths use straight only. */
    const int four = params && params->connectivity == PD_CONNECT_4;
    if (!(straight > 0.0) || !(straight <= 1e12) || (!four && !(straight < diagonal && diagonal < 2.0 * straight))) {
        if (metrics)
            *metrics = (pd_search_metrics){ 0 };
        ctx->have_path = 0;
        return PD_INVALID_ARGUMENT;
    }
    return pd__search_jps(ctx, grid, params, straight, four ? 2.0 * straight : diagonal, out, out_cap, metrics);
}

/* xorshift64*: the sample pairs of pd_jps_pick. */
static uint32_t pd__pick_rand(uint64_t *st)
{
    *st ^= *st >> 12;
    *st ^= *st << 25;
    *st ^= *st >> 27;
    return (uint32_t)((*st * 2685821657736338717ull) >> 32);
}

/* A random open cell of g, or 0 when PD__PICK_TRIES draws found none. */
#define PD__PICK_TRIES 1024
static int pd__pick_open(const pd_grid *g, uint64_t *st, pd_point *p)
{
    for (int i = 0; i < PD__PICK_TRIES; i++) {
        p->x = (int32_t)(pd__pick_rand(st) % (uint32_t)g->width);
        p->y = (int32_t)(pd__pick_rand(st) % (uint32_t)g->height);
        if (pd_grid_get(g, p->x, p->y) != PD_CELL_BLOCKED)
            return 1;
    }
    return 0;
}

int pd_jps_pick(const pd_grid *g, uint64_t seed, pd_jps_pick_result *out)
{
    memset(out, 0, sizeof *out);
    pd_search_params probe = { .connectivity = PD_CONNECT_8 };
    if (!pd_jps_applicable(g, &probe))
        return 0;
    pd_point from[PD_JPS_PICK_PAIRS], to[PD_JPS_PICK_PAIRS];
    uint64_t st = seed | 1u;
    unsigned n = 0;
    while (n < PD_JPS_PICK_PAIRS && pd__pick_open(g, &st, &from[n]) && pd__pick_open(g, &st, &to[n]))
        n++;
    if (n == 0)
        return 0;
    pd_jps_ctx *jc = pd_jps_ctx_create();
    pd_search_ctx *ac = pd_search_ctx_create();
    if (!jc || !ac) {
        pd_jps_ctx_destroy(jc);
        pd_search_ctx_destroy(ac);
        return -1;
    }
    for (int timed = 0; timed <= 1; timed++) {
        for (unsigned i = 0; i < n; i++) {
            pd_search_params p = { .start = from[i], .goal = to[i], .connectivity = PD_CONNECT_8 };
            pd_search_metrics m;
            uint64_t t0 = pd_clock_ns();
            pd_search_jps(jc, g, &p, NULL, 0, &m);
            uint64_t t1 = pd_clock_ns();
            p.max_expansions = PD_JPS_PICK_MAX_EXPANSIONS;
            pd_search_astar(ac, g, &p, NULL, 0, &m);
            uint64_t t2 = pd_clock_ns();
            if (timed) {
                out->jps_ns += t1 - t0;
                out->astar_ns += t2 - t1;
            }
        }
    }
    pd_jps_ctx_destroy(jc);
    pd_search_ctx_destroy(ac);
    out->pairs = n;
    out->jps = out->jps_ns < out->astar_ns;
    return 0;
}
