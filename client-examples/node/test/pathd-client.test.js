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
const { execFileSync, spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const { describe, it, before, after } = require('node:test');

const {
  PathdClient, PathdPool, PathdError, PathdDisconnected, PathdProtocolError, PathdTimeout, PathdQueueFull, PathdClosed,
  RETRY_ATTEMPTS, RETRY_BACKOFF_FIRST_MS, RECONNECT_BACKOFF_FIRST_MS, RECONNECT_BACKOFF_MAX_MS, query, gridRows,
} = require('../pathd-client');
const {
  env, pathctl, pathctlJson, pathctlText, assertSame, corked, TRAP, Daemon, FakeServer, chunk, error,
  alwaysDraining, scriptedServer,
} = require('./support');

/* Resolves once condition() holds, polling; rejects after ms. */
async function until(condition, what, ms = 10000) {
  const end = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > end) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((resolve) => { setTimeout(resolve, 5); });
  }
}

// A search across the forest (512x512): tens of thousands of expansions and
// a path of several hundred waypoints, so several chunks and tens of ms.
const LONG = ['forest', [0, 511], [511, 0]];
// A few cells across the town: microseconds.
const SHORT = ['town', [1, 1], [3, 3]];
// An open forest cell in another component than the start (a clearing of
// 95 cells walled off by trees).
const UNREACHABLE = ['forest', [5, 0], [357, 278]];
// Movement queries on the demo world, each as a client call and as the same
// pathctl command: [method, args, pathctl words]. Together they cover a
// clear and a blocked ray, a legal move, a speed hack, a move through a wall
// and one back in time, a slide, a nearest cell with and without a
// component, reachable and not, a seeded random point, distance to a wall,
// unit size 2 and world coordinates.
const QUERIES = [
  ['raycast', ['town', [1, 1], [10, 1]], ['raycast', '--scene', 'town', '--from', '1,1', '--to', '10,1']],
  ['raycast', ['town', [1, 1], [5, 5]], ['raycast', '--scene', 'town', '--from', '1,1', '--to', '5,5']],
  ['raycast', ['town', [-18.3, -13.2], [-14.1, -9.7], { world: true }],
    ['raycast', '--scene', 'town', '--world', '--from', '-18.3,-13.2', '--to', '-14.1,-9.7']],
  ['raycast', ['town', [1, 14], [30, 14], { unitSize: 2 }],
    ['raycast', '--scene', 'town', '--unit', '2', '--from', '1,14', '--to', '30,14']],
  ['validateMove', ['town', [[1, 1, 0], [7, 1, 6], [7, 7, 12]], 1.5],
    ['validate', '--scene', 'town', '--max-speed', '1.5', '--moves', '1,1,0;7,1,6;7,7,12']],
  ['validateMove', ['town', [[1, 1, 0], [10, 1, 1]], 2, { tolerance: 0.5 }],
    ['validate', '--scene', 'town', '--max-speed', '2', '--tolerance', '0.5', '--moves', '1,1,0;10,1,1']],
  ['validateMove', ['town', [[1, 1, 0], [5, 5, 100]], 2],
    ['validate', '--scene', 'town', '--max-speed', '2', '--moves', '1,1,0;5,5,100']],
  ['validateMove', ['town', [[1, 1, 0], [3, 1, 0]], 2],
    ['validate', '--scene', 'town', '--max-speed', '2', '--moves', '1,1,0;3,1,0']],
  ['moveAlong', ['town', [1, 1], [0, -3]], ['move', '--scene', 'town', '--from', '1,1', '--by', '0,-3']],
  ['moveAlong', ['town', [1, 1], [6, 2.5]], ['move', '--scene', 'town', '--from', '1,1', '--by', '6,2.5']],
  ['nearestWalkable', ['town', [2, 2], 3, { reachableFrom: [1, 1] }],
    ['nearest', '--scene', 'town', '--at', '2,2', '--radius', '3', '--reachable-from', '1,1']],
  ['nearestWalkable', ['town', [22, 4], 5], ['nearest', '--scene', 'town', '--at', '22,4', '--radius', '5']],
  ['isReachable', ['town', [1, 1], [3, 4]], ['reachable', '--scene', 'town', '--from', '1,1', '--to', '3,4']],
  ['isReachable', [...UNREACHABLE], ['reachable', '--scene', 'forest', '--from', '5,0', '--to', '357,278']],
  ['randomPoint', ['town', [3, 4], 5, { seed: 7 }],
    ['random', '--scene', 'town', '--around', '3,4', '--radius', '5', '--seed', '7']],
  ['distanceToWall', ['town', [3, 4]], ['clearance', '--scene', 'town', '--at', '3,4']],
  ['distanceToWall', ['forest', [200, 200], { maxDistance: 3 }],
    ['clearance', '--scene', 'forest', '--at', '200,200', '--radius', '3']],
];
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

/* Starts a helper Daemon before the suite's tests and stops it after them,
 * requiring a clean exit; returns a function that gives the daemon. */
