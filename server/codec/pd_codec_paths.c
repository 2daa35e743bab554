/*
 * pd_codec_paths.c - the path family on the wire: FindPath and FindRoute
 * decoded (style, goal mode, timing, goal sets, windows, avoid lists) and
 * their answers encoded (PathChunk frames of packed waypoints, RouteLeg
 * frames and the final RouteResult).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_codec_internal.h"
#include "pd_kind_reserve.h"
#include "pd_sipp.h"
#include "pd_yield.h"

/* The waypoint style, goal mode and timing fields FindPath and FindRoute
 * share; `what` names the message in errors. Unknown enum numbers arrive as
 * they were sent, so they are compared with the schema's values. */
static pd_status pd__decode_style(int style, const char *what, pd_waypoint_style *out, char *err,
                                  size_t errlen)
{
    switch (style) {
    case PATHD__V1__WAYPOINT_STYLE__STYLE_CELLS:
        *out = PD_STYLE_CELLS;
        return PD_OK;
    case PATHD__V1__WAYPOINT_STYLE__STYLE_CORNERS:
        *out = PD_STYLE_CORNERS;
        return PD_OK;
    case PATHD__V1__WAYPOINT_STYLE__STYLE_SMOOTH:
        *out = PD_STYLE_SMOOTH;
        return PD_OK;
    default:
        pd_set_err(err, errlen, "%s.style %d is not STYLE_CELLS (0), STYLE_CORNERS (1) or STYLE_SMOOTH (2)",
                    what, style);
        return PD_INVALID_ARGUMENT;
    }
}

static pd_status pd__decode_goal_mode(int mode, const char *what, pd_goal_mode *out, char *err,
                                      size_t errlen)
{
    switch (mode) {
    case PATHD__V1__GOAL_MODE__GOAL_EXACT:
        *out = PD_GOAL_EXACT;
        return PD_OK;
    case PATHD__V1__GOAL_MODE__GOAL_NEAREST:
        *out = PD_GOAL_NEAREST;
        return PD_OK;
    case PATHD__V1__GOAL_MODE__GOAL_LINE:
        *out = PD_GOAL_LINE;
        return PD_OK;
    default:
        pd_set_err(err, errlen, "%s.goal_mode %d is not GOAL_EXACT (0), GOAL_NEAREST (1) or GOAL_LINE (2)",
                    what, mode);
        return PD_INVALID_ARGUMENT;
    }
}

static pd_status pd__decode_timing(double speed, double start_time, const char *what, char *err,
                                   size_t errlen)
{
    if (!isfinite(speed) || speed < 0) {
        pd_set_err(err, errlen, "%s.speed %g is not a finite number >= 0", what, speed);
        return PD_INVALID_ARGUMENT;
    }
    if (!isfinite(start_time)) {
        pd_set_err(err, errlen, "%s.start_time is not finite", what);
        return PD_INVALID_ARGUMENT;
    }
    return PD_OK;
}

/* FindPath's range, line_of_sight and goals, and the combinations that make
 * no sense: both goal and goals, line of sight without a range, a goal_mode
 * fallback with several goals (nearest to which?). */
static pd_status pd__decode_goal_set(const Pathd__V1__FindPath *m, pd_find_path_req *out, char *err,
                                     size_t errlen)
{
    if (!isfinite(m->range) || m->range < 0 || m->range > PD_FINDPATH_MAX_RANGE) {
        pd_set_err(err, errlen, "find_path.range %g is not a number in 0..%g (cells)", m->range,
                    PD_FINDPATH_MAX_RANGE);
        return PD_INVALID_ARGUMENT;
    }
    out->range = m->range;
    if (m->line_of_sight && !(m->range > 0)) {
        pd_set_err(err, errlen, "find_path.line_of_sight needs find_path.range > 0");
        return PD_INVALID_ARGUMENT;
    }
    out->line_of_sight = m->line_of_sight != 0;
    if (m->n_goals == 0)
        return PD_OK;
    if (m->n_goals > PD_FINDPATH_MAX_GOALS) {
        pd_set_err(err, errlen, "find_path.goals has %zu points; at most %d allowed", m->n_goals,
                    PD_FINDPATH_MAX_GOALS);
        return PD_INVALID_ARGUMENT;
    }
    if (m->goal != NULL) {
        pd_set_err(err, errlen, "find_path.goal and find_path.goals are exclusive: send one");
        return PD_INVALID_ARGUMENT;
    }
    if (out->goal_mode != PD_GOAL_EXACT) {
        pd_set_err(err, errlen, "find_path.goal_mode must be GOAL_EXACT with find_path.goals");
        return PD_INVALID_ARGUMENT;
    }
    out->goals = calloc(m->n_goals, sizeof *out->goals);
    if (out->goals == NULL) {
        pd_set_err(err, errlen, "out of memory for %zu goals", m->n_goals);
        return PD_INTERNAL;
    }
    out->n_goals = m->n_goals;
    for (size_t i = 0; i < m->n_goals; i++) {
        char field[40];
        snprintf(field, sizeof field, "find_path.goals[%zu]", i);
        pd_status st = pd__decode_point(m->goals[i], field, &out->goals[i], err, errlen);
        if (st != PD_OK)
            return st;
    }
    return PD_OK;
}

/* A search's unit_size (0 means 1) and connectivity, of the request `what`.
 * protobuf-c keeps unknown enum numbers as they arrived, so the
 * connectivity is compared with every value the schema defines rather
 * than trusted for its type. */
