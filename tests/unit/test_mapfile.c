/*
 * test_mapfile.c - the Moving AI and plain ASCII map parsers.
 *
 * Good maps are checked cell by cell; bad maps must come back as NULL with
 * the exact 1-based line and column of the first offending character (0 where
 * the error is the end of the input rather than a character), because that
 * is what an operator fixing a map file needs. Every error case also runs
 * with err == NULL to show the parser does not need somewhere to write.
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
#include "pd_mapfile.h"

typedef pd_grid *(*parse_fn)(const char *buf, size_t len, pd_parse_error *err);

/* Parses a NUL-terminated text and asserts success. */
static pd_grid *parse_ok(parse_fn parse, const char *text)
{
    pd_parse_error err;
    memset(&err, 0, sizeof err);
    pd_grid *g = parse(text, strlen(text), &err);
    if (!g)
        fail_msg("parse failed at %d:%d: %s\n--- input ---\n%s", err.line, err.column,
                 err.message, text);
    return g;
}

/* Parses len bytes and asserts a refusal at line:column with a message. */
static void expect_error_n(parse_fn parse, const char *buf, size_t len, int line, int column)
{
    pd_parse_error err;
    memset(&err, 0x55, sizeof err);
    pd_grid *g = parse(buf, len, &err);
    if (g) {
        pd_grid_destroy(g);
        fail_msg("parser accepted a bad map:\n%.*s", (int)len, buf);
    }
    if (err.line != line || err.column != column)
        fail_msg("error at %d:%d (%s), want %d:%d\n--- input ---\n%.*s", err.line, err.column,
                 err.message, line, column, (int)len, buf);
    assert_true(memchr(err.message, '\0', sizeof err.message) != NULL);
    assert_true(strlen(err.message) > 0);
    assert_null(parse(buf, len, NULL));
}

static void expect_error(parse_fn parse, const char *text, int line, int column)
{
    expect_error_n(parse, text, strlen(text), line, column);
}

/* Returns a malloc'd copy of text with every "\n" turned into "\r\n". */
static char *to_crlf(const char *text, size_t *len_out)
{
    size_t n = strlen(text), extra = 0;
    for (size_t i = 0; i < n; i++)
        extra += text[i] == '\n';
    char *out = malloc(n + extra + 1);
    assert_non_null(out);
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        if (text[i] == '\n')
            out[j++] = '\r';
        out[j++] = text[i];
    }
    out[j] = '\0';
    *len_out = j;
    return out;
}

static char *read_data_file(const char *name, size_t *len_out)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", PD_TEST_DATA_DIR, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    char *buf = malloc(1 << 16);
    assert_non_null(buf);
    size_t n = fread(buf, 1, 1 << 16, f);
    fclose(f);
    assert_true(n > 0 && n < (1 << 16));
    *len_out = n;
    return buf;
}

/* ---------------------------------------------------------------- Moving AI */

static const char *const movingai_rows[] = { "..#.", "###.", "...." };
#define MOVINGAI_BODY "map\n.G@S\nOTW.\n....\n"

static void test_movingai_good_lf(void **state)
{
    pd_grid *g = parse_ok(pd_map_parse_movingai, "type octile\nheight 3\nwidth 4\n" MOVINGAI_BODY);
    grid_picture_check(g, movingai_rows, 3);
    assert_int_equal(g->uniform_cost, 1);
    pd_grid_destroy(g);
}

static void test_movingai_good_crlf(void **state)
{
    size_t len;
    char *crlf = to_crlf("type octile\nheight 3\nwidth 4\n" MOVINGAI_BODY, &len);
    pd_parse_error err;
    pd_grid *g = pd_map_parse_movingai(crlf, len, &err);
    if (!g)
        fail_msg("CRLF map refused at %d:%d: %s", err.line, err.column, err.message);
    grid_picture_check(g, movingai_rows, 3);
    pd_grid_destroy(g);
    free(crlf);
}

