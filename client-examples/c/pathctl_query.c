/*
 * pathctl_query.c - pathctl's movement commands and `grid` (see
 * pathctl_query.h), on pdc_query_run / pdc_batch / pdc_scene_grid.
 *
 * With --json each answer is one object with "status" and "version" and
 * the fields the table names (clear, hit, last_free; valid,
 * first_invalid, reason, last_valid; end, end_world; cell; reachable;
 * distance). `batch` reads one command per line from standard input
 * (the same words as on the command line, without the global options),
 * sends them PDC_MAX_BATCH at a time and prints one JSON object per line,
 * in order; a line it cannot parse prints {"status":"INVALID_ARGUMENT",...}
 * in its place.
 */
#include "pathctl_query.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "pathd_client.h"

#define PQ_EXIT_ANSWER 1
#define PQ_EXIT_USAGE 2
#define PQ_EXIT_CONNECT 3
#define PQ_MAX_TIMEOUT_MS 3600000L
#define PQ_MAX_WORDS 64          /* words on one batch line */
#define PQ_MAX_LINE 65536        /* bytes in one batch line */

const char pathctl_query_usage[] =
    "  raycast --scene NAME --from X,Y --to X,Y [--unit K] [--world]\n"
    "                     is the straight segment walkable (no corner cutting)?\n"
    "  validate --scene NAME --max-speed V [--tolerance F] --moves \"X,Y,T;X,Y,T;...\"\n"
    "                     check a claimed movement (T seconds, V world units/s)\n"
    "  move --scene NAME --from X,Y --by DX,DY   slide along walls; where it ends\n"
    "  nearest --scene NAME --at X,Y --radius R [--reachable-from X,Y]\n"
    "                     nearest cell the unit fits on (Euclidean, cells)\n"
    "  reachable --scene NAME --from X,Y --to X,Y   connected for the unit?\n"
    "  random --scene NAME --around X,Y --radius R [--seed N]\n"
    "                     a cell within walking distance R (cells)\n"
    "  clearance --scene NAME --at X,Y [--radius CAP]   distance to the nearest wall\n"
    "  batch              one of the commands above per line on stdin; one JSON\n"
    "                     object per line out, in order\n"
    "  grid --scene NAME [--unit K]   the grid in the config's ASCII map format\n"
    "                     (# blocked, . cost 1, 2..9 that cost, + cost 10 or more)\n"
    "                     the movement commands also take --unit K, --world and\n"
    "                     --min-version N (a scene older than version N answers\n"
    "                     STALE_VERSION with the version it is at)\n";

typedef struct pq_args {
    const char *server, *token;
    int json, timeout_ms;
    const char *command;
    pdc_query q;
    pdc_timed_point *moves;      /* heap */
} pq_args;

static const char *const pq_commands[] = {"raycast", "validate", "move", "nearest", "reachable",
                                          "random", "clearance", "batch", "grid"};

static int pq_is_mine(const char *cmd)
{
    for (size_t i = 0; i < sizeof pq_commands / sizeof pq_commands[0]; i++)
        if (!strcmp(cmd, pq_commands[i]))
            return 1;
    return 0;
}

int pathctl_parse_number(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

int pathctl_parse_point(const char *s, int world, pdc_point *out)
{
    char *end;
    errno = 0;
    if (world) {
        double x = strtod(s, &end);
        if (errno || end == s || *end != ',' || !isfinite(x))
            return -1;
        const char *ys = end + 1;
        double y = strtod(ys, &end);
        if (errno || end == ys || *end || !isfinite(y))
            return -1;
        *out = pdc_world(x, y);
        return 0;
    }
    long x = strtol(s, &end, 10);
    if (errno || end == s || *end != ',' || x < INT32_MIN || x > INT32_MAX)
        return -1;
    const char *ys = end + 1;
    long y = strtol(ys, &end, 10);
    if (errno || end == ys || *end || y < INT32_MIN || y > INT32_MAX)
        return -1;
    *out = pdc_cell((int32_t)x, (int32_t)y);
    return 0;
}

/* "X,Y,T;X,Y,T;..." into a heap array; the count, or -1. */
static long pq_parse_moves(const char *s, int world, pdc_timed_point **out)
{
    size_t n = 0;
    pdc_timed_point *moves = calloc(PDC_MAX_MOVES, sizeof *moves);
    char *copy = strdup(s);
    if (!moves || !copy) {
        free(moves);
        free(copy);
        return -1;
    }
    char *save = NULL;
    for (char *item = strtok_r(copy, ";", &save); item; item = strtok_r(NULL, ";", &save)) {
        char *last = strrchr(item, ',');
        if (!last || n >= PDC_MAX_MOVES)
            goto bad;
        *last = '\0';
        if (pathctl_parse_point(item, world, &moves[n].point) || pathctl_parse_number(last + 1, &moves[n].t))
            goto bad;
        n++;
    }
    free(copy);
    if (n == 0) {
        free(moves);
        return -1;
    }
    *out = moves;
    return (long)n;
bad:
    free(copy);
    free(moves);
    return -1;
}

static int pq_usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "pathctl: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(try pathctl --help)\n");
    return PQ_EXIT_USAGE;
}

