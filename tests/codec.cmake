# codec layer tests: frame reader, request decoding and answer encoding.
pd_test(NAME test_frame SOURCES unit/test_frame.c LIBS pathd_codec LABELS sanitize)

# test_codec builds requests and reads answers with the generated protobuf-c
# API, so it alone (besides pathd_codec) sees the generated header.
pd_test(NAME test_codec SOURCES unit/test_codec.c LIBS pathd_codec PkgConfig::PROTOBUFC LABELS sanitize)
get_target_property(PD_CODEC_GEN_DIR pathd_codec PD_PROTO_GEN_DIR)
target_include_directories(test_codec PRIVATE "${PD_CODEC_GEN_DIR}")
# FindPath ranges, goal sets and FindPath items in a Batch, on the wire.
pd_test(NAME test_codec_range SOURCES unit/test_codec_range.c LIBS pathd_codec PkgConfig::PROTOBUFC
        LABELS sanitize)
target_include_directories(test_codec_range PRIVATE "${PD_CODEC_GEN_DIR}")
# Hearing about changes below the server: the changed rectangle of an
# update, its watch event, min_version checks, and their wire form.
pd_test(NAME test_codec_watch SOURCES unit/test_codec_watch.c LIBS pathd_codec PkgConfig::PROTOBUFC
        LABELS sanitize)
target_include_directories(test_codec_watch PRIVATE "${PD_CODEC_GEN_DIR}")

# The hand-written FindPath reader against protobuf-c's unpack, on random
# and mutated frames (codec_decode_same.h, shared with fuzz_codec).
pd_test(NAME test_codec_fast SOURCES unit/test_codec_fast.c LIBS pathd_codec PkgConfig::PROTOBUFC LABELS sanitize)
target_include_directories(test_codec_fast PRIVATE "${PD_CODEC_GEN_DIR}")
