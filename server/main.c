/*
 * main.c - the pathd daemon: arguments, config, scenes, workers, server, run,
 * then teardown in reverse.
 *
 * Everything interesting lives in the layers; this file parses the
 * arguments, runs --check-config, and wires the layers together in one
 * straight line so the start-up and shutdown order can be read top to
 * bottom. Exit status: 0 after a clean stop (or a good
 * --check-config), 1 when the config, the scenes or the listener fail, 2 for
 * bad command-line arguments.
 */
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "pd_clearance.h"
#include "pd_conf.h"
#include "pd_http.h"
#include "pd_log.h"
#include "pd_metrics.h"
#include "pd_pool.h"
#include "pd_scene.h"
#include "pd_server.h"

/* Bytes from which an allocation is its own mapping (see main). */
#define PD_MAIN_MMAP_THRESHOLD (128 * 1024)
/* Free bytes a heap keeps at its top rather than give back (see main). */
#define PD_MAIN_TRIM_THRESHOLD (2 * 1024 * 1024)

#ifndef PATHD_VERSION
#define PATHD_VERSION "unknown"
#endif

#define PD_DEFAULT_CONFIG "config/default.json"
/* Upper bound for --threads, the same as the config file's "threads". */
#define PD_MAX_THREADS 256

typedef struct pd_args {
    const char *config_path;
    int check_config;
    int has_listen;
    char listen_host[PD_CONF_MAX_HOST];
    uint16_t listen_port;
    int has_metrics_listen;
    char metrics_host[PD_CONF_MAX_HOST];
    uint16_t metrics_port;
    int has_threads;
    uint32_t threads;
    int has_log_level;
    pd_log_level log_level;
    const char *data_dir;            /* --data-dir, or NULL */
} pd_args;

static void pd__usage(FILE *out)
{
    fprintf(out,
            "usage: pathd [options]\n"
            "  --config FILE      config file (default " PD_DEFAULT_CONFIG ")\n"
            "  --listen HOST:PORT listen address, overrides the config ([::1]:PORT for IPv6;\n"
            "                     port 0 picks a free port)\n"
            "  --metrics-listen HOST:PORT  Prometheus /metrics and /healthz address,\n"
            "                     overrides the config (port 0 picks a free port)\n"
            "  --threads N        worker threads, 0 = one per core (overrides the config)\n"
            "  --log-level LEVEL  error, warn, info or debug (overrides the config)\n"
            "  --data-dir DIR     the journal's directory (overrides the config's data_dir)\n"
            "  --check-config     load the config and every scene, print a summary, exit\n"
            "  --version          print the version and exit\n"
            "  --help             print this help and exit\n"
            "Signals: SIGTERM/SIGINT stop gracefully, SIGHUP reloads the config.\n");
}

