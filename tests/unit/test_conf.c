/*
 * test_conf.c - the JSON config reader: defaults, a complete valid file,
 * every validation error with its JSON path, listen-address parsing, map path
 * resolution, per-character costs and the Tiled layer key, and that a
 * refused config leaves *out zeroed without leaking (the sanitizer run
 * checks the leaks).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pd_conf.h"

static const pd_conf zero_conf;

/* Loads a JSON string; base dir "/cfg" so resolved map paths are predictable. */
static int load(const char *json, pd_conf *c, char *err, size_t errlen)
{
    return pd_conf_load_buffer(json, strlen(json), "t.json", "/cfg", c, err, errlen);
}

/* Asserts that json is refused with exactly `expected`, and that the output
 * struct is left zeroed. */
static void expect_error(const char *json, const char *expected)
{
    pd_conf c;
    memset(&c, 0xAB, sizeof c);
    char err[256];
    int rc = load(json, &c, err, sizeof err);
    if (rc == 0 || strcmp(err, expected) != 0)
        print_error("input:    %s\nexpected: %s\ngot:      %s (rc %d)\n", json, expected,
                    rc == 0 ? "<accepted>" : err, rc);
    assert_int_equal(rc, -1);
    assert_string_equal(err, expected);
    assert_memory_equal(&c, &zero_conf, sizeof c);
}

static void test_empty_object_gives_defaults(void **state)
{
    (void)state;
    pd_conf c;
    char err[256];
    assert_int_equal(load("{}", &c, err, sizeof err), 0);
    assert_string_equal(c.listen_host, "127.0.0.1");
    assert_int_equal(c.listen_port, 7420);
    assert_int_equal(c.threads, 0);
    assert_int_equal(c.max_frame_bytes, 1024 * 1024);
    assert_int_equal(c.max_waypoints_per_chunk, 256);
    assert_int_equal(c.max_inflight_per_conn, 64);
    assert_int_equal(c.max_connections, 10000);
    assert_int_equal(c.job_queue_capacity, 4096);
    assert_int_equal(c.worker_retained_bytes, 8 * 1024 * 1024);
    assert_int_equal(c.inline_max_expansions, 64);
    assert_int_equal(c.worker_yield_us, 200);
    assert_int_equal(c.idle_timeout_ms, 300000);
    assert_int_equal(c.shutdown_grace_ms, 5000);
    assert_int_equal(c.write_high_watermark, 4 * 1024 * 1024);
    assert_int_equal(c.write_low_watermark, 1024 * 1024);
    assert_int_equal(c.default_max_expansions, 0);
    assert_int_equal(c.max_scenes, 100000);
    assert_int_equal(c.max_scene_cells, 4096 * 4096);
    assert_true(c.max_scene_bytes == UINT64_C(4) * 1024 * 1024 * 1024);
    assert_int_equal(c.max_watches_per_conn, 64);
    assert_int_equal(c.metrics_scene_series, 100);
    assert_int_equal(c.reservation_ttl_ms, 30000);
    assert_int_equal(c.reservation_clear_holds, 1);
    assert_int_equal(c.max_agents_per_scene, 10000);
    assert_int_equal(c.max_reservation_entries, 1000000);
    assert_int_equal(c.max_reservation_window_ms, 60000);
    assert_int_equal(c.max_clock_step_ms, 3600000);
    assert_int_equal(c.max_agent_bytes, 1024 * 1024);
    assert_int_equal(c.log_level, PD_LOG_INFO);
    assert_null(c.scenes);
    assert_int_equal(c.n_scenes, 0);
    pd_conf_free(&c);
}

static void test_full_file(void **state)
{
    (void)state;
    pd_conf c;
    char err[256] = "";
    int rc = pd_conf_load_file(PD_TEST_DATA_DIR "/conf_full.json", &c, err, sizeof err);
    if (rc != 0)
        print_error("%s\n", err);
    assert_int_equal(rc, 0);
    assert_string_equal(c.listen_host, "::1");
    assert_int_equal(c.listen_port, 9000);
    assert_int_equal(c.threads, 3);
    assert_int_equal(c.log_level, PD_LOG_DEBUG);
    assert_int_equal(c.max_frame_bytes, 65536);
    assert_int_equal(c.max_waypoints_per_chunk, 32);
    assert_int_equal(c.max_inflight_per_conn, 8);
    assert_int_equal(c.max_connections, 100);
    assert_int_equal(c.job_queue_capacity, 16);
    assert_int_equal(c.worker_retained_bytes, 1048576);
    assert_int_equal(c.inline_max_expansions, 0);
    assert_int_equal(c.idle_timeout_ms, 0);
    assert_int_equal(c.shutdown_grace_ms, 250);
    assert_int_equal(c.write_high_watermark, 131072);
    assert_int_equal(c.write_low_watermark, 2048);
    assert_int_equal(c.default_max_expansions, 1000000);
    assert_int_equal(c.n_scenes, 2);

    const pd_conf_scene *s = &c.scenes[0];
    assert_string_equal(s->name, "small");
    /* Relative map paths resolve against the config file's directory. */
    assert_string_equal(s->map_path, PD_TEST_DATA_DIR "/scene_small.txt");
    assert_int_equal(s->format, PD_MAP_ASCII);
    assert_true(s->origin_x == -3.5);
    assert_true(s->origin_y == 2.0);
    assert_true(s->cell_size == 0.25);
    /* Unit sizes come back sorted. */
    assert_int_equal(s->n_unit_sizes, 3);
    assert_int_equal(s->unit_sizes[0], 1);
    assert_int_equal(s->unit_sizes[1], 2);
    assert_int_equal(s->unit_sizes[2], 3);
    assert_int_equal(s->search, PD_CONF_SEARCH_ASTAR);

    s = &c.scenes[1];
    assert_string_equal(s->name, "mai.map-1");
    assert_string_equal(s->map_path, "/absolute/path/x.map");
    assert_int_equal(s->format, PD_MAP_MOVINGAI);
    /* Omitted scene keys take their defaults. */
    assert_true(s->origin_x == 0.0 && s->origin_y == 0.0);
    assert_true(s->cell_size == 1.0);
    assert_int_equal(s->n_unit_sizes, 1);
    assert_int_equal(s->unit_sizes[0], 1);
    assert_int_equal(s->search, PD_CONF_SEARCH_DEFAULT);
    pd_conf_free(&c);
    /* Freeing twice is harmless: free resets the scene array. */
    pd_conf_free(&c);
}

static void test_bundled_default_config(void **state)
{
    (void)state;
    pd_conf c;
    char err[256] = "";
    int rc = pd_conf_load_file(PD_SOURCE_DIR "/config/default.json", &c, err, sizeof err);
    if (rc != 0)
        print_error("%s\n", err);
    assert_int_equal(rc, 0);
    assert_string_equal(c.listen_host, "127.0.0.1");
    assert_int_equal(c.listen_port, 7420);
    assert_int_equal(c.n_scenes, 7);
    assert_string_equal(c.scenes[0].name, "town");
    assert_string_equal(c.scenes[0].map_path, PD_SOURCE_DIR "/config/scenes/town.txt");
    assert_true(c.scenes[0].origin_x == -20.0 && c.scenes[0].origin_y == -15.0);
    /* The dungeon's swampy shore costs 3; nothing else is overridden. */
    assert_string_equal(c.scenes[4].name, "dungeon");
    assert_int_equal(c.scenes[4].format, PD_MAP_MOVINGAI);
    for (int ch = 0; ch < PD_CONF_CHAR_COSTS; ch++)
        assert_int_equal(c.scenes[4].char_cost_set[ch], ch == 'S');
    assert_int_equal(c.scenes[4].char_cost['S'], 3);
    assert_string_equal(c.scenes[5].name, "courtyard");
    assert_int_equal(c.scenes[5].format, PD_MAP_TILED);
    assert_string_equal(c.scenes[5].tiled.layer, "walls");
    assert_string_equal(c.scenes[5].map_path, PD_SOURCE_DIR "/config/scenes/courtyard.tmj");
    /* The harbour keeps every default of the Tiled rule. */
    assert_string_equal(c.scenes[6].name, "harbour");
    assert_string_equal(c.scenes[6].tiled.layer, "");
    assert_string_equal(c.scenes[6].tiled.blocked_property, "blocked");
    assert_string_equal(c.scenes[6].tiled.cost_property, "cost");
    assert_string_equal(c.scenes[6].tiled.walkable_property, "");
    assert_int_equal(c.scenes[6].tiled.untagged_open, 1);
    assert_int_equal(c.scenes[6].tiled.colliders, 1);
    assert_string_equal(c.scenes[6].root_dir, PD_SOURCE_DIR "/config");
    pd_conf_free(&c);
}

