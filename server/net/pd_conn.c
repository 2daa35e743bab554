/*
 * pd_conn.c - one client connection: accepting it, reading frames, queueing
 * answers with backpressure, and closing it (lingering after a protocol
 * error). Runs on the loop thread.
 *
 * It is a transport: it knows frames, not requests. What happens above it
 * it reaches only through the hooks the server set in its table
 * (pd__conn_hooks, pd_conn.h): a whole frame goes to on_frame, a
 * connection that starts lingering to on_linger, one that is gone to
 * on_close. It calls no function of pd_dispatch.c, pd_watchers.c or
 * pd_server.c.
 *
 * A connection lives in two places: a list (for the idle sweep and shutdown,
 * which visit every connection) and the connection map (for completions,
 * which arrive carrying only the id). It leaves the map as soon as it starts
 * closing, so late results for it are dropped, and leaves the list and is
 * freed only in its uv_close callback, after libuv has called back every
 * pending write and shutdown request on it.
 *
 * Closing after a protocol error (MALFORMED, FRAME_TOO_LARGE, too many
 * connections) is a "lingering close": the error reply is queued, the write
 * side is shut down once it has gone out, and whatever the peer still sends
 * is read and thrown away until it closes or PD_SERVER_LINGER_MS pass.
 * Closing a socket with unread input would make the kernel send a reset,
 * which can destroy the error reply before the client reads it.
 */
#include "pd_conn.h"

#include "pd_server_internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include "pd_log.h"

static void pd__read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);
static void pd__conn_process(pd__conn *c);
static void pd__conn_full(pd__conn *c);
static void pd__conn_unlink_full(pd__conn *c);

static void pd__alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    pd__conn *c = h->data;
    uint8_t *p;
    size_t avail;
    if (c->lingering) {
        *buf = uv_buf_init((char *)c->server->table.discard, sizeof c->server->table.discard);
        return;
    }
    /* Nothing buffered: read into the shared buffer; the read callback
     * settles the reader before anything else can read. */
    if (pd_frame_reader_lend(&c->reader, c->server->table.shared_read, sizeof c->server->table.shared_read) == 0) {
        *buf = uv_buf_init((char *)c->server->table.shared_read, sizeof c->server->table.shared_read);
        return;
    }
    if (pd_frame_reader_space(&c->reader, suggested, &p, &avail) != 0) {
        /* A zero-length buffer makes libuv report UV_ENOBUFS to read_cb. */
        *buf = uv_buf_init(NULL, 0);
        return;
    }
    *buf = uv_buf_init((char *)p, (unsigned int)avail);
}

static void pd__conn_read_start(pd__conn *c)
{
    if (c->reading || c->closing || c->full)
        return;
    int rc = uv_read_start((uv_stream_t *)&c->tcp, pd__alloc_cb, pd__read_cb);
    if (rc != 0) {
        pd_log_debug("conn %" PRIu64 ": read start failed: %s", c->id, uv_strerror(rc));
        pd__conn_close(c);
        return;
    }
    c->reading = 1;
}

void pd__conn_read_stop(pd__conn *c)
{
    if (!c->reading)
        return;
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = 0;
}

/* ---- the socket shared with workers (pd__wire) ---------------------------- */

static pd__wire *pd__wire_new(int fd)
{
    pd__wire *w = calloc(1, sizeof *w);
    if (!w || pthread_mutex_init(&w->mu, NULL) != 0) {
        free(w);
        return NULL;
    }
    w->fd = fd;
    w->state = PD__WIRE_FREE;
    atomic_init(&w->refs, 1);
    return w;
}

pd__wire *pd__wire_retain(pd__wire *w)
{
    if (w)
        atomic_fetch_add(&w->refs, 1);
    return w;
}

void pd__wire_release(pd__wire *w)
{
    if (w && atomic_fetch_sub(&w->refs, 1) == 1) {
        pthread_mutex_destroy(&w->mu);
        free(w);
    }
}

/* Moves c's wire from state `from` to `to`; a wire in another state keeps
 * its own. */
static void pd__wire_move(pd__conn *c, pd__wire_state from, pd__wire_state to)
{
    if (!c->wire)
        return;
    pthread_mutex_lock(&c->wire->mu);
    if (c->wire->state == from)
        c->wire->state = to;
    pthread_mutex_unlock(&c->wire->mu);
}

