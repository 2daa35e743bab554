/*
 * pd_conf.c - reads the daemon's JSON configuration over one const default.
 *
 * This is the only file in pathd that includes cJSON.h: every other layer sees
 * plain C structs (pd_conf.h). A config is validated completely before it is
 * handed back, and a bad one is refused whole with the file, the JSON path of
 * the offending value and the reason, so a typo never starts a half-configured
 * daemon (or, on SIGHUP, never replaces a good config with a broken one).
 *
 * Accepted shape (every key optional unless marked; unknown keys are errors):
 *
 *   {
 *     "listen": "127.0.0.1:7420",       HOST:PORT or [IPv6]:PORT, numeric host;
 *     "jump_point_search": false,        true: JPS where it applies (same costs, faster);
 *     "metrics_listen": "127.0.0.1:9420", Prometheus /metrics + /healthz; "" or null
 *                                       or absent = off;
 *                                        port 0 asks the OS for an ephemeral port
 *     "agent_check": "127.0.0.1:7430",  HAProxy's agent-check port (one word a connection:
 *                                        "up ready", "drain" or "down"); "" or null or
 *                                        absent = off
 *     "threads": 0,                      worker threads 0..256; 0 = number of cores
 *     "log_level": "info",               "error" | "warn" | "info" | "debug"
 *     "data_dir": "data",                the journal's directory (relative to the config
 *                                        file's); absent or "" = no journal
 *     "journal_fsync": "everysec",       "always" | "everysec" | "no" (Redis's appendfsync)
 *     "journal_compact_bytes": 67108864, 64 KiB .. 2^53: a log past this is compacted
 *     "log": {                           optional: the change log on Redis Streams
 *       "redis": "127.0.0.1:6379",       required in "log": HOST:PORT, [IPv6]:PORT or a
 *                                        host name (1..255 bytes of [A-Za-z0-9.-])
 *       "timeout_ms": 2000,              100 .. 60000: connect and each command
 *       "prefix": "pathd",               1..63 bytes of [A-Za-z0-9_.-]: the keys' prefix
 *       "dedup_ttl_s": 86400,            1 .. 31536000: idempotency keys kept this long
 *       "snapshot_every": 1000,          1 .. 1000000000: a scene's snapshot every N versions
 *       "snapshot_keep": 3,              1 .. 100: snapshots kept per scene (trim below)
 *       "snapshot_max_bytes": 268435456  1 KiB .. 512 MiB: a larger one is not written
 *     },
 *     "auth": {                          optional; no tokens = no authentication
 *       "tokens": [                      at most PD_CONF_MAX_TOKENS
 *         { "token": "...", "role": "query" },     16..127 printable ASCII bytes
 *         { "token_env": "PATHD_TOKEN_ADMIN", "role": "admin" }
 *       ],                               token_env: read from the environment; an
 *                                        unset or empty variable skips the entry
 *       "protected_mode": true           refuse to listen off loopback with no token
 *     },
 *     "limits": {
 *       "max_frame_bytes": 1048576,      64 .. 64 MiB
 *       "max_waypoints_per_chunk": 256,  1 .. 65536
 *       "max_inflight_per_conn": 64,     1 .. 65536
 *       "max_connections": 10000,        1 .. 1000000
 *       "job_queue_capacity": 4096,      1 .. 1048576
 *       "idle_timeout_ms": 300000,       0 (never) .. 86400000 (one day)
 *       "shutdown_grace_ms": 5000,       0 .. 600000 (ten minutes)
 *       "write_high_watermark": 4194304, 1024 .. 1 GiB
 *       "write_low_watermark": 1048576,  0 .. 1 GiB, and below the high watermark
 *       "buffer_budget_bytes": 134217728, 1 MiB .. 4 GiB - 1: all connections' buffers
 *       "frame_timeout_ms": 10000,       0 (never) .. 3600000 (one hour)
 *       "worker_retained_bytes": 8388608, 0 .. 4 GiB - 1: search memory a worker keeps
 *       "inline_max_expansions": 64,     0 (every search on a worker) .. 65536
 *       "worker_yield_us": 200,          0 (never) .. 1000000
 *       "default_max_expansions": 0,     0 (unlimited) .. 2^53
 *       "watch_buffer_bytes": 1048576,   4 KiB .. 1 GiB: a watcher's unread answers
 *       "max_watch_scenes": 64,          1 .. 1024 (PD_WATCH_MAX_SCENES): scenes per Watch
 *       "max_watchers": 1000,            0 .. 1000000: Watches open on the server
 *       "max_watches_per_conn": 64,      1 .. 1000000: Watches open on one connection
 *       "max_behind_wait_ms": 200,       0 .. 60000: a replica (log.redis) behind a query's
 *                                        min_version waits this long for its tail
 *       "max_append_attempts": 4,        1 .. 100: a replica's appends of one update when
 *                                        another replica's append keeps winning the log
 *       "metrics_scene_series": 100,     0 .. 100000: scenes with their own /metrics series
 *       "reservation_ttl_ms": 30000,     0 (never) .. 86400000: unrenewed agents are released
 *       "reservation_clear_holds": true, false: PARTIAL holds wherever the window ends
 *       "max_agents_per_scene": 10000,   0 (none) .. 1000000: agents in a scene's reservations
 *       "max_reservation_entries": 1000000, 0 (none) .. 2^32 - 1: reserved waits and moves per scene
 *       "max_reservation_window_ms": 60000, 0 (none) .. 86400000: longest ReservePath window
 *       "max_agent_bytes": 1048576,      0 (none) .. 1 GiB: one agent's reservations
 *       "max_clock_step_ms": 3600000,    0 (none) .. 2^32 - 1: how far (game ms) a ReservePath's
 *                                        t0_ms may lead its scene's clock while agents are held
 *       "max_scenes": 100000,            1 .. 1000000: scenes served, config and run time
 *       "max_scene_cells": 16777216,     1 .. 2^28: cells of one scene CreateScene makes
 *       "max_scene_bytes": 4294967296    1 MiB .. 2^53: all scene snapshots together
 *     },
 *     "scenes": [                        at most PD_CONF_MAX_SCENES entries
 *       {
 *         "name": "town",                required; 1..63 bytes of [A-Za-z0-9_.-]; unique
 *         "map": "scenes/town.txt",      required; relative to the config file's directory
 *         "format": "ascii",             required; "ascii" | "movingai" | "tiled" | "ldtk"
 *         "origin": [-20, -15],          world coordinates of cell (0,0); default [0, 0]
 *         "cell_size": 1.0,              world units per cell, finite and > 0; default 1
 *         "unit_sizes": [1, 2],          1..PD_CONF_MAX_UNIT_SIZES distinct sizes,
 *                                        each 1..PD_CONF_MAX_UNIT_SIZE; default [1];
 *                                        stored sorted ascending
 *         "search": "auto",              "auto" | "jps" | "astar": the search for
 *                                        requests JPS can answer (see pd_conf_search);
 *                                        default: as "jump_point_search" says
 *         "costs": {"S": 3, "T": 9},     movingai: map character (one printable
 *                                        ASCII character) -> cost 1..255 or "blocked";
 *                                        overrides the format's meaning of it;
 *                                        ldtk: IntGrid value "1".."255" -> the same
 *         "level": "Keep",               ldtk only: level identifier; default the first
 *         "layer": "walls",              tiled / ldtk: the one tile (IntGrid) layer
 *                                        that counts; default: every one
 *         "blocked_property": "blocked", tiled only: bool tile/object property that
 *         "cost_property": "cost",       blocks; int property 1..255 that costs;
 *         "walkable_property": "",       bool property, true = open ("" = none)
 *         "classes": {"Wall": "blocked", tiled only: tile / object class -> cost
 *                     "Mud": 3},         1..255 or "blocked"; 1..127-byte names,
 *                                        at most PD_TILED_MAX_CLASSES
 *         "untagged_tiles": "open",      tiled only: a tile nothing decides: "open"
 *                                        (default) or "blocked" (tilesets that
 *                                        mark floors, walkable_property)
 *         "colliders": true              tiled only: object layers add blockers
 *       }
 *     ]
 *   }
 *
 * Integers must be written as whole numbers (1e3 is fine, 2.5 is not).
 * Duplicate keys in one object are errors too: cJSON would silently keep the
 * first, which hides exactly the kind of mistake validation exists to catch.
 */
#include "pd_conf.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>

