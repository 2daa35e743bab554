/*
 * pathctl_watch.c - `pathctl watch SCENE...`: subscribes to the scenes'
 * changes and prints each event as it arrives (see pathctl_watch.h), one a
 * line, or one JSON object a line with --json. Runs until the watch ends
 * (every scene dropped, or the server ended it), --count events were
 * printed, or the connection is lost.
 */
#include "pathctl_watch.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "pathctl_scene.h"
#include "pathd_client.h"

#define PW_EXIT_ANSWER 1
#define PW_EXIT_USAGE 2
#define PW_EXIT_CONNECT 3

const char pathctl_watch_usage[] =
    "  watch SCENE... [--count N]\n"
    "                     print each change of the scenes as it happens (version,\n"
    "                     changed rectangle, operations; instances, drops, reloads;\n"
    "                     agents whose reservations an update cut),\n"
    "                     one a line; after N changes (not counting the first\n"
    "                     line per scene, its version now) it stops\n";

typedef struct pw_args {
    pathctl_conn_opts conn;
    int json;
    long count;                  /* 0: until the watch ends */
    const char **scenes;
    size_t n_scenes;
} pw_args;

static int pw_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "pathctl: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(try pathctl --help)\n");
    return PW_EXIT_USAGE;
}

static int pw_parse(int argc, char **argv, pw_args *a)
{
    int seen_watch = 0;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "--json")) {
            a->json = 1;
        } else if (o[0] == '-' && o[1]) {
            if (!v)
                return pw_usage("option %s needs a value", o);
            i++;
            int taken = pathctl_conn_option(&a->conn, o, v);
            char *end;
            if (taken < 0) {
                return PW_EXIT_USAGE;
            } else if (taken) {
                continue;
            } else if (!strcmp(o, "--count")) {
                errno = 0;
                a->count = strtol(v, &end, 10);
                if (errno || end == v || *end || a->count < 1)
                    return pw_usage("bad --count %s (events, > 0)", v);
            } else {
                return pw_usage("unknown option %s for the watch command", o);
            }
        } else if (!seen_watch) {
            seen_watch = 1; /* the word "watch" */
        } else if (a->n_scenes == PDC_MAX_WATCH_SCENES) {
            return pw_usage("more than 1024 scenes%s", "");
        } else {
            a->scenes[a->n_scenes++] = o;
        }
    }
    if (a->n_scenes == 0)
        return pw_usage("watch needs at least one scene name%s", "");
    return -1;
}

static const char *pw_op_name(int op)
{
    switch (op) {
    case PDC_UPDATE_BLOCK: return "blocked";
    case PDC_UPDATE_PASS: return "passable";
    case PDC_UPDATE_COST: return "cost";
    case PDC_UPDATE_RESTORE: return "restore";
    default: return "unknown";
    }
}

static cJSON *pw_rect(pdc_xy min, pdc_xy max)
{
    const double r[4] = { min.x, min.y, max.x, max.y };
    return cJSON_CreateDoubleArray(r, 4);
}

static void pw_print_json(const pdc_watch_event *e)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "status", pdc_status_name(e->status));
    cJSON_AddNumberToObject(o, "watch", (double)e->watch_id);
    if (e->status != PDC_OK) {
        cJSON_AddStringToObject(o, "message", e->message);
    } else {
        cJSON_AddStringToObject(o, "kind", pdc_watch_kind_name(e->kind));
        cJSON_AddStringToObject(o, "scene", e->scene);
        cJSON_AddNumberToObject(o, "version", (double)e->version);
        if (e->has_changed)
            cJSON_AddItemToObject(o, "changed", pw_rect(e->changed_min, e->changed_max));
        else
            cJSON_AddNullToObject(o, "changed");
        if (e->kind == PDC_WATCH_UPDATED) {
            cJSON_AddNumberToObject(o, "cells_changed", (double)e->cells_changed);
            cJSON *ops = cJSON_AddArrayToObject(o, "ops");
            for (size_t k = 0; k < e->op_count && ops; k++) {
                cJSON *op = cJSON_CreateObject();
                cJSON_AddStringToObject(op, "set", pw_op_name(e->ops[k].op));
                if (e->ops[k].op == PDC_UPDATE_COST)
                    cJSON_AddNumberToObject(op, "cost", e->ops[k].cost);
                cJSON_AddItemToObject(op, "bounds", pw_rect(e->ops[k].min, e->ops[k].max));
                cJSON_AddNumberToObject(op, "cells", (double)e->ops[k].cells);
                cJSON_AddItemToArray(ops, op);
            }
        }
        if (e->kind == PDC_WATCH_INSTANCED)
            cJSON_AddStringToObject(o, "instance", e->instance);
        if (e->kind == PDC_WATCH_AGENTS_CUT) {
            cJSON *ids = cJSON_AddArrayToObject(o, "agents");
            for (size_t k = 0; k < e->agent_count && ids; k++)
                cJSON_AddItemToArray(ids, cJSON_CreateNumber((double)e->agents[k]));
            cJSON_AddNumberToObject(o, "cut_at_ms", (double)e->cut_at_ms);
        }
        if (e->kind == PDC_WATCH_AGENTS_DISPLACED || e->kind == PDC_WATCH_AGENTS_EXPIRED ||
            e->kind == PDC_WATCH_AGENTS_RELEASED) {
            cJSON *ids = cJSON_AddArrayToObject(o, "agents");
            for (size_t k = 0; k < e->agent_count && ids; k++)
                cJSON_AddItemToArray(ids, cJSON_CreateNumber((double)e->agents[k]));
        }
    }
    cJSON_AddBoolToObject(o, "final", e->final);
    char *text = cJSON_PrintUnformatted(o);
    puts(text ? text : "{\"status\":\"NO_MEMORY\"}");
    free(text);
    cJSON_Delete(o);
}

