/*
 * test_redis_log.c - the change log on Redis Streams (pd_redis_log.h)
 * against a real redis-server that the test starts on a loopback port with
 * a temporary directory (appendonly, appendfsync always), and stops. The
 * FUNCTION gives dense versions, answers a retried key with its first
 * version, refuses a stale expected version; a tail from a version gives
 * exactly the records after it; a store driven through the log replays
 * into a fresh store to the same scenes, cell by cell; and with Redis down
 * a change fails with a retryable status (UNAVAILABLE), nothing applied,
 * and goes through once Redis is back; a resent key applies once.
 *
 * redis-server comes from the test package set (scripts/install-deps.sh
 * test): a machine without it fails here, naming the package, never skips.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>

#include "open_scene.h"
#include "pd_journal.h"
#include "pd_redis_log.h"
#include "pd_store.h"
#include "redis_server.h"
#include "same_scene.h"
#include "test_rng.h"

/* Each scene is SIDE x SIDE open cells. */
#define SIDE 24
#include "store_check.h"

/* The redis-server every test here uses. */
static redis_srv srv;

static int group_setup(void **state)
{
    (void)state;
    redis_srv_start(&srv);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    return redis_srv_remove(&srv);
}

/* An integer command's answer, on a connection of the test's own. */
static long long raw_int(const char *fmt, const char *arg)
{
    redisContext *c = redis_srv_connect(&srv);
    assert_non_null(c);
    redisReply *r = redisCommand(c, fmt, arg);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    long long v = r->integer;
    freeReplyObject(r);
    redisFree(c);
    return v;
}

/* ---- logs and stores ------------------------------------------------------- */

static pd_redis_log *log_open(const char *prefix)
{
    char err[256];
    const pd_redis_log_opts o = { .host = "127.0.0.1", .port = (uint16_t)srv.port, .timeout_ms = 500,
                                  .prefix = prefix, .dedup_ttl_s = 60 };
    pd_redis_log *rl = pd_redis_log_create(&o, err, sizeof err);
    if (!rl)
        fail_msg("log: %s", err);
    return rl;
}

/* One append of a dummy record. */
static pd_status append(pd_redis_log *rl, const char *scene, pd_redis_append_op op, int has_expected,
                        uint64_t expected, const char *key, pd_redis_append_result *res)
{
    static const uint8_t payload[] = { 'r', 0, 'e', 'c' }; /* binary-safe: a NUL inside */
    const pd_redis_append a = { .scene = scene, .op = op, .has_expected = has_expected, .expected = expected,
                                .version = 1, .key = key, .payload = payload, .len = sizeof payload };
    return pd_redis_log_append(rl, &a, res);
}

static long long stream_len(pd_redis_log *rl, const char *scene)
{
    char key[256];
    pd_redis_log_stream_key(rl, scene, key, sizeof key);
    return raw_int("XLEN %s", key);
}

/* A store over a fresh config with the log of `prefix` replayed into it
 * and made its log. */
static pd_store *store_over(const char *prefix)
{
    pd_store *st = pd_store_create(config_registry(), NULL);
    assert_non_null(st);
    pd_changelog log = pd_redis_changelog(log_open(prefix));
    pd_journal_replay_stats stats;
    char err[256];
    if (pd_store_replay(st, log, &stats, err, sizeof err) != 0)
        fail_msg("replay: %s", err);
    assert_int_equal(stats.skipped, 0);
    pd_store_own_log(st, log, PD_CONF_FSYNC_ALWAYS);
    return st;
}

/* A fresh store over the config with the log of `prefix` replayed into it
 * serves what st serves. */
static void assert_replays_to(const char *prefix, pd_store *st)
{
    pd_store *again = store_over(prefix);
    assert_same_world(pd_store_registry(st), pd_store_registry(again));
    store_free(again);
}

/* ---- the FUNCTION ---------------------------------------------------------- */

/* Versions are dense: a new scene starts at its version, each NEXT makes
 * the one after, with or without an expected version; a drop ends the
 * incarnation and the name starts again at 1. */
