/*
 * pd_search.c - A* over a padded pd_grid with a reusable per-thread context.
 *
 * Per-cell state lives in one 16-byte record (g, generation, current open
 * entry, parent direction), so a relaxation touches one cache line. Records
 * live in the lazy node pool (pd_nodepool.h): a block of 256 cells'
 * records (4 KiB) exists once a search has touched one of them, so the context
 * grows with the area searched, not with the map. A cell whose generation
 * differs from the pool's is "unseen" in this search, which is what lets a
 * context serve query after query without clearing anything. Per-request
 * blockers are stamped into a second pool of the same kind, which a lookup
 * never grows. The open list is a ring of f buckets (pd_ring.h) over f
 * quantised to integer keys (pd__f_key).
 *
 * The expansion loop is written once and instantiated eight times (4/8
 * neighbours x uniform/weighted costs x masked or not, the last for
 * per-request blockers, the search window and goal sets (pd_targets.h)) through an always-inlined
 * function with constant flags, so the common case - uniform octile grids,
 * no mask - pays for neither a cost lookup, a mask read nor a connectivity
 * branch.
 */
#include "pd_search.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pd_nodepool.h"
#include "pd_ring.h"
#include "pd_search_common.h"
#include "pd_targets.h"

#define PD__CLOSED UINT16_MAX
/* A route must be shorter by more than this to replace a known one: float
 * sums of the same steps in another order differ in the last bits, and
 * re-sifting for such noise only costs time. */
#define PD__IMPROVE_EPS 1e-9
#define PD__NO_PARENT 8
/* Added to the open list's window for float noise in g + h. */
#define PD__RING_SLACK 1e-3

/* The parent direction shares the record with g, so a relaxation writes one
 * cache line and a node pool block is exactly 4 KiB. */
typedef struct pd__node {
    double g;
    uint32_t gen;
    uint16_t tag;        /* counts the node's pushes this search: only the open
                            entry carrying the same tag is current; PD__CLOSED
                            once expanded */
    uint8_t parent_dir;  /* the step that reached the node (see pd__dx) */
    uint8_t unused;
} pd__node;

#define PD__SLOT(i) ((i) & (PD_NODEPOOL_BLOCK_CELLS - 1u))

struct pd_search_ctx {
    pd_nodepool nodes;   /* PD_NODEPOOL_BLOCK_CELLS records per block of cells touched */
    pd_ring open;        /* its bucket arrays are kept across searches */
    pd_nodepool blocked; /* per-request blockers: a uint32_t stamp per cell,
                            equal to blocked.gen when blocked in this search */

    /* What pd_search_extract needs from the last search. */
    int have_path;
    int32_t last_stride;
    uint32_t last_goal;
    size_t last_path_len;
};

/* Direction codes and their (dx, dy); parent_dir stores the step that
 * reached a cell, so its parent is the cell minus that step. */
enum { PD__N, PD__S, PD__E, PD__W, PD__NE, PD__NW, PD__SE, PD__SW };
static const int8_t pd__dx[8] = { 0, 0, 1, -1, 1, -1, 1, -1 };
static const int8_t pd__dy[8] = { -1, 1, 0, 0, -1, -1, 1, 1 };

pd_search_ctx *pd_search_ctx_create(void)
{
    pd_search_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return NULL;
    pd_nodepool_init(&ctx->nodes, PD_NODEPOOL_BLOCK_CELLS * sizeof(pd__node));
    pd_nodepool_init(&ctx->blocked, PD_NODEPOOL_BLOCK_CELLS * sizeof(uint32_t));
    return ctx;
}

void pd_search_ctx_destroy(pd_search_ctx *ctx)
{
    if (!ctx)
        return;
    pd_nodepool_free(&ctx->nodes);
    pd_ring_free(&ctx->open);
    pd_nodepool_free(&ctx->blocked);
    free(ctx);
}

size_t pd_search_ctx_footprint(const pd_search_ctx *ctx)
{
    return sizeof *ctx + pd_nodepool_footprint(&ctx->nodes) + pd_ring_footprint(&ctx->open) +
           pd_nodepool_footprint(&ctx->blocked);
}

