/*
 * pd_server.c - the libuv front end (see pd_server.h): the server's own
 * handles, start, graceful stop and the public API. Connections live in
 * pd_conn.c (and the id map in pd_connmap.c), requests and completions in
 * pd_dispatch.c, reload in pd_reload.c; pd_server_internal.h is what they
 * share.
 *
 * Everything here runs on the loop thread except pd_server_wake and the two
 * request_* functions, which only set atomic flags and call uv_async_send.
 *
 * Shutdown runs through phases: DRAINING (nothing new is read; in-flight jobs
 * get shutdown_grace_ms), CANCELLING (the rest are cancelled and get
 * PD_SERVER_CANCEL_WAIT_MS to come back), FLUSHING (every connection is shut
 * down once its replies are written, cut after PD_SERVER_FLUSH_MS), CLOSED
 * (the server's own handles close and uv_run returns).
 */
#include "pd_server_internal.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_log.h"

static void pd__stop_timer_cb(uv_timer_t *t);

static void pd__flush_prepare_cb(uv_prepare_t *h)
{
    pd__flush_all(h->data);
}

static void pd__flush_check_cb(uv_check_t *h)
{
    pd__flush_all(h->data);
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
uint64_t pd__sweep_interval(const pd_conf *conf)
{
    uint64_t ms = conf->idle_timeout_ms / 4;
    if (conf->idle_timeout_ms == 0 || ms > PD_SERVER_SWEEP_MAX_MS)
        ms = PD_SERVER_SWEEP_MAX_MS;
    if (ms < PD_SERVER_SWEEP_MIN_MS)
        ms = PD_SERVER_SWEEP_MIN_MS;
    return ms;
}


/* Last step of a stop: close the server's own handles. The async handle
 * stays open (workers may still wake it until the pool is destroyed) but no
 * longer keeps uv_run going. */
static void pd__stop_finish(pd_server *s)
{
    s->phase = PD__CLOSED;
    pd__close_handle((uv_handle_t *)&s->listener);
    pd__close_handle((uv_handle_t *)&s->sweep_timer);
    pd__close_handle((uv_handle_t *)&s->full_timer);
    pd__close_handle((uv_handle_t *)&s->stop_timer);
    pd__close_handle((uv_handle_t *)&s->journal_timer);
    pd__close_handle((uv_handle_t *)&s->sig_term);
    pd__close_handle((uv_handle_t *)&s->sig_int);
    pd__close_handle((uv_handle_t *)&s->sig_hup);
    uv_unref((uv_handle_t *)&s->async);
    pd_log_info("stopped");
}

static void pd__flush_begin(pd_server *s)
{
    s->phase = PD__FLUSHING;
    /* Answers still waiting for the iteration's flush count as queued. */
    pd__flush_all(s);
    for (pd__conn *c = s->conns; c; c = c->next) {
        if (c->closing)
            continue;
        if (c->writes_pending == 0 || c->shutdown_done)
            pd__conn_close(c);
        else
            pd__conn_shutdown(c);
    }
    if (s->n_conns == 0)
        pd__stop_finish(s);
    else
        uv_timer_start(&s->stop_timer, pd__stop_timer_cb, PD_SERVER_FLUSH_MS, 0);
}

static void pd__cancel_all(pd_server *s)
{
    pd_log_warn("grace period over: cancelling %" PRIu64 " jobs in flight", s->in_flight);
    s->phase = PD__CANCELLING;
    for (pd__conn *c = s->conns; c; c = c->next)
        if (c->in_flight > 0)
            pd_pool_cancel_owner(s->pool, c->id);
}

void pd__check_drained(pd_server *s)
{
    switch (s->phase) {
    case PD__DRAINING:
    case PD__CANCELLING:
        if (s->in_flight == 0) {
            uv_timer_stop(&s->stop_timer);
            pd__flush_begin(s);
        }
        break;
    case PD__FLUSHING:
        if (s->n_conns == 0) {
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
        pd_log_warn("%" PRIu64 " cancelled jobs did not come back in time", s->in_flight);
        pd__flush_begin(s);
        break;
    case PD__FLUSHING:
        pd_log_warn("cutting %zu connections that did not take their replies", s->n_conns);
        for (pd__conn *c = s->conns; c; c = c->next)
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
    /* A load of the config's maps (start-up or SIGHUP) stops too: the stop
     * would otherwise wait for it. */
    if (s->registry)
        pd_registry_stop_loads(s->registry);
    pd_log_info("stopping: %zu connections, %" PRIu64 " jobs in flight, grace %" PRIu32 " ms",
                s->n_conns, s->in_flight, s->conf.shutdown_grace_ms);
    pd__close_handle((uv_handle_t *)&s->listener);
    for (pd__conn *c = s->conns; c; c = c->next)
        if (!c->lingering)
            pd__conn_read_stop(c);
    if (s->in_flight == 0)
        pd__flush_begin(s);
    else
        uv_timer_start(&s->stop_timer, pd__stop_timer_cb, s->conf.shutdown_grace_ms, 0);
}

static void pd__async_cb(uv_async_t *a)
{
    pd_server *s = a->data;
    if (atomic_exchange(&s->reload_requested, 0))
        pd__reload(s);
    if (atomic_exchange(&s->stop_requested, 0))
        pd__stop_begin(s);
    pd__dispatch_completions(s);
    pd__check_drained(s);
}

static void pd__sweep_cb(uv_timer_t *t)
{
    pd_server *s = t->data;
    uint64_t now = uv_now(s->loop);
    uint32_t idle_ms = s->conf.idle_timeout_ms;
    uint32_t frame_ms = s->conf.frame_timeout_ms;
    for (pd__conn *c = s->conns; c; c = c->next) {
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

static void pd__signal_cb(uv_signal_t *h, int signum)
{
    pd_server *s = h->data;
    if (signum == SIGHUP) {
        pd__reload(s);
        return;
    }
    pd_log_info("received %s", signum == SIGTERM ? "SIGTERM" : "SIGINT");
    pd__stop_begin(s);
}

void pd__server_scene_caps(pd_server *s)
{
    if (!s->registry)
        return;
    const pd_registry_caps caps = {
        .max_scenes = s->conf.max_scenes,
        .max_scene_cells = s->conf.max_scene_cells,
        .max_scene_bytes = s->conf.max_scene_bytes,
    };
    pd_registry_set_caps(s->registry, &caps);
}

pd_server *pd_server_create(uv_loop_t *loop, const pd_conf *conf, pd_registry *registry,
                            const pd_server_config_source *source)
{
    pd_server *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
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
    s->next_conn_id = 1;
    s->answering = -1;
    atomic_init(&s->worker_retained_bytes, conf->worker_retained_bytes);
    s->started_ns = uv_hrtime();
    s->sweep_interval_ms = pd__sweep_interval(&s->conf);
    atomic_init(&s->stop_requested, 0);
    atomic_init(&s->reload_requested, 0);
    if (source) {
        s->adjust = source->adjust;
        s->adjust_user = source->adjust_user;
        if (source->path && !(s->config_path = strdup(source->path)))
            goto fail;
    }

    if (uv_async_init(loop, &s->async, pd__async_cb) != 0)
        goto fail;
    s->async.data = s;
    s->open_handles++;
    if (uv_timer_init(loop, &s->sweep_timer) != 0)
        goto fail;
    s->sweep_timer.data = s;
    s->open_handles++;
    if (uv_timer_init(loop, &s->stop_timer) != 0)
        goto fail;
    s->stop_timer.data = s;
    s->open_handles++;
    if (uv_timer_init(loop, &s->full_timer) != 0)
        goto fail;
    s->full_timer.data = s;
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
    if (pd__map_grow(&s->map) != 0)
        goto fail;
    return s;

fail:
    pd_server_destroy(s);
    return NULL;
}

void pd_server_wake(void *server)
{
    pd_server *s = server;
    uv_async_send(&s->async);
}

/* Makes max_connections fit the open-file limit: raises the soft limit
 * toward the hard one if that is what it takes, else lowers the cap and
 * says so (see PD_SERVER_FD_RESERVE). */
void pd__fit_fd_limit(pd_conf *conf)
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
    char where[96];
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
    } sigs[] = {{&s->sig_term, SIGTERM}, {&s->sig_int, SIGINT}, {&s->sig_hup, SIGHUP}};
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
    out->connections = s->n_conns;
    out->requests_total = s->requests_total;
    out->paths_found = s->paths_found;
    out->expansions_total = s->expansions_total;
    out->queue_depth = ps.queue_depth;
    out->in_flight = s->in_flight;
    out->threads = ps.threads;
    out->scenes = (uint32_t)n_scenes;
    out->overloaded_total = s->overloaded_total;
    out->malformed_total = s->malformed_total;
    out->buffered_bytes = s->buffered_bytes;
    out->buffer_budget_bytes = s->conf.buffer_budget_bytes;
    out->connections_shed_total = s->shed_total;
    out->frame_timeouts_total = s->frame_timeouts_total;
    out->accept_errors_total = s->accept_errors_total;
    out->watchers = pd__watch_count(s);
    out->watch_events_total = s->watch_events_total;
    out->watchers_dropped_total = s->watchers_dropped_total;
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
                 s->in_flight, s->n_conns);
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
    for (pd__conn *c = s->conns; c; c = c->next)
        pd__conn_close(c);
    pd__close_handle((uv_handle_t *)&s->listener);
    pd__close_handle((uv_handle_t *)&s->sweep_timer);
    pd__close_handle((uv_handle_t *)&s->full_timer);
    pd__close_handle((uv_handle_t *)&s->stop_timer);
    pd__close_handle((uv_handle_t *)&s->journal_timer);
    pd__close_handle((uv_handle_t *)&s->sig_term);
    pd__close_handle((uv_handle_t *)&s->sig_int);
    pd__close_handle((uv_handle_t *)&s->sig_hup);
    pd__close_handle((uv_handle_t *)&s->async);
    pd__close_handle((uv_handle_t *)&s->flush_prepare);
    pd__close_handle((uv_handle_t *)&s->flush_check);
    /* Close callbacks run on the next loop iteration; the phase must not
     * start a flush from pd__conn_closed meanwhile. */
    s->phase = PD__CLOSED;
    /* A reload still loading must call back before the server is freed (it
     * frees its own memory there, dropping what it loaded); waiting for it
     * blocks in the loop instead of spinning. */
    while (s->open_handles > 0 || s->conns || s->reload || s->journal_jobs > 0)
        uv_run(s->loop, s->reload || s->journal_jobs > 0 ? UV_RUN_ONCE : UV_RUN_NOWAIT);
    /* The workers are gone and so is the journal's threadpool work: the
     * last appends are in, and closing syncs them. */
    pd_journal_close(s->journal);
    pd_store_destroy(s->store);
    pd__dispatch_free_inline(s);
    pd__watch_hub_free(s);
    free(s->map.slots);
    free(s->config_path);
    free(s);
}

