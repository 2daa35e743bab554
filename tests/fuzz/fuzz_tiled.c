/*
 * fuzz_tiled.c - libFuzzer target for the Tiled map reader
 * (server/conf/pd_tiled.c, with pd_tmx.c for XML and pd_tdata.c for layer
 * data): the .tmj or .tmx a level designer's editor wrote.
 *
 * Input: the map file. When it holds a NUL byte in its first
 * FUZZ_MAX_LAYER bytes, the bytes before it name the tile layer to read and
 * the rest is the file; otherwise every tile layer counts. A classes table
 * names "Wall" (blocked), "Mud" (cost 3) and "Floor" (open), so tile and
 * object classes are decided too. No map directory is given, so external
 * tilesets are refused without touching the file system. A grid that parses
 * must keep the grid invariants (fuzz_check.h) and come with the whole-tile
 * offset of its cell (0, 0); a refusal must say why.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_check.h"
#include "pd_tiled.h"

/* Longer than any layer name a scene may select (PD_TILED_MAX_NAME). */
#define FUZZ_MAX_LAYER 160

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char layer[FUZZ_MAX_LAYER];
    const char *want = NULL;
    const uint8_t *nul = memchr(data, '\0', size < FUZZ_MAX_LAYER ? size : FUZZ_MAX_LAYER);
    if (nul) {
        size_t n = (size_t)(nul - data);
        memcpy(layer, data, n + 1);
        want = layer;
        size -= n + 1;
        data = nul + 1;
    }
    pd_tiled_rules rules;
    pd_tiled_rules_default(&rules);
    if (want && strlen(want) < sizeof rules.layer)
        memcpy(rules.layer, want, strlen(want) + 1);
    static const pd_tiled_class classes[] = { { "Wall", PD_CELL_BLOCKED }, { "Mud", 3 },
                                              { "Floor", PD_CELL_FREE } };
    memcpy(rules.classes, classes, sizeof classes);
    rules.n_classes = sizeof classes / sizeof classes[0];
    char err[256];
    err[0] = '\0';
    double off_x = NAN, off_y = NAN;
    pd_tiled_stats stats;
    pd_grid *g = pd_tiled_load((const char *)data, size, &rules, NULL, &off_x, &off_y, &stats, err,
                               sizeof err);
    if (!g) {
        FUZZ_REQUIRE(err[0] != '\0', "refused without a reason");
        return 0;
    }
    FUZZ_REQUIRE(off_x == floor(off_x) && off_y == floor(off_y), "offset is not whole tiles");
    uint64_t decided = 0;
    for (int k = 0; k < PD_TILED_BY_KINDS; k++)
        decided += stats.cells[k];
    FUZZ_REQUIRE(decided == (uint64_t)g->width * (uint64_t)g->height,
                 "the rules' cell counts do not add up to the grid");
    FUZZ_REQUIRE(memchr(stats.layers, '\0', sizeof stats.layers) != NULL, "layer list unterminated");
    fuzz_check_grid(g);
    pd_grid_destroy(g);
    return 0;
}
