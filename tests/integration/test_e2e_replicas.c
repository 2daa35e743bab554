/*
 * test_e2e_replicas.c - replicas sharing one change log on Redis Streams
 * (issue 32): two pathd processes A and B on loopback ports over one
 * redis-server the test starts. A scene created on A reaches B; an update
 * on A is answered with its version V, and a FindPath on B with
 * min_version V sees it (waiting for B's tail if it must); an update on B
 * reaches A. The same update resent to the other replica with the same
 * idempotency key is answered with the first version and applied once. A
 * replica C started late answers Ping SERVING once caught up, at A's
 * version. With Redis killed, updates answer UNAVAILABLE while queries go
 * on; with Redis back (its AOF fsynced before each answer) updates go
 * through and both replicas agree again. A Redis restarted without its
 * data makes the replica refuse the scene whose log went back, and drop
 * it (the log has no record of it); a log cut back to fewer versions has
 * the scene refused, rebuilt and served at the log's version. Watchers
 * on B hear the updates, instance and drop A made (through B's tail). A
 * Batch item's min_version waits for the tail as a FindPath's does. A
 * replica stopped and continued keeps its tail's connection. Two replicas
 * appending to one scene at once answer every update OK at dense versions
 * (a replica that lost the compare-and-set builds the update again). A replica
 * whose tail is behind another's drop and new scene of a name does not
 * append its update of the older incarnation onto the new one.
 *
 * Raw frames (pdi_raw_*) so the test sets idempotency_key and reads
 * Pong.serving, which the C client does not expose. Every wait is bounded.
 */
#include <dirent.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <hiredis/hiredis.h>

#include "harness.h"
#include "../unit/redis_server.h"

#define W 32
#define H 24
/* How long a replica may take to show a change another made, or to come
 * back after Redis did (the tail's reconnect backs off up to 2 s). */
#define CONVERGE_MS 10000

typedef struct fixture {
    redis_srv redis;
    char extra[256];
    char map_dir[64];             /* the config scene "arena"'s map (reload tests; "" none) */
    char scenes[256];             /* the config's extra scenes (pdi_limits.extra_scenes_json) */
    uint32_t behind_wait_ms;      /* limits.max_behind_wait_ms of the next start (0: default) */
    uint32_t append_attempts;     /* limits.max_append_attempts of the next start (0: default) */
    pdi_daemon a, b, c;
} fixture;

/* The limits a replica starts with (and a reload's config is written from). */
static pdi_limits replica_limits(fixture *f)
{
    int n = snprintf(f->extra, sizeof f->extra, "\"log\": {\"redis\": \"127.0.0.1:%d\", \"timeout_ms\": 500},",
                     f->redis.port);
    if (f->behind_wait_ms && f->append_attempts)
        snprintf(f->extra + n, sizeof f->extra - (size_t)n,
                 "\"limits\": {\"max_behind_wait_ms\": %u, \"max_append_attempts\": %u},",
                 (unsigned)f->behind_wait_ms, (unsigned)f->append_attempts);
    else if (f->behind_wait_ms)
        snprintf(f->extra + n, sizeof f->extra - (size_t)n, "\"limits\": {\"max_behind_wait_ms\": %u},",
                 (unsigned)f->behind_wait_ms);
    return (pdi_limits){ .extra_json = f->extra, .metrics = 1, .extra_scenes_json = f->scenes[0] ? f->scenes : NULL };
}

static void start_replica(fixture *f, pdi_daemon *d)
{
    pdi_limits l = replica_limits(f);
    assert_int_equal(pdi_daemon_start(d, &l), 0);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    f->a.stderr_fd = f->a.log_fd = f->b.stderr_fd = f->b.log_fd = f->c.stderr_fd = f->c.log_fd = -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    pdi_daemon_cleanup(&f->a);
    pdi_daemon_cleanup(&f->b);
    pdi_daemon_cleanup(&f->c);
    int rc = redis_srv_remove(&f->redis);
    if (f->map_dir[0] && redis_srv_rm_dir(f->map_dir) != 0)
        rc = -1;
    free(f);
    return rc;
}

static uint64_t next_id = 100;

/* Sends req (its id set here) and returns its final answer. */
static Pathd__V1__Response *call(int fd, Pathd__V1__Request *req)
{
    req->id = ++next_id;
    assert_int_equal(pdi_raw_send_request(fd, req), 0);
    Pathd__V1__Response *r = pdi_raw_recv_final(fd, req->id, PDI_CALL_TIMEOUT_MS);
    assert_non_null(r);
    return r;
}

/* An UpdateCells of one column x (rows 0..H-1) of the arena: cost 0
 * blocks it, else sets that cost. */
typedef struct column_msg {
    Pathd__V1__Request req;
    Pathd__V1__UpdateCells uc;
    Pathd__V1__Rect rect;
    Pathd__V1__Cell lo, hi;
} column_msg;

static void column_msg_init(column_msg *m, int32_t x, uint32_t cost, const char *key)
{
    m->req = (Pathd__V1__Request)PATHD__V1__REQUEST__INIT;
    m->uc = (Pathd__V1__UpdateCells)PATHD__V1__UPDATE_CELLS__INIT;
    m->rect = (Pathd__V1__Rect)PATHD__V1__RECT__INIT;
    m->lo = (Pathd__V1__Cell)PATHD__V1__CELL__INIT;
    m->hi = (Pathd__V1__Cell)PATHD__V1__CELL__INIT;
    m->lo.x = x, m->lo.y = 0, m->hi.x = x, m->hi.y = H - 1;
    m->rect.min = &m->lo;
    m->rect.max = &m->hi;
    m->uc.scene = "arena";
    m->uc.target_case = PATHD__V1__UPDATE_CELLS__TARGET_RECT;
    m->uc.rect = &m->rect;
    m->uc.op = cost == 0 ? PATHD__V1__UPDATE_OP__UPDATE_BLOCK : PATHD__V1__UPDATE_OP__UPDATE_COST;
    m->uc.cost = cost;
    m->uc.idempotency_key = (char *)(key ? key : "");
    m->req.body_case = PATHD__V1__REQUEST__BODY_UPDATE_CELLS;
    m->req.update_cells = &m->uc;
}

/* UpdateCells of one column (column_msg). Returns the status; *version
 * the version answered. */
static int update_column(int fd, int32_t x, uint32_t cost, const char *key, uint64_t *version)
{
    column_msg m;
    column_msg_init(&m, x, cost, key);
    Pathd__V1__Response *r = call(fd, &m.req);
    int st = r->status;
    if (st == PATHD__V1__STATUS__OK) {
        assert_int_equal(r->body_case, PATHD__V1__RESPONSE__BODY_UPDATE);
        *version = r->update->version;
    }
    pathd__v1__response__free_unpacked(r, NULL);
    return st;
}

/* FindPath across the arena's row 0, from x 0 to x W-1, on the version
 * min_version or later: OK when no column is blocked, NO_PATH when one is.
 * *version (may be NULL) the version a path was found on. */
static int find_across(int fd, uint64_t min_version, uint64_t *version)
{
    pdi_fp_msg m;
    pdi_fp_init(&m, 0, "arena", 0, 0, W - 1, 0);
    m.fp.min_version = min_version;
    Pathd__V1__Response *r = call(fd, &m.req);
    int st = r->status;
    if (version)
        *version = st == PATHD__V1__STATUS__OK && r->body_case == PATHD__V1__RESPONSE__BODY_PATH
                       ? r->path->scene_version
                       : 0;
    pathd__v1__response__free_unpacked(r, NULL);
    return st;
}

/* CreateScene "arena", W x H open cells, under key (may be NULL): OK at
 * version 1. */
static void create_arena(int fd, const char *key)
{
    uint8_t cells[W * H];
    memset(cells, 1, sizeof cells);
    Pathd__V1__Request req = PATHD__V1__REQUEST__INIT;
    Pathd__V1__CreateScene cs = PATHD__V1__CREATE_SCENE__INIT;
    cs.name = "arena";
    cs.width = W;
    cs.height = H;
    cs.cells.data = cells;
    cs.cells.len = sizeof cells;
    cs.idempotency_key = (char *)(key ? key : "");
    req.body_case = PATHD__V1__REQUEST__BODY_CREATE_SCENE;
    req.create_scene = &cs;
    Pathd__V1__Response *r = call(fd, &req);
    assert_int_equal(r->status, PATHD__V1__STATUS__OK);
    assert_int_equal(r->scene_change->version, 1);
    pathd__v1__response__free_unpacked(r, NULL);
}

