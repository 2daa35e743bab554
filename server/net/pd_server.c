/*
 * pd_server.c - the libuv front end (see pd_server.h): the server's own
 * handles, start, graceful stop, the public API, and the one place a
 * config is applied (pd__server_apply: at start-up through pd_server_load,
 * then after each reload). It is the top of the net layer: it calls the
 * connections (pd_conn.c, the id map in pd_connmap.c), the dispatcher
 * (pd_dispatch.c), the watchers (pd_watchers.c), the reload (pd_reload.c,
 * which only prepares a config) and the journal loop, and none of them
 * calls it: they call up through the hooks and callbacks it sets in their
 * parts of the server struct (pd_server_internal.h).
 *
 * Everything here runs on the loop thread except pd_server_wake (which
 * writes to an eventfd while the loop sleeps: see the completion hand-off
 * below) and the two request_* functions, which only set atomic flags and
 * call uv_async_send.
 *
 * Shutdown runs through phases: DRAINING (nothing new is read; in-flight jobs
 * get shutdown_grace_ms), CANCELLING (the rest are cancelled and get
 * PD_SERVER_CANCEL_WAIT_MS to come back), FLUSHING (every connection is shut
 * down once its replies are written, cut after PD_SERVER_FLUSH_MS), CLOSED
 * (the server's own handles close and uv_run returns).
 *
 * Draining (SIGUSR1, back with SIGUSR2; docs/OPERATIONS.md) is not a stop:
 * the replica keeps every connection and answers what it owes, tells each
 * connection DRAINING once and every new request after (but Ping, Cancel
 * and Unwatch), and says "drain" on the agent-check port so HAProxy sends
 * new connections elsewhere. What Ping, the agent and dispatch report is
 * decided in one place, pd__server_serving.
 */
#include "pd_replica.h"
#include "pd_server_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "pd_log.h"
#include "pd_scene_reserve.h"

static void pd__stop_timer_cb(uv_timer_t *t);
static void pd__fit_fd_limit(pd_conf *conf);
static void pd__server_scene_caps(pd_server *s);
static void pd__server_reload(pd_server *s);

static void pd__check_drained(pd_server *s);

/* ---- the completion hand-off ---------------------------------------------
 *
 * The loop takes the workers' results at three points: in its check phase
 * (right after the I/O callbacks, before their answers are flushed), in
 * its prepare phase (the last thing before it sleeps) and when woken by
 * wake_fd. A worker writes to wake_fd only when loop_asleep is set, and
 * then once until the loop has read it or looks again before sleeping
 * (wake_sent, cleared before each of those looks). loop_asleep is set at
 * the top of the prepare phase, before its last look at the list, and
 * cleared once the loop is awake again (the wake itself, the check
 * phase; not by a frame: the prepare phase's own flush may dispatch
 * frames, after its look): a worker that read it clear put its results on the
 * list before the loop set it (both are sequentially consistent, and the
 * list is behind a mutex), so the prepare phase's look finds them. Under a
 * pipelined load the loop is mostly awake while workers finish, and their
 * results then cost no system call at all. */

static void pd__take_completions(pd_server *s)
{
    if (pd__dispatch_completions(s))
        pd__check_drained(s);
}

static void pd__flush_prepare_cb(uv_prepare_t *h)
{
    pd_server *s = h->data;
    atomic_store(&s->loop_asleep, 1);
    /* Cleared before this last look too, not only when a wake is read: a
     * wake the loop read before a worker's exchange found it still set
     * would otherwise leave it set with nothing to read, and no worker
     * would write again. At worst a wake in flight is written twice. */
    atomic_store(&s->wake_sent, 0);
    pd__take_completions(s);
    pd__flush_due(s);
}

static void pd__flush_check_cb(uv_check_t *h)
{
    pd_server *s = h->data;
    atomic_store_explicit(&s->loop_asleep, 0, memory_order_relaxed);
    pd__take_completions(s);
    pd__flush_due(s);
}

static void pd__wake_cb(uv_poll_t *h, int status, int events)
{
    (void)status;
    (void)events;
    pd_server *s = h->data;
    uint64_t n;
    atomic_store_explicit(&s->loop_asleep, 0, memory_order_relaxed);
    /* Cleared before the read: a worker that writes after it is read by
     * the next wake, at worst a spurious one. */
    atomic_store(&s->wake_sent, 0);
    while (read(s->wake_fd, &n, sizeof n) < 0 && errno == EINTR)
        ;
    pd__take_completions(s);
}

void pd_server_wake(void *server)
{
    pd_server *s = server;
    if (!atomic_load(&s->loop_asleep) || atomic_exchange(&s->wake_sent, 1))
        return;
    const uint64_t one = 1;
    /* Non-blocking: a full counter (never, in practice) already wakes. */
    while (write(s->wake_fd, &one, sizeof one) < 0 && errno == EINTR)
        ;
}

static void pd__handle_closed(uv_handle_t *h)
{
    pd_server *s = h->data;
    s->open_handles--;
}

/* Closes one of the server's own handles if it was ever initialised and is
 * not closing yet (the server struct starts zeroed: UV_UNKNOWN_HANDLE). */
static void pd__close_handle(uv_handle_t *h)
{
    if (h->type != UV_UNKNOWN_HANDLE && !uv_is_closing(h))
        uv_close(h, pd__handle_closed);
}

static void pd__format_address(const pd_server *s, uint16_t port, char *out, size_t len)
{
    if (strchr(s->conf.listen_host, ':'))
        snprintf(out, len, "[%s]:%u", s->conf.listen_host, (unsigned)port);
    else
        snprintf(out, len, "%s:%u", s->conf.listen_host, (unsigned)port);
}

