/*
 * fuzz_find_path.c - libFuzzer target for a FindPath from the wire to the
 * answer: the codec decodes the payload, the query layer checks it against a
 * small scene (pd_query_path_prepare) and runs the path pipeline
 * (pd_query_find_path), and the codec encodes the answer - what the server
 * does with it, minus threads and sockets. Finding 1 of issue 10 (a window
 * whose max was INT32_MAX overflowed in the search) lived on this road.
 *
 * Input: one Request payload, without the 4-byte length prefix. Scenes:
 * "units" (tests/data/e2e4_units.txt, uniform, units 1..3) and "terrain"
 * (e2e4_terrain.txt, weighted, units 1..2, origin (-10, -5), cell size 0.5,
 * so world points take arithmetic).
 *
 * What is checked besides the sanitizers:
 *  - the core search given the decoded window as it came off the wire (up
 *    to INT32_MAX) answers exactly as with the window prepare clipped;
 *  - a path obeys the movement rules on the unit grid (path_rules.h), costs
 *    what metrics.cost says, starts and ends where the answer says (for a
 *    range or goals: on a cell that qualifies for the goal it names), and
 *    enters neither an avoid cell nor a cell outside the window;
 *  - with no budget, jump point search and A* agree on status and cost.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "path_rules.h"
#include "pd_codec.h"
#include "pd_query.h"
#include "pd_targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static pd_scene *fuzz_scenes[2];
static pd_query_scratch *fuzz_scratch;
static pd_search_ctx *fuzz_ctx;
static pd_point *fuzz_path[2];
static size_t fuzz_path_cap;

static pd_scene *fuzz_load(const char *name, const char *file, uint32_t max_unit, double ox, double oy,
                           double cell_size)
{
    pd_conf_scene cs;
    memset(&cs, 0, sizeof cs);
    snprintf(cs.name, sizeof cs.name, "%s", name);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", PD_TEST_DATA_DIR, file);
    cs.map_path = path;
    cs.format = PD_MAP_ASCII;
    cs.origin_x = ox;
    cs.origin_y = oy;
    cs.cell_size = cell_size;
    for (uint32_t u = 1; u <= max_unit; u++)
        cs.unit_sizes[cs.n_unit_sizes++] = u;
    char err[512];
    pd_scene *s = pd_scene_load(&cs, err, sizeof err);
    FUZZ_REQUIRE(s != NULL, "%s", err);
    return s;
}

static void fuzz_init(void)
{
    fuzz_scenes[0] = fuzz_load("units", "e2e4_units.txt", 3, 0.0, 0.0, 1.0);
    fuzz_scenes[1] = fuzz_load("terrain", "e2e4_terrain.txt", 2, -10.0, -5.0, 0.5);
    fuzz_scratch = pd_query_scratch_create();
    fuzz_ctx = pd_search_ctx_create();
    /* Room for any path: an optimal or partial path visits a cell once. */
    for (int i = 0; i < 2; i++) {
        const pd_grid *g = fuzz_scenes[i]->grid;
        size_t cells = (size_t)g->width * (size_t)g->height;
        fuzz_path_cap = cells > fuzz_path_cap ? cells : fuzz_path_cap;
    }
    fuzz_path[0] = malloc(fuzz_path_cap * sizeof *fuzz_path[0]);
    fuzz_path[1] = malloc(fuzz_path_cap * sizeof *fuzz_path[1]);
    FUZZ_REQUIRE(fuzz_scratch && fuzz_ctx && fuzz_path[0] && fuzz_path[1], "out of memory");
}

static int fuzz_close(double a, double b)
{
    return fabs(a - b) <= 1e-9 * (1.0 + fabs(a));
}

/* The core search on the unit grid with the window as decoded (unclipped)
 * must answer as with the window prepare clipped to the scene. */
static void fuzz_check_core_window(const pd_grid *grid, const pd_find_path_req *fp, const pd_path_query *q)
{
    pd_search_params clipped = q->params, raw = q->params;
    clipped.blockers = raw.blockers = q->avoid;
    clipped.n_blockers = raw.n_blockers = q->n_avoid;
    raw.window_min = fp->window_min;
    raw.window_max = fp->window_max;
    pd_search_metrics mc, mr;
    pd_status sc = pd_search_astar(fuzz_ctx, grid, &clipped, fuzz_path[0], fuzz_path_cap, &mc);
    pd_status sr = pd_search_astar(fuzz_ctx, grid, &raw, fuzz_path[1], fuzz_path_cap, &mr);
    FUZZ_REQUIRE(sc == sr, "window (%d,%d)-(%d,%d): %s as decoded, %s clipped", (int)fp->window_min.x,
                 (int)fp->window_min.y, (int)fp->window_max.x, (int)fp->window_max.y, pd_status_name(sr),
                 pd_status_name(sc));
    FUZZ_REQUIRE(fuzz_close(mc.cost, mr.cost) && mc.path_len == mr.path_len,
                 "cost %g over %zu cells as decoded, %g over %zu clipped", mr.cost, mr.path_len, mc.cost,
                 mc.path_len);
}

static int fuzz_in_window(const pd_search_params *p, pd_point c)
{
    return !p->has_window || (c.x >= p->window_min.x && c.x <= p->window_max.x && c.y >= p->window_min.y &&
                              c.y <= p->window_max.y);
}