/* Returns 0 to run, 1 when --help/--version has been answered, 2 on error. */
static int pd__parse_args(int argc, char **argv, pd_args *a)
{
    memset(a, 0, sizeof *a);
    a->config_path = PD_DEFAULT_CONFIG;
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i];
        const char *val = (i + 1 < argc) ? argv[i + 1] : NULL;
        int takes_value = strcmp(opt, "--config") == 0 || strcmp(opt, "--listen") == 0 ||
                          strcmp(opt, "--metrics-listen") == 0 ||
                          strcmp(opt, "--threads") == 0 || strcmp(opt, "--log-level") == 0 ||
                          strcmp(opt, "--data-dir") == 0;
        if (takes_value && !val) {
            fprintf(stderr, "pathd: %s needs a value\n", opt);
            return 2;
        }
        if (strcmp(opt, "--help") == 0 || strcmp(opt, "-h") == 0) {
            pd__usage(stdout);
            return 1;
        } else if (strcmp(opt, "--version") == 0) {
            printf("pathd %s\n", PATHD_VERSION);
            return 1;
        } else if (strcmp(opt, "--check-config") == 0) {
            a->check_config = 1;
        } else if (strcmp(opt, "--config") == 0) {
            a->config_path = val;
        } else if (strcmp(opt, "--listen") == 0) {
            char err[PD_REASON_SHORT_MAX];
            if (pd_conf_parse_address(val, a->listen_host, &a->listen_port, err, sizeof err) != 0) {
                fprintf(stderr, "pathd: --listen: %s\n", err);
                return 2;
            }
            a->has_listen = 1;
        } else if (strcmp(opt, "--metrics-listen") == 0) {
            char err[PD_REASON_SHORT_MAX];
            if (pd_conf_parse_address(val, a->metrics_host, &a->metrics_port, err, sizeof err) != 0) {
                fprintf(stderr, "pathd: --metrics-listen: %s\n", err);
                return 2;
            }
            a->has_metrics_listen = 1;
        } else if (strcmp(opt, "--threads") == 0) {
            char *end;
            unsigned long n = strtoul(val, &end, 10);
            if (*val < '0' || *val > '9' || *end != '\0' || n > PD_MAX_THREADS) {
                fprintf(stderr, "pathd: --threads wants 0..%d, got \"%s\"\n", PD_MAX_THREADS, val);
                return 2;
            }
            a->threads = (uint32_t)n;
            a->has_threads = 1;
        } else if (strcmp(opt, "--data-dir") == 0) {
            if (strlen(val) >= PD_CONF_MAX_DATA_DIR) {
                fprintf(stderr, "pathd: --data-dir is longer than %d bytes\n", PD_CONF_MAX_DATA_DIR - 1);
                return 2;
            }
            a->data_dir = val;
        } else if (strcmp(opt, "--log-level") == 0) {
            if (pd_log_level_parse(val, &a->log_level) != 0) {
                fprintf(stderr, "pathd: --log-level wants error, warn, info or debug, got \"%s\"\n", val);
                return 2;
            }
            a->has_log_level = 1;
        } else {
            fprintf(stderr, "pathd: unknown argument \"%s\"\n", opt);
            return 2;
        }
        if (takes_value)
            i++;
    }
    return 0;
}

/* Command-line settings win over the file, at start-up and on every reload. */
static void pd__apply_args(pd_conf *conf, void *user)
{
    const pd_args *a = user;
    if (a->has_listen) {
        memcpy(conf->listen_host, a->listen_host, sizeof conf->listen_host);
        conf->listen_port = a->listen_port;
    }
    if (a->has_metrics_listen) {
        memcpy(conf->metrics_host, a->metrics_host, sizeof conf->metrics_host);
        conf->metrics_port = a->metrics_port;
        conf->metrics_enabled = 1;
    }
    if (a->has_threads)
        conf->threads = a->threads;
    if (a->has_log_level)
        conf->log_level = a->log_level;
    if (a->data_dir)
        snprintf(conf->data_dir, sizeof conf->data_dir, "%s", a->data_dir);
}

/* The largest unit (square side in cells) whose top-left cell may stand
 * at (x, y): the clearance where the scene keeps it, else 1 or 0. */
static uint32_t pd__fit_at(const pd_scene *s, int32_t x, int32_t y)
{
    if (!pd_grid_in_bounds(s->grid, x, y) || pd_grid_get(s->grid, x, y) == PD_CELL_BLOCKED)
        return 0;
    return s->clearance ? pd_clearance_get(s->clearance, x, y) : 1;
}

/* For a portal open to any unit size (max_unit 0): the largest size both
 * of its scenes serve, which is the largest that can ever cross it. */
static uint32_t pd__largest_unit_both(pd_registry *registry, const pd_conf_portal *p)
{
    uint32_t both = UINT32_MAX;
    const char *scenes[2] = {p->a.scene, p->b.scene};
    for (int e = 0; e < 2; e++) {
        pd_scene *s = pd_registry_acquire(registry, scenes[e]);
        uint32_t largest = 1;
        for (size_t k = 0; s && k < s->n_unit_sizes; k++)
            largest = s->unit_sizes[k] > largest ? s->unit_sizes[k] : largest;
        both = largest < both ? largest : both;
        pd_scene_release(s);
    }
    return both;
}

/* --check-config's checks of meaning on the portals: an end on a wall is an
 * error (no unit can ever use the portal there), an end too narrow for
 * the portal's max_unit a warning (smaller units still pass). Returns the
 * number of errors. */
