/*
 * test_store_log.c - the store's change log interface (pd_store.h) is
 * enough for a log that is not the file journal. A second implementation,
 * kept in memory here, takes the store's updates, new scenes, instances
 * and drops; its tail from a version gives the records after it in order;
 * snapshot and compact shorten it; and its replay into a fresh store gives
 * the same scenes cell by cell, before and after compaction. The store's
 * fsync policy decides when the log is synced, a log that refuses a
 * record keeps the change from being served, and a reload's records
 * (reload_begin/_end around the publish) replay over the config as it is
 * after the reload.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pd_journal.h"
#include "open_scene.h"
#include "pd_store.h"
#include "same_scene.h"
#include "test_rng.h"

/* Each scene is SIDE x SIDE open cells. */
#define SIDE 24
#include "store_check.h"

/* ---- a change log in memory ------------------------------------------------ */

/* Records are kept encoded (pd_journal_encode), so the log owns its copy of
 * the cells and ops the store lends it for the append. */
typedef struct mem_rec {
    uint8_t *framed;
    size_t len;
} mem_rec;

typedef struct mem_log {
    pthread_mutex_t lock;         /* the change lock; also guards the fields below */
    mem_rec *recs;
    size_t n, cap;
    size_t snap_start, snap_end;  /* the last snapshot's records: [snap_start, snap_end) */
    size_t synced;                /* records made "durable" by sync */
    size_t syncs;                 /* sync calls */
    int refuse_next;              /* test switch: the next append fails */
    int failed;
    char why[128];
    int closed;
} mem_log;

static int mem_push(mem_log *m, const pd_journal_record *rec)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    if (pd_journal_encode(rec, &buf, &len) != 0)
        return -1;
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 16;
        m->recs = realloc(m->recs, m->cap * sizeof *m->recs);
        assert_non_null(m->recs);
    }
    m->recs[m->n++] = (mem_rec){ buf, len };
    return 0;
}

static void mem_get(const mem_log *m, size_t i, pd_journal_record *rec)
{
    char err[128];
    const mem_rec *r = &m->recs[i];
    if (pd_journal_decode(r->framed + PD_JOURNAL_HEADER_BYTES, r->len - PD_JOURNAL_HEADER_BYTES, rec, err,
                          sizeof err) != 0)
        fail_msg("record %zu: %s", i, err);
}

static int mem_lock(void *log)
{
    mem_log *m = log;
    pthread_mutex_lock(&m->lock);
    if (!m->failed)
        return 0;
    pthread_mutex_unlock(&m->lock);
    return -1;
}

static void mem_unlock(void *log)
{
    pthread_mutex_unlock(&((mem_log *)log)->lock);
}

static int mem_append(void *log, const pd_journal_record *rec)
{
    mem_log *m = log;
    if (m->refuse_next || mem_push(m, rec) != 0) {
        m->failed = 1;
        snprintf(m->why, sizeof m->why, "the memory log refused record %zu", m->n);
        return -1;
    }
    return 0;
}

static int mem_sync(void *log)
{
    mem_log *m = log;
    pthread_mutex_lock(&m->lock);
    m->synced = m->n;
    m->syncs++;
    pthread_mutex_unlock(&m->lock);
    return 0;
}

static int mem_dirty(void *log)
{
    mem_log *m = log;
    pthread_mutex_lock(&m->lock);
    int dirty = m->synced < m->n;
    pthread_mutex_unlock(&m->lock);
    return dirty;
}

static const char *mem_why(void *log)
{
    return ((mem_log *)log)->why;
}

static int mem_failed(void *log)
{
    mem_log *m = log;
    pthread_mutex_lock(&m->lock);
    int failed = m->failed;
    pthread_mutex_unlock(&m->lock);
    return failed;
}

/* A whole-scene record of every scene r serves, as the log's new start
 * (lock held). 0, or -1 when memory ran out. */
static int mem_snapshot_locked(mem_log *m, pd_registry *r)
{
    pd_scene **list = NULL;
    size_t n = pd_registry_list(r, &list);
    size_t start = m->n;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        pd_journal_record rec;
        rc = pd_journal_scene_record(list[i], &rec);
        if (rc == 0)
            rc = mem_push(m, &rec);
        pd_journal_record_free(&rec);
    }
    pd_registry_release_list(list, n);
    if (rc == 0) {
        m->snap_start = start;
        m->snap_end = m->n;
    }
    return rc;
}