#include "pd_conf_json.h"
#include "pd_grid.h"
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Largest config file we read, in bytes. A config names a few hundred scenes
 * at most; anything bigger is a wrong path (a map given as the config). */
#define PD_CONF_MAX_FILE_BYTES (16u * 1024u * 1024u)
/* Longest resolved map path, in bytes (PATH_MAX on Linux). */
#define PD_CONF_MAX_MAP_PATH 4096
/* Worker thread ceiling: far above any core count we deploy on, low enough
 * that a typo like 10000 is caught instead of exhausting the process. */
#define PD_CONF_MAX_THREADS 256
/* Integers travel through cJSON as doubles, which are exact up to 2^53. */
#define PD_CONF_MAX_EXACT_INT 9007199254740992.0

#define PD__KIB 1024.0
#define PD__MIB (1024.0 * 1024.0)
#define PD__GIB (1024.0 * 1024.0 * 1024.0)

const pd_conf pd_conf_defaults = {
    .listen_host = "127.0.0.1",
    .listen_port = 7420,
    .metrics_enabled = 0,          /* config/default.json turns it on at 127.0.0.1:9420 */
    .metrics_host = "127.0.0.1",
    .metrics_port = 9420,
    .agent_enabled = 0,            /* on with "agent_check" (docs/OPERATIONS.md) */
    .agent_host = "127.0.0.1",
    .agent_port = 0,
    .threads = 0,
    .max_frame_bytes = 1024u * 1024u,
    .max_waypoints_per_chunk = 256,
    .max_inflight_per_conn = 64,
    .max_connections = 10000,
    .job_queue_capacity = 4096,
    .worker_retained_bytes = 8u * 1024u * 1024u,
    .inline_max_expansions = 64,
    .worker_yield_us = 200,
    .idle_timeout_ms = 300000,
    .shutdown_grace_ms = 5000,
    .write_high_watermark = 4u * 1024u * 1024u,
    .write_low_watermark = 1024u * 1024u,
    .protected_mode = 1,
    .buffer_budget_bytes = 128u * 1024u * 1024u,
    .frame_timeout_ms = 10000,
    .default_max_expansions = 0,
    .max_scenes = 100000,
    .max_scene_cells = 4096u * 4096u,
    .max_scene_bytes = 4ull * 1024u * 1024u * 1024u,
    .watch_buffer_bytes = 1024u * 1024u,
    .max_behind_wait_ms = 200,
    .max_append_attempts = 4,
    .max_watch_scenes = 64,
    .max_watchers = 1000,
    .max_watches_per_conn = 64,
    .metrics_scene_series = 100,
    .reservation_ttl_ms = 30000,
    .reservation_clear_holds = 1,
    .max_agents_per_scene = 10000,
    .max_reservation_entries = 1000000,
    .max_reservation_window_ms = 60000,
    .max_agent_bytes = 1024u * 1024u,
    .max_clock_step_ms = 3600000,
    .log_level = PD_LOG_INFO,
    .data_dir = "",
    .journal_fsync = PD_CONF_FSYNC_EVERYSEC,
    .journal_compact_bytes = 64u * 1024u * 1024u,
    .log = { .redis_host = "", .redis_port = 0, .timeout_ms = 2000, .prefix = "pathd", .dedup_ttl_s = 86400,
             .snapshot_every = 1000, .snapshot_keep = 3, .snapshot_max_bytes = 256u * 1024u * 1024u },
    .scenes = NULL,
    .n_scenes = 0,
};

/* Where errors go while one document is being read. */
typedef struct pd__ctx {
    const char *source;     /* file name (or caller's label) for messages */
    const char *base_dir;   /* resolves relative map paths; may be NULL */
    char *err;
    size_t errlen;
} pd__ctx;

/* Writes "SOURCE: $.path: reason" and returns -1 so callers can
 * `return pd__fail(...)`. */
static int pd__fail(const pd__ctx *ctx, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pd_conf_json_vfail(ctx->err, ctx->errlen, ctx->source, path, fmt, ap);
    va_end(ap);
    return -1;
}

/* Rejects keys outside `allowed` (NULL-terminated) and keys given twice. */
static int pd__check_keys(const pd__ctx *ctx, const cJSON *obj, const char *path,
                          const char *const *allowed)
{
    char bad[PD_CONF_JSON_PATH_MAX];
    const char *why = pd_conf_json_bad_key(obj, path, allowed, bad);
    return why ? pd__fail(ctx, bad, "%s", why) : 0;
}

/* Reads a whole number in [lo, hi]. */
static int pd__get_uint(const pd__ctx *ctx, const cJSON *v, const char *path,
                        double lo, double hi, uint64_t *out)
{
    if (!cJSON_IsNumber(v))
        return pd__fail(ctx, path, "must be an integer, not %s", pd_conf_json_type(v));
    double d = v->valuedouble;
    if (!isfinite(d) || floor(d) != d)
        return pd__fail(ctx, path, "must be an integer");
    if (d < lo || d > hi)
        return pd__fail(ctx, path, "must be in %.0f..%.0f", lo, hi);
    *out = (uint64_t)d;
    return 0;
}

static int pd__get_u32(const pd__ctx *ctx, const cJSON *v, const char *path,
                       double lo, double hi, uint32_t *out)
{
    uint64_t u = 0;
    if (pd__get_uint(ctx, v, path, lo, hi, &u) != 0)
        return -1;
    *out = (uint32_t)u;
    return 0;
}

static int pd__get_finite(const pd__ctx *ctx, const cJSON *v, const char *path, double *out)
{
    if (!cJSON_IsNumber(v))
        return pd__fail(ctx, path, "must be a number, not %s", pd_conf_json_type(v));
    if (!isfinite(v->valuedouble))
        return pd__fail(ctx, path, "must be a finite number");
    *out = v->valuedouble;
    return 0;
}

static int pd__get_string(const pd__ctx *ctx, const cJSON *v, const char *path, const char **out)
{
    if (!cJSON_IsString(v) || !v->valuestring)
        return pd__fail(ctx, path, "must be a string, not %s", pd_conf_json_type(v));
    *out = v->valuestring;
    return 0;
}

/* Parses "HOST:PORT" or "[IPv6]:PORT". The host must be a numeric address:
 * the listener binds it directly, with no resolver on the start-up path. */
static int pd__parse_listen(const pd__ctx *ctx, const char *s, const char *path,
                            char host_out[PD_CONF_MAX_HOST], uint16_t *port_out)
{
    const char *host = s, *host_end, *port_str;
    int v6 = 0;
    if (s[0] == '[') {
        host = s + 1;
        host_end = strchr(host, ']');
        if (!host_end || host_end[1] != ':')
            return pd__fail(ctx, path, "expected \"[IPv6]:PORT\", got \"%s\"", s);
        port_str = host_end + 2;
        v6 = 1;
    } else {
        host_end = strrchr(s, ':');
        if (!host_end)
            return pd__fail(ctx, path, "expected \"HOST:PORT\", got \"%s\"", s);
        if (memchr(s, ':', (size_t)(host_end - s)))
            return pd__fail(ctx, path, "IPv6 addresses need brackets: \"[::1]:PORT\"");
        port_str = host_end + 1;
    }
    size_t host_len = (size_t)(host_end - host);
    if (host_len == 0)
        return pd__fail(ctx, path, "host is empty");
    if (host_len >= PD_CONF_MAX_HOST)
        return pd__fail(ctx, path, "host is longer than %d bytes", PD_CONF_MAX_HOST - 1);
    char hostbuf[PD_CONF_MAX_HOST];
    memcpy(hostbuf, host, host_len);
    hostbuf[host_len] = '\0';
    unsigned char addr[16];
    if (inet_pton(v6 ? AF_INET6 : AF_INET, hostbuf, addr) != 1)
        return pd__fail(ctx, path, "\"%s\" is not a numeric %s address", hostbuf,
                        v6 ? "IPv6" : "IPv4");

    if (*port_str == '\0')
        return pd__fail(ctx, path, "port is missing");
    unsigned long port = 0;
    for (const char *p = port_str; *p; p++) {
        if (!isdigit((unsigned char)*p))
            return pd__fail(ctx, path, "port must be decimal digits, got \"%s\"", port_str);
        port = port * 10 + (unsigned long)(*p - '0');
        if (port > 65535)
            return pd__fail(ctx, path, "port must be in 0..65535 (0 = ephemeral)");
    }
    memcpy(host_out, hostbuf, host_len + 1);
    *port_out = (uint16_t)port;
    return 0;
}

