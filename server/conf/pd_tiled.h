/*
 * pd_tiled.h - reads Tiled JSON maps (.tmj / .json) into a pd_grid.
 *
 * Tiled (mapeditor.org) is the editor many 2D games draw their levels in, so
 * a scene can use the level file as it is instead of a converted copy. The
 * parser lives in the conf layer because that is the only layer allowed to
 * include cJSON.h; it does no file I/O (the scene layer reads the file).
 *
 * What is read:
 *  - orthogonal, finite maps ("infinite": false): "width" x "height" cells;
 *  - one tile layer: the one named by the scene's "layer", else the first
 *    tile layer (group layers are searched in order, depth first);
 *  - its "data" as a plain array of gids (encoding "csv" or none);
 *  - gid 0 (no tile) is passable with cost 1, any other gid is blocked,
 *    unless the tile carries properties in a tileset embedded in the map:
 *    `blocked` (bool) and `cost` (int 1..255). blocked=true wins; otherwise
 *    a cost makes the tile passable with that cost, and blocked=false alone
 *    makes it passable with cost 1. The flip and rotation flags in the top
 *    four bits of a gid are stripped first (Tiled's own loader does the same).
 *
 * Refused with a message naming the JSON path: other orientations, infinite
 * maps, base64 / compressed layer data ("unsupported encoding"), external
 * tilesets ("source"), malformed or out-of-range values, a missing layer.
 */
#ifndef PD_TILED_H
#define PD_TILED_H

#include <stddef.h>

#include "pd_grid.h"

/* Largest Tiled file we parse, in bytes. cJSON builds a tree node (about
 * 64 bytes) per gid, so the file size bounds memory at roughly 32x itself;
 * 32 MiB covers maps of several million tiles. */
#define PD_TILED_MAX_BYTES (32u * 1024u * 1024u)

/* Parses buf[0..len). layer = tile layer name, or NULL / "" for the first
 * tile layer. Returns a new grid, or NULL with a one-line reason in err
 * ("$.layers[1].data[37]: gid must be an integer in 0..4294967295",
 * "3:7: invalid JSON"). err may be NULL. */
pd_grid *pd_tiled_parse(const char *buf, size_t len, const char *layer, char *err, size_t errlen);

#endif