static pd_status pd__decode_unit_conn(const char *what, uint32_t unit_size, int connectivity, uint32_t *unit_out,
                                      pd_connectivity *conn_out, char *err, size_t errlen)
{
    *unit_out = unit_size == 0 ? 1 : unit_size;
    if (*unit_out > PD_CONF_MAX_UNIT_SIZE) {
        pd_set_err(err, errlen, "%s.unit_size %u is above the limit %d", what, (unsigned)unit_size,
                   PD_CONF_MAX_UNIT_SIZE);
        return PD_INVALID_ARGUMENT;
    }
    switch (connectivity) {
    case PATHD__V1__CONNECTIVITY__CONNECTIVITY_DEFAULT:
    case PATHD__V1__CONNECTIVITY__CONNECTIVITY_8:
        *conn_out = PD_CONNECT_8;
        return PD_OK;
    case PATHD__V1__CONNECTIVITY__CONNECTIVITY_4:
        *conn_out = PD_CONNECT_4;
        return PD_OK;
    default:
        pd_set_err(err, errlen, "%s.connectivity %d is not 4 or 8", what, connectivity);
        return PD_INVALID_ARGUMENT;
    }
}

/* FindPath.avoid_reserved: ReservePath's planner (SIPP) without the
 * reserving, which needs a time and a speed and plans to one goal cell,
 * cell by cell. What it cannot honour is refused rather than ignored. */
static pd_status pd__decode_avoid_reserved(const Pathd__V1__FindPath *m, pd_find_path_req *out, char *err,
                                           size_t errlen)
{
    if (!m->avoid_reserved)
        return PD_OK;
    const char *other = m->n_goals ? "goals" : m->range > 0 ? "range" : m->window ? "window"
                      : m->n_avoid ? "avoid" : m->snap ? "snap" : m->partial_on_cutoff ? "partial_on_cutoff"
                      : m->goal_mode != PATHD__V1__GOAL_MODE__GOAL_EXACT ? "goal_mode"
                      : m->style != PATHD__V1__WAYPOINT_STYLE__STYLE_CELLS ? "style" : NULL;
    if (other) {
        pd_set_err(err, errlen, "find_path.avoid_reserved plans to one goal, cell by cell: it does not take "
                   "find_path.%s", other);
        return PD_INVALID_ARGUMENT;
    }
    if (!(m->speed > 0)) {
        pd_set_err(err, errlen, "find_path.avoid_reserved needs find_path.speed > 0 (the reservations are timed)");
        return PD_INVALID_ARGUMENT;
    }
    /* The reservations' game time, in ms: 0..PD_SIPP_MAX_T0 as ReservePath's t0_ms. */
    if (!(m->start_time >= 0) || m->start_time * 1000.0 > (double)PD_SIPP_MAX_T0) {
        pd_set_err(err, errlen, "find_path.start_time %g is outside 0..%g seconds (avoid_reserved)", m->start_time,
                   (double)PD_SIPP_MAX_T0 / 1000.0);
        return PD_INVALID_ARGUMENT;
    }
    out->avoid_reserved = 1;
    return PD_OK;
}

pd_status pd__decode_find_path(const Pathd__V1__FindPath *m, pd_find_path_req *out,
                                      char *err, size_t errlen)
{
    pd_status st = pd__decode_scene_name(m->scene, "find_path.scene", out->scene, err, errlen);
    if (st != PD_OK)
        return st;
    if ((st = pd__decode_point(m->start, "find_path.start", &out->start, err, errlen)) != PD_OK)
        return st;
    if (m->n_goals == 0 && (st = pd__decode_point(m->goal, "find_path.goal", &out->goal, err, errlen)) != PD_OK)
        return st;

    if ((st = pd__decode_unit_conn("find_path", m->unit_size, (int)m->connectivity, &out->unit_size,
                                   &out->connectivity, err, errlen)) != PD_OK)
        return st;

    if ((st = pd__decode_style((int)m->style, "find_path", &out->style, err, errlen)) != PD_OK ||
        (st = pd__decode_goal_mode((int)m->goal_mode, "find_path", &out->goal_mode, err, errlen)) != PD_OK ||
        (st = pd__decode_timing(m->speed, m->start_time, "find_path", err, errlen)) != PD_OK)
        return st;

    out->speed = m->speed;
    out->start_time = m->start_time;
    out->snap = m->snap != 0;
    out->partial_on_cutoff = m->partial_on_cutoff != 0;
    out->want_world = m->want_world != 0;
    out->min_version = m->min_version;

    if (m->window != NULL) {
        if ((st = pd__decode_rect(m->window, "find_path.window", &out->window_min, &out->window_max, err,
                                  errlen)) != PD_OK)
            return st;
        if (out->window_min.x < 0 || out->window_min.y < 0) {
            pd_set_err(err, errlen, "find_path.window has a negative corner (%d,%d)",
                        (int)out->window_min.x, (int)out->window_min.y);
            return PD_INVALID_ARGUMENT;
        }
        out->has_window = 1;
    }

    if (m->n_avoid > PD_CODEC_MAX_AVOID) {
        pd_set_err(err, errlen, "find_path.avoid has %zu cells; at most %u allowed", m->n_avoid,
                    PD_CODEC_MAX_AVOID);
        return PD_INVALID_ARGUMENT;
    }
    if (m->n_avoid > 0) {
        if ((st = pd__copy_cells(m->avoid, m->n_avoid, "find_path.avoid", &out->avoid, err, errlen)) != PD_OK)
            return st;
        out->n_avoid = m->n_avoid;
    }

    if (m->deadline_ms > PD_CODEC_MAX_DEADLINE_MS) {
        pd_set_err(err, errlen, "find_path.deadline_ms %u is above the limit %u", (unsigned)m->deadline_ms,
                    PD_CODEC_MAX_DEADLINE_MS);
        return PD_INVALID_ARGUMENT;
    }
    out->deadline_ms = m->deadline_ms;
    out->max_expansions = m->max_expansions;
    if ((st = pd__decode_goal_set(m, out, err, errlen)) != PD_OK)
        return st;
    return pd__decode_avoid_reserved(m, out, err, errlen);
}

