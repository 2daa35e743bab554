/*
 * pd_tiled.h - reads Tiled maps (.tmx XML and .tmj JSON) into a pd_grid.
 *
 * Tiled (mapeditor.org) is the editor many 2D games draw their levels in, so
 * a scene can use the level file as it is instead of a converted copy. The
 * reader lives in the conf layer because that is the only layer allowed to
 * include cJSON.h; .tmx and .tsx are converted to the same JSON tree first
 * (pd_tmx.h). The map itself comes in as a buffer (the scene layer reads
 * it); external tilesets are read here, from the map's directory.
 *
 * The walkability rule (config/README.md states it for users):
 *  - Orthogonal maps only. Finite maps give width x height cells; an
 *    infinite map gives the bounding box of the chunks of the counted tile
 *    layers, its top-left chunk corner being cell (0, 0); that corner's tile
 *    coordinates come back so the scene's origin can carry them.
 *  - Counted tile layers: every tile layer (group layers entered, hidden
 *    layers included), or only those named pd_tiled_rules.layer.
 *  - A tile's value: its tileset's properties decide (names configurable):
 *    blocked_property true blocks; else cost_property (int 1..255) makes it
 *    open with that cost; else blocked_property false or walkable_property
 *    true makes it open (cost 1); walkable_property false blocks. A tile
 *    none of these decide takes the value the classes table gives its class
 *    (Tiled's "type", saved as "class" by Tiled 1.9); a class the table does
 *    not name decides nothing. A tile with none of these but collision
 *    shapes (Tiled's tile collision editor) blocks when a shape covers the
 *    tile's centre, else is open. Any other tile is open, or blocked when
 *    untagged_open is 0 (for tilesets that mark floors, walkable_property,
 *    rather than walls). Flip and rotation flags (the top four bits of a
 *    gid) are stripped first.
 *  - A cell: open with cost 1 when no counted layer has a tile there;
 *    blocked if any counted layer's tile there blocks; else the largest
 *    cost among its tiles.
 *  - Object colliders (when colliders is set, every object layer): a
 *    rectangle, ellipse, polygon or tile object covers the cells whose
 *    centre lies inside it (rotation applied; edges: left and top inside,
 *    right and bottom outside, in the object's frame; a rotated polygon's
 *    in the map's). It blocks; a tile object takes its tile's
 *    value instead (drawn as Tiled draws it: placed by its tileset's
 *    objectalignment, moved by its tileoffset scaled with the object, its
 *    tile's size, an image collection's tile's its image's, when it gives
 *    a width or height of 0 or none); the object's class, then its properties, override that
 *    as they do for tiles (a cost adds that cost, an open value does
 *    nothing); objects never open a cell. Points and text have no area and are
 *    skipped; a polyline is refused (it has no inside: draw a polygon), and
 *    so is a template instance (its shape is in the .tx file). What the
 *    colliders cost together is bounded (PD_TILED_COLLIDER_WORK_PER_CELL).
 * Anything else that cannot be decided (a gid beyond every tileset or in a
 * gap of an image collection's ids, a layer offset that does not line up
 * with the grid, up to the rounding of the offsets' sum, a property of the
 * wrong type, two chunks of one layer giving the same tile) is refused with
 * the JSON path, the layer's name and the cell.
 */
#ifndef PD_TILED_H
#define PD_TILED_H

#include <stddef.h>
#include <stdint.h>

#include "pd_grid.h"
#include "pd_status.h"

/* Most cells a Tiled map may decode to. The decoded grid, one layer's gids
 * and, when stats are asked for, the rule that decided each cell (6 bytes
 * a cell) are what a map costs, whatever its file size, so the cap is on
 * cells: 64 Mi = 8192 x 8192, about 384 MiB while loading. */
#define PD_TILED_MAX_CELLS (64u * 1024u * 1024u)

/* Object colliders: the cell tests a map's colliders may cost together, per
 * cell of the map, plus a floor for small maps. An object costs the cells
 * of its bounding box (clipped to the map), a polygon also its points and
 * the rows each of its edges crosses (the scanline fill's crossings), so
 * the bound covers objects x cells and points x rows alike; it is checked
 * for every collider before any is drawn. 16 per cell is a map covered
 * sixteen times over; real levels draw each cell's wall once or twice. */
