/*
 * pd_yield.c - ReservePath with clear holds and holders moved aside (pd_yield.h).
 *
 * The holders' verdicts (movable or not) are memoised per table slot for
 * one request: the planner asks for every span held for good it meets, and
 * the answer reads the holder's entries. Crossing jointly's search is
 * pd_joint.c's; what it is tried for, and the undo, are here.
 */
#include "pd_yield.h"

#include "pd_joint.h"

#include <stdlib.h>
#include <string.h>

typedef struct pd__holder {
    uint64_t agent;
    pd_reserve_agent_info info;
    int64_t t0;                        /* where it is cut: max(R's t0, its hold's start) */
    int64_t meet;                      /* when R's P1 first reaches its footprint */
} pd__holder;

struct pd_yield_ctx {
    pd_waypoint *p0, *p1;              /* R's two plans */
    size_t cap0, cap1;
    pd_waypoint *aside[PD_YIELD_MAX_DISPLACED];
    size_t cap_aside[PD_YIELD_MAX_DISPLACED];
    pd_displaced out[PD_YIELD_MAX_DISPLACED];
    pd__holder h[PD_YIELD_MAX_DISPLACED];
    /* passable's memo: (gen << 1) | verdict per slot */
    uint64_t *memo;
    size_t cap_memo;
    uint64_t gen;
    /* the request passable judges for */
    const pd_reserve *table;
    const pd_yield_params *y;
    int64_t t0, stood;
    int64_t far;                       /* cross_ms: spans from here on give way */
    uint32_t self;
    /* R's P1's cells (pd__cell_key), sorted: where no holder may park */
    uint64_t *way;
    size_t n_way, cap_way;
    uint32_t park_unit, park_self;
    int park_any;                      /* the holder parks without the clear rule */
    uint32_t hold_unit;                /* R's, for pd__hold_ok */
    uint64_t culprit;                  /* the first holder pd__replan_holders could not move */
    int undone_why;                    /* pd_yield_result.undone_why */
    int cross_why;                     /* pd_yield_result.cross_why */
    pd_status hst[PD_YIELD_MAX_DISPLACED];
    /* door_ms: the crossing agents' plans from their cut on, for undoing */
    pd_waypoint *old[PD_YIELD_MAX_DISPLACED];
    size_t cap_old[PD_YIELD_MAX_DISPLACED], n_old[PD_YIELD_MAX_DISPLACED];
    /* The joint crossing (pd__joint_cross): its search's context (made at
     * its first use), R's plan and the partner h[joint_i]'s joint part
     * (pd__replan_crossers goes on from its end). */
    pd_joint_ctx *jc;
    pd_waypoint *jw[2];
    size_t cap_jw[2], n_jw[2];
    int joint_i;
    int joint;                         /* pd_yield_result.joint */
    uint64_t cross_left;               /* the crossing's re-plan expansions left */
};

static uint64_t pd__cell_key(int32_t x, int32_t y)
{
    return ((uint64_t)(uint32_t)y << 32) | (uint32_t)x;
}

pd_yield_ctx *pd_yield_ctx_create(void)
{
    pd_yield_ctx *yc = calloc(1, sizeof(pd_yield_ctx));
    if (yc)
        yc->joint_i = -1;
    return yc;
}

void pd_yield_ctx_destroy(pd_yield_ctx *yc)
{
    if (!yc)
        return;
    free(yc->p0);
    free(yc->p1);
    for (int i = 0; i < PD_YIELD_MAX_DISPLACED; i++)
        free(yc->aside[i]), free(yc->old[i]);
    free(yc->memo);
    free(yc->way);
    pd_joint_ctx_destroy(yc->jc);
    free(yc->jw[0]), free(yc->jw[1]);
    free(yc);
}

/* Makes room for n waypoints in *buf, keeping what it holds. 0, or -1 on
 * allocation failure. */
static int pd__grow(pd_waypoint **buf, size_t *cap, size_t n)
{
    if (n > *cap) {
        pd_waypoint *b = realloc(*buf, n * sizeof *b);
        if (!b)
            return -1;
        *buf = b;
        *cap = n;
    }
    return 0;
}

/* Copies wp[0..n) into *buf. 0, or -1 on allocation failure. */
static int pd__keep(pd_waypoint **buf, size_t *cap, const pd_waypoint *wp, size_t n)
{
    if (pd__grow(buf, cap, n) != 0)
        return -1;
    memcpy(*buf, wp, n * sizeof *wp);
    return 0;
}

static double pd__zero(void *user, int32_t x, int32_t y)
{
    (void)user;
    (void)x;
    (void)y;
    return 0.0;
}

/* How long a holder has stood at R's t0 (0 while it is still on its way). */
static int64_t pd__stood(const pd_reserve_agent_info *in, int64_t t0)
{
    return in->hold_since < t0 ? t0 - in->hold_since : 0;
}

static int pd__movable(const pd_yield_ctx *yc, const pd_reserve_agent_info *in)
{
    const int64_t stood = pd__stood(in, yc->t0);
    return in->holds && in->speed > 0 && in->unit >= 1 && in->unit <= yc->y->max_unit &&
           yc->y->unit_grids[in->unit] &&
           (stood < yc->stood || (yc->y->give_way_ms > 0 && stood >= yc->y->give_way_ms));
}

/* pd_sipp_params.passable: a hold for good of a movable holder. */
static int pd__passable(void *user, uint32_t slot)
{
    pd_yield_ctx *yc = user;
    if (slot >= yc->cap_memo) {
        size_t cap = yc->cap_memo ? yc->cap_memo : 256u;
        while (cap <= slot)
            cap *= 2u;
        uint64_t *m = realloc(yc->memo, cap * sizeof *m);
        if (!m)
            return 0;
        memset(m + yc->cap_memo, 0, (cap - yc->cap_memo) * sizeof *m);
        yc->memo = m;
        yc->cap_memo = cap;
    }
    if ((yc->memo[slot] >> 1) == yc->gen)
        return (int)(yc->memo[slot] & 1u);
    pd_reserve_agent_info in;
    const int v = slot != yc->self &&
                  pd_reserve_agent_info_get(yc->table, pd_reserve_slot_agent(yc->table, slot), &in) &&
                  pd__movable(yc, &in);
    yc->memo[slot] = (yc->gen << 1) | (uint64_t)v;
    return v;
}

static uint32_t pd__max_displaced(const pd_yield_params *y)
{
    return y->max_displaced && y->max_displaced < PD_YIELD_MAX_DISPLACED ? y->max_displaced : PD_YIELD_MAX_DISPLACED;
}

/* What a plan occupies, step by step: its i-th waypoint's stay (move 0)
 * or its move from there to the next (move 1, the two footprints' box),
 * as cells x0..x1 by y0..y1 (unit k footprints) over [t0, t1). 0 when
 * there is none (the last waypoint's move, an empty span). */
typedef struct pd__box {
    int64_t t0, t1;
    int32_t x0, y0, x1, y1;
} pd__box;

static int pd__box_of(const pd_waypoint *wp, size_t n, size_t i, int move, uint32_t k, pd__box *b)
{
    b->x0 = b->x1 = wp[i].x;
    b->y0 = b->y1 = wp[i].y;
    if (!move) {
        b->t0 = wp[i].t_arrive_ms;
        b->t1 = wp[i].t_leave_ms;
    } else {
        if (i + 1 == n)
            return 0;
        b->t0 = wp[i].t_leave_ms;
        b->t1 = wp[i + 1].t_arrive_ms;
        b->x0 = wp[i + 1].x < b->x0 ? wp[i + 1].x : b->x0;
        b->y0 = wp[i + 1].y < b->y0 ? wp[i + 1].y : b->y0;
        b->x1 = wp[i + 1].x > b->x1 ? wp[i + 1].x : b->x1;
        b->y1 = wp[i + 1].y > b->y1 ? wp[i + 1].y : b->y1;
    }
    b->x1 += (int32_t)k - 1;
    b->y1 += (int32_t)k - 1;
    return b->t1 > b->t0;
}

/* The movable holders whose holds P1 (wp[0..n), unit k) crosses before
 * `until`, in the order it meets them, into yc->h: how many, or -1 when
 * more than fit. *later: whether it crosses more holds from `until` on
 * (they stay: R's own plan stops short of them). */
