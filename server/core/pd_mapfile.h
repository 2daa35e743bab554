/*
 * pd_mapfile.h - parsers that turn map file contents into a pd_grid.
 *
 * Parsers take a buffer (no file I/O here: the caller reads the file), accept
 * LF and CRLF line endings, and either return a complete grid or nothing: a
 * malformed map is refused with a 1-based line and column and a reason, never
 * half-loaded.
 *
 * Formats:
 *  - Moving AI ".map": header lines "type octile", "height H", "width W",
 *    "map", then H rows of exactly W characters. '.', 'G', 'S' are passable
 *    (cost 1); '@', 'O', 'T', 'W' are blocked. Any other character is an error.
 *  - Plain ASCII grid: rows of equal length, '.' passable, '#' blocked,
 *    '1'..'9' passable with that cost multiplier. Blank trailing lines are
 *    ignored; lines starting with ';' are comments.
 */
#ifndef PD_MAPFILE_H
#define PD_MAPFILE_H

#include <stddef.h>

#include "pd_grid.h"

typedef struct pd_parse_error {
    int line;            /* 1-based; 0 when the error is not tied to a line */
    int column;          /* 1-based; 0 when the error is not tied to a column */
    char message[128];
} pd_parse_error;

/* Per-character overrides for Moving AI maps (e.g. swamp 'S' costs 3). An
 * entry with set[c] != 0 makes character c mean cost[c]: 0 = blocked,
 * 1..255 = passable with that cost; it also admits characters the format
 * does not know. */
typedef struct pd_char_costs {
    uint8_t cost[256];
    uint8_t set[256];
} pd_char_costs;

/* On failure these return NULL and fill *err (err may be NULL). */
pd_grid *pd_map_parse_movingai(const char *buf, size_t len, pd_parse_error *err);
/* As pd_map_parse_movingai, with overrides (costs may be NULL). */
pd_grid *pd_map_parse_movingai_with(const char *buf, size_t len, const pd_char_costs *costs,
                                    pd_parse_error *err);
pd_grid *pd_map_parse_ascii(const char *buf, size_t len, pd_parse_error *err);

#endif