static pd__wire_state pd__wire_state_of(pd__conn *c)
{
    if (!c->wire)
        return PD__WIRE_LOOP;
    pthread_mutex_lock(&c->wire->mu);
    pd__wire_state st = c->wire->state;
    pthread_mutex_unlock(&c->wire->mu);
    return st;
}

size_t pd__wire_try_send(pd__wire *w, const uint8_t *buf, size_t len, uint32_t weight)
{
    if (!w || len == 0)
        return 0;
    size_t sent = 0;
    pthread_mutex_lock(&w->mu);
    if (w->state == PD__WIRE_FREE) {
        /* Non-blocking like every write to the socket; a reader that has
         * not taken its earlier answers gets the rest through the loop,
         * with its backpressure. */
        ssize_t n = send(w->fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
            sent = (size_t)n;
            if (sent < len)
                w->state = PD__WIRE_PARTIAL;
            else
                w->answered = weight; /* under mu: before the client can read it */
        }
    }
    pthread_mutex_unlock(&w->mu);
    return sent;
}

void pd__wire_collected(pd__wire *w)
{
    pthread_mutex_lock(&w->mu);
    w->answered = 0;
    pthread_mutex_unlock(&w->mu);
}

uint32_t pd__conn_waiting(pd__conn *c)
{
    if (!c->wire || c->in_flight == 0)
        return c->in_flight;
    pthread_mutex_lock(&c->wire->mu);
    uint32_t answered = c->wire->answered;
    pthread_mutex_unlock(&c->wire->mu);
    return c->in_flight > answered ? c->in_flight - answered : 0;
}

/* Answers left c (a write callback, or a flush the kernel took whole):
 * the client is active, and a connection paused for backpressure reads
 * again once its unread replies are under the low watermark. */
static void pd__conn_written(pd__conn *c)
{
    pd_server *s = c->server;
    if (c->n_pend == 0 && c->writes_pending == 0)
        pd__wire_move(c, PD__WIRE_LOOP, PD__WIRE_FREE);
    c->last_active_ms = uv_now(s->loop);
    pd__conn_account(c);
    if (c->closing)
        return;
    if (c->paused && uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) <= s->conf.write_low_watermark) {
        pd_log_debug("conn %" PRIu64 ": replies drained; resuming reads", c->id);
        c->paused = 0;
        if (s->phase == PD__RUNNING && !c->lingering) {
            /* Frames that arrived before the pause come first; the reader
             * hands out no new space while a whole frame is buffered. */
            pd__conn_process(c);
            if (!c->paused && !c->closing && !c->lingering && !c->auth_failed_ms)
                pd__conn_read_start(c);
        }
    }
}

/* Frees a write request and its answers (the first one from where the
 * kernel had already taken part of it: see pd__conn_flush). */
static void pd__write_free(pd__write *w)
{
    free(w->bufs[0].base - w->first_sent);
    for (uint32_t i = 1; i < w->nbufs; i++)
        free(w->bufs[i].base);
    free(w);
}

static void pd__write_cb(uv_write_t *req, int status)
{
    pd__write *w = (pd__write *)req;
    pd__conn *c = req->handle->data;

    c->writes_pending--;
    c->out_bytes -= w->bytes;
    pd__write_free(w);
    if (status < 0) {
        if (status != UV_ECANCELED)
            pd_log_debug("conn %" PRIu64 ": write failed: %s", c->id, uv_strerror(status));
        pd__conn_close(c);
        return;
    }
    pd__conn_written(c);
}

/* Frees the answers c has not handed to uv_write yet (it is closing). */
static void pd__conn_drop_pending(pd__conn *c)
{
    pd_server *s = c->server;
    for (uint32_t i = 0; i < c->n_pend; i++)
        free(c->pend[i].base);
    c->out_bytes -= c->pend_bytes;
    c->n_pend = 0;
    c->pend_bytes = 0;
    if (c->dirty) {
        /* Rare (a close while answers wait for their flush), and the
         * lists hold only connections with answers not yet written. */
        pd__conn **pp = &s->table.dirty;
        while (*pp && *pp != c)
            pp = &(*pp)->next_dirty;
        if (!*pp) /* held while pd__flush_due writes the others */
            for (pp = &s->table.held; *pp != c;)
                pp = &(*pp)->next_dirty;
        *pp = c->next_dirty;
        c->next_dirty = NULL;
        c->dirty = 0;
    }
}

