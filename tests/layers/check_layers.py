#!/usr/bin/env python3
"""check_layers.py - the layering of server/ checked on the built objects.

Each folder under server/ is one static library (pathd_core, pathd_conf,
...), and its CMakeLists.txt names the libraries it may use
(target_link_libraries). From `nm` on the built libraries this check finds:

- upward (or sideways) calls: an object of one library that uses a symbol
  defined in a library its CMakeLists.txt does not link, directly or through
  the libraries it links. None is allowed.
- two-way pairs: two files of one library that call each other. Issue 31
  asks for at most one such pair per layer, documented. The pairs that
  exist today are listed in two-way-pairs.txt beside this script (the debt
  the net layer's refactor pays off); any other pair fails the check, and a
  listed pair that no longer exists must be taken off the list.

Usage: check_layers.py BUILD_DIR SOURCE_DIR
"""
import os
import re
import subprocess
import sys


def cmake_deps(source_dir):
    """library -> the pathd_* libraries its CMakeLists.txt links."""
    deps = {}
    server = os.path.join(source_dir, "server")
    for folder in sorted(os.listdir(server)):
        path = os.path.join(server, folder, "CMakeLists.txt")
        if not os.path.isfile(path):
            continue
        text = open(path, encoding="utf-8").read()
        for m in re.finditer(r"target_link_libraries\(\s*(pathd_\w+)(.*?)\)", text, re.S):
            deps.setdefault(m.group(1), set()).update(re.findall(r"\bpathd_\w+\b", m.group(2)))
    return deps


def closure(deps, lib):
    seen, todo = set(), [lib]
    while todo:
        for d in deps.get(todo.pop(), ()):
            if d not in seen:
                seen.add(d)
                todo.append(d)
    return seen


def symbols(archive):
    """object -> (defined, undefined) symbol sets, from nm -A."""
    out = subprocess.run(["nm", "-A", archive], capture_output=True, text=True, check=True).stdout
    objs = {}
    for line in out.splitlines():
        # "lib.a:obj.o:0000000000000000 T name" or "lib.a:obj.o:                 U name"
        fields = line.rsplit(":", 1)
        if len(fields) != 2:
            continue
        parts = fields[1].split()
        if len(parts) < 2:
            continue
        obj = fields[0].rsplit(":", 1)[-1]
        kind, name = parts[-2], parts[-1]
        d, u = objs.setdefault(obj, (set(), set()))
        if kind == "U":
            u.add(name)
        elif kind.isupper() and kind not in ("W", "V"):
            d.add(name)
    return objs


def main():
    build, source = sys.argv[1], sys.argv[2]
    deps = cmake_deps(source)
    definer = {}  # symbol -> (lib, obj)
    objects = {}  # (lib, obj) -> undefined
    for lib in sorted(deps):
        folder = lib[len("pathd_"):]
        archive = os.path.join(build, "server", folder, "lib%s.a" % lib)
        if not os.path.isfile(archive):
            print("check_layers: %s is not built" % archive, file=sys.stderr)
            return 2
        for obj, (defined, undefined) in symbols(archive).items():
            objects[(lib, obj)] = undefined
            for s in defined:
                definer[s] = (lib, obj)
    edges = set()
    upward = []
    for (lib, obj), undefined in sorted(objects.items()):
        allowed = closure(deps, lib)
        for s in sorted(undefined):
            if s not in definer:
                continue
            tlib, tobj = definer[s]
            if tlib == lib:
                if tobj != obj:
                    edges.add((lib, obj, tobj))
            elif tlib not in allowed:
                upward.append("%s:%s uses %s from %s:%s (%s does not link %s)" % (lib, obj, s, tlib, tobj, lib, tlib))
    pairs = sorted({(lib,) + tuple(sorted((a, b))) for lib, a, b in edges if (lib, b, a) in edges})
    listed = set()
    list_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "two-way-pairs.txt")
    for line in open(list_path, encoding="utf-8"):
        line = line.split("#")[0].split()
        if len(line) == 3:
            listed.add((line[0], line[1], line[2]))
    new = [p for p in pairs if p not in listed]
    gone = sorted(listed - set(pairs))
    for u in upward:
        print("upward: " + u)
    for p in new:
        print("two-way pair not in two-way-pairs.txt: %s: %s <-> %s" % p)
    for p in gone:
        print("two-way-pairs.txt lists %s: %s <-> %s, which no longer call each other both ways: "
              "take it off the list" % p)
    print("check_layers: %d objects in %d libraries, %d calls between files of one library; "
          "%d upward, %d two-way pairs (%d listed as known), %d new, %d stale"
          % (len(objects), len(deps), len(edges), len(upward), len(pairs), len(listed), len(new), len(gone)))
    return 1 if upward or new or gone else 0


if __name__ == "__main__":
    sys.exit(main())