static int pd__crossed(pd_yield_ctx *yc, const pd_reserve *t, const pd_waypoint *wp, size_t n, uint32_t k,
                       int64_t until, int *later)
{
    int found = 0;
    *later = 0;
    for (size_t i = 0; i < n; i++) {
        for (int move = 0; move < 2; move++) {
            pd__box b;
            if (!pd__box_of(wp, n, i, move, k, &b))
                continue;
            const int64_t t0 = b.t0, t1 = b.t1;
            for (int32_t y = b.y0; y <= b.y1; y++)
                for (int32_t x = b.x0; x <= b.x1; x++) {
                    size_t ns;
                    const pd_reserve_span *s = pd_reserve_cell(t, x, y, &ns);
                    /* Only a cell's last span can be a hold for good. */
                    if (!ns || s[ns - 1].t1 != PD_RESERVE_FOREVER || s[ns - 1].slot == yc->self ||
                        s[ns - 1].t0 >= t1)
                        continue;
                    if (t0 >= until) {
                        *later = 1;
                        return found;
                    }
                    const uint64_t id = pd_reserve_slot_agent(t, s[ns - 1].slot);
                    int seen = 0;
                    for (int j = 0; j < found; j++)
                        seen |= yc->h[j].agent == id;
                    if (seen)
                        continue;
                    if ((uint32_t)found == pd__max_displaced(yc->y)) {
                        *later = 1;
                        return found;
                    }
                    pd__holder *h = &yc->h[found];
                    h->agent = id;
                    if (!pd_reserve_agent_info_get(t, id, &h->info) || !pd__movable(yc, &h->info)) {
                        return -1; /* P1 was planned around everything else */
                    }
                    h->t0 = h->info.hold_since > yc->t0 ? h->info.hold_since : yc->t0;
                    h->meet = t0; /* intervals come in time order: the first is the earliest */
                    found++;
                }
        }
    }
    return found;
}

/* Gives the holders h[from..to) back their holds as they were, renewal
 * time included: first every aside plan goes (one may cross another's
 * anchor), then the holds come back, into exactly the room they had. */
static void pd__undo(pd_reserve *t, const pd_yield_ctx *yc, int from, int to)
{
    for (int i = from; i < to; i++) {
        const pd__holder *h = &yc->h[i];
        const pd_waypoint stop = { h->info.x, h->info.y, h->t0, h->t0 };
        pd_reserve_replace(t, h->agent, h->info.unit, h->t0, &stop, 1, NULL);
    }
    for (int i = from; i < to; i++) {
        /* From when it began standing there: one wait, as it had. */
        const pd__holder *h = &yc->h[i];
        const pd_waypoint hold = { h->info.x, h->info.y, h->info.hold_since, PD_RESERVE_FOREVER };
        pd_reserve_replace(t, h->agent, h->info.unit, h->info.hold_since, &hold, 1, NULL);
        pd_reserve_set_renewed(t, h->agent, h->info.renewed_ms);
    }
}

static int pd__open_at(const pd_grid *g, int32_t x, int32_t y)
{
    return pd_grid_in_bounds(g, x, y) && pd_grid_get(g, x, y) != PD_CELL_BLOCKED;
}

/* An open cell not held for good by another agent than `self` (any open
 * cell without a table). */
static int pd__free_at(const pd_grid *g, const pd_reserve *t, uint32_t self, int32_t x, int32_t y)
{
    if (!pd__open_at(g, x, y))
        return 0;
    if (!t)
        return 1;
    size_t n;
    const pd_reserve_span *s = pd_reserve_cell(t, x, y, &n);
    return !(n && s[n - 1].t1 == PD_RESERVE_FOREVER && s[n - 1].slot != self);
}

/* Whether unit u may anchor at (x, y) on its grid g and, with a table, no
 * cell of its u x u footprint there is held for good by another agent than
 * `self` (a hold is a wall for the rest of the plan). */
static int pd__anchor_free(const pd_grid *g, const pd_grid *cells, const pd_reserve *t, uint32_t self, uint32_t u,
                           int32_t x, int32_t y)
{
    if (!pd__open_at(g, x, y))
        return 0;
    if (!t)
        return 1;
    for (int32_t j = y; j < y + (int32_t)u; j++)
        for (int32_t i = x; i < x + (int32_t)u; i++)
            if (!pd__free_at(cells, t, self, i, j))
                return 0;
    return 1;
}

/* How many runs the open anchors of unit u's grid g form on the ring of
 * `side` steps per edge whose top-left corner is (x0, y0), clockwise;
 * with a table, an anchor whose footprint another's hold for good covers
 * is closed (pd__anchor_free). */
static int pd__ring_runs(const pd_grid *g, const pd_grid *cells, const pd_reserve *t, uint32_t self, uint32_t u,
                         int32_t x0, int32_t y0, int32_t side)
{
    static const int8_t ex[4] = { 1, 0, -1, 0 }, ey[4] = { 0, 1, 0, -1 };
    int32_t cx = x0, cy = y0;
    /* the cell before the corner is the one below it on the left edge */
    int prev = pd__anchor_free(g, cells, t, self, u, x0, y0 + 1), runs = 0;
    for (int e = 0; e < 4; e++)
        for (int32_t i = 0; i < side; i++) {
            const int o = pd__anchor_free(g, cells, t, self, u, cx, cy);
            runs += o && !prev;
            prev = o;
            cx += ex[e];
            cy += ey[e];
        }
    return runs;
}

/* The parking rule: the open cells on the ring around the k x k footprint
 * at (x, y) form one run (the footprint splits no passage), and none is
 * held for good by another agent (with a table): holds keep a cell apart,
 * so a crowd of them keeps its gaps. Measured on den520d (500 agents, 600
 * s): with holds allowed beside holds, as long as the free ring cells
 * stayed one run, crowds still closed up along walls and 214 agents were
 * deadlocked; with none beside, 4.
 *
 * Nor may the footprint split a passage of any larger unit size the scene
 * has (unit_grids[2..max_unit]), counting the other agents' holds for good
 * as walls: a unit u cannot anchor anywhere in the (k + u - 1) square up
 * and left of the footprint's far corner, so the anchors on the ring round
 * that square that unit u may take (its grid open, no hold under its
 * footprint) must form one run too. The unit-1 ring is blind to both: a
 * 2 x 2 agent holding against one wall of a three-wide street leaves it
 * one run round the open side, and two holds on either side of a five-wide
 * street, a cell apart, leave each other's ring free - and no 2 x 2 agent
 * can pass either. Measured (docs/BENCHMARKS.md, "Deadlocks, tenth pass"):
 * 500 agents, 600 s, twelve seeds each, deadlocked agents Berlin_0_256 607
 * -> 78, den520d 96 -> 83; the unit-1 ring and the larger units' static
 * grids alone, without the holds, 304 and 107. */
static int pd__clear(const pd_grid *const *unit_grids, uint32_t max_unit, const pd_reserve *t, uint32_t self,
                     uint32_t k, int32_t x, int32_t y)
{
    const pd_grid *g = unit_grids[1];
    const int32_t side = (int32_t)k + 1; /* steps along each edge of the ring */
    int32_t cx = x - 1, cy = y - 1;
    static const int8_t ex[4] = { 1, 0, -1, 0 }, ey[4] = { 0, 1, 0, -1 };
    for (int e = 0; e < 4; e++)
        for (int32_t i = 0; i < side; i++) {
            if (pd__open_at(g, cx, cy) && !pd__free_at(g, t, self, cx, cy))
                return 0;
            cx += ex[e];
            cy += ey[e];
        }
    if (pd__ring_runs(g, g, NULL, self, 1, x - 1, y - 1, side) > 1)
        return 0;
    for (uint32_t u = 2; u <= max_unit; u++)
        if (unit_grids[u] &&
            pd__ring_runs(unit_grids[u], g, t, self, u, x - (int32_t)u, y - (int32_t)u, (int32_t)(k + u)) > 1)
            return 0;
    return 1;
}

int pd_yield_clear_hold(const pd_grid *const *unit_grids, uint32_t max_unit, const pd_reserve *t, uint32_t k,
                        int32_t x, int32_t y)
{
    return pd__clear(unit_grids, max_unit, t, PD_RESERVE_NO_SLOT, k, x, y);
}

/* pd_sipp_params.hold_ok for R. */
static int pd__hold_ok(void *user, int32_t x, int32_t y)
{
    const pd_yield_ctx *yc = user;
    return pd__clear(yc->y->unit_grids, yc->y->max_unit, yc->table, yc->self, yc->hold_unit, x, y);
}

/* pd_sipp_params.hold_ok for the agent in yc->park_self, of unit
 * yc->park_unit (a crosser whose end R took). */
static int pd__hold_ok_other(void *user, int32_t x, int32_t y)
{
    const pd_yield_ctx *yc = user;
    return pd__clear(yc->y->unit_grids, yc->y->max_unit, yc->table, yc->park_self, yc->park_unit, x, y);
}

/* pd_sipp_params.park_ok for a holder of unit yc->park_unit: no cell of
 * its footprint at (x, y) is one of R's P1 (yc->way, sorted). */
static int pd__park_ok(void *user, int32_t x, int32_t y)
{
    const pd_yield_ctx *yc = user;
    if (yc->y->clear_holds && !yc->park_any && !pd__clear(yc->y->unit_grids, yc->y->max_unit, yc->table, yc->park_self, yc->park_unit, x, y))
        return 0;
    for (int32_t j = y; j < y + (int32_t)yc->park_unit; j++)
        for (int32_t i = x; i < x + (int32_t)yc->park_unit; i++) {
            const uint64_t key = pd__cell_key(i, j);
            size_t lo = 0, hi = yc->n_way;
            while (lo < hi) {
                const size_t mid = lo + (hi - lo) / 2u;
                if (yc->way[mid] < key)
                    lo = mid + 1u;
                else
                    hi = mid;
            }
            if (lo < yc->n_way && yc->way[lo] == key)
                return 0;
        }
    return 1;
}

