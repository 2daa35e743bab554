/*
 * test_world.c - portals, route tables and the cross-scene planner
 * (scene/pd_world.h) with the config that declares them (conf/pd_conf_world.h).
 *
 * The hand-made world in tests/data/route_world.json has four scenes: plaza
 * (start), hall (a door in the middle), tunnel (a long detour) and vault
 * (goal), joined by portals with costs, a one-way chute, a portal closed to
 * units above size 1 and a pinned route. Expected costs are never typed in:
 * each candidate way is priced here by summing independent A* searches per
 * leg plus the portal costs, and the planner must pick the cheapest and
 * report exactly its legs. The demo world (config/default.json scenes with
 * its portals and routes) gets the same checks the issue names. A reload's
 * world is checked in its two halves (built over a prepared scene set,
 * published with it) and against updates refreshing tables meanwhile.
 */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pd_conf.h"
#include "pd_conf_world.h"
#include "pd_scene.h"
#include "pd_world.h"

#define WORLD_JSON PD_TEST_DATA_DIR "/route_world.json"
#define DEMO_CONFIG PD_SOURCE_DIR "/config/default.json"
/* Plans each reader thread runs while the door is toggled. */
#define WORLD_READER_PLANS 200
#define WORLD_TOGGLES 20
/* Reloads published, each while another thread toggles the door. */
#define WORLD_RELOADS 20

static char *read_text(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    assert_true(n > 0);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static void parse_world_file(const char *path, const char *const *names, size_t n_names,
                             pd_conf_world *cw)
{
    size_t len;
    char *json = read_text(path, &len);
    char err[256];
    int rc = pd_conf_world_parse_buffer(json, len, path, names, n_names, cw, err, sizeof err);
    if (rc != 0)
        fail_msg("%s", err);
    free(json);
}

/* The config of the four test scenes (free it with pd_conf_free). */
static void test_scene_conf(pd_conf *conf)
{
    static const char *const names[] = { "plaza", "hall", "tunnel", "vault" };
    *conf = pd_conf_defaults;
    conf->scenes = calloc(4, sizeof *conf->scenes);
    assert_non_null(conf->scenes);
    conf->n_scenes = 4;
    for (size_t i = 0; i < 4; i++) {
        pd_conf_scene *s = &conf->scenes[i];
        snprintf(s->name, sizeof s->name, "%s", names[i]);
        char path[512];
        snprintf(path, sizeof path, "%s/route_%s.txt", PD_TEST_DATA_DIR, names[i]);
        s->map_path = strdup(path);
        assert_non_null(s->map_path);
        s->format = PD_MAP_ASCII;
        s->cell_size = 1.0;
        s->unit_sizes[0] = 1;
        s->unit_sizes[1] = 2;
        s->n_unit_sizes = 2;
    }
}

/* The four test scenes, loaded the way the daemon loads scenes. */
static pd_registry *load_test_registry(void)
{
    pd_conf conf;
    test_scene_conf(&conf);
    pd_registry *r = pd_registry_create();
    assert_non_null(r);
    char err[256];
    if (pd_registry_load(r, &conf, err, sizeof err) != 0)
        fail_msg("%s", err);
    pd_conf_free(&conf);
    return r;
}

/* The four test scenes loaded again, the way a reload loads them: a set no
 * registry serves yet. */
static pd_scene_set *prepare_test_set(void)
{
    pd_conf conf;
    test_scene_conf(&conf);
    char err[256];
    pd_scene_set *set = pd_registry_prepare(&conf, err, sizeof err);
    if (!set)
        fail_msg("%s", err);
    pd_conf_free(&conf);
    return set;
}

/* The scene called `name` in a prepared set, or NULL. */
static pd_scene *set_scene(const pd_scene_set *set, const char *name)
{
    size_t n = 0;
    pd_scene *const *scenes = pd_scene_set_scenes(set, &n);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(scenes[i]->name, name) == 0)
            return scenes[i];
    }
    return NULL;
}

static pd_world *build_world(pd_registry *r, const pd_conf_world *cw)
{
    char err[256];
    pd_world *w = pd_world_build_from_registry(cw, r, err, sizeof err);
    if (!w)
        fail_msg("%s", err);
    return w;
}

/* Independent A* cost of one in-scene walk, or INFINITY. */
static double walk_cost(pd_search_ctx *ctx, const pd_world *w, const char *scene, uint32_t unit,
                        pd_point a, pd_point b)
{
    const pd_scene *s = pd_world_scene(w, scene);
    assert_non_null(s);
    const pd_scene_unit *su = pd_scene_unit_for(s, unit);
    assert_non_null(su);
    pd_search_params p = { .start = a, .goal = b };
    pd_search_metrics m;
    pd_status st = pd_search_astar(ctx, su->grid, &p, NULL, 0, &m);
    return st == PD_OK ? m.cost : INFINITY;
}

/* One step of a hand-priced way: walk in `scene` from a to b, then (if
 * portal_cost >= 0) take a portal of that cost. */
typedef struct hop {
    const char *scene;
    pd_point a, b;
    double portal_cost;
} hop;

static double way_cost(pd_search_ctx *ctx, const pd_world *w, uint32_t unit, const hop *h, size_t n)
{
    double total = 0.0;
    for (size_t i = 0; i < n; i++) {
        total += walk_cost(ctx, w, h[i].scene, unit, h[i].a, h[i].b);
        if (h[i].portal_cost > 0)
            total += h[i].portal_cost;
    }
    return total;
}

/* Checks a route's internal consistency: legs chain, costs add up, and each
 * leg's cost is what A* says about that leg. */
static void check_route(pd_search_ctx *ctx, const pd_world_route *r, uint32_t unit)
{
    assert_true(r->n_legs >= 1);
    double sum = 0.0;
    for (size_t i = 0; i < r->n_legs; i++) {
        const pd_world_leg *l = &r->legs[i];
        const pd_scene_unit *su = pd_scene_unit_for(l->scene, unit);
        pd_search_params p = { .start = l->from, .goal = l->to };
        pd_search_metrics m;
        assert_int_equal(pd_search_astar(ctx, su->grid, &p, NULL, 0, &m), PD_OK);
        assert_true(fabs(m.cost - l->cost) < 1e-9);
        sum += l->cost;
        assert_int_equal(l->has_portal, i + 1 < r->n_legs);
        if (l->has_portal) {
            sum += l->portal_cost;
            assert_non_null(l->portal);
            assert_int_equal(l->portal_exit.x, l->to.x);
            assert_int_equal(l->portal_exit.y, l->to.y);
            assert_ptr_equal(l->next_scene, r->legs[i + 1].scene);
            assert_int_equal(l->portal_entry.x, r->legs[i + 1].from.x);
            assert_int_equal(l->portal_entry.y, r->legs[i + 1].from.y);
        }
    }
    assert_true(fabs(sum - r->total_cost) < 1e-9);
}

