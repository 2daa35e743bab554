/*
 * pd_joint.c - crossing jointly's search (pd_joint.h, for pd_yield.h's
 * joint): a space-time A* over two agents together.
 *
 * Why here: pd_yield.c decides when to cross and what to undo; this is
 * only the search, with its own buffers.
 */
#include "pd_joint.h"

#include <stdlib.h>
#include <string.h>

/* A joint state: both anchors at tick `step`, its parent, cost and estimate. */
typedef struct pd__jnode {
    int32_t x[2], y[2];
    uint32_t step, parent;
    uint32_t g, f;
} pd__jnode;

#define PD__JHASH_EMPTY UINT32_MAX
/* The largest grid it runs on: its static distances cover the whole grid
 * (3 x 4 bytes a cell, kept in the context). Larger scenes cross one by
 * one only. */
#define PD__JOINT_MAX_CELLS (512u * 512u)

typedef struct pd__jagent {
    const pd_grid *g;
    uint32_t k, slot;
    double speed;
    int32_t tx, ty;                    /* the target */
    int32_t *dist;                     /* static straight-step distance to it, -1: none */
} pd__jagent;

struct pd_joint_ctx {
    pd__jnode *jn;                     /* every node generated */
    size_t cap_jn;                     /* jn's and jheap's */
    uint32_t *jhash;                   /* jn's index by state, at most half full */
    size_t cap_jhash;
    int32_t *jdist[2];                 /* each agent's static distances */
    size_t cap_jdist;                  /* jdist's and jq's */
    uint32_t *jheap, *jq;              /* the open list; the distances' queue */
};

pd_joint_ctx *pd_joint_ctx_create(void)
{
    return calloc(1, sizeof(pd_joint_ctx));
}

void pd_joint_ctx_destroy(pd_joint_ctx *jc)
{
    if (!jc)
        return;
    free(jc->jn);
    free(jc->jhash);
    free(jc->jdist[0]), free(jc->jdist[1]);
    free(jc->jheap), free(jc->jq);
    free(jc);
}

size_t pd_joint_ctx_bytes(const pd_joint_ctx *jc)
{
    if (!jc)
        return 0;
    return sizeof *jc + jc->cap_jn * (sizeof *jc->jn + sizeof *jc->jheap) + jc->cap_jhash * sizeof *jc->jhash +
           jc->cap_jdist * (2 * sizeof *jc->jdist[0] + sizeof *jc->jq);
}

static int pd__jopen(const pd_grid *g, int32_t x, int32_t y)
{
    return pd_grid_in_bounds(g, x, y) && pd_grid_get(g, x, y) != PD_CELL_BLOCKED;
}

static uint32_t pd__jhash(const pd__jnode *n, size_t mask)
{
    uint64_t h = (uint64_t)(uint32_t)n->x[0] * 0x9E3779B97F4A7C15ull;
    h ^= ((uint64_t)(uint32_t)n->y[0] << 16) ^ ((uint64_t)(uint32_t)n->x[1] << 32) ^
         ((uint64_t)(uint32_t)n->y[1] << 48) ^ (uint64_t)n->step * 0xC2B2AE3D27D4EB4Full;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    return (uint32_t)(h & mask);
}

/* Static straight-step distances on a's grid from its target (a BFS over
 * the whole grid, in jc->jq). 0, or -1 on allocation failure. */
static int pd__jdistances(pd_joint_ctx *jc, pd__jagent *a)
{
    const int32_t w = a->g->width, hgt = a->g->height;
    const size_t cells = (size_t)w * (size_t)hgt;
    for (int32_t i = 0; i < (int32_t)cells; i++)
        a->dist[i] = -1;
    if (!pd__jopen(a->g, a->tx, a->ty))
        return 0;
    size_t head = 0, tail = 0;
    a->dist[(size_t)a->ty * (size_t)w + (size_t)a->tx] = 0;
    jc->jq[tail++] = (uint32_t)((size_t)a->ty * (size_t)w + (size_t)a->tx);
    static const int32_t dx[4] = { 1, -1, 0, 0 }, dy[4] = { 0, 0, 1, -1 };
    while (head < tail) {
        const uint32_t c = jc->jq[head++];
        const int32_t cx = (int32_t)(c % (uint32_t)w), cy = (int32_t)(c / (uint32_t)w);
        for (int d = 0; d < 4; d++) {
            const int32_t nx = cx + dx[d], ny = cy + dy[d];
            if (!pd__jopen(a->g, nx, ny) || a->dist[(size_t)ny * (size_t)w + (size_t)nx] >= 0)
                continue;
            a->dist[(size_t)ny * (size_t)w + (size_t)nx] = a->dist[c] + 1;
            jc->jq[tail++] = (uint32_t)((size_t)ny * (size_t)w + (size_t)nx);
        }
    }
    return 0;
}

