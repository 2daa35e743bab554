/*
 * pd_codec.c - pathd.v1 protobuf messages <-> server structs (see pd_codec.h).
 *
 * Decoding trusts nothing protobuf-c hands back: it unpacks without any range
 * checks (enums keep whatever number arrived, strings whatever bytes), so every
 * field is validated here before a request reaches the layers above. Encoding
 * builds each Response on the stack, sizes it, and packs header + payload into
 * one malloc'd buffer per answer, so the net layer queues a single write.
 */
#include "pd_codec.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pathd.pb-c.h"
#include "pd_frame.h"

/* ---- decoding ---------------------------------------------------------- */

static void pd__set_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    if (err == NULL || errlen == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* Strict UTF-8 check (no overlongs, no surrogates, nothing above U+10FFFF):
 * proto3 strings must be UTF-8 and protobuf-c does not check it, while the
 * names travel back to clients whose protobuf libraries do. */
static int pd__utf8_valid(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        size_t extra;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) {
            extra = 1;
            cp = c & 0x1Fu;
        } else if (c >= 0xE0 && c <= 0xEF) {
            extra = 2;
            cp = c & 0x0Fu;
        } else if (c >= 0xF0 && c <= 0xF4) {
            extra = 3;
            cp = c & 0x07u;
        } else {
            return 0;
        }
        if (n - i - 1 < extra)
            return 0;
        for (size_t k = 1; k <= extra; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return 0;
            cp = (cp << 6) | (s[i + k] & 0x3Fu);
        }
        if ((extra == 2 && cp < 0x800) || (extra == 3 && cp < 0x10000) || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += extra + 1;
    }
    return 1;
}

/* A scene name must fit pd_conf's name buffer, be UTF-8 and carry no control
 * characters (names end up in logs and error messages). */
static pd_status pd__decode_scene_name(const char *name, const char *field, char out[PD_CONF_MAX_NAME],
                                       char *err, size_t errlen)
{
    size_t n = name != NULL ? strlen(name) : 0;
    if (n == 0) {
        pd__set_err(err, errlen, "%s is empty", field);
        return PD_INVALID_ARGUMENT;
    }
    if (n >= PD_CONF_MAX_NAME) {
        pd__set_err(err, errlen, "%s is %zu bytes; at most %d allowed", field, n, PD_CONF_MAX_NAME - 1);
        return PD_INVALID_ARGUMENT;
    }
    if (!pd__utf8_valid((const unsigned char *)name, n)) {
        pd__set_err(err, errlen, "%s is not valid UTF-8", field);
        return PD_INVALID_ARGUMENT;
    }
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)name[i] < 0x20 || name[i] == 0x7F) {
            pd__set_err(err, errlen, "%s contains a control character", field);
            return PD_INVALID_ARGUMENT;
        }
    }
    memcpy(out, name, n + 1);
    return PD_OK;
}

static pd_status pd__decode_point(const Pathd__V1__Point *p, const char *field, pd_point_spec *out,
                                  char *err, size_t errlen)
{
    if (p == NULL) {
        pd__set_err(err, errlen, "find_path.%s is missing", field);
        return PD_INVALID_ARGUMENT;
    }
    switch (p->kind_case) {
    case PATHD__V1__POINT__KIND_CELL:
        out->is_world = 0;
        out->cell.x = p->cell->x;
        out->cell.y = p->cell->y;
        return PD_OK;
    case PATHD__V1__POINT__KIND_WORLD:
        if (!isfinite(p->world->x) || !isfinite(p->world->y)) {
            pd__set_err(err, errlen, "find_path.%s.world is not a finite point", field);
            return PD_INVALID_ARGUMENT;
        }
        out->is_world = 1;
        out->wx = p->world->x;
        out->wy = p->world->y;
        return PD_OK;
    default:
        pd__set_err(err, errlen, "find_path.%s has neither cell nor world set", field);
        return PD_INVALID_ARGUMENT;
    }
}

