/*
 * pd_scene_update.c - applying cell updates: a new version of a scene with
 * the operations applied (block, pass, cost, restore), its derived
 * structures repaired only in the region a change can reach
 * (pd_clearance_update, pd_unit_grid_update, pd_components_update), so the
 * old snapshot stays intact for the searches still running on it.
 *
 * Retired buffers (why an update costs what it changes, not the map): a
 * fresh copy of a 4096 x 4096 scene with units 1-3 moves ~180 MB and takes
 * hundreds of milliseconds. So the versions of one scene share a writer
 * (pd_scene_writer) that keeps the snapshot the last update replaced (the
 * spare) and the operations that update carried. The next update, once no
 * reader holds the spare, replays those operations on it - the same cells
 * and the same local repairs, so it then holds the current version - and
 * applies its own: two local repairs, no copy. Readers keep flat arrays
 * (the search reads cells with no indirection). A spare still held by a
 * reader, one of another shape or one more than a version behind falls back
 * to a copy. Each updated scene above PD_SCENE_SPARE_MIN_CELLS (pd_scene.h) holds one
 * spare: memory for speed, the trade made in docs/ARCHITECTURE.md.
 *
 * Order: a writer's lock keeps one scene's updates in order; updates of
 * different scenes build their versions in parallel and take the registry's
 * lock only to swap the new version in (pd_registry_update_hooked, in
 * pd_scene_registry.c).
 */
#include "pd_scene.h"
#include "pd_scene_internal.h"
#include "pd_clock.h"

#include <stdlib.h>
#include <string.h>

/* A cell-list update is repaired as one rectangle (its changed cells'
 * bounding box) when that box holds at most this many cells per changed
 * cell, or at most PD_SCENE_REPAIR_BOX_MIN_AREA cells in all; otherwise cell
 * by cell. One box is cheapest for clustered cells; for a few cells spread
 * across the map the box would be most of the map, while each single-cell
 * repair touches only about PD_CLEARANCE_CAP^2 cells. */
#define PD_SCENE_REPAIR_BOX_PER_CELL 16u
/* 64 x 64 cells: below this a box repair costs about as much as a few
 * single-cell ones, whatever the list looks like. */
#define PD_SCENE_REPAIR_BOX_MIN_AREA 4096u

static pd_status pd__validate_update(const pd_grid *g, const pd_scene_update *u)
{
    if (u->op != PD_UPDATE_BLOCK && u->op != PD_UPDATE_PASS && u->op != PD_UPDATE_COST &&
        u->op != PD_UPDATE_RESTORE)
        return PD_INVALID_ARGUMENT;
    if (u->op == PD_UPDATE_COST && u->cost < 1)
        return PD_INVALID_ARGUMENT;
    if (u->is_rect) {
        if (u->rect_min.x > u->rect_max.x || u->rect_min.y > u->rect_max.y)
            return PD_INVALID_ARGUMENT;
        if (!pd_grid_in_bounds(g, u->rect_min.x, u->rect_min.y) ||
            !pd_grid_in_bounds(g, u->rect_max.x, u->rect_max.y))
            return PD_OUT_OF_BOUNDS;
        uint64_t area = (uint64_t)(u->rect_max.x - u->rect_min.x + 1) *
                        (uint64_t)(u->rect_max.y - u->rect_min.y + 1);
        return area > PD_SCENE_MAX_UPDATE_CELLS ? PD_INVALID_ARGUMENT : PD_OK;
    }
    if (u->n_cells == 0 || u->n_cells > PD_SCENE_MAX_UPDATE_CELLS || !u->cells)
        return PD_INVALID_ARGUMENT;
    for (size_t i = 0; i < u->n_cells; i++) {
        if (!pd_grid_in_bounds(g, u->cells[i].x, u->cells[i].y))
            return PD_OUT_OF_BOUNDS;
    }
    return PD_OK;
}

/* An inclusive rectangle that grows to cover the points added to it. */
typedef struct pd__box {
    int32_t x0, y0, x1, y1;
    int empty;
} pd__box;

static void pd__box_add(pd__box *b, int32_t x, int32_t y)
{
    if (b->empty) {
        *b = (pd__box){ x, y, x, y, 0 };
        return;
    }
    if (x < b->x0)
        b->x0 = x;
    if (x > b->x1)
        b->x1 = x;
    if (y < b->y0)
        b->y0 = y;
    if (y > b->y1)
        b->y1 = y;
}

