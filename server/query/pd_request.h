/*
 * pd_request.h - what a client can ask: the one list of request kinds and
 * the decoded request of each, as the codec hands them to the server.
 *
 * The codec fills these from the wire and checks every field's own range;
 * what needs a scene (does it exist, does it serve the unit size, is the
 * point inside it) is checked against the snapshot a request runs on, by
 * the pd_query_*_prepare functions (pd_query.h) - in one place for every
 * kind.
 *
 * Lifetime: a decoded request may own heap arrays (FindPath.avoid and goals,
 * UpdateCells.cells, ValidateMove.moves, Batch.items, Watch.scenes); release them with pd_request_free, or take them over
 * by copying the pointer and setting the request's field to NULL first.
 */
#ifndef PD_REQUEST_H
#define PD_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "pd_conf.h"
#include "pd_journal.h"
#include "pd_scene.h"
#include "pd_search.h"
#include "pd_targets.h"

typedef enum pd_waypoint_style {
    PD_STYLE_CELLS = 0,     /* every cell */
    PD_STYLE_CORNERS = 1,   /* start, direction changes, goal */
    PD_STYLE_SMOOTH = 2,    /* string-pulled on the unit grid (pd_path_smooth) */
} pd_waypoint_style;

/* What to do when start and goal are not connected (see the pipeline at the
 * top of pd_query.c). */
typedef enum pd_goal_mode {
    PD_GOAL_EXACT = 0,      /* NO_PATH, decided in O(1) from component labels */
    PD_GOAL_NEAREST = 1,    /* the reachable cell nearest the goal (PARTIAL) */
    PD_GOAL_LINE = 2,       /* the first reachable cell on the line goal -> start (PARTIAL) */
} pd_goal_mode;

typedef enum pd_request_kind {
    PD_REQ_NONE = 0,
    PD_REQ_FIND_PATH,
    PD_REQ_CANCEL,
    PD_REQ_LIST_SCENES,
    PD_REQ_SCENE_INFO,
    PD_REQ_STATS,
    PD_REQ_PING,
    PD_REQ_UPDATE_CELLS,
    PD_REQ_SCENE_GRID,
    PD_REQ_FIND_ROUTE,
    PD_REQ_AUTH,
    PD_REQ_RELOAD,
    PD_REQ_RAYCAST,          /* the movement queries: PD_REQ_RAYCAST .. */
    PD_REQ_VALIDATE_MOVE,
    PD_REQ_MOVE_ALONG,
    PD_REQ_NEAREST,
    PD_REQ_REACHABLE,
    PD_REQ_RANDOM_POINT,
    PD_REQ_DISTANCE_TO_WALL, /* .. PD_REQ_DISTANCE_TO_WALL (pd_request_is_move) */
    PD_REQ_BATCH,            /* up to PD_BATCH_MAX_ITEMS movement queries and
                                up to PD_BATCH_MAX_PATHS FindPaths */
    PD_REQ_GET_LIMITS,       /* the limits a client must respect */
    PD_REQ_CREATE_SCENE,     /* the scene changes (pd_scene_change_req): .. */
    PD_REQ_CREATE_INSTANCE,
    PD_REQ_DROP_SCENE,       /* .. (pd_request_is_scene_change) */
    PD_REQ_WATCH,            /* subscribe to scenes' changes (the net layer keeps them) */
    PD_REQ_UNWATCH,
    PD_REQ_RESERVE_PATH,     /* the reservations (pd_kind_reserve.h): .. */
    PD_REQ_RELEASE_AGENT,
    PD_REQ_GET_RESERVATIONS, /* .. */
    PD_REQ__COUNT            /* not a kind: how many there are */
} pd_request_kind;

typedef struct pd_point_spec {
    int is_world;            /* 1: wx/wy are world coordinates; 0: cell */
    pd_point cell;
    double wx, wy;
} pd_point_spec;

/* FindPath to within range (of the goal or of each of goals): the farthest a
 * request may stop from its goal, in cells. The query layer scans the disc
 * of this radius around each goal for a cell of the start's component before
 * searching (O(1) reachability's counterpart), so the cap bounds that scan
 * (pi * 128^2, ~51k label reads per goal). */
#define PD_FINDPATH_MAX_RANGE 128.0
/* FindPath.goals: the nearest of several goals in one search. The search's
 * heuristic is a minimum over them (pd_targets.h). */
#define PD_FINDPATH_MAX_GOALS PD_TARGETS_MAX_GOALS

