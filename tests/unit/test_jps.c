/*
 * test_jps.c - Jump Point Search (pd_jps.h) against A* (pd_search.h).
 *
 * JPS prunes by rules that are easy to get subtly wrong once corner cutting
 * is forbidden, so its answers are checked against A* rather than against
 * expected values: on 500 random grids (sizes 1..60, random obstacles at
 * 0..45% density, half of them with rectangular walls that make rooms and
 * corridors) and 50 random start/goal pairs each, JPS must give A*'s status,
 * A*'s cost within 1e-9 and a full, legal, contiguous path whose summed cost
 * is that cost. The same comparison runs on every 10th query of the eight
 * Moving AI scenario files in tests/data/movingai.
 * Hand-made cases cover the contract: trivial and refused requests, the
 * expansion budget, the poll, buffer-too-small followed by extraction, and
 * context reuse.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core_check.h"
#include "pd_jps.h"
#include "pd_path.h"
#include "test_rng.h"

#define JPS_GRIDS 500
#define JPS_MAX_SIDE 60
#define JPS_MAX_DENSITY_PCT 46 /* densities drawn from 0..45% */
#define JPS_PAIRS_PER_GRID 50
#define JPS_MOVINGAI_EVERY 10
#define JPS_MOVINGAI_FILES 8
#define JPS_PATH_CAP (1024 * 1024)

typedef struct jps_fixture {
    pd_jps_ctx *jps;
    pd_search_ctx *astar;
    pd_point *path;
    pd_point *apath;
} jps_fixture;

static int setup(void **state)
{
    jps_fixture *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    f->jps = pd_jps_ctx_create();
    f->astar = pd_search_ctx_create();
    f->path = malloc(JPS_PATH_CAP * sizeof *f->path);
    f->apath = malloc(JPS_PATH_CAP * sizeof *f->apath);
    *state = f;
    return f->jps && f->astar && f->path && f->apath ? 0 : -1;
}

static int teardown(void **state)
{
    jps_fixture *f = *state;
    pd_jps_ctx_destroy(f->jps);
    pd_search_ctx_destroy(f->astar);
    free(f->path);
    free(f->apath);
    free(f);
    return 0;
}

/* Runs both searches on one query with connectivity conn and fails on any
 * disagreement. Returns the status both gave. */
static pd_status compare_query(jps_fixture *f, const pd_grid *g, pd_connectivity conn, pd_point s, pd_point t,
                               const char *where)
{
    pd_search_params p = { .start = s, .goal = t, .connectivity = conn };
    pd_search_metrics ma, mj;
    pd_status sa = pd_search_astar(f->astar, g, &p, f->apath, JPS_PATH_CAP, &ma);
    pd_status sj = pd_search_jps(f->jps, g, &p, f->path, JPS_PATH_CAP, &mj);
    if (sa != sj)
        fail_msg("%s %d-connected (%d,%d)->(%d,%d): A* says %s, JPS %s", where, conn, s.x, s.y, t.x, t.y,
                 pd_status_name(sa), pd_status_name(sj));
    if (sa != PD_OK)
        return sa;
    if (fabs(ma.cost - mj.cost) > CORE_COST_EPS)
        fail_msg("%s %d-connected (%d,%d)->(%d,%d): A* cost %.12f, JPS %.12f", where, conn, s.x, s.y, t.x, t.y,
                 ma.cost, mj.cost);
    double walked = core_check_path(g, conn, f->path, mj.path_len, s, t);
    if (fabs(walked - mj.cost) > CORE_COST_EPS)
        fail_msg("%s (%d,%d)->(%d,%d): path sums to %.12f, reported %.12f", where, s.x, s.y, t.x, t.y, walked,
                 mj.cost);
    assert_int_equal(mj.end.x, t.x);
    assert_int_equal(mj.end.y, t.y);
    /* The corners style from the jump points equals the corners of the
     * full path (A*'s path buffer is free by now: it takes them). */
    size_t nc = 0;
    assert_int_equal(pd_jps_extract_corners(f->jps, f->apath, JPS_PATH_CAP, &nc), PD_OK);
    const size_t ncells = pd_path_corners(f->path, mj.path_len);
    if (nc != ncells || memcmp(f->apath, f->path, nc * sizeof *f->path) != 0)
        fail_msg("%s %d-connected (%d,%d)->(%d,%d): %zu corners from the jump points, %zu from the %zu cells", where,
                 conn, s.x, s.y, t.x, t.y, nc, ncells, (size_t)mj.path_len);
    return sa;
}

