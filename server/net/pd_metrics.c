/*
 * pd_metrics.c - request counters and the Prometheus text renderer.
 *
 * Counters are plain integers owned by the loop thread (see pd_metrics.h).
 * The renderer writes every (type, status) pair, zeros included, so a
 * series exists from the first scrape and rate() never starts from a gap.
 * Fractional seconds are printed from integer micro- or nanoseconds with a
 * fixed number of decimals, so sums are exact and never show as 1e-05.
 */
#include "pd_metrics.h"

#include "pd_fileio.h"
#include "pd_index.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* Longest version string kept, in bytes incl. NUL: release and git
 * describe strings are far shorter. */
#define PD__METRICS_MAX_VERSION 64
/* First size of the render buffer, in bytes: a default scrape (the request
 * series, a few histograms, a few scenes) fits without growing. */
#define PD__METRICS_RENDER_INITIAL (64u * 1024u)

static const uint64_t pd__latency_bounds_us[PD_METRICS_LATENCY_BUCKETS] = {
    100, 250, 500,
    1000, 2500, 5000,
    10000, 25000, 50000,
    100000, 250000, 500000,
    1000000, 2500000, 5000000,
    10000000,
};

/* Scene label slots: the first PD_METRICS_MAX_SCENE_LABELS names seen,
 * then "other", then "mixed" (a Batch over several scenes). */
#define PD__SLOT_OTHER PD_METRICS_MAX_SCENE_LABELS
#define PD__SLOT_MIXED (PD_METRICS_MAX_SCENE_LABELS + 1)
#define PD__SLOTS (PD_METRICS_MAX_SCENE_LABELS + 2)

typedef struct pd__histogram {
    uint64_t buckets[PD_METRICS_LATENCY_BUCKETS]; /* per bucket, not cumulative */
    uint64_t count;                               /* includes values above 10 s */
    uint64_t sum_us;
} pd__histogram;

/* The counters a scrape renders, copied whole into its snapshot. */
typedef struct pd__counters {
    char version[PD__METRICS_MAX_VERSION];
    uint64_t requests[PD_REQ__COUNT][PD_STATUS_COUNT];
    pd__histogram durations[PD_REQ__COUNT][PD__SLOTS];
    char scenes[PD_METRICS_MAX_SCENE_LABELS][PD_CONF_MAX_NAME];
    size_t n_scenes;
    uint64_t expansions;
    uint64_t overloaded[PD_METRICS_LIMIT__COUNT];
    uint64_t reloads[PD_METRICS_RELOAD__COUNT];
    double last_reload_s;                         /* 0: none yet */
    double last_reload_success_s;
    uint64_t last_reload_kept;                    /* config scenes the last published reload kept */
    uint64_t last_reload_built;                   /* and those it built anew */
} pd__counters;

/* One scene's requests answered (pd_metrics_observe_duration with its
 * name). Snapshots copy these entries and read the names off the loop, so
 * a name is freed only once no snapshot is out (the graveyard). */
typedef struct pd__scene_count {
    char *name;
    uint64_t requests;
} pd__scene_count;

struct pd_metrics {
    pd__counters c;
    uint32_t scene_series;                        /* limits.metrics_scene_series */
    pd__scene_count *counts;                      /* every scene with answered requests */
    size_t n_counts, cap_counts;
    uint32_t *count_index;                        /* pd_index over counts[] */
    size_t count_index_cap;
    uint64_t forgotten;                           /* requests of the scenes forgotten since */
    char **graveyard;                             /* forgotten names a snapshot may read */
    size_t n_graveyard, cap_graveyard;
    unsigned snapshots_out;                       /* taken and not freed yet */
    struct pd_metrics_snapshot *spare;            /* the last one freed, for the next scrape: the
                                                     counters are ~130 KiB, and a fresh
                                                     allocation that size faults its pages in */
    pd_metrics_render_hook render_hook;           /* tests: runs where a scrape is rendered */
    void *render_hook_user;
};

struct pd_metrics_snapshot {
    pd_metrics *m;
    pd__counters c;
    int has_gauges;
    pd_metrics_gauges gauges;
    pd_registry *registry;
    uint32_t scene_series;
    pd__scene_count *counts;                      /* names shared with m (see the graveyard) */
    size_t n_counts;
    uint64_t forgotten;
    pd_metrics_render_hook render_hook;
    void *render_hook_user;
};

static const char *const pd__limit_names[PD_METRICS_LIMIT__COUNT] = {
    "connections",
    "in_flight_per_connection",
    "job_queue",
};

static const char *const pd__reload_names[PD_METRICS_RELOAD__COUNT] = {
    "success",
    "failure",
};

