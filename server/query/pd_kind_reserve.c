/*
 * pd_kind_reserve.c - the reservation family's kinds: ReservePath (plan
 * with SIPP around the other agents' holds and reserve, pd_sipp.h; clear
 * holds and, when the request sets yield_after_ms, standing agents moved
 * out of its way, pd_yield.h; a t0_ms the scene's game clock cannot take
 * refused first, pd_reservations_clock_refusal), ReleaseAgent (one agent,
 * or with all every agent: AGENTS_RELEASED) and GetReservations; and the
 * sweep of an idle scene's table that the server's timer posts. Each runs
 * as an ordered task in its
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
#include "pd_clock.h"
#include "pd_sipp.h"
#include "pd_yield.h"

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

/* The planner contexts of one worker thread, made at its first ReservePath
 * (the query scratch predates SIPP; a context reused keeps its arrays, as
 * a search context does), freed when the thread ends: SIPP's (also for
 * FindPath's avoid_reserved) and the yielding planner's (pd_yield.h). */
typedef struct pd__planners {
    pd_sipp_ctx *sipp;
    pd_yield_ctx *yield;
} pd__planners;

static pthread_key_t pd__planners_key;
static pthread_once_t pd__planners_once = PTHREAD_ONCE_INIT;

static void pd__planners_free(void *v)
{
    pd__planners *pl = v;
    pd_sipp_ctx_destroy(pl->sipp);
    pd_yield_ctx_destroy(pl->yield);
    free(pl);
}

static void pd__planners_key_make(void)
{
    (void)pthread_key_create(&pd__planners_key, pd__planners_free);
}

/* The calling thread's contexts, each made at its first use; NULL, or a
 * NULL member, when out of memory. */
static pd__planners *pd__planners_get(void)
{
    pthread_once(&pd__planners_once, pd__planners_key_make);
    pd__planners *pl = pthread_getspecific(pd__planners_key);
    if (!pl && (pl = calloc(1, sizeof *pl)) != NULL && pthread_setspecific(pd__planners_key, pl) != 0) {
        free(pl);
        pl = NULL;
    }
    return pl;
}

pd_sipp_ctx *pd_kind_reserve_sipp_ctx(void)
{
    pd__planners *pl = pd__planners_get();
    if (pl && !pl->sipp)
        pl->sipp = pd_sipp_ctx_create();
    return pl ? pl->sipp : NULL;
}

