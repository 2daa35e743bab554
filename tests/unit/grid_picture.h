/*
 * grid_picture.h - compares a grid with the picture of it a test draws:
 * rows of '.' (open, cost 1), '#' (blocked) or '2'..'9' (open with that
 * cost). Shared by the map reader tests (test_mapfile.c,
 * test_tiled_formats.c, test_ldtk.c), whose maps are each written beside
 * the grid they must give. Include after <cmocka.h>.
 */
#ifndef GRID_PICTURE_H
#define GRID_PICTURE_H

#include <string.h>

#include "pd_grid.h"

/* Fails the test at the first cell that differs, naming it. */
static inline void grid_picture_check(const pd_grid *g, const char *const *rows, int32_t h)
{
    int32_t w = (int32_t)strlen(rows[0]);
    assert_int_equal(g->width, w);
    assert_int_equal(g->height, h);
    for (int32_t y = 0; y < h; y++) {
        for (int32_t x = 0; x < w; x++) {
            char c = rows[y][x];
            uint8_t want = c == '#' ? PD_CELL_BLOCKED : c == '.' ? PD_CELL_FREE : (uint8_t)(c - '0');
            if (pd_grid_get(g, x, y) != want)
                fail_msg("cell (%d, %d) is %u, want %u", x, y, pd_grid_get(g, x, y), want);
        }
    }
}

#endif
