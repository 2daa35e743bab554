/*
 * pathd_labels_bench.c - what reading component labels costs.
 *
 * For each map (Moving AI .map, or the ASCII format of config/scenes' .txt),
 * builds unit-1 labels (best of --reps builds) and prints their width,
 * components, the cells stored escaped (pd_components.h) and bytes; then
 * times, best of --reps runs each:
 *  - connected: pd_components_connected on 4 Mi random pairs of open cells
 *    (the query layer's check before every search);
 *  - escaped pairs: the same on pairs of escaped cells at most 8 cells
 *    apart (the flood a read of a small component costs), when there are;
 *  - label: pd_components_label on random open cells;
 *  - nearest: pd_fallback_nearest (radius 64) from 20,000 random cells to
 *    the component of another random open cell (a label test per ring
 *    cell: pd_components_match where there are escapes).
 * A checksum of the answers is printed so that nothing is optimised away,
 * and so that two builds can be compared on the same answers.
 *
 *   pathd-labels-bench [--reps R] MAP...
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pd_components.h"
#include "pd_fallback.h"
#include "bench_file.h"
#include "bench_util.h"

static double now_s(void)
{
    return (double)now_ns() * 1e-9;
}
#include "pd_mapfile.h"

#define BENCH_PAIRS (4u << 20)
#define BENCH_NEAREST 20000u
#define BENCH_NEAREST_RADIUS 64
#define BENCH_ESCAPED_REACH 8

static pd_grid *load(const char *path)
{
    size_t len;
    char *text = bench_read_file(path, &len);
    if (!text)
        return NULL;
    pd_parse_error err;
    size_t n = strlen(path);
    pd_grid *g = n > 4 && strcmp(path + n - 4, ".map") == 0 ? pd_map_parse_movingai(text, len, &err)
                                                           : pd_map_parse_ascii(text, len, &err);
    free(text);
    return g;
}

/* Whether the stored value of p marks an escaped cell (never, before
 * escapes existed). */
static int escaped_at(const pd_components *c, pd_point p)
{
#ifdef PD_COMPONENTS_SMALL_CELLS
    return pd_components_escaped(c, pd_components_at(c, pd_components_index(c, p)));
#else
    (void)c;
    (void)p;
    return 0;
#endif
}

static pd_point random_open(const pd_grid *g)
{
    for (;;) {
        pd_point p = { (int32_t)(bench_rand() % (uint32_t)g->width), (int32_t)(bench_rand() % (uint32_t)g->height) };
        if (pd_grid_get(g, p.x, p.y) != PD_CELL_BLOCKED)
            return p;
    }
}

/* Keeps the best (least) of the runs' seconds per item. */
static void keep_best(double *best, double t0, size_t n)
{
    double t = (now_s() - t0) / (double)n;
    *best = t < *best ? t : *best;
}