/* "plaza>hall>vault" style summary of the scenes a route passes. */
static void route_scenes(const pd_world_route *r, char *buf, size_t len)
{
    buf[0] = '\0';
    for (size_t i = 0; i < r->n_legs; i++) {
        size_t used = strlen(buf);
        snprintf(buf + used, len - used, "%s%s", i ? ">" : "", r->legs[i].scene->name);
    }
}

static int route_uses(const pd_world_route *r, const char *portal)
{
    for (size_t i = 0; i < r->n_legs; i++) {
        if (r->legs[i].has_portal && strcmp(r->legs[i].portal, portal) == 0)
            return 1;
    }
    return 0;
}

static pd_status plan(const pd_world *w, pd_search_ctx *ctx, const char *from, pd_point s,
                      const char *to, pd_point g, uint32_t unit, pd_world_route *out)
{
    pd_world_query q = { .from_scene = from, .start = s, .to_scene = to, .goal = g,
                         .unit_size = unit };
    return pd_world_plan(w, ctx, &q, out);
}

static const pd_point PLAZA_START = { 2, 2 };
static const pd_point VAULT_GOAL = { 7, 2 };

/* Hand-priced ways from PLAZA_START to VAULT_GOAL (portal cells as in
 * route_world.json). */
static double via_hall(pd_search_ctx *ctx, const pd_world *w, uint32_t unit)
{
    const hop h[] = {
        { "plaza", PLAZA_START, { 9, 1 }, 1 },
        { "hall", { 1, 1 }, { 9, 5 }, 1 },
        { "vault", { 1, 1 }, VAULT_GOAL, -1 },
    };
    return way_cost(ctx, w, unit, h, 3);
}

static double via_tunnel(pd_search_ctx *ctx, const pd_world *w, uint32_t unit)
{
    const hop h[] = {
        { "plaza", PLAZA_START, { 1, 5 }, 1 },
        { "tunnel", { 1, 1 }, { 13, 1 }, 10 },
        { "vault", { 7, 5 }, VAULT_GOAL, -1 },
    };
    return way_cost(ctx, w, unit, h, 3);
}

static double via_gate(pd_search_ctx *ctx, const pd_world *w, uint32_t unit)
{
    const hop h[] = {
        { "plaza", PLAZA_START, { 9, 5 }, 40 },
        { "vault", { 4, 4 }, VAULT_GOAL, -1 },
    };
    return way_cost(ctx, w, unit, h, 2);
}

/* ---- config ------------------------------------------------------------ */

static void test_config_parses(void **state)
{
    (void)state;
    pd_conf_world cw;
    parse_world_file(WORLD_JSON, NULL, 0, &cw);
    assert_int_equal(cw.n_portals, 6);
    assert_int_equal(cw.n_routes, 1);
    const pd_conf_portal *ph = &cw.portals[0];
    assert_string_equal(ph->name, "plaza-hall");
    assert_string_equal(ph->a.scene, "plaza");
    assert_int_equal(ph->a.x, 9);
    assert_int_equal(ph->a.y, 1);
    assert_string_equal(ph->b.scene, "hall");
    assert_int_equal(ph->two_way, 1);
    assert_true(ph->cost == 1.0);
    assert_int_equal(ph->max_unit, 1);
    const pd_conf_portal *chute = &cw.portals[pd_conf_world_find_portal(&cw, "chute")];
    assert_int_equal(chute->two_way, 0);
    assert_true(chute->cost == 0.0);
    assert_int_equal(chute->max_unit, 0);
    assert_int_equal(pd_conf_world_find_portal(&cw, "nope"), -1);
    const pd_conf_route *r = &cw.routes[0];
    assert_string_equal(r->from, "tunnel");
    assert_string_equal(r->to, "hall");
    assert_int_equal(r->n_via, 2);
    assert_int_equal(r->via[0], pd_conf_world_find_portal(&cw, "tunnel-vault"));
    assert_int_equal(r->via[1], pd_conf_world_find_portal(&cw, "hall-vault"));
    pd_conf_world_free(&cw);
    pd_conf_world_free(&cw);

    /* Neither key: an empty world. */
    char err[256];
    assert_int_equal(pd_conf_world_parse_buffer("{\"scenes\": []}", 14, "t", NULL, 0, &cw, err,
                                                sizeof err), 0);
    assert_int_equal(cw.n_portals, 0);
    assert_int_equal(cw.n_routes, 0);
}

typedef struct bad_case {
    const char *portals_and_routes;   /* spliced after the scenes */
    const char *expect;               /* substring of the error: JSON path + reason */
} bad_case;

