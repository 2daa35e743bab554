/*
 * pd_codec_move.c - the movement family on the wire: the seven movement
 * queries (alone, or as Batch items with FindPath items beside them)
 * decoded, and their results encoded, one row per kind (pd__move_rows),
 * and a Batch's one BatchResult.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_codec_internal.h"

/* The common fields of a movement query: scene, unit size, first point. */
static pd_status pd__decode_move_head(const char *scene, uint32_t unit_size, uint64_t min_version,
                                      const Pathd__V1__Point *a, const char *kind, const char *a_name,
                                      pd_move_req *out, char *err, size_t errlen)
{
    char field[64];
    out->min_version = min_version;
    snprintf(field, sizeof field, "%s.scene", kind);
    pd_status st = pd__decode_scene_name(scene, field, out->scene, err, errlen);
    if (st != PD_OK)
        return st;
    out->unit_size = unit_size == 0 ? 1 : unit_size;
    if (out->unit_size > PD_CONF_MAX_UNIT_SIZE) {
        pd_set_err(err, errlen, "%s.unit_size %u is above the limit %d", kind, (unsigned)unit_size,
                    PD_CONF_MAX_UNIT_SIZE);
        return PD_INVALID_ARGUMENT;
    }
    if (a_name == NULL)
        return PD_OK;
    snprintf(field, sizeof field, "%s.%s", kind, a_name);
    return pd__decode_point(a, field, &out->a, err, errlen);
}

static pd_status pd__decode_validate_move(const Pathd__V1__ValidateMove *m, pd_move_req *out, char *err,
                                          size_t errlen)
{
    pd_status st = pd__decode_move_head(m->scene, m->unit_size, m->min_version, NULL, "validate_move", NULL, out, err, errlen);
    if (st != PD_OK)
        return st;
    if (m->n_moves == 0 || m->n_moves > PD_MOVE_MAX_POINTS) {
        pd_set_err(err, errlen, "validate_move.moves has %zu points; 1 to %u allowed", m->n_moves,
                    PD_MOVE_MAX_POINTS);
        return PD_INVALID_ARGUMENT;
    }
    if (!(isfinite(m->max_speed) && m->max_speed > 0)) {
        pd_set_err(err, errlen, "validate_move.max_speed must be a finite number > 0");
        return PD_INVALID_ARGUMENT;
    }
    if (!(m->tolerance >= 0 && m->tolerance <= PD_MOVE_MAX_TOLERANCE)) {
        pd_set_err(err, errlen, "validate_move.tolerance must lie in 0..%g", PD_MOVE_MAX_TOLERANCE);
        return PD_INVALID_ARGUMENT;
    }
    out->max_speed = m->max_speed;
    out->tolerance = m->tolerance;
    out->moves = calloc(m->n_moves, sizeof *out->moves);
    if (out->moves == NULL) {
        pd_set_err(err, errlen, "out of memory");
        return PD_INTERNAL;
    }
    out->n_moves = m->n_moves;
    for (size_t i = 0; i < m->n_moves; i++) {
        char field[64];
        snprintf(field, sizeof field, "validate_move.moves[%zu].point", i);
        if (m->moves[i] == NULL)
            return pd__decode_point(NULL, field, &out->moves[i].point, err, errlen);
        if ((st = pd__decode_point(m->moves[i]->point, field, &out->moves[i].point, err, errlen)) != PD_OK)
            return st;
        if (!isfinite(m->moves[i]->t)) {
            pd_set_err(err, errlen, "validate_move.moves[%zu].t is not finite", i);
            return PD_INVALID_ARGUMENT;
        }
        out->moves[i].t = m->moves[i]->t;
    }
    return PD_OK;
}

