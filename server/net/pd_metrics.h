/*
 * pd_metrics.h - the daemon's Prometheus metrics: counters the event loop
 * bumps as it answers requests, and a renderer for the text exposition
 * format (version 0.0.4) that pd_http.h serves on its own port.
 *
 * Two kinds of numbers meet in one scrape. Counters that only the loop can
 * see (requests by type and status, latency histograms by kind and scene,
 * expansions, reloads, OVERLOADED answers by the limit that refused) live
 * here and are updated with the pd_metrics_observe* calls as each request
 * gets its final answer. Numbers that other parts already keep
 * (connections, in-flight, queue depth, worker time, uptime) are read at
 * scrape time into a pd_metrics_gauges, so nothing is counted twice. Scene
 * versions come straight from the registry.
 *
 * Scenes. A server may serve 100,000 scenes; a scrape gives series of
 * their own (requests, version, bytes, search) only to the
 * limits.metrics_scene_series (pd_metrics_set_scene_series) with the most
 * requests answered, and totals over all of them, so its size does not
 * grow with the scenes. The requests are counted per scene in a hash
 * index, O(1) per answer.
 *
 * Threads: a pd_metrics belongs to the loop thread: pd_metrics_observe*,
 * pd_metrics_snapshot_take and _free are called there, so the counters
 * need no locks. A scrape takes a snapshot on the loop (a copy of the
 * counters, and of the per-scene counts: O(scenes with requests), small
 * constant) and renders it on any thread (pd_metrics_snapshot_render: the
 * registry's listing, the top scenes' selection and the text), which is
 * how the HTTP responder keeps the loop free (pd_http.c).
 */
#ifndef PD_METRICS_H
#define PD_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "pd_codec.h"
#include "pd_request.h"
#include "pd_scene.h"
#include "pd_status.h"

/* Requests are counted in pathd_requests_total{type=...} by their kind
 * (pd_request.h, the one list of kinds); PD_REQ_NONE, type "unknown", is a
 * frame that never decoded into a request (malformed, too large). */

/* Latency buckets, upper bounds in microseconds: a 1-2.5-5 series from
 * 100 us (a short path on a warm worker) to 10 s (far beyond any sensible
 * deadline), 16 buckets plus +Inf. */
#define PD_METRICS_LATENCY_BUCKETS 16

/* Distinct scene label values the latency histograms keep, in the order
 * scenes are first observed; later names (a config that grows, instances
 * made at run time) share the series scene="other". Keeps a scrape bounded:
 * at most kinds x (this + 2) series of 19 lines each. */
#define PD_METRICS_MAX_SCENE_LABELS 32

/* Scenes with series of their own (pathd_scene_requests_total,
 * pathd_scene_version, pathd_scene_bytes, pathd_scene_search) when
 * pd_metrics_set_scene_series was not called: limits.metrics_scene_series'
 * default. */
#define PD_METRICS_DEFAULT_SCENE_SERIES 100

/* Longest escaped label value the renderer writes, in bytes incl. NUL: a
 * scene name (PD_CONF_MAX_NAME) or version string where every byte needs a
 * two-byte escape. Longer values are cut at a character boundary. */
#define PD_METRICS_MAX_LABEL (2 * PD_CONF_MAX_NAME)

/* Values read at scrape time from the server and the worker pool. */
typedef struct pd_metrics_gauges {
    uint64_t uptime_ms;          /* since the server started */
    uint64_t connections;        /* client connections open now */
    uint64_t in_flight;          /* requests handed to workers, not yet answered */
    uint64_t queue_depth;        /* jobs waiting for a worker */
    uint32_t worker_threads;
    uint64_t worker_busy_ns;     /* time workers spent on jobs, summed over threads */
    uint64_t worker_context_bytes;     /* search memory the workers hold, summed */
    uint64_t worker_context_bytes_max; /* the most one worker holds (at most
                                          limits.worker_retained_bytes between tasks) */
    uint64_t buffered_bytes;     /* input and output held for all connections */
    uint64_t buffer_budget_bytes;
    uint64_t connections_shed;   /* total closed to keep within the budget */
    uint64_t frame_timeouts;     /* total closed for a frame too slow to arrive */
    uint64_t accept_errors;      /* total accepts that failed */
    uint64_t watchers;           /* Watches open now */
    uint64_t watch_events;       /* total watch frames queued for watchers */
    uint64_t watchers_dropped;   /* total watches ended by WATCH_OVERFLOW */
    int journal;                 /* 1: a journal (data_dir) is open; the three below count */
    uint64_t journal_log_bytes;  /* its current log */
    uint64_t journal_snapshot_bytes;
    int journal_failed;          /* a write failed: changes are refused */
    char *replica_text;          /* a replica's families (pd_replica.c), malloc'd, rendered as
                                    they are; the snapshot taken with these gauges frees it */
} pd_metrics_gauges;

/* Fills *out (zeroed by the caller) when a scrape arrives; runs on the loop
 * thread, so it may call loop-only functions such as pd_server_get_stats. */
typedef void (*pd_metrics_gauges_fn)(void *user, pd_metrics_gauges *out);

typedef struct pd_metrics pd_metrics;

/* version is copied; it is reported as pathd_build_info{version="..."} 1.
 * NULL gives "unknown". Returns NULL on allocation failure. */