const char *pd_conf_format_address(char out[PD_CONF_MAX_ADDRESS], const char *host, uint16_t port)
{
    int v6 = strchr(host, ':') != NULL;
    snprintf(out, PD_CONF_MAX_ADDRESS, "%s%s%s:%u", v6 ? "[" : "", host, v6 ? "]" : "", (unsigned)port);
    return out;
}

int pd_conf_parse_address(const char *s, char host[PD_CONF_MAX_HOST], uint16_t *port,
                          char *err, size_t errlen)
{
    const pd__ctx ctx = { .source = "address", .err = err, .errlen = errlen };
    return pd__parse_listen(&ctx, s, s, host, port);
}

static int pd__parse_log_level(const pd__ctx *ctx, const cJSON *v, const char *path,
                               pd_log_level *out)
{
    const char *s = NULL;
    if (pd__get_string(ctx, v, path, &s) != 0)
        return -1;
    for (int l = PD_LOG_ERROR; l <= PD_LOG_DEBUG; l++) {
        if (strcmp(s, pd_log_level_name((pd_log_level)l)) == 0) {
            *out = (pd_log_level)l;
            return 0;
        }
    }
    return pd__fail(ctx, path, "must be one of \"error\", \"warn\", \"info\", \"debug\"");
}

/* One named uint32 limit: its key, where it lives in pd_conf and its range. */
typedef struct pd__limit {
    const char *key;
    size_t offset;
    double lo, hi;
} pd__limit;

#define PD__LIMIT(field, lo, hi) { #field, offsetof(pd_conf, field), (lo), (hi) }

static const pd__limit pd__limits[] = {
    PD__LIMIT(max_frame_bytes, 64, 64 * PD__MIB),
    PD__LIMIT(max_waypoints_per_chunk, 1, 65536),
    PD__LIMIT(max_inflight_per_conn, 1, 65536),
    PD__LIMIT(max_connections, 1, 1000000),
    PD__LIMIT(job_queue_capacity, 1, 1048576),
    PD__LIMIT(idle_timeout_ms, 0, 86400000),
    PD__LIMIT(shutdown_grace_ms, 0, 600000),
    PD__LIMIT(write_high_watermark, PD__KIB, PD__GIB),
    PD__LIMIT(write_low_watermark, 0, PD__GIB),
    PD__LIMIT(buffer_budget_bytes, PD__MIB, 4.0 * PD__GIB - 1),
    PD__LIMIT(frame_timeout_ms, 0, 3600000),
    PD__LIMIT(worker_retained_bytes, 0, 4.0 * PD__GIB - 1),
    PD__LIMIT(inline_max_expansions, 0, 65536),
    PD__LIMIT(worker_yield_us, 0, 1000000),
    PD__LIMIT(max_scenes, 1, 1000000),
    PD__LIMIT(max_scene_cells, 1, (double)PD_GRID_MAX_SIDE * PD_GRID_MAX_SIDE),
    PD__LIMIT(watch_buffer_bytes, 4 * PD__KIB, PD__GIB),
    PD__LIMIT(max_watch_scenes, 1, 1024),
    PD__LIMIT(max_watchers, 0, 1000000),
    PD__LIMIT(max_watches_per_conn, 1, 1000000),
    PD__LIMIT(metrics_scene_series, 0, 100000),
    PD__LIMIT(reservation_ttl_ms, 0, 86400000),
    PD__LIMIT(max_agents_per_scene, 0, 1000000),
    PD__LIMIT(max_reservation_entries, 0, 4.0 * PD__GIB - 1),
    PD__LIMIT(max_reservation_window_ms, 0, 86400000),
    PD__LIMIT(max_agent_bytes, 0, PD__GIB),
    PD__LIMIT(max_clock_step_ms, 0, 4.0 * PD__GIB - 1),
    PD__LIMIT(max_behind_wait_ms, 0, 60000),
    PD__LIMIT(max_append_attempts, 1, 100),
};

#define PD__N_LIMITS (sizeof pd__limits / sizeof pd__limits[0])

static int pd__parse_limits(const pd__ctx *ctx, const cJSON *obj, const char *path, pd_conf *c)
{
    static const char *const keys[] = {
        "max_frame_bytes", "max_waypoints_per_chunk", "max_inflight_per_conn",
        "max_connections", "job_queue_capacity", "idle_timeout_ms", "shutdown_grace_ms",
        "write_high_watermark", "write_low_watermark", "buffer_budget_bytes", "frame_timeout_ms",
        "worker_retained_bytes", "inline_max_expansions", "worker_yield_us", "default_max_expansions", "max_scenes", "max_scene_cells",
        "max_scene_bytes", "watch_buffer_bytes", "max_watch_scenes", "max_watchers",
        "max_watches_per_conn", "metrics_scene_series", "reservation_ttl_ms", "reservation_clear_holds",
        "max_agents_per_scene",
        "max_reservation_entries", "max_reservation_window_ms", "max_agent_bytes", "max_clock_step_ms",
        "max_behind_wait_ms", "max_append_attempts", NULL,
    };
    char child[PD_CONF_JSON_PATH_MAX];
    if (!cJSON_IsObject(obj))
        return pd__fail(ctx, path, "must be an object, not %s", pd_conf_json_type(obj));
    if (pd__check_keys(ctx, obj, path, keys) != 0)
        return -1;
    for (size_t i = 0; i < PD__N_LIMITS; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, pd__limits[i].key);
        if (!v)
            continue;
        pd_conf_json_key(child, path, pd__limits[i].key);
        uint32_t *field = (uint32_t *)((char *)c + pd__limits[i].offset);
        if (pd__get_u32(ctx, v, child, pd__limits[i].lo, pd__limits[i].hi, field) != 0)
            return -1;
    }
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, "default_max_expansions");
    if (v) {
        pd_conf_json_key(child, path, "default_max_expansions");
        if (pd__get_uint(ctx, v, child, 0, PD_CONF_MAX_EXACT_INT, &c->default_max_expansions) != 0)
            return -1;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "reservation_clear_holds"))) {
        pd_conf_json_key(child, path, "reservation_clear_holds");
        if (!cJSON_IsBool(v))
            return pd__fail(ctx, child, "must be true or false, not %s", pd_conf_json_type(v));
        c->reservation_clear_holds = cJSON_IsTrue(v);
    }
    v = cJSON_GetObjectItemCaseSensitive(obj, "max_scene_bytes");
    if (v) {
        pd_conf_json_key(child, path, "max_scene_bytes");
        if (pd__get_uint(ctx, v, child, PD__MIB, PD_CONF_MAX_EXACT_INT, &c->max_scene_bytes) != 0)
            return -1;
    }
    if (c->write_low_watermark >= c->write_high_watermark) {
        pd_conf_json_key(child, path, "write_low_watermark");
        return pd__fail(ctx, child, "must be below write_high_watermark (%u)",
                        (unsigned)c->write_high_watermark);
    }
    return 0;
}

static int pd__valid_name_char(char ch)
{
    return isalnum((unsigned char)ch) || ch == '_' || ch == '.' || ch == '-';
}

/* Joins base_dir and a relative map path; absolute paths are kept as given. */
static int pd__resolve_map(const pd__ctx *ctx, const char *map, const char *path, char **out)
{
    char buf[PD_CONF_MAX_MAP_PATH];
    int n;
    const char *dir = ctx->base_dir;
    size_t dir_len = dir ? strlen(dir) : 0;
    if (map[0] == '/' || dir_len == 0)
        n = snprintf(buf, sizeof buf, "%s", map);
    else if (dir[dir_len - 1] == '/')
        n = snprintf(buf, sizeof buf, "%s%s", dir, map);
    else
        n = snprintf(buf, sizeof buf, "%s/%s", dir, map);
    if (n < 0 || (size_t)n >= sizeof buf)
        return pd__fail(ctx, path, "resolved path is longer than %d bytes", PD_CONF_MAX_MAP_PATH - 1);
    *out = strdup(buf);
    if (!*out)
        return pd__fail(ctx, path, "out of memory");
    return 0;
}

static const char *const pd__fsync_names[] = { "everysec", "always", "no" };

const char *pd_conf_fsync_name(pd_conf_fsync f)
{
    return (unsigned)f < sizeof pd__fsync_names / sizeof *pd__fsync_names ? pd__fsync_names[f] : "?";
}

