/*
 * test_codec.c - protobuf <-> server structs (server/codec/pd_codec.h).
 *
 * Requests are built with the generated protobuf-c API, as a client would,
 * and fed to pd_codec_decode_request: every kind must round-trip and every
 * out-of-range field must be refused with INVALID_ARGUMENT and a reason.
 * Answers produced by the pd_codec_encode_* functions are split into frames
 * and unpacked with protobuf-c again, so the tests check what a client
 * actually receives.
 */
#define _GNU_SOURCE /* memmem */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pathd.pb-c.h"
#include "pd_codec.h"
#include "codec_wire.h"
#include "pd_frame.h"

/* One answer's inputs as the encode tests build them: the request id, the
 * scene and every result field the three job encoders read. */
typedef enum { ANSWER_FIND_PATH, ANSWER_UPDATE_CELLS, ANSWER_FIND_ROUTE } answer_kind;
typedef struct answer_in {
    answer_kind kind;
    uint64_t request_id;
    pd_scene *scene;
    pd_status status;
    pd_search_metrics metrics;
    pd_point *path;
    size_t path_len;
    double *times;
    int start_substituted, goal_substituted;
    pd_point start_used, goal_used;
    char update_scene[PD_CONF_MAX_NAME];
    pd_scene_update_result update_result;
    pd_route_leg *legs;
    size_t n_legs;
    int route_pinned;
    int want_world;              /* encode world coordinates too */
} answer_in;

/* One waypoint of a frame's packed arrays, decoded as a client does:
 * running sums over the deltas from the frame's absolute first cell. */
typedef struct wp {
    int32_t x, y;
    double wx, wy, t;
} wp;

static size_t wp_count(const Pathd__V1__Waypoints *m)
{
    if (m == NULL)
        return 0;
    assert_int_equal(m->n_dy, m->n_dx);
    assert_true(m->n_t == 0 || m->n_t == m->n_dx);
    assert_true(m->n_wx == 0 || m->n_wx == m->n_dx);
    assert_int_equal(m->n_wy, m->n_wx);
    return m->n_dx;
}

static wp wp_at(const Pathd__V1__Waypoints *m, size_t k)
{
    wp w = {0, 0, 0, 0, 0};
    for (size_t i = 0; i <= k; i++) {
        w.x += m->dx[i];
        w.y += m->dy[i];
    }
    if (m->n_wx) {
        w.wx = m->wx[k];
        w.wy = m->wy[k];
    }
    if (m->n_t)
        w.t = m->t[k];
    return w;
}

static uint8_t *encode_path(const answer_in *job, uint32_t per_chunk, size_t *len)
{
    pd_path_result r = {
        .status = job->status, .metrics = job->metrics, .path = job->path, .path_len = job->path_len,
        .times = job->times, .start_substituted = job->start_substituted, .start_used = job->start_used,
        .goal_substituted = job->goal_substituted, .goal_used = job->goal_used,
    };
    return pd_codec_encode_path(job->request_id, job->scene, &r, per_chunk, job->want_world, len);
}

static uint8_t *encode_route(const answer_in *job, uint32_t per_chunk, size_t *len)
{
    pd_route_result r = {
        .status = job->status, .metrics = job->metrics, .legs = job->legs, .n_legs = job->n_legs,
        .pinned = job->route_pinned, .goal_substituted = job->goal_substituted, .goal_used = job->goal_used,
    };
    return pd_codec_encode_route(job->request_id, &r, per_chunk, job->want_world, len);
}

static uint8_t *encode_update(const answer_in *job, size_t *len)
{
    pd_update_outcome o = {.status = job->status, .update = job->update_result};
    return pd_codec_encode_update(job->request_id, job->update_scene, &o, len);
}

#define TEST_ID 42u

/* ---- helpers ----------------------------------------------------------- */

/* A valid FindPath request; tests break one field at a time. The struct
 * points into itself, so it is initialised in place and never copied. */
typedef struct find_path_msg {
    Pathd__V1__Request req;
    Pathd__V1__FindPath fp;
    Pathd__V1__Point start, goal;
    Pathd__V1__Cell start_cell;
    Pathd__V1__WorldPoint goal_world;
} find_path_msg;

static void find_path_init(find_path_msg *m)
{
    pathd__v1__request__init(&m->req);
    pathd__v1__find_path__init(&m->fp);
    pathd__v1__point__init(&m->start);
    pathd__v1__point__init(&m->goal);
    pathd__v1__cell__init(&m->start_cell);
    pathd__v1__world_point__init(&m->goal_world);
    m->start_cell.x = 3;
    m->start_cell.y = -7;
    m->start.kind_case = PATHD__V1__POINT__KIND_CELL;
    m->start.cell = &m->start_cell;
    m->goal_world.x = 12.75;
    m->goal_world.y = -300.5;
    m->goal.kind_case = PATHD__V1__POINT__KIND_WORLD;
    m->goal.world = &m->goal_world;
    m->fp.scene = "town";
    m->fp.start = &m->start;
    m->fp.goal = &m->goal;
    m->fp.unit_size = 2;
    m->fp.connectivity = PATHD__V1__CONNECTIVITY__CONNECTIVITY_4;
    m->fp.max_expansions = 123456789012ull;
    m->fp.deadline_ms = 250;
    m->fp.style = PATHD__V1__WAYPOINT_STYLE__STYLE_CORNERS;
    m->req.id = TEST_ID;
    m->req.body_case = PATHD__V1__REQUEST__BODY_FIND_PATH;
    m->req.find_path = &m->fp;
}

/* Decodes m and expects INVALID_ARGUMENT naming `needle` in the reason, with
 * the request id kept so the answer can be matched. */
static void expect_invalid(const Pathd__V1__Request *m, const char *needle)
{
    pd_request req;
    char err[256];
    pd_status st = wire_decode_request(m, &req, err, sizeof err);
    if (st != PD_INVALID_ARGUMENT) {
        pd_request_free(&req);
        fail_msg("expected INVALID_ARGUMENT naming \"%s\", got %s (\"%s\")", needle, pd_status_name(st), err);
    }
    assert_int_equal(req.id, m->id);
    if (strstr(err, needle) == NULL)
        fail_msg("reason \"%s\" does not mention \"%s\"", err, needle);
}

static pd_status decode_find_path(find_path_msg *m, pd_request *req)
{
    char err[256];
    pd_status st = wire_decode_request(&m->req, req, err, sizeof err);
    if (st != PD_OK)
        print_message("decode: %s\n", err);
    return st;
}

/* Splits an encoder's output into frames and unpacks each as a Response. */
#define MAX_FRAMES 16
typedef struct frames {
    size_t n;
    Pathd__V1__Response *r[MAX_FRAMES];
    size_t payload_len[MAX_FRAMES];
} frames;

static void unpack_frames(const uint8_t *buf, size_t len, frames *out)
{
    size_t off = 0;
    assert_non_null(buf);
    memset(out, 0, sizeof *out);
    while (off < len) {
        uint32_t n;
        assert_true(len - off >= PD_FRAME_HEADER_BYTES);
        n = ((uint32_t)buf[off] << 24) | ((uint32_t)buf[off + 1] << 16) | ((uint32_t)buf[off + 2] << 8) |
            buf[off + 3];
        off += PD_FRAME_HEADER_BYTES;
        assert_true(len - off >= n);
        assert_true(out->n < MAX_FRAMES);
        out->r[out->n] = pathd__v1__response__unpack(NULL, n, buf + off);
        assert_non_null(out->r[out->n]);
        out->payload_len[out->n] = n;
        out->n++;
        off += n;
    }
    assert_int_equal(off, len);
}

static void free_frames(frames *f)
{
    for (size_t i = 0; i < f->n; i++)
        pathd__v1__response__free_unpacked(f->r[i], NULL);
    f->n = 0;
}

/* A scene built by hand: 40 x 30 cells at a negative origin with half-unit
 * cells, so world centres exercise both signs and the fraction. */
typedef struct scene_fixture {
    pd_scene scene;
    uint64_t passable;
} scene_fixture;

static void scene_fixture_init(scene_fixture *f, const char *name, int32_t w, int32_t h)
{
    memset(f, 0, sizeof *f);
    atomic_init(&f->scene.refs, 1);
    strcpy(f->scene.name, name);
    f->scene.grid = pd_grid_create(w, h);
    assert_non_null(f->scene.grid);
    for (int32_t y = 0; y < h; y++)
        for (int32_t x = 0; x < w; x++)
            if ((x * 7 + y * 3) % 5 != 0) {
                pd_grid_set(f->scene.grid, x, y, (uint8_t)(1 + (x + y) % 3));
                f->passable++;
            }
    f->scene.origin_x = -10.5;
    f->scene.origin_y = -20.0;
    f->scene.cell_size = 0.5;
    f->scene.unit_sizes[0] = 1;
    f->scene.unit_sizes[1] = 2;
    f->scene.n_unit_sizes = 2;
    f->scene.version = 7;
    f->scene.passable_cells = f->passable; /* as pd_scene_load would count it */
}

static void scene_fixture_free(scene_fixture *f)
{
    pd_grid_destroy(f->scene.grid);
    f->scene.grid = NULL;
}

/* ---- decode: round trips ---------------------------------------------- */

static void test_decode_find_path_round_trip(void **state)
{
    find_path_msg m;
    pd_request req;
    (void)state;
    find_path_init(&m);
    assert_int_equal(decode_find_path(&m, &req), PD_OK);
    assert_int_equal(req.id, TEST_ID);
    assert_int_equal(req.kind, PD_REQ_FIND_PATH);
    assert_string_equal(req.u.find_path.scene, "town");
    assert_int_equal(req.u.find_path.start.is_world, 0);
    assert_int_equal(req.u.find_path.start.cell.x, 3);
    assert_int_equal(req.u.find_path.start.cell.y, -7);
    assert_int_equal(req.u.find_path.goal.is_world, 1);
    assert_true(req.u.find_path.goal.wx == 12.75);
    assert_true(req.u.find_path.goal.wy == -300.5);
    assert_int_equal(req.u.find_path.unit_size, 2);
    assert_int_equal(req.u.find_path.connectivity, PD_CONNECT_4);
    assert_int_equal(req.u.find_path.max_expansions, 123456789012ull);
    assert_int_equal(req.u.find_path.deadline_ms, 250);
    assert_int_equal(req.u.find_path.style, PD_STYLE_CORNERS);
}

static void test_decode_find_path_defaults(void **state)
{
    find_path_msg m;
    pd_request req;
    (void)state;
    find_path_init(&m);
    m.fp.unit_size = 0;
    m.fp.connectivity = PATHD__V1__CONNECTIVITY__CONNECTIVITY_DEFAULT;
    m.fp.style = PATHD__V1__WAYPOINT_STYLE__STYLE_CELLS;
    m.fp.max_expansions = 0;
    m.fp.deadline_ms = 0;
    assert_int_equal(decode_find_path(&m, &req), PD_OK);
    assert_int_equal(req.u.find_path.unit_size, 1);
    assert_int_equal(req.u.find_path.connectivity, PD_CONNECT_8);
    assert_int_equal(req.u.find_path.style, PD_STYLE_CELLS);
    assert_int_equal(req.u.find_path.max_expansions, 0);
    assert_int_equal(req.u.find_path.deadline_ms, 0);
    assert_int_equal(req.u.find_path.goal_mode, PD_GOAL_EXACT);
    assert_int_equal(req.u.find_path.snap, 0);
    assert_int_equal(req.u.find_path.partial_on_cutoff, 0);
    assert_true(req.u.find_path.speed == 0.0);
    assert_true(req.u.find_path.start_time == 0.0);
    assert_null(req.u.find_path.avoid);
    assert_int_equal(req.u.find_path.n_avoid, 0);
    assert_int_equal(req.u.find_path.has_window, 0);

    m.fp.connectivity = PATHD__V1__CONNECTIVITY__CONNECTIVITY_8;
    assert_int_equal(decode_find_path(&m, &req), PD_OK);
    assert_int_equal(req.u.find_path.connectivity, PD_CONNECT_8);
}

