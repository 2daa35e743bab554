/*
 * pd_codec_fast.c - a hand-written reader for the most common request, a
 * plain FindPath (issue 30, item 6), so that it skips protobuf-c's generic
 * unpack: a walk over descriptors with an allocation per sub-message, about
 * 4,100 instructions of the ~5,700 the loop spent decoding one (pre-scan
 * 1,080 more) in docs/BENCHMARKS.md's profile.
 *
 * It is a fast path, not a second decoder: it fills the same generated
 * structs protobuf-c would (on the caller's storage instead of the heap),
 * and pd_codec.c validates them with the very code that validates an
 * unpacked message. Whatever it is not sure to read exactly as protobuf-c
 * 1.4 does it leaves alone (returns 0) and the frame takes the generic path
 * (pre-scan, unpack): unknown fields, a field seen twice (protobuf-c merges
 * repeated sub-messages and keeps the last scalar), a wrong wire type, the
 * lists (avoid, goals) and window, a scene name that is long, holds a NUL
 * or any byte over 0x7F, a varint or length that runs past its message.
 * test_codec and fuzz_codec hold it to protobuf-c's answer on every frame.
 *
 * The values it does read follow protobuf-c's own parsers: a 32-bit field
 * (uint32, int32, enum) keeps the low 32 bits of its varint of up to ten
 * bytes, a uint64 the low 64, a bool is true when any of its varint's 7-bit
 * groups is not zero, a double is 8 little-endian bytes.
 */
#include <string.h>

#include "pd_codec_internal.h"

/* Field numbers, as proto/pathd.proto has them. */
enum {
    PD__REQ_ID = 1,
    PD__REQ_FIND_PATH = 10,
    PD__FP_SCENE = 1,
    PD__FP_START = 2,
    PD__FP_GOAL = 3,
    PD__FP_UNIT_SIZE = 4,
    PD__FP_CONNECTIVITY = 5,
    PD__FP_MAX_EXPANSIONS = 6,
    PD__FP_DEADLINE_MS = 7,
    PD__FP_STYLE = 8,
    PD__FP_GOAL_MODE = 9,
    PD__FP_SNAP = 10,
    PD__FP_PARTIAL = 11,
    PD__FP_SPEED = 12,
    PD__FP_START_TIME = 13,
    PD__FP_RANGE = 20,
    PD__FP_LINE_OF_SIGHT = 21,
    PD__FP_AVOID_RESERVED = 23,
    PD__FP_WANT_WORLD = 50,
    PD__FP_MIN_VERSION = 60,
};

/* Wire types. */
enum { PD__WT_VARINT = 0, PD__WT_64BIT = 1, PD__WT_LEN = 2 };

/* One varint: its value (the low 64 bits, as protobuf-c's parse_uint64
 * keeps them) and whether any 7-bit group is set (protobuf-c's bool). */
typedef struct pd__fvarint {
    uint64_t v;
    int any;
} pd__fvarint;

/* Reads a varint of at most `max` bytes at *p; 0 when it is longer or runs
 * past end (the generic path decides those). */
static int pd__fread_varint(const uint8_t **p, const uint8_t *end, size_t max, pd__fvarint *out)
{
    const uint8_t *q = *p;
    uint64_t v = 0;
    int any = 0;
    for (size_t i = 0; i < max && q + i < end; i++) {
        v |= (uint64_t)(q[i] & 0x7Fu) << (7 * i);
        any |= q[i] & 0x7F;
        if (!(q[i] & 0x80u)) {
            out->v = v;
            out->any = any != 0;
            *p = q + i + 1;
            return 1;
        }
    }
    return 0;
}

/* The next field's number and wire type; 0 at the end or when the tag is
 * not one the fast path could know (over five bytes, number 0). */
static int pd__fread_tag(const uint8_t **p, const uint8_t *end, uint32_t *number, unsigned *wt)
{
    pd__fvarint key;
    if (*p >= end || !pd__fread_varint(p, end, 5, &key) || (key.v >> 3) == 0 || (key.v >> 3) > 0xFFFFFFFFu)
        return 0;
    *number = (uint32_t)(key.v >> 3);
    *wt = (unsigned)(key.v & 7u);
    return 1;
}

/* A length-delimited field's bytes: [*body, *body_end). protobuf-c reads
 * the length from at most five bytes. */
static int pd__fread_len(const uint8_t **p, const uint8_t *end, const uint8_t **body, const uint8_t **body_end)
{
    pd__fvarint n;
    if (!pd__fread_varint(p, end, 5, &n) || n.v > (uint64_t)(end - *p))
        return 0;
    *body = *p;
    *body_end = *p + n.v;
    *p = *body_end;
    return 1;
}

