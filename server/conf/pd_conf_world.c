/*
 * pd_conf_world.c - reads "portals" and "routes" (see pd_conf_world.h).
 *
 * Kept apart from pd_conf.c so the cross-scene config can grow without
 * touching the daemon's core settings; pd_conf.c calls pd_conf_world_parse
 * on the same cJSON tree. Its small JSON helpers mirror pd_conf.c's (those
 * are file-local there), so messages read the same: "SOURCE: $.path: reason".
 */
#include "pd_conf_world.h"

#include <cjson/cJSON.h>

#include "pd_conf_json.h"
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_conf.h"
#include "pd_grid.h"

_Static_assert(PD_CONF_WORLD_MAX_NAME == PD_CONF_MAX_NAME,
               "portal and scene names share one length limit");

typedef struct pd__wctx {
    const char *source;
    char *err;
    size_t errlen;
    const cJSON *scenes;       /* root's "scenes" array, or NULL */
    const char *const *names;  /* when set, the scene names to check against instead */
    size_t n_names;
} pd__wctx;

static int pd__wfail(const pd__wctx *ctx, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pd_conf_json_vfail(ctx->err, ctx->errlen, ctx->source, path, fmt, ap);
    va_end(ap);
    return -1;
}

static int pd__wcheck_keys(const pd__wctx *ctx, const cJSON *obj, const char *path,
                           const char *const *allowed)
{
    char bad[PD_CONF_JSON_PATH_MAX];
    const char *why = pd_conf_json_bad_key(obj, path, allowed, bad);
    return why ? pd__wfail(ctx, bad, "%s", why) : 0;
}

/* Reads a name: 1..63 bytes of [A-Za-z0-9_.-], the rule scene names follow. */
static int pd__wname(const pd__wctx *ctx, const cJSON *v, const char *path,
                     char out[PD_CONF_WORLD_MAX_NAME])
{
    if (!cJSON_IsString(v) || !v->valuestring)
        return pd__wfail(ctx, path, "must be a string, not %s", pd_conf_json_type(v));
    size_t len = strlen(v->valuestring);
    if (len == 0)
        return pd__wfail(ctx, path, "must not be empty");
    if (len >= PD_CONF_WORLD_MAX_NAME)
        return pd__wfail(ctx, path, "must be at most %d bytes", PD_CONF_WORLD_MAX_NAME - 1);
    for (size_t i = 0; i < len; i++) {
        char ch = v->valuestring[i];
        if (!isalnum((unsigned char)ch) && ch != '_' && ch != '.' && ch != '-')
            return pd__wfail(ctx, path, "may only contain A-Z a-z 0-9 _ . - (got \"%s\")",
                             v->valuestring);
    }
    memcpy(out, v->valuestring, len + 1);
    return 0;
}

/* Reads a scene name and checks that "scenes" declares it. */
static int pd__wscene(const pd__wctx *ctx, const cJSON *v, const char *path,
                      char out[PD_CONF_WORLD_MAX_NAME])
{
    if (pd__wname(ctx, v, path, out) != 0)
        return -1;
    if (ctx->names) {
        for (size_t i = 0; i < ctx->n_names; i++) {
            if (ctx->names[i] && strcmp(ctx->names[i], out) == 0)
                return 0;
        }
        return pd__wfail(ctx, path, "unknown scene \"%s\"", out);
    }
    if (cJSON_IsArray(ctx->scenes)) {
        for (const cJSON *s = ctx->scenes->child; s; s = s->next) {
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(s, "name");
            if (cJSON_IsString(name) && name->valuestring && strcmp(name->valuestring, out) == 0)
                return 0;
        }
    }
    return pd__wfail(ctx, path, "unknown scene \"%s\" (not in $.scenes)", out);
}

/* Reads a cell [x, y] of whole numbers in 0..PD_GRID_MAX_SIDE-1. */
static int pd__wcell(const pd__wctx *ctx, const cJSON *v, const char *path, int32_t *x, int32_t *y)
{
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2)
        return pd__wfail(ctx, path, "must be an array [x, y] of two integers");
    int32_t xy[2];
    size_t i = 0;
    for (const cJSON *it = v->child; it; it = it->next, i++) {
        char elem[PD_CONF_JSON_PATH_MAX];
        pd_conf_json_index(elem, path, i);
        if (!cJSON_IsNumber(it))
            return pd__wfail(ctx, elem, "must be an integer, not %s", pd_conf_json_type(it));
        double d = it->valuedouble;
        if (!isfinite(d) || floor(d) != d)
            return pd__wfail(ctx, elem, "must be an integer");
        if (d < 0 || d >= PD_GRID_MAX_SIDE)
            return pd__wfail(ctx, elem, "must be in 0..%d", PD_GRID_MAX_SIDE - 1);
        xy[i] = (int32_t)d;
    }
    *x = xy[0];
    *y = xy[1];
    return 0;
}

