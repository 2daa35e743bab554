/*
 * pathctl.c - command-line client for pathd, built on pathd_client.h.
 *
 * It exists so a person (or a shell script) can ask the daemon for a path
 * or a cross-scene route, change a scene's cells, list its scenes or read its statistics without
 * writing code, and as a worked example of the client library. Human-readable output by default,
 * one JSON object per answer with --json (written with cJSON).
 *
 * Exit status: 0 for OK/PARTIAL answers, 1 for any other answer (its status
 * name is printed), 2 for usage errors, 3 when the server cannot be reached
 * or the connection fails.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "pathctl_query.h"
#include "pathctl_render.h"
#include "pathctl_reserve.h"
#include "pathctl_scene.h"
#include "pathctl_watch.h"
#include "pathd_client.h"

#define PATHCTL_EXIT_ANSWER 1   /* the server answered with a non-OK status */
#define PATHCTL_EXIT_USAGE 2
#define PATHCTL_EXIT_CONNECT 3
/* Longest --timeout accepted, in ms: an hour is already absurd for one call. */
#define PATHCTL_MAX_TIMEOUT_MS 3600000L

/* Most cells `update --cells` takes: what one UpdateCells request can carry
 * (the server counts a cell as three of its 65536 fields and list elements,
 * docs/PROTOCOL.md); a rectangle covers more. */
#define PATHCTL_MAX_UPDATE_CELLS 21800

typedef struct pathctl_args {
    const char *server;
    const char *token;          /* --token, else $PATHD_TOKEN; NULL: none */
    int json;
    int timeout_ms;
    const char *command;
    const char *name;           /* info NAME */
    uint64_t min_version;       /* --min-version (path, info) */
    const char *path_option;    /* a path-only option that was given, for errors */
    const char *update_option;  /* an update-only option that was given */
    const char *scene;
    const char *from, *to;
    int world;
    pdc_path_req req;
    pdc_route_req route;        /* the route command; scene names point into route_names */
    char *route_names[2];       /* heap copies of the SCENE parts of --from / --to */
    pdc_xy *avoid;              /* heap; freed by pathctl_args_free */
    pdc_point *goals;           /* --goals, heap; freed by pathctl_args_free */
    pdc_update_req update;
    pdc_xy *update_cells;       /* heap; freed by pathctl_args_free */
} pathctl_args;

static void pathctl_args_free(pathctl_args *a)
{
    free(a->avoid);
    free(a->goals);
    a->goals = NULL;
    free(a->update_cells);
    free(a->route_names[0]);
    free(a->route_names[1]);
    a->route_names[0] = a->route_names[1] = NULL;
    a->avoid = NULL;
    a->update_cells = NULL;
}

static void pathctl_usage(FILE *out)
{
    fprintf(out,
            "usage: pathctl [--server HOST:PORT] [--token T] [--json] [--timeout MS] COMMAND\n"
            "\n"
            "commands:\n"
            "  path --scene NAME --from X,Y --to X,Y [--world] [--unit K]\n"
            "       [--connect 4|8] [--style cells|corners|smooth]\n"
            "       [--max-expansions N] [--deadline MS] [--partial]\n"
            "       [--goal-mode exact|nearest|line] [--snap]\n"
            "       [--speed S] [--start-time T] [--avoid \"X,Y;X,Y\"] [--window X0,Y0,X1,Y1]\n"
            "       [--range R [--los]] [--goals \"X,Y;X,Y\" instead of --to]\n"
            "       [--min-version N] [--avoid-reserved]\n"
            "                     find a path; --world reads X,Y as world coordinates\n"
            "                     and prints the waypoints' world coordinates (asked of\n"
            "                     the server, as --json does);\n"
            "                     for --unit K > 1, X,Y is the unit's top-left cell;\n"
            "                     --range stops within R cells (Euclidean) of the goal,\n"
            "                     --los only where the goal is in line of sight;\n"
            "                     --goals goes to the nearest of several (goal_index);\n"
            "                     --avoid-reserved goes round the scene's reservations\n"
            "                     (needs --speed; --start-time is the game time, s)\n"
            "  route --from SCENE:X,Y --to SCENE:X,Y [--world] [--unit K]\n"
            "        [--style cells|corners|smooth] [--goal-mode exact|nearest|line]\n"
            "        [--speed S] [--start-time T] [--max-expansions N] [--deadline MS]\n"
            "                     find a route across scenes through portals; prints\n"
            "                     each leg with its cost and portal, then the total\n"
            "  update --scene NAME (--rect X0,Y0,X1,Y1 | --cells \"X,Y;X,Y\")\n"
            "         --set blocked|passable|cost=N|restore\n"
            "                     change cells; prints the new scene version\n"
            "  scenes             list scenes, one a line: name WxH version N\n"
            "  info NAME [--min-version N]\n"
            "                     describe one scene; with --min-version (path too) a\n"
            "                     scene older than version N answers STALE_VERSION\n"
            "                     with the version it is at\n"
            "  stats              server statistics\n"
            "  limits             the limits requests must respect\n"
            "  ping               round-trip time\n"
            "  reload             admin: reread the server's config and maps (as SIGHUP)\n"
            "%s%s%s%s%s"
            "\n"
            "options:\n"
            "  --server HOST:PORT  default %s ([::1]:PORT for IPv6)\n"
            "  --json              one JSON object per answer\n"
            "  --timeout MS        per-call timeout (default %d)\n"
            "  --token T           authenticate first (default: $PATHD_TOKEN if set)\n"
            "  -h, --help          this text\n"
            "\n"
            "exit status: 0 OK/PARTIAL, 1 other answer, 2 usage, 3 connection failure\n",
            pathctl_query_usage, pathctl_scene_usage, pathctl_watch_usage, pathctl_reserve_usage, pathctl_render_usage,
            PDC_DEFAULT_SERVER,
            PDC_DEFAULT_TIMEOUT_MS);
}

static int pathctl_usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "pathctl: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(try pathctl --help)\n");
    return PATHCTL_EXIT_USAGE;
}

