/*
 * test_frame.c - the length-prefixed frame reader (server/codec/pd_frame.h).
 *
 * Feeds bytes the way the net layer does (ask _space, write, _commit, drain
 * _next) and checks that frames come out whole and in order however the
 * bytes are split, that an oversized header is refused before the buffer
 * grows, and that the buffer stays bounded over a long connection.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pd_frame.h"

/* Appends bytes to the reader in pieces of at most `chunk` bytes (also
 * capped by what _space offers), as successive socket reads would. Frames
 * completed along the way are passed to on_frame. */
typedef void (*frame_fn)(const uint8_t *payload, size_t len, void *user);

static void feed(pd_frame_reader *r, const uint8_t *data, size_t n, size_t chunk, frame_fn on_frame,
                 void *user)
{
    size_t off = 0;
    while (off < n) {
        uint8_t *space;
        size_t avail;
        const uint8_t *payload;
        size_t len;
        pd_status st;
        size_t take;

        assert_int_equal(pd_frame_reader_space(r, chunk, &space, &avail), 0);
        assert_true(avail >= 1);
        assert_true(avail <= chunk);
        take = n - off < avail ? n - off : avail;
        memcpy(space, data + off, take);
        pd_frame_reader_commit(r, take);
        off += take;
        while ((st = pd_frame_reader_next(r, &payload, &len)) == PD_OK)
            on_frame(payload, len, user);
        assert_int_equal(st, PD_PARTIAL);
    }
}

/* Builds header + payload for a frame whose payload bytes are a pattern
 * derived from `tag`, so a test can tell frames apart and spot corruption. */
static size_t make_frame(uint8_t *out, uint32_t len, uint32_t tag)
{
    pd_frame_put_header(out, len);
    for (uint32_t i = 0; i < len; i++)
        out[PD_FRAME_HEADER_BYTES + i] = (uint8_t)(tag * 31u + i * 7u);
    return PD_FRAME_HEADER_BYTES + len;
}

static int pattern_ok(const uint8_t *payload, size_t len, uint32_t tag)
{
    for (size_t i = 0; i < len; i++)
        if (payload[i] != (uint8_t)(tag * 31u + i * 7u))
            return 0;
    return 1;
}

typedef struct collected {
    size_t count;
    uint32_t lens[64];
    uint32_t tags[64];
    int all_patterns_ok;
} collected;

static void collect(const uint8_t *payload, size_t len, void *user)
{
    collected *c = user;
    assert_true(c->count < 64);
    if (!pattern_ok(payload, len, c->tags[c->count]))
        c->all_patterns_ok = 0;
    c->lens[c->count] = (uint32_t)len;
    c->count++;
}

static void test_header_is_big_endian(void **state)
{
    uint8_t h[PD_FRAME_HEADER_BYTES];
    (void)state;
    pd_frame_put_header(h, 0x01020304u);
    assert_int_equal(h[0], 0x01);
    assert_int_equal(h[1], 0x02);
    assert_int_equal(h[2], 0x03);
    assert_int_equal(h[3], 0x04);
    pd_frame_put_header(h, 300);
    assert_int_equal(h[0], 0);
    assert_int_equal(h[1], 0);
    assert_int_equal(h[2], 1);
    assert_int_equal(h[3], 44);
}

static void test_empty_reader_has_no_frame(void **state)
{
    pd_frame_reader r;
    const uint8_t *payload = (const uint8_t *)"x";
    size_t len = 99;
    (void)state;
    pd_frame_reader_init(&r, 1024);
    assert_int_equal(pd_frame_reader_next(&r, &payload, &len), PD_PARTIAL);
    assert_null(payload);
    assert_int_equal(len, 0);
    assert_int_equal(pd_frame_reader_pending(&r), 0);
    pd_frame_reader_free(&r);
    pd_frame_reader_free(&r); /* freeing twice is harmless */
}

