/*
 * pathctl_scene.c - `pathctl scene create|instance|drop`: scenes made at run
 * time (see pathctl_scene.h). create reads a map file and sends its bytes
 * (the server parses it as the config would); instance makes a scene that
 * shares a template's memory until it is updated; drop stops serving one.
 * Human-readable by default; with --json one object with status and version.
 */
#include "pathctl_scene.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "pathctl_query.h"
#include "pathd_client.h"

#define PS_EXIT_ANSWER 1
#define PS_EXIT_USAGE 2
#define PS_EXIT_CONNECT 3
/* Largest map file create sends: the server's default frame cap is 1 MiB
 * (limits.max_frame_bytes), a larger one may be configured; 64 MiB is that
 * setting's own ceiling. */
#define PS_MAX_MAP_BYTES (64L * 1024 * 1024)
/* Unit sizes --units takes, as the server's PD_CONF_MAX_UNIT_SIZES. */
#define PS_MAX_UNITS 8

const char pathctl_scene_usage[] =
    "  scene create NAME --map FILE [--format ascii|movingai|tiled|ldtk]\n"
    "        [--origin X,Y] [--cell-size S] [--units 1,2,3]\n"
    "                     write: a scene from a map file (format from the\n"
    "                     extension: .map movingai, .tmj/.tmx/.json tiled,\n"
    "                     .ldtk ldtk, else ascii)\n"
    "  scene instance NAME --of TEMPLATE\n"
    "                     write: a scene sharing TEMPLATE's memory until updated\n"
    "  scene drop NAME [--drop-portals]\n"
    "                     write: stop serving a scene (refused while portals\n"
    "                     name it, unless --drop-portals)\n";

typedef struct ps_args {
    pathctl_conn_opts conn;
    int json;
    const char *verb, *name;
    const char *map, *format, *of;
    double origin[2], cell_size;
    uint32_t units[PS_MAX_UNITS];
    size_t n_units;
    int drop_portals;
} ps_args;

static int ps_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "pathctl: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(try pathctl --help)\n");
    return PS_EXIT_USAGE;
}

static int ps_parse_units(const char *s, ps_args *a)
{
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || v < 1 || v > 255 || a->n_units == PS_MAX_UNITS)
            return -1;
        a->units[a->n_units++] = (uint32_t)v;
        if (*end == ',' && end[1])
            end++;
        else if (*end)
            return -1;
        p = end;
    }
    return a->n_units ? 0 : -1;
}

static const char *ps_format_for(const char *path)
{
    const char *dot = strrchr(path, '.');
    if (!dot)
        return "ascii";
    if (!strcmp(dot, ".map"))
        return "movingai";
    if (!strcmp(dot, ".tmj") || !strcmp(dot, ".tmx") || !strcmp(dot, ".json"))
        return "tiled";
    if (!strcmp(dot, ".ldtk"))
        return "ldtk";
    return "ascii";
}

