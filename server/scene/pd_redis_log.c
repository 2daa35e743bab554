/*
 * pd_redis_log.c - the change log on Redis Streams (see pd_redis_log.h for
 * the keys, the FUNCTION and the layering). hiredis speaks RESP; this file
 * only builds the commands and reads their replies.
 *
 * Snapshots in Redis, the streams' trim and a reload's records are
 * pd_redis_snapshot.c's, attached with pd_redis_log_set_snapshots (the
 * server always attaches them; without them snapshot refuses, nothing is
 * trimmed, and a reload that rebuilds or removes scenes fails the log
 * rather than record something a replica would replay wrongly).
 *
 * The replica's tail (server/net/pd_replica.c) reads the streams on its
 * own connection; this file reconnects with a jittered backoff
 * (PD_REDIS_BACKOFF_MIN_MS .. _MAX_MS).
 */
#include "pd_redis_log.h"

#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* The FUNCTION library, loaded with FUNCTION LOAD REPLACE at every
 * connect (a Redis restarted without its data has none). KEYS: stream,
 * meta, dedup (meta again when there is no key), seq, scenes, and the
 * scene's reservation stream (pd_reserve_shared.c's; this pathd always
 * passes it, an older one passes only the first five: its answer's top
 * is then "0-0", which an older caller ignores), and the key's INC (the
 * incarnation of the entry its change made, kept beside the key for as
 * long; meta again when there is no key; an older pathd passes six: none
 * kept, none answered).
 * ARGV: op (next|new|drop), expected ("" none), the NEW version, "1" when
 * a key is given, its TTL, the scene's name, the record, this append's
 * tag, the tag the scene's last append must have ("" none), "1" to have
 * the entry's id answered, and the incarnation (INC) the caller's scene
 * is of ("" not known: versions alone), and the hash of the scene's
 * definition a reload's RESET names ("" none: kept in the entry as field
 * d; pd_redis_snapshot.c reads it when two replicas reloaded the same
 * config at once). Answers {status, version}: OK,
 * DUP (the key's first version; {DUP, version, INC} when the key's INC
 * is kept: the same version on another incarnation is another change,
 * pd__rl_judge tells them apart), STALE (the log's version; {STALE,
 * version, INC} when the incarnation is not the caller's: "0" when none
 * is live), CHAIN (the last
 * append is not the one named: the log's version), EXISTS, GONE. The
 * dedup check comes first, so a retry of a change that went through is
 * answered, not refused as stale. An append answered OK is {OK, version,
 * top, id}: top is the reservation stream's last entry id then ("0-0":
 * none; a trim keeps the snapshot's own entry, so only a stream never
 * written): UpdateCells' cut of the reservations needs its table caught
 * up to that entry, and without it read one XRANGE more per update
 * (pd_redis_log_resv_top); id is the append's own entry id (the store's
 * tail tells by it the entries this pathd's own new scenes and drops made
 * stale: pd_redis_log_own_past), only when the tenth ARGV asks for it:
 * during a rolling upgrade an older pathd (which takes 2..3 elements)
 * shares the library, whichever loaded it last, and must go on working;
 * an answer with no id (an older library) leaves no mark.
 *
 * The incarnation (the eleventh ARGV) closes what versions alone leave
 * open: they restart at 1 on a new scene, so a replica still serving the
 * name's older incarnation at version v (its tail behind another
 * replica's drop and new scene) would append its update onto the new one
 * once that reached v too, and its drop would end it. The caller names
 * the INC of the entries its scene came from (pd_redis_log_served_entry
 * keeps it per scene; an older pathd sends none and is checked by
 * versions alone, as before).
 *
 * pathd_append_of is the same function under a new name: this pathd
 * calls it, so a Redis holding an older pathd's library (loaded over this
 * one in a rolling upgrade: it keeps no key's INC) answers "not found"
 * and this pathd loads its own again (pd_redis_log_append_many);
 * pathd_append stays for the older pathd.
 *
 * The tags chain the appends of one pipeline (pd_redis_log_append_many):
 * each record after the first was built on the one before it, so it may
 * be appended only right after that one. A version check alone would let
 * it through after another replica's record took that version (the log
 * at the expected version, but not by this replica's record): the tag
 * refuses it, and so every later record of the pipeline. */
static const char PD__LIBRARY[] =
    "#!lua name=pathd\n"
    "local function append(keys, args)\n"
    "  local stream, meta, dedup, seq, scenes = keys[1], keys[2], keys[3], keys[4], keys[5]\n"
    "  local op, expected, made, keyed, ttl, scene, record, tag, after, want_id, want_inc, def =\n"
    "    args[1], args[2], args[3], args[4], args[5], args[6], args[7], args[8] or '', args[9] or '',\n"
    "    args[10] or '', args[11] or '', args[12] or ''\n"
    "  local kinc = keys[7] -- the key's INC (an older caller passes none)\n"
    "  if keyed == '1' then\n"
    "    local seen = redis.call('GET', dedup)\n"
    "    if seen then\n"
    "      local at = kinc and redis.call('GET', kinc)\n"
    "      if at and op == 'new' then -- a create's key names the live INC too ('0': not live)\n"
    "        local lm = redis.call('HMGET', meta, 'inc', 'live')\n"
    "        return {'DUP', seen, at, lm[2] == '1' and (lm[1] or '0') or '0'}\n"
    "      end\n"
    "      if at then return {'DUP', seen, at} end -- an older caller ignores a 3rd\n"
    "      return {'DUP', seen}\n"
    "    end\n"
    "  end\n"
    "  local m = redis.call('HMGET', meta, 'v', 'inc', 'live', 'tag')\n"
    "  local cur, inc, live = tonumber(m[1]) or 0, tonumber(m[2]) or 0, m[3] == '1'\n"
    "  if after ~= '' and m[4] ~= after then return {'CHAIN', tostring(cur)} end\n"
    "  local want = tonumber(expected)\n"
    "  -- the incarnation the caller's scene is of ('' not known: versions alone):\n"
    "  -- another one (versions restart at a new scene), or an update of one a\n"
    "  -- drop ended, lost a race too (version 0: no live one to wait for)\n"
    "  if want_inc ~= '' and ((live and op ~= 'new' and tonumber(want_inc) ~= inc) or\n"
    "                         (not live and op == 'next')) then\n"
    "    return {'STALE', live and tostring(cur) or '0', string.format('%d', inc)}\n"
    "  end\n"
    "  local v, id\n"
    "  if op == 'next' then\n"
    "    if live then\n"
    "      if want and want ~= cur then return {'STALE', tostring(cur)} end\n"
    "      v = cur + 1\n"
    "    else\n"
    "      -- no live record of the scene (a config scene as loaded, or one\n"
    "      -- back after a drop): it goes on from the version the caller has\n"
    "      inc = inc + 1\n"
    "      v = (want or 0) + 1\n"
    "    end\n"
    "    id = string.format('%d-%d', inc, v)\n"
    "  elseif op == 'new' then\n"
    "    if live then return {'EXISTS', tostring(cur)} end\n"
    "    inc = inc + 1\n"
    "    v = tonumber(made)\n"
    "    id = string.format('%d-%d', inc, v)\n"
    "  elseif op == 'drop' then\n"
    "    if not live then return {'GONE', tostring(cur)} end\n"
    "    if want and want ~= cur then return {'STALE', tostring(cur)} end\n"
    "    v = cur\n"
    "    inc = inc + 1\n"
    "    id = string.format('%d-0', inc)\n"
    "  else\n"
    "    return redis.error_reply('pathd_append: unknown op ' .. tostring(op))\n"
    "  end\n"
    "  local g = redis.call('INCR', seq)\n"
    "  if def ~= '' then -- a reload's RESET: the hash of the definition it names\n"
    "    redis.call('XADD', stream, id, 'v', string.format('%d', v), 'g', g, 'r', record, 'd', def)\n"
    "    -- and in meta, which outlives the entry's trim (pd__adopt_reset): the\n"
    "    -- last 8, newest first (a later reload's must not hide one a replica\n"
    "    -- still holds)\n"
    "    local kept = {id .. ' ' .. def}\n"
    "    for pair in string.gmatch(redis.call('HGET', meta, 'rdefs') or '', '[^ ]+ [^ ]+') do\n"
    "      if #kept >= 8 then break end\n"
    "      kept[#kept + 1] = pair\n"
    "    end\n"
    "    redis.call('HSET', meta, 'rdefs', table.concat(kept, ' '))\n"
    "  else\n"
    "    redis.call('XADD', stream, id, 'v', string.format('%d', v), 'g', g, 'r', record)\n"
    "  end\n"
    "  redis.call('HSET', meta, 'v', string.format('%d', v), 'inc', string.format('%d', inc),\n"
    "             'live', op == 'drop' and '0' or '1', 'tag', tag)\n"
    "  if not live then redis.call('SADD', scenes, scene) end -- a live one is in it\n"
    "  if keyed == '1' then\n"
    "    redis.call('SET', dedup, string.format('%d', v), 'EX', ttl)\n"
    "    if kinc then redis.call('SET', kinc, string.format('%d', inc), 'EX', ttl) end\n"
    "  end\n"
    "  -- an older pathd passes 5 keys: no top for it (asked only after the XADD\n"
    "  -- so the check cannot fail once the append is made)\n"
    "  local top = keys[6] and redis.call('XREVRANGE', keys[6], '+', '-', 'COUNT', 1) or {}\n"
    "  local ok = {'OK', string.format('%d', v), top[1] and top[1][1] or '0-0'}\n"
    "  if want_id == '1' then ok[4] = id end -- asked for: an older caller takes 2..3 elements\n"
    "  return ok\n"

    "end\n"
    "redis.register_function('pathd_append', append)\n"
    "redis.register_function('pathd_append_of', append)\n";

/* Entries one XRANGE asks for. */
#define PD__RANGE_COUNT 500

/* Scenes whose reservation stream's top the last append answered
 * (pd_redis_log_resv_top): a few, replaced in turn; a scene not here costs
 * its cut one XRANGE, as before. */
#define PD__RESV_TOPS 64

/* A scene's own mark (pd_redis_log_own_past): the entry id of this
 * pathd's last new incarnation or drop of it that the log took. */
typedef pd_redis_own_mark pd__own_mark;

/* The incarnation what this pathd serves of a scene is of (the INC of its
 * entries: pd_redis_log_served_entry). */
typedef struct pd__own_inc {
    char scene[PD_CONF_MAX_NAME];
    uint64_t inc;
} pd__own_inc;

/* A table of per-scene entries, each opening with the scene's name
 * (char[PD_CONF_MAX_NAME]): the marks and the incarnations. The entries
 * are packed in v (a drop moves the last into its place); slots index
 * them by the name's hash (open addressing, linear probing, deletion by
 * backward shift, so no tombstones): the incarnations hold every scene
 * with a known INC (up to limits.max_scenes), looked up per append, per
 * tail record and per stream on replay, under mark_lock - a linear scan
 * made replay quadratic in the scenes. */
