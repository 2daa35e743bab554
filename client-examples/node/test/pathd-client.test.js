'use strict';
/*
 * Tests of pathd-client.js against the live daemon and against fake servers,
 * run by node's built-in test runner through run-tests.sh (see there for the
 * environment: PATHD_ADDR, PATHD_BIN, PATHD_CONFIG, PATHCTL_BIN). The
 * OVERLOADED cases use a second daemon with max_inflight_per_conn 1 and, for the exact
 * retry sequence, fake servers that answer with scripted frames.
 *
 * Timing: a warm forest search takes only a few milliseconds, so where two
 * requests must reach the server together (an answer overtaking another, or
 * a request still in flight when the connection breaks) the test corks the
 * socket so both leave in one TCP segment, and the second daemon serves a
 * trap scene whose search takes a hundred times longer. An answer that must
 * come first is one the daemon gives on its event loop before any search (a
 * refusal such as OUT_OF_BOUNDS or OVERLOADED), never one that races a worker
 * thread, so a busy machine cannot reorder what the tests check.
 */
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const { describe, it, before, after } = require('node:test');

const {
  PathdClient, PathdError, PathdDisconnected, PathdProtocolError, PathdTimeout,
  RETRY_ATTEMPTS, RETRY_BACKOFF_FIRST_MS,
} = require('../pathd-client');
const {
  env, pathctl, corked, TRAP, Daemon, FakeServer, chunk, error,
} = require('./support');

// A search across the forest (512x512): tens of thousands of expansions and
// a path of several hundred waypoints, so several chunks and tens of ms.
const LONG = ['forest', [0, 511], [511, 0]];
// A few cells across the town: microseconds.
const SHORT = ['town', [1, 1], [3, 3]];
// OVERLOADED retries allowed where a test waits for a trap search to end:
// the backoff then adds up to several seconds, far beyond the search.
const PATIENT_RETRY_ATTEMPTS = 10;

/* Cells path from start to goal in single 8-connected steps. */
function assertWalkable(result, start, goal) {
  assert.deepEqual(result.waypoints[0], start);
  assert.deepEqual(result.waypoints.at(-1), goal);
  for (let i = 1; i < result.waypoints.length; i++) {
    const [ax, ay] = result.waypoints[i - 1];
    const [bx, by] = result.waypoints[i];
    const step = Math.max(Math.abs(ax - bx), Math.abs(ay - by));
    assert.equal(step, 1, `step ${i} from ${[ax, ay]} to ${[bx, by]}`);
  }
}

function assertStatus(status) {
  return (err) => {
    assert.ok(err instanceof PathdError, `expected a PathdError, got ${err}`);
    assert.equal(err.status, status);
    return true;
  };
}