typedef struct pd_find_path_req {
    char scene[PD_CONF_MAX_NAME];
    pd_point_spec start;
    pd_point_spec goal;
    uint32_t unit_size;      /* >= 1 after decoding */
    pd_connectivity connectivity;
    uint64_t max_expansions; /* 0 = server default */
    uint32_t deadline_ms;    /* 0 = none */
    pd_waypoint_style style;
    pd_goal_mode goal_mode;
    int snap;                /* blocked start/goal: nearest open cell (PARTIAL) */
    int partial_on_cutoff;   /* budget/deadline: path to the best node (PARTIAL) */
    double speed;            /* world units per second, finite, >= 0; 0 = no times */
    double start_time;       /* seconds at the start, finite */
    pd_point *avoid;         /* malloc'd (owned, see pd_request_free); NULL when empty */
    size_t n_avoid;          /* <= PD_CODEC_MAX_AVOID (pd_codec.h) */
    int has_window;          /* window_min <= window_max, both non-negative; the grid
                                clips it later */
    pd_point window_min, window_max;
    double range;            /* 0..PD_FINDPATH_MAX_RANGE cells; 0 = reach the goal itself */
    int line_of_sight;       /* only with range > 0 */
    pd_point_spec *goals;    /* malloc'd (owned); with n_goals > 0 `goal` is unused */
    size_t n_goals;          /* 0, or 1..PD_FINDPATH_MAX_GOALS */
    int want_world;          /* the answer carries world coordinates too */
    uint64_t min_version;    /* 0 = any; an older snapshot answers PD_STALE_VERSION */
    int avoid_reserved;      /* plan around the scene's reservations (speed > 0,
                                start_time >= 0; the codec refuses what it cannot
                                combine with) */
} pd_find_path_req;

/* FindRoute. Whether the scenes exist, serve the unit size and hold the
 * points is the server's to check against its world. */
typedef struct pd_find_route_req {
    char from_scene[PD_CONF_MAX_NAME];
    pd_point_spec start;
    char to_scene[PD_CONF_MAX_NAME];
    pd_point_spec goal;
    uint32_t unit_size;      /* 1..PD_CONF_MAX_UNIT_SIZE after decoding */
    pd_waypoint_style style;
    pd_goal_mode goal_mode;
    double speed;            /* world units per second, finite, >= 0; 0 = no times */
    double start_time;       /* seconds at the start, finite */
    uint64_t max_expansions; /* per leg search; 0 = server default */
    uint32_t deadline_ms;    /* 0 = none; <= PD_CODEC_MAX_DEADLINE_MS (pd_codec.h) */
    int want_world;          /* the answer carries world coordinates too */
} pd_find_route_req;

/* UpdateCells: update.cells points at the owned array cells (NULL for a
 * rectangle). Bounds against the grid are the scene layer's to check. */
typedef struct pd_update_cells_req {
    char scene[PD_CONF_MAX_NAME];
    pd_scene_update update;
    pd_point *cells;         /* malloc'd (owned, see pd_request_free) */
    pd_scene_update *ops;    /* UpdateCells.ops: malloc'd (owned), each op's cells
                                malloc'd and owned too; NULL without ops */
    size_t n_ops;
    int has_at_ms;           /* UpdateCells.at_ms: when blocked cells cut the scene's
                                reservations (unset: the latest time they heard of) */
    int64_t at_ms;
    char idem_key[PD_IDEMPOTENCY_KEY_MAX + 1];  /* "" = none (pd_store.h) */
} pd_update_cells_req;

/* Frees what a decoded UpdateCells owns (pd_request_free calls it). */
void pd_update_cells_req_free(pd_update_cells_req *u);

/* GetSceneGrid: which grid and which rows. Whether the scene serves the unit
 * size and whether row_start lies inside its grid are the server's to check,
 * since only it holds the scene. */
typedef struct pd_scene_grid_req {
    char scene[PD_CONF_MAX_NAME];
    uint32_t unit_size;      /* 1..PD_CONF_MAX_UNIT_SIZE (0 on the wire becomes 1) */
    int32_t row_start;       /* 0..PD_GRID_MAX_SIDE */
    int32_t row_count;       /* 0..PD_GRID_MAX_SIDE; 0 = as many as fit in one band */
    uint64_t min_version;    /* as pd_find_path_req's */
} pd_scene_grid_req;

/* GetSceneInfo. */
typedef struct pd_scene_info_req {
    char scene[PD_CONF_MAX_NAME];
    uint64_t min_version;    /* as pd_find_path_req's */
} pd_scene_info_req;

/* Watch: the scenes named, distinct, each a valid name. How many a watch
 * may name is the server's limit (limits.max_watch_scenes); the decoder
 * refuses more than PD_WATCH_MAX_SCENES, the most that limit allows. */
#define PD_WATCH_MAX_SCENES 1024u

