/*
 * pathctl_reserve.c - `pathctl reserve|release|reservations` (see
 * pathctl_reserve.h): space-time reservations from the command line, for
 * trying them by hand and for tests. Human-readable by default; with
 * --json one object per answer: reserve prints status, agent,
 * reserved_until_ms and waypoints [{x, y, t_arrive_ms, t_leave_ms}] (a
 * time with no end is null), as the issue names them, and displaced
 * [{agent, t0_ms, reserved_until_ms, waypoints}]: the agents moved out of
 * the way (--yield-after), whose plans the game must replace.
 */
#include "pathctl_reserve.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "pathctl_query.h"
#include "pathctl_scene.h"
#include "pathd_client.h"

#define PR_EXIT_ANSWER 1
#define PR_EXIT_USAGE 2
#define PR_EXIT_CONNECT 3

const char pathctl_reserve_usage[] =
    "  reserve --scene S --agent ID --from X,Y --to X,Y --t0 MS --speed V\n"
    "        [--unit K] [--window MS] [--at-goal park|vanish] [--yield-after MS]\n"
    "                     write: plan agent ID around the other agents'\n"
    "                     reservations from game time MS and reserve it;\n"
    "                     --yield-after: once it stood MS, agents standing in\n"
    "                     its way may be moved aside (their plans printed)\n"
    "  release --scene S --agent ID | --all\n"
    "                     write: drop every reservation of agent ID; --all:\n"
    "                     of every agent, and forget the scene's game clock\n"
    "                     (a game whose clock starts over)\n"
    "  reservations --scene S [--rect X0,Y0,X1,Y1] [--from-ms T] [--to-ms T]\n"
    "        [--max N]    the reservations holding those cells in [T0, T1)\n";

typedef struct pr_args {
    pathctl_conn_opts conn;
    int json;
    const char *cmd;
    pdc_reserve_req req;
    int has_agent, has_from, has_to, has_t0, has_speed;
    int all;                 /* release --all */
    int has_rect;
    pdc_xy rect_min, rect_max;
    int64_t from_ms, to_ms;
    uint32_t max;
} pr_args;

#define pr_usage pathctl_cmd_usage

static int pr_i64(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end)
        return -1;
    *out = v;
    return 0;
}

static int pr_xy(const char *s, pdc_xy *out)
{
    int x, y;
    char tail;
    if (sscanf(s, "%d,%d%c", &x, &y, &tail) != 2)
        return -1;
    out->x = x;
    out->y = y;
    return 0;
}

