/*
 * test_render.c - pictures of grids and paths (client-examples/c/pathctl_render.h).
 *
 * Every picture is written to a file and decoded again with libpng, so the
 * checks see what a viewer would: the size rule, the shading of walls, open
 * ground and costs, a path that stays on passable cells, the markers, and the
 * map parsers and the `pathctl render` command that feed the renderer.
 * `render --scene` fetches its grid from a fake server: a child process
 * serving one connection with canned GetSceneGrid bands and FindPath and
 * FindRoute answers built with the generated protobuf-c code.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <png.h>

#include "pathctl_render.h"
#include "pathd.pb-c.h"
#include "pd_testsock.h"

#define OUT_DIR PD_BINARY_DIR "/test_render_out"

typedef struct decoded {
    uint32_t width, height;
    uint8_t *rgb;
} decoded;

static void out_path(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%ld-%s", OUT_DIR, (long)getpid(), name);
}

static void decode_png(const char *path, decoded *img)
{
    png_image pi;
    memset(&pi, 0, sizeof pi);
    pi.version = PNG_IMAGE_VERSION;
    assert_true(png_image_begin_read_from_file(&pi, path));
    pi.format = PNG_FORMAT_RGB;
    img->width = pi.width;
    img->height = pi.height;
    img->rgb = malloc(PNG_IMAGE_SIZE(pi));
    assert_non_null(img->rgb);
    assert_true(png_image_finish_read(&pi, NULL, img->rgb, 0, NULL));
    png_image_free(&pi);
}

static uint32_t pixel(const decoded *img, uint32_t x, uint32_t y)
{
    const uint8_t *p = img->rgb + ((size_t)y * img->width + x) * 3;
    return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

/* Perceived brightness, 0..255. */
static double luma(uint32_t rgb)
{
    return 0.299 * (rgb >> 16 & 0xFF) + 0.587 * (rgb >> 8 & 0xFF) + 0.114 * (rgb & 0xFF);
}

static int setup(void **state)
{
    (void)state;
    mkdir(OUT_DIR, 0755);
    return 0;
}

/* A 10x6 room: a wall block, two cost cells (3 and 9) and open ground. */
static const char *const room_rows[] = {
    "..........",
    ".####.....",
    ".#..#..3..",
    ".#..#..9..",
    "....#.....",
    "..........",
};
#define ROOM_W 10
#define ROOM_H 6

static void room_grid(pdc_render_grid *g, uint8_t *cells)
{
    for (int y = 0; y < ROOM_H; y++)
        for (int x = 0; x < ROOM_W; x++) {
            char c = room_rows[y][x];
            cells[y * ROOM_W + x] = c == '#' ? 0 : c == '.' ? 1 : (uint8_t)(c - '0');
        }
    g->width = ROOM_W;
    g->height = ROOM_H;
    g->cells = cells;
}

/* Cell by cell from the top-left to the bottom-right corner, round the wall,
 * with two diagonal steps whose orthogonal neighbours are both open. */
static const pdc_xy room_path[] = {
    {0, 0}, {1, 0}, {2, 0}, {3, 0}, {4, 0}, {5, 0}, {6, 1}, {6, 2}, {6, 3}, {6, 4}, {7, 5}, {8, 5}, {9, 5},
};
#define ROOM_PATH_LEN (sizeof room_path / sizeof room_path[0])

static void test_small_grid_picture(void **state)
{
    (void)state;
    uint8_t cells[ROOM_W * ROOM_H];
    pdc_render_grid g;
    room_grid(&g, cells);
    pdc_render_path p = {room_path, ROOM_PATH_LEN, 1, 1, 1, room_path[0], room_path[ROOM_PATH_LEN - 1]};
    char file[512], err[256] = "";
    out_path(file, sizeof file, "room.png");
    assert_int_equal(pdc_render_png(file, &g, &p, err, sizeof err), PDC_RENDER_OK);

    decoded img;
    decode_png(file, &img);
    /* The least whole number of pixels per cell that makes the longer side
     * (10 cells) reach the minimum. */
    const uint32_t s = (PDC_RENDER_MIN_SIDE_PX + ROOM_W - 1) / ROOM_W;
    assert_true(s * ROOM_W >= PDC_RENDER_MIN_SIDE_PX && (s - 1) * ROOM_W < PDC_RENDER_MIN_SIDE_PX);
    assert_int_equal(img.width, ROOM_W * s);
    assert_int_equal(img.height, ROOM_H * s);

    /* Every pixel is the path, a marker, or its cell's own colour; each cell
     * value has exactly one colour. */
    uint32_t colour_of[256];
    int seen[256] = {0};
    size_t path_pixels = 0;
    for (uint32_t y = 0; y < img.height; y++)
        for (uint32_t x = 0; x < img.width; x++) {
            uint32_t c = pixel(&img, x, y);
            uint8_t v = cells[(y / s) * ROOM_W + x / s];
            if (c == PDC_RENDER_RGB_PATH) {
                assert_int_not_equal(v, 0);
                path_pixels++;
            } else if (c != PDC_RENDER_RGB_START && c != PDC_RENDER_RGB_GOAL && c != PDC_RENDER_RGB_OUTLINE) {
                if (!seen[v]) {
                    seen[v] = 1;
                    colour_of[v] = c;
                }
                assert_int_equal(c, colour_of[v]);
            }
        }
    assert_true(seen[0] && seen[1] && seen[3] && seen[9]);
    assert_true(luma(colour_of[0]) < 64.0);
    assert_true(luma(colour_of[1]) > 200.0);
    assert_true(luma(colour_of[0]) < luma(colour_of[9]));
    assert_true(luma(colour_of[9]) < luma(colour_of[3]));
    assert_true(luma(colour_of[3]) < luma(colour_of[1]));

    /* The line goes through the centre of every inner waypoint and halfway
     * along each step; the markers sit on the ends. */
    assert_true(path_pixels > 0);
    for (size_t i = 0; i + 1 < ROOM_PATH_LEN; i++) {
        uint32_t cx = (uint32_t)room_path[i].x * s + s / 2, cy = (uint32_t)room_path[i].y * s + s / 2;
        uint32_t nx = (uint32_t)room_path[i + 1].x * s + s / 2, ny = (uint32_t)room_path[i + 1].y * s + s / 2;
        if (i > 0)
            assert_int_equal(pixel(&img, cx, cy), PDC_RENDER_RGB_PATH);
        assert_int_equal(pixel(&img, (cx + nx) / 2, (cy + ny) / 2), PDC_RENDER_RGB_PATH);
    }
    assert_int_equal(pixel(&img, room_path[0].x * s + s / 2, room_path[0].y * s + s / 2), PDC_RENDER_RGB_START);
    pdc_xy goal = room_path[ROOM_PATH_LEN - 1];
    assert_int_equal(pixel(&img, goal.x * s + s / 2, goal.y * s + s / 2), PDC_RENDER_RGB_GOAL);
    free(img.rgb);
    unlink(file);
}

