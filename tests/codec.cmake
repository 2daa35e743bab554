# codec layer tests: frame reader, request decoding and answer encoding.
pd_test(NAME test_frame SOURCES unit/test_frame.c LIBS pathd_codec LABELS sanitize)

# test_codec builds requests and reads answers with the generated protobuf-c
# API, so it alone (besides pathd_codec) sees the generated header.
pd_test(NAME test_codec SOURCES unit/test_codec.c LIBS pathd_codec PkgConfig::PROTOBUFC LABELS sanitize)
get_target_property(PD_CODEC_GEN_DIR pathd_codec PD_PROTO_GEN_DIR)
target_include_directories(test_codec PRIVATE "${PD_CODEC_GEN_DIR}")

# libFuzzer target over the frame reader and the request decoder. Off by
# default: it needs clang (-DCMAKE_C_COMPILER=clang -DPATHD_FUZZ=ON) and is run
# by hand, not by ctest.
option(PATHD_FUZZ "Build the libFuzzer targets (clang only)" OFF)
if(PATHD_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "PATHD_FUZZ needs clang (-DCMAKE_C_COMPILER=clang)")
  endif()
  # Coverage feedback from the code under test, not just from the harness.
  target_compile_options(pathd_codec PRIVATE -fsanitize=fuzzer-no-link)
  add_executable(fuzz_codec fuzz/fuzz_codec.c)
  target_link_libraries(fuzz_codec PRIVATE pathd_codec)
  target_compile_options(fuzz_codec PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_codec PRIVATE -fsanitize=fuzzer,address,undefined)
endif()