static pd_status pd__decode_find_path(const Pathd__V1__FindPath *m, pd_find_path_req *out,
                                      char *err, size_t errlen)
{
    pd_status st = pd__decode_scene_name(m->scene, "find_path.scene", out->scene, err, errlen);
    if (st != PD_OK)
        return st;
    if ((st = pd__decode_point(m->start, "start", &out->start, err, errlen)) != PD_OK)
        return st;
    if ((st = pd__decode_point(m->goal, "goal", &out->goal, err, errlen)) != PD_OK)
        return st;

    out->unit_size = m->unit_size == 0 ? 1 : m->unit_size;
    if (out->unit_size > PD_CONF_MAX_UNIT_SIZE) {
        pd__set_err(err, errlen, "find_path.unit_size %u is above the limit %d", (unsigned)m->unit_size,
                    PD_CONF_MAX_UNIT_SIZE);
        return PD_INVALID_ARGUMENT;
    }

    /* protobuf-c keeps unknown enum numbers as they arrived, so compare with
     * every value the schema defines rather than trusting the type. */
    switch ((int)m->connectivity) {
    case PATHD__V1__CONNECTIVITY__CONNECTIVITY_DEFAULT:
    case PATHD__V1__CONNECTIVITY__CONNECTIVITY_8:
        out->connectivity = PD_CONNECT_8;
        break;
    case PATHD__V1__CONNECTIVITY__CONNECTIVITY_4:
        out->connectivity = PD_CONNECT_4;
        break;
    default:
        pd__set_err(err, errlen, "find_path.connectivity %d is not 4 or 8", (int)m->connectivity);
        return PD_INVALID_ARGUMENT;
    }

    switch ((int)m->style) {
    case PATHD__V1__WAYPOINT_STYLE__STYLE_CELLS:
        out->style = PD_STYLE_CELLS;
        break;
    case PATHD__V1__WAYPOINT_STYLE__STYLE_CORNERS:
        out->style = PD_STYLE_CORNERS;
        break;
    default:
        pd__set_err(err, errlen, "find_path.style %d is not STYLE_CELLS (0) or STYLE_CORNERS (1)",
                    (int)m->style);
        return PD_INVALID_ARGUMENT;
    }

    if (m->deadline_ms > PD_CODEC_MAX_DEADLINE_MS) {
        pd__set_err(err, errlen, "find_path.deadline_ms %u is above the limit %u", (unsigned)m->deadline_ms,
                    PD_CODEC_MAX_DEADLINE_MS);
        return PD_INVALID_ARGUMENT;
    }
    out->deadline_ms = m->deadline_ms;
    out->max_expansions = m->max_expansions;
    return PD_OK;
}

static pd_status pd__decode_body(const Pathd__V1__Request *m, pd_request *req, char *err, size_t errlen)
{
    switch (m->body_case) {
    case PATHD__V1__REQUEST__BODY_FIND_PATH:
        req->kind = PD_REQ_FIND_PATH;
        return pd__decode_find_path(m->find_path, &req->u.find_path, err, errlen);
    case PATHD__V1__REQUEST__BODY_CANCEL:
        req->kind = PD_REQ_CANCEL;
        req->u.cancel_target = m->cancel->target_id;
        return PD_OK;
    case PATHD__V1__REQUEST__BODY_LIST_SCENES:
        req->kind = PD_REQ_LIST_SCENES;
        return PD_OK;
    case PATHD__V1__REQUEST__BODY_SCENE_INFO:
        req->kind = PD_REQ_SCENE_INFO;
        return pd__decode_scene_name(m->scene_info->scene, "scene_info.scene", req->u.scene_name, err,
                                     errlen);
    case PATHD__V1__REQUEST__BODY_STATS:
        req->kind = PD_REQ_STATS;
        return PD_OK;
    case PATHD__V1__REQUEST__BODY_PING:
        req->kind = PD_REQ_PING;
        req->u.ping_nonce = m->ping->nonce;
        return PD_OK;
    default:
        /* Bodies added to the schema later (field numbers 16 and up) arrive
         * here as unknown fields; say so, since the client likely is newer. */
        if (m->base.n_unknown_fields > 0)
            pd__set_err(err, errlen, "request has no body this server knows (newer client?)");
        else
            pd__set_err(err, errlen, "request has no body");
        return PD_INVALID_ARGUMENT;
    }
}

