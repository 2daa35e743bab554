/*
 * pd_scene.h - named, reference-counted, immutable scene snapshots.
 *
 * A scene is a grid plus how it sits in the world (origin, cell size) and the
 * unit sizes it serves. Once published a scene never changes: readers take a
 * reference with pd_registry_acquire and keep a consistent snapshot for as
 * long as they hold it, even if the registry is reloaded meanwhile (SIGHUP).
 * That is what keeps a worker safe when a map is swapped mid-query.
 *
 * Thread safety: the registry may be read from any thread; reloads and cell
 * updates are serialised internally. pd_scene_retain/release are atomic.
 * The registry may reuse a retired snapshot's memory for a later version once
 * every reference to it is gone, so tell snapshots apart by version, never
 * by address.
 *
 * Four files implement it, one job each: pd_scene_snapshot.c (the snapshot
 * and its derived structures), pd_scene_load.c (building a scene from a
 * map, cells or a template), pd_scene_update.c (cell updates and the
 * repair of derived structures), pd_scene_registry.c (name -> scene,
 * acquire/release, reloads, run-time scenes); pd_scene_internal.h is what
 * they share.
 */
#ifndef PD_SCENE_H
#define PD_SCENE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "pd_clearance.h"
#include "pd_components.h"
#include "pd_conf.h"
#include "pd_grid.h"
#include "pd_search.h"

/* Which search answers a unit size's requests where jump point search
 * applies (A* answers the rest): the scene's "search" config resolved per
 * unit size (pd_conf_search; "auto" by measurement, pd_jps_pick). */
typedef enum pd_scene_pick {
    PD_SCENE_PICK_DEFAULT = 0,       /* as the server's "jump_point_search" says */
    PD_SCENE_PICK_JPS,
    PD_SCENE_PICK_ASTAR,
} pd_scene_pick;

/* An "auto" scene measures again once the cells its updates changed since
 * the last measurement exceed 1/PD_SCENE_REPICK_FRACTION of its passable
 * cells: a large change can turn an open map into a maze or back. */
#define PD_SCENE_REPICK_FRACTION 16u

/* What one allowed unit size searches on: its unit grid (for unit 1 the
 * scene grid itself, not a copy), that grid's component labels and the
 * search picked for it. */
typedef struct pd_scene_unit {
    uint32_t unit;
    pd_grid *grid;
    pd_components *components;
    pd_scene_pick pick;
} pd_scene_unit;

struct pd_scene_acct;

/* "default", "jps" or "astar". */
const char *pd_scene_pick_name(pd_scene_pick pick);
/* "default", "auto", "jps" or "astar". */
const char *pd_scene_search_name(pd_conf_search search);

/* Whether a request that jump point search can answer goes to it, on a unit
 * size with this pick and the server's "jump_point_search". */
static inline int pd_scene_pick_uses_jps(pd_scene_pick pick, int server_jps)
{
    return pick == PD_SCENE_PICK_JPS || (pick == PD_SCENE_PICK_DEFAULT && server_jps);
}