/* Gives n the fields of the next version of s (everything but the grid
 * and the derived data, which the caller copies or brings up to date). */
static void pd__scene_header_from(pd_scene *n, const pd_scene *s)
{
    atomic_store_explicit(&n->refs, 1, memory_order_relaxed);
    memcpy(n->name, s->name, sizeof n->name);
    n->origin_x = s->origin_x;
    n->origin_y = s->origin_y;
    n->cell_size = s->cell_size;
    memcpy(n->unit_sizes, s->unit_sizes, sizeof n->unit_sizes);
    n->n_unit_sizes = s->n_unit_sizes;
    n->passable_cells = s->passable_cells;
    n->search = s->search;
    n->changed_since_pick = s->changed_since_pick;
    n->version = s->version + 1;
    n->runtime = s->runtime;
    n->lineage = s->lineage;
    n->template_lineage = s->template_lineage;
    n->from_tiled = s->from_tiled;
    n->tiled_stats = s->tiled_stats;
    n->incarnation = s->incarnation;
    if (n->authored != s->authored) {
        pd__authored_release(n->authored);
        n->authored = pd__authored_retain(s->authored);
    }
    for (size_t i = 0; i < s->n_unit_sizes; i++) {
        n->units[i].unit = s->units[i].unit;
        n->units[i].pick = s->units[i].pick;
    }
}

/* A copy of s with cloned derived data, version s->version + 1 and one
 * reference; NULL when memory ran out. */
static pd_scene *pd__scene_copy(const pd_scene *s)
{
    pd_scene *n = calloc(1, sizeof *n);
    if (!n)
        return NULL;
    pd__scene_header_from(n, s);
    n->grid = pd_grid_clone(s->grid);
    if (!n->grid)
        goto fail;
    if (s->clearance && !(n->clearance = pd_clearance_clone(s->clearance)))
        goto fail;
    for (size_t i = 0; i < s->n_unit_sizes; i++) {
        const pd_scene_unit *from = &s->units[i];
        pd_scene_unit *to = &n->units[i];
        /* A scene not made by pd_scene_load may lack its derived data. */
        if (!from->grid || !from->components || (from->unit > 1 && !n->clearance))
            goto fail;
        to->grid = from->grid == s->grid ? n->grid : pd_grid_clone(from->grid);
        if (!to->grid)
            goto fail;
        to->components = pd_components_clone(from->components);
        if (!to->components)
            goto fail;
    }
    return n;
fail:
    pd__scene_free(n);
    return NULL;
}

/* Whether a retired snapshot has the shape of s (a reload may change the
 * grid size or the unit sizes of a name), so s can be copied into it. */
static int pd__scene_fits(const pd_scene *spare, const pd_scene *s)
{
    if (spare->base)
        return 0; /* an instance owns no buffers to write into */
    if (spare->grid->width != s->grid->width || spare->grid->height != s->grid->height ||
        spare->n_unit_sizes != s->n_unit_sizes || (spare->clearance != NULL) != (s->clearance != NULL))
        return 0;
    for (size_t i = 0; i < s->n_unit_sizes; i++) {
        if (spare->units[i].unit != s->units[i].unit || !spare->units[i].grid ||
            !spare->units[i].components || !s->units[i].grid || !s->units[i].components)
            return 0;
    }
    return 1;
}

/* Overwrites n - a retired snapshot of the same shape that no one else
 * holds - with a copy of s, as pd__scene_copy would make it. Returns 0, or
 * -1 when the labels changed width and the memory for them ran out (n must
 * then be released). */
static int pd__scene_copy_into(pd_scene *n, const pd_scene *s)
{
    pd__scene_header_from(n, s);
    size_t cells = (size_t)(s->grid->width + 2) * (size_t)(s->grid->height + 2);
    pd_grid_assign(n->grid, s->grid);
    if (s->clearance)
        memcpy(n->clearance->values, s->clearance->values, cells);
    for (size_t i = 0; i < s->n_unit_sizes; i++) {
        const pd_scene_unit *from = &s->units[i];
        pd_scene_unit *to = &n->units[i];
        if (from->grid != s->grid)
            pd_grid_assign(to->grid, from->grid);
        if (pd_components_assign(to->components, from->components) != 0)
            return -1;
    }
    return 0;
}

/* The scene grid's passability bitsets after its cells in [x0..x1] x
 * [y0..y1] were written: only the bits whose cells changed flip (the unit
 * grids' bits follow inside pd_unit_grid_update). The jump point search
 * reads these bits, so they must be exact before the snapshot is
 * published. */
