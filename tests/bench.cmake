# Tests for pathd-bench, the Moving AI benchmark runner (bench/pathd_bench.c).
#
# bench_movingai_quick runs a spread-out subset of every scenario file in the
# repository's Moving AI subset (tests/data/movingai) and fails on any
# mismatch; bench_movingai_full_quick does the same over the full shared set
# when it is present. The other tests use small files in tests/data (made for
# this project, with lengths from an independent Dijkstra) to prove the runner
# itself catches wrong lengths, unreachable goals and bad input instead of
# passing everything.
#
# Commands are small POSIX sh scripts (bracket arguments, so CMake leaves them
# alone) because ctest cannot otherwise check both an exit status and output.

# Every 200th query of each scenario file: from every bucket range, a few
# seconds in a Release build and well under a minute under ASan+UBSan.
set(PD_BENCH_QUICK_EVERY 200)

# pd_movingai_test(NAME name DATA dir [FULL] SCRIPT script [ARGS ...])
#   Runs SCRIPT (sh; ARGS then the scenario files as its parameters) over
#   every .map.scen file under DATA/scen, through tests/movingai_suite.sh.
#   Without FULL the data is the repository's subset and missing files fail
#   the test; with FULL it is the shared 20-map set, whose absence exits 77:
#   ctest reports the test as skipped and its output says why.
#   PARSE_ARGV keeps the semicolons of SCRIPT: parsing ${ARGN} would split
#   the script at its first ';' and run only that much (every suite passed
#   without running pathd-bench until this was noticed).
function(pd_movingai_test)
  cmake_parse_arguments(PARSE_ARGV 0 T "FULL" "NAME;DATA;SCRIPT;TIMEOUT" "ARGS")
  set(missing 1)
  if(T_FULL)
    set(missing 77)
  endif()
  add_test(NAME ${T_NAME}
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/movingai_suite.sh ${T_NAME} ${T_DATA} ${missing} "${T_SCRIPT}"
      ${T_ARGS})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  set_tests_properties(${T_NAME} PROPERTIES LABELS "sanitize" TIMEOUT ${T_TIMEOUT} SKIP_RETURN_CODE 77)
endfunction()

# The project's end-to-end proof that the search is optimal on real game maps:
# any mismatch with a file's optimal length fails.
set(PD_BENCH_QUICK_SCRIPT [=[
bench="$1"; every="$2"; shift 2
exec "$bench" --every "$every" "$@"
]=])
pd_movingai_test(NAME bench_movingai_quick DATA ${PD_MOVINGAI_DIR} SCRIPT "${PD_BENCH_QUICK_SCRIPT}"
  ARGS $<TARGET_FILE:pathd-bench> ${PD_BENCH_QUICK_EVERY})
pd_movingai_test(NAME bench_movingai_full_quick DATA ${PATHD_BENCH_DATA} FULL SCRIPT "${PD_BENCH_QUICK_SCRIPT}"
  ARGS $<TARGET_FILE:pathd-bench> ${PD_BENCH_QUICK_EVERY})

# --warmup (what `make bench` times with) runs each map's picked queries once
# untimed first; the timed run must still check every one of them. The quick
# subset is run with and without it: both must pass with 0 failures and report
# the same query count (so the warm-up neither adds nor drops queries), and
# the JSON header must say which mode ran.
pd_movingai_test(NAME bench_movingai_quick_warmup DATA ${PD_MOVINGAI_DIR} TIMEOUT 240
  ARGS $<TARGET_FILE:pathd-bench> ${PD_BENCH_QUICK_EVERY} SCRIPT [=[
bench="$1"; every="$2"; shift 2
cold=$("$bench" --quiet --every "$every" "$@") || { echo "cold run failed: $cold" >&2; exit 1; }
json=$(mktemp) || exit 1
warm=$("$bench" --json --warmup --every "$every" "$@" 2>&1 >"$json"); rc=$?
header=$(grep -c '"warmup": true' "$json"); rm -f "$json"
echo "without --warmup: $cold"
echo "with --warmup:    $warm"
case $cold in *" passed, 0 failed") ;; *) echo "expected 0 failures without --warmup" >&2; exit 1 ;; esac
[ "$rc" -eq 0 ] || { echo "pathd-bench --warmup exited $rc" >&2; exit 1; }
[ "$warm" = "$cold" ] || { echo "--warmup changed the closing line" >&2; exit 1; }
[ "$header" -eq 1 ] || { echo "JSON header lacks \"warmup\": true" >&2; exit 1; }
]=])

