"""A small Python client for the pathd pathfinding daemon, blocking and asyncio.

Example code meant to be copied into a game server. It needs only the
standard library and Debian's python3-protobuf, plus pathd_pb2.py, which
protoc generates from proto/pathd.proto (`protoc -Iproto --python_out=DIR
proto/pathd.proto`; the pathd build does it into
build/client-examples/python/gen). Debian's python3-protobuf installs for the
system interpreter, so run it with /usr/bin/python3 (a pyenv or venv python
does not see it).

Wire format (docs/PROTOCOL.md): every message is a 4-byte big-endian length
followed by one protobuf message. The client sends pathd.v1.Request, the
server answers with pathd.v1.Response frames carrying the request's id. A
path arrives as one or more PathChunk frames, a route as RouteLeg frames and
a final RouteResult; every other answer is one frame. Answers to different
requests may arrive in any order and are matched by id.

Two clients with the same methods:
  - PathdClient: blocking calls, safe to share between threads. Each
    connection has one reader thread that decodes every answer and hands it
    to the request with that id (a lock guards the table of requests and a
    second one keeps each frame whole on the socket), so calls from many
    threads are in flight together on one socket.
  - AsyncPathdClient: the same calls as coroutines, on asyncio streams; one
    reader task per connection, so concurrent calls (asyncio.gather) share
    one socket the same way.

Every call sends a request and waits for its answer; OVERLOADED is retried
with exponential backoff plus up to half of each pause at random, at most
retry_attempts times in all and within retry_deadline seconds. The send_*
forms and send(name, ...) send without waiting and return the id; recv()
hands back answers in completion order, whatever their id, of any status
(OVERLOADED too, not retried).

Flow control (flow_control=True, the default): on connect the client reads
GetLimits and then keeps at most the connection's max_inflight_per_conn
slots outstanding, counting each Batch item as one slot as the server does,
the way HTTP/2 clients respect MAX_CONCURRENT_STREAMS. What is beyond waits
in a local queue, in order (at most max_queued; PathdQueueFull past it),
and goes out as answers free slots. So the server never refuses this client
OVERLOADED for its own excess; OVERLOADED then means the server as a whole
is busy (its shared job queue). batch() sizes its frames from
Limits.max_batch_items and the cap (pathd refuses a Batch of more items
than max_inflight_per_conn). PathdPool / AsyncPathdPool spread blocking
calls over N connections. GetLimits (and Auth, sent just before it, ahead
of any other request) has no timeout of its own: connect() waits for their
answers up to the timeout and then goes on; an answer later than that
still takes effect when it arrives (the cap and batch size, the role), and
until GetLimits answers the counted requests wait in the queue, each within
its own timeout, and batch() waits for it before it frames the items
(batch()'s timeout bounds the whole call: that wait, every frame's answer
and any retry). (A late answer dropped with its timed-out request left a
loaded machine's connections at the default cap of 64, whatever the
server's was.) Auth or GetLimits answered DRAINING (or another retryable
status) on a new connection: the client connects again after the
reconnect backoff, as when it is lost.

Watching: watch(scenes) subscribes to the scenes' changes and returns the
watch's id; watch_next() hands back each event in order (the dict pathctl
watch --json prints), unwatch(id) ends it. find_path, scene_info and the
queries take min_version: an older scene answers STALE_VERSION (the
PathdError's .result holds the version it is at).

Results:
  - find_path: a PathResult (attributes; to_dict() is pathctl path --json).
  - Every answer (PathResult, or Answer dict) has .timing, a Timing of the
    server's own times for it (docs/PROTOCOL.md, "Timing"): server_us, from
    the server's read of the request to its answer handed to the socket
    (always less than the round trip the client sees), and search_us, the
    part spent in the search (0 when nothing was searched). The client's
    last_timing is the Timing of the answer its last call took, for calls
    that return something else (ping's round trip, batch's list).
  - Everything else answers plain dicts (an Answer, a dict with .id) shaped
    like pathctl's --json output: status, version and the fields of the kind
    (raycast: clear, hit, last_free, last_free_world; validate_move: valid,
    first_invalid, reason, last_valid[, last_valid_world]; move_along: end,
    end_world, slid; nearest_walkable: cell, distance; is_reachable:
    reachable; random_point: cell, seed, candidates; distance_to_wall:
    distance, wall). Cells are [x, y] lists, absent ones None.
  - batch(items): a list of such dicts, one per item in order, each with its
    own status (an item that failed is {"status": ..., "message": ...}).

Errors: a call returns for OK (and PARTIAL for paths and routes) and raises
PathdError (its .status is the wire status name, e.g. "NO_PATH"; .result the
answer) for any other answer. A request that got no answer raises a
subclass: PathdDisconnected (connection lost and the request not safe to
send again, or no server within the deadline; see "Replicas"), PathdTimeout
or PathdProtocolError (the server broke the protocol; the connection is
closed, as the server does). The next call reconnects to the same address by itself.
close() is for good: after it every call raises PathdClosed (status
"CLOSED") and sends nothing, as Go's client returns ErrClosed.

Replicas (several pathd behind HAProxy; docs/PROTOCOL.md, "Clients and
replicas"): the blocking calls (and their coroutine forms) ride out a
replica that dies, restarts or drains, within retry_deadline seconds from
the first send:
  - reconnect=True (default): a call that finds no connection, or loses
    its connection with its answer owed, connects again, pausing between
    attempts from RECONNECT_BACKOFF_FIRST_S doubling to
    RECONNECT_BACKOFF_MAX_S, each pause half fixed and half random. The
    pause belongs to the client, not to each call: after a failed, lost or
    refused connection no call connects before it ends, so however many calls
    wait, one connection is tried per pause (it starts over once a call is
    served). Then a call sends its request again if that is safe: a query always, an update
    (update_cells, create_scene, create_instance, drop_scene) only when it
    carries an idempotency_key. Reservations made or released, watches,
    cancels and reloads are never sent twice: they raise PathdDisconnected.
    reconnect=False gives the old behaviour (fail, reconnect on the next call).
  - idempotency_keys=True (default): every update carries a fresh key (128
    random bits in hex) unless the caller gives its own
    (idempotency_key="...", 1..64 printable ASCII characters), so the change
    log applies it once however often it is sent. False sends no key, and
    such an update is never sent again.
  - BEHIND (STALE_VERSION: the replica has not reached min_version yet) and
    UNAVAILABLE (the change log cannot be reached; nothing changed) are
    retried after jittered pauses as OVERLOADED is (retry_attempts in all,
    within retry_deadline), with the same idempotency key; client.retries
    counts them by status.
  - DRAINING, sent by a replica about to stop (unsolicited, id 0, or as the
    answer to a request): the client sends nothing more on that connection,
    opens a new one for the next request (HAProxy picks another replica;
    at once when requests wait in the queue behind the cap, which go
    there), sends a refused request again there at once, and closes the
    old one when every answer owed on it (pipelined requests included)
    has arrived.
  - max_connection_age=MAX_CONNECTION_AGE_S (600 s; 0 or None: never): a
    connection older than that is replaced the same way at the next call,
    since HAProxy never moves a long-lived connection back to a replica
    that restarted.
  - Watches are not re-established: when their connection is lost or
    replaced, watch_next() hands back a last event {"status":
    "DISCONNECTED" or "DRAINING", "watch": id, "message", "final": True};
    watch again (after reading scene_info for the version) to go on.
  - Pipelined requests (send/recv) are not sent again: a lost connection
    fails them with PathdDisconnected; after DRAINING their answers still
    arrive on the old connection.
  client.reconnects and client.resent count connections opened after the
  first and requests sent again after a lost connection.
"""

import asyncio
import itertools
import random
import secrets
import socket
import struct
import threading
import time
from collections import deque, namedtuple

from google.protobuf.message import DecodeError

import pathd_pb2 as pb

DEFAULT_SERVER = "127.0.0.1:7420"
# Per-call timeout in seconds (connect, each blocking call, each send).
DEFAULT_TIMEOUT_S = 5.0
# Largest incoming frame accepted, in bytes. A path chunk is ~10 KiB and a
# grid band ~512 KiB, so this only protects the client's memory from a
# broken or hostile peer.
MAX_FRAME_BYTES = 16 * 1024 * 1024
# Most waypoints assembled for one path or route: more than any sane grid
# path, and a bound on what a misbehaving server can make us hold.
MAX_PATH_WAYPOINTS = 4 * 1024 * 1024
# Blocking calls: total attempts when the server answers OVERLOADED, and the
# backoff between them in seconds, doubling from FIRST up to MAX. Five
# attempts wait at most 20+40+80+160 ms, short enough to stay interactive.
RETRY_ATTEMPTS = 5
RETRY_BACKOFF_FIRST_S = 0.020
RETRY_BACKOFF_MAX_S = 1.0
# Flow control (see the module's notes): the per-connection in-flight cap
# assumed until GetLimits answers (the server's default
# max_inflight_per_conn), and how many requests a connection holds back
# locally beyond the cap before refusing more with PathdQueueFull. A queued
# request is a few hundred bytes, so the default bounds the client at a few
# MiB however fast the game calls.
DEFAULT_INFLIGHT_CAP = 64
DEFAULT_MAX_QUEUED = 4096
# Most items in one Batch (the server's PD_BATCH_MAX_ITEMS).
MAX_BATCH_ITEMS = 256
# FindPath: range cap (cells) and most goals; FindPath items per batch and
# the waypoints each may carry (the server's limits, docs/PROTOCOL.md).
MAX_RANGE = 128.0
MAX_GOALS = 64
MAX_BATCH_PATHS = 32
MAX_BATCH_PATH_WAYPOINTS = 512
# scene_grid: times it starts over when the scene changes between bands.
SCENE_GRID_RESTARTS = 8
# Replicas (see "Replicas" in the module's notes). Reconnecting: the pause
# before each new attempt doubles from FIRST up to MAX, each pause half
# fixed and half random ("equal jitter"), so clients that lost the same
# replica do not all come back in the same instant; no pause starts past
# the call's retry deadline.
RECONNECT_BACKOFF_FIRST_S = 0.050
RECONNECT_BACKOFF_MAX_S = 2.0
# A connection older than this is replaced (gracefully, as on DRAINING):
# HAProxy never moves a long-lived connection back to a restarted replica.
# 0 or None: never.
MAX_CONNECTION_AGE_S = 600.0
# Answers a blocking call sends again after a jittered pause (OVERLOADED,
# BEHIND = STALE_VERSION, UNAVAILABLE) or at once on a new connection
# (DRAINING), within the retry deadline.
_RETRYABLE = frozenset(["OVERLOADED", "STALE_VERSION", "UNAVAILABLE", "DRAINING"])
# Requests that change nothing, so sending one again after a lost
# connection is always safe. Updates (_KEYED) are safe when they carry an
# idempotency_key; the rest (reservations made or released, watches,
# cancels, reloads) are never sent twice.
_READ_ONLY = frozenset(["find_path", "list_scenes", "scene_info", "stats", "ping", "find_route",
                      "scene_grid", "auth", "raycast", "validate_move", "move_along", "nearest",
                      "reachable", "random_point", "distance_to_wall", "batch", "limits",
                      "reservations"])
_KEYED = frozenset(["update_cells", "create_scene", "create_instance", "drop_scene"])
# The longest idempotency_key the server takes (printable ASCII).
MAX_IDEMPOTENCY_KEY = 64

_HEADER = struct.Struct(">I")
# Bytes asked of the socket per recv(): a few typical path chunks.
_RECV_BYTES = 64 * 1024
_STYLES = {"cells": pb.STYLE_CELLS, "corners": pb.STYLE_CORNERS, "smooth": pb.STYLE_SMOOTH}
_GOAL_MODES = {"exact": pb.GOAL_EXACT, "nearest": pb.GOAL_NEAREST, "line": pb.GOAL_LINE}
_UPDATE_OPS = {"block": pb.UPDATE_BLOCK, "pass": pb.UPDATE_PASS, "cost": pb.UPDATE_COST,
               "restore": pb.UPDATE_RESTORE}
_CONNECTIVITY = {0: pb.CONNECTIVITY_DEFAULT, 8: pb.CONNECTIVITY_8, 4: pb.CONNECTIVITY_4}
# Symbols of the config's ASCII map format (pathctl grid): cost byte -> char.
_GRID_SYMBOLS = "#." + "".join(str(c) for c in range(2, 10)) + "+" * 246

SceneSummary = namedtuple("SceneSummary", "name width height version")
# An answer's Response.server_us and search_us, in microseconds (0 when the
# server did not send them).
Timing = namedtuple("Timing", "server_us search_us")
_NO_TIMING = Timing(0, 0)
SceneInfo = namedtuple(
    "SceneInfo",
    "name width height origin_x origin_y cell_size unit_sizes version passable_cells")


class PathdError(Exception):
    """An answer a call does not accept, or a request that got no answer.

    status is the wire status name ("UNKNOWN_SCENE", "OVERLOADED", ...) or,
    for the subclasses, "DISCONNECTED", "TIMEOUT" or "PROTOCOL_ERROR".
    request_id is the request's id when there was one; result is the answer
    (PathResult or dict) when one came, else None.
    """

    def __init__(self, status, message="", request_id=None, result=None):
        super().__init__("%s: %s" % (status, message) if message else status)
        self.status = status
        self.message = message
        self.request_id = request_id
        self.result = result


class PathdDisconnected(PathdError):
    """The connection was lost (or could not be made); the request is unanswered."""

    def __init__(self, message="", request_id=None):
        super().__init__("DISCONNECTED", message, request_id)


class PathdTimeout(PathdError):
    """No answer within the timeout. The request is forgotten; a late answer is ignored."""

    def __init__(self, message="", request_id=None):
        super().__init__("TIMEOUT", message, request_id)


class PathdProtocolError(PathdError):
    """The server sent something that breaks the protocol; the connection was closed."""

    def __init__(self, message="", request_id=None):
        super().__init__("PROTOCOL_ERROR", message, request_id)


class PathdClosed(PathdError):
    """close() was called: a closed client stays closed (as Go's ErrClosed),
    and a call on it sends nothing. Make a new client to talk again."""

    def __init__(self, message="client is closed (close() was called); make a new client", request_id=None):
        super().__init__("CLOSED", message, request_id)


class PathdQueueFull(PathdError):
    """The connection already holds max_queued requests back, waiting for
    the server's in-flight cap: nothing was sent or queued. Slow down, raise
    max_queued, or spread the load over a PathdPool."""

    def __init__(self, message="", request_id=None):
        super().__init__("QUEUE_FULL", message, request_id)


class _Violation(Exception):
    """Raised inside the reader when the server breaks the protocol."""


class Answer(dict):
    """A plain dict answer (the keys of pathctl --json) that also knows its
    request's id, for answers collected with recv(), and its .timing (not a
    key, so it compares equal to pathctl's output)."""

    def __init__(self, request_id, fields):
        super().__init__(fields)
        self.id = request_id
        self.timing = _NO_TIMING


