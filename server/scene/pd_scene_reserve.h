/*
 * pd_scene_reserve.h - where each scene's space-time reservation table
 * (pd_reserve.h, issue 34) lives: beside the registry, one table per
 * served scene name, that outlives the scene's snapshots. A cell update
 * makes a new snapshot but the reservations persist; a scene dropped and
 * made again under its name (a new incarnation) starts with an empty
 * table; DropScene drops the table with the scene.
 *
 * Threads: the set itself is guarded by its own mutex (held only to find,
 * make or forget an entry); each table by its own, held while a request
 * reads or changes it. ReservePath, ReleaseAgent, GetReservations and the
 * cuts of UpdateCells run in the scene's ordered lane as well, so that one
 * scene's reservations change in the order the requests arrived; the
 * table's lock keeps anything else that reads it safe. Different scenes'
 * tables are used in parallel.
 */
#ifndef PD_SCENE_RESERVE_H
#define PD_SCENE_RESERVE_H

#include <stddef.h>
#include <stdint.h>

#include "pd_reserve.h"
#include "pd_scene.h"
#include "pd_sipp.h"
#include "pd_yield.h"

typedef struct pd_reservations pd_reservations;
struct pd_redis_log;

/* The registry's set of tables (made with the registry). */
pd_reservations *pd_registry_reservations(pd_registry *r);

/* The config's limits on every scene's table (limits.max_agents_per_scene,
 * max_reservation_entries, max_reservation_window_ms, max_agent_bytes),
 * limits.reservation_ttl_ms and limits.reservation_clear_holds. A table
 * takes the limits in force each time it is locked, so a reload's new
 * limits apply to the next request. */
void pd_reservations_set_limits(pd_reservations *set, const pd_reserve_limits *limits, int64_t ttl_ms,
                                int clear_holds);
int64_t pd_reservations_ttl_ms(pd_reservations *set);
int pd_reservations_clear_holds(pd_reservations *set);

/*
 * Whether agent's request at game time t0_ms fits the clock of scene's table
 * (pd_reserve_clock_fits with limits.max_clock_step_ms and
 * reservation_ttl_ms), checked before the request changes anything: PD_OK,
 * else PD_INVALID_ARGUMENT with a message naming the scene, its clock, the
 * t0, the limit and the remedy. INVALID_ARGUMENT: t0_ms is outside the
 * range the scene takes now, and sending it again never helps (not a
 * retryable status); nor is it a capacity (LIMIT_EXCEEDED): the game's
 * clock is what is wrong. A table holding no agent but agent takes any t0.
 */
pd_status pd_reservations_clock_refusal(pd_reservations *set, const pd_reserve *table, const char *scene,
                                        uint64_t agent, int64_t t0_ms, char *msg, size_t len);

/* A table locked for one request. */
typedef struct pd_reservations_hold {
    struct pd_reservations_entry *entry;
    uint64_t heard_ns;        /* pd_reservations_heard: when, else 0 */
    /* Set by pd_reservations_unlock: what the request changed is not in
     * the reservation log as its fsync policy asks (the change is made in
     * memory; answer it INTERNAL: it would not survive a restart). */
    int unlogged;
} pd_reservations_hold;

/* The table of scene s (its name and incarnation), locked: made empty when
 * the scene has none yet and `create` is set (else NULL: nothing is
 * reserved there), or when the table is of an earlier incarnation of the
 * name. NULL also when memory ran out (create set). Unlock with
 * pd_reservations_unlock. */
pd_reserve *pd_reservations_lock(pd_reservations *set, const pd_scene *s, int create, pd_reservations_hold *hold);
void pd_reservations_unlock(pd_reservations *set, pd_reservations_hold *hold);

/*
 * Expiry of idle scenes. pd_reserve_maintain runs on each ReservePath, on
 * the game time the requests bring (pd_reserve_now); a scene nobody
 * reserves in hears no time, so its stale agents would stay for good. The
 * server's timer therefore asks which tables have been idle - no
 * ReservePath for at least reservation_ttl_ms / 16 of real time - and runs
 * pd_reservations_sweep on each in its scene's lane. Game time is taken to
 * run on at least as fast as real time while a scene is idle: the sweep's
 * "now" is the last game time heard plus the real time since.
 */

