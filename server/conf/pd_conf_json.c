/* pd_conf_json.c - the conf layer's shared JSON helpers (see pd_conf_json.h). */
#include "pd_conf_json.h"

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
