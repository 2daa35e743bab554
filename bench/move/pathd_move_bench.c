/*
 * pathd_move_bench.c - how long the movement queries take.
 *
 *   pathd-move-bench core
 *       In process, on den520d (tests/data/movingai): a 100-cell raycast
 *       for unit 1 (pd_move_raycast between open cells 100 apart along a
 *       clear row or column), and a 10-segment ValidateMove through the
 *       query layer (prepare + run). Median and p90 of 21 rounds, each the
 *       mean over a few thousand calls.
 *   pathd-move-bench range
 *       In process, on den520d's scenarios with optimal cost 50 or more:
 *       A* to the goal, against A* stopping within range 5 of it, range 5
 *       with line of sight, and the nearest of 4 goals (the scenario's and
 *       three others'); the mean time per search (median of 7 rounds) and
 *       the mean expansions, each with its ratio to the plain search.
 *   pathd-move-bench e2e HOST:PORT [SCENE]
 *       Against a running pathd: 64 raycasts as 64 single requests, one
 *       after another on one connection, against the same 64 in one Batch.
 *       Median over 21 rounds of each, and the throughput ratio.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_file.h"
#include "pathd_client.h"
#include "pd_mapfile.h"
#include "pd_movement.h"
#include "pd_targets.h"

#define ROUNDS 21

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *what, double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    printf("%-44s median %9.3f us   p90 %9.3f us\n", what, v[n / 2], v[(n * 9) / 10]);
}

/* Segments of exactly 100 cells along open rows and columns of g. */
static size_t clear_segments(const pd_grid *g, pd_fpoint (*seg)[2], size_t max)
{
    size_t n = 0;
    for (int32_t y = 0; y < g->height && n < max; y += 3)
        for (int32_t x = 0; x + 99 < g->width && n < max; x += 7) {
            pd_ray_result r;
            pd_fpoint a = pd_move_cell_center((pd_point){x, y}), b = pd_move_cell_center((pd_point){x + 99, y});
            if (pd_move_raycast(g, a, b, &r) == PD_OK && r.clear && r.cells == 100) {
                seg[n][0] = a;
                seg[n][1] = b;
                n++;
            }
        }
    return n;
}

static int core(void)
{
    char path[1024];
    size_t len;
    snprintf(path, sizeof path, "%s/maps/den520d.map", PD_MOVINGAI_DIR);
    char *text = bench_read_file(path, &len);
    pd_parse_error err;
    pd_grid *g = text ? pd_map_parse_movingai(text, len, &err) : NULL;
    free(text);
    if (!g) {
        fprintf(stderr, "cannot read %s\n", path);
        return 1;
    }
    static pd_fpoint seg[4096][2];
    size_t n = clear_segments(g, seg, 4096);
    if (n == 0) {
        fprintf(stderr, "no clear 100-cell rows in den520d\n");
        return 1;
    }
    double rounds[ROUNDS];
    volatile uint32_t sink = 0;
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = now_us();
        for (size_t i = 0; i < n; i++) {
            pd_ray_result res;
            pd_move_raycast(g, seg[i][0], seg[i][1], &res);
            sink += res.cells;
        }
        rounds[r] = (now_us() - t0) / (double)n;
    }
    printf("den520d: %zu clear 100-cell segments\n", n);
    report("raycast, 100 cells, unit 1 (core)", rounds, ROUNDS);

    /* ValidateMove: 11 points (10 segments) hopping along a clear segment
     * at 10 cells a second, through the query layer on a loaded scene. */
    pd_scene *scene = calloc(1, sizeof *scene);
    atomic_init(&scene->refs, 1);
    strcpy(scene->name, "den520d");
    scene->grid = g;
    scene->cell_size = 1;
    scene->unit_sizes[0] = 1;
    scene->n_unit_sizes = 1;
    scene->units[0] = (pd_scene_unit){1, g, NULL, PD_SCENE_PICK_DEFAULT};
    scene->version = 1;
    pd_query_scratch *scratch = pd_query_scratch_create();
    pd_timed_point moves[11];
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = now_us();
        for (size_t i = 0; i < n; i++) {
            pd_point a = pd_move_cell_of(seg[i][0]);
            for (int k = 0; k <= 10; k++) {
                moves[k].point = (pd_point_spec){0, {a.x + 9 * k, a.y}, 0, 0};
                moves[k].t = k;
            }
            pd_move_req req = {.kind = PD_REQ_VALIDATE_MOVE, .unit_size = 1, .moves = moves, .n_moves = 11,
                               .max_speed = 10};
            pd_move_query q;
            pd_move_result res;
            pd_scene_retain(scene);
            pd_move_prepare(scene, &req, &q, &res);
            pd_move_run(scratch, &q, &res);
            pd_move_query_release(&q);
            sink += (uint32_t)res.yes;
        }
        rounds[r] = (now_us() - t0) / (double)n;
    }
    report("validate_move, 10 segments x 9 cells (query)", rounds, ROUNDS);
    (void)sink;
    pd_query_scratch_destroy(scratch);
    scene->units[0].grid = NULL;
    pd_scene_release(scene);
    return 0;
}

