/*
 * pd_scene.c - scene snapshots and the name -> scene registry.
 *
 * A scene is loaded once from its config entry and never changes after that;
 * sharing is by reference count. The registry keeps the current set as an
 * array sorted by name, guarded by a read-write lock: lookups (every path
 * request) take the read side for a binary search and one atomic increment,
 * and a reload takes the write side only for the pointer swap. All the slow
 * work - reading and parsing maps, dropping the old set's references - happens
 * outside the lock, so a SIGHUP reload never stalls the workers. A reload is
 * two steps, pd_registry_prepare (the slow load, on any thread, touching no
 * registry) and pd_registry_publish (the swap), so the server can load on a
 * background thread and publish on its event loop.
 *
 * Versions: pd_scene_load starts a scene at version 1. When the registry
 * replaces a scene with a new snapshot of the same name (a reload or a cell
 * update), the new one gets the old version + 1, so a version number names
 * one snapshot for as long as the registry lives and clients can tell that
 * the map changed.
 *
 * Derived data: besides the grid, a scene carries what searches need for
 * each unit size it serves - the clearance map (only when a unit larger than
 * one cell is served), one unit grid per size (unit 1 shares the scene grid)
 * and component labels per unit grid. Cell updates copy all of it and repair
 * only the region a change can reach (pd_clearance_update,
 * pd_unit_grid_update, pd_components_update), so the old snapshot stays
 * intact for the searches still running on it.
 *
 * Buffer reuse: on a large map the copy dominates an update, and most of
 * its cost is the kernel handing out fresh pages for every new snapshot. The
 * registry therefore keeps the snapshot an update replaced as a spare, and
 * the next update of a scene with the same shape copies into the spare's
 * buffers when nobody else holds it (its reference count is back to the
 * registry's one). That costs one retired snapshot of memory per registry.
 */
#include "pd_scene.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "pd_jps.h"
#include "pd_mapfile.h"
#include "pd_ldtk.h"
#include "pd_tiled.h"

/* The config may only allow unit sizes the core can build grids for. */
_Static_assert(PD_CONF_MAX_UNIT_SIZE <= PD_UNIT_SIZE_MAX,
               "PD_CONF_MAX_UNIT_SIZE exceeds the core's PD_UNIT_SIZE_MAX");

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

/* Largest map file we read, in bytes: a full PD_GRID_MAX_SIDE square grid
 * (256 Mi cells) with CRLF line ends and a header still fits, anything bigger
 * cannot be a valid map and is refused before we allocate for it. */
#define PD_SCENE_MAX_FILE_BYTES \
    ((size_t)PD_GRID_MAX_SIDE * (PD_GRID_MAX_SIDE + 2) + 64u * 1024u)

struct pd_registry {
    /* Readers (acquire, list) take the read side; the swap takes the write side. */
    pthread_rwlock_t lock;
    /* Serialises whole reloads, so the version hand-over from the old set to
     * the new one cannot interleave with a second reload. */
    pthread_mutex_t reload_lock;
    pd_scene **scenes;          /* sorted by name, one reference each */
    size_t n_scenes;
    /* The snapshot the last update replaced, kept (with the registry's
     * reference) so the next update can write into its buffers instead of
     * allocating fresh ones, once no reader holds it any more. Guarded by
     * reload_lock. */
    pd_scene *spare;
};

/* Frees a scene and everything it owns; also used on half-built scenes.
 * Unit 1's grid is the scene grid itself, so it is freed once, as the grid. */
