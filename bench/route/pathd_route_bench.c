/*
 * pathd_route_bench.c - cost of cross-scene routes (FindRoute's planning).
 *
 * Synthetic world (always): N random scenes of S x S cells (default 20 of
 * 256 x 256; rectangular obstacles, some cost-2 ground), each with exactly P
 * portal endpoints (default 3): a ring of two-way portals joins scene i to
 * i + 1, and the remaining endpoints are paired at random, with random costs
 * and every fifth portal one-way. Portal cells are open cells in each map's
 * largest region. Maps go through temporary ASCII files and the registry,
 * as the daemon loads them.
 *
 * Demo world (with --config and --world): the scenes of a daemon config plus
 * the portals and routes of a world file (a daemon config such as
 * config/default.json carries them too), and
 * additionally the town:3,4 -> cellar:10,2 query.
 *
 * For each world it reports the route-table build time (pd_world_build), the
 * time to refresh one scene after an update (pd_world_refresh_scene), and for
 * Q random cross-scene queries between open cells the median / p99 / max of
 * the plan alone and of plan + leg searches (one A* per leg with the full
 * path, what the worker does before styling). Unit size 1, 8-connected.
 *
 *   pathd-route-bench [--scenes N] [--side S] [--portals P] [--queries Q]
 *                     [--seed X] [--config FILE --world FILE]
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pd_conf.h"
#include "pd_conf_world.h"
#include "pd_scene.h"
#include "pd_world.h"
#include "bench_util.h"

/* Limits, with why. */
#define BENCH_DEFAULT_SCENES 20        /* the world the issue asks figures for */
#define BENCH_DEFAULT_SIDE 256
#define BENCH_DEFAULT_PORTALS 3        /* endpoints per scene */
#define BENCH_DEFAULT_QUERIES 1001     /* odd, so the median is one sample */
#define BENCH_MAX_SCENES 200           /* portals stay within the config's cap */
#define BENCH_MIN_SIDE 32              /* room for obstacles and open ground */
#define BENCH_MAX_SIDE 2048            /* 4 Mi cells per scene keeps memory modest */
#define BENCH_MAX_PORTALS 16           /* endpoints per scene; tables grow with its square */
#define BENCH_MAX_QUERIES 1000000
#define BENCH_OBSTACLES_PER_64K 400    /* rectangles per 256 x 256 cells */
#define BENCH_OBSTACLE_MAX_SIDE 14
#define BENCH_MAX_FILE 1024            /* bytes of a map or world file path */
#define BENCH_MAX_WORLD_BYTES (16u * 1024u * 1024u)


static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void print_row(const char *what, uint64_t *ns, size_t n)
{
    if (n == 0) {
        printf("  %-26s %8s\n", what, "no samples");
        return;
    }
    qsort(ns, n, sizeof *ns, cmp_u64);
    size_t p99 = (n * 99 + 99) / 100;
    p99 = p99 > 0 ? p99 - 1 : 0;
    printf("  %-26s %8zu %12.1f %12.1f %12.1f\n", what, n, (double)ns[n / 2] / 1000.0,
           (double)ns[p99] / 1000.0, (double)ns[n - 1] / 1000.0);
}

static int parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static void usage(FILE *to)
{
    fprintf(to,
            "usage: pathd-route-bench [--scenes N] [--side S] [--portals P] [--queries Q]\n"
            "                         [--seed X] [--config FILE --world FILE]\n"
            "  --scenes N    synthetic scenes, 2..%d (default %d)\n"
            "  --side S      side of each synthetic scene, %d..%d (default %d)\n"
            "  --portals P   portal endpoints per synthetic scene, 2..%d (default %d)\n"
            "  --queries Q   timed random queries per world, 1..%d (default %d)\n"
            "  --seed X      random seed for maps, portals and queries\n"
            "  --config F    also bench the scenes of this daemon config...\n"
            "  --world F     ...joined by the portals/routes of this file\n",
            BENCH_MAX_SCENES, BENCH_DEFAULT_SCENES, BENCH_MIN_SIDE, BENCH_MAX_SIDE,
            BENCH_DEFAULT_SIDE, BENCH_MAX_PORTALS, BENCH_DEFAULT_PORTALS, BENCH_MAX_QUERIES,
            BENCH_DEFAULT_QUERIES);
}

