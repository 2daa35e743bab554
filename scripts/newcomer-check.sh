#!/usr/bin/env bash
# The newcomer check (issue 14): does the README's "Two commands" section work
# on a freshly bootstrapped Debian 12, as a new user would run it?
#
#   scripts/newcomer-check.sh [--base DIR] [--root DIR] [--ref REF]
#
# 1. debootstrap --variant=minbase bookworm into --base (default
#    /work/newroot.base; kept and reused, so only the first run pays for it),
#    from the Debian mirror this machine's apt uses;
# 2. copy it to a fresh --root (default /work/newroot) and mount proc, sys,
#    dev and dev/pts there;
# 3. inside the chroot, as root: apt-get install -y make git (the README's
#    prerequisite), git clone REF (default: the current branch) of this
#    repository into /root/pathd from a bundle, so there is no ../shared
#    beside it;
# 4. `make run` in the background until `pathctl ping` answers on
#    127.0.0.1:7420 (timed), then SIGTERM to the daemon, which must drain and
#    exit 0 (make run then exits 0 too), and no test tool may be installed;
# 5. `make test` (timed);
# 6. `scripts/cluster.sh up` (Redis, HAProxy and 3 replicas on loopback
#    ports 7400-7432), a Ping through HAProxy, `status`, `down`.
# Prints the times and exit statuses, and the tail of any failing log; exits
# non-zero when a step fails. Logs stay in ROOT/root/*.log. The chroot shares
# this machine's network and its local CAs (apt and npm need them); pathd
# listens on loopback only, on the demo config's 127.0.0.1:7420 and :9420, so
# those ports must be free. Needs root, debootstrap and about 3 GB. Not part of `make test`: it
# takes 15-30 minutes.
set -euo pipefail

BASE=/work/newroot.base
ROOT=/work/newroot
REF=""
# How long `make run` may take to install, build and answer a ping.
RUN_TIMEOUT_S=1800

usage() { echo "usage: $0 [--base DIR] [--root DIR] [--ref REF]" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --base) [ $# -ge 2 ] || usage; BASE="$2"; shift 2 ;;
    --root) [ $# -ge 2 ] || usage; ROOT="$2"; shift 2 ;;
    --ref) [ $# -ge 2 ] || usage; REF="$2"; shift 2 ;;
    *) usage ;;
  esac
done

[ "$(id -u)" -eq 0 ] || { echo "$0: needs root (debootstrap, chroot, mount)" >&2; exit 1; }
repo="$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)"
[ -n "$REF" ] || REF="$(git -C "$repo" rev-parse --abbrev-ref HEAD)"

for port in 7420 9420; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "$0: 127.0.0.1:$port is in use; make run needs it" >&2
    exit 1
  fi
done

# The mirror this machine's apt uses (deb822 or one-line sources).
mirror="$(sed -n 's/^URIs: *\(http[^ ]*\/debian\)\/*$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n 1)"
[ -n "$mirror" ] || mirror="$(awk '$1 == "deb" && $2 ~ /\/debian\/?$/ { print $2; exit }' /etc/apt/sources.list 2>/dev/null || true)"
[ -n "$mirror" ] || mirror=http://deb.debian.org/debian

if [ ! -x "$BASE/usr/bin/apt-get" ]; then
  command -v debootstrap >/dev/null || apt-get install -y debootstrap
  echo "newcomer: debootstrap bookworm minbase from $mirror into $BASE" >&2
  start=$SECONDS
  rm -rf "$BASE"
  nice debootstrap --variant=minbase bookworm "$BASE" "$mirror"
  echo "newcomer: debootstrap took $((SECONDS - start)) s" >&2
fi

mounted=()
umount_all() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    umount -l "${mounted[$i]}" 2>/dev/null || true
  done
  mounted=()
}
trap umount_all EXIT

if mountpoint -q "$ROOT/proc" 2>/dev/null; then
  echo "$0: $ROOT/proc is mounted: another check running?" >&2
  exit 1