static void test_movingai_header_orders(void **state)
{
    static const char *const headers[] = {
        "height 3\nwidth 4\ntype octile\n",
        "width 4\ntype octile\nheight 3\n",
        "width 4\nheight 3\ntype octile\n",
        "type octile\nwidth 4\nheight 3\n",
        "height   3\nwidth 4\ntype octile\n", /* extra spaces before the value */
    };
    for (size_t i = 0; i < sizeof headers / sizeof headers[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, "%s%s", headers[i], MOVINGAI_BODY);
        pd_grid *g = parse_ok(pd_map_parse_movingai, text);
        grid_picture_check(g, movingai_rows, 3);
        pd_grid_destroy(g);
    }
}

static void test_movingai_every_terrain_char(void **state)
{
    /* Each byte value in the middle of a 3-wide row: only the seven terrain
     * characters are accepted, everything else names column 2 of line 5. */
    for (int c = 0; c < 256; c++) {
        if (c == '\n')
            continue;
        char text[64];
        int n = snprintf(text, sizeof text, "type octile\nheight 1\nwidth 3\nmap\n.%c.\n", 'X');
        text[n - 3] = (char)c;
        int free_char = c == '.' || c == 'G' || c == 'S';
        int blocked_char = c == '@' || c == 'O' || c == 'T' || c == 'W';
        if (free_char || blocked_char) {
            pd_grid *g = pd_map_parse_movingai(text, (size_t)n, NULL);
            assert_non_null(g);
            assert_int_equal(pd_grid_get(g, 0, 0), PD_CELL_FREE);
            assert_int_equal(pd_grid_get(g, 1, 0), free_char ? PD_CELL_FREE : PD_CELL_BLOCKED);
            assert_int_equal(pd_grid_get(g, 2, 0), PD_CELL_FREE);
            pd_grid_destroy(g);
        } else {
            expect_error_n(pd_map_parse_movingai, text, (size_t)n, 5, 2);
        }
    }
}

static void test_movingai_no_trailing_newline(void **state)
{
    pd_grid *g = parse_ok(pd_map_parse_movingai, "type octile\nheight 2\nwidth 2\nmap\n.@\n@.");
    static const char *const rows[] = { ".#", "#." };
    grid_picture_check(g, rows, 2);
    pd_grid_destroy(g);

    size_t len;
    char *crlf = to_crlf("type octile\nheight 2\nwidth 2\nmap\n.@\n@.", &len);
    g = pd_map_parse_movingai(crlf, len, NULL);
    assert_non_null(g);
    grid_picture_check(g, rows, 2);
    pd_grid_destroy(g);
    free(crlf);
}

static void test_movingai_trailing_blank_lines(void **state)
{
    pd_grid *g = parse_ok(pd_map_parse_movingai, "type octile\nheight 1\nwidth 2\nmap\n..\n\n\n  \n\t\n");
    assert_int_equal(g->width, 2);
    assert_int_equal(g->height, 1);
    pd_grid_destroy(g);

    size_t len;
    char *crlf = to_crlf("type octile\nheight 1\nwidth 2\nmap\n..\n\n\n", &len);
    g = pd_map_parse_movingai(crlf, len, NULL);
    assert_non_null(g);
    pd_grid_destroy(g);
    free(crlf);
}

static void test_movingai_respects_len(void **state)
{
    /* Bytes past len are not part of the map, even if they would be rows. */
    const char *text = "type octile\nheight 1\nwidth 2\nmap\n..\n..\n";
    size_t len = strlen(text) - 3;
    pd_grid *g = pd_map_parse_movingai(text, len, NULL);
    assert_non_null(g);
    assert_int_equal(g->height, 1);
    pd_grid_destroy(g);
}

