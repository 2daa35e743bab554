/*
 * pd_ldtk.c - LDtk IntGrid levels (see pd_ldtk.h for what is read).
 *
 * Field names follow the LDtk JSON schema (ldtk.io/json): a project has
 * "levels" (or "worlds"[i]."levels" with multi-worlds), a level has
 * "identifier", "worldX", "worldY" and "layerInstances", an IntGrid layer
 * instance has "__identifier", "__type", "__cWid", "__cHei", "__gridSize",
 * "__pxTotalOffsetX/Y" and "intGridCsv" (row-major values, 0 = empty).
 * Every refusal names the JSON path, and the layer and cell where there is
 * one, as the Tiled reader's do.
 */
#include "pd_ldtk.h"

#include <cjson/cJSON.h>

#include "pd_conf_json.h"
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Largest IntGrid value LDtk lets a designer define is far above what a
 * cost table holds; values are checked against the table, this bounds the
 * number read from the file. */
#define PD_LDTK_MAX_VALUE 1000000.0

typedef struct pd__lctx {
    char *err;
    size_t errlen;
    pd_map_control *ctl;         /* the caller's caps and poll, or NULL */
} pd__lctx;

static int pd__lfail(const pd__lctx *ctx, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pd_conf_json_vfail(ctx->err, ctx->errlen, NULL, path, fmt, ap);
    va_end(ap);
    return -1;
}

/* A whole number at obj.key in [lo, hi]. */
static int pd__lget_int(const pd__lctx *ctx, const cJSON *obj, const char *path, const char *key,
                        double lo, double hi, double *out)
{
    return pd_conf_json_get_int(ctx->err, ctx->errlen, NULL, obj, path, key, lo, hi, out);
}