static void pd__scene_sync_bits(pd_scene *n, int32_t x0, int32_t y0, int32_t x1, int32_t y1)
{
    pd_grid_sync_bits(n->grid, x0, y0, x1, y1);
}

/* What an update's repairs do with the labels: repair them, recording
 * what they write per unit size into record (when set); or, bringing a
 * spare up to date, leave them to the diffs recorded before (skip). */
typedef struct pd__label_mode {
    pd_components_diff *record;
    int skip;
    int failed;                      /* a record is incomplete */
} pd__label_mode;

/* Repairs the derived data of n after the cells of g in [x0..x1] x [y0..y1]
 * changed. Passability changes touch clearance and labels; cost-only
 * changes touch the unit grids' costs alone. lm may be NULL (labels
 * repaired, nothing recorded). Returns 0 or -1 (memory). */
static int pd__scene_repair(pd_scene *n, int32_t x0, int32_t y0, int32_t x1, int32_t y1,
                            int passability_changed, pd__label_mode *lm)
{
    if (passability_changed)
        pd__scene_sync_bits(n, x0, y0, x1, y1);
    if (n->clearance && passability_changed)
        pd_clearance_update(n->clearance, n->grid, x0, y0, x1, y1);
    for (size_t i = 0; i < n->n_unit_sizes; i++) {
        pd_scene_unit *u = &n->units[i];
        if (u->unit > 1)
            pd_unit_grid_update(u->grid, n->grid, n->clearance, u->unit, x0, y0, x1, y1);
        if (!passability_changed || (lm && lm->skip))
            continue;
        /* Anchors whose footprint reaches into the rectangle are the unit
         * grid cells that may have changed. */
        int32_t ux0 = x0 - (int32_t)(u->unit - 1), uy0 = y0 - (int32_t)(u->unit - 1);
        if (pd_components_update_diff(u->components, u->grid, ux0 < 0 ? 0 : ux0, uy0 < 0 ? 0 : uy0,
                                      x1, y1, lm && lm->record ? &lm->record[i] : NULL) != 0) {
            if (lm)
                lm->failed = 1;
            /* The labels are no longer trustworthy; a full build is. */
            pd_components_destroy(u->components);
            u->components = pd_components_build(u->grid);
            if (!u->components)
                return -1;
        }
    }
    return 0;
}

/* What applying the update's cells did so far. */
typedef struct pd__apply_state {
    uint8_t value;                   /* what every listed cell becomes, */
    const pd_grid *restore;          /* unless this is set (PD_UPDATE_RESTORE): then
                                        what this authored grid holds there */
    uint64_t changed;
    int64_t passable_delta;
    int passability_changed;
    int lost_costly;                 /* a cell costing more than 1 was overwritten */
    pd__box box;                     /* changed cells */
} pd__apply_state;

/* What setting one cell did. */
enum { PD__CELL_SAME = 0, PD__CELL_COST = 1, PD__CELL_PASSABILITY = 2 };

/* Sets one cell of g and records the change in a. */
static int pd__apply_cell(pd_grid *g, int32_t x, int32_t y, pd__apply_state *a)
{
    size_t at = pd_grid_index(g, x, y);
    uint8_t *cell = &g->cells[at];
    uint8_t old = *cell;
    uint8_t value = a->restore ? a->restore->cells[at] : a->value;
    if (old == value)
        return PD__CELL_SAME;
    *cell = value;
    /* The unit grids' repair reads this flag, and it runs before the update
     * is finished (cell by cell for scattered lists): a costly cell makes
     * the grid weighted the moment it is written. */
    if (value > PD_CELL_FREE)
        g->uniform_cost = 0;
    a->changed++;
    a->lost_costly |= old > PD_CELL_FREE;
    pd__box_add(&a->box, x, y);
    if ((old == PD_CELL_BLOCKED) == (value == PD_CELL_BLOCKED))
        return PD__CELL_COST;
    a->passability_changed = 1;
    a->passable_delta += value == PD_CELL_BLOCKED ? -1 : 1;
    return PD__CELL_PASSABILITY;
}

/* Tells the caller where the version changed (b holds every changed cell). */
static void pd__box_to_result(const pd__box *b, pd_scene_update_result *res)
{
    res->changed_min = (pd_point){ b->x0, b->y0 };
    res->changed_max = (pd_point){ b->x1, b->y1 };
}