static pd_status pd__decode_find_route(const Pathd__V1__FindRoute *m, pd_find_route_req *out,
                                       char *err, size_t errlen)
{
    pd_status st = pd__decode_scene_name(m->from_scene, "find_route.from_scene", out->from_scene, err, errlen);
    if (st != PD_OK)
        return st;
    if ((st = pd__decode_scene_name(m->to_scene, "find_route.to_scene", out->to_scene, err, errlen)) != PD_OK)
        return st;
    if ((st = pd__decode_point(m->start, "find_route.start", &out->start, err, errlen)) != PD_OK)
        return st;
    if ((st = pd__decode_point(m->goal, "find_route.goal", &out->goal, err, errlen)) != PD_OK)
        return st;

    out->unit_size = m->unit_size == 0 ? 1 : m->unit_size;
    if (out->unit_size > PD_CONF_MAX_UNIT_SIZE) {
        pd_set_err(err, errlen, "find_route.unit_size %u is above the limit %d", (unsigned)m->unit_size,
                    PD_CONF_MAX_UNIT_SIZE);
        return PD_INVALID_ARGUMENT;
    }
    if ((st = pd__decode_style((int)m->style, "find_route", &out->style, err, errlen)) != PD_OK ||
        (st = pd__decode_goal_mode((int)m->goal_mode, "find_route", &out->goal_mode, err, errlen)) != PD_OK ||
        (st = pd__decode_timing(m->speed, m->start_time, "find_route", err, errlen)) != PD_OK)
        return st;
    if (m->deadline_ms > PD_CODEC_MAX_DEADLINE_MS) {
        pd_set_err(err, errlen, "find_route.deadline_ms %u is above the limit %u", (unsigned)m->deadline_ms,
                    PD_CODEC_MAX_DEADLINE_MS);
        return PD_INVALID_ARGUMENT;
    }
    out->speed = m->speed;
    out->start_time = m->start_time;
    out->deadline_ms = m->deadline_ms;
    out->max_expansions = m->max_expansions;
    out->want_world = m->want_world != 0;
    return PD_OK;
}

/* Lays b's arrays out in stack (stack_bytes, double-aligned) when n
 * waypoints fit there, else in one malloc'd block (b->block, for free). */
static int pd__points_alloc_in(pd__points_buf *b, size_t n, void *stack, size_t stack_bytes)
{
    double *d;
    memset(b, 0, sizeof *b);
    if (n == 0)
        n = 1;
    /* The doubles first, so every array is aligned for its type. */
    if (PD__POINTS_BYTES(n) <= stack_bytes) {
        d = stack;
    } else {
        b->block = malloc(PD__POINTS_BYTES(n));
        if (b->block == NULL)
            return -1;
        d = b->block;
    }
    b->t = d;
    b->wx = d + n;
    b->wy = d + 2 * n;
    b->dx = (int32_t *)(d + 3 * n);
    b->dy = b->dx + n;
    return 0;
}

/* Fills b->msg with path[first .. first + count): cells delta-coded from
 * the frame's first (absolute) cell, times when there are any, world
 * centres of the cells when scene is given. NULL for an empty slice, so an
 * empty frame carries no points field. */
int pd__points_alloc(pd__points_buf *b, size_t n)
{
    return pd__points_alloc_in(b, n, NULL, 0);
}

static Pathd__V1__Waypoints *pd__fill_points(pd__points_buf *b, const pd_scene *scene, const pd_point *path,
                                             const double *times, size_t first, size_t count)
{
    pd_point prev = {0, 0};

    if (count == 0)
        return NULL;
    pathd__v1__waypoints__init(&b->msg);
    for (size_t i = 0; i < count; i++) {
        pd_point cell = path[first + i];
        /* Wrapping subtraction: cells are small, but the wire must not
         * depend on it for defined behaviour. */
        b->dx[i] = (int32_t)((uint32_t)cell.x - (uint32_t)prev.x);
        b->dy[i] = (int32_t)((uint32_t)cell.y - (uint32_t)prev.y);
        prev = cell;
        if (scene != NULL)
            pd_scene_cell_center(scene, cell, &b->wx[i], &b->wy[i]);
    }
    b->msg.n_dx = b->msg.n_dy = count;
    b->msg.dx = b->dx;
    b->msg.dy = b->dy;
    if (times != NULL) {
        memcpy(b->t, times + first, count * sizeof *b->t);
        b->msg.n_t = count;
        b->msg.t = b->t;
    }
    if (scene != NULL) {
        b->msg.n_wx = b->msg.n_wy = count;
        b->msg.wx = b->wx;
        b->msg.wy = b->wy;
    }
    return &b->msg;
}

/* Fills chunk `seq` of a path answer: its waypoints, and for the last chunk
 * the status and totals. pts has room for max_per_chunk waypoints; world is
 * the scene when world coordinates were asked for, else NULL. */
