/*
 * test_e2e_lifecycle.c - the daemon as a process: graceful stop on SIGTERM
 * and SIGINT with work in flight, config reload on SIGHUP (a good config
 * swaps scenes in, a broken one is refused and the old scenes keep serving),
 * the loop answering while a reload loads (and a stop waiting for that load),
 * --check-config, --help, --version and bad arguments.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"

/* Long enough for the in-flight searches even under TSan; the daemon exits
 * as soon as they are done, so a passing test never waits this long. */
#define T_GRACE_MS 30000
/* Long searches in flight when SIGTERM arrives (four per worker). */
#define T_IN_FLIGHT 8
/* How long a short-lived `pathd --check-config` etc. may take. */
#define T_RUN_TIMEOUT_MS 20000
/* How long a reload may take to show. */
#define T_RELOAD_TIMEOUT_MS 10000
/* Side of the generated map a reload loads, in cells: 4 Mi cells, with unit
 * sizes 1 and 2 (clearance, two unit grids, two label sets) - a real load's
 * work, a few hundred ms in a debug build and seconds under sanitizers. */
#define T_VAST_SIDE 2048
/* How long loading it may take (TSan is slowest). */
#define T_VAST_TIMEOUT_MS 120000
/* How long a reload's load may take to reach the open() of its config: it
 * runs on libuv's threadpool, whose thread a loaded machine may not run for
 * seconds (TSan is slowest). A hang guard; the wait ends when it is there. */
#define T_GATE_TIMEOUT_MS 120000
/* How long a stopping daemon held by a load is watched for a wrong exit. */
#define T_HELD_WATCH_MS 300

static int setup(void **state)
{
    pdi_limits l = {0};
    l.shutdown_grace_ms = T_GRACE_MS;
    return pdi_fixture_start(state, &l);
}

/* SIGTERM (or SIGINT) with searches in flight: every one is answered in
 * full, new connections are refused, and the exit status is 0. */
static void stop_with_work_in_flight(pdi_daemon *d, int sig)
{
    /* Before the signal, the daemon must have read every request: its
     * request counter says so (asked on another connection, whose own Stats
     * requests count too, so no answer on fd is consumed here). */
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    pdc_server_stats st = {0};
    assert_int_equal(pdc_stats(c, &st), PDC_OK);
    uint64_t base = st.requests_total;
    int fd = pdi_raw_connect(d->port);
    assert_true(fd >= 0);
    for (uint64_t id = 1; id <= T_IN_FLIGHT; id++)
        pdi_send_serpent(fd, id, 0);
    uint64_t polls = 0;
    double deadline = pdi_now_ms() + PDI_CALL_TIMEOUT_MS;
    do {
        assert_int_equal(pdc_stats(c, &st), PDC_OK);
        polls++;
    } while (st.requests_total < base + polls + T_IN_FLIGHT && pdi_now_ms() < deadline);
    assert_true(st.requests_total >= base + polls + T_IN_FLIGHT);
    pdc_close(c);
    Pathd__V1__Response *r;
    assert_int_equal(pdi_daemon_signal(d, sig), 0);
    assert_true(pdi_wait_log(d, sig == SIGTERM ? "received SIGTERM" : "received SIGINT", T_RELOAD_TIMEOUT_MS));
    /* The daemon logs "stopping: N connections, M jobs in flight": there
     * was work left to finish, or this test would prove nothing. */
    assert_true(pdi_wait_log(d, "jobs in flight", T_RELOAD_TIMEOUT_MS));
    assert_true(pdi_log_contains(d, "connections, ") && !pdi_log_contains(d, "connections, 0 jobs in flight"));
    /* No longer accepting. */
    int late = pdi_raw_connect(d->port);
    if (late >= 0) {
        /* Accepted by the kernel's backlog at most: never served. */
        assert_true(pdi_raw_wait_closed(late, PDI_CALL_TIMEOUT_MS));
        close(late);
    }
    for (int k = 0; k < T_IN_FLIGHT; k++) {
        r = pdi_raw_recv(fd, T_GRACE_MS, NULL);
        assert_non_null(r);
        if (!r->final) {
            pathd__v1__response__free_unpacked(r, NULL);
            k--;
            continue;
        }
        assert_true(r->id >= 1 && r->id <= T_IN_FLIGHT);
        assert_int_equal(r->status, PATHD__V1__STATUS__OK);
        assert_true(r->path->cost == pdi_serpent_cost());
        pathd__v1__response__free_unpacked(r, NULL);
    }
    /* Then the daemon closes the connection and exits 0. */
    assert_true(pdi_raw_wait_closed(fd, PDI_CALL_TIMEOUT_MS));
    close(fd);
    assert_int_equal(pdi_daemon_wait_exit(d, T_GRACE_MS + PDI_STOP_SLACK_MS), 0);
    assert_int_equal(pdi_daemon_check_exit(d), 0);
}

