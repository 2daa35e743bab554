/*
 * test_movement.c - the movement queries of the query layer
 * (pd_movement.c), run directly with no threads or sockets, on
 * tests/data/move_arena.txt (10x8, origin (100, 200), cell size 2, units 1
 * and 2):
 *
 *   ..........
 *   ..........
 *   ...#......     (3,2) and (4,3) touch at a corner: a diagonal pinch
 *   ....#.....
 *   ..........
 *   .....###..
 *   ..........
 *   ..........
 *
 * ValidateMove against hand-made cheats: through a wall, across the pinch,
 * a speed hack, a teleport, time running backwards, a point out of bounds;
 * and honest moves, with world points and for a 2x2 unit. RandomPoint
 * draws uniformly (chi-square over many seeds) only cells within the
 * walking distance, and a seed repeats its cell. IsReachable and
 * NearestWalkable agree with the labels; refusals name their field.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pd_movement.h"

typedef struct fixture {
    pd_scene *scene;
    pd_query_scratch *scratch;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    char path[512], err[256];
    pd_conf_scene cs;
    memset(&cs, 0, sizeof cs);
    snprintf(cs.name, sizeof cs.name, "arena");
    snprintf(path, sizeof path, "%s/move_arena.txt", PD_TEST_DATA_DIR);
    cs.map_path = path;
    cs.format = PD_MAP_ASCII;
    cs.origin_x = 100;
    cs.origin_y = 200;
    cs.cell_size = 2;
    cs.unit_sizes[0] = 1;
    cs.unit_sizes[1] = 2;
    cs.n_unit_sizes = 2;
    f->scene = pd_scene_load(&cs, err, sizeof err);
    if (!f->scene)
        fail_msg("%s", err);
    f->scratch = pd_query_scratch_create();
    assert_non_null(f->scratch);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    pd_scene_release(f->scene);
    pd_query_scratch_destroy(f->scratch);
    free(f);
    return 0;
}

static pd_point_spec cell(int32_t x, int32_t y)
{
    pd_point_spec p = {0};
    p.cell = (pd_point){x, y};
    return p;
}

static pd_point_spec world(double x, double y)
{
    pd_point_spec p = {0};
    p.is_world = 1;
    p.wx = x;
    p.wy = y;
    return p;
}

/* Prepares and runs one query on the fixture's scene. */
static pd_status run(fixture *f, pd_move_req *req, pd_move_result *r)
{
    if (!req->scene[0])
        snprintf(req->scene, sizeof req->scene, "arena");
    if (!req->unit_size)
        req->unit_size = 1;
    pd_move_query q;
    pd_scene_retain(f->scene);
    pd_status st = pd_move_prepare(f->scene, req, &q, r);
    if (st == PD_OK)
        st = pd_move_run(f->scratch, &q, r);
    pd_move_query_release(&q);
    return st;
}

/* Validates moves given as cells (x, y, t) at max_speed world units/s. */
static pd_move_result validate(fixture *f, const double (*pts)[3], size_t n, double speed, uint32_t unit)
{
    pd_timed_point moves[16];
    for (size_t i = 0; i < n; i++) {
        moves[i].point = cell((int32_t)pts[i][0], (int32_t)pts[i][1]);
        moves[i].t = pts[i][2];
    }
    pd_move_req req = {.kind = PD_REQ_VALIDATE_MOVE, .moves = moves, .n_moves = n, .max_speed = speed,
                       .unit_size = unit};
    pd_move_result r;
    assert_int_equal(run(f, &req, &r), PD_OK);
    return r;
}

