/*
 * pd_codec.h - protobuf (pathd.v1) <-> the C structs the server works with.
 *
 * The only code that includes the generated *.pb-c.h. Decoding validates every
 * field after protobuf-c has unpacked it (protobuf-c itself checks no ranges),
 * so the layers above see only requests that make sense. Encoders produce
 * whole frames (header + payload) in one malloc'd buffer, which the net
 * layer writes as a whole (with other answers in one write when several
 * are ready, and from the worker itself when it can); a path becomes
 * several PathChunk frames back to back in that one buffer.
 *
 * It decodes into the request structs of pd_request.h and encodes from the
 * result structs of pd_query.h; it knows nothing of workers or connections.
 *
 * Lifetime: every encoder returns a buffer the caller frees with free().
 * A decoded request may own heap arrays (see pd_request.h), because the
 * protobuf message they came from is freed inside the decoder.
 */
#ifndef PD_CODEC_H
#define PD_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "pd_conf.h"
#include "pd_movement.h"
#include "pd_query.h"
#include "pd_job.h"
#include "pd_request.h"
#include "pd_watch.h"
#include "pd_scene.h"
#include "pd_status.h"

/* Limits on decoded fields, with why. */
#define PD_CODEC_MAX_DEADLINE_MS 600000u     /* 10 min: longer is a client bug */
/* Avoid cells per FindPath: thousands of nearby agents is already a crowd;
 * the search stamps each one per query, so the list must stay short. */
#define PD_CODEC_MAX_AVOID 4096u
/* Fields and list elements in one request, counted before unpacking:
 * protobuf-c allocates per element (~0.12 us each, measured), so this keeps
 * one frame's unpack on the loop thread near 8 ms however it is packed. A
 * cell of an UpdateCells list counts three (the cell, its x, its y), so a
 * list holds about 21,800 cells; larger areas go as rectangles or several
 * updates. */
#define PD_CODEC_MAX_ELEMENTS 65536u
/* Most cell bytes in one SceneGrid answer (512 KiB). A band must stay under
 * the 1 MiB default frame cap that clients are told to expect (and under the
 * write high watermark, so one answer cannot pause a reader on its own);
 * half the cap leaves room for the framing and for clients that keep the
 * default. A row wider than this still goes out as a band of one row (at
 * most PD_GRID_MAX_SIDE = 16 KiB). */
#define PD_SCENE_GRID_BAND_BYTES (512u * 1024u)

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

/*
 * pd_codec_decode_request takes a plain FindPath (no avoid, goals or window
 * list, an ASCII scene name, each field once) through a hand-written reader
 * instead of protobuf-c's unpack; every other frame goes the generic way.
 * These two are for the tests that hold the one to the other: the generic
 * decode alone (the same contract as pd_codec_decode_request), and whether
 * the hand-written reader takes a frame (1) or leaves it (0).
 */
pd_status pd_codec_decode_request_generic(const uint8_t *payload, size_t len, pd_request *req,
                                          char *err, size_t errlen);
int pd_codec_fast_path_takes(const uint8_t *payload, size_t len);

/*
 * What a frame payload's top level says, without unpacking it: the scan
 * every decode starts with (wire format, the element cap, NUL bytes in
 * strings) and the Request body's oneof field. PD_OK with *id and *kind
 * set when the frame passes that scan and its body is a kind this server
 * knows; otherwise PD_INVALID_ARGUMENT, and only pd_codec_decode_request
 * can say what is wrong. The body's own fields are not checked: for a
 * refusal that depends on the kind alone (a connection past its in-flight
 * cap), where unpacking was most of the cost of saying no.
 */
pd_status pd_codec_peek_request(const uint8_t *payload, size_t len, uint64_t *id, pd_request_kind *kind);

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
    uint64_t buffered_bytes;         /* input and output held for all connections */
    uint64_t buffer_budget_bytes;
    uint64_t connections_shed_total; /* closed to keep within the budget */
    uint64_t frame_timeouts_total;   /* closed for a frame too slow to arrive */
    uint64_t accept_errors_total;    /* accepts that failed: the peer was reset */
    uint64_t watchers;               /* Watches open */
    uint64_t watch_events_total;     /* watch frames queued for watchers */
    uint64_t watchers_dropped_total; /* watches ended by WATCH_OVERFLOW */
} pd_server_stats;

/* The limits a client must respect, for the Limits answer: the net layer
 * fills the configurable ones from its config, pd_codec_limits_fixed the
 * rest. */