/* A ReservePath locked the table (hold) at now_ns (pd_clock_ns): the game
 * time it brought counts as heard then. Recorded at the unlock. */
void pd_reservations_heard(pd_reservations_hold *hold, uint64_t now_ns);

/* The names of the tables due for an idle sweep at now_ns (at most cap, to
 * names[]); returns how many. Reads only what the unlocks recorded: it
 * never waits for a table in use. */
size_t pd_reservations_idle(pd_reservations *set, uint64_t now_ns, char (*names)[PD_CONF_MAX_NAME], size_t cap);

/* In scene s's lane: when its table is still idle at now_ns, releases the
 * agents not renewed since the estimated now - reservation_ttl_ms
 * (pd_reserve_expire) and collects the entries that ended before then.
 * Returns how many agents were released; their ids, ascending, to
 * *agents (malloc'd, free() them; NULL when none, or out of memory), for
 * the AGENTS_EXPIRED watch event. agents may be NULL. */
size_t pd_reservations_sweep(pd_reservations *set, const pd_scene *s, uint64_t now_ns, uint64_t **agents);

/* pd_reserve_maintain(table, ttl_ms) after a ReservePath in file mode, the
 * agents it released to *agents as pd_reservations_sweep gives them.
 * Returns how many. */
size_t pd_reservations_maintain(pd_reserve *table, int64_t ttl_ms, uint64_t **agents);

/* The scene `name` is no longer served: its table goes (once no request
 * holds it). */
void pd_reservations_forget(pd_reservations *set, const char *name);

/* What an UpdateCells that blocked cells cut (its job->ext): the agents,
 * ascending and distinct, and from when (UpdateResult.agents_cut, the
 * AGENTS_CUT watch event). */
typedef struct pd_update_cut {
    uint64_t *agents;                 /* malloc'd */
    size_t n_agents;
    int64_t at_ms;
} pd_update_cut;

/* After an UpdateCells applied ops[0..n_ops) (in the scene's lane): cuts
 * the reservations of scene s (the version the update made) holding the cells the update
 * blocked (a RESTORE's cells that are walls again too), from at_ms on
 * (has_at_ms 0: the latest time the table heard of). NULL when none was
 * cut (or the scene has no table); else the cut, to free with
 * pd_update_cut_free. */
pd_update_cut *pd_reservations_cut(pd_reservations *set, const pd_scene *s, const pd_scene_update *ops,
                                   size_t n_ops, int has_at_ms, int64_t at_ms);
void pd_update_cut_free(pd_update_cut *cut);

/*
 * The reservation log (pd_reserve_log.h; docs/ARCHITECTURE.md,
 * "Reservations in the log"): opens DATA_DIR/reservations.log, applies
 * what it holds to the tables of the scenes the registry serves (by
 * validation, never planned again; call after the scene journal's replay,
 * before requests are served), and from then on every table change is
 * written to it when its request lets go of the table
 * (pd_reservations_unlock), fdatasynced before that returns when
 * fsync_always. 0, or -1 with err.
 */
typedef struct pd_reservations_log_stats {
    uint64_t records;          /* read */
    uint64_t unserved;         /* of scenes not served now: skipped */
    uint64_t refused;          /* changes the table refused: skipped (said) */
    uint64_t bytes;
    uint64_t truncated_bytes;  /* a damaged tail cut away */
} pd_reservations_log_stats;
/* The scene served under name, acquired (pd_registry_acquire; released
 * with pd_scene_release), or NULL: a callback, so that this file does not
 * call the registry, which calls it. */
typedef pd_scene *(*pd_reservations_scene_fn)(void *user, const char *name);
int pd_reservations_open_log(pd_reservations *set, pd_reservations_scene_fn acquire, void *user, const char *dir,
                             int fsync_always, uint64_t compact_bytes, pd_reservations_log_stats *stats, char *err,
                             size_t errlen);
/* The server's 1 s tick (a background thread): due when something was
 * written since the last fdatasync ("everysec"), or the log is due for
 * compaction (past compact_bytes and pd_reserve_log.h's ratio). sync
 * fdatasyncs, then compacts when due (pd_reservations_compact); 0, or -1
 * when the fdatasync failed (a failed compaction leaves the old log as it
 * was and is tried again at the next tick). */