static void test_first_space_is_initial_buffer(void **state)
{
    pd_frame_reader r;
    uint8_t *space;
    size_t avail;
    (void)state;
    pd_frame_reader_init(&r, 1u << 20);
    assert_int_equal(pd_frame_reader_space(&r, 65536, &space, &avail), 0);
    assert_non_null(space);
    assert_int_equal(avail, PD_FRAME_INITIAL_BUFFER);
    assert_int_equal(r.cap, PD_FRAME_INITIAL_BUFFER);
    /* A smaller suggestion is honoured. */
    assert_int_equal(pd_frame_reader_space(&r, 10, &space, &avail), 0);
    assert_int_equal(avail, 10);
    pd_frame_reader_free(&r);
}

static void test_header_split_across_reads(void **state)
{
    uint8_t bytes[4 + 300];
    size_t n = make_frame(bytes, 300, 5);
    collected c = {.all_patterns_ok = 1};
    pd_frame_reader r;
    (void)state;
    c.tags[0] = 5;
    pd_frame_reader_init(&r, 1024);
    /* One byte per read: the header arrives in four pieces. */
    feed(&r, bytes, 3, 1, collect, &c);
    assert_int_equal(c.count, 0);
    assert_int_equal(pd_frame_reader_pending(&r), 3);
    feed(&r, bytes + 3, n - 4, 1, collect, &c);
    assert_int_equal(c.count, 0);
    feed(&r, bytes + n - 1, 1, 1, collect, &c);
    assert_int_equal(c.count, 1);
    assert_int_equal(c.lens[0], 300);
    assert_true(c.all_patterns_ok);
    assert_int_equal(pd_frame_reader_pending(&r), 0);
    pd_frame_reader_free(&r);
}

static void test_many_frames_in_one_read(void **state)
{
    uint8_t bytes[400];
    size_t n = 0;
    collected c = {.all_patterns_ok = 1};
    pd_frame_reader r;
    (void)state;
    for (uint32_t i = 0; i < 20; i++) {
        c.tags[i] = i;
        n += make_frame(bytes + n, i, i); /* lengths 0..19, 230 bytes in all */
    }
    assert_true(n <= PD_FRAME_INITIAL_BUFFER);
    pd_frame_reader_init(&r, 64);
    feed(&r, bytes, n, 65536, collect, &c);
    assert_int_equal(c.count, 20);
    for (uint32_t i = 0; i < 20; i++)
        assert_int_equal(c.lens[i], i);
    assert_true(c.all_patterns_ok);
    pd_frame_reader_free(&r);
}

static void test_zero_length_frame(void **state)
{
    pd_frame_reader r;
    uint8_t *space;
    size_t avail, len;
    const uint8_t *payload;
    uint8_t bytes[16];
    size_t n = make_frame(bytes, 0, 0);
    n += make_frame(bytes + n, 2, 9);
    (void)state;
    pd_frame_reader_init(&r, 1024);
    assert_int_equal(pd_frame_reader_space(&r, 0, &space, &avail), 0);
    memcpy(space, bytes, n);
    pd_frame_reader_commit(&r, n);
    assert_int_equal(pd_frame_reader_next(&r, &payload, &len), PD_OK);
    assert_non_null(payload);
    assert_int_equal(len, 0);
    assert_int_equal(pd_frame_reader_next(&r, &payload, &len), PD_OK);
    assert_int_equal(len, 2);
    assert_true(pattern_ok(payload, len, 9));
    assert_int_equal(pd_frame_reader_next(&r, &payload, &len), PD_PARTIAL);
    pd_frame_reader_free(&r);
}

static void test_frame_of_exactly_max_is_accepted(void **state)
{
    const uint32_t max = 5000;
    uint8_t *bytes = malloc(PD_FRAME_HEADER_BYTES + max);
    size_t n;
    collected c = {.all_patterns_ok = 1};
    pd_frame_reader r;
    (void)state;
    assert_non_null(bytes);
    n = make_frame(bytes, max, 3);
    c.tags[0] = 3;
    pd_frame_reader_init(&r, max);
    feed(&r, bytes, n, 1000, collect, &c);
    assert_int_equal(c.count, 1);
    assert_int_equal(c.lens[0], max);
    assert_true(c.all_patterns_ok);
    /* Header + payload is all it ever needed, and it gave that back. */
    assert_int_equal(r.cap, PD_FRAME_INITIAL_BUFFER);
    pd_frame_reader_free(&r);
    free(bytes);
}

