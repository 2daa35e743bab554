"""Tests of pathd_client.py against the live daemon and against fake servers.

Run by ctest (tests/clients.cmake) through scripts/run-with-daemon.sh, which
starts pathd on the demo world and exports PATHD_ADDR, PATHD_BIN and
PATHD_CONFIG; ctest also sets PATHCTL_BIN (the C reference client, whose
answers the Python client must match) and PYTHONPATH (this directory and
the protoc-generated pathd_pb2.py). By hand, from the repository root:

  scripts/run-with-daemon.sh --pathd build/server/pathd --config config/default.json \\
      -- env PATHCTL_BIN=$PWD/build/client-examples/c/pathctl \\
      PYTHONPATH=build/client-examples/python/gen:client-examples/python \\
      /usr/bin/python3 client-examples/python/test_pathd_client.py -v

The OVERLOADED cases use a second daemon with max_inflight_per_conn 1
(started here from PATHD_BIN) and, for the exact retry sequence, fake servers
run in a thread that answer with scripted frames.

Timing: a warm forest search takes only a few milliseconds, so where two
requests must reach the server together (an answer overtaking another, or a
request still in flight when the connection breaks) the test corks the
socket so both leave in one TCP segment, and the second daemon serves a
"trap" scene whose search takes a hundred times longer. An answer that must
come first is one the daemon gives on its event loop before any search (a
refusal such as OUT_OF_BOUNDS or OVERLOADED), never one that races a worker
thread, so a busy machine cannot reorder what the tests check.
"""

import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import pathd_pb2 as pb
from pathd_client import (RETRY_ATTEMPTS, RETRY_BACKOFF_FIRST_S, PathdClient, PathdDisconnected,
                          PathdError, PathdProtocolError, PathdTimeout)