/* Parses one command's words (argv[first..argc)) into a->q. With
 * global = 1 it also takes --server, --token, --json and --timeout.
 * Returns -1 when parsed, else an exit code (usage printed, or help). */
static int pq_parse(int argc, char **argv, int first, int global, pq_args *a)
{
    const char *from = NULL, *to = NULL, *by = NULL, *at = NULL, *around = NULL, *reach = NULL, *moves = NULL;
    const char *radius = NULL, *seed = NULL, *speed = NULL, *tolerance = NULL, *unit = NULL, *min_version = NULL;
    int world = 0;
    for (int i = first; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help"))
            return 0;
        if (!strcmp(arg, "--world")) {
            world = 1;
            continue;
        }
        if (global && !strcmp(arg, "--json")) {
            a->json = 1;
            continue;
        }
        if (arg[0] != '-') {
            if (a->command)
                return pq_usage_error("unexpected argument %s", arg);
            a->command = arg;
            continue;
        }
        static const char *const names[] = {"--scene", "--unit", "--from", "--to", "--by", "--at", "--around",
                                            "--reachable-from", "--radius", "--seed", "--max-speed",
                                            "--tolerance", "--moves", "--min-version", "--server", "--token",
                                            "--timeout"};
        const char **slots[] = {&a->q.scene, &unit, &from, &to, &by, &at, &around, &reach, &radius, &seed,
                                &speed, &tolerance, &moves, &min_version, &a->server, &a->token, NULL};
        size_t k = 0, nnames = sizeof names / sizeof names[0];
        const char *value = NULL;
        for (; k < nnames; k++) {
            size_t n = strlen(names[k]);
            if (!strncmp(arg, names[k], n) && (arg[n] == '\0' || arg[n] == '=')) {
                value = arg[n] == '=' ? arg + n + 1 : (i + 1 < argc ? argv[++i] : NULL);
                break;
            }
        }
        if (k == nnames || (!global && k >= 14))
            return pq_usage_error("unknown option %s", arg);
        if (!value)
            return pq_usage_error("option %s needs a value", names[k]);
        if (k == 16) {
            char *end;
            long t = strtol(value, &end, 10);
            if (*end || t < 1 || t > PQ_MAX_TIMEOUT_MS)
                return pq_usage_error("bad --timeout %s (milliseconds, > 0)", value);
            a->timeout_ms = (int)t;
        } else {
            *slots[k] = value;
        }
    }
    if (!a->command)
        return pq_usage_error("%s", "no command given");
    if (!strcmp(a->command, "batch"))
        return -1;
    if (!a->q.scene || !a->q.scene[0])
        return pq_usage_error("%s needs --scene", a->command);
    if (unit) {
        char *end;
        long k = strtol(unit, &end, 10);
        if (*end || k < 1 || k > 64)
            return pq_usage_error("bad --unit %s", unit);
        a->q.unit_size = (uint32_t)k;
    }
    if (min_version) {
        char *end;
        errno = 0;
        a->q.min_version = strtoull(min_version, &end, 10);
        if (errno || *end || min_version[0] == '-' || !min_version[0])
            return pq_usage_error("bad --min-version %s", min_version);
    }
    if (!strcmp(a->command, "grid"))
        return min_version ? pq_usage_error("%s", "--min-version belongs to the movement commands") : -1;
    struct {
        const char *cmd;
        pdc_query_kind kind;
        const char **a, **b;
        const char *a_name, *b_name;
    } shapes[] = {
        {"raycast", PDC_Q_RAYCAST, &from, &to, "--from", "--to"},
        {"validate", PDC_Q_VALIDATE_MOVE, NULL, NULL, NULL, NULL},
        {"move", PDC_Q_MOVE_ALONG, &from, NULL, "--from", NULL},
        {"nearest", PDC_Q_NEAREST, &at, NULL, "--at", NULL},
        {"reachable", PDC_Q_REACHABLE, &from, &to, "--from", "--to"},
        {"random", PDC_Q_RANDOM_POINT, &around, NULL, "--around", NULL},
        {"clearance", PDC_Q_DISTANCE_TO_WALL, &at, NULL, "--at", NULL},
    };
    size_t s = 0;
    while (s < sizeof shapes / sizeof shapes[0] && strcmp(shapes[s].cmd, a->command))
        s++;
    if (s == sizeof shapes / sizeof shapes[0])
        return pq_usage_error("unknown command %s", a->command);
    a->q.kind = shapes[s].kind;
    if (shapes[s].a) {
        if (!*shapes[s].a || pathctl_parse_point(*shapes[s].a, world, &a->q.a))
            return pq_usage_error("%s needs a point X,Y", shapes[s].a_name);
    }
    if (shapes[s].b) {
        if (!*shapes[s].b || pathctl_parse_point(*shapes[s].b, world, &a->q.b))
            return pq_usage_error("%s needs a point X,Y", shapes[s].b_name);
    }
    if (a->q.kind == PDC_Q_NEAREST && reach) {
        if (pathctl_parse_point(reach, world, &a->q.b))
            return pq_usage_error("bad --reachable-from %s", reach);
        a->q.has_b = 1;
    }
    if (a->q.kind == PDC_Q_MOVE_ALONG) {
        if (!by)
            return pq_usage_error("%s", "move needs --by DX,DY");
        const char *comma = strchr(by, ',');
        char dx[64];
        snprintf(dx, sizeof dx, "%.*s", comma ? (int)(comma - by) : 0, by);
        if (!comma || pathctl_parse_number(dx, &a->q.dx) || pathctl_parse_number(comma + 1, &a->q.dy))
            return pq_usage_error("bad --by %s (DX,DY: finite numbers)", by);
    }
    if (a->q.kind == PDC_Q_NEAREST || a->q.kind == PDC_Q_RANDOM_POINT || a->q.kind == PDC_Q_DISTANCE_TO_WALL) {
        if (!radius && a->q.kind != PDC_Q_DISTANCE_TO_WALL)
            return pq_usage_error("%s needs --radius R (>= 0)", a->command);
        if (radius && (pathctl_parse_number(radius, &a->q.radius) || a->q.radius < 0))
            return pq_usage_error("bad --radius %s (cells: a finite number >= 0)", radius);
    }
    if (seed) {
        char *end;
        errno = 0;
        a->q.seed = strtoull(seed, &end, 10);
        if (errno || *end || seed[0] == '-')
            return pq_usage_error("bad --seed %s", seed);
    }
    if (a->q.kind == PDC_Q_VALIDATE_MOVE) {
        if (!speed)
            return pq_usage_error("%s", "validate needs --max-speed V");
        /* Told apart from a missing flag: "nan" or "fast" was given
         * (pathctl_parse_number). */
        if (pathctl_parse_number(speed, &a->q.max_speed))
            return pq_usage_error("bad --max-speed %s: not a finite number (world units per second)", speed);
        if (tolerance && pathctl_parse_number(tolerance, &a->q.tolerance))
            return pq_usage_error("bad --tolerance %s (a finite number)", tolerance);
        if (!moves)
            return pq_usage_error("%s", "validate needs --moves \"X,Y,T;X,Y,T;...\" (1 to 256 points)");
        long n = pq_parse_moves(moves, world, &a->moves);
        if (n < 0)
            return pq_usage_error("bad --moves %s (\"X,Y,T;X,Y,T;...\", finite numbers, 1 to 256 points)", moves);
        a->q.moves = a->moves;
        a->q.move_count = (size_t)n;
    }
    return -1;
}