static void test_function_gives_dense_versions(void **state)
{
    (void)state;
    pd_redis_log *rl = log_open("dense");
    pd_redis_append_result res;
    assert_int_equal(append(rl, "s", PD_REDIS_NEW, 0, 0, NULL, &res), PD_OK);
    assert_int_equal(res.version, 1);
    for (uint64_t v = 2; v <= 6; v++) {
        assert_int_equal(append(rl, "s", PD_REDIS_NEXT, v % 2, v - 1, NULL, &res), PD_OK);
        assert_int_equal(res.version, v);
        assert_false(res.duplicate);
    }
    assert_int_equal(stream_len(rl, "s"), 6);
    /* A config scene the log never saw goes on from the version it has. */
    assert_int_equal(append(rl, "cfg", PD_REDIS_NEXT, 1, 1, NULL, &res), PD_OK);
    assert_int_equal(res.version, 2);
    /* Dropped and made again: a new incarnation from 1. */
    assert_int_equal(append(rl, "s", PD_REDIS_DROP, 1, 6, NULL, &res), PD_OK);
    assert_int_equal(res.version, 6);
    assert_int_equal(append(rl, "s", PD_REDIS_NEW, 0, 0, NULL, &res), PD_OK);
    assert_int_equal(res.version, 1);
    assert_int_equal(append(rl, "s", PD_REDIS_NEXT, 0, 0, NULL, &res), PD_OK);
    assert_int_equal(res.version, 2);
    assert_int_equal(stream_len(rl, "s"), 9);
    /* The global sequence counts every append of every scene. */
    redisContext *c = redis_srv_connect(&srv);
    redisReply *r = redisCommand(c, "GET dense:seq");
    assert_non_null(r);
    assert_string_equal(r->str, "10");
    freeReplyObject(r);
    redisFree(c);
    pd_redis_log_destroy(rl);
}

/* A retried change with the same key is answered with the version it made
 * the first time and appends nothing; another key appends. */
static void test_retried_key_is_deduplicated(void **state)
{
    (void)state;
    pd_redis_log *rl = log_open("dedup");
    pd_redis_append_result res;
    assert_int_equal(append(rl, "s", PD_REDIS_NEW, 0, 0, "create-s", &res), PD_OK);
    assert_int_equal(append(rl, "s", PD_REDIS_NEXT, 1, 1, "u-1", &res), PD_OK);
    assert_int_equal(res.version, 2);
    assert_false(res.duplicate);
    /* The retry: even with the expected version it was first sent with,
     * now stale, it is answered, not refused. */
    assert_int_equal(append(rl, "s", PD_REDIS_NEXT, 1, 1, "u-1", &res), PD_OK);
    assert_int_equal(res.version, 2);
    assert_true(res.duplicate);
    assert_int_equal(append(rl, "s", PD_REDIS_NEW, 0, 0, "create-s", &res), PD_OK);
    assert_true(res.duplicate);
    assert_int_equal(res.version, 1);
    assert_int_equal(stream_len(rl, "s"), 2);
    assert_int_equal(append(rl, "s", PD_REDIS_NEXT, 1, 2, "u-2", &res), PD_OK);
    assert_int_equal(res.version, 3);
    assert_false(res.duplicate);
    assert_int_equal(stream_len(rl, "s"), 3);
    /* The key expires: the TTL is the configured one. */
    assert_true(raw_int("TTL %s", "dedup:{s}:idem:u-1") > 0);
    assert_true(raw_int("TTL %s", "dedup:{s}:idem:u-1") <= 60);
    pd_redis_log_destroy(rl);
}

/* Compare-and-set: an expected version other than the log's is refused
 * with the log's version, and nothing is appended; so are a new scene
 * over a live one and a drop of one that is not live. */