/* One movement query, from a Request body or a Batch item (same layouts). */
pd_status pd__decode_query(const Pathd__V1__Query *q, pd_move_req *out, char *err, size_t errlen)
{
    pd_status st;
    switch (q->kind_case) {
    case PATHD__V1__QUERY__KIND_RAYCAST: {
        const Pathd__V1__Raycast *m = q->raycast;
        out->kind = PD_REQ_RAYCAST;
        if ((st = pd__decode_move_head(m->scene, m->unit_size, m->min_version, m->from, "raycast", "from", out, err, errlen)) != PD_OK)
            return st;
        return pd__decode_point(m->to, "raycast.to", &out->b, err, errlen);
    }
    case PATHD__V1__QUERY__KIND_VALIDATE_MOVE:
        out->kind = PD_REQ_VALIDATE_MOVE;
        return pd__decode_validate_move(q->validate_move, out, err, errlen);
    case PATHD__V1__QUERY__KIND_MOVE_ALONG: {
        const Pathd__V1__MoveAlong *m = q->move_along;
        out->kind = PD_REQ_MOVE_ALONG;
        if ((st = pd__decode_move_head(m->scene, m->unit_size, m->min_version, m->from, "move_along", "from", out, err, errlen)) !=
            PD_OK)
            return st;
        if (!isfinite(m->dx) || !isfinite(m->dy)) {
            pd_set_err(err, errlen, "move_along.dx/dy must be finite");
            return PD_INVALID_ARGUMENT;
        }
        out->dx = m->dx;
        out->dy = m->dy;
        return PD_OK;
    }
    case PATHD__V1__QUERY__KIND_NEAREST: {
        const Pathd__V1__NearestWalkable *m = q->nearest;
        out->kind = PD_REQ_NEAREST;
        if ((st = pd__decode_move_head(m->scene, m->unit_size, m->min_version, m->at, "nearest", "at", out, err, errlen)) != PD_OK)
            return st;
        if (m->radius > PD_MOVE_MAX_RADIUS) {
            pd_set_err(err, errlen, "nearest.radius %u is above the limit %u", (unsigned)m->radius,
                        PD_MOVE_MAX_RADIUS);
            return PD_INVALID_ARGUMENT;
        }
        out->radius = m->radius;
        if (m->reachable_from != NULL) {
            out->has_b = 1;
            return pd__decode_point(m->reachable_from, "nearest.reachable_from", &out->b, err, errlen);
        }
        return PD_OK;
    }
    case PATHD__V1__QUERY__KIND_REACHABLE: {
        const Pathd__V1__IsReachable *m = q->reachable;
        out->kind = PD_REQ_REACHABLE;
        if ((st = pd__decode_move_head(m->scene, m->unit_size, m->min_version, m->from, "reachable", "from", out, err, errlen)) !=
            PD_OK)
            return st;
        return pd__decode_point(m->to, "reachable.to", &out->b, err, errlen);
    }
    case PATHD__V1__QUERY__KIND_RANDOM_POINT: {
        const Pathd__V1__RandomPoint *m = q->random_point;
        out->kind = PD_REQ_RANDOM_POINT;
        if ((st = pd__decode_move_head(m->scene, m->unit_size, m->min_version, m->around, "random_point", "around", out, err,
                                       errlen)) != PD_OK)
            return st;
        if (!(m->radius >= 0 && m->radius <= PD_MOVE_MAX_WALK_RADIUS)) {
            pd_set_err(err, errlen, "random_point.radius must lie in 0..%g", PD_MOVE_MAX_WALK_RADIUS);
            return PD_INVALID_ARGUMENT;
        }
        out->radius = m->radius;
        out->seed = m->seed;
        return PD_OK;
    }
    case PATHD__V1__QUERY__KIND_DISTANCE_TO_WALL: {
        const Pathd__V1__DistanceToWall *m = q->distance_to_wall;
        out->kind = PD_REQ_DISTANCE_TO_WALL;
        if ((st = pd__decode_move_head(m->scene, m->unit_size, m->min_version, m->at, "distance_to_wall", "at", out, err,
                                       errlen)) != PD_OK)
            return st;
        if (m->max_distance > PD_MOVE_MAX_RADIUS) {
            pd_set_err(err, errlen, "distance_to_wall.max_distance %u is above the limit %u",
                        (unsigned)m->max_distance, PD_MOVE_MAX_RADIUS);
            return PD_INVALID_ARGUMENT;
        }
        out->radius = m->max_distance ? m->max_distance : PD_MOVE_DEFAULT_WALL_DISTANCE;
        return PD_OK;
    }
    case PATHD__V1__QUERY__KIND_FIND_PATH:
        out->kind = PD_REQ_FIND_PATH;
        if ((out->path = calloc(1, sizeof *out->path)) == NULL) {
            pd_set_err(err, errlen, "out of memory");
            return PD_INTERNAL;
        }
        if ((st = pd__decode_find_path(q->find_path, out->path, err, errlen)) != PD_OK)
            return st;
        memcpy(out->scene, out->path->scene, sizeof out->scene);
        out->unit_size = out->path->unit_size;
        out->min_version = out->path->min_version;
        return PD_OK;
    default:
        pd_set_err(err, errlen, "query has no kind this server knows");
        return PD_INVALID_ARGUMENT;
    }
}

