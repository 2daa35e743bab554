/*
 * test_e2e_scenes.c - scenes made at run time through the real daemon
 * (issue 12): CreateScene from raw cells and from a map file (pathctl),
 * CreateInstance, paths on both, an update that makes the instance diverge
 * while the template's paths stay, SceneInfo's sharing fields, DropScene
 * with and without portals, the answers' statuses, several operations as
 * one version and UPDATE_RESTORE, the scene caps set in the config
 * (limits.max_scenes, max_scene_cells, max_scene_bytes; the last raised by
 * a reload), a scene with no walkable cell refused and the log's line on
 * each scene made (issue 30), maps refused on their header by
 * max_scene_cells and a running CreateScene stopped by Cancel or by its
 * connection's close (issue 29, findings 6 and 7), and the memory figure:
 * 10,000 instances of a 256x256 template with unit sizes 1-3 must add at
 * most 100 MiB to the daemon's RSS; /metrics over 5,000 instances gives
 * series to limits.metrics_scene_series of them, the busiest, and its
 * per-scene requests add up (issue 29, finding 13).
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "../unit/zero_map.h"

#define T_SIDE 256
#define T_INSTANCES 10000
/* The bound for T_INSTANCES unchanged instances. */
#define T_INSTANCES_MAX_KIB (100 * 1024)
static const uint32_t T_UNITS[] = { 1, 2, 3 };
/* The caps test_max_scenes and test_max_scene_cells set: the harness
 * config serves 3 scenes, so 2 more may be made; scenes T_CAP_SIDE square. */
#define T_MAX_SCENES 5
#define T_CAP_SIDE 32
/* limits.max_scene_bytes's floor, which test_max_scene_bytes starts with. */
#define T_MIN_SCENE_BYTES (1024 * 1024)
/* How long a reload may take (sanitizer builds). */
#define T_RELOAD_TIMEOUT_MS 20000

static int setup(void **state)
{
    return pdi_fixture_start(state, NULL);
}

/* The RSS figure counts what the daemon holds, not what AddressSanitizer
 * keeps back: the registry frees its scene array and index each time they
 * double, and a full quarantine would hold them all (no-op without ASan). */
static int setup_small_quarantine(void **state)
{
    pdi_limits l = { 0 };
    l.small_quarantine = 1;
    return pdi_fixture_start(state, &l);
}

/* An open 256x256 field with a wall across the middle but for a gap at the
 * right edge, so crossing it is a long way round. */
static uint8_t *field(void)
{
    uint8_t *c = malloc(T_SIDE * T_SIDE);
    assert_non_null(c);
    memset(c, 1, T_SIDE * T_SIDE);
    for (int x = 0; x < T_SIDE - 8; x++)
        c[(T_SIDE / 2) * T_SIDE + x] = 0;
    return c;
}

static double path_cost(pdc_conn *c, const char *scene, int32_t sx, int32_t sy, int32_t gx, int32_t gy, int *status)
{
    pdc_path_req req;
    memset(&req, 0, sizeof req);
    req.scene = scene;
    req.start.x = sx;
    req.start.y = sy;
    req.goal.x = gx;
    req.goal.y = gy;
    pdc_path_result r;
    *status = pdc_find_path(c, &req, &r);
    double cost = r.cost;
    pdc_path_result_free(&r);
    return cost;
}