static void test_map_path_resolution(void **state)
{
    (void)state;
    static const char *json =
        "{\"scenes\": [{\"name\": \"a\", \"map\": \"maps/a.txt\", \"format\": \"ascii\"}]}";
    pd_conf c;
    char err[256];
    size_t len = strlen(json);

    assert_int_equal(pd_conf_load_buffer(json, len, "x", "/etc/pathd", &c, err, sizeof err), 0);
    assert_string_equal(c.scenes[0].map_path, "/etc/pathd/maps/a.txt");
    pd_conf_free(&c);

    assert_int_equal(pd_conf_load_buffer(json, len, "x", "/etc/pathd/", &c, err, sizeof err), 0);
    assert_string_equal(c.scenes[0].map_path, "/etc/pathd/maps/a.txt");
    pd_conf_free(&c);

    /* No base directory (a config in the working directory): kept as given. */
    assert_int_equal(pd_conf_load_buffer(json, len, "x", NULL, &c, err, sizeof err), 0);
    assert_string_equal(c.scenes[0].map_path, "maps/a.txt");
    pd_conf_free(&c);
    assert_int_equal(pd_conf_load_buffer(json, len, "x", "", &c, err, sizeof err), 0);
    assert_string_equal(c.scenes[0].map_path, "maps/a.txt");
    pd_conf_free(&c);
}

static void test_config_file_in_working_directory(void **state)
{
    (void)state;
    /* A bare file name has no directory part; its maps resolve from the CWD. */
    static const char *name = "test_conf_cwd.json";
    FILE *f = fopen(name, "w");
    assert_non_null(f);
    fputs("{\"scenes\": [{\"name\": \"a\", \"map\": \"a.txt\", \"format\": \"ascii\"}]}", f);
    fclose(f);
    pd_conf c;
    char err[256] = "";
    int rc = pd_conf_load_file(name, &c, err, sizeof err);
    remove(name);
    assert_int_equal(rc, 0);
    assert_string_equal(c.scenes[0].map_path, "a.txt");
    pd_conf_free(&c);
}

