/*
 * test_search_reference.c - A* optimality against an independent Dijkstra.
 *
 * A few hundred random small grids (sizes 1..40, obstacle densities 0..50%,
 * cell costs 1..9 on half of them) are searched 8- and 4-connected. For each
 * grid and connectivity a plain Dijkstra written here from the rules in
 * pd_search.h (not from pd_search.c) computes the distance from one start to
 * every cell; A* must then agree on every goal tried: the same cost within
 * 1e-9, PD_NO_PATH exactly where Dijkstra reaches nothing, PD_GOAL_BLOCKED on
 * blocked goals, and a legal path whose summed cost is its reported cost.
 * One search context serves all grids, so reuse across sizes is exercised
 * too. The generator is a fixed-seed xorshift, so a failure reproduces.
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
#include "test_rng.h"

#define REF_GRIDS 400
#define REF_MAX_SIDE 40
#define REF_GOALS_PER_START 10

#include "ref_dijkstra.h"

/* ---------------------------------------------------- grid generation */

static void ref_random_map(uint64_t *rng, ref_map *m, int *weighted_out)
{
    m->w = 1 + rng_below(rng, REF_MAX_SIDE);
    m->h = 1 + rng_below(rng, REF_MAX_SIDE);
    int density = rng_below(rng, 51); /* percent of blocked cells */
    int weighted = rng_below(rng, 2);
    m->cells = malloc((size_t)m->w * (size_t)m->h);
    assert_non_null(m->cells);
    for (int32_t i = 0; i < m->w * m->h; i++) {
        if (rng_below(rng, 100) < density)
            m->cells[i] = 0;
        else
            m->cells[i] = weighted ? (uint8_t)(1 + rng_below(rng, 9)) : 1;
    }
    *weighted_out = weighted;
}

/* Builds the pd_grid either cell by cell or through the ASCII parser, so
 * both ways of making a grid (and the parser's cost digits) meet the search. */
static pd_grid *ref_to_grid(const ref_map *m, int via_text)
{
    if (!via_text) {
        pd_grid *g = pd_grid_create(m->w, m->h);
        assert_non_null(g);
        for (int32_t y = 0; y < m->h; y++)
            for (int32_t x = 0; x < m->w; x++)
                pd_grid_set(g, x, y, m->cells[y * m->w + x]);
        return g;
    }
    size_t len = (size_t)(m->w + 1) * (size_t)m->h;
    char *text = malloc(len + 1);
    assert_non_null(text);
    size_t k = 0;
    for (int32_t y = 0; y < m->h; y++) {
        for (int32_t x = 0; x < m->w; x++) {
            uint8_t c = m->cells[y * m->w + x];
            text[k++] = c == 0 ? '#' : c == 1 ? '.' : (char)('0' + c);
        }
        text[k++] = '\n';
    }
    text[k] = '\0';
    pd_grid *g = core_grid(text);
    free(text);
    return g;
}

/* ------------------------------------------------------- comparison */

typedef struct ref_tally {
    int reached;
    int unreached;
    int goal_blocked;
    int start_blocked;
} ref_tally;

