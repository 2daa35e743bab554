'use strict';
/*
 * Helpers for pathd-client.test.js: the environment the harness provides,
 * the C reference client, a second pathd with other limits, and a scripted
 * fake server for exact sequences a real daemon cannot be made to produce.
 */
const { execFileSync, spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const protobuf = require('protobufjs');

// How long a helper daemon may take to start listening, in milliseconds.
const DAEMON_START_TIMEOUT_MS = 10000;
// Side of the generated trap scene, in cells: a wall splits it down the
// middle except for a gap in the last row, and the search goes from one side
// of the wall's top to the other, so A* floods most of the grid (about
// 470,000 expansions; 100+ ms). Tests that need a request to stay in flight
// for a while use it instead of the demo world's few-millisecond searches.
const TRAP_SIDE = 1024;
const TRAP = ['trap', [TRAP_SIDE / 2 - 1, 0], [TRAP_SIDE / 2 + 1, 0]];

function writeTrapScene(file) {
  const open = '.'.repeat(TRAP_SIDE);
  const walled = `${'.'.repeat(TRAP_SIDE / 2)}#${'.'.repeat(TRAP_SIDE / 2 - 1)}`;
  const rows = Array.from({ length: TRAP_SIDE }, (_, y) => (y < TRAP_SIDE - 1 ? walled : open));
  fs.writeFileSync(file, `${rows.join('\n')}\n`);
}

/* Holds back the client's writes until fn returns, so the requests sent in
 * fn reach the server in one segment (the client must be connected). */
function corked(client, fn) {
  client._socket.cork();
  try {
    return fn();
  } finally {
    client._socket.uncork();
  }
}

const root = protobuf.loadSync(path.join(__dirname, '..', '..', '..', 'proto', 'pathd.proto'));
const Request = root.lookupType('pathd.v1.Request');
const Response = root.lookupType('pathd.v1.Response');

function env(name) {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is not set: run these tests through scripts/run-with-daemon.sh `
      + '(see client-examples/node/run-tests.sh)');
  }
  return value;
}

/* The C reference client's answer, as the object pathctl --json prints. */
function pathctl(addr, scene, start, goal, ...extra) {
  const out = execFileSync(env('PATHCTL_BIN'), ['--server', addr, '--json', 'path', '--scene', scene,
    '--from', start.join(','), '--to', goal.join(','), ...extra], { encoding: 'utf8', timeout: 30000 });
  return JSON.parse(out);
}

/* pathctl --json ARGS: the one object it prints (an array of them for batch). */
function pathctlJson(addr, args, { input } = {}) {
  const out = execFileSync(env('PATHCTL_BIN'), ['--server', addr, '--json', ...args.map(String)],
    { encoding: 'utf8', timeout: 30000, input });
  const lines = out.split('\n').filter((line) => line.trim()).map((line) => JSON.parse(line));
  return args[0] === 'batch' ? lines : lines[0];
}

/* pathctl ARGS without --json: its standard output. */
function pathctlText(addr, args) {
  return execFileSync(env('PATHCTL_BIN'), ['--server', addr, ...args.map(String)], { encoding: 'utf8', timeout: 30000 });
}

/* ours equals pathctl's JSON, but for the server time ("micros") and the
 * last digits of doubles (cJSON prints 15 significant digits). */
function assertSame(assert, ours, reference, where = 'answer') {
  if (Array.isArray(reference)) {
    assert.ok(Array.isArray(ours), `${where}: ${JSON.stringify(ours)} is not an array`);
    assert.equal(ours.length, reference.length, where);
    reference.forEach((r, i) => assertSame(assert, ours[i], r, `${where}[${i}]`));
  } else if (reference !== null && typeof reference === 'object') {
    assert.ok(ours !== null && typeof ours === 'object', `${where}: ${JSON.stringify(ours)} is not an object`);
    const keys = (o) => Object.keys(o).filter((k) => k !== 'micros').sort();
    assert.deepEqual(keys(ours), keys(reference), where);
    for (const k of keys(reference)) assertSame(assert, ours[k], reference[k], `${where}.${k}`);
  } else if (typeof reference === 'number') {
    assert.ok(Math.abs(ours - reference) <= 1e-12 * Math.max(1, Math.abs(reference)), `${where}: ${ours} vs ${reference}`);
  } else {
    assert.equal(ours, reference, where);
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/* A pathd started by a test from PATHD_CONFIG, with some limits (and other
 * top-level keys, such as threads) changed and the trap scene added. */
class Daemon {
  static async start(limits, auth = null, top = {}) {
    const configPath = env('PATHD_CONFIG');
    const config = JSON.parse(fs.readFileSync(configPath, 'utf8'));
    const base = path.dirname(path.resolve(configPath));
    for (const scene of config.scenes) scene.map = path.resolve(base, scene.map);
    const d = new Daemon();
    d.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pathd-node-'));
    const trapFile = path.join(d.dir, 'trap.txt');
    writeTrapScene(trapFile);
    config.scenes.push({ name: 'trap', map: trapFile, format: 'ascii' });
    config.listen = '127.0.0.1:0';
    // No fixed metrics port (parallel test daemons would collide on it), and
    // A* only: the trap scene holds a request in flight by being slow for A*,
    // which jump point search would answer at once.
    config.metrics_listen = '';
    config.jump_point_search = false;
    Object.assign(config.limits, limits);
    if (auth) config.auth = auth;
    Object.assign(config, top);
    const file = path.join(d.dir, 'pathd.json');
    fs.writeFileSync(file, JSON.stringify(config));
    d.logPath = path.join(d.dir, 'pathd.log');
    const log = fs.openSync(d.logPath, 'w');
    d.proc = spawn(env('PATHD_BIN'), ['--config', file], { stdio: ['ignore', 'ignore', log] });
    fs.closeSync(log);
    d.exited = new Promise((resolve) => d.proc.on('exit', (code, signal) => resolve(signal || code)));
    const deadline = Date.now() + DAEMON_START_TIMEOUT_MS;
    for (;;) {
      const match = /listening on (\S+)/.exec(d.log());
      if (match) {
        d.addr = match[1];
        return d;
      }
      if (d.proc.exitCode !== null || Date.now() > deadline) {
        const text = d.log();
        await d.stop();
        throw new Error(`helper pathd did not start:\n${text}`);
      }
      await sleep(50);
    }
  }

  log() {
    return fs.readFileSync(this.logPath, 'utf8');
  }

  /* SIGTERM; resolves with the exit status (or the signal's name). */
  async stop() {
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill('SIGTERM');
    const status = await this.exited;
    fs.rmSync(this.dir, { recursive: true, force: true });
    return status;
  }
}

function frame(message, Type) {
  const payload = Type.encode(Type.fromObject(message)).finish();
  const header = Buffer.alloc(4);
  header.writeUInt32BE(payload.length);
  return Buffer.concat([header, payload]);
}

/* A TCP server on 127.0.0.1 that plays an async script against the client:
 * accept(), readRequest() and send(); whatever the script throws is thrown
 * again by done(), so a wrong request fails the test. The GetLimits every
 * new client connection opens with is answered by readRequest() itself
 * (maxInflightPerConn = options.cap, default 64) and not recorded, so
 * scripts see only the requests under test. */
class FakeServer {
  static async start(script, { cap = 64, port = 0 } = {}) {
    const s = new FakeServer();
    s.cap = cap;
    s.limitsAsked = 0;
    s.requests = [];
    s.conns = [];
    s.connWaiters = [];
    s.server = net.createServer((conn) => {
      s.conns.push(conn);
      const waiter = s.connWaiters.shift();
      if (waiter) waiter();
    });
    await new Promise((resolve) => s.server.listen(port, '127.0.0.1', resolve));
    s.addr = `127.0.0.1:${s.server.address().port}`;
    s.finished = Promise.resolve().then(() => script(s)).finally(() => {
      if (s.conn) s.conn.destroy();
      s.server.close();
    });
    s.finished.catch(() => {}); // reported by done()
    return s;
  }

  /* Waits for the next connection; the previous one is closed, or with
   * keep returned (use(it) to talk on it again). */
  async accept({ keep = false } = {}) {
    const old = this.st;
    if (old && !keep) old.conn.destroy();
    if (this.conns.length === 0) await new Promise((resolve) => this.connWaiters.push(resolve));
    const st = { conn: this.conns.shift(), buf: Buffer.alloc(0), ended: false, readWaiter: null };
    const wake = () => {
      const w = st.readWaiter;
      st.readWaiter = null;
      if (w) w();
    };
    st.conn.on('data', (d) => { st.buf = Buffer.concat([st.buf, d]); wake(); });
    st.conn.on('end', () => { st.ended = true; wake(); });
    this.st = st;
    return keep ? old : null;
  }

  /* The connection the script talks on now. */
  get conn() {
    return this.st ? this.st.conn : null;
  }

  /* Talks on a connection accept({ keep: true }) returned, or the current
   * one accept() returned earlier (this.st). */
  use(st) {
    this.st = st;
  }

  async _read(n) {
    const { st } = this;
    while (st.buf.length < n) {
      if (st.ended) throw new Error('client closed the connection');
      await new Promise((resolve) => { st.readWaiter = resolve; });
    }
    const out = st.buf.subarray(0, n);
    st.buf = st.buf.subarray(n);
    return out;
  }

  /* The next request frame as it is, GetLimits too (nothing answered). */
  async readFrame() {
    const length = (await this._read(4)).readUInt32BE(0);
    return Request.toObject(Request.decode(await this._read(length)),
      { longs: Number, enums: String, oneofs: true });
  }

  /* The next request the script sees: a GetLimits before it is answered
   * (the server's cap, this.cap) and neither returned nor kept in requests. */
  async readRequest() {
    for (;;) {
      const request = await this.readFrame();
      if (request.body !== 'limits') {
        this.requests.push(request);
        return request;
      }
      this.limitsAsked++;
      await this.send([{
        id: request.id, final: true, limits: { maxInflightPerConn: this.cap, maxBatchItems: Math.min(this.cap, 256) },
      }]);
    }
  }

  /* Resolves once the client closed the connection; fails if it sends more. */
  async waitClosed() {
    const { st } = this;
    while (!st.ended) await new Promise((resolve) => { st.readWaiter = resolve; });
    if (st.buf.length) throw new Error('client sent more bytes instead of closing');
  }

  /* Writes the frames; with dribble one byte at a time, so the client sees
   * every frame boundary split. */
  async send(responses, { dribble = false } = {}) {
    const data = Buffer.concat(responses.map((r) => frame(r, Response)));
    if (!dribble) {
      this.conn.write(data);
      return;
    }
    for (let i = 0; i < data.length; i++) {
      this.conn.write(data.subarray(i, i + 1));
      await sleep(1);
    }
  }

  done() {
    return this.finished;
  }
}

/* A server on 127.0.0.1 that answers each request on its k-th connection
 * (k from 0) with the frames answer(request, k, conn) returns (Response
 * objects; request as readFrame gives it), and on each new connection first
 * writes greet(k, conn)'s, until close(); accepted counts the connections
 * it took, onAccept() is called as each is taken (before anything is read). */
async function scriptedServer({ answer, greet = () => [], onAccept = () => {} }) {
  const s = { accepted: 0, sockets: new Set() };
  s.server = net.createServer((conn) => {
    const k = s.accepted++;
    onAccept(k);
    s.sockets.add(conn);
    conn.on('close', () => s.sockets.delete(conn));
    conn.on('error', () => {});
    for (const response of greet(k, conn)) conn.write(frame(response, Response));
    let buf = Buffer.alloc(0);
    conn.on('data', (data) => {
      buf = Buffer.concat([buf, data]);
      while (buf.length >= 4 && buf.length >= 4 + buf.readUInt32BE(0)) {
        const length = buf.readUInt32BE(0);
        const request = Request.toObject(Request.decode(buf.subarray(4, 4 + length)),
          { longs: Number, enums: String, oneofs: true });
        buf = buf.subarray(4 + length);
        for (const response of answer(request, k, conn)) conn.write(frame(response, Response));
      }
    });
  });
  await new Promise((resolve) => s.server.listen(0, '127.0.0.1', resolve));
  s.addr = `127.0.0.1:${s.server.address().port}`;
  s.close = () => new Promise((resolve) => {
    for (const conn of s.sockets) conn.destroy();
    s.server.close(resolve);
  });
  return s;
}

/* A server on 127.0.0.1 that answers every request on every connection
 * DRAINING (Auth and GetLimits first), as a replica being stopped does,
 * until close(); accepted counts the connections it took, onAccept() is
 * called as each is taken (before anything is read from it). */
function alwaysDraining({ onAccept = () => {} } = {}) {
  return scriptedServer({ onAccept, answer: (request) => [error(request.id, 'DRAINING', 'this replica is draining')] });
}

function chunk(id, seq, cells, { final = false, status = 'OK', cost = 0, total = 0 } = {}) {
  // Packed as the server packs them: the first cell absolute, then deltas.
  const points = {
    dx: cells.map(([x], i) => x - (i ? cells[i - 1][0] : 0)),
    dy: cells.map(([, y], i) => y - (i ? cells[i - 1][1] : 0)),
    wx: cells.map(([x]) => x + 0.5),
    wy: cells.map(([, y]) => y + 0.5),
  };
  const path = { seq, ...(cells.length ? { points } : {}) };
  if (final) Object.assign(path, { cost, expansions: 7, sceneVersion: 3, totalWaypoints: total });
  return { id, status, final, path };
}

function error(id, status, message) {
  return { id, status, final: true, error: { message } };
}

module.exports = {
  env, pathctl, pathctlJson, pathctlText, assertSame, corked, TRAP, Daemon, FakeServer, chunk, error,
  alwaysDraining, scriptedServer,
};
