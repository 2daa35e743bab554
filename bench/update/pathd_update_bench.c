/*
 * pathd_update_bench.c - latency of live cell updates (UpdateCells).
 *
 * Builds a random N x N scene (about 20% obstacles, default 1024 x 1024) with
 * the given unit sizes, then times updates - copy of the snapshot plus local
 * repair of clearance, unit grids and component labels - for a 1-cell change
 * and a 32 x 32 rectangle change, two ways:
 *  - pd_registry_update, the daemon's path: the new version is written into
 *    the buffers of the snapshot the previous update retired;
 *  - pd_scene_apply_update alone: every version gets freshly allocated
 *    buffers (what an update costs while searches still hold the old one).
 * Every timed update is a real change (a cell or rectangle is blocked, then
 * opened again), and each builds on the version before it, as a live scene
 * would. For comparison it also times a copy of the derived data alone and
 * a full rebuild of it from the grid (what an update would cost without
 * local repair). The updates above include keeping the passability bitsets
 * (pd_grid.h) of the grid and every unit grid exact; their share is timed
 * alone too: pd_grid_sync_bits after a 1-cell and a 32 x 32 change of the
 * grid's passability, beside a whole rebuild of the bitsets
 * (pd_grid_refresh_flags), which no update does. Prints median, p99 and max
 * per row.
 *
 * The registry rows are what the daemon does and what a client waits for:
 * an update's time there ends when the new version is served, so the next
 * query acquires it (the bench checks that it does). Each scene's lineage
 * writes a new version into the one the update before replaced, after
 * replaying that update on it (pd_scene_update.c); only the scene's first update
 * copies, shown apart as "first update (copy)". --registry-only skips the
 * rows that copy or rebuild the whole scene (minutes at 4096 x 4096).
 *
 *   pathd-update-bench [--size N] [--reps R] [--units 1,2,3] [--seed S] [--registry-only]
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pd_clearance.h"
#include "pd_components.h"
#include "pd_scene.h"
#include "bench_util.h"

/* Limits, with why. */
#define BENCH_DEFAULT_SIZE 1024        /* the size the issue asks latency figures for */
#define BENCH_MIN_SIZE 64              /* room for the 32 x 32 rectangle with margin */
#define BENCH_MAX_SIZE 4096            /* 16 Mi cells: each snapshot copy is ~0.3 GiB */
#define BENCH_DEFAULT_REPS 201         /* odd, so the median is one sample */
#define BENCH_MAX_REPS 100000
#define BENCH_REBUILD_REPS_MAX 21      /* full rebuilds are slow; fewer samples suffice */
#define BENCH_OBSTACLE_PERCENT 20
#define BENCH_RECT_SIDE 32             /* the rectangle change the issue asks for */


static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void print_row(const char *what, uint64_t *ns, size_t n)
{
    qsort(ns, n, sizeof *ns, cmp_u64);
    size_t p99 = (n * 99 + 99) / 100;
    p99 = p99 > 0 ? p99 - 1 : 0;
    printf("%-22s %8zu %12.1f %12.1f %12.1f\n", what, n, (double)ns[n / 2] / 1000.0,
           (double)ns[p99] / 1000.0, (double)ns[n - 1] / 1000.0);
}

