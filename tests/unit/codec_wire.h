/*
 * codec_wire.h - a request message packed as a client would send it and
 * decoded by the server's codec, for the codec's unit tests.
 */
#ifndef CODEC_WIRE_H
#define CODEC_WIRE_H

#include <stdint.h>
#include <stdlib.h>

#include "pathd.pb-c.h"
#include "pd_codec.h"

/* Packs m (cmocka fails the test on a short pack); the caller frees. */
static inline uint8_t *wire_pack_request(const Pathd__V1__Request *m, size_t *len)
{
    *len = pathd__v1__request__get_packed_size(m);
    uint8_t *buf = malloc(*len > 0 ? *len : 1);
    assert_non_null(buf);
    assert_int_equal(pathd__v1__request__pack(m, buf), *len);
    return buf;
}

/* What pd_codec_decode_request makes of m on the wire. */
static inline pd_status wire_decode_request(const Pathd__V1__Request *m, pd_request *req, char *err,
                                            size_t errlen)
{
    size_t len;
    uint8_t *buf = wire_pack_request(m, &len);
    pd_status st = pd_codec_decode_request(buf, len, req, err, errlen);
    free(buf);
    return st;
}

#endif
