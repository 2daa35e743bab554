#!/usr/bin/env bash
# scripts/install-deps.sh waits for a package lock another apt-get holds
# (issue 30 item 4), with fake apt-get and dpkg-query first on PATH, so
# nothing is installed: dpkg-query knows no package, so every one is
# missing; apt-get answers "Could not get lock" as apt does while another
# apt-get runs, until a file says the lock is free.
# - The lock freed after two attempts: the script says it waits, then installs
#   (apt-get install is called once, with DPkg::Lock::Timeout).
# - The lock never freed: it gives up after PATHD_APT_LOCK_TIMEOUT seconds
#   with a message naming it, and exits non-zero.
# - Another failure is not waited for: it fails at once.
set -euo pipefail
top="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin"
cat > "$work/bin/dpkg-query" <<'EOS'
#!/bin/sh
exit 1
EOS
cat > "$work/bin/apt-get" <<'EOS'
#!/bin/sh
echo "apt-get $*" >> "$FAKE_DIR/calls"
if [ -f "$FAKE_DIR/broken" ]; then
  echo "E: Unable to locate package nothing-like-it" >&2
  exit 100
fi
# "held N": the other apt-get lets go after N of our attempts (counted, so
# a slow machine changes nothing).
if [ -f "$FAKE_DIR/held" ] && [ "$(grep -c . "$FAKE_DIR/calls")" -gt "$(cat "$FAKE_DIR/held")" ]; then
  touch "$FAKE_DIR/free"
fi
if [ ! -f "$FAKE_DIR/free" ]; then
  echo "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 4242 (apt-get)" >&2
  exit 100
fi
exit 0
EOS
chmod +x "$work/bin/dpkg-query" "$work/bin/apt-get"
export FAKE_DIR="$work" PATH="$work/bin:$PATH"
fail() { echo "FAIL: $*" >&2; exit 1; }

# 1. Freed after two attempts (4 s of waiting).
echo 2 > "$work/held"
if ! PATHD_APT_LOCK_TIMEOUT=60 "$top/scripts/install-deps.sh" run 2> "$work/err1"; then
  cat "$work/err1" >&2; fail "the script did not wait for the lock to be freed"
fi
rm -f "$work/held"
grep -q "holds the package lock; waiting up to 60 s" "$work/err1" || fail "no waiting message: $(cat "$work/err1")"
[ "$(grep -c '^apt-get .*install' "$work/calls")" -eq 1 ] || fail "install not called once: $(cat "$work/calls")"
grep -q "DPkg::Lock::Timeout=60 install" "$work/calls" || fail "install without DPkg::Lock::Timeout"
[ "$(grep -c ' update' "$work/calls")" -ge 2 ] || fail "update was not retried: $(cat "$work/calls")"
echo "ok - waits for the lock, then installs ($(grep -c ' update' "$work/calls") update attempts)"

# 2. Never freed: gives up after the timeout.
rm -f "$work/free" "$work/calls"
if PATHD_APT_LOCK_TIMEOUT=3 "$top/scripts/install-deps.sh" run 2> "$work/err2"; then
  fail "the script succeeded while the lock was held"
fi
grep -q "still holds the package lock after 3 s (PATHD_APT_LOCK_TIMEOUT); giving up" "$work/err2" ||
  fail "no give-up message: $(cat "$work/err2")"
! grep -q ' install' "$work/calls" || fail "install ran without the update"
echo "ok - gives up after PATHD_APT_LOCK_TIMEOUT"

# 3. Another error fails at once, without waiting.
touch "$work/broken"
rm -f "$work/calls"
if PATHD_APT_LOCK_TIMEOUT=60 "$top/scripts/install-deps.sh" run 2> "$work/err3"; then
  fail "the script succeeded on an apt error"
fi
[ "$(grep -c ' update' "$work/calls")" -eq 1 ] || fail "an error other than the lock was retried"
grep -q "Unable to locate package" "$work/err3" || fail "apt's error was not shown"
echo "ok - other errors fail at once"
echo "apt-lock-wait: 3 passed, 0 failed"
