/*
 * pd_conn.h - the connection as a transport (pd_conn.c): accepting, reading
 * and framing, queueing answers with backpressure, the socket it shares with
 * workers, lingering close. It calls up only through the hooks the server
 * sets in its table (pd__conn_hooks), as a libuv stream calls its read
 * callback: it calls no function of pd_dispatch.c, pd_watchers.c or
 * pd_server.c.
 */
#ifndef PD_CONN_H
#define PD_CONN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <uv.h>

#include "pd_connmap.h"
#include "pd_frame.h"
#include "pd_server.h"

/* Input from a connection that is closing is read into this and dropped. */
#define PD__DISCARD_BYTES 4096

/* One read call takes up to this much from a connection with no partial
 * frame buffered, into a buffer the server shares between connections
 * (pd_frame_reader_lend): libuv's suggested size, about 1,500 trivial
 * requests, where a connection's own buffer starts at 512 bytes. */
#define PD__SHARED_READ_BYTES 65536

/* A pipelining connection's answers are written together (pd__flush_due):
 * held while it has more jobs in flight, for at most PD__HOLD_NS after
 * the first of them was queued and PD__HOLD_BYTES, so that a burst of
 * answers leaves in one or two writes, as Redis writes a pipeline's
 * replies, and its client is woken once for them, not once per worker
 * hand-over. PD__HOLD_TIMER_MS bounds the hold when nothing else wakes
 * the loop (libuv's timers count whole milliseconds). */
#define PD__HOLD_NS 200000u
#define PD__HOLD_BYTES 65536u
#define PD__HOLD_TIMER_MS 1u

/* Longest error text sent to a client, in bytes. */
#define PD__MESSAGE_MAX 256

struct pd__watch;

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

struct pd__conn {
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
    uint64_t pend_since_ns;      /* pd_pool_now_ns when the first of them was queued */
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
    struct pd__watch *watches;   /* its open Watches (pd_watchers.c); they keep it from
                                    counting as idle */
    uint32_t n_watches;          /* in that list: at most limits.max_watches_per_conn */
    pd__wire *wire;              /* NULL when it could not be made: answers go by the loop */
};

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

/* What a connection calls up to, set by the server in its table before it
 * listens; every connection it accepts follows them. */
typedef struct pd__conn_hooks {
    /* A whole frame arrived (payload without its header); arrival_ns is
     * when the read that brought it began. */
    void (*on_frame)(pd__conn *c, const uint8_t *payload, size_t len, uint64_t arrival_ns);
    /* c lingers after an error reply: it takes no more requests, so what
     * it holds open above the transport (its watches) ends now. */
    void (*on_linger)(pd__conn *c);
    /* c has left the table (n_conns counts it no more) and is freed when
     * this returns. */
    void (*on_close)(pd__conn *c);
} pd__conn_hooks;

/* The connection table: the server's part that pd_conn.c owns. */
typedef struct pd__conn_table {
    pd__conn_hooks hooks;
    pd__conn_map map;
    pd__conn *conns;             /* every connection not yet freed */
    size_t n_conns;
    uint64_t next_conn_id;
    uv_timer_t full_timer;       /* reads again from connections at their cap (pd__conn_full) */
    pd__conn *full;              /* connections not read because they are at their cap */
    pd__conn *dirty;             /* connections with answers pending, via next_dirty */
    pd__conn *held;              /* pd__flush_due's held connections while it writes */
    uv_timer_t hold_timer;       /* writes held answers when nothing else does (pd__flush_due) */
    uv_tcp_t spare;              /* accepts and closes one connection when memory is out */
    int spare_busy;
    uint64_t buffered_bytes;     /* sum of every connection's `buffered` */
    uint64_t shed_total;         /* connections closed to keep within the budget */
    uint64_t accept_errors_total;   /* accepts that failed (EMFILE...): the peer was reset */
    uint64_t accept_errors_logged;  /* accept_errors_total at the last log line */
    uint64_t accept_logged_ms;      /* uv_now of that line */
    uint8_t discard[PD__DISCARD_BYTES];
    uint8_t shared_read[PD__SHARED_READ_BYTES];
} pd__conn_table;

void pd__on_connection(uv_stream_t *listener, int status);
void pd__conn_close(pd__conn *c);
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
/* Writes every connection's pending answers (a stop's flush, the hold
 * timer). */
void pd__flush_all(pd_server *s);
/* The flush handles' write: every connection's pending answers but those
 * held for a pipelining connection (PD__HOLD_NS above); when any is held,
 * starts the hold timer, which writes them if nothing else has. */
void pd__flush_due(pd_server *s);
void pd__conn_shutdown(pd__conn *c);
void pd__conn_account(pd__conn *c);
void pd__observe(pd_server *s, pd_status status);
void pd__send_error(pd__conn *c, uint64_t id, pd_status status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* STALE_VERSION with the scene's version now (Error.version). */
void pd__send_stale(pd__conn *c, uint64_t id, uint64_t version, const char *message);
/* "host:port" of c's peer, or "?" when the socket cannot tell. */
const char *pd__conn_peer(const pd__conn *c, char out[PD_CONF_MAX_ADDRESS]);

#endif
