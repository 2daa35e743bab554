/*
 * test_metrics.c - the metrics port: pd_metrics counters and their
 * Prometheus text rendering, and the pd_http responder that serves them.
 *
 * Rendering is checked line by line against values computed here from what
 * the test observed, and every rendered text also goes through a small
 * parser of the exposition format (one HELP and TYPE per family, samples
 * contiguous under their family, well-formed labels, numeric values).
 *
 * The HTTP tests run the responder on a loop in its own thread, bound to an
 * ephemeral loopback port, and talk to it with plain blocking sockets from
 * the test thread. Each test stops the loop through an async handle that
 * closes the responder, and asserts that the loop then closes cleanly, so
 * ASan sees every connection and buffer freed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "pd_conf.h"
#include "pd_http.h"
#include "pd_metrics.h"
#include "pd_scene.h"
#include "pd_testsock.h"
#include "prom_sample.h"

#define T_CONFIG PD_TEST_DATA_DIR "/net_server.json"
/* How long the client waits for any one answer before the test fails
 * (generous: sanitizer builds are slow). */
#define T_RECV_TIMEOUT_S 20
#define T_RECV_TIMEOUT_MS (T_RECV_TIMEOUT_S * 1000)
/* Largest answer the test client reads. */
#define T_MAX_ANSWER (256u * 1024u)
/* Read timeout for the tests that wait for it: short, so they run fast. */
#define T_SHORT_TIMEOUT_MS 300u
/* Read timeout for the tests that must not wait for it: longer than the
 * client's T_RECV_TIMEOUT_S, so an answer held back until a timeout frees a
 * place makes the client's recv fail, without timing anything. */
#define T_LONG_TIMEOUT_MS (T_RECV_TIMEOUT_S * 3000u)
/* Families and samples the exposition parser keeps track of. */
#define T_MAX_FAMILIES 64

/* ---- text helpers ------------------------------------------------------- */

/* Whether text contains line as a whole line. */
static int has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)) != NULL; p++) {
        if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
            return 1;
    }
    return 0;
}

static void assert_line(const char *text, const char *line)
{
    if (!has_line(text, line))
        fail_msg("missing line: %s", line);
}

static size_t count_prefix_lines(const char *text, const char *prefix)
{
    size_t n = 0, len = strlen(prefix);
    for (const char *p = text; *p;) {
        if (strncmp(p, prefix, len) == 0)
            n++;
        const char *nl = strchr(p, '\n');
        if (!nl)
            break;
        p = nl + 1;
    }
    return n;
}

static int is_name_char(char ch, int first)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || ch == ':' ||
           (!first && ch >= '0' && ch <= '9');
}

typedef struct t_family {
    char name[96];
    char type[16];
    int help, types;
} t_family;

/* The family a sample belongs to: a histogram's _bucket, _sum and _count
 * samples belong to the base name. */
static int sample_in_family(const char *sample, size_t len, const t_family *f)
{
    size_t fl = strlen(f->name);
    if (len == fl && memcmp(sample, f->name, fl) == 0)
        return 1;
    if (strcmp(f->type, "histogram") != 0 || len <= fl || memcmp(sample, f->name, fl) != 0)
        return 0;
    const char *suffix = sample + fl;
    size_t sl = len - fl;
    return (sl == 7 && memcmp(suffix, "_bucket", 7) == 0) || (sl == 4 && memcmp(suffix, "_sum", 4) == 0) ||
           (sl == 6 && memcmp(suffix, "_count", 6) == 0);
}

/* Parses a text-format 0.0.4 exposition and fails the test on anything
 * malformed. Returns the number of sample lines. */
static size_t check_exposition(const char *text)
{
    t_family fams[T_MAX_FAMILIES];
    size_t n_fams = 0, samples = 0;
    t_family *current = NULL;
    assert_true(strlen(text) > 0);
    assert_int_equal(text[strlen(text) - 1], '\n');

    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        assert_non_null(end);
        size_t len = (size_t)(end - line);
        char buf[512];
        assert_true(len < sizeof buf);
        memcpy(buf, line, len);
        buf[len] = '\0';

        if (buf[0] == '#') {
            char kind[8], name[96];
            int off = 0;
            assert_int_equal(sscanf(buf, "# %7s %95s %n", kind, name, &off), 2);
            int is_type = strcmp(kind, "TYPE") == 0;
            assert_true(is_type || strcmp(kind, "HELP") == 0);
            t_family *f = NULL;
            for (size_t i = 0; i < n_fams; i++)
                if (strcmp(fams[i].name, name) == 0)
                    f = &fams[i];
            if (!f) {
                assert_true(n_fams < T_MAX_FAMILIES);
                f = &fams[n_fams++];
                memset(f, 0, sizeof *f);
                snprintf(f->name, sizeof f->name, "%s", name);
            } else {
                /* A family's metadata must come together, before its samples. */
                assert_ptr_equal(f, current);
            }
            current = f;
            if (is_type) {
                f->types++;
                snprintf(f->type, sizeof f->type, "%s", buf + off);
                assert_true(strcmp(f->type, "counter") == 0 || strcmp(f->type, "gauge") == 0 ||
                            strcmp(f->type, "histogram") == 0);
            } else {
                f->help++;
                assert_true(strlen(buf + off) > 0);
            }
        } else {
            const char *p = buf;
            assert_true(is_name_char(*p, 1));
            while (is_name_char(*p, 0))
                p++;
            assert_non_null(current);
            if (!sample_in_family(buf, (size_t)(p - buf), current))
                fail_msg("sample outside its family: %s", buf);
            if (*p == '{') {
                p++;
                while (*p != '}') {
                    assert_true(is_name_char(*p, 1));
                    while (is_name_char(*p, 0))
                        p++;
                    assert_int_equal(*p++, '=');
                    assert_int_equal(*p++, '"');
                    while (*p != '"') {
                        assert_true(*p != '\0');
                        if (*p == '\\') {
                            p++;
                            assert_true(*p == '\\' || *p == '"' || *p == 'n');
                        }
                        p++;
                    }
                    p++;
                    if (*p == ',')
                        p++;
                    else
                        assert_int_equal(*p, '}');
                }
                p++;
            }
            assert_int_equal(*p++, ' ');
            char *num_end = NULL;
            strtod(p, &num_end);
            assert_true(num_end != p && *num_end == '\0');
            samples++;
        }
        line = end + 1;
    }
    for (size_t i = 0; i < n_fams; i++) {
        if (fams[i].help != 1 || fams[i].types != 1)
            fail_msg("family %s has %d HELP and %d TYPE lines", fams[i].name, fams[i].help, fams[i].types);
    }
    return samples;
}

static char *render(pd_metrics *m, const pd_metrics_gauges *g, pd_registry *r)
{
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(pd_metrics_render(m, g, r, &text, &len), 0);
    assert_non_null(text);
    assert_int_equal(strlen(text), len);
    check_exposition(text);
    return text;
}

static void load_registry(pd_conf *conf, pd_registry **out)
{
    char err[256];
    memset(conf, 0, sizeof *conf);
    assert_int_equal(pd_conf_load_file(T_CONFIG, conf, err, sizeof err), 0);
    *out = pd_registry_create();
    assert_non_null(*out);
    assert_int_equal(pd_registry_load(*out, conf, err, sizeof err), 0);
}

/* ---- rendering ---------------------------------------------------------- */

