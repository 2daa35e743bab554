/*
 * pd_tiled.c - Tiled JSON map reader (see pd_tiled.h for what is accepted).
 *
 * The map is validated as it is read, and every refusal names the JSON path
 * of the offending value, so a level designer can find the problem in the
 * file without reading this code. Keys pathd does not need (tile sizes,
 * images, object layers, editor settings) are ignored: Tiled writes many of
 * them and adds more with each release.
 */
#include "pd_tiled.h"

#include <cjson/cJSON.h>

#include "pd_conf_json.h"
#include <ctype.h>
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
 * levels, and the bound keeps the recursive layer search shallow. */
#define PD_TILED_MAX_GROUP_DEPTH 32

typedef struct pd__tctx {
    char *err;
    size_t errlen;
} pd__tctx;

/* A tile whose properties decide its cell value. */
typedef struct pd__tile_rule {
    uint32_t id;
    uint8_t cell;                /* 0 = blocked, 1..255 = passable with that cost */
} pd__tile_rule;

typedef struct pd__tileset {
    uint32_t firstgid;
    pd__tile_rule *rules;        /* sorted by id */
    size_t n_rules;
} pd__tileset;

/* Writes "path: reason" and returns -1, so callers can `return pd__tfail(...)`. */
static int pd__tfail(const pd__tctx *ctx, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pd_conf_json_vfail(ctx->err, ctx->errlen, NULL, path, fmt, ap);
    va_end(ap);
    return -1;
}

/* Reads the whole number at obj.key (path names obj) in [lo, hi]. */
static int pd__tget_uint(const pd__tctx *ctx, const cJSON *obj, const char *path, const char *key,
                         double lo, double hi, uint32_t *out)
{
    char child[PD_CONF_JSON_PATH_MAX];
    pd_conf_json_key(child, path, key);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v)
        return pd__tfail(ctx, child, "is required");
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || floor(v->valuedouble) != v->valuedouble)
        return pd__tfail(ctx, child, "must be an integer, not %s", pd_conf_json_type(v));
    if (v->valuedouble < lo || v->valuedouble > hi)
        return pd__tfail(ctx, child, "must be in %.0f..%.0f", lo, hi);
    *out = (uint32_t)v->valuedouble;
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

/* Reads a tile's properties array. *has is set when `blocked` or `cost`
 * decides the tile's cell value, which goes to *cell. */
static int pd__parse_properties(const pd__tctx *ctx, const cJSON *props, const char *path,
                                int *has, uint8_t *cell)
{
    char child[PD_CONF_JSON_PATH_MAX];
    int blocked_set = 0, blocked = 0, cost_set = 0;
    uint32_t cost = 0;
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
        const cJSON *value = cJSON_GetObjectItemCaseSensitive(p, "value");
        if (strcmp(name, "blocked") == 0) {
            if (blocked_set)
                return pd__tfail(ctx, child, "property \"blocked\" given more than once");
            if ((type && strcmp(type, "bool") != 0) || !cJSON_IsBool(value))
                return pd__tfail(ctx, value_path, "\"blocked\" must be a bool property");
            blocked_set = 1;
            blocked = cJSON_IsTrue(value);
        } else if (strcmp(name, "cost") == 0) {
            if (cost_set)
                return pd__tfail(ctx, child, "property \"cost\" given more than once");
            if (type && strcmp(type, "int") != 0)
                return pd__tfail(ctx, value_path, "\"cost\" must be an int property, not %s", type);
            if (!value)
                return pd__tfail(ctx, value_path, "is required");
            if (pd__tget_uint(ctx, p, child, "value", 1, 255, &cost) != 0)
                return -1;
            cost_set = 1;
        }
    }
    *has = 1;
    if (blocked_set && blocked)
        *cell = PD_CELL_BLOCKED;
    else if (cost_set)
        *cell = (uint8_t)cost;
    else if (blocked_set)
        *cell = PD_CELL_FREE;
    else
        *has = 0;
    return 0;
}

static int pd__cmp_rule(const void *a, const void *b)
{
    uint32_t x = ((const pd__tile_rule *)a)->id, y = ((const pd__tile_rule *)b)->id;
    return (x > y) - (x < y);
}

static int pd__cmp_tileset(const void *a, const void *b)
{
    uint32_t x = ((const pd__tileset *)a)->firstgid, y = ((const pd__tileset *)b)->firstgid;
    return (x > y) - (x < y);
}