/* No path at all: only the grid, so no pixel has a path or marker colour. */
static void test_grid_without_path(void **state)
{
    (void)state;
    uint8_t cells[ROOM_W * ROOM_H];
    pdc_render_grid g;
    room_grid(&g, cells);
    char file[512], err[256] = "";
    out_path(file, sizeof file, "bare.png");
    assert_int_equal(pdc_render_png(file, &g, NULL, err, sizeof err), PDC_RENDER_OK);
    decoded img;
    decode_png(file, &img);
    for (uint32_t y = 0; y < img.height; y++)
        for (uint32_t x = 0; x < img.width; x++) {
            uint32_t c = pixel(&img, x, y);
            assert_true(c != PDC_RENDER_RGB_PATH && c != PDC_RENDER_RGB_START && c != PDC_RENDER_RGB_GOAL);
        }
    free(img.rgb);
    unlink(file);
}

/* A 2x2 unit's line runs through its footprint's centre: the corner shared
 * by the four cells under it. */
static void test_unit_footprint_centre(void **state)
{
    (void)state;
    uint8_t cells[8 * 8];
    memset(cells, 1, sizeof cells);
    pdc_render_grid g = {8, 8, cells};
    const pdc_xy pts[] = {{0, 0}, {1, 0}, {2, 0}, {3, 0}, {4, 0}, {5, 0}, {6, 0}};
    pdc_render_path p = {pts, 7, 2, 0, 0, {0, 0}, {0, 0}};
    char file[512], err[256] = "";
    out_path(file, sizeof file, "unit.png");
    assert_int_equal(pdc_render_png(file, &g, &p, err, sizeof err), PDC_RENDER_OK);
    decoded img;
    decode_png(file, &img);
    const uint32_t s = PDC_RENDER_MIN_SIDE_PX / 8;
    assert_int_equal(img.width, 8 * s);
    assert_int_equal(pixel(&img, 3 * s, s), PDC_RENDER_RGB_PATH);
    assert_int_not_equal(pixel(&img, 3 * s, s / 2), PDC_RENDER_RGB_PATH);
    free(img.rgb);
    unlink(file);
}

static void test_large_grid_downscaled(void **state)
{
    (void)state;
    const int32_t w = 2000, h = 1000;
    uint8_t *cells = malloc((size_t)w * h);
    assert_non_null(cells);
    /* Left half walls, right half open ground. */
    for (int32_t y = 0; y < h; y++)
        for (int32_t x = 0; x < w; x++)
            cells[(size_t)y * w + x] = x < w / 2 ? 0 : 1;
    pdc_render_grid g = {w, h, cells};
    char file[512], err[256] = "";
    out_path(file, sizeof file, "large.png");
    assert_int_equal(pdc_render_png(file, &g, NULL, err, sizeof err), PDC_RENDER_OK);
    decoded img;
    decode_png(file, &img);
    assert_int_equal(img.width, PDC_RENDER_MAX_SIDE_PX);
    assert_int_equal(img.height, PDC_RENDER_MAX_SIDE_PX / 2);
    assert_int_equal(pixel(&img, 10, 10), PDC_RENDER_RGB_BLOCKED);
    assert_int_equal(pixel(&img, img.width - 10, img.height - 10), PDC_RENDER_RGB_FREE);
    free(img.rgb);
    unlink(file);
    free(cells);

    /* The rule keeps the aspect ratio whichever side is longer. */
    uint32_t pw, ph;
    pdc_render_image_size(1000, 2000, &pw, &ph);
    assert_int_equal(pw, PDC_RENDER_MAX_SIDE_PX / 2);
    assert_int_equal(ph, PDC_RENDER_MAX_SIDE_PX);
    pdc_render_image_size(3000, 1, &pw, &ph);
    assert_int_equal(pw, PDC_RENDER_MAX_SIDE_PX);
    assert_int_equal(ph, 1);
    pdc_render_image_size(512, 512, &pw, &ph);
    assert_int_equal(pw, 512);
    assert_int_equal(ph, 512);
}

/* A downscaled pixel averages its cells: a checkerboard turns mid-grey. */
static void test_downscale_averages(void **state)
{
    (void)state;
    const int32_t w = 2048, h = 2048;
    uint8_t *cells = malloc((size_t)w * h);
    assert_non_null(cells);
    for (int32_t y = 0; y < h; y++)
        for (int32_t x = 0; x < w; x++)
            cells[(size_t)y * w + x] = (x + y) % 2;
    pdc_render_grid g = {w, h, cells};
    char file[512], err[256] = "";
    out_path(file, sizeof file, "checker.png");
    assert_int_equal(pdc_render_png(file, &g, NULL, err, sizeof err), PDC_RENDER_OK);
    decoded img;
    decode_png(file, &img);
    double mid = (luma(PDC_RENDER_RGB_BLOCKED) + luma(PDC_RENDER_RGB_FREE)) / 2.0;
    assert_true(luma(pixel(&img, 100, 100)) > mid - 2.0 && luma(pixel(&img, 100, 100)) < mid + 2.0);
    free(img.rgb);
    unlink(file);
    free(cells);
}

static void test_bad_output_path(void **state)
{
    (void)state;
    uint8_t cells[ROOM_W * ROOM_H];
    pdc_render_grid g;
    room_grid(&g, cells);
    char err[256] = "";
    const char *missing = "/nonexistent-pathd-dir/out.png";
    assert_int_equal(pdc_render_png(missing, &g, NULL, err, sizeof err), PDC_RENDER_ERR_IO);
    assert_non_null(strstr(err, missing));
    assert_non_null(strstr(err, "No such file"));
    /* A directory cannot be written as a file either. */
    err[0] = '\0';
    assert_int_equal(pdc_render_png(OUT_DIR, &g, NULL, err, sizeof err), PDC_RENDER_ERR_IO);
    assert_non_null(strstr(err, OUT_DIR));
    assert_int_equal(pdc_render_png("", &g, NULL, err, sizeof err), PDC_RENDER_ERR_ARG);
}

