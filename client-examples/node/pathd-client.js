'use strict';
/*
 * pathd-client.js - a promise-based Node.js client for the pathd daemon.
 *
 * Example code meant to be copied into a game server. Its one dependency is
 * protobufjs (pinned in package-lock.json), which reads proto/pathd.proto at
 * run time, so there is no generated code to keep in step with the schema.
 *
 * Wire format (docs/PROTOCOL.md): every message is a 4-byte big-endian length
 * followed by one protobuf message. The client sends pathd.v1.Request, the
 * server answers with pathd.v1.Response frames carrying the request's id. A
 * path arrives as one or more PathChunk frames; the last has final = true and
 * carries cost, expansions, search time and scene version.
 *
 * One socket carries every call: each request gets a fresh id, any number
 * may be in flight at once, and answers (which may come back in any order)
 * settle the promise waiting for that id. So "pipelining" is simply calling
 * again before the last promise settled.
 *
 *   findPath(scene, start, goal, options) resolves with a PathResult for OK
 *     and PARTIAL and rejects with a PathdError (err.status = "NO_PATH", ...)
 *     for any other answer. OVERLOADED is retried with exponential backoff,
 *     at most options.retryAttempts times in all (default RETRY_ATTEMPTS).
 *   sendFindPath(...) is the raw form: it returns { id, promise } at once, and
 *     the promise resolves with a PathResult of ANY status (OVERLOADED too,
 *     not retried); it rejects only when no answer came.
 *   ping(), scenes(), sceneInfo(name), stats(): single-frame calls, with the
 *     same OVERLOADED retry.
 *
 * A request that gets no answer rejects with a subclass of PathdError:
 * PathdDisconnected (connection lost: every request still waiting fails with
 * it and nothing is resent), PathdTimeout (no answer within timeoutMs; a late
 * answer is ignored) or PathdProtocolError (the server broke the protocol; the
 * connection is closed, as the server does). The next call reconnects to the
 * same address by itself. Call close() when done, or the open socket keeps
 * the process alive.
 */
const net = require('node:net');
const path = require('node:path');
const protobuf = require('protobufjs');

const DEFAULT_SERVER = '127.0.0.1:7420';
// Per-request timeout in milliseconds, counted from the send.
const DEFAULT_TIMEOUT_MS = 5000;
// Largest incoming frame accepted, in bytes. A path chunk is ~10 KiB, so this
// only protects the client's memory from a broken or hostile peer.
const MAX_FRAME_BYTES = 16 * 1024 * 1024;
// Most waypoints assembled for one path: more than any sane grid path, and a
// bound on what a misbehaving server can make us hold by streaming chunks.
const MAX_PATH_WAYPOINTS = 4 * 1024 * 1024;
// OVERLOADED retries: total attempts, and the backoff between them in
// milliseconds, doubling from FIRST up to MAX. Five attempts wait at most
// 20+40+80+160 ms, short enough to stay interactive.
const RETRY_ATTEMPTS = 5;
const RETRY_BACKOFF_FIRST_MS = 20;
const RETRY_BACKOFF_MAX_MS = 1000;
const HEADER_BYTES = 4;
// Where the schema is read from: the repository's proto/ unless
// options.protoPath says otherwise (when this file is copied elsewhere).
const DEFAULT_PROTO_PATH = path.join(__dirname, '..', '..', 'proto', 'pathd.proto');

const STYLES = { cells: 'STYLE_CELLS', corners: 'STYLE_CORNERS' };
const CONNECTIVITY = { 0: 'CONNECTIVITY_DEFAULT', 8: 'CONNECTIVITY_8', 4: 'CONNECTIVITY_4' };
// How decoded answers are turned into plain objects: uint64 as Number (ids
// and counters stay far below 2^53), enums by name, oneof names in `body`.
const TO_OBJECT = { longs: Number, enums: String, defaults: true, oneofs: true };

const schemas = new Map();