/* DropScene of the arena into *req. */
static void drop_arena_init(Pathd__V1__Request *req, Pathd__V1__DropScene *drop)
{
    *req = (Pathd__V1__Request)PATHD__V1__REQUEST__INIT;
    *drop = (Pathd__V1__DropScene)PATHD__V1__DROP_SCENE__INIT;
    drop->name = "arena";
    req->body_case = PATHD__V1__REQUEST__BODY_DROP_SCENE;
    req->drop_scene = drop;
}

/* DropScene of the arena: OK. */
static void drop_arena(int fd)
{
    Pathd__V1__Request req;
    Pathd__V1__DropScene drop;
    drop_arena_init(&req, &drop);
    Pathd__V1__Response *r = call(fd, &req);
    assert_int_equal(r->status, PATHD__V1__STATUS__OK);
    pathd__v1__response__free_unpacked(r, NULL);
}

/* DropScene of the arena, then CreateScene of it anew: both OK, a new
 * incarnation at version 1. */
static void drop_and_create_arena(int fd)
{
    drop_arena(fd);
    create_arena(fd, NULL);
}

static uint64_t scene_version(int fd)
{
    Pathd__V1__Request req = PATHD__V1__REQUEST__INIT;
    Pathd__V1__GetSceneInfo gi = PATHD__V1__GET_SCENE_INFO__INIT;
    gi.scene = "arena";
    req.body_case = PATHD__V1__REQUEST__BODY_SCENE_INFO;
    req.scene_info = &gi;
    Pathd__V1__Response *r = call(fd, &req);
    uint64_t v = r->status == PATHD__V1__STATUS__OK ? r->scene_info->version : 0;
    pathd__v1__response__free_unpacked(r, NULL);
    return v;
}

static int ping_serving(int fd)
{
    pdi_small_msg m;
    pdi_ping_init(&m, 0, 7);
    Pathd__V1__Response *r = call(fd, &m.req);
    assert_int_equal(r->status, PATHD__V1__STATUS__OK);
    assert_int_equal(r->body_case, PATHD__V1__RESPONSE__BODY_PONG);
    int serving = r->pong->serving;
    pathd__v1__response__free_unpacked(r, NULL);
    return serving;
}

/* Waits until the replica on fd serves the arena at version v. */
static void wait_version(int fd, uint64_t v, const char *who)
{
    double t0 = pdi_now_ms();
    uint64_t have = 0;
    while ((have = scene_version(fd)) != v && pdi_now_ms() - t0 < CONVERGE_MS)
        pdi_sleep_ms(10);
    if (have != v)
        fail_msg("%s serves arena at version %llu, not %llu", who, (unsigned long long)have, (unsigned long long)v);
}

/* An update until Redis answers again (UNAVAILABLE while the log's
 * reconnect backs off). */
static int update_when_up(int fd, int32_t x, uint32_t cost, const char *key, uint64_t *version)
{
    double t0 = pdi_now_ms();
    int st;
    while ((st = update_column(fd, x, cost, key, version)) == PATHD__V1__STATUS__UNAVAILABLE &&
           pdi_now_ms() - t0 < CONVERGE_MS)
        pdi_sleep_ms(20);
    return st;
}

/* Redis, replicas A and B over it, and a connection to each. */
static void start_two(fixture *f, int *fa, int *fb)
{
    redis_srv_start(&f->redis);
    start_replica(f, &f->a);
    start_replica(f, &f->b);
    *fa = pdi_raw_connect(f->a.port);
    *fb = pdi_raw_connect(f->b.port);
    assert_true(*fa >= 0 && *fb >= 0);
}

static void test_two_replicas_share_the_log(void **state)
{
    fixture *f = *state;
    int fa, fb;
    start_two(f, &fa, &fb);

    /* A new scene on A, open everywhere. */
    create_arena(fa, "create-arena");

    /* An update on A, answered with its version; B sees it when asked for
     * that version, even straight after (it waits for its tail). */
    uint64_t v = 0, got = 0;
    assert_int_equal(update_column(fa, 10, 0, "wall-10", &v), PATHD__V1__STATUS__OK);
    assert_int_equal(v, 2);
    assert_int_equal(find_across(fb, v, NULL), PATHD__V1__STATUS__NO_PATH);
    assert_int_equal(scene_version(fb), 2);

    /* The same update resent to B under the same key: the first version,
     * nothing applied twice. */
    assert_int_equal(update_column(fb, 10, 0, "wall-10", &got), PATHD__V1__STATUS__OK);
    assert_int_equal(got, 2);
    assert_int_equal(scene_version(fb), 2);
    assert_int_equal(scene_version(fa), 2);

    /* An update on B reaches A. */
    assert_int_equal(update_column(fb, 10, 1, "open-10", &v), PATHD__V1__STATUS__OK);
    assert_int_equal(v, 3);
    assert_int_equal(find_across(fa, v, &got), PATHD__V1__STATUS__OK);
    assert_true(got >= 3);

    /* More on A (each changes its column: a column's visits alternate
     * between blocking and a cost), then a replica started late: SERVING
     * once caught up, at A's version. */
    for (int i = 0; i < 20; i++)
        assert_int_equal(update_column(fa, 5 + i % 7, i % 2 == 0 ? 0 : 2 + (uint32_t)i % 5, NULL, &v),
                         PATHD__V1__STATUS__OK);
    assert_int_equal(v, 23);
    start_replica(f, &f->c);
    int fc = pdi_raw_connect(f->c.port);
    assert_true(fc >= 0);
    int serving = ping_serving(fc);
    double t0 = pdi_now_ms();
    while (serving != PATHD__V1__SERVING_STATE__SERVING && pdi_now_ms() - t0 < CONVERGE_MS) {
        assert_int_equal(serving, PATHD__V1__SERVING_STATE__NOT_SERVING);
        pdi_sleep_ms(10);
        serving = ping_serving(fc);
    }
    assert_int_equal(serving, PATHD__V1__SERVING_STATE__SERVING);
    assert_int_equal(scene_version(fc), 23);
    assert_true(pdi_wait_log(&f->c, "replica: caught up with the log", CONVERGE_MS));
    wait_version(fb, 23, "B");

    /* Redis down: updates are refused as retryable, nothing served;
     * queries go on at the version each replica has. */
    redis_srv_stop(&f->redis, SIGKILL);
    int st = update_column(fa, 3, 0, "wall-3", &v);
    assert_int_equal(st, PATHD__V1__STATUS__UNAVAILABLE);
    assert_int_equal(update_column(fb, 3, 0, "wall-3", &v), PATHD__V1__STATUS__UNAVAILABLE);
    assert_int_equal(scene_version(fa), 23);
    assert_int_equal(scene_version(fb), 23);
    assert_int_equal(find_across(fb, 23, NULL), find_across(fa, 23, NULL));
    assert_int_equal(ping_serving(fb), PATHD__V1__SERVING_STATE__SERVING);

    /* Redis back: the update resent under its key goes through once, and
     * every replica comes to it. */
    redis_srv_start(&f->redis);
    assert_int_equal(update_when_up(fa, 3, 0, "wall-3", &v), PATHD__V1__STATUS__OK);
    assert_int_equal(v, 24);
    assert_int_equal(update_when_up(fb, 3, 0, "wall-3", &got), PATHD__V1__STATUS__OK);
    assert_int_equal(got, 24);
    wait_version(fb, 24, "B");
    wait_version(fc, 24, "C");
    assert_int_equal(find_across(fc, 24, NULL), PATHD__V1__STATUS__NO_PATH);

    /* A version no replica has: B waits limits.max_behind_wait_ms (200)
     * for its tail, then answers STALE_VERSION (BEHIND) with its version. */
    pdi_fp_msg m;
    pdi_fp_init(&m, 0, "arena", 0, 0, W - 1, 0);
    m.fp.min_version = 1000;
    double sent = pdi_now_ms();
    Pathd__V1__Response *r = call(fb, &m.req);
    double waited = pdi_now_ms() - sent;
    assert_int_equal(r->status, PATHD__V1__STATUS__STALE_VERSION);
    assert_int_equal(r->body_case, PATHD__V1__RESPONSE__BODY_ERROR);
    assert_int_equal(r->error->version, 24);
    pathd__v1__response__free_unpacked(r, NULL);
    if (waited < 150)
        fail_msg("STALE_VERSION after %.0f ms: B did not wait for its tail", waited);

    /* The metrics name the scene's version and the appends. */
    char *text = pdi_metrics_wait(&f->b, "pathd_replica_scene_version{scene=\"arena\"} 24", CONVERGE_MS);
    assert_non_null(text);
    assert_non_null(strstr(text, "pathd_replica_serving 1"));
    assert_non_null(strstr(text, "pathd_replica_behind_total 1\n"));
    assert_non_null(strstr(text, "pathd_replica_scene_lag{scene=\"arena\"} 0"));
    assert_non_null(strstr(text, "pathd_log_append_seconds_count"));
    assert_non_null(strstr(text, "pathd_log_reconnects_total{conn=\"tail\"} "));
    free(text);

    close(fa);
    close(fb);
    close(fc);
    assert_int_equal(pdi_daemon_stop(&f->a), 0);
    assert_int_equal(pdi_daemon_stop(&f->b), 0);
    assert_int_equal(pdi_daemon_stop(&f->c), 0);
    assert_false(pdi_log_has_sanitizer_report(&f->a));
    assert_false(pdi_log_has_sanitizer_report(&f->b));
    assert_false(pdi_log_has_sanitizer_report(&f->c));
}

