/*
 * test_scene.c - scene snapshots and the registry: loading both map formats,
 * parse errors that point at line and column, world <-> cell conversion at
 * the edges (negative origins, fractional cell sizes, NaN, infinities, huge
 * values), reference counting, atomic reloads that keep old snapshots alive,
 * the bundled demo world, and concurrent readers during reloads (run under
 * TSan as well). Also the per-unit data a load builds (clearance only when
 * needed, unit grids, component labels, passable count), per-character
 * costs for Moving AI maps, and Tiled maps loaded through the config.
 * Cell updates have their own file, test_scene_update.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_conf.h"
#include "pd_scene.h"

/* A config entry for a map under tests/data. */
static pd_conf_scene make_entry(const char *name, const char *file, pd_map_format format)
{
    pd_conf_scene cs;
    memset(&cs, 0, sizeof cs);
    snprintf(cs.name, sizeof cs.name, "%s", name);
    static char paths[8][512];
    static int next;
    char *path = paths[next++ % 8];
    snprintf(path, sizeof paths[0], "%s/%s", PD_TEST_DATA_DIR, file);
    cs.map_path = path;
    cs.format = format;
    pd_tiled_rules_default(&cs.tiled);
    cs.cell_size = 1.0;
    cs.unit_sizes[0] = 1;
    cs.n_unit_sizes = 1;
    return cs;
}

/* Parses a config whose map paths are relative to tests/data. */
static void load_conf(const char *json, pd_conf *c)
{
    char err[256] = "";
    int rc = pd_conf_load_buffer(json, strlen(json), "test", PD_TEST_DATA_DIR, c, err, sizeof err);
    if (rc != 0)
        print_error("%s\n", err);
    assert_int_equal(rc, 0);
}

static void test_load_ascii(void **state)
{
    (void)state;
    pd_conf_scene cs = make_entry("small", "scene_small.txt", PD_MAP_ASCII);
    cs.origin_x = -3.0;
    cs.origin_y = 5.0;
    cs.cell_size = 0.5;
    cs.unit_sizes[0] = 1;
    cs.unit_sizes[1] = 3;
    cs.n_unit_sizes = 2;
    char err[256] = "";
    pd_scene *s = pd_scene_load(&cs, err, sizeof err);
    if (!s)
        print_error("%s\n", err);
    assert_non_null(s);
    assert_string_equal(s->name, "small");
    assert_int_equal(s->version, 1);
    assert_int_equal(atomic_load(&s->refs), 1);
    assert_int_equal(s->grid->width, 6);
    assert_int_equal(s->grid->height, 4);
    assert_true(s->origin_x == -3.0 && s->origin_y == 5.0 && s->cell_size == 0.5);
    /* Row 1 is ".##.3.": open, wall, wall, open, cost 3, open. */
    assert_int_equal(pd_grid_get(s->grid, 0, 1), PD_CELL_FREE);
    assert_int_equal(pd_grid_get(s->grid, 1, 1), PD_CELL_BLOCKED);
    assert_int_equal(pd_grid_get(s->grid, 2, 1), PD_CELL_BLOCKED);
    assert_int_equal(pd_grid_get(s->grid, 4, 1), 3);
    assert_int_equal(pd_grid_get(s->grid, 4, 2), 9);
    assert_int_equal(pd_grid_get(s->grid, 4, 3), PD_CELL_BLOCKED);
    assert_int_equal(s->grid->uniform_cost, 0);

    assert_true(pd_scene_allows_unit(s, 1));
    assert_false(pd_scene_allows_unit(s, 2));
    assert_true(pd_scene_allows_unit(s, 3));
    assert_false(pd_scene_allows_unit(s, 0));

    /* Per-unit data: unit 1 searches the scene grid itself; unit 3 gets its
     * own grid, which needs the clearance map. 24 cells, 4 of them walls. */
    assert_true(s->passable_cells == 20);
    assert_non_null(s->clearance);
    const pd_scene_unit *u1 = pd_scene_unit_for(s, 1), *u3 = pd_scene_unit_for(s, 3);
    assert_ptr_equal(u1, &s->units[0]);
    assert_ptr_equal(u1->grid, s->grid);
    assert_non_null(u1->components);
    assert_ptr_equal(u3, &s->units[1]);
    assert_int_equal(u3->unit, 3);
    assert_ptr_not_equal(u3->grid, s->grid);
    assert_non_null(u3->components);
    assert_null(pd_scene_unit_for(s, 2));
    /* A 3x3 unit fits only at (3,0), whose footprint holds the cost-9 cell;
     * every other 3x3 window holds a wall or leaves the map. */
    for (int32_t y = 0; y < 4; y++) {
        for (int32_t x = 0; x < 6; x++)
            assert_int_equal(pd_grid_get(u3->grid, x, y), (x == 3 && y == 0) ? 9 : PD_CELL_BLOCKED);
    }
    /* The wall "##" / "#" with the gap keeps the open cells one component. */
    assert_true(pd_components_connected(u1->components, (pd_point){ 0, 0 }, (pd_point){ 5, 3 }));
    assert_int_equal(u1->components->count, 1);

    pd_scene_retain(s);
    assert_int_equal(atomic_load(&s->refs), 2);
    pd_scene_release(s);
    assert_int_equal(atomic_load(&s->refs), 1);
    pd_scene_release(s);
    pd_scene_release(NULL);
}