/* Sends c's pending answers with one writev, then checks the hard cap: the
 * backlog is what libuv holds because the kernel's send buffer is full,
 * bytes the client has not taken yet.
 *
 * With nothing queued in libuv, the answers go straight to the socket
 * (uv_try_write), as Redis writes its replies: a complete write frees them
 * at once and costs no write request, no write callback and no epoll_ctl
 * (libuv re-arms the socket's epoll interest after every queued write it
 * completes). Only what the kernel did not take is handed to uv_write. */
static void pd__conn_flush(pd__conn *c)
{
    pd_server *s = c->server;
    if (c->n_pend == 0 || c->closing)
        return;
    /* A worker's answer is half out: its rest goes first (pd__conn_send_rest
     * queues it and makes the connection dirty again). */
    if (pd__wire_state_of(c) == PD__WIRE_PARTIAL)
        return;
    size_t sent = 0;
    if (c->writes_pending == 0) {
        int rc = uv_try_write((uv_stream_t *)&c->tcp, c->pend, c->n_pend);
        if (rc < 0 && rc != UV_EAGAIN) {
            pd_log_debug("conn %" PRIu64 ": write failed: %s", c->id, uv_strerror(rc));
            pd__conn_close(c);
            return;
        }
        sent = rc > 0 ? (size_t)rc : 0;
        c->out_bytes -= sent;
        c->pend_bytes -= sent;
        uint32_t done = 0;
        while (done < c->n_pend && sent >= c->pend[done].len) {
            sent -= c->pend[done].len;
            free(c->pend[done].base);
            done++;
        }
        c->n_pend -= done;
        memmove(c->pend, c->pend + done, c->n_pend * sizeof *c->pend);
        if (c->n_pend == 0) {
            pd__conn_written(c);
            return;
        }
        /* sent is now what the kernel took of the first answer left. */
    }
    uint32_t n = c->n_pend;
    pd__write *w = malloc(sizeof *w + n * sizeof w->bufs[0]);
    if (!w) {
        pd_log_error("conn %" PRIu64 ": out of memory queueing replies; closing", c->id);
        pd__conn_close(c);
        return;
    }
    w->nbufs = n;
    w->bytes = c->pend_bytes;
    w->first_sent = sent;
    memcpy(w->bufs, c->pend, n * sizeof *w->bufs);
    w->bufs[0].base += sent;
    w->bufs[0].len -= (unsigned int)sent;
    c->n_pend = 0;
    c->pend_bytes = 0;
    int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, w->bufs, n, pd__write_cb);
    if (rc != 0) {
        c->out_bytes -= w->bytes;
        pd__write_free(w);
        pd_log_debug("conn %" PRIu64 ": write failed: %s", c->id, uv_strerror(rc));
        pd__conn_close(c);
        return;
    }
    c->writes_pending++;

    size_t backlog = uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp);
    uint64_t hard_cap = (uint64_t)s->conf.write_high_watermark * PD_SERVER_WRITE_HARD_CAP_FACTOR;
    if (backlog > hard_cap) {
        pd_log_warn("conn %" PRIu64 ": %zu reply bytes unread (cap %" PRIu64 "); closing",
                    c->id, backlog, hard_cap);
        pd__conn_close(c);
    }
}

/* Writes every connection's pending answers: one write per connection,
 * however many answers it got. */
void pd__flush_all(pd_server *s)
{
    uv_timer_stop(&s->table.hold_timer);
    while (s->table.dirty) {
        pd__conn *c = s->table.dirty;
        s->table.dirty = c->next_dirty;
        c->next_dirty = NULL;
        c->dirty = 0;
        pd__conn_flush(c);
    }
}

static void pd__hold_timer_cb(uv_timer_t *t)
{
    pd__flush_all(t->data);
}

