/*
 * pathd_bench.c - runs Moving AI ".map.scen" benchmark files through the pathd
 * search core, checks every answer, and reports time per query.
 *
 * Why it exists: the benchmark files carry the optimal length of every query,
 * so one run proves the search optimal on ~55,000 real game maps and measures
 * its speed the same way the product uses it (one search context per thread,
 * reused across every query and every map).
 *
 * What counts as a pass, per query:
 *  - a path was found (no path is a failure: every scenario is solvable);
 *  - the path starts at the start, ends at the goal, and every step is a legal
 *    move between passable cells (8-connected without corner cutting, or
 *    4-connected with --connect 4);
 *  - the step lengths sum to the cost the search reported (within
 *    PD_BENCH_PATH_SUM_EPS);
 *  - with 8-connectivity, |cost - optimal_length| is within the precision the
 *    scenario file carries plus an allowance for the inexact arithmetic of the
 *    generator that wrote it (see pd__scen_tolerance and docs/BENCHMARKS.md);
 *  - with --check-astar (Jump Point Search only), the cost equals the one A*
 *    finds for the same query, grid and connectivity: the optimality check
 *    for 4-connected runs, whose optimal lengths the files do not carry.
 *
 * Unit sizes (--unit K, issue 4): the run searches the unit grid for a K x K
 * unit built exactly as the daemon builds it (pd_clearance_build, then
 * pd_unit_grid_build). Scenario lengths are for unit 1, so for K > 1 costs
 * are not compared with them. Instead: scenarios whose start or goal is not
 * a legal anchor for the unit (its square leaves the map or covers a blocked
 * cell) are skipped and counted; pairs the bench's own flood fill puts in
 * different components must be answered PD_NO_PATH (counted, not timed);
 * every path is walked on the map itself under the footprint rule (every
 * square passable, a diagonal step only where the square fits at both
 * orthogonal neighbours, a step costing its length times the dearest cell
 * under the square entered); and --check-brute N compares N costs per file
 * with a plain Dijkstra over the unit grid written here.
 *
 * Timing: wall-clock nanoseconds from clock_gettime(CLOCK_MONOTONIC) taken
 * immediately around each search call (pd_search_astar, or pd_search_jps with
 * --algo jps), so map loading, checking and printing are never timed. The
 * search's own metrics.micros is not used (its microsecond resolution is too
 * coarse for short queries).
 *
 * Steady state (--warmup): a context grows its per-cell arrays on a map's
 * first query and touches their pages during the first queries, so those
 * queries pay allocation and page faults a long-running daemon pays once.
 * With --warmup, each map's picked queries first run once untimed and
 * unchecked, through the same search function and context, and only the
 * second run is timed and checked.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pd_clearance.h"
#include "pd_grid.h"
#include "pd_jps.h"
#include "pd_mapfile.h"
#include "pd_search.h"
#include "pd_status.h"

/* Length of a diagonal step (M_SQRT2 is not part of C11). */
#define PD_BENCH_SQRT2 1.41421356237309504880

/* Largest .map or .scen file we read (bytes). The biggest Moving AI file is a
 * few MB; this only stops a wrong argument from eating all memory. */
#define PD_BENCH_MAX_FILE_BYTES (256L * 1024 * 1024)

/* Mismatches described in detail on stderr per scenario file; the rest are
 * only counted, so a broken search does not flood the terminal. */
#define PD_BENCH_MAX_REPORTED_MISMATCHES 10

/* Added to every cost tolerance: absorbs binary floating-point error in both
 * the parsed optimal length and our summed cost. */
#define PD_BENCH_TOL_SLACK 1e-9

/*
 * The scenario generators did not compute lengths exactly, so a correct
 * search can differ from a file by more than its printed precision.
 *
 * 8-decimal files: every length in them is exactly
 * printf("%.8f", straight + diagonal * 1.414213562), a sqrt(2) 3.7e-10 short
 * per diagonal step; on a 1500-long path that is 3e-7, far above the 5e-9 the
 * 8 decimals suggest. A path of length L has at most L / sqrt(2) diagonal
 * steps, so the allowance is L * (1 - PD_BENCH_SCEN_GENERATOR_SQRT2 / sqrt(2)).
 */
#define PD_BENCH_SCEN_GENERATOR_SQRT2 1.414213562

/*
 * 6-significant-digit ("%g") files: where the exact length lies just above a
 * rounding midpoint, the generator's slightly inexact sum sometimes fell just
 * below it and was rounded the other way (113 of 20,171 queries; the largest
 * such excess over half a unit is 1.3e-8 of the length). We allow half the
 * single-precision epsilon, 2^-24, relative to the length: four times the
 * largest excess seen, and never more than an eighth of the printed
 * precision (half a unit in the 6th digit is at least 5e-7 of the length).
 */
#define PD_BENCH_SCEN_G_GENERATOR_REL 5.9604644775390625e-8

/* How far the sum of a path's step lengths may drift from the cost the search
 * reported: summation order differs, nothing else may. */
#define PD_BENCH_PATH_SUM_EPS 1e-6

/* Older Moving AI releases print lengths with printf("%g"): six significant
 * digits, trailing zeros dropped ("7" means 7.00000). */
#define PD_BENCH_G_SIGNIFICANT_DIGITS 6

/* Upper bounds for --every, --last and --reps: far beyond any useful run, low
 * enough that time and memory arithmetic cannot overflow. */
#define PD_BENCH_MAX_OPTION_VALUE 100000000L
#define PD_BENCH_MAX_REPS 10000L

/* Relative agreement required between a path's cost and --check-brute's
 * Dijkstra: both sum the same step costs, in different orders. */
#define PD_BENCH_BRUTE_REL_EPS 1e-9

/* Longest map name (basename) we keep. */
#define PD_BENCH_MAX_NAME 256

#define PD_BENCH_EXIT_OK 0
#define PD_BENCH_EXIT_FAILED 1
#define PD_BENCH_EXIT_USAGE 2

typedef struct pd_bench_options {
    long every;             /* run every k-th selected query */
    long last;              /* 0 = all; else only the last n queries of each file */
    long reps;              /* runs per query; its time is the median of these */
    pd_connectivity connect;
    int json;
    int quiet;
    const char *maps_dir;   /* NULL = look next to the scen file, then ../maps */
    long threads;           /* > 0: also measure throughput with this many threads */
    uint32_t unit;          /* unit size in cells (1..PD_UNIT_SIZE_MAX) */
    long check_brute;       /* per file: this many costs checked against Dijkstra */
    int jps;                /* --algo jps: Jump Point Search instead of A* */
    int check_astar;        /* --check-astar: every cost compared with A*'s */
    int warmup;             /* run each map's picked queries once untimed first */
} pd_bench_options;

static const pd_bench_options pd__default_options = {
    .every = 1,
    .last = 0,
    .reps = 1,
    .connect = PD_CONNECT_8,
    .json = 0,
    .quiet = 0,
    .maps_dir = NULL,
    .threads = 0,
    .unit = 1,
    .check_brute = 0,
    .jps = 0,
    .check_astar = 0,
    .warmup = 0,
};

/* Most threads --threads accepts: far more than the cores of any machine we
 * run on; each thread holds a search context as large as the map. */
#define PD_BENCH_MAX_THREADS 256

/* One line of a scenario file. */
typedef struct pd_bench_query {
    int line;                      /* 1-based line in the scen file */
    char map[PD_BENCH_MAX_NAME];   /* basename of the map column */
    int32_t map_width, map_height;
    pd_point start, goal;
    double optimal;
    double tolerance;              /* allowed |cost - optimal| */
    int printed_decimals_unit;     /* exponent of the last printed digit */
    int leading_digit_exp;         /* exponent of the first non-zero digit */
    int significant_digits;        /* digits printed, leading zeros excluded */
    int is_zero;
} pd_bench_query;