static void test_decode_find_path_limits_accepted(void **state)
{
    find_path_msg m;
    pd_request req;
    char name[PD_CONF_MAX_NAME];
    (void)state;
    find_path_init(&m);
    memset(name, 'a', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    m.fp.scene = name; /* PD_CONF_MAX_NAME - 1 bytes: the longest allowed */
    m.fp.unit_size = PD_CONF_MAX_UNIT_SIZE;
    m.fp.deadline_ms = PD_CODEC_MAX_DEADLINE_MS;
    assert_int_equal(decode_find_path(&m, &req), PD_OK);
    assert_string_equal(req.u.find_path.scene, name);
    assert_int_equal(req.u.find_path.unit_size, PD_CONF_MAX_UNIT_SIZE);
    assert_int_equal(req.u.find_path.deadline_ms, PD_CODEC_MAX_DEADLINE_MS);

    m.fp.scene = "caf\xc3\xa9"; /* UTF-8 is fine */
    assert_int_equal(decode_find_path(&m, &req), PD_OK);
    assert_string_equal(req.u.find_path.scene, "caf\xc3\xa9");
}

static void test_decode_other_kinds_round_trip(void **state)
{
    Pathd__V1__Request m = PATHD__V1__REQUEST__INIT;
    Pathd__V1__Cancel cancel = PATHD__V1__CANCEL__INIT;
    Pathd__V1__ListScenes list = PATHD__V1__LIST_SCENES__INIT;
    Pathd__V1__GetSceneInfo info = PATHD__V1__GET_SCENE_INFO__INIT;
    Pathd__V1__GetStats stats = PATHD__V1__GET_STATS__INIT;
    Pathd__V1__Ping ping = PATHD__V1__PING__INIT;
    pd_request req;
    char err[128];
    (void)state;

    m.id = UINT64_MAX;
    m.body_case = PATHD__V1__REQUEST__BODY_CANCEL;
    cancel.target_id = 0x0123456789abcdefull;
    m.cancel = &cancel;
    assert_int_equal(wire_decode_request(&m, &req, err, sizeof err), PD_OK);
    assert_int_equal(req.id, UINT64_MAX);
    assert_int_equal(req.kind, PD_REQ_CANCEL);
    assert_int_equal(req.u.cancel_target, 0x0123456789abcdefull);

    m.id = 1;
    m.body_case = PATHD__V1__REQUEST__BODY_LIST_SCENES;
    m.list_scenes = &list;
    assert_int_equal(wire_decode_request(&m, &req, err, sizeof err), PD_OK);
    assert_int_equal(req.id, 1);
    assert_int_equal(req.kind, PD_REQ_LIST_SCENES);

    m.id = 2;
    m.body_case = PATHD__V1__REQUEST__BODY_SCENE_INFO;
    info.scene = "dungeon-2";
    m.scene_info = &info;
    assert_int_equal(wire_decode_request(&m, &req, err, sizeof err), PD_OK);
    assert_int_equal(req.id, 2);
    assert_int_equal(req.kind, PD_REQ_SCENE_INFO);
    assert_string_equal(req.u.scene_info.scene, "dungeon-2");

    m.id = 3;
    m.body_case = PATHD__V1__REQUEST__BODY_STATS;
    m.stats = &stats;
    assert_int_equal(wire_decode_request(&m, &req, err, sizeof err), PD_OK);
    assert_int_equal(req.id, 3);
    assert_int_equal(req.kind, PD_REQ_STATS);

    m.id = 4;
    m.body_case = PATHD__V1__REQUEST__BODY_PING;
    ping.nonce = 0xfeedfacecafebeefull;
    m.ping = &ping;
    assert_int_equal(wire_decode_request(&m, &req, err, sizeof err), PD_OK);
    assert_int_equal(req.id, 4);
    assert_int_equal(req.kind, PD_REQ_PING);
    assert_int_equal(req.u.ping_nonce, 0xfeedfacecafebeefull);
}

/* ---- decode: validation ------------------------------------------------ */

static void test_decode_no_body(void **state)
{
    Pathd__V1__Request m = PATHD__V1__REQUEST__INIT;
    pd_request req;
    char err[128];
    (void)state;
    m.id = 77;
    expect_invalid(&m, "request has no body");

    /* A zero-length payload is a Request with every field at its default. */
    assert_int_equal(pd_codec_decode_request((const uint8_t *)"", 0, &req, err, sizeof err),
                     PD_INVALID_ARGUMENT);
    assert_int_equal(req.id, 0);
    assert_non_null(strstr(err, "request has no body"));
    assert_int_equal(pd_codec_decode_request(NULL, 0, &req, err, sizeof err), PD_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "request has no body"));
}

static void test_decode_bad_scene_names(void **state)
{
    find_path_msg m;
    char name[PD_CONF_MAX_NAME + 1];
    (void)state;
    find_path_init(&m);
    m.fp.scene = "";
    expect_invalid(&m.req, "find_path.scene is empty");
    memset(name, 'b', PD_CONF_MAX_NAME);
    name[PD_CONF_MAX_NAME] = '\0';
    m.fp.scene = name;
    expect_invalid(&m.req, "find_path.scene is 64 bytes");
    m.fp.scene = "bad\xff";
    expect_invalid(&m.req, "find_path.scene is not valid UTF-8");
    m.fp.scene = "\xc0\xaf"; /* overlong '/' */
    expect_invalid(&m.req, "not valid UTF-8");
    m.fp.scene = "\xed\xa0\x80"; /* UTF-16 surrogate */
    expect_invalid(&m.req, "not valid UTF-8");
    m.fp.scene = "two\nlines";
    expect_invalid(&m.req, "control character");
}

static void test_decode_bad_points(void **state)
{
    find_path_msg m;
    Pathd__V1__Point empty = PATHD__V1__POINT__INIT;
    (void)state;
    find_path_init(&m);
    m.fp.start = NULL;
    expect_invalid(&m.req, "find_path.start is missing");
    find_path_init(&m);
    m.fp.goal = NULL;
    expect_invalid(&m.req, "find_path.goal is missing");
    find_path_init(&m);
    m.fp.start = &empty;
    expect_invalid(&m.req, "find_path.start has neither cell nor world");
    find_path_init(&m);
    m.goal_world.x = NAN;
    expect_invalid(&m.req, "find_path.goal.world is not a finite point");
    find_path_init(&m);
    m.goal_world.y = INFINITY;
    expect_invalid(&m.req, "find_path.goal.world is not a finite point");
    find_path_init(&m);
    m.goal_world.x = -INFINITY;
    expect_invalid(&m.req, "find_path.goal.world");
}

static void test_decode_bad_ranges(void **state)
{
    find_path_msg m;
    (void)state;
    find_path_init(&m);
    m.fp.unit_size = PD_CONF_MAX_UNIT_SIZE + 1;
    expect_invalid(&m.req, "find_path.unit_size");
    find_path_init(&m);
    m.fp.unit_size = UINT32_MAX;
    expect_invalid(&m.req, "find_path.unit_size");

    /* Enum numbers the schema does not define still arrive as numbers. */
    find_path_init(&m);
    m.fp.connectivity = (Pathd__V1__Connectivity)6;
    expect_invalid(&m.req, "find_path.connectivity 6");
    m.fp.connectivity = (Pathd__V1__Connectivity)-1;
    expect_invalid(&m.req, "find_path.connectivity -1");
    find_path_init(&m);
    m.fp.style = (Pathd__V1__WaypointStyle)3;
    expect_invalid(&m.req, "find_path.style 3");
    m.fp.style = (Pathd__V1__WaypointStyle)-5;
    expect_invalid(&m.req, "find_path.style -5");

    find_path_init(&m);
    m.fp.deadline_ms = PD_CODEC_MAX_DEADLINE_MS + 1;
    expect_invalid(&m.req, "find_path.deadline_ms");
}

static void test_decode_bad_scene_info(void **state)
{
    Pathd__V1__Request m = PATHD__V1__REQUEST__INIT;
    Pathd__V1__GetSceneInfo info = PATHD__V1__GET_SCENE_INFO__INIT;
    char name[PD_CONF_MAX_NAME + 1];
    (void)state;
    m.id = 9;
    m.body_case = PATHD__V1__REQUEST__BODY_SCENE_INFO;
    m.scene_info = &info;
    expect_invalid(&m, "scene_info.scene is empty");
    memset(name, 'c', PD_CONF_MAX_NAME);
    name[PD_CONF_MAX_NAME] = '\0';
    info.scene = name;
    expect_invalid(&m, "scene_info.scene is 64 bytes");
}