fi
rm -rf "$ROOT"
cp -a "$BASE" "$ROOT"
mount -t proc proc "$ROOT/proc" && mounted+=("$ROOT/proc")
mount -t sysfs sys "$ROOT/sys" && mounted+=("$ROOT/sys")
mount --bind /dev "$ROOT/dev" && mounted+=("$ROOT/dev")
mount --bind /dev/pts "$ROOT/dev/pts" && mounted+=("$ROOT/dev/pts")
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
# A network that inspects TLS with its own CA (as this project's sandboxes
# do) must be trusted by every machine on it: the chroot gets this machine's
# local CAs, which the ca-certificates package (pulled in by git) adds to the
# system store that apt's https, curl and Debian's node and npm read.
mkdir -p "$ROOT/usr/local/share/ca-certificates"
cp /usr/local/share/ca-certificates/*.crt "$ROOT/usr/local/share/ca-certificates/" 2>/dev/null || true
git -C "$repo" bundle create "$ROOT/root/pathd.bundle" "$REF" 2>/dev/null

in_root() { chroot "$ROOT" /usr/bin/env -i HOME=/root TERM=dumb \
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"; }

fail=0
summary=()
note() { summary+=("$*"); echo "newcomer: $*" >&2; }
tail_log() { echo "---- last lines of $1 ----" >&2; tail -n 40 "$ROOT/root/$1" >&2; }
# What the root holds, in MB (the clone and its build trees included).
root_mb() { du -sxm "$ROOT" | cut -f1; }
# Each line of a make log is stamped with the seconds since the epoch, so the
# package installs can be told from the build: the seconds from STEP_START
# to the log's first compile line.
stamp='while IFS= read -r l; do printf "%(%s)T %s\n" -1 "$l"; done'
packages_s() { awk -v t0="$2" '/\[ *[0-9]+%\]/ { print $1 - t0; exit }' "$ROOT/root/$1"; }

# 3. The README's prerequisites, and the clone.
start=$SECONDS
if in_root sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq make git' \
     >"$ROOT/root/prereq.log" 2>&1; then
  note "apt-get install -y make git: $((SECONDS - start)) s, root $(root_mb) MB"
else
  note "apt-get install -y make git FAILED"; tail_log prereq.log; exit 1
fi
in_root git clone -q -b "$REF" /root/pathd.bundle /root/pathd

# 4. make run: in its own process group, so it and the daemon under it can be
# stopped together.
start=$SECONDS
setsid chroot "$ROOT" /usr/bin/env -i HOME=/root TERM=dumb \
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  bash -c "set -o pipefail; cd /root/pathd && make run 2>&1 | $stamp" >"$ROOT/root/make-run.log" 2>&1 &
run_pid=$!
run_t0="$(date +%s)"
answered=0
while [ $((SECONDS - start)) -lt "$RUN_TIMEOUT_S" ] && kill -0 "$run_pid" 2>/dev/null; do
  if [ -x "$ROOT/root/pathd/build/client-examples/c/pathctl" ] &&
     in_root /root/pathd/build/client-examples/c/pathctl --timeout 1000 ping >/dev/null 2>&1; then
    answered=1
    break
  fi
  sleep 1
done
if [ "$answered" -eq 1 ]; then
  note "make run: pathctl ping answered after $((SECONDS - start)) s" \
       "(packages $(packages_s make-run.log "$run_t0") s), root $(root_mb) MB"
  in_root /root/pathd/build/client-examples/c/pathctl scenes >"$ROOT/root/scenes.log" 2>&1 || true
  note "make run: pathctl scenes listed $(wc -l <"$ROOT/root/scenes.log") scenes"
  # The daemon is the one pathd in make run's process group.
  pkill -TERM -g "$run_pid" -x pathd || true
  stop_start=$SECONDS
  while kill -0 "$run_pid" 2>/dev/null && [ $((SECONDS - stop_start)) -lt 15 ]; do sleep 0.2; done
  if kill -0 "$run_pid" 2>/dev/null; then
    note "make run: did not stop within 15 s of SIGTERM"; fail=1
    kill -KILL -- "-$run_pid" 2>/dev/null || true
  fi
  run_rc=0
  wait "$run_pid" || run_rc=$?
  if [ "$run_rc" -eq 0 ]; then
    note "make run: the daemon drained and exited 0 on SIGTERM"
  else
    note "make run: exited $run_rc after SIGTERM"; fail=1; tail_log make-run.log
  fi
else
  note "make run FAILED: no ping answer within $((SECONDS - start)) s"; fail=1
  kill -KILL -- "-$run_pid" 2>/dev/null || true
  wait "$run_pid" 2>/dev/null || true
  tail_log make-run.log
fi
# make run must have left the test tools alone.
test_tools="$(in_root dpkg-query -W -f='${Package} ${db:Status-Status}\n' \
  libcmocka-dev clang valgrind nodejs npm haproxy python3-protobuf 2>/dev/null |
  awk '$2 == "installed" { print $1 }' || true)"
if [ -n "$test_tools" ]; then
  note "make run installed test tools:" $test_tools; fail=1
else
  note "make run installed no test tool (cmocka, clang, valgrind, node, haproxy, python3-protobuf)"
fi

# 5. make test.
start=$SECONDS
test_t0="$(date +%s)"
if in_root bash -c "set -o pipefail; cd /root/pathd && make test 2>&1 | $stamp" >"$ROOT/root/make-test.log" 2>&1; then
  note "make test: passed in $((SECONDS - start)) s" \
       "(packages $(packages_s make-test.log "$test_t0") s), root $(root_mb) MB"
else
  note "make test FAILED after $((SECONDS - start)) s"; fail=1
  tail_log make-test.log
fi
grep -E "tests passed|Skipped|\*\*\*Skipped|Not Run" "$ROOT/root/make-test.log" >&2 || true

# 6. The replicas (issue 32, docs/OPERATIONS.md): scripts/cluster.sh up on
# the clone, with the haproxy and redis-server that make test installed; a
# Ping through HAProxy's front end; status; down.
start=$SECONDS
if in_root bash -c "cd /root/pathd && scripts/cluster.sh up --dir /root/cluster &&
     build/client-examples/c/pathctl --server 127.0.0.1:7400 --timeout 5000 ping &&
     build/client-examples/c/pathctl --server 127.0.0.1:7400 scenes && scripts/cluster.sh status --dir /root/cluster" \
     >"$ROOT/root/cluster.log" 2>&1; then
  note "cluster.sh up: 3 replicas, HAProxy and Redis serving in $((SECONDS - start)) s;" \
       "status: $(grep -cE '^(haproxy|redis|replica[0-9]+) [0-9]+ ' "$ROOT/root/cluster.log") processes up"
else
  note "cluster.sh up FAILED"; fail=1; tail_log cluster.log
fi
in_root bash -c "cd /root/pathd && scripts/cluster.sh down --dir /root/cluster" >>"$ROOT/root/cluster.log" 2>&1 ||
  { note "cluster.sh down FAILED"; fail=1; }

# The times mean little without the machine's load beside them.
echo "==== newcomer check ($REF, bookworm minbase, $(nproc) cores," \
     "load average at the end $(cut -d' ' -f1-3 /proc/loadavg)) ====" >&2
printf '%s\n' "${summary[@]}" >&2
umount_all
echo "newcomer: logs in $ROOT/root/*.log" >&2
exit "$fail"