pd_metrics *pd_metrics_create(const char *version)
{
    pd_metrics *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    snprintf(m->c.version, sizeof m->c.version, "%s", version ? version : "unknown");
    m->scene_series = PD_METRICS_DEFAULT_SCENE_SERIES;
    return m;
}

static void pd__graveyard_empty(pd_metrics *m)
{
    for (size_t i = 0; i < m->n_graveyard; i++)
        free(m->graveyard[i]);
    m->n_graveyard = 0;
}

void pd_metrics_destroy(pd_metrics *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_counts; i++)
        free(m->counts[i].name);
    free(m->counts);
    free(m->count_index);
    pd__graveyard_empty(m);
    free(m->graveyard);
    free(m->spare);
    free(m);
}

void pd_metrics_set_scene_series(pd_metrics *m, uint32_t n)
{
    if (m)
        m->scene_series = n;
}

void pd_metrics_set_render_hook(pd_metrics *m, pd_metrics_render_hook hook, void *user)
{
    m->render_hook = hook;
    m->render_hook_user = user;
}

/* Statuses that are ever an answer (pd_status_is_answer). */
static int pd__status_reported(unsigned status)
{
    return pd_status_is_answer(status);
}

void pd_metrics_observe(pd_metrics *m, pd_request_kind type, pd_status status, uint64_t expansions)
{
    if (!m)
        return;
    if ((unsigned)type >= PD_REQ__COUNT)
        type = PD_REQ_NONE;
    if (!pd__status_reported((unsigned)status))
        status = PD_INTERNAL;
    m->c.requests[type][status]++;
    m->c.expansions += expansions;
}

/* The histogram slot of a scene name: its own while fewer than the cap
 * have been seen, else "other". A linear scan: 32 short names. */
static size_t pd__scene_slot(pd__counters *m, const char *scene)
{
    if (!scene)
        return PD__SLOT_MIXED;
    for (size_t i = 0; i < m->n_scenes; i++)
        if (strncmp(m->scenes[i], scene, PD_CONF_MAX_NAME) == 0)
            return i;
    if (m->n_scenes == PD_METRICS_MAX_SCENE_LABELS)
        return PD__SLOT_OTHER;
    snprintf(m->scenes[m->n_scenes], PD_CONF_MAX_NAME, "%s", scene);
    return m->n_scenes++;
}

/* ---- per-scene request counts ------------------------------------------- */

static const char *pd__count_name(const void *counts, uint32_t e)
{
    return ((const pd__scene_count *)counts)[e].name;
}

/* The index slot of scene in m's counts (or the empty one where it would
 * go); m->count_index_cap > 0. */
static size_t pd__count_slot(const pd_metrics *m, const char *scene)
{
    return pd_index_slot(m->count_index, m->count_index_cap, scene, pd__count_name, m->counts, NULL);
}

/* One more request of scene: O(1) on average, however many scenes have
 * counts. Without the memory for a new scene's entry it is not counted. */
static void pd__count_request(pd_metrics *m, const char *scene)
{
    if (m->count_index_cap > 0) {
        uint32_t e = m->count_index[pd__count_slot(m, scene)];
        if (e) {
            m->counts[e - 1].requests++;
            return;
        }
    }
    if (m->n_counts == m->cap_counts) {
        size_t cap = m->cap_counts ? 2 * m->cap_counts : PD_INDEX_MIN_CAP;
        pd__scene_count *grown = realloc(m->counts, cap * sizeof *grown);
        if (!grown)
            return;
        m->counts = grown;
        m->cap_counts = cap;
    }
    if ((m->n_counts + 1) * 2 > m->count_index_cap) {
        size_t icap = pd_index_cap_for(m->n_counts + 1);
        uint32_t *index = pd_index_build(icap, m->n_counts, pd__count_name, m->counts, NULL);
        if (!index)
            return;
        free(m->count_index);
        m->count_index = index;
        m->count_index_cap = icap;
    }
    char *name = strdup(scene);
    if (!name)
        return;
    m->counts[m->n_counts] = (pd__scene_count){name, 1};
    m->count_index[pd__count_slot(m, scene)] = (uint32_t)(m->n_counts + 1);
    m->n_counts++;
}