/* The answer to a FindPath across the arena: its status and message. */
static int find_across_why(int fd, char *why, size_t len)
{
    pdi_fp_msg m;
    pdi_fp_init(&m, 0, "arena", 0, 0, W - 1, 0);
    Pathd__V1__Response *r = call(fd, &m.req);
    int st = r->status;
    snprintf(why, len, "%s", r->body_case == PATHD__V1__RESPONSE__BODY_ERROR ? r->error->message : r->message);
    pathd__v1__response__free_unpacked(r, NULL);
    return st;
}

/* Redis and replica A with the arena made on it; a connection to A. */
static int start_one_with_arena(fixture *f)
{
    redis_srv_start(&f->redis);
    start_replica(f, &f->a);
    int fa = pdi_raw_connect(f->a.port);
    assert_true(fa >= 0);
    create_arena(fa, NULL);
    return fa;
}

/* Redis restarted without its data (a restore, or a failover to one that
 * had not got the last writes): the replica's tail, reconnecting, finds
 * the arena's stream ends before what it applied, and stops serving that
 * scene; rebuilding it from the log finds no record of it at all (the log
 * went back past its creation), so the arena is dropped - UNKNOWN_SCENE -
 * while the config's scene, which the log never changed, goes on. Before,
 * it answered UNAVAILABLE until the replica was restarted. */
static void test_log_that_went_back_refuses_the_scene(void **state)
{
    fixture *f = *state;
    int fa = start_one_with_arena(f);
    uint64_t v = 0;
    assert_int_equal(update_column(fa, 4, 0, "wall-4", &v), PATHD__V1__STATUS__OK);
    assert_int_equal(v, 2);
    char why[512];
    assert_int_equal(find_across_why(fa, why, sizeof why), PATHD__V1__STATUS__NO_PATH);

    redis_srv_stop(&f->redis, SIGKILL);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s/appendonlydir'", f->redis.dir);
    assert_int_equal(system(cmd), 0);
    redis_srv_start(&f->redis);

    assert_true(pdi_wait_log(&f->a, "scene 'arena': the log went back", CONVERGE_MS));
    double t0 = pdi_now_ms();
    int st;
    while ((st = find_across_why(fa, why, sizeof why)) != PATHD__V1__STATUS__UNKNOWN_SCENE &&
           pdi_now_ms() - t0 < CONVERGE_MS)
        pdi_sleep_ms(20);
    if (st != PATHD__V1__STATUS__UNKNOWN_SCENE) {
        pdi_print_log(&f->a);
        fail_msg("the arena answers %d (%s), not UNKNOWN_SCENE", st, why);
    }
    /* Waited for: the rebuild drops the scene on the threadpool, and the
     * loop says so only after (a client may see UNKNOWN_SCENE first). */
    assert_true(pdi_wait_log(&f->a, "scene 'arena': the log has no record of it; dropped", CONVERGE_MS));
    pdi_fp_msg m;
    pdi_fp_init(&m, 0, "serpent", 0, 0, 5, 0);
    Pathd__V1__Response *r = call(fa, &m.req);
    assert_int_equal(r->status, PATHD__V1__STATUS__OK);
    pathd__v1__response__free_unpacked(r, NULL);
    char *text = pdi_metrics_wait(&f->a, "pathd_replica_rebuilds_total 1\n", CONVERGE_MS);
    assert_non_null(text);
    assert_non_null(strstr(text, "pathd_replica_rebuilds_total 1\n"));
    free(text);
    close(fa);
    assert_int_equal(pdi_daemon_stop(&f->a), 0);
    assert_false(pdi_log_has_sanitizer_report(&f->a));
}

/* The arena's stream entries, as XRANGE answers them (free the reply). */
static redisReply *arena_entries(fixture *f)
{
    redisContext *rc = redis_srv_connect(&f->redis);
    assert_non_null(rc);
    redisReply *all = redisCommand(rc, "XRANGE pathd:{arena}:log - +");
    assert_non_null(all);
    assert_int_equal(all->type, REDIS_REPLY_ARRAY);
    redisFree(rc);
    return all;
}

/* The log gone back as a failover to a Redis that lacked the last writes
 * would leave it: the arena's stream put back to the first `keep` of the
 * entries `all` (arena_entries of an earlier time), no snapshot of it,
 * its meta hash set by the command `meta`, and every connection but the
 * test's killed, so the replicas' tails reconnect and check their scenes
 * against it. */
static void put_back_arena_log(fixture *f, const redisReply *all, size_t keep, const char *meta)
{
    redisContext *rc = redis_srv_connect(&f->redis);
    assert_non_null(rc);
    freeReplyObject(redisCommand(rc, "DEL pathd:{arena}:log pathd:{arena}:snaps"));
    freeReplyObject(redisCommand(rc, "HDEL pathd:{arena}:meta snap snaps"));
    for (size_t i = 0; i < keep; i++) {
        const redisReply *e = all->element[i], *fl = e->element[1];
        const char *argv[16];
        size_t argvlen[16], argc = 0;
        argv[argc] = "XADD", argvlen[argc++] = 4;
        argv[argc] = "pathd:{arena}:log", argvlen[argc++] = strlen("pathd:{arena}:log");
        argv[argc] = e->element[0]->str, argvlen[argc++] = e->element[0]->len;
        for (size_t k = 0; k < fl->elements && argc < 16; k++)
            argv[argc] = fl->element[k]->str, argvlen[argc++] = fl->element[k]->len;
        redisReply *added = redisCommandArgv(rc, (int)argc, argv, argvlen);
        assert_non_null(added);
        assert_int_equal(added->type, REDIS_REPLY_STRING);
        freeReplyObject(added);
    }
    freeReplyObject(redisCommand(rc, meta));
    redisReply *killed = redisCommand(rc, "CLIENT KILL TYPE normal SKIPME yes");
    assert_non_null(killed);
    assert_int_equal(killed->type, REDIS_REPLY_INTEGER);
    freeReplyObject(killed);
    redisFree(rc);
}

/* The log goes back to fewer versions (its stream cut to the arena's
 * creation and first update, as a failover to a Redis that had only those
 * would leave it): A, its tail reconnecting (CLIENT KILL), refuses the
 * arena, rebuilds it from the log and serves it again at the log's
 * version 2 with the log's cells (column 10 walled off: NO_PATH), where it
 * had served version 4 (the wall opened again). Updates then go on from
 * there. Before, the arena stayed UNAVAILABLE until a restart. */