/* Whether c's pending answers may wait for more: a pipelining client
 * (jobs still in flight, whose answers the workers hand over in batches of
 * their own) takes its answers in as few writes as fit within the hold's
 * bounds. A client waiting on one request at a time has nothing in flight
 * once answered, and is written at once; so is anything while the server
 * stops. Each write wakes the client, and on loopback the server's own
 * thread pays for that wakeup inside its writev: the largest single cost
 * around a search in issue 30's item 6 profile. */
static int pd__conn_may_hold(const pd__conn *c, uint64_t now)
{
    return c->in_flight > 0 && !c->closing && !c->lingering && !c->paused && c->server->phase == PD__RUNNING &&
           c->pend_bytes < PD__HOLD_BYTES && now - c->pend_since_ns < PD__HOLD_NS;
}

void pd__flush_due(pd_server *s)
{
    uint64_t now = 0;
    /* Held connections wait on table.held while the rest are written, so
     * that a close during another's write (pd__conn_drop_pending) finds
     * them, and connections made dirty meanwhile are written too. */
    while (s->table.dirty) {
        pd__conn *c = s->table.dirty;
        s->table.dirty = c->next_dirty;
        if (c->n_pend > 0 && (now || (now = pd_pool_now_ns())) && pd__conn_may_hold(c, now)) {
            c->next_dirty = s->table.held;
            s->table.held = c;
            continue;
        }
        c->next_dirty = NULL;
        c->dirty = 0;
        pd__conn_flush(c);
    }
    s->table.dirty = s->table.held;
    s->table.held = NULL;
    if (s->table.dirty && !uv_is_active((uv_handle_t *)&s->table.hold_timer))
        uv_timer_start(&s->table.hold_timer, pd__hold_timer_cb, PD__HOLD_TIMER_MS, 0);
}

void pd__stamp_answer(uint8_t **buf, size_t *len, uint64_t arrival_ns, uint64_t search_us)
{
    uint64_t now = pd_pool_now_ns();
    uint64_t server_us = now > arrival_ns ? (now - arrival_ns + 999u) / 1000u : 1u;
    pd_codec_stamp_timing(buf, len, server_us, search_us);
}

/* Queues one encoded answer (whole frames) for this iteration's flush and
 * takes ownership of buf. An answer to the frame being handled gets its
 * timing here, the last step before its bytes are queued (answers made on
 * workers have theirs already). A NULL buf means encoding ran out of memory:
 * the client cannot be told, so the connection is closed rather than left
 * waiting for an answer. */
void pd__conn_send(pd__conn *c, uint8_t *buf, size_t len)
{
    pd_server *s = c->server;
    if (s->dispatch.answering_conn == c)
        pd__stamp_answer(&buf, &len, s->dispatch.answering_since_ns, s->dispatch.answering_search_us);
    if (!buf) {
        pd_log_error("conn %" PRIu64 ": out of memory encoding a reply; closing", c->id);
        pd__conn_close(c);
        return;
    }
    if (c->closing) {
        free(buf);
        return;
    }
    if (c->n_pend == c->pend_cap) {
        uint32_t cap = c->pend_cap ? c->pend_cap * 2 : 8;
        uv_buf_t *grown = realloc(c->pend, cap * sizeof *grown);
        if (!grown) {
            free(buf);
            pd_log_error("conn %" PRIu64 ": out of memory queueing a reply; closing", c->id);
            pd__conn_close(c);
            return;
        }
        c->pend = grown;
        c->pend_cap = cap;
    }
    if (c->n_pend == 0)
        c->pend_since_ns = pd_pool_now_ns();
    c->pend[c->n_pend++] = uv_buf_init((char *)buf, (unsigned int)len);
    c->pend_bytes += len;
    pd__wire_move(c, PD__WIRE_FREE, PD__WIRE_LOOP);
    c->out_bytes += len;
    if (!c->dirty) {
        c->dirty = 1;
        c->next_dirty = s->table.dirty;
        s->table.dirty = c;
    }
    /* Unread answers: what libuv holds because the kernel's send buffer is
     * full, plus what waits for the flush. Past the high watermark the
     * connection stops taking requests until its answers have left (the
     * flush's direct write or a write callback: pd__conn_written). */
    size_t backlog = uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) + c->pend_bytes;
    if (backlog > s->conf.write_high_watermark && !c->paused) {
        pd_log_debug("conn %" PRIu64 ": %zu reply bytes unread; pausing reads", c->id, backlog);
        c->paused = 1;
        if (!c->lingering)
            pd__conn_read_stop(c);
    }
    pd__conn_account(c);
}