static int e2e(const char *addr, const char *scene)
{
    char err[256];
    pdc_conn *c = pdc_connect(addr, 5000, err, sizeof err);
    if (!c) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    pdc_scene_details info;
    if (pdc_scene_info(c, scene, &info) != PDC_OK) {
        fprintf(stderr, "scene %s: %s\n", scene, pdc_last_error(c));
        return 1;
    }
    enum { N = 64 };
    pdc_query qs[N];
    pdc_query_result rs[N];
    srand(1);
    for (int i = 0; i < N; i++) {
        memset(&qs[i], 0, sizeof qs[i]);
        qs[i].kind = PDC_Q_RAYCAST;
        qs[i].scene = scene;
        qs[i].a = pdc_cell(rand() % info.width, rand() % info.height);
        qs[i].b = pdc_cell(rand() % info.width, rand() % info.height);
    }
    pdc_scene_details_free(&info);
    double single[ROUNDS], batch[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = now_us();
        for (int i = 0; i < N; i++)
            pdc_query_run(c, &qs[i], &rs[i]);
        single[r] = now_us() - t0;
        t0 = now_us();
        if (pdc_batch(c, qs, N, rs) != PDC_OK) {
            fprintf(stderr, "batch: %s\n", pdc_last_error(c));
            return 1;
        }
        batch[r] = now_us() - t0;
    }
    report("64 raycasts as 64 single requests", single, ROUNDS);
    report("64 raycasts in one Batch", batch, ROUNDS);
    printf("batch throughput / single throughput: %.1fx (medians)\n", single[ROUNDS / 2] / batch[ROUNDS / 2]);
    pdc_close(c);
    return 0;
}

#define RANGE_ROUNDS 7
#define RANGE_MAX_SCEN 512

/* The goal-set searches of `range` (see the top of this file). */
static int range_bench(void)
{
    char path[1024];
    size_t len;
    snprintf(path, sizeof path, "%s/maps/den520d.map", PD_MOVINGAI_DIR);
    char *text = bench_read_file(path, &len);
    pd_parse_error err;
    pd_grid *g = text ? pd_map_parse_movingai(text, len, &err) : NULL;
    free(text);
    snprintf(path, sizeof path, "%s/scen/den520d.map.scen", PD_MOVINGAI_DIR);
    FILE *f = fopen(path, "r");
    if (!g || !f) {
        fprintf(stderr, "cannot read den520d and its scenarios under %s\n", PD_MOVINGAI_DIR);
        return 1;
    }
    static pd_point from[RANGE_MAX_SCEN], to[RANGE_MAX_SCEN];
    size_t n = 0;
    char line[512];
    while (n < RANGE_MAX_SCEN && fgets(line, sizeof line, f)) {
        int b, w, h, sx, sy, gx, gy;
        double opt;
        char map[256];
        if (sscanf(line, "%d %255s %d %d %d %d %d %d %lf", &b, map, &w, &h, &sx, &sy, &gx, &gy, &opt) == 9 &&
            opt >= 50) {
            from[n] = (pd_point){ sx, sy };
            to[n++] = (pd_point){ gx, gy };
        }
    }
    fclose(f);
    pd_search_ctx *ctx = pd_search_ctx_create();
    static const char *const names[4] = { "A* to the goal", "range 5", "range 5, line of sight",
                                          "nearest of 4 goals" };
    double mean_us[4], mean_exp[4];
    for (int v = 0; v < 4; v++) {
        double rounds[RANGE_ROUNDS];
        uint64_t expanded = 0;
        for (int r = 0; r < RANGE_ROUNDS; r++) {
            double t0 = now_us();
            for (size_t i = 0; i < n; i++) {
                pd_point goals[4] = { to[i], to[(i + 1) % n], to[(i + 2) % n], to[(i + 3) % n] };
                pd_targets t = { goals, v == 3 ? 4 : 1, v == 1 || v == 2 ? 5.0 : 0.0, v == 2 };
                pd_search_params p = { .start = from[i], .goal = to[i], .targets = v ? &t : NULL };
                pd_search_metrics m;
                pd_search_astar(ctx, g, &p, NULL, 0, &m);
                if (r == 0)
                    expanded += m.expanded;
            }
            rounds[r] = (now_us() - t0) / (double)n;
        }
        qsort(rounds, RANGE_ROUNDS, sizeof rounds[0], cmp_double);
        mean_us[v] = rounds[RANGE_ROUNDS / 2];
        mean_exp[v] = (double)expanded / (double)n;
    }
    printf("den520d: %zu scenarios with optimal cost >= 50, A* (no JPS), %d rounds\n", n, RANGE_ROUNDS);
    for (int v = 0; v < 4; v++)
        printf("%-26s %9.1f us/search (x%.2f)   %9.0f expansions (x%.2f)\n", names[v], mean_us[v],
               mean_us[v] / mean_us[0], mean_exp[v], mean_exp[v] / mean_exp[0]);
    pd_search_ctx_destroy(ctx);
    pd_grid_destroy(g);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "core"))
        return core();
    if (argc >= 2 && !strcmp(argv[1], "range"))
        return range_bench();
    if (argc >= 3 && !strcmp(argv[1], "e2e"))
        return e2e(argv[2], argc >= 4 ? argv[3] : "forest");
    fprintf(stderr, "usage: pathd-move-bench core | range | e2e HOST:PORT [SCENE]\n");
    return 2;
}
