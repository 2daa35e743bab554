/*
 * test_kind.c - the request-kind table (server/query/pd_kind.h): every
 * kind has one descriptor with its metrics name, the role it needs and
 * where it runs; the worker kinds have the hooks the server calls; and a
 * FindPath and a movement query go through their descriptors' prepare and
 * run on a real scene (a small field made from cells), with no pool or server,
 * using the job struct the server uses (pd_job.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pd_index.h"
#include "pd_job.h"
#include "pd_kind.h"

/* What each kind needed before the table (pd_dispatch.c's
 * pd__required_role) and where it ran: the table must keep both. */
static const struct {
    pd_request_kind kind;
    const char *name;
    pd_role role;
    pd_kind_runs runs;
} want[] = {
    {PD_REQ_NONE, "unknown", PD_ROLE_NONE, PD_KIND_SERVED},
    {PD_REQ_FIND_PATH, "find_path", PD_ROLE_QUERY, PD_KIND_WORKER},
    {PD_REQ_CANCEL, "cancel", PD_ROLE_QUERY, PD_KIND_SERVED},
    {PD_REQ_LIST_SCENES, "list_scenes", PD_ROLE_QUERY, PD_KIND_SERVED},
    {PD_REQ_SCENE_INFO, "scene_info", PD_ROLE_QUERY, PD_KIND_SERVED},
    {PD_REQ_STATS, "stats", PD_ROLE_ADMIN, PD_KIND_SERVED},
    {PD_REQ_PING, "ping", PD_ROLE_NONE, PD_KIND_SERVED},
    {PD_REQ_UPDATE_CELLS, "update_cells", PD_ROLE_WRITE, PD_KIND_LANE},
    {PD_REQ_SCENE_GRID, "scene_grid", PD_ROLE_QUERY, PD_KIND_SERVED},
    {PD_REQ_FIND_ROUTE, "find_route", PD_ROLE_QUERY, PD_KIND_WORKER},
    {PD_REQ_AUTH, "auth", PD_ROLE_NONE, PD_KIND_SERVED},
    {PD_REQ_RELOAD, "reload", PD_ROLE_ADMIN, PD_KIND_SERVED},
    {PD_REQ_RAYCAST, "raycast", PD_ROLE_QUERY, PD_KIND_WORKER},
    {PD_REQ_VALIDATE_MOVE, "validate_move", PD_ROLE_QUERY, PD_KIND_WORKER},
    {PD_REQ_MOVE_ALONG, "move_along", PD_ROLE_QUERY, PD_KIND_WORKER},
    {PD_REQ_NEAREST, "nearest", PD_ROLE_QUERY, PD_KIND_WORKER},
    {PD_REQ_REACHABLE, "reachable", PD_ROLE_QUERY, PD_KIND_WORKER},
    {PD_REQ_RANDOM_POINT, "random_point", PD_ROLE_QUERY, PD_KIND_WORKER},
    {PD_REQ_DISTANCE_TO_WALL, "distance_to_wall", PD_ROLE_QUERY, PD_KIND_WORKER},
    {PD_REQ_BATCH, "batch", PD_ROLE_QUERY, PD_KIND_BATCH},
    {PD_REQ_GET_LIMITS, "get_limits", PD_ROLE_QUERY, PD_KIND_SERVED},
    {PD_REQ_CREATE_SCENE, "create_scene", PD_ROLE_WRITE, PD_KIND_LANE},
    {PD_REQ_CREATE_INSTANCE, "create_instance", PD_ROLE_WRITE, PD_KIND_LANE},
    {PD_REQ_DROP_SCENE, "drop_scene", PD_ROLE_WRITE, PD_KIND_LANE},
    {PD_REQ_WATCH, "watch", PD_ROLE_QUERY, PD_KIND_SERVED},
    {PD_REQ_UNWATCH, "unwatch", PD_ROLE_QUERY, PD_KIND_SERVED},
    {PD_REQ_RESERVE_PATH, "reserve_path", PD_ROLE_WRITE, PD_KIND_LANE},
    {PD_REQ_RELEASE_AGENT, "release_agent", PD_ROLE_WRITE, PD_KIND_LANE},
    {PD_REQ_GET_RESERVATIONS, "get_reservations", PD_ROLE_QUERY, PD_KIND_LANE},
};

