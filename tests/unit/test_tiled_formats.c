/*
 * test_tiled_formats.c - Tiled maps as editors save them: .tmx (XML) and
 * .tmj with every layer data encoding, infinite maps (and the scene origin
 * they give), external tilesets, object colliders, tile and object classes
 * and the configurable walkability rule (pd_tiled.h).
 *
 * The maps are written by hand from the format specification
 * (doc.mapeditor.org, "TMX Map Format" and "JSON Map Format"), each with the
 * grid it is meant to give drawn beside it, and compared cell by cell. The
 * compressed variants encode the same gids here with zlib and libzstd, so
 * every encoding must give the very grid the CSV form gives.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zlib.h>
#include <zstd.h>

#include "grid_picture.h"
#include "pd_conf.h"
#include "pd_scene.h"
#include "pd_tdata.h"
#include "pd_tiled.h"
#include "zero_map.h"

/* Room for the inline maps below. */
#define MAP_TEXT_MAX 16384

/* The default rules but untagged_tiles "blocked": most maps below draw
 * walls with tiles nothing decides (a bare tileset's), which is what they
 * are read with when no rules are given. The default, "open", is tested
 * by test_untagged_tiles_are_open_by_default and the tests that say so. */
static void rules_walled(pd_tiled_rules *r)
{
    pd_tiled_rules_default(r);
    r->untagged_open = 0;
}

/* off may be NULL; else it gets the tile coordinates of cell (0, 0). */
static pd_grid *load_at(const char *text, const pd_tiled_rules *rules, double off[2], char *err,
                        size_t errlen)
{
    pd_tiled_rules def;
    if (!rules) {
        rules_walled(&def);
        rules = &def;
    }
    return pd_tiled_load(text, strlen(text), rules, NULL, off ? &off[0] : NULL,
                         off ? &off[1] : NULL, NULL, err, errlen);
}

static pd_grid *load(const char *text, const pd_tiled_rules *rules, char *err, size_t errlen)
{
    return load_at(text, rules, NULL, err, errlen);
}

static pd_grid *load_ok_at(const char *text, const pd_tiled_rules *rules, double off[2])
{
    char err[512] = "";
    pd_grid *g = load_at(text, rules, off, err, sizeof err);
    if (!g)
        fail_msg("refused: %s\n--- input ---\n%s", err, text);
    return g;
}

static pd_grid *load_ok(const char *text, const pd_tiled_rules *rules)
{
    return load_ok_at(text, rules, NULL);
}

static void expect_error(const char *text, const pd_tiled_rules *rules, const char *expected)
{
    char err[512];
    pd_grid *g = load(text, rules, err, sizeof err);
    if (g || strcmp(err, expected) != 0)
        fail_msg("expected: %s\ngot:      %s\n--- input ---\n%s", expected, g ? "<accepted>" : err,
                 text);
    assert_null(load(text, rules, NULL, 0));
}

/* ---- one map, every encoding ---- */

/* Tileset "a" (firstgid 1): tile 0 untagged (blocked), 1 blocked=false,
 * 2 cost 5, 3 a collision box over its centre (blocked), 4 a collision box
 * in its top-left corner only (open). Tileset "b" (firstgid 10): tile 0
 * costs 2, tile 1 blocked. */
static const char *const tmx_tilesets =
    " <tileset firstgid=\"10\" name=\"b\" tilewidth=\"16\" tileheight=\"16\" tilecount=\"2\">\n"
    "  <tile id=\"0\"><properties><property name=\"cost\" type=\"int\" value=\"2\"/></properties></tile>\n"
    "  <tile id=\"1\"><properties><property name=\"blocked\" type=\"bool\" value=\"true\"/></properties></tile>\n"
    " </tileset>\n"
    " <tileset firstgid=\"1\" name=\"a\" tilewidth=\"16\" tileheight=\"16\" tilecount=\"5\">\n"
    "  <tile id=\"1\"><properties><property name=\"blocked\" type=\"bool\" value=\"false\"/></properties></tile>\n"
    "  <tile id=\"2\"><properties><property name=\"cost\" type=\"int\" value=\"5\"/></properties></tile>\n"
    "  <tile id=\"3\"><objectgroup draworder=\"index\"><object id=\"1\" x=\"4\" y=\"4\" width=\"8\" height=\"8\"/></objectgroup></tile>\n"
    "  <tile id=\"4\"><objectgroup><object id=\"1\" x=\"0\" y=\"0\" width=\"4\" height=\"4\"/></objectgroup></tile>\n"
    " </tileset>\n";

/* Ground (inside a group) and walls, 4 x 3. Gid 2147483649 is tile 0 of
 * "a" flipped horizontally. */
static const uint32_t ground_gids[12] = { 2, 2, 2, 2, 2, 3, 10, 2, 2, 2, 2, 2 };
static const uint32_t wall_gids[12] = { 2147483649u, 0, 0, 4, 0, 0, 0, 0, 0, 5, 11, 0 };
static const char *const both_layers[] = {
    "#..#",
    ".52.",
    "..#.",
};

/* The gids as Tiled stores them (little-endian), compressed, in base64. */
static void encode_gids(const uint32_t *gids, size_t n, const char *compression, char *out)
{
    unsigned char raw[256], packed[512];
    assert_true(n * 4 <= sizeof raw);
    for (size_t i = 0; i < n; i++) {
        for (int b = 0; b < 4; b++)
            raw[i * 4 + (size_t)b] = (unsigned char)(gids[i] >> (8 * b));
    }
    size_t len = n * 4;
    const unsigned char *src = raw;
    if (strcmp(compression, "zlib") == 0 || strcmp(compression, "gzip") == 0) {
        z_stream zs;
        memset(&zs, 0, sizeof zs);
        assert_int_equal(deflateInit2(&zs, 9, Z_DEFLATED, compression[0] == 'g' ? 31 : 15, 8,
                                      Z_DEFAULT_STRATEGY), Z_OK);
        zs.next_in = raw;
        zs.avail_in = (uInt)len;
        zs.next_out = packed;
        zs.avail_out = sizeof packed;
        assert_int_equal(deflate(&zs, Z_FINISH), Z_STREAM_END);
        len = sizeof packed - zs.avail_out;
        deflateEnd(&zs);
        src = packed;
    } else if (strcmp(compression, "zstd") == 0) {
        len = ZSTD_compress(packed, sizeof packed, raw, len, 3);
        assert_false(ZSTD_isError(len));
        src = packed;
    }
    tiled_base64(src, len, out);
}

static void csv(const uint32_t *gids, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++)
        o += (size_t)sprintf(out + o, "%s%u", i ? (i % 4 ? "," : ",\n") : "\n", (unsigned)gids[i]);
    out[o++] = '\n';
    out[o] = '\0';
}

/* The 4 x 3 map in TMX, its data in the given encoding. */
static const char *tmx_map(char *buf, const char *encoding, const char *compression)
{
    char ground[1024], walls[1024], attrs[128];
    if (strcmp(encoding, "csv") == 0) {
        csv(ground_gids, 12, ground);
        csv(wall_gids, 12, walls);
        snprintf(attrs, sizeof attrs, "encoding=\"csv\"");
    } else {
        encode_gids(ground_gids, 12, compression, ground);
        encode_gids(wall_gids, 12, compression, walls);
        snprintf(attrs, sizeof attrs, "encoding=\"base64\"%s%s%s", compression[0] ? " compression=\"" : "",
                 compression, compression[0] ? "\"" : "");
    }
    snprintf(buf, MAP_TEXT_MAX,
             "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
             "<map version=\"1.10\" orientation=\"orthogonal\" renderorder=\"right-down\" width=\"4\""
             " height=\"3\" tilewidth=\"16\" tileheight=\"16\" infinite=\"0\">\n%s"
             " <group id=\"3\" name=\"terrain\">\n"
             "  <layer id=\"1\" name=\"ground\" width=\"4\" height=\"3\"><data %s>%s</data></layer>\n"
             " </group>\n"
             " <imagelayer id=\"4\" name=\"sky\"><image source=\"sky.png\"/></imagelayer>\n"
             " <layer id=\"2\" name=\"walls\" width=\"4\" height=\"3\">\n  <data %s>\n   %s\n  </data>\n </layer>\n"
             "</map>\n",
             tmx_tilesets, attrs, ground, attrs, walls);
    return buf;
}

/* The same map in JSON: the tilesets as the JSON format writes them. */
static const char *tmj_map(char *buf, const char *encoding, const char *compression)
{
    char ground[1024], walls[1024], enc[128];
    if (strcmp(encoding, "csv") == 0) {
        csv(ground_gids, 12, ground + 1);
        csv(wall_gids, 12, walls + 1);
        ground[0] = walls[0] = '[';
        strcat(ground, "]");
        strcat(walls, "]");
        snprintf(enc, sizeof enc, "\"encoding\": \"csv\"");
    } else {
        ground[0] = walls[0] = '"';
        encode_gids(ground_gids, 12, compression, ground + 1);
        encode_gids(wall_gids, 12, compression, walls + 1);
        strcat(ground, "\"");
        strcat(walls, "\"");
        snprintf(enc, sizeof enc, "\"encoding\": \"base64\", \"compression\": \"%s\"", compression);
    }
    snprintf(buf, MAP_TEXT_MAX,
             "{\"type\": \"map\", \"orientation\": \"orthogonal\", \"infinite\": false, \"width\": 4,"
             " \"height\": 3, \"tilewidth\": 16, \"tileheight\": 16,"
             " \"layers\": [{\"type\": \"group\", \"name\": \"terrain\", \"layers\": ["
             "   {\"type\": \"tilelayer\", \"name\": \"ground\", \"width\": 4, \"height\": 3, %s, \"data\": %s}]},"
             "  {\"type\": \"tilelayer\", \"name\": \"walls\", %s, \"data\": %s}],"
             " \"tilesets\": [{\"firstgid\": 1, \"tilecount\": 5, \"tiles\": ["
             "   {\"id\": 1, \"properties\": [{\"name\": \"blocked\", \"type\": \"bool\", \"value\": false}]},"
             "   {\"id\": 2, \"properties\": [{\"name\": \"cost\", \"type\": \"int\", \"value\": 5}]},"
             "   {\"id\": 3, \"objectgroup\": {\"type\": \"objectgroup\", \"objects\": [{\"x\": 4, \"y\": 4, \"width\": 8, \"height\": 8}]}},"
             "   {\"id\": 4, \"objectgroup\": {\"type\": \"objectgroup\", \"objects\": [{\"x\": 0, \"y\": 0, \"width\": 4, \"height\": 4}]}}]},"
             "  {\"firstgid\": 10, \"tilecount\": 2, \"tiles\": ["
             "   {\"id\": 0, \"properties\": [{\"name\": \"cost\", \"type\": \"int\", \"value\": 2}]},"
             "   {\"id\": 1, \"properties\": [{\"name\": \"blocked\", \"type\": \"bool\", \"value\": true}]}]}]}",
             enc, ground, enc, walls);
    return buf;
}