static int pd__check_portals(const char *path, const pd_conf *conf, pd_registry *registry)
{
    int errors = 0;
    for (size_t i = 0; i < conf->world.n_portals; i++) {
        const pd_conf_portal *p = &conf->world.portals[i];
        const pd_conf_portal_end *ends[2] = {&p->a, &p->b};
        for (int e = 0; e < 2; e++) {
            pd_scene *s = pd_registry_acquire(registry, ends[e]->scene);
            if (!s)
                continue; /* the world build has refused it already */
            uint32_t fit = pd__fit_at(s, ends[e]->x, ends[e]->y);
            uint32_t want = p->max_unit ? p->max_unit : pd__largest_unit_both(registry, p);
            if (fit == 0) {
                fprintf(stderr, "pathd: %s: error: portal '%s' end %c (%s %" PRId32 ",%" PRId32 ") is a wall\n", path,
                        p->name, e ? 'b' : 'a', s->name, ends[e]->x, ends[e]->y);
                errors++;
            } else if (fit < want) {
                fprintf(stderr,
                        "pathd: %s: warning: portal '%s' end %c (%s %" PRId32 ",%" PRId32 ") fits units up to %" PRIu32
                        ", not its max_unit %" PRIu32 "%s: larger units cannot use it\n",
                        path, p->name, e ? 'b' : 'a', s->name, ends[e]->x, ends[e]->y, fit, want,
                        p->max_unit ? "" : " (0: the largest unit size both scenes serve)");
            }
            pd_scene_release(s);
        }
    }
    return errors;
}

/* --check-config's look at each scene's unit sizes: a size no cell of the
 * map fits (larger than the map, or than every open square in it) is a
 * warning: every request for it would be refused START_BLOCKED, and the
 * config says nothing else about it. */
static void pd__check_unit_sizes(const char *path, pd_registry *registry)
{
    pd_scene **list = NULL;
    size_t n = pd_registry_list(registry, &list);
    for (size_t i = 0; i < n; i++) {
        const pd_scene *s = list[i];
        uint32_t largest = 0, wanted = 1;
        for (size_t k = 0; k < s->n_unit_sizes; k++)
            wanted = s->unit_sizes[k] > wanted ? s->unit_sizes[k] : wanted;
        for (int32_t y = 0; y < s->grid->height && largest < wanted; y++) {
            for (int32_t x = 0; x < s->grid->width && largest < wanted; x++) {
                uint32_t fit = pd__fit_at(s, x, y);
                largest = fit > largest ? fit : largest;
            }
        }
        for (size_t k = 0; k < s->n_unit_sizes; k++) {
            if (s->unit_sizes[k] > largest)
                fprintf(stderr,
                        "pathd: %s: warning: scene '%s' (%" PRId32 "x%" PRId32 "): unit size %" PRIu32
                        " fits on no cell (the largest that fits anywhere is %" PRIu32
                        "): every path for it is refused\n",
                        path, s->name, s->grid->width, s->grid->height, s->unit_sizes[k], largest);
        }
    }
    pd_registry_release_list(list, n);
}

/* --check-config's look at data_dir: the daemon makes it (one level) when
 * missing, so it must be a writable directory, or its parent must be.
 * Returns the number of errors. */
static int pd__check_data_dir(const char *path, const pd_conf *conf)
{
    /* The Redis log is not reached here: the check stays offline. */
    if (conf->log.redis_host[0]) {
        printf("change log: Redis %s:%u, keys %s:* (data_dir unused)\n", conf->log.redis_host,
               (unsigned)conf->log.redis_port, conf->log.prefix);
        return 0;
    }
    if (!conf->data_dir[0]) {
        printf("journal: off (no data_dir: run-time changes are lost at restart)\n");
        return 0;
    }
    struct stat st;
    char parent[PD_CONF_MAX_DATA_DIR];
    const char *where = conf->data_dir;
    int exists = stat(conf->data_dir, &st) == 0;
    if (exists && !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "pathd: %s: error: data_dir %s is not a directory\n", path, conf->data_dir);
        return 1;
    }
    if (!exists) {
        snprintf(parent, sizeof parent, "%s", conf->data_dir);
        char *slash = strrchr(parent, '/');
        if (slash == parent)
            slash[1] = '\0';
        else if (slash)
            *slash = '\0';
        else
            snprintf(parent, sizeof parent, ".");
        where = parent;
        if (stat(parent, &st) != 0 || !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "pathd: %s: error: data_dir %s: its parent %s is not a directory\n", path,
                    conf->data_dir, parent);
            return 1;
        }
    }
    if (access(where, W_OK | X_OK) != 0) {
        fprintf(stderr, "pathd: %s: error: data_dir %s: %s is not writable: %s\n", path, conf->data_dir, where,
                strerror(errno));
        return 1;
    }
    printf("journal: %s (%s), fsync %s, compaction past %" PRIu64 " bytes\n", conf->data_dir,
           exists ? "exists" : "made at start", pd_conf_fsync_name(conf->journal_fsync), conf->journal_compact_bytes);
    return 0;
}

