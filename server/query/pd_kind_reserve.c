/*
 * pd_kind_reserve.c - the reservation family's kinds: ReservePath (plan
 * with SIPP around the other agents' holds and reserve, pd_sipp.h),
 * ReleaseAgent and GetReservations. Each runs as an ordered task in its
 * scene's lane, the lane UpdateCells' cuts run in, so one scene's
 * reservations change in the order requests arrived (a ReservePath is
 * atomic against every other change of the table), while other scenes'
 * run beside them. The scene is looked up in the lane, not on the loop:
 * an update or drop queued before the request has applied by then.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_kind.h"
#include "pd_kind_reserve.h"
#include "pd_scene_reserve.h"
#include "pd_sipp.h"

const char *pd_kind_reserve_limit_key(pd_reserve_limit l)
{
    switch (l) {
    case PD_RESERVE_LIMIT_AGENTS:
        return "limits.max_agents_per_scene";
    case PD_RESERVE_LIMIT_ENTRIES:
        return "limits.max_reservation_entries";
    case PD_RESERVE_LIMIT_WINDOW:
        return "limits.max_reservation_window_ms";
    case PD_RESERVE_LIMIT_AGENT_BYTES:
        return "limits.max_agent_bytes";
    default:
        return "a reservation limit";
    }
}

/* One planner context per worker thread, made at its first ReservePath
 * (the query scratch predates SIPP; a context reused keeps its arrays, as
 * a search context does), freed when the thread ends. */
static pthread_key_t pd__sipp_key;
static pthread_once_t pd__sipp_once = PTHREAD_ONCE_INIT;

static void pd__sipp_free(void *ctx)
{
    pd_sipp_ctx_destroy(ctx);
}

static void pd__sipp_key_make(void)
{
    (void)pthread_key_create(&pd__sipp_key, pd__sipp_free);
}

pd_sipp_ctx *pd_kind_reserve_sipp_ctx(void)
{
    pthread_once(&pd__sipp_once, pd__sipp_key_make);
    pd_sipp_ctx *ctx = pthread_getspecific(pd__sipp_key);
    if (!ctx && (ctx = pd_sipp_ctx_create()) != NULL && pthread_setspecific(pd__sipp_key, ctx) != 0) {
        pd_sipp_ctx_destroy(ctx);
        ctx = NULL;
    }
    return ctx;
}

int pd_kind_reserve_apart(const pd_scene_unit *u, pd_point start, pd_point goal)
{
    const pd_components *comps = u->components;
    return comps && pd_components_in_bounds(comps, start) && pd_components_in_bounds(comps, goal) &&
           pd_components_label(comps, start) != 0 && pd_components_label(comps, goal) != 0 &&
           !pd_components_connected(comps, start, goal);
}

static pd_status pd__reserve_prepare(pd_job *job, pd_request *req, const pd_kind_env *env, pd_kind_refusal *why)
{
    (void)why;
    pd_reserve_job *rj = calloc(1, sizeof *rj);
    if (!rj)
        return PD_INTERNAL;
    rj->req = req->u.reserve;
    rj->registry = env->registry;
    rj->default_max_expansions = env->default_max_expansions;
    job->ext = rj;
    job->task.lane = job->task.lane2 = pd_kind_scene_lane(rj->req.scene);
    if (rj->req.deadline_ms)
        job->task.deadline_ns = job->arrival_ns + (uint64_t)rj->req.deadline_ms * 1000000u;
    return PD_OK;
}

static void pd__reserve_release(pd_job *job)
{
    pd_reserve_job *rj = job->ext;
    if (!rj)
        return;
    free(rj->waypoints);
    free(rj->entries);
    free(rj);
    job->ext = NULL;
}

static pd_status pd__fail(pd_reserve_job *rj, pd_status st, const char *fmt, const char *a)
{
    snprintf(rj->message, sizeof rj->message, fmt, a);
    return rj->status = st;
}

/* The scene, checked as FindPath checks it; NULL with rj->status set. */
static pd_scene *pd__scene(pd_reserve_job *rj)
{
    pd_scene *s = pd_registry_acquire(rj->registry, rj->req.scene);
    if (!s) {
        pd__fail(rj, PD_UNKNOWN_SCENE, "unknown scene '%s'", rj->req.scene);
        return NULL;
    }
    rj->scene_version = s->version;
    if (rj->req.min_version && s->version < rj->req.min_version) {
        snprintf(rj->message, sizeof rj->message, "scene '%s' is at version %" PRIu64 ", older than min_version %" PRIu64,
                 s->name, s->version, rj->req.min_version);
        rj->status = PD_STALE_VERSION;
        pd_scene_release(s);
        return NULL;
    }
    return s;
}