static void test_every_encoding_gives_the_same_grid(void **state)
{
    (void)state;
    static const char *const variants[][2] = {
        { "csv", "" }, { "base64", "" }, { "base64", "zlib" }, { "base64", "gzip" }, { "base64", "zstd" },
    };
    char buf[MAP_TEXT_MAX];
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
        pd_grid *g = load_ok(tmx_map(buf, variants[i][0], variants[i][1]), NULL);
        grid_picture_check(g, both_layers, 3);
        assert_int_equal(g->uniform_cost, 0);
        pd_grid_destroy(g);
        g = load_ok(tmj_map(buf, variants[i][0], variants[i][1]), NULL);
        grid_picture_check(g, both_layers, 3);
        pd_grid_destroy(g);
    }
    /* One layer by name: the walls alone (the ground's costs are gone). */
    pd_tiled_rules r;
    rules_walled(&r);
    snprintf(r.layer, sizeof r.layer, "walls");
    static const char *const walls_only[] = { "#..#", "....", "..#." };
    pd_grid *g = load_ok(tmx_map(buf, "base64", "zstd"), &r);
    grid_picture_check(g, walls_only, 3);
    pd_grid_destroy(g);
    /* The oldest TMX form: one <tile gid=".."/> per cell. */
    const char *xml_tiles =
        "<map orientation=\"orthogonal\" width=\"2\" height=\"1\" tilewidth=\"8\" tileheight=\"8\">"
        "<tileset firstgid=\"1\" tilecount=\"1\"/>"
        "<layer name=\"l\" width=\"2\" height=\"1\"><data><tile gid=\"1\"/><tile/></data></layer></map>";
    static const char *const xml_tiles_want[] = { "#." };
    g = load_ok(xml_tiles, NULL);
    grid_picture_check(g, xml_tiles_want, 1);
    pd_grid_destroy(g);
}

/* What a sink saw: pieces in order, every gid, or the first ones only. */
typedef struct piece_log {
    uint32_t *gids;
    size_t next, pieces, refuse_after, stop_after;
} piece_log;

static int log_pieces(void *user, const uint32_t *gids, size_t first, size_t count)
{
    piece_log *l = user;
    assert_int_equal(first, l->next);
    memcpy(l->gids + first, gids, count * sizeof *gids);
    l->next += count;
    l->pieces++;
    if (l->stop_after && l->pieces == l->stop_after)
        return -1;
    return l->refuse_after && l->pieces == l->refuse_after ? 1 : 0;
}

/* A layer much larger than the decoder's pieces (16,384 gids, 64 KiB of
 * decompressed bytes) comes to the sink in order, whole, in every
 * encoding, and a zstd frame whose window is above the streamed limit
 * decodes the same; a sink that takes no more still sees the data's own
 * error, and one that says stop ends the decoding. */
static void test_large_layer_in_pieces(void **state)
{
    (void)state;
    const size_t n = 100003;
    uint32_t *gids = malloc(n * sizeof *gids), *got = malloc(n * sizeof *got);
    unsigned char *raw = malloc(n * 4), *packed = malloc(n * 4 + 1024);
    char *text = malloc(n * 12 + 16);
    assert_true(gids && got && raw && packed && text);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        gids[i] = (i / 300) % 3 == 0 ? (uint32_t)(x % 7) : (uint32_t)(x >> 20);
        for (int b = 0; b < 4; b++)
            raw[i * 4 + (size_t)b] = (unsigned char)(gids[i] >> (8 * b));
    }
    static const char *const encs[][2] = { { "csv", "" }, { "base64", "" }, { "base64", "zlib" },
                                           { "base64", "gzip" }, { "base64", "zstd" },
                                           { "base64", "zstd-wide" } };
    char err[256];
    for (size_t e = 0; e < sizeof encs / sizeof *encs; e++) {
        const char *comp = encs[e][1];
        size_t len = n * 4;
        if (strcmp(encs[e][0], "csv") == 0) {
            size_t o = 0;
            for (size_t i = 0; i < n; i++)
                o += (size_t)sprintf(text + o, "%s%u", i ? ",\n" : "", (unsigned)gids[i]);
        } else if (!comp[0]) {
            tiled_base64(raw, len, text);
        } else if (comp[0] != 'z' || comp[1] == 'l') {
            z_stream zs;
            memset(&zs, 0, sizeof zs);
            assert_int_equal(deflateInit2(&zs, 6, Z_DEFLATED, comp[0] == 'g' ? 31 : 15, 8,
                                          Z_DEFAULT_STRATEGY), Z_OK);
            zs.next_in = raw;
            zs.avail_in = (uInt)len;
            zs.next_out = packed;
            zs.avail_out = (uInt)(n * 4 + 1024);
            assert_int_equal(deflate(&zs, Z_FINISH), Z_STREAM_END);
            len = n * 4 + 1024 - zs.avail_out;
            deflateEnd(&zs);
            tiled_base64(packed, len, text);
        } else {
            ZSTD_CCtx *cc = ZSTD_createCCtx();
            assert_non_null(cc);
            if (strcmp(comp, "zstd-wide") == 0) {
                /* A 16 MiB window and no content size: decompressed whole. */
                ZSTD_CCtx_setParameter(cc, ZSTD_c_windowLog, 24);
                ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 0);
            }
            len = ZSTD_compress2(cc, packed, n * 4 + 1024, raw, len);
            assert_false(ZSTD_isError(len));
            ZSTD_freeCCtx(cc);
            tiled_base64(packed, len, text);
            comp = "zstd";
        }
        piece_log l = { .gids = got };
        memset(got, 0xAB, n * sizeof *got);
        if (pd_tdata_decode_to(text, strlen(text), encs[e][0], comp, n, log_pieces, &l, err,
                               sizeof err) != 0)
            fail_msg("%s %s: %s", encs[e][0], encs[e][1], err);
        assert_int_equal(l.next, n);
        assert_true(l.pieces >= n / 16384);
        assert_memory_equal(got, gids, n * sizeof *gids);
        /* One gid more than the text holds. */
        assert_int_equal(pd_tdata_decode_to(text, strlen(text), encs[e][0], comp, n + 1, log_pieces,
                                            &(piece_log){ .gids = got }, err, sizeof err), -1);
        /* A sink that takes no more after its first piece: the text is still
         * read to its end, and its error told. */
        l = (piece_log){ .gids = got, .refuse_after = 1 };
        assert_int_equal(pd_tdata_decode_to(text, strlen(text), encs[e][0], comp, n, log_pieces, &l,
                                            err, sizeof err), 0);
        assert_int_equal(l.pieces, 1);
        l = (piece_log){ .gids = got, .refuse_after = 1 };
        assert_int_equal(pd_tdata_decode_to(text, strlen(text), encs[e][0], comp, n - 1,
                                            log_pieces, &l, err, sizeof err), -1);
        assert_true(l.pieces <= 1);
        /* A sink that says stop. */
        l = (piece_log){ .gids = got, .stop_after = 2 };
        assert_int_equal(pd_tdata_decode_to(text, strlen(text), encs[e][0], comp, n, log_pieces, &l,
                                            err, sizeof err), -2);
        assert_int_equal(l.pieces, 2);
    }
    free(gids);
    free(got);
    free(raw);
    free(packed);
    free(text);
}

static void test_bad_layer_data(void **state)
{
    (void)state;
    uint32_t out[4];
    char err[256];
    /* A truncated base64 string. */
    assert_int_equal(pd_tdata_decode("AAAAAAAAAAAAAAAAAAAAA", 21, "base64", "", out, 4, err, sizeof err), -1);
    assert_string_equal(err, "base64: truncated (21 characters do not form whole bytes)");
    assert_int_equal(pd_tdata_decode("AAAA*AAA", 8, "base64", "", out, 2, err, sizeof err), -1);
    assert_string_equal(err, "base64: invalid character at offset 4");
    assert_int_equal(pd_tdata_decode("AAAAAAAAAAA=", 12, "base64", "", out, 4, err, sizeof err), -1);
    assert_string_equal(err, "base64: 8 bytes, the layer needs 16 (4 gids)");
    /* A wrong decompressed length, both ways, for each compressor. */
    static const uint32_t three[3] = { 1, 2, 3 }, five[5] = { 1, 2, 3, 4, 5 };
    static const char *const comps[] = { "zlib", "gzip", "zstd" };
    char text[256];
    for (size_t i = 0; i < 3; i++) {
        encode_gids(three, 3, comps[i], text);
        assert_int_equal(pd_tdata_decode(text, strlen(text), "base64", comps[i], out, 4, err, sizeof err), -1);
        char want[128];
        snprintf(want, sizeof want, "%s: decompresses to 12 bytes, the layer needs 16", comps[i]);
        assert_string_equal(err, want);
        encode_gids(five, 5, comps[i], text);
        assert_int_equal(pd_tdata_decode(text, strlen(text), "base64", comps[i], out, 4, err, sizeof err), -1);
        snprintf(want, sizeof want, "%s: decompresses to more than the 16 bytes the layer needs", comps[i]);
        assert_string_equal(err, want);
        /* Cut short: the stream ends early. */
        encode_gids(five, 4, comps[i], text);
        text[strlen(text) - 8] = '\0';
        assert_int_equal(pd_tdata_decode(text, strlen(text), "base64", comps[i], out, 4, err, sizeof err), -1);
    }
    /* Data that is not the compression it claims. */
    encode_gids(three, 3, "zstd", text);
    assert_int_equal(pd_tdata_decode(text, strlen(text), "base64", "zlib", out, 3, err, sizeof err), -1);
    assert_string_equal(err, "zlib: corrupt or truncated stream");
    assert_int_equal(pd_tdata_decode("AAAA", 4, "base64", "lz4", out, 1, err, sizeof err), -1);
    assert_string_equal(err, "unknown compression \"lz4\" (zlib, gzip or zstd)");
    assert_int_equal(pd_tdata_decode("1,2", 3, "csv", "zlib", out, 2, err, sizeof err), -1);
    assert_string_equal(err, "compression \"zlib\" needs base64 encoding");
    assert_int_equal(pd_tdata_decode("1,2,x", 5, "csv", NULL, out, 3, err, sizeof err), -1);
    assert_string_equal(err, "csv: expected a gid at offset 4");
    assert_int_equal(pd_tdata_decode("1,2,3", 5, "csv", NULL, out, 2, err, sizeof err), -1);
    assert_string_equal(err, "csv: more than the 2 gids the layer needs");
    assert_int_equal(pd_tdata_decode("4294967296", 10, "csv", NULL, out, 1, err, sizeof err), -1);
    assert_string_equal(err, "csv: gid at offset 9 is above 4294967295");
    assert_int_equal(pd_tdata_decode(" 4294967295 ,\n0\n", 16, "csv", NULL, out, 2, err, sizeof err), 0);
    assert_true(out[0] == 4294967295u && out[1] == 0);

    /* In a map, the message names the file's layer. */
    char buf[MAP_TEXT_MAX];
    tmx_map(buf, "base64", "zlib");
    char *data = strstr(strstr(buf, "name=\"walls\""), "<data");
    data = strchr(data, '>') + 1;
    while (*data == ' ' || *data == '\n')
        data++;
    memmove(data, data + 4, strlen(data + 4) + 1);
    expect_error(buf, NULL, "$.layers[2] (layer \"walls\").data: zlib: corrupt or truncated stream");
    expect_error("<map orientation=\"orthogonal\" width=\"2\" height=\"1\"><layer name=\"l\"><data encoding=\"base64\">AAAA</data></layer></map>",
                 NULL, "$.layers[0] (layer \"l\").data: base64: 3 bytes, the layer needs 8 (2 gids)");
}

/* ---- infinite maps ---- */

