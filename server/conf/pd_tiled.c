/*
 * pd_tiled.c - Tiled map reader: the walkability rule of pd_tiled.h applied
 * to the JSON tree of a .tmj, or of a .tmx converted by pd_tmx.c.
 *
 * The map is validated as it is read, and every refusal names the JSON path
 * of the offending value (with the layer's name and the cell where there is
 * one), so a level designer can find the problem in the file without
 * reading this code. Keys pathd does not need (images, editor settings) are
 * ignored: Tiled writes many of them and adds more with each release.
 */
/* realpath(3), for keeping external tilesets inside the config directory. */
#define _XOPEN_SOURCE 700

#include "pd_tiled.h"

#include <cjson/cJSON.h>

#include "pd_conf_json.h"
#include "pd_reason.h"
#include "pd_tdata.h"
#include "pd_tmx.h"
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Tiled keeps flip (horizontal, vertical, diagonal) and hexagonal-rotation
 * flags in the top four bits of a gid; the tile itself is the rest. */
#define PD_TILED_FLAG_BITS 0xF0000000u
/* Largest gid or tile id without the flag bits. */
#define PD_TILED_MAX_TILE_ID 0x0FFFFFFFu
/* Largest value a gid may have with its flags: an unsigned 32-bit number. */
#define PD_TILED_MAX_RAW_GID 4294967295.0
/* Group layers nested deeper than this are refused: real maps nest a few
 * levels, and the bound keeps the recursive layer walk shallow. */
#define PD_TILED_MAX_GROUP_DEPTH 32
/* Chunk coordinates of an infinite map: far beyond any editor session, and
 * small enough that their sums cannot overflow. */
#define PD_TILED_MAX_CHUNK_COORD 1e9
/* Degrees to radians (M_PI is not in strict C11). */
#define PD_TILED_DEG (3.14159265358979323846 / 180.0)
/* Most points a polygon collider may have: hand-drawn shapes have tens. */
#define PD_TILED_MAX_POLYGON_POINTS 65536
/* How far from zero a counted layer's summed offset (its own plus its
 * groups', pd__walk_layers) may be and still line up, as a fraction of the
 * sum of the offsets' magnitudes on the same axis: the rounding error of
 * the sum, not a leeway. Each of the at most 33 offsets
 * (PD_TILED_MAX_GROUP_DEPTH groups and the layer) is rounded once when its
 * decimal is read and once when added, each time by at most half an ulp
 * (2^-53 of its magnitude), so a sum that is zero in the file comes out
 * within 66 x 2^-53 < 2^-46 of that sum of magnitudes: 0.1 + 0.2 - 0.3 is
 * 5.55e-17 px. A real offset is far outside it (0.001 px among offsets of
 * a million pixels: 2^-46 of them is 1.4e-8 px), so it is still refused. */
#define PD_TILED_OFFSET_ROUNDING 0x1p-46

typedef struct pd__tctx {
    char *err;
    size_t errlen;
    const pd_tiled_rules *rules;
    pd_map_control *ctl;         /* the caller's caps and poll, or NULL */
    const char *source;          /* external tileset being read, for messages; else NULL */
    double tile_w, tile_h;       /* the map's tile size in pixels */
    int64_t min_x, min_y;        /* tile coordinates of cell (0, 0) (infinite maps) */
} pd__tctx;

/* A tile whose properties or collision shapes decide its cell value. */
typedef struct pd__tile_rule {
    uint32_t id;
    uint8_t cell;                /* 0 = blocked, 1..255 = passable with that cost */
    uint8_t by;                  /* the pd_tiled_by that decided it */
} pd__tile_rule;

/* A tile of an image collection: its id (first, for pd__cmp_id) and its
 * size, its image's (the tileset's tile size is only the largest of them):
 * Tiled draws a tile object of it at that size when the object gives
 * none, and scales the tileoffset by the object's size over it. 0: not
 * given (the tileset's tile size is taken). */
typedef struct pd__tile_image {
    uint32_t id;
    double w, h;
} pd__tile_image;

typedef struct pd__tileset {
    uint32_t firstgid;
    uint32_t tilecount;          /* tiles in the set, when has_tilecount */
    int has_tilecount;           /* 0: not given, the tileset runs to the next one */
    pd__tile_rule *rules;        /* sorted by id */
    size_t n_rules;
    /* Where a tile object of this set stands on its (x, y), as fractions
     * of its width left of it and of its height above it: Tiled's
     * objectalignment, bottomleft (0, 1) when unspecified (orthogonal). */
    double align_x, align_y;
    /* Its tile size (pixels; the map's when not given): the size of a tile
     * object that gives none (old TMX), as Tiled draws it. */
    double tile_w, tile_h;
    /* Its tileoffset (pixels, x right, y down): Tiled draws its tiles that
     * far from where they stand, a tile object's too (scaled with it). */
    double offset_x, offset_y;
    /* An image collection's tiles, sorted by id (NULL for a tileset cut
     * from one image): removing tiles in Tiled leaves gaps, and a gid in a
     * gap is no tile. */
    struct pd__tile_image *images;
    size_t n_images;
} pd__tileset;

typedef struct pd__tilesets {
    pd__tileset *sets;           /* sorted by firstgid */
    size_t n;
} pd__tilesets;

/* Writes "path: reason" and returns -1, so callers can `return pd__tfail(...)`. */
static int pd__tfail(const pd__tctx *ctx, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pd_conf_json_vfail(ctx->err, ctx->errlen, ctx->source, path, fmt, ap);
    va_end(ap);
    return -1;
}

/* Reads the whole number at obj.key (path names obj) in [lo, hi]. */
static int pd__tget_int(const pd__tctx *ctx, const cJSON *obj, const char *path, const char *key,
                        double lo, double hi, double *out)
{
    return pd_conf_json_get_int(ctx->err, ctx->errlen, ctx->source, obj, path, key, lo, hi, out);
}

static int pd__tget_uint(const pd__tctx *ctx, const cJSON *obj, const char *path, const char *key,
                         double lo, double hi, uint32_t *out)
{
    double d;
    if (pd__tget_int(ctx, obj, path, key, lo, hi, &d) != 0)
        return -1;
    *out = (uint32_t)d;
    return 0;
}

/* An optional finite number; *out keeps its default when absent. */
static int pd__tget_number(const pd__tctx *ctx, const cJSON *obj, const char *path,
                           const char *key, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v)
        return 0;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) {
        char child[PD_CONF_JSON_PATH_MAX];
        pd_conf_json_key(child, path, key);
        return pd__tfail(ctx, child, "must be a finite number, not %s", pd_conf_json_type(v));
    }
    *out = v->valuedouble;
    return 0;
}

/* An optional string member; *out is NULL when absent. */
static int pd__tget_string(const pd__tctx *ctx, const cJSON *obj, const char *path,
                           const char *key, const char **out)
{
    *out = NULL;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v)
        return 0;
    if (!cJSON_IsString(v) || !v->valuestring) {
        char child[PD_CONF_JSON_PATH_MAX];
        pd_conf_json_key(child, path, key);
        return pd__tfail(ctx, child, "must be a string, not %s", pd_conf_json_type(v));
    }
    *out = v->valuestring;
    return 0;
}

/* One bool property, given at most once. */
static int pd__prop_bool(const pd__tctx *ctx, const cJSON *p, const char *path, const char *name,
                         const char *type, int *set, int *value)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(p, "value");
    if (*set)
        return pd__tfail(ctx, path, "property \"%s\" given more than once", name);
    if ((type && strcmp(type, "bool") != 0) || !cJSON_IsBool(v))
        return pd__tfail(ctx, path, "\"%s\" must be a bool property", name);
    *set = 1;
    *value = cJSON_IsTrue(v);
    return 0;
}

/* Reads a properties array. *has is set when the configured blocked, cost
 * or walkable property decides the cell value, which goes to *cell. */
static int pd__parse_properties(const pd__tctx *ctx, const cJSON *props, const char *path,
                                int *has, uint8_t *cell)
{
    const pd_tiled_rules *r = ctx->rules;
    char child[PD_CONF_JSON_PATH_MAX];
    int blocked_set = 0, blocked = 0, cost_set = 0, walk_set = 0, walk = 0;
    uint32_t cost = 0;
    *has = 0;
    if (!cJSON_IsArray(props))
        return pd__tfail(ctx, path, "must be an array of {name, type, value} (Tiled 1.2+), not %s",
                         pd_conf_json_type(props));
    size_t i = 0;
    for (const cJSON *p = props->child; p; p = p->next, i++) {
        pd_conf_json_index(child, path, i);
        if (!cJSON_IsObject(p))
            return pd__tfail(ctx, child, "must be an object, not %s", pd_conf_json_type(p));
        const char *name = NULL, *type = NULL;
        if (pd__tget_string(ctx, p, child, "name", &name) != 0 ||
            pd__tget_string(ctx, p, child, "type", &type) != 0)
            return -1;
        if (!name) {
            char name_path[PD_CONF_JSON_PATH_MAX];
            pd_conf_json_key(name_path, child, "name");
            return pd__tfail(ctx, name_path, "is required");
        }
        char value_path[PD_CONF_JSON_PATH_MAX];
        pd_conf_json_key(value_path, child, "value");
        if (strcmp(name, r->blocked_property) == 0) {
            if (pd__prop_bool(ctx, p, blocked_set ? child : value_path, name, type, &blocked_set,
                              &blocked) != 0)
                return -1;
        } else if (r->walkable_property[0] && strcmp(name, r->walkable_property) == 0) {
            if (pd__prop_bool(ctx, p, walk_set ? child : value_path, name, type, &walk_set,
                              &walk) != 0)
                return -1;
        } else if (strcmp(name, r->cost_property) == 0) {
            if (cost_set)
                return pd__tfail(ctx, child, "property \"%s\" given more than once", name);
            if (type && strcmp(type, "int") != 0)
                return pd__tfail(ctx, value_path, "\"%s\" must be an int property, not %s", name,
                                 type);
            if (pd__tget_uint(ctx, p, child, "value", 1, 255, &cost) != 0)
                return -1;
            cost_set = 1;
        }
    }
    if (blocked_set && walk_set && blocked == walk)
        return pd__tfail(ctx, path, "\"%s\" and \"%s\" contradict each other",
                         r->blocked_property, r->walkable_property);
    *has = 1;
    if ((blocked_set && blocked) || (walk_set && !walk))
        *cell = PD_CELL_BLOCKED;
    else if (cost_set)
        *cell = (uint8_t)cost;
    else if (blocked_set || walk_set)
        *cell = PD_CELL_FREE;
    else
        *has = 0;
    return 0;
}

/* A tile's or object's class: "type" (Tiled up to 1.8 and from 1.10) or
 * "class" (Tiled 1.9). *has is set when the classes table names it, its
 * value going to *cell; a class the table does not name decides nothing. */
