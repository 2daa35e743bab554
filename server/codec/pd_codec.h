/*
 * pd_codec.h - protobuf (pathd.v1) <-> the C structs the server works with.
 *
 * The only code that includes the generated *.pb-c.h. Decoding validates every
 * field after protobuf-c has unpacked it (protobuf-c itself checks no ranges),
 * so the layers above see only requests that make sense. Encoders produce
 * whole frames (header + payload) in one malloc'd buffer, so the net layer
 * queues one uv_write per answer; a path becomes several PathChunk frames
 * back to back in that one buffer.
 *
 * Lifetime: every encoder returns a buffer the caller frees with free().
 * A decoded request may own heap arrays (FindPath.avoid, UpdateCells.cells),
 * because the protobuf message they came from is freed inside the decoder:
 * release them with pd_request_free, or take them over by copying the
 * pointer and setting the request's field to NULL first.
 */
#ifndef PD_CODEC_H
#define PD_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "pd_conf.h"
#include "pd_pool.h"
#include "pd_scene.h"
#include "pd_status.h"

/* Limits on decoded fields, with why. */
#define PD_CODEC_MAX_DEADLINE_MS 600000u     /* 10 min: longer is a client bug */
/* Avoid cells per FindPath: thousands of nearby agents is already a crowd;
 * the search stamps each one per query, so the list must stay short. */
#define PD_CODEC_MAX_AVOID 4096u
/* Most cell bytes in one SceneGrid answer (512 KiB). A band must stay under
 * the 1 MiB default frame cap that clients are told to expect (and under the
 * write high watermark, so one answer cannot pause a reader on its own);
 * half the cap leaves room for the framing and for clients that keep the
 * default. A row wider than this still goes out as a band of one row (at
 * most PD_GRID_MAX_SIDE = 16 KiB). */
#define PD_SCENE_GRID_BAND_BYTES (512u * 1024u)

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
} pd_request_kind;

typedef struct pd_point_spec {
    int is_world;            /* 1: wx/wy are world coordinates; 0: cell */
    pd_point cell;
    double wx, wy;
} pd_point_spec;

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
    size_t n_avoid;          /* <= PD_CODEC_MAX_AVOID */
    int has_window;          /* window_min <= window_max, both non-negative; the grid
                                clips it later */
    pd_point window_min, window_max;
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
    uint32_t deadline_ms;    /* 0 = none; <= PD_CODEC_MAX_DEADLINE_MS */
} pd_find_route_req;

/* UpdateCells: update.cells points at the owned array cells (NULL for a
 * rectangle). Bounds against the grid are the scene layer's to check. */
typedef struct pd_update_cells_req {
    char scene[PD_CONF_MAX_NAME];
    pd_scene_update update;
    pd_point *cells;         /* malloc'd (owned, see pd_request_free) */
} pd_update_cells_req;

/* GetSceneGrid: which grid and which rows. Whether the scene serves the unit
 * size and whether row_start lies inside its grid are the server's to check,
 * since only it holds the scene. */
typedef struct pd_scene_grid_req {
    char scene[PD_CONF_MAX_NAME];
    uint32_t unit_size;      /* 1..PD_CONF_MAX_UNIT_SIZE (0 on the wire becomes 1) */
    int32_t row_start;       /* 0..PD_GRID_MAX_SIDE */
    int32_t row_count;       /* 0..PD_GRID_MAX_SIDE; 0 = as many as fit in one band */
} pd_scene_grid_req;

typedef struct pd_request {
    uint64_t id;
    pd_request_kind kind;
    union {
        pd_find_path_req find_path;
        pd_find_route_req find_route;       /* PD_REQ_FIND_ROUTE */
        pd_update_cells_req update_cells;   /* PD_REQ_UPDATE_CELLS */
        uint64_t cancel_target;             /* PD_REQ_CANCEL */
        char scene_name[PD_CONF_MAX_NAME];  /* PD_REQ_SCENE_INFO */
        uint64_t ping_nonce;                /* PD_REQ_PING */
        pd_scene_grid_req grid;             /* PD_REQ_SCENE_GRID */
    } u;
} pd_request;

