/*
 * pd_tdata.c - Tiled layer data: CSV, base64, base64 + zlib / gzip / zstd.
 *
 * Decompression goes straight into the caller's gid array (n * 4 bytes), so
 * a layer never costs more than its cells however well it compresses, and a
 * stream that would decompress past that is stopped there and refused.
 *
 * Base64 is decoded here: Debian's candidates are GLib's g_base64_decode
 * (a large runtime for one function, and it skips invalid characters
 * silently) and OpenSSL's EVP_DecodeBlock (libssl is not otherwise linked by
 * the server, and it pads the output length), while a truncated or corrupt
 * layer must be refused, not read short.
 */
#include "pd_tdata.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

static int pd__dfail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int pd__is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int pd__decode_csv(const char *s, size_t len, uint32_t *out, size_t n, char *err,
                          size_t errlen)
{
    size_t i = 0, count = 0;
    for (;;) {
        while (i < len && pd__is_space(s[i]))
            i++;
        if (i == len && count == 0 && n == 0)
            return 0;
        if (i == len || s[i] < '0' || s[i] > '9')
            return pd__dfail(err, errlen, "csv: expected a gid at offset %zu", i);
        uint64_t v = 0;
        while (i < len && s[i] >= '0' && s[i] <= '9') {
            v = v * 10 + (uint64_t)(s[i] - '0');
            if (v > UINT32_MAX)
                return pd__dfail(err, errlen, "csv: gid at offset %zu is above 4294967295", i);
            i++;
        }
        if (count == n)
            return pd__dfail(err, errlen, "csv: more than the %zu gids the layer needs", n);
        out[count++] = (uint32_t)v;
        while (i < len && pd__is_space(s[i]))
            i++;
        if (i == len)
            break;
        if (s[i] != ',')
            return pd__dfail(err, errlen, "csv: unexpected character at offset %zu", i);
        i++;
    }
    if (count != n)
        return pd__dfail(err, errlen, "csv: %zu gids, the layer needs %zu", count, n);
    return 0;
}

static int pd__b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

/* Decodes base64 (whitespace allowed between groups, as Tiled indents it
 * in .tmx) into a new buffer. Padding is optional at the very end only. */
static unsigned char *pd__decode_base64(const char *s, size_t len, size_t *out_len, char *err,
                                        size_t errlen)
{
    unsigned char *out = malloc(len / 4 * 3 + 3);
    if (!out) {
        pd__dfail(err, errlen, "base64: out of memory");
        return NULL;
    }
    size_t o = 0, pad = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (pd__is_space((char)c))
            continue;
        if (c == '=') {
            pad++;
            continue;
        }
        int v = pd__b64_value(c);
        if (v < 0 || pad) {
            free(out);
            pd__dfail(err, errlen, "base64: invalid character at offset %zu", i);
            return NULL;
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits);
        }
    }
    /* Leftover bits are 2 or 4 when the last group is short (padded or
     * not); 6 would mean a lone character, which encodes no byte. */
    if (bits >= 6 || pad > 2) {
        free(out);
        pd__dfail(err, errlen, "base64: truncated (%zu characters do not form whole bytes)", len);
        return NULL;
    }
    *out_len = o;
    return out;
}

static int pd__inflate(const unsigned char *in, size_t in_len, int gzip, unsigned char *out,
                       size_t want, char *err, size_t errlen)
{
    const char *name = gzip ? "gzip" : "zlib";
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    /* 15 = the largest window; +16 reads a gzip header instead of zlib's. */
    if (inflateInit2(&zs, gzip ? 15 + 16 : 15) != Z_OK)
        return pd__dfail(err, errlen, "%s: cannot start the decompressor", name);
    zs.next_in = (unsigned char *)in;
    zs.avail_in = (uInt)in_len;
    zs.next_out = out;
    zs.avail_out = (uInt)want;
    int rc = inflate(&zs, Z_FINISH);
    size_t got = want - zs.avail_out;
    unsigned char extra;
    if (rc == Z_BUF_ERROR && zs.avail_out == 0) {
        /* Output full: see whether the stream had more to give. */
        zs.next_out = &extra;
        zs.avail_out = 1;
        rc = inflate(&zs, Z_FINISH);
        inflateEnd(&zs);
        if (zs.avail_out == 0)
            return pd__dfail(err, errlen, "%s: decompresses to more than the %zu bytes the layer "
                                          "needs", name, want);
        return pd__dfail(err, errlen, "%s: corrupt or truncated stream", name);
    }
    inflateEnd(&zs);
    if (rc != Z_STREAM_END)
        return pd__dfail(err, errlen, "%s: corrupt or truncated stream", name);
    if (got != want)
        return pd__dfail(err, errlen, "%s: decompresses to %zu bytes, the layer needs %zu", name,
                         got, want);
    if (zs.avail_in != 0)
        return pd__dfail(err, errlen, "%s: data after the end of the stream", name);
    return 0;
}

static int pd__unzstd(const unsigned char *in, size_t in_len, unsigned char *out, size_t want,
                      char *err, size_t errlen)
{
    size_t got = ZSTD_decompress(out, want, in, in_len);
    if (ZSTD_isError(got)) {
        if (ZSTD_getErrorCode(got) == ZSTD_error_dstSize_tooSmall)
            return pd__dfail(err, errlen, "zstd: decompresses to more than the %zu bytes the "
                                          "layer needs", want);
        return pd__dfail(err, errlen, "zstd: %s", ZSTD_getErrorName(got));
    }
    if (got != want)
        return pd__dfail(err, errlen, "zstd: decompresses to %zu bytes, the layer needs %zu", got,
                         want);
    return 0;
}

int pd_tdata_decode(const char *text, size_t len, const char *encoding, const char *compression,
                    uint32_t *out, size_t n, char *err, size_t errlen)
{
    int has_compression = compression && compression[0];
    if (!encoding || strcmp(encoding, "csv") == 0) {
        if (has_compression)
            return pd__dfail(err, errlen, "compression \"%s\" needs base64 encoding", compression);
        return pd__decode_csv(text, len, out, n, err, errlen);
    }
    if (strcmp(encoding, "base64") != 0)
        return pd__dfail(err, errlen, "unknown encoding \"%s\" (csv or base64)", encoding);
    size_t raw_len = 0;
    unsigned char *raw = pd__decode_base64(text, len, &raw_len, err, errlen);
    if (!raw)
        return -1;
    size_t want = n * 4;
    unsigned char *bytes = (unsigned char *)out;
    int rc;
    if (!has_compression) {
        if (raw_len != want)
            rc = pd__dfail(err, errlen, "base64: %zu bytes, the layer needs %zu (%zu gids)",
                           raw_len, want, n);
        else {
            memcpy(bytes, raw, want);
            rc = 0;
        }
    } else if (strcmp(compression, "zlib") == 0 || strcmp(compression, "gzip") == 0) {
        rc = pd__inflate(raw, raw_len, compression[0] == 'g', bytes, want, err, errlen);
    } else if (strcmp(compression, "zstd") == 0) {
        rc = pd__unzstd(raw, raw_len, bytes, want, err, errlen);
    } else {
        rc = pd__dfail(err, errlen, "unknown compression \"%s\" (zlib, gzip or zstd)", compression);
    }
    free(raw);
    if (rc != 0)
        return -1;
    /* The stream is little-endian whatever the host. */
    for (size_t i = 0; i < n; i++) {
        const unsigned char *b = bytes + i * 4;
        out[i] = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    }
    return 0;
}