static void test_scene_rebuilt_at_the_logs_version(void **state)
{
    fixture *f = *state;
    int fa = start_one_with_arena(f);
    uint64_t v = 0;
    assert_int_equal(update_column(fa, 10, 0, NULL, &v), PATHD__V1__STATUS__OK);
    assert_int_equal(update_column(fa, 10, 1, NULL, &v), PATHD__V1__STATUS__OK);
    assert_int_equal(update_column(fa, 11, 3, NULL, &v), PATHD__V1__STATUS__OK);
    assert_int_equal(v, 4);
    assert_int_equal(find_across(fa, 4, NULL), PATHD__V1__STATUS__OK);

    /* The stream cut back to its first two entries (version 1: the
     * scene; 2: the wall), the FUNCTION's counter with it. */
    redisReply *all = arena_entries(f);
    assert_int_equal(all->elements, 4);
    put_back_arena_log(f, all, 2, "HSET pathd:{arena}:meta v 2");
    freeReplyObject(all);

    assert_true(pdi_wait_log(&f->a, "scene 'arena': the log went back", CONVERGE_MS));
    assert_true(pdi_wait_log(&f->a, "scene 'arena' rebuilt from the log at version 2 (it served 4)", CONVERGE_MS));
    assert_int_equal(scene_version(fa), 2);
    assert_int_equal(find_across(fa, 2, NULL), PATHD__V1__STATUS__NO_PATH);
    /* Served again, and changed again from the log's version. */
    assert_int_equal(update_when_up(fa, 10, 1, NULL, &v), PATHD__V1__STATUS__OK);
    assert_int_equal(v, 3);
    assert_int_equal(find_across(fa, 3, NULL), PATHD__V1__STATUS__OK);
    close(fa);
    assert_int_equal(pdi_daemon_stop(&f->a), 0);
    assert_false(pdi_log_has_sanitizer_report(&f->a));
}

/* The log goes back to a drop the tail read long ago: A made the arena,
 * dropped it (2-0), made it anew (3-1) and updated it twice (3-3), its
 * tail reading all five back (had, so no mark of its own is left); the
 * stream then ends at the drop 2-0 again (live 0, no snapshot), as a
 * failover to a Redis that had only that would leave it. A, reconnecting, refuses the
 * arena and rebuilds it: the log has it dropped, so A drops it too
 * (UNKNOWN_SCENE). Before, a stream that ended with a drop was taken for
 * another replica's drop the tail would apply, though the tail had read
 * past it: A served incarnation 3 at version 3 for good, and a new scene
 * made on the log (3-1 again, ...) was below what its tail reads after,
 * until its versions passed 3 and applied onto the wrong cells. */
static void test_log_back_to_an_old_drop_refuses_the_scene(void **state)
{
    fixture *f = *state;
    int fa = start_one_with_arena(f);
    drop_arena(fa);
    /* The stream up to the drop (a compaction may have trimmed it to the
     * drop alone), kept for the failover below. */
    redisReply *upto = arena_entries(f);
    assert_true(upto->elements >= 1);
    assert_string_equal(upto->element[upto->elements - 1]->element[0]->str, "2-0");
    create_arena(fa, NULL);
    uint64_t v = 0;
    assert_int_equal(update_column(fa, 4, 0, NULL, &v), PATHD__V1__STATUS__OK);
    assert_int_equal(update_column(fa, 4, 1, NULL, &v), PATHD__V1__STATUS__OK);
    assert_int_equal(v, 3);
    char *text = pdi_metrics_wait(&f->a, "pathd_replica_records_total{outcome=\"had\"} 5\n", CONVERGE_MS);
    assert_non_null(text);
    free(text);

    put_back_arena_log(f, upto, upto->elements, "HSET pathd:{arena}:meta v 1 inc 2 live 0");
    freeReplyObject(upto);

    assert_true(pdi_wait_log(&f->a, "scene 'arena': the log went back", CONVERGE_MS));
    assert_true(pdi_wait_log(&f->a, "scene 'arena': the log has no record of it; dropped", CONVERGE_MS));
    assert_int_equal(find_across(fa, 0, NULL), PATHD__V1__STATUS__UNKNOWN_SCENE);
    close(fa);
    assert_int_equal(pdi_daemon_stop(&f->a), 0);
    assert_false(pdi_log_has_sanitizer_report(&f->a));
}

/* The next frame on fd: a watch event of watch id (within the call
 * timeout). */
static Pathd__V1__Response *recv_event(int fd, uint64_t id)
{
    Pathd__V1__Response *r = pdi_raw_recv(fd, PDI_CALL_TIMEOUT_MS, NULL);
    if (!r)
        fail_msg("no watch event of %llu within %d ms", (unsigned long long)id, PDI_CALL_TIMEOUT_MS);
    if (r->body_case != PATHD__V1__RESPONSE__BODY_WATCH_EVENT || r->id != id)
        fail_msg("expected a watch event of %llu, got id %llu body %d status %d", (unsigned long long)id,
                 (unsigned long long)r->id, (int)r->body_case, (int)r->status);
    return r;
}

/* req answered OK on fd, then the event of kind it makes heard by watch
 * id on wfd. */
static Pathd__V1__Response *change_heard(int fd, Pathd__V1__Request *req, int wfd, uint64_t id,
                                         Pathd__V1__WatchEventKind kind)
{
    Pathd__V1__Response *r = call(fd, req);
    assert_int_equal(r->status, PATHD__V1__STATUS__OK);
    pathd__v1__response__free_unpacked(r, NULL);
    r = recv_event(wfd, id);
    assert_int_equal(r->watch_event->kind, kind);
    return r;
}

/* Watchers on a replica hear the changes another replica made, which
 * reach it through its tail: B watches the arena; updates on A are heard
 * on B as SCENE_UPDATED at A's versions with the rectangles they changed,
 * an instance A makes of the arena as SCENE_INSTANCED, A's drop of the
 * arena as SCENE_DROPPED (the subscription's end). Before the tail
 * published its changes, B's watchers heard only updates made on B. */
static void test_watchers_hear_other_replicas_changes(void **state)
{
    fixture *f = *state;
    int fa, fb;
    start_two(f, &fa, &fb);
    int wb = pdi_raw_connect(f->b.port);
    assert_true(wb >= 0);
    create_arena(fa, NULL);
    wait_version(fb, 1, "B");

    const char *names[] = { "arena" };
    Pathd__V1__Request req = PATHD__V1__REQUEST__INIT;
    Pathd__V1__Watch w = PATHD__V1__WATCH__INIT;
    w.scenes = (char **)names;
    w.n_scenes = 1;
    req.id = 500;
    req.body_case = PATHD__V1__REQUEST__BODY_WATCH;
    req.watch = &w;
    assert_int_equal(pdi_raw_send_request(wb, &req), 0);
    Pathd__V1__Response *r = recv_event(wb, 500);
    assert_int_equal(r->watch_event->kind, PATHD__V1__WATCH_EVENT_KIND__WATCH_STARTED);
    assert_int_equal(r->watch_event->version, 1);
    pathd__v1__response__free_unpacked(r, NULL);

    /* Two updates on A: B's watcher hears both, in order, as A made them. */
    uint64_t v = 0;
    assert_int_equal(update_column(fa, 7, 0, NULL, &v), PATHD__V1__STATUS__OK);
    assert_int_equal(v, 2);
    assert_int_equal(update_column(fa, 9, 3, NULL, &v), PATHD__V1__STATUS__OK);
    assert_int_equal(v, 3);
    for (uint64_t want = 2; want <= 3; want++) {
        r = recv_event(wb, 500);
        const Pathd__V1__WatchEvent *ev = r->watch_event;
        assert_int_equal(ev->kind, PATHD__V1__WATCH_EVENT_KIND__SCENE_UPDATED);
        assert_string_equal(ev->scene, "arena");
        assert_int_equal(ev->version, want);
        assert_int_equal(ev->cells_changed, H);
        assert_non_null(ev->changed);
        assert_int_equal(ev->changed->min->x, want == 2 ? 7 : 9);
        assert_int_equal(ev->changed->max->y, H - 1);
        pathd__v1__response__free_unpacked(r, NULL);
    }

    /* An instance of the arena made on A: SCENE_INSTANCED at version 3. */
    Pathd__V1__Request ci = PATHD__V1__REQUEST__INIT;
    Pathd__V1__CreateInstance inst = PATHD__V1__CREATE_INSTANCE__INIT;
    inst.template_ = "arena";
    inst.name = "arena_copy";
    ci.body_case = PATHD__V1__REQUEST__BODY_CREATE_INSTANCE;
    ci.create_instance = &inst;
    r = change_heard(fa, &ci, wb, 500, PATHD__V1__WATCH_EVENT_KIND__SCENE_INSTANCED);
    assert_string_equal(r->watch_event->instance, "arena_copy");
    assert_int_equal(r->watch_event->version, 3);
    pathd__v1__response__free_unpacked(r, NULL);

    /* A drops the arena: B's watcher hears SCENE_DROPPED, its last frame. */
    Pathd__V1__Request dr;
    Pathd__V1__DropScene drop;
    drop_arena_init(&dr, &drop);
    r = change_heard(fa, &dr, wb, 500, PATHD__V1__WATCH_EVENT_KIND__SCENE_DROPPED);
    assert_string_equal(r->watch_event->scene, "arena");
    assert_int_equal(r->watch_event->version, 3);
    assert_true(r->final);
    pathd__v1__response__free_unpacked(r, NULL);

    close(fa);
    close(fb);
    close(wb);
    assert_int_equal(pdi_daemon_stop(&f->a), 0);
    assert_int_equal(pdi_daemon_stop(&f->b), 0);
    assert_false(pdi_log_has_sanitizer_report(&f->a));
    assert_false(pdi_log_has_sanitizer_report(&f->b));
}

