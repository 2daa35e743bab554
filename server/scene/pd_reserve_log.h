/*
 * pd_reserve_log.h - the reservation log: what makes the scenes'
 * reservation tables (pd_scene_reserve.h) survive a restart of a pathd
 * with a data_dir. docs/ARCHITECTURE.md ("Reservations in the log") says
 * why it is a log of the table's changes and what it does not cover yet.
 *
 * What is logged is each change a table made, as pd_reserve's observer
 * tells it (pd_reserve.h, pd_reserve_op): the plan a ReservePath reserved
 * (waypoints from t0, the displaced agents' too), releases, touches, the
 * expiries and collections with the game time they used, the cuts of an
 * update with the cells and time. Never the request: replay applies each
 * change by validation (pd_reserve_replace checks the plan against the
 * table again) and never plans again, so a planner's deadline, budget or
 * a changed map cannot make the replayed table differ.
 *
 * File: DATA_DIR/reservations.log, opened with the 8 bytes "pathdR1\n",
 * then records, each
 *   u32 length of payload | u32 crc32 (zlib) of the 4 length bytes + payload | payload
 *   payload: u8 kind | u8 name length | scene name | body by kind
 *     0 RESET        -   (the scene's table starts empty: a new table, a drop)
 *     1 REPLACE      u64 agent | u32 unit | i64 t0 | u32 n | n x (i32 x, i32 y,
 *                    i64 t_arrive, i64 t_leave)
 *     2 RELEASE      u64 agent
 *     3 TOUCH        u64 agent | i64 now
 *     4 COLLECT      i64 before
 *     5 EXPIRE       i64 renewed_before
 *     6 BLOCK        i32 x0, y0, x1, y1 | i64 at
 *     7 BLOCK_CELLS  i64 at | u32 n | n x (i32 x, i32 y)
 *     8 SPEED        u64 agent | f64 speed (IEEE-754 bits)
 *     9 RENEWED      u64 agent | i64 renewed
 *    10 CLOCK        i64 now | i64 maintained
 *    11 RESTORE      u64 agent | i64 renewed | f64 speed | u8 was_cut | u32 n |
 *                    n x (i64 t0, i64 t1, i32 x, i32 y, i8 dx, i8 dy, u8 unit, u8 cut)
 *    12 RELEASE_ALL  -   (every agent released, the table's clock forgotten:
 *                    ReleaseAgent with all; the scene's table stays)
 * (kinds 1..12 are pd_reserve_op_kind's; 10 and 11 only in a compacted
 * log: a table's state as pd_reserve_export gives it, after its RESET), integers little-endian, as the
 * scene journal's records (pd_journal.h). A damaged or torn tail ends the
 * file at replay: reported and truncated there.
 *
 * Threads: pd_reserve_log_write and _settle may be called from any thread
 * (one mutex; an "always" fdatasync runs outside it, in _settle, so writers
 * arriving together share it). Open (replay) and close run alone.
 */
#ifndef PD_RESERVE_LOG_H
#define PD_RESERVE_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "pd_reserve.h"

/* A record is at most this many bytes (a plan of about a million waypoints). */
#define PD_RESERVE_LOG_MAX_RECORD (24u << 20)

/* The RESET kind, beside pd_reserve_op_kind's 1..12. */
#define PD_RESERVE_LOG_RESET 0

/* Records being built (a table's changes until its request lets go). */
typedef struct pd_reserve_log_buf {
    unsigned char *p;
    size_t n, cap;
    int failed;              /* an encode ran out of memory: the changes are not all here */
} pd_reserve_log_buf;

/* Appends the record of op (kind PD_RESERVE_LOG_RESET when op is NULL) for
 * scene. 0, or -1 (out of memory, or a record past the bound) with
 * b->failed set. */
int pd_reserve_log_encode(pd_reserve_log_buf *b, const char *scene, const pd_reserve_op *op);
void pd_reserve_log_buf_free(pd_reserve_log_buf *b);
/* Appends t's state as records for scene: a RESET, then
 * pd_reserve_export's CLOCK and a RESTORE per agent (what a compacted log,
 * and a replica's table snapshot, hold). 0, or -1 with b->failed. */
