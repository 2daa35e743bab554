/*
 * pd_movement.c - the movement queries (see pd_movement.h).
 *
 * ValidateMove checks each claimed point in order: inside the scene, on an
 * open cell, a time later than the previous point's, a walkable segment
 * from the previous point (a Raycast), and a speed - world distance over
 * time - of at most max_speed * (1 + tolerance). The first failure names
 * the point and the reason; last_valid is the last position the unit
 * legally reached: the previous point, or, for a segment through a wall,
 * where the segment meets it.
 */
#include "pd_movement.h"
#include "pd_clock.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* World points farther than this (in cells) from the scene's origin are out
 * of bounds before any fixed-point arithmetic: it keeps every position and
 * displacement well inside int64 products. */
#define PD__MAX_CELLS_OUT (4.0 * PD_GRID_MAX_SIDE)

static void pd__fail(pd_move_result *r, pd_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void pd__fail(pd_move_result *r, pd_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->message, sizeof r->message, fmt, ap);
    va_end(ap);
    r->status = st;
}

/* A point as a fixed-point position on the grid; 0 for a world point too
 * far out to represent (it is outside the scene anyway). */
static int pd__to_fixed(const pd_scene *scene, const pd_point_spec *p, pd_fpoint *out)
{
    if (!p->is_world) {
        *out = pd_move_cell_center(p->cell);
        return 1;
    }
    double vx = (p->wx - scene->origin_x) / scene->cell_size * PD_MOVE_SUBCELL;
    double vy = (p->wy - scene->origin_y) / scene->cell_size * PD_MOVE_SUBCELL;
    const double lim = PD__MAX_CELLS_OUT * PD_MOVE_SUBCELL;
    if (!(fabs(vx) < lim && fabs(vy) < lim))
        return 0;
    out->x = (int64_t)floor(vx);
    out->y = (int64_t)floor(vy);
    return 1;
}

static int pd__inside(const pd_grid *g, pd_fpoint p)
{
    pd_point c = pd_move_cell_of(p);
    return pd_grid_in_bounds(g, c.x, c.y);
}

static void pd__world_of(const pd_scene *scene, pd_fpoint p, double *wx, double *wy)
{
    *wx = scene->origin_x + (double)p.x / PD_MOVE_SUBCELL * scene->cell_size;
    *wy = scene->origin_y + (double)p.y / PD_MOVE_SUBCELL * scene->cell_size;
}

static void pd__set_cell(pd_move_result *r, const pd_scene *scene, pd_fpoint p)
{
    r->has_cell = 1;
    r->cell = pd_move_cell_of(p);
    pd__world_of(scene, p, &r->wx, &r->wy);
}

/* Names a point in a message: "cell (3, 4)" or "world (1.5, -2)". */
static void pd__describe(const pd_point_spec *p, char *buf, size_t len)
{
    if (p->is_world)
        snprintf(buf, len, "world (%g, %g)", p->wx, p->wy);
    else
        snprintf(buf, len, "cell (%" PRId32 ", %" PRId32 ")", p->cell.x, p->cell.y);
}

/* Resolves a point that must lie inside the scene. */
static pd_status pd__resolve(const pd_scene *scene, const pd_grid *g, const pd_point_spec *p, const char *what,
                             pd_fpoint *out, pd_move_result *r)
{
    if (pd__to_fixed(scene, p, out) && pd__inside(g, *out))
        return PD_OK;
    char where[PD_WHERE_MAX];
    pd__describe(p, where, sizeof where);
    pd__fail(r, PD_OUT_OF_BOUNDS, "%s %s is outside scene '%s' (%" PRId32 "x%" PRId32 ")", what, where,
             scene->name, g->width, g->height);
    return PD_OUT_OF_BOUNDS;
}

/* The name a kind's first point goes by in its messages ("from" for those
 * not listed). */
static const char *const pd__first_names[PD_REQ__COUNT] = {
    [PD_REQ_NEAREST] = "at",
    [PD_REQ_DISTANCE_TO_WALL] = "at",
    [PD_REQ_RANDOM_POINT] = "around",
};

static const char *pd__first_name(pd_request_kind kind)
{
    return (unsigned)kind < PD_REQ__COUNT && pd__first_names[kind] ? pd__first_names[kind] : "from";
}

/* A Batch's FindPath item: the path pipeline's own checks, on the same
 * snapshot; max_expansions 0 stays 0 here (the server puts its default in
 * the request first). */
