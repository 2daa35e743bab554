/*
 * pd_redis_snapshot.h - scene snapshots kept in Redis beside the change
 * log's streams (pd_redis_log.h), so a replica that has nothing of its
 * own (a new one, a fresh data_dir) or whose position the stream no
 * longer holds starts from a snapshot and reads only the stream after it,
 * and so the streams can be trimmed (issue 32: "Snapshots are written to
 * Redis every N versions ... Trim below the oldest snapshot").
 *
 * What is kept, per scene (PREFIX and {NAME} as in pd_redis_log.h):
 *   PREFIX:{NAME}:snaps   hash: field INC-V (the stream entry id of the
 *                         version the snapshot holds) -> the scene's SCENE
 *                         record as the journal encodes it
 *                         (pd_journal_scene_record + pd_journal_encode's
 *                         payload: the same encoding the file journal's
 *                         snapshot uses; cells and authored cells zlib)
 *   PREFIX:{NAME}:meta    fields "snap" (the newest id) and "snaps" (the
 *                         ids kept, oldest first, space-separated) beside
 *                         the append FUNCTION's v, inc and live
 *
 * Writing is one FCALL of "pathd_snapshot" (the Lua library "pathd_snap",
 * loaded on first use with FUNCTION LOAD REPLACE, separate from the
 * append library "pathd" so neither's text depends on the other): it
 * checks the scene is live and its stream holds the entry INC-V (so the
 * snapshot is of a version the log made, in the current incarnation),
 * stores the record, publishes it as the newest, forgets the oldest beyond
 * `keep`, and trims the stream with XTRIM MINID at the oldest kept id -
 * all atomically, so a reader sees either the old or the new list, and
 * never a stream trimmed past every snapshot it could load. A replica at
 * any version older than the oldest kept snapshot loads the newest.
 *
 * Who writes: the replica that appended the version (pd_redis_snap_note,
 * called after each append): every `every` versions of a scene, and an
 * instance at its creation (its INSTANCE record names its template's
 * version, which the template's trim may remove; its own snapshot makes
 * it independent of the template's history). The writing itself runs
 * off the change path, in the store's compaction (pd_store_compact on
 * libuv's threadpool; pd_changelog_ops.snapshot), with the scene as the
 * registry serves it then (a version the log made: nothing is served
 * before the log has it).
 *
 * The local cache (opts.cache_dir: data_dir, with "log" set): each
 * snapshot this replica writes (or finds written) is also kept in
 * DATA_DIR/redis-cache/HEX(NAME) with its entry id and global sequence,
 * so a restart applies it and reads only the stream after it. It is a
 * cache of what the log holds: used only when the log still holds that
 * entry with the same global sequence; a cache newer than the log (the
 * log went back) is said and the scene rebuilt from the log. One pathd
 * per directory (DATA_DIR/redis-cache/lock, flock).
 *
 * Bounds: a record larger than `max_bytes` is not written (logged once per
 * scene); the scene's stream is then not trimmed by it.
 *
 * Threads: note and due on any thread (a mutex of their own); write_due
 * and fetch off the loop (they run commands on the log's connection).
 */
#ifndef PD_REDIS_SNAPSHOT_H
#define PD_REDIS_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "pd_journal.h"
#include "pd_redis_log.h"

/* The options are config "log.snapshot_every", "snapshot_keep" and
 * "snapshot_max_bytes" (pd_conf.h; their defaults are pd_conf_defaults'). */
typedef struct pd_redis_snap_opts {
    uint64_t every;               /* a snapshot of a scene every this many versions */
    uint32_t keep;                /* snapshots kept per scene (the stream is trimmed
                                     below the oldest of them) */
    uint64_t max_bytes;           /* a larger record is not written */
    const char *cache_dir;        /* data_dir: the local cache, or NULL / "" for none */
    void (*warn)(void *user, const char *msg);   /* may be NULL */
    void (*info)(void *user, const char *msg);   /* where replay started a scene; may be NULL */
    void *warn_user;                             /* both callbacks' */
} pd_redis_snap_opts;