static int32_t pd__jdist(const pd__jagent *a, int32_t x, int32_t y)
{
    return pd_grid_in_bounds(a->g, x, y) ? a->dist[(size_t)y * (size_t)a->g->width + (size_t)x] : -1;
}

static void pd__jheap_push(pd_joint_ctx *jc, size_t *n, uint32_t v)
{
    const pd__jnode *jn = jc->jn;
    size_t i = (*n)++;
    while (i > 0) {
        const size_t up = (i - 1) / 2;
        const pd__jnode *a = &jn[jc->jheap[up]], *b = &jn[v];
        if (a->f < b->f || (a->f == b->f && a->g >= b->g))
            break;
        jc->jheap[i] = jc->jheap[up];
        i = up;
    }
    jc->jheap[i] = v;
}

static uint32_t pd__jheap_pop(pd_joint_ctx *jc, size_t *n)
{
    const pd__jnode *jn = jc->jn;
    const uint32_t top = jc->jheap[0], v = jc->jheap[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && (jn[jc->jheap[c + 1]].f < jn[jc->jheap[c]].f ||
                           (jn[jc->jheap[c + 1]].f == jn[jc->jheap[c]].f &&
                            jn[jc->jheap[c + 1]].g > jn[jc->jheap[c]].g)))
            c++;
        if (jn[v].f < jn[jc->jheap[c]].f || (jn[v].f == jn[jc->jheap[c]].f && jn[v].g >= jn[jc->jheap[c]].g))
            break;
        jc->jheap[i] = jc->jheap[c];
        i = c;
    }
    if (*n)
        jc->jheap[i] = v;
    return top;
}

