/*
 * pd_server_internal.h - what the files of the net layer's server share:
 * the server and connection structs and the functions one file calls in
 * another. Not for use outside server/net.
 */
#ifndef PD_SERVER_INTERNAL_H
#define PD_SERVER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <uv.h>

#include "pd_frame.h"
#include "pd_server.h"
#include "pd_watch.h"

/* Hash map sizing: a power of two, kept at most half full so linear probes
 * stay short even with 10,000+ connections. */
#define PD__MAP_INITIAL_SLOTS 64

/* Input from a connection that is closing is read into this and dropped. */
#define PD__DISCARD_BYTES 4096

/* One read call takes up to this much from a connection with no partial
 * frame buffered, into a buffer the server shares between connections
 * (pd_frame_reader_lend): libuv's suggested size, about 1,500 trivial
 * requests, where a connection's own buffer starts at 512 bytes. */
#define PD__SHARED_READ_BYTES 65536

/* Longest error text sent to a client, in bytes. */
#define PD__MESSAGE_MAX 256

typedef enum pd__phase {
    PD__RUNNING = 0,
    PD__DRAINING,
    PD__CANCELLING,
    PD__FLUSHING,
    PD__CLOSED,
} pd__phase;

/* A connection's socket as the workers see it. The worker that finishes
 * the job of a connection with nothing else in flight writes the answer to
 * the socket itself when the loop has nothing queued there
 * (pd__wire_try_send): that answer then need not wait for the loop thread
 * to get a core and reach it, which under load on shared cores is most of
 * a one-at-a-time client's wait (docs/BENCHMARKS.md, "Overload"). The
 * state, under mu, keeps every frame whole and in order. */
typedef enum pd__wire_state {
    PD__WIRE_FREE,               /* nothing queued: a worker may write */
    PD__WIRE_LOOP,               /* the loop has answers queued or in libuv */
    PD__WIRE_PARTIAL,            /* a worker wrote part of an answer: the loop writes
                                    nothing until it has queued the rest first */
    PD__WIRE_CLOSED,             /* closing or lingering: no worker writes */
} pd__wire_state;

typedef struct pd__wire {
    pthread_mutex_t mu;
    int fd;
    pd__wire_state state;
    uint32_t answered;           /* in-flight slots of the job holding this wire, once its
                                    worker wrote its whole answer and until the loop takes
                                    the job back: the client may have sent more already */
    atomic_uint refs;            /* the connection's and its jobs' */
} pd__wire;

typedef struct pd__conn {
    uv_tcp_t tcp;                /* tcp.data points back to the connection */
    pd_server *server;
    uint64_t id;                 /* never reused; jobs name their connection by it */
    pd_frame_reader reader;
    struct pd__conn *prev, *next;
    uint64_t last_active_ms;     /* uv_now of the last read or finished write: a
                                    client that neither sends nor takes replies
                                    is idle, whatever it still has queued */
    uint64_t lingering_since_ms; /* uv_now when the lingering close began */
    uint32_t writes_pending;     /* uv_write requests not yet called back */
    uv_buf_t *pend;              /* answers queued since the last flush, not yet handed
                                    to uv_write (owned); n_pend of pend_cap used */
    uint32_t n_pend, pend_cap;
    size_t pend_bytes;           /* their bytes */
    struct pd__conn *next_dirty; /* in the server's list of connections with pend */
    struct pd__conn *next_full, *prev_full; /* in the server's list of connections at their cap */
    uint32_t in_flight;          /* jobs submitted and not yet completed */
    uint64_t fair_key;           /* finish tag of its latest job (pd__submit's fair queueing) */
    pd_role role;                /* what its Auth granted (used while tokens are set) */
    int token;                   /* the index in conf.tokens of the token its Auth gave,
                                    or -1: no token (none sent yet, or none configured).
                                    A reload looks that token up in the new config
                                    (pd__auth_recheck), so no copy of it is kept here */
    uint64_t auth_failed_ms;     /* uv_now of a wrong token; 0 = none. Nothing more is
                                    read; the sweep answers and closes after the delay */
    uint64_t auth_failed_id;     /* that Auth request's id */
    size_t out_bytes;            /* answer bytes handed to uv_write, not yet called back */
    size_t buffered;             /* bytes counted against the server's buffer budget:
                                    read buffer allocated + answers not yet written */
    uint64_t frame_started_ms;   /* uv_now when the partial frame now buffered began;
                                    0 while no partial frame is buffered */
    unsigned reading : 1;        /* uv_read_start is in effect */
    unsigned paused : 1;         /* reading stopped for backpressure */
    unsigned full : 1;           /* reading stopped at its in-flight cap */
    unsigned lingering : 1;      /* error reply queued; input is discarded */
    unsigned shutdown_done : 1;  /* the write side has been shut down */
    unsigned closing : 1;        /* uv_close has been called */
    unsigned in_map : 1;
    unsigned dirty : 1;          /* on the server's dirty list */
    uv_shutdown_t shutdown_req;
    struct pd__watch *watches;   /* its open Watches (pd_watch.c); they keep it from
                                    counting as idle */
    uint32_t n_watches;          /* in that list: at most limits.max_watches_per_conn */
    pd__wire *wire;              /* NULL when it could not be made: answers go by the loop */
} pd__conn;

