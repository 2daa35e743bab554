# Metrics port tests: pd_metrics rendering and the pd_http responder on an
# ephemeral loopback port (unit test), and the same endpoint seen through
# curl (metrics_curl), served by a small demo program until the daemon
# itself serves it.
pd_test(NAME test_metrics SOURCES unit/test_metrics.c
        LIBS pathd_net Threads::Threads
        LABELS sanitize threaded TIMEOUT 120)

add_executable(metrics_demo_server metrics/metrics_demo_server.c)
target_link_libraries(metrics_demo_server PRIVATE pathd_net)
target_compile_definitions(metrics_demo_server PRIVATE PD_TEST_DATA_DIR="${PD_TEST_DATA_DIR}")
add_test(NAME metrics_curl
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/metrics/curl_test.sh $<TARGET_FILE:metrics_demo_server>)
set_tests_properties(metrics_curl PROPERTIES LABELS "sanitize" TIMEOUT 60)
