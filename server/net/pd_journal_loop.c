/*
 * pd_journal_loop.c - the store's change log (pd_store.h) as the server
 * runs it: the file journal of data_dir replayed at start on libuv's
 * threadpool while the loop keeps the metrics port answering, then a
 * once-a-second timer that hands the fsync the store's policy asks for
 * ("everysec") and, when the log wants it, the compaction to the
 * threadpool. Neither ever blocks the loop thread; appends and "always"
 * fsyncs happen on the workers that apply the changes, in the store. Only
 * the choice of the log (pd__journal_choose: the file journal, or the
 * Redis Streams log of config "log") names the log's implementation:
 * everything else goes through the store, which owns the log once it is
 * replayed and closes it (pd_store_destroy). The Redis log has nothing to
 * fsync; its "compaction" is writing the scene snapshots that are due to
 * Redis and trimming their streams (pd_redis_snapshot.h), which the same
 * timer hands to the threadpool.
 */
#include "pd_server_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_log.h"
#include "pd_redis_log.h"
#include "pd_redis_snapshot.h"
#include "pd_replica.h"
#include "pd_scene_reserve.h"

/* How often the timer looks at the journal: "everysec" means this. */
#define PD_JOURNAL_TICK_MS 1000

/* One piece of journal work on the threadpool. */
typedef struct pd__journal_work {
    uv_work_t req;               /* req.data: the server */
    enum { PD__JW_OPEN, PD__JW_SYNC, PD__JW_COMPACT } kind;
    pd_changelog log;            /* PD__JW_OPEN: the log to replay */
    int ran;                     /* PD__JW_OPEN: the replay ran (and closed the log
                                    if it failed) */
    pd_journal_replay_stats stats;
    int rc;
    int done;
    char err[PD_CONF_MAX_DATA_DIR + 256];
    pd_reservations_log_stats rstats;  /* PD__JW_OPEN: the reservation log's replay */
} pd__journal_work;

static void pd__journal_warn(void *user, const char *msg)
{
    (void)user;
    pd_log_warn("%s", msg);
}

static void pd__journal_info(void *user, const char *msg)
{
    (void)user;
    pd_log_info("%s", msg);
}

/* The reservation log's replay: the scene a record names. */
static pd_scene *pd__journal_scene(void *registry, const char *name)
{
    return pd_registry_acquire(registry, name);
}

static void pd__journal_work_cb(uv_work_t *req)
{
    pd__journal_work *w = (pd__journal_work *)req;
    pd_server *s = req->data;
    switch (w->kind) {
    case PD__JW_OPEN:
        w->rc = pd_store_replay(s->store, w->log, &w->stats, w->err, sizeof w->err);
        w->ran = 1;
        /* reservation log hook: the tables after the scenes they are of */
        if (w->rc == 0 && !s->conf.log.redis_host[0])
            w->rc = pd_reservations_open_log(pd_registry_reservations(s->registry), pd__journal_scene, s->registry,
                                             s->conf.data_dir, s->conf.journal_fsync == PD_CONF_FSYNC_ALWAYS,
                                             s->conf.journal_compact_bytes, &w->rstats, w->err, sizeof w->err);
        break;
    case PD__JW_SYNC:
        w->rc = pd_store_sync(s->store);
        if (w->rc != 0)
            snprintf(w->err, sizeof w->err, "%s", strerror(errno));
        if (pd_reservations_sync(pd_registry_reservations(s->registry)) != 0 && w->rc == 0) { /* reservation log hook */
            w->rc = -1;
            snprintf(w->err, sizeof w->err, "the reservation log's fdatasync failed");
        }
        break;
    case PD__JW_COMPACT:
        w->rc = pd_store_compact(s->store, w->err, sizeof w->err);
        break;
    }
}