/* "data_dir", "journal_fsync" and "journal_compact_bytes": the journal. */
static int pd__parse_journal(const pd__ctx *ctx, const cJSON *root, pd_conf *c)
{
    const cJSON *v;
    const char *str = NULL;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "data_dir")) && !cJSON_IsNull(v)) {
        if (pd__get_string(ctx, v, "$.data_dir", &str) != 0)
            return -1;
        if (str[0] != '\0') {
            char *resolved = NULL;
            if (pd__resolve_map(ctx, str, "$.data_dir", &resolved) != 0)
                return -1;
            size_t n = strlen(resolved);
            if (n < sizeof c->data_dir)
                memcpy(c->data_dir, resolved, n + 1);
            free(resolved);
            if (n >= sizeof c->data_dir)
                return pd__fail(ctx, "$.data_dir", "resolved path is longer than %d bytes",
                                PD_CONF_MAX_DATA_DIR - 1);
        }
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "journal_fsync"))) {
        if (pd__get_string(ctx, v, "$.journal_fsync", &str) != 0)
            return -1;
        size_t k = 0, n = sizeof pd__fsync_names / sizeof *pd__fsync_names;
        while (k < n && strcmp(str, pd__fsync_names[k]) != 0)
            k++;
        if (k == n)
            return pd__fail(ctx, "$.journal_fsync", "must be one of \"always\", \"everysec\", \"no\", not \"%s\"",
                            str);
        c->journal_fsync = (pd_conf_fsync)k;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "journal_compact_bytes")) &&
        pd__get_uint(ctx, v, "$.journal_compact_bytes", 64 * PD__KIB, PD_CONF_MAX_EXACT_INT,
                     &c->journal_compact_bytes) != 0)
        return -1;
    return 0;
}


/* "log"'s "redis": HOST:PORT where HOST is a name or address hiredis
 * resolves when it connects (a compose service name is a name), or
 * [IPv6]:PORT; the port 1..65535. */
static int pd__parse_redis_address(const pd__ctx *ctx, const char *s, const char *path, pd_conf_log *lg)
{
    const char *colon = strrchr(s, ':');
    const char *host = s;
    size_t host_len = colon ? (size_t)(colon - s) : 0;
    if (host_len >= 2 && s[0] == '[' && s[host_len - 1] == ']') {
        host++;
        host_len -= 2;
        for (size_t i = 0; i < host_len; i++)
            if (!isxdigit((unsigned char)host[i]) && host[i] != ':' && host[i] != '.')
                return pd__fail(ctx, path, "\"%s\": the IPv6 address holds a character other than hex digits, ':' and '.'", s);
    } else {
        for (size_t i = 0; i < host_len; i++)
            if (!isalnum((unsigned char)host[i]) && host[i] != '.' && host[i] != '-')
                return pd__fail(ctx, path, "\"%s\": must be HOST:PORT (HOST of [A-Za-z0-9.-], or [IPv6])", s);
    }
    if (!colon || host_len == 0 || host_len >= sizeof lg->redis_host)
        return pd__fail(ctx, path, "\"%s\": must be HOST:PORT with a host of 1..%d bytes", s,
                        PD_CONF_MAX_LOG_HOST - 1);
    const char *p = colon + 1;
    unsigned long port = 0;
    if (!*p || strlen(p) > 5)
        return pd__fail(ctx, path, "\"%s\": the port must be 1..65535", s);
    for (; *p; p++) {
        if (!isdigit((unsigned char)*p))
            return pd__fail(ctx, path, "\"%s\": the port must be 1..65535", s);
        port = port * 10 + (unsigned long)(*p - '0');
    }
    if (port == 0 || port > 65535)
        return pd__fail(ctx, path, "\"%s\": the port must be 1..65535", s);
    memcpy(lg->redis_host, host, host_len);
    lg->redis_host[host_len] = '\0';
    lg->redis_port = (uint16_t)port;
    return 0;
}

/* "log": the change log on Redis Streams (absent: the file journal). */
static int pd__parse_log(const pd__ctx *ctx, const cJSON *obj, pd_conf_log *lg)
{
    static const char *const keys[] = { "redis",          "timeout_ms",    "prefix", "dedup_ttl_s",
                                        "snapshot_every", "snapshot_keep", "snapshot_max_bytes", NULL };
    if (!cJSON_IsObject(obj))
        return pd__fail(ctx, "$.log", "must be an object, not %s", pd_conf_json_type(obj));
    if (pd__check_keys(ctx, obj, "$.log", keys) != 0)
        return -1;
    const cJSON *v;
    const char *str = NULL;
    if (!(v = cJSON_GetObjectItemCaseSensitive(obj, "redis")))
        return pd__fail(ctx, "$.log.redis", "is required in \"log\" (HOST:PORT of the Redis server)");
    if (pd__get_string(ctx, v, "$.log.redis", &str) != 0 || pd__parse_redis_address(ctx, str, "$.log.redis", lg) != 0)
        return -1;
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "timeout_ms")) &&
        pd__get_u32(ctx, v, "$.log.timeout_ms", 100, 60000, &lg->timeout_ms) != 0)
        return -1;
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "dedup_ttl_s")) &&
        pd__get_u32(ctx, v, "$.log.dedup_ttl_s", 1, 365.0 * 86400, &lg->dedup_ttl_s) != 0)
        return -1;
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "snapshot_every")) &&
        pd__get_u32(ctx, v, "$.log.snapshot_every", 1, 1e9, &lg->snapshot_every) != 0)
        return -1;
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "snapshot_keep")) &&
        pd__get_u32(ctx, v, "$.log.snapshot_keep", 1, 100, &lg->snapshot_keep) != 0)
        return -1;
    /* Redis's proto-max-bulk-len is 512 MiB by default. */
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "snapshot_max_bytes")) &&
        pd__get_uint(ctx, v, "$.log.snapshot_max_bytes", PD__KIB, 512 * PD__MIB, &lg->snapshot_max_bytes) != 0)
        return -1;
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "prefix"))) {
        if (pd__get_string(ctx, v, "$.log.prefix", &str) != 0)
            return -1;
        size_t n = strlen(str);
        if (n == 0 || n >= sizeof lg->prefix)
            return pd__fail(ctx, "$.log.prefix", "must be 1..%d bytes", PD_CONF_MAX_LOG_PREFIX - 1);
        for (size_t i = 0; i < n; i++)
            if (!isalnum((unsigned char)str[i]) && !strchr("_.-", str[i]))
                return pd__fail(ctx, "$.log.prefix", "\"%s\": only [A-Za-z0-9_.-]", str);
        memcpy(lg->prefix, str, n + 1);
    }
    return 0;
}

static int pd__parse_unit_sizes(const pd__ctx *ctx, const cJSON *arr, const char *path,
                                pd_conf_scene *s)
{
    char child[PD_CONF_JSON_PATH_MAX];
    if (!cJSON_IsArray(arr))
        return pd__fail(ctx, path, "must be an array, not %s", pd_conf_json_type(arr));
    int n = cJSON_GetArraySize(arr);
    if (n < 1 || n > PD_CONF_MAX_UNIT_SIZES)
        return pd__fail(ctx, path, "must list 1..%d unit sizes", PD_CONF_MAX_UNIT_SIZES);
    size_t count = 0;
    for (const cJSON *it = arr->child; it; it = it->next, count++) {
        pd_conf_json_index(child, path, count);
        uint32_t size;
        if (pd__get_u32(ctx, it, child, 1, PD_CONF_MAX_UNIT_SIZE, &size) != 0)
            return -1;
        /* Insertion keeps the list sorted so consumers can scan it in order. */
        size_t pos = count;
        while (pos > 0 && s->unit_sizes[pos - 1] > size)
            pos--;
        if (pos > 0 && s->unit_sizes[pos - 1] == size)
            return pd__fail(ctx, child, "unit size %u is listed twice", (unsigned)size);
        memmove(&s->unit_sizes[pos + 1], &s->unit_sizes[pos], (count - pos) * sizeof size);
        s->unit_sizes[pos] = size;
    }
    s->n_unit_sizes = count;
    return 0;
}

/* A tiled-only name key ("layer", "*_property") into dst. empty_ok: ""
 * means "none" (walkable_property). */