/* A reload, between begin and end. */
typedef struct mem_reload {
    size_t n_built;               /* scenes the set built anew */
} mem_reload;

static void *mem_reload_begin(void *log, pd_registry *r, const pd_scene_set *set)
{
    (void)r;
    mem_log *m = log;
    if (mem_lock(m) != 0)
        return NULL;
    mem_reload *rl = calloc(1, sizeof *rl);
    if (!rl) {
        mem_unlock(m);
        return NULL;
    }
    size_t kept = 0;
    pd_scene_set_counts(set, &kept, &rl->n_built);
    return rl;
}

/* A reload that built scenes anew made the history before it one of maps
 * the config no longer has (a restart loads the new ones): the log starts
 * again from what is served now, as the file journal's compaction after
 * such a reload does. One that kept every scene needs no record. */
static void mem_reload_end(void *log, pd_registry *r, void *state)
{
    mem_log *m = log;
    mem_reload *rl = state;
    if (rl->n_built && mem_snapshot_locked(m, r) != 0) {
        m->failed = 1;
        snprintf(m->why, sizeof m->why, "out of memory recording a reload");
    }
    free(rl);
    mem_unlock(m);
}

/* Replay from the last snapshot on (everything when there is none). */
static int mem_replay(void *log, pd_registry *r, pd_world_store *ws, pd_journal_replay_stats *stats, char *err,
                      size_t errlen)
{
    mem_log *m = log;
    memset(stats, 0, sizeof *stats);
    pd_journal_replayer *rp = pd_journal_replayer_create(r, ws);
    if (!rp) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = m->snap_start; i < m->n; i++) {
        pd_journal_record rec;
        char why_buf[256];
        mem_get(m, i, &rec);
        const char *why = pd_journal_replay_one(rp, &rec, why_buf, sizeof why_buf);
        if (why)
            fail_msg("record %zu (scene '%s', version %llu) skipped: %s", i, rec.scene,
                     (unsigned long long)rec.version, why);
        stats->records++;
        pd_journal_record_free(&rec);
    }
    pd_journal_replayer_destroy(rp);
    return 0;
}