static void test_stale_expected_version_is_refused(void **state)
{
    (void)state;
    pd_redis_log *rl = log_open("cas");
    pd_redis_append_result res;
    assert_int_equal(append(rl, "s", PD_REDIS_NEW, 0, 0, NULL, &res), PD_OK);
    assert_int_equal(append(rl, "s", PD_REDIS_NEXT, 1, 1, NULL, &res), PD_OK);
    assert_int_equal(append(rl, "s", PD_REDIS_NEXT, 1, 2, NULL, &res), PD_OK);
    assert_int_equal(append(rl, "s", PD_REDIS_NEXT, 1, 2, NULL, &res), PD_STALE_VERSION);
    assert_int_equal(res.version, 3);
    assert_non_null(strstr(res.message, "the log is at version 3, not 2"));
    assert_int_equal(append(rl, "s", PD_REDIS_NEXT, 1, 7, "k", &res), PD_STALE_VERSION);
    assert_int_equal(append(rl, "s", PD_REDIS_DROP, 1, 2, NULL, &res), PD_STALE_VERSION);
    assert_int_equal(append(rl, "s", PD_REDIS_NEW, 0, 0, NULL, &res), PD_SCENE_EXISTS);
    assert_int_equal(stream_len(rl, "s"), 3);
    /* A refused key was not remembered: sent right, it appends. */
    assert_int_equal(append(rl, "s", PD_REDIS_NEXT, 1, 3, "k", &res), PD_OK);
    assert_int_equal(res.version, 4);
    assert_int_equal(append(rl, "s", PD_REDIS_DROP, 1, 4, NULL, &res), PD_OK);
    assert_int_equal(append(rl, "s", PD_REDIS_DROP, 1, 4, NULL, &res), PD_UNKNOWN_SCENE);
    assert_int_equal(stream_len(rl, "s"), 5);
    pd_redis_log_destroy(rl);
}

/* ---- the store through the Redis log --------------------------------------- */

/* A tail from a version gives exactly the scene's records after it, in
 * order; from 0 its whole history; a dropped scene's ends with the drop;
 * a point the scene never was at is "not held". */
static void test_tail_from_a_version(void **state)
{
    (void)state;
    uint64_t rng = 7;
    pd_store *st = store_over("tail");
    check_tail_from_a_version(st, &rng);
    tailed g;
    pd_store_change ch;
    assert_int_equal(tail_of(st, "town", 40, &g), 1);
    assert_int_equal(g.n, 0);
    assert_int_equal(pd_store_drop_scene(st, "arena", 0, &ch), PD_OK);
    assert_int_equal(tail_of(st, "arena", 7, &g), 0);
    assert_int_equal(g.n, 1);
    assert_int_equal(g.types[0], PD_JOURNAL_DROP);
    store_free(st);
}

/* Every kind of change through the store lands in the Redis log, and its
 * replay into a fresh store gives the same scenes, cell by cell: new
 * scenes, instances, updates across scenes, a drop, a name made again. */
static void test_store_replays_to_the_same_scenes(void **state)
{
    (void)state;
    static const char *const names[] = { "town", "arena", "arena-1" };
    uint64_t rng = 31;
    pd_store *st = store_over("store");
    assert_true(pd_store_has_log(st));
    pd_store_change ch;
    assert_int_equal(pd_store_add_scene(st, open_scene("arena", SIDE), &ch), PD_OK);
    assert_int_equal(ch.version, 1);
    assert_int_equal(pd_store_add_scene(st, open_scene("scratch", SIDE), &ch), PD_OK);
    for (int i = 0; i < 6; i++)
        random_update(st, names[i % 2], &rng);
    assert_int_equal(pd_store_add_instance(st, "arena-1", "arena", &ch), PD_OK);
    for (int i = 0; i < 30; i++)
        random_update(st, names[i % 3], &rng);
    assert_int_equal(pd_store_drop_scene(st, "scratch", 0, &ch), PD_OK);
    assert_int_equal(ch.status, PD_OK);
    assert_int_equal(pd_store_add_instance(st, "arena-2", "arena", &ch), PD_OK);
    random_update(st, "arena-2", &rng);
    assert_replays_to("store", st);

    /* scratch again: a new incarnation in the same stream. */
    assert_int_equal(pd_store_add_scene(st, open_scene("scratch", SIDE), &ch), PD_OK);
    random_update(st, "scratch", &rng);
    random_update(st, "scratch", &rng);
    assert_int_equal(version_of(st, "scratch"), 3);
    assert_replays_to("store", st);

    uint64_t log_bytes, snap_bytes;
    int failed;
    assert_int_equal(pd_store_log_state(st, &log_bytes, &snap_bytes, &failed), 1);
    assert_true(log_bytes > 0);
    assert_int_equal(failed, 0);
    store_free(st);
}

