# libFuzzer targets (tests/fuzz/, docs/FUZZING.md). Off by default: they need
# clang, and the code under test must carry the sanitizers too, so they live
# in a build tree of their own that `make test` and `make fuzz` configure:
#   cmake -DCMAKE_C_COMPILER=clang -DPATHD_SANITIZE=address -DPATHD_FUZZ=ON
# Each target gets a ctest (label "fuzz") that replays its committed corpus
# and its regression inputs once, without fuzzing (-runs=0).
option(PATHD_FUZZ "Build the libFuzzer targets (clang, with PATHD_SANITIZE=address)" OFF)
if(PATHD_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "PATHD_FUZZ needs clang (-DCMAKE_C_COMPILER=clang)")
  endif()
  if(NOT PATHD_SANITIZE STREQUAL "address")
    message(FATAL_ERROR "PATHD_FUZZ needs -DPATHD_SANITIZE=address: a bug in the code under test "
                        "must abort there, not only in the harness")
  endif()
  # Coverage feedback from the code under test, not just from the harnesses.
  foreach(lib pathd_core pathd_conf pathd_scene pathd_query pathd_codec)
    target_compile_options(${lib} PRIVATE -fsanitize=fuzzer-no-link)
  endforeach()

  set(PD_FUZZ_DIR "${CMAKE_CURRENT_SOURCE_DIR}/fuzz")
  add_custom_target(fuzz_targets)

  # pd_fuzz_target(NAME LIBS ...): tests/fuzz/NAME.c, seeds in
  # tests/fuzz/corpus/NAME, crash inputs kept as tests in
  # tests/fuzz/regressions/NAME.
  function(pd_fuzz_target NAME)
    add_executable(${NAME} fuzz/${NAME}.c)
    target_link_libraries(${NAME} PRIVATE ${ARGN})
    target_compile_definitions(${NAME} PRIVATE PD_TEST_DATA_DIR="${PD_TEST_DATA_DIR}")
    # The checks shared with the cmocka tests (path_rules.h, components_check.h).
    target_include_directories(${NAME} PRIVATE "${CMAKE_CURRENT_SOURCE_DIR}/unit")
    target_compile_options(${NAME} PRIVATE -fsanitize=fuzzer)
    target_link_options(${NAME} PRIVATE -fsanitize=fuzzer)
    add_dependencies(fuzz_targets ${NAME})
    set(inputs "${PD_FUZZ_DIR}/corpus/${NAME}")
    if(EXISTS "${PD_FUZZ_DIR}/regressions/${NAME}")
      list(APPEND inputs "${PD_FUZZ_DIR}/regressions/${NAME}")
    endif()
    add_test(NAME ${NAME}_replay COMMAND ${NAME} -runs=0 ${inputs})
    set_tests_properties(${NAME}_replay PROPERTIES LABELS fuzz TIMEOUT 300
      ENVIRONMENT "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:suppressions=${CMAKE_CURRENT_SOURCE_DIR}/ubsan.supp")
  endfunction()

  pd_fuzz_target(fuzz_codec pathd_codec PkgConfig::PROTOBUFC)
  # It reads its error answers back with the generated code, as test_codec does.
  get_target_property(PD_FUZZ_CODEC_GEN_DIR pathd_codec PD_PROTO_GEN_DIR)
  target_include_directories(fuzz_codec PRIVATE "${PD_FUZZ_CODEC_GEN_DIR}")
  pd_fuzz_target(fuzz_mapfile pathd_core)
  pd_fuzz_target(fuzz_tiled pathd_conf)
  pd_fuzz_target(fuzz_tdata pathd_conf)
  pd_fuzz_target(fuzz_ldtk pathd_conf)
  pd_fuzz_target(fuzz_conf pathd_conf)
  pd_fuzz_target(fuzz_scene_update pathd_scene)
  pd_fuzz_target(fuzz_find_path pathd_codec pathd_query)
endif()
