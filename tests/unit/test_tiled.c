/*
 * test_tiled.c - the Tiled map reader (server/conf/pd_tiled.c) on JSON maps;
 * test_tiled_formats.c covers .tmx, the encodings and the rest of issue 13.
 *
 * The bundled courtyard map is compared cell by cell with a hand-drawn ASCII
 * picture of it; small inline maps then pin down layer selection (named,
 * every layer, inside groups, object layers adding nothing), tile properties (blocked,
 * cost, both, neither, several tilesets), the flip flags, and every refusal
 * with the JSON path it names. Every error case also runs with err == NULL.
 * The small maps draw walls with untagged tiles, read with untagged_tiles
 * "blocked"; test_tile_properties also reads its untagged tiles with the
 * default, "open".
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pd_mapfile.h"
#include "pd_tiled.h"

/* Room for the inline maps below. */
#define MAP_TEXT_MAX 8192

/* The default rules with only the layer chosen (NULL or "": every tile
 * layer counts) and untagged_open as given, and no directory for external
 * tilesets. */
static pd_grid *pd_tiled_parse_as(const char *buf, size_t len, const char *layer, int untagged_open,
                                  char *err, size_t errlen)
{
    pd_tiled_rules r;
    pd_tiled_rules_default(&r);
    if (layer)
        snprintf(r.layer, sizeof r.layer, "%s", layer);
    r.untagged_open = untagged_open;
    return pd_tiled_load(buf, len, &r, NULL, NULL, NULL, NULL, err, errlen);
}

/* The small maps below draw walls with tiles nothing decides (a bare
 * tileset's), so they are read with untagged_tiles "blocked"; the default,
 * "open", is what the courtyard (as the demo config serves it) and
 * test_tile_properties's untagged tiles are read with. */
static pd_grid *pd_tiled_parse(const char *buf, size_t len, const char *layer, char *err,
                               size_t errlen)
{
    return pd_tiled_parse_as(buf, len, layer, 0, err, errlen);
}

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long size = ftell(f);
    assert_true(size >= 0);
    rewind(f);
    char *buf = malloc((size_t)size + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)size, f), (size_t)size);
    buf[size] = '\0';
    fclose(f);
    *len = (size_t)size;
    return buf;
}

static pd_grid *parse_ok(const char *json, const char *layer)
{
    char err[256] = "";
    pd_grid *g = pd_tiled_parse(json, strlen(json), layer, err, sizeof err);
    if (!g)
        fail_msg("refused: %s\n--- input ---\n%s", err, json);
    return g;
}

static void expect_error(const char *json, const char *layer, const char *expected)
{
    char err[256];
    memset(err, 'x', sizeof err);
    pd_grid *g = pd_tiled_parse(json, strlen(json), layer, err, sizeof err);
    if (g || strcmp(err, expected) != 0)
        print_error("expected: %s\ngot:      %s\n--- input ---\n%s\n", expected,
                    g ? "<accepted>" : err, json);
    pd_grid_destroy(g);
    assert_null(g);
    assert_string_equal(err, expected);
    /* No error buffer is fine too. */
    assert_null(pd_tiled_parse(json, strlen(json), layer, NULL, 0));
}

/* Asserts that g's cells, row by row, are `want` (w*h values). */
static void expect_cells(const pd_grid *g, int32_t w, int32_t h, const uint8_t *want)
{
    assert_int_equal(g->width, w);
    assert_int_equal(g->height, h);
    for (int32_t y = 0; y < h; y++) {
        for (int32_t x = 0; x < w; x++) {
            if (pd_grid_get(g, x, y) != want[y * w + x])
                fail_msg("cell (%d, %d) is %u, want %u", x, y, pd_grid_get(g, x, y),
                         want[y * w + x]);
        }
    }
}