static cJSON *pq_xy(int present, pdc_xy c)
{
    if (!present)
        return cJSON_CreateNull();
    const double xy[2] = {c.x, c.y};
    return cJSON_CreateDoubleArray(xy, 2);
}

static cJSON *pq_world(double wx, double wy)
{
    const double xy[2] = {wx, wy};
    return cJSON_CreateDoubleArray(xy, 2);
}

/* The answer as the JSON object the issue names. */
static cJSON *pq_json(pdc_query_kind kind, const pdc_query_result *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "status", pdc_status_name(r->status));
    if (r->status != PDC_OK) {
        if (r->message[0])
            cJSON_AddStringToObject(o, "message", r->message);
        if (r->status == PDC_STALE_VERSION)
            cJSON_AddNumberToObject(o, "version", (double)r->version);
        return o;
    }
    cJSON_AddNumberToObject(o, "version", (double)r->version);
    switch (kind) {
    case PDC_Q_RAYCAST:
        cJSON_AddBoolToObject(o, "clear", r->yes);
        cJSON_AddItemToObject(o, "hit", pq_xy(r->has_hit, r->hit));
        cJSON_AddItemToObject(o, "last_free", pq_xy(r->has_cell, r->cell));
        cJSON_AddItemToObject(o, "last_free_world", pq_world(r->wx, r->wy));
        break;
    case PDC_Q_VALIDATE_MOVE:
        cJSON_AddBoolToObject(o, "valid", r->yes);
        if (r->first_invalid < 0)
            cJSON_AddNullToObject(o, "first_invalid");
        else
            cJSON_AddNumberToObject(o, "first_invalid", r->first_invalid);
        cJSON_AddStringToObject(o, "reason", pdc_move_reason_name(r->reason));
        cJSON_AddItemToObject(o, "last_valid", pq_xy(r->has_cell, r->cell));
        if (r->has_cell)
            cJSON_AddItemToObject(o, "last_valid_world", pq_world(r->wx, r->wy));
        break;
    case PDC_Q_MOVE_ALONG:
        cJSON_AddItemToObject(o, "end", pq_xy(r->has_cell, r->cell));
        cJSON_AddItemToObject(o, "end_world", pq_world(r->wx, r->wy));
        cJSON_AddBoolToObject(o, "slid", r->yes);
        break;
    case PDC_Q_NEAREST:
        cJSON_AddItemToObject(o, "cell", pq_xy(r->has_cell, r->cell));
        cJSON_AddNumberToObject(o, "distance", r->distance);
        break;
    case PDC_Q_REACHABLE:
        cJSON_AddBoolToObject(o, "reachable", r->yes);
        break;
    case PDC_Q_RANDOM_POINT:
        cJSON_AddItemToObject(o, "cell", pq_xy(r->has_cell, r->cell));
        cJSON_AddNumberToObject(o, "seed", (double)r->seed);
        cJSON_AddNumberToObject(o, "candidates", (double)r->candidates);
        break;
    default:
        cJSON_AddNumberToObject(o, "distance", r->distance);
        cJSON_AddItemToObject(o, "wall", pq_xy(r->has_hit, r->hit));
        break;
    }
    return o;
}