void pd_search_ctx_trim(pd_search_ctx *ctx, size_t keep_bytes)
{
    if (pd_search_ctx_footprint(ctx) <= keep_bytes)
        return;
    /* The node records are what a later search would fault in again, so
     * they keep whatever the open list and the blockers leave over. */
    ctx->have_path = 0;
    size_t rest = pd_search_ctx_footprint(ctx) - pd_nodepool_footprint(&ctx->nodes);
    pd_nodepool_trim(&ctx->nodes, keep_bytes > rest ? keep_bytes - rest : 0);
    if (pd_search_ctx_footprint(ctx) <= keep_bytes)
        return;
    pd_ring_free(&ctx->open);
    pd_nodepool_trim(&ctx->blocked, 0);
    rest = pd_search_ctx_footprint(ctx) - pd_nodepool_footprint(&ctx->nodes);
    pd_nodepool_trim(&ctx->nodes, keep_bytes > rest ? keep_bytes - rest : 0);
}

typedef struct pd__run {
    pd_search_ctx *ctx;
    uint32_t gen;            /* the node pool's, for this search */
    const uint8_t *cells;
    int32_t stride;
    int32_t gx, gy;          /* goal in padded coordinates */
    uint64_t generated;
    int out_of_memory;       /* the open list could not grow */

    /* Masked searches only (blockers or a window), padded coordinates. */
    const pd_nodepool *blocked;
    int32_t wx0, wy0, wx1, wy1;

    /* A goal set (masked searches only): heuristic and goal test are its. */
    const pd_targets *targets;
    pd_connectivity conn;
    const pd_grid *grid;
    uint32_t end;            /* the cell the search ended at */
    uint32_t which;          /* the goal it qualified for */

    /* partial_on_cutoff: the expanded node nearest the goal so far. */
    int track_best;
    uint32_t best;
    double best_h, best_g;
} pd__run;

/* The heuristic at padded (x, y): the goal set's when the search has one
 * (only masked searches do), else octile or Manhattan to the goal. */
static inline __attribute__((always_inline)) double
pd__h(const pd__run *r, int32_t x, int32_t y, const int eight, const int masked)
{
    if (masked && r->targets)
        return pd_targets_h(r->targets, r->conn, x - 1, y - 1);
    return eight ? pd__octile(x - r->gx, y - r->gy) : pd__manhattan(x - r->gx, y - r->gy);
}

/* A neighbour's cost byte, or 0 when this search may not enter it: the
 * masked variant also honours per-request blockers and the window. */
static inline __attribute__((always_inline)) uint8_t
pd__cell(const pd__run *r, uint32_t i, int32_t x, int32_t y, const int masked)
{
    uint8_t v = r->cells[i];
    if (masked && v) {
        if (x < r->wx0 || x > r->wx1 || y < r->wy0 || y > r->wy1)
            return 0;
        /* A block no blocker was stamped into holds no blocker. */
        const uint32_t *stamps = (const uint32_t *)(const void *)pd_nodepool_peek(r->blocked, i);
        if (stamps && stamps[PD__SLOT(i)] == r->blocked->gen)
            return 0;
    }
    return v;
}

/* Opens nb with g = ng, or reopens it with a lower g: the older entry stays
 * in the queue and is skipped when popped. */
static inline __attribute__((always_inline)) void
pd__relax(pd__run *r, unsigned char **dirs, uint32_t gen, uint32_t nb, double ng, int dir, int32_t nx, int32_t ny,
          const int eight, const int masked)
{
    /* dirs and gen come from the loop's locals: the parent byte stored
     * below may alias any memory, so fields read through r would be
     * loaded again after every relaxation. */
    unsigned char *raw = dirs[nb >> PD_NODEPOOL_BLOCK_SHIFT];
    if (__builtin_expect(raw == NULL, 0) && !(raw = pd_nodepool__grow(&r->ctx->nodes, nb >> PD_NODEPOOL_BLOCK_SHIFT))) {
        r->out_of_memory = 1; /* the loop stops before its next pop */
        return;
    }
    pd__node *n = &((pd__node *)(void *)raw)[PD__SLOT(nb)];
    if (n->gen == gen) {
        if (n->tag == PD__CLOSED || !(ng < n->g - PD__IMPROVE_EPS))
            return;
        n->tag++; /* at most 8 pushes per node: never reaches PD__CLOSED */
    } else {
        n->gen = gen;
        n->tag = 0;
        r->generated++;
    }
    n->g = ng;
    n->parent_dir = (uint8_t)dir;
    double f = ng + pd__h(r, nx, ny, eight, masked);
    if (pd_ring_push(&r->ctx->open, pd__f_key(f), nb, n->tag) != 0)
        r->out_of_memory = 1; /* the loop stops before its next pop */
}

