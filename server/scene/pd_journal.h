/*
 * pd_journal.h - the durable log of run-time changes (config "data_dir").
 *
 * Every change a client is told succeeded (CreateScene, CreateInstance,
 * DropScene, an UpdateCells that made a version) is appended here before
 * its answer leaves, and a reload that replaced or removed config scenes
 * appends what it did. On start the log is replayed over the scenes the
 * config loaded, so the same scenes serve the same cells at the same
 * versions. The log is one ordered sequence of records, each naming its
 * scene and the version it made: read per scene, it is that scene's change
 * log, which a later replica can follow record by record.
 *
 * On disk (docs/ARCHITECTURE.md, "Journal", has the byte layout):
 *   DATA_DIR/snapshot.GGGGGGGGGGGGGGGG  the state at the start of generation G
 *                                       (written to a .tmp, fsynced, renamed)
 *   DATA_DIR/log.GGGGGGGGGGGGGGGG       the records appended since it
 *   DATA_DIR/lock                       flock'ed while a daemon uses the dir
 * A file is an 8-byte magic and then records: u32 payload length, u32
 * crc32 (zlib) of the length and payload, the payload. A record whose
 * length runs past the end of the file or whose checksum fails ends the
 * file: everything from it on is reported and truncated away, so a replay
 * never applies half a record.
 *
 * Compaction: once the current log passes compact_bytes, appends move to a
 * new generation's log (under the change lock, so no record is lost or
 * doubled), the state as it was at that instant is written as the new
 * generation's snapshot, and the older files are removed. A crash at any
 * point leaves either the old snapshot with both logs or the new snapshot
 * with the new log, and both replay to the same state.
 *
 * Thread safety: appends happen with the change lock held
 * (pd_journal_lock), by whoever also changes the registry under it, so the
 * order of records is the order of changes. pd_journal_sync and
 * pd_journal_compact may run on any thread meanwhile.
 */
#ifndef PD_JOURNAL_H
#define PD_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#include "pd_conf.h"
#include "pd_scene.h"
#include "pd_world.h"

/* Bytes that open every journal file. */
#define PD_JOURNAL_MAGIC "pathdJ1\n"
#define PD_JOURNAL_MAGIC_BYTES 8u
/* Bytes before each record's payload: its length and its checksum. */
#define PD_JOURNAL_HEADER_BYTES 8u
/* Largest payload a record may have: a whole scene of PD_GRID_MAX_SIDE^2
 * cells, current and authored, compressed (zlib's bound for incompressible
 * data is a little over the input). A larger length is a corrupt header. */
#define PD_JOURNAL_MAX_RECORD ((uint32_t)0x7ff00000u)

typedef enum pd_journal_type {
    PD_JOURNAL_SCENE = 1,         /* a whole scene: CreateScene, or a changed scene in a
                                     snapshot (cells, and its authored cells) */
    PD_JOURNAL_INSTANCE = 2,      /* CreateInstance of the template scene named `tmpl` */
    PD_JOURNAL_DROP = 3,          /* DropScene, or a reload that no longer names it */
    PD_JOURNAL_UPDATE = 4,        /* UpdateCells: the ops as sent, making `version` */
    PD_JOURNAL_RESET = 5,         /* the config's definition of the scene at `version`: a
                                     reload replaced it, or a snapshot of one unchanged
                                     since it was loaded */
    PD_JOURNAL_BASE = 6,          /* snapshot only: the cells instances share (base_id),
                                     served under no name */
    PD_JOURNAL_INSTANCE_OF_BASE = 7,  /* snapshot only: an unchanged instance of base_id */
} pd_journal_type;

/* One record, decoded. Arrays are owned (pd_journal_record_free). */
/* The longest idempotency key a change may carry (UpdateCells,
 * CreateScene, CreateInstance, DropScene.idempotency_key): bytes of
 * printable ASCII. It names a Redis key (PREFIX:{NAME}:idem:KEY), so it is
 * short and has no control characters. */
#define PD_IDEMPOTENCY_KEY_MAX 64

typedef struct pd_journal_record {
    pd_journal_type type;
    /* The change's idempotency key (NULL or "": none), for a log that
     * deduplicates (the Redis log); never encoded, so the file journal and
     * replay never see it. */
    const char *key;
    char scene[PD_CONF_MAX_NAME];
    uint64_t version;
    /* PD_JOURNAL_SCENE and PD_JOURNAL_BASE */
    int runtime;
    double origin_x, origin_y, cell_size;
    uint32_t unit_sizes[PD_CONF_MAX_UNIT_SIZES];
    size_t n_unit_sizes;
    pd_conf_search search;
    int32_t width, height;
    uint8_t *cells;               /* width * height, row-major */
    uint8_t *authored;            /* the same shape, or NULL: the cells are authored */
    /* PD_JOURNAL_BASE, PD_JOURNAL_INSTANCE_OF_BASE */
    uint32_t base_id;
    /* PD_JOURNAL_INSTANCE */
    char tmpl[PD_CONF_MAX_NAME];
    uint64_t tmpl_version;
    /* PD_JOURNAL_UPDATE: each op's cells are owned */
    pd_scene_update *ops;
    size_t n_ops;
} pd_journal_record;

