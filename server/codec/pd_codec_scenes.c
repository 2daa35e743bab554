/*
 * pd_codec_scenes.c - the scenes-and-world family on the wire: UpdateCells,
 * CreateScene, CreateInstance and DropScene decoded and answered; the
 * reads of a scene (ListScenes, GetSceneInfo, GetSceneGrid); Watch and
 * Unwatch, and the watch events a watcher hears.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_codec_internal.h"
#include "pd_scene_reserve.h"

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

/* An idempotency key (UpdateCells, CreateScene, CreateInstance,
 * DropScene): "" (none), or up to PD_IDEMPOTENCY_KEY_MAX bytes of printable
 * ASCII, since it becomes part of a Redis key name and a log line. */
static pd_status pd__decode_idem_key(const char *key, const char *field, char out[PD_IDEMPOTENCY_KEY_MAX + 1],
                                     char *err, size_t errlen)
{
    size_t n = key ? strlen(key) : 0;
    if (n > PD_IDEMPOTENCY_KEY_MAX) {
        pd_set_err(err, errlen, "%s is %zu bytes; at most %d allowed", field, n, PD_IDEMPOTENCY_KEY_MAX);
        return PD_INVALID_ARGUMENT;
    }
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)key[i] < 0x20 || (unsigned char)key[i] > 0x7E) {
            pd_set_err(err, errlen, "%s byte %zu is not printable ASCII", field, i);
            return PD_INVALID_ARGUMENT;
        }
    }
    memcpy(out, n ? key : "", n + 1);
    return PD_OK;
}