/* Two stores on one log: the second one's update of a version the first
 * already made is refused (compare-and-set), never served, and the log
 * then refuses changes with the reason: this pathd must be rebuilt from
 * the log (the tailing replica's work). */
static void test_second_writer_is_refused(void **state)
{
    (void)state;
    uint64_t rng = 5;
    pd_store *a = store_over("two");
    pd_store *b = store_over("two");
    random_update(a, "town", &rng);
    pd_point p = { 1, 1 };
    pd_scene_update op = { .op = PD_UPDATE_BLOCK, .cells = &p, .n_cells = 1 };
    pd_store_update out;
    assert_int_equal(pd_store_update_cells(b, "town", &op, 1, &out), PD_INTERNAL);
    assert_non_null(strstr(out.message, "the log is at version 2, not 1"));
    assert_int_equal(version_of(b, "town"), 1);
    uint64_t lb, sb;
    int failed;
    pd_store_log_state(b, &lb, &sb, &failed);
    assert_int_equal(failed, 1);
    random_update(a, "town", &rng);
    assert_replays_to("two", a);
    store_free(b);
    store_free(a);
}

/* Keyed changes through the store: a resent update whose first answer was
 * lost (it went through) is answered with the first one's version and
 * applies nothing; a new key makes a new version; a resent instance
 * whose first try the log took, but this pathd never served (store b
 * made it; store a did not hear), is served at the log's version. */
static void test_store_answers_a_resent_key_once(void **state)
{
    (void)state;
    pd_store *st = store_over("keyed");
    pd_point p = { 4, 5 };
    pd_scene_update op = { .op = PD_UPDATE_BLOCK, .cells = &p, .n_cells = 1 };
    pd_store_update out;
    assert_int_equal(pd_store_update_cells_keyed(st, "town", &op, 1, "client-7:1", &out), PD_OK);
    assert_int_equal(out.update.version, 2);
    pd_scene_update unblock = { .op = PD_UPDATE_COST, .cost = 3, .cells = &p, .n_cells = 1 };
    /* The same key with other cells: still the first change's answer
     * (the key names a change, whatever is resent under it). */
    assert_int_equal(pd_store_update_cells_keyed(st, "town", &unblock, 1, "client-7:1", &out), PD_OK);
    assert_int_equal(out.update.version, 2);
    assert_int_equal(out.update.cells_changed, 0);
    assert_int_equal(version_of(st, "town"), 2);
    pd_scene *s = pd_registry_acquire(pd_store_registry(st), "town");
    assert_int_equal(pd_grid_get(s->grid, 4, 5), 0); /* still blocked: nothing applied */
    pd_scene_release(s);
    assert_int_equal(pd_store_update_cells_keyed(st, "town", &unblock, 1, "client-7:2", &out), PD_OK);
    assert_int_equal(out.update.version, 3);
    /* An empty key is no key: the same change twice makes two versions. */
    assert_int_equal(pd_store_update_cells_keyed(st, "town", &op, 1, "", &out), PD_OK);
    assert_int_equal(pd_store_update_cells_keyed(st, "town", &unblock, 1, "", &out), PD_OK);
    assert_int_equal(out.update.version, 5);

    /* b appends an instance under a key; a, which did not hear of it,
     * sends the same change with the same key: the log answers with its
     * version, which a serves (the change the log holds). */
    pd_store *b = store_over("keyed");
    pd_store_change ch;
    assert_int_equal(pd_store_add_instance_keyed(b, "town-1", "town", "inst-1", &ch), PD_OK);
    assert_int_equal(pd_store_add_instance_keyed(st, "town-1", "town", "inst-1", &ch), PD_OK);
    assert_int_equal(ch.version, 1);
    assert_true(ch.applied);
    assert_int_equal(version_of(st, "town-1"), 1);
    assert_replays_to("keyed", st);
    store_free(b);
    store_free(st);
}

