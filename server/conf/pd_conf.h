/*
 * pd_conf.h - the daemon's configuration: one const default, overlaid by a
 * JSON file. The only server layer that includes cJSON.h (the C client,
 * pathctl and pathd-load read JSON with it too, outside the server).
 *
 * The config's limits are named here, each with its unit and why it exists
 * (the world's in pd_conf_world.h, request limits in pd_codec.h and
 * pd_query.h, server constants in pd_server.h); the
 * defaults live in pd_conf_defaults (pd_conf.c). A config that fails
 * validation is refused whole, with the file, the JSON path and the reason
 * ("config/default.json: $.scenes[2].cell_size: must be > 0").
 *
 * Lifetime: pd_conf_load_file fills a caller-owned pd_conf; pd_conf_free
 * releases the strings and arrays it allocated (safe on a zeroed struct).
 */
#ifndef PD_CONF_H
#define PD_CONF_H

#include <stddef.h>
#include <stdint.h>

#include "pd_conf_world.h"
#include "pd_ldtk.h"
#include "pd_reason.h"
#include "pd_tiled.h"

#define PD_CONF_MAX_SCENES 1024
#define PD_CONF_MAX_HOST 64          /* bytes incl. NUL: a numeric IPv4/IPv6 address */
#define PD_CONF_MAX_NAME 64          /* bytes incl. NUL: scene names are short identifiers */
#define PD_CONF_MAX_UNIT_SIZES 8
#define PD_CONF_MAX_UNIT_SIZE 16     /* cells: larger agents want a coarser grid */
#define PD_CONF_MAX_TOKENS 16        /* auth.tokens entries: a few roles, a few rotations */
#define PD_CONF_MIN_TOKEN 16         /* bytes: shorter tokens are guessable */
#define PD_CONF_MAX_TOKEN 128        /* bytes incl. NUL */
#define PD_CONF_MAX_DATA_DIR 1024    /* bytes incl. NUL: the journal's directory, resolved */

/* What a token lets a connection do; each role includes the ones before. */
typedef enum pd_role {
    PD_ROLE_NONE = 0,                /* not authenticated yet: Ping and Auth only */
    PD_ROLE_QUERY = 1,               /* paths, routes and read-only queries */
    PD_ROLE_WRITE = 2,               /* also cell updates (and scene changes) */
    PD_ROLE_ADMIN = 3,               /* also Stats and Reload */
} pd_role;

typedef struct pd_conf_token {
    char token[PD_CONF_MAX_TOKEN];   /* never logged */
    pd_role role;
} pd_conf_token;

typedef enum pd_map_format {
    PD_MAP_MOVINGAI = 0,             /* "movingai": Moving AI .map */
    PD_MAP_ASCII = 1,                /* "ascii": '.', '#', '1'..'9' */
    PD_MAP_TILED = 2,                /* "tiled": Tiled map (.tmx / .tmj), see pd_tiled.h */
    PD_MAP_LDTK = 3,                 /* "ldtk": LDtk project, IntGrid layers, see pd_ldtk.h */
} pd_map_format;

/* Entries of a per-character cost table: one per byte value. */
#define PD_CONF_CHAR_COSTS 256

typedef enum pd_log_level {
    PD_LOG_ERROR = 0,
    PD_LOG_WARN = 1,
    PD_LOG_INFO = 2,
    PD_LOG_DEBUG = 3,
} pd_log_level;

/* A scene's "search": which search answers its requests where jump point
 * search applies (uniform-cost unit grid, 8-connected, no avoid cells,
 * window or partial path; A* answers everything else). */
typedef enum pd_conf_search {
    PD_CONF_SEARCH_DEFAULT = 0,      /* absent: JPS when "jump_point_search" is on */
    PD_CONF_SEARCH_AUTO,             /* "auto": measured per unit size at load and
                                        after large updates (pd_jps_pick) */
    PD_CONF_SEARCH_JPS,              /* "jps": always JPS */
    PD_CONF_SEARCH_ASTAR,            /* "astar": always A* */
} pd_conf_search;

/* "journal_fsync": when the journal (data_dir) is flushed to disk, as
 * Redis's appendfsync. */
typedef enum pd_conf_fsync {
    PD_CONF_FSYNC_EVERYSEC = 0,      /* "everysec" (default): at most about a second of
                                        acknowledged changes is lost with the machine */
    PD_CONF_FSYNC_ALWAYS,            /* "always": before each change is answered */
    PD_CONF_FSYNC_NO,                /* "no": when the kernel writes back (the process
                                        may crash without loss; the machine may not) */
} pd_conf_fsync;