static void test_movingai_missing_header_fields(void **state)
{
    /* A missing field is noticed at the 'map' line; no column is at fault. */
    expect_error(pd_map_parse_movingai, "height 1\nwidth 2\nmap\n..\n", 3, 0);
    expect_error(pd_map_parse_movingai, "type octile\nwidth 2\nmap\n..\n", 3, 0);
    expect_error(pd_map_parse_movingai, "type octile\nheight 1\nmap\n..\n", 3, 0);
    expect_error(pd_map_parse_movingai, "map\n..\n", 1, 0);
    /* Without a 'map' line the first row is an unknown header line. */
    expect_error(pd_map_parse_movingai, "type octile\nheight 1\nwidth 2\n..\n", 4, 1);
    /* The input ends inside the header: reported at the last line read. */
    expect_error(pd_map_parse_movingai, "type octile\nheight 1\nwidth 2\n", 3, 0);
    expect_error(pd_map_parse_movingai, "type octile\nheight 1\nwidth 2", 3, 0);
    expect_error(pd_map_parse_movingai, "type octile\nheight 1\nwidth 2\nMAP\n..\n", 4, 1);
    expect_error(pd_map_parse_movingai, "type octile\nheight 1\nwidth 2\nmap \n..\n", 4, 1);
}

static void test_movingai_bad_type(void **state)
{
    expect_error(pd_map_parse_movingai, "type tile\nheight 1\nwidth 1\nmap\n.\n", 1, 6);
    expect_error(pd_map_parse_movingai, "height 1\ntype octile4\nwidth 1\nmap\n.\n", 2, 6);
    expect_error(pd_map_parse_movingai, "type \nheight 1\nwidth 1\nmap\n.\n", 1, 6);
    /* "type" without a value is not a type line at all. */
    expect_error(pd_map_parse_movingai, "type\nheight 1\nwidth 1\nmap\n.\n", 1, 1);
    expect_error(pd_map_parse_movingai, "typeoctile\nheight 1\nwidth 1\nmap\n.\n", 1, 1);
}

static void test_movingai_bad_sizes(void **state)
{
    /* The value starts at column 8 of "height N" and column 7 of "width N". */
    expect_error(pd_map_parse_movingai, "type octile\nheight abc\nwidth 1\nmap\n.\n", 2, 8);
    expect_error(pd_map_parse_movingai, "type octile\nheight 0\nwidth 1\nmap\n.\n", 2, 8);
    expect_error(pd_map_parse_movingai, "type octile\nheight -1\nwidth 1\nmap\n.\n", 2, 8);
    expect_error(pd_map_parse_movingai, "type octile\nheight 1x\nwidth 1\nmap\n.\n", 2, 8);
    expect_error(pd_map_parse_movingai, "type octile\nheight \nwidth 1\nmap\n.\n", 2, 8);
    expect_error(pd_map_parse_movingai, "type octile\nheight 16385\nwidth 1\nmap\n.\n", 2, 8);
    expect_error(pd_map_parse_movingai, "type octile\nheight 99999999999999999999999\nwidth 1\nmap\n.\n", 2, 8);
    expect_error(pd_map_parse_movingai, "type octile\nheight 1\nwidth zero\nmap\n.\n", 3, 7);
    expect_error(pd_map_parse_movingai, "type octile\nheight 1\nwidth 0\nmap\n.\n", 3, 7);
    expect_error(pd_map_parse_movingai, "type octile\nheight 1\nwidth 16385\nmap\n.\n", 3, 7);
    expect_error(pd_map_parse_movingai, "width 4294967297\ntype octile\nheight 1\nmap\n.\n", 1, 7);
    /* The largest side is accepted by the header; the missing rows fail then. */
    expect_error(pd_map_parse_movingai, "type octile\nheight 16384\nwidth 1\nmap\n.\n", 6, 0);
}