static void pw_print_text(const pdc_watch_event *e)
{
    if (e->kind == PDC_WATCH_ENDED) {
        puts("ended");
        return;
    }
    printf("%s %s version %" PRIu64, pdc_watch_kind_name(e->kind), e->scene, e->version);
    if (e->has_changed)
        printf(" changed %d,%d,%d,%d", e->changed_min.x, e->changed_min.y, e->changed_max.x, e->changed_max.y);
    if (e->kind == PDC_WATCH_UPDATED)
        printf(" cells %" PRIu64, e->cells_changed);
    for (size_t k = 0; k < e->op_count; k++) {
        printf(" %s", pw_op_name(e->ops[k].op));
        if (e->ops[k].op == PDC_UPDATE_COST)
            printf("=%u", e->ops[k].cost);
        printf("@%d,%d,%d,%d", e->ops[k].min.x, e->ops[k].min.y, e->ops[k].max.x, e->ops[k].max.y);
    }
    if (e->kind == PDC_WATCH_INSTANCED)
        printf(" instance %s", e->instance);
    if (e->kind == PDC_WATCH_AGENTS_CUT)
        printf(" at %" PRId64, e->cut_at_ms);
    if (e->kind == PDC_WATCH_AGENTS_CUT || e->kind == PDC_WATCH_AGENTS_DISPLACED ||
        e->kind == PDC_WATCH_AGENTS_EXPIRED || e->kind == PDC_WATCH_AGENTS_RELEASED) {
        printf(" agents");
        for (size_t k = 0; k < e->agent_count; k++)
            printf("%c%" PRIu64, k ? ',' : ' ', e->agents[k]);
    }
    putchar('\n');
}

static int pw_run(pdc_conn *c, const pw_args *a)
{
    uint64_t id;
    int status = pdc_watch(c, a->scenes, a->n_scenes, &id);
    long printed = 0;
    while (status == PDC_OK) {
        pdc_watch_event e;
        status = pdc_watch_next(c, -1, &e);
        if (status != PDC_OK)
            break;
        if (a->json)
            pw_print_json(&e);
        else if (e.status == PDC_OK)
            pw_print_text(&e);
        fflush(stdout);
        int final = e.final, why = e.status;
        if (why != PDC_OK)
            fprintf(stderr, "pathctl: %s: %s\n", pdc_status_name(why), e.message);
        printed += e.kind != PDC_WATCH_STARTED || why != PDC_OK;
        pdc_watch_event_free(&e);
        if (why != PDC_OK)
            return PW_EXIT_ANSWER;
        if (final || (a->count && printed >= a->count))
            return 0;
    }
    const char *detail = pdc_last_error(c);
    if (a->json && status >= 0) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "status", pdc_status_name(status));
        cJSON_AddStringToObject(o, "message", detail);
        char *text = cJSON_PrintUnformatted(o);
        puts(text ? text : "{\"status\":\"NO_MEMORY\"}");
        free(text);
        cJSON_Delete(o);
    }
    fprintf(stderr, "pathctl: %s%s%s\n", pdc_status_name(status), detail[0] ? ": " : "", detail);
    return status >= 0 ? PW_EXIT_ANSWER : PW_EXIT_CONNECT;
}

int pathctl_watch_main(int argc, char **argv)
{
    const char *cmd = pathctl_command_word(argc, argv);
    if (!cmd || strcmp(cmd, "watch"))
        return PATHCTL_WATCH_NOT_MINE;
    pw_args a;
    memset(&a, 0, sizeof a);
    pathctl_conn_defaults(&a.conn);
    a.scenes = calloc((size_t)argc, sizeof *a.scenes);
    if (!a.scenes)
        return PW_EXIT_CONNECT;
    int code = pw_parse(argc, argv, &a);
    if (code < 0) {
        pdc_conn *c = pathctl_open(&a.conn, &code);
        if (c) {
            code = pw_run(c, &a);
            pdc_close(c);
        }
    }
    free(a.scenes);
    return code;
}