typedef struct pd_codec_limits {
    uint32_t max_frame_bytes;
    uint32_t max_inflight_per_conn;
    uint32_t max_waypoints_per_chunk;
    uint32_t max_connections;
    uint32_t job_queue_capacity;
    uint32_t idle_timeout_ms;
    uint32_t frame_timeout_ms;
    uint64_t default_max_expansions;
    uint32_t max_batch_items;        /* PD_BATCH_MAX_ITEMS, or the server's in-flight
                                        cap when lower */
    uint32_t max_move_points;        /* PD_MOVE_MAX_POINTS */
    uint32_t max_radius_cells;       /* PD_MOVE_MAX_RADIUS */
    double max_walk_radius;          /* PD_MOVE_MAX_WALK_RADIUS */
    double max_tolerance;            /* PD_MOVE_MAX_TOLERANCE */
    uint32_t max_avoid_cells;        /* PD_CODEC_MAX_AVOID */
    uint32_t max_deadline_ms;        /* PD_CODEC_MAX_DEADLINE_MS */
    uint32_t max_unit_size;          /* PD_CONF_MAX_UNIT_SIZE */
    uint32_t scene_grid_band_bytes;  /* PD_SCENE_GRID_BAND_BYTES */
    uint32_t max_message_bytes;      /* the net layer's longest error text */
    uint32_t watch_buffer_bytes;     /* limits.watch_buffer_bytes */
    uint32_t max_watch_scenes;       /* limits.max_watch_scenes */
    uint32_t max_watchers;           /* limits.max_watchers */
    uint32_t max_watches_per_conn;   /* limits.max_watches_per_conn */
    uint32_t reservation_ttl_ms;     /* limits.reservation_ttl_ms, and the reservation */
    uint32_t max_agents_per_scene;   /* limits of the same names */
    uint32_t max_reservation_entries;
    uint32_t max_reservation_window_ms;
    uint32_t max_agent_bytes;
    uint32_t max_clock_step_ms;
} pd_codec_limits;

/* Fills the limits fixed at build time (the request decoder's and the
 * movement queries' caps); leaves the others as they are. */
void pd_codec_limits_fixed(pd_codec_limits *out);

/* Each returns a malloc'd buffer of one or more whole frames, its size in
 * *out_len, or NULL on allocation failure. All answers are final = true
 * except the non-last chunks of a path. */

/* Adds an answer's timing (Response.server_us and search_us, in
 * microseconds; 0 leaves a field out) to the last frame of *buf, the answer
 * one of the encoders below made: the fields are appended to that frame's
 * bytes (a protobuf message's fields may come in any order) and its length
 * fixed, so the time can be taken once the answer is encoded, just before
 * its bytes go to the socket. Grows *buf (realloc) and *len; on allocation
 * failure, or with *buf NULL, leaves the answer as it was. */
void pd_codec_stamp_timing(uint8_t **buf, size_t *len, uint64_t server_us, uint64_t search_us);

/* A request-level failure (unknown scene, bad argument, overloaded...):
 * Response{id, status, final, Error{message}}. */
uint8_t *pd_codec_encode_error(uint64_t id, pd_status status, const char *message, size_t *out_len);

/* The same with Error.version: PD_STALE_VERSION's answer carries the
 * scene's version now (0 leaves it out). */
uint8_t *pd_codec_encode_error_version(uint64_t id, pd_status status, const char *message, uint64_t version,
                                       size_t *out_len);

/* One WatchEvent frame answering Watch request id: status OK, final as
 * given (the watch's last frame: WATCH_ENDED, or the DROPPED event of its
 * last scene). */
uint8_t *pd_codec_encode_watch_event(uint64_t id, const pd_watch_event *ev, int final, size_t *out_len);

/* The same event for many watches, encoded once: the Response without its
 * id (no frame header), which pd_codec_frame_with_id turns into each
 * watch's frame. */
uint8_t *pd_codec_encode_watch_body(const pd_watch_event *ev, int final, size_t *out_len);

/* One frame of a Response encoded without its id (body, body_len bytes):
 * the header, the id field, then body - byte for byte what encoding the
 * Response with that id gives, as the id is its first field. */
uint8_t *pd_codec_frame_with_id(uint64_t id, const uint8_t *body, size_t body_len, size_t *out_len);

/* The answer to FindPath request id, run on scene: ceil(path_len /
 * max_per_chunk) PathChunk frames (at least one; max_per_chunk 0 counts as
 * 1), seq 0..n-1, each chunk's waypoints as packed arrays (Waypoints: cells
 * delta-coded from the chunk's first, arrival times when the result has
 * them, world centres only with want_world); only the last frame is final
 * and carries the result's status and metrics, start_used / goal_used when
 * they were substituted and cutoff behind a cut-off PARTIAL. A result with
 * no path gives one final PathChunk with no waypoints and its metrics. scene
 * may be NULL (no world coordinates, version 0). */