describe('live daemon', () => {
  let addr;
  let client;

  before(async () => {
    addr = env('PATHD_ADDR');
    client = new PathdClient(addr, { timeoutMs: 10000 });
    await client.ping(); // connects, so tests can cork the socket
  });

  after(() => client.close());

  it('finds the same paths as the C client', async () => {
    for (const [scene, start, goal] of [SHORT, ['town', [1, 1], [10, 5]], LONG]) {
      const result = await client.findPath(scene, start, goal);
      const reference = pathctl(addr, scene, start, goal);
      assert.equal(result.status, 'OK');
      assert.equal(reference.status, 'OK');
      assert.ok(Math.abs(result.cost - reference.cost) < 1e-9, `${result.cost} vs ${reference.cost}`);
      assert.equal(result.expansions, reference.expansions);
      assert.equal(result.version, reference.version);
      assert.deepEqual(result.waypoints, reference.waypoints);
      assert.deepEqual(result.world, reference.world);
      assertWalkable(result, start, goal);
    }
  });

  it('reassembles a long path sent in several chunks', async () => {
    const result = await client.findPath(...LONG);
    // The demo config streams 256 waypoints per chunk.
    assert.ok(result.waypoints.length > 256);
    assertWalkable(result, LONG[1], LONG[2]);
  });

  it('takes world coordinates and returns cell centres', async () => {
    const info = await client.sceneInfo('house');
    const start = [info.originX + 1.2 * info.cellSize, info.originY + 1.7 * info.cellSize];
    const goal = [info.originX + 5.5 * info.cellSize, info.originY + 2.1 * info.cellSize];
    const result = await client.findPath('house', start, goal, { world: true, style: 'corners' });
    assert.deepEqual(result.waypoints[0], [1, 1]);
    assert.deepEqual(result.waypoints.at(-1), [5, 2]);
    result.waypoints.forEach(([x, y], i) => {
      assert.ok(Math.abs(result.world[i][0] - (info.originX + (x + 0.5) * info.cellSize)) < 1e-9);
      assert.ok(Math.abs(result.world[i][1] - (info.originY + (y + 0.5) * info.cellSize)) < 1e-9);
    });
  });

  it('lists the configured scenes and their details', async () => {
    const configured = JSON.parse(fs.readFileSync(env('PATHD_CONFIG'), 'utf8'))
      .scenes.map((s) => s.name).sort();
    const scenes = await client.scenes();
    assert.deepEqual(scenes.map((s) => s.name), configured);
    for (const s of scenes) {
      const info = await client.sceneInfo(s.name);
      assert.deepEqual([info.name, info.width, info.height, info.version],
        [s.name, s.width, s.height, s.version]);
      assert.ok(info.passableCells > 0 && info.passableCells <= s.width * s.height);
    }
    assert.ok(await client.ping() >= 0);
  });

  it('settles pipelined requests out of order, matched by id', async () => {
    // The daemon refuses an out-of-bounds goal at once, while the long
    // search sent before it is still running on a worker.
    const [long, refused] = corked(client, () => [client.sendFindPath(...LONG),
      client.sendFindPath('town', [1, 1], [1, 999])]);
    assert.equal(client.inFlight, 2);
    const order = [];
    const [longResult, refusedResult] = await Promise.all([
      long.promise.then((r) => { order.push(r.id); return r; }),
      refused.promise.then((r) => { order.push(r.id); return r; }),
    ]);
    assert.deepEqual(order, [refused.id, long.id]);
    assert.equal(refusedResult.status, 'OUT_OF_BOUNDS');
    assert.equal(longResult.status, 'OK');
    assert.equal(client.inFlight, 0);
    assert.deepEqual(longResult.waypoints, (await client.findPath(...LONG)).waypoints);
  });

  it('matches many concurrent answers to their requests', async () => {
    const queries = [[3, 5], [5, 5], [10, 5], [3, 3], [3, 4], [3, 5]]
      .map((goal) => ['town', [1, 1], goal]);
    queries.splice(2, 0, LONG);
    const results = await Promise.all(queries.map((q) => client.findPath(...q)));
    const ids = new Set(results.map((r) => r.id));
    assert.equal(ids.size, queries.length);
    for (let i = 0; i < queries.length; i++) {
      const [scene, start, goal] = queries[i];
      assertWalkable(results[i], start, goal);
      // pathctl prints 15 significant digits.
      const reference = pathctl(addr, scene, start, goal).cost;
      assert.ok(Math.abs(results[i].cost - reference) < 1e-9, `${results[i].cost} vs ${reference}`);
    }
  });

  it('rejects UNKNOWN_SCENE and keeps the connection', async () => {
    await assert.rejects(client.findPath('nope', [1, 1], [2, 2]), assertStatus('UNKNOWN_SCENE'));
    await assert.rejects(client.sceneInfo('nope'), (err) => assertStatus('UNKNOWN_SCENE')(err)
      && err.message.includes('nope'));
    assert.ok(client.connected);
    await client.ping();
  });

  it('rejects OUT_OF_BOUNDS', async () => {
    const info = await client.sceneInfo('town');
    for (const [start, goal] of [[[1, 1], [info.width, 1]], [[-1, 1], [3, 3]], [[1, 1], [1, info.height]]]) {
      await assert.rejects(client.findPath('town', start, goal), assertStatus('OUT_OF_BOUNDS'));
    }
    const raw = await client.sendFindPath('town', [1, 1], [500, 500]).promise;
    assert.equal(raw.status, 'OUT_OF_BOUNDS');
    assert.deepEqual(raw.waypoints, []);
  });

  it('refuses bad options before sending', () => {
    assert.throws(() => client.sendFindPath('town', [1, 1], [3, 3], { connectivity: 6 }), TypeError);
    assert.throws(() => client.sendFindPath('town', [1, 1], [3, 3], { style: 'zigzag' }), TypeError);
    assert.throws(() => client.sendFindPath('', [1, 1], [3, 3]), TypeError);
    assert.equal(client.inFlight, 0);
  });

  it('fails pending requests when the server closes, and the next call reconnects', async () => {
    // Then bytes that do not decode as a Request: the server answers
    // MALFORMED with id 0 and closes the connection, dropping the search.
    const lost = corked(client, () => {
      const sent = client.sendFindPath(...LONG);
      client._socket.write(Buffer.from([0, 0, 0, 3, 0xff, 0xff, 0xff]));
      return sent;
    });
    await assert.rejects(lost.promise.then((r) => assert.fail(
      `request ${r.id} was answered ${r.status} ${r.message} after ${r.searchMicros} us`)), (err) => {
      assert.ok(err instanceof PathdDisconnected);
      assert.equal(err.requestId, lost.id);
      assert.match(err.message, /MALFORMED/);
      return true;
    });
    assert.equal(client.connected, false);
    const result = await client.findPath(...SHORT);
    assert.ok(client.connected);
    assert.equal(result.status, 'OK');
    assert.ok(result.id > lost.id);
  });

  it('runs the example, which prints the waypoints', () => {
    const out = execFileSync(process.execPath, [path.join(__dirname, '..', 'example.js'), addr],
      { encoding: 'utf8', timeout: 30000 });
    const reference = pathctl(addr, 'town', [1, 1], [10, 5], '--style', 'corners');
    assert.match(out, new RegExp(`cost ${reference.cost}\\b`));
    for (const [x, y] of reference.waypoints) assert.ok(out.includes(`cell (${x}, ${y})`), out);
  });
});

