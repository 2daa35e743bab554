/*
 * pd_replica.h - the replica's tail of the shared change log (issue 32,
 * config "log": {"redis"}; pd_replica.c): every replica reads every
 * scene's Redis Stream on its own connection (hiredis's libuv adapter, on
 * the server's loop) and applies the records it did not make itself, in
 * version order, on libuv's threadpool (pd_store_apply_logged_entry),
 * telling this pathd's watchers of them; a scene whose log went back is
 * refused and rebuilt from the log (pd_redis_snap_rebuild). It also
 * holds what the request path asks of a replica: whether it serves yet
 * (Ping's NOT_SERVING until it caught up with the log at start), which
 * scenes it refuses (a log that went back), and the queries parked until
 * the tail reaches their min_version (limits.max_behind_wait_ms).
 *
 * Loop thread only, but for the apply work it hands to the threadpool.
 */
#ifndef PD_REPLICA_H
#define PD_REPLICA_H

#include <stddef.h>
#include <stdint.h>

#include "pd_redis_log.h"
#include "pd_connmap.h"
#include "pd_server.h"

/* Entries one XREAD asks for per stream once the replica caught up, and
 * how long it blocks then (new scenes are found between two reads: at
 * most this late). The watchdog allows the block plus log.timeout_ms.
 * Behind (starting, or the last read was full) an XREAD asks for
 * PD_REPLICA_READ_COUNT_BEHIND without blocking, and the next one goes
 * while its entries are applied. */
#define PD_REPLICA_READ_COUNT 1000u
#define PD_REPLICA_READ_COUNT_BEHIND 4000u
#define PD_REPLICA_BLOCK_MS 100u
/* The longest the tail goes without SMEMBERS PREFIX:scenes while entries
 * keep coming (pd_replica.c: it looks at once when the global sequence
 * shows a hole, after an empty read, or with a query parked). */
#define PD_REPLICA_LIST_MS 25u
/* Queries parked for the tail at once; past it a behind query is answered
 * STALE_VERSION at once. */
#define PD_REPLICA_MAX_PARKED 4096u
/* How often parked queries past their wait are answered. */
#define PD_REPLICA_PARK_TICK_MS 10u

typedef struct pd_replica pd_replica;

/* How a parked frame is dispatched again (pd__dispatch_parked): a hook, so
 * the replica calls nothing up in the net layer. */
typedef void (*pd__replica_redispatch_fn)(pd__conn *c, const uint8_t *frame, size_t len, uint64_t arrival_ns,
                                          uint64_t deadline_ns);

/* Starts the tail over rl (the store's log, replayed; its positions are
 * where the tail starts) on the server's loop. NULL with err when memory
 * ran out. Marks rl tailed (pd_redis_log_set_tailed). */
pd_replica *pd__replica_start(pd_server *s, pd_redis_log *rl, pd__replica_redispatch_fn redispatch, char *err,
                              size_t errlen);
/* The config's scenes a RESET the tail applies goes back to: at start,
 * the scenes as loaded before the replay (the replica takes the list:
 * pd_journal_replayer_set_config). */
void pd__replica_set_config(pd_replica *r, pd_scene **scenes, size_t n);
/* A reload: before its publish (which takes the set), the config it
 * publishes - the set's scenes built anew as built, those it keeps as the
 * tail had them -; after it, that config is the tail's when published
 * (under the change lock, which the tail's apply takes: no RESET applies
 * between the publish and it), else dropped. NULL: out of memory (said;
 * the tail keeps the config it had). */
void *pd__replica_reload_begin(pd_replica *r, const pd_scene_set *set);
void pd__replica_reload_end(pd_replica *r, void *state, int published);
/* Stops reading and closes the replica's handles (counted in the server's
 * open_handles until their close callbacks ran); the replica is freed
 * then. Parked queries are dropped (their connections are closing). */
void pd__replica_close(pd_replica *r);

/* 1 once every scene caught up with the log as it was at start. */
int pd__replica_serving(const pd_replica *r);
/* 1 when the replica does not serve scene `name` (its log went back), with
 * why in msg. */
int pd__replica_refuses(pd_replica *r, const char *name, char *msg, size_t len);
/* Parks the frame of a request answered STALE_VERSION now (copied) until
 * the tail applied more or deadline_ns passed; then it is dispatched again.
 * 0, or -1 when it cannot wait (too many parked, memory). */
int pd__replica_park(pd_replica *r, uint64_t conn_id, const uint8_t *frame, size_t len, uint64_t arrival_ns,
                     uint64_t deadline_ns);
/* A query answered STALE_VERSION after its wait (the BEHIND). */
void pd__replica_count_behind(pd_replica *r);
/* The replica's /metrics families (malloc'd text), or NULL. */
char *pd__replica_metrics(pd_replica *r);

#endif
