/*
 * test_codec_range.c - the codec's side of FindPath ranges, goal sets and
 * FindPath items in a Batch (issue 11 item 8): decoding FindPath.range,
 * line_of_sight and goals with every refusal naming its field, a Batch's
 * FindPath items (scene and deadline carried over, at most
 * PD_BATCH_MAX_PATHS), and encoding PathChunk.goal_index and a batch
 * item's whole path in its QueryResult.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pathd.pb-c.h"
#include "pd_codec.h"
#include "codec_wire.h"

#define T_ID 77u

/* A FindPath to goals given as cells; points into itself, so initialised in
 * place and never copied. */
typedef struct t_msg {
    Pathd__V1__Request req;
    Pathd__V1__FindPath fp;
    Pathd__V1__Point start, goal;
    Pathd__V1__Cell start_cell, goal_cell;
    Pathd__V1__Point goals[PD_FINDPATH_MAX_GOALS + 1];
    Pathd__V1__Point *goal_ptrs[PD_FINDPATH_MAX_GOALS + 1];
    Pathd__V1__Cell goal_cells[PD_FINDPATH_MAX_GOALS + 1];
} t_msg;

static void t_cell_point(Pathd__V1__Point *p, Pathd__V1__Cell *c, int32_t x, int32_t y)
{
    pathd__v1__point__init(p);
    pathd__v1__cell__init(c);
    c->x = x;
    c->y = y;
    p->kind_case = PATHD__V1__POINT__KIND_CELL;
    p->cell = c;
}

static void t_msg_init(t_msg *m, size_t n_goals)
{
    memset(m, 0, sizeof *m);
    pathd__v1__request__init(&m->req);
    pathd__v1__find_path__init(&m->fp);
    t_cell_point(&m->start, &m->start_cell, 1, 2);
    m->fp.scene = "town";
    m->fp.start = &m->start;
    if (n_goals == 0) {
        t_cell_point(&m->goal, &m->goal_cell, 9, 9);
        m->fp.goal = &m->goal;
    }
    for (size_t i = 0; i < n_goals; i++) {
        t_cell_point(&m->goals[i], &m->goal_cells[i], (int32_t)i, (int32_t)(2 * i));
        m->goal_ptrs[i] = &m->goals[i];
    }
    m->fp.n_goals = n_goals;
    m->fp.goals = n_goals ? m->goal_ptrs : NULL;
    m->req.id = T_ID;
    m->req.body_case = PATHD__V1__REQUEST__BODY_FIND_PATH;
    m->req.find_path = &m->fp;
}

static void t_expect_invalid(const Pathd__V1__Request *m, const char *needle)
{
    pd_request req;
    char err[256] = "";
    pd_status st = wire_decode_request(m, &req, err, sizeof err);
    pd_request_free(&req);
    if (st != PD_INVALID_ARGUMENT || !strstr(err, needle))
        fail_msg("want INVALID_ARGUMENT naming \"%s\", got %s (\"%s\")", needle, pd_status_name(st), err);
}

static void test_decode_range_and_goals(void **state)
{
    (void)state;
    t_msg m;
    t_msg_init(&m, 0);
    m.fp.range = 6.5;
    m.fp.line_of_sight = 1;
    pd_request req;
    char err[256];
    assert_int_equal(wire_decode_request(&m.req, &req, err, sizeof err), PD_OK);
    assert_int_equal(req.kind, PD_REQ_FIND_PATH);
    assert_true(req.u.find_path.range == 6.5);
    assert_true(req.u.find_path.line_of_sight);
    assert_int_equal(req.u.find_path.n_goals, 0);
    assert_int_equal(req.u.find_path.goal.cell.x, 9);
    pd_request_free(&req);

    t_msg_init(&m, PD_FINDPATH_MAX_GOALS);
    assert_int_equal(wire_decode_request(&m.req, &req, err, sizeof err), PD_OK);
    assert_int_equal(req.u.find_path.n_goals, PD_FINDPATH_MAX_GOALS);
    for (size_t i = 0; i < PD_FINDPATH_MAX_GOALS; i++) {
        assert_false(req.u.find_path.goals[i].is_world);
        assert_int_equal(req.u.find_path.goals[i].cell.x, (int32_t)i);
        assert_int_equal(req.u.find_path.goals[i].cell.y, (int32_t)(2 * i));
    }
    pd_request_free(&req);
    assert_null(req.u.find_path.goals); /* freed, and safe twice */
    pd_request_free(&req);
}