static void pd__journal_after_cb(uv_work_t *req, int status)
{
    pd__journal_work *w = (pd__journal_work *)req;
    pd_server *s = req->data;
    s->journal.jobs--;
    if (status != 0 && w->rc == 0) {
        w->rc = -1;
        snprintf(w->err, sizeof w->err, "did not run: %s", uv_strerror(status));
    }
    switch (w->kind) {
    case PD__JW_OPEN:
        w->done = 1; /* pd__journal_open reads and frees it */
        return;
    case PD__JW_SYNC:
        s->journal.syncing = 0;
        if (w->rc != 0)
            pd_log_error("journal %s: fsync failed: %s", s->conf.data_dir, w->err);
        break;
    case PD__JW_COMPACT: {
        s->journal.compacting = 0;
        uint64_t log_bytes = 0, snap_bytes = 0;
        int failed = 0;
        pd_store_log_state(s->store, &log_bytes, &snap_bytes, &failed);
        if (w->rc != 0 && s->conf.log.redis_host[0])
            pd_log_error("Redis snapshots: %s; the streams keep growing until one is written", w->err);
        else if (s->conf.log.redis_host[0])
            pd_log_debug("Redis snapshots written (%" PRIu64 " bytes written or loaded so far)", snap_bytes);
        else if (w->rc != 0)
            pd_log_error("journal compaction failed: %s; the journal keeps growing until one succeeds", w->err);
        else
            pd_log_info("journal %s compacted: snapshot %" PRIu64 " bytes, log %" PRIu64 " bytes", s->conf.data_dir,
                        snap_bytes, log_bytes);
        break;
    }
    }
    free(w);
}

static int pd__journal_queue(pd_server *s, pd__journal_work *w)
{
    w->req.data = s;
    int rc = uv_queue_work(s->loop, &w->req, pd__journal_work_cb, pd__journal_after_cb);
    if (rc == 0)
        s->journal.jobs++;
    return rc;
}

/* Queues one piece of background work unless one of its kind is queued
 * already (*busy). */
static void pd__journal_start(pd_server *s, int kind, int *busy)
{
    if (*busy)
        return;
    pd__journal_work *w = calloc(1, sizeof *w);
    if (!w)
        return;
    w->kind = kind;
    if (pd__journal_queue(s, w) == 0)
        *busy = 1;
    else
        free(w);
}

/* Starts a compaction when the log is large or a reload asked for one,
 * unless one is queued or running already (then the next tick tries). */
static void pd__journal_maybe_compact(pd_server *s)
{
    if (s->journal.compacting || (!s->journal.compact_wanted && !pd_store_compaction_due(s->store)))
        return;
    pd__journal_start(s, PD__JW_COMPACT, &s->journal.compacting);
    if (s->journal.compacting)
        s->journal.compact_wanted = 0;
}

static void pd__journal_tick(uv_timer_t *t)
{
    pd_server *s = t->data;
    if (s->phase != PD__RUNNING || !pd_store_has_log(s->store))
        return;
    if (pd_store_sync_due(s->store) || pd_reservations_sync_due(pd_registry_reservations(s->registry)))
        pd__journal_start(s, PD__JW_SYNC, &s->journal.syncing);
    pd__journal_maybe_compact(s);
}

/* A scene the reload built anew replaced one whose history the log holds:
 * its updates, and the instances made of it, were made on the map the
 * reload replaced. A restart loads the config's maps as they are now and
 * replays the log over them, so that history would replay on the new map.
 * A snapshot holds the state as served instead (instances over their own
 * BASE cells), so a compaction is asked for at once. One that is running
 * may have listed the scenes before the publish: the wish then waits for
 * the next tick after it. */
void pd__journal_after_reload(pd_server *s, size_t built)
{
    if (!pd_store_has_log(s->store) || built == 0)
        return;
    s->journal.compact_wanted = 1;
    pd__journal_maybe_compact(s);
}