HERE = os.path.dirname(os.path.abspath(__file__))
# A search across the forest (512x512): tens of thousands of expansions and
# a path of several hundred waypoints, so several chunks and tens of ms.
LONG = ("forest", (0, 511), (511, 0))
# A few cells across the town: microseconds.
SHORT = ("town", (1, 1), (3, 3))
# Side of the generated trap scene, in cells: a wall splits it down the
# middle except for a gap in the last row, and the search goes from one
# side of the wall's top to the other, so A* floods most of the grid
# (about 470,000 expansions; 100+ ms).
TRAP_SIDE = 1024
TRAP = ("trap", (TRAP_SIDE // 2 - 1, 0), (TRAP_SIDE // 2 + 1, 0))
# OVERLOADED retries allowed where the test waits for a trap search to end:
# the backoff then adds up to several seconds, far beyond the search.
PATIENT_RETRY_ATTEMPTS = 10
# How long a helper daemon may take to start listening, in seconds.
DAEMON_START_TIMEOUT_S = 10


def env(name):
    value = os.environ.get(name)
    if not value:
        raise RuntimeError("%s is not set: run these tests through scripts/run-with-daemon.sh "
                           "(see the docstring of %s)" % (name, __file__))
    return value


def pathctl_path(addr, scene, start, goal, *extra):
    """The C reference client's answer, as the dict of pathctl --json."""
    cmd = [env("PATHCTL_BIN"), "--server", addr, "--json", "path", "--scene", scene,
           "--from", "%s,%s" % start, "--to", "%s,%s" % goal] + list(extra)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    return json.loads(out.stdout)


def write_trap_scene(path):
    rows = []
    for y in range(TRAP_SIDE):
        row = ["."] * TRAP_SIDE
        if y < TRAP_SIDE - 1:
            row[TRAP_SIDE // 2] = "#"
        rows.append("".join(row))
    with open(path, "w") as f:
        f.write("\n".join(rows) + "\n")


class corked:
    """Holds back a client's writes (Linux TCP_CORK) until the block ends, so
    the requests sent inside it reach the server in one segment."""

    def __init__(self, client):
        self.sock = client._sock

    def __enter__(self):
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)

    def __exit__(self, *exc):
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 0)


class Daemon:
    """A pathd started by a test from PATHD_CONFIG, with some limits changed
    and the trap scene added."""

    def __init__(self, limits, auth=None):
        config_path = env("PATHD_CONFIG")
        with open(config_path) as f:
            config = json.load(f)
        base = os.path.dirname(os.path.abspath(config_path))
        for scene in config["scenes"]:
            scene["map"] = os.path.join(base, scene["map"])
        self.dir = tempfile.TemporaryDirectory()
        trap_path = os.path.join(self.dir.name, "trap.txt")
        write_trap_scene(trap_path)
        config["scenes"].append({"name": "trap", "map": trap_path, "format": "ascii"})
        config["listen"] = "127.0.0.1:0"
        # No fixed metrics port (parallel test daemons would collide on it),
        # and A* only: the trap scene holds a request in flight by being slow
        # for A*, which jump point search would answer at once.
        config["metrics_listen"] = ""
        config["jump_point_search"] = False
        config["limits"].update(limits)
        if auth is not None:
            config["auth"] = auth
        path = os.path.join(self.dir.name, "pathd.json")
        with open(path, "w") as f:
            json.dump(config, f)
        self.log_path = os.path.join(self.dir.name, "pathd.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen([env("PATHD_BIN"), "--config", path], stderr=self.log)
        deadline = time.monotonic() + DAEMON_START_TIMEOUT_S
        self.addr = None
        while self.addr is None:
            with open(self.log_path) as f:
                for line in f:
                    if "listening on " in line:
                        self.addr = line.split("listening on ", 1)[1].split()[0]
            if self.addr is None:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("helper pathd did not start:\n" + self.read_log())
                time.sleep(0.05)

    def read_log(self):
        with open(self.log_path) as f:
            return f.read()

    def stop(self):
        """SIGTERM; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            return self.proc.wait(timeout=15)
        finally:
            self.log.close()
            self.dir.cleanup()


class FakeServer:
    """A one-thread TCP server that plays script(server) against the client.

    The script calls accept(), read_request() and send(); anything it raises
    is re-raised by join(), so a wrong request fails the test."""

    def __init__(self, script):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(10)
        self.addr = "127.0.0.1:%d" % self.listener.getsockname()[1]
        self.conn = None
        self.requests = []
        self.error = None
        self.thread = threading.Thread(target=self._run, args=(script,), daemon=True)
        self.thread.start()

    def _run(self, script):
        try:
            script(self)
        except BaseException as e:  # reported by join()
            self.error = e
        finally:
            if self.conn:
                self.conn.close()
            self.listener.close()

    def accept(self):
        if self.conn:
            self.conn.close()
        self.conn, _ = self.listener.accept()
        self.conn.settimeout(10)

    def _read_exact(self, n):
        data = b""
        while len(data) < n:
            more = self.conn.recv(n - len(data))
            if not more:
                raise EOFError("client closed the connection")
            data += more
        return data

    def read_request(self):
        (length,) = struct.unpack(">I", self._read_exact(4))
        request = pb.Request()
        request.ParseFromString(self._read_exact(length))
        self.requests.append(request)
        return request

    def wait_closed(self):
        """Returns once the client has closed the connection (fails on more requests)."""
        more = self.conn.recv(1)
        if more:
            raise AssertionError("client sent more bytes instead of closing")

    def send(self, *responses, dribble=False):
        """Writes the frames; with dribble=True one byte at a time, so the
        client sees every frame boundary split."""
        data = b"".join(struct.pack(">I", r.ByteSize()) + r.SerializeToString()
                        for r in responses)
        if not dribble:
            self.conn.sendall(data)
            return
        for i in range(len(data)):
            self.conn.sendall(data[i:i + 1])
            time.sleep(0.001)

    def join(self):
        self.thread.join(timeout=20)
        if self.thread.is_alive():
            raise AssertionError("fake server script did not finish")
        if self.error:
            raise self.error


def chunk(request_id, seq, cells, final=False, status=pb.OK, cost=0.0, total=0):
    r = pb.Response(id=request_id, status=status, final=final)
    r.path.seq = seq
    for x, y in cells:
        r.path.waypoints.add(x=x, y=y, wx=x + 0.5, wy=y + 0.5)
    if final:
        r.path.cost = cost
        r.path.expansions = 7
        r.path.scene_version = 3
        r.path.total_waypoints = total
    return r


def error(request_id, status, message):
    r = pb.Response(id=request_id, status=status, final=True)
    r.error.message = message
    return r


def assert_walkable(test, result, start, goal):
    """Cells path from start to goal in single 8-connected steps."""
    test.assertEqual(result.waypoints[0], tuple(start))
    test.assertEqual(result.waypoints[-1], tuple(goal))
    for (ax, ay), (bx, by) in zip(result.waypoints, result.waypoints[1:]):
        test.assertLessEqual(max(abs(ax - bx), abs(ay - by)), 1)
        test.assertNotEqual((ax, ay), (bx, by))


class LiveDaemonTest(unittest.TestCase):
    """Against the daemon the harness started on the demo world."""

    def setUp(self):
        self.addr = env("PATHD_ADDR")
        self.client = PathdClient(self.addr, timeout=10)

    def tearDown(self):
        self.client.close()

    def test_find_path_matches_the_c_client(self):
        for scene, start, goal in [SHORT, ("town", (1, 1), (10, 5)), LONG]:
            with self.subTest(scene=scene, start=start, goal=goal):
                result = self.client.find_path(scene, start, goal)
                reference = pathctl_path(self.addr, scene, start, goal)
                self.assertEqual(result.status, "OK")
                self.assertEqual(reference["status"], "OK")
                self.assertAlmostEqual(result.cost, reference["cost"], places=9)
                self.assertEqual(result.expansions, reference["expansions"])
                self.assertEqual(result.version, reference["version"])
                self.assertEqual([list(w) for w in result.waypoints], reference["waypoints"])
                self.assertEqual([list(w) for w in result.world], reference["world"])
                assert_walkable(self, result, start, goal)

    def test_long_path_arrives_in_several_chunks_and_is_reassembled(self):
        result = self.client.find_path(*LONG)
        # The demo config streams 256 waypoints per chunk.
        self.assertGreater(len(result.waypoints), 256)
        assert_walkable(self, result, LONG[1], LONG[2])

    def test_world_coordinates_are_cell_centres(self):
        info = self.client.scene_info("house")
        start = (info.origin_x + 1.2 * info.cell_size, info.origin_y + 1.7 * info.cell_size)
        goal = (info.origin_x + 5.5 * info.cell_size, info.origin_y + 2.1 * info.cell_size)
        result = self.client.find_path("house", start, goal, world=True, style="corners")
        self.assertEqual(result.waypoints[0], (1, 1))
        self.assertEqual(result.waypoints[-1], (5, 2))
        for (x, y), (wx, wy) in zip(result.waypoints, result.world):
            self.assertAlmostEqual(wx, info.origin_x + (x + 0.5) * info.cell_size)
            self.assertAlmostEqual(wy, info.origin_y + (y + 0.5) * info.cell_size)

    def test_scenes_and_scene_info(self):
        with open(env("PATHD_CONFIG")) as f:
            configured = sorted(s["name"] for s in json.load(f)["scenes"])
        scenes = self.client.scenes()
        self.assertEqual([s.name for s in scenes], configured)
        for s in scenes:
            info = self.client.scene_info(s.name)
            self.assertEqual((info.name, info.width, info.height, info.version),
                             (s.name, s.width, s.height, s.version))
            self.assertGreater(info.passable_cells, 0)
            self.assertLessEqual(info.passable_cells, s.width * s.height)
        self.assertGreaterEqual(self.client.ping(), 0.0)

    def test_pipelined_answers_come_back_out_of_order(self):
        # The daemon refuses an out-of-bounds goal at once, while the long
        # search sent before it is still running on a worker.
        with corked(self.client):
            long_id = self.client.send_find_path(*LONG)
            refused_id = self.client.send_find_path("town", (1, 1), (1, 999))
        self.assertEqual(self.client.in_flight, 2)
        first, second = self.client.recv(), self.client.recv()
        self.assertEqual((first.id, first.status), (refused_id, "OUT_OF_BOUNDS"))
        self.assertEqual((second.id, second.status), (long_id, "OK"))
        self.assertEqual(self.client.in_flight, 0)
        self.assertEqual(second.waypoints, self.client.find_path(*LONG).waypoints)
        with self.assertRaises(PathdError) as caught:
            self.client.recv()
        self.assertEqual(caught.exception.status, "IDLE")

    def test_many_pipelined_answers_are_matched_by_id(self):
        queries = [("town", (1, 1), (x, 5)) for x in (3, 5, 10)] + [LONG, SHORT] + \
                  [("town", (1, 1), (3, 3 + y)) for y in range(3)]
        expected = {}
        for q in queries:
            expected[self.client.send_find_path(*q)] = q
        answers = {}
        while self.client.in_flight:
            r = self.client.recv()
            answers[r.id] = r
        self.assertEqual(set(answers), set(expected))
        for request_id, (scene, start, goal) in expected.items():
            r = answers[request_id]
            self.assertEqual(r.status, "OK")
            assert_walkable(self, r, start, goal)
            self.assertAlmostEqual(r.cost, self.client.find_path(scene, start, goal).cost)

    def test_blocking_call_keeps_other_answers_for_recv(self):
        long_id = self.client.send_find_path(*LONG)
        self.client.find_path(*SHORT)
        self.client.scenes()
        result = self.client.recv()
        self.assertEqual((result.id, result.status), (long_id, "OK"))

    def test_unknown_scene(self):
        for call in (lambda: self.client.find_path("nope", (1, 1), (2, 2)),
                     lambda: self.client.scene_info("nope")):
            with self.assertRaises(PathdError) as caught:
                call()
            self.assertEqual(caught.exception.status, "UNKNOWN_SCENE")
            self.assertIn("nope", caught.exception.message)
        # Not a protocol error: the connection stays open.
        self.assertTrue(self.client.connected)
        self.client.ping()

    def test_out_of_bounds(self):
        info = self.client.scene_info("town")
        for start, goal in [((1, 1), (info.width, 1)), ((-1, 1), (3, 3)),
                            ((1, 1), (1, info.height))]:
            with self.assertRaises(PathdError) as caught:
                self.client.find_path("town", start, goal)
            self.assertEqual(caught.exception.status, "OUT_OF_BOUNDS")
        pipelined = self.client.send_find_path("town", (1, 1), (500, 500))
        result = self.client.recv()
        self.assertEqual((result.id, result.status, result.waypoints), (pipelined, "OUT_OF_BOUNDS", []))

    def test_bad_options_are_refused_before_sending(self):
        for options in ({"connectivity": 6}, {"style": "zigzag"}):
            with self.assertRaises(ValueError):
                self.client.find_path("town", (1, 1), (3, 3), **options)
        with self.assertRaises(ValueError):
            self.client.send_find_path("", (1, 1), (3, 3))
        self.assertEqual(self.client.in_flight, 0)

    def test_reconnects_after_the_server_closes_the_connection(self):
        # Then bytes that do not decode as a Request: the server answers
        # MALFORMED with id 0 and closes the connection, dropping the search.
        with corked(self.client):
            lost = self.client.send_find_path(*LONG)
            self.client._sock.sendall(struct.pack(">I", 3) + b"\xff\xff\xff")
        with self.assertRaises(PathdDisconnected) as caught:
            self.client.recv()
        self.assertEqual(caught.exception.request_id, lost)
        self.assertIn("MALFORMED", caught.exception.message)
        self.assertFalse(self.client.connected)
        result = self.client.find_path(*SHORT)
        self.assertTrue(self.client.connected)
        self.assertEqual(result.status, "OK")
        self.assertGreater(result.id, lost)
        again = self.client.send_find_path(*SHORT)
        self.assertEqual(self.client.recv().id, again)

    def test_example_script_prints_waypoints(self):
        out = subprocess.run([sys.executable, os.path.join(HERE, "example.py"), self.addr],
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        reference = pathctl_path(self.addr, "town", (1, 1), (10, 5), "--style", "corners")
        self.assertIn("cost %g" % reference["cost"], out.stdout)
        for x, y in reference["waypoints"]:
            self.assertIn("cell (%d, %d)" % (x, y), out.stdout)


class OverloadedLiveTest(unittest.TestCase):
    """Against a daemon that allows one request in flight per connection."""

    @classmethod
    def setUpClass(cls):
        cls.daemon = Daemon({"max_inflight_per_conn": 1})

    @classmethod
    def tearDownClass(cls):
        status = cls.daemon.stop()
        if status != 0:
            raise AssertionError("helper pathd exited with %d:\n%s" % (status, cls.daemon.read_log()))

    def test_pipelined_request_beyond_the_limit_is_answered_overloaded(self):
        with PathdClient(self.daemon.addr, timeout=10) as client:
            with corked(client):
                long_id = client.send_find_path(*TRAP)
                short_id = client.send_find_path(*SHORT)
            first = client.recv()
            self.assertEqual((first.id, first.status), (short_id, "OVERLOADED"))
            second = client.recv()
            self.assertEqual((second.id, second.status), (long_id, "OK"))

    def test_blocking_call_retries_overloaded_until_it_fits(self):
        with PathdClient(self.daemon.addr, timeout=10,
                         retry_attempts=PATIENT_RETRY_ATTEMPTS) as client:
            before = client.stats()["overloaded_total"]
            long_id = client.send_find_path(*TRAP)
            result = client.find_path(*SHORT)
            self.assertEqual(result.status, "OK")
            self.assertEqual(client.recv().id, long_id)
            # The short request was refused at least once while the long one ran.
            self.assertGreater(client.stats()["overloaded_total"], before)


class AuthLiveTest(unittest.TestCase):
    """Against a daemon with tokens: the client authenticates on connect."""

    QUERY = "query-token-0123456789"
    ADMIN = "admin-token-0123456789"

    @classmethod
    def setUpClass(cls):
        cls.daemon = Daemon({}, auth={"tokens": [{"token": cls.QUERY, "role": "query"},
                                                 {"token": cls.ADMIN, "role": "admin"}]})

    @classmethod
    def tearDownClass(cls):
        status = cls.daemon.stop()
        if status != 0:
            raise AssertionError("helper pathd exited with %d:\n%s" % (status, cls.daemon.read_log()))

    def test_without_a_token_only_ping_is_served(self):
        with PathdClient(self.daemon.addr, timeout=10) as client:
            client.ping()
            with self.assertRaises(PathdError) as caught:
                client.scenes()
            self.assertEqual(caught.exception.status, "UNAUTHENTICATED")

    def test_token_grants_its_role_and_no_more(self):
        with PathdClient(self.daemon.addr, timeout=10, token=self.QUERY) as client:
            self.assertEqual(client.role, "query")
            self.assertEqual(client.find_path(*SHORT).status, "OK")
            with self.assertRaises(PathdError) as caught:
                client.stats()
            self.assertEqual(caught.exception.status, "PERMISSION_DENIED")
        with PathdClient(self.daemon.addr, timeout=10, token=self.ADMIN) as client:
            self.assertEqual(client.role, "admin")
            self.assertIn("requests_total", client.stats())

    def test_token_is_sent_again_after_a_reconnect(self):
        with PathdClient(self.daemon.addr, timeout=10, token=self.QUERY) as client:
            client.reconnect()
            self.assertEqual(client.find_path(*SHORT).status, "OK")

    def test_wrong_token_is_refused(self):
        with self.assertRaises(PathdError) as caught:
            PathdClient(self.daemon.addr, timeout=10, token="wrong-token-0123456789")
        self.assertEqual(caught.exception.status, "UNAUTHENTICATED")


class FakeServerTest(unittest.TestCase):
    """Exact sequences a real daemon cannot be made to produce on demand."""

    def test_overloaded_once_then_ok_from_split_frames(self):
        def script(server):
            server.accept()
            first = server.read_request()
            server.send(error(first.id, pb.OVERLOADED, "busy"))
            second = server.read_request()
            server.send(chunk(second.id, 0, [(1, 1), (2, 2)]),
                        chunk(second.id, 1, [(3, 2)], final=True, cost=2.5, total=3),
                        dribble=True)

        server = FakeServer(script)
        with PathdClient(server.addr, timeout=10) as client:
            started = time.monotonic()
            result = client.find_path("demo", (1, 1), (3, 2))
            waited = time.monotonic() - started
        server.join()
        self.assertEqual(len(server.requests), 2)
        first, second = server.requests
        self.assertEqual(second.find_path, first.find_path)
        self.assertGreater(second.id, first.id)
        self.assertGreaterEqual(waited, RETRY_BACKOFF_FIRST_S)
        self.assertEqual((result.status, result.cost, result.expansions, result.version),
                         ("OK", 2.5, 7, 3))
        self.assertEqual(result.waypoints, [(1, 1), (2, 2), (3, 2)])
        self.assertEqual(result.world, [(1.5, 1.5), (2.5, 2.5), (3.5, 2.5)])

    def test_overloaded_retry_is_bounded(self):
        def script(server):
            server.accept()
            for _ in range(RETRY_ATTEMPTS):
                server.send(error(server.read_request().id, pb.OVERLOADED, "busy"))

        server = FakeServer(script)
        with PathdClient(server.addr, timeout=10) as client:
            with self.assertRaises(PathdError) as caught:
                client.find_path("demo", (1, 1), (3, 2))
        server.join()
        self.assertEqual(caught.exception.status, "OVERLOADED")
        self.assertEqual(len(server.requests), RETRY_ATTEMPTS)

    def test_interleaved_chunks_of_two_paths_are_assembled_per_id(self):
        def script(server):
            server.accept()
            a, b = server.read_request(), server.read_request()
            ping = server.read_request()
            pong = pb.Response(id=ping.id, final=True)
            pong.pong.nonce = ping.ping.nonce
            server.send(chunk(a.id, 0, [(0, 0)]), chunk(b.id, 0, [(5, 5)]),
                        chunk(b.id, 1, [(6, 6)], final=True, cost=1.5, total=2), pong,
                        chunk(a.id, 1, [(1, 0)], final=True, cost=1.0, total=2))

        server = FakeServer(script)
        with PathdClient(server.addr, timeout=10) as client:
            a = client.send_find_path("demo", (0, 0), (1, 0))
            b = client.send_find_path("demo", (5, 5), (6, 6))
            client.ping()
            first, second = client.recv(), client.recv()
        server.join()
        self.assertEqual((first.id, first.waypoints, first.cost), (b, [(5, 5), (6, 6)], 1.5))
        self.assertEqual((second.id, second.waypoints, second.cost), (a, [(0, 0), (1, 0)], 1.0))

    def test_chunk_out_of_sequence_is_a_protocol_error(self):
        def script(server):
            server.accept()
            request = server.read_request()
            server.send(chunk(request.id, 1, [(0, 0)], final=True, total=1))
            server.wait_closed()

        server = FakeServer(script)
        with PathdClient(server.addr, timeout=10) as client:
            with self.assertRaises(PathdProtocolError) as caught:
                client.find_path("demo", (0, 0), (1, 0))
            self.assertIn("chunk 1 arrived, expected 0", caught.exception.message)
            # Like the server after a protocol error, the client closes.
            self.assertFalse(client.connected)
            server.join()

    def test_timeout_forgets_the_request_and_ignores_its_late_answer(self):
        def script(server):
            server.accept()
            slow = server.read_request()
            ping = server.read_request()  # sent after the client gave up on slow
            pong = pb.Response(id=ping.id, final=True)
            pong.pong.nonce = ping.ping.nonce
            server.send(chunk(slow.id, 0, [(0, 0)], final=True, total=1), pong)
            server.wait_closed()

        server = FakeServer(script)
        with PathdClient(server.addr, timeout=0.2) as client:
            with self.assertRaises(PathdTimeout):
                client.find_path("demo", (0, 0), (0, 0))
            client.timeout = 10
            client.ping()
            self.assertTrue(client.connected)
            self.assertEqual(client.in_flight, 0)
        server.join()

    def test_unreachable_server(self):
        with socket.create_server(("127.0.0.1", 0)) as unused:
            addr = "127.0.0.1:%d" % unused.getsockname()[1]
        with self.assertRaises(PathdDisconnected) as caught:
            PathdClient(addr, timeout=5)
        self.assertIn("cannot connect to " + addr, caught.exception.message)

    def test_lost_connection_fails_the_call_and_the_next_call_reconnects(self):
        def script(server):
            server.accept()
            server.read_request()
            server.accept()  # closes the first connection: the answer never comes
            ping = server.read_request()
            pong = pb.Response(id=ping.id, final=True)
            pong.pong.nonce = ping.ping.nonce
            server.send(pong)

        server = FakeServer(script)
        with PathdClient(server.addr, timeout=10) as client:
            with self.assertRaises(PathdDisconnected) as caught:
                client.ping()
            self.assertIn("closed", caught.exception.message)
            client.ping()
        server.join()
        self.assertEqual(len(server.requests), 2)


if __name__ == "__main__":
    unittest.main()
