/*
 * zero_map.h - Tiled maps of any size in a few kilobytes, for the tests of
 * what a map may cost (issue 29, findings 6 and 7; test_tiled_cost.c,
 * test_e2e_scenes.c): the tile layer is one zstd frame of RLE blocks, all
 * gids 0 (open ground), written by hand so no compressor is needed, then
 * base64 (tiled_base64, which test_tiled_formats.c encodes its layers
 * with too). bench/abuse/map-cost.py writes the same frames.
 */
#ifndef ZERO_MAP_H
#define ZERO_MAP_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Standard base64 of in[0..n) into out (4 * ceil(n / 3) + 1 bytes). */
static inline void tiled_base64(const unsigned char *in, size_t n, char *out)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0) |
                     (i + 2 < n ? in[i + 2] : 0);
        out[o++] = abc[v >> 18 & 63];
        out[o++] = abc[v >> 12 & 63];
        out[o++] = i + 1 < n ? abc[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? abc[v & 63] : '=';
    }
    out[o] = '\0';
}

/* Base64 of a zstd frame holding `bytes` zero bytes; malloc'd. */
static inline char *zero_map_frame_b64(uint64_t bytes)
{
    const uint64_t block = 128 * 1024;
    size_t blocks = (size_t)((bytes + block - 1) / block), raw_len = 6 + 4 * blocks;
    unsigned char *raw = malloc(raw_len);
    char *out = malloc((raw_len + 2) / 3 * 4 + 1);
    if (!raw || !out) {
        free(raw);
        free(out);
        return NULL;
    }
    /* Magic, then a header with no content size and a 128 KiB window. */
    const unsigned char head[6] = { 0x28, 0xB5, 0x2F, 0xFD, 0x00, 0x38 };
    memcpy(raw, head, sizeof head);
    size_t o = sizeof head;
    for (size_t i = 0; i < blocks; i++) {
        uint64_t size = bytes - i * block < block ? bytes - i * block : block;
        uint32_t h = (uint32_t)(size << 3) | 1u << 1 | (i + 1 == blocks ? 1u : 0u); /* RLE */
        raw[o++] = (unsigned char)h;
        raw[o++] = (unsigned char)(h >> 8);
        raw[o++] = (unsigned char)(h >> 16);
        raw[o++] = 0; /* the byte repeated */
    }
    tiled_base64(raw, o, out);
    free(raw);
    return out;
}

/* A finite width x height .tmx of tile x tile px tiles, `layers` all-zero
 * zstd layers, then `objects` (an <objectgroup>, or ""); malloc'd. */
static inline char *zero_map_tmx(int width, int height, int tile, int layers, const char *objects)
{
    char *data = zero_map_frame_b64((uint64_t)width * (uint64_t)height * 4);
    size_t room = 512 + (size_t)layers * (strlen(data ? data : "") + 160) + strlen(objects);
    char *text = malloc(room);
    if (!data || !text) {
        free(data);
        free(text);
        return NULL;
    }
    size_t n = (size_t)snprintf(text, room,
                                "<map orientation=\"orthogonal\" width=\"%d\" height=\"%d\" tilewidth=\"%d\" "
                                "tileheight=\"%d\">\n <tileset firstgid=\"1\" tilecount=\"1\"/>\n",
                                width, height, tile, tile);
    for (int l = 0; l < layers; l++)
        n += (size_t)snprintf(text + n, room - n,
                              " <layer name=\"g%d\" width=\"%d\" height=\"%d\"><data encoding=\"base64\" "
                              "compression=\"zstd\">%s</data></layer>\n",
                              l, width, height, data);
    snprintf(text + n, room - n, "%s</map>\n", objects);
    free(data);
    return text;
}

#endif