static void test_movingai_row_errors(void **state)
{
    const char *head = "type octile\nheight 2\nwidth 3\nmap\n";
    char text[256];
    /* Short row: the first missing cell. */
    snprintf(text, sizeof text, "%s...\n..\n", head);
    expect_error(pd_map_parse_movingai, text, 6, 3);
    snprintf(text, sizeof text, "%s\n...\n", head);
    expect_error(pd_map_parse_movingai, text, 5, 1);
    /* Long row: the first cell too many. */
    snprintf(text, sizeof text, "%s....\n...\n", head);
    expect_error(pd_map_parse_movingai, text, 5, 4);
    /* Too few rows: the input ends where row 2 should be. */
    snprintf(text, sizeof text, "%s...\n", head);
    expect_error(pd_map_parse_movingai, text, 6, 0);
    snprintf(text, sizeof text, "%s", head);
    expect_error(pd_map_parse_movingai, text, 5, 0);
    /* Extra rows, also after blank lines. */
    snprintf(text, sizeof text, "%s...\n...\n...\n", head);
    expect_error(pd_map_parse_movingai, text, 7, 1);
    snprintf(text, sizeof text, "%s...\n...\n\n...\n", head);
    expect_error(pd_map_parse_movingai, text, 8, 1);
    /* A bad character in the second row. */
    snprintf(text, sizeof text, "%s...\n.#.\n", head);
    expect_error(pd_map_parse_movingai, text, 6, 2);
}

static void test_movingai_row_errors_crlf(void **state)
{
    /* The CR of a CRLF ending is not a cell: columns stay those of LF input. */
    size_t len;
    char *crlf = to_crlf("type octile\nheight 2\nwidth 3\nmap\n...\n..\n", &len);
    expect_error_n(pd_map_parse_movingai, crlf, len, 6, 3);
    free(crlf);
    crlf = to_crlf("type octile\nheight 2\nwidth 3\nmap\n...\n.x.\n", &len);
    expect_error_n(pd_map_parse_movingai, crlf, len, 6, 2);
    free(crlf);
    crlf = to_crlf("type octile\nheight 2\nwidth 3\nmap\n...\n...\n...\n", &len);
    expect_error_n(pd_map_parse_movingai, crlf, len, 7, 1);
    free(crlf);
}

static void test_movingai_unknown_header(void **state)
{
    expect_error(pd_map_parse_movingai, "type octile\nsize 3\nheight 1\nwidth 1\nmap\n.\n", 2, 1);
    expect_error(pd_map_parse_movingai, "type octile\n\nheight 1\nwidth 1\nmap\n.\n", 2, 1);
}

static void test_movingai_empty(void **state)
{
    expect_error_n(pd_map_parse_movingai, "", 0, 0, 0);
    expect_error_n(pd_map_parse_movingai, "type octile\n", 0, 0, 0);
}

static void test_movingai_data_file(void **state)
{
    size_t len;
    char *buf = read_data_file("core_room.map", &len);
    pd_parse_error err;
    pd_grid *g = pd_map_parse_movingai(buf, len, &err);
    if (!g)
        fail_msg("core_room.map refused at %d:%d: %s", err.line, err.column, err.message);
    assert_int_equal(g->width, 12);
    assert_int_equal(g->height, 8);
    /* Spot checks against the file: corners open, the wall at column 5. */
    assert_int_equal(pd_grid_get(g, 0, 0), PD_CELL_FREE);
    assert_int_equal(pd_grid_get(g, 11, 7), PD_CELL_FREE);
    assert_int_equal(pd_grid_get(g, 5, 0), PD_CELL_BLOCKED);
    assert_int_equal(pd_grid_get(g, 5, 6), PD_CELL_BLOCKED);
    assert_int_equal(pd_grid_get(g, 5, 7), PD_CELL_FREE);
    pd_grid_destroy(g);
    free(buf);
}

/* -------------------------------------------------------------------- ASCII */

static void test_ascii_good(void **state)
{
    pd_grid *g = parse_ok(pd_map_parse_ascii, "; a comment\n.#1\n9.5\n;another\n23#\n");
    static const char *const rows[] = { ".#1", "9.5", "23#" };
    grid_picture_check(g, rows, 3);
    assert_int_equal(g->uniform_cost, 0);
    pd_grid_destroy(g);

    /* '1' is ordinary ground: a map of '.', '#', '1' is still uniform. */
    g = parse_ok(pd_map_parse_ascii, ".1\n#.\n");
    assert_int_equal(g->uniform_cost, 1);
    pd_grid_destroy(g);

    g = parse_ok(pd_map_parse_ascii, "#\n");
    assert_int_equal(g->width, 1);
    assert_int_equal(pd_grid_get(g, 0, 0), PD_CELL_BLOCKED);
    pd_grid_destroy(g);
}

