/*
 * pd_scene_load.c - building a scene: from a config entry's map file (the
 * four formats: ASCII, Moving AI, Tiled, LDtk), from a map sent in a
 * request, from raw cells (CreateScene, the journal's replay), and as an
 * instance of a template; the checks every entry and map pass, the
 * limits a build is held to, and whether a reload may keep a served scene
 * whose definition did not change (pd__scene_load_or_keep) rather than
 * building it again, so its version and its updates stay.
 */
#include "pd_scene.h"
#include "pd_scene_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pd_mapfile.h"
#include "pd_ldtk.h"
#include "pd_tiled.h"

/* The config may only allow unit sizes the core can build grids for. */
_Static_assert(PD_CONF_MAX_UNIT_SIZE <= PD_UNIT_SIZE_MAX,
               "PD_CONF_MAX_UNIT_SIZE exceeds the core's PD_UNIT_SIZE_MAX");

/* Largest map file we read, in bytes: a full PD_GRID_MAX_SIDE square grid
 * (256 Mi cells) with CRLF line ends and a header still fits, anything bigger
 * cannot be a valid map and is refused before we allocate for it. */
#define PD_SCENE_MAX_FILE_BYTES \
    ((size_t)PD_GRID_MAX_SIDE * (PD_GRID_MAX_SIDE + 2) + 64u * 1024u)

/* Reads a whole map file, refusing anything above `cap` bytes before
 * allocating for it. */