/* The records of `name` after the last one that made `from`. */
static int mem_tail(void *log, const char *name, uint64_t from, pd_journal_tail_fn fn, void *user, char *err,
                    size_t errlen)
{
    mem_log *m = log;
    (void)err, (void)errlen;
    pthread_mutex_lock(&m->lock);
    size_t start = SIZE_MAX;
    int in_snapshot = 0, seen = 0, first_follows = 0;
    for (size_t i = m->snap_start; i < m->n; i++) {
        pd_journal_record rec;
        mem_get(m, i, &rec);
        if (strcmp(rec.scene, name) == 0) {
            if (!seen)
                first_follows = rec.type == PD_JOURNAL_UPDATE && rec.version == from + 1;
            seen = 1;
            if (rec.type != PD_JOURNAL_DROP && rec.version == from)
                start = i + 1;
            if (rec.type != PD_JOURNAL_DROP && i < m->snap_end)
                in_snapshot = 1;
        }
        pd_journal_record_free(&rec);
    }
    /* Not found: the log's start is the point `from` only for a scene it
     * has no state record of, with nothing before (from 0) or whose first
     * record is the update made on `from`. */
    int rc = 0;
    if (start == SIZE_MAX) {
        if (in_snapshot || !(from == 0 || first_follows))
            rc = 1;
        else
            start = m->snap_start;
    }
    for (size_t i = start; rc == 0 && i < m->n; i++) {
        pd_journal_record rec;
        mem_get(m, i, &rec);
        int stop = strcmp(rec.scene, name) == 0 && fn(user, &rec) != 0;
        pd_journal_record_free(&rec);
        if (stop)
            break;
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

static int mem_snapshot(void *log, pd_registry *r, char *err, size_t errlen)
{
    mem_log *m = log;
    pthread_mutex_lock(&m->lock);
    int rc = mem_snapshot_locked(m, r);
    if (rc != 0)
        snprintf(err, errlen, "out of memory");
    pthread_mutex_unlock(&m->lock);
    return rc;
}

static int mem_compact(void *log, char *err, size_t errlen)
{
    mem_log *m = log;
    (void)err, (void)errlen;
    pthread_mutex_lock(&m->lock);
    size_t gone = m->snap_start;
    for (size_t i = 0; i < gone; i++)
        free(m->recs[i].framed);
    memmove(m->recs, m->recs + gone, (m->n - gone) * sizeof *m->recs);
    m->n -= gone;
    m->synced = m->synced > gone ? m->synced - gone : 0;
    m->snap_start = 0;
    m->snap_end -= gone;
    pthread_mutex_unlock(&m->lock);
    return 0;
}

/* Past 8 records since its snapshot. */
static int mem_wants_compaction(void *log)
{
    mem_log *m = log;
    pthread_mutex_lock(&m->lock);
    int wants = m->n - m->snap_end > 8;
    pthread_mutex_unlock(&m->lock);
    return wants;
}

static void mem_sizes(void *log, uint64_t *log_bytes, uint64_t *snapshot_bytes)
{
    mem_log *m = log;
    pthread_mutex_lock(&m->lock);
    *log_bytes = *snapshot_bytes = 0;
    for (size_t i = m->snap_start; i < m->n; i++)
        *(i < m->snap_end ? snapshot_bytes : log_bytes) += m->recs[i].len;
    pthread_mutex_unlock(&m->lock);
}

static void mem_close(void *log)
{
    ((mem_log *)log)->closed++;
}

static const pd_changelog_ops MEM_OPS = {
    .lock = mem_lock,
    .unlock = mem_unlock,
    .append = mem_append,
    .sync = mem_sync,
    .dirty = mem_dirty,
    .why = mem_why,
    .failed = mem_failed,
    .reload_begin = mem_reload_begin,
    .reload_end = mem_reload_end,
    .replay = mem_replay,
    .tail = mem_tail,
    .snapshot = mem_snapshot,
    .compact = mem_compact,
    .wants_compaction = mem_wants_compaction,
    .sizes = mem_sizes,
    .close = mem_close,
};

static void mem_init(mem_log *m)
{
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->lock, NULL);
}

static void mem_free(mem_log *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->recs[i].framed);
    free(m->recs);
    pthread_mutex_destroy(&m->lock);
}

/* ---- scenes and stores ------------------------------------------------------ */

/* A store over r with m replayed into it and made its log. */
static pd_store *store_over_registry(mem_log *m, pd_registry *r, pd_conf_fsync fsync)
{
    pd_store *st = pd_store_create(r, NULL);
    assert_non_null(st);
    pd_journal_replay_stats stats;
    char err[256];
    if (pd_store_replay(st, (pd_changelog){ &MEM_OPS, m }, &stats, err, sizeof err) != 0)
        fail_msg("replay: %s", err);
    pd_store_own_log(st, (pd_changelog){ &MEM_OPS, m }, fsync);
    return st;
}

/* The same over a fresh config registry. */
static pd_store *store_over(mem_log *m, pd_conf_fsync fsync)
{
    return store_over_registry(m, config_registry(), fsync);
}

/* Updates to the first n_names of town, arena and arena-1 in turn. */
static void churn(pd_store *st, uint64_t *rng, int rounds, int n_names)
{
    static const char *const names[] = { "town", "arena", "arena-1" };
    for (int i = 0; i < rounds; i++)
        random_update(st, names[i % n_names], rng);
}

/* A fresh store over the config (the open "town", or conf's scenes), with
 * m replayed into it, serves what st serves. */
static void assert_replays_to_conf(mem_log *m, pd_store *st, const pd_conf *conf)
{
    pd_registry *r = config_registry();
    if (conf) {
        char err[256];
        pd_registry_destroy(r);
        r = pd_registry_create();
        assert_int_equal(pd_registry_load(r, conf, err, sizeof err), 0);
    }
    pd_store *again = store_over_registry(m, r, PD_CONF_FSYNC_NO);
    assert_same_world(pd_store_registry(st), pd_store_registry(again));
    pd_store_set_log(again, (pd_changelog){ NULL, NULL }); /* m stays st's */
    store_free(again);
}

