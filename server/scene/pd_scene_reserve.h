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

typedef struct pd_reservations pd_reservations;

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

/* A table locked for one request. */
typedef struct pd_reservations_hold {
    struct pd_reservations_entry *entry;
    uint64_t heard_ns;        /* pd_reservations_heard: when, else 0 */
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
 * (pd_reserve_expire; their ids to out[0..cap)) and collects the entries
 * that ended before then. Returns how many agents were released. */
size_t pd_reservations_sweep(pd_reservations *set, const pd_scene *s, uint64_t now_ns, uint64_t *out, size_t cap);

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

/* Made and destroyed by the registry. */
pd_reservations *pd_reservations_create(void);
void pd_reservations_destroy(pd_reservations *set);

#endif
