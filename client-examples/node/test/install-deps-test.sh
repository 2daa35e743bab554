#!/bin/sh
# Tests install-deps.sh against a stub npm, in a scratch copy of the Node
# client's directory (no network, no real node_modules touched): an empty or
# partial node_modules is found incomplete (--check fails) and installed
# again; a complete install is kept; a changed package-lock.json means a new
# install; a failed npm ci leaves no node_modules behind (exit 1, or 0 with
# --soft). Run by ctest as client_node_install (tests/clients.cmake).
set -eu
here="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp "$here/install-deps.sh" "$here/package.json" "$here/package-lock.json" "$work/"
# The stub: `ci` makes node_modules/protobufjs and, unless NPM_FAIL is set,
# its index.js (a failing one leaves the directory half made); `ls` passes
# when index.js is there. Every ci is logged.
cat > "$work/npm" <<'STUB'
#!/bin/sh
case "$1" in
  ci) echo ci >> "$NPM_LOG"
      mkdir -p node_modules/protobufjs
      if [ -n "${NPM_FAIL:-}" ]; then exit 1; fi
      echo 'module.exports = {};' > node_modules/protobufjs/index.js ;;
  ls) [ -f node_modules/protobufjs/index.js ] ;;
  *) exit 2 ;;
esac
STUB
chmod +x "$work/npm"
export PATHD_NPM="$work/npm" NPM_LOG="$work/npm.log"
: > "$NPM_LOG"
deps="$work/install-deps.sh"
installs() { wc -l < "$NPM_LOG" | tr -d ' '; }
fail() { echo "install-deps-test: $*" >&2; exit 1; }

if "$deps" --check 2>/dev/null; then fail "--check passed with no node_modules"; fi
mkdir "$work/node_modules"
if "$deps" --check 2>/dev/null; then fail "--check passed with an empty node_modules"; fi
"$deps" 2>/dev/null || fail "install from an empty node_modules failed"
[ "$(installs)" = 1 ] || fail "expected 1 npm ci, saw $(installs)"
"$deps" --check || fail "--check failed after an install"
"$deps" 2>/dev/null
[ "$(installs)" = 1 ] || fail "a complete install was installed again"

rm "$work/node_modules/protobufjs/index.js"
if "$deps" --check 2>/dev/null; then fail "--check passed with a partial node_modules"; fi
"$deps" 2>/dev/null
[ "$(installs)" = 2 ] || fail "a partial node_modules was not installed again"
"$deps" --check || fail "--check failed after reinstalling"

echo ' ' >> "$work/package-lock.json"
if "$deps" --check 2>/dev/null; then fail "--check passed after package-lock.json changed"; fi
"$deps" 2>/dev/null
[ "$(installs)" = 3 ] || fail "a changed package-lock.json was not installed again"

rm -rf "$work/node_modules"
if NPM_FAIL=1 "$deps" 2>/dev/null; then fail "a failing npm ci passed"; fi
[ ! -e "$work/node_modules" ] || fail "a failed npm ci left node_modules behind"
NPM_FAIL=1 "$deps" --soft 2>/dev/null || fail "--soft failed the build"
[ ! -e "$work/node_modules" ] || fail "a failed npm ci (--soft) left node_modules behind"
echo "install-deps-test: ok ($(installs) stub installs)"
