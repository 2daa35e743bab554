/*
 * pd_redis_snapshot.c - scene snapshots in Redis and the streams' trim
 * (see pd_redis_snapshot.h for the keys, the FUNCTION and who writes).
 * Commands run on the change log's own connection
 * (pd_redis_log_command), so a reconnect there serves both.
 */
#include "pd_redis_snapshot.h"

#include "pd_fileio.h"
#include "pd_redis_journal.h"
#include "pd_reserve_shared.h"

#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* pathd_snapshot_of: KEYS: stream, meta, snaps. ARGV: the version, how
 * many to keep, the record, the incarnation (INC) the record's state is of
 * ("" not known: versions alone). Answers {status, id, oldest kept, g of
 * the entry}: OK, HAVE (that id or a newer one is the newest already),
 * GONE (no live incarnation), STALE (the live incarnation is not the
 * record's: the name was dropped and made anew after the state was
 * captured, and the entry INC-V is another scene's version), NOENTRY (the
 * stream has no entry INC-V: not a version the log made, or trimmed).
 * pathd_snapshot is the same function under its first name, for an older
 * pathd sharing the library in a rolling upgrade (it sends no INC); the
 * new name makes this pathd load the library over an older one that
 * would ignore the INC (pd__fcall loads it when the name is not found).
 * pathd_dropped (same keys; ARGV unused): a scene
 * dropped and not made again has its stream trimmed to the drop's entry
 * and its snapshots forgotten; answers OK, or LIVE when it is served. */
static const char PD__SNAP_LIBRARY[] =
    "#!lua name=pathd_snap\n"
    "local function older(a, b)\n"
    "  local ai, av = string.match(a, '(%d+)-(%d+)')\n"
    "  local bi, bv = string.match(b, '(%d+)-(%d+)')\n"
    "  ai, av, bi, bv = tonumber(ai), tonumber(av), tonumber(bi), tonumber(bv)\n"
    "  return ai < bi or (ai == bi and av < bv)\n"
    "end\n"
    "local function snapshot(keys, args)\n"
    "  local stream, meta, snaps = keys[1], keys[2], keys[3]\n"
    "  local v, keep, record = tonumber(args[1]), tonumber(args[2]), args[3]\n"
    "  local m = redis.call('HMGET', meta, 'inc', 'live', 'snaps')\n"
    "  if m[2] ~= '1' then return {'GONE', '', '', ''} end\n"
    "  local id = string.format('%d-%d', tonumber(m[1]) or 0, v)\n"
    "  local list = {}\n"
    "  for s in string.gmatch(m[3] or '', '%S+') do table.insert(list, s) end\n"
    "  local want = args[4]\n"
    "  if want and want ~= '' and tonumber(want) ~= (tonumber(m[1]) or 0) then return {'STALE', id, '', ''} end\n"
    "  local e = redis.call('XRANGE', stream, id, id)\n"
    "  if #e == 0 then return {'NOENTRY', id, '', ''} end\n"
    "  local g = ''\n"
    "  for i = 1, #e[1][2], 2 do if e[1][2][i] == 'g' then g = e[1][2][i + 1] end end\n"
    "  if #list > 0 and not older(list[#list], id) then return {'HAVE', id, list[1], g} end\n"
    "  redis.call('HSET', snaps, id, record)\n"
    "  table.insert(list, id)\n"
    "  while #list > keep do redis.call('HDEL', snaps, table.remove(list, 1)) end\n"
    "  redis.call('HSET', meta, 'snap', id, 'snaps', table.concat(list, ' '))\n"
    "  -- every version below the oldest kept snapshot is covered by it\n"
    "  redis.call('XTRIM', stream, 'MINID', list[1])\n"
    "  return {'OK', id, list[1], g}\n"
    "end\n"
    "redis.register_function('pathd_snapshot', snapshot)\n"
    "redis.register_function('pathd_snapshot_of', snapshot)\n"
    "local function dropped(keys, args)\n"
    "  local stream, meta, snaps = keys[1], keys[2], keys[3]\n"
    "  local m = redis.call('HMGET', meta, 'inc', 'live')\n"
    "  if m[2] ~= '0' then return 'LIVE' end\n"
    "  -- the drop's entry INC-0 ends the history: what came before it\n"
    "  -- replays to nothing (a name not served stays unserved)\n"
    "  redis.call('XTRIM', stream, 'MINID', string.format('%d-0', tonumber(m[1]) or 0))\n"
    "  redis.call('DEL', snaps)\n"
    "  redis.call('HDEL', meta, 'snap', 'snaps')\n"
    "  return 'OK'\n"
    "end\n"
    "redis.register_function('pathd_dropped', dropped)\n";

/* Scenes noted at once before a write (one noted while the list is full
 * waits for its next due version). */
#define PD__SNAP_PENDING_MAX 256
/* Scenes a too-big warning is remembered for (logged once each). */
#define PD__SNAP_WARNED_MAX 64
/* Reads of a snapshot whose id a writer forgot between the two commands. */
#define PD__SNAP_FETCH_TRIES 3
/* The local cache's files: magic, u8 id length, id, u64 g (little-endian),
 * then the SCENE record framed as the journal frames it (length, crc32,
 * payload), so a torn or damaged file is told by its checksum. */
#define PD__CACHE_MAGIC "pathdR1\n"
#define PD__CACHE_MAGIC_BYTES 8u
#define PD__CACHE_SUBDIR PD_REDIS_CACHE_SUBDIR
#define PD__DEF_HEX PD_REDIS_SNAP_DEF_HEX
/* A cache file's path: the directory, '/', the name in hex, a suffix. */
#define PD__CACHE_PATH_MAX (PD_CONF_MAX_DATA_DIR + sizeof PD__CACHE_SUBDIR + 2 * PD_CONF_MAX_NAME + 16)

/* A reload's record (RESET: next version; DROP: the incarnation ends),
 * with the key it is sent with every time: a retry of one that reached
 * Redis though its answer did not reach pathd is answered DUP. A RESET
 * carries its definition's hash (pd_redis_snap_definition_hash), so a replica that
 * reloaded the same config at once can tell another's RESET for its own. */
typedef struct pd__held {
    pd_journal_type type;
    char scene[PD_CONF_MAX_NAME];
    uint64_t version;
    char key[48];
    char def[PD__DEF_HEX];
} pd__held;

struct pd_redis_snap {
    pd_redis_log *rl;
    pd_redis_snap_opts o;
    char prefix[64];
    pthread_mutex_t lock;         /* pending and warned */
    char (*pending)[PD_CONF_MAX_NAME];
    size_t n_pending;
    char (*warned)[PD_CONF_MAX_NAME];
    size_t n_warned;
    atomic_int n_due;             /* n_pending, read without the lock */
    atomic_uint_fast64_t bytes;
    char cache[PD_CONF_MAX_DATA_DIR + sizeof PD__CACHE_SUBDIR + 1];  /* "" or DIR/redis-cache */
    int cache_lock_fd;            /* DIR/redis-cache/lock, flock'ed; -1 without a cache */
    atomic_uint_fast64_t from_cache, from_redis;   /* scenes replay started from each */
    atomic_uint_fast64_t from_journal;             /* entries replay took from local journals */
    /* A reload's records Redis did not answer (down, or silent past the
     * timeout), oldest first, sent again with their keys until it does
     * (pd_redis_snap_retry_held). The change lock guards them: reloads,
     * appends and the retry all run under it. */
    pd__held *held;
    size_t n_held, cap_held;
    atomic_int n_held_due;        /* n_held, read without the lock (due) */
    void (*rebuild_pause)(void *user);   /* tests: pd_redis_snap_set_rebuild_pause */
    void *rebuild_pause_user;
};

/* The cache directory (made, one level each) and its lock: one pathd per
 * data_dir. 0, or -1 with err. */
