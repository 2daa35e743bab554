/*
 * pathctl_render.c - draws a grid and a path into a PNG (libpng's simplified
 * API), parses local map files, and runs `pathctl render`.
 *
 * The picture is built in memory as RGB rows at its final size, then written
 * in one call. Every output pixel averages the box of cells it covers; for a
 * grid scaled up by a whole factor that box is exactly one cell, so the same
 * loop serves both directions and cell borders stay crisp. The path and the
 * markers are drawn afterwards in pixel space through the centres of the
 * unit's footprints, with a line width that keeps an upscaled path inside the
 * cells it visits.
 *
 * The map parsers repeat the daemon's rules (server/core/pd_mapfile.h)
 * because client code must not link the daemon's libraries; they are only for
 * drawing, so they need to agree with the server, not to be fast.
 */
#include "pathctl_render.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <png.h>

/* Line width in pixels: a quarter of a cell when the grid is scaled up by
 * whole pixels per cell, which keeps the line inside the cells it visits (a
 * diagonal step also crosses the two cells beside it, which the no-corner-
 * cutting rule keeps open), but never under PDC_RENDER_LINE_MIN_PX, so the
 * path stays visible over a busy map drawn at one pixel per cell or less
 * (where a pixel's cells cannot be told apart anyway). */
#define PDC_RENDER_LINE_CELL_FRACTION 4
#define PDC_RENDER_LINE_MIN_PX 2
/* Marker disc radius: this share of the unit's footprint, but at least
 * PDC_RENDER_MARKER_MIN_PX so it shows on a downscaled map. */
#define PDC_RENDER_MARKER_FOOTPRINT_SHARE 0.4
#define PDC_RENDER_MARKER_MIN_PX 6.0
/* Width of the white ring around a marker, in pixels. */
#define PDC_RENDER_MARKER_RING_PX 1.5
/* Room for one parsed option item such as "123,456" or "S=3". */
#define PDC_RENDER_ITEM_MAX 64