#define PD_TILED_COLLIDER_WORK_PER_CELL 16u
#define PD_TILED_COLLIDER_WORK_BASE (16u * 1024u * 1024u)

/* Cells of work (decoded tiles, collider cells) between two calls of a
 * pd_map_control's poll. */
#define PD_MAP_POLL_CELLS 65536u

/* Largest map or tileset file read, in bytes. Only a guard against reading
 * something that is not a map (a device, a huge log): memory is bounded by
 * PD_TILED_MAX_CELLS. A CSV layer of 64 Mi cells runs to ~700 MB. */
#define PD_TILED_MAX_FILE_BYTES (1024u * 1024u * 1024u)

/* Longest layer or property name, in bytes incl. NUL: labels typed in an
 * editor, never paragraphs. */
#define PD_TILED_MAX_NAME 128

/* Most entries of a classes table: a tileset's terrain kinds, a few tens. */
#define PD_TILED_MAX_CLASSES 32

/* One entry of the classes table: tiles and objects of class `name` are
 * `cell` (0 = blocked, 1..255 = open with that cost). */
typedef struct pd_tiled_class {
    char name[PD_TILED_MAX_NAME];
    uint8_t cell;
} pd_tiled_class;

typedef struct pd_tiled_rules {
    char layer[PD_TILED_MAX_NAME];             /* "" = every tile layer counts */
    char blocked_property[PD_TILED_MAX_NAME];  /* "blocked" (bool) */
    char cost_property[PD_TILED_MAX_NAME];     /* "cost" (int 1..255) */
    char walkable_property[PD_TILED_MAX_NAME]; /* "" = none (bool, true = open) */
    int untagged_open;                         /* 1 (default): a tile nothing decides is
                                                  open; 0: it blocks */
    int colliders;                             /* 1: object layers add blockers */
    pd_tiled_class classes[PD_TILED_MAX_CLASSES]; /* "classes" of the config */
    size_t n_classes;                          /* 0: classes decide nothing */
} pd_tiled_rules;

/* The defaults above. */
void pd_tiled_rules_default(pd_tiled_rules *r);

/* Which rule decided a cell (pd_tiled_stats): that of the tile or object
 * that gave the cell its value, the first in layer order when several
 * give the same value. */
typedef enum pd_tiled_by {
    PD_TILED_BY_PROPERTY = 0,        /* blocked, cost or walkable property */
    PD_TILED_BY_CLASS,               /* the classes table */
    PD_TILED_BY_SHAPE,               /* a tile's collision shapes */
    PD_TILED_BY_OBJECT,              /* an object collider's own area */
    PD_TILED_BY_UNTAGGED,            /* a tile nothing decides: untagged_open */
    PD_TILED_BY_NO_TILE,             /* no tile in any counted layer: open ground */
    PD_TILED_BY_KINDS
} pd_tiled_by;

/* Room for the counted layers' names in pd_tiled_stats, incl. NUL. */
#define PD_TILED_STATS_LAYERS 96

/* What the rule decided, for the log and for the message that refuses a
 * map with no walkable cell: a map that loads as solid wall should say
 * why (the layers read, the rule that walled it). */
typedef struct pd_tiled_stats {
    uint64_t cells[PD_TILED_BY_KINDS];  /* cells each rule decided; they add up to
                                           width x height */
    int untagged_open;                  /* the rules' untagged_open */
    char layers[PD_TILED_STATS_LAYERS]; /* the counted layers' names (a nameless one:
                                           its JSON path), ", " between them, "..."
                                           when cut */
} pd_tiled_stats;

/* Writes the counted layers and the cells each rule decided, the rules
 * that decided none left out, into buf (cut to len): "layers ground,
 * walls: 12 by property, 52 untagged (untagged_tiles: open)"; the rules'
 * words: by property, by class, by collision shape, by object, untagged,
 * with no tile. */
void pd_tiled_stats_format(const pd_tiled_stats *st, char *buf, size_t len);

