/*
 * pd_scene_reserve_shared.c - the scenes' reservation tables on the
 * replicas' shared log (pd_reserve_shared.h; docs/ARCHITECTURE.md,
 * "Reservations in the log"). Every change is decided against the table
 * caught up to the log, appended as the next entry (compare-and-set), and
 * only then applied, as every other replica applies it:
 *  - ReservePath plans without changing the table (pd_sipp_plan) and
 *    appends the plan as a replace (and, when due, the expiry with the
 *    game time it uses): a refused append costs nothing to undo, the plan
 *    is made again on the table caught up;
 *  - ReleaseAgent appends the release;
 *  - UpdateCells' cut runs on the table (it must find the agents), its
 *    changes captured; a refused append makes the table again from the
 *    log (rare: an update racing a reservation in the scene) and cuts
 *    again;
 *  - the server timer's idle sweep appends its expiry with the game time
 *    it estimated.
 * pd_reservations_cut and pd_reservations_sweep live here, so that the
 * set's file (pd_scene_reserve.c) never calls this one.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_clock.h"
#include "pd_reserve_shared.h"
#include "pd_scene_reserve_internal.h"
#include "pd_sipp.h"
#include "pd_sort.h"
#include "pd_yield.h"

/* Appends refused in a row (other replicas reserved in the scene first)
 * before a request is answered UNAVAILABLE. */
#define PD__SHARED_TRIES 8

void pd_reservations_share(pd_reservations *set, pd_redis_log *rl)
{
    pthread_mutex_lock(&set->lock);
    set->shared = rl;
    pthread_mutex_unlock(&set->lock);
}

int pd_reservations_shared(pd_reservations *set)
{
    return set->shared != NULL;
}

pd_status pd_reservations_catch_up(pd_reservations *set, pd_reservations_hold *hold, char *msg, size_t len)
{
    pd_reservations_entry *e = hold->entry;
    if (!set->shared || !e)
        return PD_OK;
    char err[384];
    uint64_t refused = 0;
    if (pd_reserve_shared_catch_up(set->shared, e->name, e->table, &e->rv, &refused, err, sizeof err) != 0) {
        snprintf(msg, len, "the reservations of scene '%s' cannot be read from the shared log (%.200s); try again",
                 e->name, err);
        return PD_UNAVAILABLE;
    }
    return PD_OK;
}

typedef struct pd__local {
    pd_reserve *t;
    int refused;
} pd__local;

static void pd__apply_local(void *user, const char *scene, const pd_reserve_op *op)
{
    (void)scene;
    pd__local *l = user;
    if (op && pd_reserve_log_apply(l->t, op) != PD_OK)
        l->refused = 1;
}

/* The entry e->rv just appended and applied: when it ends an interval of
 * PD_RESERVE_SHARED_SNAPSHOT_EVERY, the table is written as the scene's
 * snapshot and the stream trimmed below it (pd_reserve_shared.h). Not
 * written (Redis not reached meanwhile): the next interval's writer does,
 * the stream one interval longer until then. */
static void pd__snapshot_due(pd_reservations *set, pd_reservations_entry *e)
{
    if (e->rv % PD_RESERVE_SHARED_SNAPSHOT_EVERY != 0)
        return;
    char err[384];
    (void)pd_reserve_shared_snapshot(set->shared, e->name, e->table, e->rv, err, sizeof err);
}

/* Appends b as the entry after the table's and applies it: PD_OK; *lost 1
 * (and PD_OK) when another replica appended first; else the status. */
static pd_status pd__commit(pd_reservations *set, pd_reservations_entry *e, const pd_reserve_log_buf *b, int *lost,
                            char *msg, size_t len)
{
    *lost = 0;
    if (b->failed) {
        snprintf(msg, len, "out of memory recording a reservation of scene '%s'", e->name);
        return PD_INTERNAL;
    }
    char err[384];
    int rc = pd_reserve_shared_append(set->shared, e->name, e->rv, b->p, b->n, err, sizeof err);
    if (rc == 1) {
        *lost = 1;
        return PD_OK;
    }
    if (rc != 0) {
        snprintf(msg, len, "the shared log did not take the reservation of scene '%s' (%.200s); nothing reserved, try "
                 "again", e->name, err);
        return PD_UNAVAILABLE;
    }
    e->rv++;
    pd__local l = { e->table, 0 };
    if (pd_reserve_log_decode(b->p, b->n, pd__apply_local, &l) != b->n || l.refused) {
        /* Decided on this very table: a bug. The log has it; the table is
         * made again from the log at the next catch-up of a fresh one. */
        snprintf(msg, len, "scene '%s': the reservation appended did not apply to the table", e->name);
        return PD_INTERNAL;
    }
    pd__snapshot_due(set, e);
    return PD_OK;
}