static void test_infinite_maps(void **state)
{
    (void)state;
    /* Two 2 x 2 chunks at (-2, -2) and (0, 0): the grid is their bounding
     * box, 4 x 4, cell (0, 0) being tile (-2, -2). The object layer's
     * rectangle at tile (1, -1) lands on cell (3, 1). */
    const char *tmx =
        "<map orientation=\"orthogonal\" width=\"30\" height=\"20\" tilewidth=\"10\" tileheight=\"10\" infinite=\"1\">\n"
        " <tileset firstgid=\"1\" tilecount=\"2\"><tile id=\"1\"><properties><property name=\"cost\" type=\"int\" value=\"3\"/></properties></tile></tileset>\n"
        " <layer name=\"l\" width=\"30\" height=\"20\"><data encoding=\"csv\">\n"
        "  <chunk x=\"-2\" y=\"-2\" width=\"2\" height=\"2\">1,0,\n0,2</chunk>\n"
        "  <chunk x=\"0\" y=\"0\" width=\"2\" height=\"2\">2,2,\n0,1</chunk>\n"
        " </data></layer>\n"
        " <objectgroup name=\"c\"><object id=\"1\" x=\"10\" y=\"-10\" width=\"10\" height=\"10\"/></objectgroup>\n"
        "</map>";
    static const char *const want[] = { "#...", ".3.#", "..33", "...#" };
    double off[2] = { NAN, NAN };
    pd_grid *g = load_ok_at(tmx, NULL, off);
    grid_picture_check(g, want, 4);
    assert_true(off[0] == -2 && off[1] == -2);
    pd_grid_destroy(g);
    const char *tmj =
        "{\"orientation\": \"orthogonal\", \"infinite\": true, \"tilewidth\": 10, \"tileheight\": 10,"
        " \"tilesets\": [{\"firstgid\": 1, \"tilecount\": 2, \"tiles\": [{\"id\": 1, \"properties\": [{\"name\": \"cost\", \"type\": \"int\", \"value\": 3}]}]}],"
        " \"layers\": [{\"type\": \"tilelayer\", \"name\": \"l\", \"chunks\": ["
        "   {\"x\": -2, \"y\": -2, \"width\": 2, \"height\": 2, \"data\": [1, 0, 0, 2]},"
        "   {\"x\": 0, \"y\": 0, \"width\": 2, \"height\": 2, \"data\": [2, 2, 0, 1]}]},"
        "  {\"type\": \"objectgroup\", \"name\": \"c\", \"objects\": [{\"x\": 10, \"y\": -10, \"width\": 10, \"height\": 10}]}]}";
    off[0] = off[1] = NAN;
    g = load_ok_at(tmj, NULL, off);
    grid_picture_check(g, want, 4);
    assert_true(off[0] == -2 && off[1] == -2);
    pd_grid_destroy(g);
    /* As Tiled saves infinite maps by default: each chunk base64 and
     * compressed, here with zlib and zstd. */
    static const uint32_t chunk_gids[2][4] = { { 1, 0, 0, 2 }, { 2, 2, 0, 1 } };
    static const char *const packs[] = { "zlib", "gzip", "zstd" };
    for (size_t k = 0; k < sizeof packs / sizeof packs[0]; k++) {
        char enc[2][64], text[MAP_TEXT_MAX];
        encode_gids(chunk_gids[0], 4, packs[k], enc[0]);
        encode_gids(chunk_gids[1], 4, packs[k], enc[1]);
        snprintf(text, sizeof text,
                 "<map orientation=\"orthogonal\" width=\"30\" height=\"20\" tilewidth=\"10\" tileheight=\"10\" infinite=\"1\">\n"
                 " <tileset firstgid=\"1\" tilecount=\"2\"><tile id=\"1\"><properties><property name=\"cost\" type=\"int\" value=\"3\"/></properties></tile></tileset>\n"
                 " <layer name=\"l\" width=\"30\" height=\"20\"><data encoding=\"base64\" compression=\"%s\">\n"
                 "  <chunk x=\"-2\" y=\"-2\" width=\"2\" height=\"2\">\n   %s\n  </chunk>\n"
                 "  <chunk x=\"0\" y=\"0\" width=\"2\" height=\"2\">\n   %s\n  </chunk>\n"
                 " </data></layer>\n"
                 " <objectgroup name=\"c\"><object id=\"1\" x=\"10\" y=\"-10\" width=\"10\" height=\"10\"/></objectgroup>\n"
                 "</map>", packs[k], enc[0], enc[1]);
        off[0] = off[1] = NAN;
        g = load_ok_at(text, NULL, off);
        grid_picture_check(g, want, 4);
        assert_true(off[0] == -2 && off[1] == -2);
        pd_grid_destroy(g);
    }
    /* Chunks that start at positive tiles: the grid starts there too. */
    g = load_ok_at("{\"infinite\": true, \"layers\": [{\"type\": \"tilelayer\", \"chunks\": ["
                   "{\"x\": 32, \"y\": 16, \"width\": 2, \"height\": 1, \"data\": [0, 0]}]}]}",
                   NULL, off);
    assert_true(g->width == 2 && g->height == 1 && off[0] == 32 && off[1] == 16);
    pd_grid_destroy(g);
    /* A finite map's cell (0, 0) is tile (0, 0). */
    g = load_ok_at("{\"width\": 2, \"height\": 1, \"layers\": [{\"type\": \"tilelayer\", \"data\": [0, 0]}]}",
                   NULL, off);
    assert_true(off[0] == 0 && off[1] == 0);
    pd_grid_destroy(g);

    expect_error("{\"infinite\": true, \"layers\": [{\"type\": \"tilelayer\", \"name\": \"l\","
                 " \"chunks\": [{\"x\": 0, \"y\": 0, \"width\": 2, \"height\": 1, \"data\": [0]}]}]}",
                 NULL, "$.layers[0] (layer \"l\").chunks[0].data: has 1 gids, the layer needs 2");
    expect_error("{\"infinite\": true, \"layers\": [{\"type\": \"tilelayer\", \"name\": \"l\"}]}", NULL,
                 "$.layers[0] (layer \"l\").chunks: is required in an infinite map (an array of chunks)");
    expect_error("{\"infinite\": true, \"layers\": [{\"type\": \"tilelayer\", \"chunks\": ["
                 "{\"x\": 0, \"y\": 0, \"width\": 1, \"height\": 1, \"data\": [0]},"
                 "{\"x\": 20000, \"y\": 0, \"width\": 1, \"height\": 1, \"data\": [0]}]}]}",
                 NULL, "$.layers: the chunks span 20001 x 1 tiles; at most 16384 a side");
    expect_error("{\"width\": 2, \"height\": 1, \"layers\": [{\"type\": \"tilelayer\", \"chunks\": []}]}", NULL,
                 "$.layers[0].chunks: chunks in a map that is not infinite");
    /* Two chunks of one layer giving the same tile: which is meant is a
     * guess. The same place in two layers is just two layers. */
    const char *chunk_a = "{\"x\": -1, \"y\": 0, \"width\": 2, \"height\": 1, \"data\": [0, 0]}";
    const char *chunk_b = "{\"x\": 0, \"y\": 0, \"width\": 1, \"height\": 2, \"data\": [0, 0]}";
    char buf[MAP_TEXT_MAX];
    snprintf(buf, sizeof buf, "{\"infinite\": true, \"layers\": [{\"type\": \"tilelayer\", \"name\": \"l\", "
                              "\"chunks\": [%s, %s]}]}", chunk_a, chunk_b);
    expect_error(buf, NULL, "$.layers[0] (layer \"l\").chunks[1]: cell (0, 0) is also in an earlier chunk of the layer");
    snprintf(buf, sizeof buf, "{\"infinite\": true, \"layers\": [{\"type\": \"tilelayer\", \"chunks\": [%s]},"
                              " {\"type\": \"tilelayer\", \"chunks\": [%s]}]}", chunk_a, chunk_b);
    g = load_ok_at(buf, NULL, off);
    assert_true(g->width == 2 && g->height == 2 && off[0] == -1 && off[1] == 0);
    pd_grid_destroy(g);
}

/* The first scene of config text json (its files relative to
 * tests/data), loaded as pathd loads it: NULL with the reason in err. */
static pd_scene *load_config_scene(const char *json, char *err, size_t errlen)
{
    pd_conf c;
    if (pd_conf_load_buffer(json, strlen(json), "t.json", PD_TEST_DATA_DIR, &c, err, errlen) != 0)
        fail_msg("%s", err);
    pd_scene *s = pd_scene_load(&c.scenes[0], err, errlen);
    pd_conf_free(&c);
    return s;
}

/* tests/data/tiled/infinite.tmx through the config: the first chunk's
 * corner, tile (-8, -4), carried into the scene's origin, so a world point
 * is Tiled's pixel position over the tile size, times the cell size, plus
 * the configured origin; classes from the config. */
static void test_infinite_scene_origin(void **state)
{
    (void)state;
    static const char *const json =
        "{\"scenes\": [{\"name\": \"inf\", \"map\": \"tiled/infinite.tmx\", \"format\": \"tiled\","
        " \"origin\": [1, 1], \"cell_size\": 0.5, \"untagged_tiles\": \"open\","
        " \"classes\": {\"Wall\": \"blocked\", \"Mud\": 4, \"Trigger\": 1}}]}";
    char err[512] = "";
    pd_scene *s = load_config_scene(json, err, sizeof err);
    if (!s)
        fail_msg("%s", err);
    static const char *const want[] = {
        "####........",
        ".44#........",
        "..........#.",
        "............",
        "..........4.",
        "........#...",
    };
    grid_picture_check(s->grid, want, 6);
    assert_true(s->origin_x == 1 - 8 * 0.5 && s->origin_y == 1 - 4 * 0.5);
    /* The crate at Tiled pixel (32, -32), tile (2, -2): world (1 + 2 * 0.5,
     * 1 - 2 * 0.5) is its corner, and the cell there is the blocked one. */
    pd_point cell;
    assert_int_equal(pd_scene_world_to_cell(s, 2.25, 0.25, &cell), PD_OK);
    assert_true(cell.x == 10 && cell.y == 2);
    assert_int_equal(pd_grid_get(s->grid, cell.x, cell.y), PD_CELL_BLOCKED);
    pd_scene_release(s);

    /* A refusal names the scene, the file, the JSON path and the reason. */
    static const char *const bad = "{\"scenes\": [{\"name\": \"chain\", \"map\": \"tiled/chained.tmx\", \"format\": \"tiled\"}]}";
    assert_null(load_config_scene(bad, err, sizeof err));
    assert_string_equal(err, "scene 'chain': " PD_TEST_DATA_DIR "/tiled/chained.tmx: $.tilesets[0].source: "
                             "sub/chained.tsj: $.source: an external tileset cannot point to another");
}

/* ---- colliders ---- */