typedef struct pd_scene {
    atomic_uint_fast32_t refs;
    char name[PD_CONF_MAX_NAME];
    pd_grid *grid;
    pd_clearance *clearance;         /* built when any unit size > 1 is allowed, else NULL */
    pd_scene_unit units[PD_CONF_MAX_UNIT_SIZES];  /* one per unit_sizes[i], same order */
    uint64_t passable_cells;
    double origin_x, origin_y;
    double cell_size;
    uint32_t unit_sizes[PD_CONF_MAX_UNIT_SIZES];
    size_t n_unit_sizes;
    pd_conf_search search;           /* the config's "search" */
    uint64_t changed_since_pick;     /* cells updates changed since "auto" last measured */
    uint64_t version;                /* starts at 1; a registry reload that replaces a
                                        scene of the same name, and every cell update
                                        that changes a cell, gives the new snapshot the
                                        old version + 1 */
    int runtime;                     /* made at run time (CreateScene, CreateInstance):
                                        a reload keeps it unless the config names it */
    uint64_t lineage;                /* names the scene one build made (a load, CreateScene,
                                        CreateInstance, a journal record): the versions
                                        updates make of it keep it, so a reload can tell
                                        the scene it kept from one made since */
    uint64_t template_lineage;       /* an instance (or an instance of one) of a config
                                        scene: that config scene's lineage, kept by its
                                        updates; else 0. A reload that builds that config
                                        scene anew records the instance's cells in the
                                        journal, because its INSTANCE record would then
                                        replay onto the new map */
    uint64_t incarnation;            /* names one run of versions under this name: drawn
                                        like a lineage where the version starts at 1 (a
                                        load of a name not served, CreateScene,
                                        CreateInstance), kept wherever the version goes
                                        on (updates, and a reload that builds the scene
                                        again). A scene dropped and made again under its
                                        name is a new incarnation, whose versions start
                                        over: watchers tell the two apart by it */
    struct pd_scene *base;           /* an instance not changed since it was made: the
                                        snapshot that owns the grid, clearance, unit grids
                                        and labels it reads (retained, never written);
                                        NULL when this snapshot owns its structures */
    struct pd_scene_acct *acct;      /* the registry memory count it is charged to, or NULL */
    struct pd_scene_authored *authored;  /* the cells it was loaded or created with, shared
                                        by its versions; NULL until its first update
                                        (its grid is that state until then) */
    uint64_t charged;                /* bytes charged there (pd_scene_own_bytes) */
    int from_tiled;                  /* built from a Tiled map: tiled_stats says what its
                                        rule decided (versions and instances keep it) */
    pd_tiled_stats tiled_stats;
    struct pd_scene_writer *writer;  /* what the registry's updates of this scene share
                                        (their order, the retired version the next one
                                        writes into); made at its first update through
                                        the registry, NULL until then */
} pd_scene;

void pd_scene_retain(pd_scene *s);
void pd_scene_release(pd_scene *s);  /* frees on the last release; NULL is a no-op */

/* World point -> cell: floor((p - origin) / cell_size). Returns PD_OK or
 * PD_OUT_OF_BOUNDS (also for NaN / infinite / huge inputs); *cell is written
 * only on PD_OK. A point exactly on a cell's low edge belongs to that cell. */
pd_status pd_scene_world_to_cell(const pd_scene *s, double wx, double wy, pd_point *cell);
/* Cell -> world coordinates of the cell centre. */
void pd_scene_cell_center(const pd_scene *s, pd_point cell, double *wx, double *wy);
int pd_scene_allows_unit(const pd_scene *s, uint32_t unit_size);

/* The unit data for an allowed size, or NULL. */
const pd_scene_unit *pd_scene_unit_for(const pd_scene *s, uint32_t unit_size);

/* The structures a scene snapshot holds, in bytes, padding included. Terrain
 * costs share the grid's byte (0 blocked, 1..255 cost), so they add nothing;
 * a grid's bytes include its passability bitsets. A version made by a cell update holds the
 * same structures again (copied, then repaired). */
typedef enum pd_scene_structure {
    PD_SCENE_GRID = 0,               /* one byte per padded cell: passability and cost,
                                        and the grid's bitsets */
    PD_SCENE_CLEARANCE,              /* one byte per padded cell; only with a unit size > 1 */
    PD_SCENE_LABELS,                 /* component labels, per allowed unit size */
    PD_SCENE_UNIT_GRIDS,             /* unit grids of sizes > 1 (unit 1 searches the grid) */
    PD_SCENE_STRUCTURES
} pd_scene_structure;

/* Its name in --check-config and in /metrics' structure label. */
const char *pd_scene_structure_name(pd_scene_structure st);

typedef struct pd_scene_bytes {
    uint64_t by[PD_SCENE_STRUCTURES];
    uint64_t total;
} pd_scene_bytes;

void pd_scene_get_bytes(const pd_scene *s, pd_scene_bytes *out);

/* Memory this snapshot holds on its own: its struct, plus its structures
 * unless it shares them with a template (s->base). */
uint64_t pd_scene_own_bytes(const pd_scene *s);

/* Live obstacle updates (UpdateCells). */
typedef enum pd_update_op {
    PD_UPDATE_BLOCK = 0,             /* cells become blocked */
    PD_UPDATE_PASS = 1,              /* cells become passable with cost 1 */
    PD_UPDATE_COST = 2,              /* cells become passable with the given cost */
    PD_UPDATE_RESTORE = 3,           /* cells return to the scene's authored state (the
                                        map it was loaded or created with; an instance:
                                        its template's cells when it was made), cost
                                        included */
} pd_update_op;

