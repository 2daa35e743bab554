/*
 * pd_query.c - the pipelines of the query layer (see pd_query.h), and the
 * checks every request gets against the snapshot it runs on.
 *
 * Pipeline of a path query, in this order:
 *  1. Unit grid: pd_scene_unit_for(scene, unit_size) gives the grid the unit
 *     searches (unit 1: the scene grid) and its component labels. start and
 *     goal are anchor cells on it.
 *  2. Blocked start or goal: with snap, pd_fallback_nearest (any component)
 *     substitutes the nearest open cell and the answer becomes PARTIAL with
 *     start_used / goal_used; without it, START_BLOCKED / GOAL_BLOCKED -
 *     except a blocked goal under goal_mode NEAREST or LINE, which step 3
 *     treats as unreachable (a click on a wall still gets the nearest spot).
 *  3. Components: when start and goal carry different labels, goal_mode
 *     EXACT answers NO_PATH without searching (0 expansions); NEAREST takes
 *     the cell of the start's component nearest the goal as asked, LINE the
 *     first such cell on the line from that goal back to the start (PARTIAL,
 *     goal_used).
 *  4. Search: A* with the request's avoid cells as blockers, its window and
 *     partial_on_cutoff. Labels ignore avoid and window, so this may still
 *     end in NO_PATH, which is then reported as it is. A path cut off by the
 *     budget or the deadline ends at goal_used, with metrics.cutoff set.
 *  5. Style: every cell, corners (pd_path_corners; from jump point search,
 *     pd_jps_extract_corners takes them from the jump points) or smoothed
 *     (pd_path_smooth on the unit grid, with the avoid cells blocked too).
 *  6. Timing when speed > 0: pd_path_times on the unit grid with
 *     speed / cell_size cells per second, over the final waypoints.
 * A scene built without component labels (hand-made scenes in tests) skips
 * step 3: the search itself then finds out that the goal is unreachable.
 *
 * A goal set - FindPath.goals, or a range around the goal (pd_targets.h) -
 * changes steps 2-4: only the start snaps (a goal on a blocked cell is
 * allowed: something stands there); step 3 asks whether the start's
 * component holds a cell within range of some goal (pd__targets_reachable:
 * NO_PATH in a scan of the discs, no search), and for a single goal whose
 * range holds no such cell goal_mode NEAREST / LINE substitutes a goal as
 * above and the search goes there alone; step 4 is A* ending at the first
 * qualifying cell, and the answer says which goal (target).
 *
 * A route query plans on its world snapshot (pd_world_plan with the
 * scratch's search context). On NO_PATH or GOAL_BLOCKED under goal_mode NEAREST or
 * LINE it substitutes the goal in the last scene among the components
 * pd_world_arrivals names (NEAREST: per component the cell nearest the goal;
 * LINE: per arrival cell the first cell of its component on the line from
 * the goal back to it; the candidate nearest the goal wins, the first on a
 * tie) and plans again (PARTIAL, goal_used). Each leg then runs steps 4-6
 * above on its scene's snapshot from the world: A* from the leg's first to
 * its last cell (8-connected, the request's budget, no avoid or window),
 * style, and timing. Times run on across legs: a portal's cost counts as
 * that many cells of travel at the departing scene's speed, so crossing it
 * takes portal_cost * cell_size / speed seconds.
 */
#include "pd_query.h"
#include "pd_clock.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pd_fallback.h"
#include "pd_jps.h"
#include "pd_move.h"
#include "pd_path.h"
#include "pd_smooth.h"

/* Points the scratch's path buffer starts with (8 KiB): enough for most
 * paths on game maps, so the buffer seldom grows; it grows on demand to the
 * longest path the thread has seen. */
#define PD_QUERY_INITIAL_PATH_CAP 1024

struct pd_query_scratch {
    pd_search_ctx *ctx;
    pd_jps_ctx *jps;          /* created on first use */
    pd_point *buf;
    size_t cap;
    pd_move_area area;        /* RandomPoint's walking-distance area */
};

pd_query_scratch *pd_query_scratch_create(void)
{
    pd_query_scratch *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->ctx = pd_search_ctx_create();
    if (!s->ctx) {
        free(s);
        return NULL;
    }
    return s;
}

void pd_query_scratch_destroy(pd_query_scratch *s)
{
    if (!s)
        return;
    pd_search_ctx_destroy(s->ctx);
    pd_jps_ctx_destroy(s->jps);
    pd_move_area_free(&s->area);
    free(s->buf);
    free(s);
}

pd_move_area *pd_query_scratch_move_area(pd_query_scratch *s)
{
    return &s->area;
}

static size_t pd__scratch_bytes(const pd_query_scratch *s)
{
    return sizeof *s + s->cap * sizeof *s->buf + pd_move_area_bytes(&s->area) + pd_search_ctx_footprint(s->ctx) +
           (s->jps ? pd_jps_ctx_footprint(s->jps) : 0);
}

size_t pd_query_scratch_trim(pd_query_scratch *s, size_t retained_bytes)
{
    if (!s)
        return 0;
    if (pd__scratch_bytes(s) <= retained_bytes)
        return pd__scratch_bytes(s);
    /* RandomPoint's walking area and a path buffer grown for one long path go
     * first: the next such query grows them again in a few reallocs, where
     * lost node blocks cost faults. */
    pd_move_area_free(&s->area);
    if (s->cap > PD_QUERY_INITIAL_PATH_CAP) {
        free(s->buf);
        s->buf = NULL;
        s->cap = 0;
    }
    /* Then the larger search context, down to what the rest leaves it, and
     * the other one when that was not enough. */
    const int astar_first = pd_search_ctx_footprint(s->ctx) >= (s->jps ? pd_jps_ctx_footprint(s->jps) : 0);
    for (int k = 0; k < 2; k++) {
        const int astar = (k == 0) == astar_first;
        const size_t total = pd__scratch_bytes(s);
        const size_t own = astar ? pd_search_ctx_footprint(s->ctx) : s->jps ? pd_jps_ctx_footprint(s->jps) : 0;
        if (total <= retained_bytes)
            break;
        const size_t keep = retained_bytes > total - own ? retained_bytes - (total - own) : 0;
        if (astar)
            pd_search_ctx_trim(s->ctx, keep);
        else if (s->jps)
            pd_jps_ctx_trim(s->jps, keep);
    }
    return pd__scratch_bytes(s);
}