typedef struct pd__named {
    unsigned char *v;
    size_t n, cap, size;          /* size: one entry's bytes */
    size_t *slots;                /* an entry's index + 1, 0 empty */
    size_t n_slots;               /* a power of two, above 2 * n (0: none yet) */
} pd__named;

typedef struct pd__resv_top {
    char scene[PD_CONF_MAX_NAME];
    uint64_t top;                 /* the last entry's version (entry id "0-V") */
} pd__resv_top;

/* Where replay left a scene's stream: the id of its last entry. */
typedef struct pd__position {
    char scene[PD_CONF_MAX_NAME];
    char id[64];
} pd__position;

struct pd_redis_log {
    char host[256];
    uint16_t port;
    uint32_t timeout_ms;
    char prefix[64];
    uint32_t dedup_ttl_s;
    void (*warn)(void *user, const char *msg);
    void *warn_user;

    pthread_mutex_t lock;         /* the change lock (pd_changelog_ops.lock) */
    pthread_mutex_t conn_lock;    /* guards conn: appends and tails take turns */
    redisContext *conn;           /* NULL: not connected (made by the next command) */
    atomic_int failed;            /* final: the log refuses changes */
    pd_status refusal;            /* the last refused append's (under lock) */
    uint64_t dup_version;         /* the last refused append's key made this version (under lock) */
    uint64_t raced_version;       /* the last refused append lost to another replica's: the
                                     log's version then, else 0 (under lock) */
    char why[256];                /* why the last append refused, or why it failed */
    atomic_uint_fast64_t bytes;   /* record bytes replayed and appended */
    atomic_int tailed;            /* a replica's tail brings this pathd up to the log */
    uint64_t tag_base;            /* this log's part of every append's tag (random) */
    atomic_uint_fast64_t tag_next;

    /* Reconnects (conn_lock): after a failed connect, commands fail at
     * once until next_try_us, then one connect is tried; the wait doubles
     * from PD_REDIS_BACKOFF_MIN_MS to PD_REDIS_BACKOFF_MAX_MS, jittered. */
    uint64_t next_try_us;
    uint32_t backoff_ms;          /* 0: the last connect succeeded (or none yet) */
    int ever_connected;
    unsigned rand_state;
    atomic_uint_fast64_t reconnects, connect_failures, appends, append_us, append_fails;
    atomic_int connected;

    pthread_mutex_t resv_lock;    /* guards resv_tops */
    pd__resv_top resv_tops[PD__RESV_TOPS];
    size_t n_resv_tops, next_resv_top;

    pthread_mutex_t mark_lock;    /* guards marks: appends write, the tail reads */
    pd__named marks;              /* pd__own_mark, one per scene this pathd made or dropped
                                     whose entry the tail has not read yet (pd_redis_log_own_past
                                     forgets it then): found by hash, per tail entry */
    pd__named incs;               /* (mark_lock) pd__own_inc, per scene the incarnation (INC)
                                     what this pathd serves of it is of, when known: every
                                     append of it names it (the FUNCTION's eleventh ARGV);
                                     found by hash, per append, tail record and replayed stream */
    atomic_int no_id_said;        /* an OK answer with no entry id was logged (once) */
    char (*refused)[PD_CONF_MAX_NAME];   /* (mark_lock) scenes the replica refuses until
                                            rebuilt (pd_redis_log_set_refused): few */
    size_t n_refused, cap_refused;
    void (*append_pause)(void *user);   /* tests: pd_redis_log_set_append_pause */
    void *append_pause_user;

    pthread_mutex_t pos_lock;     /* guards pos: replay writes, the tail reads */
    pd__position *pos;
    size_t n_pos, cap_pos;
    const pd_redis_log_hooks *snap;   /* snapshots in Redis (pd_redis_snapshot.h), or NULL */
    void *snap_user;
};

/* ---- keys ------------------------------------------------------------------ */

void pd_redis_log_stream_key(const pd_redis_log *rl, const char *scene, char *buf, size_t len)
{
    snprintf(buf, len, "%s:{%s}:log", rl->prefix, scene);
}

/* ---- the connection --------------------------------------------------------- */

/* Drops the connection (conn_lock held): the next command makes a new one. */
static void pd__drop_conn(pd_redis_log *rl)
{
    if (rl->conn)
        redisFree(rl->conn);
    rl->conn = NULL;
    atomic_store(&rl->connected, 0);
}

static int pd__connect_now(pd_redis_log *rl, char *err, size_t errlen);

static uint64_t pd__now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* A connect failed (conn_lock held): the next is not tried before a
 * jittered, doubling wait, so a Redis that is down costs each change one
 * clock read, not a connect timeout, and replicas do not reconnect in step. */
static void pd__backoff(pd_redis_log *rl)
{
    uint32_t d = rl->backoff_ms ? rl->backoff_ms * 2 : PD_REDIS_BACKOFF_MIN_MS;
    if (d > PD_REDIS_BACKOFF_MAX_MS)
        d = PD_REDIS_BACKOFF_MAX_MS;
    rl->backoff_ms = d;
    uint32_t wait = d / 2 + (uint32_t)rand_r(&rl->rand_state) % (d / 2 + 1); /* d/2..d */
    rl->next_try_us = pd__now_us() + (uint64_t)wait * 1000u;
    atomic_fetch_add(&rl->connect_failures, 1);
}

/* A connection, with the library loaded (conn_lock held). 0, or -1 with
 * the reason in err. */
static int pd__connect(pd_redis_log *rl, char *err, size_t errlen)
{
    if (rl->conn)
        return 0;
    uint64_t now = pd__now_us();
    if (rl->backoff_ms && now < rl->next_try_us) {
        snprintf(err, errlen, "Redis %.100s:%u cannot be reached; the next try is in %" PRIu64 " ms", rl->host,
                 (unsigned)rl->port, (rl->next_try_us - now + 999) / 1000);
        return -1;
    }
    int rc = pd__connect_now(rl, err, errlen);
    if (rc != 0) {
        pd__backoff(rl);
        return -1;
    }
    if (rl->ever_connected)
        atomic_fetch_add(&rl->reconnects, 1);
    rl->ever_connected = 1;
    rl->backoff_ms = 0;
    atomic_store(&rl->connected, 1);
    return 0;
}

/* Loads pathd's library on c, over whichever Redis has. 0, or -1 with the
 * reason in err. */
static int pd__load_library(pd_redis_log *rl, redisContext *c, char *err, size_t errlen)
{
    redisReply *r = redisCommand(c, "FUNCTION LOAD REPLACE %s", PD__LIBRARY);
    if (!r || r->type == REDIS_REPLY_ERROR) {
        /* Cut to errlen on purpose (the return value is looked at so GCC
         * does not warn of the truncation). */
        if (snprintf(err, errlen, "Redis %.100s:%u: FUNCTION LOAD of pathd's library failed: %s", rl->host,
                     (unsigned)rl->port, r ? r->str : c->errstr) < 0)
            err[0] = '\0';
        if (r)
            freeReplyObject(r);
        return -1;
    }
    freeReplyObject(r);
    return 0;
}

/* One connect, bounded by timeout_ms, and the library loaded (conn_lock
 * held). 0, or -1 with the reason in err. */
static int pd__connect_now(pd_redis_log *rl, char *err, size_t errlen)
{
    struct timeval tv = { (time_t)(rl->timeout_ms / 1000), (suseconds_t)(rl->timeout_ms % 1000) * 1000 };
    redisContext *c = redisConnectWithTimeout(rl->host, rl->port, tv);
    if (!c) {
        snprintf(err, errlen, "Redis %.100s:%u: out of memory", rl->host, (unsigned)rl->port);
        return -1;
    }
    if (c->err) {
        snprintf(err, errlen, "Redis %.100s:%u cannot be reached: %s", rl->host, (unsigned)rl->port, c->errstr);
        redisFree(c);
        return -1;
    }
    /* Without a command timeout a Redis that stopped answering would hold
     * the change lock, and every worker behind it, for ever. */
    if (redisSetTimeout(c, tv) != REDIS_OK || redisEnableKeepAlive(c) != REDIS_OK) {
        snprintf(err, errlen, "Redis %.100s:%u: cannot set the timeout: %s", rl->host, (unsigned)rl->port, c->errstr);
        redisFree(c);
        return -1;
    }
    if (pd__load_library(rl, c, err, errlen) != 0) {
        redisFree(c);
        return -1;
    }
    rl->conn = c;
    return 0;
}

/* One command (conn_lock held), connecting first when needed. The reply
 * (never an error reply: those are turned into -1 with err), or NULL with
 * the reason in err; *io is 1 when the connection failed (a retryable
 * refusal), 0 when Redis answered with an error. */
static redisReply *pd__command(pd_redis_log *rl, int argc, const char **argv, const size_t *argvlen, int *io,
                               char *err, size_t errlen)
{
    *io = 1;
    if (pd__connect(rl, err, errlen) != 0)
        return NULL;
    redisReply *r = redisCommandArgv(rl->conn, argc, argv, argvlen);
    if (!r) {
        snprintf(err, errlen, "Redis %.100s:%u: the connection failed: %s", rl->host, (unsigned)rl->port,
                 rl->conn->errstr[0] ? rl->conn->errstr : "no answer");
        pd__drop_conn(rl);
        return NULL;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        *io = 0;
        snprintf(err, errlen, "Redis %.100s:%u: %s: %s", rl->host, (unsigned)rl->port, argv[0], r->str);
        freeReplyObject(r);
        return NULL;
    }
    return r;
}

redisReply *pd_redis_log_command(pd_redis_log *rl, int argc, const char **argv, const size_t *argvlen, int *io,
                                 char *err, size_t errlen)
{
    pthread_mutex_lock(&rl->conn_lock);
    redisReply *r = pd__command(rl, argc, argv, argvlen, io, err, errlen);
    pthread_mutex_unlock(&rl->conn_lock);
    return r;
}

const char *pd_redis_log_prefix(const pd_redis_log *rl)
{
    return rl->prefix;
}

void pd_redis_log_set_snapshots(pd_redis_log *rl, const pd_redis_log_hooks *hooks, void *user)
{
    if (rl->snap)
        rl->snap->destroy(rl->snap_user);
    rl->snap = hooks;
    rl->snap_user = user;
}

static void pd__fail(pd_redis_log *rl, const char *fmt, const char *why);

void pd_redis_log_fail(pd_redis_log *rl, const char *why)
{
    pd__fail(rl, "%s", why);
}

/* ---- the reservation stream's top, as appends saw it --------------------------- */

static pd__resv_top *pd__resv_find(pd_redis_log *rl, const char *scene)
{
    for (size_t i = 0; i < rl->n_resv_tops; i++)
        if (strcmp(rl->resv_tops[i].scene, scene) == 0)
            return &rl->resv_tops[i];
    return NULL;
}

/* Forgets scene's top (resv_lock held): an append of it is under way, or
 * was answered without one. */
static void pd__resv_forget(pd_redis_log *rl, const char *scene)
{
    pd__resv_top *t = pd__resv_find(rl, scene);
    if (t)
        *t = rl->resv_tops[--rl->n_resv_tops];
}