/* What each Tiled scene's rule decided (pd_tiled_stats_format), and a
 * warning when no tile decided anything: a misspelt property or class name
 * otherwise loads the map all open (or all walled) with an "ok". */
static void pd__check_tiled(const char *path, pd_registry *registry)
{
    pd_scene **list = NULL;
    size_t n = pd_registry_list(registry, &list);
    char line[PD_TILED_STATS_LAYERS + 256];
    for (size_t i = 0; i < n; i++) {
        const pd_scene *s = list[i];
        if (!s->from_tiled)
            continue;
        pd_tiled_stats_format(&s->tiled_stats, line, sizeof line);
        printf("  %s (Tiled): %s\n", s->name, line);
        if (pd_tiled_stats_untagged_only(&s->tiled_stats))
            fprintf(stderr,
                    "pathd: %s: warning: scene '%s' loads all open: no tile decided a cell by its property, class, "
                    "collision shape or object (%s); if the map has walls, check blocked_property and the class "
                    "names\n",
                    path, s->name, line);
    }
    pd_registry_release_list(list, n);
}

/* --check-config: every scene must load; the summary goes to stdout, the
 * checks of meaning to stderr. Errors (exit 1): a scene or the world that
 * does not load (a scene with no walkable cell does not), a portal end on
 * a wall. Warnings (exit 0): a portal end too narrow for its max_unit, a
 * unit size that fits on no cell of its scene. */
static int pd__check_config(const char *path, const pd_conf *conf, pd_registry *registry)
{
    char err[PD_LOAD_ERR_MAX];
    if (pd_registry_load(registry, conf, err, sizeof err) != 0) {
        fprintf(stderr, "pathd: %s: %s\n", path, err);
        return 1;
    }
    pd_world *world = pd_world_build_from_registry(&conf->world, registry, err, sizeof err);
    if (!world) {
        fprintf(stderr, "pathd: %s: portals and routes: %s\n", path, err);
        return 1;
    }
    pd_world_stats ws;
    pd_world_get_stats(world, &ws);
    pd_world_release(world);
    pd_scene **list = NULL;
    size_t n = pd_registry_list(registry, &list);
    uint64_t scene_bytes = 0;
    printf("%s: ok, %zu scenes, listen %s:%u, threads %" PRIu32 "%s, %zu portals, %zu pinned routes\n", path, n,
           conf->listen_host, (unsigned)conf->listen_port, conf->threads, conf->threads ? "" : " (one per core)",
           ws.n_portals, ws.n_routes);
    for (size_t i = 0; i < n; i++) {
        const pd_scene *s = list[i];
        pd_scene_bytes b;
        pd_scene_get_bytes(s, &b);
        const double cells = (double)s->grid->width * (double)s->grid->height;
        printf("  %s %" PRId32 "x%" PRId32 " cell_size %g origin (%g, %g), %" PRIu64 " walkable cells, %" PRIu64
               " bytes (%.2f per cell):",
               s->name, s->grid->width, s->grid->height, s->cell_size, s->origin_x, s->origin_y, s->passable_cells,
               b.total, (double)b.total / cells);
        for (int st = 0; st < PD_SCENE_STRUCTURES; st++)
            printf(" %s %" PRIu64, pd_scene_structure_name((pd_scene_structure)st), b.by[st]);
        printf("\n");
        scene_bytes += b.total;
    }
    pd_registry_release_list(list, n);
    /* What the daemon holds once serving, beside the code and libraries:
     * the scenes, each worker's search memory between requests (it grows
     * during a large search and is trimmed back after), and the buffers all
     * connections may hold before the largest are shed. */
    uint32_t threads = conf->threads ? conf->threads : uv_available_parallelism();
    uint64_t workers = (uint64_t)threads * conf->worker_retained_bytes;
    printf("memory estimate: %" PRIu64 " bytes = scenes %" PRIu64 " + %" PRIu32 " workers x %" PRIu32
           " retained + buffer budget %" PRIu32 "\n",
           scene_bytes + workers + conf->buffer_budget_bytes, scene_bytes, threads, conf->worker_retained_bytes,
           conf->buffer_budget_bytes);
    pd__check_unit_sizes(path, registry);
    pd__check_tiled(path, registry);
    int errors = pd__check_portals(path, conf, registry) + pd__check_data_dir(path, conf);
    return errors > 0 ? 1 : 0;
}

