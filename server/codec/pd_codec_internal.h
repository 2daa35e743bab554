/*
 * pd_codec_internal.h - what the codec's files share (not for other
 * layers): the row each request kind has in its family's file - its
 * Request oneof case, how its body decodes and how a finished job of it
 * encodes - and the helpers every family uses (pd_codec_common.c), plus
 * the path chunk a Batch's FindPath item shares with a FindPath answer.
 *
 * The files: pd_codec.c (the decode entry: arena, pre-scan, the rows
 * looked up by body case; timing stamps; pd_codec_encode_job by kind),
 * pd_codec_common.c (names, points, UTF-8, error frames, framing),
 * pd_codec_paths.c (FindPath, FindRoute), pd_codec_move.c (movement
 * queries, Batch), pd_codec_scenes.c (updates, scene changes, scene reads,
 * watches), pd_codec_admin.c (Auth, Cancel, Ping, Stats, GetLimits,
 * Reload). A new kind adds its row and functions to its family's file.
 */
#ifndef PD_CODEC_INTERNAL_H
#define PD_CODEC_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "pathd.pb-c.h"
#include "pd_codec.h"
#include "pd_frame.h"

typedef struct pd__codec_row pd__codec_row;

/* One request kind on the wire. */
struct pd__codec_row {
    Pathd__V1__Request__BodyCase body_case;  /* 0 ends a family's rows */
    pd_request_kind kind;
    Pathd__V1__Query__KindCase query_case;   /* a movement query's Query case */
    /* Fills req's body from m (req->kind is set); NULL: nothing but the kind. */
    pd_status (*decode)(const Pathd__V1__Request *m, const pd__codec_row *row, pd_request *req, char *err,
                        size_t errlen);
    /* A finished job's answer (pd_codec_encode_job); NULL for a kind the
     * server answers itself. */
    uint8_t *(*encode)(const pd_job *job, size_t *len);
};

extern const pd__codec_row pd__codec_rows_paths[], pd__codec_rows_move[], pd__codec_rows_scenes[],
    pd__codec_rows_admin[];

/* ---- pd_codec_fast.c ------------------------------------------------------ */

/* A plain FindPath Request as protobuf-c would unpack it, on the caller's
 * storage: every pointer in req points into this struct. */
typedef struct pd__fast_find_path {
    Pathd__V1__Request req;
    Pathd__V1__FindPath fp;
    Pathd__V1__Point start, goal;
    Pathd__V1__Cell start_cell, goal_cell;
    Pathd__V1__WorldPoint start_world, goal_world;
    char scene[PD_CONF_MAX_NAME];
} pd__fast_find_path;

/* 1 when payload is a Request with a FindPath body that the hand-written
 * reader takes (f->req is then what protobuf-c's unpack would give); 0 when
 * the frame must take the generic path (pre-scan, unpack). */
int pd__fast_unpack_find_path(const uint8_t *payload, size_t len, pd__fast_find_path *f);

/* ---- pd_codec_pack_path.c ------------------------------------------------- */

/* A path answer (Response with a PathChunk body, as pd__fill_path_chunk
 * fills it) packed by hand into the bytes protobuf-c would write.
 * pd__path_pack_takes says whether r is one (else pack it with protobuf-c);
 * pd__path_pack_size works out its packed size and the body sizes its
 * length prefixes need, and pd__path_pack writes it from those sizes and
 * returns the bytes written: the answer is sized once, not once to allocate
 * and again to pack (issue 30, item 6: the second pass was ~580
 * instructions of a den520d corners answer). The sizes hold only for the
 * message they were worked out on, unchanged. */
typedef struct pd__path_sizes {
    size_t dx, dy;      /* the packed arrays' bodies */
    size_t points;      /* the Waypoints body */
    size_t chunk;       /* the PathChunk body */
    size_t total;       /* the Response */
} pd__path_sizes;

int pd__path_pack_takes(const Pathd__V1__Response *r);
size_t pd__path_pack_size(const Pathd__V1__Response *r, pd__path_sizes *s);
size_t pd__path_pack(const Pathd__V1__Response *r, const pd__path_sizes *s, uint8_t *out);

/* ---- pd_codec_common.c ---------------------------------------------------- */

/* Inline: every answer's encoder calls these. */
/* pd_status values double as wire values; the ones that never go on the
 * wire (PD_BUFFER_TOO_SMALL, anything out of range) become INTERNAL. */