/* Records the top an OK answer named ("0-V", "0-0"; anything else: none). */
static void pd__resv_note(pd_redis_log *rl, const char *scene, const redisReply *at)
{
    uint64_t v = 0;
    int known = 0;
    if (at && at->type == REDIS_REPLY_STRING && at->len > 2 && at->len < 24 && strncmp(at->str, "0-", 2) == 0) {
        char *end = NULL;
        v = strtoull(at->str + 2, &end, 10);
        known = end == at->str + at->len;
    }
    pthread_mutex_lock(&rl->resv_lock);
    pd__resv_top *t = pd__resv_find(rl, scene);
    if (known && !t && strlen(scene) < sizeof t->scene) {
        if (rl->n_resv_tops < PD__RESV_TOPS)
            t = &rl->resv_tops[rl->n_resv_tops++];
        else
            t = &rl->resv_tops[rl->next_resv_top++ % PD__RESV_TOPS];
        snprintf(t->scene, sizeof t->scene, "%s", scene);
    }
    if (known && t)
        t->top = v;
    else if (t)
        pd__resv_forget(rl, scene);
    pthread_mutex_unlock(&rl->resv_lock);
}

int pd_redis_log_resv_top(pd_redis_log *rl, const char *scene, uint64_t *top)
{
    pthread_mutex_lock(&rl->resv_lock);
    const pd__resv_top *t = pd__resv_find(rl, scene);
    if (t)
        *top = t->top;
    pthread_mutex_unlock(&rl->resv_lock);
    return t != NULL;
}

/* ---- this pathd's own new scenes and drops, as the log took them ------------------ */

/* An entry id "INC-V" into its parts: 0, or -1 when it is not one. */
static int pd__parse_id(const char *id, size_t len, uint64_t *inc, uint64_t *v)
{
    char buf[48], *end = NULL;
    if (!id || len == 0 || len >= sizeof buf)
        return -1;
    memcpy(buf, id, len);
    buf[len] = '\0';
    if (buf[0] < '0' || buf[0] > '9')
        return -1;
    *inc = strtoull(buf, &end, 10);
    if (*end != '-' || end[1] < '0' || end[1] > '9')
        return -1;
    *v = strtoull(end + 1, &end, 10);
    return *end == '\0' ? 0 : -1;
}

static void pd__inc_forget(pd_redis_log *rl, const char *scene);

/* FNV-1a of a scene's name: the slot it starts probing at. */
static size_t pd__name_hash(const char *name)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *c = (const unsigned char *)name; *c; c++)
        h = (h ^ *c) * 0x100000001b3ull;
    return (size_t)(h ^ (h >> 32));
}

static const char *pd__named_name(const pd__named *t, size_t i)
{
    return (const char *)t->v + i * t->size;
}

/* The slot of scene's entry, or of the empty slot where it would go
 * (t->n_slots > 0, so at least one slot is empty). */
static size_t pd__named_slot(const pd__named *t, const char *scene)
{
    size_t mask = t->n_slots - 1;
    size_t at = pd__name_hash(scene) & mask;
    while (t->slots[at] && strcmp(pd__named_name(t, t->slots[at] - 1), scene) != 0)
        at = (at + 1) & mask;
    return at;
}

/* Rebuilds the slots at n_slots (a power of two above 2 * n): 0, or -1
 * (memory; the table is left as it was). */
static int pd__named_rehash(pd__named *t, size_t n_slots)
{
    size_t *slots = calloc(n_slots, sizeof *slots);
    if (!slots)
        return -1;
    free(t->slots);
    t->slots = slots;
    t->n_slots = n_slots;
    for (size_t i = 0; i < t->n; i++)
        t->slots[pd__named_slot(t, pd__named_name(t, i))] = i + 1;
    return 0;
}

/* Scene's entry in t, or NULL; with add, made (zeroed but for the name)
 * when there is none - NULL then only when memory ran out or the name is
 * too long (mark_lock held). */
static void *pd__named_find(pd__named *t, const char *scene, int add)
{
    if (t->n_slots) {
        size_t at = pd__named_slot(t, scene);
        if (t->slots[at])
            return t->v + (t->slots[at] - 1) * t->size;
    }
    if (!add || strlen(scene) >= PD_CONF_MAX_NAME)
        return NULL;
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        unsigned char *grown = realloc(t->v, cap * t->size);
        if (!grown)
            return NULL;
        t->v = grown;
        t->cap = cap;
    }
    /* At most half full, so probes stay short. */
    if ((t->n + 1) * 2 > t->n_slots && pd__named_rehash(t, t->n_slots ? t->n_slots * 2 : 32) != 0)
        return NULL;
    unsigned char *e = t->v + t->n * t->size;
    memset(e, 0, t->size);
    snprintf((char *)e, PD_CONF_MAX_NAME, "%s", scene);
    t->slots[pd__named_slot(t, scene)] = ++t->n;
    return e;
}

/* Empties slot at, shifting back the entries after it that probed past
 * it, so every entry stays reachable from its home slot. */
static void pd__named_unslot(pd__named *t, size_t at)
{
    size_t mask = t->n_slots - 1;
    for (size_t next = (at + 1) & mask; t->slots[next]; next = (next + 1) & mask) {
        size_t home = pd__name_hash(pd__named_name(t, t->slots[next] - 1)) & mask;
        /* It may move to at when at lies on its probe path, home..next. */
        if (((next - home) & mask) >= ((next - at) & mask)) {
            t->slots[at] = t->slots[next];
            at = next;
        }
    }
    t->slots[at] = 0;
}

/* Drops entry e of t (mark_lock held): the last takes its place. */
static void pd__named_drop(pd__named *t, void *e)
{
    size_t i = (size_t)((unsigned char *)e - t->v) / t->size, last = t->n - 1;
    pd__named_unslot(t, pd__named_slot(t, pd__named_name(t, i)));
    if (i != last) {
        t->slots[pd__named_slot(t, pd__named_name(t, last))] = i + 1;
        memcpy(e, t->v + last * t->size, t->size);
    }
    t->n--;
}

/* Scene's mark, or NULL (mark_lock held). */
static pd__own_mark *pd__mark_of(pd_redis_log *rl, const char *scene)
{
    return pd__named_find(&rl->marks, scene, 0);
}

/* Drops mark m (mark_lock held). */
static void pd__mark_drop(pd_redis_log *rl, pd__own_mark *m)
{
    pd__named_drop(&rl->marks, m);
}

/* Records scene's mark: the latest replaces the one before, even a lower
 * one from a log that went back. Out of memory: no mark (the tail then
 * goes by versions alone, as before marks). */
static void pd__mark_note(pd_redis_log *rl, const char *scene, uint64_t inc, uint64_t v)
{
    pthread_mutex_lock(&rl->mark_lock);
    pd__own_mark *m = pd__named_find(&rl->marks, scene, 1);
    if (m) {
        m->inc = inc;
        m->v = v;
    }
    pthread_mutex_unlock(&rl->mark_lock);
}

int pd_redis_log_own_past(pd_redis_log *rl, const char *scene, const char *entry_id)
{
    uint64_t inc, v;
    if (!entry_id || pd__parse_id(entry_id, strlen(entry_id), &inc, &v) != 0)
        return 0;
    int past = 0;
    pthread_mutex_lock(&rl->mark_lock);
    pd__own_mark *m = pd__mark_of(rl, scene);
    if (m) {
        past = inc < m->inc || (inc == m->inc && v <= m->v);
        /* The marked entry itself: every later one has a higher id, so
         * the mark can skip nothing more. Kept, it would outlive a
         * failover that lost the entry and skip another replica's lower
         * ids of the history that took its place (served silently, where
         * versions alone find the GAP). */
        if (inc == m->inc && v == m->v)
            pd__mark_drop(rl, m);
    }
    pthread_mutex_unlock(&rl->mark_lock);
    return past;
}

int pd_redis_log_own_check(pd_redis_log *rl, const pd_redis_own_mark *seen, const char *last_id)
{
    uint64_t inc = 0, v = 0;
    if (last_id && last_id[0] && pd__parse_id(last_id, strlen(last_id), &inc, &v) != 0)
        return 0; /* not an id: leave the mark to the tail */
    int gone = 0;
    pthread_mutex_lock(&rl->mark_lock);
    pd__own_mark *m = pd__mark_of(rl, seen->scene);
    /* Only the mark the check was sent for: one made since is an append
     * the new log took after its last entry was read. */
    if (m && m->inc == seen->inc && m->v == seen->v && (inc < m->inc || (inc == m->inc && v < m->v))) {
        pd__mark_drop(rl, m);
        pd__inc_forget(rl, seen->scene); /* the history it named is gone too */
        gone = 1;
    }
    pthread_mutex_unlock(&rl->mark_lock);
    return gone;
}

size_t pd_redis_log_own_marked(pd_redis_log *rl, pd_redis_own_mark *marks, size_t max)
{
    pthread_mutex_lock(&rl->mark_lock);
    size_t n = rl->marks.n;
    for (size_t i = 0; i < n && i < max; i++)
        memcpy(&marks[i], rl->marks.v + i * rl->marks.size, sizeof marks[i]);
    pthread_mutex_unlock(&rl->mark_lock);
    return n;
}

void pd_redis_log_own_forget(pd_redis_log *rl, const char *scene)
{
    pthread_mutex_lock(&rl->mark_lock);
    pd__own_mark *m = pd__mark_of(rl, scene);
    if (m)
        pd__mark_drop(rl, m);
    pd__inc_forget(rl, scene);
    pthread_mutex_unlock(&rl->mark_lock);
}

/* ---- scenes refused until rebuilt ------------------------------------------------ */

/* Scene's index in refused, n_refused when it is not refused (mark_lock held). */
static size_t pd__refused_at(const pd_redis_log *rl, const char *scene)
{
    size_t i = 0;
    while (i < rl->n_refused && strcmp(rl->refused[i], scene) != 0)
        i++;
    return i;
}

int pd_redis_log_set_refused(pd_redis_log *rl, const char *scene, int refused)
{
    int rc = 0;
    pthread_mutex_lock(&rl->mark_lock);
    size_t i = pd__refused_at(rl, scene);
    if (!refused && i < rl->n_refused) {
        memcpy(rl->refused[i], rl->refused[--rl->n_refused], sizeof rl->refused[i]);
    } else if (refused && i == rl->n_refused) {
        if (rl->n_refused == rl->cap_refused) {
            size_t cap = rl->cap_refused ? 2 * rl->cap_refused : 4;
            char (*more)[PD_CONF_MAX_NAME] = realloc(rl->refused, cap * sizeof *more);
            if (more) {
                rl->refused = more;
                rl->cap_refused = cap;
            }
        }
        if (rl->n_refused < rl->cap_refused)
            snprintf(rl->refused[rl->n_refused++], sizeof rl->refused[0], "%s", scene);
        else
            rc = -1;
    }
    pthread_mutex_unlock(&rl->mark_lock);
    return rc;
}