static pd_status pd__decode_update_cells(const Pathd__V1__UpdateCells *m, pd_update_cells_req *out,
                                         char *err, size_t errlen)
{
    pd_status st = pd__decode_scene_name(m->scene, "update_cells.scene", out->scene, err, errlen);
    if (st == PD_OK)
        st = pd__decode_idem_key(m->idempotency_key, "update_cells.idempotency_key", out->idem_key, err, errlen);
    if (st != PD_OK)
        return st;
    if (m->cut_time_case == PATHD__V1__UPDATE_CELLS__CUT_TIME_AT_MS) {
        if (m->at_ms < 0 || m->at_ms > ((int64_t)1 << 60)) {
            pd_set_err(err, errlen, "update_cells.at_ms %lld is not 0..2^60", (long long)m->at_ms);
            return PD_INVALID_ARGUMENT;
        }
        out->has_at_ms = 1;
        out->at_ms = m->at_ms;
    }
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

uint8_t *pd_codec_encode_scene_info(uint64_t id, const pd_scene *scene, size_t *out_len)
{
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
    return pd__encode_ok(id, PATHD__V1__RESPONSE__BODY_SCENE_INFO, &m, out_len);
}

uint8_t *pd_codec_encode_scene_grid(uint64_t id, const pd_grid *grid, uint64_t version, int32_t row_start,
                                    int32_t rows, size_t *out_len)
{
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
    buf = pd__encode_ok(id, PATHD__V1__RESPONSE__BODY_SCENE_GRID, &m, out_len);
    free(cells);
    return buf;
}

uint8_t *pd_codec_encode_scene_list(uint64_t id, pd_scene *const *scenes, size_t n, size_t *out_len)
{
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
    buf = pd__encode_ok(id, PATHD__V1__RESPONSE__BODY_SCENE_LIST, &list, out_len);
done:
    free(items);
    free(ptrs);
    return buf;
}

/* An update's answer, with the agents whose reservations it cut (ascending). */
static uint8_t *pd__encode_update_cut(uint64_t id, const char *scene, const pd_update_outcome *o,
                                      const uint64_t *agents_cut, size_t n_cut, size_t *out_len)
{
    Pathd__V1__UpdateResult m = PATHD__V1__UPDATE_RESULT__INIT;

    if (o->status != PD_OK) {
        char message[PD_QUERY_MESSAGE_MAX + PD_CONF_MAX_NAME + 32]; /* + "update of scene '%s' failed: " */
        snprintf(message, sizeof message, "update of scene '%s' failed: %s", scene,
                 o->message[0] ? o->message : pd_status_name(o->status));
        return pd_codec_encode_error(id, o->status, message, out_len);
    }
    m.version = o->update.version;
    m.cells_changed = o->update.cells_changed;
    m.micros = o->update.micros;
    m.agents_cut = (uint64_t *)agents_cut;
    m.n_agents_cut = n_cut;
    return pd__encode_ok(id, PATHD__V1__RESPONSE__BODY_UPDATE, &m, out_len);
}

uint8_t *pd_codec_encode_update(uint64_t id, const char *scene, const pd_update_outcome *o,
                                size_t *out_len)
{
    return pd__encode_update_cut(id, scene, o, NULL, 0, out_len);
}

uint8_t *pd_codec_encode_scene_change(uint64_t id, const char *name, const pd_scene_change_outcome *outcome,
                                      size_t *out_len)
{
    const pd_store_change *o = &outcome->change;
    if (o->status != PD_OK)
        return pd_codec_encode_error(id, o->status, o->message[0] ? o->message : pd_status_name(o->status),
                                     out_len);
    Pathd__V1__SceneChange m = PATHD__V1__SCENE_CHANGE__INIT;
    m.name = (char *)name;
    m.version = o->version;
    m.own_bytes = o->own_bytes;
    m.scene_bytes = o->scene_bytes;
    return pd__encode_ok(id, PATHD__V1__RESPONSE__BODY_SCENE_CHANGE, &m, out_len);
}

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
    if (ev->kind == PD_WATCH_AGENTS_CUT || ev->kind == PD_WATCH_AGENTS_DISPLACED ||
        ev->kind == PD_WATCH_AGENTS_EXPIRED || ev->kind == PD_WATCH_AGENTS_RELEASED) {
        m->n_agents = ev->n_agents < PD_WATCH_MAX_AGENTS ? ev->n_agents : PD_WATCH_MAX_AGENTS;
        m->agents = (uint64_t *)ev->agents;
        m->cut_at_ms = ev->cut_at_ms;
    }
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

static uint8_t *pd__encode_update_job(const pd_job *job, size_t *len)
{
    const pd_update_cut *cut = job->ext;
    return pd__encode_update_cut(job->task.tag, job->update_req.scene, &job->update, cut ? cut->agents : NULL,
                                 cut ? cut->n_agents : 0, len);
}

static uint8_t *pd__encode_change_job(const pd_job *job, size_t *len)
{
    return pd_codec_encode_scene_change(job->task.tag, job->change.name, &job->change_out, len);
}

static pd_status pd__decode_update_body(const Pathd__V1__Request *m, const pd__codec_row *row, pd_request *req,
                                        char *err, size_t errlen)
{
    (void)row;
    return pd__decode_update_cells(m->update_cells, &req->u.update_cells, err, errlen);
}

static pd_status pd__decode_scene_info_body(const Pathd__V1__Request *m, const pd__codec_row *row,
                                            pd_request *req, char *err, size_t errlen)
{
    (void)row;
    req->u.scene_info.min_version = m->scene_info->min_version;
    return pd__decode_scene_name(m->scene_info->scene, "scene_info.scene", req->u.scene_info.scene, err, errlen);
}

static pd_status pd__decode_scene_grid_body(const Pathd__V1__Request *m, const pd__codec_row *row,
                                            pd_request *req, char *err, size_t errlen)
{
    (void)row;
    return pd__decode_scene_grid(m->scene_grid, &req->u.grid, err, errlen);
}

static pd_status pd__decode_create_scene_body(const Pathd__V1__Request *m, const pd__codec_row *row,
                                              pd_request *req, char *err, size_t errlen)
{
    (void)row;
    pd_status st = pd__decode_idem_key(m->create_scene->idempotency_key, "create_scene.idempotency_key",
                                       req->u.change.idem_key, err, errlen);
    return st != PD_OK ? st : pd__decode_create_scene(m->create_scene, &req->u.change, err, errlen);
}

static pd_status pd__decode_create_instance_body(const Pathd__V1__Request *m, const pd__codec_row *row,
                                                 pd_request *req, char *err, size_t errlen)
{
    (void)row;
    pd_status st = pd__decode_idem_key(m->create_instance->idempotency_key, "create_instance.idempotency_key",
                                       req->u.change.idem_key, err, errlen);
    if (st == PD_OK)
        st = pd__decode_scene_name(m->create_instance->name, "create_instance.name", req->u.change.name, err, errlen);
    return st != PD_OK ? st
                       : pd__decode_scene_name(m->create_instance->template_, "create_instance.template",
                                               req->u.change.tmpl, err, errlen);
}

static pd_status pd__decode_drop_scene_body(const Pathd__V1__Request *m, const pd__codec_row *row,
                                            pd_request *req, char *err, size_t errlen)
{
    (void)row;
    req->u.change.drop_portals = m->drop_scene->drop_portals;
    pd_status st = pd__decode_idem_key(m->drop_scene->idempotency_key, "drop_scene.idempotency_key",
                                       req->u.change.idem_key, err, errlen);
    return st != PD_OK ? st : pd__decode_scene_name(m->drop_scene->name, "drop_scene.name", req->u.change.name, err, errlen);
}

static pd_status pd__decode_watch_body(const Pathd__V1__Request *m, const pd__codec_row *row, pd_request *req,
                                       char *err, size_t errlen)
{
    (void)row;
    return pd__decode_watch(m->watch, &req->u.watch, err, errlen);
}

static pd_status pd__decode_unwatch_body(const Pathd__V1__Request *m, const pd__codec_row *row, pd_request *req,
                                         char *err, size_t errlen)
{
    (void)row;
    (void)err;
    (void)errlen;
    req->u.unwatch_target = m->unwatch->watch_id;
    return PD_OK;
}

const pd__codec_row pd__codec_rows_scenes[] = {
    {PATHD__V1__REQUEST__BODY_UPDATE_CELLS, PD_REQ_UPDATE_CELLS, 0, pd__decode_update_body, pd__encode_update_job},
    {PATHD__V1__REQUEST__BODY_CREATE_SCENE, PD_REQ_CREATE_SCENE, 0, pd__decode_create_scene_body,
     pd__encode_change_job},
    {PATHD__V1__REQUEST__BODY_CREATE_INSTANCE, PD_REQ_CREATE_INSTANCE, 0, pd__decode_create_instance_body,
     pd__encode_change_job},
    {PATHD__V1__REQUEST__BODY_DROP_SCENE, PD_REQ_DROP_SCENE, 0, pd__decode_drop_scene_body, pd__encode_change_job},
    {PATHD__V1__REQUEST__BODY_LIST_SCENES, PD_REQ_LIST_SCENES, 0, NULL, NULL},
    {PATHD__V1__REQUEST__BODY_SCENE_INFO, PD_REQ_SCENE_INFO, 0, pd__decode_scene_info_body, NULL},
    {PATHD__V1__REQUEST__BODY_SCENE_GRID, PD_REQ_SCENE_GRID, 0, pd__decode_scene_grid_body, NULL},
    {PATHD__V1__REQUEST__BODY_WATCH, PD_REQ_WATCH, 0, pd__decode_watch_body, NULL},
    {PATHD__V1__REQUEST__BODY_UNWATCH, PD_REQ_UNWATCH, 0, pd__decode_unwatch_body, NULL},
    {0},
};