pd_metrics *pd_metrics_create(const char *version);
void pd_metrics_destroy(pd_metrics *m);   /* NULL is a no-op */

/* Counts one request answered with status, refusals included. expansions
 * adds to pathd_expansions_total. m == NULL is a no-op (here and in every
 * pd_metrics_observe_*), so code paths without metrics (tests of the server
 * alone) need no checks. An out-of-range type counts as PD_REQ_NONE
 * ("unknown"); an out-of-range status, or PD_BUFFER_TOO_SMALL (never an
 * answer), counts as INTERNAL. */
void pd_metrics_observe(pd_metrics *m, pd_request_kind type, pd_status status, uint64_t expansions);

/* One answered piece of work into pathd_request_duration_seconds{kind,
 * scene}: a request the server accepted, queued and answered from a worker
 * (whatever the answer: NO_PATH and DEADLINE_EXCEEDED took work too).
 * Refusals at the door (OVERLOADED, bad arguments, unknown scenes, also
 * when a worker finds the scene unknown) are never observed here, so they
 * cannot pull the latency down nor take a scene label. scene is the
 * request's scene (FindRoute: its start scene; a Batch over several served
 * scenes: NULL, labelled "mixed"); see PD_METRICS_MAX_SCENE_LABELS for the
 * cap. */
void pd_metrics_observe_duration(pd_metrics *m, pd_request_kind kind, const char *scene, uint64_t latency_us);

/* The limits an OVERLOADED answer names (label `limit`). */
typedef enum pd_metrics_limit {
    PD_METRICS_LIMIT_CONNECTIONS = 0,  /* limits.max_connections */
    PD_METRICS_LIMIT_CONN_IN_FLIGHT,   /* limits.max_inflight_per_conn */
    PD_METRICS_LIMIT_JOB_QUEUE,        /* limits.job_queue_capacity */
    PD_METRICS_LIMIT__COUNT
} pd_metrics_limit;

/* The label value of a limit ("connections", "in_flight_per_connection",
 * "job_queue"); "unknown" out of range. */
const char *pd_metrics_limit_name(pd_metrics_limit limit);

/* One OVERLOADED answer, by the limit that refused. */
void pd_metrics_observe_overloaded(pd_metrics *m, pd_metrics_limit limit);

/* How a reload ended (label `result`). */
typedef enum pd_metrics_reload_result {
    PD_METRICS_RELOAD_SUCCESS = 0,     /* scenes and world published */
    PD_METRICS_RELOAD_FAILURE,         /* refused: the running set stays */
    PD_METRICS_RELOAD__COUNT
} pd_metrics_reload_result;

/* One finished reload at unix_seconds (wall clock): counted by result, and
 * the time of the last reload and of the last one that published. */
void pd_metrics_observe_reload(pd_metrics *m, pd_metrics_reload_result result, double unix_seconds);

/* The config scenes the last published reload kept as they were served
 * (definition unchanged) and built anew. */
void pd_metrics_set_reload_scenes(pd_metrics *m, size_t kept, size_t built);

/* How many scenes get series of their own: the n with the most requests
 * answered (ties: the first by name); 0 gives the totals only. */
void pd_metrics_set_scene_series(pd_metrics *m, uint32_t n);

/* The scene was dropped: its request count joins pathd_scene_requests_other
 * and its entry goes (a scene made again under the name counts anew). */
void pd_metrics_forget_scene(pd_metrics *m, const char *scene);

/* What one scrape renders, taken on the loop thread. */
typedef struct pd_metrics_snapshot pd_metrics_snapshot;

/* Copies m's counters and per-scene counts, gauges (NULL: leave out the
 * families it feeds) and the registry to read at render time (NULL: leave
 * out the scene families). NULL on allocation failure. Loop thread. */
pd_metrics_snapshot *pd_metrics_snapshot_take(pd_metrics *m, const pd_metrics_gauges *gauges,
                                              pd_registry *registry);

/* Renders snap in the text format 0.0.4, every family with one HELP and
 * one TYPE line; any thread, while m and the registry live. On success
 * returns 0 and a malloc'd, NUL-terminated text in *out (the caller frees
 * it) of *len bytes; on allocation failure -1 and *out = NULL. */
int pd_metrics_snapshot_render(const pd_metrics_snapshot *snap, char **out, size_t *len);

/* Loop thread, after the render. NULL is a no-op. */
void pd_metrics_snapshot_free(pd_metrics_snapshot *snap);

/* Take, render and free on the calling (loop) thread. */
int pd_metrics_render(pd_metrics *m, const pd_metrics_gauges *gauges, pd_registry *registry, char **out,
                      size_t *len);

/* Tests: hook runs at the start of every render, on the thread that
 * renders (a gate that holds a scrape while the loop is watched). */
typedef void (*pd_metrics_render_hook)(void *user);
void pd_metrics_set_render_hook(pd_metrics *m, pd_metrics_render_hook hook, void *user);

/* Writes in as a label value escaped for the text format (backslash, double
 * quote and newline become \\, \" and \n) into out, always NUL-terminated;
 * a value that does not fit is cut before the escape that would overflow.
 * Returns the length written. The renderer uses it for scene names and the
 * version; it is public so the rule can be tested on any input. */
size_t pd_metrics_escape_label(const char *in, char *out, size_t cap);

#endif