/* A 3 x 2 map with the given layers and tilesets (JSON array bodies). */
static const char *map3x2(char *buf, const char *layers, const char *tilesets)
{
    snprintf(buf, MAP_TEXT_MAX,
             "{\"type\": \"map\", \"orientation\": \"orthogonal\", \"infinite\": false,"
             " \"width\": 3, \"height\": 2, \"tilewidth\": 16, \"tileheight\": 16,"
             " \"layers\": [%s], \"tilesets\": [%s]}",
             layers, tilesets);
    return buf;
}

/* One embedded tileset (firstgid 1, 8 tiles): id 0 has no properties, 1 is
 * blocked=true, 2 is blocked=false, 3 costs 7, 4 costs 9 but is blocked,
 * 5 costs 4 and is explicitly not blocked, 6 has an unrelated property. */
static const char *tileset_props =
    "{\"firstgid\": 1, \"name\": \"t\", \"tilecount\": 8, \"tiles\": ["
    " {\"id\": 1, \"properties\": [{\"name\": \"blocked\", \"type\": \"bool\", \"value\": true}]},"
    " {\"id\": 2, \"properties\": [{\"name\": \"blocked\", \"type\": \"bool\", \"value\": false}]},"
    " {\"id\": 3, \"properties\": [{\"name\": \"cost\", \"type\": \"int\", \"value\": 7}]},"
    " {\"id\": 4, \"properties\": [{\"name\": \"cost\", \"type\": \"int\", \"value\": 9},"
    "                              {\"name\": \"blocked\", \"type\": \"bool\", \"value\": true}]},"
    " {\"id\": 5, \"properties\": [{\"name\": \"blocked\", \"value\": false},"
    "                              {\"name\": \"cost\", \"value\": 4}]},"
    " {\"id\": 6, \"properties\": [{\"name\": \"colour\", \"type\": \"string\", \"value\": \"red\"}]},"
    " {\"id\": 7}"
    "]}";

static void test_courtyard_matches_its_picture(void **state)
{
    (void)state;
    size_t len = 0;
    char *json = read_all(PD_SOURCE_DIR "/config/scenes/courtyard.tmj", &len);
    char err[256] = "";
    pd_grid *g = pd_tiled_parse_as(json, len, "walls", 1, err, sizeof err);
    if (!g)
        fail_msg("%s", err);
    size_t plen = 0;
    char *picture = read_all(PD_TEST_DATA_DIR "/scene4_courtyard.txt", &plen);
    pd_parse_error perr;
    pd_grid *want = pd_map_parse_ascii(picture, plen, &perr);
    assert_non_null(want);
    assert_int_equal(g->width, 24);
    assert_int_equal(g->height, 16);
    assert_int_equal(want->width, g->width);
    assert_int_equal(want->height, g->height);
    for (int32_t y = 0; y < g->height; y++) {
        for (int32_t x = 0; x < g->width; x++) {
            if (pd_grid_get(g, x, y) != pd_grid_get(want, x, y))
                fail_msg("courtyard (%d, %d) is %u, the picture says %u", x, y,
                         pd_grid_get(g, x, y), pd_grid_get(want, x, y));
        }
    }
    /* The mud patch makes the grid non-uniform. */
    assert_int_equal(g->uniform_cost, 0);
    assert_int_equal(pd_grid_get(g, 3, 11), 3);
    pd_grid_destroy(g);

    /* Without a layer name every tile layer counts: the decor layer's
     * flowers say blocked=false, so the walls decide alone. */
    g = pd_tiled_parse_as(json, len, NULL, 1, err, sizeof err);
    assert_non_null(g);
    for (int32_t y = 0; y < g->height; y++) {
        for (int32_t x = 0; x < g->width; x++)
            assert_int_equal(pd_grid_get(g, x, y), pd_grid_get(want, x, y));
    }
    pd_grid_destroy(g);
    /* The object layer "spawns" is not a tile layer. */
    char msg[256];
    assert_null(pd_tiled_parse(json, len, "spawns", msg, sizeof msg));
    assert_string_equal(msg, "$.layers: no tile layer named \"spawns\"");
    pd_grid_destroy(want);
    free(picture);
    free(json);
}