static void pq_print_json(cJSON *o)
{
    char *text = o ? cJSON_PrintUnformatted(o) : NULL;
    puts(text ? text : "{\"status\":\"NO_MEMORY\"}");
    free(text);
    cJSON_Delete(o);
}

static void pq_print_text(pdc_query_kind kind, const pdc_query_result *r)
{
    switch (kind) {
    case PDC_Q_RAYCAST:
        if (r->yes)
            printf("clear (version %" PRIu64 ")\n", r->version);
        else
            printf("blocked at (%d,%d); last free (%d,%d) world (%g, %g) (version %" PRIu64 ")\n", r->hit.x,
                   r->hit.y, r->cell.x, r->cell.y, r->wx, r->wy, r->version);
        break;
    case PDC_Q_VALIDATE_MOVE:
        if (r->yes)
            printf("valid (version %" PRIu64 ")\n", r->version);
        else
            printf("invalid at point %d: %s%s (version %" PRIu64 ")\n", r->first_invalid,
                   pdc_move_reason_name(r->reason), r->has_cell ? "; put back at the last valid position" : "",
                   r->version);
        if (!r->yes && r->has_cell)
            printf("last valid (%d,%d) world (%g, %g)\n", r->cell.x, r->cell.y, r->wx, r->wy);
        break;
    case PDC_Q_MOVE_ALONG:
        printf("end (%d,%d) world (%g, %g)%s (version %" PRIu64 ")\n", r->cell.x, r->cell.y, r->wx, r->wy,
               r->yes ? " after sliding" : "", r->version);
        break;
    case PDC_Q_NEAREST:
        printf("nearest (%d,%d) at distance %g (version %" PRIu64 ")\n", r->cell.x, r->cell.y, r->distance,
               r->version);
        break;
    case PDC_Q_REACHABLE:
        printf("%s (version %" PRIu64 ")\n", r->yes ? "reachable" : "not reachable", r->version);
        break;
    case PDC_Q_RANDOM_POINT:
        printf("(%d,%d) of %" PRIu64 " cells, seed %" PRIu64 " (version %" PRIu64 ")\n", r->cell.x, r->cell.y,
               r->candidates, r->seed, r->version);
        break;
    default:
        if (r->has_hit)
            printf("distance %g to the wall at (%d,%d) (version %" PRIu64 ")\n", r->distance, r->hit.x, r->hit.y,
                   r->version);
        else
            printf("no wall within %g (version %" PRIu64 ")\n", r->distance, r->version);
        break;
    }
}