/* The idle sweep runs often enough to close an idle connection within about a
 * quarter of the timeout past it, and at least once a second for lingering
 * closes. */
static uint64_t pd__sweep_interval(const pd_conf *conf)
{
    uint64_t ms = conf->idle_timeout_ms / 4;
    if (conf->idle_timeout_ms == 0 || ms > PD_SERVER_SWEEP_MAX_MS)
        ms = PD_SERVER_SWEEP_MAX_MS;
    if (ms < PD_SERVER_SWEEP_MIN_MS)
        ms = PD_SERVER_SWEEP_MIN_MS;
    return ms;
}


/* Last step of a stop: close the server's own handles. The async handle
 * and the completions' wake stay open (workers may still wake it until the
 * pool is destroyed) but no longer keep uv_run going. */
static void pd__stop_finish(pd_server *s)
{
    s->phase = PD__CLOSED;
    pd__close_handle((uv_handle_t *)&s->listener);
    pd__close_handle((uv_handle_t *)&s->sweep_timer);
    pd__close_handle((uv_handle_t *)&s->table.full_timer);
    pd__close_handle((uv_handle_t *)&s->table.hold_timer);
    pd__close_handle((uv_handle_t *)&s->stop_timer);
    pd__close_handle((uv_handle_t *)&s->journal.timer);
    pd__close_handle((uv_handle_t *)&s->sig_term);
    pd__close_handle((uv_handle_t *)&s->sig_int);
    pd__close_handle((uv_handle_t *)&s->sig_hup);
    pd__replica_close(s->replica); /* freed once its handles closed */
    s->replica = NULL;
    pd__close_handle((uv_handle_t *)&s->sig_usr1);
    pd__close_handle((uv_handle_t *)&s->sig_usr2);
    pd__agent_close(s);
    uv_unref((uv_handle_t *)&s->async);
    uv_unref((uv_handle_t *)&s->wake_poll);
    pd_log_info("stopped");
}

static void pd__flush_begin(pd_server *s)
{
    s->phase = PD__FLUSHING;
    /* Answers still waiting for the iteration's flush count as queued. */
    pd__flush_all(s);
    for (pd__conn *c = s->table.conns; c; c = c->next) {
        if (c->closing)
            continue;
        if (c->writes_pending == 0 || c->shutdown_done)
            pd__conn_close(c);
        else
            pd__conn_shutdown(c);
    }
    if (s->table.n_conns == 0)
        pd__stop_finish(s);
    else
        uv_timer_start(&s->stop_timer, pd__stop_timer_cb, PD_SERVER_FLUSH_MS, 0);
}

static void pd__cancel_all(pd_server *s)
{
    pd_log_warn("grace period over: cancelling %" PRIu64 " jobs in flight", s->dispatch.in_flight);
    s->phase = PD__CANCELLING;
    for (pd__conn *c = s->table.conns; c; c = c->next)
        if (c->in_flight > 0)
            pd_pool_cancel_owner(s->pool, c->id);
}

static void pd__check_drained(pd_server *s)
{
    switch (s->phase) {
    case PD__DRAINING:
    case PD__CANCELLING:
        if (s->dispatch.in_flight == 0) {
            uv_timer_stop(&s->stop_timer);
            pd__flush_begin(s);
        }
        break;
    case PD__FLUSHING:
        if (s->table.n_conns == 0) {
            uv_timer_stop(&s->stop_timer);
            pd__stop_finish(s);
        }
        break;
    case PD__RUNNING:
    case PD__CLOSED:
        break;
    }
}

static void pd__stop_timer_cb(uv_timer_t *t)
{
    pd_server *s = t->data;
    switch (s->phase) {
    case PD__DRAINING:
        pd__cancel_all(s);
        uv_timer_start(&s->stop_timer, pd__stop_timer_cb, PD_SERVER_CANCEL_WAIT_MS, 0);
        break;
    case PD__CANCELLING:
        pd_log_warn("%" PRIu64 " cancelled jobs did not come back in time", s->dispatch.in_flight);
        pd__flush_begin(s);
        break;
    case PD__FLUSHING:
        pd_log_warn("cutting %zu connections that did not take their replies", s->table.n_conns);
        for (pd__conn *c = s->table.conns; c; c = c->next)
            pd__conn_close(c);
        break;
    case PD__RUNNING:
    case PD__CLOSED:
        break;
    }
}

static void pd__stop_begin(pd_server *s)
{
    if (s->phase == PD__DRAINING) {
        /* A second request: skip what is left of the grace period. */
        uv_timer_stop(&s->stop_timer);
        pd__cancel_all(s);
        uv_timer_start(&s->stop_timer, pd__stop_timer_cb, PD_SERVER_CANCEL_WAIT_MS, 0);
        return;
    }
    if (s->phase != PD__RUNNING)
        return;
    s->phase = PD__DRAINING;
    pd__reload_stop(&s->reload);
    /* A load of the config's maps (start-up or SIGHUP) stops too: the stop
     * would otherwise wait for it. */
    if (s->registry)
        pd_registry_stop_loads(s->registry);
    /* Drain then stop (docs/OPERATIONS.md) ends a drain with no SIGUSR2:
     * its count of refusals is final here (nothing new is read). */
    char drained[96] = "";
    if (s->draining)
        snprintf(drained, sizeof drained, "; %" PRIu64 " new requests were refused DRAINING while draining",
                 s->dispatch.draining_refused);
    pd_log_info("stopping: %zu connections, %" PRIu64 " jobs in flight, grace %" PRIu32 " ms%s",
                s->table.n_conns, s->dispatch.in_flight, s->conf.shutdown_grace_ms, drained);
    pd__close_handle((uv_handle_t *)&s->listener);
    for (pd__conn *c = s->table.conns; c; c = c->next)
        if (!c->lingering)
            pd__conn_read_stop(c);
    if (s->dispatch.in_flight == 0)
        pd__flush_begin(s);
    else
        uv_timer_start(&s->stop_timer, pd__stop_timer_cb, s->conf.shutdown_grace_ms, 0);
}