/* What a replica's tail does with records (pd_store_apply_logged): b
 * applies a's changes read from the log (a new scene, updates of two
 * scenes, an instance, a drop) and serves what a serves; read again, every
 * one is HAD (b has it); b's own change read back is HAD; an update past
 * the next version is a GAP, one on a scene b does not serve a no-op. */
typedef struct applier {
    pd_store *st;
    pd_journal_replayer *rp;
    size_t n[4];                  /* by pd_store_logged */
} applier;

static int apply_one(void *user, const pd_journal_record *rec)
{
    applier *ap = user;
    char why[256];
    pd_store_logged o = pd_store_apply_logged(ap->st, ap->rp, rec, why, sizeof why);
    assert_true((unsigned)o < 4);
    ap->n[o]++;
    return 0;
}

static void apply_tail(applier *ap, pd_store *from, const char *scene)
{
    char err[256];
    memset(ap->n, 0, sizeof ap->n);
    if (pd_store_tail(from, scene, 0, apply_one, ap, err, sizeof err) != 0)
        fail_msg("tail of %s: %s", scene, err);
}

static void test_apply_logged_records(void **state)
{
    (void)state;
    uint64_t rng = 21;
    pd_store *a = store_over("apply"), *b = store_over("apply");
    pd_store_change ch;
    assert_int_equal(pd_store_add_scene(a, open_scene("arena", SIDE), &ch), PD_OK);
    for (int i = 0; i < 4; i++) {
        random_update(a, "town", &rng);
        random_update(a, "arena", &rng);
    }
    assert_int_equal(pd_store_add_instance(a, "town-1", "town", &ch), PD_OK);
    random_update(a, "town-1", &rng);
    assert_int_equal(pd_store_add_scene(a, open_scene("gone", SIDE), &ch), PD_OK);
    assert_int_equal(pd_store_drop_scene(a, "gone", 0, &ch), PD_OK);

    applier ap = { .st = b, .rp = pd_journal_replayer_create(pd_store_registry(b), NULL) };
    assert_non_null(ap.rp);
    /* In the log's order: town before its instance, each stream whole. */
    static const char *const order[] = { "town", "arena", "town-1", "gone" };
    static const size_t applied[] = { 4, 5, 2, 2 };
    for (size_t i = 0; i < 4; i++) {
        apply_tail(&ap, a, order[i]);
        assert_int_equal(ap.n[PD_STORE_LOGGED_APPLIED], applied[i]);
        assert_int_equal(ap.n[PD_STORE_LOGGED_NOOP] + ap.n[PD_STORE_LOGGED_GAP], 0);
    }
    assert_same_world(pd_store_registry(a), pd_store_registry(b));
    /* Read again: b has every one. */
    for (size_t i = 0; i < 3; i++) {
        apply_tail(&ap, a, order[i]);
        assert_int_equal(ap.n[PD_STORE_LOGGED_HAD], applied[i]);
    }
    /* b's own update comes back through the log as HAD. */
    uint64_t v = random_update(b, "town", &rng);
    apply_tail(&ap, b, "town");
    assert_int_equal(ap.n[PD_STORE_LOGGED_HAD], 5);
    assert_int_equal(version_of(b, "town"), v);
    /* An update two versions ahead: a record is missing. */
    pd_point p = { 1, 1 };
    pd_scene_update op = { .op = PD_UPDATE_BLOCK, .cells = &p, .n_cells = 1 };
    pd_journal_record rec = { .type = PD_JOURNAL_UPDATE, .version = v + 2, .ops = &op, .n_ops = 1 };
    snprintf(rec.scene, sizeof rec.scene, "town");
    char why[256];
    assert_int_equal(pd_store_apply_logged(b, ap.rp, &rec, why, sizeof why), PD_STORE_LOGGED_GAP);
    assert_non_null(strstr(why, "the scene is at version"));
    assert_int_equal(version_of(b, "town"), v);
    snprintf(rec.scene, sizeof rec.scene, "nowhere");
    assert_int_equal(pd_store_apply_logged(b, ap.rp, &rec, why, sizeof why), PD_STORE_LOGGED_NOOP);
    assert_string_equal(why, "no such scene");
    pd_journal_replayer_destroy(ap.rp);
    store_free(b);
    store_free(a);
}