/* A Batch whose FindPath item names a version B does not serve yet waits
 * for B's tail as the FindPath sent alone does: sent to B before A makes
 * that version, it is answered once B applied it, with a path on it.
 * Before, the item answered STALE_VERSION at once. */
static void test_batch_waits_for_min_version(void **state)
{
    fixture *f = *state;
    f->behind_wait_ms = 10000;
    int fa, fb;
    start_two(f, &fa, &fb);
    create_arena(fa, NULL);
    wait_version(fb, 1, "B");

    pdi_fp_msg m;
    pdi_fp_init(&m, 0, "arena", 0, 0, W - 1, 0);
    m.fp.min_version = 2;
    Pathd__V1__Query q = PATHD__V1__QUERY__INIT, *qs[] = { &q };
    q.kind_case = PATHD__V1__QUERY__KIND_FIND_PATH;
    q.find_path = &m.fp;
    Pathd__V1__Batch batch = PATHD__V1__BATCH__INIT;
    batch.items = qs;
    batch.n_items = 1;
    Pathd__V1__Request req = PATHD__V1__REQUEST__INIT;
    req.id = 900;
    req.body_case = PATHD__V1__REQUEST__BODY_BATCH;
    req.batch = &batch;
    assert_int_equal(pdi_raw_send_request(fb, &req), 0);

    uint64_t v = 0;
    assert_int_equal(update_column(fa, 10, 5, NULL, &v), PATHD__V1__STATUS__OK);
    assert_int_equal(v, 2);
    Pathd__V1__Response *r = pdi_raw_recv_final(fb, 900, PDI_CALL_TIMEOUT_MS);
    assert_non_null(r);
    assert_int_equal(r->body_case, PATHD__V1__RESPONSE__BODY_BATCH);
    assert_int_equal(r->batch->n_items, 1);
    const Pathd__V1__QueryResult *item = r->batch->items[0];
    if (item->status != PATHD__V1__STATUS__OK)
        fail_msg("the batch's item answered %d (%s) at version %llu, not a path", (int)item->status, item->message,
                 (unsigned long long)item->version);
    assert_int_equal(item->kind_case, PATHD__V1__QUERY_RESULT__KIND_PATH);
    assert_int_equal(item->path->scene_version, 2);
    pathd__v1__response__free_unpacked(r, NULL);

    close(fa);
    close(fb);
    assert_int_equal(pdi_daemon_stop(&f->a), 0);
    assert_int_equal(pdi_daemon_stop(&f->b), 0);
    assert_false(pdi_log_has_sanitizer_report(&f->b));
}

/* A replica stopped (SIGSTOP) while its tail waits in XREAD BLOCK finds,
 * once continued, its watchdog long past due: the loop stood still, not
 * Redis, and the answer waiting in the socket is read - the connection is
 * kept (no reconnect, no "no answer" warning). Before, the watchdog
 * dropped it and the tail connected again, checked and read again. */
static void test_stopped_replica_keeps_its_connection(void **state)
{
    fixture *f = *state;
    int fa, fb;
    start_two(f, &fa, &fb);
    create_arena(fa, NULL);
    wait_version(fb, 1, "B");
    /* Past log.timeout_ms (500) + the block (100) + the stall's margin (1 s). */
    assert_int_equal(kill(f->b.pid, SIGSTOP), 0);
    uint64_t v = 0;
    assert_int_equal(update_column(fa, 6, 0, NULL, &v), PATHD__V1__STATUS__OK);
    pdi_sleep_ms(2500);
    assert_int_equal(kill(f->b.pid, SIGCONT), 0);
    wait_version(fb, v, "B");
    assert_false(pdi_log_contains(&f->b, "no answer within the watchdog"));
    char *text = pdi_metrics_get(&f->b);
    assert_non_null(text);
    assert_non_null(strstr(text, "pathd_log_reconnects_total{conn=\"tail\"} 0\n"));
    free(text);

    close(fa);
    close(fb);
    assert_int_equal(pdi_daemon_stop(&f->a), 0);
    assert_int_equal(pdi_daemon_stop(&f->b), 0);
    assert_false(pdi_log_has_sanitizer_report(&f->b));
}

/* The inode of the TCP socket whose local port is `port` (/proc/net/tcp
 * and tcp6: Redis's CLIENT LIST names a client by its address), or 0. */
static unsigned long socket_inode_of_port(unsigned port)
{
    static const char *const tables[] = { "/proc/net/tcp", "/proc/net/tcp6" };
    for (size_t t = 0; t < 2; t++) {
        FILE *fp = fopen(tables[t], "r");
        if (!fp)
            continue;
        char line[512];
        unsigned long inode = 0;
        while (!inode && fgets(line, sizeof line, fp)) {
            char local[128];
            unsigned lport = 0;
            unsigned long ino = 0;
            /* sl local rem st tx:rx tr:when retrnsmt uid timeout inode */
            if (sscanf(line, " %*s %127s %*s %*s %*s %*s %*s %*s %*s %lu", local, &ino) != 2)
                continue; /* the header */
            const char *colon = strrchr(local, ':');
            if (colon && sscanf(colon + 1, "%x", &lport) == 1 && lport == port)
                inode = ino;
        }
        fclose(fp);
        if (inode)
            return inode;
    }
    return 0;
}

/* Whether process pid holds the socket of inode (its /proc/PID/fd). */
static int pid_holds_socket(pid_t pid, unsigned long inode)
{
    char want[64], dir[64];
    snprintf(want, sizeof want, "socket:[%lu]", inode);
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int held = 0;
    for (struct dirent *e; !held && (e = readdir(d)) != NULL;) {
        char path[384], target[96];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        ssize_t n = readlink(path, target, sizeof target - 1);
        if (n <= 0)
            continue;
        target[n] = '\0';
        held = strcmp(target, want) == 0;
    }
    closedir(d);
    return held;
}

/* Kills every connection to Redis whose last command is XREAD: the
 * replicas' tails (each reconnects after the log's backoff; a tail caught
 * between two reads, a few microseconds of its 100 ms cycle, is missed).
 * Not the appends' connections: a replica's replay leaves its own on
 * SMEMBERS or XRANGE, and a drop whose append fails fails the log.
 * Answers whether A's tail was among them: B's alone would leave
 * A's tail reading on, and the test below would not race A's append with
 * its tail (it would pass on OK without testing the check). The client's
 * port (CLIENT LIST's addr=) is matched to A's sockets. */
static int kill_tails(fixture *f, pid_t pid)
{
    redisContext *c = redis_srv_connect(&f->redis);
    assert_non_null(c);
    redisReply *r = redisCommand(c, "CLIENT LIST");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    int killed = 0, killed_a = 0;
    for (const char *line = r->str; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[1024];
        snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), line);
        const char *id = strstr(buf, "id=");
        const char *addr = strstr(buf, " addr=");
        const char *port = addr ? strchr(addr + 6, ' ') : NULL;
        if (id && strstr(buf, "cmd=xread")) {
            /* addr=HOST:PORT: the port is after the last colon before the space */
            unsigned p = 0;
            if (addr && port) {
                const char *colon = port;
                while (colon > addr && *colon != ':')
                    colon--;
                p = (unsigned)strtoul(colon + 1, NULL, 10);
            }
            unsigned long inode = p ? socket_inode_of_port(p) : 0;
            int of_a = inode && pid_holds_socket(pid, inode);
            redisReply *k = redisCommand(c, "CLIENT KILL ID %lld", strtoll(id + 3, NULL, 10));
            assert_non_null(k);
            int one = k->type == REDIS_REPLY_INTEGER && k->integer == 1;
            killed += one;
            killed_a += one && of_a;
            freeReplyObject(k);
        }
        line = end ? end + 1 : NULL;
    }
    freeReplyObject(r);
    redisFree(c);
    /* killed may be 0 here: B's tail, killed by the pass before, may not
     * be back on XREAD yet, and A's may be between reads; the caller
     * tries again until A's was killed. */
    (void)killed;
    return killed_a;
}

