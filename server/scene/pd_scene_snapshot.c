/*
 * pd_scene_snapshot.c - the scene snapshot itself: what one immutable
 * version of a scene holds and how it lives (reference counts, the memory
 * it is charged for, its authored cells, the writer its versions share),
 * and its derived structures: the clearance map, one unit grid and its
 * component labels per unit size, the passable-cell count, the search
 * picked per unit size (pd_scene.h has the contract).
 *
 * A scene snapshot never changes once it is served: a cell update or a
 * reload serves a new snapshot in its place, and sharing is by reference
 * count. Building one is pd_scene_load.c's job, a new version from an
 * update pd_scene_update.c's, serving them pd_scene_registry.c's.
 *
 * Versions: a loaded or created scene starts at version 1. When the
 * registry replaces a scene with a new snapshot of the same name (a reload
 * that builds it again, or a cell update), the new one gets the old
 * version + 1, so a version number names one snapshot for as long as the
 * registry lives and clients can tell that the map changed.
 *
 * Derived data: besides the grid, a scene carries what searches need for
 * each unit size it serves - the clearance map (only when a unit larger than
 * one cell is served), one unit grid per size (unit 1 shares the scene grid)
 * and component labels per unit grid. A load builds them whole
 * (pd__scene_derive); an update repairs only what its change can reach
 * (pd_scene_update.c).
 */
#include "pd_scene.h"
#include "pd_scene_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "pd_jps.h"

void pd__acct_release(pd_scene_acct *a)
{
    if (a && atomic_fetch_sub_explicit(&a->refs, 1, memory_order_acq_rel) == 1)
        free(a);
}

/* Charges s to a (once; s must not be charged yet). */
void pd__charge(pd_scene_acct *a, pd_scene *s)
{
    atomic_fetch_add_explicit(&a->refs, 1, memory_order_relaxed);
    s->acct = a;
    s->charged = pd_scene_own_bytes(s);
    atomic_fetch_add_explicit(&a->bytes, s->charged, memory_order_relaxed);
}

/* Charges s again after its structures were rewritten in place (a reused
 * spare whose labels changed width). */
void pd__recharge(pd_scene *s)
{
    if (!s->acct)
        return;
    uint64_t now = pd_scene_own_bytes(s);
    atomic_fetch_add_explicit(&s->acct->bytes, now, memory_order_relaxed);
    atomic_fetch_sub_explicit(&s->acct->bytes, s->charged, memory_order_relaxed);
    s->charged = now;
}

void pd__authored_release(pd_scene_authored *a)
{
    if (a && atomic_fetch_sub_explicit(&a->refs, 1, memory_order_acq_rel) == 1) {
        pd_grid_destroy(a->grid);
        free(a);
    }
}

pd_scene_authored *pd__authored_retain(pd_scene_authored *a)
{
    if (a)
        atomic_fetch_add_explicit(&a->refs, 1, memory_order_relaxed);
    return a;
}

pd_scene_writer *pd__writer_new(uint64_t spare_min_cells)
{
    pd_scene_writer *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->spare_min_cells = spare_min_cells;
    if (pthread_mutex_init(&l->lock, NULL) != 0) {
        free(l);
        return NULL;
    }
    atomic_init(&l->refs, 1);
    return l;
}

pd_scene_writer *pd__writer_retain(pd_scene_writer *l)
{
    atomic_fetch_add_explicit(&l->refs, 1, memory_order_relaxed);
    return l;
}

void pd__writer_release(pd_scene_writer *l)
{
    if (!l || atomic_fetch_sub_explicit(&l->refs, 1, memory_order_acq_rel) != 1)
        return;
    pd_scene_release(l->spare);
    pthread_mutex_destroy(&l->lock);
    for (size_t i = 0; i < PD_CONF_MAX_UNIT_SIZES; i++)
        pd_components_diff_free(&l->diffs[i]);
    free(l->ops);
    free(l->cells);
    free(l);
}

/* Keeps a copy of the operations that made `version` (lock held), for the
 * next update to replay on the spare beside the label diffs they recorded;
 * without those, or on failure, none are kept (the next update copies
 * instead). */
void pd__writer_keep_ops(pd_scene_writer *l, const pd_scene_update *ops, size_t n_ops,
                                 uint64_t version)
{
    size_t cells = 0;
    for (size_t k = 0; k < n_ops; k++)
        cells += ops[k].is_rect ? 0 : ops[k].n_cells;
    l->ops_version = 0;
    l->n_ops = 0;
    if (!l->diffs_ok)
        return;
    if (n_ops > l->ops_cap) {
        pd_scene_update *grown = realloc(l->ops, n_ops * sizeof *grown);
        if (!grown)
            return;
        l->ops = grown;
        l->ops_cap = n_ops;
    }
    if (cells > l->cells_cap) {
        pd_point *grown = realloc(l->cells, cells * sizeof *grown);
        if (!grown)
            return;
        l->cells = grown;
        l->cells_cap = cells;
    }
    size_t at = 0;
    for (size_t k = 0; k < n_ops; k++) {
        l->ops[k] = ops[k];
        if (ops[k].is_rect)
            continue;
        memcpy(l->cells + at, ops[k].cells, ops[k].n_cells * sizeof *l->cells);
        l->ops[k].cells = l->cells + at;
        at += ops[k].n_cells;
    }
    l->n_ops = n_ops;
    l->ops_version = version;
}