static pd_status pd__prepare_path(const pd_scene *scene, const pd_move_req *req, pd_move_query *q,
                                  pd_move_result *r)
{
    q->path = malloc(sizeof *q->path);
    if (!q->path) {
        pd__fail(r, PD_INTERNAL, "out of memory");
        return r->status;
    }
    char err[PD_QUERY_MESSAGE_MAX] = "";
    pd_status st = pd_query_path_prepare(scene, req->path, 0, q->path, err, sizeof err);
    if (st != PD_OK)
        pd__fail(r, st, "%s", err);
    return st;
}

pd_status pd_move_prepare(pd_scene *scene, const pd_move_req *req, pd_move_query *q, pd_move_result *r)
{
    memset(q, 0, sizeof *q);
    memset(r, 0, sizeof *r);
    r->first_invalid = -1;
    q->kind = req->kind;
    q->scene = scene;
    if (req->status != PD_OK) {
        pd__fail(r, req->status, "%s", req->message);
        return r->status;
    }
    if (!scene) {
        pd__fail(r, PD_UNKNOWN_SCENE, "unknown scene '%s'", req->scene);
        return r->status;
    }
    r->version = scene->version;
    if ((r->status = pd_query_check_version(scene, req->min_version, r->message, sizeof r->message)) != PD_OK)
        return r->status;
    if (req->kind == PD_REQ_FIND_PATH)
        return pd__prepare_path(scene, req, q, r);
    const pd_scene_unit *unit = pd_scene_unit_for(scene, req->unit_size);
    if (!unit) {
        pd__fail(r, PD_INVALID_ARGUMENT, "scene '%s' does not serve unit size %" PRIu32, scene->name,
                 req->unit_size);
        return r->status;
    }
    q->grid = unit->grid;
    q->labels = unit->components;
    q->radius = req->radius;
    q->seed = req->seed;
    q->max_speed = req->max_speed;
    q->tolerance = req->tolerance;
    q->moves = req->moves;
    q->n_moves = req->n_moves;
    if (req->kind == PD_REQ_VALIDATE_MOVE)
        return PD_OK; /* out-of-scene points are an answer, not an error */
    if (pd__resolve(scene, q->grid, &req->a, pd__first_name(req->kind), &q->a, r) != PD_OK)
        return r->status;
    if (req->kind == PD_REQ_RAYCAST || req->kind == PD_REQ_REACHABLE || (req->kind == PD_REQ_NEAREST && req->has_b)) {
        q->has_b = 1;
        const char *what = req->kind == PD_REQ_NEAREST ? "reachable_from" : "to";
        if (pd__resolve(scene, q->grid, &req->b, what, &q->b, r) != PD_OK)
            return r->status;
    }
    if (req->kind == PD_REQ_MOVE_ALONG) {
        /* Cells for a cell start, world units for a world start. */
        double scale = PD_MOVE_SUBCELL / (req->a.is_world ? scene->cell_size : 1.0);
        double dx = req->dx * scale, dy = req->dy * scale;
        const double lim = PD__MAX_CELLS_OUT * PD_MOVE_SUBCELL;
        if (!(fabs(dx) < lim && fabs(dy) < lim)) {
            pd__fail(r, PD_INVALID_ARGUMENT, "move_along displacement (%g, %g) reaches past %g cells", req->dx,
                     req->dy, PD__MAX_CELLS_OUT);
            return r->status;
        }
        q->d = (pd_fpoint){(int64_t)llround(dx), (int64_t)llround(dy)};
    }
    return PD_OK;
}

void pd_move_query_release(pd_move_query *q)
{
    if (!q)
        return;
    pd_scene_release(q->scene);
    q->scene = NULL;
    free(q->path);
    q->path = NULL;
}

void pd_move_result_free(pd_move_result *r)
{
    if (r)
        pd_path_result_free(&r->path);
}

/* ---- runs -------------------------------------------------------------- */

static pd_status pd__ray_status(pd_status st, const pd_move_query *q, pd_move_result *r, const char *what)
{
    if (st == PD_START_BLOCKED)
        pd__fail(r, st, "%s cell (%" PRId32 ", %" PRId32 ") is blocked for this unit", what,
                 pd_move_cell_of(q->a).x, pd_move_cell_of(q->a).y);
    else
        pd__fail(r, st, "%s", pd_status_name(st));
    return st;
}