static void test_listen_accepted(void **state)
{
    (void)state;
    static const struct {
        const char *json;
        const char *host;
        unsigned port;
    } cases[] = {
        { "{\"listen\": \"0.0.0.0:0\"}", "0.0.0.0", 0 },
        { "{\"listen\": \"10.1.2.3:65535\"}", "10.1.2.3", 65535 },
        { "{\"listen\": \"[::1]:7420\"}", "::1", 7420 },
        { "{\"listen\": \"[::]:1\"}", "::", 1 },
        { "{\"listen\": \"[fe80::1:2]:00080\"}", "fe80::1:2", 80 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pd_conf c;
        char err[256] = "";
        int rc = load(cases[i].json, &c, err, sizeof err);
        if (rc != 0)
            print_error("%s: %s\n", cases[i].json, err);
        assert_int_equal(rc, 0);
        assert_string_equal(c.listen_host, cases[i].host);
        assert_int_equal(c.listen_port, cases[i].port);
        pd_conf_free(&c);
    }
}

/* What pd_conf_format_address writes (the form the daemon's log lines and
 * reload warnings use) reads back through pd_conf_parse_address as the same
 * host and port; an IPv6 host is bracketed so its port stays separable. */
static void test_address_format_round_trip(void **state)
{
    (void)state;
    static const struct {
        const char *host;
        uint16_t port;
        const char *text;
    } cases[] = {
        { "127.0.0.1", 7420, "127.0.0.1:7420" },
        { "0.0.0.0", 0, "0.0.0.0:0" },
        { "::1", 65535, "[::1]:65535" },
        { "fe80::1:2", 80, "[fe80::1:2]:80" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[PD_CONF_MAX_ADDRESS];
        assert_string_equal(pd_conf_format_address(text, cases[i].host, cases[i].port), cases[i].text);
        char host[PD_CONF_MAX_HOST];
        uint16_t port = 1;
        char err[256] = "";
        assert_int_equal(pd_conf_parse_address(text, host, &port, err, sizeof err), 0);
        assert_string_equal(host, cases[i].host);
        assert_int_equal(port, cases[i].port);
    }
}

static void test_listen_errors(void **state)
{
    (void)state;
    expect_error("{\"listen\": \"localhost:80\"}",
                 "t.json: $.listen: \"localhost\" is not a numeric IPv4 address");
    expect_error("{\"listen\": \"::1:80\"}",
                 "t.json: $.listen: IPv6 addresses need brackets: \"[::1]:PORT\"");
    expect_error("{\"listen\": \"1.2.3.4\"}",
                 "t.json: $.listen: expected \"HOST:PORT\", got \"1.2.3.4\"");
    expect_error("{\"listen\": \"1.2.3.4:\"}", "t.json: $.listen: port is missing");
    expect_error("{\"listen\": \":80\"}", "t.json: $.listen: host is empty");
    expect_error("{\"listen\": \"1.2.3.4:65536\"}",
                 "t.json: $.listen: port must be in 0..65535 (0 = ephemeral)");
    expect_error("{\"listen\": \"1.2.3.4:99999999999999999999\"}",
                 "t.json: $.listen: port must be in 0..65535 (0 = ephemeral)");
    expect_error("{\"listen\": \"1.2.3.4:-1\"}",
                 "t.json: $.listen: port must be decimal digits, got \"-1\"");
    expect_error("{\"listen\": \"1.2.3.4:8o\"}",
                 "t.json: $.listen: port must be decimal digits, got \"8o\"");
    expect_error("{\"listen\": \"[::1]80\"}",
                 "t.json: $.listen: expected \"[IPv6]:PORT\", got \"[::1]80\"");
    expect_error("{\"listen\": \"[::1\"}",
                 "t.json: $.listen: expected \"[IPv6]:PORT\", got \"[::1\"");
    expect_error("{\"listen\": \"[1.2.3.4]:80\"}",
                 "t.json: $.listen: \"1.2.3.4\" is not a numeric IPv6 address");
    expect_error("{\"listen\": \"[]:80\"}", "t.json: $.listen: host is empty");
    expect_error("{\"listen\": \"1111111111111111111111111111111111111111111111111111111111111111:1\"}",
                 "t.json: $.listen: host is longer than 63 bytes");
    expect_error("{\"listen\": 7420}", "t.json: $.listen: must be a string, not a number");
}

/* The journal's keys: data_dir resolved like a map path, the fsync
 * policy's three names, the compaction threshold's range. */
static void test_journal_keys(void **state)
{
    (void)state;
    pd_conf c;
    char err[256];
    assert_int_equal(load("{}", &c, err, sizeof err), 0);
    assert_string_equal(c.data_dir, "");
    assert_int_equal(c.journal_fsync, PD_CONF_FSYNC_EVERYSEC);
    assert_int_equal(c.journal_compact_bytes, 64 * 1024 * 1024);
    pd_conf_free(&c);
    assert_int_equal(load("{\"data_dir\": \"var/data\", \"journal_fsync\": \"always\", "
                          "\"journal_compact_bytes\": 65536}", &c, err, sizeof err), 0);
    assert_string_equal(c.data_dir, "/cfg/var/data");
    assert_int_equal(c.journal_fsync, PD_CONF_FSYNC_ALWAYS);
    assert_int_equal(c.journal_compact_bytes, 65536);
    pd_conf_free(&c);
    assert_int_equal(load("{\"data_dir\": \"/srv/pathd\", \"journal_fsync\": \"no\"}", &c, err, sizeof err), 0);
    assert_string_equal(c.data_dir, "/srv/pathd");
    assert_int_equal(c.journal_fsync, PD_CONF_FSYNC_NO);
    assert_string_equal(pd_conf_fsync_name(c.journal_fsync), "no");
    pd_conf_free(&c);
    assert_int_equal(load("{\"data_dir\": \"\"}", &c, err, sizeof err), 0);
    assert_string_equal(c.data_dir, "");
    pd_conf_free(&c);
    expect_error("{\"data_dir\": 5}", "t.json: $.data_dir: must be a string, not a number");
    expect_error("{\"journal_fsync\": \"sometimes\"}",
                 "t.json: $.journal_fsync: must be one of \"always\", \"everysec\", \"no\", not \"sometimes\"");
    expect_error("{\"journal_fsync\": true}", "t.json: $.journal_fsync: must be a string, not a boolean");
    expect_error("{\"journal_compact_bytes\": 1000}",
                 "t.json: $.journal_compact_bytes: must be in 65536..9007199254740992");
}

/* "log": the Redis change log's address (a name, an IPv4 address or
 * [IPv6]), its timeout, key prefix and dedup TTL; absent = no Redis log. */
/* "agent_check": off by default, on with an address (port 0 too), off again
 * with "" or null, and refused as listen refuses a bad address. */
static void test_agent_check_key(void **state)
{
    (void)state;
    pd_conf c;
    char err[256];
    assert_int_equal(load("{}", &c, err, sizeof err), 0);
    assert_int_equal(c.agent_enabled, 0);
    pd_conf_free(&c);
    assert_int_equal(load("{\"agent_check\": \"127.0.0.1:7430\"}", &c, err, sizeof err), 0);
    assert_int_equal(c.agent_enabled, 1);
    assert_string_equal(c.agent_host, "127.0.0.1");
    assert_int_equal(c.agent_port, 7430);
    pd_conf_free(&c);
    assert_int_equal(load("{\"agent_check\": \"[::1]:0\"}", &c, err, sizeof err), 0);
    assert_int_equal(c.agent_enabled, 1);
    assert_string_equal(c.agent_host, "::1");
    assert_int_equal(c.agent_port, 0);
    pd_conf_free(&c);
    assert_int_equal(load("{\"agent_check\": \"\"}", &c, err, sizeof err), 0);
    assert_int_equal(c.agent_enabled, 0);
    pd_conf_free(&c);
    assert_int_equal(load("{\"agent_check\": null}", &c, err, sizeof err), 0);
    assert_int_equal(c.agent_enabled, 0);
    pd_conf_free(&c);
    expect_error("{\"agent_check\": \"haproxy:7430\"}",
                 "t.json: $.agent_check: \"haproxy\" is not a numeric IPv4 address");
    expect_error("{\"agent_check\": 7430}", "t.json: $.agent_check: must be a string, not a number");
}

static void test_log_keys(void **state)
{
    (void)state;
    pd_conf c;
    char err[256];
    assert_int_equal(load("{}", &c, err, sizeof err), 0);
    assert_string_equal(c.log.redis_host, "");
    assert_int_equal(c.log.timeout_ms, 2000);
    assert_string_equal(c.log.prefix, "pathd");
    assert_int_equal(c.log.dedup_ttl_s, 86400);
    assert_int_equal(c.log.snapshot_every, 1000);
    assert_int_equal(c.log.snapshot_keep, 3);
    assert_int_equal(c.log.snapshot_max_bytes, 256u << 20);
    pd_conf_free(&c);
    assert_int_equal(load("{\"log\": {\"redis\": \"127.0.0.1:6379\"}}", &c, err, sizeof err), 0);
    assert_string_equal(c.log.redis_host, "127.0.0.1");
    assert_int_equal(c.log.redis_port, 6379);
    pd_conf_free(&c);
    assert_int_equal(load("{\"log\": {\"redis\": \"redis-1.internal:7000\", \"timeout_ms\": 100, "
                          "\"prefix\": \"game_eu.1\", \"dedup_ttl_s\": 60, \"snapshot_every\": 7, "
                          "\"snapshot_keep\": 1, \"snapshot_max_bytes\": 1024}}", &c, err, sizeof err), 0);
    assert_string_equal(c.log.redis_host, "redis-1.internal");
    assert_int_equal(c.log.redis_port, 7000);
    assert_int_equal(c.log.timeout_ms, 100);
    assert_string_equal(c.log.prefix, "game_eu.1");
    assert_int_equal(c.log.dedup_ttl_s, 60);
    assert_int_equal(c.log.snapshot_every, 7);
    assert_int_equal(c.log.snapshot_keep, 1);
    assert_int_equal(c.log.snapshot_max_bytes, 1024);
    pd_conf_free(&c);
    assert_int_equal(load("{\"log\": {\"redis\": \"[::1]:6380\"}}", &c, err, sizeof err), 0);
    assert_string_equal(c.log.redis_host, "::1");
    assert_int_equal(c.log.redis_port, 6380);
    pd_conf_free(&c);
    assert_int_equal(load("{\"log\": null}", &c, err, sizeof err), 0);
    assert_string_equal(c.log.redis_host, "");
    pd_conf_free(&c);
    /* Each bad "log" and its message. */
    static const struct {
        const char *json, *message;
    } bad[] = {
        { "{\"log\": \"redis\"}",
          "t.json: $.log: must be an object, not a string" },
        { "{\"log\": {}}",
          "t.json: $.log.redis: is required in \"log\" (HOST:PORT of the Redis server)" },
        { "{\"log\": {\"redis\": \"localhost\"}}",
          "t.json: $.log.redis: \"localhost\": must be HOST:PORT with a host of 1..255 bytes" },
        { "{\"log\": {\"redis\": \":6379\"}}",
          "t.json: $.log.redis: \":6379\": must be HOST:PORT with a host of 1..255 bytes" },
        { "{\"log\": {\"redis\": \"a b:6379\"}}",
          "t.json: $.log.redis: \"a b:6379\": must be HOST:PORT (HOST of [A-Za-z0-9.-], or [IPv6])" },
        { "{\"log\": {\"redis\": \"h:0\"}}",
          "t.json: $.log.redis: \"h:0\": the port must be 1..65535" },
        { "{\"log\": {\"redis\": \"h:65536\"}}",
          "t.json: $.log.redis: \"h:65536\": the port must be 1..65535" },
        { "{\"log\": {\"redis\": \"h:6x\"}}",
          "t.json: $.log.redis: \"h:6x\": the port must be 1..65535" },
        { "{\"log\": {\"redis\": \"h:1\", \"timeout_ms\": 50}}",
          "t.json: $.log.timeout_ms: must be in 100..60000" },
        { "{\"log\": {\"redis\": \"h:1\", \"prefix\": \"\"}}",
          "t.json: $.log.prefix: must be 1..63 bytes" },
        { "{\"log\": {\"redis\": \"h:1\", \"prefix\": \"a{b}\"}}",
          "t.json: $.log.prefix: \"a{b}\": only [A-Za-z0-9_.-]" },
        { "{\"log\": {\"redis\": \"h:1\", \"dedup_ttl_s\": 0}}",
          "t.json: $.log.dedup_ttl_s: must be in 1..31536000" },
        { "{\"log\": {\"redis\": \"h:1\", \"snapshot_every\": 0}}",
          "t.json: $.log.snapshot_every: must be in 1..1000000000" },
        { "{\"log\": {\"redis\": \"h:1\", \"snapshot_keep\": 101}}",
          "t.json: $.log.snapshot_keep: must be in 1..100" },
        { "{\"log\": {\"redis\": \"h:1\", \"snapshot_max_bytes\": 1023}}",
          "t.json: $.log.snapshot_max_bytes: must be in 1024..536870912" },
        { "{\"log\": {\"redis\": \"h:1\", \"db\": 2}}",
          "t.json: $.log.db: unknown key" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        expect_error(bad[i].json, bad[i].message);
}

/* The reservation keys (issue 34) are read as given, 0 included (no limit,
 * or no expiry). */
static void test_reservation_keys(void **state)
{
    (void)state;
    pd_conf c;
    char err[256];
    assert_int_equal(load("{\"limits\": {\"reservation_ttl_ms\": 0, \"max_agents_per_scene\": 2000, "
                          "\"max_reservation_entries\": 4294967295, \"max_reservation_window_ms\": 0, "
                          "\"max_agent_bytes\": 65536, \"reservation_clear_holds\": false, "
                          "\"max_clock_step_ms\": 0}}", &c, err, sizeof err), 0);
    assert_int_equal(c.reservation_ttl_ms, 0);
    assert_int_equal(c.max_clock_step_ms, 0);
    assert_int_equal(c.reservation_clear_holds, 0);
    assert_int_equal(c.max_agents_per_scene, 2000);
    assert_true(c.max_reservation_entries == UINT32_MAX);
    assert_int_equal(c.max_reservation_window_ms, 0);
    assert_int_equal(c.max_agent_bytes, 65536);
    pd_conf_free(&c);
}

static void test_top_level_errors(void **state)
{
    (void)state;
    expect_error("[]", "t.json: $: must be an object, not an array");
    expect_error("{\"listn\": \"1.2.3.4:1\"}", "t.json: $.listn: unknown key");
    expect_error("{\"threads\": 1, \"threads\": 2}", "t.json: $.threads: key given more than once");
    expect_error("{\"threads\": 257}", "t.json: $.threads: must be in 0..256");
    expect_error("{\"threads\": -1}", "t.json: $.threads: must be in 0..256");
    expect_error("{\"threads\": 2.5}", "t.json: $.threads: must be an integer");
    expect_error("{\"threads\": 1e300}", "t.json: $.threads: must be in 0..256");
    expect_error("{\"threads\": \"4\"}", "t.json: $.threads: must be an integer, not a string");
    expect_error("{\"threads\": true}", "t.json: $.threads: must be an integer, not a boolean");
    expect_error("{\"threads\": null}", "t.json: $.threads: must be an integer, not null");
    expect_error("{\"log_level\": \"verbose\"}",
                 "t.json: $.log_level: must be one of \"error\", \"warn\", \"info\", \"debug\"");
    expect_error("{\"log_level\": 3}", "t.json: $.log_level: must be a string, not a number");
    expect_error("{\"limits\": []}", "t.json: $.limits: must be an object, not an array");
    expect_error("{\"scenes\": {}}", "t.json: $.scenes: must be an array, not an object");
}

static void test_json_syntax_errors(void **state)
{
    (void)state;
    expect_error("", "t.json:1:1: invalid JSON");
    /* cJSON reports the position at or just after the offending character:
     * here the 'o' of oops is column 3. */
    expect_error("{\n  \"threads\": 1,\n  oops\n}", "t.json:3:4: invalid JSON");
    expect_error("{} {}", "t.json:1:4: unexpected text after the JSON document");
    expect_error("{\"threads\": 1}\n\nx", "t.json:3:1: unexpected text after the JSON document");
    /* Trailing whitespace is fine. */
    pd_conf c;
    char err[256];
    assert_int_equal(load("{}\n \t\n", &c, err, sizeof err), 0);
    pd_conf_free(&c);
}

static void test_limit_errors(void **state)
{
    (void)state;
    expect_error("{\"limits\": {\"max_frame_byte\": 100}}",
                 "t.json: $.limits.max_frame_byte: unknown key");
    expect_error("{\"limits\": {\"max_frame_bytes\": 63}}",
                 "t.json: $.limits.max_frame_bytes: must be in 64..67108864");
    expect_error("{\"limits\": {\"max_frame_bytes\": 67108865}}",
                 "t.json: $.limits.max_frame_bytes: must be in 64..67108864");
    expect_error("{\"limits\": {\"max_waypoints_per_chunk\": 0}}",
                 "t.json: $.limits.max_waypoints_per_chunk: must be in 1..65536");
    expect_error("{\"limits\": {\"max_inflight_per_conn\": 0}}",
                 "t.json: $.limits.max_inflight_per_conn: must be in 1..65536");
    expect_error("{\"limits\": {\"max_connections\": 1000001}}",
                 "t.json: $.limits.max_connections: must be in 1..1000000");
    expect_error("{\"limits\": {\"job_queue_capacity\": 0}}",
                 "t.json: $.limits.job_queue_capacity: must be in 1..1048576");
    expect_error("{\"limits\": {\"worker_retained_bytes\": 4294967296}}",
                 "t.json: $.limits.worker_retained_bytes: must be in 0..4294967295");
    expect_error("{\"limits\": {\"worker_retained_bytes\": \"8M\"}}",
                 "t.json: $.limits.worker_retained_bytes: must be an integer, not a string");
    expect_error("{\"limits\": {\"inline_max_expansions\": 65537}}",
                 "t.json: $.limits.inline_max_expansions: must be in 0..65536");
    expect_error("{\"limits\": {\"worker_yield_us\": 1000001}}",
                 "t.json: $.limits.worker_yield_us: must be in 0..1000000");
    expect_error("{\"limits\": {\"max_watches_per_conn\": 0}}",
                 "t.json: $.limits.max_watches_per_conn: must be in 1..1000000");
    expect_error("{\"limits\": {\"metrics_scene_series\": 100001}}",
                 "t.json: $.limits.metrics_scene_series: must be in 0..100000");
    expect_error("{\"limits\": {\"reservation_ttl_ms\": 86400001}}",
                 "t.json: $.limits.reservation_ttl_ms: must be in 0..86400000");
    expect_error("{\"limits\": {\"reservation_clear_holds\": 1}}",
                 "t.json: $.limits.reservation_clear_holds: must be true or false, not a number");
    expect_error("{\"limits\": {\"max_agents_per_scene\": -1}}",
                 "t.json: $.limits.max_agents_per_scene: must be in 0..1000000");
    expect_error("{\"limits\": {\"max_reservation_entries\": 4294967296}}",
                 "t.json: $.limits.max_reservation_entries: must be in 0..4294967295");
    expect_error("{\"limits\": {\"max_reservation_window_ms\": 1.5}}",
                 "t.json: $.limits.max_reservation_window_ms: must be an integer");
    expect_error("{\"limits\": {\"max_agent_bytes\": 1073741825}}",
                 "t.json: $.limits.max_agent_bytes: must be in 0..1073741824");
    expect_error("{\"limits\": {\"idle_timeout_ms\": 86400001}}",
                 "t.json: $.limits.idle_timeout_ms: must be in 0..86400000");
    expect_error("{\"limits\": {\"shutdown_grace_ms\": -5}}",
                 "t.json: $.limits.shutdown_grace_ms: must be in 0..600000");
    expect_error("{\"limits\": {\"write_high_watermark\": 1023}}",
                 "t.json: $.limits.write_high_watermark: must be in 1024..1073741824");
    expect_error("{\"limits\": {\"write_low_watermark\": 1073741825}}",
                 "t.json: $.limits.write_low_watermark: must be in 0..1073741824");
    expect_error("{\"limits\": {\"default_max_expansions\": 1e16}}",
                 "t.json: $.limits.default_max_expansions: must be in 0..9007199254740992");
    expect_error("{\"limits\": {\"default_max_expansions\": 0.5}}",
                 "t.json: $.limits.default_max_expansions: must be an integer");
    expect_error("{\"limits\": {\"max_scenes\": 0}}",
                 "t.json: $.limits.max_scenes: must be in 1..1000000");
    expect_error("{\"limits\": {\"max_scenes\": 1000001}}",
                 "t.json: $.limits.max_scenes: must be in 1..1000000");
    expect_error("{\"limits\": {\"max_scenes\": \"10\"}}",
                 "t.json: $.limits.max_scenes: must be an integer, not a string");
    expect_error("{\"limits\": {\"max_scene_cells\": 0}}",
                 "t.json: $.limits.max_scene_cells: must be in 1..268435456");
    expect_error("{\"limits\": {\"max_scene_cells\": 268435457}}",
                 "t.json: $.limits.max_scene_cells: must be in 1..268435456");
    expect_error("{\"limits\": {\"max_scene_cells\": 4096.5}}",
                 "t.json: $.limits.max_scene_cells: must be an integer");
    /* max_scene_bytes has a 1 MiB floor: less would refuse every scene. */
    expect_error("{\"limits\": {\"max_scene_bytes\": 1048575}}",
                 "t.json: $.limits.max_scene_bytes: must be in 1048576..9007199254740992");
    expect_error("{\"limits\": {\"max_scene_bytes\": 0}}",
                 "t.json: $.limits.max_scene_bytes: must be in 1048576..9007199254740992");
    expect_error("{\"limits\": {\"max_scene_bytes\": 1e16}}",
                 "t.json: $.limits.max_scene_bytes: must be in 1048576..9007199254740992");
    expect_error("{\"limits\": {\"max_scene_bytes\": true}}",
                 "t.json: $.limits.max_scene_bytes: must be an integer, not a boolean");
    /* The watermarks are checked against each other, defaults included. */
    expect_error("{\"limits\": {\"write_low_watermark\": 4194304}}",
                 "t.json: $.limits.write_low_watermark: must be below write_high_watermark (4194304)");
    expect_error("{\"limits\": {\"write_high_watermark\": 4096, \"write_low_watermark\": 8192}}",
                 "t.json: $.limits.write_low_watermark: must be below write_high_watermark (4096)");

    /* The bounds themselves are accepted. */
    pd_conf c;
    char err[256];
    assert_int_equal(load("{\"limits\": {\"max_frame_bytes\": 64, \"write_high_watermark\": 1024,"
                          " \"write_low_watermark\": 0, \"idle_timeout_ms\": 86400000,"
                          " \"default_max_expansions\": 9007199254740992}}",
                          &c, err, sizeof err),
                     0);
    assert_int_equal(c.max_frame_bytes, 64);
    assert_int_equal(c.write_high_watermark, 1024);
    assert_int_equal(c.write_low_watermark, 0);
    assert_int_equal(c.idle_timeout_ms, 86400000);
    assert_true(c.default_max_expansions == UINT64_C(9007199254740992));
    pd_conf_free(&c);

    /* The scene caps at both ends of their ranges. */
    static const struct {
        uint32_t scenes, cells;
        uint64_t bytes;
    } caps[] = { { 1, 1, 1048576 }, { 1000000, 268435456, UINT64_C(9007199254740992) } };
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        char json[160];
        snprintf(json, sizeof json,
                 "{\"limits\": {\"max_scenes\": %u, \"max_scene_cells\": %u, \"max_scene_bytes\": %llu}}",
                 (unsigned)caps[i].scenes, (unsigned)caps[i].cells, (unsigned long long)caps[i].bytes);
        assert_int_equal(load(json, &c, err, sizeof err), 0);
        assert_int_equal(c.max_scenes, caps[i].scenes);
        assert_int_equal(c.max_scene_cells, caps[i].cells);
        assert_true(c.max_scene_bytes == caps[i].bytes);
        pd_conf_free(&c);
    }
}

/* Wraps one scene object in a config with a valid first scene, so every error
 * below also exercises the cleanup of an already allocated entry. */
static void expect_scene_error(const char *scene_json, const char *expected)
{
    char json[1024];
    snprintf(json, sizeof json,
             "{\"scenes\": [{\"name\": \"ok\", \"map\": \"ok.txt\", \"format\": \"ascii\"}, %s]}",
             scene_json);
    expect_error(json, expected);
}

static void test_scene_errors(void **state)
{
    (void)state;
    expect_scene_error("[]", "t.json: $.scenes[1]: must be an object, not an array");
    expect_scene_error("{\"map\": \"a\", \"format\": \"ascii\"}", "t.json: $.scenes[1].name: is required");
    expect_scene_error("{\"name\": \"\", \"map\": \"a\", \"format\": \"ascii\"}",
                       "t.json: $.scenes[1].name: must not be empty");
    expect_scene_error("{\"name\": \"a b\", \"map\": \"a\", \"format\": \"ascii\"}",
                       "t.json: $.scenes[1].name: may only contain A-Z a-z 0-9 _ . - (got \"a b\")");
    expect_scene_error("{\"name\": \"caf\\u00e9\", \"map\": \"a\", \"format\": \"ascii\"}",
                       "t.json: $.scenes[1].name: may only contain A-Z a-z 0-9 _ . - (got \"caf\xc3\xa9\")");
    expect_scene_error("{\"name\": \"a/b\", \"map\": \"a\", \"format\": \"ascii\"}",
                       "t.json: $.scenes[1].name: may only contain A-Z a-z 0-9 _ . - (got \"a/b\")");
    expect_scene_error("{\"name\": 5, \"map\": \"a\", \"format\": \"ascii\"}",
                       "t.json: $.scenes[1].name: must be a string, not a number");
    expect_scene_error("{\"name\": \"ok\", \"map\": \"a\", \"format\": \"ascii\"}",
                       "t.json: $.scenes[1].name: duplicate scene name \"ok\" (also $.scenes[0])");
    expect_scene_error("{\"name\": \"b\", \"map\": \"a\", \"format\": \"ascii\", \"colour\": 1}",
                       "t.json: $.scenes[1].colour: unknown key");
    expect_scene_error("{\"name\": \"b\", \"format\": \"ascii\"}", "t.json: $.scenes[1].map: is required");
    expect_scene_error("{\"name\": \"b\", \"map\": \"\", \"format\": \"ascii\"}",
                       "t.json: $.scenes[1].map: must not be empty");
    expect_scene_error("{\"name\": \"b\", \"map\": [\"a\"], \"format\": \"ascii\"}",
                       "t.json: $.scenes[1].map: must be a string, not an array");
    expect_scene_error("{\"name\": \"b\", \"map\": \"a\"}",
                       "t.json: $.scenes[1].format: is required (\"ascii\", \"movingai\", \"tiled\" or \"ldtk\")");
    expect_scene_error("{\"name\": \"b\", \"map\": \"a\", \"format\": \"png\"}",
                       "t.json: $.scenes[1].format: must be \"ascii\", \"movingai\", \"tiled\" or \"ldtk\"");
    expect_scene_error("{\"name\": \"b\", \"map\": \"a\", \"format\": \"ascii\", \"origin\": [1]}",
                       "t.json: $.scenes[1].origin: must be an array [x, y] of two numbers");
    expect_scene_error("{\"name\": \"b\", \"map\": \"a\", \"format\": \"ascii\", \"origin\": {\"x\": 1}}",
                       "t.json: $.scenes[1].origin: must be an array [x, y] of two numbers");
    expect_scene_error("{\"name\": \"b\", \"map\": \"a\", \"format\": \"ascii\", \"origin\": [1, \"2\"]}",
                       "t.json: $.scenes[1].origin[1]: must be a number, not a string");
    expect_scene_error("{\"name\": \"b\", \"map\": \"a\", \"format\": \"ascii\", \"origin\": [1e999, 0]}",
                       "t.json: $.scenes[1].origin[0]: must be a finite number");
    expect_scene_error("{\"name\": \"b\", \"map\": \"a\", \"format\": \"ascii\", \"cell_size\": 0}",
                       "t.json: $.scenes[1].cell_size: must be > 0");
    expect_scene_error("{\"name\": \"b\", \"map\": \"a\", \"format\": \"ascii\", \"cell_size\": -1.5}",
                       "t.json: $.scenes[1].cell_size: must be > 0");
    expect_scene_error("{\"name\": \"b\", \"map\": \"a\", \"format\": \"ascii\", \"cell_size\": 1e999}",
                       "t.json: $.scenes[1].cell_size: must be a finite number");
    expect_scene_error("{\"name\": \"b\", \"map\": \"a\", \"format\": \"ascii\", \"unit_sizes\": []}",
                       "t.json: $.scenes[1].unit_sizes: must list 1..8 unit sizes");
    expect_scene_error("{\"name\": \"b\", \"map\": \"a\", \"format\": \"ascii\","
                       " \"unit_sizes\": [1, 2, 3, 4, 5, 6, 7, 8, 9]}",
                       "t.json: $.scenes[1].unit_sizes: must list 1..8 unit sizes");
    expect_scene_error("{\"name\": \"b\", \"map\": \"a\", \"format\": \"ascii\", \"unit_sizes\": [1, 0]}",
                       "t.json: $.scenes[1].unit_sizes[1]: must be in 1..16");
    expect_scene_error("{\"name\": \"b\", \"map\": \"a\", \"format\": \"ascii\", \"unit_sizes\": [17]}",
                       "t.json: $.scenes[1].unit_sizes[0]: must be in 1..16");
    expect_scene_error("{\"name\": \"b\", \"map\": \"a\", \"format\": \"ascii\", \"unit_sizes\": [2, 1, 2]}",
                       "t.json: $.scenes[1].unit_sizes[2]: unit size 2 is listed twice");
    expect_scene_error("{\"name\": \"b\", \"map\": \"a\", \"format\": \"ascii\", \"unit_sizes\": 2}",
                       "t.json: $.scenes[1].unit_sizes: must be an array, not a number");
    expect_scene_error("{\"name\": \"b\", \"map\": \"a\", \"format\": \"ascii\", \"search\": \"fast\"}",
                       "t.json: $.scenes[1].search: must be \"auto\", \"jps\" or \"astar\"");
    expect_scene_error("{\"name\": \"b\", \"map\": \"a\", \"format\": \"ascii\", \"search\": 1}",
                       "t.json: $.scenes[1].search: must be a string, not a number");
}

static void test_scene_costs(void **state)
{
    (void)state;
    pd_conf c;
    char err[256] = "";
    int rc = load("{\"scenes\": [{\"name\": \"m\", \"map\": \"m.map\", \"format\": \"movingai\","
                  " \"costs\": {\"S\": 3, \"W\": \"blocked\", \"~\": 255, \"!\": 1, \".\": 2}}]}",
                  &c, err, sizeof err);
    if (rc != 0)
        print_error("%s\n", err);
    assert_int_equal(rc, 0);
    const pd_conf_scene *s = &c.scenes[0];
    static const struct {
        unsigned char ch;
        uint8_t cost;
    } want[] = { { 'S', 3 }, { 'W', 0 }, { '~', 255 }, { '!', 1 }, { '.', 2 } };
    int n_set = 0;
    for (int ch = 0; ch < PD_CONF_CHAR_COSTS; ch++)
        n_set += s->char_cost_set[ch] != 0;
    assert_int_equal(n_set, 5);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        assert_int_equal(s->char_cost_set[want[i].ch], 1);
        assert_int_equal(s->char_cost[want[i].ch], want[i].cost);
    }
    assert_string_equal(s->tiled.layer, "");
    pd_conf_free(&c);

    /* An empty table is allowed and overrides nothing. */
    assert_int_equal(load("{\"scenes\": [{\"name\": \"m\", \"map\": \"m.map\", \"format\": \"movingai\","
                          " \"costs\": {}}]}", &c, err, sizeof err), 0);
    for (int ch = 0; ch < PD_CONF_CHAR_COSTS; ch++)
        assert_int_equal(c.scenes[0].char_cost_set[ch], 0);
    pd_conf_free(&c);

#define MAI "{\"name\": \"b\", \"map\": \"a\", \"format\": \"movingai\", "
    expect_scene_error(MAI "\"costs\": [1]}", "t.json: $.scenes[1].costs: must be an object, not an array");
    expect_scene_error(MAI "\"costs\": {\"SW\": 2}}",
                       "t.json: $.scenes[1].costs.SW: a key must be one printable ASCII character");
    expect_scene_error(MAI "\"costs\": {\"\": 2}}",
                       "t.json: $.scenes[1].costs.: a key must be one printable ASCII character");
    expect_scene_error(MAI "\"costs\": {\" \": 2}}",
                       "t.json: $.scenes[1].costs. : a key must be one printable ASCII character");
    expect_scene_error(MAI "\"costs\": {\"\\u00e9\": 2}}",
                       "t.json: $.scenes[1].costs.\xc3\xa9: a key must be one printable ASCII character");
    expect_scene_error(MAI "\"costs\": {\"S\": 0}}", "t.json: $.scenes[1].costs.S: must be in 1..255");
    expect_scene_error(MAI "\"costs\": {\"S\": 256}}", "t.json: $.scenes[1].costs.S: must be in 1..255");
    expect_scene_error(MAI "\"costs\": {\"S\": 2.5}}", "t.json: $.scenes[1].costs.S: must be an integer");
    expect_scene_error(MAI "\"costs\": {\"S\": \"swamp\"}}",
                       "t.json: $.scenes[1].costs.S: must be a cost 1..255 or \"blocked\", not a string");
    expect_scene_error(MAI "\"costs\": {\"S\": true}}",
                       "t.json: $.scenes[1].costs.S: must be a cost 1..255 or \"blocked\", not a boolean");
    expect_scene_error(MAI "\"costs\": {\"S\": 2, \"S\": 3}}",
                       "t.json: $.scenes[1].costs.S: key given more than once");
    expect_scene_error(MAI "\"layer\": \"walls\"}", "t.json: $.scenes[1].layer: applies to tiled maps only");
#undef MAI
    expect_scene_error("{\"name\": \"b\", \"map\": \"a\", \"format\": \"ascii\", \"costs\": {\"S\": 2}}",
                       "t.json: $.scenes[1].costs: applies to movingai and ldtk maps only (ascii maps write "
                       "costs as 1..9, tiled maps as tile properties or \"classes\")");
    expect_scene_error("{\"name\": \"b\", \"map\": \"a\", \"format\": \"tiled\", \"costs\": {\"S\": 2}}",
                       "t.json: $.scenes[1].costs: applies to movingai and ldtk maps only (ascii maps write "
                       "costs as 1..9, tiled maps as tile properties or \"classes\")");
}

/* "classes": tile / object class -> cost or "blocked", in order. */
static void test_scene_tiled_classes(void **state)
{
    (void)state;
    pd_conf c;
    char err[256] = "";
    int rc = load("{\"scenes\": [{\"name\": \"t\", \"map\": \"t.tmx\", \"format\": \"tiled\","
                  " \"classes\": {\"Wall\": \"blocked\", \"Mud\": 3, \"Floor\": 1}}]}",
                  &c, err, sizeof err);
    if (rc != 0)
        print_error("%s\n", err);
    assert_int_equal(rc, 0);
    const pd_tiled_rules *r = &c.scenes[0].tiled;
    assert_int_equal(r->n_classes, 3);
    assert_string_equal(r->classes[0].name, "Wall");
    assert_int_equal(r->classes[0].cell, 0);
    assert_string_equal(r->classes[1].name, "Mud");
    assert_int_equal(r->classes[1].cell, 3);
    assert_string_equal(r->classes[2].name, "Floor");
    assert_int_equal(r->classes[2].cell, 1);
    pd_conf_free(&c);

    /* PD_TILED_MAX_CLASSES entries fit; one more does not. */
    char json[640];
    size_t n = (size_t)snprintf(json, sizeof json, "{\"name\": \"b\", \"map\": \"a\", \"format\": \"tiled\", \"classes\": {");
    for (int i = 0; i <= PD_TILED_MAX_CLASSES; i++)
        n += (size_t)snprintf(json + n, sizeof json - n, "%s\"c%d\": 2", i ? ", " : "", i);
    snprintf(json + n, sizeof json - n, "}}");
    expect_scene_error(json, "t.json: $.scenes[1].classes.c32: more than PD_TILED_MAX_CLASSES (32) classes");
    expect_scene_error("{\"name\": \"b\", \"map\": \"a\", \"format\": \"tiled\", \"classes\": {\"Mud\": 0}}",
                       "t.json: $.scenes[1].classes.Mud: must be in 1..255");
    expect_scene_error("{\"name\": \"b\", \"map\": \"a\", \"format\": \"tiled\", \"classes\": {\"Mud\": \"open\"}}",
                       "t.json: $.scenes[1].classes.Mud: must be a cost 1..255 or \"blocked\", not a string");
    expect_scene_error("{\"name\": \"b\", \"map\": \"a\", \"format\": \"tiled\", \"classes\": {\"\": 2}}",
                       "t.json: $.scenes[1].classes.: a class name must be 1..127 bytes");
    expect_scene_error("{\"name\": \"b\", \"map\": \"a\", \"format\": \"tiled\", \"classes\": [\"Wall\"]}",
                       "t.json: $.scenes[1].classes: must be an object {class: cost or \"blocked\"}, not an array");
    expect_scene_error("{\"name\": \"b\", \"map\": \"a\", \"format\": \"tiled\", \"classes\": {\"W\": 2, \"W\": 3}}",
                       "t.json: $.scenes[1].classes.W: key given more than once");
    expect_scene_error("{\"name\": \"b\", \"map\": \"a\", \"format\": \"movingai\", \"classes\": {\"W\": 2}}",
                       "t.json: $.scenes[1].classes: applies to tiled maps only");
    expect_scene_error("{\"name\": \"b\", \"map\": \"a\", \"format\": \"ldtk\", \"classes\": {\"W\": 2}}",
                       "t.json: $.scenes[1].classes: applies to tiled maps only");
}

static void test_scene_tiled_layer(void **state)
{
    (void)state;
    pd_conf c;
    char err[256] = "";
    int rc = load("{\"scenes\": [{\"name\": \"t\", \"map\": \"t.tmj\", \"format\": \"tiled\","
                  " \"layer\": \"walls\"}, {\"name\": \"u\", \"map\": \"u.json\", \"format\": \"tiled\"}]}",
                  &c, err, sizeof err);
    if (rc != 0)
        print_error("%s\n", err);
    assert_int_equal(rc, 0);
    assert_int_equal(c.scenes[0].format, PD_MAP_TILED);
    assert_string_equal(c.scenes[0].tiled.layer, "walls");
    assert_string_equal(c.scenes[0].map_path, "/cfg/t.tmj");
    /* No layer: every tile layer counts. */
    assert_string_equal(c.scenes[1].tiled.layer, "");
    pd_conf_free(&c);

    /* The longest allowed name fits; one more byte does not. */
    char name[PD_TILED_MAX_NAME + 1];
    char json[512];
    memset(name, 'L', PD_TILED_MAX_NAME - 1);
    name[PD_TILED_MAX_NAME - 1] = '\0';
    snprintf(json, sizeof json,
             "{\"scenes\": [{\"name\": \"t\", \"map\": \"t.tmj\", \"format\": \"tiled\", \"layer\": \"%s\"}]}",
             name);
    assert_int_equal(load(json, &c, err, sizeof err), 0);
    assert_string_equal(c.scenes[0].tiled.layer, name);
    pd_conf_free(&c);
    memset(name, 'L', PD_TILED_MAX_NAME);
    name[PD_TILED_MAX_NAME] = '\0';
    snprintf(json, sizeof json, "{\"name\": \"b\", \"map\": \"a\", \"format\": \"tiled\", \"layer\": \"%s\"}",
             name);
    expect_scene_error(json, "t.json: $.scenes[1].layer: must be at most 127 bytes");
    expect_scene_error("{\"name\": \"b\", \"map\": \"a\", \"format\": \"tiled\", \"layer\": \"\"}",
                       "t.json: $.scenes[1].layer: must not be empty (leave it out for every tile layer)");
    expect_scene_error("{\"name\": \"b\", \"map\": \"a\", \"format\": \"tiled\", \"layer\": 3}",
                       "t.json: $.scenes[1].layer: must be a string, not a number");
    expect_scene_error("{\"name\": \"b\", \"map\": \"a\", \"format\": \"ascii\", \"layer\": \"w\"}",
                       "t.json: $.scenes[1].layer: applies to tiled maps only");
}

static void test_scene_name_length(void **state)
{
    (void)state;
    char name[PD_CONF_MAX_NAME + 1];
    char json[512];
    pd_conf c;
    char err[256];

    /* PD_CONF_MAX_NAME - 1 bytes fit... */
    memset(name, 'n', PD_CONF_MAX_NAME - 1);
    name[PD_CONF_MAX_NAME - 1] = '\0';
    snprintf(json, sizeof json, "{\"scenes\": [{\"name\": \"%s\", \"map\": \"m\", \"format\": \"ascii\"}]}", name);
    assert_int_equal(load(json, &c, err, sizeof err), 0);
    assert_string_equal(c.scenes[0].name, name);
    pd_conf_free(&c);

    /* ...one more does not. */
    memset(name, 'n', PD_CONF_MAX_NAME);
    name[PD_CONF_MAX_NAME] = '\0';
    snprintf(json, sizeof json, "{\"scenes\": [{\"name\": \"%s\", \"map\": \"m\", \"format\": \"ascii\"}]}", name);
    expect_error(json, "t.json: $.scenes[0].name: must be at most 63 bytes");
}

static void test_too_many_scenes(void **state)
{
    (void)state;
    /* Builds PD_CONF_MAX_SCENES + 1 scene entries. */
    size_t cap = (PD_CONF_MAX_SCENES + 1) * 64 + 64;
    char *json = malloc(cap);
    assert_non_null(json);
    size_t off = (size_t)snprintf(json, cap, "{\"scenes\": [");
    for (int i = 0; i <= PD_CONF_MAX_SCENES; i++)
        off += (size_t)snprintf(json + off, cap - off, "%s{\"name\": \"s%d\", \"map\": \"m\", \"format\": \"ascii\"}",
                                i ? "," : "", i);
    snprintf(json + off, cap - off, "]}");
    expect_error(json, "t.json: $.scenes: lists 1025 scenes; at most 1024 are allowed");

    /* Exactly the maximum is accepted (and each entry is checked for duplicates). */
    char *last = strrchr(json, '{');
    strcpy(last - 1, "]}");
    pd_conf c;
    char err[256] = "";
    int rc = load(json, &c, err, sizeof err);
    if (rc != 0)
        print_error("%s\n", err);
    assert_int_equal(rc, 0);
    assert_int_equal(c.n_scenes, PD_CONF_MAX_SCENES);
    assert_string_equal(c.scenes[PD_CONF_MAX_SCENES - 1].name, "s1023");
    assert_string_equal(c.scenes[5].map_path, "/cfg/m");
    pd_conf_free(&c);
    free(json);
}

static void test_long_json_path_is_marked(void **state)
{
    (void)state;
    /* An unknown key too long for the path buffer is cut off visibly. */
    char key[300];
    memset(key, 'k', sizeof key - 1);
    key[sizeof key - 1] = '\0';
    char json[400];
    snprintf(json, sizeof json, "{\"limits\": {\"%s\": 1}}", key);
    pd_conf c;
    char err[512];
    assert_int_equal(load(json, &c, err, sizeof err), -1);
    assert_memory_equal(err, "t.json: $.limits.kkk", 20);
    const char *tail = strstr(err, "...: unknown key");
    assert_non_null(tail);
    assert_string_equal(tail, "...: unknown key");
    /* The path, marker included, fills its buffer minus the terminator. */
    assert_int_equal(tail + 3 - (err + strlen("t.json: ")), 191);
}

static void test_file_errors(void **state)
{
    (void)state;
    pd_conf c;
    char err[256];
    memset(&c, 0xAB, sizeof c);
    assert_int_equal(pd_conf_load_file(PD_TEST_DATA_DIR "/no_such_conf.json", &c, err, sizeof err), -1);
    assert_string_equal(err, PD_TEST_DATA_DIR "/no_such_conf.json: cannot open: No such file or directory");
    assert_memory_equal(&c, &zero_conf, sizeof c);

    /* A file above the size cap is refused before it is parsed. */
    static const char *big = PD_BINARY_DIR "/test_conf_big.json";
    FILE *f = fopen(big, "w");
    assert_non_null(f);
    fputs("{}", f);
    assert_int_equal(fseek(f, 16L * 1024 * 1024, SEEK_SET), 0);
    fputc(' ', f);
    fclose(f);
    memset(&c, 0xAB, sizeof c);
    int rc = pd_conf_load_file(big, &c, err, sizeof err);
    remove(big);
    assert_int_equal(rc, -1);
    assert_non_null(strstr(err, ": larger than 16777216 bytes"));
    assert_memory_equal(&c, &zero_conf, sizeof c);

    memset(&c, 0xAB, sizeof c);
    assert_int_equal(pd_conf_load_file(PD_TEST_DATA_DIR, &c, err, sizeof err), -1);
    assert_string_equal(err, PD_TEST_DATA_DIR ": not a regular file");
    assert_memory_equal(&c, &zero_conf, sizeof c);

    /* A syntax error in a file names the file, line and column. */
    static const char *bad = PD_BINARY_DIR "/test_conf_bad.json";
    f = fopen(bad, "w");
    assert_non_null(f);
    fputs("{\n  \"threads\": 4,\n  \"limits\": {\"max_connections\": 10,}\n}\n", f);
    fclose(f);
    rc = pd_conf_load_file(bad, &c, err, sizeof err);
    remove(bad);
    assert_int_equal(rc, -1);
    char expected[512];
    /* The stray '}' is column 36; cJSON points just past it. */
    snprintf(expected, sizeof expected, "%s:3:37: invalid JSON", bad);
    assert_string_equal(err, expected);
}

static void test_small_error_buffers(void **state)
{
    (void)state;
    /* A short or absent error buffer truncates the message but never overflows. */
    pd_conf c;
    char err[8];
    assert_int_equal(load("{\"threads\": 999}", &c, err, sizeof err), -1);
    assert_string_equal(err, "t.json:");
    assert_int_equal(load("{\"threads\": 999}", &c, NULL, 0), -1);
    assert_int_equal(pd_conf_load_file(PD_TEST_DATA_DIR "/no_such_conf.json", &c, NULL, 0), -1);
    assert_int_equal(pd_conf_load_buffer(NULL, 0, "t.json", NULL, &c, NULL, 0), -1);
}

static void test_log_level_names(void **state)
{
    (void)state;
    static const char *names[] = { "error", "warn", "info", "debug" };
    for (int l = PD_LOG_ERROR; l <= PD_LOG_DEBUG; l++) {
        assert_string_equal(pd_log_level_name((pd_log_level)l), names[l]);
        /* Every name round-trips through the config reader. */
        char json[64];
        snprintf(json, sizeof json, "{\"log_level\": \"%s\"}", names[l]);
        pd_conf c;
        char err[256];
        assert_int_equal(load(json, &c, err, sizeof err), 0);
        assert_int_equal(c.log_level, l);
        pd_conf_free(&c);
    }
    assert_string_equal(pd_log_level_name((pd_log_level)42), "unknown");
}

/* auth: tokens with roles (literal or from the environment, an unset or
 * empty variable skipping its entry), their checks, the role a token
 * grants (an exact match only, the highest when a token is listed twice),
 * and protected mode. */
static void test_auth(void **state)
{
    (void)state;
    pd_conf c;
    char err[512];
    setenv("PD_TEST_TOKEN_SET", "from-the-environment-123", 1);
    unsetenv("PD_TEST_TOKEN_UNSET");
    setenv("PD_TEST_TOKEN_EMPTY", "", 1);
    assert_int_equal(load("{\"auth\": {\"tokens\": ["
                          "{\"token\": \"query-token-0123456789\", \"role\": \"query\"},"
                          "{\"token_env\": \"PD_TEST_TOKEN_SET\", \"role\": \"admin\"},"
                          "{\"token_env\": \"PD_TEST_TOKEN_UNSET\", \"role\": \"write\"},"
                          "{\"token_env\": \"PD_TEST_TOKEN_EMPTY\", \"role\": \"write\"},"
                          "{\"token\": \"query-token-0123456789\", \"role\": \"write\"}]}}",
                          &c, err, sizeof err),
                     0);
    assert_int_equal(c.n_tokens, 3);
    assert_int_equal(c.protected_mode, 1);
    assert_int_equal(pd_conf_token_role(&c, "query-token-0123456789", 22), PD_ROLE_WRITE);
    assert_int_equal(pd_conf_token_role(&c, "from-the-environment-123", 24), PD_ROLE_ADMIN);
    assert_int_equal(pd_conf_token_role(&c, "query-token-012345678", 21), PD_ROLE_NONE);  /* prefix */
    assert_int_equal(pd_conf_token_role(&c, "query-token-01234567890", 23), PD_ROLE_NONE); /* longer */
    assert_int_equal(pd_conf_token_role(&c, "", 0), PD_ROLE_NONE);
    /* The entry that grants it: the write one of the two. */
    assert_int_equal(pd_conf_token_find(&c, "query-token-0123456789", 22), 2);
    assert_int_equal(pd_conf_token_find(&c, "from-the-environment-123", 24), 1);
    assert_int_equal(pd_conf_token_find(&c, "query-token-012345678", 21), -1);
    assert_string_equal(pd_role_name(PD_ROLE_WRITE), "write");
    pd_conf_free(&c);

    expect_error("{\"auth\": {\"tokens\": [{\"token\": \"short\", \"role\": \"query\"}]}}",
                 "t.json: $.auth.tokens[0].token: the token must be 16..127 bytes long, not 5");
    expect_error("{\"auth\": {\"tokens\": [{\"token\": \"has a space in it, long\", \"role\": \"query\"}]}}",
                 "t.json: $.auth.tokens[0].token: the token must be printable ASCII without spaces");
    expect_error("{\"auth\": {\"tokens\": [{\"token\": \"query-token-0123456789\", \"role\": \"root\"}]}}",
                 "t.json: $.auth.tokens[0].role: must be \"query\", \"write\" or \"admin\"");
    expect_error("{\"auth\": {\"tokens\": [{\"role\": \"query\"}]}}",
                 "t.json: $.auth.tokens[0]: needs \"role\" and exactly one of \"token\" and \"token_env\"");
    expect_error("{\"auth\": {\"protected_mode\": 1}}",
                 "t.json: $.auth.protected_mode: must be true or false, not a number");
    expect_error("{\"auth\": {\"secret\": 1}}", "t.json: $.auth.secret: unknown key");

    /* Protected mode: off loopback with no token is refused, for either
     * port; a token, loopback, or protected_mode false lets it be. */
    static const struct {
        const char *json;
        int ok;
    } cases[] = {
        {"{\"listen\": \"0.0.0.0:1\"}", 0},
        {"{\"listen\": \"[::]:1\"}", 0},
        {"{\"listen\": \"127.0.0.1:1\", \"metrics_listen\": \"0.0.0.0:2\"}", 0},
        {"{\"listen\": \"127.0.0.1:1\", \"metrics_listen\": \"127.0.0.1:2\"}", 1},
        {"{\"listen\": \"[::1]:1\"}", 1},
        {"{\"listen\": \"0.0.0.0:1\", \"auth\": {\"protected_mode\": false}}", 1},
        {"{\"listen\": \"0.0.0.0:1\", \"auth\": {\"tokens\": [{\"token\": \"query-token-0123456789\", "
         "\"role\": \"query\"}]}}", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(load(cases[i].json, &c, err, sizeof err), 0);
        int rc = pd_conf_check_protected(&c, err, sizeof err);
        if ((rc == 0) != cases[i].ok)
            fail_msg("%s: protected mode says %d (%s)", cases[i].json, rc, rc ? err : "");
        if (rc != 0)
            assert_non_null(strstr(err, "protected mode"));
        pd_conf_free(&c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_object_gives_defaults),
        cmocka_unit_test(test_full_file),
        cmocka_unit_test(test_agent_check_key),
        cmocka_unit_test(test_bundled_default_config),
        cmocka_unit_test(test_map_path_resolution),
        cmocka_unit_test(test_config_file_in_working_directory),
        cmocka_unit_test(test_listen_accepted),
        cmocka_unit_test(test_address_format_round_trip),
        cmocka_unit_test(test_listen_errors),
        cmocka_unit_test(test_reservation_keys),
        cmocka_unit_test(test_log_keys),
        cmocka_unit_test(test_top_level_errors),
        cmocka_unit_test(test_journal_keys),
        cmocka_unit_test(test_json_syntax_errors),
        cmocka_unit_test(test_limit_errors),
        cmocka_unit_test(test_scene_errors),
        cmocka_unit_test(test_scene_costs),
        cmocka_unit_test(test_scene_tiled_layer),
        cmocka_unit_test(test_scene_tiled_classes),
        cmocka_unit_test(test_scene_name_length),
        cmocka_unit_test(test_too_many_scenes),
        cmocka_unit_test(test_long_json_path_is_marked),
        cmocka_unit_test(test_file_errors),
        cmocka_unit_test(test_small_error_buffers),
        cmocka_unit_test(test_log_level_names),
        cmocka_unit_test(test_auth),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