describe('daemon with one request in flight per connection', () => {
  let daemon;

  before(async () => {
    daemon = await Daemon.start({ max_inflight_per_conn: 1 });
  });

  after(async () => {
    const log = daemon.log();
    assert.equal(await daemon.stop(), 0, log);
  });

  it('answers a pipelined request beyond the limit with OVERLOADED', async () => {
    const client = new PathdClient(daemon.addr, { timeoutMs: 10000 });
    try {
      await client.ping(); // connects, so the two requests can be corked together
      const [long, short] = corked(client, () => [client.sendFindPath(...TRAP), client.sendFindPath(...SHORT)]);
      assert.equal((await short.promise).status, 'OVERLOADED');
      assert.equal((await long.promise).status, 'OK');
    } finally {
      client.close();
    }
  });

  it('retries OVERLOADED in findPath until the request fits', async () => {
    const client = new PathdClient(daemon.addr, { timeoutMs: 10000, retryAttempts: PATIENT_RETRY_ATTEMPTS });
    try {
      const before = (await client.stats()).overloadedTotal;
      const long = client.sendFindPath(...TRAP);
      const result = await client.findPath(...SHORT);
      assert.equal(result.status, 'OK');
      assert.equal((await long.promise).status, 'OK');
      // The short request was refused at least once while the long one ran.
      assert.ok((await client.stats()).overloadedTotal > before);
    } finally {
      client.close();
    }
  });
});

