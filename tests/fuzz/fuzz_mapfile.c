/*
 * fuzz_mapfile.c - libFuzzer target for the map file parsers of the core
 * (pd_mapfile.h): Moving AI .map, Moving AI with per-character costs, and
 * plain ASCII grids.
 *
 * Input: byte 0 picks the parser (mod 3: Moving AI, ASCII, Moving AI with
 * costs); for the last, bytes 1..8 are four (character, cost) overrides. The
 * rest is the file. A grid that parses must keep the grid invariants
 * (fuzz_check.h), and a plain map must survive a round trip: written back in
 * its own format and parsed again, it gives the same cells - so a parser
 * that misreads a row or a cost is caught, not only one that crashes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "pd_mapfile.h"

enum { FUZZ_MOVINGAI = 0, FUZZ_ASCII = 1, FUZZ_MOVINGAI_COSTS = 2 };
#define FUZZ_COST_PAIRS 4

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The grid in the format it came from: Moving AI ('.' and '@' under a
 * header) or ASCII ('.', '#' and '2'..'9'). NULL when a cost has no
 * character in that format. */
static char *fuzz_write_map(const pd_grid *g, int ascii, size_t *len)
{
    size_t cap = (size_t)(g->width + 1) * (size_t)g->height + 64;
    char *text = malloc(cap);
    FUZZ_REQUIRE(text != NULL, "out of memory");
    size_t n = 0;
    if (!ascii)
        n = (size_t)snprintf(text, cap, "type octile\nheight %d\nwidth %d\nmap\n", (int)g->height,
                             (int)g->width);
    for (int32_t y = 0; y < g->height; y++) {
        for (int32_t x = 0; x < g->width; x++) {
            uint8_t v = pd_grid_get(g, x, y);
            if (v == PD_CELL_BLOCKED)
                text[n++] = ascii ? '#' : '@';
            else if (v == PD_CELL_FREE)
                text[n++] = '.';
            else if (ascii && v <= 9)
                text[n++] = (char)('0' + v);
            else {
                free(text);
                return NULL;
            }
        }
        text[n++] = '\n';
    }
    *len = n;
    return text;
}

static void fuzz_round_trip(const pd_grid *g, int ascii)
{
    size_t len;
    char *text = fuzz_write_map(g, ascii, &len);
    FUZZ_REQUIRE(text != NULL, "a plain map parsed to a cost its format cannot write");
    pd_parse_error err;
    pd_grid *again = ascii ? pd_map_parse_ascii(text, len, &err) : pd_map_parse_movingai(text, len, &err);
    FUZZ_REQUIRE(again != NULL, "the written map does not parse: %d:%d: %s", err.line, err.column,
                 err.message);
    FUZZ_REQUIRE(again->width == g->width && again->height == g->height, "%dx%d became %dx%d",
                 (int)g->width, (int)g->height, (int)again->width, (int)again->height);
    size_t cells = (size_t)(g->width + 2) * (size_t)(g->height + 2);
    FUZZ_REQUIRE(memcmp(again->cells, g->cells, cells) == 0, "cells differ after a round trip");
    pd_grid_destroy(again);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int mode = data[0] % 3;
    size_t off = 1;
    pd_char_costs costs;
    memset(&costs, 0, sizeof costs);
    if (mode == FUZZ_MOVINGAI_COSTS) {
        if (size < 1 + 2 * FUZZ_COST_PAIRS)
            return 0;
        for (int i = 0; i < FUZZ_COST_PAIRS; i++) {
            uint8_t c = data[1 + 2 * i];
            costs.set[c] = 1;
            costs.cost[c] = data[2 + 2 * i];
        }
        off += 2 * FUZZ_COST_PAIRS;
    }
    const char *text = (const char *)data + off;
    size_t len = size - off;
    pd_parse_error err;
    memset(&err, 0, sizeof err);
    pd_grid *g = mode == FUZZ_ASCII            ? pd_map_parse_ascii(text, len, &err)
                 : mode == FUZZ_MOVINGAI_COSTS ? pd_map_parse_movingai_with(text, len, &costs, &err)
                                               : pd_map_parse_movingai(text, len, &err);
    if (!g) {
        /* A refusal names where and why. */
        FUZZ_REQUIRE(err.message[0] != '\0' && memchr(err.message, '\0', sizeof err.message),
                     "refused without a reason");
        FUZZ_REQUIRE(err.line >= 0 && err.column >= 0, "line %d column %d", err.line, err.column);
        return 0;
    }
    fuzz_check_grid(g);
    if (mode != FUZZ_MOVINGAI_COSTS)
        fuzz_round_trip(g, mode == FUZZ_ASCII);
    pd_grid_destroy(g);
    return 0;
}