static void test_load_movingai(void **state)
{
    (void)state;
    pd_conf_scene cs = make_entry("mai", "scene_small.map", PD_MAP_MOVINGAI);
    char err[256] = "";
    pd_scene *s = pd_scene_load(&cs, err, sizeof err);
    if (!s)
        print_error("%s\n", err);
    assert_non_null(s);
    assert_int_equal(s->grid->width, 5);
    assert_int_equal(s->grid->height, 3);
    /* "..@..", ".T.G.", "S..WO" */
    assert_int_equal(pd_grid_get(s->grid, 2, 0), PD_CELL_BLOCKED);
    assert_int_equal(pd_grid_get(s->grid, 1, 1), PD_CELL_BLOCKED);
    assert_int_equal(pd_grid_get(s->grid, 3, 1), PD_CELL_FREE);
    assert_int_equal(pd_grid_get(s->grid, 0, 2), PD_CELL_FREE);
    assert_int_equal(pd_grid_get(s->grid, 3, 2), PD_CELL_BLOCKED);
    assert_int_equal(pd_grid_get(s->grid, 4, 2), PD_CELL_BLOCKED);
    assert_int_equal(s->grid->uniform_cost, 1);
    /* Unit 1 only: no clearance map, and the unit grid is the scene grid. */
    assert_null(s->clearance);
    assert_ptr_equal(pd_scene_unit_for(s, 1)->grid, s->grid);
    assert_true(s->passable_cells == 11);
    pd_scene_release(s);
}

static void test_load_movingai_costs(void **state)
{
    (void)state;
    /* ".S@xT." / "SS..W@" / "..xx.." - 'x' is not a Moving AI character. */
    pd_conf c;
    load_conf("{\"scenes\": [{\"name\": \"c\", \"map\": \"scene4_costs.map\", \"format\": \"movingai\","
              " \"costs\": {\"S\": 4, \"@\": 2, \"x\": \"blocked\", \"T\": 5}, \"unit_sizes\": [1, 2]}]}",
              &c);
    char err[512] = "";
    pd_scene *s = pd_scene_load(&c.scenes[0], err, sizeof err);
    if (!s)
        print_error("%s\n", err);
    assert_non_null(s);
    static const uint8_t want[3][6] = {
        { 1, 4, 2, 0, 5, 1 },
        { 4, 4, 1, 1, 0, 2 },
        { 1, 1, 0, 0, 1, 1 },
    };
    for (int32_t y = 0; y < 3; y++) {
        for (int32_t x = 0; x < 6; x++)
            assert_int_equal(pd_grid_get(s->grid, x, y), want[y][x]);
    }
    assert_int_equal(s->grid->uniform_cost, 0);
    assert_true(s->passable_cells == 14);
    /* The unit-2 grid takes the dearest cell under its footprint. */
    assert_int_equal(pd_grid_get(pd_scene_unit_for(s, 2)->grid, 0, 0), 4);
    assert_int_equal(pd_grid_get(pd_scene_unit_for(s, 2)->grid, 1, 0), 4);
    assert_int_equal(pd_grid_get(pd_scene_unit_for(s, 2)->grid, 2, 0), PD_CELL_BLOCKED);
    pd_scene_release(s);
    pd_conf_free(&c);

    /* Without the table 'x' is refused where it first appears. */
    pd_conf_scene cs = make_entry("plain", "scene4_costs.map", PD_MAP_MOVINGAI);
    assert_null(pd_scene_load(&cs, err, sizeof err));
    char expected[512];
    snprintf(expected, sizeof expected, "scene 'plain': %s:5:4: ", cs.map_path);
    assert_memory_equal(err, expected, strlen(expected));
}

static void test_load_tiled(void **state)
{
    (void)state;
    pd_conf c;
    char err[512] = "";
    load_conf("{\"scenes\": ["
              " {\"name\": \"yard\", \"map\": \"../../config/scenes/courtyard.tmj\", \"format\": \"tiled\","
              "  \"layer\": \"walls\", \"unit_sizes\": [1, 2]},"
              " {\"name\": \"decor\", \"map\": \"../../config/scenes/courtyard.tmj\", \"format\": \"tiled\"}]}",
              &c);
    pd_scene *s = pd_scene_load(&c.scenes[0], err, sizeof err);
    if (!s)
        print_error("%s\n", err);
    assert_non_null(s);
    assert_int_equal(s->grid->width, 24);
    assert_int_equal(s->grid->height, 16);
    /* Wall corner, open floor, mud (cost 3), fountain water, flagstones. */
    assert_int_equal(pd_grid_get(s->grid, 0, 0), PD_CELL_BLOCKED);
    assert_int_equal(pd_grid_get(s->grid, 1, 1), PD_CELL_FREE);
    assert_int_equal(pd_grid_get(s->grid, 3, 11), 3);
    assert_int_equal(pd_grid_get(s->grid, 10, 7), PD_CELL_BLOCKED);
    assert_int_equal(pd_grid_get(s->grid, 8, 5), PD_CELL_FREE);
    assert_non_null(pd_scene_unit_for(s, 2));
    assert_non_null(s->clearance);
    uint64_t walls_passable = s->passable_cells;
    pd_scene_release(s);
    /* No layer: every tile layer; the decorations block nothing, so the
     * walls decide alone. */
    s = pd_scene_load(&c.scenes[1], err, sizeof err);
    assert_non_null(s);
    assert_true(walls_passable < 24 * 16);
    assert_true(s->passable_cells == walls_passable);
    pd_scene_release(s);
    pd_conf_free(&c);

    /* Errors carry the scene, the file and the JSON path (or line:col). */
    char expected[512];
    pd_conf_scene cs = make_entry("b64", "scene4_base64.tmj", PD_MAP_TILED);
    assert_null(pd_scene_load(&cs, err, sizeof err));
    snprintf(expected, sizeof expected,
             "scene 'b64': %s: $.layers[0] (layer \"walls\").data: zlib: decompresses to 4 bytes, "
             "the layer needs 16", cs.map_path);
    assert_string_equal(err, expected);
    cs = make_entry("syn", "scene4_syntax.tmj", PD_MAP_TILED);
    assert_null(pd_scene_load(&cs, err, sizeof err));
    snprintf(expected, sizeof expected, "scene 'syn': %s:3:12: invalid JSON", cs.map_path);
    assert_string_equal(err, expected);
    cs = make_entry("nolayer", "../../config/scenes/courtyard.tmj", PD_MAP_TILED);
    snprintf(cs.tiled.layer, sizeof cs.tiled.layer, "roof");
    assert_null(pd_scene_load(&cs, err, sizeof err));
    snprintf(expected, sizeof expected, "scene 'nolayer': %s: $.layers: no tile layer named \"roof\"",
             cs.map_path);
    assert_string_equal(err, expected);
    /* A hand-built entry with an unterminated layer name is refused. */
    memset(cs.tiled.layer, 'L', sizeof cs.tiled.layer);
    assert_null(pd_scene_load(&cs, err, sizeof err));
    assert_string_equal(err, "scene 'nolayer': a tiled layer or property name is unterminated");
    pd_tiled_rules_default(&cs.tiled);
    cs.tiled.cost_property[0] = '\0';
    assert_null(pd_scene_load(&cs, err, sizeof err));
    assert_string_equal(err, "scene 'nolayer': tiled blocked and cost property names must not be empty");
}