static void pd__async_cb(uv_async_t *a)
{
    pd_server *s = a->data;
    if (atomic_exchange(&s->reload_requested, 0))
        pd__server_reload(s);
    if (atomic_exchange(&s->stop_requested, 0))
        pd__stop_begin(s);
    pd__dispatch_completions(s);
    pd__check_drained(s);
}

static void pd__sweep_cb(uv_timer_t *t)
{
    pd_server *s = t->data;
    pd__dispatch_reserve_sweep(s);
    uint64_t now = uv_now(s->loop);
    uint32_t idle_ms = s->conf.idle_timeout_ms;
    uint32_t frame_ms = s->conf.frame_timeout_ms;
    for (pd__conn *c = s->table.conns; c; c = c->next) {
        if (c->closing)
            continue;
        if (c->lingering) {
            if (now - c->lingering_since_ms >= PD_SERVER_LINGER_MS)
                pd__conn_close(c);
        } else if (c->auth_failed_ms != 0) {
            if (now - c->auth_failed_ms >= PD_SERVER_AUTH_FAIL_DELAY_MS) {
                pd__send_error(c, c->auth_failed_id, PD_UNAUTHENTICATED, "wrong token");
                pd__conn_linger(c);
            }
        } else if (frame_ms > 0 && c->frame_started_ms != 0 && !c->paused &&
                   now - c->frame_started_ms >= frame_ms) {
            /* Input stalls only while the client is paused for not reading
             * its answers; otherwise a frame this slow is being trickled. */
            s->frame_timeouts_total++;
            pd_log_debug("conn %" PRIu64 ": frame not completed within %" PRIu32 " ms; closing", c->id, frame_ms);
            pd__send_error(c, 0, PD_MALFORMED, "frame not completed within %" PRIu32 " ms of its first byte",
                           frame_ms);
            pd__conn_linger(c);
        } else if (idle_ms > 0 && c->in_flight == 0 && !c->watches && now - c->last_active_ms >= idle_ms) {
            pd_log_debug("conn %" PRIu64 ": idle for %" PRIu32 " ms; closing", c->id, idle_ms);
            pd__conn_close(c);
        }
    }
}

/* The one place this pathd's serving state is decided, from what it is
 * doing: Ping's Pong.serving (HAProxy's health check expects SERVING, or
 * DRAINING_STATE so a drain does not cut open connections), the
 * agent-check port's word (pd_agent_check.c) and the refusal of new
 * requests while draining (pd_dispatch.c) all ask here. A stop (SIGTERM)
 * is NOT_SERVING: its listener is closed and it reads nothing new. A
 * replica (pd_replica.c) is NOT_SERVING until it has applied the change
 * log up to its head at start. */
static pd_serving pd__server_serving(pd_server *s)
{
    if (s->draining)
        return PD_SERVING_DRAINING;
    if (s->phase != PD__RUNNING || s->loading || (s->replica && !pd__replica_serving(s->replica)))
        return PD_NOT_SERVING;
    return PD_SERVING;
}

/* Starts draining (on) or goes back to ready (off). Starting tells every
 * open connection DRAINING once (id 0, final): a client opens a new
 * connection, which HAProxy gives another replica once the agent-check
 * port has said "drain", and closes this one when the answers it is owed
 * have arrived. Back to ready sends nothing: a connection that stayed is
 * served again. */
static void pd__server_drain(pd_server *s, int on)
{
    if (s->phase != PD__RUNNING)
        return;
    if (on == s->draining) {
        /* Logged so an operator (and a test) can see the signal arrived and
         * was a no-op: no second DRAINING frame, no state change. */
        pd_log_info("%s again: already %s, nothing changes", on ? "SIGUSR1" : "SIGUSR2",
                    on ? "draining" : "serving");
        return;
    }
    s->draining = on;
    if (!on) {
        pd_log_info("ready: serving new requests again (%" PRIu64 " new requests were refused DRAINING while "
                    "draining)",
                    s->dispatch.draining_refused);
        s->dispatch.draining_refused = 0;
        return;
    }
    size_t told = 0;
    for (pd__conn *c = s->table.conns; c; c = c->next) {
        if (c->closing || c->lingering)
            continue;
        pd__send_error(c, 0, PD_DRAINING, "this replica is draining: open a new connection for new requests "
                                          "(answers already owed still arrive here)");
        told++;
    }
    pd_log_info("draining: %zu connections told, %" PRIu64 " requests in flight; SIGUSR2 serves again",
                told, s->dispatch.in_flight);
}

static void pd__signal_cb(uv_signal_t *h, int signum)
{
    pd_server *s = h->data;
    if (signum == SIGHUP) {
        pd__server_reload(s);
        return;
    }
    if (signum == SIGUSR1 || signum == SIGUSR2) {
        pd__server_drain(s, signum == SIGUSR1);
        return;
    }
    pd_log_info("received %s", signum == SIGTERM ? "SIGTERM" : "SIGINT");
    pd__stop_begin(s);
}

static void pd__server_scene_caps(pd_server *s)
{
    if (!s->registry)
        return;
    const pd_registry_caps caps = {
        .max_scenes = s->conf.max_scenes,
        .max_scene_cells = s->conf.max_scene_cells,
        .max_scene_bytes = s->conf.max_scene_bytes,
    };
    pd_registry_set_caps(s->registry, &caps);
    const pd_reserve_limits rl = {
        .max_agents = s->conf.max_agents_per_scene,
        .max_entries = s->conf.max_reservation_entries,
        .max_window_ms = s->conf.max_reservation_window_ms,
        .max_agent_bytes = s->conf.max_agent_bytes,
        .max_clock_step_ms = s->conf.max_clock_step_ms,
    };
    pd_reservations_set_limits(pd_registry_reservations(s->registry), &rl, s->conf.reservation_ttl_ms,
                               s->conf.reservation_clear_holds);
}