static void test_bad_grid_and_path(void **state)
{
    (void)state;
    uint8_t cells[ROOM_W * ROOM_H];
    pdc_render_grid g;
    room_grid(&g, cells);
    char file[512], err[256] = "";
    out_path(file, sizeof file, "bad.png");

    const pdc_xy outside[] = {{0, 0}, {ROOM_W, 0}};
    pdc_render_path p = {outside, 2, 1, 0, 0, {0, 0}, {0, 0}};
    assert_int_equal(pdc_render_png(file, &g, &p, err, sizeof err), PDC_RENDER_ERR_ARG);
    assert_non_null(strstr(err, "waypoint 1"));

    /* A 2x2 unit at the last column would stick out of the grid. */
    const pdc_xy edge[] = {{ROOM_W - 1, 0}};
    pdc_render_path unit = {edge, 1, 2, 0, 0, {0, 0}, {0, 0}};
    assert_int_equal(pdc_render_png(file, &g, &unit, err, sizeof err), PDC_RENDER_ERR_ARG);

    pdc_render_path marker = {NULL, 0, 1, 1, 0, {-1, 2}, {0, 0}};
    assert_int_equal(pdc_render_png(file, &g, &marker, err, sizeof err), PDC_RENDER_ERR_ARG);
    assert_non_null(strstr(err, "marker (-1,2)"));

    pdc_render_path no_points = {NULL, 3, 1, 0, 0, {0, 0}, {0, 0}};
    assert_int_equal(pdc_render_png(file, &g, &no_points, err, sizeof err), PDC_RENDER_ERR_ARG);

    pdc_render_grid empty = {0, 5, cells};
    assert_int_equal(pdc_render_png(file, &empty, NULL, err, sizeof err), PDC_RENDER_ERR_ARG);
    pdc_render_grid huge = {PDC_RENDER_MAX_GRID_SIDE + 1, 1, cells};
    assert_int_equal(pdc_render_png(file, &huge, NULL, err, sizeof err), PDC_RENDER_ERR_ARG);
    /* Nothing was written for any of them. */
    assert_int_not_equal(access(file, F_OK), 0);
}

static void test_parse_ascii(void **state)
{
    (void)state;
    const char map[] = "; a comment\r\n.#3\r\n9..\r\n\r\n";
    pdc_render_grid g;
    char err[256] = "";
    assert_int_equal(pdc_render_grid_parse(map, strlen(map), PDC_RENDER_FORMAT_ASCII, NULL, NULL, &g, err, sizeof err),
                     PDC_RENDER_OK);
    assert_int_equal(g.width, 3);
    assert_int_equal(g.height, 2);
    const uint8_t want[] = {1, 0, 3, 9, 1, 1};
    assert_memory_equal(g.cells, want, sizeof want);
    pdc_render_grid_free(&g);
    assert_null(g.cells);

    const char ragged[] = "...\n..\n";
    assert_int_equal(pdc_render_grid_parse(ragged, strlen(ragged), PDC_RENDER_FORMAT_ASCII, NULL, NULL, &g, err,
                                           sizeof err),
                     PDC_RENDER_ERR_PARSE);
    assert_non_null(strstr(err, "line 2"));
    const char gap[] = "..\n\n..\n";
    assert_int_equal(pdc_render_grid_parse(gap, strlen(gap), PDC_RENDER_FORMAT_ASCII, NULL, NULL, &g, err,
                                           sizeof err),
                     PDC_RENDER_ERR_PARSE);
    const char letter[] = "..x\n";
    assert_int_equal(pdc_render_grid_parse(letter, strlen(letter), PDC_RENDER_FORMAT_ASCII, NULL, NULL, &g, err,
                                           sizeof err),
                     PDC_RENDER_ERR_PARSE);
    assert_non_null(strstr(err, "column 3"));
    assert_int_equal(pdc_render_grid_parse("", 0, PDC_RENDER_FORMAT_ASCII, NULL, NULL, &g, err, sizeof err),
                     PDC_RENDER_ERR_PARSE);
}

static void test_parse_movingai(void **state)
{
    (void)state;
    const char map[] = "type octile\nheight 2\nwidth 4\nmap\n.GS@\nOTW.\n";
    pdc_render_grid g;
    char err[256] = "";
    assert_int_equal(pdc_render_grid_parse(map, strlen(map), PDC_RENDER_FORMAT_MOVINGAI, NULL, NULL, &g, err,
                                           sizeof err),
                     PDC_RENDER_OK);
    assert_int_equal(g.width, 4);
    assert_int_equal(g.height, 2);
    const uint8_t want[] = {1, 1, 1, 0, 0, 0, 0, 1};
    assert_memory_equal(g.cells, want, sizeof want);
    pdc_render_grid_free(&g);

    /* Overrides as in a scene's "costs": swamp costs 3, water is walkable. */
    uint8_t costs[256] = {0}, set[256] = {0};
    costs['S'] = 3;
    set['S'] = 1;
    costs['W'] = 1;
    set['W'] = 1;
    assert_int_equal(pdc_render_grid_parse(map, strlen(map), PDC_RENDER_FORMAT_MOVINGAI, costs, set, &g, err,
                                           sizeof err),
                     PDC_RENDER_OK);
    assert_int_equal(g.cells[2], 3);
    assert_int_equal(g.cells[6], 1);
    pdc_render_grid_free(&g);

    const char short_rows[] = "type octile\nheight 3\nwidth 4\nmap\n....\n....\n";
    assert_int_equal(pdc_render_grid_parse(short_rows, strlen(short_rows), PDC_RENDER_FORMAT_MOVINGAI, NULL, NULL,
                                           &g, err, sizeof err),
                     PDC_RENDER_ERR_PARSE);
    assert_non_null(strstr(err, "expected 3 map rows"));
    const char no_type[] = "height 1\nwidth 1\nmap\n.\n";
    assert_int_equal(pdc_render_grid_parse(no_type, strlen(no_type), PDC_RENDER_FORMAT_MOVINGAI, NULL, NULL, &g,
                                           err, sizeof err),
                     PDC_RENDER_ERR_PARSE);
    const char too_wide[] = "type octile\nheight 1\nwidth 99999\nmap\n.\n";
    assert_int_equal(pdc_render_grid_parse(too_wide, strlen(too_wide), PDC_RENDER_FORMAT_MOVINGAI, NULL, NULL, &g,
                                           err, sizeof err),
                     PDC_RENDER_ERR_PARSE);
    assert_null(g.cells);

    assert_int_equal(pdc_render_grid_load("/nonexistent-pathd-dir/x.map", PDC_RENDER_FORMAT_MOVINGAI, NULL, NULL,
                                          &g, err, sizeof err),
                     PDC_RENDER_ERR_IO);
    assert_non_null(strstr(err, "/nonexistent-pathd-dir/x.map"));
}