pd__wire *pd__wire_retain(pd__wire *w);  /* NULL-safe */
void pd__wire_release(pd__wire *w);      /* NULL-safe; any thread */
/* On a worker: writes what the socket takes of buf now, if the loop has
 * nothing queued; returns the bytes written (0: the loop sends it all).
 * weight is the in-flight slots of the job the answer is for. */
size_t pd__wire_try_send(pd__wire *w, const uint8_t *buf, size_t len, uint32_t weight);
/* Queues the rest of an answer a worker wrote in part, ahead of anything
 * queued since; takes ownership of buf. */
void pd__conn_send_rest(pd__conn *c, uint8_t *buf, size_t len);
/* The requests of c its client still waits for: its jobs in flight, less
 * the one whose answer a worker wrote whole before the loop took it back
 * (a wire goes only to a job submitted with nothing else in flight, so
 * there is at most one such job). Limits count these. */
uint32_t pd__conn_waiting(pd__conn *c);
/* The loop took back the job holding w, whose worker wrote its whole answer. */
void pd__wire_collected(pd__wire *w);

/* One queued write: the request and the answers it sends in one writev,
 * freed together in the write callback. */
typedef struct pd__write {
    uv_write_t req;
    uint32_t nbufs;
    size_t bytes;                /* what bufs hold, counted in the connection's out_bytes */
    size_t first_sent;           /* bytes of bufs[0]'s answer sent before: its malloc'd
                                    start is bufs[0].base - first_sent */
    uv_buf_t bufs[];
} pd__write;

typedef struct pd__watch_hub pd__watch_hub;

typedef struct pd__conn_map {
    pd__conn **slots;
    size_t n_slots;              /* power of two */
    size_t count;
} pd__conn_map;

struct pd_server {
    uv_loop_t *loop;
    pd_conf conf;                /* scalar settings only; scenes live in the registry */
    pd_registry *registry;
    pd_world_store *world_store; /* NULL: FindRoute is refused (pd_server_set_world_store) */
    pd_store *store;             /* every change goes through it: the registry, the world
                                    store and, once opened, the journal as its change log */
    pd_pool *pool;
    char *config_path;
    void (*adjust)(pd_conf *conf, void *user);
    void *adjust_user;

    uv_tcp_t listener;
    uv_async_t async;
    /* Answers queued during a loop iteration leave in one write per
     * connection: flushed right after the I/O callbacks (check) and, for
     * answers made in timers or deferred callbacks, before the loop sleeps
     * (prepare), as Redis writes its replies in beforeSleep. Both are
     * unreferenced: they never keep uv_run going. */
    uv_prepare_t flush_prepare;
    uv_check_t flush_check;
    uv_timer_t full_timer;       /* reads again from connections at their cap (pd__conn_full) */
    pd__conn *full;              /* connections not read because they are at their cap */
    pd__conn *dirty;             /* connections with answers pending, via next_dirty */
    uv_timer_t sweep_timer;
    uv_timer_t stop_timer;
    uv_signal_t sig_term, sig_int, sig_hup;
    uv_tcp_t spare;              /* accepts and closes one connection when memory is out */
    int spare_busy;
    int open_handles;            /* server-level handles not yet called back from uv_close */
    uint64_t sweep_interval_ms;