pd_status pd_codec_decode_request(const uint8_t *payload, size_t len, pd_request *req,
                                  char *err, size_t errlen)
{
    static const uint8_t empty[1];
    Pathd__V1__Request *m;
    pd_status st;

    memset(req, 0, sizeof *req);
    pd__set_err(err, errlen, "%s", "");
    if (payload == NULL) {
        if (len > 0) {
            pd__set_err(err, errlen, "no payload bytes");
            return PD_MALFORMED;
        }
        payload = empty;
    }
    /* The default allocator (malloc + free) keeps protobuf-c #690 out of the
     * picture; the frame cap already bounds what unpack can allocate. */
    m = pathd__v1__request__unpack(NULL, len, payload);
    if (m == NULL) {
        pd__set_err(err, errlen, "frame is not a pathd.v1.Request");
        return PD_MALFORMED;
    }
    req->id = m->id;
    st = pd__decode_body(m, req, err, errlen);
    pathd__v1__request__free_unpacked(m, NULL);
    if (st != PD_OK) {
        uint64_t id = req->id;
        pd_request_kind kind = req->kind;
        memset(req, 0, sizeof *req);
        req->id = id;
        req->kind = kind;
    }
    return st;
}

/* ---- encoding ---------------------------------------------------------- */

/* pd_status values double as wire values; the ones that never go on the
 * wire (PD_BUFFER_TOO_SMALL, anything out of range) become INTERNAL. */
static Pathd__V1__Status pd__wire_status(pd_status s)
{
    if ((unsigned)s > (unsigned)PD_INTERNAL)
        return PATHD__V1__STATUS__INTERNAL;
    return (Pathd__V1__Status)s;
}

static size_t pd__frame_size(const Pathd__V1__Response *resp)
{
    return PD_FRAME_HEADER_BYTES + pathd__v1__response__get_packed_size(resp);
}

/* Writes one whole frame at out; returns the bytes written. The caller sized
 * the buffer with pd__frame_size on the same message. */
static size_t pd__frame_pack(const Pathd__V1__Response *resp, uint8_t *out)
{
    size_t n = pathd__v1__response__pack(resp, out + PD_FRAME_HEADER_BYTES);
    pd_frame_put_header(out, (uint32_t)n);
    return PD_FRAME_HEADER_BYTES + n;
}

/* The common case: one Response, one frame, one buffer. */
static uint8_t *pd__encode_single(const Pathd__V1__Response *resp, size_t *out_len)
{
    size_t size = pd__frame_size(resp);
    uint8_t *buf = malloc(size);
    *out_len = 0;
    if (buf == NULL)
        return NULL;
    *out_len = pd__frame_pack(resp, buf);
    return buf;
}

/* Copies a message for the wire, replacing each byte that is not part of a
 * valid UTF-8 sequence with '?', since proto3 string fields must be UTF-8 and
 * messages may quote client input. Returns a malloc'd string or NULL. */
static char *pd__utf8_sanitized(const char *msg)
{
    size_t n = strlen(msg);
    char *copy = malloc(n + 1);
    size_t i = 0;
    if (copy == NULL)
        return NULL;
    memcpy(copy, msg, n + 1);
    while (i < n) {
        size_t seq = 1;
        unsigned char c = (unsigned char)copy[i];
        if (c >= 0x80) {
            seq = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
            if (seq > n - i || !pd__utf8_valid((const unsigned char *)copy + i, seq)) {
                copy[i] = '?';
                seq = 1;
            }
        }
        i += seq;
    }
    return copy;
}

uint8_t *pd_codec_encode_error(uint64_t id, pd_status status, const char *message, size_t *out_len)
{
    Pathd__V1__Response resp = PATHD__V1__RESPONSE__INIT;
    Pathd__V1__Error error = PATHD__V1__ERROR__INIT;
    uint8_t *buf;

    *out_len = 0;
    error.message = pd__utf8_sanitized(message != NULL ? message : "");
    if (error.message == NULL)
        return NULL;
    resp.id = id;
    resp.status = pd__wire_status(status);
    resp.final = 1;
    resp.body_case = PATHD__V1__RESPONSE__BODY_ERROR;
    resp.error = &error;
    buf = pd__encode_single(&resp, out_len);
    free(error.message);
    return buf;
}

uint8_t *pd_codec_encode_ack(uint64_t id, pd_status status, size_t *out_len)
{
    Pathd__V1__Response resp = PATHD__V1__RESPONSE__INIT;
    resp.id = id;
    resp.status = pd__wire_status(status);
    resp.final = 1;
    return pd__encode_single(&resp, out_len);
}