void pd_journal_record_free(pd_journal_record *rec);

/* Encodes rec as one framed record (length, checksum, payload) into a new
 * buffer (*out, malloc'ed, *len bytes). Returns 0, or -1 when memory ran
 * out or a field cannot be encoded (a name too long, a scene without cells). */
int pd_journal_encode(const pd_journal_record *rec, uint8_t **out, size_t *len);

/* Decodes one payload (without its header). Returns 0, or -1 with the
 * reason in err; rec is then freed and zeroed. */
int pd_journal_decode(const uint8_t *payload, size_t len, pd_journal_record *rec, char *err,
                      size_t errlen);

/* What pd_journal_scan found in a buffer of framed records. */
typedef struct pd_journal_scan_result {
    size_t good_end;              /* offset after the last record that checks out */
    uint64_t records;             /* records before good_end */
    int damaged;                  /* 1: bytes after good_end do not form a record */
    char why[128];                /* when damaged: "torn record (12 of 40 bytes)", ... */
} pd_journal_scan_result;

/* Called for each good record in order, with its payload and the offset of
 * its header; a non-zero return stops the scan there (good_end after it). */
typedef int (*pd_journal_scan_fn)(void *user, const uint8_t *payload, size_t len, size_t offset);

/* Walks framed records from buf[0] (after the file's magic) to the first
 * one that is torn (runs past len) or corrupt (bad checksum, length over
 * PD_JOURNAL_MAX_RECORD); fn may be NULL. */
void pd_journal_scan(const uint8_t *buf, size_t len, pd_journal_scan_fn fn, void *user,
                     pd_journal_scan_result *out);

typedef struct pd_journal pd_journal;

typedef struct pd_journal_opts {
    const char *dir;              /* created (one level) when missing */
    pd_conf_fsync fsync;
    uint64_t compact_bytes;       /* a log past this size asks for compaction */
    /* Where replay reports what it could not use (a truncated tail, a record
     * that does not apply); may be NULL. Called on the opening thread. */
    void (*warn)(void *user, const char *msg);
    void *warn_user;
} pd_journal_opts;

typedef struct pd_journal_replay_stats {
    uint64_t files;               /* snapshot and logs read */
    uint64_t records;             /* records applied */
    uint64_t skipped;             /* records that did not apply (each reported) */
    uint64_t truncated_bytes;     /* damaged tails cut off (each reported) */
    uint64_t bytes;               /* bytes read */
    uint64_t micros;              /* wall time of the replay */
    uint64_t generation;          /* the generation appends go to */
} pd_journal_replay_stats;

/* Opens dir, replays its snapshot and logs into r (after the config's
 * scenes are loaded: RESET records go back to those; a DropScene takes its
 * portals out of ws, which may be NULL) and returns the
 * journal ready for appends, or NULL with the reason in err (the directory
 * cannot be made or read, another daemon holds it, a file cannot be
 * truncated). Damage is never an error: it is reported through opts->warn
 * and cut off. */
pd_journal *pd_journal_open(const pd_journal_opts *opts, pd_registry *r, pd_world_store *ws,
                            pd_journal_replay_stats *stats, char *err, size_t errlen);

/* Syncs (unless the policy is "no") and closes; NULL is a no-op. No append,
 * sync or compaction may run during or after it. */
void pd_journal_close(pd_journal *j);

/* The change lock: held around a registry change and its append, so the
 * log's order is the order of changes. Returns 0, or -1 when the journal
 * failed earlier (a write error): then nothing may change, and the lock is
 * not held; pd_journal_error says why. */
int pd_journal_lock(pd_journal *j);
void pd_journal_unlock(pd_journal *j);
const char *pd_journal_error(pd_journal *j);
/* 1 once a write failed (any thread, never waits). */
int pd_journal_failed(pd_journal *j);

/* Appends, with the change lock held. Each returns 0, or -1 after a write
 * error (the file is cut back to its last whole record, the journal is
 * marked failed and refuses every later change). */
int pd_journal_append_scene(pd_journal *j, const pd_scene *s);
int pd_journal_append_instance(pd_journal *j, const char *name, uint64_t version, const char *tmpl,
                               uint64_t tmpl_version);
int pd_journal_append_drop(pd_journal *j, const char *name, uint64_t version);
/* Any record (the store's change log appends through this). */
int pd_journal_append(pd_journal *j, const pd_journal_record *rec);
/* The SCENE record of s: its cells and authored cells, allocated (free
 * with pd_journal_record_free). 0, or -1 when memory ran out. */
