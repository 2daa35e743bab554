/*
 * pd_world.c - portals resolved against scenes, route tables, the planner and
 * the world store (see pd_world.h for the model and the rules).
 *
 * Endpoints are numbered 2 * portal + side (side 0 = the config's "a", 1 =
 * "b"), so a portal's two ends and a route graph's nodes need no lookup
 * table. Each scene keeps the list of endpoints lying in it; its route table
 * for a unit size is an n x n matrix over that list, row = from.
 */
#include "pd_world.h"
#include "pd_clock.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pd_route.h"

typedef struct pd__portal {
    char name[PD_CONF_WORLD_MAX_NAME];
    uint32_t scene[2];            /* world scene index of side a, side b */
    pd_point cell[2];
    int two_way;
    double cost;
    uint32_t max_unit;            /* 0 = any */
} pd__portal;

typedef struct pd__scene {
    pd_scene *scene;              /* retained */
    uint32_t *ends;               /* endpoint ids lying in this scene, ascending */
    size_t n_ends;
    /* One table per entry of scene->units (same index), n_ends^2 costs,
     * INFINITY when unreachable or an endpoint is blocked for that unit. */
    double *tables[PD_CONF_MAX_UNIT_SIZES];
} pd__scene;

typedef struct pd__route {
    uint32_t from, to;            /* scene indices */
    uint32_t via[PD_CONF_WORLD_MAX_VIA];
    size_t n_via;
} pd__route;

struct pd_world {
    atomic_uint_fast32_t refs;
    pd__scene *scenes;            /* sorted by name */
    size_t n_scenes;
    pd__portal *portals;
    size_t n_portals;
    uint32_t *end_local;          /* endpoint id -> its index in its scene's ends[] */
    pd__route *routes;
    size_t n_routes;
    pd_world_stats stats;
};

static void pd__scene_clear(pd__scene *s)
{
    for (size_t u = 0; u < PD_CONF_MAX_UNIT_SIZES; u++)
        free(s->tables[u]);
    free(s->ends);
    pd_scene_release(s->scene);
    memset(s, 0, sizeof *s);
}

static void pd__world_free(pd_world *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n_scenes; i++)
        pd__scene_clear(&w->scenes[i]);
    free(w->scenes);
    free(w->portals);
    free(w->end_local);
    free(w->routes);
    free(w);
}

void pd_world_retain(pd_world *w)
{
    /* The caller holds a reference already, so relaxed ordering suffices. */
    atomic_fetch_add_explicit(&w->refs, 1, memory_order_relaxed);
}

void pd_world_release(pd_world *w)
{
    if (!w)
        return;
    if (atomic_fetch_sub_explicit(&w->refs, 1, memory_order_acq_rel) != 1)
        return;
    pd__world_free(w);
}