static void usage(FILE *to)
{
    fprintf(to, "usage: pathd-update-bench [--size N] [--reps R] [--units 1,2,3] [--seed S] [--registry-only]\n"
                "  --size N     side of the random square map, %d..%d (default %d)\n"
                "  --reps R     timed updates per row, 1..%d (default %d)\n"
                "  --units L    comma-separated unit sizes, 1..%d each (default 1,2,3)\n"
                "  --seed S     random seed for the map and the changed cells\n"
                "  --registry-only  only the registry's rows and the bitsets' (no whole copies)\n",
            BENCH_MIN_SIZE, BENCH_MAX_SIZE, BENCH_DEFAULT_SIZE, BENCH_MAX_REPS, BENCH_DEFAULT_REPS,
            PD_CONF_MAX_UNIT_SIZE);
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

static int parse_units(const char *s, pd_conf_scene *cs)
{
    cs->n_unit_sizes = 0;
    char *copy = strdup(s);
    if (!copy)
        return -1;
    int rc = 0;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        long v;
        if (cs->n_unit_sizes == PD_CONF_MAX_UNIT_SIZES ||
            parse_long(tok, 1, PD_CONF_MAX_UNIT_SIZE, &v) != 0) {
            rc = -1;
            break;
        }
        for (size_t i = 0; i < cs->n_unit_sizes; i++)
            rc |= cs->unit_sizes[i] == (uint32_t)v ? -1 : 0;
        cs->unit_sizes[cs->n_unit_sizes++] = (uint32_t)v;
    }
    free(copy);
    return rc == 0 && cs->n_unit_sizes > 0 ? 0 : -1;
}

/* Writes a random ASCII map to a temporary file; returns its path. */
static int write_random_map(int32_t size, char *path, size_t pathlen)
{
    const char *dir = getenv("TMPDIR");
    snprintf(path, pathlen, "%s/pathd-update-bench-XXXXXX", dir && dir[0] ? dir : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        remove(path);
        return -1;
    }
    for (int32_t y = 0; y < size; y++) {
        for (int32_t x = 0; x < size; x++)
            fputc(bench_rand() % 100 < BENCH_OBSTACLE_PERCENT ? '#' : '.', f);
        fputc('\n', f);
    }
    if (fclose(f) != 0) {
        remove(path);
        return -1;
    }
    return 0;
}

/* Builds the update for repetition `rep` on snapshot s; `where` carries the
 * changed cell or corner from one repetition to the next. */
typedef void (*make_update_fn)(const pd_scene *s, int rep, pd_scene_update *u, pd_point *where);

static void one_cell_update(const pd_scene *s, int rep, pd_scene_update *u, pd_point *cell)
{
    /* Even reps pick a new cell and flip it; odd reps flip it back. */
    if (rep % 2 == 0)
        *cell = (pd_point){ (int32_t)(bench_rand() % (uint32_t)s->grid->width),
                            (int32_t)(bench_rand() % (uint32_t)s->grid->height) };
    memset(u, 0, sizeof *u);
    u->op = pd_grid_get(s->grid, cell->x, cell->y) == PD_CELL_BLOCKED ? PD_UPDATE_PASS : PD_UPDATE_BLOCK;
    u->cells = cell;
    u->n_cells = 1;
}

/* Even reps block a fresh rectangle (with ~80% open cells, a real
 * change); odd reps undo it with `undo`. */
static void rect_update_undo(const pd_scene *s, int rep, pd_scene_update *u, pd_point *corner,
                             pd_update_op undo)
{
    if (rep % 2 == 0)
        *corner = (pd_point){ (int32_t)(bench_rand() % (uint32_t)(s->grid->width - BENCH_RECT_SIDE)),
                              (int32_t)(bench_rand() % (uint32_t)(s->grid->height - BENCH_RECT_SIDE)) };
    memset(u, 0, sizeof *u);
    u->op = rep % 2 == 0 ? PD_UPDATE_BLOCK : undo;
    u->is_rect = 1;
    u->rect_min = *corner;
    u->rect_max = (pd_point){ corner->x + BENCH_RECT_SIDE - 1, corner->y + BENCH_RECT_SIDE - 1 };
}

/* Opened again, every cell passable: the map drifts towards open ground,
 * its walls wiped rectangle by rectangle (the row kept from before). */
static void rect_update(const pd_scene *s, int rep, pd_scene_update *u, pd_point *corner)
{
    rect_update_undo(s, rep, u, corner, PD_UPDATE_PASS);
}

/* Restored to the authored cells (a door closed and opened): the map
 * stays the one loaded. */
static void rect_restore_update(const pd_scene *s, int rep, pd_scene_update *u, pd_point *corner)
{
    rect_update_undo(s, rep, u, corner, PD_UPDATE_RESTORE);
}