static void pdc__render_error(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

void pdc_render_grid_free(pdc_render_grid *g)
{
    if (!g)
        return;
    free(g->cells);
    g->cells = NULL;
    g->width = g->height = 0;
}

void pdc_render_image_size(int32_t width, int32_t height, uint32_t *px_width, uint32_t *px_height)
{
    if (width < 1 || height < 1) {
        *px_width = *px_height = 0;
        return;
    }
    int64_t longer = width > height ? width : height;
    if (longer > PDC_RENDER_MAX_SIDE_PX) {
        /* Round to the nearest pixel so the aspect ratio is kept as well as
         * whole pixels allow; a sliver of a grid still gets one pixel. */
        uint64_t w = ((uint64_t)width * PDC_RENDER_MAX_SIDE_PX + (uint64_t)longer / 2) / (uint64_t)longer;
        uint64_t h = ((uint64_t)height * PDC_RENDER_MAX_SIDE_PX + (uint64_t)longer / 2) / (uint64_t)longer;
        *px_width = w ? (uint32_t)w : 1;
        *px_height = h ? (uint32_t)h : 1;
        return;
    }
    int64_t scale = (PDC_RENDER_MIN_SIDE_PX + longer - 1) / longer;
    if (scale * longer > PDC_RENDER_MAX_SIDE_PX)
        scale = PDC_RENDER_MAX_SIDE_PX / longer;
    if (scale < 1)
        scale = 1;
    *px_width = (uint32_t)(width * scale);
    *px_height = (uint32_t)(height * scale);
}

typedef struct pdc__rgb {
    uint8_t r, g, b;
} pdc__rgb;

static pdc__rgb pdc__rgb_of(uint32_t hex)
{
    pdc__rgb c = {(uint8_t)(hex >> 16), (uint8_t)(hex >> 8), (uint8_t)hex};
    return c;
}

/* Colour of every cell value: blocked dark, cost 1 light, and the grid's
 * highest cost DEAREST with the costs between blended linearly, so a map's
 * cost structure is visible whatever its range. */
static void pdc__render_palette(const pdc_render_grid *g, pdc__rgb palette[256])
{
    size_t n = (size_t)g->width * (size_t)g->height;
    unsigned dearest = 1;
    for (size_t i = 0; i < n; i++)
        if (g->cells[i] > dearest)
            dearest = g->cells[i];
    pdc__rgb free_rgb = pdc__rgb_of(PDC_RENDER_RGB_FREE);
    pdc__rgb dear_rgb = pdc__rgb_of(PDC_RENDER_RGB_DEAREST);
    palette[PDC_RENDER_CELL_BLOCKED] = pdc__rgb_of(PDC_RENDER_RGB_BLOCKED);
    for (unsigned v = 1; v < 256; v++) {
        double t = dearest > 1 ? (double)((v < dearest ? v : dearest) - 1) / (double)(dearest - 1) : 0.0;
        palette[v].r = (uint8_t)lround(free_rgb.r + t * (dear_rgb.r - free_rgb.r));
        palette[v].g = (uint8_t)lround(free_rgb.g + t * (dear_rgb.g - free_rgb.g));
        palette[v].b = (uint8_t)lround(free_rgb.b + t * (dear_rgb.b - free_rgb.b));
    }
}

/* An RGB image being drawn. */
typedef struct pdc__canvas {
    uint8_t *rgb;
    uint32_t width, height;
} pdc__canvas;

static void pdc__canvas_put(pdc__canvas *c, long x, long y, pdc__rgb colour)
{
    if (x < 0 || y < 0 || x >= (long)c->width || y >= (long)c->height)
        return;
    uint8_t *p = c->rgb + ((size_t)y * c->width + (size_t)x) * 3;
    p[0] = colour.r;
    p[1] = colour.g;
    p[2] = colour.b;
}

/* First cell of the box that output pixel p covers along an axis of `cells`
 * cells drawn as `px` pixels; pixel p covers [first(p), first(p + 1)), at
 * least one cell. */
static int32_t pdc__box_first(uint32_t p, int32_t cells, uint32_t px)
{
    return (int32_t)(((uint64_t)p * (uint64_t)cells) / px);
}

static int32_t pdc__box_end(uint32_t p, int32_t cells, uint32_t px)
{
    int32_t first = pdc__box_first(p, cells, px);
    int32_t end = pdc__box_first(p + 1, cells, px);
    return end > first ? end : first + 1;
}

static void pdc__canvas_fill_grid(pdc__canvas *c, const pdc_render_grid *g, const pdc__rgb palette[256])
{
    for (uint32_t py = 0; py < c->height; py++) {
        int32_t y0 = pdc__box_first(py, g->height, c->height);
        int32_t y1 = pdc__box_end(py, g->height, c->height);
        for (uint32_t px = 0; px < c->width; px++) {
            int32_t x0 = pdc__box_first(px, g->width, c->width);
            int32_t x1 = pdc__box_end(px, g->width, c->width);
            uint64_t r = 0, gr = 0, b = 0, n = 0;
            for (int32_t y = y0; y < y1; y++) {
                const uint8_t *row = g->cells + (size_t)y * (size_t)g->width;
                for (int32_t x = x0; x < x1; x++) {
                    pdc__rgb col = palette[row[x]];
                    r += col.r;
                    gr += col.g;
                    b += col.b;
                    n++;
                }
            }
            pdc__rgb avg = {(uint8_t)((r + n / 2) / n), (uint8_t)((gr + n / 2) / n), (uint8_t)((b + n / 2) / n)};
            pdc__canvas_put(c, px, py, avg);
        }
    }
}

/* A width x width square of pixels centred on (x, y) in pixel coordinates. */
static void pdc__canvas_stamp(pdc__canvas *c, double x, double y, int width, pdc__rgb colour)
{
    long x0 = (long)floor(x - width / 2.0 + 0.5);
    long y0 = (long)floor(y - width / 2.0 + 0.5);
    for (long dy = 0; dy < width; dy++)
        for (long dx = 0; dx < width; dx++)
            pdc__canvas_put(c, x0 + dx, y0 + dy, colour);
}

/* Stamps along the segment every half pixel, so even a 1 px line has no gaps. */
static void pdc__canvas_line(pdc__canvas *c, double x0, double y0, double x1, double y1, int width,
                             pdc__rgb colour)
{
    double length = hypot(x1 - x0, y1 - y0);
    long steps = (long)ceil(length * 2.0);
    if (steps < 1)
        steps = 1;
    for (long k = 0; k <= steps; k++) {
        double t = (double)k / (double)steps;
        pdc__canvas_stamp(c, x0 + t * (x1 - x0), y0 + t * (y1 - y0), width, colour);
    }
}

static void pdc__canvas_disc(pdc__canvas *c, double cx, double cy, double radius, pdc__rgb colour)
{
    long x0 = (long)floor(cx - radius), x1 = (long)ceil(cx + radius);
    long y0 = (long)floor(cy - radius), y1 = (long)ceil(cy + radius);
    for (long y = y0; y <= y1; y++)
        for (long x = x0; x <= x1; x++) {
            double dx = (double)x + 0.5 - cx, dy = (double)y + 0.5 - cy;
            if (dx * dx + dy * dy <= radius * radius)
                pdc__canvas_put(c, x, y, colour);
        }
}

/* Pixel scale and the footprint centre of a unit whose top-left cell is xy. */
typedef struct pdc__mapping {
    double sx, sy;              /* pixels per cell along x and y */
    double half_unit;           /* half the unit's side, in cells */
} pdc__mapping;

static void pdc__map_centre(const pdc__mapping *m, pdc_xy xy, double *px, double *py)
{
    *px = ((double)xy.x + m->half_unit) * m->sx;
    *py = ((double)xy.y + m->half_unit) * m->sy;
}

static void pdc__canvas_marker(pdc__canvas *c, const pdc__mapping *m, pdc_xy xy, double radius, uint32_t hex)
{
    double x, y;
    pdc__map_centre(m, xy, &x, &y);
    pdc__canvas_disc(c, x, y, radius + PDC_RENDER_MARKER_RING_PX, pdc__rgb_of(PDC_RENDER_RGB_OUTLINE));
    pdc__canvas_disc(c, x, y, radius, pdc__rgb_of(hex));
}

static int pdc__footprint_inside(const pdc_render_grid *g, pdc_xy xy, uint32_t unit)
{
    return xy.x >= 0 && xy.y >= 0 && (int64_t)xy.x + unit <= g->width && (int64_t)xy.y + unit <= g->height;
}

/* Checks everything pdc_render_png_multi is given before anything is
 * allocated. */
static int pdc__render_check(const pdc_render_grid *g, const pdc_render_drawing *d, char *err, size_t errlen)
{
    if (!g || !g->cells || g->width < 1 || g->height < 1 || g->width > PDC_RENDER_MAX_GRID_SIDE ||
        g->height > PDC_RENDER_MAX_GRID_SIDE) {
        pdc__render_error(err, errlen, "the grid must have cells and be 1..%d cells a side",
                          PDC_RENDER_MAX_GRID_SIDE);
        return PDC_RENDER_ERR_ARG;
    }
    if (!d)
        return PDC_RENDER_OK;
    uint32_t unit = d->unit_size ? d->unit_size : 1;
    if ((d->line_count && !d->lines) || (d->marker_count && !d->markers)) {
        pdc__render_error(err, errlen, "the drawing has %zu lines and %zu markers but no array for them",
                          d->line_count, d->marker_count);
        return PDC_RENDER_ERR_ARG;
    }
    if (unit > (uint32_t)g->width || unit > (uint32_t)g->height) {
        pdc__render_error(err, errlen, "unit size %u does not fit the %dx%d grid", unit, g->width, g->height);
        return PDC_RENDER_ERR_ARG;
    }
    for (size_t l = 0; l < d->line_count; l++) {
        const pdc_render_line *line = &d->lines[l];
        /* Name the line only when there are several, so a plain path's
         * message reads like one. */
        char which[48] = "";
        if (d->line_count > 1)
            snprintf(which, sizeof which, " of line %zu", l);
        if (line->count && !line->points) {
            pdc__render_error(err, errlen, "the path%s has %zu waypoints but no points", which, line->count);
            return PDC_RENDER_ERR_ARG;
        }
        for (size_t i = 0; i < line->count; i++)
            if (!pdc__footprint_inside(g, line->points[i], unit)) {
                pdc__render_error(err, errlen, "waypoint %zu%s (%d,%d) lies outside the %dx%d grid", i, which,
                                  line->points[i].x, line->points[i].y, g->width, g->height);
                return PDC_RENDER_ERR_ARG;
            }
    }
    for (size_t i = 0; i < d->marker_count; i++)
        if (!pdc__footprint_inside(g, d->markers[i].at, unit)) {
            pdc__render_error(err, errlen, "marker (%d,%d) lies outside the %dx%d grid", d->markers[i].at.x,
                              d->markers[i].at.y, g->width, g->height);
            return PDC_RENDER_ERR_ARG;
        }
    return PDC_RENDER_OK;
}

static void pdc__canvas_draw(pdc__canvas *c, const pdc_render_grid *g, const pdc_render_drawing *d)
{
    uint32_t unit = d->unit_size ? d->unit_size : 1;
    pdc__mapping m = {(double)c->width / g->width, (double)c->height / g->height, unit / 2.0};
    int width = (int)(c->width / (uint32_t)g->width) / PDC_RENDER_LINE_CELL_FRACTION;
    if (width < PDC_RENDER_LINE_MIN_PX)
        width = PDC_RENDER_LINE_MIN_PX;
    pdc__rgb path_rgb = pdc__rgb_of(PDC_RENDER_RGB_PATH);
    for (size_t l = 0; l < d->line_count; l++) {
        const pdc_render_line *line = &d->lines[l];
        for (size_t i = 0; i < line->count; i++) {
            double x0, y0, x1, y1;
            pdc__map_centre(&m, line->points[i], &x0, &y0);
            pdc__map_centre(&m, line->points[i + 1 < line->count ? i + 1 : i], &x1, &y1);
            pdc__canvas_line(c, x0, y0, x1, y1, width, path_rgb);
        }
    }
    double footprint = (m.sx < m.sy ? m.sx : m.sy) * unit;
    double radius = footprint * PDC_RENDER_MARKER_FOOTPRINT_SHARE;
    if (radius < PDC_RENDER_MARKER_MIN_PX)
        radius = PDC_RENDER_MARKER_MIN_PX;
    for (size_t i = 0; i < d->marker_count; i++)
        pdc__canvas_marker(c, &m, d->markers[i].at, radius, d->markers[i].rgb);
}

static int pdc__write_png(const char *path, const pdc__canvas *c, char *err, size_t errlen)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        pdc__render_error(err, errlen, "cannot create %s: %s", path, strerror(errno));
        return PDC_RENDER_ERR_IO;
    }
    png_image image;
    memset(&image, 0, sizeof image);
    image.version = PNG_IMAGE_VERSION;
    image.width = c->width;
    image.height = c->height;
    image.format = PNG_FORMAT_RGB;
    int ok = png_image_write_to_stdio(&image, f, 0, c->rgb, 0, NULL);
    if (!ok)
        pdc__render_error(err, errlen, "writing %s: %s", path, image.message);
    int flush_errno = 0;
    if (fclose(f) != 0 && ok) {
        flush_errno = errno;
        ok = 0;
        pdc__render_error(err, errlen, "writing %s: %s", path, strerror(flush_errno));
    }
    png_image_free(&image);
    if (!ok) {
        /* A truncated PNG would look like a picture to the next reader. */
        remove(path);
        return PDC_RENDER_ERR_IO;
    }
    return PDC_RENDER_OK;
}

