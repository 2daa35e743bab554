# End-to-end tests (tests/integration): each one starts the real pathd binary
# from this build on an ephemeral loopback port and talks to it over sockets,
# through the C client library and through raw frames. In sanitizer builds the
# daemon carries the same sanitizer, and the harness fails a test whose daemon
# log holds a sanitizer report. The Moving AI data comes from
# $PATHD_BENCH_DATA or PATHD_BENCH_DATA (the shared benchmarks).
add_library(pathd_integ_harness STATIC integration/harness.c)
target_include_directories(pathd_integ_harness PUBLIC "${CMAKE_CURRENT_SOURCE_DIR}/integration")
target_link_libraries(pathd_integ_harness PUBLIC pathd_client PkgConfig::CMOCKA Threads::Threads m)
target_compile_definitions(pathd_integ_harness PRIVATE
  PD_TEST_DATA_DIR="${PD_TEST_DATA_DIR}"
  PD_BENCH_DATA_DEFAULT="${PATHD_BENCH_DATA}"
  PD_BINARY_DIR="${CMAKE_BINARY_DIR}")
# The tests run the binaries, so building a test builds them too.
add_dependencies(pathd_integ_harness pathd pathctl)

# Every daemon run is checked under ASan+UBSan; the ones that exercise
# threads and signals hardest also run under TSan.
foreach(name harness paths status bad_input pathctl)
  pd_test(NAME test_e2e_${name} SOURCES integration/test_e2e_${name}.c
          LIBS pathd_integ_harness LABELS sanitize TIMEOUT 240)
endforeach()
foreach(name cancel concurrency lifecycle)
  pd_test(NAME test_e2e_${name} SOURCES integration/test_e2e_${name}.c
          LIBS pathd_integ_harness LABELS sanitize threaded TIMEOUT 240)
endforeach()
target_link_libraries(test_e2e_pathctl PRIVATE PkgConfig::CJSON)