/* The agents an EXPIRE at at_ms releases (renewed before it, as
 * pd_reserve_expire reads them): listed from the table's export, before
 * the entry that releases them is appended. */
typedef struct pd__expiring {
    int64_t at_ms;
    uint64_t *ids;
    size_t n;
    uint64_t except;             /* an agent the entry renews before its EXPIRE (0: none) */
} pd__expiring;

static void pd__note_expiring(void *user, const pd_reserve_op *op)
{
    pd__expiring *x = user;
    if (op->kind == PD_RESERVE_OP_RESTORE && op->at_ms < x->at_ms && op->agent != x->except) {
        if (x->ids)
            x->ids[x->n] = op->agent;
        x->n++;
    }
}

/* ids[0..n) ascending, kept as *agents (NULL when none). */
static void pd__keep_ids(uint64_t *ids, size_t n, uint64_t **agents)
{
    if (ids && n) {
        qsort(ids, n, sizeof *ids, pd_cmp_u64);
        *agents = ids;
    } else {
        free(ids);
    }
}

size_t pd_reservations_maintain(pd_reserve *table, int64_t ttl_ms, uint64_t **agents)
{
    *agents = NULL;
    if (!pd_reserve_maintain_due(table, ttl_ms))
        return 0; /* the usual case: no allocation on every ReservePath */
    pd_reserve_stats held;
    pd_reserve_get_stats(table, &held);
    uint64_t *ids = held.agents ? malloc(held.agents * sizeof *ids) : NULL;
    const size_t n = pd_reserve_maintain(table, ttl_ms, ids, ids ? held.agents : 0, NULL);
    pd__keep_ids(ids, n, agents);
    return ids ? n : 0;
}

/* A ReservePath's t0 the clock check refused (hold's table caught up). It
 * is no game time heard, as in file mode: counted, a game retrying more
 * often than the idle sweep's interval put the sweep off for good. But a
 * table this replica has heard nothing of since it started (file mode's
 * replay counts a table as heard at the restart) is timed from now, at
 * the clock read back: else, both replicas restarted after the game's
 * clock ran past max_clock_step_ms, the stale agents were never swept and
 * every t0 was refused for good. */
static void pd__refused_heard(pd_reservations *set, pd_reservations_hold *hold)
{
    pd_reservations_entry *e = hold->entry;
    hold->heard_ns = 0;
    const int64_t now_game = pd_reserve_now(e->table);
    pthread_mutex_lock(&set->lock);
    if (!e->heard_ns) {
        e->heard_game_ms = now_game;
        e->heard_ns = pd_clock_ns();
        e->swept_empty = 0;
    }
    pthread_mutex_unlock(&set->lock);
}