static int pd__wend(const pd__wctx *ctx, const cJSON *obj, const char *path, pd_conf_portal_end *e)
{
    static const char *const keys[] = { "scene", "cell", NULL };
    char child[PD_CONF_JSON_PATH_MAX];
    if (!obj)
        return pd__wfail(ctx, path, "is required ({\"scene\": NAME, \"cell\": [x, y]})");
    if (!cJSON_IsObject(obj))
        return pd__wfail(ctx, path, "must be an object {\"scene\": NAME, \"cell\": [x, y]}, not %s",
                         pd_conf_json_type(obj));
    if (pd__wcheck_keys(ctx, obj, path, keys) != 0)
        return -1;
    pd_conf_json_key(child, path, "scene");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, "scene");
    if (!v)
        return pd__wfail(ctx, child, "is required");
    if (pd__wscene(ctx, v, child, e->scene) != 0)
        return -1;
    pd_conf_json_key(child, path, "cell");
    v = cJSON_GetObjectItemCaseSensitive(obj, "cell");
    if (!v)
        return pd__wfail(ctx, child, "is required");
    return pd__wcell(ctx, v, child, &e->x, &e->y);
}

static int pd__wportal(const pd__wctx *ctx, const cJSON *obj, const char *path, pd_conf_portal *p)
{
    static const char *const keys[] = { "name", "a", "b", "two_way", "cost", "max_unit", NULL };
    char child[PD_CONF_JSON_PATH_MAX];
    if (!cJSON_IsObject(obj))
        return pd__wfail(ctx, path, "must be an object, not %s", pd_conf_json_type(obj));
    if (pd__wcheck_keys(ctx, obj, path, keys) != 0)
        return -1;

    pd_conf_json_key(child, path, "name");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, "name");
    if (!v)
        return pd__wfail(ctx, child, "is required");
    if (pd__wname(ctx, v, child, p->name) != 0)
        return -1;

    pd_conf_json_key(child, path, "a");
    if (pd__wend(ctx, cJSON_GetObjectItemCaseSensitive(obj, "a"), child, &p->a) != 0)
        return -1;
    pd_conf_json_key(child, path, "b");
    if (pd__wend(ctx, cJSON_GetObjectItemCaseSensitive(obj, "b"), child, &p->b) != 0)
        return -1;
    if (strcmp(p->a.scene, p->b.scene) == 0 && p->a.x == p->b.x && p->a.y == p->b.y)
        return pd__wfail(ctx, child, "is the same cell as a (%s:%d,%d)", p->a.scene, (int)p->a.x,
                         (int)p->a.y);

    p->two_way = 1;
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "two_way"))) {
        pd_conf_json_key(child, path, "two_way");
        if (!cJSON_IsBool(v))
            return pd__wfail(ctx, child, "must be true or false, not %s", pd_conf_json_type(v));
        p->two_way = cJSON_IsTrue(v);
    }

    p->cost = 0.0;
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "cost"))) {
        pd_conf_json_key(child, path, "cost");
        if (!cJSON_IsNumber(v))
            return pd__wfail(ctx, child, "must be a number, not %s", pd_conf_json_type(v));
        if (!isfinite(v->valuedouble))
            return pd__wfail(ctx, child, "must be a finite number");
        if (v->valuedouble < 0.0)
            return pd__wfail(ctx, child, "must be >= 0");
        p->cost = v->valuedouble;
    }

    p->max_unit = 0;
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "max_unit"))) {
        pd_conf_json_key(child, path, "max_unit");
        if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || floor(v->valuedouble) != v->valuedouble)
            return pd__wfail(ctx, child, "must be an integer");
        if (v->valuedouble < 1 || v->valuedouble > PD_CONF_MAX_UNIT_SIZE)
            return pd__wfail(ctx, child, "must be in 1..%d", PD_CONF_MAX_UNIT_SIZE);
        p->max_unit = (uint32_t)v->valuedouble;
    }
    return 0;
}

