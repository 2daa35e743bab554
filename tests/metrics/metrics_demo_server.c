/*
 * metrics_demo_server.c - serves the metrics port alone, for curl_test.sh.
 *
 * The daemon does not serve metrics yet, so this program stands in for it:
 * it loads the scenes of tests/data/net_server.json, records a fixed set of
 * requests, serves /metrics and /healthz on 127.0.0.1 (an ephemeral port
 * unless one is given as the only argument), prints "port N" on stdout once
 * it listens, and exits 0 after a clean shutdown on SIGTERM or SIGINT. A
 * timer ends it after PD_DEMO_LIFETIME_MS in case the script that started
 * it dies without stopping it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_conf.h"
#include "pd_http.h"
#include "pd_metrics.h"
#include "pd_scene.h"

/* Longest the demo runs unattended, in milliseconds: well past any test. */
#define PD_DEMO_LIFETIME_MS 60000

typedef struct pd_demo {
    pd_metrics_http *http;
    uv_signal_t sig_term, sig_int;
    uv_timer_t lifetime;
    int stopped;
} pd_demo;

/* The gauges the daemon would read from its server and worker pool. */
static void pd_demo_gauges(void *user, pd_metrics_gauges *out)
{
    (void)user;
    out->uptime_ms = 4200;
    out->connections = 3;
    out->in_flight = 2;
    out->queue_depth = 1;
    out->worker_threads = 4;
    out->worker_busy_ns = 2500000000u;
}

static void pd_demo_stop(pd_demo *d)
{
    if (d->stopped)
        return;
    d->stopped = 1;
    pd_metrics_http_close(d->http);
    uv_close((uv_handle_t *)&d->sig_term, NULL);
    uv_close((uv_handle_t *)&d->sig_int, NULL);
    uv_close((uv_handle_t *)&d->lifetime, NULL);
}

static void pd_demo_signal_cb(uv_signal_t *h, int signum)
{
    (void)signum;
    pd_demo_stop(h->data);
}

static void pd_demo_lifetime_cb(uv_timer_t *t)
{
    fprintf(stderr, "metrics_demo_server: nobody stopped me in %d ms; exiting\n", PD_DEMO_LIFETIME_MS);
    pd_demo_stop(t->data);
}

/* The requests every run records, so the script can expect exact lines. */
static void pd_demo_observe(pd_metrics *m)
{
    pd_metrics_observe(m, PD_METRICS_REQ_FIND_PATH, PD_OK, 180, 120);
    pd_metrics_observe(m, PD_METRICS_REQ_FIND_PATH, PD_OK, 900, 300);
    pd_metrics_observe(m, PD_METRICS_REQ_FIND_PATH, PD_OK, 30000, 4000);
    pd_metrics_observe(m, PD_METRICS_REQ_FIND_PATH, PD_NO_PATH, 50, 0);
    pd_metrics_observe(m, PD_METRICS_REQ_PING, PD_OK, 0, 0);
    pd_metrics_observe(m, PD_METRICS_REQ_SCENE_INFO, PD_UNKNOWN_SCENE, 0, 0);
    pd_metrics_observe(m, PD_METRICS_REQ_UNKNOWN, PD_MALFORMED, 0, 0);
}

int main(int argc, char **argv)
{
    uint16_t port = argc > 1 ? (uint16_t)atoi(argv[1]) : 0;
    char err[512];
    pd_conf conf;
    memset(&conf, 0, sizeof conf);
    if (pd_conf_load_file(PD_TEST_DATA_DIR "/net_server.json", &conf, err, sizeof err) != 0) {
        fprintf(stderr, "metrics_demo_server: %s\n", err);
        return 1;
    }
    int status = 1;
    pd_registry *registry = pd_registry_create();
    pd_metrics *metrics = pd_metrics_create("demo-1.0");
    uv_loop_t loop;
    int loop_ready = 0;
    if (!registry || !metrics || pd_registry_load(registry, &conf, err, sizeof err) != 0) {
        fprintf(stderr, "metrics_demo_server: %s\n", registry && metrics ? err : "out of memory");
        goto out;
    }
    pd_demo_observe(metrics);
    if (uv_loop_init(&loop) != 0)
        goto out;
    loop_ready = 1;

    pd_demo demo;
    memset(&demo, 0, sizeof demo);
    demo.http = pd_metrics_http_start(&loop, "127.0.0.1", port, NULL, metrics, registry, pd_demo_gauges, NULL,
                                      err, sizeof err);
    if (!demo.http) {
        fprintf(stderr, "metrics_demo_server: %s\n", err);
        uv_run(&loop, UV_RUN_DEFAULT); /* frees the failed listener */
        goto out;
    }
    uv_signal_init(&loop, &demo.sig_term);
    uv_signal_init(&loop, &demo.sig_int);
    uv_timer_init(&loop, &demo.lifetime);
    demo.sig_term.data = demo.sig_int.data = demo.lifetime.data = &demo;
    uv_signal_start(&demo.sig_term, pd_demo_signal_cb, SIGTERM);
    uv_signal_start(&demo.sig_int, pd_demo_signal_cb, SIGINT);
    uv_timer_start(&demo.lifetime, pd_demo_lifetime_cb, PD_DEMO_LIFETIME_MS, 0);

    printf("port %u\n", (unsigned)pd_metrics_http_port(demo.http));
    fflush(stdout);
    uv_run(&loop, UV_RUN_DEFAULT);
    status = 0;

out:
    if (loop_ready && uv_loop_close(&loop) != 0) {
        fprintf(stderr, "metrics_demo_server: handles left open\n");
        status = 1;
    }
    pd_metrics_destroy(metrics);
    pd_registry_destroy(registry);
    pd_conf_free(&conf);
    return status;
}