/* Operations one update may carry (UpdateCells.ops): each names up to
 * PD_SCENE_MAX_UPDATE_CELLS cells, so this bounds one request's work. */
#define PD_SCENE_MAX_UPDATE_OPS 64u

/* Cells one update may name at most (rectangle area or list length): bounds
 * the validation, apply and repair work a single request can cause. */
#define PD_SCENE_MAX_UPDATE_CELLS (1024u * 1024u)

typedef struct pd_scene_update {
    pd_update_op op;
    uint8_t cost;                    /* PD_UPDATE_COST: 1..255 */
    int is_rect;                     /* 1: the rectangle; 0: the cell list */
    pd_point rect_min, rect_max;     /* inclusive; must lie inside the grid */
    const pd_point *cells;
    size_t n_cells;
} pd_scene_update;

typedef struct pd_scene_update_result {
    uint64_t version;                /* of the new snapshot */
    uint64_t incarnation;            /* of the scene updated (pd_scene.incarnation) */
    uint64_t cells_changed;          /* cells whose value actually changed */
    pd_point changed_min, changed_max;  /* with cells_changed > 0: the bounding rectangle
                                        of those cells (what a watcher hears) */
    uint64_t micros;                 /* copy + apply + local repair */
    uint64_t bytes_needed, bytes_held;  /* PD_LIMIT_EXCEEDED from a registry update: what
                                        its new version would take, and what the
                                        registry's snapshots held (limits.max_scene_bytes) */
} pd_scene_update_result;

/* Several operations applied in order as one new version (close door A,
 * open door B): the statuses of pd_scene_apply_update, checked for every
 * operation before any is applied; cells_changed counts every cell an
 * operation changed. n_ops 1..PD_SCENE_MAX_UPDATE_OPS. */
pd_status pd_scene_apply_updates(const pd_scene *s, const pd_scene_update *ops, size_t n_ops,
                                 pd_scene **out, pd_scene_update_result *res);

/* Builds the next version of s with the update applied: grid, clearance,
 * unit grids and component labels are copied and repaired for the changed
 * region only. s itself is untouched (readers keep using it). Returns PD_OK
 * with a new scene (refcount 1, version s->version + 1) in *out, or
 * PD_INVALID_ARGUMENT (bad op or cost, min > max, empty or oversized update,
 * NULL arguments), PD_OUT_OF_BOUNDS (a cell or the rectangle outside the
 * grid), PD_INTERNAL (allocation); on error *out is NULL.
 *
 * An update that changes no cell (every cell already has the value) makes no
 * new version: PD_OK with *out = NULL, res->version = s->version and
 * res->cells_changed = 0. res may be NULL. A cell listed twice counts once. */
pd_status pd_scene_apply_update(const pd_scene *s, const pd_scene_update *u, pd_scene **out,
                                pd_scene_update_result *res);

/* Loads one scene from its config entry (reads the map file). Returns NULL
 * with a reason ("scene 'town': maps/town.map:3:7: unexpected 'x'") on error.
 * A map with no walkable cell is refused (pd_scene_check_walkable): a map
 * read with the wrong layer or rule loads as solid wall, which serves
 * nothing. */
pd_scene *pd_scene_load(const pd_conf_scene *cs, char *err, size_t errlen);

/* What a scene built for a request (CreateScene) may cost, checked before
 * the work is done, and how the build is stopped early. */
typedef struct pd_scene_limits {
    uint64_t max_cells;              /* limits.max_scene_cells: a Tiled or LDtk map is
                                        refused on its header, before its layers are
                                        decoded; any map before its unit grids and
                                        labels are built; 0: no cap */
    uint64_t bytes_cap;              /* limits.max_scene_bytes, 0: no cap; with
                                        bytes_held, what the registry holds now: the
                                        scene's bytes (pd_scene_estimate_bytes) are
                                        checked against it before they are built */
    uint64_t bytes_held;
    pd_search_poll_fn poll;          /* asked while the map is parsed and between the
                                        derived structures; a status other than PD_OK
                                        stops the build with it; may be NULL */
    void *poll_user;
} pd_scene_limits;

/* The least a scene of width x height cells serving these unit sizes holds
 * (pd_scene_own_bytes): its grid, clearance, unit grids and one byte of
 * label per padded cell and unit size (labels take 1, 2 or 4 bytes, as
 * many components as there are). What CreateScene checks before deriving. */