/* ---- the one place a config is applied ---------------------------------- */

/* Swaps in the loaded scenes and the world built over them; the registry and the world store
 * own them from now on. Returns 0, or -1 when a scene the load kept was
 * dropped meanwhile (nothing was published; the load must run again). */
static int pd__publish_loaded(pd_server *s, pd__loaded *rl)
{
    int rc = s->world_store
                 ? pd_world_store_publish_reload(s->world_store, s->registry, rl->scenes, rl->world)
                 : pd_registry_publish(s->registry, rl->scenes);
    rl->scenes = NULL;
    rl->world = NULL;
    return rc;
}

/* Applies a loaded reload - the one place a config is applied: the scene
 * swap with the world built for it, the workers' contexts, and the
 * settings a reload may change. Only swaps happen here; the tables were
 * computed on the threadpool (pd_reload.c). Takes over rl->next,
 * rl->scenes and rl->world. Returns 0, or -1 when nothing was published
 * because a scene the load kept was dropped while it loaded. */
static int pd__server_apply(pd_server *s, pd__loaded *rl)
{
    pd_conf next = rl->next;
    size_t kept = 0, built = 0;
    pd_scene_set_counts(rl->scenes, &kept, &built);

    /* A world that does not fit the new scenes never gets here
     * (pd__server_loaded refuses the whole reload). The journal records the
     * scenes the publish replaced or dropped, in order with the changes
     * around it. */
    void *jr = pd_store_reload_begin(s->store, rl->scenes);
    /* A replica's tail goes back to this config at a RESET from now on. */
    void *cr = s->replica ? pd__replica_reload_begin(s->replica, rl->scenes) : NULL;
    /* Watchers hear of every watched scene whose snapshot the publish
     * replaced or dropped; one it kept makes no event. */
    pd__watch_reload *wr = pd__watch_reload_begin(s);
    int rc = pd__publish_loaded(s, rl);
    if (s->replica)
        pd__replica_reload_end(s->replica, cr, rc == 0);
    pd_store_reload_end(s->store, jr);
    pd__watch_reload_end(s, wr);
    if (rc != 0) {
        pd_conf_free(&next);
        return -1;
    }

    char addr[PD_CONF_MAX_ADDRESS];
    if (strcmp(next.listen_host, s->conf.listen_host) != 0 || next.listen_port != s->conf.listen_port)
        pd_log_warn("reload: a new listen address needs a restart; still on %s",
                    pd_conf_format_address(addr, s->conf.listen_host, s->port));
    /* The metrics HTTP server is started once, by main.c; s->conf keeps the
     * address it serves, so nothing reads one it does not. */
    if (next.metrics_enabled != s->conf.metrics_enabled ||
        (next.metrics_enabled && (strcmp(next.metrics_host, s->conf.metrics_host) != 0 ||
                                  next.metrics_port != s->conf.metrics_port))) {
        if (s->conf.metrics_enabled)
            pd_log_warn("reload: a new metrics_listen address needs a restart; still on %s",
                        pd_conf_format_address(addr, s->conf.metrics_host, s->metrics_port));
        else
            pd_log_warn("reload: a new metrics_listen address needs a restart; metrics stay off");
    }
    if (next.threads != s->conf.threads || next.job_queue_capacity != s->conf.job_queue_capacity)
        pd_log_warn("reload: thread count and job queue capacity need a restart; unchanged");
    if (strcmp(next.data_dir, s->conf.data_dir) != 0 || next.journal_fsync != s->conf.journal_fsync ||
        next.journal_compact_bytes != s->conf.journal_compact_bytes)
        pd_log_warn("reload: data_dir and the journal's settings need a restart; unchanged");
    if (next.agent_enabled != s->conf.agent_enabled || strcmp(next.agent_host, s->conf.agent_host) != 0 ||
        next.agent_port != s->conf.agent_port)
        pd_log_warn("reload: a new agent_check address needs a restart; unchanged");
    next.agent_enabled = s->conf.agent_enabled;
    memcpy(next.agent_host, s->conf.agent_host, sizeof next.agent_host);
    next.agent_port = s->conf.agent_port;
    if (strcmp(next.log.redis_host, s->conf.log.redis_host) != 0 || next.log.redis_port != s->conf.log.redis_port ||
        next.log.timeout_ms != s->conf.log.timeout_ms || strcmp(next.log.prefix, s->conf.log.prefix) != 0 ||
        next.log.dedup_ttl_s != s->conf.log.dedup_ttl_s || next.log.snapshot_every != s->conf.log.snapshot_every ||
        next.log.snapshot_keep != s->conf.log.snapshot_keep ||
        next.log.snapshot_max_bytes != s->conf.log.snapshot_max_bytes)
        pd_log_warn("reload: the change log's settings (\"log\") need a restart; unchanged");
    next.log = s->conf.log;
    memcpy(next.data_dir, s->conf.data_dir, sizeof next.data_dir);
    next.journal_fsync = s->conf.journal_fsync;
    next.journal_compact_bytes = s->conf.journal_compact_bytes;
    memcpy(next.listen_host, s->conf.listen_host, sizeof next.listen_host);
    next.listen_port = s->conf.listen_port;
    next.metrics_enabled = s->conf.metrics_enabled;
    memcpy(next.metrics_host, s->conf.metrics_host, sizeof next.metrics_host);
    next.metrics_port = s->conf.metrics_port;
    next.threads = s->conf.threads;
    next.job_queue_capacity = s->conf.job_queue_capacity;

    size_t n_scenes = next.n_scenes;
    pd_conf scenes_only = {0};
    scenes_only.scenes = next.scenes;
    scenes_only.n_scenes = next.n_scenes;
    scenes_only.world = next.world;   /* the world store keeps its own copy */
    next.scenes = NULL;
    next.n_scenes = 0;
    memset(&next.world, 0, sizeof next.world);
    /* Open connections hold the rights their tokens gave: the new tokens
     * decide them from now on. */
    pd__auth_recheck(s, &next);
    s->conf = next;
    /* The frame cap is the one limit a connection keeps a copy of (its
     * reader's); open connections take the new one too, as GetLimits on
     * them reports it. A frame already partly read is checked against it
     * when its header is looked at next. */
    for (pd__conn *c = s->table.conns; c; c = c->next)
        c->reader.max_frame = s->conf.max_frame_bytes;
    pd__fit_fd_limit(&s->conf);
    pd__server_scene_caps(s);
    pd_metrics_set_scene_series(s->metrics, s->conf.metrics_scene_series);
    atomic_store(&s->dispatch.worker_retained_bytes, s->conf.worker_retained_bytes);
    pd__dispatch_apply_conf(s);
    /* A raced append's retries follow the reloaded limits too (the store
     * reads them atomically at each race). */
    if (s->replica)
        pd_store_set_race_retry(s->store, s->conf.max_append_attempts, s->conf.max_behind_wait_ms);
    pd_conf_free(&scenes_only);

    pd_log_set_level(s->conf.log_level);
    uint64_t interval = pd__sweep_interval(&s->conf);
    if (interval != s->sweep_interval_ms && uv_is_active((uv_handle_t *)&s->sweep_timer)) {
        s->sweep_interval_ms = interval;
        uv_timer_set_repeat(&s->sweep_timer, interval);
    }
    pd__journal_after_reload(s, built);
    pd_metrics_set_reload_scenes(s->metrics, kept, built);
    pd_log_info("reloaded %s: %zu scenes, %zu kept with their updates, %zu built anew", s->config_path,
                n_scenes, kept, built);
    return 0;
}

