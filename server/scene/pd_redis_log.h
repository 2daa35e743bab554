/*
 * pd_redis_log.h - the store's change log (pd_store.h, pd_changelog) kept
 * in Redis Streams, one Stream per scene, for replicas that share one log
 * (issue 32; config "log": {"redis": "HOST:PORT"}).
 *
 * Every append is one FCALL of a Redis FUNCTION that pathd installs
 * (FUNCTION LOAD REPLACE, the Lua library "pathd"): atomically, in one
 * round trip, it answers a retried change by its idempotency key with the
 * version it made the first time, refuses a change whose expected version
 * is not the scene's version in the log (compare-and-set), or that was
 * made on another incarnation of the scene (below), gives the next
 * dense version of the scene, and XADDs the record. The record is the file
 * journal's encoding (pd_journal_encode's payload), so replay and tails use
 * the same decoder and the same replay rules (pd_journal_replayer).
 *
 * Keys (PREFIX is the config's "log.prefix"; {NAME} is a hash tag, so a
 * later Redis Cluster keeps a scene's keys in one slot):
 *   PREFIX:{NAME}:log       the scene's Stream; entry id INC-VERSION, where
 *                           INC counts the scene's incarnations (a drop ends
 *                           one with id INC-0), fields v (the version), g
 *                           (the global sequence) and r (the record); a
 *                           reload's RESET also d (its definition's hash)
 *   PREFIX:{NAME}:meta      hash: v (version), inc, live (0 after a drop),
 *                           rdefs (the last 8 reload RESETs' "INC-V HASH",
 *                           newest first)
 *   PREFIX:{NAME}:idem:KEY  the version an idempotency key made (TTL)
 *   PREFIX:{NAME}:snaps     the scene's snapshots (pd_redis_snapshot.h; the
 *                           meta hash's "snap" and "snaps" name them)
 *   PREFIX:seq              the global sequence: replay merges the scenes'
 *                           streams in the order the changes were served
 *   PREFIX:scenes           set of the scene names that have a stream
 * PREFIX:seq and PREFIX:scenes are not in a scene's slot: the log needs one
 * Redis (or a Cluster without them, a later step).
 *
 * Layering: this file is in the scene layer and uses hiredis's blocking
 * API only: the store appends on the thread that makes the change (a
 * worker, under the log's lock), as the file journal writes, and replay
 * and tails run off the loop. Nothing here touches libuv; the replica's
 * tail (XREAD BLOCK on hiredis's libuv adapter) lives in server/net
 * (pd_replica.c).
 *
 * Threads: one connection, guarded by its own mutex, so tails (any thread)
 * and appends (under the change lock) take turns on it. A connection that
 * failed is dropped and made again by the next command.
 */
#ifndef PD_REDIS_LOG_H
#define PD_REDIS_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "pd_status.h"
#include "pd_store.h"

/* Reconnects: after a connect that failed, commands fail at once (the
 * change answers UNAVAILABLE) until a wait has passed, then one connect is
 * tried; the wait doubles from MIN to MAX after each failure, jittered
 * (a random point in its upper half), and is forgotten on a success. */
#define PD_REDIS_BACKOFF_MIN_MS 50u
#define PD_REDIS_BACKOFF_MAX_MS 2000u

typedef struct pd_redis_log_opts {
    const char *host;             /* a name or an address (no brackets) */
    uint16_t port;
    uint32_t timeout_ms;          /* connect, and each command */
    const char *prefix;           /* every key starts with "PREFIX:" */
    uint32_t dedup_ttl_s;         /* how long an idempotency key is remembered */
    /* Where replay reports a record it could not apply; may be NULL. */
    void (*warn)(void *user, const char *msg);
    void *warn_user;
} pd_redis_log_opts;

typedef struct pd_redis_log pd_redis_log;

/* A log over opts (copied); it connects at its first command. NULL with
 * the reason in err when memory ran out or opts cannot be used. */
pd_redis_log *pd_redis_log_create(const pd_redis_log_opts *opts, char *err, size_t errlen);
/* Frees the log and its connection; NULL is a no-op. */
void pd_redis_log_destroy(pd_redis_log *rl);

/* The log as the store's change log: its close is pd_redis_log_destroy. */
pd_changelog pd_redis_changelog(pd_redis_log *rl);
/* pd_redis_log_create as a change log (ops NULL with err when it failed). */
pd_changelog pd_redis_log_open(const pd_redis_log_opts *opts, char *err, size_t errlen);

/* What an append does to the scene's version. */
typedef enum pd_redis_append_op {
    PD_REDIS_NEXT = 0,            /* a new version: version + 1 (an update, a reload's RESET) */
    PD_REDIS_NEW = 1,             /* a new incarnation at `version` (a new scene, an instance) */
    PD_REDIS_DROP = 2,            /* the incarnation ends at the version it has */
} pd_redis_append_op;