void pd__conn_send_rest(pd__conn *c, uint8_t *buf, size_t len)
{
    pd__wire_move(c, PD__WIRE_PARTIAL, c->lingering ? PD__WIRE_CLOSED : PD__WIRE_LOOP);
    pd__conn_send(c, buf, len);
    if (c->n_pend > 1 && !c->closing) {
        uv_buf_t rest = c->pend[c->n_pend - 1];
        memmove(c->pend + 1, c->pend, (c->n_pend - 1) * sizeof *c->pend);
        c->pend[0] = rest;
    }
    if (c->lingering)
        pd__conn_shutdown(c);
}

/* Closes the connections holding the most buffered bytes, largest first,
 * until the server is within its buffer budget again. A scan of every
 * connection, but only while over budget. */
static void pd__shed(pd_server *s)
{
    while (s->table.buffered_bytes > s->conf.buffer_budget_bytes) {
        pd__conn *big = NULL;
        for (pd__conn *c = s->table.conns; c; c = c->next)
            if (!c->closing && (!big || c->buffered > big->buffered))
                big = c;
        if (!big || big->buffered == 0)
            return;
        pd_log_warn("conn %" PRIu64 ": closed to keep buffers within the budget (%zu bytes held, %" PRIu64
                    " by all connections, budget %" PRIu32 ")",
                    big->id, big->buffered, s->table.buffered_bytes, s->conf.buffer_budget_bytes);
        s->table.shed_total++;
        pd__conn_close(big);
    }
}

/* Counts again what c holds against the server's buffer budget - its read
 * buffer as allocated and every answer buffer not yet called back from
 * uv_write (not libuv's write queue size, which leaves out the part of an
 * answer the kernel took while the buffer stays allocated) - then keeps the
 * server within the budget (which may close c itself). */
void pd__conn_account(pd__conn *c)
{
    pd_server *s = c->server;
    size_t now = c->closing ? 0 : pd_frame_reader_bytes(&c->reader) + c->out_bytes;
    s->table.buffered_bytes = s->table.buffered_bytes - c->buffered + now;
    c->buffered = now;
    pd__shed(s);
}

void pd__observe(pd_server *s, pd_status status)
{
    if (s->dispatch.answering >= 0)
        pd_metrics_observe(s->metrics, (pd_request_kind)s->dispatch.answering, status, 0);
}

void pd__send_error(pd__conn *c, uint64_t id, pd_status status, const char *fmt, ...)
{
    char msg[PD__MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (status == PD_OVERLOADED)
        c->server->dispatch.overloaded_total++;
    pd__observe(c->server, status);
    size_t len = 0;
    uint8_t *buf = pd_codec_encode_error(id, status, msg, &len);
    pd__conn_send(c, buf, len);
}

void pd__send_stale(pd__conn *c, uint64_t id, uint64_t version, const char *message)
{
    pd__observe(c->server, PD_STALE_VERSION);
    size_t len = 0;
    uint8_t *buf = pd_codec_encode_error_version(id, PD_STALE_VERSION, message, version, &len);
    pd__conn_send(c, buf, len);
}

const char *pd__conn_peer(const pd__conn *c, char out[PD_CONF_MAX_ADDRESS])
{
    struct sockaddr_storage ss;
    int n = (int)sizeof ss;
    char host[PD_CONF_MAX_HOST] = "?";
    uint16_t port = 0;
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &n) == 0) {
        if (ss.ss_family == AF_INET6) {
            const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
            uv_ip6_name(a, host, sizeof host);
            port = ntohs(a->sin6_port);
        } else if (ss.ss_family == AF_INET) {
            const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
            uv_ip4_name(a, host, sizeof host);
            port = ntohs(a->sin_port);
        }
    }
    if (port == 0) {
        snprintf(out, PD_CONF_MAX_ADDRESS, "?");
        return out;
    }
    return pd_conf_format_address(out, host, port);
}

static void pd__conn_closed(uv_handle_t *h)
{
    pd__conn *c = h->data;
    pd_server *s = c->server;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->table.conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->table.n_conns--;
    s->table.hooks.on_close(c);
    pd_frame_reader_free(&c->reader);
    free(c->pend);
    free(c);
}