/* Seconds since the epoch, for the time of the last reload on /metrics. */
static double pd__wall_seconds(void)
{
    uv_timeval64_t tv;
    if (uv_gettimeofday(&tv) != 0)
        return 0;
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

/* The start-up load is back: unlike a reload there is nothing to fall back
 * on, so a world that does not fit the scenes refuses the whole load. */
static void pd__initial_done(pd_server *s, pd__loaded *rl)
{
    pd__initial_load *out = s->initial;
    out->done = 1;
    s->loading = 0;
    if (s->phase != PD__RUNNING) {
        /* Stopped: the stop ended the load (pd_registry_stop_loads), or
         * came after it. */
        out->result = 1;
    } else if (!rl->scenes) {
        snprintf(out->err, out->errlen, "%s", rl->err);
        out->result = -1;
    } else if (rl->build_world && !rl->world) {
        snprintf(out->err, out->errlen, "portals and routes: %s", rl->world_err);
        out->result = -1;
    } else {
        /* The registry was empty, so the set keeps nothing and publishes. */
        out->result = pd__publish_loaded(s, rl);
    }
    pd_world_release(rl->world);
    pd_registry_discard(rl->scenes);
}

/* The reload's done callback, on the loop thread once a load is done:
 * publish it, or log why it was refused and keep serving the running set.
 * A stop that began meanwhile wins: the loaded set and its world are
 * dropped unpublished. Returns 1 to load again (pd_reload.c runs it). */
static int pd__server_loaded(void *user, pd__loaded *rl)
{
    pd_server *s = user;
    int again = 0;
    if (rl->initial) {
        pd__initial_done(s, rl);
    } else if (!rl->conf_loaded) {
        pd_log_error("reload refused: %s; the running configuration stays", rl->err);
        pd_metrics_observe_reload(s->metrics, PD_METRICS_RELOAD_FAILURE, pd__wall_seconds());
    } else if (s->phase != PD__RUNNING) {
        pd_log_warn("reload of %s dropped: the server is stopping", s->config_path);
        pd_world_release(rl->world);
        pd_registry_discard(rl->scenes);
        pd_conf_free(&rl->next);
    } else if (!rl->scenes) {
        pd_log_error("reload refused: %s; the running scenes stay", rl->err);
        pd_metrics_observe_reload(s->metrics, PD_METRICS_RELOAD_FAILURE, pd__wall_seconds());
        pd_conf_free(&rl->next);
    } else if (rl->build_world && !rl->world && s->world_store) {
        /* One transaction: scenes, portals and routes change together or
         * not at all, so portals that do not fit refuse the whole reload. */
        pd_log_error("reload refused: portals and routes of %s: %s; the running scenes, portals and routes stay",
                     s->config_path, rl->world_err);
        pd_metrics_observe_reload(s->metrics, PD_METRICS_RELOAD_FAILURE, pd__wall_seconds());
        pd_registry_discard(rl->scenes);
        pd_conf_free(&rl->next);
    } else if (pd__server_apply(s, rl) != 0) {
        /* Rare: a DropScene of a config scene the load kept landed while it
         * loaded. The file is read again against what is served now. */
        pd_log_info("reload of %s: a scene it kept was dropped while it loaded; loading again",
                    s->config_path);
        again = 1;
    } else {
        pd_metrics_observe_reload(s->metrics, PD_METRICS_RELOAD_SUCCESS, pd__wall_seconds());
    }
    return again;
}

/* ---- the connections' and the dispatcher's hooks ------------------------ */

/* The reload's way in: SIGHUP, the Reload request, pd_server_request_reload. */
static void pd__server_reload(pd_server *s)
{
    pd__reload_request(&s->reload);
}

/* A connection is gone: its watches end, and a stop that waited for the
 * last connection finishes. */
static void pd__server_conn_closed(pd__conn *c)
{
    pd_server *s = c->server;
    pd__watch_conn_closed(c);
    if (s->phase == PD__FLUSHING && s->table.n_conns == 0)
        pd__check_drained(s);
}

static const pd__conn_hooks pd__conn_hooks_of_server = {
    .on_frame = pd__dispatch_frame,
    .on_linger = pd__watch_conn_closed,
    .on_close = pd__server_conn_closed,
};

static const pd__dispatch_up pd__dispatch_up_of_server = {
    .reload = pd__server_reload,
    .stats = pd_server_get_stats,
    .serving = pd__server_serving,
};
pd_server *pd_server_create(uv_loop_t *loop, const pd_conf *conf, pd_registry *registry,
                            const pd_server_config_source *source)
{
    pd_server *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->wake_fd = -1;
    s->loop_fd = uv_backend_fd(loop);
    atomic_init(&s->loop_asleep, 1);
    atomic_init(&s->wake_sent, 0);
    s->loop = loop;
    s->conf = *conf;
    s->conf.scenes = NULL;
    s->conf.n_scenes = 0;
    /* The caller's config owns the portals; the world store holds what
     * routes need, so the server keeps no pointer into them. */
    memset(&s->conf.world, 0, sizeof s->conf.world);
    s->registry = registry;
    if (!(s->store = pd_store_create(registry, NULL))) {
        free(s);
        return NULL;
    }
    pd__server_scene_caps(s);
    s->table.next_conn_id = 1;
    s->dispatch.answering = -1;
    atomic_init(&s->dispatch.worker_retained_bytes, conf->worker_retained_bytes);
    s->started_ns = uv_hrtime();
    s->sweep_interval_ms = pd__sweep_interval(&s->conf);
    atomic_init(&s->stop_requested, 0);
    atomic_init(&s->reload_requested, 0);
    s->table.hooks = pd__conn_hooks_of_server;
    s->dispatch.up = pd__dispatch_up_of_server;
    s->agent.serving = pd__server_serving;
    s->reload.loop = loop;
    s->reload.registry = registry;
    s->reload.done = pd__server_loaded;
    s->reload.done_user = s;
    if (source) {
        s->reload.adjust = source->adjust;
        s->reload.adjust_user = source->adjust_user;
        if (source->path && !(s->config_path = strdup(source->path)))
            goto fail;
        s->reload.config_path = s->config_path;
    }

    if (uv_async_init(loop, &s->async, pd__async_cb) != 0)
        goto fail;
    s->async.data = s;
    s->open_handles++;
    if ((s->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0 || uv_poll_init(loop, &s->wake_poll, s->wake_fd) != 0)
        goto fail;
    s->wake_poll.data = s;
    s->open_handles++;
    if (uv_poll_start(&s->wake_poll, UV_READABLE, pd__wake_cb) != 0)
        goto fail;
    if (uv_timer_init(loop, &s->sweep_timer) != 0)
        goto fail;
    s->sweep_timer.data = s;
    s->open_handles++;
    if (uv_timer_init(loop, &s->stop_timer) != 0)
        goto fail;
    s->stop_timer.data = s;
    s->open_handles++;
    if (uv_timer_init(loop, &s->table.full_timer) != 0)
        goto fail;
    s->table.full_timer.data = s;
    s->open_handles++;
    if (uv_timer_init(loop, &s->table.hold_timer) != 0)
        goto fail;
    s->table.hold_timer.data = s;
    s->open_handles++;
    if (uv_prepare_init(loop, &s->flush_prepare) != 0)
        goto fail;
    s->flush_prepare.data = s;
    s->open_handles++;
    if (uv_check_init(loop, &s->flush_check) != 0)
        goto fail;
    s->flush_check.data = s;
    s->open_handles++;
    uv_prepare_start(&s->flush_prepare, pd__flush_prepare_cb);
    uv_check_start(&s->flush_check, pd__flush_check_cb);
    uv_unref((uv_handle_t *)&s->flush_prepare);
    uv_unref((uv_handle_t *)&s->flush_check);
    if (pd__map_grow(&s->table.map) != 0)
        goto fail;
    return s;

fail:
    pd_server_destroy(s);
    return NULL;
}

/* The workers' yield check (pd_pool_set_yield_check): their yields are
 * for the loop thread, which under CFS would otherwise wait for a worker's
 * whole time slice once it is woken. A loop asleep in epoll_wait with no
 * event ready needs no core, and a yield then only costs a context switch
 * to whatever else is runnable (under a pipelined load, most of them were
 * such: issue 30, item 6). An awake loop may be waiting for a core, and
 * so may a sleeping one with events ready: epoll is woken by them, and its
 * fd polls readable from then until the loop has handled them. */
static int pd__loop_may_wait(void *server)
{
    pd_server *s = server;
    if (!atomic_load(&s->loop_asleep))
        return 1;
    struct pollfd pfd = {s->loop_fd, POLLIN, 0};
    return poll(&pfd, 1, 0) != 0;
}

pd_pool *pd_server_pool_create(pd_server *s, uint32_t threads)
{
    pd_pool *pool = pd__dispatch_pool_create(s, threads, pd_server_wake, s);
    pd_pool_set_yield_check(pool, pd__loop_may_wait, s);
    return pool;
}

void pd_server_pool_destroy(pd_pool *pool)
{
    pd__dispatch_pool_destroy(pool);
}

int pd_server_open_journal(pd_server *s, char *err, size_t errlen)
{
    return pd__journal_open(s, err, errlen);
}

int pd_server_journal_state(pd_server *s, uint64_t *log_bytes, uint64_t *snapshot_bytes, int *failed)
{
    return pd__journal_sizes(s, log_bytes, snapshot_bytes, failed);
}

int pd_server_load(pd_server *s, pd_pool *pool, const pd_conf *conf, char *err, size_t errlen)
{
    pd__initial_load out = {0, -1, err, errlen};
    if (pd__reload_initial(&s->reload, conf, err, errlen) != 0)
        return -1;
    s->pool = pool;
    s->initial = &out;
    s->loading = 1;
    pd_log_info("loading %zu scenes", conf->n_scenes);
    /* The pending work request keeps the loop running until its after-work
     * callback has set out.done, whatever else (a stop) happens meanwhile. */
    while (!out.done)
        uv_run(s->loop, UV_RUN_ONCE);
    s->initial = NULL;
    return out.result;
}

/* Makes max_connections fit the open-file limit: raises the soft limit
 * toward the hard one if that is what it takes, else lowers the cap and
 * says so (see PD_SERVER_FD_RESERVE). */
static void pd__fit_fd_limit(pd_conf *conf)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    rlim_t need = (rlim_t)conf->max_connections + PD_SERVER_FD_RESERVE;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
        struct rlimit raised = rl;
        raised.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need ? need : rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &raised) == 0)
            rl = raised;
    }
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
        return;
    uint32_t fit = rl.rlim_cur > PD_SERVER_FD_RESERVE + 1 ? (uint32_t)(rl.rlim_cur - PD_SERVER_FD_RESERVE) : 1;
    pd_log_warn("the open-file limit (%llu) cannot hold %" PRIu32 " connections and %d spare descriptors: "
                "max_connections lowered to %" PRIu32 " (raise it with ulimit -n or LimitNOFILE)",
                (unsigned long long)rl.rlim_cur, conf->max_connections, PD_SERVER_FD_RESERVE, fit);
    conf->max_connections = fit;
}