static int pd__scratch_grow(pd_query_scratch *s, size_t need)
{
    if (need <= s->cap)
        return 0;
    size_t cap = s->cap ? s->cap : PD_QUERY_INITIAL_PATH_CAP;
    while (cap < need)
        cap *= 2;
    pd_point *buf = realloc(s->buf, cap * sizeof *buf);
    if (!buf)
        return -1;
    s->buf = buf;
    s->cap = cap;
    return 0;
}

/* ---- prepare: checks against the snapshot ------------------------------ */

/* Resolves a start or goal point to an in-bounds cell. */
static pd_status pd__resolve_point(const pd_scene *scene, const pd_point_spec *spec, pd_point *cell)
{
    if (spec->is_world)
        return pd_scene_world_to_cell(scene, spec->wx, spec->wy, cell);
    if (!pd_grid_in_bounds(scene->grid, spec->cell.x, spec->cell.y))
        return PD_OUT_OF_BOUNDS;
    *cell = spec->cell;
    return PD_OK;
}

/* Resolves both ends; on failure names the end that is outside its scene. */
static pd_status pd__resolve_ends(const pd_scene *from, const pd_point_spec *start, const pd_scene *to,
                                  const pd_point_spec *goal, pd_point *s, pd_point *g, char *err,
                                  size_t errlen)
{
    const pd_point_spec *bad = NULL;
    if (pd__resolve_point(from, start, s) != PD_OK)
        bad = start;
    else if (pd__resolve_point(to, goal, g) != PD_OK)
        bad = goal;
    if (!bad)
        return PD_OK;
    const pd_scene *sc = bad == start ? from : to;
    char where[PD_WHERE_MAX];
    if (bad->is_world)
        snprintf(where, sizeof where, "world (%g, %g)", bad->wx, bad->wy);
    else
        snprintf(where, sizeof where, "cell (%" PRId32 ", %" PRId32 ")", bad->cell.x, bad->cell.y);
    pd_set_err(err, errlen, "%s %s is outside scene '%s' (%" PRId32 "x%" PRId32 ")",
                bad == start ? "start" : "goal", where, sc->name, sc->grid->width, sc->grid->height);
    return PD_OUT_OF_BOUNDS;
}

static pd_status pd__check_unit(const pd_scene *scene, uint32_t unit_size, char *err, size_t errlen)
{
    if (pd_scene_allows_unit(scene, unit_size))
        return PD_OK;
    pd_set_err(err, errlen, "scene '%s' does not serve unit size %" PRIu32, scene->name, unit_size);
    return PD_INVALID_ARGUMENT;
}

/* A goal set's anchors (FindPath.goals, or the one goal when a range is
 * asked): out->goals[0] is params.goal, already resolved. */
static pd_status pd__resolve_goals(const pd_scene *scene, const pd_find_path_req *req, pd_path_query *out,
                                   char *err, size_t errlen)
{
    out->range = req->range;
    out->line_of_sight = req->line_of_sight;
    if (req->n_goals == 0 && req->range <= 0)
        return PD_OK;
    out->goals[0] = out->params.goal;
    out->n_goals = 1;
    for (size_t i = 1; i < req->n_goals && i < PD_FINDPATH_MAX_GOALS; i++) {
        const pd_point_spec *g = &req->goals[i];
        if (pd__resolve_point(scene, g, &out->goals[i]) != PD_OK) {
            if (g->is_world)
                pd_set_err(err, errlen, "find_path.goals[%zu] world (%g, %g) is outside scene '%s'", i, g->wx,
                            g->wy, scene->name);
            else
                pd_set_err(err, errlen, "find_path.goals[%zu] cell (%" PRId32 ", %" PRId32 ") is outside scene '%s'",
                            i, g->cell.x, g->cell.y, scene->name);
            return PD_OUT_OF_BOUNDS;
        }
        out->n_goals = i + 1;
    }
    return PD_OK;
}

pd_status pd_query_check_version(const pd_scene *scene, uint64_t min_version, char *err, size_t errlen)
{
    if (scene->version >= min_version)
        return PD_OK;
    pd_set_err(err, errlen, "scene '%s' is at version %" PRIu64 ", older than min_version %" PRIu64 "; retry",
                scene->name, scene->version, min_version);
    return PD_STALE_VERSION;
}

pd_status pd_query_path_prepare(const pd_scene *scene, const pd_find_path_req *req,
                                uint64_t default_max_expansions, pd_path_query *out, char *err,
                                size_t errlen)
{
    memset(out, 0, sizeof *out);
    pd_status st = pd_query_check_version(scene, req->min_version, err, errlen);
    if (st != PD_OK)
        return st;
    if ((st = pd__check_unit(scene, req->unit_size, err, errlen)) != PD_OK)
        return st;
    pd_search_params *p = &out->params;
    const pd_point_spec *goal = req->n_goals > 0 ? &req->goals[0] : &req->goal;
    st = pd__resolve_ends(scene, &req->start, scene, goal, &p->start, &p->goal, err, errlen);
    if (st != PD_OK)
        return st;
    if ((st = pd__resolve_goals(scene, req, out, err, errlen)) != PD_OK)
        return st;
    out->unit_size = req->unit_size;
    p->connectivity = req->connectivity;
    p->max_expansions = req->max_expansions ? req->max_expansions : default_max_expansions;
    p->partial_on_cutoff = req->partial_on_cutoff;
    p->has_window = req->has_window;
    if (req->has_window) {
        /* Clipped to the scene here, so nothing past it reaches arithmetic;
         * corners are non-negative after decoding. */
        const int32_t w = scene->grid->width, h = scene->grid->height;
        p->window_min.x = req->window_min.x < w ? req->window_min.x : w - 1;
        p->window_min.y = req->window_min.y < h ? req->window_min.y : h - 1;
        p->window_max.x = req->window_max.x < w ? req->window_max.x : w - 1;
        p->window_max.y = req->window_max.y < h ? req->window_max.y : h - 1;
        /* A window wholly past the edge holds no cell, so not the start. */
        if (req->window_min.x >= w || req->window_min.y >= h) {
            pd_set_err(err, errlen, "find_path.window starts at (%" PRId32 ",%" PRId32
                        "), outside scene '%s' (%" PRId32 "x%" PRId32 ")",
                        req->window_min.x, req->window_min.y, scene->name, w, h);
            return PD_INVALID_ARGUMENT;
        }
    }
    out->style = req->style;
    out->goal_mode = req->goal_mode;
    out->snap = req->snap;
    out->speed = req->speed;
    out->start_time = req->start_time;
    out->avoid = req->avoid;
    out->n_avoid = req->n_avoid;
    out->avoid_reserved = req->avoid_reserved;
    out->t0_ms = req->avoid_reserved ? llround(req->start_time * 1000.0) : 0;
    return PD_OK;
}

