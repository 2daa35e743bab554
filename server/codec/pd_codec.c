/*
 * pd_codec.c - pathd.v1 protobuf messages <-> server structs (see pd_codec.h).
 *
 * Decoding trusts nothing protobuf-c hands back: it unpacks without any range
 * checks (enums keep whatever number arrived, strings whatever bytes), so every
 * field is validated here before a request reaches the layers above. Encoding
 * builds each Response on the stack, sizes it, and packs header + payload into
 * one malloc'd buffer per answer, so the net layer queues a single write.
 */
#include "pd_codec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pathd.pb-c.h"
#include "pd_frame.h"

/* ---- decoding ---------------------------------------------------------- */

/* Bytes of the decode arena's first block. A FindPath unpacks into a few
 * hundred bytes; requests that need more (avoid lists, batches, a map)
 * take malloc'd chunks for the rest. */
#define PD__ARENA_BYTES 16384u
/* Every arena allocation is aligned to this (max_align_t on x86-64). */
#define PD__ARENA_ALIGN 16u

/* A chunk the arena took from malloc once its first block was full. */
typedef struct pd__arena_chunk {
    struct pd__arena_chunk *next;
    _Alignas(PD__ARENA_ALIGN) unsigned char data[];
} pd__arena_chunk;

/* What unpacking allocates - every sub-message, string and array of a
 * request - lives only until the request is copied into a pd_request, so it
 * comes from a bump allocator over a per-thread block instead of malloc,
 * and is given back all at once (pd__arena_reset) instead of by
 * free_unpacked's walk over the message. Memory is zeroed as it is handed
 * out: protobuf-c before 1.5.1 may read pointers of a half-built message on
 * its error path (protobuf-c #690), which must read NULL, never garbage. */
typedef struct pd__arena {
    _Alignas(PD__ARENA_ALIGN) unsigned char block[PD__ARENA_BYTES];
    size_t used;
    pd__arena_chunk *chunks;
} pd__arena;

static _Thread_local pd__arena pd__decode_arena;

static void *pd__arena_alloc(void *data, size_t size)
{
    pd__arena *a = data;
    size_t need = (size + PD__ARENA_ALIGN - 1) & ~(size_t)(PD__ARENA_ALIGN - 1);
    if (need >= size && need <= PD__ARENA_BYTES - a->used) {
        void *p = a->block + a->used;
        a->used += need;
        memset(p, 0, size);
        return p;
    }
    pd__arena_chunk *c = calloc(1, sizeof *c + size);
    if (c == NULL)
        return NULL;
    c->next = a->chunks;
    a->chunks = c;
    return c->data;
}

/* Nothing is given back one by one: pd__arena_reset releases it all. */
static void pd__arena_free(void *data, void *pointer)
{
    (void)data;
    (void)pointer;
}

static void pd__arena_reset(pd__arena *a)
{
    while (a->chunks) {
        pd__arena_chunk *next = a->chunks->next;
        free(a->chunks);
        a->chunks = next;
    }
    a->used = 0;
}

/* Formats a decode error into err (truncated to errlen). */
/* Strict UTF-8 check (no overlongs, no surrogates, nothing above U+10FFFF):
 * proto3 strings must be UTF-8 and protobuf-c does not check it, while the
 * names travel back to clients whose protobuf libraries do. */
static int pd__utf8_valid(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        size_t extra;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) {
            extra = 1;
            cp = c & 0x1Fu;
        } else if (c >= 0xE0 && c <= 0xEF) {
            extra = 2;
            cp = c & 0x0Fu;
        } else if (c >= 0xF0 && c <= 0xF4) {
            extra = 3;
            cp = c & 0x07u;
        } else {
            return 0;
        }
        if (n - i - 1 < extra)
            return 0;
        for (size_t k = 1; k <= extra; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return 0;
            cp = (cp << 6) | (s[i + k] & 0x3Fu);
        }
        if ((extra == 2 && cp < 0x800) || (extra == 3 && cp < 0x10000) || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += extra + 1;
    }
    return 1;
}

/* A scene name must fit pd_conf's name buffer, be UTF-8 and carry no control
 * characters (names end up in logs and error messages). */
static pd_status pd__decode_scene_name(const char *name, const char *field, char out[PD_CONF_MAX_NAME],
                                       char *err, size_t errlen)
{
    size_t n = name != NULL ? strlen(name) : 0;
    if (n == 0) {
        pd_set_err(err, errlen, "%s is empty", field);
        return PD_INVALID_ARGUMENT;
    }
    if (n >= PD_CONF_MAX_NAME) {
        pd_set_err(err, errlen, "%s is %zu bytes; at most %d allowed", field, n, PD_CONF_MAX_NAME - 1);
        return PD_INVALID_ARGUMENT;
    }
    if (!pd__utf8_valid((const unsigned char *)name, n)) {
        pd_set_err(err, errlen, "%s is not valid UTF-8", field);
        return PD_INVALID_ARGUMENT;
    }
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)name[i] < 0x20 || name[i] == 0x7F) {
            pd_set_err(err, errlen, "%s contains a control character", field);
            return PD_INVALID_ARGUMENT;
        }
    }
    memcpy(out, name, n + 1);
    return PD_OK;
}

static pd_status pd__decode_point(const Pathd__V1__Point *p, const char *field, pd_point_spec *out,
                                  char *err, size_t errlen)
{
    if (p == NULL) {
        pd_set_err(err, errlen, "%s is missing", field);
        return PD_INVALID_ARGUMENT;
    }
    switch (p->kind_case) {
    case PATHD__V1__POINT__KIND_CELL:
        out->is_world = 0;
        out->cell.x = p->cell->x;
        out->cell.y = p->cell->y;
        return PD_OK;
    case PATHD__V1__POINT__KIND_WORLD:
        if (!isfinite(p->world->x) || !isfinite(p->world->y)) {
            pd_set_err(err, errlen, "%s.world is not a finite point", field);
            return PD_INVALID_ARGUMENT;
        }
        out->is_world = 1;
        out->wx = p->world->x;
        out->wy = p->world->y;
        return PD_OK;
    default:
        pd_set_err(err, errlen, "%s has neither cell nor world set", field);
        return PD_INVALID_ARGUMENT;
    }
}

/* A Rect with both corners set and min <= max on each axis. */
static pd_status pd__decode_rect(const Pathd__V1__Rect *r, const char *field, pd_point *min, pd_point *max,
                                 char *err, size_t errlen)
{
    if (r->min == NULL || r->max == NULL) {
        pd_set_err(err, errlen, "%s needs both min and max", field);
        return PD_INVALID_ARGUMENT;
    }
    *min = (pd_point){r->min->x, r->min->y};
    *max = (pd_point){r->max->x, r->max->y};
    if (min->x > max->x || min->y > max->y) {
        pd_set_err(err, errlen, "%s min (%d,%d) is not <= max (%d,%d)", field, (int)min->x, (int)min->y,
                    (int)max->x, (int)max->y);
        return PD_INVALID_ARGUMENT;
    }
    return PD_OK;
}

/* Copies n repeated Cells into a malloc'd array the request owns (the
 * protobuf message is freed before the request is used). */
static pd_status pd__copy_cells(Pathd__V1__Cell *const *cells, size_t n, const char *field, pd_point **out,
                                char *err, size_t errlen)
{
    pd_point *pts = malloc(n * sizeof *pts);
    if (pts == NULL) {
        pd_set_err(err, errlen, "out of memory for %zu cells of %s", n, field);
        return PD_INTERNAL;
    }
    for (size_t i = 0; i < n; i++) {
        if (cells[i] == NULL) {
            free(pts);
            pd_set_err(err, errlen, "%s[%zu] is missing", field, i);
            return PD_INVALID_ARGUMENT;
        }
        pts[i] = (pd_point){cells[i]->x, cells[i]->y};
    }
    *out = pts;
    return PD_OK;
}

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