static void test_requests_by_type_and_status(void **state)
{
    (void)state;
    pd_metrics *m = pd_metrics_create("1.2.3");
    assert_non_null(m);
    pd_metrics_observe(m, PD_REQ_FIND_PATH, PD_OK, 10);
    pd_metrics_observe(m, PD_REQ_FIND_PATH, PD_OK, 5);
    pd_metrics_observe(m, PD_REQ_FIND_PATH, PD_NO_PATH, 7);
    pd_metrics_observe(m, PD_REQ_PING, PD_OK, 0);
    pd_metrics_observe(m, PD_REQ_PING, PD_OK, 0);
    pd_metrics_observe(m, PD_REQ_UPDATE_CELLS, PD_INVALID_ARGUMENT, 0);
    pd_metrics_observe(m, PD_REQ_NONE, PD_MALFORMED, 0);
    /* Out-of-range inputs land in the catch-all series instead of memory
     * past the table; a NULL metrics is a no-op. */
    pd_metrics_observe(m, (pd_request_kind)99, PD_FRAME_TOO_LARGE, 0);
    pd_metrics_observe(m, PD_REQ_STATS, PD_BUFFER_TOO_SMALL, 0);
    pd_metrics_observe(m, PD_REQ_STATS, (pd_status)1000, 0);
    pd_metrics_observe(NULL, PD_REQ_PING, PD_OK, 0);

    char *text = render(m, NULL, NULL);
    assert_line(text, "pathd_build_info{version=\"1.2.3\"} 1");
    assert_line(text, "pathd_requests_total{type=\"find_path\",status=\"OK\"} 2");
    assert_line(text, "pathd_requests_total{type=\"find_path\",status=\"NO_PATH\"} 1");
    assert_line(text, "pathd_requests_total{type=\"ping\",status=\"OK\"} 2");
    assert_line(text, "pathd_requests_total{type=\"update_cells\",status=\"INVALID_ARGUMENT\"} 1");
    assert_line(text, "pathd_requests_total{type=\"unknown\",status=\"MALFORMED\"} 1");
    assert_line(text, "pathd_requests_total{type=\"unknown\",status=\"FRAME_TOO_LARGE\"} 1");
    assert_line(text, "pathd_requests_total{type=\"stats\",status=\"INTERNAL\"} 2");
    /* Series that saw nothing are there from the start, at zero. */
    assert_line(text, "pathd_requests_total{type=\"cancel\",status=\"OK\"} 0");
    assert_line(text, "pathd_requests_total{type=\"scene_info\",status=\"UNKNOWN_SCENE\"} 0");
    assert_null(strstr(text, "BUFFER_TOO_SMALL"));
    size_t statuses = 0;
    for (unsigned st = 0; st < PD_STATUS_COUNT; st++)
        statuses += pd_status_is_answer(st) != 0;
    assert_int_equal(statuses, PD_STATUS_COUNT - 1 - (30 - 18) - (40 - 33));
    assert_int_equal(count_prefix_lines(text, "pathd_requests_total{"), PD_REQ__COUNT * statuses);
    assert_line(text, "pathd_expansions_total 22");
    /* Without gauges and registry their families are left out. */
    assert_null(strstr(text, "pathd_connections"));
    assert_null(strstr(text, "pathd_scene_version"));
    /* Counting requests observes no latency. */
    assert_int_equal(count_prefix_lines(text, "pathd_request_duration_seconds_count"), 0);
    free(text);
    pd_metrics_destroy(m);
    pd_metrics_destroy(NULL);
}

static void test_latency_histogram(void **state)
{
    (void)state;
    static const char *const le[PD_METRICS_LATENCY_BUCKETS] = {
        "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025",
        "0.05",   "0.1",     "0.25",   "0.5",   "1",      "2.5",   "5",     "10",
    };
    static const uint64_t bound_us[PD_METRICS_LATENCY_BUCKETS] = {
        100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000,
        1000000, 2500000, 5000000, 10000000,
    };
    pd_metrics *m = pd_metrics_create(NULL);
    assert_non_null(m);
    /* i + 1 observations exactly on bound i (le is inclusive) and one just
     * above it, which belongs to bucket i + 1 (or only to +Inf for the
     * last bound). */
    uint64_t sum_us = 0, count = 0;
    uint64_t own[PD_METRICS_LATENCY_BUCKETS] = {0};
    for (size_t i = 0; i < PD_METRICS_LATENCY_BUCKETS; i++) {
        for (size_t k = 0; k <= i; k++) {
            pd_metrics_observe_duration(m, PD_REQ_FIND_PATH, "town", bound_us[i]);
            sum_us += bound_us[i];
            count++;
            own[i]++;
        }
        pd_metrics_observe_duration(m, PD_REQ_FIND_PATH, "town", bound_us[i] + 1);
        sum_us += bound_us[i] + 1;
        count++;
        if (i + 1 < PD_METRICS_LATENCY_BUCKETS)
            own[i + 1]++;
    }
    /* Other kinds and scenes have series of their own; a NULL scene (a
     * Batch over several) is "mixed". */
    pd_metrics_observe_duration(m, PD_REQ_RAYCAST, "town", 42);
    pd_metrics_observe_duration(m, PD_REQ_FIND_PATH, "forest", 300);
    pd_metrics_observe_duration(m, PD_REQ_BATCH, NULL, 7);
    pd_metrics_observe_duration(NULL, PD_REQ_FIND_PATH, "town", 1);

    char *text = render(m, NULL, NULL);
    check_exposition(text);
    assert_line(text, "pathd_build_info{version=\"unknown\"} 1");
    const char *series = "kind=\"find_path\",scene=\"town\"";
    uint64_t cumulative = 0;
    char line[192];
    for (size_t i = 0; i < PD_METRICS_LATENCY_BUCKETS; i++) {
        cumulative += own[i];
        snprintf(line, sizeof line, "pathd_request_duration_seconds_bucket{%s,le=\"%s\"} %llu", series, le[i],
                 (unsigned long long)cumulative);
        assert_line(text, line);
    }
    /* The one value above 10 s is only in +Inf. */
    assert_int_equal(cumulative + 1, count);
    snprintf(line, sizeof line, "pathd_request_duration_seconds_bucket{%s,le=\"+Inf\"} %llu", series,
             (unsigned long long)count);
    assert_line(text, line);
    snprintf(line, sizeof line, "pathd_request_duration_seconds_sum{%s} %llu.%06llu", series,
             (unsigned long long)(sum_us / 1000000u), (unsigned long long)(sum_us % 1000000u));
    assert_line(text, line);
    snprintf(line, sizeof line, "pathd_request_duration_seconds_count{%s} %llu", series, (unsigned long long)count);
    assert_line(text, line);
    assert_line(text, "pathd_request_duration_seconds_count{kind=\"raycast\",scene=\"town\"} 1");
    assert_line(text, "pathd_request_duration_seconds_bucket{kind=\"raycast\",scene=\"town\",le=\"0.0001\"} 1");
    assert_line(text, "pathd_request_duration_seconds_count{kind=\"find_path\",scene=\"forest\"} 1");
    assert_line(text, "pathd_request_duration_seconds_bucket{kind=\"find_path\",scene=\"forest\",le=\"0.00025\"} 0");
    assert_line(text, "pathd_request_duration_seconds_count{kind=\"batch\",scene=\"mixed\"} 1");
    /* Only series with observations are written: four of them. */
    assert_int_equal(count_prefix_lines(text, "pathd_request_duration_seconds_count{"), 4);
    assert_int_equal(count_prefix_lines(text, "pathd_request_duration_seconds_bucket{"),
                     4 * (PD_METRICS_LATENCY_BUCKETS + 1));
    free(text);
    pd_metrics_destroy(m);
}

/* The scene label is bounded: the first PD_METRICS_MAX_SCENE_LABELS names
 * keep their own series, later ones share scene="other". */
static void test_latency_scene_cap(void **state)
{
    (void)state;
    pd_metrics *m = pd_metrics_create(NULL);
    assert_non_null(m);
    const int extra = 5;
    for (int i = 0; i < PD_METRICS_MAX_SCENE_LABELS + extra; i++) {
        char name[32];
        snprintf(name, sizeof name, "s%d", i);
        pd_metrics_observe_duration(m, PD_REQ_UPDATE_CELLS, name, 10);
        /* A name seen before keeps its slot, even once the cap is reached. */
        pd_metrics_observe_duration(m, PD_REQ_UPDATE_CELLS, "s0", 10);
    }
    char *text = render(m, NULL, NULL);
    char line[160];
    snprintf(line, sizeof line, "pathd_request_duration_seconds_count{kind=\"update_cells\",scene=\"s0\"} %d",
             PD_METRICS_MAX_SCENE_LABELS + extra + 1);
    assert_line(text, line);
    snprintf(line, sizeof line, "pathd_request_duration_seconds_count{kind=\"update_cells\",scene=\"s%d\"} 1",
             PD_METRICS_MAX_SCENE_LABELS - 1);
    assert_line(text, line);
    snprintf(line, sizeof line, "pathd_request_duration_seconds_count{kind=\"update_cells\",scene=\"s%d\"}",
             PD_METRICS_MAX_SCENE_LABELS);
    assert_int_equal(count_prefix_lines(text, line), 0);
    snprintf(line, sizeof line, "pathd_request_duration_seconds_count{kind=\"update_cells\",scene=\"other\"} %d", extra);
    assert_line(text, line);
    assert_int_equal(count_prefix_lines(text, "pathd_request_duration_seconds_count{"),
                     PD_METRICS_MAX_SCENE_LABELS + 1);
    free(text);
    pd_metrics_destroy(m);
}