static void test_decode_garbage_is_malformed(void **state)
{
    static const char http[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    static const uint8_t varint_overflow[] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
    static const uint8_t bad_wire_type[] = {0x0F, 0x01};      /* field 1, wire type 7 */
    static const uint8_t field_zero[] = {0x00, 0x01};         /* field number 0 */
    static const uint8_t long_length[] = {0x52, 0x7F, 0x0A};  /* find_path claims 127 bytes, has 1 */
    pd_request req;
    char err[128];
    (void)state;
    assert_int_equal(pd_codec_decode_request((const uint8_t *)http, sizeof http - 1, &req, err, sizeof err),
                     PD_MALFORMED);
    assert_true(strlen(err) > 0);
    assert_int_equal(pd_codec_decode_request(varint_overflow, sizeof varint_overflow, &req, err, sizeof err),
                     PD_MALFORMED);
    assert_int_equal(pd_codec_decode_request(bad_wire_type, sizeof bad_wire_type, &req, err, sizeof err),
                     PD_MALFORMED);
    assert_int_equal(pd_codec_decode_request(field_zero, sizeof field_zero, &req, err, sizeof err),
                     PD_MALFORMED);
    assert_int_equal(pd_codec_decode_request(long_length, sizeof long_length, &req, err, sizeof err),
                     PD_MALFORMED);
    /* err may be NULL. */
    assert_int_equal(pd_codec_decode_request(long_length, sizeof long_length, &req, NULL, 0), PD_MALFORMED);
}

/* Cutting a packed FindPath anywhere inside its body leaves a length prefix
 * that promises more than is there: every such prefix must be MALFORMED. */
static void test_decode_truncated_is_malformed(void **state)
{
    find_path_msg m;
    Pathd__V1__Request id_only = PATHD__V1__REQUEST__INIT;
    size_t len, id_len;
    uint8_t *full, *id_bytes;
    pd_request req;
    char err[128];
    (void)state;
    find_path_init(&m);
    full = wire_pack_request(&m.req, &len);
    id_only.id = TEST_ID;
    id_bytes = wire_pack_request(&id_only, &id_len);
    /* protobuf-c writes fields in number order, so the id comes first. */
    assert_memory_equal(full, id_bytes, id_len);
    for (size_t cut = id_len + 1; cut < len; cut++) {
        uint8_t *prefix = malloc(cut);
        assert_non_null(prefix);
        memcpy(prefix, full, cut);
        if (pd_codec_decode_request(prefix, cut, &req, err, sizeof err) != PD_MALFORMED)
            fail_msg("prefix of %zu of %zu bytes was not MALFORMED", cut, len);
        free(prefix);
    }
    /* Cut exactly after the id it is a valid Request without a body. */
    assert_int_equal(pd_codec_decode_request(full, id_len, &req, err, sizeof err), PD_INVALID_ARGUMENT);
    assert_int_equal(req.id, TEST_ID);
    assert_int_equal(pd_codec_decode_request(full, len, &req, err, sizeof err), PD_OK);
    free(full);
    free(id_bytes);
}

/* Appends a FindPath (field 10) holding scene "s" and n empty avoid cells
 * (field 14, length 0: two bytes each) to an id field, as raw wire bytes. */
static uint8_t *many_avoid_frame(uint64_t id, size_t n, size_t *len)
{
    size_t body = 3 + 2 * n; /* scene field (0x0A 0x01 's') + cells */
    uint8_t *buf = malloc(2 + 1 + 5 + body);
    assert_non_null(buf);
    size_t at = 0;
    buf[at++] = 0x08;
    buf[at++] = (uint8_t)id; /* id < 128 */
    buf[at++] = 0x52;        /* field 10, length-delimited */
    for (size_t v = body; ; v >>= 7) {
        buf[at++] = (uint8_t)((v & 0x7F) | (v >= 0x80 ? 0x80 : 0));
        if (v < 0x80)
            break;
    }
    buf[at++] = 0x0A;
    buf[at++] = 0x01;
    buf[at++] = 's';
    for (size_t i = 0; i < n; i++) {
        buf[at++] = 0x72; /* field 14, length-delimited */
        buf[at++] = 0x00;
    }
    *len = at;
    return buf;
}

/* Issue 10, finding 3: a frame of half a million empty sub-messages is
 * refused by counting, before protobuf-c allocates one message per element
 * on the loop thread; the answer still names the request. Just under the
 * cap it unpacks, and the field checks speak. */
static void test_decode_element_cap(void **state)
{
    pd_request req;
    char err[160];
    size_t len;
    (void)state;
    uint8_t *buf = many_avoid_frame(42, 500000, &len);
    assert_true(len < 1024 * 1024);
    assert_int_equal(pd_codec_decode_request(buf, len, &req, err, sizeof err), PD_INVALID_ARGUMENT);
    assert_int_equal(req.id, 42);
    assert_non_null(strstr(err, "fields and list elements"));
    assert_true(req.structural); /* the server closes the connection after the answer */
    pd_request_free(&req);
    free(buf);

    buf = many_avoid_frame(43, PD_CODEC_MAX_ELEMENTS - 8, &len);
    assert_int_equal(pd_codec_decode_request(buf, len, &req, err, sizeof err), PD_INVALID_ARGUMENT);
    assert_int_equal(req.id, 43);
    /* Unpacked and checked field by field: no start was sent. */
    assert_null(strstr(err, "fields and list elements"));
    assert_false(req.structural);
    assert_non_null(strstr(err, "find_path.start"));
    pd_request_free(&req);
    free(buf);
}

/* Issue 10, finding 8: a scene name with an embedded NUL is refused, not
 * taken as its prefix. */
static void test_decode_nul_in_string(void **state)
{
    static const uint8_t frame[] = {
        0x08, 0x07,                         /* id = 7 */
        0x6A, 0x06,                         /* field 13 (scene_info), 6 bytes */
        0x0A, 0x04, 't', 'o', 0x00, 'x',    /* scene = "to\0x" */
    };
    pd_request req;
    char err[160];
    (void)state;
    assert_int_equal(pd_codec_decode_request(frame, sizeof frame, &req, err, sizeof err), PD_INVALID_ARGUMENT);
    assert_int_equal(req.id, 7);
    assert_non_null(strstr(err, "NUL"));
    pd_request_free(&req);
}

/* m packed, then peeked: its id and the kind want. */
static void expect_peek(const Pathd__V1__Request *m, pd_request_kind want)
{
    uint64_t id = 0;
    pd_request_kind kind = PD_REQ_NONE;
    size_t len;
    uint8_t *packed = wire_pack_request(m, &len);
    assert_int_equal(pd_codec_peek_request(packed, len, &id, &kind), PD_OK);
    assert_int_equal(id, m->id);
    assert_int_equal(kind, want);
    free(packed);
}

/* pd_codec_peek_request names a frame's kind and id without unpacking it,
 * and places nothing the scan does not pass or whose body it does not know
 * (those are pd_codec_decode_request's to explain). */
static void test_peek_request(void **state)
{
    Pathd__V1__Request m = PATHD__V1__REQUEST__INIT;
    Pathd__V1__FindPath fp = PATHD__V1__FIND_PATH__INIT;
    Pathd__V1__Ping ping = PATHD__V1__PING__INIT;
    static const uint8_t nul_name[] = {
        0x08, 0x07, 0x6A, 0x06, 0x0A, 0x04, 't', 'o', 0x00, 'x', /* as test_decode_nul_in_string */
    };
    static const uint8_t future_body[] = {0x08, 0x05, 0xA2, 0x01, 0x02, 0x08, 0x01};
    static const uint8_t cut_short[] = {0x08, 0x05, 0x6A, 0x06, 0x0A};
    uint64_t id = 0;
    pd_request_kind kind = PD_REQ_NONE;
    (void)state;
    m.id = 42;
    m.body_case = PATHD__V1__REQUEST__BODY_FIND_PATH;
    fp.scene = "town";
    m.find_path = &fp;
    expect_peek(&m, PD_REQ_FIND_PATH);
    m.id = 43;
    m.body_case = PATHD__V1__REQUEST__BODY_PING;
    m.ping = &ping;
    expect_peek(&m, PD_REQ_PING);

    id = 0;
    kind = PD_REQ_NONE;
    assert_int_equal(pd_codec_peek_request(nul_name, sizeof nul_name, &id, &kind), PD_INVALID_ARGUMENT);
    assert_int_equal(pd_codec_peek_request(future_body, sizeof future_body, &id, &kind), PD_INVALID_ARGUMENT);
    assert_int_equal(pd_codec_peek_request(cut_short, sizeof cut_short, &id, &kind), PD_INVALID_ARGUMENT);
    assert_int_equal(pd_codec_peek_request(nul_name, 2, &id, &kind), PD_INVALID_ARGUMENT); /* no body */
    assert_int_equal(id, 0);
    assert_int_equal(kind, PD_REQ_NONE);
}

static void test_decode_unknown_fields_ignored(void **state)
{
    Pathd__V1__Request m = PATHD__V1__REQUEST__INIT;
    Pathd__V1__Ping ping = PATHD__V1__PING__INIT;
    static const uint8_t extra[] = {
        0x98, 0x06, 0x01,             /* field 99, varint 1 */
        0x3A, 0x03, 'a', 'b', 'c',    /* field 7, 3 bytes */
        0x45, 1, 2, 3, 4,             /* field 8, fixed32 */
    };
    static const uint8_t future_body[] = {
        0x08, 0x05,                   /* id = 5 */
        0xA2, 0x01, 0x02, 0x08, 0x01, /* field 20 (a later request kind), 2 bytes */
    };
    size_t len;
    uint8_t *packed, *buf;
    pd_request req;
    char err[128];
    (void)state;
    m.id = 11;
    m.body_case = PATHD__V1__REQUEST__BODY_PING;
    ping.nonce = 99;
    m.ping = &ping;
    packed = wire_pack_request(&m, &len);
    buf = malloc(len + sizeof extra);
    assert_non_null(buf);
    memcpy(buf, packed, len);
    memcpy(buf + len, extra, sizeof extra);
    assert_int_equal(pd_codec_decode_request(buf, len + sizeof extra, &req, err, sizeof err), PD_OK);
    assert_int_equal(req.id, 11);
    assert_int_equal(req.kind, PD_REQ_PING);
    assert_int_equal(req.u.ping_nonce, 99);
    free(buf);
    free(packed);

    /* A body this server does not know: valid protobuf, but nothing to do. */
    assert_int_equal(pd_codec_decode_request(future_body, sizeof future_body, &req, err, sizeof err),
                     PD_INVALID_ARGUMENT);
    assert_int_equal(req.id, 5);
    assert_non_null(strstr(err, "request has no body"));
}

/* ---- encode ------------------------------------------------------------ */

static void check_path_answer(const answer_in *job, const scene_fixture *f, uint32_t per_chunk,
                              size_t expect_chunks)
{
    size_t len, seen = 0;
    uint8_t *buf = encode_path(job, per_chunk, &len);
    uint32_t effective = per_chunk == 0 ? 1 : per_chunk;
    frames fr;
    unpack_frames(buf, len, &fr);
    assert_int_equal(fr.n, expect_chunks);
    for (size_t i = 0; i < fr.n; i++) {
        const Pathd__V1__Response *r = fr.r[i];
        const Pathd__V1__PathChunk *c;
        int last = i + 1 == fr.n;
        assert_int_equal(r->id, job->request_id);
        assert_int_equal(r->body_case, PATHD__V1__RESPONSE__BODY_PATH);
        c = r->path;
        assert_int_equal(c->seq, i);
        assert_int_equal(r->final, last);
        if (!last)
            assert_int_equal(wp_count(c->points), effective);
        if (c->points != NULL) {
            /* The first cell of every chunk is absolute, so chunks decode alone. */
            assert_int_equal(c->points->dx[0], job->path[seen].x);
            assert_int_equal(c->points->dy[0], job->path[seen].y);
            assert_int_equal(c->points->n_wx, job->want_world ? c->points->n_dx : 0);
            assert_int_equal(c->points->n_t, 0);
        }
        for (size_t k = 0; k < wp_count(c->points); k++, seen++) {
            pd_point cell = job->path[seen];
            wp w = wp_at(c->points, k);
            assert_int_equal(w.x, cell.x);
            assert_int_equal(w.y, cell.y);
            if (job->want_world) {
                assert_true(w.wx == f->scene.origin_x + (cell.x + 0.5) * f->scene.cell_size);
                assert_true(w.wy == f->scene.origin_y + (cell.y + 0.5) * f->scene.cell_size);
            }
        }
        if (last) {
            assert_int_equal(r->status, (int)job->status);
            assert_true(c->cost == job->metrics.cost);
            assert_int_equal(c->expansions, job->metrics.expanded);
            assert_int_equal(c->search_micros, job->metrics.micros);
            assert_int_equal(c->scene_version, f->scene.version);
            assert_int_equal(c->total_waypoints, job->path_len);
        } else {
            assert_int_equal(r->status, PATHD__V1__STATUS__OK);
            assert_true(c->cost == 0.0);
            assert_int_equal(c->expansions, 0);
            assert_int_equal(c->search_micros, 0);
            assert_int_equal(c->scene_version, 0);
            assert_int_equal(c->total_waypoints, 0);
        }
    }
    assert_int_equal(seen, job->path != NULL ? job->path_len : 0);
    free_frames(&fr);
    free(buf);
}

static void make_job(answer_in *job, pd_scene *scene, size_t path_len, pd_status status)
{
    memset(job, 0, sizeof *job);
    job->request_id = 0x1122334455667788ull;
    job->scene = scene;
    job->status = status;
    job->metrics.cost = 612.3456789;
    job->metrics.expanded = 98765;
    job->metrics.generated = 123456;
    job->metrics.micros = 4321;
    job->metrics.path_len = path_len;
    if (path_len > 0) {
        job->path = malloc(path_len * sizeof *job->path);
        assert_non_null(job->path);
        for (size_t i = 0; i < path_len; i++) {
            job->path[i].x = (int32_t)(i % 40);
            job->path[i].y = (int32_t)(i / 40 % 30);
        }
    }
    job->path_len = path_len;
    job->want_world = 1;
}

static void test_encode_path_chunks(void **state)
{
    scene_fixture f;
    answer_in job;
    (void)state;
    scene_fixture_init(&f, "town", 40, 30);

    make_job(&job, &f.scene, 600, PD_PARTIAL);
    check_path_answer(&job, &f, 256, 3); /* 256 + 256 + 88 */
    job.want_world = 0;
    check_path_answer(&job, &f, 256, 3);
    job.want_world = 1;
    check_path_answer(&job, &f, 600, 1);
    check_path_answer(&job, &f, 599, 2);
    check_path_answer(&job, &f, 100000, 1);
    free(job.path);

    make_job(&job, &f.scene, 512, PD_OK);
    check_path_answer(&job, &f, 256, 2);
    free(job.path);

    make_job(&job, &f.scene, 1, PD_OK);
    check_path_answer(&job, &f, 256, 1);
    free(job.path);

    /* 0 per chunk would never finish a path; it is taken as 1. */
    make_job(&job, &f.scene, 3, PD_OK);
    check_path_answer(&job, &f, 0, 3);
    free(job.path);
    scene_fixture_free(&f);
}

/* The server's job (pd_job.h) encodes through pd_codec_encode_job: a
 * FindPath job gives exactly the frames pd_codec_encode_path gives for its
 * result, and a reachability query's job the movement answer; a kind the
 * server answers itself has no job encoder. */
static void test_encode_job_by_kind(void **state)
{
    scene_fixture f;
    answer_in in;
    (void)state;
    scene_fixture_init(&f, "town", 40, 30);
    make_job(&in, &f.scene, 600, PD_OK);

    pd_job *job = pd_job_new(PD_REQ_FIND_PATH, NULL);
    assert_non_null(job);
    job->task.tag = in.request_id;
    job->max_chunk = 256;
    job->want_world = 1;
    job->path.status = PD_OK;
    job->path.metrics = in.metrics;
    job->path.path = in.path;
    job->path.path_len = in.path_len;
    size_t want_len, got_len;
    uint8_t *want = encode_path(&in, 256, &want_len);
    job->scene = &f.scene; /* borrowed: not released below */
    uint8_t *got = pd_codec_encode_job(job, &got_len);
    assert_non_null(got);
    assert_int_equal(got_len, want_len);
    assert_memory_equal(got, want, want_len);
    free(got);
    free(want);

    job->kind = PD_REQ_REACHABLE;
    pd_move_result r;
    memset(&r, 0, sizeof r);
    r.status = PD_OK;
    r.yes = 1;
    r.version = 7;
    job->move_results = &r;
    want = pd_codec_encode_move(job->task.tag, PD_REQ_REACHABLE, &r, &want_len);
    got = pd_codec_encode_job(job, &got_len);
    assert_non_null(got);
    assert_int_equal(got_len, want_len);
    assert_memory_equal(got, want, want_len);
    free(got);
    free(want);

    job->kind = PD_REQ_PING;
    assert_null(pd_codec_encode_job(job, &got_len));
    assert_int_equal(got_len, 0);
    job->kind = PD_REQ__COUNT;
    assert_null(pd_codec_encode_job(job, &got_len));

    free(in.path);
    free(job);
    scene_fixture_free(&f);
}

static void test_encode_path_sizes_of_600_in_256(void **state)
{
    scene_fixture f;
    answer_in job;
    size_t len;
    uint8_t *buf;
    frames fr;
    (void)state;
    scene_fixture_init(&f, "town", 40, 30);
    make_job(&job, &f.scene, 600, PD_OK);
    buf = encode_path(&job, 256, &len);
    unpack_frames(buf, len, &fr);
    assert_int_equal(fr.n, 3);
    assert_int_equal(wp_count(fr.r[0]->path->points), 256);
    assert_int_equal(wp_count(fr.r[1]->path->points), 256);
    assert_int_equal(wp_count(fr.r[2]->path->points), 88);
    /* Spot-check one centre by value: cell (5, 1) of the second chunk. */
    wp w = wp_at(fr.r[1]->path->points, 5);
    assert_int_equal(w.x, (256 + 5) % 40);
    assert_int_equal(w.y, (256 + 5) / 40);
    assert_true(w.wx == -10.5 + 21.5 * 0.5);
    assert_true(w.wy == -20.0 + 6.5 * 0.5);
    /* A step of one cell packs into one byte per axis (zigzag 1 or -1 is a
     * one-byte varint): 256 cells plus the chunk's header fields stay
     * under 600 bytes, where a sub-message per cell took 24 bytes each. */
    size_t with_world = len;
    free_frames(&fr);
    free(buf);
    job.want_world = 0;
    buf = encode_path(&job, 256, &len);
    assert_true(len < with_world);
    unpack_frames(buf, len, &fr);
    assert_int_equal(fr.n, 3);
    assert_int_equal(fr.r[0]->path->points->n_wx, 0);
    assert_true(len < 3 * 600);
    free_frames(&fr);
    free(buf);
    free(job.path);
    scene_fixture_free(&f);
}

/* The worked example of docs/PROTOCOL.md section 8, byte for byte: a path
 * of three cells in chunks of two, without and with world coordinates. */
static void test_encode_path_protocol_example(void **state)
{
    static const uint8_t cells_only[] = {
        0x00, 0x00, 0x00, 0x0f, 0x08, 0x02, 0x52, 0x0b, 0xa2, 0x01, 0x08, 0x0a, 0x02, 0x02, 0x02, 0x12, 0x02,
        0x02, 0x02, 0x00, 0x00, 0x00, 0x22, 0x08, 0x02, 0x18, 0x01, 0x52, 0x1c, 0x10, 0x01, 0x19, 0xe6, 0x9d,
        0x3f, 0x33, 0x4f, 0x50, 0x03, 0x40, 0x20, 0x03, 0x28, 0x04, 0x30, 0x01, 0x38, 0x03, 0xa2, 0x01, 0x06,
        0x0a, 0x01, 0x06, 0x12, 0x01, 0x04,
    };
    static const uint8_t world_first[] = {
        0x00, 0x00, 0x00, 0x33, 0x08, 0x02, 0x52, 0x2f, 0xa2, 0x01, 0x2c, 0x0a, 0x02, 0x02, 0x02, 0x12, 0x02,
        0x02, 0x02, 0x22, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2a, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x26, 0xc0, 0x2a, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2a, 0xc0, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x26, 0xc0,
    };
    scene_fixture f;
    answer_in job;
    size_t len;
    uint8_t *buf;
    (void)state;
    scene_fixture_init(&f, "demo", 8, 8);
    f.scene.origin_x = -16;
    f.scene.origin_y = -16;
    f.scene.cell_size = 2;
    f.scene.version = 1;
    make_job(&job, &f.scene, 3, PD_OK);
    job.path[0] = (pd_point){1, 1};
    job.path[1] = (pd_point){2, 2};
    job.path[2] = (pd_point){3, 2};
    job.request_id = 2;
    job.metrics.cost = 1 + sqrt(2.0);
    job.metrics.expanded = 3;
    job.metrics.micros = 4;

    job.want_world = 0;
    buf = encode_path(&job, 2, &len);
    assert_int_equal(len, sizeof cells_only);
    assert_memory_equal(buf, cells_only, len);
    /* As the server sends it, with its timing (server_us 61, search_us 4)
     * appended to the final frame, whose header grows from 34 to 38. */
    static const uint8_t timing[] = {0x28, 0x3d, 0x30, 0x04};
    pd_codec_stamp_timing(&buf, &len, 61, 4);
    assert_int_equal(len, sizeof cells_only + sizeof timing);
    assert_memory_equal(buf, cells_only, 22);
    assert_int_equal(buf[22], 0x26);
    assert_memory_equal(buf + 23, cells_only + 23, sizeof cells_only - 23);
    assert_memory_equal(buf + sizeof cells_only, timing, sizeof timing);
    free(buf);

    job.want_world = 1;
    buf = encode_path(&job, 2, &len);
    assert_true(len > sizeof world_first);
    assert_memory_equal(buf, world_first, sizeof world_first);
    free(buf);
    free(job.path);
    scene_fixture_free(&f);
}

static void test_encode_path_without_path(void **state)
{
    scene_fixture f;
    answer_in job;
    (void)state;
    scene_fixture_init(&f, "town", 40, 30);
    make_job(&job, &f.scene, 0, PD_NO_PATH);
    check_path_answer(&job, &f, 256, 1);

    /* A non-wire status (core's BUFFER_TOO_SMALL) goes out as INTERNAL. */
    {
        size_t len;
        uint8_t *buf;
        frames fr;
        job.status = PD_BUFFER_TOO_SMALL;
        buf = encode_path(&job, 256, &len);
        unpack_frames(buf, len, &fr);
        assert_int_equal(fr.n, 1);
        assert_int_equal(fr.r[0]->status, PATHD__V1__STATUS__INTERNAL);
        assert_true(fr.r[0]->final);
        assert_null(fr.r[0]->path->points);
        free_frames(&fr);
        free(buf);
    }
    scene_fixture_free(&f);
}

/* pd_codec_stamp_timing puts server_us / search_us on the last frame of an
 * answer only, leaves every other field of it as it was, and a zero leaves
 * its field out. */
static void test_stamp_timing_on_the_final_frame(void **state)
{
    scene_fixture f;
    answer_in job;
    size_t len, plain_len;
    uint8_t *buf, *plain;
    frames fr, before;
    (void)state;
    scene_fixture_init(&f, "town", 40, 30);
    make_job(&job, &f.scene, 600, PD_OK);
    plain = encode_path(&job, 256, &plain_len);
    buf = encode_path(&job, 256, &len);
    pd_codec_stamp_timing(&buf, &len, 300000, 4321);
    /* Two varints of 3 and 2 bytes behind their tags. */
    assert_int_equal(len, plain_len + 1 + 3 + 1 + 2);
    unpack_frames(buf, len, &fr);
    unpack_frames(plain, plain_len, &before);
    /* The bytes before the last frame's header, and that frame's own, are
     * as they were: only its length and the appended fields are new. */
    size_t last = plain_len - PD_FRAME_HEADER_BYTES - before.payload_len[2];
    assert_memory_equal(buf, plain, last);
    assert_memory_equal(buf + last + PD_FRAME_HEADER_BYTES, plain + last + PD_FRAME_HEADER_BYTES,
                        before.payload_len[2]);
    assert_int_equal(fr.n, 3);
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(fr.r[i]->server_us, 0);
        assert_int_equal(fr.r[i]->search_us, 0);
        assert_int_equal(fr.payload_len[i], before.payload_len[i]);
    }
    assert_true(fr.r[2]->final);
    assert_int_equal(fr.r[2]->server_us, 300000);
    assert_int_equal(fr.r[2]->search_us, 4321);
    assert_int_equal(fr.r[2]->path->search_micros, 4321);
    assert_int_equal(fr.r[2]->path->total_waypoints, 600);
    assert_int_equal(wp_count(fr.r[2]->path->points), 88);
    assert_int_equal(fr.r[2]->status, before.r[2]->status);
    free_frames(&fr);
    free_frames(&before);
    free(buf);
    free(plain);
    free(job.path);
    scene_fixture_free(&f);

    /* One frame, nothing searched: search_us stays out. The Pong of
     * docs/PROTOCOL.md, section 8, byte for byte. */
    static const uint8_t pong[] = {0x00, 0x00, 0x00, 0x0c, 0x08, 0x01, 0x18, 0x01,
                                   0x72, 0x04, 0x08, 0x2a, 0x10, 0x01, 0x28, 0x23};
    buf = pd_codec_encode_pong(1, 42, PD_SERVING, &len);
    pd_codec_stamp_timing(&buf, &len, 35, 0);
    assert_int_equal(len, sizeof pong);
    assert_memory_equal(buf, pong, len);
    unpack_frames(buf, len, &fr);
    assert_int_equal(fr.n, 1);
    assert_int_equal(fr.r[0]->id, 1);
    assert_int_equal(fr.r[0]->pong->nonce, 42);
    assert_int_equal(fr.r[0]->server_us, 35);
    assert_int_equal(fr.r[0]->search_us, 0);
    free_frames(&fr);
    free(buf);

    /* No answer (an encoder out of memory) stays none. */
    buf = NULL;
    len = 0;
    pd_codec_stamp_timing(&buf, &len, 5, 5);
    assert_null(buf);
    assert_int_equal(len, 0);
}