static void test_config_errors(void **state)
{
    (void)state;
    static const char *const scenes =
        "{\"scenes\": [{\"name\": \"a\"}, {\"name\": \"b\"}, {\"name\": \"c\"}], ";
#define P(name, sa, x1, y1, sb, x2, y2, extra)                                                    \
    "{\"name\": \"" name "\", \"a\": {\"scene\": \"" sa "\", \"cell\": [" #x1 ", " #y1 "]}, "    \
    "\"b\": {\"scene\": \"" sb "\", \"cell\": [" #x2 ", " #y2 "]}" extra "}"
    static const bad_case cases[] = {
        { "\"portals\": [" P("p", "a", 1, 1, "zz", 2, 2, "") "]",
          "$.portals[0].b.scene: unknown scene \"zz\"" },
        { "\"portals\": [" P("p", "a", 1, 1, "b", 2, 2, "") ", " P("p", "b", 3, 3, "c", 1, 1, "") "]",
          "$.portals[1].name: duplicate portal name \"p\"" },
        { "\"portals\": [" P("p", "a", -1, 1, "b", 2, 2, "") "]",
          "$.portals[0].a.cell[0]: must be in 0.." },
        { "\"portals\": [" P("p", "a", 1.5, 1, "b", 2, 2, "") "]",
          "$.portals[0].a.cell[0]: must be an integer" },
        { "\"portals\": [{\"name\": \"p\", \"a\": {\"scene\": \"a\", \"cell\": [1]}, "
          "\"b\": {\"scene\": \"b\", \"cell\": [1, 1]}}]",
          "$.portals[0].a.cell: must be an array [x, y]" },
        { "\"portals\": [" P("p", "a", 1, 1, "a", 1, 1, "") "]",
          "$.portals[0].b: is the same cell as a" },
        { "\"portals\": [" P("p", "a", 1, 1, "b", 2, 2, ", \"cost\": -0.5") "]",
          "$.portals[0].cost: must be >= 0" },
        { "\"portals\": [" P("p", "a", 1, 1, "b", 2, 2, ", \"cost\": \"free\"") "]",
          "$.portals[0].cost: must be a number" },
        { "\"portals\": [" P("p", "a", 1, 1, "b", 2, 2, ", \"max_unit\": 0") "]",
          "$.portals[0].max_unit: must be in 1..16" },
        { "\"portals\": [" P("p", "a", 1, 1, "b", 2, 2, ", \"two_way\": 1") "]",
          "$.portals[0].two_way: must be true or false" },
        { "\"portals\": [" P("p", "a", 1, 1, "b", 2, 2, ", \"colour\": 1") "]",
          "$.portals[0].colour: unknown key" },
        { "\"portals\": [{\"name\": \"p\", \"a\": {\"scene\": \"a\", \"cell\": [1, 1]}}]",
          "$.portals[0].b: is required" },
        { "\"portals\": [{\"name\": \"p q\", \"a\": {\"scene\": \"a\", \"cell\": [1, 1]}}]",
          "$.portals[0].name: may only contain" },
        { "\"portals\": {}", "$.portals: must be an array" },
        /* Routes: unknown portal, a chain that breaks, ends elsewhere, a one-way
         * portal against its direction, a second route for one pair. */
        { "\"portals\": [" P("ab", "a", 1, 1, "b", 2, 2, "") "], "
          "\"routes\": [{\"from\": \"a\", \"to\": \"b\", \"via\": [\"ab\", \"zz\"]}]",
          "$.routes[0].via[1]: unknown portal \"zz\"" },
        { "\"portals\": [" P("ab", "a", 1, 1, "b", 2, 2, "") ", " P("bc", "b", 3, 3, "c", 1, 1, "") "], "
          "\"routes\": [{\"from\": \"a\", \"to\": \"c\", \"via\": [\"bc\"]}]",
          "$.routes[0].via[0]: portal \"bc\" (b -> c, two-way) cannot be taken from scene \"a\"" },
        { "\"portals\": [" P("ab", "a", 1, 1, "b", 2, 2, "") "], "
          "\"routes\": [{\"from\": \"a\", \"to\": \"c\", \"via\": [\"ab\"]}]",
          "$.routes[0].via: ends in scene \"b\", not in \"c\"" },
        { "\"portals\": [" P("ab", "a", 1, 1, "b", 2, 2, ", \"two_way\": false") "], "
          "\"routes\": [{\"from\": \"b\", \"to\": \"a\", \"via\": [\"ab\"]}]",
          "$.routes[0].via[0]: portal \"ab\" (a -> b, one-way) cannot be taken from scene \"b\"" },
        { "\"portals\": [" P("ab", "a", 1, 1, "b", 2, 2, "") "], "
          "\"routes\": [{\"from\": \"a\", \"to\": \"b\", \"via\": [\"ab\"]}, "
          "{\"from\": \"a\", \"to\": \"b\", \"via\": [\"ab\"]}]",
          "$.routes[1]: a route from \"a\" to \"b\" is already pinned" },
        { "\"portals\": [" P("ab", "a", 1, 1, "b", 2, 2, "") "], "
          "\"routes\": [{\"from\": \"a\", \"to\": \"b\", \"via\": []}]",
          "$.routes[0].via: must list 1..32 portals" },
        { "\"routes\": [{\"from\": \"q\", \"to\": \"b\", \"via\": [\"ab\"]}]",
          "$.routes[0].from: unknown scene \"q\"" },
    };
#undef P
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char json[2048];
        snprintf(json, sizeof json, "%s%s}", scenes, cases[i].portals_and_routes);
        pd_conf_world cw;
        char err[512];
        int rc = pd_conf_world_parse_buffer(json, strlen(json), "bad.json", NULL, 0, &cw, err,
                                            sizeof err);
        if (rc != -1 || !strstr(err, cases[i].expect))
            fail_msg("case %zu: rc %d, error \"%s\", wanted \"%s\"", i, rc, err, cases[i].expect);
        assert_true(strncmp(err, "bad.json: ", 10) == 0);
        assert_null(cw.portals);
        assert_null(cw.routes);
    }
    /* A two-way portal may be taken backwards, and names can come from a
     * loaded config instead of the document. */
    static const char *const names[] = { "a", "b" };
    const char *ok = "{\"portals\": [{\"name\": \"ab\", \"a\": {\"scene\": \"a\", \"cell\": [1, 1]},"
                     " \"b\": {\"scene\": \"b\", \"cell\": [2, 2]}}],"
                     " \"routes\": [{\"from\": \"b\", \"to\": \"a\", \"via\": [\"ab\"]}]}";
    pd_conf_world cw;
    char err[256];
    assert_int_equal(pd_conf_world_parse_buffer(ok, strlen(ok), "ok", names, 2, &cw, err, sizeof err),
                     0);
    pd_conf_world_free(&cw);
    assert_int_equal(pd_conf_world_parse_buffer(ok, strlen(ok), "ok", names, 1, &cw, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "$.portals[0].b.scene: unknown scene \"b\""));
    assert_int_equal(pd_conf_world_parse_buffer("{", 1, "x", NULL, 0, &cw, err, sizeof err), -1);
}

static void test_build_errors(void **state)
{
    (void)state;
    pd_registry *r = load_test_registry();
    pd_conf_world cw;
    parse_world_file(WORLD_JSON, NULL, 0, &cw);
    char err[256];
    /* A cell the config accepts but the map is too small for. */
    cw.portals[0].a.x = 12;
    assert_null(pd_world_build_from_registry(&cw, r, err, sizeof err));
    assert_non_null(strstr(err, "portal 'plaza-hall': cell 12,1 is outside scene 'plaza' (12x8)"));
    cw.portals[0].a.x = 9;
    /* A scene the registry does not serve. */
    pd_scene *only = pd_registry_acquire(r, "plaza");
    assert_null(pd_world_build(&cw, &only, 1, err, sizeof err));
    assert_non_null(strstr(err, "unknown scene 'hall'"));
    pd_scene *twice[2] = { only, only };
    assert_null(pd_world_build(NULL, twice, 2, err, sizeof err));
    assert_non_null(strstr(err, "given twice"));
    pd_scene_release(only);
    pd_conf_world_free(&cw);
    pd_registry_destroy(r);
}

/* ---- planning ---------------------------------------------------------- */

