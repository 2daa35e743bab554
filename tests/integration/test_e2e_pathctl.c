/*
 * test_e2e_pathctl.c - the pathctl CLI against the real daemon: what a
 * newcomer runs after `make run`. The built binary is run through popen and
 * its --json output parsed with cJSON; exit statuses follow pathctl --help
 * (0 for OK/PARTIAL, 1 for other answers).
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "harness.h"

/* Largest pathctl output read back (a den520d path as JSON is ~10 KiB). */
#define T_OUTPUT_MAX (1024 * 1024)

static int setup(void **state)
{
    return pdi_fixture_start(state, NULL);
}

/* Runs pathctl with args; returns its exit status, output in *out (heap). */
static int run_pathctl(const pdi_daemon *d, const char *args, char **out)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' --server %s --timeout %d %s", pdi_pathctl_binary(), d->addr,
             PDI_CALL_TIMEOUT_MS, args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char *buf = malloc(T_OUTPUT_MAX + 1);
    assert_non_null(buf);
    size_t len = fread(buf, 1, T_OUTPUT_MAX, p);
    buf[len] = '\0';
    int st = pclose(p);
    *out = buf;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static double number(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

static const char *string(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    assert_true(cJSON_IsString(v));
    return v->valuestring;
}

static void assert_cell(const cJSON *pair, int32_t x, int32_t y)
{
    assert_true(cJSON_IsArray(pair));
    assert_int_equal(cJSON_GetArraySize(pair), 2);
    assert_int_equal((int32_t)cJSON_GetArrayItem(pair, 0)->valuedouble, x);
    assert_int_equal((int32_t)cJSON_GetArrayItem(pair, 1)->valuedouble, y);
}

static void test_path_json(void **state)
{
    pdi_daemon *d = *state;
    pdi_scenario sc[2];
    assert_int_equal(pdi_load_scenarios(sc, 2), 2);
    char args[256], *out;
    snprintf(args, sizeof args, "--json path --scene den520d --from %d,%d --to %d,%d", sc[1].sx, sc[1].sy,
             sc[1].gx, sc[1].gy);
    assert_int_equal(run_pathctl(d, args, &out), 0);
    cJSON *o = cJSON_Parse(out);
    if (!o)
        fail_msg("pathctl printed no JSON: %s", out);
    assert_string_equal(string(o, "status"), "OK");
    assert_true(fabs(number(o, "cost") - sc[1].optimal) <= sc[1].tolerance);
    assert_true(number(o, "expansions") >= 1);
    assert_true(number(o, "version") >= 1);
    const cJSON *wp = cJSON_GetObjectItemCaseSensitive(o, "waypoints");
    assert_true(cJSON_IsArray(wp));
    int n = cJSON_GetArraySize(wp);
    assert_true(n >= 2);
    assert_cell(cJSON_GetArrayItem(wp, 0), sc[1].sx, sc[1].sy);
    assert_cell(cJSON_GetArrayItem(wp, n - 1), sc[1].gx, sc[1].gy);
    cJSON_Delete(o);
    free(out);

    /* World coordinates in, cells out (rooms: origin (-10.5, 4), cell 0.5). */
    assert_int_equal(run_pathctl(d, "--json path --scene rooms --world --from -9.8,4.6 --to -5.01,8.74", &out), 0);
    o = cJSON_Parse(out);
    assert_non_null(o);
    assert_string_equal(string(o, "status"), "OK");
    wp = cJSON_GetObjectItemCaseSensitive(o, "waypoints");
    n = cJSON_GetArraySize(wp);
    assert_cell(cJSON_GetArrayItem(wp, 0), 1, 1);
    assert_cell(cJSON_GetArrayItem(wp, n - 1), 10, 9);
    cJSON_Delete(o);
    free(out);

    /* A failed search: status named, exit status 1. */
    assert_int_equal(run_pathctl(d, "--json path --scene rooms --from 1,1 --to 17,4", &out), 1);
    o = cJSON_Parse(out);
    assert_non_null(o);
    assert_string_equal(string(o, "status"), "NO_PATH");
    cJSON_Delete(o);
    free(out);
}

static void test_scenes_info_ping_stats(void **state)
{
    pdi_daemon *d = *state;
    char *out;
    /* Human-readable: one scene a line, its name first, sorted. */
    assert_int_equal(run_pathctl(d, "scenes", &out), 0);
    const char *want[] = {"den520d", "rooms", "serpent"};
    const char *line = out;
    for (size_t i = 0; i < 3; i++) {
        assert_true(strncmp(line, want[i], strlen(want[i])) == 0);
        line = strchr(line, '\n');
        assert_non_null(line);
        line++;
    }
    free(out);

    assert_int_equal(run_pathctl(d, "--json info rooms", &out), 0);
    cJSON *o = cJSON_Parse(out);
    assert_non_null(o);
    assert_string_equal(string(o, "name"), "rooms");
    assert_true(number(o, "width") == 24 && number(o, "height") == 12);
    assert_true(number(o, "cell_size") == 0.5);
    const cJSON *origin = cJSON_GetObjectItemCaseSensitive(o, "origin");
    assert_true(cJSON_GetArrayItem(origin, 0)->valuedouble == -10.5);
    assert_true(cJSON_GetArrayItem(origin, 1)->valuedouble == 4.0);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(o, "unit_sizes")), 2);
    cJSON_Delete(o);
    free(out);

    assert_int_equal(run_pathctl(d, "--json info atlantis", &out), 1);
    free(out);
    assert_int_equal(run_pathctl(d, "ping", &out), 0);
    free(out);
    assert_int_equal(run_pathctl(d, "--json stats", &out), 0);
    o = cJSON_Parse(out);
    assert_non_null(o);
    assert_string_equal(string(o, "status"), "OK");
    cJSON_Delete(o);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_path_json, setup, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_scenes_info_ping_stats, setup, pdi_fixture_stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