/* One option and its value; returns -1 (consumed), or an exit code. */
static int pr_option(pr_args *a, const char *o, const char *v)
{
    int64_t n;
    int known = pathctl_conn_option(&a->conn, o, v);
    if (known < 0)
        return PR_EXIT_USAGE;
    if (known)
        return -1;
    if (!strcmp(o, "--scene")) {
        a->req.scene = v;
    } else if (!strcmp(o, "--agent")) {
        if (pr_i64(v, &n) || n < 0)
            return pr_usage("bad --agent %s", v);
        a->req.agent = (uint64_t)n;
        a->has_agent = 1;
    } else if (!strcmp(o, "--from")) {
        if (pr_xy(v, &a->req.start))
            return pr_usage("bad --from %s (X,Y)", v);
        a->has_from = 1;
    } else if (!strcmp(o, "--to")) {
        if (pr_xy(v, &a->req.goal))
            return pr_usage("bad --to %s (X,Y)", v);
        a->has_to = 1;
    } else if (!strcmp(o, "--t0")) {
        if (pr_i64(v, &a->req.t0_ms))
            return pr_usage("bad --t0 %s (milliseconds)", v);
        a->has_t0 = 1;
    } else if (!strcmp(o, "--speed")) {
        if (pathctl_parse_number(v, &a->req.speed))
            return pr_usage("bad --speed %s (cells per second: a finite number)", v);
        a->has_speed = 1;
    } else if (!strcmp(o, "--unit")) {
        if (pr_i64(v, &n) || n < 0 || n > 255)
            return pr_usage("bad --unit %s", v);
        a->req.unit_size = (uint32_t)n;
    } else if (!strcmp(o, "--window")) {
        if (pr_i64(v, &a->req.window_ms))
            return pr_usage("bad --window %s (milliseconds; 0: all the way)", v);
        a->req.has_window = 1;
    } else if (!strcmp(o, "--yield-after")) {
        if (pr_i64(v, &a->req.yield_after_ms) || a->req.yield_after_ms < 0)
            return pr_usage("bad --yield-after %s (milliseconds; 0: move no one)", v);
    } else if (!strcmp(o, "--at-goal")) {
        if (strcmp(v, "park") && strcmp(v, "vanish"))
            return pr_usage("bad --at-goal %s (park or vanish)", v);
        a->req.vanish = !strcmp(v, "vanish");
    } else if (!strcmp(o, "--rect")) {
        int x0, y0, x1, y1;
        char tail;
        if (sscanf(v, "%d,%d,%d,%d%c", &x0, &y0, &x1, &y1, &tail) != 4)
            return pr_usage("bad --rect %s (X0,Y0,X1,Y1)", v);
        a->rect_min = (pdc_xy){x0, y0};
        a->rect_max = (pdc_xy){x1, y1};
        a->has_rect = 1;
    } else if (!strcmp(o, "--from-ms")) {
        if (pr_i64(v, &a->from_ms))
            return pr_usage("bad --from-ms %s", v);
    } else if (!strcmp(o, "--to-ms")) {
        if (pr_i64(v, &a->to_ms))
            return pr_usage("bad --to-ms %s", v);
    } else if (!strcmp(o, "--max")) {
        if (pr_i64(v, &n) || n < 0 || n > UINT32_MAX)
            return pr_usage("bad --max %s", v);
        a->max = (uint32_t)n;
    } else {
        return pr_usage("unknown option %s", o);
    }
    return -1;
}

static int pr_parse(int argc, char **argv, pr_args *a)
{
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (o[0] != '-') {
            if (a->cmd)
                return pr_usage("unexpected argument %s", o);
            a->cmd = o;
        } else if (!strcmp(o, "--json")) {
            a->json = 1;
        } else if (!strcmp(o, "--all")) {
            a->all = 1;
        } else {
            if (i + 1 >= argc)
                return pr_usage("%s needs a value", o);
            int code = pr_option(a, o, argv[++i]);
            if (code >= 0)
                return code;
        }
    }
    if (!a->req.scene)
        return pr_usage("%s needs --scene", a->cmd);
    int reserve = !strcmp(a->cmd, "reserve");
    const int release = !strcmp(a->cmd, "release");
    if (a->all && !release)
        return pr_usage("%s takes no --all (release's: every agent of the scene)", a->cmd);
    if (release && a->all && a->has_agent)
        return pr_usage("%s takes --agent or --all, not both", a->cmd);
    if (release && !a->has_agent && !a->all)
        return pr_usage("%s needs --agent (or --all)", a->cmd);
    if (reserve && !a->has_agent)
        return pr_usage("%s needs --agent", a->cmd);
    if (reserve && !(a->has_from && a->has_to && a->has_t0 && a->has_speed))
        return pr_usage("%s needs --from, --to, --t0 and --speed", a->cmd);
    return -1;
}

/* A time with no end (-1 on the wire) is JSON null. */
static void pr_json_time(cJSON *o, const char *key, int64_t t)
{
    if (t == -1)
        cJSON_AddNullToObject(o, key);
    else
        cJSON_AddNumberToObject(o, key, (double)t);
}

static int pr_fail(const pr_args *a, pdc_conn *c, int status)
{
    const char *why = pdc_last_error(c);
    if (a->json && status >= 0) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "status", pdc_status_name(status));
        if (why && why[0])
            cJSON_AddStringToObject(o, "message", why);
        char *text = cJSON_PrintUnformatted(o);
        if (text)
            puts(text);
        free(text);
        cJSON_Delete(o);
    }
    fprintf(stderr, "pathctl: %s%s%s\n", pdc_status_name(status), why && why[0] ? ": " : "", why ? why : "");
    return status == PDC_ERR_DISCONNECTED || status == PDC_ERR_TIMEOUT ? PR_EXIT_CONNECT
           : status == PDC_ERR_ARG                                      ? PR_EXIT_USAGE
                                                                        : PR_EXIT_ANSWER;
}

