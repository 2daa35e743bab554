#!/usr/bin/python3
"""batch-fairness.py - a control client's FindPath latency alone, then while
heavy clients send the same expensive searches as single requests, then as
32-item Batches, all from one run of one daemon (issue 29 finding 11:
Batches ran as one job each, outside the fair queue between connections).

    bench/fairness/batch-fairness.py [BUILD_DIR]      (default: build)

Starts pathd (BUILD_DIR/server/pathd, or PATHD; THREADS workers, default 2)
and stops it. The map is a SIZE x SIZE serpentine (default 2047: one
corridor per even row, joined at alternating ends), where the heavy search
runs from (0,0) to the far end of row ROW (default 100; every corridor up
to there, about ROW / 2 x SIZE expansions, ROW corners) and the control's
from (0,0) to (100,0), a hundred cells down the first corridor. With MAP
set to a Moving AI map of the shared set (e.g. MAP=brc202d) the heavy work
is instead its BATCH_ITEMS longest scenarios and the control alternates a
short and the longest one.

HEAVY_CLIENTS (default 2) connections each keep DEPTH (default 2) x
BATCH_ITEMS (default 32) of those searches in flight - the default
in-flight cap, 64 - as single requests in the second phase, as DEPTH
Batches of BATCH_ITEMS FindPath items in the third; each answer is followed
by the next request of its kind. The control client, on a connection of
its own, sends CONTROL_REQUESTS (default 100) FindPaths one at a time and
times each from send to answer. Each phase prints the control's median,
p90 and max, and the heavy clients' searches answered per second. Needs
Debian's python3-protobuf (run it with /usr/bin/python3) and the generated
pathd_pb2.py (BUILD_DIR/client-examples/python/gen).
"""
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(ROOT, "client-examples", "python"),
                os.path.join(os.path.abspath(BUILD), "client-examples", "python", "gen")]
import pathd_client  # noqa: E402  (after the path is set)

DATA = os.environ.get("PATHD_BENCH_DATA", os.path.join(ROOT, "..", "shared", "benchmarks", "movingai"))
MAP = os.environ.get("MAP")
SIZE = int(os.environ.get("SIZE", "2047"))
ROW = int(os.environ.get("ROW", "100"))
THREADS = int(os.environ.get("THREADS", "2"))
HEAVY_CLIENTS = int(os.environ.get("HEAVY_CLIENTS", "2"))
BATCH_ITEMS = int(os.environ.get("BATCH_ITEMS", "32"))
DEPTH = int(os.environ.get("DEPTH", "2"))
CONTROL_REQUESTS = int(os.environ.get("CONTROL_REQUESTS", "100"))
PORT = int(os.environ.get("PORT", "7561"))
ADDR = "127.0.0.1:%d" % PORT
SCENE = "bench"
PATHD = os.environ.get("PATHD", os.path.join(BUILD, "server", "pathd"))


def serpentine(path):
    """Writes the SIZE x SIZE serpentine; returns (heavy pairs, control pairs)."""
    with open(path, "w") as f:
        for y in range(SIZE):
            if y % 2 == 0:
                f.write("." * SIZE + "\n")
            else:
                gap = SIZE - 1 if y % 4 == 1 else 0
                f.write("".join("." if x == gap else "#" for x in range(SIZE)) + "\n")
    row = min(ROW, SIZE - 1) // 2 * 2
    end = SIZE - 1 if row % 4 == 0 else 0
    return [((0, 0), (end, row))] * BATCH_ITEMS, [((0, 0), (100, 0))]


def scenarios():
    """(start, goal) of every scenario line, in the file's order (by length)."""
    out = []
    with open(os.path.join(DATA, "scen", MAP + ".map.scen")) as f:
        for line in f:
            p = line.split()
            if len(p) == 9:
                out.append(((int(p[4]), int(p[5])), (int(p[6]), int(p[7]))))
    return out