/* A random uniform-cost grid: scattered obstacles, and on odd seeds a few
 * walls with gaps so rooms and corridors (where forced neighbours live) are
 * common. */
static pd_grid *random_grid(uint64_t *rng, int rooms)
{
    int32_t w = 1 + rng_below(rng, JPS_MAX_SIDE), h = 1 + rng_below(rng, JPS_MAX_SIDE);
    int32_t density = rng_below(rng, JPS_MAX_DENSITY_PCT);
    pd_grid *g = pd_grid_create(w, h);
    assert_non_null(g);
    for (int32_t y = 0; y < h; y++)
        for (int32_t x = 0; x < w; x++)
            pd_grid_set(g, x, y, rng_below(rng, 100) < density ? PD_CELL_BLOCKED : PD_CELL_FREE);
    if (rooms) {
        int walls = 1 + rng_below(rng, 6);
        for (int k = 0; k < walls; k++) {
            int vertical = rng_below(rng, 2);
            int32_t at = rng_below(rng, vertical ? w : h);
            int32_t len = vertical ? h : w;
            for (int32_t i = 0; i < len; i++)
                if (rng_below(rng, 100) >= 8)
                    pd_grid_set(g, vertical ? at : i, vertical ? i : at, PD_CELL_BLOCKED);
        }
    }
    return g;
}

/* Whether padded (px, py) is an open cell; outside the padding counts as
 * blocked, as the bitsets' zero lead and trailing words say. */
static int padded_open(const pd_grid *g, int32_t px, int32_t py)
{
    if (px < 0 || py < 0 || px >= g->stride || py >= g->height + 2)
        return 0;
    return g->cells[(size_t)py * (size_t)g->stride + (size_t)px] != PD_CELL_BLOCKED;
}

/* Where a scan along (dx, dy) must stop, from cells[] alone (the rule of
 * pd_jps.c's file comment): on interior lines, a blocked cell, or one with
 * an open side whose cell behind (one step back along the scan) is blocked;
 * padding lines carry no stop bits. */
static int expected_stop(const pd_grid *g, int32_t px, int32_t py, int32_t dx, int32_t dy)
{
    const int32_t line = dx ? py : px, last = dx ? g->height : g->width;
    if (line < 1 || line > last)
        return 0;
    const int32_t sx = dy ? 1 : 0, sy = dx ? 1 : 0; /* across the scan */
    int stop = !padded_open(g, px, py);
    for (int k = -1; k <= 1; k += 2)
        stop |= padded_open(g, px + k * sx, py + k * sy) && !padded_open(g, px + k * sx - dx, py + k * sy - dy);
    return stop;
}

/* Whether both passability bitsets of g say what cells[] says, padding
 * included, and the four stop bitsets what expected_stop says. */
static void expect_bits_match_cells(const pd_grid *g)
{
    static const struct {
        pd_grid_stop_dir dir;
        int32_t dx, dy;
    } scans[] = { { PD_GRID_STOP_EAST, 1, 0 },
                  { PD_GRID_STOP_WEST, -1, 0 },
                  { PD_GRID_STOP_SOUTH, 0, 1 },
                  { PD_GRID_STOP_NORTH, 0, -1 } };
    for (int32_t py = 0; py < g->height + 2; py++)
        for (int32_t px = 0; px < g->stride; px++) {
            int open = padded_open(g, px, py);
            if (pd_grid_bit_row(g, px, py) != open || pd_grid_bit_col(g, px, py) != open)
                fail_msg("%dx%d grid, padded (%d,%d): cell %s, row bit %d, column bit %d", g->width, g->height,
                         px, py, open ? "open" : "blocked", pd_grid_bit_row(g, px, py),
                         pd_grid_bit_col(g, px, py));
            for (size_t d = 0; d < sizeof scans / sizeof *scans; d++) {
                int want = expected_stop(g, px, py, scans[d].dx, scans[d].dy);
                if (pd_grid_bit_stop(g, scans[d].dir, px, py) != want)
                    fail_msg("%dx%d grid, padded (%d,%d): stop bit %zu is %d, want %d", g->width, g->height, px,
                             py, d, !want, want);
            }
        }
}