/* Parses a whole decimal integer in [min, max]; 0 on success. */
static int pathctl_parse_long(const char *s, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

static int pathctl_parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    if (s[0] == '-')
        return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end)
        return -1;
    *out = v;
    return 0;
}

/* "X,Y;X,Y;..." into a heap array of at most max points (cells, or world
 * points with `world`; a trailing ';' is allowed). Returns the count, or -1
 * on a syntax error, an empty list, or more than max points. */
static long pathctl_parse_points(const char *s, int world, size_t max, pdc_point **out)
{
    size_t n = 0, cap = 0;
    pdc_point *pts = NULL;
    const char *p = s;
    while (*p) {
        char item[64];
        const char *semi = strchr(p, ';');
        size_t len = semi ? (size_t)(semi - p) : strlen(p);
        if (len == 0 || len >= sizeof item || n == max)
            goto fail;
        memcpy(item, p, len);
        item[len] = '\0';
        if (n == cap) {
            size_t grown_cap = cap ? cap * 2 : 16;
            pdc_point *grown = realloc(pts, grown_cap * sizeof *grown);
            if (!grown)
                goto fail;
            pts = grown;
            cap = grown_cap;
        }
        if (pathctl_parse_point(item, world, &pts[n]))
            goto fail;
        n++;
        p += len + (semi ? 1 : 0);
    }
    if (n == 0)
        goto fail;
    *out = pts;
    return (long)n;
fail:
    free(pts);
    return -1;
}

/* "X,Y;X,Y;..." cells into a heap array (see pathctl_parse_points). */
static long pathctl_parse_cells(const char *s, size_t max, pdc_xy **out)
{
    pdc_point *pts;
    long n = pathctl_parse_points(s, 0, max, &pts);
    if (n < 0)
        return -1;
    pdc_xy *cells = malloc((size_t)n * sizeof *cells);
    for (long i = 0; cells && i < n; i++) {
        pdc_xy c = {pts[i].x, pts[i].y};
        cells[i] = c;
    }
    free(pts);
    *out = cells;
    return cells ? n : -1;
}

/* "X0,Y0,X1,Y1": an inclusive cell rectangle with X0 <= X1 and Y0 <= Y1. */
static int pathctl_parse_rect(const char *s, pdc_xy *min, pdc_xy *max)
{
    long v[4];
    const char *p = s;
    for (int i = 0; i < 4; i++) {
        char *end;
        errno = 0;
        v[i] = strtol(p, &end, 10);
        if (errno || end == p || v[i] < INT32_MIN || v[i] > INT32_MAX || *end != (i < 3 ? ',' : '\0'))
            return -1;
        p = end + 1;
    }
    if (v[0] > v[2] || v[1] > v[3])
        return -1;
    *min = (pdc_xy){(int32_t)v[0], (int32_t)v[1]};
    *max = (pdc_xy){(int32_t)v[2], (int32_t)v[3]};
    return 0;
}

/* Options that take a value. Returns the value for argv[*i] (and advances
 * *i past it), accepting both "--opt value" and "--opt=value". */
static const char *pathctl_option_value(int argc, char **argv, int *i, const char *name)
{
    size_t n = strlen(name);
    const char *arg = argv[*i];
    if (strncmp(arg, name, n) != 0)
        return NULL;
    if (arg[n] == '=')
        return arg + n + 1;
    if (arg[n] != '\0' || *i + 1 >= argc)
        return NULL;
    return argv[++*i];
}

static int pathctl_is_option(const char *arg, const char *name)
{
    size_t n = strlen(name);
    return strncmp(arg, name, n) == 0 && (arg[n] == '\0' || arg[n] == '=');
}

/* Options that take a value, and which command they belong to. */
typedef enum pathctl_opt {
    OPT_SERVER, OPT_TIMEOUT, OPT_SCENE, OPT_MIN_VERSION,
    OPT_FROM, OPT_TO, OPT_UNIT, OPT_CONNECT, OPT_STYLE, OPT_MAX_EXPANSIONS, OPT_DEADLINE,
    OPT_GOAL_MODE, OPT_SPEED, OPT_START_TIME, OPT_AVOID, OPT_WINDOW, OPT_RANGE, OPT_GOALS,
    OPT_RECT, OPT_CELLS, OPT_SET,
    OPT_COUNT
} pathctl_opt;

static const char *const pathctl_opt_names[OPT_COUNT] = {
    "--server", "--timeout", "--scene", "--min-version",
    "--from", "--to", "--unit", "--connect", "--style", "--max-expansions", "--deadline",
    "--goal-mode", "--speed", "--start-time", "--avoid", "--window", "--range", "--goals",
    "--rect", "--cells", "--set",
};

static int pathctl_parse_path_options(pathctl_args *a, const char *const *val);

/* Checks and converts the path command's options. Returns -1 or an exit code. */
static int pathctl_parse_path(pathctl_args *a, const char *const *val)
{
    a->req.scene = a->scene;
    if (!a->scene || !a->scene[0] || !a->from || !a->to == !val[OPT_GOALS])
        return pathctl_usage_error("%s", "path needs --scene, --from and one of --to or --goals");
    if (pathctl_parse_point(a->from, a->world, &a->req.start))
        return pathctl_usage_error("bad --from %s (want X,Y)", a->from);
    if (a->to && pathctl_parse_point(a->to, a->world, &a->req.goal))
        return pathctl_usage_error("bad --to %s (want X,Y)", a->to);
    if (val[OPT_GOALS]) {
        long n = pathctl_parse_points(val[OPT_GOALS], a->world, PDC_MAX_GOALS, &a->goals);
        if (n < 0)
            return pathctl_usage_error("bad --goals %s (want \"X,Y;X,Y\", at most 64 points)", val[OPT_GOALS]);
        a->req.goals = a->goals;
        a->req.goal_count = (size_t)n;
    }
    if (val[OPT_RANGE] &&
        (pathctl_parse_number(val[OPT_RANGE], &a->req.range) || !(a->req.range >= 0 && a->req.range <= PDC_MAX_RANGE)))
        return pathctl_usage_error("bad --range %s (cells, 0..128)", val[OPT_RANGE]);
    if (a->req.line_of_sight && !(a->req.range > 0))
        return pathctl_usage_error("%s", "--los needs --range R > 0");
    /* The server sends world coordinates only when asked: ask when they
     * are printed. */
    a->req.want_world = a->world || a->json;
    return pathctl_parse_path_options(a, val);
}