function loadSchema(protoPath) {
  if (!schemas.has(protoPath)) {
    const root = protobuf.loadSync(protoPath);
    schemas.set(protoPath, {
      Request: root.lookupType('pathd.v1.Request'),
      Response: root.lookupType('pathd.v1.Response'),
    });
  }
  return schemas.get(protoPath);
}

class PathdError extends Error {
  /* status: the wire status name ("UNKNOWN_SCENE", "OVERLOADED", ...) or, for
   * the subclasses, "DISCONNECTED", "TIMEOUT", "PROTOCOL_ERROR". requestId is
   * the request's id; result is the PathResult of a path answer (its metrics). */
  constructor(status, message = '', { requestId = null, result = null } = {}) {
    super(message ? `${status}: ${message}` : status);
    this.name = this.constructor.name;
    this.status = status;
    this.detail = message;
    this.requestId = requestId;
    this.result = result;
  }
}

class PathdDisconnected extends PathdError {
  constructor(message, options) { super('DISCONNECTED', message, options); }
}

class PathdTimeout extends PathdError {
  constructor(message, options) { super('TIMEOUT', message, options); }
}

class PathdProtocolError extends PathdError {
  constructor(message, options) { super('PROTOCOL_ERROR', message, options); }
}

// Thrown inside the reader when the server breaks the protocol.
class Violation extends Error {}

/* One answered path request. waypoints are cells [[x, y]], world the centres
 * of those cells in world coordinates [[wx, wy]]; version is the scene
 * version the search ran on. */
class PathResult {
  constructor(id) {
    this.id = id;
    this.status = 'OK';
    this.message = '';
    this.cost = 0;
    this.expansions = 0;
    this.searchMicros = 0;
    this.version = 0;
    this.waypoints = [];
    this.world = [];
  }

  /* True for OK and PARTIAL: the waypoints are usable. */
  get ok() {
    return this.status === 'OK' || this.status === 'PARTIAL';
  }
}

function parseAddress(addr) {
  const colon = addr.lastIndexOf(':');
  let host = addr.slice(0, colon);
  const port = Number(addr.slice(colon + 1));
  if (colon <= 0 || !Number.isInteger(port) || port <= 0 || port > 65535) {
    throw new TypeError(`address must be HOST:PORT or [V6ADDR]:PORT, got ${JSON.stringify(addr)}`);
  }
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  return { host, port };
}

function statusName(status) {
  return typeof status === 'string' ? status : `UNKNOWN_STATUS_${status}`;
}

function point(p, world) {
  if (!Array.isArray(p) || p.length !== 2) {
    throw new TypeError(`a point is a pair [x, y], got ${JSON.stringify(p)}`);
  }
  return world ? { world: { x: Number(p[0]), y: Number(p[1]) } }
    : { cell: { x: Math.trunc(p[0]), y: Math.trunc(p[1]) } };
}