/* Runs pathctl_render_main on a NULL-terminated argument list. */
static int run_render(const char *first, ...)
{
    char *argv[32];
    int argc = 0;
    argv[argc++] = (char *)"pathctl";
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && argc < 31; a = va_arg(ap, const char *))
        argv[argc++] = (char *)a;
    va_end(ap);
    argv[argc] = NULL;
    return pathctl_render_main(argc, argv);
}

static void test_render_command(void **state)
{
    (void)state;
    char map[512], file[512];
    out_path(map, sizeof map, "room.txt");
    out_path(file, sizeof file, "cli.png");
    FILE *f = fopen(map, "w");
    assert_non_null(f);
    for (int y = 0; y < ROOM_H; y++)
        fprintf(f, "%s\n", room_rows[y]);
    fclose(f);

    /* Another command is not render's business. */
    assert_int_equal(run_render("--server", "127.0.0.1:1", "path", "--scene", "render", NULL),
                     PATHCTL_RENDER_NOT_MINE);
    assert_int_equal(run_render("ping", NULL), PATHCTL_RENDER_NOT_MINE);

    assert_int_equal(run_render("--json", "render", "--map", map, "--format", "ascii", "--path",
                                "0,0;5,0;6,1;6,4;7,5;9,5", "-o", file, NULL),
                     0);
    decoded img;
    decode_png(file, &img);
    const uint32_t s = (PDC_RENDER_MIN_SIDE_PX + ROOM_W - 1) / ROOM_W;
    assert_int_equal(img.width, ROOM_W * s);
    assert_int_equal(img.height, ROOM_H * s);
    assert_int_equal(pixel(&img, s / 2, s / 2), PDC_RENDER_RGB_START);
    assert_int_equal(pixel(&img, 9 * s + s / 2, 5 * s + s / 2), PDC_RENDER_RGB_GOAL);
    assert_int_equal(pixel(&img, 3 * s + s / 2, s / 2), PDC_RENDER_RGB_PATH);
    free(img.rgb);
    unlink(file);

    /* Usage errors: no output, neither map nor scene, map options without a
     * map, a half-given query, both --path and --from/--to, a bad waypoint
     * list. */
    assert_int_equal(run_render("render", "--map", map, NULL), PATHCTL_RENDER_EXIT_USAGE);
    assert_int_equal(run_render("render", "-o", file, NULL), PATHCTL_RENDER_EXIT_USAGE);
    assert_int_equal(run_render("render", "--scene", "town", "--format", "ascii", "-o", file, NULL),
                     PATHCTL_RENDER_EXIT_USAGE);
    assert_int_equal(run_render("render", "--scene", "town", "--costs", "S=3", "-o", file, NULL),
                     PATHCTL_RENDER_EXIT_USAGE);
    assert_int_equal(run_render("render", "--map", map, "--scene", "town", "-o", file, NULL),
                     PATHCTL_RENDER_EXIT_USAGE);
    assert_int_equal(run_render("render", "--scene", "town", "--style", "smooth", "-o", file, NULL),
                     PATHCTL_RENDER_EXIT_USAGE);
    assert_int_equal(run_render("render", "--map", map, "--from", "0,0", "-o", file, NULL),
                     PATHCTL_RENDER_EXIT_USAGE);
    assert_int_equal(run_render("render", "--map", map, "--scene", "x", "--from", "0,0", "--to", "1,1", "--path",
                                "0,0", "-o", file, NULL),
                     PATHCTL_RENDER_EXIT_USAGE);
    assert_int_equal(run_render("render", "--map", map, "--path", "0,0;;1,1", "-o", file, NULL),
                     PATHCTL_RENDER_EXIT_USAGE);
    assert_int_equal(run_render("render", "--map", map, "--format", "tiled", "-o", file, NULL),
                     PATHCTL_RENDER_EXIT_USAGE);
    assert_int_equal(run_render("render", "--map", map, "--frobnicate", "-o", file, NULL),
                     PATHCTL_RENDER_EXIT_USAGE);
    /* Work that fails: a waypoint off the map, a missing map, no server. */
    assert_int_equal(run_render("render", "--map", map, "--path", "0,0;40,0", "-o", file, NULL),
                     PATHCTL_RENDER_EXIT_FAIL);
    assert_int_equal(run_render("render", "--map", OUT_DIR "/missing.txt", "-o", file, NULL),
                     PATHCTL_RENDER_EXIT_FAIL);
    assert_int_equal(run_render("--server", "127.0.0.1:1", "--timeout", "2000", "render", "--map", map, "--scene",
                                "room", "--from", "0,0", "--to", "9,5", "-o", file, NULL),
                     PATHCTL_RENDER_EXIT_CONNECT);
    assert_int_equal(run_render("--server", "127.0.0.1:1", "--timeout", "2000", "render", "--scene", "room", "-o",
                                file, NULL),
                     PATHCTL_RENDER_EXIT_CONNECT);
    assert_int_not_equal(access(file, F_OK), 0);
    unlink(map);
}

/* ---- render --scene against a fake server ------------------------------- */

/* The fake answers GetSceneGrid with bands of FAKE_BAND_ROWS rows of the
 * room, so the picture needs several requests, and FindPath with room_path.
 * In the "changed" script the path comes from version 2, in which cell
 * (2,2) costs 9: pathctl must fetch the grid again and draw version 2.
 * FindRoute is answered with route_in_room (two legs in the room, one in
 * the cellar between them) or, in the "elsewhere" script, route_elsewhere
 * (no leg in the room). */
#define FAKE_BAND_ROWS 2
#define FAKE_WAIT_MS 10000

typedef enum fake_script {
    FAKE_PLAIN,
    FAKE_CHANGED,
    FAKE_ROUTE_ELSEWHERE,
} fake_script;