/* "SCENE:X,Y": a heap copy of SCENE in *scene and the point. 0 or -1. */
static int pathctl_parse_scene_point(const char *s, int world, char **scene, pdc_point *pt)
{
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s || pathctl_parse_point(colon + 1, world, pt))
        return -1;
    size_t n = (size_t)(colon - s);
    *scene = malloc(n + 1);
    if (!*scene)
        return -1;
    memcpy(*scene, s, n);
    (*scene)[n] = '\0';
    return 0;
}

/* Checks and converts the route command's options: the path command's,
 * except those a route has no use for. Returns -1 or an exit code. */
static int pathctl_parse_route(pathctl_args *a, const char *const *val)
{
    static const pathctl_opt path_only[] = {OPT_SCENE, OPT_CONNECT, OPT_AVOID, OPT_WINDOW, OPT_RANGE, OPT_GOALS};
    for (size_t i = 0; i < sizeof path_only / sizeof path_only[0]; i++)
        if (val[path_only[i]])
            return pathctl_usage_error("option %s belongs to the path command", pathctl_opt_names[path_only[i]]);
    if (a->req.snap || a->req.partial_on_cutoff || a->req.line_of_sight || a->req.avoid_reserved)
        return pathctl_usage_error("option %s belongs to the path command",
                                   a->req.snap ? "--snap" : a->req.partial_on_cutoff ? "--partial"
                                   : a->req.line_of_sight ? "--los" : "--avoid-reserved");
    if (!a->from || !a->to)
        return pathctl_usage_error("%s", "route needs --from SCENE:X,Y and --to SCENE:X,Y");
    if (pathctl_parse_scene_point(a->from, a->world, &a->route_names[0], &a->route.start))
        return pathctl_usage_error("bad --from %s (want SCENE:X,Y)", a->from);
    if (pathctl_parse_scene_point(a->to, a->world, &a->route_names[1], &a->route.goal))
        return pathctl_usage_error("bad --to %s (want SCENE:X,Y)", a->to);
    int code = pathctl_parse_path_options(a, val);
    if (code >= 0)
        return code;
    a->route.from_scene = a->route_names[0];
    a->route.to_scene = a->route_names[1];
    a->route.want_world = a->world || a->json;
    a->route.unit_size = a->req.unit_size;
    a->route.style = a->req.style;
    a->route.goal_mode = a->req.goal_mode;
    a->route.speed = a->req.speed;
    a->route.start_time = a->req.start_time;
    a->route.max_expansions = a->req.max_expansions;
    a->route.deadline_ms = a->req.deadline_ms;
    return -1;
}

/* The options path and route share (and path's own, which route refuses
 * before it gets here). Returns -1 or an exit code. */
static int pathctl_parse_path_options(pathctl_args *a, const char *const *val)
{
    long n;
    if (val[OPT_UNIT]) {
        if (pathctl_parse_long(val[OPT_UNIT], 1, UINT16_MAX, &n))
            return pathctl_usage_error("bad --unit %s", val[OPT_UNIT]);
        a->req.unit_size = (uint32_t)n;
    }
    if (val[OPT_CONNECT]) {
        if (pathctl_parse_long(val[OPT_CONNECT], 4, 8, &n) || (n != 4 && n != 8))
            return pathctl_usage_error("bad --connect %s (4 or 8)", val[OPT_CONNECT]);
        a->req.connectivity = (int)n;
    }
    if (val[OPT_STYLE]) {
        const char *style = val[OPT_STYLE];
        if (!strcmp(style, "cells"))
            a->req.style = PDC_STYLE_CELLS;
        else if (!strcmp(style, "corners"))
            a->req.style = PDC_STYLE_CORNERS;
        else if (!strcmp(style, "smooth"))
            a->req.style = PDC_STYLE_SMOOTH;
        else
            return pathctl_usage_error("bad --style %s (cells, corners or smooth)", style);
    }
    if (val[OPT_GOAL_MODE]) {
        const char *mode = val[OPT_GOAL_MODE];
        if (!strcmp(mode, "exact"))
            a->req.goal_mode = PDC_GOAL_EXACT;
        else if (!strcmp(mode, "nearest"))
            a->req.goal_mode = PDC_GOAL_NEAREST;
        else if (!strcmp(mode, "line"))
            a->req.goal_mode = PDC_GOAL_LINE;
        else
            return pathctl_usage_error("bad --goal-mode %s (exact, nearest or line)", mode);
    }
    if (val[OPT_MAX_EXPANSIONS] && pathctl_parse_u64(val[OPT_MAX_EXPANSIONS], &a->req.max_expansions))
        return pathctl_usage_error("bad --max-expansions %s", val[OPT_MAX_EXPANSIONS]);
    if (val[OPT_DEADLINE]) {
        uint64_t ms;
        if (pathctl_parse_u64(val[OPT_DEADLINE], &ms) || ms > UINT32_MAX)
            return pathctl_usage_error("bad --deadline %s (milliseconds)", val[OPT_DEADLINE]);
        a->req.deadline_ms = (uint32_t)ms;
    }
    if (val[OPT_SPEED] && (pathctl_parse_number(val[OPT_SPEED], &a->req.speed) || a->req.speed < 0))
        return pathctl_usage_error("bad --speed %s (world units per second, >= 0)", val[OPT_SPEED]);
    if (val[OPT_START_TIME] && pathctl_parse_number(val[OPT_START_TIME], &a->req.start_time))
        return pathctl_usage_error("bad --start-time %s (seconds)", val[OPT_START_TIME]);
    if (val[OPT_AVOID]) {
        long count = pathctl_parse_cells(val[OPT_AVOID], PDC_MAX_AVOID, &a->avoid);
        if (count < 0)
            return pathctl_usage_error("bad --avoid %s (want \"X,Y;X,Y\", at most 4096 cells)", val[OPT_AVOID]);
        a->req.avoid = a->avoid;
        a->req.avoid_count = (size_t)count;
    }
    if (val[OPT_WINDOW]) {
        if (pathctl_parse_rect(val[OPT_WINDOW], &a->req.window_min, &a->req.window_max) ||
            a->req.window_min.x < 0 || a->req.window_min.y < 0)
            return pathctl_usage_error("bad --window %s (want X0,Y0,X1,Y1, 0 <= X0 <= X1, 0 <= Y0 <= Y1)",
                                       val[OPT_WINDOW]);
        a->req.has_window = 1;
    }
    return -1;
}