/* Results gathered per map (a map named by several scen files is merged). */
typedef struct pd_bench_map_stats {
    char name[PD_BENCH_MAX_NAME];  /* basename without ".map" */
    size_t queries;
    size_t mismatches;
    double *micros;                /* per-query median time, µs */
    size_t micros_cap;
    double expanded_sum;
    double generated_sum;
} pd_bench_map_stats;

typedef struct pd_bench_run {
    pd_bench_options opt;
    pd_search_ctx *ctx;
    pd_jps_ctx *jps_ctx;           /* --algo jps only, else NULL */
    pd_point *path;
    size_t path_cap;
    uint64_t *rep_nanos;           /* scratch: one slot per rep */
    pd_bench_map_stats *maps;
    size_t map_count, map_cap;
    size_t passed, failed;
    size_t footprint_after_first;  /* context bytes after the first search (warm-up or timed) */
    int have_footprint;
    size_t skipped_anchor;         /* --unit: start or goal not a legal anchor */
    size_t unreachable;            /* --unit: endpoints in different components */
    size_t brute_checked;          /* costs compared with the bench's Dijkstra */
    size_t astar_checked;          /* --check-astar: costs compared with A*'s */
} pd_bench_run;

static void pd__usage(FILE *out, const char *argv0)
{
    fprintf(out,
            "usage: %s [options] FILE.map.scen...\n"
            "\n"
            "Runs Moving AI scenario files (version 1) through the pathd A* core,\n"
            "checks every path against the file's optimal length, and prints per map:\n"
            "queries, mismatches, median and mean microseconds per query, mean\n"
            "expansions; then \"N passed, N failed\". Exit status: 0 all passed,\n"
            "1 some query failed, 2 bad usage or unreadable input.\n"
            "\n"
            "Each scenario's map (its map column, by basename) is looked up under\n"
            "--maps DIR if given, then next to the scen file, then in ../maps\n"
            "relative to the scen file's directory.\n"
            "\n"
            "options (they apply to every file and may come anywhere; -- ends them):\n"
            "  --every K      run only every K-th query of each file (the 1st, K+1-th, ...)\n"
            "  --last N       run only the last N queries of each file (the longest ones);\n"
            "                 with --every, every K-th of those\n"
            "  --threads N    after checking, also run the selected queries of each file\n"
            "                 spread over N threads (one search context each) and print\n"
            "                 the throughput in queries/s: the in-process ceiling that\n"
            "                 pathd-load's end-to-end figure is compared with\n"
            "  --reps R       run each query R times; a query's time is the median of\n"
            "                 its runs, a map's median is the median of those (default 1)\n"
            "  --connect 4|8  connectivity (default 8). Scenario lengths are 8-connected,\n"
            "                 so with 4 the cost check is skipped; paths are still checked\n"
            "  --unit K       search for a K x K unit (1..%d, default 1) on the unit grid\n"
            "                 the daemon would build; scenarios whose start or goal the\n"
            "                 unit cannot stand on are skipped (and counted), pairs not\n"
            "                 connected for the unit must give no path (counted, not\n"
            "                 timed). For K > 1 scenario lengths do not apply, so costs\n"
            "                 are not compared with them; paths are checked step by step\n"
            "                 under the footprint rule\n"
            "  --algo astar|jps  search with A* (default) or Jump Point Search (uniform-cost\n"
            "                 grids, 8- or 4-connected; the same checks apply)\n"
            "  --check-astar  with --algo jps: also compare every timed query's cost with\n"
            "                 A*'s on the same grid and connectivity (untimed): the cost\n"
            "                 check for --connect 4, where scenario lengths do not apply\n"
            "  --warmup       before timing a map's queries, run the same selected\n"
            "                 queries once untimed and unchecked (same search function,\n"
            "                 same context), so the timed run is in steady state: the\n"
            "                 context grown and its pages touched, as in a long-running\n"
            "                 daemon. Counts and checks cover the timed run only\n"
            "  --check-brute N  also compare the cost of the first N timed queries of\n"
            "                 each file with a plain Dijkstra over the (unit) grid\n"
            "  --maps DIR     directory holding the .map files\n"
            "  --json         print machine-readable results on stdout (the closing\n"
            "                 \"N passed, N failed\" line then goes to stderr)\n"
            "  --quiet        print only the closing line (and errors); --json overrides\n"
            "  --help         show this text\n"
            "\n"
            "Time is wall clock (CLOCK_MONOTONIC) around each search call only.\n",
            argv0, PD_UNIT_SIZE_MAX);
}

static void pd__die_usage(const char *argv0, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "pathd-bench: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(run %s --help for usage)\n", argv0);
    exit(PD_BENCH_EXIT_USAGE);
}

/* Input the run cannot continue without (unreadable file, malformed line):
 * report and stop with the usage exit status. */
static void pd__die_input(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "pathd-bench: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(PD_BENCH_EXIT_USAGE);
}

static void *pd__xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        fprintf(stderr, "pathd-bench: out of memory (%zu bytes)\n", n);
        exit(PD_BENCH_EXIT_USAGE);
    }
    return q;
}

static long pd__parse_count(const char *argv0, const char *flag, const char *text, long max)
{
    char *end = NULL;
    errno = 0;
    long v = text ? strtol(text, &end, 10) : 0;
    if (!text || errno || end == text || *end != '\0' || v < 1 || v > max)
        pd__die_usage(argv0, "%s needs a whole number from 1 to %ld, got '%s'", flag, max,
                      text ? text : "(nothing)");
    return v;
}

/* Reads a whole file into a NUL-terminated buffer. */
static char *pd__read_file(const char *path, size_t *len_out)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (cap - len < 65536) {
            cap = cap ? cap * 2 : 65536 * 2;
            if (cap > (size_t)PD_BENCH_MAX_FILE_BYTES + 1) {
                free(buf);
                fclose(f);
                errno = EFBIG;
                return NULL;
            }
            buf = pd__xrealloc(buf, cap);
        }
        size_t got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0)
            break;
    }
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        free(buf);
        errno = EIO;
        return NULL;
    }
    buf[len] = '\0';
    *len_out = len;
    return buf;
}

static const char *pd__basename(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Directory part of path ("." when there is none), in a caller buffer. */
static void pd__dirname(const char *path, char *out, size_t cap)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(out, cap, ".");
    else if (slash == path)
        snprintf(out, cap, "/");
    else
        snprintf(out, cap, "%.*s", (int)(slash - path), path);
}

/*
 * Reads the printed form of an optimal length and records what its precision
 * is: the exponent of its last printed digit, of its leading digit, and how
 * many significant digits it shows. Returns 0 when the text is not a plain
 * decimal number (optionally with an exponent).
 */
static int pd__scan_length_text(const char *text, pd_bench_query *q)
{
    const char *p = text;
    int int_digits = 0, frac_digits = 0, sig = 0, lead_exp = INT_MIN;
    int seen_nonzero = 0, exponent = 0;

    if (*p == '+')
        p++;
    for (; *p >= '0' && *p <= '9'; p++) {
        int_digits++;
        if (*p != '0' && !seen_nonzero)
            seen_nonzero = 1;
        if (seen_nonzero)
            sig++;
    }
    /* The leading digit's exponent within the integer part. */
    if (sig > 0)
        lead_exp = sig - 1;
    if (*p == '.') {
        p++;
        for (; *p >= '0' && *p <= '9'; p++) {
            frac_digits++;
            if (*p != '0' && !seen_nonzero) {
                seen_nonzero = 1;
                lead_exp = -frac_digits;
            }
            if (seen_nonzero)
                sig++;
        }
    }
    if (int_digits + frac_digits == 0)
        return 0;
    if (*p == 'e' || *p == 'E') {
        char *end = NULL;
        errno = 0;
        long e = strtol(p + 1, &end, 10);
        if (errno || end == p + 1 || e < -300 || e > 300)
            return 0;
        exponent = (int)e;
        p = end;
    }
    if (*p != '\0')
        return 0;
    q->printed_decimals_unit = exponent - frac_digits;
    q->significant_digits = sig;
    q->is_zero = !seen_nonzero;
    q->leading_digit_exp = seen_nonzero ? lead_exp + exponent : 0;
    return 1;
}