void pd__conn_close(pd__conn *c)
{
    pd_server *s = c->server;
    if (c->closing)
        return;
    pd__conn_unlink_full(c);
    c->closing = 1;
    /* Closed to workers before uv_close closes the descriptor, so none can
     * write to it, or to whatever reuses its number. */
    if (c->wire) {
        pthread_mutex_lock(&c->wire->mu);
        c->wire->state = PD__WIRE_CLOSED;
        pthread_mutex_unlock(&c->wire->mu);
        pd__wire_release(c->wire);
        c->wire = NULL;
    }
    c->reading = 0;
    pd__conn_drop_pending(c);
    /* Its buffers go with it: they no longer count against the budget. The
     * read buffer is freed now rather than in the close callback, which
     * runs only after libuv has handled every other connection ready in
     * this turn of the loop: while shedding, those reads would otherwise
     * fill new buffers beside the ones already taken off the count. Nothing
     * reads it again: the frame being handled was decoded before any answer
     * (and so any shedding), and a closing connection takes no more input.
     * Answer buffers stay with libuv until their write callbacks. */
    s->table.buffered_bytes -= c->buffered;
    c->buffered = 0;
    pd_frame_reader_free(&c->reader);
    if (c->in_map) {
        pd__map_remove(&s->table.map, c->id);
        c->in_map = 0;
    }
    /* Queued jobs of a closed connection are skipped by the workers; their
     * completions are dropped because the id is no longer in the map. */
    if (c->in_flight > 0 && s->pool)
        pd_pool_cancel_owner(s->pool, c->id);
    uv_close((uv_handle_t *)&c->tcp, pd__conn_closed);
}

static void pd__shutdown_cb(uv_shutdown_t *req, int status)
{
    pd__conn *c = req->handle->data;
    c->shutdown_done = 1;
    /* While running, a lingering connection stays open to drain the peer's
     * input (see the top of this file); during a server stop there is no
     * point in waiting. */
    if (status < 0 || c->server->phase != PD__RUNNING)
        pd__conn_close(c);
}

/* Shuts the write side down once queued replies have gone out. */
void pd__conn_shutdown(pd__conn *c)
{
    if (c->closing || c->shutdown_req.handle)
        return;
    /* A worker's answer is half out: the shutdown waits until its rest is
     * queued (pd__conn_send_rest shuts the connection down then). */
    if (pd__wire_state_of(c) == PD__WIRE_PARTIAL)
        return;
    /* The shutdown waits for queued writes only: queue the pending ones. */
    pd__conn_flush(c);
    if (c->closing)
        return;
    int rc = uv_shutdown(&c->shutdown_req, (uv_stream_t *)&c->tcp, pd__shutdown_cb);
    if (rc != 0)
        pd__conn_close(c);
}

/* Answer-then-close after a protocol error: the reply (already queued by the
 * caller) goes out, then the write side shuts, and input is discarded until
 * the peer closes or the linger time runs out. */
void pd__conn_linger(pd__conn *c)
{
    pd_server *s = c->server;
    if (c->closing || c->lingering)
        return;
    c->lingering = 1;
    c->lingering_since_ms = uv_now(c->server->loop);
    /* No worker writes to it any more; an answer a worker has half written
     * keeps the wire PARTIAL until its rest is queued, ahead of the error. */
    pd__wire_move(c, PD__WIRE_FREE, PD__WIRE_CLOSED);
    pd__wire_move(c, PD__WIRE_LOOP, PD__WIRE_CLOSED);
    /* The error reply is its last frame: what it holds open above the
     * transport (its watches) ends now, rather than hold their
     * max_watchers slots and take events for the linger time. */
    s->table.hooks.on_linger(c);
    pd__conn_unlink_full(c); /* a lingering connection reads to discard */
    pd__conn_shutdown(c);
    pd__conn_read_start(c);
}


/* Answers the complete frames that are buffered, until backpressure pauses
 * the connection: the rest wait in the reader until replies drain, so the
 * unread backlog never grows by more than one reply past the high
 * watermark (plus what in-flight searches bring back). */
