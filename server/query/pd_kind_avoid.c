/*
 * pd_kind_avoid.c - FindPath with avoid_reserved (issue 34): one agent
 * planned alone, around the scene's reservations at their times, and
 * nothing reserved - what ReservePath would answer, without holding it.
 *
 * It is ReservePath's planner (pd_sipp_plan, which plans without changing
 * the table) run in the scene's lane (pd_kind_paths.c queues it there), so
 * it reads the table as the requests before it left it. Its answer is
 * FindPath's: a path of cells with arrival times in seconds.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_kind_reserve.h"
#include "pd_scene_reserve.h"
#include "pd_sipp.h"

/* The scene to plan on: the one served now when it is the snapshot's scene
 * (same incarnation and size: an update queued before this request in the
 * lane has applied by now), else the snapshot the request was checked
 * against. Retained. */
static pd_scene *pd__current(pd_registry *registry, pd_scene *arrived)
{
    pd_scene *now = pd_registry_acquire(registry, arrived->name);
    if (now && now->incarnation == arrived->incarnation && now->grid->width == arrived->grid->width &&
        now->grid->height == arrived->grid->height)
        return now;
    pd_scene_release(now);
    pd_scene_retain(arrived);
    return arrived;
}

static pd_status pd__fail(pd_path_result *out, pd_status st, const char *fmt, const char *scene)
{
    snprintf(out->message, sizeof out->message, fmt, scene);
    return out->status = st;
}

/* The plan as FindPath's path: each waypoint's cell at its arrival, and a
 * wait (a waypoint left later than reached, but the last) as its cell again
 * at its departure. */
static pd_status pd__answer(const pd_sipp_result *r, pd_path_result *out)
{
    size_t n = 0;
    for (size_t i = 0; i < r->n_waypoints; i++)
        n += 1 + (i + 1 < r->n_waypoints && r->waypoints[i].t_leave_ms > r->waypoints[i].t_arrive_ms);
    out->path = malloc(n * sizeof *out->path);
    out->times = malloc(n * sizeof *out->times);
    if (!out->path || !out->times) {
        pd_path_result_free(out);
        return PD_INTERNAL;
    }
    size_t k = 0;
    for (size_t i = 0; i < r->n_waypoints; i++) {
        const pd_waypoint *w = &r->waypoints[i];
        out->path[k] = (pd_point){w->x, w->y};
        out->times[k++] = (double)w->t_arrive_ms / 1000.0;
        if (i + 1 < r->n_waypoints && w->t_leave_ms > w->t_arrive_ms) {
            out->path[k] = (pd_point){w->x, w->y};
            out->times[k++] = (double)w->t_leave_ms / 1000.0;
        }
    }
    out->path_len = n;
    out->metrics.path_len = n;
    out->metrics.end = out->path[n - 1];
    return PD_OK;
}

static void pd__explain(pd_path_result *out, pd_status st, const pd_sipp_result *r, const pd_scene *s,
                        const pd_path_query *q)
{
    switch (st) {
    case PD_START_BLOCKED:
        if (r->has_blocker) {
            snprintf(out->message, sizeof out->message, "agent %" PRIu64 " holds the start at t0_ms %" PRId64,
                     r->blocker, q->t0_ms);
            return;
        }
        snprintf(out->message, sizeof out->message, "the start is blocked for unit_size %u in scene '%s'",
                 (unsigned)q->unit_size, s->name);
        return;
    case PD_GOAL_BLOCKED:
        snprintf(out->message, sizeof out->message, "the goal is blocked for unit_size %u in scene '%s'",
                 (unsigned)q->unit_size, s->name);
        return;
    case PD_NO_PATH:
        snprintf(out->message, sizeof out->message, "no path around the reservations reaches the goal in scene '%s'",
                 s->name);
        return;
    case PD_INVALID_ARGUMENT:
        snprintf(out->message, sizeof out->message,
                 "find_path.speed %g is %g cells per second in scene '%s': avoid_reserved takes %g..%g", q->speed,
                 q->speed / s->cell_size, s->name, PD_SIPP_MIN_SPEED, PD_SIPP_MAX_SPEED);
        return;
    default:
        snprintf(out->message, sizeof out->message, "%s", pd_status_name(st));
        return;
    }
}