static void test_sigterm_with_work_in_flight(void **state)
{
    stop_with_work_in_flight(*state, SIGTERM);
}

static void test_sigint_with_work_in_flight(void **state)
{
    stop_with_work_in_flight(*state, SIGINT);
}

static int has_scene(const pdi_daemon *d, const char *name)
{
    pdc_conn *c = pdi_connect(d);
    if (!c)
        return -1;
    pdc_scene_list l = {0};
    int found = 0;
    if (pdc_list_scenes(c, &l) != PDC_OK)
        found = -1;
    for (size_t i = 0; i < l.count; i++)
        found |= strcmp(l.scenes[i].name, name) == 0;
    pdc_scene_list_free(&l);
    pdc_close(c);
    return found;
}

static void test_sighup_reload(void **state)
{
    pdi_daemon *d = *state;
    assert_int_equal(has_scene(d, "annex"), 0);

    /* A good config with one more scene: it appears, and paths on it work. */
    pdi_limits l = {0};
    l.shutdown_grace_ms = T_GRACE_MS;
    l.extra_scenes_json = ",\n    {\"name\": \"annex\", \"map\": \"" PD_TEST_DATA_DIR "/integ_rooms.txt\", "
                          "\"format\": \"ascii\", \"origin\": [100, 100]}";
    assert_int_equal(pdi_write_config(d, &l), 0);
    assert_int_equal(pdi_daemon_signal(d, SIGHUP), 0);
    double deadline = pdi_now_ms() + T_RELOAD_TIMEOUT_MS;
    while (has_scene(d, "annex") != 1 && pdi_now_ms() < deadline)
        pdi_sleep_ms(20);
    assert_int_equal(has_scene(d, "annex"), 1);
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    pdc_path_req req = {0};
    req.scene = "annex";
    req.start = pdc_world(101.5, 101.5); /* cell (1,1) of the annex */
    req.goal = pdc_cell(10, 1);
    pdc_path_result r = {0};
    assert_int_equal(pdc_find_path(c, &req, &r), PDC_OK);
    assert_int_equal(r.waypoints[0].x, 1);
    assert_int_equal(r.waypoints[0].y, 1);
    assert_true(r.cost == 9.0);
    pdc_path_result_free(&r);
    pdc_close(c);
    pdi_assert_daemon_serves(d);

    /* A broken file is refused; the running scenes, annex included, stay. */
    assert_int_equal(pdi_write_config_text(d, "{ \"listen\": \"127.0.0.1:0\", \"scenes\": [ "), 0);
    assert_int_equal(pdi_daemon_signal(d, SIGHUP), 0);
    assert_true(pdi_wait_log(d, "reload refused", T_RELOAD_TIMEOUT_MS));
    assert_int_equal(has_scene(d, "annex"), 1);
    pdi_assert_daemon_serves(d);

    /* So is a well-formed config naming a map that does not exist (nothing
     * may be half-loaded): the scene it would drop stays too. */
    l.extra_scenes_json = ",\n    {\"name\": \"ghost\", \"map\": \"/nonexistent/ghost.map\", \"format\": \"movingai\"}";
    assert_int_equal(pdi_write_config(d, &l), 0);
    assert_int_equal(pdi_daemon_signal(d, SIGHUP), 0);
    deadline = pdi_now_ms() + T_RELOAD_TIMEOUT_MS;
    while (pdi_log_count(d, "reload refused") < 2 && pdi_now_ms() < deadline)
        pdi_sleep_ms(20);
    assert_int_equal(pdi_log_count(d, "reload refused"), 2);
    assert_int_equal(has_scene(d, "ghost"), 0);
    assert_int_equal(has_scene(d, "annex"), 1);
    pdi_assert_daemon_serves(d);

    /* And a good config after the bad ones is taken again (annex removed). */
    l.extra_scenes_json = NULL;
    assert_int_equal(pdi_write_config(d, &l), 0);
    assert_int_equal(pdi_daemon_signal(d, SIGHUP), 0);
    deadline = pdi_now_ms() + T_RELOAD_TIMEOUT_MS;
    while (has_scene(d, "annex") != 0 && pdi_now_ms() < deadline)
        pdi_sleep_ms(20);
    assert_int_equal(has_scene(d, "annex"), 0);
    pdi_assert_daemon_serves(d);
}