int pdc_render_png_multi(const char *path, const pdc_render_grid *g, const pdc_render_drawing *d, char *err,
                         size_t errlen)
{
    if (!path || !path[0]) {
        pdc__render_error(err, errlen, "no output file named");
        return PDC_RENDER_ERR_ARG;
    }
    int status = pdc__render_check(g, d, err, errlen);
    if (status != PDC_RENDER_OK)
        return status;
    pdc__canvas c = {NULL, 0, 0};
    pdc_render_image_size(g->width, g->height, &c.width, &c.height);
    c.rgb = malloc((size_t)c.width * c.height * 3);
    if (!c.rgb) {
        pdc__render_error(err, errlen, "out of memory for a %ux%u image", c.width, c.height);
        return PDC_RENDER_ERR_NOMEM;
    }
    pdc__rgb palette[256];
    pdc__render_palette(g, palette);
    pdc__canvas_fill_grid(&c, g, palette);
    if (d)
        pdc__canvas_draw(&c, g, d);
    status = pdc__write_png(path, &c, err, errlen);
    free(c.rgb);
    return status;
}

int pdc_render_png(const char *path, const pdc_render_grid *g, const pdc_render_path *p, char *err,
                   size_t errlen)
{
    if (!p)
        return pdc_render_png_multi(path, g, NULL, err, errlen);
    pdc_render_line line = {p->points, p->count};
    pdc_render_marker markers[2];
    size_t marker_count = 0;
    if (p->has_start)
        markers[marker_count++] = (pdc_render_marker){p->start, PDC_RENDER_RGB_START};
    if (p->has_goal)
        markers[marker_count++] = (pdc_render_marker){p->goal, PDC_RENDER_RGB_GOAL};
    pdc_render_drawing d = {&line, p->count ? 1 : 0, markers, marker_count, p->unit_size};
    return pdc_render_png_multi(path, g, &d, err, errlen);
}

/* ---- map files ---------------------------------------------------------- */

typedef struct pdc__lines {
    const char *buf;
    size_t len, pos;
    int line_no;                /* 1-based number of the line last returned */
} pdc__lines;

/* The next line without its LF or CRLF; 0 at the end of the buffer. */
static int pdc__next_line(pdc__lines *r, const char **line, size_t *n)
{
    if (r->pos >= r->len)
        return 0;
    const char *start = r->buf + r->pos;
    const char *nl = memchr(start, '\n', r->len - r->pos);
    size_t k = nl ? (size_t)(nl - start) : r->len - r->pos;
    r->pos += k + (nl ? 1 : 0);
    if (k > 0 && start[k - 1] == '\r')
        k--;
    *line = start;
    *n = k;
    r->line_no++;
    return 1;
}

static int pdc__blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t')
            return 0;
    return 1;
}

static int pdc__is_word(const char *line, size_t n, const char *word)
{
    return n == strlen(word) && memcmp(line, word, n) == 0;
}

/* "KEY N" with N in 1..PDC_RENDER_MAX_GRID_SIDE; -1 when the line is
 * "KEY ..." but N is bad, 0 when the line is not about KEY. */
static long pdc__header_value(const char *line, size_t n, const char *key)
{
    size_t k = strlen(key);
    if (n <= k || memcmp(line, key, k) != 0 || line[k] != ' ')
        return 0;
    size_t i = k + 1;
    while (i < n && line[i] == ' ')
        i++;
    long v = 0;
    if (i == n)
        return -1;
    for (; i < n; i++) {
        if (line[i] < '0' || line[i] > '9')
            return -1;
        v = v * 10 + (line[i] - '0');
        if (v > PDC_RENDER_MAX_GRID_SIDE)
            return -1;
    }
    return v >= 1 ? v : -1;
}

static char pdc__printable(char c)
{
    return (c >= 32 && c < 127) ? c : '?';
}

static int pdc__grid_alloc(pdc_render_grid *out, long width, long height, char *err, size_t errlen)
{
    out->cells = malloc((size_t)width * (size_t)height);
    if (!out->cells) {
        pdc__render_error(err, errlen, "out of memory for a %ldx%ld grid", width, height);
        return PDC_RENDER_ERR_NOMEM;
    }
    out->width = (int32_t)width;
    out->height = (int32_t)height;
    return PDC_RENDER_OK;
}

static int pdc__parse_movingai(const char *buf, size_t len, const uint8_t costs[256], const uint8_t costs_set[256],
                               pdc_render_grid *out, char *err, size_t errlen)
{
    pdc__lines r = {buf, len, 0, 0};
    const char *line;
    size_t n;
    long width = 0, height = 0;
    int saw_type = 0;
    for (;;) {
        if (!pdc__next_line(&r, &line, &n)) {
            pdc__render_error(err, errlen, "line %d: the file ends before the 'map' line", r.line_no);
            return PDC_RENDER_ERR_PARSE;
        }
        if (pdc__is_word(line, n, "map"))
            break;
        long h = pdc__header_value(line, n, "height"), w = pdc__header_value(line, n, "width");
        if (pdc__is_word(line, n, "type octile")) {
            saw_type = 1;
        } else if (h || w) {
            if (h < 0 || w < 0) {
                pdc__render_error(err, errlen, "line %d: %s must be 1..%d", r.line_no, h < 0 ? "height" : "width",
                                  PDC_RENDER_MAX_GRID_SIDE);
                return PDC_RENDER_ERR_PARSE;
            }
            if (h)
                height = h;
            else
                width = w;
        } else {
            pdc__render_error(err, errlen, "line %d: unknown header line (want 'type octile', height, width, map)",
                              r.line_no);
            return PDC_RENDER_ERR_PARSE;
        }
    }
    if (!saw_type || !width || !height) {
        pdc__render_error(err, errlen, "line %d: the header lacks %s before 'map'", r.line_no,
                          !saw_type ? "'type octile'" : !height ? "height" : "width");
        return PDC_RENDER_ERR_PARSE;
    }
    int status = pdc__grid_alloc(out, width, height, err, errlen);
    if (status != PDC_RENDER_OK)
        return status;
    for (long y = 0; y < height; y++) {
        if (!pdc__next_line(&r, &line, &n)) {
            pdc__render_error(err, errlen, "line %d: expected %ld map rows, found %ld", r.line_no + 1, height, y);
            goto fail;
        }
        if ((long)n != width) {
            pdc__render_error(err, errlen, "line %d: row has %zu cells, expected %ld", r.line_no, n, width);
            goto fail;
        }
        uint8_t *row = out->cells + (size_t)y * (size_t)width;
        for (long x = 0; x < width; x++) {
            unsigned char ch = (unsigned char)line[x];
            if (costs && costs_set && costs_set[ch])
                row[x] = costs[ch];
            else if (ch == '.' || ch == 'G' || ch == 'S')
                row[x] = PDC_RENDER_CELL_FREE;
            else if (ch == '@' || ch == 'O' || ch == 'T' || ch == 'W')
                row[x] = PDC_RENDER_CELL_BLOCKED;
            else {
                pdc__render_error(err, errlen, "line %d, column %ld: unexpected character '%c'", r.line_no, x + 1,
                                  pdc__printable((char)ch));
                goto fail;
            }
        }
    }
    while (pdc__next_line(&r, &line, &n))
        if (!pdc__blank(line, n)) {
            pdc__render_error(err, errlen, "line %d: more rows than height %ld", r.line_no, height);
            goto fail;
        }
    return PDC_RENDER_OK;
fail:
    pdc_render_grid_free(out);
    return PDC_RENDER_ERR_PARSE;
}