typedef struct pd_redis_snap pd_redis_snap;

/* Snapshots over rl's connection and keys (rl stays the caller's; attach
 * with pd_redis_snap_attach, after which the log destroys them). NULL
 * with err when the options cannot be used or memory ran out. */
pd_redis_snap *pd_redis_snap_create(pd_redis_log *rl, const pd_redis_snap_opts *o, char *err, size_t errlen);
void pd_redis_snap_destroy(pd_redis_snap *sn);
/* Attaches sn to its log (pd_redis_log_set_snapshots with this file's
 * hooks): the log's replay, appends, compaction and reloads use it. */
void pd_redis_snap_attach(pd_redis_snap *sn);

/* pd_redis_log_open with snapshots attached (ops NULL with err). */
pd_changelog pd_redis_log_open_with_snapshots(const pd_redis_log_opts *lo, const pd_redis_snap_opts *so, char *err,
                                              size_t errlen);

/* After rec was appended by this replica: remembers its scene when a
 * snapshot is due (its version a multiple of `every`, or an instance just
 * made). Never blocks on Redis. */
void pd_redis_snap_note(pd_redis_snap *sn, const pd_journal_record *rec);
/* 1 when a noted scene waits for its snapshot. */
int pd_redis_snap_due(pd_redis_snap *sn);

/* What one write did. */
typedef enum pd_redis_snap_outcome {
    PD_REDIS_SNAP_WRITTEN = 0,    /* stored and published; the stream trimmed */
    PD_REDIS_SNAP_HELD = 1,       /* the log holds that one or a newer one already */
    PD_REDIS_SNAP_TOO_BIG = 2,    /* larger than max_bytes: not written */
    PD_REDIS_SNAP_NOT_IN_LOG = 3, /* the log has no entry of that version in the scene's
                                     live incarnation (dropped, another writer's) */
} pd_redis_snap_outcome;

/* Writes s's snapshot now (s as served), inc the incarnation (INC) of the
 * log's entries its state came from (0: not known, versions alone; see
 * pd_redis_log_served_scene): the log refuses it (NOT_IN_LOG) when another
 * incarnation is live. 0 with *out, or -1 with err (Redis unreachable,
 * memory). */
int pd_redis_snap_write(pd_redis_snap *sn, const pd_scene *s, uint64_t inc, pd_redis_snap_outcome *out, char *err,
                        size_t errlen);
/* Writes the snapshots of the noted scenes as r serves them (a scene no
 * longer served is forgotten). 0, or -1 with err (the scenes not written
 * stay noted for the next call). */
int pd_redis_snap_write_due(pd_redis_snap *sn, pd_registry *r, char *err, size_t errlen);

/* The newest snapshot of `scene`: 0 with rec (free with
 * pd_journal_record_free) and its stream entry id in id ("INC-V"), 1 when
 * there is none, -1 with err. */
int pd_redis_snap_fetch(pd_redis_snap *sn, const char *scene, pd_journal_record *rec, char *id, size_t idlen,
                        char *err, size_t errlen);

/* A reload through the log (pd_redis_log's reload_begin/_end, the log's
 * lock held from begin to end): begin before the publish (NULL: out of
 * memory), end after it appends a RESET for each config scene the publish
 * built anew and a DROP for each scene no longer served, and notes them,
 * and the instances of the config scenes it replaced, for a snapshot (or,
 * dropped, a trim) at the next compaction, which the server asks for at
 * once. Every record carries a key of its own. One Redis does not answer
 * (down, or silent past the timeout) is held, with every later one (one
 * timeout at most on the loop), and sent again with its key until Redis
 * answers (pd_redis_snap_retry_held: at every change of any scene, and the
 * compaction's tick). A RESET refused because another replica's RESET
 * of the same definition (its hash in the entry) took the version - the
 * same config reloaded on both at once - is served as that entry; any
 * other record the log refuses fails the log (pd_redis_log_fail): the
 * reload is served already. Every replica must load the same config:
 * RESET means "the config's definition". */