void pd__fill_path_chunk(uint64_t id, const pd_scene *scene, const pd_scene *world, const pd_path_result *r,
                                size_t path_len, uint32_t max_per_chunk, size_t seq, size_t n_chunks,
                                pd__points_buf *pts, pd__chunk_extras *extras, Pathd__V1__PathChunk *chunk,
                                Pathd__V1__Response *resp)
{
    size_t first = seq * max_per_chunk;
    size_t count = path_len - first < max_per_chunk ? path_len - first : max_per_chunk;
    int last = seq + 1 == n_chunks;

    pathd__v1__path_chunk__init(chunk);
    pathd__v1__response__init(resp);
    chunk->points = pd__fill_points(pts, world, r->path, r->times, first, count);
    chunk->seq = (uint32_t)seq;
    resp->id = id;
    resp->body_case = PATHD__V1__RESPONSE__BODY_PATH;
    resp->path = chunk;
    if (last) {
        chunk->cost = r->metrics.cost;
        chunk->expansions = r->metrics.expanded;
        chunk->search_micros = r->metrics.micros;
        chunk->scene_version = scene != NULL ? scene->version : 0;
        chunk->total_waypoints = (uint32_t)path_len;
        if (r->start_substituted) {
            pathd__v1__cell__init(&extras->start_used);
            extras->start_used.x = r->start_used.x;
            extras->start_used.y = r->start_used.y;
            chunk->start_used = &extras->start_used;
        }
        if (r->goal_substituted) {
            pathd__v1__cell__init(&extras->goal_used);
            extras->goal_used.x = r->goal_used.x;
            extras->goal_used.y = r->goal_used.y;
            chunk->goal_used = &extras->goal_used;
        }
        if (r->metrics.cutoff != PD_OK)
            chunk->cutoff = pd__wire_status(r->metrics.cutoff);
        if (r->has_target)
            chunk->goal_index = r->target;
        resp->status = pd__wire_status(r->status);
        resp->final = 1;
        if (r->message[0])
            resp->message = (char *)r->message;
    }
}

/* Frame i of an answer of several, filled in the caller's messages; the
 * fill of frame i may reuse what frame i - 1's left (frames are asked for
 * in order, from 0, in each pass). */
typedef const Pathd__V1__Response *(*pd__frame_fn)(void *ctx, size_t i);

/* An answer of n frames in one buffer, in two passes over the same frames:
 * size them all, then pack each into the buffer, so the net layer gets the
 * whole answer as a single write. One frame (most answers) is packed from
 * the message and the sizes the sizing pass built; with several, the
 * messages are refilled one at a time, so each is sized again before it is
 * packed. NULL when out of memory. */
static uint8_t *pd__encode_frames(size_t n, pd__frame_fn frame, void *ctx, size_t *out_len)
{
    size_t total = 0, off = 0;
    const Pathd__V1__Response *resp = NULL;
    pd__frame_plan plan;
    *out_len = 0;
    for (size_t i = 0; i < n; i++)
        total += pd__frame_size(resp = frame(ctx, i), &plan);
    uint8_t *buf = malloc(total);
    if (buf == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (n > 1)
            pd__frame_size(resp = frame(ctx, i), &plan);
        off += pd__frame_pack(resp, &plan, buf + off);
    }
    *out_len = off;
    return buf;
}

/* A FindPath answer's chunks, for pd__encode_frames. */
typedef struct pd__path_frames {
    uint64_t id;
    const pd_scene *scene, *world;
    const pd_path_result *r;
    size_t path_len;
    uint32_t max_per_chunk;
    size_t n_chunks;
    pd__points_buf *pts;
    pd__chunk_extras *extras;
    Pathd__V1__PathChunk *chunk;
    Pathd__V1__Response *resp;
} pd__path_frames;

static const Pathd__V1__Response *pd__path_frame(void *ctx, size_t seq)
{
    pd__path_frames *f = ctx;
    pd__fill_path_chunk(f->id, f->scene, f->world, f->r, f->path_len, f->max_per_chunk, seq, f->n_chunks, f->pts,
                        f->extras, f->chunk, f->resp);
    return f->resp;
}

uint8_t *pd_codec_encode_path(uint64_t id, const pd_scene *scene, const pd_path_result *r,
                              uint32_t max_per_chunk, int want_world, size_t *out_len)
{
    size_t path_len = r->path != NULL ? r->path_len : 0;
    size_t n_chunks;
    const pd_scene *world = want_world ? scene : NULL;
    pd__points_buf pts;
    double stack_points[PD__POINTS_BYTES(PD__POINTS_ON_STACK) / sizeof(double)];
    Pathd__V1__PathChunk chunk;
    Pathd__V1__Response resp;
    pd__chunk_extras extras;
    uint8_t *buf = NULL;

    *out_len = 0;
    /* A chunk must hold at least one waypoint, or a path could never end. */
    if (max_per_chunk == 0)
        max_per_chunk = 1;
    n_chunks = path_len == 0 ? 1 : (path_len + max_per_chunk - 1) / max_per_chunk;
    if (pd__points_alloc_in(&pts, path_len < max_per_chunk ? path_len : max_per_chunk, stack_points,
                            sizeof stack_points) != 0)
        return NULL;

    pd__path_frames pf = {id, scene, world, r, path_len, max_per_chunk, n_chunks, &pts, &extras, &chunk, &resp};
    buf = pd__encode_frames(n_chunks, pd__path_frame, &pf, out_len);
    free(pts.block);
    return buf;
}

/* The protobuf objects of one route frame; pts has room for max_per_chunk
 * waypoints, leg_costs/versions for every leg. */
typedef struct pd__route_msg {
    Pathd__V1__Response resp;
    Pathd__V1__RouteLeg leg;
    Pathd__V1__PortalHop hop;
    Pathd__V1__Cell exit, entry, goal_used;
    Pathd__V1__RouteResult result;
    pd__points_buf pts;
    double *leg_costs;
    uint64_t *versions;
} pd__route_msg;

/* Fills frame `seq` of leg `li`: its slice of waypoints and, on the leg's
 * last frame, the cost and the portal. */