def heavy(mode, pairs, stop, answered):
    """One heavy client: keeps DEPTH x len(pairs) searches in flight until
    stop, as DEPTH Batches or as that many single requests."""
    c = pathd_client.PathdClient(ADDR, timeout=600)
    items = [pathd_client.query("find_path", SCENE, s, g, style="corners") for s, g in pairs]
    sent = 0

    def send():
        nonlocal sent
        if mode == "batch":
            c.send("batch", items)
        else:
            s, g = pairs[sent % len(pairs)]
            c.send("find_path", SCENE, s, g, style="corners")
        sent += 1

    for _ in range(DEPTH * (1 if mode == "batch" else len(pairs))):
        send()
    done = 0
    while not stop.is_set():
        c.recv()
        done += len(pairs) if mode == "batch" else 1
        send()
    answered.value += done
    c.close()


def control(pairs):
    """The control client's latencies in ms, one request at a time."""
    c = pathd_client.PathdClient(ADDR, timeout=600)
    lat = []
    for i in range(CONTROL_REQUESTS):
        s, g = pairs[i % len(pairs)]
        t0 = time.perf_counter()
        c.find_path(SCENE, s, g, style="corners")
        lat.append((time.perf_counter() - t0) * 1000.0)
    c.close()
    return lat


def phase(name, mode, heavy_pairs, control_pairs):
    stop = multiprocessing.Event()
    answered = multiprocessing.Value("q", 0)
    procs = [multiprocessing.Process(target=heavy, args=(mode, heavy_pairs, stop, answered))
             for _ in range(HEAVY_CLIENTS if mode else 0)]
    for p in procs:
        p.start()
    started = time.perf_counter()
    if procs:
        time.sleep(1.0)  # the heavy clients' first requests are queued
    lat = control(control_pairs)
    stop.set()
    for p in procs:
        p.join()
    seconds = time.perf_counter() - started
    lat.sort()
    p90 = lat[min(len(lat) - 1, int(0.9 * len(lat)))]
    rate = " heavy searches answered %.0f/s" % (answered.value / seconds) if procs else ""
    print("%-34s control FindPath median %8.1f ms  p90 %8.1f ms  max %8.1f ms%s"
          % (name, statistics.median(lat), p90, lat[-1], rate), flush=True)


def main():
    with tempfile.TemporaryDirectory() as d:
        if MAP:
            pairs = scenarios()
            heavy_pairs = pairs[-BATCH_ITEMS:]
            control_pairs = [pairs[len(pairs) // 10], pairs[-1]]
            scene = {"name": SCENE, "map": os.path.realpath(os.path.join(DATA, "maps", MAP + ".map")),
                     "format": "movingai"}
        else:
            heavy_pairs, control_pairs = serpentine(os.path.join(d, "serpentine.txt"))
            scene = {"name": SCENE, "map": os.path.join(d, "serpentine.txt"), "format": "ascii"}
        conf = os.path.join(d, "conf.json")
        with open(conf, "w") as f:
            json.dump({"listen": ADDR, "threads": THREADS, "log_level": "warn", "scenes": [scene]}, f)
        with open(os.path.join(d, "pathd.log"), "w") as log:
            pathd = subprocess.Popen([PATHD, "--config", conf], stderr=log)
        try:
            for _ in range(100):
                try:
                    pathd_client.PathdClient(ADDR, timeout=5).close()
                    break
                except (OSError, pathd_client.PathdError):
                    time.sleep(0.1)
            print("%s, %d workers, map %s; %d heavy clients x %d heavy searches in flight"
                  % (PATHD, THREADS, MAP or "serpentine %d" % SIZE, HEAVY_CLIENTS, DEPTH * BATCH_ITEMS), flush=True)
            phase("alone", None, heavy_pairs, control_pairs)
            phase("heavy clients, single requests", "single", heavy_pairs, control_pairs)
            phase("heavy clients, %d-item Batches" % BATCH_ITEMS, "batch", heavy_pairs, control_pairs)
        finally:
            pathd.terminate()
            pathd.wait(timeout=30)


if __name__ == "__main__":
    main()