pd_status pd_query_route_prepare(const pd_world *world, const pd_find_route_req *req,
                                 uint64_t default_max_expansions, pd_route_query *out, char *err,
                                 size_t errlen)
{
    memset(out, 0, sizeof *out);
    const pd_scene *from = pd_world_scene(world, req->from_scene);
    const pd_scene *to = pd_world_scene(world, req->to_scene);
    if (!from || !to) {
        pd_set_err(err, errlen, "unknown scene '%s'", !from ? req->from_scene : req->to_scene);
        return PD_UNKNOWN_SCENE;
    }
    pd_status st = pd__check_unit(from, req->unit_size, err, errlen);
    if (st == PD_OK)
        st = pd__check_unit(to, req->unit_size, err, errlen);
    if (st == PD_OK)
        st = pd__resolve_ends(from, &req->start, to, &req->goal, &out->start, &out->goal, err, errlen);
    if (st != PD_OK)
        return st;
    memcpy(out->from_scene, req->from_scene, sizeof out->from_scene);
    memcpy(out->to_scene, req->to_scene, sizeof out->to_scene);
    out->unit_size = req->unit_size;
    out->style = req->style;
    out->goal_mode = req->goal_mode;
    out->speed = req->speed;
    out->start_time = req->start_time;
    out->max_expansions = req->max_expansions ? req->max_expansions : default_max_expansions;
    return PD_OK;
}

/* ---- runs -------------------------------------------------------------- */
/* Searches into the scratch's buffer, growing it and re-extracting (never
 * re-searching) when the path does not fit. Returns the search's status with
 * the path in s->buf[0..*len) and the metrics in *m. *style is the style
 * asked for, and on return the style left to apply: PD_STYLE_CELLS once
 * the corners came from the jump points.
 *
 * Jump point search answers whatever it can (uniform-cost 8- or 4-connected
 * grids without avoid cells, window, partial_on_cutoff or a goal set) when the unit size's
 * pick says so (the scene's "search", else the server's
 * jump_point_search). It finds the same optimal cost as A*, an order of
 * magnitude faster on open maps; everything else goes to A*.
 * metrics.expanded then counts jump points. */
static pd_status pd__search(pd_query_scratch *s, const pd_query_control *ctl, const pd_grid *grid,
                            pd_scene_pick pick, const pd_search_params *base, const pd_point *avoid, size_t n_avoid,
                            pd_waypoint_style *style, pd_search_metrics *m, size_t *len)
{
    if (pd__scratch_grow(s, PD_QUERY_INITIAL_PATH_CAP) != 0)
        return PD_INTERNAL;

    pd_search_params params = *base;
    params.poll = ctl ? ctl->poll : NULL;
    params.poll_user = ctl ? ctl->poll_user : NULL;
    params.blockers = avoid;
    params.n_blockers = avoid ? n_avoid : 0;

    const int jps = pd_scene_pick_uses_jps(pick, ctl && ctl->jump_points) && !params.targets &&
                    pd_jps_applicable(grid, &params) &&
                    (s->jps || (s->jps = pd_jps_ctx_create()));
    /* The corners style from jump point search takes its points from the
     * jump points (pd_jps_extract_corners): the same points pd_path_corners
     * keeps of the full path, without writing every cell of it and reading
     * them again (most of the work around a search for that style,
     * docs/BENCHMARKS.md). The buffer still holds the full path's length,
     * which bounds the corners. *style becomes PD_STYLE_CELLS, as there is
     * no style left to apply: pd_path_corners over the corners again would
     * find nothing to drop, at ~700 instructions a den520d answer (its
     * direction test takes a gcd per point). */
    if (jps && *style == PD_STYLE_CORNERS) {
        pd_status st = pd_search_jps(s->jps, grid, &params, NULL, 0, m);
        *len = m->path_len;
        if (st != PD_OK)
            return st;
        if (m->path_len > s->cap && pd__scratch_grow(s, m->path_len) != 0)
            return PD_INTERNAL;
        st = pd_jps_extract_corners(s->jps, s->buf, s->cap, len);
        if (st == PD_OK)
            *style = PD_STYLE_CELLS;
        return st;
    }
    pd_status st = jps ? pd_search_jps(s->jps, grid, &params, s->buf, s->cap, m)
                       : pd_search_astar(s->ctx, grid, &params, s->buf, s->cap, m);
    *len = m->path_len;
    if (st == PD_BUFFER_TOO_SMALL) {
        if (pd__scratch_grow(s, *len) != 0)
            return PD_INTERNAL;
        st = jps ? pd_jps_extract(s->jps, s->buf, s->cap, len)
                 : pd_search_extract(s->ctx, s->buf, s->cap, len);
        /* A cut-off path that did not fit comes back as BUFFER_TOO_SMALL
         * with the cutoff recorded: it is still a PARTIAL answer. */
        if (st == PD_OK && m->cutoff != PD_OK)
            st = PD_PARTIAL;
    }
    return st;
}

/* A blocked endpoint: snapped to the nearest open cell when the query
 * allows it (any component: step 3 decides reachability). */
static pd_status pd__snap(const pd_path_query *q, const pd_grid *grid, const pd_components *comps,
                          pd_point *pt, int *substituted, pd_status blocked)
{
    if (pd_grid_get(grid, pt->x, pt->y) != PD_CELL_BLOCKED)
        return PD_OK;
    if (!q->snap)
        return blocked;
    pd_point open;
    if (pd_fallback_nearest(grid, comps, 0, *pt, PD_FALLBACK_MAX_RADIUS, &open) != PD_OK)
        return blocked;
    *pt = open;
    *substituted = 1;
    return PD_OK;
}

