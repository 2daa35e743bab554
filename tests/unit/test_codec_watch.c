/*
 * test_codec_watch.c - hearing about changes below the server: the changed
 * rectangle an update reports (pd_scene_apply_updates), the event built
 * from an update (pd_watch_event_from_update), the version check every
 * scene query makes (pd_query_check_version, pd_query_path_prepare,
 * pd_move_prepare), and on the wire Watch / Unwatch / min_version decoding
 * and the WatchEvent, STALE_VERSION and batch item encodings, read back
 * with protobuf-c as a client would.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pathd.pb-c.h"
#include "pd_codec.h"
#include "codec_wire.h"
#include "pd_frame.h"
#include "pd_movement.h"
#include "pd_query.h"
#include "pd_watch.h"
#include "open_scene.h"
#include "test_rng.h"

#define SIDE 24

/* ---- the changed rectangle --------------------------------------------- */

/* Random updates of every op, one to four operations each, rectangles and
 * cell lists: the reported rectangle is exactly the bounding box of the
 * cells whose value differs between the two versions. */
static void test_changed_rect_is_the_changed_cells(void **state)
{
    (void)state;
    uint64_t rng = 12;
    pd_scene *s = open_scene("r", SIDE);
    for (int round = 0; round < 400; round++) {
        pd_scene_update ops[4];
        pd_point cells[4][6];
        size_t n = 1 + (size_t)rng_below(&rng, 4);
        for (size_t k = 0; k < n; k++) {
            pd_scene_update *u = &ops[k];
            memset(u, 0, sizeof *u);
            u->op = (pd_update_op)rng_below(&rng, 4);
            u->cost = (uint8_t)(2 + rng_below(&rng, 9));
            u->is_rect = rng_below(&rng, 2);
            if (u->is_rect) {
                u->rect_min = (pd_point){ rng_below(&rng, SIDE), rng_below(&rng, SIDE) };
                u->rect_max = (pd_point){ u->rect_min.x + rng_below(&rng, SIDE - u->rect_min.x),
                                          u->rect_min.y + rng_below(&rng, SIDE - u->rect_min.y) };
            } else {
                u->n_cells = 1 + (size_t)rng_below(&rng, 6);
                for (size_t i = 0; i < u->n_cells; i++)
                    cells[k][i] = (pd_point){ rng_below(&rng, SIDE), rng_below(&rng, SIDE) };
                u->cells = cells[k];
            }
        }
        pd_scene *next = NULL;
        pd_scene_update_result res;
        assert_int_equal(pd_scene_apply_updates(s, ops, n, &next, &res), PD_OK);
        int32_t x0 = SIDE, y0 = SIDE, x1 = -1, y1 = -1;
        uint64_t differ = 0;
        for (int32_t y = 0; next && y < SIDE; y++)
            for (int32_t x = 0; x < SIDE; x++)
                if (pd_grid_get(s->grid, x, y) != pd_grid_get(next->grid, x, y)) {
                    differ++;
                    x0 = x < x0 ? x : x0;
                    y0 = y < y0 ? y : y0;
                    x1 = x > x1 ? x : x1;
                    y1 = y > y1 ? y : y1;
                }
        if (!next) {
            assert_int_equal(res.cells_changed, 0);
            continue;
        }
        /* Several operations may change a cell and change it back:
         * cells_changed counts every change, the rectangle covers them. */
        assert_true(res.cells_changed >= differ);
        if (differ > 0) {
            assert_true(res.changed_min.x <= x0 && res.changed_min.y <= y0);
            assert_true(res.changed_max.x >= x1 && res.changed_max.y >= y1);
        }
        if (n == 1) {
            assert_int_equal(res.cells_changed, differ);
            assert_int_equal(res.changed_min.x, x0);
            assert_int_equal(res.changed_min.y, y0);
            assert_int_equal(res.changed_max.x, x1);
            assert_int_equal(res.changed_max.y, y1);
        }
        assert_true(res.changed_min.x >= 0 && res.changed_max.x < SIDE && res.changed_min.y >= 0 &&
                    res.changed_max.y < SIDE);
        pd_scene_release(s);
        s = next;
    }
    pd_scene_release(s);
}