static const char *pd__lget_string(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The level to read and its path. */
static const cJSON *pd__find_level(const pd__lctx *ctx, const cJSON *root, const char *want,
                                   char path[PD_CONF_JSON_PATH_MAX])
{
    const cJSON *levels = cJSON_GetObjectItemCaseSensitive(root, "levels");
    const cJSON *worlds = cJSON_GetObjectItemCaseSensitive(root, "worlds");
    char base[PD_CONF_JSON_PATH_MAX] = "$.levels";
    if (cJSON_GetArraySize(levels) == 0 && cJSON_IsArray(worlds) && worlds->child) {
        /* Multi-world projects keep the levels in each world. */
        size_t w = 0;
        for (const cJSON *world = worlds->child; world; world = world->next, w++) {
            const cJSON *wl = cJSON_GetObjectItemCaseSensitive(world, "levels");
            if (!cJSON_IsArray(wl))
                continue;
            size_t i = 0;
            for (const cJSON *l = wl->child; l; l = l->next, i++) {
                const char *id = pd__lget_string(l, "identifier");
                if (!want[0] || (id && strcmp(id, want) == 0)) {
                    char wpath[PD_CONF_JSON_PATH_MAX];
                    pd_conf_json_index(wpath, "$.worlds", w);
                    pd_conf_json_key(base, wpath, "levels");
                    pd_conf_json_index(path, base, i);
                    return l;
                }
            }
        }
    } else if (cJSON_IsArray(levels)) {
        size_t i = 0;
        for (const cJSON *l = levels->child; l; l = l->next, i++) {
            const char *id = pd__lget_string(l, "identifier");
            if (!want[0] || (id && strcmp(id, want) == 0)) {
                pd_conf_json_index(path, base, i);
                return l;
            }
        }
    } else {
        pd__lfail(ctx, "$.levels", "is required (an LDtk project)");
        return NULL;
    }
    if (want[0])
        pd__lfail(ctx, "$.levels", "no level with identifier \"%s\"", want);
    else
        pd__lfail(ctx, "$.levels", "no level");
    return NULL;
}

/* Asks the control's poll: -1 with the reason in err when it says stop. */
static int pd__lstop(const pd__lctx *ctx, const char *path)
{
    if (!pd_map_control_stop(ctx->ctl))
        return 0;
    return pd__lfail(ctx, path, "stopped while loading the map: %s", pd_status_name(ctx->ctl->status));
}

/* Folds one IntGrid layer into the grid (created by the first layer). */
static int pd__intgrid(const pd__lctx *ctx, const cJSON *layer, const char *label,
                       const pd_ldtk_rules *r, pd_grid **g, double *off_x, double *off_y)
{
    double w, h, grid, ox = 0, oy = 0;
    if (pd__lget_int(ctx, layer, label, "__cWid", 1, PD_GRID_MAX_SIDE, &w) != 0 ||
        pd__lget_int(ctx, layer, label, "__cHei", 1, PD_GRID_MAX_SIDE, &h) != 0 ||
        pd__lget_int(ctx, layer, label, "__gridSize", 1, 1e6, &grid) != 0)
        return -1;
    if (cJSON_GetObjectItemCaseSensitive(layer, "__pxTotalOffsetX") &&
        pd__lget_int(ctx, layer, label, "__pxTotalOffsetX", -1e9, 1e9, &ox) != 0)
        return -1;
    if (cJSON_GetObjectItemCaseSensitive(layer, "__pxTotalOffsetY") &&
        pd__lget_int(ctx, layer, label, "__pxTotalOffsetY", -1e9, 1e9, &oy) != 0)
        return -1;
    const char *cap_name;
    int named;
    uint64_t cap = pd_map_control_max_cells(ctx->ctl, &cap_name, &named);
    if (w * h > (double)cap) {
        if (named)
            ctx->ctl->status = PD_LIMIT_EXCEEDED;
        return pd__lfail(ctx, label, "%.0f x %.0f cells is more than %s (%" PRIu64 ")", w, h,
                         cap_name, cap);
    }
    if (fmod(ox, grid) != 0 || fmod(oy, grid) != 0)
        return pd__lfail(ctx, label, "is offset by (%.0f, %.0f) px, not whole cells of %.0f px", ox,
                         oy, grid);
    /* The values before the grid: a level's size costs nothing it does
     * not send. */
    char child[PD_CONF_JSON_PATH_MAX];
    pd_conf_json_key(child, label, "intGridCsv");
    const cJSON *csv = cJSON_GetObjectItemCaseSensitive(layer, "intGridCsv");
    if (!cJSON_IsArray(csv))
        return pd__lfail(ctx, child, "must be an array of values (LDtk 0.8+)");
    size_t need = (size_t)w * (size_t)h, have = (size_t)cJSON_GetArraySize(csv);
    if (have != need)
        return pd__lfail(ctx, child, "has %zu values, the layer needs %zu (%.0f x %.0f)", have, need,
                         w, h);
    if (*g) {
        if ((*g)->width != (int32_t)w || (*g)->height != (int32_t)h)
            return pd__lfail(ctx, label, "is %.0f x %.0f cells, another IntGrid layer %d x %d", w, h,
                             (int)(*g)->width, (int)(*g)->height);
    } else {
        *g = pd_grid_create((int32_t)w, (int32_t)h);
        if (!*g)
            return pd__lfail(ctx, label, "out of memory for %.0f x %.0f cells", w, h);
        for (int32_t y = 0; y < (*g)->height; y++)
            memset(&(*g)->cells[pd_grid_index(*g, 0, y)], PD_CELL_FREE, (size_t)(*g)->width);
        *off_x += ox / grid;
        *off_y += oy / grid;
    }
    size_t i = 0;
    for (const cJSON *v = csv->child; v; v = v->next, i++) {
        if (i % PD_MAP_POLL_CELLS == PD_MAP_POLL_CELLS - 1 && pd__lstop(ctx, label) != 0)
            return -1;
        int32_t x = (int32_t)(i % (size_t)w), y = (int32_t)(i / (size_t)w);
        if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= PD_LDTK_MAX_VALUE) ||
            floor(v->valuedouble) != v->valuedouble)
            return pd__lfail(ctx, label, "cell (%d, %d): not an IntGrid value", (int)x, (int)y);
        int value = (int)v->valuedouble;
        if (value == 0)
            continue;
        if (value > 255 || !r->cost_set[value])
            return pd__lfail(ctx, label, "cell (%d, %d): value %d has no entry in costs", (int)x,
                             (int)y, value);
        uint8_t *cell = &(*g)->cells[pd_grid_index(*g, x, y)];
        uint8_t c = r->cost[value];
        if (c == PD_CELL_BLOCKED || *cell == PD_CELL_BLOCKED)
            *cell = PD_CELL_BLOCKED;
        else if (c > *cell)
            *cell = c;
    }
    return 0;
}