static int pd__wportals(const pd__wctx *ctx, const cJSON *arr, pd_conf_world *w)
{
    const char *path = "$.portals";
    char child[PD_CONF_JSON_PATH_MAX];
    if (!cJSON_IsArray(arr))
        return pd__wfail(ctx, path, "must be an array, not %s", pd_conf_json_type(arr));
    int n = cJSON_GetArraySize(arr);
    if (n > PD_CONF_WORLD_MAX_PORTALS)
        return pd__wfail(ctx, path, "lists %d portals; at most %d are allowed", n,
                         PD_CONF_WORLD_MAX_PORTALS);
    if (n == 0)
        return 0;
    w->portals = calloc((size_t)n, sizeof *w->portals);
    if (!w->portals)
        return pd__wfail(ctx, path, "out of memory");
    size_t i = 0;
    for (const cJSON *it = arr->child; it; it = it->next, i++) {
        pd_conf_json_index(child, path, i);
        if (pd__wportal(ctx, it, child, &w->portals[i]) != 0)
            return -1;
        w->n_portals = i + 1;
        for (size_t j = 0; j < i; j++) {
            if (strcmp(w->portals[j].name, w->portals[i].name) == 0) {
                char name_path[PD_CONF_JSON_PATH_MAX];
                pd_conf_json_key(name_path, child, "name");
                return pd__wfail(ctx, name_path, "duplicate portal name \"%s\" (also %s[%zu])",
                                 w->portals[i].name, path, j);
            }
        }
    }
    return 0;
}

long pd_conf_world_find_portal(const pd_conf_world *w, const char *name)
{
    for (size_t i = 0; w && name && i < w->n_portals; i++) {
        if (strcmp(w->portals[i].name, name) == 0)
            return (long)i;
    }
    return -1;
}

/* Adds a scene name to a set of at most two (a portal only ever leads to
 * one of its own two scenes). */
static void pd__wset_add(const char *set[2], size_t *n, const char *name)
{
    for (size_t i = 0; i < *n; i++) {
        if (strcmp(set[i], name) == 0)
            return;
    }
    if (*n < 2)
        set[(*n)++] = name;
}

/*
 * Checks that route r chains. It tracks the set of scenes the route may be
 * in after each hop: it holds two names only when a two-way portal joins two
 * scenes that both were possible, since a portal leads into one of its own
 * two scenes.
 */
static int pd__wchain(const pd__wctx *ctx, const pd_conf_world *w, const pd_conf_route *r,
                      const char *path)
{
    char child[PD_CONF_JSON_PATH_MAX];
    char via_path[PD_CONF_JSON_PATH_MAX];
    pd_conf_json_key(via_path, path, "via");
    const char *cur[2] = { r->from, NULL };
    size_t n_cur = 1;
    for (size_t i = 0; i < r->n_via; i++) {
        const pd_conf_portal *p = &w->portals[r->via[i]];
        const char *next[2] = { NULL, NULL };
        size_t n_next = 0;
        for (size_t k = 0; k < n_cur; k++) {
            if (strcmp(cur[k], p->a.scene) == 0)
                pd__wset_add(next, &n_next, p->b.scene);
            if (p->two_way && strcmp(cur[k], p->b.scene) == 0)
                pd__wset_add(next, &n_next, p->a.scene);
        }
        if (n_next == 0) {
            pd_conf_json_index(child, via_path, i);
            return pd__wfail(ctx, child,
                             "portal \"%s\" (%s -> %s, %s) cannot be taken from scene \"%s\"%s%s%s",
                             p->name, p->a.scene, p->b.scene, p->two_way ? "two-way" : "one-way",
                             cur[0], n_cur > 1 ? " or \"" : "", n_cur > 1 ? cur[1] : "",
                             n_cur > 1 ? "\"" : "");
        }
        memcpy(cur, next, sizeof cur);
        n_cur = n_next;
    }
    for (size_t k = 0; k < n_cur; k++) {
        if (strcmp(cur[k], r->to) == 0)
            return 0;
    }
    return pd__wfail(ctx, via_path, "ends in scene \"%s\", not in \"%s\"", cur[0], r->to);
}