static pd_status pd__decode_find_path(const Pathd__V1__FindPath *m, pd_find_path_req *out,
                                      char *err, size_t errlen)
{
    pd_status st = pd__decode_scene_name(m->scene, "find_path.scene", out->scene, err, errlen);
    if (st != PD_OK)
        return st;
    if ((st = pd__decode_point(m->start, "find_path.start", &out->start, err, errlen)) != PD_OK)
        return st;
    if (m->n_goals == 0 && (st = pd__decode_point(m->goal, "find_path.goal", &out->goal, err, errlen)) != PD_OK)
        return st;

    out->unit_size = m->unit_size == 0 ? 1 : m->unit_size;
    if (out->unit_size > PD_CONF_MAX_UNIT_SIZE) {
        pd_set_err(err, errlen, "find_path.unit_size %u is above the limit %d", (unsigned)m->unit_size,
                    PD_CONF_MAX_UNIT_SIZE);
        return PD_INVALID_ARGUMENT;
    }

    /* protobuf-c keeps unknown enum numbers as they arrived, so compare with
     * every value the schema defines rather than trusting the type. */
    switch ((int)m->connectivity) {
    case PATHD__V1__CONNECTIVITY__CONNECTIVITY_DEFAULT:
    case PATHD__V1__CONNECTIVITY__CONNECTIVITY_8:
        out->connectivity = PD_CONNECT_8;
        break;
    case PATHD__V1__CONNECTIVITY__CONNECTIVITY_4:
        out->connectivity = PD_CONNECT_4;
        break;
    default:
        pd_set_err(err, errlen, "find_path.connectivity %d is not 4 or 8", (int)m->connectivity);
        return PD_INVALID_ARGUMENT;
    }

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
    return pd__decode_goal_set(m, out, err, errlen);
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

/* One operation: what = "update_cells" or "update_cells.ops[i]"; the cells
 * of a list are copied into *cells (owned by the caller). */
static pd_status pd__decode_update_op(const char *what, int op, uint32_t cost, int target, const Pathd__V1__Rect *rect,
                                      const Pathd__V1__CellList *list, pd_scene_update *u, pd_point **cells,
                                      char *err, size_t errlen)
{
    char field[64];
    pd_status st;
    switch (op) {
    case PATHD__V1__UPDATE_OP__UPDATE_BLOCK:
        u->op = PD_UPDATE_BLOCK;
        break;
    case PATHD__V1__UPDATE_OP__UPDATE_PASS:
        u->op = PD_UPDATE_PASS;
        break;
    case PATHD__V1__UPDATE_OP__UPDATE_COST:
        u->op = PD_UPDATE_COST;
        break;
    case PATHD__V1__UPDATE_OP__UPDATE_RESTORE:
        u->op = PD_UPDATE_RESTORE;
        break;
    default:
        pd_set_err(err, errlen,
                    "%s.op %d is not UPDATE_BLOCK (0), UPDATE_PASS (1), UPDATE_COST (2) or UPDATE_RESTORE (3)", what,
                    op);
        return PD_INVALID_ARGUMENT;
    }
    if (u->op == PD_UPDATE_COST) {
        if (cost < 1 || cost > 255) {
            pd_set_err(err, errlen, "%s.cost %u is not 1..255", what, (unsigned)cost);
            return PD_INVALID_ARGUMENT;
        }
        u->cost = (uint8_t)cost;
    } else if (cost != 0) {
        pd_set_err(err, errlen, "%s.cost %u is only allowed with UPDATE_COST", what, (unsigned)cost);
        return PD_INVALID_ARGUMENT;
    }

    if (target == 1) {
        pd_point min, max;
        snprintf(field, sizeof field, "%s.rect", what);
        if ((st = pd__decode_rect(rect, field, &min, &max, err, errlen)) != PD_OK)
            return st;
        /* Each side is at most 2^32, so their product could wrap: compare
         * the sides first, then the product of two sides that fit. */
        uint64_t w = (uint64_t)((int64_t)max.x - min.x + 1), h = (uint64_t)((int64_t)max.y - min.y + 1);
        if (w > PD_SCENE_MAX_UPDATE_CELLS || h > PD_SCENE_MAX_UPDATE_CELLS || w * h > PD_SCENE_MAX_UPDATE_CELLS) {
            pd_set_err(err, errlen, "%s covers %llu x %llu cells; at most %u allowed", field,
                        (unsigned long long)w, (unsigned long long)h, (unsigned)PD_SCENE_MAX_UPDATE_CELLS);
            return PD_INVALID_ARGUMENT;
        }
        u->is_rect = 1;
        u->rect_min = min;
        u->rect_max = max;
        return PD_OK;
    }
    if (target == 2) {
        size_t n = list->n_cells;
        snprintf(field, sizeof field, "%s.cells", what);
        if (n == 0) {
            pd_set_err(err, errlen, "%s is empty", field);
            return PD_INVALID_ARGUMENT;
        }
        if (n > PD_SCENE_MAX_UPDATE_CELLS) {
            pd_set_err(err, errlen, "%s has %zu cells; at most %u allowed", field, n,
                        (unsigned)PD_SCENE_MAX_UPDATE_CELLS);
            return PD_INVALID_ARGUMENT;
        }
        if ((st = pd__copy_cells(list->cells, n, field, cells, err, errlen)) != PD_OK)
            return st;
        u->is_rect = 0;
        u->cells = *cells;
        u->n_cells = n;
        return PD_OK;
    }
    pd_set_err(err, errlen, "%s has neither rect nor cells set", what);
    return PD_INVALID_ARGUMENT;
}

static pd_status pd__decode_update_cells(const Pathd__V1__UpdateCells *m, pd_update_cells_req *out,
                                         char *err, size_t errlen)
{
    pd_status st = pd__decode_scene_name(m->scene, "update_cells.scene", out->scene, err, errlen);
    if (st != PD_OK)
        return st;
    if (m->n_ops == 0) {
        int target = m->target_case == PATHD__V1__UPDATE_CELLS__TARGET_RECT    ? 1
                     : m->target_case == PATHD__V1__UPDATE_CELLS__TARGET_CELLS ? 2
                                                                               : 0;
        return pd__decode_update_op("update_cells", (int)m->op, m->cost, target, m->rect, m->cells, &out->update,
                                    &out->cells, err, errlen);
    }
    if (m->target_case != PATHD__V1__UPDATE_CELLS__TARGET__NOT_SET || m->op != 0 || m->cost != 0) {
        pd_set_err(err, errlen, "update_cells has ops: its own rect, cells, op and cost must stay unset");
        return PD_INVALID_ARGUMENT;
    }
    if (m->n_ops > PD_SCENE_MAX_UPDATE_OPS) {
        pd_set_err(err, errlen, "update_cells.ops has %zu operations; at most %u allowed", m->n_ops,
                    (unsigned)PD_SCENE_MAX_UPDATE_OPS);
        return PD_INVALID_ARGUMENT;
    }
    out->ops = calloc(m->n_ops, sizeof *out->ops);
    if (!out->ops) {
        pd_set_err(err, errlen, "out of memory");
        return PD_INTERNAL;
    }
    for (size_t i = 0; i < m->n_ops; i++) {
        const Pathd__V1__CellOp *o = m->ops[i];
        char what[40];
        snprintf(what, sizeof what, "update_cells.ops[%zu]", i);
        if (!o) {
            pd_set_err(err, errlen, "%s is missing", what);
            return PD_INVALID_ARGUMENT;
        }
        int target = o->target_case == PATHD__V1__CELL_OP__TARGET_RECT    ? 1
                     : o->target_case == PATHD__V1__CELL_OP__TARGET_CELLS ? 2
                                                                          : 0;
        pd_point *cells = NULL;
        st = pd__decode_update_op(what, (int)o->op, o->cost, target, o->rect, o->cells, &out->ops[i], &cells, err,
                                  errlen);
        out->n_ops = i + 1; /* counted, so pd_request_free frees its cells */
        if (st != PD_OK)
            return st;
    }
    return PD_OK;
}

static pd_status pd__decode_scene_grid(const Pathd__V1__GetSceneGrid *m, pd_scene_grid_req *out,
                                       char *err, size_t errlen)
{
    pd_status st = pd__decode_scene_name(m->scene, "scene_grid.scene", out->scene, err, errlen);
    if (st != PD_OK)
        return st;
    out->min_version = m->min_version;
    out->unit_size = m->unit_size == 0 ? 1 : m->unit_size;
    if (out->unit_size > PD_CONF_MAX_UNIT_SIZE) {
        pd_set_err(err, errlen, "scene_grid.unit_size %u is above the limit %d", (unsigned)m->unit_size,
                    PD_CONF_MAX_UNIT_SIZE);
        return PD_INVALID_ARGUMENT;
    }
    /* No grid has more rows than PD_GRID_MAX_SIDE, so larger values can only
     * be mistakes; refusing them here keeps row arithmetic far from overflow. */
    if (m->row_start < 0 || m->row_start > PD_GRID_MAX_SIDE) {
        pd_set_err(err, errlen, "scene_grid.row_start %d is not 0..%d", (int)m->row_start, PD_GRID_MAX_SIDE);
        return PD_INVALID_ARGUMENT;
    }
    if (m->row_count < 0 || m->row_count > PD_GRID_MAX_SIDE) {
        pd_set_err(err, errlen, "scene_grid.row_count %d is not 0..%d", (int)m->row_count, PD_GRID_MAX_SIDE);
        return PD_INVALID_ARGUMENT;
    }
    out->row_start = m->row_start;
    out->row_count = m->row_count;
    return PD_OK;
}

/* ---- movement queries ---------------------------------------------------- */

/* The common fields of a movement query: scene, unit size, first point. */
static pd_status pd__decode_move_head(const char *scene, uint32_t unit_size, uint64_t min_version,
                                      const Pathd__V1__Point *a, const char *kind, const char *a_name,
                                      pd_move_req *out, char *err, size_t errlen)
{
    char field[64];
    out->min_version = min_version;
    snprintf(field, sizeof field, "%s.scene", kind);
    pd_status st = pd__decode_scene_name(scene, field, out->scene, err, errlen);
    if (st != PD_OK)
        return st;
    out->unit_size = unit_size == 0 ? 1 : unit_size;
    if (out->unit_size > PD_CONF_MAX_UNIT_SIZE) {
        pd_set_err(err, errlen, "%s.unit_size %u is above the limit %d", kind, (unsigned)unit_size,
                    PD_CONF_MAX_UNIT_SIZE);
        return PD_INVALID_ARGUMENT;
    }
    if (a_name == NULL)
        return PD_OK;
    snprintf(field, sizeof field, "%s.%s", kind, a_name);
    return pd__decode_point(a, field, &out->a, err, errlen);
}

static pd_status pd__decode_validate_move(const Pathd__V1__ValidateMove *m, pd_move_req *out, char *err,
                                          size_t errlen)
{
    pd_status st = pd__decode_move_head(m->scene, m->unit_size, m->min_version, NULL, "validate_move", NULL, out, err, errlen);
    if (st != PD_OK)
        return st;
    if (m->n_moves == 0 || m->n_moves > PD_MOVE_MAX_POINTS) {
        pd_set_err(err, errlen, "validate_move.moves has %zu points; 1 to %u allowed", m->n_moves,
                    PD_MOVE_MAX_POINTS);
        return PD_INVALID_ARGUMENT;
    }
    if (!(isfinite(m->max_speed) && m->max_speed > 0)) {
        pd_set_err(err, errlen, "validate_move.max_speed must be a finite number > 0");
        return PD_INVALID_ARGUMENT;
    }
    if (!(m->tolerance >= 0 && m->tolerance <= PD_MOVE_MAX_TOLERANCE)) {
        pd_set_err(err, errlen, "validate_move.tolerance must lie in 0..%g", PD_MOVE_MAX_TOLERANCE);
        return PD_INVALID_ARGUMENT;
    }
    out->max_speed = m->max_speed;
    out->tolerance = m->tolerance;
    out->moves = calloc(m->n_moves, sizeof *out->moves);
    if (out->moves == NULL) {
        pd_set_err(err, errlen, "out of memory");
        return PD_INTERNAL;
    }
    out->n_moves = m->n_moves;
    for (size_t i = 0; i < m->n_moves; i++) {
        char field[64];
        snprintf(field, sizeof field, "validate_move.moves[%zu].point", i);
        if (m->moves[i] == NULL)
            return pd__decode_point(NULL, field, &out->moves[i].point, err, errlen);
        if ((st = pd__decode_point(m->moves[i]->point, field, &out->moves[i].point, err, errlen)) != PD_OK)
            return st;
        if (!isfinite(m->moves[i]->t)) {
            pd_set_err(err, errlen, "validate_move.moves[%zu].t is not finite", i);
            return PD_INVALID_ARGUMENT;
        }
        out->moves[i].t = m->moves[i]->t;
    }
    return PD_OK;
}

/* One movement query, from a Request body or a Batch item (same layouts). */
static pd_status pd__decode_query(const Pathd__V1__Query *q, pd_move_req *out, char *err, size_t errlen)
{
    pd_status st;
    switch (q->kind_case) {
    case PATHD__V1__QUERY__KIND_RAYCAST: {
        const Pathd__V1__Raycast *m = q->raycast;
        out->kind = PD_REQ_RAYCAST;
        if ((st = pd__decode_move_head(m->scene, m->unit_size, m->min_version, m->from, "raycast", "from", out, err, errlen)) != PD_OK)
            return st;
        return pd__decode_point(m->to, "raycast.to", &out->b, err, errlen);
    }
    case PATHD__V1__QUERY__KIND_VALIDATE_MOVE:
        out->kind = PD_REQ_VALIDATE_MOVE;
        return pd__decode_validate_move(q->validate_move, out, err, errlen);
    case PATHD__V1__QUERY__KIND_MOVE_ALONG: {
        const Pathd__V1__MoveAlong *m = q->move_along;
        out->kind = PD_REQ_MOVE_ALONG;
        if ((st = pd__decode_move_head(m->scene, m->unit_size, m->min_version, m->from, "move_along", "from", out, err, errlen)) !=
            PD_OK)
            return st;
        if (!isfinite(m->dx) || !isfinite(m->dy)) {
            pd_set_err(err, errlen, "move_along.dx/dy must be finite");
            return PD_INVALID_ARGUMENT;
        }
        out->dx = m->dx;
        out->dy = m->dy;
        return PD_OK;
    }
    case PATHD__V1__QUERY__KIND_NEAREST: {
        const Pathd__V1__NearestWalkable *m = q->nearest;
        out->kind = PD_REQ_NEAREST;
        if ((st = pd__decode_move_head(m->scene, m->unit_size, m->min_version, m->at, "nearest", "at", out, err, errlen)) != PD_OK)
            return st;
        if (m->radius > PD_MOVE_MAX_RADIUS) {
            pd_set_err(err, errlen, "nearest.radius %u is above the limit %u", (unsigned)m->radius,
                        PD_MOVE_MAX_RADIUS);
            return PD_INVALID_ARGUMENT;
        }
        out->radius = m->radius;
        if (m->reachable_from != NULL) {
            out->has_b = 1;
            return pd__decode_point(m->reachable_from, "nearest.reachable_from", &out->b, err, errlen);
        }
        return PD_OK;
    }
    case PATHD__V1__QUERY__KIND_REACHABLE: {
        const Pathd__V1__IsReachable *m = q->reachable;
        out->kind = PD_REQ_REACHABLE;
        if ((st = pd__decode_move_head(m->scene, m->unit_size, m->min_version, m->from, "reachable", "from", out, err, errlen)) !=
            PD_OK)
            return st;
        return pd__decode_point(m->to, "reachable.to", &out->b, err, errlen);
    }
    case PATHD__V1__QUERY__KIND_RANDOM_POINT: {
        const Pathd__V1__RandomPoint *m = q->random_point;
        out->kind = PD_REQ_RANDOM_POINT;
        if ((st = pd__decode_move_head(m->scene, m->unit_size, m->min_version, m->around, "random_point", "around", out, err,
                                       errlen)) != PD_OK)
            return st;
        if (!(m->radius >= 0 && m->radius <= PD_MOVE_MAX_WALK_RADIUS)) {
            pd_set_err(err, errlen, "random_point.radius must lie in 0..%g", PD_MOVE_MAX_WALK_RADIUS);
            return PD_INVALID_ARGUMENT;
        }
        out->radius = m->radius;
        out->seed = m->seed;
        return PD_OK;
    }
    case PATHD__V1__QUERY__KIND_DISTANCE_TO_WALL: {
        const Pathd__V1__DistanceToWall *m = q->distance_to_wall;
        out->kind = PD_REQ_DISTANCE_TO_WALL;
        if ((st = pd__decode_move_head(m->scene, m->unit_size, m->min_version, m->at, "distance_to_wall", "at", out, err,
                                       errlen)) != PD_OK)
            return st;
        if (m->max_distance > PD_MOVE_MAX_RADIUS) {
            pd_set_err(err, errlen, "distance_to_wall.max_distance %u is above the limit %u",
                        (unsigned)m->max_distance, PD_MOVE_MAX_RADIUS);
            return PD_INVALID_ARGUMENT;
        }
        out->radius = m->max_distance ? m->max_distance : PD_MOVE_DEFAULT_WALL_DISTANCE;
        return PD_OK;
    }
    case PATHD__V1__QUERY__KIND_FIND_PATH:
        out->kind = PD_REQ_FIND_PATH;
        if ((out->path = calloc(1, sizeof *out->path)) == NULL) {
            pd_set_err(err, errlen, "out of memory");
            return PD_INTERNAL;
        }
        if ((st = pd__decode_find_path(q->find_path, out->path, err, errlen)) != PD_OK)
            return st;
        memcpy(out->scene, out->path->scene, sizeof out->scene);
        out->unit_size = out->path->unit_size;
        out->min_version = out->path->min_version;
        return PD_OK;
    default:
        pd_set_err(err, errlen, "query has no kind this server knows");
        return PD_INVALID_ARGUMENT;
    }
}

/* A Batch: each item decoded on its own; an item that fails keeps its
 * status and reason and the rest go on. Only a missing or oversized list,
 * or no memory, fails the whole request. */
static pd_status pd__decode_batch(const Pathd__V1__Batch *m, pd_batch_req *out, char *err, size_t errlen)
{
    if (m->n_items == 0 || m->n_items > PD_BATCH_MAX_ITEMS) {
        pd_set_err(err, errlen, "batch.items has %zu queries; 1 to %u allowed", m->n_items, PD_BATCH_MAX_ITEMS);
        return PD_INVALID_ARGUMENT;
    }
    size_t paths = 0;
    for (size_t i = 0; i < m->n_items; i++)
        paths += m->items[i] != NULL && m->items[i]->kind_case == PATHD__V1__QUERY__KIND_FIND_PATH;
    if (paths > PD_BATCH_MAX_PATHS) {
        pd_set_err(err, errlen, "batch.items has %zu find_path queries; at most %u allowed", paths,
                    PD_BATCH_MAX_PATHS);
        return PD_INVALID_ARGUMENT;
    }
    out->items = calloc(m->n_items, sizeof *out->items);
    if (out->items == NULL) {
        pd_set_err(err, errlen, "out of memory");
        return PD_INTERNAL;
    }
    out->n_items = m->n_items;
    for (size_t i = 0; i < m->n_items; i++) {
        pd_move_req *item = &out->items[i];
        char why[PD_REQUEST_MESSAGE_MAX] = "";
        pd_status st = pd__decode_query(m->items[i], item, why, sizeof why);
        if (st == PD_INTERNAL) {
            pd_set_err(err, errlen, "out of memory");
            return st;
        }
        if (st != PD_OK) {
            pd_move_req_free(item);
            item->status = st;
            pd_set_err(item->message, sizeof item->message, "batch.items[%zu]: %s", i, why);
        }
    }
    return PD_OK;
}

/* A movement query sent alone: the Request body wrapped as a Query of
 * kind_case. Every body of the Request's oneof and every kind of the
 * Query's is a pointer in a union (the generated structs), so one
 * assignment carries whichever message it is. */
static pd_status pd__decode_single_query(const Pathd__V1__Request *m, Pathd__V1__Query__KindCase kind_case,
                                         pd_request *req, char *err, size_t errlen)
{
    Pathd__V1__Query q = PATHD__V1__QUERY__INIT;
    q.kind_case = kind_case;
    q.raycast = m->raycast;
    pd_status st = pd__decode_query(&q, &req->u.move, err, errlen);
    req->kind = req->u.move.kind;
    return st;
}

/* CreateScene: the scene entry goes through the config's parser
 * (pd_conf_scene_from_fields); the map or cells are copied for the worker
 * that parses them. */
static pd_status pd__decode_create_scene(const Pathd__V1__CreateScene *m, pd_scene_change_req *out,
                                         char *err, size_t errlen)
{
    pd_status st = pd__decode_scene_name(m->name, "create_scene.name", out->name, err, errlen);
    if (st != PD_OK)
        return st;
    int raw = m->cells.len > 0 || m->width != 0 || m->height != 0;
    if (raw && m->map.len > 0) {
        pd_set_err(err, errlen, "create_scene has both map and cells: send one");
        return PD_INVALID_ARGUMENT;
    }
    if (!raw && m->map.len == 0) {
        pd_set_err(err, errlen, "create_scene has neither map nor cells");
        return PD_INVALID_ARGUMENT;
    }
    if (raw) {
        if (m->format && m->format[0]) {
            pd_set_err(err, errlen, "create_scene.format applies to map, not to raw cells");
            return PD_INVALID_ARGUMENT;
        }
        if (m->width < 1 || m->width > PD_GRID_MAX_SIDE || m->height < 1 || m->height > PD_GRID_MAX_SIDE) {
            pd_set_err(err, errlen, "create_scene.width and height must be 1..%d (got %d x %d)",
                        PD_GRID_MAX_SIDE, (int)m->width, (int)m->height);
            return PD_INVALID_ARGUMENT;
        }
        if ((uint64_t)m->width * (uint64_t)m->height != m->cells.len) {
            pd_set_err(err, errlen, "create_scene.cells has %zu bytes; width * height is %llu",
                        m->cells.len, (unsigned long long)m->width * (unsigned long long)m->height);
            return PD_INVALID_ARGUMENT;
        }
    }
    if (m->n_unit_sizes > PD_CONF_MAX_UNIT_SIZES) {
        pd_set_err(err, errlen, "create_scene.unit_sizes has %zu sizes; at most %d allowed", m->n_unit_sizes,
                    PD_CONF_MAX_UNIT_SIZES);
        return PD_INVALID_ARGUMENT;
    }
    const pd_conf_scene_fields f = {
        .name = out->name,
        /* Raw cells need no parser; "ascii" only satisfies the entry's checks. */
        .format = raw ? "ascii" : (m->format && m->format[0] ? m->format : NULL),
        .origin_x = m->origin_x,
        .origin_y = m->origin_y,
        .cell_size = m->cell_size,
        .unit_sizes = m->unit_sizes,
        .n_unit_sizes = m->n_unit_sizes,
    };
    if ((out->scene = malloc(sizeof *out->scene)) == NULL) {
        pd_set_err(err, errlen, "out of memory");
        return PD_INTERNAL;
    }
    if (pd_conf_scene_from_fields(&f, out->scene, err, errlen) != 0)
        return PD_INVALID_ARGUMENT;
    const ProtobufCBinaryData *bytes = raw ? &m->cells : &m->map;
    out->map = malloc(bytes->len);
    if (!out->map) {
        pd_set_err(err, errlen, "out of memory");
        return PD_INTERNAL;
    }
    memcpy(out->map, bytes->data, bytes->len);
    out->map_len = bytes->len;
    out->raw = raw;
    out->width = m->width;
    out->height = m->height;
    return PD_OK;
}

/* Watch: 1..PD_WATCH_MAX_SCENES valid, distinct names. Whether they are
 * served, and the server's own cap, are the net layer's to check. */
static pd_status pd__decode_watch(const Pathd__V1__Watch *m, pd_watch_req *out, char *err, size_t errlen)
{
    if (m->n_scenes == 0 || m->n_scenes > PD_WATCH_MAX_SCENES) {
        pd_set_err(err, errlen, "watch.scenes has %zu names; 1 to %u allowed", m->n_scenes, PD_WATCH_MAX_SCENES);
        return PD_INVALID_ARGUMENT;
    }
    if ((out->scenes = calloc(m->n_scenes, sizeof *out->scenes)) == NULL) {
        pd_set_err(err, errlen, "out of memory");
        return PD_INTERNAL;
    }
    out->n_scenes = m->n_scenes;
    for (size_t i = 0; i < m->n_scenes; i++) {
        char field[48];
        snprintf(field, sizeof field, "watch.scenes[%zu]", i);
        pd_status st = pd__decode_scene_name(m->scenes[i], field, out->scenes[i], err, errlen);
        if (st != PD_OK)
            return st;
        /* At most 1024 names: the quadratic check costs less than a sort. */
        for (size_t j = 0; j < i; j++)
            if (strcmp(out->scenes[j], out->scenes[i]) == 0) {
                pd_set_err(err, errlen, "watch.scenes names '%s' twice", out->scenes[i]);
                return PD_INVALID_ARGUMENT;
            }
    }
    return PD_OK;
}

static pd_status pd__decode_body(const Pathd__V1__Request *m, pd_request *req, char *err, size_t errlen)
{
    switch (m->body_case) {
    case PATHD__V1__REQUEST__BODY_FIND_PATH:
        req->kind = PD_REQ_FIND_PATH;
        return pd__decode_find_path(m->find_path, &req->u.find_path, err, errlen);
    case PATHD__V1__REQUEST__BODY_CANCEL:
        req->kind = PD_REQ_CANCEL;
        req->u.cancel_target = m->cancel->target_id;
        return PD_OK;
    case PATHD__V1__REQUEST__BODY_LIST_SCENES:
        req->kind = PD_REQ_LIST_SCENES;
        return PD_OK;
    case PATHD__V1__REQUEST__BODY_SCENE_INFO:
        req->kind = PD_REQ_SCENE_INFO;
        req->u.scene_info.min_version = m->scene_info->min_version;
        return pd__decode_scene_name(m->scene_info->scene, "scene_info.scene", req->u.scene_info.scene, err,
                                     errlen);
    case PATHD__V1__REQUEST__BODY_STATS:
        req->kind = PD_REQ_STATS;
        return PD_OK;
    case PATHD__V1__REQUEST__BODY_LIMITS:
        req->kind = PD_REQ_GET_LIMITS;
        return PD_OK;
    case PATHD__V1__REQUEST__BODY_PING:
        req->kind = PD_REQ_PING;
        req->u.ping_nonce = m->ping->nonce;
        return PD_OK;
    case PATHD__V1__REQUEST__BODY_UPDATE_CELLS:
        req->kind = PD_REQ_UPDATE_CELLS;
        return pd__decode_update_cells(m->update_cells, &req->u.update_cells, err, errlen);
    case PATHD__V1__REQUEST__BODY_SCENE_GRID:
        req->kind = PD_REQ_SCENE_GRID;
        return pd__decode_scene_grid(m->scene_grid, &req->u.grid, err, errlen);
    case PATHD__V1__REQUEST__BODY_FIND_ROUTE:
        req->kind = PD_REQ_FIND_ROUTE;
        return pd__decode_find_route(m->find_route, &req->u.find_route, err, errlen);
    case PATHD__V1__REQUEST__BODY_AUTH: {
        req->kind = PD_REQ_AUTH;
        /* The token itself is never echoed: it may be a real one mistyped. */
        const char *token = m->auth->token ? m->auth->token : "";
        size_t n = strlen(token);
        if (n >= PD_CONF_MAX_TOKEN) {
            pd_set_err(err, errlen, "auth.token is longer than %d bytes", PD_CONF_MAX_TOKEN - 1);
            return PD_INVALID_ARGUMENT;
        }
        memcpy(req->u.auth.token, token, n + 1);
        req->u.auth.len = n;
        return PD_OK;
    }
    case PATHD__V1__REQUEST__BODY_RELOAD:
        req->kind = PD_REQ_RELOAD;
        return PD_OK;
    case PATHD__V1__REQUEST__BODY_RAYCAST:
        return pd__decode_single_query(m, PATHD__V1__QUERY__KIND_RAYCAST, req, err, errlen);
    case PATHD__V1__REQUEST__BODY_VALIDATE_MOVE:
        return pd__decode_single_query(m, PATHD__V1__QUERY__KIND_VALIDATE_MOVE, req, err, errlen);
    case PATHD__V1__REQUEST__BODY_MOVE_ALONG:
        return pd__decode_single_query(m, PATHD__V1__QUERY__KIND_MOVE_ALONG, req, err, errlen);
    case PATHD__V1__REQUEST__BODY_NEAREST:
        return pd__decode_single_query(m, PATHD__V1__QUERY__KIND_NEAREST, req, err, errlen);
    case PATHD__V1__REQUEST__BODY_REACHABLE:
        return pd__decode_single_query(m, PATHD__V1__QUERY__KIND_REACHABLE, req, err, errlen);
    case PATHD__V1__REQUEST__BODY_RANDOM_POINT:
        return pd__decode_single_query(m, PATHD__V1__QUERY__KIND_RANDOM_POINT, req, err, errlen);
    case PATHD__V1__REQUEST__BODY_DISTANCE_TO_WALL:
        return pd__decode_single_query(m, PATHD__V1__QUERY__KIND_DISTANCE_TO_WALL, req, err, errlen);
    case PATHD__V1__REQUEST__BODY_BATCH:
        req->kind = PD_REQ_BATCH;
        return pd__decode_batch(m->batch, &req->u.batch, err, errlen);
    case PATHD__V1__REQUEST__BODY_CREATE_SCENE:
        req->kind = PD_REQ_CREATE_SCENE;
        return pd__decode_create_scene(m->create_scene, &req->u.change, err, errlen);
    case PATHD__V1__REQUEST__BODY_CREATE_INSTANCE: {
        req->kind = PD_REQ_CREATE_INSTANCE;
        pd_status st = pd__decode_scene_name(m->create_instance->name, "create_instance.name", req->u.change.name,
                                             err, errlen);
        return st != PD_OK ? st
                           : pd__decode_scene_name(m->create_instance->template_, "create_instance.template",
                                                   req->u.change.tmpl, err, errlen);
    }
    case PATHD__V1__REQUEST__BODY_DROP_SCENE:
        req->kind = PD_REQ_DROP_SCENE;
        req->u.change.drop_portals = m->drop_scene->drop_portals;
        return pd__decode_scene_name(m->drop_scene->name, "drop_scene.name", req->u.change.name, err, errlen);
    case PATHD__V1__REQUEST__BODY_WATCH:
        req->kind = PD_REQ_WATCH;
        return pd__decode_watch(m->watch, &req->u.watch, err, errlen);
    case PATHD__V1__REQUEST__BODY_UNWATCH:
        req->kind = PD_REQ_UNWATCH;
        req->u.unwatch_target = m->unwatch->watch_id;
        return PD_OK;
    default:
        /* Bodies added to the schema after this server (field numbers
         * it has no case for) arrive here as unknown fields; say so,
         * since the client likely is newer. */
        if (m->base.n_unknown_fields > 0)
            pd_set_err(err, errlen, "request has no body this server knows (newer client?)");
        else
            pd_set_err(err, errlen, "request has no body");
        return PD_INVALID_ARGUMENT;
    }
}

/* ---- pre-scan: what unpacking would cost, before it is paid ----------- */

/* What the pre-scan learned about a frame. */
typedef struct pd__scan {
    uint64_t elements;        /* fields unpacking would allocate or store */
    uint64_t id;              /* Request.id, when the frame reached it */
    int nul_string;           /* a string field holds a NUL byte */
    const char *nul_field;    /* its name */
} pd__scan;

/* Reads a base-128 varint; returns the bytes used, or 0 when it runs past
 * end or over ten bytes. */
static size_t pd__varint(const uint8_t *p, const uint8_t *end, uint64_t *out)
{
    uint64_t v = 0;
    for (size_t i = 0; i < 10 && p + i < end; i++) {
        v |= (uint64_t)(p[i] & 0x7Fu) << (7 * i);
        if (!(p[i] & 0x80u)) {
            *out = v;
            return i + 1;
        }
    }
    return 0;
}

/* Walks one message's wire bytes with its descriptor: counts every field
 * occurrence (known or not), descends into sub-messages, looks for NUL
 * bytes in strings (protobuf-c hands strings back NUL-terminated, so an
 * embedded NUL would silently cut a name short). Stops counting past cap.
 * Returns 0, or -1 when the bytes are not wire format at all (unpack will
 * say so). Depth is bounded by the schema, which has no recursion. */
static int pd__scan_message(const ProtobufCMessageDescriptor *d, const uint8_t *p, const uint8_t *end,
                            int top, uint64_t cap, pd__scan *sc)
{
    while (p < end && sc->elements <= cap) {
        uint64_t key, v;
        size_t n = pd__varint(p, end, &key);
        if (n == 0)
            return -1;
        p += n;
        uint32_t number = (uint32_t)(key >> 3);
        sc->elements++;
        switch (key & 7u) {
        case 0: /* varint */
            if ((n = pd__varint(p, end, &v)) == 0)
                return -1;
            if (top && number == 1)
                sc->id = v;
            p += n;
            break;
        case 1: /* 64-bit */
            if (end - p < 8)
                return -1;
            p += 8;
            break;
        case 5: /* 32-bit */
            if (end - p < 4)
                return -1;
            p += 4;
            break;
        case 2: { /* length-delimited */
            if ((n = pd__varint(p, end, &v)) == 0 || v > (uint64_t)((size_t)(end - p) - n))
                return -1;
            p += n;
            /* Only length-delimited fields need their descriptor (a
             * sub-message to descend into, a string to check). */
            const ProtobufCFieldDescriptor *f = d ? protobuf_c_message_descriptor_get_field(d, number) : NULL;
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
                if (pd__scan_message(f->descriptor, p, p + v, 0, cap, sc) != 0)
                    return -1;
            } else if (f && f->type == PROTOBUF_C_TYPE_STRING && memchr(p, 0, (size_t)v) && !sc->nul_string) {
                sc->nul_string = 1;
                sc->nul_field = f->name;
            }
            p += v;
            break;
        }
        default: /* groups (3, 4) and reserved types: protobuf-c refuses them */
            return -1;
        }
    }
    return 0;
}