class PathResult:
    """One answered path request.

    waypoints are cells [(x, y)], world the centres of those cells in world
    coordinates [(wx, wy)] (None unless the request had want_world: the
    server sends them only when asked, and SceneInfo's origin and cell size
    give them too), times the arrival times (None unless speed > 0);
    version is the scene version the search ran on; start_used / goal_used
    the cells the path really starts / ends at when snapped or substituted
    (else None); cutoff "BUDGET_EXCEEDED" / "DEADLINE_EXCEEDED" behind a
    PARTIAL from partial_on_cutoff (else None); goal_index the index of the
    goal reached when the request gave goals (else None); timing the
    server's Timing of the answer (see the module's notes; zeros in a batch
    item, whose batch is timed whole).
    """

    __slots__ = ("id", "status", "cost", "expansions", "search_micros", "version",
                 "waypoints", "world", "times", "start_used", "goal_used", "cutoff", "message",
                 "goal_index", "timing")

    def __init__(self, request_id, status="OK", message="", timed=False):
        self.id = request_id
        self.status = status
        self.message = message
        self.cost = 0.0
        self.expansions = 0
        self.search_micros = 0
        self.version = 0
        self.waypoints = []
        self.world = None
        self.times = [] if timed else None
        self.start_used = None
        self.goal_used = None
        self.cutoff = None
        self.goal_index = None
        self.timing = _NO_TIMING

    @property
    def ok(self):
        """True for OK and PARTIAL: the waypoints are usable."""
        return self.status in ("OK", "PARTIAL")

    def to_dict(self):
        """The object pathctl path --json prints for this answer."""
        d = {"status": self.status, "cost": self.cost, "expansions": self.expansions,
             "micros": self.search_micros, "version": self.version}
        if self.message:
            d["message"] = self.message
        d.update(start_used=_pair(self.start_used), goal_used=_pair(self.goal_used),
                 cutoff=self.cutoff, goal_index=self.goal_index,
                 waypoints=[list(w) for w in self.waypoints],
                 world=None if self.world is None else [list(w) for w in self.world], times=self.times)
        return d

    def __repr__(self):
        return "PathResult(id=%d, status=%s, cost=%g, expansions=%d, version=%d, waypoints=%d)" % (
            self.id, self.status, self.cost, self.expansions, self.version, len(self.waypoints))


def _pair(xy):
    return None if xy is None else list(xy)


def _status_name(number):
    try:
        return pb.Status.Name(number)
    except ValueError:
        return "UNKNOWN_STATUS_%d" % number


def _reason_name(number):
    try:
        return pb.MoveReason.Name(number)[len("MOVE_"):].lower()
    except ValueError:
        return "unknown"


def _parse_addr(addr):
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError("address must be HOST:PORT or [V6ADDR]:PORT, got %r" % addr)
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


def _point(msg, point, world):
    if len(point) != 2:
        raise ValueError("a point is a pair (x, y), got %r" % (point,))
    if world:
        msg.world.x, msg.world.y = float(point[0]), float(point[1])
    else:
        msg.cell.x, msg.cell.y = int(point[0]), int(point[1])


def _cell(msg, xy):
    if len(xy) != 2:
        raise ValueError("a cell is a pair (x, y), got %r" % (xy,))
    msg.x, msg.y = int(xy[0]), int(xy[1])


def _check_scene(scene, name="scene"):
    if not isinstance(scene, str) or not scene:
        raise ValueError("%s must be a non-empty string" % name)


def _choice(table, value, what):
    if value not in table:
        raise ValueError("%s must be one of %s, got %r" % (what, ", ".join(map(str, table)), value))
    return table[value]


def _xy(msg, field):
    """[x, y] of a Cell field, or None when absent (as pathctl prints)."""
    if not msg.HasField(field):
        return None
    c = getattr(msg, field)
    return [c.x, c.y]


def _wxy(w):
    return [w.x, w.y]


# ---- what each request kind sends, and how its answer is read ---------------
#
# An _Op is one call: the request to send, how its frames are assembled
# ("path", "route" or "single"), finish(pending) -> the answer (PathResult or
# Answer, with its status), the statuses a blocking call accepts, and value()
# turning the accepted answer into what the call returns.

_Op = namedtuple("_Op", "request assemble finish accept value")
_OK = ("OK",)
_OK_PARTIAL = ("OK", "PARTIAL")


def _same(answer):
    return answer


def _op(request, finish, accept=_OK, value=_same, assemble="single"):
    return _Op(request, assemble, finish, accept, value)


# Request bodies the server counts against max_inflight_per_conn (one slot
# each; a Batch takes one per item): the ones it hands to a worker. The
# others (Ping, GetLimits, Watch, Cancel...) are answered on its event loop
# and take none (server/net/pd_dispatch.c, pd__inflight_ok).
_COUNTED = frozenset(["find_path", "find_route", "update_cells", "create_scene", "create_instance",
                      "drop_scene", "raycast", "validate_move", "move_along", "nearest", "reachable",
                      "random_point", "distance_to_wall", "reserve_path", "release_agent",
                      "reservations"])


def _resendable(request):
    """Whether request may be sent again after its connection was lost
    with its answer owed: a query, or an update carrying an idempotency_key."""
    body = request.WhichOneof("body")
    return body in _READ_ONLY or (body in _KEYED and bool(getattr(request, body).idempotency_key))


def _until(deadline, until):
    """deadline, or the earlier until (a call's own deadline) when given."""
    return deadline if until is None else min(deadline, until)


def _bounded(seconds, until):
    """A wait of seconds, cut to what is left before until (when given;
    never 0, which a socket would take as non-blocking)."""
    return seconds if until is None else max(0.001, min(seconds, until - time.monotonic()))


def _new_key():
    """A fresh idempotency key: 128 random bits in hex."""
    return secrets.token_hex(16)


def _weight(request):
    """The in-flight slots request takes on the server."""
    body = request.WhichOneof("body")
    if body == "batch":
        return len(request.batch.items)
    return 1 if body in _COUNTED else 0


def _message(response):
    """Why the answer is not OK: Response.message on a path or route that
    was searched for and not found (NO_PATH, a blocked end...), or
    Error.message on a refusal."""
    if response.message:
        return response.message
    return response.error.message if response.WhichOneof("body") == "error" else ""


def _error_answer(p, response):
    d = {"status": _status_name(response.status)}
    message = _message(response)
    if message:
        d["message"] = message
    if response.status == pb.STALE_VERSION:
        d["version"] = response.error.version   # the version the scene is at
    return Answer(p.id, d)


def _single(body, fields):
    """finish for a one-frame answer: fields(message) -> dict, for OK with that body."""
    def finish(p):
        response = p.response
        if response.status != pb.OK:
            return _error_answer(p, response)
        d = {"status": "OK"}
        if body is not None:
            if response.WhichOneof("body") != body:
                raise _Violation("answer to request %d has the wrong body" % p.id)
            d.update(fields(getattr(response, body)))
        return Answer(p.id, d)
    return finish


def _find_path_op(scene, start, goal, **options):
    request = pb.Request()
    _find_path_fill(request.find_path, scene, start, goal, **options)
    timed = request.find_path.speed > 0
    goals = len(request.find_path.goals) > 0
    want_world = request.find_path.want_world
    return _Op(request, "path", lambda p: p.finish_path(timed, goals, want_world), _OK_PARTIAL, _same)


def _find_path_fill(fp, scene, start, goal, world=False, unit_size=0, connectivity=0, style="cells",
                    goal_mode="exact", snap=False, partial_on_cutoff=False, speed=0.0, start_time=0.0,
                    avoid=(), window=None, max_expansions=0, deadline_ms=0, range=0.0,
                    line_of_sight=False, goals=(), want_world=False, min_version=0, avoid_reserved=False):
    """Fills a FindPath message (alone or as a batch item): goal, or goals
    [(x, y)] with goal None; range in cells and line_of_sight; want_world
    asks for the waypoints' world coordinates; min_version refuses a scene
    older than it (STALE_VERSION, with the version it is at);
    avoid_reserved plans around the scene's reservations (needs speed > 0;
    start_time in seconds is the game time)."""
    _check_scene(scene)
    goals = list(goals)
    if (goal is None) == (not goals):
        raise ValueError("give either goal or goals (1..%d points)" % MAX_GOALS)
    if len(goals) > MAX_GOALS:
        raise ValueError("at most %d goals, got %d" % (MAX_GOALS, len(goals)))
    if not 0 <= range <= MAX_RANGE:
        raise ValueError("range must lie in 0..%g cells, got %r" % (MAX_RANGE, range))
    if line_of_sight and not range > 0:
        raise ValueError("line_of_sight needs range > 0")
    fp.scene = scene
    _point(fp.start, start, world)
    if goal is not None:
        _point(fp.goal, goal, world)
    for g in goals:
        _point(fp.goals.add(), g, world)
    fp.range = float(range)
    fp.line_of_sight = bool(line_of_sight)
    fp.unit_size = unit_size
    fp.connectivity = _choice(_CONNECTIVITY, connectivity, "connectivity")
    fp.style = _choice(_STYLES, style, "style")
    fp.goal_mode = _choice(_GOAL_MODES, goal_mode, "goal_mode")
    fp.snap = bool(snap)
    fp.partial_on_cutoff = bool(partial_on_cutoff)
    fp.speed = float(speed)
    fp.start_time = float(start_time)
    for xy in avoid:
        _cell(fp.avoid.add(), xy)
    if window is not None:
        (lo, hi) = window
        _cell(fp.window.min, lo)
        _cell(fp.window.max, hi)
    fp.max_expansions = max_expansions
    fp.deadline_ms = deadline_ms
    fp.want_world = bool(want_world)
    fp.min_version = min_version
    fp.avoid_reserved = bool(avoid_reserved)


def _find_route_op(from_scene, start, to_scene, goal, world=False, unit_size=0, style="cells",
                   goal_mode="exact", speed=0.0, start_time=0.0, max_expansions=0, deadline_ms=0,
                   want_world=False):
    _check_scene(from_scene, "from_scene")
    _check_scene(to_scene, "to_scene")
    request = pb.Request()
    fr = request.find_route
    fr.from_scene, fr.to_scene = from_scene, to_scene
    _point(fr.start, start, world)
    _point(fr.goal, goal, world)
    fr.unit_size = unit_size
    fr.style = _choice(_STYLES, style, "style")
    fr.goal_mode = _choice(_GOAL_MODES, goal_mode, "goal_mode")
    fr.speed = float(speed)
    fr.start_time = float(start_time)
    fr.max_expansions = max_expansions
    fr.deadline_ms = deadline_ms
    fr.want_world = bool(want_world)
    timed = fr.speed > 0
    return _Op(request, "route", lambda p: p.finish_route(timed, fr.want_world), _OK_PARTIAL, _same)


def _update_cells_op(scene, rect=None, cells=None, op="block", cost=0, at_ms=None):
    _check_scene(scene)
    if (rect is None) == (cells is None):
        raise ValueError("give exactly one of rect ((x0, y0), (x1, y1)) and cells [(x, y), ...]")
    request = pb.Request()
    u = request.update_cells
    u.scene = scene
    if rect is not None:
        _cell(u.rect.min, rect[0])
        _cell(u.rect.max, rect[1])
    else:
        u.cells.SetInParent()
        for xy in cells:
            _cell(u.cells.cells.add(), xy)
    u.op = _choice(_UPDATE_OPS, op, "op")
    u.cost = cost
    if at_ms is not None:
        u.at_ms = int(at_ms)
    return _op(request, _single("update", lambda m: {
        "version": m.version, "cells_changed": m.cells_changed, "micros": m.micros,
        "agents_cut": list(m.agents_cut)}))


# ---- reservations (docs/PROTOCOL.md, "Reservations") -------------------------

_AT_GOAL = {"park": pb.AT_GOAL_PARK, "vanish": pb.AT_GOAL_VANISH}


def _ms(t):
    """A wire time: -1 means no end (None here)."""
    return None if t == -1 else t


def _timed_waypoints(ws):
    return [{"x": w.x, "y": w.y, "t_arrive_ms": w.t_arrive_ms, "t_leave_ms": _ms(w.t_leave_ms)} for w in ws]


def _reserve_fields(m):
    d = {"agent": m.agent,
         "waypoints": _timed_waypoints(m.waypoints),
         "reserved_until_ms": _ms(m.reserved_until_ms), "cost": m.cost, "expansions": m.expansions,
         "search_micros": m.search_micros, "scene_version": m.scene_version, "was_cut": m.was_cut,
         # Agents moved out of the way (yield_after_ms): each plan replaces
         # that agent's from its t0_ms on; the game must apply them.
         "displaced": [{"agent": x.agent, "t0_ms": x.t0_ms, "reserved_until_ms": _ms(x.reserved_until_ms),
                        "waypoints": _timed_waypoints(x.waypoints)} for x in m.displaced]}
    if m.has_blocking_agent:
        d["blocking_agent"] = m.blocking_agent
    return d


def _reserve_path_op(scene, agent, start, goal, t0_ms, speed, unit_size=0, window_ms=None, at_goal="park",
                     connectivity=0, max_expansions=0, deadline_ms=0, min_version=0, goals=(), range=0.0,
                     yield_after_ms=0):
    _check_scene(scene)
    request = pb.Request()
    r = request.reserve_path
    r.scene, r.agent, r.unit_size = scene, int(agent), int(unit_size)
    _cell(r.start.cell, start)
    # goal None with goals: FindPath's goal set (the server checks the
    # counts and range, and refuses both given).
    if goal is not None:
        _cell(r.goal.cell, goal)
    for g in goals:
        _cell(r.goals.add().cell, g)
    r.range = float(range)
    r.t0_ms, r.speed = int(t0_ms), float(speed)
    if window_ms is not None:
        r.window_ms = int(window_ms)
    r.at_goal = _choice(_AT_GOAL, at_goal, "at_goal")
    r.connectivity = {0: pb.CONNECTIVITY_DEFAULT, 8: pb.CONNECTIVITY_8, 4: pb.CONNECTIVITY_4}.get(
        connectivity, connectivity)
    r.max_expansions, r.deadline_ms, r.min_version = max_expansions, deadline_ms, min_version
    r.yield_after_ms = int(yield_after_ms)

    def finish(p):
        response = p.response
        if response.WhichOneof("body") != "reserve_path":
            return _error_answer(p, response)
        d = {"status": _status_name(response.status)}
        if response.message:
            d["message"] = response.message
        d.update(_reserve_fields(response.reserve_path))
        return Answer(p.id, d)
    return _op(request, finish, accept=_OK_PARTIAL)


def _release_agent_op(scene, agent, release_all=False):
    _check_scene(scene)
    request = pb.Request()
    request.release_agent.scene, request.release_agent.agent = scene, int(agent)
    request.release_agent.all = release_all
    return _op(request, _single("release", lambda m: {"released": m.released,
                                                       "agents_released": m.agents_released}))


def _reservations_op(scene, rect=None, from_ms=0, to_ms=0, max_entries=0):
    _check_scene(scene)
    request = pb.Request()
    g = request.reservations
    g.scene = scene
    if rect is not None:
        _cell(g.rect.min, rect[0])
        _cell(g.rect.max, rect[1])
    g.from_ms, g.to_ms, g.max_entries = int(from_ms), int(to_ms), int(max_entries)
    return _op(request, _single("reservations", lambda m: {
        "entries": [{"agent": e.agent, "x": e.x, "y": e.y, "width": e.width, "height": e.height,
                     "t0_ms": e.t0_ms, "t1_ms": _ms(e.t1_ms)} for e in m.entries],
        "matching": m.matching, "agents": m.agents, "table_entries": m.table_entries,
        "table_bytes": m.table_bytes}))


def _scene_change_fields(m):
    return {"version": m.version, "own_bytes": m.own_bytes, "scene_bytes": m.scene_bytes}


def _create_scene_op(name, map_bytes=None, format=None, cells=None, width=0, height=0,
                     origin=(0.0, 0.0), cell_size=0.0, unit_sizes=()):
    _check_scene(name)
    if (map_bytes is None) == (cells is None):
        raise ValueError("give exactly one of map_bytes (with format) and cells (with width, height)")
    request = pb.Request()
    c = request.create_scene
    c.name = name
    if map_bytes is not None:
        c.map = bytes(map_bytes)
        c.format = format or ""
    else:
        c.cells, c.width, c.height = bytes(cells), width, height
    c.origin_x, c.origin_y = origin
    c.cell_size = cell_size
    c.unit_sizes.extend(unit_sizes)
    return _op(request, _single("scene_change", _scene_change_fields))