static int pd__cmp_key(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The cells P1 (yc->p1[0..n), unit k) covers, sorted, into yc->way. */
static int pd__mark_way(pd_yield_ctx *yc, size_t n, uint32_t k)
{
    const size_t need = n * (size_t)k * k;
    if (need > yc->cap_way) {
        uint64_t *w = realloc(yc->way, need * sizeof *w);
        if (!w)
            return -1;
        yc->way = w;
        yc->cap_way = need;
    }
    yc->n_way = 0;
    for (size_t i = 0; i < n; i++)
        for (uint32_t j = 0; j < k; j++)
            for (uint32_t a = 0; a < k; a++)
                yc->way[yc->n_way++] = pd__cell_key(yc->p1[i].x + (int32_t)a, yc->p1[i].y + (int32_t)j);
    qsort(yc->way, yc->n_way, sizeof *yc->way, pd__cmp_key);
    return 0;
}

/* Plans each holder found again on the table as it is, to the nearest
 * anchor it can hold for good (clear, with clear holds; any it may hold
 * when nowhere clear is in reach and park_any is on): the one farthest
 * along R's way first (nearer ones cannot get out past it), then again
 * those that could not move yet while another moved since (in a crowd
 * the order that works is not known): at most found passes. Their new
 * plans in yc->out. 1 when all moved; 0 otherwise, with what moved left
 * reserved for the caller to undo. */
static int pd__replan_holders(pd_yield_ctx *yc, pd_sipp_ctx *ctx, pd_reserve *table, const pd_sipp_params *p,
                              int found)
{
    const pd_yield_params *y = yc->y;
    const int64_t window = pd_reserve_get_limits(table)->max_window_ms;
    int moved[PD_YIELD_MAX_DISPLACED] = { 0 }, n_moved = 0;
    /* Each pass tries every holder not yet moved (up to two searches
     * each), and a pass may move only one: unbounded, 16 holders could
     * take 272 searches in one lane step. */
    int searches = PD_YIELD_REPLAN_SEARCHES_PER_HOLDER * found;
    for (int progress = 1; progress && n_moved < found;) {
        progress = 0;
        for (int i = found - 1; i >= 0; i--) {
            if (moved[i])
                continue;
            if (searches <= 0) {
                yc->culprit = yc->h[i].agent;
                yc->undone_why = 1;
                return 0; /* the caller undoes the moves made */
            }
            pd__holder *h = &yc->h[i];
            yc->park_unit = h->info.unit;
            yc->park_self = pd_reserve_agent_slot(table, h->agent);
            const pd_sipp_params q = { .agent = h->agent, .unit = h->info.unit,
                                       .start = { h->info.x, h->info.y }, .goal = { h->info.x, h->info.y },
                                       .t0_ms = h->t0, .speed = h->info.speed,
                                       .window_ms = window > 0 ? window : 0, .connectivity = p->connectivity,
                                       .max_expansions = y->max_expansions ? y->max_expansions
                                                                           : PD_YIELD_DEFAULT_EXPANSIONS,
                                       .poll = p->poll, .poll_user = p->poll_user, .heuristic = pd__zero,
                                       .park_ok = pd__park_ok, .park_user = yc };
            pd_sipp_result rh;
            yc->park_any = 0;
            searches--;
            if ((yc->hst[i] = pd_sipp_reserve(ctx, table, y->unit_grids[h->info.unit], &q, &rh)) != PD_OK) {
                /* Nowhere clear in reach (a crowd): any anchor it may hold
                 * for good, rather than no move at all. */
                yc->park_any = y->park_any;
                if (!yc->park_any)
                    continue;
                searches--;
                if ((yc->hst[i] = pd_sipp_reserve(ctx, table, y->unit_grids[h->info.unit], &q, &rh)) != PD_OK)
                    continue;
            }
            pd_reserve_set_renewed(table, h->agent, h->info.renewed_ms);
            moved[i] = 1;
            n_moved++;
            progress = 1;
            if (pd__keep(&yc->aside[i], &yc->cap_aside[i], rh.waypoints, rh.n_waypoints) != 0) {
                n_moved = -1; /* reserved: the caller undoes it with the others */
                break;
            }
            yc->out[i] = (pd_displaced){ .agent = h->agent, .unit = h->info.unit, .speed = h->info.speed,
                                         .t0_ms = h->t0, .waypoints = yc->aside[i],
                                         .n_waypoints = rh.n_waypoints, .reserved_until_ms = rh.reserved_until_ms };
        }
        if (n_moved < 0)
            break;
    }
    yc->culprit = 0;
    for (int i = found - 1; i >= 0 && n_moved >= 0; i--)
        if (!moved[i]) {
            yc->culprit = yc->h[i].agent;
            yc->undone_why = yc->hst[i] == PD_BUDGET_EXCEEDED ? 3 : 2;
            break;
        }
    return n_moved == found;
}

/* Moves the holders found aside, each to the nearest anchor off R's way
 * it can hold for good (pd__replan_holders). 0 when all moved; -1 with
 * the table as it was. */
static int pd__move_aside(pd_yield_ctx *yc, pd_sipp_ctx *ctx, pd_reserve *table, const pd_sipp_params *p,
                          int found)
{
    if (pd__replan_holders(yc, ctx, table, p, found))
        return 0;
    pd__undo(table, yc, 0, found);
    return -1;
}

/* Moves the holders found out of R's P1 in time (PIBT's push, planned
 * over time): each keeps its anchor only until P1 first reaches it, R's
 * P1 is reserved, and each holder is then re-planned around it - and
 * around the others - to the nearest anchor it can hold for good (clear,
 * with clear holds), which may be ahead of R along its way, in a pocket R
 * passes, or on a cell R has left. Far along P1 first, then again those
 * that could not move yet while another moved. 0 with R's P1 and the
 * holders' new plans reserved; -1 with the table as it was (R's own
 * reservations from t0 on cut: the caller reserves its P0). */
static int pd__move_ahead(pd_yield_ctx *yc, pd_sipp_ctx *ctx, pd_reserve *table, const pd_sipp_params *p,
                          int found, size_t n1)
{
    for (int i = 0; i < found; i++)
        if (yc->h[i].meet <= yc->h[i].t0) {
            yc->culprit = yc->h[i].agent;
            yc->undone_why = 4;
            return -1; /* R reaches it before it stands there: nothing to cut */
        }
    int ok = 1;
    for (int i = 0; i < found && ok; i++) {
        const pd__holder *h = &yc->h[i];
        const pd_waypoint until = { h->info.x, h->info.y, h->t0, h->meet };
        ok = pd_reserve_replace(table, h->agent, h->info.unit, h->t0, &until, 1, NULL) == PD_OK;
        pd_reserve_set_renewed(table, h->agent, h->info.renewed_ms);
    }
    if (ok)
        ok = pd_reserve_replace(table, p->agent, p->unit, p->t0_ms, yc->p1, n1, NULL) == PD_OK;
    if (!ok) {
        yc->undone_why = 5;
        pd__undo(table, yc, 0, found);
        return -1;
    }
    yc->n_way = 0; /* where R has passed or will not be is the table's to say */
    if (pd__replan_holders(yc, ctx, table, p, found))
        return 0;
    /* R's P1 goes first: the holders' holds come back where it passes. */
    const pd_waypoint stop = { p->start.x, p->start.y, p->t0_ms, p->t0_ms };
    pd_reserve_replace(table, p->agent, p->unit, p->t0_ms, &stop, 1, NULL);
    pd__undo(table, yc, 0, found);
    return -1;
}

/* Whether plan b is worth moving holders for, against R's usual plan a:
 * b arrives PD_YIELD_MIN_GAIN_MS sooner, or a stays where R stands and b
 * goes somewhere. (A PARTIAL plan's eta assumes the way is free from its
 * handover on, so a stuck plan's can look as good as one that goes.) */
static int pd__gains(const pd_sipp_result *a, const pd_sipp_result *b)
{
    return b->eta_ms + PD_YIELD_MIN_GAIN_MS <= a->eta_ms || (a->n_waypoints == 1 && b->n_waypoints > 1);
}

/* A long plan (p's window longer than `window`, the request's own, or
 * all the way) within the long budget; past it, or NO_PATH (all the way:
 * the goal cannot be parked on at any time), planned again in `window`
 * (*fell set). The budget bounds a plan that would otherwise search every
 * state it can reach in time. */
static pd_status pd__plan_long(pd_sipp_ctx *ctx, const pd_reserve *table, const pd_grid *grid,
                               const pd_sipp_params *p, const pd_yield_params *y, int64_t window, pd_sipp_result *r,
                               int *fell)
{
    *fell = 0;
    if (p->window_ms == window)
        return pd_sipp_plan(ctx, table, grid, p, r);
    pd_sipp_params q = *p;
    const uint64_t cap = y->long_expansions ? y->long_expansions : PD_YIELD_DEFAULT_LONG_EXPANSIONS;
    if (cap != UINT64_MAX && (!q.max_expansions || cap < q.max_expansions))
        q.max_expansions = cap;
    pd_status st = pd_sipp_plan(ctx, table, grid, &q, r);
    if (st != PD_BUDGET_EXCEEDED && st != PD_NO_PATH)
        return st;
    if (st == PD_BUDGET_EXCEEDED && q.max_expansions == p->max_expansions)
        return st; /* the caller's own budget */
    *fell = st == PD_BUDGET_EXCEEDED ? 1 : 2;
    q.window_ms = window;
    q.max_expansions = p->max_expansions;
    return pd_sipp_plan(ctx, table, grid, &q, r);
}

/* pd__plan_long, then the plan reserved as pd_sipp_reserve would. */
static pd_status pd__reserve_long(pd_sipp_ctx *ctx, pd_reserve *table, const pd_grid *grid, const pd_sipp_params *p,
                                  const pd_yield_params *y, int64_t window, pd_sipp_result *r, int *fell)
{
    pd_sipp_result out;
    const pd_status st = pd_sipp_commit(table, p, pd__plan_long(ctx, table, grid, p, y, window, &out, fell), &out);
    if (r)
        *r = out;
    return st;
}

/* Whether R, standing `stood` ms at t0 and last renewed (its own request)
 * at `renewed`, tries a move now: its wait crossed a threshold of the
 * back-off series A, 2A, 4A, ... (gaps up to `gap`, then every `gap`)
 * since its last request. */
static int pd__retry_due(int64_t A, int64_t gap, int64_t t0, int64_t stood, int64_t renewed)
{
    if (gap < 0 || renewed >= t0 || renewed < t0 - stood)
        return 1; /* no back-off, or it began standing since its last request */
    const int64_t prev = stood - (t0 - renewed); /* its wait at its last request */
    if (prev < A)
        return 1;
    /* The first threshold past prev. */
    int64_t s = A;
    while (s <= prev && s < gap)
        s += s;
    if (s <= prev)
        s += ((prev - s) / gap + 1) * gap;
    return s <= stood;
}

pd_status pd_yield_plan(pd_yield_ctx *yc, pd_sipp_ctx *ctx, const pd_reserve *table, const pd_grid *grid,
                        const pd_sipp_params *p, const pd_yield_params *y, pd_sipp_result *r)
{
    pd_sipp_params pw = *p;
    yc->y = y;
    yc->table = table;
    yc->self = pd_reserve_agent_slot(table, p->agent);
    if (y && y->clear_holds && y->unit_grids && y->max_unit >= 1 && y->unit_grids[1]) {
        yc->hold_unit = p->unit;
        pw.hold_ok = pd__hold_ok;
        pw.hold_user = yc;
    }
    pd_status st = pd_sipp_plan(ctx, table, grid, &pw, r);
    if (st == PD_NO_PATH && pw.hold_ok && pw.window_ms > 0) {
        /* as pd_yield_reserve: the parking rule gives way rather than the plan */
        pw.hold_ok = NULL;
        st = pd_sipp_plan(ctx, table, grid, &pw, r);
    }
    return st;
}

/* Gives the agents h[0..n) that pd__cut_crossers cut (for the door or the
 * crossing) their plans back from their cut on (yc->old), renewal time
 * included: first every new plan goes, then the old ones come back into
 * the room they had. */
static void pd__door_undo(pd_reserve *t, const pd_yield_ctx *yc, int n)
{
    /* The limits bound changes being decided, not a plan given back: one
     * lowered since (pd_reservations_lock sets them on every lock) would
     * refuse the restore and leave the agent cut, untold. Off for the
     * undo, as pd_reserve_log_apply does. */
    const pd_reserve_limits none = { 0 }, kept = *pd_reserve_get_limits(t);
    pd_reserve_set_limits(t, &none);
    for (int i = 0; i < n; i++) {
        const pd__holder *h = &yc->h[i];
        const pd_waypoint stop = { yc->old[i][0].x, yc->old[i][0].y, h->t0, h->t0 };
        pd_reserve_replace(t, h->agent, h->info.unit, h->t0, &stop, 1, NULL);
    }
    for (int i = 0; i < n; i++) {
        const pd__holder *h = &yc->h[i];
        pd_reserve_replace(t, h->agent, h->info.unit, h->t0, yc->old[i], yc->n_old[i], NULL);
        pd_reserve_set_renewed(t, h->agent, h->info.renewed_ms);
    }
    pd_reserve_set_limits(t, &kept);
}

/* The agents h[0..found) (their meet set: when each first crosses R's
 * way) each keep their plan up to its first waypoint arriving at or after
 * `far`, which must come before that crossing: their plans from there are
 * kept in yc->old for undoing, and cut. 1 with all cut; 0 with the table
 * as it was. */
static size_t pd__plan_from(pd_yield_ctx *yc, const pd_reserve *table, int i, int64_t from)
{
    size_t n = pd_reserve_agent_plan(table, yc->h[i].agent, from, yc->old[i], yc->cap_old[i]);
    if (n > yc->cap_old[i]) {
        pd_waypoint *b = realloc(yc->old[i], n * sizeof *b);
        if (!b)
            return 0;
        yc->old[i] = b;
        yc->cap_old[i] = n;
        n = pd_reserve_agent_plan(table, yc->h[i].agent, from, yc->old[i], yc->cap_old[i]);
    }
    return n;
}

static int pd__cut_crossers(pd_yield_ctx *yc, pd_reserve *table, int64_t far, int64_t near, int found, int before)
{
    for (int i = 0; i < found; i++) {
        pd__holder *h = &yc->h[i];
        size_t n = pd__plan_from(yc, table, i, far);
        if ((n < 2 || yc->old[i][0].t_arrive_ms > h->meet - before) && near < far)
            n = pd__plan_from(yc, table, i, near);
        if (n < 2 || yc->old[i][0].t_arrive_ms > h->meet - before)
            return 0;
        yc->n_old[i] = n;
        h->t0 = yc->old[i][0].t_arrive_ms;
    }
    /* Cut: each leaves the table at that waypoint. */
    for (int i = 0; i < found; i++) {
        const pd__holder *h = &yc->h[i];
        const pd_waypoint stop = { yc->old[i][0].x, yc->old[i][0].y, h->t0, h->t0 };
        if (pd_reserve_replace(table, h->agent, h->info.unit, h->t0, &stop, 1, NULL) != PD_OK) {
            pd__door_undo(table, yc, i);
            return 0;
        }
        pd_reserve_set_renewed(table, h->agent, h->info.renewed_ms);
    }
    return 1;
}

/* A search's expansions, as its budget counts them (forward; the
 * reverse search gets as many again); a search past its budget spent all
 * of it. Counting both directions against the request's total left
 * den520d 21 deadlocked over seven seeds against 15 (docs/BENCHMARKS.md,
 * eleventh pass). */
static uint64_t pd__spent(pd_status st, const pd_sipp_params *q, const pd_sipp_result *r)
{
    return st == PD_BUDGET_EXCEEDED ? q->max_expansions : r->expanded;
}

/* After pd__cut_crossers and R's plan rr reserved: each agent cut is
 * re-planned from its cut to where its plan ended, round R (a long plan,
 * the same at_goal), and must get there. 1 with every plan reserved (R's
 * in *r, the others' in yc->out); 0 with the table as it was before the
 * cut, R's reservations from t0 on gone (the caller reserves its P0). */
static int pd__replan_crossers(pd_yield_ctx *yc, pd_sipp_ctx *ctx, pd_reserve *table, const pd_sipp_params *p,
                               const pd_yield_params *y, int64_t window0, int found, uint64_t budget,
                               pd_sipp_result *rr, pd_sipp_result *r)
{
    const int64_t max_window = pd_reserve_get_limits(table)->max_window_ms;
    /* R's plan in the context's buffer: keep it past the others' plans. */
    if (rr->waypoints != yc->p1 && pd__keep(&yc->p1, &yc->cap1, rr->waypoints, rr->n_waypoints) != 0)
        goto undo;
    rr->waypoints = yc->p1;
    const pd_waypoint *rend = &rr->waypoints[rr->n_waypoints - 1];
    /* One request's lane step stays bounded: a joint crossing's re-plans
     * get what the crossing's first ones left. */
    if (yc->joint_i < 0)
        yc->cross_left = 2u * budget;
    uint64_t *const left = &yc->cross_left;
    for (int i = 0; i < found; i++) {
        const pd__holder *h = &yc->h[i];
        const pd_waypoint *end = &yc->old[i][yc->n_old[i] - 1];
        const int32_t k = (int32_t)h->info.unit, rk = (int32_t)p->unit;
        /* First come at a goal: its plan parked where R now parks for
         * good (two goals over one cell). It plans in the request's window
         * as near as it can hold clear of others, and the game sees it
         * cannot get there while R stands. */
        const int taken = end->t_leave_ms == PD_RESERVE_FOREVER && rend->t_leave_ms == PD_RESERVE_FOREVER &&
                          end->x < rend->x + rk && rend->x < end->x + k && end->y < rend->y + rk &&
                          rend->y < end->y + k;
        /* The joint partner goes on from where the joint search left it
         * (its part up to there is reserved). */
        const int jp = i == yc->joint_i;
        const pd_waypoint *from = jp ? &yc->jw[1][yc->n_jw[1] - 1] : &yc->old[i][0];
        pd_sipp_params q = { .agent = h->agent, .unit = h->info.unit,
                                   .start = { from->x, from->y }, .goal = { end->x, end->y },
                                   .t0_ms = jp ? from->t_leave_ms : h->t0, .speed = h->info.speed,
                                   .window_ms = max_window > 0 ? max_window : 0,
                                   .at_goal = end->t_leave_ms == PD_RESERVE_FOREVER ? PD_AT_GOAL_PARK
                                                                                     : PD_AT_GOAL_VANISH,
                                   .connectivity = p->connectivity,
                                   .max_expansions = budget, .poll = p->poll, .poll_user = p->poll_user };
        pd_sipp_result rh;
        int fell = 0;
        pd_status st;
        yc->park_unit = h->info.unit;
        yc->park_self = pd_reserve_agent_slot(table, h->agent);
        if (y->clear_holds) {
            q.hold_ok = pd__hold_ok_other;
            q.hold_user = yc;
        }
        /* Each search's budget: the crossing's own, counted against what
         * the request has left, else the aside plans'. */
        q.max_expansions = budget ? (*left < budget ? *left : budget)
                                  : (y->max_expansions ? y->max_expansions : PD_YIELD_DEFAULT_EXPANSIONS);
        uint64_t spent = 0;
        if (!q.max_expansions) {
            st = PD_BUDGET_EXCEEDED;
        } else if (taken) {
            q.window_ms = window0;
            st = pd_sipp_reserve(ctx, table, y->unit_grids[h->info.unit], &q, &rh);
            spent = pd__spent(st, &q, &rh);
            if (st == PD_NO_PATH && q.hold_ok) {
                q.hold_ok = NULL; /* nowhere clear in reach: as R's own plan would */
                st = pd_sipp_reserve(ctx, table, y->unit_grids[h->info.unit], &q, &rh);
                spent += pd__spent(st, &q, &rh);
            }
        } else if (budget) {
            /* All the way, in the crossing's own budget: the long plans'
             * (pd__plan_long) is too small for one that waits for R. */
            st = pd_sipp_reserve(ctx, table, y->unit_grids[h->info.unit], &q, &rh);
            spent = pd__spent(st, &q, &rh);
        } else {
            st = pd__reserve_long(ctx, table, y->unit_grids[h->info.unit], &q, y, window0, &rh, &fell);
        }
        if (budget)
            *left -= spent < *left ? spent : *left;
        /* Its old plan reached `end`: a PARTIAL one stops short of it,
         * maybe for good behind R's hold (no way round) - unless its end
         * is taken. */
        if (st != PD_OK && !(taken && st == PD_PARTIAL)) {
            yc->culprit = h->agent;
            yc->cross_why = st == PD_BUDGET_EXCEEDED ? 9 : st == PD_PARTIAL ? 10 : 11;
            goto undo;
        }
        pd_reserve_set_renewed(table, h->agent, h->info.renewed_ms);
        size_t nh = rh.n_waypoints;
        if (jp) {
            /* Its joint part, then this plan from the part's last waypoint on. */
            const size_t nj = yc->n_jw[1];
            nh += nj - 1;
            if (pd__grow(&yc->aside[i], &yc->cap_aside[i], nh) != 0)
                goto undo;
            memcpy(yc->aside[i], yc->jw[1], nj * sizeof *yc->jw[1]);
            yc->aside[i][nj - 1].t_leave_ms = rh.waypoints[0].t_leave_ms;
            memcpy(&yc->aside[i][nj], &rh.waypoints[1], (rh.n_waypoints - 1) * sizeof *rh.waypoints);
        } else if (pd__keep(&yc->aside[i], &yc->cap_aside[i], rh.waypoints, rh.n_waypoints) != 0) {
            goto undo;
        }
        yc->out[i] = (pd_displaced){ .agent = h->agent, .unit = h->info.unit, .speed = h->info.speed,
                                     .t0_ms = h->t0, .waypoints = yc->aside[i], .n_waypoints = nh,
                                     .reserved_until_ms = rh.reserved_until_ms };
    }
    if (r)
        *r = *rr;
    return 1;
undo : {
    const pd_waypoint stop = { p->start.x, p->start.y, p->t0_ms, p->t0_ms };
    pd_reserve_replace(table, p->agent, p->unit, p->t0_ms, &stop, 1, NULL);
    pd__door_undo(table, yc, found);
    return 0;
}
}

/* Coming in at its own door (door_ms): R stands one step from its goal
 * and may not park there, because other agents' plans cross the goal
 * later on (a hold is for good). When every crossing left starts after
 * R's window (t0 + window) and belongs to a moving agent whose plan has a
 * waypoint from then on before the crossing, each such agent keeps its
 * plan up to that waypoint, R plans as usual (and parks), and each agent
 * is re-planned from that waypoint to where its plan ended, around R.
 * 1 with all of it reserved (the agents' new plans in yc->out); 0 with
 * the table as it was. */
static int pd__door(pd_yield_ctx *yc, pd_sipp_ctx *ctx, pd_reserve *table, const pd_grid *grid,
                    const pd_sipp_params *p, const pd_yield_params *y, int64_t window0, pd_sipp_result *r,
                    int *found_out)
{
    const int64_t far = p->t0_ms + window0;
    int found = 0;
    *found_out = -1;
    yc->culprit = 0; /* only a re-plan names one; not an earlier request's */
    for (int32_t gy = p->goal.y; gy < p->goal.y + (int32_t)p->unit; gy++)
        for (int32_t gx = p->goal.x; gx < p->goal.x + (int32_t)p->unit; gx++) {
            size_t ns;
            const pd_reserve_span *s = pd_reserve_cell(table, gx, gy, &ns);
            for (size_t j = 0; j < ns; j++) {
                if (s[j].slot == yc->self || s[j].t1 <= p->t0_ms || s[j].t0 < far)
                    continue; /* its own, past, or near: R's plan waits for those */
                /* A hold from far on is an agent still on its way to park
                 * over R's goal: R, there first, takes it (pd__replan_crossers). */
                const uint64_t id = pd_reserve_slot_agent(table, s[j].slot);
                int k = 0;
                while (k < found && yc->h[k].agent != id)
                    k++;
                if (k < found) {
                    if (s[j].t0 < yc->h[k].meet)
                        yc->h[k].meet = s[j].t0;
                    continue;
                }
                if (found == (int)pd__max_displaced(y))
                    return 0;
                pd__holder *h = &yc->h[found];
                h->agent = id;
                /* A plan a block cut ends mid-move: its entries could not
                 * be given back as waypoints. */
                if (!pd_reserve_agent_info_get(table, id, &h->info) || h->info.speed <= 0 || h->info.unit < 1 ||
                    h->info.unit > y->max_unit || !y->unit_grids[h->info.unit] || pd_reserve_was_cut(table, id))
                    return 0;
                h->meet = s[j].t0;
                found++;
            }
        }
    if (!found)
        return 0;
    *found_out = found;
    if (!pd__cut_crossers(yc, table, far, far, found, 0))
        return 0;
    pd_sipp_result rr;
    pd_status st = pd_sipp_reserve(ctx, table, grid, p, &rr);
    if (st != PD_OK) {
        if (st == PD_PARTIAL) {
            const pd_waypoint stop = { p->start.x, p->start.y, p->t0_ms, p->t0_ms };
            pd_reserve_replace(table, p->agent, p->unit, p->t0_ms, &stop, 1, NULL);
        }
        pd__door_undo(table, yc, found);
        return 0;
    }
    return pd__replan_crossers(yc, ctx, table, p, y, window0, found, 0, &rr, r);
}

/* ignore_span for the crossing's P1: another agent's span that begins at
 * or after yc->far (R's own never counts anyway). */
static int pd__later_span(void *user, const pd_reserve_span *s)
{
    const pd_yield_ctx *yc = user;
    return s->t0 >= yc->far;
}

/* The agents whose spans from yc->far on R's plan wp[0..n) (unit k)
 * crosses, in the order it meets them, into yc->h with the time each is
 * first met: how many (0: none), or -1 when more than fit or one cannot be
 * cut (pd__door's rules: a known speed and unit grid, a plan no block
 * cut). */
static int pd__crossers(pd_yield_ctx *yc, const pd_reserve *t, const pd_waypoint *wp, size_t n, uint32_t k)
{
    const pd_yield_params *y = yc->y;
    int found = 0;
    for (size_t i = 0; i < n; i++)
        for (int move = 0; move < 2; move++) {
            pd__box b;
            if (!pd__box_of(wp, n, i, move, k, &b))
                continue;
            const int64_t t0 = b.t0, t1 = b.t1;
            for (int32_t cy = b.y0; cy <= b.y1; cy++)
                for (int32_t cx = b.x0; cx <= b.x1; cx++) {
                    size_t ns;
                    const pd_reserve_span *s = pd_reserve_cell(t, cx, cy, &ns);
                    for (size_t j = pd_reserve_first_ending_after(s, ns, sizeof *s, t0); j < ns && s[j].t0 < t1;
                         j++) {
                        if (s[j].slot == yc->self || s[j].t0 < yc->far)
                            continue;
                        const uint64_t id = pd_reserve_slot_agent(t, s[j].slot);
                        const int64_t meet = s[j].t0 > t0 ? s[j].t0 : t0;
                        int m = 0;
                        while (m < found && yc->h[m].agent != id)
                            m++;
                        if (m < found) {
                            if (meet < yc->h[m].meet)
                                yc->h[m].meet = meet;
                            continue;
                        }
                        if ((uint32_t)found == pd__max_displaced(y))
                            return -1;
                        pd__holder *h = &yc->h[found];
                        h->agent = id;
                        if (!pd_reserve_agent_info_get(t, id, &h->info) || h->info.speed <= 0 || h->info.unit < 1 ||
                            h->info.unit > y->max_unit || !y->unit_grids[h->info.unit] ||
                            pd_reserve_was_cut(t, id))
                            return -1;
                        h->meet = meet;
                        found++;
                    }
                }
        }
    return found;
}


static int pd__jover(int32_t ax, int32_t ay, int32_t ka, int32_t bx, int32_t by, int32_t kb)
{
    return ax < bx + kb && bx < ax + ka && ay < by + kb && by < ay + ka;
}

/* The last index of a[0..na) (unit ka) whose footprint meets one of
 * b[0..nb) (unit kb), or -1. */
static int64_t pd__jlast_meet(const pd_waypoint *a, size_t na, int32_t ka, const pd_waypoint *b, size_t nb,
                              int32_t kb)
{
    for (size_t i = na; i-- > 0;)
        for (size_t j = 0; j < nb; j++)
            if (pd__jover(a[i].x, a[i].y, ka, b[j].x, b[j].y, kb))
                return (int64_t)i;
    return -1;
}

/* Crossing jointly (joint): the crossing's re-plans failed for the
 * crosser h[j] (the culprit). Everything is cut again as the crossing
 * cut it; R and h[j] are planned together (pd_joint_search) until R stands
 * past the last cell of its way that h[j]'s old plan (from its cut) comes
 * to, and h[j] past the last cell of its old plan that R's way comes to;
 * R plans on from there on the table as it is then (every crosser cut,
 * h[j]'s joint part reserved), and every crosser is re-planned round R
 * as the crossing does (h[j] from where the joint part left it). 1 with
 * all of it reserved; 0 with the table as it was. */
static int pd__joint_cross(pd_yield_ctx *yc, pd_sipp_ctx *ctx, pd_reserve *table, const pd_grid *grid,
                           const pd_sipp_params *p, const pd_yield_params *y, int64_t window0, size_t n_rx,
                           int found, pd_sipp_result *r)
{
    int j = 0;
    while (j < found && yc->h[j].agent != yc->culprit)
        j++;
    if (j == found)
        return 0;
    yc->joint = 1;
    yc->cross_why = 12;
    if (!pd__cut_crossers(yc, table, yc->far, p->t0_ms, found, 1))
        return 0;
    const pd__holder *h = &yc->h[j];
    const pd_waypoint *rx = yc->p1, *old = yc->old[j];
    const size_t n_old = yc->n_old[j];
    const int32_t rk = (int32_t)p->unit, ck = (int32_t)h->info.unit;
    const int64_t ir = pd__jlast_meet(rx, n_rx, rk, old, n_old, ck);
    const int64_t ic = pd__jlast_meet(old, n_old, ck, rx, n_rx, rk);
    pd_joint_agent a[2] = {
        { .g = grid, .k = p->unit, .slot = yc->self, .speed = p->speed, .sx = p->start.x, .sy = p->start.y },
        { .g = y->unit_grids[h->info.unit], .k = h->info.unit, .slot = pd_reserve_agent_slot(table, h->agent),
          .speed = h->info.speed, .sx = old[0].x, .sy = old[0].y },
    };
    uint64_t spent = 0;
    if (ir < 0 || ic < 0)
        goto undo_cut;
    {
        const pd_waypoint *tr = &rx[(size_t)ir + 1 < n_rx ? (size_t)ir + 1 : n_rx - 1];
        const pd_waypoint *tcw = &old[(size_t)ic + 1 < n_old ? (size_t)ic + 1 : n_old - 1];
        a[0].tx = tr->x, a[0].ty = tr->y;
        a[1].tx = tcw->x, a[1].ty = tcw->y;
    }
    if (!yc->jc)
        yc->jc = pd_joint_ctx_create();
    if (!yc->jc || pd__grow(&yc->jw[0], &yc->cap_jw[0], PD_JOINT_MAX_WAYPOINTS) != 0 ||
        pd__grow(&yc->jw[1], &yc->cap_jw[1], PD_JOINT_MAX_WAYPOINTS) != 0 ||
        !pd_joint_search(yc->jc, table, a, p->t0_ms, h->t0, PD_YIELD_JOINT_EXPANSIONS, yc->jw, yc->n_jw, &spent))
        goto undo_cut;
    yc->cross_why = 13;
    if (pd_reserve_replace(table, h->agent, h->info.unit, h->t0, yc->jw[1], yc->n_jw[1], NULL) != PD_OK)
        goto undo_cut;
    if (pd_reserve_replace(table, p->agent, p->unit, p->t0_ms, yc->jw[0], yc->n_jw[0], NULL) != PD_OK)
        goto undo_r;
    {
        /* R on from its joint part's end, all the way, round everyone. */
        const int64_t max_window = pd_reserve_get_limits(table)->max_window_ms;
        const pd_waypoint *e = &yc->jw[0][yc->n_jw[0] - 1];
        pd_sipp_params q = *p;
        q.start = (pd_point){ e->x, e->y };
        q.t0_ms = e->t_leave_ms;
        q.window_ms = max_window > 0 ? max_window : 0;
        q.hold_ok = NULL;
        if (!q.max_expansions || q.max_expansions > PD_YIELD_CROSS_PLAN_EXPANSIONS / 2)
            q.max_expansions = PD_YIELD_CROSS_PLAN_EXPANSIONS / 2;
        pd_sipp_result rc;
        if (pd_sipp_plan(ctx, table, grid, &q, &rc) != PD_OK)
            goto undo_r;
        const size_t nj = yc->n_jw[0], n = nj + rc.n_waypoints - 1;
        if (pd__grow(&yc->jw[0], &yc->cap_jw[0], n) != 0)
            goto undo_r;
        yc->jw[0][nj - 1].t_leave_ms = rc.waypoints[0].t_leave_ms;
        memcpy(&yc->jw[0][nj], &rc.waypoints[1], (rc.n_waypoints - 1) * sizeof *rc.waypoints);
        if (pd_reserve_replace(table, p->agent, p->unit, p->t0_ms, yc->jw[0], n, NULL) != PD_OK)
            goto undo_r;
        rc.waypoints = yc->jw[0];
        rc.n_waypoints = n;
        rc.expanded += spent;
        /* pd_sipp_result.cost: the joint part's straight steps too */
        for (size_t i = 1; i < nj; i++)
            rc.cost += pd_grid_get(grid, yc->jw[0][i].x, yc->jw[0][i].y);
        yc->joint_i = j;
        yc->cross_why = 8;
        const int kept = pd__replan_crossers(yc, ctx, table, p, y, window0, found, PD_YIELD_CROSS_EXPANSIONS, &rc, r);
        yc->joint_i = -1;
        yc->joint = kept ? 2 : 1;
        return kept;
    }
undo_r : {
    const pd_waypoint stop = { p->start.x, p->start.y, p->t0_ms, p->t0_ms };
    pd_reserve_replace(table, p->agent, p->unit, p->t0_ms, &stop, 1, NULL);
}
undo_cut:
    pd__door_undo(table, yc, found);
    return 0;
}

/* Crossing at last (cross_ms): R has stood that long and P0 does not take
 * it to its goal within its window, while a plan through the others'
 * later plans would. R plans all the way with every other agent's spans
 * from t0 + window on ignored (pd__later_span); when that reaches the goal
 * (and gains on P0, when P0 does too), the agents it crosses there (at most
 * PD_YIELD_MAX_DISPLACED) keep their plans up to their first waypoint
 * from t0 + window on (else from t0 on) before they cross it, R reserves
 * that plan itself, and each is re-planned from its cut to where its
 * plan ended, round R - pd__door's cut and re-plans, for R's whole way
 * rather than its goal. 1 with all of it reserved (the agents' new plans
 * in yc->out); 0 with the table as it was. */
static int pd__cross(pd_yield_ctx *yc, pd_sipp_ctx *ctx, pd_reserve *table, const pd_grid *grid,
                     const pd_sipp_params *p, const pd_yield_params *y, int64_t window0, const pd_sipp_result *r0,
                     int r0_short, pd_sipp_result *r, int *found_out)
{
    const int64_t max_window = pd_reserve_get_limits(table)->max_window_ms;
    *found_out = -1;
    yc->culprit = 0; /* as pd__door */
    yc->joint = 0;
    yc->far = p->t0_ms + window0;
    pd_sipp_params px = *p;
    px.window_ms = max_window > 0 ? max_window : 0;
    px.hold_ok = NULL;
    px.ignore_span = pd__later_span;
    px.ignore_user = yc;
    /* Its own budget, not the long plans': with theirs (4,000) 41% of the
     * crossings tried gave up here, and 152 of the 222 tried by agents left
     * deadlocked (docs/BENCHMARKS.md, twelfth pass). */
    if (!px.max_expansions || px.max_expansions > PD_YIELD_CROSS_PLAN_EXPANSIONS)
        px.max_expansions = PD_YIELD_CROSS_PLAN_EXPANSIONS;
    pd_sipp_result rx;
    const pd_status stx = pd_sipp_plan(ctx, table, grid, &px, &rx);
    yc->cross_why = stx == PD_BUDGET_EXCEEDED ? 1 : 2;
    if (stx != PD_OK)
        return 0;
    /* P0 short of the goal (PARTIAL) has an eta that is a guess (its
     * handover's time plus the static rest): any plan that gets there
     * beats it. */
    yc->cross_why = 3;
    if (!r0_short && !pd__gains(r0, &rx))
        return 0;
    const int found = pd__crossers(yc, table, rx.waypoints, rx.n_waypoints, p->unit);
    yc->cross_why = found < 0 ? 4 : 5;
    if (found <= 0)
        return 0;
    *found_out = found;
    yc->cross_why = 6;
    /* R's way is P1 itself: the crossers were found for it, and they
     * keep only what P1 went round (their plans before far). Each must
     * stand on its cut strictly before P1 gets there, or it could not
     * start from it. */
    if (pd__keep(&yc->p1, &yc->cap1, rx.waypoints, rx.n_waypoints) != 0 ||
        !pd__cut_crossers(yc, table, yc->far, p->t0_ms, found, 1))
        return 0;
    rx.waypoints = yc->p1;
    yc->cross_why = 7;
    if (pd_reserve_replace(table, p->agent, p->unit, p->t0_ms, yc->p1, rx.n_waypoints, NULL) != PD_OK) {
        pd__door_undo(table, yc, found);
        return 0;
    }
    yc->cross_why = 8; /* pd__replan_crossers tells more */
    if (pd__replan_crossers(yc, ctx, table, p, y, window0, found, PD_YIELD_CROSS_EXPANSIONS, &rx, r))
        return 1;
    if (!y->joint || yc->cross_why < 9 || yc->cross_why > 11)
        return 0;
    return pd__joint_cross(yc, ctx, table, grid, p, y, window0, rx.n_waypoints, found, r);
}

/* Notes in yr how a door or crossing attempt that found `found` agents
 * ended: kept (the agents' new plans in yc->out) or undone (naming the
 * one that could not be re-planned); nothing when none was found. */
static void pd__note_cut(pd_yield_result *yr, const pd_yield_ctx *yc, int found, int kept, int outcome)
{
    if (!yr || found <= 0)
        return;
    yr->tried = 1;
    yr->undone = !kept;
    yr->found = found;
    yr->outcome = outcome;
    if (kept) {
        yr->displaced = yc->out;
        yr->n_displaced = (size_t)found;
    } else {
        yr->culprit = yc->culprit;
    }
}

pd_status pd_yield_reserve(pd_yield_ctx *yc, pd_sipp_ctx *ctx, pd_reserve *table, const pd_grid *grid,
                           const pd_sipp_params *p, const pd_yield_params *y, pd_sipp_result *r,
                           pd_yield_result *yr)
{
    pd_yield_result none = { 0 };
    if (yr)
        *yr = none;
    const int moving = y && y->after_ms > 0 && y->unit_grids;
    const int clearing = y && y->clear_holds && y->unit_grids && y->max_unit >= 1 && y->unit_grids[1];
    const int64_t max_window = pd_reserve_get_limits(table)->max_window_ms;
    /* An agent whose reservations already reach its goal keeps planning
     * all the way (or the longest window allowed): a PARTIAL plan would
     * give back the way it took through holders moved aside, and hold mid
     * corridor in front of them again. */
    const int64_t window0 = p->window_ms;
    pd_sipp_params pw = *p;
    pd_reserve_agent_info self;
    if (moving && p->window_ms > 0 && pd_reserve_agent_info_get(table, p->agent, &self) && self.holds &&
        self.x == p->goal.x && self.y == p->goal.y && (self.x != p->start.x || self.y != p->start.y))
        pw.window_ms = max_window > 0 ? max_window : 0;
    yc->y = y;
    yc->table = table;
    yc->self = pd_reserve_agent_slot(table, p->agent);
    if (clearing) {
        yc->hold_unit = p->unit;
        pw.hold_ok = pd__hold_ok;
        pw.hold_user = yc;
    }
    p = &pw;
    int64_t stood = 0;
    if (moving)
        stood = p->t0_ms - pd_reserve_standing_since(table, p->agent, p->start.x, p->start.y, p->t0_ms);
    if (stood > 0 && stood >= y->after_ms) {
        const int64_t gap = y->retry_max_ms ? y->retry_max_ms : PD_YIELD_DEFAULT_RETRY_MAX_MS;
        pd_reserve_agent_info me;
        if (pd_reserve_agent_info_get(table, p->agent, &me) &&
            !pd__retry_due(y->after_ms, gap, p->t0_ms, stood, me.renewed_ms))
            stood = 0; /* backing off: planned as usual */
    }
    if (stood <= 0 || stood < y->after_ms) {
        /* The long plan of an agent whose reservations reach its goal, or
         * the request as it came. */
        int fell;
        pd_status st = pd__reserve_long(ctx, table, grid, p, y ? y : &(pd_yield_params){ 0 }, window0, r, &fell);
        if (fell)
            pw.window_ms = window0;
        if (st == PD_NO_PATH && pw.hold_ok && p->window_ms > 0) {
            /* Nowhere clear to hold within reach (a crowd all round):
             * the parking rule gives way rather than the plan. */
            pw.hold_ok = NULL;
            if (yr)
                yr->hold_fell = 1;
            st = pd_sipp_reserve(ctx, table, grid, p, r);
        }
        if (st == PD_OK || st == PD_PARTIAL)
            pd_reserve_note_speed(table, p->agent, p->speed);
        return st;
    }

    pd_sipp_result r0;
    int fell0 = 0;
    pd_status st = pd__plan_long(ctx, table, grid, p, y, window0, &r0, &fell0);
    if (fell0)
        pw.window_ms = window0;
    if (st == PD_NO_PATH && pw.hold_ok && p->window_ms > 0) {
        pw.hold_ok = NULL;
        if (yr)
            yr->hold_fell = 1;
        st = pd_sipp_plan(ctx, table, grid, p, &r0);
    }
    if (st != PD_OK && st != PD_PARTIAL) {
        if (r)
            *r = r0;
        return st;
    }
    if (pd__keep(&yc->p0, &yc->cap0, r0.waypoints, r0.n_waypoints) != 0) {
        st = PD_INTERNAL;
        goto out;
    }
    r0.waypoints = yc->p0;

    if (y->door_ms > 0 && stood >= y->door_ms && window0 > 0 && p->at_goal == PD_AT_GOAL_PARK && !p->targets &&
        abs(p->start.x - p->goal.x) <= 1 && abs(p->start.y - p->goal.y) <= 1 &&
        (p->start.x != p->goal.x || p->start.y != p->goal.y) &&
        (r0.n_waypoints == 0 || r0.waypoints[r0.n_waypoints - 1].x != p->goal.x ||
         r0.waypoints[r0.n_waypoints - 1].y != p->goal.y)) {
        int dfound;
        pd_sipp_result rd;
        const int kept = pd__door(yc, ctx, table, grid, p, y, window0, &rd, &dfound);
        pd__note_cut(yr, yc, dfound, kept, kept ? PD_YIELD_OUT_KEPT_DOOR : PD_YIELD_OUT_DOOR_UNDONE);
        if (kept) {
            if (r)
                *r = rd;
            pd_reserve_note_speed(table, p->agent, p->speed);
            return PD_OK;
        }
    }

    /* P1: the same request with the movable holders' holds ignored. */
    yc->gen++;
    yc->t0 = p->t0_ms;
    yc->stood = stood;
    /* All the way to the goal (or the longest window the table allows):
     * the holders must park off R's whole way, and R's plan through the
     * narrow part must be reserved before a moved holder plans again, or
     * the holder walks straight back in to meet R's PARTIAL hold. */
    pd_sipp_params p1 = *p;
    p1.window_ms = max_window > 0 ? max_window : 0;
    pd_sipp_params p2 = p1;
    p1.passable = pd__passable;
    p1.passable_user = yc;
    pd_sipp_result r1;
    int fell1;
    const pd_status st1 = pd__plan_long(ctx, table, grid, &p1, y, window0, &r1, &fell1);
    if (fell1)
        p2.window_ms = window0;
    if (yr) {
        yr->tried = 1;
        yr->p1_expanded = r1.expanded + r1.reverse_expanded;
        yr->p1_fell = fell1;
        if (st1 == PD_OK || st1 == PD_PARTIAL) {
            yr->p1_wait_ms = r1.waypoints[0].t_leave_ms == PD_RESERVE_FOREVER ? -1
                                                                              : r1.waypoints[0].t_leave_ms - p->t0_ms;
            yr->p1_gain_ms = r0.eta_ms - r1.eta_ms;
        }
        yr->outcome = st1 == PD_OK || st1 == PD_PARTIAL ? PD_YIELD_OUT_NO_GAIN : PD_YIELD_OUT_P1_FAILED;
    }
    if ((st1 == PD_OK || st1 == PD_PARTIAL) && pd__gains(&r0, &r1) &&
        pd__keep(&yc->p1, &yc->cap1, r1.waypoints, r1.n_waypoints) == 0) {
        /* Only the holders R meets within its request's window move; with
         * more further on, R's plan stops short of them, as usual. */
        int later;
        int found = -1;
        if (y->move_ahead && !fell1) {
            /* Moving ahead clears R's whole way: every holder P1 crosses. */
            found = pd__crossed(yc, table, yc->p1, r1.n_waypoints, p->unit, PD_RESERVE_FOREVER, &later);
            if (found <= 0 || later)
                found = -1;
        }
        const int ahead = found > 0;
        if (!ahead)
            found = pd__crossed(yc, table, yc->p1, r1.n_waypoints, p->unit,
                                window0 > 0 ? p->t0_ms + window0 : PD_RESERVE_FOREVER, &later);
        if (later)
            p2.window_ms = window0;
        if (yr) {
            yr->outcome = PD_YIELD_OUT_NONE_IN_WINDOW;
            yr->found = found;
            yr->ahead = ahead;
        }
        if (found == 0 && !later && y->take_free_way) {
            /* P1 crosses no hold: it is a plan on the table as it is (the
             * table checks it again). */
            pd_reserve_refusal why;
            if (pd_reserve_replace(table, p->agent, p->unit, p->t0_ms, yc->p1, r1.n_waypoints, &why) == PD_OK) {
                r1.waypoints = yc->p1;
                r1.expanded += r0.expanded;
                r1.reverse_expanded += r0.reverse_expanded;
                if (r)
                    *r = r1;
                if (yr) {
                    yr->took_p1 = 1;
                    yr->outcome = PD_YIELD_OUT_TOOK_P1;
                }
                pd_reserve_note_speed(table, p->agent, p->speed);
                return st1;
            }
        }
        yc->culprit = 0;
        yc->undone_why = 0;
        if (ahead && pd__move_ahead(yc, ctx, table, p, found, r1.n_waypoints) == 0) {
            r1.waypoints = yc->p1;
            r1.expanded += r0.expanded;
            r1.reverse_expanded += r0.reverse_expanded;
            if (r)
                *r = r1;
            if (yr) {
                yr->displaced = yc->out;
                yr->n_displaced = (size_t)found;
                yr->outcome = PD_YIELD_OUT_KEPT_AHEAD;
            }
            pd_reserve_note_speed(table, p->agent, p->speed);
            return st1;
        }
        int aside = !ahead;
        if (ahead) {
            if (yr) {
                yr->undone = 1;
                yr->outcome = PD_YIELD_OUT_AHEAD_UNDONE;
                yr->culprit = yc->culprit;
                yr->undone_why = yc->undone_why;
            }
            if (y->aside_after_ahead && (yc->undone_why == 2 || yc->undone_why == 4)) {
                /* A holder found no anchor in time: its only way out
                 * of R's way is past R (a swap in a pocket). Moved
                 * aside it steps off R's whole way first and R waits
                 * for it: the holders R meets in its window. */
                aside = 1;
                found = pd__crossed(yc, table, yc->p1, r1.n_waypoints, p->unit,
                                    window0 > 0 ? p->t0_ms + window0 : PD_RESERVE_FOREVER, &later);
                if (later)
                    p2.window_ms = window0;
            }
        }
        if (aside && found > 0 && pd__mark_way(yc, r1.n_waypoints, p->unit) == 0 &&
            pd__move_aside(yc, ctx, table, p, found) == 0) {
            /* The way is clearing: R plans as usual on the table that has
             * the holders' new plans, and keeps it when it gains. */
            pd_sipp_result r2;
            int fell2;
            const pd_status st2 = pd__reserve_long(ctx, table, grid, &p2, y, window0, &r2, &fell2);
            if ((st2 == PD_OK || st2 == PD_PARTIAL) && pd__gains(&r0, &r2)) {
                r2.expanded += r0.expanded + r1.expanded;
                r2.reverse_expanded += r0.reverse_expanded + r1.reverse_expanded;
                if (r)
                    *r = r2;
                if (yr) {
                    yr->displaced = yc->out;
                    yr->n_displaced = (size_t)found;
                    yr->outcome = PD_YIELD_OUT_KEPT_ASIDE;
                    yr->undone = 0; /* moving ahead's, when aside came after it */
                    yr->culprit = 0;
                    yr->undone_why = 0;
                }
                pd_reserve_note_speed(table, p->agent, p->speed);
                return st2;
            }
            if (st2 == PD_OK || st2 == PD_PARTIAL) {
                /* R's plan goes with the moves: its P0 crossed no aside plan
                 * only while they were not there. */
                const pd_waypoint stop = { p->start.x, p->start.y, p->t0_ms, p->t0_ms };
                pd_reserve_replace(table, p->agent, p->unit, p->t0_ms, &stop, 1, NULL);
            }
            pd__undo(table, yc, 0, found);
            if (yr) {
                yr->undone = 1;
                yr->outcome = PD_YIELD_OUT_R2_NO_GAIN;
            }
        } else if (aside && found > 0 && yr) {
            yr->undone = 1;
            yr->outcome = PD_YIELD_OUT_ASIDE_UNDONE;
            yr->culprit = yc->culprit;
            yr->undone_why = yc->undone_why;
        }
    }

    if (y->cross_ms > 0 && stood >= y->cross_ms && window0 > 0 && !p->targets &&
        (st == PD_PARTIAL || (r0.n_waypoints && r0.waypoints[0].t_leave_ms > p->t0_ms + window0))) {
        int cfound;
        pd_sipp_result rc;
        const int kept = pd__cross(yc, ctx, table, grid, p, y, window0, &r0, st == PD_PARTIAL, &rc, &cfound);
        pd__note_cut(yr, yc, cfound, kept, kept ? PD_YIELD_OUT_KEPT_CROSS : PD_YIELD_OUT_CROSS_UNDONE);
        if (yr && !kept)
            yr->cross_why = yc->cross_why;
        if (yr)
            yr->joint = yc->joint;
        if (kept) {
            rc.expanded += r0.expanded;
            rc.reverse_expanded += r0.reverse_expanded;
            if (r)
                *r = rc;
            pd_reserve_note_speed(table, p->agent, p->speed);
            return PD_OK;
        }
    }

    if (y->take_free_way && r0.n_waypoints == 1) {
        /* P0 stands still: its eta bets on a way the table may keep shut
         * for good. The long plan on the table as it is (P3) knows. */
        pd_sipp_params p3 = *p;
        p3.window_ms = max_window > 0 ? max_window : 0;
        pd_sipp_result r3;
        int fell3;
        const pd_status st3 = pd__plan_long(ctx, table, grid, &p3, y, window0, &r3, &fell3);
        /* Taken only when it leaves within the request's window: a long
         * plan that first stands longer has found no way yet either. */
        if ((st3 == PD_OK || st3 == PD_PARTIAL) && !fell3 && r3.n_waypoints > 1 &&
            (window0 <= 0 || r3.waypoints[0].t_leave_ms <= p->t0_ms + window0) &&
            pd_reserve_replace(table, p->agent, p->unit, p->t0_ms, r3.waypoints, r3.n_waypoints, NULL) == PD_OK) {
            r3.expanded += r0.expanded + r1.expanded;
            r3.reverse_expanded += r0.reverse_expanded + r1.reverse_expanded;
            if (r)
                *r = r3;
            if (yr) {
                yr->took_p1 = 2;
                yr->outcome = PD_YIELD_OUT_TOOK_P1;
            }
            pd_reserve_note_speed(table, p->agent, p->speed);
            return st3;
        }
    }

    /* P0, as pd_sipp_reserve would have reserved it. */
    pd_reserve_refusal why;
    const pd_status rs = pd_reserve_replace(table, p->agent, p->unit, p->t0_ms, r0.waypoints, r0.n_waypoints, &why);
    if (rs != PD_OK) {
        st = rs;
        r0.limit = why.limit;
        r0.waypoints = NULL;
        r0.n_waypoints = 0;
        r0.reserved_until_ms = 0;
    } else {
        pd_reserve_note_speed(table, p->agent, p->speed);
    }
out:
    if (r)
        *r = r0;
    return st;
}

size_t pd_yield_ctx_trim(pd_yield_ctx *yc, size_t keep)
{
    if (yc->jc && pd_yield_ctx_bytes(yc) > keep) {
        pd_joint_ctx_destroy(yc->jc); /* holds nothing a result points into */
        yc->jc = NULL;
    }
    return pd_yield_ctx_bytes(yc);
}

size_t pd_yield_ctx_bytes(const pd_yield_ctx *yc)
{
    size_t n = sizeof *yc + (yc->cap0 + yc->cap1) * sizeof(pd_waypoint) + yc->cap_memo * sizeof *yc->memo +
               yc->cap_way * sizeof *yc->way;
    for (int i = 0; i < PD_YIELD_MAX_DISPLACED; i++)
        n += (yc->cap_aside[i] + yc->cap_old[i]) * sizeof(pd_waypoint);
    n += (yc->cap_jw[0] + yc->cap_jw[1]) * sizeof(pd_waypoint) + pd_joint_ctx_bytes(yc->jc);
    return n;
}