/* What a scrape reads besides the counters: the server's and the pool's
 * live numbers. Runs on the loop thread. */
typedef struct pd__metrics_source {
    pd_server *server;
    pd_pool *pool;
} pd__metrics_source;

static void pd__metrics_gauges(void *user, pd_metrics_gauges *out)
{
    const pd__metrics_source *src = user;
    pd_server_stats st;
    pd_pool_stats ps;
    pd_server_get_stats(src->server, &st);
    pd_pool_get_stats(src->pool, &ps);
    out->uptime_ms = st.uptime_ms;
    out->connections = st.connections;
    out->in_flight = st.in_flight;
    out->queue_depth = ps.queue_depth;
    out->worker_threads = ps.threads;
    out->worker_busy_ns = ps.busy_ns;
    out->worker_context_bytes = ps.context_bytes;
    out->worker_context_bytes_max = ps.context_bytes_max;
    out->buffered_bytes = st.buffered_bytes;
    out->buffer_budget_bytes = st.buffer_budget_bytes;
    out->connections_shed = st.connections_shed_total;
    out->frame_timeouts = st.frame_timeouts_total;
    out->accept_errors = st.accept_errors_total;
    out->watchers = st.watchers;
    out->watch_events = st.watch_events_total;
    out->watchers_dropped = st.watchers_dropped_total;
    out->journal = pd_server_journal_state(src->server, &out->journal_log_bytes, &out->journal_snapshot_bytes,
                                           &out->journal_failed);
    out->replica_text = pd_server_replica_metrics(src->server);
}