static void test_best_route_through_intermediate(void **state)
{
    (void)state;
    pd_registry *r = load_test_registry();
    pd_conf_world cw;
    parse_world_file(WORLD_JSON, NULL, 0, &cw);
    pd_world *w = build_world(r, &cw);
    pd_search_ctx *ctx = pd_search_ctx_create();

    pd_world_stats st;
    pd_world_get_stats(w, &st);
    assert_int_equal(st.n_scenes, 4);
    assert_int_equal(st.n_portals, 6);
    assert_int_equal(st.n_routes, 1);
    assert_true(st.table_entries > 0);

    double hall = via_hall(ctx, w, 1), tunnel = via_tunnel(ctx, w, 1), gate = via_gate(ctx, w, 1);
    /* The fixture is meant to make the intermediate scene the best way. */
    assert_true(hall < tunnel && hall < gate);

    pd_world_route rt;
    assert_int_equal(plan(w, ctx, "plaza", PLAZA_START, "vault", VAULT_GOAL, 1, &rt), PD_OK);
    char names[128];
    route_scenes(&rt, names, sizeof names);
    assert_string_equal(names, "plaza>hall>vault");
    assert_string_equal(rt.legs[0].portal, "plaza-hall");
    assert_string_equal(rt.legs[1].portal, "hall-vault");
    assert_int_equal(rt.pinned, 0);
    assert_true(fabs(rt.total_cost - hall) < 1e-9);
    assert_int_equal(rt.legs[0].from.x, PLAZA_START.x);
    assert_int_equal(rt.legs[2].to.x, VAULT_GOAL.x);
    assert_int_equal(rt.legs[2].to.y, VAULT_GOAL.y);
    /* Start and goal legs: one search per usable endpoint of plaza and vault. */
    assert_true(rt.searches > 0);
    check_route(ctx, &rt, 1);
    pd_world_route_free(&rt);
    pd_world_route_free(&rt);

    /* Same scene: the direct walk is one leg, priced like A*. */
    assert_int_equal(plan(w, ctx, "plaza", PLAZA_START, "plaza", (pd_point){ 9, 6 }, 1, &rt), PD_OK);
    assert_int_equal(rt.n_legs, 1);
    assert_true(fabs(rt.total_cost - walk_cost(ctx, w, "plaza", 1, PLAZA_START, (pd_point){ 9, 6 })) <
                1e-9);
    check_route(ctx, &rt, 1);
    pd_world_route_free(&rt);

    pd_search_ctx_destroy(ctx);
    pd_world_release(w);
    pd_conf_world_free(&cw);
    pd_registry_destroy(r);
}

static void test_one_way_portal_changes_answer(void **state)
{
    (void)state;
    pd_registry *r = load_test_registry();
    pd_conf_world cw;
    parse_world_file(WORLD_JSON, NULL, 0, &cw);
    pd_world *w = build_world(r, &cw);
    pd_search_ctx *ctx = pd_search_ctx_create();

    /* Down the chute: vault -> plaza takes it... */
    pd_world_route back;
    assert_int_equal(plan(w, ctx, "vault", VAULT_GOAL, "plaza", PLAZA_START, 1, &back), PD_OK);
    assert_int_equal(back.n_legs, 2);
    assert_string_equal(back.legs[0].portal, "chute");
    const hop h[] = { { "vault", VAULT_GOAL, { 4, 6 }, 0 }, { "plaza", { 5, 3 }, PLAZA_START, -1 } };
    assert_true(fabs(back.total_cost - way_cost(ctx, w, 1, h, 2)) < 1e-9);
    check_route(ctx, &back, 1);
    /* ...but it cannot be climbed: plaza -> vault never uses it. */
    pd_world_route there;
    assert_int_equal(plan(w, ctx, "plaza", PLAZA_START, "vault", VAULT_GOAL, 1, &there), PD_OK);
    assert_false(route_uses(&there, "chute"));
    assert_true(there.total_cost > back.total_cost);

    /* Without the chute, the way back is the way there, reversed. */
    pd_conf_world no_chute = cw;
    no_chute.n_portals = cw.n_portals - 1;   /* the chute is the last portal */
    assert_string_equal(cw.portals[cw.n_portals - 1].name, "chute");
    pd_world *w2 = build_world(r, &no_chute);
    pd_world_route back2;
    assert_int_equal(plan(w2, ctx, "vault", VAULT_GOAL, "plaza", PLAZA_START, 1, &back2), PD_OK);
    assert_false(route_uses(&back2, "chute"));
    assert_true(back2.total_cost > back.total_cost);
    char names[128];
    route_scenes(&back2, names, sizeof names);
    assert_string_equal(names, "vault>hall>plaza");
    check_route(ctx, &back2, 1);

    pd_world_route_free(&back);
    pd_world_route_free(&there);
    pd_world_route_free(&back2);
    pd_world_release(w2);
    pd_search_ctx_destroy(ctx);
    pd_world_release(w);
    pd_conf_world_free(&cw);
    pd_registry_destroy(r);
}

static pd_status set_door(pd_registry *r, pd_update_op op)
{
    pd_scene_update u = { .op = op, .is_rect = 1, .rect_min = { 5, 3 }, .rect_max = { 5, 4 } };
    pd_scene_update_result res;
    return pd_registry_update(r, "hall", &u, &res);
}

static void test_blocked_door_reroutes(void **state)
{
    (void)state;
    pd_registry *r = load_test_registry();
    pd_conf_world cw;
    parse_world_file(WORLD_JSON, NULL, 0, &cw);
    pd_world_store *store = pd_world_store_create();
    char err[256];
    assert_null(pd_world_store_acquire(store));
    assert_int_equal(pd_world_store_rebuild(store, &cw, r, err, sizeof err), 0);
    pd_search_ctx *ctx = pd_search_ctx_create();

    pd_world *before = pd_world_store_acquire(store);
    /* Refreshing an unchanged scene publishes nothing. */
    assert_int_equal(pd_world_store_refresh(store, r, "hall", err, sizeof err), PD_OK);
    pd_world *same = pd_world_store_acquire(store);
    assert_ptr_equal(same, before);
    pd_world_release(same);
    assert_int_equal(pd_world_store_refresh(store, r, "nowhere", err, sizeof err), PD_UNKNOWN_SCENE);

    assert_int_equal(set_door(r, PD_UPDATE_BLOCK), PD_OK);
    assert_int_equal(pd_world_store_refresh(store, r, "hall", err, sizeof err), PD_OK);
    pd_world *after = pd_world_store_acquire(store);
    assert_ptr_not_equal(after, before);
    pd_world_stats st;
    pd_world_get_stats(after, &st);
    /* Only the hall's table was recomputed: its two endpoints, two units. */
    assert_int_equal(st.table_entries, 2 * 2 * 2);

    pd_world_route rt;
    assert_int_equal(plan(after, ctx, "plaza", PLAZA_START, "vault", VAULT_GOAL, 1, &rt), PD_OK);
    char names[128];
    route_scenes(&rt, names, sizeof names);
    assert_string_equal(names, "plaza>tunnel>vault");
    assert_true(fabs(rt.total_cost - via_tunnel(ctx, after, 1)) < 1e-9);
    check_route(ctx, &rt, 1);
    pd_world_route_free(&rt);

    /* Inside the hall, the far side is now only reachable around the world. */
    assert_int_equal(plan(after, ctx, "hall", (pd_point){ 1, 1 }, "hall", (pd_point){ 9, 5 }, 1, &rt),
                     PD_OK);
    route_scenes(&rt, names, sizeof names);
    assert_string_equal(names, "hall>plaza>tunnel>vault>hall");
    check_route(ctx, &rt, 1);
    pd_world_route_free(&rt);

    /* A planner that still holds the old world keeps its answer. */
    assert_int_equal(plan(before, ctx, "plaza", PLAZA_START, "vault", VAULT_GOAL, 1, &rt), PD_OK);
    route_scenes(&rt, names, sizeof names);
    assert_string_equal(names, "plaza>hall>vault");
    pd_world_route_free(&rt);

    /* Opening the door again brings the hall route back. */
    assert_int_equal(set_door(r, PD_UPDATE_PASS), PD_OK);
    assert_int_equal(pd_world_store_refresh(store, r, "hall", err, sizeof err), PD_OK);
    pd_world *reopened = pd_world_store_acquire(store);
    assert_int_equal(plan(reopened, ctx, "plaza", PLAZA_START, "vault", VAULT_GOAL, 1, &rt), PD_OK);
    route_scenes(&rt, names, sizeof names);
    assert_string_equal(names, "plaza>hall>vault");
    pd_world_route_free(&rt);

    pd_world_release(reopened);
    pd_world_release(after);
    pd_world_release(before);
    pd_search_ctx_destroy(ctx);
    pd_world_store_destroy(store);
    pd_conf_world_free(&cw);
    pd_registry_destroy(r);
}