static pd_status pd__raycast(pd_query_scratch *s, const pd_move_query *q, pd_move_result *r)
{
    (void)s;
    pd_ray_result ray;
    pd_status st = pd_move_raycast(q->grid, q->a, q->b, &ray);
    if (st != PD_OK)
        return pd__ray_status(st, q, r, "from");
    r->yes = ray.clear;
    r->has_hit = !ray.clear;
    r->hit = ray.hit;
    pd__set_cell(r, q->scene, ray.stop);
    return PD_OK;
}

static pd_status pd__move_along(pd_query_scratch *s, const pd_move_query *q, pd_move_result *r)
{
    (void)s;
    pd_fpoint end;
    int slid;
    pd_status st = pd_move_slide(q->grid, q->a, q->d, &end, &slid);
    if (st != PD_OK)
        return pd__ray_status(st, q, r, "from");
    r->yes = slid;
    pd__set_cell(r, q->scene, end);
    return PD_OK;
}

static pd_status pd__validate(pd_query_scratch *s, const pd_move_query *q, pd_move_result *r)
{
    (void)s;
    const pd_scene *scene = q->scene;
    const double limit = q->max_speed * (1.0 + q->tolerance);
    pd_fpoint prev = {0, 0};
    r->yes = 0;
    for (size_t i = 0; i < q->n_moves; i++) {
        const pd_timed_point *m = &q->moves[i];
        pd_fpoint p;
        pd_move_reason why = PD_MOVE_VALID;
        pd_ray_result ray;
        if (!pd__to_fixed(scene, &m->point, &p) || !pd__inside(q->grid, p))
            why = PD_MOVE_OUT_OF_BOUNDS;
        else if (pd_grid_get(q->grid, pd_move_cell_of(p).x, pd_move_cell_of(p).y) == PD_CELL_BLOCKED)
            why = PD_MOVE_BLOCKED_POINT;
        else if (i > 0 && !(m->t > q->moves[i - 1].t))
            why = PD_MOVE_TIME_NOT_INCREASING;
        else if (i > 0 && (pd_move_raycast(q->grid, prev, p, &ray) != PD_OK || !ray.clear))
            why = PD_MOVE_BLOCKED_SEGMENT;
        else if (i > 0) {
            double ax, ay, bx, by;
            pd__world_of(scene, prev, &ax, &ay);
            pd__world_of(scene, p, &bx, &by);
            /* A relative slack of 1e-9 keeps a move at exactly the limit legal
             * despite rounding in the world coordinates. */
            if (hypot(bx - ax, by - ay) > limit * (m->t - q->moves[i - 1].t) * (1.0 + 1e-9))
                why = PD_MOVE_TOO_FAST;
        }
        if (why != PD_MOVE_VALID) {
            r->first_invalid = (int32_t)i;
            r->reason = why;
            if (why == PD_MOVE_BLOCKED_SEGMENT)
                pd__set_cell(r, scene, ray.stop);
            else if (i > 0)
                pd__set_cell(r, scene, prev);
            return PD_OK;
        }
        prev = p;
    }
    r->yes = 1;
    r->reason = PD_MOVE_VALID;
    pd__set_cell(r, scene, prev);
    return PD_OK;
}

static uint32_t pd__label(const pd_move_query *q, pd_fpoint p)
{
    return q->labels ? pd_components_label(q->labels, pd_move_cell_of(p)) : 0;
}

static pd_status pd__nearest(pd_query_scratch *s, const pd_move_query *q, pd_move_result *r)
{
    (void)s;
    uint32_t label = 0;
    if (q->has_b) {
        label = pd__label(q, q->b);
        if (label == 0 && q->labels) {
            pd__fail(r, PD_START_BLOCKED, "reachable_from cell (%" PRId32 ", %" PRId32 ") is blocked for this unit",
                     pd_move_cell_of(q->b).x, pd_move_cell_of(q->b).y);
            return r->status;
        }
    }
    pd_point cell;
    double dist;
    pd_status st = pd_move_nearest_open(q->grid, pd_move_cell_of(q->a), (uint32_t)q->radius, q->labels, label,
                                        &cell, &dist);
    if (st != PD_OK) {
        pd__fail(r, st, "no cell the unit fits on within %g cells%s", q->radius,
                 label ? " in reachable_from's component" : "");
        return st;
    }
    pd__set_cell(r, q->scene, pd_move_cell_center(cell));
    r->distance = dist;
    return PD_OK;
}