/* Plain ASCII: measured in a first pass so the grid is allocated once. */
static int pdc__parse_ascii(const char *buf, size_t len, pdc_render_grid *out, char *err, size_t errlen)
{
    pdc__lines r = {buf, len, 0, 0};
    const char *line;
    size_t n;
    long width = -1, height = 0;
    int ended = 0;              /* a blank line followed the rows */
    while (pdc__next_line(&r, &line, &n)) {
        if (n > 0 && line[0] == ';')
            continue;
        if (pdc__blank(line, n)) {
            ended = height > 0;
            continue;
        }
        if (ended) {
            pdc__render_error(err, errlen, "line %d: map row after a blank line", r.line_no);
            return PDC_RENDER_ERR_PARSE;
        }
        if (width < 0 && n > PDC_RENDER_MAX_GRID_SIDE) {
            pdc__render_error(err, errlen, "line %d: row longer than %d cells", r.line_no, PDC_RENDER_MAX_GRID_SIDE);
            return PDC_RENDER_ERR_PARSE;
        }
        if (width < 0)
            width = (long)n;
        if ((long)n != width) {
            pdc__render_error(err, errlen, "line %d: row has %zu cells, expected %ld", r.line_no, n, width);
            return PDC_RENDER_ERR_PARSE;
        }
        for (size_t x = 0; x < n; x++)
            if (line[x] != '.' && line[x] != '#' && !(line[x] >= '1' && line[x] <= '9')) {
                pdc__render_error(err, errlen, "line %d, column %zu: unexpected character '%c' (want . # or 1-9)",
                                  r.line_no, x + 1, pdc__printable(line[x]));
                return PDC_RENDER_ERR_PARSE;
            }
        if (++height > PDC_RENDER_MAX_GRID_SIDE) {
            pdc__render_error(err, errlen, "line %d: more than %d rows", r.line_no, PDC_RENDER_MAX_GRID_SIDE);
            return PDC_RENDER_ERR_PARSE;
        }
    }
    if (height == 0) {
        pdc__render_error(err, errlen, "the map has no rows");
        return PDC_RENDER_ERR_PARSE;
    }
    int status = pdc__grid_alloc(out, width, height, err, errlen);
    if (status != PDC_RENDER_OK)
        return status;
    r.pos = 0;
    long y = 0;
    while (y < height && pdc__next_line(&r, &line, &n)) {
        if ((n > 0 && line[0] == ';') || pdc__blank(line, n))
            continue;
        uint8_t *row = out->cells + (size_t)y * (size_t)width;
        for (size_t x = 0; x < n; x++)
            row[x] = line[x] == '.' ? PDC_RENDER_CELL_FREE
                   : line[x] == '#' ? PDC_RENDER_CELL_BLOCKED
                                    : (uint8_t)(line[x] - '0');
        y++;
    }
    return PDC_RENDER_OK;
}

int pdc_render_grid_parse(const char *buf, size_t len, pdc_render_format format, const uint8_t costs[256],
                          const uint8_t costs_set[256], pdc_render_grid *out, char *err, size_t errlen)
{
    if (!out || (!buf && len)) {
        pdc__render_error(err, errlen, "no buffer or no output grid");
        return PDC_RENDER_ERR_ARG;
    }
    memset(out, 0, sizeof *out);
    if (format == PDC_RENDER_FORMAT_MOVINGAI)
        return pdc__parse_movingai(buf, len, costs, costs_set, out, err, errlen);
    if (format == PDC_RENDER_FORMAT_ASCII)
        return pdc__parse_ascii(buf, len, out, err, errlen);
    pdc__render_error(err, errlen, "unknown map format %d", (int)format);
    return PDC_RENDER_ERR_ARG;
}

int pdc_render_grid_load(const char *file, pdc_render_format format, const uint8_t costs[256],
                         const uint8_t costs_set[256], pdc_render_grid *out, char *err, size_t errlen)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (!file || !out) {
        pdc__render_error(err, errlen, "no map file or no output grid");
        return PDC_RENDER_ERR_ARG;
    }
    FILE *f = fopen(file, "rb");
    if (!f) {
        pdc__render_error(err, errlen, "cannot open %s: %s", file, strerror(errno));
        return PDC_RENDER_ERR_IO;
    }
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0)
        size = ftell(f);
    if (size < 0 || fseek(f, 0, SEEK_SET) != 0) {
        pdc__render_error(err, errlen, "cannot read %s: %s", file, strerror(errno));
        fclose(f);
        return PDC_RENDER_ERR_IO;
    }
    if ((unsigned long)size > PDC_RENDER_MAX_MAP_BYTES) {
        pdc__render_error(err, errlen, "%s is %ld bytes, more than any map of at most %d cells a side", file, size,
                          PDC_RENDER_MAX_GRID_SIDE);
        fclose(f);
        return PDC_RENDER_ERR_ARG;
    }
    char *buf = malloc(size ? (size_t)size : 1);
    if (!buf) {
        fclose(f);
        pdc__render_error(err, errlen, "out of memory reading %s", file);
        return PDC_RENDER_ERR_NOMEM;
    }
    size_t got = fread(buf, 1, (size_t)size, f);
    int read_failed = ferror(f);
    fclose(f);
    if (read_failed || got != (size_t)size) {
        free(buf);
        pdc__render_error(err, errlen, "cannot read %s", file);
        return PDC_RENDER_ERR_IO;
    }
    char detail[PDC_MESSAGE_MAX] = "";
    int status = pdc_render_grid_parse(buf, got, format, costs, costs_set, out, detail, sizeof detail);
    free(buf);
    if (status != PDC_RENDER_OK)
        pdc__render_error(err, errlen, "%s: %s", file, detail);
    return status;
}

/* ---- pathctl render ----------------------------------------------------- */

const char pathctl_render_usage[] =
    "  render -o FILE.png (--scene NAME | --map FILE [--format movingai|ascii]\n"
    "         [--costs \"C=N,...\"]) [--path \"X,Y;X,Y;...\" | --from X,Y --to X,Y\n"
    "         [--unit K] [--style cells|corners|smooth] [--connect 4|8]]\n"
    "                     draw a grid (walls dark, costs shaded) with a path:\n"
    "                     the server's scene NAME, or a local map file; --path\n"
    "                     draws the given waypoints, --from/--to asks the server\n"
    "                     for a path in scene NAME (with --map, the map must be\n"
    "                     that scene's); --unit K draws a K x K unit's footprint.\n"
    "  render -o FILE.png --scene NAME --route --from SCENE:X,Y --to SCENE:X,Y\n"
    "         [--unit K] [--style cells|corners|smooth]\n"
    "                     ask the server for a route across scenes and draw the\n"
    "                     legs that lie in scene NAME, each as its own line, with\n"
    "                     its portal cells in NAME marked orange; fails when no\n"
    "                     leg lies in NAME.\n";

