/*
 * pd_reserve_shared.c - reservation entries on a Redis Stream per scene
 * (pd_reserve_shared.h): the catch-up (a table snapshot, then XRANGE after
 * the table's rv), the compare-and-set append (XADD with the explicit id
 * 0-(rv+1)), and the snapshot that lets the stream be trimmed.
 */
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_reserve_log.h"
#include "pd_reserve_shared.h"

static void pd__key(pd_redis_log *rl, const char *scene, char *buf, size_t len)
{
    snprintf(buf, len, "%s:{%s}:resv", pd_redis_log_prefix(rl), scene);
}

static void pd__snap_key(pd_redis_log *rl, const char *scene, char *buf, size_t len)
{
    snprintf(buf, len, "%s:{%s}:resvsnap", pd_redis_log_prefix(rl), scene);
}

/* Stores a snapshot and trims below it, atomically (EVAL: Redis keeps the
 * script by its hash after the first call). KEYS: stream, snapshot hash.
 * ARGV: rv, the records. Refused as HAVE when the hash holds rv or a
 * newer one (snapshots never go back), NOENTRY when the stream has no
 * entry 0-rv (not a version this stream made: it went back, or another
 * history). The trim keeps entry rv itself and every entry after it, so
 * the stream is never left empty: a reader behind rv finds its first
 * entry past its table and loads this snapshot (pd_reserve_shared.h); an
 * empty stream would read as "caught up" to a table still behind rv,
 * whose every append then lost the compare-and-set. */
static const char PD__SNAP_SCRIPT[] =
    "local have = tonumber(redis.call('HGET', KEYS[2], 'rv') or '0') or 0\n"
    "local rv = tonumber(ARGV[1])\n"
    "if have >= rv then return 'HAVE' end\n"
    "local id = '0-' .. ARGV[1]\n"
    "if #redis.call('XRANGE', KEYS[1], id, id) == 0 then return 'NOENTRY' end\n"
    "redis.call('HSET', KEYS[2], 'rv', ARGV[1], 'd', ARGV[2])\n"
    "redis.call('XTRIM', KEYS[1], 'MINID', id)\n"
    "return 'OK'\n";

typedef struct pd__apply {
    pd_reserve *t;
    uint64_t refused;
} pd__apply;

static void pd__apply_record(void *user, const char *scene, const pd_reserve_op *op)
{
    (void)scene; /* the stream is the scene's */
    pd__apply *a = user;
    if (!op) /* RESET: the scene was dropped; every agent goes */
        (void)pd_reserve_expire(a->t, PD_RESERVE_FOREVER, NULL, 0);
    else if (pd_reserve_log_apply(a->t, op) != PD_OK)
        a->refused++;
}

/* Entry id "0-V" -> V; 0 when it is not one. */
static uint64_t pd__id_version(const redisReply *id)
{
    if (!id || id->type != REDIS_REPLY_STRING || id->len < 3 || strncmp(id->str, "0-", 2) != 0)
        return 0;
    char *end = NULL;
    unsigned long long v = strtoull(id->str + 2, &end, 10);
    return end == id->str + id->len ? (uint64_t)v : 0;
}

/* Applies the scene's snapshot to t (its RESET first empties t) and sets
 * *rv to its version: 0; 1 when there is none, or it is not past *rv (t
 * untouched); -1 with err. */