typedef struct fake_counts {
    int grid_requests, find_requests, route_requests, failed;
} fake_counts;

/* A canned route leg; portal_to is NULL on the last leg. */
typedef struct fake_leg {
    const char *scene;
    pdc_xy points[4];
    size_t count;
    const char *portal_to;
    pdc_xy entry;               /* the next leg's first cell */
} fake_leg;

/* room (0,0) -> trapdoor at (3,0) -> cellar -> ladder -> room (9,2) -> (9,5).
 * The straight line from the first leg's end to the second room leg's start
 * crosses open cells no leg visits, so a joining line would show. */
static const fake_leg route_in_room[] = {
    {"room", {{0, 0}, {1, 0}, {2, 0}, {3, 0}}, 4, "cellar", {2, 2}},
    {"cellar", {{2, 2}, {3, 3}, {4, 4}}, 3, "room", {9, 2}},
    {"room", {{9, 2}, {9, 3}, {9, 4}, {9, 5}}, 4, NULL, {0, 0}},
};
static const fake_leg route_elsewhere[] = {
    {"cellar", {{2, 2}, {3, 3}, {4, 4}}, 3, "house", {1, 1}},
    {"house", {{1, 1}, {1, 2}}, 2, NULL, {0, 0}},
};

static uint8_t fake_room_cell(uint64_t version, int32_t x, int32_t y)
{
    char c = room_rows[y][x];
    if (version >= 2 && x == 2 && y == 2)
        return 9;
    return c == '#' ? 0 : c == '.' ? 1 : (uint8_t)(c - '0');
}

/* 1 when all n bytes came within the fake's wait. */
static int fake_read_exact(int fd, uint8_t *buf, size_t n)
{
    return pd_ts_recv_exact(fd, buf, n, FAKE_WAIT_MS) == (ssize_t)n;
}

static int fake_send(int fd, const Pathd__V1__Response *resp)
{
    return pd_ts_send_msg(fd, &resp->base, FAKE_WAIT_MS);
}

static int fake_answer_grid(int fd, const Pathd__V1__Request *req, uint64_t version)
{
    const Pathd__V1__GetSceneGrid *g = req->scene_grid;
    if (strcmp(g->scene, "room") != 0 || g->unit_size > 1 || g->row_count != 0 || g->row_start < 0) {
        Pathd__V1__Response resp = PATHD__V1__RESPONSE__INIT;
        Pathd__V1__Error err = PATHD__V1__ERROR__INIT;
        err.message = "unknown scene";
        resp.id = req->id;
        resp.status = PATHD__V1__STATUS__UNKNOWN_SCENE;
        resp.final = 1;
        resp.body_case = PATHD__V1__RESPONSE__BODY_ERROR;
        resp.error = &err;
        return fake_send(fd, &resp) == 0 && strcmp(g->scene, "room") != 0 ? 0 : -1;
    }
    int32_t rows = ROOM_H - g->row_start < FAKE_BAND_ROWS ? ROOM_H - g->row_start : FAKE_BAND_ROWS;
    if (rows < 1)
        return -1;
    uint8_t cells[FAKE_BAND_ROWS * ROOM_W];
    for (int32_t y = 0; y < rows; y++)
        for (int32_t x = 0; x < ROOM_W; x++)
            cells[y * ROOM_W + x] = fake_room_cell(version, x, g->row_start + y);
    Pathd__V1__SceneGrid band = PATHD__V1__SCENE_GRID__INIT;
    band.width = ROOM_W;
    band.height = ROOM_H;
    band.version = version;
    band.row_start = g->row_start;
    band.row_count = rows;
    band.cells.len = (size_t)rows * ROOM_W;
    band.cells.data = cells;
    Pathd__V1__Response resp = PATHD__V1__RESPONSE__INIT;
    resp.id = req->id;
    resp.final = 1;
    resp.body_case = PATHD__V1__RESPONSE__BODY_SCENE_GRID;
    resp.scene_grid = &band;
    return fake_send(fd, &resp);
}

/* Packs n cells as the server does (Waypoints: the first absolute, then
 * deltas) into m, with dx/dy as its arrays. */
static Pathd__V1__Waypoints *fake_points(Pathd__V1__Waypoints *m, int32_t *dx, int32_t *dy, const pdc_xy *cells,
                                         size_t n)
{
    pathd__v1__waypoints__init(m);
    for (size_t i = 0; i < n; i++) {
        dx[i] = cells[i].x - (i > 0 ? cells[i - 1].x : 0);
        dy[i] = cells[i].y - (i > 0 ? cells[i - 1].y : 0);
    }
    m->n_dx = m->n_dy = n;
    m->dx = dx;
    m->dy = dy;
    return m;
}

static int fake_answer_find(int fd, const Pathd__V1__Request *req, uint64_t version)
{
    const Pathd__V1__FindPath *fp = req->find_path;
    if (!fp->start || !fp->start->cell || fp->start->cell->x != room_path[0].x ||
        fp->start->cell->y != room_path[0].y)
        return -1;
    Pathd__V1__Waypoints points;
    int32_t dx[ROOM_PATH_LEN], dy[ROOM_PATH_LEN];
    Pathd__V1__PathChunk chunk = PATHD__V1__PATH_CHUNK__INIT;
    chunk.points = fake_points(&points, dx, dy, room_path, ROOM_PATH_LEN);
    chunk.scene_version = version;
    chunk.total_waypoints = ROOM_PATH_LEN;
    chunk.cost = 14.0;
    Pathd__V1__Response resp = PATHD__V1__RESPONSE__INIT;
    resp.id = req->id;
    resp.final = 1;
    resp.body_case = PATHD__V1__RESPONSE__BODY_PATH;
    resp.path = &chunk;
    return fake_send(fd, &resp);
}

/* Answers FindRoute with one RouteLeg frame per leg and a final
 * RouteResult, checking that the route asked for starts where the script's
 * route does. */