/* The passability and stop bitsets JPS scans follow the cells through
 * every way a grid changes: pd_grid_set (checked after every single flip
 * too, since a flip changes stop bits one line and one cell around it),
 * bulk writes with pd_grid_refresh_flags, and direct writes with
 * pd_grid_sync_bits, which flips exactly the cells whose passability
 * changed (cost changes flip nothing). Sizes around the 64-bit word
 * boundaries. */
static void test_bits_follow_cells(void **state)
{
    (void)state;
    static const int32_t sides[] = { 1, 2, 61, 62, 63, 64, 65, 127, 130 };
    uint64_t rng = 77;
    for (size_t i = 0; i < sizeof sides / sizeof *sides; i++) {
        for (size_t j = 0; j < sizeof sides / sizeof *sides; j += 2) {
            pd_grid *g = pd_grid_create(sides[i], sides[j]);
            assert_non_null(g);
            expect_bits_match_cells(g);
            for (int32_t y = 0; y < g->height; y++)
                for (int32_t x = 0; x < g->width; x++)
                    pd_grid_set(g, x, y, rng_below(&rng, 3) ? PD_CELL_FREE : PD_CELL_BLOCKED);
            expect_bits_match_cells(g);
            for (int32_t y = 0; y < g->height; y++)
                for (int32_t x = 0; x < g->width; x++)
                    g->cells[pd_grid_index(g, x, y)] = (uint8_t)rng_below(&rng, 3);
            pd_grid_refresh_flags(g);
            expect_bits_match_cells(g);
            for (int k = 0; k < 8; k++) {
                int32_t x = rng_below(&rng, g->width), y = rng_below(&rng, g->height);
                pd_grid_set(g, x, y, pd_grid_get(g, x, y) == PD_CELL_BLOCKED ? PD_CELL_FREE : PD_CELL_BLOCKED);
                expect_bits_match_cells(g);
            }
            int32_t x0 = rng_below(&rng, g->width), y0 = rng_below(&rng, g->height);
            int32_t x1 = x0 + rng_below(&rng, 70), y1 = y0 + rng_below(&rng, 70);
            uint64_t want = 0;
            for (int32_t y = y0; y <= y1 && y < g->height; y++)
                for (int32_t x = x0; x <= x1 && x < g->width; x++) {
                    uint8_t *c = &g->cells[pd_grid_index(g, x, y)];
                    uint8_t v = (uint8_t)rng_below(&rng, 3);
                    want += (*c == PD_CELL_BLOCKED) != (v == PD_CELL_BLOCKED);
                    *c = v;
                }
            assert_true(pd_grid_sync_bits(g, x0, y0, x1, y1) == want);
            expect_bits_match_cells(g);
            pd_grid *c = pd_grid_clone(g);
            assert_non_null(c);
            expect_bits_match_cells(c);
            pd_grid_destroy(c);
            pd_grid_destroy(g);
        }
    }
}