static int pd__parse_tiled_name(const pd__ctx *ctx, const cJSON *obj, const char *path,
                                const pd_conf_scene *s, const char *key, int empty_ok,
                                char dst[PD_TILED_MAX_NAME])
{
    char child[PD_CONF_JSON_PATH_MAX];
    const char *str = NULL;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v)
        return 0;
    pd_conf_json_key(child, path, key);
    if (s->format != PD_MAP_TILED)
        return pd__fail(ctx, child, "applies to tiled maps only");
    if (pd__get_string(ctx, v, child, &str) != 0)
        return -1;
    size_t len = strlen(str);
    if (len == 0 && !empty_ok)
        return pd__fail(ctx, child, "must not be empty%s",
                        strcmp(key, "layer") == 0 ? " (leave it out for every tile layer)" : "");
    if (len >= PD_TILED_MAX_NAME)
        return pd__fail(ctx, child, "must be at most %d bytes", PD_TILED_MAX_NAME - 1);
    memcpy(dst, str, len + 1);
    return 0;
}

/* One value of a "costs" table: a cost 1..255, or "blocked" (0). */
static int pd__parse_cost_value(const pd__ctx *ctx, const cJSON *v, const char *path, uint8_t *out)
{
    if (cJSON_IsString(v) && v->valuestring && strcmp(v->valuestring, "blocked") == 0) {
        *out = 0;
        return 0;
    }
    if (!cJSON_IsNumber(v))
        return pd__fail(ctx, path, "must be a cost 1..255 or \"blocked\", not %s",
                        pd_conf_json_type(v));
    uint32_t cost;
    if (pd__get_u32(ctx, v, path, 1, 255, &cost) != 0)
        return -1;
    *out = (uint8_t)cost;
    return 0;
}

/* "classes" of a tiled scene: {"Wall": "blocked", "Mud": 3}, a tile's or
 * object's class (Tiled's "type" / "class") -> cost. */
static int pd__parse_tiled_classes(const pd__ctx *ctx, const cJSON *obj, const char *path,
                                   pd_tiled_rules *r)
{
    char child[PD_CONF_JSON_PATH_MAX];
    if (!cJSON_IsObject(obj))
        return pd__fail(ctx, path, "must be an object {class: cost or \"blocked\"}, not %s",
                        pd_conf_json_type(obj));
    for (const cJSON *it = obj->child; it; it = it->next) {
        pd_conf_json_key(child, path, it->string);
        size_t len = strlen(it->string);
        if (len == 0 || len >= PD_TILED_MAX_NAME)
            return pd__fail(ctx, child, "a class name must be 1..%d bytes", PD_TILED_MAX_NAME - 1);
        if (r->n_classes == PD_TILED_MAX_CLASSES)
            return pd__fail(ctx, child, "more than PD_TILED_MAX_CLASSES (%d) classes",
                            PD_TILED_MAX_CLASSES);
        for (size_t k = 0; k < r->n_classes; k++) {
            if (strcmp(r->classes[k].name, it->string) == 0)
                return pd__fail(ctx, child, "key given more than once");
        }
        pd_tiled_class *c = &r->classes[r->n_classes];
        if (pd__parse_cost_value(ctx, it, child, &c->cell) != 0)
            return -1;
        memcpy(c->name, it->string, len + 1);
        r->n_classes++;
    }
    return 0;
}

/* The tiled walkability keys (pd_tiled.h states the rule they tune). */
static int pd__parse_tiled_rules(const pd__ctx *ctx, const cJSON *obj, const char *path,
                                 pd_conf_scene *s)
{
    pd_tiled_rules *r = &s->tiled;
    char child[PD_CONF_JSON_PATH_MAX];
    if (pd__parse_tiled_name(ctx, obj, path, s, "layer", 0, r->layer) != 0 ||
        pd__parse_tiled_name(ctx, obj, path, s, "blocked_property", 0, r->blocked_property) != 0 ||
        pd__parse_tiled_name(ctx, obj, path, s, "cost_property", 0, r->cost_property) != 0 ||
        pd__parse_tiled_name(ctx, obj, path, s, "walkable_property", 1, r->walkable_property) != 0)
        return -1;
    if ((r->walkable_property[0] && (strcmp(r->walkable_property, r->blocked_property) == 0 ||
                                     strcmp(r->walkable_property, r->cost_property) == 0)) ||
        strcmp(r->blocked_property, r->cost_property) == 0) {
        pd_conf_json_key(child, path, "cost_property");
        return pd__fail(ctx, child, "blocked_property, cost_property and walkable_property must "
                                    "be different names");
    }
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, "untagged_tiles");
    if (v) {
        const char *str = NULL;
        pd_conf_json_key(child, path, "untagged_tiles");
        if (s->format != PD_MAP_TILED)
            return pd__fail(ctx, child, "applies to tiled maps only");
        if (pd__get_string(ctx, v, child, &str) != 0)
            return -1;
        if (strcmp(str, "blocked") != 0 && strcmp(str, "open") != 0)
            return pd__fail(ctx, child, "must be \"blocked\" or \"open\"");
        r->untagged_open = str[0] == 'o';
    }
    v = cJSON_GetObjectItemCaseSensitive(obj, "colliders");
    if (v) {
        pd_conf_json_key(child, path, "colliders");
        if (s->format != PD_MAP_TILED)
            return pd__fail(ctx, child, "applies to tiled maps only");
        if (!cJSON_IsBool(v))
            return pd__fail(ctx, child, "must be true or false, not %s", pd_conf_json_type(v));
        r->colliders = cJSON_IsTrue(v);
    }
    v = cJSON_GetObjectItemCaseSensitive(obj, "classes");
    if (v) {
        pd_conf_json_key(child, path, "classes");
        if (s->format != PD_MAP_TILED)
            return pd__fail(ctx, child, "applies to tiled maps only");
        return pd__parse_tiled_classes(ctx, v, child, r);
    }
    return 0;
}

/* "level" and "layer" of an ldtk scene: names, as a tiled scene's layer. */
static int pd__parse_ldtk_names(const pd__ctx *ctx, const cJSON *obj, const char *path,
                                pd_conf_scene *s)
{
    char child[PD_CONF_JSON_PATH_MAX];
    static const char *const keys[2] = { "level", "layer" };
    char *const dst[2] = { s->ldtk.level, s->ldtk.layer };
    for (int k = 0; k < 2; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, keys[k]);
        if (!v)
            continue;
        const char *str = NULL;
        pd_conf_json_key(child, path, keys[k]);
        if (pd__get_string(ctx, v, child, &str) != 0)
            return -1;
        size_t len = strlen(str);
        if (len == 0)
            return pd__fail(ctx, child, "must not be empty");
        if (len >= PD_TILED_MAX_NAME)
            return pd__fail(ctx, child, "must be at most %d bytes", PD_TILED_MAX_NAME - 1);
        memcpy(dst[k], str, len + 1);
    }
    static const char *const tiled_only[] = { "blocked_property", "cost_property",
                                               "walkable_property", "untagged_tiles", "colliders",
                                               "classes" };
    for (size_t k = 0; k < sizeof tiled_only / sizeof tiled_only[0]; k++) {
        if (cJSON_GetObjectItemCaseSensitive(obj, tiled_only[k])) {
            pd_conf_json_key(child, path, tiled_only[k]);
            return pd__fail(ctx, child, "applies to tiled maps only");
        }
    }
    return 0;
}

/* "costs" of an ldtk scene: {"1": "blocked", "2": 3}, IntGrid value ->
 * cost. */
static int pd__parse_intgrid_costs(const pd__ctx *ctx, const cJSON *obj, const char *path,
                                   pd_conf_scene *s)
{
    char child[PD_CONF_JSON_PATH_MAX];
    if (!cJSON_IsObject(obj))
        return pd__fail(ctx, path, "must be an object, not %s", pd_conf_json_type(obj));
    for (const cJSON *it = obj->child; it; it = it->next) {
        pd_conf_json_key(child, path, it->string);
        char *end = NULL;
        long value = strtol(it->string, &end, 10);
        if (end == it->string || *end != '\0' || it->string[0] == '+' || it->string[0] == '-' ||
            it->string[0] == ' ' || value < 1 || value > 255)
            return pd__fail(ctx, child, "a key must be an IntGrid value 1..255");
        if (s->ldtk.cost_set[value])
            return pd__fail(ctx, child, "key given more than once");
        if (pd__parse_cost_value(ctx, it, child, &s->ldtk.cost[value]) != 0)
            return -1;
        s->ldtk.cost_set[value] = 1;
    }
    return 0;
}

/* "costs": {"S": 3, "W": "blocked"}. Keys are single printable ASCII
 * characters, because map rows are bytes and a multi-byte key could never
 * match one cell. */