static inline __attribute__((always_inline)) pd_status
pd__astar_loop(pd__run *r, uint32_t goal, const pd_search_params *p, uint64_t *expanded_out,
               const int eight, const int uniform, const int masked)
{
    unsigned char **const dirs = r->ctx->nodes.dir; /* sized by begin; fixed during the search */
    const uint32_t gen = r->gen;
    pd_ring *open = &r->ctx->open;
    const int32_t stride = r->stride;
    uint64_t expanded = 0;
    pd_status st = PD_NO_PATH;

    while (open->size > 0) {
        pd_radix_entry top;
        if (r->out_of_memory || pd_ring_pop(open, &top) != 0) {
            st = PD_INTERNAL;
            break;
        }
        const uint32_t cur = top.id;
        /* A pushed node's block exists. */
        pd__node *node = &((pd__node *)(void *)dirs[cur >> PD_NODEPOOL_BLOCK_SHIFT])[PD__SLOT(cur)];
        if (node->tag != top.tag)
            continue; /* superseded by a lower g, or already expanded */
        node->tag = PD__CLOSED;
        const int32_t cx = (int32_t)(cur % (uint32_t)stride), cy = (int32_t)(cur / (uint32_t)stride);
        /* The goal test is made when a node is popped, so the first goal
         * popped ends a least-cost path (for a goal set too: pd_targets.c). */
        if (masked && r->targets ? pd_targets_accepts(r->targets, r->grid, (pd_point){ cx - 1, cy - 1 }, &r->which)
                                 : cur == goal) {
            r->end = cur;
            st = PD_OK;
            break;
        }
        const pd_status go = pd__count_expansion(p, &expanded);
        if (go != PD_OK) {
            st = go;
            break;
        }
        const double g = node->g;
        if (r->track_best) {
            double h = pd__h(r, cx, cy, eight, masked);
            if (h < r->best_h || (h == r->best_h && g < r->best_g)) {
                r->best = cur;
                r->best_h = h;
                r->best_g = g;
            }
        }
        const uint32_t n = cur - (uint32_t)stride, s = cur + (uint32_t)stride, e = cur + 1, w = cur - 1;
        const uint8_t cn = pd__cell(r, n, cx, cy - 1, masked), cs = pd__cell(r, s, cx, cy + 1, masked);
        const uint8_t ce = pd__cell(r, e, cx + 1, cy, masked), cw = pd__cell(r, w, cx - 1, cy, masked);
        if (cn) pd__relax(r, dirs, gen, n, g + (uniform ? 1.0 : cn), PD__N, cx, cy - 1, eight, masked);
        if (cs) pd__relax(r, dirs, gen, s, g + (uniform ? 1.0 : cs), PD__S, cx, cy + 1, eight, masked);
        if (ce) pd__relax(r, dirs, gen, e, g + (uniform ? 1.0 : ce), PD__E, cx + 1, cy, eight, masked);
        if (cw) pd__relax(r, dirs, gen, w, g + (uniform ? 1.0 : cw), PD__W, cx - 1, cy, eight, masked);
        if (!eight)
            continue;
        /* Diagonals only where both orthogonal neighbours are open: no corner cutting. */
        uint8_t d;
        if (cn && ce && (d = pd__cell(r, n + 1, cx + 1, cy - 1, masked)))
            pd__relax(r, dirs, gen, n + 1, g + (uniform ? PD__SQRT2 : PD__SQRT2 * d), PD__NE, cx + 1, cy - 1, eight, masked);
        if (cn && cw && (d = pd__cell(r, n - 1, cx - 1, cy - 1, masked)))
            pd__relax(r, dirs, gen, n - 1, g + (uniform ? PD__SQRT2 : PD__SQRT2 * d), PD__NW, cx - 1, cy - 1, eight, masked);
        if (cs && ce && (d = pd__cell(r, s + 1, cx + 1, cy + 1, masked)))
            pd__relax(r, dirs, gen, s + 1, g + (uniform ? PD__SQRT2 : PD__SQRT2 * d), PD__SE, cx + 1, cy + 1, eight, masked);
        if (cs && cw && (d = pd__cell(r, s - 1, cx - 1, cy + 1, masked)))
            pd__relax(r, dirs, gen, s - 1, g + (uniform ? PD__SQRT2 : PD__SQRT2 * d), PD__SW, cx - 1, cy + 1, eight, masked);
    }
    *expanded_out = expanded;
    return st;
}