typedef struct pd_redis_append {
    const char *scene;
    pd_redis_append_op op;
    int has_expected;             /* 1: refuse unless the log's version is `expected` */
    uint64_t expected;            /* NEXT of a scene the log has no live record of: the
                                     version it has (a config scene as loaded), else 0 */
    uint64_t version;             /* NEW: the version the new incarnation starts at */
    const char *key;              /* the idempotency key, or NULL */
    const uint8_t *payload;       /* the record (pd_journal_encode's payload) */
    size_t len;
    const char *def;              /* a reload's RESET: the hash of the scene's definition
                                     (hex), kept in the entry as field d; NULL: none */
    int change;                   /* a change the store appends (not a reload's record): NEXT
                                     or DROP of a scene refused until rebuilt
                                     (pd_redis_log_set_refused) names no live incarnation, so
                                     Redis refuses it (refused_scene in the result) */
} pd_redis_append;

typedef struct pd_redis_append_result {
    /* PD_OK (appended, or a duplicate); PD_UNAVAILABLE: retryable, Redis
     * could not be reached or did not answer in time, nothing was applied
     * by this call's answer (a timeout may still have reached Redis: a
     * retry with the same key is safe); PD_STALE_VERSION: the log's version
     * is not the expected one (version holds the log's); PD_SCENE_EXISTS:
     * NEW of a live scene; PD_UNKNOWN_SCENE: DROP of one that is not live;
     * PD_INTERNAL: an answer that makes no sense, or memory. */
    pd_status status;
    uint64_t version;             /* OK: the version made (a duplicate: the first time's) */
    int duplicate;                /* OK: the key had been seen; nothing appended */
    int has_id;                   /* OK, not a duplicate: inc and entry_v name its entry */
    uint64_t inc, entry_v;        /* its entry id INC-V (a drop's V is 0) */
    int other_incarnation;        /* STALE_VERSION: the log's live incarnation of the scene is
                                     not the one this pathd serves (made anew since; version
                                     holds its version), or none is (version 0); OK, a
                                     duplicate: the key's change was made on another
                                     incarnation than the one this append named */
    uint64_t sent_inc;            /* the incarnation this append named (0: none, versions alone) */
    uint64_t log_inc;             /* other_incarnation: the log's INC of the scene (the live
                                     one's, or the drop's that ended the last one; a
                                     duplicate: the INC of the key's entry) */
    int chain;                    /* UNAVAILABLE: refused because the append before it in
                                     its pipeline is not the log's last (it was refused,
                                     or another replica's came between) */
    int refused_scene;            /* sent while its scene was refused until rebuilt (a
                                     change: pd_redis_append.change) */
    char message[256];            /* why, when status != PD_OK */
} pd_redis_append_result;

/* One append through the FUNCTION. Any thread; blocks for at most about
 * two timeouts (a reconnect, then the command). Returns out->status. */
pd_status pd_redis_log_append(pd_redis_log *rl, const pd_redis_append *a, pd_redis_append_result *out);

/* n appends of one scene in one pipeline: the n FCALLs are written
 * together and their answers read in order (Redis runs one connection's
 * commands in order, and with appendfsync always one fsync covers the
 * appends that arrive together). Each append after the first is chained
 * to the one before (the record was made on it): Redis refuses it (out
 * .chain, UNAVAILABLE) unless the scene's last append is that one, so a
 * refused append - a compare-and-set that failed, a key seen at another
 * version, an error - refuses every later one of the pipeline, and none
 * lands on a version another replica made. out[i] is append i's result;
 * when the connection fails with appends in flight, each unanswered one
 * is UNAVAILABLE (it may have reached Redis: a retry with its key is
 * answered DUP, never applied twice). Returns how many appends from the
 * first were answered OK (appended, or a duplicate). */
size_t pd_redis_log_append_many(pd_redis_log *rl, const pd_redis_append *a, size_t n, pd_redis_append_result *out);

/* The version of the last entry of scene's reservation stream
 * (pd_reserve_shared.h; 0: none) as this pathd's last append of the
 * scene, answered OK, found it: 1, or 0 when not known (no such answer
 * yet, an append of the scene since answered otherwise or under way, or
 * the scene was not kept among the few recorded). Reservations appended
 * before that update are at or below it: its cut of the reservations
 * need not read the stream when the table is there already. Any thread. */
int pd_redis_log_resv_top(pd_redis_log *rl, const char *scene, uint64_t *top);