pd_status pd_codec_decode_request(const uint8_t *payload, size_t len, pd_request *req,
                                  char *err, size_t errlen)
{
    static const uint8_t empty[1];
    Pathd__V1__Request *m;
    pd_status st;

    memset(req, 0, sizeof *req);
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    if (payload == NULL) {
        if (len > 0) {
            pd_set_err(err, errlen, "no payload bytes");
            return PD_MALFORMED;
        }
        payload = empty;
    }
    /* Unpacking allocates per element, on the loop thread: a frame of
     * half a million empty sub-messages would hold it for ~60 ms. Counted
     * first, in one pass that allocates nothing and stops at the first
     * element past the cap, and refused (structural: the connection
     * closes after the answer). */
    pd__scan sc = {0};
    if (pd__scan_message(&pathd__v1__request__descriptor, payload, payload + len, 1, PD_CODEC_MAX_ELEMENTS,
                         &sc) == 0) {
        if (sc.elements > PD_CODEC_MAX_ELEMENTS) {
            req->id = sc.id;
            req->structural = 1;
            pd_set_err(err, errlen, "request holds more than %u fields and list elements (the limit)",
                        PD_CODEC_MAX_ELEMENTS);
            return PD_INVALID_ARGUMENT;
        }
        if (sc.nul_string) {
            req->id = sc.id;
            pd_set_err(err, errlen, "string field %s holds a NUL byte", sc.nul_field);
            return PD_INVALID_ARGUMENT;
        }
    }
    /* The element cap above bounds what unpack allocates from the arena;
     * pd__decode_body copies out whatever the request keeps. */
    ProtobufCAllocator arena = {pd__arena_alloc, pd__arena_free, &pd__decode_arena};
    m = pathd__v1__request__unpack(&arena, len, payload);
    if (m == NULL) {
        pd__arena_reset(&pd__decode_arena);
        pd_set_err(err, errlen, "frame is not a pathd.v1.Request");
        return PD_MALFORMED;
    }
    req->id = m->id;
    st = pd__decode_body(m, req, err, errlen);
    pd__arena_reset(&pd__decode_arena);
    if (st != PD_OK) {
        uint64_t id = req->id;
        pd_request_kind kind = req->kind;
        pd_request_free(req);
        memset(req, 0, sizeof *req);
        req->id = id;
        req->kind = kind;
    }
    return st;
}