static void test_create_instance_update_drop(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    uint8_t *cells = field();
    pdc_create_scene_req req = { .name = "arena", .width = T_SIDE, .height = T_SIDE, .cells = cells,
                                 .unit_sizes = T_UNITS, .unit_size_count = 3, .cell_size = 2 };
    pdc_scene_change out;
    assert_int_equal(pdc_create_scene(c, &req, &out), PDC_OK);
    assert_int_equal(out.version, 1);
    assert_true(out.own_bytes > (uint64_t)T_SIDE * T_SIDE * 4);
    assert_int_equal(pdc_create_scene(c, &req, &out), PDC_SCENE_EXISTS);
    /* The name is checked before the map is parsed (issue 29 finding 10:
     * a slow map named after a served scene held that scene's lane until
     * it was parsed): a map that would not parse is answered SCENE_EXISTS,
     * not INVALID_ARGUMENT. */
    static const char not_a_map[] = "this is not an ascii map\n##\n";
    pdc_create_scene_req bad = { .name = "arena", .format = "ascii", .map = not_a_map, .map_len = sizeof not_a_map - 1 };
    assert_int_equal(pdc_create_scene(c, &bad, &out), PDC_SCENE_EXISTS);
    assert_non_null(strstr(pdc_last_error(c), "'arena' exists already"));
    assert_int_equal(pdc_create_instance(c, "arena-1", "arena", &out), PDC_OK);
    assert_true(out.own_bytes < 1024);
    assert_int_equal(pdc_create_instance(c, "arena-2", "nowhere", &out), PDC_UNKNOWN_SCENE);

    int st;
    double base = path_cost(c, "arena", 2, 2, 2, T_SIDE - 3, &st);
    assert_int_equal(st, PDC_OK);
    assert_true(path_cost(c, "arena-1", 2, 2, 2, T_SIDE - 3, &st) == base);
    assert_int_equal(st, PDC_OK);
    /* Closing the gap cuts the instance in two; the template keeps its path. */
    pdc_update_req u = { .scene = "arena-1", .is_rect = 1, .rect_min = { T_SIDE - 8, T_SIDE / 2 },
                         .rect_max = { T_SIDE - 1, T_SIDE / 2 }, .op = PDC_UPDATE_BLOCK };
    pdc_update_result ur;
    assert_int_equal(pdc_update_cells(c, &u, &ur), PDC_OK);
    assert_int_equal(ur.version, 2);
    path_cost(c, "arena-1", 2, 2, 2, T_SIDE - 3, &st);
    assert_int_equal(st, PDC_NO_PATH);
    assert_true(path_cost(c, "arena", 2, 2, 2, T_SIDE - 3, &st) == base);
    assert_int_equal(st, PDC_OK);

    pdc_scene_details info;
    assert_int_equal(pdc_scene_info(c, "arena-1", &info), PDC_OK);
    assert_int_equal(info.width, T_SIDE);
    assert_true(info.cell_size == 2);
    assert_int_equal(info.unit_size_count, 3);
    pdc_scene_details_free(&info);

    /* Dropped: gone for new requests. Portals name serpent's neighbours? No:
     * the harness config has none, so a config scene drops at once too. */
    assert_int_equal(pdc_drop_scene(c, "arena", 0, &out), PDC_OK);
    assert_int_equal(out.version, 1);
    path_cost(c, "arena", 2, 2, 2, 3, &st);
    assert_int_equal(st, PDC_UNKNOWN_SCENE);
    assert_int_equal(pdc_drop_scene(c, "arena", 0, &out), PDC_UNKNOWN_SCENE);
    assert_int_equal(pdc_drop_scene(c, "arena-1", 0, &out), PDC_OK);
    assert_int_equal(out.version, 2);
    /* Bad requests name their field. */
    req.name = "two words";
    assert_int_equal(pdc_create_scene(c, &req, &out), PDC_INVALID_ARGUMENT);
    assert_non_null(strstr(pdc_last_error(c), "scene.name"));
    req.name = "short";
    req.height = T_SIDE - 1; /* the cells hold more than width * height */
    req.cells = cells;
    pdc_close(c);
    free(cells);
    pdi_assert_daemon_serves(d);
}