int pd_server_start(pd_server *s, pd_pool *pool, char *err, size_t errlen)
{
    pd__fit_fd_limit(&s->conf);
    struct sockaddr_storage addr;
    char where[PD_WHERE_MAX];
    int rc;

    s->pool = pool;
    pd__format_address(s, s->conf.listen_port, where, sizeof where);
    if (strchr(s->conf.listen_host, ':'))
        rc = uv_ip6_addr(s->conf.listen_host, s->conf.listen_port, (struct sockaddr_in6 *)&addr);
    else
        rc = uv_ip4_addr(s->conf.listen_host, s->conf.listen_port, (struct sockaddr_in *)&addr);
    if (rc != 0) {
        snprintf(err, errlen, "listen address %s: %s", where, uv_strerror(rc));
        return -1;
    }
    if ((rc = uv_tcp_init(s->loop, &s->listener)) != 0) {
        snprintf(err, errlen, "listen on %s: %s", where, uv_strerror(rc));
        return -1;
    }
    s->listener.data = s;
    s->open_handles++;
    if ((rc = uv_tcp_bind(&s->listener, (const struct sockaddr *)&addr, 0)) != 0 ||
        (rc = uv_listen((uv_stream_t *)&s->listener, PD_SERVER_LISTEN_BACKLOG, pd__on_connection)) != 0) {
        snprintf(err, errlen, "listen on %s: %s", where, uv_strerror(rc));
        pd__close_handle((uv_handle_t *)&s->listener);
        return -1;
    }

    struct sockaddr_storage bound;
    int bound_len = (int)sizeof bound;
    if ((rc = uv_tcp_getsockname(&s->listener, (struct sockaddr *)&bound, &bound_len)) != 0) {
        snprintf(err, errlen, "listen on %s: %s", where, uv_strerror(rc));
        pd__close_handle((uv_handle_t *)&s->listener);
        return -1;
    }
    if (bound.ss_family == AF_INET6)
        s->port = ntohs(((struct sockaddr_in6 *)&bound)->sin6_port);
    else
        s->port = ntohs(((struct sockaddr_in *)&bound)->sin_port);

    if (s->conf.agent_enabled && pd__agent_start(s, s->conf.agent_host, s->conf.agent_port, err, errlen) != 0) {
        pd__close_handle((uv_handle_t *)&s->listener);
        return -1;
    }
    uv_timer_start(&s->sweep_timer, pd__sweep_cb, s->sweep_interval_ms, s->sweep_interval_ms);
    pd__format_address(s, s->port, where, sizeof where);
    pd_log_info("listening on %s", where);
    return 0;
}

