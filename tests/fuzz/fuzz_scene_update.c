/*
 * fuzz_scene_update.c - libFuzzer target for live cell updates:
 * pd_scene_apply_update (server/scene/pd_scene_update.c), its argument checks and
 * the local repair of clearance, unit grids and component labels.
 *
 * Input: byte 0 picks the starting scene (a uniform one and a weighted one,
 * both serving units 1, 2 and 3), then a chain of updates, each applied to
 * the version the previous one produced:
 *   op, cost, kind, then for a rectangle (kind even) four coordinates
 *   min.x min.y max.x max.y, for a list (kind odd) kind/2 % 32 cells of two
 *   coordinates each.
 * A coordinate byte is a signed offset (-128..127), except 127 and -128,
 * which stand for INT32_MAX and INT32_MIN.
 * Every answer is checked against a model of the grid: the status the
 * documented checks give, the cells changed and the version; every new
 * version's clearance, unit grids and labels are compared with a fresh
 * build from its grid, and the version it came from must be untouched
 * (readers still hold it). This is where finding 2 of issue 10 (a first
 * COST update not reaching the unit grids of sizes 2 and up) would show.
 */
#include <stdint.h>
#include <string.h>

#include "components_check.h"
#include "fuzz_check.h"
#include "pd_scene.h"

#define FUZZ_MAX_LIST 32

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static pd_scene *fuzz_base[2];

static pd_scene *fuzz_load(const char *file)
{
    pd_conf_scene cs;
    memset(&cs, 0, sizeof cs);
    snprintf(cs.name, sizeof cs.name, "fuzz");
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", PD_TEST_DATA_DIR, file);
    cs.map_path = path;
    cs.format = PD_MAP_ASCII;
    cs.cell_size = 1.0;
    cs.unit_sizes[0] = 1;
    cs.unit_sizes[1] = 2;
    cs.unit_sizes[2] = 3;
    cs.n_unit_sizes = 3;
    char err[512];
    pd_scene *s = pd_scene_load(&cs, err, sizeof err);
    FUZZ_REQUIRE(s != NULL, "%s", err);
    return s;
}

static int32_t fuzz_coord(uint8_t b)
{
    int8_t v = (int8_t)b;
    return v == INT8_MAX ? INT32_MAX : v == INT8_MIN ? INT32_MIN : v;
}

static size_t fuzz_padded(const pd_grid *g)
{
    return (size_t)(g->width + 2) * (size_t)(g->height + 2);
}

/* The status pd_scene.h promises for u on grid g, checks in its order. */
static pd_status fuzz_expected_status(const pd_grid *g, const pd_scene_update *u)
{
    if ((unsigned)u->op > PD_UPDATE_RESTORE || (u->op == PD_UPDATE_COST && u->cost < 1))
        return PD_INVALID_ARGUMENT;
    if (u->is_rect) {
        if (u->rect_min.x > u->rect_max.x || u->rect_min.y > u->rect_max.y)
            return PD_INVALID_ARGUMENT;
        return pd_grid_in_bounds(g, u->rect_min.x, u->rect_min.y) && pd_grid_in_bounds(g, u->rect_max.x, u->rect_max.y)
                   ? PD_OK
                   : PD_OUT_OF_BOUNDS;
    }
    if (u->n_cells == 0)
        return PD_INVALID_ARGUMENT;
    for (size_t i = 0; i < u->n_cells; i++)
        if (!pd_grid_in_bounds(g, u->cells[i].x, u->cells[i].y))
            return PD_OUT_OF_BOUNDS;
    return PD_OK;
}

/* Writes u into the model grid m; returns the cells whose value changed. */
/* What u makes of model cell (x, y); RESTORE reads the authored grid. */
static uint64_t fuzz_model_cell(pd_grid *m, const pd_grid *authored, const pd_scene_update *u, int32_t x,
                                int32_t y)
{
    uint8_t v = u->op == PD_UPDATE_BLOCK     ? PD_CELL_BLOCKED
                : u->op == PD_UPDATE_PASS    ? PD_CELL_FREE
                : u->op == PD_UPDATE_RESTORE ? pd_grid_get(authored, x, y)
                                             : u->cost;
    uint64_t changed = pd_grid_get(m, x, y) != v;
    pd_grid_set(m, x, y, v);
    return changed;
}

static uint64_t fuzz_model_apply(pd_grid *m, const pd_grid *authored, const pd_scene_update *u)
{
    uint64_t changed = 0;
    if (u->is_rect) {
        for (int32_t y = u->rect_min.y; y <= u->rect_max.y; y++)
            for (int32_t x = u->rect_min.x; x <= u->rect_max.x; x++)
                changed += fuzz_model_cell(m, authored, u, x, y);
    } else {
        for (size_t i = 0; i < u->n_cells; i++)
            changed += fuzz_model_cell(m, authored, u, u->cells[i].x, u->cells[i].y);
    }
    return changed;
}

/* s, built by updates, equals a fresh derivation from its grid, which must
 * equal the model. */