static void pr_print(cJSON *o)
{
    char *text = cJSON_PrintUnformatted(o);
    puts(text ? text : "{\"status\":\"NO_MEMORY\"}");
    free(text);
    cJSON_Delete(o);
}

/* A plan's waypoints as JSON, into key of o. */
static void pr_json_waypoints(cJSON *o, const char *key, const pdc_timed_waypoint *wp, size_t n)
{
    cJSON *arr = cJSON_AddArrayToObject(o, key);
    for (size_t i = 0; i < n && arr; i++) {
        cJSON *w = cJSON_CreateObject();
        cJSON_AddNumberToObject(w, "x", wp[i].x);
        cJSON_AddNumberToObject(w, "y", wp[i].y);
        cJSON_AddNumberToObject(w, "t_arrive_ms", (double)wp[i].t_arrive_ms);
        pr_json_time(w, "t_leave_ms", wp[i].t_leave_ms);
        cJSON_AddItemToArray(arr, w);
    }
}

static void pr_text_waypoints(const char *indent, const pdc_timed_waypoint *wp, size_t n)
{
    for (size_t i = 0; i < n; i++)
        printf("%s%d,%d %" PRId64 "..%" PRId64 "\n", indent, wp[i].x, wp[i].y, wp[i].t_arrive_ms, wp[i].t_leave_ms);
}

static int pr_reserve(pdc_conn *c, const pr_args *a)
{
    pdc_reserve_result r;
    int st = pdc_reserve_path(c, &a->req, &r);
    if (st != PDC_OK && st != PDC_PARTIAL) {
        if (st == PDC_START_BLOCKED && r.has_blocking_agent && a->json) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "status", pdc_status_name(st));
            cJSON_AddStringToObject(o, "message", pdc_last_error(c));
            cJSON_AddNumberToObject(o, "agent", (double)a->req.agent);
            cJSON_AddNumberToObject(o, "blocking_agent", (double)r.blocking_agent);
            pr_print(o);
            fprintf(stderr, "pathctl: START_BLOCKED: %s\n", pdc_last_error(c));
            pdc_reserve_result_free(&r);
            return PR_EXIT_ANSWER;
        }
        pdc_reserve_result_free(&r);
        return pr_fail(a, c, st);
    }
    if (a->json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "status", pdc_status_name(st));
        cJSON_AddNumberToObject(o, "agent", (double)r.agent);
        pr_json_time(o, "reserved_until_ms", r.reserved_until_ms);
        pr_json_waypoints(o, "waypoints", r.waypoints, r.count);
        cJSON_AddNumberToObject(o, "cost", r.cost);
        cJSON_AddBoolToObject(o, "was_cut", r.was_cut);
        cJSON *moved = cJSON_AddArrayToObject(o, "displaced");
        for (size_t d = 0; d < r.n_displaced && moved; d++) {
            cJSON *p = cJSON_CreateObject();
            cJSON_AddNumberToObject(p, "agent", (double)r.displaced[d].agent);
            cJSON_AddNumberToObject(p, "t0_ms", (double)r.displaced[d].t0_ms);
            pr_json_time(p, "reserved_until_ms", r.displaced[d].reserved_until_ms);
            pr_json_waypoints(p, "waypoints", r.displaced[d].waypoints, r.displaced[d].count);
            cJSON_AddItemToArray(moved, p);
        }
        pr_print(o);
    } else {
        printf("status %s agent %" PRIu64 " waypoints %zu reserved_until_ms %" PRId64 "\n", pdc_status_name(st),
               r.agent, r.count, r.reserved_until_ms);
        pr_text_waypoints("", r.waypoints, r.count);
        /* Each agent moved aside, then its new plan, indented. */
        for (size_t d = 0; d < r.n_displaced; d++) {
            printf("displaced agent %" PRIu64 " t0_ms %" PRId64 " waypoints %zu reserved_until_ms %" PRId64 "\n",
                   r.displaced[d].agent, r.displaced[d].t0_ms, r.displaced[d].count,
                   r.displaced[d].reserved_until_ms);
            pr_text_waypoints("  ", r.displaced[d].waypoints, r.displaced[d].count);
        }
    }
    pdc_reserve_result_free(&r);
    return 0;
}