static int ps_parse(int argc, char **argv, ps_args *a)
{
    int seen_scene = 0;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "--json")) {
            a->json = 1;
        } else if (!strcmp(o, "--drop-portals")) {
            a->drop_portals = 1;
        } else if (o[0] == '-' && o[1]) {
            if (!v)
                return ps_usage("option %s needs a value", o);
            i++;
            int taken = pathctl_conn_option(&a->conn, o, v);
            if (taken < 0)
                return PS_EXIT_USAGE;
            if (taken) {
                continue;
            } else if (!strcmp(o, "--map")) {
                a->map = v;
            } else if (!strcmp(o, "--format")) {
                a->format = v;
            } else if (!strcmp(o, "--of")) {
                a->of = v;
            } else if (!strcmp(o, "--cell-size")) {
                if (pathctl_parse_number(v, &a->cell_size) || !(a->cell_size > 0))
                    return ps_usage("bad --cell-size %s (a number > 0)", v);
            } else if (!strcmp(o, "--origin")) {
                char buf[128];
                snprintf(buf, sizeof buf, "%s", v);
                char *comma = strchr(buf, ',');
                if (!comma)
                    return ps_usage("bad --origin %s (X,Y)", v);
                *comma = '\0';
                if (pathctl_parse_number(buf, &a->origin[0]) || pathctl_parse_number(comma + 1, &a->origin[1]))
                    return ps_usage("bad --origin %s (X,Y)", v);
            } else if (!strcmp(o, "--units")) {
                if (ps_parse_units(v, a))
                    return ps_usage("bad --units %s (sizes 1..255 separated by commas, at most 8)", v);
            } else {
                return ps_usage("unknown option %s for the scene command", o);
            }
        } else if (!seen_scene) {
            seen_scene = 1; /* the word "scene" */
        } else if (!a->verb) {
            a->verb = o;
        } else if (!a->name) {
            a->name = o;
        } else {
            return ps_usage("unexpected argument %s", o);
        }
    }
    if (!a->verb)
        return ps_usage("%s", "scene needs create, instance or drop");
    int create = !strcmp(a->verb, "create"), instance = !strcmp(a->verb, "instance"),
        drop = !strcmp(a->verb, "drop");
    if (!create && !instance && !drop)
        return ps_usage("unknown scene command %s (create, instance or drop)", a->verb);
    if (!a->name)
        return ps_usage("scene %s needs a scene name", a->verb);
    if (create != (a->map != NULL))
        return ps_usage(create ? "scene create needs --map FILE%s" : "--map belongs to scene create%s", "");
    if (!create && (a->format || a->n_units || a->cell_size || a->origin[0] || a->origin[1]))
        return ps_usage("--format, --origin, --cell-size and --units belong to scene create%s", "");
    if (instance != (a->of != NULL))
        return ps_usage(instance ? "scene instance needs --of TEMPLATE%s" : "--of belongs to scene instance%s", "");
    if (!drop && a->drop_portals)
        return ps_usage("--drop-portals belongs to scene drop%s", "");
    return -1;
}

/* Reads the whole map file; NULL with the reason printed. */
static char *ps_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "pathctl: %s: %s\n", path, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0)
        size = ftell(f);
    if (size < 0 || size > PS_MAX_MAP_BYTES || fseek(f, 0, SEEK_SET) != 0) {
        fprintf(stderr, "pathctl: %s: unreadable or larger than %ld bytes\n", path, PS_MAX_MAP_BYTES);
    } else if (!(buf = malloc((size_t)size + 1))) {
        fprintf(stderr, "pathctl: out of memory\n");
    } else if (fread(buf, 1, (size_t)size, f) != (size_t)size) {
        fprintf(stderr, "pathctl: %s: read error\n", path);
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = buf ? (size_t)size : 0;
    return buf;
}

static int ps_run(pdc_conn *c, const ps_args *a)
{
    pdc_scene_change out;
    int status;
    if (!strcmp(a->verb, "create")) {
        size_t len = 0;
        char *map = ps_read(a->map, &len);
        if (!map)
            return PS_EXIT_USAGE;
        pdc_create_scene_req req = {
            .name = a->name,
            .format = a->format ? a->format : ps_format_for(a->map),
            .map = map,
            .map_len = len,
            .origin_x = a->origin[0],
            .origin_y = a->origin[1],
            .cell_size = a->cell_size,
            .unit_sizes = a->n_units ? a->units : NULL,
            .unit_size_count = a->n_units,
        };
        status = pdc_create_scene(c, &req, &out);
        free(map);
    } else if (!strcmp(a->verb, "instance")) {
        status = pdc_create_instance(c, a->name, a->of, &out);
    } else {
        status = pdc_drop_scene(c, a->name, a->drop_portals, &out);
    }
    const char *detail = status == PDC_OK ? "" : pdc_last_error(c);
    if (a->json && status >= 0) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "status", pdc_status_name(status));
        cJSON_AddStringToObject(o, "scene", a->name);
        if (status == PDC_OK) {
            cJSON_AddNumberToObject(o, "version", (double)out.version);
            cJSON_AddNumberToObject(o, "own_bytes", (double)out.own_bytes);
            cJSON_AddNumberToObject(o, "scene_bytes", (double)out.scene_bytes);
        } else {
            cJSON_AddNullToObject(o, "version");
            if (detail && detail[0])
                cJSON_AddStringToObject(o, "message", detail);
        }
        char *text = cJSON_PrintUnformatted(o);
        puts(text ? text : "{\"status\":\"NO_MEMORY\"}");
        free(text);
        cJSON_Delete(o);
    }
    if (status != PDC_OK) {
        fprintf(stderr, "pathctl: %s%s%s\n", pdc_status_name(status), detail && detail[0] ? ": " : "",
                detail ? detail : "");
        return status == PDC_ERR_DISCONNECTED || status == PDC_ERR_TIMEOUT || status == PDC_ERR_CONNECT
                   ? PS_EXIT_CONNECT
                   : PS_EXIT_ANSWER;
    }
    if (!a->json) {
        if (!strcmp(a->verb, "drop"))
            printf("scene %s dropped at version %llu\n", a->name, (unsigned long long)out.version);
        else
            printf("scene %s version %llu (%llu bytes of its own; scenes hold %llu bytes)\n", a->name,
                   (unsigned long long)out.version, (unsigned long long)out.own_bytes,
                   (unsigned long long)out.scene_bytes);
    }
    return 0;
}

