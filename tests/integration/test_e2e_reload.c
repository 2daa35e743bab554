/*
 * test_e2e_reload.c - SIGHUP keeps the living state (issue 12), through the
 * real daemon. Three scenes of the test's own maps joined by portals,
 * rb -(b-a)- ra -(a-c)- rc, so a route from rb to rc crosses ra by its
 * route table:
 *  - a reload where only rb's map file changed builds rb anew (version
 *    past the old one, the file's cells, its update gone) and keeps every
 *    other scene as served: ra keeps its version and the wall an update
 *    closed (its cells, FindPath through them and FindRoute across it,
 *    priced again leg by leg), instances of both stay served with the
 *    cells they had; the "reloaded" line and /metrics say 1 built and the
 *    rest kept. kill -9 after it and a restart serve the same world.
 *  - a reload with one bad portal, one with a bad map, and one with a map
 *    that has no walkable cell, change nothing:
 *    versions, cells (updates included), portals and routes stay, though
 *    rb's map file changed too; the next good reload applies it.
 *  - a reload naming new listen or metrics_listen addresses warns that
 *    they need a restart, and the old ports keep serving.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"

#define T_RELOAD_TIMEOUT_MS 20000
/* ra is 12 x 7; the update closes column T_WALL_X but for the last row. */
#define T_WALL_X 6
static const char *const MAP_RA = "............\n............\n............\n............\n"
                                  "............\n............\n............\n";
static const char *const MAP_RB = "......\n......\n......\n";
static const char *const MAP_RB_NEW = "......\n......\n..#...\n";
static const char *const MAP_RC = "......\n......\n......\n";
static const char *const PORTALS_OK =
    "\"portals\": [{\"name\": \"b-a\", \"a\": {\"scene\": \"rb\", \"cell\": [5, 1]}, \"b\": {\"scene\": \"ra\", \"cell\": [0, 3]}, \"cost\": 1},"
    " {\"name\": \"a-c\", \"a\": {\"scene\": \"ra\", \"cell\": [11, 3]}, \"b\": {\"scene\": \"rc\", \"cell\": [0, 1]}, \"cost\": 1}],";
static const char *const PORTALS_BAD =
    "\"portals\": [{\"name\": \"b-a\", \"a\": {\"scene\": \"rb\", \"cell\": [5, 1]}, \"b\": {\"scene\": \"ra\", \"cell\": [0, 3]}, \"cost\": 1},"
    " {\"name\": \"a-c\", \"a\": {\"scene\": \"ra\", \"cell\": [999, 3]}, \"b\": {\"scene\": \"rc\", \"cell\": [0, 1]}, \"cost\": 1}],";

typedef struct fixture {
    char dir[64];
    char scenes[1024];
    char extra[1024];
    pdi_limits limits;
    pdi_daemon d;
} fixture;