static pd_status pd__reachable(pd_query_scratch *s, const pd_move_query *q, pd_move_result *r)
{
    (void)s;
    if (!q->labels) {
        pd__fail(r, PD_INTERNAL, "scene '%s' has no component labels", q->scene->name);
        return r->status;
    }
    uint32_t la = pd__label(q, q->a);
    r->yes = la != 0 && la == pd__label(q, q->b);
    return PD_OK;
}

/* splitmix64: the seed's stream; one draw picks the cell. */
static uint64_t pd__splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15u;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
    return x ^ (x >> 31);
}

/* A seed for a request that sent 0: distinct per call and per process. */
static uint64_t pd__fresh_seed(void)
{
    static atomic_uint_fast64_t counter;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t seed = pd__splitmix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^
                                   pd__splitmix64(atomic_fetch_add(&counter, 1)));
    return seed ? seed : 1;
}

static pd_status pd__random_point(pd_query_scratch *s, const pd_move_query *q, pd_move_result *r)
{
    pd_move_area *area = pd_query_scratch_move_area(s);
    size_t n = 0;
    pd_status st = pd_move_within(q->grid, pd_move_cell_of(q->a), q->radius, area, &n);
    if (st != PD_OK)
        return pd__ray_status(st, q, r, "around");
    uint64_t seed = q->seed ? q->seed : pd__fresh_seed();
    /* Multiply-shift maps the 64-bit draw onto [0, n) with a bias below
     * n / 2^64, far under anything a test could see. */
    size_t pick = (size_t)(((unsigned __int128)pd__splitmix64(seed) * n) >> 64);
    pd__set_cell(r, q->scene, pd_move_cell_center(area->cells[pick]));
    r->seed = seed;
    r->candidates = n;
    return PD_OK;
}

static pd_status pd__distance_to_wall(pd_query_scratch *s, const pd_move_query *q, pd_move_result *r)
{
    (void)s;
    double dist;
    pd_point wall;
    r->has_hit = pd_move_distance_to_wall(q->grid, pd_move_cell_of(q->a), (uint32_t)q->radius, &dist, &wall);
    r->hit = wall;
    r->distance = dist;
    return PD_OK;
}

/* A FindPath item: the path pipeline, then the cap on what one batch item
 * may carry (PD_BATCH_MAX_PATH_WAYPOINTS). */
static pd_status pd__find_path_item(pd_query_scratch *s, const pd_move_query *q, pd_move_result *r)
{
    pd_status st = pd_query_find_path(s, q->scene, q->path, &q->control, &r->path);
    r->scene = q->scene; /* the item ran: its answer carries a PathChunk */
    if (r->path.path_len > PD_BATCH_MAX_PATH_WAYPOINTS) {
        pd__fail(r, PD_FRAME_TOO_LARGE,
                 "the path has %zu waypoints; a batch item carries at most %u: ask for it alone, or with style "
                 "CORNERS or SMOOTH", r->path.path_len, PD_BATCH_MAX_PATH_WAYPOINTS);
        pd_path_result_free(&r->path);
        return PD_FRAME_TOO_LARGE;
    }
    /* Like a FindPath answered alone, the status and the chunk say it all:
     * no message. */
    return st;
}

/* Each movement kind's query, and a Batch's FindPath item's. */
typedef pd_status (*pd__move_run_fn)(pd_query_scratch *s, const pd_move_query *q, pd_move_result *r);
static const pd__move_run_fn pd__runs[PD_REQ__COUNT] = {
    [PD_REQ_FIND_PATH] = pd__find_path_item,
    [PD_REQ_RAYCAST] = pd__raycast,
    [PD_REQ_VALIDATE_MOVE] = pd__validate,
    [PD_REQ_MOVE_ALONG] = pd__move_along,
    [PD_REQ_NEAREST] = pd__nearest,
    [PD_REQ_REACHABLE] = pd__reachable,
    [PD_REQ_RANDOM_POINT] = pd__random_point,
    [PD_REQ_DISTANCE_TO_WALL] = pd__distance_to_wall,
};

pd_status pd_move_run(pd_query_scratch *s, const pd_move_query *q, pd_move_result *r)
{
    const uint64_t started = pd_clock_ns();
    pd__move_run_fn run = (unsigned)q->kind < PD_REQ__COUNT ? pd__runs[q->kind] : NULL;
    if (run)
        r->status = run(s, q, r);
    else
        pd__fail(r, PD_INVALID_ARGUMENT, "not a movement query");
    r->micros = q->kind == PD_REQ_FIND_PATH ? r->path.metrics.micros : pd_clock_us_since(started);
    return r->status;
}
