/*
 * pd_codec.c - pathd.v1 protobuf messages <-> server structs (see pd_codec.h):
 * the decode entry (the hand-written FindPath reader of pd_codec_fast.c
 * first, else the unpack arena, the pre-scan, each body by its kind
 * family's row, pd_codec_internal.h), the timing stamp and a finished
 * job's answer by its kind. The kinds' own messages are their family's
 * files: pd_codec_paths.c, pd_codec_move.c, pd_codec_scenes.c,
 * pd_codec_admin.c; what they share, pd_codec_common.c.
 *
 * Decoding trusts nothing protobuf-c hands back: it unpacks without any range
 * checks (enums keep whatever number arrived, strings whatever bytes), so every
 * field is validated here before a request reaches the layers above. Encoding
 * builds each Response on the stack, sizes it, and packs header + payload into
 * one malloc'd buffer per answer, so the net layer queues a single write.
 */
#include "pd_codec_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_frame.h"

/* ---- decoding ---------------------------------------------------------- */

/* Bytes of the decode arena's first block. A FindPath unpacks into a few
 * hundred bytes; requests that need more (avoid lists, batches, a map)
 * take malloc'd chunks for the rest. */
#define PD__ARENA_BYTES 16384u

/* Every arena allocation is aligned to this (max_align_t on x86-64). */
#define PD__ARENA_ALIGN 16u

/* Response's timing fields, as proto/pathd.proto numbers them
 * (pd_codec_stamp_timing writes them by hand; test_codec decodes them). */
#define PD__RESPONSE_SERVER_US_FIELD 5u
#define PD__RESPONSE_SEARCH_US_FIELD 6u

/* A chunk the arena took from malloc once its first block was full. */
typedef struct pd__arena_chunk {
    struct pd__arena_chunk *next;
    _Alignas(PD__ARENA_ALIGN) unsigned char data[];
} pd__arena_chunk;

/* What unpacking allocates - every sub-message, string and array of a
 * request - lives only until the request is copied into a pd_request, so it
 * comes from a bump allocator over a per-thread block instead of malloc,
 * and is given back all at once (pd__arena_reset) instead of by
 * free_unpacked's walk over the message. Memory is zeroed as it is handed
 * out: protobuf-c before 1.5.1 may read pointers of a half-built message on
 * its error path (protobuf-c #690), which must read NULL, never garbage. */
typedef struct pd__arena {
    _Alignas(PD__ARENA_ALIGN) unsigned char block[PD__ARENA_BYTES];
    size_t used;
    pd__arena_chunk *chunks;
} pd__arena;

static _Thread_local pd__arena pd__decode_arena;

static void *pd__arena_alloc(void *data, size_t size)
{
    pd__arena *a = data;
    size_t need = (size + PD__ARENA_ALIGN - 1) & ~(size_t)(PD__ARENA_ALIGN - 1);
    if (need >= size && need <= PD__ARENA_BYTES - a->used) {
        void *p = a->block + a->used;
        a->used += need;
        memset(p, 0, size);
        return p;
    }
    pd__arena_chunk *c = calloc(1, sizeof *c + size);
    if (c == NULL)
        return NULL;
    c->next = a->chunks;
    a->chunks = c;
    return c->data;
}

/* Nothing is given back one by one: pd__arena_reset releases it all. */
static void pd__arena_free(void *data, void *pointer)
{
    (void)data;
    (void)pointer;
}

static void pd__arena_reset(pd__arena *a)
{
    while (a->chunks) {
        pd__arena_chunk *next = a->chunks->next;
        free(a->chunks);
        a->chunks = next;
    }
    a->used = 0;
}

/* ---- the request's body, by its row ------------------------------------- */

/* Every family's rows, looked up by the Request's oneof case. */
static const pd__codec_row *const pd__families[] = {
    pd__codec_rows_paths,
    pd__codec_rows_move,
    pd__codec_rows_scenes,
    pd__codec_rows_admin,
};

static const pd__codec_row *pd__row_of_body(Pathd__V1__Request__BodyCase body_case)
{
    for (size_t f = 0; f < sizeof pd__families / sizeof pd__families[0]; f++)
        for (const pd__codec_row *row = pd__families[f]; row->body_case; row++)
            if (row->body_case == body_case)
                return row;
    return NULL;
}

