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
 *    tile's centre, else is open. Any other tile is blocked, or open when
 *    untagged_open is set. Flip and rotation flags (the top four bits of a
 *    gid) are stripped first.
 *  - A cell: open with cost 1 when no counted layer has a tile there;
 *    blocked if any counted layer's tile there blocks; else the largest
 *    cost among its tiles.
 *  - Object colliders (when colliders is set, every object layer): a
 *    rectangle, ellipse, polygon or tile object covers the cells whose
 *    centre lies inside it (rotation applied; edges: left and top inside,
 *    right and bottom outside). It blocks; a tile object takes its tile's
 *    value instead; the object's class, then its properties, override that
 *    as they do for tiles (a cost adds that cost, an open value does
 *    nothing); objects never open a cell. Points and text have no area and are
 *    skipped; a polyline is refused (it has no inside: draw a polygon), and
 *    so is a template instance (its shape is in the .tx file).
 * Anything else that cannot be decided (a gid beyond every tileset, a layer
 * offset that does not line up with the grid, a property of the wrong type,
 * two chunks of one layer giving the same tile)
 * is refused with the JSON path, the layer's name and the cell.
 */
#ifndef PD_TILED_H
#define PD_TILED_H

#include <stddef.h>
#include <stdint.h>

#include "pd_grid.h"

/* Most cells a Tiled map may decode to. The decoded grid and one layer's
 * gids (5 bytes a cell) are what a map costs, whatever its file size, so
 * the cap is on cells: 64 Mi = 8192 x 8192, about 320 MiB while loading. */
#define PD_TILED_MAX_CELLS (64u * 1024u * 1024u)

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
    int untagged_open;                         /* 0: a tile nothing decides blocks */
    int colliders;                             /* 1: object layers add blockers */
    pd_tiled_class classes[PD_TILED_MAX_CLASSES]; /* "classes" of the config */
    size_t n_classes;                          /* 0: classes decide nothing */
} pd_tiled_rules;

/* The defaults above. */
void pd_tiled_rules_default(pd_tiled_rules *r);

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

/* The one entry point, for the config's scenes and for scenes created at
 * run time alike: parses buf[0..len) (the caller reads the file, or has the
 * map from a request): XML when it starts with '<', else JSON. Returns a
 * new grid, or NULL with a one-line reason in err ("$.layers[1] (layer
 * \"walls\"): cell (3, 7): gid 99 is beyond every tileset", "3:7: invalid
 * JSON"). On success *off_x, *off_y get the tile coordinates of cell (0, 0)
 * (0 but for an infinite map whose chunks start elsewhere): the scene adds
 * them, times its cell size, to its origin, as it does an LDtk level's
 * world position, so world coordinates are Tiled's pixel coordinates over
 * the tile size, times the cell size. origin, off_x, off_y and err may be
 * NULL. */
pd_grid *pd_tiled_load(const char *buf, size_t len, const pd_tiled_rules *rules,
                       const pd_tiled_origin *origin, double *off_x, double *off_y, char *err,
                       size_t errlen);

#endif
