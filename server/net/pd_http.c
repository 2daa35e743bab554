/*
 * pd_http.c - the metrics port's HTTP/1.1 responder (see pd_http.h).
 *
 * One request per connection: bytes collect in a buffer of
 * max_request_bytes until the blank line that ends the headers, the
 * request line is checked, one answer is written, the write side is shut
 * down, and the connection closes when the client hangs up or the timeout
 * runs out. Input after the request (a body, pipelined requests, the rest
 * of an oversized header) is read and dropped rather than left unread:
 * closing a socket with unread input makes the kernel send a reset, which
 * can destroy the answer before the client has read it.
 *
 * Each connection has two handles, its socket and its timer, and is freed
 * when both close callbacks have run. The responder itself is freed when
 * its listener and every connection are gone after pd_metrics_http_close,
 * and no scrape is being rendered.
 *
 * Scrapes are rendered off the loop. A /metrics request takes a snapshot
 * of the counters on the loop (pd_metrics_snapshot_take: a copy, O(scenes
 * with requests)) and libuv's threadpool renders it (the registry's
 * listing, the top scenes, the text), so the loop goes on answering while
 * a large registry is rendered. One render at a time: scrapes that arrive
 * meanwhile wait and share the next one, whose snapshot is taken after
 * they came, so eight parallel scrapes cost two renders, not eight.
 */
#include "pd_http.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bytes read at a time once the answer is on its way and input is only
 * being dropped. */
#define PD__HTTP_DISCARD_BYTES 4096
/* Longest head of an answer (status line and headers), in bytes. */
#define PD__HTTP_MAX_HEAD 256

typedef struct pd__http_conn pd__http_conn;

/* A rendered scrape, written to every connection its render served
 * without a copy each; freed with the last write's callback. */
typedef struct pd__http_text {
    unsigned refs;
    size_t len;
    char *data;
} pd__http_text;

static void pd__http_text_release(pd__http_text *t)
{
    if (t && --t->refs == 0) {
        free(t->data);
        free(t);
    }
}

struct pd_metrics_http {
    uv_loop_t *loop;
    uv_tcp_t listener;
    pd_metrics_http_limits limits;
    pd_metrics *metrics;
    pd_registry *registry;
    pd_metrics_gauges_fn gauges;
    void *gauges_user;
    pd_metrics_ready_fn ready;   /* NULL: always ready */
    void *ready_user;
    uint16_t port;
    pd__http_conn *conns;        /* open connections, a doubly linked list */
    uint32_t n_conns;
    uint32_t open_handles;       /* listener, connection handles, refused sockets */
    int closing;
    /* Scrapes: the render on the threadpool and the connections it
     * answers (served), and those that came since (waiting), answered by
     * the next render. */
    uv_work_t render_req;
    int rendering;
    pd_metrics_snapshot *snap;
    char *render_text;
    size_t render_len;
    int render_failed;
    pd__http_conn *served, *waiting;
    char discard[PD__HTTP_DISCARD_BYTES]; /* shared: a read callback always follows its
                                             own alloc callback, with nothing between */
};

struct pd__http_conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_write_t write_req;
    uv_shutdown_t shutdown_req;
    pd_metrics_http *http;
    pd__http_conn *prev, *next;
    char *request;               /* max_request_bytes, the request as it arrives */
    size_t request_len;
    char *answer;                /* the answer being written (its body too unless shared);
                                    freed in the write callback */
    pd__http_text *shared;       /* the body, when it is a scrape's shared text */
    int handles;                 /* of tcp and timer, those not yet closed */
    int answered;                /* the answer is queued: further input is dropped */
    int peer_done;               /* the client ended its input while the answer was being written */
    int closing;
    pd__http_conn **scrape_list; /* &http->served or &http->waiting while on one, else NULL */
    pd__http_conn *scrape_next;
    int head_only;               /* a HEAD /metrics: the answer without its body */
};

/* ---- lifetime ----------------------------------------------------------- */

static void pd__http_maybe_free(pd_metrics_http *h)
{
    if (h->closing && h->open_handles == 0 && !h->rendering)
        free(h);
}

