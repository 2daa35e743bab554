/*
 * pathd_scale.c - a control client beside a load that grows with the
 * server's state (issue 29, findings 12 and 13), from one run.
 *
 * Two clients are measured: a control client that pings once a millisecond
 * (latency p50, p99, max) and a writer that updates one cell of
 * --update-scene in a closed loop (updates per second). Each phase runs for
 * --seconds: first alone, then again beside the load, which is one of
 *
 *   --watches N    N Watches of --watch-scene (default: the updated scene,
 *                  so every update reaches every watch), opened --per-conn
 *                  to a connection, each connection drained by a thread;
 *   --scrapes N    N threads fetching /metrics from --metrics in a loop.
 *
 * --instances M first makes M instances of --template (4 connections),
 * printing the creation rate of the first and the last 1,000, so a
 * registry of many scenes can be scraped. It only connects to --server
 * and --metrics and always stops by itself.
 *
 *   pathd-scale --server 127.0.0.1:7420 --watches 1000 --seconds 5
 *   pathd-scale --server ... --metrics 127.0.0.1:9420 --instances 30000 --scrapes 8
 */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "pathd_client.h"

#define SCALE_MAX_THREADS 256          /* watcher connections or scrapers */
#define SCALE_MAX_SECONDS 600
#define SCALE_PING_GAP_US 1000         /* the control client's pause between pings */
#define SCALE_CREATORS 4               /* connections making instances */
#define SCALE_RATE_WINDOW 1000         /* instances per creation-rate sample */
#define SCALE_MAX_PINGS (SCALE_MAX_SECONDS * 1000)
#define SCALE_HTTP_TIMEOUT_S 60

typedef struct scale_cfg {
    const char *server, *metrics, *update_scene, *watch_scene, *tmpl;
    int watches, per_conn, scrapes, instances, seconds;
} scale_cfg;

static scale_cfg cfg = {"127.0.0.1:7420", NULL, "town", NULL, "town", 0, 64, 0, 0, 5};
static atomic_int stop_load;
static atomic_int stop_phase;

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static pdc_conn *connect_or_die(const char *who)
{
    char err[256];
    pdc_conn *c = pdc_connect(cfg.server, 30000, err, sizeof err);
    if (!c) {
        fprintf(stderr, "pathd-scale: %s: %s\n", who, err);
        exit(1);
    }
    return c;
}

/* ---- the measured clients ------------------------------------------------ */

typedef struct phase_result {
    uint64_t *rtt;
    size_t n_rtt;
    uint64_t updates;
    double seconds;
} phase_result;

static void *ping_main(void *arg)
{
    phase_result *r = arg;
    pdc_conn *c = connect_or_die("control client");
    while (!atomic_load(&stop_phase) && r->n_rtt < SCALE_MAX_PINGS) {
        uint64_t rtt = 0;
        if (pdc_ping(c, &rtt) == PDC_OK)
            r->rtt[r->n_rtt++] = rtt;
        usleep(SCALE_PING_GAP_US);
    }
    pdc_close(c);
    return NULL;
}

