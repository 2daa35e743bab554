/*
 * pathd_load.c - load generator for pathd, in the spirit of redis-benchmark.
 *
 * It measures what a game server would see end to end: C connections, each
 * keeping P path requests in flight, drawn round-robin from a Moving AI
 * scenario file, for D seconds (or until N requests). While it runs it prints
 * progress once a second; at the end it prints totals, answers by status,
 * throughput and latency percentiles (every latency is recorded and sorted):
 * the round trip, and beside it the server's own share of it that every
 * answer carries (Response.server_us: from its read of the request to its
 * answer handed to the socket) and the search's within that (search_us).
 *
 * One thread per connection, each driving its own pdc_conn through the
 * pipelined client API: simple, and with a few dozen connections the threads
 * cost nothing next to the server's work. It connects only to --server
 * (default 127.0.0.1:7420) and always stops by itself after the duration.
 *
 * Closed loop by default (a connection sends when an answer frees a slot).
 * --burst sends a connection's whole pipeline in one write, then waits for
 * every answer before sending the next, as redis-benchmark -P does: the
 * traffic shape its figures come from (the server reads the whole pipeline
 * at once).
 * --rate R runs open loop, as wrk2 does: request i of a connection is due
 * at start + i / (R / CONNS), latency counts from that intended time, so a
 * server that stalls cannot hide the queue it builds. --metrics HOST:PORT
 * reads process_cpu_seconds_total from the server's /metrics before and
 * after the run and prints the server's CPU microseconds per request.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "pathd_client.h"

/* Limits, with why. */
#define LOAD_MAX_CONNECTIONS 1024      /* one thread each; more measures the host, not pathd */
#define LOAD_MAX_PIPELINE 1024         /* far above the server's per-connection in-flight cap */
#define LOAD_DEFAULT_SECONDS 10
#define LOAD_MAX_SECONDS 86400         /* a day: a typo should not run forever */
#define LOAD_DRAIN_TIMEOUT_MS 5000     /* after the run, wait this long for in-flight answers */
#define LOAD_RECV_SLICE_MS 100         /* how often a worker looks at the stop flag */
#define LOAD_RECONNECT_PAUSE_MS 100    /* between reconnect attempts after a lost connection */
#define LOAD_MAX_SCEN_LINE 1024        /* longest scenario line, in bytes */
/* Latency samples kept in total (16 bytes each, 512 MiB). Beyond this, each
 * worker keeps a uniform reservoir sample, so percentiles stay unbiased. */
#define LOAD_MAX_LATENCY_SAMPLES (32u * 1024u * 1024u)
#define LOAD_MAX_RATE 10000000.0       /* requests per second: far beyond one host */
#define LOAD_METRICS_MAX_BYTES (1u << 20)  /* largest /metrics answer read */
#define LOAD_METRICS_TIMEOUT_S 5       /* for connecting to and reading /metrics */
/* Client-side failures are counted by -status (PDC_ERR_* are small negatives). */
#define LOAD_CLIENT_ERROR_SLOTS 8

typedef struct load_pair {
    int32_t sx, sy, gx, gy;
} load_pair;

typedef struct load_config {
    const char *server;
    const char *scene;
    const char *scen_path;
    int connections;
    int pipeline;
    int seconds;
    uint64_t max_requests;      /* 0 = no limit */
    int every;
    int quiet;
    int json;
    pdc_style style;
    double rate;                /* requests per second over all connections; 0 = closed loop */
    int burst;                  /* refill only once the whole pipeline has been answered */
    const char *metrics;        /* HOST:PORT of the server's /metrics, or NULL */
} load_config;

/* State all workers share; counters are atomics read by the progress line. */
typedef struct load_shared {
    const load_config *cfg;
    const load_pair *pairs;
    size_t npairs;
    atomic_uint_fast64_t next_pair;
    atomic_uint_fast64_t issued;
    atomic_uint_fast64_t completed;
    atomic_uint_fast64_t errors;
    atomic_int stop;
    atomic_int workers_done;
} load_shared;

typedef struct load_slot {
    uint64_t id;
    uint64_t sent_us;
} load_slot;

/* One answered request's times, in µs: the round trip the client saw and
 * the server's own (pdc_timing), kept together so a reservoir sample keeps
 * them as a set. */
typedef struct load_sample {
    uint64_t rtt_us;
    uint32_t server_us, search_us;
} load_sample;