pd_status pd_reservations_reserve_shared(pd_reservations *set, pd_reservations_hold *hold, pd_sipp_ctx *ctx,
                                         pd_yield_ctx *yc, const pd_yield_params *y, const pd_grid *grid,
                                         const pd_sipp_params *p, pd_sipp_result *r, int *was_cut,
                                         uint64_t **expired, size_t *n_expired, char *msg, size_t len)
{
    pd_reservations_entry *e = hold->entry;
    const int64_t ttl = pd_reservations_ttl_ms(set);
    *expired = NULL;
    *n_expired = 0;
    for (int attempt = 0; attempt < PD__SHARED_TRIES; attempt++) {
        pd_status st = pd_reservations_catch_up(set, hold, msg, len);
        if (st != PD_OK)
            return st;
        memset(r, 0, sizeof *r);
        /* The clock check of file mode, on the table caught up: before
         * the append, so no replica takes the t0. */
        if ((st = pd_reservations_clock_refusal(set, e->table, e->name, p->agent, p->t0_ms, msg, len)) != PD_OK) {
            pd__refused_heard(set, hold);
            return st;
        }
        *was_cut = pd_reserve_was_cut(e->table, p->agent);
        /* the clear holds rule as file mode applies it (pd_yield_plan) */
        const pd_status planned = pd_yield_plan(yc, ctx, e->table, grid, p, y, r);
        if (planned != PD_OK && planned != PD_PARTIAL)
            return planned;
        /* The table's limits, checked before the log takes the plan
         * (replicas apply entries with limits off). Entries: the plan's
         * waits and moves at most, as if none of the agent's went. */
        const pd_reserve_limits *lim = pd_reserve_get_limits(e->table);
        pd_reserve_stats stats;
        pd_reserve_get_stats(e->table, &stats);
        const int is_new = pd_reserve_agent_slot(e->table, p->agent) == PD_RESERVE_NO_SLOT;
        if (lim->max_agents && is_new && stats.agents >= lim->max_agents)
            r->limit = PD_RESERVE_LIMIT_AGENTS;
        else if (lim->max_entries && stats.entries + 2u * r->n_waypoints > lim->max_entries)
            r->limit = PD_RESERVE_LIMIT_ENTRIES;
        if (r->limit != PD_RESERVE_LIMIT_NONE) {
            r->waypoints = NULL;
            r->n_waypoints = 0;
            return PD_LIMIT_EXCEEDED;
        }
        pd_reserve_log_buf b = { 0 };
        (void)pd_reserve_log_encode(&b, e->name,
                                    &(pd_reserve_op){ .kind = PD_RESERVE_OP_REPLACE, .agent = p->agent,
                                                      .unit = p->unit, .at_ms = p->t0_ms, .wp = r->waypoints,
                                                      .n = r->n_waypoints });
        /* The agent's speed, as pd_yield_reserve notes it: a holder is
         * moved at its own speed. */
        (void)pd_reserve_log_encode(&b, e->name,
                                    &(pd_reserve_op){ .kind = PD_RESERVE_OP_SPEED, .agent = p->agent,
                                                      .speed = p->speed });
        /* The requester alone at a t0 before the clock: the entry starts
         * the clock afresh at t0 (pd_reserve_restart_clock's CLOCK, as
         * file mode logs it), decided here against the table caught up
         * and carried by the log, so every replica - and an older pathd -
         * applies the same clock. */
        if (pd_reserve_clock_restarts(e->table, p->agent, p->t0_ms))
            (void)pd_reserve_log_encode(&b, e->name,
                                        &(pd_reserve_op){ .kind = PD_RESERVE_OP_CLOCK, .at_ms = p->t0_ms,
                                                          .maintained_ms = 0 });
        /* Expiry, as pd_reserve_maintain times it (once per sixteenth of
         * the TTL of game time), with the time it uses in the entry. */
        /* An empty table has no clock, whatever an old snapshot restored
         * (pd_reserve_replace starts its first agent from 0); nor, for the
         * expiry, one holding the requester alone: the entry restarts the
         * clock at t0 when t0 is before it, and t0 is the clock when
         * after. */
        const int64_t clock = pd_reserve_holds_only(e->table, p->agent) ? 0 : pd_reserve_now(e->table);
        const int64_t now = clock > p->t0_ms ? clock : p->t0_ms;
        const int64_t every = ttl / 16 > 0 ? ttl / 16 : 1;
        /* An empty table forgot its clock (pd_reserve_now): so does the
         * expiry's mark, or a clock started over would wait for the old
         * one's time to come round again. A clock below the mark was
         * forgotten and started over through another replica (its
         * ReleaseAgent all, or its expiry of the last agent) while this
         * one's mark stayed: the same. */
        if (stats.agents == 0 || now < e->maintained_ms)
            e->has_maintained = 0;
        const int maintain = ttl > 0 && now - ttl >= 0 && (!e->has_maintained || now - e->maintained_ms >= every);
        /* The agents it releases, listed before the entry is applied (the
         * requester is renewed by its replace first). */
        pd__expiring x = { now - ttl, NULL, 0, p->agent };
        if (maintain) {
            (void)pd_reserve_log_encode(&b, e->name,
                                        &(pd_reserve_op){ .kind = PD_RESERVE_OP_EXPIRE, .at_ms = now - ttl });
            (void)pd_reserve_log_encode(&b, e->name,
                                        &(pd_reserve_op){ .kind = PD_RESERVE_OP_COLLECT, .at_ms = now - ttl });
            x.ids = stats.agents ? malloc(stats.agents * sizeof *x.ids) : NULL;
            if (x.ids)
                (void)pd_reserve_export(e->table, pd__note_expiring, &x);
        }
        int lost = 0;
        st = pd__commit(set, e, &b, &lost, msg, len);
        pd_reserve_log_buf_free(&b);
        if (st != PD_OK || lost)
            free(x.ids);
        if (st != PD_OK) {
            r->waypoints = NULL;
            r->n_waypoints = 0;
            return st;
        }
        if (!lost) {
            if (maintain) {
                e->maintained_ms = now;
                e->has_maintained = 1;
                pd__keep_ids(x.ids, x.n, expired);
                *n_expired = *expired ? x.n : 0;
            }
            return planned;
        }
    }
    r->waypoints = NULL;
    r->n_waypoints = 0;
    snprintf(msg, len, "other replicas reserved in scene '%s' %d times while this one planned; nothing reserved, try "
             "again", e->name, PD__SHARED_TRIES);
    return PD_UNAVAILABLE;
}