static int pq_exit(int status)
{
    if (status == PDC_ERR_DISCONNECTED || status == PDC_ERR_TIMEOUT || status == PDC_ERR_CONNECT)
        return PQ_EXIT_CONNECT;
    if (status == PDC_ERR_ARG)
        return PQ_EXIT_USAGE;
    return status == PDC_OK ? 0 : PQ_EXIT_ANSWER;
}

static int pq_one(pdc_conn *c, const pq_args *a)
{
    pdc_query_result r;
    int st = pdc_query_run(c, &a->q, &r);
    if (a->json)
        pq_print_json(pq_json(a->q.kind, &r));
    else if (st == PDC_OK)
        pq_print_text(a->q.kind, &r);
    if (st != PDC_OK)
        fprintf(stderr, "pathctl: %s%s%s\n", pdc_status_name(st), r.message[0] ? ": " : "", r.message);
    return pq_exit(st);
}

/* ASCII map symbols for a cost byte (config/README.md's ascii format). */
static char pq_symbol(uint8_t cost)
{
    if (cost == 0)
        return '#';
    if (cost == 1)
        return '.';
    return cost <= 9 ? (char)('0' + cost) : '+';
}

static int pq_grid(pdc_conn *c, const pq_args *a)
{
    pdc_grid g;
    int st = pdc_scene_grid(c, a->q.scene, a->q.unit_size, &g);
    if (st != PDC_OK) {
        fprintf(stderr, "pathctl: %s: %s\n", pdc_status_name(st), pdc_last_error(c));
        return pq_exit(st);
    }
    char *row = malloc((size_t)g.width + 1);
    for (int32_t y = 0; row && y < g.height; y++) {
        for (int32_t x = 0; x < g.width; x++)
            row[x] = pq_symbol(g.cells[(size_t)y * (size_t)g.width + (size_t)x]);
        row[g.width] = '\0';
        puts(row);
    }
    free(row);
    pdc_grid_free(&g);
    return row ? 0 : PQ_EXIT_ANSWER;
}

/* Splits a line into words on blanks; returns the count (argv[0] unused). */
static int pq_words(char *line, char **words, int max)
{
    int n = 1;
    words[0] = "batch";
    for (char *save = NULL, *w = strtok_r(line, " \t\r\n", &save); w; w = strtok_r(NULL, " \t\r\n", &save)) {
        if (n >= max)
            return -1;
        words[n++] = w;
    }
    return n;
}

/* One parsed line of a batch. */
typedef struct pq_line {
    pq_args args;
    char *text;                 /* the words point into it */
    int bad;                    /* 1: print INVALID_ARGUMENT for it */
} pq_line;

static int pq_flush(pdc_conn *c, pq_line *lines, size_t n)
{
    pdc_query qs[PDC_MAX_BATCH];
    pdc_query_result rs[PDC_MAX_BATCH];
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!lines[i].bad)
            qs[k++] = lines[i].args.q;
    int st = k ? pdc_batch(c, qs, k, rs) : PDC_OK;
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        if (lines[i].bad) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "status", "INVALID_ARGUMENT");
            cJSON_AddStringToObject(o, "message", "line not understood (see pathctl --help)");
            pq_print_json(o);
            continue;
        }
        if (st != PDC_OK) {
            pdc_query_result e = {.status = st};
            snprintf(e.message, sizeof e.message, "%s", pdc_last_error(c));
            pq_print_json(pq_json(lines[i].args.q.kind, &e));
        } else {
            pq_print_json(pq_json(lines[i].args.q.kind, &rs[j]));
        }
        j++;
    }
    return st;
}