int pathctl_scene_main(int argc, char **argv)
{
    /* The command is the first word that is not an option or its value. */
    const char *cmd = NULL;
    for (int i = 1; i < argc && !cmd; i++) {
        if (argv[i][0] != '-')
            cmd = argv[i];
        else if (strcmp(argv[i], "--json") && strcmp(argv[i], "--drop-portals"))
            i++;
    }
    if (!cmd || strcmp(cmd, "scene"))
        return PATHCTL_SCENE_NOT_MINE;
    ps_args a;
    memset(&a, 0, sizeof a);
    pathctl_conn_defaults(&a.conn);
    int code = ps_parse(argc, argv, &a);
    if (code >= 0)
        return code;
    pdc_conn *c = pathctl_open(&a.conn, &code);
    if (!c)
        return code;
    code = ps_run(c, &a);
    pdc_close(c);
    return code;
}

int pathctl_cmd_usage(const char *fmt, const char *arg)
{
    return ps_usage(fmt, arg);
}

const char *pathctl_command_word(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] != '-')
            return argv[i];
        if (strcmp(argv[i], "--json"))
            i++;
    }
    return NULL;
}

void pathctl_conn_defaults(pathctl_conn_opts *c)
{
    c->server = PDC_DEFAULT_SERVER;
    c->token = NULL;
    c->timeout_ms = PDC_DEFAULT_TIMEOUT_MS;
}

int pathctl_conn_option(pathctl_conn_opts *c, const char *o, const char *v)
{
    if (!strcmp(o, "--server")) {
        c->server = v;
    } else if (!strcmp(o, "--token")) {
        c->token = v;
    } else if (!strcmp(o, "--timeout")) {
        double t;
        if (pathctl_parse_number(v, &t) || t < 1 || t > 3600000 || t != (int)t) {
            ps_usage("bad --timeout %s (milliseconds, > 0)", v);
            return -1;
        }
        c->timeout_ms = (int)t;
    } else {
        return 0;
    }
    return 1;
}

pdc_conn *pathctl_open(const pathctl_conn_opts *opts, int *exit_code)
{
    const char *token = opts->token;
    if (!token && getenv("PATHD_TOKEN") && *getenv("PATHD_TOKEN"))
        token = getenv("PATHD_TOKEN");
    char err[PDC_MESSAGE_MAX];
    pdc_conn *c = pdc_connect_flags(opts->server, opts->timeout_ms, PDC_CONNECT_NO_FLOW_CONTROL, err, sizeof err);
    if (!c) {
        fprintf(stderr, "pathctl: %s\n", err);
        *exit_code = PS_EXIT_CONNECT;
        return NULL;
    }
    int code;
    if (token && (code = pdc_auth(c, token, NULL, 0)) != PDC_OK) {
        fprintf(stderr, "pathctl: %s: %s\n", pdc_status_name(code), pdc_last_error(c));
        *exit_code = code == PDC_ERR_DISCONNECTED || code == PDC_ERR_TIMEOUT ? PS_EXIT_CONNECT : PS_EXIT_ANSWER;
        pdc_close(c);
        return NULL;
    }
    return c;
}
