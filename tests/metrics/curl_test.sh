#!/bin/sh
# curl_test.sh DEMO_SERVER - the metrics port as Prometheus and a health
# check see it: curl against metrics_demo_server (which stands in for the
# daemon until main.c serves metrics), checking status codes, the content
# type and exact sample lines, then a clean exit on SIGTERM.
set -eu

demo=$1
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
    exit 1
}

"$demo" >"$dir/out" 2>"$dir/err" &
pid=$!

# The demo prints "port N" once it listens; give it 10 s (sanitizer builds
# start slowly).
tries=0
while ! grep -q '^port ' "$dir/out"; do
    tries=$((tries + 1))
    [ "$tries" -le 100 ] || fail "the demo server did not start: $(cat "$dir/err")"
    kill -0 "$pid" 2>/dev/null || fail "the demo server exited: $(cat "$dir/err")"
    sleep 0.1
done
port=$(sed -n 's/^port //p' "$dir/out")
base="http://127.0.0.1:$port"

curl -sS --max-time 10 -D "$dir/head" -o "$dir/metrics" "$base/metrics"
grep -q '^HTTP/1.1 200' "$dir/head" || fail "/metrics: $(head -n 1 "$dir/head")"
grep -qi '^content-type: text/plain; version=0.0.4' "$dir/head" || fail "/metrics: wrong content type"

expect() {
    grep -qxF "$1" "$dir/metrics" || fail "/metrics lacks the line: $1"
}
expect 'pathd_build_info{version="demo-1.0"} 1'
expect '# TYPE pathd_requests_total counter'
expect 'pathd_requests_total{type="find_path",status="OK"} 3'
expect 'pathd_requests_total{type="find_path",status="NO_PATH"} 1'
expect 'pathd_requests_total{type="scene_info",status="UNKNOWN_SCENE"} 1'
expect 'pathd_requests_total{type="unknown",status="MALFORMED"} 1'
expect 'pathd_requests_total{type="cancel",status="OK"} 0'
expect '# TYPE pathd_find_path_duration_seconds histogram'
expect 'pathd_find_path_duration_seconds_bucket{le="0.0001"} 1'
expect 'pathd_find_path_duration_seconds_bucket{le="0.00025"} 2'
expect 'pathd_find_path_duration_seconds_bucket{le="0.001"} 3'
expect 'pathd_find_path_duration_seconds_bucket{le="0.025"} 3'
expect 'pathd_find_path_duration_seconds_bucket{le="0.05"} 4'
expect 'pathd_find_path_duration_seconds_bucket{le="+Inf"} 4'
expect 'pathd_find_path_duration_seconds_sum 0.031130'
expect 'pathd_find_path_duration_seconds_count 4'
expect 'pathd_expansions_total 4420'
expect 'pathd_connections 3'
expect 'pathd_in_flight 2'
expect 'pathd_queue_depth 1'
expect 'pathd_worker_threads 4'
expect 'pathd_worker_busy_seconds_total 2.500000000'
expect 'pathd_uptime_seconds 4.200'
expect 'pathd_scene_version{scene="small"} 1'
expect 'pathd_scene_version{scene="maze"} 1'
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
[ "$status" -eq 0 ] || fail "the demo server exited with $status: $(cat "$dir/err")"
echo "metrics_curl: ok"