/* ---- encoding ---------------------------------------------------------- */

/* pd_status values double as wire values; the ones that never go on the
 * wire (PD_BUFFER_TOO_SMALL, anything out of range) become INTERNAL. */
static Pathd__V1__Status pd__wire_status(pd_status s)
{
    if (!pd_status_is_answer((unsigned)s))
        return PATHD__V1__STATUS__INTERNAL;
    return (Pathd__V1__Status)s;
}

static size_t pd__frame_size(const Pathd__V1__Response *resp)
{
    return PD_FRAME_HEADER_BYTES + pathd__v1__response__get_packed_size(resp);
}

/* Writes one whole frame at out; returns the bytes written. The caller sized
 * the buffer with pd__frame_size on the same message. */
static size_t pd__frame_pack(const Pathd__V1__Response *resp, uint8_t *out)
{
    size_t n = pathd__v1__response__pack(resp, out + PD_FRAME_HEADER_BYTES);
    pd_frame_put_header(out, (uint32_t)n);
    return PD_FRAME_HEADER_BYTES + n;
}

/* The common case: one Response, one frame, one buffer. */
static uint8_t *pd__encode_single(const Pathd__V1__Response *resp, size_t *out_len)
{
    size_t size = pd__frame_size(resp);
    uint8_t *buf = malloc(size);
    *out_len = 0;
    if (buf == NULL)
        return NULL;
    *out_len = pd__frame_pack(resp, buf);
    return buf;
}