static void test_object_colliders(void **state)
{
    (void)state;
    /* 10 x 10 cells of 10 px, no tiles; every collider kind once. */
    const char *map =
        "<map orientation=\"orthogonal\" width=\"10\" height=\"10\" tilewidth=\"10\" tileheight=\"10\">\n"
        " <tileset firstgid=\"1\" tilecount=\"1\"/>\n"
        " <layer name=\"ground\" width=\"10\" height=\"10\"><data encoding=\"csv\">" /* all 0 */
        "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,"
        "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,"
        "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0</data></layer>\n"
        " <objectgroup name=\"colliders\">\n"
        /* Rectangles: centres (5,5) and (15,5) inside; (35,5) inside 30..44, (45,5) not. */
        "  <object id=\"1\" x=\"0\" y=\"0\" width=\"20\" height=\"10\"/>\n"
        "  <object id=\"2\" x=\"30\" y=\"0\" width=\"14\" height=\"10\"/>\n"
        /* Turned 90 degrees clockwise about (100, 0): x 90..100, y 0..30. */
        "  <object id=\"3\" x=\"100\" y=\"0\" width=\"30\" height=\"10\" rotation=\"90\"/>\n"
        /* A cost area, and an area that says it blocks nothing. */
        "  <object id=\"4\" x=\"40\" y=\"20\" width=\"20\" height=\"10\"><properties><property name=\"cost\" type=\"int\" value=\"4\"/></properties></object>\n"
        "  <object id=\"5\" x=\"20\" y=\"20\" width=\"10\" height=\"10\"><properties><property name=\"blocked\" type=\"bool\" value=\"false\"/></properties></object>\n"
        /* A circle of radius 25 centred on (25, 75): 5 x 5 cells less the corners. */
        "  <object id=\"6\" x=\"0\" y=\"50\" width=\"50\" height=\"50\"><ellipse/></object>\n"
        /* A triangle: local centres with x + y < 39. */
        "  <object id=\"7\" x=\"60\" y=\"50\"><polygon points=\"0,0 39,0 0,39\"/></object>\n"
        /* A tile object (bottom-left anchor) of the untagged, blocking tile. */
        "  <object id=\"8\" gid=\"1\" x=\"50\" y=\"100\" width=\"10\" height=\"10\"/>\n"
        /* No area: skipped. */
        "  <object id=\"9\" x=\"95\" y=\"95\"><point/></object>\n"
        "  <object id=\"10\" x=\"80\" y=\"80\" width=\"20\" height=\"20\"><text>sign</text></object>\n"
        " </objectgroup>\n"
        "</map>";
    static const char *const want[] = {
        "##.#.....#",
        ".........#",
        "....44...#",
        "..........",
        "..........",
        ".###..###.",
        "#####.##..",
        "#####.#...",
        "#####.....",
        ".###.#....",
    };
    pd_grid *g = load_ok(map, NULL);
    grid_picture_check(g, want, 10);
    pd_grid_destroy(g);
    /* colliders off: the object layer adds nothing. */
    pd_tiled_rules r;
    pd_tiled_rules_default(&r);
    r.colliders = 0;
    g = load_ok(map, &r);
    assert_int_equal(g->uniform_cost, 1);
    for (int32_t y = 0; y < 10; y++) {
        for (int32_t x = 0; x < 10; x++)
            assert_int_equal(pd_grid_get(g, x, y), PD_CELL_FREE);
    }
    pd_grid_destroy(g);

    const char *head = "{\"width\": 2, \"height\": 1, \"tilewidth\": 8, \"tileheight\": 8, \"layers\": ["
                       "{\"type\": \"tilelayer\", \"data\": [0, 0]},";
    char buf[MAP_TEXT_MAX];
    snprintf(buf, sizeof buf, "%s{\"type\": \"objectgroup\", \"name\": \"o\", \"objects\": [{\"x\": 0, \"y\": 0, "
                              "\"polyline\": [{\"x\": 0, \"y\": 0}, {\"x\": 8, \"y\": 0}]}]}]}", head);
    expect_error(buf, NULL, "$.layers[1] (layer \"o\").objects[0].polyline: a polyline has no inside to block; draw a polygon");
    snprintf(buf, sizeof buf, "%s{\"type\": \"objectgroup\", \"name\": \"o\", \"objects\": [{\"polygon\": [{\"x\": 0, \"y\": 0}]}]}]}", head);
    expect_error(buf, NULL, "$.layers[1] (layer \"o\").objects[0].polygon: must be an array of 3..65536 points {x, y}");
    snprintf(buf, sizeof buf, "%s{\"type\": \"objectgroup\", \"name\": \"o\", \"offsetx\": 4, \"objects\": []}]}", head);
    expect_error(buf, NULL, "$.layers[1] (layer \"o\"): is drawn at an offset (4, 0); a layer that counts must line up with the grid");
    snprintf(buf, sizeof buf, "%s{\"type\": \"objectgroup\", \"name\": \"o\", \"objects\": [{\"gid\": 3, \"x\": 0, \"y\": 8}]}]}", head);
    expect_error(buf, NULL, "$.layers[1] (layer \"o\").objects[0]: gid 3 is beyond every tileset");
    snprintf(buf, sizeof buf, "%s{\"type\": \"objectgroup\", \"name\": \"o\", \"objects\": [{\"template\": \"crate.tx\", \"x\": 0, \"y\": 0}]}]}", head);
    expect_error(buf, NULL, "$.layers[1] (layer \"o\").objects[0].template: object templates are not read; "
                            "detach the template in Tiled (Detach Template) or export with templates resolved");
    snprintf(buf, sizeof buf, "%s{\"type\": \"objectgroup\", \"name\": \"o\", \"objects\": [{\"x\": \"0\"}]}]}", head);
    expect_error(buf, NULL, "$.layers[1] (layer \"o\").objects[0].x: must be a finite number, not a string");
}

/* A group's offset moves the layers inside it as a layer's own offset does
 * (Tiled draws a layer at its offset plus its groups'). A counted layer
 * inside a shifted group used to be read as if the group were not shifted:
 * its walls landed a column off, with no word said. */
static void test_group_offsets(void **state)
{
    (void)state;
    /* gid 1 (untagged: blocked with these rules) in column 0 of a 3 x 1 map. */
    const char *fmt = "{\"width\": 3, \"height\": 1, \"tilewidth\": 8, \"tileheight\": 8, "
                      "\"tilesets\": [{\"firstgid\": 1, \"tilecount\": 1}], \"layers\": ["
                      "{\"type\": \"group\", \"name\": \"g\", \"offsetx\": %d, \"layers\": ["
                      "{\"type\": \"group\", \"name\": \"h\", \"layers\": ["
                      "{\"type\": \"tilelayer\", \"name\": \"walls\", \"offsetx\": %d, \"data\": [1, 0, 0]},"
                      "{\"type\": \"imagelayer\", \"name\": \"sky\", \"offsetx\": 3}]}]}]}";
    char buf[MAP_TEXT_MAX];
    snprintf(buf, sizeof buf, fmt, 8, 0);
    expect_error(buf, NULL, "$.layers[0] (layer \"g\").layers[0] (layer \"h\").layers[0] (layer \"walls\"): "
                            "is drawn at an offset (8, 0), its groups' included; a layer that counts must "
                            "line up with the grid");
    /* The layer's own offset undoes the group's: it lines up, column 0 walled. */
    snprintf(buf, sizeof buf, fmt, 8, -8);
    static const char *const want[] = { "#.." };
    pd_grid *g = load_ok(buf, NULL);
    grid_picture_check(g, want, 1);
    pd_grid_destroy(g);
    /* A shifted group that holds nothing counted (an image layer) is fine. */
    g = load_ok("{\"width\": 2, \"height\": 1, \"tilewidth\": 8, \"tileheight\": 8, \"layers\": ["
                "{\"type\": \"tilelayer\", \"data\": [0, 0]},"
                "{\"type\": \"group\", \"offsety\": 5, \"layers\": [{\"type\": \"imagelayer\"}]}]}",
                NULL);
    pd_grid_destroy(g);
    /* The same in XML, an object layer inside the group. */
    expect_error("<map orientation=\"orthogonal\" width=\"2\" height=\"1\" tilewidth=\"8\" tileheight=\"8\">\n"
                 " <layer name=\"ground\" width=\"2\" height=\"1\"><data encoding=\"csv\">0,0</data></layer>\n"
                 " <group name=\"g\" offsety=\"-4\">\n"
                 "  <objectgroup name=\"o\"><object id=\"1\" x=\"0\" y=\"0\" width=\"8\" height=\"8\"/></objectgroup>\n"
                 " </group>\n"
                 "</map>",
                 NULL, "$.layers[1] (layer \"g\").layers[0] (layer \"o\"): is drawn at an offset (0, -4), its "
                       "groups' included; a layer that counts must line up with the grid");
}

/* Offsets that sum to zero in the file but not in doubles (0.1 + 0.2 - 0.3
 * is 5.55e-17) line up: they were refused as "drawn at an offset
 * (5.55112e-17, 0)". An offset that is really there, however small, still
 * is refused. */
static void test_group_offsets_rounding(void **state)
{
    (void)state;
    const char *fmt = "{\"width\": 3, \"height\": 1, \"tilewidth\": 8, \"tileheight\": 8, "
                      "\"tilesets\": [{\"firstgid\": 1, \"tilecount\": 1}], \"layers\": ["
                      "{\"type\": \"group\", \"name\": \"g\", \"offsetx\": 0.1, \"offsety\": 0.7, \"layers\": ["
                      "{\"type\": \"group\", \"name\": \"h\", \"offsetx\": 0.2, \"offsety\": 0.1, \"layers\": ["
                      "{\"type\": \"tilelayer\", \"name\": \"walls\", \"offsetx\": %s, \"offsety\": -0.8, "
                      "\"data\": [1, 0, 0]}]}]}]}";
    char buf[MAP_TEXT_MAX];
    snprintf(buf, sizeof buf, fmt, "-0.3");
    static const char *const want[] = { "#.." };
    pd_grid *g = load_ok(buf, NULL);
    grid_picture_check(g, want, 1);
    pd_grid_destroy(g);
    snprintf(buf, sizeof buf, fmt, "-0.299");
    expect_error(buf, NULL, "$.layers[0] (layer \"g\").layers[0] (layer \"h\").layers[0] (layer \"walls\"): "
                            "is drawn at an offset (0.001, 0), its groups' included; a layer that counts must "
                            "line up with the grid");
}

/* The rounding bound is each axis's own: a half-tile offset in y beside
 * x offsets that cancel (a group at x 1e17, its layer at -1e17) lined up,
 * the x magnitudes' bound (2^-46 of 2e17 is 2842 px) taken for y too. Sums
 * that overflow to infinity are no rounding either: they loaded as lined
 * up (the bound was infinite too). */
static void test_group_offsets_rounding_per_axis(void **state)
{
    (void)state;
    const char *fmt = "{\"width\": 2, \"height\": 1, \"tilewidth\": 16, \"tileheight\": 16, "
                      "\"tilesets\": [{\"firstgid\": 1, \"tilecount\": 1}], \"layers\": ["
                      "{\"type\": \"group\", \"name\": \"g\", \"offsetx\": %s, \"layers\": ["
                      "{\"type\": \"group\", \"name\": \"h\", \"offsetx\": %s, \"layers\": ["
                      "{\"type\": \"tilelayer\", \"name\": \"walls\", \"offsetx\": %s, \"offsety\": %s, "
                      "\"data\": [1, 0]}]}]}]}";
    char buf[MAP_TEXT_MAX];
    snprintf(buf, sizeof buf, fmt, "1e17", "0", "-1e17", "8");
    expect_error(buf, NULL, "$.layers[0] (layer \"g\").layers[0] (layer \"h\").layers[0] (layer \"walls\"): "
                            "is drawn at an offset (0, 8), its groups' included; a layer that counts must "
                            "line up with the grid");
    snprintf(buf, sizeof buf, fmt, "1e308", "1e308", "-1e308", "0");
    expect_error(buf, NULL, "$.layers[0] (layer \"g\").layers[0] (layer \"h\").layers[0] (layer \"walls\"): "
                            "is drawn at an offset (inf, 0), its groups' included; a layer that counts must "
                            "line up with the grid");
}