/* Times `reps` updates from `make` on a chain of versions starting at *cur;
 * *cur ends at the last version. Returns 0 or -1. */
static int time_apply(pd_scene **cur, make_update_fn make, int reps, uint64_t *ns,
                      uint64_t *changed_total)
{
    pd_point where = { 0, 0 };
    *changed_total = 0;
    for (int rep = 0; rep < reps; rep++) {
        pd_scene_update u;
        make(*cur, rep, &u, &where);
        pd_scene *next = NULL;
        pd_scene_update_result res;
        uint64_t t0 = now_ns();
        pd_status st = pd_scene_apply_update(*cur, &u, &next, &res);
        ns[rep] = now_ns() - t0;
        if (st != PD_OK || !next || res.cells_changed == 0) {
            fprintf(stderr, "pathd-update-bench: update %d: %s, %" PRIu64 " cells changed\n", rep,
                    pd_status_name(st), res.cells_changed);
            pd_scene_release(next);
            return -1;
        }
        *changed_total += res.cells_changed;
        pd_scene_release(*cur);
        *cur = next;
    }
    return 0;
}

/* The same through the registry, which reuses retired snapshots. */
static int time_registry(pd_registry *r, make_update_fn make, int reps, uint64_t *ns)
{
    pd_point where = { 0, 0 };
    for (int rep = 0; rep < reps; rep++) {
        pd_scene *cur = pd_registry_acquire(r, "bench");
        if (!cur)
            return -1;
        pd_scene_update u;
        make(cur, rep, &u, &where);
        pd_scene_release(cur);
        pd_scene_update_result res;
        uint64_t t0 = now_ns();
        pd_status st = pd_registry_update(r, "bench", &u, &res);
        ns[rep] = now_ns() - t0;
        if (st != PD_OK || res.cells_changed == 0) {
            fprintf(stderr, "pathd-update-bench: registry update %d: %s, %" PRIu64 " cells changed\n",
                    rep, pd_status_name(st), res.cells_changed);
            return -1;
        }
        /* Served when the call returns: the next query gets this version. */
        cur = pd_registry_acquire(r, "bench");
        uint64_t served = cur ? cur->version : 0;
        pd_scene_release(cur);
        if (served != res.version) {
            fprintf(stderr, "pathd-update-bench: version %" PRIu64 " made, %" PRIu64 " served\n",
                    res.version, served);
            return -1;
        }
    }
    return 0;
}

/* Derived data copied (the floor any copy-on-write update pays) or rebuilt
 * from the grid (what an update would cost without local repair). */
static int time_copy(const pd_scene *s, int rebuild, uint64_t *ns_out)
{
    uint64_t t0 = now_ns();
    pd_grid *grid = pd_grid_clone(s->grid);
    pd_clearance *c = NULL;
    if (s->clearance)
        c = rebuild ? pd_clearance_build(grid) : pd_clearance_clone(s->clearance);
    pd_grid *unit_grids[PD_CONF_MAX_UNIT_SIZES] = { 0 };
    pd_components *labels[PD_CONF_MAX_UNIT_SIZES] = { 0 };
    int ok = grid && (c || !s->clearance);
    for (size_t i = 0; ok && i < s->n_unit_sizes; i++) {
        const pd_scene_unit *u = &s->units[i];
        if (u->unit == 1)
            unit_grids[i] = grid;
        else
            unit_grids[i] = rebuild ? pd_unit_grid_build(grid, c, u->unit) : pd_grid_clone(u->grid);
        labels[i] = unit_grids[i] ? (rebuild ? pd_components_build(unit_grids[i])
                                             : pd_components_clone(u->components))
                                  : NULL;
        ok = unit_grids[i] && labels[i];
    }
    *ns_out = now_ns() - t0;
    for (size_t i = 0; i < s->n_unit_sizes; i++) {
        if (unit_grids[i] != grid)
            pd_grid_destroy(unit_grids[i]);
        pd_components_destroy(labels[i]);
    }
    pd_clearance_destroy(c);
    pd_grid_destroy(grid);
    return ok ? 0 : -1;
}