def _create_instance_op(name, template):
    _check_scene(name)
    _check_scene(template)
    request = pb.Request()
    request.create_instance.name = name
    setattr(request.create_instance, "template", template)
    return _op(request, _single("scene_change", _scene_change_fields))


def _drop_scene_op(name, drop_portals=False):
    _check_scene(name)
    request = pb.Request()
    request.drop_scene.name = name
    request.drop_scene.drop_portals = drop_portals
    return _op(request, _single("scene_change", _scene_change_fields))


def _scene_grid_op(scene, unit_size=0, row_start=0, row_count=0):
    _check_scene(scene)
    request = pb.Request()
    g = request.scene_grid
    g.scene, g.unit_size, g.row_start, g.row_count = scene, unit_size, row_start, row_count

    def fields(m):
        if len(m.cells) != m.row_count * m.width or m.row_count < 1:
            raise _Violation("grid band of %d rows x %d holds %d bytes" % (m.row_count, m.width, len(m.cells)))
        return {"version": m.version, "width": m.width, "height": m.height,
                "row_start": m.row_start, "row_count": m.row_count, "cells": m.cells}
    return _op(request, _single("scene_grid", fields))


# The movement queries: (request field, builder of the message, answer fields).
def _segment(m, frm, to, world=False, unit_size=0):
    """Raycast and IsReachable: from and to."""
    m.unit_size = unit_size
    _point(getattr(m, "from"), frm, world)
    _point(m.to, to, world)


def _validate_move(m, moves, max_speed, tolerance=0.0, world=False, unit_size=0):
    m.unit_size = unit_size
    for move in moves:
        if len(move) != 3:
            raise ValueError("a move is (x, y, t), got %r" % (move,))
        tp = m.moves.add()
        _point(tp.point, move[:2], world)
        tp.t = float(move[2])
    m.max_speed = float(max_speed)
    m.tolerance = float(tolerance)


def _move_along(m, frm, delta, world=False, unit_size=0):
    if len(delta) != 2:
        raise ValueError("a move's delta is a pair (dx, dy), got %r" % (delta,))
    m.unit_size = unit_size
    _point(getattr(m, "from"), frm, world)
    m.dx, m.dy = float(delta[0]), float(delta[1])


def _nearest(m, at, radius, reachable_from=None, world=False, unit_size=0):
    m.unit_size = unit_size
    _point(m.at, at, world)
    m.radius = radius
    if reachable_from is not None:
        _point(m.reachable_from, reachable_from, world)


def _random_point(m, around, radius, seed=0, world=False, unit_size=0):
    m.unit_size = unit_size
    _point(m.around, around, world)
    m.radius = float(radius)
    m.seed = seed


def _distance_to_wall(m, at, max_distance=0, world=False, unit_size=0):
    m.unit_size = unit_size
    _point(m.at, at, world)
    m.max_distance = max_distance


def _validate_fields(m):
    d = {"valid": m.valid, "first_invalid": None if m.first_invalid < 0 else m.first_invalid,
         "reason": _reason_name(m.reason), "last_valid": _xy(m, "last_valid")}
    if m.HasField("last_valid"):
        d["last_valid_world"] = _wxy(m.last_valid_world)
    return d


_QUERIES = {
    "raycast": ("raycast", _segment, lambda m: {
        "clear": m.clear, "hit": _xy(m, "hit"), "last_free": _xy(m, "last_free"),
        "last_free_world": _wxy(m.last_free_world)}),
    "validate_move": ("validate_move", _validate_move, _validate_fields),
    "move_along": ("move_along", _move_along, lambda m: {
        "end": _xy(m, "end"), "end_world": _wxy(m.end_world), "slid": m.slid}),
    "nearest_walkable": ("nearest", _nearest, lambda m: {
        "cell": _xy(m, "cell"), "distance": m.distance}),
    "is_reachable": ("reachable", _segment, lambda m: {"reachable": m.reachable}),
    "random_point": ("random_point", _random_point, lambda m: {
        "cell": _xy(m, "cell"), "seed": m.seed, "candidates": m.candidates}),
    "distance_to_wall": ("distance_to_wall", _distance_to_wall, lambda m: {
        "distance": m.distance, "wall": _xy(m, "wall")}),
}


def query(kind, scene, *args, **options):
    """One item for batch(): kind is a movement call's name ("raycast",
    "validate_move", "move_along", "nearest_walkable", "is_reachable",
    "random_point", "distance_to_wall") or "find_path", and the rest its
    arguments, e.g. query("raycast", "town", (1, 1), (9, 9), unit_size=2) or
    query("find_path", "town", (1, 1), None, goals=[(5, 5), (9, 2)]). A
    find_path item answers with the dict PathResult.to_dict() gives; its
    deadline_ms counts from the batch's arrival, as it would alone."""
    if kind == "find_path":
        q = pb.Query()
        _find_path_fill(q.find_path, scene, *args, **options)
        return q
    field, build, _ = _choice(_QUERIES, kind, "query kind")
    _check_scene(scene)
    q = pb.Query()
    m = getattr(q, field)
    m.scene = scene
    m.min_version = options.pop("min_version", 0)
    build(m, *args, **options)
    return q


def _with_version(fields):
    def read(m):
        d = {"version": m.version}
        d.update(fields(m))
        return d
    return read


def _query_op(kind, scene, *args, **options):
    field, _, fields = _QUERIES[kind]
    request = pb.Request()
    getattr(request, field).CopyFrom(getattr(query(kind, scene, *args, **options), field))
    return _op(request, _single(field, _with_version(fields)))


def _unpack_points(request_id, m):
    """A frame's packed waypoints as [(x, y, wx, wy, t)]: cells by running
    sums over the deltas (the first is absolute); wx, wy and t are None
    when the frame does not carry them."""
    n = len(m.dx)
    if len(m.dy) != n or len(m.t) not in (0, n) or len(m.wx) not in (0, n) or len(m.wy) != len(m.wx):
        raise _Violation("request %d: a frame's waypoint arrays differ in length" % request_id)
    none = [None] * n
    return list(zip(itertools.accumulate(m.dx), itertools.accumulate(m.dy),
                    m.wx or none, m.wy or none, m.t or none))


def _path_result(request_id, status, message, timed, goals, want_world, waypoints, chunk,
                 stale_version=None):
    """A PathResult from a path's waypoints [(x, y, wx, wy, t)] and its final
    chunk (None when the answer was an error frame): a streamed path's, or a
    batch item's. STALE_VERSION's version (the scene's now) is the result's."""
    r = PathResult(request_id, _status_name(status), message, timed)
    r.waypoints = [(x, y) for x, y, _, _, _ in waypoints]
    if want_world:
        r.world = [(wx, wy) for _, _, wx, wy, _ in waypoints]
    if timed:
        r.times = [t for _, _, _, _, t in waypoints]
    if chunk is not None:
        if chunk.total_waypoints and chunk.total_waypoints != len(waypoints):
            raise _Violation("request %d: final chunk says %d waypoints, %d arrived"
                             % (request_id, chunk.total_waypoints, len(waypoints)))
        r.cost = chunk.cost
        r.expansions = chunk.expansions
        r.search_micros = chunk.search_micros
        r.version = chunk.scene_version
        if chunk.HasField("start_used"):
            r.start_used = (chunk.start_used.x, chunk.start_used.y)
        if chunk.HasField("goal_used"):
            r.goal_used = (chunk.goal_used.x, chunk.goal_used.y)
        if chunk.cutoff != pb.OK:
            r.cutoff = _status_name(chunk.cutoff)
        if goals and r.ok:
            r.goal_index = chunk.goal_index
    elif stale_version is not None:
        r.version = stale_version
    return r


def _item_answer(request_id, item, q=None):
    if q is not None and q.WhichOneof("kind") == "find_path":
        # A FindPath item: the dict pathctl path --json prints for it.
        chunk = item.path if item.WhichOneof("kind") == "path" else None
        points = _unpack_points(request_id, chunk.points) if chunk else []
        return _path_result(request_id, item.status, item.message, q.find_path.speed > 0,
                            len(q.find_path.goals) > 0, q.find_path.want_world, points, chunk,
                            item.version if item.status == pb.STALE_VERSION else None).to_dict()
    d = {"status": _status_name(item.status)}
    if item.status != pb.OK:
        if item.message:
            d["message"] = item.message
        if item.status == pb.STALE_VERSION:
            d["version"] = item.version
        return d
    field = item.WhichOneof("kind")
    for _, (name, _, fields) in _QUERIES.items():
        if name == field:
            d.update(_with_version(fields)(getattr(item, field)))
            return d
    raise _Violation("request %d: batch item without a result" % request_id)


def _batch_op(items):
    items = list(items)
    if not 1 <= len(items) <= MAX_BATCH_ITEMS:
        raise ValueError("a batch holds 1..%d items, got %d" % (MAX_BATCH_ITEMS, len(items)))
    request = pb.Request()
    request.batch.SetInParent()
    for q in items:
        if not isinstance(q, pb.Query):
            raise ValueError("batch items are made by pathd_client.query(kind, scene, ...)")
        request.batch.items.add().CopyFrom(q)
    if sum(1 for q in items if q.WhichOneof("kind") == "find_path") > MAX_BATCH_PATHS:
        raise ValueError("a batch holds at most %d find_path items" % MAX_BATCH_PATHS)

    def fields(m):
        if len(m.items) != len(items):
            raise _Violation("batch of %d items answered with %d" % (len(items), len(m.items)))
        return {"items": [_item_answer(0, item, q) for item, q in zip(m.items, items)]}
    return _op(request, _single("batch", fields), value=lambda a: a["items"])


def _ping_op():
    request = pb.Request()
    request.ping.nonce = random.getrandbits(64)
    started = time.monotonic()

    def value(answer):
        if answer["nonce"] != request.ping.nonce:
            raise PathdProtocolError("pong carries the wrong nonce", answer.id)
        return time.monotonic() - started
    return _op(request, _single("pong", lambda m: {"nonce": m.nonce}), value=value)


def _scenes_op():
    request = pb.Request()
    request.list_scenes.SetInParent()
    return _op(request, _single("scene_list", lambda m: {"scenes": [
        SceneSummary(s.name, s.width, s.height, s.version) for s in m.scenes]}),
        value=lambda a: a["scenes"])


def _scene_info_op(scene, min_version=0):
    request = pb.Request()
    request.scene_info.scene = scene
    request.scene_info.min_version = min_version
    return _op(request, _single("scene_info", lambda i: {"info": SceneInfo(
        i.name, i.width, i.height, i.origin_x, i.origin_y, i.cell_size, list(i.unit_sizes),
        i.version, i.passable_cells)}), value=lambda a: a["info"])


_WATCH_KINDS = ("started", "updated", "replaced", "instanced", "dropped", "ended", "agents_cut",
                "agents_displaced", "agents_expired", "agents_released")
_OP_NAMES = {pb.UPDATE_BLOCK: "blocked", pb.UPDATE_PASS: "passable", pb.UPDATE_COST: "cost",
             pb.UPDATE_RESTORE: "restore"}


def _rect(r):
    return [r.min.x, r.min.y, r.max.x, r.max.y]


def _watch_event(response):
    """A watch frame as the dict pathctl watch --json prints."""
    d = {"status": _status_name(response.status), "watch": response.id}
    if response.WhichOneof("body") == "watch_event":
        ev = response.watch_event
        d.update(kind=_WATCH_KINDS[ev.kind] if ev.kind < len(_WATCH_KINDS) else "unknown",
                 scene=ev.scene, version=ev.version,
                 changed=_rect(ev.changed) if ev.HasField("changed") else None)
        if ev.kind == pb.SCENE_UPDATED:
            d["cells_changed"] = ev.cells_changed
            d["ops"] = [dict({"set": _OP_NAMES.get(op.op, "unknown"), "bounds": _rect(op.bounds),
                              "cells": op.cells}, **({"cost": op.cost} if op.op == pb.UPDATE_COST else {}))
                        for op in ev.ops]
        if ev.kind == pb.SCENE_INSTANCED:
            d["instance"] = ev.instance
        if ev.kind == pb.AGENTS_CUT:
            d["agents"] = list(ev.agents)
            d["cut_at_ms"] = ev.cut_at_ms
        if ev.kind in (pb.AGENTS_DISPLACED, pb.AGENTS_EXPIRED, pb.AGENTS_RELEASED):
            d["agents"] = list(ev.agents)
    else:
        d["message"] = _message(response)
    d["final"] = response.final
    return d


def _watch_op(scenes):
    request = pb.Request()
    scenes = list(scenes)
    if not scenes:
        raise ValueError("watch needs at least one scene")
    for scene in scenes:
        _check_scene(scene)
        request.watch.scenes.append(scene)
    return _op(request, lambda p: p.response.status == pb.OK and Answer(p.id, {"status": "OK"})
               or _error_answer(p, p.response), value=lambda a: a.id)


def _unwatch_op(watch_id):
    request = pb.Request()
    request.unwatch.watch_id = watch_id
    return _op(request, _single(None, None))


def _fields(m):
    """A message of plain fields (Stats, Limits) as a dict of them."""
    return {f.name: getattr(m, f.name) for f in m.DESCRIPTOR.fields}


def _fields_op(body):
    """A request with an empty body whose answer is a message of plain
    fields (Stats, Limits), returned as a dict of them."""
    request = pb.Request()
    getattr(request, body).SetInParent()
    return _op(request, _single(body, _fields),
               value=lambda a: {k: v for k, v in a.items() if k != "status"})


def _auth_op(token, granted):
    request = pb.Request()
    request.auth.token = token
    return _op(request, _single("auth", lambda m: {"role": m.role}),
               value=lambda a: granted(a["role"]))


def _reload_op():
    request = pb.Request()
    request.reload.SetInParent()
    return _op(request, _single(None, None), value=lambda a: None)


def _cancel_request(target_id):
    request = pb.Request()
    request.cancel.target_id = target_id
    return request


# Request kinds send(name, ...) sends without waiting.
_PIPELINED = dict(find_path=_find_path_op, find_route=_find_route_op,
                  update_cells=_update_cells_op, scene_grid_band=_scene_grid_op, batch=_batch_op,
                  **{kind: (lambda kind: lambda *a, **kw: _query_op(kind, *a, **kw))(kind)
                     for kind in _QUERIES})


def grid_rows(grid):
    """A scene_grid() answer in the config's ASCII map format, one string per
    row, as pathctl grid prints it: '#' blocked, '.' cost 1, '2'..'9' that
    cost, '+' 10 or more."""
    w, cells = grid["width"], grid["cells"]
    return ["".join(_GRID_SYMBOLS[c] for c in cells[y * w:(y + 1) * w]) for y in range(grid["height"])]