/* The plan on scene s, its table locked for reading. */
static pd_status pd__plan(pd_registry *registry, pd_scene *s, const pd_path_query *q, const pd_query_control *ctl,
                          pd_path_result *out)
{
    const pd_scene_unit *u = pd_scene_unit_for(s, q->unit_size ? q->unit_size : 1);
    if (!u)
        return pd__fail(out, PD_INVALID_ARGUMENT, "scene '%s' no longer serves the unit_size", s->name);
    /* Not connected on the map: NO_PATH at once, as FindPath decides it. */
    if (pd_kind_reserve_apart(u, q->params.start, q->params.goal))
        return pd__fail(out, PD_NO_PATH, "goal is not reachable from start in scene '%s'", s->name);
    pd_sipp_ctx *ctx = pd_kind_reserve_sipp_ctx();
    if (!ctx)
        return pd__fail(out, PD_INTERNAL, "out of memory planning in scene '%s'", s->name);
    pd_sipp_params p = {
        .unit = q->unit_size ? q->unit_size : 1,
        .start = q->params.start,
        .goal = q->params.goal,
        .t0_ms = q->t0_ms,
        .speed = q->speed / s->cell_size,
        .at_goal = PD_AT_GOAL_VANISH, /* planned alone: reaching the goal is enough */
        .connectivity = q->params.connectivity,
        .max_expansions = q->params.max_expansions,
        .poll = ctl ? ctl->poll : NULL,
        .poll_user = ctl ? ctl->poll_user : NULL,
    };
    pd_reservations *set = pd_registry_reservations(registry);
    pd_reservations_hold hold;
    /* Made when the scene has none yet: an empty table plans as A* over
     * time, with the same answer's form as one that holds agents. */
    pd_reserve *table = pd_reservations_lock(set, s, 1, &hold);
    if (!table)
        return pd__fail(out, PD_INTERNAL, "out of memory for the reservations of scene '%s'", s->name);
    /* shared log hook: the other replicas' reservations too (when the log
     * cannot be read, this replica's table as it is) */
    char why[256];
    (void)pd_reservations_catch_up(set, &hold, why, sizeof why);
    /* The longest window the table allows, so the plan goes round every
     * reservation it may meet; 0 (no limit): all the way to the goal. */
    p.window_ms = pd_reserve_get_limits(table)->max_window_ms;
    pd_sipp_result r;
    memset(&r, 0, sizeof r);
    pd_status st = pd_sipp_plan(ctx, table, u->grid, &p, &r);
    if ((st == PD_OK || st == PD_PARTIAL) && pd__answer(&r, out) != PD_OK) {
        st = PD_INTERNAL;
        snprintf(out->message, sizeof out->message, "out of memory answering in scene '%s'", s->name);
    }
    pd_reservations_unlock(set, &hold);
    pd_sipp_ctx_trim(ctx, PD_KIND_RESERVE_SIPP_KEEP_BYTES);
    out->metrics.expanded = r.expanded + r.reverse_expanded;
    out->metrics.generated = r.generated;
    out->metrics.micros = r.micros ? r.micros : 1;
    if (st == PD_OK || st == PD_PARTIAL) {
        out->metrics.cost = r.cost;
        if (st == PD_PARTIAL) {
            /* The window ended first: the path to the cell it could hold. */
            out->goal_substituted = 1;
            out->goal_used = out->path[out->path_len - 1];
        }
    } else if (!out->message[0]) {
        pd__explain(out, st, &r, s, q);
    }
    return out->status = st;
}

pd_status pd_kind_reserve_find_path(pd_registry *registry, pd_scene *arrived, const pd_path_query *q,
                                    const pd_query_control *ctl, pd_path_result *out)
{
    memset(out, 0, sizeof *out);
    pd_scene *s = pd__current(registry, arrived);
    pd_status st = pd__plan(registry, s, q, ctl, out);
    pd_scene_release(s);
    return st;
}
