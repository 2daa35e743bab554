/*
 * pd_journal_loop.c - the journal (pd_journal.h) as the server runs it:
 * opened and replayed at start on libuv's threadpool while the loop keeps
 * the metrics port answering, then a once-a-second timer that hands the
 * "everysec" fsync and, when the log has grown past journal_compact_bytes,
 * the compaction to the threadpool. Neither ever blocks the loop thread;
 * appends and "always" fsyncs happen on the workers that apply the changes,
 * through the store (pd_store.h), whose change log the journal becomes once
 * it is open.
 */
#include "pd_server_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_log.h"

/* How often the timer looks at the journal: "everysec" means this. */
#define PD_JOURNAL_TICK_MS 1000

/* One piece of journal work on the threadpool. */
typedef struct pd__journal_work {
    uv_work_t req;               /* req.data: the server */
    enum { PD__JW_OPEN, PD__JW_SYNC, PD__JW_COMPACT } kind;
    pd_journal_opts opts;        /* PD__JW_OPEN */
    pd_journal_replay_stats stats;
    pd_journal *opened;
    int rc;
    int done;
    char err[PD_CONF_MAX_DATA_DIR + 256];
} pd__journal_work;

static void pd__journal_warn(void *user, const char *msg)
{
    (void)user;
    pd_log_warn("%s", msg);
}

static void pd__journal_work_cb(uv_work_t *req)
{
    pd__journal_work *w = (pd__journal_work *)req;
    pd_server *s = req->data;
    switch (w->kind) {
    case PD__JW_OPEN:
        w->opened = pd_journal_open(&w->opts, s->registry, s->world_store, &w->stats, w->err, sizeof w->err);
        w->rc = w->opened ? 0 : -1;
        break;
    case PD__JW_SYNC:
        w->rc = pd_journal_sync(s->journal.log);
        if (w->rc != 0)
            snprintf(w->err, sizeof w->err, "%s", strerror(errno));
        break;
    case PD__JW_COMPACT:
        w->rc = pd_journal_compact(s->journal.log, s->registry, w->err, sizeof w->err);
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
        pd_journal_sizes(s->journal.log, &log_bytes, &snap_bytes);
        if (w->rc != 0)
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
    if (s->journal.compacting || (!s->journal.compact_wanted && !pd_journal_wants_compaction(s->journal.log)))
        return;
    pd__journal_start(s, PD__JW_COMPACT, &s->journal.compacting);
    if (s->journal.compacting)
        s->journal.compact_wanted = 0;
}

static void pd__journal_tick(uv_timer_t *t)
{
    pd_server *s = t->data;
    if (s->phase != PD__RUNNING || !s->journal.log)
        return;
    if (pd_journal_fsync_policy(s->journal.log) == PD_CONF_FSYNC_EVERYSEC && pd_journal_dirty(s->journal.log))
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
    if (!s->journal.log || built == 0)
        return;
    s->journal.compact_wanted = 1;
    pd__journal_maybe_compact(s);
}

int pd__journal_open(pd_server *s, char *err, size_t errlen)
{
    if (!s->conf.data_dir[0])
        return 0;
    pd__journal_work *w = calloc(1, sizeof *w);
    if (!w) {
        snprintf(err, errlen, "journal: out of memory");
        return -1;
    }
    w->kind = PD__JW_OPEN;
    w->opts = (pd_journal_opts){
        .dir = s->conf.data_dir,
        .fsync = s->conf.journal_fsync,
        .compact_bytes = s->conf.journal_compact_bytes,
        .warn = pd__journal_warn,
    };
    pd_log_info("journal %s: replaying", s->conf.data_dir);
    /* /readyz answers "loading scenes" until the replay is done. */
    s->loading = 1;
    int rc = pd__journal_queue(s, w);
    if (rc != 0) {
        s->loading = 0;
        snprintf(err, errlen, "journal: cannot start the replay: %s", uv_strerror(rc));
        free(w);
        return -1;
    }
    while (!w->done)
        uv_run(s->loop, UV_RUN_ONCE);
    s->loading = 0;
    if (w->rc != 0) {
        snprintf(err, errlen, "%s", w->err);
        free(w);
        return -1;
    }
    s->journal.log = w->opened; /* the server closes it, also when stopping now */
    pd_store_set_log(s->store, pd_journal_changelog(s->journal.log));
    const pd_journal_replay_stats *st = &w->stats;
    pd_log_info("journal %s: replayed %" PRIu64 " records from %" PRIu64 " files (%" PRIu64 " bytes) in %" PRIu64
                " ms, %" PRIu64 " skipped, %" PRIu64 " bytes of damaged tail truncated; appending to generation %" PRIu64
                ", fsync %s",
                s->conf.data_dir, st->records, st->files, st->bytes, st->micros / 1000, st->skipped,
                st->truncated_bytes, st->generation, pd_conf_fsync_name(s->conf.journal_fsync));
    free(w);
    if (s->phase != PD__RUNNING)
        return 1; /* a stop came in during the replay */
    /* Replayed scenes join the world (their route tables) at the next sync. */
    if (s->world_store)
        pd_world_store_mark_stale(s->world_store, s->registry);
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
    *log_bytes = *snapshot_bytes = 0;
    *failed = 0;
    if (!s->journal.log)
        return 0;
    pd_journal_sizes(s->journal.log, log_bytes, snapshot_bytes);
    *failed = pd_journal_failed(s->journal.log);
    return 1;
}
