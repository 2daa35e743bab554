#!/usr/bin/env python3
"""map-cost.py - what a small map costs pathd before it is refused or served
(issue 29, findings 6 and 7).

Writes three CreateScene payloads into a scratch directory:

  polygon   a 4096 x 4096 .tmx (1 px tiles) whose one object collider is a
            POINTS-point polygon (default 65,536), a jagged ring spanning the
            whole map: ~600 KB; the layer data is an all-zero zstd frame
  infinite  an infinite .tmj of two 1 x 1 chunks at tiles (0, 0) and
            (8191, 8191), sent with unit sizes 1-8: ~460 bytes whose chunks
            span 8192 x 8192 tiles
  plain     the polygon map without its polygon: what any SIDE x SIDE scene
            costs to build
  zstd8192  an 8192 x 8192 .tmx whose layer is one all-zero zstd frame: ~11 KB

then, for each, starts a fresh pathd (BUILD_DIR/server/pathd, two worker
threads, default limits, no scenes), sends the map with pathctl's `scene
create` and prints the answer's status and wall time, and the daemon's CPU
time and peak RSS (VmHWM) over its idle baseline. Stops every daemon it
started; each request is bounded by pathctl's --timeout.

  bench/abuse/map-cost.py [BUILD_DIR] [POINTS] [SIDE]

POINTS and SIDE (the polygon map's side in tiles) shrink the polygon
payload, so a build whose collider test costs cells x points can be timed
on a smaller case and extrapolated. The zstd frames are written by hand
(RLE blocks), so only python3 is needed.
"""
import math
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

build = sys.argv[1] if len(sys.argv) > 1 else "build"
points = int(sys.argv[2]) if len(sys.argv) > 2 else 65536
side = int(sys.argv[3]) if len(sys.argv) > 3 else 4096
TIMEOUT_MS = 3_600_000


def zstd_zeros(n):
    """A zstd frame of n zero bytes: a window of 128 KiB, RLE blocks."""
    out = bytearray(struct.pack("<I", 0xFD2FB528)) + bytes([0x00, 0x38])
    block = 128 * 1024
    while n > 0:
        size = min(block, n)
        n -= size
        header = (size << 3) | (1 << 1) | (1 if n == 0 else 0)
        out += struct.pack("<I", header)[:3] + b"\x00"
    return bytes(out)


def b64(data):
    import base64
    return base64.b64encode(data).decode()


def tmx(width, height, objects="", tile=16):
    data = b64(zstd_zeros(width * height * 4))
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<map version="1.10" orientation="orthogonal" width="{width}" height="{height}" '
            f'tilewidth="{tile}" tileheight="{tile}" infinite="0">\n'
            f' <tileset firstgid="1" name="t" tilewidth="{tile}" tileheight="{tile}" tilecount="1"/>\n'
            f' <layer id="1" name="ground" width="{width}" height="{height}">'
            f'<data encoding="base64" compression="zstd">{data}</data></layer>\n'
            f'{objects}</map>\n')


def polygon_map(n, side):
    """A jagged ring around the map's centre, touching its edges."""
    r = side / 2
    pts = []
    for k in range(n):
        a = 2 * math.pi * k / n
        rr = r * (0.95 + 0.05 * ((k * 7919) % 101) / 100)
        pts.append(f"{round(rr * math.cos(a))},{round(rr * math.sin(a))}")
    obj = (' <objectgroup id="2" name="walls">\n'
           f'  <object id="1" x="{r:.0f}" y="{r:.0f}"><polygon points="{" ".join(pts)}"/></object>\n'
           ' </objectgroup>\n')
    return tmx(side, side, obj, tile=1)


INFINITE = ('{"type": "map", "orientation": "orthogonal", "infinite": true, "tilewidth": 16, '
            '"tileheight": 16, "tilesets": [{"firstgid": 1, "tilecount": 1}], "layers": ['
            '{"type": "tilelayer", "name": "ground", "chunks": ['
            '{"x": 0, "y": 0, "width": 1, "height": 1, "data": [0]}, '
            '{"x": 8191, "y": 8191, "width": 1, "height": 1, "data": [0]}]}]}\n')


def status_of(pid):
    with open(f"/proc/{pid}/status") as f:
        text = f.read()
    return int(re.search(r"VmHWM:\s+(\d+)", text).group(1)), int(re.search(r"VmRSS:\s+(\d+)", text).group(1))


def cpu_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(tmp, name, path, units):
    port = free_port()
    conf = os.path.join(tmp, "pathd.json")
    with open(conf, "w") as f:
        f.write('{"listen": "127.0.0.1:%d", "metrics_listen": "127.0.0.1:0", "threads": 2, '
                '"log_level": "warn", "scenes": []}\n' % port)
    log = open(os.path.join(tmp, name + ".log"), "w")
    proc = subprocess.Popen([os.path.join(build, "server", "pathd"), "--config", conf],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        pathctl = os.path.join(build, "client-examples", "c", "pathctl")
        server = "127.0.0.1:%d" % port
        for _ in range(200):
            if subprocess.run([pathctl, "--server", server, "ping"], capture_output=True).returncode == 0:
                break
            time.sleep(0.05)
        hwm0, rss0 = status_of(proc.pid)
        cpu0 = cpu_of(proc.pid)
        t0 = time.monotonic()
        r = subprocess.run([pathctl, "--server", server, "--timeout", str(TIMEOUT_MS), "scene", "create",
                            name, "--map", path, "--format", "tiled", "--units", units],
                           capture_output=True, text=True)
        wall = time.monotonic() - t0
        hwm1, _ = status_of(proc.pid)
        cpu = cpu_of(proc.pid) - cpu0
        answer = (r.stdout + r.stderr).strip().splitlines()
        print(f"{name}: {os.path.getsize(path)} bytes, units {units}: answered in {wall:.2f} s, "
              f"{cpu:.2f} s CPU, peak RSS {hwm1} KiB ({(hwm1 - rss0) / 1024:.1f} MiB above the "
              f"baseline {rss0} KiB)\n  {answer[-1] if answer else '(no answer)'}")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            print(f"  pathd did not stop within 60 s of SIGTERM; killed")
            proc.kill()
            proc.wait()
        log.close()


with tempfile.TemporaryDirectory() as tmp:
    payloads = [
        ("polygon", "poly.tmx", polygon_map(points, side), "1"),
        ("plain", "plain.tmx", tmx(side, side, tile=1), "1"),
        ("infinite", "infinite.tmj", INFINITE, "1,2,3,4,5,6,7,8"),
        ("zstd8192", "zstd8192.tmx", tmx(8192, 8192), "1"),
    ]
    for name, file, text, units in payloads:
        path = os.path.join(tmp, file)
        with open(path, "w") as f:
            f.write(text)
    for name, file, text, units in payloads:
        run(tmp, name, os.path.join(tmp, file), units)