/* The idle sweep's expiry on a replica (pd_reservations_sweep), on the
 * table caught up: appends EXPIRE and COLLECT at at_ms as the scene's next
 * entry and applies them; the agents released (0 when the log was not
 * reached, or another replica appended first: the next sweep tries
 * again), their ids to out[0..) (room for every agent of the table; out
 * may be NULL). */
static size_t pd__expire_shared(pd_reservations *set, pd_reservations_hold *hold, int64_t at_ms, uint64_t *out)
{
    pd_reservations_entry *e = hold->entry;
    char msg[512];
    pd_reserve_stats before;
    pd_reserve_get_stats(e->table, &before);
    if (before.agents == 0 && before.entries == 0)
        return 0; /* nothing to expire: nothing to log */
    pd__expiring x = { at_ms, out, 0, 0 };
    (void)pd_reserve_export(e->table, pd__note_expiring, &x);
    /* Parked agents renewed within the TTL and no entry ended long ago:
     * the entry would change nothing on any replica. Logged anyway, every
     * replica appended one per idle scene at every sweep (each 1/16 of the
     * TTL), forever, while agents stood parked. */
    if (x.n == 0 && pd_reserve_collectable(e->table, at_ms) == 0)
        return 0;
    pd_reserve_log_buf b = { 0 };
    (void)pd_reserve_log_encode(&b, e->name, &(pd_reserve_op){ .kind = PD_RESERVE_OP_EXPIRE, .at_ms = at_ms });
    (void)pd_reserve_log_encode(&b, e->name, &(pd_reserve_op){ .kind = PD_RESERVE_OP_COLLECT, .at_ms = at_ms });
    int lost = 0;
    const pd_status st = pd__commit(set, e, &b, &lost, msg, sizeof msg);
    pd_reserve_log_buf_free(&b);
    /* x.n: the agents the EXPIRE released, as the table applied it */
    return st != PD_OK || lost ? 0 : x.n;
}

pd_status pd_reservations_release_shared(pd_reservations *set, pd_reservations_hold *hold, uint64_t agent,
                                         int *released, char *msg, size_t len)
{
    pd_reservations_entry *e = hold->entry;
    *released = 0;
    for (int attempt = 0; attempt < PD__SHARED_TRIES; attempt++) {
        pd_status st = pd_reservations_catch_up(set, hold, msg, len);
        if (st != PD_OK)
            return st;
        if (pd_reserve_agent_slot(e->table, agent) == PD_RESERVE_NO_SLOT)
            return PD_OK; /* nothing to release: nothing to log */
        pd_reserve_log_buf b = { 0 };
        (void)pd_reserve_log_encode(&b, e->name, &(pd_reserve_op){ .kind = PD_RESERVE_OP_RELEASE, .agent = agent });
        int lost = 0;
        st = pd__commit(set, e, &b, &lost, msg, len);
        pd_reserve_log_buf_free(&b);
        if (st != PD_OK)
            return st;
        if (!lost) {
            *released = 1;
            return PD_OK;
        }
    }
    snprintf(msg, len, "other replicas reserved in scene '%s' %d times meanwhile; nothing released, try again",
             e->name, PD__SHARED_TRIES);
    return PD_UNAVAILABLE;
}

/* The ids of every agent of the table, ascending, to *ids (NULL when none
 * or out of memory); returns how many there are. */
static size_t pd__all_ids(const pd_reserve *table, uint64_t **ids)
{
    pd_reserve_stats held;
    pd_reserve_get_stats(table, &held);
    /* every agent was renewed before the end of time */
    pd__expiring x = { PD_RESERVE_FOREVER, held.agents ? malloc(held.agents * sizeof *x.ids) : NULL, 0, 0 };
    if (x.ids)
        (void)pd_reserve_export(table, pd__note_expiring, &x);
    *ids = NULL;
    pd__keep_ids(x.ids, x.n, ids);
    return held.agents;
}

