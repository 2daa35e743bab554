#!/usr/bin/env bash
# `make fuzz`: runs each libFuzzer target for SECONDS, one after another,
# growing a scratch corpus under BUILD/fuzz-out/TARGET/corpus from the
# committed seeds (tests/fuzz/corpus/TARGET, read only) and the regression
# inputs. Prints the executions per target; fails on the first crash, with
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

status=0
for t in "${targets[@]}"; do
  out="$build/fuzz-out/$t"
  mkdir -p "$out/corpus" "$out/crashes"
  inputs=("$out/corpus" "tests/fuzz/corpus/$t")
  [ -d "tests/fuzz/regressions/$t" ] && inputs+=("tests/fuzz/regressions/$t")
  opts=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
        -artifact_prefix="$out/crashes/")
  [ -f "tests/fuzz/$t.dict" ] && opts+=(-dict="tests/fuzz/$t.dict")
  if "$build/tests/$t" "${opts[@]}" "${inputs[@]}" >"$out/log" 2>&1; then
    result=ok
  else
    result=FAILED
    status=1
    grep -E "ERROR|runtime error|broken promise|Test unit written" "$out/log" | head -5 >&2 || true
  fi
  execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$out/log")
  echo "fuzz: $t: ${execs:-?} executions in ${seconds} s, corpus $(find "$out/corpus" -type f | wc -l) new inputs: $result"
done
exit $status