static int pd__fread_double(const uint8_t **p, const uint8_t *end, double *out)
{
    if (end - *p < 8)
        return 0;
    uint64_t bits = 0;
    for (int i = 7; i >= 0; i--)
        bits = bits << 8 | (*p)[i];
    memcpy(out, &bits, sizeof *out);
    *p += 8;
    return 1;
}

/* A field may appear once: `seen` holds a bit per field slot. */
static int pd__fonce(uint64_t *seen, unsigned slot)
{
    uint64_t bit = (uint64_t)1 << slot;
    if (*seen & bit)
        return 0;
    *seen |= bit;
    return 1;
}

/* Cell {int32 x = 1; int32 y = 2} */
static int pd__fread_cell(const uint8_t *p, const uint8_t *end, Pathd__V1__Cell *c)
{
    uint64_t seen = 0;
    uint32_t number;
    unsigned wt;
    while (p < end) {
        pd__fvarint v;
        if (!pd__fread_tag(&p, end, &number, &wt) || wt != PD__WT_VARINT || (number != 1 && number != 2) ||
            !pd__fonce(&seen, number) || !pd__fread_varint(&p, end, 10, &v))
            return 0;
        if (number == 1)
            c->x = (int32_t)(uint32_t)v.v;
        else
            c->y = (int32_t)(uint32_t)v.v;
    }
    return 1;
}

/* WorldPoint {double x = 1; double y = 2} */
static int pd__fread_world(const uint8_t *p, const uint8_t *end, Pathd__V1__WorldPoint *w)
{
    uint64_t seen = 0;
    uint32_t number;
    unsigned wt;
    while (p < end) {
        if (!pd__fread_tag(&p, end, &number, &wt) || wt != PD__WT_64BIT || (number != 1 && number != 2) ||
            !pd__fonce(&seen, number) || !pd__fread_double(&p, end, number == 1 ? &w->x : &w->y))
            return 0;
    }
    return 1;
}

/* Point {oneof kind {Cell cell = 1; WorldPoint world = 2}}: at most one of
 * them (protobuf-c would keep the last of several). */
static int pd__fread_point(const uint8_t *p, const uint8_t *end, Pathd__V1__Point *pt, Pathd__V1__Cell *cell,
                           Pathd__V1__WorldPoint *world)
{
    uint32_t number;
    unsigned wt;
    const uint8_t *b, *be;
    *pt = (Pathd__V1__Point)PATHD__V1__POINT__INIT;
    if (p == end)
        return 1;
    if (!pd__fread_tag(&p, end, &number, &wt) || wt != PD__WT_LEN || !pd__fread_len(&p, end, &b, &be) || p != end)
        return 0;
    if (number == 1) {
        *cell = (Pathd__V1__Cell)PATHD__V1__CELL__INIT;
        if (!pd__fread_cell(b, be, cell))
            return 0;
        pt->kind_case = PATHD__V1__POINT__KIND_CELL;
        pt->cell = cell;
        return 1;
    }
    if (number == 2) {
        *world = (Pathd__V1__WorldPoint)PATHD__V1__WORLD_POINT__INIT;
        if (!pd__fread_world(b, be, world))
            return 0;
        pt->kind_case = PATHD__V1__POINT__KIND_WORLD;
        pt->world = world;
        return 1;
    }
    return 0;
}

/* A scene name as protobuf-c would hand it back (NUL-terminated), when it
 * is plain ASCII without NUL and fits out: anything else (the pre-scan's
 * NUL check, the length and UTF-8 errors) is the generic path's. */
static int pd__fread_name(const uint8_t *p, const uint8_t *end, char *out, size_t cap)
{
    size_t n = (size_t)(end - p);
    if (n >= cap)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (p[i] == 0 || p[i] > 0x7F)
            return 0;
    memcpy(out, p, n);
    out[n] = '\0';
    return 1;
}