int pd_journal_scene_record(const pd_scene *s, pd_journal_record *rec);
int pd_journal_append_reset(pd_journal *j, const char *name, uint64_t version);
int pd_journal_append_update(pd_journal *j, const char *name, uint64_t version,
                             const pd_scene_update *ops, size_t n_ops);

/* The fsync policy of the journal ("always" syncs before each answer). */
pd_conf_fsync pd_journal_fsync_policy(const pd_journal *j);

/* fdatasync of the current log when anything was appended since the last
 * sync. Any thread, with or without the change lock. 0, or -1 on error. */
int pd_journal_sync(pd_journal *j);
int pd_journal_dirty(pd_journal *j);

/* 1 when the current log has passed compact_bytes. */
int pd_journal_wants_compaction(pd_journal *j);

/* Snapshot plus tail, as described at the top: pd_journal_snapshot, then
 * pd_journal_drop_old. Runs on the calling thread (seconds for large
 * worlds: not the loop thread) and holds the change lock only to switch
 * logs. Returns 0, or -1 with the reason in err (the old files then stay,
 * and appends go on into the new log). */
int pd_journal_compact(pd_journal *j, pd_registry *r, char *err, size_t errlen);
/* The first half: appends move to a new generation's log and r's state at
 * that instant is written as its snapshot. Replay then starts there; the
 * older files stay until pd_journal_drop_old (or the next open). */
int pd_journal_snapshot(pd_journal *j, pd_registry *r, char *err, size_t errlen);
/* The second half: removes the files older than the newest snapshot. */
int pd_journal_drop_old(pd_journal *j, char *err, size_t errlen);

/* Called with each record of a tail in order; nonzero stops it. The record
 * is the caller's only during the call. */
typedef int (*pd_journal_tail_fn)(void *user, const pd_journal_record *rec);

/* The records of scene `name` that follow the one that made its version
 * `from` (from 0: the scene's whole history the log holds; a config
 * scene's loaded version when the log holds all its updates), in order,
 * read from the
 * current generation's files (compaction waits meanwhile). Returns 0, 1
 * when the log no longer holds that point (a snapshot replaced it, or the
 * scene never was at `from`; nothing is given), or -1 with the reason in
 * err. Any thread; it reads files, so not the loop's. */
int pd_journal_tail(pd_journal *j, const char *name, uint64_t from, pd_journal_tail_fn fn, void *user, char *err,
                    size_t errlen);

/* Replay of records that come from elsewhere (a change log other than the
 * file journal): the same rules as a journal's replay, one record at a
 * time, over r (after the config's scenes are loaded: RESET goes back to
 * those) and ws (may be NULL). */
typedef struct pd_journal_replayer pd_journal_replayer;
pd_journal_replayer *pd_journal_replayer_create(pd_registry *r, pd_world_store *ws);
/* NULL when rec was applied, else why it was skipped (in err or static). */
const char *pd_journal_replay_one(pd_journal_replayer *rp, const pd_journal_record *rec, char *err, size_t errlen);
/* The config's scene of that name a RESET goes back to, retained, or NULL.
 * At first the scenes r served at pd_journal_replayer_create. */
pd_scene *pd_journal_replayer_config(pd_journal_replayer *rp, const char *name);
/* Replaces the config's scenes RESET goes back to with scenes (n of them,
 * each retained; the array is the replayer's now, freed as
 * pd_registry_release_list frees one): a tail that lives across reloads
 * must go back to the config loaded last, as built - not to the scenes
 * served when it was made, which replay may have changed, and which a
 * reload replaced. Any thread; a replay_one meanwhile sees the old or the
 * new ones. */
void pd_journal_replayer_set_config(pd_journal_replayer *rp, pd_scene **scenes, size_t n);
void pd_journal_replayer_destroy(pd_journal_replayer *rp);

/* Bytes of the current log and of the current snapshot. */
void pd_journal_sizes(pd_journal *j, uint64_t *log_bytes, uint64_t *snapshot_bytes);

/* After a reload: call _begin with the change lock held, before the set is
 * published, and _end after, still holding it. Records a RESET for every
 * scene the publish put in from the set as built anew (a scene the set
 * kept, pd_scene_set_kept, goes on with its updates and gets no record),
 * and a DROP for every scene served
 * before that is served no more. Returns NULL when memory ran out (then
 * _end is a no-op and the records are not written; the journal is marked
 * failed so nothing is acknowledged on a log that lost them). */
typedef struct pd_journal_reload pd_journal_reload;
pd_journal_reload *pd_journal_reload_begin(pd_journal *j, pd_registry *r, const pd_scene_set *set);
void pd_journal_reload_end(pd_journal *j, pd_registry *r, pd_journal_reload *rl);

#endif
