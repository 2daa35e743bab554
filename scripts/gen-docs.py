#!/usr/bin/env python3
"""Regenerates the command outputs shown in the documents from a live daemon.

    scripts/gen-docs.py [--build DIR] [--check] [DOC.md ...]

A fenced code block right after a line `<!-- gen-docs -->` is a recorded
session: each line that starts with `$ ` is a command, and everything up to
the next command is replaced by what that command prints now (stdout and
stderr through one pipe, as a terminal shows them when piped). Each document
gets a fresh pathd on the demo config (config/default.json) on a loopback
port chosen by the OS, and its blocks run in document order against it, so
an update in one block is seen by the next. Marker options:

    <!-- gen-docs fresh -->   restart the daemon before this block
    <!-- gen-docs daemon -->  the block is `$ pathd ...` and shows the
                              daemon's log up to its "listening on" line

Commands run under bash in a scratch directory (files they write go there)
with `pathctl` meaning this build's pathctl talking to that daemon. What
varies from run to run is normalised so that a document is a pure function
of the tree: log timestamps become YYYY-MM-DDThh:mm:ss.sssZ, the daemon's
ports become the config's 7420 and 9420, and server times in microseconds
(`micros N`, "micros":N) become N.

Without --check the documents are rewritten in place (`make docs`). With
--check nothing is written: a document that differs from what it would
become is shown as a diff and the exit status is 1 (the ctest docs_live).
With no DOC arguments: every document of the tree that holds a marker.
"""

import argparse
import difflib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(TOP, "config", "default.json")
# Documents that hold recorded sessions.
DOCS = ["README.md", "docs/DEMO.md", "client-examples/c/README.md"]
# How long the daemon may take to load the demo scenes, and a command to run.
STARTUP_TIMEOUT_S = 10
COMMAND_TIMEOUT_S = 60
# How long a SIGTERMed daemon may take to drain (shutdown_grace_ms + margin).
STOP_TIMEOUT_S = 10

MARKER = re.compile(r"^<!-- gen-docs(?: (fresh|daemon))? -->$")
FENCE = re.compile(r"^```")
TIMESTAMP = re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z")
MICROS = [(re.compile(r"\bmicros \d+"), "micros N"),
          (re.compile(r'"micros":\d+'), '"micros":N')]