/* Step 3 of the pipeline: NO_PATH in O(1), or a substitute goal. */
static pd_status pd__reachable_goal(const pd_path_query *q, const pd_grid *grid, const pd_components *comps,
                                    pd_point start, pd_point *goal, int *substituted)
{
    if (!comps || pd_components_connected(comps, start, *goal))
        return PD_OK;
    pd_point sub;
    pd_status st;
    switch (q->goal_mode) {
    case PD_GOAL_NEAREST:
        st = pd_fallback_nearest(grid, comps, pd_components_label(comps, start), q->params.goal,
                                 PD_FALLBACK_MAX_RADIUS, &sub);
        break;
    case PD_GOAL_LINE:
        st = pd_fallback_line(grid, comps, start, q->params.goal, &sub);
        break;
    case PD_GOAL_EXACT:
    default:
        return PD_NO_PATH;
    }
    if (st != PD_OK)
        return PD_NO_PATH;
    *goal = sub;
    *substituted = 1;
    return PD_OK;
}

/* Step 3 for a goal set: does the start's component hold a qualifying cell
 * by distance (a goal's own cell for range 0, else any cell within range)?
 * Line of sight, avoid cells and the window are left to the search, as the
 * labels ignore them. Scans at most PD_FINDPATH_MAX_RANGE around each goal.
 * Returns PD_OK, PD_GOAL_BLOCKED (range 0 and every goal blocked) or
 * PD_NO_PATH. */
static pd_status pd__targets_reachable(const pd_path_query *q, const pd_grid *grid, const pd_components *comps,
                                       pd_point start)
{
    int open_goal = 0;
    for (size_t i = 0; i < q->n_goals; i++)
        open_goal |= pd_grid_get(grid, q->goals[i].x, q->goals[i].y) != PD_CELL_BLOCKED;
    if (!open_goal && q->range <= 0)
        return PD_GOAL_BLOCKED;
    if (!comps)
        return PD_OK;
    pd_components_match in;
    pd_components_match_init(&in, comps, pd_components_label(comps, start));
    const int32_t r = (int32_t)ceil(q->range);
    for (size_t i = 0; i < q->n_goals; i++) {
        const pd_point g = q->goals[i];
        if (pd_grid_get(grid, g.x, g.y) != PD_CELL_BLOCKED && pd_components_in(comps, &in, g))
            return PD_OK;
        for (int32_t y = g.y - r; y <= g.y + r; y++)
            for (int32_t x = g.x - r; x <= g.x + r; x++) {
                const pd_point c = { x, y };
                if (pd_grid_in_bounds(grid, x, y) && pd_targets_in_range(q->range, c, g) &&
                    pd_grid_get(grid, x, y) != PD_CELL_BLOCKED && pd_components_in(comps, &in, c))
                    return PD_OK;
            }
    }
    return PD_NO_PATH;
}

/* Smooths the path on the unit grid. With avoid cells, line of sight must
 * treat them as blocked too, so it runs on a copy of the path's bounding box
 * with those cells blocked: every segment between two path points stays
 * inside that box, and cells outside a grid read as blocked. Returns the new
 * length, or 0 on allocation failure. */
static size_t pd__smooth(const pd_path_query *q, const pd_grid *grid, pd_point *pts, size_t n)
{
    if (q->n_avoid == 0 || !q->avoid)
        return pd_path_smooth(grid, pts, n);
    int32_t x0 = pts[0].x, y0 = pts[0].y, x1 = x0, y1 = y0;
    for (size_t i = 1; i < n; i++) {
        x0 = pts[i].x < x0 ? pts[i].x : x0;
        y0 = pts[i].y < y0 ? pts[i].y : y0;
        x1 = pts[i].x > x1 ? pts[i].x : x1;
        y1 = pts[i].y > y1 ? pts[i].y : y1;
    }
    pd_grid *box = pd_grid_create(x1 - x0 + 1, y1 - y0 + 1);
    if (!box)
        return 0;
    for (int32_t y = y0; y <= y1; y++)
        memcpy(&box->cells[pd_grid_index(box, 0, y - y0)], &grid->cells[pd_grid_index(grid, x0, y)],
               (size_t)(x1 - x0 + 1));
    for (size_t i = 0; i < q->n_avoid; i++) {
        pd_point a = q->avoid[i];
        if (a.x >= x0 && a.x <= x1 && a.y >= y0 && a.y <= y1)
            box->cells[pd_grid_index(box, a.x - x0, a.y - y0)] = PD_CELL_BLOCKED;
    }
    pd_grid_refresh_flags(box);
    for (size_t i = 0; i < n; i++) {
        pts[i].x -= x0;
        pts[i].y -= y0;
    }
    n = pd_path_smooth(box, pts, n);
    for (size_t i = 0; i < n; i++) {
        pts[i].x += x0;
        pts[i].y += y0;
    }
    pd_grid_destroy(box);
    return n;
}

/* Steps 5 and 6 for one stretch of path in s->buf: the requested style
 * (smoothing on grid, avoid cells blocked), then an exact-size copy in
 * *path and, when speed > 0, arrival times from t0 on. Returns PD_OK,
 * PD_INVALID_ARGUMENT (a speed so slow, or a start time so late, that an
 * arrival time overflows to infinity: no answer in seconds exists, and inf
 * is no number for a client's JSON) or PD_INTERNAL (memory), with nothing
 * left allocated on failure. */
static pd_status pd__finish_path(pd_query_scratch *s, const pd_path_query *styler, const pd_grid *grid,
                                 pd_waypoint_style style, size_t len, double speed, double cell_size,
                                 double t0, pd_point **path, double **times, size_t *path_len)
{
    if (style == PD_STYLE_CORNERS)
        len = pd_path_corners(s->buf, len);
    else if (style == PD_STYLE_SMOOTH && (len = pd__smooth(styler, grid, s->buf, len)) == 0)
        return PD_INTERNAL;
    pd_point *p = malloc(len * sizeof *p);
    if (!p)
        return PD_INTERNAL;
    memcpy(p, s->buf, len * sizeof *p);
    double speed_cells = speed / cell_size;
    if (speed > 0 && speed_cells > 0 && isfinite(speed_cells)) {
        double *t = malloc(len * sizeof *t);
        if (!t) {
            free(p);
            return PD_INTERNAL;
        }
        pd_path_times(grid, p, len, speed_cells, t0, t);
        /* Times only grow along the path, so the last is the one to check. */
        if (!isfinite(t[len - 1])) {
            free(t);
            free(p);
            return PD_INVALID_ARGUMENT;
        }
        *times = t;
    }
    *path = p;
    *path_len = len;
    return PD_OK;
}