/* A replica whose tail is behind another's DropScene and CreateScene of
 * the arena, still serving the older incarnation at the version the new
 * one has reached too, must not append its update onto the new one
 * (versions restart at 1; the append names its incarnation). A is
 * stopped, its tail's connection killed (so on SIGCONT it reconnects
 * after the backoff, well after A's worker ran the update), B drops the
 * arena (A's had column 5 blocked), makes it again and updates it to
 * version 2, and A gets an update of column 9: it answers UNAVAILABLE
 * (or, had its tail won, OK on the new arena), and once caught up A and
 * B serve the same arena - open across, at one version. Fails without
 * the incarnation check: A's update is appended at version 3 onto B's
 * arena and A serves its old one with column 5 blocked for ever
 * (NO_PATH on A, a path on B). */
/* The incarnation of the first entry left in the arena's stream (0: none). */
static unsigned long long first_entry_inc(fixture *f)
{
    redisContext *c = redis_srv_connect(&f->redis);
    assert_non_null(c);
    redisReply *x = redisCommand(c, "XRANGE pathd:{arena}:log - + COUNT 1");
    assert_non_null(x);
    unsigned long long inc = 0;
    if (x->type == REDIS_REPLY_ARRAY && x->elements == 1 && x->element[0]->type == REDIS_REPLY_ARRAY &&
        x->element[0]->elements == 2 && x->element[0]->element[0]->type == REDIS_REPLY_STRING)
        inc = strtoull(x->element[0]->element[0]->str, NULL, 10);
    freeReplyObject(x);
    redisFree(c);
    return inc;
}

static void older_incarnation_case(void **state, int after_trim)
{
    fixture *f = *state;
    int fa, fb;
    start_two(f, &fa, &fb);
    create_arena(fa, NULL);
    uint64_t v = 0;
    assert_int_equal(update_column(fa, 5, 0, NULL, &v), PATHD__V1__STATUS__OK);
    assert_int_equal(v, 2);
    wait_version(fb, 2, "B");
    assert_int_equal(find_across(fb, 2, NULL), PATHD__V1__STATUS__NO_PATH);

    /* A's tail missed (stopped between two reads, its last command
     * SMEMBERS): A runs a moment, and is stopped again. */
    assert_int_equal(kill(f->a.pid, SIGSTOP), 0);
    int a_tail = 0;
    for (int i = 0; i < 50 && !a_tail; i++) {
        if (i > 0) {
            assert_int_equal(kill(f->a.pid, SIGCONT), 0);
            pdi_sleep_ms(50);
            assert_int_equal(kill(f->a.pid, SIGSTOP), 0);
        }
        a_tail = kill_tails(f, f->a.pid);
    }
    assert_true(a_tail);
    drop_and_create_arena(fb);
    assert_int_equal(update_column(fb, 7, 3, NULL, &v), PATHD__V1__STATUS__OK);
    assert_int_equal(v, 2);

    /* A's update waits in its socket; A runs it as soon as it is continued. */
    column_msg m;
    column_msg_init(&m, 9, 4, NULL);
    m.req.id = ++next_id;
    assert_int_equal(pdi_raw_send_request(fa, &m.req), 0);
    if (after_trim) {
        /* B's compaction (its drop noted a snapshot) trims the stream
         * below the new incarnation: A's tail then never reads the drop. */
        double t1 = pdi_now_ms();
        while (first_entry_inc(f) < 2 && pdi_now_ms() - t1 < CONVERGE_MS)
            pdi_sleep_ms(20);
        assert_true(first_entry_inc(f) >= 2);
    }
    assert_int_equal(kill(f->a.pid, SIGCONT), 0);
    Pathd__V1__Response *r = pdi_raw_recv_final(fa, m.req.id, PDI_CALL_TIMEOUT_MS);
    assert_non_null(r);
    int st = r->status;
    uint64_t made = st == PATHD__V1__STATUS__OK && r->body_case == PATHD__V1__RESPONSE__BODY_UPDATE
                        ? r->update->version
                        : 0;
    print_message("A's update: status %d, version %llu\n", st, (unsigned long long)made);
    pathd__v1__response__free_unpacked(r, NULL);
    assert_true(st == PATHD__V1__STATUS__UNAVAILABLE || st == PATHD__V1__STATUS__OK);

    /* Caught up: one arena, open across, at one version on both. */
    double t0 = pdi_now_ms();
    uint64_t va = 0, vb = 0;
    int pa = -1, pb = -1;
    while (pdi_now_ms() - t0 < CONVERGE_MS) {
        va = scene_version(fa), vb = scene_version(fb);
        pa = find_across(fa, 0, NULL), pb = find_across(fb, 0, NULL);
        if (va == vb && pa == PATHD__V1__STATUS__OK && pb == PATHD__V1__STATUS__OK)
            break;
        pdi_sleep_ms(20);
    }
    if (va != vb || pa != PATHD__V1__STATUS__OK || pb != PATHD__V1__STATUS__OK)
        fail_msg("A serves the arena at version %llu (FindPath across: %d), B at %llu (%d)", (unsigned long long)va,
                 pa, (unsigned long long)vb, pb);
    assert_int_equal(vb, made ? made : 2);
    close(fa);
    close(fb);
    assert_int_equal(pdi_daemon_stop(&f->a), 0);
    assert_int_equal(pdi_daemon_stop(&f->b), 0);
    assert_false(pdi_log_has_sanitizer_report(&f->a));
}

static void test_update_of_an_older_incarnation_is_not_appended(void **state)
{
    older_incarnation_case(state, 0);
}

/* The same, with A continued only once B's compaction trimmed the stream
 * (the snapshot its drop noted, of the new incarnation): A's tail, at its
 * own update of the old one, reads on at the new incarnation's entry of
 * the version A serves. Without the tail's check that an entry follows
 * the last one read (pd__follows) A took it for one it had and served the
 * old arena for ever (CI saw this race when A was continued late); with
 * it the scene is refused and rebuilt from the snapshot. */
static void test_tail_behind_a_trim_rebuilds_the_new_incarnation(void **state)
{
    older_incarnation_case(state, 1);
}

/* Updates sent to each replica in the race test, and how many are in
 * flight at once on each connection (a few: the store batches queued
 * ones). */
#define PER_REPLICA 240
#define WINDOW 6

/* One replica's stream of updates: update i of replica `side` (0 A, 1 B)
 * sets column side * W/2 + i % (W/2) to a cost no update of that column
 * set just before, so every update changes its cells and makes a version
 * whatever the other replica did meanwhile. */
typedef struct stream {
    int fd;
    int side;
    size_t sent, answered;
    uint64_t ids[PER_REPLICA];
    Pathd__V1__Request req[PER_REPLICA];
    Pathd__V1__UpdateCells uc[PER_REPLICA];
    Pathd__V1__Rect rect[PER_REPLICA];
    Pathd__V1__Cell lo[PER_REPLICA], hi[PER_REPLICA];
    char key[PER_REPLICA][32];
    uint64_t version[PER_REPLICA];
} stream;

static void send_one(stream *s)
{
    size_t i = s->sent++;
    int32_t x = s->side * (W / 2) + (int32_t)(i % (W / 2));
    s->req[i] = (Pathd__V1__Request)PATHD__V1__REQUEST__INIT;
    s->uc[i] = (Pathd__V1__UpdateCells)PATHD__V1__UPDATE_CELLS__INIT;
    s->rect[i] = (Pathd__V1__Rect)PATHD__V1__RECT__INIT;
    s->lo[i] = (Pathd__V1__Cell)PATHD__V1__CELL__INIT;
    s->hi[i] = (Pathd__V1__Cell)PATHD__V1__CELL__INIT;
    s->lo[i].x = s->hi[i].x = x;
    s->lo[i].y = 0;
    s->hi[i].y = H - 1;
    s->rect[i].min = &s->lo[i];
    s->rect[i].max = &s->hi[i];
    s->uc[i].scene = "arena";
    s->uc[i].target_case = PATHD__V1__UPDATE_CELLS__TARGET_RECT;
    s->uc[i].rect = &s->rect[i];
    s->uc[i].op = PATHD__V1__UPDATE_OP__UPDATE_COST;
    s->uc[i].cost = 2 + (uint32_t)(i / (W / 2)); /* a column's next update: the next cost */
    snprintf(s->key[i], sizeof s->key[i], "%s", "");
    if (i % 2)
        snprintf(s->key[i], sizeof s->key[i], "race-%c-%zu", s->side ? 'b' : 'a', i);
    s->uc[i].idempotency_key = s->key[i];
    s->req[i].body_case = PATHD__V1__REQUEST__BODY_UPDATE_CELLS;
    s->req[i].update_cells = &s->uc[i];
    s->req[i].id = s->ids[i] = ++next_id;
    assert_int_equal(pdi_raw_send_request(s->fd, &s->req[i]), 0);
}