/* A reload's world in two halves: built over a prepared set without
 * touching the store or the registry, then published together with the set;
 * a world that does not fit the set is refused and the old one stays. */
static void test_reload_build_publish_discard(void **state)
{
    (void)state;
    pd_registry *r = load_test_registry();
    pd_conf_world cw;
    parse_world_file(WORLD_JSON, NULL, 0, &cw);
    pd_world_store *store = pd_world_store_create();
    char err[256];
    assert_int_equal(pd_world_store_rebuild(store, &cw, r, err, sizeof err), 0);
    pd_world *old = pd_world_store_acquire(store);
    pd_scene *old_hall = pd_registry_acquire(r, "hall");
    assert_ptr_equal(pd_world_scene(old, "hall"), old_hall);

    pd_scene_set *set = prepare_test_set();
    size_t n_set = 0;
    assert_non_null(pd_scene_set_scenes(set, &n_set));
    assert_int_equal(n_set, 4);
    pd_scene *new_hall = set_scene(set, "hall");
    assert_non_null(new_hall);
    assert_ptr_not_equal(new_hall, old_hall);

    /* Discarding an unpublished world gives back its scene references. */
    uint_fast32_t refs = atomic_load(&new_hall->refs);
    pd_world *dropped = pd_world_build_from_set(&cw, set, NULL, err, sizeof err);
    assert_non_null(dropped);
    assert_true(atomic_load(&new_hall->refs) > refs);
    pd_world_release(dropped);
    assert_int_equal(atomic_load(&new_hall->refs), refs);

    /* Built over the set, and invisible: planners and the registry still
     * see the old snapshots. */
    pd_world *built = pd_world_build_from_set(&cw, set, NULL, err, sizeof err);
    if (!built)
        fail_msg("%s", err);
    assert_ptr_equal(pd_world_scene(built, "hall"), new_hall);
    pd_world *still = pd_world_store_acquire(store);
    assert_ptr_equal(still, old);
    pd_world_release(still);
    pd_scene *served = pd_registry_acquire(r, "hall");
    assert_ptr_equal(served, old_hall);
    pd_scene_release(served);

    /* Published: the set's scenes and the world built on them, together. */
    pd_world_store_publish_reload(store, r, set, built);
    pd_world *now = pd_world_store_acquire(store);
    assert_ptr_equal(now, built);
    served = pd_registry_acquire(r, "hall");
    assert_ptr_equal(served, new_hall);
    assert_int_equal(served->version, old_hall->version + 1);
    pd_scene_release(served);
    pd_search_ctx *ctx = pd_search_ctx_create();
    pd_world_route rt;
    assert_int_equal(plan(now, ctx, "plaza", PLAZA_START, "vault", VAULT_GOAL, 1, &rt), PD_OK);
    assert_true(fabs(rt.total_cost - via_hall(ctx, now, 1)) < 1e-9);
    pd_world_route_free(&rt);

    /* A reload whose portals do not fit its maps: the build is refused with
     * the reason, the scenes are published anyway, the old world stays. */
    pd_scene_set *next = prepare_test_set();
    pd_scene *next_hall = set_scene(next, "hall");
    cw.portals[0].a.x = 12;
    assert_null(pd_world_build_from_set(&cw, next, NULL, err, sizeof err));
    assert_non_null(strstr(err, "portal 'plaza-hall': cell 12,1 is outside scene 'plaza' (12x8)"));
    cw.portals[0].a.x = 9;
    pd_world_store_publish_reload(store, r, next, NULL);
    served = pd_registry_acquire(r, "hall");
    assert_ptr_equal(served, next_hall);
    pd_scene_release(served);
    still = pd_world_store_acquire(store);
    assert_ptr_equal(still, now);
    assert_int_equal(plan(still, ctx, "plaza", PLAZA_START, "vault", VAULT_GOAL, 1, &rt), PD_OK);
    pd_world_route_free(&rt);
    pd_world_release(still);

    /* The world keeps up with updates to the scenes it was built on. */
    assert_int_equal(set_door(r, PD_UPDATE_BLOCK), PD_OK);
    assert_int_equal(pd_world_store_refresh(store, r, "hall", err, sizeof err), PD_OK);
    pd_world *shut = pd_world_store_acquire(store);
    served = pd_registry_acquire(r, "hall");
    assert_ptr_equal(pd_world_scene(shut, "hall"), served);
    pd_scene_release(served);
    pd_world_release(shut);

    assert_null(pd_world_build_from_set(&cw, NULL, NULL, err, sizeof err));
    assert_non_null(strstr(err, "no scene set"));

    pd_search_ctx_destroy(ctx);
    pd_world_release(now);
    pd_scene_release(old_hall);
    pd_world_release(old);
    pd_world_store_destroy(store);
    pd_conf_world_free(&cw);
    pd_registry_destroy(r);
}