static void test_validate_catches_cheats(void **state)
{
    fixture *f = *state;
    /* Honest: along row 0 at 2 cells (4 world units) per second, speed 4. */
    const double honest[][3] = {{0, 0, 0}, {2, 0, 1}, {4, 0, 2}, {4, 1, 2.5}};
    pd_move_result r = validate(f, honest, 4, 4.0, 1);
    assert_true(r.yes);
    assert_int_equal(r.first_invalid, -1);
    assert_int_equal(r.cell.x, 4);
    assert_int_equal(r.cell.y, 1);

    /* Through the wall (5..7, 5): from (6,4) to (6,6). */
    const double wall[][3] = {{6, 3, 0}, {6, 4, 1}, {6, 6, 2}};
    r = validate(f, wall, 3, 100, 1);
    assert_false(r.yes);
    assert_int_equal(r.first_invalid, 2);
    assert_int_equal(r.reason, PD_MOVE_BLOCKED_SEGMENT);
    assert_int_equal(r.cell.x, 6); /* put back where the segment meets the wall */
    assert_int_equal(r.cell.y, 4);

    /* Across the pinch between (3,2) and (4,3): (3,3) -> (4,2) diagonally. */
    const double pinch[][3] = {{2, 4, 0}, {3, 3, 1}, {4, 2, 2}};
    r = validate(f, pinch, 3, 100, 1);
    assert_false(r.yes);
    assert_int_equal(r.first_invalid, 2);
    assert_int_equal(r.reason, PD_MOVE_BLOCKED_SEGMENT);
    assert_int_equal(r.cell.x, 3);
    assert_int_equal(r.cell.y, 3);

    /* Speed hack: 9 cells (18 world units) in one second at max 4. */
    const double fast[][3] = {{0, 7, 0}, {1, 7, 0.5}, {9, 7, 1.5}};
    r = validate(f, fast, 3, 4.0, 1);
    assert_false(r.yes);
    assert_int_equal(r.first_invalid, 2);
    assert_int_equal(r.reason, PD_MOVE_TOO_FAST);
    assert_int_equal(r.cell.x, 1);
    /* ... but legal with a tolerance that covers it: 16 / 1 <= 4 * (1 + 3). */
    pd_timed_point moves[3];
    for (int i = 0; i < 3; i++) {
        moves[i].point = cell((int32_t)fast[i][0], (int32_t)fast[i][1]);
        moves[i].t = fast[i][2];
    }
    pd_move_req req = {.kind = PD_REQ_VALIDATE_MOVE, .moves = moves, .n_moves = 3, .max_speed = 4, .tolerance = 3};
    assert_int_equal(run(f, &req, &r), PD_OK);
    assert_true(r.yes);

    /* Teleport: the same instant in two places. */
    const double teleport[][3] = {{0, 0, 0}, {9, 0, 0}};
    r = validate(f, teleport, 2, 1000, 1);
    assert_int_equal(r.first_invalid, 1);
    assert_int_equal(r.reason, PD_MOVE_TIME_NOT_INCREASING);
    assert_int_equal(r.cell.x, 0);

    /* Time running backwards; a point inside a wall; one out of bounds. */
    const double back[][3] = {{0, 0, 5}, {1, 0, 4}};
    r = validate(f, back, 2, 1000, 1);
    assert_int_equal(r.reason, PD_MOVE_TIME_NOT_INCREASING);
    const double inwall[][3] = {{5, 4, 0}, {5, 5, 1}};
    r = validate(f, inwall, 2, 1000, 1);
    assert_int_equal(r.reason, PD_MOVE_BLOCKED_POINT);
    assert_int_equal(r.first_invalid, 1);
    const double outside[][3] = {{-1, 0, 0}};
    r = validate(f, outside, 1, 1000, 1);
    assert_int_equal(r.reason, PD_MOVE_OUT_OF_BOUNDS);
    assert_int_equal(r.first_invalid, 0);
    assert_false(r.has_cell); /* no legal position at all */

    /* A 2x2 unit: anchor (4,4) covers (4..5, 4..5), and (5,5) is a wall. */
    const double big[][3] = {{0, 0, 0}, {4, 4, 10}};
    r = validate(f, big, 2, 1000, 2);
    assert_int_equal(r.reason, PD_MOVE_BLOCKED_POINT);
    const double big_ok[][3] = {{0, 0, 0}, {7, 0, 10}};
    r = validate(f, big_ok, 2, 1000, 2);
    assert_true(r.yes);

    /* World points keep sub-cell precision: 0.3 world units in 0.1 s is 3
     * units/s, legal at 3 and not at 2.9. */
    moves[0].point = world(101.0, 201.0);
    moves[0].t = 0;
    moves[1].point = world(101.3, 201.0);
    moves[1].t = 0.1;
    pd_move_req wreq = {.kind = PD_REQ_VALIDATE_MOVE, .moves = moves, .n_moves = 2, .max_speed = 3};
    assert_int_equal(run(f, &wreq, &r), PD_OK);
    assert_true(r.yes);
    wreq.max_speed = 2.9;
    assert_int_equal(run(f, &wreq, &r), PD_OK);
    assert_int_equal(r.reason, PD_MOVE_TOO_FAST);
}