/* A Batch: each item decoded on its own; an item that fails keeps its
 * status and reason and the rest go on. Only a missing or oversized list,
 * or no memory, fails the whole request. */
static pd_status pd__decode_batch(const Pathd__V1__Batch *m, pd_batch_req *out, char *err, size_t errlen)
{
    if (m->n_items == 0 || m->n_items > PD_BATCH_MAX_ITEMS) {
        pd_set_err(err, errlen, "batch.items has %zu queries; 1 to %u allowed", m->n_items, PD_BATCH_MAX_ITEMS);
        return PD_INVALID_ARGUMENT;
    }
    size_t paths = 0;
    for (size_t i = 0; i < m->n_items; i++)
        paths += m->items[i] != NULL && m->items[i]->kind_case == PATHD__V1__QUERY__KIND_FIND_PATH;
    if (paths > PD_BATCH_MAX_PATHS) {
        pd_set_err(err, errlen, "batch.items has %zu find_path queries; at most %u allowed", paths,
                    PD_BATCH_MAX_PATHS);
        return PD_INVALID_ARGUMENT;
    }
    out->items = calloc(m->n_items, sizeof *out->items);
    if (out->items == NULL) {
        pd_set_err(err, errlen, "out of memory");
        return PD_INTERNAL;
    }
    out->n_items = m->n_items;
    for (size_t i = 0; i < m->n_items; i++) {
        pd_move_req *item = &out->items[i];
        char why[PD_REQUEST_MESSAGE_MAX] = "";
        pd_status st = pd__decode_query(m->items[i], item, why, sizeof why);
        if (st == PD_INTERNAL) {
            pd_set_err(err, errlen, "out of memory");
            return st;
        }
        if (st != PD_OK) {
            pd_move_req_free(item);
            item->status = st;
            pd_set_err(item->message, sizeof item->message, "batch.items[%zu]: %s", i, why);
        }
    }
    return PD_OK;
}

/* A movement query sent alone: the Request body wrapped as a Query of
 * kind_case. Every body of the Request's oneof and every kind of the
 * Query's is a pointer in a union (the generated structs), so one
 * assignment carries whichever message it is. */
static pd_status pd__decode_single_query(const Pathd__V1__Request *m, const pd__codec_row *row, pd_request *req,
                                         char *err, size_t errlen)
{
    Pathd__V1__Query q = PATHD__V1__QUERY__INIT;
    q.kind_case = row->query_case;
    q.raycast = m->raycast;
    pd_status st = pd__decode_query(&q, &req->u.move, err, errlen);
    req->kind = req->u.move.kind;
    return st;
}

/* Every sub-message one movement answer may need, so an answer (or a batch
 * item) is built without allocating. */
typedef struct pd__move_msg {
    Pathd__V1__Cell hit, cell;
    Pathd__V1__WorldPoint world;
    union {
        Pathd__V1__RaycastResult raycast;
        Pathd__V1__ValidateMoveResult validate;
        Pathd__V1__MoveAlongResult move;
        Pathd__V1__NearestResult nearest;
        Pathd__V1__ReachableResult reachable;
        Pathd__V1__RandomPointResult random;
        Pathd__V1__DistanceToWallResult wall;
    } u;
} pd__move_msg;

/* The cells and world point a result message may point at, filled in mm;
 * NULL for those the result has not. */
typedef struct pd__move_refs {
    Pathd__V1__Cell *hit, *cell;
    Pathd__V1__WorldPoint *world;
} pd__move_refs;