static int pd__cache_open(pd_redis_snap *sn, const char *dir, char *err, size_t errlen)
{
    if (strlen(dir) >= PD_CONF_MAX_DATA_DIR) {
        snprintf(err, errlen, "Redis log cache: the directory name is too long");
        return -1;
    }
    snprintf(sn->cache, sizeof sn->cache, "%s/%s", dir, PD__CACHE_SUBDIR);
    char lock[sizeof sn->cache + 8];
    snprintf(lock, sizeof lock, "%s/lock", sn->cache);
    if ((mkdir(dir, 0755) != 0 && errno != EEXIST) || (mkdir(sn->cache, 0755) != 0 && errno != EEXIST) ||
        (sn->cache_lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0) {
        snprintf(err, errlen, "Redis log cache %s: %s", sn->cache, strerror(errno));
        return -1;
    }
    if (flock(sn->cache_lock_fd, LOCK_EX | LOCK_NB) != 0) {
        snprintf(err, errlen, "Redis log cache %s: another pathd uses it (%s)", sn->cache, strerror(errno));
        return -1;
    }
    return 0;
}

pd_redis_snap *pd_redis_snap_create(pd_redis_log *rl, const pd_redis_snap_opts *o, char *err, size_t errlen)
{
    if (!rl || o->every == 0 || o->keep == 0 || o->max_bytes == 0) {
        snprintf(err, errlen, "Redis snapshots: a log, an interval, a count to keep and a size bound are needed");
        return NULL;
    }
    pd_redis_snap *sn = calloc(1, sizeof *sn);
    if (sn) {
        sn->pending = calloc(PD__SNAP_PENDING_MAX, sizeof *sn->pending);
        sn->warned = calloc(PD__SNAP_WARNED_MAX, sizeof *sn->warned);
    }
    if (!sn || !sn->pending || !sn->warned) {
        if (sn) {
            free(sn->pending);
            free(sn->warned);
        }
        free(sn);
        snprintf(err, errlen, "Redis snapshots: out of memory");
        return NULL;
    }
    sn->rl = rl;
    sn->o = *o;
    sn->cache_lock_fd = -1;
    snprintf(sn->prefix, sizeof sn->prefix, "%s", pd_redis_log_prefix(rl));
    pthread_mutex_init(&sn->lock, NULL);
    if (o->cache_dir && o->cache_dir[0] && pd__cache_open(sn, o->cache_dir, err, errlen) != 0) {
        pd_redis_snap_destroy(sn);
        return NULL;
    }
    return sn;
}

void pd_redis_snap_destroy(pd_redis_snap *sn)
{
    if (!sn)
        return;
    pthread_mutex_destroy(&sn->lock);
    if (sn->cache_lock_fd >= 0)
        close(sn->cache_lock_fd); /* lets go of the flock */
    free(sn->pending);
    free(sn->warned);
    /* Held only in memory: the log never has them, so a restart replays
     * the history made on the maps they replaced (skipped records), as
     * after a crash before the reload's snapshots. Said. */
    for (size_t i = 0; i < sn->n_held && sn->o.warn; i++) {
        char msg[400];
        snprintf(msg, sizeof msg,
                 "a reload's %s of scene '%s' never reached Redis: the log does not have it (a restart replays "
                 "the scene's history as the log holds it)",
                 sn->held[i].type == PD_JOURNAL_DROP ? "DROP" : "RESET", sn->held[i].scene);
        sn->o.warn(sn->o.warn_user, msg);
    }
    free(sn->held);
    free(sn);
}

pd_changelog pd_redis_log_open_with_snapshots(const pd_redis_log_opts *lo, const pd_redis_snap_opts *so, char *err,
                                              size_t errlen)
{
    pd_redis_log *rl = pd_redis_log_create(lo, err, errlen);
    pd_redis_snap *sn = rl ? pd_redis_snap_create(rl, so, err, errlen) : NULL;
    if (!sn) {
        pd_redis_log_destroy(rl);
        return pd_redis_changelog(NULL);
    }
    pd_redis_snap_attach(sn);
    return pd_redis_changelog(rl);
}

/* ---- what is due -------------------------------------------------------------- */

/* Adds name to a list of names (lock held) unless it is there or full.
 * 1 when added. */
static int pd__list_add(char (*list)[PD_CONF_MAX_NAME], size_t *n, size_t cap, const char *name)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp(list[i], name) == 0)
            return 0;
    if (*n == cap)
        return 0;
    snprintf(list[(*n)++], PD_CONF_MAX_NAME, "%s", name);
    return 1;
}

/* Scene `name` waits for its snapshot (or, dropped, its trim). */
static void pd__note_name(pd_redis_snap *sn, const char *name)
{
    pthread_mutex_lock(&sn->lock);
    pd__list_add(sn->pending, &sn->n_pending, PD__SNAP_PENDING_MAX, name);
    atomic_store(&sn->n_due, (int)sn->n_pending);
    pthread_mutex_unlock(&sn->lock);
}

void pd_redis_snap_note(pd_redis_snap *sn, const pd_journal_record *rec)
{
    int due = rec->type == PD_JOURNAL_INSTANCE || rec->type == PD_JOURNAL_DROP ||
              (rec->type == PD_JOURNAL_UPDATE && rec->version % sn->o.every == 0);
    if (due)
        pd__note_name(sn, rec->scene);
}

int pd_redis_snap_due(pd_redis_snap *sn)
{
    return atomic_load(&sn->n_due) > 0 || atomic_load(&sn->n_held_due) > 0;
}

/* ---- the local cache ------------------------------------------------------------ */

static void pd__cache_path(const pd_redis_snap *sn, const char *scene, const char *suffix, char *buf, size_t len)
{
    pd_redis_cache_path(sn->cache, scene, suffix, buf, len);
}

/* The scene's cache file, replaced whole (tmp, fdatasync, rename, fsync of
 * the directory): a crash leaves the old file or the new one. 0, or -1
 * with err. */