static void test_every_kind_has_its_row(void **state)
{
    (void)state;
    assert_int_equal(sizeof want / sizeof want[0], PD_REQ__COUNT);
    for (size_t i = 0; i < PD_REQ__COUNT; i++) {
        const pd_kind *k = pd_kind_of(want[i].kind);
        assert_string_equal(k->name, want[i].name);
        assert_string_equal(pd_request_kind_name(want[i].kind), want[i].name);
        assert_int_equal(k->role, want[i].role);
        assert_int_equal(k->runs, want[i].runs);
        /* What the server calls for each: a worker kind prepares and runs;
         * a batch prepares and weighs; a served kind has no hooks. */
        if (k->runs == PD_KIND_WORKER || k->runs == PD_KIND_LANE) {
            assert_non_null(k->prepare);
            assert_non_null(k->run);
        } else if (k->runs == PD_KIND_BATCH) {
            assert_non_null(k->prepare);
            assert_non_null(k->weight);
        } else {
            assert_null(k->prepare);
            assert_null(k->run);
        }
        assert_int_equal(k->counts_paths, want[i].kind == PD_REQ_FIND_PATH || want[i].kind == PD_REQ_FIND_ROUTE ||
                                              want[i].kind == PD_REQ_RESERVE_PATH);
    }
    /* Anything out of range is the "unknown" row, not a crash. */
    assert_string_equal(pd_kind_of((pd_request_kind)-1)->name, "unknown");
    assert_string_equal(pd_kind_of(PD_REQ__COUNT)->name, "unknown");
    assert_null(pd_kind_of(PD_REQ__COUNT)->prepare);
}

/* A scene's changes share one lane, found by the scene index's hash of
 * its name (defined once, pd_index_hash); other names spread out. */
static void test_scene_lane(void **state)
{
    (void)state;
    assert_true(pd_kind_scene_lane("arena") == (uint64_t)pd_index_hash("arena"));
    assert_true(pd_kind_scene_lane("arena") == pd_kind_scene_lane("arena"));
    assert_true(pd_kind_scene_lane("arena") != pd_kind_scene_lane("arena2"));
    assert_true(pd_kind_scene_lane("a") != pd_kind_scene_lane("b"));
}

typedef struct fixture {
    pd_registry *registry;
    pd_query_scratch *scratch;
    pd_kind_env env;
} fixture;

/* A 10x8 open field with one wall cell at (5, 3), served as "arena". */
static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    uint8_t cells[10 * 8];
    memset(cells, 1, sizeof cells);
    cells[3 * 10 + 5] = 0;
    pd_conf_scene cs;
    memset(&cs, 0, sizeof cs);
    snprintf(cs.name, sizeof cs.name, "arena");
    cs.cell_size = 1;
    cs.unit_sizes[0] = 1;
    cs.n_unit_sizes = 1;
    char err[256];
    pd_scene *scene = pd_scene_from_cells(&cs, 10, 8, cells, err, sizeof err);
    if (!scene)
        fail_msg("%s", err);
    f->registry = pd_registry_create();
    assert_int_equal(pd_registry_add(f->registry, scene, err, sizeof err), PD_OK);
    f->scratch = pd_query_scratch_create();
    f->env.registry = f->registry;
    f->env.default_max_expansions = 100000;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    pd_query_scratch_destroy(f->scratch);
    pd_registry_destroy(f->registry);
    free(f);
    return 0;
}

static pd_job *job_of(pd_request_kind kind)
{
    pd_job *job = pd_job_new(kind, NULL);
    assert_non_null(job);
    job->ops = pd_kind_of(kind);
    return job;
}

/* FindPath through its descriptor: prepare takes the scene and the avoid
 * array into the job, run finds the path, the stats hooks read it. */