/* Several operations as one version, and restoring the authored cells. */
static void test_ops_and_restore(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    uint8_t *cells = field();
    cells[5 * T_SIDE + 5] = 9; /* one costly cell, restored with its cost */
    pdc_create_scene_req req = { .name = "doors", .width = T_SIDE, .height = T_SIDE, .cells = cells };
    pdc_scene_change out;
    assert_int_equal(pdc_create_scene(c, &req, &out), PDC_OK);
    int st;
    double open_cost = path_cost(c, "doors", 2, 2, 2, T_SIDE - 3, &st);
    assert_int_equal(st, PDC_OK);
    /* Close the gap (door A) and open a hole at the left (door B) at once. */
    const pdc_update_req ops[] = {
        { .scene = "doors", .is_rect = 1, .rect_min = { T_SIDE - 8, T_SIDE / 2 }, .rect_max = { T_SIDE - 1, T_SIDE / 2 },
          .op = PDC_UPDATE_BLOCK },
        { .scene = "doors", .is_rect = 1, .rect_min = { 0, T_SIDE / 2 }, .rect_max = { 3, T_SIDE / 2 },
          .op = PDC_UPDATE_PASS },
        { .scene = "doors", .is_rect = 1, .rect_min = { 5, 5 }, .rect_max = { 5, 5 }, .op = PDC_UPDATE_PASS },
    };
    pdc_update_result ur;
    assert_int_equal(pdc_update_cells_many(c, ops, 3, &ur), PDC_OK);
    assert_int_equal(ur.version, 2);
    assert_int_equal(ur.cells_changed, 8 + 4 + 1);
    double short_cost = path_cost(c, "doors", 2, 2, 2, T_SIDE - 3, &st);
    assert_int_equal(st, PDC_OK);
    assert_true(short_cost < open_cost);
    /* Restore everything: the authored grid comes back, cost 9 included. */
    pdc_update_req back = { .scene = "doors", .is_rect = 1, .rect_min = { 0, 0 },
                            .rect_max = { T_SIDE - 1, T_SIDE - 1 }, .op = PDC_UPDATE_RESTORE };
    assert_int_equal(pdc_update_cells(c, &back, &ur), PDC_OK);
    assert_int_equal(ur.version, 3);
    assert_int_equal(ur.cells_changed, 13);
    assert_true(path_cost(c, "doors", 2, 2, 2, T_SIDE - 3, &st) == open_cost);
    pdc_grid g;
    assert_int_equal(pdc_scene_grid(c, "doors", 0, &g), PDC_OK);
    assert_memory_equal(g.cells, cells, T_SIDE * T_SIDE);
    pdc_grid_free(&g);
    /* A bad operation refuses the whole update. */
    pdc_update_req bad[] = { ops[0], ops[1] };
    bad[1].rect_max.x = T_SIDE;
    assert_int_equal(pdc_update_cells_many(c, bad, 2, &ur), PDC_OUT_OF_BOUNDS);
    pdc_scene_details info;
    assert_int_equal(pdc_scene_info(c, "doors", &info), PDC_OK);
    assert_int_equal(info.version, 3);
    pdc_scene_details_free(&info);
    pdc_close(c);
    free(cells);
}

/* pathctl scene create / instance / drop with --json. */
static void test_pathctl_scene(void **state)
{
    pdi_daemon *d = *state;
    char cmd[1024], out[4096];
    struct {
        const char *args;
        int exit;
        const char *want;
    } steps[] = {
        { "--json scene create small --map " PD_TEST_DATA_DIR "/scene_small.txt --units 1,2 --origin -3,4",
          0, "{\"status\":\"OK\",\"scene\":\"small\",\"version\":1," },
        { "--json scene instance small-copy --of small", 0, "{\"status\":\"OK\",\"scene\":\"small-copy\",\"version\":1," },
        { "--json scene instance small-copy --of small", 1, "{\"status\":\"SCENE_EXISTS\"" },
        { "--json scene drop small", 0, "{\"status\":\"OK\",\"scene\":\"small\",\"version\":1," },
        { "--json scene drop small", 1, "{\"status\":\"UNKNOWN_SCENE\"" },
        { "scene create x", 2, "" },
    };
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        snprintf(cmd, sizeof cmd, "'%s' --server %s %s 2>/dev/null", pdi_pathctl_binary(), d->addr, steps[i].args);
        FILE *p = popen(cmd, "r");
        assert_non_null(p);
        size_t n = fread(out, 1, sizeof out - 1, p);
        out[n] = '\0';
        int st = pclose(p);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != steps[i].exit || strncmp(out, steps[i].want, strlen(steps[i].want)))
            fail_msg("pathctl %s: exit %d, printed %s", steps[i].args, WEXITSTATUS(st), out);
    }
    pdc_conn *c = pdi_connect(d);
    pdc_scene_details info;
    assert_int_equal(pdc_scene_info(c, "small-copy", &info), PDC_OK);
    assert_true(info.origin_x == -3 && info.origin_y == 4);
    assert_int_equal(info.unit_size_count, 2);
    pdc_scene_details_free(&info);
    pdc_close(c);
}

/* The memory figure: unchanged instances cost their struct, not a map. */
/* n instances of tmpl named "<tmpl>-00000" on; out is the last's answer. */
static void make_instances(pdc_conn *c, const char *tmpl, int n, pdc_scene_change *out)
{
    char name[64];
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "%s-%05d", tmpl, i);
        int st = pdc_create_instance(c, name, tmpl, out);
        if (st != PDC_OK)
            fail_msg("instance %d: %s: %s", i, pdc_status_name(st), pdc_last_error(c));
    }
}

