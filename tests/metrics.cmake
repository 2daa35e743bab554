# Metrics port tests: pd_metrics rendering and the pd_http responder on an
# ephemeral loopback port (unit test), and the real daemon's endpoint seen
# through curl after a known set of requests (metrics_curl).
pd_test(NAME test_metrics SOURCES unit/test_metrics.c
        LIBS pathd_net pathd_testsock Threads::Threads
        LABELS sanitize threaded TIMEOUT 120)

add_test(NAME metrics_curl
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/metrics/curl_test.sh
                 $<TARGET_FILE:pathd> $<TARGET_FILE:pathctl> ${CMAKE_SOURCE_DIR}/config/default.json)
set_tests_properties(metrics_curl PROPERTIES LABELS "sanitize" TIMEOUT 120)

# /healthz, /readyz and /livez before the scenes load, when served and while
# draining, and the reload counters (loads held back by a named pipe).
add_test(NAME metrics_health
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/metrics/health_test.sh $<TARGET_FILE:pathd>)
set_tests_properties(metrics_health PROPERTIES LABELS "sanitize" TIMEOUT 120)