static int pd__wroute(const pd__wctx *ctx, const cJSON *obj, const char *path,
                      const pd_conf_world *w, pd_conf_route *r)
{
    static const char *const keys[] = { "from", "to", "via", NULL };
    char child[PD_CONF_JSON_PATH_MAX];
    if (!cJSON_IsObject(obj))
        return pd__wfail(ctx, path, "must be an object, not %s", pd_conf_json_type(obj));
    if (pd__wcheck_keys(ctx, obj, path, keys) != 0)
        return -1;
    static const char *const ends[] = { "from", "to" };
    for (int k = 0; k < 2; k++) {
        pd_conf_json_key(child, path, ends[k]);
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, ends[k]);
        if (!v)
            return pd__wfail(ctx, child, "is required");
        if (pd__wscene(ctx, v, child, k == 0 ? r->from : r->to) != 0)
            return -1;
    }
    pd_conf_json_key(child, path, "via");
    const cJSON *via = cJSON_GetObjectItemCaseSensitive(obj, "via");
    if (!via)
        return pd__wfail(ctx, child, "is required (a list of portal names)");
    if (!cJSON_IsArray(via))
        return pd__wfail(ctx, child, "must be an array of portal names, not %s", pd_conf_json_type(via));
    int n = cJSON_GetArraySize(via);
    if (n < 1 || n > PD_CONF_WORLD_MAX_VIA)
        return pd__wfail(ctx, child, "must list 1..%d portals", PD_CONF_WORLD_MAX_VIA);
    size_t i = 0;
    for (const cJSON *it = via->child; it; it = it->next, i++) {
        char elem[PD_CONF_JSON_PATH_MAX];
        char name[PD_CONF_WORLD_MAX_NAME];
        pd_conf_json_index(elem, child, i);
        if (pd__wname(ctx, it, elem, name) != 0)
            return -1;
        long idx = pd_conf_world_find_portal(w, name);
        if (idx < 0)
            return pd__wfail(ctx, elem, "unknown portal \"%s\" (not in $.portals)", name);
        r->via[i] = (uint32_t)idx;
    }
    r->n_via = i;
    return pd__wchain(ctx, w, r, path);
}

static int pd__wroutes(const pd__wctx *ctx, const cJSON *arr, pd_conf_world *w)
{
    const char *path = "$.routes";
    char child[PD_CONF_JSON_PATH_MAX];
    if (!cJSON_IsArray(arr))
        return pd__wfail(ctx, path, "must be an array, not %s", pd_conf_json_type(arr));
    int n = cJSON_GetArraySize(arr);
    if (n > PD_CONF_WORLD_MAX_ROUTES)
        return pd__wfail(ctx, path, "lists %d routes; at most %d are allowed", n,
                         PD_CONF_WORLD_MAX_ROUTES);
    if (n == 0)
        return 0;
    w->routes = calloc((size_t)n, sizeof *w->routes);
    if (!w->routes)
        return pd__wfail(ctx, path, "out of memory");
    size_t i = 0;
    for (const cJSON *it = arr->child; it; it = it->next, i++) {
        pd_conf_json_index(child, path, i);
        if (pd__wroute(ctx, it, child, w, &w->routes[i]) != 0)
            return -1;
        w->n_routes = i + 1;
        for (size_t j = 0; j < i; j++) {
            if (strcmp(w->routes[j].from, w->routes[i].from) == 0 &&
                strcmp(w->routes[j].to, w->routes[i].to) == 0)
                return pd__wfail(ctx, child, "a route from \"%s\" to \"%s\" is already pinned (%s[%zu])",
                                 w->routes[i].from, w->routes[i].to, path, j);
        }
    }
    return 0;
}

static int pd__wparse(pd__wctx *ctx, const cJSON *root, pd_conf_world *out)
{
    memset(out, 0, sizeof *out);
    if (!cJSON_IsObject(root))
        return pd__wfail(ctx, "$", "must be an object");
    ctx->scenes = cJSON_GetObjectItemCaseSensitive(root, "scenes");
    pd_conf_world w = { 0 };
    const cJSON *v;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "portals")) && pd__wportals(ctx, v, &w) != 0)
        goto fail;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "routes")) && pd__wroutes(ctx, v, &w) != 0)
        goto fail;
    *out = w;
    return 0;
fail:
    pd_conf_world_free(&w);
    return -1;
}

int pd_conf_world_parse(const cJSON *root, const char *source, pd_conf_world *out,
                        char *err, size_t errlen)
{
    pd__wctx ctx = { .source = source ? source : "<config>", .err = err, .errlen = errlen };
    if (err && errlen)
        err[0] = '\0';
    if (!out)
        return -1;
    return pd__wparse(&ctx, root, out);
}

int pd_conf_world_parse_buffer(const char *json, size_t len, const char *source,
                               const char *const *scene_names, size_t n_scene_names,
                               pd_conf_world *out, char *err, size_t errlen)
{
    pd__wctx ctx = { .source = source ? source : "<config>", .err = err, .errlen = errlen,
                     .names = scene_names, .n_names = n_scene_names };
    if (err && errlen)
        err[0] = '\0';
    if (!out)
        return -1;
    memset(out, 0, sizeof *out);
    if (!json)
        return pd__wfail(&ctx, "$", "no config text");
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    if (!root)
        return pd__wfail(&ctx, "$", "invalid JSON near byte %zu",
                         (end && end >= json) ? (size_t)(end - json) : (size_t)0);
    int rc = pd__wparse(&ctx, root, out);
    cJSON_Delete(root);
    return rc;
}

void pd_conf_world_free(pd_conf_world *w)
{
    if (!w)
        return;
    free(w->portals);
    free(w->routes);
    memset(w, 0, sizeof *w);
}
