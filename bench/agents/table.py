#!/usr/bin/env python3
"""table.py - the target table of make bench-agents from run.sh's log.

Reads the "== map, N agents" headers, the bench's "figures ..." lines and the
checker's count lines, and prints one Markdown row per scenario: ReservePath's
server-side (CPU) p50, p99 and mean, the checker's counts for the reserving
run and the conflicts of the FindPath-alone baseline beside them, deadlocked
agents (and apart from them those with no free path), agents moved aside,
the share of plans the fast path answered (the static path was free: no
SIPP search), and one agent's ReservePath time against FindPath's on an
empty table (ratios of medians, to A* and to JPS, which the server's
FindPath uses on these maps); beneath it, when run.sh ran it, the same
simulation through a live pathd (times: Response.server_us). Exits 1 when a
reserving run, in process or wire, broke a rule the checker counts.
"""
import re
import sys


def main(path):
    rows, cur, bad = [], None, False
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"== (\S+), (\d+) agents", line)
            if m:
                cur = {"map": m.group(1), "agents": m.group(2)}
                rows.append(cur)
                continue
            if line.startswith("figures "):
                kv = dict(item.split("=", 1) for item in line.split()[1:])
                cur[kv["mode"]] = kv
                continue
            m = re.match(r".*-(reserve|alone|wire)\.jsonl: plans (\d+) boxes \d+ illegal (\d+) too_fast (\d+) "
                         r"conflicts (\d+) jumps (\d+)", line)
            if m:
                cur["check_" + m.group(1)] = dict(zip(("plans", "illegal", "too_fast", "conflicts", "jumps"),
                                                      map(int, m.group(2, 3, 4, 5, 6))))
    print("| map | agents | game s | ReservePath calls | p50 us | p99 us | mean us | conflicts | illegal | "
          "too fast | jumps | deadlocked | no free path | moved aside | waits % | fast path % | FindPath-alone conflicts | "
          "1 agent: ReservePath / FindPath A* (medians) | 1 agent: ReservePath / FindPath JPS (medians) |")
    print("|" + "---|" * 19)
    for r in rows:
        rs, al, sg = r.get("reserve", {}), r.get("check_alone", {}), r.get("single", {})
        cr = r.get("check_reserve", {})
        if not cr or any(cr[k] for k in ("illegal", "too_fast", "conflicts", "jumps")):
            bad = True
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s (%s vs %s us) | "
              "%s (%s us) |" % (
            r["map"], r["agents"], rs.get("seconds", "?"), rs.get("calls", "?"), rs.get("p50_us", "?"),
            rs.get("p99_us", "?"), rs.get("mean_us", "?"), cr.get("conflicts", "?"), cr.get("illegal", "?"),
            cr.get("too_fast", "?"), cr.get("jumps", "?"), rs.get("deadlocked", "?"),
            rs.get("no_free_path", "?"), rs.get("displaced", "?"), rs.get("waits_pct", "?"),
            rs.get("direct_pct", "?"), al.get("conflicts", "?"), sg.get("ratio_astar", "?"),
            sg.get("rp_median_us", "?"), sg.get("astar_median_us", "?"), sg.get("ratio_jps", "?"),
            sg.get("jps_median_us", "?")))
        # The same simulation through a live pathd (run.sh's wire run), its
        # times the server's (Response.server_us): the row beneath.
        ws, cw = r.get("wire"), r.get("check_wire", {})
        if ws is None and not cw:
            continue
        ws = ws or {}
        if not cw or any(cw[k] for k in ("illegal", "too_fast", "conflicts", "jumps")):
            bad = True
        print("| %s (wire, server_us) | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | - | - | - |" % (
            r["map"], r["agents"], ws.get("seconds", "?"), ws.get("calls", "?"), ws.get("p50_us", "?"),
            ws.get("p99_us", "?"), ws.get("mean_us", "?"), cw.get("conflicts", "?"), cw.get("illegal", "?"),
            cw.get("too_fast", "?"), cw.get("jumps", "?"), ws.get("deadlocked", "?"),
            ws.get("no_free_path", "?"), ws.get("displaced", "?"), ws.get("waits_pct", "?"),
            ws.get("direct_pct", "?")))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