static void test_buffer_never_exceeds_header_plus_max(void **state)
{
    const uint32_t max = 5000;
    uint8_t *bytes = malloc(PD_FRAME_HEADER_BYTES + max);
    size_t n, off = 0, largest = 0;
    pd_frame_reader r;
    const uint8_t *payload;
    size_t len;
    (void)state;
    assert_non_null(bytes);
    n = make_frame(bytes, max, 1);
    pd_frame_reader_init(&r, max);
    while (off < n) {
        uint8_t *space;
        size_t avail, take;
        assert_int_equal(pd_frame_reader_space(&r, 65536, &space, &avail), 0);
        take = n - off < avail ? n - off : avail;
        memcpy(space, bytes + off, take);
        pd_frame_reader_commit(&r, take);
        off += take;
        if (r.cap > largest)
            largest = r.cap;
        if (off < n)
            assert_int_equal(pd_frame_reader_next(&r, &payload, &len), PD_PARTIAL);
    }
    assert_int_equal(largest, PD_FRAME_HEADER_BYTES + max);
    assert_int_equal(pd_frame_reader_next(&r, &payload, &len), PD_OK);
    assert_int_equal(len, max);
    pd_frame_reader_free(&r);
    free(bytes);
}

/* Checks that a refused header leaves the buffer as it was: _next keeps
 * answering FRAME_TOO_LARGE and _space never grows the buffer for it. */
static void check_refused_without_growth(uint32_t max, uint32_t claimed)
{
    pd_frame_reader r;
    uint8_t *space;
    size_t avail, len;
    const uint8_t *payload;
    (void)payload;
    pd_frame_reader_init(&r, max);
    assert_int_equal(pd_frame_reader_space(&r, 65536, &space, &avail), 0);
    pd_frame_put_header(space, claimed);
    pd_frame_reader_commit(&r, PD_FRAME_HEADER_BYTES);
    assert_int_equal(pd_frame_reader_next(&r, &payload, &len), PD_FRAME_TOO_LARGE);
    assert_null(payload);
    assert_int_equal(r.cap, PD_FRAME_INITIAL_BUFFER);
    /* More bytes after the bad header do not make the buffer grow. */
    for (int i = 0; i < 4; i++) {
        if (pd_frame_reader_space(&r, 65536, &space, &avail) != 0)
            break;
        memset(space, 0xAB, avail);
        pd_frame_reader_commit(&r, avail);
    }
    assert_int_equal(r.cap, PD_FRAME_INITIAL_BUFFER);
    assert_int_equal(pd_frame_reader_space(&r, 65536, &space, &avail), -1);
    assert_int_equal(pd_frame_reader_next(&r, &payload, &len), PD_FRAME_TOO_LARGE);
    pd_frame_reader_free(&r);
}

static void test_cap_plus_one_refused_before_allocation(void **state)
{
    (void)state;
    check_refused_without_growth(1000, 1001);
    check_refused_without_growth(1u << 20, (1u << 20) + 1);
}

static void test_header_claiming_4_gib_refused(void **state)
{
    (void)state;
    check_refused_without_growth(1u << 20, 0xFFFFFFFFu);
}

static void test_refused_header_after_good_frames(void **state)
{
    uint8_t bytes[64];
    size_t n = make_frame(bytes, 10, 2), len;
    pd_frame_reader r;
    uint8_t *space;
    size_t avail;
    const uint8_t *payload;
    (void)state;
    pd_frame_put_header(bytes + n, 0x7FFFFFFFu);
    n += PD_FRAME_HEADER_BYTES;
    pd_frame_reader_init(&r, 100);
    assert_int_equal(pd_frame_reader_space(&r, 0, &space, &avail), 0);
    memcpy(space, bytes, n);
    pd_frame_reader_commit(&r, n);
    assert_int_equal(pd_frame_reader_next(&r, &payload, &len), PD_OK);
    assert_int_equal(len, 10);
    assert_true(pattern_ok(payload, len, 2));
    assert_int_equal(pd_frame_reader_next(&r, &payload, &len), PD_FRAME_TOO_LARGE);
    pd_frame_reader_free(&r);
}

