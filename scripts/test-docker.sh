#!/usr/bin/env bash
# `make test-docker`: builds the Dockerfile and runs the image's daemon on a
# machine with no Docker engine, using podman/buildah in chroot isolation.
#
#   scripts/test-docker.sh BUILD_DIR
#
# BUILD_DIR is a host build of pathd (the test asks the containerised daemon
# for a path with the host's BUILD_DIR/client-examples/c/pathctl) and holds
# the cached debootstrap rootfs of the base image, so only the first run pays
# for bootstrapping Debian. Steps:
#   1. install podman, buildah and debootstrap if missing;
#   2. debootstrap a bookworm minbase rootfs (cached) and import it as
#      debian:bookworm and debian:bookworm-slim if those images are missing;
#   3. podman build the Dockerfile (docker format, so HEALTHCHECK is kept)
#      and check the image's user, ports, stop signal and health check;
#   4. run the image's ENTRYPOINT with buildah on a free loopback port, ask it
#      for a path with the host pathctl and run the HEALTHCHECK command inside
#      the container;
#   5. send the daemon SIGTERM and require exit status 0 within Docker's
#      default stop grace;
#   6. report the image size and the time from container start to first answer.
# Everything listens on loopback only. Exits non-zero with a message on any
# failure; the container is always removed, the base rootfs and images kept.
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi

SRC_DIR=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=$(realpath -m "$1")
PATHCTL="$BUILD_DIR/client-examples/c/pathctl"

SUITE=bookworm
BASE_DIR="$BUILD_DIR/docker-base"
BASE_STAMP="$BUILD_DIR/docker-base.stamp"
IMAGE=pathd:test
# The names the Dockerfile's FROM lines use; one imported rootfs serves both.
BASE_IMAGES=(debian:bookworm debian:bookworm-slim)
# The port the image's ENTRYPOINT and HEALTHCHECK use; the test moves both to a
# free loopback port because the container shares the host's network.
IMAGE_PORT=7420
# Seconds the daemon may take from container start to its first answer.
START_TIMEOUT_S=30
# Docker's default `docker stop` grace before it sends SIGKILL.
STOP_GRACE_S=10
# The demo query the test asks (config/default.json's town scene).
QUERY=(path --scene town --from 3,4 --to 30,20)
QUERY_GOAL="30,20"

LOG_DIR="$BUILD_DIR/docker-logs"
mkdir -p "$LOG_DIR"

say() { echo "test-docker: $*" >&2; }
fail() { echo "test-docker: FAIL: $*" >&2; exit 1; }
now_ms() { date +%s%3N; }

test_start_ms=$(now_ms)

[ -x "$PATHCTL" ] || fail "$PATHCTL not found: build pathctl in $BUILD_DIR first (make build BUILD=...)"

# The build context is the source tree; a build dir inside it that
# .dockerignore does not exclude would drag the rootfs into every build.
case "$BUILD_DIR/" in
  "$SRC_DIR"/*)
    top=${BUILD_DIR#"$SRC_DIR"/}
    top=${top%%/*}
    case "$top" in
      build|build-*) ;;
      *) fail "BUILD_DIR $BUILD_DIR is inside the source tree but not build or build-*; .dockerignore would not exclude it" ;;
    esac
    ;;
esac

# debootstrap and chroot isolation both need root.
[ "$(id -u)" -eq 0 ] || fail "run as root: debootstrap and chroot-isolated podman/buildah need it"

# ---- 1. tools ----
# debian-archive-keyring lets debootstrap check the mirror's signatures. No
# recommended package is needed: chroot isolation with the host's network and
# podman's native overlay storage use neither slirp4netns nor fuse-overlayfs.
TOOLS=(podman buildah debootstrap debian-archive-keyring)
missing=()
for p in "${TOOLS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >"$LOG_DIR/apt.log" 2>&1 \
    || fail "apt-get install ${missing[*]} failed, see $LOG_DIR/apt.log"
fi

# ---- 2. base image ----
# The Debian mirror apt uses on this host, so debootstrap works wherever apt
# does; PATHD_DEBIAN_MIRROR overrides it.
debian_mirror() {
  if [ -n "${PATHD_DEBIAN_MIRROR:-}" ]; then
    echo "$PATHD_DEBIAN_MIRROR"
    return
  fi
  local uri
  uri=$(
    {
      grep -hE '^[[:space:]]*deb[[:space:]]' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
        | sed -E 's/^[[:space:]]*deb[[:space:]]+(\[[^]]*\][[:space:]]+)?//' | awk '{print $1}'
      grep -hE '^[[:space:]]*URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null \
        | sed -E 's/^[[:space:]]*URIs:[[:space:]]*//' | tr ' ' '\n'
    } | grep -E '/debian/?$' | head -n 1
  ) || true
  echo "${uri:-http://deb.debian.org/debian}"
}