void pd_codec_stamp_timing(uint8_t **buf, size_t *len, uint64_t server_us, uint64_t search_us)
{
    if (*buf == NULL || *len < PD_FRAME_HEADER_BYTES)
        return;
    /* A Response holding only the two fields packs to just their bytes
     * (proto3 leaves every zero field out); appended to a packed Response
     * they are merged into it, wherever its other fields stand. */
    Pathd__V1__Response timing = PATHD__V1__RESPONSE__INIT;
    timing.server_us = server_us;
    timing.search_us = search_us;
    size_t extra = pathd__v1__response__get_packed_size(&timing);
    size_t last = 0;
    for (size_t off = 0; off + PD_FRAME_HEADER_BYTES <= *len;) {
        last = off;
        off += PD_FRAME_HEADER_BYTES + pd_frame_get_header(*buf + off);
    }
    uint8_t *grown = extra > 0 ? realloc(*buf, *len + extra) : NULL;
    if (grown == NULL)
        return;
    pathd__v1__response__pack(&timing, grown + *len);
    pd_frame_put_header(grown + last, (uint32_t)(*len + extra - last - PD_FRAME_HEADER_BYTES));
    *buf = grown;
    *len += extra;
}

/* Copies a message for the wire, replacing each byte that is not part of a
 * valid UTF-8 sequence with '?', since proto3 string fields must be UTF-8 and
 * messages may quote client input. Returns a malloc'd string or NULL. */
static char *pd__utf8_sanitized(const char *msg)
{
    size_t n = strlen(msg);
    char *copy = malloc(n + 1);
    size_t i = 0;
    if (copy == NULL)
        return NULL;
    memcpy(copy, msg, n + 1);
    while (i < n) {
        size_t seq = 1;
        unsigned char c = (unsigned char)copy[i];
        if (c >= 0x80) {
            seq = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
            if (seq > n - i || !pd__utf8_valid((const unsigned char *)copy + i, seq)) {
                copy[i] = '?';
                seq = 1;
            }
        }
        i += seq;
    }
    return copy;
}

uint8_t *pd_codec_encode_error(uint64_t id, pd_status status, const char *message, size_t *out_len)
{
    return pd_codec_encode_error_version(id, status, message, 0, out_len);
}

uint8_t *pd_codec_encode_error_version(uint64_t id, pd_status status, const char *message, uint64_t version,
                                       size_t *out_len)
{
    Pathd__V1__Response resp = PATHD__V1__RESPONSE__INIT;
    Pathd__V1__Error error = PATHD__V1__ERROR__INIT;
    uint8_t *buf;

    *out_len = 0;
    error.message = pd__utf8_sanitized(message != NULL ? message : "");
    if (error.message == NULL)
        return NULL;
    error.version = version;
    resp.id = id;
    resp.status = pd__wire_status(status);
    resp.final = 1;
    resp.body_case = PATHD__V1__RESPONSE__BODY_ERROR;
    resp.error = &error;
    buf = pd__encode_single(&resp, out_len);
    free(error.message);
    return buf;
}

uint8_t *pd_codec_encode_ack(uint64_t id, pd_status status, size_t *out_len)
{
    Pathd__V1__Response resp = PATHD__V1__RESPONSE__INIT;
    resp.id = id;
    resp.status = pd__wire_status(status);
    resp.final = 1;
    return pd__encode_single(&resp, out_len);
}

uint8_t *pd_codec_encode_pong(uint64_t id, uint64_t nonce, size_t *out_len)
{
    Pathd__V1__Response resp = PATHD__V1__RESPONSE__INIT;
    Pathd__V1__Pong pong = PATHD__V1__PONG__INIT;
    pong.nonce = nonce;
    resp.id = id;
    resp.status = PATHD__V1__STATUS__OK;
    resp.final = 1;
    resp.body_case = PATHD__V1__RESPONSE__BODY_PONG;
    resp.pong = &pong;
    return pd__encode_single(&resp, out_len);
}

void pd_codec_limits_fixed(pd_codec_limits *out)
{
    out->max_batch_items = PD_BATCH_MAX_ITEMS;
    out->max_move_points = PD_MOVE_MAX_POINTS;
    out->max_radius_cells = PD_MOVE_MAX_RADIUS;
    out->max_walk_radius = PD_MOVE_MAX_WALK_RADIUS;
    out->max_tolerance = PD_MOVE_MAX_TOLERANCE;
    out->max_avoid_cells = PD_CODEC_MAX_AVOID;
    out->max_deadline_ms = PD_CODEC_MAX_DEADLINE_MS;
    out->max_unit_size = PD_CONF_MAX_UNIT_SIZE;
    out->scene_grid_band_bytes = PD_SCENE_GRID_BAND_BYTES;
}

uint8_t *pd_codec_encode_limits(uint64_t id, const pd_codec_limits *l, size_t *out_len)
{
    Pathd__V1__Response resp = PATHD__V1__RESPONSE__INIT;
    Pathd__V1__Limits m = PATHD__V1__LIMITS__INIT;
    m.max_frame_bytes = l->max_frame_bytes;
    m.max_inflight_per_conn = l->max_inflight_per_conn;
    m.max_waypoints_per_chunk = l->max_waypoints_per_chunk;
    m.max_connections = l->max_connections;
    m.job_queue_capacity = l->job_queue_capacity;
    m.idle_timeout_ms = l->idle_timeout_ms;
    m.frame_timeout_ms = l->frame_timeout_ms;
    m.default_max_expansions = l->default_max_expansions;
    m.max_batch_items = l->max_batch_items;
    m.max_move_points = l->max_move_points;
    m.max_radius_cells = l->max_radius_cells;
    m.max_walk_radius = l->max_walk_radius;
    m.max_tolerance = l->max_tolerance;
    m.max_avoid_cells = l->max_avoid_cells;
    m.max_deadline_ms = l->max_deadline_ms;
    m.max_unit_size = l->max_unit_size;
    m.scene_grid_band_bytes = l->scene_grid_band_bytes;
    m.max_message_bytes = l->max_message_bytes;
    m.watch_buffer_bytes = l->watch_buffer_bytes;
    m.max_watch_scenes = l->max_watch_scenes;
    m.max_watchers = l->max_watchers;
    m.max_watches_per_conn = l->max_watches_per_conn;
    resp.id = id;
    resp.status = PATHD__V1__STATUS__OK;
    resp.final = 1;
    resp.body_case = PATHD__V1__RESPONSE__BODY_LIMITS;
    resp.limits = &m;
    return pd__encode_single(&resp, out_len);
}

uint8_t *pd_codec_encode_auth(uint64_t id, const char *role, size_t *out_len)
{
    Pathd__V1__Response resp = PATHD__V1__RESPONSE__INIT;
    Pathd__V1__AuthResult m = PATHD__V1__AUTH_RESULT__INIT;
    m.role = (char *)role;
    resp.id = id;
    resp.status = PATHD__V1__STATUS__OK;
    resp.final = 1;
    resp.body_case = PATHD__V1__RESPONSE__BODY_AUTH;
    resp.auth = &m;
    return pd__encode_single(&resp, out_len);
}