static void test_gids_need_a_tileset(void **state)
{
    (void)state;
    char buf[MAP_TEXT_MAX];
    pd_grid *g = parse_ok(map3x2(buf, "{\"type\": \"tilelayer\", \"name\": \"w\", \"data\": [0, 0, 0, 0, 0, 0]}", ""),
                          NULL);
    static const uint8_t open[] = { 1, 1, 1, 1, 1, 1 };
    expect_cells(g, 3, 2, open);
    assert_int_equal(g->uniform_cost, 1);
    pd_grid_destroy(g);
    /* A tile no tileset holds is not guessed at. */
    expect_error(map3x2(buf, "{\"type\": \"tilelayer\", \"name\": \"w\", \"data\": [0, 0, 0, 0, 0, 7]}", ""), NULL,
                 "$.layers[0] (layer \"w\"): cell (2, 1): gid 7 is beyond every tileset");
    /* An explicit "csv" encoding and an empty compression are the same thing. */
    g = parse_ok(map3x2(buf, "{\"type\": \"tilelayer\", \"name\": \"w\", \"encoding\": \"csv\","
                             " \"compression\": \"\", \"width\": 3, \"height\": 2,"
                             " \"data\": [0, 1, 0, 3, 0, 2]}", "{\"firstgid\": 1, \"tilecount\": 3}"), "w");
    static const uint8_t want[] = { 1, 0, 1, 0, 1, 0 };
    expect_cells(g, 3, 2, want);
    pd_grid_destroy(g);
}

static void test_layer_selection(void **state)
{
    (void)state;
    char buf[MAP_TEXT_MAX];
    const char *layers =
        "{\"type\": \"objectgroup\", \"name\": \"b\", \"objects\": []},"
        "{\"type\": \"imagelayer\", \"name\": \"sky\", \"image\": \"sky.png\"},"
        "{\"type\": \"tilelayer\", \"name\": \"a\", \"data\": [1, 0, 0, 0, 0, 0]},"
        "{\"type\": \"group\", \"name\": \"g\", \"layers\": ["
        "  {\"type\": \"group\", \"name\": \"inner\", \"layers\": ["
        "    {\"type\": \"tilelayer\", \"name\": \"deep\", \"data\": [0, 0, 1, 0, 0, 0]}]},"
        "  {\"type\": \"tilelayer\", \"name\": \"b\", \"data\": [0, 1, 0, 0, 0, 0]}]},"
        "{\"type\": \"tilelayer\", \"name\": \"b\", \"data\": [0, 0, 0, 1, 0, 0]}";
    map3x2(buf, layers, "{\"firstgid\": 1, \"tilecount\": 1}");
    static const uint8_t all[] = { 0, 0, 0, 0, 1, 1 };
    static const uint8_t named_b[] = { 1, 0, 1, 0, 1, 1 };
    static const uint8_t deep[] = { 1, 1, 0, 1, 1, 1 };
    /* No name: every tile layer, groups entered; a tile in any blocks. The
     * object and image layers add nothing. */
    pd_grid *g = parse_ok(buf, NULL);
    expect_cells(g, 3, 2, all);
    pd_grid_destroy(g);
    g = parse_ok(buf, "");
    expect_cells(g, 3, 2, all);
    pd_grid_destroy(g);
    /* A name: every tile layer with it, in groups too (the object layer
     * called "b" adds nothing). */
    g = parse_ok(buf, "b");
    expect_cells(g, 3, 2, named_b);
    pd_grid_destroy(g);
    g = parse_ok(buf, "deep");
    expect_cells(g, 3, 2, deep);
    pd_grid_destroy(g);
    /* Names match exactly. */
    expect_error(buf, "B", "$.layers: no tile layer named \"B\"");
    expect_error(buf, "dee", "$.layers: no tile layer named \"dee\"");
    expect_error(buf, "g", "$.layers: no tile layer named \"g\"");
    expect_error(map3x2(buf, "{\"type\": \"objectgroup\", \"name\": \"o\", \"objects\": []}", ""), NULL,
                 "$.layers: no tile layer");
    expect_error(map3x2(buf, "", ""), NULL, "$.layers: no tile layer");
}