/*
 * Sets each query's cost tolerance from how its file prints lengths.
 *
 * A length printed with D decimals is exact to half a unit in its last digit.
 * Files written with "%g" (the older 6-significant-digit release) drop
 * trailing zeros, so there the printed text understates the precision: "7"
 * stands for 7.00000, exact to half a unit in the 6th significant digit. A
 * file is taken to be such a file when no length in it shows more than six
 * significant digits and at least one shows exactly six; for it the
 * tolerance is the smaller of the two rules, which is never looser than the
 * plain "last printed digit" rule.
 *
 * On top of the printing precision comes an allowance for the generator's own
 * arithmetic (PD_BENCH_SCEN_GENERATOR_SQRT2, PD_BENCH_SCEN_G_GENERATOR_REL)
 * and PD_BENCH_TOL_SLACK.
 */
static void pd__scen_tolerance(pd_bench_query *qs, size_t n)
{
    int max_sig = 0;
    for (size_t i = 0; i < n; i++)
        if (qs[i].significant_digits > max_sig)
            max_sig = qs[i].significant_digits;
    int g_style = max_sig == PD_BENCH_G_SIGNIFICANT_DIGITS;

    for (size_t i = 0; i < n; i++) {
        pd_bench_query *q = &qs[i];
        double tol = 0.5 * pow(10.0, q->printed_decimals_unit);
        double generator;
        if (g_style) {
            /* "%g" prints zero as "0", exactly. */
            double g_tol = q->is_zero
                ? 0.0
                : 0.5 * pow(10.0, q->leading_digit_exp - (PD_BENCH_G_SIGNIFICANT_DIGITS - 1));
            if (g_tol < tol)
                tol = g_tol;
            generator = q->optimal * PD_BENCH_SCEN_G_GENERATOR_REL;
        } else {
            generator = q->optimal * (1.0 - PD_BENCH_SCEN_GENERATOR_SQRT2 / PD_BENCH_SQRT2);
        }
        q->tolerance = tol + generator + PD_BENCH_TOL_SLACK;
    }
}

/* Splits the next whitespace-separated field off *cursor (modifies the line). */
static char *pd__next_field(char **cursor)
{
    char *p = *cursor;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p == '\0')
        return NULL;
    char *start = p;
    while (*p && *p != ' ' && *p != '\t')
        p++;
    if (*p)
        *p++ = '\0';
    *cursor = p;
    return start;
}

static int pd__parse_int32(const char *text, int32_t *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end != '\0' || v < INT32_MIN || v > INT32_MAX)
        return 0;
    *out = (int32_t)v;
    return 1;
}

/*
 * Parses a version-1 scenario file. Blank lines are skipped; any other line
 * must have the nine fields. Returns the queries (caller frees) or exits with
 * a message naming the file, line and problem.
 */
static pd_bench_query *pd__parse_scen(const char *path, size_t *count_out)
{
    size_t len = 0;
    char *buf = pd__read_file(path, &len);
    if (!buf)
        pd__die_input("cannot read scenario file %s: %s", path, strerror(errno));

    pd_bench_query *qs = NULL;
    size_t n = 0, cap = 0;
    int line_no = 0, have_version = 0;
    char *line = buf;
    while (line && *line) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        line_no++;
        size_t l = strlen(line);
        if (l && line[l - 1] == '\r')
            line[--l] = '\0';

        char *cursor = line;
        char *fields[10];
        int nf = 0;
        char *f;
        while (nf < 10 && (f = pd__next_field(&cursor)) != NULL)
            fields[nf++] = f;

        if (nf == 0) {
            /* blank line */
        } else if (!have_version) {
            if (nf != 2 || strcmp(fields[0], "version") != 0 ||
                (strcmp(fields[1], "1") != 0 && strcmp(fields[1], "1.0") != 0))
                pd__die_input("%s:%d: expected 'version 1' as the first line", path, line_no);
            have_version = 1;
        } else {
            if (nf != 9)
                pd__die_input("%s:%d: expected 9 fields (bucket map width height "
                              "start_x start_y goal_x goal_y optimal_length), got %d%s",
                              path, line_no, nf, nf == 10 ? " or more" : "");
            if (n == cap) {
                cap = cap ? cap * 2 : 1024;
                qs = pd__xrealloc(qs, cap * sizeof *qs);
            }
            pd_bench_query *q = &qs[n];
            memset(q, 0, sizeof *q);
            q->line = line_no;
            const char *base = pd__basename(fields[1]);
            if (strlen(base) == 0 || strlen(base) >= PD_BENCH_MAX_NAME)
                pd__die_input("%s:%d: map name '%s' is empty or too long", path, line_no,
                              fields[1]);
            snprintf(q->map, sizeof q->map, "%s", base);
            int32_t bucket;
            if (!pd__parse_int32(fields[0], &bucket) ||
                !pd__parse_int32(fields[2], &q->map_width) ||
                !pd__parse_int32(fields[3], &q->map_height) ||
                !pd__parse_int32(fields[4], &q->start.x) ||
                !pd__parse_int32(fields[5], &q->start.y) ||
                !pd__parse_int32(fields[6], &q->goal.x) ||
                !pd__parse_int32(fields[7], &q->goal.y))
                pd__die_input("%s:%d: bucket, width, height and coordinates must be integers",
                              path, line_no);
            if (q->map_width < 1 || q->map_height < 1 ||
                q->start.x < 0 || q->start.x >= q->map_width ||
                q->start.y < 0 || q->start.y >= q->map_height ||
                q->goal.x < 0 || q->goal.x >= q->map_width ||
                q->goal.y < 0 || q->goal.y >= q->map_height)
                pd__die_input("%s:%d: start or goal lies outside the %dx%d map", path, line_no,
                              (int)q->map_width, (int)q->map_height);
            char *end = NULL;
            errno = 0;
            q->optimal = strtod(fields[8], &end);
            if (errno || end == fields[8] || *end != '\0' || !isfinite(q->optimal) ||
                q->optimal < 0 || !pd__scan_length_text(fields[8], q))
                pd__die_input("%s:%d: optimal_length '%s' is not a non-negative decimal number",
                              path, line_no, fields[8]);
            n++;
        }
        line = nl ? nl + 1 : NULL;
    }
    free(buf);
    if (!have_version)
        pd__die_input("%s: empty file (expected 'version 1')", path);
    pd__scen_tolerance(qs, n);
    *count_out = n;
    return qs;
}