typedef struct load_worker {
    pthread_t thread;
    load_shared *sh;
    load_slot *slots;           /* pipeline entries; id 0 = free */
    int inflight;
    uint64_t next_due_us;       /* --rate: when this connection's next request is due */
    uint64_t interval_us;       /* --rate: between its requests (>= 1) */
    load_sample *latencies;     /* answered requests only */
    size_t nlat, caplat, maxlat;
    uint64_t answered;          /* samples offered to the reservoir */
    uint64_t rng;
    uint64_t status_counts[PDC_WIRE_STATUS_COUNT];
    uint64_t client_errors[LOAD_CLIENT_ERROR_SLOTS];
    uint64_t other_status;      /* wire status numbers this build does not know */
    uint64_t reconnects;
    int connect_failed;
    char connect_error[PDC_MESSAGE_MAX];
} load_worker;

static uint64_t load_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void load_sleep_us(uint64_t us)
{
    struct timespec ts = {(time_t)(us / 1000000u), (long)(us % 1000000u) * 1000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static void load_usage(FILE *out)
{
    fprintf(out,
            "usage: pathd-load [--server HOST:PORT] [-c CONNS] [-P PIPELINE] [-d SECONDS]\n"
            "                  [-n MAX_REQUESTS] --scene NAME --scen FILE.map.scen\n"
            "                  [--every K] [--style cells|corners|smooth] [--rate R]\n"
            "                  [--burst] [--metrics HOST:PORT] [--quiet] [--json]\n"
            "\n"
            "  --server HOST:PORT  where to connect (default %s)\n"
            "  -c CONNS            connections, one thread each (default 1, max %d)\n"
            "  -P PIPELINE         requests in flight per connection (default 1, max %d)\n"
            "  -d SECONDS          run time (default %d, max %d)\n"
            "  -n MAX_REQUESTS     stop after this many requests (default: no limit)\n"
            "  --scene NAME        scene name on the server\n"
            "  --scen FILE         Moving AI scenario file; its start/goal cells are used\n"
            "  --every K           use every K-th scenario line (default 1)\n"
            "  --style S           waypoint style asked for (default cells)\n"
            "  --rate R            open loop: R requests/s over all connections, latency\n"
            "                      from each request's intended send time (as wrk2)\n"
            "  --burst             send the whole pipeline in one write, then wait for all of its answers\n"
            "                      (as redis-benchmark -P); not with --rate\n"
            "  --metrics HOST:PORT the server's metrics port: print its CPU us per request\n"
            "  --quiet             no progress lines\n"
            "  --json              print the summary as one JSON object\n",
            PDC_DEFAULT_SERVER, LOAD_MAX_CONNECTIONS, LOAD_MAX_PIPELINE, LOAD_DEFAULT_SECONDS,
            LOAD_MAX_SECONDS);
}

static int load_parse_long(const char *s, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

/* Returns -1 to go on, or an exit code. */
static int load_parse_args(int argc, char **argv, load_config *cfg)
{
    static const struct option longopts[] = {
        {"server", required_argument, NULL, 's'},
        {"scene", required_argument, NULL, 'S'},
        {"scen", required_argument, NULL, 'f'},
        {"every", required_argument, NULL, 'e'},
        {"style", required_argument, NULL, 'y'},
        {"rate", required_argument, NULL, 'r'},
        {"burst", no_argument, NULL, 'b'},
        {"metrics", required_argument, NULL, 'm'},
        {"quiet", no_argument, NULL, 'q'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    memset(cfg, 0, sizeof *cfg);
    cfg->server = PDC_DEFAULT_SERVER;
    cfg->connections = 1;
    cfg->pipeline = 1;
    cfg->seconds = LOAD_DEFAULT_SECONDS;
    cfg->every = 1;
    int opt;
    long v;
    while ((opt = getopt_long(argc, argv, "c:P:d:n:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 's': cfg->server = optarg; break;
        case 'S': cfg->scene = optarg; break;
        case 'f': cfg->scen_path = optarg; break;
        case 'q': cfg->quiet = 1; break;
        case 'm': cfg->metrics = optarg; break;
        case 'y':
            if (!strcmp(optarg, "cells"))
                cfg->style = PDC_STYLE_CELLS;
            else if (!strcmp(optarg, "corners"))
                cfg->style = PDC_STYLE_CORNERS;
            else if (!strcmp(optarg, "smooth"))
                cfg->style = PDC_STYLE_SMOOTH;
            else
                goto bad;
            break;
        case 'r': {
            char *end;
            cfg->rate = strtod(optarg, &end);
            if (end == optarg || *end || !(cfg->rate > 0 && cfg->rate <= LOAD_MAX_RATE))
                goto bad;
            break;
        }
        case 'j': cfg->json = 1; break;
        case 'b': cfg->burst = 1; break;
        case 'h': load_usage(stdout); return 0;
        case 'c':
            if (load_parse_long(optarg, 1, LOAD_MAX_CONNECTIONS, &v))
                goto bad;
            cfg->connections = (int)v;
            break;
        case 'P':
            if (load_parse_long(optarg, 1, LOAD_MAX_PIPELINE, &v))
                goto bad;
            cfg->pipeline = (int)v;
            break;
        case 'd':
            if (load_parse_long(optarg, 1, LOAD_MAX_SECONDS, &v))
                goto bad;
            cfg->seconds = (int)v;
            break;
        case 'n':
            if (load_parse_long(optarg, 1, LONG_MAX, &v))
                goto bad;
            cfg->max_requests = (uint64_t)v;
            break;
        case 'e':
            if (load_parse_long(optarg, 1, 1000000, &v))
                goto bad;
            cfg->every = (int)v;
            break;
        default:
            load_usage(stderr);
            return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "pathd-load: unexpected argument %s\n", argv[optind]);
        return 2;
    }
    if (cfg->burst && cfg->rate > 0) {
        fprintf(stderr, "pathd-load: --burst is closed loop; it does not go with --rate\n");
        return 2;
    }
    if (!cfg->scene || !cfg->scene[0] || !cfg->scen_path) {
        fprintf(stderr, "pathd-load: --scene and --scen are required (see --help)\n");
        return 2;
    }
    return -1;
bad:
    fprintf(stderr, "pathd-load: bad value \"%s\" for -%c (see --help)\n", optarg, opt);
    return 2;
}

/* Reads start/goal cells from a Moving AI .scen file (version 1 format:
 * bucket map width height sx sy gx gy optimal), keeping every k-th line. */
static int load_read_scen(const char *path, int every, load_pair **out, size_t *count)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "pathd-load: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    char line[LOAD_MAX_SCEN_LINE];
    load_pair *pairs = NULL;
    size_t n = 0, cap = 0, lineno = 0, kept_index = 0;
    int rc = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (!strncmp(line, "version", 7) || line[0] == '\n')
            continue;
        int bucket, w, h, sx, sy, gx, gy;
        char map[256];
        double optimal;
        if (sscanf(line, "%d %255s %d %d %d %d %d %d %lf", &bucket, map, &w, &h, &sx, &sy,
                   &gx, &gy, &optimal) != 9) {
            fprintf(stderr, "pathd-load: %s:%zu: not a scenario line\n", path, lineno);
            rc = -1;
            break;
        }
        if (kept_index++ % (size_t)every)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 256;
            load_pair *grown = realloc(pairs, cap * sizeof *grown);
            if (!grown) {
                fprintf(stderr, "pathd-load: out of memory\n");
                rc = -1;
                break;
            }
            pairs = grown;
        }
        pairs[n++] = (load_pair){sx, sy, gx, gy};
    }
    fclose(f);
    if (rc == 0 && n == 0) {
        fprintf(stderr, "pathd-load: %s has no scenarios\n", path);
        rc = -1;
    }
    if (rc != 0) {
        free(pairs);
        return -1;
    }
    *out = pairs;
    *count = n;
    return 0;
}

/* Keeps a latency sample: all of them until maxlat, then a uniform reservoir
 * (Vitter's algorithm R) so memory stays bounded on very long runs. */
static void load_record_latency(load_worker *w, load_sample us)
{
    w->answered++;
    if (w->nlat < w->maxlat) {
        if (w->nlat == w->caplat) {
            size_t cap = w->caplat ? w->caplat * 2 : 4096;
            if (cap > w->maxlat)
                cap = w->maxlat;
            load_sample *grown = realloc(w->latencies, cap * sizeof *grown);
            if (!grown)
                return;         /* one lost sample is better than a failed run */
            w->latencies = grown;
            w->caplat = cap;
        }
        w->latencies[w->nlat++] = us;
        return;
    }
    /* xorshift64: cheap, and quality is ample for picking sample slots. */
    w->rng ^= w->rng << 13;
    w->rng ^= w->rng >> 7;
    w->rng ^= w->rng << 17;
    uint64_t j = w->rng % w->answered;
    if (j < w->maxlat)
        w->latencies[j] = us;
}

static void load_count(load_worker *w, int status)
{
    if (status >= 0 && status < PDC_WIRE_STATUS_COUNT)
        w->status_counts[status]++;
    else if (status < 0 && -status < LOAD_CLIENT_ERROR_SLOTS)
        w->client_errors[-status]++;
    else
        w->other_status++;
    if (status != PDC_OK && status != PDC_PARTIAL)
        atomic_fetch_add(&w->sh->errors, 1);
    atomic_fetch_add(&w->sh->completed, 1);
}

/* Takes one request from the -n budget; 0 when it is used up. */
static int load_take_budget(load_shared *sh)
{
    uint64_t max = sh->cfg->max_requests;
    return max == 0 || atomic_fetch_add(&sh->issued, 1) < max;
}

static int load_budget_left(load_shared *sh)
{
    uint64_t max = sh->cfg->max_requests;
    return max == 0 || atomic_load(&sh->issued) < max;
}

/* Slots are probed from id % pipeline on: the ids of a connection are
 * consecutive, so a request almost always sits in its first probe and
 * finding it costs no scan of a deep pipeline (a slot freed before a later
 * one of the same probe run leaves a gap, so a search never stops early:
 * at worst it visits every slot, as a plain scan would). */
static void load_finish_slot(load_worker *w, const pdc_path_result *r)
{
    const int n = w->sh->cfg->pipeline;
    for (int k = 0, i = (int)(r->id % (uint64_t)n); k < n; k++, i = i + 1 < n ? i + 1 : 0) {
        if (w->slots[i].id != r->id || r->id == 0)
            continue;
        if (r->status >= 0) {
            /* Clamped, not wrapped: a server_us past 71 minutes is not a
             * latency this tool measures. */
            load_sample sample = {load_now_us() - w->slots[i].sent_us,
                                  r->timing.server_us < UINT32_MAX ? (uint32_t)r->timing.server_us : UINT32_MAX,
                                  r->timing.search_us < UINT32_MAX ? (uint32_t)r->timing.search_us : UINT32_MAX};
            load_record_latency(w, sample);
        }
        w->slots[i].id = 0;
        w->inflight--;
        load_count(w, r->status);
        return;
    }
}

/* The next request, round-robin over the scenario pairs. */
static pdc_path_req load_next_request(load_shared *sh)
{
    const load_pair *p = &sh->pairs[atomic_fetch_add(&sh->next_pair, 1) % sh->npairs];
    pdc_path_req req;
    memset(&req, 0, sizeof req);
    req.scene = sh->cfg->scene;
    req.start = pdc_cell(p->sx, p->sy);
    req.goal = pdc_cell(p->gx, p->gy);
    req.style = sh->cfg->style;
    return req;
}

/* Takes a free slot for request id, sent (or, open loop, due) at sent_us. */
static void load_take_slot(load_worker *w, uint64_t id, uint64_t sent_us)
{
    const int n = w->sh->cfg->pipeline;
    int i = (int)(id % (uint64_t)n);
    while (w->slots[i].id != 0)
        i = i + 1 < n ? i + 1 : 0;
    w->slots[i].id = id;
    w->slots[i].sent_us = sent_us;
    w->inflight++;
}

/* Sends reqs[0..n) in one write and puts them in flight, request i timed
 * from first_us + i * step_us. Returns 0, or -1 once the connection is
 * gone (the requests are counted as failed). */
static int load_send_batch(load_worker *w, pdc_conn *c, const pdc_path_req *reqs, int n, uint64_t *ids,
                           uint64_t first_us, uint64_t step_us)
{
    if (n == 0)
        return 0;
    int r = pdc_send_find_paths(c, reqs, (size_t)n, ids);
    if (r != PDC_OK) {
        for (int i = 0; i < n; i++)
            load_count(w, r);
        return -1;
    }
    for (int i = 0; i < n; i++)
        load_take_slot(w, ids[i], first_us + (uint64_t)i * step_us);
    return 0;
}

/* --burst, with the pipeline empty: sends a whole pipeline (or what the -n
 * budget leaves) in one write, as redis-benchmark -P does, so the server
 * finds every request of it in one read. Returns 0, or -1 once the
 * connection is gone (the requests are counted as failed). */
static int load_fill_burst(load_worker *w, pdc_conn *c, pdc_path_req *reqs, uint64_t *ids)
{
    load_shared *sh = w->sh;
    int n = 0;
    while (n < sh->cfg->pipeline && !atomic_load(&sh->stop) && load_take_budget(sh))
        reqs[n++] = load_next_request(sh);
    return load_send_batch(w, c, reqs, n, ids, load_now_us(), 0);
}

/* Closed loop: sends until the pipeline is full, one write per request.
 * Returns 0, or -1 once the connection is gone (the failed request is
 * counted). */
static int load_fill(load_worker *w, pdc_conn *c)
{
    load_shared *sh = w->sh;
    while (w->inflight < sh->cfg->pipeline && !atomic_load(&sh->stop) && load_take_budget(sh)) {
        pdc_path_req req = load_next_request(sh);
        uint64_t id;
        int r = pdc_send_find_path(c, &req, &id);
        if (r != PDC_OK) {
            load_count(w, r);
            return -1;
        }
        load_take_slot(w, id, load_now_us());
    }
    return 0;
}

/* Open loop: sends every request due by now that the pipeline has room
 * for, all in one write, so a generator that fell behind its schedule
 * catches up with one system call instead of one per request (on two
 * shared cores its own CPU is what limits the load it can offer). Each
 * request's clock starts when it was due, even if a full pipeline held it
 * back. Returns 0, or -1 once the connection is gone (the requests are
 * counted as failed). */
static int load_fill_due(load_worker *w, pdc_conn *c, pdc_path_req *reqs, uint64_t *ids)
{
    load_shared *sh = w->sh;
    const uint64_t now = load_now_us();
    const uint64_t first_due_us = w->next_due_us;
    int n = 0;
    while (w->inflight + n < sh->cfg->pipeline && !atomic_load(&sh->stop) && now >= w->next_due_us &&
           load_take_budget(sh)) {
        reqs[n++] = load_next_request(sh);
        w->next_due_us += w->interval_us;
    }
    return load_send_batch(w, c, reqs, n, ids, first_due_us, w->interval_us);
}

static void *load_worker_main(void *arg)
{
    load_worker *w = arg;
    load_shared *sh = w->sh;
    /* The load generator offers what it is told to, past the server's caps
     * when asked: the figures measure the server, not the client's queue. */
    pdc_conn *c = pdc_connect_flags(sh->cfg->server, 0, PDC_CONNECT_NO_FLOW_CONTROL, w->connect_error,
                                    sizeof w->connect_error);
    if (!c) {
        w->connect_failed = 1;
        atomic_fetch_add(&sh->workers_done, 1);
        return NULL;
    }
    /* --burst and --rate: the requests and ids of one write. */
    pdc_path_req *burst_reqs = NULL;
    uint64_t *burst_ids = NULL;
    if (sh->cfg->burst || sh->cfg->rate > 0) {
        burst_reqs = calloc((size_t)sh->cfg->pipeline, sizeof *burst_reqs);
        burst_ids = calloc((size_t)sh->cfg->pipeline, sizeof *burst_ids);
        if (!burst_reqs || !burst_ids) {
            free(burst_reqs);
            free(burst_ids);
            snprintf(w->connect_error, sizeof w->connect_error, "out of memory");
            w->connect_failed = 1;
            pdc_close(c);
            atomic_fetch_add(&sh->workers_done, 1);
            return NULL;
        }
    }
    uint64_t drain_deadline = 0;
    if (sh->cfg->rate > 0) {
        double per_conn = sh->cfg->rate / sh->cfg->connections;
        w->interval_us = (uint64_t)(1e6 / per_conn);
        if (w->interval_us == 0)
            w->interval_us = 1;
        w->next_due_us = load_now_us();
    }
    for (;;) {
        int stopping = atomic_load(&sh->stop) || !load_budget_left(sh);
        if (!stopping && pdc_is_connected(c)) {
            if (w->interval_us)
                load_fill_due(w, c, burst_reqs, burst_ids);
            else if (!sh->cfg->burst)
                load_fill(w, c);
            else if (w->inflight == 0)
                load_fill_burst(w, c, burst_reqs, burst_ids);
        }
        if (w->inflight == 0 && w->interval_us && !stopping && pdc_is_connected(c)) {
            /* Open loop, nothing in flight: wait for the next due time. */
            uint64_t now = load_now_us();
            if (w->next_due_us > now)
                load_sleep_us(w->next_due_us - now < 1000u ? w->next_due_us - now : 1000u);
            continue;
        }
        if (w->inflight == 0) {
            if (stopping)
                break;
            if (!pdc_is_connected(c)) {
                load_sleep_us(LOAD_RECONNECT_PAUSE_MS * 1000u);
                if (atomic_load(&sh->stop))
                    break;
                w->reconnects++;
                pdc_reconnect(c);
            }
            continue;
        }
        if (stopping && drain_deadline == 0)
            drain_deadline = load_now_us() + LOAD_DRAIN_TIMEOUT_MS * 1000u;
        pdc_path_result r;
        /* Open loop: wake by the next due time (1 ms granularity; requests
         * due meanwhile go out together, timed from when they were due). */
        int slice = w->interval_us && !stopping ? 1 : LOAD_RECV_SLICE_MS;
        int status = pdc_recv_result(c, slice, &r);
        if (r.id != 0) {
            load_finish_slot(w, &r);
        } else if (status != PDC_ERR_TIMEOUT) {
            /* Nothing in flight on the client's side although we track some:
             * cannot happen with this loop, but never spin on it. */
            break;
        } else if (drain_deadline && load_now_us() > drain_deadline) {
            for (int i = 0; i < sh->cfg->pipeline; i++)
                if (w->slots[i].id != 0)
                    load_count(w, PDC_ERR_TIMEOUT);
            w->inflight = 0;
            break;
        }
        pdc_path_result_free(&r);
    }
    pdc_close(c);
    free(burst_reqs);
    free(burst_ids);
    atomic_fetch_add(&sh->workers_done, 1);
    return NULL;
}

static int load_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of a sorted array, the rank in whole numbers (p
 * in thousandths: 999 is p99.9), so no rounding can move it by one. */
static uint64_t load_percentile(const uint64_t *sorted, size_t n, uint64_t per_mille)
{
    if (n == 0)
        return 0;
    size_t rank = (size_t)((per_mille * n + 999u) / 1000u);
    return sorted[rank ? rank - 1 : 0];
}

/* Percentiles of one measure over the samples. */
typedef struct load_dist {
    uint64_t p50, p90, p99, p999, max;
} load_dist;

typedef struct load_totals {
    uint64_t requests, ok, status_counts[PDC_WIRE_STATUS_COUNT];
    uint64_t client_errors[LOAD_CLIENT_ERROR_SLOTS], other_status, reconnects;
    int connect_failures;
    double seconds, throughput;
    load_dist rtt, server, search;  /* round trip; Response.server_us, search_us */
    size_t samples;
    double server_cpu_us;       /* server CPU per request from /metrics; -1 = not measured */
} load_totals;

/* Sorts vals[0..n) (n > 0) and reads its percentiles. */
static load_dist load_dist_of(uint64_t *vals, size_t n)
{
    qsort(vals, n, sizeof *vals, load_cmp_u64);
    load_dist d = {load_percentile(vals, n, 500), load_percentile(vals, n, 900), load_percentile(vals, n, 990),
                   load_percentile(vals, n, 999), vals[n - 1]};
    return d;
}

static void load_summarise(load_worker *workers, int n, double seconds, load_totals *t)
{
    memset(t, 0, sizeof *t);
    size_t total_samples = 0;
    for (int i = 0; i < n; i++)
        total_samples += workers[i].nlat;
    load_sample *all = total_samples ? malloc(total_samples * sizeof *all) : NULL;
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        load_worker *w = &workers[i];
        for (int s = 0; s < PDC_WIRE_STATUS_COUNT; s++) {
            t->status_counts[s] += w->status_counts[s];
            t->requests += w->status_counts[s];
        }
        for (int s = 0; s < LOAD_CLIENT_ERROR_SLOTS; s++) {
            t->client_errors[s] += w->client_errors[s];
            t->requests += w->client_errors[s];
        }
        t->other_status += w->other_status;
        t->requests += w->other_status;
        t->reconnects += w->reconnects;
        t->connect_failures += w->connect_failed;
        if (all) {
            memcpy(all + k, w->latencies, w->nlat * sizeof *all);
            k += w->nlat;
        }
    }
    t->ok = t->status_counts[PDC_OK] + t->status_counts[PDC_PARTIAL];
    t->seconds = seconds;
    t->throughput = seconds > 0 ? (double)t->requests / seconds : 0.0;
    uint64_t *vals = all ? malloc(k * sizeof *vals) : NULL;
    if (vals) {
        t->samples = k;
        for (size_t i = 0; i < k; i++)
            vals[i] = all[i].rtt_us;
        t->rtt = load_dist_of(vals, k);
        for (size_t i = 0; i < k; i++)
            vals[i] = all[i].server_us;
        t->server = load_dist_of(vals, k);
        for (size_t i = 0; i < k; i++)
            vals[i] = all[i].search_us;
        t->search = load_dist_of(vals, k);
    }
    free(vals);
    free(all);
}

static void load_print_text(const load_config *cfg, const load_totals *t)
{
    printf("server %s scene %s connections %d pipeline %d\n", cfg->server, cfg->scene,
           cfg->connections, cfg->pipeline);
    printf("requests %" PRIu64 " in %.2f s (ok %" PRIu64 ", errors %" PRIu64 ")\n", t->requests,
           t->seconds, t->ok, t->requests - t->ok);
    for (int s = 0; s < PDC_WIRE_STATUS_COUNT; s++)
        if (t->status_counts[s])
            printf("  %-18s %" PRIu64 "\n", pdc_status_name(s), t->status_counts[s]);
    for (int s = 1; s < LOAD_CLIENT_ERROR_SLOTS; s++)
        if (t->client_errors[s])
            printf("  %-18s %" PRIu64 "\n", pdc_status_name(-s), t->client_errors[s]);
    if (t->other_status)
        printf("  %-18s %" PRIu64 "\n", "UNKNOWN_STATUS", t->other_status);
    if (t->connect_failures)
        printf("connections that failed to open: %d\n", t->connect_failures);
    if (t->reconnects)
        printf("reconnects: %" PRIu64 "\n", t->reconnects);
    printf("throughput %.1f req/s (OK/PARTIAL %.1f req/s)\n", t->throughput,
           t->seconds > 0 ? (double)t->ok / t->seconds : 0.0);
    const load_dist *d[3] = {&t->rtt, &t->server, &t->search};
    static const char *const name[3] = {"latency us", "server us ", "search us "};
    const char *what[3] = {cfg->rate > 0 ? " (round trip, from intended send times)" : " (round trip)",
                           " (in the server: request read to answer handed to the socket, Response.server_us)",
                           " (of which the search, Response.search_us)"};
    for (int i = 0; i < 3; i++)
        printf("%s p50 %" PRIu64 " p90 %" PRIu64 " p99 %" PRIu64 " p999 %" PRIu64 " max %" PRIu64 "%s\n", name[i],
               d[i]->p50, d[i]->p90, d[i]->p99, d[i]->p999, d[i]->max, what[i]);
    if (t->server_cpu_us >= 0)
        printf("server cpu %.2f us/request (process_cpu_seconds_total; ~10 ms resolution)\n",
               t->server_cpu_us);
}

static void load_json_dist(cJSON *o, const char *name, const load_dist *d, size_t samples)
{
    cJSON *lat = cJSON_AddObjectToObject(o, name);
    if (!lat)
        return;
    cJSON_AddNumberToObject(lat, "p50", (double)d->p50);
    cJSON_AddNumberToObject(lat, "p90", (double)d->p90);
    cJSON_AddNumberToObject(lat, "p99", (double)d->p99);
    cJSON_AddNumberToObject(lat, "p999", (double)d->p999);
    cJSON_AddNumberToObject(lat, "max", (double)d->max);
    cJSON_AddNumberToObject(lat, "samples", (double)samples);
}

static void load_print_json(const load_config *cfg, const load_totals *t)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "server", cfg->server);
    cJSON_AddStringToObject(o, "scene", cfg->scene);
    cJSON_AddNumberToObject(o, "connections", cfg->connections);
    cJSON_AddNumberToObject(o, "pipeline", cfg->pipeline);
    cJSON_AddNumberToObject(o, "seconds", t->seconds);
    cJSON_AddNumberToObject(o, "requests", (double)t->requests);
    cJSON_AddNumberToObject(o, "ok", (double)t->ok);
    cJSON_AddNumberToObject(o, "errors", (double)(t->requests - t->ok));
    cJSON *statuses = cJSON_AddObjectToObject(o, "statuses");
    for (int s = 0; statuses && s < PDC_WIRE_STATUS_COUNT; s++)
        if (t->status_counts[s])
            cJSON_AddNumberToObject(statuses, pdc_status_name(s), (double)t->status_counts[s]);
    for (int s = 1; statuses && s < LOAD_CLIENT_ERROR_SLOTS; s++)
        if (t->client_errors[s])
            cJSON_AddNumberToObject(statuses, pdc_status_name(-s), (double)t->client_errors[s]);
    if (statuses && t->other_status)
        cJSON_AddNumberToObject(statuses, "UNKNOWN_STATUS", (double)t->other_status);
    cJSON_AddNumberToObject(o, "connect_failures", t->connect_failures);
    cJSON_AddNumberToObject(o, "reconnects", (double)t->reconnects);
    cJSON_AddNumberToObject(o, "throughput", t->throughput);
    cJSON_AddNumberToObject(o, "ok_throughput", t->seconds > 0 ? (double)t->ok / t->seconds : 0.0);
    cJSON_AddNumberToObject(o, "rate", cfg->rate);
    cJSON_AddBoolToObject(o, "burst", cfg->burst);
    if (t->server_cpu_us >= 0)
        cJSON_AddNumberToObject(o, "server_cpu_us_per_request", t->server_cpu_us);
    load_json_dist(o, "latency_us", &t->rtt, t->samples);
    load_json_dist(o, "server_us", &t->server, t->samples);
    load_json_dist(o, "search_us", &t->search, t->samples);
    char *text = cJSON_PrintUnformatted(o);
    if (text)
        puts(text);
    free(text);
    cJSON_Delete(o);
}