/* The block of a cell the last search reached. */
static const pd__node *pd__reached(const pd_search_ctx *ctx, uint32_t v)
{
    return &((const pd__node *)(const void *)pd_nodepool_peek(&ctx->nodes, v))[PD__SLOT(v)];
}

/* Walks parent directions back from the goal; returns the number of cells. */
static size_t pd__path_length(const pd_search_ctx *ctx)
{
    size_t len = 1;
    uint32_t v = ctx->last_goal;
    for (uint8_t d; (d = pd__reached(ctx, v)->parent_dir) != PD__NO_PARENT; len++)
        v -= (uint32_t)(pd__dy[d] * ctx->last_stride + pd__dx[d]);
    return len;
}

pd_status pd_search_extract(const pd_search_ctx *ctx, pd_point *out, size_t out_cap, size_t *path_len)
{
    if (!ctx->have_path) {
        if (path_len)
            *path_len = 0;
        return PD_NO_PATH;
    }
    size_t len = ctx->last_path_len;
    if (path_len)
        *path_len = len;
    if (out_cap < len || !out)
        return PD_BUFFER_TOO_SMALL;
    uint32_t v = ctx->last_goal;
    for (size_t i = len; i-- > 0;) {
        out[i].x = (int32_t)(v % (uint32_t)ctx->last_stride) - 1;
        out[i].y = (int32_t)(v / (uint32_t)ctx->last_stride) - 1;
        uint8_t d = pd__reached(ctx, v)->parent_dir;
        if (d != PD__NO_PARENT)
            v -= (uint32_t)(pd__dy[d] * ctx->last_stride + pd__dx[d]);
    }
    return PD_OK;
}

/* Stamps the request's blockers into ctx->blocked for a new generation.
 * Returns PD_OK, PD_START_BLOCKED / PD_GOAL_BLOCKED when a blocker sits on
 * an endpoint, or PD_INTERNAL on allocation failure. */
static pd_status pd__stamp_blockers(pd_search_ctx *ctx, const pd_grid *grid, const pd_search_params *p,
                                    size_t cells)
{
    if (pd_nodepool_begin(&ctx->blocked, cells) != 0)
        return PD_INTERNAL;
    for (size_t i = 0; i < p->n_blockers; i++) {
        pd_point b = p->blockers[i];
        if (!pd_grid_in_bounds(grid, b.x, b.y))
            continue;
        if (b.x == p->start.x && b.y == p->start.y)
            return PD_START_BLOCKED;
        if (!p->targets && b.x == p->goal.x && b.y == p->goal.y)
            return PD_GOAL_BLOCKED;
        const uint32_t cell = (uint32_t)pd_grid_index(grid, b.x, b.y);
        uint32_t *stamps = (uint32_t *)(void *)pd_nodepool_block(&ctx->blocked, cell);
        if (!stamps)
            return PD_INTERNAL;
        stamps[PD__SLOT(cell)] = ctx->blocked.gen;
    }
    return PD_OK;
}

/* A goal set's own checks: PD_INVALID_ARGUMENT (no goals, too many, or a
 * negative or non-finite range), PD_OUT_OF_BOUNDS (a goal outside the grid),
 * PD_GOAL_BLOCKED (range 0 and every goal blocked: nothing can qualify). */