static void test_pinned_route_is_honoured(void **state)
{
    (void)state;
    pd_registry *r = load_test_registry();
    pd_conf_world cw;
    parse_world_file(WORLD_JSON, NULL, 0, &cw);
    pd_world *w = build_world(r, &cw);
    pd_conf_world unpinned = cw;
    unpinned.n_routes = 0;
    pd_world *free_w = build_world(r, &unpinned);
    pd_search_ctx *ctx = pd_search_ctx_create();
    const pd_point s = { 2, 1 }, g = { 8, 2 };

    pd_world_route free_rt, pinned_rt;
    assert_int_equal(plan(free_w, ctx, "tunnel", s, "hall", g, 1, &free_rt), PD_OK);
    assert_int_equal(free_rt.pinned, 0);
    char names[128];
    route_scenes(&free_rt, names, sizeof names);
    assert_string_equal(names, "tunnel>plaza>hall");

    assert_int_equal(plan(w, ctx, "tunnel", s, "hall", g, 1, &pinned_rt), PD_OK);
    assert_int_equal(pinned_rt.pinned, 1);
    route_scenes(&pinned_rt, names, sizeof names);
    assert_string_equal(names, "tunnel>vault>hall");
    assert_string_equal(pinned_rt.legs[0].portal, "tunnel-vault");
    assert_string_equal(pinned_rt.legs[1].portal, "hall-vault");
    /* hall-vault is taken backwards (vault -> hall): inferred from the chain. */
    assert_int_equal(pinned_rt.legs[1].portal_exit.x, 1);
    assert_int_equal(pinned_rt.legs[1].portal_entry.x, 9);
    assert_true(pinned_rt.total_cost > free_rt.total_cost);
    const hop h[] = {
        { "tunnel", s, { 13, 1 }, 10 }, { "vault", { 7, 5 }, { 1, 1 }, 1 }, { "hall", { 9, 5 }, g, -1 },
    };
    assert_true(fabs(pinned_rt.total_cost - way_cost(ctx, w, 1, h, 3)) < 1e-9);
    check_route(ctx, &pinned_rt, 1);
    pd_world_route_free(&free_rt);
    pd_world_route_free(&pinned_rt);

    /* Close the pinned way (block the hall end of hall-vault): NO_PATH, even
     * though the free route is still open. */
    pd_scene *hall = pd_registry_acquire(r, "hall");
    pd_scene_update u = { .op = PD_UPDATE_BLOCK, .is_rect = 1, .rect_min = { 9, 5 },
                          .rect_max = { 9, 5 } };
    pd_scene *blocked = NULL;
    assert_int_equal(pd_scene_apply_update(hall, &u, &blocked, NULL), PD_OK);
    pd_world *w_blocked = NULL;
    char err[256];
    assert_int_equal(pd_world_refresh_scene(w, blocked, &w_blocked, err, sizeof err), PD_OK);
    assert_ptr_equal(pd_world_scene(w_blocked, "hall"), blocked);
    assert_int_equal(plan(w_blocked, ctx, "tunnel", s, "hall", g, 1, &pinned_rt), PD_NO_PATH);
    assert_int_equal(pinned_rt.n_legs, 0);
    pd_world *free_blocked = NULL;
    assert_int_equal(pd_world_refresh_scene(free_w, blocked, &free_blocked, err, sizeof err), PD_OK);
    assert_int_equal(plan(free_blocked, ctx, "tunnel", s, "hall", g, 1, &free_rt), PD_OK);
    pd_world_route_free(&free_rt);

    pd_world_release(free_blocked);
    pd_world_release(w_blocked);
    pd_scene_release(blocked);
    pd_scene_release(hall);
    pd_search_ctx_destroy(ctx);
    pd_world_release(free_w);
    pd_world_release(w);
    pd_conf_world_free(&cw);
    pd_registry_destroy(r);
}

static void test_max_unit_excludes_portal(void **state)
{
    (void)state;
    pd_registry *r = load_test_registry();
    pd_conf_world cw;
    parse_world_file(WORLD_JSON, NULL, 0, &cw);
    pd_world *w = build_world(r, &cw);
    pd_search_ctx *ctx = pd_search_ctx_create();

    pd_world_route one, two;
    assert_int_equal(plan(w, ctx, "plaza", PLAZA_START, "vault", VAULT_GOAL, 1, &one), PD_OK);
    assert_true(route_uses(&one, "plaza-hall"));
    assert_int_equal(plan(w, ctx, "plaza", PLAZA_START, "vault", VAULT_GOAL, 2, &two), PD_OK);
    assert_false(route_uses(&two, "plaza-hall"));
    char names[128];
    route_scenes(&two, names, sizeof names);
    assert_string_equal(names, "plaza>tunnel>vault");
    double tunnel2 = via_tunnel(ctx, w, 2), gate2 = via_gate(ctx, w, 2);
    assert_true(fabs(two.total_cost - fmin(tunnel2, gate2)) < 1e-9);
    check_route(ctx, &two, 2);
    pd_world_route_free(&one);
    pd_world_route_free(&two);

    pd_search_ctx_destroy(ctx);
    pd_world_release(w);
    pd_conf_world_free(&cw);
    pd_registry_destroy(r);
}

static void test_plan_errors(void **state)
{
    (void)state;
    pd_registry *r = load_test_registry();
    pd_conf_world cw;
    parse_world_file(WORLD_JSON, NULL, 0, &cw);
    pd_world *w = build_world(r, &cw);
    pd_world *bare = build_world(r, NULL);
    pd_search_ctx *ctx = pd_search_ctx_create();
    pd_world_route rt;
    const pd_point in = { 2, 2 };

    assert_int_equal(plan(w, ctx, "moon", in, "vault", in, 1, &rt), PD_UNKNOWN_SCENE);
    assert_int_equal(plan(w, ctx, "plaza", in, "moon", in, 1, &rt), PD_UNKNOWN_SCENE);
    assert_int_equal(plan(w, ctx, "plaza", in, "vault", in, 3, &rt), PD_INVALID_ARGUMENT);
    assert_int_equal(plan(w, ctx, "plaza", (pd_point){ 12, 0 }, "vault", in, 1, &rt), PD_OUT_OF_BOUNDS);
    assert_int_equal(plan(w, ctx, "plaza", in, "vault", (pd_point){ -1, 3 }, 1, &rt), PD_OUT_OF_BOUNDS);
    assert_int_equal(plan(w, ctx, "plaza", (pd_point){ 0, 0 }, "vault", in, 1, &rt), PD_START_BLOCKED);
    assert_int_equal(plan(w, ctx, "plaza", in, "vault", (pd_point){ 9, 3 }, 1, &rt), PD_GOAL_BLOCKED);
    /* Unit 2 does not fit at x=10 (the wall is at 11). */
    assert_int_equal(plan(w, ctx, "plaza", (pd_point){ 10, 2 }, "vault", in, 2, &rt),
                     PD_START_BLOCKED);
    assert_int_equal(rt.n_legs, 0);
    assert_null(rt.legs);
    pd_world_query q = { .from_scene = "plaza", .to_scene = "vault", .start = in, .goal = in };
    assert_int_equal(pd_world_plan(NULL, ctx, &q, &rt), PD_INVALID_ARGUMENT);
    assert_int_equal(pd_world_plan(w, NULL, &q, &rt), PD_INVALID_ARGUMENT);
    assert_int_equal(pd_world_plan(w, ctx, NULL, &rt), PD_INVALID_ARGUMENT);
    assert_int_equal(pd_world_plan(w, ctx, &q, NULL), PD_INVALID_ARGUMENT);
    /* No portals: other scenes are out of reach, the same scene is not. */
    assert_int_equal(plan(bare, ctx, "plaza", in, "vault", in, 1, &rt), PD_NO_PATH);
    assert_int_equal(plan(bare, ctx, "plaza", in, "plaza", (pd_point){ 5, 5 }, 1, &rt), PD_OK);
    pd_world_route_free(&rt);

    assert_int_equal(pd_world_scene_count(w), 4);
    assert_string_equal(pd_world_scene_at(w, 0)->name, "hall");
    assert_null(pd_world_scene_at(w, 4));
    assert_null(pd_world_scene(w, "moon"));
    pd_world_release(NULL);

    pd_search_ctx_destroy(ctx);
    pd_world_release(bare);
    pd_world_release(w);
    pd_conf_world_free(&cw);
    pd_registry_destroy(r);
}