/* 1 when the map loads all open with no tile having decided a cell by
 * itself (property, class, collision shape or tile object): every tile
 * fell to untagged_tiles "open". Most often a misspelt blocked_property or
 * a class name the tileset does not use; --check-config and the load's log
 * say so. Not with untagged_tiles "blocked": a collision layer whose every
 * painted tile is a wall (the floor left empty) needs no property at all,
 * and a misspelt walkable_property walls the map, which is refused. */
int pd_tiled_stats_untagged_only(const pd_tiled_stats *st);

/* Where the map came from, for external tilesets: the map's directory
 * (map_path's, or map_dir when map_path is NULL: a map sent as a buffer,
 * with no file of its own) resolves a tileset's "source", which must lie
 * inside root_dir's tree or the map directory's own (compared after
 * realpath, so links and ".." are followed first). Both NULL: external
 * tilesets are refused. */
typedef struct pd_tiled_origin {
    const char *map_path;
    const char *root_dir;
    const char *map_dir;
} pd_tiled_origin;

/* What a load may cost beyond the format's own bounds, and how it is
 * stopped early: for a map a request sends (CreateScene), which the
 * registry's caps bound and a cancel may stop. NULL: the format's bounds
 * only (the config's maps). */
typedef struct pd_map_control {
    uint64_t max_cells;              /* most cells the map may have: width x height (an
                                        infinite map: its chunks' bounding box), checked
                                        before anything is decoded or allocated for them;
                                        0: PD_TILED_MAX_CELLS alone */
    const char *max_cells_name;      /* what refusals call max_cells
                                        ("limits.max_scene_cells") */
    pd_status (*poll)(void *user);   /* asked between layers, chunks and objects and every
                                        PD_MAP_POLL_CELLS cells of work; a status other
                                        than PD_OK stops the load with it; may be NULL */
    void *poll_user;
    pd_status status;                /* out: PD_OK with a grid, else why none:
                                        PD_LIMIT_EXCEEDED (max_cells), the poll's status,
                                        PD_INVALID_ARGUMENT (anything else) */
} pd_map_control;

/* The cells cap a load under ctl (may be NULL) checks: ctl's max_cells
 * when it is set below PD_TILED_MAX_CELLS, else PD_TILED_MAX_CELLS; *name
 * gets what refusals call it, *named whether it is ctl's (a refusal then
 * sets ctl->status to PD_LIMIT_EXCEEDED). */
uint64_t pd_map_control_max_cells(const pd_map_control *ctl, const char **name, int *named);

/* Asks ctl's poll (ctl or its poll may be NULL: 0); nonzero when it says
 * stop, its status then in ctl->status. */
int pd_map_control_stop(pd_map_control *ctl);

/* The one entry point, for the config's scenes and for scenes created at
 * run time alike: parses buf[0..len) (the caller reads the file, or has the
 * map from a request): XML when it starts with '<', else JSON. Returns a
 * new grid, or NULL with a one-line reason in err ("$.layers[1] (layer
 * \"walls\"): cell (3, 7): gid 99 is beyond every tileset", "3:7: invalid
 * JSON"). On success *off_x, *off_y get the tile coordinates of cell (0, 0)
 * (0 but for an infinite map whose chunks start elsewhere): the scene adds
 * them, times its cell size, to its origin, as it does an LDtk level's
 * world position, so world coordinates are Tiled's pixel coordinates over
 * the tile size, times the cell size, and *stats (when not NULL) gets what
 * each rule decided. origin, off_x, off_y, stats and err may be NULL. */
pd_grid *pd_tiled_load(const char *buf, size_t len, const pd_tiled_rules *rules,
                       const pd_tiled_origin *origin, double *off_x, double *off_y,
                       pd_tiled_stats *stats, char *err, size_t errlen);

/* pd_tiled_load under ctl (NULL: as pd_tiled_load). */
pd_grid *pd_tiled_load_ctl(const char *buf, size_t len, const pd_tiled_rules *rules,
                           const pd_tiled_origin *origin, pd_map_control *ctl, double *off_x,
                           double *off_y, pd_tiled_stats *stats, char *err, size_t errlen);

#endif