static void pd__scene_free(pd_scene *s)
{
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
static int pd__scene_after_change(pd_scene *n, uint64_t changed)
{
    if (n->search != PD_CONF_SEARCH_AUTO)
        return 0;
    n->changed_since_pick += changed;
    if (n->changed_since_pick * PD_SCENE_REPICK_FRACTION <= n->passable_cells)
        return 0;
    return pd__scene_pick_search(n);
}

/* Builds what searches need besides the grid: the clearance map (only when a
 * unit larger than one cell is served), one unit grid per allowed size (unit
 * 1 shares the scene grid) with its component labels, and the count of
 * passable cells. Returns 0, or -1 when memory ran out (the caller frees). */
static int pd__scene_derive(pd_scene *s)
{
    int need_clearance = 0;
    for (size_t i = 0; i < s->n_unit_sizes; i++)
        need_clearance |= s->unit_sizes[i] > 1;
    if (need_clearance) {
        s->clearance = pd_clearance_build(s->grid);
        if (!s->clearance)
            return -1;
    }
    for (size_t i = 0; i < s->n_unit_sizes; i++) {
        pd_scene_unit *u = &s->units[i];
        u->unit = s->unit_sizes[i];
        u->grid = u->unit == 1 ? s->grid : pd_unit_grid_build(s->grid, s->clearance, u->unit);
        if (!u->grid)
            return -1;
        u->components = pd_components_build(u->grid);
        if (!u->components)
            return -1;
    }
    s->passable_cells = pd__count_passable(s->grid);
    return pd__scene_pick_search(s);
}

/* Reads a whole map file, refusing anything above `cap` bytes before
 * allocating for it. */
static char *pd__read_file(const char *path, size_t cap, size_t *len, const char *name,
                           char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "scene '%s': %s: cannot open: %s", name, path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "scene '%s': %s: not a regular file", name, path);
        fclose(f);
        return NULL;
    }
    if ((uintmax_t)st.st_size > cap) {
        snprintf(err, errlen, "scene '%s': %s: larger than %zu bytes", name, path, cap);
        fclose(f);
        return NULL;
    }
    size_t size = (size_t)st.st_size;
    char *buf = malloc(size + 1);
    if (!buf) {
        snprintf(err, errlen, "scene '%s': %s: out of memory", name, path);
        fclose(f);
        return NULL;
    }
    /* Asking for one byte more than fstat reported catches a file that changed. */
    size_t n = fread(buf, 1, size + 1, f);
    int failed = ferror(f) || n != size;
    fclose(f);
    if (failed) {
        snprintf(err, errlen, "scene '%s': %s: read error or file changed while reading", name, path);
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

pd_scene *pd_scene_load(const pd_conf_scene *cs, char *err, size_t errlen)
{
    char scratch[1];
    if (!err || errlen == 0) {
        err = scratch;
        errlen = sizeof scratch;
    }
    err[0] = '\0';
    /* The config layer validates these; a hand-built entry gets the same checks. */
    if (cs->name[0] == '\0' || memchr(cs->name, '\0', sizeof cs->name) == NULL) {
        snprintf(err, errlen, "scene: name is empty or unterminated");
        return NULL;
    }
    if (!(isfinite(cs->cell_size) && cs->cell_size > 0.0) || !isfinite(cs->origin_x) ||
        !isfinite(cs->origin_y)) {
        snprintf(err, errlen, "scene '%s': origin must be finite and cell_size finite and > 0",
                 cs->name);
        return NULL;
    }
    if (cs->n_unit_sizes < 1 || cs->n_unit_sizes > PD_CONF_MAX_UNIT_SIZES) {
        snprintf(err, errlen, "scene '%s': needs 1..%d unit sizes", cs->name, PD_CONF_MAX_UNIT_SIZES);
        return NULL;
    }
    for (size_t i = 0; i < cs->n_unit_sizes; i++) {
        if (cs->unit_sizes[i] < 1 || cs->unit_sizes[i] > PD_CONF_MAX_UNIT_SIZE) {
            snprintf(err, errlen, "scene '%s': unit size %u is outside 1..%d", cs->name,
                     (unsigned)cs->unit_sizes[i], PD_CONF_MAX_UNIT_SIZE);
            return NULL;
        }
    }
    if (!cs->map_path || cs->map_path[0] == '\0') {
        snprintf(err, errlen, "scene '%s': no map file", cs->name);
        return NULL;
    }
    if (cs->format != PD_MAP_ASCII && cs->format != PD_MAP_MOVINGAI && cs->format != PD_MAP_TILED &&
        cs->format != PD_MAP_LDTK) {
        snprintf(err, errlen, "scene '%s': unknown map format %d", cs->name, (int)cs->format);
        return NULL;
    }
    const pd_tiled_rules *tr = &cs->tiled;
    if (!memchr(tr->layer, '\0', sizeof tr->layer) ||
        !memchr(tr->blocked_property, '\0', sizeof tr->blocked_property) ||
        !memchr(tr->cost_property, '\0', sizeof tr->cost_property) ||
        !memchr(tr->walkable_property, '\0', sizeof tr->walkable_property)) {
        snprintf(err, errlen, "scene '%s': a tiled layer or property name is unterminated",
                 cs->name);
        return NULL;
    }
    if (cs->format == PD_MAP_TILED && (!tr->blocked_property[0] || !tr->cost_property[0])) {
        snprintf(err, errlen, "scene '%s': tiled blocked and cost property names must not be empty",
                 cs->name);
        return NULL;
    }

    size_t len = 0;
    size_t cap = cs->format == PD_MAP_TILED || cs->format == PD_MAP_LDTK ? PD_TILED_MAX_FILE_BYTES
                                                                         : PD_SCENE_MAX_FILE_BYTES;
    char *buf = pd__read_file(cs->map_path, cap, &len, cs->name, err, errlen);
    if (!buf)
        return NULL;
    pd_grid *grid = NULL;
    pd_parse_error perr = { 0 };
    /* LDtk levels carry their world position: cells, added to the origin. */
    double off_x = 0, off_y = 0;
    if (cs->format == PD_MAP_TILED || cs->format == PD_MAP_LDTK) {
        char msg[256];
        const pd_tiled_origin origin = { .map_path = cs->map_path, .root_dir = cs->root_dir };
        grid = cs->format == PD_MAP_TILED
                   ? pd_tiled_load(buf, len, tr, &origin, msg, sizeof msg)
                   : pd_ldtk_load(buf, len, &cs->ldtk, &off_x, &off_y, msg, sizeof msg);
        free(buf);
        if (!grid) {
            /* "3:7: invalid JSON" reads as file:line:col like the other formats;
             * a JSON path follows the file name after a space. */
            snprintf(err, errlen, "scene '%s': %s:%s%s", cs->name, cs->map_path,
                     (msg[0] >= '0' && msg[0] <= '9') ? "" : " ", msg);
            return NULL;
        }
    } else if (cs->format == PD_MAP_ASCII) {
        grid = pd_map_parse_ascii(buf, len, &perr);
        free(buf);
    } else {
        pd_char_costs costs;
        memcpy(costs.cost, cs->char_cost, sizeof costs.cost);
        memcpy(costs.set, cs->char_cost_set, sizeof costs.set);
        grid = pd_map_parse_movingai_with(buf, len, &costs, &perr);
        free(buf);
    }
    if (!grid) {
        if (perr.line > 0 && perr.column > 0)
            snprintf(err, errlen, "scene '%s': %s:%d:%d: %s", cs->name, cs->map_path, perr.line,
                     perr.column, perr.message);
        else if (perr.line > 0)
            snprintf(err, errlen, "scene '%s': %s:%d: %s", cs->name, cs->map_path, perr.line,
                     perr.message);
        else
            snprintf(err, errlen, "scene '%s': %s: %s", cs->name, cs->map_path, perr.message);
        return NULL;
    }

    pd_scene *s = calloc(1, sizeof *s);
    if (!s) {
        pd_grid_destroy(grid);
        snprintf(err, errlen, "scene '%s': out of memory", cs->name);
        return NULL;
    }
    atomic_init(&s->refs, 1);
    memcpy(s->name, cs->name, sizeof s->name);
    s->grid = grid;
    s->origin_x = cs->origin_x + off_x * cs->cell_size;
    s->origin_y = cs->origin_y + off_y * cs->cell_size;
    s->cell_size = cs->cell_size;
    memcpy(s->unit_sizes, cs->unit_sizes, sizeof s->unit_sizes);
    s->n_unit_sizes = cs->n_unit_sizes;
    s->search = cs->search;
    s->version = 1;
    if (pd__scene_derive(s) != 0) {
        pd__scene_free(s);
        snprintf(err, errlen, "scene '%s': out of memory for unit grids and labels", cs->name);
        return NULL;
    }
    return s;
}

static uint64_t pd__now_micros(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Checks an update against the grid it will be applied to. */
static pd_status pd__validate_update(const pd_grid *g, const pd_scene_update *u)
{
    if (u->op != PD_UPDATE_BLOCK && u->op != PD_UPDATE_PASS && u->op != PD_UPDATE_COST)
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

/* A copy of s with cloned derived data, version s->version + 1 and one
 * reference; NULL when memory ran out. */
static pd_scene *pd__scene_copy(const pd_scene *s)
{
    pd_scene *n = calloc(1, sizeof *n);
    if (!n)
        return NULL;
    atomic_init(&n->refs, 1);
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
        to->unit = from->unit;
        to->pick = from->pick;
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
    atomic_store_explicit(&n->refs, 1, memory_order_relaxed);
    memcpy(n->name, s->name, sizeof n->name);
    n->origin_x = s->origin_x;
    n->origin_y = s->origin_y;
    n->cell_size = s->cell_size;
    memcpy(n->unit_sizes, s->unit_sizes, sizeof n->unit_sizes);
    n->passable_cells = s->passable_cells;
    n->search = s->search;
    n->changed_since_pick = s->changed_since_pick;
    n->version = s->version + 1;
    size_t cells = (size_t)(s->grid->width + 2) * (size_t)(s->grid->height + 2);
    pd_grid_assign(n->grid, s->grid);
    if (s->clearance)
        memcpy(n->clearance->values, s->clearance->values, cells);
    for (size_t i = 0; i < s->n_unit_sizes; i++) {
        const pd_scene_unit *from = &s->units[i];
        pd_scene_unit *to = &n->units[i];
        to->pick = from->pick;
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

/* Repairs the derived data of n after the cells of g in [x0..x1] x [y0..y1]
 * changed. Passability changes touch clearance and labels; cost-only
 * changes touch the unit grids' costs alone. Returns 0 or -1 (memory). */
static int pd__scene_repair(pd_scene *n, int32_t x0, int32_t y0, int32_t x1, int32_t y1,
                            int passability_changed)
{
    if (passability_changed)
        pd__scene_sync_bits(n, x0, y0, x1, y1);
    if (n->clearance && passability_changed)
        pd_clearance_update(n->clearance, n->grid, x0, y0, x1, y1);
    for (size_t i = 0; i < n->n_unit_sizes; i++) {
        pd_scene_unit *u = &n->units[i];
        if (u->unit > 1)
            pd_unit_grid_update(u->grid, n->grid, n->clearance, u->unit, x0, y0, x1, y1);
        if (!passability_changed)
            continue;
        /* Anchors whose footprint reaches into the rectangle are the unit
         * grid cells that may have changed. */
        int32_t ux0 = x0 - (int32_t)(u->unit - 1), uy0 = y0 - (int32_t)(u->unit - 1);
        if (pd_components_update(u->components, u->grid, ux0 < 0 ? 0 : ux0, uy0 < 0 ? 0 : uy0,
                                 x1, y1) != 0) {
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
    uint8_t value;                   /* what every listed cell becomes */
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
    uint8_t *cell = &g->cells[pd_grid_index(g, x, y)];
    uint8_t old = *cell;
    if (old == a->value)
        return PD__CELL_SAME;
    *cell = a->value;
    /* The unit grids' repair reads this flag, and it runs before the update
     * is finished (cell by cell for scattered lists): a costly cell makes
     * the grid weighted the moment it is written. */
    if (a->value > PD_CELL_FREE)
        g->uniform_cost = 0;
    a->changed++;
    a->lost_costly |= old > PD_CELL_FREE;
    pd__box_add(&a->box, x, y);
    if ((old == PD_CELL_BLOCKED) == (a->value == PD_CELL_BLOCKED))
        return PD__CELL_COST;
    a->passability_changed = 1;
    a->passable_delta += a->value == PD_CELL_BLOCKED ? -1 : 1;
    return PD__CELL_PASSABILITY;
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

/* pd_scene_apply_update, optionally writing the new version into *spare (a
 * retired snapshot of the same shape that no one else holds); *spare is set
 * to NULL when it was used, and left for the caller otherwise. */
static pd_status pd__apply_update(const pd_scene *s, const pd_scene_update *u, pd_scene **spare,
                                  pd_scene **out, pd_scene_update_result *res)
{
    uint64_t started = pd__now_micros();
    pd_scene_update_result local;
    if (!res)
        res = &local;
    memset(res, 0, sizeof *res);
    if (out)
        *out = NULL;
    if (!s || !s->grid || !u || !out)
        return PD_INVALID_ARGUMENT;
    res->version = s->version;
    pd_status st = pd__validate_update(s->grid, u);
    if (st != PD_OK)
        return st;

    pd__apply_state a = { .box = { .empty = 1 } };
    a.value = u->op == PD_UPDATE_BLOCK ? PD_CELL_BLOCKED
              : u->op == PD_UPDATE_PASS ? PD_CELL_FREE
                                        : u->cost;
    int per_cell = 0;
    if (!pd__update_plan(s->grid, u, a.value, &per_cell)) {
        /* Nothing would change: no copy, no new version. */
        res->micros = pd__now_micros() - started;
        return PD_OK;
    }

    pd_scene *n;
    if (spare && *spare) {
        n = *spare;
        *spare = NULL;
        if (pd__scene_copy_into(n, s) != 0) {
            pd_scene_release(n);
            return PD_INTERNAL;
        }
    } else if (!(n = pd__scene_copy(s))) {
        return PD_INTERNAL;
    }
    if (u->is_rect) {
        for (int32_t y = u->rect_min.y; y <= u->rect_max.y; y++) {
            for (int32_t x = u->rect_min.x; x <= u->rect_max.x; x++)
                pd__apply_cell(n->grid, x, y, &a);
        }
    } else if (!per_cell) {
        for (size_t i = 0; i < u->n_cells; i++)
            pd__apply_cell(n->grid, u->cells[i].x, u->cells[i].y, &a);
    } else {
        /* Cell by cell, each repaired before the next is applied, so every
         * repair sees exactly one change. */
        for (size_t i = 0; i < u->n_cells; i++) {
            int32_t x = u->cells[i].x, y = u->cells[i].y;
            int change = pd__apply_cell(n->grid, x, y, &a);
            if (change != PD__CELL_SAME &&
                pd__scene_repair(n, x, y, x, y, change == PD__CELL_PASSABILITY) != 0)
                goto fail;
        }
    }
    /* A grid whose last costly cell was overwritten is uniform again; say so
     * before the repair, which reads the flag. */
    if (a.lost_costly && a.value <= PD_CELL_FREE && !n->grid->uniform_cost)
        pd_grid_refresh_uniform(n->grid);
    if (!per_cell &&
        pd__scene_repair(n, a.box.x0, a.box.y0, a.box.x1, a.box.y1, a.passability_changed) != 0)
        goto fail;
    n->passable_cells = (uint64_t)((int64_t)n->passable_cells + a.passable_delta);
    if (pd__scene_after_change(n, a.changed) != 0)
        goto fail;
    res->version = n->version;
    res->cells_changed = a.changed;
    res->micros = pd__now_micros() - started;
    *out = n;
    return PD_OK;
fail:
    pd__scene_free(n);
    return PD_INTERNAL;
}

pd_status pd_scene_apply_update(const pd_scene *s, const pd_scene_update *u, pd_scene **out,
                                pd_scene_update_result *res)
{
    return pd__apply_update(s, u, NULL, out, res);
}

pd_registry *pd_registry_create(void)
{
    pd_registry *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    if (pthread_rwlock_init(&r->lock, NULL) != 0) {
        free(r);
        return NULL;
    }
    if (pthread_mutex_init(&r->reload_lock, NULL) != 0) {
        pthread_rwlock_destroy(&r->lock);
        free(r);
        return NULL;
    }
    return r;
}

static void pd__release_set(pd_scene **scenes, size_t n)
{
    for (size_t i = 0; i < n; i++)
        pd_scene_release(scenes[i]);
    free(scenes);
}

void pd_registry_destroy(pd_registry *r)
{
    if (!r)
        return;
    pd_scene_release(r->spare);
    pd__release_set(r->scenes, r->n_scenes);
    pthread_mutex_destroy(&r->reload_lock);
    pthread_rwlock_destroy(&r->lock);
    free(r);
}

static int pd__cmp_scene_name(const void *a, const void *b)
{
    const pd_scene *sa = *(pd_scene *const *)a;
    const pd_scene *sb = *(pd_scene *const *)b;
    return strcmp(sa->name, sb->name);
}

/* Binary search in a name-sorted set: the index of `name`, or n when absent. */
static size_t pd__find_index(pd_scene *const *scenes, size_t n, const char *name)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, scenes[mid]->name);
        if (c == 0)
            return mid;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return n;
}

/* The scene called `name` in a name-sorted set; NULL when absent. */
static pd_scene *pd__find(pd_scene *const *scenes, size_t n, const char *name)
{
    size_t i = pd__find_index(scenes, n, name);
    return i < n ? scenes[i] : NULL;
}

/* A loaded scene set nobody reads yet: what pd_registry_prepare builds and
 * pd_registry_publish swaps in. */
struct pd_scene_set {
    pd_scene **scenes;          /* sorted by name, one reference each */
    size_t n_scenes;
};

pd_scene_set *pd_registry_prepare(const pd_conf *conf, char *err, size_t errlen)
{
    char scratch[1];
    if (!err || errlen == 0) {
        err = scratch;
        errlen = sizeof scratch;
    }
    err[0] = '\0';
    pd_scene_set *set = calloc(1, sizeof *set);
    if (!set || (conf->n_scenes > 0 && !(set->scenes = calloc(conf->n_scenes, sizeof *set->scenes)))) {
        free(set);
        snprintf(err, errlen, "scenes: out of memory");
        return NULL;
    }
    pd_scene **fresh = set->scenes;
    size_t n = 0;
    for (; n < conf->n_scenes; n++) {
        fresh[n] = pd_scene_load(&conf->scenes[n], err, errlen);
        if (!fresh[n]) {
            pd__release_set(fresh, n);
            free(set);
            return NULL;
        }
    }
    if (n > 1)
        qsort(fresh, n, sizeof *fresh, pd__cmp_scene_name);
    for (size_t i = 1; i < n; i++) {
        if (strcmp(fresh[i - 1]->name, fresh[i]->name) == 0) {
            snprintf(err, errlen, "scene '%s': name given more than once", fresh[i]->name);
            pd__release_set(fresh, n);
            free(set);
            return NULL;
        }
    }
    set->n_scenes = n;
    return set;
}

void pd_registry_discard(pd_scene_set *set)
{
    if (!set)
        return;
    pd__release_set(set->scenes, set->n_scenes);
    free(set);
}

pd_scene *const *pd_scene_set_scenes(const pd_scene_set *set, size_t *n_out)
{
    size_t n = set ? set->n_scenes : 0;
    if (n_out)
        *n_out = n;
    return n ? set->scenes : NULL;
}

void pd_registry_publish(pd_registry *r, pd_scene_set *set)
{
    pd_scene **fresh = set->scenes;
    size_t n = set->n_scenes;
    free(set);

    pthread_mutex_lock(&r->reload_lock);
    /* Only reloads write the set, and they are serialised by reload_lock, so
     * reading the current set here needs no read lock. */
    for (size_t i = 0; i < n; i++) {
        const pd_scene *prev = pd__find(r->scenes, r->n_scenes, fresh[i]->name);
        if (prev)
            fresh[i]->version = prev->version + 1;
    }
    pthread_rwlock_wrlock(&r->lock);
    pd_scene **old = r->scenes;
    size_t old_n = r->n_scenes;
    r->scenes = fresh;
    r->n_scenes = n;
    pthread_rwlock_unlock(&r->lock);
    /* The spare belongs to the old set; the new one starts without. */
    pd_scene *spare = r->spare;
    r->spare = NULL;
    pthread_mutex_unlock(&r->reload_lock);

    /* Readers that still hold old scenes keep them alive by their own references. */
    pd__release_set(old, old_n);
    pd_scene_release(spare);
}

int pd_registry_load(pd_registry *r, const pd_conf *conf, char *err, size_t errlen)
{
    /* Build the complete new set before touching the live one: all or nothing. */
    pd_scene_set *set = pd_registry_prepare(conf, err, errlen);
    if (!set)
        return -1;
    pd_registry_publish(r, set);
    return 0;
}

pd_scene *pd_registry_acquire(pd_registry *r, const char *name)
{
    if (!name)
        return NULL;
    pthread_rwlock_rdlock(&r->lock);
    pd_scene *s = pd__find(r->scenes, r->n_scenes, name);
    if (s)
        pd_scene_retain(s);
    pthread_rwlock_unlock(&r->lock);
    return s;
}

size_t pd_registry_list(pd_registry *r, pd_scene ***out)
{
    *out = NULL;
    pthread_rwlock_rdlock(&r->lock);
    size_t n = r->n_scenes;
    pd_scene **list = n ? malloc(n * sizeof *list) : NULL;
    if (list) {
        for (size_t i = 0; i < n; i++) {
            list[i] = r->scenes[i];
            pd_scene_retain(list[i]);
        }
    }
    pthread_rwlock_unlock(&r->lock);
    if (!list)
        return 0;
    *out = list;
    return n;
}

void pd_registry_release_list(pd_scene **list, size_t n)
{
    pd__release_set(list, n);
}

pd_status pd_registry_update(pd_registry *r, const char *name, const pd_scene_update *u,
                             pd_scene_update_result *res)
{
    pd_scene_update_result local;
    if (!res)
        res = &local;
    memset(res, 0, sizeof *res);
    if (!r || !u)
        return PD_INVALID_ARGUMENT;
    if (!name)
        return PD_UNKNOWN_SCENE;
    /* The reload lock serialises updates with each other and with reloads:
     * each update starts from the version the previous one published, so
     * none is lost. Readers are not held up: they only wait for the swap. */
    pthread_mutex_lock(&r->reload_lock);
    size_t i = pd__find_index(r->scenes, r->n_scenes, name);
    if (i == r->n_scenes) {
        pthread_mutex_unlock(&r->reload_lock);
        return PD_UNKNOWN_SCENE;
    }
    /* Only reloads and updates replace entries, and both hold reload_lock,
     * so this scene stays alive without a reference of our own. */
    pd_scene *old = r->scenes[i];
    /* The spare may be written only when ours is its last reference: the
     * acquire pairs with the release of every reader that let go of it. */
    pd_scene *spare = r->spare, *drop = NULL;
    r->spare = NULL;
    if (spare && !(atomic_load_explicit(&spare->refs, memory_order_acquire) == 1 &&
                   pd__scene_fits(spare, old))) {
        drop = spare;
        spare = NULL;
    }
    pd_scene *next = NULL;
    pd_status st = pd__apply_update(old, u, &spare, &next, res);
    if (st == PD_OK && next) {
        pthread_rwlock_wrlock(&r->lock);
        r->scenes[i] = next;
        pthread_rwlock_unlock(&r->lock);
        /* The replaced snapshot keeps the registry's reference as the next
         * spare; an unused spare is let go. Searches still on the replaced
         * snapshot keep reading it: it is reused only once they are done. */
        if (spare)
            drop = spare;
        r->spare = old;
    } else {
        r->spare = spare;
    }
    pthread_mutex_unlock(&r->reload_lock);
    pd_scene_release(drop);
    return st;
}