/* ---- reloads held at a gate ----------------------------------------------
 *
 * To know for certain that a reload is still loading while the test talks to
 * the daemon, the config path is made a FIFO: the reload's open() of it blocks
 * until the test opens the FIFO's other end, so the load lasts exactly as long
 * as the test wants, whatever the machine's speed. (The loader then refuses
 * the FIFO as "not a regular file".) The FIFO keeps a second name, gate.fifo,
 * so the config path can be given a real file while a load waits on it - once
 * the test has seen the load's thread inside that open(), not before, or the
 * load would open the real file.
 */

/* Puts a FIFO at d's config path; its second name goes into gate. */
static void gate_install(const pdi_daemon *d, char *gate, size_t cap)
{
    char tmp[PDI_PATH_MAX + 8];
    snprintf(gate, cap, "%s/gate.fifo", d->dir);
    snprintf(tmp, sizeof tmp, "%s.gate", d->config_path);
    assert_int_equal(mkfifo(gate, 0600), 0);
    assert_int_equal(link(gate, tmp), 0);
    assert_int_equal(rename(tmp, d->config_path), 0);
}

/* 1 when a thread of process pid is inside open()/openat() of `path`, as
 * /proc/PID/task/TID/syscall shows it (the syscall's number and arguments,
 * the path a pointer read back through /proc/PID/mem); 0 when none is; -1
 * when /proc does not let the test see (the daemon is its child, so it
 * may). A load blocked on the FIFO stays there until the gate opens. */
static int thread_opening(pid_t pid, const char *path)
{
    char name[96];
    snprintf(name, sizeof name, "/proc/%d/mem", (int)pid);
    int mem = open(name, O_RDONLY);
    snprintf(name, sizeof name, "/proc/%d/task", (int)pid);
    DIR *tasks = mem >= 0 ? opendir(name) : NULL;
    if (!tasks) {
        if (mem >= 0)
            close(mem);
        return -1;
    }
    size_t len = strlen(path) + 1;
    int found = 0, seen = 0;
    struct dirent *e;
    while (!found && (e = readdir(tasks)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(name, sizeof name, "/proc/%d/task/%.32s/syscall", (int)pid, e->d_name);
        FILE *f = fopen(name, "r");
        if (!f)
            continue;
        long nr = -1;
        unsigned long long arg[2];
        int n = fscanf(f, "%ld %llx %llx", &nr, &arg[0], &arg[1]);
        fclose(f);
        seen += n >= 1;
        unsigned long long at = 0;
        if (n == 3 && nr == SYS_openat)
            at = arg[1];
#ifdef SYS_open
        else if (n >= 2 && nr == SYS_open)
            at = arg[0];
#endif
        char got[PDI_PATH_MAX];
        found = at && len <= sizeof got && pread(mem, got, len, (off_t)at) == (ssize_t)len &&
                memcmp(got, path, len) == 0;
    }
    closedir(tasks);
    close(mem);
    return found ? 1 : seen ? 0 : -1;
}

/* Waits until a reload's load is blocked opening the gate, so that what the
 * test does next happens while it waits there: "reloading" is logged when
 * the load is queued, and the threadpool thread may come to the open much
 * later (on a loaded machine the config was once renamed over the FIFO
 * first, and the load read the new file instead and never came to the
 * gate). */
static void gate_wait_reader(const pdi_daemon *d)
{
    double deadline = pdi_now_ms() + T_GATE_TIMEOUT_MS;
    int at;
    while ((at = thread_opening(d->pid, d->config_path)) == 0 && pdi_now_ms() < deadline)
        pdi_sleep_ms(10);
    if (at < 0)
        fail_msg("cannot read the threads' system calls in /proc/%d", (int)d->pid);
    if (at == 0)
        fail_msg("no thread of pathd came to open %s in %d ms", d->config_path, T_GATE_TIMEOUT_MS);
}

/* Lets the load waiting on the FIFO go on: opens and closes the writing end
 * (a non-blocking open fails with ENXIO until a reader waits, so this polls,
 * bounded by PDI_CALL_TIMEOUT_MS). */
static void gate_open(const char *gate)
{
    double deadline = pdi_now_ms() + PDI_CALL_TIMEOUT_MS;
    int fd;
    while ((fd = open(gate, O_WRONLY | O_NONBLOCK)) < 0 && errno == ENXIO && pdi_now_ms() < deadline)
        pdi_sleep_ms(10);
    assert_true(fd >= 0);
    close(fd);
}

/* A ping on a fresh raw connection must be answered. */
static void assert_pong(const pdi_daemon *d, uint64_t nonce)
{
    int fd = pdi_raw_connect(d->port);
    assert_true(fd >= 0);
    pdi_raw_ping(fd, 1, nonce);
    close(fd);
}

/* A T_VAST_SIDE square: open cells with a wall every 16th column that has a
 * gap every 32 rows, so clearance and labels have structure to work on. */
static void write_vast_map(const char *path)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    char row[T_VAST_SIDE + 1];
    row[T_VAST_SIDE] = '\n';
    for (int y = 0; y < T_VAST_SIDE; y++) {
        for (int x = 0; x < T_VAST_SIDE; x++)
            row[x] = (x % 16 == 15 && y % 32 != 0) ? '#' : '.';
        assert_int_equal(fwrite(row, 1, sizeof row, f), sizeof row);
    }
    assert_int_equal(fclose(f), 0);
}