static void pd__fill_route_leg(uint64_t id, const pd_route_result *r, size_t li, size_t seq, size_t n_frames,
                               uint32_t max_per_chunk, int want_world, pd__route_msg *m)
{
    const pd_route_leg *leg = &r->legs[li];
    size_t first = seq * max_per_chunk;
    size_t count = leg->path_len - first < max_per_chunk ? leg->path_len - first : max_per_chunk;

    pathd__v1__response__init(&m->resp);
    pathd__v1__route_leg__init(&m->leg);
    m->leg.points = pd__fill_points(&m->pts, want_world ? leg->scene : NULL, leg->path, leg->times, first, count);
    m->leg.leg = (uint32_t)li;
    m->leg.scene = (char *)leg->scene->name;
    m->leg.seq = (uint32_t)seq;
    m->leg.scene_version = leg->scene->version;
    if (seq + 1 == n_frames) {
        m->leg.leg_end = 1;
        m->leg.cost = leg->cost;
        m->leg.total_waypoints = (uint32_t)leg->path_len;
        if (leg->has_portal) {
            pathd__v1__portal_hop__init(&m->hop);
            pathd__v1__cell__init(&m->exit);
            pathd__v1__cell__init(&m->entry);
            m->exit.x = leg->portal_exit.x;
            m->exit.y = leg->portal_exit.y;
            m->entry.x = leg->portal_entry.x;
            m->entry.y = leg->portal_entry.y;
            m->hop.name = (char *)leg->portal;
            m->hop.exit = &m->exit;
            m->hop.to_scene = (char *)leg->next_scene;
            m->hop.entry = &m->entry;
            m->hop.cost = leg->portal_cost;
            m->leg.portal = &m->hop;
        }
    }
    /* Like non-final path chunks: the outcome is the final frame's to say. */
    m->resp.id = id;
    m->resp.status = PATHD__V1__STATUS__OK;
    m->resp.body_case = PATHD__V1__RESPONSE__BODY_ROUTE_LEG;
    m->resp.route_leg = &m->leg;
}

static void pd__fill_route_result(uint64_t id, const pd_route_result *r, size_t n_legs, pd__route_msg *m)
{
    pathd__v1__response__init(&m->resp);
    pathd__v1__route_result__init(&m->result);
    for (size_t i = 0; i < n_legs; i++) {
        m->leg_costs[i] = r->legs[i].cost;
        m->versions[i] = r->legs[i].scene->version;
    }
    m->result.legs = (uint32_t)n_legs;
    m->result.total_cost = n_legs > 0 ? r->metrics.cost : 0;
    m->result.n_leg_costs = n_legs;
    m->result.leg_costs = n_legs > 0 ? m->leg_costs : NULL;
    m->result.n_scene_versions = n_legs;
    m->result.scene_versions = n_legs > 0 ? m->versions : NULL;
    m->result.expansions = r->metrics.expanded;
    m->result.micros = r->metrics.micros;
    m->result.pinned = r->pinned != 0;
    if (r->goal_substituted && n_legs > 0) {
        pathd__v1__cell__init(&m->goal_used);
        m->goal_used.x = r->goal_used.x;
        m->goal_used.y = r->goal_used.y;
        m->result.goal_used = &m->goal_used;
    }
    m->resp.id = id;
    m->resp.status = pd__wire_status(r->status);
    m->resp.final = 1;
    if (r->message[0])
        m->resp.message = (char *)r->message;
    m->resp.body_case = PATHD__V1__RESPONSE__BODY_ROUTE_RESULT;
    m->resp.route_result = &m->result;
}

static size_t pd__leg_frames(const pd_route_leg *leg, uint32_t max_per_chunk)
{
    return leg->path_len == 0 ? 1 : (leg->path_len + max_per_chunk - 1) / max_per_chunk;
}

/* A FindRoute answer's frames, for pd__encode_frames: each leg's, then the
 * final RouteResult. The cursor (li, seq) follows the frames in order. */
typedef struct pd__route_frames {
    uint64_t id;
    const pd_route_result *r;
    size_t n_legs;
    uint32_t max_per_chunk;
    int want_world;
    pd__route_msg *m;
    size_t li, seq;
} pd__route_frames;

static const Pathd__V1__Response *pd__route_frame(void *ctx, size_t i)
{
    pd__route_frames *f = ctx;
    if (i == 0)
        f->li = f->seq = 0;
    while (f->li < f->n_legs && f->seq == pd__leg_frames(&f->r->legs[f->li], f->max_per_chunk)) {
        f->li++;
        f->seq = 0;
    }
    if (f->li == f->n_legs) {
        pd__fill_route_result(f->id, f->r, f->n_legs, f->m);
        return &f->m->resp;
    }
    size_t n_frames = pd__leg_frames(&f->r->legs[f->li], f->max_per_chunk);
    pd__fill_route_leg(f->id, f->r, f->li, f->seq, n_frames, f->max_per_chunk, f->want_world, f->m);
    f->seq++;
    return &f->m->resp;
}

uint8_t *pd_codec_encode_route(uint64_t id, const pd_route_result *r, uint32_t max_per_chunk,
                               int want_world, size_t *out_len)
{
    int has_route = (r->status == PD_OK || r->status == PD_PARTIAL) && r->legs != NULL;
    size_t n_legs = has_route ? r->n_legs : 0;
    size_t most = 1;
    pd__route_msg m;
    uint8_t *buf = NULL;

    *out_len = 0;
    memset(&m, 0, sizeof m);
    if (max_per_chunk == 0)
        max_per_chunk = 1;
    for (size_t i = 0; i < n_legs; i++)
        if (r->legs[i].path_len > most)
            most = r->legs[i].path_len;
    if (most > max_per_chunk)
        most = max_per_chunk;
    if (pd__points_alloc(&m.pts, most) != 0)
        return NULL;
    m.leg_costs = malloc((n_legs ? n_legs : 1) * sizeof *m.leg_costs);
    m.versions = malloc((n_legs ? n_legs : 1) * sizeof *m.versions);
    if (!m.leg_costs || !m.versions)
        goto done;

    pd__route_frames rf = {id, r, n_legs, max_per_chunk, want_world, &m, 0, 0};
    size_t n_frames = 1;
    for (size_t li = 0; li < n_legs; li++)
        n_frames += pd__leg_frames(&r->legs[li], max_per_chunk);
    buf = pd__encode_frames(n_frames, pd__route_frame, &rf, out_len);
done:
    free(m.pts.block);
    free(m.leg_costs);
    free(m.versions);
    return buf;
}