/* Checks and converts the update command's options. Returns -1 or an exit code. */
static int pathctl_parse_update(pathctl_args *a, const char *const *val)
{
    a->update.scene = a->scene;
    if (!a->scene || !a->scene[0] || !val[OPT_SET] || !val[OPT_RECT] == !val[OPT_CELLS])
        return pathctl_usage_error("%s", "update needs --scene, --set and one of --rect or --cells");
    if (val[OPT_RECT]) {
        if (pathctl_parse_rect(val[OPT_RECT], &a->update.rect_min, &a->update.rect_max))
            return pathctl_usage_error("bad --rect %s (want X0,Y0,X1,Y1 with X0 <= X1, Y0 <= Y1)",
                                       val[OPT_RECT]);
        a->update.is_rect = 1;
    } else {
        long count = pathctl_parse_cells(val[OPT_CELLS], PATHCTL_MAX_UPDATE_CELLS, &a->update_cells);
        if (count < 0)
            return pathctl_usage_error("bad --cells %s (want \"X,Y;X,Y\", at most 21800 cells)", val[OPT_CELLS]);
        a->update.cells = a->update_cells;
        a->update.cell_count = (size_t)count;
    }
    const char *set = val[OPT_SET];
    long cost;
    if (!strcmp(set, "blocked"))
        a->update.op = PDC_UPDATE_BLOCK;
    else if (!strcmp(set, "passable"))
        a->update.op = PDC_UPDATE_PASS;
    else if (!strcmp(set, "restore"))
        a->update.op = PDC_UPDATE_RESTORE;
    else if (!strncmp(set, "cost=", 5) && !pathctl_parse_long(set + 5, 1, 255, &cost)) {
        a->update.op = PDC_UPDATE_COST;
        a->update.cost = (uint32_t)cost;
    } else
        return pathctl_usage_error("bad --set %s (blocked, passable, cost=1..255 or restore)", set);
    return -1;
}

/* Fills args from argv. Returns -1 to continue, or an exit code. */
static int pathctl_parse(int argc, char **argv, pathctl_args *a)
{
    const char *val[OPT_COUNT] = {0};
    memset(a, 0, sizeof *a);
    a->server = PDC_DEFAULT_SERVER;
    a->timeout_ms = PDC_DEFAULT_TIMEOUT_MS;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            pathctl_usage(stdout);
            return 0;
        }
        if (pathctl_is_option(arg, "--token")) {
            if (!(a->token = pathctl_option_value(argc, argv, &i, "--token")))
                return pathctl_usage_error("option %s needs a value", "--token");
        } else if (!strcmp(arg, "--json")) {
            a->json = 1;
        } else if (!strcmp(arg, "--world")) {
            a->world = 1;
            a->path_option = arg;
        } else if (!strcmp(arg, "--snap")) {
            a->req.snap = 1;
            a->path_option = arg;
        } else if (!strcmp(arg, "--los")) {
            a->req.line_of_sight = 1;
            a->path_option = arg;
        } else if (!strcmp(arg, "--partial")) {
            a->req.partial_on_cutoff = 1;
            a->path_option = arg;
        } else if (!strcmp(arg, "--avoid-reserved")) {
            a->req.avoid_reserved = 1;
            a->path_option = arg;
        } else if (arg[0] == '-' && arg[1] == '-') {
            size_t k = 0;
            while (k < OPT_COUNT && !pathctl_is_option(arg, pathctl_opt_names[k]))
                k++;
            if (k == OPT_COUNT)
                return pathctl_usage_error("unknown option %s", arg);
            const char *v = pathctl_option_value(argc, argv, &i, pathctl_opt_names[k]);
            if (!v)
                return pathctl_usage_error("option %s needs a value", pathctl_opt_names[k]);
            val[k] = v;
            if (k == OPT_TIMEOUT) {
                long t;
                if (pathctl_parse_long(v, 1, PATHCTL_MAX_TIMEOUT_MS, &t))
                    return pathctl_usage_error("bad --timeout %s (milliseconds, > 0)", v);
                a->timeout_ms = (int)t;
            }
            if (k >= OPT_FROM && k <= OPT_GOALS)
                a->path_option = pathctl_opt_names[k];
            else if (k >= OPT_RECT)
                a->update_option = pathctl_opt_names[k];
        } else if (arg[0] == '-' && arg[1] != '\0') {
            return pathctl_usage_error("unknown option %s", arg);
        } else if (!a->command) {
            a->command = arg;
        } else if (!a->name) {
            a->name = arg;
        } else {
            return pathctl_usage_error("unexpected argument %s", arg);
        }
    }
    if (val[OPT_SERVER])
        a->server = val[OPT_SERVER];
    if (!a->token && getenv("PATHD_TOKEN") && *getenv("PATHD_TOKEN"))
        a->token = getenv("PATHD_TOKEN");
    a->scene = val[OPT_SCENE];
    if (val[OPT_MIN_VERSION] && pathctl_parse_u64(val[OPT_MIN_VERSION], &a->min_version))
        return pathctl_usage_error("bad --min-version %s", val[OPT_MIN_VERSION]);
    a->req.min_version = a->min_version;
    a->from = val[OPT_FROM];
    a->to = val[OPT_TO];
    if (!a->command)
        return pathctl_usage_error("%s", "no command given");
    int is_route = !strcmp(a->command, "route");
    int is_path = !strcmp(a->command, "path") || is_route;
    int is_update = !strcmp(a->command, "update");
    if (!is_path && !is_update && strcmp(a->command, "scenes") && strcmp(a->command, "info") &&
        strcmp(a->command, "stats") && strcmp(a->command, "limits") && strcmp(a->command, "ping") && strcmp(a->command, "reload"))
        return pathctl_usage_error("unknown command %s", a->command);
    if (!is_path && a->path_option)
        return pathctl_usage_error("option %s belongs to the path and route commands", a->path_option);
    if (!is_update && a->update_option)
        return pathctl_usage_error("option %s belongs to the update command", a->update_option);
    if (!is_path && !is_update && a->scene)
        return pathctl_usage_error("%s takes no --scene", a->command);
    if (val[OPT_MIN_VERSION] && (is_route || (!is_path && strcmp(a->command, "info"))))
        return pathctl_usage_error("%s", "--min-version belongs to the path and info commands");
    if (!strcmp(a->command, "info") ? !a->name : a->name != NULL)
        return pathctl_usage_error(a->name ? "unexpected argument %s" : "info needs a scene name%s",
                                   a->name ? a->name : "");
    if (is_route)
        return pathctl_parse_route(a, val);
    if (is_path)
        return pathctl_parse_path(a, val);
    if (is_update)
        return pathctl_parse_update(a, val);
    return -1;
}

