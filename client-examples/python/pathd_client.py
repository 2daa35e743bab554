"""A small Python client for the pathd pathfinding daemon.

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
path arrives as one or more PathChunk frames; the last has final = true and
carries cost, expansions, search time and scene version. Answers to
different requests may arrive in any order and are matched by id.

Two ways to call, on one connection:
  - Blocking: find_path, scenes, scene_info, stats and ping send a request
    and wait for its answer. Answers to other requests that arrive meanwhile
    are kept for recv(). OVERLOADED is retried with exponential backoff, at
    most retry_attempts times in all (RETRY_ATTEMPTS unless the constructor
    was told otherwise).
  - Pipelined: send_find_path sends without waiting and returns the id;
    recv() hands back completed paths in completion order, whatever their id.
    OVERLOADED is handed back, not retried.

Errors: find_path returns a PathResult for OK and PARTIAL and raises
PathdError (its .status is the wire status name, e.g. "NO_PATH") for any
other answer. A request that got no answer raises a subclass:
PathdDisconnected (connection lost; every request still waiting fails with
it and nothing is resent), PathdTimeout or PathdProtocolError (the server
broke the protocol; the connection is closed, as the server does). The next
call, blocking or pipelined, reconnects to the same address by itself.

A PathdClient is not thread-safe: use one per thread, or your own lock.
"""

import random
import select
import socket
import struct
import time
from collections import deque, namedtuple

from google.protobuf.message import DecodeError

import pathd_pb2 as pb

DEFAULT_SERVER = "127.0.0.1:7420"
# Per-call timeout in seconds (connect, each blocking call, each send).
DEFAULT_TIMEOUT_S = 5.0
# Largest incoming frame accepted, in bytes. A path chunk is ~10 KiB, so this
# only protects the client's memory from a broken or hostile peer.
MAX_FRAME_BYTES = 16 * 1024 * 1024
# Most waypoints assembled for one path: more than any sane grid path, and a
# bound on what a misbehaving server can make us hold by streaming chunks.
MAX_PATH_WAYPOINTS = 4 * 1024 * 1024
# Blocking calls: total attempts when the server answers OVERLOADED, and the
# backoff between them in seconds, doubling from FIRST up to MAX. Five
# attempts wait at most 20+40+80+160 ms, short enough to stay interactive.
RETRY_ATTEMPTS = 5
RETRY_BACKOFF_FIRST_S = 0.020
RETRY_BACKOFF_MAX_S = 1.0

_HEADER = struct.Struct(">I")
# Bytes asked of the socket per recv(): a few typical path chunks.
_RECV_BYTES = 64 * 1024
_STYLES = {"cells": pb.STYLE_CELLS, "corners": pb.STYLE_CORNERS}
_CONNECTIVITY = {0: pb.CONNECTIVITY_DEFAULT, 8: pb.CONNECTIVITY_8, 4: pb.CONNECTIVITY_4}

SceneSummary = namedtuple("SceneSummary", "name width height version")
SceneInfo = namedtuple(
    "SceneInfo",
    "name width height origin_x origin_y cell_size unit_sizes version passable_cells")