static uint8_t *pd__encode_path_job(const pd_job *job, size_t *len)
{
    return pd_codec_encode_path(job->task.tag, job->scene, &job->path, job->max_chunk, job->want_world, len);
}

static uint8_t *pd__encode_route_job(const pd_job *job, size_t *len)
{
    return pd_codec_encode_route(job->task.tag, &job->route, job->max_chunk, job->want_world, len);
}

static pd_status pd__decode_find_path_body(const Pathd__V1__Request *m, const pd__codec_row *row, pd_request *req,
                                           char *err, size_t errlen)
{
    (void)row;
    return pd__decode_find_path(m->find_path, &req->u.find_path, err, errlen);
}

static pd_status pd__decode_find_route_body(const Pathd__V1__Request *m, const pd__codec_row *row,
                                            pd_request *req, char *err, size_t errlen)
{
    (void)row;
    return pd__decode_find_route(m->find_route, &req->u.find_route, err, errlen);
}

/* ---- Reservations: ReservePath, ReleaseAgent, GetReservations ------------- */

static pd_status pd__decode_agent(uint64_t agent, const char *field, pd_reserve_req *out, char *err, size_t errlen)
{
    if (agent == 0) {
        pd_set_err(err, errlen, "%s 0 is not an agent id (ids start at 1)", field);
        return PD_INVALID_ARGUMENT;
    }
    out->agent = agent;
    return PD_OK;
}

static pd_status pd__decode_reserve_path_body(const Pathd__V1__Request *req_m, const pd__codec_row *row,
                                              pd_request *req, char *err, size_t errlen)
{
    (void)row;
    const Pathd__V1__ReservePath *m = req_m->reserve_path;
    pd_reserve_req *out = &req->u.reserve;
    pd_status st = pd__decode_scene_name(m->scene, "reserve_path.scene", out->scene, err, errlen);
    if (st != PD_OK || (st = pd__decode_agent(m->agent, "reserve_path.agent", out, err, errlen)) != PD_OK)
        return st;
    if ((st = pd__decode_point(m->start, "reserve_path.start", &out->start, err, errlen)) != PD_OK)
        return st;
    /* Goal sets and range, as FindPath's (no line of sight or goal_mode). */
    if (!isfinite(m->range) || m->range < 0 || m->range > PD_FINDPATH_MAX_RANGE) {
        pd_set_err(err, errlen, "reserve_path.range %g is not a number in 0..%g (cells)", m->range,
                   PD_FINDPATH_MAX_RANGE);
        return PD_INVALID_ARGUMENT;
    }
    out->range = m->range;
    if (m->n_goals > PD_FINDPATH_MAX_GOALS) {
        pd_set_err(err, errlen, "reserve_path.goals has %zu points; at most %d allowed", m->n_goals,
                   PD_FINDPATH_MAX_GOALS);
        return PD_INVALID_ARGUMENT;
    }
    if (m->n_goals != 0 && m->goal != NULL) {
        pd_set_err(err, errlen, "reserve_path.goal and reserve_path.goals are exclusive: send one");
        return PD_INVALID_ARGUMENT;
    }
    out->n_goals = m->n_goals;
    for (size_t i = 0; i < m->n_goals; i++) {
        char field[40];
        snprintf(field, sizeof field, "reserve_path.goals[%zu]", i);
        if ((st = pd__decode_point(m->goals[i], field, &out->goals[i], err, errlen)) != PD_OK)
            return st;
    }
    if (m->n_goals == 0 && (st = pd__decode_point(m->goal, "reserve_path.goal", &out->goal, err, errlen)) != PD_OK)
        return st;
    if ((st = pd__decode_unit_conn("reserve_path", m->unit_size, (int)m->connectivity, &out->unit_size,
                                   &out->connectivity, err, errlen)) != PD_OK)
        return st;
    if (m->t0_ms < 0 || m->t0_ms > PD_SIPP_MAX_T0) {
        pd_set_err(err, errlen, "reserve_path.t0_ms %lld is not 0..2^60", (long long)m->t0_ms);
        return PD_INVALID_ARGUMENT;
    }
    out->t0_ms = m->t0_ms;
    if (!(m->speed >= PD_SIPP_MIN_SPEED && m->speed <= PD_SIPP_MAX_SPEED)) {
        pd_set_err(err, errlen, "reserve_path.speed %g is not 0.001..1e6 cells per second", m->speed);
        return PD_INVALID_ARGUMENT;
    }
    out->speed = m->speed;
    out->window_ms = PD_RESERVE_DEFAULT_WINDOW_MS;
    if (m->window_case == PATHD__V1__RESERVE_PATH__WINDOW_WINDOW_MS) {
        if (m->window_ms < 0 || m->window_ms > PD_SIPP_MAX_WINDOW_MS) {
            pd_set_err(err, errlen, "reserve_path.window_ms %lld is not 0..2^40", (long long)m->window_ms);
            return PD_INVALID_ARGUMENT;
        }
        out->window_ms = m->window_ms;
    }
    /* Game milliseconds, as t0_ms: 0 (never move anyone) .. 2^60. */
    if (m->yield_after_ms < 0 || m->yield_after_ms > PD_SIPP_MAX_T0) {
        pd_set_err(err, errlen, "reserve_path.yield_after_ms %lld is not 0..2^60 (0: move no one aside)",
                   (long long)m->yield_after_ms);
        return PD_INVALID_ARGUMENT;
    }
    out->yield_after_ms = m->yield_after_ms;
    switch ((int)m->at_goal) {
    case PATHD__V1__AT_GOAL__AT_GOAL_PARK:
        out->at_goal = PD_AT_GOAL_PARK;
        break;
    case PATHD__V1__AT_GOAL__AT_GOAL_VANISH:
        out->at_goal = PD_AT_GOAL_VANISH;
        break;
    default:
        pd_set_err(err, errlen, "reserve_path.at_goal %d is not AT_GOAL_PARK (0) or AT_GOAL_VANISH (1)",
                   (int)m->at_goal);
        return PD_INVALID_ARGUMENT;
    }
    if (m->deadline_ms > PD_CODEC_MAX_DEADLINE_MS) {
        pd_set_err(err, errlen, "reserve_path.deadline_ms %u is above the limit %u", (unsigned)m->deadline_ms,
                   PD_CODEC_MAX_DEADLINE_MS);
        return PD_INVALID_ARGUMENT;
    }
    out->deadline_ms = m->deadline_ms;
    out->max_expansions = m->max_expansions;
    out->min_version = m->min_version;
    return PD_OK;
}

