/* pd_conf_json.c - the conf layer's shared JSON helpers (see pd_conf_json.h). */
#include "pd_conf_json.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const char *pd_conf_json_type(const cJSON *v)
{
    if (cJSON_IsObject(v))
        return "an object";
    if (cJSON_IsArray(v))
        return "an array";
    if (cJSON_IsString(v))
        return "a string";
    if (cJSON_IsNumber(v))
        return "a number";
    if (cJSON_IsBool(v))
        return "a boolean";
    if (cJSON_IsNull(v))
        return "null";
    return "an invalid value";
}

static void pd__mark_truncated(char *dst, int written)
{
    if (written >= PD_CONF_JSON_PATH_MAX)
        memcpy(dst + PD_CONF_JSON_PATH_MAX - 4, "...", 4);
}

void pd_conf_json_key(char dst[PD_CONF_JSON_PATH_MAX], const char *parent, const char *key)
{
    pd__mark_truncated(dst, snprintf(dst, PD_CONF_JSON_PATH_MAX, "%s.%s", parent, key));
}

void pd_conf_json_index(char dst[PD_CONF_JSON_PATH_MAX], const char *parent, size_t index)
{
    pd__mark_truncated(dst, snprintf(dst, PD_CONF_JSON_PATH_MAX, "%s[%zu]", parent, index));
}

int pd_conf_json_vfail(char *err, size_t errlen, const char *source, const char *path,
                       const char *fmt, va_list ap)
{
    if (!err || errlen == 0)
        return -1;
    int n = source ? snprintf(err, errlen, "%s: %s: ", source, path) : snprintf(err, errlen, "%s: ", path);
    if (n < 0 || (size_t)n >= errlen)
        return -1;
    vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    return -1;
}

const char *pd_conf_json_bad_key(const cJSON *obj, const char *path, const char *const *allowed,
                                 char bad[PD_CONF_JSON_PATH_MAX])
{
    for (const cJSON *it = obj->child; it; it = it->next) {
        int known = 0;
        for (const char *const *a = allowed; *a && !known; a++)
            known = strcmp(it->string, *a) == 0;
        pd_conf_json_key(bad, path, it->string);
        if (!known)
            return "unknown key";
        for (const cJSON *prev = obj->child; prev != it; prev = prev->next)
            if (strcmp(prev->string, it->string) == 0)
                return "key given more than once";
    }
    return NULL;
}

/* JSON's whitespace (RFC 8259), which is what may trail a document. */
static int pd__json_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

cJSON *pd_conf_json_parse(const char *buf, size_t len, char *err, size_t errlen)
{
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(buf, len, &end, 0);
    size_t at = root ? (size_t)(end - buf) : 0;
    if (root) {
        while (at < len && pd__json_space(buf[at]))
            at++;
        if (at == len)
            return root;
        cJSON_Delete(root);
    } else if (end && end >= buf && end <= buf + len) {
        at = (size_t)(end - buf);
    }
    int line = 1, col = 1;
    for (size_t i = 0; i < at; i++) {
        if (buf[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    if (err && errlen)
        snprintf(err, errlen, "%d:%d: %s", line, col,
                 root ? "unexpected text after the JSON document" : "invalid JSON");
    return NULL;
}


/* pd_conf_json_vfail with its arguments inline. */
static int pd__json_fail(char *err, size_t errlen, const char *source, const char *path,
                         const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pd_conf_json_vfail(err, errlen, source, path, fmt, ap);
    va_end(ap);
    return -1;
}

int pd_conf_json_get_int(char *err, size_t errlen, const char *source, const cJSON *obj,
                         const char *path, const char *key, double lo, double hi, double *out)
{
    char child[PD_CONF_JSON_PATH_MAX];
    pd_conf_json_key(child, path, key);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v)
        return pd__json_fail(err, errlen, source, child, "is required");
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || floor(v->valuedouble) != v->valuedouble)
        return pd__json_fail(err, errlen, source, child, "must be an integer, not %s",
                             pd_conf_json_type(v));
    if (v->valuedouble < lo || v->valuedouble > hi)
        return pd__json_fail(err, errlen, source, child, "must be in %.0f..%.0f", lo, hi);
    *out = v->valuedouble;
    return 0;
}