pd_status pd_reservations_release_all(pd_reservations *set, pd_reservations_hold *hold, uint64_t **ids, size_t *n,
                                      char *msg, size_t len)
{
    pd_reservations_entry *e = hold->entry;
    *ids = NULL;
    *n = 0;
    if (!set->shared) {
        /* the table's observer writes the RELEASE_ALL to the reservation log */
        *n = pd__all_ids(e->table, ids);
        (void)pd_reserve_release_all(e->table, NULL, 0);
        return PD_OK;
    }
    for (int attempt = 0; attempt < PD__SHARED_TRIES; attempt++) {
        pd_status st = pd_reservations_catch_up(set, hold, msg, len);
        if (st != PD_OK)
            return st;
        pd_reserve_stats held;
        pd_reserve_get_stats(e->table, &held);
        if (held.agents == 0)
            return PD_OK; /* nothing to release: nothing to log (an empty table has no clock) */
        uint64_t *listed = NULL;
        const size_t count = pd__all_ids(e->table, &listed);
        pd_reserve_log_buf b = { 0 };
        (void)pd_reserve_log_encode(&b, e->name, &(pd_reserve_op){ .kind = PD_RESERVE_OP_RELEASE_ALL });
        int lost = 0;
        st = pd__commit(set, e, &b, &lost, msg, len);
        pd_reserve_log_buf_free(&b);
        if (st != PD_OK || lost) {
            free(listed);
            if (st != PD_OK)
                return st;
            continue;
        }
        e->has_maintained = 0; /* the clock is forgotten, and the expiry's mark with it */
        *ids = listed;
        *n = count;
        return PD_OK;
    }
    snprintf(msg, len, "other replicas reserved in scene '%s' %d times meanwhile; nothing released, try again",
             e->name, PD__SHARED_TRIES);
    return PD_UNAVAILABLE;
}

/* Makes e's table again from the log alone (the set's lock not held, e's
 * held): what it holds locally that the log does not is gone. */
static int pd__rebuild(pd_reservations *set, pd_reservations_entry *e, char *err, size_t errlen)
{
    pthread_mutex_lock(&set->lock);
    pd_reserve_limits limits = set->limits;
    pthread_mutex_unlock(&set->lock);
    pd_reserve *fresh = pd_reserve_create(&limits);
    if (!fresh) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    pd_reserve_set_observer(fresh, pd_reservations_observe, e);
    pd_reserve_destroy(e->table);
    e->table = fresh;
    e->rv = 0;
    e->has_maintained = 0;
    uint64_t refused = 0;
    return pd_reserve_shared_catch_up(set->shared, e->name, e->table, &e->rv, &refused, err, errlen);
}

static pd_update_cut *pd_reservations_cut_shared(pd_reservations *set, const pd_scene *s, const pd_scene_update *ops,
                                          size_t n_ops, int has_at_ms, int64_t at_ms)
{
    /* Made when missing: the other replicas' agents are in the log. */
    pd_reservations_hold hold;
    if (!pd_reservations_lock(set, s, 1, &hold))
        return NULL;
    pd_reservations_entry *e = hold.entry;
    pd_update_cut *cut = NULL;
    char err[512];
    /* The update's own append (it ran just before, in this lane) named the
     * reservation stream's top then: a table already there reads nothing,
     * which spares an XRANGE round trip per update (issue 32's target 3;
     * pd_redis_log_resv_top). Reservations appended before the update are
     * in the table either way. */
    uint64_t top = 0;
    int caught_up = pd_redis_log_resv_top(set->shared, e->name, &top) && top <= e->rv;
    for (int attempt = 0; attempt < PD__SHARED_TRIES; attempt++) {
        if (!caught_up && pd_reservations_catch_up(set, &hold, err, sizeof err) != PD_OK)
            break;
        caught_up = 0; /* after a refused append: read what the other replica appended */
        e->capture = 1;
        e->pend.n = 0;
        e->pend.failed = 0;
        cut = pd_reservations_cut_table(e->table, s, ops, n_ops, has_at_ms, at_ms);
        e->capture = 0;
        if (e->pend.n == 0 && !e->pend.failed)
            break; /* nothing cut: nothing to log */
        const int rc = e->pend.failed ? -1 : pd_reserve_shared_append(set->shared, e->name, e->rv, e->pend.p,
                                                                      e->pend.n, err, sizeof err);
        e->pend.n = 0;
        e->pend.failed = 0;
        if (rc == 0) {
            e->rv++;
            pd__snapshot_due(set, e);
            break;
        }
        const int lost = rc == 1;
        /* The table holds a cut the log does not: made again from the log. */
        pd_update_cut_free(cut);
        cut = NULL;
        if (pd__rebuild(set, e, err, sizeof err) != 0 || !lost)
            break;
    }
    /* Redis not reached: the update stands, its cut is in no table (the
     * log's is what every replica serves). */
    pd_reservations_unlock(set, &hold);
    return cut;
}