uint64_t pd_scene_estimate_bytes(int32_t width, int32_t height, const uint32_t *unit_sizes,
                                 size_t n_unit_sizes);

/* A scene cs of width x height cells against lim's cells and bytes (NULL:
 * none): PD_OK, or PD_LIMIT_EXCEEDED with the reason in err ("scene 'x':
 * 1056 cells, limits.max_scene_cells is 1024"; "scene 'x': needs at least
 * N bytes, scenes hold H, limits.max_scene_bytes is M"). pd_scene_build
 * checks it once the map is parsed; CreateScene's raw cells before they
 * are built. */
pd_status pd_scene_check_limits(const pd_scene_limits *lim, const pd_conf_scene *cs, int32_t width,
                                int32_t height, char *err, size_t errlen);

/* Builds a scene from a map held in memory (CreateScene): the same checks
 * and parsers as pd_scene_load, without reading a file, within lim (NULL:
 * none). cs->map_path may be NULL (a Tiled map's external tilesets are
 * then refused); it only names the map in messages. NULL with the reason
 * in err on error, and in *status (may be NULL) PD_LIMIT_EXCEEDED (a cap
 * of lim), the poll's status, PD_INTERNAL (memory) or PD_INVALID_ARGUMENT
 * (the map). */
pd_scene *pd_scene_build(const pd_conf_scene *cs, const char *buf, size_t len,
                         const pd_scene_limits *lim, pd_status *status, char *err, size_t errlen);

/* Builds a scene from raw cells, row-major, width * height bytes: 0 blocked,
 * 1..255 passable with that cost (what GetSceneGrid returns). cs gives the
 * name, origin, cell size and unit sizes; its map fields are ignored. Cells
 * that are all blocked are built too (the journal replays any state a
 * scene was in); CreateScene refuses them with pd_scene_check_walkable. */
pd_scene *pd_scene_from_cells(const pd_conf_scene *cs, int32_t width, int32_t height,
                              const uint8_t *cells, char *err, size_t errlen);

/* 0 when s has a walkable cell; else -1 with the reason in err, naming
 * where the map came from (a path, "map", or NULL for raw cells) and, for
 * a Tiled map, the counted layers and what each rule decided
 * (pd_tiled_stats_format): "scene 'm': m.tmj: no walkable cell: layers
 * ground, walls: 1024 untagged (untagged_tiles: blocked)". */
int pd_scene_check_walkable(const pd_scene *s, const char *where, char *err, size_t errlen);

/* One line on a scene just built, for the log at load and CreateScene:
 * "24x16, 302 of 384 cells walkable (78.6%)", and for a Tiled map what
 * each rule decided ("; layers walls: 40 by property, 344 with no tile"). */
void pd_scene_describe(const pd_scene *s, char *buf, size_t len);

/* A new scene called `name` that reads tmpl's grid, clearance, unit grids
 * and labels without copying them (it retains the snapshot owning them):
 * a few hundred bytes until its first update copies them (an update builds
 * the next version from whatever the scene reads). Version 1, runtime set.
 * NULL when memory ran out or the name is empty or too long. */
pd_scene *pd_scene_instance(const pd_scene *tmpl, const char *name);

/* The grid of the cells s was loaded or created with, when an update has
 * changed s since (PD_UPDATE_RESTORE writes it back); NULL while s's own
 * grid is that state. Valid while s is held. */
const pd_grid *pd_scene_authored_grid(const pd_scene *s);

/* Gives s (made by pd_scene_from_cells and not published yet) authored
 * cells that differ from its grid: width * height bytes, row-major, of
 * its grid's shape. The journal's replay of a changed scene uses it.
 * Returns 0, or -1 when memory ran out. */
int pd_scene_set_authored(pd_scene *s, const uint8_t *cells);

typedef struct pd_registry pd_registry;

/* The named caps on scenes made at run time (config keys limits.max_scenes,
 * limits.max_scene_cells, limits.max_scene_bytes; pd_conf.h has the
 * defaults). 0 means no cap. */
typedef struct pd_registry_caps {
    uint32_t max_scenes;             /* scenes served, config and run-time together */
    uint64_t max_scene_cells;        /* width * height of one scene made by CreateScene */
    uint64_t max_scene_bytes;        /* memory every snapshot of this registry holds,
                                        (pd_registry_bytes), after the new scene */
} pd_registry_caps;