/* An image collection tileset (a tile per image) keeps a tile's id when the
 * tiles before it are removed in Tiled, so its ids run past its tilecount
 * (the format specifications say so; Tiled gives the next tileset the
 * firstgid after the largest id). Such a map used to be refused ("id: must
 * be in 0..1"); it loads, and its gids up to the largest id are its tiles. */
static void test_image_collection_ids_past_tilecount(void **state)
{
    (void)state;
    /* Tiles 0 (open) and 5 (blocked) of 2; the next tileset starts at 7. */
    static const char *const want[] = { ".#3." };
    pd_grid *g = load_ok(
        "{\"width\": 4, \"height\": 1, \"tilewidth\": 8, \"tileheight\": 8, \"tilesets\": ["
        "{\"firstgid\": 1, \"columns\": 0, \"tilecount\": 2, \"tiles\": ["
        " {\"id\": 0, \"image\": \"a.png\", \"properties\": [{\"name\": \"blocked\", \"type\": \"bool\", \"value\": false}]},"
        " {\"id\": 5, \"image\": \"b.png\", \"properties\": [{\"name\": \"blocked\", \"type\": \"bool\", \"value\": true}]}]},"
        "{\"firstgid\": 7, \"tilecount\": 1, \"tiles\": [{\"id\": 0, \"properties\": [{\"name\": \"cost\", \"type\": \"int\", \"value\": 3}]}]}],"
        " \"layers\": [{\"type\": \"tilelayer\", \"data\": [1, 6, 7, 0]}]}",
        NULL);
    grid_picture_check(g, want, 1);
    pd_grid_destroy(g);
    g = load_ok("<map orientation=\"orthogonal\" width=\"4\" height=\"1\" tilewidth=\"8\" tileheight=\"8\">\n"
                " <tileset firstgid=\"1\" columns=\"0\" tilecount=\"2\">\n"
                "  <tile id=\"0\"><properties><property name=\"blocked\" type=\"bool\" value=\"false\"/></properties>"
                "<image source=\"a.png\" width=\"8\" height=\"8\"/></tile>\n"
                "  <tile id=\"5\"><properties><property name=\"blocked\" type=\"bool\" value=\"true\"/></properties>"
                "<image source=\"b.png\" width=\"8\" height=\"8\"/></tile>\n"
                " </tileset>\n"
                " <tileset firstgid=\"7\" tilecount=\"1\"><tile id=\"0\"><properties>"
                "<property name=\"cost\" type=\"int\" value=\"3\"/></properties></tile></tileset>\n"
                " <layer name=\"l\" width=\"4\" height=\"1\"><data encoding=\"csv\">1,6,7,0</data></layer>\n"
                "</map>",
                NULL);
    grid_picture_check(g, want, 1);
    pd_grid_destroy(g);
    /* A tile of a single-image tileset still may not pass its tilecount. */
    expect_error("{\"width\": 1, \"height\": 1, \"tilewidth\": 8, \"tileheight\": 8, \"tilesets\": ["
                 "{\"firstgid\": 1, \"image\": \"t.png\", \"tilecount\": 2, \"tiles\": [{\"id\": 5}]}],"
                 " \"layers\": [{\"type\": \"tilelayer\", \"data\": [1]}]}",
                 NULL, "$.tilesets[0].tiles[0].id: must be in 0..1");
}

/* A tileset's objectalignment (Tiled 1.4 on) says where its tile objects
 * stand on their (x, y): bottomleft when unspecified, as every test above
 * assumes, but topleft, center... when the tileset says so. Such objects
 * used to be drawn as bottom-left ones, a tile (or half of one) off, with
 * no word said. */
static void test_tile_object_alignment(void **state)
{
    (void)state;
    /* 3 x 3 cells of 8 px; tile 0 of each set blocks. Set "tl" (gids 1)
     * aligns topleft, "c" (gid 2) center, "br" (gid 3) bottomright. */
    const char *map =
        "<map orientation=\"orthogonal\" width=\"3\" height=\"3\" tilewidth=\"8\" tileheight=\"8\">\n"
        " <tileset firstgid=\"1\" name=\"tl\" tilecount=\"1\" objectalignment=\"topleft\"/>\n"
        " <tileset firstgid=\"2\" name=\"c\" tilecount=\"1\" objectalignment=\"center\"/>\n"
        " <tileset firstgid=\"3\" name=\"br\" tilecount=\"1\" objectalignment=\"bottomright\"/>\n"
        " <layer name=\"ground\" width=\"3\" height=\"3\"><data encoding=\"csv\">0,0,0,0,0,0,0,0,0</data></layer>\n"
        " <objectgroup name=\"things\">\n"
        /* topleft at (0, 0): cell (0, 0); bottomleft would be off the map. */
        "  <object id=\"1\" gid=\"1\" x=\"0\" y=\"0\" width=\"8\" height=\"8\"/>\n"
        /* center at (12, 12): cell (1, 1); bottomleft would give (1, 0). */
        "  <object id=\"2\" gid=\"2\" x=\"12\" y=\"12\" width=\"8\" height=\"8\"/>\n"
        /* bottomright at (24, 24): cell (2, 2); bottomleft would be off the map. */
        "  <object id=\"3\" gid=\"3\" x=\"24\" y=\"24\" width=\"8\" height=\"8\"/>\n"
        " </objectgroup>\n"
        "</map>";
    static const char *const want[] = { "#..", ".#.", "..#" };
    pd_grid *g = load_ok(map, NULL);
    grid_picture_check(g, want, 3);
    pd_grid_destroy(g);
    expect_error("{\"width\": 1, \"height\": 1, \"tilewidth\": 8, \"tileheight\": 8, \"tilesets\": ["
                 "{\"firstgid\": 1, \"tilecount\": 1, \"objectalignment\": \"middle\"}],"
                 " \"layers\": [{\"type\": \"tilelayer\", \"data\": [0]}]}",
                 NULL, "$.tilesets[0].objectalignment: unknown alignment \"middle\" (want unspecified, "
                       "topleft, top, topright, left, center, right, bottomleft, bottom or bottomright)");
}

/* A tile object with no width and height (old TMX wrote none) is drawn by
 * Tiled at its tile's size, its tileset's (16 px here, the map's cells are
 * 8): it used to cover nothing. */
static void test_tile_object_without_size(void **state)
{
    (void)state;
    static const char *const want[] = { "##.", "##.", "..." };
    pd_grid *g = load_ok(
        "<map orientation=\"orthogonal\" width=\"3\" height=\"3\" tilewidth=\"8\" tileheight=\"8\">\n"
        " <tileset firstgid=\"1\" name=\"big\" tilewidth=\"16\" tileheight=\"16\" tilecount=\"1\"/>\n"
        " <layer name=\"ground\" width=\"3\" height=\"3\"><data encoding=\"csv\">0,0,0,0,0,0,0,0,0</data></layer>\n"
        " <objectgroup name=\"things\"><object id=\"1\" gid=\"1\" x=\"0\" y=\"16\"/></objectgroup>\n"
        "</map>",
        NULL);
    grid_picture_check(g, want, 3);
    pd_grid_destroy(g);
}

/* A tileset's tileoffset moves its tiles as Tiled draws them, a tile
 * object's too, scaled with the object (its size over the tile's): tile
 * objects used to be read where they stand, a tile off here. */
static void test_tile_object_tileoffset(void **state)
{
    (void)state;
    /* Bottom-left at (0, 16), 8 x 8: cell (0, 1); moved by (8, -8): (1, 0). */
    static const char *const moved[] = { ".#.", "...", "..." };
    pd_grid *g = load_ok(
        "<map orientation=\"orthogonal\" width=\"3\" height=\"3\" tilewidth=\"8\" tileheight=\"8\">\n"
        " <tileset firstgid=\"1\" name=\"t\" tilewidth=\"8\" tileheight=\"8\" tilecount=\"1\">\n"
        "  <tileoffset x=\"8\" y=\"-8\"/>\n"
        " </tileset>\n"
        " <layer name=\"ground\" width=\"3\" height=\"3\"><data encoding=\"csv\">0,0,0,0,0,0,0,0,0</data></layer>\n"
        " <objectgroup name=\"things\"><object id=\"1\" gid=\"1\" x=\"0\" y=\"16\" width=\"8\" height=\"8\"/>"
        "</objectgroup>\n"
        "</map>",
        NULL);
    grid_picture_check(g, moved, 3);
    pd_grid_destroy(g);
    /* Drawn at twice the tile's size, the offset (4, 0) doubles too: columns
     * 1 and 2, where an unscaled one would give 0 and 1. */
    static const char *const scaled[] = { ".##.", ".##." };
    g = load_ok("{\"width\": 4, \"height\": 2, \"tilewidth\": 8, \"tileheight\": 8, \"tilesets\": ["
                "{\"firstgid\": 1, \"tilecount\": 1, \"tilewidth\": 8, \"tileheight\": 8, "
                "\"tileoffset\": {\"x\": 4, \"y\": 0}}], \"layers\": ["
                "{\"type\": \"tilelayer\", \"data\": [0, 0, 0, 0, 0, 0, 0, 0]},"
                "{\"type\": \"objectgroup\", \"objects\": [{\"gid\": 1, \"x\": 0, \"y\": 16, \"width\": 16, "
                "\"height\": 16}]}]}",
                NULL);
    grid_picture_check(g, scaled, 2);
    pd_grid_destroy(g);
    expect_error("{\"width\": 1, \"height\": 1, \"tilewidth\": 8, \"tileheight\": 8, \"tilesets\": ["
                 "{\"firstgid\": 1, \"tilecount\": 1, \"tileoffset\": {\"x\": \"4\"}}],"
                 " \"layers\": [{\"type\": \"tilelayer\", \"data\": [0]}]}",
                 NULL, "$.tilesets[0].tileoffset.x: must be a finite number, not a string");
}

/* An image collection's tile has its image's size (the tileset's
 * tilewidth and tileheight are only the largest image's), and Tiled reads a
 * tile object's width or height of 0 as its tile's, as when none is given.
 * Both used the tileset's size: a tileoffset was scaled by the object's
 * size over the largest image's (halved here: a cell off), a sizeless
 * object of a small image covered the largest image's area, and an object
 * with width 0 covered nothing. */