static int bench_map(const char *path, int reps)
{
    /* The same cells for every map and build, whatever ran before. */
    bench_rng = 0x9E3779B97F4A7C15ull;
    pd_grid *g = load(path);
    if (!g) {
        fprintf(stderr, "cannot read %s\n", path);
        return 1;
    }
    pd_components *c = NULL;
    double build = 1e30;
    for (int r = 0; r < reps; r++) {
        pd_components_destroy(c);
        double t0 = now_s();
        c = pd_components_build(g);
        double t = now_s() - t0;
        build = t < build ? t : build;
    }
    if (!c) {
        fprintf(stderr, "no memory for %s's labels\n", path);
        pd_grid_destroy(g);
        return 1;
    }
    uint64_t escaped = 0, open = 0;
    for (int32_t y = 0; y < g->height; y++)
        for (int32_t x = 0; x < g->width; x++)
            if (pd_grid_get(g, x, y) != PD_CELL_BLOCKED) {
                open++;
                escaped += escaped_at(c, (pd_point){ x, y });
            }
    pd_point(*pairs)[2] = malloc(BENCH_PAIRS * sizeof *pairs);
    pd_point *cells = malloc(BENCH_PAIRS * sizeof *cells);
    uint32_t *labels = malloc(BENCH_NEAREST * sizeof *labels);
    if (!pairs || !cells || !labels) {
        fprintf(stderr, "no memory\n");
        return 1;
    }
    for (size_t i = 0; i < BENCH_PAIRS; i++) {
        pairs[i][0] = random_open(g);
        pairs[i][1] = random_open(g);
        cells[i] = random_open(g);
    }
    uint64_t sum = 0;
    double connected = 1e30, label = 1e30, esc = 1e30, nearest = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        for (size_t i = 0; i < BENCH_PAIRS; i++)
            sum += pd_components_connected(c, pairs[i][0], pairs[i][1]);
        keep_best(&connected, t0, BENCH_PAIRS);
        t0 = now_s();
        for (size_t i = 0; i < BENCH_PAIRS; i++)
            sum += pd_components_label(c, cells[i]);
        keep_best(&label, t0, BENCH_PAIRS);
    }
    for (size_t i = 0; i < BENCH_NEAREST; i++)
        labels[i] = pd_components_label(c, pairs[i][1]);
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        for (size_t i = 0; i < BENCH_NEAREST; i++) {
            pd_point out = { 0, 0 };
            if (pd_fallback_nearest(g, c, labels[i], pairs[i][0], BENCH_NEAREST_RADIUS, &out) == PD_OK)
                sum += (uint64_t)out.x * 7919u + (uint64_t)out.y;
        }
        keep_best(&nearest, t0, BENCH_NEAREST);
    }
    /* Pairs of escaped cells near each other (overwriting the pairs above). */
    size_t n_esc = 0;
    for (size_t tries = 0; escaped && n_esc < BENCH_PAIRS / 16 && tries < 64 * (size_t)BENCH_PAIRS; tries++) {
        pd_point a = random_open(g);
        pd_point b = { a.x + (int32_t)(bench_rand() % (2 * BENCH_ESCAPED_REACH + 1)) - BENCH_ESCAPED_REACH,
                       a.y + (int32_t)(bench_rand() % (2 * BENCH_ESCAPED_REACH + 1)) - BENCH_ESCAPED_REACH };
        if (escaped_at(c, a) && pd_grid_in_bounds(g, b.x, b.y) && escaped_at(c, b)) {
            pairs[n_esc][0] = a;
            pairs[n_esc][1] = b;
            n_esc++;
        }
    }
    size_t joined = 0;
    for (int r = 0; r < reps && n_esc; r++) {
        double t0 = now_s();
        joined = 0;
        for (size_t i = 0; i < n_esc; i++)
            joined += pd_components_connected(c, pairs[i][0], pairs[i][1]);
        keep_best(&esc, t0, n_esc);
    }
    if (!n_esc)
        esc = 0;
    printf("%s: %dx%d, %u components, labels %u bytes (%llu bytes), %llu of %llu open cells escaped; build %.2f ms\n",
           path, g->width, g->height, c->count, c->label_bytes, (unsigned long long)pd_components_bytes(c),
           (unsigned long long)escaped, (unsigned long long)open, build * 1e3);
    printf("  connected %.2f ns/pair, label %.2f ns/cell, escaped pairs %.1f ns/pair (%zu pairs, %zu connected), "
           "nearest %.3f us; checksum %llu\n",
           connected * 1e9, label * 1e9, esc * 1e9, n_esc, joined, nearest * 1e6, (unsigned long long)sum);
    free(pairs);
    free(cells);
    free(labels);
    pd_components_destroy(c);
    pd_grid_destroy(g);
    return 0;
}

int main(int argc, char **argv)
{
    int reps = 7, first = 1;
    if (argc > 2 && strcmp(argv[1], "--reps") == 0) {
        reps = atoi(argv[2]);
        first = 3;
    }
    if (first >= argc || reps < 1) {
        fprintf(stderr, "usage: pathd-labels-bench [--reps R] MAP...\n");
        return 2;
    }
    int rc = 0;
    for (int i = first; i < argc; i++)
        rc |= bench_map(argv[i], reps);
    return rc;
}