class _Pending:
    """A request waiting for its answer: assembles its frames and, on the
    final one, builds the answer with op.finish."""

    __slots__ = ("id", "op", "pipelined", "done", "error", "result", "response", "next_seq",
                 "path", "legs", "leg_seq", "waypoint_count", "waiter", "sock")

    def __init__(self, request_id, op, pipelined):
        self.id = request_id
        self.op = op
        self.pipelined = pipelined     # handed back by recv(), not by a blocking call
        self.done = False
        self.error = None              # (exception class, message) when it got no answer
        self.result = None
        self.response = None           # the final frame
        self.next_seq = 0
        self.path = []                 # path: (x, y, wx, wy, t) so far
        self.legs = []                 # route: finished and current legs
        self.leg_seq = 0
        self.waypoint_count = 0
        self.waiter = None             # asyncio: the future a blocking call awaits
        self.sock = None               # the connection it went out on (None: not sent yet)

    def feed(self, response):
        """Takes one frame; returns True when the answer is complete."""
        body = response.WhichOneof("body")
        if self.op.assemble == "path" and body == "path":
            chunk = response.path
            if chunk.seq != self.next_seq:
                raise _Violation("request %d: path chunk %d arrived, expected %d"
                                 % (self.id, chunk.seq, self.next_seq))
            self.next_seq += 1
            points = self._points(chunk.points)
            self._count(len(points))
            self.path.extend(points)
        elif self.op.assemble == "route" and body == "route_leg":
            self._route_leg(response.route_leg)
        if self.op.assemble != "single" and not response.final:
            return False
        self.response = response
        self.result = self.op.finish(self)
        self.result.timing = Timing(response.server_us, response.search_us)
        return True

    def _points(self, m):
        return _unpack_points(self.id, m)

    def _count(self, n):
        self.waypoint_count += n
        if self.waypoint_count > MAX_PATH_WAYPOINTS:
            raise _Violation("request %d: answer longer than %d waypoints" % (self.id, MAX_PATH_WAYPOINTS))

    def _route_leg(self, leg):
        current = self.legs[-1] if self.legs else None
        if current is not None and not current["end"]:
            if leg.leg != len(self.legs) - 1 or leg.seq != self.leg_seq:
                raise _Violation("request %d: route leg %d frame %d arrived, expected leg %d frame %d"
                                 % (self.id, leg.leg, leg.seq, len(self.legs) - 1, self.leg_seq))
        elif leg.leg != len(self.legs) or leg.seq != 0:
            raise _Violation("request %d: route leg %d frame %d arrived, expected leg %d frame 0"
                             % (self.id, leg.leg, leg.seq, len(self.legs)))
        else:
            current = {"end": False, "scene": leg.scene, "waypoints": []}
            self.legs.append(current)
            self.leg_seq = 0
        self.leg_seq += 1
        points = self._points(leg.points)
        self._count(len(points))
        current["waypoints"].extend(points)
        current["version"] = leg.scene_version
        if leg.leg_end:
            if leg.total_waypoints and leg.total_waypoints != len(current["waypoints"]):
                raise _Violation("request %d: leg %d says %d waypoints, %d arrived"
                                 % (self.id, leg.leg, leg.total_waypoints, len(current["waypoints"])))
            current["end"] = True
            current["cost"] = leg.cost
            current["portal"] = None
            if leg.HasField("portal"):
                hop = leg.portal
                current["portal"] = {"name": hop.name, "exit": [hop.exit.x, hop.exit.y],
                                     "to_scene": hop.to_scene, "entry": [hop.entry.x, hop.entry.y],
                                     "cost": hop.cost}

    def finish_path(self, timed, goals=False, want_world=False):
        response = self.response
        chunk = response.path if response.WhichOneof("body") == "path" else None
        stale = response.error.version if response.status == pb.STALE_VERSION else None
        return _path_result(self.id, response.status, _message(response), timed, goals,
                            want_world, self.path, chunk, stale)

    def finish_route(self, timed, want_world):
        """The object pathctl route --json prints."""
        response = self.response
        body = response.WhichOneof("body")
        if body == "route_result":
            rr = response.route_result
        elif self.legs:
            raise _Violation("request %d: route ended without a RouteResult" % self.id)
        else:
            rr = pb.RouteResult()   # refused before planning: an error body
        if rr.legs != len(self.legs) or (self.legs and not self.legs[-1]["end"]):
            raise _Violation("request %d: RouteResult counts %d legs, %d arrived"
                             % (self.id, rr.legs, len(self.legs)))
        legs = []
        for leg in self.legs:
            legs.append({"scene": leg["scene"], "cost": leg["cost"], "version": leg["version"],
                         "waypoints": [[w[0], w[1]] for w in leg["waypoints"]],
                         "world": [[w[2], w[3]] for w in leg["waypoints"]] if want_world else None,
                         "times": [w[4] for w in leg["waypoints"]] if timed else None,
                         "portal": leg["portal"]})
        d = {"status": _status_name(response.status), "total_cost": rr.total_cost, "legs": legs,
             "expansions": rr.expansions, "micros": rr.micros, "pinned": rr.pinned,
             "goal_used": _xy(rr, "goal_used")}
        if _message(response):
            d["message"] = _message(response)
        return Answer(self.id, d)


def _take_frame(buf):
    """The next whole frame in buf (a bytearray), decoded and removed, or None."""
    if len(buf) < _HEADER.size:
        return None
    (length,) = _HEADER.unpack_from(buf)
    # Checked before waiting for (and buffering) the frame's body.
    if length > MAX_FRAME_BYTES:
        raise _Violation("server sent a %d-byte frame, above the %d-byte limit"
                         % (length, MAX_FRAME_BYTES))
    end = _HEADER.size + length
    if len(buf) < end:
        return None
    return _decode(bytes(buf[_HEADER.size:end])), end


def _decode(payload):
    response = pb.Response()
    try:
        response.ParseFromString(payload)
    except DecodeError:
        raise _Violation("server sent a frame that does not decode")
    return response


def _frame(request):
    payload = request.SerializeToString()
    return _HEADER.pack(len(payload)) + payload