static const pd__codec_row *pd__row_of_kind(pd_request_kind kind)
{
    for (size_t f = 0; f < sizeof pd__families / sizeof pd__families[0]; f++)
        for (const pd__codec_row *row = pd__families[f]; row->body_case; row++)
            if (row->kind == kind)
                return row;
    return NULL;
}

static pd_status pd__decode_body(const Pathd__V1__Request *m, pd_request *req, char *err, size_t errlen)
{
    const pd__codec_row *row = m->body_case ? pd__row_of_body(m->body_case) : NULL;
    if (!row) {
        /* Bodies added to the schema after this server (field numbers
         * it has no row for) arrive here as unknown fields; say so,
         * since the client likely is newer. */
        if (m->base.n_unknown_fields > 0)
            pd_set_err(err, errlen, "request has no body this server knows (newer client?)");
        else
            pd_set_err(err, errlen, "request has no body");
        return PD_INVALID_ARGUMENT;
    }
    req->kind = row->kind;
    return row->decode ? row->decode(m, row, req, err, errlen) : PD_OK;
}

/* ---- pre-scan: what unpacking would cost, before it is paid ----------- */

/* What the pre-scan learned about a frame. */
typedef struct pd__scan {
    uint64_t elements;        /* fields unpacking would allocate or store */
    uint64_t id;              /* Request.id, when the frame reached it */
    uint32_t body;            /* the last Request body (oneof) field number seen */
    int nul_string;           /* a string field holds a NUL byte */
    const char *nul_field;    /* its name */
} pd__scan;

/* Reads a base-128 varint; returns the bytes used, or 0 when it runs past
 * end or over ten bytes. */
static size_t pd__varint(const uint8_t *p, const uint8_t *end, uint64_t *out)
{
    uint64_t v = 0;
    for (size_t i = 0; i < 10 && p + i < end; i++) {
        v |= (uint64_t)(p[i] & 0x7Fu) << (7 * i);
        if (!(p[i] & 0x80u)) {
            *out = v;
            return i + 1;
        }
    }
    return 0;
}

/* Walks one message's wire bytes with its descriptor: counts every field
 * occurrence (known or not), descends into sub-messages, looks for NUL
 * bytes in strings (protobuf-c hands strings back NUL-terminated, so an
 * embedded NUL would silently cut a name short). Stops counting past cap.
 * Returns 0, or -1 when the bytes are not wire format at all (unpack will
 * say so). Depth is bounded by the schema, which has no recursion. */
static int pd__scan_message(const ProtobufCMessageDescriptor *d, const uint8_t *p, const uint8_t *end,
                            int top, uint64_t cap, pd__scan *sc)
{
    while (p < end && sc->elements <= cap) {
        uint64_t key, v;
        size_t n = pd__varint(p, end, &key);
        if (n == 0)
            return -1;
        p += n;
        uint32_t number = (uint32_t)(key >> 3);
        sc->elements++;
        switch (key & 7u) {
        case 0: /* varint */
            if ((n = pd__varint(p, end, &v)) == 0)
                return -1;
            if (top && number == 1)
                sc->id = v;
            p += n;
            break;
        case 1: /* 64-bit */
            if (end - p < 8)
                return -1;
            p += 8;
            break;
        case 5: /* 32-bit */
            if (end - p < 4)
                return -1;
            p += 4;
            break;
        case 2: { /* length-delimited */
            if ((n = pd__varint(p, end, &v)) == 0 || v > (uint64_t)((size_t)(end - p) - n))
                return -1;
            p += n;
            /* Only length-delimited fields need their descriptor (a
             * sub-message to descend into, a string to check). */
            const ProtobufCFieldDescriptor *f = d ? protobuf_c_message_descriptor_get_field(d, number) : NULL;
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
                if (top && (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF))
                    sc->body = number; /* a oneof: the last one wins, as unpack has it */
                if (pd__scan_message(f->descriptor, p, p + v, 0, cap, sc) != 0)
                    return -1;
            } else if (f && f->type == PROTOBUF_C_TYPE_STRING && memchr(p, 0, (size_t)v) && !sc->nul_string) {
                sc->nul_string = 1;
                sc->nul_field = f->name;
            }
            p += v;
            break;
        }
        default: /* groups (3, 4) and reserved types: protobuf-c refuses them */
            return -1;
        }
    }
    return 0;
}