static void *update_main(void *arg)
{
    phase_result *r = arg;
    pdc_conn *c = connect_or_die("writer");
    pdc_xy cell = {1, 1};
    for (uint32_t k = 0; !atomic_load(&stop_phase); k++) {
        pdc_update_req u = {.scene = cfg.update_scene, .cells = &cell, .cell_count = 1,
                            .op = PDC_UPDATE_COST, .cost = 2 + (k & 1)};
        pdc_update_result out;
        if (pdc_update_cells(c, &u, &out) == PDC_OK)
            r->updates++;
    }
    pdc_close(c);
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void run_phase(const char *name)
{
    phase_result r = {.rtt = calloc(SCALE_MAX_PINGS, sizeof(uint64_t))};
    pthread_t pt, ut;
    atomic_store(&stop_phase, 0);
    uint64_t t0 = now_us();
    pthread_create(&pt, NULL, ping_main, &r);
    pthread_create(&ut, NULL, update_main, &r);
    sleep((unsigned)cfg.seconds);
    atomic_store(&stop_phase, 1);
    pthread_join(pt, NULL);
    pthread_join(ut, NULL);
    r.seconds = (double)(now_us() - t0) / 1e6;
    qsort(r.rtt, r.n_rtt, sizeof *r.rtt, cmp_u64);
    uint64_t p50 = r.n_rtt ? r.rtt[r.n_rtt / 2] : 0, p99 = r.n_rtt ? r.rtt[r.n_rtt * 99 / 100] : 0;
    uint64_t max = r.n_rtt ? r.rtt[r.n_rtt - 1] : 0;
    printf("%-7s ping p50 %6.2f ms  p99 %7.2f ms  max %7.2f ms  (%zu pings)   updates %7.0f/s\n", name,
           (double)p50 / 1000.0, (double)p99 / 1000.0, (double)max / 1000.0, r.n_rtt,
           (double)r.updates / r.seconds);
    fflush(stdout);
    free(r.rtt);
}

/* ---- the loads ----------------------------------------------------------- */

typedef struct watcher {
    pdc_conn *conn;
    int watches;
    uint64_t events;
    pthread_t thread;
} watcher;

static void *watcher_main(void *arg)
{
    watcher *w = arg;
    while (!atomic_load(&stop_load)) {
        pdc_watch_event ev;
        int st = pdc_watch_next(w->conn, 100, &ev);
        if (st == PDC_OK) {
            w->events++;
            if (ev.status == PDC_WATCH_OVERFLOW)
                fprintf(stderr, "pathd-scale: a watch overflowed: %s\n", ev.message);
            pdc_watch_event_free(&ev);
        } else if (st != PDC_ERR_TIMEOUT) {
            fprintf(stderr, "pathd-scale: watcher: %s\n", pdc_status_name(st));
            break;
        }
    }
    return NULL;
}

static int open_watches(watcher *ws)
{
    const char *scene = cfg.watch_scene ? cfg.watch_scene : cfg.update_scene;
    int conns = (cfg.watches + cfg.per_conn - 1) / cfg.per_conn, opened = 0;
    for (int i = 0; i < conns; i++) {
        ws[i].conn = connect_or_die("watcher");
        for (int k = 0; k < cfg.per_conn && opened < cfg.watches; k++) {
            uint64_t id;
            int st = pdc_watch(ws[i].conn, &scene, 1, &id);
            if (st != PDC_OK) {
                fprintf(stderr, "pathd-scale: watch %d: %s: %s\n", opened, pdc_status_name(st),
                        pdc_last_error(ws[i].conn));
                exit(1);
            }
            ws[i].watches++;
            opened++;
        }
        pthread_create(&ws[i].thread, NULL, watcher_main, &ws[i]);
    }
    printf("load    %d watches of '%s' on %d connections\n", opened, scene, conns);
    return conns;
}

typedef struct scraper {
    pthread_t thread;
    uint64_t scrapes, bytes, us;
} scraper;

/* One GET /metrics; returns the bytes of the answer, 0 on failure. */
static size_t scrape_once(void)
{
    char host[256];
    const char *colon = strrchr(cfg.metrics, ':');
    if (!colon || (size_t)(colon - cfg.metrics) >= sizeof host)
        return 0;
    memcpy(host, cfg.metrics, (size_t)(colon - cfg.metrics));
    host[colon - cfg.metrics] = '\0';
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai;
    if (getaddrinfo(host, colon + 1, &hints, &ai) != 0)
        return 0;
    int fd = socket(ai->ai_family, SOCK_STREAM, 0);
    struct timeval tv = {SCALE_HTTP_TIMEOUT_S, 0};
    size_t total = 0;
    if (fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0 &&
        connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
        static const char get[] = "GET /metrics HTTP/1.0\r\n\r\n";
        char buf[65536];
        ssize_t got;
        if (send(fd, get, sizeof get - 1, 0) == (ssize_t)(sizeof get - 1))
            while ((got = recv(fd, buf, sizeof buf, 0)) > 0)
                total += (size_t)got;
    }
    if (fd >= 0)
        close(fd);
    freeaddrinfo(ai);
    return total;
}

static void *scraper_main(void *arg)
{
    scraper *s = arg;
    while (!atomic_load(&stop_load)) {
        uint64_t t0 = now_us();
        size_t n = scrape_once();
        if (n == 0) {
            usleep(10000);
            continue;
        }
        s->us += now_us() - t0;
        s->bytes += n;
        s->scrapes++;
    }
    return NULL;
}

typedef struct creator {
    pthread_t thread;
    int index;
    atomic_int *next;
    uint64_t *done_at;             /* per instance: when its answer came */
    int failed;
} creator;

static void *creator_main(void *arg)
{
    creator *cr = arg;
    pdc_conn *c = connect_or_die("creator");
    for (int i; (i = atomic_fetch_add(cr->next, 1)) < cfg.instances;) {
        char name[64];
        snprintf(name, sizeof name, "scale-%d", i);
        pdc_scene_change out;
        int st = pdc_create_instance(c, name, cfg.tmpl, &out);
        if (st != PDC_OK && st != PDC_SCENE_EXISTS) {
            fprintf(stderr, "pathd-scale: CreateInstance %s: %s: %s\n", name, pdc_status_name(st),
                    pdc_last_error(c));
            cr->failed = 1;
            break;
        }
        cr->done_at[i] = now_us();
    }
    pdc_close(c);
    return NULL;
}

static void make_instances(void)
{
    creator cr[SCALE_CREATORS];
    atomic_int next;
    atomic_init(&next, 0);
    uint64_t *done_at = calloc((size_t)cfg.instances, sizeof *done_at);
    uint64_t t0 = now_us();
    for (int i = 0; i < SCALE_CREATORS; i++) {
        cr[i] = (creator){.index = i, .next = &next, .done_at = done_at};
        pthread_create(&cr[i].thread, NULL, creator_main, &cr[i]);
    }
    int failed = 0;
    for (int i = 0; i < SCALE_CREATORS; i++) {
        pthread_join(cr[i].thread, NULL);
        failed |= cr[i].failed;
    }
    if (failed)
        exit(1);
    qsort(done_at, (size_t)cfg.instances, sizeof *done_at, cmp_u64);
    int w = cfg.instances < SCALE_RATE_WINDOW ? cfg.instances : SCALE_RATE_WINDOW;
    double first = (double)(done_at[w - 1] - t0) / 1e6;
    double last = (double)(done_at[cfg.instances - 1] - done_at[cfg.instances - w]) / 1e6;
    printf("setup   %d instances of '%s' in %.1f s: first %d at %.0f/s, last %d at %.0f/s\n", cfg.instances,
           cfg.tmpl, (double)(done_at[cfg.instances - 1] - t0) / 1e6, w, w / (first > 0 ? first : 1e-6), w,
           w / (last > 0 ? last : 1e-6));
    free(done_at);
}

/* ---- main ---------------------------------------------------------------- */

static int usage(void)
{
    fprintf(stderr,
            "usage: pathd-scale [--server H:P] [--update-scene S] [--seconds D]\n"
            "                   [--watches N [--watch-scene S] [--per-conn K]]\n"
            "                   [--metrics H:P [--instances M [--template T]] [--scrapes N]]\n");
    return 2;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"server", required_argument, NULL, 's'},   {"metrics", required_argument, NULL, 'm'},
        {"update-scene", required_argument, NULL, 'u'}, {"watch-scene", required_argument, NULL, 'w'},
        {"template", required_argument, NULL, 't'}, {"watches", required_argument, NULL, 'W'},
        {"per-conn", required_argument, NULL, 'k'}, {"scrapes", required_argument, NULL, 'S'},
        {"instances", required_argument, NULL, 'i'}, {"seconds", required_argument, NULL, 'd'},
        {NULL, 0, NULL, 0},
    };
    for (int o; (o = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        switch (o) {
        case 's': cfg.server = optarg; break;
        case 'm': cfg.metrics = optarg; break;
        case 'u': cfg.update_scene = optarg; break;
        case 'w': cfg.watch_scene = optarg; break;
        case 't': cfg.tmpl = optarg; break;
        case 'W': cfg.watches = atoi(optarg); break;
        case 'k': cfg.per_conn = atoi(optarg); break;
        case 'S': cfg.scrapes = atoi(optarg); break;
        case 'i': cfg.instances = atoi(optarg); break;
        case 'd': cfg.seconds = atoi(optarg); break;
        default: return usage();
        }
    }
    int threads = cfg.per_conn > 0 ? (cfg.watches + cfg.per_conn - 1) / cfg.per_conn : 0;
    if (cfg.seconds < 1 || cfg.seconds > SCALE_MAX_SECONDS || cfg.per_conn < 1 || cfg.watches < 0 ||
        cfg.scrapes < 0 || cfg.instances < 0 || threads > SCALE_MAX_THREADS || cfg.scrapes > SCALE_MAX_THREADS ||
        ((cfg.scrapes || cfg.instances) && !cfg.metrics) || optind != argc)
        return usage();
    if (cfg.instances)
        make_instances();
    if (cfg.scrapes) {
        size_t one = scrape_once();
        printf("setup   one /metrics answer: %zu bytes\n", one);
    }

    run_phase("alone");
    atomic_store(&stop_load, 0);
    static watcher ws[SCALE_MAX_THREADS];
    static scraper sc[SCALE_MAX_THREADS];
    int conns = cfg.watches ? open_watches(ws) : 0;
    for (int i = 0; i < cfg.scrapes; i++)
        pthread_create(&sc[i].thread, NULL, scraper_main, &sc[i]);
    if (cfg.scrapes)
        printf("load    %d threads scraping http://%s/metrics in a loop\n", cfg.scrapes, cfg.metrics);
    run_phase("loaded");
    atomic_store(&stop_load, 1);
    uint64_t events = 0, scrapes = 0, bytes = 0, us = 0;
    for (int i = 0; i < conns; i++) {
        pthread_join(ws[i].thread, NULL);
        events += ws[i].events;
        pdc_close(ws[i].conn);
    }
    for (int i = 0; i < cfg.scrapes; i++) {
        pthread_join(sc[i].thread, NULL);
        scrapes += sc[i].scrapes;
        bytes += sc[i].bytes;
        us += sc[i].us;
    }
    if (conns)
        printf("load    %" PRIu64 " watch events read\n", events);
    if (cfg.scrapes)
        printf("load    %" PRIu64 " scrapes, %.1f KB and %.1f ms each on average\n", scrapes,
               scrapes ? (double)bytes / (double)scrapes / 1000.0 : 0.0,
               scrapes ? (double)us / (double)scrapes / 1000.0 : 0.0);
    return 0;
}