int pd_redis_log_refused(pd_redis_log *rl, const char *scene)
{
    pthread_mutex_lock(&rl->mark_lock);
    int found = pd__refused_at(rl, scene) < rl->n_refused;
    pthread_mutex_unlock(&rl->mark_lock);
    return found;
}

void pd_redis_log_set_append_pause(pd_redis_log *rl, void (*fn)(void *user), void *user)
{
    rl->append_pause = fn;
    rl->append_pause_user = user;
}

/* ---- the incarnation this pathd serves of each scene ------------------------------ */

/* Scene's entry, or NULL (mark_lock held). */
static pd__own_inc *pd__inc_of(pd_redis_log *rl, const char *scene)
{
    return pd__named_find(&rl->incs, scene, 0);
}

/* Not known any more (mark_lock held): its appends go by versions alone. */
static void pd__inc_forget(pd_redis_log *rl, const char *scene)
{
    pd__own_inc *e = pd__inc_of(rl, scene);
    if (e)
        pd__named_drop(&rl->incs, e);
}

/* Scene's incarnation is inc (mark_lock held). Out of memory: not known
 * (an append then goes by versions alone, never refused for it). */
static void pd__inc_set(pd_redis_log *rl, const char *scene, uint64_t inc)
{
    pd__own_inc *e = pd__named_find(&rl->incs, scene, 1);
    if (e)
        e->inc = inc;
}

/* What an entry INC-V served means for the scene's incarnation: INC, or
 * none live after a drop (V 0) - forgotten, as it is for an id that is
 * not one (mark_lock held). */
static void pd__inc_entry(pd_redis_log *rl, const char *scene, int known, uint64_t inc, uint64_t v)
{
    if (known && v > 0)
        pd__inc_set(rl, scene, inc);
    else
        pd__inc_forget(rl, scene);
}

void pd_redis_log_served_entry(pd_redis_log *rl, const char *scene, const char *entry_id)
{
    uint64_t inc = 0, v = 0;
    int known = entry_id && pd__parse_id(entry_id, strlen(entry_id), &inc, &v) == 0;
    pthread_mutex_lock(&rl->mark_lock);
    pd__inc_entry(rl, scene, known, inc, v);
    pthread_mutex_unlock(&rl->mark_lock);
}

int pd_redis_log_incarnation(pd_redis_log *rl, const char *scene, uint64_t *inc)
{
    pthread_mutex_lock(&rl->mark_lock);
    const pd__own_inc *e = pd__inc_of(rl, scene);
    if (e)
        *inc = e->inc;
    pthread_mutex_unlock(&rl->mark_lock);
    return e != NULL;
}

pd_scene *pd_redis_log_served_scene(pd_redis_log *rl, pd_registry *r, const char *scene, uint64_t *inc)
{
    *inc = 0;
    pthread_mutex_lock(&rl->lock);
    pd_scene *s = pd_registry_acquire(r, scene);
    if (s && !pd_redis_log_incarnation(rl, scene, inc))
        *inc = 0;
    pthread_mutex_unlock(&rl->lock);
    return s;
}

/* ---- appends ----------------------------------------------------------------- */

static int pd__reply_u64(const redisReply *r, uint64_t *out)
{
    if (!r || r->type != REDIS_REPLY_STRING || r->len == 0 || r->len > 20)
        return -1;
    char *end = NULL;
    unsigned long long v = strtoull(r->str, &end, 10);
    if (end != r->str + r->len)
        return -1;
    *out = v;
    return 0;
}

/* Reads one pathd_append answer into out (the version, the status, why). */
static void pd__take_answer(pd_redis_log *rl, const pd_redis_append *a, const redisReply *r,
                            pd_redis_append_result *out)
{
    uint64_t v = 0;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 || r->elements > 4 ||
        r->element[0]->type != REDIS_REPLY_STRING || pd__reply_u64(r->element[1], &v) != 0) {
        snprintf(out->message, sizeof out->message, "Redis %.100s:%u: pathd_append answered something else", rl->host,
                 (unsigned)rl->port);
        out->status = PD_INTERNAL;
        return;
    }
    const char *what = r->element[0]->str;
    out->version = v;
    if (strcmp(what, "OK") == 0 || strcmp(what, "DUP") == 0) {
        out->duplicate = what[0] == 'D';
        out->status = PD_OK;
        if (!out->duplicate)
            pd__resv_note(rl, a->scene, r->elements >= 3 ? r->element[2] : NULL);
        uint64_t key_inc = 0;
        if (out->duplicate && r->elements == 3 && out->sent_inc && pd__reply_u64(r->element[2], &key_inc) == 0) {
            /* The key's change was made on another incarnation than the
             * one this append names (the name was dropped and made anew
             * since, and versions restart): not this change, even at the
             * same version. A drop's entry is of the INC after the one it
             * ended. A new scene names none: versions alone, as before. */
            uint64_t same = a->op == PD_REDIS_DROP ? out->sent_inc + 1 : out->sent_inc;
            out->other_incarnation = a->op != PD_REDIS_NEW && key_inc != same;
            out->log_inc = key_inc;
        }
        uint64_t live_inc = 0;
        if (out->duplicate && a->op == PD_REDIS_NEW && r->elements == 4 &&
            pd__reply_u64(r->element[2], &key_inc) == 0 && pd__reply_u64(r->element[3], &live_inc) == 0) {
            /* A keyed create resent after its scene was dropped (and maybe made
             * again): the key's incarnation is not the live one, so it is
             * answered, nothing made here (the tail follows the log). */
            out->other_incarnation = key_inc != live_inc;
            out->log_inc = key_inc;
        }
        const redisReply *id = r->elements == 4 ? r->element[3] : NULL;
        if (!out->duplicate && id && id->type == REDIS_REPLY_STRING &&
            pd__parse_id(id->str, id->len, &out->inc, &out->entry_v) == 0)
            out->has_id = 1;
        /* A new incarnation or a drop taken (the store appends them under
         * its change lock, so one scene's marks come in the log's order):
         * what this pathd serves of the scene is then the log's through
         * this entry, whatever came before it (the scene was not live, or
         * the drop's compare-and-set held), so its tail skips every entry
         * up to it (pd_redis_log_own_past). */
        if (out->has_id && a->op != PD_REDIS_NEXT)
            pd__mark_note(rl, a->scene, out->inc, out->entry_v);
        /* What this pathd serves of the scene once the store takes the
         * answer (under its change lock, as the tail's notes): the
         * incarnation of the entry (none after a drop); an older library's
         * answer names no entry: not known, versions alone check the next
         * append. A duplicate update (a retried key) appended nothing:
         * what this pathd serves is unchanged, and so is its incarnation -
         * forgot, the check would be off for the scene until its next
         * entry. A duplicate new scene or drop is noted as any answer: its
         * scene is not the one this pathd read before (a drop: none) -
         * unless the key's change was of another incarnation: nothing is
         * applied here, so what this pathd serves is unchanged. */
        if (!out->other_incarnation && (!out->duplicate || a->op != PD_REDIS_NEXT)) {
            pthread_mutex_lock(&rl->mark_lock);
            pd__inc_entry(rl, a->scene, out->has_id, out->inc, out->entry_v);
            pthread_mutex_unlock(&rl->mark_lock);
        }
        if (!out->duplicate && !out->has_id && !atomic_exchange(&rl->no_id_said, 1) && rl->warn) {
            /* An older pathd's library (a rolling upgrade: the last to
             * connect loads its own): no mark, the tail goes by versions
             * alone, as before marks, until this pathd's is loaded again. */
            char msg[256];
            snprintf(msg, sizeof msg,
                     "Redis %.100s:%u: pathd_append answered OK with no entry id (an older pathd's library?): "
                     "this pathd's new scenes and drops leave no mark for its tail",
                     rl->host, (unsigned)rl->port);
            rl->warn(rl->warn_user, msg);
        }
    } else if (strcmp(what, "STALE") == 0 && r->elements == 3) {
        /* Another incarnation than the one this append's scene is of. */
        uint64_t log_inc = 0;
        (void)pd__reply_u64(r->element[2], &log_inc);
        if (v)
            snprintf(out->message, sizeof out->message,
                     "scene '%s': the log holds another incarnation of it (%" PRIu64 ", made anew since), at "
                     "version %" PRIu64,
                     a->scene, log_inc, v);
        else
            snprintf(out->message, sizeof out->message, "scene '%s': the log has dropped it since", a->scene);
        out->status = PD_STALE_VERSION;
        out->other_incarnation = 1;
        out->log_inc = log_inc;
    } else if (strcmp(what, "STALE") == 0) {
        snprintf(out->message, sizeof out->message, "scene '%s': the log is at version %" PRIu64 ", not %" PRIu64,
                 a->scene, v, a->expected);
        out->status = PD_STALE_VERSION;
    } else if (strcmp(what, "CHAIN") == 0) {
        snprintf(out->message, sizeof out->message,
                 "scene '%s': the change this one was made on is not the log's last (the log is at version %" PRIu64
                 ")",
                 a->scene, v);
        out->status = PD_UNAVAILABLE;
        out->chain = 1;
    } else if (strcmp(what, "EXISTS") == 0) {
        snprintf(out->message, sizeof out->message, "scene '%s': the log already has it, at version %" PRIu64,
                 a->scene, v);
        out->status = PD_SCENE_EXISTS;
    } else if (strcmp(what, "GONE") == 0) {
        snprintf(out->message, sizeof out->message, "scene '%s': the log has no live scene of that name", a->scene);
        out->status = PD_UNKNOWN_SCENE;
    } else {
        snprintf(out->message, sizeof out->message, "Redis %.100s:%u: pathd_append answered '%s'", rl->host,
                 (unsigned)rl->port, what);
        out->status = PD_INTERNAL;
    }
    if (out->status == PD_OK && !out->duplicate)
        atomic_fetch_add(&rl->bytes, a->len);
}

/* Queues the FCALL of append a (tag: its tag; after: the tag the scene's
 * last append must have, "" none) in the connection's output buffer
 * (conn_lock held, connected). 0, or -1 (memory). */