# Trims the rootfs the way Docker's official slim images are trimmed: no apt
# lists or cached .debs, no man pages, info, locales or docs (copyright files
# stay), and dpkg keeps it that way for packages installed later.
slim_rootfs() {
  local root=$1
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/apt/*.bin
  rm -rf "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/groff/* "$root"/usr/share/lintian/*
  find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
  find "$root/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
  find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
  cat >"$root/etc/dpkg/dpkg.cfg.d/docker-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
}

reimport=0
if [ ! -f "$BASE_STAMP" ] || [ ! -d "$BASE_DIR/etc" ]; then
  mirror=$(debian_mirror)
  say "debootstrap $SUITE from $mirror into $BASE_DIR (first run only, a few minutes)"
  t0=$(now_ms)
  rm -rf "$BASE_DIR"
  debootstrap --variant=minbase "$SUITE" "$BASE_DIR" "$mirror" >"$LOG_DIR/debootstrap.log" 2>&1 \
    || fail "debootstrap failed, see $LOG_DIR/debootstrap.log"
  slim_rootfs "$BASE_DIR"
  echo "suite=$SUITE mirror=$mirror" >"$BASE_STAMP"
  say "debootstrap took $(( ($(now_ms) - t0) / 1000 )) s"
  reimport=1
fi
for img in "${BASE_IMAGES[@]}"; do
  podman image exists "$img" || reimport=1
done
if [ "$reimport" -eq 1 ]; then
  say "importing $BASE_DIR as ${BASE_IMAGES[*]}"
  tar -C "$BASE_DIR" -c . | podman import --message "debootstrap $SUITE minbase" - "${BASE_IMAGES[0]}" \
    >"$LOG_DIR/import.log" 2>&1 || fail "podman import failed, see $LOG_DIR/import.log"
  for img in "${BASE_IMAGES[@]:1}"; do
    podman tag "${BASE_IMAGES[0]}" "$img"
  done
fi

# ---- 3. image ----
say "podman build -t $IMAGE (log: $LOG_DIR/build.log)"
t0=$(now_ms)
podman build --isolation=chroot --network=host --pull=never --format docker \
  -t "$IMAGE" -f "$SRC_DIR/Dockerfile" "$SRC_DIR" >"$LOG_DIR/build.log" 2>&1 \
  || { tail -n 30 "$LOG_DIR/build.log" >&2; fail "podman build failed, see $LOG_DIR/build.log"; }
build_s=$(( ($(now_ms) - t0) / 1000 ))

inspect() { podman image inspect --format "$1" "$IMAGE"; }
# Prints a JSON array of strings one element per line.
json_words() { python3 -c 'import json,sys; [print(w) for w in json.load(sys.stdin)]'; }

image_user=$(inspect '{{.Config.User}}')
[ "${image_user%%:*}" = pathd ] || fail "image USER is '$image_user', want pathd"
ports=$(inspect '{{json .Config.ExposedPorts}}')
for p in 7420 9420; do
  echo "$ports" | grep -q "\"$p/tcp\"" || fail "image does not EXPOSE $p (ExposedPorts: $ports)"
done
stop_signal=$(inspect '{{.Config.StopSignal}}')
[ "$stop_signal" = SIGTERM ] || fail "image STOPSIGNAL is '$stop_signal', want SIGTERM"

mapfile -t entrypoint < <(inspect '{{json .Config.Entrypoint}}' | json_words)
[ "${entrypoint[0]:-}" = /usr/local/bin/pathd ] || fail "ENTRYPOINT is not exec-form /usr/local/bin/pathd: ${entrypoint[*]}"
mapfile -t health < <(inspect '{{json .HealthCheck.Test}}' | json_words)
[ "${health[0]:-}" = CMD ] || fail "HEALTHCHECK missing or not exec-form CMD: ${health[*]:-none}"
# docker-compose.yml must run the same health check as the image.
compose_test=$(sed -n 's/^[[:space:]]*test:[[:space:]]*//p' "$SRC_DIR/docker-compose.yml" | tr -d '[:space:]')
image_test=$(inspect '{{json .HealthCheck.Test}}' | tr -d '[:space:]')
[ "$compose_test" = "$image_test" ] \
  || fail "docker-compose.yml healthcheck $compose_test differs from the image's $image_test"
health=("${health[@]:1}")
printf '%s\n' "${health[@]}" | grep -qx "127.0.0.1:$IMAGE_PORT" \
  || fail "HEALTHCHECK does not ask 127.0.0.1:$IMAGE_PORT: ${health[*]}"

# ---- 4. run ----
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port)
mport=$(free_port)
health=("${health[@]/#127.0.0.1:$IMAGE_PORT/127.0.0.1:$port}")