/* Prints a cJSON object on one line and frees it. */
static void pathctl_print_json(cJSON *obj)
{
    char *text = obj ? cJSON_PrintUnformatted(obj) : NULL;
    if (text) {
        puts(text);
        free(text);
    } else {
        fputs("{\"status\":\"NO_MEMORY\"}\n", stdout);
    }
    cJSON_Delete(obj);
}

/* Reports a call that did not return OK; returns the exit code. */
static int pathctl_fail(const pathctl_args *a, int status, const char *detail)
{
    if (a->json && status >= 0) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "status", pdc_status_name(status));
        if (detail && detail[0])
            cJSON_AddStringToObject(o, "message", detail);
        pathctl_print_json(o);
    }
    fprintf(stderr, "pathctl: %s%s%s\n", pdc_status_name(status),
            detail && detail[0] ? ": " : "", detail ? detail : "");
    if (status == PDC_ERR_DISCONNECTED || status == PDC_ERR_TIMEOUT || status == PDC_ERR_CONNECT)
        return PATHCTL_EXIT_CONNECT;
    return status == PDC_ERR_ARG ? PATHCTL_EXIT_USAGE : PATHCTL_EXIT_ANSWER;
}

/* [x,y] for a substituted endpoint, or JSON null. */
static cJSON *pathctl_json_cell(int present, pdc_xy cell)
{
    if (!present)
        return cJSON_CreateNull();
    const double xy[2] = {cell.x, cell.y};
    return cJSON_CreateDoubleArray(xy, 2);
}

static int pathctl_path(pdc_conn *c, const pathctl_args *a)
{
    pdc_path_result r;
    int status = pdc_find_path(c, &a->req, &r);
    int answered = status >= 0;
    int timed = a->req.speed > 0;
    if (answered && a->json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "status", pdc_status_name(status));
        cJSON_AddNumberToObject(o, "cost", r.cost);
        cJSON_AddNumberToObject(o, "expansions", (double)r.expansions);
        cJSON_AddNumberToObject(o, "micros", (double)r.search_micros);
        cJSON_AddNumberToObject(o, "version", (double)r.scene_version);
        if (r.message[0])
            cJSON_AddStringToObject(o, "message", r.message);
        cJSON_AddItemToObject(o, "start_used", pathctl_json_cell(r.has_start_used, r.start_used));
        cJSON_AddItemToObject(o, "goal_used", pathctl_json_cell(r.has_goal_used, r.goal_used));
        if (r.cutoff != PDC_OK)
            cJSON_AddStringToObject(o, "cutoff", pdc_status_name(r.cutoff));
        else
            cJSON_AddNullToObject(o, "cutoff");
        if (a->req.goal_count > 0 && (status == PDC_OK || status == PDC_PARTIAL))
            cJSON_AddNumberToObject(o, "goal_index", r.goal_index);
        else
            cJSON_AddNullToObject(o, "goal_index");
        cJSON *cells = cJSON_AddArrayToObject(o, "waypoints");
        cJSON *world = cJSON_AddArrayToObject(o, "world");
        cJSON *times = timed ? cJSON_AddArrayToObject(o, "times") : NULL;
        if (!timed)
            cJSON_AddNullToObject(o, "times");
        for (size_t i = 0; i < r.count && cells && world; i++) {
            const double xy[2] = {r.waypoints[i].x, r.waypoints[i].y};
            const double wxy[2] = {r.waypoints[i].wx, r.waypoints[i].wy};
            cJSON_AddItemToArray(cells, cJSON_CreateDoubleArray(xy, 2));
            cJSON_AddItemToArray(world, cJSON_CreateDoubleArray(wxy, 2));
            if (times)
                cJSON_AddItemToArray(times, cJSON_CreateNumber(r.waypoints[i].t));
        }
        pathctl_print_json(o);
    } else if (answered) {
        printf("status %s cost %.2f expansions %" PRIu64 " version %" PRIu64 " waypoints %zu\n",
               pdc_status_name(status), r.cost, r.expansions, r.scene_version, r.count);
        if (r.has_start_used)
            printf("start_used %d,%d (start was blocked; snapped)\n", r.start_used.x, r.start_used.y);
        if (r.has_goal_used)
            printf("goal_used %d,%d (the path ends there, not at the goal)\n", r.goal_used.x, r.goal_used.y);
        if (r.cutoff != PDC_OK)
            printf("cutoff %s (path to the best node found)\n", pdc_status_name(r.cutoff));
        if (a->req.goal_count > 0 && (status == PDC_OK || status == PDC_PARTIAL))
            printf("goal_index %u (the goal reached)\n", r.goal_index);
        for (size_t i = 0; i < r.count; i++) {
            printf("%d,%d", r.waypoints[i].x, r.waypoints[i].y);
            if (a->world)
                printf(" %.10g,%.10g", r.waypoints[i].wx, r.waypoints[i].wy);
            if (timed)
                printf(" t=%.3f", r.waypoints[i].t);
            putchar('\n');
        }
    }
    int code = 0;
    if (status != PDC_OK && status != PDC_PARTIAL) {
        if (answered) {
            fprintf(stderr, "pathctl: %s%s%s\n", pdc_status_name(status),
                    r.message[0] ? ": " : "", r.message);
            code = PATHCTL_EXIT_ANSWER;
        } else {
            code = pathctl_fail(a, status, pdc_last_error(c));
        }
    }
    pdc_path_result_free(&r);
    return code;
}