/* Compares A* from s to t with the Dijkstra distances from s. */
static void ref_compare(pd_search_ctx *ctx, const pd_grid *g, const ref_map *m, int conn,
                        pd_point s, pd_point t, const double *dist, ref_tally *tally,
                        const char *what)
{
    static pd_point path[REF_MAX_SIDE * REF_MAX_SIDE * 4];
    pd_search_metrics met;
    pd_status st = core_search(ctx, g, (pd_connectivity)conn, s, t, path,
                               sizeof path / sizeof path[0], &met);
    double want = dist[t.y * m->w + t.x];
    if (!ref_passable(m, t.x, t.y)) {
        if (st != PD_GOAL_BLOCKED)
            fail_msg("%s: %dx%d conn %d (%d,%d)->(%d,%d): %s, want GOAL_BLOCKED", what, m->w,
                     m->h, conn, s.x, s.y, t.x, t.y, pd_status_name(st));
        tally->goal_blocked++;
    } else if (want < 0) {
        if (st != PD_NO_PATH)
            fail_msg("%s: %dx%d conn %d (%d,%d)->(%d,%d): %s (cost %.12f), Dijkstra finds no path",
                     what, m->w, m->h, conn, s.x, s.y, t.x, t.y, pd_status_name(st), met.cost);
        tally->unreached++;
    } else {
        if (st != PD_OK)
            fail_msg("%s: %dx%d conn %d (%d,%d)->(%d,%d): %s, Dijkstra finds cost %.12f", what,
                     m->w, m->h, conn, s.x, s.y, t.x, t.y, pd_status_name(st), want);
        if (fabs(met.cost - want) > CORE_COST_EPS)
            fail_msg("%s: %dx%d conn %d (%d,%d)->(%d,%d): A* cost %.12f, Dijkstra %.12f", what,
                     m->w, m->h, conn, s.x, s.y, t.x, t.y, met.cost, want);
        tally->reached++;
    }
}

/* Picks a random start (checking START_BLOCKED when it is blocked, then
 * moving on to the next passable cell), runs Dijkstra from it in both
 * connectivities and compares random goals, the start itself and the
 * farthest reachable cell. A map without passable cells only checks the
 * START_BLOCKED answer. */
static void ref_check_map(pd_search_ctx *ctx, uint64_t *rng, const ref_map *m, const pd_grid *g,
                          ref_tally *tally, const char *what)
{
    size_t n = (size_t)m->w * (size_t)m->h;
    double *dist = malloc(n * sizeof *dist);
    assert_non_null(dist);
    int32_t first = rng_below(rng, (int32_t)n), start = -1;
    for (size_t k = 0; k < n; k++) {
        int32_t c = (int32_t)(((size_t)first + k) % n);
        if (m->cells[c]) {
            start = c;
            break;
        }
    }
    if (!m->cells[first]) {
        /* A blocked start is refused before anything else is looked at. */
        pd_search_metrics met;
        pd_point s = { first % m->w, first / m->w }, t = { rng_below(rng, m->w), rng_below(rng, m->h) };
        assert_int_equal(core_search(ctx, g, PD_CONNECT_8, s, t, NULL, 0, &met), PD_START_BLOCKED);
        tally->start_blocked++;
    }
    if (start >= 0) {
        pd_point s = { start % m->w, start / m->w };
        for (int conn = 4; conn <= 8; conn += 4) {
            ref_dijkstra(m, conn, s.x, s.y, dist);
            ref_compare(ctx, g, m, conn, s, s, dist, tally, what);
            for (int k = 0; k < REF_GOALS_PER_START; k++) {
                pd_point t = { rng_below(rng, m->w), rng_below(rng, m->h) };
                ref_compare(ctx, g, m, conn, s, t, dist, tally, what);
            }
            /* The farthest reachable cell: the longest search this start has. */
            int32_t far = start;
            for (size_t c = 0; c < n; c++)
                if (dist[c] > dist[far])
                    far = (int32_t)c;
            pd_point t = { far % m->w, far / m->w };
            ref_compare(ctx, g, m, conn, s, t, dist, tally, what);
        }
    }
    free(dist);
}

static void test_random_grids(void **state)
{
    pd_search_ctx *ctx = pd_search_ctx_create();
    assert_non_null(ctx);
    uint64_t rng = 0x2545F4914F6CDD1Dull;
    ref_tally tally = { 0, 0, 0, 0 };
    int weighted_grids = 0;
    for (int i = 0; i < REF_GRIDS; i++) {
        ref_map m;
        int weighted;
        ref_random_map(&rng, &m, &weighted);
        weighted_grids += weighted;
        pd_grid *g = ref_to_grid(&m, i % 2);
        char what[64];
        snprintf(what, sizeof what, "random grid %d", i);
        ref_check_map(ctx, &rng, &m, g, &tally, what);
        pd_grid_destroy(g);
        free(m.cells);
    }
    /* The generator must actually have produced every kind of case. */
    assert_true(weighted_grids > REF_GRIDS / 4 && weighted_grids < 3 * REF_GRIDS / 4);
    assert_true(tally.reached > 2000);
    assert_true(tally.unreached > 200);
    assert_true(tally.goal_blocked > 200);
    assert_true(tally.start_blocked > 20);
    pd_search_ctx_destroy(ctx);
}