static int pd__parse_costs(const pd__ctx *ctx, const cJSON *obj, const char *path,
                           pd_conf_scene *s)
{
    char child[PD_CONF_JSON_PATH_MAX];
    if (!cJSON_IsObject(obj))
        return pd__fail(ctx, path, "must be an object, not %s", pd_conf_json_type(obj));
    for (const cJSON *it = obj->child; it; it = it->next) {
        pd_conf_json_key(child, path, it->string);
        const unsigned char *key = (const unsigned char *)it->string;
        if (key[0] < 0x21 || key[0] > 0x7e || key[1] != '\0')
            return pd__fail(ctx, child, "a key must be one printable ASCII character");
        if (s->char_cost_set[key[0]])
            return pd__fail(ctx, child, "key given more than once");
        if (pd__parse_cost_value(ctx, it, child, &s->char_cost[key[0]]) != 0)
            return -1;
        s->char_cost_set[key[0]] = 1;
    }
    return 0;
}

static int pd__parse_scene(const pd__ctx *ctx, const cJSON *obj, const char *path,
                           pd_conf_scene *s)
{
    static const char *const keys[] = {
        "name", "map", "format", "origin", "cell_size", "unit_sizes", "costs", "layer",
        "blocked_property", "cost_property", "walkable_property", "untagged_tiles", "colliders", "level",
        "classes", "search", NULL,
    };
    char child[PD_CONF_JSON_PATH_MAX];
    const char *str = NULL;
    const cJSON *v;

    if (!cJSON_IsObject(obj))
        return pd__fail(ctx, path, "must be an object, not %s", pd_conf_json_type(obj));
    if (pd__check_keys(ctx, obj, path, keys) != 0)
        return -1;

    pd_conf_json_key(child, path, "name");
    v = cJSON_GetObjectItemCaseSensitive(obj, "name");
    if (!v)
        return pd__fail(ctx, child, "is required");
    if (pd__get_string(ctx, v, child, &str) != 0)
        return -1;
    size_t len = strlen(str);
    if (len == 0)
        return pd__fail(ctx, child, "must not be empty");
    if (len >= PD_CONF_MAX_NAME)
        return pd__fail(ctx, child, "must be at most %d bytes", PD_CONF_MAX_NAME - 1);
    for (size_t i = 0; i < len; i++) {
        if (!pd__valid_name_char(str[i]))
            return pd__fail(ctx, child, "may only contain A-Z a-z 0-9 _ . - (got \"%s\")", str);
    }
    memcpy(s->name, str, len + 1);

    pd_conf_json_key(child, path, "format");
    v = cJSON_GetObjectItemCaseSensitive(obj, "format");
    if (!v)
        return pd__fail(ctx, child, "is required (\"ascii\", \"movingai\", \"tiled\" or \"ldtk\")");
    if (pd__get_string(ctx, v, child, &str) != 0)
        return -1;
    if (strcmp(str, "ascii") == 0)
        s->format = PD_MAP_ASCII;
    else if (strcmp(str, "movingai") == 0)
        s->format = PD_MAP_MOVINGAI;
    else if (strcmp(str, "tiled") == 0)
        s->format = PD_MAP_TILED;
    else if (strcmp(str, "ldtk") == 0)
        s->format = PD_MAP_LDTK;
    else
        return pd__fail(ctx, child, "must be \"ascii\", \"movingai\", \"tiled\" or \"ldtk\"");

    /* These keys only mean something for some formats; elsewhere they would
     * be silently ignored, which is the mistake strict validation is for. */
    v = cJSON_GetObjectItemCaseSensitive(obj, "costs");
    if (v) {
        pd_conf_json_key(child, path, "costs");
        if (s->format == PD_MAP_LDTK) {
            if (pd__parse_intgrid_costs(ctx, v, child, s) != 0)
                return -1;
        } else if (s->format != PD_MAP_MOVINGAI) {
            return pd__fail(ctx, child, "applies to movingai and ldtk maps only (ascii maps write "
                                        "costs as 1..9, tiled maps as tile properties or \"classes\")");
        } else if (pd__parse_costs(ctx, v, child, s) != 0) {
            return -1;
        }
    }
    pd_tiled_rules_default(&s->tiled);
    if (s->format == PD_MAP_LDTK) {
        if (pd__parse_ldtk_names(ctx, obj, path, s) != 0)
            return -1;
    } else if (pd__parse_tiled_rules(ctx, obj, path, s) != 0) {
        return -1;
    }
    v = cJSON_GetObjectItemCaseSensitive(obj, "level");
    if (v && s->format != PD_MAP_LDTK) {
        pd_conf_json_key(child, path, "level");
        return pd__fail(ctx, child, "applies to ldtk maps only");
    }

    s->origin_x = 0.0;
    s->origin_y = 0.0;
    v = cJSON_GetObjectItemCaseSensitive(obj, "origin");
    if (v) {
        pd_conf_json_key(child, path, "origin");
        if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2)
            return pd__fail(ctx, child, "must be an array [x, y] of two numbers");
        char elem[PD_CONF_JSON_PATH_MAX];
        pd_conf_json_index(elem, child, 0);
        if (pd__get_finite(ctx, v->child, elem, &s->origin_x) != 0)
            return -1;
        pd_conf_json_index(elem, child, 1);
        if (pd__get_finite(ctx, v->child->next, elem, &s->origin_y) != 0)
            return -1;
    }

    s->cell_size = 1.0;
    v = cJSON_GetObjectItemCaseSensitive(obj, "cell_size");
    if (v) {
        pd_conf_json_key(child, path, "cell_size");
        if (pd__get_finite(ctx, v, child, &s->cell_size) != 0)
            return -1;
        if (!(s->cell_size > 0.0))
            return pd__fail(ctx, child, "must be > 0");
    }

    s->unit_sizes[0] = 1;
    s->n_unit_sizes = 1;
    v = cJSON_GetObjectItemCaseSensitive(obj, "unit_sizes");
    if (v) {
        pd_conf_json_key(child, path, "unit_sizes");
        if (pd__parse_unit_sizes(ctx, v, child, s) != 0)
            return -1;
    }

    v = cJSON_GetObjectItemCaseSensitive(obj, "search");
    if (v) {
        pd_conf_json_key(child, path, "search");
        if (pd__get_string(ctx, v, child, &str) != 0)
            return -1;
        if (strcmp(str, "auto") == 0)
            s->search = PD_CONF_SEARCH_AUTO;
        else if (strcmp(str, "jps") == 0)
            s->search = PD_CONF_SEARCH_JPS;
        else if (strcmp(str, "astar") == 0)
            s->search = PD_CONF_SEARCH_ASTAR;
        else
            return pd__fail(ctx, child, "must be \"auto\", \"jps\" or \"astar\"");
    }

    /* The map comes last: it is the only field that allocates. */
    pd_conf_json_key(child, path, "map");
    v = cJSON_GetObjectItemCaseSensitive(obj, "map");
    if (!v)
        return pd__fail(ctx, child, "is required");
    if (pd__get_string(ctx, v, child, &str) != 0)
        return -1;
    if (str[0] == '\0')
        return pd__fail(ctx, child, "must not be empty");
    s->root_dir = strdup(ctx->base_dir && ctx->base_dir[0] ? ctx->base_dir : ".");
    if (!s->root_dir)
        return pd__fail(ctx, child, "out of memory");
    return pd__resolve_map(ctx, str, child, &s->map_path);
}

static int pd__parse_scenes(const pd__ctx *ctx, const cJSON *arr, const char *path, pd_conf *c)
{
    char child[PD_CONF_JSON_PATH_MAX];
    if (!cJSON_IsArray(arr))
        return pd__fail(ctx, path, "must be an array, not %s", pd_conf_json_type(arr));
    int n = cJSON_GetArraySize(arr);
    if (n > PD_CONF_MAX_SCENES)
        return pd__fail(ctx, path, "lists %d scenes; at most %d are allowed", n, PD_CONF_MAX_SCENES);
    if (n == 0)
        return 0;
    c->scenes = calloc((size_t)n, sizeof *c->scenes);
    if (!c->scenes)
        return pd__fail(ctx, path, "out of memory");
    size_t i = 0;
    for (const cJSON *it = arr->child; it; it = it->next, i++) {
        pd_conf_json_index(child, path, i);
        /* Counting before parsing lets pd_conf_free release a partly filled entry. */
        c->n_scenes = i + 1;
        if (pd__parse_scene(ctx, it, child, &c->scenes[i]) != 0)
            return -1;
        for (size_t j = 0; j < i; j++) {
            if (strcmp(c->scenes[j].name, c->scenes[i].name) == 0) {
                char name_path[PD_CONF_JSON_PATH_MAX];
                pd_conf_json_key(name_path, child, "name");
                return pd__fail(ctx, name_path, "duplicate scene name \"%s\" (also %s[%zu])",
                                c->scenes[i].name, path, j);
            }
        }
    }
    return 0;
}