static int pd__cache_write(pd_redis_snap *sn, const char *scene, const char *id, uint64_t g, const uint8_t *framed,
                           size_t len, char *err, size_t errlen)
{
    char path[PD__CACHE_PATH_MAX], tmp[PD__CACHE_PATH_MAX];
    pd__cache_path(sn, scene, "", path, sizeof path);
    pd__cache_path(sn, scene, ".tmp", tmp, sizeof tmp);
    uint8_t head[PD__CACHE_MAGIC_BYTES + 1 + 64 + 8];
    size_t idlen = strlen(id), n = PD__CACHE_MAGIC_BYTES;
    if (idlen >= 64) {
        snprintf(err, errlen, "Redis log cache: entry id %s too long", id);
        return -1;
    }
    memcpy(head, PD__CACHE_MAGIC, PD__CACHE_MAGIC_BYTES);
    head[n++] = (uint8_t)idlen;
    memcpy(head + n, id, idlen);
    n += idlen;
    for (int i = 0; i < 8; i++)
        head[n++] = (uint8_t)(g >> (8 * i));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int ok = fd >= 0 && pd_write_all(fd, head, n, PD_WRITE_AT_OFFSET) == 0 && pd_write_all(fd, framed, len, PD_WRITE_AT_OFFSET) == 0 && fdatasync(fd) == 0;
    int saved = errno;
    if (fd >= 0)
        close(fd);
    if (ok && rename(tmp, path) != 0) {
        saved = errno;
        ok = 0;
    }
    if (!ok) {
        unlink(tmp);
        snprintf(err, errlen, "Redis log cache %s: %s", path, strerror(saved));
        return -1;
    }
    int dfd = open(sn->cache, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    return 0;
}

typedef struct pd__cache_read {
    pd_journal_record *rec;
    int decoded;
    char why[128];
} pd__cache_read;

static int pd__cache_record(void *user, const uint8_t *payload, size_t len, size_t offset)
{
    (void)offset;
    pd__cache_read *cr = user;
    cr->decoded = pd_journal_decode(payload, len, cr->rec, cr->why, sizeof cr->why) == 0;
    return 1; /* one record */
}

/* The scene's cached record with its entry id and g: 0, or 1 when there is
 * none or it cannot be read (why says which; the caller goes to Redis). */
static int pd__cache_read_scene(pd_redis_snap *sn, const char *scene, pd_journal_record *rec, char *id, size_t idlen,
                                uint64_t *g, char *why, size_t whylen)
{
    char path[PD__CACHE_PATH_MAX];
    pd__cache_path(sn, scene, "", path, sizeof path);
    snprintf(why, whylen, "no local cache");
    size_t size = 0;
    uint8_t *buf = pd_redis_cache_slurp(path, sn->o.max_bytes + PD__CACHE_MAGIC_BYTES + 80, &size);
    if (!buf && access(path, F_OK) != 0)
        return 1;
    size_t n = PD__CACHE_MAGIC_BYTES + 1;
    int rc = 1;
    snprintf(why, whylen, "the local cache file %s cannot be read", path);
    if (size > n && memcmp(buf, PD__CACHE_MAGIC, PD__CACHE_MAGIC_BYTES) == 0 && buf[n - 1] < idlen &&
        size > n + buf[n - 1] + 8) {
        size_t il = buf[n - 1];
        memcpy(id, buf + n, il);
        id[il] = '\0';
        n += il;
        *g = 0;
        for (int i = 0; i < 8; i++)
            *g |= (uint64_t)buf[n + (size_t)i] << (8 * i);
        n += 8;
        pd__cache_read cr = { .rec = rec };
        pd_journal_scan_result res;
        pd_journal_scan(buf + n, size - n, pd__cache_record, &cr, &res);
        if (cr.decoded && rec->type == PD_JOURNAL_SCENE && strcmp(rec->scene, scene) == 0)
            rc = 0;
        else if (cr.decoded)
            pd_journal_record_free(rec);
    }
    free(buf);
    return rc;
}

/* ---- writing -------------------------------------------------------------------- */

/* FCALL pathd_snapshot, loading the library once when Redis does not have
 * it (first use, or a Redis restarted without its data). */
static redisReply *pd__fcall(pd_redis_snap *sn, const char *fn, const char *scene, uint64_t version,
                             const uint8_t *payload, size_t len, uint64_t inc, char *err, size_t errlen)
{
    char stream[320], meta[320], snaps[320], v[24], keep[16], incs[24] = "";
    if (inc)
        snprintf(incs, sizeof incs, "%" PRIu64, inc);
    pd_redis_log_stream_key(sn->rl, scene, stream, sizeof stream);
    snprintf(meta, sizeof meta, "%s:{%s}:meta", sn->prefix, scene);
    snprintf(snaps, sizeof snaps, "%s:{%s}:snaps", sn->prefix, scene);
    snprintf(v, sizeof v, "%" PRIu64, version);
    snprintf(keep, sizeof keep, "%" PRIu32, sn->o.keep);
    const char *argv[] = { "FCALL", fn, "3", stream, meta, snaps, v, keep, payload ? (const char *)payload : "",
                           incs };
    size_t argvlen[10];
    for (int i = 0; i < 10; i++)
        argvlen[i] = i == 8 ? (payload ? len : 0) : strlen(argv[i]); /* the record is binary */
    for (int attempt = 0;; attempt++) {
        int io;
        redisReply *r = pd_redis_log_command(sn->rl, 10, argv, argvlen, &io, err, errlen);
        if (r || io || attempt > 0 || !strstr(err, "Function not found"))
            return r;
        const char *load[] = { "FUNCTION", "LOAD", "REPLACE", PD__SNAP_LIBRARY };
        const size_t loadlen[] = { 8, 4, 7, sizeof PD__SNAP_LIBRARY - 1 };
        redisReply *l = pd_redis_log_command(sn->rl, 4, load, loadlen, &io, err, errlen);
        if (!l)
            return NULL;
        freeReplyObject(l);
    }
}

/* Logs once per scene that it is too big to snapshot. */
static void pd__warn_too_big(pd_redis_snap *sn, const char *scene, size_t len)
{
    pthread_mutex_lock(&sn->lock);
    int first = pd__list_add(sn->warned, &sn->n_warned, PD__SNAP_WARNED_MAX, scene);
    pthread_mutex_unlock(&sn->lock);
    if (first && sn->o.warn) {
        char msg[256];
        snprintf(msg, sizeof msg,
                 "Redis log: scene '%s' is not snapshotted: its record is %zu bytes, more than "
                 "log.snapshot_max_bytes %" PRIu64 "; its stream is not trimmed",
                 scene, len, sn->o.max_bytes);
        sn->o.warn(sn->o.warn_user, msg);
    }
}

int pd_redis_snap_write(pd_redis_snap *sn, const pd_scene *s, uint64_t inc, pd_redis_snap_outcome *out, char *err,
                        size_t errlen)
{
    pd_journal_record rec;
    uint8_t *framed = NULL;
    size_t len = 0;
    if (pd_journal_scene_record(s, &rec) != 0) {
        snprintf(err, errlen, "Redis snapshot of '%s': out of memory", s->name);
        return -1;
    }
    int enc = pd_journal_encode(&rec, &framed, &len);
    pd_journal_record_free(&rec);
    if (enc != 0) {
        snprintf(err, errlen, "Redis snapshot of '%s': the record cannot be encoded", s->name);
        return -1;
    }
    size_t plen = len - PD_JOURNAL_HEADER_BYTES;
    if (plen > sn->o.max_bytes) {
        free(framed);
        pd__warn_too_big(sn, s->name, plen);
        *out = PD_REDIS_SNAP_TOO_BIG;
        return 0;
    }
    redisReply *r =
        pd__fcall(sn, "pathd_snapshot_of", s->name, s->version, framed + PD_JOURNAL_HEADER_BYTES, plen, inc, err,
                  errlen);
    int rc = 0;
    if (!r) {
        rc = -1;
    } else if (r->type != REDIS_REPLY_ARRAY || r->elements != 4 || r->element[0]->type != REDIS_REPLY_STRING ||
               r->element[1]->type != REDIS_REPLY_STRING || r->element[3]->type != REDIS_REPLY_STRING) {
        snprintf(err, errlen, "Redis snapshot of '%s': pathd_snapshot answered something else", s->name);
        rc = -1;
    } else if (strcmp(r->element[0]->str, "OK") == 0 || strcmp(r->element[0]->str, "HAVE") == 0) {
        *out = r->element[0]->str[0] == 'O' ? PD_REDIS_SNAP_WRITTEN : PD_REDIS_SNAP_HELD;
        if (*out == PD_REDIS_SNAP_WRITTEN)
            atomic_fetch_add(&sn->bytes, plen);
        /* The same record, at the entry the log holds, is this replica's
         * local cache: a restart reads only the stream after it. */
        if (sn->cache[0])
            rc = pd__cache_write(sn, s->name, r->element[1]->str, strtoull(r->element[3]->str, NULL, 10), framed,
                                 len, err, errlen);
        /* The local journal goes on from the new cached snapshot: what it
         * covers is cut away (only a cache, so a failed cut costs room). */
        if (sn->cache[0] && rc == 0)
            (void)pd_redis_journal_cut(sn->cache, s->name, s->version);
    } else {
        *out = PD_REDIS_SNAP_NOT_IN_LOG;
    }
    free(framed);
    if (r)
        freeReplyObject(r);
    return rc;
}

/* A dropped scene's stream trimmed to its drop, its snapshots and local
 * cache forgotten (a name served again is left alone). 0, or -1 with err. */
static int pd__trim_dropped(pd_redis_snap *sn, const char *scene, char *err, size_t errlen)
{
    redisReply *r = pd__fcall(sn, "pathd_dropped", scene, 0, NULL, 0, 0, err, errlen);
    if (!r)
        return -1;
    int gone = r->type == REDIS_REPLY_STRING && strcmp(r->str, "OK") == 0;
    freeReplyObject(r);
    if (gone && sn->cache[0]) {
        char path[PD__CACHE_PATH_MAX];
        pd__cache_path(sn, scene, "", path, sizeof path);
        unlink(path);
    }
    return 0;
}

int pd_redis_snap_write_due(pd_redis_snap *sn, pd_registry *r, char *err, size_t errlen)
{
    /* The list is taken whole: notes made meanwhile wait for the next call. */
    pthread_mutex_lock(&sn->lock);
    size_t n = sn->n_pending;
    char (*names)[PD_CONF_MAX_NAME] = n ? malloc(n * sizeof *names) : NULL;
    if (names) {
        memcpy(names, sn->pending, n * sizeof *names);
        sn->n_pending = 0;
        atomic_store(&sn->n_due, 0);
    }
    pthread_mutex_unlock(&sn->lock);
    if (n && !names) {
        snprintf(err, errlen, "Redis snapshots: out of memory");
        return -1;
    }
    int rc = 0;
    size_t i = 0;
    for (; i < n && rc == 0; i++) {
        /* The state and the incarnation it is of, taken together: the
         * name may have been dropped and made anew (another replica's,
         * applied by the tail, or this pathd's own) since it was noted,
         * and the FUNCTION must not store an older incarnation's cells
         * under the live one's entry of the same version. */
        uint64_t inc = 0;
        /* A scene the replica refuses (its log went back) is served from
         * the history left behind: the log may hold the same INC-V again,
         * another replica's, which the FUNCTION cannot tell apart. */
        if (pd_redis_log_refused(sn->rl, names[i]))
            continue;
        pd_scene *s = pd_redis_log_served_scene(sn->rl, r, names[i], &inc);
        pd_redis_snap_outcome out;
        rc = s ? pd_redis_snap_write(sn, s, inc, &out, err, errlen) : pd__trim_dropped(sn, names[i], err, errlen);
        pd_scene_release(s);
    }
    /* A failure leaves the one that failed and the rest due again. */
    if (rc != 0) {
        pthread_mutex_lock(&sn->lock);
        for (size_t k = i - 1; k < n; k++)
            pd__list_add(sn->pending, &sn->n_pending, PD__SNAP_PENDING_MAX, names[k]);
        atomic_store(&sn->n_due, (int)sn->n_pending);
        pthread_mutex_unlock(&sn->lock);
    }
    free(names);
    return rc;
}

/* ---- reloads ------------------------------------------------------------------------ */

struct pd_redis_snap_reload {
    pd_scene **fresh;             /* the set's scenes built anew, retained */
    size_t n_fresh;
    pd_scene **before;            /* what was served before the publish */
    size_t n_before;
};

void *pd_redis_snap_reload_begin(pd_redis_snap *sn, pd_registry *r, const pd_scene_set *set)
{
    (void)sn;
    size_t n = 0;
    pd_scene *const *scenes = pd_scene_set_scenes(set, &n);
    pd_redis_snap_reload *st = calloc(1, sizeof *st);
    if (!st || (n && !(st->fresh = calloc(n, sizeof *st->fresh)))) {
        free(st);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        if (!pd_scene_set_kept(set, i)) {
            pd_scene_retain(scenes[i]);
            st->fresh[st->n_fresh++] = scenes[i];
        }
    st->n_before = pd_registry_list(r, &st->before);
    return st;
}

/* FNV-1a 64 over n bytes, going on from h. */
static uint64_t pd__fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* FNV-1a 64 (pd_index.c's): not a defence against forgery - a replica
 * is trusted with the log - but against two configs told for one. */
void pd_redis_snap_definition_hash(const pd_scene *s, char *out)
{
    uint64_t h = 14695981039346656037ull;
    const int32_t side[2] = { s->grid->width, s->grid->height };
    const double place[3] = { s->origin_x, s->origin_y, s->cell_size };
    const uint32_t search = (uint32_t)s->search, n_units = (uint32_t)s->n_unit_sizes;
    h = pd__fnv(h, side, sizeof side);
    h = pd__fnv(h, place, sizeof place);
    h = pd__fnv(h, &search, sizeof search);
    h = pd__fnv(h, &n_units, sizeof n_units);
    h = pd__fnv(h, s->unit_sizes, s->n_unit_sizes * sizeof *s->unit_sizes);
    const pd_grid *authored = pd_scene_authored_grid(s);
    for (int32_t y = 0; y < s->grid->height; y++) {
        h = pd__fnv(h, s->grid->cells + pd_grid_index(s->grid, 0, y), (size_t)s->grid->width);
        if (authored)
            h = pd__fnv(h, authored->cells + pd_grid_index(authored, 0, y), (size_t)authored->width);
    }
    snprintf(out, PD__DEF_HEX, "%016" PRIx64, h);
}

/* Whether the log's entry `id` of h's scene is a RESET of h's definition
 * at h's version (XRANGE id id): 1 or 0, or -1 with err when Redis did
 * not answer. */
static int pd__entry_is_reset_of(pd_redis_snap *sn, const pd__held *h, const char *id, char *err, size_t errlen)
{
    char stream[320];
    pd_redis_log_stream_key(sn->rl, h->scene, stream, sizeof stream);
    const char *xr[] = { "XRANGE", stream, id, id };
    const size_t xrlen[] = { 6, strlen(stream), strlen(id), strlen(id) };
    int io;
    redisReply *r = pd_redis_log_command(sn->rl, 4, xr, xrlen, &io, err, errlen);
    if (!r)
        return -1;
    const redisReply *def = NULL, *rec = NULL;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 1 && r->element[0]->type == REDIS_REPLY_ARRAY &&
        r->element[0]->elements == 2 && r->element[0]->element[1]->type == REDIS_REPLY_ARRAY) {
        const redisReply *f = r->element[0]->element[1];
        for (size_t i = 0; i + 1 < f->elements; i += 2)
            if (f->element[i]->type == REDIS_REPLY_STRING && f->element[i + 1]->type == REDIS_REPLY_STRING) {
                if (strcmp(f->element[i]->str, "d") == 0)
                    def = f->element[i + 1];
                else if (strcmp(f->element[i]->str, "r") == 0)
                    rec = f->element[i + 1];
            }
    }
    pd_journal_record got;
    char derr[128];
    int same = def && rec && strcmp(def->str, h->def) == 0 &&
               pd_journal_decode((const uint8_t *)rec->str, rec->len, &got, derr, sizeof derr) == 0;
    if (same) {
        same = got.type == PD_JOURNAL_RESET && got.version == h->version && strcmp(got.scene, h->scene) == 0;
        pd_journal_record_free(&got);
    }
    freeReplyObject(r);
    return same;
}

/* What the RESETs kept in a scene's meta say of its entry id: 1 a RESET
 * of def, 0 of another definition, -1 not named there. kept is "INC-V
 * HASH" pairs, space-separated (rdefs). */
static int pd__kept_reset_says(const char *kept, const char *id, const char *def)
{
    const size_t n = strlen(id);
    for (const char *p = kept; *p;) {
        const char *hash = strchr(p, ' ');
        if (!hash)
            break;
        hash++;
        const char *end = strchr(hash, ' ');
        const size_t len = end ? (size_t)(end - hash) : strlen(hash);
        if ((size_t)(hash - 1 - p) == n && strncmp(p, id, n) == 0)
            return len == strlen(def) && strncmp(hash, def, len) == 0;
        if (!end)
            break;
        p = end + 1;
    }
    return -1;
}

/* A RESET of h's scene the log refused because its version moved: 1 when
 * the entry at h's version of the live incarnation is a RESET of the same
 * definition (another replica reloaded the same config at about the same
 * moment, and its record got in first) - what this pathd serves is then
 * the log's through that entry, which is noted as the tail notes an entry
 * it applied (its tail finds it had it) -, 0 when it is not (a real
 * conflict: the log holds another definition, another change came
 * between, an entry with no hash), or -1 with why when Redis did not
 * answer the reads (gone or silent past the timeout, or an error answer:
 * the record is held and sent again, as one the FCALL got no answer to -
 * not known to conflict, it must not fail the log). Decided from the log
 * alone, so every replica decides alike. The change lock held. */
static int pd__adopt_reset(pd_redis_snap *sn, const pd__held *h, char *why, size_t whylen)
{
    if (h->type != PD_JOURNAL_RESET || !h->def[0])
        return 0;
    char meta[320], id[48], err[256];
    snprintf(meta, sizeof meta, "%s:{%s}:meta", sn->prefix, h->scene);
    const char *hm[] = { "HMGET", meta, "inc", "live", "rdefs" };
    const size_t hmlen[] = { 5, strlen(meta), 3, 4, 5 };
    int io;
    redisReply *r = pd_redis_log_command(sn->rl, 5, hm, hmlen, &io, err, sizeof err);
    if (!r)
        goto unanswered;
    int live = r->type == REDIS_REPLY_ARRAY && r->elements == 3 && r->element[0]->type == REDIS_REPLY_STRING &&
               r->element[1]->type == REDIS_REPLY_STRING && strcmp(r->element[1]->str, "1") == 0;
    /* The last 8 RESETs' "INC-V HASH" (meta field rdefs) decide when they
     * name the entry at h's version:
     * they outlive the entry, which a snapshot past it trims - another
     * replica may well change the scene, even reload again, and compact
     * before this one's RESET is sent again (the entry's read alone failed
     * the log then: test_same_config_reloaded_entry_trimmed_is_adopted,
     * ..._after_another_reload_is_adopted). Else (an older pathd's library
     * writes none, or 8 RESETs came since) the entry is read. */
    int same = -1;
    if (live) {
        snprintf(id, sizeof id, "%llu-%" PRIu64, strtoull(r->element[0]->str, NULL, 10), h->version);
        if (r->element[2]->type == REDIS_REPLY_STRING)
            same = pd__kept_reset_says(r->element[2]->str, id, h->def);
    }
    freeReplyObject(r);
    if (!live)
        return 0;
    if (same < 0 && (same = pd__entry_is_reset_of(sn, h, id, err, sizeof err)) < 0)
        goto unanswered;
    if (!same)
        return 0;
    pd_redis_log_served_entry(sn->rl, h->scene, id);
    if (sn->o.warn) {
        char msg[400];
        snprintf(msg, sizeof msg,
                 "a reload's RESET of scene '%s' (version %" PRIu64 "): another replica's RESET of the same "
                 "definition is the log's entry %s; this pathd serves it",
                 h->scene, h->version, id);
        sn->o.warn(sn->o.warn_user, msg);
    }
    return 1;
unanswered:
    snprintf(why, whylen,
             "a reload's RESET of scene '%s' (version %" PRIu64 "): the log's entry there not read: %.80s",
             h->scene, h->version, err);
    return -1;
}

/* One reload record appended. A DROP of a scene the log has no live
 * record of (a config scene never changed) has nothing to end. 0 taken,
 * 1 not answered (Redis down or silent: it may be taken, its key tells),
 * or -1 refused, with why. */
static int pd__reload_append(pd_redis_snap *sn, const pd__held *h, char *why, size_t whylen)
{
    pd_journal_record rec = { .type = h->type, .version = h->version };
    snprintf(rec.scene, sizeof rec.scene, "%s", h->scene);
    uint8_t *framed = NULL;
    size_t len = 0;
    if (pd_journal_encode(&rec, &framed, &len) != 0) {
        snprintf(why, whylen, "out of memory recording a reload");
        return -1;
    }
    const pd_redis_append a = { .scene = h->scene,
                                .op = h->type == PD_JOURNAL_DROP ? PD_REDIS_DROP : PD_REDIS_NEXT,
                                .has_expected = 1,
                                .expected = h->type == PD_JOURNAL_DROP ? h->version : h->version - 1,
                                .key = h->key,
                                .def = h->def[0] ? h->def : NULL,
                                .payload = framed + PD_JOURNAL_HEADER_BYTES,
                                .len = len - PD_JOURNAL_HEADER_BYTES };
    pd_redis_append_result res;
    pd_status st = pd_redis_log_append(sn->rl, &a, &res);
    free(framed);
    /* The key is this record's alone: seen, it is this record, taken. */
    if ((st == PD_OK && (res.duplicate || res.version == h->version)) ||
        (h->type == PD_JOURNAL_DROP && st == PD_UNKNOWN_SCENE))
        return 0;
    /* Another replica's RESET of the same definition took the version
     * (the same config reloaded on both at once): the same as this one.
     * Not known (Redis did not answer the reads): held, as unanswered. */
    int adopted = st == PD_STALE_VERSION && !res.other_incarnation ? pd__adopt_reset(sn, h, why, whylen) : 0;
    if (adopted)
        return adopted > 0 ? 0 : 1;
    snprintf(why, whylen, "a reload's %s of scene '%s' (version %" PRIu64 ") was not taken: %.120s",
             h->type == PD_JOURNAL_DROP ? "DROP" : "RESET", h->scene, h->version,
             st == PD_OK ? "the log made another version" : res.message);
    return st == PD_UNAVAILABLE ? 1 : -1;
}

/* What follows a reload's record taken: a snapshot of a RESET scene at
 * once (a replica starting later reads the map as served, not the
 * history made on the old one); a DROP's trim, and a RESET of its
 * reservations (pd_reserve_shared.h), as DropScene appends one: a scene
 * made again under the name starts with no agents on any replica. Not
 * reached: said; its agents come back if the scene is made again
 * (docs/OPERATIONS.md, "Reservations"). */
static void pd__reload_taken(pd_redis_snap *sn, const pd__held *h)
{
    pd__note_name(sn, h->scene);
    char err[256], msg[400];
    if (h->type == PD_JOURNAL_DROP && pd_reserve_shared_reset(sn->rl, h->scene, err, sizeof err) != 0 &&
        sn->o.warn) {
        snprintf(msg, sizeof msg, "a reload's RESET of the reservations of scene '%s' was not taken: %s", h->scene,
                 err);
        sn->o.warn(sn->o.warn_user, msg);
    }
}

/* Sends the held records again, oldest first, until one is not answered
 * (the change lock held). A refused one fails the log: what is served is
 * past the log, which only a restart (a replay) mends. */
static void pd__retry_held(pd_redis_snap *sn)
{
    char why[256];
    size_t done = 0;
    int rc = 0;
    for (; done < sn->n_held && (rc = pd__reload_append(sn, &sn->held[done], why, sizeof why)) == 0; done++)
        pd__reload_taken(sn, &sn->held[done]);
    if (rc < 0) {
        char msg[400];
        snprintf(msg, sizeof msg, "%s; restart pathd to replay the log", why);
        pd_redis_log_fail(sn->rl, msg);
        done = sn->n_held; /* the log refuses every change now: nothing waits for them */
    }
    memmove(sn->held, sn->held + done, (sn->n_held - done) * sizeof *sn->held);
    sn->n_held -= done;
    atomic_store(&sn->n_held_due, (int)sn->n_held);
}

/* A reload's record appended now, or held when Redis does not answer (or
 * one before it is held: the order of one scene's records is kept, and a
 * reload on the loop waits for at most one timeout). 0, or -1 with why
 * when the log refused it, or memory ran out. */
static int pd__reload_record(pd_redis_snap *sn, pd_journal_type type, const pd_scene *s, const char *scene,
                             uint64_t version, char *why, size_t whylen)
{
    pd__held h = { .type = type, .version = version };
    snprintf(h.scene, sizeof h.scene, "%s", scene);
    if (s)
        pd_redis_snap_definition_hash(s, h.def);
    pd_redis_log_unique(sn->rl, "reload-", h.key, sizeof h.key);
    int rc = 1;
    if (sn->n_held)
        snprintf(why, whylen, "a reload's record before it waits");
    else
        rc = pd__reload_append(sn, &h, why, whylen);
    if (rc == 0)
        pd__reload_taken(sn, &h);
    if (rc <= 0)
        return rc;
    if (sn->n_held == sn->cap_held) {
        size_t cap = sn->cap_held ? 2 * sn->cap_held : 8;
        pd__held *more = realloc(sn->held, cap * sizeof *more);
        if (!more) {
            snprintf(why, whylen, "out of memory holding a reload's record for Redis");
            return -1;
        }
        sn->held = more;
        sn->cap_held = cap;
    }
    sn->held[sn->n_held++] = h;
    atomic_store(&sn->n_held_due, (int)sn->n_held);
    if (sn->o.warn) {
        char msg[400];
        snprintf(msg, sizeof msg,
                 "a reload's %s of scene '%s' waits for Redis (sent again until it answers; changes of the scene "
                 "are refused UNAVAILABLE meanwhile): %.200s",
                 type == PD_JOURNAL_DROP ? "DROP" : "RESET", scene, why);
        sn->o.warn(sn->o.warn_user, msg);
    }
    return 0;
}

int pd_redis_snap_retry_held(pd_redis_snap *sn, const char *scene, char *why, size_t whylen)
{
    if (sn->n_held)
        pd__retry_held(sn);
    for (size_t i = 0; i < sn->n_held; i++)
        if (!scene || strcmp(sn->held[i].scene, scene) == 0) {
            snprintf(why, whylen,
                     "scene '%s': a reload's %s of it is not in the change log yet (Redis did not answer)",
                     sn->held[i].scene, sn->held[i].type == PD_JOURNAL_DROP ? "DROP" : "RESET");
            return 1;
        }
    return 0;
}

void pd_redis_snap_reload_end(pd_redis_snap *sn, pd_registry *r, void *state)
{
    pd_redis_snap_reload *st = state;
    char why[256] = "";
    int rc = 0;
    /* Config scenes built anew: RESET (the config's definition at the
     * version it now has), then a snapshot at once. */
    uint64_t *replaced = st->n_fresh ? calloc(st->n_fresh, sizeof *replaced) : NULL;
    size_t n_replaced = 0;
    for (size_t i = 0; i < st->n_fresh && rc == 0; i++) {
        pd_scene *now = pd_registry_acquire(r, st->fresh[i]->name);
        if (now == st->fresh[i])
            rc = pd__reload_record(sn, PD_JOURNAL_RESET, now, now->name, now->version, why, sizeof why);
        pd_scene_release(now);
        for (size_t k = 0; replaced && k < st->n_before; k++)
            if (strcmp(st->before[k]->name, st->fresh[i]->name) == 0 && st->before[k] != st->fresh[i])
                replaced[n_replaced++] = st->before[k]->lineage;
    }
    if (st->n_fresh && !replaced && rc == 0) {
        snprintf(why, sizeof why, "out of memory recording a reload");
        rc = -1;
    }
    /* Instances of a config scene it replaced: their INSTANCE records name
     * a version of the old map, so they are snapshotted too. */
    pd_scene **served = NULL;
    size_t n_served = rc == 0 ? pd_registry_list(r, &served) : 0;
    for (size_t i = 0; i < n_served; i++)
        for (size_t k = 0; served[i]->runtime && k < n_replaced; k++)
            if (served[i]->template_lineage == replaced[k])
                pd__note_name(sn, served[i]->name);
    pd_registry_release_list(served, n_served);
    free(replaced);
    /* Scenes no longer served: DROP (their history is then trimmed). */
    for (size_t i = 0; i < st->n_before && rc == 0; i++) {
        pd_scene *now = pd_registry_acquire(r, st->before[i]->name);
        if (!now)
            rc = pd__reload_record(sn, PD_JOURNAL_DROP, NULL, st->before[i]->name, st->before[i]->version, why,
                                   sizeof why);
        pd_scene_release(now);
    }
    /* Already published: a record the log refused leaves the log behind
     * what is served, which only a restart (a replay) mends. One Redis did
     * not answer is held, not lost (pd__reload_record). */
    if (rc != 0) {
        char msg[400];
        snprintf(msg, sizeof msg, "%s; restart pathd to replay the log", why);
        pd_redis_log_fail(sn->rl, msg);
    }
    pd_registry_release_list(st->fresh, st->n_fresh);
    pd_registry_release_list(st->before, st->n_before);
    free(st);
}

/* ---- reading ---------------------------------------------------------------------- */

/* HGET key field: the reply (a string or nil), or NULL with err. */
static redisReply *pd__hget(pd_redis_snap *sn, const char *key, const char *field, char *err, size_t errlen)
{
    const char *argv[] = { "HGET", key, field };
    const size_t argvlen[] = { 4, strlen(key), strlen(field) };
    int io;
    redisReply *r = pd_redis_log_command(sn->rl, 3, argv, argvlen, &io, err, errlen);
    if (r && r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_NIL) {
        snprintf(err, errlen, "HGET %s %s answered something else", key, field);
        freeReplyObject(r);
        return NULL;
    }
    return r;
}

int pd_redis_snap_fetch(pd_redis_snap *sn, const char *scene, pd_journal_record *rec, char *id, size_t idlen,
                        char *err, size_t errlen)
{
    char meta[320], snaps[320];
    snprintf(meta, sizeof meta, "%s:{%s}:meta", sn->prefix, scene);
    snprintf(snaps, sizeof snaps, "%s:{%s}:snaps", sn->prefix, scene);
    /* Two commands: a writer may forget the id read between them (it keeps
     * `keep` of them, so only after as many writes); then read again. */
    for (int t = 0; t < PD__SNAP_FETCH_TRIES; t++) {
        redisReply *newest = pd__hget(sn, meta, "snap", err, errlen);
        if (!newest)
            return -1;
        if (newest->type == REDIS_REPLY_NIL || newest->len == 0 || newest->len >= idlen) {
            freeReplyObject(newest);
            return 1;
        }
        snprintf(id, idlen, "%s", newest->str);
        freeReplyObject(newest);
        redisReply *body = pd__hget(sn, snaps, id, err, errlen);
        if (!body)
            return -1;
        if (body->type == REDIS_REPLY_NIL) {
            freeReplyObject(body);
            continue;
        }
        int rc = pd_journal_decode((const uint8_t *)body->str, body->len, rec, err, errlen);
        if (rc == 0 && (rec->type != PD_JOURNAL_SCENE || strcmp(rec->scene, scene) != 0)) {
            pd_journal_record_free(rec);
            snprintf(err, errlen, "snapshot %s of '%s' is not a SCENE record of it", id, scene);
            rc = -1;
        }
        if (rc == 0)
            atomic_fetch_add(&sn->bytes, body->len);
        freeReplyObject(body);
        return rc == 0 ? 0 : -1;
    }
    snprintf(err, errlen, "the snapshots of '%s' changed %d times while being read", scene, PD__SNAP_FETCH_TRIES);
    return -1;
}

/* HMGET of the scene's meta: its version, incarnation and whether it is
 * live; or of its stream's entry `id` (found 0: not there), its g. 0, or
 * -1 with err. */
static int pd__log_position(pd_redis_snap *sn, const char *scene, const char *id, uint64_t *v, uint64_t *inc,
                            int *found, uint64_t *g, char *err, size_t errlen)
{
    char meta[320], stream[320];
    snprintf(meta, sizeof meta, "%s:{%s}:meta", sn->prefix, scene);
    pd_redis_log_stream_key(sn->rl, scene, stream, sizeof stream);
    const char *hm[] = { "HMGET", meta, "v", "inc" };
    const size_t hmlen[] = { 5, strlen(meta), 1, 3 };
    int io;
    redisReply *r = pd_redis_log_command(sn->rl, 4, hm, hmlen, &io, err, errlen);
    if (!r)
        return -1;
    *v = *inc = 0;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
        if (r->element[0]->type == REDIS_REPLY_STRING)
            *v = strtoull(r->element[0]->str, NULL, 10);
        if (r->element[1]->type == REDIS_REPLY_STRING)
            *inc = strtoull(r->element[1]->str, NULL, 10);
    }
    freeReplyObject(r);
    const char *xr[] = { "XRANGE", stream, id, id };
    const size_t xrlen[] = { 6, strlen(stream), strlen(id), strlen(id) };
    if (!(r = pd_redis_log_command(sn->rl, 4, xr, xrlen, &io, err, errlen)))
        return -1;
    *found = 0;
    *g = 0;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 1 && r->element[0]->type == REDIS_REPLY_ARRAY &&
        r->element[0]->elements == 2) {
        const redisReply *f = r->element[0]->element[1];
        *found = 1;
        for (size_t i = 0; i + 1 < f->elements; i += 2)
            if (f->element[i]->type == REDIS_REPLY_STRING && strcmp(f->element[i]->str, "g") == 0 &&
                f->element[i + 1]->type == REDIS_REPLY_STRING)
                *g = strtoull(f->element[i + 1]->str, NULL, 10);
    }
    freeReplyObject(r);
    return 0;
}

