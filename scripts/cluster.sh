#!/usr/bin/env bash
# cluster.sh - pathd replicas behind HAProxy, sharing one change log on
# Redis, all on loopback (issue 32; docs/OPERATIONS.md). The configs are
# written into DIR from deploy/cluster/ (the files docker-compose runs), so
# both run the same checks, timeouts and scenes.
#
#   scripts/cluster.sh up [--replicas N] [--dir DIR] [--base-port P] [--pathd BIN]
#   scripts/cluster.sh status [--dir DIR]       one line per process: NAME PID HOST:PORT
#                                               (PID "-" when it is not running; exit 1 then)
#   scripts/cluster.sh start-replica I [--dir DIR]   start replica I again (after a crash)
#   scripts/cluster.sh stop-replica I [--dir DIR]    SIGTERM: replica I finishes what it owes
#                                               and exits (drain it first)
#   scripts/cluster.sh start-redis|start-haproxy [--dir DIR]   start it again (after a crash)
#   scripts/cluster.sh add-replica [--dir DIR]  start replica N+1 and add it to HAProxy
#                                               while it runs (its admin socket)
#   scripts/cluster.sh drain I [--dir DIR]      SIGUSR1: replica I takes nothing new
#   scripts/cluster.sh ready I [--dir DIR]      SIGUSR2: replica I serves again
#   scripts/cluster.sh haproxy 'CMD' [--dir DIR]   one command to HAProxy's admin
#                                               socket, e.g. 'show stat'
#   scripts/cluster.sh down [--dir DIR]         stop everything (SIGTERM, then SIGKILL)
#
# Ports (P = --base-port, 7400 by default): HAProxy's front end P, Redis
# P+1, replica I P+10*I (requests), P+10*I+1 (agent-check), P+10*I+2
# (/metrics). DIR (default build/cluster) holds the configs, each process's
# log (NAME.log) and pid file (NAME.pid), Redis's data (redis/) and HAProxy's
# admin socket (haproxy.sock). `up` remembers N, P and the pathd binary in
# DIR/cluster.env, so the other commands need only --dir.
#
# haproxy and redis-server are Debian packages (scripts/install-deps.sh
# test installs both).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
deploy="$root/deploy/cluster"
cmd="${1:-}"
[ $# -gt 0 ] && shift
index=""
case "$cmd" in
  start-replica|stop-replica|drain|ready|haproxy)
    index="${1:-}"
    [ $# -gt 0 ] && shift
    ;;
esac
replicas=3
dir="$root/build/cluster"
base=7400
pathd="${PATHD_BIN:-$root/build/server/pathd}"
replicas_set=0 base_set=0 pathd_set=0
while [ $# -gt 0 ]; do
  case "$1" in
    --replicas) replicas="$2"; replicas_set=1; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --base-port) base="$2"; base_set=1; shift 2 ;;
    --pathd) pathd="$2"; pathd_set=1; shift 2 ;;
    *) echo "cluster.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

usage() {
  sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

die() {
  echo "cluster.sh: $*" >&2
  exit 1
}

# The settings `up` chose, for the other commands (flags given now win).
load_env() {
  [ -f "$dir/cluster.env" ] || die "no cluster in $dir (run: scripts/cluster.sh up --dir $dir)"
  local r b p
  # shellcheck disable=SC1091
  r=$(. "$dir/cluster.env"; echo "$CLUSTER_REPLICAS")
  b=$(. "$dir/cluster.env"; echo "$CLUSTER_BASE_PORT")
  p=$(. "$dir/cluster.env"; echo "$CLUSTER_PATHD")
  [ "$replicas_set" -eq 1 ] || replicas=$r
  [ "$base_set" -eq 1 ] || base=$b
  [ "$pathd_set" -eq 1 ] || pathd=$p
}

port_of() {
  case "$1" in
    haproxy) echo "$base" ;;
    redis) echo $((base + 1)) ;;
    replica*) echo $((base + 10 * ${1#replica})) ;;
  esac
}

names() {
  echo haproxy redis
  for i in $(seq 1 "$replicas"); do echo "replica$i"; done
}

# The pid in DIR/NAME.pid when that process is alive and still the program
# we started (a pid reused by another program does not count).
live_pid() {
  local name=$1 pid exe
  [ -f "$dir/$name.pid" ] || return 1
  pid=$(cat "$dir/$name.pid")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null || true)
  case "$name" in
    haproxy) [[ "$exe" == *haproxy* ]] ;;
    redis) [[ "$exe" == *redis* ]] ;;
    *) [[ "$exe" == *pathd* ]] ;;
  esac || return 1
  echo "$pid"
}

# Waits up to $2 seconds for 127.0.0.1:$1 to accept a connection.
wait_port() {
  local port=$1 limit=$2 i
  for ((i = 0; i < limit * 10; i++)); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      return 0
    fi
    sleep 0.1
  done
  return 1
}