static void fuzz_check_fresh(const pd_scene *s, const pd_grid *model)
{
    const pd_grid *g = s->grid;
    fuzz_check_grid(g);
    FUZZ_REQUIRE(memcmp(g->cells, model->cells, fuzz_padded(g)) == 0, "grid differs from the model");
    uint64_t passable = 0;
    for (int32_t y = 0; y < g->height; y++)
        for (int32_t x = 0; x < g->width; x++)
            passable += pd_grid_get(g, x, y) != PD_CELL_BLOCKED;
    FUZZ_REQUIRE(s->passable_cells == passable, "passable_cells %llu, grid has %llu",
                 (unsigned long long)s->passable_cells, (unsigned long long)passable);
    pd_clearance *c = pd_clearance_build(g);
    FUZZ_REQUIRE(c != NULL, "out of memory");
    FUZZ_REQUIRE(memcmp(s->clearance->values, c->values, fuzz_padded(g)) == 0, "clearance differs from a fresh build");
    for (size_t i = 0; i < s->n_unit_sizes; i++) {
        const pd_scene_unit *u = &s->units[i];
        pd_grid *fresh = pd_unit_grid_build(g, c, u->unit);
        FUZZ_REQUIRE(fresh != NULL, "out of memory");
        FUZZ_REQUIRE(memcmp(u->grid->cells, fresh->cells, fuzz_padded(g)) == 0,
                     "unit %u grid differs from a fresh build", (unsigned)u->unit);
        FUZZ_REQUIRE(u->grid->uniform_cost == fresh->uniform_cost, "unit %u uniform_cost %d, fresh %d",
                     (unsigned)u->unit, u->grid->uniform_cost, fresh->uniform_cost);
        pd_components *labels = pd_components_build(fresh);
        FUZZ_REQUIRE(labels != NULL, "out of memory");
        char why[160];
        FUZZ_REQUIRE(!components_differ(u->components, labels, why, sizeof why), "unit %u labels: %s",
                     (unsigned)u->unit, why);
        pd_components_destroy(labels);
        pd_grid_destroy(fresh);
    }
    pd_clearance_destroy(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fuzz_base[0]) {
        fuzz_base[0] = fuzz_load("e2e4_units.txt");
        fuzz_base[1] = fuzz_load("e2e4_terrain.txt");
    }
    if (size < 1)
        return 0;
    pd_scene *cur = fuzz_base[data[0] & 1];
    pd_scene_retain(cur);
    pd_grid *model = pd_grid_clone(cur->grid);
    pd_grid *before = pd_grid_clone(cur->grid);
    FUZZ_REQUIRE(model && before, "out of memory");
    size_t off = 1;
    while (size - off >= 3) {
        pd_scene_update u;
        pd_point cells[FUZZ_MAX_LIST];
        memset(&u, 0, sizeof u);
        u.op = (pd_update_op)(data[off] % 5);   /* 4 is no op at all */
        u.cost = data[off + 1];
        uint8_t kind = data[off + 2];
        off += 3;
        u.is_rect = !(kind & 1);
        size_t need = u.is_rect ? 4 : 2 * (size_t)((kind >> 1) % FUZZ_MAX_LIST);
        if (size - off < need)
            break;
        if (u.is_rect) {
            u.rect_min = (pd_point){ fuzz_coord(data[off]), fuzz_coord(data[off + 1]) };
            u.rect_max = (pd_point){ fuzz_coord(data[off + 2]), fuzz_coord(data[off + 3]) };
        } else {
            u.n_cells = need / 2;
            for (size_t i = 0; i < u.n_cells; i++)
                cells[i] = (pd_point){ fuzz_coord(data[off + 2 * i]), fuzz_coord(data[off + 2 * i + 1]) };
            u.cells = cells;
        }
        off += need;

        pd_status want = fuzz_expected_status(cur->grid, &u);
        pd_scene *next = NULL;
        pd_scene_update_result res;
        pd_status st = pd_scene_apply_update(cur, &u, &next, &res);
        FUZZ_REQUIRE(st == want, "status %s, want %s", pd_status_name(st), pd_status_name(want));
        FUZZ_REQUIRE(memcmp(cur->grid->cells, before->cells, fuzz_padded(before)) == 0,
                     "the update changed the version readers hold");
        if (st != PD_OK) {
            FUZZ_REQUIRE(next == NULL, "a refused update made a scene");
            continue;
        }
        uint64_t changed = fuzz_model_apply(model, fuzz_base[data[0] & 1]->grid, &u);
        FUZZ_REQUIRE(res.cells_changed == changed, "cells_changed %llu, want %llu",
                     (unsigned long long)res.cells_changed, (unsigned long long)changed);
        if (changed == 0) {
            FUZZ_REQUIRE(next == NULL && res.version == cur->version, "a no-op update made a version");
            continue;
        }
        FUZZ_REQUIRE(next != NULL && next->version == cur->version + 1 && res.version == next->version,
                     "version %llu after %llu", (unsigned long long)res.version, (unsigned long long)cur->version);
        fuzz_check_fresh(next, model);
        pd_scene_release(cur);
        cur = next;
        memcpy(before->cells, cur->grid->cells, fuzz_padded(before));
    }
    pd_grid_destroy(before);
    pd_grid_destroy(model);
    pd_scene_release(cur);
    return 0;
}