/* The bitsets' share of an update: side x side cells of a copy of the grid
 * change passability (blocked <-> open), then pd_grid_sync_bits brings its
 * bits up to date; only the sync is timed. With rebuild, the whole bitset
 * is rebuilt instead (pd_grid_refresh_flags), for comparison. */
static int time_bits(const pd_scene *s, int32_t side, int rebuild, int reps, uint64_t *ns)
{
    pd_grid *g = pd_grid_clone(s->grid);
    if (!g)
        return -1;
    for (int rep = 0; rep < reps; rep++) {
        int32_t x0 = (int32_t)(bench_rand() % (uint32_t)(g->width - side + 1));
        int32_t y0 = (int32_t)(bench_rand() % (uint32_t)(g->height - side + 1));
        for (int32_t y = y0; y < y0 + side; y++)
            for (int32_t x = x0; x < x0 + side; x++) {
                uint8_t *c = &g->cells[pd_grid_index(g, x, y)];
                *c = *c == PD_CELL_BLOCKED ? PD_CELL_FREE : PD_CELL_BLOCKED;
            }
        uint64_t t0 = now_ns();
        if (rebuild)
            pd_grid_refresh_flags(g);
        else if (pd_grid_sync_bits(g, x0, y0, x0 + side - 1, y0 + side - 1) != (uint64_t)side * (uint64_t)side) {
            pd_grid_destroy(g);
            return -1;
        }
        ns[rep] = now_ns() - t0;
    }
    pd_grid_destroy(g);
    return 0;
}