static void test_load_errors(void **state)
{
    (void)state;
    char err[512];
    char expected[512];

    /* A parse error carries scene name, file, line and column. */
    pd_conf_scene cs = make_entry("bad", "scene_bad.txt", PD_MAP_ASCII);
    assert_null(pd_scene_load(&cs, err, sizeof err));
    snprintf(expected, sizeof expected, "scene 'bad': %s:3:3: ", cs.map_path);
    if (strncmp(err, expected, strlen(expected)) != 0)
        print_error("got: %s\nwant prefix: %s\n", err, expected);
    assert_memory_equal(err, expected, strlen(expected));

    /* An ASCII file read as Moving AI fails in the header, on line 1. */
    cs = make_entry("wrongfmt", "scene_small.txt", PD_MAP_MOVINGAI);
    assert_null(pd_scene_load(&cs, err, sizeof err));
    snprintf(expected, sizeof expected, "scene 'wrongfmt': %s:1:", cs.map_path);
    assert_memory_equal(err, expected, strlen(expected));

    cs = make_entry("missing", "no_such_map.txt", PD_MAP_ASCII);
    assert_null(pd_scene_load(&cs, err, sizeof err));
    snprintf(expected, sizeof expected, "scene 'missing': %s: cannot open: No such file or directory",
             cs.map_path);
    assert_string_equal(err, expected);

    /* A directory opens but is not a map. */
    cs = make_entry("dir", "", PD_MAP_ASCII);
    assert_null(pd_scene_load(&cs, err, sizeof err));
    snprintf(expected, sizeof expected, "scene 'dir': %s: not a regular file", cs.map_path);
    assert_string_equal(err, expected);

    /* A file above the size cap is refused before anything is allocated for
     * it (sparse, so the test costs no disk space). */
    static char big[] = PD_BINARY_DIR "/test_scene_big.txt";
    FILE *f = fopen(big, "w");
    assert_non_null(f);
    assert_int_equal(fseek(f, 300L * 1024 * 1024, SEEK_SET), 0);
    fputc('.', f);
    fclose(f);
    cs = make_entry("big", "", PD_MAP_ASCII);
    cs.map_path = big;
    pd_scene *s = pd_scene_load(&cs, err, sizeof err);
    remove(big);
    assert_null(s);
    snprintf(expected, sizeof expected, "scene 'big': %s: larger than ", big);
    assert_memory_equal(err, expected, strlen(expected));

    /* Hand-built entries get the checks the config layer would have made. */
    cs = make_entry("zero", "scene_small.txt", PD_MAP_ASCII);
    cs.cell_size = 0.0;
    assert_null(pd_scene_load(&cs, err, sizeof err));
    assert_string_equal(err, "scene 'zero': origin must be finite and cell_size finite and > 0");
    cs.cell_size = 1.0;
    cs.origin_x = NAN;
    assert_null(pd_scene_load(&cs, err, sizeof err));
    assert_string_equal(err, "scene 'zero': origin must be finite and cell_size finite and > 0");
    cs.origin_x = 0.0;
    cs.n_unit_sizes = 0;
    assert_null(pd_scene_load(&cs, err, sizeof err));
    assert_string_equal(err, "scene 'zero': needs 1..8 unit sizes");
    cs.n_unit_sizes = 1;
    cs.unit_sizes[0] = 17;
    assert_null(pd_scene_load(&cs, err, sizeof err));
    assert_string_equal(err, "scene 'zero': unit size 17 is outside 1..16");
    cs.unit_sizes[0] = 1;
    cs.map_path = NULL;
    assert_null(pd_scene_load(&cs, err, sizeof err));
    assert_string_equal(err, "scene 'zero': no map file");
    cs.name[0] = '\0';
    assert_null(pd_scene_load(&cs, err, sizeof err));
    assert_string_equal(err, "scene: name is empty or unterminated");
    /* No error buffer at all is allowed too. */
    assert_null(pd_scene_load(&cs, NULL, 0));
}