# Starts `$@` in the background, its own session (a signal to the shell
# that ran `up` does not reach it), output in DIR/NAME.log, pid in
# DIR/NAME.pid.
spawn() {
  local name=$1
  shift
  setsid "$@" >>"$dir/$name.log" 2>&1 < /dev/null &
  echo $! > "$dir/$name.pid"
}

write_configs() {
  mkdir -p "$dir/redis"
  local rport=$((base + 1))
  # Redis: the deploy file with its address and data directory here.
  sed -e "s|^bind .*|bind 127.0.0.1|" -e "s|^port .*|port $rport|" -e "s|^dir .*|dir $dir/redis|" \
    "$deploy/redis.conf" > "$dir/redis.conf"
  # HAProxy: the deploy file with its bind, admin socket and one server
  # line per replica on loopback (the resolvers are not needed for IPs).
  {
    sed -e "s|^\( *bind \).*|\1127.0.0.1:$base|" \
        -e "s|^\( *stats socket \)[^ ]*|\1$dir/haproxy.sock|" \
        -e "/^ *server replica/d" -e "s| resolvers docker||" \
        -e "/^resolvers docker/,/^$/d" \
        "$deploy/haproxy.cfg"
    for i in $(seq 1 "$replicas"); do server_line "$i"; done
  } > "$dir/haproxy.cfg"
  for i in $(seq 1 "$replicas"); do write_replica "$i"; done
  write_env
}

# Replica I's line in HAProxy's backend (the checks come from default-server).
server_line() {
  echo "    server replica$1 127.0.0.1:$((base + 10 * $1)) agent-port $((base + 10 * $1 + 1))"
}

# Replica I's config: deploy/cluster/replica1.json (they are all alike) on
# loopback ports, the demo scenes from this checkout, no tokens (loopback
# only), two worker threads.
write_replica() {
  local i=$1
  sed -e "s|\"0.0.0.0:7420\"|\"127.0.0.1:$((base + 10 * i))\"|" \
      -e "s|\"0.0.0.0:7430\"|\"127.0.0.1:$((base + 10 * i + 1))\"|" \
      -e "s|\"0.0.0.0:9420\"|\"127.0.0.1:$((base + 10 * i + 2))\"|" \
      -e "s|\"redis:6379\"|\"127.0.0.1:$((base + 1))\"|" \
      -e "s|\"threads\": 0|\"threads\": 2|" \
      -e "s|/etc/pathd/scenes/|$root/config/scenes/|" \
      "$deploy/replica1.json" > "$dir/replica$i.json"
}

write_env() {
  cat > "$dir/cluster.env" <<ENV
CLUSTER_REPLICAS=$replicas
CLUSTER_BASE_PORT=$base
CLUSTER_PATHD=$pathd
ENV
}

# One command to HAProxy's admin socket; prints its answer.
haproxy_cmd() {
  /usr/bin/python3 - "$dir/haproxy.sock" "$1" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(5)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\n")
out = b""
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    out += chunk
sys.stdout.write(out.decode())
PY
}

start_replica() {
  local i=$1 name="replica$1"
  if live_pid "$name" >/dev/null; then
    die "$name is running (pid $(live_pid "$name"))"
  fi
  [ -x "$pathd" ] || die "no pathd at $pathd (build it: cmake --build build --target pathd, or --pathd BIN)"
  # The token variables of the shell must not turn on auth by accident.
  spawn "$name" env -u PATHD_TOKEN_QUERY -u PATHD_TOKEN_WRITE -u PATHD_TOKEN_ADMIN \
    "$pathd" --config "$dir/$name.json"
  # Loading the scenes and replaying the log come before the port listens.
  wait_port "$(port_of "$name")" 30 || die "$name did not listen on 127.0.0.1:$(port_of "$name"); see $dir/$name.log"
}

start_redis() {
  live_pid redis >/dev/null && die "redis is running (pid $(live_pid redis))"
  spawn redis redis-server "$dir/redis.conf"
  # Loading the append-only file comes before the port listens.
  wait_port "$(port_of redis)" 30 || die "redis did not listen; see $dir/redis.log"
}

start_haproxy() {
  live_pid haproxy >/dev/null && die "haproxy is running (pid $(live_pid haproxy))"
  rm -f "$dir/haproxy.sock"
  spawn haproxy haproxy -db -f "$dir/haproxy.cfg"
  wait_port "$base" 10 || die "haproxy did not listen; see $dir/haproxy.log"
}

signal_replica() {
  local sig=$1 name="replica$2" pid
  pid=$(live_pid "$name") || die "$name is not running"
  kill "-$sig" "$pid"
}

# SIGTERM, then SIGKILL after $2 seconds.
stop_one() {
  local name=$1 grace=$2 pid i
  pid=$(live_pid "$name") || { rm -f "$dir/$name.pid"; return 0; }
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < grace * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "cluster.sh: $name (pid $pid) did not stop in ${grace}s; killing it" >&2
    kill -KILL "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  fi
  rm -f "$dir/$name.pid"
}

