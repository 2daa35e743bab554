#!/usr/bin/env bash
# Measures pathd's resident memory with N idle client connections held open
# (issue 3's target: <= 100 MiB over the idle baseline for 10,000). Starts its
# own daemon on a loopback ephemeral port, opens the connections from one
# python3 process (stdlib only), reads VmRSS from /proc before and after, and
# checks the daemon still answers a ping while they are held.
#
# usage: bench/idle/idle-rss.sh BUILD_DIR [N]
set -euo pipefail
build=${1:?usage: idle-rss.sh BUILD_DIR [N]}
n=${2:-10000}
here=$(cd "$(dirname "$0")/../.." && pwd)
pathd="$build/server/pathd"
pathctl="$build/client-examples/c/pathctl"
[ -x "$pathd" ] && [ -x "$pathctl" ] || { echo "idle-rss: build first ($pathd, $pathctl)" >&2; exit 2; }

# Each connection takes one descriptor in the daemon and one in the client
# process; each process needs n plus some headroom.
want=$((n + 256))
hard=$(ulimit -Hn)
if [ "$hard" != unlimited ] && [ "$hard" -lt "$want" ]; then
  echo "idle-rss: the open-file hard limit ($hard) is below $want" >&2; exit 2
fi
ulimit -n "$want"
tmp=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT
# Loopback ephemeral port, and room for the control ping beside the n held
# connections (the default cap is exactly 10,000).
python3 - "$here/config/default.json" "$tmp/config.json" "$n" <<'CONF'
import json, sys
conf = json.load(open(sys.argv[1]))
conf["listen"] = "127.0.0.1:0"
conf["metrics_listen"] = ""
conf.setdefault("limits", {})["max_connections"] = int(sys.argv[3]) + 16
json.dump(conf, open(sys.argv[2], "w"), indent=2)
CONF
# Map paths in the config are relative to its directory.
cp -r "$here/config/scenes" "$tmp/scenes"
"$pathd" --config "$tmp/config.json" --log-level info 2> "$tmp/log" &
pid=$!
for _ in $(seq 100); do
  port=$(sed -n 's/.*listening on [^ ]*:\([0-9][0-9]*\).*/\1/p' "$tmp/log" | head -1)
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "${port:-}" ] || { cat "$tmp/log" >&2; echo "idle-rss: daemon did not start" >&2; exit 1; }
rss() { awk '/^VmRSS/ {print $2}' "/proc/$pid/status"; }
"$pathctl" --server "127.0.0.1:$port" ping > /dev/null
base=$(rss)

python3 - "$port" "$n" "$pid" "$pathctl" <<'PY'
import socket, subprocess, sys, time
port, n, pid, pathctl = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
socks = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    socks.append(s)
time.sleep(1.0)  # let the loop accept and set up every connection
rss = int([l.split()[1] for l in open(f"/proc/{pid}/status") if l.startswith("VmRSS")][0])
ok = subprocess.run([pathctl, "--server", f"127.0.0.1:{port}", "ping"], capture_output=True).returncode == 0
stats = subprocess.run([pathctl, "--server", f"127.0.0.1:{port}", "stats"], capture_output=True, text=True).stdout
conns = int([l.split()[1] for l in stats.splitlines() if l.startswith("connections:")][0])
# The stats connection itself is the one above n.
ok = ok and conns == n + 1
print(f"held {len(socks)} connections (server counts {conns - 1}); daemon VmRSS {rss} KiB; "
      f"ping while held: {'ok' if ok else 'FAILED'}")
sys.stdout.flush()
for s in socks:
    s.close()
sys.exit(0 if ok else 1)
PY
echo "baseline VmRSS ${base} KiB"