/* Finds and parses the map for a query; exits with the paths tried if none. */
static pd_grid *pd__load_map(const pd_bench_options *opt, const char *scen_path,
                             const char *map_name)
{
    char dir[4096], tried[3][4096 + PD_BENCH_MAX_NAME + 16];
    int n_tried = 0;
    pd__dirname(scen_path, dir, sizeof dir);
    if (opt->maps_dir)
        snprintf(tried[n_tried++], sizeof tried[0], "%s/%s", opt->maps_dir, map_name);
    snprintf(tried[n_tried++], sizeof tried[0], "%s/%s", dir, map_name);
    snprintf(tried[n_tried++], sizeof tried[0], "%s/../maps/%s", dir, map_name);

    for (int i = 0; i < n_tried; i++) {
        size_t len = 0;
        char *buf = pd__read_file(tried[i], &len);
        if (!buf) {
            if (errno == ENOENT)
                continue;
            pd__die_input("cannot read map %s: %s", tried[i], strerror(errno));
        }
        pd_parse_error err;
        memset(&err, 0, sizeof err);
        pd_grid *g = pd_map_parse_movingai(buf, len, &err);
        free(buf);
        if (!g)
            pd__die_input("%s:%d:%d: %s", tried[i], err.line, err.column, err.message);
        return g;
    }
    fprintf(stderr, "pathd-bench: map %s (for %s) not found; looked in:\n", map_name, scen_path);
    for (int i = 0; i < n_tried; i++)
        fprintf(stderr, "  %s\n", tried[i]);
    exit(PD_BENCH_EXIT_USAGE);
}

static pd_bench_map_stats *pd__map_stats(pd_bench_run *run, const char *map_file)
{
    char name[PD_BENCH_MAX_NAME];
    snprintf(name, sizeof name, "%s", map_file);
    size_t l = strlen(name);
    if (l > 4 && strcmp(name + l - 4, ".map") == 0)
        name[l - 4] = '\0';
    for (size_t i = 0; i < run->map_count; i++)
        if (strcmp(run->maps[i].name, name) == 0)
            return &run->maps[i];
    if (run->map_count == run->map_cap) {
        run->map_cap = run->map_cap ? run->map_cap * 2 : 32;
        run->maps = pd__xrealloc(run->maps, run->map_cap * sizeof *run->maps);
    }
    pd_bench_map_stats *m = &run->maps[run->map_count++];
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    return m;
}

static void pd__stats_add_time(pd_bench_map_stats *m, double micros)
{
    if (m->queries == m->micros_cap) {
        m->micros_cap = m->micros_cap ? m->micros_cap * 2 : 1024;
        m->micros = pd__xrealloc(m->micros, m->micros_cap * sizeof *m->micros);
    }
    m->micros[m->queries] = micros;
}

