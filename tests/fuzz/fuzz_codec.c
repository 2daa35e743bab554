/*
 * fuzz_codec.c - libFuzzer target for everything a client's bytes reach
 * before a request is accepted: the frame reader and the request decoder.
 *
 * The input is treated as a byte stream from one connection, delivered in
 * reads whose sizes come from the input's first byte, so the fuzzer explores
 * splits as well as contents. Every complete frame is decoded, and every
 * rejection reason is sent through the error encoder, as the net layer does.
 * Beyond memory errors it checks what the decoder promises (pd_codec.h): a
 * frame is never longer than the reader's cap, a rejection has a reason and
 * one of the decoder's statuses, an accepted request has a kind, and the
 * error answer is one whole frame naming the request's id; and that the
 * hand-written FindPath reader (pd_codec_fast.c) decodes every frame to the
 * same status, reason and fields as protobuf-c's unpack.
 * Build with -DPATHD_FUZZ=ON and clang (see tests/fuzz.cmake), run e.g.
 *   build-fuzz/tests/fuzz_codec -max_total_time=60 -max_len=4096
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec_decode_same.h"
#include "fuzz_check.h"
#include "pathd.pb-c.h"
#include "pd_codec.h"
#include "pd_frame.h"

/* Small, so the fuzzer reaches the FRAME_TOO_LARGE path cheaply. */
#define FUZZ_MAX_FRAME 2048

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_answer(uint64_t id, pd_status st, const char *reason)
{
    size_t len;
    uint8_t *out = pd_codec_encode_error(id, st, reason, &len);
    FUZZ_REQUIRE(out && len > 4, "no error answer for status %s", pd_status_name(st));
    const size_t body = (size_t)out[0] << 24 | (size_t)out[1] << 16 | (size_t)out[2] << 8 | out[3];
    FUZZ_REQUIRE(body == len - 4, "error answer header says %zu bytes, body has %zu", body, len - 4);
    Pathd__V1__Response *resp = pathd__v1__response__unpack(NULL, body, out + 4);
    FUZZ_REQUIRE(resp && resp->id == id && resp->final && resp->status != PATHD__V1__STATUS__OK,
                 "error answer does not decode as the final, failed answer to request %llu",
                 (unsigned long long)id);
    pathd__v1__response__free_unpacked(resp, NULL);
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pd_frame_reader r;
    size_t read_size, off = 1;
    int closed = 0;

    if (size == 0)
        return 0;
    read_size = 1 + data[0] * 4u;
    pd_frame_reader_init(&r, FUZZ_MAX_FRAME);
    while (off < size && !closed) {
        uint8_t *space;
        size_t avail, take;
        const uint8_t *payload;
        size_t plen;
        pd_status st;

        if (pd_frame_reader_space(&r, read_size, &space, &avail) != 0)
            break;
        take = size - off < avail ? size - off : avail;
        memcpy(space, data + off, take);
        pd_frame_reader_commit(&r, take);
        off += take;
        while ((st = pd_frame_reader_next(&r, &payload, &plen)) == PD_OK) {
            FUZZ_REQUIRE(plen <= FUZZ_MAX_FRAME, "a %zu-byte frame passed the %d-byte cap", plen, FUZZ_MAX_FRAME);
            pd_request req;
            char err[128] = "";
            pd_status dst = pd_codec_decode_request(payload, plen, &req, err, sizeof err);
            FUZZ_REQUIRE(dst == PD_OK || dst == PD_INVALID_ARGUMENT || dst == PD_MALFORMED || dst == PD_INTERNAL,
                         "decoder answered %s", pd_status_name(dst));
            FUZZ_REQUIRE(dst != PD_OK || req.kind != PD_REQ_NONE, "an accepted request without a kind");
            FUZZ_REQUIRE(dst == PD_OK || err[0] != '\0', "%s without a reason", pd_status_name(dst));
            if (dst != PD_OK)
                fuzz_answer(req.id, dst, err);
            /* The hand-written FindPath reader decodes as protobuf-c does. */
            int fast;
            char why[768];
            FUZZ_REQUIRE(decode_same(payload, plen, &fast, why, sizeof why), "the two decoders differ: %s", why);
            pd_request_free(&req);
            if (dst == PD_MALFORMED) {
                closed = 1;
                break;
            }
        }
        if (st == PD_FRAME_TOO_LARGE) {
            fuzz_answer(0, st, "frame too large");
            closed = 1;
        }
    }
    pd_frame_reader_free(&r);
    return 0;
}