void pd_metrics_forget_scene(pd_metrics *m, const char *scene)
{
    if (!m || !scene || m->count_index_cap == 0)
        return;
    size_t slot = pd__count_slot(m, scene);
    uint32_t e = m->count_index[slot];
    if (!e)
        return;
    pd__scene_count gone = m->counts[e - 1];
    m->forgotten += gone.requests;
    pd_index_remove(m->count_index, m->count_index_cap, slot, pd__count_name, m->counts);
    size_t last = m->n_counts - 1;
    if (e - 1 != last) {
        /* The last entry takes the hole. */
        m->count_index[pd__count_slot(m, m->counts[last].name)] = e;
        m->counts[e - 1] = m->counts[last];
    }
    m->n_counts--;
    if (m->snapshots_out == 0) {
        free(gone.name);
        return;
    }
    if (m->n_graveyard == m->cap_graveyard) {
        size_t cap = m->cap_graveyard ? 2 * m->cap_graveyard : 16;
        char **grown = realloc(m->graveyard, cap * sizeof *grown);
        if (!grown) {
            /* A snapshot may still read the name: keep it rather than free it. */
            return;
        }
        m->graveyard = grown;
        m->cap_graveyard = cap;
    }
    m->graveyard[m->n_graveyard++] = gone.name;
}

void pd_metrics_observe_duration(pd_metrics *m, pd_request_kind kind, const char *scene, uint64_t latency_us)
{
    if (!m)
        return;
    if ((unsigned)kind >= PD_REQ__COUNT)
        kind = PD_REQ_NONE;
    pd__histogram *h = &m->c.durations[kind][pd__scene_slot(&m->c, scene)];
    for (size_t i = 0; i < PD_METRICS_LATENCY_BUCKETS; i++) {
        if (latency_us <= pd__latency_bounds_us[i]) {
            h->buckets[i]++;
            break;
        }
    }
    h->count++;
    h->sum_us += latency_us;
    if (scene)
        pd__count_request(m, scene);
}

const char *pd_metrics_limit_name(pd_metrics_limit limit)
{
    return (unsigned)limit < PD_METRICS_LIMIT__COUNT ? pd__limit_names[limit] : "unknown";
}

void pd_metrics_observe_overloaded(pd_metrics *m, pd_metrics_limit limit)
{
    if (m && (unsigned)limit < PD_METRICS_LIMIT__COUNT)
        m->c.overloaded[limit]++;
}

void pd_metrics_observe_reload(pd_metrics *m, pd_metrics_reload_result result, double unix_seconds)
{
    if (!m || (unsigned)result >= PD_METRICS_RELOAD__COUNT)
        return;
    m->c.reloads[result]++;
    m->c.last_reload_s = unix_seconds;
    if (result != PD_METRICS_RELOAD_FAILURE)
        m->c.last_reload_success_s = unix_seconds;
}

void pd_metrics_set_reload_scenes(pd_metrics *m, size_t kept, size_t built)
{
    if (!m)
        return;
    m->c.last_reload_kept = kept;
    m->c.last_reload_built = built;
}

size_t pd_metrics_escape_label(const char *in, char *out, size_t cap)
{
    size_t n = 0;
    if (cap == 0)
        return 0;
    for (const char *p = in ? in : ""; *p; p++) {
        char esc = 0;
        if (*p == '\\')
            esc = '\\';
        else if (*p == '"')
            esc = '"';
        else if (*p == '\n')
            esc = 'n';
        size_t need = esc ? 2 : 1;
        if (n + need >= cap)
            break;
        if (esc) {
            out[n++] = '\\';
            out[n++] = esc;
        } else {
            out[n++] = *p;
        }
    }
    out[n] = '\0';
    return n;
}

/* ---- text builder ------------------------------------------------------- */

/* An append-only buffer that remembers an allocation failure, so the
 * renderer can write straight through and check once at the end. */
typedef struct pd__text {
    char *buf;
    size_t len, cap;
    int failed;
} pd__text;