static void test_ascii_every_char(void **state)
{
    for (int c = 0; c < 256; c++) {
        if (c == '\n')
            continue;
        char text[8] = { '.', (char)c, '.', '\n', '.', '.', '.', '\n' };
        int ok = c == '.' || c == '#' || (c >= '1' && c <= '9');
        if (ok) {
            pd_grid *g = pd_map_parse_ascii(text, sizeof text, NULL);
            assert_non_null(g);
            uint8_t want = c == '.' ? PD_CELL_FREE : c == '#' ? PD_CELL_BLOCKED : (uint8_t)(c - '0');
            assert_int_equal(pd_grid_get(g, 1, 0), want);
            assert_int_equal(g->uniform_cost, want <= PD_CELL_FREE);
            pd_grid_destroy(g);
        } else {
            expect_error_n(pd_map_parse_ascii, text, sizeof text, 1, 2);
        }
    }
}

static void test_ascii_crlf_and_no_trailing_newline(void **state)
{
    static const char *const rows[] = { ".#", "2." };
    size_t len;
    char *crlf = to_crlf("; c\n.#\n2.\n\n", &len);
    pd_grid *g = pd_map_parse_ascii(crlf, len, NULL);
    assert_non_null(g);
    grid_picture_check(g, rows, 2);
    pd_grid_destroy(g);
    free(crlf);

    g = parse_ok(pd_map_parse_ascii, ".#\n2.");
    grid_picture_check(g, rows, 2);
    pd_grid_destroy(g);
}

static void test_ascii_ragged_rows(void **state)
{
    expect_error(pd_map_parse_ascii, "...\n..\n", 2, 3);
    expect_error(pd_map_parse_ascii, "...\n....\n", 2, 4);
    expect_error(pd_map_parse_ascii, "; c\n..\n..\n; c\n.\n", 5, 2);
    size_t len;
    char *crlf = to_crlf("...\n...\n.....\n", &len);
    expect_error_n(pd_map_parse_ascii, crlf, len, 3, 4);
    free(crlf);
}

static void test_ascii_bad_char(void **state)
{
    expect_error(pd_map_parse_ascii, "..\n.x\n", 2, 2);
    expect_error(pd_map_parse_ascii, "..\n.0\n", 2, 2);
    expect_error(pd_map_parse_ascii, "..\n@.\n", 2, 1);
    /* ';' only starts a comment in column 1. */
    expect_error(pd_map_parse_ascii, ".;\n", 1, 2);
    /* A byte that does not print is named by its value, and a UTF-8 byte
     * order mark as one (both used to read "unexpected character '?'"). */
    static const struct {
        const char *text;
        int column;
        const char *message;
    } named[] = {
        { "\xef\xbb\xbf..\n..\n", 1,
          "the file starts with a UTF-8 byte order mark (EF BB BF); save it without one" },
        { ".\t\n", 2, "unexpected byte 0x09 (want . # or 1-9)" },
        { ".x\n", 2, "unexpected character 'x' (want . # or 1-9)" },
    };
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
        pd_parse_error err;
        memset(&err, 0, sizeof err);
        assert_null(pd_map_parse_ascii(named[i].text, strlen(named[i].text), &err));
        assert_int_equal(err.line, 1);
        assert_int_equal(err.column, named[i].column);
        assert_string_equal(err.message, named[i].message);
    }
}

static void test_ascii_blank_line_then_rows(void **state)
{
    expect_error(pd_map_parse_ascii, "..\n\n..\n", 3, 1);
    expect_error(pd_map_parse_ascii, "..\n..\n  \n; c\n..\n", 5, 1);
    size_t len;
    char *crlf = to_crlf("..\n\n..\n", &len);
    expect_error_n(pd_map_parse_ascii, crlf, len, 3, 1);
    free(crlf);
    /* Blank lines at the end are fine. */
    pd_grid *g = parse_ok(pd_map_parse_ascii, "..\n..\n\n \n\n");
    assert_int_equal(g->height, 2);
    pd_grid_destroy(g);
}