/* The sum of every sample of a family with labels ("name{..."). */
static double sum_samples(const char *text, const char *name)
{
    double sum = 0;
    size_t len = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, name, len) != 0 || p[len] != '{')
            continue;
        const char *sp = strchr(p, ' ');
        assert_non_null(sp);
        sum += strtod(sp + 1, NULL);
    }
    return sum;
}

/* The config's registry and fresh metrics, for the per-scene tests. */
typedef struct t_scenes {
    pd_conf conf;
    pd_registry *registry;
    pd_metrics *m;
} t_scenes;

static void t_scenes_start(t_scenes *ts)
{
    load_registry(&ts->conf, &ts->registry);
    ts->m = pd_metrics_create(NULL);
    assert_non_null(ts->m);
}

static void t_scenes_stop(t_scenes *ts)
{
    pd_metrics_destroy(ts->m);
    pd_registry_destroy(ts->registry);
    pd_conf_free(&ts->conf);
}

/* Issue 29, finding 13: at 100,000 instances /metrics was 34.7 MB, every
 * scene with its own version, bytes and search series. Now the
 * limits.metrics_scene_series scenes with the most requests have them
 * (ties by name), the others are summed, and the per-scene requests add
 * up: 5,000 instances, 20 series. */
static void test_scene_series_capped_to_the_busiest(void **state)
{
    (void)state;
    enum { INSTANCES = 5000, SERIES = 20, HEAVY = 8 };
    t_scenes ts;
    t_scenes_start(&ts);
    pd_registry *registry = ts.registry;
    pd_metrics *m = ts.m;
    char err[256];
    pd_metrics_set_scene_series(m, SERIES);
    uint64_t total = 0;
    for (int i = 0; i < INSTANCES; i++) {
        char name[32];
        snprintf(name, sizeof name, "inst-%04d", i);
        assert_int_equal(pd_registry_instance(registry, name, "small", NULL, err, sizeof err), PD_OK);
        /* inst-0000..0007 get 100..107 requests, the rest 0..9 by i % 10. */
        int n = i < HEAVY ? 100 + i : i % 10;
        for (int k = 0; k < n; k++)
            pd_metrics_observe_duration(m, PD_REQ_FIND_PATH, name, 50);
        total += (uint64_t)n;
    }
    /* A name no scene has (a dropped one's late answer) counts in the rest. */
    pd_metrics_observe_duration(m, PD_REQ_UPDATE_CELLS, "gone", 50);
    total++;
    char *text = render(m, NULL, registry);
    /* Most of it is the latency histograms' 33 scene labels (the first 32
     * scenes seen and "other", PD_METRICS_MAX_SCENE_LABELS), about 60 KiB;
     * every scene with its series is 2.4 MB (the cap at 100,000 below). */
    assert_true(strlen(text) < 128 * 1024);
    assert_line(text, "pathd_scenes 5002");
    assert_true(prom_sample(text, "pathd_scenes_bytes") > 0);
    assert_int_equal(count_prefix_lines(text, "pathd_scene_requests_total{"), SERIES);
    assert_int_equal(count_prefix_lines(text, "pathd_scene_version{"), SERIES);
    assert_int_equal(count_prefix_lines(text, "pathd_scene_bytes{"), SERIES * PD_SCENE_STRUCTURES);
    assert_int_equal(count_prefix_lines(text, "pathd_scene_search{"), SERIES * 2); /* small: units 1, 2 */
    for (int i = 0; i < HEAVY; i++) {
        char line[128];
        snprintf(line, sizeof line, "pathd_scene_requests_total{scene=\"inst-%04d\"} %d", i, 100 + i);
        assert_line(text, line);
        snprintf(line, sizeof line, "pathd_scene_version{scene=\"inst-%04d\"} 1", i);
        assert_line(text, line);
    }
    /* The other 12 have 9 requests, the first by name: inst-0009, 0019... */
    for (int i = 9; i < 9 + 10 * (SERIES - HEAVY); i += 10) {
        char line[128];
        snprintf(line, sizeof line, "pathd_scene_requests_total{scene=\"inst-%04d\"} 9", i);
        assert_line(text, line);
    }
    double shown = sum_samples(text, "pathd_scene_requests_total");
    assert_true(shown + prom_sample(text, "pathd_scene_requests_other") == (double)total);
    free(text);

    /* 0 keeps the totals only; more series than scenes shows them all. */
    pd_metrics_set_scene_series(m, 0);
    text = render(m, NULL, registry);
    assert_int_equal(count_prefix_lines(text, "pathd_scene_version{"), 0);
    assert_true(prom_sample(text, "pathd_scene_requests_other") == (double)total);
    free(text);
    pd_metrics_set_scene_series(m, 100000);
    text = render(m, NULL, registry);
    assert_int_equal(count_prefix_lines(text, "pathd_scene_version{"), INSTANCES + 2);
    assert_true(sum_samples(text, "pathd_scene_requests_total") + prom_sample(text, "pathd_scene_requests_other") ==
                (double)total);
    assert_true(prom_sample(text, "pathd_scene_requests_other") == 1.0);
    free(text);
    t_scenes_stop(&ts);
}

/* A dropped scene's requests stay counted, in pathd_scene_requests_other:
 * the totals never fall when scenes go; one made again under the name
 * counts anew. A snapshot taken before the drop still renders its name
 * (the name is freed once the snapshot is). */
static void test_forgotten_scene_counts_in_other(void **state)
{
    (void)state;
    t_scenes ts;
    t_scenes_start(&ts);
    pd_registry *registry = ts.registry;
    pd_metrics *m = ts.m;
    char err[256];
    assert_int_equal(pd_registry_instance(registry, "copy", "small", NULL, err, sizeof err), PD_OK);
    for (int k = 0; k < 5; k++)
        pd_metrics_observe_duration(m, PD_REQ_FIND_PATH, "copy", 10);
    pd_metrics_observe_duration(m, PD_REQ_FIND_PATH, "maze", 10);
    pd_metrics_snapshot *before = pd_metrics_snapshot_take(m, NULL, registry);
    assert_non_null(before);
    assert_int_equal(pd_registry_drop(registry, "copy", NULL), PD_OK);
    pd_metrics_forget_scene(m, "copy");
    pd_metrics_forget_scene(m, "never-seen");
    char *text = render(m, NULL, registry);
    assert_int_equal(count_prefix_lines(text, "pathd_scene_requests_total{scene=\"copy\"}"), 0);
    assert_line(text, "pathd_scene_requests_total{scene=\"maze\"} 1");
    assert_line(text, "pathd_scene_requests_other 5");
    free(text);
    assert_int_equal(pd_registry_instance(registry, "copy", "small", NULL, err, sizeof err), PD_OK);
    pd_metrics_observe_duration(m, PD_REQ_FIND_PATH, "copy", 10);
    text = render(m, NULL, registry);
    assert_line(text, "pathd_scene_requests_total{scene=\"copy\"} 1");
    assert_line(text, "pathd_scene_requests_other 5");
    free(text);
    /* The snapshot from before the drop renders the scene's name as it
     * was counted then (the registry now serves its successor). */
    size_t len = 0;
    assert_int_equal(pd_metrics_snapshot_render(before, &text, &len), 0);
    assert_line(text, "pathd_scene_requests_total{scene=\"copy\"} 5");
    free(text);
    pd_metrics_snapshot_free(before);
    t_scenes_stop(&ts);
}