static void test_encode_error_and_ack(void **state)
{
    size_t len;
    uint8_t *buf;
    frames fr;
    (void)state;
    buf = pd_codec_encode_error(17, PD_UNKNOWN_SCENE, "no scene named 'x'", &len);
    unpack_frames(buf, len, &fr);
    assert_int_equal(fr.n, 1);
    assert_int_equal(fr.r[0]->id, 17);
    assert_int_equal(fr.r[0]->status, PATHD__V1__STATUS__UNKNOWN_SCENE);
    assert_true(fr.r[0]->final);
    assert_int_equal(fr.r[0]->body_case, PATHD__V1__RESPONSE__BODY_ERROR);
    assert_string_equal(fr.r[0]->error->message, "no scene named 'x'");
    free_frames(&fr);
    free(buf);

    /* Messages that quote client bytes stay valid UTF-8 on the wire. */
    buf = pd_codec_encode_error(0, PD_MALFORMED, "bad \xff\xc3 caf\xc3\xa9 \xe2\x82", &len);
    unpack_frames(buf, len, &fr);
    assert_int_equal(fr.r[0]->id, 0);
    assert_int_equal(fr.r[0]->status, PATHD__V1__STATUS__MALFORMED);
    assert_string_equal(fr.r[0]->error->message, "bad ?? caf\xc3\xa9 ??");
    free_frames(&fr);
    free(buf);

    buf = pd_codec_encode_error(3, PD_OVERLOADED, NULL, &len);
    unpack_frames(buf, len, &fr);
    assert_int_equal(fr.r[0]->status, PATHD__V1__STATUS__OVERLOADED);
    assert_int_equal(fr.r[0]->body_case, PATHD__V1__RESPONSE__BODY_ERROR);
    assert_string_equal(fr.r[0]->error->message, "");
    free_frames(&fr);
    free(buf);

    buf = pd_codec_encode_ack(123, PD_INVALID_ARGUMENT, &len);
    unpack_frames(buf, len, &fr);
    assert_int_equal(fr.n, 1);
    assert_int_equal(fr.r[0]->id, 123);
    assert_int_equal(fr.r[0]->status, PATHD__V1__STATUS__INVALID_ARGUMENT);
    assert_true(fr.r[0]->final);
    assert_int_equal(fr.r[0]->body_case, PATHD__V1__RESPONSE__BODY__NOT_SET);
    free_frames(&fr);
    free(buf);
}

static void test_encode_pong_and_stats(void **state)
{
    pd_server_stats s = {
        .uptime_ms = 1, .connections = 2, .requests_total = 3, .paths_found = 4,
        .expansions_total = 5, .queue_depth = 6, .in_flight = 7, .threads = 8,
        .scenes = 9, .overloaded_total = 10, .malformed_total = UINT64_MAX,
    };
    size_t len;
    uint8_t *buf;
    frames fr;
    (void)state;
    buf = pd_codec_encode_pong(5, 0xabcdef, PD_SERVING, &len);
    unpack_frames(buf, len, &fr);
    assert_int_equal(fr.n, 1);
    assert_int_equal(fr.r[0]->id, 5);
    assert_int_equal(fr.r[0]->status, PATHD__V1__STATUS__OK);
    assert_true(fr.r[0]->final);
    assert_int_equal(fr.r[0]->body_case, PATHD__V1__RESPONSE__BODY_PONG);
    assert_int_equal(fr.r[0]->pong->nonce, 0xabcdef);
    assert_int_equal(fr.r[0]->pong->serving, PATHD__V1__SERVING_STATE__SERVING);
    free_frames(&fr);
    free(buf);
    /* The bytes HAProxy's tcp-check looks for (deploy/cluster): Ping{nonce 1}
     * answered SERVING carries Pong 72 04 08 01 10 01. */
    {
        static const uint8_t want[] = {0x72, 0x04, 0x08, 0x01, 0x10, 0x01};
        buf = pd_codec_encode_pong(9, 1, PD_SERVING, &len);
        assert_non_null(memmem(buf, len, want, sizeof want));
        free(buf);
        buf = pd_codec_encode_pong(9, 1, PD_NOT_SERVING, &len);
        assert_null(memmem(buf, len, want, sizeof want));
        free(buf);
    }

    buf = pd_codec_encode_stats(6, &s, &len);
    unpack_frames(buf, len, &fr);
    assert_int_equal(fr.r[0]->id, 6);
    assert_true(fr.r[0]->final);
    assert_int_equal(fr.r[0]->body_case, PATHD__V1__RESPONSE__BODY_STATS);
    assert_int_equal(fr.r[0]->stats->uptime_ms, 1);
    assert_int_equal(fr.r[0]->stats->connections, 2);
    assert_int_equal(fr.r[0]->stats->requests_total, 3);
    assert_int_equal(fr.r[0]->stats->paths_found, 4);
    assert_int_equal(fr.r[0]->stats->expansions_total, 5);
    assert_int_equal(fr.r[0]->stats->queue_depth, 6);
    assert_int_equal(fr.r[0]->stats->in_flight, 7);
    assert_int_equal(fr.r[0]->stats->threads, 8);
    assert_int_equal(fr.r[0]->stats->scenes, 9);
    assert_int_equal(fr.r[0]->stats->overloaded_total, 10);
    assert_int_equal(fr.r[0]->stats->malformed_total, UINT64_MAX);
    free_frames(&fr);
    free(buf);
}