/* Thousands of frames of mixed sizes, written back to back into one stream
 * and fed in reads of various sizes, so frames straddle reads and a read
 * holds several frames. Every frame must arrive intact and in order, and the
 * buffer must never grow past header + max_frame: consumed bytes are
 * compacted away rather than accumulated. */
typedef struct stream_check {
    uint32_t next_index;
    uint32_t bad;
    uint32_t modulo; /* frame i has length stream_len(i) % modulo */
} stream_check;

static uint32_t stream_len(uint32_t i)
{
    return (i * 2654435761u >> 7) % 1500u; /* 0..1499, well mixed */
}

static void stream_frame(const uint8_t *payload, size_t len, void *user)
{
    stream_check *s = user;
    if (len != stream_len(s->next_index) % s->modulo || !pattern_ok(payload, len, s->next_index))
        s->bad++;
    s->next_index++;
}

static uint8_t *build_stream(uint32_t frames, uint32_t modulo, size_t *total)
{
    size_t off = 0;
    uint8_t *stream;
    *total = 0;
    for (uint32_t i = 0; i < frames; i++)
        *total += PD_FRAME_HEADER_BYTES + stream_len(i) % modulo;
    stream = malloc(*total);
    assert_non_null(stream);
    for (uint32_t i = 0; i < frames; i++)
        off += make_frame(stream + off, stream_len(i) % modulo, i);
    return stream;
}

static void test_compaction_over_many_frames(void **state)
{
    const uint32_t frames = 5000, max = 1499;
    const size_t chunks[] = {1, 7, 333, 4096, 65536};
    size_t total;
    uint8_t *stream = build_stream(frames, max + 1, &total);
    (void)state;
    for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
        pd_frame_reader r;
        stream_check s = {0, 0, max + 1};
        size_t largest = 0;
        pd_frame_reader_init(&r, max);
        for (size_t off = 0; off < total; off += chunks[c]) {
            size_t piece = total - off < chunks[c] ? total - off : chunks[c];
            feed(&r, stream + off, piece, chunks[c], stream_frame, &s);
            if (r.cap > largest)
                largest = r.cap;
        }
        assert_int_equal(s.next_index, frames);
        assert_int_equal(s.bad, 0);
        assert_true(largest <= PD_FRAME_HEADER_BYTES + max);
        assert_int_equal(pd_frame_reader_pending(&r), 0);
        assert_int_equal(r.cap, PD_FRAME_INITIAL_BUFFER);
        pd_frame_reader_free(&r);
    }
    free(stream);
}

/* The same with random read sizes, and frames of exactly max_frame. */
static void test_random_splits_of_one_stream(void **state)
{
    const uint32_t frames = 2000, max = 900;
    size_t total, off = 0, largest = 0;
    uint8_t *stream = build_stream(frames, max + 1, &total);
    stream_check s = {0, 0, max + 1};
    pd_frame_reader r;
    uint32_t seed = 12345;
    (void)state;
    pd_frame_reader_init(&r, max);
    while (off < total) {
        size_t piece;
        seed = seed * 1103515245u + 12345u;
        piece = 1 + (seed >> 16) % 3000;
        if (piece > total - off)
            piece = total - off;
        feed(&r, stream + off, piece, 65536, stream_frame, &s);
        off += piece;
        if (r.cap > largest)
            largest = r.cap;
    }
    assert_int_equal(s.next_index, frames);
    assert_int_equal(s.bad, 0);
    assert_true(largest <= PD_FRAME_HEADER_BYTES + max);
    assert_int_equal(pd_frame_reader_pending(&r), 0);
    pd_frame_reader_free(&r);
    free(stream);
}

