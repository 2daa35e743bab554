/*
 * test_query_pipeline.c - the query layer's pipelines (pd_query.h), moved
 * out of test_pool.c so that file tests only the pool: the issue-4 FindPath
 * pipeline (scene search picks, unit grids, snapping, reachability, fallback
 * goals, avoid cells, windows, cut-off paths, smoothing, timing), FindPath
 * jobs through a pool (costs on an open grid, long paths, corners, jump
 * points against A*), cell updates and routes, and searches on the pool: a
 * long search stopped part way by a cancel, a deadline or the pool's
 * destroy (it polls its task), and the query workers' contexts trimmed to
 * what they keep (test_pool.c tests the pool itself with tasks of its own).
 *
 * Most tests call the query layer directly through run_one, with no threads,
 * on scenes loaded from tests/data/wire4_*.txt through pd_scene_load, so they
 * carry real unit grids and component labels; the fixture's hand-built open
 * scenes (pool_fixture.h) serve the rest. Cell updates and route jobs go
 * through a pool, as the server runs them: updates of one scene queue up in
 * order behind a pause. Every job is the server's own pd_job (pd_job.h),
 * run through its kind's run hook (query_job.h); updates go through a
 * pd_store, as in the server.
 *
 * Route jobs run on the world of tests/data/route_world.json (four scenes
 * joined by portals; see test_world.c): each leg is checked cell by cell and
 * priced again by an independent A* between its ends.
 */
#include "pool_fixture.h"

#include "pd_conf.h"
#include "pd_path.h"
#include "pd_pool.h"
#include "pd_smooth.h"
#include "query_job.h"

/* Loads tests/data/<file> as an ASCII scene serving unit sizes 1 and 2
 * (the caller may change the entry before loading it). */
static pd_conf_scene wire4_entry(const char *name, const char *file, char *path, size_t pathlen)
{
    pd_conf_scene cs;
    memset(&cs, 0, sizeof cs);
    snprintf(cs.name, sizeof cs.name, "%s", name);
    snprintf(path, pathlen, "%s/%s", PD_TEST_DATA_DIR, file);
    cs.map_path = path;
    cs.format = PD_MAP_ASCII;
    cs.cell_size = 0.5;
    cs.unit_sizes[0] = 1;
    cs.unit_sizes[1] = 2;
    cs.n_unit_sizes = 2;
    return cs;
}

static pd_scene *wire4_load(const char *file)
{
    char path[512], err[256];
    pd_conf_scene cs = wire4_entry("wire4", file, path, sizeof path);
    pd_scene *s = pd_scene_load(&cs, err, sizeof err);
    if (!s)
        fail_msg("%s", err);
    return s;
}

/* Runs one job's query on this thread, straight through the query layer
 * (no pool, no threads), and returns it completed. */
static pd_job *run_one(pd_job *job)
{
    return run_now(job);
}


/* A scene's search pick per unit size overrides the server's
 * jump_point_search both ways: "astar" answers with A* (its expansion
 * count) although the job asks for jump points, "jps" with JPS although it
 * does not; "default" follows the job. */
static void test_scene_pick_overrides_server(void **state)
{
    pool_fixture *f = *state;
    pd_job *runs[6];
    static const struct {
        pd_scene_pick pick;
        int jump_points;
    } cases[6] = {
        { PD_SCENE_PICK_DEFAULT, 0 }, { PD_SCENE_PICK_DEFAULT, 1 }, { PD_SCENE_PICK_ASTAR, 1 },
        { PD_SCENE_PICK_ASTAR, 0 },   { PD_SCENE_PICK_JPS, 0 },     { PD_SCENE_PICK_JPS, 1 },
    };
    for (size_t i = 0; i < 6; i++) {
        f->big->units[0] = (pd_scene_unit){ 1, f->big->grid, NULL, cases[i].pick };
        pd_job *job = make_job(f->big, 1, i + 1, 3, 5, 390, 311);
        job->jump_points = cases[i].jump_points;
        runs[i] = run_one(job);
        assert_int_equal(runs[i]->task.status, PD_OK);
        assert_float_equal(runs[i]->path.metrics.cost, runs[0]->path.metrics.cost, 1e-9);
    }
    f->big->units[0] = (pd_scene_unit){ 0 };
    const uint64_t astar = runs[0]->path.metrics.expanded, jps = runs[1]->path.metrics.expanded;
    assert_true(jps < astar);
    assert_true(runs[2]->path.metrics.expanded == astar);
    assert_true(runs[3]->path.metrics.expanded == astar);
    assert_true(runs[4]->path.metrics.expanded == jps);
    assert_true(runs[5]->path.metrics.expanded == jps);
    free_jobs(runs, 6);
}

static int path_contains(const pd_job *job, int32_t x, int32_t y)
{
    for (size_t i = 0; i < job->path.path_len; i++)
        if (job->path.path[i].x == x && job->path.path[i].y == y)
            return 1;
    return 0;
}

/* Every step moves to a neighbour that is passable on `grid`. */
static void assert_steps_on(const pd_grid *grid, const pd_job *job)
{
    for (size_t i = 0; i < job->path.path_len; i++) {
        assert_int_not_equal(pd_grid_get(grid, job->path.path[i].x, job->path.path[i].y), PD_CELL_BLOCKED);
        if (i > 0) {
            assert_true(abs(job->path.path[i].x - job->path.path[i - 1].x) <= 1);
            assert_true(abs(job->path.path[i].y - job->path.path[i - 1].y) <= 1);
        }
    }
}

/* Unit size 2 on wire4_units: its 2x2 footprint cannot pass the 1-wide gap
 * at x = 3, so it crosses row 2 at the wide gap (anchor x = 10); a unit of
 * size 1 on the same request takes the short way through x = 3. */
static void test_unit_size_two_avoids_narrow_gap(void **state)
{
    (void)state;
    pd_scene *s = wire4_load("wire4_units.txt");
    pd_job *small = make_job(s, 1, 1, 0, 0, 0, 4);
    small = run_one(small);
    assert_int_equal(small->task.status, PD_OK);
    assert_true(path_contains(small, 3, 2));

    pd_job *big = make_job(s, 1, 2, 0, 0, 0, 4);
    big->path_query.unit_size = 2;
    big = run_one(big);
    assert_int_equal(big->task.status, PD_OK);
    assert_steps_on(pd_scene_unit_for(s, 2)->grid, big);
    for (size_t i = 0; i < big->path.path_len; i++) {
        pd_point a = big->path.path[i];
        /* The whole footprint stays on open scene cells... */
        for (int dy = 0; dy < 2; dy++)
            for (int dx = 0; dx < 2; dx++)
                assert_int_not_equal(pd_grid_get(s->grid, a.x + dx, a.y + dy), PD_CELL_BLOCKED);
        /* ...so wherever it overlaps the wall row it is in the wide gap. */
        if (a.y == 1 || a.y == 2)
            assert_int_equal(a.x, 10);
    }
    assert_true(big->path.metrics.cost > small->path.metrics.cost);
    assert_int_equal(big->path.path[big->path.path_len - 1].x, 0);
    assert_int_equal(big->path.path[big->path.path_len - 1].y, 4);

    /* A unit size the scene does not serve is refused by the worker too. */
    pd_job *odd = make_job(s, 1, 3, 0, 0, 0, 4);
    odd->path_query.unit_size = 3;
    odd = run_one(odd);
    assert_int_equal(odd->task.status, PD_INVALID_ARGUMENT);
    pd_job_free(small);
    pd_job_free(big);
    pd_job_free(odd);
    pd_scene_release(s);
}

/* Blocked endpoints: refused without snap, substituted (PARTIAL) with it.
 * (10,2) is wall; its open neighbours (9,2) and (11,2) tie at distance 1,
 * and ties go to the smaller x. */