typedef struct pd_redis_snap_reload pd_redis_snap_reload;
/* A definition's hash in hex, with its NUL. */
#define PD_REDIS_SNAP_DEF_HEX 17
/* The hash of the definition a reload built s from - what a replay of its
 * RESET serves: its grid, cells (costs included), placement, unit sizes
 * and search - in hex, into out (PD_REDIS_SNAP_DEF_HEX): a reload's RESET
 * carries it (entry field d). Two replicas that loaded the same config
 * give the same; a RESET whose entry names another was made from another
 * config (an entry of an older pathd names none). */
void pd_redis_snap_definition_hash(const pd_scene *s, char *out);
void *pd_redis_snap_reload_begin(pd_redis_snap *sn, pd_registry *r, const pd_scene_set *set);
void pd_redis_snap_reload_end(pd_redis_snap *sn, pd_registry *r, void *state);
/* Sends the held reload records again, oldest first, until one is not
 * answered (the log's change lock held). 1 when one of `scene` (NULL:
 * any) is still held, with why: a change of the scene would be appended
 * before the reload's record of it, so it is refused (UNAVAILABLE); else
 * 0 (the log may have failed: a refused record). */
int pd_redis_snap_retry_held(pd_redis_snap *sn, const char *scene, char *why, size_t whylen);

/* Where replay starts `scene` (pd_redis_log's replay, and a replica whose
 * position was trimmed): the local cache when there is one and the log
 * still holds its entry with the same history; else the newest snapshot
 * in Redis; else nothing (from untouched: the stream's start). The record
 * is applied with rp and from set to "(ID", the stream's point after it.
 * A cache newer than the log, or of another history (the log went back),
 * is said and not used. Then the local journal (pd_redis_journal.h): its
 * records that continue the start's version, when the log holds the last
 * of them with the same g, are applied and from moves after it; else it
 * is said and discarded. 0, or -1 with err. */
int pd_redis_snap_start(pd_redis_snap *sn, pd_journal_replayer *rp, const char *scene, char *from, size_t fromlen,
                        char *err, size_t errlen);
/* After replay: a cached scene the log has no record of at all (the log
 * went back past its creation, or was emptied) is said and its cache
 * removed; it was never served, as replay starts only the log's scenes.
 * 0, or -1 with err. */
int pd_redis_snap_check_cache(pd_redis_snap *sn, char *err, size_t errlen);
/* How many scenes replay started from the local cache, and from Redis. */
void pd_redis_snap_starts(pd_redis_snap *sn, uint64_t *from_cache, uint64_t *from_redis);

/* Scene `name` made again as the log holds it now, in place of what r
 * serves (a replica whose log went back, or missed a record: pd_replica.c
 * has stopped serving it and applies nothing of it meanwhile): the newest
 * snapshot in Redis and the stream after it; without a snapshot, the
 * whole stream, on the config's definition of a config scene (its
 * authored cells, version 1). A run-time scene the log has no record of
 * is dropped. Applied with rp (pd_registry_put: the version served may go
 * down). last_id gets the stream's last entry before anything was read
 * ("0-0": none), where the tail reads on. 0 with *version (0: dropped),
 * or -1 with err (the scene is then as far as it got: still not to be
 * served). Off the loop (commands on the log's connection). */
int pd_redis_snap_rebuild(pd_redis_snap *sn, pd_journal_replayer *rp, pd_registry *r, const char *name,
                          char *last_id, size_t idlen, uint64_t *version, char *err, size_t errlen);

/* Tests: fn(user) runs in pd_redis_snap_rebuild after its reads of the
 * stream's end and the snapshot, before it puts anything (NULL: none). */
void pd_redis_snap_set_rebuild_pause(pd_redis_snap *sn, void (*fn)(void *user), void *user);

/* Bytes of the snapshots this replica wrote or loaded (for /metrics). */
uint64_t pd_redis_snap_bytes(pd_redis_snap *sn);

#endif