/* process_cpu_seconds_total from http://HOSTPORT/metrics, or -1. A plain
 * HTTP/1.0 GET: the server closes after the answer. */
static double load_server_cpu(const char *hostport)
{
    char host[256];
    const char *colon = strrchr(hostport, ':');
    if (!colon || colon == hostport || (size_t)(colon - hostport) >= sizeof host)
        return -1;
    memcpy(host, hostport, (size_t)(colon - hostport));
    host[colon - hostport] = '\0';
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai;
    if (getaddrinfo(host, colon + 1, &hints, &ai) != 0)
        return -1;
    int fd = socket(ai->ai_family, SOCK_STREAM, 0);
    struct timeval tv = {LOAD_METRICS_TIMEOUT_S, 0};
    if (fd >= 0) {
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    }
    if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        if (fd >= 0)
            close(fd);
        freeaddrinfo(ai);
        return -1;
    }
    freeaddrinfo(ai);
    static const char get[] = "GET /metrics HTTP/1.0\r\n\r\n";
    char *buf = malloc(LOAD_METRICS_MAX_BYTES + 1);
    size_t n = 0;
    double value = -1;
    if (buf && send(fd, get, sizeof get - 1, 0) == (ssize_t)(sizeof get - 1)) {
        ssize_t got;
        while (n < LOAD_METRICS_MAX_BYTES && (got = recv(fd, buf + n, LOAD_METRICS_MAX_BYTES - n, 0)) > 0)
            n += (size_t)got;
        buf[n] = '\0';
        const char *line = strstr(buf, "\nprocess_cpu_seconds_total ");
        if (line)
            value = strtod(line + strlen("\nprocess_cpu_seconds_total "), NULL);
    }
    free(buf);
    close(fd);
    return value;
}