static pd_status pd__cell_of(const pd_scene *s, const pd_point_spec *p, pd_point *out)
{
    if (!p->is_world) {
        *out = p->cell;
        return PD_OK;
    }
    return pd_scene_world_to_cell(s, p->wx, p->wy, out);
}

/* reservation log hook: the change is made in memory but is not in the
 * log as journal_fsync asks; the log has failed and later changes are
 * refused (pd_reservations_refusal). */
static pd_status pd__unlogged(pd_reserve_job *rj, const pd_scene *s)
{
    snprintf(rj->message, sizeof rj->message,
             "the reservation could not be written to the reservation log of data_dir (scene '%s'); "
             "restart pathd", s->name);
    return rj->status = PD_INTERNAL;
}

static pd_status pd__reserve_plan(pd_reserve_job *rj, pd_scene *s, const pd_query_control *ctl)
{
    const pd_reserve_req *q = &rj->req;
    const pd_scene_unit *u = pd_scene_unit_for(s, q->unit_size);
    if (!u) {
        snprintf(rj->message, sizeof rj->message, "scene '%s' does not serve unit_size %u", s->name,
                 (unsigned)q->unit_size);
        return rj->status = PD_INVALID_ARGUMENT;
    }
    pd_sipp_params p = {0};
    p.agent = q->agent;
    p.unit = q->unit_size;
    if (pd__cell_of(s, &q->start, &p.start) != PD_OK)
        return pd__fail(rj, PD_OUT_OF_BOUNDS, "start is outside scene '%s'", s->name);
    /* Goal sets and range (pd_targets.h): a range around the one goal is a
     * set of one. */
    pd_point goals[PD_FINDPATH_MAX_GOALS];
    pd_targets targets = { .goals = goals, .n_goals = q->n_goals ? q->n_goals : 1, .range = q->range };
    for (size_t i = 0; i < targets.n_goals; i++)
        if (pd__cell_of(s, q->n_goals ? &q->goals[i] : &q->goal, &goals[i]) != PD_OK ||
            (q->n_goals && !pd_grid_in_bounds(u->grid, goals[i].x, goals[i].y))) {
            if (!q->n_goals)
                return pd__fail(rj, PD_OUT_OF_BOUNDS, "goal is outside scene '%s'", s->name);
            snprintf(rj->message, sizeof rj->message, "reserve_path.goals[%zu] is outside scene '%s'", i, s->name);
            return rj->status = PD_OUT_OF_BOUNDS;
        }
    p.goal = goals[0];
    if (q->n_goals || q->range > 0)
        p.targets = &targets;
    p.t0_ms = q->t0_ms;
    p.speed = q->speed;
    p.window_ms = q->window_ms;
    p.at_goal = (pd_at_goal)q->at_goal;
    p.connectivity = q->connectivity;
    p.max_expansions = q->max_expansions ? q->max_expansions : rj->default_max_expansions;
    p.poll = ctl ? ctl->poll : NULL;
    p.poll_user = ctl ? ctl->poll_user : NULL;

    /* Not connected on the map: NO_PATH at once, as FindPath decides it
     * (the space-time search would have to visit every state to prove it). */
    const pd_components *comps = u->components;
    if (!p.targets && pd_kind_reserve_apart(u, p.start, p.goal))
        return pd__fail(rj, PD_NO_PATH, "goal is not reachable from start in scene '%s'", s->name);
    /* A set: NO_PATH at once when no goal's cell is in the start's
     * component and no range could reach one (a range may end in the start's
     * component near a goal outside it: the search decides those). */
    if (comps && p.targets && q->range <= 0 && pd_components_in_bounds(comps, p.start) &&
        pd_components_label(comps, p.start) != 0) {
        size_t reachable = 0;
        for (size_t i = 0; i < targets.n_goals; i++)
            reachable += pd_components_in_bounds(comps, goals[i]) && pd_components_label(comps, goals[i]) != 0 &&
                         pd_components_connected(comps, p.start, goals[i]);
        if (!reachable)
            return pd__fail(rj, PD_NO_PATH, "no goal is reachable from start in scene '%s'", s->name);
    }

    pd_sipp_ctx *ctx = pd_kind_reserve_sipp_ctx();
    if (!ctx)
        return pd__fail(rj, PD_INTERNAL, "out of memory planning in scene '%s'", s->name);
    pd_status st;
    pd_reservations *set = pd_registry_reservations(rj->registry);
    if ((st = pd_reservations_refusal(set, rj->message, sizeof rj->message)) != PD_OK) /* reservation log hook */
        return rj->status = st;
    pd_reservations_hold hold;
    pd_reserve *table = pd_reservations_lock(set, s, 1, &hold);
    if (!table)
        return pd__fail(rj, PD_INTERNAL, "out of memory for the reservations of scene '%s'", s->name);
    rj->was_cut = pd_reserve_was_cut(table, q->agent);
    pd_sipp_result r;
    memset(&r, 0, sizeof r);
    const int shared = pd_reservations_shared(set); /* shared log hook */
    st = shared ? pd_reservations_reserve_shared(set, &hold, ctx, u->grid, &p, &r, &rj->was_cut, rj->message,
                                                 sizeof rj->message)
                : pd_sipp_reserve(ctx, table, u->grid, &p, &r);
    if (st == PD_OK || st == PD_PARTIAL) {
        rj->waypoints = malloc((r.n_waypoints ? r.n_waypoints : 1) * sizeof *rj->waypoints);
        if (rj->waypoints) {
            memcpy(rj->waypoints, r.waypoints, r.n_waypoints * sizeof *rj->waypoints);
            rj->n_waypoints = r.n_waypoints;
        } else {
            /* reserved, but the answer cannot carry it: take it back
             * (shared: the log has it; the client's retry replaces it) */
            if (!shared)
                pd_reserve_release(table, q->agent);
            st = PD_INTERNAL;
            snprintf(rj->message, sizeof rj->message, "out of memory answering in scene '%s'", s->name);
        }
    }
    if (!shared) /* shared: the expiry is in the log's entries */
        pd_reserve_maintain(table, pd_reservations_ttl_ms(set), NULL, 0, NULL);
    pd_reservations_unlock(set, &hold);
    if (hold.unlogged && (st == PD_OK || st == PD_PARTIAL)) /* reservation log hook */
        st = pd__unlogged(rj, s);
    /* A search over a large window may have grown the context far past
     * what the next needs: give that back, as workers trim their scratch. */
    pd_sipp_ctx_trim(ctx, PD_KIND_RESERVE_SIPP_KEEP_BYTES);
    rj->reserved_until_ms = r.reserved_until_ms;
    rj->cost = r.cost;
    rj->expanded = r.expanded;
    rj->micros = r.micros;
    rj->has_blocker = r.has_blocker;
    rj->blocker = r.blocker;
    if (!rj->message[0]) {
        switch (st) {
        case PD_OK:
        case PD_PARTIAL:
            break;
        case PD_LIMIT_EXCEEDED:
            snprintf(rj->message, sizeof rj->message, "%s would be passed in scene '%s'",
                     pd_kind_reserve_limit_key(r.limit), s->name);
            break;
        case PD_START_BLOCKED:
            if (r.has_blocker)
                snprintf(rj->message, sizeof rj->message, "agent %" PRIu64 " holds the start at t0_ms %" PRId64,
                         r.blocker, q->t0_ms);
            else
                snprintf(rj->message, sizeof rj->message, "the start is blocked for unit_size %u in scene '%s'",
                         (unsigned)q->unit_size, s->name);
            break;
        case PD_OUT_OF_BOUNDS:
            snprintf(rj->message, sizeof rj->message, "start or goal outside scene '%s' (for unit_size %u)", s->name,
                     (unsigned)q->unit_size);
            break;
        case PD_NO_PATH:
            snprintf(rj->message, sizeof rj->message, "no plan reaches the goal in scene '%s'%s", s->name,
                     q->window_ms ? "" : " at any time");
            break;
        case PD_GOAL_BLOCKED:
            snprintf(rj->message, sizeof rj->message, "the goal is blocked for unit_size %u in scene '%s'",
                     (unsigned)q->unit_size, s->name);
            break;
        default:
            snprintf(rj->message, sizeof rj->message, "%s", pd_status_name(st));
            break;
        }
    }
    return rj->status = st;
}