/* Options that take a value: pathctl's own (so the command word can be found
 * behind them) and render's. */
static const char *const pathctl__value_options[] = {
    "--server", "--timeout", "--scene", "--from", "--to", "--unit", "--connect", "--style",
    "--max-expansions", "--deadline", "--goal-mode", "--speed", "--start-time", "--avoid",
    "--window", "--rect", "--cells", "--set", "--map", "--format", "--costs", "--path", "--output", "-o",
};

typedef enum pathctl__ropt {
    ROPT_SERVER, ROPT_TIMEOUT, ROPT_SCENE, ROPT_MAP, ROPT_FORMAT, ROPT_COSTS, ROPT_PATH,
    ROPT_FROM, ROPT_TO, ROPT_UNIT, ROPT_STYLE, ROPT_CONNECT, ROPT_OUTPUT,
    ROPT_COUNT
} pathctl__ropt;

static const char *const pathctl__ropt_names[ROPT_COUNT] = {
    "--server", "--timeout", "--scene", "--map", "--format", "--costs", "--path",
    "--from", "--to", "--unit", "--style", "--connect", "--output",
};

typedef struct pathctl__render_args {
    const char *val[ROPT_COUNT];
    int json;
    int timeout_ms;
    pdc_render_format format;
    uint8_t costs[256], costs_set[256];
    pdc_xy *points;             /* --path, heap */
    size_t point_count, point_cap;
    pdc_path_req req;           /* --from/--to */
    int grid_from_server;       /* no --map: the grid is the scene's, fetched */
    uint64_t grid_version;      /* ... and this is the version it was read from */
    int route;                  /* --route: --from/--to are SCENE:X,Y of a route */
    pdc_route_req route_req;    /* its scene names point into route_scene */
    char route_scene[2][PDC_RENDER_MAX_SCENE_NAME];
} pathctl__render_args;

static int pathctl__usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "pathctl render: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(try pathctl render --help)\n");
    return PATHCTL_RENDER_EXIT_USAGE;
}

static int pathctl__takes_value(const char *arg)
{
    for (size_t i = 0; i < sizeof pathctl__value_options / sizeof pathctl__value_options[0]; i++)
        if (!strcmp(arg, pathctl__value_options[i]))
            return 1;
    return 0;
}

/* Index of the command word in argv, or 0 if there is none. */
static int pathctl__command_index(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] != '-' || argv[i][1] == '\0')
            return i;
        if (pathctl__takes_value(argv[i]))
            i++;
    }
    return 0;
}

static int pathctl__parse_long(const char *s, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

/* "X,Y" cells within the daemon's grid limits (negative values are kept so
 * pdc_render_png can name them as outside the grid). */
static int pathctl__parse_xy(const char *s, pdc_xy *out)
{
    char item[PDC_RENDER_ITEM_MAX];
    const char *comma = strchr(s, ',');
    long x, y;
    if (!comma || (size_t)(comma - s) >= sizeof item)
        return -1;
    memcpy(item, s, (size_t)(comma - s));
    item[comma - s] = '\0';
    if (pathctl__parse_long(item, -PDC_RENDER_MAX_GRID_SIDE, PDC_RENDER_MAX_GRID_SIDE, &x) ||
        pathctl__parse_long(comma + 1, -PDC_RENDER_MAX_GRID_SIDE, PDC_RENDER_MAX_GRID_SIDE, &y))
        return -1;
    out->x = (int32_t)x;
    out->y = (int32_t)y;
    return 0;
}

/* Splits s at sep and calls item() on each piece (a trailing sep is allowed).
 * Returns the number of items, or -1 on an empty or overlong item, a failing
 * item(), or more than max items. */
static long pathctl__each_item(const char *s, char sep, size_t max, int (*item)(const char *, void *), void *ctx)
{
    size_t count = 0;
    while (*s) {
        const char *next = strchr(s, sep);
        size_t len = next ? (size_t)(next - s) : strlen(s);
        char buf[PDC_RENDER_ITEM_MAX];
        if (len == 0 || len >= sizeof buf || count == max)
            return -1;
        memcpy(buf, s, len);
        buf[len] = '\0';
        if (item(buf, ctx))
            return -1;
        count++;
        s += len + (next ? 1 : 0);
    }
    return count ? (long)count : -1;
}

static int pathctl__add_point(const char *item, void *ctx)
{
    pathctl__render_args *a = ctx;
    pdc_xy xy;
    if (pathctl__parse_xy(item, &xy))
        return -1;
    if (a->point_count == a->point_cap) {
        size_t cap = a->point_cap ? a->point_cap * 2 : 16;
        pdc_xy *grown = realloc(a->points, cap * sizeof *grown);
        if (!grown)
            return -1;
        a->points = grown;
        a->point_cap = cap;
    }
    a->points[a->point_count++] = xy;
    return 0;
}

static int pathctl__add_cost(const char *item, void *ctx)
{
    pathctl__render_args *a = ctx;
    long v;
    if (item[0] == '\0' || item[1] != '=' || pathctl__parse_long(item + 2, 0, 255, &v))
        return -1;
    a->costs[(unsigned char)item[0]] = (uint8_t)v;
    a->costs_set[(unsigned char)item[0]] = 1;
    return 0;
}

static int pathctl__ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

static int pathctl__parse_style(const char *s, pdc_style *out)
{
    if (!strcmp(s, "cells"))
        *out = PDC_STYLE_CELLS;
    else if (!strcmp(s, "corners"))
        *out = PDC_STYLE_CORNERS;
    else if (!strcmp(s, "smooth"))
        *out = PDC_STYLE_SMOOTH;
    else
        return -1;
    return 0;
}

/* "SCENE:X,Y" (split at the last ':', so the scene name may hold colons);
 * the name is copied into name[PDC_RENDER_MAX_SCENE_NAME]. */
static int pathctl__parse_scene_xy(const char *s, char *name, pdc_xy *out)
{
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s || (size_t)(colon - s) >= PDC_RENDER_MAX_SCENE_NAME)
        return -1;
    memcpy(name, s, (size_t)(colon - s));
    name[colon - s] = '\0';
    return pathctl__parse_xy(colon + 1, out);
}

/* The options of render --route, after the unit size is read. Returns -1 to
 * go on, or an exit code. */
static int pathctl__render_check_route(pathctl__render_args *a)
{
    const char *const *val = a->val;
    if (!val[ROPT_SCENE] || !val[ROPT_SCENE][0] || val[ROPT_MAP])
        return pathctl__usage_error("%s", "--route draws on a server scene: it needs --scene NAME and no --map");
    if (val[ROPT_PATH] || val[ROPT_CONNECT])
        return pathctl__usage_error("%s", "--route takes neither --path nor --connect (routes are 8-connected)");
    if (!val[ROPT_FROM] || !val[ROPT_TO])
        return pathctl__usage_error("%s", "--route needs --from SCENE:X,Y and --to SCENE:X,Y");
    pdc_xy from, to;
    if (pathctl__parse_scene_xy(val[ROPT_FROM], a->route_scene[0], &from))
        return pathctl__usage_error("bad --from %s (want SCENE:X,Y)", val[ROPT_FROM]);
    if (pathctl__parse_scene_xy(val[ROPT_TO], a->route_scene[1], &to))
        return pathctl__usage_error("bad --to %s (want SCENE:X,Y)", val[ROPT_TO]);
    a->route_req.from_scene = a->route_scene[0];
    a->route_req.to_scene = a->route_scene[1];
    a->route_req.start = pdc_cell(from.x, from.y);
    a->route_req.goal = pdc_cell(to.x, to.y);
    a->route_req.unit_size = a->req.unit_size;
    if (val[ROPT_STYLE] && pathctl__parse_style(val[ROPT_STYLE], &a->route_req.style))
        return pathctl__usage_error("bad --style %s (cells, corners or smooth)", val[ROPT_STYLE]);
    return -1;
}