/* Turns a byte offset into a 1-based line and column for parse errors.
 * cJSON's error offset points at the offending character or just past it,
 * so the column is accurate to one. */
static void pd__line_col(const char *buf, size_t off, int *line, int *col)
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

static int pd__parse_role(const pd__ctx *ctx, const cJSON *v, const char *path, pd_role *out)
{
    static const struct {
        const char *name;
        pd_role role;
    } roles[] = {{"query", PD_ROLE_QUERY}, {"write", PD_ROLE_WRITE}, {"admin", PD_ROLE_ADMIN}};
    const char *str = NULL;
    if (pd__get_string(ctx, v, path, &str) != 0)
        return -1;
    for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++) {
        if (strcmp(str, roles[i].name) == 0) {
            *out = roles[i].role;
            return 0;
        }
    }
    return pd__fail(ctx, path, "must be \"query\", \"write\" or \"admin\"");
}

/* One auth.tokens entry: the token itself or the environment variable that
 * holds it (skipped when unset, so one config serves with and without it),
 * and its role. Returns 0 (*added says whether it counted), or -1. */
static int pd__parse_token(const pd__ctx *ctx, const cJSON *e, const char *path, pd_conf_token *out, int *added)
{
    static const char *const keys[] = {"token", "token_env", "role", NULL};
    char child[PD_CONF_JSON_PATH_MAX];
    *added = 0;
    if (!cJSON_IsObject(e))
        return pd__fail(ctx, path, "must be an object, not %s", pd_conf_json_type(e));
    if (pd__check_keys(ctx, e, path, keys) != 0)
        return -1;
    const cJSON *tok = cJSON_GetObjectItemCaseSensitive(e, "token");
    const cJSON *env = cJSON_GetObjectItemCaseSensitive(e, "token_env");
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(e, "role");
    if (!role || (!tok) == (!env))
        return pd__fail(ctx, path, "needs \"role\" and exactly one of \"token\" and \"token_env\"");
    pd_conf_json_key(child, path, "role");
    if (pd__parse_role(ctx, role, child, &out->role) != 0)
        return -1;
    const char *value = NULL;
    pd_conf_json_key(child, path, tok ? "token" : "token_env");
    if (pd__get_string(ctx, tok ? tok : env, child, &value) != 0)
        return -1;
    if (env && (!(value = getenv(value)) || !*value))
        return 0; /* unset or empty: this entry is off */
    size_t n = strlen(value);
    if (n < PD_CONF_MIN_TOKEN || n >= PD_CONF_MAX_TOKEN)
        return pd__fail(ctx, child, "the token must be %d..%d bytes long, not %zu", PD_CONF_MIN_TOKEN,
                        PD_CONF_MAX_TOKEN - 1, n);
    for (size_t i = 0; i < n; i++)
        if (value[i] < 0x21 || value[i] > 0x7e)
            return pd__fail(ctx, child, "the token must be printable ASCII without spaces");
    memcpy(out->token, value, n + 1);
    *added = 1;
    return 0;
}

static int pd__parse_auth(const pd__ctx *ctx, const cJSON *obj, const char *path, pd_conf *c)
{
    static const char *const keys[] = {"tokens", "protected_mode", NULL};
    char child[PD_CONF_JSON_PATH_MAX];
    if (!cJSON_IsObject(obj))
        return pd__fail(ctx, path, "must be an object, not %s", pd_conf_json_type(obj));
    if (pd__check_keys(ctx, obj, path, keys) != 0)
        return -1;
    const cJSON *pm = cJSON_GetObjectItemCaseSensitive(obj, "protected_mode");
    if (pm) {
        pd_conf_json_key(child, path, "protected_mode");
        if (!cJSON_IsBool(pm))
            return pd__fail(ctx, child, "must be true or false, not %s", pd_conf_json_type(pm));
        c->protected_mode = cJSON_IsTrue(pm);
    }
    const cJSON *toks = cJSON_GetObjectItemCaseSensitive(obj, "tokens");
    if (!toks)
        return 0;
    pd_conf_json_key(child, path, "tokens");
    if (!cJSON_IsArray(toks))
        return pd__fail(ctx, child, "must be an array, not %s", pd_conf_json_type(toks));
    if (cJSON_GetArraySize(toks) > PD_CONF_MAX_TOKENS)
        return pd__fail(ctx, child, "has more than %d entries", PD_CONF_MAX_TOKENS);
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, toks)
    {
        char entry[PD_CONF_JSON_PATH_MAX + 16];
        snprintf(entry, sizeof entry, "%s[%d]", child, i++);
        int added = 0;
        if (pd__parse_token(ctx, e, entry, &c->tokens[c->n_tokens], &added) != 0)
            return -1;
        c->n_tokens += (size_t)added;
    }
    return 0;
}

static int pd__parse_document(const pd__ctx *ctx, const char *json, size_t len, pd_conf *c)
{
    static const char *const keys[] = {
        "listen", "metrics_listen", "threads", "limits", "log_level", "jump_point_search", "auth", "scenes",
        "portals", "routes", "data_dir", "journal_fsync", "journal_compact_bytes",
        "log", "agent_check", NULL,
    };
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    if (!root) {
        size_t off = (end && end >= json && end <= json + len) ? (size_t)(end - json) : 0;
        int line, col;
        pd__line_col(json, off, &line, &col);
        if (ctx->err && ctx->errlen)
            snprintf(ctx->err, ctx->errlen, "%s:%d:%d: invalid JSON", ctx->source, line, col);
        return -1;
    }
    /* Without require_null_terminated cJSON stops after the first value; text
     * after it would otherwise be ignored silently. */
    size_t off = (size_t)(end - json);
    while (off < len && isspace((unsigned char)json[off]))
        off++;
    int rc = -1;
    if (off < len) {
        int line, col;
        pd__line_col(json, off, &line, &col);
        if (ctx->err && ctx->errlen)
            snprintf(ctx->err, ctx->errlen, "%s:%d:%d: unexpected text after the JSON document",
                     ctx->source, line, col);
        goto out;
    }
    if (!cJSON_IsObject(root)) {
        pd__fail(ctx, "$", "must be an object, not %s", pd_conf_json_type(root));
        goto out;
    }
    if (pd__check_keys(ctx, root, "$", keys) != 0)
        goto out;

    const cJSON *v;
    const char *str = NULL;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "listen"))) {
        if (pd__get_string(ctx, v, "$.listen", &str) != 0 ||
            pd__parse_listen(ctx, str, "$.listen", c->listen_host, &c->listen_port) != 0)
            goto out;
    }
    /* "" or null switches the metrics endpoint off. */
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "metrics_listen"))) {
        if (cJSON_IsNull(v)) {
            c->metrics_enabled = 0;
        } else if (pd__get_string(ctx, v, "$.metrics_listen", &str) != 0) {
            goto out;
        } else if (*str == '\0') {
            c->metrics_enabled = 0;
        } else if (pd__parse_listen(ctx, str, "$.metrics_listen", c->metrics_host,
                                    &c->metrics_port) != 0) {
            goto out;
        } else {
            c->metrics_enabled = 1;
        }
    }
    /* HAProxy's agent-check port: one word a connection (docs/OPERATIONS.md);
     * "" or null switches it off, as for metrics_listen. */
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "agent_check")) && !cJSON_IsNull(v)) {
        if (pd__get_string(ctx, v, "$.agent_check", &str) != 0)
            goto out;
        if (*str != '\0') {
            if (pd__parse_listen(ctx, str, "$.agent_check", c->agent_host, &c->agent_port) != 0)
                goto out;
            c->agent_enabled = 1;
        }
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "threads")) &&
        pd__get_u32(ctx, v, "$.threads", 0, PD_CONF_MAX_THREADS, &c->threads) != 0)
        goto out;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "log_level")) &&
        pd__parse_log_level(ctx, v, "$.log_level", &c->log_level) != 0)
        goto out;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "jump_point_search"))) {
        if (!cJSON_IsBool(v)) {
            pd__fail(ctx, "$.jump_point_search", "must be true or false, not %s", pd_conf_json_type(v));
            goto out;
        }
        c->jump_point_search = cJSON_IsTrue(v);
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "limits")) &&
        pd__parse_limits(ctx, v, "$.limits", c) != 0)
        goto out;
    if (pd__parse_journal(ctx, root, c) != 0)
        goto out;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "log")) && !cJSON_IsNull(v) &&
        pd__parse_log(ctx, v, &c->log) != 0)
        goto out;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "auth")) && pd__parse_auth(ctx, v, "$.auth", c) != 0)
        goto out;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "scenes")) &&
        pd__parse_scenes(ctx, v, "$.scenes", c) != 0)
        goto out;
    if (pd_conf_world_parse(root, ctx->source, &c->world, ctx->err, ctx->errlen) != 0)
        goto out;
    rc = 0;