/* ---- the event of an update -------------------------------------------- */

static void test_event_from_update(void **state)
{
    (void)state;
    pd_point list[3] = { { 7, 2 }, { 3, 9 }, { 5, 4 } };
    pd_scene_update ops[2] = {
        { .op = PD_UPDATE_COST, .cost = 5, .is_rect = 1, .rect_min = { 1, 1 }, .rect_max = { 3, 2 } },
        { .op = PD_UPDATE_BLOCK, .cells = list, .n_cells = 3 },
    };
    pd_update_cells_req req;
    memset(&req, 0, sizeof req);
    snprintf(req.scene, sizeof req.scene, "town");
    req.ops = ops;
    req.n_ops = 2;
    pd_update_outcome out;
    memset(&out, 0, sizeof out);
    pd_watch_event ev;
    /* No cell changed: no version, no event. */
    assert_int_equal(pd_watch_event_from_update(&req, &out, &ev), -1);

    out.status = PD_INTERNAL; /* applied, but the journal failed: the version stands */
    out.update = (pd_scene_update_result){ .version = 9, .cells_changed = 8, .changed_min = { 1, 1 },
                                           .changed_max = { 7, 9 } };
    assert_int_equal(pd_watch_event_from_update(&req, &out, &ev), 0);
    assert_int_equal(ev.kind, PD_WATCH_UPDATED);
    assert_string_equal(ev.scene, "town");
    assert_int_equal(ev.version, 9);
    assert_int_equal(ev.cells_changed, 8);
    assert_true(ev.has_changed);
    assert_int_equal(ev.changed_max.y, 9);
    assert_int_equal(ev.n_ops, 2);
    assert_int_equal(ev.ops[0].op, PD_UPDATE_COST);
    assert_int_equal(ev.ops[0].cost, 5);
    assert_int_equal(ev.ops[0].cells, 6);
    assert_int_equal(ev.ops[0].max.x, 3);
    assert_int_equal(ev.ops[1].op, PD_UPDATE_BLOCK);
    assert_int_equal(ev.ops[1].cost, 0);
    assert_int_equal(ev.ops[1].cells, 3);
    assert_int_equal(ev.ops[1].min.x, 3);
    assert_int_equal(ev.ops[1].min.y, 2);
    assert_int_equal(ev.ops[1].max.x, 7);
    assert_int_equal(ev.ops[1].max.y, 9);

    /* The single-operation form: the list beside the update. */
    memset(&req, 0, sizeof req);
    snprintf(req.scene, sizeof req.scene, "town");
    req.update = (pd_scene_update){ .op = PD_UPDATE_PASS };
    req.cells = list;
    req.update.n_cells = 2;
    assert_int_equal(pd_watch_event_from_update(&req, &out, &ev), 0);
    assert_int_equal(ev.n_ops, 1);
    assert_int_equal(ev.ops[0].op, PD_UPDATE_PASS);
    assert_int_equal(ev.ops[0].cells, 2);
    assert_int_equal(ev.ops[0].min.x, 3);
    assert_int_equal(ev.ops[0].max.y, 9);
}

/* ---- the version check --------------------------------------------------- */