static int fake_answer_route(int fd, const Pathd__V1__Request *req, uint64_t version, fake_script script)
{
    const fake_leg *legs = script == FAKE_ROUTE_ELSEWHERE ? route_elsewhere : route_in_room;
    size_t leg_count = script == FAKE_ROUTE_ELSEWHERE ? sizeof route_elsewhere / sizeof route_elsewhere[0]
                                                      : sizeof route_in_room / sizeof route_in_room[0];
    const Pathd__V1__FindRoute *fr = req->find_route;
    if (!fr->from_scene || strcmp(fr->from_scene, legs[0].scene) || !fr->start || !fr->start->cell ||
        fr->start->cell->x != legs[0].points[0].x || fr->start->cell->y != legs[0].points[0].y)
        return -1;
    for (size_t l = 0; l < leg_count; l++) {
        Pathd__V1__Waypoints points;
        int32_t dx[4], dy[4];
        Pathd__V1__Cell exit_cell = PATHD__V1__CELL__INIT, entry_cell = PATHD__V1__CELL__INIT;
        Pathd__V1__PortalHop hop = PATHD__V1__PORTAL_HOP__INIT;
        Pathd__V1__RouteLeg frame = PATHD__V1__ROUTE_LEG__INIT;
        frame.leg = (uint32_t)l;
        frame.scene = (char *)legs[l].scene;
        frame.points = fake_points(&points, dx, dy, legs[l].points, legs[l].count);
        frame.leg_end = 1;
        frame.cost = (double)legs[l].count;
        frame.total_waypoints = (uint32_t)legs[l].count;
        frame.scene_version = version;
        if (legs[l].portal_to) {
            exit_cell.x = legs[l].points[legs[l].count - 1].x;
            exit_cell.y = legs[l].points[legs[l].count - 1].y;
            entry_cell.x = legs[l].entry.x;
            entry_cell.y = legs[l].entry.y;
            hop.name = "door";
            hop.exit = &exit_cell;
            hop.to_scene = (char *)legs[l].portal_to;
            hop.entry = &entry_cell;
            hop.cost = 1.0;
            frame.portal = &hop;
        }
        Pathd__V1__Response resp = PATHD__V1__RESPONSE__INIT;
        resp.id = req->id;
        resp.body_case = PATHD__V1__RESPONSE__BODY_ROUTE_LEG;
        resp.route_leg = &frame;
        if (fake_send(fd, &resp) != 0)
            return -1;
    }
    Pathd__V1__RouteResult result = PATHD__V1__ROUTE_RESULT__INIT;
    result.legs = (uint32_t)leg_count;
    result.total_cost = 10.0;
    Pathd__V1__Response resp = PATHD__V1__RESPONSE__INIT;
    resp.id = req->id;
    resp.final = 1;
    resp.body_case = PATHD__V1__RESPONSE__BODY_ROUTE_RESULT;
    resp.route_result = &result;
    return fake_send(fd, &resp);
}

/* The child's whole life: one connection, answered until the client
 * closes it; the counts go back through `report`. */
static void fake_serve(int listen_fd, int report, fake_script script)
{
    fake_counts counts = {0, 0, 0, 0};
    uint64_t version = 1;
    struct pollfd pfd = {listen_fd, POLLIN, 0};
    int fd = poll(&pfd, 1, FAKE_WAIT_MS) == 1 ? accept(listen_fd, NULL, NULL) : -1;
    counts.failed = fd < 0;
    for (;;) {
        uint8_t h[4];
        if (fd < 0 || !fake_read_exact(fd, h, 4))
            break;
        uint32_t len = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
        uint8_t buf[4096];
        Pathd__V1__Request *req = NULL;
        if (len <= sizeof buf && fake_read_exact(fd, buf, len))
            req = pathd__v1__request__unpack(NULL, len, buf);
        if (!req) {
            counts.failed = 1;
            break;
        }
        int rc = -1;
        if (req->body_case == PATHD__V1__REQUEST__BODY_SCENE_GRID) {
            counts.grid_requests++;
            rc = fake_answer_grid(fd, req, version);
        } else if (req->body_case == PATHD__V1__REQUEST__BODY_FIND_PATH) {
            counts.find_requests++;
            if (script == FAKE_CHANGED)
                version = 2;
            rc = fake_answer_find(fd, req, version);
        } else if (req->body_case == PATHD__V1__REQUEST__BODY_FIND_ROUTE) {
            counts.route_requests++;
            rc = fake_answer_route(fd, req, version, script);
        }
        pathd__v1__request__free_unpacked(req, NULL);
        if (rc != 0)
            counts.failed = 1;
    }
    if (fd >= 0)
        close(fd);
    ssize_t ignored = write(report, &counts, sizeof counts);
    (void)ignored;
}

typedef struct fake_child {
    pid_t pid;
    int report;
    char addr[64];
} fake_child;

static void fake_start(fake_child *fc, fake_script script)
{
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(lfd >= 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(lfd, 1), 0);
    socklen_t len = sizeof sa;
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&sa, &len), 0);
    snprintf(fc->addr, sizeof fc->addr, "127.0.0.1:%u", (unsigned)ntohs(sa.sin_port));
    int pipefd[2];
    assert_int_equal(pipe(pipefd), 0);
    fflush(NULL);
    fc->pid = fork();
    assert_true(fc->pid >= 0);
    if (fc->pid == 0) {
        close(pipefd[0]);
        fake_serve(lfd, pipefd[1], script);
        _exit(0);
    }
    close(pipefd[1]);
    close(lfd);
    fc->report = pipefd[0];
}