uint8_t *pd_codec_encode_path(uint64_t id, const pd_scene *scene, const pd_path_result *r,
                              uint32_t max_per_chunk, int want_world, size_t *out_len);

/* The answer to FindRoute request id. On PD_OK / PD_PARTIAL: for each
 * leg in travel order, ceil(path_len / max_per_chunk) RouteLeg frames (at
 * least one; max_per_chunk 0 counts as 1) with seq 0..n-1 within the leg,
 * packed waypoints as for a path (world centres of the leg's scene only with
 * want_world), and on the leg's last frame leg_end, its cost, total_waypoints and
 * the portal it ends at (none on the last leg). Then one final RouteResult
 * frame with the job's status, the totals, per-leg costs and scene versions,
 * goal_used when substituted and pinned. A route that failed gives only the
 * final RouteResult (no legs) with its status and metrics. */
uint8_t *pd_codec_encode_route(uint64_t id, const pd_route_result *r, uint32_t max_per_chunk,
                               int want_world, size_t *out_len);

/* The answer to UpdateCells request id on scene: on PD_OK Response{update:
 * UpdateResult{version, cells_changed, micros}}; otherwise an error answer
 * naming the scene and the status. */
/* SceneChange for CreateScene, CreateInstance and DropScene, or the error
 * frame with the outcome's message. */
uint8_t *pd_codec_encode_scene_change(uint64_t id, const char *name, const pd_scene_change_outcome *o,
                                      size_t *out_len);
uint8_t *pd_codec_encode_update(uint64_t id, const char *scene, const pd_update_outcome *o,
                                size_t *out_len);

/* A bare final acknowledgement (Cancel): Response{id, status, final}. */
uint8_t *pd_codec_encode_ack(uint64_t id, pd_status status, size_t *out_len);

uint8_t *pd_codec_encode_scene_list(uint64_t id, pd_scene *const *scenes, size_t n, size_t *out_len);
uint8_t *pd_codec_encode_scene_info(uint64_t id, const pd_scene *scene, size_t *out_len);
uint8_t *pd_codec_encode_stats(uint64_t id, const pd_server_stats *stats, size_t *out_len);
/* Whether this pathd takes traffic, as Pong.serving says it (values are the
 * wire's ServingState). */
typedef enum {
    PD_SERVING = 1,
    PD_NOT_SERVING = 2,
    PD_SERVING_DRAINING = 3,
} pd_serving;

uint8_t *pd_codec_encode_pong(uint64_t id, uint64_t nonce, pd_serving serving,
                              size_t *out_len);
uint8_t *pd_codec_encode_limits(uint64_t id, const pd_codec_limits *limits, size_t *out_len);
/* Auth accepted: Response{auth: AuthResult{role}}. */
uint8_t *pd_codec_encode_auth(uint64_t id, const char *role, size_t *out_len);

/* One band of a grid: Response{scene_grid: SceneGrid{width, height, version,
 * row_start, row_count = rows, cells}} with rows x width cell bytes copied
 * row by row out of the padded grid. The rows must lie inside the grid
 * (rows >= 1, row_start + rows <= height); otherwise, like on allocation
 * failure, the answer is NULL. Choosing rows so the frame stays under the
 * frame cap is the caller's job. */
uint8_t *pd_codec_encode_scene_grid(uint64_t id, const pd_grid *grid, uint64_t version, int32_t row_start,
                                    int32_t rows, size_t *out_len);

/* A movement query's answer: its result message, or an Error frame with
 * the result's status and message. */
uint8_t *pd_codec_encode_move(uint64_t id, pd_request_kind kind, const pd_move_result *r, size_t *out_len);

/* A Batch's answer: one BatchResult frame with one QueryResult per item, in
 * order, each with its own status (and message when not OK). A FindPath
 * item with a path (OK or PARTIAL) carries it whole in one PathChunk, filled
 * like the last frame of a FindPath answer. */
uint8_t *pd_codec_encode_batch(uint64_t id, const pd_move_req *items, const pd_move_result *results, size_t n,
                               size_t *out_len);

/* The answer to a finished job (pd_job.h) of a kind that runs on a worker
 * (pd_kind.h), without its timing: the encoder of its kind, with the
 * settings the job was made with (max_chunk, want_world). NULL when
 * encoding ran out of memory, or for a kind the server answers itself. */
uint8_t *pd_codec_encode_job(const pd_job *job, size_t *out_len);

#endif