class _Api:
    """The calls, written once: each builds an _Op and hands it to the
    transport's _call (blocking: returns the value; asyncio: a coroutine) or
    _send_op (pipelined: the id, or a coroutine giving it)."""

    # ---- paths and routes ----------------------------------------------------

    def find_path(self, scene, start, goal, **options):
        """A path from start to goal, cells (x, y) unless world=True.

        Options (0 / unset means the server default): world, unit_size,
        connectivity (4 or 8), style ("cells", "corners", "smooth"),
        goal_mode ("exact", "nearest", "line"), snap, partial_on_cutoff,
        speed (world units/s; > 0 adds times), start_time, avoid [(x, y)],
        window ((x0, y0), (x1, y1)), max_expansions, deadline_ms, range
        (cells: stop within it of the goal), line_of_sight (with range),
        goals [(x, y)] with goal None (the nearest; .goal_index), want_world
        (the result's world coordinates; None without it), avoid_reserved
        (around the scene's reservations at their times, reserving nothing:
        needs speed > 0, start_time is the game time in seconds; a wait is
        its cell twice, at arrival and departure). Returns a
        PathResult for OK or PARTIAL; raises PathdError for any other answer
        (its .result holds the PathResult)."""
        return self._call(_find_path_op(scene, start, goal, **options))

    def send_find_path(self, scene, start, goal, **options):
        """Sends a path request without waiting (options as find_path) and
        returns its id; collect the PathResult with recv()."""
        return self._send_op(_find_path_op(scene, start, goal, **options))

    def find_route(self, from_scene, start, to_scene, goal, **options):
        """A route across scenes through portals, as the dict pathctl route
        --json prints: status, total_cost, legs [{scene, cost, version,
        waypoints, world, times, portal}], expansions, micros, pinned,
        goal_used. Options: world, unit_size, style, goal_mode, speed,
        start_time, max_expansions, deadline_ms, want_world (each leg's world
        is None without it). OK and PARTIAL return."""
        return self._call(_find_route_op(from_scene, start, to_scene, goal, **options))

    # ---- scenes ---------------------------------------------------------------

    def update_cells(self, scene, rect=None, cells=None, op="block", cost=0, at_ms=None,
                     idempotency_key=None):
        """Blocks ("block"), opens ("pass") or re-costs ("cost", with cost
        1..255) the cells of rect ((x0, y0), (x1, y1)), inclusive, or of the
        list cells [(x, y)]. at_ms: the game time from which blocked cells
        cut the scene's reservations (None: the latest it heard of).
        Returns {status, version, cells_changed, micros, agents_cut}.
        idempotency_key (every write call takes it): see "Replicas" in the
        module's notes; None = a fresh random key when idempotency_keys is on."""
        return self._call(self._keyed(_update_cells_op(scene, rect, cells, op, cost, at_ms),
                                      idempotency_key))

    def create_scene(self, name, map_bytes=None, format=None, cells=None, width=0, height=0,
                     origin=(0.0, 0.0), cell_size=0.0, unit_sizes=(), idempotency_key=None):
        """Write role: a scene made at run time from a map file's bytes in
        format ("ascii", "movingai", "tiled", "ldtk") or from raw cells
        (bytes, row-major, 0 blocked, else cost) with width and height.
        Returns {status, version, own_bytes, scene_bytes}; PathdError
        SCENE_EXISTS, LIMIT_EXCEEDED or INVALID_ARGUMENT otherwise."""
        return self._call(self._keyed(_create_scene_op(name, map_bytes, format, cells, width, height,
                                                       origin, cell_size, unit_sizes), idempotency_key))

    def create_instance(self, name, template, idempotency_key=None):
        """Write role: a scene sharing template's memory until updated."""
        return self._call(self._keyed(_create_instance_op(name, template), idempotency_key))

    def drop_scene(self, name, drop_portals=False, idempotency_key=None):
        """Write role: stop serving a scene (SCENE_IN_USE while portals name
        it, unless drop_portals). Returns the version it had."""
        return self._call(self._keyed(_drop_scene_op(name, drop_portals), idempotency_key))

    def scene_grid_band(self, scene, unit_size=0, row_start=0, row_count=0):
        """One band of a grid's rows: {status, version, width, height,
        row_start, row_count, cells (bytes, row-major, 0 blocked, else cost)}.
        scene_grid() reads the whole grid."""
        return self._call(_scene_grid_op(scene, unit_size, row_start, row_count))

    def scenes(self):
        """The served scenes, sorted by name, as SceneSummary tuples."""
        return self._call(_scenes_op())

    def scene_info(self, scene, min_version=0):
        """Details of one scene as a SceneInfo tuple; PathdError UNKNOWN_SCENE if
        absent, STALE_VERSION (its .result["version"]: the version now) while
        the scene is older than min_version."""
        return self._call(_scene_info_op(scene, min_version))

    # ---- reservations (docs/PROTOCOL.md, "Reservations") ------------------------

    def reserve_path(self, scene, agent, start, goal, t0_ms, speed, **options):
        """Write role: plans agent (an id >= 1) from cell start at game time
        t0_ms (ms) at speed cells/s around every other agent's reservations,
        and reserves it. Options: unit_size, window_ms (None: 8000; 0: all
        the way), at_goal ("park" or "vanish"), connectivity, max_expansions,
        deadline_ms, min_version, goals (cells, with goal None: the nearest
        of them, as FindPath's), range (cells: end within it of a goal) and
        yield_after_ms (0: never; else once the agent has stood this long,
        agents standing in its way may be moved aside). Returns {status
        ("OK" or "PARTIAL"), agent,
        waypoints [{x, y, t_arrive_ms, t_leave_ms (None: no end)}],
        reserved_until_ms (None: no end), cost, expansions, search_micros,
        scene_version, was_cut, displaced [{agent, t0_ms, reserved_until_ms,
        waypoints}]: the agents moved aside, in the order they were moved, whose plans from
        t0_ms on the game must replace with these}; raises PathdError otherwise (START_BLOCKED:
        its .result["blocking_agent"] names the agent in the way)."""
        return self._call(_reserve_path_op(scene, agent, start, goal, t0_ms, speed, **options))

    def release_agent(self, scene, agent):
        """Write role: drops every reservation of agent; True when it had any."""
        return self._call(_release_agent_op(scene, agent))["released"]

    def release_all(self, scene):
        """Write role: releases every agent of scene and forgets its game
        clock (a game whose clock starts over calls it first); how many
        agents were released. Watchers hear agents_released."""
        return self._call(_release_agent_op(scene, 0, release_all=True))["agents_released"]

    def reservations(self, scene, rect=None, from_ms=0, to_ms=0, max_entries=0):
        """The reservations holding any cell of rect ((x0, y0), (x1, y1);
        None: the whole scene) at some time of [from_ms, to_ms) (to_ms 0: no
        end): {entries [{agent, x, y, width, height, t0_ms, t1_ms (None: no
        end)}], matching, agents, table_entries, table_bytes}."""
        return self._call(_reservations_op(scene, rect, from_ms, to_ms, max_entries))

    # ---- watching scenes (docs/PROTOCOL.md, "Watching scenes") ------------------

    def watch(self, scenes):
        """Subscribes this connection to the scenes' changes; returns the
        watch's id once the server accepted it (PathdError UNKNOWN_SCENE,
        LIMIT_EXCEEDED or INVALID_ARGUMENT otherwise). Its events, first a
        "started" one per scene, come from watch_next(); read them
        promptly, or the server ends the watch with WATCH_OVERFLOW."""
        return self._call(_watch_op(scenes))

    def unwatch(self, watch_id):
        """Ends a watch; its last event ("ended") still comes from watch_next()."""
        return self._call(_unwatch_op(watch_id))

    def stats(self):
        """Server-wide counters as a dict (field names of pathd.v1.Stats)."""
        return self._call(_fields_op("stats"))

    def limits(self):
        """The limits requests must respect, as a dict (field names of
        pathd.v1.Limits: max_frame_bytes, max_inflight_per_conn,
        max_batch_items, max_waypoints_per_chunk, ...)."""
        return self._call(_fields_op("limits"))

    def ping(self):
        """Round trip; returns the measured time in seconds."""
        return self._call(_ping_op())

    def reload(self):
        """Admin: the server rereads its config and maps, as on SIGHUP."""
        return self._call(_reload_op())

    def _granted(self, role):
        self.role = role
        return role

    # ---- movement queries -----------------------------------------------------
    # Points are cells unless world=True; every query takes unit_size. Each
    # returns the dict pathctl --json prints (status, version, ...).

    def raycast(self, scene, frm, to, **options):
        """Is the straight segment walkable? {clear, hit, last_free, last_free_world}."""
        return self._call(_query_op("raycast", scene, frm, to, **options))

    def validate_move(self, scene, moves, max_speed, tolerance=0.0, **options):
        """Checks claimed moves [(x, y, t)]: {valid, first_invalid, reason,
        last_valid[, last_valid_world]}; reason is "valid", "out_of_bounds",
        "blocked_point", "blocked_segment", "too_fast" or "time_not_increasing"."""
        return self._call(_query_op("validate_move", scene, moves, max_speed, tolerance, **options))

    def move_along(self, scene, frm, delta, **options):
        """Moves by delta (dx, dy), sliding along walls: {end, end_world, slid}."""
        return self._call(_query_op("move_along", scene, frm, delta, **options))

    def nearest_walkable(self, scene, at, radius, reachable_from=None, **options):
        """The nearest cell the unit fits on within radius cells (Euclidean
        between centres): {cell, distance}; NO_PATH when there is none."""
        return self._call(_query_op("nearest_walkable", scene, at, radius, reachable_from, **options))

    def is_reachable(self, scene, frm, to, **options):
        """Are the cells connected for the unit? {reachable}."""
        return self._call(_query_op("is_reachable", scene, frm, to, **options))

    def random_point(self, scene, around, radius, seed=0, **options):
        """A cell drawn uniformly within walking distance radius: {cell,
        seed, candidates}; the same seed gives the same cell."""
        return self._call(_query_op("random_point", scene, around, radius, seed, **options))

    def distance_to_wall(self, scene, at, max_distance=0, **options):
        """Distance to the nearest blocked cell: {distance, wall}."""
        return self._call(_query_op("distance_to_wall", scene, at, max_distance, **options))

    def batch(self, items):
        """Up to MAX_BATCH_ITEMS queries (made by query()); returns their
        answers in order, each its own dict with its own status. They go in
        one frame when the server takes that many (Limits.max_batch_items,
        read on connect), else in frames of that size, in flight together.
        The timeout bounds the whole call (PathdTimeout past it)."""
        items = list(items)
        return self._batch(items, _batch_op(items))  # checks 1..256 items, 32 paths

    def _batch_frames(self, items, op):
        """The Batch frames items go in on this connection: op alone, or
        frames of at most max_batch_items and the in-flight cap (pathd
        refuses a Batch larger than max_inflight_per_conn whole,
        LIMIT_EXCEEDED). Called once the connection's GetLimits has
        answered (_batch waits for it), so both are the server's, or the
        defaults when it refused GetLimits."""
        size = max(1, min(MAX_BATCH_ITEMS, self.max_batch_items, self._cap))
        if len(items) <= size:
            return [op]
        return [_batch_op(items[i:i + size]) for i in range(0, len(items), size)]

    # ---- pipelined --------------------------------------------------------------

    def send(self, name, *args, **options):
        """Sends one request without waiting and returns its id; recv()
        hands back its answer. name is find_path, find_route, update_cells,
        scene_grid_band, batch or a movement query's name; the arguments are
        that call's."""
        return self._send_op(_choice(_PIPELINED, name, "request kind")(*args, **options))

    # ---- what both transports share ----------------------------------------------

    def _setup(self, addr, timeout, retry_attempts, token, flow_control=True,
               max_queued=DEFAULT_MAX_QUEUED, retry_deadline=None, reconnect=True,
               max_connection_age=MAX_CONNECTION_AGE_S, idempotency_keys=True):
        self._host, self._port = _parse_addr(addr)
        if retry_attempts < 1:
            raise ValueError("retry_attempts must be at least 1")
        if max_queued < 0:
            raise ValueError("max_queued must be 0 or more")
        self.timeout = timeout
        self.retry_attempts = retry_attempts
        # OVERLOADED retries stop when the next pause would end past this
        # many seconds after the first send (default: the timeout).
        self.retry_deadline = timeout if retry_deadline is None else retry_deadline
        # Flow control: at most _cap slots outstanding (the server's
        # max_inflight_per_conn), the rest in _queue, at most max_queued.
        self.flow_control = flow_control
        self.max_queued = max_queued
        self.server_limits = None  # the Limits dict read on connect, None before
        self._cap = DEFAULT_INFLIGHT_CAP if flow_control else float("inf")
        # The connection's GetLimits is not answered yet: counted requests
        # wait in _queue (_fits, _next_queued) until it is.
        self._limits_due = False
        # id -> fn(response): applied by the reader when that answer
        # arrives, whether or not its caller still waits (Auth, GetLimits).
        self._on_answer = {}
        self.max_batch_items = MAX_BATCH_ITEMS
        self._used = 0             # slots taken by requests sent, not yet answered
        self._held = {}            # id -> (slots, multi_frame) of those requests
        self._queue = deque()      # (request, _Pending or None, slots) held back, in order
        self.overloaded_retries = 0  # OVERLOADED answers a blocking call retried
        # Ids keep increasing across reconnects, so a late answer to an old
        # request can never be mistaken for a new one.
        self._next_id = 1
        self._pending = {}
        self._pipelined = 0        # pipelined requests in _pending: in_flight without a scan
        self._completed = deque()  # finished pipelined requests, completion order
        self._watches = set()      # ids of open watches
        self._events = deque()     # watch events not yet taken by watch_next()
        self.token = token
        self.role = None
        self.last_timing = _NO_TIMING  # of the answer the last call took
        # Replicas (module notes, "Replicas").
        self.reconnect_lost = reconnect          # reconnect and resend within a call
        self.max_connection_age = max_connection_age or 0
        self.idempotency_keys = idempotency_keys  # a fresh key on every update
        self.reconnects = 0                      # connections opened after the first
        self.retries = {}                        # status name -> answers retried
        self.resent = 0                          # requests sent again after a lost connection
        self._connected_at = 0.0                 # time.monotonic() of the current connection
        self._ever_connected = False
        self._closes = 0                         # close() calls: no call resends past one
        # The client's reconnect gate (_gate_*): no connect before
        # _gate_at, pushed a jittered _gate_step (doubling) on each failed,
        # refused or lost connection, shared by every call so the attempts do not
        # grow with the calls waiting.
        self._gate_at = 0.0
        self._gate_step = RECONNECT_BACKOFF_FIRST_S
        self._carry_again = False                # a carry's new connection retired meanwhile

    @property
    def in_flight(self):
        """Requests sent with send()/send_find_path not yet handed back by recv()."""
        return self._pipelined

    @property
    def slots_in_flight(self):
        """In-flight slots the server counts for this connection now (a
        Batch takes one per item); never above the server's cap."""
        return self._used

    @property
    def queued(self):
        """Requests held back until the server's in-flight cap has room."""
        return len(self._queue)

    @property
    def in_flight_cap(self):
        """The connection's cap in use (Limits.max_inflight_per_conn, or
        DEFAULT_INFLIGHT_CAP when the server refused GetLimits; infinite
        without flow control); None while GetLimits is not answered."""
        return None if self._limits_due else self._cap

    def _fits(self, slots):
        """Whether a request of `slots` may go out now rather than queue: it
        takes no slot, or the cap is known, nothing queued is ahead of it
        and the cap has room (a Batch larger than the cap goes alone, for
        the server to refuse)."""
        return slots == 0 or (not self._limits_due and not self._queue
                              and self._used + min(slots, self._cap) <= self._cap)

    def _check_queue_room(self):
        if len(self._queue) >= self.max_queued:
            raise PathdQueueFull("%d requests already wait for this connection's in-flight cap of %s "
                                 "(max_queued); nothing was sent" % (len(self._queue), self._cap))

    def _take_slots(self, request):
        slots = _weight(request)
        if slots:
            self._used += min(slots, self._cap)
            self._held[request.id] = (min(slots, self._cap),
                                      request.WhichOneof("body") in ("find_path", "find_route"))

    def _release_slots(self, response):
        """Gives back the slots of the request response ends; True if any."""
        held = self._held.get(response.id)
        if held is None or (held[1] and not response.final):
            return False
        del self._held[response.id]
        self._used -= held[0]
        return True

    def _next_queued(self):
        """The next held-back request that may go now (its slots taken), or
        None; skips those whose caller gave up (timed out) meanwhile."""
        while self._queue:
            request, p, slots = self._queue[0]
            if p is not None and self._pending.get(p.id) is not p:
                self._queue.popleft()
                continue
            if self._limits_due or self._used + min(slots, self._cap) > self._cap:
                return None
            self._queue.popleft()
            self._take_slots(request)
            if p is not None:
                p.sock = self._sock  # queued on an older connection, sent on this one
            return request
        return None

    def _cancel_queued(self, target_id):
        """Cancel of a request still held back: it never goes out and is
        answered CANCELLED here. False when target_id is not queued."""
        for i, (request, p, _) in enumerate(self._queue):
            if request.id == target_id:
                del self._queue[i]
                if p is not None and not p.done:
                    response = pb.Response(id=target_id, status=pb.CANCELLED, final=True)
                    response.error.message = "cancelled while queued in the client; never sent"
                    if p.feed(response):
                        self._complete(p)
                return True
        return False

    def _limits_answer(self):
        """The on-answer of the current connection's GetLimits (on the
        reader): takes its cap and batch size, however late it comes (a
        refusal - no token yet, an older pathd - leaves the defaults), and
        sends what waited in the queue for it."""
        conn = self._sock

        def settle(response):
            if conn is not self._sock:
                return  # a replaced connection's: the new one asked its own
            if _status_name(response.status) in _RETRYABLE:
                # A draining replica (without a token GetLimits is the first
                # answer): the connection is given up, the queue held for
                # the next one (_first_refused).
                self._retire(conn, refused=True)
                self._limits_settled()
                return
            self._limits_due = False
            if response.status == pb.OK and response.WhichOneof("body") == "limits":
                answer = _fields(response.limits)
                self.server_limits = answer
                self._cap = max(1, answer.get("max_inflight_per_conn", 0) or DEFAULT_INFLIGHT_CAP)
                self.max_batch_items = answer.get("max_batch_items", 0) or MAX_BATCH_ITEMS
            self._limits_settled()
            self._slots_freed()
        return settle

    def _limits_wait_ended(self, conn, deadline):
        """_await_limits' outcome once conn's GetLimits is not due any more
        or conn is not the connection: True when it still is (its limits
        known), False to connect again (before deadline), or raises."""
        if conn is not None and self._sock is conn:
            return True
        if time.monotonic() >= deadline:
            raise self._limits_timeout()
        return False

    def _limits_timeout(self):
        """The PathdTimeout of a batch() whose connection's GetLimits did
        not answer within its timeout (nothing was sent)."""
        return PathdTimeout("the connection's GetLimits was not answered within %gs: the batch "
                            "was not sent (its frames follow the server's limits)" % self.timeout)

    def _auth_answer(self, response):
        """The on-answer of Auth (on the reader): the role, however late."""
        if response.status == pb.OK and response.WhichOneof("body") == "auth":
            self.role = response.auth.role

    def _ask_first(self, limits):
        """What a new connection sends before anything else (and auth()):
        Auth with the kept token (if any), then with limits GetLimits right
        behind it, so a server with tokens answers it. Returns (op,
        on_answer) of each, to send in that order."""
        first = []
        if self.token is not None:
            first.append((_auth_op(self.token, self._granted), self._auth_answer))
        if limits:
            self._limits_due = True  # counted requests queue from now on
            first.append((_fields_op("limits"), self._limits_answer()))
        return first

    def _limits_refused(self):
        """Whether auth() asks GetLimits again: refused before the token
        (a server with tokens), none asked since."""
        return self.flow_control and self.server_limits is None and not self._limits_due

    def _abandon(self, p):
        """(Sync: with the lock held.) No one waits for p (one of
        _ask_first's) any more, nor applies its answer: its connection was
        replaced, and the new one asks its own. A retired connection then
        closes once nothing else is owed on it."""
        self._forget(p.id)
        self._on_answer.pop(p.id, None)
        if p.sock is not None:
            self._close_if_done(p.sock)

    def _still_owed(self, sent):
        """(Sync: with the lock held.) Those of sent (_ask_first's) still
        to be answered on the current connection; the others are abandoned."""
        owed = [(op, p) for op, p in sent if p.sock is self._sock]
        for op, p in sent:
            if p.sock is not self._sock:
                self._abandon(p)
        return owed

    def _first_refused(self, op, p, answer, rest):
        """(Sync: with the lock held.) Auth or GetLimits (op, p), the first
        answers on a new connection, was answered with a retryable status:
        a draining replica answers every request but Ping DRAINING, Auth
        before it looks at the token. The connection is retired (rest, what
        _ask_first sent behind op, abandoned); returns the PathdDisconnected
        to raise, on which _connect_until connects again after the
        reconnect gate (another replica, or this one serving again), as
        for a connection lost, until its deadline."""
        for _, q in rest:
            self._abandon(q)
        self._retire(p.sock, refused=True)
        status = self._status(answer)
        message = answer.get("message", "")
        what = "Auth" if op.request.WhichOneof("body") == "auth" else "GetLimits"
        return PathdDisconnected("%s on the new connection was answered %s%s"
                                 % (what, status, ": " + message if message else ""), p.id)

    def _retry_pause(self, answer, attempt, backoff, deadline):
        """Seconds to wait before sending again, or None to hand answer back:
        anything but a retryable status (_RETRYABLE), the last attempt, or a
        pause that would end past the retry deadline. The pause is backoff
        plus up to half of it at random, so clients refused together do not
        retry together; DRAINING goes again at once, on a new connection."""
        status = self._status(answer)
        if status not in _RETRYABLE or attempt >= self.retry_attempts:
            return None
        pause = 0.0 if status == "DRAINING" else backoff * (1.0 + random.random() / 2)
        if time.monotonic() + pause > deadline:
            return None
        if status == "OVERLOADED":
            self.overloaded_retries += 1
        self.retries[status] = self.retries.get(status, 0) + 1
        return pause

    def _keyed(self, op, key):
        """op (an update) with its idempotency_key: key, or a fresh one when
        key is None and idempotency_keys is on."""
        if key is None and self.idempotency_keys:
            key = _new_key()
        if key:
            if len(key) > MAX_IDEMPOTENCY_KEY or not all(32 < ord(ch) < 127 for ch in key):
                raise ValueError("idempotency_key: 1..%d printable ASCII characters" % MAX_IDEMPOTENCY_KEY)
            body = op.request.WhichOneof("body")
            getattr(op.request, body).idempotency_key = key
        return op

    def _aged(self):
        """Whether the current connection has passed max_connection_age."""
        return bool(self.max_connection_age) and \
            time.monotonic() - self._connected_at > self.max_connection_age

    def _may_resend(self, op, deadline, closes):
        """After a lost connection: whether the call sends op again (never
        once close() was called since the call began, closes then)."""
        return (self.reconnect_lost and _resendable(op.request) and time.monotonic() < deadline
                and self._closes == closes)

    def _gate_pause(self):
        """Seconds before this client may try its next connect (0: now)."""
        return max(0.0, self._gate_at - time.monotonic())

    def _gate_shut(self):
        """A connect failed or its first answer refused it: the client's
        next connect waits a jittered step, doubled for the one after, up to
        RECONNECT_BACKOFF_MAX_S. Once per step: calls that failed together
        push it once."""
        now = time.monotonic()
        if self._gate_at > now:
            return
        self._gate_at = now + self._gate_step * (0.5 + random.random() / 2)
        self._gate_step = min(self._gate_step * 2, RECONNECT_BACKOFF_MAX_S)

    def _served(self, answer):
        """A call's last answer: one not retryable means a replica served
        it, so the next failed connect pauses from the first step again."""
        if self._status(answer) not in _RETRYABLE:
            self._gate_at = 0.0
            self._gate_step = RECONNECT_BACKOFF_FIRST_S

    def _gate_wait(self, deadline, until, failure):
        """_connect_until's step before each connect: the seconds to wait
        for the gate (0: connect now; reconnect off: never gated). Raises
        PathdTimeout once until (the call's own deadline) has passed, and
        failure (the last connect's), or a PathdDisconnected saying so,
        when the gate opens past deadline."""
        if until is not None and time.monotonic() >= until:
            raise PathdTimeout("the call's timeout passed before a connection was open")
        pause = self._gate_pause() if self.reconnect_lost else 0.0
        if pause > 0 and time.monotonic() + pause > deadline:
            raise failure or PathdDisconnected(
                "no connection to %s:%d before the retry deadline (connecting paused after "
                "failed or refused attempts)" % (self._host, self._port))
        return pause

    def _reconnect_pause(self, backoff, deadline):
        """The jittered pause before the next connect attempt, or None when
        it would end past deadline."""
        pause = backoff * (0.5 + random.random() / 2)
        return None if time.monotonic() + pause > deadline else pause

    def _fail_pending(self, error_class, message, sock=None):
        """Every request still waiting (with sock: those sent on sock, or
        not sent yet) fails with error_class; watches end, each with a last
        event saying so."""
        # The server forgets a closed connection's requests: nothing is held.
        self._used = 0
        self._held.clear()
        self._queue.clear()
        self._limits_due = False
        self._on_answer.clear()
        self._end_watches("DISCONNECTED", message)
        for p in self._pending.values():
            if not p.done and (sock is None or p.sock is None or p.sock is sock):
                p.error = (error_class, message)
                self._complete(p)

    def _end_watches(self, status, message):
        """Every open watch ends: its last event has this status (the
        caller watches again, from the version it had, to go on)."""
        for watch_id in sorted(self._watches):
            self._events.append({"status": status, "watch": watch_id, "message": message,
                                 "final": True})
        self._watches.clear()
        self._event_arrived()

    def _dispatch(self, conn, response):
        """Files one answer frame read from conn (the current connection)."""
        if response.id == 0:
            if response.status == pb.DRAINING:
                # The replica is draining: send nothing more on conn, let the
                # answers it owes arrive, carry on on a new connection.
                self._retire(conn)
                return
            # A connection-level error (frame too large, malformed, too many
            # connections): the server closes after it, so close our side too.
            if response.status != pb.OK:
                message = _message(response)
                self._fail(conn, PathdDisconnected, "server closed the connection after %s%s"
                           % (_status_name(response.status), ": " + message if message else ""))
            return
        if self._release_slots(response):
            self._slots_freed()
        on_answer = self._on_answer.pop(response.id, None)
        if on_answer is not None:
            on_answer(response)
        p = self._pending.get(response.id)
        watching = response.id in self._watches
        if p is not None and not p.done and p.op.request.WhichOneof("body") == "watch":
            # A watch's first frame answers the Watch call; an accepted
            # watch's frames are events from then on.
            watching = response.status == pb.OK
            if watching and not response.final:
                self._watches.add(response.id)
        if watching:
            self._events.append(_watch_event(response))
            if response.final:
                self._watches.discard(response.id)
            self._event_arrived()
        if p is None or p.done:
            return  # the answer to a cancel, or to a request given up after a timeout
        if p.feed(response):
            self._complete(p)

    def _take_event(self, wait, deadline):
        """watch_next's step: the next event, or None to wait until
        deadline; raises when no watch is open and none is queued, or when
        the deadline passed."""
        if self._events:
            return self._events.popleft()
        if not self._watches:
            if not self.connected:
                raise PathdDisconnected("not connected: the connection and its watches are gone")
            raise PathdError("IDLE", "no watch is open")
        if deadline - time.monotonic() <= 0:
            raise PathdTimeout("no watch event within %gs" % wait)
        return None

    def _register(self, conn, op, pipelined, on_answer=None):
        """A fresh id for a request about to go out on conn, and its
        _Pending (None for an untracked request, op None); on_answer(response)
        is applied when its answer arrives, whoever waits for it."""
        if conn is None:
            raise PathdDisconnected("not connected (the connection was just closed)")
        request_id = self._next_id
        self._next_id += 1
        if on_answer is not None:
            self._on_answer[request_id] = on_answer
        p = None
        if op is not None:
            p = _Pending(request_id, op, pipelined)
            p.sock = conn
            self._pending[request_id] = p
            self._pipelined += 1 if pipelined else 0
        return request_id, p

    def _forget(self, request_id):
        """Drops a request from the table, answered, failed or given up."""
        p = self._pending.pop(request_id, None)
        if p is not None and p.pipelined:
            self._pipelined -= 1

    def _check_open(self):
        """Raises PathdClosed once close() was called: every call, connect()
        and reconnect() come here before opening a connection. (A closed
        client reconnected on the next call, where a game engineer
        expects it to stay closed, as Go's does.)"""
        if self._closes:
            raise PathdClosed()

    def _cancel_of(self, p):
        """For a call whose wait for p timed out: (connection, Cancel) when
        p was sent and runs on a worker there, else (None, None). The server
        would search on for an answer nobody reads (up to the request's own
        deadline), holding its slots; the Cancel stops it and its CANCELLED
        answer frees them (as the Node, Go and C clients do). The Cancel
        has an id of its own: its acknowledgement carries the Cancel's id,
        and one with id 0 (INVALID_ARGUMENT when the target just finished)
        would read as a connection-level error and drop the connection."""
        conn = p.sock
        if conn is None or conn is not self._sock or p.id not in self._held:
            return None, None
        cancel = _cancel_request(p.id)
        cancel.id = self._register(conn, None, False)[0]
        return conn, cancel

    def _give_up(self, p):
        """A call's wait for p timed out: p is forgotten (a late answer is
        dropped, but for its on-answer) and, not sent yet, leaves the queue
        for good. Returns the PathdTimeout to raise."""
        self._forget(p.id)
        if p.sock is None:
            for i, (_, queued, _) in enumerate(self._queue):
                if queued is p:
                    del self._queue[i]
                    break
        return PathdTimeout("no answer within %gs" % self.timeout, p.id)

    @staticmethod
    def _outcome(p):
        """The answer of a completed request, or its error raised."""
        if p.error:
            error_class, message = p.error
            raise error_class(message, p.id)
        return p.result

    def _take_completed(self, wait, deadline):
        """recv()'s step: the next completed pipelined answer (its error
        raised), or None to wait until deadline."""
        if self._completed:
            p = self._completed.popleft()
            self._forget(p.id)
            return self._outcome(p)
        if not self._pipelined:
            raise PathdError("IDLE", "no pipelined request in flight")
        if deadline - time.monotonic() <= 0:
            raise PathdTimeout("no answer completed within %gs" % wait)
        return None

    def _accept(self, op, answer):
        self.last_timing = answer.timing
        status = answer.status if isinstance(answer, PathResult) else answer["status"]
        if status not in op.accept:
            message = answer.message if isinstance(answer, PathResult) else answer.get("message", "")
            raise PathdError(status, message, answer.id, answer)
        return op.value(answer)

    @staticmethod
    def _status(answer):
        return answer.status if isinstance(answer, PathResult) else answer["status"]


