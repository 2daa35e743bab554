/*
 * pd_http.h - the metrics port: a minimal HTTP/1.1 responder on the libuv
 * loop that serves pd_metrics to Prometheus and health checks.
 *
 *   GET /metrics   200, Content-Type: text/plain; version=0.0.4, the
 *                  rendered metrics (gauges read through the callback when
 *                  the scrape's snapshot is taken; the text rendered on
 *                  libuv's threadpool, one render at a time, scrapes that
 *                  come meanwhile sharing the next)
 *   GET /healthz   200, "ok\n" when the ready callback says so (or none is
 *   GET /readyz    set); else 503 with its reason ("loading scenes",
 *                  "draining: ...", "2 of 4 worker threads ready") as the body
 *   GET /livez     200, "ok\n" whenever the loop answers (loading and
 *                  draining included): the process is alive
 *   other paths    404;   methods other than GET and HEAD: 405
 *   a request line that is not "METHOD /target HTTP/1.x": 400
 *   request line plus headers over max_request_bytes: 431
 *
 * HEAD answers like GET without the body. The query string is ignored.
 * Every answer carries Connection: close and the connection is closed after
 * it (no keep-alive: a scrape every few seconds does not need it, and it
 * keeps the state per connection to one request). A request must arrive
 * whole within read_timeout_ms of the connection being accepted, or the
 * connection is closed without an answer; the same timeout bounds how long
 * a closing connection waits for the client to read the answer. A client
 * may half-close after its request (`nc -N`): it still gets the whole
 * answer. A new connection beyond max_connections closes the oldest open
 * one, so a probe always gets in (one that finds no memory is accepted and
 * closed at once).
 *
 * The responder is a side door: its handles are unreferenced (uv_unref), so
 * it never keeps uv_run going by itself; the daemon's own server does.
 *
 * Threads: loop thread only, like every libuv handle; a scrape's render
 * runs on libuv's threadpool and reads only its snapshot, the registry and
 * /proc.
 */
#ifndef PD_HTTP_H
#define PD_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "pd_metrics.h"
#include "pd_scene.h"

/* Defaults for pd_metrics_http_limits fields left 0. */
#define PD_HTTP_MAX_REQUEST_BYTES (8u * 1024u) /* request line + headers: a scraper sends a few
                                                  hundred bytes; more is refused with 431 */
#define PD_HTTP_READ_TIMEOUT_MS 5000u          /* a request must arrive whole in this time; also
                                                  bounds the wait for the client after the answer */
#define PD_HTTP_MAX_CONNECTIONS 64u            /* scrapers and probes are few; a new connection
                                                  beyond this closes the oldest one, so a probe
                                                  always gets in */
#define PD_HTTP_LISTEN_BACKLOG 64              /* connections the kernel queues before accept */
#define PD_HTTP_MAX_REASON 160                 /* longest not-ready reason sent, in bytes incl.
                                                  the newline and NUL */

typedef struct pd_metrics_http_limits {
    uint32_t max_request_bytes;  /* 0 = PD_HTTP_MAX_REQUEST_BYTES */
    uint32_t read_timeout_ms;    /* 0 = PD_HTTP_READ_TIMEOUT_MS */
    uint32_t max_connections;    /* 0 = PD_HTTP_MAX_CONNECTIONS */
} pd_metrics_http_limits;

typedef struct pd_metrics_http pd_metrics_http;

/*
 * Binds host:port (numeric IPv4 or IPv6 host; port 0 = ephemeral, see
 * pd_metrics_http_port) on loop and starts serving. metrics, registry and
 * loop must outlive the responder; registry may be NULL (no
 * pathd_scene_version), gauges may be NULL (no gauge families). limits
 * may be NULL (all defaults). Returns NULL with a reason in err on a bad
 * address, a bind/listen failure or allocation failure; after a failed
 * bind, as after pd_metrics_http_close, the loop must run once more before
 * uv_loop_close to free the listener.
 */
pd_metrics_http *pd_metrics_http_start(uv_loop_t *loop, const char *host, uint16_t port,
                                       const pd_metrics_http_limits *limits, pd_metrics *metrics,
                                       pd_registry *registry, pd_metrics_gauges_fn gauges,
                                       void *gauges_user, char *err, size_t errlen);

/* Whether the daemon takes traffic: returns 1, or 0 with a one-line
 * reason written into reason (cap bytes, NUL-terminated). Called on the
 * loop thread at each /healthz or /readyz. */
typedef int (*pd_metrics_ready_fn)(void *user, char *reason, size_t cap);

/* Sets what /healthz and /readyz ask (NULL: always ready). ready and user
 * must stay valid until pd_metrics_http_close. */
void pd_metrics_http_set_ready(pd_metrics_http *h, pd_metrics_ready_fn ready, void *user);

/* The port actually bound. */
uint16_t pd_metrics_http_port(const pd_metrics_http *h);

/* Closes the listener and every connection; no callback (gauges, ready)
 * runs after this returns. A render in flight on the threadpool still
 * reads the registry (and metrics) until its completion runs on the loop.
 * The memory is freed in the close callbacks and that completion, so the
 * caller must run the loop afterwards until it returns (uv_run with
 * UV_RUN_DEFAULT does: closing handles and the render's work request keep
 * it alive until they are done) before uv_loop_close, and keep metrics and
 * the registry until then. NULL is a no-op. */
void pd_metrics_http_close(pd_metrics_http *h);

#endif