static void test_tile_object_size_is_its_tiles(void **state)
{
    (void)state;
    const char *tileset = "{\"firstgid\": 1, \"columns\": 0, \"tilewidth\": 16, \"tileheight\": 16, "
                          "\"tilecount\": 2, \"tileoffset\": {\"x\": %d, \"y\": 0}, \"tiles\": ["
                          "{\"id\": 0, \"image\": \"small.png\", \"imagewidth\": 8, \"imageheight\": 8},"
                          "{\"id\": 1, \"image\": \"big.png\", \"imagewidth\": 16, \"imageheight\": 16}]}";
    const char *fmt = "{\"width\": 4, \"height\": 2, \"tilewidth\": 8, \"tileheight\": 8, \"tilesets\": [%s],"
                      " \"layers\": [{\"type\": \"tilelayer\", \"data\": [0, 0, 0, 0, 0, 0, 0, 0]},"
                      "{\"type\": \"objectgroup\", \"objects\": [{\"gid\": 1, \"x\": 0, \"y\": 8, %s}]}]}";
    char ts[512], buf[MAP_TEXT_MAX];
    /* Drawn at its image's size: the offset (8, 0) is not scaled, cell 1. */
    snprintf(ts, sizeof ts, tileset, 8);
    snprintf(buf, sizeof buf, fmt, ts, "\"width\": 8, \"height\": 8");
    static const char *const moved[] = { ".#..", "...." };
    pd_grid *g = load_ok(buf, NULL);
    grid_picture_check(g, moved, 2);
    pd_grid_destroy(g);
    /* Width and height 0: the small image's 8 x 8, cell 0 only. */
    snprintf(ts, sizeof ts, tileset, 0);
    snprintf(buf, sizeof buf, fmt, ts, "\"width\": 0, \"height\": 0");
    static const char *const own[] = { "#...", "...." };
    g = load_ok(buf, NULL);
    grid_picture_check(g, own, 2);
    pd_grid_destroy(g);
    /* Old TMX: no size on the object; the image's size is on <image>. */
    g = load_ok("<map orientation=\"orthogonal\" width=\"4\" height=\"2\" tilewidth=\"8\" tileheight=\"8\">\n"
                " <tileset firstgid=\"1\" name=\"things\" tilewidth=\"16\" tileheight=\"16\" tilecount=\"2\" "
                "columns=\"0\">\n"
                "  <tile id=\"0\"><image source=\"small.png\" width=\"8\" height=\"8\"/></tile>\n"
                "  <tile id=\"1\"><image source=\"big.png\" width=\"16\" height=\"16\"/></tile>\n"
                " </tileset>\n"
                " <layer name=\"ground\" width=\"4\" height=\"2\"><data encoding=\"csv\">0,0,0,0,0,0,0,0</data>"
                "</layer>\n"
                " <objectgroup name=\"o\"><object id=\"1\" gid=\"1\" x=\"0\" y=\"8\"/></objectgroup>\n"
                "</map>",
                NULL);
    grid_picture_check(g, own, 2);
    pd_grid_destroy(g);
}

/* Removing tiles from an image collection in Tiled leaves gaps in its ids
 * (legal); a gid in a gap is no tile, and used to load as an untagged one
 * (open or blocked by the untagged rule, a guess). It is refused, naming
 * the gid, the layer and the cell, or the object. */
static void test_image_collection_gap_gid(void **state)
{
    (void)state;
    const char *fmt =
        "{\"width\": 3, \"height\": 1, \"tilewidth\": 8, \"tileheight\": 8, \"tilesets\": ["
        "{\"firstgid\": 1, \"columns\": 0, \"tilecount\": 2, \"tiles\": ["
        " {\"id\": 0, \"image\": \"a.png\"}, {\"id\": 5, \"image\": \"b.png\"}]}],"
        " \"layers\": [{\"type\": \"tilelayer\", \"name\": \"walls\", \"data\": [%s]}%s]}";
    char buf[MAP_TEXT_MAX];
    snprintf(buf, sizeof buf, fmt, "1, 3, 6", "");
    expect_error(buf, NULL, "$.layers[0] (layer \"walls\"): cell (1, 0): gid 3 is no tile of its image "
                            "collection (the tileset at firstgid 1 has no tile id 2; was it removed in Tiled?)");
    snprintf(buf, sizeof buf, fmt, "1, 0, 6",
             ", {\"type\": \"objectgroup\", \"name\": \"o\", \"objects\": [{\"gid\": 4, \"x\": 0, \"y\": 8, "
             "\"width\": 8, \"height\": 8}]}");
    expect_error(buf, NULL, "$.layers[1] (layer \"o\").objects[0]: gid 4 is no tile of its image "
                            "collection (the tileset at firstgid 1 has no tile id 3; was it removed in Tiled?)");
    /* The gap itself is legal: its tiles on the map load. */
    snprintf(buf, sizeof buf, fmt, "1, 0, 6", "");
    pd_grid *g = load_ok(buf, NULL);
    pd_grid_destroy(g);
}

/* ---- the configurable rule ---- */

static void test_property_names_and_untagged_tiles(void **state)
{
    (void)state;
    /* A tileset in another convention: "collides" blocks, "walkable"
     * opens, "speed" is the cost; tile 3 says nothing. */
    const char *map =
        "{\"width\": 4, \"height\": 1, \"layers\": [{\"type\": \"tilelayer\", \"data\": [1, 2, 3, 4]}],"
        " \"tilesets\": [{\"firstgid\": 1, \"tilecount\": 4, \"tiles\": ["
        "  {\"id\": 0, \"properties\": [{\"name\": \"collides\", \"type\": \"bool\", \"value\": true}]},"
        "  {\"id\": 1, \"properties\": [{\"name\": \"walkable\", \"type\": \"bool\", \"value\": true}]},"
        "  {\"id\": 2, \"properties\": [{\"name\": \"speed\", \"type\": \"int\", \"value\": 3},"
        "                              {\"name\": \"walkable\", \"type\": \"bool\", \"value\": true}]}]}]}";
    pd_tiled_rules r;
    pd_tiled_rules_default(&r);
    /* With the default names every tile is untagged: open by default,
     * blocked with untagged_tiles "blocked". */
    static const char *const by_default[] = { "...." };
    pd_grid *g = load_ok(map, &r);
    grid_picture_check(g, by_default, 1);
    pd_grid_destroy(g);
    r.untagged_open = 0;
    static const char *const untagged_blocked[] = { "####" };
    g = load_ok(map, &r);
    grid_picture_check(g, untagged_blocked, 1);
    pd_grid_destroy(g);
    snprintf(r.blocked_property, sizeof r.blocked_property, "collides");
    snprintf(r.cost_property, sizeof r.cost_property, "speed");
    snprintf(r.walkable_property, sizeof r.walkable_property, "walkable");
    static const char *const named[] = { "#.3#" };
    g = load_ok(map, &r);
    grid_picture_check(g, named, 1);
    pd_grid_destroy(g);
    r.untagged_open = 1;
    static const char *const untagged_open[] = { "#.3." };
    g = load_ok(map, &r);
    grid_picture_check(g, untagged_open, 1);
    pd_grid_destroy(g);
    expect_error("{\"width\": 1, \"height\": 1, \"layers\": [{\"type\": \"tilelayer\", \"data\": [1]}],"
                 " \"tilesets\": [{\"firstgid\": 1, \"tiles\": [{\"id\": 0, \"properties\": ["
                 "{\"name\": \"collides\", \"value\": true}, {\"name\": \"walkable\", \"value\": true}]}]}]}",
                 &r, "$.tilesets[0].tiles[0].properties: \"collides\" and \"walkable\" contradict each other");
}

/* ---- tile and object classes ---- */

/* The same map as Tiled 1.9 (class) and 1.10 (type) save it, in both
 * encodings. Tiles (gid = id + 1): 0 and 1 "Wall", 2 "Mud", 3 "Wall" but
 * blocked=false, 4 "Decor" with a collision box over its centre, 5 "Decor",
 * 6 "Floor". Row 1 has no tiles, only objects: a "Mud" rectangle, a
 * "Floor" one, a "Mud" one whose cost property says 2, a tile object of the
 * Mud tile whose own class is "Wall", one of the Floor tile, a "Decor"
 * rectangle. */
static const char *const classes_tmx =
    "<map orientation=\"orthogonal\" width=\"7\" height=\"2\" tilewidth=\"10\" tileheight=\"10\">\n"
    " <tileset firstgid=\"1\" tilecount=\"7\">\n"
    "  <tile id=\"0\" class=\"Wall\"/>\n"
    "  <tile id=\"1\" type=\"Wall\"/>\n"
    "  <tile id=\"2\" class=\"Mud\"/>\n"
    "  <tile id=\"3\" type=\"Wall\"><properties><property name=\"blocked\" type=\"bool\" value=\"false\"/></properties></tile>\n"
    "  <tile id=\"4\" type=\"Decor\"><objectgroup><object id=\"1\" x=\"0\" y=\"0\" width=\"10\" height=\"10\"/></objectgroup></tile>\n"
    "  <tile id=\"5\" type=\"Decor\"/>\n"
    "  <tile id=\"6\" class=\"Floor\"/>\n"
    " </tileset>\n"
    " <layer name=\"ground\" width=\"7\" height=\"2\"><data encoding=\"csv\">1,2,3,4,5,6,7,\n0,0,0,0,0,0,0</data></layer>\n"
    " <objectgroup name=\"things\">\n"
    "  <object id=\"1\" type=\"Mud\" x=\"0\" y=\"10\" width=\"10\" height=\"10\"/>\n"
    "  <object id=\"2\" class=\"Floor\" x=\"10\" y=\"10\" width=\"10\" height=\"10\"/>\n"
    "  <object id=\"3\" type=\"Mud\" x=\"20\" y=\"10\" width=\"10\" height=\"10\"><properties><property name=\"cost\" type=\"int\" value=\"2\"/></properties></object>\n"
    "  <object id=\"4\" type=\"Wall\" gid=\"3\" x=\"30\" y=\"20\" width=\"10\" height=\"10\"/>\n"
    "  <object id=\"5\" gid=\"7\" x=\"40\" y=\"20\" width=\"10\" height=\"10\"/>\n"
    "  <object id=\"6\" type=\"Decor\" x=\"50\" y=\"10\" width=\"10\" height=\"10\"/>\n"
    " </objectgroup>\n"
    "</map>";
static const char *const classes_tmj =
    "{\"type\": \"map\", \"orientation\": \"orthogonal\", \"width\": 7, \"height\": 2, \"tilewidth\": 10, \"tileheight\": 10,"
    " \"tilesets\": [{\"firstgid\": 1, \"tilecount\": 7, \"tiles\": ["
    "  {\"id\": 0, \"class\": \"Wall\"}, {\"id\": 1, \"type\": \"Wall\"}, {\"id\": 2, \"class\": \"Mud\"},"
    "  {\"id\": 3, \"type\": \"Wall\", \"properties\": [{\"name\": \"blocked\", \"type\": \"bool\", \"value\": false}]},"
    "  {\"id\": 4, \"type\": \"Decor\", \"objectgroup\": {\"type\": \"objectgroup\", \"objects\": [{\"x\": 0, \"y\": 0, \"width\": 10, \"height\": 10}]}},"
    "  {\"id\": 5, \"type\": \"Decor\"}, {\"id\": 6, \"class\": \"Floor\"}]}],"
    " \"layers\": [{\"type\": \"tilelayer\", \"name\": \"ground\", \"width\": 7, \"height\": 2, \"data\": [1, 2, 3, 4, 5, 6, 7, 0, 0, 0, 0, 0, 0, 0]},"
    "  {\"type\": \"objectgroup\", \"name\": \"things\", \"objects\": ["
    "   {\"type\": \"Mud\", \"x\": 0, \"y\": 10, \"width\": 10, \"height\": 10},"
    "   {\"class\": \"Floor\", \"x\": 10, \"y\": 10, \"width\": 10, \"height\": 10},"
    "   {\"type\": \"Mud\", \"x\": 20, \"y\": 10, \"width\": 10, \"height\": 10, \"properties\": [{\"name\": \"cost\", \"type\": \"int\", \"value\": 2}]},"
    "   {\"type\": \"Wall\", \"gid\": 3, \"x\": 30, \"y\": 20, \"width\": 10, \"height\": 10},"
    "   {\"gid\": 7, \"x\": 40, \"y\": 20, \"width\": 10, \"height\": 10},"
    "   {\"type\": \"Decor\", \"x\": 50, \"y\": 10, \"width\": 10, \"height\": 10}]}]}";

static void add_class(pd_tiled_rules *r, const char *name, uint8_t cell)
{
    assert_true(r->n_classes < PD_TILED_MAX_CLASSES);
    snprintf(r->classes[r->n_classes].name, sizeof r->classes[0].name, "%s", name);
    r->classes[r->n_classes++].cell = cell;
}