case "$cmd" in
  up)
    [[ "$replicas" =~ ^[1-9][0-9]?$ ]] || die "--replicas must be 1..99"
    [[ "$base" =~ ^[0-9]+$ ]] && [ "$base" -ge 1024 ] && [ $((base + 10 * replicas + 2)) -le 65535 ] ||
      die "--base-port must leave room for every port (1024 .. 65535)"
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    # Absolute, so the other commands work from any directory.
    [ -x "$pathd" ] || die "no pathd at $pathd (build it: cmake --build build --target pathd, or make cluster)"
    pathd="$(cd "$(dirname "$pathd")" && pwd)/$(basename "$pathd")"
    if [ -f "$dir/cluster.env" ]; then
      for n in $(replicas=99; names); do
        if live_pid "$n" >/dev/null; then die "$n of a cluster in $dir is running: scripts/cluster.sh down --dir $dir"; fi
      done
    fi
    for tool in haproxy redis-server; do
      command -v "$tool" >/dev/null 2>&1 ||
        die "$tool is not installed: install the Debian package $tool (scripts/install-deps.sh test does)"
    done
    write_configs
    haproxy -c -q -f "$dir/haproxy.cfg" || die "HAProxy refused $dir/haproxy.cfg"
    start_redis
    for i in $(seq 1 "$replicas"); do start_replica "$i"; done
    start_haproxy
    echo "cluster up in $dir: HAProxy on 127.0.0.1:$base, $replicas replicas, Redis on 127.0.0.1:$((base + 1))"
    ;;
  status)
    load_env
    rc=0
    for n in $(names); do
      if pid=$(live_pid "$n"); then
        echo "$n $pid 127.0.0.1:$(port_of "$n")"
      else
        echo "$n - 127.0.0.1:$(port_of "$n")"
        rc=1
      fi
    done
    exit $rc
    ;;
  start-replica)
    load_env
    [[ "$index" =~ ^[0-9]+$ ]] && [ "$index" -ge 1 ] && [ "$index" -le "$replicas" ] ||
      die "start-replica needs a replica number 1..$replicas"
    start_replica "$index"
    echo "replica$index $(live_pid "replica$index") 127.0.0.1:$(port_of "replica$index")"
    ;;
  stop-replica)
    load_env
    [[ "$index" =~ ^[0-9]+$ ]] && [ "$index" -ge 1 ] && [ "$index" -le "$replicas" ] ||
      die "stop-replica needs a replica number 1..$replicas"
    stop_one "replica$index" 15
    ;;
  start-redis)
    load_env
    start_redis
    echo "redis $(live_pid redis) 127.0.0.1:$(port_of redis)"
    ;;
  start-haproxy)
    load_env
    start_haproxy
    echo "haproxy $(live_pid haproxy) 127.0.0.1:$base"
    ;;
  drain|ready)
    load_env
    [[ "$index" =~ ^[0-9]+$ ]] && [ "$index" -ge 1 ] && [ "$index" -le "$replicas" ] ||
      die "$cmd needs a replica number 1..$replicas"
    signal_replica "$([ "$cmd" = drain ] && echo USR1 || echo USR2)" "$index"
    ;;
  add-replica)
    load_env
    live_pid haproxy >/dev/null || die "haproxy is not running: add-replica adds to a running cluster"
    i=$((replicas + 1))
    [ "$i" -le 99 ] && [ $((base + 10 * i + 2)) -le 65535 ] || die "no room for replica$i's ports"
    write_replica "$i"
    start_replica "$i"
    # A server added at run time takes no default-server settings: the same
    # ones are given here (less init-addr and resolvers, which HAProxy
    # refuses for them); it starts in maintenance until enabled.
    opts=$(sed -n 's/^ *default-server //p' "$dir/haproxy.cfg" | sed -e 's/ init-addr [^ ]*//' -e 's/ resolvers [^ ]*//')
    out=$(haproxy_cmd "add server replicas/replica$i 127.0.0.1:$((base + 10 * i)) $opts agent-port $((base + 10 * i + 1))")
    [[ "$out" == *"New server registered"* ]] || die "HAProxy refused replica$i: $out"
    haproxy_cmd "enable health replicas/replica$i" >/dev/null
    haproxy_cmd "enable agent replicas/replica$i" >/dev/null
    haproxy_cmd "enable server replicas/replica$i" >/dev/null
    # The file says the same, for HAProxy's next start.
    server_line "$i" >> "$dir/haproxy.cfg"
    replicas=$i
    write_env
    echo "replica$i $(live_pid "replica$i") 127.0.0.1:$(port_of "replica$i")"
    ;;
  haproxy)
    load_env
    [ -n "$index" ] || die "haproxy needs a command for its admin socket, e.g. 'show stat'"
    haproxy_cmd "$index"
    ;;
  down)
    load_env
    # The front first (no new connections), then the replicas (each
    # finishes what it owes, limits.shutdown_grace_ms), Redis last.
    stop_one haproxy 5
    for i in $(seq 1 "$replicas"); do stop_one "replica$i" 10; done
    stop_one redis 10
    echo "cluster down ($dir)"
    ;;
  *) usage ;;
esac