/* Converts and cross-checks the options. Returns -1 to go on, or an exit code. */
static int pathctl__render_check_args(pathctl__render_args *a)
{
    const char *const *val = a->val;
    long n;
    if (!val[ROPT_OUTPUT] || !val[ROPT_OUTPUT][0])
        return pathctl__usage_error("%s", "render needs -o FILE.png");
    if (!val[ROPT_MAP] && (!val[ROPT_SCENE] || !val[ROPT_SCENE][0]))
        return pathctl__usage_error("%s", "render needs --scene NAME or --map FILE");
    if (!val[ROPT_MAP] && (val[ROPT_FORMAT] || val[ROPT_COSTS]))
        return pathctl__usage_error("%s", "--format and --costs go with --map");
    if (val[ROPT_MAP]) {
        if (!val[ROPT_FORMAT])
            a->format = pathctl__ends_with(val[ROPT_MAP], ".map") ? PDC_RENDER_FORMAT_MOVINGAI
                                                                  : PDC_RENDER_FORMAT_ASCII;
        else if (!strcmp(val[ROPT_FORMAT], "movingai"))
            a->format = PDC_RENDER_FORMAT_MOVINGAI;
        else if (!strcmp(val[ROPT_FORMAT], "ascii"))
            a->format = PDC_RENDER_FORMAT_ASCII;
        else
            return pathctl__usage_error("bad --format %s (movingai or ascii)", val[ROPT_FORMAT]);
        if (val[ROPT_COSTS] && (a->format != PDC_RENDER_FORMAT_MOVINGAI ||
                                pathctl__each_item(val[ROPT_COSTS], ',', 256, pathctl__add_cost, a) < 0))
            return pathctl__usage_error("bad --costs %s (want \"C=N,...\" with N 0..255, Moving AI maps only)",
                                        val[ROPT_COSTS]);
    }
    if (val[ROPT_UNIT]) {
        if (pathctl__parse_long(val[ROPT_UNIT], 1, PDC_RENDER_MAX_GRID_SIDE, &n))
            return pathctl__usage_error("bad --unit %s", val[ROPT_UNIT]);
        a->req.unit_size = (uint32_t)n;
    }
    if (a->route)
        return pathctl__render_check_route(a);
    int ask = val[ROPT_FROM] || val[ROPT_TO];
    if (ask && val[ROPT_PATH])
        return pathctl__usage_error("%s", "give either --path or --from/--to, not both");
    if (ask && (!val[ROPT_FROM] || !val[ROPT_TO] || !val[ROPT_SCENE] || !val[ROPT_SCENE][0]))
        return pathctl__usage_error("%s", "--from/--to need each other and --scene NAME");
    if (!ask && (val[ROPT_STYLE] || val[ROPT_CONNECT]))
        return pathctl__usage_error("%s", "--style and --connect go with --from/--to");
    if (!ask && val[ROPT_MAP] && val[ROPT_SCENE])
        return pathctl__usage_error("%s", "with --map, --scene goes with --from/--to");
    if (val[ROPT_PATH] &&
        pathctl__each_item(val[ROPT_PATH], ';', PDC_RENDER_MAX_PATH_POINTS, pathctl__add_point, a) < 0)
        return pathctl__usage_error("bad --path %s (want \"X,Y;X,Y;...\")", val[ROPT_PATH]);
    if (!ask)
        return -1;
    pdc_xy from, to;
    if (pathctl__parse_xy(val[ROPT_FROM], &from))
        return pathctl__usage_error("bad --from %s (want X,Y)", val[ROPT_FROM]);
    if (pathctl__parse_xy(val[ROPT_TO], &to))
        return pathctl__usage_error("bad --to %s (want X,Y)", val[ROPT_TO]);
    a->req.scene = val[ROPT_SCENE];
    a->req.start = pdc_cell(from.x, from.y);
    a->req.goal = pdc_cell(to.x, to.y);
    if (val[ROPT_STYLE] && pathctl__parse_style(val[ROPT_STYLE], &a->req.style))
        return pathctl__usage_error("bad --style %s (cells, corners or smooth)", val[ROPT_STYLE]);
    if (val[ROPT_CONNECT]) {
        if (pathctl__parse_long(val[ROPT_CONNECT], 4, 8, &n) || (n != 4 && n != 8))
            return pathctl__usage_error("bad --connect %s (4 or 8)", val[ROPT_CONNECT]);
        a->req.connectivity = (int)n;
    }
    return -1;
}

/* Reads render's argv (command word at cmd). Returns -1 to go on, or an exit code. */
static int pathctl__render_parse(int argc, char **argv, int cmd, pathctl__render_args *a)
{
    memset(a, 0, sizeof *a);
    a->timeout_ms = PDC_DEFAULT_TIMEOUT_MS;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (i == cmd)
            continue;
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            printf("usage: pathctl [--server HOST:PORT] [--json] [--timeout MS] render ...\n\n%s",
                   pathctl_render_usage);
            return 0;
        }
        if (!strcmp(arg, "--json")) {
            a->json = 1;
            continue;
        }
        if (!strcmp(arg, "--route")) {
            a->route = 1;
            continue;
        }
        const char *name = !strcmp(arg, "-o") ? "--output" : arg;
        size_t k = 0, len = 0;
        for (; k < ROPT_COUNT; k++) {
            len = strlen(pathctl__ropt_names[k]);
            if (!strncmp(name, pathctl__ropt_names[k], len) && (name[len] == '\0' || name[len] == '='))
                break;
        }
        if (k == ROPT_COUNT)
            return pathctl__usage_error(arg[0] == '-' ? "unknown option %s" : "unexpected argument %s", arg);
        if (name[len] == '=')
            a->val[k] = name + len + 1;
        else if (i + 1 < argc)
            a->val[k] = argv[++i];
        else
            return pathctl__usage_error("option %s needs a value", arg);
    }
    if (a->val[ROPT_TIMEOUT]) {
        long t;
        if (pathctl__parse_long(a->val[ROPT_TIMEOUT], 1, 3600000L, &t))
            return pathctl__usage_error("bad --timeout %s (milliseconds, > 0)", a->val[ROPT_TIMEOUT]);
        a->timeout_ms = (int)t;
    }
    return pathctl__render_check_args(a);
}

/* pathctl's exit codes for a call that did not return OK: a lost or
 * unreachable server is EXIT_CONNECT, anything the server answered (or a
 * broken answer) is EXIT_FAIL. Prints the reason first. */
static int pathctl__render_call_failed(pdc_conn *c, const char *what, int status)
{
    const char *detail = pdc_last_error(c);
    fprintf(stderr, "pathctl render: %s: %s%s%s\n", what, pdc_status_name(status), detail[0] ? ": " : "", detail);
    if (status == PDC_ERR_DISCONNECTED || status == PDC_ERR_TIMEOUT || status == PDC_ERR_CONNECT)
        return PATHCTL_RENDER_EXIT_CONNECT;
    return PATHCTL_RENDER_EXIT_FAIL;
}