/* OVERLOADED by limit and reloads by result: every label value from the
 * first scrape, then the counts and times observed. */
static void test_overload_and_reload_counters(void **state)
{
    (void)state;
    pd_metrics *m = pd_metrics_create(NULL);
    assert_non_null(m);
    char *text = render(m, NULL, NULL);
    check_exposition(text);
    assert_line(text, "pathd_overloaded_total{limit=\"connections\"} 0");
    assert_line(text, "pathd_overloaded_total{limit=\"in_flight_per_connection\"} 0");
    assert_line(text, "pathd_overloaded_total{limit=\"job_queue\"} 0");
    assert_line(text, "pathd_reloads_total{result=\"success\"} 0");
    assert_line(text, "pathd_reloads_total{result=\"failure\"} 0");
    assert_line(text, "pathd_last_reload_timestamp_seconds 0.000");
    assert_line(text, "pathd_last_reload_success_timestamp_seconds 0.000");
    assert_line(text, "pathd_last_reload_scenes{outcome=\"kept\"} 0");
    assert_line(text, "pathd_last_reload_scenes{outcome=\"built\"} 0");
    free(text);

    pd_metrics_observe_overloaded(m, PD_METRICS_LIMIT_JOB_QUEUE);
    pd_metrics_observe_overloaded(m, PD_METRICS_LIMIT_JOB_QUEUE);
    pd_metrics_observe_overloaded(m, PD_METRICS_LIMIT_CONN_IN_FLIGHT);
    pd_metrics_observe_overloaded(m, PD_METRICS_LIMIT__COUNT); /* out of range: ignored */
    pd_metrics_observe_reload(m, PD_METRICS_RELOAD_SUCCESS, 1000.5);
    pd_metrics_set_reload_scenes(m, 5, 2);
    pd_metrics_observe_reload(m, PD_METRICS_RELOAD_SUCCESS, 1001.25);
    pd_metrics_observe_reload(m, PD_METRICS_RELOAD_FAILURE, 1002.0);
    pd_metrics_observe_reload(m, PD_METRICS_RELOAD_FAILURE, 1003.0);
    text = render(m, NULL, NULL);
    assert_line(text, "pathd_overloaded_total{limit=\"connections\"} 0");
    assert_line(text, "pathd_overloaded_total{limit=\"in_flight_per_connection\"} 1");
    assert_line(text, "pathd_overloaded_total{limit=\"job_queue\"} 2");
    assert_line(text, "pathd_reloads_total{result=\"success\"} 2");
    assert_line(text, "pathd_reloads_total{result=\"failure\"} 2");
    /* A failure moves the last reload's time, not the last success's. */
    assert_line(text, "pathd_last_reload_timestamp_seconds 1003.000");
    assert_line(text, "pathd_last_reload_success_timestamp_seconds 1001.250");
    assert_line(text, "pathd_last_reload_scenes{outcome=\"kept\"} 5");
    assert_line(text, "pathd_last_reload_scenes{outcome=\"built\"} 2");
    assert_string_equal(pd_metrics_limit_name(PD_METRICS_LIMIT_CONNECTIONS), "connections");
    assert_string_equal(pd_metrics_limit_name((pd_metrics_limit)77), "unknown");
    free(text);
    pd_metrics_destroy(m);
}

static void test_gauges_and_scene_versions(void **state)
{
    (void)state;
    pd_conf conf;
    pd_registry *registry;
    load_registry(&conf, &registry);
    pd_metrics *m = pd_metrics_create("0.1.0");
    assert_non_null(m);
    pd_metrics_gauges g = {
        .uptime_ms = 12345,
        .connections = 7,
        .in_flight = 3,
        .queue_depth = 2,
        .worker_threads = 4,
        .worker_busy_ns = 1500000001,
        .worker_context_bytes = 3000000,
        .worker_context_bytes_max = 2000000,
        .buffered_bytes = 70000,
        .buffer_budget_bytes = 134217728,
        .connections_shed = 5,
        .frame_timeouts = 2,
        .accept_errors = 9,
        .watchers = 6,
        .watch_events = 1234,
        .watchers_dropped = 1,
    };

    char *text = render(m, &g, registry);
    assert_line(text, "pathd_uptime_seconds 12.345");
    assert_line(text, "pathd_connections 7");
    assert_line(text, "pathd_in_flight 3");
    assert_line(text, "pathd_queue_depth 2");
    assert_line(text, "pathd_worker_threads 4");
    assert_line(text, "pathd_worker_busy_seconds_total 1.500000001");
    assert_line(text, "# TYPE pathd_worker_busy_seconds_total counter");
    assert_line(text, "pathd_worker_context_bytes 3000000");
    assert_line(text, "# TYPE pathd_worker_context_bytes gauge");
    assert_line(text, "pathd_worker_context_bytes_max 2000000");
    assert_line(text, "# TYPE pathd_worker_context_bytes_max gauge");
    assert_line(text, "pathd_buffered_bytes 70000");
    assert_line(text, "pathd_buffer_budget_bytes 134217728");
    assert_line(text, "pathd_connections_shed_total 5");
    assert_line(text, "# TYPE pathd_connections_shed_total counter");
    assert_line(text, "pathd_frame_timeouts_total 2");
    assert_line(text, "# TYPE pathd_frame_timeouts_total counter");
    assert_line(text, "pathd_accept_errors_total 9");
    assert_line(text, "pathd_watchers 6");
    assert_line(text, "# TYPE pathd_watchers gauge");
    assert_line(text, "pathd_watch_events_total 1234");
    assert_line(text, "# TYPE pathd_watch_events_total counter");
    assert_line(text, "pathd_watchers_dropped_total 1");
    assert_line(text, "# TYPE pathd_watchers_dropped_total counter");
    assert_line(text, "# TYPE pathd_scene_version gauge");
    assert_line(text, "pathd_scene_version{scene=\"maze\"} 1");
    assert_line(text, "pathd_scene_version{scene=\"small\"} 1");
    assert_int_equal(count_prefix_lines(text, "pathd_scene_version{"), 2);
    /* small is 10x5 (12x7 padded) serving units 1 and 2: clearance, one unit
     * grid and two sets of 1-byte labels (both maps have fewer than 256
     * components, so their labels fit 8 bits); maze is 128x127 (130x129)
     * with unit 1 only: its grid and one set of labels. A grid
     * also holds its passability bitsets: a line of bits per padded row and
     * column, in whole words (small: 7 x 1 + 12 x 1 words, 152 bytes; maze:
     * 129 x 3 + 130 x 3 words, 6216 bytes), and its four stop bitsets, two
     * laid out like the rows and two like the columns: three times those
     * bytes in all (small 456, maze 18648). */
    assert_line(text, "# TYPE pathd_scene_bytes gauge");
    assert_line(text, "pathd_scene_bytes{scene=\"small\",structure=\"grid\"} 540");
    assert_line(text, "pathd_scene_bytes{scene=\"small\",structure=\"clearance\"} 84");
    assert_line(text, "pathd_scene_bytes{scene=\"small\",structure=\"labels\"} 168");
    assert_line(text, "pathd_scene_bytes{scene=\"small\",structure=\"unit_grids\"} 540");
    assert_line(text, "pathd_scene_bytes{scene=\"maze\",structure=\"grid\"} 35418");
    assert_line(text, "pathd_scene_bytes{scene=\"maze\",structure=\"clearance\"} 0");
    assert_line(text, "pathd_scene_bytes{scene=\"maze\",structure=\"labels\"} 16770");
    assert_line(text, "pathd_scene_bytes{scene=\"maze\",structure=\"unit_grids\"} 0");
    assert_int_equal(count_prefix_lines(text, "pathd_scene_bytes{"), 8);
    /* Neither scene's config says "search": both follow jump_point_search. */
    assert_line(text, "# TYPE pathd_scene_search gauge");
    assert_line(text, "pathd_scene_search{scene=\"small\",unit=\"1\",search=\"default\"} 1");
    assert_line(text, "pathd_scene_search{scene=\"small\",unit=\"2\",search=\"default\"} 1");
    assert_line(text, "pathd_scene_search{scene=\"maze\",unit=\"1\",search=\"default\"} 1");
    assert_int_equal(count_prefix_lines(text, "pathd_scene_search{"), 3);
    /* The standard process metrics, read from /proc for this process: it
     * has used some CPU, holds memory, has stdin/out/err open and started
     * before now. */
    assert_true(prom_sample(text, "process_cpu_seconds_total") >= 0.0);
    assert_true(prom_sample(text, "process_resident_memory_bytes") > 1e5);
    assert_true(prom_sample(text, "process_open_fds") >= 3.0);
    assert_true(prom_sample(text, "process_max_fds") >= prom_sample(text, "process_open_fds"));
    const double started = prom_sample(text, "process_start_time_seconds");
    assert_true(started > 1.6e9 && started <= (double)time(NULL) + 1.0);
    free(text);

    /* A cell update publishes a new version of "small"; the next scrape
     * shows it and leaves "maze" alone. (3,0) is open floor. */
    pd_scene_update u = {.op = PD_UPDATE_BLOCK, .cells = &(pd_point){3, 0}, .n_cells = 1};
    pd_scene_update_result res;
    assert_int_equal(pd_registry_update(registry, "small", &u, &res), PD_OK);
    assert_int_equal(res.version, 2);
    text = render(m, &g, registry);
    assert_line(text, "pathd_scene_version{scene=\"small\"} 2");
    assert_line(text, "pathd_scene_version{scene=\"maze\"} 1");
    free(text);

    pd_metrics_destroy(m);
    pd_registry_destroy(registry);
    pd_conf_free(&conf);
}