/* Takes c off the scrape list it is on. */
static void pd__http_scrape_unlink(pd__http_conn *c)
{
    if (!c->scrape_list)
        return;
    pd__http_conn **pp = c->scrape_list;
    while (*pp != c)
        pp = &(*pp)->scrape_next;
    *pp = c->scrape_next;
    c->scrape_list = NULL;
    c->scrape_next = NULL;
}

static void pd__http_conn_handle_closed(uv_handle_t *handle)
{
    pd__http_conn *c = handle->data;
    pd_metrics_http *h = c->http;
    h->open_handles--;
    if (--c->handles > 0)
        return;
    free(c->request);
    free(c);
    pd__http_maybe_free(h);
}

static void pd__http_conn_close(pd__http_conn *c)
{
    if (c->closing)
        return;
    c->closing = 1;
    pd_metrics_http *h = c->http;
    pd__http_scrape_unlink(c);
    if (c->prev)
        c->prev->next = c->next;
    else
        h->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    h->n_conns--;
    uv_close((uv_handle_t *)&c->timer, pd__http_conn_handle_closed);
    uv_close((uv_handle_t *)&c->tcp, pd__http_conn_handle_closed);
}

static void pd__http_timeout_cb(uv_timer_t *timer)
{
    pd__http_conn_close(timer->data);
}

/* ---- answering ---------------------------------------------------------- */

static void pd__http_shutdown_cb(uv_shutdown_t *req, int status)
{
    pd__http_conn *c = req->data;
    /* On success the connection stays open until the client hangs up (the
     * read callback sees EOF) or the timer fires; a client that hung up
     * while the answer was being written is done now. */
    if (status < 0 || c->peer_done)
        pd__http_conn_close(c);
}

static void pd__http_write_cb(uv_write_t *req, int status)
{
    pd__http_conn *c = req->data;
    free(c->answer);
    c->answer = NULL;
    pd__http_text_release(c->shared);
    c->shared = NULL;
    if (c->closing)
        return;
    if (status < 0 || uv_shutdown(&c->shutdown_req, (uv_stream_t *)&c->tcp, pd__http_shutdown_cb) != 0)
        pd__http_conn_close(c);
}

static const char *pd__http_reason(int code)
{
    switch (code) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
    default: return "Internal Server Error";
    }
}

/* Queues the answer: its body is shared's text (referenced, not copied),
 * or else body, copied (it may be NULL with body_len 0). with_body = 0
 * (HEAD) sends the head alone, Content-Length included. */
static void pd__http_send(pd__http_conn *c, int code, const char *content_type, const char *body, size_t body_len,
                          pd__http_text *shared, int with_body)
{
    if (shared) {
        body = shared->data;
        body_len = shared->len;
    }
    char head[PD__HTTP_MAX_HEAD];
    int head_len = snprintf(head, sizeof head,
                            "HTTP/1.1 %d %s\r\n"
                            "Content-Type: %s\r\n"
                            "Content-Length: %zu\r\n"
                            "Connection: close\r\n"
                            "%s"
                            "\r\n",
                            code, pd__http_reason(code), content_type, body_len,
                            code == 405 ? "Allow: GET, HEAD\r\n" : "");
    size_t sent_body = with_body ? body_len : 0;
    size_t copied = shared ? 0 : sent_body;
    c->answered = 1;
    c->answer = malloc((size_t)head_len + copied);
    if (!c->answer) {
        pd__http_conn_close(c);
        return;
    }
    memcpy(c->answer, head, (size_t)head_len);
    if (copied)
        memcpy(c->answer + head_len, body, copied);
    c->write_req.data = c;
    c->shutdown_req.data = c;
    uv_buf_t bufs[2] = {uv_buf_init(c->answer, (unsigned)((size_t)head_len + copied)),
                        uv_buf_init((char *)body, (unsigned)sent_body)};
    if (shared && sent_body) {
        shared->refs++;
        c->shared = shared;
    }
    if (uv_write(&c->write_req, (uv_stream_t *)&c->tcp, bufs, c->shared ? 2 : 1, pd__http_write_cb) != 0) {
        free(c->answer);
        c->answer = NULL;
        pd__http_text_release(c->shared);
        c->shared = NULL;
        pd__http_conn_close(c);
        return;
    }
    /* From now on the timer bounds how long the client may take to read. */
    uv_timer_start(&c->timer, pd__http_timeout_cb, c->http->limits.read_timeout_ms, 0);
}