static pd_status pd__check_targets(const pd_grid *grid, const pd_targets *t)
{
    if (t->n_goals == 0 || t->n_goals > PD_TARGETS_MAX_GOALS || !t->goals || !(t->range >= 0) ||
        !isfinite(t->range))
        return PD_INVALID_ARGUMENT;
    int open = 0;
    for (size_t i = 0; i < t->n_goals; i++) {
        if (!pd_grid_in_bounds(grid, t->goals[i].x, t->goals[i].y))
            return PD_OUT_OF_BOUNDS;
        open |= pd_grid_get(grid, t->goals[i].x, t->goals[i].y) != PD_CELL_BLOCKED;
    }
    return open || t->range > 0 ? PD_OK : PD_GOAL_BLOCKED;
}

static int pd__in_window(const pd_search_params *p, pd_point q)
{
    return q.x >= p->window_min.x && q.x <= p->window_max.x && q.y >= p->window_min.y &&
           q.y <= p->window_max.y;
}

/* The window's last column and row inside the grid: corners past the edge
 * (INT32_MAX included) stop at it, so the padded coordinates (+1) that the
 * loop compares with cannot overflow. Only called once the start, which
 * lies in both, has been checked. */
static int32_t pd__window_last(int32_t max, int32_t size)
{
    return max < size - 1 ? max : size - 1;
}