static inline Pathd__V1__Status pd__wire_status(pd_status s)
{
    if (!pd_status_is_answer((unsigned)s))
        return PATHD__V1__STATUS__INTERNAL;
    return (Pathd__V1__Status)s;
}

/* A path answer, the most common, is sized and packed by hand
 * (pd_codec_pack_path.c); every other by protobuf-c. pd__frame_size sizes
 * a frame and notes in *plan how to pack it; pd__frame_pack packs that same
 * message, unchanged, from the plan. */
typedef struct pd__frame_plan {
    int by_hand;
    pd__path_sizes sizes; /* when by_hand */
} pd__frame_plan;

static inline size_t pd__frame_size(const Pathd__V1__Response *resp, pd__frame_plan *plan)
{
    plan->by_hand = pd__path_pack_takes(resp);
    if (plan->by_hand)
        return PD_FRAME_HEADER_BYTES + pd__path_pack_size(resp, &plan->sizes);
    return PD_FRAME_HEADER_BYTES + pathd__v1__response__get_packed_size(resp);
}

/* Writes one whole frame at out; returns the bytes written. The caller sized
 * the buffer with pd__frame_size on the same message, which filled plan. */
static inline size_t pd__frame_pack(const Pathd__V1__Response *resp, const pd__frame_plan *plan, uint8_t *out)
{
    size_t n = plan->by_hand ? pd__path_pack(resp, &plan->sizes, out + PD_FRAME_HEADER_BYTES)
                             : pathd__v1__response__pack(resp, out + PD_FRAME_HEADER_BYTES);
    pd_frame_put_header(out, (uint32_t)n);
    return PD_FRAME_HEADER_BYTES + n;
}

int pd__utf8_valid(const unsigned char *s, size_t n);
pd_status pd__decode_scene_name(const char *name, const char *field, char out[PD_CONF_MAX_NAME],
                          char *err, size_t errlen);
pd_status pd__decode_point(const Pathd__V1__Point *p, const char *field, pd_point_spec *out,
                          char *err, size_t errlen);
pd_status pd__decode_rect(const Pathd__V1__Rect *r, const char *field, pd_point *min, pd_point *max,
                          char *err, size_t errlen);
pd_status pd__copy_cells(Pathd__V1__Cell *const *cells, size_t n, const char *field, pd_point **out,
                          char *err, size_t errlen);
uint8_t *pd__encode_single(const Pathd__V1__Response *resp, size_t *out_len);
/* A final OK answer to id whose body is `body`, the message of the
 * Response's oneof case body_case, framed into a new buffer. */
uint8_t *pd__encode_ok(uint64_t id, Pathd__V1__Response__BodyCase body_case, void *body, size_t *out_len);
char *pd__utf8_sanitized(const char *msg);

/* ---- pd_codec_paths.c: a path's waypoints, shared with a Batch's items ----- */

/* Room for one frame's packed waypoints (proto Waypoints): the parallel
 * arrays protobuf-c packs, max_per_chunk entries each, in one block per
 * answer (block: malloc'd, or NULL when they live on the caller's stack). */
typedef struct pd__points_buf {
    Pathd__V1__Waypoints msg;
    int32_t *dx, *dy;
    double *t, *wx, *wy;
    void *block;
} pd__points_buf;

/* Bytes pd__points_alloc needs for n waypoints. */
#define PD__POINTS_BYTES(n) ((n) * (3 * sizeof(double) + 2 * sizeof(int32_t)))

/* Waypoints of an answer whose arrays fit a buffer on the encoder's stack
 * (short paths: most answers), so they cost no malloc. */
#define PD__POINTS_ON_STACK 32

/* The final chunk's substituted endpoints, owned by the caller's stack. */
typedef struct pd__chunk_extras {
    Pathd__V1__Cell start_used, goal_used;
} pd__chunk_extras;

int pd__points_alloc(pd__points_buf *b, size_t n);
void pd__fill_path_chunk(uint64_t id, const pd_scene *scene, const pd_scene *world, const pd_path_result *r,
                        size_t path_len, uint32_t max_per_chunk, size_t seq, size_t n_chunks,
                        pd__points_buf *pts, pd__chunk_extras *extras, Pathd__V1__PathChunk *chunk,
                        Pathd__V1__Response *resp);
pd_status pd__decode_find_path(const Pathd__V1__FindPath *m, pd_find_path_req *out,
                              char *err, size_t errlen);
pd_status pd__decode_query(const Pathd__V1__Query *q, pd_move_req *out, char *err, size_t errlen);

#endif