static void pd__http_answer(pd__http_conn *c, int code, const char *content_type, const char *body,
                            size_t body_len, int with_body)
{
    pd__http_send(c, code, content_type, body, body_len, NULL, with_body);
}

static void pd__http_answer_text(pd__http_conn *c, int code, const char *text, int with_body)
{
    pd__http_answer(c, code, "text/plain; charset=utf-8", text, strlen(text), with_body);
}

/* /readyz and /healthz: 200 "ok" when the daemon takes traffic, else 503
 * with the reason the ready callback gave. */
static void pd__http_answer_ready(pd__http_conn *c, int with_body)
{
    pd_metrics_http *h = c->http;
    char reason[PD_HTTP_MAX_REASON];
    reason[0] = '\0';
    if (!h->ready || h->ready(h->ready_user, reason, sizeof reason - 1)) {
        pd__http_answer_text(c, 200, "ok\n", with_body);
        return;
    }
    size_t n = strlen(reason); /* at most cap - 1 = sizeof reason - 2 */
    reason[n] = '\n';
    reason[n + 1] = '\0';
    pd__http_answer_text(c, 503, reason, with_body);
}

/* Answers every connection the render served, with its text (NULL:
 * 500), which the answers share and the last one frees. */
static void pd__http_answer_served(pd_metrics_http *h, char *text, size_t len)
{
    pd__http_text *t = text ? malloc(sizeof *t) : NULL;
    if (t)
        *t = (pd__http_text){1, len, text};
    else
        free(text);
    while (h->served) {
        pd__http_conn *c = h->served;
        pd__http_scrape_unlink(c);
        if (t)
            pd__http_send(c, 200, "text/plain; version=0.0.4; charset=utf-8", NULL, 0, t, !c->head_only);
        else
            pd__http_answer_text(c, 500, "out of memory\n", !c->head_only);
    }
    pd__http_text_release(t);
}

static void pd__http_render_start(pd_metrics_http *h);

/* On the threadpool: the text of the snapshot. */
static void pd__http_render_work(uv_work_t *req)
{
    pd_metrics_http *h = req->data;
    h->render_failed = pd_metrics_snapshot_render(h->snap, &h->render_text, &h->render_len) != 0;
}

static void pd__http_render_done(uv_work_t *req, int status)
{
    pd_metrics_http *h = req->data;
    h->rendering = 0;
    pd_metrics_snapshot_free(h->snap);
    h->snap = NULL;
    if (status != 0 || h->render_failed) {
        free(h->render_text);
        h->render_text = NULL;
    }
    pd__http_answer_served(h, h->render_text, h->render_len);
    h->render_text = NULL;
    if (h->closing) {
        pd__http_maybe_free(h);
        return;
    }
    if (h->waiting)
        pd__http_render_start(h);
}

/* Starts a render for the waiting scrapes, from a snapshot taken now. */
static void pd__http_render_start(pd_metrics_http *h)
{
    while (h->waiting) {
        pd__http_conn *c = h->waiting;
        pd__http_scrape_unlink(c);
        c->scrape_list = &h->served;
        c->scrape_next = h->served;
        h->served = c;
    }
    pd_metrics_gauges gauges;
    memset(&gauges, 0, sizeof gauges);
    if (h->gauges)
        h->gauges(h->gauges_user, &gauges);
    h->snap = pd_metrics_snapshot_take(h->metrics, h->gauges ? &gauges : NULL, h->registry);
    h->render_text = NULL;
    h->render_len = 0;
    h->render_failed = 0;
    h->render_req.data = h;
    if (h->snap && uv_queue_work(h->loop, &h->render_req, pd__http_render_work, pd__http_render_done) == 0) {
        h->rendering = 1;
        return;
    }
    pd_metrics_snapshot_free(h->snap);
    h->snap = NULL;
    pd__http_answer_served(h, NULL, 0);
}