static void test_min_version_checks(void **state)
{
    (void)state;
    pd_scene *s = open_scene("v", SIDE);
    char err[PD_QUERY_MESSAGE_MAX];
    assert_int_equal(pd_query_check_version(s, 0, err, sizeof err), PD_OK);
    assert_int_equal(pd_query_check_version(s, 1, err, sizeof err), PD_OK);
    assert_int_equal(pd_query_check_version(s, 2, err, sizeof err), PD_STALE_VERSION);
    assert_non_null(strstr(err, "min_version 2"));
    assert_non_null(strstr(err, "version 1"));

    pd_find_path_req fp;
    memset(&fp, 0, sizeof fp);
    snprintf(fp.scene, sizeof fp.scene, "v");
    fp.unit_size = 1;
    fp.goal.cell = (pd_point){ 5, 5 };
    fp.min_version = 2;
    pd_path_query q;
    assert_int_equal(pd_query_path_prepare(s, &fp, 0, &q, err, sizeof err), PD_STALE_VERSION);
    fp.min_version = 1;
    assert_int_equal(pd_query_path_prepare(s, &fp, 0, &q, err, sizeof err), PD_OK);

    /* A movement query: refused before anything else, the version now in
     * the result. */
    pd_move_req m;
    memset(&m, 0, sizeof m);
    m.kind = PD_REQ_REACHABLE;
    snprintf(m.scene, sizeof m.scene, "v");
    m.unit_size = 1;
    m.b.cell = (pd_point){ 3, 3 };
    m.min_version = 7;
    pd_move_query mq;
    pd_move_result mr;
    pd_scene_retain(s);
    assert_int_equal(pd_move_prepare(s, &m, &mq, &mr), PD_STALE_VERSION);
    assert_int_equal(mr.version, 1);
    pd_move_query_release(&mq);
    m.min_version = 1;
    pd_scene_retain(s);
    assert_int_equal(pd_move_prepare(s, &m, &mq, &mr), PD_OK);
    pd_move_query_release(&mq);
    pd_scene_release(s);
}

/* ---- the wire ---------------------------------------------------------- */

/* The one frame in buf (*len bytes: read once buf is made), unpacked. */
static Pathd__V1__Response *one_frame(uint8_t *buf, const size_t *lenp)
{
    size_t len = *lenp;
    assert_non_null(buf);
    assert_true(len >= PD_FRAME_HEADER_BYTES);
    uint32_t n = ((uint32_t)buf[0] << 24) | ((uint32_t)buf[1] << 16) | ((uint32_t)buf[2] << 8) | buf[3];
    assert_int_equal(n + PD_FRAME_HEADER_BYTES, len);
    Pathd__V1__Response *r = pathd__v1__response__unpack(NULL, n, buf + PD_FRAME_HEADER_BYTES);
    assert_non_null(r);
    free(buf);
    return r;
}

static void test_decode_watch(void **state)
{
    (void)state;
    Pathd__V1__Request m = PATHD__V1__REQUEST__INIT;
    Pathd__V1__Watch w = PATHD__V1__WATCH__INIT;
    char *names[PD_WATCH_MAX_SCENES + 1];
    char bufs[PD_WATCH_MAX_SCENES + 1][16];
    for (size_t i = 0; i <= PD_WATCH_MAX_SCENES; i++) {
        snprintf(bufs[i], sizeof bufs[i], "s%zu", i);
        names[i] = bufs[i];
    }
    m.id = 5;
    m.body_case = PATHD__V1__REQUEST__BODY_WATCH;
    m.watch = &w;
    w.scenes = names;
    w.n_scenes = 3;
    pd_request req;
    char err[256];
    assert_int_equal(wire_decode_request(&m, &req, err, sizeof err), PD_OK);
    assert_int_equal(req.kind, PD_REQ_WATCH);
    assert_int_equal(req.u.watch.n_scenes, 3);
    assert_string_equal(req.u.watch.scenes[2], "s2");
    assert_string_equal(pd_request_kind_name(req.kind), "watch");
    pd_request_free(&req);
    assert_null(req.u.watch.scenes);

    w.n_scenes = PD_WATCH_MAX_SCENES;
    assert_int_equal(wire_decode_request(&m, &req, err, sizeof err), PD_OK);
    pd_request_free(&req);
    w.n_scenes = PD_WATCH_MAX_SCENES + 1;
    assert_int_equal(wire_decode_request(&m, &req, err, sizeof err), PD_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "watch.scenes"));
    pd_request_free(&req);
    w.n_scenes = 0;
    assert_int_equal(wire_decode_request(&m, &req, err, sizeof err), PD_INVALID_ARGUMENT);
    pd_request_free(&req);

    char *dup[] = { "a", "b", "a" };
    w.scenes = dup;
    w.n_scenes = 3;
    assert_int_equal(wire_decode_request(&m, &req, err, sizeof err), PD_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "'a' twice"));
    pd_request_free(&req);
    char *empty[] = { "a", "" };
    w.scenes = empty;
    w.n_scenes = 2;
    assert_int_equal(wire_decode_request(&m, &req, err, sizeof err), PD_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "watch.scenes[1]"));
    pd_request_free(&req);

    Pathd__V1__Unwatch u = PATHD__V1__UNWATCH__INIT;
    u.watch_id = 77;
    m.body_case = PATHD__V1__REQUEST__BODY_UNWATCH;
    m.unwatch = &u;
    assert_int_equal(wire_decode_request(&m, &req, err, sizeof err), PD_OK);
    assert_int_equal(req.kind, PD_REQ_UNWATCH);
    assert_int_equal(req.u.unwatch_target, 77);
}

