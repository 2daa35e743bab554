#!/usr/bin/env bash
# `make fuzz`: runs each libFuzzer target for SECONDS, FUZZ_JOBS at a time,
# growing a scratch corpus under BUILD/fuzz-out/TARGET/corpus from the
# committed seeds (tests/fuzz/corpus/TARGET, read only) and the regression
# inputs. Prints the executions per target; fails if any target finds a crash, with
# the input under BUILD/fuzz-out/TARGET/crashes/ (docs/FUZZING.md says what
# to do with it).
#   tests/fuzz/run-fuzz.sh BUILD SECONDS [TARGET...]   (default: every target)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=$1
seconds=$2
shift 2
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for src in tests/fuzz/fuzz_*.c; do targets+=("$(basename "$src" .c)"); done
fi

# One target: its line of figures on stdout, 1 on a finding.
fuzz_one() {
  local t=$1 out="$build/fuzz-out/$1" result
  mkdir -p "$out/corpus" "$out/crashes"
  local inputs=("$out/corpus" "tests/fuzz/corpus/$t")
  [ -d "tests/fuzz/regressions/$t" ] && inputs+=("tests/fuzz/regressions/$t")
  local opts=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
              -artifact_prefix="$out/crashes/")
  [ -f "tests/fuzz/$t.dict" ] && opts+=(-dict="tests/fuzz/$t.dict")
  local rc=0
  if "$build/tests/$t" "${opts[@]}" "${inputs[@]}" >"$out/log" 2>&1; then
    result=ok
  else
    result=FAILED
    rc=1
    grep -E "ERROR|runtime error|broken promise|Test unit written" "$out/log" | head -5 >&2 || true
  fi
  local execs
  execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$out/log")
  echo "fuzz: $t: ${execs:-?} executions in ${seconds} s, corpus $(find "$out/corpus" -type f | wc -l) new inputs: $result"
  return $rc
}

# FUZZ_JOBS targets at a time (default: one per core), each on one core, so
# the run takes SECONDS x targets / FUZZ_JOBS; lines print as targets end.
jobs_max=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
status=0
running=0
for t in "${targets[@]}"; do
  if [ "$running" -ge "$jobs_max" ]; then
    wait -n || status=1
    running=$((running - 1))
  fi
  fuzz_one "$t" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || status=1
  running=$((running - 1))
done
exit $status
