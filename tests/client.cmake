# C client (client-examples/c), pathctl and pathd-load. The unit test runs the
# library, pathctl and (when built) pathd-load against an in-test fake server.
pd_test(NAME test_client SOURCES unit/test_client.c
        LIBS pathd_client pathd_testsock PkgConfig::CJSON Threads::Threads
        LABELS sanitize threaded TIMEOUT 120)
add_dependencies(test_client pathctl)
target_compile_definitions(test_client PRIVATE PDC_PATHCTL_BIN="$<TARGET_FILE:pathctl>")
if(TARGET pathd-load)
  add_dependencies(test_client pathd-load)
  target_compile_definitions(test_client PRIVATE PDC_LOAD_BIN="$<TARGET_FILE:pathd-load>")
endif()

# pathctl's exit codes: --help is 0, a usage error is 2, an unreachable server
# is 3 (port 1 on loopback: nothing listens there, so connect is refused).
add_test(NAME pathctl_help COMMAND pathctl --help)
add_test(NAME pathctl_bad_usage
         COMMAND sh -c "\"$0\" path --scene demo --from 1,2; test $? -eq 2" $<TARGET_FILE:pathctl>)
add_test(NAME pathctl_unknown_option
         COMMAND sh -c "\"$0\" --frobnicate ping; test $? -eq 2" $<TARGET_FILE:pathctl>)
add_test(NAME pathctl_connection_refused
         COMMAND sh -c "\"$0\" --server 127.0.0.1:1 --timeout 2000 ping; test $? -eq 3" $<TARGET_FILE:pathctl>)
set_tests_properties(pathctl_help pathctl_bad_usage pathctl_unknown_option pathctl_connection_refused
                     PROPERTIES LABELS "sanitize" TIMEOUT 30)