static void pd__say(pd_redis_snap *sn, const char *fmt, const char *scene, const char *a, uint64_t v, uint64_t inc)
{
    if (!sn->o.warn)
        return;
    char msg[512];
    snprintf(msg, sizeof msg, fmt, scene, a, v, inc);
    sn->o.warn(sn->o.warn_user, msg);
}

static void pd__started(pd_redis_snap *sn, const char *scene, const char *id, const char *source)
{
    if (!sn->o.info)
        return;
    char msg[256];
    snprintf(msg, sizeof msg, "Redis log: scene '%s' starts at entry %s from %s", scene, id, source);
    sn->o.info(sn->o.warn_user, msg);
}

/* The local cache of `scene`, when the log still holds the entry it was
 * taken at, with the same global sequence (the same history): applied,
 * from set after it, 0. 1 when it is not usable (said when the log went
 * back), -1 with err. */
static int pd__start_from_cache(pd_redis_snap *sn, pd_journal_replayer *rp, const char *scene, char *from,
                                size_t fromlen, char *err, size_t errlen)
{
    pd_journal_record rec;
    char id[64], why[PD__CACHE_PATH_MAX + 64];
    uint64_t g = 0, v, inc, lg;
    int found;
    if (pd__cache_read_scene(sn, scene, &rec, id, sizeof id, &g, why, sizeof why) != 0)
        return 1;
    if (pd__log_position(sn, scene, id, &v, &inc, &found, &lg, err, errlen) != 0) {
        pd_journal_record_free(&rec);
        return -1;
    }
    unsigned long long cinc = strtoull(id, NULL, 10);
    int usable = found && lg == g;
    if (!usable && (found || cinc > inc || (cinc == inc && rec.version > v)))
        /* Newer than the log, or another history under the same id: the
         * log went back (a failover, a restore). Never served. */
        pd__say(sn,
                "Redis log: scene '%s': the local cache (data_dir) holds entry %s, which the log does not "
                "(the log is at version %" PRIu64 ", incarnation %" PRIu64 "): the log went back; the scene is "
                "rebuilt from the log",
                scene, id, v, inc);
    if (!usable)
        pd_redis_journal_discard(sn->cache, scene); /* of the same history as the cache */
    const char *bad = usable ? pd_journal_replay_one(rp, &rec, why, sizeof why) : NULL;
    pd_journal_record_free(&rec);
    if (!usable)
        return 1; /* trimmed past, or gone back: the log's snapshot */
    if (bad) {
        snprintf(err, errlen, "the local cache of scene '%s' does not apply: %s", scene, bad);
        return -1;
    }
    snprintf(from, fromlen, "(%s", id);
    atomic_fetch_add(&sn->from_cache, 1);
    pd__started(sn, scene, id, "the local cache");
    return 0;
}