/* min_version reaches the decoded request of every scene query. */
static void test_decode_min_version(void **state)
{
    (void)state;
    Pathd__V1__Request m = PATHD__V1__REQUEST__INIT;
    pd_request req;
    char err[256];
    Pathd__V1__Cell cell = PATHD__V1__CELL__INIT;
    Pathd__V1__Point pt = PATHD__V1__POINT__INIT;
    pt.kind_case = PATHD__V1__POINT__KIND_CELL;
    pt.cell = &cell;

    Pathd__V1__FindPath fp = PATHD__V1__FIND_PATH__INIT;
    fp.scene = "s";
    fp.start = &pt;
    fp.goal = &pt;
    fp.min_version = 11;
    m.body_case = PATHD__V1__REQUEST__BODY_FIND_PATH;
    m.find_path = &fp;
    assert_int_equal(wire_decode_request(&m, &req, err, sizeof err), PD_OK);
    assert_int_equal(req.u.find_path.min_version, 11);
    pd_request_free(&req);

    Pathd__V1__GetSceneInfo info = PATHD__V1__GET_SCENE_INFO__INIT;
    info.scene = "s";
    info.min_version = 12;
    m.body_case = PATHD__V1__REQUEST__BODY_SCENE_INFO;
    m.scene_info = &info;
    assert_int_equal(wire_decode_request(&m, &req, err, sizeof err), PD_OK);
    assert_int_equal(req.u.scene_info.min_version, 12);

    Pathd__V1__GetSceneGrid grid = PATHD__V1__GET_SCENE_GRID__INIT;
    grid.scene = "s";
    grid.min_version = 13;
    m.body_case = PATHD__V1__REQUEST__BODY_SCENE_GRID;
    m.scene_grid = &grid;
    assert_int_equal(wire_decode_request(&m, &req, err, sizeof err), PD_OK);
    assert_int_equal(req.u.grid.min_version, 13);

    Pathd__V1__Raycast ray = PATHD__V1__RAYCAST__INIT;
    ray.scene = "s";
    ray.from = &pt;
    ray.to = &pt;
    ray.min_version = 14;
    m.body_case = PATHD__V1__REQUEST__BODY_RAYCAST;
    m.raycast = &ray;
    assert_int_equal(wire_decode_request(&m, &req, err, sizeof err), PD_OK);
    assert_int_equal(req.u.move.min_version, 14);
    pd_request_free(&req);

    Pathd__V1__TimedPoint tp = PATHD__V1__TIMED_POINT__INIT, *tpp = &tp;
    tp.point = &pt;
    Pathd__V1__ValidateMove vm = PATHD__V1__VALIDATE_MOVE__INIT;
    vm.scene = "s";
    vm.moves = &tpp;
    vm.n_moves = 1;
    vm.max_speed = 1;
    vm.min_version = 15;
    Pathd__V1__DistanceToWall dw = PATHD__V1__DISTANCE_TO_WALL__INIT;
    dw.scene = "s";
    dw.at = &pt;
    dw.min_version = 16;
    Pathd__V1__Query q[3] = { PATHD__V1__QUERY__INIT, PATHD__V1__QUERY__INIT, PATHD__V1__QUERY__INIT };
    Pathd__V1__Query *qp[3] = { &q[0], &q[1], &q[2] };
    q[0].kind_case = PATHD__V1__QUERY__KIND_VALIDATE_MOVE;
    q[0].validate_move = &vm;
    q[1].kind_case = PATHD__V1__QUERY__KIND_DISTANCE_TO_WALL;
    q[1].distance_to_wall = &dw;
    q[2].kind_case = PATHD__V1__QUERY__KIND_FIND_PATH;
    q[2].find_path = &fp;
    Pathd__V1__Batch batch = PATHD__V1__BATCH__INIT;
    batch.items = qp;
    batch.n_items = 3;
    m.body_case = PATHD__V1__REQUEST__BODY_BATCH;
    m.batch = &batch;
    assert_int_equal(wire_decode_request(&m, &req, err, sizeof err), PD_OK);
    assert_int_equal(req.u.batch.items[0].min_version, 15);
    assert_int_equal(req.u.batch.items[1].min_version, 16);
    assert_int_equal(req.u.batch.items[2].min_version, 11);
    pd_request_free(&req);
}