const char *pd_conf_fsync_name(pd_conf_fsync f);

/* "log": where the change log lives when it is not the file journal. */
#define PD_CONF_MAX_LOG_HOST 256     /* bytes incl. NUL: a host name or address */
#define PD_CONF_MAX_LOG_PREFIX 64    /* bytes incl. NUL: the Redis keys' prefix */
typedef struct pd_conf_log {
    char redis_host[PD_CONF_MAX_LOG_HOST]; /* "redis": "HOST:PORT" (a name, an IPv4
                                        address or [IPv6]); "" = no Redis log: the
                                        file journal (data_dir) serves as before */
    uint16_t redis_port;
    uint32_t timeout_ms;             /* "timeout_ms": 2000: connect and each command */
    char prefix[PD_CONF_MAX_LOG_PREFIX]; /* "prefix": "pathd": every key starts with it */
    uint32_t dedup_ttl_s;            /* "dedup_ttl_s": 86400: how long an idempotency
                                        key is remembered */
    uint32_t snapshot_every;         /* "snapshot_every": 1000: a scene's snapshot is
                                        written to Redis every this many versions */
    uint32_t snapshot_keep;          /* "snapshot_keep": 3: snapshots kept per scene;
                                        its stream is trimmed below the oldest */
    uint64_t snapshot_max_bytes;     /* "snapshot_max_bytes": 256 MiB: a scene whose
                                        snapshot is larger is not snapshotted */
} pd_conf_log;

typedef struct pd_conf_scene {
    char name[PD_CONF_MAX_NAME];
    char *map_path;                  /* resolved against the config file's directory */
    char *root_dir;                  /* that directory ("." when none): a Tiled map's
                                        external tilesets must lie inside it */
    pd_map_format format;
    double origin_x, origin_y;       /* world coordinates of cell (0,0)'s corner; may be negative */
    double cell_size;                /* world units per cell; > 0 */
    uint32_t unit_sizes[PD_CONF_MAX_UNIT_SIZES];
    size_t n_unit_sizes;             /* >= 1; default {1} */
    pd_conf_search search;           /* "search"; default PD_CONF_SEARCH_DEFAULT */
    /* "costs" (movingai only): char_cost_set[c] != 0 makes map character c
     * mean char_cost[c]: 0 = blocked, 1..255 = passable with that cost. Unset
     * characters keep the format's meaning. */
    uint8_t char_cost[PD_CONF_CHAR_COSTS];
    uint8_t char_cost_set[PD_CONF_CHAR_COSTS];
    /* Tiled maps: "layer", the "*_property" names, "untagged_tiles" and
     * "colliders" (defaults: pd_tiled_rules_default). */
    pd_tiled_rules tiled;
    /* LDtk projects: "level", "layer" and "costs" (IntGrid value -> cost). */
    pd_ldtk_rules ldtk;
} pd_conf_scene;