/* A scene without a file, for the coordinate tests: a w x h grid. */
static pd_scene *fake_scene(int32_t w, int32_t h, double ox, double oy, double cell)
{
    pd_scene *s = calloc(1, sizeof *s);
    assert_non_null(s);
    atomic_init(&s->refs, 1);
    s->grid = pd_grid_create(w, h);
    assert_non_null(s->grid);
    s->origin_x = ox;
    s->origin_y = oy;
    s->cell_size = cell;
    s->version = 1;
    return s;
}

static void expect_cell(const pd_scene *s, double wx, double wy, int32_t cx, int32_t cy)
{
    pd_point p = { -7, -7 };
    pd_status st = pd_scene_world_to_cell(s, wx, wy, &p);
    if (st != PD_OK || p.x != cx || p.y != cy)
        print_error("(%.17g, %.17g) -> %s (%d, %d), want (%d, %d)\n", wx, wy, pd_status_name(st),
                    p.x, p.y, cx, cy);
    assert_int_equal(st, PD_OK);
    assert_int_equal(p.x, cx);
    assert_int_equal(p.y, cy);
}

static void expect_out(const pd_scene *s, double wx, double wy)
{
    pd_point p = { -7, -7 };
    assert_int_equal(pd_scene_world_to_cell(s, wx, wy, &p), PD_OUT_OF_BOUNDS);
    /* The output is untouched on failure. */
    assert_int_equal(p.x, -7);
    assert_int_equal(p.y, -7);
}

static void test_world_to_cell(void **state)
{
    (void)state;
    /* 40 x 30 cells of 0.25 units, cell (0,0)'s corner at (-20, -15). */
    pd_scene *s = fake_scene(40, 30, -20.0, -15.0, 0.25);
    expect_cell(s, -20.0, -15.0, 0, 0);
    expect_cell(s, -19.76, -14.99, 0, 0);
    expect_cell(s, -19.75, -14.75, 1, 1);
    expect_cell(s, -19.0, -13.1, 4, 7);
    /* Last cell: the far edge itself belongs to no cell. */
    expect_cell(s, -10.0 - 1e-9, -7.5 - 1e-9, 39, 29);
    expect_out(s, -10.0, -14.0);
    expect_out(s, -19.0, -7.5);
    /* Just before the origin floors to -1, not 0. */
    expect_out(s, -20.0 - 1e-9, -14.0);
    expect_out(s, -19.0, -15.0 - 1e-9);
    /* Non-finite and huge inputs never reach the integer conversion. */
    expect_out(s, NAN, -14.0);
    expect_out(s, -19.0, NAN);
    expect_out(s, INFINITY, -14.0);
    expect_out(s, -INFINITY, -14.0);
    expect_out(s, -19.0, INFINITY);
    expect_out(s, 1e300, -14.0);
    expect_out(s, -1e300, -14.0);
    expect_out(s, DBL_MAX, DBL_MAX);
    expect_out(s, -DBL_MAX, -DBL_MAX);
    expect_out(s, 4294967296.0 * 4294967296.0, -14.0);
    pd_scene_release(s);

    /* A cell size that is not a power of two, and a positive origin. */
    s = fake_scene(10, 10, 3.0, 7.0, 0.1);
    expect_cell(s, 3.0, 7.0, 0, 0);
    expect_cell(s, 3.95, 7.05, 9, 0);
    expect_cell(s, 3.55, 7.999, 5, 9);
    expect_out(s, 2.99, 7.5);
    expect_out(s, 4.01, 7.5);
    pd_scene_release(s);

    /* A huge origin shift: (p - origin) overflows to infinity. */
    s = fake_scene(4, 4, -DBL_MAX, 0.0, 1.0);
    expect_out(s, DBL_MAX, 1.0);
    expect_cell(s, -DBL_MAX, 1.0, 0, 1);
    pd_scene_release(s);
}

static void test_cell_center(void **state)
{
    (void)state;
    pd_scene *s = fake_scene(8, 5, -2.5, 10.0, 0.75);
    double wx, wy;
    pd_scene_cell_center(s, (pd_point){ 0, 0 }, &wx, &wy);
    assert_true(fabs(wx - (-2.125)) < 1e-12);
    assert_true(fabs(wy - 10.375) < 1e-12);
    pd_scene_cell_center(s, (pd_point){ 7, 4 }, &wx, &wy);
    assert_true(fabs(wx - (-2.5 + 7.5 * 0.75)) < 1e-12);
    assert_true(fabs(wy - (10.0 + 4.5 * 0.75)) < 1e-12);
    /* Every cell's centre maps back to that cell. */
    for (int32_t y = 0; y < s->grid->height; y++) {
        for (int32_t x = 0; x < s->grid->width; x++) {
            pd_scene_cell_center(s, (pd_point){ x, y }, &wx, &wy);
            expect_cell(s, wx, wy, x, y);
        }
    }
    pd_scene_release(s);
}