typedef struct pd_watch_req {
    char (*scenes)[PD_CONF_MAX_NAME];  /* malloc'd (owned), n_scenes of them */
    size_t n_scenes;                   /* 1..PD_WATCH_MAX_SCENES */
} pd_watch_req;

/* CreateScene, CreateInstance, DropScene: which fields count depends on
 * the kind. The scene entry passed the config's parser
 * (pd_conf_scene_from_fields); the map is parsed on a worker. */
typedef struct pd_scene_change_req {
    char name[PD_CONF_MAX_NAME];
    char tmpl[PD_CONF_MAX_NAME];     /* CreateInstance: the template */
    int drop_portals;                /* DropScene */
    pd_conf_scene *scene;            /* CreateScene: name, format, placement, units;
                                        malloc'd (owned): it is kilobytes, and every
                                        request and job would otherwise carry (and
                                        zero) it */
    uint8_t *map;                    /* CreateScene: malloc'd (owned): the map file's
                                        bytes, or the raw cells */
    size_t map_len;
    int raw;                         /* 1: map holds width * height raw cells */
    int32_t width, height;
    char idem_key[PD_IDEMPOTENCY_KEY_MAX + 1];  /* "" = none (pd_store.h) */
} pd_scene_change_req;

/* ReservePath, ReleaseAgent, GetReservations (issue 34; the three share
 * one struct: which fields count depends on the kind). The codec checks
 * each field's own range; the scene, unit size and cells are checked
 * against the snapshot in the scene's lane. */
typedef struct pd_reserve_req {
    char scene[PD_CONF_MAX_NAME];
    uint64_t agent;
    uint32_t unit_size;      /* >= 1 after decoding */
    pd_point_spec start, goal;
    /* FindPath's goal sets and range: n_goals 0 for `goal` alone (inline,
     * not malloc'd: the request is copied into its job as it is). */
    pd_point_spec goals[PD_FINDPATH_MAX_GOALS];
    size_t n_goals;          /* 0, or 1..PD_FINDPATH_MAX_GOALS */
    double range;            /* 0..PD_FINDPATH_MAX_RANGE cells */
    int64_t t0_ms;           /* 0..PD_SIPP_MAX_T0 */
    double speed;            /* cells per second */
    int64_t window_ms;       /* 8000 when unset; 0 = all the way */
    int64_t yield_after_ms;  /* 0: move no one; else holders may be moved aside
                                once the agent stood this long (pd_yield.h) */
    int at_goal;             /* pd_at_goal */
    pd_connectivity connectivity;
    uint64_t max_expansions; /* 0 = server default */
    uint32_t deadline_ms;    /* 0 = none */
    uint64_t min_version;
    /* GetReservations */
    int has_rect;
    pd_point rect_min, rect_max;
    int64_t from_ms, to_ms;  /* to_ms: INT64_MAX for no end */
    uint32_t max_entries;    /* 0 = as many as fit one frame */
    /* ReleaseAgent */
    int all;                 /* every agent of the scene (agent is 0) */
} pd_reserve_req;

/* ---- authoritative movement (pd_movement.h runs these) ---------------- */

#define PD_MOVE_MAX_POINTS 256u        /* ValidateMove.moves */
#define PD_MOVE_MAX_RADIUS 1024u       /* NearestWalkable.radius, DistanceToWall.max_distance (cells) */
#define PD_MOVE_DEFAULT_WALL_DISTANCE 64u  /* DistanceToWall.max_distance 0 */
#define PD_MOVE_MAX_WALK_RADIUS 256.0  /* RandomPoint.radius (walking cost in cells) */
#define PD_MOVE_MAX_TOLERANCE 10.0     /* ValidateMove.tolerance */
#define PD_BATCH_MAX_ITEMS 256u        /* Batch.items */
/* FindPath items of one Batch, and the waypoints each may answer with: the
 * whole path travels inside the one BatchResult frame, so these two bound
 * it (32 x 512 waypoints, well under a 1 MiB frame). A longer path is that
 * item's FRAME_TOO_LARGE: ask for it alone, which streams in chunks. */
#define PD_BATCH_MAX_PATHS 32u
#define PD_BATCH_MAX_PATH_WAYPOINTS 512u
/* Longest reason a request item carries, in bytes with the NUL: shorter
 * than PD_QUERY_MESSAGE_MAX because a Batch holds up to PD_BATCH_MAX_ITEMS
 * of them in one request, and an item's reason names one field, not a
 * file. */
#define PD_REQUEST_MESSAGE_MAX 192

typedef struct pd_timed_point {
    pd_point_spec point;
    double t;                /* seconds, finite */
} pd_timed_point;