static int pd__queue_append(pd_redis_log *rl, const pd_redis_append *a, const char *tag, const char *after,
                            pd_redis_append_result *out)
{
    static const char *const ops[] = { "next", "new", "drop" };
    char stream[320], meta[320], dedup[640], dedup_inc[640], seq[96], scenes[96], resv[320], expected[24],
        made[24], ttl[16];
    char inc[24] = ""; /* not known, or a new incarnation: versions alone */
    if (a->op != PD_REDIS_NEW) {
        pthread_mutex_lock(&rl->mark_lock);
        const pd__own_inc *e = pd__inc_of(rl, a->scene);
        if (a->change && pd__refused_at(rl, a->scene) < rl->n_refused) {
            /* The replica refused the scene after the change passed
             * pd__change_refused, and may have forgotten its incarnation
             * (pd_replica.c marks the refusal first, then forgets): sent
             * with none, the change would be taken by a log with no live
             * record of the scene, on the history left behind, where the
             * rebuild cannot apply it. Incarnation 0, which no live scene
             * has, makes Redis refuse it; read with the mark, under one
             * lock, so no refusal falls between them. */
            snprintf(inc, sizeof inc, "0");
            out->refused_scene = 1;
        } else if (e) {
            snprintf(inc, sizeof inc, "%" PRIu64, e->inc);
            out->sent_inc = e->inc;
        }
        pthread_mutex_unlock(&rl->mark_lock);
    }
    pd_redis_log_stream_key(rl, a->scene, stream, sizeof stream);
    snprintf(resv, sizeof resv, "%s:{%s}:resv", rl->prefix, a->scene); /* pd_reserve_shared.c's key */
    snprintf(meta, sizeof meta, "%s:{%s}:meta", rl->prefix, a->scene);
    if (a->key) {
        snprintf(dedup, sizeof dedup, "%s:{%s}:idem:%s", rl->prefix, a->scene, a->key);
        /* Not idem:KEY:inc - that is key "KEY:inc"'s own dedup key. */
        snprintf(dedup_inc, sizeof dedup_inc, "%s:{%s}:ideminc:%s", rl->prefix, a->scene, a->key);
    } else {
        snprintf(dedup, sizeof dedup, "%s", meta);
        snprintf(dedup_inc, sizeof dedup_inc, "%s", meta);
    }
    snprintf(seq, sizeof seq, "%s:seq", rl->prefix);
    snprintf(scenes, sizeof scenes, "%s:scenes", rl->prefix);
    if (a->has_expected)
        snprintf(expected, sizeof expected, "%" PRIu64, a->expected);
    else
        expected[0] = '\0';
    snprintf(made, sizeof made, "%" PRIu64, a->version);
    snprintf(ttl, sizeof ttl, "%" PRIu32, rl->dedup_ttl_s);
    const char *argv[] = { "FCALL", "pathd_append_of", "7", stream, meta, dedup, seq, scenes, resv, dedup_inc,
                           ops[a->op], expected, made, a->key ? "1" : "0", ttl, a->scene, (const char *)a->payload,
                           tag, after, "1" /* answer the entry's id */, inc, a->def ? a->def : "" };
    enum { ARGC = sizeof argv / sizeof *argv, RECORD = 16 };
    size_t argvlen[ARGC];
    for (size_t i = 0; i < ARGC; i++)
        argvlen[i] = i == RECORD ? a->len : strlen(argv[i]); /* the record is binary: never strlen'ed */
    return redisAppendCommandArgv(rl->conn, ARGC, argv, argvlen) == REDIS_OK ? 0 : -1;
}

int pd_redis_log_key_version(pd_redis_log *rl, const char *scene, const char *key, uint64_t *version, char *why,
                             size_t whylen)
{
    *version = 0;
    if (!key || !key[0])
        return 0;
    char dedup[640];
    snprintf(dedup, sizeof dedup, "%s:{%s}:idem:%s", rl->prefix, scene, key); /* pd__queue_append's */
    const char *argv[] = { "GET", dedup };
    const size_t argvlen[] = { 3, strlen(dedup) };
    int io;
    redisReply *r = pd_redis_log_command(rl, 2, argv, argvlen, &io, why, whylen);
    if (!r)
        return -1;
    int rc = 0;
    if (r->type == REDIS_REPLY_STRING) {
        rc = pd__reply_u64(r, version) == 0 ? 1 : -1;
        if (rc < 0)
            snprintf(why, whylen, "Redis %.100s:%u: idempotency key '%.64s' holds something else", rl->host,
                     (unsigned)rl->port, key);
    } else if (r->type != REDIS_REPLY_NIL) {
        snprintf(why, whylen, "Redis %.100s:%u: GET of an idempotency key answered something else", rl->host,
                 (unsigned)rl->port);
        rc = -1;
    }
    freeReplyObject(r);
    return rc;
}

void pd_redis_log_unique(pd_redis_log *rl, const char *prefix, char *buf, size_t len)
{
    snprintf(buf, len, "%s%016" PRIx64 "-%" PRIu64, prefix, rl->tag_base,
             (uint64_t)atomic_fetch_add(&rl->tag_next, 1));
}

pd_status pd_redis_log_append(pd_redis_log *rl, const pd_redis_append *a, pd_redis_append_result *out)
{
    pd_redis_log_append_many(rl, a, 1, out);
    return out->status;
}

size_t pd_redis_log_append_many(pd_redis_log *rl, const pd_redis_append *a, size_t n, pd_redis_append_result *out)
{
    size_t answered = 0, appended = 0;
    int retried = 0;
    for (size_t i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        out[i].status = PD_UNAVAILABLE; /* until its answer says otherwise */
        if ((unsigned)a[i].op > PD_REDIS_DROP || !a[i].scene || !a[i].scene[0]) {
            snprintf(out[0].message, sizeof out[0].message, "append %zu: no such op, or no scene", i);
            for (size_t j = 0; j < n; j++)
                out[j].status = PD_INVALID_ARGUMENT;
            return 0;
        }
    }
    if (n == 0)
        return 0;
    /* Tags: this pathd's (random at create) and a counter, so no two
     * appends anywhere share one. */
    char tags[2][48];
    /* Until an answer names it again, the scene's reservation top is not
     * known: a cut must not trust one from before these appends. */
    pthread_mutex_lock(&rl->resv_lock);
    for (size_t i = 0; i < n; i++)
        pd__resv_forget(rl, a[i].scene);
    pthread_mutex_unlock(&rl->resv_lock);
    uint64_t t0 = pd__now_us();
    pthread_mutex_lock(&rl->conn_lock);
    char why[sizeof out->message] = "";
    int queued = pd__connect(rl, why, sizeof why) == 0;
again:;
    size_t not_found = 0; /* answers that Redis has no pathd_append_of */
    uint64_t round_us = 0; /* the answers' round trips, counted once they are final */
    for (size_t i = 0; queued && i < n; i++) {
        char *tag = tags[i % 2];
        pd_redis_log_unique(rl, "", tag, sizeof tags[0]);
        if (pd__queue_append(rl, &a[i], tag, i > 0 ? tags[(i - 1) % 2] : "", &out[i]) != 0) {
            /* Nothing was sent yet (hiredis writes at the first read): a
             * connection whose buffer is half full is dropped. */
            snprintf(why, sizeof why, "Redis %.100s:%u: out of memory queueing an append", rl->host,
                     (unsigned)rl->port);
            pd__drop_conn(rl);
            queued = 0;
        }
    }
    /* The answers, in order: Redis runs one connection's commands in
     * order, so each is the answer to the append queued at its place. */
    for (; queued && answered < n; answered++) {
        void *reply = NULL;
        if (redisGetReply(rl->conn, &reply) != REDIS_OK || !reply) {
            snprintf(why, sizeof why, "Redis %.100s:%u: the connection failed: %.100s", rl->host, (unsigned)rl->port,
                     rl->conn->errstr[0] ? rl->conn->errstr : "no answer");
            pd__drop_conn(rl);
            break;
        }
        redisReply *r = reply;
        round_us += pd__now_us() - t0;
        if (r->type == REDIS_REPLY_ERROR) {
            /* An error answer (out of memory with noeviction, a Redis that
             * is loading): the FUNCTION ran whole or not at all, so
             * nothing was appended; a retry may pass. */
            snprintf(out[answered].message, sizeof out[answered].message, "Redis %.100s:%u: FCALL: %s", rl->host,
                     (unsigned)rl->port, r->str);
            not_found += strstr(r->str, "Function not found") != NULL;
        } else {
            pd__take_answer(rl, &a[answered], r, &out[answered]);
        }
        freeReplyObject(r);
        if (out[answered].status == PD_OK && appended == answered)
            appended++;
    }
    /* An older pathd's library, loaded over this one since it connected
     * (a rolling upgrade): nothing ran, so this pathd loads its own again
     * and sends them once more. Some answered otherwise (a load between
     * them): those not run stay retryable. */
    if (queued && not_found > 0 && rl->conn) {
        int all = not_found == n && answered == n;
        if (pd__load_library(rl, rl->conn, why, sizeof why) != 0) {
            pd__drop_conn(rl);
        } else if (all && !retried) {
            /* Sent again: this round's answers are not counted (the
             * metric's appends are FCALLs Redis ran or refused, once). */
            retried = 1;
            t0 = pd__now_us();
            answered = appended = 0;
            for (size_t i = 0; i < n; i++) {
                memset(&out[i], 0, sizeof out[i]);
                out[i].status = PD_UNAVAILABLE;
            }
            goto again;
        }
    }
    pthread_mutex_unlock(&rl->conn_lock);
    atomic_fetch_add(&rl->appends, answered);
    atomic_fetch_add(&rl->append_us, round_us);
    /* Unanswered: unreachable, or the connection failed with the appends
     * in flight. Each may or may not have reached Redis: retryable (the
     * same key answers a retry of one that did), never served. */
    for (size_t i = answered; i < n; i++) {
        atomic_fetch_add(&rl->append_fails, 1);
        snprintf(out[i].message, sizeof out[i].message, "%s", why);
    }
    return appended;
}

/* ---- reading a stream ------------------------------------------------------------ */

/* One entry of a stream: its global sequence and its record's payload. */
typedef struct pd__entry {
    uint64_t g;
    uint8_t *payload;
    size_t len;
} pd__entry;

typedef struct pd__entries {
    pd__entry *v;
    size_t n, cap;
} pd__entries;

static void pd__entries_free(pd__entries *e)
{
    for (size_t i = 0; i < e->n; i++)
        free(e->v[i].payload);
    free(e->v);
    memset(e, 0, sizeof *e);
}

/* Takes one XRANGE entry ([id, [field, value, ...]]) into e; its id into
 * last. 0, or -1 with err. */