/* One leg of a route as JSON: scene, cost, waypoints, world centres, times
 * (null without --speed) and the portal at its end (null on the last leg). */
static cJSON *pathctl_json_leg(const pdc_route_leg *leg, int timed)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "scene", leg->scene);
    cJSON_AddNumberToObject(o, "cost", leg->cost);
    cJSON_AddNumberToObject(o, "version", (double)leg->scene_version);
    cJSON *cells = cJSON_AddArrayToObject(o, "waypoints");
    cJSON *world = cJSON_AddArrayToObject(o, "world");
    cJSON *times = timed ? cJSON_AddArrayToObject(o, "times") : NULL;
    if (!timed)
        cJSON_AddNullToObject(o, "times");
    for (size_t i = 0; i < leg->count && cells && world; i++) {
        const double xy[2] = {leg->waypoints[i].x, leg->waypoints[i].y};
        const double wxy[2] = {leg->waypoints[i].wx, leg->waypoints[i].wy};
        cJSON_AddItemToArray(cells, cJSON_CreateDoubleArray(xy, 2));
        cJSON_AddItemToArray(world, cJSON_CreateDoubleArray(wxy, 2));
        if (times)
            cJSON_AddItemToArray(times, cJSON_CreateNumber(leg->waypoints[i].t));
    }
    if (!leg->has_portal) {
        cJSON_AddNullToObject(o, "portal");
        return o;
    }
    cJSON *portal = cJSON_AddObjectToObject(o, "portal");
    if (portal) {
        cJSON_AddStringToObject(portal, "name", leg->portal);
        cJSON_AddItemToObject(portal, "exit", pathctl_json_cell(1, leg->portal_exit));
        cJSON_AddStringToObject(portal, "to_scene", leg->portal_to_scene);
        cJSON_AddItemToObject(portal, "entry", pathctl_json_cell(1, leg->portal_entry));
        cJSON_AddNumberToObject(portal, "cost", leg->portal_cost);
    }
    return o;
}

static int pathctl_route(pdc_conn *c, const pathctl_args *a)
{
    pdc_route_result r;
    int status = pdc_find_route(c, &a->route, &r);
    int answered = status >= 0;
    int timed = a->route.speed > 0;
    if (answered && a->json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "status", pdc_status_name(status));
        cJSON_AddNumberToObject(o, "total_cost", r.total_cost);
        cJSON *legs = cJSON_AddArrayToObject(o, "legs");
        for (size_t i = 0; i < r.leg_count && legs; i++)
            cJSON_AddItemToArray(legs, pathctl_json_leg(&r.legs[i], timed));
        cJSON_AddNumberToObject(o, "expansions", (double)r.expansions);
        cJSON_AddNumberToObject(o, "micros", (double)r.micros);
        cJSON_AddBoolToObject(o, "pinned", r.pinned);
        cJSON_AddItemToObject(o, "goal_used", pathctl_json_cell(r.has_goal_used, r.goal_used));
        if (r.message[0])
            cJSON_AddStringToObject(o, "message", r.message);
        pathctl_print_json(o);
    } else if (answered && r.leg_count > 0) {
        for (size_t i = 0; i < r.leg_count; i++) {
            const pdc_route_leg *leg = &r.legs[i];
            printf("leg %zu %s %.2f", i + 1, leg->scene, leg->cost);
            if (leg->has_portal)
                printf(" -> portal %s (%d,%d) -> %s (%d,%d)", leg->portal, leg->portal_exit.x, leg->portal_exit.y,
                       leg->portal_to_scene, leg->portal_entry.x, leg->portal_entry.y);
            if (leg->has_portal && leg->portal_cost != 0)
                printf(" portal cost %.2f", leg->portal_cost);
            putchar('\n');
            for (size_t k = 0; k < leg->count; k++) {
                printf("  %d,%d", leg->waypoints[k].x, leg->waypoints[k].y);
                if (a->world)
                    printf(" %.10g,%.10g", leg->waypoints[k].wx, leg->waypoints[k].wy);
                if (timed)
                    printf(" t=%.3f", leg->waypoints[k].t);
                putchar('\n');
            }
        }
        printf("status %s total %.3f legs %zu expansions %" PRIu64 " micros %" PRIu64 "%s\n",
               pdc_status_name(status), r.total_cost, r.leg_count, r.expansions, r.micros,
               r.pinned ? " (pinned route)" : "");
        if (r.has_goal_used)
            printf("goal_used %d,%d (the route ends there, not at the goal)\n", r.goal_used.x, r.goal_used.y);
    }
    int code = 0;
    if (status != PDC_OK && status != PDC_PARTIAL) {
        if (answered) {
            fprintf(stderr, "pathctl: %s%s%s\n", pdc_status_name(status), r.message[0] ? ": " : "", r.message);
            code = PATHCTL_EXIT_ANSWER;
        } else {
            code = pathctl_fail(a, status, pdc_last_error(c));
        }
    }
    pdc_route_result_free(&r);
    return code;
}