/* Decides, before copying anything, whether the update changes any cell,
 * and for a cell list whether to repair it as one box (see
 * PD_SCENE_REPAIR_BOX_PER_CELL). */
static int pd__update_plan(const pd_grid *g, const pd_scene_update *u, uint8_t value, int *per_cell)
{
    *per_cell = 0;
    if (u->is_rect) {
        for (int32_t y = u->rect_min.y; y <= u->rect_max.y; y++) {
            const uint8_t *row = g->cells + pd_grid_index(g, 0, y);
            for (int32_t x = u->rect_min.x; x <= u->rect_max.x; x++) {
                if (row[x] != value)
                    return 1;
            }
        }
        return 0;
    }
    pd__box box = { .empty = 1 };
    uint64_t would_change = 0;
    for (size_t i = 0; i < u->n_cells; i++) {
        if (pd_grid_get(g, u->cells[i].x, u->cells[i].y) != value) {
            would_change++;
            pd__box_add(&box, u->cells[i].x, u->cells[i].y);
        }
    }
    if (would_change == 0)
        return 0;
    uint64_t area = (uint64_t)(box.x1 - box.x0 + 1) * (uint64_t)(box.y1 - box.y0 + 1);
    *per_cell = area > PD_SCENE_REPAIR_BOX_MIN_AREA &&
                area > PD_SCENE_REPAIR_BOX_PER_CELL * would_change;
    return 1;
}

/* Gives n (the next version of s) the authored state: s's, or - at a
 * scene's first update - a copy of s's grid, which is that state. */
static int pd__ensure_authored(pd_scene *n, const pd_scene *s)
{
    if (n->authored)
        return 0;
    pd_scene_authored *a = malloc(sizeof *a);
    if (!a || !(a->grid = pd_grid_clone(s->grid))) {
        free(a);
        return -1;
    }
    atomic_init(&a->refs, 1);
    n->authored = a;
    return 0;
}

/* Applies ops in order to n (a private snapshot holding the version they
 * apply to), each repaired over the cells it changed - a scattered list
 * cell by cell (PD_SCENE_REPAIR_BOX_PER_CELL) - so every repair sees the
 * grid the earlier operations left. Adds the cells changed to *changed,
 * the passable cells gained to *delta and, when all is set, the changed
 * cells to that box. Returns 0, or -1 when memory ran
 * out (n must then be released). */
static int pd__apply_ops(pd_scene *n, const pd_scene_update *ops, size_t n_ops, uint64_t *changed,
                         int64_t *delta, pd__label_mode *lm, pd__box *all)
{
    for (size_t k = 0; k < n_ops; k++) {
        const pd_scene_update *u = &ops[k];
        pd__apply_state a = { .box = { .empty = 1 } };
        a.value = u->op == PD_UPDATE_BLOCK ? PD_CELL_BLOCKED : u->op == PD_UPDATE_COST ? u->cost : PD_CELL_FREE;
        a.restore = u->op == PD_UPDATE_RESTORE ? n->authored->grid : NULL;
        int per_cell = 0;
        if (!u->is_rect) {
            pd__box box = { .empty = 1 };
            for (size_t i = 0; i < u->n_cells; i++)
                pd__box_add(&box, u->cells[i].x, u->cells[i].y);
            uint64_t area = (uint64_t)(box.x1 - box.x0 + 1) * (uint64_t)(box.y1 - box.y0 + 1);
            per_cell = area > PD_SCENE_REPAIR_BOX_MIN_AREA && area > PD_SCENE_REPAIR_BOX_PER_CELL * u->n_cells;
        }
        if (u->is_rect) {
            for (int32_t y = u->rect_min.y; y <= u->rect_max.y; y++)
                for (int32_t x = u->rect_min.x; x <= u->rect_max.x; x++)
                    pd__apply_cell(n->grid, x, y, &a);
        } else {
            for (size_t i = 0; i < u->n_cells; i++) {
                int32_t x = u->cells[i].x, y = u->cells[i].y;
                int change = pd__apply_cell(n->grid, x, y, &a);
                if (per_cell && change != PD__CELL_SAME) {
                    if (a.lost_costly && !n->grid->uniform_cost)
                        pd_grid_refresh_uniform(n->grid);
                    if (pd__scene_repair(n, x, y, x, y, change == PD__CELL_PASSABILITY, lm) != 0)
                        return -1;
                }
            }
        }
        if (!per_cell && !a.box.empty) {
            /* A grid whose last costly cell was overwritten is uniform
             * again; the repair reads the flag. The bitsets follow in the
             * repair, over the box. */
            if (a.lost_costly && !n->grid->uniform_cost)
                pd_grid_refresh_uniform(n->grid);
            if (pd__scene_repair(n, a.box.x0, a.box.y0, a.box.x1, a.box.y1, a.passability_changed, lm) != 0)
                return -1;
        }
        *changed += a.changed;
        *delta += a.passable_delta;
        if (all && !a.box.empty) {
            pd__box_add(all, a.box.x0, a.box.y0);
            pd__box_add(all, a.box.x1, a.box.y1);
        }
    }
    return 0;
}