/* After the scene started at entry from+1 ("(INC-V"), the local journal's
 * records that continue it version by version: when the log still holds
 * the last of them with the same g (the same history), they are applied
 * and from moves to it, so the stream is read only after it. A journal
 * whose last entry the log does not hold (the log went back, or trimmed
 * past it) is said and discarded: the stream gives the rest. 0, or -1
 * with err (Redis). */
static int pd__replay_local_journal(pd_redis_snap *sn, pd_journal_replayer *rp, const char *scene, char *from,
                                    size_t fromlen, char *err, size_t errlen)
{
    unsigned long long inc, ver;
    if (sscanf(from, "(%llu-%llu", &inc, &ver) != 2)
        return 0;
    pd_redis_journal_entry *e = NULL;
    size_t n = 0, first = 0, use = 0;
    if (pd_redis_journal_read(sn->cache, scene, &e, &n) != 0)
        return 0; /* out of memory: the stream has it all */
    while (first < n && e[first].rec.version <= ver)
        first++; /* covered by the snapshot */
    for (uint64_t v = ver; first + use < n; use++) {
        const pd_redis_journal_entry *x = &e[first + use];
        char want[64];
        snprintf(want, sizeof want, "%llu-%" PRIu64, inc, v + 1);
        if (x->rec.version != v + 1 || strcmp(x->id, want) != 0 || strcmp(x->rec.scene, scene) != 0)
            break; /* a gap, or another incarnation: the stream from here */
        v++;
    }
    int rc = 0;
    if (use > 0) {
        const pd_redis_journal_entry *last = &e[first + use - 1];
        uint64_t lv, linc, lg;
        int found;
        if (pd__log_position(sn, scene, last->id, &lv, &linc, &found, &lg, err, errlen) != 0) {
            rc = -1;
        } else if (!found || lg != last->g) {
            pd__say(sn,
                    "Redis log: scene '%s': the local journal (data_dir) holds entry %s, which the log does not "
                    "(the log is at version %" PRIu64 ", incarnation %" PRIu64 "): the journal is discarded, the "
                    "stream read from the snapshot",
                    scene, last->id, lv, linc);
            pd_redis_journal_discard(sn->cache, scene);
        } else {
            size_t applied = 0;
            char why[256];
            for (; applied < use; applied++)
                if (pd_journal_replay_one(rp, &e[first + applied].rec, why, sizeof why) != NULL)
                    break; /* the stream has it and what follows */
            if (applied > 0) {
                snprintf(from, fromlen, "(%s", e[first + applied - 1].id);
                if (sn->o.info) {
                    char msg[320];
                    snprintf(msg, sizeof msg,
                             "Redis log: scene '%s': %zu entries from the local journal; the stream is read after "
                             "entry %s",
                             scene, applied, e[first + applied - 1].id);
                    sn->o.info(sn->o.warn_user, msg);
                }
                atomic_fetch_add(&sn->from_journal, applied);
            }
        }
    }
    pd_redis_journal_free(e, n);
    return rc;
}