# Every process below $1, children first, one per line.
descendants() {
  local kids k
  kids=$(ps -o pid= --ppid "$1" 2>/dev/null) || true
  for k in $kids; do
    descendants "$k"
    echo "$k"
  done
}

ctr=""
run_pid=""
# On an early exit the daemon still runs: stop it the way Docker would
# (SIGTERM, then SIGKILL after the grace) so nothing outlives the test.
cleanup() {
  if [ -n "$run_pid" ] && kill -0 "$run_pid" 2>/dev/null; then
    local procs p waited=0
    procs=$(descendants "$run_pid")
    for p in $procs; do
      if [ "$(cat "/proc/$p/comm" 2>/dev/null)" = pathd ]; then kill -TERM "$p" 2>/dev/null || true; fi
    done
    while kill -0 "$run_pid" 2>/dev/null && [ "$waited" -lt $(( STOP_GRACE_S * 10 )) ]; do
      sleep 0.1
      waited=$(( waited + 1 ))
    done
    if kill -0 "$run_pid" 2>/dev/null; then
      kill -KILL $(descendants "$run_pid") "$run_pid" 2>/dev/null || true
    fi
    wait "$run_pid" 2>/dev/null || true
  fi
  if [ -n "$ctr" ]; then
    buildah rm "$ctr" >/dev/null 2>&1 || echo "test-docker: warning: buildah rm $ctr failed" >&2
  fi
}
trap cleanup EXIT

ctr=$(buildah from --pull-never --name "pathd-test-$$" "$IMAGE")
# The image's own ENTRYPOINT; the appended --listen wins over the one in it,
# exactly as `docker run pathd --listen ...` would.
daemon_cmd=("${entrypoint[@]}" --listen "127.0.0.1:$port" --metrics-listen "127.0.0.1:$mport")
say "starting ${daemon_cmd[*]} in $ctr (log: $LOG_DIR/daemon.log)"
start_ms=$(now_ms)
# ./config is mounted read-only over /etc/pathd as docker-compose.yml does, so
# the unprivileged user must be able to read a host config; the copy baked
# into the image was already loaded by the Dockerfile's --check-config step.
buildah run --isolation chroot --network host --volume "$SRC_DIR/config:/etc/pathd:ro" \
  "$ctr" -- "${daemon_cmd[@]}" >"$LOG_DIR/daemon.log" 2>&1 &
run_pid=$!

first_answer_ms=""
answer=""
deadline_ms=$(( start_ms + START_TIMEOUT_S * 1000 ))
while [ "$(now_ms)" -lt "$deadline_ms" ]; do
  kill -0 "$run_pid" 2>/dev/null || { cat "$LOG_DIR/daemon.log" >&2; fail "the container's daemon exited before answering"; }
  rc=0
  answer=$("$PATHCTL" --server "127.0.0.1:$port" --timeout 2000 "${QUERY[@]}" 2>&1) || rc=$?
  if [ "$rc" -eq 0 ]; then
    first_answer_ms=$(( $(now_ms) - start_ms ))
    break
  fi
  # 3 is "cannot connect": the daemon is not listening yet.
  [ "$rc" -eq 3 ] || fail "pathctl ${QUERY[*]} exited $rc: $answer"
  sleep 0.05
