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

/* Applies to t the entries of scene's stream after *rv, advancing *rv.
 * 0; -1 with err when Redis cannot be reached or answers what is not an
 * entry rv+1 (a gap: the stream went back or was trimmed), t then at the
 * last entry applied. *refused counts the changes a table refused. */
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

#endif