static void test_label_escaping(void **state)
{
    (void)state;
    char out[PD_METRICS_MAX_LABEL];
    assert_int_equal(pd_metrics_escape_label("plain-name_1.x", out, sizeof out), 14);
    assert_string_equal(out, "plain-name_1.x");
    pd_metrics_escape_label("a\"b\\c\nd", out, sizeof out);
    assert_string_equal(out, "a\\\"b\\\\c\\nd");
    /* Cut before an escape that would not fit, never in its middle. */
    char small[4];
    assert_int_equal(pd_metrics_escape_label("ab\"c", small, sizeof small), 2);
    assert_string_equal(small, "ab");
    assert_int_equal(pd_metrics_escape_label(NULL, small, sizeof small), 0);
    assert_string_equal(small, "");

    /* The renderer escapes the version it was given. */
    pd_metrics *m = pd_metrics_create("1.0 \"beta\"\\\n");
    assert_non_null(m);
    char *text = render(m, NULL, NULL);
    assert_line(text, "pathd_build_info{version=\"1.0 \\\"beta\\\"\\\\\\n\"} 1");
    free(text);
    pd_metrics_destroy(m);
}

static void test_type_names(void **state)
{
    (void)state;
    /* Every kind has its own label, and the labels are the protocol's. */
    static const char *const want[PD_REQ__COUNT] = {
        "unknown", "find_path", "cancel", "list_scenes", "scene_info",
        "stats", "ping", "update_cells", "scene_grid", "find_route",
        "auth", "reload", "raycast", "validate_move", "move_along", "nearest",
        "reachable", "random_point", "distance_to_wall", "batch", "get_limits",
        "create_scene", "create_instance", "drop_scene", "watch", "unwatch",
        "reserve_path", "release_agent", "get_reservations",
    };
    for (unsigned k = 0; k < PD_REQ__COUNT; k++)
        assert_string_equal(pd_request_kind_name((pd_request_kind)k), want[k]);
    assert_string_equal(pd_request_kind_name((pd_request_kind)-1), "unknown");
    assert_string_equal(pd_request_kind_name(PD_REQ__COUNT), "unknown");
}

/* ---- HTTP --------------------------------------------------------------- */

typedef struct t_http {
    uv_loop_t loop;
    uv_async_t stop;
    pthread_t thread;
    pd_conf conf;
    pd_registry *registry;
    pd_metrics *metrics;
    pd_metrics_http *http;
    uint16_t port;
    atomic_int gauge_calls;
    atomic_int not_ready;        /* what t_ready answers: 0 ready, else not */
} t_http;

/* The readiness callback the test drives through t->not_ready. */
static int t_ready(void *user, char *reason, size_t cap)
{
    t_http *t = user;
    if (atomic_load(&t->not_ready) == 0)
        return 1;
    snprintf(reason, cap, "loading scenes (test %d)", atomic_load(&t->not_ready));
    return 0;
}

static void t_gauges(void *user, pd_metrics_gauges *out)
{
    t_http *t = user;
    int calls = atomic_fetch_add(&t->gauge_calls, 1) + 1;
    out->connections = 5;
    out->in_flight = (uint64_t)calls;
    out->worker_threads = 2;
}

static void t_stop_cb(uv_async_t *a)
{
    t_http *t = a->data;
    pd_metrics_http_close(t->http);
    uv_close((uv_handle_t *)a, NULL);
}

static void *t_loop_main(void *arg)
{
    t_http *t = arg;
    uv_run(&t->loop, UV_RUN_DEFAULT);
    return NULL;
}

/* Starts the responder on its own loop thread. scene_labels > 0 first
 * observes a latency under that many scene labels for two request kinds,
 * which makes the scrape about 1.7 KiB per label larger (before the loop
 * thread starts: the metrics are the loop's alone once it runs); hook (may
 * be NULL) runs at the start of every render. */
static t_http *t_start_hooked(const pd_metrics_http_limits *limits, int scene_labels, pd_metrics_render_hook hook,
                              void *hook_user)
{
    t_http *t = calloc(1, sizeof *t);
    assert_non_null(t);
    load_registry(&t->conf, &t->registry);
    t->metrics = pd_metrics_create("9.9.9");
    assert_non_null(t->metrics);
    pd_metrics_observe(t->metrics, PD_REQ_FIND_PATH, PD_OK, 40);
    pd_metrics_observe_duration(t->metrics, PD_REQ_FIND_PATH, "small", 1200);
    for (int i = 0; i < scene_labels; i++) {
        char name[32];
        snprintf(name, sizeof name, "scene-%d", i);
        pd_metrics_observe_duration(t->metrics, PD_REQ_FIND_PATH, name, 1200);
        pd_metrics_observe_duration(t->metrics, PD_REQ_UPDATE_CELLS, name, 300);
    }
    if (hook)
        pd_metrics_set_render_hook(t->metrics, hook, hook_user);
    assert_int_equal(uv_loop_init(&t->loop), 0);
    assert_int_equal(uv_async_init(&t->loop, &t->stop, t_stop_cb), 0);
    t->stop.data = t;
    char err[256];
    t->http = pd_metrics_http_start(&t->loop, "127.0.0.1", 0, limits, t->metrics, t->registry, t_gauges, t,
                                    err, sizeof err);
    if (!t->http)
        fail_msg("pd_metrics_http_start: %s", err);
    pd_metrics_http_set_ready(t->http, t_ready, t);
    t->port = pd_metrics_http_port(t->http);
    assert_true(t->port != 0);
    assert_int_equal(pthread_create(&t->thread, NULL, t_loop_main, t), 0);
    return t;
}

static t_http *t_start_with(const pd_metrics_http_limits *limits, int scene_labels)
{
    return t_start_hooked(limits, scene_labels, NULL, NULL);
}

static t_http *t_start(const pd_metrics_http_limits *limits)
{
    return t_start_with(limits, 0);
}

/* Stops the loop, which must then close with no handle left behind. */
static void t_stop(t_http *t)
{
    uv_async_send(&t->stop);
    assert_int_equal(pthread_join(t->thread, NULL), 0);
    assert_int_equal(uv_loop_close(&t->loop), 0);
    pd_metrics_destroy(t->metrics);
    pd_registry_destroy(t->registry);
    pd_conf_free(&t->conf);
    free(t);
}