    atomic_int stop_requested;
    atomic_int reload_requested;
    struct pd__reload_job *reload;   /* the reload loading on the threadpool, or NULL */
    int reload_again;            /* a reload was asked for while one was loading */
    int loading;                 /* the start-up load (pd_server_load) is running */

    pd__conn_map map;
    pd__conn *conns;             /* every connection not yet freed */
    size_t n_conns;
    uint64_t next_conn_id;
    uint16_t port;
    uint16_t metrics_port;       /* the metrics port main.c bound (pd_server_set_metrics_port); 0: none */
    pd__phase phase;
    uint64_t started_ns;

    uint64_t requests_total;
    uint64_t overloaded_total;
    uint64_t malformed_total;
    uint64_t in_flight;
    uint64_t buffered_bytes;     /* sum of every connection's `buffered` */
    uint64_t shed_total;         /* connections closed to keep within the budget */
    uint64_t frame_timeouts_total;  /* connections closed for a frame too slow to arrive */
    uint64_t accept_errors_total;   /* accepts that failed (EMFILE...): the peer was reset */
    uint64_t accept_errors_logged;  /* accept_errors_total at the last log line */
    uint64_t accept_logged_ms;      /* uv_now of that line */
    pd__watch_hub *watch_hub;    /* subscriptions (pd_watch.c); NULL until the first Watch */
    uint64_t watch_events_total; /* watch frames queued for watchers */
    uint64_t watchers_dropped_total; /* watches ended by WATCH_OVERFLOW */
    uint64_t paths_found;        /* FindPath / FindRoute (Batch items too) answered OK or PARTIAL */
    uint64_t expansions_total;
    atomic_uint_fast32_t worker_retained_bytes; /* conf.worker_retained_bytes, for the
                                                   workers' trim (a reload may change it) */

    pd_journal *journal;         /* NULL: no data_dir (pd_server_open_journal) */
    uv_timer_t journal_timer;    /* the everysec fsync and the compaction check */
    int journal_jobs;            /* journal work on libuv's threadpool */
    int journal_syncing;         /* an everysec fsync is queued or running */
    int journal_compacting;      /* a compaction is queued or running */
    int journal_compact_wanted;  /* a reload built config scenes anew: compact as soon
                                    as no compaction runs (pd__journal_after_reload) */
    struct pd_query_scratch *inline_scratch;  /* the loop thread's, for the searches it
                                                 answers itself (pd__answer_inline);
                                                 made on first use, trimmed to
                                                 conf.worker_retained_bytes after each */
    struct pd_job *inline_job;   /* the loop's one job for FindPaths it may answer itself
                                    (pd__handle_job): no allocation per request */

    pd_metrics *metrics;         /* NULL: nothing is counted */
    int answering;               /* pd_request_kind of the frame being handled, or -1
                                    between frames (errors outside a request are not counted) */
    uint64_t answering_since_ns; /* that frame's arrival */
    pd__conn *answering_conn;    /* the connection that sent it, or NULL between frames:
                                    answers queued for it meanwhile carry their timing
                                    (pd__conn_send, pd__stamp_answer) */
    uint64_t answering_search_us; /* the search the loop ran for it (pd__answer_inline) */

    uint8_t discard[PD__DISCARD_BYTES];
    uint8_t shared_read[PD__SHARED_READ_BYTES];
};


/* pd_conn.c */
void pd__conn_close(pd__conn *c);
void pd__conn_closed(uv_handle_t *h);
void pd__conn_linger(pd__conn *c);
void pd__conn_read_stop(pd__conn *c);
/* A connection at its in-flight cap is not read until half of its
 * requests are answered (the completion calls this) or PD__FULL_PAUSE_MS
 * has passed, whichever comes first (see pd_conn.c). */
