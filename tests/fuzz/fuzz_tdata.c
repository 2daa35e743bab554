/*
 * fuzz_tdata.c - libFuzzer target for Tiled layer data decoding
 * (server/conf/pd_tdata.c): CSV, base64 and the three decompressors, on the
 * text a map file carries.
 *
 * Input: byte 0 picks the form (mod 5: CSV, base64, base64+zlib,
 * base64+gzip, base64+zstd), byte 1 the number of gids the layer expects
 * (0..255), the rest is the text. Decoding writes into an array of exactly
 * that many gids with a guard word after it, so a write past the layer is
 * caught even where ASan's redzones would not reach; a refusal must say why.
 */
#include <stdint.h>
#include <string.h>

#include "fuzz_check.h"
#include "pd_tdata.h"

/* After the last gid: any decoder write past the layer changes it. */
#define FUZZ_GUARD 0xDEADBEEFu

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const forms[5][2] = {
        { "csv", NULL }, { "base64", "" }, { "base64", "zlib" }, { "base64", "gzip" }, { "base64", "zstd" },
    };
    if (size < 2)
        return 0;
    const char *const *form = forms[data[0] % 5];
    size_t n = data[1];
    uint32_t out[256 + 1];
    out[n] = FUZZ_GUARD;
    char err[256];
    err[0] = '\0';
    int rc = pd_tdata_decode((const char *)data + 2, size - 2, form[0], form[1], out, n, err,
                             sizeof err);
    FUZZ_REQUIRE(out[n] == FUZZ_GUARD, "decoded past the %zu gids of the layer", n);
    FUZZ_REQUIRE(rc == 0 || rc == -1, "returned %d", rc);
    FUZZ_REQUIRE(rc == 0 || err[0] != '\0', "refused without a reason");
    return 0;
}
