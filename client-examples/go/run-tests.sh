#!/bin/sh
# Runs the Go client's tests (go test) offline, for
# the ctest client_go (tests/clients.cmake), which starts pathd with
# scripts/run-with-daemon.sh and sets PATHD_ADDR, PATHD_BIN, PATHD_CONFIG
# and PATHCTL_BIN. Ends with one summary line, "go client: N passed,
# N failed".
#
# Only Debian's packages are used: golang-go (Go 1.19),
# golang-google-protobuf-dev (go.mod's replace points at its source tree),
# and protobuf-compiler + protoc-gen-go for the test that the committed
# pathdpb/pathd.pb.go matches proto/pathd.proto. GOPROXY=off: nothing is
# downloaded. The build cache goes to PATHD_GO_CACHE (the build tree under
# ctest), never to the source tree. PATHD_GO_RACE=1 adds the race detector
# (a cold build of the race runtime takes about a minute more, so ctest does
# not ask for it).
# The suite's timeout (PATHD_GO_TIMEOUT, default 600s) is a hang guard, not
# a speed test: with the race detector on a loaded machine the suite takes
# several times as long as alone, and 90s was hit. ctest's own TIMEOUT for
# client_go (tests/clients.cmake) bounds the run without the race detector.
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
go="${PATHD_GO:-go}"

missing=""
command -v "$go" >/dev/null 2>&1 || missing="$missing golang-go"
[ -f /usr/share/gocode/src/google.golang.org/protobuf/go.mod ] || missing="$missing golang-google-protobuf-dev"
command -v protoc >/dev/null 2>&1 || missing="$missing protobuf-compiler"
command -v protoc-gen-go >/dev/null 2>&1 || missing="$missing protoc-gen-go"
if [ -n "$missing" ]; then
  echo "go client: missing Debian packages:$missing (scripts/install-deps.sh test installs them)" >&2
  echo "go client: 0 passed, 1 failed"
  exit 1
fi

cache="${PATHD_GO_CACHE:-${TMPDIR:-/tmp}/pathd-go-cache}"
mkdir -p "$cache"
export GOPROXY=off GOSUMDB=off GOFLAGS=-mod=readonly GOTOOLCHAIN=local \
       GOCACHE="$cache/build" GOPATH="$cache/gopath" GOMODCACHE="$cache/gopath/pkg/mod" \
       GOTELEMETRY=off CGO_ENABLED=1

log="$(mktemp "${TMPDIR:-/tmp}/pathd-go-test.XXXXXX")"
trap 'rm -f "$log"' EXIT
cd "$here"
rc=0
"$go" test -count=1 ${PATHD_GO_RACE:+-race} -timeout "${PATHD_GO_TIMEOUT:-600s}" -v ./... >"$log" 2>&1 || rc=$?
cat "$log"
passed="$(grep -c -- '^--- PASS' "$log" || true)"
failed="$(grep -c -- '^--- FAIL' "$log" || true)"
# A build failure fails no test by name: count it.
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
echo "go client: $passed passed, $failed failed"
exit "$rc"