static void test_tile_and_object_classes(void **state)
{
    (void)state;
    pd_tiled_rules r;
    pd_tiled_rules_default(&r);
    /* No table: classes decide nothing, so only the property, the collision
     * box and the objects' default (block) do. */
    static const char *const no_table[] = { "###.###", "##2###." };
    /* Wall blocks, Mud costs 4, Floor is open: properties override the
     * class, a class the table does not name falls through (Decor: the
     * collision box, else untagged), an object's class overrides its
     * tile's, an open object does nothing. */
    static const char *const table[] = { "##4.##.", "4.2#.#." };
    static const char *const untagged_open[] = { "##4.#..", "4.2#.#." };
    const char *const maps[2] = { classes_tmx, classes_tmj };
    for (int m = 0; m < 2; m++) {
        rules_walled(&r);
        pd_grid *g = load_ok(maps[m], &r);
        grid_picture_check(g, no_table, 2);
        pd_grid_destroy(g);
        add_class(&r, "Wall", PD_CELL_BLOCKED);
        add_class(&r, "Mud", 4);
        add_class(&r, "Floor", PD_CELL_FREE);
        g = load_ok(maps[m], &r);
        grid_picture_check(g, table, 2);
        pd_grid_destroy(g);
        r.untagged_open = 1;
        g = load_ok(maps[m], &r);
        grid_picture_check(g, untagged_open, 2);
        pd_grid_destroy(g);
    }

    const char *head = "{\"width\": 1, \"height\": 1, \"layers\": [{\"type\": \"tilelayer\", \"data\": [1]}],"
                       " \"tilesets\": [{\"firstgid\": 1, \"tiles\": [";
    char buf[MAP_TEXT_MAX];
    snprintf(buf, sizeof buf, "%s{\"id\": 0, \"class\": \"Wall\", \"type\": \"Mud\"}]}]}", head);
    expect_error(buf, &r, "$.tilesets[0].tiles[0]: class \"Wall\" and type \"Mud\" disagree (both name the class)");
    snprintf(buf, sizeof buf, "%s{\"id\": 0, \"class\": 7}]}]}", head);
    expect_error(buf, &r, "$.tilesets[0].tiles[0].class: must be a string, not a number");
    expect_error("<map orientation=\"orthogonal\" width=\"1\" height=\"1\" tilewidth=\"8\" tileheight=\"8\">"
                 "<layer name=\"l\"><data encoding=\"csv\">0</data></layer>"
                 "<objectgroup name=\"o\"><object id=\"1\" class=\"Wall\" type=\"Mud\" width=\"8\" height=\"8\"/></objectgroup></map>",
                 &r, "$.layers[1] (layer \"o\").objects[0]: class \"Wall\" and type \"Mud\" disagree (both name the class)");
    /* A table built by hand is checked, not overread. */
    r.n_classes = PD_TILED_MAX_CLASSES + 1;
    expect_error(buf, &r, "$: 33 classes; at most PD_TILED_MAX_CLASSES (32)");
    r.n_classes = 1;
    memset(r.classes[0].name, 'C', sizeof r.classes[0].name);
    expect_error(buf, &r, "$: class 0 of the rules has an unterminated name");
}

static void test_orientation_and_xml_errors(void **state)
{
    (void)state;
    static const char *const orientations[] = { "isometric", "staggered", "hexagonal" };
    char buf[512], want[256];
    for (size_t i = 0; i < 3; i++) {
        snprintf(buf, sizeof buf, "<map orientation=\"%s\" width=\"2\" height=\"2\"/>", orientations[i]);
        snprintf(want, sizeof want, "$.orientation: is \"%s\"; only orthogonal maps are supported "
                                    "(isometric, staggered and hexagonal are not)", orientations[i]);
        expect_error(buf, NULL, want);
    }
    expect_error("<map width=\"2\">\n <layer></map>", NULL,
                 "2:15: invalid XML: Premature end of data in tag map line 1");
    expect_error("<tileset name=\"t\"/>", NULL, "$.type: is \"tileset\"; a scene needs a map (type \"map\")");
    expect_error("<level/>", NULL, "the root element is <level>, not <map> or <tileset>");
    expect_error("<map width=\"two\" height=\"2\"/>", NULL, "$.width: must be an integer, not a string");
    /* An external entity is never read into the map: a DOCTYPE, which
     * would declare one, is refused before its entities are read. */
    expect_error("<!DOCTYPE map [<!ENTITY w SYSTEM \"/etc/hostname\">]>"
                 "<map orientation=\"orthogonal\" width=\"&w;\" height=\"1\"/>", NULL,
                 "1:1: a DOCTYPE is refused: maps hold no DTD or ENTITY (Tiled never writes one)");
    /* Issue 29 finding 8, the billion laughs: 10 levels of 10 references
     * (10^10 "lol"s, about 30 GB expanded). Refused at the DOCTYPE, well
     * within the test's time; before the fix 767 such bytes took 47.7 s
     * and 585 MiB and were answered OK. */
    char laughs[2048];
    size_t n = (size_t)snprintf(laughs, sizeof laughs, "<?xml version=\"1.0\"?>\n<!DOCTYPE map [\n"
                                                       " <!ENTITY lol0 \"lol\">\n");
    for (int level = 1; level <= 10; level++) {
        n += (size_t)snprintf(laughs + n, sizeof laughs - n, " <!ENTITY lol%d \"", level);
        for (int k = 0; k < 10; k++)
            n += (size_t)snprintf(laughs + n, sizeof laughs - n, "&lol%d;", level - 1);
        n += (size_t)snprintf(laughs + n, sizeof laughs - n, "\">\n");
    }
    snprintf(laughs + n, sizeof laughs - n,
             "]>\n<map orientation=\"orthogonal\" width=\"1\" height=\"1\"><properties>"
             "<property name=\"x\" value=\"&lol10;\"/></properties></map>");
    expect_error(laughs, NULL, "2:1: a DOCTYPE is refused: maps hold no DTD or ENTITY (Tiled never writes one)");
}

/* ---- external tilesets ---- */

/* tests/data/tiled/NAME read with rules (NULL: the default ones), what
 * they decided going to stats (may be NULL). dir NULL: the map's path
 * locates its tilesets; else the map is a buffer with no file, and dir
 * does. */
