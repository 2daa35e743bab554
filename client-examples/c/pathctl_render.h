/*
 * pathctl_render.h - PNG pictures of a grid with a path drawn on it, and the
 * `pathctl render` command built on them.
 *
 * A picture answers "why did the NPC walk there?" faster than a list of
 * waypoints: walls are dark, open ground is light, expensive ground is shaded
 * in between (greener the dearer), the path is a red line, the start a green
 * and the goal a blue marker. A cross-scene route is drawn on one of its
 * scenes: each leg in that scene is its own line (a route may come back to a
 * scene, and the walk between two visits happens elsewhere), with the portal
 * cells where it leaves and enters the scene marked in orange.
 *
 * The renderer (pdc_render_png, and pdc_render_png_multi for several lines
 * and any markers) is a pure function of a grid and what is drawn on it, so
 * it is testable without a server. `pathctl render --scene NAME` fetches the
 * scene's grid from the daemon (pdc_scene_grid: GetSceneGrid bands in the
 * same byte encoding, which fill a pdc_render_grid directly); with --map the
 * grid comes from a local map file instead (pdc_render_grid_load: Moving AI
 * .map or the plain ASCII format, parsed here because client code must not
 * link the daemon's libraries).
 *
 * Image size: a grid whose longer side exceeds PDC_RENDER_MAX_SIDE_PX cells is
 * box-filtered down so that side is PDC_RENDER_MAX_SIDE_PX pixels (aspect
 * kept; each pixel averages the cells it covers). A smaller grid is drawn
 * with a whole number of pixels per cell, the least that makes the longer
 * side at least PDC_RENDER_MIN_SIDE_PX pixels without passing the maximum.
 */
#ifndef PATHCTL_RENDER_H
#define PATHCTL_RENDER_H

#include <stddef.h>
#include <stdint.h>

#include "pathd_client.h"

/* Longest image side, in pixels: big enough to see corridors of a 1024-cell
 * map one pixel each, small enough to view and commit (at most ~3 MiB RGB). */
#define PDC_RENDER_MAX_SIDE_PX 1024
/* Smallest longer side a small grid is scaled up to, in pixels, so a 10x10
 * room shows its cells as clear squares and a 256-cell map gets 2 px a cell. */
#define PDC_RENDER_MIN_SIDE_PX 512
/* Largest grid side accepted, in cells: the daemon's own limit
 * (PD_GRID_MAX_SIDE), so any scene it serves can be drawn. */
#define PDC_RENDER_MAX_GRID_SIDE 16384
/* Largest map file read, in bytes: a 16384x16384 map plus line ends and a
 * header; anything bigger cannot be a valid map. */
#define PDC_RENDER_MAX_MAP_BYTES ((size_t)PDC_RENDER_MAX_GRID_SIDE * (PDC_RENDER_MAX_GRID_SIDE + 2) + 4096)
/* Most waypoints `pathctl render --path` takes on its command line. */
#define PDC_RENDER_MAX_PATH_POINTS 65536
/* Longest scene name `pathctl render --route` takes in SCENE:X,Y, in bytes:
 * far above any sensible name, small enough for a stack buffer. */
#define PDC_RENDER_MAX_SCENE_NAME 256

/* Cell byte values, as the daemon stores them and SceneGrid sends them. */
#define PDC_RENDER_CELL_BLOCKED 0
#define PDC_RENDER_CELL_FREE 1      /* 2..255: passable with that cost */

/* Colours (RGB), public so tests and docs can name them. */
#define PDC_RENDER_RGB_BLOCKED 0x262A34u
#define PDC_RENDER_RGB_FREE 0xF0EEE4u
#define PDC_RENDER_RGB_DEAREST 0x78965Fu  /* the grid's highest cost; lower costs blend towards FREE */
#define PDC_RENDER_RGB_PATH 0xDC1E28u
#define PDC_RENDER_RGB_START 0x00AA46u
#define PDC_RENDER_RGB_GOAL 0x1E5AE6u
#define PDC_RENDER_RGB_PORTAL 0xF08C00u   /* a route's portal exit and entry cells */
#define PDC_RENDER_RGB_OUTLINE 0xFFFFFFu  /* ring around the markers */

/* Results of the pdc_render_* functions; err says more. */
typedef enum pdc_render_status {
    PDC_RENDER_OK = 0,
    PDC_RENDER_ERR_ARG = -1,    /* bad grid, path or argument */
    PDC_RENDER_ERR_IO = -2,     /* a file could not be read or written */
    PDC_RENDER_ERR_PARSE = -3,  /* a map file is malformed (err names line and column) */
    PDC_RENDER_ERR_NOMEM = -4,
} pdc_render_status;

/* A grid: width*height cell bytes, row-major (cells[y * width + x]);
 * PDC_RENDER_CELL_BLOCKED, or 1..255 = passable with that cost.
 * Lifetime: cells is heap memory owned by the struct when it came from
 * pdc_render_grid_load/_parse; release it with pdc_render_grid_free. A grid
 * built by hand may point anywhere and is only read by pdc_render_png. */