/* The change log the config names: the Redis Streams log with "log.redis"
 * (issue 32; data_dir, when set, then holds its local cache), else the
 * file journal of data_dir. ops NULL with err when it cannot be made. */
static pd_changelog pd__journal_choose(pd_server *s, char *err, size_t errlen)
{
    const pd_conf_log *lg = &s->conf.log;
    if (lg->redis_host[0]) {
        if (s->conf.data_dir[0])
            pd_log_info("data_dir %s holds a local cache of the Redis log's snapshots (a restart reads only the "
                        "stream after them)",
                        s->conf.data_dir);
        const pd_redis_log_opts ro = {
            .host = lg->redis_host,
            .port = lg->redis_port,
            .timeout_ms = lg->timeout_ms,
            .prefix = lg->prefix,
            .dedup_ttl_s = lg->dedup_ttl_s,
            .warn = pd__journal_warn,
        };
        const pd_redis_snap_opts so = {
            .every = lg->snapshot_every,
            .keep = lg->snapshot_keep,
            .max_bytes = lg->snapshot_max_bytes,
            .cache_dir = s->conf.data_dir,
            .warn = pd__journal_warn,
            .info = pd__journal_info,
        };
        pd_log_info("change log on Redis %s:%u (prefix %s): replaying", lg->redis_host, (unsigned)lg->redis_port,
                    lg->prefix);
        return pd_redis_log_open_with_snapshots(&ro, &so, err, errlen);
    }
    const pd_journal_opts opts = {
        .dir = s->conf.data_dir,
        .fsync = s->conf.journal_fsync,
        .compact_bytes = s->conf.journal_compact_bytes,
        .warn = pd__journal_warn,
    };
    pd_log_info("journal %s: replaying", s->conf.data_dir);
    return pd_journal_file_log(&opts, err, errlen);
}

static int pd__journal_replay(pd_server *s, char *err, size_t errlen);

int pd__journal_open(pd_server *s, char *err, size_t errlen)
{
    if (!s->conf.data_dir[0] && !s->conf.log.redis_host[0])
        return 0;
    /* The config's scenes as loaded, before the replay changes them: what
     * a RESET the replica's tail applies goes back to (not the scenes the
     * replay leaves, which hold the log's changes). Out of memory: those. */
    pd_scene **loaded = NULL;
    size_t n_loaded = s->conf.log.redis_host[0] ? pd_registry_list(s->registry, &loaded) : 0;
    int rc = pd__journal_replay(s, err, errlen);
    if (rc == 0 && s->replica && loaded) {
        pd__replica_set_config(s->replica, loaded, n_loaded);
        loaded = NULL;
        n_loaded = 0;
    }
    pd_registry_release_list(loaded, n_loaded);
    return rc;
}