static pd_status pd__decode_release_agent_body(const Pathd__V1__Request *req_m, const pd__codec_row *row,
                                               pd_request *req, char *err, size_t errlen)
{
    (void)row;
    const Pathd__V1__ReleaseAgent *m = req_m->release_agent;
    pd_status st = pd__decode_scene_name(m->scene, "release_agent.scene", req->u.reserve.scene, err, errlen);
    if (st != PD_OK)
        return st;
    if (m->all) {
        /* An agent named beside all is a client's mistake either way:
         * which one did it mean? */
        if (m->agent != 0) {
            pd_set_err(err, errlen, "release_agent.agent %llu with release_agent.all: all releases every agent, "
                       "send agent 0 with it (or all false to release this one)", (unsigned long long)m->agent);
            return PD_INVALID_ARGUMENT;
        }
        req->u.reserve.all = 1;
        return PD_OK;
    }
    return pd__decode_agent(m->agent, "release_agent.agent", &req->u.reserve, err, errlen);
}

static pd_status pd__decode_reservations_body(const Pathd__V1__Request *req_m, const pd__codec_row *row,
                                              pd_request *req, char *err, size_t errlen)
{
    (void)row;
    const Pathd__V1__GetReservations *m = req_m->reservations;
    pd_reserve_req *out = &req->u.reserve;
    pd_status st = pd__decode_scene_name(m->scene, "reservations.scene", out->scene, err, errlen);
    if (st != PD_OK)
        return st;
    if (m->rect) {
        if ((st = pd__decode_rect(m->rect, "reservations.rect", &out->rect_min, &out->rect_max, err, errlen)) != PD_OK)
            return st;
        out->has_rect = 1;
    }
    out->from_ms = m->from_ms;
    out->to_ms = m->to_ms == 0 ? INT64_MAX : m->to_ms;
    if (out->to_ms <= out->from_ms) {
        pd_set_err(err, errlen, "reservations.to_ms %lld is not after from_ms %lld", (long long)m->to_ms,
                   (long long)m->from_ms);
        return PD_INVALID_ARGUMENT;
    }
    out->max_entries = m->max_entries;
    return PD_OK;
}

static int64_t pd__wire_time(int64_t t)
{
    return t == PD_RESERVE_FOREVER ? -1 : t;
}

/* The job's status: a job that never ran (cancelled, past its deadline)
 * carries only the task's. */
static uint8_t *pd__reserve_error(const pd_job *job, const pd_reserve_job *rj, size_t *len)
{
    pd_status st = job->task.status;
    return pd_codec_encode_error(job->task.tag, st, rj && rj->message[0] ? rj->message : pd_status_name(st), len);
}

/* Timed waypoints as the wire has them (FOREVER as -1), out[i] pointing
 * at wps[i]. */
static void pd__fill_timed(Pathd__V1__TimedWaypoint *wps, Pathd__V1__TimedWaypoint **out, const pd_waypoint *wp,
                           size_t n)
{
    for (size_t i = 0; i < n; i++) {
        pathd__v1__timed_waypoint__init(&wps[i]);
        wps[i].x = wp[i].x;
        wps[i].y = wp[i].y;
        wps[i].t_arrive_ms = wp[i].t_arrive_ms;
        wps[i].t_leave_ms = pd__wire_time(wp[i].t_leave_ms);
        out[i] = &wps[i];
    }
}