static void test_ascii_empty(void **state)
{
    expect_error_n(pd_map_parse_ascii, "", 0, 0, 0);
    /* Only comments and blank lines: no rows, noticed at the end (line 3). */
    expect_error(pd_map_parse_ascii, "; nothing\n\n; here\n", 3, 0);
}

static void test_ascii_side_limits(void **state)
{
    /* One row of PD_GRID_MAX_SIDE + 1 cells: the first cell too many. */
    size_t n = PD_GRID_MAX_SIDE + 1;
    char *buf = malloc(n + 1);
    assert_non_null(buf);
    memset(buf, '.', n);
    buf[n] = '\n';
    expect_error_n(pd_map_parse_ascii, buf, n + 1, 1, PD_GRID_MAX_SIDE + 1);
    pd_grid *g = pd_map_parse_ascii(buf + 1, n, NULL);
    assert_non_null(g);
    assert_int_equal(g->width, PD_GRID_MAX_SIDE);
    pd_grid_destroy(g);
    free(buf);

    /* PD_GRID_MAX_SIDE + 1 rows of one cell: the extra row is refused. */
    buf = malloc(2 * n);
    assert_non_null(buf);
    for (size_t i = 0; i < n; i++) {
        buf[2 * i] = '.';
        buf[2 * i + 1] = '\n';
    }
    expect_error_n(pd_map_parse_ascii, buf, 2 * n, PD_GRID_MAX_SIDE + 1, 1);
    g = pd_map_parse_ascii(buf, 2 * (n - 1), NULL);
    assert_non_null(g);
    assert_int_equal(g->height, PD_GRID_MAX_SIDE);
    pd_grid_destroy(g);
    free(buf);
}

static void test_ascii_data_file(void **state)
{
    size_t len;
    char *buf = read_data_file("core_weighted.txt", &len);
    pd_parse_error err;
    pd_grid *g = pd_map_parse_ascii(buf, len, &err);
    if (!g)
        fail_msg("core_weighted.txt refused at %d:%d: %s", err.line, err.column, err.message);
    assert_int_equal(g->width, 9);
    assert_int_equal(g->height, 5);
    assert_int_equal(g->uniform_cost, 0);
    assert_int_equal(pd_grid_get(g, 0, 2), PD_CELL_FREE);
    assert_int_equal(pd_grid_get(g, 4, 2), 9);
    assert_int_equal(pd_grid_get(g, 4, 0), PD_CELL_FREE);
    pd_grid_destroy(g);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_movingai_good_lf),
        cmocka_unit_test(test_movingai_good_crlf),
        cmocka_unit_test(test_movingai_header_orders),
        cmocka_unit_test(test_movingai_every_terrain_char),
        cmocka_unit_test(test_movingai_no_trailing_newline),
        cmocka_unit_test(test_movingai_trailing_blank_lines),
        cmocka_unit_test(test_movingai_respects_len),
        cmocka_unit_test(test_movingai_missing_header_fields),
        cmocka_unit_test(test_movingai_bad_type),
        cmocka_unit_test(test_movingai_bad_sizes),
        cmocka_unit_test(test_movingai_row_errors),
        cmocka_unit_test(test_movingai_row_errors_crlf),
        cmocka_unit_test(test_movingai_unknown_header),
        cmocka_unit_test(test_movingai_empty),
        cmocka_unit_test(test_movingai_data_file),
        cmocka_unit_test(test_ascii_good),
        cmocka_unit_test(test_ascii_every_char),
        cmocka_unit_test(test_ascii_crlf_and_no_trailing_newline),
        cmocka_unit_test(test_ascii_ragged_rows),
        cmocka_unit_test(test_ascii_bad_char),
        cmocka_unit_test(test_ascii_blank_line_then_rows),
        cmocka_unit_test(test_ascii_empty),
        cmocka_unit_test(test_ascii_side_limits),
        cmocka_unit_test(test_ascii_data_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