describe('daemon with tokens', () => {
  const QUERY = 'query-token-0123456789';
  const ADMIN = 'admin-token-0123456789';
  let daemon;

  before(async () => {
    daemon = await Daemon.start({}, { tokens: [{ token: QUERY, role: 'query' }, { token: ADMIN, role: 'admin' }] });
  });

  after(async () => {
    const log = daemon.log();
    assert.equal(await daemon.stop(), 0, log);
  });

  it('serves only ping before auth', async () => {
    const client = new PathdClient(daemon.addr, { timeoutMs: 10000 });
    try {
      await client.ping();
      await assert.rejects(client.scenes(), (err) => err instanceof PathdError && err.status === 'UNAUTHENTICATED');
    } finally {
      client.close();
    }
  });

  it('grants the token its role and no more, first thing on every socket', async () => {
    const client = new PathdClient(daemon.addr, { timeoutMs: 10000, token: QUERY });
    try {
      assert.equal((await client.findPath(...SHORT)).status, 'OK');
      assert.equal(client.role, 'query');
      await assert.rejects(client.stats(), (err) => err instanceof PathdError && err.status === 'PERMISSION_DENIED');
      assert.equal(await client.auth(ADMIN), 'admin');
      assert.ok((await client.stats()).requestsTotal > 0);
    } finally {
      client.close();
    }
  });

  it('refuses a wrong token', async () => {
    const client = new PathdClient(daemon.addr, { timeoutMs: 10000 });
    try {
      await assert.rejects(client.auth('wrong-token-0123456789'),
        (err) => err instanceof PathdError && err.status === 'UNAUTHENTICATED');
    } finally {
      client.close();
    }
  });
});