static int has_point(const pd_point *pts, size_t n, pd_point p)
{
    for (size_t i = 0; i < n; i++) {
        if (pts[i].x == p.x && pts[i].y == p.y)
            return 1;
    }
    return 0;
}

static void test_arrivals(void **state)
{
    (void)state;
    pd_registry *r = load_test_registry();
    pd_conf_world cw;
    parse_world_file(WORLD_JSON, NULL, 0, &cw);
    pd_world *w = build_world(r, &cw);
    pd_search_ctx *ctx = pd_search_ctx_create();
    pd_point pts[8];
    size_t n;

    /* Into the vault: through hall-vault, tunnel-vault and the gate, and on
     * foot from there to the chute's top. The goal is ignored (it is blocked
     * here). */
    pd_world_query q = { .from_scene = "plaza", .start = PLAZA_START, .to_scene = "vault",
                         .goal = { 0, 0 }, .unit_size = 1 };
    assert_int_equal(pd_world_arrivals(w, ctx, &q, pts, 8, &n), PD_OK);
    assert_int_equal(n, 4);
    assert_true(has_point(pts, n, (pd_point){ 1, 1 }));
    assert_true(has_point(pts, n, (pd_point){ 7, 5 }));
    assert_true(has_point(pts, n, (pd_point){ 4, 4 }));
    assert_true(has_point(pts, n, (pd_point){ 4, 6 }));
    /* The count is exact even when the buffer is short. */
    assert_int_equal(pd_world_arrivals(w, ctx, &q, pts, 1, &n), PD_OK);
    assert_int_equal(n, 4);
    /* Without portals: the start itself in its own scene, nothing elsewhere. */
    pd_world *bare = build_world(r, NULL);
    pd_world_query same = { .from_scene = "hall", .start = { 1, 1 }, .to_scene = "hall",
                            .unit_size = 1 };
    assert_int_equal(pd_world_arrivals(bare, ctx, &same, pts, 8, &n), PD_OK);
    assert_int_equal(n, 1);
    assert_int_equal(pts[0].x, 1);
    assert_int_equal(pd_world_arrivals(bare, ctx, &q, pts, 8, &n), PD_OK);
    assert_int_equal(n, 0);
    pd_world_release(bare);
    /* A pinned route arrives through its last portal only. */
    pd_world_query pq = { .from_scene = "tunnel", .start = { 2, 1 }, .to_scene = "hall",
                          .unit_size = 1 };
    assert_int_equal(pd_world_arrivals(w, ctx, &pq, pts, 8, &n), PD_OK);
    assert_int_equal(n, 1);
    assert_int_equal(pts[0].x, 9);
    assert_int_equal(pts[0].y, 5);
    q.start = (pd_point){ 0, 0 };
    assert_int_equal(pd_world_arrivals(w, ctx, &q, pts, 8, &n), PD_START_BLOCKED);

    pd_search_ctx_destroy(ctx);
    pd_world_release(w);
    pd_conf_world_free(&cw);
    pd_registry_destroy(r);
}

/* ---- threads ----------------------------------------------------------- */

typedef struct reader_arg {
    pd_world_store *store;
    double hall_cost, tunnel_cost;
    int bad;
} reader_arg;

static void *reader(void *p)
{
    reader_arg *a = p;
    pd_search_ctx *ctx = pd_search_ctx_create();
    for (int i = 0; i < WORLD_READER_PLANS; i++) {
        pd_world *w = pd_world_store_acquire(a->store);
        pd_world_route rt;
        pd_world_query q = { .from_scene = "plaza", .start = PLAZA_START, .to_scene = "vault",
                             .goal = VAULT_GOAL, .unit_size = 1 };
        pd_status st = pd_world_plan(w, ctx, &q, &rt);
        /* Every snapshot is consistent: the door is either open or shut. */
        if (st != PD_OK || (fabs(rt.total_cost - a->hall_cost) > 1e-9 &&
                            fabs(rt.total_cost - a->tunnel_cost) > 1e-9))
            a->bad++;
        pd_world_route_free(&rt);
        pd_world_release(w);
    }
    pd_search_ctx_destroy(ctx);
    return NULL;
}

static void test_plans_during_refresh(void **state)
{
    (void)state;
    pd_registry *r = load_test_registry();
    pd_conf_world cw;
    parse_world_file(WORLD_JSON, NULL, 0, &cw);
    pd_world_store *store = pd_world_store_create();
    char err[256];
    assert_int_equal(pd_world_store_rebuild(store, &cw, r, err, sizeof err), 0);
    pd_search_ctx *ctx = pd_search_ctx_create();
    pd_world *w = pd_world_store_acquire(store);
    reader_arg arg = { .store = store, .hall_cost = via_hall(ctx, w, 1),
                       .tunnel_cost = via_tunnel(ctx, w, 1) };
    pd_world_release(w);

    pthread_t th[2];
    reader_arg args[2] = { arg, arg };
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, reader, &args[i]), 0);
    for (int i = 0; i < WORLD_TOGGLES; i++) {
        assert_int_equal(set_door(r, i % 2 ? PD_UPDATE_PASS : PD_UPDATE_BLOCK), PD_OK);
        assert_int_equal(pd_world_store_refresh(store, r, "hall", err, sizeof err), PD_OK);
        if (i % 5 == 0)
            assert_int_equal(pd_world_store_rebuild(store, &cw, r, err, sizeof err), 0);
    }
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(args[i].bad, 0);
    }
    pd_search_ctx_destroy(ctx);
    pd_world_store_destroy(store);
    pd_conf_world_free(&cw);
    pd_registry_destroy(r);
}