static void write_map(const fixture *f, const char *name, const char *text)
{
    char path[128], tmp[136];
    snprintf(path, sizeof path, "%s/%s", f->dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *fp = fopen(tmp, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(text, 1, strlen(text), fp), strlen(text));
    assert_int_equal(fclose(fp), 0);
    assert_int_equal(rename(tmp, path), 0); /* a reload never reads half a map */
}

static void set_portals(fixture *f, const char *portals)
{
    snprintf(f->extra, sizeof f->extra, "\"data_dir\": \"%s/data\", %s", f->dir, portals);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    pdi_daemon_init(&f->d);
    snprintf(f->dir, sizeof f->dir, "/tmp/pathd-e2e-reload-XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    write_map(f, "ra.txt", MAP_RA);
    write_map(f, "rb.txt", MAP_RB);
    write_map(f, "rc.txt", MAP_RC);
    snprintf(f->scenes, sizeof f->scenes,
             ",\n {\"name\": \"ra\", \"map\": \"%s/ra.txt\", \"format\": \"ascii\", \"unit_sizes\": [1, 2]},"
             "\n {\"name\": \"rb\", \"map\": \"%s/rb.txt\", \"format\": \"ascii\"},"
             "\n {\"name\": \"rc\", \"map\": \"%s/rc.txt\", \"format\": \"ascii\"}",
             f->dir, f->dir, f->dir);
    set_portals(f, PORTALS_OK);
    f->limits = (pdi_limits){ .extra_scenes_json = f->scenes, .extra_json = f->extra, .metrics = 1 };
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    pdi_daemon_cleanup(&f->d);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    int rc = system(cmd);
    free(f);
    return rc == 0 ? 0 : -1;
}

/* Rewrites the config from f->limits, sends SIGHUP and waits until the
 * log holds `needle` one more time than before. */
static void reload_until(fixture *f, const char *needle)
{
    int before = pdi_log_count(&f->d, needle);
    assert_int_equal(pdi_write_config(&f->d, &f->limits), 0);
    assert_int_equal(pdi_daemon_signal(&f->d, SIGHUP), 0);
    pdi_wait_log_count(&f->d, needle, before + 1, T_RELOAD_TIMEOUT_MS);
    if (pdi_log_count(&f->d, needle) != before + 1) {
        pdi_print_log(&f->d);
        fail_msg("no new \"%s\" in the log", needle);
    }
}

/* An acknowledged rect update; its version. */
static uint64_t update_rect(pdc_conn *c, const char *scene, pdc_update_op op, int32_t x0, int32_t y0, int32_t x1,
                            int32_t y1)
{
    uint64_t v = 0;
    assert_int_equal(pdi_update_rect(c, scene, op, 0, x0, y0, x1, y1, &v), PDC_OK);
    return v;
}

static double path_cost(pdc_conn *c, const char *scene, int32_t sx, int32_t sy, int32_t gx, int32_t gy)
{
    pdc_path_req p;
    memset(&p, 0, sizeof p);
    p.scene = scene;
    p.start = pdc_cell(sx, sy);
    p.goal = pdc_cell(gx, gy);
    pdc_path_result r;
    int st = pdc_find_path(c, &p, &r);
    if (st != PDC_OK)
        fail_msg("FindPath %s: %s", scene, pdc_status_name(st));
    double cost = r.cost;
    pdc_path_result_free(&r);
    return cost;
}

/* rb:0,1 -> rc:5,1, which must cross ra from b-a's cell to a-c's: its
 * total is returned once it equals the legs priced again by FindPath. */
static double route_across_ra(pdc_conn *c)
{
    pdc_route_req q;
    memset(&q, 0, sizeof q);
    q.from_scene = "rb";
    q.start = pdc_cell(0, 1);
    q.to_scene = "rc";
    q.goal = pdc_cell(5, 1);
    pdc_route_result r;
    assert_int_equal(pdc_find_route(c, &q, &r), PDC_OK);
    assert_int_equal(r.leg_count, 3);
    assert_string_equal(r.legs[1].portal, "a-c");
    double total = r.total_cost;
    pdc_route_result_free(&r);
    double legs = path_cost(c, "rb", 0, 1, 5, 1) + 1 + path_cost(c, "ra", 0, 3, 11, 3) + 1 +
                  path_cost(c, "rc", 0, 1, 5, 1);
    assert_float_equal(total, legs, 1e-6);
    return total;
}

/* What clients see of one scene: version and cells. */
typedef struct seen {
    uint64_t version;
    pdc_grid grid;
} seen;

static void see(pdc_conn *c, const char *name, seen *out)
{
    pdc_scene_details info;
    assert_int_equal(pdc_scene_info(c, name, &info), PDC_OK);
    out->version = info.version;
    pdc_scene_details_free(&info);
    assert_int_equal(pdc_scene_grid(c, name, 1, &out->grid), PDC_OK);
    assert_int_equal(out->grid.version, out->version);
}

static void assert_seen_equal(const char *name, const seen *a, const seen *b)
{
    if (a->version != b->version)
        fail_msg("scene '%s': version %llu, then %llu", name, (unsigned long long)a->version,
                 (unsigned long long)b->version);
    assert_int_equal(a->grid.width, b->grid.width);
    assert_int_equal(a->grid.height, b->grid.height);
    assert_memory_equal(a->grid.cells, b->grid.cells, (size_t)a->grid.width * (size_t)a->grid.height);
}

static uint8_t cell(const seen *s, int32_t x, int32_t y)
{
    return s->grid.cells[(size_t)y * (size_t)s->grid.width + (size_t)x];
}

static const char *const NAMES[] = { "ra", "rb", "rc", "ra-copy", "rb-copy" };
#define T_NAMES (sizeof NAMES / sizeof *NAMES)

static void see_all(pdc_conn *c, seen out[T_NAMES])
{
    for (size_t i = 0; i < T_NAMES; i++)
        see(c, NAMES[i], &out[i]);
}

static void free_all(seen s[T_NAMES])
{
    for (size_t i = 0; i < T_NAMES; i++)
        pdc_grid_free(&s[i].grid);
}

/* The daemon serves every scene of NAMES as `want` has it, and the route
 * across ra costs `route`. */
static void expect_world(pdc_conn *c, const seen want[T_NAMES], double route)
{
    seen now[T_NAMES];
    see_all(c, now);
    for (size_t i = 0; i < T_NAMES; i++)
        assert_seen_equal(NAMES[i], &want[i], &now[i]);
    assert_float_equal(route_across_ra(c), route, 1e-6);
    free_all(now);
}

/* The value of one sample line on /metrics. */
static long metric(const pdi_daemon *d, const char *line_start)
{
    char *m = pdi_metrics_get(d);
    assert_non_null(m);
    const char *at = strstr(m, line_start);
    if (!at)
        fail_msg("no %s on /metrics", line_start);
    long v = strtol(at + strlen(line_start), NULL, 10);
    free(m);
    return v;
}

static void test_reload_keeps_unchanged_scenes(void **state)
{
    fixture *f = *state;
    assert_int_equal(pdi_daemon_start(&f->d, &f->limits), 0);
    pdc_conn *c = pdi_connect(&f->d);
    assert_non_null(c);
    double open_route = route_across_ra(c);
    double open_leg = path_cost(c, "ra", 0, 3, 11, 3);
    assert_float_equal(open_leg, 11.0, 1e-9);
    assert_int_equal(update_rect(c, "ra", PDC_UPDATE_BLOCK, T_WALL_X, 0, T_WALL_X, 5), 2);
    assert_int_equal(update_rect(c, "rb", PDC_UPDATE_BLOCK, 3, 0, 3, 0), 2);
    double walled_leg = path_cost(c, "ra", 0, 3, 11, 3);
    assert_true(walled_leg > open_leg + 1);
    double walled_route = route_across_ra(c);
    assert_float_equal(walled_route - open_route, walled_leg - open_leg, 1e-6);
    pdc_scene_change ch;
    assert_int_equal(pdc_create_instance(c, "ra-copy", "ra", &ch), PDC_OK);
    assert_int_equal(pdc_create_instance(c, "rb-copy", "rb", &ch), PDC_OK);
    seen before[T_NAMES];
    see_all(c, before);
    pdc_scene_list list;
    assert_int_equal(pdc_list_scenes(c, &list), PDC_OK);
    size_t n_config = list.count - 2; /* the two instances */
    pdc_scene_list_free(&list);

    /* Only rb's map file changes. */
    write_map(f, "rb.txt", MAP_RB_NEW);
    reload_until(f, "reloaded ");
    char says[160];
    snprintf(says, sizeof says, "%zu scenes, %zu kept with their updates, 1 built anew", n_config, n_config - 1);
    assert_true(pdi_log_contains(&f->d, says));
    assert_int_equal(metric(&f->d, "pathd_last_reload_scenes{outcome=\"kept\"} "), (long)n_config - 1);
    assert_int_equal(metric(&f->d, "pathd_last_reload_scenes{outcome=\"built\"} "), 1);
    seen after[T_NAMES];
    see_all(c, after);
    /* ra, rc and both instances as they were; ra's wall still closed. */
    for (size_t i = 0; i < T_NAMES; i++)
        if (strcmp(NAMES[i], "rb") != 0)
            assert_seen_equal(NAMES[i], &before[i], &after[i]);
    assert_int_equal(cell(&after[0], T_WALL_X, 0), 0);
    assert_int_equal(cell(&after[4], 3, 0), 0); /* rb-copy: the cells of rb v2 */
    /* rb: built from its new file, past its version, its update gone. */
    assert_int_equal(after[1].version, before[1].version + 1);
    assert_int_equal(cell(&after[1], 3, 0), 1);
    assert_int_equal(cell(&after[1], 2, 2), 0);
    assert_float_equal(path_cost(c, "ra", 0, 3, 11, 3), walled_leg, 1e-9);
    assert_float_equal(route_across_ra(c), walled_route, 1e-6);

    /* The reload asked for a snapshot; once it is written, kill -9 and a
     * restart serve the same world. */
    assert_true(pdi_wait_log(&f->d, "compacted: snapshot", T_RELOAD_TIMEOUT_MS));
    assert_int_equal(update_rect(c, "ra", PDC_UPDATE_BLOCK, 0, 0, 0, 0), 3);
    free_all(after);
    see_all(c, after);
    pdc_close(c);
    assert_int_equal(pdi_daemon_signal(&f->d, SIGKILL), 0);
    assert_int_equal(pdi_daemon_wait_exit(&f->d, 10000), 0);
    pdi_daemon_cleanup(&f->d);
    assert_int_equal(pdi_daemon_start(&f->d, &f->limits), 0);
    if (!pdi_log_contains(&f->d, " 0 skipped, 0 bytes of damaged tail truncated")) {
        pdi_print_log(&f->d);
        fail_msg("the replay skipped records");
    }
    c = pdi_connect(&f->d);
    expect_world(c, after, walled_route);
    pdc_close(c);
    free_all(before);
    free_all(after);
    assert_int_equal(pdi_daemon_stop(&f->d), 0);
}

static void test_refused_reloads_change_nothing(void **state)
{
    fixture *f = *state;
    assert_int_equal(pdi_daemon_start(&f->d, &f->limits), 0);
    pdc_conn *c = pdi_connect(&f->d);
    assert_non_null(c);
    update_rect(c, "ra", PDC_UPDATE_BLOCK, T_WALL_X, 0, T_WALL_X, 5);
    update_rect(c, "rb", PDC_UPDATE_BLOCK, 3, 0, 3, 0);
    pdc_scene_change ch;
    assert_int_equal(pdc_create_instance(c, "ra-copy", "ra", &ch), PDC_OK);
    assert_int_equal(pdc_create_instance(c, "rb-copy", "rb", &ch), PDC_OK);
    double route = route_across_ra(c);
    seen before[T_NAMES];
    see_all(c, before);

    /* rb's map changed and one portal misfits: refused whole, rb's new
     * map included. */
    write_map(f, "rb.txt", MAP_RB_NEW);
    set_portals(f, PORTALS_BAD);
    reload_until(f, "reload refused");
    assert_true(pdi_log_contains(&f->d, "portal 'a-c': cell 999,3 is outside scene 'ra'"));
    expect_world(c, before, route);

    /* The portals fit again, but rc's map is broken: refused whole too. */
    set_portals(f, PORTALS_OK);
    write_map(f, "rc.txt", "......\n..x...\n......\n");
    reload_until(f, "reload refused");
    assert_true(pdi_log_contains(&f->d, "rc.txt:2:3"));
    expect_world(c, before, route);

    /* rc's map walled up whole: refused too, saying so (issue 30). */
    write_map(f, "rc.txt", "######\n######\n######\n");
    reload_until(f, "reload refused");
    char says[256];
    snprintf(says, sizeof says, "scene 'rc': %s/rc.txt: no walkable cell: all 6 x 3 cells are blocked", f->dir);
    if (!pdi_log_contains(&f->d, says)) {
        pdi_print_log(&f->d);
        fail_msg("no \"%s\" in the log", says);
    }
    expect_world(c, before, route);

    /* rc as it was: the reload applies rb's new map and keeps the rest. */
    write_map(f, "rc.txt", MAP_RC);
    reload_until(f, "reloaded ");
    /* The log's line on the scene it built, and none on those it kept. */
    assert_true(pdi_log_contains(&f->d, "scene 'rb' built: 6x3, 17 of 18 cells walkable (94.4%)"));
    assert_int_equal(pdi_log_count(&f->d, "scene 'ra' built: "), 1);
    seen after[T_NAMES];
    see_all(c, after);
    assert_int_equal(after[1].version, before[1].version + 1);
    assert_int_equal(cell(&after[1], 2, 2), 0);
    for (size_t i = 0; i < T_NAMES; i++)
        if (i != 1)
            assert_seen_equal(NAMES[i], &before[i], &after[i]);
    assert_float_equal(route_across_ra(c), route, 1e-6);
    free_all(after);
    free_all(before);
    pdc_close(c);
    assert_int_equal(pdi_daemon_stop(&f->d), 0);
}

/* A reload cannot move the listening sockets: one that names a new listen
 * or metrics_listen address (or switches metrics off) gets a warning for
 * each, and the old ports keep answering, the metrics port /livez and
 * /metrics included. */
static void test_reload_keeps_listen_addresses(void **state)
{
    fixture *f = *state;
    assert_int_equal(pdi_daemon_start(&f->d, &f->limits), 0);
    /* Both ports were configured as 0: the warnings name the ones bound. */
    uint16_t metrics_port = pdi_metrics_port(&f->d);
    assert_int_not_equal(metrics_port, 0);
    char LISTEN_WARNING[128], METRICS_WARNING[128];
    snprintf(LISTEN_WARNING, sizeof LISTEN_WARNING,
             "reload: a new listen address needs a restart; still on 127.0.0.1:%u\n", (unsigned)f->d.port);
    snprintf(METRICS_WARNING, sizeof METRICS_WARNING,
             "reload: a new metrics_listen address needs a restart; still on 127.0.0.1:%u\n",
             (unsigned)metrics_port);
    char *livez = pdi_metrics_http_get(&f->d, "/livez");
    assert_non_null(livez);
    assert_string_equal(livez, "ok\n");
    free(livez);

    /* Same addresses: no warning. */
    reload_until(f, "reloaded ");
    assert_int_equal(pdi_log_count(&f->d, LISTEN_WARNING), 0);
    assert_int_equal(pdi_log_count(&f->d, METRICS_WARNING), 0);

    /* Both moved (to ports nothing may bind here, so a daemon that tried
     * would fail loudly). */
    f->limits.listen = "127.0.0.1:1";
    f->limits.metrics = 0;
    snprintf(f->extra, sizeof f->extra, "\"data_dir\": \"%s/data\", %s \"metrics_listen\": \"127.0.0.1:1\",",
             f->dir, PORTALS_OK);
    reload_until(f, "reloaded ");
    assert_int_equal(pdi_log_count(&f->d, LISTEN_WARNING), 1);
    assert_int_equal(pdi_log_count(&f->d, METRICS_WARNING), 1);

    /* Metrics switched off: still served, with the same warning. */
    set_portals(f, PORTALS_OK);
    reload_until(f, "reloaded ");
    assert_int_equal(pdi_log_count(&f->d, METRICS_WARNING), 2);

    livez = pdi_metrics_http_get(&f->d, "/livez");
    assert_non_null(livez);
    assert_string_equal(livez, "ok\n");
    free(livez);
    assert_int_equal(metric(&f->d, "pathd_last_reload_scenes{outcome=\"kept\"} "), 6);
    pdc_conn *c = pdi_connect(&f->d);
    assert_non_null(c);
    assert_int_equal(pdc_ping(c, NULL), PDC_OK);
    pdc_close(c);
    assert_int_equal(pdi_daemon_stop(&f->d), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reload_keeps_unchanged_scenes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_reloads_change_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reload_keeps_listen_addresses, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