static int pd__parse_tileset(const pd__tctx *ctx, const cJSON *ts, const char *path,
                             pd__tileset *out)
{
    char child[PD_CONF_JSON_PATH_MAX];
    if (!cJSON_IsObject(ts))
        return pd__tfail(ctx, path, "must be an object, not %s", pd_conf_json_type(ts));
    if (cJSON_GetObjectItemCaseSensitive(ts, "source")) {
        pd_conf_json_key(child, path, "source");
        return pd__tfail(ctx, child, "external tilesets are not supported; embed the tileset "
                                     "in the map (Tiled: Map > Embed Tilesets)");
    }
    if (pd__tget_uint(ctx, ts, path, "firstgid", 1, PD_TILED_MAX_TILE_ID, &out->firstgid) != 0)
        return -1;
    uint32_t tilecount = PD_TILED_MAX_TILE_ID;
    if (cJSON_GetObjectItemCaseSensitive(ts, "tilecount") &&
        pd__tget_uint(ctx, ts, path, "tilecount", 0, PD_TILED_MAX_TILE_ID, &tilecount) != 0)
        return -1;
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
    if (!out->rules)
        return pd__tfail(ctx, child, "out of memory");
    size_t i = 0;
    char tile_path[PD_CONF_JSON_PATH_MAX];
    for (const cJSON *t = tiles->child; t; t = t->next, i++) {
        pd_conf_json_index(tile_path, child, i);
        if (!cJSON_IsObject(t))
            return pd__tfail(ctx, tile_path, "must be an object, not %s", pd_conf_json_type(t));
        if (tilecount == 0)
            return pd__tfail(ctx, tile_path, "describes a tile, but the tileset has tilecount 0");
        uint32_t id;
        if (pd__tget_uint(ctx, t, tile_path, "id", 0, (double)tilecount - 1.0, &id) != 0)
            return -1;
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(t, "properties");
        if (!props)
            continue;
        char props_path[PD_CONF_JSON_PATH_MAX];
        pd_conf_json_key(props_path, tile_path, "properties");
        int has = 0;
        uint8_t cell = 0;
        if (pd__parse_properties(ctx, props, props_path, &has, &cell) != 0)
            return -1;
        if (has)
            out->rules[out->n_rules++] = (pd__tile_rule){ id, cell };
    }
    qsort(out->rules, out->n_rules, sizeof *out->rules, pd__cmp_rule);
    for (size_t k = 1; k < out->n_rules; k++) {
        if (out->rules[k - 1].id == out->rules[k].id)
            return pd__tfail(ctx, child, "tile id %u is described more than once",
                             (unsigned)out->rules[k].id);
    }
    return 0;
}

static void pd__free_tilesets(pd__tileset *sets, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(sets[i].rules);
    free(sets);
}

/* Reads "tilesets" (optional) into an array sorted by firstgid. */
static int pd__parse_tilesets(const pd__tctx *ctx, const cJSON *root, pd__tileset **out,
                              size_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "tilesets");
    if (!arr)
        return 0;
    if (!cJSON_IsArray(arr))
        return pd__tfail(ctx, "$.tilesets", "must be an array, not %s", pd_conf_json_type(arr));
    int n = cJSON_GetArraySize(arr);
    if (n == 0)
        return 0;
    pd__tileset *sets = calloc((size_t)n, sizeof *sets);
    if (!sets)
        return pd__tfail(ctx, "$.tilesets", "out of memory");
    char child[PD_CONF_JSON_PATH_MAX];
    size_t i = 0;
    for (const cJSON *ts = arr->child; ts; ts = ts->next, i++) {
        pd_conf_json_index(child, "$.tilesets", i);
        if (pd__parse_tileset(ctx, ts, child, &sets[i]) != 0) {
            pd__free_tilesets(sets, (size_t)n);
            return -1;
        }
    }
    qsort(sets, (size_t)n, sizeof *sets, pd__cmp_tileset);
    for (size_t k = 1; k < (size_t)n; k++) {
        if (sets[k - 1].firstgid == sets[k].firstgid) {
            pd__tfail(ctx, "$.tilesets", "two tilesets share firstgid %u", (unsigned)sets[k].firstgid);
            pd__free_tilesets(sets, (size_t)n);
            return -1;
        }
    }
    *out = sets;
    *n_out = (size_t)n;
    return 0;
}

/* The cell value of a gid: 0 is empty ground; otherwise the tile's rule in
 * the tileset it belongs to (the one with the largest firstgid <= gid), and
 * blocked when the tile has none. */