static int pd__start_snapshot(pd_redis_snap *sn, pd_journal_replayer *rp, const char *scene, char *from,
                              size_t fromlen, char *err, size_t errlen);

int pd_redis_snap_start(pd_redis_snap *sn, pd_journal_replayer *rp, const char *scene, char *from, size_t fromlen,
                        char *err, size_t errlen)
{
    if (pd__start_snapshot(sn, rp, scene, from, fromlen, err, errlen) != 0)
        return -1;
    return sn->cache[0] && from[0] == '(' ? pd__replay_local_journal(sn, rp, scene, from, fromlen, err, errlen) : 0;
}

/* The cache, else Redis's newest snapshot, else nothing (from untouched). */
static int pd__start_snapshot(pd_redis_snap *sn, pd_journal_replayer *rp, const char *scene, char *from,
                              size_t fromlen, char *err, size_t errlen)
{
    int rc = sn->cache[0] ? pd__start_from_cache(sn, rp, scene, from, fromlen, err, errlen) : 1;
    if (rc <= 0)
        return rc;
    pd_journal_record rec;
    char id[64], why[256];
    int got = pd_redis_snap_fetch(sn, scene, &rec, id, sizeof id, err, errlen);
    if (got != 0)
        return got < 0 ? -1 : 0;
    const char *bad = pd_journal_replay_one(rp, &rec, why, sizeof why);
    pd_journal_record_free(&rec);
    if (bad) {
        snprintf(err, errlen, "the snapshot %s of scene '%s' does not apply: %s", id, scene, bad);
        return -1;
    }
    snprintf(from, fromlen, "(%s", id);
    atomic_fetch_add(&sn->from_redis, 1);
    pd__started(sn, scene, id, "its snapshot in Redis");
    return 0;
}