static void random_grids_match_astar(jps_fixture *f, pd_connectivity conn)
{
    uint64_t rng = 0x4a505321u;
    size_t found = 0, none = 0;
    char where[64];
    for (int n = 0; n < JPS_GRIDS; n++) {
        pd_grid *g = random_grid(&rng, n & 1);
        snprintf(where, sizeof where, "grid %d (%dx%d)", n, g->width, g->height);
        for (int k = 0; k < JPS_PAIRS_PER_GRID; k++) {
            pd_point s = { rng_below(&rng, g->width), rng_below(&rng, g->height) };
            pd_point t = { rng_below(&rng, g->width), rng_below(&rng, g->height) };
            pd_status st = compare_query(f, g, conn, s, t, where);
            found += st == PD_OK;
            none += st == PD_NO_PATH;
        }
        pd_grid_destroy(g);
    }
    /* The generator must actually produce both kinds of answer. */
    print_message("random grids, %d-connected: %zu paths, %zu no-path\n", conn, found, none);
    assert_true(found > 5000);
    assert_true(none > 500);
}

static void test_random_grids_match_astar(void **state)
{
    random_grids_match_astar(*state, PD_CONNECT_8);
}

static void test_random_grids_match_astar_4(void **state)
{
    random_grids_match_astar(*state, PD_CONNECT_4);
}

/* Every start/goal pair on a few small dense grids: exhaustive where the
 * corner cases are densest. */
static void small_grids_all_pairs(jps_fixture *f, pd_connectivity conn)
{
    uint64_t rng = 0x5eed0fa11u;
    for (int n = 0; n < 40; n++) {
        int32_t w = 2 + rng_below(&rng, 9), h = 2 + rng_below(&rng, 9);
        pd_grid *g = pd_grid_create(w, h);
        assert_non_null(g);
        int32_t density = 15 + rng_below(&rng, 30);
        for (int32_t y = 0; y < h; y++)
            for (int32_t x = 0; x < w; x++)
                pd_grid_set(g, x, y, rng_below(&rng, 100) < density ? PD_CELL_BLOCKED : PD_CELL_FREE);
        char where[64];
        snprintf(where, sizeof where, "small grid %d (%dx%d)", n, w, h);
        for (int32_t a = 0; a < w * h; a++)
            for (int32_t b = 0; b < w * h; b++)
                compare_query(f, g, conn, (pd_point){ a % w, a / w }, (pd_point){ b % w, b / w }, where);
        pd_grid_destroy(g);
    }
}

static void test_small_grids_all_pairs(void **state)
{
    small_grids_all_pairs(*state, PD_CONNECT_8);
}

static void test_small_grids_all_pairs_4(void **state)
{
    small_grids_all_pairs(*state, PD_CONNECT_4);
}

static char *read_file(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return NULL;
    char *buf = NULL;
    if (fseek(fp, 0, SEEK_END) == 0) {
        long n = ftell(fp);
        if (n >= 0 && fseek(fp, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) != NULL) {
            *len = fread(buf, 1, (size_t)n, fp);
            buf[*len] = '\0';
        }
    }
    fclose(fp);
    return buf;
}

/* The Moving AI subset in tests/data/movingai: one or two maps per family. */
static const char *const movingai_files[JPS_MOVINGAI_FILES] = {
    "8room_000", "AR0011SR", "Aftershock", "Berlin_0_256",
    "arena2",    "den520d",  "maze512-32-0", "random512-10-0",
};

static void movingai_matches_astar(jps_fixture *f, pd_connectivity conn)
{
    const char *data = PD_MOVINGAI_DIR;
    size_t total = 0;
    for (int i = 0; i < JPS_MOVINGAI_FILES; i++) {
        char path[1024];
        size_t len = 0;
        snprintf(path, sizeof path, "%s/maps/%s.map", data, movingai_files[i]);
        char *text = read_file(path, &len);
        if (!text)
            fail_msg("Moving AI map '%s' missing from the repository", path);
        pd_parse_error err;
        pd_grid *g = pd_map_parse_movingai(text, len, &err);
        free(text);
        if (!g)
            fail_msg("%s: %d:%d %s", path, err.line, err.column, err.message);
        snprintf(path, sizeof path, "%s/scen/%s.map.scen", data, movingai_files[i]);
        text = read_file(path, &len);
        if (!text)
            fail_msg("Moving AI scenarios '%s' missing from the repository", path);
        size_t line_no = 0, checked = 0;
        for (char *line = text + strspn(text, "\r\n"), *next; *line; line = next + strspn(next, "\r\n")) {
            next = line + strcspn(line, "\r\n");
            if (*next)
                *next++ = '\0';
            if (line_no++ == 0 || (line_no - 2) % JPS_MOVINGAI_EVERY != 0)
                continue;
            int bucket, mw, mh, sx, sy, gx, gy;
            double opt;
            char map[256];
            if (sscanf(line, "%d %255s %d %d %d %d %d %d %lf", &bucket, map, &mw, &mh, &sx, &sy, &gx, &gy, &opt) != 9)
                fail_msg("%s line %zu unreadable", path, line_no);
            pd_status st = compare_query(f, g, conn, (pd_point){ sx, sy }, (pd_point){ gx, gy }, movingai_files[i]);
            if (st != PD_OK)
                fail_msg("%s line %zu: no path (%s)", path, line_no, pd_status_name(st));
            checked++;
        }
        free(text);
        pd_grid_destroy(g);
        assert_true(checked > 0);
        total += checked;
    }
    print_message("Moving AI, %d-connected: %zu queries agree\n", conn, total);
}

