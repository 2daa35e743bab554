/*
 * test_ldtk.c - LDtk IntGrid levels (server/conf/pd_ldtk.c) and the ldtk
 * scene keys.
 *
 * tests/data/scene6_keep.ldtk is a project written by hand from the LDtk
 * JSON schema (ldtk.io/json): two levels, the second with two IntGrid
 * layers, an entity layer and a tile layer, placed at world (256, -128) px.
 * Each level is compared cell by cell with the grid it is meant to give;
 * refusals name the layer and the cell.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "grid_picture.h"
#include "pd_conf.h"
#include "pd_ldtk.h"
#include "pd_scene.h"

/* 1 wall (blocked), 2 shallow water (cost 3), 3 sand (cost 2). */
static void keep_rules(pd_ldtk_rules *r)
{
    memset(r, 0, sizeof *r);
    r->cost[1] = PD_CELL_BLOCKED;
    r->cost[2] = 3;
    r->cost[3] = 2;
    r->cost_set[1] = r->cost_set[2] = r->cost_set[3] = 1;
}

static char *read_keep(size_t *len)
{
    FILE *f = fopen(PD_TEST_DATA_DIR "/scene6_keep.ldtk", "rb");
    assert_non_null(f);
    static char text[8192];
    *len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[*len] = '\0';
    return text;
}

static void test_levels_and_layers(void **state)
{
    (void)state;
    size_t len;
    const char *text = read_keep(&len);
    pd_ldtk_rules r;
    keep_rules(&r);
    double ox, oy;
    char err[256] = "";
    /* No level named: the first; its world position is (0, 0). */
    pd_grid *g = pd_ldtk_load(text, len, &r, &ox, &oy, err, sizeof err);
    if (!g)
        fail_msg("%s", err);
    static const char *const courtyard[] = { "####", "....", "####" };
    grid_picture_check(g, courtyard, 3);
    assert_true(ox == 0 && oy == 0);
    pd_grid_destroy(g);
    /* "Keep": both IntGrid layers, blocked wins, else the larger cost;
     * world (256, -128) px is (16, -8) cells of 16 px. */
    snprintf(r.level, sizeof r.level, "Keep");
    g = pd_ldtk_load(text, len, &r, &ox, &oy, err, sizeof err);
    if (!g)
        fail_msg("%s", err);
    static const char *const keep[] = { "#33#", "22.3", "#.##" };
    grid_picture_check(g, keep, 3);
    assert_true(ox == 16 && oy == -8);
    pd_grid_destroy(g);
    snprintf(r.layer, sizeof r.layer, "Terrain");
    g = pd_ldtk_load(text, len, &r, &ox, &oy, err, sizeof err);
    static const char *const terrain[] = { ".33.", "22.3", "..2." };
    grid_picture_check(g, terrain, 3);
    pd_grid_destroy(g);
}