class Daemon:
    """This build's pathd on the demo config, on OS-chosen loopback ports."""

    def __init__(self, pathd):
        self.log = tempfile.TemporaryFile(mode="w+")
        env = {k: v for k, v in os.environ.items() if not k.startswith("PATHD_")}
        self.proc = subprocess.Popen(
            [pathd, "--config", CONFIG, "--listen", "127.0.0.1:0",
             "--metrics-listen", "127.0.0.1:0"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log, env=env)
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        self.addr = None
        while self.addr is None:
            text = self.log_text()
            m = re.search(r"listening on (127\.0\.0\.1:\d+)", text)
            if m:
                self.addr = m.group(1)
                self.startup_log = text[:m.end()].split("\n")
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                sys.exit("gen-docs: pathd did not start:\n" + text)
            time.sleep(0.05)
        m = re.search(r"metrics.* on (?:http://)?(127\.0\.0\.1:\d+)", self.log_text())
        self.metrics_addr = m.group(1) if m else None

    def log_text(self):
        self.log.seek(0)
        return self.log.read()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            sys.exit("gen-docs: pathd did not exit on SIGTERM:\n" + self.log_text())
        if rc != 0:
            sys.exit("gen-docs: pathd exited %d on SIGTERM:\n%s" % (rc, self.log_text()))

    def normalise(self, text):
        text = TIMESTAMP.sub("YYYY-MM-DDThh:mm:ss.sssZ", text)
        text = text.replace(self.addr, "127.0.0.1:7420")
        if self.metrics_addr:
            text = text.replace(self.metrics_addr, "127.0.0.1:9420")
        for pattern, repl in MICROS:
            text = pattern.sub(repl, text)
        return text


def run_command(cmd, daemon, pathctl, workdir):
    """What `cmd` prints against the daemon, normalised, without a final newline."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATHD_")}
    env.update(GEN_PATHCTL=pathctl, GEN_ADDR=daemon.addr, LC_ALL="C")
    script = 'pathctl() { "$GEN_PATHCTL" --server "$GEN_ADDR" "$@"; }\n' + cmd
    out = subprocess.run(["bash", "-c", script], cwd=workdir, env=env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, timeout=COMMAND_TIMEOUT_S)
    return daemon.normalise(out.stdout.decode("utf-8", "replace")).rstrip("\n")


def regenerate_block(lines, option, daemon, pathctl, workdir):
    """The new body of one recorded block (lines between the fences)."""
    commands = [(i, l[2:]) for i, l in enumerate(lines) if l.startswith("$ ")]
    if not commands:
        sys.exit("gen-docs: a marked block holds no `$ ` command:\n" + "\n".join(lines))
    if option == "daemon":
        log = daemon.normalise("\n".join(daemon.startup_log)).split("\n")
        return [lines[commands[0][0]]] + log
    # A blank line between commands in the committed block is kept.
    spaced = any(i > 0 and lines[i - 1] == "" for i, _ in commands[1:])
    body = []
    for n, (i, cmd) in enumerate(commands):
        if n > 0 and spaced:
            body.append("")
        body.append("$ " + cmd)
        out = run_command(cmd, daemon, pathctl, workdir)
        if out:
            body.extend(out.split("\n"))
    return body


def regenerate(text, pathd, pathctl):
    """The document with every marked block replaced by what it shows now."""
    lines = text.split("\n")
    out = []
    daemon = None
    with tempfile.TemporaryDirectory(prefix="gen-docs.") as workdir:
        try:
            i = 0
            while i < len(lines):
                m = MARKER.match(lines[i])
                out.append(lines[i])
                i += 1
                if not m:
                    continue
                if i >= len(lines) or not FENCE.match(lines[i]):
                    sys.exit("gen-docs: line %d: a marker must be followed by a ``` block" % i)
                out.append(lines[i])
                end = i + 1
                while end < len(lines) and not FENCE.match(lines[end]):
                    end += 1
                if end == len(lines):
                    sys.exit("gen-docs: line %d: unterminated ``` block" % (i + 1))
                if daemon is None or m.group(1) == "fresh":
                    if daemon:
                        daemon.stop()
                    daemon = Daemon(pathd)
                out.extend(regenerate_block(lines[i + 1:end], m.group(1), daemon,
                                            pathctl, workdir))
                out.append(lines[end])
                i = end + 1
        finally:
            if daemon:
                daemon.stop()
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(TOP, "build"),
                    help="build tree holding server/pathd and client-examples/c/pathctl")
    ap.add_argument("--check", action="store_true",
                    help="write nothing; show differences and exit 1 if any")
    ap.add_argument("docs", nargs="*")
    args = ap.parse_args()
    pathd = os.path.join(args.build, "server", "pathd")
    pathctl = os.path.abspath(os.path.join(args.build, "client-examples", "c", "pathctl"))
    for binary in (pathd, pathctl):
        if not os.access(binary, os.X_OK):
            sys.exit("gen-docs: %s is not built (make build)" % binary)
    docs = args.docs or [os.path.join(TOP, d) for d in DOCS]

    drifted = 0
    for doc in docs:
        with open(doc, encoding="utf-8") as f:
            old = f.read()
        if not any(MARKER.match(l) for l in old.split("\n")):
            continue
        new = regenerate(old, pathd, pathctl)
        if new == old:
            continue
        if args.check:
            drifted += 1
            sys.stdout.writelines(difflib.unified_diff(
                old.splitlines(True), new.splitlines(True),
                doc + " (committed)", doc + " (from the live daemon now)"))
        else:
            with open(doc, "w", encoding="utf-8") as f:
                f.write(new)
            print("gen-docs: rewrote " + os.path.relpath(doc, TOP))
    if drifted:
        print("gen-docs: %d document(s) differ from what pathd answers now; "
              "regenerate with `make docs` and review the diff" % drifted,
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