/* The grid a unit searches on a scene (unit 1: the scene grid) and its
 * labels; NULL when the scene does not serve the unit. A scene built by hand
 * (tests) may list no unit data: unit 1 is then simply the scene grid,
 * without labels. */
static const pd_grid *pd__unit_grid(const pd_scene *scene, uint32_t unit, const pd_components **comps,
                                    pd_scene_pick *pick)
{
    const pd_scene_unit *su = pd_scene_unit_for(scene, unit ? unit : 1);
    *comps = su ? su->components : NULL;
    *pick = su ? su->pick : PD_SCENE_PICK_DEFAULT;
    if (su && su->grid)
        return su->grid;
    return unit <= 1 ? scene->grid : NULL;
}

/* Why an end is refused: a wall in the scene, or - for a unit larger than
 * a cell - its footprint running past the scene's edge or a wall somewhere
 * under it. */
static void pd__explain_blocked(const pd_scene *scene, const pd_path_query *q, const char *end, pd_point p,
                                char *msg, size_t cap)
{
    uint32_t unit = q->unit_size ? q->unit_size : 1;
    const pd_grid *g = scene->grid;
    const char *snap = q->snap ? "; no open cell to snap to within the fallback radius" : " (snap not asked for)";
    if (unit <= 1 || pd_grid_get(g, p.x, p.y) == PD_CELL_BLOCKED)
        pd_set_err(msg, cap, "%s cell (%d,%d) of scene '%s' is a wall%s", end, p.x, p.y, scene->name, snap);
    else if ((int64_t)p.x + unit > g->width || (int64_t)p.y + unit > g->height)
        pd_set_err(msg, cap,
                 "%s (%d,%d) of scene '%s' is open, but a unit of size %u anchored there does not fit: "
                 "its %ux%u footprint runs past the scene's edge (%dx%d)%s",
                 end, p.x, p.y, scene->name, unit, unit, unit, g->width, g->height, snap);
    else
        pd_set_err(msg, cap,
                 "%s (%d,%d) of scene '%s' is open, but a unit of size %u anchored there does not fit: "
                 "a wall lies under its %ux%u footprint%s",
                 end, p.x, p.y, scene->name, unit, unit, unit, snap);
}

/* The message of a path refused after its checks (NO_PATH, a blocked end,
 * a cut-off search): says which rule refused it, with the cells and the
 * components involved. */
static void pd__explain_path(const pd_scene *scene, const pd_path_query *q, const pd_components *comps,
                             const pd_path_result *r, pd_status st, char *msg, size_t cap)
{
    const pd_point a = q->params.start, b = q->params.goal;
    uint32_t unit = q->unit_size ? q->unit_size : 1;
    switch (st) {
    case PD_START_BLOCKED:
        pd__explain_blocked(scene, q, "start", a, msg, cap);
        break;
    case PD_GOAL_BLOCKED:
        pd__explain_blocked(scene, q, "goal", b, msg, cap);
        break;
    case PD_NO_PATH: {
        pd_point from = r->start_substituted ? r->start_used : a;
        if (comps && !pd_components_connected(comps, from, b) && pd_components_label(comps, b) != 0)
            pd_set_err(msg, cap,
                     "start (%d,%d) is in component %u and goal (%d,%d) in component %u of scene '%s' "
                     "for unit size %u: no walk joins them%s",
                     from.x, from.y, (unsigned)pd_components_label(comps, from), b.x, b.y,
                     (unsigned)pd_components_label(comps, b), scene->name, unit,
                     q->goal_mode == PD_GOAL_EXACT ? " (goal_mode EXACT: no substitute goal)"
                                                   : ", and no reachable substitute for the goal was found");
        else if (comps && !pd_components_connected(comps, from, b))
            pd_set_err(msg, cap, "goal (%d,%d) is blocked for unit size %u and no reachable cell near it was found",
                     b.x, b.y, unit);
        else
            pd_set_err(msg, cap,
                     "start (%d,%d) and goal (%d,%d) are connected in scene '%s', but not within this "
                     "request's avoid cells (%zu) and window: the search ran out of cells after %" PRIu64
                     " expansions",
                     from.x, from.y, b.x, b.y, scene->name, q->n_avoid, r->metrics.expanded);
        break;
    }
    case PD_BUDGET_EXCEEDED:
        pd_set_err(msg, cap, "the search expanded %" PRIu64 " nodes, the budget (max_expansions %" PRIu64
                 "), before reaching the goal; partial_on_cutoff returns the path so far",
                 r->metrics.expanded, q->params.max_expansions);
        break;
    default:
        pd_set_err(msg, cap, "%s after %" PRIu64 " expansions", pd_status_name(st), r->metrics.expanded);
        break;
    }
}