/* The scene name a cache file's name spells in hex, or -1. */
static int pd__unhex(const char *file, char *name, size_t len)
{
    size_t n = strlen(file);
    if (n == 0 || n % 2 || n / 2 >= len)
        return -1;
    for (size_t i = 0; i < n; i += 2) {
        unsigned v;
        if (sscanf(file + i, "%2x", &v) != 1 || v == 0)
            return -1;
        name[i / 2] = (char)v;
    }
    name[n / 2] = '\0';
    return 0;
}

int pd_redis_snap_check_cache(pd_redis_snap *sn, char *err, size_t errlen)
{
    if (!sn->cache[0])
        return 0;
    DIR *d = pd_open_dir(sn->cache);
    if (!d) {
        snprintf(err, errlen, "Redis log cache %s: %s", sn->cache, strerror(errno));
        return -1;
    }
    char scenes[96];
    snprintf(scenes, sizeof scenes, "%s:scenes", sn->prefix);
    int rc = 0;
    for (struct dirent *e; rc == 0 && (e = readdir(d)) != NULL;) {
        char name[PD_CONF_MAX_NAME];
        if (pd__unhex(e->d_name, name, sizeof name) != 0)
            continue; /* lock, ".tmp" files, "." */
        const char *argv[] = { "SISMEMBER", scenes, name };
        const size_t argvlen[] = { 9, strlen(scenes), strlen(name) };
        int io;
        redisReply *r = pd_redis_log_command(sn->rl, 3, argv, argvlen, &io, err, errlen);
        if (!r) {
            rc = -1;
            break;
        }
        int known = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
        freeReplyObject(r);
        if (known)
            continue;
        if (sn->o.warn) {
            char msg[256];
            snprintf(msg, sizeof msg,
                     "Redis log: scene '%s': the local cache (data_dir) holds it, the log has no record of it: "
                     "the log went back; its cache is removed, the scene is not served",
                     name);
            sn->o.warn(sn->o.warn_user, msg);
        }
        char path[PD__CACHE_PATH_MAX];
        pd__cache_path(sn, name, "", path, sizeof path);
        unlink(path);
    }
    closedir(d);
    return rc;
}

void pd_redis_snap_starts(pd_redis_snap *sn, uint64_t *from_cache, uint64_t *from_redis)
{
    *from_cache = atomic_load(&sn->from_cache);
    *from_redis = atomic_load(&sn->from_redis);
}

uint64_t pd_redis_snap_bytes(pd_redis_snap *sn)
{
    return atomic_load(&sn->bytes);
}

void pd_redis_snap_set_rebuild_pause(pd_redis_snap *sn, void (*fn)(void *user), void *user)
{
    sn->rebuild_pause = fn;
    sn->rebuild_pause_user = user;
}

/* ---- the log's hooks ------------------------------------------------------------------ */

static void pd__hook_note(void *user, const pd_journal_record *rec)
{
    pd_redis_snap_note(user, rec);
}

static int pd__hook_due(void *user)
{
    return pd_redis_snap_due(user);
}

static int pd__hook_write_due(void *user, pd_registry *r, char *err, size_t errlen)
{
    return pd_redis_snap_write_due(user, r, err, errlen);
}

static int pd__hook_start(void *user, pd_journal_replayer *rp, const char *scene, char *from, size_t fromlen,
                          char *err, size_t errlen)
{
    return pd_redis_snap_start(user, rp, scene, from, fromlen, err, errlen);
}

static int pd__hook_after_replay(void *user, char *err, size_t errlen)
{
    return pd_redis_snap_check_cache(user, err, errlen);
}

static void *pd__hook_reload_begin(void *user, pd_registry *r, const pd_scene_set *set)
{
    return pd_redis_snap_reload_begin(user, r, set);
}

static void pd__hook_reload_end(void *user, pd_registry *r, void *state)
{
    pd_redis_snap_reload_end(user, r, state);
}