static void test_instances_memory(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    uint8_t *cells = field();
    pdc_create_scene_req req = { .name = "tmpl", .width = T_SIDE, .height = T_SIDE, .cells = cells,
                                 .unit_sizes = T_UNITS, .unit_size_count = 3 };
    pdc_scene_change out;
    assert_int_equal(pdc_create_scene(c, &req, &out), PDC_OK);
    uint64_t template_bytes = out.own_bytes;
    long before = pdi_daemon_rss_kib(d);
    double t0 = pdi_now_ms();
    make_instances(c, "tmpl", T_INSTANCES, &out);
    double ms = pdi_now_ms() - t0;
    long after = pdi_daemon_rss_kib(d);
    print_message("%d instances of a %dx%d template (units 1-3, %llu bytes): RSS %ld -> %ld KiB (+%ld KiB, "
                  "%.0f bytes each), %.1f s; own bytes of the last %llu; all scenes %llu bytes\n",
                  T_INSTANCES, T_SIDE, T_SIDE, (unsigned long long)template_bytes, before, after, after - before,
                  (after - before) * 1024.0 / T_INSTANCES, ms / 1000.0, (unsigned long long)out.own_bytes,
                  (unsigned long long)out.scene_bytes);
    assert_true(before > 0 && after > 0);
    assert_true(after - before <= T_INSTANCES_MAX_KIB);
    /* Every instance answers, and a changed one diverges alone. */
    int st;
    double base = path_cost(c, "tmpl-09999", 2, 2, 2, T_SIDE - 3, &st);
    assert_int_equal(st, PDC_OK);
    pdc_update_req u = { .scene = "tmpl-00042", .is_rect = 1, .rect_min = { T_SIDE - 8, T_SIDE / 2 },
                         .rect_max = { T_SIDE - 1, T_SIDE / 2 }, .op = PDC_UPDATE_BLOCK };
    pdc_update_result ur;
    assert_int_equal(pdc_update_cells(c, &u, &ur), PDC_OK);
    path_cost(c, "tmpl-00042", 2, 2, 2, T_SIDE - 3, &st);
    assert_int_equal(st, PDC_NO_PATH);
    assert_true(path_cost(c, "tmpl-00041", 2, 2, 2, T_SIDE - 3, &st) == base);
    pdc_close(c);
    free(cells);
}

static int setup_scene_series(void **state)
{
    pdi_limits l = { 0 };
    l.metrics = 1;
    l.metrics_scene_series = 10;
    return pdi_fixture_start(state, &l);
}

/* The value of the sample line that starts with prefix (labels included). */
static double sample_of(const char *text, const char *prefix)
{
    char line[128];
    snprintf(line, sizeof line, "\n%s", prefix);
    const char *p = strstr(text, line);
    if (!p)
        fail_msg("no sample %s", prefix);
    return strtod(p + strlen(line), NULL);
}

static size_t lines_starting(const char *text, const char *prefix)
{
    size_t n = 0, len = strlen(prefix);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        n += strncmp(p, prefix, len) == 0;
    return n;
}

/* Issue 29, finding 13: at 100,000 instances /metrics was 34.7 MB. With
 * 5,000 instances and limits.metrics_scene_series 10, the scrape gives 10
 * scenes their series, the two that were asked for paths among them, and
 * the per-scene requests add up to every path asked for; a dropped
 * scene's requests stay in the total. */