static void test_movingai_matches_astar(void **state)
{
    movingai_matches_astar(*state, PD_CONNECT_8);
}

/* The scenarios connect their endpoints 8-connected; 4-connected they all
 * stay connected too (no map of the subset joins two areas only through a
 * diagonal gap), which the test checks rather than assumes. */
static void test_movingai_matches_astar_4(void **state)
{
    movingai_matches_astar(*state, PD_CONNECT_4);
}

static void test_trivial_and_refused(void **state)
{
    jps_fixture *f = *state;
    pd_grid *g = core_grid("....\n.#..\n....\n");
    pd_search_metrics m;
    pd_search_params p = { .start = { 2, 0 }, .goal = { 2, 0 } };
    assert_int_equal(pd_search_jps(f->jps, g, &p, f->path, 4, &m), PD_OK);
    assert_int_equal(m.path_len, 1);
    assert_true(m.cost == 0.0);
    assert_int_equal(f->path[0].x, 2);
    assert_int_equal(f->path[0].y, 0);

    p.goal = (pd_point){ 1, 1 };
    assert_int_equal(pd_search_jps(f->jps, g, &p, f->path, 4, &m), PD_GOAL_BLOCKED);
    p.start = (pd_point){ 1, 1 };
    assert_int_equal(pd_search_jps(f->jps, g, &p, f->path, 4, &m), PD_START_BLOCKED);
    p.start = (pd_point){ 4, 0 };
    assert_int_equal(pd_search_jps(f->jps, g, &p, f->path, 4, &m), PD_OUT_OF_BOUNDS);
    p.start = (pd_point){ 0, -1 };
    assert_int_equal(pd_search_jps(f->jps, g, &p, f->path, 4, &m), PD_OUT_OF_BOUNDS);
    size_t len = 99;
    assert_int_equal(pd_jps_extract(f->jps, f->path, 4, &len), PD_NO_PATH);
    assert_int_equal(len, 0);

    /* Requests JPS does not serve are refused up front so callers fall back. */
    pd_search_params ok = { .start = { 0, 0 }, .goal = { 3, 2 } };
    assert_true(pd_jps_applicable(g, &ok));
    pd_search_params q = ok;
    q.connectivity = PD_CONNECT_4;
    assert_true(pd_jps_applicable(g, &q));
    q.connectivity = (pd_connectivity)6;
    assert_false(pd_jps_applicable(g, &q));
    assert_int_equal(pd_search_jps(f->jps, g, &q, f->path, 16, &m), PD_INVALID_ARGUMENT);
    q = ok;
    q.partial_on_cutoff = 1;
    assert_int_equal(pd_search_jps(f->jps, g, &q, f->path, 16, &m), PD_INVALID_ARGUMENT);
    q = ok;
    q.has_window = 1;
    q.window_max = (pd_point){ 3, 2 };
    assert_int_equal(pd_search_jps(f->jps, g, &q, f->path, 16, &m), PD_INVALID_ARGUMENT);
    q = ok;
    pd_point blocker = { 2, 2 };
    q.blockers = &blocker;
    q.n_blockers = 1;
    assert_int_equal(pd_search_jps(f->jps, g, &q, f->path, 16, &m), PD_INVALID_ARGUMENT);
    pd_grid_set(g, 3, 0, 2);
    assert_false(g->uniform_cost);
    assert_false(pd_jps_applicable(g, &ok));
    assert_int_equal(pd_search_jps(f->jps, g, &ok, f->path, 16, &m), PD_INVALID_ARGUMENT);
    pd_grid_destroy(g);

    pd_grid *one = core_grid(".\n");
    p = (pd_search_params){ .start = { 0, 0 }, .goal = { 0, 0 } };
    assert_int_equal(pd_search_jps(f->jps, one, &p, f->path, 1, &m), PD_OK);
    assert_int_equal(m.path_len, 1);
    pd_grid_destroy(one);
}