static void test_raycast_and_move_in_world_units(void **state)
{
    fixture *f = *state;
    /* From world (101, 211) (cell (0,5)) east along y = 211: the wall starts
     * at cell x = 5, world x = 110. */
    pd_move_req req = {.kind = PD_REQ_RAYCAST, .a = world(101, 211), .b = world(119, 211)};
    pd_move_result r;
    assert_int_equal(run(f, &req, &r), PD_OK);
    assert_false(r.yes);
    assert_int_equal(r.hit.x, 5);
    assert_int_equal(r.hit.y, 5);
    assert_int_equal(r.cell.x, 4);
    assert_true(fabs(r.wx - 110.0) < 1e-3 && r.wx < 110.0);
    assert_true(fabs(r.wy - 211.0) < 1e-3);
    assert_int_equal(r.version, f->scene->version);

    /* MoveAlong in world units slides along the wall's top face. */
    pd_move_req mv = {.kind = PD_REQ_MOVE_ALONG, .a = world(111, 207), .dx = 4, .dy = 6};
    assert_int_equal(run(f, &mv, &r), PD_OK);
    assert_true(r.yes);
    assert_int_equal(r.cell.y, 4);
    assert_true(fabs(r.wx - 115.0) < 1e-3);
    /* The same in cells: from (5,3) by (2,3). */
    pd_move_req mc = {.kind = PD_REQ_MOVE_ALONG, .a = cell(5, 3), .dx = 2, .dy = 3};
    assert_int_equal(run(f, &mc, &r), PD_OK);
    assert_true(r.yes);
    assert_int_equal(r.cell.x, 7);
    assert_int_equal(r.cell.y, 4);

    /* Refusals name what was wrong. */
    pd_move_req bad = {.kind = PD_REQ_RAYCAST, .a = cell(3, 2), .b = cell(0, 0)};
    assert_int_equal(run(f, &bad, &r), PD_START_BLOCKED);
    assert_non_null(strstr(r.message, "blocked"));
    pd_move_req out = {.kind = PD_REQ_RAYCAST, .a = cell(0, 0), .b = cell(10, 0)};
    assert_int_equal(run(f, &out, &r), PD_OUT_OF_BOUNDS);
    assert_non_null(strstr(r.message, "to cell (10, 0)"));
    pd_move_req unit = {.kind = PD_REQ_RAYCAST, .a = cell(0, 0), .b = cell(1, 0), .unit_size = 3};
    assert_int_equal(run(f, &unit, &r), PD_INVALID_ARGUMENT);
    assert_non_null(strstr(r.message, "unit size 3"));
}

