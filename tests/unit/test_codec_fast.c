/*
 * test_codec_fast.c - the hand-written FindPath reader (server/codec/
 * pd_codec_fast.c) against protobuf-c's unpack, on random FindPath
 * requests packed by protobuf-c as a client would, on mutations of them
 * (bytes flipped, cut, inserted, fields repeated) and on hand-made frames
 * that protobuf-c reads in its own way (over-long varints, a bool whose only
 * set bit is the tenth byte's, negative cells). Every frame must decode to
 * the same status, reason and fields either way (codec_decode_same.h), and
 * the plain requests - the ones the reader exists for - must take it.
 * Also the hand-written packer of path answers (pd_codec_pack_path.c):
 * byte for byte what protobuf-c packs, on random answers.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pathd.pb-c.h"
#include "codec_decode_same.h"
#include "codec_wire.h"
#include "pd_codec_internal.h"

/* A fixed-seed generator: the same frames on every run. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static uint32_t rnd_below(uint32_t n)
{
    return (uint32_t)(rnd() % n);
}

static int32_t rnd_int32(void)
{
    static const int32_t edge[] = {0, 1, -1, 5, 63, 64, 1000, INT32_MIN, INT32_MAX, -100000};
    return rnd_below(3) ? (int32_t)rnd_below(128) : edge[rnd_below(sizeof edge / sizeof edge[0])];
}

static double rnd_double(void)
{
    static const double edge[] = {0.0, 1.5, -1.0, 200.0, 64.0, 1e300, -0.0};
    switch (rnd_below(8)) {
    case 0: return NAN;
    case 1: return INFINITY;
    case 2: return -INFINITY;
    case 3: return (double)rnd_below(1000) / 7.0;
    default: return edge[rnd_below(sizeof edge / sizeof edge[0])];
    }
}

static uint64_t rnd_u64(void)
{
    switch (rnd_below(4)) {
    case 0: return 0;
    case 1: return rnd_below(100000);
    case 2: return rnd();
    default: return (uint64_t)1 << rnd_below(64);
    }
}

static uint32_t rnd_u32(void)
{
    static const uint32_t edge[] = {0, 1, 2, 3, 4, 8, 9, 250, 600000, 600001, 0xFFFFFFFFu, 0x80000000u};
    return edge[rnd_below(sizeof edge / sizeof edge[0])];
}

/* Storage for one random request's sub-messages. */
typedef struct rand_msg {
    Pathd__V1__Request req;
    Pathd__V1__FindPath fp;
    Pathd__V1__Point pts[2 + 3];
    Pathd__V1__Point *goals[3];
    Pathd__V1__Cell cells[2 + 3 + 4 + 2];
    Pathd__V1__Cell *avoid[4];
    Pathd__V1__WorldPoint worlds[2 + 3];
    Pathd__V1__Rect window;
    int plain; /* what the hand-written reader should take */
} rand_msg;

static void rand_point(rand_msg *r, int i, Pathd__V1__Point **out)
{
    Pathd__V1__Point *p = &r->pts[i];
    *p = (Pathd__V1__Point)PATHD__V1__POINT__INIT;
    switch (rnd_below(6)) {
    case 0: /* absent */
        *out = NULL;
        return;
    case 1: /* present but empty */
        break;
    case 2:
        r->worlds[i] = (Pathd__V1__WorldPoint)PATHD__V1__WORLD_POINT__INIT;
        r->worlds[i].x = rnd_double();
        r->worlds[i].y = rnd_double();
        p->kind_case = PATHD__V1__POINT__KIND_WORLD;
        p->world = &r->worlds[i];
        break;
    default:
        r->cells[i] = (Pathd__V1__Cell)PATHD__V1__CELL__INIT;
        r->cells[i].x = rnd_int32();
        r->cells[i].y = rnd_int32();
        p->kind_case = PATHD__V1__POINT__KIND_CELL;
        p->cell = &r->cells[i];
        break;
    }
    *out = p;
}

/* Half the requests are drawn from valid values only (the decoder accepts
 * most of them), half from edges too (it refuses most). */
