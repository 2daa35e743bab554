# The loopback TCP client the tests share (tests/support/pd_testsock.c):
# test_server, test_metrics, the end-to-end harness and the fake servers of
# test_client and test_render link it instead of each carrying its own
# connect/send/recv helpers.
add_library(pathd_testsock STATIC support/pd_testsock.c)
target_include_directories(pathd_testsock PUBLIC "${CMAKE_CURRENT_SOURCE_DIR}/support")
target_link_libraries(pathd_testsock PUBLIC PkgConfig::PROTOBUFC)