static int pathctl_update(pdc_conn *c, const pathctl_args *a)
{
    pdc_update_result u;
    int status = pdc_update_cells(c, &a->update, &u);
    if (status != PDC_OK)
        return pathctl_fail(a, status, pdc_last_error(c));
    if (a->json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "status", "OK");
        cJSON_AddNumberToObject(o, "version", (double)u.version);
        cJSON_AddNumberToObject(o, "cells_changed", (double)u.cells_changed);
        cJSON_AddNumberToObject(o, "micros", (double)u.micros);
        cJSON *cut = cJSON_AddArrayToObject(o, "agents_cut");
        for (size_t i = 0; i < u.n_agents_cut && cut; i++)
            cJSON_AddItemToArray(cut, cJSON_CreateNumber((double)u.agents_cut[i]));
        pathctl_print_json(o);
    } else {
        printf("status OK version %" PRIu64 " cells_changed %" PRIu64 " micros %" PRIu64, u.version,
               u.cells_changed, u.micros);
        /* The agents whose reservations it cut, when any: they must
         * reserve again. */
        for (size_t i = 0; i < u.n_agents_cut; i++)
            printf("%s%" PRIu64, i ? "," : " agents_cut ", u.agents_cut[i]);
        putchar('\n');
    }
    return 0;
}

static int pathctl_scenes(pdc_conn *c, const pathctl_args *a)
{
    pdc_scene_list l;
    int status = pdc_list_scenes(c, &l);
    if (status != PDC_OK)
        return pathctl_fail(a, status, pdc_last_error(c));
    if (a->json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "status", "OK");
        cJSON *arr = cJSON_AddArrayToObject(o, "scenes");
        for (size_t i = 0; i < l.count && arr; i++) {
            cJSON *s = cJSON_CreateObject();
            cJSON_AddStringToObject(s, "name", l.scenes[i].name);
            cJSON_AddNumberToObject(s, "width", l.scenes[i].width);
            cJSON_AddNumberToObject(s, "height", l.scenes[i].height);
            cJSON_AddNumberToObject(s, "version", (double)l.scenes[i].version);
            cJSON_AddItemToArray(arr, s);
        }
        pathctl_print_json(o);
    } else {
        for (size_t i = 0; i < l.count; i++)
            printf("%s %dx%d version %" PRIu64 "\n", l.scenes[i].name, l.scenes[i].width,
                   l.scenes[i].height, l.scenes[i].version);
    }
    pdc_scene_list_free(&l);
    return 0;
}

static int pathctl_info(pdc_conn *c, const pathctl_args *a)
{
    pdc_scene_details s;
    int status = pdc_scene_info_at(c, a->name, a->min_version, &s);
    if (status == PDC_STALE_VERSION && a->json) {
        /* The version the scene is at, to know what to wait for. */
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "status", pdc_status_name(status));
        cJSON_AddNumberToObject(o, "version", (double)s.version);
        cJSON_AddStringToObject(o, "message", pdc_last_error(c));
        pathctl_print_json(o);
        fprintf(stderr, "pathctl: %s: %s\n", pdc_status_name(status), pdc_last_error(c));
        return PATHCTL_EXIT_ANSWER;
    }
    if (status != PDC_OK)
        return pathctl_fail(a, status, pdc_last_error(c));
    if (a->json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "status", "OK");
        cJSON_AddStringToObject(o, "name", s.name);
        cJSON_AddNumberToObject(o, "width", s.width);
        cJSON_AddNumberToObject(o, "height", s.height);
        const double origin[2] = {s.origin_x, s.origin_y};
        cJSON_AddItemToObject(o, "origin", cJSON_CreateDoubleArray(origin, 2));
        cJSON_AddNumberToObject(o, "cell_size", s.cell_size);
        cJSON *units = cJSON_AddArrayToObject(o, "unit_sizes");
        for (size_t i = 0; i < s.unit_size_count && units; i++)
            cJSON_AddItemToArray(units, cJSON_CreateNumber(s.unit_sizes[i]));
        cJSON_AddNumberToObject(o, "version", (double)s.version);
        cJSON_AddNumberToObject(o, "passable_cells", (double)s.passable_cells);
        pathctl_print_json(o);
    } else {
        printf("name: %s\nwidth: %d\nheight: %d\norigin: %.10g,%.10g\ncell_size: %.10g\n",
               s.name, s.width, s.height, s.origin_x, s.origin_y, s.cell_size);
        printf("unit_sizes: ");
        for (size_t i = 0; i < s.unit_size_count; i++)
            printf("%s%u", i ? "," : "", s.unit_sizes[i]);
        printf("\nversion: %" PRIu64 "\npassable_cells: %" PRIu64 "\n", s.version,
               s.passable_cells);
    }
    pdc_scene_details_free(&s);
    return 0;
}

/* One named number of a stats or limits answer. */
typedef struct pathctl_number {
    const char *name;
    double value;      /* integers up to 2^53 print exactly */
} pathctl_number;

/* Prints an OK answer made of named numbers: "name: value" lines, or one
 * JSON object with --json. */
static int pathctl_print_numbers(const pathctl_args *a, const pathctl_number *fields, size_t n)
{
    if (a->json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "status", "OK");
        for (size_t i = 0; i < n; i++)
            cJSON_AddNumberToObject(o, fields[i].name, fields[i].value);
        pathctl_print_json(o);
    } else {
        for (size_t i = 0; i < n; i++)
            printf("%s: %.15g\n", fields[i].name, fields[i].value);
    }
    return 0;
}

