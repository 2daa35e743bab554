/*
 * pd_scene.c - scene snapshots and the name -> scene registry.
 *
 * A scene snapshot never changes once it is served: a cell update or a
 * reload serves a new snapshot in its place (see Versions below), and
 * sharing is by reference count. The registry keeps the current set as an
 * array sorted by name, guarded by a read-write lock: lookups (every path
 * request) take the read side for a binary search and one atomic increment,
 * and a reload takes the write side only for the pointer swap. All the slow
 * work - reading and parsing maps, dropping the old set's references - happens
 * outside the lock, so a SIGHUP reload never stalls the workers. A reload is
 * two steps, pd_registry_prepare (the slow load, on any thread, touching no
 * registry) and pd_registry_publish (the swap), so the server can load on a
 * background thread and publish on its event loop. A reload's prepare
 * (pd_registry_prepare_reload) keeps a config scene whose definition did
 * not change - the grid its map parses to equals the cells it was loaded
 * with, and its placement, unit sizes and search are the same - rather
 * than building it again, so its version and its updates stay.
 *
 * Versions: pd_scene_load starts a scene at version 1. When the registry
 * replaces a scene with a new snapshot of the same name (a reload that
 * builds it again, or a cell update), the new one gets the old version + 1,
 * so a version number names one snapshot for as long as the registry lives
 * and clients can tell that the map changed.
 *
 * Derived data: besides the grid, a scene carries what searches need for
 * each unit size it serves - the clearance map (only when a unit larger than
 * one cell is served), one unit grid per size (unit 1 shares the scene grid)
 * and component labels per unit grid. A cell update writes a private
 * snapshot and repairs only the region a change can reach
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
 * lock only to swap the new version in.
 */
#include "pd_scene.h"
#include "pd_clock.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "pd_index.h"
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
     * the new one cannot interleave with a second reload, and every change
     * of the set (an update's swap included). */
    pthread_mutex_t reload_lock;
    /* The served scenes, one reference each: scenes[0, n_sorted) sorted by
     * name, then those added since, in the order they came; a dropped one
     * leaves NULL until the next sort (pd__registry_sort). A scene is found
     * by its name through `index`, so adding, finding and dropping one
     * cost the same with ten scenes or a million. Changed under both
     * locks; read under either. */
    pd_scene **scenes;
    size_t n_slots;             /* entries of scenes[] in use, NULL ones included */
    size_t cap_slots;
    size_t n_sorted;
    size_t n_scenes;            /* the entries that are not NULL */
    size_t unsorted;            /* adds and drops since the last sort */
    uint32_t *index;            /* open addressing, linear probing by the name's hash:
                                   0 empty, else 1 + the scenes[] entry; at most half
                                   full */
    size_t index_cap;           /* a power of two; 0 before the first scene */
    uint64_t work;              /* guarded by reload_lock: pd_registry_work */
    pd_registry_caps caps;      /* guarded by reload_lock */
    atomic_int loads_stopped;   /* pd_registry_stop_loads */
    uint64_t spare_min_cells;   /* guarded by reload_lock; see pd_registry_set_spare_min_cells */
    struct pd_scene_acct *acct; /* what every snapshot charged here holds */
};

/* A registry's memory count. Snapshots outlive the registry's hold on them
 * (searches, instances, the world), so each charged snapshot keeps the
 * count alive by a reference and takes its bytes back when it is freed. */
typedef struct pd_scene_acct {
    atomic_uint_fast32_t refs;
    atomic_uint_fast64_t bytes;
} pd_scene_acct;

static void pd__acct_release(pd_scene_acct *a)
{
    if (a && atomic_fetch_sub_explicit(&a->refs, 1, memory_order_acq_rel) == 1)
        free(a);
}

/* Charges s to a (once; s must not be charged yet). */
static void pd__charge(pd_scene_acct *a, pd_scene *s)
{
    atomic_fetch_add_explicit(&a->refs, 1, memory_order_relaxed);
    s->acct = a;
    s->charged = pd_scene_own_bytes(s);
    atomic_fetch_add_explicit(&a->bytes, s->charged, memory_order_relaxed);
}

/* Charges s again after its structures were rewritten in place (a reused
 * spare whose labels changed width). */
static void pd__recharge(pd_scene *s)
{
    if (!s->acct)
        return;
    uint64_t now = pd_scene_own_bytes(s);
    atomic_fetch_add_explicit(&s->acct->bytes, now, memory_order_relaxed);
    atomic_fetch_sub_explicit(&s->acct->bytes, s->charged, memory_order_relaxed);
    s->charged = now;
}

/* The cells a scene was loaded or created with, which PD_UPDATE_RESTORE
 * puts back: shared by every version of one scene, made at its first
 * update (until then its grid is its authored state). */
typedef struct pd_scene_authored {
    atomic_uint_fast32_t refs;
    pd_grid *grid;
} pd_scene_authored;

static void pd__authored_release(pd_scene_authored *a)
{
    if (a && atomic_fetch_sub_explicit(&a->refs, 1, memory_order_acq_rel) == 1) {
        pd_grid_destroy(a->grid);
        free(a);
    }
}

static pd_scene_authored *pd__authored_retain(pd_scene_authored *a)
{
    if (a)
        atomic_fetch_add_explicit(&a->refs, 1, memory_order_relaxed);
    return a;
}

/* What the registry's updates of one scene share (see the top of this
 * file). Every version that points to it holds a reference; the spare it
 * keeps holds none (its writer is NULL while it waits), so a writer goes
 * when its last version does, and takes the spare with it. */
typedef struct pd_scene_writer {
    atomic_uint_fast32_t refs;
    pthread_mutex_t lock;            /* one update of the scene at a time, in order */
    uint64_t spare_min_cells;        /* a scene of more cells keeps a spare */
    pd_scene *spare;                 /* a retired version to write the next into, or NULL */
    uint64_t spare_at;               /* the version whose state the spare holds */
    uint64_t ops_version;            /* the version the kept operations made (0: none) */
    pd_scene_update *ops;            /* those operations, copied */
    size_t n_ops, ops_cap;
    pd_point *cells;                 /* their cell lists, one after the other */
    size_t cells_cap;
    /* What those operations wrote into each unit size's labels (the same
     * order as the scene's units), so the spare takes the labels as they
     * are, without running the floods again; diffs_ok when complete. */
    pd_components_diff diffs[PD_CONF_MAX_UNIT_SIZES];
    int diffs_ok;
} pd_scene_writer;

static void pd__scene_free(pd_scene *s);

static pd_scene_writer *pd__writer_new(uint64_t spare_min_cells)
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

static pd_scene_writer *pd__writer_retain(pd_scene_writer *l)
{
    atomic_fetch_add_explicit(&l->refs, 1, memory_order_relaxed);
    return l;
}

