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

struct pd_metrics {
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
    snprintf(m->version, sizeof m->version, "%s", version ? version : "unknown");
    return m;
}

void pd_metrics_destroy(pd_metrics *m)
{
    free(m);
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
    m->requests[type][status]++;
    m->expansions += expansions;
}

/* The histogram slot of a scene name: its own while fewer than the cap
 * have been seen, else "other". A linear scan: 32 short names. */
static size_t pd__scene_slot(pd_metrics *m, const char *scene)
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

void pd_metrics_observe_duration(pd_metrics *m, pd_request_kind kind, const char *scene, uint64_t latency_us)
{
    if (!m)
        return;
    if ((unsigned)kind >= PD_REQ__COUNT)
        kind = PD_REQ_NONE;
    pd__histogram *h = &m->durations[kind][pd__scene_slot(m, scene)];
    for (size_t i = 0; i < PD_METRICS_LATENCY_BUCKETS; i++) {
        if (latency_us <= pd__latency_bounds_us[i]) {
            h->buckets[i]++;
            break;
        }
    }
    h->count++;
    h->sum_us += latency_us;
}

const char *pd_metrics_limit_name(pd_metrics_limit limit)
{
    return (unsigned)limit < PD_METRICS_LIMIT__COUNT ? pd__limit_names[limit] : "unknown";
}

void pd_metrics_observe_overloaded(pd_metrics *m, pd_metrics_limit limit)
{
    if (m && (unsigned)limit < PD_METRICS_LIMIT__COUNT)
        m->overloaded[limit]++;
}

void pd_metrics_observe_reload(pd_metrics *m, pd_metrics_reload_result result, double unix_seconds)
{
    if (!m || (unsigned)result >= PD_METRICS_RELOAD__COUNT)
        return;
    m->reloads[result]++;
    m->last_reload_s = unix_seconds;
    if (result != PD_METRICS_RELOAD_FAILURE)
        m->last_reload_success_s = unix_seconds;
}

void pd_metrics_set_reload_scenes(pd_metrics *m, size_t kept, size_t built)
{
    if (!m)
        return;
    m->last_reload_kept = kept;
    m->last_reload_built = built;
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

static void pd__render_requests(pd__text *t, const pd_metrics *m)
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
static void pd__render_durations(pd__text *t, const pd_metrics *m)
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
static void pd__render_ops(pd__text *t, const pd_metrics *m)
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

static void pd__render_scenes(pd__text *t, pd_registry *registry)
{
    pd_scene **list = NULL;
    size_t n = pd_registry_list(registry, &list);
    pd__family(t, "pathd_scene_version", "gauge",
               "Version of each loaded scene; it grows with every reload or cell update that changes it.");
    for (size_t i = 0; i < n; i++) {
        char name[PD_METRICS_MAX_LABEL];
        pd_metrics_escape_label(list[i]->name, name, sizeof name);
        pd__text_printf(t, "pathd_scene_version{scene=\"%s\"} %" PRIu64 "\n", name, list[i]->version);
    }
    pd__family(t, "pathd_scene_bytes", "gauge",
               "Memory each scene's current snapshot holds per structure (grid: passability and cost; "
               "clearance; labels: component labels; unit_grids), padding included.");
    for (size_t i = 0; i < n; i++) {
        char name[PD_METRICS_MAX_LABEL];
        pd_metrics_escape_label(list[i]->name, name, sizeof name);
        pd_scene_bytes b;
        pd_scene_get_bytes(list[i], &b);
        for (int st = 0; st < PD_SCENE_STRUCTURES; st++)
            pd__text_printf(t, "pathd_scene_bytes{scene=\"%s\",structure=\"%s\"} %" PRIu64 "\n", name,
                            pd_scene_structure_name((pd_scene_structure)st), b.by[st]);
    }
    pd__family(t, "pathd_scene_search", "gauge",
               "1 for the search that answers each scene's and unit size's requests where jump point search "
               "applies: jps, astar, or default (as jump_point_search says); the scene's \"search\" config "
               "decides, \"auto\" by measurement.");
    for (size_t i = 0; i < n; i++) {
        char name[PD_METRICS_MAX_LABEL];
        pd_metrics_escape_label(list[i]->name, name, sizeof name);
        for (size_t u = 0; u < list[i]->n_unit_sizes; u++)
            pd__text_printf(t, "pathd_scene_search{scene=\"%s\",unit=\"%u\",search=\"%s\"} 1\n", name,
                            (unsigned)list[i]->units[u].unit, pd_scene_pick_name(list[i]->units[u].pick));
    }
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
    DIR *d = opendir("/proc/self/fd");
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

int pd_metrics_render(const pd_metrics *m, const pd_metrics_gauges *gauges, pd_registry *registry,
                      char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
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
    if (gauges) {
        pd__render_gauges(&t, gauges);
        pd__render_process(&t);
    }
    if (registry)
        pd__render_scenes(&t, registry);

    if (t.failed) {
        free(t.buf);
        return -1;
    }
    *out = t.buf;
    *len = t.len;
    return 0;
}