static pd_status pd__find_path(pd_query_scratch *s, const pd_scene *scene, const pd_path_query *q,
                               const pd_query_control *ctl, pd_path_result *r)
{
    const pd_components *comps;
    pd_scene_pick pick;
    const pd_grid *grid = pd__unit_grid(scene, q->unit_size, &comps, &pick);
    if (!grid)
        return PD_INVALID_ARGUMENT;

    pd_search_params params = q->params;
    if (!pd_grid_in_bounds(grid, params.start.x, params.start.y) ||
        !pd_grid_in_bounds(grid, params.goal.x, params.goal.y))
        return PD_OUT_OF_BOUNDS;
    for (size_t i = 0; i < q->n_goals; i++)
        if (!pd_grid_in_bounds(grid, q->goals[i].x, q->goals[i].y))
            return PD_OUT_OF_BOUNDS;

    pd_status st = pd__snap(q, grid, comps, &params.start, &r->start_substituted, PD_START_BLOCKED);
    const pd_targets targets = { q->goals, q->n_goals, q->range, q->line_of_sight };
    if (q->n_goals > 0 && st == PD_OK) {
        /* A goal set never snaps its goals: a goal on a blocked cell (an
         * enemy on its cell) is what a range is for. Only a single goal
         * falls back by goal_mode (the codec refuses it with goals), and
         * then the search goes to the substitute alone. */
        st = pd__targets_reachable(q, grid, comps, params.start);
        if (st == PD_OK)
            params.targets = &targets;
        else if (st == PD_NO_PATH && q->goal_mode != PD_GOAL_EXACT && q->n_goals == 1)
            st = pd__reachable_goal(q, grid, comps, params.start, &params.goal, &r->goal_substituted);
    } else if (st == PD_OK) {
        const int goal_falls_back = q->goal_mode != PD_GOAL_EXACT && comps;
        if (!(goal_falls_back && !q->snap))
            st = pd__snap(q, grid, comps, &params.goal, &r->goal_substituted, PD_GOAL_BLOCKED);
        if (st == PD_OK)
            st = pd__reachable_goal(q, grid, comps, params.start, &params.goal, &r->goal_substituted);
    }
    if (r->start_substituted)
        r->start_used = params.start;
    if (st != PD_OK) {
        pd__explain_path(scene, q, comps, r, st, r->message, sizeof r->message);
        return st;
    }

    size_t len = 0;
    pd_waypoint_style style = q->style; /* what is left to apply after the search */
    st = pd__search(s, ctl, grid, pick, &params, q->avoid, q->n_avoid, &style, &r->metrics, &len);
    if (st != PD_OK && st != PD_PARTIAL)
        pd__explain_path(scene, q, comps, r, st, r->message, sizeof r->message);
    if ((st != PD_OK && st != PD_PARTIAL) || len == 0)
        return st;
    if (st == PD_PARTIAL)
        params.goal = r->metrics.end;
    if (params.targets && st == PD_OK) {
        r->has_target = 1;
        r->target = r->metrics.target;
    } else if (params.goal.x != q->params.goal.x || params.goal.y != q->params.goal.y) {
        r->goal_substituted = 1;
    }
    if (r->goal_substituted)
        r->goal_used = params.goal;
    if (r->start_substituted || r->goal_substituted)
        st = PD_PARTIAL;

    pd_status fs = pd__finish_path(s, q, grid, style, len, q->speed, scene->cell_size, q->start_time,
                                   &r->path, &r->times, &r->path_len);
    return fs == PD_OK ? st : fs;
}

pd_status pd_query_find_path(pd_query_scratch *s, const pd_scene *scene, const pd_path_query *q,
                             const pd_query_control *ctl, pd_path_result *out)
{
    memset(out, 0, sizeof *out);
    out->status = s && scene && scene->grid && q ? pd__find_path(s, scene, q, ctl, out) : PD_INVALID_ARGUMENT;
    return out->status;
}

int pd_query_find_path_small(pd_query_scratch *s, const pd_scene *scene, const pd_path_query *q,
                             uint64_t max_expansions, int jump_points, pd_path_result *out)
{
    memset(out, 0, sizeof *out);
    if (!s || !scene || !scene->grid || !q || max_expansions == 0 || q->n_goals > 0 || q->n_avoid > 0)
        return 0;
    /* The request's own budget could end the search: that answer is the
     * worker's search's to give (jump point search counts differently). */
    if (q->params.max_expansions != 0 && q->params.max_expansions <= max_expansions)
        return 0;
    const pd_components *comps;
    pd_scene_pick pick;
    const pd_grid *grid = pd__unit_grid(scene, q->unit_size, &comps, &pick);
    const int jps = jump_points && pd_scene_pick_uses_jps(pick, 1);
    /* A* expands every cell of the path, and a path has at least as many
     * cells as its ends lie apart (Chebyshev): farther ends cannot finish. */
    const int64_t dx = llabs((int64_t)q->params.start.x - q->params.goal.x);
    const int64_t dy = llabs((int64_t)q->params.start.y - q->params.goal.y);
    if (!jps && (uint64_t)(dx > dy ? dx : dy) >= max_expansions)
        return 0;
    if (!grid || !pd_grid_in_bounds(grid, q->params.start.x, q->params.start.y) ||
        !pd_grid_in_bounds(grid, q->params.goal.x, q->params.goal.y))
        return 0;
    /* Snapping and the goal fallbacks scan up to PD_FALLBACK_MAX_RADIUS
     * cells around a point: not small. Without them, a blocked end or ends
     * in different components are answered without searching. */
    const int start_open = pd_grid_get(grid, q->params.start.x, q->params.start.y) != PD_CELL_BLOCKED;
    const int goal_open = pd_grid_get(grid, q->params.goal.x, q->params.goal.y) != PD_CELL_BLOCKED;
    if (q->snap && !(start_open && goal_open))
        return 0;
    if (q->goal_mode != PD_GOAL_EXACT &&
        (!goal_open || (start_open && comps && !pd_components_connected(comps, q->params.start, q->params.goal))))
        return 0;

    pd_path_query small = *q;
    small.params.max_expansions = max_expansions;
    small.params.partial_on_cutoff = 0;
    /* A*, whatever the scene's pick, unless jump_points: A*'s work is
     * bounded by the expansions, where one jump point search expansion may
     * scan to the map's edges (the caller's budget for that is smaller). */
    const pd_query_control ctl = {NULL, NULL, jps};
    out->status = pd__find_path(s, scene, &small, &ctl, out);
    if (out->status == PD_BUDGET_EXCEEDED) {
        pd_path_result_free(out);
        memset(out, 0, sizeof *out);
        return 0;
    }
    return 1;
}

void pd_path_result_free(pd_path_result *r)
{
    if (!r)
        return;
    free(r->path);
    free(r->times);
    r->path = NULL;
    r->times = NULL;
    r->path_len = 0;
}

/* Squared Euclidean distance: only compared, never reported. */
static int64_t pd__dist2(pd_point a, pd_point b)
{
    int64_t dx = (int64_t)a.x - b.x, dy = (int64_t)a.y - b.y;
    return dx * dx + dy * dy;
}

/* The goal_mode fallback of a route (see the top of this file): a
 * substitute goal in wq->to_scene that the unit can reach, or PD_NO_PATH. */