static int pr_release(pdc_conn *c, const pr_args *a)
{
    int released = 0;
    uint64_t n = 0;
    int st = a->all ? pdc_release_all(c, a->req.scene, &n) : pdc_release_agent(c, a->req.scene, a->req.agent, &released);
    if (st != PDC_OK)
        return pr_fail(a, c, st);
    if (a->all)
        released = n != 0;
    if (a->json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "status", "OK");
        cJSON_AddBoolToObject(o, "released", released);
        if (a->all)
            cJSON_AddNumberToObject(o, "agents_released", (double)n);
        pr_print(o);
    } else if (a->all) {
        printf("status OK agents_released %" PRIu64 "\n", n);
    } else {
        printf("status OK released %s\n", released ? "yes" : "no");
    }
    return 0;
}

static int pr_list(pdc_conn *c, const pr_args *a)
{
    pdc_reservation_list l;
    int st = pdc_reservations(c, a->req.scene, a->has_rect, a->rect_min, a->rect_max, a->from_ms, a->to_ms, a->max,
                              &l);
    if (st != PDC_OK)
        return pr_fail(a, c, st);
    if (a->json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "status", "OK");
        cJSON *arr = cJSON_AddArrayToObject(o, "entries");
        for (size_t i = 0; i < l.count && arr; i++) {
            const pdc_reservation *e = &l.entries[i];
            cJSON *j = cJSON_CreateObject();
            cJSON_AddNumberToObject(j, "agent", (double)e->agent);
            cJSON_AddNumberToObject(j, "x", e->x);
            cJSON_AddNumberToObject(j, "y", e->y);
            cJSON_AddNumberToObject(j, "width", e->width);
            cJSON_AddNumberToObject(j, "height", e->height);
            cJSON_AddNumberToObject(j, "t0_ms", (double)e->t0_ms);
            pr_json_time(j, "t1_ms", e->t1_ms);
            cJSON_AddItemToArray(arr, j);
        }
        cJSON_AddNumberToObject(o, "matching", (double)l.matching);
        cJSON_AddNumberToObject(o, "agents", l.agents);
        cJSON_AddNumberToObject(o, "table_entries", (double)l.table_entries);
        cJSON_AddNumberToObject(o, "table_bytes", (double)l.table_bytes);
        pr_print(o);
    } else {
        printf("status OK entries %zu matching %" PRIu64 " agents %u\n", l.count, l.matching, l.agents);
        for (size_t i = 0; i < l.count; i++)
            printf("agent %" PRIu64 " %d,%d %dx%d %" PRId64 "..%" PRId64 "\n", l.entries[i].agent, l.entries[i].x,
                   l.entries[i].y, l.entries[i].width, l.entries[i].height, l.entries[i].t0_ms, l.entries[i].t1_ms);
    }
    pdc_reservation_list_free(&l);
    return 0;
}

int pathctl_reserve_main(int argc, char **argv)
{
    const char *cmd = pathctl_command_word(argc, argv);
    if (!cmd || (strcmp(cmd, "reserve") && strcmp(cmd, "release") && strcmp(cmd, "reservations")))
        return PATHCTL_RESERVE_NOT_MINE;
    pr_args a;
    memset(&a, 0, sizeof a);
    pathctl_conn_defaults(&a.conn);
    int code = pr_parse(argc, argv, &a);
    if (code >= 0)
        return code;
    pdc_conn *c = pathctl_open(&a.conn, &code);
    if (!c)
        return code;
    if (!strcmp(a.cmd, "reserve"))
        code = pr_reserve(c, &a);
    else if (!strcmp(a.cmd, "release"))
        code = pr_release(c, &a);
    else
        code = pr_list(c, &a);
    pdc_close(c);
    return code;
}