/* Maze-like grids: a lattice of walls with random doors gives long winding
 * paths, where a wrong tie-break or a missed reopening would show. */
static void test_random_mazes(void **state)
{
    pd_search_ctx *ctx = pd_search_ctx_create();
    assert_non_null(ctx);
    uint64_t rng = 0xD1B54A32D192ED03ull;
    ref_tally tally = { 0, 0, 0, 0 };
    for (int i = 0; i < 60; i++) {
        ref_map m;
        m.w = 9 + rng_below(&rng, REF_MAX_SIDE - 8);
        m.h = 9 + rng_below(&rng, REF_MAX_SIDE - 8);
        m.cells = malloc((size_t)m.w * (size_t)m.h);
        assert_non_null(m.cells);
        int weighted = i % 2;
        for (int32_t y = 0; y < m.h; y++) {
            for (int32_t x = 0; x < m.w; x++) {
                int wall = (x % 4 == 3 || y % 4 == 3) && rng_below(&rng, 100) < 85;
                m.cells[y * m.w + x] = wall ? 0 : weighted ? (uint8_t)(1 + rng_below(&rng, 9)) : 1;
            }
        }
        pd_grid *g = ref_to_grid(&m, 0);
        char what[64];
        snprintf(what, sizeof what, "maze %d", i);
        for (int k = 0; k < 3; k++)
            ref_check_map(ctx, &rng, &m, g, &tally, what);
        pd_grid_destroy(g);
        free(m.cells);
    }
    assert_true(tally.reached > 1000);
    assert_true(tally.unreached > 20);
    pd_search_ctx_destroy(ctx);
}

/* The hand-made data maps, every passable cell as a start. */
static void check_data_map(pd_search_ctx *ctx, const char *name, int movingai)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", PD_TEST_DATA_DIR, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    static char buf[1 << 16];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    pd_grid *g = movingai ? pd_map_parse_movingai(buf, len, NULL) : pd_map_parse_ascii(buf, len, NULL);
    assert_non_null(g);
    ref_map m = { g->width, g->height, malloc((size_t)g->width * (size_t)g->height) };
    assert_non_null(m.cells);
    for (int32_t y = 0; y < m.h; y++)
        for (int32_t x = 0; x < m.w; x++)
            m.cells[y * m.w + x] = pd_grid_get(g, x, y);
    double *dist = malloc((size_t)m.w * (size_t)m.h * sizeof *dist);
    assert_non_null(dist);
    ref_tally tally = { 0, 0, 0, 0 };
    for (int32_t sy = 0; sy < m.h; sy++) {
        for (int32_t sx = 0; sx < m.w; sx++) {
            if (!ref_passable(&m, sx, sy))
                continue;
            for (int conn = 4; conn <= 8; conn += 4) {
                ref_dijkstra(&m, conn, sx, sy, dist);
                for (int32_t ty = 0; ty < m.h; ty++) {
                    for (int32_t tx = 0; tx < m.w; tx++) {
                        pd_point s = { sx, sy }, t = { tx, ty };
                        ref_compare(ctx, g, &m, conn, s, t, dist, &tally, name);
                    }
                }
            }
        }
    }
    assert_true(tally.reached > 0);
    free(dist);
    free(m.cells);
    pd_grid_destroy(g);
}

static void test_data_maps(void **state)
{
    pd_search_ctx *ctx = pd_search_ctx_create();
    assert_non_null(ctx);
    check_data_map(ctx, "core_room.map", 1);
    check_data_map(ctx, "core_weighted.txt", 0);
    pd_search_ctx_destroy(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_grids),
        cmocka_unit_test(test_random_mazes),
        cmocka_unit_test(test_data_maps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