class PathdClient(_Api):
    """One TCP connection to pathd, safe to share between threads.

    Thread safety: a reader thread per connection decodes answers and files
    them by id under self._lock (a Condition); callers block on it until
    theirs is in. Frames are written whole under self._send_lock. So any
    number of threads may call at once, and their requests are in flight
    together on the one socket. recv() hands back what send()/send_find_path
    sent, from whichever thread calls it."""

    def __init__(self, addr=DEFAULT_SERVER, timeout=DEFAULT_TIMEOUT_S, connect=True,
                 retry_attempts=RETRY_ATTEMPTS, token=None, flow_control=True,
                 max_queued=DEFAULT_MAX_QUEUED, retry_deadline=None, reconnect=True,
                 max_connection_age=MAX_CONNECTION_AGE_S, idempotency_keys=True):
        """addr is "host:port" or "[v6addr]:port"; timeout (seconds) bounds the
        connect, every blocking call (its wait in the local queue included)
        and every send. With connect=False the first call connects.
        retry_attempts (>= 1) is how many times in all a blocking call sends
        a request the server answers OVERLOADED, within retry_deadline
        seconds (default: timeout). token, for a server with auth.tokens, is
        sent first on every (re)connect; role then says what it granted
        ("query", "write" or "admin"). flow_control (default on) reads
        GetLimits on connect and keeps at most its max_inflight_per_conn
        slots outstanding, holding up to max_queued more requests back
        (PathdQueueFull beyond); off, every request goes out at once and the
        server answers the excess OVERLOADED. reconnect, max_connection_age
        (seconds) and idempotency_keys: see "Replicas" in the module's notes."""
        self._setup(addr, timeout, retry_attempts, token, flow_control, max_queued, retry_deadline,
                    reconnect, max_connection_age, idempotency_keys)
        lock = threading.RLock()
        self._lock = threading.Condition(lock)
        # The sender thread's own wake-up, on the same lock: notified only
        # when a request is queued or an answer frees slots for one, so
        # without queueing it never wakes (nor takes the GIL).
        self._sendable = threading.Condition(lock)
        self._send_lock = threading.Lock()
        self._connect_lock = threading.Lock()
        self._sock = None
        self._retiring = set()  # draining or aged connections still owed answers
        self._carrying = False  # a thread opens the next connection for the queue
        self._reader = None
        self._sender = None
        if connect:
            self.connect()

    # ---- connection -------------------------------------------------------------

    def connect(self):
        """Connects (and authenticates) if not connected. Raises
        PathdDisconnected on failure, PathdError for a refused token. With
        reconnect on, a failed or refused (draining replica) connect is
        tried again within retry_deadline, as a call does."""
        self._connect_until(time.monotonic() + self.retry_deadline)

    def _connect(self, until=None, gated=False):
        """One connect: its waits (the TCP connect, the first answers)
        ending by until too when given, a call's own deadline (batch()).
        With gated, returns False without trying while the reconnect gate
        is shut (checked under the connect lock, so calls queued on it do
        not each try at once); True once connected."""
        with self._connect_lock:
            if self._sock is not None:
                return True
            if gated and self._gate_pause() > 0:
                return False
            try:
                sock = socket.create_connection((self._host, self._port), timeout=_bounded(self.timeout, until))
            except OSError as e:
                self._gate_shut()
                raise PathdDisconnected("cannot connect to %s:%d: %s" % (self._host, self._port, e))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            # Auth and GetLimits are registered (and _limits_due set) in the
            # section that makes sock the connection, and written before
            # the send lock lets any other thread's frame out: a request
            # from another thread never goes ahead of them.
            with self._send_lock:
                with self._lock:
                    if self._closes:
                        # close() came while this connected (it found no
                        # connection to close): sock is not the client's.
                        sock.close()
                        raise PathdClosed()
                    self._sock = sock
                    self._connected_at = time.monotonic()
                    self.reconnects += 1 if self._ever_connected else 0
                    self._ever_connected = True
                    sent = []
                    for op, on_answer in self._ask_first(self.flow_control):
                        op.request.id, p = self._register(sock, op, False, on_answer)
                        sent.append((op, p))
                try:
                    sock.settimeout(self.timeout)
                    sock.sendall(b"".join(_frame(op.request) for op, _ in sent))
                    failure = None
                except OSError as e:  # socket.timeout too: a frame may be cut
                    failure = "send failed: %s" % e
            self._reader = threading.Thread(target=self._read_loop, args=(sock,), daemon=True,
                                            name="pathd-reader")
            self._reader.start()
            self._sender = threading.Thread(target=self._send_loop, args=(sock,), daemon=True,
                                            name="pathd-sender")
            self._sender.start()
            deadline = time.monotonic() + _bounded(self.timeout, until)
            try:
                if failure is not None:
                    self._gate_shut()
                    raise PathdDisconnected(failure)
                self._await_first(sent, deadline)
            except PathdError as e:
                # Not close(): a call that is connecting may still retry.
                self._drop(PathdDisconnected, "connect() failed: %s" % e)
                raise
            return True

    def _await_first(self, sent, deadline):
        """Waits for the answers of _ask_first's requests until deadline: a
        refused token raises; Auth or GetLimits answered with a retryable
        status (DRAINING) raises PathdDisconnected (_first_refused); past
        the deadline it goes on (their answers apply when they come; module
        notes, "Flow control")."""
        try:
            for i, (op, p) in enumerate(sent):
                answer = self._wait(p, deadline)
                if self._status(answer) in _RETRYABLE:
                    with self._lock:
                        raise self._first_refused(op, p, answer, sent[i + 1:])
                if op.request.WhichOneof("body") == "auth":
                    self._accept(op, answer)
        except PathdTimeout:
            pass

    def _connect_until(self, deadline, until=None):
        """connect(), first replacing a connection older than
        max_connection_age; with reconnect on, a failed connect is tried
        again when the client's reconnect gate opens (_gate_shut), until
        deadline. Each connect's own waits are the timeout's, cut only by
        until, the call's own deadline (batch()): PathdTimeout once it has
        passed. (deadline, the retry deadline, is 0 s away with
        retry_deadline=0, which must not make a connect impossible.)
        PathdClosed after close()."""
        self._check_open()
        if self._sock is not None:
            if not self._aged():
                return
            with self._lock:
                self._retire(self._sock)
        failure = None
        while True:
            self._check_open()  # close() came while this waited or failed to connect
            pause = self._gate_wait(deadline, until, failure)
            if pause > 0:
                time.sleep(pause)
                continue
            try:
                if self._connect(until, gated=self.reconnect_lost):
                    return
            except PathdDisconnected as e:
                if not self.reconnect_lost:
                    raise
                failure = e

    def _retire(self, sock, refused=False):
        """With the lock held: sock (draining, or too old) takes no new
        request; the next call opens a new connection (at once when requests
        wait in the queue; after a reconnect pause when sock was refused on
        connect), and sock is closed once every answer owed on it has
        arrived. Its watches end."""
        if sock is None or sock is not self._sock:
            return
        self._sock = None
        self._retiring.add(sock)
        # The new connection starts with every slot free; answers still due
        # on sock free nothing there.
        self._used = 0
        self._held.clear()
        self._end_watches("DRAINING", "the connection was replaced (draining or max_connection_age)")
        self._lock.notify_all()
        self._sendable.notify_all()  # sock's sender thread ends; the queue waits for the next
        if refused:  # not straight back to a replica that refused us
            self._gate_shut()
        self._close_if_done(sock)
        self._carry_queue()

    def _carry_queue(self):
        """With the lock held (_retire): requests held back in the queue
        belong on the next connection, opened now on a thread of its own,
        as the Node client does. (Nothing opened it but the next call: a
        queue of blocking calls behind the cap waited until their timeouts
        after a DRAINING frame.) A carry already under way whose new
        connection this retires goes round again (_carry_again): before,
        the queue was stranded until its timeouts."""
        if not self._queue:
            return
        if self._carrying:
            self._carry_again = True
            return
        self._carrying = True
        self._carry_again = False
        threading.Thread(target=self._carry_queue_run, args=(self._closes,), daemon=True,
                         name="pathd-carry").start()

    def _carry_queue_run(self, closes):
        while True:
            try:
                if self._closes == closes:  # (the reconnect gate paces it after a refusal)
                    self._connect_until(time.monotonic() + self.retry_deadline)
            except PathdError:
                pass  # the queued calls time out, or reconnect, on their own
            with self._lock:
                again = (self._carry_again and self._closes == closes and self._sock is None
                         and bool(self._queue))
                self._carry_again = False
                if not again:
                    self._carrying = False
                    break
        if self._closes != closes:  # close() came while it connected
            self._drop(PathdDisconnected, "connection closed by the client")

    def _close_if_done(self, sock):
        """With the lock held: closes a retired sock once nothing is owed on it."""
        if sock not in self._retiring or any(p.sock is sock and not p.done for p in self._pending.values()):
            return
        self._retiring.discard(sock)
        try:
            sock.shutdown(socket.SHUT_RDWR)  # wakes its reader thread
        except OSError:
            pass
        sock.close()

    def reconnect(self):
        """Drops the connection (unanswered requests fail with
        PathdDisconnected) and connects again."""
        self._drop(PathdDisconnected, "connection dropped by reconnect()")
        self.connect()

    def close(self):
        """Closes the connection for good; unanswered requests fail with
        PathdDisconnected (a call retrying meanwhile gives up rather than
        connect again), and later calls raise PathdClosed. Connections
        retired (draining, or older than max_connection_age) close too:
        the calls still owed an answer there waited out their timeouts."""
        self._closes += 1
        with self._lock:
            for sock in list(self._retiring):
                self._fail(sock, PathdDisconnected, "connection closed by the client")
        self._drop(PathdDisconnected, "connection closed by the client")

    def _drop(self, error_class, message):
        with self._lock:
            threads = (self._reader, self._sender)
            self._fail(self._sock, error_class, message)
        for thread in threads:
            if thread is not None and thread is not threading.current_thread():
                thread.join(timeout=self.timeout)

    @property
    def connected(self):
        return self._sock is not None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _fail(self, sock, error_class, message):
        """With the lock held: closes sock if it is still the connection;
        every request still waiting fails with error_class. A retired sock
        that fails fails only the requests sent on it."""
        if sock is not None and sock in self._retiring:
            self._retiring.discard(sock)
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes its reader thread (close() alone does not)
            except OSError:
                pass
            sock.close()
            for p in self._pending.values():
                if not p.done and p.sock is sock:
                    p.error = (error_class, message)
                    self._complete(p)
            self._lock.notify_all()
            return
        if sock is None or sock is not self._sock:
            return
        self._sock = None
        try:
            sock.shutdown(socket.SHUT_RDWR)  # wakes the reader thread
        except OSError:
            pass
        sock.close()
        self._fail_pending(error_class, message, sock)
        self._lock.notify_all()
        self._sendable.notify_all()  # the sender thread sees the socket gone and ends

    def _complete(self, p):
        p.done = True
        if p.pipelined:
            self._completed.append(p)

    # ---- the reader thread -------------------------------------------------------

    def _read_loop(self, sock):
        buf = bytearray()
        error = (PathdDisconnected, "server closed the connection")
        try:
            while True:
                try:
                    data = sock.recv(_RECV_BYTES)
                except socket.timeout:
                    continue
                if not data:
                    break
                buf += data
                with self._lock:
                    if sock is not self._sock and sock not in self._retiring:
                        return
                    while True:
                        taken = _take_frame(buf)
                        if taken is None:
                            break
                        del buf[:taken[1]]
                        self._dispatch(sock, taken[0])
                        if sock is not self._sock and sock not in self._retiring:
                            return
                    self._close_if_done(sock)
                    self._lock.notify_all()
        except _Violation as e:
            error = (PathdProtocolError, str(e))
        except OSError as e:
            error = (PathdDisconnected, "receive failed: %s" % e)
        with self._lock:
            if sock is self._sock:  # lost, not closed by us: the next connect waits a step
                self._gate_shut()
            self._fail(sock, *error)

    # ---- sending and waiting ------------------------------------------------------

    def _send(self, request, op, pipelined, on_answer=None):
        """Sends one request on the current connection, or queues it behind
        the in-flight cap for the sender thread; returns its _Pending (the
        id for an untracked one, op None). Raises PathdQueueFull."""
        with self._lock:
            sock = self._sock
            slots = _weight(request)
            now = self._fits(slots)
            if not now and sock is not None:
                self._check_queue_room()
            request_id, p = self._register(sock, op, pipelined, on_answer)
            request.id = request_id
            if not now:
                if p is not None:
                    p.sock = None  # not sent yet: _next_queued says where it goes
                self._queue.append((request, p, slots))
                self._sendable.notify()
                return p if p is not None else request_id
            self._take_slots(request)
        self._write(sock, request)
        return p if p is not None else request_id

    def _send_loop(self, sock):
        """The sender thread: sends held-back requests as answers free
        slots, in the order they were queued, until sock is closed."""
        while True:
            with self._lock:
                request = None
                while sock is self._sock:
                    request = self._next_queued()
                    if request is not None:
                        break
                    self._sendable.wait()
                if request is None:
                    return
            try:
                self._write(sock, request, forget=False)
            except PathdError:
                return  # _write failed the connection and every request

    def _slots_freed(self):
        if self._queue:
            self._sendable.notify()

    def _write(self, sock, request, forget=True):
        """Writes one request frame whole; on failure closes the connection
        (a half-written frame cannot be taken back) and raises. forget=False
        (the sender thread) leaves the request to fail with the others, so
        recv() reports it."""
        request_id = request.id
        data = _frame(request)
        with self._send_lock:
            try:
                sock.settimeout(self.timeout)
                sock.sendall(data)
                return
            except socket.timeout:
                # Part of the frame may be out: the stream cannot be resumed.
                failure = (PathdTimeout, "send timed out after %gs; connection closed" % self.timeout)
            except OSError as e:
                failure = (PathdDisconnected, "send failed: %s" % e)
        with self._lock:
            p = self._pending.get(request_id)
            if p is not None and p.done and p.error is not None:
                # The connection was given up first (close() from another
                # thread, a lost connection), which shut the socket under
                # the write: its reason, not the dead socket's errno.
                failure = p.error
            if forget:
                self._forget(request_id)
            self._fail(sock, PathdDisconnected, failure[1])
        raise failure[0](failure[1], request_id)

    def _wait(self, p, deadline=None):
        if deadline is None:
            deadline = time.monotonic() + self.timeout
        with self._lock:
            while not p.done:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    running, cancel = self._cancel_of(p)
                    error = self._give_up(p)
                    break
                self._lock.wait(remaining)
            else:
                self._forget(p.id)
                return self._outcome(p)
        if running is not None:
            try:
                self._write(running, cancel)
            except PathdError:
                pass  # the connection failed with it: nothing runs there any more
        raise error

    def _roundtrip(self, op, answer=None, recover=True, sent=None, until=None):
        """Send, wait, and retry a retryable answer (_RETRYABLE) with
        jittered backoff until the retry deadline; returns the call's value.
        With recover (not inside connect()), (re)connects first, with
        backoff, and sends op again when its connection was lost and op is
        _resendable. With answer, op was already sent once and answered that;
        with sent (its _Pending), op was already sent once and is waited for
        first, so a lost connection sends it again as any call (auth()).
        With until (a batch's deadline), every wait and retry ends by it:
        PathdTimeout past it."""
        deadline = _until(time.monotonic() + self.retry_deadline, until)
        backoff = RETRY_BACKOFF_FIRST_S
        lost_backoff = RECONNECT_BACKOFF_FIRST_S
        closes = self._closes
        attempt = 1
        while True:
            sock = None
            if answer is None:
                try:
                    if sent is not None:
                        p, sent = sent, None
                    else:
                        if recover:
                            self._connect_until(deadline, until)
                        p = self._send(op.request, op, False)
                    sock = p.sock
                    answer = self._wait(p, until)
                except PathdDisconnected:
                    pause = self._reconnect_pause(lost_backoff, deadline)
                    if not recover or not self._may_resend(op, deadline, closes) or pause is None:
                        raise
                    self.resent += 1
                    time.sleep(pause)  # a server that accepts and closes is not hammered
                    lost_backoff = min(lost_backoff * 2, RECONNECT_BACKOFF_MAX_S)
                    if self._closes != closes:
                        raise
                    continue
            pause = self._retry_pause(answer, attempt, backoff, deadline)
            if pause is None:
                self._served(answer)
                return self._accept(op, answer)
            if self._status(answer) == "DRAINING":
                with self._lock:
                    self._retire(sock or self._sock)
            time.sleep(pause)
            backoff = min(backoff * 2, RETRY_BACKOFF_MAX_S)
            answer = None
            attempt += 1
            if self._closes != closes:
                raise PathdDisconnected("connection closed by the client")

    def _call(self, op):
        return self._roundtrip(op)

    def _batch(self, items, op):
        """A batch, framed (_batch_frames) once the connection's GetLimits
        has answered. The timeout bounds the whole call (PathdTimeout past
        it): connecting, the wait for GetLimits (nothing sent if it does not
        answer), every frame's answer and any retry or resend. (Each step
        had its own timeout: a GetLimits answered just in time left the
        frames a whole timeout more, so a batch could take twice it.)"""
        deadline = time.monotonic() + self.timeout
        retry_deadline = _until(time.monotonic() + self.retry_deadline, deadline)
        self._connect_until(retry_deadline, deadline)
        while not self._await_limits(deadline):
            self._connect_until(retry_deadline, deadline)  # lost or replaced meanwhile
        ops = self._batch_frames(items, op)
        return self._roundtrip(op, until=deadline) if len(ops) == 1 else self._call_many(ops, deadline)

    def _await_limits(self, deadline):
        """Waits until the current connection's GetLimits has answered
        (at once without flow control): True, or False when the connection
        was lost or replaced first (the next one asks its own). Raises
        PathdTimeout past deadline."""
        with self._lock:
            sock = self._sock
            while sock is not None and self._sock is sock and self._limits_due:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self._limits_timeout()
                self._lock.wait(remaining)
            return self._limits_wait_ended(sock, deadline)

    def _limits_settled(self):
        self._lock.notify_all()  # (the reader holds the lock) wakes _await_limits

    def _call_many(self, ops, until):
        """Several calls in flight together (a batch split in frames), all
        ended by until; their values in order. The first error is raised
        once all have ended."""
        sent = []
        try:
            for op in ops:
                sent.append(self._send(op.request, op, False))
        except PathdError:
            with self._lock:  # those sent are given up: their answers are dropped
                for p in sent:
                    self._forget(p.id)
            raise
        outcomes = []
        for op, p in zip(ops, sent):
            try:
                outcomes.append((op, self._wait(p, until), None))
            except PathdError as e:
                outcomes.append((op, None, e))
        values = []
        for op, answer, error in outcomes:
            if isinstance(error, PathdDisconnected) and self.reconnect_lost:
                values.extend(self._roundtrip(op, until=until))  # a batch is queries only: sent again
                continue
            if error is not None:
                raise error
            values.extend(self._roundtrip(op, answer, until=until))
        return values

    def _send_op(self, op):
        self._connect_until(time.monotonic() + self.retry_deadline)
        return self._send(op.request, op, True).id

    def auth(self, token):
        """Authenticates this connection (and every later reconnect) with token;
        returns the role granted. A wrong token raises PathdError
        UNAUTHENTICATED after about a second, and the server closes the
        connection. The limits a server with tokens refused before are read
        now (flow control)."""
        self.token = token
        self._connect_until(time.monotonic() + self.retry_deadline)
        deadline = time.monotonic() + self.timeout
        sent = [(op, self._send(op.request, op, False, on_answer))
                for op, on_answer in self._ask_first(self._limits_refused())]
        # Auth is waited for inside _roundtrip: retried, and sent again on
        # a new connection when this one is lost (it changes nothing).
        try:
            role = self._roundtrip(sent[0][0], sent=sent[0][1])
        except PathdError:
            with self._lock:  # no one waits for GetLimits; a late answer still applies
                for _, p in sent[1:]:
                    self._forget(p.id)
            raise
        with self._lock:
            rest = self._still_owed(sent[1:])
        self._await_first(rest, deadline)
        return role

    def send_cancel(self, target_id):
        """Asks the server to stop working on target_id; its answer (CANCELLED,
        or the normal result if it finished first) still comes through recv()."""
        self.connect()
        with self._lock:
            if self._cancel_queued(target_id):
                self._lock.notify_all()
                return
        # The acknowledgement is not tracked; _dispatch drops it.
        self._send(_cancel_request(target_id), None, False)

    def recv(self, timeout=None):
        """Hands back the next completed pipelined request, whatever its id,
        in completion order, waiting up to timeout seconds (default: the
        client's): a PathResult or an Answer dict with any wire status
        (OVERLOADED included). Raises PathdDisconnected / PathdProtocolError
        (with .request_id) once for each request lost with the connection,
        PathdTimeout when nothing completed in time, and PathdError("IDLE")
        when nothing pipelined is in flight."""
        wait = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + wait
        with self._lock:
            while True:
                answer = self._take_completed(wait, deadline)
                if answer is not None:
                    return answer
                self._lock.wait(deadline - time.monotonic())

    def watch_next(self, timeout=None):
        """The next event of any watch on this connection, waiting up to
        timeout seconds (default: the client's), as the dict pathctl watch
        --json prints: status ("WATCH_OVERFLOW" ends the watch), watch,
        kind ("started", "updated", "replaced", "instanced", "dropped",
        "ended", "agents_cut", "agents_displaced", "agents_expired", "agents_released"), scene, version,
        changed [x0, y0, x1, y1] or None, cells_changed and ops [{set, cost,
        bounds, cells}] for an update, instance, agents (ascending) and
        cut_at_ms for agents_cut (the update that made version cut their
        reservations; it follows that update's "updated"), agents
        (ascending) for agents_displaced (a ReservePath moved them aside;
        its answer's displaced holds their plans), for agents_expired
        (reservation_ttl_ms released them) and for agents_released
        (ReleaseAgent all released them), final. Raises PathdTimeout, PathdError("IDLE") when no
        watch is open and none is queued, PathdDisconnected."""
        wait = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + wait
        with self._lock:
            while True:
                event = self._take_event(wait, deadline)
                if event is not None:
                    return event
                self._lock.wait(deadline - time.monotonic())

    def _event_arrived(self):
        pass  # the reader thread notifies every waiter after each read

    def scene_grid(self, scene, unit_size=0):
        """The whole grid (the scene's, or the unit-K grid), read band by
        band and started over when the scene changes between bands:
        {status, version, width, height, cells (bytes, row-major)}.
        grid_rows() turns it into the ASCII map pathctl grid prints."""
        steps = _grid_steps(scene, unit_size)
        step = next(steps)
        while not isinstance(step, Answer):
            step = steps.send(self._try_call(step))
        return step

    def _try_call(self, op):
        try:
            return self._call(op)
        except PathdError as e:
            return e