static void pd__conn_process(pd__conn *c)
{
    pd_server *s = c->server;
    uint64_t arrival_ns = pd_pool_now_ns();
    while (!c->closing && !c->lingering && !c->paused && !c->auth_failed_ms) {
        const uint8_t *payload;
        size_t len;
        pd_status st = pd_frame_reader_next(&c->reader, &payload, &len);
        if (st == PD_PARTIAL)
            return;
        if (st == PD_FRAME_TOO_LARGE) {
            uint32_t claimed = pd_frame_get_header(c->reader.buf + c->reader.start);
            s->dispatch.malformed_total++;
            pd_metrics_observe(s->metrics, PD_REQ_NONE, PD_FRAME_TOO_LARGE, 0);
            pd_log_debug("conn %" PRIu64 ": frame of %" PRIu32 " bytes refused; closing", c->id, claimed);
            pd__send_error(c, 0, PD_FRAME_TOO_LARGE,
                           "frame of %" PRIu32 " bytes exceeds the %" PRIu32 "-byte limit", claimed,
                           c->reader.max_frame);
            pd__conn_linger(c);
            return;
        }
        c->frame_started_ms = 0;
        s->table.hooks.on_frame(c, payload, len, arrival_ns);
    }
}

static void pd__read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    pd__conn *c = stream->data;
    if (nread > 0 && c->lingering && !c->reader.lent)
        return; /* read into the discard buffer */
    if (nread > 0) {
        c->last_active_ms = uv_now(c->server->loop);
        pd_frame_reader_commit(&c->reader, (size_t)nread);
        pd__conn_process(c);
        if (pd__conn_waiting(c) >= c->server->conf.max_inflight_per_conn)
            pd__conn_full(c);
        /* What the shared buffer still holds (a partial frame, frames
         * left for after a pause) moves to the connection's own. */
        if (pd_frame_reader_settle(&c->reader) != 0) {
            pd_log_warn("conn %" PRIu64 ": no memory for its read buffer; closing", c->id);
            pd__conn_close(c);
            return;
        }
        /* A frame's clock starts with its first byte: with bytes left over
         * after every whole frame was taken, the next one has begun. */
        if (c->frame_started_ms == 0 && pd_frame_reader_pending(&c->reader) > 0)
            c->frame_started_ms = c->last_active_ms;
        pd__conn_account(c);
        return;
    }
    (void)pd_frame_reader_settle(&c->reader); /* nothing was read into a lent buffer */
    if (nread == 0)
        return; /* EAGAIN: not end of stream */
    if (nread == UV_ENOBUFS)
        pd_log_warn("conn %" PRIu64 ": no memory for its read buffer; closing", c->id);
    else if (nread != UV_EOF)
        pd_log_debug("conn %" PRIu64 ": read failed: %s", c->id, uv_strerror((int)nread));
    /* A client that hangs up gets no more answers: its queued jobs are
     * cancelled rather than computed for nobody. */
    pd__conn_close(c);
}

/* A connection at its in-flight cap stops being read. Its further requests
 * would only be refused OVERLOADED, a few per read as they trickle in, and
 * every read and every refusal's write is a system call on the loop
 * thread, which all clients' requests pass through: under a flood that
 * halved what the server answered (docs/BENCHMARKS.md, "Overload").
 * Unread, they wait in the kernel until half of the connection's requests
 * are answered or PD__FULL_PAUSE_MS has passed; then one read takes them
 * all, admits what fits and refuses the rest in one write. The pause is
 * bounded so that a Cancel or Ping from a full client does not wait on its
 * searches. */
#define PD__FULL_PAUSE_MS 1

static void pd__full_timer_cb(uv_timer_t *t)
{
    pd_server *s = t->data;
    while (s->table.full)
        pd__conn_unfull(s->table.full);
}

static void pd__conn_full(pd__conn *c)
{
    pd_server *s = c->server;
    if (c->full || c->lingering || c->closing)
        return;
    c->full = 1;
    c->prev_full = NULL;
    c->next_full = s->table.full;
    if (s->table.full)
        s->table.full->prev_full = c;
    s->table.full = c;
    pd__conn_read_stop(c);
    if (!uv_is_active((uv_handle_t *)&s->table.full_timer))
        uv_timer_start(&s->table.full_timer, pd__full_timer_cb, PD__FULL_PAUSE_MS, 0);
}