static void test_errors(void **state)
{
    (void)state;
    size_t len;
    const char *text = read_keep(&len);
    pd_ldtk_rules r;
    keep_rules(&r);
    double ox, oy;
    char err[256];
    snprintf(r.level, sizeof r.level, "Keep");
    r.cost_set[3] = 0;
    assert_null(pd_ldtk_load(text, len, &r, &ox, &oy, err, sizeof err));
    assert_string_equal(err, "$.levels[1].layerInstances[2] (layer \"Terrain\"): cell (0, 1): value 3 has no entry in costs");
    keep_rules(&r);
    snprintf(r.level, sizeof r.level, "Attic");
    assert_null(pd_ldtk_load(text, len, &r, &ox, &oy, err, sizeof err));
    assert_string_equal(err, "$.levels: no level with identifier \"Attic\"");
    snprintf(r.level, sizeof r.level, "Keep");
    snprintf(r.layer, sizeof r.layer, "Floor");
    assert_null(pd_ldtk_load(text, len, &r, &ox, &oy, err, sizeof err));
    assert_string_equal(err, "$.levels[1].layerInstances: no IntGrid layer named \"Floor\"");
    static const char *const bad[][2] = {
        { "{\"levels\": [{\"identifier\": \"A\", \"layerInstances\": null, \"externalRelPath\": \"p/A.ldtkl\"}]}",
          "$.levels[0].layerInstances: the level is saved in its own file (p/A.ldtkl); save the project without \"separate level files\"" },
        { "{\"levels\": [{\"layerInstances\": [{\"__identifier\": \"C\", \"__type\": \"IntGrid\", \"__cWid\": 2, \"__cHei\": 1,"
          " \"__gridSize\": 8, \"intGridCsv\": [0]}]}]}",
          "$.levels[0].layerInstances[0] (layer \"C\").intGridCsv: has 1 values, the layer needs 2 (2 x 1)" },
        { "{\"levels\": [{\"layerInstances\": [{\"__identifier\": \"C\", \"__type\": \"IntGrid\", \"__cWid\": 2, \"__cHei\": 1,"
          " \"__gridSize\": 8, \"__pxTotalOffsetX\": 4, \"intGridCsv\": [0, 0]}]}]}",
          "$.levels[0].layerInstances[0] (layer \"C\"): is offset by (4, 0) px, not whole cells of 8 px" },
        { "{\"levels\": [{\"layerInstances\": [{\"__identifier\": \"C\", \"__type\": \"IntGrid\", \"__cWid\": 2, \"__cHei\": 1,"
          " \"__gridSize\": 8, \"intGridCsv\": [0, -1]}]}]}",
          "$.levels[0].layerInstances[0] (layer \"C\"): cell (1, 0): not an IntGrid value" },
        { "{\"levels\": []}", "$.levels: no level" },
        { "[]", "$: must be an object, not an array" },
        { "{\"levels\": ", "1:11: invalid JSON" },
    };
    r.level[0] = r.layer[0] = '\0';
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_null(pd_ldtk_load(bad[i][0], strlen(bad[i][0]), &r, &ox, &oy, err, sizeof err));
        if (strcmp(err, bad[i][1]) != 0)
            fail_msg("expected: %s\ngot:      %s", bad[i][1], err);
    }
    /* Multi-world projects keep their levels in "worlds". */
    const char *worlds = "{\"levels\": [], \"worlds\": [{\"levels\": [{\"identifier\": \"W\", \"worldX\": 8, \"worldY\": 16,"
                         " \"layerInstances\": [{\"__identifier\": \"C\", \"__type\": \"IntGrid\", \"__cWid\": 2,"
                         " \"__cHei\": 1, \"__gridSize\": 8, \"intGridCsv\": [1, 0]}]}]}]}";
    pd_grid *g = pd_ldtk_load(worlds, strlen(worlds), &r, &ox, &oy, err, sizeof err);
    assert_non_null(g);
    static const char *const w[] = { "#." };
    grid_picture_check(g, w, 1);
    assert_true(ox == 1 && oy == 2);
    pd_grid_destroy(g);
}

/* Through the config: "costs" by value, "level", and the world position
 * carried into the origin (cells x cell_size). */
static void test_config_scene(void **state)
{
    (void)state;
    const char *json =
        "{\"scenes\": [{\"name\": \"keep\", \"map\": \"scene6_keep.ldtk\", \"format\": \"ldtk\","
        " \"level\": \"Keep\", \"costs\": {\"1\": \"blocked\", \"2\": 3, \"3\": 2},"
        " \"origin\": [1, 1], \"cell_size\": 0.5}]}";
    pd_conf c;
    char err[512] = "";
    assert_int_equal(pd_conf_load_buffer(json, strlen(json), "t.json", PD_TEST_DATA_DIR, &c, err, sizeof err), 0);
    pd_scene *s = pd_scene_load(&c.scenes[0], err, sizeof err);
    if (!s)
        fail_msg("%s", err);
    static const char *const keep[] = { "#33#", "22.3", "#.##" };
    grid_picture_check(s->grid, keep, 3);
    assert_true(s->origin_x == 1 + 16 * 0.5 && s->origin_y == 1 - 8 * 0.5);
    pd_scene_release(s);
    pd_conf_free(&c);
    static const char *const bad[][2] = {
        { "{\"scenes\": [{\"name\": \"k\", \"map\": \"m\", \"format\": \"ldtk\", \"costs\": {\"0\": 2}}]}",
          "t.json: $.scenes[0].costs.0: a key must be an IntGrid value 1..255" },
        { "{\"scenes\": [{\"name\": \"k\", \"map\": \"m\", \"format\": \"ldtk\", \"colliders\": false}]}",
          "t.json: $.scenes[0].colliders: applies to tiled maps only" },
        { "{\"scenes\": [{\"name\": \"k\", \"map\": \"m\", \"format\": \"tiled\", \"level\": \"A\"}]}",
          "t.json: $.scenes[0].level: applies to ldtk maps only" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(pd_conf_load_buffer(bad[i][0], strlen(bad[i][0]), "t.json", NULL, &c, err, sizeof err), -1);
        if (strcmp(err, bad[i][1]) != 0)
            fail_msg("expected: %s\ngot:      %s", bad[i][1], err);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_levels_and_layers),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_config_scene),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