int pd_joint_search(pd_joint_ctx *jc, const pd_reserve *t, const pd_joint_agent in[2], int64_t t0, int64_t tc,
                    uint64_t budget, pd_waypoint *const jw[2], size_t n_jw[2], uint64_t *spent)
{
    pd__jagent a[2];
    for (int i = 0; i < 2; i++)
        a[i] = (pd__jagent){ .g = in[i].g, .k = in[i].k, .slot = in[i].slot, .speed = in[i].speed,
                             .tx = in[i].tx, .ty = in[i].ty };
    const int32_t sx0 = in[0].sx, sy0 = in[0].sy, sx1 = in[1].sx, sy1 = in[1].sy;
    *spent = 0;
    const int64_t tick = pd_sipp_step_ms(0, 1, a[0].speed < a[1].speed ? a[0].speed : a[1].speed);
    /* Refused before any buffer grows: a larger scene would otherwise
     * leave a worker's context holding the search's ~4 MB for a search
     * that never runs. */
    const size_t cells = (size_t)a[0].g->width * (size_t)a[0].g->height;
    if (a[1].g->width != a[0].g->width || a[1].g->height != a[0].g->height || cells > PD__JOINT_MAX_CELLS)
        return 0;
    /* Every node generated, and an index at most half full. */
    const size_t max_nodes = (size_t)budget * 25 + 1;
    size_t hcap = 1024;
    while (hcap < 2 * max_nodes)
        hcap *= 2;
    if (jc->cap_jn < max_nodes) {
        pd__jnode *b = realloc(jc->jn, max_nodes * sizeof *b);
        uint32_t *hp = realloc(jc->jheap, max_nodes * sizeof *hp);
        if (b)
            jc->jn = b;
        if (hp)
            jc->jheap = hp;
        if (!b || !hp)
            return 0;
        jc->cap_jn = max_nodes;
    }
    if (jc->cap_jhash < hcap) {
        uint32_t *b = realloc(jc->jhash, hcap * sizeof *b);
        if (!b)
            return 0;
        jc->jhash = b;
        jc->cap_jhash = hcap;
    }
    if (jc->cap_jdist < cells) {
        for (int i = 0; i < 2; i++) {
            int32_t *b = realloc(jc->jdist[i], cells * sizeof *b);
            if (!b)
                return 0;
            jc->jdist[i] = b;
        }
        uint32_t *q = realloc(jc->jq, cells * sizeof *q);
        if (!q)
            return 0;
        jc->jq = q;
        jc->cap_jdist = cells;
    }
    for (int i = 0; i < 2; i++) {
        a[i].dist = jc->jdist[i];
        pd__jdistances(jc, &a[i]);
    }
    if (pd__jdist(&a[0], sx0, sy0) < 0 || pd__jdist(&a[1], sx1, sy1) < 0)
        return 0;
    memset(jc->jhash, 0xff, hcap * sizeof *jc->jhash);
    const size_t mask = hcap - 1;
    /* The first tick C may move on, and the first it stands on its cut;
     * past the horizon there is no joint plan (counted in 64 bits: a cut
     * 2^32 ticks ahead must not wrap to one C may move at once). */
    const int64_t kc64 = (tc - t0 + tick - 1) / tick;
    if (kc64 < 0 || kc64 > PD_JOINT_MAX_TICKS)
        return 0;
    const uint32_t kc = (uint32_t)kc64, kp = kc ? kc - 1 : 0;
    size_t n_nodes = 0, n_heap = 0;
    pd__jnode *root = &jc->jn[n_nodes];
    *root = (pd__jnode){ .x = { sx0, sx1 }, .y = { sy0, sy1 }, .step = 0, .parent = UINT32_MAX, .g = 0 };
    root->f = (uint32_t)(pd__jdist(&a[0], sx0, sy0) + pd__jdist(&a[1], sx1, sy1));
    jc->jhash[pd__jhash(root, mask)] = 0;
    n_nodes = 1;
    pd__jheap_push(jc, &n_heap, 0);
    static const int32_t dx[5] = { 0, 1, -1, 0, 0 }, dy[5] = { 0, 0, 0, 1, -1 };
    while (n_heap) {
        const uint32_t ci = pd__jheap_pop(jc, &n_heap);
        const pd__jnode c = jc->jn[ci];
        if (c.step >= kc && c.x[0] == a[0].tx && c.y[0] == a[0].ty && c.x[1] == a[1].tx && c.y[1] == a[1].ty) {
            /* Found: each agent's cells, tick by tick, as waypoints. */
            const int64_t tend = t0 + (int64_t)c.step * tick;
            for (int i = 0; i < 2; i++) {
                size_t n = 0;
                for (uint32_t v = ci; v != UINT32_MAX; v = jc->jn[v].parent)
                    n++;
                /* at most one waypoint per tick, and the start: n <=
                 * PD_JOINT_MAX_WAYPOINTS */
                /* path in tick order, into jheap (free now) */
                size_t m = n;
                for (uint32_t v = ci; v != UINT32_MAX; v = jc->jn[v].parent)
                    jc->jheap[--m] = v;
                pd_waypoint *w = jw[i];
                size_t nw = 0;
                w[nw++] = (pd_waypoint){ jc->jn[jc->jheap[0]].x[i], jc->jn[jc->jheap[0]].y[i], i ? tc : t0, 0 };
                for (size_t s = 1; s < n; s++) {
                    const pd__jnode *v = &jc->jn[jc->jheap[s]];
                    if (v->x[i] == w[nw - 1].x && v->y[i] == w[nw - 1].y)
                        continue;
                    const int64_t leave = t0 + (int64_t)(s - 1) * tick;
                    w[nw - 1].t_leave_ms = leave;
                    w[nw++] = (pd_waypoint){ v->x[i], v->y[i],
                                             leave + pd_sipp_step_ms(0, pd_grid_get(a[i].g, v->x[i], v->y[i]),
                                                                     a[i].speed),
                                             0 };
                }
                w[nw - 1].t_leave_ms = tend > w[nw - 1].t_arrive_ms ? tend : w[nw - 1].t_arrive_ms;
                n_jw[i] = nw;
            }
            return 1;
        }
        if (*spent >= budget || c.step >= PD_JOINT_MAX_TICKS)
            continue;
        ++*spent;
        const int64_t ta = t0 + (int64_t)c.step * tick, tb = ta + tick;
        const int moves1 = c.step >= kc, present1 = c.step >= kp;
        /* C's steps this tick, against the table (they do not depend on R's). */
        int ok1[5];
        for (int d1 = 0; d1 < 5; d1++) {
            const int32_t x1 = c.x[1] + dx[d1], y1 = c.y[1] + dy[d1], k1 = (int32_t)a[1].k;
            ok1[d1] = (d1 == 0 || moves1) && pd__jdist(&a[1], x1, y1) >= 0 &&
                      (!present1 ||
                       ((!d1 || pd_sipp_step_ms(0, pd_grid_get(a[1].g, x1, y1), a[1].speed) <= tick) &&
                        !pd_reserve_box_busy(t, a[1].slot, x1 < c.x[1] ? x1 : c.x[1], y1 < c.y[1] ? y1 : c.y[1],
                                  (x1 > c.x[1] ? x1 : c.x[1]) + k1 - 1, (y1 > c.y[1] ? y1 : c.y[1]) + k1 - 1,
                                  ta > tc ? ta : tc, tb)));
        }
        for (int d0 = 0; d0 < 5; d0++) {
            const int32_t x0 = c.x[0] + dx[d0], y0 = c.y[0] + dy[d0];
            const int32_t h0 = pd__jdist(&a[0], x0, y0);
            const int32_t k0 = (int32_t)a[0].k;
            const int32_t b0x0 = x0 < c.x[0] ? x0 : c.x[0], b0y0 = y0 < c.y[0] ? y0 : c.y[0];
            const int32_t b0x1 = (x0 > c.x[0] ? x0 : c.x[0]) + k0 - 1, b0y1 = (y0 > c.y[0] ? y0 : c.y[0]) + k0 - 1;
            if (h0 < 0 || (d0 && pd_sipp_step_ms(0, pd_grid_get(a[0].g, x0, y0), a[0].speed) > tick) ||
                pd_reserve_box_busy(t, a[0].slot, b0x0, b0y0, b0x1, b0y1, ta, tb))
                continue;
            for (int d1 = 0; d1 < (moves1 ? 5 : 1); d1++) {
                const int32_t x1 = c.x[1] + dx[d1], y1 = c.y[1] + dy[d1];
                const int32_t h1 = pd__jdist(&a[1], x1, y1);
                const int32_t k1 = (int32_t)a[1].k;
                const int32_t b1x0 = x1 < c.x[1] ? x1 : c.x[1], b1y0 = y1 < c.y[1] ? y1 : c.y[1];
                const int32_t b1x1 = (x1 > c.x[1] ? x1 : c.x[1]) + k1 - 1,
                              b1y1 = (y1 > c.y[1] ? y1 : c.y[1]) + k1 - 1;
                if (!ok1[d1] || (present1 && b0x0 <= b1x1 && b1x0 <= b0x1 && b0y0 <= b1y1 && b1y0 <= b0y1))
                    continue; /* a wall, another agent, or R and C in each other's way */
                pd__jnode nn = { .x = { x0, x1 }, .y = { y0, y1 }, .step = c.step + 1, .parent = ci };
                nn.g = c.g + (d0 || x0 != a[0].tx || y0 != a[0].ty) +
                       (present1 && (d1 || x1 != a[1].tx || y1 != a[1].ty));
                nn.f = nn.g + (uint32_t)h0 + (uint32_t)h1;
                uint32_t hi = pd__jhash(&nn, mask);
                int seen = 0;
                while (jc->jhash[hi] != PD__JHASH_EMPTY) {
                    const pd__jnode *o = &jc->jn[jc->jhash[hi]];
                    if (o->step == nn.step && o->x[0] == x0 && o->y[0] == y0 && o->x[1] == x1 && o->y[1] == y1) {
                        seen = 1;
                        break;
                    }
                    hi = (hi + 1) & mask;
                }
                if (seen || n_nodes == max_nodes)
                    continue;
                jc->jn[n_nodes] = nn;
                jc->jhash[hi] = (uint32_t)n_nodes;
                pd__jheap_push(jc, &n_heap, (uint32_t)n_nodes);
                n_nodes++;
            }
        }
    }
    return 0;
}