static void test_corridor_and_no_path(void **state)
{
    jps_fixture *f = *state;
    /* A winding corridor: every turn is a forced neighbour. */
    pd_grid *g = core_grid("......#\n#####.#\n....#.#\n.##.#..\n.#..###\n.#.####\n.......\n");
    pd_search_params p = { .start = { 0, 0 }, .goal = { 6, 3 } };
    pd_search_metrics m;
    assert_int_equal(pd_search_jps(f->jps, g, &p, f->path, JPS_PATH_CAP, &m), PD_OK);
    core_check_path(g, PD_CONNECT_8, f->path, m.path_len, p.start, p.goal);
    compare_query(f, g, PD_CONNECT_8, p.start, p.goal, "corridor");
    compare_query(f, g, PD_CONNECT_4, p.start, p.goal, "corridor");
    /* The dead end behind the corridor cannot reach the bottom row. */
    p.goal = (pd_point){ 0, 6 };
    assert_int_equal(compare_query(f, g, PD_CONNECT_8, p.start, p.goal, "corridor"), PD_NO_PATH);
    assert_int_equal(compare_query(f, g, PD_CONNECT_4, p.start, p.goal, "corridor"), PD_NO_PATH);
    assert_int_equal(pd_search_jps(f->jps, g, &p, f->path, JPS_PATH_CAP, &m), PD_NO_PATH);
    assert_true(m.cost == 0.0);
    assert_int_equal(m.path_len, 0);
    pd_grid_destroy(g);

    /* A diagonal squeeze between two blocked corners is not a path. */
    g = core_grid(".#\n#.\n");
    p = (pd_search_params){ .start = { 0, 0 }, .goal = { 1, 1 } };
    assert_int_equal(pd_search_jps(f->jps, g, &p, f->path, 4, &m), PD_NO_PATH);
    pd_grid_destroy(g);
}

static pd_status count_polls(void *user)
{
    int *n = user;
    return ++*n >= 2 ? PD_CANCELLED : PD_OK;
}