/* Reads one answer on s (any of its in-flight ids): it must be OK. */
static void take_one(stream *s)
{
    Pathd__V1__Response *r = pdi_raw_recv(s->fd, PDI_CALL_TIMEOUT_MS, NULL);
    assert_non_null(r);
    size_t i = 0;
    while (i < s->sent && s->ids[i] != r->id)
        i++;
    assert_true(i < s->sent);
    if (r->status != PATHD__V1__STATUS__OK)
        fail_msg("replica %c: update %zu answered %d (%s), not OK", s->side ? 'B' : 'A', i, r->status,
                 r->body_case == PATHD__V1__RESPONSE__BODY_ERROR && r->error ? r->error->message : "");
    assert_int_equal(r->body_case, PATHD__V1__RESPONSE__BODY_UPDATE);
    assert_true(r->update->cells_changed > 0);
    s->version[i] = r->update->version;
    s->answered++;
    pathd__v1__response__free_unpacked(r, NULL);
}

/* Two replicas appending to one scene at once (the race on the log's
 * compare-and-set): each gets a pipeline of UpdateCells, WINDOW in flight
 * (the store appends queued ones together, a lone one alone, so both
 * paths race), half of them keyed. A replica whose append lost waits for
 * its tail, builds the update again and appends again: every update is
 * answered OK - none UNAVAILABLE, as each lost race was before -, at its
 * own version, the versions dense, one connection's rising. */
static void test_racing_replicas_answer_every_update(void **state)
{
    fixture *f = *state;
    /* A generous BEHIND wait and attempts: on a loaded test machine the
     * tail may take a while to apply the winner's record, and this test
     * is about the retry, not its bounds. */
    f->behind_wait_ms = 5000;
    f->append_attempts = 50;
    redis_srv_start(&f->redis);
    start_replica(f, &f->a);
    start_replica(f, &f->b);
    static stream s[2];
    memset(s, 0, sizeof s);
    s[0].fd = pdi_raw_connect(f->a.port);
    s[1].fd = pdi_raw_connect(f->b.port);
    s[1].side = 1;
    assert_true(s[0].fd >= 0 && s[1].fd >= 0);
    create_arena(s[0].fd, "create-arena");
    wait_version(s[1].fd, 1, "B");

    /* Both replicas at once, WINDOW in flight on each. */
    while (s[0].answered < PER_REPLICA || s[1].answered < PER_REPLICA) {
        for (int k = 0; k < 2; k++)
            while (s[k].sent < PER_REPLICA && s[k].sent - s[k].answered < WINDOW)
                send_one(&s[k]);
        for (int k = 0; k < 2; k++)
            if (s[k].answered < s[k].sent)
                take_one(&s[k]);
    }

    /* Every update at its own version, the versions dense after the
     * scene's 1. */
    uint64_t all[2 * PER_REPLICA];
    for (size_t i = 0; i < PER_REPLICA; i++) {
        all[i] = s[0].version[i];
        all[PER_REPLICA + i] = s[1].version[i];
    }
    qsort(all, 2 * PER_REPLICA, sizeof all[0], pdi_cmp_u64);
    for (size_t i = 0; i < 2 * PER_REPLICA; i++)
        if (all[i] != 2 + i)
            fail_msg("the %zu-th smallest version answered is %llu, not %zu", i, (unsigned long long)all[i], 2 + i);
    /* One connection's updates are applied in the order they were sent
     * (and answered): their versions rise. */
    for (int k = 0; k < 2; k++)
        for (size_t i = 1; i < PER_REPLICA; i++)
            if (s[k].version[i] <= s[k].version[i - 1])
                fail_msg("replica %c: update %zu at version %llu, after update %zu at %llu", k ? 'B' : 'A', i,
                         (unsigned long long)s[k].version[i], i - 1, (unsigned long long)s[k].version[i - 1]);
    wait_version(s[0].fd, 1 + 2 * PER_REPLICA, "A");
    wait_version(s[1].fd, 1 + 2 * PER_REPLICA, "B");

    /* The appends did race (else this test proves nothing): a replica
     * built some update again after losing. */
    char *ma = pdi_metrics_get(&f->a), *mb = pdi_metrics_get(&f->b);
    assert_non_null(ma);
    assert_non_null(mb);
    unsigned long long ra = 0, rb = 0;
    const char *needle = "pathd_log_append_races_total{outcome=\"retried\"} ";
    const char *pa = strstr(ma, needle), *pb = strstr(mb, needle);
    assert_non_null(pa);
    assert_non_null(pb);
    ra = strtoull(pa + strlen(needle), NULL, 10);
    rb = strtoull(pb + strlen(needle), NULL, 10);
    print_message("races retried: A %llu, B %llu\n", ra, rb);
    assert_true(ra + rb > 0);
    free(ma);
    free(mb);
    close(s[0].fd);
    close(s[1].fd);
}

/* ---- one config reloaded on two replicas at once ---------------------------------------- */

/* What a replica's log says when its tail applied a RESET made from
 * another config than its own. */
static const char other_definition[] = "was made from another config's definition of it";

/* Closes fa and fb, stops A and B: neither with a sanitizer report. */
static void stop_two(fixture *f, int fa, int fb)
{
    close(fa);
    close(fb);
    assert_int_equal(pdi_daemon_stop(&f->a), 0);
    assert_int_equal(pdi_daemon_stop(&f->b), 0);
    assert_false(pdi_log_has_sanitizer_report(&f->a));
    assert_false(pdi_log_has_sanitizer_report(&f->b));
}

/* The config scene "arena"'s map file in map_dir as `file`: W x H open
 * cells, column wall_x walled (-1: none) but for row gap_y (-1: none).
 * Written aside and renamed in, so a reload never reads half a map. */
static void write_arena_map_gap(fixture *f, const char *file, int wall_x, int gap_y)
{
    char path[128], tmp[160];
    snprintf(path, sizeof path, "%s/%s", f->map_dir, file);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *fp = fopen(tmp, "w");
    assert_non_null(fp);
    for (int y = 0; y < H; y++) {
        for (int x = 0; x < W; x++)
            fputc(x == wall_x && y != gap_y ? '#' : '.', fp);
        fputc('\n', fp);
    }
    assert_int_equal(fclose(fp), 0);
    assert_int_equal(rename(tmp, path), 0);
}

static void write_arena_map(fixture *f, const char *file, int wall_x)
{
    write_arena_map_gap(f, file, wall_x, -1);
}

/* The config names "arena" (map_dir/file) beside the harness's scenes. */
static void arena_in_config(fixture *f, const char *file)
{
    snprintf(f->scenes, sizeof f->scenes, ",\n    {\"name\": \"arena\", \"map\": \"%s/%s\", \"format\": \"ascii\"}",
             f->map_dir, file);
}

/* Redis, A and B over it, both loading "arena" (open) from one map file,
 * updated once on A (column 5 cost 3: version 2, which B serves too). The
 * new config both are then given walls column 20 of that file. */
static void start_two_on_a_config_arena(fixture *f, int *fa, int *fb)
{
    redis_srv_temp_dir(f->map_dir, sizeof f->map_dir, "e2e_reload2");
    write_arena_map(f, "arena.txt", -1);
    arena_in_config(f, "arena.txt");
    start_two(f, fa, fb);
    uint64_t v = 0;
    assert_int_equal(update_column(*fa, 5, 3, NULL, &v), PATHD__V1__STATUS__OK);
    assert_int_equal(v, 2);
    wait_version(*fb, 2, "B");
    write_arena_map(f, "arena.txt", 20);
}

