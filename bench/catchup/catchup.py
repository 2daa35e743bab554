"""Issue 32's target 2a (a running replica catches up 100,000 updates in at
most 1 s), measured alone and repeated, for the tail's work
(server/net/pd_replica.c). Two modes, each on loopback with its own
redis-server and pathds, stopped at the end; it reuses bench/replicas's
helpers (replicas.py: the cluster, the writes, the metric polls).

  --sigstop RUNS: target 2a's own steps, RUNS times on one cluster: B
      serving, SIGSTOP, N updates through A, SIGCONT, seconds until B's
      pathd_replica_scene_version equals A's. Prints each run, the median
      and the worst.
  --copy RUNS PATHD...: the catch-up alone, and the replica's CPU seconds
      for it (utime + stime from /proc), for each pathd binary in turn:
      N updates are written once through A (Redis without fsync, so the
      writing is quick); then per run and binary a replica on an empty key
      prefix serves, is stopped, the stream is copied under its prefix
      (COPY), and it is continued. CPU seconds do not depend on the
      neighbours as much as the wall time does on a shared machine.

usage: catchup.py BUILD_DIR --sigstop RUNS [--quick]
       catchup.py BUILD_DIR --copy RUNS [PATHD...] [--quick]   (no PATHD: BUILD_DIR's)
(PYTHONPATH as bench/replicas/bench-replicas.sh sets it; N is replicas.py's
N_CATCHUP: 100,000, or 10,000 with --quick.)
"""
import json
import os
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "replicas"))
import replicas as R  # noqa: E402


def cpu_seconds(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def sigstop_runs(cl, runs):
    cl.start_redis()
    a, b = cl.start_pathd("A"), cl.start_pathd("B")
    res = []
    for i in range(runs):
        R.wait_version(b, R.scene_version(a))
        b["proc"].send_signal(signal.SIGSTOP)
        wsecs, bad = R.write_updates(a, R.N_CATCHUP)
        va = R.scene_version(a)
        t = time.monotonic()
        b["proc"].send_signal(signal.SIGCONT)
        R.wait_version(b, va)
        res.append(time.monotonic() - t)
        print(f"run {i + 1}: {R.N_CATCHUP} updates written in {wsecs:.1f} s ({bad} not OK); "
              f"B caught up to version {va} in {res[-1]:.3f} s; load average {os.getloadavg()[0]:.1f}", flush=True)
    print(f"median {statistics.median(res):.3f} s, worst {max(res):.3f} s")


def copy_runs(cl, runs, binaries):
    # Redis without fsync: the stream is written once, quickly.
    args = ["redis-server", "--port", str(cl.rport), "--bind", "127.0.0.1", "--dir", cl.tmp, "--save", "",
            "--appendonly", "no", "--daemonize", "no", "--logfile", "redis.log"]
    cl.procs["redis"] = subprocess.Popen(args, cwd=cl.tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    R.wait_port(cl.rport)
    a = cl.start_pathd("A")
    R.write_updates(a, R.N_CATCHUP)
    want = R.scene_version(a)
    cl.stop("A")
    rc = R.Resp(cl.rport)
    seq = rc.call("GET", f"{R.PREFIX}:seq")
    results = {b: [] for b in binaries}
    for i in range(runs):
        for k, pathd in enumerate(binaries):
            prefix = f"c{i}x{k}"
            path, port, mport = cl.config(prefix, True)
            with open(path) as f:
                cfg = json.load(f)
            cfg["log"]["prefix"] = prefix
            with open(path, "w") as f:
                json.dump(cfg, f)
            p = subprocess.Popen([pathd, "--config", path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            cl.procs[prefix] = p
            node = {"name": prefix, "port": port, "mport": mport, "proc": p, "t0": time.monotonic()}
            R.wait_serving(node)
            p.send_signal(signal.SIGSTOP)
            for name in ("log", "meta"):
                rc.call("COPY", f"{R.PREFIX}:{{{R.SCENE}}}:{name}", f"{prefix}:{{{R.SCENE}}}:{name}")
            rc.call("SET", f"{prefix}:seq", seq)
            rc.call("SADD", f"{prefix}:scenes", R.SCENE)
            c0 = cpu_seconds(p.pid)
            t = time.monotonic()
            p.send_signal(signal.SIGCONT)
            R.wait_version(node, want)
            wall = time.monotonic() - t
            cpu = cpu_seconds(p.pid) - c0
            cl.stop(prefix)
            for key in rc.call("KEYS", prefix + ":*"):
                rc.call("DEL", key)
            results[pathd].append((cpu, wall))
            print(f"run {i + 1} {pathd}: CPU {cpu:.2f} s, wall {wall:.3f} s, "
                  f"load average {os.getloadavg()[0]:.1f}", flush=True)
    for pathd, rs in results.items():
        print(f"{pathd}: CPU median {statistics.median(c for c, _ in rs):.2f} s, "
              f"wall median {statistics.median(w for _, w in rs):.3f} s, worst {max(w for _, w in rs):.3f} s")


def main():
    if len(sys.argv) < 4 or sys.argv[2] not in ("--sigstop", "--copy"):
        sys.exit(__doc__)
    cl = R.Cluster(sys.argv[1])
    try:
        if sys.argv[2] == "--sigstop":
            sigstop_runs(cl, int(sys.argv[3]))
        else:
            binaries = [b for b in sys.argv[4:] if b != "--quick"]
            copy_runs(cl, int(sys.argv[3]), binaries or [cl.pathd])
    finally:
        cl.close()


if __name__ == "__main__":
    main()
