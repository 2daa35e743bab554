/*
 * open_scene.h - a scene of side x side open cells (cost 1, unit size 1),
 * built as CreateScene builds one from raw cells, for tests that need a
 * real scene and nothing particular about its map.
 */
#ifndef OPEN_SCENE_H
#define OPEN_SCENE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_conf.h"
#include "pd_scene.h"

/* Fails the test (cmocka) when the scene cannot be made. */
static inline pd_scene *open_scene(const char *name, int32_t side)
{
    pd_conf_scene cs;
    memset(&cs, 0, sizeof cs);
    snprintf(cs.name, sizeof cs.name, "%s", name);
    cs.format = PD_MAP_ASCII;
    cs.cell_size = 1.0;
    cs.unit_sizes[0] = 1;
    cs.n_unit_sizes = 1;
    pd_tiled_rules_default(&cs.tiled);
    uint8_t *cells = malloc((size_t)side * (size_t)side);
    assert_non_null(cells);
    memset(cells, 1, (size_t)side * (size_t)side);
    char err[256];
    pd_scene *s = pd_scene_from_cells(&cs, side, side, cells, err, sizeof err);
    free(cells);
    if (!s)
        fail_msg("%s", err);
    return s;
}

#endif