/* The FindPath message's fields, into f->fp. */
static int pd__fread_find_path(const uint8_t *p, const uint8_t *end, pd__fast_find_path *f)
{
    Pathd__V1__FindPath *m = &f->fp;
    uint64_t seen = 0;
    uint32_t number;
    unsigned wt;
    *m = (Pathd__V1__FindPath)PATHD__V1__FIND_PATH__INIT;
    while (p < end) {
        if (!pd__fread_tag(&p, end, &number, &wt) || number > 63 || !pd__fonce(&seen, number))
            return 0;
        pd__fvarint v;
        const uint8_t *b, *be;
        switch (number) {
        case PD__FP_SCENE:
            if (wt != PD__WT_LEN || !pd__fread_len(&p, end, &b, &be) ||
                !pd__fread_name(b, be, f->scene, sizeof f->scene))
                return 0;
            m->scene = f->scene;
            break;
        case PD__FP_START:
            if (wt != PD__WT_LEN || !pd__fread_len(&p, end, &b, &be) ||
                !pd__fread_point(b, be, &f->start, &f->start_cell, &f->start_world))
                return 0;
            m->start = &f->start;
            break;
        case PD__FP_GOAL:
            if (wt != PD__WT_LEN || !pd__fread_len(&p, end, &b, &be) ||
                !pd__fread_point(b, be, &f->goal, &f->goal_cell, &f->goal_world))
                return 0;
            m->goal = &f->goal;
            break;
        case PD__FP_SPEED:
        case PD__FP_START_TIME:
        case PD__FP_RANGE: {
            double *d = number == PD__FP_SPEED ? &m->speed : number == PD__FP_START_TIME ? &m->start_time : &m->range;
            if (wt != PD__WT_64BIT || !pd__fread_double(&p, end, d))
                return 0;
            break;
        }
        case PD__FP_UNIT_SIZE:
        case PD__FP_CONNECTIVITY:
        case PD__FP_MAX_EXPANSIONS:
        case PD__FP_DEADLINE_MS:
        case PD__FP_STYLE:
        case PD__FP_GOAL_MODE:
        case PD__FP_SNAP:
        case PD__FP_PARTIAL:
        case PD__FP_LINE_OF_SIGHT:
        case PD__FP_AVOID_RESERVED:
        case PD__FP_WANT_WORLD:
        case PD__FP_MIN_VERSION:
            if (wt != PD__WT_VARINT || !pd__fread_varint(&p, end, 10, &v))
                return 0;
            switch (number) {
            case PD__FP_UNIT_SIZE: m->unit_size = (uint32_t)v.v; break;
            case PD__FP_CONNECTIVITY: m->connectivity = (Pathd__V1__Connectivity)(int32_t)(uint32_t)v.v; break;
            case PD__FP_MAX_EXPANSIONS: m->max_expansions = v.v; break;
            case PD__FP_DEADLINE_MS: m->deadline_ms = (uint32_t)v.v; break;
            case PD__FP_STYLE: m->style = (Pathd__V1__WaypointStyle)(int32_t)(uint32_t)v.v; break;
            case PD__FP_GOAL_MODE: m->goal_mode = (Pathd__V1__GoalMode)(int32_t)(uint32_t)v.v; break;
            case PD__FP_SNAP: m->snap = v.any; break;
            case PD__FP_PARTIAL: m->partial_on_cutoff = v.any; break;
            case PD__FP_LINE_OF_SIGHT: m->line_of_sight = v.any; break;
            case PD__FP_AVOID_RESERVED: m->avoid_reserved = v.any; break;
            case PD__FP_WANT_WORLD: m->want_world = v.any; break;
            default: m->min_version = v.v; break;
            }
            break;
        default: /* avoid, window, goals, and fields this file does not know */
            return 0;
        }
    }
    return 1;
}

int pd__fast_unpack_find_path(const uint8_t *payload, size_t len, pd__fast_find_path *f)
{
    const uint8_t *p = payload, *end = payload + len;
    uint64_t seen = 0;
    uint32_t number;
    unsigned wt;
    if (payload == NULL)
        return 0;
    f->req = (Pathd__V1__Request)PATHD__V1__REQUEST__INIT;
    while (p < end) {
        if (!pd__fread_tag(&p, end, &number, &wt) || number > 63 || !pd__fonce(&seen, number))
            return 0;
        if (number == PD__REQ_ID && wt == PD__WT_VARINT) {
            pd__fvarint v;
            if (!pd__fread_varint(&p, end, 10, &v))
                return 0;
            f->req.id = v.v;
        } else if (number == PD__REQ_FIND_PATH && wt == PD__WT_LEN) {
            const uint8_t *b, *be;
            if (!pd__fread_len(&p, end, &b, &be) || !pd__fread_find_path(b, be, f))
                return 0;
            f->req.body_case = PATHD__V1__REQUEST__BODY_FIND_PATH;
            f->req.find_path = &f->fp;
        } else {
            return 0;
        }
    }
    return f->req.body_case == PATHD__V1__REQUEST__BODY_FIND_PATH;
}