static pd_status pd__route_substitute(pd_query_scratch *s, const pd_world *world, pd_goal_mode mode,
                                      const pd_world_query *wq, pd_point *sub)
{
    const pd_scene *to = pd_world_scene(world, wq->to_scene);
    const pd_scene_unit *su = to ? pd_scene_unit_for(to, wq->unit_size) : NULL;
    if (!su || !su->grid || !su->components)
        return PD_NO_PATH;
    size_t n = 0;
    pd_status st = pd_world_arrivals(world, s->ctx, wq, NULL, 0, &n);
    if (st != PD_OK)
        return st;
    if (n == 0)
        return PD_NO_PATH;
    pd_point *arrivals = malloc(n * sizeof *arrivals);
    if (!arrivals)
        return PD_INTERNAL;
    st = pd_world_arrivals(world, s->ctx, wq, arrivals, n, &n);

    int found = 0;
    int64_t best = 0;
    for (size_t i = 0; st == PD_OK && i < n; i++) {
        uint32_t label = pd_components_label(su->components, arrivals[i]);
        if (label == 0)
            continue;
        pd_point cand;
        pd_status fs = mode == PD_GOAL_LINE
                           ? pd_fallback_line(su->grid, su->components, arrivals[i], wq->goal, &cand)
                           : pd_fallback_nearest(su->grid, su->components, label, wq->goal,
                                                 PD_FALLBACK_MAX_RADIUS, &cand);
        if (fs != PD_OK)
            continue;
        int64_t d = pd__dist2(cand, wq->goal);
        if (!found || d < best) {
            found = 1;
            best = d;
            *sub = cand;
        }
    }
    free(arrivals);
    if (st != PD_OK)
        return st;
    return found ? PD_OK : PD_NO_PATH;
}

/* Searches one leg of a planned route on its scene's unit grid and fills
 * *out with an exact-size copy of its path in the requested style, and its
 * arrival times from *t (advanced past the leg and its portal). */
static pd_status pd__route_leg(pd_query_scratch *s, const pd_route_query *q, const pd_query_control *ctl,
                               const pd_world_leg *leg, double *t, uint64_t *expanded, pd_route_leg *out)
{
    const pd_components *comps;
    pd_scene_pick pick;
    const pd_grid *grid = pd__unit_grid(leg->scene, q->unit_size, &comps, &pick);
    if (!grid)
        return PD_INTERNAL;

    /* The snapshot belongs to the world, which the caller may release before
     * the answer is encoded; the leg keeps the scene itself alive. Retaining
     * only touches the reference count. */
    out->scene = (pd_scene *)leg->scene;
    pd_scene_retain(out->scene);
    out->has_portal = leg->has_portal;
    if (leg->has_portal) {
        snprintf(out->portal, sizeof out->portal, "%s", leg->portal);
        snprintf(out->next_scene, sizeof out->next_scene, "%s", leg->next_scene->name);
        out->portal_exit = leg->portal_exit;
        out->portal_entry = leg->portal_entry;
        out->portal_cost = leg->portal_cost;
    }

    pd_search_params params = {0};
    params.start = leg->from;
    params.goal = leg->to;
    params.connectivity = PD_CONNECT_8;
    params.max_expansions = q->max_expansions;
    pd_search_metrics m = {0};
    size_t len = 0;
    pd_waypoint_style cells = PD_STYLE_CELLS; /* the leg is styled by pd__finish_path below */
    pd_status st = pd__search(s, ctl, grid, pick, &params, NULL, 0, &cells, &m, &len);
    *expanded += m.expanded;
    if (st != PD_OK)
        return st == PD_PARTIAL || st == PD_NO_PATH ? PD_INTERNAL : st;
    out->cost = m.cost;

    const pd_path_query no_avoid = {0};
    st = pd__finish_path(s, &no_avoid, grid, q->style, len, q->speed, leg->scene->cell_size, *t, &out->path,
                         &out->times, &out->path_len);
    if (st != PD_OK)
        return st;
    if (out->times) {
        *t = out->times[out->path_len - 1];
        if (leg->has_portal)
            *t += leg->portal_cost * leg->scene->cell_size / q->speed;
    }
    return PD_OK;
}

static pd_status pd__find_route(pd_query_scratch *s, const pd_world *world, const pd_route_query *q,
                                const pd_query_control *ctl, pd_route_result *r)
{
    pd_world_query wq = {
        .from_scene = q->from_scene,
        .start = q->start,
        .to_scene = q->to_scene,
        .goal = q->goal,
        .unit_size = q->unit_size ? q->unit_size : 1,
        .poll = ctl ? ctl->poll : NULL,
        .poll_user = ctl ? ctl->poll_user : NULL,
    };
    pd_world_route route = {0};
    pd_status st = pd_world_plan(world, s->ctx, &wq, &route);
    uint64_t expanded = route.expanded;
    if ((st == PD_NO_PATH || st == PD_GOAL_BLOCKED) && q->goal_mode != PD_GOAL_EXACT) {
        pd_point sub;
        pd_status fs = pd__route_substitute(s, world, q->goal_mode, &wq, &sub);
        if (fs == PD_OK) {
            pd_world_route_free(&route);
            wq.goal = sub;
            st = pd_world_plan(world, s->ctx, &wq, &route);
            expanded += route.expanded;
            if (st == PD_OK) {
                r->goal_substituted = 1;
                r->goal_used = sub;
            }
        } else if (fs != PD_NO_PATH) {
            st = fs;
        }
    }

    double total = 0, t = q->start_time;
    if (st == PD_OK) {
        r->pinned = route.pinned;
        r->legs = calloc(route.n_legs, sizeof *r->legs);
        if (!r->legs)
            st = PD_INTERNAL;
    }
    for (size_t i = 0; st == PD_OK && i < route.n_legs; i++) {
        r->n_legs = i + 1;
        st = pd__route_leg(s, q, ctl, &route.legs[i], &t, &expanded, &r->legs[i]);
        total += r->legs[i].cost + (r->legs[i].has_portal ? r->legs[i].portal_cost : 0);
    }
    pd_world_route_free(&route);

    r->metrics.expanded = expanded;
    if (st != PD_OK) {
        uint32_t unit = q->unit_size ? q->unit_size : 1;
        char closed[128] = "";
        if (unit > 1)
            snprintf(closed, sizeof closed,
                     " (portals with a max_unit below %u, or with an end a unit of size %u does not fit on, "
                     "are closed to it)", unit, unit);
        if (st == PD_NO_PATH)
            pd_set_err(r->message, sizeof r->message,
                     "no walk joins '%s' (%d,%d) to '%s' (%d,%d) for unit size %u: the ends are in parts of "
                     "their scenes no portal open to this unit size connects%s",
                     q->from_scene, q->start.x, q->start.y, q->to_scene, q->goal.x, q->goal.y, unit, closed);
        else if (st == PD_START_BLOCKED || st == PD_GOAL_BLOCKED)
            pd_set_err(r->message, sizeof r->message, "%s (%d,%d) of scene '%s' is a wall for unit size %u",
                     st == PD_START_BLOCKED ? "start" : "goal", st == PD_START_BLOCKED ? q->start.x : q->goal.x,
                     st == PD_START_BLOCKED ? q->start.y : q->goal.y,
                     st == PD_START_BLOCKED ? q->from_scene : q->to_scene, unit);
        else
            pd_set_err(r->message, sizeof r->message, "%s after %" PRIu64 " expansions", pd_status_name(st), expanded);
        pd_route_result_free(r);
        r->goal_substituted = 0;
        return st;
    }
    r->metrics.cost = total;
    return r->goal_substituted ? PD_PARTIAL : PD_OK;
}