int pd_reserve_log_dump(pd_reserve_log_buf *b, const char *scene, const pd_reserve *t);

/* One decoded record: scene (NUL-terminated) and op (NULL for RESET; its
 * wp and cells point into storage valid during the call). */
typedef void (*pd_reserve_log_fn)(void *user, const char *scene, const pd_reserve_op *op);

/* Calls fn for each whole, well-formed record of p[0..n); returns the bytes
 * they take. A record that does not check ends the run there. */
size_t pd_reserve_log_decode(const unsigned char *p, size_t n, pd_reserve_log_fn fn, void *user);

/* Applies op to t as the change it records, with the table's limits off
 * for it (a change made is replayed even when a reload lowered them since;
 * t's limits are as they were after). PD_OK, or the status of a replace
 * the table refused (then t is unchanged). */
pd_status pd_reserve_log_apply(pd_reserve *t, const pd_reserve_op *op);

typedef struct pd_reserve_log pd_reserve_log;

typedef struct pd_reserve_log_stats {
    uint64_t records;        /* read from the file */
    uint64_t bytes;
    uint64_t truncated_bytes;/* a damaged tail cut away */
} pd_reserve_log_stats;

/*
 * Opens DATA_DIR/reservations.log (made when missing), calls fn with each
 * record in order (the caller applies them), truncates a damaged tail and
 * leaves the file open for appends. fsync_always: every write is
 * fdatasynced before pd_reserve_log_write returns; else
 * pd_reserve_log_sync does it (the server's once-a-second tick). NULL with
 * err on failure.
 */
pd_reserve_log *pd_reserve_log_open(const char *dir, int fsync_always, pd_reserve_log_fn fn, void *user,
                                    pd_reserve_log_stats *stats, char *err, size_t errlen);

/* Appends p[0..n) (whole records); *end (may be NULL) is where they end,
 * for pd_reserve_log_settle. 0, or -1 when they could not be written: the
 * log is then failed for good (pd_reserve_log_failed) and what it was given
 * is cut back off the file. Never waits for the disk. */
int pd_reserve_log_write(pd_reserve_log *l, const unsigned char *p, size_t n, uint64_t *end);
/* With fsync_always, fdatasyncs unless another's did already cover end;
 * else nothing. 0, or -1 (the log failed). */
int pd_reserve_log_settle(pd_reserve_log *l, uint64_t end);
/* fdatasync when something was written since the last; 0 or -1. */
int pd_reserve_log_sync(pd_reserve_log *l);
int pd_reserve_log_sync_due(pd_reserve_log *l);
/* Non-zero once a write failed; why (at most len bytes) to why. */
int pd_reserve_log_failed(pd_reserve_log *l, char *why, size_t len);
uint64_t pd_reserve_log_bytes(pd_reserve_log *l);

/*
 * Compaction. The file grows with every change; what a restart needs is
 * the tables as they are. Due when the file is past `floor` bytes (the
 * config's journal_compact_bytes) and past PD_RESERVE_LOG_COMPACT_RATIO
 * times the size the last compaction left (so a log of many live
 * reservations is not rewritten over and over: each rewrite is paid for
 * by that many times its size of appends). The caller then holds every
 * table and the writers off, dumps each table (a RESET, then
 * pd_reserve_export's CLOCK and RESTOREs), and pd_reserve_log_rewrite
 * writes magic + p[0..n) to reservations.log.new, fsyncs it, renames it
 * over the log (atomic: a crash leaves the old log or the new one, both
 * the same tables) and appends to it from then on. 0, or -1 with err (the
 * old log stays, unharmed, and the next due check tries again).
 */
#define PD_RESERVE_LOG_COMPACT_RATIO 4u
int pd_reserve_log_compaction_due(pd_reserve_log *l, uint64_t floor);
int pd_reserve_log_rewrite(pd_reserve_log *l, const unsigned char *p, size_t n, char *err, size_t errlen);
void pd_reserve_log_close(pd_reserve_log *l);

#endif