int main(int argc, char **argv)
{
    load_config cfg;
    int code = load_parse_args(argc, argv, &cfg);
    if (code >= 0)
        return code;
    load_pair *pairs;
    size_t npairs;
    if (load_read_scen(cfg.scen_path, cfg.every, &pairs, &npairs) != 0)
        return 1;

    load_shared sh = {.cfg = &cfg, .pairs = pairs, .npairs = npairs};
    atomic_init(&sh.next_pair, 0);
    atomic_init(&sh.issued, 0);
    atomic_init(&sh.completed, 0);
    atomic_init(&sh.errors, 0);
    atomic_init(&sh.stop, 0);
    atomic_init(&sh.workers_done, 0);
    load_worker *workers = calloc((size_t)cfg.connections, sizeof *workers);
    if (!workers) {
        free(pairs);
        return 1;
    }
    int started = 0;
    double cpu0 = cfg.metrics ? load_server_cpu(cfg.metrics) : -1;
    if (cfg.metrics && cpu0 < 0)
        fprintf(stderr, "pathd-load: no process_cpu_seconds_total at http://%s/metrics\n", cfg.metrics);
    uint64_t t0 = load_now_us();
    for (int i = 0; i < cfg.connections; i++) {
        load_worker *w = &workers[i];
        w->sh = &sh;
        w->maxlat = LOAD_MAX_LATENCY_SAMPLES / (size_t)cfg.connections;
        w->rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)(i + 1);
        w->slots = calloc((size_t)cfg.pipeline, sizeof *w->slots);
        if (!w->slots || pthread_create(&w->thread, NULL, load_worker_main, w) != 0) {
            fprintf(stderr, "pathd-load: cannot start connection thread %d\n", i);
            free(w->slots);
            w->slots = NULL;
            break;
        }
        started++;
    }

    /* Progress once a second until the time is up or every worker is done
     * (the -n budget ran out, or no connection could be opened). */
    uint64_t end = t0 + (uint64_t)cfg.seconds * 1000000u;
    uint64_t next_tick = t0 + 1000000u, last_completed = 0;
    while (atomic_load(&sh.workers_done) < started) {
        uint64_t now = load_now_us();
        if (now >= end)
            break;
        if (now >= next_tick) {
            uint64_t done = atomic_load(&sh.completed);
            if (!cfg.quiet)
                fprintf(stderr, "[%3.0fs] %" PRIu64 " requests, %" PRIu64 " req/s, %" PRIu64
                        " errors\n", (double)(now - t0) / 1e6, done, done - last_completed,
                        (uint64_t)atomic_load(&sh.errors));
            last_completed = done;
            next_tick += 1000000u;
        }
        uint64_t wake = next_tick < end ? next_tick : end;
        uint64_t nap = wake > now ? wake - now : 0;
        load_sleep_us(nap < 50000u ? nap : 50000u);
    }
    atomic_store(&sh.stop, 1);
    for (int i = 0; i < started; i++)
        pthread_join(workers[i].thread, NULL);
    double seconds = (double)(load_now_us() - t0) / 1e6;
    double cpu1 = cpu0 >= 0 ? load_server_cpu(cfg.metrics) : -1;

    for (int i = 0; i < started; i++)
        if (workers[i].connect_failed)
            fprintf(stderr, "pathd-load: connection %d: %s\n", i, workers[i].connect_error);
    load_totals totals;
    load_summarise(workers, started, seconds, &totals);
    totals.server_cpu_us = cpu1 >= cpu0 && cpu0 >= 0 && totals.requests
                               ? (cpu1 - cpu0) * 1e6 / (double)totals.requests : -1;
    if (cfg.json)
        load_print_json(&cfg, &totals);
    else
        load_print_text(&cfg, &totals);

    for (int i = 0; i < cfg.connections; i++) {
        free(workers[i].slots);
        free(workers[i].latencies);
    }
    free(workers);
    free(pairs);
    if (started == 0 || totals.connect_failures == started)
        return 3;
    return started == cfg.connections ? 0 : 1;
}