static void rand_find_path(rand_msg *r)
{
    const int sane = rnd_below(2) == 0;
    static const char *const scenes[] = {
        "den520d", "open", "", "a", "a-very-long-scene-name-that-is-just-under-the-sixty-four-limit-x",
        "a-scene-name-that-is-over-the-sixty-four-byte-limit-of-pathd-scenes", "caf\xc3\xa9", "bad\x01name",
        "\xff\xfe", "tab\tname", "del\x7f",
    };
    Pathd__V1__FindPath *m = &r->fp;
    memset(r, 0, sizeof *r);
    *m = (Pathd__V1__FindPath)PATHD__V1__FIND_PATH__INIT;
    r->plain = 1;
    m->scene = (char *)scenes[sane ? rnd_below(2) : rnd_below(sizeof scenes / sizeof scenes[0])];
    for (const char *c = m->scene; *c; c++)
        if ((unsigned char)*c > 0x7F)
            r->plain = 0;
    if (strlen(m->scene) >= PD_CONF_MAX_NAME)
        r->plain = 0;
    rand_point(r, 0, &m->start);
    rand_point(r, 1, &m->goal);
    if (sane) {
        r->cells[0] = (Pathd__V1__Cell){PROTOBUF_C_MESSAGE_INIT(&pathd__v1__cell__descriptor), (int32_t)rnd_below(64), (int32_t)rnd_below(64)};
        r->cells[1] = (Pathd__V1__Cell){PROTOBUF_C_MESSAGE_INIT(&pathd__v1__cell__descriptor), (int32_t)rnd_below(64), (int32_t)rnd_below(64)};
        for (int i = 0; i < 2; i++) {
            r->pts[i] = (Pathd__V1__Point)PATHD__V1__POINT__INIT;
            r->pts[i].kind_case = PATHD__V1__POINT__KIND_CELL;
            r->pts[i].cell = &r->cells[i];
        }
        m->start = &r->pts[0];
        m->goal = &r->pts[1];
    }
    m->unit_size = rnd_below(2) ? 0 : rnd_u32();
    m->connectivity = (Pathd__V1__Connectivity)(rnd_below(3) ? (int)rnd_below(9) : (int)rnd_int32());
    m->max_expansions = rnd_u64();
    m->deadline_ms = rnd_below(2) ? 0 : rnd_u32();
    m->style = (Pathd__V1__WaypointStyle)(rnd_below(3) ? (int)rnd_below(4) : (int)rnd_int32());
    m->goal_mode = (Pathd__V1__GoalMode)(rnd_below(3) ? (int)rnd_below(4) : (int)rnd_int32());
    m->snap = rnd_below(2);
    m->partial_on_cutoff = rnd_below(2);
    m->speed = rnd_below(2) ? 0 : rnd_double();
    m->start_time = rnd_below(2) ? 0 : rnd_double();
    m->range = rnd_below(2) ? 0 : rnd_double();
    m->line_of_sight = rnd_below(3) == 0;
    m->want_world = rnd_below(2);
    m->min_version = rnd_below(2) ? 0 : rnd_u64();
    m->avoid_reserved = rnd_below(4) == 0;
    if (sane) {
        m->unit_size = rnd_below(3);
        m->connectivity = (Pathd__V1__Connectivity)(rnd_below(3) * 4);
        m->deadline_ms = rnd_below(2) ? 0 : rnd_below(600001);
        m->style = (Pathd__V1__WaypointStyle)rnd_below(3);
        m->goal_mode = (Pathd__V1__GoalMode)rnd_below(3);
        m->speed = rnd_below(2) ? 0 : (double)rnd_below(100) / 8.0;
        m->start_time = rnd_below(2) ? 0 : (double)rnd_below(1000) / 3.0;
        m->range = rnd_below(2) ? 0 : (double)rnd_below(1025) / 8.0;
        m->line_of_sight = m->range > 0 && rnd_below(2);
    }
    if (!sane && rnd_below(3) == 0) { /* goals: the generic path's */
        m->n_goals = 1 + rnd_below(3);
        for (size_t i = 0; i < m->n_goals; i++) {
            rand_point(r, 2 + (int)i, &r->goals[i]);
            if (r->goals[i] == NULL)
                r->goals[i] = &r->pts[2 + i]; /* a repeated field holds no NULL */
        }
        m->goals = r->goals;
        r->plain = 0;
    }
    if (rnd_below(6) == 0) { /* avoid */
        m->n_avoid = 1 + rnd_below(4);
        for (size_t i = 0; i < m->n_avoid; i++) {
            r->cells[5 + i] = (Pathd__V1__Cell)PATHD__V1__CELL__INIT;
            r->cells[5 + i].x = rnd_int32();
            r->cells[5 + i].y = rnd_int32();
            r->avoid[i] = &r->cells[5 + i];
        }
        m->avoid = r->avoid;
        r->plain = 0;
    }
    if (rnd_below(8) == 0) { /* window */
        r->window = (Pathd__V1__Rect)PATHD__V1__RECT__INIT;
        r->cells[9] = (Pathd__V1__Cell)PATHD__V1__CELL__INIT;
        r->cells[10] = (Pathd__V1__Cell)PATHD__V1__CELL__INIT;
        r->cells[10].x = rnd_int32();
        r->cells[10].y = rnd_int32();
        r->window.min = &r->cells[9];
        r->window.max = &r->cells[10];
        m->window = &r->window;
        r->plain = 0;
    }
    r->req = (Pathd__V1__Request)PATHD__V1__REQUEST__INIT;
    r->req.id = rnd_u64();
    r->req.body_case = PATHD__V1__REQUEST__BODY_FIND_PATH;
    r->req.find_path = m;
}