void pd__conn_unfull(pd__conn *c);
void pd__conn_send(pd__conn *c, uint8_t *buf, size_t len);
/* Adds Response.server_us (from arrival_ns, when the request's frame was
 * read, to now, rounded up to whole microseconds) and search_us to an
 * encoded answer (pd_codec_stamp_timing). Any thread. */
void pd__stamp_answer(uint8_t **buf, size_t *len, uint64_t arrival_ns, uint64_t search_us);
void pd__flush_all(pd_server *s);
void pd__conn_shutdown(pd__conn *c);
void pd__observe(pd_server *s, pd_status status);
void pd__on_connection(uv_stream_t *listener, int status);
void pd__send_error(pd__conn *c, uint64_t id, pd_status status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* STALE_VERSION with the scene's version now (Error.version). */
void pd__send_stale(pd__conn *c, uint64_t id, uint64_t version, const char *message);
/* "host:port" of c's peer, or "?" when the socket cannot tell. */
const char *pd__conn_peer(const pd__conn *c, char out[PD_CONF_MAX_ADDRESS]);

/* After a reload that built `built` config scenes anew: asks for a
 * compaction (see pd_journal_loop.c for why). */
void pd__journal_after_reload(pd_server *s, size_t built);

/* pd_watch.c: subscriptions to scenes' changes, all on the loop thread.
 * _publish hands a change to the scene's watchers (in version order, see
 * the file's top); _start and _stop answer Watch and Unwatch; a closed
 * or lingering connection's watches go with _conn_closed (no frame is
 * sent); a reload's changes are found
 * by comparing the watched scenes' snapshots around the publish
 * (_reload_begin before it, _reload_end after; both take NULL). */
void pd__watch_publish(pd_server *s, const pd_watch_event *ev);
void pd__watch_start(pd__conn *c, const pd_request *req);
void pd__watch_stop(pd__conn *c, const pd_request *req);
void pd__watch_conn_closed(pd__conn *c);
size_t pd__watch_count(const pd_server *s);
/* What publishing has cost since the hub was made, for tests: the
 * subscriptions announcements visited (only the event's scene's), and the
 * event bodies encoded (one per event, whatever its watchers). */
typedef struct pd__watch_work {
    uint64_t visits;
    uint64_t encodes;
} pd__watch_work;
pd__watch_work pd__watch_work_done(const pd_server *s);
void pd__watch_hub_free(pd_server *s);
typedef struct pd__watch_reload pd__watch_reload;
pd__watch_reload *pd__watch_reload_begin(pd_server *s);
void pd__watch_reload_end(pd_server *s, pd__watch_reload *rl);

/* pd_connmap.c */
int pd__map_grow(pd__conn_map *m);
int pd__map_insert(pd__conn_map *m, pd__conn *c);
pd__conn *pd__map_find(const pd__conn_map *m, uint64_t id);
void pd__map_remove(pd__conn_map *m, uint64_t id);

/* pd_server.c */
void pd__check_drained(pd_server *s);

/* pd_conn.c */
void pd__conn_account(pd__conn *c);

/* pd_dispatch.c */
void pd__dispatch_frame(pd__conn *c, const uint8_t *payload, size_t len, uint64_t arrival_ns);
/* Applies the worker settings of a reloaded conf to the pool (the yield
 * interval; the retained size is read by the workers themselves). */
void pd__dispatch_apply_conf(pd_server *s);
void pd__dispatch_completions(pd_server *s);
/* A reload's new tokens (next, before it becomes s->conf) applied to every
 * open connection: the role its token grants now; one whose role falls
 * keeps the lower one, or is answered UNAUTHENTICATED and closed when its
 * token grants nothing any more (a connection served while the server had
 * no tokens has none); one log line per change. */
void pd__auth_recheck(pd_server *s, const pd_conf *next);
void pd__dispatch_free_inline(pd_server *s);

/* pd_reload.c */
void pd__reload(pd_server *s);

/* pd_server.c */
void pd__fit_fd_limit(pd_conf *conf);
uint64_t pd__sweep_interval(const pd_conf *conf);

/* Hands the conf's caps on scenes made at run time (limits.max_scenes,
 * max_scene_cells, max_scene_bytes) to the registry; at start and on reload. */
void pd__server_scene_caps(pd_server *s);

#endif