/* A change on the replica on fd once Redis answers: its status, *version. */
static int update_after_reload(int fd, int32_t x, uint64_t *version)
{
    return update_when_up(fd, x, 2, NULL, version);
}

/* SIGHUP to A and B at once while Redis is stopped past the 500 ms
 * timeout: both serve their new map at version 3, their RESETs held (and
 * each FCALL waiting in Redis's socket). Redis goes on: one RESET takes
 * version 3 (Redis picks which); the other is refused, the version moved.
 * `same`: both were given the same config - the refused one is of the
 * same definition as the log's, so its replica serves that entry (it says
 * so), and both then take changes at dense versions and serve the new
 * map (column 20 walled: NO_PATH across) at one version. Fails without
 * the fix: the refused RESET failed its replica's log, its update
 * INTERNAL ("restart pathd to replay the log"). Else B was given another
 * map (column 21 walled): the refused replica's log fails as before. */
static void reloaded_at_once_case(void **state, int same)
{
    fixture *f = *state;
    int fa, fb;
    start_two_on_a_config_arena(f, &fa, &fb);
    if (!same) {
        write_arena_map(f, "other.txt", 21);
        arena_in_config(f, "other.txt");
        pdi_limits l = replica_limits(f);
        assert_int_equal(pdi_write_config(&f->b, &l), 0);
    }
    assert_int_equal(kill(f->redis.pid, SIGSTOP), 0);
    assert_int_equal(pdi_daemon_signal(&f->a, SIGHUP), 0);
    assert_int_equal(pdi_daemon_signal(&f->b, SIGHUP), 0);
    wait_version(fa, 3, "A");
    wait_version(fb, 3, "B");
    assert_int_equal(kill(f->redis.pid, SIGCONT), 0);
    uint64_t va = 0, vb = 0;
    int sa = update_after_reload(fa, 7, &va);
    if (sa == PATHD__V1__STATUS__OK)
        wait_version(fb, va, "B");
    int sb = update_after_reload(fb, 9, &vb);
    print_message("after the reloads: A's update %d (version %llu), B's %d (version %llu); adopted on A %d, B %d\n",
                  sa, (unsigned long long)va, sb, (unsigned long long)vb,
                  pdi_log_contains(&f->a, "another replica's RESET of the same definition"),
                  pdi_log_contains(&f->b, "another replica's RESET of the same definition"));
    if (same) {
        assert_int_equal(sa, PATHD__V1__STATUS__OK);
        assert_int_equal(sb, PATHD__V1__STATUS__OK);
        assert_int_equal(va, 4);
        assert_int_equal(vb, 5);
        assert_int_equal(pdi_log_contains(&f->a, "another replica's RESET of the same definition") +
                             pdi_log_contains(&f->b, "another replica's RESET of the same definition"),
                         1);
        wait_version(fa, 5, "A");
        assert_int_equal(find_across(fa, 5, NULL), PATHD__V1__STATUS__NO_PATH);
        assert_int_equal(find_across(fb, 5, NULL), PATHD__V1__STATUS__NO_PATH);
    } else {
        /* One log failed: its change INTERNAL, and its log says so; the
         * other's went through. */
        assert_true((sa == PATHD__V1__STATUS__INTERNAL) != (sb == PATHD__V1__STATUS__INTERNAL));
        assert_true(sa == PATHD__V1__STATUS__OK || sb == PATHD__V1__STATUS__OK);
        assert_true(pdi_log_contains(sa == PATHD__V1__STATUS__INTERNAL ? &f->a : &f->b,
                                     "until pathd restarts): a reload's RESET of scene 'arena' (version 3) was not "
                                     "taken"));
    }
    stop_two(f, fa, fb);
}

static void test_same_config_reloaded_at_once(void **state)
{
    reloaded_at_once_case(state, 1);
}

static void test_other_config_reloaded_at_once_fails_a_log(void **state)
{
    reloaded_at_once_case(state, 0);
}

/* The config push of a rolling deploy: the new config (column 20 walled)
 * reloaded on A, then on B. B's tail applies A's RESET meanwhile from its
 * own, older config, and says so (the RESET's field d names another
 * definition). A's tail then applies B's RESET, and both serve the new map
 * at one version. Fails without the fix: a tail's RESET went back to the
 * scenes served when the replica started, so A served its old, open map
 * at version 4 (a path across) until a restart, B the new one; and B did
 * not say it served another map at version 3. */
static void test_config_reloaded_on_one_replica_then_the_other(void **state)
{
    fixture *f = *state;
    int fa, fb;
    start_two_on_a_config_arena(f, &fa, &fb);
    assert_int_equal(pdi_daemon_signal(&f->a, SIGHUP), 0);
    wait_version(fa, 3, "A");
    wait_version(fb, 3, "B");
    assert_int_equal(find_across(fa, 3, NULL), PATHD__V1__STATUS__NO_PATH);
    assert_int_equal(find_across(fb, 3, NULL), PATHD__V1__STATUS__OK); /* its config is not pushed yet */
    assert_true(pdi_wait_log(&f->b, other_definition, 5000));
    assert_int_equal(pdi_daemon_signal(&f->b, SIGHUP), 0);
    wait_version(fb, 4, "B");
    wait_version(fa, 4, "A");
    int sa = find_across(fa, 4, NULL), sb = find_across(fb, 4, NULL);
    assert_int_equal(sb, PATHD__V1__STATUS__NO_PATH);
    assert_int_equal(sa, PATHD__V1__STATUS__NO_PATH);
    assert_false(pdi_log_contains(&f->a, other_definition)); /* B's RESET is of A's config */
    stop_two(f, fa, fb);
}

/* A deploy that restarts replicas on the new config instead: B restarted
 * on it (column 20 walled but for row 0) replays the log's wall of column
 * 5 onto its new map; A, reloaded, appends a RESET. B's tail goes back to
 * its config's arena as loaded, not to the arena its replay left: both
 * serve the new map, a path across row 0. Fails without the fix: B served
 * column 5's wall again (NO_PATH) at the RESET's version. */
static void test_replica_restarted_on_a_config_resets_to_it(void **state)
{
    fixture *f = *state;
    int fa, fb;
    redis_srv_temp_dir(f->map_dir, sizeof f->map_dir, "e2e_reload2");
    write_arena_map(f, "arena.txt", -1);
    arena_in_config(f, "arena.txt");
    start_two(f, &fa, &fb);
    uint64_t v = 0;
    assert_int_equal(update_column(fa, 5, 0, NULL, &v), PATHD__V1__STATUS__OK);
    assert_int_equal(v, 2);
    wait_version(fb, 2, "B");
    write_arena_map_gap(f, "arena.txt", 20, 0);
    close(fb);
    assert_int_equal(pdi_daemon_stop(&f->b), 0);
    assert_false(pdi_log_has_sanitizer_report(&f->b));
    pdi_daemon_cleanup(&f->b);
    start_replica(f, &f->b);
    fb = pdi_raw_connect(f->b.port);
    assert_true(fb >= 0);
    wait_version(fb, 2, "B");
    assert_int_equal(pdi_daemon_signal(&f->a, SIGHUP), 0);
    wait_version(fa, 3, "A");
    wait_version(fb, 3, "B");
    assert_int_equal(find_across(fa, 3, NULL), PATHD__V1__STATUS__OK);
    assert_int_equal(find_across(fb, 3, NULL), PATHD__V1__STATUS__OK);
    assert_false(pdi_log_contains(&f->b, other_definition)); /* A's RESET is of B's config as loaded */
    stop_two(f, fa, fb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_two_replicas_share_the_log, setup, teardown),
        cmocka_unit_test_setup_teardown(test_log_that_went_back_refuses_the_scene, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scene_rebuilt_at_the_logs_version, setup, teardown),
        cmocka_unit_test_setup_teardown(test_log_back_to_an_old_drop_refuses_the_scene, setup, teardown),
        cmocka_unit_test_setup_teardown(test_watchers_hear_other_replicas_changes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_waits_for_min_version, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stopped_replica_keeps_its_connection, setup, teardown),
        cmocka_unit_test_setup_teardown(test_racing_replicas_answer_every_update, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_of_an_older_incarnation_is_not_appended, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tail_behind_a_trim_rebuilds_the_new_incarnation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_same_config_reloaded_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_config_reloaded_at_once_fails_a_log, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_reloaded_on_one_replica_then_the_other, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replica_restarted_on_a_config_resets_to_it, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
