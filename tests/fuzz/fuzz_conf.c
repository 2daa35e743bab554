/*
 * fuzz_conf.c - libFuzzer target for the config loader: pd_conf_load_buffer
 * (server/conf/pd_conf.c) and, through its "portals" and "routes", the world
 * part (pd_conf_world.c). What an operator's typo, or a SIGHUP after a bad
 * edit, hands the daemon.
 *
 * The input is the config file. A refused config must leave *out zeroed
 * with a reason (pd_conf.h: nothing half-loaded); an accepted one must keep
 * every promise pd_conf.h and pd_conf_world.h make about the structs, since
 * the scene and world layers rely on them without checking again.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_check.h"
#include "pd_conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A name as pd_conf.h defines one: 1..63 bytes, NUL-terminated in place. */
static void fuzz_check_name(const char *name, size_t cap)
{
    size_t n = strnlen(name, cap);
    FUZZ_REQUIRE(n >= 1 && n < cap, "name of %zu bytes", n);
}

static int fuzz_has_scene(const pd_conf *c, const char *name)
{
    for (size_t i = 0; i < c->n_scenes; i++)
        if (strcmp(c->scenes[i].name, name) == 0)
            return 1;
    return 0;
}

static void fuzz_check_scene(const pd_conf *c, size_t i)
{
    const pd_conf_scene *s = &c->scenes[i];
    fuzz_check_name(s->name, sizeof s->name);
    for (size_t j = 0; j < i; j++)
        FUZZ_REQUIRE(strcmp(c->scenes[j].name, s->name) != 0, "scene '%s' twice", s->name);
    FUZZ_REQUIRE(s->map_path != NULL && s->map_path[0] != '\0', "scene '%s' has no map", s->name);
    FUZZ_REQUIRE(s->format == PD_MAP_MOVINGAI || s->format == PD_MAP_ASCII || s->format == PD_MAP_TILED ||
                     s->format == PD_MAP_LDTK,
                 "format %d", (int)s->format);
    FUZZ_REQUIRE(isfinite(s->cell_size) && s->cell_size > 0, "cell_size %g", s->cell_size);
    FUZZ_REQUIRE(isfinite(s->origin_x) && isfinite(s->origin_y), "origin %g, %g", s->origin_x, s->origin_y);
    FUZZ_REQUIRE(s->n_unit_sizes >= 1 && s->n_unit_sizes <= PD_CONF_MAX_UNIT_SIZES, "%zu unit sizes",
                 s->n_unit_sizes);
    for (size_t u = 0; u < s->n_unit_sizes; u++) {
        FUZZ_REQUIRE(s->unit_sizes[u] >= 1 && s->unit_sizes[u] <= PD_CONF_MAX_UNIT_SIZE, "unit size %u",
                     (unsigned)s->unit_sizes[u]);
        FUZZ_REQUIRE(u == 0 || s->unit_sizes[u - 1] < s->unit_sizes[u], "unit sizes not sorted and distinct");
    }
    for (int ch = 0; ch < PD_CONF_CHAR_COSTS; ch++)
        FUZZ_REQUIRE(!s->char_cost_set[ch] || s->format == PD_MAP_MOVINGAI, "costs on a non-movingai map");
    FUZZ_REQUIRE(memchr(s->tiled.layer, '\0', sizeof s->tiled.layer) != NULL, "layer not terminated");
}

