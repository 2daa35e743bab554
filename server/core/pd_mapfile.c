/*
 * pd_mapfile.c - Moving AI and plain ASCII map parsers.
 *
 * Both parsers walk the buffer line by line with an explicit line counter so
 * every error can name its line and column. They build the grid completely
 * before returning it; any error frees it, so callers never see a half-loaded
 * map.
 */
#include "pd_mapfile.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct pd__line_reader {
    const char *buf;
    size_t len;
    size_t pos;
    int line_no;          /* 1-based number of the line last returned */
} pd__line_reader;

/* Returns the next line without its LF or CRLF terminator; 0 at end of buffer. */
static int pd__next_line(pd__line_reader *r, const char **line, size_t *line_len)
{
    if (r->pos >= r->len)
        return 0;
    const char *start = r->buf + r->pos;
    const char *nl = memchr(start, '\n', r->len - r->pos);
    size_t n = nl ? (size_t)(nl - start) : r->len - r->pos;
    r->pos += n + (nl ? 1 : 0);
    if (n > 0 && start[n - 1] == '\r')
        n--;
    *line = start;
    *line_len = n;
    r->line_no++;
    return 1;
}

static void pd__set_error(pd_parse_error *err, int line, int column, const char *fmt, ...)
{
    if (!err)
        return;
    err->line = line;
    err->column = column;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
}

static int pd__is_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t')
            return 0;
    return 1;
}

/* Parses "<key> <positive int>" exactly; returns the value or -1. */
static long pd__header_int(const char *line, size_t n, const char *key)
{
    size_t klen = strlen(key);
    if (n <= klen + 1 || memcmp(line, key, klen) != 0 || line[klen] != ' ')
        return -1;
    long v = 0;
    size_t i = klen + 1;
    while (i < n && line[i] == ' ')
        i++;
    if (i == n)
        return -1;
    for (; i < n; i++) {
        if (line[i] < '0' || line[i] > '9')
            return -1;
        v = v * 10 + (line[i] - '0');
        if (v > PD_GRID_MAX_SIDE)
            return -1;
    }
    return v;
}

static int pd__line_is(const char *line, size_t n, const char *word)
{
    size_t wlen = strlen(word);
    return n == wlen && memcmp(line, word, wlen) == 0;
}

/* Moving AI terrain characters; see the format notes in pd_mapfile.h. */
static int pd__movingai_cell(char c, uint8_t *out)
{
    switch (c) {
    case '.': case 'G': case 'S':
        *out = PD_CELL_FREE;
        return 1;
    case '@': case 'O': case 'T': case 'W':
        *out = PD_CELL_BLOCKED;
        return 1;
    default:
        return 0;
    }
}

pd_grid *pd_map_parse_movingai(const char *buf, size_t len, pd_parse_error *err)
{
    return pd_map_parse_movingai_with(buf, len, NULL, err);
}

pd_grid *pd_map_parse_movingai_with(const char *buf, size_t len, const pd_char_costs *costs,
                                    pd_parse_error *err)
{
    pd__line_reader r = { buf, len, 0, 0 };
    const char *line;
    size_t n;
    long width = -1, height = -1;
    int saw_type = 0;

    /* Header: "type octile", "height H", "width W" in any order, then "map". */
    for (;;) {
        if (!pd__next_line(&r, &line, &n)) {
            pd__set_error(err, r.line_no, 0, "unexpected end of file before 'map' line");
            return NULL;
        }
        if (pd__line_is(line, n, "map"))
            break;
        if (n >= 5 && memcmp(line, "type ", 5) == 0) {
            if (!pd__line_is(line, n, "type octile")) {
                pd__set_error(err, r.line_no, 6, "unsupported map type (want 'octile')");
                return NULL;
            }
            saw_type = 1;
        } else if (n >= 7 && memcmp(line, "height ", 7) == 0) {
            height = pd__header_int(line, n, "height");
            if (height < 1) {
                pd__set_error(err, r.line_no, 8, "height must be an integer in 1..%d", PD_GRID_MAX_SIDE);
                return NULL;
            }
        } else if (n >= 6 && memcmp(line, "width ", 6) == 0) {
            width = pd__header_int(line, n, "width");
            if (width < 1) {
                pd__set_error(err, r.line_no, 7, "width must be an integer in 1..%d", PD_GRID_MAX_SIDE);
                return NULL;
            }
        } else {
            pd__set_error(err, r.line_no, 1, "unknown header line (want type/height/width/map)");
            return NULL;
        }
    }
    if (!saw_type || width < 1 || height < 1) {
        pd__set_error(err, r.line_no, 0, "header lacks %s before 'map'",
                      !saw_type ? "'type octile'" : height < 1 ? "'height'" : "'width'");
        return NULL;
    }

    pd_grid *g = pd_grid_create((int32_t)width, (int32_t)height);
    if (!g) {
        pd__set_error(err, 0, 0, "out of memory for a %ldx%ld grid", width, height);
        return NULL;
    }
    for (long y = 0; y < height; y++) {
        if (!pd__next_line(&r, &line, &n)) {
            pd__set_error(err, r.line_no + 1, 0, "expected %ld map rows, found %ld", height, y);
            goto fail;
        }
        if ((long)n != width) {
            pd__set_error(err, r.line_no, (int)(n < (size_t)width ? n + 1 : (size_t)width + 1),
                          "row has %zu cells, expected %ld", n, width);
            goto fail;
        }
        uint8_t *row = g->cells + pd_grid_index(g, 0, (int32_t)y);
        for (long x = 0; x < width; x++) {
            unsigned char ch = (unsigned char)line[x];
            if (costs && costs->set[ch]) {
                row[x] = costs->cost[ch];
                continue;
            }
            if (!pd__movingai_cell(line[x], &row[x])) {
                pd__set_error(err, r.line_no, (int)x + 1, "unexpected character '%c' (0x%02x)",
                              (line[x] >= 32 && line[x] < 127) ? line[x] : '?',
                              (unsigned char)line[x]);
                goto fail;
            }
        }
    }
    /* Trailing blank lines are tolerated; extra rows are not. */
    while (pd__next_line(&r, &line, &n)) {
        if (!pd__is_blank(line, n)) {
            pd__set_error(err, r.line_no, 1, "more rows than height %ld", height);
            goto fail;
        }
    }
    pd_grid_refresh_flags(g);
    return g;
fail:
    pd_grid_destroy(g);
    return NULL;
}