static void test_find_path_through_the_table(void **state)
{
    fixture *f = *state;
    pd_request req;
    memset(&req, 0, sizeof req);
    req.kind = PD_REQ_FIND_PATH;
    pd_find_path_req *fp = &req.u.find_path;
    snprintf(fp->scene, sizeof fp->scene, "arena");
    fp->start.cell = (pd_point){0, 0};
    fp->goal.cell = (pd_point){9, 7};
    fp->unit_size = 1;
    fp->connectivity = PD_CONNECT_8;
    fp->deadline_ms = 5;
    fp->avoid = malloc(sizeof *fp->avoid);
    fp->avoid[0] = (pd_point){5, 0};
    fp->n_avoid = 1;

    const pd_kind *k = pd_kind_of(PD_REQ_FIND_PATH);
    pd_job *job = job_of(PD_REQ_FIND_PATH);
    job->arrival_ns = 1000;
    pd_kind_refusal why = {"", 0};
    assert_int_equal(k->prepare(job, &req, &f->env, &why), PD_OK);
    assert_null(fp->avoid); /* the job owns it now */
    assert_non_null(job->avoid);
    assert_true(job->task.deadline_ns == 1000 + 5 * 1000000ull);
    pd_query_control ctl = {NULL, NULL, 0};
    assert_int_equal(k->run(job, f->scratch, &ctl), PD_OK);
    assert_int_equal(k->status(job), PD_OK);
    assert_true(job->path.path_len >= 10);
    assert_string_equal(k->scene(job), "arena");
    assert_true(pd_job_expanded(job) > 0);
    pd_request_free(&req);
    pd_job_free(job);

    /* An unknown scene is refused at prepare, with its name. */
    memset(&req, 0, sizeof req);
    req.kind = PD_REQ_FIND_PATH;
    snprintf(fp->scene, sizeof fp->scene, "nope");
    fp->unit_size = 1;
    job = job_of(PD_REQ_FIND_PATH);
    assert_int_equal(k->prepare(job, &req, &f->env, &why), PD_UNKNOWN_SCENE);
    assert_string_equal(why.message, "unknown scene 'nope'");
    pd_job_free(job);
}

/* A movement query through its descriptor, and a job that never ran
 * settled with its task's status. */
static void test_move_through_the_table(void **state)
{
    fixture *f = *state;
    pd_request req;
    memset(&req, 0, sizeof req);
    req.kind = PD_REQ_REACHABLE;
    pd_move_req *m = &req.u.move;
    m->kind = PD_REQ_REACHABLE;
    snprintf(m->scene, sizeof m->scene, "arena");
    m->unit_size = 1;
    m->a.cell = (pd_point){0, 0};
    m->b.cell = (pd_point){9, 7};

    const pd_kind *k = pd_kind_of(PD_REQ_REACHABLE);
    pd_job *job = job_of(PD_REQ_REACHABLE);
    pd_kind_refusal why = {"", 0};
    assert_int_equal(k->prepare(job, &req, &f->env, &why), PD_OK);
    assert_int_equal(job->n_moves, 1);
    assert_int_equal(k->run(job, f->scratch, NULL), PD_OK);
    assert_int_equal(k->status(job), PD_OK);
    assert_int_equal(job->move_results[0].yes, 1);
    assert_string_equal(k->scene(job), "arena");
    assert_int_equal(k->unserved(job), 0);
    pd_job_free(job);

    /* Cancelled before it ran: its result answers CANCELLED. */
    job = job_of(PD_REQ_REACHABLE);
    assert_int_equal(k->prepare(job, &req, &f->env, &why), PD_OK);
    job->task.status = PD_CANCELLED;
    pd_job_settle_status(job);
    assert_int_equal(k->status(job), PD_CANCELLED);
    pd_job_free(job);

    /* Unknown scene: refused with the query's own message. */
    snprintf(req.u.move.scene, sizeof req.u.move.scene, "nope");
    job = job_of(PD_REQ_REACHABLE);
    assert_int_equal(k->prepare(job, &req, &f->env, &why), PD_UNKNOWN_SCENE);
    assert_non_null(strstr(why.message, "nope"));
    assert_int_equal(k->unserved(job), 1);
    pd_job_free(job);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_kind_has_its_row),
        cmocka_unit_test(test_scene_lane),
        cmocka_unit_test_setup_teardown(test_find_path_through_the_table, setup, teardown),
        cmocka_unit_test_setup_teardown(test_move_through_the_table, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