static int pd__parse_class(const pd__tctx *ctx, const cJSON *obj, const char *path, int *has,
                           uint8_t *cell)
{
    const pd_tiled_rules *r = ctx->rules;
    const char *cls = NULL, *type = NULL;
    *has = 0;
    if (pd__tget_string(ctx, obj, path, "class", &cls) != 0 ||
        pd__tget_string(ctx, obj, path, "type", &type) != 0)
        return -1;
    if (cls && type && strcmp(cls, type) != 0)
        return pd__tfail(ctx, path, "class \"%s\" and type \"%s\" disagree (both name the class)",
                         cls, type);
    const char *name = cls ? cls : type;
    for (size_t i = 0; name && name[0] && i < r->n_classes; i++) {
        if (strcmp(name, r->classes[i].name) == 0) {
            *has = 1;
            *cell = r->classes[i].cell;
            break;
        }
    }
    return 0;
}

/* ---- shapes ---- */

enum { PD__SHAPE_NONE, PD__SHAPE_RECT, PD__SHAPE_ELLIPSE, PD__SHAPE_POLYGON };

/* An object's area in its own frame: x right, y down from (x, y), turned
 * clockwise by rotation degrees around (x, y), as Tiled draws it. */
typedef struct pd__shape {
    int kind;
    double x, y, cos_r, sin_r;
    double x0, y0, x1, y1;       /* local bounding box; the rectangle itself */
    double *pts;                 /* polygon: n_pts (x, y) pairs, local */
    size_t n_pts;
    uint32_t gid;                /* tile object: its raw gid, else 0 */
} pd__shape;

/* Reads an object's shape. NONE for points and text (no area). */
static int pd__parse_shape(const pd__tctx *ctx, const cJSON *obj, const char *path, pd__shape *s)
{
    memset(s, 0, sizeof *s);
    double w = 0, h = 0, rot = 0;
    char child[PD_CONF_JSON_PATH_MAX];
    if (!cJSON_IsObject(obj))
        return pd__tfail(ctx, path, "must be an object, not %s", pd_conf_json_type(obj));
    if (pd__tget_number(ctx, obj, path, "x", &s->x) != 0 ||
        pd__tget_number(ctx, obj, path, "y", &s->y) != 0 ||
        pd__tget_number(ctx, obj, path, "width", &w) != 0 ||
        pd__tget_number(ctx, obj, path, "height", &h) != 0 ||
        pd__tget_number(ctx, obj, path, "rotation", &rot) != 0)
        return -1;
    if (w < 0 || h < 0)
        return pd__tfail(ctx, path, "width and height must not be negative");
    /* A template instance keeps its shape in the .tx file; read without it,
     * the object would silently cover nothing. */
    if (cJSON_GetObjectItemCaseSensitive(obj, "template")) {
        pd_conf_json_key(child, path, "template");
        return pd__tfail(ctx, child, "object templates are not read; detach the template in "
                                     "Tiled (Detach Template) or export with templates "
                                     "resolved");
    }
    s->cos_r = cos(rot * PD_TILED_DEG);
    s->sin_r = sin(rot * PD_TILED_DEG);
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(obj, "point")) ||
        cJSON_GetObjectItemCaseSensitive(obj, "text"))
        return 0;
    if (cJSON_GetObjectItemCaseSensitive(obj, "polyline")) {
        pd_conf_json_key(child, path, "polyline");
        return pd__tfail(ctx, child, "a polyline has no inside to block; draw a polygon");
    }
    const cJSON *poly = cJSON_GetObjectItemCaseSensitive(obj, "polygon");
    if (poly) {
        pd_conf_json_key(child, path, "polygon");
        int n = cJSON_IsArray(poly) ? cJSON_GetArraySize(poly) : -1;
        if (n < 3 || n > PD_TILED_MAX_POLYGON_POINTS)
            return pd__tfail(ctx, child, "must be an array of 3..%d points {x, y}",
                             PD_TILED_MAX_POLYGON_POINTS);
        s->pts = malloc((size_t)n * 2 * sizeof *s->pts);
        if (!s->pts)
            return pd__tfail(ctx, child, "out of memory");
        s->kind = PD__SHAPE_POLYGON;
        s->x0 = s->y0 = INFINITY;
        s->x1 = s->y1 = -INFINITY;
        char pt_path[PD_CONF_JSON_PATH_MAX];
        for (const cJSON *p = poly->child; p; p = p->next, s->n_pts++) {
            pd_conf_json_index(pt_path, child, s->n_pts);
            double px = NAN, py = NAN;
            if (!cJSON_IsObject(p))
                return pd__tfail(ctx, pt_path, "must be a point {x, y}");
            if (pd__tget_number(ctx, p, pt_path, "x", &px) != 0 ||
                pd__tget_number(ctx, p, pt_path, "y", &py) != 0)
                return -1;
            if (isnan(px) || isnan(py))
                return pd__tfail(ctx, pt_path, "must be a point {x, y}");
            s->pts[2 * s->n_pts] = px;
            s->pts[2 * s->n_pts + 1] = py;
            s->x0 = fmin(s->x0, px);
            s->y0 = fmin(s->y0, py);
            s->x1 = fmax(s->x1, px);
            s->y1 = fmax(s->y1, py);
        }
        return 0;
    }
    const cJSON *gid = cJSON_GetObjectItemCaseSensitive(obj, "gid");
    if (gid) {
        /* A tile object stands on its bottom-left corner. */
        if (pd__tget_uint(ctx, obj, path, "gid", 0, PD_TILED_MAX_RAW_GID, &s->gid) != 0)
            return -1;
        s->kind = PD__SHAPE_RECT;
        s->x1 = w;
        s->y0 = -h;
        return 0;
    }
    s->kind = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(obj, "ellipse")) ? PD__SHAPE_ELLIPSE
                                                                              : PD__SHAPE_RECT;
    s->x1 = w;
    s->y1 = h;
    return 0;
}

/* The point (px, py) (map pixels) in the shape's own frame. */
static void pd__shape_local(const pd__shape *s, double px, double py, double *lx, double *ly)
{
    double dx = px - s->x, dy = py - s->y;
    *lx = s->cos_r * dx + s->sin_r * dy;
    *ly = -s->sin_r * dx + s->cos_r * dy;
}

/* Whether the point (px, py) (map pixels) lies inside the shape: the rule
 * itself, cell by cell (pd__polygon_fill draws a polygon with it row by
 * row, to the same cells). */
static int pd__shape_covers(const pd__shape *s, double px, double py)
{
    double lx, ly;
    pd__shape_local(s, px, py, &lx, &ly);
    switch (s->kind) {
    case PD__SHAPE_RECT:
        return lx >= s->x0 && lx < s->x1 && ly >= s->y0 && ly < s->y1;
    case PD__SHAPE_ELLIPSE: {
        double rx = s->x1 / 2, ry = s->y1 / 2;
        if (rx <= 0 || ry <= 0)
            return 0;
        double ex = (lx - rx) / rx, ey = (ly - ry) / ry;
        return ex * ex + ey * ey < 1.0;
    }
    case PD__SHAPE_POLYGON: {
        int inside = 0;
        for (size_t i = 0, j = s->n_pts - 1; i < s->n_pts; j = i++) {
            double xi = s->pts[2 * i], yi = s->pts[2 * i + 1];
            double xj = s->pts[2 * j], yj = s->pts[2 * j + 1];
            if ((yi > ly) != (yj > ly) && lx < (xj - xi) * (ly - yi) / (yj - yi) + xi)
                inside = !inside;
        }
        return inside;
    }
    default:
        return 0;
    }
}

/* ---- tilesets ---- */

static int pd__cmp_rule(const void *a, const void *b)
{
    uint32_t x = ((const pd__tile_rule *)a)->id, y = ((const pd__tile_rule *)b)->id;
    return (x > y) - (x < y);
}