static void test_decode_refusals_name_the_field(void **state)
{
    (void)state;
    t_msg m;
    const double bad_ranges[] = { -1, PD_FINDPATH_MAX_RANGE + 0.5, NAN, INFINITY };
    for (size_t i = 0; i < sizeof bad_ranges / sizeof bad_ranges[0]; i++) {
        t_msg_init(&m, 0);
        m.fp.range = bad_ranges[i];
        t_expect_invalid(&m.req, "find_path.range");
    }
    t_msg_init(&m, 0);
    m.fp.line_of_sight = 1;
    t_expect_invalid(&m.req, "find_path.line_of_sight");

    t_msg_init(&m, PD_FINDPATH_MAX_GOALS + 1);
    t_expect_invalid(&m.req, "find_path.goals");
    t_msg_init(&m, 2);
    t_cell_point(&m.goal, &m.goal_cell, 9, 9);
    m.fp.goal = &m.goal;
    t_expect_invalid(&m.req, "find_path.goal and find_path.goals");
    t_msg_init(&m, 2);
    m.fp.goal_mode = PATHD__V1__GOAL_MODE__GOAL_NEAREST;
    t_expect_invalid(&m.req, "find_path.goal_mode");
    t_msg_init(&m, 3);
    m.goals[1].kind_case = PATHD__V1__POINT__KIND__NOT_SET;
    t_expect_invalid(&m.req, "find_path.goals[1]");
    /* No goal at all is still refused, naming it. */
    t_msg_init(&m, 0);
    m.fp.goal = NULL;
    t_expect_invalid(&m.req, "find_path.goal");
}

/* A Batch of n FindPath items (each a copy of one t_msg's FindPath). */
static void t_batch(Pathd__V1__Request *req, Pathd__V1__Batch *b, Pathd__V1__Query *q, Pathd__V1__Query **qp,
                    size_t n, Pathd__V1__FindPath *fp)
{
    pathd__v1__request__init(req);
    pathd__v1__batch__init(b);
    for (size_t i = 0; i < n; i++) {
        pathd__v1__query__init(&q[i]);
        q[i].kind_case = PATHD__V1__QUERY__KIND_FIND_PATH;
        q[i].find_path = fp;
        qp[i] = &q[i];
    }
    b->n_items = n;
    b->items = qp;
    req->id = T_ID;
    req->body_case = PATHD__V1__REQUEST__BODY_BATCH;
    req->batch = b;
}

static void test_decode_batch_paths(void **state)
{
    (void)state;
    t_msg m;
    t_msg_init(&m, 2);
    m.fp.unit_size = 2;
    m.fp.range = 3;
    Pathd__V1__Request req;
    Pathd__V1__Batch b;
    Pathd__V1__Query q[PD_BATCH_MAX_PATHS + 1], *qp[PD_BATCH_MAX_PATHS + 1];
    t_batch(&req, &b, q, qp, 2, &m.fp);
    pd_request r;
    char err[256];
    assert_int_equal(wire_decode_request(&req, &r, err, sizeof err), PD_OK);
    assert_int_equal(r.kind, PD_REQ_BATCH);
    assert_int_equal(r.u.batch.n_items, 2);
    for (size_t i = 0; i < 2; i++) {
        const pd_move_req *it = &r.u.batch.items[i];
        assert_int_equal(it->kind, PD_REQ_FIND_PATH);
        assert_int_equal(it->status, PD_OK);
        assert_string_equal(it->scene, "town");
        assert_int_equal(it->unit_size, 2);
        assert_non_null(it->path);
        assert_int_equal(it->path->n_goals, 2);
        assert_true(it->path->range == 3);
    }
    pd_request_free(&r);

    /* An item keeps its deadline, as the request alone would (each item is
     * queued on its own); one over the limit fails that item alone,
     * naming the field. */
    m.fp.deadline_ms = 10;
    assert_int_equal(wire_decode_request(&req, &r, err, sizeof err), PD_OK);
    assert_int_equal(r.u.batch.items[0].status, PD_OK);
    assert_int_equal(r.u.batch.items[0].path->deadline_ms, 10);
    pd_request_free(&r);
    m.fp.deadline_ms = PD_CODEC_MAX_DEADLINE_MS + 1;
    assert_int_equal(wire_decode_request(&req, &r, err, sizeof err), PD_OK);
    assert_int_equal(r.u.batch.items[0].status, PD_INVALID_ARGUMENT);
    assert_non_null(strstr(r.u.batch.items[0].message, "batch.items[0]: find_path.deadline_ms"));
    assert_null(r.u.batch.items[0].path);
    pd_request_free(&r);
    m.fp.deadline_ms = 0;

    /* One FindPath too many refuses the batch. */
    t_batch(&req, &b, q, qp, PD_BATCH_MAX_PATHS + 1, &m.fp);
    t_expect_invalid(&req, "find_path queries");
    t_batch(&req, &b, q, qp, PD_BATCH_MAX_PATHS, &m.fp);
    assert_int_equal(wire_decode_request(&req, &r, err, sizeof err), PD_OK);
    pd_request_free(&r);
}

