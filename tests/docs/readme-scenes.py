#!/usr/bin/env python3
"""The documents' tables of demo scenes name every scene the demo config serves.

    readme-scenes.py CONFIG.json DOC.md...

In each DOC the table sits between the lines `<!-- demo-scenes -->` and
`<!-- /demo-scenes -->`; each row starts with the scene name in backticks and
names its map file, as the config does (`scenes/...`), in backticks in a
later column. Rows and config scenes must match one to one, in the config's
order. Exit 1, naming each difference, when they do not.
"""

import json
import re
import sys


def readme_rows(path):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    try:
        begin = lines.index("<!-- demo-scenes -->")
        end = lines.index("<!-- /demo-scenes -->")
    except ValueError:
        sys.exit("%s: no <!-- demo-scenes --> ... <!-- /demo-scenes --> table" % path)
    rows = []
    for line in lines[begin + 1:end]:
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        m = re.fullmatch(r"`([^`]+)`", cols[0])
        if not m:
            continue  # the header and its rule
        mp = re.search(r"`([^`]*/[^`]*)`", "|".join(cols[1:]))
        rows.append((m.group(1), mp.group(1) if mp else None))
    return rows


def check(doc, config, scenes):
    """The differences between DOC's table and the config's scenes."""
    rows = readme_rows(doc)
    names = [n for n, _ in rows]
    served = dict(scenes)
    problems = []
    for name, mp in scenes:
        if name not in names:
            problems.append("scene %s (%s) is served but not listed" % (name, mp))
    for name, mp in rows:
        if name not in served:
            problems.append("scene %s is listed but %s does not serve it" % (name, config))
        elif mp != served[name]:
            problems.append("scene %s: listed with map %s, the config loads %s"
                            % (name, mp, served[name]))
    if not problems and names != [n for n, _ in scenes]:
        problems.append("scenes listed in the order %s, the config's is %s"
                        % (", ".join(names), ", ".join(n for n, _ in scenes)))
    return ["%s: %s" % (doc, p) for p in problems]


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: readme-scenes.py CONFIG.json DOC.md...")
    config = sys.argv[1]
    with open(config, encoding="utf-8") as f:
        scenes = [(s["name"], s["map"]) for s in json.load(f)["scenes"]]
    problems = []
    for doc in sys.argv[2:]:
        problems += check(doc, config, scenes)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        return 1
    print("%s list the %d scenes of %s" % (", ".join(sys.argv[2:]), len(scenes), config))
    return 0


if __name__ == "__main__":
    sys.exit(main())
