/*
 * same_scene.h - the checks of a change log's replay and tails, for the
 * journal's tests and the store's change-log tests: a replay rebuilt the
 * scenes it should (the same names, versions, placement, cells cell by
 * cell and authored cells: a RESTORE over the whole scene gives equal
 * grids), and what a tail of one scene gave, in order.
 */
#ifndef SAME_SCENE_H
#define SAME_SCENE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "pd_scene.h"
#include "pd_store.h"

/* The cells of scene `name` in r, with its version and authored state,
 * must equal those in q. */
static inline void assert_same_scene(pd_registry *r, pd_registry *q, const char *name)
{
    pd_scene *a = pd_registry_acquire(r, name), *b = pd_registry_acquire(q, name);
    if (!a || !b)
        fail_msg("scene '%s' served by %s", name, a ? "the first only" : b ? "the second only" : "neither");
    assert_int_equal(a->version, b->version);
    assert_int_equal(a->runtime, b->runtime);
    assert_int_equal(a->grid->width, b->grid->width);
    assert_int_equal(a->grid->height, b->grid->height);
    assert_true(a->origin_x == b->origin_x && a->origin_y == b->origin_y && a->cell_size == b->cell_size);
    assert_int_equal(a->n_unit_sizes, b->n_unit_sizes);
    assert_int_equal(a->passable_cells, b->passable_cells);
    for (int32_t y = 0; y < a->grid->height; y++)
        for (int32_t x = 0; x < a->grid->width; x++)
            assert_int_equal(pd_grid_get(a->grid, x, y), pd_grid_get(b->grid, x, y));
    /* The authored state too: RESTORE over the whole scene gives equal grids. */
    pd_scene_update restore = { .op = PD_UPDATE_RESTORE, .is_rect = 1, .rect_min = { 0, 0 },
                                .rect_max = { a->grid->width - 1, a->grid->height - 1 } };
    pd_scene *ra = NULL, *rb = NULL;
    assert_int_equal(pd_scene_apply_updates(a, &restore, 1, &ra, NULL), PD_OK);
    assert_int_equal(pd_scene_apply_updates(b, &restore, 1, &rb, NULL), PD_OK);
    const pd_grid *ga = ra ? ra->grid : a->grid, *gb = rb ? rb->grid : b->grid;
    for (int32_t y = 0; y < ga->height; y++)
        for (int32_t x = 0; x < ga->width; x++)
            assert_int_equal(pd_grid_get(ga, x, y), pd_grid_get(gb, x, y));
    pd_scene_release(ra);
    pd_scene_release(rb);
    pd_scene_release(a);
    pd_scene_release(b);
}

/* The same scenes, each as assert_same_scene checks it. */
static inline void assert_same_world(pd_registry *a, pd_registry *b)
{
    pd_scene **la, **lb;
    size_t na = pd_registry_list(a, &la), nb = pd_registry_list(b, &lb);
    assert_int_equal(na, nb);
    for (size_t i = 0; i < na; i++) {
        assert_string_equal(la[i]->name, lb[i]->name);
        assert_same_scene(a, b, la[i]->name);
    }
    pd_registry_release_list(la, na);
    pd_registry_release_list(lb, nb);
}


/* What a tail gave: each record's type and version, in order. */
typedef struct tailed {
    pd_journal_type types[256];
    uint64_t versions[256];
    char scene[PD_CONF_MAX_NAME];
    size_t n;
} tailed;

static inline int tailed_add(void *user, const pd_journal_record *rec)
{
    tailed *t = user;
    assert_string_equal(rec->scene, t->scene); /* no other scene's record */
    assert_true(t->n < 256);
    t->types[t->n] = rec->type;
    t->versions[t->n++] = rec->version;
    return 0;
}

/* The store's tail of `name` from `from` into t: 0, or 1 (not held). */
static inline int tail_of(pd_store *st, const char *name, uint64_t from, tailed *t)
{
    char err[512];
    memset(t, 0, sizeof *t);
    snprintf(t->scene, sizeof t->scene, "%s", name);
    int rc = pd_store_tail(st, name, from, tailed_add, t, err, sizeof err);
    if (rc < 0)
        fail_msg("tail: %s", err);
    return rc;
}

#endif