static void test_encode_scene_info_and_list(void **state)
{
    scene_fixture a, b;
    pd_scene *list[2];
    size_t len;
    uint8_t *buf;
    frames fr;
    (void)state;
    scene_fixture_init(&a, "alpha", 40, 30);
    scene_fixture_init(&b, "beta", 7, 513);
    b.scene.version = 12;

    a.scene.units[1].pick = PD_SCENE_PICK_JPS;
    buf = pd_codec_encode_scene_info(8, &a.scene, &len);
    unpack_frames(buf, len, &fr);
    assert_int_equal(fr.n, 1);
    assert_int_equal(fr.r[0]->id, 8);
    assert_true(fr.r[0]->final);
    assert_int_equal(fr.r[0]->body_case, PATHD__V1__RESPONSE__BODY_SCENE_INFO);
    assert_string_equal(fr.r[0]->scene_info->name, "alpha");
    assert_int_equal(fr.r[0]->scene_info->width, 40);
    assert_int_equal(fr.r[0]->scene_info->height, 30);
    assert_true(fr.r[0]->scene_info->origin_x == -10.5);
    assert_true(fr.r[0]->scene_info->origin_y == -20.0);
    assert_true(fr.r[0]->scene_info->cell_size == 0.5);
    assert_int_equal(fr.r[0]->scene_info->n_unit_sizes, 2);
    assert_int_equal(fr.r[0]->scene_info->unit_sizes[0], 1);
    assert_int_equal(fr.r[0]->scene_info->unit_sizes[1], 2);
    assert_int_equal(fr.r[0]->scene_info->version, 7);
    assert_int_equal(fr.r[0]->scene_info->passable_cells, a.passable);
    assert_true(a.passable > 0 && a.passable < 40 * 30);
    /* The fixture holds its 42x32 padded grid with its bitsets, and nothing else. */
    assert_int_equal(fr.r[0]->scene_info->grid_bytes, 42 * 32 + pd_grid_bits_bytes(a.scene.grid));
    assert_int_equal(fr.r[0]->scene_info->clearance_bytes, 0);
    assert_int_equal(fr.r[0]->scene_info->label_bytes, 0);
    assert_int_equal(fr.r[0]->scene_info->unit_grid_bytes, 0);
    /* The search config and the pick per unit size, in unit_sizes' order. */
    assert_string_equal(fr.r[0]->scene_info->search, "default");
    assert_int_equal(fr.r[0]->scene_info->n_unit_search, 2);
    assert_string_equal(fr.r[0]->scene_info->unit_search[0], "default");
    assert_string_equal(fr.r[0]->scene_info->unit_search[1], "jps");
    assert_int_equal(fr.r[0]->scene_info->total_bytes, 42 * 32 + pd_grid_bits_bytes(a.scene.grid));
    free_frames(&fr);
    free(buf);

    list[0] = &a.scene;
    list[1] = &b.scene;
    buf = pd_codec_encode_scene_list(9, list, 2, &len);
    unpack_frames(buf, len, &fr);
    assert_int_equal(fr.r[0]->id, 9);
    assert_int_equal(fr.r[0]->body_case, PATHD__V1__RESPONSE__BODY_SCENE_LIST);
    assert_int_equal(fr.r[0]->scene_list->n_scenes, 2);
    assert_string_equal(fr.r[0]->scene_list->scenes[0]->name, "alpha");
    assert_int_equal(fr.r[0]->scene_list->scenes[0]->width, 40);
    assert_int_equal(fr.r[0]->scene_list->scenes[0]->height, 30);
    assert_int_equal(fr.r[0]->scene_list->scenes[0]->version, 7);
    assert_string_equal(fr.r[0]->scene_list->scenes[1]->name, "beta");
    assert_int_equal(fr.r[0]->scene_list->scenes[1]->width, 7);
    assert_int_equal(fr.r[0]->scene_list->scenes[1]->height, 513);
    assert_int_equal(fr.r[0]->scene_list->scenes[1]->version, 12);
    free_frames(&fr);
    free(buf);

    buf = pd_codec_encode_scene_list(10, NULL, 0, &len);
    unpack_frames(buf, len, &fr);
    assert_int_equal(fr.n, 1);
    assert_int_equal(fr.r[0]->id, 10);
    assert_true(fr.r[0]->final);
    assert_int_equal(fr.r[0]->body_case, PATHD__V1__RESPONSE__BODY_SCENE_LIST);
    assert_int_equal(fr.r[0]->scene_list->n_scenes, 0);
    free_frames(&fr);
    free(buf);

    scene_fixture_free(&a);
    scene_fixture_free(&b);
}

/* What the encoder writes, the frame reader reads back frame by frame. */
static void test_encoded_frames_pass_the_reader(void **state)
{
    scene_fixture f;
    answer_in job;
    size_t len, off = 0, got = 0;
    uint8_t *buf;
    pd_frame_reader r;
    (void)state;
    scene_fixture_init(&f, "town", 40, 30);
    make_job(&job, &f.scene, 600, PD_OK);
    buf = encode_path(&job, 256, &len);
    assert_non_null(buf);
    pd_frame_reader_init(&r, 1u << 20);
    while (off < len) {
        uint8_t *space;
        size_t avail, take;
        const uint8_t *payload;
        size_t plen;
        assert_int_equal(pd_frame_reader_space(&r, 1000, &space, &avail), 0);
        take = len - off < avail ? len - off : avail;
        memcpy(space, buf + off, take);
        pd_frame_reader_commit(&r, take);
        off += take;
        while (pd_frame_reader_next(&r, &payload, &plen) == PD_OK) {
            Pathd__V1__Response *resp = pathd__v1__response__unpack(NULL, plen, payload);
            assert_non_null(resp);
            assert_int_equal(resp->path->seq, got);
            pathd__v1__response__free_unpacked(resp, NULL);
            got++;
        }
    }
    assert_int_equal(got, 3);
    pd_frame_reader_free(&r);
    free(buf);
    free(job.path);
    scene_fixture_free(&f);
}

/* ---- issue 4: FindPath options, UpdateCells, new answer fields ---------- */

/* Cells for repeated Cell fields: storage plus the pointer array protobuf-c
 * packs from. */
#define MAX_TEST_CELLS (PD_CODEC_MAX_AVOID + 1)
typedef struct cell_list {
    Pathd__V1__Cell cells[MAX_TEST_CELLS];
    Pathd__V1__Cell *ptrs[MAX_TEST_CELLS];
} cell_list;

static Pathd__V1__Cell **cell_list_fill(cell_list *l, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        pathd__v1__cell__init(&l->cells[i]);
        l->cells[i].x = (int32_t)i - 5;
        l->cells[i].y = (int32_t)(i * 3);
        l->ptrs[i] = &l->cells[i];
    }
    return l->ptrs;
}

typedef struct rect_msg {
    Pathd__V1__Rect rect;
    Pathd__V1__Cell min, max;
} rect_msg;

static Pathd__V1__Rect *rect_init(rect_msg *r, int32_t x0, int32_t y0, int32_t x1, int32_t y1)
{
    pathd__v1__rect__init(&r->rect);
    pathd__v1__cell__init(&r->min);
    pathd__v1__cell__init(&r->max);
    r->min.x = x0;
    r->min.y = y0;
    r->max.x = x1;
    r->max.y = y1;
    r->rect.min = &r->min;
    r->rect.max = &r->max;
    return &r->rect;
}

static void test_decode_find_path_options_round_trip(void **state)
{
    static cell_list avoid;
    find_path_msg m;
    rect_msg window;
    pd_request req;
    (void)state;
    find_path_init(&m);
    m.fp.goal_mode = PATHD__V1__GOAL_MODE__GOAL_LINE;
    m.fp.snap = 1;
    m.fp.partial_on_cutoff = 1;
    m.fp.speed = 2.5;
    m.fp.start_time = -3.25;
    m.fp.style = PATHD__V1__WAYPOINT_STYLE__STYLE_SMOOTH;
    m.fp.avoid = cell_list_fill(&avoid, 3);
    m.fp.n_avoid = 3;
    m.fp.window = rect_init(&window, 0, 2, 30, 2);
    assert_int_equal(decode_find_path(&m, &req), PD_OK);
    const pd_find_path_req *fp = &req.u.find_path;
    assert_int_equal(fp->goal_mode, PD_GOAL_LINE);
    assert_int_equal(fp->style, PD_STYLE_SMOOTH);
    assert_int_equal(fp->snap, 1);
    assert_int_equal(fp->partial_on_cutoff, 1);
    assert_true(fp->speed == 2.5);
    assert_true(fp->start_time == -3.25);
    assert_int_equal(fp->has_window, 1);
    assert_int_equal(fp->window_min.x, 0);
    assert_int_equal(fp->window_min.y, 2);
    assert_int_equal(fp->window_max.x, 30);
    assert_int_equal(fp->window_max.y, 2);
    /* The avoid cells are copied: the request owns them, not protobuf-c. */
    assert_int_equal(fp->n_avoid, 3);
    assert_non_null(fp->avoid);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(fp->avoid[i].x, (int32_t)i - 5);
        assert_int_equal(fp->avoid[i].y, (int32_t)(i * 3));
    }
    pd_request_free(&req);
    assert_null(req.u.find_path.avoid);
    assert_int_equal(req.u.find_path.n_avoid, 0);
    pd_request_free(&req); /* twice is harmless */

    m.fp.goal_mode = PATHD__V1__GOAL_MODE__GOAL_NEAREST;
    m.fp.avoid = cell_list_fill(&avoid, PD_CODEC_MAX_AVOID);
    m.fp.n_avoid = PD_CODEC_MAX_AVOID; /* the cap itself is allowed */
    assert_int_equal(decode_find_path(&m, &req), PD_OK);
    assert_int_equal(req.u.find_path.goal_mode, PD_GOAL_NEAREST);
    assert_int_equal(req.u.find_path.n_avoid, PD_CODEC_MAX_AVOID);
    assert_int_equal(req.u.find_path.avoid[PD_CODEC_MAX_AVOID - 1].x, (int32_t)PD_CODEC_MAX_AVOID - 6);
    pd_request_free(&req);
}

static void test_decode_find_path_option_errors(void **state)
{
    static cell_list avoid;
    find_path_msg m;
    rect_msg window;
    (void)state;

    find_path_init(&m);
    m.fp.goal_mode = (Pathd__V1__GoalMode)3;
    expect_invalid(&m.req, "find_path.goal_mode 3");
    m.fp.goal_mode = (Pathd__V1__GoalMode)-1;
    expect_invalid(&m.req, "find_path.goal_mode -1");

    find_path_init(&m);
    m.fp.speed = -0.5;
    expect_invalid(&m.req, "find_path.speed");
    m.fp.speed = NAN;
    expect_invalid(&m.req, "find_path.speed");
    m.fp.speed = INFINITY;
    expect_invalid(&m.req, "find_path.speed");

    find_path_init(&m);
    m.fp.start_time = NAN;
    expect_invalid(&m.req, "find_path.start_time");
    m.fp.start_time = -INFINITY;
    expect_invalid(&m.req, "find_path.start_time");

    find_path_init(&m);
    m.fp.avoid = cell_list_fill(&avoid, PD_CODEC_MAX_AVOID + 1);
    m.fp.n_avoid = PD_CODEC_MAX_AVOID + 1;
    expect_invalid(&m.req, "find_path.avoid");

    find_path_init(&m);
    m.fp.window = rect_init(&window, 5, 0, 4, 9);
    expect_invalid(&m.req, "find_path.window min (5,0) is not <= max (4,9)");
    m.fp.window = rect_init(&window, 0, 10, 4, 9);
    expect_invalid(&m.req, "find_path.window min");
    m.fp.window = rect_init(&window, -1, 0, 4, 9);
    expect_invalid(&m.req, "find_path.window has a negative corner");
    m.fp.window = rect_init(&window, 0, -3, 4, 9);
    expect_invalid(&m.req, "find_path.window has a negative corner");
    m.fp.window = rect_init(&window, 0, 0, 4, 9);
    window.rect.max = NULL;
    expect_invalid(&m.req, "find_path.window needs both min and max");
    m.fp.window = rect_init(&window, 0, 0, 4, 9);
    window.rect.min = NULL;
    expect_invalid(&m.req, "find_path.window needs both min and max");

    /* A failure after the avoid list was copied leaks nothing (ASan). */
    find_path_init(&m);
    m.fp.avoid = cell_list_fill(&avoid, 2);
    m.fp.n_avoid = 2;
    m.fp.window = rect_init(&window, 3, 3, 1, 1);
    expect_invalid(&m.req, "find_path.window");
}

typedef struct update_msg {
    Pathd__V1__Request req;
    Pathd__V1__UpdateCells uc;
    Pathd__V1__CellList list;
    rect_msg rect;
} update_msg;

static void update_init_rect(update_msg *m, int32_t x0, int32_t y0, int32_t x1, int32_t y1)
{
    pathd__v1__request__init(&m->req);
    pathd__v1__update_cells__init(&m->uc);
    pathd__v1__cell_list__init(&m->list);
    m->uc.scene = "town";
    m->uc.target_case = PATHD__V1__UPDATE_CELLS__TARGET_RECT;
    m->uc.rect = rect_init(&m->rect, x0, y0, x1, y1);
    m->uc.op = PATHD__V1__UPDATE_OP__UPDATE_BLOCK;
    m->req.id = TEST_ID;
    m->req.body_case = PATHD__V1__REQUEST__BODY_UPDATE_CELLS;
    m->req.update_cells = &m->uc;
}