/* The change answers UNAVAILABLE while the log's reconnect backs off, and
 * goes through within a few backoff periods of Redis coming back. */
static pd_status update_until_up(pd_store *st, const pd_scene_update *op, pd_store_update *out)
{
    for (int i = 0; i < 200; i++) { /* 200 x 20 ms: well past PD_REDIS_BACKOFF_MAX_MS */
        if (pd_store_update_cells(st, "town", op, 1, out) != PD_UNAVAILABLE)
            return out->status;
        struct timespec ts = { 0, 20 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    return out->status;
}

/* Redis down: an update, a new scene and an instance fail with the
 * retryable UNAVAILABLE, nothing applied and the log not failed; once Redis
 * is back (its AOF fsynced before each answer) the same change goes
 * through, and the log replays to the same scenes. */
static void test_redis_down_is_retryable(void **state)
{
    (void)state;
    uint64_t rng = 9;
    pd_store *st = store_over("down");
    random_update(st, "town", &rng);
    random_update(st, "town", &rng);
    redis_srv_stop(&srv, SIGKILL);

    pd_point p = { 2, 3 };
    pd_scene_update op = { .op = PD_UPDATE_BLOCK, .cells = &p, .n_cells = 1 };
    pd_store_update out;
    /* The connection it had fails; the next one is refused. */
    assert_int_equal(pd_store_update_cells(st, "town", &op, 1, &out), PD_UNAVAILABLE);
    assert_non_null(strstr(out.message, "the connection failed"));
    assert_non_null(strstr(out.message, "nothing changed, try again"));
    assert_int_equal(pd_store_update_cells(st, "town", &op, 1, &out), PD_UNAVAILABLE);
    assert_non_null(strstr(out.message, "cannot be reached"));
    /* The connect that failed set a backoff: the next change is refused
     * at once, naming the wait, without trying to connect. */
    assert_int_equal(pd_store_update_cells(st, "town", &op, 1, &out), PD_UNAVAILABLE);
    assert_non_null(strstr(out.message, "the next try is in"));
    assert_int_equal(version_of(st, "town"), 3);
    pd_scene *s = pd_registry_acquire(pd_store_registry(st), "town");
    assert_int_not_equal(pd_grid_get(s->grid, 2, 3), 0); /* not applied */
    pd_scene_release(s);
    pd_store_change ch;
    assert_int_equal(pd_store_add_scene(st, open_scene("arena", SIDE), &ch), PD_UNAVAILABLE);
    assert_false(ch.applied);
    assert_null(pd_registry_acquire(pd_store_registry(st), "arena"));
    assert_int_equal(pd_store_add_instance(st, "town-1", "town", &ch), PD_UNAVAILABLE);
    assert_null(pd_registry_acquire(pd_store_registry(st), "town-1"));
    uint64_t lb, sb;
    int failed;
    pd_store_log_state(st, &lb, &sb, &failed);
    assert_int_equal(failed, 0);

    redis_srv_start(&srv);
    assert_int_equal(update_until_up(st, &op, &out), PD_OK);
    assert_int_equal(out.update.version, 4);
    assert_int_equal(pd_store_add_scene(st, open_scene("arena", SIDE), &ch), PD_OK);
    random_update(st, "arena", &rng);
    assert_replays_to("down", st);
    store_free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_function_gives_dense_versions),
        cmocka_unit_test(test_retried_key_is_deduplicated),
        cmocka_unit_test(test_stale_expected_version_is_refused),
        cmocka_unit_test(test_tail_from_a_version),
        cmocka_unit_test(test_store_replays_to_the_same_scenes),
        cmocka_unit_test(test_second_writer_is_refused),
        cmocka_unit_test(test_store_answers_a_resent_key_once),
        cmocka_unit_test(test_apply_logged_records),
        cmocka_unit_test(test_redis_down_is_retryable),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