uint16_t pd_server_port(const pd_server *s)
{
    return s->port;
}

void pd_server_set_metrics_port(pd_server *s, uint16_t port)
{
    s->metrics_port = port;
}

int pd_server_watch_signals(pd_server *s)
{
    struct {
        uv_signal_t *h;
        int signum;
    } sigs[] = {{&s->sig_term, SIGTERM}, {&s->sig_int, SIGINT}, {&s->sig_hup, SIGHUP},
                {&s->sig_usr1, SIGUSR1}, {&s->sig_usr2, SIGUSR2}};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        if (uv_signal_init(s->loop, sigs[i].h) != 0)
            return -1;
        sigs[i].h->data = s;
        s->open_handles++;
        if (uv_signal_start(sigs[i].h, pd__signal_cb, sigs[i].signum) != 0)
            return -1;
    }
    return 0;
}

void pd_server_request_stop(pd_server *s)
{
    atomic_store(&s->stop_requested, 1);
    uv_async_send(&s->async);
}

void pd_server_request_reload(pd_server *s)
{
    atomic_store(&s->reload_requested, 1);
    uv_async_send(&s->async);
}

void pd_server_set_world_store(pd_server *s, pd_world_store *store)
{
    s->world_store = store;
    s->reload.world_store = store;
    pd_store_set_world(s->store, store);
}

