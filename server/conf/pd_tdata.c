/*
 * pd_tdata.c - Tiled layer data: CSV, base64, base64 + zlib / gzip / zstd.
 *
 * Gids go to the caller's sink a buffer at a time as they are decoded or
 * decompressed, so a layer costs a fixed buffer however large or well
 * compressed it is, and a stream that would decompress past the layer's
 * n * 4 bytes is stopped there and refused.
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

/* Gids on their way to the caller's sink: buffered PD__EMIT_GIDS at a
 * time, so a layer never needs an array of its own; bytes (base64,
 * decompressed) are assembled little-endian, whatever the host, and only
 * the layer's first n * 4 of them are gids. */
#define PD__EMIT_GIDS 16384

typedef struct pd__emit {
    pd_tdata_sink sink;
    void *user;
    uint32_t *gids;
    size_t fill;                 /* gids buffered */
    size_t n;                    /* the layer's gids */
    size_t done;                 /* gids buffered or delivered */
    uint32_t part;               /* bytes of the next gid so far */
    unsigned npart;
    int refused;                 /* the sink said 1: nothing more goes to it */
    int stopped;                 /* the sink said -1 */
} pd__emit;

/* Hands the buffered gids to the sink. 0, or -1 when it says stop. */
static int pd__emit_flush(pd__emit *e)
{
    if (e->fill && !e->refused) {
        int r = e->sink(e->user, e->gids, e->done - e->fill, e->fill);
        if (r < 0) {
            e->stopped = 1;
            return -1;
        }
        e->refused = r > 0;
    }
    e->fill = 0;
    return 0;
}

/* One gid (the caller keeps done < n). */
static inline int pd__emit_gid(pd__emit *e, uint32_t v)
{
    e->gids[e->fill++] = v;
    e->done++;
    return e->fill == PD__EMIT_GIDS ? pd__emit_flush(e) : 0;
}

/* k more bytes of the stream; those past the layer's n gids are dropped
 * (the caller counts them). */
static int pd__emit_bytes(pd__emit *e, const unsigned char *p, size_t k)
{
    for (size_t i = 0; i < k && e->done < e->n; i++) {
        e->part |= (uint32_t)p[i] << (8 * e->npart);
        if (++e->npart == 4) {
            uint32_t v = e->part;
            e->part = 0;
            e->npart = 0;
            if (pd__emit_gid(e, v) != 0)
                return -1;
        }
    }
    return 0;
}