static void test_metrics_series_of_the_busiest_scenes(void **state)
{
    enum { N = 5000 };
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    uint8_t cells[16 * 16];
    memset(cells, 1, sizeof cells);
    pdc_create_scene_req req = { .name = "m", .width = 16, .height = 16, .cells = cells };
    pdc_scene_change out;
    assert_int_equal(pdc_create_scene(c, &req, &out), PDC_OK);
    make_instances(c, "m", N, &out);
    char name[32];
    const int asked[][2] = { { 4242, 42 }, { 7, 7 } };
    int total = 0, st;
    for (size_t k = 0; k < 2; k++) {
        snprintf(name, sizeof name, "m-%05d", asked[k][0]);
        for (int i = 0; i < asked[k][1]; i++) {
            path_cost(c, name, 1, 1, 14, 14, &st);
            assert_int_equal(st, PDC_OK);
            total++;
        }
    }
    char *text = pdi_metrics_get(d);
    assert_non_null(text);
    assert_true(sample_of(text, "pathd_scenes ") >= N + 1);
    assert_int_equal(lines_starting(text, "pathd_scene_requests_total{"), 10);
    assert_int_equal(lines_starting(text, "pathd_scene_version{"), 10);
    assert_true(sample_of(text, "pathd_scene_requests_total{scene=\"m-04242\"} ") == 42);
    assert_true(sample_of(text, "pathd_scene_requests_total{scene=\"m-00007\"} ") == 7);
    assert_true(sample_of(text, "pathd_scene_requests_other ") == 0);
    free(text);

    pdc_scene_change dropped;
    assert_int_equal(pdc_drop_scene(c, "m-04242", 0, &dropped), PDC_OK);
    text = pdi_metrics_get(d);
    assert_int_equal(lines_starting(text, "pathd_scene_requests_total{scene=\"m-04242\"}"), 0);
    assert_true(sample_of(text, "pathd_scene_requests_total{scene=\"m-00007\"} ") == 7);
    assert_true(sample_of(text, "pathd_scene_requests_other ") == total - 7);
    free(text);
    pdc_close(c);
}

/* The scene caps set in the config: CreateScene and CreateInstance within
 * them are served, one past them is answered LIMIT_EXCEEDED naming the
 * key, and nothing of it is served. */
static void expect_limit(pdc_conn *c, int status, const char *says)
{
    assert_int_equal(status, PDC_LIMIT_EXCEEDED);
    if (!strstr(pdc_last_error(c), says))
        fail_msg("expected \"%s\" in \"%s\"", says, pdc_last_error(c));
}

/* A CreateScene (of an open field at least T_CAP_SIDE wide) that must be
 * served: a path along its first row. */
static void expect_created(pdc_conn *c, const pdc_create_scene_req *req)
{
    pdc_scene_change out;
    assert_int_equal(pdc_create_scene(c, req, &out), PDC_OK);
    int st;
    assert_true(path_cost(c, req->name, 0, 0, T_CAP_SIDE - 1, 0, &st) == T_CAP_SIDE - 1);
    assert_int_equal(st, PDC_OK);
}

static void expect_not_served(pdc_conn *c, const char *scene)
{
    int st;
    path_cost(c, scene, 0, 0, 1, 1, &st);
    assert_int_equal(st, PDC_UNKNOWN_SCENE);
}

/* The caps each test sets, handed to setup_with_limits as cmocka's prestate. */
static const pdi_limits MAX_SCENES = { .max_scenes = T_MAX_SCENES };
static const pdi_limits MAX_SCENE_CELLS = { .max_scene_cells = T_CAP_SIDE * T_CAP_SIDE };
static const pdi_limits MAX_SCENE_BYTES = { .max_scene_bytes = T_MIN_SCENE_BYTES };

static int setup_with_limits(void **state)
{
    return pdi_fixture_start(state, *state);
}

/* A CreateScene of an open width x height field over cells (room for it). */
static pdc_create_scene_req open_field(const char *name, uint8_t *cells, uint32_t width, uint32_t height)
{
    memset(cells, 1, (size_t)width * height);
    return (pdc_create_scene_req){ .name = name, .width = width, .height = height, .cells = cells };
}

static void test_max_scenes(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    uint8_t cells[T_CAP_SIDE * T_CAP_SIDE];
    pdc_create_scene_req req = open_field("made-1", cells, T_CAP_SIDE, T_CAP_SIDE);
    pdc_scene_change out;
    /* The config's 3 scenes and these 2 make T_MAX_SCENES. */
    expect_created(c, &req);
    assert_int_equal(pdc_create_instance(c, "copy-1", "made-1", &out), PDC_OK);
    req.name = "made-2";
    expect_limit(c, pdc_create_scene(c, &req, &out), "5 scenes are served, limits.max_scenes is 5");
    expect_limit(c, pdc_create_instance(c, "copy-2", "made-1", &out), "limits.max_scenes is 5");
    expect_not_served(c, "made-2");
    expect_not_served(c, "copy-2");

    /* A drop makes room again. */
    assert_int_equal(pdc_drop_scene(c, "copy-1", 0, &out), PDC_OK);
    expect_created(c, &req);
    pdc_close(c);
    pdi_assert_daemon_serves(d);
}