pd_grid *pd_map_parse_ascii(const char *buf, size_t len, pd_parse_error *err)
{
    pd__line_reader r = { buf, len, 0, 0 };
    const char *line;
    size_t n;
    long width = -1, height = 0;
    int first_row_line = 0, last_row_line = 0;

    /* First pass: validate and measure, so the grid is allocated once. */
    while (pd__next_line(&r, &line, &n)) {
        if (n > 0 && line[0] == ';')
            continue;
        if (pd__is_blank(line, n)) {
            if (height > 0 && !last_row_line)
                last_row_line = r.line_no - 1;
            continue;
        }
        if (last_row_line) {
            pd__set_error(err, r.line_no, 1, "map row after a blank line");
            return NULL;
        }
        if (width < 0) {
            if (n > PD_GRID_MAX_SIDE) {
                pd__set_error(err, r.line_no, PD_GRID_MAX_SIDE + 1, "row longer than %d cells", PD_GRID_MAX_SIDE);
                return NULL;
            }
            width = (long)n;
            first_row_line = r.line_no;
        } else if ((long)n != width) {
            pd__set_error(err, r.line_no, (int)((long)n < width ? n + 1 : (size_t)width + 1),
                          "row has %zu cells, expected %ld like line %d", n, width, first_row_line);
            return NULL;
        }
        for (size_t x = 0; x < n; x++) {
            char c = line[x];
            if (c != '.' && c != '#' && !(c >= '1' && c <= '9')) {
                /* A byte that does not print is named by its value (a tab,
                 * a CR alone, the UTF-8 byte order mark some editors put
                 * first), not as a '?' the file does not hold. */
                if (r.line_no == 1 && x == 0 && n >= 3 && memcmp(line, "\xef\xbb\xbf", 3) == 0)
                    pd__set_error(err, r.line_no, 1,
                                  "the file starts with a UTF-8 byte order mark (EF BB BF); save it without one");
                else if (c >= 32 && c < 127)
                    pd__set_error(err, r.line_no, (int)x + 1, "unexpected character '%c' (want . # or 1-9)", c);
                else
                    pd__set_error(err, r.line_no, (int)x + 1, "unexpected byte 0x%02x (want . # or 1-9)",
                                  (unsigned char)c);
                return NULL;
            }
        }
        if (++height > PD_GRID_MAX_SIDE) {
            pd__set_error(err, r.line_no, 1, "more than %d rows", PD_GRID_MAX_SIDE);
            return NULL;
        }
    }
    if (height == 0) {
        pd__set_error(err, r.line_no, 0, "map has no rows");
        return NULL;
    }

    pd_grid *g = pd_grid_create((int32_t)width, (int32_t)height);
    if (!g) {
        pd__set_error(err, 0, 0, "out of memory for a %ldx%ld grid", width, height);
        return NULL;
    }
    /* Second pass: fill. Validation already passed, so this cannot fail. */
    r.pos = 0;
    r.line_no = 0;
    int32_t y = 0;
    while (y < height && pd__next_line(&r, &line, &n)) {
        if ((n > 0 && line[0] == ';') || pd__is_blank(line, n))
            continue;
        uint8_t *row = g->cells + pd_grid_index(g, 0, y);
        for (size_t x = 0; x < n; x++) {
            char c = line[x];
            row[x] = c == '.' ? PD_CELL_FREE : c == '#' ? PD_CELL_BLOCKED : (uint8_t)(c - '0');
        }
        y++;
    }
    pd_grid_refresh_flags(g);
    return g;
}