static void pd__http_answer_metrics(pd__http_conn *c, int with_body)
{
    pd_metrics_http *h = c->http;
    /* No more input is read into the request; the answer comes from a
     * render (the read callback keeps a half-closed client waiting). */
    c->answered = 1;
    c->head_only = !with_body;
    c->scrape_list = &h->waiting;
    c->scrape_next = h->waiting;
    h->waiting = c;
    if (!h->rendering)
        pd__http_render_start(h);
}

/* ---- requests ----------------------------------------------------------- */

/* RFC 9110 token characters, which is what a method is made of. */
static int pd__http_is_token_char(char ch)
{
    return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
           (ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

/* Whether the headers are complete: an empty line (CRLF or a bare LF,
 * which RFC 9112 lets a server accept) ends them. The search starts at
 * from, two bytes before the newest input, so a request trickling in byte
 * by byte is not rescanned from its start each time. */
static int pd__http_headers_done(const char *buf, size_t len, size_t from)
{
    for (size_t i = from; i + 1 < len; i++) {
        if (buf[i] != '\n')
            continue;
        if (buf[i + 1] == '\n' || (buf[i + 1] == '\r' && i + 2 < len && buf[i + 2] == '\n'))
            return 1;
    }
    return 0;
}

/* Answers a whole request: checks "METHOD SP /target SP HTTP/1.x", then
 * routes on the path. Headers are not needed for anything served here. */
static void pd__http_handle(pd__http_conn *c)
{
    const char *line = c->request;
    const char *eol = memchr(line, '\n', c->request_len);
    size_t line_len = (size_t)(eol - line);
    if (line_len > 0 && line[line_len - 1] == '\r')
        line_len--;

    const char *sp1 = memchr(line, ' ', line_len);
    const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', line_len - (size_t)(sp1 + 1 - line)) : NULL;
    if (!sp1 || !sp2 || sp1 == line) {
        pd__http_answer_text(c, 400, "bad request line\n", 1);
        return;
    }
    size_t method_len = (size_t)(sp1 - line);
    const char *target = sp1 + 1;
    size_t target_len = (size_t)(sp2 - target);
    const char *version = sp2 + 1;
    size_t version_len = line_len - (size_t)(version - line);

    for (size_t i = 0; i < method_len; i++) {
        if (!pd__http_is_token_char(line[i])) {
            pd__http_answer_text(c, 400, "bad request line\n", 1);
            return;
        }
    }
    int target_ok = target_len > 0 && target[0] == '/';
    for (size_t i = 0; target_ok && i < target_len; i++)
        target_ok = (unsigned char)target[i] > 0x20 && target[i] != 0x7f;
    int version_ok = version_len == 8 && memcmp(version, "HTTP/1.", 7) == 0 &&
                     (version[7] == '0' || version[7] == '1');
    if (!target_ok || !version_ok) {
        pd__http_answer_text(c, 400, "bad request line\n", 1);
        return;
    }

    int is_get = method_len == 3 && memcmp(line, "GET", 3) == 0;
    int is_head = method_len == 4 && memcmp(line, "HEAD", 4) == 0;
    if (!is_get && !is_head) {
        pd__http_answer_text(c, 405, "only GET and HEAD are served here\n", 1);
        return;
    }
    const char *query = memchr(target, '?', target_len);
    size_t path_len = query ? (size_t)(query - target) : target_len;
    if (path_len == 8 && memcmp(target, "/metrics", 8) == 0)
        pd__http_answer_metrics(c, is_get);
    else if ((path_len == 8 && memcmp(target, "/healthz", 8) == 0) ||
             (path_len == 7 && memcmp(target, "/readyz", 7) == 0))
        pd__http_answer_ready(c, is_get);
    else if (path_len == 6 && memcmp(target, "/livez", 6) == 0)
        pd__http_answer_text(c, 200, "ok\n", is_get);
    else
        pd__http_answer_text(c, 404, "not found; try /metrics, /healthz, /readyz or /livez\n", is_get);
}

static void pd__http_alloc_cb(uv_handle_t *handle, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    pd__http_conn *c = handle->data;
    if (c->answered) {
        *buf = uv_buf_init(c->http->discard, sizeof c->http->discard);
        return;
    }
    /* The read callback answers 431 as soon as the buffer is full, so
     * there is always room here. */
    size_t room = c->http->limits.max_request_bytes - c->request_len;
    *buf = uv_buf_init(c->request + c->request_len, (unsigned)room);
}

static void pd__http_read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    pd__http_conn *c = stream->data;
    if (c->closing)
        return;
    if (nread < 0) {
        /* A client that half-closes after its request (`nc -N`) still
         * reads: while its answer is being written (c->answer is freed in
         * the write callback), closing would drop the part libuv still
         * holds, so the shutdown callback closes instead. Otherwise EOF or
         * an error after the answer is the normal end; before it, the
         * client gave up on an incomplete request. */
        if (nread == UV_EOF && (c->answer || c->scrape_list)) {
            c->peer_done = 1;
            uv_read_stop(stream);
            return;
        }
        pd__http_conn_close(c);
        return;
    }
    if (nread == 0 || c->answered)
        return;
    size_t from = c->request_len > 2 ? c->request_len - 2 : 0;
    c->request_len += (size_t)nread;
    if (pd__http_headers_done(c->request, c->request_len, from))
        pd__http_handle(c);
    else if (c->request_len >= c->http->limits.max_request_bytes)
        pd__http_answer_text(c, 431, "request headers too large\n", 1);
}

/* ---- accepting ---------------------------------------------------------- */

static void pd__http_refused_closed(uv_handle_t *handle)
{
    pd_metrics_http *h = handle->data;
    free(handle);
    h->open_handles--;
    pd__http_maybe_free(h);
}

/* Over the connection limit: accept (skipping it would stall the listener)
 * and close straight away. */
static void pd__http_refuse(pd_metrics_http *h)
{
    uv_tcp_t *tcp = malloc(sizeof *tcp);
    if (!tcp)
        return;
    if (uv_tcp_init(h->loop, tcp) != 0) {
        free(tcp);
        return;
    }
    tcp->data = h;
    h->open_handles++;
    uv_accept((uv_stream_t *)&h->listener, (uv_stream_t *)tcp);
    uv_close((uv_handle_t *)tcp, pd__http_refused_closed);
}

static void pd__http_on_connection(uv_stream_t *listener, int status)
{
    pd_metrics_http *h = listener->data;
    if (status < 0 || h->closing)
        return;
    if (h->n_conns >= h->limits.max_connections) {
        /* Full: the oldest connection makes room (new ones go to the head).
         * Scrapers and probes finish in milliseconds, so the oldest is a
         * client that stalls or lingers, and a probe is never locked out by
         * a few of those. */
        pd__http_conn *oldest = h->conns;
        while (oldest && oldest->next)
            oldest = oldest->next;
        if (oldest)
            pd__http_conn_close(oldest);
    }
    pd__http_conn *c = calloc(1, sizeof *c);
    char *request = malloc(h->limits.max_request_bytes);
    if (!c || !request) {
        free(c);
        free(request);
        pd__http_refuse(h);
        return;
    }
    c->http = h;
    c->request = request;
    if (uv_tcp_init(h->loop, &c->tcp) != 0) {
        free(request);
        free(c);
        pd__http_refuse(h);
        return;
    }
    c->tcp.data = c;
    c->timer.data = c;
    c->handles = 1;
    h->open_handles++;
    uv_timer_init(h->loop, &c->timer); /* cannot fail on Unix */
    c->handles++;
    h->open_handles++;
    uv_unref((uv_handle_t *)&c->tcp);
    uv_unref((uv_handle_t *)&c->timer);

    c->next = h->conns;
    if (h->conns)
        h->conns->prev = c;
    h->conns = c;
    h->n_conns++;

    if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0 ||
        uv_read_start((uv_stream_t *)&c->tcp, pd__http_alloc_cb, pd__http_read_cb) != 0) {
        pd__http_conn_close(c);
        return;
    }
    uv_timer_start(&c->timer, pd__http_timeout_cb, h->limits.read_timeout_ms, 0);
}