static const char *conf_three =
    "{\"scenes\": ["
    " {\"name\": \"zeta\", \"map\": \"scene_small.txt\", \"format\": \"ascii\"},"
    " {\"name\": \"alpha\", \"map\": \"scene_small.map\", \"format\": \"movingai\", \"unit_sizes\": [1, 2]},"
    " {\"name\": \"mid\", \"map\": \"scene_alt.txt\", \"format\": \"ascii\", \"origin\": [-1, -1]}"
    "]}";

/* alpha now points at a different map, zeta is gone, omega is new. */
static const char *conf_changed =
    "{\"scenes\": ["
    " {\"name\": \"alpha\", \"map\": \"scene_alt.txt\", \"format\": \"ascii\"},"
    " {\"name\": \"mid\", \"map\": \"scene_alt.txt\", \"format\": \"ascii\"},"
    " {\"name\": \"omega\", \"map\": \"scene_small.txt\", \"format\": \"ascii\"}"
    "]}";

static void test_registry_load_and_list(void **state)
{
    (void)state;
    pd_registry *r = pd_registry_create();
    assert_non_null(r);

    /* An empty registry lists nothing and knows no names. */
    pd_scene **list = (pd_scene **)&list;
    assert_int_equal(pd_registry_list(r, &list), 0);
    assert_null(list);
    assert_null(pd_registry_acquire(r, "alpha"));

    pd_conf c;
    load_conf(conf_three, &c);
    char err[256] = "";
    assert_int_equal(pd_registry_load(r, &c, err, sizeof err), 0);
    pd_conf_free(&c);

    size_t n = pd_registry_list(r, &list);
    assert_int_equal(n, 3);
    assert_string_equal(list[0]->name, "alpha");
    assert_string_equal(list[1]->name, "mid");
    assert_string_equal(list[2]->name, "zeta");
    /* The registry holds one reference, the list another. */
    for (size_t i = 0; i < n; i++)
        assert_int_equal(atomic_load(&list[i]->refs), 2);
    pd_registry_release_list(list, n);

    pd_scene *s = pd_registry_acquire(r, "alpha");
    assert_non_null(s);
    assert_string_equal(s->name, "alpha");
    assert_int_equal(s->grid->width, 5);
    assert_int_equal(s->n_unit_sizes, 2);
    assert_int_equal(s->version, 1);
    pd_scene_release(s);
    s = pd_registry_acquire(r, "mid");
    assert_non_null(s);
    assert_true(s->origin_x == -1.0);
    pd_scene_release(s);
    s = pd_registry_acquire(r, "zeta");
    assert_non_null(s);
    assert_int_equal(s->grid->width, 6);
    assert_int_equal(s->grid->height, 4);
    pd_scene_release(s);

    assert_null(pd_registry_acquire(r, "beta"));
    assert_null(pd_registry_acquire(r, "alph"));
    assert_null(pd_registry_acquire(r, "alphaa"));
    assert_null(pd_registry_acquire(r, ""));
    assert_null(pd_registry_acquire(r, NULL));
    pd_registry_destroy(r);
    pd_registry_destroy(NULL);
}

static void test_registry_reload_keeps_held_snapshot(void **state)
{
    (void)state;
    pd_registry *r = pd_registry_create();
    assert_non_null(r);
    pd_conf c;
    char err[256] = "";
    load_conf(conf_three, &c);
    assert_int_equal(pd_registry_load(r, &c, err, sizeof err), 0);
    pd_conf_free(&c);

    pd_scene *old_alpha = pd_registry_acquire(r, "alpha");
    pd_scene *old_zeta = pd_registry_acquire(r, "zeta");
    assert_non_null(old_alpha);
    assert_non_null(old_zeta);

    load_conf(conf_changed, &c);
    assert_int_equal(pd_registry_load(r, &c, err, sizeof err), 0);
    pd_conf_free(&c);

    /* The new set is served... */
    pd_scene *new_alpha = pd_registry_acquire(r, "alpha");
    assert_non_null(new_alpha);
    assert_ptr_not_equal(new_alpha, old_alpha);
    assert_int_equal(new_alpha->grid->width, 3);
    assert_int_equal(new_alpha->version, 2);
    assert_null(pd_registry_acquire(r, "zeta"));
    pd_scene *omega = pd_registry_acquire(r, "omega");
    assert_non_null(omega);
    assert_int_equal(omega->version, 1);
    pd_scene_release(omega);

    /* ...while the old snapshots stay whole for whoever still holds them. */
    assert_int_equal(atomic_load(&old_alpha->refs), 1);
    assert_string_equal(old_alpha->name, "alpha");
    assert_int_equal(old_alpha->version, 1);
    assert_int_equal(old_alpha->grid->width, 5);
    assert_int_equal(pd_grid_get(old_alpha->grid, 2, 0), PD_CELL_BLOCKED);
    assert_int_equal(old_zeta->grid->width, 6);
    assert_int_equal(pd_grid_get(old_zeta->grid, 4, 2), 9);
    pd_scene_release(old_alpha);
    pd_scene_release(old_zeta);

    /* Versions keep counting per name across reloads. */
    load_conf(conf_changed, &c);
    assert_int_equal(pd_registry_load(r, &c, err, sizeof err), 0);
    pd_conf_free(&c);
    pd_scene *again = pd_registry_acquire(r, "alpha");
    assert_int_equal(again->version, 3);
    pd_scene_release(again);

    /* The registry outlives nothing: destroying it while a reader holds a scene is fine. */
    pd_scene *held = pd_registry_acquire(r, "mid");
    pd_registry_destroy(r);
    assert_int_equal(held->grid->width, 3);
    pd_scene_release(held);
    pd_scene_release(new_alpha);
}