static int pd__cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static int pd__cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of v[0..n) (sorts v); 0 for an empty set. */
static double pd__median(double *v, size_t n)
{
    if (n == 0)
        return 0.0;
    qsort(v, n, sizeof *v, pd__cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double pd__mean(const double *v, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += v[i];
    return n ? s / (double)n : 0.0;
}

/* 1 when a unit of size `unit` fits at anchor (x, y) of the map: its whole
 * square lies on the map and on passable cells. Unit 1: the cell is open. */
static int pd__unit_fits(const pd_grid *g, uint32_t unit, int32_t x, int32_t y)
{
    for (int32_t dy = 0; dy < (int32_t)unit; dy++)
        for (int32_t dx = 0; dx < (int32_t)unit; dx++)
            if (pd_grid_get(g, x + dx, y + dy) == PD_CELL_BLOCKED)
                return 0;
    return 1;
}

/* The cost of entering anchor (x, y): the dearest cell under the square. */
static double pd__unit_cost(const pd_grid *g, uint32_t unit, int32_t x, int32_t y)
{
    uint8_t most = 0;
    for (int32_t dy = 0; dy < (int32_t)unit; dy++)
        for (int32_t dx = 0; dx < (int32_t)unit; dx++)
            if (pd_grid_get(g, x + dx, y + dy) > most)
                most = pd_grid_get(g, x + dx, y + dy);
    return (double)most;
}

/*
 * Checks a path cell by cell under the search's rules, on the map itself
 * (never on the unit grid the search used): every waypoint is an anchor the
 * unit fits on, every step goes to a neighbour, a diagonal step needs the
 * unit to fit at both orthogonal neighbours (no corner cutting, for the
 * whole square), and a step costs its length times the dearest cell under
 * the square it enters. Unit 1 is the plain Moving AI rule set. Returns NULL
 * when it is a legal path from start to goal whose step costs sum to
 * reported_cost, else a reason; *summed receives the summed step cost.
 */
static const char *pd__check_path(const pd_grid *g, uint32_t unit, pd_connectivity connect,
                                  pd_point start, pd_point goal,
                                  const pd_point *path, size_t n,
                                  double reported_cost, double *summed)
{
    *summed = 0.0;
    if (n == 0)
        return "empty path";
    if (path[0].x != start.x || path[0].y != start.y)
        return "path does not begin at the start";
    if (path[n - 1].x != goal.x || path[n - 1].y != goal.y)
        return "path does not end at the goal";
    for (size_t i = 0; i < n; i++)
        if (!pd__unit_fits(g, unit, path[i].x, path[i].y))
            return unit == 1 ? "path visits a blocked or out-of-bounds cell"
                             : "path puts the unit's square on a blocked or out-of-bounds cell";

    double sum = 0.0;
    for (size_t i = 1; i < n; i++) {
        int32_t dx = path[i].x - path[i - 1].x, dy = path[i].y - path[i - 1].y;
        if (dx < -1 || dx > 1 || dy < -1 || dy > 1 || (dx == 0 && dy == 0))
            return "path has a step that is not to a neighbouring cell";
        double len = 1.0;
        if (dx != 0 && dy != 0) {
            if (connect == PD_CONNECT_4)
                return "path has a diagonal step in 4-connected mode";
            /* No corner cutting: the unit fits at both orthogonal neighbours. */
            if (!pd__unit_fits(g, unit, path[i - 1].x + dx, path[i - 1].y) ||
                !pd__unit_fits(g, unit, path[i - 1].x, path[i - 1].y + dy))
                return "path cuts a corner";
            len = PD_BENCH_SQRT2;
        }
        sum += len * pd__unit_cost(g, unit, path[i].x, path[i].y);
    }
    *summed = sum;
    if (fabs(sum - reported_cost) > PD_BENCH_PATH_SUM_EPS)
        return "step lengths do not add up to the reported cost";
    return NULL;
}

/*
 * Component labels of a (unit) grid by flood fill: 8-connected moves
 * without corner cutting connect exactly what 4-connected moves connect, so
 * 4-neighbour flooding is enough. labels[y * width + x] is 0 on blocked
 * cells. The caller frees the result.
 */
static uint32_t *pd__flood_labels(const pd_grid *g)
{
    size_t n = (size_t)g->width * (size_t)g->height;
    uint32_t *labels = pd__xrealloc(NULL, n * sizeof *labels);
    uint32_t *stack = pd__xrealloc(NULL, n * sizeof *stack);
    memset(labels, 0, n * sizeof *labels);
    uint32_t next = 0;
    for (size_t seed = 0; seed < n; seed++) {
        int32_t sx = (int32_t)(seed % (size_t)g->width), sy = (int32_t)(seed / (size_t)g->width);
        if (labels[seed] || pd_grid_get(g, sx, sy) == PD_CELL_BLOCKED)
            continue;
        labels[seed] = ++next;
        size_t top = 0;
        stack[top++] = (uint32_t)seed;
        while (top > 0) {
            uint32_t v = stack[--top];
            int32_t x = (int32_t)(v % (uint32_t)g->width), y = (int32_t)(v / (uint32_t)g->width);
            static const int32_t d4[4][2] = {{1, 0}, {-1, 0}, {0, 1}, {0, -1}};
            for (int k = 0; k < 4; k++) {
                int32_t nx = x + d4[k][0], ny = y + d4[k][1];
                if (pd_grid_get(g, nx, ny) == PD_CELL_BLOCKED)
                    continue;
                size_t j = (size_t)ny * (size_t)g->width + (size_t)nx;
                if (!labels[j]) {
                    labels[j] = next;
                    stack[top++] = (uint32_t)j;
                }
            }
        }
    }
    free(stack);
    return labels;
}

/* A binary min-heap of (distance, cell) for the brute-force Dijkstra. */
typedef struct pd_bench_heap_item {
    double d;
    uint32_t v;
} pd_bench_heap_item;

/*
 * The optimal cost from start to goal on g by plain Dijkstra (lazy deletion,
 * a binary heap, nothing shared with pd_search): 8-connected without corner
 * cutting or 4-connected, a step costing its length times the cost byte of
 * the cell entered. -1 when the goal is unreachable.
 */
static double pd__dijkstra(const pd_grid *g, pd_connectivity connect, pd_point start, pd_point goal)
{
    size_t n = (size_t)g->width * (size_t)g->height;
    double *dist = pd__xrealloc(NULL, n * sizeof *dist);
    for (size_t i = 0; i < n; i++)
        dist[i] = INFINITY;
    /* Lazy deletion pushes each cell at most once per neighbour: 8n. */
    pd_bench_heap_item *heap = pd__xrealloc(NULL, (8 * n + 1) * sizeof *heap);
    size_t size = 0;
    double result = -1.0;
    size_t s = (size_t)start.y * (size_t)g->width + (size_t)start.x;
    dist[s] = 0.0;
    heap[size++] = (pd_bench_heap_item){0.0, (uint32_t)s};
    static const int32_t d8[8][2] = {{1, 0}, {-1, 0}, {0, 1}, {0, -1}, {1, 1}, {1, -1}, {-1, 1}, {-1, -1}};
    while (size > 0) {
        pd_bench_heap_item top = heap[0];
        heap[0] = heap[--size];
        for (size_t i = 0;;) {
            size_t l = 2 * i + 1, r = l + 1, m = i;
            if (l < size && heap[l].d < heap[m].d)
                m = l;
            if (r < size && heap[r].d < heap[m].d)
                m = r;
            if (m == i)
                break;
            pd_bench_heap_item t = heap[i];
            heap[i] = heap[m];
            heap[m] = t;
            i = m;
        }
        if (top.d > dist[top.v])
            continue;
        int32_t x = (int32_t)(top.v % (uint32_t)g->width), y = (int32_t)(top.v / (uint32_t)g->width);
        if (x == goal.x && y == goal.y) {
            result = top.d;
            break;
        }
        for (int k = 0; k < (connect == PD_CONNECT_4 ? 4 : 8); k++) {
            int32_t nx = x + d8[k][0], ny = y + d8[k][1];
            uint8_t c = pd_grid_get(g, nx, ny);
            if (c == PD_CELL_BLOCKED)
                continue;
            double len = 1.0;
            if (k >= 4) {
                if (pd_grid_get(g, nx, y) == PD_CELL_BLOCKED || pd_grid_get(g, x, ny) == PD_CELL_BLOCKED)
                    continue;
                len = PD_BENCH_SQRT2;
            }
            size_t j = (size_t)ny * (size_t)g->width + (size_t)nx;
            double nd = top.d + len * (double)c;
            if (nd < dist[j]) {
                dist[j] = nd;
                size_t i = size++;
                heap[i] = (pd_bench_heap_item){nd, (uint32_t)j};
                while (i > 0 && heap[(i - 1) / 2].d > heap[i].d) {
                    pd_bench_heap_item t = heap[i];
                    heap[i] = heap[(i - 1) / 2];
                    heap[(i - 1) / 2] = t;
                    i = (i - 1) / 2;
                }
            }
        }
    }
    free(heap);
    free(dist);
    return result;
}

static uint64_t pd__now_nanos(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Ensures the path buffer can hold need points. */
static void pd__reserve_path(pd_bench_run *run, size_t need)
{
    if (need <= run->path_cap)
        return;
    run->path = pd__xrealloc(run->path, need * sizeof *run->path);
    run->path_cap = need;
}

/* The search --algo chose: Jump Point Search when jps is non-NULL, else A*. */
static pd_status pd__search(pd_search_ctx *ctx, pd_jps_ctx *jps, const pd_grid *g,
                            const pd_search_params *p, pd_point *out, size_t cap,
                            pd_search_metrics *m)
{
    return jps ? pd_search_jps(jps, g, p, out, cap, m) : pd_search_astar(ctx, g, p, out, cap, m);
}

static size_t pd__footprint(const pd_bench_run *run)
{
    return run->jps_ctx ? pd_jps_ctx_footprint(run->jps_ctx) : pd_search_ctx_footprint(run->ctx);
}

static const char *pd__algo_function(const pd_bench_run *run)
{
    return run->opt.jps ? "pd_search_jps" : "pd_search_astar";
}

/* --check-astar: NULL when A* finds a path of the same cost (within
 * PD_BENCH_BRUTE_REL_EPS, relative: both sum the same step costs in
 * different orders), else the reason. Untimed. */
static const char *pd__check_astar(pd_bench_run *run, const pd_grid *sg, const pd_search_params *params,
                                   double cost)
{
    pd_search_metrics am;
    memset(&am, 0, sizeof am);
    run->astar_checked++;
    if (pd_search_astar(run->ctx, sg, params, NULL, 0, &am) != PD_OK)
        return "A* finds no path";
    if (fabs(am.cost - cost) > PD_BENCH_BRUTE_REL_EPS * (am.cost > 1 ? am.cost : 1))
        return "cost differs from A*'s";
    return NULL;
}

/*
 * Runs one query opt.reps times on the search grid sg (the map, or the unit
 * grid for --unit K) and checks the first answer on the map itself (and that
 * every repetition gives the same status and cost). Returns NULL on a pass or
 * the reason for the failure; *metrics_out describes the first run.
 */
static const char *pd__run_query(pd_bench_run *run, const pd_grid *sg, const pd_grid *g,
                                 const pd_bench_query *q,
                                 double *micros_out, pd_search_metrics *metrics_out,
                                 pd_status *status_out)
{
    pd_search_params params;
    memset(&params, 0, sizeof params);
    params.start = q->start;
    params.goal = q->goal;
    params.connectivity = run->opt.connect;

    const char *reason = NULL;
    pd_search_metrics first;
    pd_status first_status = PD_OK;
    memset(&first, 0, sizeof first);

    for (long r = 0; r < run->opt.reps; r++) {
        pd_search_metrics m;
        memset(&m, 0, sizeof m);
        uint64_t t0 = pd__now_nanos();
        pd_status st = pd__search(run->ctx, run->jps_ctx, sg, &params, run->path, run->path_cap, &m);
        uint64_t t1 = pd__now_nanos();
        run->rep_nanos[r] = t1 - t0;

        if (st == PD_BUFFER_TOO_SMALL) {
            /* Our buffer is sized to the map, so this should not happen; if it
             * does, the search told us the length: fetch the path untimed. */
            pd__reserve_path(run, m.path_len);
            size_t len = 0;
            st = run->jps_ctx ? pd_jps_extract(run->jps_ctx, run->path, run->path_cap, &len)
                              : pd_search_extract(run->ctx, run->path, run->path_cap, &len);
            m.path_len = len;
        }
        if (r == 0) {
            first = m;
            first_status = st;
            if (st != PD_OK) {
                reason = st == PD_NO_PATH ? "no path found" : "search failed";
            } else {
                double summed = 0.0;
                reason = pd__check_path(g, run->opt.unit, run->opt.connect, q->start, q->goal,
                                        run->path, m.path_len, m.cost, &summed);
                /* Scenario lengths are 8-connected lengths for unit 1. */
                if (!reason && run->opt.connect == PD_CONNECT_8 && run->opt.unit == 1 &&
                    !(fabs(m.cost - q->optimal) <= q->tolerance))
                    reason = "cost differs from the optimal length";
                if (!reason && run->opt.check_astar)
                    reason = pd__check_astar(run, sg, &params, m.cost);
            }
        } else if (!reason && (st != first_status || m.cost != first.cost)) {
            reason = "repeated run gave a different answer";
        }
        if (!run->have_footprint) {
            run->footprint_after_first = pd__footprint(run);
            run->have_footprint = 1;
        }
    }
    qsort(run->rep_nanos, (size_t)run->opt.reps, sizeof *run->rep_nanos, pd__cmp_u64);
    size_t n = (size_t)run->opt.reps;
    double med = n % 2 ? (double)run->rep_nanos[n / 2]
                       : 0.5 * ((double)run->rep_nanos[n / 2 - 1] + (double)run->rep_nanos[n / 2]);
    *micros_out = med / 1000.0;
    *metrics_out = first;
    *status_out = first_status;
    return reason;
}

typedef struct pd_bench_worker {
    const pd_grid *grid;
    const pd_bench_query *qs;
    const size_t *picked;          /* indices into qs */
    size_t n_picked;
    size_t first, stride;          /* this thread's share: first, first+stride, ... */
    pd_connectivity connect;
    size_t failed;                 /* searches that did not return PD_OK */
    int jps;                       /* --algo jps */
} pd_bench_worker;

static void *pd__throughput_thread(void *arg)
{
    pd_bench_worker *w = arg;
    pd_search_ctx *ctx = pd_search_ctx_create();
    pd_jps_ctx *jps = w->jps ? pd_jps_ctx_create() : NULL;
    if (!ctx || (w->jps && !jps)) {
        pd_search_ctx_destroy(ctx);
        w->failed = w->n_picked;
        return NULL;
    }
    for (size_t i = w->first; i < w->n_picked; i += w->stride) {
        const pd_bench_query *q = &w->qs[w->picked[i]];
        pd_search_params p = { .start = q->start, .goal = q->goal, .connectivity = w->connect };
        pd_search_metrics m;
        /* Cost only: the daemon copies the path out too, but that is per
         * waypoint work the network side also pays; the search dominates. */
        if (pd__search(ctx, jps, w->grid, &p, NULL, 0, &m) != PD_OK)
            w->failed++;
    }
    pd_search_ctx_destroy(ctx);
    pd_jps_ctx_destroy(jps);
    return NULL;
}

/* Runs the picked queries over opt.threads threads and prints queries/s. */
static void pd__run_throughput(const pd_bench_run *run, const char *scen_path, const pd_grid *grid,
                               const pd_bench_query *qs, const size_t *picked, size_t n_picked)
{
    size_t nt = (size_t)run->opt.threads;
    pd_bench_worker *ws = pd__xrealloc(NULL, nt * sizeof *ws);
    pthread_t *tids = pd__xrealloc(NULL, nt * sizeof *tids);
    uint64_t t0 = pd__now_nanos();
    for (size_t t = 0; t < nt; t++) {
        ws[t] = (pd_bench_worker){ grid, qs, picked, n_picked, t, nt, run->opt.connect, 0, run->opt.jps };
        if (pthread_create(&tids[t], NULL, pd__throughput_thread, &ws[t]) != 0)
            pd__die_input("cannot start a thread");
    }
    size_t failed = 0;
    for (size_t t = 0; t < nt; t++) {
        pthread_join(tids[t], NULL);
        failed += ws[t].failed;
    }
    double secs = (double)(pd__now_nanos() - t0) / 1e9;
    fprintf(run->opt.json ? stderr : stdout,
            "# throughput %s: %zu queries on %zu threads in %.3f s = %.1f queries/s%s\n",
            pd__basename(scen_path), n_picked, nt, secs, secs > 0 ? (double)n_picked / secs : 0.0,
            failed ? " (SOME FAILED)" : "");
    free(ws);
    free(tids);
}

/* Prints a failed query (up to PD_BENCH_MAX_REPORTED_MISMATCHES per file). */
static void pd__report_mismatch(const pd_bench_run *run, const char *scen_path, const pd_bench_query *q,
                                const char *reason, pd_status st, const pd_search_metrics *m,
                                size_t *reported)
{
    if (run->opt.quiet || *reported >= PD_BENCH_MAX_REPORTED_MISMATCHES)
        return;
    (*reported)++;
    fprintf(stderr,
            "mismatch: %s:%d %s (%d,%d)->(%d,%d): %s [unit %u, status %s, cost %.10g, "
            "optimal %.10g, tolerance %.3g, path %zu cells]\n",
            scen_path, q->line, q->map, (int)q->start.x, (int)q->start.y, (int)q->goal.x,
            (int)q->goal.y, reason, run->opt.unit, pd_status_name(st), m->cost, q->optimal,
            q->tolerance, m->path_len);
}

/* The grid a unit of opt.unit searches, built as the daemon builds it. */
static pd_grid *pd__unit_grid(const pd_grid *map, uint32_t unit)
{
    if (unit == 1)
        return NULL;
    pd_clearance *c = pd_clearance_build(map);
    pd_grid *ug = c ? pd_unit_grid_build(map, c, unit) : NULL;
    pd_clearance_destroy(c);
    if (!ug)
        pd__die_input("cannot build the unit grid for unit %u (out of memory)", unit);
    return ug;
}

/*
 * --warmup: runs the queries the timed loop will pick on this map (from
 * index first on, every opt.every-th, while they name map_name and the map's
 * size) once, untimed and unchecked, through the same search function and
 * context, so the timed run finds the context grown and its pages touched.
 * Queries the timed loop does not time (--unit: start or goal not a legal
 * anchor, endpoints not connected) are left out here too.
 */
static void pd__warm_up(pd_bench_run *run, const pd_grid *grid, const pd_grid *unit_grid,
                        const uint32_t *labels, const pd_bench_query *qs, size_t n, size_t first,
                        const char *map_name)
{
    const pd_grid *search_grid = unit_grid ? unit_grid : grid;
    size_t w = (size_t)grid->width;
    for (size_t i = first; i < n; i += (size_t)run->opt.every) {
        const pd_bench_query *q = &qs[i];
        if (strcmp(q->map, map_name) != 0 || grid->width != q->map_width ||
            grid->height != q->map_height)
            break;
        if (unit_grid &&
            (!pd__unit_fits(grid, run->opt.unit, q->start.x, q->start.y) ||
             !pd__unit_fits(grid, run->opt.unit, q->goal.x, q->goal.y) ||
             labels[(size_t)q->start.y * w + (size_t)q->start.x] !=
                 labels[(size_t)q->goal.y * w + (size_t)q->goal.x]))
            continue;
        pd_search_params params = { .start = q->start, .goal = q->goal,
                                    .connectivity = run->opt.connect };
        pd_search_metrics m;
        memset(&m, 0, sizeof m);
        /* The answer is not looked at: the timed run searches again and is
         * the one checked. */
        (void)pd__search(run->ctx, run->jps_ctx, search_grid, &params, run->path, run->path_cap,
                         &m);
        if (!run->have_footprint) {
            run->footprint_after_first = pd__footprint(run);
            run->have_footprint = 1;
        }
    }
}

static void pd__run_scen_file(pd_bench_run *run, const char *scen_path)
{
    size_t n = 0;
    pd_bench_query *qs = pd__parse_scen(scen_path, &n);

    size_t first = 0;
    if (run->opt.last > 0 && (size_t)run->opt.last < n)
        first = n - (size_t)run->opt.last;

    pd_grid *grid = NULL, *unit_grid = NULL;
    uint32_t *labels = NULL;       /* --unit K > 1: components of the unit grid */
    char grid_name[PD_BENCH_MAX_NAME] = "";
    size_t reported = 0, file_failed = 0, file_skipped = 0, file_unreachable = 0;
    long file_brute = 0;
    size_t *picked = pd__xrealloc(NULL, (n ? n : 1) * sizeof *picked);
    size_t n_picked = 0;

    for (size_t i = first; i < n; i += (size_t)run->opt.every) {
        const pd_bench_query *q = &qs[i];
        if (!grid || strcmp(grid_name, q->map) != 0) {
            pd_grid_destroy(grid);
            pd_grid_destroy(unit_grid);
            free(labels);
            grid = pd__load_map(&run->opt, scen_path, q->map);
            unit_grid = pd__unit_grid(grid, run->opt.unit);
            labels = unit_grid ? pd__flood_labels(unit_grid) : NULL;
            snprintf(grid_name, sizeof grid_name, "%s", q->map);
            n_picked = 0; /* throughput runs on the file's last map only */
            /* A path never holds more cells than the map has. */
            pd__reserve_path(run, (size_t)grid->width * (size_t)grid->height);
            if (run->opt.warmup)
                pd__warm_up(run, grid, unit_grid, labels, qs, n, i, grid_name);
        }
        if (grid->width != q->map_width || grid->height != q->map_height)
            pd__die_input("%s:%d: scenario says %s is %dx%d, the map file is %dx%d", scen_path,
                          q->line, q->map, (int)q->map_width, (int)q->map_height,
                          (int)grid->width, (int)grid->height);
        const pd_grid *search_grid = unit_grid ? unit_grid : grid;

        pd_search_metrics m;
        memset(&m, 0, sizeof m);
        pd_status st;
        if (unit_grid) {
            if (!pd__unit_fits(grid, run->opt.unit, q->start.x, q->start.y) ||
                !pd__unit_fits(grid, run->opt.unit, q->goal.x, q->goal.y)) {
                file_skipped++;
                continue;
            }
            size_t w = (size_t)grid->width;
            if (labels[(size_t)q->start.y * w + (size_t)q->start.x] !=
                labels[(size_t)q->goal.y * w + (size_t)q->goal.x]) {
                /* Not timed: the daemon answers these from its own labels
                 * without searching. The search must still agree. */
                pd_search_params p = { .start = q->start, .goal = q->goal,
                                       .connectivity = run->opt.connect };
                file_unreachable++;
                st = pd__search(run->ctx, run->jps_ctx, search_grid, &p, NULL, 0, &m);
                if (st != PD_NO_PATH) {
                    run->failed++;
                    file_failed++;
                    pd__report_mismatch(run, scen_path, q,
                                        "a path between cells the flood fill does not connect",
                                        st, &m, &reported);
                } else {
                    run->passed++;
                }
                continue;
            }
        }

        picked[n_picked++] = i;
        double micros = 0.0;
        const char *reason = pd__run_query(run, search_grid, grid, q, &micros, &m, &st);
        if (!reason && file_brute < run->opt.check_brute) {
            double brute = pd__dijkstra(search_grid, run->opt.connect, q->start, q->goal);
            file_brute++;
            run->brute_checked++;
            if (brute < 0 || fabs(brute - m.cost) > PD_BENCH_BRUTE_REL_EPS * (brute > 1 ? brute : 1))
                reason = "cost differs from the bench's Dijkstra";
        }

        pd_bench_map_stats *s = pd__map_stats(run, q->map);
        pd__stats_add_time(s, micros);
        s->queries++;
        s->expanded_sum += (double)m.expanded;
        s->generated_sum += (double)m.generated;
        if (reason) {
            s->mismatches++;
            run->failed++;
            file_failed++;
            pd__report_mismatch(run, scen_path, q, reason, st, &m, &reported);
        } else {
            run->passed++;
        }
    }
    if (!run->opt.quiet && file_failed > reported)
        fprintf(stderr, "mismatch: %s: %zu more not shown\n", scen_path, file_failed - reported);
    if (unit_grid && !run->opt.quiet)
        fprintf(run->opt.json ? stderr : stdout,
                "# unit %u, %s: %zu scenarios skipped (start or goal not a legal anchor), "
                "%zu not connected for the unit (NO_PATH checked, not timed)\n",
                run->opt.unit, pd__basename(scen_path), file_skipped, file_unreachable);
    run->skipped_anchor += file_skipped;
    run->unreachable += file_unreachable;
    if (run->opt.threads > 0 && grid && n_picked > 0)
        pd__run_throughput(run, scen_path, unit_grid ? unit_grid : grid, qs, picked, n_picked);
    pd_grid_destroy(grid);
    pd_grid_destroy(unit_grid);
    free(labels);
    free(picked);
    free(qs);
}

/* Writes s as a JSON string literal. */
static void pd__json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c < 0x20)
            fprintf(out, "\\u%04x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

typedef struct pd_bench_summary {
    size_t queries, mismatches;
    double median_us, mean_us, mean_expanded, mean_generated;
} pd_bench_summary;

static pd_bench_summary pd__summarize(pd_bench_map_stats *m)
{
    pd_bench_summary s;
    s.queries = m->queries;
    s.mismatches = m->mismatches;
    s.mean_us = pd__mean(m->micros, m->queries);
    s.median_us = pd__median(m->micros, m->queries);
    s.mean_expanded = m->queries ? m->expanded_sum / (double)m->queries : 0.0;
    s.mean_generated = m->queries ? m->generated_sum / (double)m->queries : 0.0;
    return s;
}

/* Pools every map's per-query times into one summary. */
static pd_bench_summary pd__summarize_all(pd_bench_run *run)
{
    pd_bench_map_stats all;
    memset(&all, 0, sizeof all);
    for (size_t i = 0; i < run->map_count; i++) {
        pd_bench_map_stats *m = &run->maps[i];
        for (size_t k = 0; k < m->queries; k++) {
            pd__stats_add_time(&all, m->micros[k]);
            all.queries++;
        }
        all.mismatches += m->mismatches;
        all.expanded_sum += m->expanded_sum;
        all.generated_sum += m->generated_sum;
    }
    pd_bench_summary s = pd__summarize(&all);
    free(all.micros);
    return s;
}

static void pd__json_summary(FILE *out, const pd_bench_summary *s)
{
    fprintf(out,
            "\"queries\": %zu, \"mismatches\": %zu, \"median_us\": %.3f, \"mean_us\": %.3f, "
            "\"mean_expanded\": %.1f, \"mean_generated\": %.1f",
            s->queries, s->mismatches, s->median_us, s->mean_us, s->mean_expanded,
            s->mean_generated);
}

static void pd__print_json(pd_bench_run *run)
{
    FILE *out = stdout;
    fprintf(out, "{\n  \"tool\": \"pathd-bench\",\n");
    fprintf(out, "  \"timing\": \"clock_gettime(CLOCK_MONOTONIC) around %s\",\n",
            pd__algo_function(run));
    fprintf(out, "  \"algo\": \"%s\",\n", run->opt.jps ? "jps" : "astar");
    fprintf(out, "  \"connect\": %d, \"every\": %ld, \"last\": %ld, \"reps\": %ld,\n",
            (int)run->opt.connect, run->opt.every, run->opt.last, run->opt.reps);
    fprintf(out, "  \"warmup\": %s,\n", run->opt.warmup ? "true" : "false");
    fprintf(out, "  \"cost_checked\": %s,\n",
            run->opt.connect == PD_CONNECT_8 && run->opt.unit == 1 ? "true" : "false");
    fprintf(out, "  \"unit\": %u, \"skipped_not_anchor\": %zu, \"not_connected\": %zu, "
            "\"brute_checked\": %zu, \"astar_checked\": %zu,\n",
            run->opt.unit, run->skipped_anchor, run->unreachable, run->brute_checked, run->astar_checked);
    fprintf(out, "  \"maps\": [");
    for (size_t i = 0; i < run->map_count; i++) {
        pd_bench_summary s = pd__summarize(&run->maps[i]);
        fprintf(out, "%s\n    {\"map\": ", i ? "," : "");
        pd__json_string(out, run->maps[i].name);
        fprintf(out, ", ");
        pd__json_summary(out, &s);
        fprintf(out, "}");
    }
    pd_bench_summary all = pd__summarize_all(run);
    fprintf(out, "\n  ],\n  \"overall\": {");
    pd__json_summary(out, &all);
    fprintf(out, "},\n  \"context_bytes_after_first_query\": %zu,\n", run->footprint_after_first);
    fprintf(out, "  \"context_bytes_at_end\": %zu,\n", pd__footprint(run));
    fprintf(out, "  \"passed\": %zu, \"failed\": %zu\n}\n", run->passed, run->failed);
}

static void pd__print_table(pd_bench_run *run)
{
    const char *row = "%-18s %9zu %10zu %12.2f %12.2f %14.1f\n";
    printf("# connect %d, unit %u, every %ld, last %ld, reps %ld, warmup %s; time = "
           "CLOCK_MONOTONIC around %s, median of reps per query\n",
           (int)run->opt.connect, run->opt.unit, run->opt.every, run->opt.last, run->opt.reps,
           run->opt.warmup ? "on" : "off", pd__algo_function(run));
    if (run->opt.connect == PD_CONNECT_4)
        printf("# connect 4: scenario optimal lengths are 8-connected, so costs are NOT "
               "checked against them; paths are still checked step by step\n");
    if (run->opt.unit > 1)
        printf("# unit %u: scenario optimal lengths are for unit 1, so costs are NOT checked "
               "against them; paths are checked step by step under the footprint rule; "
               "%zu scenarios skipped (start or goal not a legal anchor), %zu not connected "
               "for the unit (NO_PATH checked, not timed)\n",
               run->opt.unit, run->skipped_anchor, run->unreachable);
    if (run->opt.check_brute > 0)
        printf("# %zu costs checked against the bench's Dijkstra on the %s grid\n",
               run->brute_checked, run->opt.unit > 1 ? "unit" : "map");
    if (run->opt.check_astar)
        printf("# %zu costs checked against A*'s (%d-connected) on the %s grid\n", run->astar_checked,
               (int)run->opt.connect, run->opt.unit > 1 ? "unit" : "map");
    printf("%-18s %9s %10s %12s %12s %14s\n", "map", "queries", "mismatches", "median_us",
           "mean_us", "mean_expanded");
    for (size_t i = 0; i < run->map_count; i++) {
        pd_bench_summary s = pd__summarize(&run->maps[i]);
        printf(row, run->maps[i].name, s.queries, s.mismatches, s.median_us, s.mean_us,
               s.mean_expanded);
    }
    pd_bench_summary all = pd__summarize_all(run);
    printf(row, "overall", all.queries, all.mismatches, all.median_us, all.mean_us,
           all.mean_expanded);
    printf("# search context: %zu bytes after the first query, %zu at the end\n",
           run->footprint_after_first, pd__footprint(run));
}

int main(int argc, char **argv)
{
    pd_bench_run run;
    memset(&run, 0, sizeof run);
    run.opt = pd__default_options;
    const char *argv0 = argc > 0 ? argv[0] : "pathd-bench";

    /* Options and files may be mixed; "--" ends the options. */
    const char **files = pd__xrealloc(NULL, (size_t)(argc > 0 ? argc : 1) * sizeof *files);
    int file_count = 0, options_done = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (options_done || a[0] != '-' || a[1] == '\0') {
            files[file_count++] = a;
        } else if (strcmp(a, "--") == 0) {
            options_done = 1;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            pd__usage(stdout, argv0);
            free(files);
            return PD_BENCH_EXIT_OK;
        } else if (strcmp(a, "--every") == 0) {
            run.opt.every = pd__parse_count(argv0, a, next, PD_BENCH_MAX_OPTION_VALUE);
            i++;
        } else if (strcmp(a, "--last") == 0) {
            run.opt.last = pd__parse_count(argv0, a, next, PD_BENCH_MAX_OPTION_VALUE);
            i++;
        } else if (strcmp(a, "--reps") == 0) {
            run.opt.reps = pd__parse_count(argv0, a, next, PD_BENCH_MAX_REPS);
            i++;
        } else if (strcmp(a, "--threads") == 0) {
            run.opt.threads = pd__parse_count(argv0, a, next, PD_BENCH_MAX_THREADS);
            i++;
        } else if (strcmp(a, "--connect") == 0) {
            if (next && strcmp(next, "4") == 0)
                run.opt.connect = PD_CONNECT_4;
            else if (next && strcmp(next, "8") == 0)
                run.opt.connect = PD_CONNECT_8;
            else
                pd__die_usage(argv0, "--connect takes 4 or 8, got '%s'", next ? next : "(nothing)");
            i++;
        } else if (strcmp(a, "--unit") == 0) {
            run.opt.unit = (uint32_t)pd__parse_count(argv0, a, next, PD_UNIT_SIZE_MAX);
            i++;
        } else if (strcmp(a, "--algo") == 0) {
            if (next && strcmp(next, "astar") == 0)
                run.opt.jps = 0;
            else if (next && strcmp(next, "jps") == 0)
                run.opt.jps = 1;
            else
                pd__die_usage(argv0, "--algo takes astar or jps, got '%s'", next ? next : "(nothing)");
            i++;
        } else if (strcmp(a, "--check-astar") == 0) {
            run.opt.check_astar = 1;
        } else if (strcmp(a, "--check-brute") == 0) {
            run.opt.check_brute = pd__parse_count(argv0, a, next, PD_BENCH_MAX_OPTION_VALUE);
            i++;
        } else if (strcmp(a, "--maps") == 0) {
            if (!next || !*next)
                pd__die_usage(argv0, "--maps needs a directory");
            run.opt.maps_dir = next;
            i++;
        } else if (strcmp(a, "--json") == 0) {
            run.opt.json = 1;
        } else if (strcmp(a, "--warmup") == 0) {
            run.opt.warmup = 1;
        } else if (strcmp(a, "--quiet") == 0) {
            run.opt.quiet = 1;
        } else {
            pd__die_usage(argv0, "unknown option '%s'", a);
        }
    }
    if (file_count == 0)
        pd__die_usage(argv0, "no scenario files given");
    if (run.opt.check_astar && !run.opt.jps)
        pd__die_usage(argv0, "--check-astar compares Jump Point Search with A*: it needs --algo jps");

    run.ctx = pd_search_ctx_create();
    if (!run.ctx)
        pd__die_input("cannot create a search context (out of memory)");
    if (run.opt.jps && !(run.jps_ctx = pd_jps_ctx_create()))
        pd__die_input("cannot create a JPS context (out of memory)");
    run.rep_nanos = pd__xrealloc(NULL, (size_t)run.opt.reps * sizeof *run.rep_nanos);

    for (int i = 0; i < file_count; i++)
        pd__run_scen_file(&run, files[i]);

    if (run.opt.json)
        pd__print_json(&run);
    else if (!run.opt.quiet)
        pd__print_table(&run);
    fprintf(run.opt.json ? stderr : stdout, "%zu passed, %zu failed\n", run.passed, run.failed);

    for (size_t i = 0; i < run.map_count; i++)
        free(run.maps[i].micros);
    free(run.maps);
    free(run.rep_nanos);
    free(run.path);
    free(files);
    pd_search_ctx_destroy(run.ctx);
    pd_jps_ctx_destroy(run.jps_ctx);
    return run.failed ? PD_BENCH_EXIT_FAILED : PD_BENCH_EXIT_OK;
}
