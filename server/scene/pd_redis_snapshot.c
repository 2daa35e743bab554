/*
 * pd_redis_snapshot.c - scene snapshots in Redis and the streams' trim
 * (see pd_redis_snapshot.h for the keys, the FUNCTION and who writes).
 * Commands run on the change log's own connection
 * (pd_redis_log_command), so a reconnect there serves both.
 */
#include "pd_redis_snapshot.h"

#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* KEYS: stream, meta, snaps. ARGV: the version, how many to keep, the
 * record. Answers {status, id, oldest kept}: OK, HAVE (that id or a newer
 * one is the newest already), GONE (no live incarnation), NOENTRY (the
 * stream has no entry INC-V: not a version the log made, or trimmed). */
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
    "  if m[2] ~= '1' then return {'GONE', '', ''} end\n"
    "  local id = string.format('%d-%d', tonumber(m[1]) or 0, v)\n"
    "  local list = {}\n"
    "  for s in string.gmatch(m[3] or '', '%S+') do table.insert(list, s) end\n"
    "  if #list > 0 and not older(list[#list], id) then return {'HAVE', list[#list], list[1]} end\n"
    "  if #redis.call('XRANGE', stream, id, id) == 0 then return {'NOENTRY', id, ''} end\n"
    "  redis.call('HSET', snaps, id, record)\n"
    "  table.insert(list, id)\n"
    "  while #list > keep do redis.call('HDEL', snaps, table.remove(list, 1)) end\n"
    "  redis.call('HSET', meta, 'snap', id, 'snaps', table.concat(list, ' '))\n"
    "  -- every version below the oldest kept snapshot is covered by it\n"
    "  redis.call('XTRIM', stream, 'MINID', list[1])\n"
    "  return {'OK', id, list[1]}\n"
    "end\n"
    "redis.register_function('pathd_snapshot', snapshot)\n";

/* Scenes noted at once before a write (more are noted on the next note). */
#define PD__SNAP_PENDING_MAX 256
/* Scenes a too-big warning is remembered for (logged once each). */
#define PD__SNAP_WARNED_MAX 64
/* Reads of a snapshot whose id a writer forgot between the two commands. */
#define PD__SNAP_FETCH_TRIES 3

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
};

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
    snprintf(sn->prefix, sizeof sn->prefix, "%s", pd_redis_log_prefix(rl));
    pthread_mutex_init(&sn->lock, NULL);
    return sn;
}

void pd_redis_snap_destroy(pd_redis_snap *sn)
{
    if (!sn)
        return;
    pthread_mutex_destroy(&sn->lock);
    free(sn->pending);
    free(sn->warned);
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
    pd_redis_log_set_snapshots(rl, sn);
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

void pd_redis_snap_note(pd_redis_snap *sn, const pd_journal_record *rec)
{
    int due = rec->type == PD_JOURNAL_INSTANCE ||
              ((rec->type == PD_JOURNAL_UPDATE || rec->type == PD_JOURNAL_RESET) && rec->version % sn->o.every == 0);
    if (!due)
        return;
    pthread_mutex_lock(&sn->lock);
    pd__list_add(sn->pending, &sn->n_pending, PD__SNAP_PENDING_MAX, rec->scene);
    atomic_store(&sn->n_due, (int)sn->n_pending);
    pthread_mutex_unlock(&sn->lock);
}

int pd_redis_snap_due(pd_redis_snap *sn)
{
    return atomic_load(&sn->n_due) > 0;
}

/* ---- writing -------------------------------------------------------------------- */

/* FCALL pathd_snapshot, loading the library once when Redis does not have
 * it (first use, or a Redis restarted without its data). */
static redisReply *pd__fcall(pd_redis_snap *sn, const char *scene, uint64_t version, const uint8_t *payload,
                             size_t len, char *err, size_t errlen)
{
    char stream[320], meta[320], snaps[320], v[24], keep[16];
    pd_redis_log_stream_key(sn->rl, scene, stream, sizeof stream);
    snprintf(meta, sizeof meta, "%s:{%s}:meta", sn->prefix, scene);
    snprintf(snaps, sizeof snaps, "%s:{%s}:snaps", sn->prefix, scene);
    snprintf(v, sizeof v, "%" PRIu64, version);
    snprintf(keep, sizeof keep, "%" PRIu32, sn->o.keep);
    const char *argv[] = { "FCALL", "pathd_snapshot", "3", stream, meta, snaps, v, keep, (const char *)payload };
    size_t argvlen[9];
    for (int i = 0; i < 8; i++)
        argvlen[i] = strlen(argv[i]);
    argvlen[8] = len;
    for (int attempt = 0;; attempt++) {
        int io;
        redisReply *r = pd_redis_log_command(sn->rl, 9, argv, argvlen, &io, err, errlen);
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

int pd_redis_snap_write(pd_redis_snap *sn, const pd_scene *s, pd_redis_snap_outcome *out, char *err,
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
    redisReply *r = pd__fcall(sn, s->name, s->version, framed + PD_JOURNAL_HEADER_BYTES, plen, err, errlen);
    free(framed);
    if (!r)
        return -1;
    int rc = 0;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 || r->element[0]->type != REDIS_REPLY_STRING) {
        snprintf(err, errlen, "Redis snapshot of '%s': pathd_snapshot answered something else", s->name);
        rc = -1;
    } else if (strcmp(r->element[0]->str, "OK") == 0) {
        *out = PD_REDIS_SNAP_WRITTEN;
        atomic_fetch_add(&sn->bytes, plen);
    } else if (strcmp(r->element[0]->str, "HAVE") == 0) {
        *out = PD_REDIS_SNAP_HELD;
    } else {
        *out = PD_REDIS_SNAP_NOT_IN_LOG;
    }
    freeReplyObject(r);
    return rc;
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
        pd_scene *s = pd_registry_acquire(r, names[i]);
        pd_redis_snap_outcome out;
        if (s)
            rc = pd_redis_snap_write(sn, s, &out, err, errlen);
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

uint64_t pd_redis_snap_bytes(pd_redis_snap *sn)
{
    return atomic_load(&sn->bytes);
}
