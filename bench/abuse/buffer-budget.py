#!/usr/bin/env python3
"""buffer-budget.py - pathd's memory under buffer abuse (issue 10, finding 4).

Starts pathd on the bundled demo config with its default limits (the buffer
budget is 128 MiB), then opens PARTIALS connections that each send 90% of a
1 MB frame and stall, and SLOW_READERS connections that each ask for the
forest grid (256 KiB per answer) again and again without reading. Prints the
daemon's RSS before, at the peak and at the end, how many connections were
shed, and pathd_buffered_bytes from the Stats answer. Stops by itself.

  bench/abuse/buffer-budget.py [BUILD_DIR] [PARTIALS] [SLOW_READERS]
"""
import os
import re
import resource
import socket
import struct
import subprocess
import sys
import tempfile
import time

build = sys.argv[1] if len(sys.argv) > 1 else "build"
partials = int(sys.argv[2]) if len(sys.argv) > 2 else 500
slow = int(sys.argv[3]) if len(sys.argv) > 3 else 200
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 65536), hard))


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


def frame(body):
    return struct.pack(">I", len(body)) + body


def grid_request(req_id):
    scene = b"forest"
    grid = b"\x0a" + bytes([len(scene)]) + scene            # GetSceneGrid.scene
    return frame(b"\x08" + bytes([req_id & 0x7F]) + b"\x92\x01" + bytes([len(grid)]) + grid)


with tempfile.TemporaryDirectory() as tmp:
    log = open(os.path.join(tmp, "pathd.log"), "w")
    port = 7000 + os.getpid() % 1000
    proc = subprocess.Popen([os.path.join(build, "server", "pathd"), "--config",
                             os.path.join(root, "config", "default.json"), "--listen",
                             "127.0.0.1:%d" % port, "--metrics-listen", "127.0.0.1:0"], stderr=log)
    time.sleep(1.5)
    before = rss_kib(proc.pid)
    socks = []
    claim = 1000000
    part = struct.pack(">I", claim) + bytes(claim // 10 * 9)
    for _ in range(partials):
        s = socket.create_connection(("127.0.0.1", port))
        try:
            s.sendall(part)
        except OSError:
            pass
        socks.append(s)
    peak = rss_kib(proc.pid)
    for i in range(slow):
        s = socket.create_connection(("127.0.0.1", port))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.setblocking(False)
        try:
            for k in range(40):
                s.send(grid_request(k))
        except OSError:
            pass
        socks.append(s)
        if i % 20 == 0:
            peak = max(peak, rss_kib(proc.pid))
    time.sleep(2)
    peak = max(peak, rss_kib(proc.pid))
    end = rss_kib(proc.pid)
    log.flush()
    mport = re.search(r"metrics on http://127\.0\.0\.1:(\d+)/", open(log.name).read()).group(1)
    with socket.create_connection(("127.0.0.1", int(mport))) as m:
        m.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
        text_m = b""
        while chunk := m.recv(65536):
            text_m += chunk
    buffered = re.search(rb"\npathd_buffered_bytes (\d+)", text_m)
    for s in socks:
        s.close()
    proc.terminate()
    proc.wait(timeout=15)
    log.close()
    text = open(os.path.join(tmp, "pathd.log")).read()
    shed = text.count("closed to keep buffers within the budget")
    print("partial 1 MB frames: %d, slow readers: %d (default budget 128 MiB)" % (partials, slow))
    print("pathd RSS: before %.1f MiB, peak %.1f MiB, end %.1f MiB; connections shed: %d; "
          "buffered at the end: %s bytes" % (before / 1024, peak / 1024, end / 1024, shed,
                                              buffered.group(1).decode() if buffered else "?"))
