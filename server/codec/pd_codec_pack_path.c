/*
 * pd_codec_pack_path.c - a path answer (a Response whose body is a
 * PathChunk) sized and packed by hand (issue 30, item 6): the most common
 * answer, whose protobuf-c size and pack passes walked every field
 * descriptor of three messages, about 4,600 instructions of a den520d
 * corners answer in docs/BENCHMARKS.md's profile.
 *
 * It writes the bytes protobuf-c 1.4 writes for the same message, field for
 * field in number order, a proto3 scalar left out when zero (a double when
 * it compares equal to 0), a sub-message when its pointer is NULL, a packed
 * array when empty; an enum or int32 below zero as ten bytes. test_codec_fast
 * holds it to protobuf-c's pack byte for byte on random answers. Only the
 * fields pd__fill_path_chunk sets exist here: a message holding anything
 * else (unknown fields) is protobuf-c's to pack (pd__path_pack_takes).
 */
#include <string.h>

#include "pd_codec_internal.h"

/* Field keys (number << 3 | wire type), as proto/pathd.proto numbers them. */
enum {
    PD__K_RESP_ID = 1 << 3 | 0,
    PD__K_RESP_STATUS = 2 << 3 | 0,
    PD__K_RESP_FINAL = 3 << 3 | 0,
    PD__K_RESP_MESSAGE = 4 << 3 | 2,
    PD__K_RESP_SERVER_US = 5 << 3 | 0,
    PD__K_RESP_SEARCH_US = 6 << 3 | 0,
    PD__K_RESP_PATH = 10 << 3 | 2,
    PD__K_CHUNK_SEQ = 2 << 3 | 0,
    PD__K_CHUNK_COST = 3 << 3 | 1,
    PD__K_CHUNK_EXPANSIONS = 4 << 3 | 0,
    PD__K_CHUNK_MICROS = 5 << 3 | 0,
    PD__K_CHUNK_VERSION = 6 << 3 | 0,
    PD__K_CHUNK_TOTAL = 7 << 3 | 0,
    PD__K_CHUNK_START_USED = 8 << 3 | 2,
    PD__K_CHUNK_GOAL_USED = 9 << 3 | 2,
    PD__K_CHUNK_CUTOFF = 10 << 3 | 0,
    PD__K_CHUNK_POINTS = 20 << 3 | 2,
    PD__K_CHUNK_GOAL_INDEX = 21 << 3 | 0,
    PD__K_CELL_X = 1 << 3 | 0,
    PD__K_CELL_Y = 2 << 3 | 0,
    PD__K_WP_DX = 1 << 3 | 2,
    PD__K_WP_DY = 2 << 3 | 2,
    PD__K_WP_T = 3 << 3 | 2,
    PD__K_WP_WX = 4 << 3 | 2,
    PD__K_WP_WY = 5 << 3 | 2,
};

