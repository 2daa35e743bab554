/*
 * pd_tdata.h - decodes the data of one Tiled tile layer or chunk into gids.
 *
 * Tiled stores a layer's tiles as CSV text, or as base64 of little-endian
 * 32-bit gids, optionally compressed with zlib, gzip or zstd
 * (doc.mapeditor.org, "TMX Map Format", <data>). The .tmx and .tmj readers
 * both hand the text here, so the encodings are checked in one place. The
 * caller knows how many cells the layer has and owns the output array; a
 * decoded stream of any other length is an error, so a truncated or padded
 * layer is never read as a smaller map.
 */
#ifndef PD_TDATA_H
#define PD_TDATA_H

#include <stddef.h>
#include <stdint.h>

/* Decodes text[0..len) into exactly n gids in out.
 * encoding: "csv" or "base64"; compression: NULL or "" (none), "zlib",
 * "gzip" or "zstd" (base64 only). Returns 0, or -1 with a reason in err
 * ("base64: invalid character at offset 17", "zlib: decompresses to fewer
 * than 4096 bytes"). */
int pd_tdata_decode(const char *text, size_t len, const char *encoding, const char *compression,
                    uint32_t *out, size_t n, char *err, size_t errlen);

/* Receives the layer's gids [first, first + count), in order, a piece at
 * a time (the piece is the decoder's: copy what is kept). Returns 0 to go
 * on, 1 to take no more (it has found an error of its own; the decoding
 * still runs to its end, so an error of the data is told before it), -1
 * to stop now. */
typedef int (*pd_tdata_sink)(void *user, const uint32_t *gids, size_t first, size_t count);

/* pd_tdata_decode without the array: the gids go to sink as they are
 * decoded, so a layer costs a fixed buffer, not 4 bytes a cell (a
 * compressed stream is still read whole, and a zstd frame whose window is
 * above 8 MiB is decompressed into a buffer of the layer's bytes, as
 * before). Returns 0 when the text held exactly n gids (all given to sink
 * unless it said 1), -1 with a reason in err when it did not, -2 when the
 * sink said stop (err untouched). */
int pd_tdata_decode_to(const char *text, size_t len, const char *encoding, const char *compression,
                       size_t n, pd_tdata_sink sink, void *user, char *err, size_t errlen);

#endif