static void *pd__fill_raycast(const pd_move_result *r, pd__move_msg *mm, const pd__move_refs *p)
{
    pathd__v1__raycast_result__init(&mm->u.raycast);
    mm->u.raycast.version = r->version;
    mm->u.raycast.clear = r->yes != 0;
    mm->u.raycast.hit = p->hit;
    mm->u.raycast.last_free = p->cell;
    mm->u.raycast.last_free_world = p->world;
    return &mm->u.raycast;
}

static void *pd__fill_validate(const pd_move_result *r, pd__move_msg *mm, const pd__move_refs *p)
{
    pathd__v1__validate_move_result__init(&mm->u.validate);
    mm->u.validate.version = r->version;
    mm->u.validate.valid = r->yes != 0;
    mm->u.validate.first_invalid = r->first_invalid;
    mm->u.validate.reason = (Pathd__V1__MoveReason)r->reason;
    mm->u.validate.last_valid = p->cell;
    mm->u.validate.last_valid_world = p->world;
    return &mm->u.validate;
}

static void *pd__fill_move_along(const pd_move_result *r, pd__move_msg *mm, const pd__move_refs *p)
{
    pathd__v1__move_along_result__init(&mm->u.move);
    mm->u.move.version = r->version;
    mm->u.move.end = p->cell;
    mm->u.move.end_world = p->world;
    mm->u.move.slid = r->yes != 0;
    return &mm->u.move;
}

static void *pd__fill_nearest(const pd_move_result *r, pd__move_msg *mm, const pd__move_refs *p)
{
    pathd__v1__nearest_result__init(&mm->u.nearest);
    mm->u.nearest.version = r->version;
    mm->u.nearest.cell = p->cell;
    mm->u.nearest.world = p->world;
    mm->u.nearest.distance = r->distance;
    return &mm->u.nearest;
}

static void *pd__fill_reachable(const pd_move_result *r, pd__move_msg *mm, const pd__move_refs *p)
{
    (void)p;
    pathd__v1__reachable_result__init(&mm->u.reachable);
    mm->u.reachable.version = r->version;
    mm->u.reachable.reachable = r->yes != 0;
    return &mm->u.reachable;
}

static void *pd__fill_random_point(const pd_move_result *r, pd__move_msg *mm, const pd__move_refs *p)
{
    pathd__v1__random_point_result__init(&mm->u.random);
    mm->u.random.version = r->version;
    mm->u.random.cell = p->cell;
    mm->u.random.world = p->world;
    mm->u.random.seed = r->seed;
    mm->u.random.candidates = r->candidates;
    return &mm->u.random;
}

static void *pd__fill_wall(const pd_move_result *r, pd__move_msg *mm, const pd__move_refs *p)
{
    pathd__v1__distance_to_wall_result__init(&mm->u.wall);
    mm->u.wall.version = r->version;
    mm->u.wall.distance = r->distance;
    mm->u.wall.wall = p->hit;
    return &mm->u.wall;
}

/* Each movement kind's result: its Response oneof case alone, its
 * QueryResult oneof case as a Batch item, and its message's fill. */
typedef struct pd__move_row {
    Pathd__V1__Response__BodyCase response;
    Pathd__V1__QueryResult__KindCase item;
    void *(*fill)(const pd_move_result *r, pd__move_msg *mm, const pd__move_refs *p);
} pd__move_row;

static const pd__move_row pd__move_rows[PD_REQ__COUNT] = {
    [PD_REQ_RAYCAST] = {PATHD__V1__RESPONSE__BODY_RAYCAST, PATHD__V1__QUERY_RESULT__KIND_RAYCAST, pd__fill_raycast},
    [PD_REQ_VALIDATE_MOVE] = {PATHD__V1__RESPONSE__BODY_VALIDATE_MOVE, PATHD__V1__QUERY_RESULT__KIND_VALIDATE_MOVE,
                              pd__fill_validate},
    [PD_REQ_MOVE_ALONG] = {PATHD__V1__RESPONSE__BODY_MOVE_ALONG, PATHD__V1__QUERY_RESULT__KIND_MOVE_ALONG,
                           pd__fill_move_along},
    [PD_REQ_NEAREST] = {PATHD__V1__RESPONSE__BODY_NEAREST, PATHD__V1__QUERY_RESULT__KIND_NEAREST, pd__fill_nearest},
    [PD_REQ_REACHABLE] = {PATHD__V1__RESPONSE__BODY_REACHABLE, PATHD__V1__QUERY_RESULT__KIND_REACHABLE,
                          pd__fill_reachable},
    [PD_REQ_RANDOM_POINT] = {PATHD__V1__RESPONSE__BODY_RANDOM_POINT, PATHD__V1__QUERY_RESULT__KIND_RANDOM_POINT,
                             pd__fill_random_point},
    [PD_REQ_DISTANCE_TO_WALL] = {PATHD__V1__RESPONSE__BODY_DISTANCE_TO_WALL,
                                 PATHD__V1__QUERY_RESULT__KIND_DISTANCE_TO_WALL, pd__fill_wall},
};

