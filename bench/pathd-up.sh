# pathd-up.sh - sourced by the bench scripts that start a pathd of their own.
#
#   free_port                     prints a free loopback TCP port
#   wait_pathd NAME PATHCTL PORT LOG
#                                 waits (30 s at most) until the pathd on
#                                 127.0.0.1:PORT answers a ping; otherwise
#                                 prints LOG and "NAME: pathd did not start"
#                                 and exits 1
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_pathd() {
  local name=$1 pathctl=$2 port=$3 log=$4
  for _ in $(seq 300); do
    "$pathctl" --server "127.0.0.1:$port" ping > /dev/null 2>&1 && return 0
    sleep 0.1
  done
  cat "$log" >&2
  echo "$name: pathd did not start" >&2
  exit 1
}