/* Frees a scene and everything it owns; also used on half-built scenes.
 * Unit 1's grid is the scene grid itself, so it is freed once, as the grid.
 * An instance owns none of its structures: it lets go of their owner. */
void pd__scene_free(pd_scene *s)
{
    pd__writer_release(s->writer);
    pd__authored_release(s->authored);
    if (s->acct) {
        atomic_fetch_sub_explicit(&s->acct->bytes, s->charged, memory_order_relaxed);
        pd__acct_release(s->acct);
    }
    if (s->base) {
        pd_scene_release(s->base);
        free(s);
        return;
    }
    for (size_t i = 0; i < PD_CONF_MAX_UNIT_SIZES; i++) {
        if (s->units[i].grid != s->grid)
            pd_grid_destroy(s->units[i].grid);
        pd_components_destroy(s->units[i].components);
    }
    pd_clearance_destroy(s->clearance);
    pd_grid_destroy(s->grid);
    free(s);
}

void pd_scene_retain(pd_scene *s)
{
    /* Relaxed suffices: the caller already holds a reference (or the registry
     * lock), so the object cannot be freed under us. */
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
}

void pd_scene_release(pd_scene *s)
{
    if (!s)
        return;
    /* acq_rel: every earlier use of the scene happens before the free. */
    if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1)
        return;
    pd__scene_free(s);
}

const char *pd_scene_structure_name(pd_scene_structure st)
{
    static const char *const names[PD_SCENE_STRUCTURES] = { "grid", "clearance", "labels", "unit_grids" };
    return (unsigned)st < PD_SCENE_STRUCTURES ? names[st] : "unknown";
}

/* A grid's cells and its passability bitsets. */
static uint64_t pd__grid_bytes(const pd_grid *g)
{
    return (uint64_t)g->stride * (uint64_t)(g->height + 2) + pd_grid_bits_bytes(g);
}

void pd_scene_get_bytes(const pd_scene *s, pd_scene_bytes *out)
{
    memset(out, 0, sizeof *out);
    if (s->grid)
        out->by[PD_SCENE_GRID] = pd__grid_bytes(s->grid);
    if (s->clearance)
        out->by[PD_SCENE_CLEARANCE] = (uint64_t)s->clearance->stride * (uint64_t)(s->clearance->height + 2);
    for (size_t i = 0; i < s->n_unit_sizes; i++) {
        const pd_scene_unit *u = &s->units[i];
        if (u->components)
            out->by[PD_SCENE_LABELS] += pd_components_bytes(u->components);
        if (u->grid && u->grid != s->grid)
            out->by[PD_SCENE_UNIT_GRIDS] += pd__grid_bytes(u->grid);
    }
    for (int st = 0; st < PD_SCENE_STRUCTURES; st++)
        out->total += out->by[st];
}

uint64_t pd_scene_own_bytes(const pd_scene *s)
{
    if (s->base)
        return sizeof *s;
    pd_scene_bytes b;
    pd_scene_get_bytes(s, &b);
    return sizeof *s + b.total;
}

pd_status pd_scene_world_to_cell(const pd_scene *s, double wx, double wy, pd_point *cell)
{
    double fx = floor((wx - s->origin_x) / s->cell_size);
    double fy = floor((wy - s->origin_y) / s->cell_size);
    /* Compare as doubles before converting: a NaN fails both comparisons and
     * a huge value never reaches the (undefined) double -> int conversion. */
    if (!(fx >= 0.0 && fx < (double)s->grid->width && fy >= 0.0 && fy < (double)s->grid->height))
        return PD_OUT_OF_BOUNDS;
    cell->x = (int32_t)fx;
    cell->y = (int32_t)fy;
    return PD_OK;
}

void pd_scene_cell_center(const pd_scene *s, pd_point cell, double *wx, double *wy)
{
    *wx = s->origin_x + ((double)cell.x + 0.5) * s->cell_size;
    *wy = s->origin_y + ((double)cell.y + 0.5) * s->cell_size;
}

int pd_scene_allows_unit(const pd_scene *s, uint32_t unit_size)
{
    for (size_t i = 0; i < s->n_unit_sizes; i++) {
        if (s->unit_sizes[i] == unit_size)
            return 1;
    }
    return 0;
}

const pd_scene_unit *pd_scene_unit_for(const pd_scene *s, uint32_t unit_size)
{
    for (size_t i = 0; i < s->n_unit_sizes; i++) {
        if (s->units[i].unit == unit_size && s->units[i].grid)
            return &s->units[i];
    }
    return NULL;
}

static uint64_t pd__count_passable(const pd_grid *g)
{
    uint64_t n = 0;
    for (int32_t y = 0; y < g->height; y++) {
        const uint8_t *row = g->cells + pd_grid_index(g, 0, y);
        for (int32_t x = 0; x < g->width; x++)
            n += row[x] != PD_CELL_BLOCKED;
    }
    return n;
}