/* ---- the synthetic world ------------------------------------------------ */

/* Writes a random map: open ground with rectangular obstacles and patches of
 * cost-2 ground. Returns 0 or -1. */
static int write_map(const char *path, int side)
{
    char *cells = malloc((size_t)side * (size_t)side);
    if (!cells)
        return -1;
    memset(cells, '.', (size_t)side * (size_t)side);
    long rects = (long)BENCH_OBSTACLES_PER_64K * side * side / 65536;
    for (long i = 0; i < rects; i++) {
        int w = 1 + (int)(bench_rand() % BENCH_OBSTACLE_MAX_SIDE);
        int h = 1 + (int)(bench_rand() % BENCH_OBSTACLE_MAX_SIDE);
        int x0 = (int)(bench_rand() % (uint32_t)side), y0 = (int)(bench_rand() % (uint32_t)side);
        char fill = (i % 5 == 0) ? '2' : '#';
        for (int y = y0; y < y0 + h && y < side; y++)
            for (int x = x0; x < x0 + w && x < side; x++)
                cells[(size_t)y * (size_t)side + (size_t)x] = fill;
    }
    FILE *f = fopen(path, "w");
    if (!f) {
        free(cells);
        return -1;
    }
    for (int y = 0; y < side; y++) {
        fwrite(cells + (size_t)y * (size_t)side, 1, (size_t)side, f);
        fputc('\n', f);
    }
    free(cells);
    return fclose(f) == 0 ? 0 : -1;
}

/* The label of a scene's largest unit-1 region (portals and queries use it,
 * so most queries have an answer). */
static uint32_t main_label(const pd_scene *s)
{
    const pd_components *c = pd_scene_unit_for(s, 1)->components;
    uint64_t *count = calloc((size_t)c->next_label + 1, sizeof *count);
    uint32_t best = 0;
    if (!count)
        return 0;
    for (int32_t y = 0; y < c->height; y++) {
        for (int32_t x = 0; x < c->width; x++) {
            uint32_t l = pd_components_label(c, (pd_point){ x, y });
            /* A small (escaped) component is never the largest. */
            if (l && !(l & PD_COMPONENTS_SMALL_LABEL) && ++count[l] > count[best])
                best = l;
        }
    }
    free(count);
    return best;
}

/* A random open cell, in the main region when main != 0. */
static pd_point random_cell(const pd_scene *s, uint32_t main)
{
    const pd_scene_unit *su = pd_scene_unit_for(s, 1);
    for (;;) {
        pd_point p = { (int32_t)(bench_rand() % (uint32_t)s->grid->width),
                       (int32_t)(bench_rand() % (uint32_t)s->grid->height) };
        if (pd_grid_get(su->grid, p.x, p.y) == PD_CELL_BLOCKED)
            continue;
        if (main && pd_components_label(su->components, p) != main)
            continue;
        return p;
    }
}

static void set_end(pd_conf_portal_end *e, const pd_scene *s, uint32_t main)
{
    snprintf(e->scene, sizeof e->scene, "%s", s->name);
    pd_point p = random_cell(s, main);
    e->x = p.x;
    e->y = p.y;
}