/* Fetches the scene's grid into *g (which then owns the cells). Always the
 * scene grid itself, whatever --unit says: a unit's path is drawn with its
 * footprint over the real walls, which shows why it went where it did better
 * than the unit grid's shrunken open space would. Returns -1 or an exit code. */
static int pathctl__render_fetch_grid(pathctl__render_args *a, pdc_conn *c, pdc_render_grid *g)
{
    char what[PDC_MESSAGE_MAX];
    pdc_grid sg;
    int status = pdc_scene_grid(c, a->val[ROPT_SCENE], 1, &sg);
    if (status != PDC_OK) {
        snprintf(what, sizeof what, "grid of scene %s", a->val[ROPT_SCENE]);
        return pathctl__render_call_failed(c, what, status);
    }
    pdc_render_grid_free(g);
    g->width = sg.width;
    g->height = sg.height;
    g->cells = sg.cells;
    a->grid_from_server = 1;
    a->grid_version = sg.version;
    return -1;
}

/* The grid to draw: the --map file, or else the scene's grid from the
 * server. Returns -1 to go on, or an exit code. */
static int pathctl__render_load_grid(pathctl__render_args *a, pdc_conn *c, pdc_render_grid *g)
{
    char err[PDC_MESSAGE_MAX];
    memset(g, 0, sizeof *g);
    if (!a->val[ROPT_MAP])
        return pathctl__render_fetch_grid(a, c, g);
    if (pdc_render_grid_load(a->val[ROPT_MAP], a->format, a->costs, a->costs_set, g, err, sizeof err) !=
        PDC_RENDER_OK) {
        fprintf(stderr, "pathctl render: %s\n", err);
        return PATHCTL_RENDER_EXIT_FAIL;
    }
    return -1;
}

/* Asks the server for the path; fills *path_out (the caller frees it) and
 * *answer. A local map must have the scene's size, or the path would be
 * drawn on the wrong picture. When the grid came from the server and the
 * scene changed between fetching it and the search, the grid is fetched
 * again so the path is drawn on the version it was found on. Returns -1 to
 * go on drawing, or an exit code when there is nothing to draw against. */
static int pathctl__render_ask(pathctl__render_args *a, pdc_conn *c, pdc_render_grid *g, pdc_path_result *path_out,
                               int *answer)
{
    char what[PDC_MESSAGE_MAX];
    if (!a->grid_from_server) {
        pdc_scene_details info;
        int status = pdc_scene_info(c, a->req.scene, &info);
        int code = -1;
        if (status != PDC_OK) {
            snprintf(what, sizeof what, "scene %s", a->req.scene);
            code = pathctl__render_call_failed(c, what, status);
        } else if (info.width != g->width || info.height != g->height) {
            fprintf(stderr, "pathctl render: scene %s is %dx%d but the map file is %dx%d\n", a->req.scene,
                    info.width, info.height, g->width, g->height);
            code = PATHCTL_RENDER_EXIT_FAIL;
        }
        pdc_scene_details_free(&info);
        if (code >= 0)
            return code;
    }
    *answer = pdc_find_path(c, &a->req, path_out);
    if (*answer < 0) {
        snprintf(what, sizeof what, "path in scene %s", a->req.scene);
        return pathctl__render_call_failed(c, what, *answer);
    }
    if (a->grid_from_server && (*answer == PDC_OK || *answer == PDC_PARTIAL) &&
        path_out->scene_version != a->grid_version) {
        int code = pathctl__render_fetch_grid(a, c, g);
        if (code >= 0)
            return code;
        if (path_out->scene_version != a->grid_version)
            fprintf(stderr, "pathctl render: scene %s keeps changing: the path is from version %llu, "
                            "the picture shows version %llu\n",
                    a->req.scene, (unsigned long long)path_out->scene_version,
                    (unsigned long long)a->grid_version);
    }
    return -1;
}

/* Prints what was drawn. answer is the server's path or route status (-1:
 * none was asked for); legs_drawn is the number of route legs drawn (-1: not
 * a route). */
static void pathctl__render_report(const pathctl__render_args *a, const pdc_render_grid *g, size_t waypoints,
                                   int answer, long legs_drawn)
{
    uint32_t pw, ph;
    pdc_render_image_size(g->width, g->height, &pw, &ph);
    if (a->json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "status", "OK");
        cJSON_AddStringToObject(o, "output", a->val[ROPT_OUTPUT]);
        cJSON_AddNumberToObject(o, "width_px", pw);
        cJSON_AddNumberToObject(o, "height_px", ph);
        cJSON_AddNumberToObject(o, "grid_width", g->width);
        cJSON_AddNumberToObject(o, "grid_height", g->height);
        if (a->grid_from_server)
            cJSON_AddNumberToObject(o, "scene_version", (double)a->grid_version);
        cJSON_AddNumberToObject(o, "waypoints", (double)waypoints);
        if (answer >= 0)
            cJSON_AddStringToObject(o, legs_drawn >= 0 ? "route_status" : "path_status", pdc_status_name(answer));
        if (legs_drawn >= 0)
            cJSON_AddNumberToObject(o, "legs_drawn", (double)legs_drawn);
        char *text = cJSON_PrintUnformatted(o);
        puts(text ? text : "{\"status\":\"NO_MEMORY\"}");
        free(text);
        cJSON_Delete(o);
    } else {
        char legs[64] = "";
        if (legs_drawn >= 0)
            snprintf(legs, sizeof legs, ", %ld leg%s drawn", legs_drawn, legs_drawn == 1 ? "" : "s");
        printf("wrote %s: %ux%u px, grid %dx%d, %zu waypoints%s%s%s\n", a->val[ROPT_OUTPUT], pw, ph, g->width,
               g->height, waypoints, legs, answer < 0 ? "" : legs_drawn >= 0 ? ", route " : ", path ",
               answer >= 0 ? pdc_status_name(answer) : "");
    }
}

/* Draws the legs of route r that lie in the drawn scene, each as its own
 * line (never joined: between two visits the route walks elsewhere), with
 * the route's start and goal and the portal cells in the scene marked.
 * Returns the exit code. */
static int pathctl__render_route_legs(const pathctl__render_args *a, const pdc_render_grid *g,
                                      const pdc_route_result *r, int answer)
{
    const char *scene = a->val[ROPT_SCENE];
    size_t drawn = 0, waypoints = 0;
    for (size_t i = 0; i < r->leg_count; i++)
        if (!strcmp(r->legs[i].scene, scene)) {
            drawn++;
            waypoints += r->legs[i].count;
        }
    /* Two portal cells a leg, then the start and goal on top. */
    size_t marker_cap = 2 * r->leg_count + 2;
    pdc_render_line *lines = calloc(drawn ? drawn : 1, sizeof *lines);
    pdc_xy *points = malloc((waypoints ? waypoints : 1) * sizeof *points);
    pdc_render_marker *markers = malloc(marker_cap * sizeof *markers);
    int code = 0;
    if (!lines || !points || !markers) {
        fprintf(stderr, "pathctl render: out of memory for %zu route waypoints\n", waypoints);
        code = PATHCTL_RENDER_EXIT_FAIL;
        goto done;
    }
    pdc_render_drawing d = {lines, 0, markers, 0, a->route_req.unit_size};
    size_t used = 0;
    for (size_t i = 0; i < r->leg_count; i++) {
        const pdc_route_leg *leg = &r->legs[i];
        if (!strcmp(leg->scene, scene)) {
            lines[d.line_count].points = points + used;
            lines[d.line_count++].count = leg->count;
            for (size_t k = 0; k < leg->count; k++)
                points[used++] = (pdc_xy){leg->waypoints[k].x, leg->waypoints[k].y};
            if (leg->has_portal)
                markers[d.marker_count++] = (pdc_render_marker){leg->portal_exit, PDC_RENDER_RGB_PORTAL};
        }
        if (leg->has_portal && !strcmp(leg->portal_to_scene, scene))
            markers[d.marker_count++] = (pdc_render_marker){leg->portal_entry, PDC_RENDER_RGB_PORTAL};
    }
    if (!strcmp(a->route_req.from_scene, scene))
        markers[d.marker_count++] = (pdc_render_marker){{a->route_req.start.x, a->route_req.start.y},
                                                        PDC_RENDER_RGB_START};
    if (!strcmp(a->route_req.to_scene, scene))
        markers[d.marker_count++] = (pdc_render_marker){{a->route_req.goal.x, a->route_req.goal.y},
                                                        PDC_RENDER_RGB_GOAL};
    char err[PDC_MESSAGE_MAX];
    if (pdc_render_png_multi(a->val[ROPT_OUTPUT], g, &d, err, sizeof err) != PDC_RENDER_OK) {
        fprintf(stderr, "pathctl render: %s\n", err);
        code = PATHCTL_RENDER_EXIT_FAIL;
        goto done;
    }
    pathctl__render_report(a, g, waypoints, answer, (long)drawn);
done:
    free(lines);
    free(points);
    free(markers);
    return code;
}