static void pd__conn_unlink_full(pd__conn *c)
{
    if (!c->full)
        return;
    if (c->prev_full)
        c->prev_full->next_full = c->next_full;
    else
        c->server->table.full = c->next_full;
    if (c->next_full)
        c->next_full->prev_full = c->prev_full;
    c->full = 0;
}

void pd__conn_unfull(pd__conn *c)
{
    if (!c->full)
        return;
    pd__conn_unlink_full(c);
    if (!c->paused && !c->closing && !c->lingering && !c->auth_failed_ms && c->server->phase == PD__RUNNING)
        pd__conn_read_start(c);
}

static void pd__spare_closed(uv_handle_t *h)
{
    pd_server *s = h->data;
    s->table.spare_busy = 0;
    s->open_handles--;
}

/* Accepts a connection into the spare handle and closes it: without a
 * uv_accept libuv stops watching the listener, so even when there is no
 * memory for a connection, the pending one must be taken off the queue. */
static void pd__accept_and_drop(pd_server *s)
{
    if (s->table.spare_busy || uv_tcp_init(s->loop, &s->table.spare) != 0)
        return;
    s->table.spare.data = s;
    s->table.spare_busy = 1;
    s->open_handles++;
    (void)uv_accept((uv_stream_t *)&s->listener, (uv_stream_t *)&s->table.spare);
    uv_close((uv_handle_t *)&s->table.spare, pd__spare_closed);
}

void pd__on_connection(uv_stream_t *listener, int status)
{
    pd_server *s = listener->data;
    if (status < 0) {
        /* libuv has already taken the connection off the queue and closed
         * it (its EMFILE trick): the peer sees a reset. Logged at most once
         * per PD_SERVER_ACCEPT_LOG_MS so a storm cannot flood the log. */
        s->table.accept_errors_total++;
        uint64_t now = uv_now(s->loop);
        if (s->table.accept_logged_ms == 0 || now - s->table.accept_logged_ms >= PD_SERVER_ACCEPT_LOG_MS) {
            pd_log_warn("accept failed: %s (%" PRIu64 " failures since the last report; %zu connections open, "
                        "limit %" PRIu32 ")",
                        uv_strerror(status), s->table.accept_errors_total - s->table.accept_errors_logged, s->table.n_conns,
                        s->conf.max_connections);
            s->table.accept_errors_logged = s->table.accept_errors_total;
            s->table.accept_logged_ms = now;
        }
        return;
    }
    pd__conn *c = calloc(1, sizeof *c);
    if (!c || uv_tcp_init(s->loop, &c->tcp) != 0) {
        free(c);
        pd_log_error("out of memory accepting a connection; dropping it");
        pd__accept_and_drop(s);
        return;
    }
    c->tcp.data = c;
    c->server = s;
    c->id = s->table.next_conn_id++;
    c->token = -1;
    pd_frame_reader_init(&c->reader, s->conf.max_frame_bytes);
    c->last_active_ms = uv_now(s->loop);
    c->next = s->table.conns;
    if (s->table.conns)
        s->table.conns->prev = c;
    s->table.conns = c;
    s->table.n_conns++;

    int rc = uv_accept(listener, (uv_stream_t *)&c->tcp);
    if (rc != 0) {
        pd_log_warn("accept failed: %s", uv_strerror(rc));
        pd__conn_close(c);
        return;
    }
    if (pd__map_insert(&s->table.map, c) != 0) {
        pd_log_error("out of memory registering a connection; closing it");
        pd__conn_close(c);
        return;
    }
    c->in_map = 1;
    uv_tcp_nodelay(&c->tcp, 1);
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0)
        c->wire = pd__wire_new(fd);

    if (s->table.n_conns > s->conf.max_connections) {
        pd_metrics_observe_overloaded(s->metrics, PD_METRICS_LIMIT_CONNECTIONS);
        pd__send_error(c, 0, PD_OVERLOADED, "server has %zu connections (limit %" PRIu32 ")",
                       s->table.n_conns - 1, s->conf.max_connections);
        pd__conn_linger(c);
        return;
    }
    pd_log_debug("conn %" PRIu64 ": accepted (%zu open)", c->id, s->table.n_conns);
    pd__conn_read_start(c);
}