static int pathctl_stats(pdc_conn *c, const pathctl_args *a)
{
    pdc_server_stats s;
    int status = pdc_stats(c, &s);
    if (status != PDC_OK)
        return pathctl_fail(a, status, pdc_last_error(c));
    const pathctl_number fields[] = {
        {"uptime_ms", (double)s.uptime_ms},
        {"connections", (double)s.connections},
        {"requests_total", (double)s.requests_total},
        {"paths_found", (double)s.paths_found},
        {"expansions_total", (double)s.expansions_total},
        {"queue_depth", (double)s.queue_depth},
        {"in_flight", (double)s.in_flight},
        {"threads", s.threads},
        {"scenes", s.scenes},
        {"overloaded_total", (double)s.overloaded_total},
        {"malformed_total", (double)s.malformed_total},
    };
    return pathctl_print_numbers(a, fields, sizeof fields / sizeof fields[0]);
}

static int pathctl_limits(pdc_conn *c, const pathctl_args *a)
{
    pdc_limits l;
    int status = pdc_get_limits(c, &l);
    if (status != PDC_OK)
        return pathctl_fail(a, status, pdc_last_error(c));
    const pathctl_number fields[] = {
        {"max_frame_bytes", l.max_frame_bytes},
        {"max_inflight_per_conn", l.max_inflight_per_conn},
        {"max_waypoints_per_chunk", l.max_waypoints_per_chunk},
        {"max_connections", l.max_connections},
        {"job_queue_capacity", l.job_queue_capacity},
        {"idle_timeout_ms", l.idle_timeout_ms},
        {"frame_timeout_ms", l.frame_timeout_ms},
        {"default_max_expansions", (double)l.default_max_expansions},
        {"max_batch_items", l.max_batch_items},
        {"max_move_points", l.max_move_points},
        {"max_radius_cells", l.max_radius_cells},
        {"max_walk_radius", l.max_walk_radius},
        {"max_tolerance", l.max_tolerance},
        {"max_avoid_cells", l.max_avoid_cells},
        {"max_deadline_ms", l.max_deadline_ms},
        {"max_unit_size", l.max_unit_size},
        {"scene_grid_band_bytes", l.scene_grid_band_bytes},
        {"max_message_bytes", l.max_message_bytes},
        {"watch_buffer_bytes", l.watch_buffer_bytes},
        {"max_watch_scenes", l.max_watch_scenes},
        {"max_watchers", l.max_watchers},
        {"max_watches_per_conn", l.max_watches_per_conn},
        {"reservation_ttl_ms", l.reservation_ttl_ms},
        {"max_agents_per_scene", l.max_agents_per_scene},
        {"max_reservation_entries", l.max_reservation_entries},
        {"max_reservation_window_ms", l.max_reservation_window_ms},
        {"max_agent_bytes", l.max_agent_bytes},
        {"max_clock_step_ms", l.max_clock_step_ms},
    };
    return pathctl_print_numbers(a, fields, sizeof fields / sizeof fields[0]);
}

static int pathctl_ping(pdc_conn *c, const pathctl_args *a)
{
    uint64_t rtt = 0;
    int status = pdc_ping(c, &rtt);
    if (status != PDC_OK)
        return pathctl_fail(a, status, pdc_last_error(c));
    if (a->json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "status", "OK");
        cJSON_AddNumberToObject(o, "rtt_micros", (double)rtt);
        pathctl_print_json(o);
    } else {
        printf("pong from %s in %.3f ms\n", a->server, (double)rtt / 1000.0);
    }
    return 0;
}

static int pathctl_reload(pdc_conn *c, const pathctl_args *a)
{
    int status = pdc_reload(c);
    if (status != PDC_OK)
        return pathctl_fail(a, status, pdc_last_error(c));
    if (a->json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "status", "OK");
        pathctl_print_json(o);
    } else {
        printf("reload started on %s (its outcome is in the server's log)\n", a->server);
    }
    return 0;
}

int main(int argc, char **argv)
{
    /* render parses its own arguments and needs a server only sometimes. */
    int code = pathctl_render_main(argc, argv);
    if (code != PATHCTL_RENDER_NOT_MINE)
        return code;
    code = pathctl_query_main(argc, argv);
    if (code != PATHCTL_QUERY_NOT_MINE)
        return code;
    code = pathctl_scene_main(argc, argv);
    if (code != PATHCTL_SCENE_NOT_MINE)
        return code;
    code = pathctl_watch_main(argc, argv);
    if (code != PATHCTL_WATCH_NOT_MINE)
        return code;
    code = pathctl_reserve_main(argc, argv);
    if (code != PATHCTL_RESERVE_NOT_MINE)
        return code;

    pathctl_args args;
    code = pathctl_parse(argc, argv, &args);
    if (code >= 0) {
        pathctl_args_free(&args);
        return code;
    }

    char err[PDC_MESSAGE_MAX];
    /* One call at a time: flow control has nothing to hold back, so no
     * GetLimits round trip either. */
    pdc_conn *c = pdc_connect_flags(args.server, args.timeout_ms, PDC_CONNECT_NO_FLOW_CONTROL, err,
                                    sizeof err);
    if (!c) {
        fprintf(stderr, "pathctl: %s\n", err);
        pathctl_args_free(&args);
        return PATHCTL_EXIT_CONNECT;
    }
    if (args.token && (code = pdc_auth(c, args.token, NULL, 0)) != PDC_OK) {
        code = pathctl_fail(&args, code, pdc_last_error(c));
        pdc_close(c);
        pathctl_args_free(&args);
        return code;
    }
    if (!strcmp(args.command, "path"))
        code = pathctl_path(c, &args);
    else if (!strcmp(args.command, "route"))
        code = pathctl_route(c, &args);
    else if (!strcmp(args.command, "update"))
        code = pathctl_update(c, &args);
    else if (!strcmp(args.command, "scenes"))
        code = pathctl_scenes(c, &args);
    else if (!strcmp(args.command, "info"))
        code = pathctl_info(c, &args);
    else if (!strcmp(args.command, "stats"))
        code = pathctl_stats(c, &args);
    else if (!strcmp(args.command, "limits"))
        code = pathctl_limits(c, &args);
    else if (!strcmp(args.command, "reload"))
        code = pathctl_reload(c, &args);
    else
        code = pathctl_ping(c, &args);
    pdc_close(c);
    pathctl_args_free(&args);
    return code;
}