typedef struct updater_arg {
    pd_registry *registry;
    pd_world_store *store;
    atomic_int go;               /* set just before the reload publishes */
    pd_update_op op;
    int bad;
} updater_arg;

/* One UpdateCells as a worker runs it, started as a reload publishes:
 * update the registry, then refresh the world's tables for that scene. */
static void *updater(void *p)
{
    updater_arg *a = p;
    char err[256];
    while (!atomic_load(&a->go))
        sched_yield();
    if (set_door(a->registry, a->op) != PD_OK ||
        pd_world_store_refresh(a->store, a->registry, "hall", err, sizeof err) != PD_OK)
        a->bad++;
    return NULL;
}

/* Reloads published while an update refreshes the tables: however they
 * interleave, the world ends up holding the very snapshots the registry
 * serves (an update between a reload's scene swap and its world swap must
 * not leave the world on the reloaded, not yet updated, hall). */
static void test_updates_during_reloads(void **state)
{
    (void)state;
    pd_registry *r = load_test_registry();
    pd_conf_world cw;
    parse_world_file(WORLD_JSON, NULL, 0, &cw);
    pd_world_store *store = pd_world_store_create();
    char err[256];
    assert_int_equal(pd_world_store_rebuild(store, &cw, r, err, sizeof err), 0);

    for (int i = 0; i < WORLD_RELOADS; i++) {
        updater_arg arg = { .registry = r, .store = store,
                            .op = i % 2 ? PD_UPDATE_PASS : PD_UPDATE_BLOCK };
        atomic_init(&arg.go, 0);
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, updater, &arg), 0);
        pd_scene_set *set = prepare_test_set();
        pd_world *built = pd_world_build_from_set(&cw, set, NULL, err, sizeof err);
        if (!built)
            fail_msg("%s", err);
        atomic_store(&arg.go, 1);
        pd_world_store_publish_reload(store, r, set, built);
        assert_int_equal(pthread_join(th, NULL), 0);
        assert_int_equal(arg.bad, 0);

        pd_world *w = pd_world_store_acquire(store);
        assert_int_equal(pd_world_scene_count(w), 4);
        for (size_t k = 0; k < pd_world_scene_count(w); k++) {
            const pd_scene *held = pd_world_scene_at(w, k);
            pd_scene *served = pd_registry_acquire(r, held->name);
            if (served != held)
                fail_msg("reload %d, scene '%s': the world holds version %llu, the registry serves %llu",
                         i, held->name, (unsigned long long)held->version,
                         (unsigned long long)(served ? served->version : 0));
            pd_scene_release(served);
        }
        pd_world_release(w);
    }
    pd_world_store_destroy(store);
    pd_conf_world_free(&cw);
    pd_registry_destroy(r);
}

/* ---- the demo world ---------------------------------------------------- */

static void test_demo_world(void **state)
{
    (void)state;
    pd_conf conf;
    char err[512];
    if (pd_conf_load_file(DEMO_CONFIG, &conf, err, sizeof err) != 0)
        fail_msg("%s", err);
    /* The demo config carries its portals and routes itself. */
    const pd_conf_world cw = conf.world;
    pd_registry *r = pd_registry_create();
    if (pd_registry_load(r, &conf, err, sizeof err) != 0)
        fail_msg("%s", err);
    pd_world_store *store = pd_world_store_create();
    assert_int_equal(pd_world_store_rebuild(store, &cw, r, err, sizeof err), 0);
    pd_world *w = pd_world_store_acquire(store);
    pd_search_ctx *ctx = pd_search_ctx_create();
    const pd_point smithy = { 3, 4 }, stairs_foot = { 10, 2 };
    char route[128];

    /* town:3,4 -> cellar:10,2 goes through the house (an intermediate scene). */
    pd_world_route rt;
    assert_int_equal(plan(w, ctx, "town", smithy, "cellar", stairs_foot, 1, &rt), PD_OK);
    route_scenes(&rt, route, sizeof route);
    assert_string_equal(route, "town>house>cellar");
    check_route(ctx, &rt, 1);
    double through_house = rt.total_cost;
    pd_world_route_free(&rt);

    /* The well is one-way: it takes the cellar up to town, never down. */
    assert_int_equal(plan(w, ctx, "cellar", stairs_foot, "town", smithy, 1, &rt), PD_OK);
    assert_true(route_uses(&rt, "cellar-well"));
    route_scenes(&rt, route, sizeof route);
    assert_string_equal(route, "cellar>town");
    check_route(ctx, &rt, 1);
    pd_world_route_free(&rt);

    /* The pinned house -> town route goes down the stairs and up the well. */
    assert_int_equal(plan(w, ctx, "house", (pd_point){ 5, 7 }, "town", smithy, 1, &rt), PD_OK);
    assert_int_equal(rt.pinned, 1);
    route_scenes(&rt, route, sizeof route);
    assert_string_equal(route, "house>cellar>town");
    pd_world_route_free(&rt);

    /* Shut the inn's door (UpdateCells on town): the forest way takes over. */
    pd_scene_update u = { .op = PD_UPDATE_BLOCK, .is_rect = 1, .rect_min = { 11, 6 },
                          .rect_max = { 11, 6 } };
    pd_scene_update_result res;
    assert_int_equal(pd_registry_update(r, "town", &u, &res), PD_OK);
    assert_int_equal(pd_world_store_refresh(store, r, "town", err, sizeof err), PD_OK);
    pd_world *shut = pd_world_store_acquire(store);
    assert_int_equal(plan(shut, ctx, "town", smithy, "cellar", stairs_foot, 1, &rt), PD_OK);
    route_scenes(&rt, route, sizeof route);
    assert_string_equal(route, "town>forest>cellar");
    assert_true(rt.total_cost > through_house);
    check_route(ctx, &rt, 1);
    pd_world_route_free(&rt);

    pd_world_release(shut);
    pd_search_ctx_destroy(ctx);
    pd_world_release(w);
    pd_world_store_destroy(store);
    pd_registry_destroy(r);
    pd_conf_free(&conf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_parses),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_build_errors),
        cmocka_unit_test(test_best_route_through_intermediate),
        cmocka_unit_test(test_one_way_portal_changes_answer),
        cmocka_unit_test(test_blocked_door_reroutes),
        cmocka_unit_test(test_reload_build_publish_discard),
        cmocka_unit_test(test_pinned_route_is_honoured),
        cmocka_unit_test(test_max_unit_excludes_portal),
        cmocka_unit_test(test_plan_errors),
        cmocka_unit_test(test_arrivals),
        cmocka_unit_test(test_plans_during_refresh),
        cmocka_unit_test(test_updates_during_reloads),
        cmocka_unit_test(test_demo_world),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