uint8_t *pd_codec_encode_pong(uint64_t id, uint64_t nonce, size_t *out_len)
{
    Pathd__V1__Response resp = PATHD__V1__RESPONSE__INIT;
    Pathd__V1__Pong pong = PATHD__V1__PONG__INIT;
    pong.nonce = nonce;
    resp.id = id;
    resp.status = PATHD__V1__STATUS__OK;
    resp.final = 1;
    resp.body_case = PATHD__V1__RESPONSE__BODY_PONG;
    resp.pong = &pong;
    return pd__encode_single(&resp, out_len);
}

uint8_t *pd_codec_encode_stats(uint64_t id, const pd_server_stats *stats, size_t *out_len)
{
    Pathd__V1__Response resp = PATHD__V1__RESPONSE__INIT;
    Pathd__V1__Stats m = PATHD__V1__STATS__INIT;
    m.uptime_ms = stats->uptime_ms;
    m.connections = stats->connections;
    m.requests_total = stats->requests_total;
    m.paths_found = stats->paths_found;
    m.expansions_total = stats->expansions_total;
    m.queue_depth = stats->queue_depth;
    m.in_flight = stats->in_flight;
    m.threads = stats->threads;
    m.scenes = stats->scenes;
    m.overloaded_total = stats->overloaded_total;
    m.malformed_total = stats->malformed_total;
    resp.id = id;
    resp.status = PATHD__V1__STATUS__OK;
    resp.final = 1;
    resp.body_case = PATHD__V1__RESPONSE__BODY_STATS;
    resp.stats = &m;
    return pd__encode_single(&resp, out_len);
}

/* Passable cells of a grid. Counted on demand because pd_scene keeps no such
 * total; a byte scan per row is fast enough for the grid sizes pathd serves
 * (a 2048 x 2048 map is 4 MB). */
static uint64_t pd__count_passable(const pd_grid *g)
{
    uint64_t count = 0;
    for (int32_t y = 0; y < g->height; y++) {
        const uint8_t *row = g->cells + pd_grid_index(g, 0, y);
        for (int32_t x = 0; x < g->width; x++)
            count += row[x] != PD_CELL_BLOCKED;
    }
    return count;
}

uint8_t *pd_codec_encode_scene_info(uint64_t id, const pd_scene *scene, size_t *out_len)
{
    Pathd__V1__Response resp = PATHD__V1__RESPONSE__INIT;
    Pathd__V1__SceneInfo m = PATHD__V1__SCENE_INFO__INIT;
    uint32_t unit_sizes[PD_CONF_MAX_UNIT_SIZES];
    size_t n_units = scene->n_unit_sizes < PD_CONF_MAX_UNIT_SIZES ? scene->n_unit_sizes : PD_CONF_MAX_UNIT_SIZES;

    memcpy(unit_sizes, scene->unit_sizes, n_units * sizeof unit_sizes[0]);
    m.name = (char *)scene->name;
    if (scene->grid != NULL) {
        m.width = scene->grid->width;
        m.height = scene->grid->height;
        m.passable_cells = pd__count_passable(scene->grid);
    }
    m.origin_x = scene->origin_x;
    m.origin_y = scene->origin_y;
    m.cell_size = scene->cell_size;
    m.n_unit_sizes = n_units;
    m.unit_sizes = unit_sizes;
    m.version = scene->version;
    resp.id = id;
    resp.status = PATHD__V1__STATUS__OK;
    resp.final = 1;
    resp.body_case = PATHD__V1__RESPONSE__BODY_SCENE_INFO;
    resp.scene_info = &m;
    return pd__encode_single(&resp, out_len);
}

uint8_t *pd_codec_encode_scene_list(uint64_t id, pd_scene *const *scenes, size_t n, size_t *out_len)
{
    Pathd__V1__Response resp = PATHD__V1__RESPONSE__INIT;
    Pathd__V1__SceneList list = PATHD__V1__SCENE_LIST__INIT;
    Pathd__V1__SceneSummary *items = NULL;
    Pathd__V1__SceneSummary **ptrs = NULL;
    uint8_t *buf = NULL;

    *out_len = 0;
    if (n > 0) {
        items = calloc(n, sizeof *items);
        ptrs = calloc(n, sizeof *ptrs);
        if (items == NULL || ptrs == NULL)
            goto done;
    }
    for (size_t i = 0; i < n; i++) {
        pathd__v1__scene_summary__init(&items[i]);
        items[i].name = (char *)scenes[i]->name;
        if (scenes[i]->grid != NULL) {
            items[i].width = scenes[i]->grid->width;
            items[i].height = scenes[i]->grid->height;
        }
        items[i].version = scenes[i]->version;
        ptrs[i] = &items[i];
    }
    list.n_scenes = n;
    list.scenes = ptrs;
    resp.id = id;
    resp.status = PATHD__V1__STATUS__OK;
    resp.final = 1;
    resp.body_case = PATHD__V1__RESPONSE__BODY_SCENE_LIST;
    resp.scene_list = &list;
    buf = pd__encode_single(&resp, out_len);
done:
    free(items);
    free(ptrs);
    return buf;
}