static void update_use_cells(update_msg *m, cell_list *cells, size_t n)
{
    m->list.cells = cell_list_fill(cells, n);
    m->list.n_cells = n;
    m->uc.target_case = PATHD__V1__UPDATE_CELLS__TARGET_CELLS;
    m->uc.cells = &m->list;
}

static void test_decode_update_cells_round_trip(void **state)
{
    static cell_list cells;
    update_msg m;
    pd_request req;
    char err[256];
    (void)state;

    update_init_rect(&m, 2, 3, 7, 4);
    assert_int_equal(wire_decode_request(&m.req, &req, err, sizeof err), PD_OK);
    assert_int_equal(req.id, TEST_ID);
    assert_int_equal(req.kind, PD_REQ_UPDATE_CELLS);
    assert_string_equal(req.u.update_cells.scene, "town");
    assert_int_equal(req.u.update_cells.update.op, PD_UPDATE_BLOCK);
    assert_int_equal(req.u.update_cells.update.cost, 0);
    assert_int_equal(req.u.update_cells.update.is_rect, 1);
    assert_int_equal(req.u.update_cells.update.rect_min.x, 2);
    assert_int_equal(req.u.update_cells.update.rect_min.y, 3);
    assert_int_equal(req.u.update_cells.update.rect_max.x, 7);
    assert_int_equal(req.u.update_cells.update.rect_max.y, 4);
    assert_null(req.u.update_cells.cells);
    pd_request_free(&req);

    update_init_rect(&m, 0, 0, 0, 0);
    update_use_cells(&m, &cells, 4);
    m.uc.op = PATHD__V1__UPDATE_OP__UPDATE_COST;
    m.uc.cost = 255;
    assert_int_equal(wire_decode_request(&m.req, &req, err, sizeof err), PD_OK);
    assert_int_equal(req.u.update_cells.update.op, PD_UPDATE_COST);
    assert_int_equal(req.u.update_cells.update.cost, 255);
    assert_int_equal(req.u.update_cells.update.is_rect, 0);
    assert_int_equal(req.u.update_cells.update.n_cells, 4);
    assert_ptr_equal(req.u.update_cells.update.cells, req.u.update_cells.cells);
    assert_int_equal(req.u.update_cells.cells[3].x, -2);
    assert_int_equal(req.u.update_cells.cells[3].y, 9);
    pd_request_free(&req);
    assert_null(req.u.update_cells.cells);
    assert_null(req.u.update_cells.update.cells);

    m.uc.op = PATHD__V1__UPDATE_OP__UPDATE_PASS;
    m.uc.cost = 0;
    assert_int_equal(wire_decode_request(&m.req, &req, err, sizeof err), PD_OK);
    assert_int_equal(req.u.update_cells.update.op, PD_UPDATE_PASS);
    pd_request_free(&req);

    /* The largest rectangle allowed: exactly PD_SCENE_MAX_UPDATE_CELLS. */
    update_init_rect(&m, 0, 0, 1023, 1023);
    assert_int_equal(wire_decode_request(&m.req, &req, err, sizeof err), PD_OK);
    pd_request_free(&req);
}

/* idempotency_key: up to PD_IDEMPOTENCY_KEY_MAX bytes of printable ASCII
 * reach the request (empty: none); one byte more, or a byte outside
 * printable ASCII, is INVALID_ARGUMENT naming the field. The same rule on
 * DropScene (the scene kinds share the decoder). */
static void test_decode_idempotency_key(void **state)
{
    update_msg m;
    pd_request req;
    char err[256];
    char key[PD_IDEMPOTENCY_KEY_MAX + 2];
    (void)state;

    update_init_rect(&m, 2, 3, 7, 4);
    assert_int_equal(wire_decode_request(&m.req, &req, err, sizeof err), PD_OK);
    assert_string_equal(req.u.update_cells.idem_key, "");
    pd_request_free(&req);
    memset(key, '~', PD_IDEMPOTENCY_KEY_MAX);
    key[0] = ' ';
    key[PD_IDEMPOTENCY_KEY_MAX] = '\0';
    m.uc.idempotency_key = key;
    assert_int_equal(wire_decode_request(&m.req, &req, err, sizeof err), PD_OK);
    assert_string_equal(req.u.update_cells.idem_key, key);
    pd_request_free(&req);
    key[PD_IDEMPOTENCY_KEY_MAX] = 'x';
    key[PD_IDEMPOTENCY_KEY_MAX + 1] = '\0';
    expect_invalid(&m.req, "update_cells.idempotency_key is 65 bytes; at most 64");
    m.uc.idempotency_key = "tab\there";
    expect_invalid(&m.req, "update_cells.idempotency_key byte 3 is not printable ASCII");
    m.uc.idempotency_key = "caf\xc3\xa9";
    expect_invalid(&m.req, "update_cells.idempotency_key byte 3");

    Pathd__V1__Request r = PATHD__V1__REQUEST__INIT;
    Pathd__V1__DropScene d = PATHD__V1__DROP_SCENE__INIT;
    d.name = "arena";
    d.idempotency_key = "drop-1";
    r.id = TEST_ID;
    r.body_case = PATHD__V1__REQUEST__BODY_DROP_SCENE;
    r.drop_scene = &d;
    assert_int_equal(wire_decode_request(&r, &req, err, sizeof err), PD_OK);
    assert_string_equal(req.u.change.idem_key, "drop-1");
    pd_request_free(&req);
    d.idempotency_key = "\x7f";
    expect_invalid(&r, "drop_scene.idempotency_key");
}

static void test_decode_update_cells_errors(void **state)
{
    static cell_list cells;
    update_msg m;
    (void)state;

    update_init_rect(&m, 0, 0, 1, 1);
    m.uc.scene = "";
    expect_invalid(&m.req, "update_cells.scene is empty");

    update_init_rect(&m, 0, 0, 1, 1);
    m.uc.target_case = PATHD__V1__UPDATE_CELLS__TARGET__NOT_SET;
    m.uc.rect = NULL;
    expect_invalid(&m.req, "update_cells has neither rect nor cells");

    update_init_rect(&m, 0, 0, 1, 1);
    m.uc.op = (Pathd__V1__UpdateOp)4;
    expect_invalid(&m.req, "update_cells.op 4");
    /* Ops with the top-level target also set; a bad op names its index. */
    update_init_rect(&m, 0, 0, 1, 1);
    Pathd__V1__CellOp op0 = PATHD__V1__CELL_OP__INIT, op1 = PATHD__V1__CELL_OP__INIT;
    Pathd__V1__CellOp *ops[] = { &op0, &op1 };
    Pathd__V1__Rect r0 = PATHD__V1__RECT__INIT;
    Pathd__V1__Cell c0 = PATHD__V1__CELL__INIT, c1 = PATHD__V1__CELL__INIT;
    r0.min = &c0;
    r0.max = &c1;
    op0.target_case = op1.target_case = PATHD__V1__CELL_OP__TARGET_RECT;
    op0.rect = op1.rect = &r0;
    op1.op = PATHD__V1__UPDATE_OP__UPDATE_RESTORE;
    op1.cost = 3;
    m.uc.n_ops = 2;
    m.uc.ops = ops;
    expect_invalid(&m.req, "update_cells has ops");
    m.uc.target_case = PATHD__V1__UPDATE_CELLS__TARGET__NOT_SET;
    m.uc.rect = NULL;
    expect_invalid(&m.req, "update_cells.ops[1].cost 3 is only allowed with UPDATE_COST");
    op1.cost = 0;
    {
        uint8_t buf[512];
        size_t len = pathd__v1__request__pack(&m.req, buf);
        pd_request req;
        char err[256];
        memset(&req, 0, sizeof req);
        assert_int_equal(pd_codec_decode_request(buf, len, &req, err, sizeof err), PD_OK);
        assert_int_equal(req.u.update_cells.n_ops, 2);
        assert_int_equal(req.u.update_cells.ops[1].op, PD_UPDATE_RESTORE);
        pd_request_free(&req);
    }
    m.uc.n_ops = 0;
    m.uc.ops = NULL;
    update_init_rect(&m, 0, 0, 1, 1);
    m.uc.op = (Pathd__V1__UpdateOp)-2;
    expect_invalid(&m.req, "update_cells.op -2");

    update_init_rect(&m, 0, 0, 1, 1);
    m.uc.op = PATHD__V1__UPDATE_OP__UPDATE_COST;
    m.uc.cost = 0;
    expect_invalid(&m.req, "update_cells.cost 0 is not 1..255");
    m.uc.cost = 256;
    expect_invalid(&m.req, "update_cells.cost 256 is not 1..255");
    m.uc.op = PATHD__V1__UPDATE_OP__UPDATE_BLOCK;
    m.uc.cost = 5;
    expect_invalid(&m.req, "only allowed with UPDATE_COST");
    m.uc.op = PATHD__V1__UPDATE_OP__UPDATE_PASS;
    expect_invalid(&m.req, "only allowed with UPDATE_COST");

    update_init_rect(&m, 4, 0, 3, 1);
    expect_invalid(&m.req, "update_cells.rect min (4,0) is not <= max (3,1)");
    update_init_rect(&m, 0, 0, 1, 1);
    m.rect.rect.max = NULL;
    expect_invalid(&m.req, "update_cells.rect needs both min and max");
    update_init_rect(&m, 0, 0, 1024, 1023);
    expect_invalid(&m.req, "update_cells.rect covers 1025 x 1024 cells");
    update_init_rect(&m, INT32_MIN, INT32_MIN, INT32_MAX, INT32_MAX);
    expect_invalid(&m.req, "update_cells.rect covers");

    update_init_rect(&m, 0, 0, 1, 1);
    update_use_cells(&m, &cells, 0);
    expect_invalid(&m.req, "update_cells.cells is empty");
}

static void test_encode_path_issue4_fields(void **state)
{
    scene_fixture f;
    answer_in job;
    size_t len;
    uint8_t *buf;
    frames fr;
    (void)state;
    scene_fixture_init(&f, "town", 40, 30);

    /* A plain answer carries none of the optional fields. */
    make_job(&job, &f.scene, 3, PD_OK);
    buf = encode_path(&job, 256, &len);
    unpack_frames(buf, len, &fr);
    assert_null(fr.r[0]->path->start_used);
    assert_null(fr.r[0]->path->goal_used);
    assert_int_equal(fr.r[0]->path->cutoff, PATHD__V1__STATUS__OK);
    assert_int_equal(wp_count(fr.r[0]->path->points), 3);
    assert_int_equal(fr.r[0]->path->points->n_t, 0);
    free_frames(&fr);
    free(buf);
    free(job.path);

    /* Times on every waypoint of every chunk; substituted endpoints and the
     * cutoff on the final chunk only. */
    make_job(&job, &f.scene, 5, PD_PARTIAL);
    job.times = malloc(5 * sizeof *job.times);
    assert_non_null(job.times);
    for (size_t i = 0; i < 5; i++)
        job.times[i] = 10.0 + 0.5 * (double)i;
    job.start_substituted = 1;
    job.start_used = (pd_point){7, 8};
    job.goal_substituted = 1;
    job.goal_used = (pd_point){4, 0};
    job.metrics.cutoff = PD_BUDGET_EXCEEDED;
    buf = encode_path(&job, 2, &len);
    unpack_frames(buf, len, &fr);
    assert_int_equal(fr.n, 3);
    size_t k = 0;
    for (size_t i = 0; i < fr.n; i++) {
        const Pathd__V1__PathChunk *c = fr.r[i]->path;
        for (size_t w = 0; w < wp_count(c->points); w++, k++)
            assert_true(wp_at(c->points, w).t == 10.0 + 0.5 * (double)k);
        if (i + 1 < fr.n) {
            assert_null(c->start_used);
            assert_null(c->goal_used);
            assert_int_equal(c->cutoff, PATHD__V1__STATUS__OK);
        }
    }
    const Pathd__V1__PathChunk *last = fr.r[2]->path;
    assert_int_equal(fr.r[2]->status, PATHD__V1__STATUS__PARTIAL);
    assert_non_null(last->start_used);
    assert_int_equal(last->start_used->x, 7);
    assert_int_equal(last->start_used->y, 8);
    assert_non_null(last->goal_used);
    assert_int_equal(last->goal_used->x, 4);
    assert_int_equal(last->goal_used->y, 0);
    assert_int_equal(last->cutoff, PATHD__V1__STATUS__BUDGET_EXCEEDED);
    free_frames(&fr);
    free(buf);
    free(job.path);
    free(job.times);
    scene_fixture_free(&f);
}