static uint8_t pd__gid_cell(const pd__tileset *sets, size_t n, uint32_t raw_gid)
{
    uint32_t gid = raw_gid & ~PD_TILED_FLAG_BITS;
    if (gid == 0)
        return PD_CELL_FREE;
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sets[mid].firstgid <= gid)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return PD_CELL_BLOCKED;
    const pd__tileset *ts = &sets[lo - 1];
    uint32_t id = gid - ts->firstgid;
    lo = 0;
    hi = ts->n_rules;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ts->rules[mid].id == id)
            return ts->rules[mid].cell;
        if (ts->rules[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return PD_CELL_BLOCKED;
}

/* Depth-first search for the tile layer to read. Returns 1 with the layer
 * and its path, 0 when there is none, -1 on a malformed layer. */
static int pd__find_layer(const pd__tctx *ctx, const cJSON *layers, const char *path,
                          const char *name, int depth, const cJSON **found, char *found_path)
{
    char child[PD_CONF_JSON_PATH_MAX];
    if (!cJSON_IsArray(layers))
        return pd__tfail(ctx, path, "must be an array, not %s", pd_conf_json_type(layers));
    if (depth > PD_TILED_MAX_GROUP_DEPTH)
        return pd__tfail(ctx, path, "group layers nested deeper than %d", PD_TILED_MAX_GROUP_DEPTH);
    size_t i = 0;
    for (const cJSON *l = layers->child; l; l = l->next, i++) {
        pd_conf_json_index(child, path, i);
        if (!cJSON_IsObject(l))
            return pd__tfail(ctx, child, "must be an object, not %s", pd_conf_json_type(l));
        const char *type = NULL, *lname = NULL;
        if (pd__tget_string(ctx, l, child, "type", &type) != 0 ||
            pd__tget_string(ctx, l, child, "name", &lname) != 0)
            return -1;
        if (!type) {
            char type_path[PD_CONF_JSON_PATH_MAX];
            pd_conf_json_key(type_path, child, "type");
            return pd__tfail(ctx, type_path, "is required");
        }
        if (strcmp(type, "tilelayer") == 0) {
            if (!name || (lname && strcmp(lname, name) == 0)) {
                *found = l;
                memcpy(found_path, child, PD_CONF_JSON_PATH_MAX);
                return 1;
            }
        } else if (strcmp(type, "group") == 0) {
            char sub[PD_CONF_JSON_PATH_MAX];
            pd_conf_json_key(sub, child, "layers");
            const cJSON *nested = cJSON_GetObjectItemCaseSensitive(l, "layers");
            if (!nested)
                return pd__tfail(ctx, sub, "is required in a group layer");
            int rc = pd__find_layer(ctx, nested, sub, name, depth + 1, found, found_path);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

/* Fills g from the layer's gids. */
static int pd__read_layer(const pd__tctx *ctx, const cJSON *layer, const char *path, pd_grid *g,
                          const pd__tileset *sets, size_t n_sets)
{
    char child[PD_CONF_JSON_PATH_MAX];
    if (cJSON_GetObjectItemCaseSensitive(layer, "chunks")) {
        pd_conf_json_key(child, path, "chunks");
        return pd__tfail(ctx, child, "infinite maps are not supported");
    }
    static const char *const sides[2] = { "width", "height" };
    const int32_t want[2] = { g->width, g->height };
    for (int k = 0; k < 2; k++) {
        if (!cJSON_GetObjectItemCaseSensitive(layer, sides[k]))
            continue;
        uint32_t side;
        if (pd__tget_uint(ctx, layer, path, sides[k], 0, PD_TILED_MAX_RAW_GID, &side) != 0)
            return -1;
        if (side != (uint32_t)want[k]) {
            pd_conf_json_key(child, path, sides[k]);
            return pd__tfail(ctx, child, "is %u, but the map's %s is %d", (unsigned)side, sides[k],
                             (int)want[k]);
        }
    }
    const char *encoding = NULL, *compression = NULL;
    if (pd__tget_string(ctx, layer, path, "encoding", &encoding) != 0 ||
        pd__tget_string(ctx, layer, path, "compression", &compression) != 0)
        return -1;
    if (encoding && strcmp(encoding, "csv") != 0) {
        pd_conf_json_key(child, path, "encoding");
        return pd__tfail(ctx, child, "unsupported encoding \"%s\": save the map with tile layer "
                                     "format CSV", encoding);
    }
    if (compression && compression[0] != '\0') {
        pd_conf_json_key(child, path, "compression");
        return pd__tfail(ctx, child, "unsupported encoding: compressed with \"%s\"; save the map "
                                     "with tile layer format CSV", compression);
    }
    pd_conf_json_key(child, path, "data");
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(layer, "data");
    if (!data)
        return pd__tfail(ctx, child, "is required");
    if (!cJSON_IsArray(data))
        return pd__tfail(ctx, child, "must be an array of gids, not %s", pd_conf_json_type(data));
    size_t need = (size_t)g->width * (size_t)g->height;
    size_t have = (size_t)cJSON_GetArraySize(data);
    if (have != need)
        return pd__tfail(ctx, child, "has %zu gids, the map needs %zu (%d x %d)", have, need,
                         (int)g->width, (int)g->height);
    size_t i = 0;
    for (const cJSON *v = data->child; v; v = v->next, i++) {
        if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0.0 && v->valuedouble <= PD_TILED_MAX_RAW_GID) ||
            floor(v->valuedouble) != v->valuedouble) {
            char elem[PD_CONF_JSON_PATH_MAX];
            pd_conf_json_index(elem, child, i);
            return pd__tfail(ctx, elem, "gid must be an integer in 0..4294967295");
        }
        int32_t x = (int32_t)(i % (size_t)g->width), y = (int32_t)(i / (size_t)g->width);
        g->cells[pd_grid_index(g, x, y)] = pd__gid_cell(sets, n_sets, (uint32_t)v->valuedouble);
    }
    return 0;
}

/* Turns a byte offset into a 1-based line and column for JSON syntax errors. */
static void pd__tline_col(const char *buf, size_t off, int *line, int *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off; i++) {
        if (buf[i] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

/* Checks the map-level keys and returns its size. */
static int pd__read_header(const pd__tctx *ctx, const cJSON *root, uint32_t *w, uint32_t *h)
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
        return pd__tfail(ctx, "$.orientation", "is \"%s\"; only orthogonal maps are supported",
                         orientation);
    const cJSON *infinite = cJSON_GetObjectItemCaseSensitive(root, "infinite");
    if (infinite && !cJSON_IsBool(infinite))
        return pd__tfail(ctx, "$.infinite", "must be a boolean, not %s", pd_conf_json_type(infinite));
    if (cJSON_IsTrue(infinite))
        return pd__tfail(ctx, "$.infinite", "infinite maps are not supported");
    if (pd__tget_uint(ctx, root, "$", "width", 1, PD_GRID_MAX_SIDE, w) != 0 ||
        pd__tget_uint(ctx, root, "$", "height", 1, PD_GRID_MAX_SIDE, h) != 0)
        return -1;
    return 0;
}

pd_grid *pd_tiled_parse(const char *buf, size_t len, const char *layer, char *err, size_t errlen)
{
    const pd__tctx ctx = { .err = err, .errlen = errlen };
    if (err && errlen)
        err[0] = '\0';
    if (!buf) {
        pd__tfail(&ctx, "$", "no map text");
        return NULL;
    }
    if (len > PD_TILED_MAX_BYTES) {
        pd__tfail(&ctx, "$", "the file is larger than %u bytes", (unsigned)PD_TILED_MAX_BYTES);
        return NULL;
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(buf, len, &end, 0);
    if (!root) {
        size_t off = (end && end >= buf && end <= buf + len) ? (size_t)(end - buf) : 0;
        int line, col;
        pd__tline_col(buf, off, &line, &col);
        if (err && errlen)
            snprintf(err, errlen, "%d:%d: invalid JSON", line, col);
        return NULL;
    }
    size_t off = (size_t)(end - buf);
    while (off < len && isspace((unsigned char)buf[off]))
        off++;
    pd_grid *g = NULL;
    pd__tileset *sets = NULL;
    size_t n_sets = 0;
    if (off < len) {
        int line, col;
        pd__tline_col(buf, off, &line, &col);
        if (err && errlen)
            snprintf(err, errlen, "%d:%d: unexpected text after the JSON document", line, col);
        goto out;
    }
    uint32_t w, h;
    if (pd__read_header(&ctx, root, &w, &h) != 0)
        goto out;
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive(root, "layers");
    if (!layers) {
        pd__tfail(&ctx, "$.layers", "is required");
        goto out;
    }
    const char *name = (layer && layer[0]) ? layer : NULL;
    const cJSON *found = NULL;
    char found_path[PD_CONF_JSON_PATH_MAX];
    int rc = pd__find_layer(&ctx, layers, "$.layers", name, 0, &found, found_path);
    if (rc < 0)
        goto out;
    if (rc == 0) {
        if (name)
            pd__tfail(&ctx, "$.layers", "no tile layer named \"%s\"", name);
        else
            pd__tfail(&ctx, "$.layers", "no tile layer");
        goto out;
    }
    if (pd__parse_tilesets(&ctx, root, &sets, &n_sets) != 0)
        goto out;
    g = pd_grid_create((int32_t)w, (int32_t)h);
    if (!g) {
        pd__tfail(&ctx, "$", "out of memory for a %u x %u grid", (unsigned)w, (unsigned)h);
        goto out;
    }
    if (pd__read_layer(&ctx, found, found_path, g, sets, n_sets) != 0) {
        pd_grid_destroy(g);
        g = NULL;
        goto out;
    }
    pd_grid_refresh_flags(g);
out:
    pd__free_tilesets(sets, n_sets);
    cJSON_Delete(root);
    return g;
}
