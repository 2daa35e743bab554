/*
 * pd_server.h - the TCP front end: listener, connections, request dispatch,
 * completions, reload and graceful shutdown, all on one libuv loop.
 *
 * The server owns every libuv handle it creates and touches them only from
 * the loop thread. Worker threads reach it through pd_server_wake (a
 * pd_pool_wake_fn that writes to an eventfd the loop watches, only while the
 * loop sleeps); other threads may call only pd_server_wake,
 * pd_server_request_stop and pd_server_request_reload.
 *
 * Order of use (main.c does exactly this):
 *   s = pd_server_create(loop, &conf, registry, &source);
 *   pd_server_set_world_store(s, store);       optional: serves FindRoute
 *   pool = pd_server_pool_create(s, threads);  the workers, wired to this server
 *   pd_server_watch_signals(s);                optional: SIGTERM/SIGINT/SIGHUP, and
 *                                              SIGUSR1/SIGUSR2 (drain, ready again)
 *   pd_server_load(s, pool, &conf, err, n);    optional: the scenes, loaded while
 *                                              the loop runs (else load the registry
 *                                              before pd_server_create)
 *   pd_server_start(s, pool, err, errlen);     binds, listens, logs the address
 *   uv_run(loop, UV_RUN_DEFAULT);              returns once a stop has drained
 *   pd_server_pool_destroy(pool);              no more wake-ups after this
 *   pd_server_destroy(s);                      closes what is left, frees
 *
 * The process must ignore SIGPIPE (a peer that vanishes mid-write would
 * otherwise kill it); main.c and the tests do.
 */
#ifndef PD_SERVER_H
#define PD_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "pd_codec.h"
#include "pd_conf.h"
#include "pd_metrics.h"
#include "pd_pool.h"
#include "pd_scene.h"
#include "pd_world.h"

/* Fixed server limits (the configurable ones are in pd_conf). */
#define PD_SERVER_LISTEN_BACKLOG 511          /* connections the kernel queues before accept */
#define PD_SERVER_WRITE_HARD_CAP_FACTOR 4     /* queued bytes above high watermark x this: close */
#define PD_SERVER_SWEEP_MAX_MS 1000           /* idle sweep period; shorter for short timeouts */
#define PD_SERVER_SWEEP_MIN_MS 10             /* ...but never busier than this */
#define PD_SERVER_LINGER_MS 5000              /* a connection closing after an error reply gets
                                                 this long to take the reply, then is cut */
#define PD_SERVER_CANCEL_WAIT_MS 1000         /* after the grace period, how long cancelled jobs
                                                 get to come back before connections close */
/* File descriptors kept free beyond max_connections: the listeners, the
 * loop's own, the log, a reload reading maps, metrics scrapes and the
 * connections that are closing. max_connections is lowered at start (and on
 * reload) when the open-file limit cannot hold both, so a client past the
 * cap is told OVERLOADED instead of being reset by a failed accept. */
#define PD_SERVER_FD_RESERVE 64
/* A failed accept is logged at most once per this long, with the count. */
#define PD_SERVER_ACCEPT_LOG_MS 1000
/* After a wrong token nothing more is read from the connection; the answer
 * (UNAUTHENTICATED) and the close come this long after, give or take one
 * sweep, so guessing costs a connection and a second per try. */
#define PD_SERVER_AUTH_FAIL_DELAY_MS 1000
#define PD_SERVER_FLUSH_MS 2000               /* at shutdown, how long pending replies get to
                                                 reach slow clients before they are cut */

typedef struct pd_server pd_server;

/* Where a reload (SIGHUP) reads the config from. adjust, if set, is applied to
 * every freshly loaded config before it is used (main.c re-applies its
 * command-line overrides with it), so a reload never undoes --listen etc.
 * adjust runs on a libuv threadpool thread, one call at a time, while the
 * loop goes on: it may read adjust_user but must not touch the server. */
typedef struct pd_server_config_source {
    const char *path;                     /* NULL disables reload */
    void (*adjust)(pd_conf *conf, void *user);
    void *adjust_user;
} pd_server_config_source;

/*
 * Creates a server on loop. conf is copied (its scene list is not needed: the
 * registry holds the scenes); registry and loop must outlive the server.
 * source may be NULL (no reload). Returns NULL on allocation or libuv failure.
 */
pd_server *pd_server_create(uv_loop_t *loop, const pd_conf *conf, pd_registry *registry,
                            const pd_server_config_source *source);

/* A worker pool for this server: threads workers, each with a query
 * scratch (pd_query.h) that grows with its searches and is trimmed to
 * limits.worker_retained_bytes after each job, the queue capacity of the
 * config and pd_server_wake as its wake function. NULL on failure. */
pd_pool *pd_server_pool_create(pd_server *s, uint32_t threads);

/* Destroys a pool made by pd_server_pool_create and frees the jobs it still
 * held. NULL is a no-op. */
void pd_server_pool_destroy(pd_pool *pool);

/* The pd_pool_wake_fn to give pd_pool_create, with the server as user data.
 * Thread-safe. Call it after the results are on the pool's completion list:
 * a loop that is awake takes them before it next sleeps, and is not
 * woken. */