static void expect_same(const uint8_t *buf, size_t len, int *fast)
{
    char why[768];
    if (!decode_same(buf, len, fast, why, sizeof why)) {
        char hex[3 * 64 + 1] = "";
        for (size_t i = 0; i < len && i < 64; i++)
            snprintf(hex + 3 * i, 4, "%02x ", buf[i]);
        fail_msg("%zu-byte frame [%s]: %s", len, hex, why);
    }
}

/* Random requests as protobuf-c packs them: the plain ones take the
 * hand-written reader, and every one decodes the same either way. */
static void test_random_requests_decode_the_same(void **state)
{
    (void)state;
    size_t taken = 0, plain = 0, accepted = 0;
    for (int i = 0; i < 20000; i++) {
        rand_msg r;
        rand_find_path(&r);
        size_t len;
        uint8_t *buf = wire_pack_request(&r.req, &len);
        int fast;
        expect_same(buf, len, &fast);
        if (fast != r.plain)
            fail_msg("request %d: the hand-written reader %s a %s request", i, fast ? "took" : "left",
                     r.plain ? "plain" : "listed or non-ASCII");
        pd_request req;
        char err[256];
        if (pd_codec_decode_request(buf, len, &req, err, sizeof err) == PD_OK)
            accepted++;
        pd_request_free(&req);
        taken += (size_t)fast;
        plain += (size_t)r.plain;
        free(buf);
    }
    print_message("%zu of 20000 taken by hand (%zu plain), %zu accepted\n", taken, plain, accepted);
    /* Both accepted and refused requests are compared, not only one kind. */
    assert_true(accepted > 1000 && accepted < 19000);
}

/* Mutations: what a broken or hostile client sends. */
static void test_mutated_requests_decode_the_same(void **state)
{
    (void)state;
    size_t taken = 0;
    for (int i = 0; i < 20000; i++) {
        rand_msg r;
        rand_find_path(&r);
        size_t len;
        uint8_t *orig = wire_pack_request(&r.req, &len);
        uint8_t *buf = malloc(2 * len + 16);
        assert_non_null(buf);
        for (int k = 0; k < 8; k++) {
            size_t n = len;
            memcpy(buf, orig, len);
            switch (rnd_below(6)) {
            case 0: /* one byte set at random */
                if (n)
                    buf[rnd_below((uint32_t)n)] = (uint8_t)rnd();
                break;
            case 1: /* one bit flipped */
                if (n)
                    buf[rnd_below((uint32_t)n)] ^= (uint8_t)(1u << rnd_below(8));
                break;
            case 2: /* cut short */
                n = n ? rnd_below((uint32_t)n) : 0;
                break;
            case 3: { /* a byte inserted */
                size_t at = rnd_below((uint32_t)n + 1);
                memmove(buf + at + 1, buf + at, n - at);
                buf[at] = (uint8_t)rnd();
                n++;
                break;
            }
            case 4: /* the whole frame twice: every field repeated, merged by protobuf-c */
                memcpy(buf + n, orig, len);
                n += len;
                break;
            default: { /* a stretch repeated */
                size_t at = rnd_below((uint32_t)n + 1), run = rnd_below((uint32_t)(n - at) + 1);
                memmove(buf + at + run, buf + at, n - at);
                n += run;
                break;
            }
            }
            int fast;
            expect_same(buf, n, &fast);
            taken += (size_t)fast;
        }
        free(buf);
        free(orig);
    }
    print_message("%zu of 160000 mutants taken by hand\n", taken);
    assert_true(taken > 0);
}