/* Lines per Batch frame: the largest batch the server admits (GetLimits:
 * each item takes an in-flight slot), at most PDC_MAX_BATCH. */
static size_t pq_batch_size(pdc_conn *c)
{
    pdc_limits lim;
    if (pdc_get_limits(c, &lim) == PDC_OK && lim.max_batch_items >= 1 && lim.max_batch_items < PDC_MAX_BATCH)
        return lim.max_batch_items;
    return PDC_MAX_BATCH;
}

static int pq_batch(pdc_conn *c)
{
    const size_t per_frame = pq_batch_size(c);
    pq_line *lines = calloc(PDC_MAX_BATCH, sizeof *lines);
    char *buf = malloc(PQ_MAX_LINE);
    int worst = PDC_OK;
    size_t n = 0;
    while (lines && buf && fgets(buf, PQ_MAX_LINE, stdin)) {
        char *text = strdup(buf);
        char *words[PQ_MAX_WORDS];
        int nw = text ? pq_words(text, words, PQ_MAX_WORDS) : -1;
        if (nw == 1) {
            free(text);
            continue; /* a blank line */
        }
        pq_line *l = &lines[n++];
        memset(l, 0, sizeof *l);
        l->text = text;
        /* Usage errors for a line go to stderr; the line answers INVALID_ARGUMENT. */
        l->bad = nw < 0 || pq_parse(nw, words, 1, 0, &l->args) != -1 || !strcmp(l->args.command, "batch") ||
                 !strcmp(l->args.command, "grid");
        if (n == per_frame) {
            int st = pq_flush(c, lines, n);
            worst = worst == PDC_OK ? st : worst;
            for (size_t i = 0; i < n; i++) {
                free(lines[i].text);
                free(lines[i].args.moves);
            }
            n = 0;
        }
    }
    if (n) {
        int st = pq_flush(c, lines, n);
        worst = worst == PDC_OK ? st : worst;
    }
    for (size_t i = 0; lines && i < n; i++) {
        free(lines[i].text);
        free(lines[i].args.moves);
    }
    free(lines);
    free(buf);
    return pq_exit(worst);
}

int pathctl_query_main(int argc, char **argv)
{
    /* The command is the first word that is not an option or its value;
     * only the commands of this file are handled here. */
    const char *cmd = NULL;
    for (int i = 1; i < argc && !cmd; i++) {
        if (argv[i][0] != '-') {
            cmd = argv[i];
        } else if (!strchr(argv[i], '=') && strcmp(argv[i], "--json") && strcmp(argv[i], "--world") &&
                   strcmp(argv[i], "--snap") && strcmp(argv[i], "--partial")) {
            i++; /* skip the option's value */
        }
    }
    if (!cmd || !pq_is_mine(cmd))
        return PATHCTL_QUERY_NOT_MINE;
    pq_args a;
    memset(&a, 0, sizeof a);
    a.server = PDC_DEFAULT_SERVER;
    a.timeout_ms = PDC_DEFAULT_TIMEOUT_MS;
    int code = pq_parse(argc, argv, 1, 1, &a);
    if (code >= 0) {
        free(a.moves);
        return code;
    }
    if (!a.token && getenv("PATHD_TOKEN") && *getenv("PATHD_TOKEN"))
        a.token = getenv("PATHD_TOKEN");
    char err[PDC_MESSAGE_MAX];
    pdc_conn *c = pdc_connect_flags(a.server, a.timeout_ms, PDC_CONNECT_NO_FLOW_CONTROL, err, sizeof err);
    if (!c) {
        fprintf(stderr, "pathctl: %s\n", err);
        free(a.moves);
        return PQ_EXIT_CONNECT;
    }
    if (a.token && (code = pdc_auth(c, a.token, NULL, 0)) != PDC_OK) {
        fprintf(stderr, "pathctl: %s: %s\n", pdc_status_name(code), pdc_last_error(c));
        code = pq_exit(code);
    } else if (!strcmp(a.command, "batch")) {
        code = pq_batch(c);
    } else if (!strcmp(a.command, "grid")) {
        code = pq_grid(c, &a);
    } else {
        code = pq_one(c, &a);
    }
    pdc_close(c);
    free(a.moves);
    return code;
}