/* 1 when entry_id ("INC-V") of scene's stream is at or before this
 * pathd's last new incarnation (a new scene, an instance) or drop of the
 * scene that the log took: what this pathd serves of the scene is then
 * the log's through that entry already, so its tail skips it. Without
 * this a tail behind this pathd's own appends read its own older entry
 * of a name since dropped or made again as a change to apply: a drop's
 * own earlier new scene was made again (and served until the tail read
 * the drop), an update of the older incarnation was applied to the new
 * one. 0 for an entry after it, a scene with no such append, an id that
 * is not one. Any thread. */
int pd_redis_log_own_past(pd_redis_log *rl, const char *scene, const char *entry_id);
/* The mark lives until the tail reads the marked entry itself (every
 * later id is higher: it can skip nothing more), so it never outlives a
 * failover that lost it by more than the reconnect's check below. */
/* Forgets scene's mark and its incarnation (below) (a log that went
 * back: its ids start again). Any thread. */
void pd_redis_log_own_forget(pd_redis_log *rl, const char *scene);

/* The incarnation check. Versions restart at 1 on a new scene, so a
 * version alone does not say which incarnation of a name an append was
 * made on: a replica still serving the older one at version v (its tail
 * behind another replica's drop and new scene) would append onto the new
 * one once that reached v. Every append of a scene (but a new one) names
 * the INC of the entries what this pathd serves of it came from, when
 * known, and the FUNCTION refuses another (STALE_VERSION, as a lost
 * version race; out.other_incarnation). Known from this pathd's own
 * appends' answers, replay, and served_entry below; not known (versions
 * alone) for a scene the log has no entry of, after a duplicate's or an
 * older library's answer, or once forgotten. */
/* What this pathd serves of scene is the log's through its entry
 * entry_id ("INC-V"; the tail applied it, a rebuild read up to it): its
 * incarnation is INC; after a drop (V 0), or an id that is not one, none
 * is known. Called where what is served changes (under the store's
 * change lock, so an append's check matches the scene it was made on).
 * Any thread. */
void pd_redis_log_served_entry(pd_redis_log *rl, const char *scene, const char *entry_id);
/* The incarnation known for scene: 1 with *inc, or 0. Any thread. */
int pd_redis_log_incarnation(pd_redis_log *rl, const char *scene, uint64_t *inc);
/* The scene r serves as `scene` (acquired, NULL when none) and in *inc the
 * incarnation its state is of (0: not known), read together under the
 * change lock: every change of what is served and of its incarnation (the
 * store's own, the tail's) is made under it, so the two match - read
 * apart, a drop and a new scene between them would pair the older state
 * with the newer INC. Waits for a change in flight (an append's round
 * trip). Any thread but one holding the change lock. */
pd_scene *pd_redis_log_served_scene(pd_redis_log *rl, pd_registry *r, const char *scene, uint64_t *inc);
/* A scene's mark: its entry id INC-V. */
typedef struct pd_redis_own_mark {
    char scene[PD_CONF_MAX_NAME];
    uint64_t inc, v;
} pd_redis_own_mark;
/* The reconnect's check of a mark seen (pd_redis_log_own_marked) against
 * its scene's stream's last entry id last_id (NULL or "": an empty
 * stream): a stream that ends before the mark lost this pathd's append
 * (a failover), and another replica's entries that take its ids' place
 * must not be skipped: the mark is forgotten, 1 (the caller refuses a
 * scene it serves, as a log that went back). 0: kept, no mark, or a
 * mark made since (an append the new log took). Any thread. */
int pd_redis_log_own_check(pd_redis_log *rl, const pd_redis_own_mark *seen, const char *last_id);
/* The marks, up to max of them copied into marks: how many there are.
 * Any thread. */
size_t pd_redis_log_own_marked(pd_redis_log *rl, pd_redis_own_mark *marks, size_t max);

/* A scene the replica does not serve until it is rebuilt from the log
 * (pd_replica.c: its log went back): refused 1 from the refusal on, 0
 * once it is rebuilt. While refused every append of it is refused
 * UNAVAILABLE - a change already queued in its lane would be built on the
 * history left behind, or on a state pd_redis_snap_rebuild has half
 * made, and land in the log where the rebuild cannot apply it - and no
 * snapshot of it is written (what is served is of the history left
 * behind; another replica may have written that INC-V since). 0, or -1
 * when memory ran out (not refused). Any thread. */
int pd_redis_log_set_refused(pd_redis_log *rl, const char *scene, int refused);
/* 1 while scene is refused (above). Any thread. */
int pd_redis_log_refused(pd_redis_log *rl, const char *scene);
/* Tests: fn(user) runs in the change log's append of one record after
 * its refusal checks, before the record is sent (NULL: none). */
void pd_redis_log_set_append_pause(pd_redis_log *rl, void (*fn)(void *user), void *user);