static void test_max_scene_cells(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    uint8_t cells[(T_CAP_SIDE + 1) * T_CAP_SIDE];
    pdc_create_scene_req req = open_field("wide", cells, T_CAP_SIDE + 1, T_CAP_SIDE);
    pdc_scene_change out;
    expect_limit(c, pdc_create_scene(c, &req, &out), "1056 cells, limits.max_scene_cells is 1024");
    expect_not_served(c, "wide");
    req.width = T_CAP_SIDE;
    expect_created(c, &req);
    /* The cap is on the cells a request sends: an instance shares its
     * template's, so one of the config's larger serpent is served. */
    assert_int_equal(pdc_create_instance(c, "serpent-copy", "serpent", &out), PDC_OK);
    pdc_close(c);
    pdi_assert_daemon_serves(d);
}

/* The config's scenes alone pass the floor (they were loaded, not made by a
 * request), so any CreateScene is refused; the answer says what it needs
 * and what the scenes hold, and a reload raising the cap to exactly their
 * sum lets one such scene in, and not a second. */
static void test_max_scene_bytes(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    uint8_t cells[T_CAP_SIDE * T_CAP_SIDE];
    pdc_create_scene_req req = open_field("made-1", cells, T_CAP_SIDE, T_CAP_SIDE);
    pdc_scene_change out;
    expect_limit(c, pdc_create_scene(c, &req, &out), ", limits.max_scene_bytes is 1048576");
    unsigned long long need = 0, held = 0;
    /* Checked before the scene is built: an open field's labels take a
     * byte a cell, so the estimate is what it holds. */
    assert_int_equal(sscanf(pdc_last_error(c), "scene 'made-1': needs at least %llu bytes, scenes hold %llu", &need,
                            &held),
                     2);
    assert_true(held > T_MIN_SCENE_BYTES);

    pdi_limits l = { 0 };
    l.max_scene_bytes = held + need;
    assert_int_equal(pdi_log_count(d, "reloaded "), 0);
    assert_int_equal(pdi_write_config(d, &l), 0);
    assert_int_equal(pdi_daemon_signal(d, SIGHUP), 0);
    assert_true(pdi_wait_log(d, "reloaded ", T_RELOAD_TIMEOUT_MS));
    expect_created(c, &req);
    req.name = "made-2";
    char says[128];
    snprintf(says, sizeof says, "needs at least %llu bytes, scenes hold %llu, limits.max_scene_bytes is %llu", need,
             held + need, held + need);
    expect_limit(c, pdc_create_scene(c, &req, &out), says);
    /* An update's new version is a copy of the scene's structures: at the
     * cap it is refused too (issue 29 finding 9), and made-1 still serves
     * its first version. */
    pdc_update_req u = { .scene = "made-1", .is_rect = 1, .rect_min = { 0, 1 }, .rect_max = { 3, 1 },
                         .op = PDC_UPDATE_BLOCK };
    pdc_update_result r;
    snprintf(says, sizeof says, "scenes hold %llu, limits.max_scene_bytes would be passed", held + need);
    expect_limit(c, pdc_update_cells(c, &u, &r), says);
    pdc_scene_details info;
    assert_int_equal(pdc_scene_info(c, "made-1", &info), PDC_OK);
    assert_int_equal(info.version, 1);
    pdc_scene_details_free(&info);
    pdc_close(c);
    pdi_assert_daemon_serves(d);
}

/* tests/data/tiled/NAME, whole; *len gets its size. */
static char *read_tiled(const char *name, size_t *len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/tiled/%s", PD_TEST_DATA_DIR, name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *buf = malloc(65536);
    assert_non_null(buf);
    *len = fread(buf, 1, 65536, f);
    fclose(f);
    return buf;
}

static void expect_refused(pdc_conn *c, const pdc_create_scene_req *req, const char *says)
{
    pdc_scene_change out;
    assert_int_equal(pdc_create_scene(c, req, &out), PDC_INVALID_ARGUMENT);
    if (strcmp(pdc_last_error(c), says) != 0)
        fail_msg("expected \"%s\", got \"%s\"", says, pdc_last_error(c));
    expect_not_served(c, req->name);
}

/* Issue 30: a Tiled map whose floor tiles carry no property and whose
 * wall tile says blocked = true, sent as it is (.tmj and .tmx), serves
 * its rooms, and the log says what each rule decided; the config's scenes
 * were logged as they loaded. A scene with no walkable cell (raw cells,
 * an ASCII map, a Tiled map of walls) is refused with INVALID_ARGUMENT
 * saying why, and not served. */