pd_status pd_query_find_route(pd_query_scratch *s, const pd_world *world, const pd_route_query *q,
                              const pd_query_control *ctl, pd_route_result *out)
{
    uint64_t started = pd_clock_ns();
    memset(out, 0, sizeof *out);
    out->status = s && world && q ? pd__find_route(s, world, q, ctl, out) : PD_INVALID_ARGUMENT;
    out->metrics.micros = pd_clock_us_since(started); /* rounded up, as a search's */
    return out->status;
}

void pd_route_result_free(pd_route_result *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_legs; i++) {
        pd_scene_release(r->legs[i].scene);
        free(r->legs[i].path);
        free(r->legs[i].times);
    }
    free(r->legs);
    r->legs = NULL;
    r->n_legs = 0;
}

pd_status pd_query_update_cells(pd_store *store, const pd_update_cells_req *req, pd_update_outcome *out)
{
    pd_scene_update update = req->update;
    if (req->cells)
        update.cells = req->cells;
    const pd_scene_update *ops = req->n_ops ? req->ops : &update;
    size_t n_ops = req->n_ops ? req->n_ops : 1;
    return pd_store_update_cells_keyed(store, req->scene, ops, n_ops, req->idem_key, out);
}

/* CreateScene: the map parsed (or the cells taken) into a scene, or NULL
 * with out's status and message set. The caps are checked before the work
 * they bound (pd_registry_build_limits: cells on the header, bytes before
 * deriving, LIMIT_EXCEEDED), and ctl's poll (may be NULL) stops the parse
 * and the derive (a cancel, a closed connection, a stopping server). */
static pd_scene *pd__scene_of_request(pd_registry *registry, const pd_scene_change_req *req,
                                      const pd_query_control *ctl, pd_store_change *out)
{
    /* A name already served is refused before its map is parsed: a slow
     * map would otherwise hold the lane of the scene it names for nothing
     * (this runs in that lane, after the changes queued before it). */
    pd_scene *served = pd_registry_acquire(registry, req->scene->name);
    if (served) {
        snprintf(out->message, sizeof out->message, "scene '%s' exists already (version %" PRIu64 ")",
                 served->name, served->version);
        pd_scene_release(served);
        out->status = PD_SCENE_EXISTS;
        return NULL;
    }
    /* Parsed and derived before the change log's lock is taken: other
     * scenes' changes go on meanwhile. */
    pd_scene_limits lim;
    pd_registry_build_limits(registry, &lim);
    if (ctl) {
        lim.poll = ctl->poll;
        lim.poll_user = ctl->poll_user;
    }
    pd_status built = PD_INVALID_ARGUMENT;
    pd_scene *made = NULL;
    if (!req->raw)
        made = pd_scene_build(req->scene, (const char *)req->map, req->map_len, &lim, &built, out->message,
                              sizeof out->message);
    else if ((built = pd_scene_check_limits(&lim, req->scene, req->width, req->height, out->message,
                                            sizeof out->message)) == PD_OK)
        made = pd_scene_from_cells(req->scene, req->width, req->height, req->map, out->message,
                                   sizeof out->message);
    if (!made && built != PD_INVALID_ARGUMENT && built != PD_OK) {
        /* Refused by a cap, or stopped: nothing to serve or journal. */
        out->status = built;
        return NULL;
    }
    /* A map is checked as it is parsed; raw cells here (the journal's
     * replay builds any state a scene was in from cells). */
    if (made && req->raw && pd_scene_check_walkable(made, NULL, out->message, sizeof out->message) != 0) {
        pd_scene_release(made);
        made = NULL;
    }
    if (!made)
        out->status = PD_INVALID_ARGUMENT;
    return made;
}

pd_status pd_query_create_scene(pd_store *store, const pd_scene_change_req *req, const pd_query_control *ctl,
                                pd_scene_change_outcome *out)
{
    memset(out, 0, sizeof *out);
    pd_store_change *c = &out->change;
    pd_registry *registry = pd_store_registry(store);
    pd_scene *made = req->scene ? pd__scene_of_request(registry, req, ctl, c) : NULL;
    if (!made) {
        if (!req->scene)
            c->status = PD_INVALID_ARGUMENT;
        c->scene_bytes = pd_registry_bytes(registry);
        return c->status;
    }
    pd_scene_retain(made); /* to describe it once it is served */
    pd_store_add_scene_keyed(store, made, req->idem_key, c);
    if (c->applied)
        pd_scene_describe(made, out->built, sizeof out->built);
    pd_scene_release(made);
    return c->status;
}

pd_status pd_query_create_instance(pd_store *store, const pd_scene_change_req *req, pd_scene_change_outcome *out)
{
    memset(out, 0, sizeof *out);
    return pd_store_add_instance_keyed(store, req->name, req->tmpl, req->idem_key, &out->change);
}

pd_status pd_query_drop_scene(pd_store *store, const pd_scene_change_req *req, pd_scene_change_outcome *out)
{
    memset(out, 0, sizeof *out);
    return pd_store_drop_scene_keyed(store, req->name, req->drop_portals, req->idem_key, &out->change);
}