static void test_snap_blocked_endpoints(void **state)
{
    (void)state;
    pd_scene *s = wire4_load("wire4_rooms.txt");
    pd_job *job = run_one(make_job(s, 1, 1, 10, 2, 1, 2));
    assert_int_equal(job->task.status, PD_START_BLOCKED);
    assert_null(job->path.path);
    pd_job_free(job);

    job = make_job(s, 1, 2, 10, 2, 1, 2);
    job->path_query.snap = 1;
    job = run_one(job);
    assert_int_equal(job->task.status, PD_PARTIAL);
    assert_int_equal(job->path.start_substituted, 1);
    assert_int_equal(job->path.start_used.x, 9);
    assert_int_equal(job->path.start_used.y, 2);
    assert_int_equal(job->path.goal_substituted, 0);
    assert_int_equal(job->path.path[0].x, 9);
    assert_int_equal(job->path.path[0].y, 2);
    assert_int_equal(job->path.path[job->path.path_len - 1].x, 1);
    assert_float_equal(job->path.metrics.cost, 8.0, 1e-9);
    pd_job_free(job);

    job = run_one(make_job(s, 1, 3, 1, 4, 10, 0));
    assert_int_equal(job->task.status, PD_GOAL_BLOCKED);
    pd_job_free(job);

    job = make_job(s, 1, 4, 1, 4, 10, 0);
    job->path_query.snap = 1;
    job = run_one(job);
    assert_int_equal(job->task.status, PD_PARTIAL);
    assert_int_equal(job->path.start_substituted, 0);
    assert_int_equal(job->path.goal_substituted, 1);
    assert_int_equal(job->path.goal_used.x, 9);
    assert_int_equal(job->path.goal_used.y, 0);
    assert_int_equal(job->path.path[job->path.path_len - 1].x, 9);
    assert_int_equal(job->path.path[job->path.path_len - 1].y, 0);
    pd_job_free(job);

    /* A goal on the wall under NEAREST needs no snap: it is unreachable, so
     * the nearest reachable cell is used; EXACT still refuses it. */
    job = make_job(s, 1, 5, 1, 4, 10, 0);
    job->path_query.goal_mode = PD_GOAL_NEAREST;
    job = run_one(job);
    assert_int_equal(job->task.status, PD_PARTIAL);
    assert_int_equal(job->path.goal_substituted, 1);
    assert_int_equal(job->path.goal_used.x, 9);
    assert_int_equal(job->path.goal_used.y, 0);
    pd_job_free(job);
    pd_scene_release(s);
}

/* Start and goal in different rooms: EXACT answers NO_PATH from the labels
 * without expanding a node; NEAREST goes to the cell of the start's room
 * nearest the goal; LINE to the first such cell on the line back. */
static void test_unreachable_goal_modes(void **state)
{
    (void)state;
    pd_scene *s = wire4_load("wire4_rooms.txt");
    pd_job *exact = run_one(make_job(s, 1, 1, 1, 4, 14, 0));
    assert_int_equal(exact->task.status, PD_NO_PATH);
    assert_int_equal(exact->path.metrics.expanded, 0);
    assert_int_equal(exact->path.metrics.generated, 0);
    assert_null(exact->path.path);
    pd_job_free(exact);

    pd_job *nearest = make_job(s, 1, 2, 1, 4, 14, 0);
    nearest->path_query.goal_mode = PD_GOAL_NEAREST;
    nearest = run_one(nearest);
    assert_int_equal(nearest->task.status, PD_PARTIAL);
    assert_int_equal(nearest->path.goal_substituted, 1);
    assert_int_equal(nearest->path.goal_used.x, 9);
    assert_int_equal(nearest->path.goal_used.y, 0);
    assert_int_equal(nearest->path.path[nearest->path.path_len - 1].x, 9);
    assert_int_equal(nearest->path.path[nearest->path.path_len - 1].y, 0);
    assert_steps_on(s->grid, nearest);

    /* The line from (14,0) to (1,4) crosses x = 9.5 at y ~ 1.9, in row 1. */
    pd_job *line = make_job(s, 1, 3, 1, 4, 14, 0);
    line->path_query.goal_mode = PD_GOAL_LINE;
    line = run_one(line);
    assert_int_equal(line->task.status, PD_PARTIAL);
    assert_int_equal(line->path.goal_substituted, 1);
    assert_int_equal(line->path.goal_used.x, 9);
    assert_int_equal(line->path.goal_used.y, 1);
    assert_int_equal(line->path.path[line->path.path_len - 1].y, 1);
    assert_int_equal(line->path.start_substituted, 0);

    /* A reachable goal is never substituted, whatever the mode. */
    pd_job *same = make_job(s, 1, 4, 1, 4, 8, 0);
    same->path_query.goal_mode = PD_GOAL_NEAREST;
    same = run_one(same);
    assert_int_equal(same->task.status, PD_OK);
    assert_int_equal(same->path.goal_substituted, 0);
    pd_job_free(nearest);
    pd_job_free(line);
    pd_job_free(same);
    pd_scene_release(s);
}

/* Avoid cells act as walls for one request only: a column of them at x = 5
 * (rows 0..8) forces the path through (5,9); the same request without them
 * goes straight. */
static void test_avoid_cells(void **state)
{
    pool_fixture *f = *state;
    pd_job *plain = run_one(make_job(f->small, 1, 1, 0, 5, 9, 5));
    assert_int_equal(plain->task.status, PD_OK);
    assert_float_equal(plain->path.metrics.cost, 9.0, 1e-9);

    pd_job *job = make_job(f->small, 1, 2, 0, 5, 9, 5);
    job->path_query.n_avoid = 9;
    job->avoid = malloc(job->path_query.n_avoid * sizeof *job->avoid);
    assert_non_null(job->avoid);
    for (int32_t y = 0; y < 9; y++)
        job->avoid[y] = (pd_point){5, y};
    job = run_one(job);
    assert_int_equal(job->task.status, PD_OK);
    assert_true(path_contains(job, 5, 9));
    for (size_t i = 0; i < job->path.path_len; i++)
        assert_false(job->path.path[i].x == 5 && job->path.path[i].y < 9);
    assert_true(job->path.metrics.cost > plain->path.metrics.cost);
    assert_int_equal(job->path.goal_substituted, 0);

    /* An avoid cell on the goal is the goal being blocked. */
    pd_job *on_goal = make_job(f->small, 1, 3, 0, 5, 9, 5);
    on_goal->path_query.n_avoid = 1;
    on_goal->avoid = malloc(sizeof *on_goal->avoid);
    assert_non_null(on_goal->avoid);
    on_goal->avoid[0] = (pd_point){9, 5};
    on_goal = run_one(on_goal);
    assert_int_equal(on_goal->task.status, PD_GOAL_BLOCKED);
    pd_job_free(plain);
    pd_job_free(job);
    pd_job_free(on_goal);
}

/* A window keeps the search inside it: from (8,0) to (8,4) on wire4_units
 * the short way crosses the wall at x = 10; a window x 0..8 forces the
 * narrow gap at x = 3. A goal outside the window is NO_PATH, a start
 * outside it INVALID_ARGUMENT. */
static void test_search_window(void **state)
{
    (void)state;
    pd_scene *s = wire4_load("wire4_units.txt");
    pd_job *free_run = run_one(make_job(s, 1, 1, 8, 0, 8, 4));
    assert_int_equal(free_run->task.status, PD_OK);
    assert_false(path_contains(free_run, 3, 2));

    pd_job *job = make_job(s, 1, 2, 8, 0, 8, 4);
    job->path_query.params.has_window = 1;
    job->path_query.params.window_min = (pd_point){0, 0};
    job->path_query.params.window_max = (pd_point){8, 5};
    job = run_one(job);
    assert_int_equal(job->task.status, PD_OK);
    assert_true(path_contains(job, 3, 2));
    for (size_t i = 0; i < job->path.path_len; i++)
        assert_true(job->path.path[i].x <= 8);
    assert_true(job->path.metrics.cost > free_run->path.metrics.cost);

    pd_job *outside = make_job(s, 1, 3, 0, 0, 11, 4);
    outside->path_query.params.has_window = 1;
    outside->path_query.params.window_min = (pd_point){0, 0};
    outside->path_query.params.window_max = (pd_point){8, 5};
    outside = run_one(outside);
    assert_int_equal(outside->task.status, PD_NO_PATH);
    pd_job *start_out = make_job(s, 1, 4, 11, 4, 0, 0);
    start_out->path_query.params = outside->path_query.params;
    start_out->path_query.params.start = (pd_point){11, 4};
    start_out->path_query.params.goal = (pd_point){0, 0};
    start_out = run_one(start_out);
    assert_int_equal(start_out->task.status, PD_INVALID_ARGUMENT);
    pd_job_free(start_out);
    pd_job_free(free_run);
    pd_job_free(job);
    pd_job_free(outside);
    pd_scene_release(s);
}