static void test_create_scene_needs_a_walkable_cell(void **state)
{
    pdi_daemon *d = *state;
    assert_true(pdi_log_contains(d, "scene 'serpent' built: "));
    assert_true(pdi_log_contains(d, "scene 'den520d' built: 256x257, "));
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    static const char *const files[] = { "walls_marked.tmj", "walls_marked.tmx" };
    static const char *const names[] = { "marked-tmj", "marked-tmx" };
    for (size_t i = 0; i < 2; i++) {
        size_t len = 0;
        char *map = read_tiled(files[i], &len);
        pdc_create_scene_req req = { .name = names[i], .format = "tiled", .map = map, .map_len = len };
        pdc_scene_change out;
        assert_int_equal(pdc_create_scene(c, &req, &out), PDC_OK);
        free(map);
        pdc_scene_details info;
        assert_int_equal(pdc_scene_info(c, names[i], &info), PDC_OK);
        assert_int_equal(info.passable_cells, 22);
        pdc_scene_details_free(&info);
        /* From the top-left room out through the gate in the bottom wall. */
        int st;
        path_cost(c, names[i], 1, 1, 4, 5, &st);
        assert_int_equal(st, PDC_OK);
        char line[256];
        snprintf(line, sizeof line, "scene '%s' created: 8x6, 22 of 48 cells walkable (45.8%%); layers ground, "
                 "walls: 26 by property, 22 untagged (untagged_tiles: open)", names[i]);
        if (!pdi_wait_log(d, line, 5000)) {
            pdi_print_log(d);
            fail_msg("no \"%s\" in the log", line);
        }
    }

    uint8_t zeros[16] = { 0 };
    pdc_create_scene_req raw = { .name = "sealed", .width = 4, .height = 4, .cells = zeros };
    expect_refused(c, &raw, "scene 'sealed': no walkable cell: all 4 x 4 cells are blocked");
    const char *ascii = "###\n###\n";
    pdc_create_scene_req text = { .name = "vault", .format = "ascii", .map = ascii, .map_len = strlen(ascii) };
    expect_refused(c, &text, "scene 'vault': map: no walkable cell: all 3 x 2 cells are blocked");
    const char *fort =
        "{\"type\": \"map\", \"orientation\": \"orthogonal\", \"width\": 2, \"height\": 2, \"tilewidth\": 16,"
        " \"tileheight\": 16, \"tilesets\": [{\"firstgid\": 1, \"tilecount\": 1, \"tiles\": [{\"id\": 0,"
        " \"properties\": [{\"name\": \"blocked\", \"type\": \"bool\", \"value\": true}]}]}],"
        " \"layers\": [{\"type\": \"tilelayer\", \"name\": \"walls\", \"data\": [1, 1, 1, 1]}]}";
    pdc_create_scene_req tiled = { .name = "fort", .format = "tiled", .map = fort, .map_len = strlen(fort) };
    expect_refused(c, &tiled, "scene 'fort': map: no walkable cell: layers walls: 4 by property");
    assert_int_equal(pdi_log_count(d, "scene 'fort' created"), 0);
    pdc_close(c);
    pdi_assert_daemon_serves(d);
}

/* Issue 29 finding 7: with the default caps (limits.max_scene_cells 16 Mi)
 * an 11 KB zstd map of 8192 x 8192 tiles and a 328-byte infinite map
 * whose two chunks span as much, sent with unit sizes 1-8, are refused on
 * their header, LIMIT_EXCEEDED naming the cap, and not served. */
static void test_create_scene_cells_cap_on_the_header(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    static const uint32_t units[] = { 1, 2, 3, 4, 5, 6, 7, 8 };
    char *big = zero_map_tmx(8192, 8192, 16, 1, "");
    assert_non_null(big);
    const char *inf = "{\"infinite\": true, \"tilewidth\": 16, \"tileheight\": 16, \"layers\": [{\"type\": "
                      "\"tilelayer\", \"chunks\": [{\"x\": 0, \"y\": 0, \"width\": 1, \"height\": 1, \"data\": [0]}, "
                      "{\"x\": 8191, \"y\": 8191, \"width\": 1, \"height\": 1, \"data\": [0]}]}]}";
    const pdc_create_scene_req reqs[] = {
        { .name = "zstd8192", .format = "tiled", .map = big, .map_len = strlen(big) },
        { .name = "infinite", .format = "tiled", .map = inf, .map_len = strlen(inf), .unit_sizes = units,
          .unit_size_count = 8 },
    };
    for (size_t i = 0; i < 2; i++) {
        pdc_scene_change out;
        char says[160];
        snprintf(says, sizeof says, "scene '%s': map: $: 8192 x 8192 cells is more than limits.max_scene_cells "
                 "(16777216)", reqs[i].name);
        expect_limit(c, pdc_create_scene(c, &reqs[i], &out), says);
        expect_not_served(c, reqs[i].name);
    }
    free(big);
    pdc_close(c);
    pdi_assert_daemon_serves(d);
}

