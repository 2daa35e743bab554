/*
 * pd_ldtk.h - reads one level of an LDtk project (.ldtk, ldtk.io) into a
 * pd_grid from its IntGrid layers.
 *
 * LDtk marks collision and terrain with IntGrid layers: a grid of small
 * integers the designer names ("wall" = 1, "water" = 2, ...). pathd maps
 * each value to blocked or a cost through the scene's table; value 0 is an
 * empty cell (open, cost 1), and a value the table does not name is an
 * error naming the layer and the cell, never a guess. The reader lives in
 * the conf layer (cJSON) and does no file I/O.
 *
 * What is read: the level named by `level` (its "identifier"), else the
 * first level (inside "worlds" for multi-world projects); every IntGrid
 * layer of it (or the one named by `layer`), all of the same size, combined
 * as Tiled layers are (blocked wins, else the largest cost). The level's
 * world position plus the layer's offset, in cells, comes back so the
 * scene's origin can carry it. Levels saved in separate files
 * ("externalRelPath") are refused: save the project with the levels inside.
 */
#ifndef PD_LDTK_H
#define PD_LDTK_H

#include <stddef.h>
#include <stdint.h>

#include "pd_grid.h"
#include "pd_tiled.h"

typedef struct pd_ldtk_rules {
    char level[PD_TILED_MAX_NAME];   /* "" = the first level */
    char layer[PD_TILED_MAX_NAME];   /* "" = every IntGrid layer */
    uint8_t cost[256];               /* value -> 0 blocked, 1..255 cost ... */
    uint8_t cost_set[256];           /* ... where cost_set[value] != 0 */
} pd_ldtk_rules;

/* Parses buf[0..len). On success returns the grid and writes the level's
 * world offset in cells (worldX / gridSize plus the layer's pixel offset)
 * to off_x, off_y. NULL with "$.levels[0].layerInstances[1] (layer
 * \"Collisions\"): cell (3, 7): value 5 has no entry in costs" or
 * "3:7: invalid JSON" in err. err may be NULL. */
pd_grid *pd_ldtk_load(const char *buf, size_t len, const pd_ldtk_rules *rules, double *off_x,
                      double *off_y, char *err, size_t errlen);

/* pd_ldtk_load under ctl (pd_tiled.h; NULL: none): its cells cap is checked
 * on a layer's size, before the grid is allocated, and its poll asked
 * between layers and every PD_MAP_POLL_CELLS values. */
pd_grid *pd_ldtk_load_ctl(const char *buf, size_t len, const pd_ldtk_rules *rules,
                          pd_map_control *ctl, double *off_x, double *off_y, char *err,
                          size_t errlen);

#endif