/* The two halves of a reload: a prepared set is invisible until published
 * (the registry keeps serving and may even be reloaded meanwhile), publish
 * carries versions on from the set served at that moment, and a set that is
 * never published is discarded without a trace. */
static void test_registry_prepare_then_publish(void **state)
{
    (void)state;
    pd_registry *r = pd_registry_create();
    assert_non_null(r);
    pd_conf c;
    char err[512] = "";
    load_conf(conf_three, &c);
    assert_int_equal(pd_registry_load(r, &c, err, sizeof err), 0);
    pd_conf_free(&c);

    load_conf(conf_changed, &c);
    pd_scene_set *set = pd_registry_prepare(&c, err, sizeof err);
    pd_conf_free(&c); /* the set needs nothing from the config */
    assert_non_null(set);
    /* Not published yet: the old set still serves. */
    pd_scene *zeta = pd_registry_acquire(r, "zeta");
    assert_non_null(zeta);
    pd_scene_release(zeta);
    assert_null(pd_registry_acquire(r, "omega"));

    /* A reload that lands between prepare and publish moves alpha to 2... */
    load_conf(conf_three, &c);
    assert_int_equal(pd_registry_load(r, &c, err, sizeof err), 0);
    pd_conf_free(&c);
    /* ...so the prepared alpha, published after it, becomes 3. */
    pd_registry_publish(r, set);
    pd_scene *alpha = pd_registry_acquire(r, "alpha");
    assert_non_null(alpha);
    assert_int_equal(alpha->grid->width, 3);
    assert_int_equal(alpha->version, 3);
    pd_scene_release(alpha);
    pd_scene *omega = pd_registry_acquire(r, "omega");
    assert_non_null(omega);
    assert_int_equal(omega->version, 1);
    pd_scene_release(omega);
    assert_null(pd_registry_acquire(r, "zeta"));

    /* A discarded set changes nothing; an empty config prepares an empty set. */
    load_conf(conf_three, &c);
    set = pd_registry_prepare(&c, err, sizeof err);
    pd_conf_free(&c);
    assert_non_null(set);
    pd_registry_discard(set);
    pd_registry_discard(NULL);
    assert_null(pd_registry_acquire(r, "zeta"));
    pd_conf empty;
    memset(&empty, 0, sizeof empty);
    set = pd_registry_prepare(&empty, err, sizeof err);
    assert_non_null(set);
    pd_registry_publish(r, set);
    pd_scene **list = NULL;
    assert_int_equal(pd_registry_list(r, &list), 0);

    /* A bad map: NULL with the reason, nothing half-built left behind. */
    load_conf("{\"scenes\": [{\"name\": \"gone\", \"map\": \"no_such.txt\", \"format\": \"ascii\"}]}", &c);
    assert_null(pd_registry_prepare(&c, err, sizeof err));
    pd_conf_free(&c);
    assert_non_null(strstr(err, "scene 'gone': "));
    pd_registry_destroy(r);
}

static void test_registry_failed_reload_keeps_old_set(void **state)
{
    (void)state;
    pd_registry *r = pd_registry_create();
    assert_non_null(r);
    pd_conf c;
    char err[512] = "";
    load_conf(conf_three, &c);
    assert_int_equal(pd_registry_load(r, &c, err, sizeof err), 0);
    pd_conf_free(&c);

    /* The broken scene is the last one: the ones before it loaded and must be dropped. */
    load_conf("{\"scenes\": ["
              " {\"name\": \"alpha\", \"map\": \"scene_alt.txt\", \"format\": \"ascii\"},"
              " {\"name\": \"omega\", \"map\": \"scene_small.txt\", \"format\": \"ascii\"},"
              " {\"name\": \"bad\", \"map\": \"scene_bad.txt\", \"format\": \"ascii\"}"
              "]}",
              &c);
    assert_int_equal(pd_registry_load(r, &c, err, sizeof err), -1);
    pd_conf_free(&c);
    char expected[512];
    snprintf(expected, sizeof expected, "scene 'bad': %s/scene_bad.txt:3:3: ", PD_TEST_DATA_DIR);
    assert_memory_equal(err, expected, strlen(expected));

    load_conf("{\"scenes\": [{\"name\": \"gone\", \"map\": \"no_such.txt\", \"format\": \"ascii\"}]}", &c);
    assert_int_equal(pd_registry_load(r, &c, err, sizeof err), -1);
    pd_conf_free(&c);
    assert_non_null(strstr(err, "scene 'gone': "));

    /* Tiled maps that cannot be decided: a layer that decompresses to the
     * wrong length, a tileset that points to another. */
    load_conf("{\"scenes\": [{\"name\": \"short\", \"map\": \"scene4_base64.tmj\", \"format\": \"tiled\"}]}", &c);
    assert_int_equal(pd_registry_load(r, &c, err, sizeof err), -1);
    pd_conf_free(&c);
    assert_non_null(strstr(err, "(layer \"walls\").data: zlib: decompresses to 4 bytes, the layer needs 16"));
    load_conf("{\"scenes\": [{\"name\": \"chain\", \"map\": \"tiled/chained.tmx\", \"format\": \"tiled\"}]}", &c);
    assert_int_equal(pd_registry_load(r, &c, err, sizeof err), -1);
    pd_conf_free(&c);
    assert_non_null(strstr(err, "$.tilesets[0].source: sub/chained.tsj: $.source: an external tileset cannot point to another"));

    /* The old set still serves, unchanged. */
    pd_scene **list;
    size_t n = pd_registry_list(r, &list);
    assert_int_equal(n, 3);
    assert_string_equal(list[0]->name, "alpha");
    assert_int_equal(list[0]->version, 1);
    assert_int_equal(list[0]->grid->width, 5);
    pd_registry_release_list(list, n);
    assert_null(pd_registry_acquire(r, "omega"));

    /* A hand-built config with duplicate names is refused too. */
    pd_conf_scene dup[2] = {
        make_entry("twin", "scene_alt.txt", PD_MAP_ASCII),
        make_entry("twin", "scene_small.txt", PD_MAP_ASCII),
    };
    pd_conf hand = pd_conf_defaults;
    hand.scenes = dup;
    hand.n_scenes = 2;
    assert_int_equal(pd_registry_load(r, &hand, err, sizeof err), -1);
    assert_string_equal(err, "scene 'twin': name given more than once");
    n = pd_registry_list(r, &list);
    assert_int_equal(n, 3);
    pd_registry_release_list(list, n);

    /* And an empty config empties the registry. */
    hand.n_scenes = 0;
    hand.scenes = NULL;
    assert_int_equal(pd_registry_load(r, &hand, NULL, 0), 0);
    assert_int_equal(pd_registry_list(r, &list), 0);
    assert_null(pd_registry_acquire(r, "alpha"));
    pd_registry_destroy(r);
}