/* Frames protobuf-c reads in ways a quick reader could get wrong. */
static void test_hand_made_frames_decode_the_same(void **state)
{
    (void)state;
    /* Request{id=7, find_path{scene "a", start cell(1,2), goal cell(3,4) ...}} with the
     * tail varied. 0x52 = field 10, length-delimited. */
    static const struct {
        const char *what;
        uint8_t bytes[64];
        size_t len;
        int fast;
    } cases[] = {
        {"plain", {0x08, 7, 0x52, 15, 0x0a, 1, 'a', 0x12, 4, 0x0a, 2, 0x08, 1, 0x1a, 4, 0x0a, 2, 0x08, 3}, 19, 1},
        {"negative cell x in ten bytes",
         {0x52, 22, 0x0a, 1, 'a', 0x12, 13, 0x0a, 11, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
          0x01, 0x1a, 2, 0x0a, 0},
         24, 1},
        {"cell x over 32 bits: the low 32 kept",
         {0x52, 17, 0x0a, 1, 'a', 0x12, 8, 0x0a, 6, 0x08, 0x81, 0x80, 0x80, 0x80, 0x10, 0x1a, 2, 0x0a, 0},
         19, 1},
        {"snap whose only set bit is past 64 bits",
         {0x52, 22, 0x0a, 1, 'a', 0x50, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02, 0x12, 2, 0x0a,
          0, 0x1a, 2, 0x0a, 0},
         24, 1},
        {"id tag in two bytes (0x88 0x00)", {0x88, 0x00, 9, 0x52, 3, 0x0a, 1, 'a'}, 8, 1},
        {"varint of eleven bytes",
         {0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0x52, 0}, 14, 0},
        {"tag byte with field 0", {0x00, 0x52, 0}, 3, 0},
        {"find_path twice (protobuf-c merges)", {0x52, 3, 0x0a, 1, 'a', 0x52, 2, 0x20, 2}, 9, 0},
        {"scene with a NUL", {0x52, 4, 0x0a, 2, 'a', 0}, 6, 0},
        {"speed as a varint (wrong wire type)", {0x52, 5, 0x0a, 1, 'a', 0x60, 1}, 7, 0},
        {"point with both cell and world", {0x52, 18, 0x0a, 1, 'a', 0x12, 13, 0x0a, 0, 0x12, 9, 0x09, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f}, 20, 0},
        {"unknown field 99 in FindPath", {0x52, 6, 0x0a, 1, 'a', 0x98, 0x06, 0x01}, 8, 0},
        {"length past the end", {0x52, 9, 0x0a, 1, 'a'}, 5, 0},
        {"empty frame", {0}, 0, 0},
        {"id only", {0x08, 5}, 2, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int fast;
        char why[768];
        if (!decode_same(cases[i].bytes, cases[i].len, &fast, why, sizeof why))
            fail_msg("%s: %s", cases[i].what, why);
        if (fast != cases[i].fast)
            fail_msg("%s: the hand-written reader %s it", cases[i].what, fast ? "took" : "left");
    }
    /* The negative cell kept its sign, and the bool past 64 bits read true. */
    pd_request req;
    char err[256];
    assert_int_equal(pd_codec_decode_request(cases[1].bytes, cases[1].len, &req, err, sizeof err), PD_OK);
    assert_int_equal(req.u.find_path.start.cell.x, -1);
    pd_request_free(&req);
    assert_int_equal(pd_codec_decode_request(cases[2].bytes, cases[2].len, &req, err, sizeof err), PD_OK);
    assert_int_equal(req.u.find_path.start.cell.x, 1);
    pd_request_free(&req);
    assert_int_equal(pd_codec_decode_request(cases[3].bytes, cases[3].len, &req, err, sizeof err), PD_OK);
    assert_true(req.u.find_path.snap);
    pd_request_free(&req);
}

/* A random path answer, as pd__fill_path_chunk could fill it and beyond
 * (negative cells and statuses, -0.0, empty and long arrays). */
static void test_path_pack_matches_protobuf_c(void **state)
{
    (void)state;
    enum { MAXN = 300 };
    static int32_t dx[MAXN], dy[MAXN];
    static double t[MAXN], wx[MAXN], wy[MAXN];
    static uint8_t mine[48 * MAXN + 512], theirs[48 * MAXN + 512];
    static const char *const messages[] = {NULL, "", "no path: the goal is walled in", "caf\xc3\xa9"};
    size_t with_points = 0;
    for (int i = 0; i < 20000; i++) {
        Pathd__V1__Response resp = PATHD__V1__RESPONSE__INIT;
        Pathd__V1__PathChunk chunk = PATHD__V1__PATH_CHUNK__INIT;
        Pathd__V1__Waypoints w = PATHD__V1__WAYPOINTS__INIT;
        Pathd__V1__Cell su = PATHD__V1__CELL__INIT, gu = PATHD__V1__CELL__INIT;
        resp.id = rnd_u64();
        resp.status = (Pathd__V1__Status)(rnd_below(4) ? (int)rnd_below(40) : (int)rnd_int32());
        resp.final = rnd_below(2);
        resp.message = (char *)messages[rnd_below(4)];
        resp.server_us = rnd_below(2) ? 0 : rnd_u64();
        resp.search_us = rnd_below(2) ? 0 : rnd_u64();
        resp.body_case = PATHD__V1__RESPONSE__BODY_PATH;
        resp.path = &chunk;
        chunk.seq = rnd_below(2) ? 0 : rnd_u32();
        chunk.cost = rnd_below(4) ? rnd_double() : -0.0;
        chunk.expansions = rnd_u64();
        chunk.search_micros = rnd_u64();
        chunk.scene_version = rnd_u64();
        chunk.total_waypoints = rnd_u32();
        chunk.cutoff = (Pathd__V1__Status)(rnd_below(3) ? (int)rnd_below(40) : (int)rnd_int32());
        chunk.goal_index = rnd_below(2) ? 0 : rnd_u32();
        if (rnd_below(3) == 0) {
            su.x = rnd_int32();
            su.y = rnd_int32();
            chunk.start_used = &su;
        }
        if (rnd_below(3) == 0) {
            gu.x = rnd_int32();
            gu.y = rnd_int32();
            chunk.goal_used = &gu;
        }
        if (rnd_below(5)) {
            size_t n = rnd_below(4) ? rnd_below(40) : rnd_below(MAXN + 1);
            for (size_t k = 0; k < n; k++) {
                dx[k] = rnd_below(3) ? (int32_t)rnd_below(3) - 1 : rnd_int32();
                dy[k] = rnd_below(3) ? (int32_t)rnd_below(3) - 1 : rnd_int32();
                t[k] = rnd_double();
                wx[k] = rnd_double();
                wy[k] = rnd_double();
            }
            w.n_dx = w.n_dy = n;
            w.dx = dx;
            w.dy = dy;
            if (rnd_below(3) == 0) {
                w.n_t = n;
                w.t = t;
            }
            if (rnd_below(3) == 0) {
                w.n_wx = w.n_wy = n;
                w.wx = wx;
                w.wy = wy;
            }
            chunk.points = &w;
            with_points += n > 0;
        }
        assert_true(pd__path_pack_takes(&resp));
        size_t want = pathd__v1__response__get_packed_size(&resp);
        assert_true(want <= sizeof theirs);
        pd__path_sizes sizes;
        assert_int_equal(pd__path_pack_size(&resp, &sizes), want);
        assert_int_equal(pathd__v1__response__pack(&resp, theirs), want);
        assert_int_equal(pd__path_pack(&resp, &sizes, mine), want);
        if (memcmp(mine, theirs, want) != 0) {
            size_t at = 0;
            while (mine[at] == theirs[at])
                at++;
            fail_msg("answer %d: %zu bytes, the first difference at byte %zu (%02x by hand, %02x by protobuf-c)", i,
                     want, at, mine[at], theirs[at]);
        }
    }
    assert_true(with_points > 1000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_requests_decode_the_same),
        cmocka_unit_test(test_mutated_requests_decode_the_same),
        cmocka_unit_test(test_hand_made_frames_decode_the_same),
        cmocka_unit_test(test_path_pack_matches_protobuf_c),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