static void pd__text_printf(pd__text *t, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void pd__text_printf(pd__text *t, const char *fmt, ...)
{
    if (t->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->failed = 1;
            return;
        }
        if ((size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap * 2;
        while (cap - t->len <= (size_t)n)
            cap *= 2;
        char *grown = realloc(t->buf, cap);
        if (!grown) {
            t->failed = 1;
            return;
        }
        t->buf = grown;
        t->cap = cap;
    }
}

static void pd__family(pd__text *t, const char *name, const char *type, const char *help)
{
    pd__text_printf(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* ---- rendering ---------------------------------------------------------- */

static void pd__render_requests(pd__text *t, const pd__counters *m)
{
    pd__family(t, "pathd_requests_total", "counter",
               "Requests answered, by request type and final status.");
    for (unsigned type = 0; type < PD_REQ__COUNT; type++) {
        for (unsigned st = 0; st < PD_STATUS_COUNT; st++) {
            if (!pd__status_reported(st))
                continue;
            pd__text_printf(t, "pathd_requests_total{type=\"%s\",status=\"%s\"} %" PRIu64 "\n",
                            pd_request_kind_name((pd_request_kind)type), pd_status_name((pd_status)st), m->requests[type][st]);
        }
    }
}

/* Six decimals with the trailing zeros trimmed print the bounds as
 * written: 0.0001, 0.00025, 2.5, 10. */
static void pd__format_bound(uint64_t b, char *le, size_t cap)
{
    if (b % 1000000u == 0) {
        snprintf(le, cap, "%" PRIu64, b / 1000000u);
        return;
    }
    int n = snprintf(le, cap, "%" PRIu64 ".%06" PRIu64, b / 1000000u, b % 1000000u);
    while (n > 0 && le[n - 1] == '0')
        le[--n] = '\0';
}

/* One series per (kind, scene) that has observations: a series appears
 * with its first answer (as labelled histograms do in client libraries),
 * which keeps a scrape from listing every kind for every scene. */
static void pd__render_durations(pd__text *t, const pd__counters *m)
{
    const char *name = "pathd_request_duration_seconds";
    pd__family(t, name, "histogram",
               "Time from a request's hand-off to the worker queue to its answer, in seconds, for work the workers "
               "answered (refusals are not observed), by request kind and scene.");
    char le[PD_METRICS_LATENCY_BUCKETS][32];
    for (size_t i = 0; i < PD_METRICS_LATENCY_BUCKETS; i++)
        pd__format_bound(pd__latency_bounds_us[i], le[i], sizeof le[i]);
    for (unsigned kind = 0; kind < PD_REQ__COUNT; kind++) {
        for (size_t slot = 0; slot < PD__SLOTS; slot++) {
            const pd__histogram *h = &m->durations[kind][slot];
            if (h->count == 0)
                continue;
            char scene[PD_METRICS_MAX_LABEL];
            pd_metrics_escape_label(slot == PD__SLOT_OTHER   ? "other"
                                    : slot == PD__SLOT_MIXED ? "mixed"
                                                             : m->scenes[slot],
                                    scene, sizeof scene);
            const char *k = pd_request_kind_name((pd_request_kind)kind);
            uint64_t cumulative = 0;
            for (size_t i = 0; i < PD_METRICS_LATENCY_BUCKETS; i++) {
                cumulative += h->buckets[i];
                pd__text_printf(t, "%s_bucket{kind=\"%s\",scene=\"%s\",le=\"%s\"} %" PRIu64 "\n", name, k, scene,
                                le[i], cumulative);
            }
            pd__text_printf(t, "%s_bucket{kind=\"%s\",scene=\"%s\",le=\"+Inf\"} %" PRIu64 "\n", name, k, scene,
                            h->count);
            pd__text_printf(t, "%s_sum{kind=\"%s\",scene=\"%s\"} %" PRIu64 ".%06" PRIu64 "\n", name, k, scene,
                            h->sum_us / 1000000u, h->sum_us % 1000000u);
            pd__text_printf(t, "%s_count{kind=\"%s\",scene=\"%s\"} %" PRIu64 "\n", name, k, scene, h->count);
        }
    }
}

/* Reload and overload counters: every label value from the first scrape,
 * zeros included; the timestamps are 0 until the first reload. */
static void pd__render_ops(pd__text *t, const pd__counters *m)
{
    pd__family(t, "pathd_overloaded_total", "counter",
               "Requests and connections answered OVERLOADED, by the limit that refused them.");
    for (unsigned l = 0; l < PD_METRICS_LIMIT__COUNT; l++)
        pd__text_printf(t, "pathd_overloaded_total{limit=\"%s\"} %" PRIu64 "\n", pd__limit_names[l],
                        m->overloaded[l]);
    pd__family(t, "pathd_reloads_total", "counter",
               "Reloads (SIGHUP or Reload) by result: success, or failure (the running scenes, portals and "
               "routes all stay: a reload is one transaction).");
    for (unsigned r = 0; r < PD_METRICS_RELOAD__COUNT; r++)
        pd__text_printf(t, "pathd_reloads_total{result=\"%s\"} %" PRIu64 "\n", pd__reload_names[r], m->reloads[r]);
    pd__family(t, "pathd_last_reload_timestamp_seconds", "gauge",
               "Unix time the last reload finished, whatever its result; 0 before the first.");
    pd__text_printf(t, "pathd_last_reload_timestamp_seconds %.3f\n", m->last_reload_s);
    pd__family(t, "pathd_last_reload_success_timestamp_seconds", "gauge",
               "Unix time of the last reload that published its scenes; 0 before the first.");
    pd__text_printf(t, "pathd_last_reload_success_timestamp_seconds %.3f\n", m->last_reload_success_s);
    pd__family(t, "pathd_last_reload_scenes", "gauge",
               "Config scenes of the last reload that published: kept (definition unchanged: version and "
               "updates stay) or built (new or changed: built from the map again); 0 before the first.");
    pd__text_printf(t, "pathd_last_reload_scenes{outcome=\"kept\"} %" PRIu64 "\n", m->last_reload_kept);
    pd__text_printf(t, "pathd_last_reload_scenes{outcome=\"built\"} %" PRIu64 "\n", m->last_reload_built);
}

static void pd__render_gauges(pd__text *t, const pd_metrics_gauges *g)
{
    pd__family(t, "pathd_uptime_seconds", "gauge", "Seconds since the server started.");
    pd__text_printf(t, "pathd_uptime_seconds %" PRIu64 ".%03" PRIu64 "\n", g->uptime_ms / 1000u,
                    g->uptime_ms % 1000u);
    pd__family(t, "pathd_connections", "gauge", "Client connections open now.");
    pd__text_printf(t, "pathd_connections %" PRIu64 "\n", g->connections);
    pd__family(t, "pathd_in_flight", "gauge", "Requests handed to workers and not yet answered.");
    pd__text_printf(t, "pathd_in_flight %" PRIu64 "\n", g->in_flight);
    pd__family(t, "pathd_queue_depth", "gauge", "Jobs waiting for a worker thread.");
    pd__text_printf(t, "pathd_queue_depth %" PRIu64 "\n", g->queue_depth);
    pd__family(t, "pathd_worker_threads", "gauge", "Worker threads that run searches and updates.");
    pd__text_printf(t, "pathd_worker_threads %" PRIu32 "\n", g->worker_threads);
    pd__family(t, "pathd_worker_busy_seconds_total", "counter",
               "Time worker threads spent on jobs, summed over threads; utilisation is its rate "
               "divided by pathd_worker_threads.");
    pd__text_printf(t, "pathd_worker_busy_seconds_total %" PRIu64 ".%09" PRIu64 "\n",
                    g->worker_busy_ns / 1000000000u, g->worker_busy_ns % 1000000000u);
    pd__family(t, "pathd_worker_context_bytes", "gauge",
               "Search memory (node records, open lists, path buffers) the worker threads hold, summed; "
               "it grows with the area searches cover, not with the maps.");
    pd__text_printf(t, "pathd_worker_context_bytes %" PRIu64 "\n", g->worker_context_bytes);
    pd__family(t, "pathd_worker_context_bytes_max", "gauge",
               "The most search memory one worker holds; after each job a worker gives back what "
               "exceeds limits.worker_retained_bytes.");
    pd__text_printf(t, "pathd_worker_context_bytes_max %" PRIu64 "\n", g->worker_context_bytes_max);
    pd__family(t, "pathd_buffered_bytes", "gauge",
               "Bytes held for all connections: read buffers (partial frames) and answers not yet written.");
    pd__text_printf(t, "pathd_buffered_bytes %" PRIu64 "\n", g->buffered_bytes);
    pd__family(t, "pathd_buffer_budget_bytes", "gauge",
               "limits.buffer_budget_bytes: past it the connections holding the most are closed.");
    pd__text_printf(t, "pathd_buffer_budget_bytes %" PRIu64 "\n", g->buffer_budget_bytes);
    pd__family(t, "pathd_connections_shed_total", "counter",
               "Connections closed to keep the buffered bytes within the budget, largest first.");
    pd__text_printf(t, "pathd_connections_shed_total %" PRIu64 "\n", g->connections_shed);
    pd__family(t, "pathd_frame_timeouts_total", "counter",
               "Connections closed because a frame was not finished within limits.frame_timeout_ms.");
    pd__text_printf(t, "pathd_frame_timeouts_total %" PRIu64 "\n", g->frame_timeouts);
    pd__family(t, "pathd_accept_errors_total", "counter",
               "Connections the kernel queued that could not be accepted (open-file limit): reset unanswered.");
    pd__text_printf(t, "pathd_accept_errors_total %" PRIu64 "\n", g->accept_errors);
    pd__family(t, "pathd_watchers", "gauge", "Watches open: connections' subscriptions to scenes' changes.");
    pd__text_printf(t, "pathd_watchers %" PRIu64 "\n", g->watchers);
    pd__family(t, "pathd_watch_events_total", "counter",
               "Watch frames queued for watchers (WATCH_STARTED and every change).");
    pd__text_printf(t, "pathd_watch_events_total %" PRIu64 "\n", g->watch_events);
    pd__family(t, "pathd_watchers_dropped_total", "counter",
               "Watches ended with WATCH_OVERFLOW: the watcher left more than limits.watch_buffer_bytes unread.");
    pd__text_printf(t, "pathd_watchers_dropped_total %" PRIu64 "\n", g->watchers_dropped);
    if (g->replica_text)
        pd__text_printf(t, "%s", g->replica_text);
    if (!g->journal)
        return;
    pd__family(t, "pathd_journal_bytes", "gauge",
               "The journal's files in data_dir: the log since the last compaction, and the snapshot.");
    pd__text_printf(t, "pathd_journal_bytes{file=\"log\"} %" PRIu64 "\n", g->journal_log_bytes);
    pd__text_printf(t, "pathd_journal_bytes{file=\"snapshot\"} %" PRIu64 "\n", g->journal_snapshot_bytes);
    pd__family(t, "pathd_journal_failed", "gauge",
               "1 once a journal write failed: every change is refused (INTERNAL) until a restart.");
    pd__text_printf(t, "pathd_journal_failed %d\n", g->journal_failed);
}

/* Whether scene a of a name-sorted list ranks before scene b: more
 * requests, then the name. */
static int pd__ranks_before(const uint64_t *req, size_t a, size_t b)
{
    return req[a] != req[b] ? req[a] > req[b] : a < b;
}

/* Moves heap[i] down a heap whose top ranks last (the one to replace). */
static void pd__heap_down(size_t *heap, size_t n, size_t i, const uint64_t *req)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, last = i;
        if (l < n && pd__ranks_before(req, heap[last], heap[l]))
            last = l;
        if (r < n && pd__ranks_before(req, heap[last], heap[r]))
            last = r;
        if (last == i)
            return;
        size_t tmp = heap[i];
        heap[i] = heap[last];
        heap[last] = tmp;
        i = last;
    }
}

static int pd__cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/* The k of n scenes with the most requests (ties: the first by name),
 * in name order, into top[0, k): a heap of k, O(n log k). */
static void pd__top_scenes(const uint64_t *req, size_t n, size_t k, size_t *top)
{
    if (k == 0)
        return;
    for (size_t i = 0; i < n; i++) {
        if (i < k) {
            top[i] = i;
            if (i == k - 1)
                for (size_t j = k / 2; j-- > 0;)
                    pd__heap_down(top, k, j, req);
        } else if (pd__ranks_before(req, i, top[0])) {
            top[0] = i;
            pd__heap_down(top, k, 0, req);
        }
    }
    qsort(top, k, sizeof *top, pd__cmp_size);
}

/* The per-scene families, for the limits.metrics_scene_series scenes with
 * the most requests, and the totals over every scene. Off the loop: the
 * registry is read by listing it, the requests from the snapshot. */
static void pd__render_scenes(pd__text *t, const pd_metrics_snapshot *snap)
{
    pd_registry *registry = snap->registry;
    pd_scene **list = NULL;
    size_t n = pd_registry_list(registry, &list);
    uint64_t *req = calloc(n ? n : 1, sizeof *req);
    size_t k = n < snap->scene_series ? n : snap->scene_series;
    size_t *top = malloc((k ? k : 1) * sizeof *top);
    size_t icap = pd_index_cap_for(snap->n_counts);
    uint32_t *index = pd_index_build(icap, snap->n_counts, pd__count_name, snap->counts, NULL);
    if (!req || !top || !index) {
        t->failed = 1;
        goto out;
    }
    uint64_t total = snap->forgotten, shown = 0;
    for (size_t i = 0; i < snap->n_counts; i++)
        total += snap->counts[i].requests;
    for (size_t i = 0; i < n; i++) {
        uint32_t e = index[pd_index_slot(index, icap, list[i]->name, pd__count_name, snap->counts, NULL)];
        req[i] = e ? snap->counts[e - 1].requests : 0;
    }
    pd__top_scenes(req, n, k, top);
    for (size_t j = 0; j < k; j++)
        shown += req[top[j]];

    pd__family(t, "pathd_scenes", "gauge",
               "Scenes served, config and run time together; the per-scene families below show the "
               "limits.metrics_scene_series of them with the most requests.");
    pd__text_printf(t, "pathd_scenes %zu\n", n);
    pd__family(t, "pathd_scenes_bytes", "gauge",
               "Memory every scene snapshot holds together (limits.max_scene_bytes caps it).");
    pd__text_printf(t, "pathd_scenes_bytes %" PRIu64 "\n", pd_registry_bytes(registry));
    pd__family(t, "pathd_scene_requests_total", "counter",
               "Requests the workers answered for each scene (as pathd_request_duration_seconds counts them), "
               "for the limits.metrics_scene_series scenes with the most; the others are summed in "
               "pathd_scene_requests_other.");
    char (*names)[PD_METRICS_MAX_LABEL] = malloc((k ? k : 1) * sizeof *names);
    if (!names) {
        t->failed = 1;
        goto out;
    }
    for (size_t j = 0; j < k; j++) {
        pd_metrics_escape_label(list[top[j]]->name, names[j], sizeof names[j]);
        pd__text_printf(t, "pathd_scene_requests_total{scene=\"%s\"} %" PRIu64 "\n", names[j], req[top[j]]);
    }
    pd__family(t, "pathd_scene_requests_other", "gauge",
               "Requests the workers answered for the scenes without series of their own, dropped ones "
               "included: with pathd_scene_requests_total, every request counted by scene. It falls when a "
               "scene gains a series.");
    pd__text_printf(t, "pathd_scene_requests_other %" PRIu64 "\n", total - shown);
    pd__family(t, "pathd_scene_version", "gauge",
               "Version of each loaded scene; it grows with every reload or cell update that changes it.");
    for (size_t j = 0; j < k; j++)
        pd__text_printf(t, "pathd_scene_version{scene=\"%s\"} %" PRIu64 "\n", names[j], list[top[j]]->version);
    pd__family(t, "pathd_scene_bytes", "gauge",
               "Memory each scene's current snapshot holds per structure (grid: passability and cost; "
               "clearance; labels: component labels; unit_grids), padding included.");
    for (size_t j = 0; j < k; j++) {
        pd_scene_bytes b;
        pd_scene_get_bytes(list[top[j]], &b);
        for (int st = 0; st < PD_SCENE_STRUCTURES; st++)
            pd__text_printf(t, "pathd_scene_bytes{scene=\"%s\",structure=\"%s\"} %" PRIu64 "\n", names[j],
                            pd_scene_structure_name((pd_scene_structure)st), b.by[st]);
    }
    pd__family(t, "pathd_scene_search", "gauge",
               "1 for the search that answers each scene's and unit size's requests where jump point search "
               "applies: jps, astar, or default (as jump_point_search says); the scene's \"search\" config "
               "decides, \"auto\" by measurement.");
    for (size_t j = 0; j < k; j++) {
        const pd_scene *sc = list[top[j]];
        for (size_t u = 0; u < sc->n_unit_sizes; u++)
            pd__text_printf(t, "pathd_scene_search{scene=\"%s\",unit=\"%u\",search=\"%s\"} 1\n", names[j],
                            (unsigned)sc->units[u].unit, pd_scene_pick_name(sc->units[u].pick));
    }
    free(names);
out:
    free(index);
    free(top);
    free(req);
    pd_registry_release_list(list, n);
}

/* Reads the numbers of /proc/self/stat after the command name: field 3
 * (state) is fields[0], so utime (14), stime (15) and starttime (22) are
 * fields[11], [12] and [19]. Returns 0 or -1. */
#define PD__STAT_FIELDS 20
static int pd__read_self_stat(unsigned long long fields[PD__STAT_FIELDS])
{
    char buf[1024];
    FILE *f = fopen("/proc/self/stat", "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* The command name may hold spaces and parentheses: skip to the last ')'. */
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ' || p[2] == '\0')
        return -1;
    p += 4; /* ") S " */
    fields[0] = 0;
    for (int i = 1; i < PD__STAT_FIELDS; i++) {
        char *end;
        fields[i] = strtoull(p, &end, 10);
        if (end == p)
            return -1;
        p = end;
    }
    return 0;
}

/* Seconds since the epoch at which the system booted (/proc/stat btime). */
static int pd__boot_time(unsigned long long *btime)
{
    char line[256];
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
        return -1;
    int found = -1;
    while (found != 0 && fgets(line, sizeof line, f))
        if (sscanf(line, "btime %llu", btime) == 1)
            found = 0;
    fclose(f);
    return found;
}

/* The standard process metrics every Prometheus client library exports,
 * read from /proc at scrape time (each is left out when it cannot be read,
 * for instance off Linux). */
static void pd__render_process(pd__text *t)
{
    unsigned long long st[PD__STAT_FIELDS];
    const long ticks = sysconf(_SC_CLK_TCK);
    const int have_stat = ticks > 0 && pd__read_self_stat(st) == 0;
    if (have_stat) {
        const unsigned long long cpu = st[11] + st[12];
        pd__family(t, "process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.");
        pd__text_printf(t, "process_cpu_seconds_total %.2f\n", (double)cpu / (double)ticks);
    }
    FILE *statm = fopen("/proc/self/statm", "r");
    unsigned long long size_pages, rss_pages;
    if (statm) {
        if (fscanf(statm, "%llu %llu", &size_pages, &rss_pages) == 2) {
            const double page = (double)sysconf(_SC_PAGESIZE);
            pd__family(t, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.");
            pd__text_printf(t, "process_virtual_memory_bytes %.0f\n", (double)size_pages * page);
            pd__family(t, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
            pd__text_printf(t, "process_resident_memory_bytes %.0f\n", (double)rss_pages * page);
        }
        fclose(statm);
    }
    DIR *d = pd_open_dir("/proc/self/fd");
    if (d) {
        uint64_t fds = 0;
        for (struct dirent *e; (e = readdir(d));)
            if (e->d_name[0] != '.')
                fds++;
        closedir(d);
        pd__family(t, "process_open_fds", "gauge", "Number of open file descriptors.");
        pd__text_printf(t, "process_open_fds %" PRIu64 "\n", fds > 0 ? fds - 1 : 0); /* not the listing's own */
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        pd__family(t, "process_max_fds", "gauge", "Maximum number of open file descriptors.");
        pd__text_printf(t, "process_max_fds %.0f\n", rl.rlim_cur == RLIM_INFINITY ? -1.0 : (double)rl.rlim_cur);
    }
    unsigned long long btime;
    if (have_stat && pd__boot_time(&btime) == 0) {
        pd__family(t, "process_start_time_seconds", "gauge",
                   "Start time of the process since unix epoch in seconds.");
        pd__text_printf(t, "process_start_time_seconds %.2f\n", (double)btime + (double)st[19] / (double)ticks);
    }
}

pd_metrics_snapshot *pd_metrics_snapshot_take(pd_metrics *m, const pd_metrics_gauges *gauges, pd_registry *registry)
{
    pd_metrics_snapshot *snap = m->spare ? m->spare : malloc(sizeof *snap);
    m->spare = NULL;
    if (!snap)
        return NULL;
    snap->counts = NULL;
    if (m->n_counts && !(snap->counts = malloc(m->n_counts * sizeof *snap->counts))) {
        free(snap);
        return NULL;
    }
    /* O(scenes with requests) on the loop: a copy of their entries, the
     * names shared; everything else a scrape renders is built off it. */
    if (m->n_counts)
        memcpy(snap->counts, m->counts, m->n_counts * sizeof *snap->counts);
    snap->n_counts = m->n_counts;
    snap->forgotten = m->forgotten;
    snap->m = m;
    snap->c = m->c;
    snap->has_gauges = gauges != NULL;
    if (gauges)
        snap->gauges = *gauges;
    else
        memset(&snap->gauges, 0, sizeof snap->gauges); /* nothing for snapshot_free to free */
    snap->registry = registry;
    snap->scene_series = m->scene_series;
    snap->render_hook = m->render_hook;
    snap->render_hook_user = m->render_hook_user;
    m->snapshots_out++;
    return snap;
}

void pd_metrics_snapshot_free(pd_metrics_snapshot *snap)
{
    if (!snap)
        return;
    pd_metrics *m = snap->m;
    if (--m->snapshots_out == 0)
        pd__graveyard_empty(m);
    free(snap->gauges.replica_text);
    snap->gauges.replica_text = NULL; /* a spare snapshot may be taken without gauges */
    free(snap->counts);
    if (!m->spare)
        m->spare = snap;
    else
        free(snap);
}

int pd_metrics_snapshot_render(const pd_metrics_snapshot *snap, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    if (snap->render_hook)
        snap->render_hook(snap->render_hook_user);
    const pd__counters *m = &snap->c;
    pd__text t = {malloc(PD__METRICS_RENDER_INITIAL), 0, PD__METRICS_RENDER_INITIAL, 0};
    if (!t.buf)
        return -1;

    char version[PD_METRICS_MAX_LABEL];
    pd_metrics_escape_label(m->version, version, sizeof version);
    pd__family(&t, "pathd_build_info", "gauge", "Build of the running daemon; the value is always 1.");
    pd__text_printf(&t, "pathd_build_info{version=\"%s\"} 1\n", version);
    pd__render_requests(&t, m);
    pd__render_durations(&t, m);
    pd__render_ops(&t, m);
    pd__family(&t, "pathd_expansions_total", "counter",
               "Search nodes expanded by answered FindPath and FindRoute requests.");
    pd__text_printf(&t, "pathd_expansions_total %" PRIu64 "\n", m->expansions);
    if (snap->has_gauges) {
        pd__render_gauges(&t, &snap->gauges);
        pd__render_process(&t);
    }
    if (snap->registry)
        pd__render_scenes(&t, snap);

    if (t.failed) {
        free(t.buf);
        return -1;
    }
    *out = t.buf;
    *len = t.len;
    return 0;
}

int pd_metrics_render(pd_metrics *m, const pd_metrics_gauges *gauges, pd_registry *registry, char **out,
                      size_t *len)
{
    *out = NULL;
    *len = 0;
    pd_metrics_snapshot *snap = pd_metrics_snapshot_take(m, gauges, registry);
    if (!snap)
        return -1;
    int rc = pd_metrics_snapshot_render(snap, out, len);
    pd_metrics_snapshot_free(snap);
    return rc;
}