static inline size_t pd__vsize(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline uint8_t *pd__vput(uint8_t *o, uint64_t v)
{
    while (v >= 0x80) {
        *o++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *o++ = (uint8_t)v;
    return o;
}

/* int32 and enums: a negative value is sign-extended to 64 bits. */
static inline uint64_t pd__i32(int32_t v)
{
    return (uint64_t)(int64_t)v;
}

static inline uint32_t pd__zigzag(int32_t v)
{
    return ((uint32_t)v << 1) ^ (uint32_t)(v >> 31);
}

/* A varint field's bytes (key and value; keys here fit one or two bytes),
 * or 0 when it is left out for being zero. */
static inline size_t pd__vfield_size(uint32_t key, uint64_t v)
{
    return v ? pd__vsize(key) + pd__vsize(v) : 0;
}

static inline uint8_t *pd__vfield(uint8_t *o, uint32_t key, uint64_t v)
{
    return v ? pd__vput(pd__vput(o, key), v) : o;
}

static inline size_t pd__lfield_size(uint32_t key, size_t len)
{
    return pd__vsize(key) + pd__vsize(len) + len;
}

static inline uint8_t *pd__lhead(uint8_t *o, uint32_t key, size_t len)
{
    return pd__vput(pd__vput(o, key), len);
}

static size_t pd__cell_size(const Pathd__V1__Cell *c)
{
    return pd__vfield_size(PD__K_CELL_X, pd__i32(c->x)) + pd__vfield_size(PD__K_CELL_Y, pd__i32(c->y));
}

static uint8_t *pd__cell_put(uint8_t *o, uint32_t key, const Pathd__V1__Cell *c)
{
    o = pd__lhead(o, key, pd__cell_size(c));
    o = pd__vfield(o, PD__K_CELL_X, pd__i32(c->x));
    return pd__vfield(o, PD__K_CELL_Y, pd__i32(c->y));
}

/* A 32-bit varint's bytes without a loop: every cell step of a path is one
 * byte, so this runs once per waypoint and array. */
static inline size_t pd__vsize32(uint32_t v)
{
    return 1 + (size_t)(v >= 0x80u) + (size_t)(v >= 0x4000u) + (size_t)(v >= 0x200000u) +
           (size_t)(v >= 0x10000000u);
}

static size_t pd__zz_bytes(const int32_t *v, size_t n)
{
    size_t s = 0;
    for (size_t i = 0; i < n; i++)
        s += pd__vsize32(pd__zigzag(v[i]));
    return s;
}

/* A packed array's field bytes (0 when empty); *body gets its body's. */
static size_t pd__zz_field_size(uint32_t key, const int32_t *v, size_t n, size_t *body)
{
    *body = n ? pd__zz_bytes(v, n) : 0;
    return n ? pd__lfield_size(key, *body) : 0;
}

static uint8_t *pd__zz_put(uint8_t *o, uint32_t key, const int32_t *v, size_t n, size_t body)
{
    if (n == 0)
        return o;
    o = pd__lhead(o, key, body);
    for (size_t i = 0; i < n; i++) {
        uint32_t z = pd__zigzag(v[i]);
        if (z < 0x80u) /* a cell step: the common case */
            *o++ = (uint8_t)z;
        else
            o = pd__vput(o, z);
    }
    return o;
}

static size_t pd__dbl_field_size(uint32_t key, size_t n)
{
    return n ? pd__lfield_size(key, 8 * n) : 0;
}

/* A double as the wire has it: 8 bytes, little-endian. */
static inline uint8_t *pd__put_le64(uint8_t *o, double d)
{
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    for (int b = 0; b < 8; b++)
        *o++ = (uint8_t)(bits >> (8 * b));
    return o;
}

static uint8_t *pd__dbl_put(uint8_t *o, uint32_t key, const double *v, size_t n)
{
    if (n == 0)
        return o;
    o = pd__lhead(o, key, 8 * n);
    for (size_t i = 0; i < n; i++)
        o = pd__put_le64(o, v[i]);
    return o;
}

static void pd__path_sizes_of(const Pathd__V1__Response *r, pd__path_sizes *s)
{
    const Pathd__V1__PathChunk *c = r->path;
    memset(s, 0, sizeof *s);
    if (c != NULL) {
        const Pathd__V1__Waypoints *w = c->points;
        size_t n = pd__vfield_size(PD__K_CHUNK_SEQ, c->seq);
        if (c->cost != 0)
            n += 1 + 8;
        n += pd__vfield_size(PD__K_CHUNK_EXPANSIONS, c->expansions);
        n += pd__vfield_size(PD__K_CHUNK_MICROS, c->search_micros);
        n += pd__vfield_size(PD__K_CHUNK_VERSION, c->scene_version);
        n += pd__vfield_size(PD__K_CHUNK_TOTAL, c->total_waypoints);
        if (c->start_used)
            n += pd__lfield_size(PD__K_CHUNK_START_USED, pd__cell_size(c->start_used));
        if (c->goal_used)
            n += pd__lfield_size(PD__K_CHUNK_GOAL_USED, pd__cell_size(c->goal_used));
        n += pd__vfield_size(PD__K_CHUNK_CUTOFF, pd__i32((int32_t)c->cutoff));
        if (w != NULL) {
            s->points = pd__zz_field_size(PD__K_WP_DX, w->dx, w->n_dx, &s->dx) +
                        pd__zz_field_size(PD__K_WP_DY, w->dy, w->n_dy, &s->dy) +
                        pd__dbl_field_size(PD__K_WP_T, w->n_t) + pd__dbl_field_size(PD__K_WP_WX, w->n_wx) +
                        pd__dbl_field_size(PD__K_WP_WY, w->n_wy);
            n += pd__lfield_size(PD__K_CHUNK_POINTS, s->points);
        }
        n += pd__vfield_size(PD__K_CHUNK_GOAL_INDEX, c->goal_index);
        s->chunk = n;
    }
    size_t t = pd__vfield_size(PD__K_RESP_ID, r->id) + pd__vfield_size(PD__K_RESP_STATUS, pd__i32((int32_t)r->status)) +
               pd__vfield_size(PD__K_RESP_FINAL, r->final != 0);
    if (r->message != NULL && r->message[0] != '\0')
        t += pd__lfield_size(PD__K_RESP_MESSAGE, strlen(r->message));
    t += pd__vfield_size(PD__K_RESP_SERVER_US, r->server_us) + pd__vfield_size(PD__K_RESP_SEARCH_US, r->search_us);
    if (c != NULL)
        t += pd__lfield_size(PD__K_RESP_PATH, s->chunk);
    s->total = t;
}

int pd__path_pack_takes(const Pathd__V1__Response *r)
{
    const Pathd__V1__PathChunk *c = r->path;
    return r->body_case == PATHD__V1__RESPONSE__BODY_PATH && r->base.n_unknown_fields == 0 && c != NULL &&
           c->base.n_unknown_fields == 0 && (c->points == NULL || c->points->base.n_unknown_fields == 0) &&
           (c->start_used == NULL || c->start_used->base.n_unknown_fields == 0) &&
           (c->goal_used == NULL || c->goal_used->base.n_unknown_fields == 0);
}

size_t pd__path_pack_size(const Pathd__V1__Response *r, pd__path_sizes *s)
{
    pd__path_sizes_of(r, s);
    return s->total;
}

size_t pd__path_pack(const Pathd__V1__Response *r, const pd__path_sizes *sz, uint8_t *out)
{
    const pd__path_sizes s = *sz;
    const Pathd__V1__PathChunk *c = r->path;
    uint8_t *o = out;
    o = pd__vfield(o, PD__K_RESP_ID, r->id);
    o = pd__vfield(o, PD__K_RESP_STATUS, pd__i32((int32_t)r->status));
    o = pd__vfield(o, PD__K_RESP_FINAL, r->final != 0);
    if (r->message != NULL && r->message[0] != '\0') {
        size_t len = strlen(r->message);
        o = pd__lhead(o, PD__K_RESP_MESSAGE, len);
        memcpy(o, r->message, len);
        o += len;
    }
    o = pd__vfield(o, PD__K_RESP_SERVER_US, r->server_us);
    o = pd__vfield(o, PD__K_RESP_SEARCH_US, r->search_us);
    if (c != NULL) {
        const Pathd__V1__Waypoints *w = c->points;
        o = pd__lhead(o, PD__K_RESP_PATH, s.chunk);
        o = pd__vfield(o, PD__K_CHUNK_SEQ, c->seq);
        if (c->cost != 0) {
            *o++ = PD__K_CHUNK_COST;
            o = pd__put_le64(o, c->cost);
        }
        o = pd__vfield(o, PD__K_CHUNK_EXPANSIONS, c->expansions);
        o = pd__vfield(o, PD__K_CHUNK_MICROS, c->search_micros);
        o = pd__vfield(o, PD__K_CHUNK_VERSION, c->scene_version);
        o = pd__vfield(o, PD__K_CHUNK_TOTAL, c->total_waypoints);
        if (c->start_used)
            o = pd__cell_put(o, PD__K_CHUNK_START_USED, c->start_used);
        if (c->goal_used)
            o = pd__cell_put(o, PD__K_CHUNK_GOAL_USED, c->goal_used);
        o = pd__vfield(o, PD__K_CHUNK_CUTOFF, pd__i32((int32_t)c->cutoff));
        if (w != NULL) {
            o = pd__lhead(o, PD__K_CHUNK_POINTS, s.points);
            o = pd__zz_put(o, PD__K_WP_DX, w->dx, w->n_dx, s.dx);
            o = pd__zz_put(o, PD__K_WP_DY, w->dy, w->n_dy, s.dy);
            o = pd__dbl_put(o, PD__K_WP_T, w->t, w->n_t);
            o = pd__dbl_put(o, PD__K_WP_WX, w->wx, w->n_wx);
            o = pd__dbl_put(o, PD__K_WP_WY, w->wy, w->n_wy);
        }
        o = pd__vfield(o, PD__K_CHUNK_GOAL_INDEX, c->goal_index);
    }
    return (size_t)(o - out);
}
