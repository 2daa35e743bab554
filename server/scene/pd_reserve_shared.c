/*
 * pd_reserve_shared.c - reservation entries on a Redis Stream per scene
 * (pd_reserve_shared.h): the catch-up (XRANGE after the table's rv) and
 * the compare-and-set append (XADD with the explicit id 0-(rv+1)).
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

int pd_reserve_shared_catch_up(pd_redis_log *rl, const char *scene, pd_reserve *t, uint64_t *rv,
                               uint64_t *refused, char *err, size_t errlen)
{
    char key[512], from[32], count[16];
    pd__key(rl, scene, key, sizeof key);
    snprintf(count, sizeof count, "%u", PD_RESERVE_SHARED_BATCH);
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
        for (size_t i = 0; i < got; i++) {
            const redisReply *e = r->element[i];
            const redisReply *fields = e->type == REDIS_REPLY_ARRAY && e->elements == 2 ? e->element[1] : NULL;
            const uint64_t v = e->type == REDIS_REPLY_ARRAY && e->elements == 2 ? pd__id_version(e->element[0]) : 0;
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