/* An UPDATED event of scene at version, its changed rectangle (2,3)..(4,8)
 * over 5 cells; the caller adds its ops. */
static void updated_event(pd_watch_event *ev, const char *scene, uint64_t version)
{
    memset(ev, 0, sizeof *ev);
    ev->kind = PD_WATCH_UPDATED;
    snprintf(ev->scene, sizeof ev->scene, "%s", scene);
    ev->version = version;
    ev->has_changed = 1;
    ev->changed_min = (pd_point){ 2, 3 };
    ev->changed_max = (pd_point){ 4, 8 };
    ev->cells_changed = 5;
}

static void test_encode_watch_event(void **state)
{
    (void)state;
    pd_watch_event ev;
    updated_event(&ev, "town", 42);
    ev.n_ops = PD_SCENE_MAX_UPDATE_OPS;
    for (size_t k = 0; k < ev.n_ops; k++)
        ev.ops[k] = (pd_watch_op){ .op = PD_UPDATE_COST, .cost = (uint8_t)(k + 1), .min = { (int32_t)k, 0 },
                                   .max = { (int32_t)k, 9 }, .cells = 10 };
    size_t len = 0;
    Pathd__V1__Response *r = one_frame(pd_codec_encode_watch_event(9, &ev, 0, &len), &len);
    assert_int_equal(r->id, 9);
    assert_int_equal(r->status, PATHD__V1__STATUS__OK);
    assert_false(r->final);
    assert_int_equal(r->body_case, PATHD__V1__RESPONSE__BODY_WATCH_EVENT);
    const Pathd__V1__WatchEvent *m = r->watch_event;
    assert_int_equal(m->kind, PATHD__V1__WATCH_EVENT_KIND__SCENE_UPDATED);
    assert_string_equal(m->scene, "town");
    assert_int_equal(m->version, 42);
    assert_int_equal(m->cells_changed, 5);
    assert_int_equal(m->changed->min->x, 2);
    assert_int_equal(m->changed->max->y, 8);
    assert_int_equal(m->n_ops, PD_SCENE_MAX_UPDATE_OPS);
    assert_int_equal(m->ops[63]->op, PATHD__V1__UPDATE_OP__UPDATE_COST);
    assert_int_equal(m->ops[63]->cost, 64);
    assert_int_equal(m->ops[63]->bounds->min->x, 63);
    assert_int_equal(m->ops[63]->bounds->max->y, 9);
    assert_int_equal(m->ops[63]->cells, 10);
    pathd__v1__response__free_unpacked(r, NULL);

    /* The other kinds carry no rectangle or ops unless given. */
    memset(&ev, 0, sizeof ev);
    ev.kind = PD_WATCH_INSTANCED;
    snprintf(ev.scene, sizeof ev.scene, "tmpl");
    snprintf(ev.instance, sizeof ev.instance, "copy-7");
    ev.version = 3;
    r = one_frame(pd_codec_encode_watch_event(10, &ev, 1, &len), &len);
    assert_true(r->final);
    assert_int_equal(r->watch_event->kind, PATHD__V1__WATCH_EVENT_KIND__SCENE_INSTANCED);
    assert_string_equal(r->watch_event->instance, "copy-7");
    assert_null(r->watch_event->changed);
    assert_int_equal(r->watch_event->n_ops, 0);
    pathd__v1__response__free_unpacked(r, NULL);
}