static void test_encode_update(void **state)
{
    answer_in job;
    size_t len;
    uint8_t *buf;
    frames fr;
    (void)state;
    memset(&job, 0, sizeof job);
    job.kind = ANSWER_UPDATE_CELLS;
    job.request_id = 31;
    strcpy(job.update_scene, "town");
    job.status = PD_OK;
    job.update_result.version = 12;
    job.update_result.cells_changed = 1024;
    job.update_result.micros = 345;
    buf = encode_update(&job, &len);
    unpack_frames(buf, len, &fr);
    assert_int_equal(fr.n, 1);
    assert_int_equal(fr.r[0]->id, 31);
    assert_int_equal(fr.r[0]->status, PATHD__V1__STATUS__OK);
    assert_true(fr.r[0]->final);
    assert_int_equal(fr.r[0]->body_case, PATHD__V1__RESPONSE__BODY_UPDATE);
    assert_int_equal(fr.r[0]->update->version, 12);
    assert_int_equal(fr.r[0]->update->cells_changed, 1024);
    assert_int_equal(fr.r[0]->update->micros, 345);
    free_frames(&fr);
    free(buf);

    job.status = PD_OUT_OF_BOUNDS;
    buf = encode_update(&job, &len);
    unpack_frames(buf, len, &fr);
    assert_int_equal(fr.n, 1);
    assert_int_equal(fr.r[0]->id, 31);
    assert_int_equal(fr.r[0]->status, PATHD__V1__STATUS__OUT_OF_BOUNDS);
    assert_true(fr.r[0]->final);
    assert_int_equal(fr.r[0]->body_case, PATHD__V1__RESPONSE__BODY_ERROR);
    assert_non_null(strstr(fr.r[0]->error->message, "town"));
    free_frames(&fr);
    free(buf);
}

/* ---- GetSceneGrid / SceneGrid ------------------------------------------ */

typedef struct grid_msg {
    Pathd__V1__Request req;
    Pathd__V1__GetSceneGrid body;
} grid_msg;

static void grid_msg_init(grid_msg *m, const char *scene, uint32_t unit, int32_t row_start, int32_t row_count)
{
    pathd__v1__request__init(&m->req);
    pathd__v1__get_scene_grid__init(&m->body);
    m->body.scene = (char *)scene;
    m->body.unit_size = unit;
    m->body.row_start = row_start;
    m->body.row_count = row_count;
    m->req.id = TEST_ID;
    m->req.body_case = PATHD__V1__REQUEST__BODY_SCENE_GRID;
    m->req.scene_grid = &m->body;
}

static void expect_grid_decodes(const char *scene, uint32_t unit, int32_t row_start, int32_t row_count,
                                uint32_t want_unit)
{
    grid_msg m;
    pd_request req;
    char err[256];
    grid_msg_init(&m, scene, unit, row_start, row_count);
    pd_status st = wire_decode_request(&m.req, &req, err, sizeof err);
    if (st != PD_OK)
        fail_msg("GetSceneGrid(%s, %u, %d, %d): %s (%s)", scene, (unsigned)unit, (int)row_start, (int)row_count,
                 pd_status_name(st), err);
    assert_int_equal(req.id, TEST_ID);
    assert_int_equal(req.kind, PD_REQ_SCENE_GRID);
    assert_string_equal(req.u.grid.scene, scene);
    assert_int_equal(req.u.grid.unit_size, want_unit);
    assert_int_equal(req.u.grid.row_start, row_start);
    assert_int_equal(req.u.grid.row_count, row_count);
    pd_request_free(&req);
}

static void test_decode_scene_grid_round_trip(void **state)
{
    (void)state;
    expect_grid_decodes("town", 0, 0, 0, 1);     /* 0 means the scene grid, unit 1 */
    expect_grid_decodes("town", 1, 5, 7, 1);
    expect_grid_decodes("forest", 3, 1000, 1, 3);
    /* The largest values each field allows. */
    expect_grid_decodes("f", PD_CONF_MAX_UNIT_SIZE, PD_GRID_MAX_SIDE, PD_GRID_MAX_SIDE, PD_CONF_MAX_UNIT_SIZE);
}

static void expect_grid_invalid(const char *scene, uint32_t unit, int32_t row_start, int32_t row_count,
                                const char *needle)
{
    grid_msg m;
    pd_request req;
    char err[256];
    grid_msg_init(&m, scene, unit, row_start, row_count);
    expect_invalid(&m.req, needle);
    /* The kind survives the refusal, so the answer is counted as a grid request. */
    assert_int_equal(wire_decode_request(&m.req, &req, err, sizeof err), PD_INVALID_ARGUMENT);
    assert_int_equal(req.kind, PD_REQ_SCENE_GRID);
    pd_request_free(&req);
}

static void test_decode_scene_grid_errors(void **state)
{
    char too_long[PD_CONF_MAX_NAME + 1];
    (void)state;
    memset(too_long, 'a', PD_CONF_MAX_NAME);
    too_long[PD_CONF_MAX_NAME] = '\0';
    expect_grid_invalid("", 1, 0, 0, "scene_grid.scene is empty");
    expect_grid_invalid(too_long, 1, 0, 0, "scene_grid.scene is");
    expect_grid_invalid("bad\xC3(", 1, 0, 0, "not valid UTF-8");
    expect_grid_invalid("tab\tname", 1, 0, 0, "control character");
    expect_grid_invalid("town", PD_CONF_MAX_UNIT_SIZE + 1, 0, 0, "scene_grid.unit_size");
    expect_grid_invalid("town", UINT32_MAX, 0, 0, "scene_grid.unit_size");
    expect_grid_invalid("town", 1, -1, 0, "scene_grid.row_start -1");
    expect_grid_invalid("town", 1, PD_GRID_MAX_SIDE + 1, 0, "scene_grid.row_start");
    expect_grid_invalid("town", 1, INT32_MIN, 0, "scene_grid.row_start");
    expect_grid_invalid("town", 1, 0, -1, "scene_grid.row_count -1");
    expect_grid_invalid("town", 1, 0, PD_GRID_MAX_SIDE + 1, "scene_grid.row_count");
}

/* Checks one SceneGrid answer against the grid it was cut from. */
static void check_grid_band(const Pathd__V1__Response *r, uint64_t id, const pd_grid *g, uint64_t version,
                            int32_t row_start, int32_t rows)
{
    assert_int_equal(r->id, id);
    assert_int_equal(r->status, PATHD__V1__STATUS__OK);
    assert_true(r->final);
    assert_int_equal(r->body_case, PATHD__V1__RESPONSE__BODY_SCENE_GRID);
    const Pathd__V1__SceneGrid *m = r->scene_grid;
    assert_int_equal(m->width, g->width);
    assert_int_equal(m->height, g->height);
    assert_int_equal(m->version, version);
    assert_int_equal(m->row_start, row_start);
    assert_int_equal(m->row_count, rows);
    assert_int_equal(m->cells.len, (size_t)rows * (size_t)g->width);
    for (int32_t y = 0; y < rows; y++)
        for (int32_t x = 0; x < g->width; x++)
            if (m->cells.data[(size_t)y * (size_t)g->width + (size_t)x] != pd_grid_get(g, x, row_start + y))
                fail_msg("cell (%d,%d) differs", (int)x, (int)(row_start + y));
}

static void test_encode_scene_grid(void **state)
{
    scene_fixture f;
    size_t len;
    uint8_t *buf;
    frames fr;
    (void)state;
    scene_fixture_init(&f, "alpha", 40, 30);
    /* Costs 1..3 and walls, so a copy that drops or shifts a byte shows. */
    assert_int_equal(pd_grid_get(f.scene.grid, 0, 0), PD_CELL_BLOCKED);
    assert_int_equal(pd_grid_get(f.scene.grid, 1, 0), 2);

    buf = pd_codec_encode_scene_grid(5, f.scene.grid, f.scene.version, 0, 30, &len);
    unpack_frames(buf, len, &fr);
    assert_int_equal(fr.n, 1);
    check_grid_band(fr.r[0], 5, f.scene.grid, 7, 0, 30);
    free_frames(&fr);
    free(buf);

    buf = pd_codec_encode_scene_grid(6, f.scene.grid, 99, 29, 1, &len);
    unpack_frames(buf, len, &fr);
    check_grid_band(fr.r[0], 6, f.scene.grid, 99, 29, 1);
    free_frames(&fr);
    free(buf);

    buf = pd_codec_encode_scene_grid(7, f.scene.grid, 7, 11, 8, &len);
    unpack_frames(buf, len, &fr);
    check_grid_band(fr.r[0], 7, f.scene.grid, 7, 11, 8);
    free_frames(&fr);
    free(buf);

    /* Rows outside the grid are the caller's bug: no answer rather than
     * bytes from the padding or beyond. */
    len = 123;
    assert_null(pd_codec_encode_scene_grid(8, f.scene.grid, 7, 0, 0, &len));
    assert_int_equal(len, 0);
    assert_null(pd_codec_encode_scene_grid(8, f.scene.grid, 7, 25, 6, &len));
    assert_null(pd_codec_encode_scene_grid(8, f.scene.grid, 7, -1, 2, &len));
    assert_null(pd_codec_encode_scene_grid(8, f.scene.grid, 7, 30, 1, &len));
    assert_null(pd_codec_encode_scene_grid(8, f.scene.grid, 7, 0, INT32_MAX, &len));
    assert_null(pd_codec_encode_scene_grid(8, NULL, 7, 0, 1, &len));
    scene_fixture_free(&f);
}

/* A band of PD_SCENE_GRID_BAND_BYTES, the most the server sends, frames
 * below the default 1 MiB cap even for the widest grid. */
static void test_encode_scene_grid_band_fits_a_frame(void **state)
{
    (void)state;
    pd_grid *g = pd_grid_create(PD_GRID_MAX_SIDE, 40);
    assert_non_null(g);
    for (int32_t y = 0; y < g->height; y++)
        for (int32_t x = 0; x < g->width; x++)
            pd_grid_set(g, x, y, (uint8_t)((x ^ y) & 0xFF));
    int32_t rows = (int32_t)(PD_SCENE_GRID_BAND_BYTES / (uint32_t)g->width);
    assert_true(rows >= 1 && rows < g->height);
    size_t len;
    uint8_t *buf = pd_codec_encode_scene_grid(9, g, 3, 2, rows, &len);
    frames fr;
    unpack_frames(buf, len, &fr);
    assert_int_equal(fr.n, 1);
    assert_true(fr.payload_len[0] < pd_conf_defaults.max_frame_bytes);
    assert_true(len < pd_conf_defaults.write_high_watermark);
    assert_true(fr.payload_len[0] >= PD_SCENE_GRID_BAND_BYTES);
    check_grid_band(fr.r[0], 9, g, 3, 2, rows);
    free_frames(&fr);
    free(buf);
    pd_grid_destroy(g);
}

/* ---- FindRoute ---------------------------------------------------------- */

/* A valid FindRoute request, initialised in place like find_path_msg. */
typedef struct find_route_msg {
    Pathd__V1__Request req;
    Pathd__V1__FindRoute fr;
    Pathd__V1__Point start, goal;
    Pathd__V1__Cell start_cell;
    Pathd__V1__WorldPoint goal_world;
} find_route_msg;

static void find_route_init(find_route_msg *m)
{
    pathd__v1__request__init(&m->req);
    pathd__v1__find_route__init(&m->fr);
    pathd__v1__point__init(&m->start);
    pathd__v1__point__init(&m->goal);
    pathd__v1__cell__init(&m->start_cell);
    pathd__v1__world_point__init(&m->goal_world);
    m->start_cell.x = 3;
    m->start_cell.y = 4;
    m->start.kind_case = PATHD__V1__POINT__KIND_CELL;
    m->start.cell = &m->start_cell;
    m->goal_world.x = 5.25;
    m->goal_world.y = -1.5;
    m->goal.kind_case = PATHD__V1__POINT__KIND_WORLD;
    m->goal.world = &m->goal_world;
    m->fr.from_scene = "town";
    m->fr.to_scene = "cellar";
    m->fr.start = &m->start;
    m->fr.goal = &m->goal;
    m->fr.unit_size = 2;
    m->fr.style = PATHD__V1__WAYPOINT_STYLE__STYLE_SMOOTH;
    m->fr.goal_mode = PATHD__V1__GOAL_MODE__GOAL_LINE;
    m->fr.speed = 1.5;
    m->fr.start_time = 10.0;
    m->fr.max_expansions = 5000;
    m->fr.deadline_ms = 300;
    m->req.id = TEST_ID;
    m->req.body_case = PATHD__V1__REQUEST__BODY_FIND_ROUTE;
    m->req.find_route = &m->fr;
}