static void assert_replays_to(mem_log *m, pd_store *st)
{
    assert_replays_to_conf(m, st, NULL);
}

/* ---- the tests ---------------------------------------------------------------- */

/* Every kind of change through the store lands in the second log, and its
 * replay into a fresh store gives the same scenes; so does it after a
 * snapshot and a compaction, with more changes on top. */
static void test_changes_replay_through_a_second_log(void **state)
{
    (void)state;
    uint64_t rng = 31;
    mem_log m;
    mem_init(&m);
    pd_store *st = store_over(&m, PD_CONF_FSYNC_ALWAYS);
    assert_true(pd_store_has_log(st));

    pd_store_change ch;
    assert_int_equal(pd_store_add_scene(st, open_scene("arena", SIDE), &ch), PD_OK);
    assert_int_equal(ch.version, 1);
    assert_int_equal(pd_store_add_scene(st, open_scene("scratch", SIDE), &ch), PD_OK);
    churn(st, &rng, 5, 2);
    assert_int_equal(pd_store_add_instance(st, "arena-1", "arena", &ch), PD_OK);
    churn(st, &rng, 12, 3);
    assert_int_equal(pd_store_drop_scene(st, "scratch", 0, &ch), PD_OK);
    assert_true(ch.applied);
    assert_int_equal(pd_store_add_instance(st, "arena-2", "arena", &ch), PD_OK);

    /* "always": synced after every change, before its answer. */
    assert_int_equal(m.synced, m.n);
    assert_true(m.syncs >= 20);
    assert_false(pd_store_sync_due(st));
    assert_replays_to(&m, st);

    /* The log wants compacting; after it, it holds one record per scene
     * and replays to the same scenes. */
    assert_true(pd_store_compaction_due(st));
    char err[256];
    assert_int_equal(pd_store_compact(st, err, sizeof err), 0);
    assert_int_equal(m.n, 4); /* town, arena, arena-1, arena-2 */
    assert_false(pd_store_compaction_due(st));
    assert_replays_to(&m, st);
    churn(st, &rng, 9, 3);
    assert_int_equal(pd_store_drop_scene(st, "arena-2", 0, &ch), PD_OK);
    assert_replays_to(&m, st);

    uint64_t log_bytes, snap_bytes;
    int failed;
    assert_int_equal(pd_store_log_state(st, &log_bytes, &snap_bytes, &failed), 1);
    assert_true(log_bytes > 0 && snap_bytes > 0);
    assert_int_equal(failed, 0);

    store_free(st);
    assert_int_equal(m.closed, 1); /* the store owned it */
    mem_free(&m);
}

/* A tail from a version gives the scene's records after it, in order and
 * no other scene's; from a version a compaction took away it says so. */
static void test_tail_from_a_version(void **state)
{
    (void)state;
    uint64_t rng = 7;
    mem_log m;
    mem_init(&m);
    pd_store *st = store_over(&m, PD_CONF_FSYNC_NO);
    check_tail_from_a_version(st, &rng);
    pd_store_change ch;
    tailed g;

    /* After a compaction the log starts at version 7: an older point is
     * gone, the snapshot's own version goes on. */
    char err[256];
    assert_int_equal(pd_store_compact(st, err, sizeof err), 0);
    assert_int_equal(tail_of(st, "town", 3, &g), 1);
    assert_int_equal(g.n, 0);
    random_update(st, "town", &rng);
    assert_int_equal(tail_of(st, "town", 7, &g), 0);
    assert_int_equal(g.n, 1);
    assert_int_equal(g.versions[0], 8);

    /* A scene dropped: its tail ends with the drop. */
    assert_int_equal(pd_store_drop_scene(st, "arena", 0, &ch), PD_OK);
    assert_int_equal(tail_of(st, "arena", 7, &g), 0);
    assert_int_equal(g.n, 1);
    assert_int_equal(g.types[0], PD_JOURNAL_DROP);

    store_free(st);
    mem_free(&m);
}

/* The store, not the log, decides when to sync: "everysec" leaves it to
 * the caller's timer (pd_store_sync_due, pd_store_sync), "no" never. */