class PathdError(Exception):
    """An answer other than OK/PARTIAL, or a request that got no answer.

    status is the wire status name ("UNKNOWN_SCENE", "OVERLOADED", ...) or,
    for the subclasses, "DISCONNECTED", "TIMEOUT" or "PROTOCOL_ERROR".
    request_id is the request's id when there was one; result is the
    PathResult of a path answer (its metrics), else None.
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


class _Violation(Exception):
    """Raised inside the reader when the server breaks the protocol."""


class PathResult:
    """One answered path request.

    waypoints are cells [(x, y)], world the centres of those cells in world
    coordinates [(wx, wy)]; version is the scene version the search ran on.
    """

    __slots__ = ("id", "status", "cost", "expansions", "search_micros", "version",
                 "waypoints", "world", "message")

    def __init__(self, request_id, status, message=""):
        self.id = request_id
        self.status = status
        self.message = message
        self.cost = 0.0
        self.expansions = 0
        self.search_micros = 0
        self.version = 0
        self.waypoints = []
        self.world = []

    @property
    def ok(self):
        """True for OK and PARTIAL: the waypoints are usable."""
        return self.status in ("OK", "PARTIAL")

    def __repr__(self):
        return "PathResult(id=%d, status=%s, cost=%g, expansions=%d, version=%d, waypoints=%d)" % (
            self.id, self.status, self.cost, self.expansions, self.version, len(self.waypoints))


class _Pending:
    """A request still waiting for its answer, or answered but not yet taken."""

    __slots__ = ("id", "is_path", "done", "error", "result", "response", "next_seq")

    def __init__(self, request_id, is_path):
        self.id = request_id
        self.is_path = is_path
        self.done = False
        self.error = None          # (exception class, message) when it got no answer
        self.result = PathResult(request_id, "OK") if is_path else None
        self.response = None       # a non-path request's answer frame
        self.next_seq = 0


def _status_name(number):
    try:
        return pb.Status.Name(number)
    except ValueError:
        return "UNKNOWN_STATUS_%d" % number


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


class PathdClient:
    """One TCP connection to pathd (see the module docstring)."""

    def __init__(self, addr=DEFAULT_SERVER, timeout=DEFAULT_TIMEOUT_S, connect=True,
                 retry_attempts=RETRY_ATTEMPTS, token=None):
        """addr is "host:port" or "[v6addr]:port"; timeout (seconds) bounds the
        connect, every blocking call and every send. With connect=False the
        first call connects. retry_attempts (>= 1) is how many times in all a
        blocking call sends a request the server answers OVERLOADED. token, for
        a server with auth.tokens, is sent first on every (re)connect; role
        then says what it granted ("query", "write" or "admin")."""
        self._host, self._port = _parse_addr(addr)
        if retry_attempts < 1:
            raise ValueError("retry_attempts must be at least 1")
        self.timeout = timeout
        self.retry_attempts = retry_attempts
        self._sock = None
        self._rbuf = bytearray()
        # Ids keep increasing across reconnects, so a late answer to an old
        # request can never be mistaken for a new one.
        self._next_id = 1
        self._pending = {}
        self._completed = deque()  # ids of finished path requests, completion order
        self.token = token
        self.role = None
        if connect:
            self.connect()

    # ---- connection ---------------------------------------------------------

    def connect(self):
        """Connects if not connected. Raises PathdDisconnected on failure."""
        if self._sock is not None:
            return
        try:
            sock = socket.create_connection((self._host, self._port), timeout=self.timeout)
        except OSError as e:
            raise PathdDisconnected("cannot connect to %s:%d: %s" % (self._host, self._port, e))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock = sock
        self._rbuf.clear()
        if self.token is not None:
            try:
                self.auth(self.token)
            except PathdError:
                self.close()
                raise

    def reconnect(self):
        """Drops the connection (unanswered requests fail with
        PathdDisconnected) and connects again."""
        self._fail(PathdDisconnected, "connection dropped by reconnect()")
        self.connect()

    def close(self):
        """Closes the connection; unanswered requests fail with PathdDisconnected."""
        self._fail(PathdDisconnected, "connection closed by the client")

    @property
    def connected(self):
        return self._sock is not None

    @property
    def in_flight(self):
        """Path requests sent but not yet handed back by recv() (nor by find_path)."""
        return sum(1 for p in self._pending.values() if p.is_path)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _fail(self, error_class, message):
        """Closes the socket; every request still waiting fails with error_class."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._rbuf.clear()
        for p in self._pending.values():
            if not p.done:
                p.error = (error_class, message)
                self._complete(p)

    def _ensure_connected(self):
        # A connection the server closed while we were idle (idle timeout,
        # restart) is noticed here rather than by the next request failing.
        while self._sock is not None and select.select([self._sock], [], [], 0)[0]:
            if not self._pump(time.monotonic()):
                break
        self.connect()

    # ---- sending ------------------------------------------------------------

    def _send(self, request, is_path):
        request_id = self._next_id
        self._next_id += 1
        request.id = request_id
        payload = request.SerializeToString()
        try:
            self._sock.settimeout(self.timeout)
            self._sock.sendall(_HEADER.pack(len(payload)) + payload)
        except socket.timeout:
            # Part of the frame may be out: the stream cannot be resumed.
            self._fail(PathdDisconnected, "send timed out; connection closed")
            raise PathdTimeout("send timed out after %gs; connection closed" % self.timeout,
                               request_id)
        except OSError as e:
            self._fail(PathdDisconnected, "send failed: %s" % e)
            raise PathdDisconnected("send failed: %s" % e, request_id)
        self._pending[request_id] = _Pending(request_id, is_path)
        return request_id

    # ---- receiving ----------------------------------------------------------

    def _take_frame(self):
        """The next whole frame in the read buffer, decoded, or None."""
        if len(self._rbuf) < _HEADER.size:
            return None
        (length,) = _HEADER.unpack_from(self._rbuf)
        # Checked before waiting for (and buffering) the frame's body.
        if length > MAX_FRAME_BYTES:
            raise _Violation("server sent a %d-byte frame, above the %d-byte limit"
                             % (length, MAX_FRAME_BYTES))
        end = _HEADER.size + length
        if len(self._rbuf) < end:
            return None
        response = pb.Response()
        try:
            response.ParseFromString(bytes(self._rbuf[_HEADER.size:end]))
        except DecodeError:
            raise _Violation("server sent a frame that does not decode")
        del self._rbuf[:end]
        return response

    def _pump(self, deadline):
        """Reads and files one frame, or notes the connection's loss.
        Returns False when the deadline passed first (nothing changed)."""
        while self._sock is not None:
            try:
                response = self._take_frame()
                if response is not None:
                    self._dispatch(response)
                    return True
            except _Violation as e:
                self._fail(PathdProtocolError, str(e))
                return True
            remaining = deadline - time.monotonic() if deadline is not None else None
            try:
                self._sock.settimeout(max(remaining, 0.0) if remaining is not None else None)
                data = self._sock.recv(_RECV_BYTES)
            except (socket.timeout, BlockingIOError):
                return False
            except OSError as e:
                self._fail(PathdDisconnected, "receive failed: %s" % e)
                return True
            if not data:
                self._fail(PathdDisconnected, "server closed the connection")
                return True
            self._rbuf += data
        return True

    def _complete(self, p):
        p.done = True
        if p.is_path:
            self._completed.append(p.id)

    def _dispatch(self, response):
        message = response.error.message if response.WhichOneof("body") == "error" else ""
        status = _status_name(response.status)
        if response.id == 0:
            # A connection-level error (frame too large, malformed, too many
            # connections): the server closes after it, so close our side too.
            if response.status != pb.OK:
                self._fail(PathdDisconnected, "server closed the connection after %s%s"
                           % (status, ": " + message if message else ""))
            return
        p = self._pending.get(response.id)
        if p is None or p.done:
            return  # the answer to a cancel, or to a request given up after a timeout
        if not p.is_path:
            # Single-frame answers: complete on the first frame even if a
            # server forgets to set final.
            p.response = response
            self._complete(p)
            return
        r = p.result
        if response.WhichOneof("body") == "path":
            chunk = response.path
            if chunk.seq != p.next_seq:
                raise _Violation("request %d: path chunk %d arrived, expected %d"
                                 % (p.id, chunk.seq, p.next_seq))
            p.next_seq += 1
            if len(r.waypoints) + len(chunk.waypoints) > MAX_PATH_WAYPOINTS:
                raise _Violation("request %d: path longer than %d waypoints"
                                 % (p.id, MAX_PATH_WAYPOINTS))
            for w in chunk.waypoints:
                r.waypoints.append((w.x, w.y))
                r.world.append((w.wx, w.wy))
            if response.final:
                if chunk.total_waypoints and chunk.total_waypoints != len(r.waypoints):
                    raise _Violation("request %d: final chunk says %d waypoints, %d arrived"
                                     % (p.id, chunk.total_waypoints, len(r.waypoints)))
                r.cost = chunk.cost
                r.expansions = chunk.expansions
                r.search_micros = chunk.search_micros
                r.version = chunk.scene_version
        if response.final:
            r.status = status
            r.message = message
            self._complete(p)

    def _wait(self, request_id):
        """Pumps frames until request_id completes; returns its entry."""
        deadline = time.monotonic() + self.timeout
        while True:
            p = self._pending[request_id]
            if p.done:
                del self._pending[request_id]
                if p.error:
                    error_class, message = p.error
                    raise error_class(message, request_id)
                return p
            if not self._pump(deadline):
                del self._pending[request_id]
                raise PathdTimeout("no answer within %gs" % self.timeout, request_id)

    def _call(self, request, is_path):
        """The blocking round trip: (re)connect, send, wait, and retry
        OVERLOADED with backoff. Returns the completed entry."""
        backoff = RETRY_BACKOFF_FIRST_S
        for attempt in range(1, self.retry_attempts + 1):
            self._ensure_connected()
            p = self._wait(self._send(request, is_path))
            status = p.result.status if is_path else _status_name(p.response.status)
            if status != "OVERLOADED" or attempt == self.retry_attempts:
                return p
            time.sleep(backoff)
            backoff = min(backoff * 2, RETRY_BACKOFF_MAX_S)

    # ---- paths --------------------------------------------------------------

    @staticmethod
    def _find_request(scene, start, goal, world=False, unit_size=0, connectivity=0,
                      style="cells", max_expansions=0, deadline_ms=0):
        if not isinstance(scene, str) or not scene:
            raise ValueError("scene must be a non-empty string")
        if connectivity not in _CONNECTIVITY:
            raise ValueError("connectivity must be 0 (server default, 8), 4 or 8")
        if style not in _STYLES:
            raise ValueError("style must be 'cells' or 'corners'")
        request = pb.Request()
        fp = request.find_path
        fp.scene = scene
        _point(fp.start, start, world)
        _point(fp.goal, goal, world)
        fp.unit_size = unit_size
        fp.connectivity = _CONNECTIVITY[connectivity]
        fp.style = _STYLES[style]
        fp.max_expansions = max_expansions
        fp.deadline_ms = deadline_ms
        return request

    def find_path(self, scene, start, goal, **options):
        """Asks for a path from start to goal, cells (x, y) unless world=True.

        Options (all optional, 0 means the server default): world,
        unit_size, connectivity (4 or 8), style ("cells" or "corners"),
        max_expansions, deadline_ms. Returns a PathResult for OK or PARTIAL;
        raises PathdError for any other answer (its .result holds the
        metrics), PathdDisconnected / PathdTimeout / PathdProtocolError when
        no answer came."""
        p = self._call(self._find_request(scene, start, goal, **options), True)
        if not p.result.ok:
            raise PathdError(p.result.status, p.result.message, p.id, p.result)
        return p.result

    def send_find_path(self, scene, start, goal, **options):
        """Sends a path request without waiting (options as find_path) and
        returns its id; collect the answer with recv()."""
        request = self._find_request(scene, start, goal, **options)
        self._ensure_connected()
        return self._send(request, True)

    def send_cancel(self, target_id):
        """Asks the server to stop working on target_id; its answer (CANCELLED,
        or the normal result if it finished first) still comes through recv()."""
        request = pb.Request()
        request.cancel.target_id = target_id
        self._ensure_connected()
        # The acknowledgement is not tracked; _dispatch drops it.
        self._send(request, False)
        del self._pending[request.id]

    def recv(self, timeout=None):
        """Hands back the next completed path request, whatever its id, in
        completion order, waiting up to timeout seconds (default: the
        client's). Returns a PathResult with any wire status (OVERLOADED
        included); raises PathdDisconnected / PathdProtocolError (with
        .request_id) once for each request lost with the connection,
        PathdTimeout when nothing completed in time, and PathdError("IDLE")
        when no path request is in flight."""
        wait = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + wait
        while True:
            while self._completed:
                p = self._pending.pop(self._completed.popleft(), None)
                if p is None:
                    continue  # already taken by a blocking call
                if p.error:
                    error_class, message = p.error
                    raise error_class(message, p.id)
                return p.result
            if not any(p.is_path for p in self._pending.values()):
                raise PathdError("IDLE", "no path request in flight")
            if not self._pump(deadline):
                raise PathdTimeout("no path completed within %gs" % wait)

    # ---- other requests -----------------------------------------------------

    def _call_other(self, request, body):
        p = self._call(request, False)
        response = p.response
        if response.status != pb.OK:
            message = response.error.message if response.WhichOneof("body") == "error" else ""
            raise PathdError(_status_name(response.status), message, p.id)
        if response.WhichOneof("body") != body:
            raise PathdProtocolError("answer to request %d has the wrong body" % p.id, p.id)
        return getattr(response, body)

    def auth(self, token):
        """Authenticates this connection (and every later reconnect) with token;
        returns the role granted. A wrong token raises PathdError
        UNAUTHENTICATED after about a second, and the server closes the
        connection."""
        self.token = token
        request = pb.Request()
        request.auth.token = token
        self.role = self._call_other(request, "auth").role
        return self.role

    def reload(self):
        """Admin: the server rereads its config and maps, as on SIGHUP."""
        request = pb.Request()
        request.reload.SetInParent()
        p = self._call(request, False)
        if p.response.status != pb.OK:
            message = p.response.error.message if p.response.WhichOneof("body") == "error" else ""
            raise PathdError(_status_name(p.response.status), message, p.id)

    def ping(self):
        """Round trip; returns the measured time in seconds."""
        request = pb.Request()
        request.ping.nonce = random.getrandbits(64)
        started = time.monotonic()
        pong = self._call_other(request, "pong")
        if pong.nonce != request.ping.nonce:
            raise PathdProtocolError("pong carries the wrong nonce")
        return time.monotonic() - started

    def scenes(self):
        """The served scenes, sorted by name, as SceneSummary tuples."""
        request = pb.Request()
        request.list_scenes.SetInParent()
        scene_list = self._call_other(request, "scene_list")
        return [SceneSummary(s.name, s.width, s.height, s.version) for s in scene_list.scenes]

    def scene_info(self, scene):
        """Details of one scene as a SceneInfo tuple; PathdError UNKNOWN_SCENE if absent."""
        request = pb.Request()
        request.scene_info.scene = scene
        i = self._call_other(request, "scene_info")
        return SceneInfo(i.name, i.width, i.height, i.origin_x, i.origin_y, i.cell_size,
                         list(i.unit_sizes), i.version, i.passable_cells)

    def stats(self):
        """Server-wide counters as a dict (field names of pathd.v1.Stats)."""
        request = pb.Request()
        request.stats.SetInParent()
        s = self._call_other(request, "stats")
        return {f.name: getattr(s, f.name) for f in s.DESCRIPTOR.fields}