/* A private snapshot holding s's state, for the next version to be written
 * into: the writer's spare brought up to date when it can be - no reader
 * holds it, it has s's shape, and it holds s's version, or the one before
 * whose operations the writer kept (replayed: the same cells, the same
 * local repairs of grids and clearance, and the labels those repairs wrote
 * then, from their diffs) - else the spare overwritten with a copy, else a fresh
 * copy. Its header is s's next version's. NULL when memory ran out. l may
 * be NULL (no writer: a fresh copy); its lock is held. */
static pd_scene *pd__scene_for_next(const pd_scene *s, pd_scene_writer *l)
{
    pd_scene *n = l ? l->spare : NULL;
    if (!n)
        return pd__scene_copy(s);
    l->spare = NULL;
    /* The acquire pairs with the release of every reader that let go. */
    if (atomic_load_explicit(&n->refs, memory_order_acquire) != 1 || !pd__scene_fits(n, s)) {
        pd_scene_release(n);
        return pd__scene_copy(s);
    }
    int behind = l->spare_at + 1 == s->version && l->ops_version == s->version;
    if (l->spare_at == s->version || behind) {
        pd__scene_header_from(n, s);
        uint64_t changed = 0;
        int64_t delta = 0;
        pd__label_mode from_diffs = { NULL, 1, 0 };
        int ok = !behind || pd__apply_ops(n, l->ops, l->n_ops, &changed, &delta, &from_diffs, NULL) == 0;
        for (size_t i = 0; behind && ok && i < s->n_unit_sizes; i++)
            ok = pd_components_apply_diff(n->units[i].components, &l->diffs[i]) == 0;
        if (ok)
            return n;
    } else if (pd__scene_copy_into(n, s) == 0) {
        return n;
    }
    pd_scene_release(n);
    return NULL;
}

/* Builds the next version of s with ops applied (see pd_scene_apply_updates)
 * into the writer's spare when l allows (its lock held), else a copy. An
 * update that changed nothing makes no version and leaves what it wrote
 * into - now s's state - as l's spare. */
pd_status pd__apply_updates(const pd_scene *s, const pd_scene_update *ops, size_t n_ops,
                                   pd_scene_writer *l, pd_scene **out, pd_scene_update_result *res)
{
    uint64_t started = pd_clock_us();
    pd_scene_update_result local;
    if (!res)
        res = &local;
    memset(res, 0, sizeof *res);
    if (out)
        *out = NULL;
    if (!s || !s->grid || !ops || !out || n_ops < 1 || n_ops > PD_SCENE_MAX_UPDATE_OPS)
        return PD_INVALID_ARGUMENT;
    res->version = s->version;
    res->incarnation = s->incarnation;
    for (size_t k = 0; k < n_ops; k++) {
        pd_status st = pd__validate_update(s->grid, &ops[k]);
        if (st != PD_OK)
            return st;
    }
    int per_cell;
    if (n_ops == 1 && ops[0].op != PD_UPDATE_RESTORE &&
        !pd__update_plan(s->grid, &ops[0],
                         ops[0].op == PD_UPDATE_BLOCK ? PD_CELL_BLOCKED
                         : ops[0].op == PD_UPDATE_PASS ? PD_CELL_FREE
                                                       : ops[0].cost,
                         &per_cell)) {
        /* Nothing would change: no copy, no new version. */
        res->micros = pd_clock_us() - started;
        return PD_OK;
    }
    pd_scene *n = pd__scene_for_next(s, l);
    if (!n)
        return PD_INTERNAL;
    uint64_t changed = 0;
    int64_t delta = 0;
    /* The writer's diffs were read above (the spare caught up); from here
     * they record this update's label writes, for the next. */
    pd__label_mode record = { NULL, 0, 0 };
    if (l) {
        l->ops_version = 0;
        for (size_t i = 0; i < s->n_unit_sizes; i++)
            l->diffs[i].n = 0;
        record.record = l->diffs;
    }
    pd__box all = { .empty = 1 };
    int applied = pd__ensure_authored(n, s) == 0 &&
                  pd__apply_ops(n, ops, n_ops, &changed, &delta, &record, &all) == 0;
    if (l)
        l->diffs_ok = !record.failed;
    if (!applied)
        goto fail;
    if (changed == 0) {
        /* Nothing changed: no version. What it wrote into holds s now. */
        if (l && s->grid->width * (uint64_t)s->grid->height > l->spare_min_cells) {
            l->spare = n;
            l->spare_at = s->version;
        } else {
            pd_scene_release(n);
        }
        res->micros = pd_clock_us() - started;
        return PD_OK;
    }
    n->passable_cells = (uint64_t)((int64_t)n->passable_cells + delta);
    if (pd__scene_after_change(n, changed) != 0)
        goto fail;
    res->version = n->version;
    res->incarnation = n->incarnation;
    res->cells_changed = changed;
    pd__box_to_result(&all, res);
    res->micros = pd_clock_us() - started;
    *out = n;
    return PD_OK;
fail:
    pd_scene_release(n);
    return PD_INTERNAL;
}