/* One movement query; which fields count depends on kind:
 *   RAYCAST           a = from, b = to
 *   VALIDATE_MOVE     moves[0..n_moves), max_speed, tolerance
 *   MOVE_ALONG        a = from, dx/dy (cells, or world units for a world a)
 *   NEAREST           a = at, radius, b = reachable_from when has_b
 *   REACHABLE         a = from, b = to
 *   RANDOM_POINT      a = around, radius, seed
 *   DISTANCE_TO_WALL  a = at, radius = max_distance
 *   FIND_PATH         path (Batch items only; its deadline_ms counts from
 *                     the batch's arrival, as the request's alone would)
 * Inside a Batch an item that fails decoding keeps its kind (or
 * PD_REQ_NONE) with status and message set; the others still run. */
typedef struct pd_move_req {
    pd_request_kind kind;
    pd_status status;        /* PD_OK, or why decoding refused this item */
    char message[PD_REQUEST_MESSAGE_MAX];
    char scene[PD_CONF_MAX_NAME];
    uint32_t unit_size;      /* >= 1 after decoding */
    pd_point_spec a, b;
    int has_b;
    double dx, dy;           /* finite */
    double radius;           /* within the kind's cap */
    uint64_t seed;           /* 0: the server picks */
    double max_speed;        /* > 0, finite */
    double tolerance;        /* 0..PD_MOVE_MAX_TOLERANCE */
    pd_timed_point *moves;   /* malloc'd (owned) */
    size_t n_moves;
    pd_find_path_req *path;  /* malloc'd (owned), with its arrays */
    uint64_t min_version;    /* as pd_find_path_req's (a FindPath item: its path's) */
} pd_move_req;

typedef struct pd_batch_req {
    pd_move_req *items;      /* malloc'd (owned), 1..PD_BATCH_MAX_ITEMS */
    size_t n_items;
} pd_batch_req;

typedef struct pd_request {
    uint64_t id;
    pd_request_kind kind;
    int structural;                         /* decoding refused the frame for its shape
                                               (more fields than PD_CODEC_MAX_ELEMENTS):
                                               what the peer sends next is suspect, so
                                               the connection closes after the answer */
    union {
        pd_find_path_req find_path;
        pd_find_route_req find_route;       /* PD_REQ_FIND_ROUTE */
        pd_update_cells_req update_cells;   /* PD_REQ_UPDATE_CELLS */
        uint64_t cancel_target;             /* PD_REQ_CANCEL */
        pd_scene_info_req scene_info;       /* PD_REQ_SCENE_INFO */
        uint64_t ping_nonce;                /* PD_REQ_PING */
        pd_scene_grid_req grid;             /* PD_REQ_SCENE_GRID */
        pd_move_req move;                   /* pd_request_is_move(kind) */
        pd_batch_req batch;                 /* PD_REQ_BATCH */
        pd_scene_change_req change;         /* pd_request_is_scene_change(kind) */
        pd_watch_req watch;                 /* PD_REQ_WATCH */
        pd_reserve_req reserve;             /* PD_REQ_RESERVE_PATH .. GET_RESERVATIONS */
        uint64_t unwatch_target;            /* PD_REQ_UNWATCH: the Watch's request id */
        struct {
            char token[PD_CONF_MAX_TOKEN];  /* never logged */
            size_t len;
        } auth;                             /* PD_REQ_AUTH */
    } u;
} pd_request;

/* Frees the arrays a decoded request owns and sets their pointers to NULL.
 * Safe on any decoded (or zeroed) request, and twice. */
void pd_request_free(pd_request *req);

/* 1 for the seven movement query kinds (PD_REQ_RAYCAST..DISTANCE_TO_WALL). */
static inline int pd_request_is_move(pd_request_kind kind)
{
    return kind >= PD_REQ_RAYCAST && kind <= PD_REQ_DISTANCE_TO_WALL;
}

/* Frees the arrays a decoded FindPath owns (avoid, goals); safe twice. */
void pd_find_path_req_free(pd_find_path_req *fp);

/* 1 for CreateScene, CreateInstance and DropScene. */
static inline int pd_request_is_scene_change(pd_request_kind kind)
{
    return kind >= PD_REQ_CREATE_SCENE && kind <= PD_REQ_DROP_SCENE;
}

/* Frees what a decoded scene change owns (map, scene); safe twice. */
void pd_scene_change_req_free(pd_scene_change_req *ch);

/* Frees what a decoded movement query owns (its moves, a batch's path). */
void pd_move_req_free(pd_move_req *m);

/* The request kind's name as the protocol spells it ("find_path", ...);
 * "unknown" for anything else. Its row's in the kind table (pd_kind.c). */
const char *pd_request_kind_name(pd_request_kind kind);

#endif