/* An update that cut agents (issue 34): its AGENTS_CUT events carry the
 * ids in order, at most PD_WATCH_MAX_AGENTS each, as many events as that
 * takes and no more; the encoded event carries them and cut_at_ms. */
static void test_agents_cut_events(void **state)
{
    (void)state;
    pd_update_cells_req req;
    memset(&req, 0, sizeof req);
    snprintf(req.scene, sizeof req.scene, "yard");
    pd_update_outcome out;
    memset(&out, 0, sizeof out);
    out.update = (pd_scene_update_result){ .version = 4, .incarnation = 2, .cells_changed = 1 };
    size_t n = 2 * PD_WATCH_MAX_AGENTS + 3;
    uint64_t *ids = malloc(n * sizeof *ids);
    assert_non_null(ids);
    for (size_t i = 0; i < n; i++)
        ids[i] = 1000 + i;
    pd_watch_event ev;
    assert_int_equal(pd_watch_event_agents_cut(&req, &out, ids, 0, 70, 0, &ev), -1);
    size_t seen = 0, part = 0;
    for (; pd_watch_event_agents_cut(&req, &out, ids, n, 70, part, &ev) == 0; part++) {
        assert_int_equal(ev.kind, PD_WATCH_AGENTS_CUT);
        assert_string_equal(ev.scene, "yard");
        assert_int_equal(ev.version, 4);
        assert_int_equal(ev.incarnation, 2);
        assert_int_equal(ev.cut_at_ms, 70);
        assert_true(ev.n_agents >= 1 && ev.n_agents <= PD_WATCH_MAX_AGENTS);
        for (size_t i = 0; i < ev.n_agents; i++)
            assert_int_equal(ev.agents[i], ids[seen + i]);
        seen += ev.n_agents;
    }
    assert_int_equal(part, 3);
    assert_int_equal(seen, n);

    assert_int_equal(pd_watch_event_agents_cut(&req, &out, ids, n, -5, 1, &ev), 0);
    size_t len = 0;
    Pathd__V1__Response *r = one_frame(pd_codec_encode_watch_event(3, &ev, 0, &len), &len);
    const Pathd__V1__WatchEvent *m = r->watch_event;
    assert_int_equal(m->kind, PATHD__V1__WATCH_EVENT_KIND__AGENTS_CUT);
    assert_int_equal(m->version, 4);
    assert_int_equal(m->cut_at_ms, -5);
    assert_int_equal(m->n_agents, PD_WATCH_MAX_AGENTS);
    assert_int_equal(m->agents[0], ids[PD_WATCH_MAX_AGENTS]);
    assert_int_equal(m->agents[PD_WATCH_MAX_AGENTS - 1], ids[2 * PD_WATCH_MAX_AGENTS - 1]);
    assert_int_equal(m->n_ops, 0);
    pathd__v1__response__free_unpacked(r, NULL);
    free(ids);
}

/* Issue 29, finding 12: an event is encoded once for all its watchers. Its
 * shared body with each watch's id in front is, byte for byte, the frame
 * encoded for that id alone: every id size (none for 0, one to ten varint
 * bytes), final or not, with and without ops. */