void pd_server_set_metrics(pd_server *s, pd_metrics *m)
{
    s->metrics = m;
    pd_metrics_set_scene_series(m, s->conf.metrics_scene_series);
}

void pd_server_get_stats(pd_server *s, pd_server_stats *out)
{
    pd_pool_stats ps;
    memset(&ps, 0, sizeof ps);
    if (s->pool)
        pd_pool_get_stats(s->pool, &ps);
    size_t n_scenes = pd_registry_count(s->registry);

    memset(out, 0, sizeof *out);
    out->uptime_ms = (uv_hrtime() - s->started_ns) / 1000000u;
    out->connections = s->table.n_conns;
    out->requests_total = s->dispatch.requests_total;
    out->paths_found = s->dispatch.paths_found;
    out->expansions_total = s->dispatch.expansions_total;
    out->queue_depth = ps.queue_depth;
    out->in_flight = s->dispatch.in_flight;
    out->threads = ps.threads;
    out->scenes = (uint32_t)n_scenes;
    out->overloaded_total = s->dispatch.overloaded_total;
    out->malformed_total = s->dispatch.malformed_total;
    out->buffered_bytes = s->table.buffered_bytes;
    out->buffer_budget_bytes = s->conf.buffer_budget_bytes;
    out->connections_shed_total = s->table.shed_total;
    out->frame_timeouts_total = s->frame_timeouts_total;
    out->accept_errors_total = s->table.accept_errors_total;
    out->watchers = pd__watch_count(s);
    out->watch_events_total = s->watch.events_total;
    out->watchers_dropped_total = s->watch.dropped_total;
}

char *pd_server_replica_metrics(pd_server *s)
{
    return s->replica ? pd__replica_metrics(s->replica) : NULL;
}

int pd_server_ready(void *server, char *reason, size_t cap)
{
    pd_server *s = server;
    pd_pool_stats ps;
    pd_pool_get_stats(s->pool, &ps);
    size_t n_scenes = pd_registry_count(s->registry);
    if (s->loading)
        snprintf(reason, cap, "loading scenes");
    else if (s->phase != PD__RUNNING)
        snprintf(reason, cap, "draining: stopping, %" PRIu64 " requests in flight, %zu connections",
                 s->dispatch.in_flight, s->table.n_conns);
    else if (s->draining)
        snprintf(reason, cap, "draining (SIGUSR1): %" PRIu64 " requests in flight, %zu connections; "
                 "SIGUSR2 serves again", s->dispatch.in_flight, s->table.n_conns);
    else if (n_scenes == 0)
        snprintf(reason, cap, "no scenes loaded");
    else if (s->port == 0)
        snprintf(reason, cap, "not listening yet");
    else if (!s->pool || ps.threads_ready < ps.threads || ps.threads == 0)
        snprintf(reason, cap, "%" PRIu32 " of %" PRIu32 " worker threads ready", ps.threads_ready, ps.threads);
    else
        return 1;
    return 0;
}

void pd_server_destroy(pd_server *s)
{
    if (!s)
        return;
    /* The pool is gone by now (or never existed): nothing may call into it. */
    s->pool = NULL;
    for (pd__conn *c = s->table.conns; c; c = c->next)
        pd__conn_close(c);
    pd__close_handle((uv_handle_t *)&s->listener);
    pd__close_handle((uv_handle_t *)&s->sweep_timer);
    pd__close_handle((uv_handle_t *)&s->table.full_timer);
    pd__close_handle((uv_handle_t *)&s->table.hold_timer);
    pd__close_handle((uv_handle_t *)&s->stop_timer);
    pd__close_handle((uv_handle_t *)&s->journal.timer);
    pd__close_handle((uv_handle_t *)&s->sig_term);
    pd__close_handle((uv_handle_t *)&s->sig_int);
    pd__close_handle((uv_handle_t *)&s->sig_hup);
    pd__close_handle((uv_handle_t *)&s->sig_usr1);
    pd__close_handle((uv_handle_t *)&s->sig_usr2);
    pd__agent_close(s);
    pd__close_handle((uv_handle_t *)&s->async);
    pd__close_handle((uv_handle_t *)&s->wake_poll);
    pd__replica_close(s->replica); /* freed once its handles closed */
    s->replica = NULL;
    pd__close_handle((uv_handle_t *)&s->flush_prepare);
    pd__close_handle((uv_handle_t *)&s->flush_check);
    /* Close callbacks run on the next loop iteration; the phase must not
     * start a flush from pd__conn_closed meanwhile. */
    s->phase = PD__CLOSED;
    pd__reload_stop(&s->reload);
    /* A reload still loading must call back before the server is freed (it
     * frees its own memory there, dropping what it loaded); waiting for it
     * blocks in the loop instead of spinning. */
    while (s->open_handles > 0 || s->agent.open > 0 || s->table.conns || s->reload.job || s->journal.jobs > 0)
        uv_run(s->loop, s->reload.job || s->journal.jobs > 0 ? UV_RUN_ONCE : UV_RUN_NOWAIT);
    /* The workers are gone and so is the journal's threadpool work: the
     * last appends are in, and closing syncs them. */
    pd_store_destroy(s->store);
    if (s->wake_fd >= 0)
        close(s->wake_fd); /* its poll handle closed above */
    pd__dispatch_free_inline(s);
    pd__watch_hub_free(s);
    free(s->table.map.slots);
    free(s->config_path);
    free(s);
}