/* SIGHUP loads on a background thread: while the load is held, the daemon
 * answers pings and lists the old scenes; SIGHUPs meanwhile are coalesced
 * into one more reload after it, which reads the config as it is by then
 * (here one that adds a large generated map). */
static void test_sighup_reload_off_loop(void **state)
{
    pdi_daemon *d = *state;
    char vast[PDI_PATH_MAX + 16];
    snprintf(vast, sizeof vast, "%s/vast.txt", d->dir);
    write_vast_map(vast);
    char gate[PDI_PATH_MAX + 16];
    gate_install(d, gate, sizeof gate);

    assert_int_equal(pdi_daemon_signal(d, SIGHUP), 0);
    assert_true(pdi_wait_log(d, "reloading ", T_RELOAD_TIMEOUT_MS));
    gate_wait_reader(d);
    /* The load waits at the gate, and the loop answers all the same. */
    assert_pong(d, 11);
    assert_int_equal(has_scene(d, "serpent"), 1);
    assert_int_equal(has_scene(d, "vast"), 0);
    assert_pong(d, 12);
    assert_int_equal(pdi_log_count(d, "reload refused"), 0);
    assert_int_equal(pdi_log_count(d, "reloaded "), 0);

    /* Two more SIGHUPs while it loads: each is logged, neither starts a load. */
    assert_int_equal(pdi_daemon_signal(d, SIGHUP), 0);
    assert_true(pdi_wait_log_count(d, "reload requested while one is loading", 1, T_RELOAD_TIMEOUT_MS));
    assert_int_equal(pdi_daemon_signal(d, SIGHUP), 0);
    assert_true(pdi_wait_log_count(d, "reload requested while one is loading", 2, T_RELOAD_TIMEOUT_MS));
    assert_int_equal(pdi_log_count(d, "reloading "), 1);

    /* The config changes while the first load still waits... */
    pdi_limits l = {0};
    l.shutdown_grace_ms = T_GRACE_MS;
    l.extra_scenes_json = ",\n    {\"name\": \"vast\", \"map\": \"vast.txt\", \"format\": \"ascii\", "
                          "\"unit_sizes\": [1, 2]}";
    assert_int_equal(pdi_write_config(d, &l), 0);
    /* ...which itself is refused (it opened the FIFO)... */
    gate_open(gate);
    assert_true(pdi_wait_log(d, "not a regular file; the running configuration stays", T_RELOAD_TIMEOUT_MS));
    /* ...and the one coalesced reload after it loads the new config. */
    assert_true(pdi_wait_log(d, "reloaded ", T_VAST_TIMEOUT_MS));
    assert_int_equal(pdi_log_count(d, "reloading "), 2);
    assert_int_equal(pdi_log_count(d, "reloaded "), 1);
    assert_true(pdi_log_contains(d, ": 4 scenes"));
    assert_int_equal(has_scene(d, "vast"), 1);
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    pdc_path_req req = {0};
    req.scene = "vast";
    req.start = pdc_cell(0, 0);
    req.goal = pdc_cell(20, 0); /* through the gap in the wall at x = 15 */
    pdc_path_result r = {0};
    assert_int_equal(pdc_find_path(c, &req, &r), PDC_OK);
    assert_true(r.cost == 20.0);
    pdc_path_result_free(&r);
    pdc_close(c);
    pdi_assert_daemon_serves(d);
    unlink(gate);
    unlink(vast);
}