int main(int argc, char **argv)
{
    pd_args args;
    pd_conf conf;
    char err[PD_LOAD_ERR_MAX];
    int status = 1;
    uv_loop_t loop;
    pd_registry *registry = NULL;
    pd_world_store *world_store = NULL;
    pd_server *server = NULL;
    pd_pool *pool = NULL;
    pd_metrics *metrics = NULL;
    pd_metrics_http *metrics_http = NULL;
    pd__metrics_source metrics_source = {NULL, NULL};
    char metrics_addr[PD_CONF_MAX_ADDRESS] = "off";
    char listen_addr[PD_CONF_MAX_ADDRESS];
    int loop_ready = 0;

    int parsed = pd__parse_args(argc, argv, &args);
    if (parsed == 1)
        return 0;
    if (parsed == 2) {
        pd__usage(stderr);
        return 2;
    }
    /* A client that vanishes mid-write must cost an EPIPE, not the process. */
    signal(SIGPIPE, SIG_IGN);
    /* A journal write past `ulimit -f` must fail like one on a full disk
     * (the change is refused, INTERNAL), not end the process. */
    signal(SIGXFSZ, SIG_IGN);
    /* Frame and answer buffers of 128 KiB and more come from mmap and go
     * back to the system when freed. glibc would otherwise raise this
     * threshold after the first such free and serve later ones from the
     * heap, which keeps what the buffer budget sheds as fragments. */
    mallopt(M_MMAP_THRESHOLD, PD_MAIN_MMAP_THRESHOLD);
    /* Fixing that threshold also fixes the trim threshold at its 128 KiB
     * default: a pipelined burst's jobs (3.5 KiB each, freed together on
     * the loop) then gave the heap's top back with brk at every burst and
     * faulted it in again at the next, with a TLB shootdown each time
     * (issue 30, item 6: about 8% of the loop thread). A heap keeps at
     * most this much free at its top. */
    mallopt(M_TRIM_THRESHOLD, PD_MAIN_TRIM_THRESHOLD);

    if (pd_conf_load_file(args.config_path, &conf, err, sizeof err) != 0) {
        pd_log_error("%s", err);
        return 1;
    }
    pd__apply_args(&conf, &args);
    pd_log_set_level(conf.log_level);
    if (pd_conf_check_protected(&conf, err, sizeof err) != 0) {
        pd_log_error("%s: %s", args.config_path, err);
        pd_conf_free(&conf);
        return 1;
    }

    registry = pd_registry_create();
    if (!registry) {
        pd_log_error("out of memory creating the scene registry");
        goto out;
    }
    if (args.check_config) {
        status = pd__check_config(args.config_path, &conf, registry);
        goto out;
    }
    world_store = pd_world_store_create();
    if (!world_store) {
        pd_log_error("out of memory creating the world store");
        goto out;
    }

    uint32_t threads = conf.threads ? conf.threads : uv_available_parallelism();
    if (uv_loop_init(&loop) != 0) {
        pd_log_error("cannot create the event loop");
        goto out;
    }
    loop_ready = 1;
    pd_server_config_source source = {args.config_path, pd__apply_args, &args};
    server = pd_server_create(&loop, &conf, registry, &source);
    if (server)
        pool = pd_server_pool_create(server, threads);
    metrics = pd_metrics_create(PATHD_VERSION);
    if (!server || !pool || !metrics) {
        pd_log_error("out of memory creating the server");
        goto out;
    }
    pd_server_set_world_store(server, world_store);
    pd_server_set_metrics(server, metrics);
    /* Before the listener announces itself: a SIGHUP or SIGTERM sent as soon
     * as "listening on" appears must reach our handlers, not kill the process. */
    if (pd_server_watch_signals(server) != 0) {
        pd_log_error("cannot install signal handlers");
        goto out;
    }
    if (conf.metrics_enabled) {
        metrics_source = (pd__metrics_source){server, pool};
        metrics_http = pd_metrics_http_start(&loop, conf.metrics_host, conf.metrics_port, NULL, metrics,
                                             registry, pd__metrics_gauges, &metrics_source, err,
                                             sizeof err);
        if (!metrics_http) {
            pd_log_error("metrics: %s", err);
            goto out;
        }
        pd_conf_format_address(metrics_addr, conf.metrics_host, pd_metrics_http_port(metrics_http));
        pd_server_set_metrics_port(server, pd_metrics_http_port(metrics_http));
        pd_metrics_http_set_ready(metrics_http, pd_server_ready, server);
        pd_log_info("metrics on http://%s/metrics", metrics_addr);
    }

    /* The scenes load while the loop runs: /livez answers and /readyz says
     * "loading scenes" meanwhile. Portals and pinned routes are checked
     * against the loaded maps; a config whose world does not fit its scenes
     * is refused like a bad map. */
    int loaded = pd_server_load(server, pool, &conf, err, sizeof err);
    if (loaded < 0) {
        pd_log_error("%s: %s", args.config_path, err);
        goto out;
    }
    if (loaded > 0) {
        pd_log_info("stopped while loading the scenes");
        status = 0;
        goto out;
    }
    /* The journal (data_dir) replays over the config's scenes before the
     * request port listens: a client never sees the state before it. */
    int journal = pd_server_open_journal(server, err, sizeof err);
    if (journal < 0) {
        pd_log_error("%s", err);
        goto out;
    }
    if (journal > 0) {
        pd_log_info("stopped while replaying the journal");
        status = 0;
        goto out;
    }
    if (pd_server_start(server, pool, err, sizeof err) != 0) {
        pd_log_error("%s", err);
        goto out;
    }
    size_t n_scenes = pd_registry_count(registry);
    pd_log_info("pathd started version=%s config=%s scenes=%zu threads=%" PRIu32
                " listen=%s metrics=%s log_level=%s",
                PATHD_VERSION, args.config_path, n_scenes, threads,
                pd_conf_format_address(listen_addr, conf.listen_host, pd_server_port(server)), metrics_addr,
                pd_log_level_name(conf.log_level));

    uv_run(&loop, UV_RUN_DEFAULT);
    status = 0;

out:
    /* First: a scrape reads the pool and the server. */
    pd_metrics_http_close(metrics_http);
    pd_server_pool_destroy(pool);
    pd_server_destroy(server);
    /* Lets the metrics handles finish closing before the loop goes. */
    if (loop_ready)
        uv_run(&loop, UV_RUN_DEFAULT);
    if (loop_ready && uv_loop_close(&loop) != 0)
        pd_log_warn("event loop closed with handles still open");
    pd_metrics_destroy(metrics);
    pd_world_store_destroy(world_store);
    pd_registry_destroy(registry);
    pd_conf_free(&conf);
    return status;
}