static pd_yield_ctx *pd__yield_ctx(void)
{
    pd__planners *pl = pd__planners_get();
    if (pl && !pl->yield)
        pl->yield = pd_yield_ctx_create();
    return pl ? pl->yield : NULL;
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

/* Frees the plans a ReservePath answer carries (its own, the moved
 * agents'). */
static void pd__drop_plans(pd_reserve_job *rj)
{
    for (size_t i = 0; i < rj->n_displaced; i++)
        free(rj->displaced[i].waypoints);
    free(rj->displaced);
    rj->displaced = NULL;
    rj->n_displaced = 0;
    free(rj->waypoints);
    rj->waypoints = NULL;
    rj->n_waypoints = 0;
}

static void pd__reserve_release(pd_job *job)
{
    pd_reserve_job *rj = job->ext;
    if (!rj)
        return;
    pd__drop_plans(rj);
    free(rj->entries);
    free(rj->expired);
    free(rj->released_ids);
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
    rj->incarnation = s->incarnation;
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

static pd_waypoint *pd__copy_waypoints(const pd_waypoint *wp, size_t n)
{
    pd_waypoint *out = malloc((n ? n : 1) * sizeof *out);
    if (out)
        memcpy(out, wp, n * sizeof *out);
    return out;
}

/* Copies the plan and the moved agents' plans out of the planner's
 * contexts (valid until their next call) into the job; 0, or -1 when out
 * of memory (the job then holds none of them). */
static int pd__keep_answer(pd_reserve_job *rj, const pd_sipp_result *r, const pd_yield_result *yr)
{
    rj->waypoints = pd__copy_waypoints(r->waypoints, r->n_waypoints);
    if (!rj->waypoints)
        return -1;
    rj->n_waypoints = r->n_waypoints;
    if (yr->n_displaced == 0)
        return 0;
    rj->displaced = calloc(yr->n_displaced, sizeof *rj->displaced);
    for (size_t i = 0; rj->displaced && i < yr->n_displaced; i++) {
        const pd_displaced *d = &yr->displaced[i];
        pd_reserve_displaced *out = &rj->displaced[rj->n_displaced];
        if (!(out->waypoints = pd__copy_waypoints(d->waypoints, d->n_waypoints)))
            break;
        out->agent = d->agent;
        out->t0_ms = d->t0_ms;
        out->reserved_until_ms = d->reserved_until_ms;
        out->n_waypoints = d->n_waypoints;
        rj->n_displaced++;
    }
    if (rj->displaced && rj->n_displaced == yr->n_displaced)
        return 0;
    pd__drop_plans(rj);
    return -1;
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
    pd_yield_ctx *yc = pd__yield_ctx();
    if (!ctx || !yc)
        return pd__fail(rj, PD_INTERNAL, "out of memory planning in scene '%s'", s->name);
    pd_status st;
    pd_reservations *set = pd_registry_reservations(rj->registry);
    /* Holders are re-planned on their own unit's grid (unit 1: the scene's
     * open cells, which clear holds reads too). */
    const pd_grid *grids[PD_CONF_MAX_UNIT_SIZE + 1] = { NULL };
    uint32_t max_unit = 1;
    grids[1] = s->grid;
    for (size_t i = 0; i < s->n_unit_sizes; i++)
        if (s->unit_sizes[i] <= PD_CONF_MAX_UNIT_SIZE) {
            grids[s->unit_sizes[i]] = s->units[i].grid;
            max_unit = s->unit_sizes[i] > max_unit ? s->unit_sizes[i] : max_unit;
        }
    const pd_yield_params y = { .after_ms = q->yield_after_ms, .unit_grids = grids, .max_unit = max_unit,
                                .clear_holds = pd_reservations_clear_holds(set), .move_ahead = 1, .park_any = 1,
                                .give_way_ms = PD_YIELD_GIVE_WAY_MS, .door_ms = PD_YIELD_DOOR_MS,
                                .aside_after_ahead = 1, .cross_ms = PD_YIELD_CROSS_MS, .joint = 1 };
    if ((st = pd_reservations_refusal(set, rj->message, sizeof rj->message)) != PD_OK) /* reservation log hook */
        return rj->status = st;
    if (pd_reservations_shared(set) && q->yield_after_ms > 0) {
        /* Moving holders aside changes other agents' plans in the table
         * as it goes (and undoes them); the shared log takes a plan made
         * without changing the table. Not served rather than ignored: the
         * game would wait for a way that never clears. */
        snprintf(rj->message, sizeof rj->message,
                 "reserve_path.yield_after_ms is not served on replicas (log.redis); scene '%s': send it 0, or "
                 "reserve on one pathd with data_dir", s->name);
        return rj->status = PD_LIMIT_EXCEEDED;
    }
    pd_reservations_hold hold;
    pd_reserve *table = pd_reservations_lock(set, s, 1, &hold);
    if (!table)
        return pd__fail(rj, PD_INTERNAL, "out of memory for the reservations of scene '%s'", s->name);
    /* A t0 the scene's clock cannot take, refused before anything changes
     * (nor is it game time heard). Shared: against the table caught up,
     * in pd_reservations_reserve_shared. */
    const int shared = pd_reservations_shared(set); /* shared log hook */
    if (!shared && (st = pd_reservations_clock_refusal(set, table, s->name, q->agent, q->t0_ms, rj->message,
                                                       sizeof rj->message)) != PD_OK) {
        pd_reservations_unlock(set, &hold);
        return rj->status = st;
    }
    pd_reservations_heard(&hold, pd_clock_ns());
    rj->was_cut = pd_reserve_was_cut(table, q->agent);
    pd_sipp_result r;
    memset(&r, 0, sizeof r);
    pd_yield_result yr;
    memset(&yr, 0, sizeof yr);
    st = shared ? pd_reservations_reserve_shared(set, &hold, ctx, yc, &y, u->grid, &p, &r, &rj->was_cut,
                                                 &rj->expired, &rj->n_expired, rj->message, sizeof rj->message)
                : pd_yield_reserve(yc, ctx, table, u->grid, &p, &y, &r, &yr);
    if (st == PD_OK || st == PD_PARTIAL) {
        if (pd__keep_answer(rj, &r, &yr) != 0) {
            /* reserved, but the answer cannot carry it: take it back, and
             * the moved agents' new plans the game would never hear of
             * (shared: the log has it; the client's retry replaces it) */
            if (!shared) {
                pd_reserve_release(table, q->agent);
                for (size_t i = 0; i < yr.n_displaced; i++)
                    pd_reserve_release(table, yr.displaced[i].agent);
            }
            st = PD_INTERNAL;
            snprintf(rj->message, sizeof rj->message, "out of memory answering in scene '%s'", s->name);
        }
    }
    /* The only agent's t0 before the clock: its clock starts afresh (a
     * CLOCK op the log records after the replace). Shared: the entry
     * carries it (pd_reservations_reserve_shared). */
    if (!shared && (st == PD_OK || st == PD_PARTIAL))
        (void)pd_reserve_restart_clock(table, q->agent);
    if (!shared) /* shared: the expiry is in the log's entries */
        rj->n_expired = pd_reservations_maintain(table, pd_reservations_ttl_ms(set), &rj->expired);
    pd_reservations_unlock(set, &hold);
    if (hold.unlogged && (st == PD_OK || st == PD_PARTIAL)) /* reservation log hook */
        st = pd__unlogged(rj, s);
    /* A search over a large window may have grown the context far past
     * what the next needs: give that back, as workers trim their scratch. */
    pd_sipp_ctx_trim(ctx, PD_KIND_RESERVE_SIPP_KEEP_BYTES);
    (void)pd_yield_ctx_trim(yc, PD_KIND_RESERVE_YIELD_KEEP_BYTES);
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
    if (rj->req.all && table) {
        st = pd_reservations_release_all(set, &hold, &rj->released_ids, &rj->n_released, rj->message,
                                         sizeof rj->message);
        rj->released = rj->n_released > 0;
    } else if (shared && table) {
        st = pd_reservations_release_shared(set, &hold, rj->req.agent, &rj->released, rj->message,
                                            sizeof rj->message);
    } else {
        rj->released = table ? pd_reserve_release(table, rj->req.agent) : 0;
    }
    if (!rj->req.all)
        rj->n_released = rj->released != 0;
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

/* The agents a ReservePath moved aside, to the scene's watchers: one
 * AGENTS_DISPLACED event (at most PD_YIELD_MAX_DISPLACED ids), after the
 * answer's plans are in the table, in the lane's order; then the agents
 * its expiry released (AGENTS_EXPIRED, PD_WATCH_MAX_AGENTS a event). */
static int pd__reserve_event(const pd_job *job, size_t i, pd_watch_event *ev)
{
    const pd_reserve_job *rj = job->ext;
    if (!rj)
        return 0;
    const size_t moved = rj->n_displaced && (job->task.status == PD_OK || job->task.status == PD_PARTIAL);
    if (i >= moved)
        return rj->expired && pd_watch_event_agents_expired(rj->req.scene, rj->incarnation, rj->scene_version,
                                                            rj->expired, rj->n_expired, i - moved, ev) == 0;
    uint64_t ids[PD_YIELD_MAX_DISPLACED];
    size_t n = 0;
    for (; n < rj->n_displaced && n < PD_YIELD_MAX_DISPLACED; n++)
        ids[n] = rj->displaced[n].agent;
    return pd_watch_event_agents_displaced(rj->req.scene, rj->incarnation, rj->scene_version, ids, n, ev) == 0;
}

/* ReleaseAgent with all: the agents it released, to the scene's watchers
 * (AGENTS_RELEASED, PD_WATCH_MAX_AGENTS an event), in the lane's order. */
static int pd__release_event(const pd_job *job, size_t i, pd_watch_event *ev)
{
    const pd_reserve_job *rj = job->ext;
    return rj && rj->released_ids && job->task.status == PD_OK &&
           pd_watch_event_agents_released(rj->req.scene, rj->incarnation, rj->scene_version, rj->released_ids,
                                          rj->n_released, i, ev) == 0;
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
    .event = pd__reserve_event,
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
    .event = pd__release_event,
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

/* ---- the idle sweep --------------------------------------------------- */

pd_reserve_sweep *pd_kind_reserve_sweep_new(pd_registry *registry, const char *name, uint64_t listed_ns)
{
    pd_reserve_sweep *sw = calloc(1, sizeof *sw);
    if (!sw)
        return NULL;
    pd_task_init(&sw->task, pd_kind_reserve_sweep_run);
    sw->task.ordered = 1;
    sw->task.lane = sw->task.lane2 = pd_kind_scene_lane(name);
    sw->registry = registry;
    snprintf(sw->scene, sizeof sw->scene, "%s", name);
    sw->listed_ns = listed_ns;
    return sw;
}

pd_status pd_kind_reserve_sweep_run(pd_task *task, void *thread_ctx)
{
    (void)thread_ctx;
    pd_reserve_sweep *sw = (pd_reserve_sweep *)task;
    pd_scene *s = pd_registry_acquire(sw->registry, sw->scene);
    if (!s)
        return PD_OK; /* dropped meanwhile: its table went with it */
    /* Measured now, in the lane: a ReservePath queued before the sweep has
     * run, and the table is idle only if none came since. */
    sw->released = pd_reservations_sweep(pd_registry_reservations(sw->registry), s, pd_clock_ns(), &sw->agents);
    sw->incarnation = s->incarnation;
    sw->version = s->version;
    pd_scene_release(s);
    return PD_OK;
}

void pd_kind_reserve_sweep_free(pd_reserve_sweep *sw)
{
    if (!sw)
        return;
    free(sw->agents);
    free(sw);
}

int pd_kind_reserve_sweep_event(const pd_reserve_sweep *sw, size_t part, pd_watch_event *ev)
{
    return sw->agents ? pd_watch_event_agents_expired(sw->scene, sw->incarnation, sw->version, sw->agents,
                                                      sw->released, part, ev)
                      : -1;
}