def _grid_steps(scene, unit_size):
    """scene_grid as a generator both clients drive: yields the op of the
    next band, takes back its answer (or the PathdError it raised) and
    yields the whole grid, an Answer, last."""
    for _ in range(SCENE_GRID_RESTARTS):
        grid = _GridReader(scene, unit_size)
        while not grid.done:
            band = yield grid.next_op()
            if isinstance(band, PathdError):
                grid.refused(band)
            else:
                grid.add(band)
        if grid.result is not None:
            yield grid.result
            return
    raise PathdError("INTERNAL", "scene %s kept changing while its grid was read" % scene)


class _GridReader:
    """Joins the bands of one pass over a grid; result None when the
    version changed midway (start over)."""

    def __init__(self, scene, unit_size):
        self.scene, self.unit_size = scene, unit_size
        self.rows = []
        self.version = None
        self.next_row = 0
        self.done = False
        self.result = None
        self.first = None

    def next_op(self):
        return _scene_grid_op(self.scene, self.unit_size, self.next_row, 0)

    def refused(self, error):
        """A later band OUT_OF_BOUNDS: the grid shrank meanwhile, start over."""
        if error.status != "OUT_OF_BOUNDS" or self.next_row == 0:
            raise error
        self.done = True

    def add(self, band):
        if self.first is None:
            self.first = band
        elif band["version"] != self.first["version"]:
            self.done = True
            return
        self.rows.append(band["cells"])
        self.next_row += band["row_count"]
        if self.next_row >= band["height"]:
            self.done = True
            self.result = Answer(band.id, {"status": "OK", "version": band["version"],
                                           "width": band["width"], "height": band["height"],
                                           "cells": b"".join(self.rows)})