static void test_shared_watch_body_is_the_frame(void **state)
{
    (void)state;
    const uint64_t ids[] = { 0, 1, 127, 128, 16383, 16384, UINT64_C(1) << 35, UINT64_MAX };
    pd_watch_event ev;
    updated_event(&ev, "harbour", 1234);
    ev.incarnation = 77;
    ev.n_ops = 3;
    for (size_t k = 0; k < ev.n_ops; k++)
        ev.ops[k] = (pd_watch_op){ .op = PD_UPDATE_BLOCK, .min = { 1, (int32_t)k }, .max = { 2, 9 }, .cells = 3 };
    for (int variant = 0; variant < 2; variant++) {
        if (variant == 1) {
            memset(&ev, 0, sizeof ev);
            ev.kind = PD_WATCH_DROPPED;
            snprintf(ev.scene, sizeof ev.scene, "gone");
            ev.version = 5;
        }
        for (int final = 0; final < 2; final++) {
            size_t body_len = 0;
            uint8_t *body = pd_codec_encode_watch_body(&ev, final, &body_len);
            assert_non_null(body);
            for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
                size_t want_len = 0, got_len = 0;
                uint8_t *want = pd_codec_encode_watch_event(ids[i], &ev, final, &want_len);
                uint8_t *got = pd_codec_frame_with_id(ids[i], body, body_len, &got_len);
                assert_non_null(want);
                assert_non_null(got);
                assert_int_equal(got_len, want_len);
                assert_memory_equal(got, want, want_len);
                free(want);
                Pathd__V1__Response *r = one_frame(got, &got_len);
                assert_true(r->id == ids[i]);
                assert_int_equal(r->final, final);
                assert_int_equal(r->watch_event->version, ev.version);
                pathd__v1__response__free_unpacked(r, NULL);
            }
            free(body);
        }
    }
}

static void test_encode_stale(void **state)
{
    (void)state;
    size_t len = 0;
    Pathd__V1__Response *r =
        one_frame(pd_codec_encode_error_version(3, PD_STALE_VERSION, "older", 17, &len), &len);
    assert_int_equal(r->status, PATHD__V1__STATUS__STALE_VERSION);
    assert_true(r->final);
    assert_int_equal(r->error->version, 17);
    assert_string_equal(r->error->message, "older");
    pathd__v1__response__free_unpacked(r, NULL);

    /* A single movement query refused as stale says the version too. */
    pd_move_result mr;
    memset(&mr, 0, sizeof mr);
    mr.status = PD_STALE_VERSION;
    mr.version = 6;
    snprintf(mr.message, sizeof mr.message, "stale");
    r = one_frame(pd_codec_encode_move(4, PD_REQ_RAYCAST, &mr, &len), &len);
    assert_int_equal(r->status, PATHD__V1__STATUS__STALE_VERSION);
    assert_int_equal(r->error->version, 6);
    pathd__v1__response__free_unpacked(r, NULL);

    /* In a batch: the stale item's version, the other item's none. */
    pd_move_req items[2];
    pd_move_result res[2];
    memset(items, 0, sizeof items);
    memset(res, 0, sizeof res);
    items[0].kind = items[1].kind = PD_REQ_REACHABLE;
    res[0] = mr;
    res[1].status = PD_OK;
    res[1].version = 6;
    res[1].yes = 1;
    r = one_frame(pd_codec_encode_batch(5, items, res, 2, &len), &len);
    assert_int_equal(r->batch->items[0]->status, PATHD__V1__STATUS__STALE_VERSION);
    assert_int_equal(r->batch->items[0]->version, 6);
    assert_string_equal(r->batch->items[0]->message, "stale");
    assert_int_equal(r->batch->items[1]->status, PATHD__V1__STATUS__OK);
    assert_int_equal(r->batch->items[1]->version, 0);
    assert_true(r->batch->items[1]->reachable->reachable);
    pathd__v1__response__free_unpacked(r, NULL);
    assert_string_equal(pd_status_name(PD_STALE_VERSION), "STALE_VERSION");
    assert_string_equal(pd_status_name(PD_WATCH_OVERFLOW), "WATCH_OVERFLOW");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_changed_rect_is_the_changed_cells),
        cmocka_unit_test(test_event_from_update),
        cmocka_unit_test(test_agents_cut_events),
        cmocka_unit_test(test_min_version_checks),
        cmocka_unit_test(test_decode_watch),
        cmocka_unit_test(test_decode_min_version),
        cmocka_unit_test(test_encode_watch_event),
        cmocka_unit_test(test_shared_watch_body_is_the_frame),
        cmocka_unit_test(test_encode_stale),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
