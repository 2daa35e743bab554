#!/usr/bin/env bash
# test-tls-haproxy.sh - the TLS recipe of docs/TLS.md, end to end on
# loopback: HAProxy (Debian's) terminates TLS with a throwaway self-signed
# certificate and forwards to pathd, which has tokens. A Python client speaks
# the protocol through the tunnel: Ping, Auth, a path, and a wrong token
# that is refused. Fails, naming the package to install, when haproxy,
# openssl or python3 is absent (`make test` installs them).
#
#   tests/tls/test-tls-haproxy.sh PATHD_BIN PYTHONPATH_DIR [PYTHON]
# (PYTHON: an interpreter with python3-protobuf; default python3)
set -euo pipefail
pathd=$1
pb_dir=$2
python=${3:-python3}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
for tool in haproxy openssl python3; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "test-tls-haproxy: $tool is not installed: install the Debian package $tool" \
         "(scripts/install-deps.sh test does)" >&2
    exit 1
  fi
done
dir=$(mktemp -d)
cleanup() {
  [ -n "${hp:-}" ] && kill "$hp" 2>/dev/null || true
  [ -n "${pp:-}" ] && kill "$pp" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pathd_port=$(free_port)
tls_port=$(free_port)

openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=localhost -days 1 \
  -keyout "$dir/key.pem" -out "$dir/cert.pem" 2>/dev/null
cat "$dir/cert.pem" "$dir/key.pem" > "$dir/haproxy.pem"

token=tls-test-token-0123456789
cat > "$dir/pathd.json" <<JSON
{ "listen": "127.0.0.1:$pathd_port", "threads": 1,
  "auth": { "tokens": [ { "token": "$token", "role": "query" } ] },
  "scenes": [ { "name": "town", "map": "$root/config/scenes/town.txt", "format": "ascii" } ] }
JSON
sed -e "s|@TLS_PORT@|$tls_port|" -e "s|@PATHD_PORT@|$pathd_port|" -e "s|@PEM@|$dir/haproxy.pem|" \
  "$here/haproxy.cfg.in" > "$dir/haproxy.cfg"
haproxy -c -q -f "$dir/haproxy.cfg"

"$pathd" --config "$dir/pathd.json" 2> "$dir/pathd.log" &
pp=$!
haproxy -db -f "$dir/haproxy.cfg" 2> "$dir/haproxy.log" &
hp=$!

PYTHONPATH="$pb_dir" "$python" - "$tls_port" "$dir/cert.pem" "$token" <<'PY'
import socket, ssl, struct, sys, time
import pathd_pb2 as pb

port, cafile, token = int(sys.argv[1]), sys.argv[2], sys.argv[3]
ctx = ssl.create_default_context(cafile=cafile)
ctx.check_hostname = False  # the throwaway certificate names localhost, we dial 127.0.0.1

def connect():
    deadline = time.monotonic() + 10
    while True:
        try:
            raw = socket.create_connection(("127.0.0.1", port), timeout=10)
            return ctx.wrap_socket(raw)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)

def recv(sock):
    header = b""
    while len(header) < 4:
        chunk = sock.recv(4 - len(header))
        if not chunk:
            raise SystemExit("connection closed before an answer")
        header += chunk
    n = struct.unpack(">I", header)[0]
    data = b""
    while len(data) < n:
        data += sock.recv(n - len(data))
    response = pb.Response()
    response.ParseFromString(data)
    return response

def call(sock, request):
    body = request.SerializeToString()
    sock.sendall(struct.pack(">I", len(body)) + body)
    return recv(sock)

s = connect()
print("TLS", s.version(), "cipher", s.cipher()[0])
r = call(s, pb.Request(id=1, ping=pb.Ping(nonce=7)))
assert r.status == pb.OK and r.pong.nonce == 7, r
r = call(s, pb.Request(id=2, list_scenes=pb.ListScenes()))
assert r.status == pb.UNAUTHENTICATED, r
r = call(s, pb.Request(id=3, auth=pb.Auth(token=token)))
assert r.status == pb.OK and r.auth.role == "query", r
req = pb.Request(id=4)
req.find_path.scene = "town"
req.find_path.start.cell.x, req.find_path.start.cell.y = 3, 4
req.find_path.goal.cell.x, req.find_path.goal.cell.y = 30, 20
r = call(s, req)
while not r.final:
    r = recv(s)
assert r.status == pb.OK and r.path.total_waypoints > 0, r
print("path through TLS:", r.path.total_waypoints, "waypoints, cost", round(r.path.cost, 3))
s.close()

s = connect()
r = call(s, pb.Request(id=5, auth=pb.Auth(token="wrong-token-0123456789")))
assert r.status == pb.UNAUTHENTICATED, r
print("wrong token through TLS: UNAUTHENTICATED")
PY
echo "test-tls-haproxy: PASS"