class AsyncPathdClient(_Api):
    """PathdClient's calls as coroutines, on asyncio streams.

    One reader task per connection files answers by id, so concurrent calls
    (asyncio.gather, several tasks) share the socket. Use it from one event
    loop. The connection opens on the first call (or connect()); close()
    is a coroutine; `async with AsyncPathdClient(addr) as client:` closes it.
    Same methods, arguments and answers as PathdClient, each awaited:
    await client.find_path(...), await client.send(...), await client.recv()."""

    def __init__(self, addr=DEFAULT_SERVER, timeout=DEFAULT_TIMEOUT_S,
                 retry_attempts=RETRY_ATTEMPTS, token=None, flow_control=True,
                 max_queued=DEFAULT_MAX_QUEUED, retry_deadline=None, reconnect=True,
                 max_connection_age=MAX_CONNECTION_AGE_S, idempotency_keys=True):
        """As PathdClient (there is no connect argument: the first call connects)."""
        self._setup(addr, timeout, retry_attempts, token, flow_control, max_queued, retry_deadline,
                    reconnect, max_connection_age, idempotency_keys)
        self._connect_lock = None      # made on first use, inside the loop
        self._writer = None
        self._retiring = set()         # draining or aged writers still owed answers
        self._carry_task = None        # opens the next connection for the queue
        self._reader_task = None
        self._completed_event = None
        self._event_event = None       # set when a watch event arrives
        self._limits_event = None      # set when GetLimits answers or the connection goes

    # ---- connection -------------------------------------------------------------

    async def connect(self):
        """As PathdClient.connect."""
        await self._connect_until(time.monotonic() + self.retry_deadline)

    async def _connect(self, until=None, gated=False):
        """As PathdClient._connect."""
        if self._connect_lock is None:
            self._connect_lock = asyncio.Lock()
            self._completed_event = asyncio.Event()
            self._event_event = asyncio.Event()
            self._limits_event = asyncio.Event()
        async with self._connect_lock:
            if self._writer is not None:
                return True
            if gated and self._gate_pause() > 0:
                return False
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(self._host, self._port), _bounded(self.timeout, until))
            except (OSError, asyncio.TimeoutError) as e:
                self._gate_shut()
                raise PathdDisconnected("cannot connect to %s:%d: %s"
                                        % (self._host, self._port, e or "timed out"))
            if self._closes:  # as PathdClient._connect
                writer.close()
                raise PathdClosed()
            writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._writer = writer
            self._connected_at = time.monotonic()
            self.reconnects += 1 if self._ever_connected else 0
            self._ever_connected = True
            self._reader_task = asyncio.ensure_future(self._read_loop(reader, writer))
            deadline = time.monotonic() + _bounded(self.timeout, until)
            try:
                sent = [(op, await self._send(op.request, op, False, on_answer))
                        for op, on_answer in self._ask_first(self.flow_control)]
                await self._await_first(sent, deadline)
            except PathdError as e:
                # Not close(): a call that is connecting may still retry.
                await self._drop(PathdDisconnected, "connect() failed: %s" % e)
                raise
            return True

    async def _await_first(self, sent, deadline):
        """As PathdClient._await_first."""
        try:
            for i, (op, p) in enumerate(sent):
                answer = await self._wait(p, deadline)
                if self._status(answer) in _RETRYABLE:
                    raise self._first_refused(op, p, answer, sent[i + 1:])
                if op.request.WhichOneof("body") == "auth":
                    self._accept(op, answer)
        except PathdTimeout:
            pass

    async def _connect_until(self, deadline, until=None):
        """As PathdClient._connect_until."""
        self._check_open()
        if self._writer is not None:
            if not self._aged():
                return
            self._retire(self._writer)
        failure = None
        while True:
            self._check_open()  # as PathdClient._connect_until
            pause = self._gate_wait(deadline, until, failure)
            if pause > 0:
                await asyncio.sleep(pause)
                continue
            try:
                if await self._connect(until, gated=self.reconnect_lost):
                    return
            except PathdDisconnected as e:
                if not self.reconnect_lost:
                    raise
                failure = e

    def _retire(self, writer, refused=False):
        """As PathdClient._retire."""
        if writer is None or writer is not self._writer:
            return
        self._writer = None
        self._retiring.add(writer)
        self._used = 0
        self._held.clear()
        self._end_watches("DRAINING", "the connection was replaced (draining or max_connection_age)")
        self._limits_settled()  # a batch waiting for this connection's limits looks again
        if refused:
            self._gate_shut()
        self._close_if_done(writer)
        if not self._queue:
            return
        if self._carry_task is None or self._carry_task.done():
            self._carry_again = False
            self._carry_task = asyncio.ensure_future(self._carry_queue_run(self._closes))
        else:
            self._carry_again = True  # the carry under way goes round again

    async def _carry_queue_run(self, closes):
        """As PathdClient._carry_queue: the queue's next connection, now."""
        while True:
            try:
                if self._closes == closes:
                    await self._connect_until(time.monotonic() + self.retry_deadline)
            except PathdError:
                pass
            again = (self._carry_again and self._closes == closes and self._writer is None
                     and bool(self._queue))
            self._carry_again = False
            if not again:
                break
        if self._closes != closes:
            await self._drop(PathdDisconnected, "connection closed by the client")

    def _close_if_done(self, writer):
        if writer not in self._retiring or any(p.sock is writer and not p.done
                                               for p in self._pending.values()):
            return
        self._retiring.discard(writer)
        writer.close()

    async def reconnect(self):
        await self._drop(PathdDisconnected, "connection dropped by reconnect()")
        await self.connect()

    async def close(self):
        """As PathdClient.close."""
        self._closes += 1
        for writer in list(self._retiring):
            self._fail(writer, PathdDisconnected, "connection closed by the client")
        await self._drop(PathdDisconnected, "connection closed by the client")

    async def _drop(self, error_class, message):
        task = self._reader_task
        self._fail(self._writer, error_class, message)
        if task is not None and task is not asyncio.current_task():
            try:
                await task
            except asyncio.CancelledError:
                pass

    @property
    def connected(self):
        return self._writer is not None

    @property
    def _sock(self):
        """The current connection, under the name the shared code uses."""
        return self._writer

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    def _fail(self, writer, error_class, message):
        if writer is not None and writer in self._retiring:
            self._retiring.discard(writer)
            writer.close()
            for p in list(self._pending.values()):
                if not p.done and p.sock is writer:
                    p.error = (error_class, message)
                    self._complete(p)
            return
        if writer is None or writer is not self._writer:
            return
        self._writer = None
        writer.close()
        self._fail_pending(error_class, message, writer)
        self._limits_settled()

    def _complete(self, p):
        p.done = True
        if p.pipelined:
            self._completed.append(p)
            self._completed_event.set()
        if p.waiter is not None and not p.waiter.done():
            p.waiter.set_result(None)

    async def _read_loop(self, reader, writer):
        error = (PathdDisconnected, "server closed the connection")
        try:
            while writer is self._writer or writer in self._retiring:
                (length,) = _HEADER.unpack(await reader.readexactly(_HEADER.size))
                if length > MAX_FRAME_BYTES:
                    raise _Violation("server sent a %d-byte frame, above the %d-byte limit"
                                     % (length, MAX_FRAME_BYTES))
                self._dispatch(writer, _decode(await reader.readexactly(length)))
                self._close_if_done(writer)
        except asyncio.IncompleteReadError:
            pass
        except _Violation as e:
            error = (PathdProtocolError, str(e))
        except OSError as e:
            error = (PathdDisconnected, "receive failed: %s" % e)
        if writer is self._writer:  # lost, not closed by us: the next connect waits a step
            self._gate_shut()
        self._fail(writer, *error)

    # ---- sending and waiting ------------------------------------------------------

    async def _send(self, request, op, pipelined, on_answer=None):
        writer = self._writer
        slots = _weight(request)
        now = self._fits(slots)
        if not now and writer is not None:
            self._check_queue_room()
        request_id, p = self._register(writer, op, pipelined, on_answer)
        if p is not None:
            p.waiter = asyncio.get_running_loop().create_future()
        request.id = request_id
        if not now:
            # Sent by _slots_freed when answers make room.
            if p is not None:
                p.sock = None  # not sent yet: _next_queued says where it goes
            self._queue.append((request, p, slots))
            return p if p is not None else request_id
        self._take_slots(request)
        writer.write(_frame(request))  # whole frames: write() never interleaves
        try:
            await asyncio.wait_for(writer.drain(), self.timeout)
        except asyncio.TimeoutError:
            failure = (PathdTimeout, "send timed out after %gs; connection closed" % self.timeout)
        except OSError as e:
            failure = (PathdDisconnected, "send failed: %s" % e)
        else:
            return p if p is not None else request_id
        self._forget(request_id)
        self._fail(writer, PathdDisconnected, failure[1])
        raise failure[0](failure[1], request_id)

    def _slots_freed(self):
        """Sends what the freed slots make room for. write() only buffers
        (the cap bounds how much); the next call's drain() flushes it."""
        while True:
            request = self._next_queued()
            if request is None:
                return
            self._writer.write(_frame(request))

    async def _wait(self, p, deadline=None):
        wait = self.timeout if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            await asyncio.wait_for(asyncio.shield(p.waiter), wait)
        except asyncio.TimeoutError:
            writer, cancel = self._cancel_of(p)
            if writer is not None:
                # write() only buffers, so the caller hears of its timeout
                # now; a connection that fails meanwhile ends the search too.
                writer.write(_frame(cancel))
            raise self._give_up(p)
        self._forget(p.id)
        return self._outcome(p)

    async def _roundtrip(self, op, answer=None, recover=True, sent=None, until=None):
        """As PathdClient._roundtrip."""
        deadline = _until(time.monotonic() + self.retry_deadline, until)
        backoff = RETRY_BACKOFF_FIRST_S
        lost_backoff = RECONNECT_BACKOFF_FIRST_S
        closes = self._closes
        attempt = 1
        while True:
            sock = None
            if answer is None:
                try:
                    if sent is not None:
                        p, sent = sent, None
                    else:
                        if recover:
                            await self._connect_until(deadline, until)
                        p = await self._send(op.request, op, False)
                    sock = p.sock
                    answer = await self._wait(p, until)
                except PathdDisconnected:
                    pause = self._reconnect_pause(lost_backoff, deadline)
                    if not recover or not self._may_resend(op, deadline, closes) or pause is None:
                        raise
                    self.resent += 1
                    await asyncio.sleep(pause)
                    lost_backoff = min(lost_backoff * 2, RECONNECT_BACKOFF_MAX_S)
                    if self._closes != closes:
                        raise
                    continue
            pause = self._retry_pause(answer, attempt, backoff, deadline)
            if pause is None:
                self._served(answer)
                return self._accept(op, answer)
            if self._status(answer) == "DRAINING":
                self._retire(sock or self._writer)
            await asyncio.sleep(pause)
            backoff = min(backoff * 2, RETRY_BACKOFF_MAX_S)
            answer = None
            attempt += 1
            if self._closes != closes:
                raise PathdDisconnected("connection closed by the client")
            answer = None

    async def _call(self, op):
        return await self._roundtrip(op)

    async def _batch(self, items, op):
        """As PathdClient._batch."""
        deadline = time.monotonic() + self.timeout
        retry_deadline = _until(time.monotonic() + self.retry_deadline, deadline)
        await self._connect_until(retry_deadline, deadline)
        while not await self._await_limits(deadline):
            await self._connect_until(retry_deadline, deadline)
        ops = self._batch_frames(items, op)
        return await (self._roundtrip(op, until=deadline) if len(ops) == 1 else self._call_many(ops, deadline))

    async def _await_limits(self, deadline):
        """As PathdClient._await_limits: _limits_event is set when GetLimits
        answers and when the connection is lost or retired."""
        writer = self._writer
        while writer is not None and self._writer is writer and self._limits_due:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._limits_timeout()
            self._limits_event.clear()
            try:
                await asyncio.wait_for(self._limits_event.wait(), remaining)
            except asyncio.TimeoutError:
                pass
        return self._limits_wait_ended(writer, deadline)

    def _limits_settled(self):
        self._limits_event.set()

    async def _call_many(self, ops, until):
        """As PathdClient._call_many."""
        sent = []
        try:
            for op in ops:
                sent.append(await self._send(op.request, op, False))
        except PathdError:
            for p in sent:
                self._forget(p.id)
            raise
        outcomes = await asyncio.gather(*(self._wait(p, until) for p in sent), return_exceptions=True)
        values = []
        for op, answer in zip(ops, outcomes):
            if isinstance(answer, PathdDisconnected) and self.reconnect_lost:
                values.extend(await self._roundtrip(op, until=until))  # a batch is queries only: sent again
                continue
            if isinstance(answer, BaseException):
                raise answer
            values.extend(await self._roundtrip(op, answer, until=until))
        return values

    async def _send_op(self, op):
        await self._connect_until(time.monotonic() + self.retry_deadline)
        return (await self._send(op.request, op, True)).id

    async def auth(self, token):
        """As PathdClient.auth."""
        self.token = token
        await self._connect_until(time.monotonic() + self.retry_deadline)
        deadline = time.monotonic() + self.timeout
        sent = [(op, await self._send(op.request, op, False, on_answer))
                for op, on_answer in self._ask_first(self._limits_refused())]
        try:
            role = await self._roundtrip(sent[0][0], sent=sent[0][1])
        except PathdError:
            for _, p in sent[1:]:
                self._forget(p.id)
            raise
        await self._await_first(self._still_owed(sent[1:]), deadline)
        return role

    async def send_cancel(self, target_id):
        """As PathdClient.send_cancel."""
        await self.connect()
        if self._cancel_queued(target_id):
            return
        await self._send(_cancel_request(target_id), None, False)

    async def recv(self, timeout=None):
        """As PathdClient.recv."""
        wait = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + wait
        while True:
            answer = self._take_completed(wait, deadline)
            if answer is not None:
                return answer
            self._completed_event.clear()
            try:
                await asyncio.wait_for(self._completed_event.wait(), deadline - time.monotonic())
            except asyncio.TimeoutError:
                pass

    async def watch_next(self, timeout=None):
        """As PathdClient.watch_next."""
        wait = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + wait
        while True:
            event = self._take_event(wait, deadline)
            if event is not None:
                return event
            self._event_event.clear()
            try:
                await asyncio.wait_for(self._event_event.wait(), deadline - time.monotonic())
            except asyncio.TimeoutError:
                pass

    def _event_arrived(self):
        if self._event_event is not None:
            self._event_event.set()

    async def scene_grid(self, scene, unit_size=0):
        """As PathdClient.scene_grid."""
        steps = _grid_steps(scene, unit_size)
        step = next(steps)
        while not isinstance(step, Answer):
            step = steps.send(await self._try_call(step))
        return step

    async def _try_call(self, op):
        try:
            return await self._call(op)
        except PathdError as e:
            return e


# Calls a pool hands to one of its connections: every blocking call except
# those tied to one connection (send/recv, watches, cancel, auth).
_POOL_CALLS = frozenset([
    "find_path", "find_route", "update_cells", "create_scene", "create_instance", "drop_scene",
    "scene_grid_band", "scene_grid", "scenes", "scene_info", "stats", "limits", "ping", "reload",
    "raycast", "validate_move", "move_along", "nearest_walkable", "is_reachable", "random_point",
    "distance_to_wall", "batch"])


class _Pool:
    """What both pools share: N clients, and which one takes the next call."""

    def _start(self, clients):
        if not clients:
            raise ValueError("a pool needs at least one connection")
        self.clients = clients
        self._turn = itertools.count()

    def _pick(self):
        """The connection with the fewest slots in flight and requests queued;
        ties taken in turn, so idle connections share the calls too."""
        n = len(self.clients)
        start = next(self._turn) % n
        order = self.clients[start:] + self.clients[:start]
        return min(order, key=lambda c: c.slots_in_flight + c.queued)

    def __getattr__(self, name):
        if name not in _POOL_CALLS:
            raise AttributeError("%s has no %r (pipelined calls, watches and auth belong to one "
                                 "connection: use pool.clients[i])" % (type(self).__name__, name))
        return lambda *args, **options: getattr(self._pick(), name)(*args, **options)


class PathdPool(_Pool):
    """connections PathdClients to one server, each flow-controlled on its
    own, so a busy game server gets connections x max_inflight_per_conn
    requests in flight. Its blocking calls are those of PathdClient; each
    goes to the least loaded connection. Safe to share between threads."""

    def __init__(self, addr=DEFAULT_SERVER, connections=4, **options):
        """options are PathdClient's (timeout, token, max_queued, ...). When
        one cannot connect, those already made are closed before it raises."""
        clients = []
        try:
            for _ in range(connections):
                clients.append(PathdClient(addr, **options))
        except BaseException:
            for client in clients:
                client.close()
            raise
        self._start(clients)

    def close(self):
        for client in self.clients:
            client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class AsyncPathdPool(_Pool):
    """PathdPool on AsyncPathdClients: each call is awaited."""

    def __init__(self, addr=DEFAULT_SERVER, connections=4, **options):
        self._start([AsyncPathdClient(addr, **options) for _ in range(connections)])

    async def close(self):
        for client in self.clients:
            await client.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()
