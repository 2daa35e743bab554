# End-to-end tests (tests/integration): each one starts the real pathd binary
# from this build on an ephemeral loopback port and talks to it over sockets,
# through the C client library and through raw frames. In sanitizer builds the
# daemon carries the same sanitizer, and the harness fails a test whose daemon
# log holds a sanitizer report. den520d comes from the Moving AI subset in
# tests/data/movingai, so no outside data is needed.
add_library(pathd_integ_harness STATIC integration/harness.c)
target_include_directories(pathd_integ_harness PUBLIC "${CMAKE_CURRENT_SOURCE_DIR}/integration")
target_link_libraries(pathd_integ_harness PUBLIC pathd_client pathd_testsock PkgConfig::CMOCKA Threads::Threads m)
target_compile_definitions(pathd_integ_harness PRIVATE
  PD_TEST_DATA_DIR="${PD_TEST_DATA_DIR}"
  PD_MOVINGAI_DIR="${PD_MOVINGAI_DIR}"
  PD_BINARY_DIR="${CMAKE_BINARY_DIR}")
# The tests run the binaries, so building a test builds them too.
add_dependencies(pathd_integ_harness pathd pathctl)

# Every daemon run is checked under ASan+UBSan; the ones that exercise
# threads and signals hardest also run under TSan.
foreach(name harness paths status bad_input pathctl auth)
  pd_test(NAME test_e2e_${name} SOURCES integration/test_e2e_${name}.c
          LIBS pathd_integ_harness LABELS sanitize TIMEOUT 240)
endforeach()
# Their timeouts are hang guards sized for TSan on a loaded machine (at load
# average 14, test_e2e_lifecycle passed 240 s).
foreach(name cancel concurrency lifecycle)
  pd_test(NAME test_e2e_${name} SOURCES integration/test_e2e_${name}.c
          LIBS pathd_integ_harness LABELS sanitize threaded TIMEOUT 600)
endforeach()
# Issue 32: draining (SIGUSR1/SIGUSR2) with searches owed, the DRAINING
# answers, Pong.serving and the agent-check port; a stop from a drain.
pd_test(NAME test_e2e_drain SOURCES integration/test_e2e_drain.c
        LIBS pathd_integ_harness LABELS sanitize threaded TIMEOUT 600)
# Issue 33: the C client's flow control (in-flight cap, local queue, retry
# of the server's own OVERLOADED) and WatchEvent.incarnation. Its CPU hogs
# make it slow under TSan on a loaded machine (60-110 s alone; over 240 s at
# a load average of 20), hence the long hang guard.
pd_test(NAME test_e2e_client_flow SOURCES integration/test_e2e_client_flow.c
        LIBS pathd_integ_harness LABELS sanitize threaded TIMEOUT 600)
target_link_libraries(test_e2e_pathctl PRIVATE PkgConfig::CJSON)
# Issue 12: scenes made at run time (CreateScene, CreateInstance, DropScene)
# through the client and pathctl, and the RSS of 10,000 instances.
pd_test(NAME test_e2e_scenes SOURCES integration/test_e2e_scenes.c
        LIBS pathd_integ_harness LABELS sanitize TIMEOUT 240)
target_compile_definitions(test_e2e_scenes PRIVATE PD_TEST_DATA_DIR="${PD_TEST_DATA_DIR}")

# Issue 17: four workers' search memory after long searches on a large
# generated scene, read from /metrics.
pd_test(NAME test_e2e_memory SOURCES integration/test_e2e_memory.c
        LIBS pathd_integ_harness LABELS sanitize TIMEOUT 240)

# Issue 4 through the daemon: unit sizes, goal fallbacks, waypoint styles and
# timing, terrain costs with avoid cells, windows and the Tiled scene, and
# live cell updates (the last also from several threads at once).
foreach(name units fallback waypoints terrain)
  pd_test(NAME test_e2e_${name} SOURCES integration/test_e2e_${name}.c
          LIBS pathd_integ_harness LABELS sanitize TIMEOUT 240)