/* SIGTERM while a reload loads: the daemon stops serving but does not exit
 * (nor crash) before the load has come back; then it exits 0 with a clean
 * sanitizer report. */
static void test_sigterm_while_reload_loads(void **state)
{
    pdi_daemon *d = *state;
    char gate[PDI_PATH_MAX + 16];
    gate_install(d, gate, sizeof gate);
    assert_int_equal(pdi_daemon_signal(d, SIGHUP), 0);
    assert_true(pdi_wait_log(d, "reloading ", T_RELOAD_TIMEOUT_MS));
    gate_wait_reader(d);
    assert_pong(d, 21);

    assert_int_equal(pdi_daemon_signal(d, SIGTERM), 0);
    assert_true(pdi_wait_log(d, "stopped", T_RELOAD_TIMEOUT_MS));
    /* Everything is closed, but the pending load holds the loop open. */
    assert_int_equal(pdi_daemon_wait_exit(d, T_HELD_WATCH_MS), -1);
    assert_int_equal(pdi_log_count(d, "reload refused"), 0);

    gate_open(gate);
    assert_int_equal(pdi_daemon_wait_exit(d, T_GRACE_MS + PDI_STOP_SLACK_MS), 0);
    assert_int_equal(pdi_daemon_check_exit(d), 0);
    assert_true(pdi_log_contains(d, "not a regular file; the running configuration stays"));
    unlink(gate);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

static void test_check_config(void **state)
{
    pdi_daemon *d = *state;
    char out[8192];
    /* The fixture's own config is good: all three scenes load. */
    const char *good[] = {"--check-config", "--config", d->config_path, NULL};
    assert_int_equal(pdi_run_pathd(good, T_RUN_TIMEOUT_MS, out, sizeof out), 0);
    assert_non_null(strstr(out, "3 scenes"));
    /* Each scene's memory per structure: den520d (256x257, 258x259 padded)
     * holds one byte per padded cell in its grid (66822) and its bitsets:
     * passability, 259 rows and 258 columns of 5 words (20680: 258 or 259
     * cells fit 5 words), and the four stop sets, twice that (41360). */
    const char *den = strstr(out, "  den520d 256x257");
    assert_non_null(den);
    const char *den_end = strchr(den, '\n');
    const char *grid = strstr(den, " grid 128862 ");
    assert_true(grid && den_end && grid < den_end);
    assert_non_null(strstr(den, "per cell"));

    /* A Tiled scene: what each rule decided is printed; a blocked_property
     * no tile carries (a typo) loads the map all open, and is warned of.
     * A collision layer whose painted tiles are all walls (untagged_tiles
     * "blocked", no property needed: case 2) is not. */
    char tiled_conf[PDI_PATH_MAX + 32], tiled_text[PDI_PATH_MAX * 2];
    snprintf(tiled_conf, sizeof tiled_conf, "%s/tiled.json", d->dir);
    const char *tiled_args[] = {"--check-config", "--config", tiled_conf, NULL};
    static const char *const tiled_extra[] = {
        "", ", \"blocked_property\": \"solid\"",
        ", \"blocked_property\": \"solid\", \"layer\": \"walls\", \"untagged_tiles\": \"blocked\""};
    static const char *const tiled_want[] = {
        "  marked (Tiled): layers ground, walls: 26 by property, 22 untagged (untagged_tiles: open)",
        "  marked (Tiled): layers ground, walls: 48 untagged (untagged_tiles: open)",
        "  marked (Tiled): layers walls: 26 untagged (untagged_tiles: blocked), 22 with no tile"};
    for (int k = 0; k < 3; k++) {
        const int typo = k == 1;
        snprintf(tiled_text, sizeof tiled_text,
                 "{ \"scenes\": [ {\"name\": \"marked\", \"map\": \"%s/tiled/walls_marked.tmj\", "
                 "\"format\": \"tiled\"%s} ] }",
                 PD_TEST_DATA_DIR, tiled_extra[k]);
        write_file(tiled_conf, tiled_text);
        assert_int_equal(pdi_run_pathd(tiled_args, T_RUN_TIMEOUT_MS, out, sizeof out), 0);
        if (!strstr(out, tiled_want[k]))
            fail_msg("no \"%s\" in: %s", tiled_want[k], out);
        if ((strstr(out, "warning: scene 'marked' loads all open: no tile decided a cell") != NULL) != typo)
            fail_msg("case %d: the warning of a property no tile carries is %s: %s", k,
                     typo ? "missing" : "wrong", out);
    }
    unlink(tiled_conf);

    /* A scene with no walkable cell does not load (issue 30): the error
     * names it, its map and that every cell is blocked. */
    char wall[PDI_PATH_MAX + 32], walled[PDI_PATH_MAX + 32], text[PDI_PATH_MAX * 4];
    snprintf(wall, sizeof wall, "%s/wall.txt", d->dir);
    write_file(wall, "##\n##\n");
    snprintf(walled, sizeof walled, "%s/walled.json", d->dir);
    snprintf(text, sizeof text, "{ \"listen\": \"127.0.0.1:0\", \"scenes\": [ {\"name\": \"walled\", \"map\": \"%s\","
             " \"format\": \"ascii\"} ] }", wall);
    write_file(walled, text);
    const char *walled_args[] = {"--check-config", "--config", walled, NULL};
    assert_int_equal(pdi_run_pathd(walled_args, T_RUN_TIMEOUT_MS, out, sizeof out), 1);
    snprintf(text, sizeof text, "scene 'walled': %s: no walkable cell: all 2 x 2 cells are blocked", wall);
    if (!strstr(out, text))
        fail_msg("no \"%s\" in: %s", text, out);
    /* The daemon refuses to start on it too. */
    const char *walled_start[] = {"--config", walled, NULL};
    assert_int_equal(pdi_run_pathd(walled_start, T_RUN_TIMEOUT_MS, out, sizeof out), 1);
    if (!strstr(out, text))
        fail_msg("no \"%s\" in: %s", text, out);
    unlink(walled);
    unlink(wall);

    /* Portals are checked for meaning: an end too narrow for its max_unit
     * is a warning naming the largest unit that fits there (exit 0); an
     * end on a wall is an error (exit 1). The memory estimate is printed. */
    char room[PDI_PATH_MAX + 32], portals[PDI_PATH_MAX + 32];
    snprintf(room, sizeof room, "%s/room.txt", d->dir);
    write_file(room, "....\n..#.\n....\n");
    snprintf(portals, sizeof portals, "%s/portals.json", d->dir);
    const char *portal_args[] = {"--check-config", "--config", portals, NULL};
    for (int on_wall = 0; on_wall < 2; on_wall++) {
        snprintf(text, sizeof text,
                 "{ \"scenes\": [ {\"name\": \"a\", \"map\": \"%s\", \"format\": \"ascii\", \"unit_sizes\": [1, 2]},"
                 " {\"name\": \"b\", \"map\": \"%s\", \"format\": \"ascii\", \"unit_sizes\": [1, 2]} ],"
                 " \"portals\": [ {\"name\": \"narrow\", \"a\": {\"scene\": \"a\", \"cell\": [1, 0]},"
                 " \"b\": {\"scene\": \"b\", \"cell\": [0, 0]}, \"max_unit\": 2}%s ] }",
                 room, room,
                 on_wall ? ", {\"name\": \"walled\", \"a\": {\"scene\": \"a\", \"cell\": [0, 0]},"
                           " \"b\": {\"scene\": \"b\", \"cell\": [2, 1]}}"
                         : "");
        write_file(portals, text);
        assert_int_equal(pdi_run_pathd(portal_args, T_RUN_TIMEOUT_MS, out, sizeof out), on_wall ? 1 : 0);
        if (!strstr(out, "warning: portal 'narrow' end a (a 1,0) fits units up to 1, not its max_unit 2"))
            fail_msg("no warning for the narrow portal: %s", out);
        assert_non_null(strstr(out, "memory estimate: "));
        if (on_wall && !strstr(out, "error: portal 'walled' end b (b 2,1) is a wall"))
            fail_msg("no error for the portal on a wall: %s", out);
    }
    /* A unit size that fits on no cell of its map (4 on this 4x3 room,
     * where 2 is the largest) is a warning naming it (exit 0); it used to
     * pass without a word, and every path for it was refused. */
    snprintf(text, sizeof text,
             "{ \"scenes\": [ {\"name\": \"a\", \"map\": \"%s\", \"format\": \"ascii\", \"unit_sizes\": [1, 2, 4]} ] }",
             room);
    write_file(portals, text);
    assert_int_equal(pdi_run_pathd(portal_args, T_RUN_TIMEOUT_MS, out, sizeof out), 0);
    if (!strstr(out, "warning: scene 'a' (4x3): unit size 4 fits on no cell (the largest that fits anywhere is 2)"))
        fail_msg("no warning for unit size 4: %s", out);
    if (strstr(out, "unit size 2 fits on no cell"))
        fail_msg("a warning for unit size 2, which fits: %s", out);
    unlink(portals);
    unlink(room);

    char bad[PDI_PATH_MAX + 32];
    const char *bad_args[] = {"--check-config", "--config", bad, NULL};
    /* Each broken config, and a text its error must contain: the config
     * file for errors in the file itself (NULL below), the map file for a
     * map that cannot be read. */
    static const char *const broken[][2] = {
        {"{ \"scenes\": [ ", NULL},                                            /* not JSON */
        {"{ \"listen\": \"127.0.0.1:0\", \"threadz\": 2 }", NULL},             /* unknown key */
        {"{ \"limits\": { \"max_frame_bytes\": 1 } }", NULL},                  /* out of range */
        {"{ \"scenes\": [ {\"name\": \"x\", \"map\": \"/nonexistent.map\", \"format\": \"movingai\"} ] }",
         "/nonexistent.map"},
    };
    for (size_t i = 0; i < sizeof broken / sizeof broken[0]; i++) {
        snprintf(bad, sizeof bad, "%s/bad%zu.json", d->dir, i);
        write_file(bad, broken[i][0]);
        int st = pdi_run_pathd(bad_args, T_RUN_TIMEOUT_MS, out, sizeof out);
        if (st != 1)
            fail_msg("--check-config on bad config %zu exited %d: %s", i, st, out);
        const char *named = broken[i][1] ? broken[i][1] : bad;
        if (!strstr(out, named))
            fail_msg("--check-config on bad config %zu does not name %s: %s", i, named, out);
        unlink(bad);
    }
    /* A missing config file is a bad config too. */
    snprintf(bad, sizeof bad, "%s/missing.json", d->dir);
    assert_int_equal(pdi_run_pathd(bad_args, T_RUN_TIMEOUT_MS, out, sizeof out), 1);
}

static void test_command_line(void **state)
{
    (void)state;
    char out[8192];
    const char *help[] = {"--help", NULL};
    assert_int_equal(pdi_run_pathd(help, T_RUN_TIMEOUT_MS, out, sizeof out), 0);
    assert_non_null(strstr(out, "usage"));
    const char *version[] = {"--version", NULL};
    assert_int_equal(pdi_run_pathd(version, T_RUN_TIMEOUT_MS, out, sizeof out), 0);
    assert_non_null(strstr(out, "pathd"));
    static const char *const bad[][3] = {
        {"--frobnicate", NULL, NULL},
        {"--threads", "many", NULL},
        {"--threads", "100000", NULL},
        {"--listen", "nowhere", NULL},
        {"--log-level", "loud", NULL},
        {"--config", NULL, NULL}, /* missing value */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *args[3] = {bad[i][0], bad[i][1], NULL};
        int st = pdi_run_pathd(args, T_RUN_TIMEOUT_MS, out, sizeof out);
        if (st != 2)
            fail_msg("pathd %s %s exited %d, expected 2: %s", bad[i][0], bad[i][1] ? bad[i][1] : "", st, out);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sigterm_with_work_in_flight, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_sigint_with_work_in_flight, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_sighup_reload, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_sighup_reload_off_loop, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_sigterm_while_reload_loads, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_check_config, setup, pdi_fixture_stop),
        cmocka_unit_test(test_command_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