int main(int argc, char **argv)
{
    long size = BENCH_DEFAULT_SIZE, reps = BENCH_DEFAULT_REPS, seed = 0;
    int registry_only = 0;
    pd_conf_scene cs;
    memset(&cs, 0, sizeof cs);
    parse_units("1,2,3", &cs);
    static const struct option opts[] = {
        { "size", required_argument, NULL, 's' },  { "reps", required_argument, NULL, 'r' },
        { "units", required_argument, NULL, 'u' }, { "seed", required_argument, NULL, 'S' },
        { "registry-only", no_argument, NULL, 'R' },
        { "help", no_argument, NULL, 'h' },        { NULL, 0, NULL, 0 },
    };
    int opt;
    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        int bad = 0;
        switch (opt) {
        case 's':
            bad = parse_long(optarg, BENCH_MIN_SIZE, BENCH_MAX_SIZE, &size);
            break;
        case 'r':
            bad = parse_long(optarg, 1, BENCH_MAX_REPS, &reps);
            break;
        case 'u':
            bad = parse_units(optarg, &cs);
            break;
        case 'S':
            bad = parse_long(optarg, 0, 0x7fffffffL, &seed);
            break;
        case 'R':
            registry_only = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "pathd-update-bench: bad value for --%s: %s\n",
                    opt == 's' ? "size" : opt == 'r' ? "reps" : opt == 'u' ? "units" : "seed", optarg);
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        usage(stderr);
        return 2;
    }
    if (seed)
        bench_rng ^= (uint64_t)seed * 0x9E3779B97F4A7C15ull;

    char path[4096];
    if (write_random_map((int32_t)size, path, sizeof path) != 0) {
        fprintf(stderr, "pathd-update-bench: cannot write a temporary map: %s\n", strerror(errno));
        return 1;
    }
    snprintf(cs.name, sizeof cs.name, "bench");
    cs.map_path = path;
    cs.format = PD_MAP_ASCII;
    cs.cell_size = 1.0;
    char err[512];
    uint64_t t0 = now_ns();
    pd_scene *s = pd_scene_load(&cs, err, sizeof err);
    uint64_t load_ns = now_ns() - t0;
    pd_registry *r = pd_registry_create();
    pd_conf conf = pd_conf_defaults;
    conf.scenes = &cs;
    conf.n_scenes = 1;
    int loaded = s && r && pd_registry_load(r, &conf, err, sizeof err) == 0;
    remove(path);
    if (!loaded) {
        fprintf(stderr, "pathd-update-bench: %s\n", s && r ? err : "cannot load the map");
        pd_scene_release(s);
        pd_registry_destroy(r);
        return 1;
    }

    uint64_t *ns = calloc((size_t)reps, sizeof *ns);
    if (!ns) {
        pd_scene_release(s);
        pd_registry_destroy(r);
        fprintf(stderr, "pathd-update-bench: out of memory\n");
        return 1;
    }
    printf("pathd-update-bench: %ldx%ld map, %d%% obstacles, units", size, size, BENCH_OBSTACLE_PERCENT);
    for (size_t i = 0; i < cs.n_unit_sizes; i++)
        printf("%s%u", i ? "," : " ", (unsigned)cs.unit_sizes[i]);
    printf("; scene load (parse + derive) %.1f ms\n", (double)load_ns / 1e6);
    printf("%-22s %8s %12s %12s %12s\n", "operation", "samples", "median_us", "p99_us", "max_us");

    int rc = 0;
    uint64_t changed = 0;
    /* The scene's first update copies it (there is no retired version to
     * write into yet): one sample, apart from the rows below. */
    if (time_registry(r, one_cell_update, 1, ns) != 0) {
        rc = 1;
        goto out;
    }
    print_row("first update (copy)", ns, 1);
    if (time_registry(r, one_cell_update, (int)reps, ns) != 0) {
        rc = 1;
        goto out;
    }
    print_row("1 cell, registry", ns, (size_t)reps);
    /* Restoring first: the map is still the one loaded. */
    if (time_registry(r, rect_restore_update, (int)reps, ns) != 0) {
        rc = 1;
        goto out;
    }
    print_row("32x32 block+restore", ns, (size_t)reps);
    if (time_registry(r, rect_update, (int)reps, ns) != 0) {
        rc = 1;
        goto out;
    }
    print_row("32x32 rect, registry", ns, (size_t)reps);
    size_t few = (size_t)reps < BENCH_REBUILD_REPS_MAX ? (size_t)reps : BENCH_REBUILD_REPS_MAX;
    if (registry_only)
        goto bitsets;
    if (time_apply(&s, one_cell_update, (int)reps, ns, &changed) != 0) {
        rc = 1;
        goto out;
    }
    print_row("1 cell, new buffers", ns, (size_t)reps);
    if (time_apply(&s, rect_update, (int)reps, ns, &changed) != 0) {
        rc = 1;
        goto out;
    }
    print_row("32x32 rect, new bufs", ns, (size_t)reps);
    for (size_t i = 0; i < few; i++) {
        if (time_copy(s, 0, &ns[i]) != 0) {
            rc = 1;
            goto out;
        }
    }
    print_row("copy, new buffers", ns, few);
    for (size_t i = 0; i < few; i++) {
        if (time_copy(s, 1, &ns[i]) != 0) {
            rc = 1;
            goto out;
        }
    }
    print_row("full rebuild", ns, few);
bitsets:;
    static const struct {
        const char *what;
        int32_t side;
        int rebuild;
    } bit_rows[] = {
        { "bitsets, 1 cell", 1, 0 },
        { "bitsets, 32x32 rect", BENCH_RECT_SIDE, 0 },
        { "bitsets, full rebuild", 1, 1 },
    };
    for (size_t i = 0; i < sizeof bit_rows / sizeof *bit_rows; i++) {
        size_t n = bit_rows[i].rebuild ? few : (size_t)reps;
        if (time_bits(s, bit_rows[i].side, bit_rows[i].rebuild, (int)n, ns) != 0) {
            rc = 1;
            goto out;
        }
        print_row(bit_rows[i].what, ns, n);
    }
    if (!registry_only)
        printf("(each rect update changed %.0f cells on average; versions now at %" PRIu64 ")\n",
               (double)changed / (double)reps, s->version);
out:
    if (rc)
        fprintf(stderr, "pathd-update-bench: out of memory or failed update\n");
    free(ns);
    pd_scene_release(s);
    pd_registry_destroy(r);
    return rc;
}