/* The scan of a whole Request (pd__scan_message from its top). */
static int pd__prescan(const uint8_t *payload, size_t len, pd__scan *sc)
{
    return pd__scan_message(&pathd__v1__request__descriptor, payload, payload + len, 1, PD_CODEC_MAX_ELEMENTS, sc);
}

pd_status pd_codec_peek_request(const uint8_t *payload, size_t len, uint64_t *id, pd_request_kind *kind)
{
    pd__scan sc = {0};
    if (payload == NULL || pd__prescan(payload, len, &sc) != 0 || sc.elements > PD_CODEC_MAX_ELEMENTS ||
        sc.nul_string || sc.body == 0)
        return PD_INVALID_ARGUMENT;
    const pd__codec_row *row = pd__row_of_body((Pathd__V1__Request__BodyCase)sc.body);
    if (!row)
        return PD_INVALID_ARGUMENT;
    *id = sc.id;
    *kind = row->kind;
    return PD_OK;
}

/* A request whose body failed validation keeps only its id and kind (the
 * answer names them); whatever it had copied is freed. */
static pd_status pd__decode_finish(pd_status st, pd_request *req)
{
    if (st != PD_OK) {
        uint64_t id = req->id;
        pd_request_kind kind = req->kind;
        pd_request_free(req);
        memset(req, 0, sizeof *req);
        req->id = id;
        req->kind = kind;
    }
    return st;
}

pd_status pd_codec_decode_request(const uint8_t *payload, size_t len, pd_request *req,
                                  char *err, size_t errlen)
{
    /* The common FindPath read by hand (pd_codec_fast.c): no pre-scan is
     * needed, since the reader bounds what it takes itself (each field
     * once, no lists, no NUL in the name), and no unpack. Its message is
     * validated by the same body decoder as an unpacked one. */
    pd__fast_find_path f;
    if (pd__fast_unpack_find_path(payload, len, &f)) {
        memset(req, 0, sizeof *req);
        if (err != NULL && errlen > 0)
            err[0] = '\0';
        req->id = f.req.id;
        return pd__decode_finish(pd__decode_body(&f.req, req, err, errlen), req);
    }
    return pd_codec_decode_request_generic(payload, len, req, err, errlen);
}

int pd_codec_fast_path_takes(const uint8_t *payload, size_t len)
{
    pd__fast_find_path f;
    return pd__fast_unpack_find_path(payload, len, &f);
}

pd_status pd_codec_decode_request_generic(const uint8_t *payload, size_t len, pd_request *req,
                                          char *err, size_t errlen)
{
    static const uint8_t empty[1];
    Pathd__V1__Request *m;
    pd_status st;

    memset(req, 0, sizeof *req);
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    if (payload == NULL) {
        if (len > 0) {
            pd_set_err(err, errlen, "no payload bytes");
            return PD_MALFORMED;
        }
        payload = empty;
    }
    /* Unpacking allocates per element, on the loop thread: a frame of
     * half a million empty sub-messages would hold it for ~60 ms. Counted
     * first, in one pass that allocates nothing and stops at the first
     * element past the cap, and refused (structural: the connection
     * closes after the answer). */
    pd__scan sc = {0};
    if (pd__prescan(payload, len, &sc) == 0) {
        if (sc.elements > PD_CODEC_MAX_ELEMENTS) {
            req->id = sc.id;
            req->structural = 1;
            pd_set_err(err, errlen, "request holds more than %u fields and list elements (the limit)",
                        PD_CODEC_MAX_ELEMENTS);
            return PD_INVALID_ARGUMENT;
        }
        if (sc.nul_string) {
            req->id = sc.id;
            pd_set_err(err, errlen, "string field %s holds a NUL byte", sc.nul_field);
            return PD_INVALID_ARGUMENT;
        }
    }
    /* The element cap above bounds what unpack allocates from the arena;
     * pd__decode_body copies out whatever the request keeps. */
    ProtobufCAllocator arena = {pd__arena_alloc, pd__arena_free, &pd__decode_arena};
    m = pathd__v1__request__unpack(&arena, len, payload);
    if (m == NULL) {
        pd__arena_reset(&pd__decode_arena);
        pd_set_err(err, errlen, "frame is not a pathd.v1.Request");
        return PD_MALFORMED;
    }
    req->id = m->id;
    st = pd__decode_body(m, req, err, errlen);
    pd__arena_reset(&pd__decode_arena);
    return pd__decode_finish(st, req);
}

