# Jump Point Search (server/core/pd_jps.c): compared against A* on random
# grids and on every 10th query of the repository's Moving AI subset.
# The Moving AI comparison runs A* too: minutes under ASan, hence the timeout.
pd_test(NAME test_jps SOURCES unit/test_jps.c LIBS pathd_core LABELS sanitize TIMEOUT 900)

# pathd-bench --algo jps: the small hand-checked files (a wrong length must
# still be caught), every 200th query of the Moving AI files (the
# repository's subset, and the full shared set when present), and the usage
# errors; 4-connected too, where the scenario lengths do not apply and
# --check-astar compares every cost with A*'s instead. pd_bench_expect comes
# from bench.cmake, which sorts before this file.
pd_bench_expect(bench_jps_small_pass 0 "20 passed, 0 failed"
  --algo jps bench_small.map.scen bench_small_g.map.scen)
pd_bench_expect(bench_jps_wrong_length 1 "9 passed, 1 failed" --algo jps bench_wrong_length.map.scen)
pd_bench_expect(bench_jps_unreachable 1 "1 passed, 1 failed" --algo jps bench_unreachable.map.scen)
pd_bench_expect(bench_jps4_small_pass 0 "10 passed, 0 failed"
  --algo jps --connect 4 --check-astar bench_small.map.scen)

set(PD_BENCH_JPS_SCRIPT [=[
bench="$1"; shift
exec "$bench" --algo jps --every 200 "$@"
]=])
pd_movingai_test(NAME bench_jps_movingai_quick DATA ${PD_MOVINGAI_DIR} SCRIPT "${PD_BENCH_JPS_SCRIPT}"
  ARGS $<TARGET_FILE:pathd-bench>)
pd_movingai_test(NAME bench_jps_movingai_full_quick DATA ${PATHD_BENCH_DATA} FULL SCRIPT "${PD_BENCH_JPS_SCRIPT}"
  ARGS $<TARGET_FILE:pathd-bench>)
pd_movingai_test(NAME bench_jps4_movingai_quick DATA ${PD_MOVINGAI_DIR} SCRIPT "${PD_BENCH_JPS_SCRIPT}"
  ARGS $<TARGET_FILE:pathd-bench> --connect 4 --check-astar)
pd_movingai_test(NAME bench_jps4_movingai_full_quick DATA ${PATHD_BENCH_DATA} FULL SCRIPT "${PD_BENCH_JPS_SCRIPT}"
  ARGS $<TARGET_FILE:pathd-bench> --connect 4 --check-astar)

add_test(NAME bench_jps_cli_errors
  COMMAND sh -c [=[
bench="$1"; status=0
for args in "--algo" "--algo dijkstra" "--check-astar" "--algo astar --check-astar"; do
  # shellcheck disable=SC2086
  "$bench" $args bench_small.map.scen >/dev/null 2>&1; rc=$?
  if [ "$rc" -ne 2 ]; then echo "FAIL: pathd-bench $args -> exit $rc, want 2"; status=1; fi
done
exit $status
]=] bench_jps_cli_errors $<TARGET_FILE:pathd-bench>
  WORKING_DIRECTORY ${PD_TEST_DATA_DIR})
set_tests_properties(bench_jps_cli_errors PROPERTIES LABELS "sanitize" TIMEOUT 60)
