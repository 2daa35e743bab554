/*
 * pd_codec_common.c - what every family of the codec uses (see
 * pd_codec_internal.h): scene names, points, rectangles and cell lists
 * checked on the way in; the wire status, UTF-8 made safe, error frames
 * and the framing of one Response (size, then pack) on the way out.
 */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_codec_internal.h"

/* Formats a decode error into err (truncated to errlen). */
/* Strict UTF-8 check (no overlongs, no surrogates, nothing above U+10FFFF):
 * proto3 strings must be UTF-8 and protobuf-c does not check it, while the
 * names travel back to clients whose protobuf libraries do. */
int pd__utf8_valid(const unsigned char *s, size_t n)
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
pd_status pd__decode_scene_name(const char *name, const char *field, char out[PD_CONF_MAX_NAME],
                                       char *err, size_t errlen)
{
    size_t n = name != NULL ? strlen(name) : 0;
    if (n == 0) {
        pd_set_err(err, errlen, "%s is empty", field);
        return PD_INVALID_ARGUMENT;
    }
    if (n >= PD_CONF_MAX_NAME) {
        pd_set_err(err, errlen, "%s is %zu bytes; at most %d allowed", field, n, PD_CONF_MAX_NAME - 1);
        return PD_INVALID_ARGUMENT;
    }
    if (!pd__utf8_valid((const unsigned char *)name, n)) {
        pd_set_err(err, errlen, "%s is not valid UTF-8", field);
        return PD_INVALID_ARGUMENT;
    }
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)name[i] < 0x20 || name[i] == 0x7F) {
            pd_set_err(err, errlen, "%s contains a control character", field);
            return PD_INVALID_ARGUMENT;
        }
    }
    memcpy(out, name, n + 1);
    return PD_OK;
}

pd_status pd__decode_point(const Pathd__V1__Point *p, const char *field, pd_point_spec *out,
                                  char *err, size_t errlen)
{
    if (p == NULL) {
        pd_set_err(err, errlen, "%s is missing", field);
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
            pd_set_err(err, errlen, "%s.world is not a finite point", field);
            return PD_INVALID_ARGUMENT;
        }
        out->is_world = 1;
        out->wx = p->world->x;
        out->wy = p->world->y;
        return PD_OK;
    default:
        pd_set_err(err, errlen, "%s has neither cell nor world set", field);
        return PD_INVALID_ARGUMENT;
    }
}

/* A Rect with both corners set and min <= max on each axis. */
pd_status pd__decode_rect(const Pathd__V1__Rect *r, const char *field, pd_point *min, pd_point *max,
                                 char *err, size_t errlen)
{
    if (r->min == NULL || r->max == NULL) {
        pd_set_err(err, errlen, "%s needs both min and max", field);
        return PD_INVALID_ARGUMENT;
    }
    *min = (pd_point){r->min->x, r->min->y};
    *max = (pd_point){r->max->x, r->max->y};
    if (min->x > max->x || min->y > max->y) {
        pd_set_err(err, errlen, "%s min (%d,%d) is not <= max (%d,%d)", field, (int)min->x, (int)min->y,
                    (int)max->x, (int)max->y);
        return PD_INVALID_ARGUMENT;
    }
    return PD_OK;
}

/* Copies n repeated Cells into a malloc'd array the request owns (the
 * protobuf message is freed before the request is used). */
pd_status pd__copy_cells(Pathd__V1__Cell *const *cells, size_t n, const char *field, pd_point **out,
                                char *err, size_t errlen)
{
    pd_point *pts = malloc(n * sizeof *pts);
    if (pts == NULL) {
        pd_set_err(err, errlen, "out of memory for %zu cells of %s", n, field);
        return PD_INTERNAL;
    }
    for (size_t i = 0; i < n; i++) {
        if (cells[i] == NULL) {
            free(pts);
            pd_set_err(err, errlen, "%s[%zu] is missing", field, i);
            return PD_INVALID_ARGUMENT;
        }
        pts[i] = (pd_point){cells[i]->x, cells[i]->y};
    }
    *out = pts;
    return PD_OK;
}

/* The common case: one Response, one frame, one buffer. */
uint8_t *pd__encode_single(const Pathd__V1__Response *resp, size_t *out_len)
{
    pd__frame_plan plan;
    size_t size = pd__frame_size(resp, &plan);
    uint8_t *buf = malloc(size);
    *out_len = 0;
    if (buf == NULL)
        return NULL;
    *out_len = pd__frame_pack(resp, &plan, buf);
    return buf;
}

uint8_t *pd__encode_ok(uint64_t id, Pathd__V1__Response__BodyCase body_case, void *body, size_t *out_len)
{
    Pathd__V1__Response resp = PATHD__V1__RESPONSE__INIT;
    /* The body must be the case's message type: the descriptor says which. */
    assert(protobuf_c_message_descriptor_get_field(&pathd__v1__response__descriptor, (unsigned)body_case)
               ->descriptor == ((const ProtobufCMessage *)body)->descriptor);
    resp.id = id;
    resp.status = PATHD__V1__STATUS__OK;
    resp.final = 1;
    resp.body_case = body_case;
    /* Every body of the oneof sits in one union in the generated struct, so
     * one member serves them all. */
    resp.path = body;
    return pd__encode_single(&resp, out_len);
}

/* Copies a message for the wire, replacing each byte that is not part of a
 * valid UTF-8 sequence with '?', since proto3 string fields must be UTF-8 and
 * messages may quote client input. Returns a malloc'd string or NULL. */
char *pd__utf8_sanitized(const char *msg)
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
    return pd_codec_encode_error_version(id, status, message, 0, out_len);
}

uint8_t *pd_codec_encode_error_version(uint64_t id, pd_status status, const char *message, uint64_t version,
                                       size_t *out_len)
{
    Pathd__V1__Response resp = PATHD__V1__RESPONSE__INIT;
    Pathd__V1__Error error = PATHD__V1__ERROR__INIT;
    uint8_t *buf;

    *out_len = 0;
    error.message = pd__utf8_sanitized(message != NULL ? message : "");
    if (error.message == NULL)
        return NULL;
    error.version = version;
    resp.id = id;
    resp.status = pd__wire_status(status);
    resp.final = 1;
    resp.body_case = PATHD__V1__RESPONSE__BODY_ERROR;
    resp.error = &error;
    buf = pd__encode_single(&resp, out_len);
    free(error.message);
    return buf;
}