pd_status pd__apply_chain(const pd_scene *s, pd_registry_chain_item *items, size_t n, pd_scene_writer *l,
                          pd_scene **out)
{
    uint64_t started = pd_clock_us();
    *out = NULL;
    int any = 0;
    for (size_t k = 0; k < n; k++) {
        pd_registry_chain_item *it = &items[k];
        memset(&it->res, 0, sizeof it->res);
        it->res.version = s->version;
        it->res.incarnation = s->incarnation;
        it->status = it->ops && it->n_ops >= 1 && it->n_ops <= PD_SCENE_MAX_UPDATE_OPS ? PD_OK : PD_INVALID_ARGUMENT;
        for (size_t i = 0; it->status == PD_OK && i < it->n_ops; i++)
            it->status = pd__validate_update(s->grid, &it->ops[i]);
        any |= it->status == PD_OK;
    }
    if (!any)
        return PD_OK;
    pd_scene *n_ = pd__scene_for_next(s, l);
    if (l) {
        /* Nothing is recorded for the next update: the spare this leaves
         * holds a version several before the one served, so it is
         * overwritten with a copy rather than replayed. */
        l->ops_version = 0;
        l->diffs_ok = 0;
    }
    if (!n_ || pd__ensure_authored(n_, s) != 0)
        goto fail;
    uint64_t version = s->version, total = 0;
    int64_t delta = 0;
    for (size_t k = 0; k < n; k++) {
        pd_registry_chain_item *it = &items[k];
        if (it->status != PD_OK)
            continue;
        uint64_t changed = 0;
        pd__label_mode lm = { NULL, 0, 0 };
        pd__box box = { .empty = 1 };
        if (pd__apply_ops(n_, it->ops, it->n_ops, &changed, &delta, &lm, &box) != 0)
            goto fail;
        if (changed) {
            it->res.version = ++version;
            it->res.cells_changed = changed;
            pd__box_to_result(&box, &it->res);
        } else {
            it->res.version = version;
        }
        total += changed;
        it->res.micros = pd_clock_us() - started;
    }
    if (total == 0) {
        pd_scene_release(n_);
        return PD_OK;
    }
    n_->version = version;
    n_->passable_cells = (uint64_t)((int64_t)n_->passable_cells + delta);
    if (pd__scene_after_change(n_, total) != 0)
        goto fail;
    *out = n_;
    return PD_OK;
fail:
    pd_scene_release(n_);
    for (size_t k = 0; k < n; k++) {
        if (items[k].status == PD_OK) {
            items[k].status = PD_INTERNAL;
            items[k].res.version = s->version;
            items[k].res.cells_changed = 0;
        }
    }
    return PD_INTERNAL;
}

pd_status pd_scene_apply_updates(const pd_scene *s, const pd_scene_update *ops, size_t n_ops,
                                 pd_scene **out, pd_scene_update_result *res)
{
    return pd__apply_updates(s, ops, n_ops, NULL, out, res);
}

pd_status pd_scene_apply_update(const pd_scene *s, const pd_scene_update *u, pd_scene **out,
                                pd_scene_update_result *res)
{
    return pd__apply_updates(s, u, 1, NULL, out, res);
}