out:
    cJSON_Delete(root);
    return rc;
}

int pd_conf_load_buffer(const char *json, size_t len, const char *source_name,
                        const char *base_dir, pd_conf *out, char *err, size_t errlen)
{
    pd__ctx ctx = {
        .source = source_name ? source_name : "<config>",
        .base_dir = base_dir,
        .err = err,
        .errlen = errlen,
    };
    if (err && errlen)
        err[0] = '\0';
    memset(out, 0, sizeof *out);
    if (!json) {
        if (err && errlen)
            snprintf(err, errlen, "%s: no config text", ctx.source);
        return -1;
    }
    pd_conf c = pd_conf_defaults;
    if (pd__parse_document(&ctx, json, len, &c) != 0) {
        pd_conf_free(&c);
        return -1;
    }
    *out = c;
    return 0;
}

/* Reads a whole config file, refusing anything above `cap` bytes before
 * allocating for it. */
static char *pd__read_file(const char *path, size_t cap, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: not a regular file", path);
        fclose(f);
        return NULL;
    }
    if ((uintmax_t)st.st_size > cap) {
        snprintf(err, errlen, "%s: larger than %zu bytes", path, cap);
        fclose(f);
        return NULL;
    }
    size_t size = (size_t)st.st_size;
    char *buf = malloc(size + 1);
    if (!buf) {
        snprintf(err, errlen, "%s: out of memory", path);
        fclose(f);
        return NULL;
    }
    /* Asking for one byte more than fstat reported catches a file that changed. */
    size_t n = fread(buf, 1, size + 1, f);
    int failed = ferror(f) || n != size;
    fclose(f);
    if (failed) {
        snprintf(err, errlen, "%s: read error or file changed while reading", path);
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

int pd_conf_load_file(const char *path, pd_conf *out, char *err, size_t errlen)
{
    char scratch[1];
    if (!err || errlen == 0) {
        /* Messages still need somewhere to go; this one is thrown away. */
        err = scratch;
        errlen = sizeof scratch;
    }
    memset(out, 0, sizeof *out);
    size_t len = 0;
    char *json = pd__read_file(path, PD_CONF_MAX_FILE_BYTES, &len, err, errlen);
    if (!json)
        return -1;
    /* Map paths are relative to the directory holding the config file. */
    char *dir = strdup(path);
    if (!dir) {
        free(json);
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    char *slash = strrchr(dir, '/');
    if (!slash)
        dir[0] = '\0';
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    int rc = pd_conf_load_buffer(json, len, path, dir, out, err, errlen);
    free(dir);
    free(json);
    return rc;
}

void pd_conf_scene_free(pd_conf_scene *s)
{
    if (!s)
        return;
    free(s->map_path);
    free(s->root_dir);
    s->map_path = NULL;
    s->root_dir = NULL;
}

int pd_conf_scene_from_fields(const pd_conf_scene_fields *f, pd_conf_scene *out, char *err,
                              size_t errlen)
{
    memset(out, 0, sizeof *out);
    pd__ctx ctx = { "CreateScene", NULL, err, errlen };
    /* The request's fields as the config entry they stand for, read by the
     * config's parser; the map key only satisfies it and is dropped. */
    cJSON *obj = cJSON_CreateObject();
    cJSON *origin = obj ? cJSON_AddArrayToObject(obj, "origin") : NULL;
    int ok = origin && cJSON_AddItemToArray(origin, cJSON_CreateNumber(f->origin_x)) &&
             cJSON_AddItemToArray(origin, cJSON_CreateNumber(f->origin_y)) &&
             cJSON_AddStringToObject(obj, "name", f->name ? f->name : "") &&
             cJSON_AddStringToObject(obj, "map", "request") &&
             (!f->format || cJSON_AddStringToObject(obj, "format", f->format)) &&
             (f->cell_size == 0.0 || cJSON_AddNumberToObject(obj, "cell_size", f->cell_size));
    if (ok && f->n_unit_sizes > 0) {
        cJSON *units = cJSON_AddArrayToObject(obj, "unit_sizes");
        ok = units != NULL;
        for (size_t i = 0; ok && i < f->n_unit_sizes; i++)
            ok = cJSON_AddItemToArray(units, cJSON_CreateNumber((double)f->unit_sizes[i]));
    }
    int rc = ok ? pd__parse_scene(&ctx, obj, "scene", out) : pd__fail(&ctx, "scene", "out of memory");
    cJSON_Delete(obj);
    pd_conf_scene_free(out);
    return rc;
}

void pd_conf_free(pd_conf *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n_scenes; i++) {
        free(c->scenes[i].map_path);
        free(c->scenes[i].root_dir);
    }
    free(c->scenes);
    c->scenes = NULL;
    c->n_scenes = 0;
    pd_conf_world_free(&c->world);
}

const char *pd_log_level_name(pd_log_level l)
{
    switch (l) {
    case PD_LOG_ERROR:
        return "error";
    case PD_LOG_WARN:
        return "warn";
    case PD_LOG_INFO:
        return "info";
    case PD_LOG_DEBUG:
        return "debug";
    }
    return "unknown";
}

/* Loopback: 127.0.0.0/8 and ::1, the addresses only this host reaches. */
static int pd__is_loopback(const char *host)
{
    return strncmp(host, "127.", 4) == 0 || strcmp(host, "::1") == 0;
}

int pd_conf_check_protected(const pd_conf *c, char *err, size_t errlen)
{
    if (!c->protected_mode || c->n_tokens > 0)
        return 0;
    const char *open = !pd__is_loopback(c->listen_host)                            ? c->listen_host
                       : c->metrics_enabled && !pd__is_loopback(c->metrics_host) ? c->metrics_host
                                                                                   : NULL;
    if (!open)
        return 0;
    snprintf(err, errlen,
             "protected mode: refusing to listen on %s with no auth token (anyone who reaches it could "
             "change the world); configure auth.tokens, listen on loopback, or set "
             "auth.protected_mode to false",
             open);
    return -1;
}

int pd_conf_token_find(const pd_conf *c, const char *token, size_t len)
{
    int found = -1;
    pd_role role = PD_ROLE_NONE;
    for (size_t i = 0; i < c->n_tokens; i++) {
        /* Every byte of every token is compared, whatever matched: the time
         * says nothing about how close a guess came. */
        const char *t = c->tokens[i].token;
        size_t n = strlen(t);
        unsigned diff = (unsigned)(n ^ len);
        for (size_t k = 0; k < PD_CONF_MAX_TOKEN - 1; k++) {
            unsigned char a = k < n ? (unsigned char)t[k] : 0;
            unsigned char b = k < len ? (unsigned char)token[k] : 0;
            diff |= (unsigned)(a ^ b);
        }
        if (len >= PD_CONF_MAX_TOKEN)
            diff |= 1;
        if (diff == 0 && c->tokens[i].role > role) {
            role = c->tokens[i].role;
            found = (int)i;
        }
    }
    return found;
}

pd_role pd_conf_token_role(const pd_conf *c, const char *token, size_t len)
{
    int i = pd_conf_token_find(c, token, len);
    return i < 0 ? PD_ROLE_NONE : c->tokens[i].role;
}

const char *pd_role_name(pd_role role)
{
    switch (role) {
    case PD_ROLE_QUERY:
        return "query";
    case PD_ROLE_WRITE:
        return "write";
    case PD_ROLE_ADMIN:
        return "admin";
    case PD_ROLE_NONE:
    default:
        return "none";
    }
}