function helperDaemon(limits, auth = null, top = {}) {
  let daemon;
  before(async () => {
    daemon = await Daemon.start(limits, auth, top);
  });
  after(async () => {
    const log = daemon.log();
    assert.equal(await daemon.stop(), 0, log);
  });
  return () => daemon;
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
      const result = await client.findPath(scene, start, goal, { wantWorld: true });
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
    assert.equal((await client.findPath('house', start, goal, { world: true })).world, null);
    const result = await client.findPath('house', start, goal, { world: true, style: 'corners', wantWorld: true });
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

  // protobufjs encodes NaN, a string or undefined in an integer field as 0
  // and wraps 2^32 + 1 to 1: without checkNumbers these asked about the
  // wall at (0, 1) (START_BLOCKED), raycast to (0, 3) (OK, a wrong answer),
  // ran an unlimited search for maxExpansions -1 and blocked cell (0, 1).
  it('refuses an integer field that would change on the wire, naming it', async () => {
    const refused = (field) => (err) => err instanceof TypeError && err.message.startsWith(`${field} must be an integer`);
    assert.throws(() => client.sendFindPath('town', [NaN, 1], [3, 3]), refused('findPath.start.cell.x'));
    assert.throws(() => client.sendFindPath('town', ['a', 1], [3, 3]), refused('findPath.start.cell.x'));
    assert.throws(() => client.sendFindPath('town', [1, undefined], [3, 3]), refused('findPath.start.cell.y'));
    assert.throws(() => client.sendFindPath('town', [2 ** 32 + 1, 1], [3, 3]), refused('findPath.start.cell.x'));
    assert.throws(() => client.sendFindPath('town', [1, 1], [3, 3], { maxExpansions: -1 }), refused('findPath.maxExpansions'));
    assert.throws(() => client.sendFindPath('town', [1, 1], [3, 3], { unitSize: 'big' }), refused('findPath.unitSize'));
    await assert.rejects(client.raycast('town', [1, 1], [NaN, 3]), refused('raycast.to.cell.x'));
    await assert.rejects(client.nearestWalkable('town', [1, 1], -1), refused('nearest.radius'));
    await assert.rejects(client.updateCells('town', { cells: [[NaN, 1]] }), refused('updateCells.cells.cells[0].x'));
    await assert.rejects(client.batch([query('isReachable', 'town', [1, 1], [3, NaN])]),
      refused('batch.items[0].reachable.to.cell.y'));
    assert.equal(client.inFlight, 0);
    // moveAlong without its delta read delta[0] of undefined (a TypeError
    // about 'reading 0', not about the argument).
    assert.throws(() => client.moveAlong('town', [1, 1]), /a move's delta is a pair \[dx, dy\], got undefined/);
    assert.throws(() => client.moveAlong('town', [1, 1], [1]), /a move's delta is a pair/);
    // A float cell is truncated, as Python's int() does, and still sent.
    const path = await client.findPath('town', [1.7, 1], [3, 3]);
    assert.deepEqual(path.waypoints[0], [1, 1]);
  });

  it('runs the example, which prints the waypoints', () => {
    const out = execFileSync(process.execPath, [path.join(__dirname, '..', 'example.js'), addr],
      { encoding: 'utf8', timeout: 30000 });
    const reference = pathctl(addr, 'town', [1, 1], [10, 5], '--style', 'corners');
    assert.match(out, new RegExp(`cost ${reference.cost}\\b`));
    for (const [x, y] of reference.waypoints) assert.ok(out.includes(`cell (${x}, ${y})`), out);
  });
});

/* An answer's server-side timing against the round trip the test saw, from
 * started (process.hrtime.bigint() before the send: CLOCK_MONOTONIC, the
 * server's clock too) to now, rounded up as the server rounds: 0 < serverUs
 * <= round trip, searchUs <= serverUs, searchUs > 0 exactly when the answer
 * ran a search. */
function assertTimed(timing, started, searched) {
  const rttUs = Number((process.hrtime.bigint() - started + 999n) / 1000n);
  assert.ok(timing.serverUs > 0 && timing.serverUs <= rttUs, `serverUs ${timing.serverUs}, round trip ${rttUs} us`);
  assert.ok(timing.searchUs <= timing.serverUs, `searchUs ${timing.searchUs} > serverUs ${timing.serverUs}`);
  assert.equal(timing.searchUs > 0, searched, `searchUs ${timing.searchUs}`);
}

describe('timing of the answers (Response.server_us, search_us)', () => {
  let client;

  before(() => {
    client = new PathdClient(env('PATHD_ADDR'), { timeoutMs: 10000 });
  });

  after(() => client.close());

  it('times paths, blocking and pipelined', async () => {
    let started = process.hrtime.bigint();
    const result = await client.findPath(...LONG);
    assertTimed(result.timing, started, true);
    assert.equal(result.timing.searchUs, result.searchMicros);
    assert.deepEqual(client.lastTiming, result.timing);
    // Not enumerable: the answer stays what pathctl prints.
    assert.ok(!Object.keys(result).includes('timing'));
    started = process.hrtime.bigint();
    const sent = [SHORT, LONG, SHORT].map((q) => client.sendFindPath(...q));
    for (const r of await Promise.all(sent.map((x) => x.promise))) assertTimed(r.timing, started, true);
  });

  it('times answers that searched nothing', async () => {
    let started = process.hrtime.bigint();
    await client.ping();
    assertTimed(client.lastTiming, started, false);
    started = process.hrtime.bigint();
    await assert.rejects(client.findPath('nope', [1, 1], [2, 2]), (err) => {
      assertTimed(err.result.timing, started, false);
      return true;
    });
  });

  it('times queries, and a batch whole', async () => {
    let started = process.hrtime.bigint();
    const answer = await client.raycast('town', [1, 1], [10, 1]);
    assertTimed(answer.timing, started, true);
    assert.ok(!Object.keys(answer).includes('timing'));
    started = process.hrtime.bigint();
    await client.batch(QUERIES.map(([method, args]) => query(method, ...args)));
    assertTimed(client.lastTiming, started, true);
  });
});

describe('the whole protocol against the live daemon, compared with pathctl', () => {
  let addr;
  let client;

  before(() => {
    addr = env('PATHD_ADDR');
    client = new PathdClient(addr, { timeoutMs: 10000 });
  });

  after(() => client.close());

  it('answers every FindPath option as pathctl does', async () => {
    const cases = [
      [SHORT, { style: 'smooth' }, ['--style', 'smooth']],
      [['town', [1, 1], [30, 20]], { style: 'corners', connectivity: 4 }, ['--style', 'corners', '--connect', '4']],
      [['town', [1, 1], [30, 20]], { speed: 2.5, startTime: 10 }, ['--speed', '2.5', '--start-time', '10']],
      [['town', [1, 1], [0, 0]], { snap: true }, ['--snap']],
      [UNREACHABLE, { goalMode: 'nearest' }, ['--goal-mode', 'nearest']],
      [UNREACHABLE, { goalMode: 'line' }, ['--goal-mode', 'line']],
      [['town', [1, 1], [10, 1]], { avoid: [[5, 1], [5, 2]] }, ['--avoid', '5,1;5,2']],
      [['town', [1, 1], [10, 5]], { window: [[0, 0], [12, 8]] }, ['--window', '0,0,12,8']],
      [LONG, { maxExpansions: 50, partialOnCutoff: true }, ['--max-expansions', '50', '--partial']],
      [['town', [1, 13], [30, 22]], { unitSize: 2 }, ['--unit', '2']],
      [['town', [-18.5, -13.5], [17.5, -0.5]], { world: true, deadlineMs: 5000 }, ['--world', '--deadline', '5000']],
    ];
    for (const [[scene, start, goal], options, words] of cases) {
      // pathctl --json asks for world coordinates, so ask too.
      const result = await client.findPath(scene, start, goal, { ...options, wantWorld: true });
      const reference = pathctlJson(addr, ['path', '--scene', scene, '--from', start.join(','), '--to', goal.join(','), ...words]);
      assertSame(assert, result.toJSON(), reference, JSON.stringify(options));
    }
    const timed = await client.findPath('town', [1, 1], [30, 20], { speed: 2.5, startTime: 10 });
    assert.equal(timed.times[0], 10);
    assert.ok(timed.times.at(-1) > 10);
    const snapped = await client.findPath('town', [1, 1], [0, 0], { snap: true });
    assert.deepEqual([snapped.status, snapped.goalUsed], ['PARTIAL', [1, 1]]);
    const cut = await client.findPath(...LONG, { maxExpansions: 50, partialOnCutoff: true });
    assert.deepEqual([cut.status, cut.cutoff], ['PARTIAL', 'BUDGET_EXCEEDED']);
    await assert.rejects(client.findPath(...LONG, { maxExpansions: 50 }), assertStatus('BUDGET_EXCEEDED'));
    await assert.rejects(client.findPath(...UNREACHABLE), (err) => {
      assertStatus('NO_PATH')(err);
      // The refusal says why: the ends lie in different components.
      assert.match(err.detail, /start \(5,0\) is in component \d+ and goal \(357,278\) in component \d+ of scene 'forest'/);
      return true;
    });
    const nearest = await client.findPath(...UNREACHABLE, { goalMode: 'nearest' });
    assert.deepEqual(nearest.waypoints.at(-1), nearest.goalUsed);
    const avoided = await client.findPath('town', [1, 1], [10, 1], { avoid: [[5, 1], [5, 2]] });
    assert.ok(!avoided.waypoints.some(([x, y]) => x === 5 && y === 1));
  });

  it('finds routes as pathctl does', async () => {
    for (const [args, options, words] of [
      [['town', [3, 4], 'cellar', [5, 3]], {}, ['--from', 'town:3,4', '--to', 'cellar:5,3']],
      [['town', [3, 4], 'cellar', [5, 3]], { speed: 2, style: 'corners' },
        ['--from', 'town:3,4', '--to', 'cellar:5,3', '--speed', '2', '--style', 'corners']],
      [['house', [3, 4], 'town', [3, 4]], {}, ['--from', 'house:3,4', '--to', 'town:3,4']],
    ]) {
      const route = await client.findRoute(...args, { ...options, wantWorld: true });
      assertSame(assert, route, pathctlJson(addr, ['route', ...words]), words.join(' '));
      assert.ok(route.legs.length >= 2);
      assert.equal(route.legs[0].portal.to_scene, route.legs[1].scene);
    }
    const pinned = await client.findRoute('house', [3, 4], 'town', [3, 4]);
    assert.equal(pinned.pinned, true);
    assert.deepEqual(pinned.legs.map((leg) => leg.scene), ['house', 'cellar', 'town']);
    await assert.rejects(client.findRoute('house', [3, 3], 'town', [3, 4]), assertStatus('START_BLOCKED'));
  });

  it('answers the movement queries as pathctl does', async () => {
    const seen = new Set();
    for (const [method, args, words] of QUERIES) {
      const answer = await client[method](...args);
      assertSame(assert, answer, pathctlJson(addr, words), `${method} ${JSON.stringify(args)}`);
      assert.equal(answer.status, 'OK');
      assert.equal(answer.version, (await client.sceneInfo(args[0])).version);
      for (const key of ['clear', 'valid', 'reachable']) if (key in answer) seen.add(`${method} ${answer[key]}`);
      if ('reason' in answer) seen.add(answer.reason);
    }
    for (const method of ['raycast', 'validateMove', 'isReachable']) {
      assert.ok(seen.has(`${method} true`) && seen.has(`${method} false`), method);
    }
    for (const reason of ['valid', 'too_fast', 'blocked_segment', 'time_not_increasing']) assert.ok(seen.has(reason), reason);
    assert.deepEqual(await client.randomPoint('town', [3, 4], 5, { seed: 7 }),
      await client.randomPoint('town', [3, 4], 5, { seed: 7 }));
  });

  it('rejects refused queries with the answer', async () => {
    for (const [call, status] of [
      [() => client.raycast('town', [0, 0], [3, 3]), 'START_BLOCKED'],
      [() => client.isReachable('nope', [1, 1], [2, 2]), 'UNKNOWN_SCENE'],
      [() => client.nearestWalkable('town', [1, 1], 5000), 'INVALID_ARGUMENT'],
      [() => client.distanceToWall('town', [99, 1]), 'OUT_OF_BOUNDS'],
    ]) {
      await assert.rejects(call(), (err) => assertStatus(status)(err) && err.result.status === status && err.detail !== '');
    }
    await client.ping();
  });

  it('answers ranges and goal sets as pathctl does', async () => {
    for (const [[start, goal], options, words] of [
      [[[1, 1], [30, 20]], { range: 4 }, ['--range', '4']],
      [[[1, 1], [30, 20]], { range: 4, lineOfSight: true }, ['--range', '4', '--los']],
      [[[1, 13], [30, 22]], { range: 2.5, unitSize: 2 }, ['--range', '2.5', '--unit', '2']],
    ]) {
      // pathctl --json asks for world coordinates, so ask too.
      const result = await client.findPath('town', start, goal, { ...options, wantWorld: true });
      const reference = pathctlJson(addr, ['path', '--scene', 'town', '--from', start.join(','), '--to', goal.join(','), ...words]);
      assertSame(assert, result.toJSON(), reference, JSON.stringify(options));
      const [ex, ey] = result.waypoints.at(-1);
      assert.ok((ex - goal[0]) ** 2 + (ey - goal[1]) ** 2 <= options.range ** 2);
      assert.notDeepEqual([ex, ey], goal);
      assert.equal(result.goalUsed, null);
    }
    const goals = [[30, 20], [3, 3], [10, 5]];
    const nearest = await client.findPath('town', [1, 1], null, { goals, wantWorld: true });
    assert.deepEqual([nearest.goalIndex, nearest.waypoints.at(-1)], [1, [3, 3]]);
    assertSame(assert, nearest.toJSON(),
      pathctlJson(addr, ['path', '--scene', 'town', '--from', '1,1', '--goals', goals.map((g) => g.join(',')).join(';')]));
    await assert.rejects(client.findPath('town', [1, 1], null, { goals, goalMode: 'nearest' }),
      (err) => assertStatus('INVALID_ARGUMENT')(err) && err.detail.includes('find_path.goal_mode'));
    assert.throws(() => client.findPath('town', [1, 1], [3, 3], { lineOfSight: true }), TypeError);
    assert.throws(() => client.findPath('town', [1, 1], null, { goals: Array(65).fill([1, 1]) }), TypeError);
  });

  it('answers FindPath items in a batch as the same requests alone', async () => {
    const specs = [
      [[1, 1], [30, 20], { range: 4, lineOfSight: true }],
      [[1, 1], null, { goals: [[30, 20], [3, 3]], style: 'corners' }],
      [[1, 13], [30, 22], { speed: 2, unitSize: 2 }],
      [[0, 0], [3, 3], {}],
    ];
    const items = specs.map(([s, g, o]) => query('findPath', 'town', s, g, o));
    items.push(query('raycast', 'town', [1, 1], [3, 3]));
    const answers = await client.batch(items);
    for (const [i, [s, g, o]] of specs.entries()) {
      const alone = await client.findPath('town', s, g, o).then((r) => r, (err) => err.result);
      assertSame(assert, answers[i], alone.toJSON(), JSON.stringify(o));
    }
    assert.equal(answers[3].status, 'START_BLOCKED');
    assert.equal(answers[1].goal_index, 1);
    assert.deepEqual(answers[4], await client.raycast('town', [1, 1], [3, 3]));
    assert.throws(() => client.batch(Array(33).fill(query('findPath', 'town', [1, 1], [3, 3]))), TypeError);
  });

  it('answers a batch item by item', async () => {
    const items = QUERIES.map(([method, args]) => query(method, ...args));
    items.splice(3, 0, query('isReachable', 'nope', [1, 1], [2, 2]));
    items.splice(5, 0, query('raycast', 'town', [0, 0], [3, 3]));
    const answers = await client.batch(items);
    assert.equal(answers.length, items.length);
    assert.equal(answers[3].status, 'UNKNOWN_SCENE');
    assert.equal(answers[5].status, 'START_BLOCKED');
    const good = answers.filter((_, i) => i !== 3 && i !== 5);
    const singles = [];
    for (const [method, args] of QUERIES) singles.push(await client[method](...args));
    assert.deepEqual(good, singles);
    const input = `${QUERIES.map(([, , words]) => words.join(' ')).join('\n')}\n`;
    assertSame(assert, good, pathctlJson(addr, ['batch'], { input }));
    assert.throws(() => client.batch([]), TypeError);
    assert.throws(() => client.batch(Array(257).fill(query('raycast', 'town', [1, 1], [2, 2]))), TypeError);
  });

  it('reads grids as pathctl grid prints them', async () => {
    for (const [scene, unitSize] of [['town', 0], ['town', 2], ['cellar', 0]]) {
      const grid = await client.sceneGrid(scene, { unitSize });
      const info = await client.sceneInfo(scene);
      assert.deepEqual([grid.width, grid.height, grid.version], [info.width, info.height, info.version]);
      const words = ['grid', '--scene', scene, ...(unitSize ? ['--unit', unitSize] : [])];
      assert.deepEqual(gridRows(grid), pathctlText(addr, words).split('\n').filter(Boolean));
    }
    const band = await client.sceneGridBand('town', { rowStart: 5, rowCount: 3 });
    const whole = await client.sceneGrid('town');
    assert.deepEqual([band.row_start, band.row_count], [5, 3]);
    assert.deepEqual(band.cells, whole.cells.subarray(5 * 40, 8 * 40));
  });

  it('updates cells with every op', async () => {
    // Street cells of the town (all '.'), restored at the end.
    const rect = [[5, 14], [7, 15]];
    const before = (await client.sceneInfo('town')).version;
    try {
      const blocked = await client.updateCells('town', { rect, op: 'block' });
      assert.deepEqual([blocked.status, blocked.cells_changed, blocked.version], ['OK', 6, before + 1]);
      assert.equal((await client.raycast('town', [1, 14], [10, 14])).clear, false);
      assert.equal((await client.updateCells('town', { rect, op: 'block' })).cells_changed, 0);
      const costly = await client.updateCells('town', { cells: [[5, 14], [6, 14]], op: 'cost', cost: 5 });
      assert.deepEqual([costly.cells_changed, costly.version], [2, before + 2]);
      const rows = gridRows(await client.sceneGrid('town'));
      assert.equal(rows[14].slice(4, 9), '.55#.');
      assert.deepEqual(rows, pathctlText(addr, ['grid', '--scene', 'town']).split('\n').filter(Boolean));
      await assert.rejects(client.updateCells('town', { rect: [[38, 0], [40, 1]], op: 'pass' }), assertStatus('OUT_OF_BOUNDS'));
    } finally {
      const opened = await client.updateCells('town', { rect, op: 'pass' });
      assert.equal(opened.cells_changed, 6);
    }
    assert.equal((await client.raycast('town', [1, 14], [10, 14])).clear, true);
    assert.throws(() => client.updateCells('town', { op: 'block' }), TypeError);
  });

  it('makes, copies and drops scenes at run time', async () => {
    const made = await client.createScene('js-made', { cells: Buffer.alloc(12, 1), width: 4, height: 3, unitSizes: [1, 2] });
    assert.deepEqual([made.status, made.version], ['OK', 1]);
    try {
      const copy = await client.createInstance('js-copy', 'js-made');
      assert.ok(copy.own_bytes < 1024);
      assert.equal((await client.sceneInfo('js-copy')).width, 4);
      await assert.rejects(client.createInstance('js-copy', 'js-made'), assertStatus('SCENE_EXISTS'));
      await client.updateCells('js-copy', { rect: [[1, 0], [1, 2]], op: 'block' });
      assert.equal((await client.findPath('js-made', [0, 0], [3, 0])).cost, 3);
      await assert.rejects(client.findPath('js-copy', [0, 0], [3, 0]), assertStatus('NO_PATH'));
      const text = await client.createScene('js-text', { map: '..#\n...\n', format: 'ascii' });
      assert.equal(text.version, 1);
      assert.equal((await client.dropScene('js-copy')).version, 2);
      await client.dropScene('js-text');
      await assert.rejects(client.dropScene('town'), assertStatus('SCENE_IN_USE'));
    } finally {
      await client.dropScene('js-made');
    }
    await assert.rejects(client.sceneInfo('js-made'), assertStatus('UNKNOWN_SCENE'));
  });

  it('watches a scene: every version in order, the same events as pathctl watch', async () => {
    await client.createScene('js-watched', { cells: Buffer.alloc(64, 1), width: 8, height: 8 });
    const watcher = new PathdClient(addr, { timeoutMs: 10000 });
    try {
      const watchId = await watcher.watch(['js-watched']);
      await assert.rejects(watcher.watch(['js-watched', 'js-nowhere']), assertStatus('UNKNOWN_SCENE'));
      const started = await watcher.watchNext();
      assert.deepEqual([started.kind, started.version, started.watch], ['started', 1, watchId]);
      const made = [await client.updateCells('js-watched', { cells: [[2, 3]], op: 'block' }),
        await client.updateCells('js-watched', { rect: [[1, 1], [4, 2]], op: 'cost', cost: 7 })];
      const events = [await watcher.watchNext(), await watcher.watchNext()];
      assert.deepEqual(events.map((e) => e.version), made.map((m) => m.version));
      assert.deepEqual(events[0].changed, [2, 3, 2, 3]);
      assert.deepEqual(events[0].ops, [{ set: 'blocked', bounds: [2, 3, 2, 3], cells: 1 }]);
      assert.deepEqual(events[1].changed, [1, 1, 4, 2]);
      assert.equal(events[1].ops[0].cost, 7);
      assert.equal(events[1].cells_changed, 8);
      await assert.rejects(watcher.watchNext({ timeoutMs: 50 }), (err) => err instanceof PathdTimeout);
      await watcher.unwatch(watchId);
      const ended = await watcher.watchNext();
      assert.deepEqual([ended.kind, ended.final], ['ended', true]);
      await assert.rejects(watcher.watchNext({ timeoutMs: 50 }), assertStatus('IDLE'));

      // pathctl watch prints the same objects (its first line: the watch began).
      const proc = spawn(env('PATHCTL_BIN'), ['--server', addr, '--json', 'watch', 'js-watched', '--count', '1']);
      const lines = [];
      let buffered = '';
      let gotLine;
      proc.stdout.on('data', (data) => {
        buffered += data;
        const parts = buffered.split('\n');
        buffered = parts.pop();
        lines.push(...parts.filter(Boolean).map((line) => JSON.parse(line)));
        if (gotLine) gotLine();
      });
      const exited = new Promise((resolve) => proc.on('exit', resolve));
      while (lines.length === 0) await new Promise((resolve) => { gotLine = resolve; });
      const pass = await client.updateCells('js-watched', { cells: [[2, 3]], op: 'pass' });
      assert.equal(await exited, 0);
      assert.deepEqual([lines[0].kind, lines[0].version], ['started', pass.version - 1]);
      assert.equal(lines[1].version, pass.version);
      assert.deepEqual(lines[1].ops, [{ set: 'passable', bounds: [2, 3, 2, 3], cells: 1 }]);
    } finally {
      watcher.close();
      await client.dropScene('js-watched');
    }
  });

  it('answers STALE_VERSION with the version now below min_version', async () => {
    const now = (await client.sceneInfo('town')).version;
    const stale = (get) => (err) => err.status === 'STALE_VERSION' && get(err.result) === now;
    await assert.rejects(client.sceneInfo('town', { minVersion: now + 1 }), stale((r) => r.version));
    await assert.rejects(client.findPath(...SHORT, { minVersion: now + 1 }), stale((r) => r.version));
    await assert.rejects(client.raycast('town', [1, 1], [3, 3], { minVersion: now + 1 }), stale((r) => r.version));
    const items = await client.batch([query('raycast', 'town', [1, 1], [3, 3], { minVersion: now + 1 }),
      query('findPath', ...SHORT, { minVersion: now })]);
    assert.deepEqual([items[0].status, items[0].version], ['STALE_VERSION', now]);
    assert.equal(items[1].status, 'OK');
    assert.equal((await client.findPath(...SHORT, { minVersion: now })).version, now);
  });

  it('sends any kind raw with send(), answers of any status', async () => {
    const [ray, batch, route, update, refused] = await Promise.all([
      client.send('raycast', 'town', [1, 1], [5, 5]),
      client.send('batch', [query('isReachable', 'town', [1, 1], [3, 4])]),
      client.send('findRoute', 'town', [3, 4], 'cellar', [5, 3]),
      client.send('updateCells', 'town', { rect: [[1, 1], [1, 1]], op: 'pass' }),
      client.send('distanceToWall', 'nope', [1, 1]),
    ].map((sent) => sent.promise));
    assert.deepEqual(ray.hit, [2, 2]);
    assert.deepEqual(batch.items.map((item) => [item.status, item.reachable]), [['OK', true]]);
    assert.equal(route.status, 'OK');
    assert.equal(update.cells_changed, 0);
    assert.equal(refused.status, 'UNKNOWN_SCENE');
  });
});

describe('cancel and other orderings that need a running search, against a daemon with the slow trap scene', () => {
  const daemon = helperDaemon({});

  it('stops a running search', async () => {
    const client = new PathdClient(daemon().addr, { timeoutMs: 10000 });
    try {
      await client.ping();
      const slow = corked(client, () => {
        const sent = client.sendFindPath(...TRAP);
        client.cancel(sent.id);
        return sent;
      });
      const result = await slow.promise;
      assert.deepEqual([result.status, result.waypoints], ['CANCELLED', []]);
      assert.equal((await client.findPath(...TRAP)).status, 'OK');
    } finally {
      client.close();
    }
  });
  it('settles pipelined requests out of order, matched by id', async () => {
    // The daemon refuses an out-of-bounds goal at once, while the trap
    // search sent before it (100+ ms) is still running on a worker. A quick
    // search could be answered first: its worker writes the answer as soon
    // as it has it.
    const client = new PathdClient(daemon().addr, { timeoutMs: 10000 });
    try {
      await client.ping();
      const [long, refused] = corked(client, () => [client.sendFindPath(...TRAP),
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
      assert.deepEqual(longResult.waypoints, (await client.findPath(...TRAP)).waypoints);
    } finally {
      client.close();
    }
  });

  it('fails pending requests when the server closes, and the next call reconnects', async () => {
    // Then bytes that do not decode as a Request: the server answers
    // MALFORMED with id 0 and closes the connection, dropping the trap
    // search, which is still running when the server reads the bad frame
    // behind it (a search that finished first would rightly be answered
    // first).
    const client = new PathdClient(daemon().addr, { timeoutMs: 10000 });
    try {
      await client.ping();
      const lost = corked(client, () => {
        const sent = client.sendFindPath(...TRAP);
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
    } finally {
      client.close();
    }
  });
});

describe('daemon with one request in flight per connection', () => {
  const daemon = helperDaemon({ max_inflight_per_conn: 1 });

  it('holds a pipelined request beyond the cap in its queue instead of drawing OVERLOADED', async () => {
    const client = new PathdClient(daemon().addr, { timeoutMs: 10000 });
    try {
      await client.ping(); // connects; GetLimits, sent first, is answered before the pong
      assert.equal(client.inFlightCap, 1);
      const before = (await client.stats()).overloadedTotal;
      const long = client.sendFindPath(...TRAP);
      const short = client.sendFindPath(...SHORT);
      assert.deepEqual([client.inFlight, client.inFlightSlots, client.queued], [1, 1, 1]);
      assert.equal((await short.promise).status, 'OK');
      assert.equal((await long.promise).status, 'OK');
      assert.equal((await client.stats()).overloadedTotal, before);
    } finally {
      client.close();
    }
  });
});

describe('daemon with one worker and a job queue of one', () => {
  // The server's own OVERLOADED, which flow control cannot prevent: the job
  // queue is shared by every connection. One trap search runs, one waits,
  // the rest of those sent together are refused and retried.
  const daemon = helperDaemon({ job_queue_capacity: 1 }, null, { threads: 1 });

  it('retries OVERLOADED with jittered backoff until each request fits', async () => {
    const clients = Array.from({ length: 5 }, () => new PathdClient(daemon().addr,
      { timeoutMs: 60000, retryAttempts: 1000, retryDeadlineMs: 60000 }));
    try {
      const before = (await clients[0].stats()).overloadedTotal;
      const results = await Promise.all(clients.map((c) => c.findPath(...TRAP)));
      assert.deepEqual(results.map((r) => r.status), clients.map(() => 'OK'));
      const refused = clients.reduce((n, c) => n + c.overloadedCount, 0);
      assert.ok(refused >= 1, 'at most two of five were admitted at once');
      assert.equal((await clients[0].stats()).overloadedTotal - before, refused);
    } finally {
      clients.forEach((c) => c.close());
    }
  });
});

describe('flow control against a daemon with 4 requests in flight per connection', () => {
  const daemon = helperDaemon({ max_inflight_per_conn: 4 });

  it('sends far more than the cap at once and never draws OVERLOADED; every answer arrives', async () => {
    const client = new PathdClient(daemon().addr, { timeoutMs: 30000 });
    try {
      const before = (await client.stats()).overloadedTotal;
      let most = 0;
      const watchSlots = () => { most = Math.max(most, client.inFlightSlots); };
      const sent = [];
      for (let i = 0; i < 300; i++) {
        const goal = [2 + (i % 30), 1]; // row 1 of the town is open street
        if (i % 3 === 0) sent.push(client.sendFindPath('town', [1, 1], goal));
        else if (i % 3 === 1) sent.push(client.send('raycast', 'town', [1, 1], goal));
        else sent.push(client.send('batch', [1, 2, 3, 4].slice(0, 1 + (i % 4)).map((k) => query('isReachable', 'town', [1, 1], [k + 1, 1]))));
        watchSlots();
      }
      assert.ok(client.queued > 250, `${client.queued} queued`);
      const answers = await Promise.all(sent.map((s) => s.promise.then((a) => { watchSlots(); return a; })));
      for (const a of answers) {
        const statuses = Array.isArray(a.items) ? a.items.map((item) => item.status) : [a.status];
        assert.deepEqual(statuses.filter((st) => st !== 'OK'), []);
      }
      assert.ok(most <= 4, `${most} slots taken at once`);
      assert.deepEqual([client.inFlightSlots, client.queued], [0, 0]);
      assert.equal((await client.stats()).overloadedTotal, before);
    } finally {
      client.close();
    }
  });

  it('sends a batch above the cap at once, for the server to refuse whole', async () => {
    const client = new PathdClient(daemon().addr, { timeoutMs: 10000 });
    try {
      await client.ping();
      const items = Array.from({ length: 5 }, () => query('isReachable', 'town', [1, 1], [3, 3]));
      const answer = await client.send('batch', items).promise;
      assert.equal(answer.status, 'LIMIT_EXCEEDED');
      assert.match(answer.message, /max_inflight_per_conn/);
    } finally {
      client.close();
    }
  });

  it('spreads a pool\'s calls over its connections', async () => {
    const pool = new PathdPool(daemon().addr, { connections: 3, timeoutMs: 30000 });
    try {
      const results = await Promise.all(Array.from({ length: 60 }, (_, i) => pool.findPath('town', [1, 1], [2 + (i % 30), 1])));
      assert.deepEqual(results.filter((r) => r.status !== 'OK'), []);
      assert.deepEqual(pool.clients.map((c) => c.connected), [true, true, true]);
      // Each connection carried a share: more than its cap's worth of the 60.
      for (const c of pool.clients) assert.ok(c._nextId > 1 + 4, `a connection sent ${c._nextId - 1} requests`);
      assert.equal(pool.overloadedCount, 0);
    } finally {
      pool.close();
    }
  });
});

describe('daemon with other limits', () => {
  const daemon = helperDaemon({ max_inflight_per_conn: 7, max_waypoints_per_chunk: 33, max_frame_bytes: 65536 });

  it('reports them through limits(), as pathctl does', async () => {
    const client = new PathdClient(daemon().addr, { timeoutMs: 10000 });
    try {
      const limits = await client.limits();
      assert.equal(limits.maxInflightPerConn, 7);
      assert.equal(limits.maxWaypointsPerChunk, 33);
      assert.equal(limits.maxFrameBytes, 65536);
      assert.ok(limits.maxBatchItems > 0);
      assert.deepEqual([limits.watchBufferBytes, limits.maxWatchScenes, limits.maxWatchers], [1048576, 64, 1000]);
      // The reservation limits, at their defaults (config/README.md).
      assert.deepEqual([limits.reservationTtlMs, limits.maxAgentsPerScene, limits.maxReservationEntries,
        limits.maxReservationWindowMs, limits.maxAgentBytes, limits.maxClockStepMs],
      [30000, 10000, 1000000, 60000, 1048576, 3600000]);
      const { status, ...reference } = pathctlJson(daemon().addr, ['limits']);
      assert.equal(status, 'OK');
      const camel = Object.fromEntries(Object.entries(reference)
        .map(([k, v]) => [k.replace(/_([a-z])/g, (_, c) => c.toUpperCase()), v]));
      assert.deepEqual(limits, camel);
    } finally {
      client.close();
    }
  });
});

describe('reservations against a daemon of its own', () => {
  const daemon = helperDaemon({});

  // checkNumbers refused a BigInt agent id (what a uint64
  // id above 2^53 is in JS; protobufjs sends it exactly) with "must be an
  // integer in 0..2^64-1, got 9", and let a string of digits through
  // unchecked: '-1' went out as agent 2^64-1, maxExpansions '-1' as 2^64-1.
  it('takes a BigInt agent id and range-checks 64-bit strings', async () => {
    const client = new PathdClient(daemon().addr, { timeoutMs: 10000 });
    try {
      const a = await client.reservePath('town', 9n, [2, 1], [5, 1], 0, 2);
      assert.ok(['OK', 'PARTIAL'].includes(a.status), a.status);
      assert.equal(a.agent, 9);
      assert.equal(await client.releaseAgent('town', 9n), true);
      const refused = (field) => (err) => err instanceof TypeError && err.message.startsWith(`${field} must be an integer`);
      await assert.rejects(client.reservePath('town', '-1', [2, 3], [4, 3], 0, 2), refused('reservePath.agent'));
      await assert.rejects(client.reservePath('town', '18446744073709551616', [2, 3], [4, 3], 0, 2),
        refused('reservePath.agent'));
      await assert.rejects(client.findPath('town', [1, 1], [3, 3], { maxExpansions: '-1' }), refused('findPath.maxExpansions'));
      assert.equal(client.inFlight, 0);
    } finally {
      client.close();
    }
  });

  it('reserves, refuses a start another agent holds, lists, cuts and releases', async () => {
    const client = new PathdClient(daemon().addr, { timeoutMs: 10000 });
    try {
      const a = await client.reservePath('town', 1, [2, 1], [12, 1], 0, 2);
      const b = await client.reservePath('town', 2, [12, 1], [2, 1], 0, 2, { windowMs: 20000 });
      for (const r of [a, b]) {
        assert.ok(['OK', 'PARTIAL'].includes(r.status), r.status);
        assert.equal(r.waypoints[0].t_arrive_ms, 0);
      }
      assert.equal(a.agent, 1);
      assert.equal(a.reserved_until_ms, null);   // parked at its goal
      assert.deepEqual([a.waypoints.at(-1).x, a.waypoints.at(-1).y], [12, 1]);
      // Agent 1 holds (2, 1) at t0 0: a third agent cannot start there.
      await assert.rejects(client.reservePath('town', 3, [2, 1], [5, 1], 0, 2), (e) => {
        assert.equal(e.status, 'START_BLOCKED');
        assert.equal(e.result.blocking_agent, 1);
        return true;
      });
      await assert.rejects(client.reservePath('town', 0, [2, 1], [5, 1], 0, 2), (e) => e.status === 'INVALID_ARGUMENT');
      await assert.rejects(client.reservePath('town', 4, [2, 1], [5, 1], 0, 0), (e) => e.status === 'INVALID_ARGUMENT');
      const all = await client.reservations('town');
      assert.equal(all.agents, 2);
      assert.deepEqual([...new Set(all.entries.map((e) => e.agent))].sort(), [1, 2]);
      // FindPath around them: agent 1 holds its start at t0 0, so a path
      // from there is START_BLOCKED by it; planned alone, it is not.
      await assert.rejects(client.findPath('town', [2, 1], [5, 1], { speed: 2, avoidReserved: true }), (e) => {
        assert.equal(e.status, 'START_BLOCKED');
        assert.match(e.message, /agent 1 /);
        return true;
      });
      assert.equal((await client.findPath('town', [2, 1], [5, 1], { speed: 2 })).status, 'OK');
      const goal = await client.reservations('town', { rect: [[12, 1], [12, 1]], fromMs: 1000000 });
      assert.deepEqual(goal.entries.map((e) => [e.agent, e.t1_ms]), [[1, null]]);
      // Blocking agent 1's goal from its arrival on cuts exactly the agents
      // holding that cell from then on: agent 1 among them.
      const at = a.waypoints.at(-1).t_arrive_ms;
      const holders = (await client.reservations('town', { rect: [[12, 1], [12, 1]], fromMs: at })).entries;
      const expected = [...new Set(holders.map((e) => e.agent))].sort((x, y) => x - y);
      assert.ok(expected.includes(1));
      // Its watchers hear the update, then the agents it cut.
      const watcher = new PathdClient(daemon().addr, { timeoutMs: 10000 });
      let heard;
      try {
        await watcher.watch(['town']);
        assert.equal((await watcher.watchNext()).kind, 'started');
        const cut = await client.updateCells('town', { cells: [[12, 1]], op: 'block', atMs: at });
        assert.deepEqual(cut.agents_cut, expected);
        heard = [await watcher.watchNext(), await watcher.watchNext()];
        assert.deepEqual(heard.map((e) => [e.kind, e.version]), [['updated', cut.version], ['agents_cut', cut.version]]);
      } finally {
        watcher.close();
      }
      assert.deepEqual([heard[1].agents, heard[1].cut_at_ms, heard[1].final], [expected, at, false]);
      assert.deepEqual((await client.reservations('town', { rect: [[12, 1], [12, 1]], fromMs: at })).entries, []);
      await client.updateCells('town', { cells: [[12, 1]], op: 'restore' });
      assert.equal(await client.releaseAgent('town', 2), true);
      assert.equal(await client.releaseAgent('town', 2), false);
      assert.equal((await client.reservations('town')).entries.some((e) => e.agent === 2), false);
      // Every agent at once (a game whose clock starts over): how many went,
      // and its watchers hear which.
      const held = (await client.reservations('town')).entries.map((e) => e.agent);
      const ids = [...new Set(held)].sort((x, y) => x - y);
      assert.ok(ids.includes(1), `agent 1 is still held (${ids})`);
      const releasedWatcher = new PathdClient(daemon().addr, { timeoutMs: 10000 });
      try {
        await releasedWatcher.watch(['town']);
        assert.equal((await releasedWatcher.watchNext()).kind, 'started');
        assert.equal(await client.releaseAll('town'), ids.length);
        const ev = await releasedWatcher.watchNext();
        assert.deepEqual([ev.kind, ev.agents], ['agents_released', ids]);
      } finally {
        releasedWatcher.close();
      }
      assert.equal((await client.reservations('town')).agents, 0);
      assert.equal(await client.releaseAll('town'), 0);
    } finally {
      client.close();
    }
  });

  it('moves a standing agent aside with yieldAfterMs and tells the game its new plan', async () => {
    // A one-wide corridor with a side pocket above (8, 1): B stands at
    // (8, 1) from 0, A at (6, 1) from 1000. At 4000 B (stood 4000 ms, A
    // 3000) heads for the left room: A is in its way and is moved aside.
    const client = new PathdClient(daemon().addr, { timeoutMs: 10000 });
    const watcher = new PathdClient(daemon().addr, { timeoutMs: 10000 });
    try {
      await client.createScene('js-corridor', {
        map: '...#####.###...\n...............\n...#########...\n', format: 'ascii',
      });
      await watcher.watch(['js-corridor']);
      assert.equal((await watcher.watchNext()).kind, 'started');
      const b0 = await client.reservePath('js-corridor', 2, [8, 1], [8, 1], 0, 1);
      const a0 = await client.reservePath('js-corridor', 1, [6, 1], [6, 1], 1000, 1);
      assert.deepEqual([b0.displaced, a0.displaced], [[], []]);
      // Without yieldAfterMs nobody is moved.
      const plain = await client.reservePath('js-corridor', 2, [8, 1], [1, 1], 4000, 1, { windowMs: 4000 });
      assert.deepEqual(plain.displaced, []);
      const b = await client.reservePath('js-corridor', 2, [8, 1], [1, 1], 4000, 1,
        { windowMs: 4000, yieldAfterMs: 2000 });
      assert.deepEqual(b.displaced.map((d) => d.agent), [1]);
      const d = b.displaced[0];
      assert.deepEqual([d.waypoints[0].x, d.waypoints[0].y, d.waypoints[0].t_arrive_ms], [6, 1, d.t0_ms]);
      assert.equal(d.reserved_until_ms, d.waypoints.at(-1).t_leave_ms);
      // B's way is clear of A's new plan: A ends off B's cells.
      const bCells = new Set(b.waypoints.map((w) => `${w.x},${w.y}`));
      assert.equal(bCells.has(`${d.waypoints.at(-1).x},${d.waypoints.at(-1).y}`), false);
      // The table holds A's new plan, and the watcher hears who moved.
      const held = (await client.reservations('js-corridor')).entries.filter((e) => e.agent === 1);
      assert.ok(held.some((e) => e.t1_ms === null && e.x === d.waypoints.at(-1).x && e.y === d.waypoints.at(-1).y));
      const ev = await watcher.watchNext();
      assert.deepEqual([ev.kind, ev.agents, ev.version], ['agents_displaced', [1], b.scene_version]);
      await assert.rejects(client.reservePath('js-corridor', 3, [0, 0], [0, 0], 0, 1, { yieldAfterMs: -1 }),
        (e) => e.status === 'INVALID_ARGUMENT');
    } finally {
      watcher.close();
      client.close();
    }
  });
});

describe('daemon with tokens', () => {
  const QUERY = 'query-token-0123456789';
  const ADMIN = 'admin-token-0123456789';
  const daemon = helperDaemon({}, { tokens: [{ token: QUERY, role: 'query' }, { token: ADMIN, role: 'admin' }] });

  it('serves only ping before auth', async () => {
    const client = new PathdClient(daemon().addr, { timeoutMs: 10000 });
    try {
      await client.ping();
      await assert.rejects(client.scenes(), (err) => err instanceof PathdError && err.status === 'UNAUTHENTICATED');
    } finally {
      client.close();
    }
  });

  it('grants the token its role and no more, first thing on every socket', async () => {
    const client = new PathdClient(daemon().addr, { timeoutMs: 10000, token: QUERY });
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

  it('reloads for an admin only', async () => {
    const client = new PathdClient(daemon().addr, { timeoutMs: 10000, token: QUERY });
    try {
      await assert.rejects(client.reload(), (err) => err instanceof PathdError && err.status === 'PERMISSION_DENIED');
      await client.auth(ADMIN);
      assert.equal(await client.reload(), undefined);
      await client.ping();
    } finally {
      client.close();
    }
  });

  it('refuses a wrong token', async () => {
    const client = new PathdClient(daemon().addr, { timeoutMs: 10000 });
    try {
      await assert.rejects(client.auth('wrong-token-0123456789'),
        (err) => err instanceof PathdError && err.status === 'UNAUTHENTICATED');
    } finally {
      client.close();
    }
  });
});

describe('daemon with tokens and 3 requests in flight per connection', () => {
  const QUERY = 'query-token-0123456789';
  const daemon = helperDaemon({ max_inflight_per_conn: 3 }, { tokens: [{ token: QUERY, role: 'query' }] });

  it('reads the cap again once a late auth() lets GetLimits through', async () => {
    const client = new PathdClient(daemon().addr, { timeoutMs: 10000 });
    try {
      await client.ping(); // GetLimits went first, unauthenticated: the fallback cap
      assert.equal(client.inFlightCap, 64);
      assert.equal(await client.auth(QUERY), 'query');
      await client.ping(); // the second GetLimits, sent after the auth answer, is answered before this
      assert.equal(client.inFlightCap, 3);
      const sent = Array.from({ length: 10 }, (_, i) => client.sendFindPath('town', [1, 1], [2 + i, 1]));
      assert.deepEqual([client.inFlightSlots, client.queued], [3, 7]);
      assert.deepEqual((await Promise.all(sent.map((x) => x.promise))).map((r) => r.status), sent.map(() => 'OK'));
    } finally {
      client.close();
    }
  });
});

/* The daemon drains (SIGUSR1: every request but Ping is answered DRAINING,
 * Auth and GetLimits first of all) and serves again (SIGUSR2), each step
 * waited for in its log. */
async function drain(daemon, on) {
  const line = on ? 'draining: ' : 'ready: serving new requests again';
  const before = daemon.log().split(line).length;
  daemon.proc.kill(on ? 'SIGUSR1' : 'SIGUSR2');
  await until(() => daemon.log().split(line).length > before, `pathd logs "${line}"`);
}

/* Backing off, not hammering: RETRY_ATTEMPTS + 1 sockets after the first
 * each waited a pause of at least half its step, the steps doubling from
 * RECONNECT_BACKOFF_FIRST_MS (25+50+100+200+400+800 ms), less 2 ms each
 * for a timer firing before the whole millisecond. */
const LEAST_BACKOFF_MS = Array.from({ length: RETRY_ATTEMPTS + 1 },
  (_, k) => Math.min(RECONNECT_BACKOFF_FIRST_MS * 2 ** k, RECONNECT_BACKOFF_MAX_MS) / 2 - 2)
  .reduce((sum, pause) => sum + pause, 0);

/* A call made to a draining pathd (a replica going down behind HAProxy, or
 * one being stopped): the new socket's first answer (Auth with a token,
 * else GetLimits) is DRAINING. The client must connect again with the
 * reconnect backoff, within its retry deadline, until a pathd serves it:
 * here the same one, after SIGUSR2. Before the fix the Node client sent
 * the call at once on socket after socket and rejected DRAINING after
 * retryAttempts (5) tries, in a few milliseconds. */
async function servedAfterDrain(daemon, options, call) {
  await drain(daemon, true);
  let draining = true;
  const client = new PathdClient(daemon.addr, { timeoutMs: 30000, retryDeadlineMs: 30000, ...options });
  try {
    let settled = null;
    const pending = call(client).then((value) => { settled = { value }; }, (err) => { settled = { err }; });
    // More sockets than retryAttempts would have allowed, each refused.
    await until(() => settled !== null || client.reconnects >= RETRY_ATTEMPTS + 1,
      'the client connecting again', 20000);
    const seen = () => `reconnects ${client.reconnects}, resent ${client.resent}, retries ${JSON.stringify(client.retries)}`;
    assert.equal(settled, null, `the call settled while pathd was draining: ${JSON.stringify(settled)}`
      + ` ${settled && settled.err} (${seen()})`);
    await drain(daemon, false);
    draining = false;
    await pending;
    if (settled.err) throw new Error(`${settled.err} (${seen()})`, { cause: settled.err });
    return { client, value: settled.value };
  } catch (err) {
    client.close();
    throw err;
  } finally {
    if (draining) await drain(daemon, false).catch(() => {});
  }
}

describe('a draining daemon: the first answer on a new socket is DRAINING', () => {
  const QUERY = 'query-token-0123456789';
  const withTokens = helperDaemon({}, { tokens: [{ token: QUERY, role: 'query' }] });
  const withoutTokens = helperDaemon({});

  it('connects again with backoff while Auth is answered DRAINING, and is served once pathd is', async () => {
    const started = performance.now(); // monotonic: a wall clock stepped meanwhile changes nothing
    const { client, value } = await servedAfterDrain(withTokens(), { token: QUERY }, (c) => c.findPath(...SHORT));
    try {
      const took = Math.round(performance.now() - started);
      assert.equal(value.status, 'OK');
      assert.equal(client.role, 'query');
      assert.ok(took >= LEAST_BACKOFF_MS, `${took} ms, under ${LEAST_BACKOFF_MS}: no backoff between the sockets `
        + `(reconnects ${client.reconnects}, resent ${client.resent})`);
      assert.equal(client.retries.DRAINING, undefined, 'the call itself was never sent to the draining pathd: '
        + `reconnects ${client.reconnects}, resent ${client.resent}, retries ${JSON.stringify(client.retries)}`);
    } finally {
      client.close();
    }
  });

  it('does the same when GetLimits is the first answer (no token)', async () => {
    const { client, value } = await servedAfterDrain(withoutTokens(), {}, (c) => c.isReachable('town', [1, 1], [3, 3]));
    try {
      assert.equal(value.reachable, true);
      assert.equal(client.inFlightCap, 64); // the server's, read on the socket that was served
    } finally {
      client.close();
    }
  });

  it('does the same for a call that takes no slot, sent before the first answer came', async () => {
    const { client, value } = await servedAfterDrain(withoutTokens(), {}, (c) => c.scenes());
    try {
      assert.ok(value.some((scene) => scene.name === 'town'), JSON.stringify(value));
    } finally {
      client.close();
    }
  });

  it('auth() connects again the same way and resolves with the role', async () => {
    const { client, value } = await servedAfterDrain(withTokens(), {}, (c) => c.auth(QUERY));
    try {
      assert.equal(value, 'query');
      assert.equal((await client.findPath(...SHORT)).status, 'OK');
    } finally {
      client.close();
    }
  });
});

describe('a call made while the client backs off', () => {
  const daemonOf = helperDaemon({});

  /* The reconnect pause is the client's: a call made during it waits for it
   * as the calls already retrying do. Before the fix a new call opened a
   * socket at once, so a game server making calls at its own pace hammered
   * a draining (or down) replica whatever the backoff. */
  it('opens no socket of its own, and is served with the others once pathd is', async () => {
    const daemon = daemonOf();
    await drain(daemon, true);
    let draining = true;
    const client = new PathdClient(daemon.addr, { timeoutMs: 30000, retryDeadlineMs: 30000 });
    try {
      const first = client.isReachable('town', [1, 1], [3, 3]);
      // A few refused sockets, so a pause (100 ms or more from the third
      // step) is under way; caught at least 20 ms before it ends.
      await until(() => client.reconnects >= 2 && !client.connected && client.reconnectPauseMs > 20,
        'the client pausing after a refused socket', 20000);
      const opened = client.reconnects;
      const later = [client.findPath(...SHORT), client.scenes(), client.raycast('town', [1, 1], [3, 1])];
      for (const call of [first, ...later]) call.catch(() => {}); // awaited below; a failed test closes them
      assert.equal(client.reconnects, opened, 'a new call opened a socket during the pause');
      assert.equal(client.connected, false);
      await drain(daemon, false);
      draining = false;
      const [reachable, path, scenes, ray] = await Promise.all([first, ...later]);
      assert.equal(reachable.reachable, true);
      assert.equal(path.status, 'OK');
      assert.ok(scenes.some((scene) => scene.name === 'town'), JSON.stringify(scenes));
      assert.deepEqual(ray, await client.raycast('town', [1, 1], [3, 1])); // the answer a served call gets
    } finally {
      client.close();
      if (draining) await drain(daemon, false).catch(() => {});
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
    const result = await client.findPath('demo', [1, 1], [3, 2], { wantWorld: true });
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

  // Without the Cancel the server went on searching for an answer nobody
  // would read, holding the call's slots (the Go client cancels on its
  // context's end). Fails without the Cancel in _timeOut: the next frame
  // the server reads is the ping, not a Cancel.
  it('sends a Cancel for a call that timed out after it was sent', async () => {
    const server = await FakeServer.start(async (s) => {
      await s.accept();
      const search = await s.readRequest();
      const next = await s.readRequest();
      assert.equal(next.body, 'cancel');
      assert.equal(next.cancel.targetId, search.id);
      await s.send([error(search.id, 'CANCELLED', 'cancelled'), { id: next.id, final: true }]);
      const ping = await s.readRequest();
      await s.send([{ id: ping.id, final: true, pong: { nonce: ping.ping.nonce } }]);
    });
    const client = new PathdClient(server.addr, { timeoutMs: 200 });
    try {
      await assert.rejects(client.findPath('demo', [1, 1], [3, 2]), PathdTimeout);
      client.timeoutMs = 10000;
      await client.ping();
      await server.done();
      assert.equal(client.inFlightSlots, 0);
    } finally {
      client.close();
    }
  });

  // After close() the next call opened a new socket (to whatever listened
  // there by then), where a closed client is expected to stay closed, as
  // Go's (ErrClosed). Fails without the checks in _call, _send and
  // _authUntilServed: the ping resolves on a second connection.
  it('a closed client stays closed: calls reject with PathdClosed and open no socket', async () => {
    const server = await scriptedServer({
      answer: (r) => [r.body === 'limits' ? { id: r.id, final: true, limits: { maxInflightPerConn: 4 } }
        : { id: r.id, final: true, pong: { nonce: r.ping.nonce } }],
    });
    const client = new PathdClient(server.addr, { timeoutMs: 2000 });
    try {
      await client.ping();
      client.close();
      const closed = (err) => err instanceof PathdClosed && err.status === 'CLOSED'
        && /client is closed/.test(err.message);
      await assert.rejects(client.ping(), closed);
      await assert.rejects(client.findPath(...SHORT), closed);
      await assert.rejects(client.send('raycast', ...SHORT).promise, closed);
      await assert.rejects(client.watch(['town']), closed);
      await assert.rejects(client.watchNext({ timeoutMs: 50 }), closed);
      await assert.rejects(client.auth('secret'), closed);
      assert.equal(server.accepted, 1);
    } finally {
      await server.close();
    }
  });

  // watchNext() after close() rejected PathdDisconnected ("not connected"),
  // unlike every other call: a closed client says so. The watch's last
  // event, queued by close() itself, still comes first (as Go's Next gives
  // the events queued, then ErrClosed).
  it('watchNext after close: the watch\'s last event, then PathdClosed', async () => {
    const server = await scriptedServer({
      answer: (r) => [r.body === 'limits' ? { id: r.id, final: true, limits: { maxInflightPerConn: 4 } }
        : { id: r.id, watchEvent: { kind: 'WATCH_STARTED', scene: 'town' } }],
    });
    const client = new PathdClient(server.addr, { timeoutMs: 2000 });
    try {
      const watchId = await client.watch(['town']);
      assert.equal((await client.watchNext()).kind, 'started');
      client.close();
      const ended = await client.watchNext();
      assert.deepEqual([ended.status, ended.watch, ended.final], ['DISCONNECTED', watchId, true]);
      for (let n = 0; n < 2; n++) {
        await assert.rejects(client.watchNext({ timeoutMs: 50 }),
          (err) => err instanceof PathdClosed && err.status === 'CLOSED');
      }
    } finally {
      await server.close();
    }
  });

  it('surfaces a status newer than the client by its number, and goes on', async () => {
    // 99 is no pathd.v1.Status: a newer server's. Every kind of call must
    // reject with it (not retried: whether it is retryable is unknown), a
    // batch item keep it, and the connection go on.
    const NEWER = 99;
    const server = await FakeServer.start(async (s) => {
      await s.accept();
      for (let n = 0; n < 5; n++) {
        const r = await s.readRequest();
        if (r.body === 'ping') await s.send([{ id: r.id, final: true, pong: { nonce: r.ping.nonce } }]);
        else if (r.body === 'batch') {
          await s.send([{ id: r.id, final: true, batch: { items: [{ status: NEWER, message: 'from the future' }] } }]);
        } else await s.send([error(r.id, NEWER, 'from the future')]);
      }
    });
    const client = new PathdClient(server.addr, { timeoutMs: 10000 });
    try {
      const newer = (err) => err instanceof PathdError && err.status === 'UNKNOWN_STATUS_99'
        && err.message === 'UNKNOWN_STATUS_99: from the future';
      await assert.rejects(client.findPath('demo', [1, 1], [2, 2]), newer);
      await assert.rejects(client.raycast('demo', [1, 1], [2, 2]), newer);
      await assert.rejects(client.updateCells('demo', { cells: [[1, 1]], op: 'block' }), newer);
      assert.deepEqual(await client.batch([query('raycast', 'demo', [1, 1], [2, 2])]),
        [{ status: 'UNKNOWN_STATUS_99', message: 'from the future' }]);
      await client.ping();
      assert.deepEqual([client.retries, client.reconnects], [{}, 0]);
    } finally {
      client.close();
    }
    await server.done();
    assert.equal(server.requests.length, 5);
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
      assert.deepEqual([a.body, b.body, ping.body], ['findPath', 'findPath', 'ping']);
      await s.send([chunk(a.id, 0, [[0, 0]]), chunk(b.id, 0, [[5, 5]]),
        chunk(b.id, 1, [[6, 6]], { final: true, cost: 1.5, total: 2 }),
        { id: ping.id, final: true, pong: { nonce: ping.ping.nonce } },
        chunk(a.id, 1, [[1, 0]], { final: true, cost: 1, total: 2 })]);
    });
    const client = new PathdClient(server.addr, { timeoutMs: 10000 });
    // Connected and the cap known, so the paths go out at once, ahead of the ping.
    await client.limits();
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
      const cancel = await s.readRequest(); // the client gave up on slow: the search is not wanted
      assert.deepEqual([cancel.body, cancel.cancel.targetId], ['cancel', slow.id]);
      const ping = await s.readRequest(); // sent after the client gave up on slow
      // The search's answer came before the Cancel stopped it: still ignored.
      await s.send([chunk(slow.id, 0, [[0, 0]], { final: true, total: 1 }),
        { id: ping.id, final: true, pong: { nonce: ping.ping.nonce } }]);
    });
    const client = new PathdClient(server.addr, { timeoutMs: 200 });
    await assert.rejects(client.findPath('demo', [0, 0], [0, 0]), (err) => err instanceof PathdTimeout && err.sent);
    client.timeoutMs = 10000;
    await client.ping();
    assert.ok(client.connected);
    assert.equal(client.inFlight, 0);
    client.close();
    await server.done();
  });

  it('sends its calls once a GetLimits answered after the timeout arrives: a slow start does not wedge', async () => {
    // A loaded machine (the client's event loop or the server stalled past
    // timeoutMs) answers a new socket's GetLimits late. Counted calls wait
    // for that answer, so once it comes the connection must work: before,
    // the late answer was dropped with its timed-out request, the cap was
    // never set, and every later call waited in the queue until it timed
    // out, on a socket that looked healthy (the colyseus room's outage).
    let open;
    const gate = new Promise((resolve) => { open = resolve; });
    const server = await FakeServer.start(async (s) => {
      await s.accept();
      await gate; // GetLimits is not read, so not answered, before this
      const request = await s.readRequest(); // answers GetLimits first
      await s.send([chunk(request.id, 0, [[2, 2]], { final: true, total: 1 })]);
    });
    const client = new PathdClient(server.addr, { timeoutMs: 100 });
    try {
      await assert.rejects(client.findPath('demo', [1, 1], [2, 2]), (err) => err instanceof PathdTimeout && !err.sent);
      assert.deepEqual([client.inFlightCap, client.queued], [null, 0]); // the call never left the queue
      client.timeoutMs = 10000;
      // The late GetLimits answer comes while the next call waits for it.
      const next = client.findPath('demo', [1, 1], [2, 2]);
      open();
      assert.deepEqual((await next).waypoints, [[2, 2]]);
      assert.equal(client.inFlightCap, 64);
      assert.equal(client.reconnects, 0);
    } finally {
      client.close(); // also ends the script's wait when the call failed
      open();
    }
    await server.done();
    assert.equal(server.limitsAsked, 1);
    assert.equal(server.requests.length, 1, 'the timed-out call was never sent');
  });

  it('applies an Auth answered after the timeout: the role, and GetLimits asked again', async () => {
    // A server with tokens refuses GetLimits before Auth; auth()'s answer
    // comes after timeoutMs (a loaded machine). Before, Auth had a timeout
    // of its own and its late answer was dropped: the role stayed unset and
    // the GetLimits asked after a granted Auth was never sent, so the
    // connection kept the fallback cap (64) for its life.
    let open;
    const gate = new Promise((resolve) => { open = resolve; });
    const server = await FakeServer.start(async (s) => {
      await s.accept();
      const refused = await s.readFrame();
      assert.equal(refused.body, 'limits');
      await s.send([error(refused.id, 'UNAUTHENTICATED', 'send Auth first')]);
      const ping = await s.readRequest();
      await s.send([{ id: ping.id, final: true, pong: { nonce: ping.ping.nonce } }]);
      const auth = await s.readFrame();
      assert.equal(auth.body, 'auth');
      await gate; // answered once the client's auth() timed out
      await s.send([{ id: auth.id, final: true, auth: { role: 'query' } }]);
      const limits = await s.readFrame();
      assert.equal(limits.body, 'limits');
      await s.send([{ id: limits.id, final: true, limits: { maxInflightPerConn: 3, maxBatchItems: 3 } }]);
      await s.waitClosed(); // the connection stays up while the test looks
    });
    const client = new PathdClient(server.addr, { timeoutMs: 10000 });
    try {
      await client.ping();
      assert.deepEqual([client.inFlightCap, client.role], [64, null]); // the fallback cap
      client.timeoutMs = 100;
      await assert.rejects(client.auth('a-token-the-server-is-slow-to-check'),
        (err) => err instanceof PathdTimeout && err.sent);
      assert.equal(client.role, null);
      client.timeoutMs = 10000;
      open();
      await until(() => client.inFlightCap === 3, 'the cap read again after the late Auth answer');
      assert.equal(client.role, 'query');
      assert.equal(client.reconnects, 0);
    } finally {
      client.close(); // also ends the script's wait when the test failed
      open();
    }
    await server.done();
  });

  it('reads a grid again when the scene changes between bands', async () => {
    const band = (request, version, rows) => ({
      id: request.id,
      final: true,
      sceneGrid: {
        width: 2, height: 3, version, rowStart: request.sceneGrid.rowStart, rowCount: rows.length, cells: Buffer.from(rows.flat()),
      },
    });
    const server = await FakeServer.start(async (s) => {
      await s.accept();
      await s.send([band(await s.readRequest(), 1, [[0, 1], [1, 1]])]);
      await s.send([band(await s.readRequest(), 2, [[5, 0]])]); // updated meanwhile
      await s.send([band(await s.readRequest(), 2, [[0, 1], [1, 12]])]);
      await s.send([band(await s.readRequest(), 2, [[5, 0]])]);
    });
    const client = new PathdClient(server.addr, { timeoutMs: 10000 });
    const grid = await client.sceneGrid('demo');
    client.close();
    await server.done();
    assert.deepEqual(server.requests.map((r) => r.sceneGrid.rowStart || 0), [0, 2, 0, 2]);
    assert.deepEqual([grid.version, [...grid.cells]], [2, [0, 1, 1, 12, 5, 0]]);
    assert.deepEqual(gridRows(grid), ['#.', '.+', '5#']);
  });

  it('treats route legs out of order as a protocol error', async () => {
    const server = await FakeServer.start(async (s) => {
      await s.accept();
      const request = await s.readRequest();
      await s.send([{ id: request.id, routeLeg: { leg: 1, scene: 'b', seq: 0 } }]);
      await s.waitClosed();
    });
    const client = new PathdClient(server.addr, { timeoutMs: 10000 });
    await assert.rejects(client.findRoute('a', [0, 0], 'b', [1, 1]), (err) => {
      assert.ok(err instanceof PathdProtocolError);
      assert.match(err.message, /route leg 1 frame 0 arrived, expected leg 0/);
      return true;
    });
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

  it('counts a batch by its items against the cap', async () => {
    const reach = (k) => query('isReachable', 'demo', [0, 0], [k, 0]);
    // Each answer waits for the test to have looked at the queue.
    const gates = [0, 1].map(() => {
      let open;
      const gate = new Promise((resolve) => { open = resolve; });
      return Object.assign(gate, { open });
    });
    const server = await FakeServer.start(async (s) => {
      await s.accept();
      const three = await s.readRequest();
      const one = await s.readRequest();
      await gates[0];
      await s.send([error(one.id, 'INTERNAL', 'one')]);
      await gates[1];
      await s.send([error(three.id, 'INTERNAL', 'three')]);
      const two = await s.readRequest();
      await s.send([error(two.id, 'INTERNAL', 'two')]);
    }, { cap: 4 });
    const client = new PathdClient(server.addr, { timeoutMs: 10000 });
    await client.limits(); // connects; the fake answers both GetLimits itself
    const three = client.send('batch', [reach(1), reach(2), reach(3)]);
    const one = client.send('raycast', 'demo', [0, 0], [1, 0]);
    const two = client.send('batch', [reach(1), reach(2)]);
    // 3 + 1 slots fill the cap of 4: the batch of 2 waits.
    assert.deepEqual([client.inFlightSlots, client.queued], [4, 1]);
    gates[0].open();
    assert.equal((await one.promise).status, 'INTERNAL');
    // 3 + 2 > 4: it still waits for the batch of three.
    assert.deepEqual([client.inFlightSlots, client.queued], [3, 1]);
    gates[1].open();
    assert.equal((await three.promise).status, 'INTERNAL');
    assert.equal((await two.promise).status, 'INTERNAL');
    assert.deepEqual([client.inFlightSlots, client.queued], [0, 0]);
    client.close();
    await server.done();
    assert.deepEqual(server.requests.map((r) => (r.batch ? r.batch.items.length : 1)), [3, 1, 2]);
  });

  it('rejects a call at once with QUEUE_FULL when the local queue is full', async () => {
    const server = await FakeServer.start(async (s) => {
      await s.accept();
      await s.readRequest();
      await s.readRequest();
      await s.waitClosed();
    }, { cap: 2 });
    const client = new PathdClient(server.addr, { timeoutMs: 10000, maxQueued: 3 });
    await client.limits();
    const sent = Array.from({ length: 5 }, (_, k) => client.send('raycast', 'demo', [0, 0], [k, 0]));
    assert.deepEqual([client.inFlightSlots, client.queued], [2, 3]);
    await assert.rejects(client.raycast('demo', [0, 0], [9, 9]), (err) => {
      assert.ok(err instanceof PathdQueueFull);
      assert.equal(err.status, 'QUEUE_FULL');
      assert.match(err.message, /3 requests already wait for this connection's in-flight cap of 2 slots \(maxQueued 3\); nothing was sent/);
      return true;
    });
    // A queued request cancelled locally settles CANCELLED, never sent.
    client.cancel(sent[4].id);
    assert.equal((await sent[4].promise).status, 'CANCELLED');
    assert.equal(client.queued, 2);
    client.close();
    await Promise.all(sent.slice(0, 4).map((s) => assert.rejects(s.promise, (err) => err instanceof PathdDisconnected)));
    await server.done();
    assert.equal(server.requests.length, 2);
  });

  it('stops retrying OVERLOADED at the retry deadline', async () => {
    const server = await FakeServer.start(async (s) => {
      await s.accept();
      for (;;) {
        let request;
        try {
          request = await s.readRequest();
        } catch (err) {
          return; // the client gave up and closed
        }
        await s.send([error(request.id, 'OVERLOADED', 'busy')]);
      }
    });
    const client = new PathdClient(server.addr, { timeoutMs: 10000, retryAttempts: 1000, retryDeadlineMs: 300 });
    await assert.rejects(client.findPath('demo', [1, 1], [3, 2]), assertStatus('OVERLOADED'));
    client.close();
    await server.done();
    // 20, 40, 80, 160 ms steps, each at least half taken: the deadline of
    // 300 ms ends it long before 1000 attempts, and after more than one.
    assert.ok(server.requests.length > 1 && server.requests.length < 10, `${server.requests.length} attempts`);
    assert.equal(client.overloadedCount, server.requests.length);
  });

  it('without reconnect, fails the call when the connection drops, and the next call reconnects', async () => {
    const server = await FakeServer.start(async (s) => {
      await s.accept();
      await s.readRequest();
      await s.accept(); // closes the first connection: the answer never comes
      const ping = await s.readRequest();
      await s.send([{ id: ping.id, final: true, pong: { nonce: ping.ping.nonce } }]);
    });
    const client = new PathdClient(server.addr, { timeoutMs: 10000, reconnect: false });
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

// ---- replicas (issue 32) ------------------------------------------------------

const pong = (req) => ({ id: req.id, final: true, pong: { nonce: req.ping.nonce } });
const updateOk = (req, version) => ({ id: req.id, final: true, update: { version, cellsChanged: 1 } });
const DRAINING_NOW = { id: 0, status: 'DRAINING', final: true };

/* The reconnect pause belongs to the client: against a server that
 * refuses every socket (DRAINING first), the sockets opened follow the
 * doubling steps whatever the number of calls waiting. Before the fix each
 * call had its own pause: 1 call opened 5 sockets in 0.8 s, 50 calls 55 in
 * 1 s, 500 calls 90. */
describe('the reconnect gate is shared by the calls waiting', () => {
  async function socketsOpened(calls) {
    const server = await alwaysDraining();
    const client = new PathdClient(server.addr, { timeoutMs: 5000, retryDeadlineMs: 1000 });
    try {
      // Half take a slot (queued behind GetLimits), half none (Ping: written at once).
      const outcomes = await Promise.allSettled(Array.from({ length: calls },
        (_, i) => (i % 2 ? client.ping() : client.isReachable('town', [1, 1], [3, 3]))));
      assert.ok(outcomes.every((o) => o.status === 'rejected'), 'every call was refused');
      return server.accepted;
    } finally {
      client.close();
      await server.close();
    }
  }

  it('opens about one socket per back-off step however many calls wait', async () => {
    // Steps of 25-50, 50-100, 100-200, 200-400, 400-800 ms: at most 6
    // sockets within the 1 s deadline; 15 leaves a wide margin.
    for (const calls of [1, 50, 500]) {
      const opened = await socketsOpened(calls);
      assert.ok(opened >= 2 && opened <= 15, `${calls} calls opened ${opened} sockets`);
    }
  });

  /* The gate opens when its timer fires. Before the fix it was "shut
   * until Date.now() reaches _gateAt", and Date.now() is the wall clock:
   * NTP or a VM's clock sync may step it back, and even unstepped, libuv's
   * whole-millisecond timers fire up to ~1.6 ms before it says their wait
   * is over. The socket the timer let through, refused before Date.now()
   * got there, was taken for a failure of the step under way: nothing
   * shut the gate again, and the call opened socket after socket at once
   * while the wall clock lagged, the pauses' doubling skipped (the likely
   * cause of the draining test's one CI failure, 'no backoff between the
   * sockets'). The 1.6 ms made that rare; a clock stepped back 500 ms
   * makes it certain. Failed before the fix: the socket after the step
   * opened while the client itself said it was pausing, and the next ones
   * a millisecond apart. */
  it('waits out every pause when the wall clock is stepped back during one', async () => {
    const wallClock = Date.now;
    for (const token of [null, 'a-token']) { // GetLimits, or Auth, is the first answer
      let client = null;
      const opened = []; // performance.now() of each socket the server took
      let openedPausing = 0;
      const server = await alwaysDraining({
        onAccept: () => {
          opened.push(performance.now());
          if (client && client.reconnectPauseMs > 0) openedPausing++;
        },
      });
      client = new PathdClient(server.addr, { timeoutMs: 30000, retryDeadlineMs: 30000, token });
      try {
        const call = client.isReachable('town', [1, 1], [3, 3]);
        call.catch(() => {}); // refused for as long as the server lives
        await until(() => client.reconnectPauseMs > 0, 'the first socket refused');
        Date.now = () => wallClock() - 500;
        await until(() => server.accepted >= 5, 'four more sockets', 20000);
        const gaps = opened.slice(1, 5).map((at, k) => at - opened[k]);
        const seen = `token ${token}: ${openedPausing} sockets opened during a pause; gaps ${gaps.map(Math.round)} ms`;
        assert.equal(openedPausing, 0, seen);
        // Each pause at least half its step (the steps double from the
        // first), less 2 ms for a timer firing before the whole millisecond.
        gaps.forEach((gap, k) => {
          const least = Math.min(RECONNECT_BACKOFF_FIRST_MS * 2 ** k, RECONNECT_BACKOFF_MAX_MS) / 2 - 2;
          assert.ok(gap >= least, `${seen}: pause ${k + 1} under ${least} ms`);
        });
      } finally {
        Date.now = wallClock;
        client.close();
        await server.close();
      }
    }
  });

  it('a new call whose retry deadline ends inside the pause rejects at once, nothing sent', async () => {
    // Before the fix its first send waited out the whole pause (up to 2 s)
    // whatever its retryDeadlineMs; its resends already checked it.
    const server = await alwaysDraining();
    const client = new PathdClient(server.addr, { timeoutMs: 30000, retryDeadlineMs: 30000 });
    try {
      const first = client.scenes();
      first.catch(() => {});
      await until(() => client.reconnects >= 3 && !client.connected && client.reconnectPauseMs > 50,
        'a pause of more than 50 ms', 20000);
      client.retryDeadlineMs = 10; // the next call's deadline (and the first's) ends inside the pause
      const accepted = server.accepted;
      let settled = null;
      client.ping().then(() => { settled = 'resolved'; }, (err) => { settled = err; });
      await new Promise((resolve) => { setImmediate(resolve); });
      assert.ok(settled instanceof PathdDisconnected, `not rejected before the pause ended: ${settled}`);
      assert.equal(settled.sent, false);
      assert.match(settled.message, /past retryDeadlineMs \(10\)/);
      assert.equal(server.accepted, accepted, 'a socket was opened for it');
    } finally {
      client.close();
      await server.close();
    }
  });

  it('cancels a request on the connection it was written on, even once that one is retiring', async () => {
    // Before the fix the cancel went on a new socket (the id means nothing
    // there), and the draining replica ran the search to its end.
    const server = await FakeServer.start(async (s) => {
      await s.accept();
      const r = await s.readRequest();
      await s.send([error(0, 'DRAINING', 'draining')]);
      const c = await s.readRequest(); // on the same connection
      assert.equal(c.body, 'cancel');
      assert.equal(Number(c.cancel.targetId), r.id);
      await s.send([error(r.id, 'CANCELLED', 'cancelled')]);
    });
    const client = new PathdClient(server.addr, { timeoutMs: 10000 });
    try {
      const { id, promise } = client.sendFindPath('demo', [1, 1], [2, 2]);
      await until(() => server.requests.length >= 1 && !client.connected, 'the socket retired on DRAINING');
      client.cancel(id);
      assert.equal((await promise).status, 'CANCELLED');
      assert.equal(client.reconnects, 0, 'a socket was opened for the cancel');
      client.cancel(id); // answered: nothing left to cancel, and no socket for it
      assert.equal(client.connected, false);
    } finally {
      client.close();
    }
    await server.done();
  });

  it('auth() stops connecting once it has been rejected', async () => {
    // Before the fix it went on connecting and sending Auth for the whole
    // retryDeadlineMs (10 s here) after rejecting at its timeoutMs.
    const server = await alwaysDraining();
    const client = new PathdClient(server.addr, { timeoutMs: 300, retryDeadlineMs: 10000 });
    try {
      await assert.rejects(client.auth('a-token'), PathdError); // DRAINING, or PathdTimeout
      const rejectedAt = server.accepted;
      await new Promise((resolve) => setTimeout(resolve, 1500));
      assert.ok(server.accepted <= rejectedAt + 1, `${server.accepted - rejectedAt} sockets after auth() rejected`);
    } finally {
      client.close();
      await server.close();
    }
  });
});

describe('replicas: reconnect, resend, BEHIND, UNAVAILABLE, DRAINING, maximum age (fake servers)', () => {
  it('sends a query lost with its connection again on a new one', async () => {
    const server = await FakeServer.start(async (s) => {
      await s.accept();
      await s.readRequest();
      await s.accept(); // drops the first connection, the ping unanswered
      await s.send([pong(await s.readRequest())]);
    });
    const client = new PathdClient(server.addr, { timeoutMs: 10000 });
    await client.ping();
    assert.deepEqual([client.resent, client.reconnects], [1, 1]);
    client.close();
    await server.done();
    assert.equal(server.requests[1].ping.nonce, server.requests[0].ping.nonce);
  });

  it('sends a keyed update again with the same key, and an unkeyed one never', async () => {
    const server = await FakeServer.start(async (s) => {
      await s.accept();
      await s.readRequest();
      await s.accept();
      await s.send([updateOk(await s.readRequest(), 5)]);
      await s.readRequest(); // the unkeyed update, lost too
      await s.accept();
      await s.send([pong(await s.readRequest())]);
    });
    const client = new PathdClient(server.addr, { timeoutMs: 10000 });
    assert.equal((await client.updateCells('demo', { cells: [[1, 1]] })).version, 5);
    client.idempotencyKeys = false;
    await assert.rejects(client.updateCells('demo', { cells: [[1, 1]] }), (err) => err instanceof PathdDisconnected);
    await client.ping();
    client.close();
    await server.done();
    const [first, again, unkeyed, ping] = server.requests;
    assert.match(first.updateCells.idempotencyKey, /^[0-9a-f]{32}$/);
    assert.deepEqual(again.updateCells, first.updateCells);
    assert.ok(!unkeyed.updateCells.idempotencyKey);
    assert.equal(ping.body, 'ping');
  });

  it('retries UNAVAILABLE and BEHIND with the same key; takes the caller\'s key', async () => {
    const server = await FakeServer.start(async (s) => {
      await s.accept();
      await s.send([error((await s.readRequest()).id, 'UNAVAILABLE', 'log unreachable')]);
      const behind = error((await s.readRequest()).id, 'STALE_VERSION', 'behind');
      behind.error.version = 6;
      await s.send([behind]);
      await s.send([updateOk(await s.readRequest(), 7)]);
    });
    const client = new PathdClient(server.addr, { timeoutMs: 10000 });
    const answer = await client.updateCells('demo', { rect: [[0, 0], [1, 1]], idempotencyKey: 'tick-42' });
    assert.throws(() => client.updateCells('demo', { cells: [[1, 1]], idempotencyKey: 'x'.repeat(65) }), TypeError);
    assert.equal(answer.version, 7);
    assert.deepEqual(client.retries, { UNAVAILABLE: 1, STALE_VERSION: 1 });
    client.close();
    await server.done();
    assert.deepEqual(server.requests.map((r) => r.updateCells.idempotencyKey), ['tick-42', 'tick-42', 'tick-42']);
  });

  it('on a DRAINING signal: a new connection, the answers owed on the old one, then it closes', async () => {
    const server = await FakeServer.start(async (s) => {
      await s.accept();
      // The watch takes no slot, so it may overtake the path queued
      // behind GetLimits: told apart by body.
      const two = [await s.readRequest(), await s.readRequest()];
      const path = two.find((r) => r.body === 'findPath');
      const watch = two.find((r) => r.body === 'watch');
      await s.send([{ id: watch.id, watchEvent: { kind: 'WATCH_STARTED', scene: 'demo' } }, DRAINING_NOW]);
      const old = await s.accept({ keep: true });
      await s.send([pong(await s.readRequest())]);
      const fresh = s.st;
      s.use(old);
      await s.send([chunk(path.id, 0, [[1, 1], [2, 2]], { final: true, cost: 1.5, total: 2 })]);
      await s.waitClosed();
      old.conn.destroy();
      s.use(fresh);
    });
    const client = new PathdClient(server.addr, { timeoutMs: 10000 });
    const path = client.sendFindPath('demo', [1, 1], [2, 2]);
    const watchId = await client.watch(['demo']);
    assert.equal((await client.watchNext()).kind, 'started');
    const ended = await client.watchNext();
    assert.deepEqual([ended.status, ended.watch, ended.final], ['DRAINING', watchId, true]);
    await client.ping();
    const result = await path.promise;
    assert.deepEqual([result.status, result.cost], ['OK', 1.5]);
    assert.equal(client.reconnects, 1);
    client.close();
    await server.done();
    assert.deepEqual(server.requests.map((r) => r.body).sort(), ['findPath', 'ping', 'watch']);
    assert.equal(server.requests[2].body, 'ping');
  });

  it('sends a request answered DRAINING again at once on a new connection', async () => {
    const server = await FakeServer.start(async (s) => {
      await s.accept();
      await s.send([error((await s.readRequest()).id, 'DRAINING', 'draining')]);
      const old = await s.accept({ keep: true });
      await s.send([updateOk(await s.readRequest(), 3)]);
      const fresh = s.st;
      s.use(old);
      await s.waitClosed();
      old.conn.destroy();
      s.use(fresh);
    });
    const client = new PathdClient(server.addr, { timeoutMs: 10000 });
    assert.equal((await client.updateCells('demo', { cells: [[2, 2]] })).version, 3);
    assert.deepEqual(client.retries, { DRAINING: 1 });
    client.close();
    await server.done();
    assert.deepEqual(server.requests[1].updateCells, server.requests[0].updateCells);
  });

  it('replaces a connection older than maxConnectionAgeMs', async () => {
    const server = await FakeServer.start(async (s) => {
      await s.accept();
      await s.send([pong(await s.readRequest())]);
      const old = await s.accept({ keep: true });
      await s.send([pong(await s.readRequest())]);
      const fresh = s.st;
      s.use(old);
      await s.waitClosed();
      old.conn.destroy();
      s.use(fresh);
    });
    const client = new PathdClient(server.addr, { timeoutMs: 10000, maxConnectionAgeMs: 200 });
    await client.ping();
    await new Promise((resolve) => setTimeout(resolve, 300));
    await client.ping();
    assert.equal(client.reconnects, 1);
    client.close();
    await server.done();
  });

  it('gives up a resend when close() is called meanwhile, and opens no new connection', async () => {
    let dropped;
    const droppedP = new Promise((resolve) => { dropped = resolve; });
    const server = await FakeServer.start(async (s) => {
      await s.accept();
      await s.readRequest();
      s.conn.destroy(); // the ping is lost
      dropped();
      await new Promise((resolve) => setTimeout(resolve, 300));
    });
    const client = new PathdClient(server.addr, { timeoutMs: 10000 });
    const ping = client.ping();
    await droppedP;
    client.close();
    await assert.rejects(ping, (err) => err instanceof PathdDisconnected);
    await server.done();
    assert.deepEqual([server.conns.length, client.connected, client.reconnects], [0, false, 0]);
  });

  it('backs off and reconnects to a server that comes back on the same port', async () => {
    const probe = net.createServer();
    await new Promise((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const { port } = probe.address();
    await new Promise((resolve) => probe.close(resolve));
    let server = null;
    const later = new Promise((resolve) => setTimeout(resolve, 400)).then(async () => {
      server = await FakeServer.start(async (s) => {
        await s.accept();
        await s.send([pong(await s.readRequest())]);
      }, { port });
    });
    const client = new PathdClient(`127.0.0.1:${port}`, { timeoutMs: 10000, retryDeadlineMs: 10000 });
    await client.ping();
    assert.ok(client.resent >= 1);
    client.close();
    await later;
    await server.done();
  });
});

describe('replicas: kill -9 and restart of pathd on the same port mid-run', () => {
  it('answers every query and acknowledges each update once', async () => {
    const probe = net.createServer();
    await new Promise((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const listen = `127.0.0.1:${probe.address().port}`;
    await new Promise((resolve) => probe.close(resolve));
    let daemon = await Daemon.start({}, null, { listen });
    const client = new PathdClient(daemon.addr, { timeoutMs: 10000, retryDeadlineMs: 10000 });
    const answers = [];
    let stop = false;
    const load = (async () => {
      while (!stop) {
        answers.push(['q', (await client.findPath(...SHORT)).status]);
        answers.push(['u', (await client.updateCells('town', { cells: [[5, 5]], op: 'cost', cost: 2 })).version]);
      }
    })();
    const until = async (n) => { while (answers.length < n) await new Promise((resolve) => setTimeout(resolve, 10)); };
    try {
      await until(20);
      daemon.proc.kill('SIGKILL');
      await daemon.stop();
      const killedAt = answers.length;
      daemon = await Daemon.start({}, null, { listen });
      await until(killedAt + 20);
    } finally {
      stop = true;
      await load.catch((err) => assert.fail(`a call failed across the restart: ${err}`));
      client.close();
    }
    const check = new PathdClient(daemon.addr);
    const final = (await check.sceneInfo('town')).version;
    check.close();
    await daemon.stop();
    assert.ok(client.reconnects > 0);
    assert.ok(answers.filter(([kind]) => kind === 'q').every(([, status]) => status === 'OK'));
    // The restarted daemon's acknowledged versions: one each, dense, up to
    // the scene's version (an update applied twice would leave a gap).
    const versions = answers.filter(([kind]) => kind === 'u').map(([, v]) => v);
    let restart = 0;
    for (let i = 1; i < versions.length; i++) if (versions[i] <= versions[i - 1]) restart = i;
    const after = versions.slice(restart);
    assert.deepEqual(after, after.map((_, i) => after[0] + i));
    assert.equal(after[after.length - 1], final);
  });
});

describe('the reconnect gate: review of the Node client (rev-node)', () => {
  const limits = (request) => ({ id: request.id, status: 'OK', final: true, limits: { maxInflightPerConn: 64, maxBatchItems: 64 } });
  const refused = (request) => error(request.id, 'DRAINING', 'this replica is draining');

  /* close() during a reconnect pause: the calls waiting at the gate (one
   * resending, one new, an auth()) reject at once, not when the pause
   * ends (up to RECONNECT_BACKOFF_MAX_MS later), and no gate timer is left
   * holding the process. Before the fix they waited for the gate's timer,
   * which the waiting calls had ref()ed, so a script that called close()
   * stayed alive for the rest of the pause. Settled before a setImmediate:
   * no wall-clock bound. */
  it('close() during a pause rejects the waiting calls at once, no timer left', async () => {
    const server = await alwaysDraining();
    const client = new PathdClient(server.addr, { timeoutMs: 30000, retryDeadlineMs: 30000 });
    try {
      const first = client.isReachable('town', [1, 1], [3, 3]);
      await until(() => client.reconnects >= 3 && !client.connected && client.reconnectPauseMs > 50,
        'the client pausing after a refused socket', 20000);
      const calls = [first, client.scenes(), client.auth('a-token')];
      const outcomes = calls.map((call) => call.then(() => 'resolved', (err) => err));
      client.close();
      const seen = await Promise.race([Promise.all(outcomes),
        new Promise((resolve) => { setImmediate(() => resolve('still waiting')); })]);
      assert.notEqual(seen, 'still waiting', 'a call waiting at the gate outlived close()');
      for (const err of seen) assert.ok(err instanceof PathdDisconnected, String(err));
      const gate = client._gate;
      assert.ok(!gate || !gate.timer.hasRef(), 'a gate timer keeps the process alive after close()');
    } finally {
      client.close();
      await server.close();
    }
  });

  /* A call retried after OVERLOADED sleeps its retry backoff; if its socket
   * is lost meanwhile the gate shuts, and the call must wait for it like
   * any other. Before the fix the gate was only looked at before the first
   * send, so the retry opened a socket at once, inside the pause. Three
   * refused sockets first grow the step, so the pause (200-400 ms) far
   * outlasts the retry's sleep (10-20 ms). */
  it('a call retrying OVERLOADED whose socket was lost meanwhile waits for the pause', async () => {
    let client = null;
    const pauseAtAccept = [];
    const server = await scriptedServer({
      onAccept: () => pauseAtAccept.push(client ? client.reconnectPauseMs : 0),
      answer: (request, k, conn) => {
        if (k < 3) return [refused(request)];
        if (request.body === 'limits') return [limits(request)];
        if (k === 3) {
          setImmediate(() => conn.end()); // lost after its OVERLOADED answer
          return [error(request.id, 'OVERLOADED', 'job queue full')];
        }
        return [{ id: request.id, status: 'OK', final: true, sceneList: { scenes: [] } }];
      },
    });
    client = new PathdClient(server.addr, { timeoutMs: 30000, retryDeadlineMs: 30000 });
    try {
      assert.deepEqual(await client.scenes(), []);
      assert.equal(server.accepted, 5, `pauses at accept ${pauseAtAccept.map(Math.round)}`);
      assert.equal(pauseAtAccept[4], 0, `the socket after the lost one opened ${Math.round(pauseAtAccept[4])} ms `
        + 'before the reconnect pause ended');
    } finally {
      client.close();
      await server.close();
    }
  });

  /* pathd at max_connections accepts a connection, answers OVERLOADED with
   * id 0 and closes it (docs/PROTOCOL.md, "Limits"). That socket is one
   * that could not be opened: the gate must shut. Before the fix _fail()
   * dropped it first, so its close event did not shut the gate, and every
   * query resent at once: a full server hammered with a socket per round
   * trip for the whole retryDeadlineMs (hundreds in 1 s). With the pauses
   * (25-50, 50-100, ... ms) at most 6 fit in 1 s; 15 leaves a wide margin. */
  it('a connection refused with an id-0 error shuts the gate', async () => {
    const server = await scriptedServer({
      greet: (k, conn) => {
        setImmediate(() => conn.end());
        return [{ id: 0, status: 'OVERLOADED', final: true, error: { message: 'too many connections' } }];
      },
      answer: () => [],
    });
    const client = new PathdClient(server.addr, { timeoutMs: 5000, retryDeadlineMs: 1000 });
    try {
      const outcome = await client.isReachable('town', [1, 1], [3, 3]).then(() => null, (err) => err);
      assert.ok(outcome instanceof PathdDisconnected, String(outcome));
      assert.ok(server.accepted >= 2 && server.accepted <= 15, `${server.accepted} sockets in the 1 s deadline`);
    } finally {
      client.close();
      await server.close();
    }
  });
});