static void test_reachable_nearest_and_wall(void **state)
{
    fixture *f = *state;
    pd_move_result r;
    pd_move_req reach = {.kind = PD_REQ_REACHABLE, .a = cell(0, 0), .b = cell(9, 7)};
    assert_int_equal(run(f, &reach, &r), PD_OK);
    assert_true(r.yes);
    reach.b = cell(3, 2); /* a wall */
    assert_int_equal(run(f, &reach, &r), PD_OK);
    assert_false(r.yes);

    /* Nearest to the wall cell (6,5): (6,4) and (6,6) are at 1; the smaller y wins. */
    pd_move_req near = {.kind = PD_REQ_NEAREST, .a = cell(6, 5), .radius = 3};
    assert_int_equal(run(f, &near, &r), PD_OK);
    assert_int_equal(r.cell.x, 6);
    assert_int_equal(r.cell.y, 4);
    assert_true(fabs(r.distance - 1.0) < 1e-12);
    assert_true(fabs(r.wx - 113.0) < 1e-9 && fabs(r.wy - 209.0) < 1e-9);
    near.radius = 0;
    assert_int_equal(run(f, &near, &r), PD_NO_PATH);

    /* Distance to the wall from (6,3): (6,5) is 2 away; (4,3) also 2, smaller y wins. */
    pd_move_req wall = {.kind = PD_REQ_DISTANCE_TO_WALL, .a = cell(6, 3), .radius = 10};
    assert_int_equal(run(f, &wall, &r), PD_OK);
    assert_true(r.has_hit);
    assert_true(fabs(r.distance - 2.0) < 1e-12);
    assert_int_equal(r.hit.x, 4);
    assert_int_equal(r.hit.y, 3);
    wall.radius = 1;
    assert_int_equal(run(f, &wall, &r), PD_OK);
    assert_false(r.has_hit);
    assert_true(r.distance == 1.0);
}

/* Cells within walking distance 2.5 of (1,1), counted by hand from the
 * rules (8-connected, sqrt 2 diagonals), each drawn about equally often. */
static void test_random_point_is_uniform(void **state)
{
    fixture *f = *state;
    pd_move_req req = {.kind = PD_REQ_RANDOM_POINT, .a = cell(1, 1), .radius = 2.5};
    pd_move_result r;
    enum { W = 10, H = 8, DRAWS = 20000 };
    unsigned counts[W * H] = {0};
    uint64_t candidates = 0;
    for (uint64_t seed = 1; seed <= DRAWS; seed++) {
        req.seed = seed;
        assert_int_equal(run(f, &req, &r), PD_OK);
        assert_int_equal(r.seed, seed);
        candidates = r.candidates;
        assert_true(r.cell.x >= 0 && r.cell.x < W && r.cell.y >= 0 && r.cell.y < H);
        /* Within walking distance 2.5: Chebyshev <= 2 and not both offsets 2
         * (that costs 2 sqrt 2 > 2.5). */
        int dx = abs(r.cell.x - 1), dy = abs(r.cell.y - 1);
        assert_true(dx <= 2 && dy <= 2 && !(dx == 2 && dy == 2));
        counts[r.cell.y * W + r.cell.x]++;
    }
    /* The 4x4 block x, y in 0..3, less (3,3) (both offsets 2) and the wall
     * (3,2): 14 cells. */
    assert_int_equal(candidates, 14);
    double expect = (double)DRAWS / (double)candidates, chi2 = 0;
    size_t seen = 0;
    for (int i = 0; i < W * H; i++) {
        if (!counts[i])
            continue;
        seen++;
        chi2 += (counts[i] - expect) * (counts[i] - expect) / expect;
    }
    assert_int_equal(seen, candidates);
    /* 13 degrees of freedom: P(chi2 > 34.5) < 0.001. */
    print_message("chi-square %.2f over %zu cells\n", chi2, seen);
    assert_true(chi2 < 34.5);

    /* The same seed gives the same cell; seed 0 gets one picked and reported. */
    req.seed = 42;
    assert_int_equal(run(f, &req, &r), PD_OK);
    pd_point first = r.cell;
    assert_int_equal(run(f, &req, &r), PD_OK);
    assert_int_equal(r.cell.x, first.x);
    assert_int_equal(r.cell.y, first.y);
    req.seed = 0;
    assert_int_equal(run(f, &req, &r), PD_OK);
    assert_true(r.seed != 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_validate_catches_cheats),
        cmocka_unit_test(test_raycast_and_move_in_world_units),
        cmocka_unit_test(test_reachable_nearest_and_wall),
        cmocka_unit_test(test_random_point_is_uniform),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