/* ---- encoding ---------------------------------------------------------- */

/* Appends varint field `field` of value v to out (proto3 leaves a zero
 * out); returns the bytes written, at most 11. */
static size_t pd__put_varint_field(uint8_t *out, uint32_t field, uint64_t v)
{
    if (v == 0)
        return 0;
    size_t n = 0;
    out[n++] = (uint8_t)(field << 3); /* wire type 0, varint; fields 5 and 6 fit a byte */
    for (; v >= 0x80; v >>= 7)
        out[n++] = (uint8_t)(v | 0x80);
    out[n++] = (uint8_t)v;
    return n;
}

void pd_codec_stamp_timing(uint8_t **buf, size_t *len, uint64_t server_us, uint64_t search_us)
{
    if (*buf == NULL || *len < PD_FRAME_HEADER_BYTES)
        return;
    /* Response.server_us (5) and search_us (6), written by hand: appended
     * to a packed Response they are merged into it, wherever its other
     * fields stand. protobuf-c's pack of a Response holding only them walked
     * every field of the message twice (size, then pack): about 2,000
     * instructions an answer (docs/BENCHMARKS.md, "Server cost"). */
    uint8_t extra[2 * 11];
    size_t n = pd__put_varint_field(extra, PD__RESPONSE_SERVER_US_FIELD, server_us);
    n += pd__put_varint_field(extra + n, PD__RESPONSE_SEARCH_US_FIELD, search_us);
    if (n == 0)
        return;
    size_t last = 0;
    for (size_t off = 0; off + PD_FRAME_HEADER_BYTES <= *len;) {
        last = off;
        off += PD_FRAME_HEADER_BYTES + pd_frame_get_header(*buf + off);
    }
    uint8_t *grown = realloc(*buf, *len + n);
    if (grown == NULL)
        return;
    memcpy(grown + *len, extra, n);
    pd_frame_put_header(grown + last, (uint32_t)(*len + n - last - PD_FRAME_HEADER_BYTES));
    *buf = grown;
    *len += n;
}

uint8_t *pd_codec_frame_with_id(uint64_t id, const uint8_t *body, size_t body_len, size_t *out_len)
{
    /* Response.id: field 1, varint (tag byte 0x08); proto3 leaves out 0. */
    uint8_t field[1 + 10];
    size_t n = 0;
    if (id != 0) {
        uint64_t v = id;
        field[n++] = 0x08;
        for (; v >= 0x80; v >>= 7)
            field[n++] = (uint8_t)(v | 0x80);
        field[n++] = (uint8_t)v;
    }
    *out_len = 0;
    uint8_t *buf = malloc(PD_FRAME_HEADER_BYTES + n + body_len);
    if (!buf)
        return NULL;
    pd_frame_put_header(buf, (uint32_t)(n + body_len));
    memcpy(buf + PD_FRAME_HEADER_BYTES, field, n);
    memcpy(buf + PD_FRAME_HEADER_BYTES + n, body, body_len);
    *out_len = PD_FRAME_HEADER_BYTES + n + body_len;
    return buf;
}

/* ---- a finished job's answer, by its kind --------------------------------- */

uint8_t *pd_codec_encode_job(const pd_job *job, size_t *out_len)
{
    *out_len = 0;
    const pd__codec_row *row = pd__row_of_kind(job->kind);
    return row && row->encode ? row->encode(job, out_len) : NULL;
}