/* pd__journal_open's replay, then the replica's tail and the tick. */
static int pd__journal_replay(pd_server *s, char *err, size_t errlen)
{
    pd__journal_work *w = calloc(1, sizeof *w);
    if (!w) {
        snprintf(err, errlen, "journal: out of memory");
        return -1;
    }
    w->kind = PD__JW_OPEN;
    w->log = pd__journal_choose(s, err, errlen);
    if (!w->log.ops) {
        free(w);
        return -1;
    }
    /* /readyz answers "loading scenes" until the replay is done. */
    s->loading = 1;
    int rc = pd__journal_queue(s, w);
    if (rc != 0) {
        s->loading = 0;
        snprintf(err, errlen, "journal: cannot start the replay: %s", uv_strerror(rc));
        w->log.ops->close(w->log.log);
        free(w);
        return -1;
    }
    while (!w->done)
        uv_run(s->loop, UV_RUN_ONCE);
    s->loading = 0;
    if (w->rc != 0) {
        snprintf(err, errlen, "%s", w->err);
        if (!w->ran) /* cancelled before it ran: the log was never opened */
            w->log.ops->close(w->log.log);
        free(w);
        return -1;
    }
    /* The store closes it (pd_store_destroy), also when stopping now. */
    pd_store_own_log(s->store, w->log, s->conf.journal_fsync);
    void *w_log = w->log.log;
    const pd_journal_replay_stats *st = &w->stats;
    if (s->conf.log.redis_host[0])
        pd_log_info("change log on Redis %s:%u: replayed %" PRIu64 " records from %" PRIu64 " streams (%" PRIu64
                    " bytes) in %" PRIu64 " ms, %" PRIu64 " skipped",
                    s->conf.log.redis_host, (unsigned)s->conf.log.redis_port, st->records, st->files, st->bytes,
                    st->micros / 1000, st->skipped);
    else
        pd_log_info("journal %s: replayed %" PRIu64 " records from %" PRIu64 " files (%" PRIu64 " bytes) in %" PRIu64
                " ms, %" PRIu64 " skipped, %" PRIu64 " bytes of damaged tail truncated; appending to generation %" PRIu64
                ", fsync %s",
                s->conf.data_dir, st->records, st->files, st->bytes, st->micros / 1000, st->skipped,
                st->truncated_bytes, st->generation, pd_conf_fsync_name(s->conf.journal_fsync));
    if (!s->conf.log.redis_host[0]) { /* reservation log hook */
        const pd_reservations_log_stats *rs = &w->rstats;
        pd_log_info("reservation log %s/reservations.log: replayed %" PRIu64 " records (%" PRIu64 " bytes), %" PRIu64
                    " of scenes not served, %" PRIu64 " refused by the table, %" PRIu64
                    " bytes of damaged tail truncated",
                    s->conf.data_dir, rs->records, rs->bytes, rs->unserved, rs->refused, rs->truncated_bytes);
        /* A damaged tail is acknowledged changes lost (the scene journal's
         * replay warns the same way): said at warn, where an operator who
         * logs only warnings sees it, with where it began. */
        if (rs->truncated_bytes)
            pd_log_warn("reservation log %s/reservations.log: damaged at offset %" PRIu64 ": %" PRIu64
                        " records kept, %" PRIu64 " bytes truncated (the reservation changes in them are lost)",
                        s->conf.data_dir, rs->bytes, rs->records, rs->truncated_bytes);
        if (rs->refused)
            pd_log_warn("reservation log: %" PRIu64 " changes did not apply to the tables they were made on",
                        rs->refused);
    }
    free(w);
    if (s->phase != PD__RUNNING)
        return 1; /* a stop came in during the replay */
    /* Replayed scenes join the world (their route tables) at the next sync. */
    if (s->world_store)
        pd_world_store_mark_stale(s->world_store, s->registry);
    /* A log other replicas share: the tail reads on from where replay
     * stopped (pd_replica.c). */
    if (s->conf.log.redis_host[0] && !(s->replica = pd__replica_start(s, (pd_redis_log *)w_log, pd__dispatch_parked, err, errlen)))
        return -1;
    /* shared log hook: reservations go through the same Redis, one stream
     * per scene beside its log (ARCHITECTURE.md, "Reservations in the log") */
    if (s->conf.log.redis_host[0])
        pd_reservations_share(pd_registry_reservations(s->registry), (pd_redis_log *)w_log);
    if ((rc = uv_timer_init(s->loop, &s->journal.timer)) != 0) {
        snprintf(err, errlen, "journal: timer: %s", uv_strerror(rc));
        return -1;
    }
    s->journal.timer.data = s;
    s->open_handles++;
    uv_timer_start(&s->journal.timer, pd__journal_tick, PD_JOURNAL_TICK_MS, PD_JOURNAL_TICK_MS);
    return 0;
}

int pd__journal_sizes(pd_server *s, uint64_t *log_bytes, uint64_t *snapshot_bytes, int *failed)
{
    return pd_store_log_state(s->store, log_bytes, snapshot_bytes, failed);
}