/* A tiny budget on an unreachable goal: without partial_on_cutoff the job
 * fails with BUDGET_EXCEEDED; with it, the path to the best node comes back
 * as PARTIAL with cutoff BUDGET_EXCEEDED and goal_used at its end. */
static void test_partial_on_cutoff(void **state)
{
    pool_fixture *f = *state;
    pd_job *job = make_long_job(f, 1, 1);
    job->path_query.params.max_expansions = 50;
    job = run_one(job);
    assert_int_equal(job->task.status, PD_BUDGET_EXCEEDED);
    assert_null(job->path.path);
    pd_job_free(job);

    job = make_long_job(f, 1, 2);
    job->path_query.params.max_expansions = 50;
    job->path_query.params.partial_on_cutoff = 1;
    job = run_one(job);
    assert_int_equal(job->task.status, PD_PARTIAL);
    assert_int_equal(job->path.metrics.cutoff, PD_BUDGET_EXCEEDED);
    assert_true(job->path.metrics.expanded <= 50);
    assert_int_equal(job->path.goal_substituted, 1);
    assert_non_null(job->path.path);
    assert_true(job->path.path_len >= 2);
    assert_int_equal(job->path.path[0].x, 0);
    assert_int_equal(job->path.path[0].y, 0);
    pd_point end = job->path.path[job->path.path_len - 1];
    assert_int_equal(end.x, job->path.goal_used.x);
    assert_int_equal(end.y, job->path.goal_used.y);
    assert_true(end.x > 0 && end.y > 0); /* it moved toward the goal */
    assert_steps_on(f->big->grid, job);
    pd_job_free(job);
}

/* Smoothing: fewer waypoints than cells, the same ends, every segment in
 * line of sight on the unit grid, and never longer than the cell path;
 * for unit 2 too, on its own grid. */
static void test_smooth_style(void **state)
{
    (void)state;
    pd_scene *s = wire4_load("wire4_units.txt");
    for (uint32_t unit = 1; unit <= 2; unit++) {
        const pd_grid *ug = pd_scene_unit_for(s, unit)->grid;
        pd_job *cells = make_job(s, 1, 1, 0, 0, 0, 4);
        cells->path_query.unit_size = unit;
        cells = run_one(cells);
        pd_job *smooth = make_job(s, 1, 2, 0, 0, 0, 4);
        smooth->path_query.unit_size = unit;
        smooth->path_query.style = PD_STYLE_SMOOTH;
        smooth = run_one(smooth);
        assert_int_equal(cells->task.status, PD_OK);
        assert_int_equal(smooth->task.status, PD_OK);
        assert_true(smooth->path.path_len >= 2 && smooth->path.path_len < cells->path.path_len);
        assert_memory_equal(&smooth->path.path[0], &cells->path.path[0], sizeof smooth->path.path[0]);
        assert_memory_equal(&smooth->path.path[smooth->path.path_len - 1], &cells->path.path[cells->path.path_len - 1],
                            sizeof smooth->path.path[0]);
        for (size_t i = 1; i < smooth->path.path_len; i++)
            assert_true(pd_line_of_sight(ug, smooth->path.path[i - 1], smooth->path.path[i]));
        assert_true(pd_path_length(smooth->path.path, smooth->path.path_len) <=
                    pd_path_length(cells->path.path, cells->path.path_len) + 1e-9);
        pd_job_free(cells);
        pd_job_free(smooth);
    }

    /* With avoid cells, smoothing must not cut through them either: the
     * straight line from (0,3) to (11,5) crosses row 4 at x = 4..8, so with
     * (5,4) and (6,4) avoided the smoothed path has to bend. */
    pd_job *job = make_job(s, 1, 3, 0, 3, 11, 5);
    job->path_query.style = PD_STYLE_SMOOTH;
    job->path_query.n_avoid = 2;
    job->avoid = malloc(2 * sizeof *job->avoid);
    assert_non_null(job->avoid);
    job->avoid[0] = (pd_point){5, 4};
    job->avoid[1] = (pd_point){6, 4};
    job = run_one(job);
    assert_int_equal(job->task.status, PD_OK);
    pd_grid *g = pd_grid_clone(s->grid);
    assert_non_null(g);
    assert_true(pd_line_of_sight(g, (pd_point){0, 3}, (pd_point){11, 5}));
    for (size_t k = 0; k < job->path_query.n_avoid; k++)
        pd_grid_set(g, job->avoid[k].x, job->avoid[k].y, PD_CELL_BLOCKED);
    assert_false(pd_line_of_sight(g, (pd_point){0, 3}, (pd_point){11, 5}));
    assert_true(job->path.path_len >= 3);
    for (size_t i = 1; i < job->path.path_len; i++)
        assert_true(pd_line_of_sight(g, job->path.path[i - 1], job->path.path[i]));
    pd_grid_destroy(g);
    pd_job_free(job);
    pd_scene_release(s);
}

/* Times: speed in world units per second over the cell size gives cells per
 * second (wire4 scenes: cell size 0.5, so speed 2 is 4 cells/s); straight
 * steps take 1/4 s, and corners-style waypoints get the same arrival times
 * as the cells they keep. */
static void test_waypoint_times(void **state)
{
    (void)state;
    pd_scene *rooms = wire4_load("wire4_rooms.txt");
    pd_job *job = make_job(rooms, 1, 1, 0, 0, 3, 3);
    job->path_query.speed = 2.0;
    job->path_query.start_time = 100.0;
    job = run_one(job);
    assert_int_equal(job->task.status, PD_OK);
    assert_non_null(job->path.times);
    assert_int_equal(job->path.path_len, 4);
    for (size_t i = 0; i < job->path.path_len; i++)
        assert_float_equal(job->path.times[i], 100.0 + (double)i * SQRT2 / 4.0, 1e-9);
    pd_job_free(job);
    pd_scene_release(rooms);

    pd_scene *s = wire4_load("wire4_units.txt");

    job = make_job(s, 1, 2, 0, 0, 0, 4);
    job->path_query.speed = 2.0;
    job->path_query.start_time = 1.0;
    job->path_query.style = PD_STYLE_CORNERS;
    job = run_one(job);
    pd_job *cells = make_job(s, 1, 3, 0, 0, 0, 4);
    cells->path_query.speed = 2.0;
    cells->path_query.start_time = 1.0;
    cells = run_one(cells);
    assert_int_equal(job->task.status, PD_OK);
    assert_non_null(job->path.times);
    assert_float_equal(job->path.times[0], 1.0, 1e-12);
    size_t k = 0;
    for (size_t i = 0; i < job->path.path_len; i++) {
        while (cells->path.path[k].x != job->path.path[i].x || cells->path.path[k].y != job->path.path[i].y)
            k++;
        assert_float_equal(job->path.times[i], cells->path.times[k], 1e-9);
    }
    /* The arrival time at the goal is the path cost over the speed. */
    assert_float_equal(cells->path.times[cells->path.path_len - 1], 1.0 + cells->path.metrics.cost / 4.0, 1e-9);

    /* No speed, no times. */
    pd_job *untimed = run_one(make_job(s, 1, 4, 0, 0, 3, 3));
    assert_null(untimed->path.times);
    pd_job_free(job);
    pd_job_free(cells);
    pd_job_free(untimed);
    pd_scene_release(s);
}

/* Arrival times that overflow to infinity (found by fuzz_find_path): a
 * positive but subnormal speed, or a start time near DBL_MAX, has no answer
 * in seconds, so the run refuses it instead of sending inf. */