typedef struct pd_conf {
    char listen_host[PD_CONF_MAX_HOST];  /* "127.0.0.1" */
    uint16_t listen_port;            /* 7420 */
    int metrics_enabled;             /* 1: serve /metrics and /healthz over HTTP */
    char metrics_host[PD_CONF_MAX_HOST]; /* "127.0.0.1": metrics stay on loopback by default */
    uint16_t metrics_port;           /* 9420 */
    int agent_enabled;               /* 1: answer HAProxy's agent-check ("agent_check") */
    char agent_host[PD_CONF_MAX_HOST]; /* "agent_check": HOST:PORT, numeric host */
    uint16_t agent_port;             /* 0 asks the OS for a port */
    uint32_t threads;                /* worker threads; 0 = number of cores */
    uint32_t max_frame_bytes;        /* 1 MiB: largest payload accepted, checked before allocating */
    uint32_t max_waypoints_per_chunk;/* 256: keeps each PathChunk frame small and streamable */
    uint32_t max_inflight_per_conn;  /* 64: beyond it a request is answered OVERLOADED */
    uint32_t max_connections;        /* 10000: excess connections are told OVERLOADED and closed */
    uint32_t job_queue_capacity;     /* 4096: full queue answers OVERLOADED at once */
    uint32_t idle_timeout_ms;        /* 300000: a silent connection is closed; 0 = never */
    uint32_t shutdown_grace_ms;      /* 5000: SIGTERM waits this long for in-flight work */
    uint32_t write_high_watermark;   /* 4 MiB queued for a client: stop reading from it */
    uint32_t write_low_watermark;    /* 1 MiB: resume reading */
    uint32_t buffer_budget_bytes;    /* 128 MiB: input and output buffered for all
                                        connections together; past it the largest
                                        holders are closed first */
    uint32_t frame_timeout_ms;       /* 10000: a frame's header and body must arrive
                                        within this of its first byte; 0 = never */
    uint32_t worker_retained_bytes;  /* 8 MiB: search memory (node records, open list,
                                        path buffer) a worker keeps after a task; what a
                                        larger search grew beyond it is given back */
    uint32_t inline_max_expansions;  /* 64: a FindPath that A* finishes within this many
                                        expansions is answered on the loop thread, without
                                        a worker's round trip; 0 = every search on a worker */
    uint32_t worker_yield_us;        /* 200: workers that can fill every core yield the CPU
                                        between tasks at most this often, so the loop thread
                                        is not kept waiting for a core; 0 = never */
    uint64_t default_max_expansions; /* 0 = unlimited; used when a request gives none */
    uint32_t max_scenes;             /* 100000: scenes served, config and run-time
                                        together; CreateScene/CreateInstance past it
                                        answer LIMIT_EXCEEDED */
    uint32_t max_scene_cells;        /* 16777216 (4096 x 4096): cells of one scene made
                                        by CreateScene */
    uint64_t max_scene_bytes;        /* 4 GiB: memory all scene snapshots hold together
                                        (an unchanged instance: a few hundred bytes) */
    uint32_t watch_buffer_bytes;     /* 1 MiB: a watcher's unread answers past which its
                                        watches end with WATCH_OVERFLOW */
    uint32_t max_behind_wait_ms;     /* 200: a replica (log.redis) whose scene is behind a
                                        query's min_version waits this long for its tail,
                                        then answers STALE_VERSION (the BEHIND) */
    uint32_t max_append_attempts;    /* 4: a replica (log.redis) whose append lost the log's
                                        compare-and-set to another replica's waits for its tail
                                        (max_behind_wait_ms) and builds the update again, up to
                                        this many appends in all before UNAVAILABLE; 1: never */
    uint32_t max_watch_scenes;       /* 64: scenes one Watch may name */
    uint32_t max_watchers;           /* 1000: Watches open on the server at once */
    uint32_t max_watches_per_conn;   /* 64: Watches open on one connection at once, so
                                        one client cannot take every max_watchers slot */
    uint32_t metrics_scene_series;   /* 100: scenes /metrics gives series of their own
                                        (those with the most requests); the others are
                                        summed */
    /* Space-time reservations (issue 34, pd_reserve.h), per scene. */
    uint32_t reservation_ttl_ms;     /* 30000 (game time): an agent not renewed (by a
                                        ReservePath) for this long is released, and
                                        entries that ended this long ago are collected;
                                        0 = never */
    int reservation_clear_holds;     /* 1: ReservePath's PARTIAL hold for good (and a
                                        holder moved aside) only where it blocks no one
                                        (pd_yield.h's clear holds) */
    uint32_t max_agents_per_scene;   /* 10000: agents in one scene's table; 0 = no limit */
    uint32_t max_reservation_entries;/* 1000000: waits and moves reserved in one scene,
                                        all agents together; 0 = no limit */
    uint32_t max_reservation_window_ms; /* 60000: the longest ReservePath.window_ms; with
                                        a limit, window 0 ("all the way") is past it;
                                        0 = no limit */
    uint32_t max_agent_bytes;        /* 1 MiB: accounted bytes of one agent's
                                        reservations; 0 = no limit */
    uint32_t max_clock_step_ms;      /* 3600000 (game time): how far a ReservePath's
                                        t0_ms may lead its scene's clock while the
                                        scene holds agents (a t0 past it would expire
                                        them all; a longer reservation_ttl_ms
                                        is the limit then); 0 = no limit */
    pd_log_level log_level;          /* info */
    int jump_point_search;           /* 1: workers answer with JPS where it applies
                                        (uniform 8-connected grids, no avoid/window/
                                        partial); same optimal cost, far fewer nodes */
    pd_conf_token tokens[PD_CONF_MAX_TOKENS];  /* auth.tokens; none = no authentication */
    size_t n_tokens;
    int protected_mode;              /* 1: refuse to listen off loopback with no token */
    pd_conf_scene *scenes;
    size_t n_scenes;
    pd_conf_world world;             /* portals and pinned routes ("portals", "routes") */
    char data_dir[PD_CONF_MAX_DATA_DIR]; /* "data_dir", resolved against the config file's
                                        directory; "" = no journal (nothing survives a
                                        restart) */
    pd_conf_fsync journal_fsync;     /* "journal_fsync": everysec */
    uint64_t journal_compact_bytes;  /* "journal_compact_bytes": 64 MiB: a journal log
                                        past this is rewritten as snapshot + tail */
    pd_conf_log log;                 /* "log": the Redis change log (issue 32) */
} pd_conf;