/* Sends CreateScene `name` of a 4096 x 4096 map with unit sizes 1-8 (the
 * cap's size: parsing it and building eight unit grids and labels takes
 * seconds) as request id on fd, without waiting. */
static void send_heavy_scene(int fd, uint64_t id, const char *name, const char *map)
{
    static uint32_t units[] = { 1, 2, 3, 4, 5, 6, 7, 8 };
    Pathd__V1__CreateScene cs = PATHD__V1__CREATE_SCENE__INIT;
    cs.name = (char *)name;
    cs.format = "tiled";
    cs.map.data = (uint8_t *)map;
    cs.map.len = strlen(map);
    cs.unit_sizes = units;
    cs.n_unit_sizes = 8;
    Pathd__V1__Request req = PATHD__V1__REQUEST__INIT;
    req.id = id;
    req.body_case = PATHD__V1__REQUEST__BODY_CREATE_SCENE;
    req.create_scene = &cs;
    assert_int_equal(pdi_raw_send_request(fd, &req), 0);
}

/* Issue 29 finding 6: a Cancel, or closing the connection, stops a
 * CreateScene that is running, before anything is served. The Cancel is
 * answered CANCELLED. After the close, a CreateScene of the same name,
 * which the scene's lane runs once the first has ended, is served: the
 * first made nothing. (The pause only lets the first start; with or
 * without it, it must make nothing.) */
static void test_create_scene_stops_when_cancelled(void **state)
{
    pdi_daemon *d = *state;
    char *map = zero_map_tmx(4096, 4096, 16, 1, "");
    assert_non_null(map);
    int fd = pdi_raw_connect(d->port);
    assert_true(fd >= 0);
    send_heavy_scene(fd, 7, "heavy", map);
    pdi_sleep_ms(100);
    pdi_send_cancel(fd, 8, 7);
    const uint64_t ids[] = { 7, 8 };
    Pathd__V1__Response *r[2];
    pdi_raw_collect(fd, ids, r, 2);
    assert_int_equal(r[0]->status, PATHD__V1__STATUS__CANCELLED);
    assert_int_equal(r[1]->status, PATHD__V1__STATUS__OK);
    pdi_raw_free_all(r, 2);

    send_heavy_scene(fd, 9, "closed", map);
    pdi_sleep_ms(100);
    close(fd);
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    expect_not_served(c, "heavy");
    const char *small = "..\n..\n";
    pdc_create_scene_req req = { .name = "closed", .format = "ascii", .map = small, .map_len = strlen(small) };
    pdc_scene_change out;
    assert_int_equal(pdc_create_scene(c, &req, &out), PDC_OK); /* not SCENE_EXISTS */
    assert_int_equal(out.version, 1);
    free(map);
    pdc_close(c);
    pdi_assert_daemon_serves(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create_instance_update_drop, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_ops_and_restore, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_pathctl_scene, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_create_scene_needs_a_walkable_cell, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_create_scene_cells_cap_on_the_header, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_create_scene_stops_when_cancelled, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_instances_memory, setup_small_quarantine, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_metrics_series_of_the_busiest_scenes, setup_scene_series, pdi_fixture_stop),
        cmocka_unit_test_prestate_setup_teardown(test_max_scenes, setup_with_limits, pdi_fixture_stop,
                                                 (void *)&MAX_SCENES),
        cmocka_unit_test_prestate_setup_teardown(test_max_scene_cells, setup_with_limits, pdi_fixture_stop,
                                                 (void *)&MAX_SCENE_CELLS),
        cmocka_unit_test_prestate_setup_teardown(test_max_scene_bytes, setup_with_limits, pdi_fixture_stop,
                                                 (void *)&MAX_SCENE_BYTES),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