/* A replica's tail brings this pathd up to the log (server/net
 * pd_replica.c): a change refused because the log moved on (another
 * replica's change came first: a compare-and-set refusal, a scene made or
 * dropped there) is then retryable (UNAVAILABLE, nothing served), not a
 * failed log. Without a tail such a refusal fails the log. */
void pd_redis_log_set_tailed(pd_redis_log *rl, int tailed);

/* Where replay left scene's stream: 1 with the id of the last entry it
 * read in id (the replica's tail reads on after it), 0 for a scene replay
 * did not see (its whole stream is new). Any thread. */
int pd_redis_log_position(pd_redis_log *rl, const char *scene, char *id, size_t len);
/* The set of scene names with a stream ("PREFIX:scenes") into buf. */
void pd_redis_log_scenes_key(const pd_redis_log *rl, char *buf, size_t len);

/* For /metrics; any thread, never waits. */
typedef struct pd_redis_log_counters {
    int connected;                /* the append connection is up */
    uint64_t reconnects;          /* connects after the first that succeeded */
    uint64_t connect_failures;
    uint64_t appends;             /* FCALLs Redis answered (one sent again after this pathd's
                                     library was loaded anew counts once: its last answer) */
    uint64_t append_us;           /* their round trips, summed (microseconds) */
    uint64_t append_failures;     /* appends refused UNAVAILABLE (no answer) */
} pd_redis_log_counters;
void pd_redis_log_stats(pd_redis_log *rl, pd_redis_log_counters *out);

/* The scene's stream key ("PREFIX:{NAME}:log") into buf. */
void pd_redis_log_stream_key(const pd_redis_log *rl, const char *scene, char *buf, size_t len);

/* The version the change keyed `key` of scene `scene` made, as the
 * FUNCTION's dedup key holds it (for log.dedup_ttl_s): 1 with *version,
 * 0 when the log has not seen the key, -1 with why when Redis could not
 * be asked (retryable). */
int pd_redis_log_key_version(pd_redis_log *rl, const char *scene, const char *key, uint64_t *version, char *why,
                             size_t whylen);

/* ---- hooks for the snapshots in Redis (pd_redis_snapshot.h) --------------- */

struct redisReply;

/* The keys' prefix (opts.prefix). */
const char *pd_redis_log_prefix(const pd_redis_log *rl);
/* One command on the log's connection (taking its turn with appends and
 * tails; connecting first when needed). The reply, never an error reply,
 * or NULL with the reason in err: *io 1 when Redis could not be reached
 * (retryable), 0 when it answered an error (the text in err). */
struct redisReply *pd_redis_log_command(pd_redis_log *rl, int argc, const char **argv, const size_t *argvlen,
                                        int *io, char *err, size_t errlen);
/* What the snapshots (pd_redis_snapshot.h) do at the log's points, each
 * with `user`. A table rather than calls, so the log does not depend on
 * the snapshots' file (which depends on it). */
typedef struct pd_redis_log_hooks {
    void (*note)(void *user, const pd_journal_record *rec);    /* after an append */
    int (*due)(void *user);                                     /* wants_compaction */
    int (*write_due)(void *user, pd_registry *r, char *err, size_t errlen);   /* snapshot */
    /* replay: where scene starts (applied with rp; from: "(ID"), 0 or -1 */
    int (*start)(void *user, pd_journal_replayer *rp, const char *scene, char *from, size_t fromlen, char *err,
                 size_t errlen);
    int (*after_replay)(void *user, char *err, size_t errlen);
    void *(*reload_begin)(void *user, pd_registry *r, const pd_scene_set *set);   /* NULL: out of memory */
    void (*reload_end)(void *user, pd_registry *r, void *state);
    /* under the change lock: a reload's record of scene (NULL: any) not in
     * the log yet, after one more try: 1 with why, else 0 */
    int (*held)(void *user, const char *scene, char *why, size_t whylen);
    uint64_t (*bytes)(void *user);                              /* sizes' snapshot bytes */
    void (*destroy)(void *user);                                /* at the log's destroy */
} pd_redis_log_hooks;
/* Attaches snapshots (before replay; the log then destroys them): replay
 * starts each scene where they say and reads its stream after it, appends
 * note when one is due, the store's compaction (pd_changelog_ops.snapshot)
 * writes them and trims, a reload goes through them. */
void pd_redis_log_set_snapshots(pd_redis_log *rl, const pd_redis_log_hooks *hooks, void *user);
/* A name no other append's tag or key has, anywhere: prefix, this log's
 * random part and a count, into buf. */
void pd_redis_log_unique(pd_redis_log *rl, const char *prefix, char *buf, size_t len);
/* Makes the log refuse every later change, saying why (a reload's record
 * it did not take: what is served is past the log). */
void pd_redis_log_fail(pd_redis_log *rl, const char *why);

#endif