static uint8_t *pd__encode_reserve_path_job(const pd_job *job, size_t *len)
{
    const pd_reserve_job *rj = job->ext;
    pd_status st = job->task.status;
    if (!rj || (st != PD_OK && st != PD_PARTIAL && st != PD_START_BLOCKED && st != PD_NO_PATH) ||
        (st == PD_START_BLOCKED && !rj->has_blocker))
        return pd__reserve_error(job, rj, len);
    Pathd__V1__Response resp = PATHD__V1__RESPONSE__INIT;
    Pathd__V1__ReservePathResult m = PATHD__V1__RESERVE_PATH_RESULT__INIT;
    /* The moved agents' plans: their waypoints after the answer's own in
     * one array. */
    size_t n_all = rj->n_waypoints;
    for (size_t d = 0; d < rj->n_displaced; d++)
        n_all += rj->displaced[d].n_waypoints;
    Pathd__V1__DisplacedPlan dps[PD_YIELD_MAX_DISPLACED], *dptrs[PD_YIELD_MAX_DISPLACED];
    const size_t n_disp = rj->n_displaced < PD_YIELD_MAX_DISPLACED ? rj->n_displaced : PD_YIELD_MAX_DISPLACED;
    Pathd__V1__TimedWaypoint *wps = calloc(n_all ? n_all : 1, sizeof *wps);
    Pathd__V1__TimedWaypoint **ptrs = calloc(n_all ? n_all : 1, sizeof *ptrs);
    uint8_t *buf = NULL;
    *len = 0;
    if (!wps || !ptrs)
        goto done;
    pd__fill_timed(wps, ptrs, rj->waypoints, rj->n_waypoints);
    size_t at = rj->n_waypoints;
    for (size_t d = 0; d < n_disp; d++) {
        const pd_reserve_displaced *src = &rj->displaced[d];
        pathd__v1__displaced_plan__init(&dps[d]);
        dps[d].agent = src->agent;
        dps[d].t0_ms = src->t0_ms;
        dps[d].reserved_until_ms = pd__wire_time(src->reserved_until_ms);
        pd__fill_timed(wps + at, ptrs + at, src->waypoints, src->n_waypoints);
        dps[d].waypoints = ptrs + at;
        dps[d].n_waypoints = src->n_waypoints;
        at += src->n_waypoints;
        dptrs[d] = &dps[d];
    }
    m.n_displaced = n_disp;
    m.displaced = n_disp ? dptrs : NULL;
    m.agent = rj->req.agent;
    m.n_waypoints = rj->n_waypoints;
    m.waypoints = ptrs;
    m.reserved_until_ms = (st == PD_OK || st == PD_PARTIAL) ? pd__wire_time(rj->reserved_until_ms) : 0;
    m.cost = rj->cost;
    m.expansions = rj->expanded;
    m.search_micros = rj->micros;
    m.scene_version = rj->scene_version;
    m.blocking_agent = rj->blocker;
    m.has_blocking_agent = rj->has_blocker != 0;
    m.was_cut = rj->was_cut != 0;
    resp.id = job->task.tag;
    resp.status = pd__wire_status(st);
    if (st != PD_OK && st != PD_PARTIAL)
        resp.message = (char *)rj->message; /* why, beside the blocking agent */
    resp.final = 1;
    resp.body_case = PATHD__V1__RESPONSE__BODY_RESERVE_PATH;
    resp.reserve_path = &m;
    buf = pd__encode_single(&resp, len);
done:
    free(wps);
    free(ptrs);
    return buf;
}

static uint8_t *pd__encode_release_job(const pd_job *job, size_t *len)
{
    const pd_reserve_job *rj = job->ext;
    if (!rj || job->task.status != PD_OK)
        return pd__reserve_error(job, rj, len);
    Pathd__V1__ReleaseResult m = PATHD__V1__RELEASE_RESULT__INIT;
    m.released = rj->released != 0;
    m.agents_released = rj->n_released;
    return pd__encode_ok(job->task.tag, PATHD__V1__RESPONSE__BODY_RELEASE, &m, len);
}

static uint8_t *pd__encode_reservations_job(const pd_job *job, size_t *len)
{
    const pd_reserve_job *rj = job->ext;
    if (!rj || job->task.status != PD_OK)
        return pd__reserve_error(job, rj, len);
    Pathd__V1__ReservationList m = PATHD__V1__RESERVATION_LIST__INIT;
    size_t n = rj->n_entries;
    Pathd__V1__Reservation *es = calloc(n ? n : 1, sizeof *es);
    Pathd__V1__Reservation **ptrs = calloc(n ? n : 1, sizeof *ptrs);
    uint8_t *buf = NULL;
    *len = 0;
    if (!es || !ptrs)
        goto done;
    for (size_t i = 0; i < n; i++) {
        const pd_reserve_entry *e = &rj->entries[i];
        pathd__v1__reservation__init(&es[i]);
        es[i].agent = e->agent;
        es[i].x = e->x;
        es[i].y = e->y;
        es[i].width = e->w;
        es[i].height = e->h;
        es[i].t0_ms = e->t0_ms;
        es[i].t1_ms = pd__wire_time(e->t1_ms);
        ptrs[i] = &es[i];
    }
    m.n_entries = n;
    m.entries = ptrs;
    m.matching = rj->matching;
    m.agents = rj->stats.agents;
    m.table_entries = rj->stats.entries;
    m.table_bytes = rj->stats.bytes;
    buf = pd__encode_ok(job->task.tag, PATHD__V1__RESPONSE__BODY_RESERVATIONS, &m, len);
done:
    free(es);
    free(ptrs);
    return buf;
}

const pd__codec_row pd__codec_rows_paths[] = {
    {PATHD__V1__REQUEST__BODY_FIND_PATH, PD_REQ_FIND_PATH, 0, pd__decode_find_path_body, pd__encode_path_job},
    {PATHD__V1__REQUEST__BODY_FIND_ROUTE, PD_REQ_FIND_ROUTE, 0, pd__decode_find_route_body, pd__encode_route_job},
    {PATHD__V1__REQUEST__BODY_RESERVE_PATH, PD_REQ_RESERVE_PATH, 0, pd__decode_reserve_path_body,
     pd__encode_reserve_path_job},
    {PATHD__V1__REQUEST__BODY_RELEASE_AGENT, PD_REQ_RELEASE_AGENT, 0, pd__decode_release_agent_body,
     pd__encode_release_job},
    {PATHD__V1__REQUEST__BODY_RESERVATIONS, PD_REQ_GET_RESERVATIONS, 0, pd__decode_reservations_body,
     pd__encode_reservations_job},
    {0},
};