/* The 3 x 2 map of `layer` over tileset_props, read with the default rules
 * (untagged tiles open), gives `want`. */
static void expect_open_by_default(const char *layer, const uint8_t want[6])
{
    char buf[MAP_TEXT_MAX], err[256] = "";
    map3x2(buf, layer, tileset_props);
    pd_grid *g = pd_tiled_parse_as(buf, strlen(buf), NULL, 1, err, sizeof err);
    if (!g)
        fail_msg("%s", err);
    expect_cells(g, 3, 2, want);
    pd_grid_destroy(g);
}

static void test_tile_properties(void **state)
{
    (void)state;
    char buf[MAP_TEXT_MAX];
    char layer[256];
    /* gids 1..8 are tile ids 0..7 of tileset_props. */
    snprintf(layer, sizeof layer, "{\"type\": \"tilelayer\", \"name\": \"w\", \"data\": [1, 2, 3, 4, 5, 6]}");
    pd_grid *g = parse_ok(map3x2(buf, layer, tileset_props), NULL);
    static const uint8_t want[] = { 0, 0, 1, 7, 0, 4 };
    expect_cells(g, 3, 2, want);
    assert_int_equal(g->uniform_cost, 0);
    pd_grid_destroy(g);

    snprintf(layer, sizeof layer, "{\"type\": \"tilelayer\", \"name\": \"w\", \"data\": [7, 8, 0, 0, 3, 3]}");
    g = parse_ok(map3x2(buf, layer, tileset_props), NULL);
    /* 7: unrelated property only -> blocked; 8: no properties -> blocked. */
    static const uint8_t want2[] = { 0, 0, 1, 1, 1, 1 };
    expect_cells(g, 3, 2, want2);
    pd_grid_destroy(g);
    /* By default (untagged_tiles "open") those tiles, and tile 0, are open. */
    static const uint8_t want2_open[] = { 1, 1, 1, 1, 1, 1 };
    expect_open_by_default(layer, want2_open);
    static const uint8_t want_open[] = { 1, 0, 1, 7, 0, 4 };
    expect_open_by_default("{\"type\": \"tilelayer\", \"name\": \"w\", \"data\": [1, 2, 3, 4, 5, 6]}",
                           want_open);
    /* 9: past the tileset's 8 tiles. */
    snprintf(layer, sizeof layer, "{\"type\": \"tilelayer\", \"name\": \"w\", \"data\": [7, 8, 9, 0, 3, 3]}");
    expect_error(map3x2(buf, layer, tileset_props), NULL,
                 "$.layers[0] (layer \"w\"): cell (2, 0): gid 9 is beyond every tileset");

    /* Two tilesets, listed out of order: a gid belongs to the one with the
     * largest firstgid not above it. */
    const char *two =
        "{\"firstgid\": 10, \"tiles\": [{\"id\": 1, \"properties\": [{\"name\": \"cost\", \"type\": \"int\", \"value\": 2}]}]},"
        "{\"firstgid\": 1, \"tiles\": [{\"id\": 1, \"properties\": [{\"name\": \"cost\", \"type\": \"int\", \"value\": 5}]},"
        "                              {\"id\": 10, \"properties\": [{\"name\": \"cost\", \"type\": \"int\", \"value\": 8}]}]}";
    snprintf(layer, sizeof layer, "{\"type\": \"tilelayer\", \"name\": \"w\", \"data\": [2, 11, 10, 0, 12, 1]}");
    g = parse_ok(map3x2(buf, layer, two), NULL);
    /* gid 11 is tile 1 of the second set (cost 2), not tile 10 of the first. */
    static const uint8_t want3[] = { 5, 2, 0, 1, 0, 0 };
    expect_cells(g, 3, 2, want3);
    pd_grid_destroy(g);
}

