/*
 * pathd_journal_bench.c - what the journal (data_dir) costs at start-up:
 * the time to replay N one-cell updates of an N x N scene made at run time,
 * before and after compaction, and what appending costs per update.
 *
 * It runs the scene layer as the daemon does (pd_registry + pd_journal in a
 * temporary directory): CreateScene of a random SIDE x SIDE map (about 20%
 * walls), then UPDATES one-cell updates, each a real change (a random cell
 * toggled between wall and open) appended under the change lock as a
 * worker appends it. Then it times pd_journal_open - the replay at start -
 * into a fresh registry REPS times (median and range), compacts once (timed)
 * and times the replay of the snapshot the same way. Both replays are
 * checked to end on the same version with the same cells. Policy "no", so
 * fsync does not enter the append figure (the replay reads through the page
 * cache either way).
 *
 *   pathd-journal-bench [--side N] [--updates U] [--reps R] [--dir DIR]
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pd_journal.h"

/* Limits, with why. */
#define BENCH_DEFAULT_SIDE 512         /* the example scene */
#define BENCH_DEFAULT_UPDATES 100000   /* the example count */
#define BENCH_DEFAULT_REPS 3           /* a replay of 100k updates takes seconds */
#define BENCH_MAX_REPS 101
#define BENCH_MAX_SIDE 4096

static uint64_t bench_rng = 0x2545F4914F6CDD1Dull;