static pd_status pd__reserve_run(pd_job *job, pd_query_scratch *scratch, const pd_query_control *ctl)
{
    (void)scratch;
    pd_reserve_job *rj = job->ext;
    pd_scene *s = pd__scene(rj);
    if (!s)
        return rj->status;
    pd_status st = pd__reserve_plan(rj, s, ctl);
    pd_scene_release(s);
    return st;
}

static pd_status pd__release_run(pd_job *job, pd_query_scratch *scratch, const pd_query_control *ctl)
{
    (void)scratch;
    (void)ctl;
    pd_reserve_job *rj = job->ext;
    pd_scene *s = pd__scene(rj);
    if (!s)
        return rj->status;
    pd_reservations *set = pd_registry_reservations(rj->registry);
    pd_status st = pd_reservations_refusal(set, rj->message, sizeof rj->message); /* reservation log hook */
    if (st != PD_OK) {
        pd_scene_release(s);
        return rj->status = st;
    }
    pd_reservations_hold hold;
    const int shared = pd_reservations_shared(set); /* shared log hook */
    pd_reserve *table = pd_reservations_lock(set, s, shared, &hold);
    if (shared && table)
        st = pd_reservations_release_shared(set, &hold, rj->req.agent, &rj->released, rj->message,
                                            sizeof rj->message);
    else
        rj->released = table ? pd_reserve_release(table, rj->req.agent) : 0;
    pd_reservations_unlock(set, &hold);
    if (hold.unlogged) /* reservation log hook */
        st = pd__unlogged(rj, s);
    pd_scene_release(s);
    return rj->status = st;
}