static void test_fsync_policy_is_the_stores(void **state)
{
    (void)state;
    uint64_t rng = 3;
    mem_log m;
    mem_init(&m);
    pd_store *st = store_over(&m, PD_CONF_FSYNC_EVERYSEC);
    random_update(st, "town", &rng);
    assert_int_equal(m.syncs, 0);
    assert_true(pd_store_sync_due(st));
    assert_int_equal(pd_store_sync(st), 0);
    assert_int_equal(m.syncs, 1);
    assert_false(pd_store_sync_due(st));

    pd_store_set_fsync(st, PD_CONF_FSYNC_NO);
    random_update(st, "town", &rng);
    assert_int_equal(m.syncs, 1);
    assert_false(pd_store_sync_due(st)); /* dirty, but "no" never asks */
    store_free(st);
    mem_free(&m);
}

/* A record the log refuses is a version never served, and the log then
 * refuses every later change, with its reason in the answer. */
static void test_refused_record_is_not_served(void **state)
{
    (void)state;
    uint64_t rng = 5;
    mem_log m;
    mem_init(&m);
    pd_store *st = store_over(&m, PD_CONF_FSYNC_ALWAYS);
    random_update(st, "town", &rng);
    m.refuse_next = 1;
    pd_point p = { 1, 1 };
    pd_scene_update op = { .op = PD_UPDATE_BLOCK, .cells = &p, .n_cells = 1 };
    pd_store_update out;
    assert_int_equal(pd_store_update_cells(st, "town", &op, 1, &out), PD_INTERNAL);
    assert_non_null(strstr(out.message, "the memory log refused"));
    assert_int_equal(version_of(st, "town"), 2);
    m.refuse_next = 0;
    assert_int_equal(pd_store_update_cells(st, "town", &op, 1, &out), PD_INTERNAL);
    assert_non_null(strstr(out.message, "refused until pathd restarts"));
    assert_int_equal(version_of(st, "town"), 2);
    uint64_t lb, sb;
    int failed;
    pd_store_log_state(st, &lb, &sb, &failed);
    assert_int_equal(failed, 1);
    store_free(st);
    mem_free(&m);
}

/* Reloads through the second log: one that keeps the config scene (its
 * map unchanged) records nothing and its updates replay on; one that
 * builds it anew from a changed map leaves a log that replays, over the
 * config as it is now, to the same scenes - the rebuilt one and the
 * instance of the one it replaced, with its updates. */
static void test_reloads_through_a_second_log(void **state)
{
    (void)state;
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/pd-store-log-XXXXXX");
    assert_non_null(mkdtemp(dir));
    char map[(SIDE + 1) * SIDE + 1];
    town_map(map, 0);
    pd_conf c;
    town_conf(dir, map, &c);
    pd_registry *r = pd_registry_create();
    char err[256];
    assert_int_equal(pd_registry_load(r, &c, err, sizeof err), 0);
    mem_log m;
    mem_init(&m);
    pd_store *st = store_over_registry(&m, r, PD_CONF_FSYNC_NO);
    uint64_t rng = 11;
    random_update(st, "town", &rng);
    pd_store_change ch;
    assert_int_equal(pd_store_add_instance(st, "town-1", "town", &ch), PD_OK);
    random_update(st, "town-1", &rng);

    size_t before = m.n;
    store_reload(st, &c); /* the same map: kept */
    assert_int_equal(m.n, before);
    assert_int_equal(version_of(st, "town"), 2);
    random_update(st, "town", &rng);
    assert_replays_to_conf(&m, st, &c);
    pd_conf_free(&c);

    town_map(map, 2);
    town_conf(dir, map, &c);
    store_reload(st, &c); /* a changed map: built anew */
    assert_int_equal(version_of(st, "town"), 4);
    random_update(st, "town-1", &rng);
    assert_replays_to_conf(&m, st, &c);
    pd_conf_free(&c);

    store_free(st);
    mem_free(&m);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_changes_replay_through_a_second_log),
        cmocka_unit_test(test_tail_from_a_version),
        cmocka_unit_test(test_fsync_policy_is_the_stores),
        cmocka_unit_test(test_refused_record_is_not_served),
        cmocka_unit_test(test_reloads_through_a_second_log),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