/* A client connection; window > 0 sets its receive buffer first. */
static int t_connect_window(uint16_t port, int window)
{
    int fd = pd_ts_connect(port, window, T_RECV_TIMEOUT_MS);
    if (fd < 0)
        fail_msg("connect to port %u: %s", (unsigned)port, strerror(errno));
    return fd;
}

static int t_connect(uint16_t port)
{
    return t_connect_window(port, 0);
}

static void t_send(int fd, const void *data, size_t len)
{
    if (pd_ts_send_all(fd, data, len, T_RECV_TIMEOUT_MS) != 0)
        fail_msg("send: %s", strerror(errno));
}

/* Reads until the server closes. A reset fails the test unless
 * allow_reset: the responder drains input it does not need, so a client it
 * answered always sees a clean close (a reset could have destroyed the
 * answer on a real network); only a refused connection may be reset.
 * Fails on the receive timeout. Returns a malloc'd, NUL-terminated buffer. */
static char *t_read_all(int fd, size_t *len_out, int allow_reset)
{
    int reset = 0;
    char *buf = pd_ts_read_to_close(fd, T_MAX_ANSWER - 1, T_RECV_TIMEOUT_MS, len_out, &reset);
    if (!buf)
        fail_msg("recv: no close within %d s, an error or over %u bytes", T_RECV_TIMEOUT_S, T_MAX_ANSWER);
    if (reset && !allow_reset)
        fail_msg("recv: %s", strerror(ECONNRESET));
    return buf;
}

typedef struct t_answer {
    char *raw;
    int code;
    const char *head;       /* status line and headers, inside raw */
    const char *body;       /* inside raw */
    size_t body_len;
    long content_length;
} t_answer;

/* Splits an answer and checks what every answer must have: an HTTP/1.1
 * status line, Connection: close, a Content-Length. */
static void t_parse(char *raw, size_t len, t_answer *a)
{
    memset(a, 0, sizeof *a);
    a->raw = raw;
    char *sep = strstr(raw, "\r\n\r\n");
    assert_non_null(sep);
    *sep = '\0';
    a->head = raw;
    a->body = sep + 4;
    a->body_len = len - (size_t)(a->body - raw);
    assert_int_equal(sscanf(raw, "HTTP/1.1 %d ", &a->code), 1);
    assert_non_null(strstr(a->head, "\r\nConnection: close"));
    const char *cl = strstr(a->head, "\r\nContent-Length: ");
    assert_non_null(cl);
    a->content_length = strtol(cl + 18, NULL, 10);
}

/* One request on a fresh connection; the whole answer back. */
static void t_exchange(uint16_t port, const char *request, size_t request_len, t_answer *a)
{
    int fd = t_connect(port);
    t_send(fd, request, request_len);
    size_t len = 0;
    char *raw = t_read_all(fd, &len, 0);
    close(fd);
    t_parse(raw, len, a);
}

static void t_get(uint16_t port, const char *request, t_answer *a)
{
    t_exchange(port, request, strlen(request), a);
    assert_int_equal((size_t)a->content_length, a->body_len);
}

static double t_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void t_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void test_http_metrics(void **state)
{
    (void)state;
    t_http *t = t_start(NULL);
    t_answer a;
    t_get(t->port, "GET /metrics HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\n", &a);
    assert_int_equal(a.code, 200);
    assert_non_null(strstr(a.head, "\r\nContent-Type: text/plain; version=0.0.4"));
    check_exposition(a.body);
    assert_line(a.body, "pathd_build_info{version=\"9.9.9\"} 1");
    assert_line(a.body, "pathd_requests_total{type=\"find_path\",status=\"OK\"} 1");
    assert_line(a.body, "pathd_request_duration_seconds_bucket{kind=\"find_path\",scene=\"small\",le=\"0.001\"} 0");
    assert_line(a.body, "pathd_request_duration_seconds_bucket{kind=\"find_path\",scene=\"small\",le=\"0.0025\"} 1");
    assert_line(a.body, "pathd_expansions_total 40");
    assert_line(a.body, "pathd_connections 5");
    assert_line(a.body, "pathd_in_flight 1");
    assert_line(a.body, "pathd_scene_version{scene=\"small\"} 1");
    free(a.raw);

    /* Each scrape reads the gauges afresh; a query string is ignored. */
    t_get(t->port, "GET /metrics?name[]=pathd_connections HTTP/1.0\r\n\r\n", &a);
    assert_int_equal(a.code, 200);
    assert_line(a.body, "pathd_in_flight 2");
    free(a.raw);

    /* HEAD: the same head, Content-Length included, and no body. */
    t_exchange(t->port, "HEAD /metrics HTTP/1.1\r\n\r\n", 26, &a);
    assert_int_equal(a.code, 200);
    assert_true(a.content_length > 1000);
    assert_int_equal(a.body_len, 0);
    free(a.raw);
    t_stop(t);
}

/* The responder's end of the client's connection fd, found among this
 * process's descriptors by its peer address (the responder runs in this
 * process, on the test's loop thread); -1 until the loop has accepted it. */
static int t_server_end(int client_fd)
{
    struct sockaddr_in mine;
    socklen_t len = sizeof mine;
    assert_int_equal(getsockname(client_fd, (struct sockaddr *)&mine, &len), 0);
    /* open + fdopendir rather than opendir: TSan sees an fd made by open
     * (not one opendir makes inside libc), so a number the loop thread
     * just closed and this reuses is not taken for a race. */
    int dfd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY);
    assert_true(dfd >= 0);
    DIR *dir = fdopendir(dfd);
    assert_non_null(dir);
    int found = -1;
    struct dirent *e;
    while (found < 0 && (e = readdir(dir)) != NULL) {
        int fd = atoi(e->d_name);
        struct sockaddr_in peer;
        socklen_t plen = sizeof peer;
        if (fd == client_fd || e->d_name[0] == '.' || getpeername(fd, (struct sockaddr *)&peer, &plen) != 0 ||
            plen != sizeof peer || peer.sin_family != AF_INET)
            continue;
        if (peer.sin_port == mine.sin_port && peer.sin_addr.s_addr == mine.sin_addr.s_addr)
            found = fd;
    }
    closedir(dir);
    return found;
}

/* A client that half-closes after its request (`printf ... | nc -N`) gets
 * the whole answer: its end of input must not close the connection while
 * the answer is still being written. The responder's send buffer is cut to
 * the minimum and the client's receive window to 4 KiB, so most of the
 * scrape waits in libuv until the client reads, and the client reads only
 * after its FIN has had time to reach the responder. */
static void test_http_half_close_gets_whole_answer(void **state)
{
    (void)state;
    t_http *t = t_start_with(NULL, PD_METRICS_MAX_SCENE_LABELS);
    t_answer full;
    t_get(t->port, "GET /metrics HTTP/1.1\r\n\r\n", &full);
    size_t full_len = full.body_len;
    free(full.raw);

    int small = 4096;
    int fd = t_connect_window(t->port, small);
    int server_end = -1;
    for (int tries = 0; tries < 2000 && server_end < 0; tries++) {
        server_end = t_server_end(fd);
        if (server_end < 0)
            t_sleep_ms(5);
    }
    assert_true(server_end >= 0);
    assert_int_equal(setsockopt(server_end, SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);

    const char *req = "GET /metrics HTTP/1.1\r\n\r\n";
    t_send(fd, req, strlen(req));
    assert_int_equal(shutdown(fd, SHUT_WR), 0);
    t_sleep_ms(200);
    size_t len = 0;
    char *raw = t_read_all(fd, &len, 0);
    close(fd);
    t_answer a;
    t_parse(raw, len, &a);
    assert_int_equal(a.code, 200);
    /* Far more than the two buffers hold, so a cut answer cannot pass by
     * having fitted in them. */
    assert_true(a.content_length > 64 * 1024);
    assert_int_equal((size_t)a.content_length, a.body_len);
    assert_true(a.body_len + 4096 >= full_len);
    free(a.raw);
    t_stop(t);
}

/* A render held until the test opens it: the first render waits, later
 * ones pass. Counts the renders. */
typedef struct t_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open;
    atomic_int renders;
} t_gate;