static void test_flip_flags_are_stripped(void **state)
{
    (void)state;
    char buf[MAP_TEXT_MAX];
    /* gid 4 (cost 7) with each flag, all four flags, and flags on gid 0. */
    const char *layer =
        "{\"type\": \"tilelayer\", \"name\": \"w\", \"data\":"
        " [2147483652, 1073741828, 536870916, 268435460, 4026531844, 2147483648]}";
    pd_grid *g = parse_ok(map3x2(buf, layer, tileset_props), NULL);
    static const uint8_t want[] = { 7, 7, 7, 7, 7, 1 };
    expect_cells(g, 3, 2, want);
    pd_grid_destroy(g);
    /* All flags on the set's last tile (id 7, untagged: blocked). */
    layer = "{\"type\": \"tilelayer\", \"name\": \"w\", \"data\": [4026531848, 3, 0, 0, 0, 0]}";
    g = parse_ok(map3x2(buf, layer, tileset_props), NULL);
    static const uint8_t want2[] = { 0, 1, 1, 1, 1, 1 };
    expect_cells(g, 3, 2, want2);
    pd_grid_destroy(g);
}

static void test_map_errors(void **state)
{
    (void)state;
    char buf[MAP_TEXT_MAX];
    const char *layer = "{\"type\": \"tilelayer\", \"name\": \"w\", \"data\": [0, 0, 0, 0, 0, 0]}";
    expect_error("{\"width\": 3,\n \"height\": }", NULL, "2:12: invalid JSON");
    expect_error("{} x", NULL, "1:4: unexpected text after the JSON document");
    expect_error("[1]", NULL, "$: must be an object, not an array");
    expect_error("{\"type\": \"tileset\", \"width\": 3, \"height\": 2, \"layers\": []}", NULL,
                 "$.type: is \"tileset\"; a scene needs a map (type \"map\")");
    expect_error("{\"orientation\": \"isometric\", \"width\": 3, \"height\": 2, \"layers\": []}", NULL,
                 "$.orientation: is \"isometric\"; only orthogonal maps are supported "
                 "(isometric, staggered and hexagonal are not)");
    expect_error("{\"orientation\": 1, \"width\": 3, \"height\": 2, \"layers\": []}", NULL,
                 "$.orientation: must be a string, not a number");
    expect_error("{\"infinite\": true, \"width\": 3, \"height\": 2, \"layers\": []}", NULL,
                 "$.layers: no tile layer");
    expect_error("{\"infinite\": 0, \"width\": 3, \"height\": 2, \"layers\": []}", NULL,
                 "$.infinite: must be a boolean, not a number");
    expect_error("{\"height\": 2, \"layers\": []}", NULL, "$.width: is required");
    expect_error("{\"width\": 0, \"height\": 2, \"layers\": []}", NULL, "$.width: must be in 1..16384");
    expect_error("{\"width\": 3, \"height\": 16385, \"layers\": []}", NULL, "$.height: must be in 1..16384");
    expect_error("{\"width\": 3, \"height\": 2.5, \"layers\": []}", NULL,
                 "$.height: must be an integer, not a number");
    expect_error("{\"width\": \"3\", \"height\": 2, \"layers\": []}", NULL,
                 "$.width: must be an integer, not a string");
    expect_error("{\"width\": 3, \"height\": 2}", NULL, "$.layers: is required");
    expect_error("{\"width\": 3, \"height\": 2, \"layers\": {}}", NULL, "$.layers: must be an array, not an object");

    /* Malformed layers. */
    expect_error(map3x2(buf, "3", ""), NULL, "$.layers[0]: must be an object, not a number");
    expect_error(map3x2(buf, "{\"name\": \"w\", \"data\": []}", ""), NULL, "$.layers[0].type: is required");
    expect_error(map3x2(buf, "{\"type\": \"tilelayer\", \"name\": 5, \"data\": []}", ""), NULL,
                 "$.layers[0].name: must be a string, not a number");
    expect_error(map3x2(buf, "{\"type\": \"group\", \"name\": \"g\"}", ""), NULL,
                 "$.layers[0] (layer \"g\").layers: is required in a group layer");
    expect_error(map3x2(buf, "{\"type\": \"group\", \"name\": \"g\", \"layers\": [{\"type\": \"tilelayer\"}]}", ""),
                 NULL, "$.layers[0] (layer \"g\").layers[0].data: is required");
    expect_error(map3x2(buf, "{\"type\": \"tilelayer\", \"data\": [0, 0, 0, 0, 0]}", ""), NULL,
                 "$.layers[0].data: has 5 gids, the layer needs 6");
    expect_error(map3x2(buf, "{\"type\": \"tilelayer\", \"data\": \"AAAA\"}", ""), NULL,
                 "$.layers[0].data: csv: expected a gid at offset 0");
    expect_error(map3x2(buf, "{\"type\": \"tilelayer\", \"data\": [0, 0, 0, -1, 0, 0]}", ""), NULL,
                 "$.layers[0].data[3]: gid must be an integer in 0..4294967295");
    expect_error(map3x2(buf, "{\"type\": \"tilelayer\", \"data\": [0, 0, 0, 0, 0, 4294967296]}", ""), NULL,
                 "$.layers[0].data[5]: gid must be an integer in 0..4294967295");
    expect_error(map3x2(buf, "{\"type\": \"tilelayer\", \"data\": [0, 1.5, 0, 0, 0, 0]}", ""), NULL,
                 "$.layers[0].data[1]: gid must be an integer in 0..4294967295");
    expect_error(map3x2(buf, "{\"type\": \"tilelayer\", \"data\": [0, \"1\", 0, 0, 0, 0]}", ""), NULL,
                 "$.layers[0].data[1]: gid must be an integer in 0..4294967295");
    expect_error(map3x2(buf, "{\"type\": \"tilelayer\", \"width\": 4, \"data\": [0, 0, 0, 0, 0, 0]}", ""), NULL,
                 "$.layers[0].width: is 4, but the map's width is 3");
    expect_error(map3x2(buf, "{\"type\": \"tilelayer\", \"height\": 1, \"data\": [0, 0, 0, 0, 0, 0]}", ""), NULL,
                 "$.layers[0].height: is 1, but the map's height is 2");
    expect_error(map3x2(buf, "{\"type\": \"tilelayer\", \"chunks\": [], \"data\": []}", ""), NULL,
                 "$.layers[0].chunks: chunks in a map that is not infinite");
    expect_error(map3x2(buf, "{\"type\": \"tilelayer\", \"encoding\": \"base64\", \"data\": \"AAAA\"}", ""), NULL,
                 "$.layers[0].data: base64: 3 bytes, the layer needs 24 (6 gids)");
    expect_error(map3x2(buf, "{\"type\": \"tilelayer\", \"encoding\": \"csv\", \"compression\": \"zlib\","
                             " \"data\": [0, 0, 0, 0, 0, 0]}", ""), NULL,
                 "$.layers[0].data: is an array, but the layer says encoding \"csv\" / compression \"zlib\"");
    /* Only the layer that is read has to be well-formed data-wise. */
    pd_grid *g = parse_ok(map3x2(buf, "{\"type\": \"tilelayer\", \"name\": \"x\", \"encoding\": \"base64\", \"data\": \"A\"},"
                                      "{\"type\": \"tilelayer\", \"name\": \"w\", \"data\": [0, 0, 0, 0, 0, 1]}",
                                  "{\"firstgid\": 1}"), "w");
    assert_int_equal(pd_grid_get(g, 2, 1), PD_CELL_BLOCKED);
    pd_grid_destroy(g);

    /* Group nesting is bounded. */
    char deep[MAP_TEXT_MAX];
    size_t n = 0;
    for (int i = 0; i < 40; i++)
        n += (size_t)snprintf(deep + n, sizeof deep - n, "{\"type\": \"group\", \"layers\": [");
    n += (size_t)snprintf(deep + n, sizeof deep - n, "%s", layer);
    for (int i = 0; i < 40; i++)
        n += (size_t)snprintf(deep + n, sizeof deep - n, "]}");
    char *big = malloc(2 * MAP_TEXT_MAX);
    assert_non_null(big);
    snprintf(big, 2 * MAP_TEXT_MAX, "{\"width\": 3, \"height\": 2, \"layers\": [%s]}", deep);
    char err[256];
    assert_null(pd_tiled_parse(big, strlen(big), NULL, err, sizeof err));
    assert_non_null(strstr(err, ": group layers nested deeper than 32"));
    free(big);

    /* The cells cap, not the file size, bounds a map. */
    const char *huge = "{\"width\": 16384, \"height\": 8193, \"layers\": [{\"type\": \"tilelayer\", \"data\": []}]}";
    assert_null(pd_tiled_parse(huge, strlen(huge), NULL, err, sizeof err));
    assert_string_equal(err, "$: 16384 x 8193 cells is more than PD_TILED_MAX_CELLS (67108864)");
    assert_null(pd_tiled_parse(NULL, 0, NULL, err, sizeof err));
    assert_string_equal(err, "$: no map text");
}