static int pd__load_snapshot(pd_redis_log *rl, const char *scene, pd_reserve *t, uint64_t *rv, uint64_t *refused,
                             char *err, size_t errlen)
{
    char key[512];
    pd__snap_key(rl, scene, key, sizeof key);
    const char *argv[] = { "HMGET", key, "rv", "d" };
    const size_t argvlen[] = { 5, strlen(key), 2, 1 };
    int io = 0;
    redisReply *r = pd_redis_log_command(rl, 4, argv, argvlen, &io, err, errlen);
    if (!r)
        return -1;
    int rc = 1;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
        snprintf(err, errlen, "HMGET %s: not an array of two", key);
        rc = -1;
    } else if (r->element[0]->type == REDIS_REPLY_STRING && r->element[1]->type == REDIS_REPLY_STRING) {
        char *end = NULL;
        const unsigned long long v = strtoull(r->element[0]->str, &end, 10);
        const redisReply *d = r->element[1];
        if (end != r->element[0]->str + r->element[0]->len || v == 0) {
            snprintf(err, errlen, "%s: rv is not a version", key);
            rc = -1;
        } else if (v > *rv) {
            pd__apply a = { t, 0 }; /* its RESET first: the snapshot holds all */
            if (pd_reserve_log_decode((const unsigned char *)d->str, d->len, pd__apply_record, &a) != d->len) {
                snprintf(err, errlen, "%s: the snapshot at %llu does not decode", key, v);
                rc = -1;
            } else {
                *refused += a.refused;
                *rv = (uint64_t)v;
                rc = 0;
            }
        }
    }
    freeReplyObject(r);
    return rc;
}

int pd_reserve_shared_catch_up(pd_redis_log *rl, const char *scene, pd_reserve *t, uint64_t *rv,
                               uint64_t *refused, char *err, size_t errlen)
{
    char key[512], from[32], count[16];
    pd__key(rl, scene, key, sizeof key);
    snprintf(count, sizeof count, "%u", PD_RESERVE_SHARED_BATCH);
    /* A table with nothing applied starts at the snapshot, if any: the
     * stream may be trimmed below it. */
    if (*rv == 0 && pd__load_snapshot(rl, scene, t, rv, refused, err, errlen) < 0)
        return -1;
    int loads = 0;
    for (;;) {
        snprintf(from, sizeof from, "(0-%" PRIu64, *rv);
        const char *argv[] = { "XRANGE", key, from, "+", "COUNT", count };
        size_t argvlen[6];
        for (int i = 0; i < 6; i++)
            argvlen[i] = strlen(argv[i]);
        int io = 0;
        redisReply *r = pd_redis_log_command(rl, 6, argv, argvlen, &io, err, errlen);
        if (!r)
            return -1;
        if (r->type != REDIS_REPLY_ARRAY) {
            snprintf(err, errlen, "XRANGE %s: not an array", key);
            freeReplyObject(r);
            return -1;
        }
        const size_t got = r->elements;
        int reload = 0;
        for (size_t i = 0; i < got && !reload; i++) {
            const redisReply *e = r->element[i];
            const redisReply *fields = e->type == REDIS_REPLY_ARRAY && e->elements == 2 ? e->element[1] : NULL;
            const uint64_t v = e->type == REDIS_REPLY_ARRAY && e->elements == 2 ? pd__id_version(e->element[0]) : 0;
            if (i == 0 && v > *rv + 1 && loads < PD_RESERVE_SHARED_SNAPSHOT_TRIES) {
                /* Trimmed past this table (a snapshot covers what went):
                 * the table as the newest snapshot has it, then on. */
                reload = 1;
                break;
            }
            if (v != *rv + 1 || !fields || fields->type != REDIS_REPLY_ARRAY || fields->elements != 2 ||
                fields->element[1]->type != REDIS_REPLY_STRING) {
                snprintf(err, errlen, "%s: entry after 0-%" PRIu64 " is not 0-%" PRIu64 " with a field \"d\"", key,
                         *rv, *rv + 1);
                freeReplyObject(r);
                return -1;
            }
            const redisReply *d = fields->element[1];
            pd__apply a = { t, 0 };
            size_t used = pd_reserve_log_decode((const unsigned char *)d->str, d->len, pd__apply_record, &a);
            if (used != d->len) {
                snprintf(err, errlen, "%s: entry 0-%" PRIu64 " does not decode", key, v);
                freeReplyObject(r);
                return -1;
            }
            *refused += a.refused;
            *rv = v;
        }
        freeReplyObject(r);
        if (reload) {
            loads++;
            const uint64_t was = *rv;
            const int rc = pd__load_snapshot(rl, scene, t, rv, refused, err, errlen);
            if (rc < 0)
                return -1;
            if (rc == 1) {
                snprintf(err, errlen, "%s: the stream starts past 0-%" PRIu64 " and no snapshot covers it", key,
                         was);
                return -1;
            }
            continue; /* a newer snapshot may have trimmed meanwhile: read on, or load again */
        }
        if (got < PD_RESERVE_SHARED_BATCH)
            return 0;
    }
}

