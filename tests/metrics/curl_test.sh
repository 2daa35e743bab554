#!/bin/sh
# curl_test.sh PATHD PATHCTL CONFIG - the metrics port as Prometheus and a
# health check see it: starts the real daemon with metrics on an ephemeral
# loopback port, sends a known set of requests with pathctl, then checks with
# curl the status codes, the content type and the sample lines those requests
# must have produced, and a clean exit on SIGTERM.
set -eu

pathd=$1
pathctl=$2
config=$3
if ! command -v curl >/dev/null 2>&1; then
    echo "curl_test.sh: curl is not installed" >&2
    exit 1
fi

dir=$(mktemp -d)
pid=""
cleanup() {
    if [ -n "$pid" ]; then
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    rm -rf "$dir"
}
trap cleanup EXIT

fail() {
    echo "curl_test.sh: $*" >&2
    [ -f "$dir/err" ] && sed 's/^/  pathd: /' "$dir/err" >&2
    exit 1
}

"$pathd" --config "$config" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --threads 2 \
    --log-level info 2>"$dir/err" &
pid=$!

# Both ports come from the log; give it 20 s (sanitizer builds start slowly).
tries=0
while ! grep -q 'metrics on http://' "$dir/err" || ! grep -q 'listening on ' "$dir/err"; do
    tries=$((tries + 1))
    [ "$tries" -le 200 ] || fail "the daemon did not start"
    kill -0 "$pid" 2>/dev/null || fail "the daemon exited"
    sleep 0.1
done
server=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$dir/err" | head -n 1)
base=$(sed -n 's#.*metrics on \(http://[^/]*\)/metrics.*#\1#p' "$dir/err" | head -n 1)

# The requests whose traces the scrape must show.
"$pathctl" --server "$server" path --scene town --from 3,4 --to 30,20 >/dev/null || fail "path 1 failed"
"$pathctl" --server "$server" path --scene forest --from 10,10 --to 500,490 >/dev/null || fail "path 2 failed"
if "$pathctl" --server "$server" path --scene house --from 1,1 --to 5000,5000 >/dev/null 2>&1; then
    fail "a path to a cell outside the scene succeeded"
fi
if "$pathctl" --server "$server" info no-such-scene >/dev/null 2>&1; then
    fail "info on an unknown scene succeeded"
fi
"$pathctl" --server "$server" ping >/dev/null || fail "ping failed"

curl -sS --max-time 10 -D "$dir/head" -o "$dir/metrics" "$base/metrics"
grep -q '^HTTP/1.1 200' "$dir/head" || fail "/metrics: $(head -n 1 "$dir/head")"
grep -qi '^content-type: text/plain; version=0.0.4' "$dir/head" || fail "/metrics: wrong content type"

expect() {
    grep -qxF "$1" "$dir/metrics" || fail "/metrics lacks the line: $1"
}
expect '# TYPE pathd_requests_total counter'
expect 'pathd_requests_total{type="find_path",status="OK"} 2'
expect 'pathd_requests_total{type="scene_info",status="UNKNOWN_SCENE"} 1'
expect 'pathd_requests_total{type="ping",status="OK"} 1'
expect 'pathd_requests_total{type="cancel",status="OK"} 0'
expect '# TYPE pathd_request_duration_seconds histogram'
expect 'pathd_request_duration_seconds_bucket{kind="find_path",scene="town",le="+Inf"} 1'
expect 'pathd_request_duration_seconds_count{kind="find_path",scene="town"} 1'
expect 'pathd_request_duration_seconds_count{kind="find_path",scene="forest"} 1'
# Refusals are counted as requests, never as latency: the path to a cell
# outside the scene was refused before any work.
expect 'pathd_requests_total{type="find_path",status="OUT_OF_BOUNDS"} 1'
grep -q '^pathd_request_duration_seconds_count{kind="find_path",scene="house"}' "$dir/metrics" && fail "a refused request was observed as latency"
expect 'pathd_overloaded_total{limit="job_queue"} 0'
expect 'pathd_reloads_total{result="success"} 0'
expect 'pathd_worker_threads 2'
# The searches grew a worker's context, which kept no more than the default
# limits.worker_retained_bytes (8 MiB).
ctx_max=$(awk '$1 == "pathd_worker_context_bytes_max" {print $2}' "$dir/metrics")
[ -n "$ctx_max" ] && [ "$ctx_max" -gt 0 ] && [ "$ctx_max" -le 8388608 ] ||
    fail "pathd_worker_context_bytes_max is '$ctx_max', want 1..8388608"
expect 'pathd_in_flight 0'
expect 'pathd_queue_depth 0'
expect 'pathd_scene_version{scene="town"} 1'
expect 'pathd_scene_version{scene="forest"} 1'
# forest's grid: 514 x 514 padded cells, and its bitsets: passability 2 x 514
# lines of 9 words, and the four stop sets twice that.
expect 'pathd_scene_bytes{scene="forest",structure="grid"} 486244'
grep -q '^process_resident_memory_bytes [1-9]' "$dir/metrics" || fail "no process_resident_memory_bytes"
grep -q '^process_open_fds [1-9]' "$dir/metrics" || fail "no process_open_fds"
grep -q '^pathd_build_info{version="[^"]*"} 1$' "$dir/metrics" || fail "no build info line"
# Both searches expanded nodes.
exp=$(sed -n 's/^pathd_expansions_total \([0-9]*\)$/\1/p' "$dir/metrics")
[ -n "$exp" ] && [ "$exp" -gt 0 ] || fail "pathd_expansions_total is '$exp'"
# Every family has exactly one TYPE line.
dups=$(sed -n 's/^# TYPE \([^ ]*\) .*/\1/p' "$dir/metrics" | sort | uniq -d)
[ -z "$dups" ] || fail "families with more than one TYPE line: $dups"

[ "$(curl -sS --max-time 10 "$base/healthz")" = "ok" ] || fail "/healthz did not answer ok"
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "$base/nothing-here")
[ "$code" = 404 ] || fail "/nothing-here answered $code, not 404"
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' -X POST --data x "$base/metrics")
[ "$code" = 405 ] || fail "POST /metrics answered $code, not 405"
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' -H "X-Big: $(head -c 9000 /dev/zero | tr '\0' a)" "$base/metrics")
[ "$code" = 431 ] || fail "a 9 KB header answered $code, not 431"

kill -TERM "$pid"
status=0
wait "$pid" || status=$?
pid=""
[ "$status" -eq 0 ] || fail "the daemon exited with $status"
grep -q 'ERROR: AddressSanitizer\|runtime error:\|WARNING: ThreadSanitizer\|LeakSanitizer' "$dir/err" \
    && fail "sanitizer report in the daemon's log"
echo "metrics_curl: ok"
