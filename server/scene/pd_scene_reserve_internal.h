/*
 * pd_scene_reserve_internal.h - the reservation set's records, shared by
 * pd_scene_reserve.c (the set, its file log hooks) and
 * pd_scene_reserve_shared.c (the replicas' shared log). Not for other files.
 */
#ifndef PD_SCENE_RESERVE_INTERNAL_H
#define PD_SCENE_RESERVE_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "pd_redis_log.h"
#include "pd_reserve_log.h"
#include "pd_scene_reserve.h"

/* Buckets of the name hash: a chain per bucket. Scenes number in the
 * thousands at most (limits.max_scenes); a fixed table keeps this small. */
#define PD__RESV_BUCKETS 1024u

typedef struct pd_reservations_entry {
    struct pd_reservations_entry *next;
    char name[PD_CONF_MAX_NAME];
    uint64_t incarnation;
    pd_reserve *table;
    pthread_mutex_t lock;      /* held while a request uses the table */
    unsigned refs;             /* guarded by the set's lock: the set's own, plus holders */
    int forgotten;             /* out of the chain; freed at the last release */
    /* reservation log hook: the table's changes not yet in the log (under
     * `lock`), written when the request lets go (pd_reserve_log.h) */
    struct pd_reservations *set;
    pd_reserve_log_buf pend;
    int capture;               /* pend takes the changes without a file log
                                  (a shared log's cut, pd_scene_reserve_shared.c) */
    /* shared log hook (pd_scene_reserve_shared.c): the entry of the
     * scene's stream the table is at, and the game time of its last
     * expiry there */
    uint64_t rv;
    int64_t maintained_ms;
    int has_maintained;
    /* Idle expiry (pd_reservations_idle), guarded by the set's lock and
     * written at the unlocks: the last game time a ReservePath brought,
     * when (pd_clock_ns; 0: none yet), when last swept, and whether a
     * sweep left it empty (nothing more to expire until a ReservePath). */
    int64_t heard_game_ms;
    uint64_t heard_ns;
    uint64_t swept_ns;
    int swept_empty;
} pd_reservations_entry;

struct pd_reservations {
    pthread_mutex_t lock;
    pd_reserve_limits limits;
    int64_t ttl_ms;
    int clear_holds;
    pd_reservations_entry *buckets[PD__RESV_BUCKETS];
    /* reservation log hook (pd_reservations_open_log): NULL without one.
     * log_lock orders a drop's RESET against the writes of its table. */
    pd_reserve_log *log;
    pthread_mutex_t log_lock;
    uint64_t compact_bytes;    /* the log's compaction floor (journal_compact_bytes) */
    uint64_t compactions;      /* done, and why the last one failed ("" when it did not) */
    char compact_why[320];
    /* shared log hook (pd_reservations_share): the replicas' log, or NULL */
    pd_redis_log *shared;
};

/* The table's observer (pd_scene_reserve.c): its changes into pend. */
void pd_reservations_observe(void *user, const pd_reserve_op *op);

/* UpdateCells' cut of one table (locked; pd_scene_reserve.c), which
 * pd_reservations_cut (pd_scene_reserve_shared.c) runs directly or through
 * the replicas' shared log. */
pd_update_cut *pd_reservations_cut_table(pd_reserve *table, const pd_scene *s, const pd_scene_update *ops,
                                         size_t n_ops, int has_at_ms, int64_t at_ms);

/* Whether e is due for an idle sweep at now_ns (pd_scene_reserve.c); the
 * set's lock is held. */
int pd_reservations_sweep_due(const pd_reservations_entry *e, int64_t ttl_ms, uint64_t now_ns);

#endif