static void test_waypoint_times_that_overflow(void **state)
{
    (void)state;
    pd_scene *rooms = wire4_load("wire4_rooms.txt");
    pd_job *slow = make_job(rooms, 1, 1, 0, 0, 3, 3);
    slow->path_query.speed = 5.9e-309;
    slow = run_one(slow);
    assert_int_equal(slow->task.status, PD_INVALID_ARGUMENT);
    assert_null(slow->path.path);
    assert_null(slow->path.times);
    /* DBL_MAX plus a 7e294 s step is infinity; plus 0.35 s it stays DBL_MAX. */
    pd_job *late = make_job(rooms, 1, 2, 0, 0, 3, 3);
    late->path_query.speed = 1e-295;
    late->path_query.start_time = 1.7976931348623157e308;
    late = run_one(late);
    assert_int_equal(late->task.status, PD_INVALID_ARGUMENT);
    pd_job *still = make_job(rooms, 1, 3, 0, 0, 3, 3);
    still->path_query.speed = 2.0;
    still->path_query.start_time = 1.7976931348623157e308;
    still = run_one(still);
    assert_int_equal(still->task.status, PD_OK);
    assert_true(still->path.times[still->path.path_len - 1] == still->path_query.start_time);
    pd_job_free(slow);
    pd_job_free(late);
    pd_job_free(still);
    pd_scene_release(rooms);
}

/* An UpdateCells job setting one cell of scene `name` to op, through
 * store as the server's are. */
static pd_job *make_update_job(pd_store *store, const char *name, pd_update_op op, pd_point cell)
{
    pd_job *job = qj_new();
    assert_non_null(job);
    job->kind = PD_REQ_UPDATE_CELLS;
    job->store = store;
    snprintf(job->update_req.scene, sizeof job->update_req.scene, "%s", name);
    job->update_req.update.op = op;
    job->update_req.update.is_rect = 1;
    job->update_req.update.rect_min = job->update_req.update.rect_max = cell;
    return job;
}

/* UpdateCells jobs: applied through the registry on a worker, in order.
 * Blocking the narrow gap gives version 2; a later search detours; while
 * the pool is paused, a block and an unblock of the same cell queue up and
 * are applied in submission order by four workers. */
static void test_update_cells_jobs(void **state)
{
    (void)state;
    char path[512], err[256];
    pd_conf conf;
    memset(&conf, 0, sizeof conf);
    pd_conf_scene cs = wire4_entry("units", "wire4_units.txt", path, sizeof path);
    conf.scenes = &cs;
    conf.n_scenes = 1;
    pd_registry *reg = pd_registry_create();
    assert_non_null(reg);
    assert_int_equal(pd_registry_load(reg, &conf, err, sizeof err), 0);
    /* Every change goes through a store, as in the server. */
    pd_store *reg_store = pd_store_create(reg, NULL);
    assert_non_null(reg_store);

    test_waker w;
    pd_pool *pool = pool_open(&w, 4, 16, 0);
    assert_non_null(pool);

    pd_job *bad = qj_new();
    bad->kind = PD_REQ_UPDATE_CELLS;
    pd_store *no_registry = pd_store_create(NULL, NULL);
    assert_non_null(no_registry);
    bad->store = no_registry;
    assert_int_equal(run_now(bad)->task.status, PD_INVALID_ARGUMENT); /* no registry */
    pd_job_free(bad);
    pd_store_destroy(no_registry);

    pd_job *up = make_update_job(reg_store, "units", PD_UPDATE_BLOCK, (pd_point){3, 2});
    submit_ok(pool, up);
    pd_job *done[8];
    collect(pool, &w, done, 1);
    assert_int_equal(done[0]->task.status, PD_OK);
    assert_int_equal(done[0]->update.update.version, 2);
    assert_int_equal(done[0]->update.update.cells_changed, 1);
    free_jobs(done, 1);

    pd_scene *s = pd_registry_acquire(reg, "units");
    assert_non_null(s);
    assert_int_equal(s->version, 2);
    submit_ok(pool, make_job(s, 1, 2, 0, 0, 0, 4));
    collect(pool, &w, done, 1);
    assert_int_equal(done[0]->task.status, PD_OK);
    assert_false(path_contains(done[0], 3, 2));
    assert_true(path_contains(done[0], 10, 2) || path_contains(done[0], 11, 2));
    free_jobs(done, 1);
    pd_scene_release(s);

    /* An unknown scene and a cell list outside the grid fail cleanly. */
    pd_job *unknown = qj_new();
    unknown->kind = PD_REQ_UPDATE_CELLS;
    unknown->store = reg_store;
    strcpy(unknown->update_req.scene, "nowhere");
    unknown->update_req.update.is_rect = 1;
    submit_ok(pool, unknown);
    pd_job *outside = qj_new();
    outside->kind = PD_REQ_UPDATE_CELLS;
    outside->store = reg_store;
    strcpy(outside->update_req.scene, "units");
    outside->update_req.cells = malloc(sizeof *outside->update_req.cells);
    assert_non_null(outside->update_req.cells);
    outside->update_req.cells[0] = (pd_point){12, 0};
    outside->update_req.update.n_cells = 1;
    submit_ok(pool, outside);
    collect(pool, &w, done, 2);
    assert_int_equal(unknown->task.status, PD_UNKNOWN_SCENE);
    assert_int_equal(outside->task.status, PD_OUT_OF_BOUNDS);
    free_jobs(done, 2);

    /* Ordered: pass/block (3,2) alternately six times, ending blocked. */
    pd_pool_set_paused(pool, 1);
    for (int i = 0; i < 6; i++) {
        pd_update_op op = i % 2 == 0 ? PD_UPDATE_PASS : PD_UPDATE_BLOCK;
        pd_job *u = make_update_job(reg_store, "units", op, (pd_point){3, 2});
        u->task.tag = (uint64_t)i;
        submit_ok(pool, u);
    }
    pd_pool_set_paused(pool, 0);
    collect(pool, &w, done, 6);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(done[i]->task.status, PD_OK);
        /* Completion order is submission order, and each made a version. */
        assert_int_equal(done[i]->task.tag, (uint64_t)i);
        assert_int_equal(done[i]->update.update.version, 3 + (uint64_t)i);
        assert_int_equal(done[i]->update.update.cells_changed, 1);
    }
    free_jobs(done, 6);
    s = pd_registry_acquire(reg, "units");
    assert_int_equal(s->version, 8);
    assert_int_equal(pd_grid_get(s->grid, 3, 2), PD_CELL_BLOCKED);
    pd_scene_release(s);

    /* Blocking it again changes nothing and keeps the version. */
    pd_job *noop = make_update_job(reg_store, "units", PD_UPDATE_BLOCK, (pd_point){3, 2});
    submit_ok(pool, noop);
    collect(pool, &w, done, 1);
    assert_int_equal(done[0]->task.status, PD_OK);
    assert_int_equal(done[0]->update.update.cells_changed, 0);
    assert_int_equal(done[0]->update.update.version, 8);
    free_jobs(done, 1);

    pool_close(pool, &w);
    pd_store_destroy(reg_store);
    pd_registry_destroy(reg);
}

/* ---- FindPath jobs through a pool (moved from test_pool.c) ---- */

static void test_costs_on_open_grid(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    pd_pool *pool = pool_open(&w, 2, 16, 0);
    assert_non_null(pool);

    submit_ok(pool, make_job(f->small, 1, 1, 0, 0, 9, 9));
    submit_ok(pool, make_job(f->small, 1, 2, 0, 0, 9, 0));
    submit_ok(pool, make_job(f->small, 1, 3, 2, 7, 9, 3));
    submit_ok(pool, make_job(f->small, 1, 4, 5, 5, 5, 5));
    pd_job *four = make_job(f->small, 1, 5, 0, 0, 9, 9);
    four->path_query.params.connectivity = PD_CONNECT_4;
    submit_ok(pool, four);
    submit_ok(pool, make_job(f->small, 1, 6, 0, 0, SMALL_SIDE, 0));

    pd_job *done[6];
    collect(pool, &w, done, 6);
    for (size_t i = 0; i < 6; i++) {
        pd_job *job = done[i];
        if (job->task.tag == 6) {
            assert_int_equal(job->task.status, PD_OUT_OF_BOUNDS);
            assert_null(job->path.path);
            continue;
        }
        assert_int_equal(job->task.status, PD_OK);
        assert_cell_path(job);
        if (job->task.tag == 5) {
            assert_float_equal(job->path.metrics.cost, 18.0, 1e-9);
            assert_int_equal(job->path.path_len, 19);
        } else {
            assert_float_equal(job->path.metrics.cost, octile(job->path_query.params.start, job->path_query.params.goal), 1e-9);
        }
        if (job->task.tag == 1) {
            assert_float_equal(job->path.metrics.cost, 9 * SQRT2, 1e-9);
            assert_int_equal(job->path.path_len, 10);
        }
        assert_true(job->task.finished_ns >= job->task.submitted_ns);
    }
    free_jobs(done, 6);
    assert_true(waker_wakes(&w) >= 1);
    pool_close(pool, &w);
}

