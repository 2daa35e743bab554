/*
 * pd_server_internal.h - the server struct: the lifecycle fields pd_server.c
 * owns (the loop, the config, the server's own handles, the stop phases)
 * and one part per file that owns it, each declared in that file's header
 * with the file's functions: the connection table (pd_conn.h), the
 * dispatch state (pd_dispatch.h), the watch state (pd_watchers.h), the
 * reload state (pd_reload.h), the journal state (pd_journal_loop.h) and
 * the agent-check port (pd_agent_check.h).
 * Not for use outside server/net.
 *
 * The net layer's calls go one way (docs/ARCHITECTURE.md, "The one-way
 * net"): pd_server.c calls every file below it; pd_dispatch.c calls the
 * watchers and the connection; the watchers call the connection; the
 * connection, the reload and the journal loop call nothing above them (the
 * connection calls up through its hooks, the reload and the dispatcher
 * through callbacks the server sets).
 */
#ifndef PD_SERVER_INTERNAL_H
#define PD_SERVER_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>
#include <uv.h>

#include "pd_agent_check.h"
#include "pd_conn.h"
#include "pd_connmap.h"
#include "pd_dispatch.h"
#include "pd_journal_loop.h"
#include "pd_reload.h"
#include "pd_server.h"
#include "pd_watchers.h"

typedef enum pd__phase {
    PD__RUNNING = 0,
    PD__DRAINING,
    PD__CANCELLING,
    PD__FLUSHING,
    PD__CLOSED,
} pd__phase;

/* What the start-up load reports to pd_server_load, which waits for it. */
typedef struct pd__initial_load {
    int done;
    int result;                  /* pd_server_load's return value */
    char *err;
    size_t errlen;
} pd__initial_load;

struct pd_server {
    /* ---- the lifecycle: pd_server.c ---- */
    uv_loop_t *loop;
    pd_conf conf;                /* scalar settings only; scenes live in the registry.
                                    Applied in one place: pd__server_apply (pd_server.c) */
    pd_registry *registry;
    pd_world_store *world_store; /* NULL: FindRoute is refused (pd_server_set_world_store) */
    pd_store *store;             /* every change goes through it: the registry, the world
                                    store and, once opened, the journal as its change log */
    pd_pool *pool;
    pd_metrics *metrics;         /* NULL: nothing is counted */
    char *config_path;

    uv_tcp_t listener;
    uv_async_t async;            /* stop and reload requests from other threads */
    /* Completions (pd_server_wake): a worker that has put results on the
     * pool's list wakes the loop through wake_fd (an eventfd watched by
     * wake_poll) only while loop_asleep says the loop is past its last look
     * at that list (its prepare phase) and no wake is outstanding
     * (wake_sent): a loop that is awake takes them in its check or prepare
     * phase anyway. Not uv_async_send: libuv 1.44's async callback spins,
     * then calls sched_yield, while the sender is still inside its write to
     * the eventfd, and under a pipelined load that was about a fifth of the
     * loop thread's time (issue 30, item 6). */
    uv_poll_t wake_poll;
    int wake_fd;                 /* -1 until made */
    atomic_int loop_asleep;
    atomic_int wake_sent;
    int loop_fd;                 /* uv_backend_fd: the workers' yield check polls it */
    /* Answers queued during a loop iteration leave in one write per
     * connection: flushed right after the I/O callbacks (check) and, for
     * answers made in timers or deferred callbacks, before the loop sleeps
     * (prepare), as Redis writes its replies in beforeSleep. Both are
     * unreferenced: they never keep uv_run going. */
    uv_prepare_t flush_prepare;
    uv_check_t flush_check;
    uv_timer_t sweep_timer;
    uv_timer_t stop_timer;
    uv_signal_t sig_term, sig_int, sig_hup;
    uv_signal_t sig_usr1, sig_usr2; /* drain, and back to ready (pd__server_drain) */
    int open_handles;            /* server-level handles not yet called back from uv_close */
    uint64_t sweep_interval_ms;

    atomic_int stop_requested;
    atomic_int reload_requested;
    int loading;                 /* the start-up load (pd_server_load) or the journal's
                                    replay is running */
    pd__initial_load *initial;   /* what pd_server_load waits for, while it waits */

    uint16_t port;
    uint16_t metrics_port;       /* the metrics port main.c bound (pd_server_set_metrics_port); 0: none */
    pd__phase phase;
    /* What Pong.serving and the agent-check port say, decided in one place
     * (pd__server_serving): */
    int draining;                /* SIGUSR1 until SIGUSR2: new requests (but Ping, Cancel,
                                    Unwatch) are answered DRAINING, the agent says "drain" */
    uint64_t started_ns;
    uint64_t frame_timeouts_total;  /* connections closed for a frame too slow to arrive */

    /* ---- the parts, each owned by one file ---- */
    pd__conn_table table;        /* pd_conn.c */
    pd__dispatch_state dispatch; /* pd_dispatch.c */
    pd__watch_state watch;       /* pd_watchers.c */
    pd__reloader reload;         /* pd_reload.c */
    pd__journal_state journal;   /* pd_journal_loop.c */
    struct pd_replica *replica;  /* pd_replica.c: the tail of a Redis log, or NULL */
    pd__agent_state agent;       /* pd_agent_check.c */
};

#endif
