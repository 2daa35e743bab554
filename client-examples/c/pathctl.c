/*
 * pathctl.c - command-line client for pathd, built on pathd_client.h.
 *
 * It exists so a person (or a shell script) can ask the daemon for a path,
 * list its scenes or read its statistics without writing code, and as a
 * worked example of the client library. Human-readable output by default,
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

#include "pathd_client.h"

#define PATHCTL_EXIT_ANSWER 1   /* the server answered with a non-OK status */
#define PATHCTL_EXIT_USAGE 2
#define PATHCTL_EXIT_CONNECT 3
/* Longest --timeout accepted, in ms: an hour is already absurd for one call. */
#define PATHCTL_MAX_TIMEOUT_MS 3600000L

typedef struct pathctl_args {
    const char *server;
    int json;
    int timeout_ms;
    const char *command;
    const char *name;           /* info NAME */
    int path_options_seen;      /* a path-only option was given */
    const char *from, *to;
    int world;
    pdc_path_req req;
} pathctl_args;

static void pathctl_usage(FILE *out)
{
    fprintf(out,
            "usage: pathctl [--server HOST:PORT] [--json] [--timeout MS] COMMAND\n"
            "\n"
            "commands:\n"
            "  path --scene NAME --from X,Y --to X,Y [--world] [--unit N]\n"
            "       [--connect 4|8] [--style cells|corners]\n"
            "       [--max-expansions N] [--deadline MS]\n"
            "                     find a path; --world reads X,Y as world coordinates\n"
            "  scenes             list scenes, one a line: name WxH version N\n"
            "  info NAME          describe one scene\n"
            "  stats              server statistics\n"
            "  ping               round-trip time\n"
            "\n"
            "options:\n"
            "  --server HOST:PORT  default %s ([::1]:PORT for IPv6)\n"
            "  --json              one JSON object per answer\n"
            "  --timeout MS        per-call timeout (default %d)\n"
            "  -h, --help          this text\n"
            "\n"
            "exit status: 0 OK/PARTIAL, 1 other answer, 2 usage, 3 connection failure\n",
            PDC_DEFAULT_SERVER, PDC_DEFAULT_TIMEOUT_MS);
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

/* "X,Y" as cells (integers) or world coordinates (finite doubles). */
static int pathctl_parse_point(const char *s, int world, pdc_point *out)
{
    char *end;
    errno = 0;
    if (world) {
        double x = strtod(s, &end);
        if (errno || end == s || *end != ',')
            return -1;
        const char *ys = end + 1;
        double y = strtod(ys, &end);
        if (errno || end == ys || *end || x != x || y != y)
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

/* Fills args from argv. Returns -1 to continue, or an exit code. */
static int pathctl_parse(int argc, char **argv, pathctl_args *a)
{
    memset(a, 0, sizeof *a);
    a->server = PDC_DEFAULT_SERVER;
    a->timeout_ms = PDC_DEFAULT_TIMEOUT_MS;
    const char *unit = NULL, *conn = NULL, *style = NULL, *maxexp = NULL, *deadline = NULL;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char *v;
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            pathctl_usage(stdout);
            return 0;
        }
        if (!strcmp(arg, "--json")) {
            a->json = 1;
        } else if (!strcmp(arg, "--world")) {
            a->world = 1;
            a->path_options_seen = 1;
        } else if (arg[0] == '-' && arg[1] == '-') {
            static const char *const with_value[] = {
                "--server", "--timeout", "--scene", "--from", "--to", "--unit",
                "--connect", "--style", "--max-expansions", "--deadline",
            };
            size_t k = 0, nopts = sizeof with_value / sizeof with_value[0];
            while (k < nopts && !pathctl_is_option(arg, with_value[k]))
                k++;
            if (k == nopts)
                return pathctl_usage_error("unknown option %s", arg);
            v = pathctl_option_value(argc, argv, &i, with_value[k]);
            if (!v)
                return pathctl_usage_error("option %s needs a value", with_value[k]);
            switch (k) {
            case 0: a->server = v; break;
            case 1: {
                long t;
                if (pathctl_parse_long(v, 1, PATHCTL_MAX_TIMEOUT_MS, &t))
                    return pathctl_usage_error("bad --timeout %s (milliseconds, > 0)", v);
                a->timeout_ms = (int)t;
                break;
            }
            case 2: a->req.scene = v; break;
            case 3: a->from = v; break;
            case 4: a->to = v; break;
            case 5: unit = v; break;
            case 6: conn = v; break;
            case 7: style = v; break;
            case 8: maxexp = v; break;
            default: deadline = v; break;
            }
            if (k >= 2)
                a->path_options_seen = 1;
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
    if (!a->command)
        return pathctl_usage_error("%s", "no command given");
    int is_path = !strcmp(a->command, "path");
    if (!is_path && strcmp(a->command, "scenes") && strcmp(a->command, "info") &&
        strcmp(a->command, "stats") && strcmp(a->command, "ping"))
        return pathctl_usage_error("unknown command %s", a->command);
    if (!is_path && a->path_options_seen)
        return pathctl_usage_error("%s takes no path options", a->command);
    if (!strcmp(a->command, "info") ? !a->name : a->name != NULL)
        return pathctl_usage_error(a->name ? "unexpected argument %s" : "info needs a scene name%s",
                                   a->name ? a->name : "");
    if (!is_path)
        return -1;

    if (!a->req.scene || !a->req.scene[0] || !a->from || !a->to)
        return pathctl_usage_error("%s", "path needs --scene, --from and --to");
    if (pathctl_parse_point(a->from, a->world, &a->req.start))
        return pathctl_usage_error("bad --from %s (want X,Y)", a->from);
    if (pathctl_parse_point(a->to, a->world, &a->req.goal))
        return pathctl_usage_error("bad --to %s (want X,Y)", a->to);
    long n;
    if (unit) {
        if (pathctl_parse_long(unit, 1, UINT16_MAX, &n))
            return pathctl_usage_error("bad --unit %s", unit);
        a->req.unit_size = (uint32_t)n;
    }
    if (conn) {
        if (pathctl_parse_long(conn, 4, 8, &n) || (n != 4 && n != 8))
            return pathctl_usage_error("bad --connect %s (4 or 8)", conn);
        a->req.connectivity = (int)n;
    }
    if (style) {
        if (!strcmp(style, "cells"))
            a->req.style = PDC_STYLE_CELLS;
        else if (!strcmp(style, "corners"))
            a->req.style = PDC_STYLE_CORNERS;
        else
            return pathctl_usage_error("bad --style %s (cells or corners)", style);
    }
    if (maxexp && pathctl_parse_u64(maxexp, &a->req.max_expansions))
        return pathctl_usage_error("bad --max-expansions %s", maxexp);
    if (deadline) {
        uint64_t ms;
        if (pathctl_parse_u64(deadline, &ms) || ms > UINT32_MAX)
            return pathctl_usage_error("bad --deadline %s (milliseconds)", deadline);
        a->req.deadline_ms = (uint32_t)ms;
    }
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

static int pathctl_path(pdc_conn *c, const pathctl_args *a)
{
    pdc_path_result r;
    int status = pdc_find_path(c, &a->req, &r);
    int answered = status >= 0;
    if (answered && a->json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "status", pdc_status_name(status));
        cJSON_AddNumberToObject(o, "cost", r.cost);
        cJSON_AddNumberToObject(o, "expansions", (double)r.expansions);
        cJSON_AddNumberToObject(o, "micros", (double)r.search_micros);
        cJSON_AddNumberToObject(o, "version", (double)r.scene_version);
        if (r.message[0])
            cJSON_AddStringToObject(o, "message", r.message);
        cJSON *cells = cJSON_AddArrayToObject(o, "waypoints");
        cJSON *world = cJSON_AddArrayToObject(o, "world");
        for (size_t i = 0; i < r.count && cells && world; i++) {
            const double xy[2] = {r.waypoints[i].x, r.waypoints[i].y};
            const double wxy[2] = {r.waypoints[i].wx, r.waypoints[i].wy};
            cJSON_AddItemToArray(cells, cJSON_CreateDoubleArray(xy, 2));
            cJSON_AddItemToArray(world, cJSON_CreateDoubleArray(wxy, 2));
        }
        pathctl_print_json(o);
    } else if (answered) {
        printf("status %s cost %.2f expansions %" PRIu64 " version %" PRIu64 " waypoints %zu\n",
               pdc_status_name(status), r.cost, r.expansions, r.scene_version, r.count);
        for (size_t i = 0; i < r.count; i++) {
            if (a->world)
                printf("%d,%d %.10g,%.10g\n", r.waypoints[i].x, r.waypoints[i].y,
                       r.waypoints[i].wx, r.waypoints[i].wy);
            else
                printf("%d,%d\n", r.waypoints[i].x, r.waypoints[i].y);
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
    int status = pdc_scene_info(c, a->name, &s);
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

static int pathctl_stats(pdc_conn *c, const pathctl_args *a)
{
    pdc_server_stats s;
    int status = pdc_stats(c, &s);
    if (status != PDC_OK)
        return pathctl_fail(a, status, pdc_last_error(c));
    const struct {
        const char *name;
        uint64_t value;
    } fields[] = {
        {"uptime_ms", s.uptime_ms},
        {"connections", s.connections},
        {"requests_total", s.requests_total},
        {"paths_found", s.paths_found},
        {"expansions_total", s.expansions_total},
        {"queue_depth", s.queue_depth},
        {"in_flight", s.in_flight},
        {"threads", s.threads},
        {"scenes", s.scenes},
        {"overloaded_total", s.overloaded_total},
        {"malformed_total", s.malformed_total},
    };
    size_t n = sizeof fields / sizeof fields[0];
    if (a->json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "status", "OK");
        for (size_t i = 0; i < n; i++)
            cJSON_AddNumberToObject(o, fields[i].name, (double)fields[i].value);
        pathctl_print_json(o);
    } else {
        for (size_t i = 0; i < n; i++)
            printf("%s: %" PRIu64 "\n", fields[i].name, fields[i].value);
    }
    return 0;
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

int main(int argc, char **argv)
{
    pathctl_args args;
    int code = pathctl_parse(argc, argv, &args);
    if (code >= 0)
        return code;

    char err[PDC_MESSAGE_MAX];
    pdc_conn *c = pdc_connect(args.server, args.timeout_ms, err, sizeof err);
    if (!c) {
        fprintf(stderr, "pathctl: %s\n", err);
        return PATHCTL_EXIT_CONNECT;
    }
    if (!strcmp(args.command, "path"))
        code = pathctl_path(c, &args);
    else if (!strcmp(args.command, "scenes"))
        code = pathctl_scenes(c, &args);
    else if (!strcmp(args.command, "info"))
        code = pathctl_info(c, &args);
    else if (!strcmp(args.command, "stats"))
        code = pathctl_stats(c, &args);
    else
        code = pathctl_ping(c, &args);
    pdc_close(c);
    return code;
}