/* Orders uint32_t ids, or structs that start with one (pd__tile_image). */
static int pd__cmp_id(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static int pd__cmp_tileset(const void *a, const void *b)
{
    uint32_t x = ((const pd__tileset *)a)->firstgid, y = ((const pd__tileset *)b)->firstgid;
    return (x > y) - (x < y);
}

/* A tile's collision shapes: blocked when one covers the tile's centre. */
static int pd__tile_collision(const pd__tctx *ctx, const cJSON *group, const char *path,
                              double tw, double th, int *has, uint8_t *cell)
{
    char child[PD_CONF_JSON_PATH_MAX];
    pd_conf_json_key(child, path, "objects");
    const cJSON *objs = cJSON_IsObject(group) ? cJSON_GetObjectItemCaseSensitive(group, "objects")
                                             : NULL;
    if (!cJSON_IsArray(objs))
        return pd__tfail(ctx, child, "must be an array of objects");
    size_t i = 0;
    char obj_path[PD_CONF_JSON_PATH_MAX];
    for (const cJSON *o = objs->child; o; o = o->next, i++) {
        pd_conf_json_index(obj_path, child, i);
        pd__shape s;
        int rc = pd__parse_shape(ctx, o, obj_path, &s);
        int covers = rc == 0 && pd__shape_covers(&s, tw / 2, th / 2);
        free(s.pts);
        if (rc != 0)
            return -1;
        *has = 1;
        if (covers) {
            *cell = PD_CELL_BLOCKED;
            return 0;
        }
    }
    if (*has)
        *cell = PD_CELL_FREE;
    return 0;
}

/* The tileset's objectalignment (how its tile objects stand on their
 * position; Tiled 1.4 on) into out->align_x / align_y. */
static int pd__parse_alignment(const pd__tctx *ctx, const cJSON *ts, const char *path,
                               pd__tileset *out)
{
    static const struct {
        const char *name;
        double x, y;
    } aligns[] = {
        { "unspecified", 0, 1 }, { "bottomleft", 0, 1 }, { "bottom", 0.5, 1 },
        { "bottomright", 1, 1 }, { "left", 0, 0.5 },     { "center", 0.5, 0.5 },
        { "right", 1, 0.5 },     { "topleft", 0, 0 },    { "top", 0.5, 0 },
        { "topright", 1, 0 },
    };
    const char *align = NULL;
    out->align_x = 0;
    out->align_y = 1;
    if (pd__tget_string(ctx, ts, path, "objectalignment", &align) != 0)
        return -1;
    if (!align)
        return 0;
    for (size_t i = 0; i < sizeof aligns / sizeof aligns[0]; i++) {
        if (strcmp(align, aligns[i].name) == 0) {
            out->align_x = aligns[i].x;
            out->align_y = aligns[i].y;
            return 0;
        }
    }
    char child[PD_CONF_JSON_PATH_MAX];
    pd_conf_json_key(child, path, "objectalignment");
    return pd__tfail(ctx, child, "unknown alignment \"%s\" (want unspecified, topleft, top, "
                                 "topright, left, center, right, bottomleft, bottom or bottomright)",
                     align);
}

/* The tileset's tileoffset {x, y} (optional) into out->offset_x / offset_y. */
static int pd__parse_tileoffset(const pd__tctx *ctx, const cJSON *ts, const char *path,
                                pd__tileset *out)
{
    char child[PD_CONF_JSON_PATH_MAX];
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(ts, "tileoffset");
    out->offset_x = out->offset_y = 0;
    if (!off)
        return 0;
    pd_conf_json_key(child, path, "tileoffset");
    if (!cJSON_IsObject(off))
        return pd__tfail(ctx, child, "must be an object {x, y}, not %s", pd_conf_json_type(off));
    return pd__tget_number(ctx, off, child, "x", &out->offset_x) != 0 ||
                   pd__tget_number(ctx, off, child, "y", &out->offset_y) != 0
               ? -1
               : 0;
}

static int pd__parse_tiles(const pd__tctx *ctx, const cJSON *ts, const char *path,
                           pd__tileset *out)
{
    char child[PD_CONF_JSON_PATH_MAX];
    out->tile_w = ctx->tile_w;
    out->tile_h = ctx->tile_h;
    if (pd__tget_number(ctx, ts, path, "tilewidth", &out->tile_w) != 0 ||
        pd__tget_number(ctx, ts, path, "tileheight", &out->tile_h) != 0 ||
        pd__parse_alignment(ctx, ts, path, out) != 0 || pd__parse_tileoffset(ctx, ts, path, out) != 0)
        return -1;
    const double tw = out->tile_w, th = out->tile_h;
    const cJSON *tiles = cJSON_GetObjectItemCaseSensitive(ts, "tiles");
    if (!tiles)
        return 0;
    pd_conf_json_key(child, path, "tiles");
    if (!cJSON_IsArray(tiles))
        return pd__tfail(ctx, child, "must be an array, not %s", pd_conf_json_type(tiles));
    int n = cJSON_GetArraySize(tiles);
    if (n == 0)
        return 0;
    out->rules = calloc((size_t)n, sizeof *out->rules);
    out->images = calloc((size_t)n, sizeof *out->images);
    if (!out->rules || !out->images)
        return pd__tfail(ctx, child, "out of memory");
    size_t i = 0;
    uint32_t reach = 0; /* 1 + the largest id of a tile with its own image */
    char tile_path[PD_CONF_JSON_PATH_MAX], sub[PD_CONF_JSON_PATH_MAX];
    for (const cJSON *t = tiles->child; t; t = t->next, i++) {
        pd_conf_json_index(tile_path, child, i);
        if (!cJSON_IsObject(t))
            return pd__tfail(ctx, tile_path, "must be an object, not %s", pd_conf_json_type(t));
        /* A tile with its own image belongs to an image collection, whose
         * tiles keep their ids when others are removed in Tiled: its ids may
         * run past tilecount (the TMX and JSON specifications say so), and
         * the tileset then reaches to its largest one. */
        int own_image = cJSON_GetObjectItemCaseSensitive(t, "image") != NULL;
        if (out->has_tilecount && out->tilecount == 0 && !own_image)
            return pd__tfail(ctx, tile_path, "describes a tile, but the tileset has tilecount 0");
        uint32_t max_id =
            out->has_tilecount && !own_image ? out->tilecount - 1 : PD_TILED_MAX_TILE_ID;
        uint32_t id;
        if (pd__tget_uint(ctx, t, tile_path, "id", 0, max_id, &id) != 0)
            return -1;
        if (own_image && id >= reach)
            reach = id + 1;
        if (own_image) {
            /* Its size: its sub-rectangle's (Tiled 1.9+), else its image's. */
            pd__tile_image *img = &out->images[out->n_images++];
            img->id = id;
            if (pd__tget_number(ctx, t, tile_path, "imagewidth", &img->w) != 0 ||
                pd__tget_number(ctx, t, tile_path, "imageheight", &img->h) != 0 ||
                pd__tget_number(ctx, t, tile_path, "width", &img->w) != 0 ||
                pd__tget_number(ctx, t, tile_path, "height", &img->h) != 0)
                return -1;
        }
        /* Properties first, then the class, then collision shapes. */
        int has = 0, has_class = 0;
        uint8_t cell = 0, class_cell = 0, by = PD_TILED_BY_PROPERTY;
        if (pd__parse_class(ctx, t, tile_path, &has_class, &class_cell) != 0)
            return -1;
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(t, "properties");
        if (props) {
            pd_conf_json_key(sub, tile_path, "properties");
            if (pd__parse_properties(ctx, props, sub, &has, &cell) != 0)
                return -1;
        }
        if (!has && has_class) {
            has = 1;
            cell = class_cell;
            by = PD_TILED_BY_CLASS;
        }
        const cJSON *group = cJSON_GetObjectItemCaseSensitive(t, "objectgroup");
        if (!has && group) {
            pd_conf_json_key(sub, tile_path, "objectgroup");
            if (pd__tile_collision(ctx, group, sub, tw, th, &has, &cell) != 0)
                return -1;
            by = PD_TILED_BY_SHAPE;
        }
        if (has)
            out->rules[out->n_rules++] = (pd__tile_rule){ id, cell, by };
    }
    if (out->has_tilecount && reach > out->tilecount)
        out->tilecount = reach;
    if (out->n_images == 0) {
        free(out->images);
        out->images = NULL;
    }
    /* qsort's base must not be NULL, even for no elements (UBSan). */
    if (out->n_images > 1)
        qsort(out->images, out->n_images, sizeof *out->images, pd__cmp_id);
    if (out->n_rules > 1)
        qsort(out->rules, out->n_rules, sizeof *out->rules, pd__cmp_rule);
    for (size_t k = 1; k < out->n_rules; k++) {
        if (out->rules[k - 1].id == out->rules[k].id)
            return pd__tfail(ctx, child, "tile id %u is described more than once",
                             (unsigned)out->rules[k].id);
    }
    return 0;
}

/* Reads a whole file of at most cap bytes; NULL with errno set on failure. */
static char *pd__slurp(const char *path, size_t cap, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t n = 0, size = 0;
    for (;;) {
        if (n == size) {
            size_t next = size ? size * 2 : 65536;
            if (size >= cap + 1 || !(buf = realloc(buf, next + 1)))
                break;
            size = next;
        }
        size_t got = fread(buf + n, 1, size - n, f);
        n += got;
        if (got == 0)
            break;
    }
    int failed = ferror(f) || n > cap || !buf;
    fclose(f);
    if (failed) {
        free(buf);
        errno = n > cap ? EFBIG : EIO;
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* Parses a map or tileset buffer, JSON or XML, into a tree. */
static cJSON *pd__parse_doc(const char *buf, size_t len, char *err, size_t errlen)
{
    size_t off = 0;
    while (off < len && isspace((unsigned char)buf[off]))
        off++;
    if (off < len && buf[off] == '<')
        return pd_tmx_to_json(buf, len, err, errlen);
    return pd_conf_json_parse(buf, len, err, errlen);
}

/* Whether the real path p lies in the directory tree of the real path dir. */
static int pd__path_within(const char *p, const char *dir)
{
    size_t n = strlen(dir);
    if (n == 1 && dir[0] == '/')
        return 1;
    return strncmp(p, dir, n) == 0 && p[n] == '/';
}

/* Reads an external tileset (.tsj or .tsx) named by source, relative to the
 * map's directory, refusing a file outside both the config directory's tree
 * and the map directory's (the config names the map, so its directory is
 * the config author's choice too; a map's own "../" is not). */
static int pd__external_tileset(const pd__tctx *ctx, const char *source, const char *path,
                                const pd_tiled_origin *origin, pd__tileset *out)
{
    if (!origin || (!origin->map_path && !origin->map_dir))
        return pd__tfail(ctx, path, "external tileset \"%s\": no map directory to resolve it in",
                         source);
    char map_real[PATH_MAX], root_real[PATH_MAX], ts_real[PATH_MAX], joined[2 * PATH_MAX];
    if (!realpath(origin->map_path ? origin->map_path : origin->map_dir, map_real))
        return pd__tfail(ctx, path, "cannot resolve the map's %s: %s",
                         origin->map_path ? "path" : "directory", strerror(errno));
    if (!realpath(origin->root_dir && origin->root_dir[0] ? origin->root_dir : ".", root_real))
        return pd__tfail(ctx, path, "cannot resolve the config directory: %s", strerror(errno));
    if (origin->map_path)
        *strrchr(map_real, '/') = '\0';
    snprintf(joined, sizeof joined, "%s/%s", source[0] == '/' ? "" : map_real, source);
    if (!realpath(joined, ts_real))
        return pd__tfail(ctx, path, "tileset \"%s\": %s", source, strerror(errno));
    if (!pd__path_within(ts_real, root_real) && !pd__path_within(ts_real, map_real))
        return pd__tfail(ctx, path, "tileset \"%s\" resolves to %s, outside the config "
                                    "directory %s and the map's directory", source, ts_real,
                         root_real);
    size_t len = 0;
    char *buf = pd__slurp(ts_real, PD_TILED_MAX_FILE_BYTES, &len);
    if (!buf)
        return pd__tfail(ctx, path, "tileset \"%s\": %s", source, strerror(errno));
    char msg[PD_REASON_MAX];
    cJSON *ts = pd__parse_doc(buf, len, msg, sizeof msg);
    free(buf);
    if (!ts)
        return pd__tfail(ctx, path, "tileset \"%s\": %s", source, msg);
    /* Messages about the tileset's own content: "$.tilesets[0].source:
     * walls.tsx: $.tiles[2]...: reason". */
    char label[PD_CONF_JSON_PATH_MAX + PATH_MAX];
    snprintf(label, sizeof label, "%s: %s", path, source);
    pd__tctx sub = *ctx;
    sub.source = label;
    int rc = -1;
    const char *type = NULL;
    if (!cJSON_IsObject(ts))
        pd__tfail(&sub, "$", "must be an object, not %s", pd_conf_json_type(ts));
    else if (pd__tget_string(&sub, ts, "$", "type", &type) != 0)
        ;
    else if (type && strcmp(type, "tileset") != 0)
        pd__tfail(&sub, "$.type", "is \"%s\", not a tileset", type);
    else if (cJSON_GetObjectItemCaseSensitive(ts, "source"))
        /* Tiled never writes one; refusing it also rules out cycles. */
        pd__tfail(&sub, "$.source", "an external tileset cannot point to another");
    else if ((out->has_tilecount = cJSON_GetObjectItemCaseSensitive(ts, "tilecount") != NULL) &&
             pd__tget_uint(&sub, ts, "$", "tilecount", 0, PD_TILED_MAX_TILE_ID, &out->tilecount) != 0)
        ;
    else
        rc = pd__parse_tiles(&sub, ts, "$", out);
    cJSON_Delete(ts);
    return rc;
}

static int pd__parse_tileset(const pd__tctx *ctx, const cJSON *ts, const char *path,
                             const pd_tiled_origin *origin, pd__tileset *out)
{
    if (!cJSON_IsObject(ts))
        return pd__tfail(ctx, path, "must be an object, not %s", pd_conf_json_type(ts));
    if (pd__tget_uint(ctx, ts, path, "firstgid", 1, PD_TILED_MAX_TILE_ID, &out->firstgid) != 0)
        return -1;
    const char *source = NULL;
    char child[PD_CONF_JSON_PATH_MAX];
    pd_conf_json_key(child, path, "source");
    if (pd__tget_string(ctx, ts, path, "source", &source) != 0)
        return -1;
    if (source)
        return pd__external_tileset(ctx, source, child, origin, out);
    out->has_tilecount = cJSON_GetObjectItemCaseSensitive(ts, "tilecount") != NULL;
    if (out->has_tilecount &&
        pd__tget_uint(ctx, ts, path, "tilecount", 0, PD_TILED_MAX_TILE_ID, &out->tilecount) != 0)
        return -1;
    return pd__parse_tiles(ctx, ts, path, out);
}

static void pd__free_tilesets(pd__tilesets *t)
{
    for (size_t i = 0; i < t->n; i++) {
        free(t->sets[i].rules);
        free(t->sets[i].images);
    }
    free(t->sets);
}

/* Reads "tilesets" (optional) sorted by firstgid. */
static int pd__parse_tilesets(const pd__tctx *ctx, const cJSON *root,
                              const pd_tiled_origin *origin, pd__tilesets *out)
{
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "tilesets");
    if (!arr)
        return 0;
    if (!cJSON_IsArray(arr))
        return pd__tfail(ctx, "$.tilesets", "must be an array, not %s", pd_conf_json_type(arr));
    int n = cJSON_GetArraySize(arr);
    if (n == 0)
        return 0;
    out->sets = calloc((size_t)n, sizeof *out->sets);
    if (!out->sets)
        return pd__tfail(ctx, "$.tilesets", "out of memory");
    out->n = (size_t)n;
    char child[PD_CONF_JSON_PATH_MAX];
    size_t i = 0;
    for (const cJSON *ts = arr->child; ts; ts = ts->next, i++) {
        pd_conf_json_index(child, "$.tilesets", i);
        if (pd__parse_tileset(ctx, ts, child, origin, &out->sets[i]) != 0)
            return -1;
    }
    qsort(out->sets, out->n, sizeof *out->sets, pd__cmp_tileset);
    for (size_t k = 1; k < out->n; k++) {
        if (out->sets[k - 1].firstgid == out->sets[k].firstgid)
            return pd__tfail(ctx, "$.tilesets", "two tilesets share firstgid %u",
                             (unsigned)out->sets[k].firstgid);
    }
    return 0;
}

/* The tileset a gid (flags stripped, not 0) falls in: the one with the
 * largest firstgid <= gid; NULL below every tileset. */
static const pd__tileset *pd__tileset_of(const pd__tilesets *t, uint32_t gid)
{
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->sets[mid].firstgid <= gid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? &t->sets[lo - 1] : NULL;
}

/* pd__gid_cell's refusals. */
enum { PD__GID_BEYOND = -1, PD__GID_NOT_IN_COLLECTION = -2 };

/* The cell value of a gid: 0 is empty ground (open, cost 1); otherwise the
 * tile's rule in the tileset it belongs to (the one with the largest
 * firstgid <= gid), or the untagged default; *by gets the pd_tiled_by that
 * decided it. PD__GID_BEYOND: beyond every tileset; PD__GID_NOT_IN_COLLECTION:
 * in an image collection, but none of its tiles (a gap left by tiles
 * removed in Tiled): untagged would be a guess. */
static int pd__gid_cell(const pd__tctx *ctx, const pd__tilesets *t, uint32_t raw_gid, uint8_t *by)
{
    uint32_t gid = raw_gid & ~PD_TILED_FLAG_BITS;
    *by = PD_TILED_BY_NO_TILE;
    if (gid == 0)
        return PD_CELL_FREE;
    const pd__tileset *ts = pd__tileset_of(t, gid);
    if (!ts)
        return PD__GID_BEYOND;
    uint32_t id = gid - ts->firstgid;
    if (ts->has_tilecount && id >= ts->tilecount)
        return PD__GID_BEYOND;
    if (ts->images && !bsearch(&id, ts->images, ts->n_images, sizeof *ts->images, pd__cmp_id))
        return PD__GID_NOT_IN_COLLECTION;
    size_t lo = 0, hi = ts->n_rules;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ts->rules[mid].id == id) {
            *by = ts->rules[mid].by;
            return ts->rules[mid].cell;
        }
        if (ts->rules[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    *by = PD_TILED_BY_UNTAGGED;
    return ctx->rules->untagged_open ? PD_CELL_FREE : PD_CELL_BLOCKED;
}

/* Fails at path with why the gid raw has no cell value (v, pd__gid_cell's
 * refusal); `where` (the cell, for a layer's tile) goes first. */
static int pd__gid_fail(const pd__tctx *ctx, const pd__tilesets *t, const char *path, const char *where,
                        uint32_t raw, int v)
{
    const uint32_t gid = raw & ~PD_TILED_FLAG_BITS;
    const pd__tileset *ts = pd__tileset_of(t, gid);
    if (v == PD__GID_NOT_IN_COLLECTION && ts)
        return pd__tfail(ctx, path, "%sgid %u is no tile of its image collection (the tileset at "
                                    "firstgid %u has no tile id %u; was it removed in Tiled?)",
                         where, (unsigned)gid, (unsigned)ts->firstgid, (unsigned)(gid - ts->firstgid));
    return pd__tfail(ctx, path, "%sgid %u is beyond every tileset", where, (unsigned)gid);
}

/* ---- layers ---- */

typedef struct pd__walk {
    const pd__tctx *ctx;
    const pd__tilesets *sets;
    pd_grid *g;                  /* NULL in the bounds and cost passes */
    int costing;                 /* the cost pass: colliders are costed, not drawn */
    int32_t gw, gh;              /* the grid's size, from the cost pass on */
    uint64_t collider_work;      /* cost pass: the colliders' cell tests so far */
    uint64_t collider_budget;    /* what they may cost (PD_TILED_COLLIDER_WORK_*) */
    uint64_t since_poll;         /* cells of work since the control's poll was asked */
    int infinite;
    int64_t x0, y0, x1, y1;      /* bounds pass: chunk bounding box in tiles */
    int have_bounds;             /* a chunk has been seen */
    size_t n_tile_layers;        /* counted tile layers seen */
    uint64_t *seen;              /* infinite maps: a bit per cell, set by the chunks of
                                    the layer being read, so chunks cannot overlap */
    uint8_t *by;                 /* with stats: the pd_tiled_by that decided each cell,
                                    row-major, 4 bits a cell (pd__by_get); else NULL */
    pd_tiled_stats *stats;       /* the bounds pass names the counted layers here; or NULL */
} pd__walk;

/* Counts `work` cells of work; every PD_MAP_POLL_CELLS of them (0: now)
 * asks the control's poll. 0 to go on, or -1 with the poll's status in the
 * control and the reason in err. */
static int pd__tick(pd__walk *w, uint64_t work)
{
    pd_map_control *ctl = w->ctx->ctl;
    if (!ctl || !ctl->poll)
        return 0;
    w->since_poll += work;
    if (work != 0 && w->since_poll < PD_MAP_POLL_CELLS)
        return 0;
    w->since_poll = 0;
    if (!pd_map_control_stop(ctl))
        return 0;
    return pd__tfail(w->ctx, "$", "stopped while loading the map: %s", pd_status_name(ctl->status));
}

/* The rules that decided the cells (pd__walk.by), two cells a byte: a
 * pd_tiled_by takes 3 bits, and a byte a cell was 16 MiB at 4096 x 4096. */
_Static_assert(PD_TILED_BY_KINDS <= 16, "a pd_tiled_by fits 4 bits");

static inline uint8_t pd__by_get(const uint8_t *by, size_t i)
{
    return (uint8_t)(by[i / 2] >> (4 * (i & 1)) & 15u);
}

static inline void pd__by_set(uint8_t *by, size_t i, uint8_t v)
{
    const unsigned shift = 4 * (unsigned)(i & 1);
    by[i / 2] = (uint8_t)((by[i / 2] & ~(15u << shift)) | (unsigned)v << shift);
}

static size_t pd__by_bytes(size_t cells)
{
    return cells / 2 + 1;
}

/* Folds a tile's or collider's value v, decided by rule `by`, into cell
 * (x, y): blocked wins, else the larger cost; the cell's rule is that of
 * the value it keeps, the first one when several give it. An empty tile
 * (PD_TILED_BY_NO_TILE) changes nothing. */
static void pd__combine(pd__walk *w, int32_t x, int32_t y, uint8_t v, uint8_t by)
{
    uint8_t *cell = &w->g->cells[pd_grid_index(w->g, x, y)];
    const size_t at = (size_t)y * (size_t)w->g->width + (size_t)x;
    if (by == PD_TILED_BY_NO_TILE || *cell == PD_CELL_BLOCKED)
        return;
    if (v == PD_CELL_BLOCKED || v > *cell ||
        (w->by && pd__by_get(w->by, at) == PD_TILED_BY_NO_TILE)) {
        *cell = v;
        if (w->by)
            pd__by_set(w->by, at, by);
    }
}


/* "path (layer "name")" for messages; just the path for a nameless layer. */
static void pd__layer_label(char dst[PD_CONF_JSON_PATH_MAX], const char *path, const char *name)
{
    char tmp[PD_CONF_JSON_PATH_MAX + PD_TILED_MAX_NAME + 16];
    int n = name && name[0] ? snprintf(tmp, sizeof tmp, "%s (layer \"%s\")", path, name)
                            : snprintf(tmp, sizeof tmp, "%s", path);
    if (n >= PD_CONF_JSON_PATH_MAX)
        memcpy(tmp + PD_CONF_JSON_PATH_MAX - 4, "...", 4);
    memcpy(dst, tmp, PD_CONF_JSON_PATH_MAX);
}

/* Where a layer's or chunk's gids go as they are decoded: cw x ch of them
 * whose top-left is tile (tx, ty), folded into the grid in row-major order
 * (x, y: the next one's place). After a gid the grid cannot take, the rest
 * are not folded (failed), the reason in the context's err; the data is
 * still read to its end, so an error of the data itself is told instead,
 * as when a layer was decoded whole before it was folded. */
typedef struct pd__gid_sink {
    pd__walk *w;
    const char *label;
    int64_t tx, ty;
    uint32_t cw, x, y;
    int failed;
} pd__gid_sink;

/* Folds gid `raw` into tile (tx + x, ty + y). 0, or -1 with the reason. */
static int pd__apply_gid(pd__walk *w, const char *label, int64_t tx, int64_t ty, uint32_t x,
                         uint32_t y, uint32_t raw)
{
    pd_grid *g = w->g;
    uint8_t by;
    int v = pd__gid_cell(w->ctx, w->sets, raw, &by);
    if (v < 0) {
        char where[64];
        snprintf(where, sizeof where, "cell (%lld, %lld): ", (long long)(tx + x), (long long)(ty + y));
        return pd__gid_fail(w->ctx, w->sets, label, where, raw, v);
    }
    int32_t gx = (int32_t)(tx + x - w->ctx->min_x), gy = (int32_t)(ty + y - w->ctx->min_y);
    if (w->seen) {
        /* Two chunks giving one tile: which one Tiled meant is a guess. */
        size_t bit = (size_t)gy * (size_t)g->width + (size_t)gx;
        if (w->seen[bit / 64] >> (bit % 64) & 1)
            return pd__tfail(w->ctx, label, "cell (%lld, %lld) is also in an earlier "
                                            "chunk of the layer",
                             (long long)(tx + x), (long long)(ty + y));
        w->seen[bit / 64] |= UINT64_C(1) << (bit % 64);
    }
    pd__combine(w, gx, gy, (uint8_t)v, by);
    return 0;
}

/* pd_tdata_sink: folds a piece of gids, then lets the control's poll
 * stop the load. */
static int pd__gid_sink_take(void *user, const uint32_t *gids, size_t first, size_t count)
{
    pd__gid_sink *k = user;
    (void)first;
    for (size_t i = 0; i < count; i++) {
        if (pd__apply_gid(k->w, k->label, k->tx, k->ty, k->x, k->y, gids[i]) != 0) {
            k->failed = 1;
            return 1;
        }
        if (++k->x == k->cw) {
            k->x = 0;
            k->y++;
        }
    }
    return pd__tick(k->w, count) != 0 ? -1 : 0;
}

/* Decodes a layer's or chunk's data member (cw x ch gids) and folds it into
 * the grid at tile (tx, ty). */
static int pd__read_gids(pd__walk *w, const cJSON *holder, const char *label, const char *encoding,
                         const char *compression, int64_t tx, int64_t ty, uint32_t cw, uint32_t ch)
{
    const pd__tctx *ctx = w->ctx;
    const size_t n = (size_t)cw * ch;
    char child[PD_CONF_JSON_PATH_MAX];
    pd_conf_json_key(child, label, "data");
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(holder, "data");
    if (!data)
        return pd__tfail(ctx, child, "is required");
    pd__gid_sink k = { .w = w, .label = label, .tx = tx, .ty = ty, .cw = cw };
    if (cJSON_IsString(data)) {
        char msg[PD_REASON_SHORT_MAX];
        int rc = pd_tdata_decode_to(data->valuestring, strlen(data->valuestring),
                                    encoding ? encoding : "csv", compression, n, pd__gid_sink_take,
                                    &k, msg, sizeof msg);
        if (rc == -1)
            return pd__tfail(ctx, child, "%s", msg);
        return rc == 0 && !k.failed ? 0 : -1;
    }
    if (!cJSON_IsArray(data))
        return pd__tfail(ctx, child, "must be an array of gids or a string, not %s",
                         pd_conf_json_type(data));
    if ((encoding && strcmp(encoding, "csv") != 0) || (compression && compression[0]))
        return pd__tfail(ctx, child, "is an array, but the layer says encoding \"%s\" / "
                                     "compression \"%s\"", encoding ? encoding : "",
                         compression ? compression : "");
    size_t have = (size_t)cJSON_GetArraySize(data);
    if (have != n)
        return pd__tfail(ctx, child, "has %zu gids, the layer needs %zu", have, n);
    uint32_t piece[1024];
    size_t i = 0, fill = 0;
    for (const cJSON *v = data->child; v; v = v->next, i++) {
        if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0.0 && v->valuedouble <= PD_TILED_MAX_RAW_GID) ||
            floor(v->valuedouble) != v->valuedouble) {
            char elem[PD_CONF_JSON_PATH_MAX];
            pd_conf_json_index(elem, child, i);
            return pd__tfail(ctx, elem, "gid must be an integer in 0..4294967295");
        }
        piece[fill++] = (uint32_t)v->valuedouble;
        if ((fill == sizeof piece / sizeof *piece || !v->next) && !k.failed) {
            if (pd__gid_sink_take(&k, piece, i + 1 - fill, fill) < 0)
                return -1;
            fill = 0;
        }
        fill = k.failed ? 0 : fill;
    }
    return k.failed ? -1 : 0;
}

static int pd__tile_layer(pd__walk *w, const cJSON *layer, const char *label)
{
    const pd__tctx *ctx = w->ctx;
    char child[PD_CONF_JSON_PATH_MAX];
    const char *encoding = NULL, *compression = NULL;
    if (pd__tget_string(ctx, layer, label, "encoding", &encoding) != 0 ||
        pd__tget_string(ctx, layer, label, "compression", &compression) != 0)
        return -1;
    const cJSON *chunks = cJSON_GetObjectItemCaseSensitive(layer, "chunks");
    pd_conf_json_key(child, label, "chunks");
    if (!w->infinite) {
        if (chunks)
            return pd__tfail(ctx, child, "chunks in a map that is not infinite");
        if (!w->g)
            return 0;
        static const char *const sides[2] = { "width", "height" };
        const int32_t want[2] = { w->g->width, w->g->height };
        for (int k = 0; k < 2; k++) {
            if (!cJSON_GetObjectItemCaseSensitive(layer, sides[k]))
                continue;
            uint32_t side;
            if (pd__tget_uint(ctx, layer, label, sides[k], 0, PD_TILED_MAX_RAW_GID, &side) != 0)
                return -1;
            if (side != (uint32_t)want[k]) {
                char sub[PD_CONF_JSON_PATH_MAX];
                pd_conf_json_key(sub, label, sides[k]);
                return pd__tfail(ctx, sub, "is %u, but the map's %s is %d", (unsigned)side,
                                 sides[k], (int)want[k]);
            }
        }
        return pd__read_gids(w, layer, label, encoding, compression, 0, 0, (uint32_t)w->g->width,
                             (uint32_t)w->g->height);
    }
    if (!cJSON_IsArray(chunks))
        return pd__tfail(ctx, child, "is required in an infinite map (an array of chunks)");
    if (w->seen)
        memset(w->seen, 0, ((size_t)w->g->width * (size_t)w->g->height + 63) / 64 * sizeof *w->seen);
    size_t i = 0;
    char chunk_path[PD_CONF_JSON_PATH_MAX];
    for (const cJSON *c = chunks->child; c; c = c->next, i++) {
        pd_conf_json_index(chunk_path, child, i);
        if (!cJSON_IsObject(c))
            return pd__tfail(ctx, chunk_path, "must be an object, not %s", pd_conf_json_type(c));
        double cx, cy;
        uint32_t cw, ch;
        if (pd__tget_int(ctx, c, chunk_path, "x", -PD_TILED_MAX_CHUNK_COORD,
                         PD_TILED_MAX_CHUNK_COORD, &cx) != 0 ||
            pd__tget_int(ctx, c, chunk_path, "y", -PD_TILED_MAX_CHUNK_COORD,
                         PD_TILED_MAX_CHUNK_COORD, &cy) != 0 ||
            pd__tget_uint(ctx, c, chunk_path, "width", 1, PD_GRID_MAX_SIDE, &cw) != 0 ||
            pd__tget_uint(ctx, c, chunk_path, "height", 1, PD_GRID_MAX_SIDE, &ch) != 0)
            return -1;
        if (!w->g) {
            if (pd__tick(w, 1) != 0)
                return -1;
            int64_t x0 = (int64_t)cx, y0 = (int64_t)cy, x1 = x0 + cw, y1 = y0 + ch;
            if (!w->have_bounds || x0 < w->x0)
                w->x0 = x0;
            if (!w->have_bounds || y0 < w->y0)
                w->y0 = y0;
            if (!w->have_bounds || x1 > w->x1)
                w->x1 = x1;
            if (!w->have_bounds || y1 > w->y1)
                w->y1 = y1;
            w->have_bounds = 1;
            continue;
        }
        if (pd__read_gids(w, c, chunk_path, encoding, compression, (int64_t)cx, (int64_t)cy, cw,
                          ch) != 0)
            return -1;
    }
    return 0;
}

/* ---- colliders ---- */

/* A rotated polygon, turned into the map's frame: its points are where
 * Tiled draws them, its origin (0, 0), no rotation; the row-by-row fill then
 * applies to it. (A point exactly on one of its edges is decided as in the
 * map's frame, left and top inside; off the edges nothing changes.) */
static void pd__polygon_to_map(pd__shape *s)
{
    s->x0 = s->y0 = INFINITY;
    s->x1 = s->y1 = -INFINITY;
    for (size_t i = 0; i < s->n_pts; i++) {
        double lx = s->pts[2 * i], ly = s->pts[2 * i + 1];
        double px = s->x + s->cos_r * lx - s->sin_r * ly;
        double py = s->y + s->sin_r * lx + s->cos_r * ly;
        s->pts[2 * i] = px;
        s->pts[2 * i + 1] = py;
        s->x0 = fmin(s->x0, px);
        s->y0 = fmin(s->y0, py);
        s->x1 = fmax(s->x1, px);
        s->y1 = fmax(s->y1, py);
    }
    s->x = s->y = 0;
    s->cos_r = 1;
    s->sin_r = 0;
}

/* The cells whose centres a collider may hold, columns gx0..gx1 and rows
 * gy0..gy1 of the grid (whole numbers held as doubles); empty when
 * gx0 > gx1 or gy0 > gy1. */
typedef struct pd__cellbox {
    double gx0, gy0, gx1, gy1;
} pd__cellbox;

/* The shape's bounding box in map pixels, then the cells around it. */
static void pd__collider_box(const pd__walk *w, const pd__shape *s, pd__cellbox *b)
{
    const pd__tctx *ctx = w->ctx;
    double bx0 = INFINITY, by0 = INFINITY, bx1 = -INFINITY, by1 = -INFINITY;
    const double cx[4] = { s->x0, s->x1, s->x1, s->x0 }, cy[4] = { s->y0, s->y0, s->y1, s->y1 };
    for (int k = 0; k < 4; k++) {
        double px = s->x + s->cos_r * cx[k] - s->sin_r * cy[k];
        double py = s->y + s->sin_r * cx[k] + s->cos_r * cy[k];
        bx0 = fmin(bx0, px);
        by0 = fmin(by0, py);
        bx1 = fmax(bx1, px);
        by1 = fmax(by1, py);
    }
    double off_x = (double)ctx->min_x, off_y = (double)ctx->min_y;
    b->gx0 = fmax(floor(bx0 / ctx->tile_w - 0.5) - off_x, 0.0);
    b->gy0 = fmax(floor(by0 / ctx->tile_h - 0.5) - off_y, 0.0);
    b->gx1 = fmin(ceil(bx1 / ctx->tile_w) - off_x, (double)w->gw - 1);
    b->gy1 = fmin(ceil(by1 / ctx->tile_h) - off_y, (double)w->gh - 1);
}

static uint64_t pd__box_cells(const pd__cellbox *b)
{
    if (!(b->gx0 <= b->gx1 && b->gy0 <= b->gy1))
        return 0;
    return (uint64_t)(b->gx1 - b->gx0 + 1) * (uint64_t)(b->gy1 - b->gy0 + 1);
}

/* The centre of cell (gx, gy) in map pixels. */
static double pd__centre_x(const pd__tctx *ctx, double gx)
{
    return (gx + (double)ctx->min_x + 0.5) * ctx->tile_w;
}

static double pd__centre_y(const pd__tctx *ctx, double gy)
{
    return (gy + (double)ctx->min_y + 0.5) * ctx->tile_h;
}

/* One polygon edge, as pd__shape_covers takes it (point i, then the one
 * before it), and the rows of the box whose centres' local y lies in its
 * band [min y, max y): rows r0..r1-1 counted from the box's first. */
typedef struct pd__edge {
    double xi, yi, xj, yj;
    uint32_t r0, r1;
} pd__edge;

/* The first row r in [from, rows) with ly[r] >= y (ly grows), else rows. */
static size_t pd__first_row_at(const double *ly, size_t from, size_t rows, double y)
{
    size_t a = from, z = rows;
    while (a < z) {
        size_t m = a + (z - a) / 2;
        if (ly[m] >= y)
            z = m;
        else
            a = m + 1;
    }
    return a;
}

/* A polygon's rows for the fill: the local y of each row's centres in
 * ly[0..rows) and the edges that cross at least one row, sorted by r0;
 * *crossings gets the rows they cross in all (the fill computes one
 * crossing each). Returns 0; 1 when the fill does not apply (a centre in
 * the box whose local coordinates are not finite: pd__shape_covers then
 * decides each cell); -1 when memory ran out. *ly and *edges are the
 * caller's to free, also on 1 and -1. */
static int pd__polygon_rows(const pd__walk *w, const pd__shape *s, const pd__cellbox *b,
                            double **ly_out, pd__edge **edges_out, size_t *n_out,
                            uint64_t *crossings)
{
    const pd__tctx *ctx = w->ctx;
    *ly_out = NULL;
    *edges_out = NULL;
    *n_out = 0;
    *crossings = 0;
    /* Unrotated (pd__polygon_to_map), a centre's local y is its row's and
     * its local x grows with its column, as long as they are finite; the
     * box's corners tell, as both only grow. */
    const double gx[2] = { b->gx0, b->gx1 }, gy[2] = { b->gy0, b->gy1 };
    for (int k = 0; k < 4; k++) {
        double lx, ly;
        pd__shape_local(s, pd__centre_x(ctx, gx[k & 1]), pd__centre_y(ctx, gy[k >> 1]), &lx, &ly);
        if (!isfinite(lx) || !isfinite(ly) || !(s->sin_r == 0 && s->cos_r == 1))
            return 1;
    }
    size_t rows = (size_t)(b->gy1 - b->gy0 + 1);
    double *ly = malloc(rows * sizeof *ly);
    pd__edge *e = malloc(s->n_pts * sizeof *e);
    *ly_out = ly;
    *edges_out = e;
    if (!ly || !e)
        return -1;
    double px0 = pd__centre_x(ctx, b->gx0), unused;
    for (size_t r = 0; r < rows; r++)
        pd__shape_local(s, px0, pd__centre_y(ctx, b->gy0 + (double)r), &unused, &ly[r]);
    size_t n = 0;
    for (size_t i = 0, j = s->n_pts - 1; i < s->n_pts; j = i++) {
        pd__edge ed = { s->pts[2 * i], s->pts[2 * i + 1], s->pts[2 * j], s->pts[2 * j + 1], 0, 0 };
        /* (yi > ly) != (yj > ly) holds for min <= ly < max: rows from the
         * first whose ly reaches min to the first whose ly reaches max. */
        ed.r0 = (uint32_t)pd__first_row_at(ly, 0, rows, fmin(ed.yi, ed.yj));
        ed.r1 = (uint32_t)pd__first_row_at(ly, ed.r0, rows, fmax(ed.yi, ed.yj));
        if (ed.r0 < ed.r1) {
            e[n++] = ed;
            *crossings += ed.r1 - ed.r0;
        }
    }
    *n_out = n;
    return 0;
}

static int pd__cmp_edge_row(const void *a, const void *b)
{
    uint32_t x = ((const pd__edge *)a)->r0, y = ((const pd__edge *)b)->r0;
    return (x > y) - (x < y);
}

static int pd__cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts a row's crossings (no NaN): most rows have a few, which an
 * insertion sort orders faster than qsort's call per comparison. */
static void pd__sort_crossings(double *xs, size_t k)
{
    if (k > 32) {
        qsort(xs, k, sizeof *xs, pd__cmp_double);
        return;
    }
    for (size_t i = 1; i < k; i++) {
        double v = xs[i];
        size_t j = i;
        for (; j > 0 && xs[j - 1] > v; j--)
            xs[j] = xs[j - 1];
        xs[j] = v;
    }
}

/* The cost pass: adds the collider's cell tests to the map's, refusing
 * the map once they pass its budget. */
static int pd__collider_cost(pd__walk *w, const pd__shape *s, const char *path)
{
    pd__cellbox b;
    pd__collider_box(w, s, &b);
    uint64_t cells = pd__box_cells(&b), work = cells;
    if (cells > 0 && s->kind == PD__SHAPE_POLYGON) {
        double *ly;
        pd__edge *e;
        size_t n;
        uint64_t crossings;
        int rc = pd__polygon_rows(w, s, &b, &ly, &e, &n, &crossings);
        free(ly);
        free(e);
        if (rc < 0)
            return pd__tfail(w->ctx, path, "out of memory");
        work = rc == 0 ? cells + s->n_pts + crossings : cells * s->n_pts;
    }
    w->collider_work += work;
    if (w->collider_work > w->collider_budget)
        return pd__tfail(w->ctx, path, "the colliders up to this one cost %" PRIu64 " cell tests; "
                                       "a %d x %d map allows %" PRIu64 " (PD_TILED_COLLIDER_WORK_PER_CELL "
                                       "%u per cell + PD_TILED_COLLIDER_WORK_BASE %u)",
                         w->collider_work, (int)w->gw, (int)w->gh, w->collider_budget,
                         PD_TILED_COLLIDER_WORK_PER_CELL, PD_TILED_COLLIDER_WORK_BASE);
    return pd__tick(w, work);
}

/* Draws a polygon row by row: each row's crossings with the edges (the
 * ones pd__shape_covers computes for a centre of that row: the same
 * expression on the same numbers), sorted; a centre is inside when an odd
 * number of them lie to its right. O(cells + crossings) instead of a test
 * of every edge at every cell. */
static int pd__polygon_fill(pd__walk *w, const pd__shape *s, const pd__cellbox *b, uint8_t value,
                            uint8_t by)
{
    const pd__tctx *ctx = w->ctx;
    double *ly, *xs = NULL;
    pd__edge *e;
    size_t n, *active = NULL;
    uint64_t crossings;
    int rc = pd__polygon_rows(w, s, b, &ly, &e, &n, &crossings);
    if (rc == 0 && (!(xs = malloc((n + 1) * sizeof *xs)) || !(active = malloc((n + 1) * sizeof *active))))
        rc = -1;
    if (rc < 0) {
        rc = pd__tfail(ctx, "$", "out of memory for a polygon's %zu edges", s->n_pts);
    } else if (rc == 1) {
        /* Coordinates past what a double holds: the rule cell by cell. */
        rc = 0;
        for (double gy = b->gy0; gy <= b->gy1 && rc == 0; gy++) {
            for (double gx = b->gx0; gx <= b->gx1; gx++) {
                if (pd__shape_covers(s, pd__centre_x(ctx, gx), pd__centre_y(ctx, gy)))
                    pd__combine(w, (int32_t)gx, (int32_t)gy, value, by);
            }
            rc = pd__tick(w, (uint64_t)(b->gx1 - b->gx0 + 1) * s->n_pts);
        }
    } else {
        qsort(e, n, sizeof *e, pd__cmp_edge_row);
        size_t rows = (size_t)(b->gy1 - b->gy0 + 1), next = 0, n_active = 0;
        for (size_t r = 0; r < rows && rc == 0; r++) {
            while (next < n && e[next].r0 == r)
                active[n_active++] = next++;
            size_t k = 0;
            for (size_t a = 0; a < n_active;) {
                const pd__edge *ed = &e[active[a]];
                if (ed->r1 <= r) {
                    active[a] = active[--n_active];
                    continue;
                }
                double xc = (ed->xj - ed->xi) * (ly[r] - ed->yi) / (ed->yj - ed->yi) + ed->xi;
                if (!isnan(xc)) /* lx < NaN never holds */
                    xs[k++] = xc;
                a++;
            }
            pd__sort_crossings(xs, k);
            double gy = b->gy0 + (double)r, py = pd__centre_y(ctx, gy);
            size_t passed = 0; /* crossings at or left of the centre */
            for (double gx = b->gx0; gx <= b->gx1; gx++) {
                double lx, unused;
                pd__shape_local(s, pd__centre_x(ctx, gx), py, &lx, &unused);
                while (passed < k && xs[passed] <= lx)
                    passed++;
                if ((k - passed) & 1)
                    pd__combine(w, (int32_t)gx, (int32_t)gy, value, by);
            }
            rc = pd__tick(w, (uint64_t)(b->gx1 - b->gx0 + 1) + k);
        }
    }
    free(ly);
    free(e);
    free(xs);
    free(active);
    return rc;
}

/* The last pass: the collider's value on the cells whose centres it holds. */
static int pd__collider_fill(pd__walk *w, const pd__shape *s, uint8_t value, uint8_t by)
{
    const pd__tctx *ctx = w->ctx;
    pd__cellbox b;
    pd__collider_box(w, s, &b);
    if (pd__box_cells(&b) == 0)
        return 0;
    if (s->kind == PD__SHAPE_POLYGON)
        return pd__polygon_fill(w, s, &b, value, by);
    /* A rectangle or an ellipse: the test per cell is a few operations. */
    for (double gy = b.gy0; gy <= b.gy1; gy++) {
        for (double gx = b.gx0; gx <= b.gx1; gx++) {
            if (pd__shape_covers(s, pd__centre_x(ctx, gx), pd__centre_y(ctx, gy)))
                pd__combine(w, (int32_t)gx, (int32_t)gy, value, by);
        }
        if (pd__tick(w, (uint64_t)(b.gx1 - b.gx0 + 1)) != 0)
            return -1;
    }
    return 0;
}

/* An object's collider: its shape and the value it gives (PD_CELL_FREE:
 * none) with the rule that decided it. A rotated polygon comes back in the
 * map's frame (pd__polygon_to_map). s->pts is the caller's to free, also
 * on failure. */
static int pd__object_collider(const pd__walk *w, const cJSON *o, const char *obj_path,
                               pd__shape *s, int *value, uint8_t *by)
{
    const pd__tctx *ctx = w->ctx;
    char sub[PD_CONF_JSON_PATH_MAX];
    if (pd__parse_shape(ctx, o, obj_path, s) != 0)
        return -1;
    /* Blocked, or the tile's value; the object's class overrides it, and
     * its properties override both. */
    *value = PD_CELL_BLOCKED;
    *by = PD_TILED_BY_OBJECT;
    if (s->gid) {
        *value = pd__gid_cell(ctx, w->sets, s->gid, by);
        if (*value < 0)
            return pd__gid_fail(ctx, w->sets, obj_path, "", s->gid, *value);
        const pd__tileset *ts = pd__tileset_of(w->sets, s->gid & ~PD_TILED_FLAG_BITS);
        if (ts) {
            /* The tile's size: an image collection's tile has its image's. */
            const uint32_t id = (s->gid & ~PD_TILED_FLAG_BITS) - ts->firstgid;
            const pd__tile_image *img =
                ts->images ? bsearch(&id, ts->images, ts->n_images, sizeof *ts->images, pd__cmp_id) : NULL;
            const double size_w = img && img->w > 0 ? img->w : ts->tile_w;
            const double size_h = img && img->h > 0 ? img->h : ts->tile_h;
            /* A width or height of 0 (old TMX wrote none) is the tile's, as
             * Tiled reads it (it covered nothing). */
            double tw = s->x1 - s->x0, th = s->y1 - s->y0;
            if (tw == 0)
                tw = size_w;
            if (th == 0)
                th = size_h;
            /* The tile stands on (x, y) as its tileset's objectalignment
             * says (pd__parse_shape put it on its bottom-left corner), moved
             * by the tileoffset, which scales with the object (its size over
             * the tile's) as Tiled draws it (in the object's frame: its
             * rotation turns it too). */
            double ox = size_w > 0 ? ts->offset_x * tw / size_w : ts->offset_x;
            double oy = size_h > 0 ? ts->offset_y * th / size_h : ts->offset_y;
            s->x0 = -ts->align_x * tw + ox;
            s->x1 = s->x0 + tw;
            s->y0 = -ts->align_y * th + oy;
            s->y1 = s->y0 + th;
        }
    }
    int has = 0;
    uint8_t cell = 0;
    if (pd__parse_class(ctx, o, obj_path, &has, &cell) != 0)
        return -1;
    if (has) {
        *value = cell;
        *by = PD_TILED_BY_CLASS;
    }
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(o, "properties");
    if (props) {
        pd_conf_json_key(sub, obj_path, "properties");
        if (pd__parse_properties(ctx, props, sub, &has, &cell) != 0)
            return -1;
        if (has) {
            *value = cell;
            *by = PD_TILED_BY_PROPERTY;
        }
    }
    if (s->kind == PD__SHAPE_POLYGON && !(s->sin_r == 0 && s->cos_r == 1))
        pd__polygon_to_map(s);
    return 0;
}

/* An object layer's colliders: costed in the cost pass (all of a map's
 * before any is drawn), drawn in the last. */
static int pd__object_layer(pd__walk *w, const cJSON *layer, const char *label)
{
    const pd__tctx *ctx = w->ctx;
    char child[PD_CONF_JSON_PATH_MAX], obj_path[PD_CONF_JSON_PATH_MAX];
    pd_conf_json_key(child, label, "objects");
    const cJSON *objs = cJSON_GetObjectItemCaseSensitive(layer, "objects");
    if (!objs)
        return 0;
    if (!cJSON_IsArray(objs))
        return pd__tfail(ctx, child, "must be an array, not %s", pd_conf_json_type(objs));
    if (cJSON_GetArraySize(objs) > 0 && !(ctx->tile_w > 0 && ctx->tile_h > 0))
        return pd__tfail(ctx, "$", "colliders need the map's tilewidth and tileheight (> 0)");
    size_t i = 0;
    for (const cJSON *o = objs->child; o; o = o->next, i++) {
        pd_conf_json_index(obj_path, child, i);
        pd__shape s = { 0 };
        int value = PD_CELL_FREE;
        uint8_t by = PD_TILED_BY_OBJECT;
        int rc = pd__tick(w, 1);
        if (rc == 0)
            rc = pd__object_collider(w, o, obj_path, &s, &value, &by);
        if (rc == 0 && s.kind != PD__SHAPE_NONE && value != PD_CELL_FREE)
            rc = w->costing ? pd__collider_cost(w, &s, obj_path)
                            : pd__collider_fill(w, &s, (uint8_t)value, by);
        free(s.pts);
        if (rc != 0)
            return -1;
    }
    return 0;
}

/* Adds a counted layer's name (its path when it has none) to the stats'
 * list, "..." once the list is full. */
static void pd__note_layer(pd__walk *w, const char *name, const char *path)
{
    if (!w->stats)
        return;
    char *list = w->stats->layers;
    size_t used = strlen(list), room = sizeof w->stats->layers;
    if (used >= 3 && strcmp(list + used - 3, "...") == 0)
        return;
    const char *label = name && name[0] ? name : path;
    size_t need = (used ? 2 : 0) + strlen(label);
    if (used + need < room - 5) /* room for ", ..." after it */
        snprintf(list + used, room - used, "%s%s", used ? ", " : "", label);
    else
        snprintf(list + used, room - used, "%s...", used ? ", " : "");
}

/* The offsets of the groups around a layer, summed: Tiled draws a layer
 * at its own offset plus its groups', so a counted layer inside a shifted
 * group is as far off the grid as one shifted itself. mag_x, mag_y: the
 * sums of their magnitudes, which bound the rounding on each axis
 * (PD_TILED_OFFSET_ROUNDING); one bound for both let x offsets that cancel
 * (1e17 and -1e17) hide a half-tile offset in y. */
typedef struct pd__goffset {
    double x, y, mag_x, mag_y;
} pd__goffset;

static const pd__goffset pd__no_offset = { 0, 0, 0, 0 };

/* A summed offset on one axis with its rounding (mag: the sum of the
 * offsets' magnitudes there) taken as the zero it is. A sum that overflowed
 * is no rounding (its bound is infinite too): it stays, and is refused. */
static double pd__offset_off_grid(double sum, double mag)
{
    return isfinite(mag) && fabs(sum) <= PD_TILED_OFFSET_ROUNDING * mag ? 0 : sum;
}

/* Visits every layer depth first. In the bounds pass (w->g NULL) it counts
 * the tile layers, names the counted layers in the stats and, for infinite
 * maps, takes the chunks' bounding box; in the cost pass (w->costing) it
 * costs the colliders; then it folds each counted layer into the grid.
 * go: the offsets of the groups around `layers`. */
static int pd__walk_layers(pd__walk *w, const cJSON *layers, const char *path, int depth,
                           pd__goffset go)
{
    const pd__tctx *ctx = w->ctx;
    const pd_tiled_rules *r = ctx->rules;
    char child[PD_CONF_JSON_PATH_MAX], label[PD_CONF_JSON_PATH_MAX];
    if (!cJSON_IsArray(layers))
        return pd__tfail(ctx, path, "must be an array, not %s", pd_conf_json_type(layers));
    if (depth > PD_TILED_MAX_GROUP_DEPTH)
        return pd__tfail(ctx, path, "group layers nested deeper than %d", PD_TILED_MAX_GROUP_DEPTH);
    size_t i = 0;
    for (const cJSON *l = layers->child; l; l = l->next, i++) {
        pd_conf_json_index(child, path, i);
        if (!cJSON_IsObject(l))
            return pd__tfail(ctx, child, "must be an object, not %s", pd_conf_json_type(l));
        if (pd__tick(w, 1) != 0)
            return -1;
        const char *type = NULL, *name = NULL;
        if (pd__tget_string(ctx, l, child, "type", &type) != 0 ||
            pd__tget_string(ctx, l, child, "name", &name) != 0)
            return -1;
        if (!type) {
            char type_path[PD_CONF_JSON_PATH_MAX];
            pd_conf_json_key(type_path, child, "type");
            return pd__tfail(ctx, type_path, "is required");
        }
        pd__layer_label(label, child, name);
        int tile = strcmp(type, "tilelayer") == 0, objects = strcmp(type, "objectgroup") == 0;
        int counted = (tile && (!r->layer[0] || (name && strcmp(name, r->layer) == 0))) ||
                      (objects && r->colliders);
        int group = strcmp(type, "group") == 0;
        double ox = 0, oy = 0;
        if ((counted || group) &&
            (pd__tget_number(ctx, l, label, "offsetx", &ox) != 0 ||
             pd__tget_number(ctx, l, label, "offsety", &oy) != 0))
            return -1;
        const pd__goffset sum = { ox + go.x, oy + go.y, fabs(ox) + go.mag_x, fabs(oy) + go.mag_y };
        const double dx = pd__offset_off_grid(sum.x, sum.mag_x), dy = pd__offset_off_grid(sum.y, sum.mag_y);
        if (counted && (dx != 0 || dy != 0)) {
            if (go.x != 0 || go.y != 0)
                return pd__tfail(ctx, label, "is drawn at an offset (%g, %g), its groups' included; "
                                             "a layer that counts must line up with the grid",
                                 dx, dy);
            return pd__tfail(ctx, label, "is drawn at an offset (%g, %g); a layer that counts "
                                         "must line up with the grid", dx, dy);
        }
        int rc = 0;
        int bounds = !w->g && !w->costing;
        if (counted && bounds)
            pd__note_layer(w, name, child);
        if (tile && counted) {
            if (bounds)
                w->n_tile_layers++;
            if (!w->costing)
                rc = pd__tile_layer(w, l, label);
        } else if (objects && counted && !bounds) {
            rc = pd__object_layer(w, l, label);
        } else if (group) {
            char sub[PD_CONF_JSON_PATH_MAX];
            pd_conf_json_key(sub, label, "layers");
            const cJSON *nested = cJSON_GetObjectItemCaseSensitive(l, "layers");
            if (!nested)
                return pd__tfail(ctx, sub, "is required in a group layer");
            rc = pd__walk_layers(w, nested, sub, depth + 1, sum);
        } else if (!tile && !objects && strcmp(type, "imagelayer") != 0) {
            char type_path[PD_CONF_JSON_PATH_MAX];
            pd_conf_json_key(type_path, label, "type");
            return pd__tfail(ctx, type_path, "unknown layer type \"%s\"", type);
        }
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Checks the map-level keys. */
static int pd__read_header(pd__tctx *ctx, const cJSON *root, int *infinite, uint32_t *w,
                           uint32_t *h)
{
    if (!cJSON_IsObject(root))
        return pd__tfail(ctx, "$", "must be an object, not %s", pd_conf_json_type(root));
    const char *type = NULL, *orientation = NULL;
    if (pd__tget_string(ctx, root, "$", "type", &type) != 0 ||
        pd__tget_string(ctx, root, "$", "orientation", &orientation) != 0)
        return -1;
    if (type && strcmp(type, "map") != 0)
        return pd__tfail(ctx, "$.type", "is \"%s\"; a scene needs a map (type \"map\")", type);
    if (orientation && strcmp(orientation, "orthogonal") != 0)
        return pd__tfail(ctx, "$.orientation", "is \"%s\"; only orthogonal maps are supported "
                                               "(isometric, staggered and hexagonal are not)",
                         orientation);
    const cJSON *inf = cJSON_GetObjectItemCaseSensitive(root, "infinite");
    if (inf && !cJSON_IsBool(inf))
        return pd__tfail(ctx, "$.infinite", "must be a boolean, not %s", pd_conf_json_type(inf));
    *infinite = cJSON_IsTrue(inf);
    if (pd__tget_number(ctx, root, "$", "tilewidth", &ctx->tile_w) != 0 ||
        pd__tget_number(ctx, root, "$", "tileheight", &ctx->tile_h) != 0)
        return -1;
    if (*infinite)
        return 0;
    if (pd__tget_uint(ctx, root, "$", "width", 1, PD_GRID_MAX_SIDE, w) != 0 ||
        pd__tget_uint(ctx, root, "$", "height", 1, PD_GRID_MAX_SIDE, h) != 0)
        return -1;
    return 0;
}

void pd_tiled_rules_default(pd_tiled_rules *r)
{
    memset(r, 0, sizeof *r);
    strcpy(r->blocked_property, "blocked");
    strcpy(r->cost_property, "cost");
    r->untagged_open = 1;
    r->colliders = 1;
}

void pd_tiled_stats_format(const pd_tiled_stats *st, char *buf, size_t len)
{
    static const char *const what[PD_TILED_BY_KINDS] = {
        [PD_TILED_BY_PROPERTY] = " by property",   [PD_TILED_BY_CLASS] = " by class",
        [PD_TILED_BY_SHAPE] = " by collision shape", [PD_TILED_BY_OBJECT] = " by object",
        [PD_TILED_BY_UNTAGGED] = " untagged",      [PD_TILED_BY_NO_TILE] = " with no tile",
    };
    if (len == 0)
        return;
    size_t n = (size_t)snprintf(buf, len, "layers %s:", st->layers[0] ? st->layers : "(none)");
    const char *sep = " ";
    for (int k = 0; k < PD_TILED_BY_KINDS && n < len; k++) {
        if (st->cells[k] == 0)
            continue;
        n += (size_t)snprintf(buf + n, len - n, "%s%" PRIu64 "%s%s", sep, st->cells[k], what[k],
                              k != PD_TILED_BY_UNTAGGED ? ""
                              : st->untagged_open     ? " (untagged_tiles: open)"
                                                      : " (untagged_tiles: blocked)");
        sep = ", ";
    }
}

int pd_tiled_stats_untagged_only(const pd_tiled_stats *st)
{
    return st->untagged_open && st->cells[PD_TILED_BY_UNTAGGED] > 0 && st->cells[PD_TILED_BY_PROPERTY] == 0 &&
           st->cells[PD_TILED_BY_CLASS] == 0 &&
           st->cells[PD_TILED_BY_SHAPE] == 0 && st->cells[PD_TILED_BY_OBJECT] == 0;
}

/* A classes table built by hand (a run-time request, a test) is checked as
 * the config's is, so a bad one is an error, not an overread. (pd_scene
 * checks the name fields.) */
static int pd__check_classes(const pd__tctx *ctx, const pd_tiled_rules *r)
{
    if (r->n_classes > PD_TILED_MAX_CLASSES)
        return pd__tfail(ctx, "$", "%zu classes; at most PD_TILED_MAX_CLASSES (%d)", r->n_classes,
                         PD_TILED_MAX_CLASSES);
    for (size_t i = 0; i < r->n_classes; i++) {
        if (!memchr(r->classes[i].name, '\0', sizeof r->classes[i].name))
            return pd__tfail(ctx, "$", "class %zu of the rules has an unterminated name", i);
    }
    return 0;
}

pd_grid *pd_tiled_load(const char *buf, size_t len, const pd_tiled_rules *rules,
                       const pd_tiled_origin *origin, double *off_x, double *off_y,
                       pd_tiled_stats *stats, char *err, size_t errlen)
{
    return pd_tiled_load_ctl(buf, len, rules, origin, NULL, off_x, off_y, stats, err, errlen);
}

uint64_t pd_map_control_max_cells(const pd_map_control *ctl, const char **name, int *named)
{
    *named = ctl && ctl->max_cells && ctl->max_cells < PD_TILED_MAX_CELLS;
    if (!*named) {
        *name = "PD_TILED_MAX_CELLS";
        return PD_TILED_MAX_CELLS;
    }
    *name = ctl->max_cells_name ? ctl->max_cells_name : "the cells cap";
    return ctl->max_cells;
}

int pd_map_control_stop(pd_map_control *ctl)
{
    if (!ctl || !ctl->poll)
        return 0;
    pd_status st = ctl->poll(ctl->poll_user);
    if (st != PD_OK)
        ctl->status = st;
    return st != PD_OK;
}

/* The map's cells against the cap (pd_map_control_max_cells). */
static int pd__check_cells(const pd__tctx *ctx, uint32_t gw, uint32_t gh)
{
    const char *name;
    int named;
    uint64_t cap = pd_map_control_max_cells(ctx->ctl, &name, &named);
    if ((uint64_t)gw * gh <= cap)
        return 0;
    if (named)
        ctx->ctl->status = PD_LIMIT_EXCEEDED;
    return pd__tfail(ctx, "$", "%u x %u cells is more than %s (%" PRIu64 ")", (unsigned)gw,
                     (unsigned)gh, name, cap);
}

pd_grid *pd_tiled_load_ctl(const char *buf, size_t len, const pd_tiled_rules *rules,
                           const pd_tiled_origin *origin, pd_map_control *ctl, double *off_x,
                           double *off_y, pd_tiled_stats *stats, char *err, size_t errlen)
{
    pd__tctx ctx = { .err = err, .errlen = errlen, .rules = rules, .ctl = ctl };
    if (err && errlen)
        err[0] = '\0';
    if (stats)
        memset(stats, 0, sizeof *stats);
    if (ctl)
        ctl->status = PD_OK;
    pd_grid *g = NULL;
    cJSON *root = NULL;
    pd__tilesets sets = { 0 };
    pd__walk w = { .ctx = &ctx, .sets = &sets, .stats = stats };
    if (!buf || !rules) {
        pd__tfail(&ctx, "$", "no map text");
        goto out;
    }
    if (pd__check_classes(&ctx, rules) != 0 || pd__tick(&w, 0) != 0 ||
        !(root = pd__parse_doc(buf, len, err, errlen)) || pd__tick(&w, 0) != 0)
        goto out;
    uint32_t gw = 0, gh = 0;
    if (pd__read_header(&ctx, root, &w.infinite, &gw, &gh) != 0)
        goto out;
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive(root, "layers");
    if (!layers) {
        pd__tfail(&ctx, "$.layers", "is required");
        goto out;
    }
    if (pd__walk_layers(&w, layers, "$.layers", 0, pd__no_offset) != 0)
        goto out;
    if (w.n_tile_layers == 0) {
        if (rules->layer[0])
            pd__tfail(&ctx, "$.layers", "no tile layer named \"%s\"", rules->layer);
        else
            pd__tfail(&ctx, "$.layers", "no tile layer");
        goto out;
    }
    if (w.infinite) {
        if (w.x1 - w.x0 > PD_GRID_MAX_SIDE || w.y1 - w.y0 > PD_GRID_MAX_SIDE) {
            pd__tfail(&ctx, "$.layers", "the chunks span %lld x %lld tiles; at most %d a side",
                      (long long)(w.x1 - w.x0), (long long)(w.y1 - w.y0), PD_GRID_MAX_SIDE);
            goto out;
        }
        ctx.min_x = w.x0;
        ctx.min_y = w.y0;
        gw = (uint32_t)(w.x1 - w.x0);
        gh = (uint32_t)(w.y1 - w.y0);
    }
    if (pd__check_cells(&ctx, gw, gh) != 0 || pd__parse_tilesets(&ctx, root, origin, &sets) != 0)
        goto out;
    /* Every collider is costed before anything is drawn. */
    w.gw = (int32_t)gw;
    w.gh = (int32_t)gh;
    w.collider_budget = (uint64_t)PD_TILED_COLLIDER_WORK_PER_CELL * gw * gh + PD_TILED_COLLIDER_WORK_BASE;
    w.costing = 1;
    if (rules->colliders && pd__walk_layers(&w, layers, "$.layers", 0, pd__no_offset) != 0)
        goto out;
    w.costing = 0;
    g = pd_grid_create((int32_t)gw, (int32_t)gh);
    if (!g) {
        pd__tfail(&ctx, "$", "out of memory for a %u x %u grid", (unsigned)gw, (unsigned)gh);
        goto out;
    }
    /* Open ground wherever no counted layer has a tile. */
    for (int32_t y = 0; y < g->height; y++)
        memset(&g->cells[pd_grid_index(g, 0, y)], PD_CELL_FREE, (size_t)g->width);
    if ((w.infinite && !(w.seen = calloc(((size_t)gw * gh + 63) / 64, sizeof *w.seen))) ||
        (stats && !(w.by = malloc(pd__by_bytes((size_t)gw * gh))))) {
        pd__tfail(&ctx, "$", "out of memory for a %u x %u grid", (unsigned)gw, (unsigned)gh);
        pd_grid_destroy(g);
        g = NULL;
        goto out;
    }
    if (w.by)
        memset(w.by, PD_TILED_BY_NO_TILE | PD_TILED_BY_NO_TILE << 4, pd__by_bytes((size_t)gw * gh));
    w.g = g;
    if (pd__walk_layers(&w, layers, "$.layers", 0, pd__no_offset) != 0) {
        pd_grid_destroy(g);
        g = NULL;
        goto out;
    }
    pd_grid_refresh_flags(g);
    if (stats) {
        for (size_t i = 0; i < (size_t)gw * gh; i++)
            stats->cells[pd__by_get(w.by, i)]++;
        stats->untagged_open = rules->untagged_open;
    }
    if (off_x)
        *off_x = (double)ctx.min_x;
    if (off_y)
        *off_y = (double)ctx.min_y;
out:
    free(w.by);
    free(w.seen);
    pd__free_tilesets(&sets);
    cJSON_Delete(root);
    if (!g && ctl && ctl->status == PD_OK)
        ctl->status = PD_INVALID_ARGUMENT;
    return g;
}