static fake_counts fake_finish(fake_child *fc)
{
    fake_counts counts;
    memset(&counts, 0, sizeof counts);
    assert_int_equal(read(fc->report, &counts, sizeof counts), (ssize_t)sizeof counts);
    close(fc->report);
    int status;
    assert_int_equal(waitpid(fc->pid, &status, 0), fc->pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_false(counts.failed);
    return counts;
}

/* The picture of the fake room at `version` with room_path on it: the
 * expected size, every pixel either path, marker or its cell's colour, path
 * pixels only on passable cells, and the markers on the ends. */
static void check_scene_picture(const char *file, uint64_t version)
{
    decoded img;
    decode_png(file, &img);
    uint32_t pw, ph;
    pdc_render_image_size(ROOM_W, ROOM_H, &pw, &ph);
    assert_int_equal(img.width, pw);
    assert_int_equal(img.height, ph);
    const uint32_t s = pw / ROOM_W;
    assert_int_equal(ph, ROOM_H * s);
    size_t path_pixels = 0;
    for (uint32_t y = 0; y < img.height; y++)
        for (uint32_t x = 0; x < img.width; x++)
            if (pixel(&img, x, y) == PDC_RENDER_RGB_PATH) {
                assert_int_not_equal(fake_room_cell(version, (int32_t)(x / s), (int32_t)(y / s)), 0);
                path_pixels++;
            }
    assert_true(path_pixels > 0);
    assert_int_equal(pixel(&img, s / 2, s / 2), PDC_RENDER_RGB_START);
    assert_int_equal(pixel(&img, 9 * s + s / 2, 5 * s + s / 2), PDC_RENDER_RGB_GOAL);
    /* Cell (2,2) is open ground in version 1 and costs 9 in version 2: it
     * must look like (2,3) (open) or like (7,3) (cost 9) accordingly. */
    uint32_t c22 = pixel(&img, 2 * s + s / 2, 2 * s + s / 2);
    uint32_t open = pixel(&img, 2 * s + s / 2, 3 * s + s / 2), dear = pixel(&img, 7 * s + s / 2, 3 * s + s / 2);
    assert_int_not_equal(open, dear);
    assert_int_equal(c22, version >= 2 ? dear : open);
    free(img.rgb);
}

static void test_render_scene_from_server(void **state)
{
    (void)state;
    char file[512];
    out_path(file, sizeof file, "scene.png");
    const int bands = (ROOM_H + FAKE_BAND_ROWS - 1) / FAKE_BAND_ROWS;
    fake_child fc;

    /* The grid alone: bands until the last row, no path request. */
    fake_start(&fc, FAKE_PLAIN);
    assert_int_equal(run_render("--server", fc.addr, "render", "--scene", "room", "-o", file, NULL), 0);
    fake_counts n = fake_finish(&fc);
    assert_int_equal(n.grid_requests, bands);
    assert_int_equal(n.find_requests, 0);
    decoded img;
    decode_png(file, &img);
    uint32_t pw, ph;
    pdc_render_image_size(ROOM_W, ROOM_H, &pw, &ph);
    assert_int_equal(img.width, pw);
    assert_int_equal(img.height, ph);
    for (uint32_t y = 0; y < img.height; y++)
        for (uint32_t x = 0; x < img.width; x++)
            assert_int_not_equal(pixel(&img, x, y), PDC_RENDER_RGB_PATH);
    free(img.rgb);
    unlink(file);

    /* Grid and path over one connection. */
    fake_start(&fc, FAKE_PLAIN);
    assert_int_equal(run_render("--server", fc.addr, "--json", "render", "--scene", "room", "--from", "0,0", "--to",
                                "9,5", "-o", file, NULL),
                     0);
    n = fake_finish(&fc);
    assert_int_equal(n.grid_requests, bands);
    assert_int_equal(n.find_requests, 1);
    check_scene_picture(file, 1);
    unlink(file);

    /* The scene changed before the search: the grid is read again, and the
     * picture shows the version the path was found on. */
    fake_start(&fc, FAKE_CHANGED);
    assert_int_equal(run_render("--server", fc.addr, "render", "--scene", "room", "--from", "0,0", "--to", "9,5",
                                "-o", file, NULL),
                     0);
    n = fake_finish(&fc);
    assert_int_equal(n.grid_requests, 2 * bands);
    assert_int_equal(n.find_requests, 1);
    check_scene_picture(file, 2);
    unlink(file);

    /* Given waypoints on the server's grid. */
    fake_start(&fc, FAKE_PLAIN);
    assert_int_equal(run_render("--server", fc.addr, "render", "--scene", "room", "--path", "0,0;5,0;6,1;6,4;7,5;9,5",
                                "-o", file, NULL),
                     0);
    n = fake_finish(&fc);
    assert_int_equal(n.grid_requests, bands);
    assert_int_equal(n.find_requests, 0);
    check_scene_picture(file, 1);
    unlink(file);

    /* A scene the server does not have: nothing is drawn. */
    fake_start(&fc, FAKE_PLAIN);
    assert_int_equal(run_render("--server", fc.addr, "render", "--scene", "cellar", "-o", file, NULL),
                     PATHCTL_RENDER_EXIT_FAIL);
    n = fake_finish(&fc);
    assert_int_equal(n.grid_requests, 1);
    assert_int_not_equal(access(file, F_OK), 0);
}

/* The pixel at a position given in cells, at s pixels a cell. */
static uint32_t at_px(double cell, uint32_t s)
{
    return (uint32_t)(cell * s);
}

/* A route with two legs in the room and one in the cellar between them,
 * drawn on the room: both room legs, never joined, portal cells marked,
 * every path pixel on open ground; --json reports the legs drawn. */
static void test_render_route(void **state)
{
    (void)state;
    char file[512], json[512];
    out_path(file, sizeof file, "route.png");
    out_path(json, sizeof json, "route.json");
    fake_child fc;
    fake_start(&fc, FAKE_PLAIN);
    fflush(stdout);
    int saved_stdout = dup(STDOUT_FILENO);
    int capture = open(json, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(saved_stdout >= 0 && capture >= 0);
    assert_true(dup2(capture, STDOUT_FILENO) >= 0);
    int code = run_render("--server", fc.addr, "--json", "render", "--scene", "room", "--route", "--from",
                          "room:0,0", "--to", "room:9,5", "-o", file, NULL);
    fflush(stdout);
    assert_true(dup2(saved_stdout, STDOUT_FILENO) >= 0);
    close(saved_stdout);
    close(capture);
    assert_int_equal(code, 0);
    fake_counts n = fake_finish(&fc);
    assert_int_equal(n.route_requests, 1);
    assert_int_equal(n.find_requests, 0);

    char text[1024] = "";
    FILE *f = fopen(json, "r");
    assert_non_null(f);
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = '\0';
    assert_non_null(strstr(text, "\"legs_drawn\":2"));
    assert_non_null(strstr(text, "\"waypoints\":8"));
    unlink(json);

    decoded img;
    decode_png(file, &img);
    uint32_t pw, ph;
    pdc_render_image_size(ROOM_W, ROOM_H, &pw, &ph);
    assert_int_equal(img.width, pw);
    assert_int_equal(img.height, ph);
    const uint32_t s = pw / ROOM_W;
    for (uint32_t y = 0; y < img.height; y++)
        for (uint32_t x = 0; x < img.width; x++)
            if (pixel(&img, x, y) == PDC_RENDER_RGB_PATH)
                assert_int_not_equal(fake_room_cell(1, (int32_t)(x / s), (int32_t)(y / s)), 0);
    /* Both room legs: halfway along each of their steps. */
    const fake_leg *room_legs[] = {&route_in_room[0], &route_in_room[2]};
    for (size_t l = 0; l < 2; l++)
        for (size_t i = 0; i + 1 < room_legs[l]->count; i++) {
            double cx = (room_legs[l]->points[i].x + room_legs[l]->points[i + 1].x) / 2.0 + 0.5;
            double cy = (room_legs[l]->points[i].y + room_legs[l]->points[i + 1].y) / 2.0 + 0.5;
            assert_int_equal(pixel(&img, at_px(cx, s), at_px(cy, s)), PDC_RENDER_RGB_PATH);
        }
    /* Nothing on the straight line from the first leg's end (3,0) to the
     * second room leg's start (9,2), away from the markers at its ends. */
    pdc_xy a = route_in_room[0].points[3], b = route_in_room[2].points[0];
    for (int k = 2; k <= 8; k++) {
        double t = k / 10.0;
        double cx = a.x + 0.5 + t * (b.x - a.x), cy = a.y + 0.5 + t * (b.y - a.y);
        assert_int_not_equal(pixel(&img, at_px(cx, s), at_px(cy, s)), PDC_RENDER_RGB_PATH);
    }
    /* Portal exit and entry cells in the room, the route's start and goal;
     * the cellar's cells are not marked. */
    assert_int_equal(pixel(&img, at_px(a.x + 0.5, s), at_px(a.y + 0.5, s)), PDC_RENDER_RGB_PORTAL);
    assert_int_equal(pixel(&img, at_px(b.x + 0.5, s), at_px(b.y + 0.5, s)), PDC_RENDER_RGB_PORTAL);
    assert_int_equal(pixel(&img, at_px(0.5, s), at_px(0.5, s)), PDC_RENDER_RGB_START);
    assert_int_equal(pixel(&img, at_px(9.5, s), at_px(5.5, s)), PDC_RENDER_RGB_GOAL);
    size_t portal_pixels = 0;
    for (uint32_t y = 0; y < img.height; y++)
        for (uint32_t x = 0; x < img.width; x++)
            if (pixel(&img, x, y) == PDC_RENDER_RGB_PORTAL) {
                int32_t cx = (int32_t)(x / s), cy = (int32_t)(y / s);
                assert_true((abs(cx - a.x) <= 1 && abs(cy - a.y) <= 1) || (abs(cx - b.x) <= 1 && abs(cy - b.y) <= 1));
                portal_pixels++;
            }
    assert_true(portal_pixels > 0);
    free(img.rgb);
    unlink(file);

    /* No leg in the room: exit 1 and no file. */
    fake_start(&fc, FAKE_ROUTE_ELSEWHERE);
    assert_int_equal(run_render("--server", fc.addr, "render", "--scene", "room", "--route", "--from", "cellar:2,2",
                                "--to", "house:1,2", "-o", file, NULL),
                     PATHCTL_RENDER_EXIT_FAIL);
    n = fake_finish(&fc);
    assert_int_equal(n.route_requests, 1);
    assert_int_not_equal(access(file, F_OK), 0);

    /* Usage errors: no scene to draw, a point without its scene, --connect
     * or a local map with a route. */
    assert_int_equal(run_render("render", "--route", "--from", "room:0,0", "--to", "room:9,5", "-o", file, NULL),
                     PATHCTL_RENDER_EXIT_USAGE);
    assert_int_equal(run_render("render", "--scene", "room", "--route", "--from", "0,0", "--to", "room:9,5", "-o",
                                file, NULL),
                     PATHCTL_RENDER_EXIT_USAGE);
    assert_int_equal(run_render("render", "--scene", "room", "--route", "--from", "room:0,0", "--to", "room:9,5",
                                "--connect", "4", "-o", file, NULL),
                     PATHCTL_RENDER_EXIT_USAGE);
    assert_int_equal(run_render("render", "--scene", "room", "--route", "--map", file, "--from", "room:0,0", "--to",
                                "room:9,5", "-o", file, NULL),
                     PATHCTL_RENDER_EXIT_USAGE);
    assert_int_equal(run_render("render", "--scene", "room", "--route", "--from", "room:0,0", "-o", file, NULL),
                     PATHCTL_RENDER_EXIT_USAGE);
}

/* pdc_render_png_multi checks every line and marker it is given. */
static void test_multi_checks(void **state)
{
    (void)state;
    uint8_t cells[ROOM_W * ROOM_H];
    pdc_render_grid g;
    room_grid(&g, cells);
    char file[512], err[256] = "";
    out_path(file, sizeof file, "multi-bad.png");
    const pdc_xy inside[] = {{0, 0}, {1, 0}}, outside[] = {{2, 0}, {0, ROOM_H}};
    pdc_render_line lines[] = {{inside, 2}, {outside, 2}};
    pdc_render_drawing d = {lines, 2, NULL, 0, 1};
    assert_int_equal(pdc_render_png_multi(file, &g, &d, err, sizeof err), PDC_RENDER_ERR_ARG);
    assert_non_null(strstr(err, "waypoint 1 of line 1"));
    pdc_render_marker off = {{ROOM_W, 0}, PDC_RENDER_RGB_PORTAL};
    pdc_render_drawing m = {lines, 1, &off, 1, 1};
    assert_int_equal(pdc_render_png_multi(file, &g, &m, err, sizeof err), PDC_RENDER_ERR_ARG);
    assert_non_null(strstr(err, "marker (10,0)"));
    pdc_render_drawing no_markers = {lines, 1, NULL, 1, 1};
    assert_int_equal(pdc_render_png_multi(file, &g, &no_markers, err, sizeof err), PDC_RENDER_ERR_ARG);
    assert_int_not_equal(access(file, F_OK), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_grid_picture),
        cmocka_unit_test(test_grid_without_path),
        cmocka_unit_test(test_unit_footprint_centre),
        cmocka_unit_test(test_large_grid_downscaled),
        cmocka_unit_test(test_downscale_averages),
        cmocka_unit_test(test_bad_output_path),
        cmocka_unit_test(test_bad_grid_and_path),
        cmocka_unit_test(test_parse_ascii),
        cmocka_unit_test(test_parse_movingai),
        cmocka_unit_test(test_render_command),
        cmocka_unit_test(test_render_scene_from_server),
        cmocka_unit_test(test_render_route),
        cmocka_unit_test(test_multi_checks),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