int pd_reservations_sync_due(pd_reservations *set);
int pd_reservations_sync(pd_reservations *set);
/* Rewrites the log as the tables are now (pd_reserve_log_rewrite): holds
 * every table meanwhile, so reservation requests wait for it (about the
 * time to write and fsync the live tables' dump). 0 (also without a log),
 * or -1 with err. */
int pd_reservations_compact(pd_reservations *set, char *err, size_t errlen);
/* Compactions done so far; why the last one failed to why ("" if not). */
uint64_t pd_reservations_compactions(pd_reservations *set, char *why, size_t len);
uint64_t pd_reservations_log_bytes(pd_reservations *set);

/* PD_OK when a reservation may change; else the status to answer
 * (PD_INTERNAL: the reservation log failed) and its message in msg. */
pd_status pd_reservations_refusal(pd_reservations *set, char *msg, size_t len);

/*
 * Reservations on the replicas' shared log (pd_scene_reserve_shared.c,
 * pd_reserve_shared.h): with pd_reservations_share, every table follows
 * its scene's reservation stream in Redis, and changes go through it.
 * Callers hold the table (pd_reservations_lock with create set, in the
 * scene's lane) and call, instead of changing it themselves:
 *  - pd_reservations_catch_up before reading it (GetReservations, a
 *    FindPath that avoids reservations): PD_OK, or PD_UNAVAILABLE with msg;
 *  - pd_reservations_reserve_shared for ReservePath (pd_sipp_reserve's
 *    contract with y's clear holds rule, pd_yield_plan; y->after_ms is
 *    not served, no holder is moved: the caller refuses it): r's plan,
 *    PD_OK / PD_PARTIAL reserved, else nothing;
 *    *was_cut as pd_reserve_was_cut on the table caught up; plus
 *    PD_UNAVAILABLE with msg when the log was not reached, or other
 *    replicas kept reserving first);
 *  - pd_reservations_release_shared for ReleaseAgent.
 * Nothing else may change a shared table (pd_reserve_maintain neither:
 * the expiry travels in ReservePath's entries). UpdateCells' cut
 * (pd_reservations_cut) goes through the log by itself.
 */
void pd_reservations_share(pd_reservations *set, struct pd_redis_log *rl);
int pd_reservations_shared(pd_reservations *set);
pd_status pd_reservations_catch_up(pd_reservations *set, pd_reservations_hold *hold, char *msg, size_t len);
/* *expired (malloc'd, ascending; NULL: none): the agents the entry's
 * expiry released, for the AGENTS_EXPIRED watch event; *n_expired their
 * count. */
pd_status pd_reservations_reserve_shared(pd_reservations *set, pd_reservations_hold *hold, pd_sipp_ctx *ctx,
                                         pd_yield_ctx *yc, const pd_yield_params *y, const pd_grid *grid,
                                         const pd_sipp_params *p, pd_sipp_result *r, int *was_cut,
                                         uint64_t **expired, size_t *n_expired, char *msg, size_t len);
pd_status pd_reservations_release_shared(pd_reservations *set, pd_reservations_hold *hold, uint64_t agent,
                                         int *released, char *msg, size_t len);

/*
 * ReleaseAgent with all, on the table held (file mode, or a replica's
 * through the shared log: the table caught up, RELEASE_ALL appended, then
 * applied): every agent goes and the scene's clock is forgotten. *n: how
 * many were released; *ids (malloc'd, ascending; NULL when none, or out of
 * memory for the list) for the AGENTS_RELEASED watch event. PD_OK, or
 * PD_UNAVAILABLE / PD_INTERNAL with msg (nothing released).
 */
pd_status pd_reservations_release_all(pd_reservations *set, pd_reservations_hold *hold, uint64_t **ids, size_t *n,
                                      char *msg, size_t len);

/* DropScene made here dropped scene `name`: on a shared log, a RESET entry
 * ends its reservations for every replica (nothing without one). */
void pd_reservations_dropped(pd_reservations *set, const char *name);

/* Made and destroyed by the registry. */
pd_reservations *pd_reservations_create(void);
void pd_reservations_destroy(pd_reservations *set);

#endif