/* render --route: asks the server for the route and draws its legs in the
 * scene. Nothing is written when there is no route or no leg in the scene.
 * When a leg in the scene was found on another version than the grid shows,
 * the grid is fetched again, as for a path. Returns the exit code. */
static int pathctl__render_route(pathctl__render_args *a, pdc_conn *c, pdc_render_grid *g)
{
    const char *scene = a->val[ROPT_SCENE];
    const pdc_route_req *q = &a->route_req;
    char what[PDC_MESSAGE_MAX];
    pdc_route_result r;
    memset(&r, 0, sizeof r);
    int code;
    int answer = pdc_find_route(c, q, &r);
    if (answer < 0) {
        snprintf(what, sizeof what, "route from %s to %s", q->from_scene, q->to_scene);
        code = pathctl__render_call_failed(c, what, answer);
        goto done;
    }
    if (answer != PDC_OK && answer != PDC_PARTIAL) {
        fprintf(stderr, "pathctl render: route from %s to %s: %s%s%s\n", q->from_scene, q->to_scene,
                pdc_status_name(answer), r.message[0] ? ": " : "", r.message);
        code = PATHCTL_RENDER_EXIT_FAIL;
        goto done;
    }
    const pdc_route_leg *stale = NULL;
    size_t in_scene = 0;
    for (size_t i = 0; i < r.leg_count; i++)
        if (!strcmp(r.legs[i].scene, scene)) {
            in_scene++;
            if (r.legs[i].scene_version != a->grid_version)
                stale = &r.legs[i];
        }
    if (!in_scene) {
        fprintf(stderr, "pathctl render: the route from %s to %s (%zu legs) has no leg in scene %s; "
                        "nothing drawn\n",
                q->from_scene, q->to_scene, r.leg_count, scene);
        code = PATHCTL_RENDER_EXIT_FAIL;
        goto done;
    }
    if (stale) {
        code = pathctl__render_fetch_grid(a, c, g);
        if (code >= 0)
            goto done;
        if (stale->scene_version != a->grid_version)
            fprintf(stderr, "pathctl render: scene %s keeps changing: the route is from version %llu, "
                            "the picture shows version %llu\n",
                    scene, (unsigned long long)stale->scene_version, (unsigned long long)a->grid_version);
    }
    code = pathctl__render_route_legs(a, g, &r, answer);
done:
    pdc_route_result_free(&r);
    return code;
}

int pathctl_render_main(int argc, char **argv)
{
    int cmd = pathctl__command_index(argc, argv);
    if (!cmd || strcmp(argv[cmd], "render"))
        return PATHCTL_RENDER_NOT_MINE;
    pathctl__render_args a;
    int code = pathctl__render_parse(argc, argv, cmd, &a);
    if (code >= 0) {
        free(a.points);
        return code;
    }
    /* One connection serves both the grid and the path. */
    pdc_conn *c = NULL;
    if (!a.val[ROPT_MAP] || a.req.scene) {
        char err[PDC_MESSAGE_MAX];
        const char *server = a.val[ROPT_SERVER] ? a.val[ROPT_SERVER] : PDC_DEFAULT_SERVER;
        c = pdc_connect_flags(server, a.timeout_ms, PDC_CONNECT_NO_FLOW_CONTROL, err, sizeof err);
        if (!c) {
            fprintf(stderr, "pathctl render: %s\n", err);
            free(a.points);
            return PATHCTL_RENDER_EXIT_CONNECT;
        }
    }
    pdc_render_grid g;
    code = pathctl__render_load_grid(&a, c, &g);
    if (code >= 0) {
        pdc_close(c);
        free(a.points);
        return code;
    }
    if (a.route) {
        code = pathctl__render_route(&a, c, &g);
        pdc_close(c);
        pdc_render_grid_free(&g);
        return code;
    }
    pdc_render_path p = {a.points, a.point_count, a.req.unit_size, 0, 0, {0, 0}, {0, 0}};
    pdc_path_result r;
    memset(&r, 0, sizeof r);
    int answer = -1;            /* the server's status for --from/--to */
    if (a.req.scene) {
        code = pathctl__render_ask(&a, c, &g, &r, &answer);
        p.points = NULL;
        p.count = 0;
        p.has_start = p.has_goal = 1;
        p.start = (pdc_xy){a.req.start.x, a.req.start.y};
        p.goal = (pdc_xy){a.req.goal.x, a.req.goal.y};
    } else if (a.point_count) {
        p.has_start = p.has_goal = 1;
        p.start = a.points[0];
        p.goal = a.points[a.point_count - 1];
    }
    pdc_xy *answered = NULL;
    if (code < 0 && r.count) {
        answered = malloc(r.count * sizeof *answered);
        if (!answered) {
            fprintf(stderr, "pathctl render: out of memory for %zu waypoints\n", r.count);
            code = PATHCTL_RENDER_EXIT_FAIL;
        } else {
            for (size_t i = 0; i < r.count; i++)
                answered[i] = (pdc_xy){r.waypoints[i].x, r.waypoints[i].y};
            p.points = answered;
            p.count = r.count;
        }
    }
    pdc_close(c);
    if (code < 0) {
        char err[PDC_MESSAGE_MAX];
        if (pdc_render_png(a.val[ROPT_OUTPUT], &g, &p, err, sizeof err) != PDC_RENDER_OK) {
            fprintf(stderr, "pathctl render: %s\n", err);
            code = PATHCTL_RENDER_EXIT_FAIL;
        } else {
            pathctl__render_report(&a, &g, p.count, answer, -1);
            code = 0;
            /* The picture shows the markers even when there is no path, but
             * the exit status still says the answer was not a path. */
            if (answer >= 0 && answer != PDC_OK && answer != PDC_PARTIAL) {
                fprintf(stderr, "pathctl render: %s%s%s\n", pdc_status_name(answer), r.message[0] ? ": " : "",
                        r.message);
                code = PATHCTL_RENDER_EXIT_FAIL;
            }
        }
    }
    free(answered);
    pdc_path_result_free(&r);
    pdc_render_grid_free(&g);
    free(a.points);
    return code;
}
