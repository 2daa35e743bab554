/*
 * pd_watch.c - an applied update, or the agents a ReservePath moved aside,
 * as the events their watchers hear (see pd_watch.h).
 */
#include "pd_watch.h"

#include <stdio.h>
#include <string.h>

/* One operation's summary: the bounds and count of the cells it named. */
static void pd__watch_op(const pd_scene_update *u, pd_watch_op *w)
{
    w->op = u->op;
    w->cost = u->op == PD_UPDATE_COST ? u->cost : 0;
    if (u->is_rect) {
        w->min = u->rect_min;
        w->max = u->rect_max;
        w->cells = (uint64_t)(u->rect_max.x - u->rect_min.x + 1) * (uint64_t)(u->rect_max.y - u->rect_min.y + 1);
        return;
    }
    w->cells = u->n_cells;
    for (size_t i = 0; i < u->n_cells; i++) {
        pd_point p = u->cells[i];
        if (i == 0 || p.x < w->min.x)
            w->min.x = p.x;
        if (i == 0 || p.y < w->min.y)
            w->min.y = p.y;
        if (i == 0 || p.x > w->max.x)
            w->max.x = p.x;
        if (i == 0 || p.y > w->max.y)
            w->max.y = p.y;
    }
}

/* An event of kind about the version the update made, the rest zero. */
static void pd__watch_head(const pd_update_cells_req *req, const pd_update_outcome *out, pd_watch_kind kind,
                           pd_watch_event *ev)
{
    memset(ev, 0, sizeof *ev);
    ev->kind = kind;
    memcpy(ev->scene, req->scene, sizeof ev->scene);
    ev->incarnation = out->update.incarnation;
    ev->version = out->update.version;
}

int pd_watch_event_from_update(const pd_update_cells_req *req, const pd_update_outcome *out, pd_watch_event *ev)
{
    if (out->update.cells_changed == 0)
        return -1;
    pd__watch_head(req, out, PD_WATCH_UPDATED, ev);
    ev->has_changed = 1;
    ev->changed_min = out->update.changed_min;
    ev->changed_max = out->update.changed_max;
    ev->cells_changed = out->update.cells_changed;
    /* The same reading of the request as pd_query_update_cells: ops, or
     * the one operation with its cell list beside it. */
    pd_scene_update single = req->update;
    if (req->cells)
        single.cells = req->cells;
    const pd_scene_update *ops = req->n_ops ? req->ops : &single;
    ev->n_ops = req->n_ops ? req->n_ops : 1;
    if (ev->n_ops > PD_SCENE_MAX_UPDATE_OPS)
        ev->n_ops = PD_SCENE_MAX_UPDATE_OPS;
    for (size_t k = 0; k < ev->n_ops; k++)
        pd__watch_op(&ops[k], &ev->ops[k]);
    return 0;
}

/* Part `part` of agents[0..n) into ev: 0, or -1 when it is past the last. */
static int pd__agents_part(const uint64_t *agents, size_t n, size_t part, pd_watch_event *ev)
{
    if (part >= (n + PD_WATCH_MAX_AGENTS - 1) / PD_WATCH_MAX_AGENTS)
        return -1;
    size_t first = part * PD_WATCH_MAX_AGENTS;
    ev->n_agents = n - first < PD_WATCH_MAX_AGENTS ? n - first : PD_WATCH_MAX_AGENTS;
    memcpy(ev->agents, agents + first, ev->n_agents * sizeof *agents);
    return 0;
}

int pd_watch_event_agents_cut(const pd_update_cells_req *req, const pd_update_outcome *out, const uint64_t *agents,
                              size_t n, int64_t cut_at_ms, size_t part, pd_watch_event *ev)
{
    if (part >= (n + PD_WATCH_MAX_AGENTS - 1) / PD_WATCH_MAX_AGENTS)
        return -1;
    pd__watch_head(req, out, PD_WATCH_AGENTS_CUT, ev);
    (void)pd__agents_part(agents, n, part, ev);
    ev->cut_at_ms = cut_at_ms;
    return 0;
}

/* A reservation event's head (no version made): kind, scene, incarnation,
 * version; the rest zero. */
static void pd__agents_head(pd_watch_kind kind, const char *scene, uint64_t incarnation, uint64_t version,
                            pd_watch_event *ev)
{
    memset(ev, 0, sizeof *ev);
    ev->kind = kind;
    snprintf(ev->scene, sizeof ev->scene, "%s", scene);
    ev->incarnation = incarnation;
    ev->version = version;
}

/* Part `part` of an event that lists agents[0..n) (expired, released). */
static int pd__agents_event(pd_watch_kind kind, const char *scene, uint64_t incarnation, uint64_t version,
                            const uint64_t *agents, size_t n, size_t part, pd_watch_event *ev)
{
    if (part >= (n + PD_WATCH_MAX_AGENTS - 1) / PD_WATCH_MAX_AGENTS)
        return -1;
    pd__agents_head(kind, scene, incarnation, version, ev);
    return pd__agents_part(agents, n, part, ev);
}

int pd_watch_event_agents_expired(const char *scene, uint64_t incarnation, uint64_t version, const uint64_t *agents,
                                  size_t n, size_t part, pd_watch_event *ev)
{
    return pd__agents_event(PD_WATCH_AGENTS_EXPIRED, scene, incarnation, version, agents, n, part, ev);
}

int pd_watch_event_agents_released(const char *scene, uint64_t incarnation, uint64_t version,
                                   const uint64_t *agents, size_t n, size_t part, pd_watch_event *ev)
{
    return pd__agents_event(PD_WATCH_AGENTS_RELEASED, scene, incarnation, version, agents, n, part, ev);
}

int pd_watch_event_agents_displaced(const char *scene, uint64_t incarnation, uint64_t version,
                                    const uint64_t *agents, size_t n, pd_watch_event *ev)
{
    if (n == 0)
        return -1;
    pd__agents_head(PD_WATCH_AGENTS_DISPLACED, scene, incarnation, version, ev);
    ev->n_agents = n < PD_WATCH_MAX_AGENTS ? n : PD_WATCH_MAX_AGENTS;
    /* Insertion sort: a handful of ids (PD_YIELD_MAX_DISPLACED). */
    for (size_t i = 0; i < ev->n_agents; i++) {
        size_t j = i;
        for (; j > 0 && ev->agents[j - 1] > agents[i]; j--)
            ev->agents[j] = ev->agents[j - 1];
        ev->agents[j] = agents[i];
    }
    return 0;
}
