/*
 * pd_dispatch.h - a frame's way through the server (pd_dispatch.c):
 * decode, answer or submit a job to the pool, and the completions. Calls
 * down to the connection (pd_conn.h) and the watchers (pd_watchers.h); the
 * things it needs of the server (a reload, the stats, the serving state) it asks through
 * the hooks the server sets in its part (pd__dispatch_up).
 */
#ifndef PD_DISPATCH_H
#define PD_DISPATCH_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "pd_conn.h"

struct pd_query_scratch;

/* What dispatch asks of the server, set by pd_server_create. */
typedef struct pd__dispatch_up {
    void (*reload)(pd_server *s);                        /* a Reload request */
    void (*stats)(pd_server *s, pd_server_stats *out);   /* a Stats request */
    pd_serving (*serving)(pd_server *s);                 /* Ping's Pong.serving; DRAINING
                                                            refuses new requests */
} pd__dispatch_up;

/* The dispatch state: the server's part that pd_dispatch.c owns. The
 * connection reads the frame being answered (answering*: an answer to it
 * gets its timing, an error is counted under its kind) and counts the
 * refusals it makes itself (pd__send_error's OVERLOADED, a frame too
 * large) in overloaded_total and malformed_total. */
typedef struct pd__dispatch_state {
    pd__dispatch_up up;
    uint64_t requests_total;
    uint64_t overloaded_total;
    uint64_t malformed_total;
    uint64_t draining_refused;   /* new requests answered DRAINING in this drain (pd_server.c
                                    logs it when the drain ends and clears it) */
    uint64_t in_flight;
    uint64_t paths_found;        /* FindPath / FindRoute (Batch items too) answered OK or PARTIAL */
    uint64_t expansions_total;
    atomic_uint_fast32_t worker_retained_bytes; /* conf.worker_retained_bytes, for the
                                                   workers' trim (a reload may change it) */
    struct pd_query_scratch *inline_scratch;  /* the loop thread's, for the searches it
                                                 answers itself (pd__answer_inline);
                                                 made on first use, trimmed to
                                                 conf.worker_retained_bytes after each */
    struct pd_job *inline_job;   /* the loop's one job for FindPaths it may answer itself
                                    (pd__handle_job): no allocation per request */
    uint8_t *full_refusal;       /* the OVERLOADED answer to a request past its connection's
                                    in-flight cap, encoded once without its id
                                    (pd__refused_unpacked); made on first use */
    size_t full_refusal_len;
    uint32_t full_refusal_waiting; /* the count of requests in flight its message names */
    int answering;               /* pd_request_kind of the frame being handled, or -1
                                    between frames (errors outside a request are not counted) */
    uint64_t answering_since_ns; /* that frame's arrival */
    pd__conn *answering_conn;    /* the connection that sent it, or NULL between frames:
                                    answers queued for it meanwhile carry their timing
                                    (pd__conn_send, pd__stamp_answer) */
    uint64_t answering_search_us; /* the search the loop ran for it (pd__answer_inline) */
    const uint8_t *frame;        /* the frame being handled (valid during the call), which a
                                    replica behind its min_version parks (pd_replica.h) */
    size_t frame_len;
    uint64_t frame_arrival_ns;
    uint64_t park_deadline_ns;   /* a parked frame dispatched again: its wait's end; else 0 */
} pd__dispatch_state;

/* The connections' on_frame hook. */
void pd__dispatch_frame(pd__conn *c, const uint8_t *payload, size_t len, uint64_t arrival_ns);
/* A frame a replica parked (pd_replica.c), dispatched again: answered if
 * its scene caught up, parked again until deadline_ns, then STALE_VERSION. */
void pd__dispatch_parked(pd__conn *c, const uint8_t *payload, size_t len, uint64_t arrival_ns,
                         uint64_t deadline_ns);
/* The pool (pd_server_pool_create): workers with a query scratch each, that
 * call wake(wake_arg) when a job completes. */
pd_pool *pd__dispatch_pool_create(pd_server *s, uint32_t threads, pd_pool_wake_fn wake, void *wake_arg);
/* Destroys such a pool and frees the jobs it still held. */
void pd__dispatch_pool_destroy(pd_pool *pool);
/* Applies the worker settings of a reloaded conf to the pool (the yield
 * interval; the retained size is read by the workers themselves). */
void pd__dispatch_apply_conf(pd_server *s);
/* Takes the pool's finished jobs and answers them; returns how many. */
size_t pd__dispatch_completions(pd_server *s);
/* The reservation tables idle since their last ReservePath (pd_scene_reserve.h,
 * "Expiry of idle scenes"): one sweep task into each one's scene lane, at
 * most PD__RESERVE_SWEEPS_PER_TICK a call (the rest at the next). Called
 * from the server's periodic timer. */
void pd__dispatch_reserve_sweep(pd_server *s);
/* A reload's new tokens (next, before it becomes s->conf) applied to every
 * open connection: the role its token grants now; one whose role falls
 * keeps the lower one, or is answered UNAUTHENTICATED and closed when its
 * token grants nothing any more (a connection served while the server had
 * no tokens has none); one log line per change. */
void pd__auth_recheck(pd_server *s, const pd_conf *next);
void pd__dispatch_free_inline(pd_server *s);

#endif