static pd_status pd__list_run(pd_job *job, pd_query_scratch *scratch, const pd_query_control *ctl)
{
    (void)scratch;
    (void)ctl;
    pd_reserve_job *rj = job->ext;
    const pd_reserve_req *q = &rj->req;
    pd_scene *s = pd__scene(rj);
    if (!s)
        return rj->status;
    pd_point lo = {0, 0}, hi = {s->grid->width - 1, s->grid->height - 1};
    if (q->has_rect) {
        lo = q->rect_min;
        hi = q->rect_max;
    }
    size_t cap = q->max_entries && q->max_entries < PD_RESERVE_MAX_LIST ? q->max_entries : PD_RESERVE_MAX_LIST;
    pd_reservations *set = pd_registry_reservations(rj->registry);
    pd_reservations_hold hold;
    const int shared = pd_reservations_shared(set); /* shared log hook: read what the log holds */
    pd_reserve *table = pd_reservations_lock(set, s, shared, &hold);
    pd_status st = shared ? pd_reservations_catch_up(set, &hold, rj->message, sizeof rj->message) : PD_OK;
    if (st != PD_OK) {
        rj->status = st;
    } else if (table) {
        rj->entries = malloc(cap * sizeof *rj->entries);
        if (!rj->entries) {
            st = pd__fail(rj, PD_INTERNAL, "out of memory listing the reservations of scene '%s'", s->name);
        } else {
            rj->matching = pd_reserve_query(table, lo.x, lo.y, hi.x, hi.y, q->from_ms, q->to_ms, rj->entries, cap);
            rj->n_entries = rj->matching < cap ? (size_t)rj->matching : cap;
            pd_reserve_get_stats(table, &rj->stats);
        }
    }
    pd_reservations_unlock(set, &hold);
    pd_scene_release(s);
    return rj->status = st;
}

static const char *pd__reserve_scene(const pd_job *job)
{
    const pd_reserve_job *rj = job->ext;
    return rj ? rj->req.scene : NULL;
}

/* A request for an unknown scene is a refusal: its client-made name must
 * not take a metrics label slot. */
static int pd__reserve_unserved(const pd_job *job)
{
    const pd_reserve_job *rj = job->ext;
    return !rj || rj->status == PD_UNKNOWN_SCENE;
}

const pd_kind pd_kind_reserve_path = {
    .name = "reserve_path",
    .role = PD_ROLE_WRITE,
    .runs = PD_KIND_LANE,
    .counts_paths = 1,
    .prepare = pd__reserve_prepare,
    .run = pd__reserve_run,
    .release = pd__reserve_release,
    .scene = pd__reserve_scene,
    .unserved = pd__reserve_unserved,
};

const pd_kind pd_kind_release_agent = {
    .name = "release_agent",
    .role = PD_ROLE_WRITE,
    .runs = PD_KIND_LANE,
    .prepare = pd__reserve_prepare,
    .run = pd__release_run,
    .release = pd__reserve_release,
    .scene = pd__reserve_scene,
    .unserved = pd__reserve_unserved,
};

const pd_kind pd_kind_get_reservations = {
    .name = "get_reservations",
    .role = PD_ROLE_QUERY,
    .runs = PD_KIND_LANE,
    .prepare = pd__reserve_prepare,
    .run = pd__list_run,
    .release = pd__reserve_release,
    .scene = pd__reserve_scene,
    .unserved = pd__reserve_unserved,
};