/* The row of a movement kind; DistanceToWall's for any other, as the
 * encoders were only ever given movement kinds. */
static const pd__move_row *pd__move_row_of(pd_request_kind kind)
{
    if ((unsigned)kind < PD_REQ__COUNT && pd__move_rows[kind].fill)
        return &pd__move_rows[kind];
    return &pd__move_rows[PD_REQ_DISTANCE_TO_WALL];
}

/* Fills mm with the result message of kind and returns it. */
static void *pd__fill_move(const pd__move_row *row, const pd_move_result *r, pd__move_msg *mm)
{
    pathd__v1__cell__init(&mm->hit);
    pathd__v1__cell__init(&mm->cell);
    pathd__v1__world_point__init(&mm->world);
    mm->hit.x = r->hit.x;
    mm->hit.y = r->hit.y;
    mm->cell.x = r->cell.x;
    mm->cell.y = r->cell.y;
    mm->world.x = r->wx;
    mm->world.y = r->wy;
    pd__move_refs p = {r->has_hit ? &mm->hit : NULL, r->has_cell ? &mm->cell : NULL,
                       r->has_cell ? &mm->world : NULL};
    return row->fill(r, mm, &p);
}

uint8_t *pd_codec_encode_move(uint64_t id, pd_request_kind kind, const pd_move_result *r, size_t *out_len)
{
    if (r->status != PD_OK)
        return pd_codec_encode_error_version(id, r->status, r->message,
                                             r->status == PD_STALE_VERSION ? r->version : 0, out_len);
    pd__move_msg mm;
    const pd__move_row *row = pd__move_row_of(kind);
    void *body = pd__fill_move(row, r, &mm);
    return pd__encode_ok(id, row->response, body, out_len);
}

/* A FindPath item's chunk and what it points at. */
typedef struct pd__batch_path {
    Pathd__V1__PathChunk chunk;
    pd__points_buf pts;
    pd__chunk_extras extras;
} pd__batch_path;