/* Paths longer than the worker's starting buffer come back whole. */
static void test_long_path(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    pd_pool *pool = pool_open(&w, 1, 4, 0);
    assert_non_null(pool);

    submit_ok(pool, make_job(f->corridor, 1, 1, 0, 0, CORRIDOR_LEN - 1, 0));
    submit_ok(pool, make_job(f->corridor, 1, 2, CORRIDOR_LEN - 1, 0, 0, 0));
    pd_job *corners = make_job(f->corridor, 1, 3, 5, 0, CORRIDOR_LEN - 5, 0);
    corners->path_query.style = PD_STYLE_CORNERS;
    submit_ok(pool, corners);
    pd_job *done[3];
    collect(pool, &w, done, 3);
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(done[i]->task.status, PD_OK);
        assert_cell_path(done[i]);
        assert_int_equal(done[i]->path.path_len, CORRIDOR_LEN);
        assert_float_equal(done[i]->path.metrics.cost, CORRIDOR_LEN - 1, 1e-9);
    }
    /* Grown buffer, then compressed: a straight corridor is two points. */
    assert_int_equal(corners->task.status, PD_OK);
    assert_int_equal(corners->path.path_len, 2);
    assert_int_equal(corners->path.path[0].x, 5);
    assert_int_equal(corners->path.path[1].x, CORRIDOR_LEN - 5);
    free_jobs(done, 3);
    pool_close(pool, &w);
}

static void test_corners_style(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    pd_pool *pool = pool_open(&w, 1, 8, 0);
    assert_non_null(pool);

    submit_ok(pool, make_job(f->small, 1, 1, 0, 0, 9, 4));
    pd_job *corners = make_job(f->small, 1, 2, 0, 0, 9, 4);
    corners->path_query.style = PD_STYLE_CORNERS;
    submit_ok(pool, corners);
    pd_job *straight = make_job(f->small, 1, 3, 0, 6, 9, 6);
    straight->path_query.style = PD_STYLE_CORNERS;
    submit_ok(pool, straight);

    pd_job *done[3];
    collect(pool, &w, done, 3);
    pd_job *cells = done[0];
    assert_int_equal(cells->task.status, PD_OK);
    assert_int_equal(corners->task.status, PD_OK);
    assert_int_equal(cells->path.path_len, 10);
    assert_float_equal(corners->path.metrics.cost, 4 * SQRT2 + 5, 1e-9);

    /* The corners are exactly the cell path compressed; the search is
     * deterministic, so both jobs found the same cells. A path that turns
     * from diagonal to straight has at least one corner between its ends. */
    pd_point expect[10];
    memcpy(expect, cells->path.path, sizeof expect);
    size_t n = pd_path_corners(expect, 10);
    assert_true(n >= 3 && n < 10);
    assert_int_equal(corners->path.path_len, n);
    assert_memory_equal(corners->path.path, expect, n * sizeof expect[0]);

    assert_int_equal(straight->task.status, PD_OK);
    assert_int_equal(straight->path.path_len, 2);
    assert_int_equal(straight->path.path[0].x, 0);
    assert_int_equal(straight->path.path[1].x, 9);
    assert_int_equal(straight->path.path[1].y, 6);
    free_jobs(done, 3);
    pool_close(pool, &w);
}

/* Runs the same jobs on two pools, A* only and with jump points, and
 * returns nothing: every answer must agree in status, cost and endpoints, and
 * the JPS pool must expand fewer nodes in total (it expands jump points). */
static void test_jump_points_match_astar(void **state)
{
    pool_fixture *f = *state;
    enum { N = 40 };
    test_waker wa, wj;
    waker_init(&wa, 0);
    waker_init(&wj, 0);
    pd_pool *astar = pd_pool_create(1, N, &qj_thread_ops, NULL, waker_wake, &wa);
    pd_pool *jps = pd_pool_create(1, N, &qj_thread_ops, NULL, waker_wake, &wj);
    assert_non_null(astar);
    assert_non_null(jps);
    /* Deterministic pairs on the big grid (uniform cost, 8-connected):
     * spread over the map, plus the walled-in goal (NO_PATH both ways). */
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (uint64_t id = 1; id <= N; id++) {
        int32_t c[4];
        for (int k = 0; k < 4; k++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            c[k] = (int32_t)(x % 400);
        }
        if (id == N) { c[2] = BIG_SIDE - 1; c[3] = BIG_SIDE - 1; }
        submit_ok(astar, make_job(f->big, 1, id, c[0], c[1], c[2], c[3]));
        pd_job *jj = make_job(f->big, 1, id, c[0], c[1], c[2], c[3]);
        jj->jump_points = 1;
        submit_ok(jps, jj);
    }
    pd_job *a[N], *j[N];
    collect(astar, &wa, a, N);
    collect(jps, &wj, j, N);
    uint64_t exp_a = 0, exp_j = 0;
    for (size_t i = 0; i < N; i++) {
        assert_int_equal(a[i]->task.tag, j[i]->task.tag);
        assert_int_equal(a[i]->task.status, j[i]->task.status);
        assert_float_equal(a[i]->path.metrics.cost, j[i]->path.metrics.cost, 1e-9);
        if (a[i]->task.status == PD_OK) {
            assert_int_equal(a[i]->path.path_len > 0, 1);
            assert_int_equal(j[i]->path.path[0].x, a[i]->path.path[0].x);
            assert_int_equal(j[i]->path.path[j[i]->path.path_len - 1].y, a[i]->path.path[a[i]->path.path_len - 1].y);
        }
        exp_a += a[i]->path.metrics.expanded;
        exp_j += j[i]->path.metrics.expanded;
    }
    assert_true(exp_j < exp_a);
    free_jobs(a, N);
    free_jobs(j, N);
    qj_pool_destroy(astar);
    pool_close(jps, &wa);
    waker_destroy(&wj);
}

/* A lone request's search on the loop (pd_query_find_path_small with
 * jump_points, issue 30 item 5): where A* on the loop gives up at once
 * (ends farther apart than its budget), it answers, with the very path a
 * worker's jump point search gives, corners style included. */
static void test_small_search_with_jump_points(void **state)
{
    pool_fixture *f = *state;
    pd_query_scratch *loop = pd_query_scratch_create(), *worker = pd_query_scratch_create();
    assert_non_null(loop);
    assert_non_null(worker);
    static const pd_point ends[][2] = {{{3, 5}, {1500, 1200}}, {{1700, 20}, {40, 1650}}, {{10, 10}, {12, 900}}};
    for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++)
        for (int style = 0; style < 2; style++) {
            pd_path_query q;
            memset(&q, 0, sizeof q);
            q.params.start = ends[i][0];
            q.params.goal = ends[i][1];
            q.params.connectivity = PD_CONNECT_8;
            q.style = style ? PD_STYLE_CORNERS : PD_STYLE_CELLS;
            pd_path_result a, b;
            assert_int_equal(pd_query_find_path_small(loop, f->big, &q, 512, 0, &a), 0);
            assert_int_equal(pd_query_find_path_small(loop, f->big, &q, 512, 1, &a), 1);
            const pd_query_control ctl = {NULL, NULL, 1};
            assert_int_equal(pd_query_find_path(worker, f->big, &q, &ctl, &b), PD_OK);
            assert_int_equal(a.status, PD_OK);
            assert_float_equal(a.metrics.cost, b.metrics.cost, 1e-9);
            assert_int_equal(a.metrics.expanded, b.metrics.expanded);
            assert_int_equal(a.path_len, b.path_len);
            assert_memory_equal(a.path, b.path, a.path_len * sizeof *a.path);
            pd_path_result_free(&a);
            pd_path_result_free(&b);
        }
    pd_query_scratch_destroy(loop);
    pd_query_scratch_destroy(worker);
}