void pd_reservations_dropped(pd_reservations *set, const char *name)
{
    if (!set->shared)
        return;
    char err[384];
    /* Not reached: the dropped scene's agents come back if it is made
     * again (docs/OPERATIONS.md, "Reservations"). */
    (void)pd_reserve_shared_reset(set->shared, name, err, sizeof err);
}

/* The idle sweep lives here, as pd_reservations_cut does, so that the
 * set's file never calls this one: on a replica it appends. */
size_t pd_reservations_sweep(pd_reservations *set, const pd_scene *s, uint64_t now_ns, uint64_t **agents)
{
    if (agents)
        *agents = NULL;
    pd_reservations_hold hold;
    pd_reserve *table = pd_reservations_lock(set, s, 0, &hold);
    if (!table)
        return 0;
    pd_reservations_entry *e = hold.entry;
    pthread_mutex_lock(&set->lock);
    const int64_t ttl = set->ttl_ms;
    /* A ReservePath that ran since the timer looked has maintained it. */
    const int due = pd_reservations_sweep_due(e, ttl, now_ns);
    const int64_t heard_game = e->heard_game_ms;
    const uint64_t heard_ns = e->heard_ns;
    if (due)
        e->swept_ns = now_ns;
    pthread_mutex_unlock(&set->lock);
    size_t released = 0;
    if (due) {
        const int64_t idle_ms = (int64_t)((now_ns - heard_ns) / 1000000u);
        const int64_t now_game = heard_game > PD_RESERVE_MAX_TIME - idle_ms ? PD_RESERVE_MAX_TIME
                                                                           : heard_game + idle_ms;
        /* Room for every agent the table holds (a replica's, once caught
         * up, may hold more: its export is bounded the same way below). */
        pd_reserve_stats held;
        pd_reserve_get_stats(table, &held);
        uint64_t *ids = NULL;
        if (pd_reservations_shared(set)) {
            /* A replica changes its table only through the shared log:
             * the expiry is appended as an entry with the time it uses
             * (PD_OK, else tried again at the next sweep). */
            char msg[512];
            /* The scene's clock behind the last one this replica heard:
             * it was forgotten since (ReleaseAgent all, or every agent
             * gone) and another replica reserves on a new one, which this
             * estimate knows nothing of - it would expire the new agents
             * at once. That replica's own sweep times them. */
            if (pd_reservations_catch_up(set, &hold, msg, sizeof msg) == PD_OK &&
                pd_reserve_now(table) >= heard_game) {
                pd_reserve_get_stats(table, &held);
                ids = agents && held.agents ? malloc(held.agents * sizeof *ids) : NULL;
                released = pd__expire_shared(set, &hold, now_game - ttl, ids);
            }
        } else {
            ids = agents && held.agents ? malloc(held.agents * sizeof *ids) : NULL;
            /* the table's observer writes both to the reservation log */
            released = pd_reserve_expire(table, now_game - ttl, ids, ids ? held.agents : 0);
            (void)pd_reserve_collect(table, now_game - ttl);
        }
        if (agents)
            pd__keep_ids(ids, released, agents);
        else
            free(ids);
        pd_reserve_stats st;
        pd_reserve_get_stats(table, &st);
        if (st.agents == 0) {
            pthread_mutex_lock(&set->lock);
            e->swept_empty = 1;
            pthread_mutex_unlock(&set->lock);
        }
    }
    pd_reservations_unlock(set, &hold);
    return released;
}

pd_update_cut *pd_reservations_cut(pd_reservations *set, const pd_scene *s, const pd_scene_update *ops,
                                   size_t n_ops, int has_at_ms, int64_t at_ms)
{
    if (set->shared) /* the cut goes through the replicas' log */
        return pd_reservations_cut_shared(set, s, ops, n_ops, has_at_ms, at_ms);
    pd_reservations_hold hold;
    pd_reserve *table = pd_reservations_lock(set, s, 0, &hold);
    pd_update_cut *cut = table ? pd_reservations_cut_table(table, s, ops, n_ops, has_at_ms, at_ms) : NULL;
    pd_reservations_unlock(set, &hold);
    return cut;
}