/* XADD key id d p[0..n): 0, 1 refused as at or below the top, -1 err. */
static int pd__xadd(pd_redis_log *rl, const char *scene, const char *id, const unsigned char *p, size_t n, char *err,
                    size_t errlen)
{
    char key[512];
    pd__key(rl, scene, key, sizeof key);
    const char *argv[] = { "XADD", key, id, "d", (const char *)p };
    const size_t argvlen[] = { 4, strlen(key), strlen(id), 1, n };
    int io = 0;
    redisReply *r = pd_redis_log_command(rl, 5, argv, argvlen, &io, err, errlen);
    if (!r)
        /* Redis's refusal of an id at or below the stream's top: another
         * replica appended rv + 1 first. */
        return !io && strstr(err, "equal or smaller") ? 1 : -1;
    freeReplyObject(r);
    return 0;
}

int pd_reserve_shared_append(pd_redis_log *rl, const char *scene, uint64_t rv, const unsigned char *p, size_t n,
                             char *err, size_t errlen)
{
    char id[32];
    snprintf(id, sizeof id, "0-%" PRIu64, rv + 1);
    return pd__xadd(rl, scene, id, p, n, err, errlen);
}

int pd_reserve_shared_append_next(pd_redis_log *rl, const char *scene, const unsigned char *p, size_t n, char *err,
                                  size_t errlen)
{
    return pd__xadd(rl, scene, "0-*", p, n, err, errlen) == 0 ? 0 : -1;
}

int pd_reserve_shared_reset(pd_redis_log *rl, const char *scene, char *err, size_t errlen)
{
    pd_reserve_log_buf b = { 0 };
    int rc = -1;
    if (pd_reserve_log_encode(&b, scene, NULL) != 0)
        snprintf(err, errlen, "out of memory");
    else
        rc = pd_reserve_shared_append_next(rl, scene, b.p, b.n, err, errlen);
    pd_reserve_log_buf_free(&b);
    return rc;
}

int pd_reserve_shared_snapshot(pd_redis_log *rl, const char *scene, const pd_reserve *t, uint64_t rv, char *err,
                               size_t errlen)
{
    char key[512], snap[512], ver[32];
    pd__key(rl, scene, key, sizeof key);
    pd__snap_key(rl, scene, snap, sizeof snap);
    snprintf(ver, sizeof ver, "%" PRIu64, rv);
    /* The compacted file log's form: RESET, then CLOCK and a RESTORE per
     * agent (pd_reserve_log.h). */
    pd_reserve_log_buf b = { 0 };
    if (pd_reserve_log_dump(&b, scene, t) != 0) {
        pd_reserve_log_buf_free(&b);
        snprintf(err, errlen, "out of memory encoding the reservations of scene '%s'", scene);
        return -1;
    }
    const char *argv[] = { "EVAL", PD__SNAP_SCRIPT, "2", key, snap, ver, (const char *)b.p };
    const size_t argvlen[] = { 4, sizeof PD__SNAP_SCRIPT - 1, 1, strlen(key), strlen(snap), strlen(ver), b.n };
    int io = 0;
    redisReply *r = pd_redis_log_command(rl, 7, argv, argvlen, &io, err, errlen);
    pd_reserve_log_buf_free(&b);
    if (!r)
        return -1;
    int rc = -1;
    if (r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_STRING) {
        if (strcmp(r->str, "OK") == 0)
            rc = 0;
        else if (strcmp(r->str, "HAVE") == 0)
            rc = 1;
        else
            snprintf(err, errlen, "%s: no entry 0-%" PRIu64 " (%s): not snapshotted", key, rv, r->str);
    } else {
        snprintf(err, errlen, "the snapshot script answered something else");
    }
    freeReplyObject(r);
    return rc;
}