extern const pd_conf pd_conf_defaults;

/* Protected mode, as Redis has it: with protected_mode on and no token, both
 * listen addresses (the metrics one when enabled) must be loopback. Returns
 * 0, or -1 with the reason in err. Run it on the config as it will be used,
 * command-line overrides included. */
int pd_conf_check_protected(const pd_conf *c, char *err, size_t errlen);

/* The role a token grants, or PD_ROLE_NONE; compares against every
 * configured token in time independent of where they differ. */
pd_role pd_conf_token_role(const pd_conf *c, const char *token, size_t len);
/* The same, as the index in c->tokens of the entry that grants it (the
 * highest role among equal tokens), or -1: what a connection keeps of its
 * Auth, so a reload can look its token up again in the new config without
 * a copy of the secret (pd_reload.c). */
int pd_conf_token_find(const pd_conf *c, const char *token, size_t len);

const char *pd_role_name(pd_role role);

/* Returns 0 on success; otherwise -1 with a one-line reason in err. On failure
 * *out is left zeroed (nothing half-loaded). The accepted JSON shape is
 * documented at the top of pd_conf.c and in config/README.md. "listen" takes a
 * numeric host: "HOST:PORT" or "[IPv6]:PORT"; listen_host holds the address
 * without brackets; port 0 asks the OS for an ephemeral port. */
int pd_conf_load_file(const char *path, pd_conf *out, char *err, size_t errlen);

/* Same, from a buffer; base_dir resolves relative map paths. */
int pd_conf_load_buffer(const char *json, size_t len, const char *source_name,
                        const char *base_dir, pd_conf *out, char *err, size_t errlen);

void pd_conf_free(pd_conf *c);

/* What CreateScene gives for a scene made at run time: the keys of a config
 * scene entry but the map, which comes with the request. format and
 * unit_sizes may be NULL / empty for the config's defaults ("ascii" needs
 * no default: NULL format is refused as in the config); cell_size 0 means
 * the default 1. */
typedef struct pd_conf_scene_fields {
    const char *name;
    const char *format;              /* "ascii" | "movingai" | "tiled" | "ldtk" */
    double origin_x, origin_y;
    double cell_size;
    const uint32_t *unit_sizes;
    size_t n_unit_sizes;
} pd_conf_scene_fields;

/* Fills out (zeroed first) from f with the config's own scene parser, so a
 * scene made at run time passes exactly the checks and gets exactly the
 * defaults of a config entry; map_path and root_dir stay NULL. Returns 0,
 * or -1 with "CreateScene: scene.unit_sizes[1]: ..." in err. Free with
 * pd_conf_scene_free. */
int pd_conf_scene_from_fields(const pd_conf_scene_fields *f, pd_conf_scene *out, char *err,
                              size_t errlen);
void pd_conf_scene_free(pd_conf_scene *s);

/* Parses "HOST:PORT" or "[IPv6]:PORT" (numeric host, port 0..65535) as the
 * "listen" key does; for --listen and --metrics-listen. Returns 0, or -1 with
 * the reason in err and host/port untouched. */
int pd_conf_parse_address(const char *s, char host[PD_CONF_MAX_HOST], uint16_t *port,
                          char *err, size_t errlen);

/* Room for what pd_conf_format_address writes: brackets, colon, five digits. */
#define PD_CONF_MAX_ADDRESS (PD_CONF_MAX_HOST + 8)

/* Writes "HOST:PORT", or "[HOST]:PORT" for an IPv6 host, the form
 * pd_conf_parse_address reads, into out; returns out. */
const char *pd_conf_format_address(char out[PD_CONF_MAX_ADDRESS], const char *host, uint16_t port);

const char *pd_log_level_name(pd_log_level l);

#endif