# Runs pathd-bench on the given files and passes only when it exits with the
# expected status and its last line is exactly the expected closing line.
set(PD_BENCH_EXPECT_SCRIPT [=[
bench="$1"; want_rc="$2"; want_last="$3"; shift 3
out=$("$bench" "$@" 2>&1); rc=$?
printf '%s\n' "$out"
last=$(printf '%s\n' "$out" | tail -n 1)
if [ "$rc" -ne "$want_rc" ]; then
  echo "expected exit status $want_rc, got $rc" >&2; exit 1
fi
if [ "$last" != "$want_last" ]; then
  echo "expected closing line '$want_last', got '$last'" >&2; exit 1
fi
]=])

function(pd_bench_expect NAME RC LAST)
  add_test(NAME ${NAME}
    COMMAND sh -c "${PD_BENCH_EXPECT_SCRIPT}" ${NAME} $<TARGET_FILE:pathd-bench> ${RC} "${LAST}" ${ARGN}
    WORKING_DIRECTORY ${PD_TEST_DATA_DIR})
  set_tests_properties(${NAME} PROPERTIES LABELS "sanitize" TIMEOUT 60)
endfunction()

# Correct files pass: 8-decimal lengths (LF), and "%g" lengths with CRLF line
# endings and map paths that need resolving by basename.
pd_bench_expect(bench_small_pass 0 "20 passed, 0 failed"
  bench_small.map.scen bench_small_g.map.scen)
# The same queries in 4-connected mode: costs are not compared, paths are.
pd_bench_expect(bench_small_connect4 0 "10 passed, 0 failed"
  --connect 4 bench_small.map.scen)
# Subsets (options apply to every file): of 10 queries, --every 3 runs
# the 1st, 4th, 7th and 10th; --last 3 the 8th to 10th; both, the 8th.
pd_bench_expect(bench_small_every 0 "4 passed, 0 failed" --every 3 bench_small.map.scen)
pd_bench_expect(bench_small_last 0 "3 passed, 0 failed"
  --last 3 --reps 3 bench_small.map.scen)
pd_bench_expect(bench_small_last_every 0 "1 passed, 0 failed"
  --last 3 --every 3 bench_small.map.scen)
# One length is 1e-6 too long: far inside a flat 1e-3 tolerance, outside the
# 8 printed decimals.
pd_bench_expect(bench_wrong_length 1 "9 passed, 1 failed" bench_wrong_length.map.scen)
# In a 6-significant-digit file "6" means 6.00000, so a true 6.41421 fails.
pd_bench_expect(bench_wrong_g 1 "9 passed, 1 failed" bench_wrong_g.map.scen)
# A goal with no path counts as a failure.
pd_bench_expect(bench_unreachable 1 "1 passed, 1 failed" bench_unreachable.map.scen)
# --warmup searches every query once untimed before the timed run: the same
# queries are counted and a wrong length still fails (the warm-up run checks
# nothing, so it must not hide or add a result).
pd_bench_expect(bench_small_warmup 0 "20 passed, 0 failed"
  --warmup bench_small.map.scen bench_small_g.map.scen)
pd_bench_expect(bench_wrong_length_warmup 1 "9 passed, 1 failed"
  --warmup bench_wrong_length.map.scen)

# Bad usage and bad input exit with status 2 and say why.
add_test(NAME bench_cli_errors
  COMMAND sh -c [=[
bench="$1"; status=0; err=$(mktemp) || exit 1
check() {
  want="$1"; shift
  "$bench" "$@" >/dev/null 2>"$err"; rc=$?
  if [ "$rc" -ne "$want" ] || { [ "$want" -ne 0 ] && [ ! -s "$err" ]; }; then
    echo "FAIL: pathd-bench $* -> exit $rc (want $want, with a message)"; status=1
  else
    echo "ok: pathd-bench $* -> exit $rc: $(head -n 1 "$err")"
  fi
}
check 2
check 2 --every 0 bench_small.map.scen
check 2 --every x bench_small.map.scen
check 2 --last -1 bench_small.map.scen
check 2 --reps
check 2 --connect 6 bench_small.map.scen
check 2 --no-such-option bench_small.map.scen
check 2 no_such_file.map.scen
check 2 bench_malformed.map.scen
check 2 bench_missing_map.map.scen
check 2 bench_small.map
check 0 --help
rm -f "$err"
exit $status
]=] bench_cli_errors $<TARGET_FILE:pathd-bench>
  WORKING_DIRECTORY ${PD_TEST_DATA_DIR})
set_tests_properties(bench_cli_errors PROPERTIES LABELS "sanitize" TIMEOUT 60)