/* What a found path must be (see the file comment). */
static void fuzz_check_path(const pd_grid *grid, const pd_path_query *q, const pd_path_result *r)
{
    FUZZ_REQUIRE(r->path != NULL && r->path_len >= 1, "%s without a path", pd_status_name(r->status));
    pd_point from = r->start_substituted ? r->start_used : q->params.start;
    pd_point to = r->goal_substituted ? r->goal_used : q->params.goal;
    const pd_point *p = r->path;
    size_t n = r->path_len;
    if (r->has_target) {
        /* A goal set: the path ends wherever it first qualified. */
        const pd_targets t = { q->goals, q->n_goals, q->range, q->line_of_sight };
        uint32_t which = 0;
        FUZZ_REQUIRE(pd_targets_accepts(&t, grid, p[n - 1], &which) && which == r->target,
                     "path end (%d,%d) does not qualify for goal %u", (int)p[n - 1].x, (int)p[n - 1].y,
                     (unsigned)r->target);
        to = p[n - 1];
    }
    FUZZ_REQUIRE(p[0].x == from.x && p[0].y == from.y && p[n - 1].x == to.x && p[n - 1].y == to.y,
                 "path (%d,%d)..(%d,%d), answer says (%d,%d)..(%d,%d)", (int)p[0].x, (int)p[0].y,
                 (int)p[n - 1].x, (int)p[n - 1].y, (int)from.x, (int)from.y, (int)to.x, (int)to.y);
    for (size_t i = 0; i < n; i++) {
        FUZZ_REQUIRE(fuzz_in_window(&q->params, p[i]), "waypoint (%d,%d) outside the window", (int)p[i].x,
                     (int)p[i].y);
        for (size_t a = 0; a < q->n_avoid; a++)
            FUZZ_REQUIRE(p[i].x != q->avoid[a].x || p[i].y != q->avoid[a].y, "waypoint (%d,%d) is avoided",
                         (int)p[i].x, (int)p[i].y);
    }
    if (q->style == PD_STYLE_CELLS) {
        double cost;
        char why[160];
        pd_connectivity conn = q->params.connectivity ? q->params.connectivity : PD_CONNECT_8;
        FUZZ_REQUIRE(!path_breaks_rules(grid, conn, p, n, from, to, &cost, why, sizeof why), "%s", why);
        FUZZ_REQUIRE(fuzz_close(cost, r->metrics.cost), "path costs %g, metrics say %g", cost, r->metrics.cost);
    }
    if (r->times) {
        FUZZ_REQUIRE(r->times[0] == q->start_time, "first time %g, start_time %g", r->times[0], q->start_time);
        for (size_t i = 1; i < n; i++)
            FUZZ_REQUIRE(isfinite(r->times[i]) && r->times[i] >= r->times[i - 1], "time %zu: %g after %g", i,
                         r->times[i], r->times[i - 1]);
    }
}

static void fuzz_answer(uint64_t id, const pd_scene *scene, const pd_path_result *r)
{
    size_t len;
    uint8_t *out = pd_codec_encode_path(id, scene, r, (uint32_t)(id % 8), (int)(id & 1), &len);
    FUZZ_REQUIRE(out != NULL && len > 4, "no answer encoded");
    free(out);
}

static void fuzz_refuse(uint64_t id, pd_status st, const char *reason)
{
    size_t len;
    uint8_t *out = pd_codec_encode_error(id, st, reason, &len);
    FUZZ_REQUIRE(out != NULL, "no error encoded");
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fuzz_scratch)
        fuzz_init();
    pd_request req;
    char err[PD_QUERY_MESSAGE_MAX];
    pd_status st = pd_codec_decode_request(data, size, &req, err, sizeof err);
    if (st != PD_OK || req.kind != PD_REQ_FIND_PATH) {
        pd_request_free(&req);
        return 0;
    }
    const pd_find_path_req *fp = &req.u.find_path;
    const pd_scene *scene = NULL;
    for (int i = 0; i < 2; i++)
        if (strcmp(fuzz_scenes[i]->name, fp->scene) == 0)
            scene = fuzz_scenes[i];
    if (!scene) {
        fuzz_refuse(req.id, PD_UNKNOWN_SCENE, fp->scene);
        pd_request_free(&req);
        return 0;
    }
    pd_path_query q;
    err[0] = '\0';
    st = pd_query_path_prepare(scene, fp, 0, &q, err, sizeof err);
    if (st != PD_OK) {
        FUZZ_REQUIRE(err[0] != '\0', "%s without a reason", pd_status_name(st));
        fuzz_refuse(req.id, st, err);
        pd_request_free(&req);
        return 0;
    }
    const pd_grid *grid = pd_scene_unit_for(scene, q.unit_size ? q.unit_size : 1)->grid;
    if (fp->has_window)
        fuzz_check_core_window(grid, fp, &q);

    pd_path_result astar, jps;
    pd_query_control ctl = { 0 };
    pd_query_find_path(fuzz_scratch, scene, &q, &ctl, &astar);
    ctl.jump_points = 1;
    pd_query_find_path(fuzz_scratch, scene, &q, &ctl, &jps);
    if (astar.status == PD_OK || astar.status == PD_PARTIAL)
        fuzz_check_path(grid, &q, &astar);
    if (jps.status == PD_OK || jps.status == PD_PARTIAL)
        fuzz_check_path(grid, &q, &jps);
    if (q.params.max_expansions == 0) {
        FUZZ_REQUIRE(astar.status == jps.status, "A* %s, with jump points %s", pd_status_name(astar.status),
                     pd_status_name(jps.status));
        FUZZ_REQUIRE(fuzz_close(astar.metrics.cost, jps.metrics.cost), "A* costs %g, with jump points %g",
                     astar.metrics.cost, jps.metrics.cost);
    }
    fuzz_answer(req.id, scene, &astar);
    pd_path_result_free(&astar);
    pd_path_result_free(&jps);
    pd_request_free(&req);
    return 0;
}