pd_registry *pd_registry_create(void);
void pd_registry_destroy(pd_registry *r);   /* releases its references */

/* Scenes of at most this many cells keep no spare between updates (see
 * pd_scene_update.c): a fresh copy of a 256 x 256 scene with units 1-3 costs tens
 * of microseconds, less than holding a second version of every small scene
 * (10,000 updated instances) is worth. */
#define PD_SCENE_SPARE_MIN_CELLS (256u * 256u)

/* Changes that threshold for scenes whose first update comes later (tests
 * run the spare's path on small maps with 0). */
void pd_registry_set_spare_min_cells(pd_registry *r, uint64_t cells);

/* Sets the caps pd_registry_add and pd_registry_instance check (any thread). */
void pd_registry_set_caps(pd_registry *r, const pd_registry_caps *caps);

/* The caps as pd_scene_build checks them for a scene about to be added:
 * max_scene_cells, max_scene_bytes and the bytes r holds now (poll left
 * NULL). */
void pd_registry_build_limits(pd_registry *r, pd_scene_limits *out);

/* Bytes every live snapshot charged to r holds right now (pd_scene_own_bytes
 * summed): served scenes, the updates' spares, and replaced snapshots that
 * searches or instances still hold. */
uint64_t pd_registry_bytes(const pd_registry *r);

/* Serves s (made by pd_scene_build, pd_scene_from_cells or
 * pd_scene_instance) under its name. Takes over the caller's reference in
 * every case: on an error s is released and the registry is as before.
 * Returns PD_OK, PD_SCENE_EXISTS (the name is served), PD_LIMIT_EXCEEDED (a
 * cap of pd_registry_caps; err names it), PD_INTERNAL (memory). */
pd_status pd_registry_add(pd_registry *r, pd_scene *s, char *err, size_t errlen);

/* Serves s under its name whatever is served now: it replaces a scene of
 * that name or joins the set, keeping s->runtime as it is, and no cap is
 * checked (the journal's replay puts back what was acknowledged before).
 * Takes over the caller's reference. PD_OK or PD_INTERNAL (memory; s is
 * released). */
pd_status pd_registry_put(pd_registry *r, pd_scene *s);

/* Serves a new instance of the scene `tmpl` under `name` (pd_scene_instance
 * of the version served now). PD_UNKNOWN_SCENE when tmpl is not served,
 * else as pd_registry_add. *version_out (may be NULL) gets the new scene's
 * version. */
pd_status pd_registry_instance(pd_registry *r, const char *name, const char *tmpl,
                               uint64_t *version_out, char *err, size_t errlen);

/* What must happen before a new scene is served (the journal's record of
 * it): fn runs under the registry's lock once every check passed, with the
 * scene about to be served and, for an instance, the template version it
 * copies (else NULL). Nonzero keeps the scene from ever being served: the
 * add answers PD_INTERNAL with fn's reason (written into err). */
typedef struct pd_registry_commit {
    int (*fn)(void *user, const pd_scene *made, const pd_scene *tmpl, char *err, size_t errlen);
    void *user;
} pd_registry_commit;

/* pd_registry_add and pd_registry_instance with a commit (NULL: none). */
pd_status pd_registry_add_committed(pd_registry *r, pd_scene *s, const pd_registry_commit *commit, char *err,
                                    size_t errlen);
pd_status pd_registry_instance_committed(pd_registry *r, const char *name, const char *tmpl,
                                         const pd_registry_commit *commit, uint64_t *version_out, char *err,
                                         size_t errlen);

/* Stops serving scene `name`; searches holding it finish on their snapshot.
 * PD_OK with the version it had in *version_out (may be NULL), or
 * PD_UNKNOWN_SCENE. Whether portals still name it is the world's business
 * (pd_world_store_drop checks before calling this). */
pd_status pd_registry_drop(pd_registry *r, const char *name, uint64_t *version_out);

/* Loads every scene of conf; all or nothing. On success the new set replaces
 * the old one atomically and 0 is returned; on failure the old set keeps
 * serving and -1 is returned with the reason in err. The same as
 * pd_registry_prepare followed by pd_registry_publish. */
int pd_registry_load(pd_registry *r, const pd_conf *conf, char *err, size_t errlen);

/* A complete set of loaded scenes that no registry serves yet. */
typedef struct pd_scene_set pd_scene_set;