function findPathBody(scene, start, goal, options = {}) {
  const {
    world = false, unitSize = 0, connectivity = 0, style = 'cells',
    maxExpansions = 0, deadlineMs = 0,
  } = options;
  if (typeof scene !== 'string' || scene === '') throw new TypeError('scene must be a non-empty string');
  if (!(connectivity in CONNECTIVITY)) throw new TypeError('connectivity must be 0 (server default, 8), 4 or 8');
  if (!(style in STYLES)) throw new TypeError("style must be 'cells' or 'corners'");
  return {
    findPath: {
      scene,
      start: point(start, world),
      goal: point(goal, world),
      unitSize,
      connectivity: CONNECTIVITY[connectivity],
      style: STYLES[style],
      maxExpansions,
      deadlineMs,
    },
  };
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

class PathdClient {
  /* addr is "host:port" or "[v6addr]:port". The socket opens on the first
   * call. options.timeoutMs bounds each request; options.retryAttempts
   * (>= 1) is how many times in all a request the server answers OVERLOADED
   * is sent; options.protoPath locates pathd.proto; options.token, for a
   * server with auth.tokens, is sent first on every new socket (auth()). */
  constructor(addr = DEFAULT_SERVER, {
    timeoutMs = DEFAULT_TIMEOUT_MS, retryAttempts = RETRY_ATTEMPTS, protoPath = DEFAULT_PROTO_PATH,
    token = null,
  } = {}) {
    ({ host: this.host, port: this.port } = parseAddress(addr));
    if (!(Number.isInteger(retryAttempts) && retryAttempts >= 1)) {
      throw new TypeError('retryAttempts must be an integer >= 1');
    }
    this.timeoutMs = timeoutMs;
    this.retryAttempts = retryAttempts;
    this._schema = loadSchema(protoPath);
    this._socket = null;
    this._rbuf = Buffer.alloc(0);
    // Ids keep increasing across reconnects, so a late answer to an old
    // request can never be mistaken for a new one.
    this._nextId = 1;
    this._pending = new Map(); // id -> { isPath, result, nextSeq, resolve, reject, timer }
    this.token = token;
    this.role = null;
    this._auth = null;
  }

  /* Authenticates this socket (and every later one) with token; resolves
   * with the role granted ("query", "write" or "admin"). A wrong token
   * rejects with UNAUTHENTICATED after about a second, and the server
   * closes the connection. */
  auth(token) {
    this.token = token;
    return this._socket ? this._authenticate() : (this._ensureConnected(), this._auth);
  }

  /* Sends Auth with the kept token ahead of anything else queued after it. */
  _authenticate() {
    const { promise } = this._send({ auth: { token: this.token } }, false);
    this._auth = promise.then((answer) => {
      if (answer.status !== 'OK') {
        throw new PathdError(answer.status, answer.message, { requestId: answer.id });
      }
      this.role = answer.auth.role;
      return this.role;
    });
    // Requests sent behind it fail on their own; only auth() reports this.
    this._auth.catch(() => {});
    return this._auth;
  }

  get connected() {
    return this._socket !== null;
  }

  /* Path requests sent and not yet answered. */
  get inFlight() {
    let n = 0;
    for (const p of this._pending.values()) if (p.isPath) n++;
    return n;
  }

  /* Closes the socket; requests still waiting reject with PathdDisconnected. */
  close() {
    this._fail(this._socket, PathdDisconnected, 'connection closed by the client');
  }

  // ---- connection -----------------------------------------------------------

  _ensureConnected() {
    if (this._socket) return this._socket;
    const socket = net.connect({ host: this.host, port: this.port });
    socket.setNoDelay(true);
    let reason = 'server closed the connection';
    let established = false;
    socket.on('connect', () => { established = true; });
    socket.on('data', (data) => this._onData(socket, data));
    socket.on('error', (err) => {
      reason = established ? `connection failed: ${err.message}`
        : `cannot connect to ${this.host}:${this.port}: ${err.message}`;
    });
    socket.on('close', () => this._fail(socket, PathdDisconnected, reason));
    this._socket = socket;
    this._rbuf = Buffer.alloc(0);
    if (this.token !== null) this._authenticate();
    return socket;
  }

  /* Drops the socket (if it is still the current one) and rejects every
   * request waiting for an answer. */
  _fail(socket, ErrorClass, message) {
    if (socket === null || socket !== this._socket) return;
    this._socket = null;
    this._rbuf = Buffer.alloc(0);
    socket.destroy();
    const waiting = [...this._pending.values()];
    this._pending.clear();
    for (const p of waiting) {
      clearTimeout(p.timer);
      p.reject(new ErrorClass(message, { requestId: p.id }));
    }
  }

  // ---- sending --------------------------------------------------------------

  /* Sends one request; the promise settles with the PathResult (paths) or the
   * answer frame as a plain object (everything else). */
  _send(body, isPath) {
    const id = this._nextId++;
    const { Request } = this._schema;
    const payload = Request.encode(Request.fromObject({ id, ...body })).finish();
    const header = Buffer.alloc(HEADER_BYTES);
    header.writeUInt32BE(payload.length);
    const socket = this._ensureConnected();
    const promise = new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this._pending.delete(id);
        reject(new PathdTimeout(`no answer within ${this.timeoutMs} ms`, { requestId: id }));
      }, this.timeoutMs);
      this._pending.set(id, {
        id, isPath, result: isPath ? new PathResult(id) : null, nextSeq: 0, resolve, reject, timer,
      });
    });
    socket.write(Buffer.concat([header, payload]));
    return { id, promise };
  }

  /* The blocking-style round trip: send, wait, and retry OVERLOADED with
   * backoff. Resolves with the last answer. */
  async _call(body, isPath) {
    let backoff = RETRY_BACKOFF_FIRST_MS;
    for (let attempt = 1; ; attempt++) {
      const answer = await this._send(body, isPath).promise;
      if (answer.status !== 'OVERLOADED' || attempt === this.retryAttempts) return answer;
      await sleep(backoff);
      backoff = Math.min(backoff * 2, RETRY_BACKOFF_MAX_MS);
    }
  }

  // ---- receiving ------------------------------------------------------------

  _onData(socket, data) {
    if (socket !== this._socket) return;
    this._rbuf = this._rbuf.length ? Buffer.concat([this._rbuf, data]) : data;
    try {
      while (this._rbuf.length >= HEADER_BYTES && this._socket === socket) {
        const length = this._rbuf.readUInt32BE(0);
        // Checked before waiting for (and buffering) the frame's body.
        if (length > MAX_FRAME_BYTES) {
          throw new Violation(`server sent a ${length}-byte frame, above the ${MAX_FRAME_BYTES}-byte limit`);
        }
        if (this._rbuf.length < HEADER_BYTES + length) break;
        const payload = this._rbuf.subarray(HEADER_BYTES, HEADER_BYTES + length);
        this._rbuf = this._rbuf.subarray(HEADER_BYTES + length);
        let response;
        try {
          const { Response } = this._schema;
          response = Response.toObject(Response.decode(payload), TO_OBJECT);
        } catch (err) {
          throw new Violation(`server sent a frame that does not decode: ${err.message}`);
        }
        this._dispatch(socket, response);
      }
    } catch (err) {
      if (!(err instanceof Violation)) throw err;
      this._fail(socket, PathdProtocolError, err.message);
    }
  }

  _complete(p, value) {
    clearTimeout(p.timer);
    this._pending.delete(p.id);
    p.resolve(value);
  }

  _dispatch(socket, response) {
    const status = statusName(response.status);
    const message = response.body === 'error' ? response.error.message : '';
    if (response.id === 0) {
      // A connection-level error (frame too large, malformed, too many
      // connections): the server closes after it, so close our side too.
      if (status !== 'OK') {
        this._fail(socket, PathdDisconnected,
          `server closed the connection after ${status}${message ? `: ${message}` : ''}`);
      }
      return;
    }
    const p = this._pending.get(response.id);
    if (!p) return; // the answer to a cancel, or to a request that timed out
    if (!p.isPath) {
      // Single-frame answers: complete on the first frame even if a server
      // forgets to set final.
      this._complete(p, { ...response, status, message });
      return;
    }
    const r = p.result;
    if (response.body === 'path') {
      const chunk = response.path;
      if (chunk.seq !== p.nextSeq) {
        throw new Violation(`request ${p.id}: path chunk ${chunk.seq} arrived, expected ${p.nextSeq}`);
      }
      p.nextSeq++;
      if (r.waypoints.length + chunk.waypoints.length > MAX_PATH_WAYPOINTS) {
        throw new Violation(`request ${p.id}: path longer than ${MAX_PATH_WAYPOINTS} waypoints`);
      }
      for (const w of chunk.waypoints) {
        r.waypoints.push([w.x, w.y]);
        r.world.push([w.wx, w.wy]);
      }
      if (response.final) {
        if (chunk.totalWaypoints && chunk.totalWaypoints !== r.waypoints.length) {
          throw new Violation(`request ${p.id}: final chunk says ${chunk.totalWaypoints} waypoints, ${r.waypoints.length} arrived`);
        }
        r.cost = chunk.cost;
        r.expansions = chunk.expansions;
        r.searchMicros = chunk.searchMicros;
        r.version = chunk.sceneVersion;
      }
    }
    if (response.final) {
      r.status = status;
      r.message = message;
      this._complete(p, r);
    }
  }

  // ---- paths ----------------------------------------------------------------

  /* Asks for a path from start to goal, cells [x, y] unless options.world.
   * Options (all optional, 0 means the server default): world, unitSize,
   * connectivity (4 or 8), style ('cells' or 'corners'), maxExpansions,
   * deadlineMs. Resolves with a PathResult for OK or PARTIAL; rejects with a
   * PathdError for any other answer (err.result holds the metrics). */
  async findPath(scene, start, goal, options) {
    const result = await this._call(findPathBody(scene, start, goal, options), true);
    if (!result.ok) {
      throw new PathdError(result.status, result.message, { requestId: result.id, result });
    }
    return result;
  }

  /* Sends a path request without retrying: returns { id, promise } at once;
   * the promise resolves with a PathResult of any status. */
  sendFindPath(scene, start, goal, options) {
    return this._send(findPathBody(scene, start, goal, options), true);
  }

  /* Asks the server to stop working on targetId; that request's promise then
   * settles with CANCELLED (or its normal result if it finished first). */
  cancel(targetId) {
    const { id, promise } = this._send({ cancel: { targetId } }, false);
    // The acknowledgement carries nothing the caller needs: stop tracking it.
    clearTimeout(this._pending.get(id).timer);
    this._pending.delete(id);
    promise.catch(() => {});
  }

  // ---- other requests -------------------------------------------------------

  async _callOther(body, expect) {
    const response = await this._call(body, false);
    if (response.status !== 'OK') {
      throw new PathdError(response.status, response.message, { requestId: response.id });
    }
    if (response.body !== expect) {
      throw new PathdProtocolError(`answer to request ${response.id} has the wrong body`, { requestId: response.id });
    }
    return response[expect];
  }

  /* Round trip; resolves with the measured time in milliseconds. */
  async ping() {
    // Any value the server could not guess works; it must survive the
    // uint64 -> Number conversion, so stay below 2^53.
    const nonce = Math.floor(Math.random() * Number.MAX_SAFE_INTEGER);
    const started = process.hrtime.bigint();
    const pong = await this._callOther({ ping: { nonce } }, 'pong');
    if (pong.nonce !== nonce) throw new PathdProtocolError('pong carries the wrong nonce');
    return Number(process.hrtime.bigint() - started) / 1e6;
  }

  /* The served scenes, sorted by name: [{ name, width, height, version }]. */
  async scenes() {
    return (await this._callOther({ listScenes: {} }, 'sceneList')).scenes;
  }

  /* { name, width, height, originX, originY, cellSize, unitSizes, version,
   * passableCells }; rejects with UNKNOWN_SCENE if there is no such scene. */
  sceneInfo(scene) {
    return this._callOther({ sceneInfo: { scene } }, 'sceneInfo');
  }

  /* Server-wide counters (pathd.v1.Stats, camelCase names). */
  stats() {
    return this._callOther({ stats: {} }, 'stats');
  }

  /* Admin: the server rereads its config and maps, as on SIGHUP. */
  async reload() {
    const answer = await this._call({ reload: {} }, false);
    if (answer.status !== 'OK') throw new PathdError(answer.status, answer.message, { requestId: answer.id });
  }
}

module.exports = {
  PathdClient,
  PathResult,
  PathdError,
  PathdDisconnected,
  PathdTimeout,
  PathdProtocolError,
  DEFAULT_SERVER,
  DEFAULT_TIMEOUT_MS,
  MAX_FRAME_BYTES,
  MAX_PATH_WAYPOINTS,
  RETRY_ATTEMPTS,
  RETRY_BACKOFF_FIRST_MS,
  RETRY_BACKOFF_MAX_MS,
};