/* The corners style from jump point search (issue 30, item 6): the search
 * takes the corners from its jump points and no corners pass runs over
 * them again, and the answer is still byte for byte the cell path's
 * corners (pd_path_corners over the same search's every-cell answer), with
 * the same arrival times, over every den520d scenario of tests/data. */
static void test_den520d_corners_from_jump_points(void **state)
{
    (void)state;
    char path[512], err[256];
    pd_conf_scene cs = wire4_entry("den520d", "movingai/maps/den520d.map", path, sizeof path);
    cs.format = PD_MAP_MOVINGAI;
    cs.n_unit_sizes = 1;
    pd_scene *scene = pd_scene_load(&cs, err, sizeof err);
    if (!scene)
        fail_msg("%s", err);
    char scen[512];
    snprintf(scen, sizeof scen, "%s/movingai/scen/den520d.map.scen", PD_TEST_DATA_DIR);
    FILE *in = fopen(scen, "r");
    assert_non_null(in);
    pd_query_scratch *s = pd_query_scratch_create();
    assert_non_null(s);
    const pd_query_control jps = {NULL, NULL, 1};
    char line[512];
    size_t n = 0, bent = 0;
    while (fgets(line, sizeof line, in)) {
        int sx, sy, gx, gy;
        if (sscanf(line, "%*d %*s %*d %*d %d %d %d %d", &sx, &sy, &gx, &gy) != 4)
            continue;
        pd_path_query q;
        memset(&q, 0, sizeof q);
        q.params.start = (pd_point){sx, sy};
        q.params.goal = (pd_point){gx, gy};
        q.params.connectivity = PD_CONNECT_8;
        q.speed = (n % 2) ? 1.5 : 0; /* every other one with arrival times */
        pd_path_result cells, corners;
        q.style = PD_STYLE_CELLS;
        assert_int_equal(pd_query_find_path(s, scene, &q, &jps, &cells), PD_OK);
        q.style = PD_STYLE_CORNERS;
        assert_int_equal(pd_query_find_path(s, scene, &q, &jps, &corners), PD_OK);
        const size_t k = pd_path_corners(cells.path, cells.path_len);
        if (corners.path_len != k || memcmp(corners.path, cells.path, k * sizeof *cells.path) != 0)
            fail_msg("(%d,%d)->(%d,%d): %zu corners answered, %zu in the %zu cells", sx, sy, gx, gy,
                     corners.path_len, k, (size_t)cells.metrics.path_len);
        if (q.speed > 0) {
            double *t = malloc(k * sizeof *t);
            assert_non_null(t);
            pd_path_times(scene->grid, cells.path, k, q.speed / scene->cell_size, 0, t);
            assert_non_null(corners.times);
            assert_memory_equal(corners.times, t, k * sizeof *t);
            free(t);
        }
        assert_float_equal(corners.metrics.cost, cells.metrics.cost, 0);
        bent += k > 2;
        n++;
        pd_path_result_free(&cells);
        pd_path_result_free(&corners);
    }
    fclose(in);
    assert_true(n >= 800);    /* the file's every scenario was read */
    assert_true(bent > n / 2); /* and most paths turn: the corners are not just the ends */
    pd_query_scratch_destroy(s);
    pd_scene_release(scene);
}

/* ---- routes ---- */

#define ROUTE_WORLD_JSON PD_TEST_DATA_DIR "/route_world.json"

/* The route test world: its scenes in a registry, its portals parsed, and a
 * world store built over them. */
typedef struct route_fixture {
    pd_registry *reg;
    pd_conf_world cw;
    pd_world_store *store;
    pd_store *changes;   /* over reg and store: the updates' way in */
} route_fixture;

static void route_fixture_init(route_fixture *rf)
{
    static const char *const names[] = {"plaza", "hall", "tunnel", "vault"};
    pd_conf conf = pd_conf_defaults;
    char err[256];
    conf.scenes = calloc(4, sizeof *conf.scenes);
    assert_non_null(conf.scenes);
    conf.n_scenes = 4;
    for (size_t i = 0; i < 4; i++) {
        pd_conf_scene *cs = &conf.scenes[i];
        char path[512];
        snprintf(cs->name, sizeof cs->name, "%s", names[i]);
        snprintf(path, sizeof path, "%s/route_%s.txt", PD_TEST_DATA_DIR, names[i]);
        cs->map_path = strdup(path);
        assert_non_null(cs->map_path);
        cs->format = PD_MAP_ASCII;
        cs->cell_size = i == 3 ? 0.5 : 1.0; /* the vault's cells are smaller: timing crosses scales */
        cs->unit_sizes[0] = 1;
        cs->unit_sizes[1] = 2;
        cs->n_unit_sizes = 2;
    }
    rf->reg = pd_registry_create();
    assert_non_null(rf->reg);
    if (pd_registry_load(rf->reg, &conf, err, sizeof err) != 0)
        fail_msg("%s", err);
    pd_conf_free(&conf);

    FILE *f = fopen(ROUTE_WORLD_JSON, "rb");
    assert_non_null(f);
    char json[8192];
    size_t len = fread(json, 1, sizeof json, f);
    fclose(f);
    assert_true(len > 0 && len < sizeof json);
    if (pd_conf_world_parse_buffer(json, len, ROUTE_WORLD_JSON, names, 4, &rf->cw, err, sizeof err) != 0)
        fail_msg("%s", err);
    rf->store = pd_world_store_create();
    assert_non_null(rf->store);
    if (pd_world_store_rebuild(rf->store, &rf->cw, rf->reg, err, sizeof err) != 0)
        fail_msg("%s", err);
    rf->changes = pd_store_create(rf->reg, rf->store);
    assert_non_null(rf->changes);
}

static void route_fixture_free(route_fixture *rf)
{
    pd_store_destroy(rf->changes);
    pd_world_store_destroy(rf->store);
    pd_conf_world_free(&rf->cw);
    pd_registry_destroy(rf->reg);
}

static pd_job *make_route_job(route_fixture *rf, uint64_t req, const char *from, pd_point start, const char *to,
                              pd_point goal, uint32_t unit)
{
    pd_job *job = qj_new();
    assert_non_null(job);
    job->kind = PD_REQ_FIND_ROUTE;
    job->task.tag = req;
    job->world = pd_world_store_acquire(rf->store);
    assert_non_null(job->world);
    snprintf(job->route_query.from_scene, sizeof job->route_query.from_scene, "%s", from);
    snprintf(job->route_query.to_scene, sizeof job->route_query.to_scene, "%s", to);
    job->route_query.start = start;
    job->route_query.goal = goal;
    job->route_query.unit_size = unit;
    return job;
}

/* Independent A* cost between two cells of a scene's unit grid. */
static double route_walk_cost(const pd_scene *scene, uint32_t unit, pd_point a, pd_point b)
{
    pd_search_ctx *ctx = pd_search_ctx_create();
    assert_non_null(ctx);
    const pd_scene_unit *su = pd_scene_unit_for(scene, unit);
    assert_non_null(su);
    pd_search_params p = {.start = a, .goal = b, .connectivity = PD_CONNECT_8};
    pd_search_metrics m;
    pd_status st = pd_search_astar(ctx, su->grid, &p, NULL, 0, &m);
    pd_search_ctx_destroy(ctx);
    return st == PD_OK ? m.cost : INFINITY;
}

/* A finished route: legs chain through their portals from start to end,
 * every leg is a cell path on its scene's unit grid whose cost an
 * independent A* confirms, and the total adds legs and portals. */