done
[ -n "$first_answer_ms" ] || { cat "$LOG_DIR/daemon.log" >&2; fail "no answer within $START_TIMEOUT_S s of container start"; }
echo "$answer" | head -n 1 | grep -q '^status OK' || fail "unexpected answer: $(echo "$answer" | head -n 1)"
[ "$(echo "$answer" | tail -n 1)" = "$QUERY_GOAL" ] || fail "path does not end at $QUERY_GOAL"
say "answer from the container: $(echo "$answer" | head -n 1)"

# The daemon's host PID: buildah's chroot isolation shares the host's PID
# namespace, so pathd is a descendant of our buildah process.
daemon_pid=""
for p in $(descendants "$run_pid"); do
  if [ "$(cat "/proc/$p/comm" 2>/dev/null)" = pathd ]; then daemon_pid=$p; break; fi
done
[ -n "$daemon_pid" ] || fail "cannot find the pathd process under buildah run ($run_pid)"
daemon_uid=$(awk '/^Uid:/ {print $2}' "/proc/$daemon_pid/status")
[ "$daemon_uid" -ne 0 ] || fail "the daemon runs as root"

# The HEALTHCHECK command, run inside the container as Docker would.
rc=0
health_out=$(buildah run --isolation chroot --network host "$ctr" -- "${health[@]}" 2>&1) || rc=$?
[ "$rc" -eq 0 ] || fail "HEALTHCHECK (${health[*]}) exited $rc: $health_out"
say "healthcheck in the container: $health_out"

# The metrics endpoint the image exposes on 9420 (moved to a free port here).
metrics=$(curl -fsS --max-time 5 "http://127.0.0.1:$mport/metrics") || fail "GET /metrics failed"
echo "$metrics" | grep -q '^pathd_requests_total{type="find_path",status="OK"} [1-9]' \
  || fail "/metrics does not count the path answered above"
[ "$(curl -fsS --max-time 5 "http://127.0.0.1:$mport/healthz")" = ok ] || fail "GET /healthz failed"
say "metrics from the container: $(echo "$metrics" | grep -c '^pathd_') samples, /healthz ok"

# The runtime stage must carry no compiler.
buildah run --isolation chroot "$ctr" -- /bin/sh -c '! command -v cc && ! command -v gcc' >/dev/null \
  || fail "the runtime image contains a C compiler"

# ---- 5. stop ----
stop_t0=$(now_ms)
kill -TERM "$daemon_pid"
stop_deadline_ms=$(( stop_t0 + STOP_GRACE_S * 1000 ))
while kill -0 "$run_pid" 2>/dev/null && [ "$(now_ms)" -lt "$stop_deadline_ms" ]; do
  sleep 0.05
done
if kill -0 "$run_pid" 2>/dev/null; then
  fail "the daemon did not exit within $STOP_GRACE_S s of SIGTERM (Docker would SIGKILL it)"
fi
rc=0
wait "$run_pid" || rc=$?
run_pid=""
stop_ms=$(( $(now_ms) - stop_t0 ))
[ "$rc" -eq 0 ] || { tail -n 20 "$LOG_DIR/daemon.log" >&2; fail "the daemon exited $rc after SIGTERM, want 0"; }
grep -q "received SIGTERM" "$LOG_DIR/daemon.log" || fail "the daemon did not log the SIGTERM it got"

# ---- 6. report ----
size=$(inspect '{{.Size}}')
# When pathd logged that it listens, by its own clock (the same as ours), to
# tell the daemon's start-up apart from buildah setting up the container.
listen_stamp=$(sed -n 's/^\([0-9T:.-]*Z\) INFO listening on .*/\1/p' "$LOG_DIR/daemon.log" | head -n 1)
listen_ms="?"
if [ -n "$listen_stamp" ]; then
  listen_ms=$(( $(date -d "$listen_stamp" +%s%3N) - start_ms ))
fi
echo "test-docker: image $IMAGE: $(( size / 1000000 )) MB ($size bytes), built in ${build_s} s"
echo "test-docker: daemon uid $daemon_uid; listening ${listen_ms} ms and first answer ${first_answer_ms} ms after container start; stopped ${stop_ms} ms after SIGTERM with status 0"
echo "test-docker: PASS in $(( ($(now_ms) - test_start_ms) / 1000 )) s"