/* Builds the synthetic registry and portal list. Returns 0 or -1. */
static int synthetic_world(int n_scenes, int side, int per_scene, pd_registry **reg,
                           pd_conf_world *cw)
{
    char dir[] = "/tmp/pathd-route-bench-XXXXXX";
    if (!mkdtemp(dir))
        return -1;
    pd_conf conf = pd_conf_defaults;
    conf.scenes = calloc((size_t)n_scenes, sizeof *conf.scenes);
    int rc = conf.scenes ? 0 : -1;
    for (int i = 0; rc == 0 && i < n_scenes; i++) {
        pd_conf_scene *cs = &conf.scenes[i];
        char path[BENCH_MAX_FILE];
        snprintf(path, sizeof path, "%s/scene%02d.txt", dir, i);
        snprintf(cs->name, sizeof cs->name, "scene%02d", i);
        cs->map_path = strdup(path);
        cs->format = PD_MAP_ASCII;
        cs->cell_size = 1.0;
        cs->unit_sizes[0] = 1;
        cs->n_unit_sizes = 1;
        conf.n_scenes = (size_t)i + 1;
        if (!cs->map_path || write_map(path, side) != 0)
            rc = -1;
    }
    char err[512];
    *reg = pd_registry_create();
    if (rc == 0 && (!*reg || pd_registry_load(*reg, &conf, err, sizeof err) != 0)) {
        fprintf(stderr, "pathd-route-bench: %s\n", *reg ? err : "out of memory");
        rc = -1;
    }
    for (size_t i = 0; i < conf.n_scenes; i++)
        remove(conf.scenes[i].map_path);
    rmdir(dir);
    pd_conf_free(&conf);
    if (rc != 0)
        return -1;

    pd_scene **scenes = NULL;
    size_t n = pd_registry_list(*reg, &scenes);
    uint32_t *main = calloc(n, sizeof *main);
    int *free_slots = calloc(n, sizeof *free_slots);
    size_t n_portals = n * (size_t)per_scene / 2;
    memset(cw, 0, sizeof *cw);
    cw->portals = calloc(n_portals + 1, sizeof *cw->portals);
    if (!main || !free_slots || !cw->portals) {
        free(main);
        free(free_slots);
        pd_registry_release_list(scenes, n);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        main[i] = main_label(scenes[i]);
        free_slots[i] = per_scene;
    }
    /* A ring keeps the world connected; the other endpoints pair at random
     * between scenes that still have a free one. */
    size_t k = 0;
    for (size_t i = 0; i < n && k < n_portals; i++) {
        size_t j = (i + 1) % n;
        pd_conf_portal *p = &cw->portals[k++];
        snprintf(p->name, sizeof p->name, "ring%02zu", i);
        set_end(&p->a, scenes[i], main[i]);
        set_end(&p->b, scenes[j], main[j]);
        p->two_way = 1;
        p->cost = (double)(bench_rand() % 8);
        free_slots[i]--;
        free_slots[j]--;
    }
    for (int guard = 0; k < n_portals && guard < 100000; guard++) {
        size_t i = bench_rand() % n, j = bench_rand() % n;
        if (i == j || free_slots[i] <= 0 || free_slots[j] <= 0)
            continue;
        pd_conf_portal *p = &cw->portals[k];
        snprintf(p->name, sizeof p->name, "link%02zu", k);
        set_end(&p->a, scenes[i], main[i]);
        set_end(&p->b, scenes[j], main[j]);
        p->two_way = k % 5 != 0;
        p->cost = (double)(bench_rand() % 8);
        free_slots[i]--;
        free_slots[j]--;
        k++;
    }
    cw->n_portals = k;
    free(main);
    free(free_slots);
    pd_registry_release_list(scenes, n);
    return 0;
}

/* ---- timing ------------------------------------------------------------- */

/* One query and its leg searches; returns the plan's status. */
static pd_status run_query(const pd_world *w, pd_search_ctx *ctx, const pd_world_query *q,
                           pd_point **buf, size_t *cap, uint64_t *plan_ns, uint64_t *total_ns,
                           size_t *legs)
{
    uint64_t t0 = now_ns();
    pd_world_route rt;
    pd_status st = pd_world_plan(w, ctx, q, &rt);
    uint64_t t1 = now_ns();
    for (size_t i = 0; st == PD_OK && i < rt.n_legs; i++) {
        const pd_world_leg *l = &rt.legs[i];
        pd_search_params p = { .start = l->from, .goal = l->to };
        pd_search_metrics m;
        pd_status ls = pd_search_astar(ctx, pd_scene_unit_for(l->scene, q->unit_size)->grid, &p,
                                       *buf, *cap, &m);
        if (ls == PD_BUFFER_TOO_SMALL) {
            pd_point *grown = realloc(*buf, m.path_len * sizeof *grown);
            if (!grown) {
                st = PD_INTERNAL;
                break;
            }
            *buf = grown;
            *cap = m.path_len;
            ls = pd_search_extract(ctx, *buf, *cap, NULL);
        }
        if (ls != PD_OK)
            st = ls;
    }
    *total_ns = now_ns() - t0;
    *plan_ns = t1 - t0;
    *legs = rt.n_legs;
    pd_world_route_free(&rt);
    return st;
}