static void t_gate_hook(void *user)
{
    t_gate *g = user;
    atomic_fetch_add(&g->renders, 1);
    pthread_mutex_lock(&g->mu);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

/* One request on a fresh connection; the answer, or NULL when none came
 * whole within T_RECV_TIMEOUT_S (not a failure: the caller must open the
 * gate before failing). */
static char *t_try_get(uint16_t port, const char *request)
{
    int fd = t_connect(port);
    t_send(fd, request, strlen(request));
    size_t len = 0;
    int reset = 0;
    char *buf = pd_ts_read_to_close(fd, T_MAX_ANSWER, T_RECV_TIMEOUT_MS, &len, &reset);
    close(fd);
    if (!buf)
        return NULL;
    if (!strstr(buf, "\r\n\r\n")) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* Issue 29, finding 13: a scrape of 100,000 scenes stalled the loop 244 ms
 * (8 parallel ones with 30,000 scenes, 544 ms). A scrape is rendered off
 * the loop: with the first render held in the threadpool, the loop still
 * answers /livez, and the 7 scrapes that come meanwhile wait and share one
 * render (2 renders for 8 scrapes), each answered whole once the gate
 * opens. Counted and gated, not timed. */
static void test_http_scrape_renders_off_the_loop(void **state)
{
    (void)state;
    enum { SCRAPES = 8 };
    static t_gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
    g.open = 0;
    atomic_store(&g.renders, 0);
    t_http *t = t_start_hooked(NULL, 0, t_gate_hook, &g);
    static const char get[] = "GET /metrics HTTP/1.0\r\n\r\n";
    int fds[SCRAPES];
    fds[0] = t_connect(t->port);
    t_send(fds[0], get, sizeof get - 1);
    for (int waited_ms = 0; atomic_load(&g.renders) == 0; waited_ms++) {
        assert_true(waited_ms < T_RECV_TIMEOUT_S * 1000);
        t_sleep_ms(1);
    }
    for (int i = 1; i < SCRAPES; i++) {
        fds[i] = t_connect(t->port);
        t_send(fds[i], get, sizeof get - 1);
    }
    /* The loop answers while the render is held: each /livez comes after
     * the 7 scrapes were sent, so they have reached the loop too. */
    int answered = 0;
    for (int k = 0; k < 3; k++) {
        char *a = t_try_get(t->port, "GET /livez HTTP/1.0\r\n\r\n");
        answered += a && strncmp(a, "HTTP/1.1 200", 12) == 0;
        free(a);
        if (!a)
            break;
    }
    pthread_mutex_lock(&g.mu);
    g.open = 1;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    for (int i = 0; i < SCRAPES; i++) {
        size_t len = 0;
        char *raw = t_read_all(fds[i], &len, 0);
        close(fds[i]);
        t_answer a;
        t_parse(raw, len, &a);
        assert_int_equal(a.code, 200);
        assert_int_equal((size_t)a.content_length, a.body_len);
        check_exposition(a.body);
        assert_line(a.body, "pathd_build_info{version=\"9.9.9\"} 1");
        free(raw);
    }
    if (answered != 3)
        fail_msg("the loop answered %d of 3 /livez while a scrape was being rendered", answered);
    assert_int_equal(atomic_load(&g.renders), 2);
    t_stop(t);
}

static void test_http_routes(void **state)
{
    (void)state;
    t_http *t = t_start(NULL);
    t_answer a;

    t_get(t->port, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", &a);
    assert_int_equal(a.code, 200);
    assert_string_equal(a.body, "ok\n");
    free(a.raw);

    /* A bare LF ends lines too (RFC 9112 allows a server to accept it). */
    t_get(t->port, "GET /healthz HTTP/1.0\n\n", &a);
    assert_int_equal(a.code, 200);
    assert_string_equal(a.body, "ok\n");
    free(a.raw);

    t_get(t->port, "GET /metricsx HTTP/1.1\r\n\r\n", &a);
    assert_int_equal(a.code, 404);
    free(a.raw);
    t_get(t->port, "GET / HTTP/1.1\r\n\r\n", &a);
    assert_int_equal(a.code, 404);
    free(a.raw);

    /* A body after the headers is read and dropped, not left to reset the
     * connection under the answer. */
    t_get(t->port, "POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", &a);
    assert_int_equal(a.code, 405);
    assert_non_null(strstr(a.head, "\r\nAllow: GET, HEAD"));
    free(a.raw);
    t_get(t->port, "DELETE /healthz HTTP/1.1\r\n\r\n", &a);
    assert_int_equal(a.code, 405);
    free(a.raw);

    static const char *const bad[] = {
        "garbage\r\n\r\n",
        "GET metrics HTTP/1.1\r\n\r\n",
        "GET /metrics HTTP/2.0\r\n\r\n",
        "GET /metrics\r\n\r\n",
        "GET  /metrics HTTP/1.1\r\n\r\n",
        "GET /metrics HTTP/1.1 extra\r\n\r\n",
        "G(T /metrics HTTP/1.1\r\n\r\n",
        "\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        t_get(t->port, bad[i], &a);
        if (a.code != 400)
            fail_msg("request %zu answered %d, not 400", i, a.code);
        free(a.raw);
    }
    t_stop(t);
}

/* /healthz and /readyz follow the readiness callback, 503 with its reason
 * as the body; /livez answers 200 whatever it says. */
static void test_http_ready_probes(void **state)
{
    (void)state;
    t_http *t = t_start(NULL);
    t_answer a;
    static const char *const probes[] = {"/healthz", "/readyz"};
    for (int round = 0; round < 2; round++) {
        atomic_store(&t->not_ready, round == 0 ? 7 : 0);
        for (size_t i = 0; i < 2; i++) {
            char req[64];
            snprintf(req, sizeof req, "GET %s HTTP/1.1\r\n\r\n", probes[i]);
            t_get(t->port, req, &a);
            assert_int_equal(a.code, round == 0 ? 503 : 200);
            assert_string_equal(a.body, round == 0 ? "loading scenes (test 7)\n" : "ok\n");
            if (round == 0)
                assert_non_null(strstr(a.head, "HTTP/1.1 503 Service Unavailable\r\n"));
            free(a.raw);
        }
        t_get(t->port, "GET /livez HTTP/1.1\r\n\r\n", &a);
        assert_int_equal(a.code, 200);
        assert_string_equal(a.body, "ok\n");
        free(a.raw);
    }
    t_stop(t);
}

/* A request that arrives a few bytes at a time, with the blank line split
 * across reads, is still recognised. */
static void test_http_trickled_request(void **state)
{
    (void)state;
    t_http *t = t_start(NULL);
    const char *req = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    int fd = t_connect(t->port);
    size_t len = strlen(req);
    for (size_t i = 0; i < len; i += 3) {
        t_send(fd, req + i, len - i < 3 ? len - i : 3);
        t_sleep_ms(2);
    }
    char *raw = t_read_all(fd, &len, 0);
    close(fd);
    t_answer a;
    t_parse(raw, len, &a);
    assert_int_equal(a.code, 200);
    assert_string_equal(a.body, "ok\n");
    free(raw);
    t_stop(t);
}

static void test_http_oversized_headers(void **state)
{
    (void)state;
    pd_metrics_http_limits limits = {.max_request_bytes = 1024};
    t_http *t = t_start(&limits);

    /* Just under the cap is served... */
    char req[4096];
    int n = snprintf(req, sizeof req, "GET /healthz HTTP/1.1\r\nX-Pad: ");
    memset(req + n, 'a', 1024 - (size_t)n - 4);
    memcpy(req + 1024 - 4, "\r\n\r\n", 4);
    t_answer a;
    t_exchange(t->port, req, 1024, &a);
    assert_int_equal(a.code, 200);
    free(a.raw);

    /* ...one byte more is not, and neither are headers that never end:
     * 431, with the rest of the input drained rather than reset. */
    n = snprintf(req, sizeof req, "GET /healthz HTTP/1.1\r\nX-Pad: ");
    memset(req + n, 'a', 1025 - (size_t)n - 4);
    memcpy(req + 1025 - 4, "\r\n\r\n", 4);
    t_exchange(t->port, req, 1025, &a);
    assert_int_equal(a.code, 431);
    free(a.raw);

    memset(req + n, 'b', sizeof req - (size_t)n);
    t_exchange(t->port, req, sizeof req, &a);
    assert_int_equal(a.code, 431);
    assert_int_equal((size_t)a.content_length, a.body_len);
    free(a.raw);

    /* A client still sending long after the answer: the responder keeps
     * reading until it is done, so the client's send completes and it sees
     * the answer and a clean close, not a reset. */
    size_t big_len = T_MAX_ANSWER * 2;
    char *big = malloc(big_len);
    assert_non_null(big);
    memcpy(big, req, (size_t)n);
    memset(big + n, 'c', big_len - (size_t)n);
    t_exchange(t->port, big, big_len, &a);
    assert_int_equal(a.code, 431);
    free(a.raw);
    free(big);
    t_stop(t);
}

static void test_http_default_header_cap(void **state)
{
    (void)state;
    t_http *t = t_start(NULL);
    size_t len = PD_HTTP_MAX_REQUEST_BYTES + 100;
    char *req = malloc(len);
    assert_non_null(req);
    int n = snprintf(req, len, "GET /metrics HTTP/1.1\r\nCookie: ");
    memset(req + n, 'c', len - (size_t)n);
    t_answer a;
    t_exchange(t->port, req, len, &a);
    assert_int_equal(a.code, 431);
    free(a.raw);
    free(req);
    t_stop(t);
}

static void test_http_read_timeout(void **state)
{
    (void)state;
    pd_metrics_http_limits limits = {.read_timeout_ms = T_SHORT_TIMEOUT_MS};
    t_http *t = t_start(&limits);

    /* Silent: closed without an answer once the timeout runs out. */
    double t0 = t_now_ms();
    int fd = t_connect(t->port);
    size_t len = 0;
    char *raw = t_read_all(fd, &len, 0);
    double waited = t_now_ms() - t0;
    close(fd);
    assert_int_equal(len, 0);
    free(raw);
    /* Not early; a close that never came would have failed t_read_all
     * after T_RECV_TIMEOUT_S, so no upper bound is timed here. */
    assert_true(waited >= T_SHORT_TIMEOUT_MS * 0.8);

    /* Half a request: the same. */
    fd = t_connect(t->port);
    t_send(fd, "GET /metr", 9);
    raw = t_read_all(fd, &len, 0);
    close(fd);
    assert_int_equal(len, 0);
    free(raw);

    t_stop(t);
}

/* Answers /healthz on a fresh connection; returns the code (0: closed
 * without an answer). The test fails if no answer or close comes within
 * T_RECV_TIMEOUT_S. */
static int t_healthz_code(uint16_t port)
{
    int fd = t_connect(port);
    t_send(fd, "GET /healthz HTTP/1.1\r\n\r\n", 25);
    size_t len = 0;
    char *raw = t_read_all(fd, &len, 1);
    close(fd);
    t_answer a = {0};
    if (len > 0)
        t_parse(raw, len, &a);
    free(raw);
    return len > 0 ? a.code : 0;
}

/* With room for one connection, a client that keeps its socket open after
 * its answer does not lock a probe out: the probe's connection takes the
 * place of the oldest at once (issue 10, finding 8), well before the read
 * timeout, and the holder is closed. */
static void test_http_linger_bounded(void **state)
{
    (void)state;
    pd_metrics_http_limits limits = {.read_timeout_ms = T_LONG_TIMEOUT_MS, .max_connections = 1};
    t_http *t = t_start(&limits);

    int holder = t_connect(t->port);
    t_send(holder, "GET /healthz HTTP/1.1\r\n\r\n", 25);
    size_t len = 0;
    char *raw = t_read_all(holder, &len, 0);
    t_answer a;
    t_parse(raw, len, &a);
    assert_int_equal(a.code, 200);
    free(raw);

    assert_int_equal(t_healthz_code(t->port), 200);
    close(holder);
    t_stop(t);
}

/* Two idle connections fill a limit of two: a third evicts the oldest and is
 * served; the younger idle one still is too. */
static void test_http_connection_limit(void **state)
{
    (void)state;
    pd_metrics_http_limits limits = {.read_timeout_ms = T_LONG_TIMEOUT_MS, .max_connections = 2};
    t_http *t = t_start(&limits);
    int idle1 = t_connect(t->port);
    t_sleep_ms(20); /* accepted in this order */
    int idle2 = t_connect(t->port);
    t_sleep_ms(20);

    assert_int_equal(t_healthz_code(t->port), 200);

    /* idle1, the oldest, made room: it is closed without an answer. */
    size_t len = 0;
    char *raw = t_read_all(idle1, &len, 1);
    assert_int_equal(len, 0);
    free(raw);
    close(idle1);

    t_send(idle2, "GET /healthz HTTP/1.1\r\n\r\n", 25);
    raw = t_read_all(idle2, &len, 0);
    t_answer a;
    t_parse(raw, len, &a);
    assert_int_equal(a.code, 200);
    free(raw);
    close(idle2);
    t_stop(t);
}

static void test_http_start_errors(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    pd_metrics *m = pd_metrics_create("x");
    assert_non_null(m);
    char err[256];

    err[0] = '\0';
    assert_null(pd_metrics_http_start(&loop, "localhost", 0, NULL, m, NULL, NULL, NULL, err, sizeof err));
    assert_non_null(strstr(err, "'localhost' is not a numeric"));
    assert_null(pd_metrics_http_start(&loop, "127.0.0.1", 0, NULL, NULL, NULL, NULL, NULL, err, sizeof err));

    /* A port someone already listens on. */
    pd_metrics_http *first = pd_metrics_http_start(&loop, "127.0.0.1", 0, NULL, m, NULL, NULL, NULL, err, sizeof err);
    assert_non_null(first);
    uint16_t port = pd_metrics_http_port(first);
    err[0] = '\0';
    assert_null(pd_metrics_http_start(&loop, "127.0.0.1", port, NULL, m, NULL, NULL, NULL, err, sizeof err));
    assert_non_null(strstr(err, "cannot listen on 127.0.0.1:"));
    pd_metrics_http_close(first);
    pd_metrics_http_close(NULL);
    assert_int_equal(pd_metrics_http_port(NULL), 0);

    /* IPv6 loopback, where the machine has it. */
    pd_metrics_http *v6 = pd_metrics_http_start(&loop, "::1", 0, NULL, m, NULL, NULL, NULL, err, sizeof err);
    if (v6) {
        assert_true(pd_metrics_http_port(v6) != 0);
        pd_metrics_http_close(v6);
    } else {
        assert_non_null(strstr(err, "cannot listen on [::1]:0"));
    }

    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    pd_metrics_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_requests_by_type_and_status),
        cmocka_unit_test(test_latency_histogram),
        cmocka_unit_test(test_latency_scene_cap),
        cmocka_unit_test(test_scene_series_capped_to_the_busiest),
        cmocka_unit_test(test_forgotten_scene_counts_in_other),
        cmocka_unit_test(test_overload_and_reload_counters),
        cmocka_unit_test(test_gauges_and_scene_versions),
        cmocka_unit_test(test_label_escaping),
        cmocka_unit_test(test_type_names),
        cmocka_unit_test(test_http_metrics),
        cmocka_unit_test(test_http_half_close_gets_whole_answer),
        cmocka_unit_test(test_http_scrape_renders_off_the_loop),
        cmocka_unit_test(test_http_routes),
        cmocka_unit_test(test_http_ready_probes),
        cmocka_unit_test(test_http_trickled_request),
        cmocka_unit_test(test_http_oversized_headers),
        cmocka_unit_test(test_http_default_header_cap),
        cmocka_unit_test(test_http_read_timeout),
        cmocka_unit_test(test_http_linger_bounded),
        cmocka_unit_test(test_http_connection_limit),
        cmocka_unit_test(test_http_start_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