static void pd__writer_release(pd_scene_writer *l)
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
static void pd__writer_keep_ops(pd_scene_writer *l, const pd_scene_update *ops, size_t n_ops,
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
static void pd__scene_free(pd_scene *s)
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
static int pd__scene_after_change(pd_scene *n, uint64_t changed)
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
static int pd__scene_derive(pd_scene *s, const pd_scene_limits *lim, pd_status *stopped)
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

/* The checks every scene entry passes, from the config or from a request;
 * the config layer makes them too, a hand-built entry gets them here.
 * Returns 0, or -1 with the reason in err. */
static int pd__check_entry(const pd_conf_scene *cs, char *err, size_t errlen)
{
    if (cs->name[0] == '\0' || memchr(cs->name, '\0', sizeof cs->name) == NULL) {
        snprintf(err, errlen, "scene: name is empty or unterminated");
        return -1;
    }
    if (!(isfinite(cs->cell_size) && cs->cell_size > 0.0) || !isfinite(cs->origin_x) ||
        !isfinite(cs->origin_y)) {
        snprintf(err, errlen, "scene '%s': origin must be finite and cell_size finite and > 0",
                 cs->name);
        return -1;
    }
    if (cs->n_unit_sizes < 1 || cs->n_unit_sizes > PD_CONF_MAX_UNIT_SIZES) {
        snprintf(err, errlen, "scene '%s': needs 1..%d unit sizes", cs->name, PD_CONF_MAX_UNIT_SIZES);
        return -1;
    }
    for (size_t i = 0; i < cs->n_unit_sizes; i++) {
        if (cs->unit_sizes[i] < 1 || cs->unit_sizes[i] > PD_CONF_MAX_UNIT_SIZE) {
            snprintf(err, errlen, "scene '%s': unit size %u is outside 1..%d", cs->name,
                     (unsigned)cs->unit_sizes[i], PD_CONF_MAX_UNIT_SIZE);
            return -1;
        }
    }
    return 0;
}

/* Lineages handed out so far (pd_scene.lineage): each build takes the next. */
static atomic_uint_fast64_t pd__lineages;

static uint64_t pd__new_lineage(void)
{
    return atomic_fetch_add_explicit(&pd__lineages, 1, memory_order_relaxed) + 1;
}

/* 0 when grid has a walkable cell, else -1 with the reason (see
 * pd_scene_check_walkable); tiled: a Tiled map's stats, or NULL. */
static int pd__check_walkable(const char *name, const char *where, const pd_grid *grid,
                              const pd_tiled_stats *tiled, char *err, size_t errlen)
{
    for (int32_t y = 0; y < grid->height; y++) {
        const uint8_t *row = grid->cells + pd_grid_index(grid, 0, y);
        for (int32_t x = 0; x < grid->width; x++) {
            if (row[x] != PD_CELL_BLOCKED)
                return 0;
        }
    }
    char why[PD_TILED_STATS_LAYERS + 256];
    if (tiled)
        pd_tiled_stats_format(tiled, why, sizeof why);
    else
        snprintf(why, sizeof why, "all %d x %d cells are blocked", (int)grid->width,
                 (int)grid->height);
    snprintf(err, errlen, "scene '%s': %s%sno walkable cell: %s", name, where ? where : "",
             where ? ": " : "", why);
    return -1;
}

int pd_scene_check_walkable(const pd_scene *s, const char *where, char *err, size_t errlen)
{
    char scratch[1];
    if (!err || errlen == 0) {
        err = scratch;
        errlen = sizeof scratch;
    }
    return pd__check_walkable(s->name, where, s->grid, s->from_tiled ? &s->tiled_stats : NULL, err,
                              errlen);
}

void pd_scene_describe(const pd_scene *s, char *buf, size_t len)
{
    const double cells = (double)s->grid->width * (double)s->grid->height;
    int n = snprintf(buf, len, "%dx%d, %" PRIu64 " of %.0f cells walkable (%.1f%%)",
                     (int)s->grid->width, (int)s->grid->height, s->passable_cells, cells,
                     100.0 * (double)s->passable_cells / cells);
    if (s->from_tiled && n > 0 && (size_t)n + 2 < len) {
        memcpy(buf + n, "; ", 3);
        pd_tiled_stats_format(&s->tiled_stats, buf + n + 2, len - (size_t)n - 2);
    }
}

/* A scene around grid (taken over, also on failure) with cs's placement and
 * unit sizes, its derived data built under lim (may be NULL); off_x/off_y
 * (cells) move the origin; tiled: what a Tiled map's rule decided, or NULL.
 * NULL with the reason in err and *status (PD_INTERNAL, or the poll's). */
static pd_scene *pd__scene_new(const pd_conf_scene *cs, pd_grid *grid, double off_x, double off_y,
                               const pd_tiled_stats *tiled, const pd_scene_limits *lim,
                               pd_status *status, char *err, size_t errlen)
{
    *status = PD_INTERNAL;
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
    s->lineage = pd__new_lineage();
    if (tiled) {
        s->from_tiled = 1;
        s->tiled_stats = *tiled;
    }
    s->incarnation = s->lineage;
    pd_status stopped = PD_OK;
    int rc = pd__scene_derive(s, lim, &stopped);
    if (rc != 0) {
        pd__scene_free(s);
        if (rc == -2) {
            *status = stopped;
            snprintf(err, errlen, "scene '%s': stopped while building its unit grids and labels: %s",
                     cs->name, pd_status_name(stopped));
        } else {
            snprintf(err, errlen, "scene '%s': out of memory for unit grids and labels", cs->name);
        }
        return NULL;
    }
    *status = PD_OK;
    return s;
}

/* Parses buf as cs's map format into a grid, under lim (may be NULL), with
 * the origin offset the map carries in *off_x, *off_y (cells) and, for a
 * Tiled map, what its rule decided in *tiled; `where` names the map in
 * messages (its path, or "map" for one sent in a request). NULL with the
 * reason in err, also for a map with no walkable cell, and in *status
 * PD_LIMIT_EXCEEDED (lim's cells), the poll's status or
 * PD_INVALID_ARGUMENT. */
static pd_grid *pd__parse_grid(const pd_conf_scene *cs, const char *buf, size_t len,
                               const char *where, const pd_scene_limits *lim, pd_status *status,
                               double *off_x_out, double *off_y_out, pd_tiled_stats *tiled,
                               char *err, size_t errlen)
{
    const pd_tiled_rules *tr = &cs->tiled;
    *status = PD_INVALID_ARGUMENT;
    if (cs->format != PD_MAP_ASCII && cs->format != PD_MAP_MOVINGAI && cs->format != PD_MAP_TILED &&
        cs->format != PD_MAP_LDTK) {
        snprintf(err, errlen, "scene '%s': unknown map format %d", cs->name, (int)cs->format);
        return NULL;
    }
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
    pd_grid *grid = NULL;
    pd_parse_error perr = { 0 };
    /* LDtk levels carry their world position, infinite Tiled maps their top-left
     * chunk corner: cells, added to the origin. */
    double off_x = 0, off_y = 0;
    if (cs->format == PD_MAP_TILED || cs->format == PD_MAP_LDTK) {
        char msg[256];
        const pd_tiled_origin origin = { .map_path = cs->map_path, .root_dir = cs->root_dir };
        pd_map_control ctl = { .max_cells_name = "limits.max_scene_cells" };
        if (lim) {
            ctl.max_cells = lim->max_cells;
            ctl.poll = lim->poll;
            ctl.poll_user = lim->poll_user;
        }
        grid = cs->format == PD_MAP_TILED
                   ? pd_tiled_load_ctl(buf, len, tr, &origin, &ctl, &off_x, &off_y, tiled, msg,
                                       sizeof msg)
                   : pd_ldtk_load_ctl(buf, len, &cs->ldtk, &ctl, &off_x, &off_y, msg, sizeof msg);
        if (!grid) {
            *status = ctl.status;
            /* "3:7: invalid JSON" reads as file:line:col like the other formats;
             * a JSON path follows the file name after a space. */
            snprintf(err, errlen, "scene '%s': %s:%s%s", cs->name, where,
                     (msg[0] >= '0' && msg[0] <= '9') ? "" : " ", msg);
            return NULL;
        }
    } else if (cs->format == PD_MAP_ASCII) {
        grid = pd_map_parse_ascii(buf, len, &perr);
    } else {
        pd_char_costs costs;
        memcpy(costs.cost, cs->char_cost, sizeof costs.cost);
        memcpy(costs.set, cs->char_cost_set, sizeof costs.set);
        grid = pd_map_parse_movingai_with(buf, len, &costs, &perr);
    }
    if (!grid) {
        if (perr.line > 0 && perr.column > 0)
            snprintf(err, errlen, "scene '%s': %s:%d:%d: %s", cs->name, where, perr.line,
                     perr.column, perr.message);
        else if (perr.line > 0)
            snprintf(err, errlen, "scene '%s': %s:%d: %s", cs->name, where, perr.line,
                     perr.message);
        else
            snprintf(err, errlen, "scene '%s': %s: %s", cs->name, where, perr.message);
        return NULL;
    }
    if (pd__check_walkable(cs->name, where, grid, cs->format == PD_MAP_TILED ? tiled : NULL, err,
                           errlen) != 0) {
        pd_grid_destroy(grid);
        return NULL;
    }
    *status = PD_OK;
    *off_x_out = off_x;
    *off_y_out = off_y;
    return grid;
}

uint64_t pd_scene_estimate_bytes(int32_t width, int32_t height, const uint32_t *unit_sizes,
                                 size_t n_unit_sizes)
{
    const uint64_t grid = pd_grid_bytes_for(width, height);
    const uint64_t padded = (uint64_t)(width + 2) * (uint64_t)(height + 2);
    uint64_t bytes = sizeof(pd_scene) + grid, larger = 0;
    for (size_t i = 0; i < n_unit_sizes; i++) {
        larger += unit_sizes[i] > 1;
        bytes += padded; /* labels, one byte a cell at least */
    }
    if (larger)
        bytes += padded + larger * grid; /* the clearance, the unit grids */
    return bytes;
}

pd_status pd_scene_check_limits(const pd_scene_limits *lim, const pd_conf_scene *cs, int32_t width,
                                int32_t height, char *err, size_t errlen)
{
    uint64_t cells = (uint64_t)width * (uint64_t)height;
    if (lim && lim->max_cells && cells > lim->max_cells) {
        snprintf(err, errlen, "scene '%s': %" PRIu64 " cells, limits.max_scene_cells is %" PRIu64,
                 cs->name, cells, lim->max_cells);
        return PD_LIMIT_EXCEEDED;
    }
    if (lim && lim->bytes_cap) {
        uint64_t need = pd_scene_estimate_bytes(width, height, cs->unit_sizes, cs->n_unit_sizes);
        if (lim->bytes_held + need > lim->bytes_cap) {
            snprintf(err, errlen,
                     "scene '%s': needs at least %" PRIu64 " bytes, scenes hold %" PRIu64
                     ", limits.max_scene_bytes is %" PRIu64,
                     cs->name, need, lim->bytes_held, lim->bytes_cap);
            return PD_LIMIT_EXCEEDED;
        }
    }
    return PD_OK;
}

/* Parses buf as cs's map format and builds the scene (pd__parse_grid), held
 * to lim's caps (the text formats' grids are as large as their text: their
 * cells are checked here) before anything is derived. */
static pd_scene *pd__scene_parse(const pd_conf_scene *cs, const char *buf, size_t len,
                                 const char *where, const pd_scene_limits *lim, pd_status *status,
                                 char *err, size_t errlen)
{
    double off_x = 0, off_y = 0;
    pd_tiled_stats tiled;
    pd_grid *grid = pd__parse_grid(cs, buf, len, where, lim, status, &off_x, &off_y, &tiled, err,
                                   errlen);
    if (!grid)
        return NULL;
    if ((*status = pd_scene_check_limits(lim, cs, grid->width, grid->height, err, errlen)) != PD_OK) {
        pd_grid_destroy(grid);
        return NULL;
    }
    return pd__scene_new(cs, grid, off_x, off_y, cs->format == PD_MAP_TILED ? &tiled : NULL, lim,
                         status, err, errlen);
}

/* Whether cur, a served config scene, is what cs defines now: the grid its
 * map parsed to (off_x/off_y: the offset the map carries) equals the cells
 * cur was loaded with (its authored state, whatever updates did since),
 * and the placement, unit sizes and search equal cs's, computed as
 * pd__scene_new computes them. */
static int pd__same_definition(const pd_scene *cur, const pd_conf_scene *cs, const pd_grid *grid,
                               double off_x, double off_y)
{
    const pd_grid *authored = pd_scene_authored_grid(cur);
    const pd_grid *g = authored ? authored : cur->grid;
    if (cur->runtime || cur->origin_x != cs->origin_x + off_x * cs->cell_size ||
        cur->origin_y != cs->origin_y + off_y * cs->cell_size || cur->cell_size != cs->cell_size ||
        cur->search != cs->search || cur->n_unit_sizes != cs->n_unit_sizes ||
        memcmp(cur->unit_sizes, cs->unit_sizes, cs->n_unit_sizes * sizeof *cs->unit_sizes) != 0 ||
        g->width != grid->width || g->height != grid->height)
        return 0;
    for (int32_t y = 0; y < grid->height; y++) {
        if (memcmp(g->cells + pd_grid_index(g, 0, y), grid->cells + pd_grid_index(grid, 0, y),
                   (size_t)grid->width) != 0)
            return 0;
    }
    return 1;
}

/* Loads the scene of config entry cs, its parse and derive asking lim's
 * poll (lim may be NULL; the config's maps have no cap but their
 * format's); when `keep` (the snapshot a registry serves under cs's name,
 * or NULL) has the definition cs gives, returns it retained instead of
 * building it again, with *kept = 1. */
static pd_scene *pd__scene_load_or_keep(const pd_conf_scene *cs, pd_scene *keep,
                                        const pd_scene_limits *lim, int *kept, char *err,
                                        size_t errlen)
{
    *kept = 0;
    if (pd__check_entry(cs, err, errlen) != 0)
        return NULL;
    if (!cs->map_path || cs->map_path[0] == '\0') {
        snprintf(err, errlen, "scene '%s': no map file", cs->name);
        return NULL;
    }
    size_t len = 0;
    size_t cap = cs->format == PD_MAP_TILED || cs->format == PD_MAP_LDTK ? PD_TILED_MAX_FILE_BYTES
                                                                         : PD_SCENE_MAX_FILE_BYTES;
    char *buf = pd__read_file(cs->map_path, cap, &len, cs->name, err, errlen);
    if (!buf)
        return NULL;
    double off_x = 0, off_y = 0;
    pd_tiled_stats tiled;
    pd_status st;
    pd_grid *grid = pd__parse_grid(cs, buf, len, cs->map_path, lim, &st, &off_x, &off_y, &tiled,
                                   err, errlen);
    free(buf);
    if (!grid)
        return NULL;
    if (keep && pd__same_definition(keep, cs, grid, off_x, off_y)) {
        pd_grid_destroy(grid);
        pd_scene_retain(keep);
        *kept = 1;
        return keep;
    }
    return pd__scene_new(cs, grid, off_x, off_y, cs->format == PD_MAP_TILED ? &tiled : NULL, lim,
                         &st, err, errlen);
}

pd_scene *pd_scene_load(const pd_conf_scene *cs, char *err, size_t errlen)
{
    char scratch[1];
    if (!err || errlen == 0) {
        err = scratch;
        errlen = sizeof scratch;
    }
    err[0] = '\0';
    int kept;
    return pd__scene_load_or_keep(cs, NULL, NULL, &kept, err, errlen);
}

pd_scene *pd_scene_build(const pd_conf_scene *cs, const char *buf, size_t len,
                         const pd_scene_limits *lim, pd_status *status, char *err, size_t errlen)
{
    char scratch[1];
    pd_status st_scratch;
    if (!err || errlen == 0) {
        err = scratch;
        errlen = sizeof scratch;
    }
    if (!status)
        status = &st_scratch;
    err[0] = '\0';
    *status = PD_INVALID_ARGUMENT;
    if (!cs || !buf) {
        snprintf(err, errlen, "scene: no map");
        return NULL;
    }
    if (pd__check_entry(cs, err, errlen) != 0)
        return NULL;
    return pd__scene_parse(cs, buf, len, cs->map_path ? cs->map_path : "map", lim, status, err,
                           errlen);
}

pd_scene *pd_scene_from_cells(const pd_conf_scene *cs, int32_t width, int32_t height,
                              const uint8_t *cells, char *err, size_t errlen)
{
    char scratch[1];
    if (!err || errlen == 0) {
        err = scratch;
        errlen = sizeof scratch;
    }
    err[0] = '\0';
    if (!cs || !cells) {
        snprintf(err, errlen, "scene: no cells");
        return NULL;
    }
    if (pd__check_entry(cs, err, errlen) != 0)
        return NULL;
    pd_grid *grid = pd_grid_create(width, height);
    if (!grid) {
        snprintf(err, errlen, "scene '%s': %dx%d cells: each side must be 1..%d", cs->name,
                 (int)width, (int)height, PD_GRID_MAX_SIDE);
        return NULL;
    }
    for (int32_t y = 0; y < height; y++)
        memcpy(grid->cells + pd_grid_index(grid, 0, y), cells + (size_t)y * (size_t)width,
               (size_t)width);
    pd_grid_refresh_flags(grid);
    pd_status st;
    return pd__scene_new(cs, grid, 0, 0, NULL, NULL, &st, err, errlen);
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

pd_scene *pd_scene_instance(const pd_scene *tmpl, const char *name)
{
    size_t len = name ? strlen(name) : 0;
    if (!tmpl || len == 0 || len >= PD_CONF_MAX_NAME)
        return NULL;
    pd_scene *n = malloc(sizeof *n);
    if (!n)
        return NULL;
    /* Every field as the template has it (the structures' pointers
     * included), then what makes it a scene of its own. Not the reference
     * count: other threads holding the template change it meanwhile. */
    _Static_assert(offsetof(pd_scene, refs) == 0, "the copy skips refs as the first field");
    const size_t after_refs = sizeof tmpl->refs;
    memcpy((char *)n + after_refs, (const char *)tmpl + after_refs, sizeof *n - after_refs);
    atomic_init(&n->refs, 1);
    memset(n->name, 0, sizeof n->name);
    memcpy(n->name, name, len);
    n->version = 1;
    n->runtime = 1;
    n->lineage = pd__new_lineage();
    n->incarnation = n->lineage;
    n->acct = NULL;
    n->charged = 0;
    n->authored = NULL; /* its cells now are its authored state */
    n->writer = NULL;   /* a scene of its own: its updates are not the template's */
    n->base = tmpl->base ? tmpl->base : (pd_scene *)tmpl;
    n->template_lineage = tmpl->template_lineage ? tmpl->template_lineage : tmpl->runtime ? 0 : tmpl->lineage;
    pd_scene_retain(n->base);
    return n;
}

/* Checks an update against the grid it will be applied to. */
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
static pd_status pd__apply_updates(const pd_scene *s, const pd_scene_update *ops, size_t n_ops,
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

pd_registry *pd_registry_create(void)
{
    pd_registry *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    if (pthread_rwlock_init(&r->lock, NULL) != 0) {
        free(r);
        return NULL;
    }
    r->acct = calloc(1, sizeof *r->acct);
    if (!r->acct || pthread_mutex_init(&r->reload_lock, NULL) != 0) {
        free(r->acct);
        pthread_rwlock_destroy(&r->lock);
        free(r);
        return NULL;
    }
    atomic_init(&r->loads_stopped, 0);
    atomic_init(&r->acct->refs, 1);
    atomic_init(&r->acct->bytes, 0);
    r->spare_min_cells = PD_SCENE_SPARE_MIN_CELLS;
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
    pd__release_set(r->scenes, r->n_slots);
    free(r->index);
    pd__acct_release(r->acct);
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

/* ---- the registry's index ---------------------------------------------- */

/* The registry sorts its scenes again (pd__registry_sort) once the adds and
 * drops since the last sort pass the larger of these: a fixed floor, and
 * one change in PD__REGISTRY_SORT_SHARE of the scenes, so that the sort's
 * O(n) merge costs a change O(1) however many scenes there are, and a
 * listing sorts at most that many scenes of its own. */
#define PD__REGISTRY_SORT_MIN 1024
#define PD__REGISTRY_SORT_SHARE 16
/* Smallest scenes[] allocation. */
#define PD__REGISTRY_SLOTS_MIN 16

/* The name of scenes[e] for the index (NULL: a dropped one's hole). */
static const char *pd__slot_name(const void *scenes, uint32_t e)
{
    const pd_scene *s = ((pd_scene *const *)scenes)[e];
    return s ? s->name : NULL;
}

/* The scenes[] entry serving `name`, or SIZE_MAX. Under either lock. */
static size_t pd__lookup(const pd_registry *r, const char *name, uint64_t *work)
{
    if (r->index_cap == 0)
        return SIZE_MAX;
    uint32_t e = r->index[pd_index_slot(r->index, r->index_cap, name, pd__slot_name, r->scenes, work)];
    return e ? e - 1 : SIZE_MAX;
}

/* Sorts r's scenes again: the ones added since the last sort, sorted, are
 * merged with the sorted ones, and the dropped ones' NULL entries go. With
 * reload_lock held; the new array and index are made before the write
 * lock, which only swaps them. Without the memory it leaves r as it is
 * (a listing still sorts what it reads). */
static void pd__registry_sort(pd_registry *r)
{
    size_t tail = r->n_slots - r->n_sorted, n = r->n_scenes;
    size_t cap = n < PD__REGISTRY_SLOTS_MIN ? PD__REGISTRY_SLOTS_MIN : n;
    size_t icap = r->index_cap;
    pd_scene **added = malloc((tail ? tail : 1) * sizeof *added);
    pd_scene **fresh = malloc(cap * sizeof *fresh);
    size_t k = 0;
    for (size_t i = r->n_sorted; added && i < r->n_slots; i++)
        if (r->scenes[i])
            added[k++] = r->scenes[i];
    uint32_t *index = NULL;
    if (added && fresh) {
        if (k > 1)
            qsort(added, k, sizeof *added, pd__cmp_scene_name);
        size_t a = 0, b = 0, m = 0;
        while (a < r->n_sorted || b < k) {
            if (a < r->n_sorted && !r->scenes[a]) {
                a++;
                continue;
            }
            if (b == k || (a < r->n_sorted && strcmp(r->scenes[a]->name, added[b]->name) < 0))
                fresh[m++] = r->scenes[a++];
            else
                fresh[m++] = added[b++];
        }
        r->work += r->n_slots;
        index = pd_index_build(icap, n, pd__slot_name, fresh, &r->work);
    }
    free(added);
    if (!index) {
        free(fresh);
        return;
    }
    pthread_rwlock_wrlock(&r->lock);
    pd_scene **old = r->scenes;
    uint32_t *old_index = r->index;
    r->scenes = fresh;
    r->index = index;
    r->n_slots = r->n_sorted = n;
    r->cap_slots = cap;
    r->unsorted = 0;
    pthread_rwlock_unlock(&r->lock);
    free(old);
    free(old_index);
}

/* After an add or a drop (reload_lock held): sorts when enough of them
 * have come since the last sort. */
static void pd__registry_changed(pd_registry *r)
{
    r->unsorted++;
    size_t due = r->n_scenes / PD__REGISTRY_SORT_SHARE;
    if (r->unsorted >= (due > PD__REGISTRY_SORT_MIN ? due : PD__REGISTRY_SORT_MIN))
        pd__registry_sort(r);
}

/* Makes room in r for one more scene (reload_lock held): a larger array or
 * index when one is needed, made before the write lock, which only swaps
 * it in (doubling, so the copy costs an add O(1) on average). Returns 0,
 * or -1 when memory ran out (nothing changed). */
static int pd__registry_reserve(pd_registry *r)
{
    pd_scene **slots = r->scenes;
    size_t cap = r->cap_slots, icap = r->index_cap;
    if (r->n_slots == cap) {
        cap = cap ? 2 * cap : PD__REGISTRY_SLOTS_MIN;
        if (!(slots = malloc(cap * sizeof *slots)))
            return -1;
        if (r->n_slots)
            memcpy(slots, r->scenes, r->n_slots * sizeof *slots);
        r->work += r->n_slots;
    }
    uint32_t *index = r->index;
    if ((r->n_scenes + 1) * 2 > icap) {
        icap = pd_index_cap_for(r->n_scenes + 1);
        if (!(index = pd_index_build(icap, r->n_slots, pd__slot_name, slots, &r->work))) {
            if (slots != r->scenes)
                free(slots);
            return -1;
        }
    }
    if (slots == r->scenes && index == r->index)
        return 0;
    pthread_rwlock_wrlock(&r->lock);
    pd_scene **old = r->scenes;
    uint32_t *old_index = r->index;
    r->scenes = slots;
    r->cap_slots = cap;
    r->index = index;
    r->index_cap = icap;
    pthread_rwlock_unlock(&r->lock);
    if (old != slots)
        free(old);
    if (old_index != index)
        free(old_index);
    return 0;
}

/* Serves s, whose name r does not serve, taking over the caller's
 * reference; reload_lock held, and room made (pd__registry_reserve). */
static void pd__registry_insert(pd_registry *r, pd_scene *s)
{
    size_t at = pd_index_slot(r->index, r->index_cap, s->name, pd__slot_name, r->scenes, &r->work);
    pthread_rwlock_wrlock(&r->lock);
    r->scenes[r->n_slots] = s;
    r->index[at] = (uint32_t)(r->n_slots + 1);
    r->n_slots++;
    r->n_scenes++;
    pthread_rwlock_unlock(&r->lock);
    pd__registry_changed(r);
}

/* Stops serving scenes[at] (reload_lock held) and returns it with the
 * registry's reference. */
static pd_scene *pd__registry_remove(pd_registry *r, size_t at)
{
    pd_scene *gone = r->scenes[at];
    size_t slot = pd_index_slot(r->index, r->index_cap, gone->name, pd__slot_name, r->scenes, &r->work);
    pthread_rwlock_wrlock(&r->lock);
    pd_index_remove(r->index, r->index_cap, slot, pd__slot_name, r->scenes);
    r->scenes[at] = NULL;
    r->n_scenes--;
    pthread_rwlock_unlock(&r->lock);
    pd__registry_changed(r);
    return gone;
}

/* A loaded scene set nobody reads yet: what pd_registry_prepare builds and
 * pd_registry_publish swaps in. */
struct pd_scene_set {
    pd_scene **scenes;          /* sorted by name, one reference each */
    unsigned char *kept;        /* kept[i]: scenes[i] is a served snapshot kept
                                   (pd_registry_prepare_reload), not a new build */
    size_t n_scenes;
};

static void pd__set_free(pd_scene_set *set)
{
    pd__release_set(set->scenes, set->n_scenes);
    free(set->kept);
    free(set);
}

static int pd__cmp_conf_scene(const void *a, const void *b)
{
    const pd_conf_scene *sa = *(const pd_conf_scene *const *)a;
    const pd_conf_scene *sb = *(const pd_conf_scene *const *)b;
    return strcmp(sa->name, sb->name);
}

/* The poll of a load into r: CANCELLED once its loads are stopped. */
static pd_status pd__loads_poll(void *user)
{
    const pd_registry *r = user;
    return atomic_load_explicit(&r->loads_stopped, memory_order_relaxed) ? PD_CANCELLED : PD_OK;
}

void pd_registry_stop_loads(pd_registry *r)
{
    atomic_store(&r->loads_stopped, 1);
}

/* pd_registry_prepare (r NULL) and pd_registry_prepare_reload. The entries
 * are taken in name order, so scenes[] and kept[] come out sorted. */
static pd_scene_set *pd__prepare(pd_registry *r, const pd_conf *conf, char *err, size_t errlen)
{
    const pd_scene_limits stop = { .poll = pd__loads_poll, .poll_user = r };
    char scratch[1];
    if (!err || errlen == 0) {
        err = scratch;
        errlen = sizeof scratch;
    }
    err[0] = '\0';
    size_t n_conf = conf->n_scenes;
    pd_scene_set *set = calloc(1, sizeof *set);
    const pd_conf_scene **order = n_conf ? malloc(n_conf * sizeof *order) : NULL;
    if (!set || (n_conf > 0 && (!order || !(set->scenes = calloc(n_conf, sizeof *set->scenes)) ||
                                !(set->kept = calloc(n_conf, sizeof *set->kept))))) {
        if (set)
            pd__set_free(set);
        free(order);
        snprintf(err, errlen, "scenes: out of memory");
        return NULL;
    }
    for (size_t i = 0; i < n_conf; i++)
        order[i] = &conf->scenes[i];
    if (n_conf > 1)
        qsort(order, n_conf, sizeof *order, pd__cmp_conf_scene);
    for (size_t i = 1; i < n_conf; i++) {
        if (strcmp(order[i - 1]->name, order[i]->name) == 0) {
            snprintf(err, errlen, "scene '%s': name given more than once", order[i]->name);
            free(order);
            pd__set_free(set);
            return NULL;
        }
    }
    for (size_t i = 0; i < n_conf; i++) {
        pd_scene *served = r ? pd_registry_acquire(r, order[i]->name) : NULL;
        int kept = 0;
        set->scenes[i] = pd__scene_load_or_keep(order[i], served, r ? &stop : NULL, &kept, err,
                                                errlen);
        pd_scene_release(served);
        if (!set->scenes[i]) {
            free(order);
            pd__set_free(set);
            return NULL;
        }
        set->kept[i] = (unsigned char)kept;
        set->n_scenes = i + 1;
    }
    free(order);
    return set;
}

pd_scene_set *pd_registry_prepare(const pd_conf *conf, char *err, size_t errlen)
{
    return pd__prepare(NULL, conf, err, errlen);
}

pd_scene_set *pd_registry_prepare_reload(pd_registry *r, const pd_conf *conf, char *err,
                                         size_t errlen)
{
    return pd__prepare(r, conf, err, errlen);
}

void pd_registry_discard(pd_scene_set *set)
{
    if (set)
        pd__set_free(set);
}

pd_scene *const *pd_scene_set_scenes(const pd_scene_set *set, size_t *n_out)
{
    size_t n = set ? set->n_scenes : 0;
    if (n_out)
        *n_out = n;
    return n ? set->scenes : NULL;
}

int pd_scene_set_kept(const pd_scene_set *set, size_t i)
{
    return set && i < set->n_scenes && set->kept[i];
}

void pd_scene_set_counts(const pd_scene_set *set, size_t *kept, size_t *built)
{
    size_t k = 0, n = set ? set->n_scenes : 0;
    for (size_t i = 0; i < n; i++)
        k += set->kept[i];
    if (kept)
        *kept = k;
    if (built)
        *built = n - k;
}

/* The run-time scenes of cur (NULL entries skipped) that set does not
 * name, appended to set's array and the whole sorted again; 0, or -1 when
 * memory ran out. */
static int pd__keep_runtime(pd_scene *const *cur, size_t n_cur, pd_scene ***fresh, size_t *n)
{
    size_t keep = 0;
    for (size_t i = 0; i < n_cur; i++)
        keep += cur[i] && cur[i]->runtime && !pd__find(*fresh, *n, cur[i]->name);
    if (keep == 0)
        return 0;
    pd_scene **grown = realloc(*fresh, (*n + keep) * sizeof *grown);
    if (!grown)
        return -1;
    size_t m = *n;
    for (size_t i = 0; i < n_cur; i++) {
        if (cur[i] && cur[i]->runtime && !pd__find(grown, *n, cur[i]->name)) {
            pd_scene_retain(cur[i]);
            grown[m++] = cur[i];
        }
    }
    *fresh = grown;
    *n = m;
    qsort(grown, m, sizeof *grown, pd__cmp_scene_name);
    return 0;
}

int pd_registry_publish(pd_registry *r, pd_scene_set *set)
{
    size_t n = set->n_scenes;
    pthread_mutex_lock(&r->reload_lock);
    /* Only reloads and updates write the set, and they are serialised by
     * reload_lock, so reading the current set here needs no read lock.
     * A kept scene must still be served as the same scene (updates since
     * the prepare made newer versions of it, which is what stays). */
    for (size_t i = 0; i < n; i++) {
        size_t at = pd__lookup(r, set->scenes[i]->name, NULL);
        const pd_scene *now = at == SIZE_MAX ? NULL : r->scenes[at];
        if (set->kept[i] && (!now || now->lineage != set->scenes[i]->lineage)) {
            pthread_mutex_unlock(&r->reload_lock);
            pd__set_free(set);
            return -1;
        }
    }
    /* The new index, made first: at most the set and every run-time scene
     * served now. */
    size_t icap = pd_index_cap_for(n + r->n_scenes);
    uint32_t *index = calloc(icap, sizeof *index);
    if (!index) {
        pthread_mutex_unlock(&r->reload_lock);
        pd__set_free(set);
        return -1;
    }
    pd_scene **fresh = set->scenes;
    for (size_t i = 0; i < n; i++) {
        size_t at = pd__lookup(r, fresh[i]->name, NULL);
        pd_scene *prev = at == SIZE_MAX ? NULL : r->scenes[at];
        if (set->kept[i]) {
            pd_scene_retain(prev);
            pd_scene_release(fresh[i]);
            fresh[i] = prev;
            continue;
        }
        if (prev) {
            /* Built again: the same scene's next version to its watchers. */
            fresh[i]->version = prev->version + 1;
            fresh[i]->incarnation = prev->incarnation;
        }
        pd__charge(r->acct, fresh[i]);
    }
    free(set->kept);
    free(set);
    /* Scenes made at run time are not in any config: they stay. Without
     * the memory to keep them the config's scenes are still published. */
    (void)pd__keep_runtime(r->scenes, r->n_slots, &fresh, &n);
    for (size_t i = 0; i < n; i++)
        index[pd_index_slot(index, icap, fresh[i]->name, pd__slot_name, fresh, NULL)] = (uint32_t)(i + 1);
    pthread_rwlock_wrlock(&r->lock);
    pd_scene **old = r->scenes;
    uint32_t *old_index = r->index;
    size_t old_n = r->n_slots;
    r->scenes = fresh;
    r->n_slots = r->n_sorted = r->n_scenes = r->cap_slots = n;
    r->unsorted = 0;
    r->index = index;
    r->index_cap = icap;
    pthread_rwlock_unlock(&r->lock);
    free(old_index);
    pthread_mutex_unlock(&r->reload_lock);

    /* Readers that still hold old scenes keep them alive by their own
     * references (a replaced scene's writer, spare included, goes with its
     * last version). */
    pd__release_set(old, old_n);
    return 0;
}

int pd_registry_load(pd_registry *r, const pd_conf *conf, char *err, size_t errlen)
{
    /* Build the complete new set before touching the live one: all or nothing. */
    pd_scene_set *set = pd_registry_prepare(conf, err, errlen);
    if (!set)
        return -1;
    return pd_registry_publish(r, set);
}

pd_scene *pd_registry_acquire(pd_registry *r, const char *name)
{
    if (!name)
        return NULL;
    pthread_rwlock_rdlock(&r->lock);
    size_t at = pd__lookup(r, name, NULL);
    pd_scene *s = at == SIZE_MAX ? NULL : r->scenes[at];
    if (s)
        pd_scene_retain(s);
    pthread_rwlock_unlock(&r->lock);
    return s;
}

size_t pd_registry_count(pd_registry *r)
{
    pthread_rwlock_rdlock(&r->lock);
    size_t n = r->n_scenes;
    pthread_rwlock_unlock(&r->lock);
    return n;
}

uint64_t pd_registry_work(pd_registry *r)
{
    pthread_mutex_lock(&r->reload_lock);
    uint64_t work = r->work;
    pthread_mutex_unlock(&r->reload_lock);
    return work;
}

size_t pd_registry_list(pd_registry *r, pd_scene ***out)
{
    *out = NULL;
    pthread_rwlock_rdlock(&r->lock);
    size_t n = r->n_scenes, tail = r->n_slots - r->n_sorted, a = 0, k = 0;
    pd_scene **list = n ? malloc(n * sizeof *list) : NULL;
    pd_scene **added = list && tail ? malloc(tail * sizeof *added) : NULL;
    if (list && (added || !tail)) {
        for (size_t i = 0; i < r->n_slots; i++) {
            pd_scene *s = r->scenes[i];
            if (!s)
                continue;
            pd_scene_retain(s);
            if (i < r->n_sorted)
                list[a++] = s;
            else
                added[k++] = s;
        }
    }
    pthread_rwlock_unlock(&r->lock);
    if (!list || (tail && !added)) {
        free(list);
        return 0;
    }
    /* The scenes added since the registry's last sort, sorted, merged in
     * from the back (at most PD__REGISTRY_SORT_SHARE-th of them). */
    if (k > 1)
        qsort(added, k, sizeof *added, pd__cmp_scene_name);
    for (size_t w = a + k; k > 0;) {
        if (a > 0 && strcmp(list[a - 1]->name, added[k - 1]->name) > 0)
            list[--w] = list[--a];
        else
            list[--w] = added[--k];
    }
    free(added);
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
    return pd_registry_update_many(r, name, u, 1, res);
}

pd_status pd_registry_update_many(pd_registry *r, const char *name, const pd_scene_update *ops,
                                  size_t n_ops, pd_scene_update_result *res)
{
    return pd_registry_update_hooked(r, name, ops, n_ops, NULL, res);
}

/* The current version of `name` and its writer (made at the scene's first
 * update), each with a reference of the caller's; PD_UNKNOWN_SCENE or
 * PD_INTERNAL (memory). */
static pd_status pd__update_start(pd_registry *r, const char *name, pd_scene **cur, pd_scene_writer **l,
                                  uint64_t *max_bytes)
{
    pthread_mutex_lock(&r->reload_lock);
    *max_bytes = r->caps.max_scene_bytes;
    size_t at = pd__lookup(r, name, NULL);
    pd_scene *s = at == SIZE_MAX ? NULL : r->scenes[at];
    pd_status st = !s ? PD_UNKNOWN_SCENE : PD_OK;
    /* Only updates read or set a served scene's writer, and they look it
     * up here, under reload_lock. */
    if (s && !s->writer && !(s->writer = pd__writer_new(r->spare_min_cells)))
        st = PD_INTERNAL;
    if (st == PD_OK) {
        pd_scene_retain(s);
        *cur = s;
        *l = pd__writer_retain(s->writer);
    }
    pthread_mutex_unlock(&r->reload_lock);
    return st;
}

/* Serves next in place of cur when cur is still what `name` serves (a
 * reload or a drop may have replaced it while next was built) and the
 * hooks' commit takes it: returns 1 served, 0 replaced meanwhile, -1
 * refused by commit (nothing served). next may be NULL (an update that
 * changed nothing: nothing to swap or commit). */
static int pd__update_swap(pd_registry *r, const char *name, pd_scene *cur, pd_scene *next,
                           pd_scene_writer *l, const pd_registry_update_hooks *hooks,
                           const pd_scene_update_result *res)
{
    pthread_mutex_lock(&r->reload_lock);
    size_t i = pd__lookup(r, name, NULL);
    int current = i != SIZE_MAX && r->scenes[i] == cur;
    /* The commit (the journal's append) comes before the swap and under
     * the same lock, so no reader ever sees a version it refused. */
    if (current && next && hooks && hooks->commit && hooks->commit(hooks->user, res) != 0)
        current = -1;
    if (current == 1 && next) {
        if (next->acct)
            pd__recharge(next); /* a reused spare */
        else
            pd__charge(r->acct, next);
        next->writer = pd__writer_retain(l);
        pthread_rwlock_wrlock(&r->lock);
        r->scenes[i] = next;
        pthread_rwlock_unlock(&r->lock);
    }
    pthread_mutex_unlock(&r->reload_lock);
    return current;
}

/* After cur was replaced by the version ops made (writer lock held): cur
 * keeps the registry's reference as the writer's spare, with the
 * operations that bring it up to date; a small scene's is let go. */
static void pd__update_retire(pd_scene *cur, pd_scene_writer *l, const pd_scene_update *ops,
                              size_t n_ops, uint64_t version)
{
    pd_scene *drop = l->spare;
    l->spare = NULL;
    if (cur->base || cur->grid->width * (uint64_t)cur->grid->height <= l->spare_min_cells) {
        pd_scene_release(drop);
        pd_scene_release(cur);
        return;
    }
    /* A waiting spare holds no writer reference (see pd_scene_writer);
     * the version just served holds one, so l stays. Readers of cur never
     * read its writer. */
    pd__writer_release(cur->writer);
    cur->writer = NULL;
    l->spare = cur;
    l->spare_at = cur->version;
    pd__writer_keep_ops(l, ops, n_ops, version);
    pd_scene_release(drop);
}

/* limits.max_scene_bytes for the version an update is about to make: with
 * no spare to write into, it is a copy of cur's structures (an instance's
 * first update copies the template's it shared), and one that would take
 * the registry past the cap is refused before it is made. res gets the
 * bytes it would need and those held (for the answer's message). */
static pd_status pd__update_fits(pd_registry *r, const pd_scene *cur, const pd_scene_writer *l,
                                 uint64_t max_bytes, pd_scene_update_result *res)
{
    if (!max_bytes || l->spare)
        return PD_OK;
    pd_scene_bytes b;
    pd_scene_get_bytes(cur, &b);
    uint64_t more = sizeof *cur + b.total, held = pd_registry_bytes(r);
    if (held + more <= max_bytes)
        return PD_OK;
    res->version = cur->version;
    res->bytes_needed = more;
    res->bytes_held = held;
    return PD_LIMIT_EXCEEDED;
}

pd_status pd_registry_update_hooked(pd_registry *r, const char *name, const pd_scene_update *ops,
                                    size_t n_ops, const pd_registry_update_hooks *hooks,
                                    pd_scene_update_result *res)
{
    pd_scene_update_result local;
    if (!res)
        res = &local;
    memset(res, 0, sizeof *res);
    if (!r || !ops)
        return PD_INVALID_ARGUMENT;
    if (!name)
        return PD_UNKNOWN_SCENE;
    for (;;) {
        pd_scene *cur;
        pd_scene_writer *l;
        uint64_t max_bytes;
        pd_status st = pd__update_start(r, name, &cur, &l, &max_bytes);
        if (st != PD_OK)
            return st;
        /* The writer's lock keeps this scene's updates in order: each
         * starts from the version the one before published. Other scenes'
         * updates run meanwhile; readers never wait for it. */
        pthread_mutex_lock(&l->lock);
        pd_scene *next = NULL;
        st = pd__update_fits(r, cur, l, max_bytes, res);
        if (st == PD_OK)
            st = pd__apply_updates(cur, ops, n_ops, l, &next, res);
        int refused = st == PD_OK && hooks && hooks->before_publish && hooks->before_publish(hooks->user) != 0;
        int let_go = st == PD_OK && !refused;
        int current = let_go ? pd__update_swap(r, name, cur, next, l, hooks, res) : 0;
        if (current < 0) {
            /* Not served: the version served is still cur's. */
            refused = 1;
            current = 0;
            res->version = cur->version;
            res->cells_changed = 0;
        }
        if (let_go && hooks && hooks->after_publish)
            hooks->after_publish(hooks->user, current, res);
        if (current && next)
            pd__update_retire(cur, l, ops, n_ops, next->version); /* takes the registry's reference */
        else
            pd_scene_release(next);
        pthread_mutex_unlock(&l->lock);
        pd_scene_release(cur);
        pd__writer_release(l);
        if (refused)
            return PD_INTERNAL;
        if (st != PD_OK || current)
            return st;
        /* A reload or a drop replaced the scene while the version was
         * built: start again from what is served now. */
    }
}

void pd_registry_set_spare_min_cells(pd_registry *r, uint64_t cells)
{
    pthread_mutex_lock(&r->reload_lock);
    r->spare_min_cells = cells;
    pthread_mutex_unlock(&r->reload_lock);
}

void pd_registry_set_caps(pd_registry *r, const pd_registry_caps *caps)
{
    pthread_mutex_lock(&r->reload_lock);
    r->caps = *caps;
    pthread_mutex_unlock(&r->reload_lock);
}

void pd_registry_build_limits(pd_registry *r, pd_scene_limits *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&r->reload_lock);
    out->max_cells = r->caps.max_scene_cells;
    out->bytes_cap = r->caps.max_scene_bytes;
    pthread_mutex_unlock(&r->reload_lock);
    out->bytes_held = pd_registry_bytes(r);
}

uint64_t pd_registry_bytes(const pd_registry *r)
{
    return atomic_load_explicit(&r->acct->bytes, memory_order_relaxed);
}

/* pd_registry_add with reload_lock held. */
static pd_status pd__add_locked(pd_registry *r, pd_scene *s, const pd_scene *tmpl,
                                const pd_registry_commit *commit, char *err, size_t errlen)
{
    const pd_registry_caps *caps = &r->caps;
    size_t at = pd__lookup(r, s->name, &r->work);
    if (at != SIZE_MAX) {
        snprintf(err, errlen, "scene '%s' exists already (version %" PRIu64 ")", s->name,
                 r->scenes[at]->version);
        pd_scene_release(s);
        return PD_SCENE_EXISTS;
    }
    uint64_t cells = (uint64_t)s->grid->width * (uint64_t)s->grid->height;
    if (caps->max_scenes && r->n_scenes >= caps->max_scenes) {
        snprintf(err, errlen, "scene '%s': %zu scenes are served, limits.max_scenes is %" PRIu32,
                 s->name, r->n_scenes, caps->max_scenes);
        pd_scene_release(s);
        return PD_LIMIT_EXCEEDED;
    }
    if (!s->base && caps->max_scene_cells && cells > caps->max_scene_cells) {
        snprintf(err, errlen, "scene '%s': %" PRIu64 " cells, limits.max_scene_cells is %" PRIu64,
                 s->name, cells, caps->max_scene_cells);
        pd_scene_release(s);
        return PD_LIMIT_EXCEEDED;
    }
    uint64_t held = pd_registry_bytes(r), more = pd_scene_own_bytes(s);
    if (caps->max_scene_bytes && held + more > caps->max_scene_bytes) {
        snprintf(err, errlen,
                 "scene '%s': needs %" PRIu64 " bytes, scenes hold %" PRIu64
                 ", limits.max_scene_bytes is %" PRIu64,
                 s->name, more, held, caps->max_scene_bytes);
        pd_scene_release(s);
        return PD_LIMIT_EXCEEDED;
    }
    if (pd__registry_reserve(r) != 0) {
        snprintf(err, errlen, "scene '%s': out of memory", s->name);
        pd_scene_release(s);
        return PD_INTERNAL;
    }
    s->runtime = 1;
    /* Last, once nothing else can fail: what the commit records is then
     * exactly what is served. */
    if (commit && commit->fn(commit->user, s, tmpl, err, errlen) != 0) {
        pd_scene_release(s);
        return PD_INTERNAL;
    }
    pd__charge(r->acct, s);
    pd__registry_insert(r, s);
    return PD_OK;
}

pd_status pd_registry_add(pd_registry *r, pd_scene *s, char *err, size_t errlen)
{
    return pd_registry_add_committed(r, s, NULL, err, errlen);
}

pd_status pd_registry_add_committed(pd_registry *r, pd_scene *s, const pd_registry_commit *commit, char *err,
                                    size_t errlen)
{
    char scratch[1];
    if (!err || errlen == 0) {
        err = scratch;
        errlen = sizeof scratch;
    }
    err[0] = '\0';
    if (!r || !s || !s->grid) {
        pd_scene_release(s);
        return PD_INVALID_ARGUMENT;
    }
    pthread_mutex_lock(&r->reload_lock);
    pd_status st = pd__add_locked(r, s, NULL, commit, err, errlen);
    pthread_mutex_unlock(&r->reload_lock);
    return st;
}

pd_status pd_registry_put(pd_registry *r, pd_scene *s)
{
    if (!r || !s || !s->grid) {
        pd_scene_release(s);
        return PD_INTERNAL;
    }
    pthread_mutex_lock(&r->reload_lock);
    size_t at = pd__lookup(r, s->name, &r->work);
    pd_scene *gone = NULL;
    if (at == SIZE_MAX && pd__registry_reserve(r) != 0) {
        pthread_mutex_unlock(&r->reload_lock);
        pd_scene_release(s);
        return PD_INTERNAL;
    }
    if (!s->acct)
        pd__charge(r->acct, s);
    if (at == SIZE_MAX) {
        pd__registry_insert(r, s);
    } else {
        pthread_rwlock_wrlock(&r->lock);
        gone = r->scenes[at];
        r->scenes[at] = s;
        pthread_rwlock_unlock(&r->lock);
    }
    pthread_mutex_unlock(&r->reload_lock);
    pd_scene_release(gone);
    return PD_OK;
}

pd_status pd_registry_instance(pd_registry *r, const char *name, const char *tmpl,
                               uint64_t *version_out, char *err, size_t errlen)
{
    return pd_registry_instance_committed(r, name, tmpl, NULL, version_out, err, errlen);
}

pd_status pd_registry_instance_committed(pd_registry *r, const char *name, const char *tmpl,
                                         const pd_registry_commit *commit, uint64_t *version_out, char *err,
                                         size_t errlen)
{
    char scratch[1];
    if (!err || errlen == 0) {
        err = scratch;
        errlen = sizeof scratch;
    }
    err[0] = '\0';
    if (version_out)
        *version_out = 0;
    if (!r || !name || !tmpl)
        return PD_INVALID_ARGUMENT;
    /* Under reload_lock the template cannot be replaced between the lookup
     * and the add, and the name check sees every other add. */
    pthread_mutex_lock(&r->reload_lock);
    size_t at = pd__lookup(r, tmpl, &r->work);
    pd_scene *t = at == SIZE_MAX ? NULL : r->scenes[at];
    if (!t) {
        pthread_mutex_unlock(&r->reload_lock);
        snprintf(err, errlen, "unknown template scene '%s'", tmpl);
        return PD_UNKNOWN_SCENE;
    }
    pd_scene *n = pd_scene_instance(t, name);
    pd_status st = PD_INTERNAL;
    if (!n)
        snprintf(err, errlen, "scene '%s': out of memory", name);
    else if ((st = pd__add_locked(r, n, t, commit, err, errlen)) == PD_OK && version_out)
        *version_out = n->version;
    pthread_mutex_unlock(&r->reload_lock);
    return st;
}

pd_status pd_registry_drop(pd_registry *r, const char *name, uint64_t *version_out)
{
    if (version_out)
        *version_out = 0;
    if (!r || !name)
        return PD_UNKNOWN_SCENE;
    pthread_mutex_lock(&r->reload_lock);
    size_t i = pd__lookup(r, name, &r->work);
    if (i == SIZE_MAX) {
        pthread_mutex_unlock(&r->reload_lock);
        return PD_UNKNOWN_SCENE;
    }
    pd_scene *gone = pd__registry_remove(r, i);
    if (version_out)
        *version_out = gone->version;
    pthread_mutex_unlock(&r->reload_lock);
    pd_scene_release(gone);
    return PD_OK;
}