uint8_t *pd_codec_encode_batch(uint64_t id, const pd_move_req *items, const pd_move_result *results, size_t n,
                               size_t *out_len)
{
    *out_len = 0;
    Pathd__V1__BatchResult batch = PATHD__V1__BATCH_RESULT__INIT;
    Pathd__V1__QueryResult *qr = calloc(n, sizeof *qr);
    Pathd__V1__QueryResult **qrp = calloc(n, sizeof *qrp);
    pd__move_msg *mm = calloc(n, sizeof *mm);
    char **messages = calloc(n, sizeof *messages);
    pd__batch_path *paths = calloc(n, sizeof *paths);
    uint8_t *buf = NULL;
    if (!qr || !qrp || !mm || !messages || !paths)
        goto out;
    for (size_t i = 0; i < n; i++) {
        pathd__v1__query_result__init(&qr[i]);
        qrp[i] = &qr[i];
        qr[i].status = pd__wire_status(results[i].status);
        if (results[i].status == PD_STALE_VERSION)
            qr[i].version = results[i].version;
        if (items[i].kind == PD_REQ_FIND_PATH && results[i].scene != NULL) {
            /* A FindPath item that ran: the whole path (maybe none) as one
             * final chunk, filled exactly like a FindPath answer's last
             * frame; PD_BATCH_MAX_PATH_WAYPOINTS bounds it. */
            const pd_path_result *pr = &results[i].path;
            const size_t len = pr->path != NULL ? pr->path_len : 0;
            if (pd__points_alloc(&paths[i].pts, len) != 0)
                goto out;
            const pd_scene *world = items[i].path != NULL && items[i].path->want_world ? results[i].scene : NULL;
            Pathd__V1__Response unused;
            pd__fill_path_chunk(id, results[i].scene, world, pr, len, (uint32_t)(len ? len : 1), 0, 1,
                                &paths[i].pts, &paths[i].extras, &paths[i].chunk, &unused);
            qr[i].kind_case = PATHD__V1__QUERY_RESULT__KIND_PATH;
            qr[i].path = &paths[i].chunk;
        }
        if (results[i].status != PD_OK && results[i].status != PD_PARTIAL) {
            /* A FindPath item that ran explains itself in its path result,
             * as a FindPath alone does in Response.message. */
            const char *why = results[i].message;
            if (!why[0] && items[i].kind == PD_REQ_FIND_PATH)
                why = results[i].path.message;
            messages[i] = pd__utf8_sanitized(why);
            if (!messages[i])
                goto out;
            qr[i].message = messages[i];
            continue;
        }
        if (items[i].kind == PD_REQ_FIND_PATH)
            continue;
        const pd__move_row *row = pd__move_row_of(items[i].kind);
        qr[i].kind_case = row->item;
        qr[i].raycast = pd__fill_move(row, &results[i], &mm[i]);
    }
    batch.n_items = n;
    batch.items = qrp;
    buf = pd__encode_ok(id, PATHD__V1__RESPONSE__BODY_BATCH, &batch, out_len);
out:
    if (messages)
        for (size_t i = 0; i < n; i++)
            free(messages[i]);
    if (paths)
        for (size_t i = 0; i < n; i++)
            free(paths[i].pts.block);
    free(paths);
    free(messages);
    free(mm);
    free(qrp);
    free(qr);
    return buf;
}

static uint8_t *pd__encode_move_job(const pd_job *job, size_t *len)
{
    return pd_codec_encode_move(job->task.tag, job->kind, &job->move_results[0], len);
}

static uint8_t *pd__encode_batch_job(const pd_job *job, size_t *len)
{
    return pd_codec_encode_batch(job->task.tag, job->move_reqs, job->move_results, job->n_moves, len);
}

static pd_status pd__decode_batch_body(const Pathd__V1__Request *m, const pd__codec_row *row, pd_request *req,
                                       char *err, size_t errlen)
{
    (void)row;
    return pd__decode_batch(m->batch, &req->u.batch, err, errlen);
}

#define PD__QUERY_ROW(body, kind, query) {body, kind, query, pd__decode_single_query, pd__encode_move_job}

const pd__codec_row pd__codec_rows_move[] = {
    PD__QUERY_ROW(PATHD__V1__REQUEST__BODY_RAYCAST, PD_REQ_RAYCAST, PATHD__V1__QUERY__KIND_RAYCAST),
    PD__QUERY_ROW(PATHD__V1__REQUEST__BODY_VALIDATE_MOVE, PD_REQ_VALIDATE_MOVE, PATHD__V1__QUERY__KIND_VALIDATE_MOVE),
    PD__QUERY_ROW(PATHD__V1__REQUEST__BODY_MOVE_ALONG, PD_REQ_MOVE_ALONG, PATHD__V1__QUERY__KIND_MOVE_ALONG),
    PD__QUERY_ROW(PATHD__V1__REQUEST__BODY_NEAREST, PD_REQ_NEAREST, PATHD__V1__QUERY__KIND_NEAREST),
    PD__QUERY_ROW(PATHD__V1__REQUEST__BODY_REACHABLE, PD_REQ_REACHABLE, PATHD__V1__QUERY__KIND_REACHABLE),
    PD__QUERY_ROW(PATHD__V1__REQUEST__BODY_RANDOM_POINT, PD_REQ_RANDOM_POINT, PATHD__V1__QUERY__KIND_RANDOM_POINT),
    PD__QUERY_ROW(PATHD__V1__REQUEST__BODY_DISTANCE_TO_WALL, PD_REQ_DISTANCE_TO_WALL,
                  PATHD__V1__QUERY__KIND_DISTANCE_TO_WALL),
    {PATHD__V1__REQUEST__BODY_BATCH, PD_REQ_BATCH, 0, pd__decode_batch_body, pd__encode_batch_job},
    {0},
};