/* The slow half of a load: reads every map of conf and builds its scenes
 * (grids, clearance, unit grids, labels), all or nothing, touching no
 * registry, so it may run on any thread while readers and updates go on.
 * Returns the set, owned by the caller until it is handed to
 * pd_registry_publish or pd_registry_discard; NULL with the reason in err
 * (a bad map, a name given twice, out of memory). conf is only read, and
 * may be freed once this returns. */
pd_scene_set *pd_registry_prepare(const pd_conf *conf, char *err, size_t errlen);

/* The same for a reload into r (the start-up load too: into an empty r),
 * stopped by pd_registry_stop_loads: a config scene whose definition did not
 * change is not built again but kept, with its version and every update
 * made to it since it was loaded. Its definition is what shapes it: the
 * grid its map parses to (so the map file, a Tiled map's external
 * tilesets and the entry's format rules all count, through what they
 * produce), its origin, cell size, unit sizes and "search". Only the map is
 * read and parsed for such a scene: its clearance, unit grids, labels and
 * search pick are the served ones. A scene r serves that was made at run
 * time is never kept by a config entry of its name (the config replaces
 * it). r is only read (any thread); the set holds a reference to each kept
 * snapshot, and pd_registry_publish carries on the version r serves then. */
pd_scene_set *pd_registry_prepare_reload(pd_registry *r, const pd_conf *conf, char *err,
                                         size_t errlen);

/* Stops the loads into r (pd_registry_prepare_reload): one running ends at
 * its map's next poll, failing with "... stopped while loading the map:
 * CANCELLED", and later ones fail at once. For a server that is stopping:
 * it then does not wait for a large map. Any thread. */
void pd_registry_stop_loads(pd_registry *r);

/* The quick half: the set replaces r's scenes atomically (a scene built
 * anew whose name was served before gets that version + 1, a kept scene
 * stays as r serves it now, updates since the prepare included) and the
 * old set's references are dropped. Scenes made at run time stay served
 * unless the set has a scene of the same name, which then replaces them.
 * Returns 0; or -1 when a scene the set keeps is no longer the one r
 * serves (dropped, or built again, since the prepare: a reload must then
 * prepare again), and r is unchanged. Takes ownership of set, which is
 * gone after the call either way. Serialised with other publishes and with
 * pd_registry_update. */
int pd_registry_publish(pd_registry *r, pd_scene_set *set);

/* Frees a set that will not be published. NULL is a no-op. */
void pd_registry_discard(pd_scene_set *set);

/* The scenes of a prepared set, sorted by name (*n_out of them; NULL when
 * empty), so work that must match the scenes about to be published (the
 * world's route tables) can be done before the set is. The set keeps its
 * references: the pointers are valid until it is published or discarded.
 * Reading them is safe from any thread until then. */
pd_scene *const *pd_scene_set_scenes(const pd_scene_set *set, size_t *n_out);

/* Whether the i-th scene of pd_scene_set_scenes is one the set keeps
 * (pd_registry_prepare_reload: a snapshot r served, not a new build). */
int pd_scene_set_kept(const pd_scene_set *set, size_t i);

/* How many scenes of the set are kept and how many were built. */
void pd_scene_set_counts(const pd_scene_set *set, size_t *kept, size_t *built);

/* Returns a retained scene or NULL when no scene has that name. */
pd_scene *pd_registry_acquire(pd_registry *r, const char *name);

/* Number of scenes and a retained snapshot of all of them, sorted by name.
 * Release each entry and free the array with pd_registry_release_list.
 * An empty registry (or an allocation failure) gives 0 and *out = NULL. */
size_t pd_registry_list(pd_registry *r, pd_scene ***out);
void pd_registry_release_list(pd_scene **list, size_t n);

/* Number of scenes served, without listing them (any thread). */
size_t pd_registry_count(pd_registry *r);

/* What the registry's changes (adds, drops, replacements) have cost since
 * it was made, in entries visited: index slots probed, and entries copied
 * or merged when its array grows or is sorted again. An add, a drop or a
 * lookup costs the same on average whatever the number of scenes (issue
 * 29, finding 13); tests count it rather than time it. */
uint64_t pd_registry_work(pd_registry *r);