pd_grid *pd_ldtk_load(const char *buf, size_t len, const pd_ldtk_rules *rules, double *off_x,
                      double *off_y, char *err, size_t errlen)
{
    return pd_ldtk_load_ctl(buf, len, rules, NULL, off_x, off_y, err, errlen);
}

pd_grid *pd_ldtk_load_ctl(const char *buf, size_t len, const pd_ldtk_rules *rules,
                          pd_map_control *ctl, double *off_x, double *off_y, char *err,
                          size_t errlen)
{
    const pd__lctx ctx = { .err = err, .errlen = errlen, .ctl = ctl };
    if (err && errlen)
        err[0] = '\0';
    if (ctl)
        ctl->status = PD_INVALID_ARGUMENT;
    *off_x = *off_y = 0;
    cJSON *root = pd_conf_json_parse(buf, len, err, errlen);
    if (!root)
        return NULL;
    pd_grid *g = NULL;
    char path[PD_CONF_JSON_PATH_MAX], child[PD_CONF_JSON_PATH_MAX], label[PD_CONF_JSON_PATH_MAX];
    const cJSON *level = NULL;
    if (!cJSON_IsObject(root))
        pd__lfail(&ctx, "$", "must be an object, not %s", pd_conf_json_type(root));
    else
        level = pd__find_level(&ctx, root, rules->level, path);
    if (!level)
        goto fail;
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive(level, "layerInstances");
    pd_conf_json_key(child, path, "layerInstances");
    if (!cJSON_IsArray(layers)) {
        if (pd__lget_string(level, "externalRelPath"))
            pd__lfail(&ctx, child, "the level is saved in its own file (%s); save the project "
                                   "without \"separate level files\"",
                      pd__lget_string(level, "externalRelPath"));
        else
            pd__lfail(&ctx, child, "must be an array");
        goto fail;
    }
    double wx = 0, wy = 0;
    if ((cJSON_GetObjectItemCaseSensitive(level, "worldX") &&
         pd__lget_int(&ctx, level, path, "worldX", -1e12, 1e12, &wx) != 0) ||
        (cJSON_GetObjectItemCaseSensitive(level, "worldY") &&
         pd__lget_int(&ctx, level, path, "worldY", -1e12, 1e12, &wy) != 0))
        goto fail;
    size_t i = 0;
    double grid_size = 0;
    for (const cJSON *l = layers->child; l; l = l->next, i++) {
        pd_conf_json_index(label, child, i);
        const char *type = pd__lget_string(l, "__type"), *id = pd__lget_string(l, "__identifier");
        if (!type || strcmp(type, "IntGrid") != 0)
            continue;
        if (rules->layer[0] && !(id && strcmp(id, rules->layer) == 0))
            continue;
        if (pd__lstop(&ctx, label) != 0)
            goto fail;
        char named[PD_CONF_JSON_PATH_MAX + PD_TILED_MAX_NAME + 16];
        int n = snprintf(named, sizeof named, "%s (layer \"%s\")", label, id ? id : "");
        if (n >= PD_CONF_JSON_PATH_MAX)
            memcpy(named + PD_CONF_JSON_PATH_MAX - 4, "...", 4);
        if (pd__intgrid(&ctx, l, named, rules, &g, off_x, off_y) != 0)
            goto fail;
        if (grid_size == 0)
            grid_size = cJSON_GetObjectItemCaseSensitive(l, "__gridSize")->valuedouble;
    }
    if (!g) {
        if (rules->layer[0])
            pd__lfail(&ctx, child, "no IntGrid layer named \"%s\"", rules->layer);
        else
            pd__lfail(&ctx, child, "no IntGrid layer");
        goto fail;
    }
    /* The level's world position, in the first layer's cells. */
    *off_x += wx / grid_size;
    *off_y += wy / grid_size;
    pd_grid_refresh_flags(g);
    cJSON_Delete(root);
    if (ctl)
        ctl->status = PD_OK;
    return g;
fail:
    pd_grid_destroy(g);
    cJSON_Delete(root);
    return NULL;
}