void pd_server_wake(void *server);

/* Binds conf's listen address (port 0 = ephemeral) and starts accepting.
 * The pool must have been created with pd_server_wake and this server.
 * Logs "listening on HOST:PORT" at info. Returns 0, or -1 with a reason. */
int pd_server_start(pd_server *s, pd_pool *pool, char *err, size_t errlen);

/* Loop thread, before pd_server_start: loads conf's scenes and, with a world
 * store, builds its portals and routes over them, on libuv's threadpool
 * like a reload, and runs the loop until they are published, so the
 * metrics port answers (/readyz: "loading scenes") and signals are handled
 * while large maps load. conf is only read, and must stay valid until this
 * returns. Returns 0 once scenes and world are published; 1 when a stop
 * (SIGTERM) came first (what was loaded is dropped, and uv_run returns at
 * once); -1 with the reason in err when a map, a scene name or the world
 * was refused (nothing is published). A SIGHUP during the load reloads
 * once it is done. */
int pd_server_load(pd_server *s, pd_pool *pool, const pd_conf *conf, char *err, size_t errlen);

/* Loop thread: whether the server takes traffic - its scenes are loaded
 * and it listens, every worker thread is ready and no stop has begun.
 * Returns 1, or 0 with the reason in reason (cap bytes). The
 * pd_metrics_ready_fn main.c gives the metrics port (/healthz, /readyz). */
int pd_server_ready(void *server, char *reason, size_t cap);

/* After pd_server_load, before pd_server_start: with a data_dir in the
 * config, opens the journal there and replays it over the loaded scenes
 * (on libuv's threadpool; the loop runs meanwhile and /readyz says
 * "loading scenes"), then journals every change from now on and fsyncs or
 * compacts it from a timer. 0 (also without data_dir), 1 when a stop was
 * asked for meanwhile (like pd_server_load), or -1 with the reason in
 * err. The server closes the journal in pd_server_destroy. */
int pd_server_open_journal(pd_server *s, char *err, size_t errlen);

/* The journal's current log and snapshot sizes and whether it failed, for
 * /metrics: returns 1, or 0 (and all zeros) without a journal. Never waits. */
int pd_server_journal_state(pd_server *s, uint64_t *log_bytes, uint64_t *snapshot_bytes, int *failed);
/* The replica's /metrics families (a Redis log's tail, issue 32), malloc'd,
 * or NULL without one. Loop thread. */
char *pd_server_replica_metrics(pd_server *s);

/* The port actually bound (useful with port 0); 0 before pd_server_start. */
uint16_t pd_server_port(const pd_server *s);

/* Tells the server the port main.c's metrics HTTP server bound, so that a
 * reload's warning names the port that answers, not the configured 0. */
void pd_server_set_metrics_port(pd_server *s, uint16_t port);

/* Installs SIGTERM/SIGINT (graceful stop; a second one skips the grace
 * period) and SIGHUP (reload) handlers on the loop. Returns 0 or -1. */
int pd_server_watch_signals(pd_server *s);

/* Thread-safe. Starts a graceful stop: stop accepting and reading, wait up
 * to shutdown_grace_ms for in-flight jobs (then cancel the rest), flush the
 * replies, close every handle; uv_run then returns. */
void pd_server_request_stop(pd_server *s);

/* Thread-safe. Rereads the config file and swaps scenes in atomically; a bad
 * config is logged and the old one keeps serving. The file and the maps are
 * read and built on libuv's threadpool (uv_queue_work), so the loop keeps
 * answering meanwhile; the swap, the world rebuild and the log lines happen
 * on the loop thread once the load is done. Requests that arrive while a
 * load is running are coalesced into one more reload after it; requests
 * during a stop are ignored, and a load that finishes during a stop is
 * dropped unpublished (uv_run still waits for it to finish). */
void pd_server_request_reload(pd_server *s);

/* Loop thread, before pd_server_start: FindRoute plans on the world store's
 * current world, each successful UpdateCells refreshes that scene's route
 * tables in it (on the worker, before the answer), and a reload rebuilds it
 * from the new config's portals and routes (a failure is logged and the old
 * world stays). Without a store FindRoute is answered INVALID_ARGUMENT. The
 * store must outlive the server and the pool. */
void pd_server_set_world_store(pd_server *s, pd_world_store *store);

/* Loop thread, before pd_server_start: every answered request is counted in
 * m (pd_metrics_observe). m may be NULL (nothing is counted) and must
 * outlive the server. */
void pd_server_set_metrics(pd_server *s, pd_metrics *m);

/* Loop thread only: the counters the Stats request reports. */
void pd_server_get_stats(pd_server *s, pd_server_stats *out);

/* Call after uv_run has returned and the pool is destroyed. Closes any
 * handle still open, runs the loop until they are gone (and until a reload
 * still loading has called back, dropping what it loaded) and frees the server.
 * The loop itself stays the caller's to close. NULL is a no-op. */
void pd_server_destroy(pd_server *s);

#endif