static char *pd__read_file(const char *path, size_t cap, size_t *len, const char *name,
                           char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "scene '%s': %s: cannot open: %s", name, path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "scene '%s': %s: not a regular file", name, path);
        fclose(f);
        return NULL;
    }
    if ((uintmax_t)st.st_size > cap) {
        snprintf(err, errlen, "scene '%s': %s: larger than %zu bytes", name, path, cap);
        fclose(f);
        return NULL;
    }
    size_t size = (size_t)st.st_size;
    char *buf = malloc(size + 1);
    if (!buf) {
        snprintf(err, errlen, "scene '%s': %s: out of memory", name, path);
        fclose(f);
        return NULL;
    }
    /* Asking for one byte more than fstat reported catches a file that changed. */
    size_t n = fread(buf, 1, size + 1, f);
    int failed = ferror(f) || n != size;
    fclose(f);
    if (failed) {
        snprintf(err, errlen, "scene '%s': %s: read error or file changed while reading", name, path);
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

/* The checks every scene entry passes, from the config or from a request;
 * the config layer makes them too, a hand-built entry gets them here.
 * Returns 0, or -1 with the reason in err. */
static int pd__check_entry(const pd_conf_scene *cs, char *err, size_t errlen)
{
    if (cs->name[0] == '\0' || memchr(cs->name, '\0', sizeof cs->name) == NULL) {
        snprintf(err, errlen, "scene: name is empty or unterminated");
        return -1;
    }
    if (!(isfinite(cs->cell_size) && cs->cell_size > 0.0) || !isfinite(cs->origin_x) ||
        !isfinite(cs->origin_y)) {
        snprintf(err, errlen, "scene '%s': origin must be finite and cell_size finite and > 0",
                 cs->name);
        return -1;
    }
    if (cs->n_unit_sizes < 1 || cs->n_unit_sizes > PD_CONF_MAX_UNIT_SIZES) {
        snprintf(err, errlen, "scene '%s': needs 1..%d unit sizes", cs->name, PD_CONF_MAX_UNIT_SIZES);
        return -1;
    }
    for (size_t i = 0; i < cs->n_unit_sizes; i++) {
        if (cs->unit_sizes[i] < 1 || cs->unit_sizes[i] > PD_CONF_MAX_UNIT_SIZE) {
            snprintf(err, errlen, "scene '%s': unit size %u is outside 1..%d", cs->name,
                     (unsigned)cs->unit_sizes[i], PD_CONF_MAX_UNIT_SIZE);
            return -1;
        }
    }
    return 0;
}

/* Lineages handed out so far (pd_scene.lineage): each build takes the next. */
static atomic_uint_fast64_t pd__lineages;

static uint64_t pd__new_lineage(void)
{
    return atomic_fetch_add_explicit(&pd__lineages, 1, memory_order_relaxed) + 1;
}

/* 0 when grid has a walkable cell, else -1 with the reason (see
 * pd_scene_check_walkable); tiled: a Tiled map's stats, or NULL. */
static int pd__check_walkable(const char *name, const char *where, const pd_grid *grid,
                              const pd_tiled_stats *tiled, char *err, size_t errlen)
{
    for (int32_t y = 0; y < grid->height; y++) {
        const uint8_t *row = grid->cells + pd_grid_index(grid, 0, y);
        for (int32_t x = 0; x < grid->width; x++) {
            if (row[x] != PD_CELL_BLOCKED)
                return 0;
        }
    }
    char why[PD_TILED_STATS_LAYERS + 256];
    if (tiled)
        pd_tiled_stats_format(tiled, why, sizeof why);
    else
        snprintf(why, sizeof why, "all %d x %d cells are blocked", (int)grid->width,
                 (int)grid->height);
    snprintf(err, errlen, "scene '%s': %s%sno walkable cell: %s", name, where ? where : "",
             where ? ": " : "", why);
    return -1;
}

int pd_scene_check_walkable(const pd_scene *s, const char *where, char *err, size_t errlen)
{
    char scratch[1];
    if (!err || errlen == 0) {
        err = scratch;
        errlen = sizeof scratch;
    }
    return pd__check_walkable(s->name, where, s->grid, s->from_tiled ? &s->tiled_stats : NULL, err,
                              errlen);
}

void pd_scene_describe(const pd_scene *s, char *buf, size_t len)
{
    const double cells = (double)s->grid->width * (double)s->grid->height;
    int n = snprintf(buf, len, "%dx%d, %" PRIu64 " of %.0f cells walkable (%.1f%%)",
                     (int)s->grid->width, (int)s->grid->height, s->passable_cells, cells,
                     100.0 * (double)s->passable_cells / cells);
    if (s->from_tiled && n > 0 && (size_t)n + 2 < len) {
        memcpy(buf + n, "; ", 3);
        pd_tiled_stats_format(&s->tiled_stats, buf + n + 2, len - (size_t)n - 2);
    }
}

/* A scene around grid (taken over, also on failure) with cs's placement and
 * unit sizes, its derived data built under lim (may be NULL); off_x/off_y
 * (cells) move the origin; tiled: what a Tiled map's rule decided, or NULL.
 * NULL with the reason in err and *status (PD_INTERNAL, or the poll's). */
static pd_scene *pd__scene_new(const pd_conf_scene *cs, pd_grid *grid, double off_x, double off_y,
                               const pd_tiled_stats *tiled, const pd_scene_limits *lim,
                               pd_status *status, char *err, size_t errlen)
{
    *status = PD_INTERNAL;
    pd_scene *s = calloc(1, sizeof *s);
    if (!s) {
        pd_grid_destroy(grid);
        snprintf(err, errlen, "scene '%s': out of memory", cs->name);
        return NULL;
    }
    atomic_init(&s->refs, 1);
    memcpy(s->name, cs->name, sizeof s->name);
    s->grid = grid;
    s->origin_x = cs->origin_x + off_x * cs->cell_size;
    s->origin_y = cs->origin_y + off_y * cs->cell_size;
    s->cell_size = cs->cell_size;
    memcpy(s->unit_sizes, cs->unit_sizes, sizeof s->unit_sizes);
    s->n_unit_sizes = cs->n_unit_sizes;
    s->search = cs->search;
    s->version = 1;
    s->lineage = pd__new_lineage();
    if (tiled) {
        s->from_tiled = 1;
        s->tiled_stats = *tiled;
    }
    s->incarnation = s->lineage;
    pd_status stopped = PD_OK;
    int rc = pd__scene_derive(s, lim, &stopped);
    if (rc != 0) {
        pd__scene_free(s);
        if (rc == -2) {
            *status = stopped;
            snprintf(err, errlen, "scene '%s': stopped while building its unit grids and labels: %s",
                     cs->name, pd_status_name(stopped));
        } else {
            snprintf(err, errlen, "scene '%s': out of memory for unit grids and labels", cs->name);
        }
        return NULL;
    }
    *status = PD_OK;
    return s;
}

/* Parses buf as cs's map format into a grid, under lim (may be NULL), with
 * the origin offset the map carries in *off_x, *off_y (cells) and, for a
 * Tiled map, what its rule decided in *tiled; `where` names the map in
 * messages (its path, or "map" for one sent in a request). NULL with the
 * reason in err, also for a map with no walkable cell, and in *status
 * PD_LIMIT_EXCEEDED (lim's cells), the poll's status or
 * PD_INVALID_ARGUMENT. */
static pd_grid *pd__parse_grid(const pd_conf_scene *cs, const char *buf, size_t len,
                               const char *where, const pd_scene_limits *lim, pd_status *status,
                               double *off_x_out, double *off_y_out, pd_tiled_stats *tiled,
                               char *err, size_t errlen)
{
    const pd_tiled_rules *tr = &cs->tiled;
    *status = PD_INVALID_ARGUMENT;
    if (cs->format != PD_MAP_ASCII && cs->format != PD_MAP_MOVINGAI && cs->format != PD_MAP_TILED &&
        cs->format != PD_MAP_LDTK) {
        snprintf(err, errlen, "scene '%s': unknown map format %d", cs->name, (int)cs->format);
        return NULL;
    }
    if (!memchr(tr->layer, '\0', sizeof tr->layer) ||
        !memchr(tr->blocked_property, '\0', sizeof tr->blocked_property) ||
        !memchr(tr->cost_property, '\0', sizeof tr->cost_property) ||
        !memchr(tr->walkable_property, '\0', sizeof tr->walkable_property)) {
        snprintf(err, errlen, "scene '%s': a tiled layer or property name is unterminated",
                 cs->name);
        return NULL;
    }
    if (cs->format == PD_MAP_TILED && (!tr->blocked_property[0] || !tr->cost_property[0])) {
        snprintf(err, errlen, "scene '%s': tiled blocked and cost property names must not be empty",
                 cs->name);
        return NULL;
    }
    pd_grid *grid = NULL;
    pd_parse_error perr = { 0 };
    /* LDtk levels carry their world position, infinite Tiled maps their top-left
     * chunk corner: cells, added to the origin. */
    double off_x = 0, off_y = 0;
    if (cs->format == PD_MAP_TILED || cs->format == PD_MAP_LDTK) {
        char msg[PD_REASON_MAX];
        const pd_tiled_origin origin = { .map_path = cs->map_path, .root_dir = cs->root_dir };
        pd_map_control ctl = { .max_cells_name = "limits.max_scene_cells" };
        if (lim) {
            ctl.max_cells = lim->max_cells;
            ctl.poll = lim->poll;
            ctl.poll_user = lim->poll_user;
        }
        grid = cs->format == PD_MAP_TILED
                   ? pd_tiled_load_ctl(buf, len, tr, &origin, &ctl, &off_x, &off_y, tiled, msg,
                                       sizeof msg)
                   : pd_ldtk_load_ctl(buf, len, &cs->ldtk, &ctl, &off_x, &off_y, msg, sizeof msg);
        if (!grid) {
            *status = ctl.status;
            /* "3:7: invalid JSON" reads as file:line:col like the other formats;
             * a JSON path follows the file name after a space. */
            snprintf(err, errlen, "scene '%s': %s:%s%s", cs->name, where,
                     (msg[0] >= '0' && msg[0] <= '9') ? "" : " ", msg);
            return NULL;
        }
    } else if (cs->format == PD_MAP_ASCII) {
        grid = pd_map_parse_ascii(buf, len, &perr);
    } else {
        pd_char_costs costs;
        memcpy(costs.cost, cs->char_cost, sizeof costs.cost);
        memcpy(costs.set, cs->char_cost_set, sizeof costs.set);
        grid = pd_map_parse_movingai_with(buf, len, &costs, &perr);
    }
    if (!grid) {
        if (perr.line > 0 && perr.column > 0)
            snprintf(err, errlen, "scene '%s': %s:%d:%d: %s", cs->name, where, perr.line,
                     perr.column, perr.message);
        else if (perr.line > 0)
            snprintf(err, errlen, "scene '%s': %s:%d: %s", cs->name, where, perr.line,
                     perr.message);
        else
            snprintf(err, errlen, "scene '%s': %s: %s", cs->name, where, perr.message);
        return NULL;
    }
    if (pd__check_walkable(cs->name, where, grid, cs->format == PD_MAP_TILED ? tiled : NULL, err,
                           errlen) != 0) {
        pd_grid_destroy(grid);
        return NULL;
    }
    *status = PD_OK;
    *off_x_out = off_x;
    *off_y_out = off_y;
    return grid;
}

uint64_t pd_scene_estimate_bytes(int32_t width, int32_t height, const uint32_t *unit_sizes,
                                 size_t n_unit_sizes)
{
    const uint64_t grid = pd_grid_bytes_for(width, height);
    const uint64_t padded = (uint64_t)(width + 2) * (uint64_t)(height + 2);
    uint64_t bytes = sizeof(pd_scene) + grid, larger = 0;
    for (size_t i = 0; i < n_unit_sizes; i++) {
        larger += unit_sizes[i] > 1;
        bytes += padded; /* labels, one byte a cell at least */
    }
    if (larger)
        bytes += padded + larger * grid; /* the clearance, the unit grids */
    return bytes;
}

pd_status pd_scene_check_limits(const pd_scene_limits *lim, const pd_conf_scene *cs, int32_t width,
                                int32_t height, char *err, size_t errlen)
{
    uint64_t cells = (uint64_t)width * (uint64_t)height;
    if (lim && lim->max_cells && cells > lim->max_cells) {
        snprintf(err, errlen, "scene '%s': %" PRIu64 " cells, limits.max_scene_cells is %" PRIu64,
                 cs->name, cells, lim->max_cells);
        return PD_LIMIT_EXCEEDED;
    }
    if (lim && lim->bytes_cap) {
        uint64_t need = pd_scene_estimate_bytes(width, height, cs->unit_sizes, cs->n_unit_sizes);
        if (lim->bytes_held + need > lim->bytes_cap) {
            snprintf(err, errlen,
                     "scene '%s': needs at least %" PRIu64 " bytes, scenes hold %" PRIu64
                     ", limits.max_scene_bytes is %" PRIu64,
                     cs->name, need, lim->bytes_held, lim->bytes_cap);
            return PD_LIMIT_EXCEEDED;
        }
    }
    return PD_OK;
}

/* Parses buf as cs's map format and builds the scene (pd__parse_grid), held
 * to lim's caps (the text formats' grids are as large as their text: their
 * cells are checked here) before anything is derived. */
static pd_scene *pd__scene_parse(const pd_conf_scene *cs, const char *buf, size_t len,
                                 const char *where, const pd_scene_limits *lim, pd_status *status,
                                 char *err, size_t errlen)
{
    double off_x = 0, off_y = 0;
    pd_tiled_stats tiled;
    pd_grid *grid = pd__parse_grid(cs, buf, len, where, lim, status, &off_x, &off_y, &tiled, err,
                                   errlen);
    if (!grid)
        return NULL;
    if ((*status = pd_scene_check_limits(lim, cs, grid->width, grid->height, err, errlen)) != PD_OK) {
        pd_grid_destroy(grid);
        return NULL;
    }
    return pd__scene_new(cs, grid, off_x, off_y, cs->format == PD_MAP_TILED ? &tiled : NULL, lim,
                         status, err, errlen);
}

/* Whether cur, a served config scene, is what cs defines now: the grid its
 * map parsed to (off_x/off_y: the offset the map carries) equals the cells
 * cur was loaded with (its authored state, whatever updates did since),
 * and the placement, unit sizes and search equal cs's, computed as
 * pd__scene_new computes them. */
static int pd__same_definition(const pd_scene *cur, const pd_conf_scene *cs, const pd_grid *grid,
                               double off_x, double off_y)
{
    const pd_grid *authored = pd_scene_authored_grid(cur);
    const pd_grid *g = authored ? authored : cur->grid;
    if (cur->runtime || cur->origin_x != cs->origin_x + off_x * cs->cell_size ||
        cur->origin_y != cs->origin_y + off_y * cs->cell_size || cur->cell_size != cs->cell_size ||
        cur->search != cs->search || cur->n_unit_sizes != cs->n_unit_sizes ||
        memcmp(cur->unit_sizes, cs->unit_sizes, cs->n_unit_sizes * sizeof *cs->unit_sizes) != 0 ||
        g->width != grid->width || g->height != grid->height)
        return 0;
    for (int32_t y = 0; y < grid->height; y++) {
        if (memcmp(g->cells + pd_grid_index(g, 0, y), grid->cells + pd_grid_index(grid, 0, y),
                   (size_t)grid->width) != 0)
            return 0;
    }
    return 1;
}

/* Loads the scene of config entry cs, its parse and derive asking lim's
 * poll (lim may be NULL; the config's maps have no cap but their
 * format's); when `keep` (the snapshot a registry serves under cs's name,
 * or NULL) has the definition cs gives, returns it retained instead of
 * building it again, with *kept = 1. */
pd_scene *pd__scene_load_or_keep(const pd_conf_scene *cs, pd_scene *keep,
                                        const pd_scene_limits *lim, int *kept, char *err,
                                        size_t errlen)
{
    *kept = 0;
    if (pd__check_entry(cs, err, errlen) != 0)
        return NULL;
    if (!cs->map_path || cs->map_path[0] == '\0') {
        snprintf(err, errlen, "scene '%s': no map file", cs->name);
        return NULL;
    }
    size_t len = 0;
    size_t cap = cs->format == PD_MAP_TILED || cs->format == PD_MAP_LDTK ? PD_TILED_MAX_FILE_BYTES
                                                                         : PD_SCENE_MAX_FILE_BYTES;
    char *buf = pd__read_file(cs->map_path, cap, &len, cs->name, err, errlen);
    if (!buf)
        return NULL;
    double off_x = 0, off_y = 0;
    pd_tiled_stats tiled;
    pd_status st;
    pd_grid *grid = pd__parse_grid(cs, buf, len, cs->map_path, lim, &st, &off_x, &off_y, &tiled,
                                   err, errlen);
    free(buf);
    if (!grid)
        return NULL;
    if (keep && pd__same_definition(keep, cs, grid, off_x, off_y)) {
        pd_grid_destroy(grid);
        pd_scene_retain(keep);
        *kept = 1;
        return keep;
    }
    return pd__scene_new(cs, grid, off_x, off_y, cs->format == PD_MAP_TILED ? &tiled : NULL, lim,
                         &st, err, errlen);
}

pd_scene *pd_scene_load(const pd_conf_scene *cs, char *err, size_t errlen)
{
    char scratch[1];
    if (!err || errlen == 0) {
        err = scratch;
        errlen = sizeof scratch;
    }
    err[0] = '\0';
    int kept;
    return pd__scene_load_or_keep(cs, NULL, NULL, &kept, err, errlen);
}

pd_scene *pd_scene_build(const pd_conf_scene *cs, const char *buf, size_t len,
                         const pd_scene_limits *lim, pd_status *status, char *err, size_t errlen)
{
    char scratch[1];
    pd_status st_scratch;
    if (!err || errlen == 0) {
        err = scratch;
        errlen = sizeof scratch;
    }
    if (!status)
        status = &st_scratch;
    err[0] = '\0';
    *status = PD_INVALID_ARGUMENT;
    if (!cs || !buf) {
        snprintf(err, errlen, "scene: no map");
        return NULL;
    }
    if (pd__check_entry(cs, err, errlen) != 0)
        return NULL;
    return pd__scene_parse(cs, buf, len, cs->map_path ? cs->map_path : "map", lim, status, err,
                           errlen);
}

pd_scene *pd_scene_from_cells(const pd_conf_scene *cs, int32_t width, int32_t height,
                              const uint8_t *cells, char *err, size_t errlen)
{
    char scratch[1];
    if (!err || errlen == 0) {
        err = scratch;
        errlen = sizeof scratch;
    }
    err[0] = '\0';
    if (!cs || !cells) {
        snprintf(err, errlen, "scene: no cells");
        return NULL;
    }
    if (pd__check_entry(cs, err, errlen) != 0)
        return NULL;
    pd_grid *grid = pd_grid_create(width, height);
    if (!grid) {
        snprintf(err, errlen, "scene '%s': %dx%d cells: each side must be 1..%d", cs->name,
                 (int)width, (int)height, PD_GRID_MAX_SIDE);
        return NULL;
    }
    for (int32_t y = 0; y < height; y++)
        memcpy(grid->cells + pd_grid_index(grid, 0, y), cells + (size_t)y * (size_t)width,
               (size_t)width);
    pd_grid_refresh_flags(grid);
    pd_status st;
    return pd__scene_new(cs, grid, 0, 0, NULL, NULL, &st, err, errlen);
}

pd_scene *pd_scene_instance(const pd_scene *tmpl, const char *name)
{
    size_t len = name ? strlen(name) : 0;
    if (!tmpl || len == 0 || len >= PD_CONF_MAX_NAME)
        return NULL;
    pd_scene *n = malloc(sizeof *n);
    if (!n)
        return NULL;
    /* Every field as the template has it (the structures' pointers
     * included), then what makes it a scene of its own. Not the reference
     * count: other threads holding the template change it meanwhile. */
    _Static_assert(offsetof(pd_scene, refs) == 0, "the copy skips refs as the first field");
    const size_t after_refs = sizeof tmpl->refs;
    memcpy((char *)n + after_refs, (const char *)tmpl + after_refs, sizeof *n - after_refs);
    atomic_init(&n->refs, 1);
    memset(n->name, 0, sizeof n->name);
    memcpy(n->name, name, len);
    n->version = 1;
    n->runtime = 1;
    n->lineage = pd__new_lineage();
    n->incarnation = n->lineage;
    n->acct = NULL;
    n->charged = 0;
    n->authored = NULL; /* its cells now are its authored state */
    n->writer = NULL;   /* a scene of its own: its updates are not the template's */
    n->base = tmpl->base ? tmpl->base : (pd_scene *)tmpl;
    n->template_lineage = tmpl->template_lineage ? tmpl->template_lineage : tmpl->runtime ? 0 : tmpl->lineage;
    pd_scene_retain(n->base);
    return n;
}

