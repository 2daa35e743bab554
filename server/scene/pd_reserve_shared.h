/*
 * pd_reserve_shared.h - reservations through the replicas' shared log
 * (issue 32 x issue 34; docs/ARCHITECTURE.md, "Reservations in the log"):
 * one Redis Stream per scene, PREFIX:{NAME}:resv, whose entries are a
 * table's changes (pd_reserve_log.h's records, several per entry) under
 * the dense reservation version rv: entry id 0-rv, field "d". A RESET
 * record (a drop's) empties the table.
 *
 * A replica keeps each table at some rv. Before it reads or changes one,
 * it catches up (the entries after rv, applied by validation); a change
 * is appended as the entry rv+1 - an XADD with that explicit id, which
 * Redis refuses when another replica took rv+1 first (the compare-and-set)
 * - and applied only after. Every replica applies the same entries in the
 * same order, so their tables are the same.
 *
 * The stream is trimmed (issue 34's loose end on replicas: it grew with
 * every ReservePath). Every PD_RESERVE_SHARED_SNAPSHOT_EVERY entries the
 * replica that appended the entry writes the table as it is then (the
 * compacted file log's form: RESET, CLOCK, a RESTORE per agent) to the
 * hash PREFIX:{NAME}:resvsnap (fields rv, d) and trims the stream below
 * that entry (XTRIM MINID 0-rv: entry rv stays, so the stream is never
 * left empty, which a replica behind rv would read as caught up), in one
 * script: a reader never finds the stream trimmed past a snapshot it
 * could load. What a replica needs to
 * make a table is then the snapshot and the entries after it: a new table
 * (rv 0: a new replica, a restart, a scene made again) starts from the
 * snapshot; one whose rv the trim passed (the stream's first entry after
 * rv is not rv+1) is made again from the newest snapshot in place. So the
 * stream holds at most about 2 x PD_RESERVE_SHARED_SNAPSHOT_EVERY entries
 * (one interval, and a second when a snapshot write failed), and Redis
 * one snapshot per scene.
 *
 * Blocking hiredis on the log's connection (pd_redis_log_command), on the
 * worker running the scene's lane, as the log's appends are.
 */
#ifndef PD_RESERVE_SHARED_H
#define PD_RESERVE_SHARED_H

#include <stddef.h>
#include <stdint.h>

#include "pd_redis_log.h"
#include "pd_reserve.h"

/* Entries read per XRANGE while catching up. */
#define PD_RESERVE_SHARED_BATCH 1000
/* A table snapshot (and the stream's trim) every this many entries: the
 * named bound of a reservation stream (docs/OPERATIONS.md). */
#define PD_RESERVE_SHARED_SNAPSHOT_EVERY 4096u
/* Snapshots one catch-up loads at most (each newer one trimmed while the
 * last was read) before it answers an error. */
#define PD_RESERVE_SHARED_SNAPSHOT_TRIES 3

/* Applies to t the entries of scene's stream after *rv, advancing *rv:
 * with *rv 0 (t as made: nothing applied yet) from the scene's snapshot
 * first, when there is one; with a stream trimmed past *rv, from the
 * newest snapshot (t emptied first). 0; -1 with err when Redis cannot be
 * reached or answers what is not an entry rv+1 that no snapshot covers (a
 * gap: the stream went back), t then at the last entry applied. *refused
 * counts the changes a table refused. */
int pd_reserve_shared_catch_up(pd_redis_log *rl, const char *scene, pd_reserve *t, uint64_t *rv,
                               uint64_t *refused, char *err, size_t errlen);

/* Appends p[0..n) (whole records) as entry rv + 1. 0 appended; 1 another
 * replica took rv + 1 first (catch up and decide again); -1 with err (not
 * reached: retryable, or an error reply). */
int pd_reserve_shared_append(pd_redis_log *rl, const char *scene, uint64_t rv, const unsigned char *p, size_t n,
                             char *err, size_t errlen);

/* Appends p[0..n) as the next entry whatever the table's rv (XADD with the
 * id 0-*: Redis numbers it), for a change decided without the table (a
 * drop's RESET). 0 or -1 with err. */
int pd_reserve_shared_append_next(pd_redis_log *rl, const char *scene, const unsigned char *p, size_t n, char *err,
                                  size_t errlen);

/* Appends a RESET (the scene's table empties on every replica) as the
 * next entry: a drop's, a reload's that stopped serving the scene. 0 or
 * -1 with err. */
int pd_reserve_shared_reset(pd_redis_log *rl, const char *scene, char *err, size_t errlen);

/* Writes t, caught up to and including entry rv, as the scene's snapshot
 * and trims the stream below it. 0 written; 1 the snapshot held is rv or
 * newer already; -1 with err (not reached, or the stream has no entry rv:
 * nothing written, nothing trimmed). */
int pd_reserve_shared_snapshot(pd_redis_log *rl, const char *scene, const pd_reserve *t, uint64_t rv, char *err,
                               size_t errlen);

#endif