static void test_budget_poll_and_buffer(void **state)
{
    jps_fixture *f = *state;
    /* Pillars every other cell force a jump point at nearly every cell. */
    pd_grid *g = core_open_grid(200, 200);
    for (int32_t y = 1; y < 200; y += 2)
        for (int32_t x = 1; x < 199; x += 2)
            pd_grid_set(g, x, y, PD_CELL_BLOCKED);
    pd_search_params p = { .start = { 0, 0 }, .goal = { 199, 198 }, .max_expansions = 5 };
    pd_search_metrics m;
    assert_int_equal(pd_search_jps(f->jps, g, &p, f->path, JPS_PATH_CAP, &m), PD_BUDGET_EXCEEDED);
    assert_int_equal(m.expanded, 5);
    size_t len = 1;
    assert_int_equal(pd_jps_extract(f->jps, f->path, JPS_PATH_CAP, &len), PD_NO_PATH);

    int polls = 0;
    p.max_expansions = 0;
    p.poll = count_polls;
    p.poll_user = &polls;
    assert_int_equal(pd_search_jps(f->jps, g, &p, f->path, JPS_PATH_CAP, &m), PD_CANCELLED);
    assert_int_equal(polls, 2);
    assert_int_equal(m.expanded, 2 * PD_SEARCH_POLL_INTERVAL);

    /* Too small a buffer: the length is reported and extraction copies the
     * same path A* would cost, without searching again. */
    p.poll = NULL;
    assert_int_equal(pd_search_jps(f->jps, g, &p, f->path, 3, &m), PD_BUFFER_TOO_SMALL);
    assert_true(m.path_len > 3);
    const size_t want = m.path_len;
    const double cost = m.cost;
    assert_int_equal(pd_jps_extract(f->jps, f->path, want - 1, &len), PD_BUFFER_TOO_SMALL);
    assert_int_equal(len, want);
    assert_int_equal(pd_jps_extract(f->jps, f->path, want, &len), PD_OK);
    double walked = core_check_path(g, PD_CONNECT_8, f->path, len, p.start, p.goal);
    assert_true(fabs(walked - cost) <= CORE_COST_EPS);
    /* Cost-only query: no buffer, no error. */
    assert_int_equal(pd_search_jps(f->jps, g, &p, NULL, 0, &m), PD_OK);
    assert_true(fabs(m.cost - cost) <= CORE_COST_EPS);
    compare_query(f, g, PD_CONNECT_8, p.start, p.goal, "pillars");
    compare_query(f, g, PD_CONNECT_4, p.start, p.goal, "pillars");
    pd_grid_destroy(g);
}

static void test_context_reuse(void **state)
{
    jps_fixture *f = *state;
    pd_jps_ctx *ctx = pd_jps_ctx_create();
    assert_non_null(ctx);
    pd_grid *big = core_open_grid(50, 40), *small = core_open_grid(5, 5);
    pd_search_params p = { .start = { 0, 0 }, .goal = { 49, 39 } };
    pd_search_metrics m;
    /* Nothing is held before the first search; it allocates node blocks
     * (in one slab) for the cells it records jump points in. */
    const size_t empty = pd_jps_ctx_footprint(ctx);
    assert_int_equal(pd_search_jps(ctx, big, &p, f->path, JPS_PATH_CAP, &m), PD_OK);
    const size_t footprint = pd_jps_ctx_footprint(ctx);
    assert_true(footprint > empty);
    p.goal = (pd_point){ 4, 2 };
    for (int i = 0; i < 100; i++) {
        assert_int_equal(pd_search_jps(ctx, (i & 1) ? big : small, &p, f->path, JPS_PATH_CAP, &m), PD_OK);
        assert_true(fabs(m.cost - (2.0 + 2.0 * CORE_SQRT2)) <= CORE_COST_EPS);
        assert_int_equal(m.path_len, 5);
    }
    assert_int_equal(pd_jps_ctx_footprint(ctx), footprint);
    /* Given back in full, it answers the same. */
    pd_jps_ctx_trim(ctx, 0);
    assert_int_equal(pd_jps_ctx_footprint(ctx), empty);
    assert_int_equal(pd_search_jps(ctx, big, &p, f->path, JPS_PATH_CAP, &m), PD_OK);
    assert_true(fabs(m.cost - (2.0 + 2.0 * CORE_SQRT2)) <= CORE_COST_EPS);
    pd_grid_destroy(big);
    pd_grid_destroy(small);
    pd_jps_ctx_destroy(ctx);
    pd_jps_ctx_destroy(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bits_follow_cells),
        cmocka_unit_test(test_trivial_and_refused),
        cmocka_unit_test(test_corridor_and_no_path),
        cmocka_unit_test(test_budget_poll_and_buffer),
        cmocka_unit_test(test_context_reuse),
        cmocka_unit_test(test_small_grids_all_pairs),
        cmocka_unit_test(test_small_grids_all_pairs_4),
        cmocka_unit_test(test_random_grids_match_astar),
        cmocka_unit_test(test_random_grids_match_astar_4),
        cmocka_unit_test(test_movingai_matches_astar),
        cmocka_unit_test(test_movingai_matches_astar_4),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