static void test_tileset_errors(void **state)
{
    (void)state;
    char buf[MAP_TEXT_MAX];
    const char *layer = "{\"type\": \"tilelayer\", \"name\": \"w\", \"data\": [0, 0, 0, 0, 0, 0]}";
    expect_error(map3x2(buf, layer, "{\"firstgid\": 1, \"source\": \"terrain.tsj\"}"), NULL,
                 "$.tilesets[0].source: external tileset \"terrain.tsj\": no map directory to resolve it in");
    expect_error(map3x2(buf, layer, "7"), NULL, "$.tilesets[0]: must be an object, not a number");
    expect_error(map3x2(buf, layer, "{\"tiles\": []}"), NULL, "$.tilesets[0].firstgid: is required");
    expect_error(map3x2(buf, layer, "{\"firstgid\": 0}"), NULL, "$.tilesets[0].firstgid: must be in 1..268435455");
    expect_error(map3x2(buf, layer, "{\"firstgid\": 1}, {\"firstgid\": 1}"), NULL,
                 "$.tilesets: two tilesets share firstgid 1");
    expect_error(map3x2(buf, layer, "{\"firstgid\": 1, \"tiles\": {}}"), NULL,
                 "$.tilesets[0].tiles: must be an array, not an object");
    expect_error(map3x2(buf, layer, "{\"firstgid\": 1, \"tiles\": [1]}"), NULL,
                 "$.tilesets[0].tiles[0]: must be an object, not a number");
    expect_error(map3x2(buf, layer, "{\"firstgid\": 1, \"tiles\": [{}]}"), NULL,
                 "$.tilesets[0].tiles[0].id: is required");
    expect_error(map3x2(buf, layer, "{\"firstgid\": 1, \"tilecount\": 4, \"tiles\": [{\"id\": 4}]}"), NULL,
                 "$.tilesets[0].tiles[0].id: must be in 0..3");
    expect_error(map3x2(buf, layer, "{\"firstgid\": 1, \"tilecount\": 0, \"tiles\": [{\"id\": 0}]}"), NULL,
                 "$.tilesets[0].tiles[0]: describes a tile, but the tileset has tilecount 0");
    expect_error(map3x2(buf, layer, "{\"firstgid\": 1, \"tiles\": ["
                                    "{\"id\": 2, \"properties\": [{\"name\": \"cost\", \"value\": 2}]},"
                                    "{\"id\": 2, \"properties\": [{\"name\": \"cost\", \"value\": 3}]}]}"),
                 NULL, "$.tilesets[0].tiles: tile id 2 is described more than once");
    expect_error(map3x2(buf, layer, "{\"firstgid\": 1, \"tiles\": [{\"id\": 0, \"properties\": {\"cost\": 2}}]}"), NULL,
                 "$.tilesets[0].tiles[0].properties: must be an array of {name, type, value} (Tiled 1.2+), "
                 "not an object");
    expect_error(map3x2(buf, layer, "{\"firstgid\": 1, \"tiles\": [{\"id\": 0, \"properties\": [5]}]}"), NULL,
                 "$.tilesets[0].tiles[0].properties[0]: must be an object, not a number");
    expect_error(map3x2(buf, layer, "{\"firstgid\": 1, \"tiles\": [{\"id\": 0, \"properties\": [{\"value\": 5}]}]}"),
                 NULL, "$.tilesets[0].tiles[0].properties[0].name: is required");
    expect_error(map3x2(buf, layer, "{\"firstgid\": 1, \"tiles\": [{\"id\": 0, \"properties\":"
                                    " [{\"name\": \"blocked\", \"type\": \"string\", \"value\": \"yes\"}]}]}"),
                 NULL, "$.tilesets[0].tiles[0].properties[0].value: \"blocked\" must be a bool property");
    expect_error(map3x2(buf, layer, "{\"firstgid\": 1, \"tiles\": [{\"id\": 0, \"properties\":"
                                    " [{\"name\": \"blocked\", \"value\": 1}]}]}"),
                 NULL, "$.tilesets[0].tiles[0].properties[0].value: \"blocked\" must be a bool property");
    expect_error(map3x2(buf, layer, "{\"firstgid\": 1, \"tiles\": [{\"id\": 0, \"properties\":"
                                    " [{\"name\": \"blocked\", \"value\": true}, {\"name\": \"blocked\", \"value\": false}]}]}"),
                 NULL, "$.tilesets[0].tiles[0].properties[1]: property \"blocked\" given more than once");
    expect_error(map3x2(buf, layer, "{\"firstgid\": 1, \"tiles\": [{\"id\": 0, \"properties\":"
                                    " [{\"name\": \"cost\", \"type\": \"float\", \"value\": 2.5}]}]}"),
                 NULL, "$.tilesets[0].tiles[0].properties[0].value: \"cost\" must be an int property, not float");
    expect_error(map3x2(buf, layer, "{\"firstgid\": 1, \"tiles\": [{\"id\": 0, \"properties\":"
                                    " [{\"name\": \"cost\", \"type\": \"int\", \"value\": 0}]}]}"),
                 NULL, "$.tilesets[0].tiles[0].properties[0].value: must be in 1..255");
    expect_error(map3x2(buf, layer, "{\"firstgid\": 1, \"tiles\": [{\"id\": 0, \"properties\":"
                                    " [{\"name\": \"cost\", \"type\": \"int\", \"value\": 256}]}]}"),
                 NULL, "$.tilesets[0].tiles[0].properties[0].value: must be in 1..255");
    expect_error(map3x2(buf, layer, "{\"firstgid\": 1, \"tiles\": [{\"id\": 0, \"properties\":"
                                    " [{\"name\": \"cost\", \"type\": \"int\"}]}]}"),
                 NULL, "$.tilesets[0].tiles[0].properties[0].value: is required");
    expect_error(map3x2(buf, layer, "{\"firstgid\": 1, \"tiles\": [{\"id\": 0, \"properties\":"
                                    " [{\"name\": \"cost\", \"value\": 2}, {\"name\": \"cost\", \"value\": 3}]}]}"),
                 NULL, "$.tilesets[0].tiles[0].properties[1]: property \"cost\" given more than once");
    expect_error(map3x2(buf, layer, "{}"), NULL, "$.tilesets[0].firstgid: is required");
    expect_error("{\"width\": 3, \"height\": 2, \"layers\": [{\"type\": \"tilelayer\", \"data\": [0,0,0,0,0,0]}],"
                 " \"tilesets\": {}}", NULL, "$.tilesets: must be an array, not an object");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_courtyard_matches_its_picture),
        cmocka_unit_test(test_gids_need_a_tileset),
        cmocka_unit_test(test_layer_selection),
        cmocka_unit_test(test_tile_properties),
        cmocka_unit_test(test_flip_flags_are_stripped),
        cmocka_unit_test(test_map_errors),
        cmocka_unit_test(test_tileset_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