/* Times Q random cross-scene queries (scenes with portals only). */
static void bench_queries(const pd_world *w, long queries)
{
    size_t n = pd_world_scene_count(w);
    uint64_t *plan_ns = malloc((size_t)queries * sizeof *plan_ns);
    uint64_t *total_ns = malloc((size_t)queries * sizeof *total_ns);
    uint32_t *mains = calloc(n, sizeof *mains);
    pd_search_ctx *ctx = pd_search_ctx_create();
    pd_point *buf = NULL;
    size_t cap = 0, ok = 0, no_path = 0, legs_sum = 0;
    if (!plan_ns || !total_ns || !mains || !ctx || n < 2) {
        fprintf(stderr, "pathd-route-bench: cannot run queries\n");
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        mains[i] = main_label(pd_world_scene_at(w, i));
    for (long k = 0; k < queries; k++) {
        size_t s = bench_rand() % n, t;
        do
            t = bench_rand() % n;
        while (t == s);
        const pd_scene *ss = pd_world_scene_at(w, s), *ts = pd_world_scene_at(w, t);
        pd_world_query q = { .from_scene = ss->name, .start = random_cell(ss, mains[s]),
                             .to_scene = ts->name, .goal = random_cell(ts, mains[t]),
                             .unit_size = 1 };
        size_t legs = 0;
        uint64_t p_ns, t_ns;
        pd_status st = run_query(w, ctx, &q, &buf, &cap, &p_ns, &t_ns, &legs);
        if (st == PD_OK) {
            plan_ns[ok] = p_ns;
            total_ns[ok] = t_ns;
            legs_sum += legs;
            ok++;
        } else if (st == PD_NO_PATH) {
            no_path++;
        } else {
            fprintf(stderr, "pathd-route-bench: %s -> %s: %s\n", q.from_scene, q.to_scene,
                    pd_status_name(st));
        }
    }
    printf("  queries: %ld (%zu routed, %zu NO_PATH), %.2f legs per route\n", queries, ok, no_path,
           ok ? (double)legs_sum / (double)ok : 0.0);
    printf("  %-26s %8s %12s %12s %12s\n", "microseconds", "n", "median", "p99", "max");
    print_row("plan", plan_ns, ok);
    print_row("plan + leg searches", total_ns, ok);
out:
    free(buf);
    pd_search_ctx_destroy(ctx);
    free(mains);
    free(plan_ns);
    free(total_ns);
}

/* Builds the world (timed), refreshes its first scene after blocking one
 * cell (timed), then times the queries. */
static int bench_world(const char *label, pd_registry *r, const pd_conf_world *cw, long queries)
{
    char err[512];
    uint64_t t0 = now_ns();
    pd_world *w = pd_world_build_from_registry(cw, r, err, sizeof err);
    uint64_t build_ns = now_ns() - t0;
    if (!w) {
        fprintf(stderr, "pathd-route-bench: %s\n", err);
        return -1;
    }
    pd_world_stats st;
    pd_world_get_stats(w, &st);
    printf("%s: %zu scenes, %zu portals, %zu pinned routes\n", label, st.n_scenes, st.n_portals,
           st.n_routes);
    printf("  route tables: %" PRIu64 " entries, %" PRIu64 " searches, %.2f ms "
           "(whole build %.2f ms)\n", st.table_entries, st.table_searches,
           (double)st.table_micros / 1000.0, (double)build_ns / 1e6);

    /* One scene's refresh after an update, as UpdateCells would cause. */
    const pd_scene *first = pd_world_scene_at(w, 0);
    pd_point cell = random_cell(first, 0);
    pd_scene_update u = { .op = PD_UPDATE_BLOCK, .is_rect = 1, .rect_min = cell, .rect_max = cell };
    pd_scene *updated = NULL;
    if (pd_scene_apply_update(first, &u, &updated, NULL) == PD_OK && updated) {
        pd_world *n = NULL;
        t0 = now_ns();
        pd_status rs = pd_world_refresh_scene(w, updated, &n, err, sizeof err);
        uint64_t refresh_ns = now_ns() - t0;
        if (rs == PD_OK) {
            pd_world_stats ns;
            pd_world_get_stats(n, &ns);
            printf("  refresh of scene '%s': %.2f ms (tables %.2f ms, %" PRIu64 " searches)\n",
                   first->name, (double)refresh_ns / 1e6, (double)ns.table_micros / 1000.0,
                   ns.table_searches);
        }
        pd_world_release(n);
        pd_scene_release(updated);
    }
    bench_queries(w, queries);
    pd_world_release(w);
    return 0;
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = malloc(BENCH_MAX_WORLD_BYTES + 1);
    size_t n = buf ? fread(buf, 1, BENCH_MAX_WORLD_BYTES + 1, f) : 0;
    fclose(f);
    if (!buf || n > BENCH_MAX_WORLD_BYTES) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* The demo world: the query timed on its own, then random ones. */
static int bench_demo(const char *config, const char *world, long queries)
{
    pd_conf conf;
    char err[512];
    if (pd_conf_load_file(config, &conf, err, sizeof err) != 0) {
        fprintf(stderr, "pathd-route-bench: %s\n", err);
        return -1;
    }
    size_t len = 0;
    char *json = read_file(world, &len);
    const char **names = calloc(conf.n_scenes + 1, sizeof *names);
    pd_conf_world cw = { 0 };
    int rc = -1;
    if (!json || !names) {
        fprintf(stderr, "pathd-route-bench: cannot read %s\n", world);
        goto out;
    }
    for (size_t i = 0; i < conf.n_scenes; i++)
        names[i] = conf.scenes[i].name;
    if (pd_conf_world_parse_buffer(json, len, world, names, conf.n_scenes, &cw, err, sizeof err) != 0) {
        fprintf(stderr, "pathd-route-bench: %s\n", err);
        goto out;
    }
    /* Only the scenes the portals join take part in the random queries. */
    pd_conf sub = conf;
    sub.scenes = calloc(conf.n_scenes, sizeof *sub.scenes);
    if (!sub.scenes)
        goto out;
    sub.n_scenes = 0;
    for (size_t i = 0; i < conf.n_scenes; i++) {
        int used = 0;
        for (size_t p = 0; p < cw.n_portals; p++)
            used |= !strcmp(cw.portals[p].a.scene, conf.scenes[i].name) ||
                    !strcmp(cw.portals[p].b.scene, conf.scenes[i].name);
        if (used)
            sub.scenes[sub.n_scenes++] = conf.scenes[i];
    }
    pd_registry *r = pd_registry_create();
    if (!r || pd_registry_load(r, &sub, err, sizeof err) != 0) {
        fprintf(stderr, "pathd-route-bench: %s\n", r ? err : "out of memory");
        pd_registry_destroy(r);
        free(sub.scenes);
        goto out;
    }
    free(sub.scenes);
    rc = bench_world("demo world", r, &cw, queries);

    pd_world *w = pd_world_build_from_registry(&cw, r, err, sizeof err);
    pd_search_ctx *ctx = pd_search_ctx_create();
    pd_world_query q = { .from_scene = "town", .start = { 3, 4 }, .to_scene = "cellar",
                         .goal = { 10, 2 }, .unit_size = 1 };
    if (w && ctx && pd_world_scene(w, "town") && pd_world_scene(w, "cellar")) {
        uint64_t *plan_ns = malloc((size_t)queries * sizeof *plan_ns);
        uint64_t *total_ns = malloc((size_t)queries * sizeof *total_ns);
        pd_point *buf = NULL;
        size_t cap = 0, legs = 0, ok = 0;
        for (long k = 0; plan_ns && total_ns && k < queries; k++) {
            if (run_query(w, ctx, &q, &buf, &cap, &plan_ns[ok], &total_ns[ok], &legs) == PD_OK)
                ok++;
        }
        pd_world_route rt;
        if (pd_world_plan(w, ctx, &q, &rt) == PD_OK) {
            printf("  town:3,4 -> cellar:10,2: total %.3f over %zu legs:", rt.total_cost, rt.n_legs);
            for (size_t i = 0; i < rt.n_legs; i++)
                printf(" %s(%.3f)%s%s", rt.legs[i].scene->name, rt.legs[i].cost,
                       rt.legs[i].has_portal ? " >" : "", rt.legs[i].has_portal ? rt.legs[i].portal : "");
            printf("\n");
        }
        pd_world_route_free(&rt);
        print_row("town->cellar plan", plan_ns, ok);
        print_row("town->cellar plan + legs", total_ns, ok);
        free(buf);
        free(plan_ns);
        free(total_ns);
    }
    pd_search_ctx_destroy(ctx);
    pd_world_release(w);
    pd_registry_destroy(r);
out:
    pd_conf_world_free(&cw);
    free(names);
    free(json);
    pd_conf_free(&conf);
    return rc;
}

int main(int argc, char **argv)
{
    long scenes = BENCH_DEFAULT_SCENES, side = BENCH_DEFAULT_SIDE, portals = BENCH_DEFAULT_PORTALS;
    long queries = BENCH_DEFAULT_QUERIES, seed = 0;
    const char *config = NULL, *world = NULL;
    static const struct option opts[] = {
        { "scenes", required_argument, NULL, 'n' },  { "side", required_argument, NULL, 's' },
        { "portals", required_argument, NULL, 'p' }, { "queries", required_argument, NULL, 'q' },
        { "seed", required_argument, NULL, 'S' },    { "config", required_argument, NULL, 'c' },
        { "world", required_argument, NULL, 'w' },   { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int opt;
    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        int bad = 0;
        switch (opt) {
        case 'n':
            bad = parse_long(optarg, 2, BENCH_MAX_SCENES, &scenes);
            break;
        case 's':
            bad = parse_long(optarg, BENCH_MIN_SIDE, BENCH_MAX_SIDE, &side);
            break;
        case 'p':
            bad = parse_long(optarg, 2, BENCH_MAX_PORTALS, &portals);
            break;
        case 'q':
            bad = parse_long(optarg, 1, BENCH_MAX_QUERIES, &queries);
            break;
        case 'S':
            bad = parse_long(optarg, 0, 0x7fffffffL, &seed);
            break;
        case 'c':
            config = optarg;
            break;
        case 'w':
            world = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "pathd-route-bench: bad value: %s\n", optarg);
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc || (!config != !world)) {
        usage(stderr);
        return 2;
    }
    if (seed)
        bench_rng ^= (uint64_t)seed * 0x9E3779B97F4A7C15ull;

    pd_registry *r = NULL;
    pd_conf_world cw;
    if (synthetic_world((int)scenes, (int)side, (int)portals, &r, &cw) != 0) {
        fprintf(stderr, "pathd-route-bench: cannot build the synthetic world\n");
        pd_registry_destroy(r);
        return 1;
    }
    char label[128];
    snprintf(label, sizeof label, "synthetic world (%ld scenes of %ldx%ld, %ld portal ends each)",
             scenes, side, side, portals);
    int rc = bench_world(label, r, &cw, queries);
    pd_conf_world_free(&cw);
    pd_registry_destroy(r);
    if (rc == 0 && config)
        rc = bench_demo(config, world, queries);
    return rc == 0 ? 0 : 1;
}