typedef struct pdc_render_grid {
    int32_t width, height;
    uint8_t *cells;
} pdc_render_grid;

void pdc_render_grid_free(pdc_render_grid *g);

/* What to draw on the grid; every field may be zero (then just the grid).
 * Nothing is copied or freed. */
typedef struct pdc_render_path {
    const pdc_xy *points;       /* waypoints in order, joined by straight lines */
    size_t count;
    uint32_t unit_size;         /* the unit's side in cells (0 = 1); points, start
                                   and goal are its top-left cell, lines and
                                   markers go through its footprint's centre */
    int has_start, has_goal;
    pdc_xy start, goal;
} pdc_render_path;

typedef enum pdc_render_format {
    PDC_RENDER_FORMAT_MOVINGAI = 0, /* "type octile" .map: . G S passable; @ O T W blocked */
    PDC_RENDER_FORMAT_ASCII = 1,    /* rows of . # 1-9 (cost); ';' lines are comments */
} pdc_render_format;

/* The image size for a width x height grid (see the top of this file). */
void pdc_render_image_size(int32_t width, int32_t height, uint32_t *px_width, uint32_t *px_height);

/* Draws g with p (may be NULL) into an RGB PNG at path. Checks that the grid
 * is 1..PDC_RENDER_MAX_GRID_SIDE cells a side and that every waypoint and
 * marker footprint lies inside it. On failure no file is left behind and err
 * (may be NULL) says why, naming the file for I/O errors. */
int pdc_render_png(const char *path, const pdc_render_grid *g, const pdc_render_path *p,
                   char *err, size_t errlen);

/* One line of a drawing: waypoints in order, joined by straight segments.
 * Lines are never joined to each other. */
typedef struct pdc_render_line {
    const pdc_xy *points;
    size_t count;
} pdc_render_line;

/* A marker disc on a unit footprint, in the colour rgb (0xRRGGBB). */
typedef struct pdc_render_marker {
    pdc_xy at;
    uint32_t rgb;
} pdc_render_marker;

/* Several lines and markers (all counts may be zero). Lines are drawn first,
 * then the markers in order, so a later marker covers an earlier one. Nothing
 * is copied or freed. */
typedef struct pdc_render_drawing {
    const pdc_render_line *lines;
    size_t line_count;
    const pdc_render_marker *markers;
    size_t marker_count;
    uint32_t unit_size;         /* as in pdc_render_path */
} pdc_render_drawing;

/* Draws g with d (may be NULL) into an RGB PNG at path, with the same checks
 * and failure rules as pdc_render_png (every line's waypoints and every
 * marker's footprint must lie inside the grid). pdc_render_png is this with
 * one line and the start and goal markers. */
int pdc_render_png_multi(const char *path, const pdc_render_grid *g, const pdc_render_drawing *d,
                         char *err, size_t errlen);

/* Parses a map held in buf. costs (may be NULL) overrides Moving AI
 * characters as the daemon's scene "costs" setting does: costs_set[c] != 0
 * makes character c mean costs[c] (0 = blocked, 1..255 = cost). The ASCII
 * format ignores costs. On success *out owns a new grid. */
int pdc_render_grid_parse(const char *buf, size_t len, pdc_render_format format,
                          const uint8_t costs[256], const uint8_t costs_set[256],
                          pdc_render_grid *out, char *err, size_t errlen);

/* Reads and parses a map file (at most PDC_RENDER_MAX_MAP_BYTES). */
int pdc_render_grid_load(const char *file, pdc_render_format format,
                         const uint8_t costs[256], const uint8_t costs_set[256],
                         pdc_render_grid *out, char *err, size_t errlen);

/* pathctl's exit codes, the same numbers pathctl.c uses. */
#define PATHCTL_RENDER_EXIT_FAIL 1     /* non-OK answer, unreadable map, unwritable PNG */
#define PATHCTL_RENDER_EXIT_USAGE 2
#define PATHCTL_RENDER_EXIT_CONNECT 3
/* pathctl_render_main's answer when the command is not "render". */
#define PATHCTL_RENDER_NOT_MINE (-1)

/* The `render` lines of pathctl's usage text. */
extern const char pathctl_render_usage[];

/* Runs `pathctl [global options] render ...` from pathctl's own argv and
 * returns its exit code, or PATHCTL_RENDER_NOT_MINE when argv's command is
 * not "render". It reads the global options (--server, --timeout, --json)
 * itself and connects only when the picture needs the server (a scene's grid
 * or a path; one connection serves both), so pathctl's
 * main() calls it first:
 *     if ((code = pathctl_render_main(argc, argv)) != PATHCTL_RENDER_NOT_MINE) return code;
 */
int pathctl_render_main(int argc, char **argv);

#endif
