/*
 * pd_redis_journal.h - the replica's local journal beside the snapshot
 * cache (issue 32: "A replica loads its local snapshot, replays its local
 * journal, ... then reads the stream from its version").
 *
 * DATA_DIR/redis-cache/HEX(NAME).journal holds the UPDATE records the
 * replica's tail applied (its own appends too, once the log has them),
 * each with its stream entry id and global sequence g. It is only a cache
 * of entries the Redis log holds: never fsynced (a crash that loses its
 * tail costs a longer read of the stream, nothing else), never served
 * unless the log still holds its last entry with the same g (the caller
 * checks, pd_redis_snapshot.c), and cut down to the records past a new
 * cached snapshot when one is written.
 *
 * On disk: PD_REDIS_JOURNAL_MAGIC, then entries: u8 id length, the id,
 * u64 g (little-endian), one framed record of the file journal's format
 * (pd_journal.h: u32 length, u32 crc32, payload). A torn or damaged entry
 * ends the file.
 *
 * Thread safety: one lock in this file serialises appends (the tail's
 * apply thread) and cuts (the compaction's thread).
 */
#ifndef PD_REDIS_JOURNAL_H
#define PD_REDIS_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#include "pd_journal.h"

/* The cache's directory under data_dir (snapshots and journals). */
#define PD_REDIS_CACHE_SUBDIR "redis-cache"
#define PD_REDIS_JOURNAL_MAGIC "pathdRJ1"
#define PD_REDIS_JOURNAL_SUFFIX ".journal"

/* One entry read back: its record (owned), entry id and g. */
typedef struct pd_redis_journal_entry {
    char id[64];
    uint64_t g;
    pd_journal_record rec;
} pd_redis_journal_entry;

/* Appends rec (entry id, g) to `scene`'s journal in cache_dir (the
 * redis-cache directory). Only UPDATE records are kept (others are
 * ignored: the journal continues a snapshot version by version). 0, or -1
 * when the file cannot be written (the caller says so; nothing else
 * depends on it). */
int pd_redis_journal_append(const char *cache_dir, const char *scene, const char *id, uint64_t g,
                            const pd_journal_record *rec);

/* The entries of `scene`'s journal, in file order, up to the first that
 * is torn or does not decode: *out (free with pd_redis_journal_free) and
 * *n; 0, or -1 when memory ran out. A missing file is 0 entries. */
int pd_redis_journal_read(const char *cache_dir, const char *scene, pd_redis_journal_entry **out, size_t *n);
void pd_redis_journal_free(pd_redis_journal_entry *e, size_t n);

/* Keeps only the entries past `version` (a snapshot of it was cached),
 * rewriting the file (tmp, rename: no fsync, it is a cache). 0, or -1. */
int pd_redis_journal_cut(const char *cache_dir, const char *scene, uint64_t version);

/* Removes `scene`'s journal (it is of another history than the log). */
void pd_redis_journal_discard(const char *cache_dir, const char *scene);

/* The cache file of `scene` in cache_dir: '/', the name in hex, suffix
 * ("" for the snapshot, PD_REDIS_JOURNAL_SUFFIX, ".tmp"). */
void pd_redis_cache_path(const char *cache_dir, const char *scene, const char *suffix, char *buf, size_t len);

/* The whole file at path when it is 1 to max bytes long: malloc'ed, its
 * size in *size; NULL when it is missing, empty, larger or unreadable. */
uint8_t *pd_redis_cache_slurp(const char *path, uint64_t max, size_t *size);

/* The journal's path (for messages). */
void pd_redis_journal_path(const char *cache_dir, const char *scene, char *buf, size_t len);

#endif