describe('fake server', () => {
  it('retries OVERLOADED once, then assembles an answer from split frames', async () => {
    const server = await FakeServer.start(async (s) => {
      await s.accept();
      const first = await s.readRequest();
      await s.send([error(first.id, 'OVERLOADED', 'busy')]);
      const second = await s.readRequest();
      await s.send([chunk(second.id, 0, [[1, 1], [2, 2]]),
        chunk(second.id, 1, [[3, 2]], { final: true, cost: 2.5, total: 3 })], { dribble: true });
    });
    const client = new PathdClient(server.addr, { timeoutMs: 10000 });
    const started = Date.now();
    const result = await client.findPath('demo', [1, 1], [3, 2]);
    const waited = Date.now() - started;
    client.close();
    await server.done();
    assert.equal(server.requests.length, 2);
    const [first, second] = server.requests;
    assert.deepEqual(second.findPath, first.findPath);
    assert.ok(second.id > first.id);
    assert.ok(waited >= RETRY_BACKOFF_FIRST_MS);
    assert.deepEqual([result.status, result.cost, result.expansions, result.version], ['OK', 2.5, 7, 3]);
    assert.deepEqual(result.waypoints, [[1, 1], [2, 2], [3, 2]]);
    assert.deepEqual(result.world, [[1.5, 1.5], [2.5, 2.5], [3.5, 2.5]]);
  });

  it('gives up on OVERLOADED after a bounded number of attempts', async () => {
    const server = await FakeServer.start(async (s) => {
      await s.accept();
      for (let i = 0; i < RETRY_ATTEMPTS; i++) {
        await s.send([error((await s.readRequest()).id, 'OVERLOADED', 'busy')]);
      }
    });
    const client = new PathdClient(server.addr, { timeoutMs: 10000 });
    await assert.rejects(client.findPath('demo', [1, 1], [3, 2]), assertStatus('OVERLOADED'));
    client.close();
    await server.done();
    assert.equal(server.requests.length, RETRY_ATTEMPTS);
  });

  it('assembles interleaved chunks of two paths per id', async () => {
    const server = await FakeServer.start(async (s) => {
      await s.accept();
      const a = await s.readRequest();
      const b = await s.readRequest();
      const ping = await s.readRequest();
      await s.send([chunk(a.id, 0, [[0, 0]]), chunk(b.id, 0, [[5, 5]]),
        chunk(b.id, 1, [[6, 6]], { final: true, cost: 1.5, total: 2 }),
        { id: ping.id, final: true, pong: { nonce: ping.ping.nonce } },
        chunk(a.id, 1, [[1, 0]], { final: true, cost: 1, total: 2 })]);
    });
    const client = new PathdClient(server.addr, { timeoutMs: 10000 });
    const order = [];
    const a = client.sendFindPath('demo', [0, 0], [1, 0]);
    const b = client.sendFindPath('demo', [5, 5], [6, 6]);
    const [ra, rb] = await Promise.all([a.promise.then((r) => { order.push(r.id); return r; }),
      b.promise.then((r) => { order.push(r.id); return r; }), client.ping()]);
    client.close();
    await server.done();
    assert.deepEqual(order, [b.id, a.id]);
    assert.deepEqual([rb.waypoints, rb.cost], [[[5, 5], [6, 6]], 1.5]);
    assert.deepEqual([ra.waypoints, ra.cost], [[[0, 0], [1, 0]], 1]);
  });

  it('treats a chunk out of sequence as a protocol error and closes', async () => {
    const server = await FakeServer.start(async (s) => {
      await s.accept();
      const request = await s.readRequest();
      await s.send([chunk(request.id, 1, [[0, 0]], { final: true, total: 1 })]);
      await s.waitClosed();
    });
    const client = new PathdClient(server.addr, { timeoutMs: 10000 });
    await assert.rejects(client.findPath('demo', [0, 0], [1, 0]), (err) => {
      assert.ok(err instanceof PathdProtocolError);
      assert.match(err.message, /chunk 1 arrived, expected 0/);
      return true;
    });
    // Like the server after a protocol error, the client closes.
    assert.equal(client.connected, false);
    await server.done();
  });

  it('forgets a request that timed out and ignores its late answer', async () => {
    const server = await FakeServer.start(async (s) => {
      await s.accept();
      const slow = await s.readRequest();
      const ping = await s.readRequest(); // sent after the client gave up on slow
      await s.send([chunk(slow.id, 0, [[0, 0]], { final: true, total: 1 }),
        { id: ping.id, final: true, pong: { nonce: ping.ping.nonce } }]);
    });
    const client = new PathdClient(server.addr, { timeoutMs: 200 });
    await assert.rejects(client.findPath('demo', [0, 0], [0, 0]), (err) => err instanceof PathdTimeout);
    client.timeoutMs = 10000;
    await client.ping();
    assert.ok(client.connected);
    assert.equal(client.inFlight, 0);
    client.close();
    await server.done();
  });

  it('reports an unreachable server', async () => {
    const probe = net.createServer();
    await new Promise((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const addr = `127.0.0.1:${probe.address().port}`;
    await new Promise((resolve) => probe.close(resolve));
    const client = new PathdClient(addr);
    await assert.rejects(client.ping(), (err) => err instanceof PathdDisconnected
      && err.message.includes(`cannot connect to ${addr}`));
    assert.equal(client.connected, false);
  });

  it('fails the call when the connection drops, and the next call reconnects', async () => {
    const server = await FakeServer.start(async (s) => {
      await s.accept();
      await s.readRequest();
      await s.accept(); // closes the first connection: the answer never comes
      const ping = await s.readRequest();
      await s.send([{ id: ping.id, final: true, pong: { nonce: ping.ping.nonce } }]);
    });
    const client = new PathdClient(server.addr, { timeoutMs: 10000 });
    await assert.rejects(client.ping(), (err) => {
      assert.ok(err instanceof PathdDisconnected);
      assert.match(err.message, /closed/);
      return true;
    });
    await client.ping();
    client.close();
    await server.done();
    assert.equal(server.requests.length, 2);
  });
});