/* Fills chunk `seq` of a path answer: its waypoints, and for the last chunk
 * the status and totals. wps/ptrs have room for max_per_chunk entries. */
static void pd__fill_path_chunk(const pd_job *job, size_t path_len, uint32_t max_per_chunk, size_t seq,
                                size_t n_chunks, Pathd__V1__Waypoint *wps, Pathd__V1__Waypoint **ptrs,
                                Pathd__V1__PathChunk *chunk, Pathd__V1__Response *resp)
{
    size_t first = seq * max_per_chunk;
    size_t count = path_len - first < max_per_chunk ? path_len - first : max_per_chunk;
    int last = seq + 1 == n_chunks;

    pathd__v1__path_chunk__init(chunk);
    pathd__v1__response__init(resp);
    for (size_t i = 0; i < count; i++) {
        pd_point cell = job->path[first + i];
        pathd__v1__waypoint__init(&wps[i]);
        wps[i].x = cell.x;
        wps[i].y = cell.y;
        if (job->scene != NULL)
            pd_scene_cell_center(job->scene, cell, &wps[i].wx, &wps[i].wy);
        ptrs[i] = &wps[i];
    }
    chunk->n_waypoints = count;
    chunk->waypoints = count > 0 ? ptrs : NULL;
    chunk->seq = (uint32_t)seq;
    resp->id = job->request_id;
    resp->body_case = PATHD__V1__RESPONSE__BODY_PATH;
    resp->path = chunk;
    if (last) {
        chunk->cost = job->metrics.cost;
        chunk->expansions = job->metrics.expanded;
        chunk->search_micros = job->metrics.micros;
        chunk->scene_version = job->scene != NULL ? job->scene->version : 0;
        chunk->total_waypoints = (uint32_t)path_len;
        resp->status = pd__wire_status(job->status);
        resp->final = 1;
    }
}

uint8_t *pd_codec_encode_path(const pd_job *job, uint32_t max_per_chunk, size_t *out_len)
{
    size_t path_len = job->path != NULL ? job->path_len : 0;
    size_t n_chunks, per_chunk_alloc, total = 0, off = 0;
    Pathd__V1__Waypoint *wps = NULL;
    Pathd__V1__Waypoint **ptrs = NULL;
    Pathd__V1__PathChunk chunk;
    Pathd__V1__Response resp;
    uint8_t *buf = NULL;

    *out_len = 0;
    /* A chunk must hold at least one waypoint, or a path could never end. */
    if (max_per_chunk == 0)
        max_per_chunk = 1;
    n_chunks = path_len == 0 ? 1 : (path_len + max_per_chunk - 1) / max_per_chunk;
    per_chunk_alloc = path_len < max_per_chunk ? path_len : max_per_chunk;
    if (per_chunk_alloc > 0) {
        wps = malloc(per_chunk_alloc * sizeof *wps);
        ptrs = malloc(per_chunk_alloc * sizeof *ptrs);
        if (wps == NULL || ptrs == NULL)
            goto done;
    }

    /* Two passes over the same chunks: size everything, then pack into one
     * buffer, so the net layer gets the whole answer as a single write. */
    for (size_t seq = 0; seq < n_chunks; seq++) {
        pd__fill_path_chunk(job, path_len, max_per_chunk, seq, n_chunks, wps, ptrs, &chunk, &resp);
        total += pd__frame_size(&resp);
    }
    buf = malloc(total);
    if (buf == NULL)
        goto done;
    for (size_t seq = 0; seq < n_chunks; seq++) {
        pd__fill_path_chunk(job, path_len, max_per_chunk, seq, n_chunks, wps, ptrs, &chunk, &resp);
        off += pd__frame_pack(&resp, buf + off);
    }
    *out_len = off;
done:
    free(wps);
    free(ptrs);
    return buf;
}