/* The same stream read the way the net layer reads it: into a lent shared
 * buffer whenever nothing is pending, else into the reader's own; whole
 * frames are taken out, then the reader settles. Every frame arrives
 * intact and in order, the reader's own buffer only ever holds a partial
 * frame, and once the stream has been read it holds nothing at all. */
static void test_lent_buffer_reads(void **state)
{
    const uint32_t frames = 2000, max = 900;
    size_t total, off = 0, largest = 0, lends = 0;
    uint8_t *stream = build_stream(frames, max + 1, &total);
    stream_check s = {0, 0, max + 1};
    static uint8_t shared[4096];
    pd_frame_reader r;
    uint32_t seed = 777;
    (void)state;
    pd_frame_reader_init(&r, max);
    while (off < total) {
        uint8_t *space;
        size_t avail;
        const uint8_t *payload;
        size_t len;
        pd_status st;
        if (pd_frame_reader_lend(&r, shared, sizeof shared) == 0) {
            space = shared;
            avail = sizeof shared;
            lends++;
        } else {
            assert_true(pd_frame_reader_pending(&r) > 0);
            assert_int_equal(pd_frame_reader_space(&r, 0, &space, &avail), 0);
        }
        seed = seed * 1103515245u + 12345u;
        size_t take = 1 + (seed >> 16) % 3000;
        if (take > avail)
            take = avail;
        if (take > total - off)
            take = total - off;
        memcpy(space, stream + off, take);
        pd_frame_reader_commit(&r, take);
        off += take;
        while ((st = pd_frame_reader_next(&r, &payload, &len)) == PD_OK)
            stream_frame(payload, len, &s);
        assert_int_equal(st, PD_PARTIAL);
        assert_int_equal(pd_frame_reader_settle(&r), 0);
        assert_false(r.lent);
        assert_true(pd_frame_reader_pending(&r) < PD_FRAME_HEADER_BYTES + max);
        if (pd_frame_reader_bytes(&r) > largest)
            largest = pd_frame_reader_bytes(&r);
    }
    assert_int_equal(s.next_index, frames);
    assert_int_equal(s.bad, 0);
    assert_true(lends > 0);
    assert_true(largest <= PD_FRAME_HEADER_BYTES + max);
    assert_int_equal(pd_frame_reader_pending(&r), 0);
    assert_int_equal(pd_frame_reader_bytes(&r), 0);
    /* Lending is refused while a partial frame waits. */
    uint8_t half[2] = {0, 0};
    assert_int_equal(pd_frame_reader_lend(&r, shared, sizeof shared), 0);
    memcpy(shared, half, sizeof half);
    pd_frame_reader_commit(&r, sizeof half);
    assert_int_equal(pd_frame_reader_settle(&r), 0);
    assert_int_equal(pd_frame_reader_pending(&r), 2);
    assert_int_equal(pd_frame_reader_lend(&r, shared, sizeof shared), -1);
    pd_frame_reader_free(&r);
    free(stream);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_is_big_endian),
        cmocka_unit_test(test_empty_reader_has_no_frame),
        cmocka_unit_test(test_first_space_is_initial_buffer),
        cmocka_unit_test(test_header_split_across_reads),
        cmocka_unit_test(test_many_frames_in_one_read),
        cmocka_unit_test(test_zero_length_frame),
        cmocka_unit_test(test_frame_of_exactly_max_is_accepted),
        cmocka_unit_test(test_buffer_never_exceeds_header_plus_max),
        cmocka_unit_test(test_cap_plus_one_refused_before_allocation),
        cmocka_unit_test(test_header_claiming_4_gib_refused),
        cmocka_unit_test(test_refused_header_after_good_frames),
        cmocka_unit_test(test_compaction_over_many_frames),
        cmocka_unit_test(test_random_splits_of_one_stream),
        cmocka_unit_test(test_lent_buffer_reads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
