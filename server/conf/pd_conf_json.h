/*
 * pd_conf_json.h - JSON helpers shared by the conf layer's three readers (the
 * config file, portals and routes, Tiled maps): JSON paths for messages, type
 * names, error formatting and key checks, so every message reads the same
 * way ("config.json: $.scenes[2].cell_size: must be > 0"). Internal to
 * server/conf, which is the only layer that includes cJSON.h.
 */
#ifndef PD_CONF_JSON_H
#define PD_CONF_JSON_H

#include <stdarg.h>
#include <stddef.h>

#include <cjson/cJSON.h>

/* Longest JSON path a message shows; a longer one ends in "..." so a clipped
 * path never passes for a whole one. */
#define PD_CONF_JSON_PATH_MAX 192

/* "an object", "a string", ... for messages such as "must be a number, not
 * a string". */
const char *pd_conf_json_type(const cJSON *v);

/* dst = parent.key / parent[index]. */
void pd_conf_json_key(char dst[PD_CONF_JSON_PATH_MAX], const char *parent, const char *key);
void pd_conf_json_index(char dst[PD_CONF_JSON_PATH_MAX], const char *parent, size_t index);

/* Writes "SOURCE: PATH: reason" (or "PATH: reason" when source is NULL)
 * into err and returns -1, so readers can `return their_fail(...)`. */
int pd_conf_json_vfail(char *err, size_t errlen, const char *source, const char *path,
                       const char *fmt, va_list ap);

/* Reads the whole number at obj.key (path names obj) in [lo, hi]; on a
 * missing, fractional or out-of-range value writes "SOURCE: PATH.key:
 * reason" (as pd_conf_json_vfail) and returns -1. */
int pd_conf_json_get_int(char *err, size_t errlen, const char *source, const cJSON *obj,
                         const char *path, const char *key, double lo, double hi, double *out);

/* Parses one JSON document filling buf[0..len) (trailing whitespace
 * allowed); NULL with "LINE:COL: invalid JSON" or "LINE:COL: unexpected text
 * after the JSON document" in err. Free the tree with cJSON_Delete. */
cJSON *pd_conf_json_parse(const char *buf, size_t len, char *err, size_t errlen);

/* Finds the first key of obj that is not in allowed (NULL-terminated) or is
 * given twice: writes its path to bad and returns the reason, or returns
 * NULL when every key is fine. */
const char *pd_conf_json_bad_key(const cJSON *obj, const char *path, const char *const *allowed,
                                 char bad[PD_CONF_JSON_PATH_MAX]);

#endif