static int pd__hook_held(void *user, const char *scene, char *why, size_t whylen)
{
    return pd_redis_snap_retry_held(user, scene, why, whylen);
}

static uint64_t pd__hook_bytes(void *user)
{
    return pd_redis_snap_bytes(user);
}

static void pd__hook_destroy(void *user)
{
    pd_redis_snap_destroy(user);
}

static const pd_redis_log_hooks PD__HOOKS = {
    .note = pd__hook_note,
    .due = pd__hook_due,
    .write_due = pd__hook_write_due,
    .start = pd__hook_start,
    .after_replay = pd__hook_after_replay,
    .reload_begin = pd__hook_reload_begin,
    .reload_end = pd__hook_reload_end,
    .held = pd__hook_held,
    .bytes = pd__hook_bytes,
    .destroy = pd__hook_destroy,
};

void pd_redis_snap_attach(pd_redis_snap *sn)
{
    pd_redis_log_set_snapshots(sn->rl, &PD__HOOKS, sn);
}

/* ---- a scene rebuilt from the log ---------------------------------------------- */

/* The command's reply, never an error one (NULL with err). */
static redisReply *pd__cmd(pd_redis_snap *sn, int argc, const char **argv, char *err, size_t errlen)
{
    size_t argvlen[8];
    for (int i = 0; i < argc; i++)
        argvlen[i] = strlen(argv[i]);
    int io;
    return pd_redis_log_command(sn->rl, argc, argv, argvlen, &io, err, errlen);
}

/* The config scene served as `name` as the config defined it: its
 * authored cells at version 1 (what its stream's first update was made
 * on), applied with rp. 0, or -1 with err. */
static int pd__put_config_base(pd_journal_replayer *rp, const pd_scene *cur, char *err, size_t errlen)
{
    pd_journal_record base;
    if (pd_journal_scene_record(cur, &base) != 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (base.authored) {
        free(base.cells);
        base.cells = base.authored;
        base.authored = NULL;
    }
    base.version = 1;
    char why[256];
    const char *bad = pd_journal_replay_one(rp, &base, why, sizeof why);
    pd_journal_record_free(&base);
    if (bad) {
        snprintf(err, errlen, "the config's definition of '%s' does not apply: %s", cur->name, bad);
        return -1;
    }
    return 0;
}

/* Applies the stream's entries from `from` (an XRANGE start: "-" or
 * "(ID") on, in order; *n counts them, and from ends as "(ID" of the last
 * one applied (as it was when none). 0, or -1 with err. */
static int pd__replay_stream(pd_redis_snap *sn, pd_journal_replayer *rp, const char *key, char *from,
                             size_t fromlen, size_t *n, char *err, size_t errlen)
{
    char *start = from;
    for (;;) {
        const char *argv[] = { "XRANGE", key, start, "+", "COUNT", "1000" };
        redisReply *x = pd__cmd(sn, 6, argv, err, errlen);
        if (!x)
            return -1;
        int rc = x->type == REDIS_REPLY_ARRAY ? 0 : -1;
        if (rc)
            snprintf(err, errlen, "XRANGE %s answered something else", key);
        for (size_t i = 0; rc == 0 && i < x->elements; i++) {
            const redisReply *e = x->element[i];
            const redisReply *f = e->type == REDIS_REPLY_ARRAY && e->elements == 2 ? e->element[1] : NULL;
            const redisReply *body = NULL;
            for (size_t k = 0; f && f->type == REDIS_REPLY_ARRAY && k + 1 < f->elements; k += 2)
                if (f->element[k]->type == REDIS_REPLY_STRING && strcmp(f->element[k]->str, "r") == 0)
                    body = f->element[k + 1];
            pd_journal_record rec;
            char why[256];
            if (!body || body->type != REDIS_REPLY_STRING ||
                pd_journal_decode((const uint8_t *)body->str, body->len, &rec, why, sizeof why) != 0) {
                snprintf(err, errlen, "entry %s of %s does not decode", e->element[0]->str, key);
                rc = -1;
                break;
            }
            const char *bad = pd_journal_replay_one(rp, &rec, why, sizeof why);
            pd_journal_record_free(&rec);
            if (bad) {
                snprintf(err, errlen, "entry %s of %s does not apply: %s", e->element[0]->str, key, bad);
                rc = -1;
                break;
            }
            snprintf(start, fromlen, "(%s", e->element[0]->str);
            (*n)++;
        }
        size_t got = x->elements;
        freeReplyObject(x);
        if (rc != 0 || got < 1000)
            return rc;
    }
}

int pd_redis_snap_rebuild(pd_redis_snap *sn, pd_journal_replayer *rp, pd_registry *r, const char *name,
                          char *last_id, size_t idlen, uint64_t *version, char *err, size_t errlen)
{
    char key[320];
    pd_redis_log_stream_key(sn->rl, name, key, sizeof key);
    snprintf(last_id, idlen, "0-0");
    *version = 0;
    /* Where the stream ends before anything is read: the tail reads on
     * after it (entries made meanwhile come again through it, and are had). */
    const char *argv[] = { "XREVRANGE", key, "+", "-", "COUNT", "1" };
    redisReply *x = pd__cmd(sn, 6, argv, err, errlen);
    if (!x)
        return -1;
    if (x->type == REDIS_REPLY_ARRAY && x->elements == 1 && x->element[0]->type == REDIS_REPLY_ARRAY &&
        x->element[0]->elements == 2 && x->element[0]->element[0]->type == REDIS_REPLY_STRING)
        snprintf(last_id, idlen, "%s", x->element[0]->element[0]->str);
    freeReplyObject(x);

    pd_journal_record snap;
    char id[64], from[72] = "-", why[256];
    int got = pd_redis_snap_fetch(sn, name, &snap, id, sizeof id, err, errlen);
    if (got < 0)
        return -1;
    /* What follows puts the scene and replays its stream without the
     * change lock, which it cannot take: the lock order is a scene's
     * writer lock, then the change lock (an update takes it to append),
     * and replaying an update takes the writer lock. Nothing else changes
     * the scene meanwhile: the replica's tail reads none of its entries
     * while it is refused, and the log refuses this pathd's own appends
     * of it until the replica clears the refusal after the rebuild
     * (pd_redis_log_set_refused), so a change queued in its lane before
     * the refusal is answered UNAVAILABLE. Before that mark such a change
     * run here (the pause below lets a test run one) was built on the
     * history left behind and appended - a log with no record of the
     * scene takes any version -, answered OK, then undone by the put
     * below, and its entry made every rebuild fail (a GAP): the scene
     * refused for good (test_change_queued_during_a_rebuild_is_refused).
     * Readers would see the versions go down to the log's and up again:
     * the scene is refused to them too (pd__replica_refuses). */
    if (sn->rebuild_pause)
        sn->rebuild_pause(sn->rebuild_pause_user);
    pd_scene *cur = pd_registry_acquire(r, name);
    int runtime = cur && cur->runtime, rc = 0;
    if (got == 0) {
        const char *bad = pd_journal_replay_one(rp, &snap, why, sizeof why);
        pd_journal_record_free(&snap);
        if (bad) {
            snprintf(err, errlen, "the snapshot %s of '%s' does not apply: %s", id, name, bad);
            rc = -1;
        }
        snprintf(from, sizeof from, "(%s", id);
    } else if (cur && !runtime) {
        rc = pd__put_config_base(rp, cur, err, errlen);
    }
    pd_scene_release(cur);
    size_t n = 0;
    if (rc == 0)
        rc = pd__replay_stream(sn, rp, key, from, sizeof from, &n, err, errlen);
    if (rc != 0)
        return -1;
    /* What is served of it now is the log's through the last entry read
     * (a snapshot's, or none: not known), the incarnation its appends
     * name (pd_redis_log_served_entry); the tail's entries after it that
     * this rebuild read already are had, and note nothing. */
    pd_redis_log_served_entry(sn->rl, name, from[0] == '(' ? from + 1 : NULL);
    if (got != 0 && n == 0 && runtime) {
        /* A scene made at run time that the log has no record of at all
         * (it went back past its creation): not the log's, so dropped. */
        pd_journal_record drop = { .type = PD_JOURNAL_DROP };
        snprintf(drop.scene, sizeof drop.scene, "%s", name);
        if (pd_journal_replay_one(rp, &drop, why, sizeof why) != NULL) {
            snprintf(err, errlen, "dropping '%s': %s", name, why);
            return -1;
        }
    }
    pd_scene *now = pd_registry_acquire(r, name);
    *version = now ? now->version : 0;
    pd_scene_release(now);
    return 0;
}