static uint32_t bench_rand(void)
{
    bench_rng ^= bench_rng << 13;
    bench_rng ^= bench_rng >> 7;
    bench_rng ^= bench_rng << 17;
    return (uint32_t)(bench_rng >> 32);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void die(const char *what, const char *err)
{
    fprintf(stderr, "pathd-journal-bench: %s: %s\n", what, err);
    exit(1);
}

static pd_journal *open_journal(const char *dir, pd_registry *r, pd_journal_replay_stats *st)
{
    pd_journal_opts o = { .dir = dir, .fsync = PD_CONF_FSYNC_NO, .compact_bytes = UINT64_MAX };
    char err[512];
    pd_journal *j = pd_journal_open(&o, r, NULL, st, err, sizeof err);
    if (!j)
        die("open", err);
    return j;
}

/* Replays dir into a fresh registry reps times; prints the median. Leaves
 * the last replay's scene in *out (retained). */
static double time_replay(const char *dir, int reps, const char *label, pd_scene **out)
{
    double ms[BENCH_MAX_REPS];
    pd_journal_replay_stats st = { 0 };
    for (int i = 0; i < reps; i++) {
        pd_registry *r = pd_registry_create();
        double t0 = now_ms();
        pd_journal *j = open_journal(dir, r, &st);
        ms[i] = now_ms() - t0;
        pd_journal_close(j);
        if (i == reps - 1)
            *out = pd_registry_acquire(r, "arena");
        pd_registry_destroy(r);
    }
    qsort(ms, (size_t)reps, sizeof *ms, cmp_double);
    printf("%-28s median %10.1f ms  (min %.1f, max %.1f; %" PRIu64 " records, %" PRIu64 " bytes, %d runs)\n", label,
           ms[reps / 2], ms[0], ms[reps - 1], st.records, st.bytes, reps);
    return ms[reps / 2];
}

int main(int argc, char **argv)
{
    int side = BENCH_DEFAULT_SIDE, updates = BENCH_DEFAULT_UPDATES, reps = BENCH_DEFAULT_REPS;
    char dir[256] = "";
    static const struct option opts[] = {
        { "side", required_argument, NULL, 's' },   { "updates", required_argument, NULL, 'u' },
        { "reps", required_argument, NULL, 'r' },   { "dir", required_argument, NULL, 'd' },
        { NULL, 0, NULL, 0 },
    };
    int ch;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (ch == 's')
            side = atoi(optarg);
        else if (ch == 'u')
            updates = atoi(optarg);
        else if (ch == 'r')
            reps = atoi(optarg);
        else if (ch == 'd')
            snprintf(dir, sizeof dir, "%s/pathd-journal-bench-XXXXXX", optarg);
        else
            return 2;
    }
    if (side < 8 || side > BENCH_MAX_SIDE || updates < 1 || reps < 1 || reps > BENCH_MAX_REPS) {
        fprintf(stderr, "usage: pathd-journal-bench [--side 8..%d] [--updates U>0] [--reps 1..%d] [--dir DIR]\n",
                BENCH_MAX_SIDE, BENCH_MAX_REPS);
        return 2;
    }
    if (!dir[0])
        snprintf(dir, sizeof dir, "/tmp/pathd-journal-bench-XXXXXX");
    if (!mkdtemp(dir))
        die("mkdtemp", dir);

    /* The live side: a run-time scene and its updates, journalled. */
    pd_registry *live = pd_registry_create();
    pd_journal *j = open_journal(dir, live, NULL);
    uint8_t *cells = malloc((size_t)side * (size_t)side);
    for (size_t i = 0; i < (size_t)side * (size_t)side; i++)
        cells[i] = bench_rand() % 100 < 20 ? 0 : 1;
    pd_conf_scene cs = { .name = "arena", .cell_size = 1, .unit_sizes = { 1 }, .n_unit_sizes = 1 };
    char err[256];
    pd_scene *s = pd_scene_from_cells(&cs, side, side, cells, err, sizeof err);
    if (!s)
        die("scene", err);
    free(cells);
    pd_journal_lock(j);
    pd_scene_retain(s);
    if (pd_registry_add(live, s, err, sizeof err) != PD_OK || pd_journal_append_scene(j, s) != 0)
        die("create", err);
    pd_scene_release(s);
    pd_journal_unlock(j);
    double t0 = now_ms();
    for (int i = 0; i < updates; i++) {
        pd_point p = { (int32_t)(bench_rand() % (uint32_t)side), (int32_t)(bench_rand() % (uint32_t)side) };
        pd_scene *cur = pd_registry_acquire(live, "arena");
        pd_scene_update u = { .op = pd_grid_get(cur->grid, p.x, p.y) ? PD_UPDATE_BLOCK : PD_UPDATE_PASS, .cells = &p,
                              .n_cells = 1 };
        pd_scene_release(cur);
        pd_scene_update_result res;
        pd_journal_lock(j);
        if (pd_registry_update(live, "arena", &u, &res) != PD_OK ||
            pd_journal_append_update(j, "arena", res.version, &u, 1) != 0)
            die("update", "failed");
        pd_journal_unlock(j);
    }
    double made = now_ms() - t0;
    uint64_t log_bytes, snap_bytes;
    pd_journal_sizes(j, &log_bytes, &snap_bytes);
    printf("pathd-journal-bench: %dx%d scene, %d one-cell updates, journal in %s\n", side, side, updates, dir);
    printf("%-28s %10.1f ms  (%.1f us per update incl. the registry's copy + repair; log %" PRIu64 " bytes)\n",
           "live updates + appends", made, made * 1e3 / updates, log_bytes);
    pd_journal_close(j);

    pd_scene *before = NULL, *after = NULL;
    double replay_log = time_replay(dir, reps, "replay, log only", &before);

    j = open_journal(dir, live, NULL);
    t0 = now_ms();
    if (pd_journal_compact(j, live, err, sizeof err) != 0)
        die("compact", err);
    double compact = now_ms() - t0;
    pd_journal_sizes(j, &log_bytes, &snap_bytes);
    pd_journal_close(j);
    printf("%-28s %10.1f ms  (snapshot %" PRIu64 " bytes)\n", "compaction", compact, snap_bytes);
    double replay_snap = time_replay(dir, reps, "replay, after compaction", &after);
    printf("%-28s %10.0fx\n", "replay speed-up", replay_log / replay_snap);

    pd_scene *want = pd_registry_acquire(live, "arena");
    int same = before && after && before->version == want->version && after->version == want->version;
    for (int32_t y = 0; same && y < side; y++)
        for (int32_t x = 0; same && x < side; x++)
            same = pd_grid_get(before->grid, x, y) == pd_grid_get(want->grid, x, y) &&
                   pd_grid_get(after->grid, x, y) == pd_grid_get(want->grid, x, y);
    printf("both replays end on version %" PRIu64 " with the live cells: %s\n", want->version, same ? "yes" : "NO");
    pd_scene_release(want);
    pd_scene_release(before);
    pd_scene_release(after);
    pd_registry_destroy(live);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return same ? 0 : 1;
}