static void test_bundled_demo_world(void **state)
{
    (void)state;
    pd_conf c;
    char err[512] = "";
    int rc = pd_conf_load_file(PD_SOURCE_DIR "/config/default.json", &c, err, sizeof err);
    if (rc != 0)
        print_error("%s\n", err);
    assert_int_equal(rc, 0);
    pd_registry *r = pd_registry_create();
    assert_non_null(r);
    rc = pd_registry_load(r, &c, err, sizeof err);
    if (rc != 0)
        print_error("%s\n", err);
    assert_int_equal(rc, 0);
    pd_conf_free(&c);

    pd_scene **list;
    size_t n = pd_registry_list(r, &list);
    assert_int_equal(n, 7);
    static const char *names[] = { "cellar", "courtyard", "dungeon", "forest", "harbour", "house", "town" };
    for (size_t i = 0; i < n; i++)
        assert_string_equal(list[i]->name, names[i]);
    pd_registry_release_list(list, n);

    /* A later issue links town (3,4) to cellar (10,2): both must be open. */
    pd_scene *town = pd_registry_acquire(r, "town");
    assert_non_null(town);
    assert_int_not_equal(pd_grid_get(town->grid, 3, 4), PD_CELL_BLOCKED);
    assert_true(town->grid->width >= 32 && town->grid->height >= 24);
    pd_point p;
    assert_int_equal(pd_scene_world_to_cell(town, -20.0, -15.0, &p), PD_OK);
    assert_int_equal(p.x, 0);
    assert_int_equal(p.y, 0);
    assert_int_equal(pd_scene_world_to_cell(town, -16.5, -10.5, &p), PD_OK);
    assert_int_equal(p.x, 3);
    assert_int_equal(p.y, 4);
    assert_true(pd_scene_allows_unit(town, 3));
    pd_scene_release(town);

    pd_scene *cellar = pd_registry_acquire(r, "cellar");
    assert_non_null(cellar);
    assert_int_not_equal(pd_grid_get(cellar->grid, 10, 2), PD_CELL_BLOCKED);
    pd_scene_release(cellar);

    pd_scene *forest = pd_registry_acquire(r, "forest");
    assert_non_null(forest);
    assert_true(forest->grid->width >= 512 && forest->grid->height >= 512);
    pd_scene_release(forest);

    pd_scene *dungeon = pd_registry_acquire(r, "dungeon");
    assert_non_null(dungeon);
    assert_int_equal(dungeon->grid->width, 64);
    assert_int_equal(dungeon->grid->height, 64);
    /* Its swampy shore ('S') costs 3 through the config's cost table. */
    assert_int_equal(dungeon->grid->uniform_cost, 0);
    for (size_t i = 0; i < dungeon->n_unit_sizes; i++)
        assert_non_null(pd_scene_unit_for(dungeon, dungeon->unit_sizes[i]));
    pd_scene_release(dungeon);

    /* The Tiled demo map: walls, a fountain, a mud patch costing 3. */
    pd_scene *yard = pd_registry_acquire(r, "courtyard");
    assert_non_null(yard);
    assert_int_equal(yard->grid->width, 24);
    assert_int_equal(yard->grid->height, 16);
    assert_int_equal(pd_grid_get(yard->grid, 3, 11), 3);
    assert_non_null(pd_scene_unit_for(yard, 2));
    pd_scene_release(yard);
    pd_registry_destroy(r);
}

/* Concurrency: readers acquire, inspect and release while the main thread
 * reloads between two configs. Each reader checks that every snapshot it sees
 * is whole and that a name's version never goes backwards. */
#define READERS 4
#define MIN_RELOADS 60
#define MIN_ACQUIRES_PER_READER 2000   /* so every reader overlaps many reloads */
#define MAX_RELOADS 200000             /* a bound, should a reader never get scheduled */

typedef struct reader_arg {
    pd_registry *r;
    atomic_int *stop;
    atomic_ulong acquired;
    int failures;
} reader_arg;