static void assert_route(const pd_job *job, const char *from, pd_point start, const char *to, pd_point end,
                         uint32_t unit)
{
    assert_true(job->route.n_legs >= 1);
    assert_null(job->world);   /* released by the worker */
    double total = 0;
    for (size_t i = 0; i < job->route.n_legs; i++) {
        const pd_route_leg *leg = &job->route.legs[i];
        const pd_grid *g = pd_scene_unit_for(leg->scene, unit)->grid;
        assert_true(leg->path_len >= 1);
        if (i == 0) {
            assert_string_equal(leg->scene->name, from);
            assert_int_equal(leg->path[0].x, start.x);
            assert_int_equal(leg->path[0].y, start.y);
        } else {
            const pd_route_leg *prev = &job->route.legs[i - 1];
            assert_string_equal(prev->next_scene, leg->scene->name);
            assert_int_equal(leg->path[0].x, prev->portal_entry.x);
            assert_int_equal(leg->path[0].y, prev->portal_entry.y);
        }
        pd_point last = leg->path[leg->path_len - 1];
        if (i + 1 == job->route.n_legs) {
            assert_false(leg->has_portal);
            assert_string_equal(leg->scene->name, to);
            assert_int_equal(last.x, end.x);
            assert_int_equal(last.y, end.y);
        } else {
            assert_true(leg->has_portal);
            assert_int_equal(last.x, leg->portal_exit.x);
            assert_int_equal(last.y, leg->portal_exit.y);
        }
        for (size_t k = 1; k < leg->path_len; k++) {
            int dx = abs(leg->path[k].x - leg->path[k - 1].x), dy = abs(leg->path[k].y - leg->path[k - 1].y);
            assert_true(dx <= 1 && dy <= 1 && dx + dy >= 1);
            assert_int_not_equal(pd_grid_get(g, leg->path[k].x, leg->path[k].y), PD_CELL_BLOCKED);
        }
        assert_float_equal(leg->cost, route_walk_cost(leg->scene, unit, leg->path[0], last), 1e-9);
        total += leg->cost + (leg->has_portal ? leg->portal_cost : 0);
    }
    assert_float_equal(job->route.metrics.cost, total, 1e-9);
}

static void test_route_jobs(void **state)
{
    (void)state;
    route_fixture rf;
    route_fixture_init(&rf);
    test_waker w;
    pd_pool *pool = pool_open(&w, 2, 16, 0);
    assert_non_null(pool);

    /* A route job needs a world. */
    pd_job *bad = qj_new();
    assert_non_null(bad);
    bad->kind = PD_REQ_FIND_ROUTE;
    assert_int_equal(run_now(bad)->task.status, PD_INVALID_ARGUMENT);
    pd_job_free(bad);

    /* Unit 1 goes through the hall; unit 2 may not take plaza-hall
     * (max_unit 1), so it goes another way and pays more. */
    pd_point start = {2, 2}, goal = {5, 2};
    submit_ok(pool, make_route_job(&rf, 1, "plaza", start, "vault", goal, 1));
    submit_ok(pool, make_route_job(&rf, 2, "plaza", start, "vault", goal, 2));
    /* Unknown scenes and blocked goals come back as the planner says. */
    submit_ok(pool, make_route_job(&rf, 3, "plaza", start, "attic", goal, 1));
    submit_ok(pool, make_route_job(&rf, 4, "plaza", start, "vault", (pd_point){0, 3}, 1));
    pd_job *done[4];
    collect(pool, &w, done, 4);
    pd_job *by_id[5] = {0};
    for (int i = 0; i < 4; i++)
        by_id[done[i]->task.tag] = done[i];

    assert_int_equal(by_id[1]->task.status, PD_OK);
    assert_route(by_id[1], "plaza", start, "vault", goal, 1);
    assert_int_equal(by_id[1]->route.n_legs, 3);
    assert_string_equal(by_id[1]->route.legs[0].portal, "plaza-hall");
    assert_string_equal(by_id[1]->route.legs[1].portal, "hall-vault");
    assert_true(by_id[1]->route.metrics.expanded > 0);
    assert_null(by_id[1]->route.legs[0].times);

    assert_int_equal(by_id[2]->task.status, PD_OK);
    assert_route(by_id[2], "plaza", start, "vault", goal, 2);
    for (size_t i = 0; i < by_id[2]->route.n_legs; i++)
        if (by_id[2]->route.legs[i].has_portal)
            assert_string_not_equal(by_id[2]->route.legs[i].portal, "plaza-hall");
    assert_true(by_id[2]->route.metrics.cost > by_id[1]->route.metrics.cost);

    assert_int_equal(by_id[3]->task.status, PD_UNKNOWN_SCENE);
    assert_null(by_id[3]->route.legs);
    assert_int_equal(by_id[4]->task.status, PD_GOAL_BLOCKED);
    assert_null(by_id[4]->route.legs);
    free_jobs(done, 4);

    /* Corners and times: times run on across each portal, which takes
     * portal_cost * cell_size / speed seconds of the departing scene. */
    pd_job *timed = make_route_job(&rf, 5, "plaza", start, "vault", goal, 1);
    timed->route_query.style = PD_STYLE_CORNERS;
    timed->route_query.speed = 2.0;
    timed->route_query.start_time = 5.0;
    submit_ok(pool, timed);
    collect(pool, &w, done, 1);
    assert_int_equal(done[0]->task.status, PD_OK);
    double t = 5.0;
    for (size_t i = 0; i < done[0]->route.n_legs; i++) {
        const pd_route_leg *leg = &done[0]->route.legs[i];
        double speed_cells = 2.0 / leg->scene->cell_size;
        assert_non_null(leg->times);
        assert_float_equal(leg->times[0], t, 1e-9);
        double expect[64];
        assert_true(leg->path_len <= 64);
        pd_path_times(pd_scene_unit_for(leg->scene, 1)->grid, leg->path, leg->path_len, speed_cells, t, expect);
        for (size_t k = 0; k < leg->path_len; k++)
            assert_float_equal(leg->times[k], expect[k], 1e-9);
        t = leg->times[leg->path_len - 1] + (leg->has_portal ? leg->portal_cost / speed_cells : 0);
        /* Corners: no three consecutive waypoints on one straight line. */
        for (size_t k = 2; k < leg->path_len; k++) {
            int dx1 = leg->path[k - 1].x - leg->path[k - 2].x, dy1 = leg->path[k - 1].y - leg->path[k - 2].y;
            int dx2 = leg->path[k].x - leg->path[k - 1].x, dy2 = leg->path[k].y - leg->path[k - 1].y;
            assert_true((long)dx1 * dy2 != (long)dy1 * dx2 || (long)dx1 * dx2 + (long)dy1 * dy2 < 0);
        }
    }
    free_jobs(done, 1);

    /* NEAREST: a goal in the vault's wall becomes the nearest cell the route
     * can reach (PARTIAL, goal_used), and the route ends there. */
    pd_job *nearest = make_route_job(&rf, 6, "plaza", start, "vault", (pd_point){0, 3}, 1);
    nearest->route_query.goal_mode = PD_GOAL_NEAREST;
    submit_ok(pool, nearest);
    collect(pool, &w, done, 1);
    assert_int_equal(done[0]->task.status, PD_PARTIAL);
    assert_true(done[0]->route.goal_substituted);
    assert_int_equal(done[0]->route.goal_used.x, 1);
    assert_int_equal(done[0]->route.goal_used.y, 3);
    assert_route(done[0], "plaza", start, "vault", done[0]->route.goal_used, 1);
    free_jobs(done, 1);

    /* An update through the pool refreshes the world's tables: with the
     * plaza end of plaza-hall blocked, unit 1 no longer goes through the
     * hall; opening it again brings the hall back. */
    for (int round = 0; round < 2; round++) {
        pd_update_op op = round == 0 ? PD_UPDATE_BLOCK : PD_UPDATE_PASS;
        pd_job *u = make_update_job(rf.changes, "plaza", op, (pd_point){9, 1});
        submit_ok(pool, u);
        collect(pool, &w, done, 1);
        assert_int_equal(done[0]->task.status, PD_OK);
        assert_int_equal(done[0]->update.world_refresh, PD_OK);
        free_jobs(done, 1);

        submit_ok(pool, make_route_job(&rf, 7, "plaza", start, "vault", goal, 1));
        collect(pool, &w, done, 1);
        assert_int_equal(done[0]->task.status, PD_OK);
        assert_route(done[0], "plaza", start, "vault", goal, 1);
        int via_hall = 0;
        for (size_t i = 0; i < done[0]->route.n_legs; i++)
            via_hall |= done[0]->route.legs[i].has_portal && !strcmp(done[0]->route.legs[i].portal, "plaza-hall");
        assert_int_equal(via_hall, round == 1);
        free_jobs(done, 1);
    }

    pool_close(pool, &w);
    route_fixture_free(&rf);
}