static pd_scene *t_scene(void)
{
    pd_scene *s = calloc(1, sizeof *s);
    assert_non_null(s);
    atomic_init(&s->refs, 1);
    strcpy(s->name, "town");
    s->grid = pd_grid_create(8, 8);
    assert_non_null(s->grid);
    s->origin_x = -2;
    s->origin_y = 1;
    s->cell_size = 0.5;
    s->version = 5;
    return s;
}

static Pathd__V1__Response *t_unpack_one(const uint8_t *buf, size_t len)
{
    assert_true(len > 4);
    size_t n = (size_t)buf[0] << 24 | (size_t)buf[1] << 16 | (size_t)buf[2] << 8 | buf[3];
    assert_int_equal(n + 4, len);
    Pathd__V1__Response *r = pathd__v1__response__unpack(NULL, n, buf + 4);
    assert_non_null(r);
    return r;
}

static void test_encode_goal_index_and_batch_path(void **state)
{
    (void)state;
    pd_scene *scene = t_scene();
    pd_point cells[3] = { { 1, 1 }, { 2, 2 }, { 3, 2 } };
    pd_path_result pr = { .status = PD_OK, .path = cells, .path_len = 3, .has_target = 1, .target = 4 };
    pr.metrics.cost = 2.5;
    size_t len;
    uint8_t *buf = pd_codec_encode_path(T_ID, scene, &pr, 256, 0, &len);
    Pathd__V1__Response *r = t_unpack_one(buf, len);
    assert_true(r->final);
    assert_int_equal(r->path->goal_index, 4);
    assert_null(r->path->goal_used);
    pathd__v1__response__free_unpacked(r, NULL);
    free(buf);

    /* Batch: a path item that asked for world coordinates, a refused path
     * item that ran (its chunk has no waypoints), and one refused before
     * running (no chunk). */
    pd_find_path_req want_world = { .want_world = 1 };
    pd_move_req items[3] = { { .kind = PD_REQ_FIND_PATH, .path = &want_world }, { .kind = PD_REQ_FIND_PATH },
                             { .kind = PD_REQ_FIND_PATH } };
    pd_move_result res[3];
    memset(res, 0, sizeof res);
    res[0].status = PD_OK;
    res[0].path = pr;
    res[0].scene = scene;
    res[1].status = PD_FRAME_TOO_LARGE;
    res[1].scene = scene;
    strcpy(res[1].message, "the path has 900 waypoints");
    res[2].status = PD_UNKNOWN_SCENE;
    strcpy(res[2].message, "unknown scene 'x'");
    buf = pd_codec_encode_batch(T_ID, items, res, 3, &len);
    r = t_unpack_one(buf, len);
    assert_int_equal(r->body_case, PATHD__V1__RESPONSE__BODY_BATCH);
    Pathd__V1__BatchResult *b = r->batch;
    assert_int_equal(b->n_items, 3);
    assert_int_equal(b->items[0]->status, PATHD__V1__STATUS__OK);
    assert_int_equal(b->items[0]->kind_case, PATHD__V1__QUERY_RESULT__KIND_PATH);
    const Pathd__V1__PathChunk *c = b->items[0]->path;
    assert_non_null(c->points);
    assert_int_equal(c->points->n_dx, 3);
    assert_int_equal(c->points->n_wx, 3);
    assert_int_equal(c->total_waypoints, 3);
    assert_int_equal(c->goal_index, 4);
    assert_int_equal(c->scene_version, 5);
    int32_t x = 0, y = 0;
    for (size_t i = 0; i < 3; i++) {
        x += c->points->dx[i];
        y += c->points->dy[i];
        assert_int_equal(x, cells[i].x);
        assert_int_equal(y, cells[i].y);
        assert_true(fabs(c->points->wx[i] - (-2 + (cells[i].x + 0.5) * 0.5)) < 1e-12);
    }
    assert_true(fabs(c->cost - 2.5) < 1e-12);
    assert_int_equal(b->items[1]->status, PATHD__V1__STATUS__FRAME_TOO_LARGE);
    assert_int_equal(b->items[1]->kind_case, PATHD__V1__QUERY_RESULT__KIND_PATH);
    assert_null(b->items[1]->path->points);
    assert_string_equal(b->items[1]->message, "the path has 900 waypoints");
    assert_int_equal(b->items[2]->status, PATHD__V1__STATUS__UNKNOWN_SCENE);
    assert_int_equal(b->items[2]->kind_case, PATHD__V1__QUERY_RESULT__KIND__NOT_SET);
    pathd__v1__response__free_unpacked(r, NULL);
    free(buf);
    pd_grid_destroy(scene->grid);
    free(scene);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_range_and_goals),
        cmocka_unit_test(test_decode_refusals_name_the_field),
        cmocka_unit_test(test_decode_batch_paths),
        cmocka_unit_test(test_encode_goal_index_and_batch_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