static int pd__take_entry(const redisReply *x, pd__entries *e, char last[64], char *err, size_t errlen)
{
    if (x->type != REDIS_REPLY_ARRAY || x->elements != 2 || x->element[0]->type != REDIS_REPLY_STRING ||
        x->element[1]->type != REDIS_REPLY_ARRAY || x->element[0]->len >= 64) {
        snprintf(err, errlen, "a stream entry of another shape");
        return -1;
    }
    snprintf(last, 64, "%s", x->element[0]->str);
    const redisReply *f = x->element[1];
    const redisReply *g = NULL, *rec = NULL;
    for (size_t i = 0; i + 1 < f->elements; i += 2) {
        if (f->element[i]->type != REDIS_REPLY_STRING)
            continue;
        if (strcmp(f->element[i]->str, "g") == 0)
            g = f->element[i + 1];
        else if (strcmp(f->element[i]->str, "r") == 0)
            rec = f->element[i + 1];
    }
    pd__entry en = { 0 };
    if (!rec || rec->type != REDIS_REPLY_STRING || pd__reply_u64(g, &en.g) != 0) {
        snprintf(err, errlen, "stream entry %s has no g or r field", last);
        return -1;
    }
    if (e->n == e->cap) {
        size_t cap = e->cap ? 2 * e->cap : 64;
        pd__entry *v = realloc(e->v, cap * sizeof *v);
        if (!v) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        e->v = v;
        e->cap = cap;
    }
    en.len = rec->len;
    if (!(en.payload = malloc(en.len ? en.len : 1))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    memcpy(en.payload, rec->str, en.len);
    e->v[e->n++] = en;
    return 0;
}

/* Every entry of the scene's stream from `from` (an XRANGE start: "-",
 * or "(ID" after ID), in order, appended to e, and the id of its last
 * entry in last_id (ID when there is none after "(ID"; "0-0" when the
 * stream has none). 0, or -1 with err. */
static int pd__read_stream(pd_redis_log *rl, const char *scene, const char *from, pd__entries *e,
                           char last_id[64], char *err, size_t errlen)
{
    snprintf(last_id, 64, "%s", from[0] == '(' ? from + 1 : "0-0");
    char key[320], start[72], count[16];
    snprintf(start, sizeof start, "%s", from);
    pd_redis_log_stream_key(rl, scene, key, sizeof key);
    snprintf(count, sizeof count, "%d", PD__RANGE_COUNT);
    int rc = 0;
    pthread_mutex_lock(&rl->conn_lock);
    for (;;) {
        const char *argv[] = { "XRANGE", key, start, "+", "COUNT", count };
        size_t argvlen[6];
        for (int i = 0; i < 6; i++)
            argvlen[i] = strlen(argv[i]);
        int io;
        redisReply *r = pd__command(rl, 6, argv, argvlen, &io, err, errlen);
        if (!r || r->type != REDIS_REPLY_ARRAY) {
            if (r) {
                snprintf(err, errlen, "XRANGE %s answered something else", key);
                freeReplyObject(r);
            }
            rc = -1;
            break;
        }
        char last[64] = "";
        for (size_t i = 0; i < r->elements && rc == 0; i++)
            rc = pd__take_entry(r->element[i], e, last, err, errlen);
        size_t got = r->elements;
        freeReplyObject(r);
        if (last[0])
            memcpy(last_id, last, 64);
        if (rc != 0 || got < PD__RANGE_COUNT)
            break;
        snprintf(start, sizeof start, "(%s", last); /* after the last one (Redis 6.2+) */
    }
    pthread_mutex_unlock(&rl->conn_lock);
    return rc;
}

/* Replay's position in a scene's stream, for the replica's tail. 0, or
 * -1 with err (memory). */
static int pd__remember_position(pd_redis_log *rl, const char *scene, const char *id, char *err, size_t errlen)
{
    pthread_mutex_lock(&rl->pos_lock);
    if (rl->n_pos == rl->cap_pos) {
        size_t cap = rl->cap_pos ? 2 * rl->cap_pos : 16;
        pd__position *v = realloc(rl->pos, cap * sizeof *v);
        if (!v) {
            pthread_mutex_unlock(&rl->pos_lock);
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        rl->pos = v;
        rl->cap_pos = cap;
    }
    snprintf(rl->pos[rl->n_pos].scene, sizeof rl->pos[rl->n_pos].scene, "%s", scene);
    snprintf(rl->pos[rl->n_pos].id, sizeof rl->pos[rl->n_pos].id, "%s", id);
    rl->n_pos++;
    pthread_mutex_unlock(&rl->pos_lock);
    return 0;
}

int pd_redis_log_position(pd_redis_log *rl, const char *scene, char *id, size_t len)
{
    int found = 0;
    pthread_mutex_lock(&rl->pos_lock);
    for (size_t i = 0; i < rl->n_pos && !found; i++) {
        if (strcmp(rl->pos[i].scene, scene) == 0) {
            snprintf(id, len, "%s", rl->pos[i].id);
            found = 1;
        }
    }
    pthread_mutex_unlock(&rl->pos_lock);
    return found;
}

void pd_redis_log_scenes_key(const pd_redis_log *rl, char *buf, size_t len)
{
    snprintf(buf, len, "%s:scenes", rl->prefix);
}

static int pd__entry_cmp(const void *a, const void *b)
{
    uint64_t x = ((const pd__entry *)a)->g, y = ((const pd__entry *)b)->g;
    return x < y ? -1 : x > y;
}

/* ---- the change log ------------------------------------------------------------- */

static int pd__rl_lock(void *log)
{
    pd_redis_log *rl = log;
    pthread_mutex_lock(&rl->lock);
    if (!atomic_load(&rl->failed))
        return 0;
    pthread_mutex_unlock(&rl->lock);
    return -1;
}

static void pd__rl_unlock(void *log)
{
    pthread_mutex_unlock(&((pd_redis_log *)log)->lock);
}

/* The log and this pathd no longer agree: every later change is refused.
 * The first failure is said: the clients see INTERNAL, and the operator,
 * who must restart pathd, would otherwise find nothing in its log. */
static void pd__fail(pd_redis_log *rl, const char *fmt, const char *why)
{
    char buf[sizeof rl->why];
    snprintf(buf, sizeof buf, fmt, why);
    memcpy(rl->why, buf, sizeof rl->why);
    rl->refusal = PD_INTERNAL;
    if (!atomic_exchange(&rl->failed, 1) && rl->warn) {
        char msg[sizeof buf + 96];
        snprintf(msg, sizeof msg, "the change log failed (every change is refused INTERNAL until pathd restarts): %s",
                 buf);
        rl->warn(rl->warn_user, msg);
    }
}

/* The append of rec into a, its payload in *framed (the caller frees it).
 * 0, or -1 when the log failed (a record it cannot hold, memory). */
static int pd__rl_prepare(pd_redis_log *rl, const pd_journal_record *rec, pd_redis_append *a, uint8_t **framed)
{
    *a = (pd_redis_append){ .scene = rec->scene, .key = rec->key && rec->key[0] ? rec->key : NULL, .change = 1 };
    *framed = NULL;
    switch (rec->type) {
    case PD_JOURNAL_UPDATE:
    case PD_JOURNAL_RESET:
        /* The registry made rec->version from rec->version - 1: the log
         * must be there, or another writer went first. */
        a->op = PD_REDIS_NEXT;
        a->has_expected = 1;
        a->expected = rec->version - 1;
        break;
    case PD_JOURNAL_SCENE:
    case PD_JOURNAL_INSTANCE:
        a->op = PD_REDIS_NEW;
        a->version = rec->version;
        break;
    case PD_JOURNAL_DROP:
        a->op = PD_REDIS_DROP;
        a->has_expected = 1;
        a->expected = rec->version;
        break;
    default:
        pd__fail(rl, "%s", "a snapshot-only record cannot be appended to the Redis log");
        return -1;
    }
    size_t len = 0;
    if (pd_journal_encode(rec, framed, &len) != 0) {
        pd__fail(rl, "%s", "out of memory encoding a record");
        return -1;
    }
    a->payload = *framed + PD_JOURNAL_HEADER_BYTES;
    a->len = len - PD_JOURNAL_HEADER_BYTES;
    return 0;
}

/* The refusal of a change of a scene refused until rebuilt
 * (pd_redis_log_set_refused; under the change lock): retryable. */
static void pd__refused_why(pd_redis_log *rl, const char *scene)
{
    snprintf(rl->why, sizeof rl->why,
             "scene '%.100s' is not served here until it is rebuilt from the log (the log went back)", scene);
    rl->refusal = PD_UNAVAILABLE;
}

/* What the answer res to rec's append means (under the change lock): 0
 * taken (served), or -1 with why, refusal and dup_version set (and the
 * log failed when the refusal is final). */
static int pd__rl_judge(pd_redis_log *rl, const pd_journal_record *rec, const pd_redis_append_result *in)
{
    pd_redis_append_result res = *in;
    pd_status st = res.status;
    rl->dup_version = 0;
    rl->raced_version = 0;
    if (res.refused_scene) {
        /* Redis refused it for that (pd__queue_append), or answered its
         * key's DUP: nothing is applied to a scene refused until rebuilt. */
        pd__refused_why(rl, rec->scene);
        return -1;
    }
    /* The log made the version this change makes: a fresh append, or a
     * key the log has seen at that version (the first try reached the
     * log but not this pathd: its answer timed out, and the same change
     * on the same version of the same incarnation is what the log holds,
     * pd__take_answer tells by the key's INC). Either way it is
     * served, so the snapshots hear of it. */
    if (st == PD_OK && res.version == rec->version && !res.other_incarnation) {
        if (rl->snap)
            rl->snap->note(rl->snap_user, rec);
        return 0;
    }
    if (st == PD_OK && res.duplicate) {
        /* Made before, at another version or on another incarnation
         * (the name dropped and made anew since: its versions restart, so
         * the key's version can be this record's; applied here it would
         * change, or drop, an incarnation the log never applied it to):
         * answered, nothing applied here. The log has it already; this
         * replica's tail applies what it did not make itself. */
        snprintf(rl->why, sizeof rl->why, "scene '%s': idempotency key seen, made version %" PRIu64, rec->scene,
                 res.version);
        rl->dup_version = res.version;
        rl->refusal = PD_UNAVAILABLE;
        return -1;
    }
    if (st == PD_OK)
        snprintf(res.message, sizeof res.message, "scene '%s': the log made version %" PRIu64 ", not %" PRIu64,
                 rec->scene, res.version, rec->version);
    if (st == PD_UNAVAILABLE) {
        /* Nothing served, nothing recorded (a drop too: the store records
         * it before it is done), or one unanswered that may be recorded
         * (its key answers the retry), or a chained append refused
         * because the one before it was): the client may try again. A
         * chained append refused because the one before it was taken and
         * another replica's came between lost a race, as a refused
         * compare-and-set does below. */
        memcpy(rl->why, res.message, sizeof rl->why);
        rl->refusal = PD_UNAVAILABLE;
        if (res.chain && atomic_load(&rl->tailed) && rec->type == PD_JOURNAL_UPDATE && res.version >= rec->version)
            rl->raced_version = res.version;
        return -1;
    }
    if (atomic_load(&rl->tailed) && rec->type == PD_JOURNAL_DROP && res.sent_inc &&
        ((st == PD_STALE_VERSION && res.other_incarnation && (res.version == 0 || res.log_inc > res.sent_inc)) ||
         st == PD_UNKNOWN_SCENE)) {
        /* A drop of an incarnation the log ended already: another replica
         * dropped the name first (GONE: none live; STALE: made anew since,
         * a higher INC live). The incarnation sent is one this pathd read
         * from the log, so the log had it live: only a drop since ended
         * it. Nothing recorded; this replica's tail brings it to the log's
         * state, as for the lost races below. A lower INC than the one
         * sent (a log that went back), or a drop with no INC known (the
         * log may never have had the scene), is not this race: nothing was
         * dropped here, so it is retryable below as any change another
         * replica's went before. */
        snprintf(rl->why, sizeof rl->why,
                 "%.150s; another replica dropped it first (and may have made the name anew), this replica is "
                 "catching up",
                 res.message);
        /* Not UNAVAILABLE: every client resends those with the same key,
         * and by then this replica's tail may serve the other replica's new
         * incarnation - the resend would drop it too. A resent DropScene
         * answers UNKNOWN_SCENE anyway. */
        rl->refusal = PD_UNKNOWN_SCENE;
        /* The incarnation read stays known: the store records a drop
         * before it is done, so this pathd still serves that incarnation
         * until its tail applies the other replica's drop (which forgets
         * it, pd_redis_log_served_entry). */
        return -1;
    }
    if (atomic_load(&rl->tailed) &&
        (st == PD_STALE_VERSION || st == PD_SCENE_EXISTS || st == PD_UNKNOWN_SCENE)) {
        /* Another replica changed the scene first: this one has not
         * applied that change yet. Its tail will; nothing was served. */
        snprintf(rl->why, sizeof rl->why, "%.180s; another replica changed it first, this replica is catching up",
                 res.message);
        rl->refusal = PD_UNAVAILABLE;
        /* The log is past the version this update was built on (the key,
         * if any, was not seen: the FUNCTION checks it first): the store
         * may build it again once the tail applied the winner's records.
         * A log behind this pathd is no race: nothing to wait for. */
        if (st == PD_STALE_VERSION && rec->type == PD_JOURNAL_UPDATE && res.version >= rec->version &&
            !res.other_incarnation)
            rl->raced_version = res.version;
        return -1;
    }
    /* A log past this pathd's version (another writer, or an append
     * whose answer timed out after Redis took it) with no tail to bring
     * this pathd to it: it needs a restart, replaying the log. */
    pd__fail(rl, "the Redis log and this pathd disagree: %.160s; restart pathd to replay the log", res.message);
    return -1;
}

/* Whether the change rec may be appended now (under the change lock).
 * Not while the replica refuses the scene until it is rebuilt
 * (pd_redis_log_set_refused): a change queued in its lane before the
 * refusal would be built on the history left behind, or on a state the
 * rebuild has not finished (it replays without the change lock), and the
 * log - which may have no record of the scene, so takes any version -
 * would hold it where the rebuild then cannot apply it; nor an instance
 * of it (a copy of that history, its record naming a version the log
 * may not have: a replay skips it). Nor while a
 * reload's record of scene Redis has not answered is held (by the
 * snapshots, sent again here first): a change of the scene now would
 * come before it in the log, on a version the log has not made - so
 * would an instance of it (its INSTANCE record names the template's
 * version: a replay before the RESET is in skips it). Both refused,
 * retryable. 1 refused (why, refusal set: UNAVAILABLE, or INTERNAL when
 * the held record's retry was refused and failed the log), else 0. */
static int pd__change_refused(pd_redis_log *rl, const pd_journal_record *rec)
{
    char why[sizeof rl->why];
    if (pd_redis_log_refused(rl, rec->scene)) {
        pd__refused_why(rl, rec->scene);
        return 1;
    }
    if (rec->type == PD_JOURNAL_INSTANCE && pd_redis_log_refused(rl, rec->tmpl)) {
        pd__refused_why(rl, rec->tmpl); /* the copy would be of the history left behind */
        return 1;
    }
    int held = rl->snap && rl->snap->held && rl->snap->held(rl->snap_user, rec->scene, why, sizeof why);
    if (!held && rl->snap && rl->snap->held && rec->type == PD_JOURNAL_INSTANCE)
        held = rl->snap->held(rl->snap_user, rec->tmpl, why, sizeof why);
    if (!held)
        return atomic_load(&rl->failed);
    memcpy(rl->why, why, sizeof rl->why);
    rl->refusal = PD_UNAVAILABLE;
    return 1;
}

static int pd__rl_append(void *log, const pd_journal_record *rec)
{
    pd_redis_log *rl = log;
    rl->dup_version = 0;
    rl->raced_version = 0;
    if (pd__change_refused(rl, rec))
        return -1;
    if (rl->append_pause)
        rl->append_pause(rl->append_pause_user);
    pd_redis_append a;
    uint8_t *framed;
    if (pd__rl_prepare(rl, rec, &a, &framed) != 0)
        return -1;
    pd_redis_append_result res;
    pd_redis_log_append(rl, &a, &res);
    free(framed);
    return pd__rl_judge(rl, rec, &res);
}

/* Updates of one scene, each made on the one before, in one pipeline
 * (pd_redis_log_append_many): the records from the first up to the first
 * refused one are taken; that one is judged as a lone append would be
 * (refusal, dup_version, why), and every later one is refused - retryable
 * unless the log failed -, answered by its key when the log has seen it. */
static size_t pd__rl_append_many(void *log, const pd_journal_record *recs, size_t n, pd_changelog_outcome *out)
{
    pd_redis_log *rl = log;
    rl->dup_version = 0;
    rl->raced_version = 0;
    pd_redis_append *a = calloc(n ? n : 1, sizeof *a);
    uint8_t **framed = calloc(n ? n : 1, sizeof *framed);
    pd_redis_append_result *res = calloc(n ? n : 1, sizeof *res);
    size_t prepared = 0;
    if (!a || !framed || !res)
        pd__fail(rl, "%s", "out of memory appending records");
    else if (n && pd__change_refused(rl, &recs[0]))
        ; /* nothing sent: each refused as the first (one scene's updates) */
    else
        while (prepared < n && pd__rl_prepare(rl, &recs[prepared], &a[prepared], &framed[prepared]) == 0)
            prepared++;
    if (prepared == n)
        pd_redis_log_append_many(rl, a, n, res);
    size_t taken = 0;
    for (size_t i = 0; i < n; i++) {
        out[i] = (pd_changelog_outcome){ .refusal = PD_INTERNAL };
        if (prepared < n) {
            /* Nothing was sent: the log failed, or the scene's changes are
             * refused for now (pd__change_refused; rl->refusal says which). */
            out[i].refusal = rl->refusal;
            continue;
        }
        if (taken == i) {
            if (pd__rl_judge(rl, &recs[i], &res[i]) == 0) {
                out[i].refusal = PD_OK;
                taken++;
            } else {
                out[i].refusal = rl->refusal;
                out[i].duplicate = rl->dup_version;
                out[i].raced = rl->raced_version;
            }
            continue;
        }
        out[i].refusal = atomic_load(&rl->failed) ? PD_INTERNAL : PD_UNAVAILABLE;
        if (res[i].status == PD_OK && res[i].duplicate)
            out[i].duplicate = res[i].version;
    }
    for (size_t i = 0; i < prepared; i++)
        free(framed[i]);
    free(a);
    free(framed);
    free(res);
    return taken;
}

static int pd__rl_key_version(void *log, const char *scene, const char *key, uint64_t *version, char *why,
                              size_t whylen)
{
    return pd_redis_log_key_version(log, scene, key, version, why, whylen);
}

static int pd__rl_own_past(void *log, const char *scene, const char *entry_id)
{
    return pd_redis_log_own_past(log, scene, entry_id);
}

static void pd__rl_served(void *log, const char *scene, const char *entry_id)
{
    pd_redis_log_served_entry(log, scene, entry_id);
}

static pd_status pd__rl_refusal(void *log)
{
    return ((pd_redis_log *)log)->refusal;
}

static uint64_t pd__rl_duplicate(void *log)
{
    return ((pd_redis_log *)log)->dup_version;
}

static uint64_t pd__rl_raced(void *log)
{
    return ((pd_redis_log *)log)->raced_version;
}

/* Redis makes an append durable before its answer as its appendfsync says
 * (deploy with "always"): nothing is left for pathd to sync. */
static int pd__rl_sync(void *log)
{
    (void)log;
    return 0;
}

static int pd__rl_dirty(void *log)
{
    (void)log;
    return 0;
}

static const char *pd__rl_why(void *log)
{
    return ((pd_redis_log *)log)->why;
}

static int pd__rl_failed(void *log)
{
    return atomic_load(&((pd_redis_log *)log)->failed);
}

/* A reload's state: the set's scenes built anew, and the names served. */
typedef struct pd__rl_reload {
    size_t n_built;
    pd_scene **before;
    size_t n_before;
} pd__rl_reload;

static void *pd__rl_reload_begin(void *log, pd_registry *r, const pd_scene_set *set)
{
    pd_redis_log *rl = log;
    if (pd__rl_lock(rl) != 0)
        return NULL;
    if (rl->snap) { /* with snapshots, a reload goes through the log */
        void *rs = rl->snap->reload_begin(rl->snap_user, r, set);
        if (!rs) {
            pd__fail(rl, "%s", "out of memory recording a reload");
            pd__rl_unlock(rl);
        }
        return rs;
    }
    pd__rl_reload *st = calloc(1, sizeof *st);
    if (!st) {
        pd__fail(rl, "%s", "out of memory recording a reload");
        pd__rl_unlock(rl);
        return NULL;
    }
    size_t kept = 0;
    pd_scene_set_counts(set, &kept, &st->n_built);
    st->n_before = pd_registry_list(r, &st->before);
    return st;
}

/* With snapshots attached the reload goes through the log
 * (pd_redis_snapshot.h's reload_end: RESET and DROP records, and snapshots that
 * end the history made on the replaced maps). Without them: a reload that
 * kept every scene changed nothing the log holds; one that rebuilt or
 * removed scenes makes the log fail rather than go on with a history
 * that does not replay to what is served. */
static void pd__rl_reload_end(void *log, pd_registry *r, void *state)
{
    pd_redis_log *rl = log;
    if (rl->snap) {
        rl->snap->reload_end(rl->snap_user, r, state);
        pd__rl_unlock(rl);
        return;
    }
    pd__rl_reload *st = state;
    size_t gone = 0;
    for (size_t i = 0; i < st->n_before; i++) {
        pd_scene *now = pd_registry_acquire(r, st->before[i]->name);
        gone += now == NULL;
        pd_scene_release(now);
    }
    if (st->n_built || gone)
        pd__fail(rl, "%s", "a reload rebuilt or removed scenes, which the Redis log cannot record yet (issue 32)");
    pd_registry_release_list(st->before, st->n_before);
    free(st);
    pd__rl_unlock(rl);
}

/* Every scene's stream (after its snapshot), merged by the global
 * sequence: the order the changes were served in. */
static int pd__rl_replay(void *log, pd_registry *r, pd_world_store *ws, pd_journal_replay_stats *stats, char *err,
                         size_t errlen)
{
    pd_redis_log *rl = log;
    memset(stats, 0, sizeof *stats);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char scenes[96];
    snprintf(scenes, sizeof scenes, "%s:scenes", rl->prefix);
    const char *argv[] = { "SMEMBERS", scenes };
    const size_t argvlen[] = { 8, strlen(scenes) };
    int io;
    pthread_mutex_lock(&rl->conn_lock);
    redisReply *names = pd__command(rl, 2, argv, argvlen, &io, err, errlen);
    pthread_mutex_unlock(&rl->conn_lock);
    if (!names)
        return -1;
    pd__entries e = { 0 };
    int rc = 0;
    pd_journal_replayer *rp = pd_journal_replayer_create(r, ws);
    if (!rp) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
    }
    for (size_t i = 0; rc == 0 && i < names->elements; i++) {
        const redisReply *n = names->element[i];
        if (n->type != REDIS_REPLY_STRING || n->len >= PD_CONF_MAX_NAME)
            continue;
        /* A scene with a snapshot starts there: its stream may be trimmed
         * below it (pd_redis_snapshot.h). */
        char from[72] = "-", last_id[64];
        if (rl->snap && (rc = rl->snap->start(rl->snap_user, rp, n->str, from, sizeof from, err, errlen)) != 0)
            break;
        stats->records += from[0] == '(';
        rc = pd__read_stream(rl, n->str, from, &e, last_id, err, errlen);
        if (rc == 0)
            rc = pd__remember_position(rl, n->str, last_id, err, errlen);
        if (rc == 0) /* what replay serves of it is the log's through there */
            pd_redis_log_served_entry(rl, n->str, last_id);
        stats->files++;
    }
    freeReplyObject(names);
    if (rc == 0 && rl->snap)
        rc = rl->snap->after_replay(rl->snap_user, err, errlen);
    if (rc == 0 && e.n) /* an empty log has no array to sort */
        qsort(e.v, e.n, sizeof *e.v, pd__entry_cmp);
    for (size_t i = 0; rc == 0 && i < e.n; i++) {
        pd_journal_record rec;
        char why_buf[256], msg[512];
        if (pd_journal_decode(e.v[i].payload, e.v[i].len, &rec, why_buf, sizeof why_buf) != 0) {
            snprintf(err, errlen, "record %" PRIu64 " does not decode: %s", e.v[i].g, why_buf);
            rc = -1;
            break;
        }
        const char *why = pd_journal_replay_one(rp, &rec, why_buf, sizeof why_buf);
        if (why) {
            stats->skipped++;
            snprintf(msg, sizeof msg, "Redis log: record %" PRIu64 " (scene '%s', version %" PRIu64 ") skipped: %s",
                     e.v[i].g, rec.scene, rec.version, why);
            if (rl->warn)
                rl->warn(rl->warn_user, msg);
        } else {
            stats->records++;
        }
        stats->bytes += e.v[i].len;
        atomic_fetch_add(&rl->bytes, e.v[i].len);
        pd_journal_record_free(&rec);
    }
    pd_journal_replayer_destroy(rp);
    pd__entries_free(&e);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    stats->micros = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000u + (uint64_t)(t1.tv_nsec - t0.tv_nsec) / 1000u;
    return rc;
}

/* The records of `name` after the last one that made `from` (the rules of
 * pd_changelog_ops.tail; a stream trimmed below its oldest snapshot starts
 * at that snapshot's entry, so an older `from` is not found: 1). */
static int pd__rl_tail(void *log, const char *name, uint64_t from, pd_journal_tail_fn fn, void *user, char *err,
                       size_t errlen)
{
    pd_redis_log *rl = log;
    pd__entries e = { 0 };
    char last_id[64];
    if (pd__read_stream(rl, name, "-", &e, last_id, err, errlen) != 0) {
        pd__entries_free(&e);
        return -1;
    }
    pd_journal_record *recs = e.n ? calloc(e.n, sizeof *recs) : NULL;
    if (e.n && !recs) {
        pd__entries_free(&e);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = 0;
    size_t decoded = 0;
    for (; decoded < e.n; decoded++) {
        if (pd_journal_decode(e.v[decoded].payload, e.v[decoded].len, &recs[decoded], err, errlen) != 0) {
            rc = -1;
            break;
        }
    }
    size_t start = SIZE_MAX;
    for (size_t i = 0; rc == 0 && i < e.n; i++)
        if (recs[i].type != PD_JOURNAL_DROP && recs[i].version == from)
            start = i + 1;
    /* Not found: the stream's start is the point `from` only with nothing
     * before it (from 0), or when its first record is the update made on
     * `from` (a config scene as loaded). */
    if (rc == 0 && start == SIZE_MAX) {
        if (from == 0 || (e.n && recs[0].type == PD_JOURNAL_UPDATE && recs[0].version == from + 1))
            start = 0;
        else
            rc = 1;
    }
    for (size_t i = start; rc == 0 && i < e.n; i++)
        if (fn(user, &recs[i]) != 0)
            break;
    for (size_t i = 0; i < decoded; i++)
        pd_journal_record_free(&recs[i]);
    free(recs);
    pd__entries_free(&e);
    return rc;
}

/* The snapshots that are due, written and the streams trimmed. */
static int pd__rl_snapshot(void *log, pd_registry *r, char *err, size_t errlen)
{
    pd_redis_log *rl = log;
    if (!rl->snap) {
        snprintf(err, errlen, "the Redis log has no snapshots attached");
        return -1;
    }
    /* A reload's records Redis did not answer are sent again first (the
     * compaction's tick is their retry when no change comes). While one
     * is held no snapshot is written: the scene it is of is served at a
     * version the log has not made (or, dropped, not ended). */
    if (rl->snap->held && pd__rl_lock(rl) == 0) {
        int held = rl->snap->held(rl->snap_user, NULL, err, errlen);
        pd__rl_unlock(rl);
        if (held)
            return -1;
    }
    return rl->snap->write_due(rl->snap_user, r, err, errlen);
}

static int pd__rl_compact(void *log, char *err, size_t errlen)
{
    (void)log, (void)err, (void)errlen;
    return 0;
}

static int pd__rl_wants_compaction(void *log)
{
    pd_redis_log *rl = log;
    return rl->snap && rl->snap->due(rl->snap_user);
}

static void pd__rl_sizes(void *log, uint64_t *log_bytes, uint64_t *snapshot_bytes)
{
    pd_redis_log *rl = log;
    *log_bytes = atomic_load(&rl->bytes);
    *snapshot_bytes = rl->snap ? rl->snap->bytes(rl->snap_user) : 0;
}

static void pd__rl_close(void *log)
{
    pd_redis_log_destroy(log);
}

static const pd_changelog_ops PD__REDIS_OPS = {
    .lock = pd__rl_lock,
    .unlock = pd__rl_unlock,
    .append = pd__rl_append,
    .append_many = pd__rl_append_many,
    .refusal = pd__rl_refusal,
    .duplicate = pd__rl_duplicate,
    .raced = pd__rl_raced,
    .key_version = pd__rl_key_version,
    .own_past = pd__rl_own_past,
    .served = pd__rl_served,
    .sync = pd__rl_sync,
    .dirty = pd__rl_dirty,
    .why = pd__rl_why,
    .failed = pd__rl_failed,
    .reload_begin = pd__rl_reload_begin,
    .reload_end = pd__rl_reload_end,
    .replay = pd__rl_replay,
    .tail = pd__rl_tail,
    .snapshot = pd__rl_snapshot,
    .compact = pd__rl_compact,
    .wants_compaction = pd__rl_wants_compaction,
    .sizes = pd__rl_sizes,
    .close = pd__rl_close,
};

/* ---- life --------------------------------------------------------------------------- */

void pd_redis_log_set_tailed(pd_redis_log *rl, int tailed)
{
    atomic_store(&rl->tailed, tailed != 0);
}

void pd_redis_log_stats(pd_redis_log *rl, pd_redis_log_counters *out)
{
    out->connected = atomic_load(&rl->connected);
    out->reconnects = atomic_load(&rl->reconnects);
    out->connect_failures = atomic_load(&rl->connect_failures);
    out->appends = atomic_load(&rl->appends);
    out->append_us = atomic_load(&rl->append_us);
    out->append_failures = atomic_load(&rl->append_fails);
}

/* 64 random bits naming this log's appends (their tags), so two pathds,
 * or two runs of one, never share a tag: /dev/urandom, else the clock,
 * the pid-dependent address and the object's. */
static uint64_t pd__tag_base(const pd_redis_log *rl)
{
    uint64_t v = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(&v, sizeof v, 1, f) != 1)
        v = pd__now_us() * 0x9E3779B97F4A7C15ull ^ (uint64_t)(uintptr_t)rl ^ (uint64_t)(uintptr_t)&v;
    if (f)
        fclose(f);
    return v;
}

pd_redis_log *pd_redis_log_create(const pd_redis_log_opts *opts, char *err, size_t errlen)
{
    if (!opts->host || !opts->host[0] || strlen(opts->host) >= sizeof ((pd_redis_log *)0)->host || !opts->prefix ||
        !opts->prefix[0] || strlen(opts->prefix) >= sizeof ((pd_redis_log *)0)->prefix || opts->port == 0 ||
        opts->timeout_ms == 0 || opts->dedup_ttl_s == 0) {
        snprintf(err, errlen, "Redis log: a host, a port, a prefix, a timeout and a key TTL are needed");
        return NULL;
    }
    pd_redis_log *rl = calloc(1, sizeof *rl);
    if (!rl) {
        snprintf(err, errlen, "Redis log: out of memory");
        return NULL;
    }
    snprintf(rl->host, sizeof rl->host, "%s", opts->host);
    snprintf(rl->prefix, sizeof rl->prefix, "%s", opts->prefix);
    rl->port = opts->port;
    rl->timeout_ms = opts->timeout_ms;
    rl->dedup_ttl_s = opts->dedup_ttl_s;
    rl->warn = opts->warn;
    rl->warn_user = opts->warn_user;
    rl->refusal = PD_INTERNAL;
    rl->rand_state = (unsigned)pd__now_us() ^ (unsigned)(uintptr_t)rl;
    rl->tag_base = pd__tag_base(rl);
    pthread_mutex_init(&rl->lock, NULL);
    pthread_mutex_init(&rl->conn_lock, NULL);
    pthread_mutex_init(&rl->pos_lock, NULL);
    pthread_mutex_init(&rl->resv_lock, NULL);
    pthread_mutex_init(&rl->mark_lock, NULL);
    rl->marks.size = sizeof(pd__own_mark);
    rl->incs.size = sizeof(pd__own_inc);
    return rl;
}

void pd_redis_log_destroy(pd_redis_log *rl)
{
    if (!rl)
        return;
    if (rl->snap)
        rl->snap->destroy(rl->snap_user);
    pd__drop_conn(rl);
    pthread_mutex_destroy(&rl->lock);
    pthread_mutex_destroy(&rl->conn_lock);
    pthread_mutex_destroy(&rl->pos_lock);
    pthread_mutex_destroy(&rl->resv_lock);
    pthread_mutex_destroy(&rl->mark_lock);
    free(rl->marks.v);
    free(rl->marks.slots);
    free(rl->incs.v);
    free(rl->incs.slots);
    free(rl->refused);
    free(rl->pos);
    free(rl);
}

pd_changelog pd_redis_changelog(pd_redis_log *rl)
{
    return (pd_changelog){ rl ? &PD__REDIS_OPS : NULL, rl };
}

pd_changelog pd_redis_log_open(const pd_redis_log_opts *opts, char *err, size_t errlen)
{
    return pd_redis_changelog(pd_redis_log_create(opts, err, errlen));
}