static void *reader_main(void *p)
{
    reader_arg *a = p;
    static const char *names[] = { "alpha", "mid", "zeta", "omega" };
    uint64_t last_version[4] = { 0 };
    unsigned i = 0;
    while (!atomic_load(a->stop)) {
        size_t k = i++ % 4;
        pd_scene *s = pd_registry_acquire(a->r, names[k]);
        if (s) {
            atomic_fetch_add(&a->acquired, 1);
            if (strcmp(s->name, names[k]) != 0 || s->version < last_version[k] ||
                s->grid->width < 1 || pd_grid_get(s->grid, 0, 0) != PD_CELL_FREE)
                a->failures++;
            last_version[k] = s->version;
            pd_scene_release(s);
        }
        if (i % 16 == 0) {
            pd_scene **list;
            size_t n = pd_registry_list(a->r, &list);
            if (n != 3)
                a->failures++;
            for (size_t j = 1; j < n; j++) {
                if (strcmp(list[j - 1]->name, list[j]->name) >= 0)
                    a->failures++;
            }
            pd_registry_release_list(list, n);
        }
    }
    return NULL;
}

static void test_registry_concurrent_reload(void **state)
{
    (void)state;
    pd_registry *r = pd_registry_create();
    assert_non_null(r);
    pd_conf confs[2];
    load_conf(conf_three, &confs[0]);
    load_conf(conf_changed, &confs[1]);
    char err[256] = "";
    assert_int_equal(pd_registry_load(r, &confs[0], err, sizeof err), 0);

    atomic_int stop;
    atomic_init(&stop, 0);
    pthread_t threads[READERS];
    reader_arg args[READERS];
    for (int t = 0; t < READERS; t++) {
        args[t] = (reader_arg){ .r = r, .stop = &stop };
        atomic_init(&args[t].acquired, 0);
        assert_int_equal(pthread_create(&threads[t], NULL, reader_main, &args[t]), 0);
    }
    /* Reload until every reader has had its share of lookups, so the test
     * does not depend on how the scheduler starts the threads. */
    int reloads = 0;
    for (;;) {
        int readers_done = 1;
        for (int t = 0; t < READERS; t++)
            readers_done &= atomic_load(&args[t].acquired) >= MIN_ACQUIRES_PER_READER;
        if ((reloads >= MIN_RELOADS && readers_done) || reloads >= MAX_RELOADS)
            break;
        reloads++;
        assert_int_equal(pd_registry_load(r, &confs[reloads % 2], err, sizeof err), 0);
    }
    atomic_store(&stop, 1);
    for (int t = 0; t < READERS; t++) {
        assert_int_equal(pthread_join(threads[t], NULL), 0);
        assert_int_equal(args[t].failures, 0);
        assert_true(atomic_load(&args[t].acquired) >= MIN_ACQUIRES_PER_READER);
    }

    /* "mid" is in both configs, so it was replaced on every reload. */
    pd_scene *mid = pd_registry_acquire(r, "mid");
    assert_non_null(mid);
    assert_int_equal(mid->version, (uint64_t)reloads + 1);
    pd_scene_release(mid);
    pd_conf_free(&confs[0]);
    pd_conf_free(&confs[1]);
    pd_registry_destroy(r);
}

/* An instance is made from a template other threads hold and let go of
 * (a route's result releases its scenes on a worker while another worker
 * instances one of them): the copy must not read the template's reference
 * count, which they change. Under TSan a read of it is a data race; here
 * the instances must come out as scenes of their own either way. */
#define INSTANCE_ROUNDS 20000

static void *retain_release_main(void *p)
{
    pd_scene *tmpl = p;
    for (int i = 0; i < INSTANCE_ROUNDS; i++) {
        pd_scene_retain(tmpl);
        pd_scene_release(tmpl);
    }
    return NULL;
}

static void test_instance_while_template_is_shared(void **state)
{
    (void)state;
    pd_registry *r = pd_registry_create();
    assert_non_null(r);
    pd_conf c;
    load_conf(conf_three, &c);
    char err[256] = "";
    assert_int_equal(pd_registry_load(r, &c, err, sizeof err), 0);
    pd_scene *tmpl = pd_registry_acquire(r, "alpha");
    assert_non_null(tmpl);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, retain_release_main, tmpl), 0);
    for (int i = 0; i < INSTANCE_ROUNDS / 10; i++) {
        pd_scene *n = pd_scene_instance(tmpl, "copy");
        assert_non_null(n);
        assert_string_equal(n->name, "copy");
        assert_int_equal(atomic_load(&n->refs), 1);
        assert_int_equal(n->version, 1);
        assert_ptr_equal(n->grid, tmpl->grid);
        pd_scene_release(n);
    }
    assert_int_equal(pthread_join(t, NULL), 0);
    pd_scene_release(tmpl);
    pd_registry_destroy(r);
    pd_conf_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_ascii),
        cmocka_unit_test(test_load_movingai),
        cmocka_unit_test(test_load_movingai_costs),
        cmocka_unit_test(test_load_tiled),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_world_to_cell),
        cmocka_unit_test(test_cell_center),
        cmocka_unit_test(test_registry_load_and_list),
        cmocka_unit_test(test_registry_reload_keeps_held_snapshot),
        cmocka_unit_test(test_registry_prepare_then_publish),
        cmocka_unit_test(test_registry_failed_reload_keeps_old_set),
        cmocka_unit_test(test_bundled_demo_world),
        cmocka_unit_test(test_registry_concurrent_reload),
        cmocka_unit_test(test_instance_while_template_is_shared),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
