#!/usr/bin/env bash
# The document checks catch drift (tests/docs.cmake): on copies of the
# committed documents, an unchanged copy passes and a copy with one output
# changed, a scene row removed or added, or a file name in ARCHITECTURE.md
# that does not exist, fails and says where.
#
#   drift-test.sh BUILD_DIR PYTHON
set -euo pipefail

build="$1"
python="$2"
top="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/docs-drift.XXXXXX")"
trap 'rm -rf "$work"' EXIT
fail() { echo "drift-test: $*" >&2; exit 1; }

gen() { "$python" "$top/scripts/gen-docs.py" --check --build "$build" "$@"; }
scenes() { "$python" "$top/tests/docs/readme-scenes.py" "$top/config/default.json" "$1"; }

# Recorded outputs: docs/DEMO.md.
cp "$top/docs/DEMO.md" "$work/DEMO.md"
gen "$work/DEMO.md" >"$work/out" 2>&1 || { cat "$work/out" >&2; fail "an unchanged copy of DEMO.md fails the check"; }
# The first path answer's cost, as if the search had changed.
sed -i '0,/^status OK cost [0-9.]*/s//status OK cost 999.99/' "$work/DEMO.md"
cmp -s "$top/docs/DEMO.md" "$work/DEMO.md" && fail "sed changed nothing in the copy"
if gen "$work/DEMO.md" >"$work/out" 2>&1; then
  fail "a DEMO.md whose output was changed passes the check"
fi
grep -q '^-status OK cost 999.99' "$work/out" || { cat "$work/out" >&2; fail "the diff does not show the changed line"; }

# README's scene table.
cp "$top/README.md" "$work/README.md"
scenes "$work/README.md" >/dev/null || fail "an unchanged copy of README.md fails readme-scenes"
grep -v '^| `harbour`' "$work/README.md" >"$work/README-less.md"
if scenes "$work/README-less.md" 2>"$work/out"; then
  fail "a README without the harbour row passes readme-scenes"
fi
grep -q "harbour" "$work/out" || fail "readme-scenes does not name the missing scene"
sed 's/^<!-- \/demo-scenes -->/| `atlantis` | 1x1 | `scenes\/atlantis.txt` | sunk |\n&/' "$top/README.md" >"$work/README-more.md"
if scenes "$work/README-more.md" 2>"$work/out"; then
  fail "a README listing a scene the config lacks passes readme-scenes"
fi
grep -q "atlantis" "$work/out" || fail "readme-scenes does not name the extra scene"

# ARCHITECTURE.md's file names.
arch() { "$python" "$top/tests/docs/arch-files.py" "$top" "$1"; }
arch "$top/docs/ARCHITECTURE.md" || fail "the committed ARCHITECTURE.md fails arch-files"
sed 's/pd_dispatch\.c/pd_dispatcher.c/' "$top/docs/ARCHITECTURE.md" >"$work/ARCH-renamed.md"
if arch "$work/ARCH-renamed.md" 2>"$work/out"; then
  fail "an ARCHITECTURE.md naming a file that does not exist passes arch-files"
fi
grep -q "pd_dispatcher.c" "$work/out" || fail "arch-files does not name the missing file"
echo "drift-test: ok"