static void fuzz_check_world(const pd_conf *c)
{
    const pd_conf_world *w = &c->world;
    FUZZ_REQUIRE(w->n_portals <= PD_CONF_WORLD_MAX_PORTALS, "%zu portals", w->n_portals);
    FUZZ_REQUIRE(w->n_routes <= PD_CONF_WORLD_MAX_ROUTES, "%zu routes", w->n_routes);
    for (size_t i = 0; i < w->n_portals; i++) {
        const pd_conf_portal *p = &w->portals[i];
        fuzz_check_name(p->name, sizeof p->name);
        FUZZ_REQUIRE(pd_conf_world_find_portal(w, p->name) == (long)i, "portal '%s' twice", p->name);
        FUZZ_REQUIRE(fuzz_has_scene(c, p->a.scene) && fuzz_has_scene(c, p->b.scene),
                     "portal '%s' joins an unknown scene", p->name);
        FUZZ_REQUIRE(p->a.x >= 0 && p->a.y >= 0 && p->a.x < PD_GRID_MAX_SIDE && p->a.y < PD_GRID_MAX_SIDE &&
                         p->b.x >= 0 && p->b.y >= 0 && p->b.x < PD_GRID_MAX_SIDE && p->b.y < PD_GRID_MAX_SIDE,
                     "portal '%s' has a cell out of range", p->name);
        FUZZ_REQUIRE(isfinite(p->cost) && p->cost >= 0, "portal '%s' costs %g", p->name, p->cost);
        FUZZ_REQUIRE(p->max_unit <= PD_CONF_MAX_UNIT_SIZE, "portal '%s' max_unit %u", p->name,
                     (unsigned)p->max_unit);
    }
    for (size_t i = 0; i < w->n_routes; i++) {
        const pd_conf_route *r = &w->routes[i];
        FUZZ_REQUIRE(fuzz_has_scene(c, r->from) && fuzz_has_scene(c, r->to), "route between unknown scenes");
        FUZZ_REQUIRE(r->n_via >= 1 && r->n_via <= PD_CONF_WORLD_MAX_VIA, "route via %zu portals", r->n_via);
        /* The chain leaves "from" and arrives in "to" (pd_conf_world.h). */
        const char *at = r->from;
        for (size_t v = 0; v < r->n_via; v++) {
            FUZZ_REQUIRE(r->via[v] < w->n_portals, "via index %u of %zu", (unsigned)r->via[v], w->n_portals);
            const pd_conf_portal *p = &w->portals[r->via[v]];
            int forward = strcmp(p->a.scene, at) == 0;
            int backward = p->two_way && strcmp(p->b.scene, at) == 0;
            FUZZ_REQUIRE(forward || backward, "route %s -> %s: portal '%s' does not leave '%s'", r->from,
                         r->to, p->name, at);
            at = forward ? p->b.scene : p->a.scene;
        }
        FUZZ_REQUIRE(strcmp(at, r->to) == 0, "route %s -> %s arrives in '%s'", r->from, r->to, at);
        for (size_t j = 0; j < i; j++)
            FUZZ_REQUIRE(strcmp(w->routes[j].from, r->from) != 0 || strcmp(w->routes[j].to, r->to) != 0,
                         "two routes %s -> %s", r->from, r->to);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const pd_conf zero;
    pd_conf conf;
    char err[512];
    err[0] = '\0';
    if (pd_conf_load_buffer((const char *)data, size, "fuzz.json", "/fuzz", &conf, err, sizeof err) != 0) {
        FUZZ_REQUIRE(err[0] != '\0', "refused without a reason");
        FUZZ_REQUIRE(memcmp(&conf, &zero, sizeof conf) == 0, "a refused config left fields set");
        return 0;
    }
    FUZZ_REQUIRE(conf.n_scenes <= PD_CONF_MAX_SCENES, "%zu scenes", conf.n_scenes);
    FUZZ_REQUIRE(conf.write_low_watermark < conf.write_high_watermark, "watermarks %u >= %u",
                 (unsigned)conf.write_low_watermark, (unsigned)conf.write_high_watermark);
    FUZZ_REQUIRE(conf.log_level >= PD_LOG_ERROR && conf.log_level <= PD_LOG_DEBUG, "log level %d",
                 (int)conf.log_level);
    fuzz_check_name(conf.listen_host, sizeof conf.listen_host);
    for (size_t i = 0; i < conf.n_scenes; i++)
        fuzz_check_scene(&conf, i);
    fuzz_check_world(&conf);
    pd_conf_free(&conf);
    return 0;
}