uint8_t *pd_codec_encode_stats(uint64_t id, const pd_server_stats *stats, size_t *out_len)
{
    Pathd__V1__Response resp = PATHD__V1__RESPONSE__INIT;
    Pathd__V1__Stats m = PATHD__V1__STATS__INIT;
    m.uptime_ms = stats->uptime_ms;
    m.connections = stats->connections;
    m.requests_total = stats->requests_total;
    m.paths_found = stats->paths_found;
    m.expansions_total = stats->expansions_total;
    m.queue_depth = stats->queue_depth;
    m.in_flight = stats->in_flight;
    m.threads = stats->threads;
    m.scenes = stats->scenes;
    m.overloaded_total = stats->overloaded_total;
    m.malformed_total = stats->malformed_total;
    m.buffered_bytes = stats->buffered_bytes;
    m.buffer_budget_bytes = stats->buffer_budget_bytes;
    m.connections_shed = stats->connections_shed_total;
    m.frame_timeouts = stats->frame_timeouts_total;
    m.accept_errors = stats->accept_errors_total;
    resp.id = id;
    resp.status = PATHD__V1__STATUS__OK;
    resp.final = 1;
    resp.body_case = PATHD__V1__RESPONSE__BODY_STATS;
    resp.stats = &m;
    return pd__encode_single(&resp, out_len);
}

uint8_t *pd_codec_encode_scene_info(uint64_t id, const pd_scene *scene, size_t *out_len)
{
    Pathd__V1__Response resp = PATHD__V1__RESPONSE__INIT;
    Pathd__V1__SceneInfo m = PATHD__V1__SCENE_INFO__INIT;
    uint32_t unit_sizes[PD_CONF_MAX_UNIT_SIZES];
    size_t n_units = scene->n_unit_sizes < PD_CONF_MAX_UNIT_SIZES ? scene->n_unit_sizes : PD_CONF_MAX_UNIT_SIZES;

    memcpy(unit_sizes, scene->unit_sizes, n_units * sizeof unit_sizes[0]);
    m.name = (char *)scene->name;
    if (scene->grid != NULL) {
        m.width = scene->grid->width;
        m.height = scene->grid->height;
        /* Maintained by load and every update: no rescan on the loop. */
        m.passable_cells = scene->passable_cells;
    }
    m.origin_x = scene->origin_x;
    m.origin_y = scene->origin_y;
    m.cell_size = scene->cell_size;
    m.n_unit_sizes = n_units;
    m.unit_sizes = unit_sizes;
    m.version = scene->version;
    pd_scene_bytes bytes;
    pd_scene_get_bytes(scene, &bytes);
    m.grid_bytes = bytes.by[PD_SCENE_GRID];
    m.clearance_bytes = bytes.by[PD_SCENE_CLEARANCE];
    m.label_bytes = bytes.by[PD_SCENE_LABELS];
    m.unit_grid_bytes = bytes.by[PD_SCENE_UNIT_GRIDS];
    m.total_bytes = bytes.total;
    m.runtime = scene->runtime != 0;
    m.shared = scene->base != NULL;
    m.own_bytes = pd_scene_own_bytes(scene);
    m.search = (char *)pd_scene_search_name(scene->search);
    char *unit_search[PD_CONF_MAX_UNIT_SIZES];
    for (size_t i = 0; i < n_units; i++)
        unit_search[i] = (char *)pd_scene_pick_name(scene->units[i].pick);
    m.n_unit_search = n_units;
    m.unit_search = unit_search;
    resp.id = id;
    resp.status = PATHD__V1__STATUS__OK;
    resp.final = 1;
    resp.body_case = PATHD__V1__RESPONSE__BODY_SCENE_INFO;
    resp.scene_info = &m;
    return pd__encode_single(&resp, out_len);
}

uint8_t *pd_codec_encode_scene_grid(uint64_t id, const pd_grid *grid, uint64_t version, int32_t row_start,
                                    int32_t rows, size_t *out_len)
{
    Pathd__V1__Response resp = PATHD__V1__RESPONSE__INIT;
    Pathd__V1__SceneGrid m = PATHD__V1__SCENE_GRID__INIT;
    uint8_t *cells, *buf;

    *out_len = 0;
    if (grid == NULL || rows < 1 || row_start < 0 || row_start > grid->height - rows)
        return NULL;
    /* The grid keeps a blocked border around every row; the wire carries
     * the rows without it, so copy them out one by one. */
    size_t width = (size_t)grid->width;
    cells = malloc((size_t)rows * width);
    if (cells == NULL)
        return NULL;
    for (int32_t r = 0; r < rows; r++)
        memcpy(cells + (size_t)r * width, grid->cells + pd_grid_index(grid, 0, row_start + r), width);
    m.width = grid->width;
    m.height = grid->height;
    m.version = version;
    m.row_start = row_start;
    m.row_count = rows;
    m.cells.len = (size_t)rows * width;
    m.cells.data = cells;
    resp.id = id;
    resp.status = PATHD__V1__STATUS__OK;
    resp.final = 1;
    resp.body_case = PATHD__V1__RESPONSE__BODY_SCENE_GRID;
    resp.scene_grid = &m;
    buf = pd__encode_single(&resp, out_len);
    free(cells);
    return buf;
}

uint8_t *pd_codec_encode_scene_list(uint64_t id, pd_scene *const *scenes, size_t n, size_t *out_len)
{
    Pathd__V1__Response resp = PATHD__V1__RESPONSE__INIT;
    Pathd__V1__SceneList list = PATHD__V1__SCENE_LIST__INIT;
    Pathd__V1__SceneSummary *items = NULL;
    Pathd__V1__SceneSummary **ptrs = NULL;
    uint8_t *buf = NULL;

    *out_len = 0;
    if (n > 0) {
        items = calloc(n, sizeof *items);
        ptrs = calloc(n, sizeof *ptrs);
        if (items == NULL || ptrs == NULL)
            goto done;
    }
    for (size_t i = 0; i < n; i++) {
        pathd__v1__scene_summary__init(&items[i]);
        items[i].name = (char *)scenes[i]->name;
        if (scenes[i]->grid != NULL) {
            items[i].width = scenes[i]->grid->width;
            items[i].height = scenes[i]->grid->height;
        }
        items[i].version = scenes[i]->version;
        ptrs[i] = &items[i];
    }
    list.n_scenes = n;
    list.scenes = ptrs;
    resp.id = id;
    resp.status = PATHD__V1__STATUS__OK;
    resp.final = 1;
    resp.body_case = PATHD__V1__RESPONSE__BODY_SCENE_LIST;
    resp.scene_list = &list;
    buf = pd__encode_single(&resp, out_len);
done:
    free(items);
    free(ptrs);
    return buf;
}

/* Room for one frame's packed waypoints (proto Waypoints): the parallel
 * arrays protobuf-c packs, max_per_chunk entries each, in one block per
 * answer (block: malloc'd, or NULL when they live on the caller's stack). */
typedef struct pd__points_buf {
    Pathd__V1__Waypoints msg;
    int32_t *dx, *dy;
    double *t, *wx, *wy;
    void *block;
} pd__points_buf;

/* Bytes pd__points_alloc needs for n waypoints. */
#define PD__POINTS_BYTES(n) ((n) * (3 * sizeof(double) + 2 * sizeof(int32_t)))
/* Waypoints of an answer whose arrays fit a buffer on the encoder's stack
 * (short paths: most answers), so they cost no malloc. */
#define PD__POINTS_ON_STACK 32

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
static int pd__points_alloc(pd__points_buf *b, size_t n)
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

/* The final chunk's substituted endpoints, owned by the caller's stack. */
typedef struct pd__chunk_extras {
    Pathd__V1__Cell start_used, goal_used;
} pd__chunk_extras;

/* Fills chunk `seq` of a path answer: its waypoints, and for the last chunk
 * the status and totals. pts has room for max_per_chunk waypoints; world is
 * the scene when world coordinates were asked for, else NULL. */
static void pd__fill_path_chunk(uint64_t id, const pd_scene *scene, const pd_scene *world, const pd_path_result *r,
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

uint8_t *pd_codec_encode_path(uint64_t id, const pd_scene *scene, const pd_path_result *r,
                              uint32_t max_per_chunk, int want_world, size_t *out_len)
{
    size_t path_len = r->path != NULL ? r->path_len : 0;
    size_t n_chunks, total = 0, off = 0;
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

    /* Two passes over the same chunks: size everything, then pack into one
     * buffer, so the net layer gets the whole answer as a single write. */
    for (size_t seq = 0; seq < n_chunks; seq++) {
        pd__fill_path_chunk(id, scene, world, r, path_len, max_per_chunk, seq, n_chunks, &pts, &extras, &chunk,
                            &resp);
        total += pd__frame_size(&resp);
    }
    buf = malloc(total);
    if (buf == NULL)
        goto done;
    for (size_t seq = 0; seq < n_chunks; seq++) {
        /* One chunk (most answers): the message the sizing pass built is
         * still whole. */
        if (n_chunks > 1)
            pd__fill_path_chunk(id, scene, world, r, path_len, max_per_chunk, seq, n_chunks, &pts, &extras,
                                &chunk, &resp);
        off += pd__frame_pack(&resp, buf + off);
    }
    *out_len = off;
done:
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

uint8_t *pd_codec_encode_route(uint64_t id, const pd_route_result *r, uint32_t max_per_chunk,
                               int want_world, size_t *out_len)
{
    int has_route = (r->status == PD_OK || r->status == PD_PARTIAL) && r->legs != NULL;
    size_t n_legs = has_route ? r->n_legs : 0;
    size_t most = 1, total = 0, off = 0;
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

    /* Two passes, as for a path: size every frame, then pack them all into
     * one buffer so the answer goes out as a single write. */
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1 && (buf = malloc(total)) == NULL)
            goto done;
        for (size_t li = 0; li < n_legs; li++) {
            size_t n_frames = pd__leg_frames(&r->legs[li], max_per_chunk);
            for (size_t seq = 0; seq < n_frames; seq++) {
                pd__fill_route_leg(id, r, li, seq, n_frames, max_per_chunk, want_world, &m);
                if (pass == 0)
                    total += pd__frame_size(&m.resp);
                else
                    off += pd__frame_pack(&m.resp, buf + off);
            }
        }
        pd__fill_route_result(id, r, n_legs, &m);
        if (pass == 0)
            total += pd__frame_size(&m.resp);
        else
            off += pd__frame_pack(&m.resp, buf + off);
    }
    *out_len = off;
done:
    free(m.pts.block);
    free(m.leg_costs);
    free(m.versions);
    return buf;
}

