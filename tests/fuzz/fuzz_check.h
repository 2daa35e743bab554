/*
 * fuzz_check.h - what the fuzz targets assert about the code under test.
 *
 * A broken promise aborts with a message, which libFuzzer reports as a crash
 * and saves the input for, exactly like a sanitizer finding: a fuzz target
 * should find wrong answers too, not only memory errors.
 */
#ifndef FUZZ_CHECK_H
#define FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include "pd_grid.h"

#define FUZZ_REQUIRE(cond, ...)                                                                    \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: broken promise: %s: ", __FILE__, __LINE__, #cond);             \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* What every parser promises about a grid it returns (pd_grid.h): sides in
 * 1..PD_GRID_MAX_SIDE, the padding ring blocked (the search reads it without
 * bounds checks), and uniform_cost telling the truth (A* and JPS pick their
 * loop by it). */
static inline void fuzz_check_grid(const pd_grid *g)
{
    FUZZ_REQUIRE(g->width >= 1 && g->width <= PD_GRID_MAX_SIDE && g->height >= 1 &&
                     g->height <= PD_GRID_MAX_SIDE,
                 "%dx%d", (int)g->width, (int)g->height);
    FUZZ_REQUIRE(g->stride == g->width + 2, "stride %d", (int)g->stride);
    int uniform = 1;
    for (int32_t y = -1; y <= g->height; y++) {
        for (int32_t x = -1; x <= g->width; x++) {
            uint8_t v = g->cells[pd_grid_index(g, x, y)];
            if (!pd_grid_in_bounds(g, x, y))
                FUZZ_REQUIRE(v == PD_CELL_BLOCKED, "padding (%d, %d) is %u", (int)x, (int)y, v);
            else if (v > PD_CELL_FREE)
                uniform = 0;
        }
    }
    FUZZ_REQUIRE(g->uniform_cost == uniform, "uniform_cost %d, cells say %d", g->uniform_cost, uniform);
}

#endif