/* ---- searches on the pool: stopped part way, contexts trimmed (moved
 * from test_pool.c, which now runs tasks of its own) ---- */

/* Runs one short job on the big grid so the worker's thread is up and its
 * context has grown to that grid: a timed test then measures the search,
 * not a one-off allocation. */
static void warm_up(pd_pool *pool, test_waker *w, pool_fixture *f)
{
    submit_ok(pool, make_job(f->big, 0, 0, 0, 0, 5, 5));
    pd_job *warm[1];
    collect(pool, w, warm, 1);
    assert_int_equal(warm[0]->task.status, PD_OK);
    free_jobs(warm, 1);
}

/* A path query with no scene is the query layer's to refuse. */
static void test_path_query_without_scene(void **state)
{
    (void)state;
    pd_job *no_scene = run_now(qj_new());
    assert_int_equal(no_scene->task.status, PD_INVALID_ARGUMENT);
    pd_job_free(no_scene);
}

/* A running search polls its task: a cancel stops it part way. */
static void test_long_search_stops_when_cancelled(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    pd_pool *pool = pool_open(&w, 1, 4, 0);
    assert_non_null(pool);

    submit_ok(pool, make_long_job(f, 5, 1));
    wait_running(pool, 1);
    assert_int_equal(pd_pool_cancel(pool, 5, 1), 1);
    pd_job *done[1];
    collect(pool, &w, done, 1);
    assert_int_equal(done[0]->task.status, PD_CANCELLED);
    assert_true(done[0]->path.metrics.expanded < (uint64_t)BIG_SIDE * BIG_SIDE);
    assert_null(done[0]->path.path);
    free_jobs(done, 1);
    pool_close(pool, &w);
}

/* A search that would exhaust four million cells (170-250 ms in an
 * optimised build) stops at its deadline, part way through. */
#define SHORT_DEADLINE_NS (20ull * 1000000ull)

static void test_long_search_stops_at_deadline(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    pd_pool *pool = pool_open(&w, 1, 4, 0);
    assert_non_null(pool);

    warm_up(pool, &w, f);
    pd_job *job = make_long_job(f, 1, 1);
    job->task.deadline_ns = pd_pool_now_ns() + SHORT_DEADLINE_NS;
    submit_ok(pool, job);
    pd_job *done[1];
    collect(pool, &w, done, 1);
    assert_int_equal(job->task.status, PD_DEADLINE_EXCEEDED);
    assert_true(job->path.metrics.expanded > 0);
    assert_true(job->path.metrics.expanded < (uint64_t)BIG_SIDE * BIG_SIDE);
    assert_true(job->task.finished_ns >= job->task.deadline_ns);
    assert_null(job->path.path);
    free_jobs(done, 1);
    pool_close(pool, &w);
}

/* Destroy does not wait for a long search to finish on its own: it stops it
 * at the next poll, a thousand expansions away. The running search comes
 * back CANCELLED part way through the grid (a search left to run would
 * exhaust all of it and answer NO_PATH) and the queued one never ran.
 * Judged by the search's own expansion count, not by a wall-clock bound,
 * which a loaded machine (parallel ctest beside a CPU hog) can blow by
 * descheduling the worker; exhausting the grid takes 4 M expansions. */
static void test_destroy_stops_running_search(void **state)
{
    pool_fixture *f = *state;
    test_waker w;
    pd_pool *pool = pool_open(&w, 1, 4, 0);
    assert_non_null(pool);
    warm_up(pool, &w, f);

    pd_job *running = make_long_job(f, 1, 1), *queued = make_long_job(f, 1, 2);
    submit_ok(pool, running);
    submit_ok(pool, queued);
    wait_running(pool, 1);
    size_t left = 0;
    for (pd_task *t = pd_pool_destroy(pool); t; left++) {
        pd_task *next = t->next;
        qj_settled(t);
        t = next;
    }
    assert_int_equal(left, 2);
    assert_int_equal(running->task.status, PD_CANCELLED);
    assert_true(running->path.metrics.expanded > 0);
    assert_true(running->path.metrics.expanded < (uint64_t)BIG_SIDE * BIG_SIDE);
    assert_null(running->path.path);
    assert_int_equal(queued->task.status, PD_CANCELLED);
    assert_int_equal(queued->path.metrics.expanded, 0);
    /* The running search completed (one more wake); the queued one never ran. */
    assert_int_equal(waker_wakes(&w), 2);
    pd_job_free(running);
    pd_job_free(queued);
    assert_int_equal(atomic_load(&f->big->refs), 1);
    waker_destroy(&w);
}

/* Runs one long job (A* across the big grid, or jump point search) on a
 * fresh 2-worker pool keeping `retained` bytes per worker; returns the
 * pool's statistics after it, checking the path. */
static pd_pool_stats run_long_and_stat(pool_fixture *f, size_t *retained, int jump_points)
{
    test_waker w;
    waker_init(&w, 0);
    pd_pool *pool = pd_pool_create(2, 8, &qj_thread_ops, retained, waker_wake, &w);
    assert_non_null(pool);
    pd_pool_stats st;
    pd_pool_get_stats(pool, &st);
    /* Nothing sized for any grid before the first task. */
    assert_true(st.context_bytes_max < 64 * 1024);

    pd_job *job = make_job(f->big, 1, 1, 0, 0, BIG_SIDE - 3, BIG_SIDE - 1);
    job->jump_points = jump_points;
    submit_ok(pool, job);
    pd_job *done[1];
    collect(pool, &w, done, 1);
    assert_int_equal(job->task.status, PD_OK);
    assert_cell_path(job);
    assert_float_equal(job->path.metrics.cost, octile(job->path_query.params.start, job->path_query.params.goal), 1e-9);
    pd_pool_get_stats(pool, &st);
    free_jobs(done, 1);
    pool_close(pool, &w);
    return st;
}

/* A worker's context grows with its search and, after the task and before
 * it completes, gives back whatever exceeds the retained size: with
 * everything kept the long search leaves megabytes behind, with 256 KiB
 * retained the statistics show at most that, for A* and for jump points. */
static void test_query_contexts_trim(void **state)
{
    pool_fixture *f = *state;
    size_t retained = 256 * 1024;
    for (int jps = 0; jps <= 1; jps++) {
        pd_pool_stats kept = run_long_and_stat(f, NULL, jps);
        assert_true(kept.context_bytes_max > retained);
        assert_true(kept.context_bytes >= kept.context_bytes_max);
        pd_pool_stats trimmed = run_long_and_stat(f, &retained, jps);
        assert_true(trimmed.context_bytes_max <= retained);
        assert_true(trimmed.context_bytes <= 2 * retained);
        assert_true(trimmed.context_bytes_max > 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scene_pick_overrides_server),
        cmocka_unit_test(test_unit_size_two_avoids_narrow_gap),
        cmocka_unit_test(test_snap_blocked_endpoints),
        cmocka_unit_test(test_unreachable_goal_modes),
        cmocka_unit_test(test_avoid_cells),
        cmocka_unit_test(test_search_window),
        cmocka_unit_test(test_partial_on_cutoff),
        cmocka_unit_test(test_smooth_style),
        cmocka_unit_test(test_waypoint_times),
        cmocka_unit_test(test_waypoint_times_that_overflow),
        cmocka_unit_test(test_costs_on_open_grid),
        cmocka_unit_test(test_long_path),
        cmocka_unit_test(test_corners_style),
        cmocka_unit_test(test_jump_points_match_astar),
        cmocka_unit_test(test_small_search_with_jump_points),
        cmocka_unit_test(test_den520d_corners_from_jump_points),
        cmocka_unit_test(test_update_cells_jobs),
        cmocka_unit_test(test_route_jobs),
        cmocka_unit_test(test_path_query_without_scene),
        cmocka_unit_test(test_long_search_stops_when_cancelled),
        cmocka_unit_test(test_long_search_stops_at_deadline),
        cmocka_unit_test(test_destroy_stops_running_search),
        cmocka_unit_test(test_query_contexts_trim),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