uint8_t *pd_codec_encode_update(uint64_t id, const char *scene, const pd_update_outcome *o,
                                size_t *out_len)
{
    Pathd__V1__Response resp = PATHD__V1__RESPONSE__INIT;
    Pathd__V1__UpdateResult m = PATHD__V1__UPDATE_RESULT__INIT;

    if (o->status != PD_OK) {
        char message[PD_QUERY_MESSAGE_MAX + 96];
        snprintf(message, sizeof message, "update of scene '%s' failed: %s", scene,
                 o->message[0] ? o->message : pd_status_name(o->status));
        return pd_codec_encode_error(id, o->status, message, out_len);
    }
    m.version = o->update.version;
    m.cells_changed = o->update.cells_changed;
    m.micros = o->update.micros;
    resp.id = id;
    resp.status = PATHD__V1__STATUS__OK;
    resp.final = 1;
    resp.body_case = PATHD__V1__RESPONSE__BODY_UPDATE;
    resp.update = &m;
    return pd__encode_single(&resp, out_len);
}

uint8_t *pd_codec_encode_scene_change(uint64_t id, const char *name, const pd_scene_change_outcome *outcome,
                                      size_t *out_len)
{
    const pd_store_change *o = &outcome->change;
    if (o->status != PD_OK)
        return pd_codec_encode_error(id, o->status, o->message[0] ? o->message : pd_status_name(o->status),
                                     out_len);
    Pathd__V1__Response resp = PATHD__V1__RESPONSE__INIT;
    Pathd__V1__SceneChange m = PATHD__V1__SCENE_CHANGE__INIT;
    m.name = (char *)name;
    m.version = o->version;
    m.own_bytes = o->own_bytes;
    m.scene_bytes = o->scene_bytes;
    resp.id = id;
    resp.status = PATHD__V1__STATUS__OK;
    resp.final = 1;
    resp.body_case = PATHD__V1__RESPONSE__BODY_SCENE_CHANGE;
    resp.scene_change = &m;
    return pd__encode_single(&resp, out_len);
}

/* ---- movement answers ---------------------------------------------------- */

/* Every sub-message one movement answer may need, so an answer (or a batch
 * item) is built without allocating. */
typedef struct pd__move_msg {
    Pathd__V1__Cell hit, cell;
    Pathd__V1__WorldPoint world;
    union {
        Pathd__V1__RaycastResult raycast;
        Pathd__V1__ValidateMoveResult validate;
        Pathd__V1__MoveAlongResult move;
        Pathd__V1__NearestResult nearest;
        Pathd__V1__ReachableResult reachable;
        Pathd__V1__RandomPointResult random;
        Pathd__V1__DistanceToWallResult wall;
    } u;
} pd__move_msg;

/* The cells and world point a result message may point at, filled in mm;
 * NULL for those the result has not. */
typedef struct pd__move_refs {
    Pathd__V1__Cell *hit, *cell;
    Pathd__V1__WorldPoint *world;
} pd__move_refs;

static void *pd__fill_raycast(const pd_move_result *r, pd__move_msg *mm, const pd__move_refs *p)
{
    pathd__v1__raycast_result__init(&mm->u.raycast);
    mm->u.raycast.version = r->version;
    mm->u.raycast.clear = r->yes != 0;
    mm->u.raycast.hit = p->hit;
    mm->u.raycast.last_free = p->cell;
    mm->u.raycast.last_free_world = p->world;
    return &mm->u.raycast;
}

static void *pd__fill_validate(const pd_move_result *r, pd__move_msg *mm, const pd__move_refs *p)
{
    pathd__v1__validate_move_result__init(&mm->u.validate);
    mm->u.validate.version = r->version;
    mm->u.validate.valid = r->yes != 0;
    mm->u.validate.first_invalid = r->first_invalid;
    mm->u.validate.reason = (Pathd__V1__MoveReason)r->reason;
    mm->u.validate.last_valid = p->cell;
    mm->u.validate.last_valid_world = p->world;
    return &mm->u.validate;
}

static void *pd__fill_move_along(const pd_move_result *r, pd__move_msg *mm, const pd__move_refs *p)
{
    pathd__v1__move_along_result__init(&mm->u.move);
    mm->u.move.version = r->version;
    mm->u.move.end = p->cell;
    mm->u.move.end_world = p->world;
    mm->u.move.slid = r->yes != 0;
    return &mm->u.move;
}

static void *pd__fill_nearest(const pd_move_result *r, pd__move_msg *mm, const pd__move_refs *p)
{
    pathd__v1__nearest_result__init(&mm->u.nearest);
    mm->u.nearest.version = r->version;
    mm->u.nearest.cell = p->cell;
    mm->u.nearest.world = p->world;
    mm->u.nearest.distance = r->distance;
    return &mm->u.nearest;
}

static void *pd__fill_reachable(const pd_move_result *r, pd__move_msg *mm, const pd__move_refs *p)
{
    (void)p;
    pathd__v1__reachable_result__init(&mm->u.reachable);
    mm->u.reachable.version = r->version;
    mm->u.reachable.reachable = r->yes != 0;
    return &mm->u.reachable;
}

static void *pd__fill_random_point(const pd_move_result *r, pd__move_msg *mm, const pd__move_refs *p)
{
    pathd__v1__random_point_result__init(&mm->u.random);
    mm->u.random.version = r->version;
    mm->u.random.cell = p->cell;
    mm->u.random.world = p->world;
    mm->u.random.seed = r->seed;
    mm->u.random.candidates = r->candidates;
    return &mm->u.random;
}

static void *pd__fill_wall(const pd_move_result *r, pd__move_msg *mm, const pd__move_refs *p)
{
    pathd__v1__distance_to_wall_result__init(&mm->u.wall);
    mm->u.wall.version = r->version;
    mm->u.wall.distance = r->distance;
    mm->u.wall.wall = p->hit;
    return &mm->u.wall;
}

/* Each movement kind's result: its Response oneof case alone, its
 * QueryResult oneof case as a Batch item, and its message's fill. */
typedef struct pd__move_row {
    Pathd__V1__Response__BodyCase response;
    Pathd__V1__QueryResult__KindCase item;
    void *(*fill)(const pd_move_result *r, pd__move_msg *mm, const pd__move_refs *p);
} pd__move_row;

static const pd__move_row pd__move_rows[PD_REQ__COUNT] = {
    [PD_REQ_RAYCAST] = {PATHD__V1__RESPONSE__BODY_RAYCAST, PATHD__V1__QUERY_RESULT__KIND_RAYCAST, pd__fill_raycast},
    [PD_REQ_VALIDATE_MOVE] = {PATHD__V1__RESPONSE__BODY_VALIDATE_MOVE, PATHD__V1__QUERY_RESULT__KIND_VALIDATE_MOVE,
                              pd__fill_validate},
    [PD_REQ_MOVE_ALONG] = {PATHD__V1__RESPONSE__BODY_MOVE_ALONG, PATHD__V1__QUERY_RESULT__KIND_MOVE_ALONG,
                           pd__fill_move_along},
    [PD_REQ_NEAREST] = {PATHD__V1__RESPONSE__BODY_NEAREST, PATHD__V1__QUERY_RESULT__KIND_NEAREST, pd__fill_nearest},
    [PD_REQ_REACHABLE] = {PATHD__V1__RESPONSE__BODY_REACHABLE, PATHD__V1__QUERY_RESULT__KIND_REACHABLE,
                          pd__fill_reachable},
    [PD_REQ_RANDOM_POINT] = {PATHD__V1__RESPONSE__BODY_RANDOM_POINT, PATHD__V1__QUERY_RESULT__KIND_RANDOM_POINT,
                             pd__fill_random_point},
    [PD_REQ_DISTANCE_TO_WALL] = {PATHD__V1__RESPONSE__BODY_DISTANCE_TO_WALL,
                                 PATHD__V1__QUERY_RESULT__KIND_DISTANCE_TO_WALL, pd__fill_wall},
};

/* The row of a movement kind; DistanceToWall's for any other, as the
 * encoders were only ever given movement kinds. */
static const pd__move_row *pd__move_row_of(pd_request_kind kind)
{
    if ((unsigned)kind < PD_REQ__COUNT && pd__move_rows[kind].fill)
        return &pd__move_rows[kind];
    return &pd__move_rows[PD_REQ_DISTANCE_TO_WALL];
}

/* Fills mm with the result message of kind and returns it. */
static void *pd__fill_move(const pd__move_row *row, const pd_move_result *r, pd__move_msg *mm)
{
    pathd__v1__cell__init(&mm->hit);
    pathd__v1__cell__init(&mm->cell);
    pathd__v1__world_point__init(&mm->world);
    mm->hit.x = r->hit.x;
    mm->hit.y = r->hit.y;
    mm->cell.x = r->cell.x;
    mm->cell.y = r->cell.y;
    mm->world.x = r->wx;
    mm->world.y = r->wy;
    pd__move_refs p = {r->has_hit ? &mm->hit : NULL, r->has_cell ? &mm->cell : NULL,
                       r->has_cell ? &mm->world : NULL};
    return row->fill(r, mm, &p);
}

uint8_t *pd_codec_encode_move(uint64_t id, pd_request_kind kind, const pd_move_result *r, size_t *out_len)
{
    if (r->status != PD_OK)
        return pd_codec_encode_error_version(id, r->status, r->message,
                                             r->status == PD_STALE_VERSION ? r->version : 0, out_len);
    Pathd__V1__Response resp = PATHD__V1__RESPONSE__INIT;
    pd__move_msg mm;
    const pd__move_row *row = pd__move_row_of(kind);
    void *body = pd__fill_move(row, r, &mm);
    resp.id = id;
    resp.status = PATHD__V1__STATUS__OK;
    resp.final = 1;
    resp.body_case = row->response;
    /* Every movement result sits in the Response's oneof at the same offset
     * (a union in the generated struct), so one assignment serves them all. */
    resp.raycast = body;
    return pd__encode_single(&resp, out_len);
}

/* A FindPath item's chunk and what it points at. */
typedef struct pd__batch_path {
    Pathd__V1__PathChunk chunk;
    pd__points_buf pts;
    pd__chunk_extras extras;
} pd__batch_path;