/* Binary search over the sorted scenes; returns the index or -1. */
static long pd__find_scene(const pd_world *w, const char *name)
{
    size_t lo = 0, hi = w->n_scenes;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(w->scenes[mid].scene->name, name);
        if (c == 0)
            return (long)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

size_t pd_world_scene_count(const pd_world *w)
{
    return w ? w->n_scenes : 0;
}

const pd_scene *pd_world_scene_at(const pd_world *w, size_t i)
{
    return w && i < w->n_scenes ? w->scenes[i].scene : NULL;
}

const pd_scene *pd_world_scene(const pd_world *w, const char *name)
{
    long i = (w && name) ? pd__find_scene(w, name) : -1;
    return i < 0 ? NULL : w->scenes[i].scene;
}

void pd_world_get_stats(const pd_world *w, pd_world_stats *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    if (w)
        *out = w->stats;
}

/* Index of unit_size in s->units, or -1 when the scene does not serve it. */
static int pd__unit_index(const pd_scene *s, uint32_t unit_size)
{
    const pd_scene_unit *su = pd_scene_unit_for(s, unit_size);
    if (!su || !su->grid)
        return -1;
    return (int)(su - s->units);
}

static int pd__portal_admits(const pd__portal *p, uint32_t unit_size)
{
    return p->max_unit == 0 || unit_size <= p->max_unit;
}

/* Can unit `ui` of scene `ws` stand on endpoint e (portal limits aside)? */
static int pd__end_open(const pd_world *w, const pd__scene *ws, int ui, uint32_t e)
{
    const pd__portal *p = &w->portals[e / 2];
    pd_point c = p->cell[e % 2];
    return pd_grid_get(ws->scene->units[ui].grid, c.x, c.y) != PD_CELL_BLOCKED;
}

/* Cost of the cheapest in-scene path a -> b on a unit grid. Returns PD_OK
 * with *cost, PD_NO_PATH, or what the poll or the search returned. */
static pd_status pd__walk(pd_search_ctx *ctx, const pd_scene_unit *su, pd_point a, pd_point b,
                          pd_search_poll_fn poll, void *poll_user, double *cost,
                          uint64_t *searches, uint64_t *expanded)
{
    if (su->components && !pd_components_connected(su->components, a, b))
        return PD_NO_PATH;
    pd_search_params params = { .start = a, .goal = b, .connectivity = PD_CONNECT_8,
                                .poll = poll, .poll_user = poll_user };
    pd_search_metrics m;
    pd_status st = pd_search_astar(ctx, su->grid, &params, NULL, 0, &m);
    if (searches)
        (*searches)++;
    if (expanded)
        *expanded += m.expanded;
    if (st == PD_OK)
        *cost = m.cost;
    return st;
}

/* Fills every route table of one scene. Returns 0 or -1 (allocation). */
static int pd__scene_tables(pd_world *w, pd__scene *ws, pd_search_ctx *ctx)
{
    size_t n = ws->n_ends;
    const pd_scene *s = ws->scene;
    for (size_t ui = 0; ui < s->n_unit_sizes; ui++) {
        free(ws->tables[ui]);
        ws->tables[ui] = NULL;
        if (n == 0)
            continue;
        double *t = malloc(n * n * sizeof *t);
        if (!t)
            return -1;
        ws->tables[ui] = t;
        const pd_scene_unit *su = &s->units[ui];
        for (size_t i = 0; i < n; i++) {
            int open_i = pd__end_open(w, ws, (int)ui, ws->ends[i]);
            pd_point a = w->portals[ws->ends[i] / 2].cell[ws->ends[i] % 2];
            for (size_t j = 0; j < n; j++) {
                double *cell = &t[i * n + j];
                *cell = INFINITY;
                if (!open_i || !pd__end_open(w, ws, (int)ui, ws->ends[j]))
                    continue;
                w->stats.table_entries++;
                if (i == j) {
                    *cell = 0.0;
                    continue;
                }
                pd_point b = w->portals[ws->ends[j] / 2].cell[ws->ends[j] % 2];
                double c;
                uint64_t searches = 0;
                pd_status st = pd__walk(ctx, su, a, b, NULL, NULL, &c, &searches, NULL);
                w->stats.table_searches += searches;
                if (st == PD_OK)
                    *cell = c;
                else if (st != PD_NO_PATH)
                    return -1;
            }
        }
    }
    return 0;
}

static int pd__cmp_scene_ptr(const void *a, const void *b)
{
    const pd__scene *x = a, *y = b;
    return strcmp(x->scene->name, y->scene->name);
}

/* Lists each scene's endpoints (ascending ids) and end_local. */
static int pd__index_endpoints(pd_world *w)
{
    size_t n_ends = w->n_portals * 2;
    w->end_local = malloc((n_ends ? n_ends : 1) * sizeof *w->end_local);
    if (!w->end_local)
        return -1;
    for (uint32_t e = 0; e < n_ends; e++) {
        pd__scene *ws = &w->scenes[w->portals[e / 2].scene[e % 2]];
        uint32_t *grown = realloc(ws->ends, (ws->n_ends + 1) * sizeof *grown);
        if (!grown)
            return -1;
        ws->ends = grown;
        w->end_local[e] = (uint32_t)ws->n_ends;
        ws->ends[ws->n_ends++] = e;
    }
    return 0;
}

/* Gives ws (whose endpoints are indexed) copies of src's tables, which
 * were computed over the same snapshot and endpoint cells. 0, or -1 when
 * memory ran out. */
static int pd__copy_tables(pd__scene *ws, const pd__scene *src)
{
    size_t k = ws->n_ends;
    for (size_t u = 0; u < PD_CONF_MAX_UNIT_SIZES; u++) {
        if (!src->tables[u])
            continue;
        if (!(ws->tables[u] = malloc(k * k * sizeof *ws->tables[u])))
            return -1;
        memcpy(ws->tables[u], src->tables[u], k * k * sizeof *ws->tables[u]);
    }
    return 0;
}

/* Whether scene ws of world w can take its tables from prev: prev holds
 * the same snapshot with the same endpoint cells in the same order (a
 * table's entries depend on nothing else). */
static const pd__scene *pd__reusable(const pd_world *prev, const pd_world *w, const pd__scene *ws)
{
    long oi = pd__find_scene(prev, ws->scene->name);
    const pd__scene *os = oi >= 0 ? &prev->scenes[oi] : NULL;
    if (!os || os->scene != ws->scene || os->n_ends != ws->n_ends)
        return NULL;
    for (size_t k = 0; k < os->n_ends; k++) {
        pd_point a = prev->portals[os->ends[k] / 2].cell[os->ends[k] % 2];
        pd_point b = w->portals[ws->ends[k] / 2].cell[ws->ends[k] % 2];
        if (a.x != b.x || a.y != b.y)
            return NULL;
    }
    return os;
}

#define PD__ERR(...) ((err && errlen) ? (void)snprintf(err, errlen, __VA_ARGS__) : (void)0)

/* pd_world_build, taking the tables of each scene prev (may be NULL)
 * already computed for the same snapshot and endpoint cells. */
static pd_world *pd__world_build(const pd_conf_world *cw, pd_scene *const *scenes, size_t n_scenes,
                                 const pd_world *prev, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (n_scenes > 0 && !scenes) {
        PD__ERR("world: no scenes given");
        return NULL;
    }
    pd_world *w = calloc(1, sizeof *w);
    pd_search_ctx *ctx = pd_search_ctx_create();
    if (!w || !ctx)
        goto oom;
    atomic_init(&w->refs, 1);
    w->scenes = calloc(n_scenes ? n_scenes : 1, sizeof *w->scenes);
    if (!w->scenes)
        goto oom;
    for (size_t i = 0; i < n_scenes; i++) {
        if (!scenes[i]) {
            PD__ERR("world: scene %zu is NULL", i);
            goto fail;
        }
        pd_scene_retain(scenes[i]);
        w->scenes[i].scene = scenes[i];
        w->n_scenes = i + 1;
    }
    qsort(w->scenes, w->n_scenes, sizeof *w->scenes, pd__cmp_scene_ptr);
    for (size_t i = 1; i < w->n_scenes; i++) {
        if (strcmp(w->scenes[i - 1].scene->name, w->scenes[i].scene->name) == 0) {
            PD__ERR("world: scene '%s' is given twice", w->scenes[i].scene->name);
            goto fail;
        }
    }

    size_t n_portals = cw ? cw->n_portals : 0;
    w->portals = calloc(n_portals ? n_portals : 1, sizeof *w->portals);
    if (!w->portals)
        goto oom;
    for (size_t i = 0; i < n_portals; i++) {
        const pd_conf_portal *cp = &cw->portals[i];
        pd__portal *p = &w->portals[i];
        memcpy(p->name, cp->name, sizeof p->name);
        p->name[sizeof p->name - 1] = '\0';
        p->two_way = cp->two_way;
        p->cost = cp->cost;
        p->max_unit = cp->max_unit;
        if (!(isfinite(cp->cost) && cp->cost >= 0.0)) {
            PD__ERR("portal '%s': cost must be finite and >= 0", p->name);
            goto fail;
        }
        const pd_conf_portal_end *ends[2] = { &cp->a, &cp->b };
        for (int side = 0; side < 2; side++) {
            long si = pd__find_scene(w, ends[side]->scene);
            if (si < 0) {
                PD__ERR("portal '%s': unknown scene '%s'", p->name, ends[side]->scene);
                goto fail;
            }
            const pd_grid *g = w->scenes[si].scene->grid;
            if (!pd_grid_in_bounds(g, ends[side]->x, ends[side]->y)) {
                PD__ERR("portal '%s': cell %d,%d is outside scene '%s' (%dx%d)", p->name,
                        (int)ends[side]->x, (int)ends[side]->y, ends[side]->scene,
                        (int)g->width, (int)g->height);
                goto fail;
            }
            p->scene[side] = (uint32_t)si;
            p->cell[side] = (pd_point){ ends[side]->x, ends[side]->y };
        }
        w->n_portals = i + 1;
    }

    size_t n_routes = cw ? cw->n_routes : 0;
    w->routes = calloc(n_routes ? n_routes : 1, sizeof *w->routes);
    if (!w->routes)
        goto oom;
    for (size_t i = 0; i < n_routes; i++) {
        const pd_conf_route *cr = &cw->routes[i];
        pd__route *r = &w->routes[i];
        long from = pd__find_scene(w, cr->from), to = pd__find_scene(w, cr->to);
        if (from < 0 || to < 0) {
            PD__ERR("route %s -> %s: unknown scene '%s'", cr->from, cr->to,
                    from < 0 ? cr->from : cr->to);
            goto fail;
        }
        if (cr->n_via < 1 || cr->n_via > PD_CONF_WORLD_MAX_VIA) {
            PD__ERR("route %s -> %s: must pass 1..%d portals", cr->from, cr->to,
                    PD_CONF_WORLD_MAX_VIA);
            goto fail;
        }
        r->from = (uint32_t)from;
        r->to = (uint32_t)to;
        for (size_t k = 0; k < cr->n_via; k++) {
            if (cr->via[k] >= n_portals) {
                PD__ERR("route %s -> %s: portal index %u is out of range", cr->from, cr->to,
                        (unsigned)cr->via[k]);
                goto fail;
            }
            r->via[k] = cr->via[k];
        }
        r->n_via = cr->n_via;
        w->n_routes = i + 1;
    }

    if (pd__index_endpoints(w) != 0)
        goto oom;
    uint64_t t0 = pd_clock_us();
    for (size_t i = 0; i < w->n_scenes; i++) {
        const pd__scene *same = prev ? pd__reusable(prev, w, &w->scenes[i]) : NULL;
        if (same ? pd__copy_tables(&w->scenes[i], same) != 0 : pd__scene_tables(w, &w->scenes[i], ctx) != 0)
            goto oom;
    }
    w->stats.table_micros = pd_clock_us() - t0;
    w->stats.n_scenes = w->n_scenes;
    w->stats.n_portals = w->n_portals;
    w->stats.n_routes = w->n_routes;
    pd_search_ctx_destroy(ctx);
    return w;

oom:
    PD__ERR("world: out of memory");
fail:
    pd_search_ctx_destroy(ctx);
    pd__world_free(w);
    return NULL;
}

pd_world *pd_world_build(const pd_conf_world *cw, pd_scene *const *scenes, size_t n_scenes,
                         char *err, size_t errlen)
{
    return pd__world_build(cw, scenes, n_scenes, NULL, err, errlen);
}

pd_world *pd_world_build_from_registry(const pd_conf_world *cw, pd_registry *r,
                                       char *err, size_t errlen)
{
    if (!r) {
        PD__ERR("world: no registry");
        return NULL;
    }
    pd_scene **list = NULL;
    size_t n = pd_registry_list(r, &list);
    pd_world *w = pd_world_build(cw, list, n, err, errlen);
    pd_registry_release_list(list, n);
    return w;
}

pd_world *pd_world_build_from_set(const pd_conf_world *cw, const pd_scene_set *set,
                                  const pd_world *prev, char *err, size_t errlen)
{
    if (!set) {
        PD__ERR("world: no scene set");
        return NULL;
    }
    size_t n = 0;
    pd_scene *const *scenes = pd_scene_set_scenes(set, &n);
    return pd__world_build(cw, scenes, n, prev, err, errlen);
}

/* Copies w's portals, routes and endpoint index into a fresh world that
 * holds the same scenes (retained) and copies of their tables. */
static pd_world *pd__world_copy(const pd_world *w)
{
    pd_world *n = calloc(1, sizeof *n);
    if (!n)
        return NULL;
    atomic_init(&n->refs, 1);
    size_t n_ends = w->n_portals * 2;
    n->scenes = calloc(w->n_scenes ? w->n_scenes : 1, sizeof *n->scenes);
    n->portals = malloc((w->n_portals ? w->n_portals : 1) * sizeof *n->portals);
    n->end_local = malloc((n_ends ? n_ends : 1) * sizeof *n->end_local);
    n->routes = malloc((w->n_routes ? w->n_routes : 1) * sizeof *n->routes);
    if (!n->scenes || !n->portals || !n->end_local || !n->routes)
        goto fail;
    memcpy(n->portals, w->portals, w->n_portals * sizeof *n->portals);
    memcpy(n->end_local, w->end_local, n_ends * sizeof *n->end_local);
    memcpy(n->routes, w->routes, w->n_routes * sizeof *n->routes);
    n->n_portals = w->n_portals;
    n->n_routes = w->n_routes;
    n->stats = w->stats;
    for (size_t i = 0; i < w->n_scenes; i++) {
        const pd__scene *src = &w->scenes[i];
        pd__scene *dst = &n->scenes[i];
        pd_scene_retain(src->scene);
        dst->scene = src->scene;
        n->n_scenes = i + 1;
        size_t k = src->n_ends;
        dst->ends = malloc((k ? k : 1) * sizeof *dst->ends);
        if (!dst->ends)
            goto fail;
        if (k > 0)
            memcpy(dst->ends, src->ends, k * sizeof *dst->ends);
        dst->n_ends = k;
        for (size_t u = 0; u < PD_CONF_MAX_UNIT_SIZES; u++) {
            if (!src->tables[u])
                continue;
            dst->tables[u] = malloc(k * k * sizeof *dst->tables[u]);
            if (!dst->tables[u])
                goto fail;
            memcpy(dst->tables[u], src->tables[u], k * k * sizeof *dst->tables[u]);
        }
    }
    return n;
fail:
    pd__world_free(n);
    return NULL;
}

pd_status pd_world_refresh_scene(const pd_world *w, pd_scene *s, pd_world **out,
                                 char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (out)
        *out = NULL;
    if (!w || !s || !out) {
        PD__ERR("world refresh: NULL argument");
        return PD_INVALID_ARGUMENT;
    }
    long si = pd__find_scene(w, s->name);
    if (si < 0) {
        PD__ERR("world refresh: unknown scene '%s'", s->name);
        return PD_UNKNOWN_SCENE;
    }
    const pd__scene *old = &w->scenes[si];
    for (size_t k = 0; k < old->n_ends; k++) {
        const pd__portal *p = &w->portals[old->ends[k] / 2];
        pd_point c = p->cell[old->ends[k] % 2];
        if (!pd_grid_in_bounds(s->grid, c.x, c.y)) {
            PD__ERR("portal '%s': cell %d,%d is outside scene '%s' (%dx%d)", p->name, (int)c.x,
                    (int)c.y, s->name, (int)s->grid->width, (int)s->grid->height);
            return PD_INVALID_ARGUMENT;
        }
    }
    pd_search_ctx *ctx = pd_search_ctx_create();
    pd_world *n = ctx ? pd__world_copy(w) : NULL;
    if (!n) {
        pd_search_ctx_destroy(ctx);
        PD__ERR("world refresh: out of memory");
        return PD_INTERNAL;
    }
    pd__scene *ws = &n->scenes[si];
    pd_scene_retain(s);
    pd_scene_release(ws->scene);
    ws->scene = s;
    /* The unit sizes may differ after a reload; stale tables must not
     * survive under another unit's index. */
    for (size_t u = 0; u < PD_CONF_MAX_UNIT_SIZES; u++) {
        free(ws->tables[u]);
        ws->tables[u] = NULL;
    }
    uint64_t t0 = pd_clock_us();
    n->stats.table_entries = 0;
    n->stats.table_searches = 0;
    int rc = pd__scene_tables(n, ws, ctx);
    n->stats.table_micros = pd_clock_us() - t0;
    pd_search_ctx_destroy(ctx);
    if (rc != 0) {
        pd__world_free(n);
        PD__ERR("world refresh: out of memory");
        return PD_INTERNAL;
    }
    *out = n;
    return PD_OK;
}

/* Whether scene ws of world n reads the same endpoints, in the same order,
 * as scene os of world w did, given pmap (w's portal -> n's portal). */
static int pd__same_ends(const pd__scene *os, const pd__scene *ws, const long *pmap)
{
    if (os->n_ends != ws->n_ends)
        return 0;
    for (size_t k = 0; k < os->n_ends; k++) {
        uint32_t e = os->ends[k];
        if (pmap[e / 2] < 0 || (uint32_t)pmap[e / 2] * 2 + e % 2 != ws->ends[k])
            return 0;
    }
    return 1;
}

/* A world over `scenes` (sorted by name) with w's portals and pinned routes.
 * A portal naming a scene that is not among them is left out, with the
 * pinned routes through it, when drop is set; otherwise the result is
 * PD_SCENE_IN_USE. A scene whose snapshot and endpoints are unchanged
 * keeps its tables (copied); the others' are computed. */
static pd_status pd__world_resync(const pd_world *w, pd_scene *const *scenes, size_t n_scenes,
                                  int drop, pd_world **out, char *err, size_t errlen)
{
    *out = NULL;
    pd_status st = PD_INTERNAL;
    pd_search_ctx *ctx = NULL;
    long *pmap = malloc((w->n_portals ? w->n_portals : 1) * sizeof *pmap);
    pd_world *n = calloc(1, sizeof *n);
    if (!pmap || !n)
        goto fail;
    atomic_init(&n->refs, 1);
    n->scenes = calloc(n_scenes ? n_scenes : 1, sizeof *n->scenes);
    n->portals = malloc((w->n_portals ? w->n_portals : 1) * sizeof *n->portals);
    n->routes = malloc((w->n_routes ? w->n_routes : 1) * sizeof *n->routes);
    if (!n->scenes || !n->portals || !n->routes)
        goto fail;
    for (size_t i = 0; i < n_scenes; i++) {
        pd_scene_retain(scenes[i]);
        n->scenes[i].scene = scenes[i];
        n->n_scenes = i + 1;
    }
    for (size_t p = 0; p < w->n_portals; p++) {
        pd__portal np = w->portals[p];
        pmap[p] = -1;
        int missing = 0;
        for (int side = 0; side < 2; side++) {
            const char *name = w->scenes[np.scene[side]].scene->name;
            long si = pd__find_scene(n, name);
            if (si < 0) {
                if (!drop) {
                    PD__ERR("portal '%s' names scene '%s'", np.name, name);
                    st = PD_SCENE_IN_USE;
                    goto fail;
                }
                missing = 1;
                break;
            }
            if (!pd_grid_in_bounds(n->scenes[si].scene->grid, np.cell[side].x, np.cell[side].y)) {
                PD__ERR("portal '%s': cell %d,%d is outside scene '%s'", np.name, (int)np.cell[side].x,
                        (int)np.cell[side].y, name);
                st = PD_INVALID_ARGUMENT;
                goto fail;
            }
            np.scene[side] = (uint32_t)si;
        }
        if (missing)
            continue;
        pmap[p] = (long)n->n_portals;
        n->portals[n->n_portals++] = np;
    }
    for (size_t i = 0; i < w->n_routes; i++) {
        pd__route nr = w->routes[i];
        long from = pd__find_scene(n, w->scenes[nr.from].scene->name);
        long to = pd__find_scene(n, w->scenes[nr.to].scene->name);
        int ok = from >= 0 && to >= 0;
        for (size_t k = 0; ok && k < nr.n_via; k++) {
            ok = pmap[nr.via[k]] >= 0;
            if (ok)
                nr.via[k] = (uint32_t)pmap[nr.via[k]];
        }
        if (!ok)
            continue; /* only when drop is set: its portals went first */
        nr.from = (uint32_t)from;
        nr.to = (uint32_t)to;
        n->routes[n->n_routes++] = nr;
    }
    if (pd__index_endpoints(n) != 0)
        goto fail;
    uint64_t t0 = pd_clock_us();
    for (size_t i = 0; i < n->n_scenes; i++) {
        pd__scene *ws = &n->scenes[i];
        long oi = pd__find_scene(w, ws->scene->name);
        const pd__scene *os = oi >= 0 ? &w->scenes[oi] : NULL;
        if (os && os->scene == ws->scene && pd__same_ends(os, ws, pmap)) {
            if (pd__copy_tables(ws, os) != 0)
                goto fail;
            continue;
        }
        if (ws->n_ends == 0)
            continue;
        if (!ctx && !(ctx = pd_search_ctx_create()))
            goto fail;
        if (pd__scene_tables(n, ws, ctx) != 0)
            goto fail;
    }
    n->stats.table_micros = pd_clock_us() - t0;
    n->stats.n_scenes = n->n_scenes;
    n->stats.n_portals = n->n_portals;
    n->stats.n_routes = n->n_routes;
    pd_search_ctx_destroy(ctx);
    free(pmap);
    *out = n;
    return PD_OK;
fail:
    if (st == PD_INTERNAL)
        PD__ERR("world: out of memory");
    pd_search_ctx_destroy(ctx);
    free(pmap);
    pd__world_free(n);
    return st;
}

size_t pd_world_portals_naming(const pd_world *w, const char *name)
{
    long si = (w && name) ? pd__find_scene(w, name) : -1;
    size_t count = 0;
    for (size_t p = 0; si >= 0 && p < w->n_portals; p++)
        count += w->portals[p].scene[0] == (uint32_t)si || w->portals[p].scene[1] == (uint32_t)si;
    return count;
}

/* ---- planning ---------------------------------------------------------- */

/* What a route-graph edge stands for, so the chosen path becomes legs. */
typedef enum pd__edge_kind {
    PD__EDGE_WALK = 0,            /* inside scene `scene`, from -> to */
    PD__EDGE_PORTAL = 1,          /* portal `portal` from side `side` to the other */
} pd__edge_kind;

typedef struct pd__edge_info {
    pd__edge_kind kind;
    uint32_t scene;
    pd_point from, to;
    uint32_t portal;
    uint32_t side;
    double cost;
} pd__edge_info;

/* A route graph under construction plus the meaning of each edge. */
typedef struct pd__plan_graph {
    pd_route_graph g;
    pd__edge_info *info;
    size_t cap;
} pd__plan_graph;

static pd_status pd__add(pd__plan_graph *pg, uint32_t from, uint32_t to, pd__edge_info info)
{
    if (pg->g.n_edges == pg->cap) {
        size_t cap = pg->cap ? pg->cap * 2 : 64;
        pd__edge_info *grown = realloc(pg->info, cap * sizeof *grown);
        if (!grown)
            return PD_INTERNAL;
        pg->info = grown;
        pg->cap = cap;
    }
    pd_status st = pd_route_graph_add_edge(&pg->g, from, to, info.cost);
    if (st == PD_OK)
        pg->info[pg->g.n_edges - 1] = info;
    return st;
}

/* Everything one query needs besides the graph. */
typedef struct pd__query {
    const pd_world *w;
    pd_search_ctx *ctx;
    const pd_world_query *q;
    uint32_t unit;
    uint32_t s, t;                /* scene indices */
    int ui_s, ui_t;               /* unit indices in those scenes */
    pd_world_route *out;
} pd__query;

/* Is endpoint e usable by the query's unit: its scene serves the unit, the
 * portal admits it and the anchor cell is open? */
static int pd__end_usable(const pd__query *qq, uint32_t e)
{
    const pd__portal *p = &qq->w->portals[e / 2];
    if (!pd__portal_admits(p, qq->unit))
        return 0;
    const pd__scene *ws = &qq->w->scenes[p->scene[e % 2]];
    int ui = pd__unit_index(ws->scene, qq->unit);
    return ui >= 0 && pd__end_open(qq->w, ws, ui, e);
}

static pd_point pd__end_cell(const pd_world *w, uint32_t e)
{
    return w->portals[e / 2].cell[e % 2];
}

/* In-scene walk from a query point; PD_NO_PATH is not an error here. */
static pd_status pd__query_walk(pd__query *qq, uint32_t scene, int ui, pd_point a, pd_point b,
                                double *cost)
{
    const pd_scene_unit *su = &qq->w->scenes[scene].scene->units[ui];
    return pd__walk(qq->ctx, su, a, b, qq->q->poll, qq->q->poll_user, cost, &qq->out->searches,
                    &qq->out->expanded);
}

/* Table cost between two endpoints of one scene for the query's unit. */
static double pd__table(const pd__query *qq, uint32_t scene, uint32_t from_end, uint32_t to_end)
{
    const pd__scene *ws = &qq->w->scenes[scene];
    int ui = pd__unit_index(ws->scene, qq->unit);
    if (ui < 0 || !ws->tables[ui])
        return INFINITY;
    return ws->tables[ui][(size_t)qq->w->end_local[from_end] * ws->n_ends +
                          qq->w->end_local[to_end]];
}

/* Builds the query's route graph: nodes 0..2P-1 are endpoints, 2P the start,
 * 2P+1 the goal. Without with_goal nothing leads to the goal (and no goal
 * searches run): pd_world_arrivals only asks what the start reaches. */
static pd_status pd__build_graph(pd__query *qq, pd__plan_graph *pg, int with_goal)
{
    const pd_world *w = qq->w;
    uint32_t n_ends = (uint32_t)(w->n_portals * 2);
    uint32_t start = n_ends, goal = n_ends + 1;
    if (pd_route_graph_init(&pg->g, n_ends + 2) != 0)
        return PD_INTERNAL;
    pd_status st = PD_OK;

    for (uint32_t p = 0; p < w->n_portals && st == PD_OK; p++) {
        const pd__portal *pp = &w->portals[p];
        if (!pd__end_usable(qq, 2 * p) || !pd__end_usable(qq, 2 * p + 1))
            continue;
        pd__edge_info info = { .kind = PD__EDGE_PORTAL, .portal = p, .side = 0, .cost = pp->cost };
        st = pd__add(pg, 2 * p, 2 * p + 1, info);
        if (st == PD_OK && pp->two_way) {
            info.side = 1;
            st = pd__add(pg, 2 * p + 1, 2 * p, info);
        }
    }

    for (uint32_t si = 0; si < w->n_scenes && st == PD_OK; si++) {
        const pd__scene *ws = &w->scenes[si];
        for (size_t i = 0; i < ws->n_ends && st == PD_OK; i++) {
            uint32_t a = ws->ends[i];
            if (!pd__end_usable(qq, a))
                continue;
            for (size_t j = 0; j < ws->n_ends && st == PD_OK; j++) {
                uint32_t b = ws->ends[j];
                if (i == j || !pd__end_usable(qq, b))
                    continue;
                double c = pd__table(qq, si, a, b);
                if (!isfinite(c))
                    continue;
                pd__edge_info info = { .kind = PD__EDGE_WALK, .scene = si,
                                       .from = pd__end_cell(w, a), .to = pd__end_cell(w, b),
                                       .cost = c };
                st = pd__add(pg, a, b, info);
            }
        }
    }

    /* Start and goal legs: one A* per endpoint of S and of T. */
    const pd__scene *ws = &w->scenes[qq->s];
    for (size_t i = 0; i < ws->n_ends && st == PD_OK; i++) {
        uint32_t e = ws->ends[i];
        if (!pd__end_usable(qq, e))
            continue;
        double c;
        pd_status ws_st = pd__query_walk(qq, qq->s, qq->ui_s, qq->q->start, pd__end_cell(w, e), &c);
        if (ws_st == PD_NO_PATH)
            continue;
        if (ws_st != PD_OK)
            return ws_st;
        pd__edge_info info = { .kind = PD__EDGE_WALK, .scene = qq->s, .from = qq->q->start,
                               .to = pd__end_cell(w, e), .cost = c };
        st = pd__add(pg, start, e, info);
    }
    const pd__scene *wt = &w->scenes[qq->t];
    for (size_t i = 0; with_goal && i < wt->n_ends && st == PD_OK; i++) {
        uint32_t e = wt->ends[i];
        if (!pd__end_usable(qq, e))
            continue;
        double c;
        pd_status wt_st = pd__query_walk(qq, qq->t, qq->ui_t, pd__end_cell(w, e), qq->q->goal, &c);
        if (wt_st == PD_NO_PATH)
            continue;
        if (wt_st != PD_OK)
            return wt_st;
        pd__edge_info info = { .kind = PD__EDGE_WALK, .scene = qq->t, .from = pd__end_cell(w, e),
                               .to = qq->q->goal, .cost = c };
        st = pd__add(pg, e, goal, info);
    }
    if (with_goal && st == PD_OK && qq->s == qq->t) {
        double c;
        pd_status d_st = pd__query_walk(qq, qq->s, qq->ui_s, qq->q->start, qq->q->goal, &c);
        if (d_st == PD_OK) {
            pd__edge_info info = { .kind = PD__EDGE_WALK, .scene = qq->s, .from = qq->q->start,
                                   .to = qq->q->goal, .cost = c };
            st = pd__add(pg, start, goal, info);
        } else if (d_st != PD_NO_PATH) {
            return d_st;
        }
    }
    if (st == PD_OK)
        st = pd_route_graph_prepare(&pg->g);
    return st;
}

/* Appends a leg; walks in the same scene back to back (which only ties can
 * produce) extend the open leg instead. */
static pd_status pd__legs_walk(pd__query *qq, size_t *cap, uint32_t scene, pd_point from,
                               pd_point to, double cost)
{
    pd_world_route *r = qq->out;
    if (r->n_legs > 0 && !r->legs[r->n_legs - 1].has_portal) {
        pd_world_leg *open = &r->legs[r->n_legs - 1];
        open->to = to;
        open->portal_exit = to;
        open->cost += cost;
        return PD_OK;
    }
    if (r->n_legs == *cap) {
        size_t n = *cap ? *cap * 2 : 4;
        pd_world_leg *grown = realloc(r->legs, n * sizeof *grown);
        if (!grown)
            return PD_INTERNAL;
        r->legs = grown;
        *cap = n;
    }
    r->legs[r->n_legs++] = (pd_world_leg){ .scene = qq->w->scenes[scene].scene, .from = from,
                                           .to = to, .cost = cost, .portal_exit = to };
    return PD_OK;
}

/* Closes the open leg with portal p taken from side `side`. Every portal
 * follows a walk: the start node has only walk edges, a walk (of length 0
 * between two portals on one cell) joins any two portals, and a simple path
 * never takes a portal straight back. */
static pd_status pd__legs_portal(pd__query *qq, uint32_t p, uint32_t side)
{
    const pd__portal *pp = &qq->w->portals[p];
    pd_world_route *r = qq->out;
    if (r->n_legs == 0 || r->legs[r->n_legs - 1].has_portal)
        return PD_INTERNAL;
    pd_world_leg *leg = &r->legs[r->n_legs - 1];
    leg->has_portal = 1;
    leg->portal = pp->name;
    leg->portal_exit = pp->cell[side];
    leg->next_scene = qq->w->scenes[pp->scene[1 - side]].scene;
    leg->portal_entry = pp->cell[1 - side];
    leg->portal_cost = pp->cost;
    return PD_OK;
}

static pd_status pd__plan_free(pd__query *qq)
{
    pd__plan_graph pg = { 0 };
    pd_status st = pd__build_graph(qq, &pg, 1);
    uint32_t *path = NULL;
    pd_route_path rp = { 0 };
    if (st == PD_OK) {
        uint32_t n_ends = (uint32_t)(qq->w->n_portals * 2);
        size_t cap = pg.g.n_edges ? pg.g.n_edges : 1;
        path = malloc(cap * sizeof *path);
        st = path ? pd_route_shortest(&pg.g, n_ends, n_ends + 1, path, cap, &rp) : PD_INTERNAL;
    }
    size_t leg_cap = 0;
    for (size_t i = 0; st == PD_OK && i < rp.n_edges; i++) {
        const pd__edge_info *e = &pg.info[path[i]];
        if (e->kind == PD__EDGE_WALK)
            st = pd__legs_walk(qq, &leg_cap, e->scene, e->from, e->to, e->cost);
        else
            st = pd__legs_portal(qq, e->portal, e->side);
    }
    if (st == PD_OK)
        qq->out->total_cost = rp.cost;
    free(path);
    free(pg.info);
    pd_route_graph_free(&pg.g);
    return st;
}

/* The layered search over a pinned route's portals (see pd__plan_pinned). */
typedef struct pd__pinned_dp {
    double best[PD_CONF_WORLD_MAX_VIA][2];  /* cheapest cost up to and through the portal */
    int8_t prev[PD_CONF_WORLD_MAX_VIA][2];  /* direction of the previous portal */
    double walk[PD_CONF_WORLD_MAX_VIA][2];  /* the walk leading into that state */
} pd__pinned_dp;

/*
 * Fills dp for route r: two states per portal (taken a -> b, d = 0, or
 * b -> a, d = 1). A state is valid when its entry side lies in the scene the
 * previous state arrived in (the first: in S); among equal costs a -> b wins.
 * Walks between two portals come from the route tables, the first from A*.
 */
static pd_status pd__pinned_forward(pd__query *qq, const pd__route *r, pd__pinned_dp *dp)
{
    const pd_world *w = qq->w;
    for (size_t i = 0; i < r->n_via; i++) {
        uint32_t p = r->via[i];
        const pd__portal *pp = &w->portals[p];
        int usable = pd__end_usable(qq, 2 * p) && pd__end_usable(qq, 2 * p + 1);
        for (int d = 0; d < 2; d++) {
            dp->best[i][d] = INFINITY;
            dp->prev[i][d] = -1;
            dp->walk[i][d] = INFINITY;
            if (!usable || (d == 1 && !pp->two_way))
                continue;
            uint32_t near_scene = pp->scene[d];
            if (i == 0) {
                if (near_scene != qq->s)
                    continue;
                double c;
                pd_status st = pd__query_walk(qq, qq->s, qq->ui_s, qq->q->start, pp->cell[d], &c);
                if (st == PD_NO_PATH)
                    continue;
                if (st != PD_OK)
                    return st;
                dp->walk[i][d] = c;
                dp->best[i][d] = c + pp->cost;
                continue;
            }
            uint32_t q = r->via[i - 1];
            const pd__portal *pq = &w->portals[q];
            for (int pd = 0; pd < 2; pd++) {
                if (!isfinite(dp->best[i - 1][pd]) || pq->scene[1 - pd] != near_scene)
                    continue;
                double c = pd__table(qq, near_scene, 2 * q + (uint32_t)(1 - pd), 2 * p + (uint32_t)d);
                double total = dp->best[i - 1][pd] + c + pp->cost;
                if (isfinite(c) && total < dp->best[i][d]) {
                    dp->best[i][d] = total;
                    dp->prev[i][d] = (int8_t)pd;
                    dp->walk[i][d] = c;
                }
            }
        }
    }
    return PD_OK;
}

/*
 * Follows a pinned route exactly: the cheapest way through its portals in
 * order (pd__pinned_forward), then A* from the last portal's far cell to the
 * goal. NO_PATH when no state survives to the goal.
 */
static pd_status pd__plan_pinned(pd__query *qq, const pd__route *r)
{
    const pd_world *w = qq->w;
    pd__pinned_dp dp;
    pd_status st = pd__pinned_forward(qq, r, &dp);
    if (st != PD_OK)
        return st;
    size_t last = r->n_via - 1;
    const pd__portal *pl = &w->portals[r->via[last]];
    double best_total = INFINITY, goal_walk = 0.0;
    int best_d = -1;
    for (int d = 0; d < 2; d++) {
        if (!isfinite(dp.best[last][d]) || pl->scene[1 - d] != qq->t)
            continue;
        double c;
        st = pd__query_walk(qq, qq->t, qq->ui_t, pl->cell[1 - d], qq->q->goal, &c);
        if (st == PD_NO_PATH)
            continue;
        if (st != PD_OK)
            return st;
        if (dp.best[last][d] + c < best_total) {
            best_total = dp.best[last][d] + c;
            best_d = d;
            goal_walk = c;
        }
    }
    if (best_d < 0)
        return PD_NO_PATH;

    int dirs[PD_CONF_WORLD_MAX_VIA];
    int d = best_d;
    for (size_t i = r->n_via; i > 0; i--) {
        dirs[i - 1] = d;
        d = dp.prev[i - 1][d];
    }
    size_t leg_cap = 0;
    pd_point at = qq->q->start;
    uint32_t scene = qq->s;
    st = PD_OK;
    for (size_t i = 0; i < r->n_via && st == PD_OK; i++) {
        const pd__portal *pp = &w->portals[r->via[i]];
        st = pd__legs_walk(qq, &leg_cap, scene, at, pp->cell[dirs[i]], dp.walk[i][dirs[i]]);
        if (st == PD_OK)
            st = pd__legs_portal(qq, r->via[i], (uint32_t)dirs[i]);
        at = pp->cell[1 - dirs[i]];
        scene = pp->scene[1 - dirs[i]];
    }
    if (st == PD_OK)
        st = pd__legs_walk(qq, &leg_cap, scene, at, qq->q->goal, goal_walk);
    if (st == PD_OK) {
        qq->out->total_cost = best_total;
        qq->out->pinned = 1;
    }
    return st;
}

static const pd__route *pd__pinned_for(const pd_world *w, uint32_t s, uint32_t t)
{
    for (size_t i = 0; i < w->n_routes; i++) {
        if (w->routes[i].from == s && w->routes[i].to == t)
            return &w->routes[i];
    }
    return NULL;
}

void pd_world_route_free(pd_world_route *r)
{
    if (!r)
        return;
    free(r->legs);
    memset(r, 0, sizeof *r);
}

/* Resolves and checks what every query starts with (see pd_world_plan for
 * the order); the goal is checked only when check_goal is set. */
static pd_status pd__query_init(pd__query *qq, const pd_world *w, pd_search_ctx *ctx,
                                const pd_world_query *q, pd_world_route *out, int check_goal)
{
    if (!w || !ctx || !q || !q->from_scene || !q->to_scene)
        return PD_INVALID_ARGUMENT;
    *qq = (pd__query){ .w = w, .ctx = ctx, .q = q, .out = out,
                       .unit = q->unit_size ? q->unit_size : 1 };
    long s = pd__find_scene(w, q->from_scene), t = pd__find_scene(w, q->to_scene);
    if (s < 0 || t < 0)
        return PD_UNKNOWN_SCENE;
    qq->s = (uint32_t)s;
    qq->t = (uint32_t)t;
    qq->ui_s = pd__unit_index(w->scenes[s].scene, qq->unit);
    qq->ui_t = pd__unit_index(w->scenes[t].scene, qq->unit);
    if (qq->ui_s < 0 || qq->ui_t < 0)
        return PD_INVALID_ARGUMENT;
    const pd_grid *gs = w->scenes[s].scene->units[qq->ui_s].grid;
    const pd_grid *gt = w->scenes[t].scene->units[qq->ui_t].grid;
    if (!pd_grid_in_bounds(gs, q->start.x, q->start.y) ||
        (check_goal && !pd_grid_in_bounds(gt, q->goal.x, q->goal.y)))
        return PD_OUT_OF_BOUNDS;
    if (pd_grid_get(gs, q->start.x, q->start.y) == PD_CELL_BLOCKED)
        return PD_START_BLOCKED;
    if (check_goal && pd_grid_get(gt, q->goal.x, q->goal.y) == PD_CELL_BLOCKED)
        return PD_GOAL_BLOCKED;
    return PD_OK;
}

pd_status pd_world_plan(const pd_world *w, pd_search_ctx *ctx, const pd_world_query *q,
                        pd_world_route *out)
{
    if (!out)
        return PD_INVALID_ARGUMENT;
    memset(out, 0, sizeof *out);
    uint64_t t0 = pd_clock_us();
    pd__query qq;
    pd_status st = pd__query_init(&qq, w, ctx, q, out, 1);
    if (st == PD_OK) {
        const pd__route *pinned = pd__pinned_for(w, qq.s, qq.t);
        st = pinned ? pd__plan_pinned(&qq, pinned) : pd__plan_free(&qq);
    }
    if (st != PD_OK) {
        uint64_t searches = out->searches, expanded = out->expanded;
        pd_world_route_free(out);
        out->searches = searches;
        out->expanded = expanded;
    }
    out->micros = pd_clock_us() - t0;
    return st;
}

/* Records one arrival cell (counted always, written while there is room). */
static void pd__arrival(pd_point *out, size_t cap, size_t *n, pd_point c)
{
    if (*n < cap)
        out[*n] = c;
    (*n)++;
}

pd_status pd_world_arrivals(const pd_world *w, pd_search_ctx *ctx, const pd_world_query *q,
                            pd_point *out, size_t cap, size_t *n_out)
{
    if (!n_out || (cap > 0 && !out))
        return PD_INVALID_ARGUMENT;
    *n_out = 0;
    pd_world_route scratch = { 0 };
    pd__query qq;
    pd_status st = pd__query_init(&qq, w, ctx, q, &scratch, 0);
    if (st != PD_OK)
        return st;
    const pd__route *pinned = pd__pinned_for(w, qq.s, qq.t);
    if (pinned) {
        pd__pinned_dp dp;
        st = pd__pinned_forward(&qq, pinned, &dp);
        size_t last = pinned->n_via - 1;
        const pd__portal *pl = &w->portals[pinned->via[last]];
        for (int d = 0; st == PD_OK && d < 2; d++) {
            if (isfinite(dp.best[last][d]) && pl->scene[1 - d] == qq.t)
                pd__arrival(out, cap, n_out, pl->cell[1 - d]);
        }
        return st;
    }
    if (qq.s == qq.t)
        pd__arrival(out, cap, n_out, q->start);
    pd__plan_graph pg = { 0 };
    st = pd__build_graph(&qq, &pg, 0);
    uint32_t start = (uint32_t)(w->n_portals * 2);
    const pd__scene *wt = &w->scenes[qq.t];
    for (size_t i = 0; st == PD_OK && i < wt->n_ends; i++) {
        pd_route_path rp;
        pd_status rs = pd_route_shortest(&pg.g, start, wt->ends[i], NULL, 0, &rp);
        if (rs == PD_OK || rs == PD_BUFFER_TOO_SMALL)
            pd__arrival(out, cap, n_out, pd__end_cell(w, wt->ends[i]));
        else if (rs != PD_NO_PATH)
            st = rs;
    }
    free(pg.info);
    pd_route_graph_free(&pg.g);
    return st;
}

/* ---- the store --------------------------------------------------------- */

struct pd_world_store {
    pthread_mutex_t lock;         /* guards `current` (held only to swap or retain) */
    pthread_mutex_t write_lock;   /* serialises rebuilds and refreshes */
    pd_world *current;
    /* Set when scenes without portals were made or dropped since the last
     * sync: the registry to take them from. The next acquire or refresh
     * syncs once, so a burst of 10,000 CreateInstance costs one O(scenes)
     * world copy instead of one each. */
    _Atomic(pd_registry *) stale;
};

pd_world_store *pd_world_store_create(void)
{
    pd_world_store *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    atomic_init(&s->stale, NULL);
    if (pthread_mutex_init(&s->lock, NULL) != 0) {
        free(s);
        return NULL;
    }
    if (pthread_mutex_init(&s->write_lock, NULL) != 0) {
        pthread_mutex_destroy(&s->lock);
        free(s);
        return NULL;
    }
    return s;
}

void pd_world_store_destroy(pd_world_store *s)
{
    if (!s)
        return;
    pd_world_release(s->current);
    pthread_mutex_destroy(&s->write_lock);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

static pd_status pd__store_sync_locked(pd_world_store *s, pd_registry *r, const pd_world *base,
                                       int drop, char *err, size_t errlen);

/* The current world, retained, without syncing (for holders of write_lock). */
static pd_world *pd__store_current(pd_world_store *s)
{
    pthread_mutex_lock(&s->lock);
    pd_world *w = s->current;
    if (w)
        pd_world_retain(w);
    pthread_mutex_unlock(&s->lock);
    return w;
}

/* With write_lock held: the sync a pd_world_store_mark_stale asked for. */
static void pd__store_catch_up(pd_world_store *s)
{
    pd_registry *r = atomic_exchange(&s->stale, NULL);
    if (r && pd__store_sync_locked(s, r, NULL, 0, NULL, 0) != PD_OK)
        atomic_store(&s->stale, r); /* out of memory: the next caller tries again */
}

pd_world *pd_world_store_acquire(pd_world_store *s)
{
    if (!s)
        return NULL;
    if (atomic_load(&s->stale)) {
        pthread_mutex_lock(&s->write_lock);
        pd__store_catch_up(s);
        pthread_mutex_unlock(&s->write_lock);
    }
    return pd__store_current(s);
}

void pd_world_store_mark_stale(pd_world_store *s, pd_registry *r)
{
    if (s && r)
        atomic_store(&s->stale, r);
}

/* Swaps in w (taking over its reference) and releases the old world outside
 * the lock: its last release may free tables and scenes. */
static void pd__store_publish(pd_world_store *s, pd_world *w)
{
    pthread_mutex_lock(&s->lock);
    pd_world *old = s->current;
    s->current = w;
    pthread_mutex_unlock(&s->lock);
    pd_world_release(old);
}

int pd_world_store_rebuild(pd_world_store *s, const pd_conf_world *cw, pd_registry *r,
                           char *err, size_t errlen)
{
    if (!s || !r) {
        PD__ERR("world: no store or registry");
        return -1;
    }
    pthread_mutex_lock(&s->write_lock);
    pd_world *w = pd_world_build_from_registry(cw, r, err, errlen);
    if (w)
        pd__store_publish(s, w);
    pthread_mutex_unlock(&s->write_lock);
    return w ? 0 : -1;
}

/* Makes the current world (or base, when given) hold exactly the scenes r
 * serves now, with write_lock held; see pd_world_store_mark_stale. */
static pd_status pd__store_sync_locked(pd_world_store *s, pd_registry *r, const pd_world *base,
                                       int drop, char *err, size_t errlen)
{
    pd_world *cur = base ? NULL : pd__store_current(s);
    const pd_world *from = base ? base : cur;
    if (!from) {
        PD__ERR("world: none published yet");
        return PD_INTERNAL;
    }
    pd_scene **list = NULL;
    size_t n = pd_registry_list(r, &list);
    pd_world *next = NULL;
    pd_status st = pd__world_resync(from, list, n, drop, &next, err, errlen);
    pd_registry_release_list(list, n);
    pd_world_release(cur);
    if (st == PD_OK)
        pd__store_publish(s, next);
    return st;
}

/* Whether w holds exactly these snapshots (sorted by name, as w's are). */
static int pd__world_holds(const pd_world *w, pd_scene *const *scenes, size_t n)
{
    if (n != w->n_scenes)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (w->scenes[i].scene != scenes[i])
            return 0;
    return 1;
}

int pd_world_store_publish_reload(pd_world_store *s, pd_registry *r, pd_scene_set *set,
                                  pd_world *w)
{
    if (!s || !r || !set) {
        /* Nothing can be published; drop what the caller handed over. */
        pd_registry_discard(set);
        pd_world_release(w);
        return -1;
    }
    pthread_mutex_lock(&s->write_lock);
    if (pd_registry_publish(r, set) != 0) {
        pthread_mutex_unlock(&s->write_lock);
        pd_world_release(w);
        return -1;
    }
    /* w was built over the set as prepared. The registry may serve more
     * (scenes made at run time, which join with every table copied, as no
     * portal names them) or newer snapshots of kept scenes (updated since
     * the prepare: their tables are computed again). Should that fail, w
     * as built still serves the config. */
    pd_scene **list = NULL;
    size_t n = w ? pd_registry_list(r, &list) : 0;
    int holds = w && pd__world_holds(w, list, n);
    pd_registry_release_list(list, n);
    if (w && (holds || pd__store_sync_locked(s, r, w, 0, NULL, 0) != PD_OK))
        pd__store_publish(s, w);
    else
        pd_world_release(w);
    pthread_mutex_unlock(&s->write_lock);
    return 0;
}

pd_status pd_world_store_drop_scene(pd_world_store *s, pd_registry *r, const char *name,
                                    int drop_portals, uint64_t *version_out, char *err,
                                    size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (version_out)
        *version_out = 0;
    if (!r || !name)
        return PD_INVALID_ARGUMENT;
    if (!s) {
        pd_status st = pd_registry_drop(r, name, version_out);
        if (st != PD_OK)
            PD__ERR("unknown scene '%s'", name);
        return st;
    }
    /* Under write_lock no reload or other change moves the world between
     * the check and the drop. */
    pthread_mutex_lock(&s->write_lock);
    pd_world *cur = pd__store_current(s);
    size_t naming = pd_world_portals_naming(cur, name);
    pd_world_release(cur);
    pd_status st;
    if (naming > 0 && !drop_portals) {
        PD__ERR("scene '%s' is named by %zu portal%s: drop them too (drop_portals) or keep the scene",
                name, naming, naming == 1 ? "" : "s");
        st = PD_SCENE_IN_USE;
    } else if ((st = pd_registry_drop(r, name, version_out)) != PD_OK) {
        PD__ERR("unknown scene '%s'", name);
    } else if (naming == 0) {
        atomic_store(&s->stale, r);
    } else if (pd__store_sync_locked(s, r, NULL, 1, err, errlen) != PD_OK) {
        /* The scene is gone from the registry; the world keeps its old
         * snapshot (and portals) until the next change succeeds. */
        st = PD_OK;
    }
    pthread_mutex_unlock(&s->write_lock);
    return st;
}

pd_status pd_world_store_refresh(pd_world_store *s, pd_registry *r, const char *name,
                                 char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (!s || !r || !name)
        return PD_INVALID_ARGUMENT;
    pthread_mutex_lock(&s->write_lock);
    pd_status st = PD_OK;
    pd__store_catch_up(s);
    pd_world *cur = pd__store_current(s);
    pd_scene *scene = pd_registry_acquire(r, name);
    if (!cur || !scene) {
        PD__ERR("world refresh: unknown scene '%s'", name);
        st = PD_UNKNOWN_SCENE;
    } else if (pd_world_scene(cur, name) != scene) {
        pd_world *n = NULL;
        st = pd_world_refresh_scene(cur, scene, &n, err, errlen);
        if (st == PD_OK)
            pd__store_publish(s, n);
    }
    pd_scene_release(scene);
    pd_world_release(cur);
    pthread_mutex_unlock(&s->write_lock);
    return st;
}