/* Applies u to the current version of scene `name` and publishes the result
 * atomically; one scene's updates are serialised, and a reload between
 * building and serving a version makes the update start again, so none is
 * lost. Returns
 * PD_UNKNOWN_SCENE, PD_LIMIT_EXCEEDED (with no spare to write into, the new
 * version's copy would take the registry past limits.max_scene_bytes: an
 * instance's first update copies what it shared; checked before anything
 * is copied), or the statuses of pd_scene_apply_update; res->version is
 * the version now served (unchanged when the update changed no cell). The
 * copy and repair run on the calling thread: call it from a worker, never
 * from the event loop. */
pd_status pd_registry_update(pd_registry *r, const char *name, const pd_scene_update *u,
                             pd_scene_update_result *res);

/* The same with several operations as one version (pd_scene_apply_updates). */
pd_status pd_registry_update_many(pd_registry *r, const char *name, const pd_scene_update *ops,
                                  size_t n_ops, pd_scene_update_result *res);

/* What runs around the moment an update's version is served, while that
 * scene's next update waits (so calls come in the scene's version order):
 * the journal's append under its change lock. before_publish runs once the
 * version is built; nonzero refuses the update (nothing is served,
 * PD_INTERNAL). commit (may be NULL) runs under the registry's swap, only
 * when the version is about to be served (it changed a cell and the scene
 * was not replaced meanwhile): nonzero keeps the version from ever being
 * served (PD_INTERNAL), so a change the journal did not take is never read
 * and its version number is never shown to anyone. after_publish follows a
 * before_publish that let the update go, with published set when
 * res->version is the version served now (res->cells_changed 0: the update
 * changed nothing), clear when a reload or drop replaced the scene
 * meanwhile (the update then starts again, hooks included) or commit
 * refused it. */
typedef struct pd_registry_update_hooks {
    int (*before_publish)(void *user);
    int (*commit)(void *user, const pd_scene_update_result *res);
    void (*after_publish)(void *user, int published, const pd_scene_update_result *res);
    void *user;
} pd_registry_update_hooks;

/* pd_registry_update_many with hooks (NULL: none). Updates of different
 * scenes build their versions in parallel; one scene's run one at a time. */
pd_status pd_registry_update_hooked(pd_registry *r, const char *name, const pd_scene_update *ops,
                                    size_t n_ops, const pd_registry_update_hooks *hooks,
                                    pd_scene_update_result *res);

/* Several updates of one scene in order, each built on the version the one
 * before made (issue 32: a replica appends them to the shared log in one
 * pipeline, so a scene's updates queued during one append round trip cost
 * one more, not one each). Each item is an update of its own: its status
 * (pd_registry_update_many's) and, on PD_OK with cells changed, the
 * version it makes. They are applied in order to one private snapshot
 * (one copy, each item's repairs as it alone would make them), which
 * holds the last one's version, and not served yet; the hooks' commit,
 * under the registry's swap, sees them all and returns how many items
 * from the first may be served; the scene then serves the version the
 * last of those made (that snapshot, or - when the log took only a
 * prefix - the prefix applied again to a copy), and an
 * item after them that made a version is not served (its res.version is
 * what is served, cells_changed 0; the caller says why in its status).
 * before_publish runs once, after the builds, when some item made a
 * version (nonzero: none is served, those items PD_INTERNAL);
 * after_publish follows it with the count served and whether the scene
 * was still current (a reload or drop that replaced it meanwhile makes the
 * chain start again, hooks included). Returns PD_OK, or the status that
 * refused every item (PD_UNKNOWN_SCENE, PD_LIMIT_EXCEEDED, PD_INTERNAL;
 * PD_INVALID_ARGUMENT for n outside 1..PD_REGISTRY_CHAIN_MAX). */
/* Most items one chain takes. */
#define PD_REGISTRY_CHAIN_MAX 64u

typedef struct pd_registry_chain_item {
    const pd_scene_update *ops;
    size_t n_ops;
    pd_status status;               /* set by the call */
    pd_scene_update_result res;     /* set by the call */
} pd_registry_chain_item;

typedef struct pd_registry_chain_hooks {
    int (*before_publish)(void *user);
    size_t (*commit)(void *user, pd_registry_chain_item *items, size_t n);
    void (*after_publish)(void *user, size_t served, int current);
    void *user;
} pd_registry_chain_hooks;

pd_status pd_registry_update_chain(pd_registry *r, const char *name, pd_registry_chain_item *items, size_t n,
                                   const pd_registry_chain_hooks *hooks);

#endif