uint8_t *pd_codec_encode_batch(uint64_t id, const pd_move_req *items, const pd_move_result *results, size_t n,
                               size_t *out_len)
{
    *out_len = 0;
    Pathd__V1__Response resp = PATHD__V1__RESPONSE__INIT;
    Pathd__V1__BatchResult batch = PATHD__V1__BATCH_RESULT__INIT;
    Pathd__V1__QueryResult *qr = calloc(n, sizeof *qr);
    Pathd__V1__QueryResult **qrp = calloc(n, sizeof *qrp);
    pd__move_msg *mm = calloc(n, sizeof *mm);
    char **messages = calloc(n, sizeof *messages);
    pd__batch_path *paths = calloc(n, sizeof *paths);
    uint8_t *buf = NULL;
    if (!qr || !qrp || !mm || !messages || !paths)
        goto out;
    for (size_t i = 0; i < n; i++) {
        pathd__v1__query_result__init(&qr[i]);
        qrp[i] = &qr[i];
        qr[i].status = pd__wire_status(results[i].status);
        if (results[i].status == PD_STALE_VERSION)
            qr[i].version = results[i].version;
        if (items[i].kind == PD_REQ_FIND_PATH && results[i].scene != NULL) {
            /* A FindPath item that ran: the whole path (maybe none) as one
             * final chunk, filled exactly like a FindPath answer's last
             * frame; PD_BATCH_MAX_PATH_WAYPOINTS bounds it. */
            const pd_path_result *pr = &results[i].path;
            const size_t len = pr->path != NULL ? pr->path_len : 0;
            if (pd__points_alloc(&paths[i].pts, len) != 0)
                goto out;
            const pd_scene *world = items[i].path != NULL && items[i].path->want_world ? results[i].scene : NULL;
            Pathd__V1__Response unused;
            pd__fill_path_chunk(id, results[i].scene, world, pr, len, (uint32_t)(len ? len : 1), 0, 1,
                                &paths[i].pts, &paths[i].extras, &paths[i].chunk, &unused);
            qr[i].kind_case = PATHD__V1__QUERY_RESULT__KIND_PATH;
            qr[i].path = &paths[i].chunk;
        }
        if (results[i].status != PD_OK && results[i].status != PD_PARTIAL) {
            /* A FindPath item that ran explains itself in its path result,
             * as a FindPath alone does in Response.message. */
            const char *why = results[i].message;
            if (!why[0] && items[i].kind == PD_REQ_FIND_PATH)
                why = results[i].path.message;
            messages[i] = pd__utf8_sanitized(why);
            if (!messages[i])
                goto out;
            qr[i].message = messages[i];
            continue;
        }
        if (items[i].kind == PD_REQ_FIND_PATH)
            continue;
        const pd__move_row *row = pd__move_row_of(items[i].kind);
        qr[i].kind_case = row->item;
        qr[i].raycast = pd__fill_move(row, &results[i], &mm[i]);
    }
    batch.n_items = n;
    batch.items = qrp;
    resp.id = id;
    resp.status = PATHD__V1__STATUS__OK;
    resp.final = 1;
    resp.body_case = PATHD__V1__RESPONSE__BODY_BATCH;
    resp.batch = &batch;
    buf = pd__encode_single(&resp, out_len);
out:
    if (messages)
        for (size_t i = 0; i < n; i++)
            free(messages[i]);
    if (paths)
        for (size_t i = 0; i < n; i++)
            free(paths[i].pts.block);
    free(paths);
    free(messages);
    free(mm);
    free(qrp);
    free(qr);
    return buf;
}

/* ---- watch events ------------------------------------------------------ */

static void pd__fill_cell(Pathd__V1__Cell *c, pd_point p)
{
    pathd__v1__cell__init(c);
    c->x = p.x;
    c->y = p.y;
}

/* A WatchEvent Response and the messages it points into. */
typedef struct pd__watch_msg {
    Pathd__V1__Response resp;
    Pathd__V1__WatchEvent m;
    Pathd__V1__Rect changed;
    Pathd__V1__Cell corners[2 + 2 * PD_SCENE_MAX_UPDATE_OPS];
    Pathd__V1__Rect bounds[PD_SCENE_MAX_UPDATE_OPS];
    Pathd__V1__WatchOp ops[PD_SCENE_MAX_UPDATE_OPS];
    Pathd__V1__WatchOp *opp[PD_SCENE_MAX_UPDATE_OPS];
} pd__watch_msg;

static void pd__watch_msg_fill(pd__watch_msg *w, uint64_t id, const pd_watch_event *ev, int final)
{
    pathd__v1__response__init(&w->resp);
    pathd__v1__watch_event__init(&w->m);
    pathd__v1__rect__init(&w->changed);
    Pathd__V1__WatchEvent *m = &w->m;
    m->scene = (char *)ev->scene;
    m->kind = (Pathd__V1__WatchEventKind)ev->kind;
    m->version = ev->version;
    m->incarnation = ev->incarnation;
    m->instance = (char *)ev->instance;
    m->cells_changed = ev->cells_changed;
    if (ev->has_changed) {
        pd__fill_cell(&w->corners[0], ev->changed_min);
        pd__fill_cell(&w->corners[1], ev->changed_max);
        w->changed.min = &w->corners[0];
        w->changed.max = &w->corners[1];
        m->changed = &w->changed;
    }
    size_t n = ev->n_ops < PD_SCENE_MAX_UPDATE_OPS ? ev->n_ops : PD_SCENE_MAX_UPDATE_OPS;
    for (size_t k = 0; k < n; k++) {
        pathd__v1__watch_op__init(&w->ops[k]);
        pathd__v1__rect__init(&w->bounds[k]);
        w->ops[k].op = (Pathd__V1__UpdateOp)ev->ops[k].op;
        w->ops[k].cost = ev->ops[k].cost;
        w->ops[k].cells = ev->ops[k].cells;
        pd__fill_cell(&w->corners[2 + 2 * k], ev->ops[k].min);
        pd__fill_cell(&w->corners[3 + 2 * k], ev->ops[k].max);
        w->bounds[k].min = &w->corners[2 + 2 * k];
        w->bounds[k].max = &w->corners[3 + 2 * k];
        w->ops[k].bounds = &w->bounds[k];
        w->opp[k] = &w->ops[k];
    }
    m->n_ops = n;
    m->ops = w->opp;
    w->resp.id = id;
    w->resp.status = PATHD__V1__STATUS__OK;
    w->resp.final = final != 0;
    w->resp.body_case = PATHD__V1__RESPONSE__BODY_WATCH_EVENT;
    w->resp.watch_event = m;
}

uint8_t *pd_codec_encode_watch_event(uint64_t id, const pd_watch_event *ev, int final, size_t *out_len)
{
    pd__watch_msg w;
    pd__watch_msg_fill(&w, id, ev, final);
    return pd__encode_single(&w.resp, out_len);
}

uint8_t *pd_codec_encode_watch_body(const pd_watch_event *ev, int final, size_t *out_len)
{
    pd__watch_msg w;
    pd__watch_msg_fill(&w, 0, ev, final);
    *out_len = 0;
    size_t size = pathd__v1__response__get_packed_size(&w.resp);
    uint8_t *buf = malloc(size ? size : 1);
    if (buf)
        *out_len = pathd__v1__response__pack(&w.resp, buf);
    return buf;
}

uint8_t *pd_codec_frame_with_id(uint64_t id, const uint8_t *body, size_t body_len, size_t *out_len)
{
    /* Response.id: field 1, varint (tag byte 0x08); proto3 leaves out 0. */
    uint8_t field[1 + 10];
    size_t n = 0;
    if (id != 0) {
        uint64_t v = id;
        field[n++] = 0x08;
        for (; v >= 0x80; v >>= 7)
            field[n++] = (uint8_t)(v | 0x80);
        field[n++] = (uint8_t)v;
    }
    *out_len = 0;
    uint8_t *buf = malloc(PD_FRAME_HEADER_BYTES + n + body_len);
    if (!buf)
        return NULL;
    pd_frame_put_header(buf, (uint32_t)(n + body_len));
    memcpy(buf + PD_FRAME_HEADER_BYTES, field, n);
    memcpy(buf + PD_FRAME_HEADER_BYTES + n, body, body_len);
    *out_len = PD_FRAME_HEADER_BYTES + n + body_len;
    return buf;
}

/* ---- a finished job's answer, by its kind --------------------------------- */

typedef uint8_t *(*pd__job_encoder)(const pd_job *job, size_t *len);

static uint8_t *pd__encode_path_job(const pd_job *job, size_t *len)
{
    return pd_codec_encode_path(job->task.tag, job->scene, &job->path, job->max_chunk, job->want_world, len);
}

static uint8_t *pd__encode_route_job(const pd_job *job, size_t *len)
{
    return pd_codec_encode_route(job->task.tag, &job->route, job->max_chunk, job->want_world, len);
}

static uint8_t *pd__encode_update_job(const pd_job *job, size_t *len)
{
    return pd_codec_encode_update(job->task.tag, job->update_req.scene, &job->update, len);
}

static uint8_t *pd__encode_change_job(const pd_job *job, size_t *len)
{
    return pd_codec_encode_scene_change(job->task.tag, job->change.name, &job->change_out, len);
}

static uint8_t *pd__encode_move_job(const pd_job *job, size_t *len)
{
    return pd_codec_encode_move(job->task.tag, job->kind, &job->move_results[0], len);
}

static uint8_t *pd__encode_batch_job(const pd_job *job, size_t *len)
{
    return pd_codec_encode_batch(job->task.tag, job->move_reqs, job->move_results, job->n_moves, len);
}

static const pd__job_encoder pd__job_encoders[PD_REQ__COUNT] = {
    [PD_REQ_FIND_PATH] = pd__encode_path_job,
    [PD_REQ_FIND_ROUTE] = pd__encode_route_job,
    [PD_REQ_UPDATE_CELLS] = pd__encode_update_job,
    [PD_REQ_CREATE_SCENE] = pd__encode_change_job,
    [PD_REQ_CREATE_INSTANCE] = pd__encode_change_job,
    [PD_REQ_DROP_SCENE] = pd__encode_change_job,
    [PD_REQ_RAYCAST] = pd__encode_move_job,
    [PD_REQ_VALIDATE_MOVE] = pd__encode_move_job,
    [PD_REQ_MOVE_ALONG] = pd__encode_move_job,
    [PD_REQ_NEAREST] = pd__encode_move_job,
    [PD_REQ_REACHABLE] = pd__encode_move_job,
    [PD_REQ_RANDOM_POINT] = pd__encode_move_job,
    [PD_REQ_DISTANCE_TO_WALL] = pd__encode_move_job,
    [PD_REQ_BATCH] = pd__encode_batch_job,
};

uint8_t *pd_codec_encode_job(const pd_job *job, size_t *out_len)
{
    *out_len = 0;
    if ((unsigned)job->kind >= PD_REQ__COUNT || !pd__job_encoders[job->kind])
        return NULL;
    return pd__job_encoders[job->kind](job, out_len);
}