static void test_decode_find_route_round_trip(void **state)
{
    find_route_msg m;
    pd_request req;
    char err[256];
    (void)state;
    find_route_init(&m);
    assert_int_equal(wire_decode_request(&m.req, &req, err, sizeof err), PD_OK);
    assert_int_equal(req.id, TEST_ID);
    assert_int_equal(req.kind, PD_REQ_FIND_ROUTE);
    const pd_find_route_req *fr = &req.u.find_route;
    assert_string_equal(fr->from_scene, "town");
    assert_string_equal(fr->to_scene, "cellar");
    assert_int_equal(fr->start.is_world, 0);
    assert_int_equal(fr->start.cell.x, 3);
    assert_int_equal(fr->start.cell.y, 4);
    assert_int_equal(fr->goal.is_world, 1);
    assert_true(fr->goal.wx == 5.25 && fr->goal.wy == -1.5);
    assert_int_equal(fr->unit_size, 2);
    assert_int_equal(fr->style, PD_STYLE_SMOOTH);
    assert_int_equal(fr->goal_mode, PD_GOAL_LINE);
    assert_true(fr->speed == 1.5 && fr->start_time == 10.0);
    assert_int_equal(fr->max_expansions, 5000);
    assert_int_equal(fr->deadline_ms, 300);
    pd_request_free(&req);

    /* Zero fields are the defaults: unit 1, every cell, EXACT. */
    m.fr.unit_size = 0;
    m.fr.style = PATHD__V1__WAYPOINT_STYLE__STYLE_CELLS;
    m.fr.goal_mode = PATHD__V1__GOAL_MODE__GOAL_EXACT;
    m.fr.speed = 0;
    m.fr.deadline_ms = PD_CODEC_MAX_DEADLINE_MS;
    assert_int_equal(wire_decode_request(&m.req, &req, err, sizeof err), PD_OK);
    assert_int_equal(req.u.find_route.unit_size, 1);
    assert_int_equal(req.u.find_route.style, PD_STYLE_CELLS);
    assert_int_equal(req.u.find_route.goal_mode, PD_GOAL_EXACT);
    assert_int_equal(req.u.find_route.deadline_ms, PD_CODEC_MAX_DEADLINE_MS);
    pd_request_free(&req);
}

static void test_decode_find_route_errors(void **state)
{
    find_route_msg m;
    (void)state;

    find_route_init(&m);
    m.fr.from_scene = "";
    expect_invalid(&m.req, "find_route.from_scene is empty");
    find_route_init(&m);
    m.fr.to_scene = "bad\nname";
    expect_invalid(&m.req, "find_route.to_scene contains a control character");
    find_route_init(&m);
    m.fr.start = NULL;
    expect_invalid(&m.req, "find_route.start is missing");
    find_route_init(&m);
    m.goal.kind_case = PATHD__V1__POINT__KIND__NOT_SET;
    expect_invalid(&m.req, "find_route.goal has neither cell nor world set");
    find_route_init(&m);
    m.goal_world.x = NAN;
    expect_invalid(&m.req, "find_route.goal.world is not a finite point");
    find_route_init(&m);
    m.fr.unit_size = PD_CONF_MAX_UNIT_SIZE + 1;
    expect_invalid(&m.req, "find_route.unit_size");
    find_route_init(&m);
    m.fr.style = (Pathd__V1__WaypointStyle)3;
    expect_invalid(&m.req, "find_route.style 3");
    find_route_init(&m);
    m.fr.goal_mode = (Pathd__V1__GoalMode)-1;
    expect_invalid(&m.req, "find_route.goal_mode -1");
    find_route_init(&m);
    m.fr.speed = -2;
    expect_invalid(&m.req, "find_route.speed");
    find_route_init(&m);
    m.fr.speed = INFINITY;
    expect_invalid(&m.req, "find_route.speed");
    find_route_init(&m);
    m.fr.start_time = NAN;
    expect_invalid(&m.req, "find_route.start_time");
    find_route_init(&m);
    m.fr.deadline_ms = PD_CODEC_MAX_DEADLINE_MS + 1;
    expect_invalid(&m.req, "find_route.deadline_ms");
}

/* A route job by hand: leg 0 in scene a (5 cells, timed, portal "door" to
 * b), leg 1 in scene b (3 cells, the last leg). */
static void make_route_job(answer_in *job, pd_route_leg legs[2], scene_fixture *a, scene_fixture *b,
                           pd_point *path0, pd_point *path1, double *t0, double *t1)
{
    memset(job, 0, sizeof *job);
    memset(legs, 0, 2 * sizeof *legs);
    for (int i = 0; i < 5; i++) {
        path0[i] = (pd_point){i, 2 * i};
        t0[i] = 1.0 + i;
    }
    for (int i = 0; i < 3; i++) {
        path1[i] = (pd_point){7, 7 + i};
        t1[i] = 8.0 + i;
    }
    legs[0] = (pd_route_leg){.scene = &a->scene, .path = path0, .path_len = 5, .times = t0, .cost = 6.5,
                           .has_portal = 1, .portal_exit = {4, 8}, .portal_entry = {7, 7}, .portal_cost = 2.25};
    strcpy(legs[0].portal, "door");
    strcpy(legs[0].next_scene, b->scene.name);
    legs[1] = (pd_route_leg){.scene = &b->scene, .path = path1, .path_len = 3, .times = t1, .cost = 2.0};
    job->kind = ANSWER_FIND_ROUTE;
    job->request_id = 77;
    job->status = PD_PARTIAL;
    job->legs = legs;
    job->n_legs = 2;
    job->metrics.cost = 10.75;
    job->metrics.expanded = 321;
    job->metrics.micros = 55;
    job->goal_substituted = 1;
    job->goal_used = (pd_point){7, 9};
    job->route_pinned = 1;
    job->want_world = 1;
}

static void check_route_waypoint(wp w, const pd_scene *scene, pd_point cell, double t)
{
    double wx, wy;
    pd_scene_cell_center(scene, cell, &wx, &wy);
    assert_int_equal(w.x, cell.x);
    assert_int_equal(w.y, cell.y);
    assert_true(w.wx == wx && w.wy == wy);
    assert_true(w.t == t);
}

static void test_encode_route_legs(void **state)
{
    scene_fixture a, b;
    answer_in job;
    pd_route_leg legs[2];
    pd_point path0[5], path1[3];
    double t0[5], t1[3];
    size_t len;
    frames fr;
    (void)state;
    scene_fixture_init(&a, "alpha", 10, 20);
    scene_fixture_init(&b, "beta", 10, 20);
    b.scene.version = 9;
    b.scene.cell_size = 2.0;
    make_route_job(&job, legs, &a, &b, path0, path1, t0, t1);

    /* Two waypoints a frame: leg 0 takes 3 frames, leg 1 takes 2, then the
     * result. */
    uint8_t *buf = encode_route(&job, 2, &len);
    unpack_frames(buf, len, &fr);
    assert_int_equal(fr.n, 6);
    const uint32_t leg_of[5] = {0, 0, 0, 1, 1}, seq_of[5] = {0, 1, 2, 0, 1};
    size_t next[2] = {0, 0};
    for (size_t i = 0; i < 5; i++) {
        const Pathd__V1__Response *r = fr.r[i];
        assert_int_equal(r->id, 77);
        assert_false(r->final);
        assert_int_equal(r->body_case, PATHD__V1__RESPONSE__BODY_ROUTE_LEG);
        const Pathd__V1__RouteLeg *l = r->route_leg;
        const pd_route_leg *jl = &legs[leg_of[i]];
        assert_int_equal(l->leg, leg_of[i]);
        assert_int_equal(l->seq, seq_of[i]);
        assert_string_equal(l->scene, jl->scene->name);
        assert_int_equal(l->scene_version, jl->scene->version);
        for (size_t k = 0; k < wp_count(l->points); k++, next[leg_of[i]]++)
            check_route_waypoint(wp_at(l->points, k), jl->scene, jl->path[next[leg_of[i]]],
                                 jl->times[next[leg_of[i]]]);
        int end = i == 2 || i == 4;
        assert_int_equal(l->leg_end, end);
        if (!end) {
            assert_null(l->portal);
            assert_int_equal(wp_count(l->points), 2);
            continue;
        }
        assert_true(l->cost == jl->cost);
        assert_int_equal(l->total_waypoints, jl->path_len);
        if (i == 4) {
            assert_null(l->portal);
            continue;
        }
        assert_non_null(l->portal);
        assert_string_equal(l->portal->name, "door");
        assert_string_equal(l->portal->to_scene, "beta");
        assert_int_equal(l->portal->exit->x, 4);
        assert_int_equal(l->portal->exit->y, 8);
        assert_int_equal(l->portal->entry->x, 7);
        assert_int_equal(l->portal->entry->y, 7);
        assert_true(l->portal->cost == 2.25);
    }
    assert_int_equal(next[0], 5);
    assert_int_equal(next[1], 3);

    const Pathd__V1__Response *last = fr.r[5];
    assert_true(last->final);
    assert_int_equal(last->status, PATHD__V1__STATUS__PARTIAL);
    assert_int_equal(last->body_case, PATHD__V1__RESPONSE__BODY_ROUTE_RESULT);
    const Pathd__V1__RouteResult *rr = last->route_result;
    assert_int_equal(rr->legs, 2);
    assert_true(rr->total_cost == 10.75);
    assert_int_equal(rr->n_leg_costs, 2);
    assert_true(rr->leg_costs[0] == 6.5 && rr->leg_costs[1] == 2.0);
    assert_int_equal(rr->n_scene_versions, 2);
    assert_int_equal(rr->scene_versions[0], 7);
    assert_int_equal(rr->scene_versions[1], 9);
    assert_int_equal(rr->expansions, 321);
    assert_int_equal(rr->micros, 55);
    assert_true(rr->pinned);
    assert_non_null(rr->goal_used);
    assert_int_equal(rr->goal_used->x, 7);
    assert_int_equal(rr->goal_used->y, 9);
    free_frames(&fr);
    free(buf);

    /* max_per_chunk 0 counts as 1: one frame per waypoint. */
    buf = encode_route(&job, 0, &len);
    unpack_frames(buf, len, &fr);
    assert_int_equal(fr.n, 5 + 3 + 1);
    free_frames(&fr);
    free(buf);
    scene_fixture_free(&a);
    scene_fixture_free(&b);
}

static void test_encode_route_failure(void **state)
{
    answer_in job;
    size_t len;
    frames fr;
    (void)state;
    memset(&job, 0, sizeof job);
    job.kind = ANSWER_FIND_ROUTE;
    job.request_id = 78;
    job.status = PD_NO_PATH;
    job.metrics.expanded = 12;
    job.metrics.micros = 3;
    uint8_t *buf = encode_route(&job, 256, &len);
    unpack_frames(buf, len, &fr);
    assert_int_equal(fr.n, 1);
    assert_true(fr.r[0]->final);
    assert_int_equal(fr.r[0]->id, 78);
    assert_int_equal(fr.r[0]->status, PATHD__V1__STATUS__NO_PATH);
    assert_int_equal(fr.r[0]->body_case, PATHD__V1__RESPONSE__BODY_ROUTE_RESULT);
    assert_int_equal(fr.r[0]->route_result->legs, 0);
    assert_int_equal(fr.r[0]->route_result->n_leg_costs, 0);
    assert_int_equal(fr.r[0]->route_result->expansions, 12);
    assert_null(fr.r[0]->route_result->goal_used);
    free_frames(&fr);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_find_path_round_trip),
        cmocka_unit_test(test_decode_find_path_defaults),
        cmocka_unit_test(test_decode_find_path_limits_accepted),
        cmocka_unit_test(test_decode_other_kinds_round_trip),
        cmocka_unit_test(test_decode_no_body),
        cmocka_unit_test(test_decode_bad_scene_names),
        cmocka_unit_test(test_decode_bad_points),
        cmocka_unit_test(test_decode_bad_ranges),
        cmocka_unit_test(test_decode_bad_scene_info),
        cmocka_unit_test(test_decode_garbage_is_malformed),
        cmocka_unit_test(test_decode_truncated_is_malformed),
        cmocka_unit_test(test_decode_unknown_fields_ignored),
        cmocka_unit_test(test_peek_request),
        cmocka_unit_test(test_decode_element_cap),
        cmocka_unit_test(test_decode_nul_in_string),
        cmocka_unit_test(test_encode_path_chunks),
        cmocka_unit_test(test_encode_job_by_kind),
        cmocka_unit_test(test_encode_path_sizes_of_600_in_256),
        cmocka_unit_test(test_encode_path_without_path),
        cmocka_unit_test(test_encode_path_protocol_example),
        cmocka_unit_test(test_stamp_timing_on_the_final_frame),
        cmocka_unit_test(test_encode_error_and_ack),
        cmocka_unit_test(test_encode_pong_and_stats),
        cmocka_unit_test(test_encode_scene_info_and_list),
        cmocka_unit_test(test_encoded_frames_pass_the_reader),
        cmocka_unit_test(test_decode_find_path_options_round_trip),
        cmocka_unit_test(test_decode_find_path_option_errors),
        cmocka_unit_test(test_decode_update_cells_round_trip),
        cmocka_unit_test(test_decode_idempotency_key),
        cmocka_unit_test(test_decode_update_cells_errors),
        cmocka_unit_test(test_encode_path_issue4_fields),
        cmocka_unit_test(test_encode_update),
        cmocka_unit_test(test_decode_scene_grid_round_trip),
        cmocka_unit_test(test_decode_scene_grid_errors),
        cmocka_unit_test(test_encode_scene_grid),
        cmocka_unit_test(test_encode_scene_grid_band_fits_a_frame),
        cmocka_unit_test(test_decode_find_route_round_trip),
        cmocka_unit_test(test_decode_find_route_errors),
        cmocka_unit_test(test_encode_route_legs),
        cmocka_unit_test(test_encode_route_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