/*
 * Decodes one frame payload into *req.
 *  PD_OK                - req is complete and valid.
 *  PD_INVALID_ARGUMENT  - it decoded, but a field is missing or out of range
 *                         (no body, empty or over-long scene name, unknown enum
 *                         value, deadline over the cap...); req->id (and
 *                         req->kind when the body was recognised) is set so
 *                         the answer can name the request; reason in err.
 *  PD_MALFORMED         - not a Request at all; the connection should be
 *                         answered and closed.
 *  PD_INTERNAL          - no memory to copy an avoid or cell list.
 * Only a PD_OK request owns arrays; call pd_request_free on it either way.
 */
pd_status pd_codec_decode_request(const uint8_t *payload, size_t len, pd_request *req,
                                  char *err, size_t errlen);

/* Frees the arrays a decoded request owns and sets their pointers to NULL.
 * Safe on any decoded (or zeroed) request, and twice. */
void pd_request_free(pd_request *req);

/* Server-wide counters for the Stats answer, gathered by the net layer. */
typedef struct pd_server_stats {
    uint64_t uptime_ms;
    uint64_t connections;
    uint64_t requests_total;
    uint64_t paths_found;
    uint64_t expansions_total;
    uint64_t queue_depth;
    uint64_t in_flight;
    uint32_t threads;
    uint32_t scenes;
    uint64_t overloaded_total;
    uint64_t malformed_total;
} pd_server_stats;

/* Each returns a malloc'd buffer of one or more whole frames, its size in
 * *out_len, or NULL on allocation failure. All answers are final = true
 * except the non-last chunks of a path. */

/* A request-level failure (unknown scene, bad argument, overloaded...):
 * Response{id, status, final, Error{message}}. */
uint8_t *pd_codec_encode_error(uint64_t id, pd_status status, const char *message, size_t *out_len);

/* The answer to a finished FindPath job: ceil(path_len / max_per_chunk)
 * PathChunk frames (at least one; max_per_chunk 0 counts as 1), seq 0..n-1,
 * waypoints with cell and world-centre coordinates (and arrival time t when
 * the job has times); only the last frame is final and carries the job's
 * status and metrics, start_used / goal_used when they were substituted and
 * cutoff behind a cut-off PARTIAL. A job that found no path gives one final
 * PathChunk with no waypoints and its metrics. */
uint8_t *pd_codec_encode_path(const pd_job *job, uint32_t max_per_chunk, size_t *out_len);

/* The answer to a finished FindRoute job. On PD_OK / PD_PARTIAL: for each
 * leg in travel order, ceil(path_len / max_per_chunk) RouteLeg frames (at
 * least one; max_per_chunk 0 counts as 1) with seq 0..n-1 within the leg,
 * waypoints with cell and world-centre coordinates (and t when the job has
 * times), and on the leg's last frame leg_end, its cost, total_waypoints and
 * the portal it ends at (none on the last leg). Then one final RouteResult
 * frame with the job's status, the totals, per-leg costs and scene versions,
 * goal_used when substituted and pinned. A job that failed gives only the
 * final RouteResult (no legs) with its status and metrics. */
uint8_t *pd_codec_encode_route(const pd_job *job, uint32_t max_per_chunk, size_t *out_len);

/* The answer to a finished UpdateCells job: on PD_OK Response{update:
 * UpdateResult{version, cells_changed, micros}}; otherwise an error answer
 * naming the scene and the status. */
uint8_t *pd_codec_encode_update(const pd_job *job, size_t *out_len);

/* A bare final acknowledgement (Cancel): Response{id, status, final}. */
uint8_t *pd_codec_encode_ack(uint64_t id, pd_status status, size_t *out_len);

uint8_t *pd_codec_encode_scene_list(uint64_t id, pd_scene *const *scenes, size_t n, size_t *out_len);
uint8_t *pd_codec_encode_scene_info(uint64_t id, const pd_scene *scene, size_t *out_len);
uint8_t *pd_codec_encode_stats(uint64_t id, const pd_server_stats *stats, size_t *out_len);
uint8_t *pd_codec_encode_pong(uint64_t id, uint64_t nonce, size_t *out_len);

/* One band of a grid: Response{scene_grid: SceneGrid{width, height, version,
 * row_start, row_count = rows, cells}} with rows x width cell bytes copied
 * row by row out of the padded grid. The rows must lie inside the grid
 * (rows >= 1, row_start + rows <= height); otherwise, like on allocation
 * failure, the answer is NULL. Choosing rows so the frame stays under the
 * frame cap is the caller's job. */
uint8_t *pd_codec_encode_scene_grid(uint64_t id, const pd_grid *grid, uint64_t version, int32_t row_start,
                                    int32_t rows, size_t *out_len);

#endif