static pd_grid *load_file_with(const char *name, const char *root, const char *dir,
                               const pd_tiled_rules *rules, pd_tiled_stats *stats, char *err,
                               size_t errlen)
{
    char path[512];
    snprintf(path, sizeof path, "%s/tiled/%s", PD_TEST_DATA_DIR, name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char text[MAP_TEXT_MAX];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    pd_tiled_rules def;
    if (!rules) {
        pd_tiled_rules_default(&def);
        rules = &def;
    }
    const pd_tiled_origin origin = { .map_path = dir ? NULL : path, .root_dir = root, .map_dir = dir };
    return pd_tiled_load(text, n, rules, &origin, NULL, NULL, stats, err, errlen);
}

static pd_grid *load_file_in(const char *name, const char *root, const char *dir, char *err,
                             size_t errlen)
{
    return load_file_with(name, root, dir, NULL, NULL, err, errlen);
}

static pd_grid *load_file(const char *name, const char *root, char *err, size_t errlen)
{
    return load_file_in(name, root, NULL, err, errlen);
}

static void test_external_tilesets(void **state)
{
    (void)state;
    char err[512] = "";
    const char *root = PD_TEST_DATA_DIR "/tiled";
    /* floor.tsj: 1 open, 2 cost 6; walls.tsx: 3 cost 2, 4 blocked. */
    pd_grid *g = load_file("external.tmx", root, err, sizeof err);
    if (!g)
        fail_msg("%s", err);
    static const char *const want[] = { ".62", "#.." };
    grid_picture_check(g, want, 2);
    pd_grid_destroy(g);
    /* The same map as a buffer (a scene created at run time), its
     * directory given instead of its path. */
    g = load_file_in("external.tmx", root, root, err, sizeof err);
    if (!g)
        fail_msg("%s", err);
    grid_picture_check(g, want, 2);
    pd_grid_destroy(g);
    assert_null(load_file_in("escape.tmx", root, root, err, sizeof err));
    assert_non_null(strstr(err, " and the map's directory"));
    assert_null(load_file("escape.tmx", root, err, sizeof err));
    assert_non_null(strstr(err, "$.tilesets[0].source: tileset \"../scene4_base64.tmj\" resolves to "));
    assert_non_null(strstr(err, "scene4_base64.tmj, outside the config directory "));
    assert_non_null(strstr(err, " and the map's directory"));
    /* The same file is fine when the config directory holds it. */
    g = load_file("escape.tmx", PD_TEST_DATA_DIR, err, sizeof err);
    assert_null(g);
    assert_string_equal(err, "$.tilesets[0].source: ../scene4_base64.tmj: $.type: is \"map\", not a tileset");
    assert_null(load_file("chained.tmx", root, err, sizeof err));
    assert_string_equal(err, "$.tilesets[0].source: sub/chained.tsj: $.source: an external tileset cannot point to another");
    assert_null(load_file("missing.tmx", root, err, sizeof err));
    assert_string_equal(err, "$.tilesets[0].source: tileset \"sub/missing.tsj\": No such file or directory");
}

/* ---- the untagged default (issue 30) ---- */

/* What tests/data/tiled/walls_marked.* and floors_marked.* are drawn to
 * give: 26 walls, 22 open cells. */
static const char *const marked_rooms[] = {
    "########",
    "#......#",
    "#.##...#",
    "#.#....#",
    "#......#",
    "####.###",
};
#define MARKED_WALLS 26u
#define MARKED_FLOORS 22u

static void expect_stats(const pd_tiled_stats *st, const char *layers, const uint64_t want[PD_TILED_BY_KINDS])
{
    assert_string_equal(st->layers, layers);
    for (int k = 0; k < PD_TILED_BY_KINDS; k++) {
        if (st->cells[k] != want[k])
            fail_msg("rule %d decided %llu cells, want %llu", k, (unsigned long long)st->cells[k],
                     (unsigned long long)want[k]);
    }
}

static pd_grid *load_marked(const char *name, const pd_tiled_rules *r, pd_tiled_stats *st)
{
    char err[512] = "";
    pd_grid *g = load_file_with(name, NULL, NULL, r, st, err, sizeof err);
    if (!g)
        fail_msg("%s: %s", name, err);
    return g;
}

/* The common way to draw a map: floor tiles with no property, the wall
 * tile blocked = true on a layer of its own. With the default rules it is
 * the rooms it shows; read with untagged_tiles "blocked" (the default
 * before issue 30) it was solid wall, which a scene now refuses, saying
 * which layers were read and which rule walled them. */
static void test_untagged_tiles_are_open_by_default(void **state)
{
    (void)state;
    static const char *const files[] = { "walls_marked.tmx", "walls_marked.tmj" };
    static const char *const walled[] = { "########", "########", "########",
                                          "########", "########", "########" };
    for (size_t i = 0; i < 2; i++) {
        pd_tiled_stats st;
        pd_grid *g = load_marked(files[i], NULL, &st);
        grid_picture_check(g, marked_rooms, 6);
        pd_grid_destroy(g);
        /* The walls layer's tile decides the walls, the untagged ground the rest. */
        const uint64_t by_default[PD_TILED_BY_KINDS] = { [PD_TILED_BY_PROPERTY] = MARKED_WALLS,
                                                          [PD_TILED_BY_UNTAGGED] = MARKED_FLOORS };
        expect_stats(&st, "ground, walls", by_default);
        assert_int_equal(st.untagged_open, 1);
        char line[512];
        pd_tiled_stats_format(&st, line, sizeof line);
        assert_string_equal(line, "layers ground, walls: 26 by property, 22 untagged (untagged_tiles: open)");

        pd_tiled_rules r;
        rules_walled(&r);
        g = load_marked(files[i], &r, &st);
        grid_picture_check(g, walled, 6);
        pd_grid_destroy(g);
        /* The ground layer comes first: its untagged tiles wall every cell. */
        const uint64_t all_untagged[PD_TILED_BY_KINDS] = { [PD_TILED_BY_UNTAGGED] = 48 };
        expect_stats(&st, "ground, walls", all_untagged);
        pd_tiled_stats_format(&st, line, sizeof line);
        assert_string_equal(line, "layers ground, walls: 48 untagged (untagged_tiles: blocked)");
    }

    /* Through the config, as pathd loads it: served as drawn, or refused. */
    for (size_t i = 0; i < 2; i++) {
        for (int blocked = 0; blocked < 2; blocked++) {
            char json[512], err[512] = "";
            snprintf(json, sizeof json,
                     "{\"scenes\": [{\"name\": \"rooms\", \"map\": \"tiled/%s\", \"format\": \"tiled\"%s}]}",
                     files[i], blocked ? ", \"untagged_tiles\": \"blocked\"" : "");
            pd_scene *s = load_config_scene(json, err, sizeof err);
            if (blocked) {
                assert_null(s);
                char want[512];
                snprintf(want, sizeof want, "scene 'rooms': %s/tiled/%s: no walkable cell: layers ground, "
                         "walls: 48 untagged (untagged_tiles: blocked)", PD_TEST_DATA_DIR, files[i]);
                assert_string_equal(err, want);
            } else {
                if (!s)
                    fail_msg("%s", err);
                grid_picture_check(s->grid, marked_rooms, 6);
                assert_int_equal(s->passable_cells, MARKED_FLOORS);
                char line[512];
                pd_scene_describe(s, line, sizeof line);
                assert_string_equal(line, "8x6, 22 of 48 cells walkable (45.8%); layers ground, walls: "
                                          "26 by property, 22 untagged (untagged_tiles: open)");
                pd_scene_release(s);
            }
        }
    }
}

/* Tilesets that mark floors instead: the floor tile walkable = true, the
 * wall tile nothing, read with walkable_property and untagged_tiles
 * "blocked". With the default rules nothing decides either tile, so it
 * is all open: such a tileset needs both settings. */
static void test_floor_marking_convention(void **state)
{
    (void)state;
    static const char *const files[] = { "floors_marked.tmx", "floors_marked.tmj" };
    static const char *const all_open[] = { "........", "........", "........",
                                            "........", "........", "........" };
    for (size_t i = 0; i < 2; i++) {
        pd_tiled_rules r;
        pd_tiled_rules_default(&r);
        snprintf(r.walkable_property, sizeof r.walkable_property, "walkable");
        r.untagged_open = 0;
        pd_tiled_stats st;
        pd_grid *g = load_marked(files[i], &r, &st);
        grid_picture_check(g, marked_rooms, 6);
        pd_grid_destroy(g);
        const uint64_t floors[PD_TILED_BY_KINDS] = { [PD_TILED_BY_PROPERTY] = MARKED_FLOORS,
                                                      [PD_TILED_BY_UNTAGGED] = MARKED_WALLS };
        expect_stats(&st, "ground", floors);
        assert_int_equal(st.untagged_open, 0);

        pd_tiled_rules_default(&r);
        g = load_marked(files[i], &r, &st);
        grid_picture_check(g, all_open, 6);
        pd_grid_destroy(g);
        const uint64_t untagged[PD_TILED_BY_KINDS] = { [PD_TILED_BY_UNTAGGED] = 48 };
        expect_stats(&st, "ground", untagged);

        /* The config's keys for it. */
        char json[512], err[512] = "";
        snprintf(json, sizeof json,
                 "{\"scenes\": [{\"name\": \"floors\", \"map\": \"tiled/%s\", \"format\": \"tiled\","
                 " \"walkable_property\": \"walkable\", \"untagged_tiles\": \"blocked\"}]}", files[i]);
        pd_scene *s = load_config_scene(json, err, sizeof err);
        if (!s)
            fail_msg("%s", err);
        grid_picture_check(s->grid, marked_rooms, 6);
        pd_scene_release(s);
    }
}

/* Which rule the counts give a cell: that of the first tile or object, in
 * layer order, that gives the value the cell keeps; each cell once. */
static void test_rule_counts(void **state)
{
    (void)state;
    /* Tiles (gid = id + 1): 0 untagged, 1 blocked = true, 2 class "Mud"
     * (cost 4), 3 a collision box over its centre. A nameless second tile
     * layer, then a plain rectangle collider over cell 4 and a "Mud" one
     * over cell 5. */
    const char *map =
        "{\"width\": 7, \"height\": 1, \"tilewidth\": 10, \"tileheight\": 10,"
        " \"tilesets\": [{\"firstgid\": 1, \"tilecount\": 4, \"tiles\": ["
        "  {\"id\": 1, \"properties\": [{\"name\": \"blocked\", \"type\": \"bool\", \"value\": true}]},"
        "  {\"id\": 2, \"type\": \"Mud\"},"
        "  {\"id\": 3, \"objectgroup\": {\"objects\": [{\"x\": 0, \"y\": 0, \"width\": 10, \"height\": 10}]}}]}],"
        " \"layers\": [{\"type\": \"tilelayer\", \"name\": \"a\", \"data\": [1, 3, 4, 0, 0, 0, 0]},"
        "  {\"type\": \"tilelayer\", \"data\": [0, 2, 2, 2, 0, 0, 0]},"
        "  {\"type\": \"objectgroup\", \"name\": \"o\", \"objects\": ["
        "   {\"x\": 40, \"y\": 0, \"width\": 10, \"height\": 10},"
        "   {\"type\": \"Mud\", \"x\": 50, \"y\": 0, \"width\": 10, \"height\": 10}]}]}";
    pd_tiled_rules r;
    pd_tiled_rules_default(&r);
    snprintf(r.classes[0].name, sizeof r.classes[0].name, "Mud");
    r.classes[0].cell = 4;
    r.n_classes = 1;
    pd_tiled_stats st;
    char err[256] = "";
    pd_grid *g = pd_tiled_load(map, strlen(map), &r, NULL, NULL, NULL, &st, err, sizeof err);
    if (!g)
        fail_msg("%s", err);
    /* 0: untagged, open. 1: the class's cost, then the later layer's
     * blocked tile (property). 2: the collision box, the first of two
     * blockers. 3: the blocked tile. 4: the plain rectangle. 5: the Mud
     * rectangle's class. 6: no tile. */
    static const char *const want[] = { ".####4." };
    grid_picture_check(g, want, 1);
    pd_grid_destroy(g);
    const uint64_t counts[PD_TILED_BY_KINDS] = {
        [PD_TILED_BY_PROPERTY] = 2, [PD_TILED_BY_CLASS] = 1, [PD_TILED_BY_SHAPE] = 1,
        [PD_TILED_BY_OBJECT] = 1,   [PD_TILED_BY_UNTAGGED] = 1, [PD_TILED_BY_NO_TILE] = 1,
    };
    expect_stats(&st, "a, $.layers[1], o", counts);
    char line[512];
    pd_tiled_stats_format(&st, line, sizeof line);
    assert_string_equal(line, "layers a, $.layers[1], o: 2 by property, 1 by class, 1 by collision "
                              "shape, 1 by object, 1 untagged (untagged_tiles: open), 1 with no tile");
    /* The same grid without stats. */
    g = load_ok(map, &r);
    grid_picture_check(g, want, 1);
    pd_grid_destroy(g);

    /* A long list of layers is cut, never overrun. */
    char many[MAP_TEXT_MAX];
    size_t n = (size_t)snprintf(many, sizeof many, "{\"width\": 1, \"height\": 1, \"layers\": [");
    for (int k = 0; k < 20; k++)
        n += (size_t)snprintf(many + n, sizeof many - n, "%s{\"type\": \"tilelayer\", \"name\": \"layer-%02d\", \"data\": [0]}",
                              k ? ", " : "", k);
    snprintf(many + n, sizeof many - n, "]}");
    g = pd_tiled_load(many, strlen(many), &r, NULL, NULL, NULL, &st, err, sizeof err);
    if (!g)
        fail_msg("%s", err);
    pd_grid_destroy(g);
    assert_true(strlen(st.layers) < sizeof st.layers);
    assert_int_equal(strncmp(st.layers, "layer-00, layer-01, ", 20), 0);
    assert_non_null(strstr(st.layers, ", ..."));
    assert_true(st.cells[PD_TILED_BY_NO_TILE] == 1);
}

/* The demo scene (zlib and gzip layers, an external .tsx with a tile
 * collision box, colliders) against its hand-drawn picture. */
static void test_demo_harbour_matches_its_picture(void **state)
{
    (void)state;
    char err[512] = "";
    const char *path = PD_SOURCE_DIR "/config/scenes/harbour.tmx";
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char text[MAP_TEXT_MAX];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    pd_tiled_rules r;
    pd_tiled_rules_default(&r);
    const pd_tiled_origin origin = { .map_path = path, .root_dir = PD_SOURCE_DIR "/config" };
    pd_grid *g = pd_tiled_load(text, n, &r, &origin, NULL, NULL, NULL, err, sizeof err);
    if (!g)
        fail_msg("%s", err);
    f = fopen(PD_TEST_DATA_DIR "/scene5_harbour.txt", "rb");
    assert_non_null(f);
    char picture[4096];
    n = fread(picture, 1, sizeof picture - 1, f);
    fclose(f);
    picture[n] = '\0';
    const char *rows[12] = { 0 };
    int32_t h = 0;
    for (char *line = strtok(picture, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] != ';') {
            assert_true(h < 12);
            rows[h++] = line;
        }
    }
    assert_int_equal(h, 12);
    grid_picture_check(g, rows, h);
    pd_grid_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_encoding_gives_the_same_grid),
        cmocka_unit_test(test_bad_layer_data),
        cmocka_unit_test(test_infinite_maps),
        cmocka_unit_test(test_infinite_scene_origin),
        cmocka_unit_test(test_object_colliders),
        cmocka_unit_test(test_group_offsets),
        cmocka_unit_test(test_group_offsets_rounding),
        cmocka_unit_test(test_group_offsets_rounding_per_axis),
        cmocka_unit_test(test_tile_object_alignment),
        cmocka_unit_test(test_tile_object_without_size),
        cmocka_unit_test(test_tile_object_tileoffset),
        cmocka_unit_test(test_tile_object_size_is_its_tiles),
        cmocka_unit_test(test_image_collection_gap_gid),
        cmocka_unit_test(test_image_collection_ids_past_tilecount),
        cmocka_unit_test(test_property_names_and_untagged_tiles),
        cmocka_unit_test(test_tile_and_object_classes),
        cmocka_unit_test(test_orientation_and_xml_errors),
        cmocka_unit_test(test_external_tilesets),
        cmocka_unit_test(test_demo_harbour_matches_its_picture),
        cmocka_unit_test(test_untagged_tiles_are_open_by_default),
        cmocka_unit_test(test_floor_marking_convention),
        cmocka_unit_test(test_rule_counts),
        cmocka_unit_test(test_large_layer_in_pieces),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