pd_status pd_search_astar(pd_search_ctx *ctx, const pd_grid *grid, const pd_search_params *params,
                          pd_point *out, size_t out_cap, pd_search_metrics *metrics)
{
    uint64_t t0 = pd_clock_ns();
    pd_search_metrics m = { 0 };
    pd_status st;
    ctx->have_path = 0;

    const pd_connectivity conn = params->connectivity ? params->connectivity : PD_CONNECT_8;
    const pd_point s = params->start, t = params->goal;
    if (conn != PD_CONNECT_8 && conn != PD_CONNECT_4) {
        st = PD_INVALID_ARGUMENT;
        goto done;
    }
    const pd_targets *targets = params->targets;
    if (targets && (st = pd__check_targets(grid, targets)) != PD_OK && st != PD_GOAL_BLOCKED)
        goto done;
    if (!pd_grid_in_bounds(grid, s.x, s.y) || (!targets && !pd_grid_in_bounds(grid, t.x, t.y))) {
        st = PD_OUT_OF_BOUNDS;
        goto done;
    }
    if (pd_grid_get(grid, s.x, s.y) == PD_CELL_BLOCKED) {
        st = PD_START_BLOCKED;
        goto done;
    }
    if (targets ? st == PD_GOAL_BLOCKED : pd_grid_get(grid, t.x, t.y) == PD_CELL_BLOCKED) {
        st = PD_GOAL_BLOCKED;
        goto done;
    }
    if (params->has_window && !pd__in_window(params, s)) {
        st = PD_INVALID_ARGUMENT;
        goto done;
    }
    if (!targets && params->has_window && !pd__in_window(params, t)) {
        st = PD_NO_PATH;
        goto done;
    }
    size_t cells = (size_t)(grid->width + 2) * (size_t)(grid->height + 2);
    if (pd_nodepool_begin(&ctx->nodes, cells) != 0) {
        st = PD_INTERNAL;
        goto done;
    }
    /* The masked loop reads ctx->blocked for every neighbour, window or not. */
    const int masked = params->n_blockers > 0 || params->has_window || targets;
    if (masked && (st = pd__stamp_blockers(ctx, grid, params, cells)) != PD_OK)
        goto done;
    pd__node *sb = (pd__node *)(void *)pd_nodepool_block(&ctx->nodes, (uint32_t)pd_grid_index(grid, s.x, s.y));
    if (!sb) {
        st = PD_INTERNAL;
        goto done;
    }

    const int eight = conn == PD_CONNECT_8;
    const double h0 = targets ? pd_targets_h(targets, conn, s.x, s.y)
                      : eight ? pd__octile(s.x - t.x, s.y - t.y) : pd__manhattan(s.x - t.x, s.y - t.y);
    uint32_t start = (uint32_t)pd_grid_index(grid, s.x, s.y);
    /* A goal set has no goal cell: the goal test is the set's. */
    uint32_t goal = targets ? UINT32_MAX : (uint32_t)pd_grid_index(grid, t.x, t.y);
    pd__run r = {
        .ctx = ctx,
        .gen = ctx->nodes.gen,
        .cells = grid->cells,
        .stride = grid->stride,
        .gx = t.x + 1,
        .gy = t.y + 1,
        .blocked = &ctx->blocked,
        .wx0 = params->has_window ? params->window_min.x + 1 : 0,
        .wy0 = params->has_window ? params->window_min.y + 1 : 0,
        .wx1 = params->has_window ? pd__window_last(params->window_max.x, grid->width) + 1 : INT32_MAX,
        .wy1 = params->has_window ? pd__window_last(params->window_max.y, grid->height) + 1 : INT32_MAX,
        .targets = targets,
        .conn = conn,
        .grid = grid,
        .end = goal,
        .track_best = params->partial_on_cutoff,
        .best = start,
        .best_h = h0,
        .best_g = 0.0,
    };
    sb[PD__SLOT(start)] = (pd__node){ .g = 0.0, .gen = ctx->nodes.gen, .tag = 0, .parent_dir = PD__NO_PARENT };
    /* A step raises f by at most its cost plus its length (the heuristic
     * changes by no more than that): the ring's window. The largest cost
     * byte on a weighted grid is not tracked, so 255 stands for it. */
    const double max_cost = grid->uniform_cost ? 1.0 : 255.0;
    const double max_len = eight ? PD__SQRT2 : 1.0;
    if (pd_ring_reset(&ctx->open, pd__f_key(h0), pd__f_key((max_cost + 1.0) * max_len + PD__RING_SLACK)) != 0 ||
        pd_ring_push(&ctx->open, pd__f_key(h0), start, 0) != 0) {
        st = PD_INTERNAL;
        goto done;
    }
    r.generated = 1;

    /* Eight instantiations of one loop; see the file comment. */
    if (masked) {
        if (eight)
            st = grid->uniform_cost ? pd__astar_loop(&r, goal, params, &m.expanded, 1, 1, 1)
                                    : pd__astar_loop(&r, goal, params, &m.expanded, 1, 0, 1);
        else
            st = grid->uniform_cost ? pd__astar_loop(&r, goal, params, &m.expanded, 0, 1, 1)
                                    : pd__astar_loop(&r, goal, params, &m.expanded, 0, 0, 1);
    } else {
        if (eight)
            st = grid->uniform_cost ? pd__astar_loop(&r, goal, params, &m.expanded, 1, 1, 0)
                                    : pd__astar_loop(&r, goal, params, &m.expanded, 1, 0, 0);
        else
            st = grid->uniform_cost ? pd__astar_loop(&r, goal, params, &m.expanded, 0, 1, 0)
                                    : pd__astar_loop(&r, goal, params, &m.expanded, 0, 0, 0);
    }
    m.generated = r.generated;
    m.target = r.which;

    uint32_t end = r.end;
    if (params->partial_on_cutoff && (st == PD_BUDGET_EXCEEDED || st == PD_DEADLINE_EXCEEDED)) {
        m.cutoff = st;
        end = r.best;
        st = PD_PARTIAL;
    }
    if (st == PD_OK || st == PD_PARTIAL) {
        pd_status found = st;
        ctx->have_path = 1;
        ctx->last_stride = grid->stride;
        ctx->last_goal = end;
        ctx->last_path_len = pd__path_length(ctx);
        m.cost = pd__reached(ctx, end)->g;
        m.path_len = ctx->last_path_len;
        m.end.x = (int32_t)(end % (uint32_t)grid->stride) - 1;
        m.end.y = (int32_t)(end / (uint32_t)grid->stride) - 1;
        if (out_cap > 0 || out)
            st = pd_search_extract(ctx, out, out_cap, NULL);
        if (st == PD_OK)
            st = found;
    }
done:
    m.micros = pd_clock_us_since(t0);
    if (metrics)
        *metrics = m;
    return st;
}