const char *pd_scene_pick_name(pd_scene_pick pick)
{
    return pick == PD_SCENE_PICK_JPS ? "jps" : pick == PD_SCENE_PICK_ASTAR ? "astar" : "default";
}

const char *pd_scene_search_name(pd_conf_search search)
{
    static const char *const names[] = { "default", "auto", "jps", "astar" };
    return (unsigned)search < sizeof names / sizeof *names ? names[search] : "default";
}

/* Resolves the scene's "search" config for every unit size: "auto" times
 * both searches on each unit grid (pd_jps_pick; the seed is fixed, so the
 * sample queries are the same at every measurement of a grid). Returns 0,
 * or -1 when memory ran out. */
static int pd__scene_pick_search(pd_scene *s)
{
    for (size_t i = 0; i < s->n_unit_sizes; i++) {
        pd_scene_unit *u = &s->units[i];
        switch (s->search) {
        case PD_CONF_SEARCH_JPS:
            u->pick = PD_SCENE_PICK_JPS;
            break;
        case PD_CONF_SEARCH_ASTAR:
            u->pick = PD_SCENE_PICK_ASTAR;
            break;
        case PD_CONF_SEARCH_AUTO: {
            pd_jps_pick_result res;
            if (pd_jps_pick(u->grid, 0x9E3779B97F4A7C15ull ^ u->unit, &res) != 0)
                return -1;
            u->pick = res.jps ? PD_SCENE_PICK_JPS : PD_SCENE_PICK_ASTAR;
            break;
        }
        default:
            u->pick = PD_SCENE_PICK_DEFAULT;
            break;
        }
    }
    s->changed_since_pick = 0;
    return 0;
}

/* After an update changed `changed` cells of n: an "auto" scene measures
 * again once the changes add up to a large part of the map
 * (PD_SCENE_REPICK_FRACTION). Returns 0, or -1 when memory ran out. */
int pd__scene_after_change(pd_scene *n, uint64_t changed)
{
    if (n->search != PD_CONF_SEARCH_AUTO)
        return 0;
    n->changed_since_pick += changed;
    if (n->changed_since_pick * PD_SCENE_REPICK_FRACTION <= n->passable_cells)
        return 0;
    return pd__scene_pick_search(n);
}

/* Whether lim's poll says stop (NULL lim or poll: never); its status goes
 * to *st. */
static int pd__stopped(const pd_scene_limits *lim, pd_status *st)
{
    *st = lim && lim->poll ? lim->poll(lim->poll_user) : PD_OK;
    return *st != PD_OK;
}

/* Builds what searches need besides the grid: the clearance map (only when a
 * unit larger than one cell is served), one unit grid per allowed size (unit
 * 1 shares the scene grid) with its component labels, and the count of
 * passable cells, asking lim's poll (lim may be NULL) before each. Returns
 * 0; -1 when memory ran out, -2 when the poll said stop, its status in
 * *stopped (the caller frees). */
int pd__scene_derive(pd_scene *s, const pd_scene_limits *lim, pd_status *stopped)
{
    int need_clearance = 0;
    for (size_t i = 0; i < s->n_unit_sizes; i++)
        need_clearance |= s->unit_sizes[i] > 1;
    if (pd__stopped(lim, stopped))
        return -2;
    if (need_clearance) {
        s->clearance = pd_clearance_build(s->grid);
        if (!s->clearance)
            return -1;
    }
    for (size_t i = 0; i < s->n_unit_sizes; i++) {
        pd_scene_unit *u = &s->units[i];
        u->unit = s->unit_sizes[i];
        if (pd__stopped(lim, stopped))
            return -2;
        u->grid = u->unit == 1 ? s->grid : pd_unit_grid_build(s->grid, s->clearance, u->unit);
        if (!u->grid)
            return -1;
        if (pd__stopped(lim, stopped))
            return -2;
        u->components = pd_components_build(u->grid);
        if (!u->components)
            return -1;
    }
    if (pd__stopped(lim, stopped))
        return -2;
    s->passable_cells = pd__count_passable(s->grid);
    return pd__scene_pick_search(s);
}

const pd_grid *pd_scene_authored_grid(const pd_scene *s)
{
    return s && s->authored ? s->authored->grid : NULL;
}

int pd_scene_set_authored(pd_scene *s, const uint8_t *cells)
{
    pd_scene_authored *a = malloc(sizeof *a);
    if (!a || !(a->grid = pd_grid_create(s->grid->width, s->grid->height))) {
        free(a);
        return -1;
    }
    for (int32_t y = 0; y < s->grid->height; y++)
        memcpy(a->grid->cells + pd_grid_index(a->grid, 0, y), cells + (size_t)y * (size_t)s->grid->width,
               (size_t)s->grid->width);
    pd_grid_refresh_flags(a->grid);
    atomic_init(&a->refs, 1);
    pd__authored_release(s->authored);
    s->authored = a;
    return 0;
}