/* ---- public ------------------------------------------------------------- */

static void pd__http_error(char *err, size_t errlen, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static void pd__http_error(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static void pd__http_listener_closed(uv_handle_t *handle)
{
    pd_metrics_http *h = handle->data;
    h->open_handles--;
    pd__http_maybe_free(h);
}

pd_metrics_http *pd_metrics_http_start(uv_loop_t *loop, const char *host, uint16_t port,
                                       const pd_metrics_http_limits *limits, pd_metrics *metrics,
                                       pd_registry *registry, pd_metrics_gauges_fn gauges,
                                       void *gauges_user, char *err, size_t errlen)
{
    if (!loop || !host || !metrics) {
        pd__http_error(err, errlen, "metrics: loop, host and metrics are required");
        return NULL;
    }
    struct sockaddr_storage addr;
    if (uv_ip4_addr(host, port, (struct sockaddr_in *)&addr) != 0 &&
        uv_ip6_addr(host, port, (struct sockaddr_in6 *)&addr) != 0) {
        pd__http_error(err, errlen, "metrics: '%s' is not a numeric IPv4 or IPv6 address", host);
        return NULL;
    }
    pd_metrics_http *h = calloc(1, sizeof *h);
    if (!h) {
        pd__http_error(err, errlen, "metrics: out of memory");
        return NULL;
    }
    h->loop = loop;
    h->metrics = metrics;
    h->registry = registry;
    h->gauges = gauges;
    h->gauges_user = gauges_user;
    if (limits)
        h->limits = *limits;
    if (h->limits.max_request_bytes == 0)
        h->limits.max_request_bytes = PD_HTTP_MAX_REQUEST_BYTES;
    if (h->limits.read_timeout_ms == 0)
        h->limits.read_timeout_ms = PD_HTTP_READ_TIMEOUT_MS;
    if (h->limits.max_connections == 0)
        h->limits.max_connections = PD_HTTP_MAX_CONNECTIONS;

    int rc = uv_tcp_init(loop, &h->listener);
    if (rc != 0) {
        pd__http_error(err, errlen, "metrics: %s", uv_strerror(rc));
        free(h);
        return NULL;
    }
    h->listener.data = h;
    h->open_handles = 1;
    uv_unref((uv_handle_t *)&h->listener);
    rc = uv_tcp_bind(&h->listener, (const struct sockaddr *)&addr, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&h->listener, PD_HTTP_LISTEN_BACKLOG, pd__http_on_connection);
    if (rc != 0) {
        pd__http_error(err, errlen, "metrics: cannot listen on %s%s%s:%u: %s", strchr(host, ':') ? "[" : "",
                       host, strchr(host, ':') ? "]" : "", (unsigned)port, uv_strerror(rc));
        h->closing = 1;
        uv_close((uv_handle_t *)&h->listener, pd__http_listener_closed);
        return NULL;
    }
    struct sockaddr_storage bound;
    int bound_len = sizeof bound;
    if (uv_tcp_getsockname(&h->listener, (struct sockaddr *)&bound, &bound_len) == 0)
        h->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                    : ((struct sockaddr_in *)&bound)->sin_port);
    return h;
}

void pd_metrics_http_set_ready(pd_metrics_http *h, pd_metrics_ready_fn ready, void *user)
{
    h->ready = ready;
    h->ready_user = user;
}

uint16_t pd_metrics_http_port(const pd_metrics_http *h)
{
    return h ? h->port : 0;
}

void pd_metrics_http_close(pd_metrics_http *h)
{
    if (!h || h->closing)
        return;
    h->closing = 1;
    while (h->conns)
        pd__http_conn_close(h->conns);
    uv_close((uv_handle_t *)&h->listener, pd__http_listener_closed);
}