static int pd__decode_csv(const char *s, size_t len, pd__emit *e, char *err, size_t errlen)
{
    const size_t n = e->n;
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
        count++;
        if (pd__emit_gid(e, (uint32_t)v) != 0)
            return -2;
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

/* Base64 read a piece at a time (whitespace allowed between groups, as
 * Tiled indents it in .tmx; padding optional, at the very end only). */
typedef struct pd__b64 {
    const char *s;
    size_t len, i, pad;
    uint32_t acc;
    int bits;
} pd__b64;

/* Decodes into out[0..cap) until it is full or the text ends: the bytes
 * written, or -1 with a reason in err. */
static long pd__b64_next(pd__b64 *b, unsigned char *out, size_t cap, char *err, size_t errlen)
{
    size_t o = 0;
    for (; o < cap && b->i < b->len; b->i++) {
        unsigned char c = (unsigned char)b->s[b->i];
        if (pd__is_space((char)c))
            continue;
        if (c == '=') {
            b->pad++;
            continue;
        }
        int v = pd__b64_value(c);
        if (v < 0 || b->pad)
            return pd__dfail(err, errlen, "base64: invalid character at offset %zu", b->i);
        b->acc = (b->acc << 6) | (uint32_t)v;
        b->bits += 6;
        if (b->bits >= 8) {
            b->bits -= 8;
            out[o++] = (unsigned char)(b->acc >> b->bits);
        }
    }
    return (long)o;
}

/* After the text's end: leftover bits are 2 or 4 when the last group is
 * short (padded or not); 6 would mean a lone character, which encodes no
 * byte. 0, or -1 with a reason in err. */
static int pd__b64_end(const pd__b64 *b, char *err, size_t errlen)
{
    if (b->bits >= 6 || b->pad > 2)
        return pd__dfail(err, errlen, "base64: truncated (%zu characters do not form whole bytes)",
                         b->len);
    return 0;
}

/* Decodes base64 into a new buffer (a compressed stream, which is read
 * whole). */
static unsigned char *pd__decode_base64(const char *s, size_t len, size_t *out_len, char *err,
                                        size_t errlen)
{
    unsigned char *out = malloc(len / 4 * 3 + 3);
    if (!out) {
        pd__dfail(err, errlen, "base64: out of memory");
        return NULL;
    }
    pd__b64 b = { .s = s, .len = len };
    long o = pd__b64_next(&b, out, len / 4 * 3 + 3, err, errlen);
    if (o < 0 || pd__b64_end(&b, err, errlen) != 0) {
        free(out);
        return NULL;
    }
    *out_len = (size_t)o;
    return out;
}

/* Bytes a decompressor writes at a time before they become gids. */
#define PD__OUT_BYTES 65536

/* Uncompressed base64: its bytes straight to gids. */
static int pd__base64_gids(const char *s, size_t len, pd__emit *e, unsigned char *buf, char *err,
                           size_t errlen)
{
    pd__b64 b = { .s = s, .len = len };
    size_t raw_len = 0;
    for (;;) {
        long k = pd__b64_next(&b, buf, PD__OUT_BYTES, err, errlen);
        if (k < 0)
            return -1;
        if (k == 0)
            break;
        raw_len += (size_t)k;
        if (pd__emit_bytes(e, buf, (size_t)k) != 0)
            return -2;
    }
    if (pd__b64_end(&b, err, errlen) != 0)
        return -1;
    if (raw_len != e->n * 4)
        return pd__dfail(err, errlen, "base64: %zu bytes, the layer needs %zu (%zu gids)", raw_len,
                         e->n * 4, e->n);
    return 0;
}

/* Decompresses into buf PD__OUT_BYTES at a time, never past the layer's
 * `want` bytes; the outcomes (and messages) are those of one inflate
 * with Z_FINISH into a buffer of exactly `want` bytes. */
static int pd__inflate(const unsigned char *in, size_t in_len, int gzip, pd__emit *e,
                       unsigned char *buf, size_t want, char *err, size_t errlen)
{
    const char *name = gzip ? "gzip" : "zlib";
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    /* 15 = the largest window; +16 reads a gzip header instead of zlib's. */
    if (inflateInit2(&zs, gzip ? 15 + 16 : 15) != Z_OK)
        return pd__dfail(err, errlen, "%s: cannot start the decompressor", name);
    zs.next_in = (unsigned char *)in;
    zs.avail_in = (uInt)in_len;
    size_t got = 0;
    int rc = Z_BUF_ERROR;
    while (got < want) {
        size_t cap = want - got < PD__OUT_BYTES ? want - got : PD__OUT_BYTES;
        zs.next_out = buf;
        zs.avail_out = (uInt)cap;
        rc = inflate(&zs, Z_FINISH);
        size_t k = cap - zs.avail_out;
        got += k;
        if (pd__emit_bytes(e, buf, k) != 0) {
            inflateEnd(&zs);
            return -2;
        }
        if (rc != Z_BUF_ERROR || zs.avail_out != 0)
            break;
    }
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

/* The largest zstd window decompressed piece by piece (the window is the
 * decompressor's buffer); a frame with a larger one, a frame that says it
 * holds more than the layer, or anything not read as whole frames is
 * decompressed in one call into a buffer of the layer's bytes, as every
 * frame was before, so its answer is the same. */
#define PD__ZSTD_STREAM_WINDOW ((unsigned long long)8 << 20)

/* The window of the zstd frame at p (whose size findFrameCompressedSize
 * has checked), as RFC 8878 3.1.1.1.2 reads its header: 0 for a
 * skippable frame. (ZSTD_getFrameHeader is not in libzstd's stable API.) */
static unsigned long long pd__zstd_window(const unsigned char *p, size_t len)
{
    uint32_t magic = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24;
    if ((magic & 0xFFFFFFF0u) == ZSTD_MAGIC_SKIPPABLE_START)
        return 0;
    if (magic != ZSTD_MAGICNUMBER || len < 6)
        return ~0ull;
    if (!(p[4] >> 5 & 1)) {
        unsigned long long base = 1ull << (10 + (p[5] >> 3));
        return base + base / 8 * (p[5] & 7);
    }
    /* Single segment: the window is the content. */
    unsigned long long content = ZSTD_getFrameContentSize(p, len);
    return content == ZSTD_CONTENTSIZE_ERROR || content == ZSTD_CONTENTSIZE_UNKNOWN ? ~0ull
                                                                                     : content;
}

static int pd__zstd_streamable(const unsigned char *in, size_t in_len, size_t want)
{
    unsigned long long content = 0;
    if (in_len == 0)
        return 0;
    while (in_len > 0) {
        size_t frame = ZSTD_findFrameCompressedSize(in, in_len);
        if (ZSTD_isError(frame) || frame < 4 || pd__zstd_window(in, frame) > PD__ZSTD_STREAM_WINDOW)
            return 0;
        unsigned long long size = ZSTD_getFrameContentSize(in, frame);
        if (size == ZSTD_CONTENTSIZE_ERROR)
            return 0;
        if (size != ZSTD_CONTENTSIZE_UNKNOWN && (content += size) > want)
            return 0;
        in += frame;
        in_len -= frame;
    }
    return 1;
}

static int pd__unzstd(const unsigned char *in, size_t in_len, pd__emit *e, unsigned char *buf,
                      size_t want, char *err, size_t errlen)
{
    if (!pd__zstd_streamable(in, in_len, want)) {
        unsigned char *out = malloc(want ? want : 1);
        if (!out)
            return pd__dfail(err, errlen, "zstd: out of memory for %zu bytes", want);
        size_t got = ZSTD_decompress(out, want, in, in_len);
        int rc = 0;
        if (ZSTD_isError(got)) {
            if (ZSTD_getErrorCode(got) == ZSTD_error_dstSize_tooSmall)
                rc = pd__dfail(err, errlen, "zstd: decompresses to more than the %zu bytes the "
                                            "layer needs", want);
            else
                rc = pd__dfail(err, errlen, "zstd: %s", ZSTD_getErrorName(got));
        } else if (got != want) {
            rc = pd__dfail(err, errlen, "zstd: decompresses to %zu bytes, the layer needs %zu",
                           got, want);
        } else if (pd__emit_bytes(e, out, want) != 0) {
            rc = -2;
        }
        free(out);
        return rc;
    }
    ZSTD_DCtx *d = ZSTD_createDCtx();
    if (!d)
        return pd__dfail(err, errlen, "zstd: cannot start the decompressor");
    ZSTD_inBuffer src = { in, in_len, 0 };
    size_t got = 0;
    unsigned char extra;
    int rc = 0, ended = 0;   /* the last call that did anything ended a frame */
    for (;;) {
        ZSTD_outBuffer dst = { got < want ? buf : &extra, 1, 0 };
        if (got < want)
            dst.size = want - got < PD__OUT_BYTES ? want - got : PD__OUT_BYTES;
        const size_t before = src.pos;
        size_t ret = ZSTD_decompressStream(d, &dst, &src);
        if (ZSTD_isError(ret)) {
            rc = pd__dfail(err, errlen, "zstd: %s", ZSTD_getErrorName(ret));
            break;
        }
        if (got == want && dst.pos > 0) {
            rc = pd__dfail(err, errlen, "zstd: decompresses to more than the %zu bytes the layer "
                                        "needs", want);
            break;
        }
        if (src.pos != before || dst.pos > 0)
            ended = ret == 0;
        got += dst.pos;
        if (pd__emit_bytes(e, buf, dst.pos) != 0) {
            rc = -2;
            break;
        }
        if (src.pos == src.size && dst.pos < dst.size)
            break;
    }
    ZSTD_freeDCtx(d);
    if (rc != 0)
        return rc;
    if (!ended)
        return pd__dfail(err, errlen, "zstd: %s", ZSTD_getErrorString(ZSTD_error_srcSize_wrong));
    if (got != want)
        return pd__dfail(err, errlen, "zstd: decompresses to %zu bytes, the layer needs %zu", got,
                         want);
    return 0;
}

int pd_tdata_decode_to(const char *text, size_t len, const char *encoding, const char *compression,
                       size_t n, pd_tdata_sink sink, void *user, char *err, size_t errlen)
{
    int has_compression = compression && compression[0];
    int csv = !encoding || strcmp(encoding, "csv") == 0;
    if (csv && has_compression)
        return pd__dfail(err, errlen, "compression \"%s\" needs base64 encoding", compression);
    if (!csv && strcmp(encoding, "base64") != 0)
        return pd__dfail(err, errlen, "unknown encoding \"%s\" (csv or base64)", encoding);
    if (has_compression && strcmp(compression, "zlib") != 0 && strcmp(compression, "gzip") != 0 &&
        strcmp(compression, "zstd") != 0) {
        /* As before: the base64 is read (and its errors told) first. */
        size_t raw_len = 0;
        unsigned char *raw = pd__decode_base64(text, len, &raw_len, err, errlen);
        if (!raw)
            return -1;
        free(raw);
        return pd__dfail(err, errlen, "unknown compression \"%s\" (zlib, gzip or zstd)", compression);
    }
    pd__emit e = { .sink = sink, .user = user, .n = n };
    unsigned char *buf = csv ? NULL : malloc(PD__OUT_BYTES);
    if (!(e.gids = malloc(PD__EMIT_GIDS * sizeof *e.gids)) || (!csv && !buf)) {
        free(e.gids);
        free(buf);
        return pd__dfail(err, errlen, "out of memory");
    }
    int rc;
    if (csv) {
        rc = pd__decode_csv(text, len, &e, err, errlen);
    } else if (!has_compression) {
        rc = pd__base64_gids(text, len, &e, buf, err, errlen);
    } else {
        size_t raw_len = 0;
        unsigned char *raw = pd__decode_base64(text, len, &raw_len, err, errlen);
        if (!raw)
            rc = -1;
        else if (compression[0] == 'z' && compression[1] == 'l')
            rc = pd__inflate(raw, raw_len, 0, &e, buf, n * 4, err, errlen);
        else if (compression[0] == 'g')
            rc = pd__inflate(raw, raw_len, 1, &e, buf, n * 4, err, errlen);
        else
            rc = pd__unzstd(raw, raw_len, &e, buf, n * 4, err, errlen);
        free(raw);
    }
    if (rc == 0 && pd__emit_flush(&e) != 0)
        rc = -2;
    free(e.gids);
    free(buf);
    return rc;
}

typedef struct pd__array_sink {
    uint32_t *out;
} pd__array_sink;

static int pd__to_array(void *user, const uint32_t *gids, size_t first, size_t count)
{
    memcpy(((pd__array_sink *)user)->out + first, gids, count * sizeof *gids);
    return 0;
}

int pd_tdata_decode(const char *text, size_t len, const char *encoding, const char *compression,
                    uint32_t *out, size_t n, char *err, size_t errlen)
{
    pd__array_sink a = { out };
    return pd_tdata_decode_to(text, len, encoding, compression, n, pd__to_array, &a, err, errlen) ==
                   0
               ? 0
               : -1;
}