endforeach()
pd_test(NAME test_e2e_updates SOURCES integration/test_e2e_updates.c
        LIBS pathd_integ_harness LABELS sanitize threaded TIMEOUT 600)

# pathd-bench --unit K (bench/pathd_bench.c) on e2e4_bench.map, a Moving AI
# copy of e2e4_units.txt whose scenario lengths come from an independent
# Dijkstra: unit 1 is checked against those lengths; unit 2 must skip the
# three scenarios it cannot stand on; unit 3 skips four and must find one
# pair unconnected (the search has to agree: no path). --check-brute
# compares costs with the bench's own Dijkstra on the unit grid.
add_test(NAME bench_unit_sizes
  COMMAND sh -c [=[
bench="$1"; status=0
run() {
  unit="$1"; want_last="$2"; want_note="$3"
  out=$("$bench" --unit "$unit" --check-brute 5 e2e4_bench.map.scen 2>&1); rc=$?
  printf '%s\n' "$out"
  last=$(printf '%s\n' "$out" | tail -n 1)
  if [ "$rc" -ne 0 ] || [ "$last" != "$want_last" ]; then
    echo "FAIL: --unit $unit: exit $rc, last line '$last' (want '$want_last')"; status=1
  fi
  if [ -n "$want_note" ] && ! printf '%s\n' "$out" | grep -q "$want_note"; then
    echo "FAIL: --unit $unit: no line matching '$want_note'"; status=1
  fi
}
run 1 "6 passed, 0 failed" "5 costs checked against the bench's Dijkstra"
run 2 "3 passed, 0 failed" "3 scenarios skipped (start or goal not a legal anchor), 0 not connected"
run 3 "2 passed, 0 failed" "4 scenarios skipped (start or goal not a legal anchor), 1 not connected"
for bad in "--unit 0" "--unit 17" "--unit x" "--check-brute 0"; do
  "$bench" $bad e2e4_bench.map.scen >/dev/null 2>&1; rc=$?
  if [ "$rc" -ne 2 ]; then echo "FAIL: pathd-bench $bad -> exit $rc (want 2)"; status=1; fi
done
exit $status
]=] bench_unit_sizes $<TARGET_FILE:pathd-bench>
  WORKING_DIRECTORY ${PD_TEST_DATA_DIR})
set_tests_properties(bench_unit_sizes PROPERTIES LABELS "sanitize" TIMEOUT 60)

# Issue 12, "Durable": the journal (data_dir) through the daemon - kill -9
# right after an acknowledged update and a restart on the same data_dir, a
# torn log tail, compaction.
# Workers append while the threadpool syncs and compacts: TSan runs it too.
pd_test(NAME test_e2e_journal SOURCES integration/test_e2e_journal.c
        LIBS pathd_integ_harness LABELS sanitize threaded TIMEOUT 600)

# Issue 12, "Reload keeps the living state": SIGHUP keeps the scenes whose
# definition did not change (version, updates, route tables), builds the
# changed ones anew, refuses a bad portal or map whole, and a restart after
# kill -9 serves the same world. The reload runs on libuv's threadpool
# beside updates on the workers: threaded.
pd_test(NAME test_e2e_reload SOURCES integration/test_e2e_reload.c
        LIBS pathd_integ_harness LABELS sanitize threaded TIMEOUT 600)

# Issue 12, hearing about changes: watchers see every version in order while
# two writers update several scenes, a watcher that does not read is dropped
# at limits.watch_buffer_bytes, reloads are heard, min_version answers
# STALE_VERSION until the version exists, and bad Watch requests.
pd_test(NAME test_e2e_watch SOURCES integration/test_e2e_watch.c
        LIBS pathd_integ_harness LABELS sanitize threaded TIMEOUT 600)
target_compile_definitions(test_e2e_watch PRIVATE PD_TEST_DATA_DIR="${PD_TEST_DATA_DIR}")
target_link_libraries(test_e2e_watch PRIVATE PkgConfig::CJSON)
