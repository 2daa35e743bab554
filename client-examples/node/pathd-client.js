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
 * path arrives as one or more PathChunk frames, a route as RouteLeg frames
 * and a final RouteResult; every other answer is one frame.
 *
 * One socket carries every call: each request gets a fresh id, any number
 * may be in flight at once, and answers (which may come back in any order)
 * settle the promise waiting for that id. So "pipelining" is simply calling
 * again before the last promise settled.
 *
 * Flow control: the client never overloads the connection by itself. On
 * every new socket it first asks GetLimits, behind Auth with a token (neither
 * has a timeout of its own: the calls queued behind GetLimits time out, the
 * connection goes on when it answers, and a late Auth answer still sets the
 * role and asks a GetLimits refused before it again),
 * and from then on keeps at most the connection's in-flight cap
 * (Limits.max_inflight_per_conn, or the lower options.maxInFlight)
 * outstanding, counting as the server does (a
 * Batch takes one slot per item; ping, stats, limits, scene lists and grids,
 * watches and cancels take none). Requests beyond the cap wait in a local
 * FIFO queue, like HTTP/2 streams beyond MAX_CONCURRENT_STREAMS, and are
 * written as answers free slots; a slot a timed-out request held is freed
 * only when its late answer arrives, since the server holds it until then.
 * The queue is bounded (options.maxQueued requests): a call that finds it
 * full rejects at once with PathdQueueFull (status "QUEUE_FULL"). A Batch
 * larger than the cap is sent at once: the server refuses it whole with
 * LIMIT_EXCEEDED without taking a slot. PathdPool spreads calls over N
 * such connections.
 *
 *   Every call (findPath, findRoute, updateCells, sceneGrid, raycast,
 *     validateMove, moveAlong, nearestWalkable, isReachable, randomPoint,
 *     distanceToWall, batch, ping, scenes, sceneInfo, stats, limits, auth, reload)
 *     resolves for OK (and PARTIAL for paths and routes) and rejects with a
 *     PathdError (err.status = "NO_PATH", ...; err.result the answer) for
 *     any other answer. OVERLOADED (the server's job queue full, never this
 *     connection's cap, see "Flow control") is retried after a jittered,
 *     doubling backoff ("equal jitter": half the step fixed, half random, so
 *     clients refused together do not come back together), at most
 *     options.retryAttempts times in all (default RETRY_ATTEMPTS) and not
 *     past options.retryDeadlineMs from the first send (default
 *     RETRY_DEADLINE_MS); then the OVERLOADED answer rejects.
 *   watch(scenes) subscribes to scenes' changes and resolves with the
 *     watch's id; watchNext() resolves with each event in order (the
 *     object pathctl watch --json prints); unwatch(id) ends it. Paths,
 *     queries and sceneInfo take minVersion: an older scene rejects with
 *     STALE_VERSION, err.result.version being the version it is at.
 *   sendFindPath(...) and send(name, ...args) are the raw form: they return
 *     { id, promise } at once, and the promise resolves with the answer of
 *     ANY status (OVERLOADED too, not retried); it rejects only when no
 *     answer came.
 *
 * Answers: findPath gives a PathResult (toJSON() is pathctl path --json);
 * the others plain objects with the keys pathctl --json prints (status,
 * version, and raycast: clear, hit, last_free, last_free_world; validate:
 * valid, first_invalid, reason, last_valid; move: end, end_world, slid;
 * nearest: cell, distance; reachable: reachable; random: cell, seed,
 * candidates; clearance: distance, wall; route: total_cost, legs, ...),
 * so they can be compared with pathctl or logged as they are. Cells are
 * [x, y], absent ones null. batch(items) resolves with one such object per
 * item, each with its own status.
 *
 * Timing: every answer (PathResult or object) has a non-enumerable timing
 * = { serverUs, searchUs }, the server's own times for it (docs/PROTOCOL.md,
 * "Timing"): serverUs from the server's read of the request to its answer
 * handed to the socket (always less than the round trip the client sees),
 * searchUs the part spent in the search (0 when nothing was searched). Not
 * enumerable, so answers still equal pathctl's output. client.lastTiming is
 * the timing of the answer the last call took, for calls that resolve with
 * something else (ping's round trip, batch's array).
 *
 * A request that gets no answer rejects with a subclass of PathdError:
 * PathdDisconnected (connection lost and the request not safe to send again,
 * or no server within the retry deadline; see "Replicas"), PathdTimeout (no
 * answer within timeoutMs; a late answer is ignored, but for auth()'s; err.sent says whether
 * it had left the local queue, so whether the server got it) or
 * PathdProtocolError (the server broke the protocol; the
 * connection is closed, as the server does). The next call reconnects to the
 * same address by itself. Call close() when done, or the open socket keeps
 * the process alive; close() is for good: later calls reject with
 * PathdClosed (status "CLOSED") and send nothing, as Go's return ErrClosed.
 *
 * Replicas (several pathd behind HAProxy; docs/PROTOCOL.md, "Clients and
 * replicas"): every call (not the raw send forms) rides out a replica that
 * dies, restarts or drains, within retryDeadlineMs from its first send:
 *   - options.reconnect (default true): a call whose connection is lost, or
 *     cannot be opened, is sent again on a new one after a pause doubling
 *     from RECONNECT_BACKOFF_FIRST_MS up to RECONNECT_BACKOFF_MAX_MS (half
 *     fixed, half random). The pause is the client's, not each call's:
 *     after a failed, lost or refused socket no call opens another until it
 *     ends (one shared wait), so however many calls wait one socket is
 *     opened per step, and a new call made meanwhile waits too; the steps
 *     start over once a call is served, and close() ends the wait (the
 *     calls waiting reject at once). The raw send forms and watch() do
 *     not wait: with no socket they open one at once, even during the
 *     pause, and a failure of it does not lengthen the pause. cancel()
 *     goes on the socket its target was written on, and opens none.
 *     The call is sent again when that is safe: a query always, an update
 *     (updateCells, createScene, createInstance, dropScene) only when it
 *     carries an idempotencyKey. Reservations made or released, watches,
 *     cancels and reloads are never sent twice: they reject
 *     PathdDisconnected. client.resent and client.reconnects count them.
 *   - options.idempotencyKeys (default true): every update carries a fresh
 *     key (128 random bits in hex) unless the caller gives one
 *     ({ idempotencyKey: '...' } in the update's options, 1..64 printable
 *     ASCII characters), so the change log applies it once however often it
 *     is sent; false sends none, and such an update is never sent again.
 *   - BEHIND (STALE_VERSION) and UNAVAILABLE (change log unreachable,
 *     nothing changed) are retried as OVERLOADED is, with the same key;
 *     client.retries counts retries by status.
 *   - DRAINING (unsolicited with id 0, or as an answer): nothing more goes on
 *     that socket; the next request opens a new one (HAProxy picks another
 *     replica), a refused request goes again there at once, and the old
 *     socket closes once every answer owed on it (raw sends included) has
 *     arrived. A new socket whose Auth or GetLimits (its first answers) is
 *     answered DRAINING is given up at once, and the calls queued behind
 *     them (never sent, so whatever they are) and those written on it at
 *     once (they take no slot) connect again after the reconnect backoff
 *     above, within retryDeadlineMs, as for a lost connection; auth()
 *     sends Auth again the same way.
 *   - options.maxConnectionAgeMs (default MAX_CONNECTION_AGE_MS, 10 min; 0:
 *     never): an older socket is replaced the same way at the next request,
 *     since HAProxy never moves a long-lived connection back to a replica
 *     that restarted.
 *   - Watches are not re-established: when their socket is lost or replaced
 *     watchNext() resolves with a last event { status: 'DISCONNECTED' or
 *     'DRAINING', watch, message, final: true }; watch again to go on.
 */
const crypto = require('node:crypto');
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
// No OVERLOADED retry starts later than this after the first send: a caller
// with a frame to finish (a game tick) wants a refusal it can act on more
// than a late answer.
const RETRY_DEADLINE_MS = 2000;
// Requests a connection holds back beyond its in-flight cap before calls
// reject with QUEUE_FULL: 16 full caps of the default 64, about a second of
// work for one worker.
const MAX_QUEUED = 1024;
// Replicas (see "Replicas" at the top). Reconnecting after a lost
// connection: the pause before each new attempt doubles from FIRST up to
// MAX, half fixed and half random, and none starts past the call's retry
// deadline (retryDeadlineMs from its first send).
const RECONNECT_BACKOFF_FIRST_MS = 50;
const RECONNECT_BACKOFF_MAX_MS = 2000;
// A connection older than this is replaced, as on DRAINING: HAProxy never
// moves a long-lived connection back to a restarted replica. 0: never.
const MAX_CONNECTION_AGE_MS = 10 * 60 * 1000;
// Answers a call sends again: after a jittered pause (OVERLOADED, BEHIND =
// STALE_VERSION, UNAVAILABLE), or at once on a new connection (DRAINING).
const RETRYABLE = new Set(['OVERLOADED', 'STALE_VERSION', 'UNAVAILABLE', 'DRAINING']);
// Requests that change nothing, so sending one again after a lost
// connection is always safe; updates (KEYED) are when they carry an
// idempotencyKey; the rest (reservations made or released, watches,
// cancels, reloads) never go twice.
const READ_ONLY = new Set(['findPath', 'listScenes', 'sceneInfo', 'stats', 'ping', 'findRoute', 'sceneGrid',
  'auth', 'raycast', 'validateMove', 'moveAlong', 'nearest', 'reachable', 'randomPoint', 'distanceToWall',
  'batch', 'limits', 'reservations']);
const KEYED = new Set(['updateCells', 'createScene', 'createInstance', 'dropScene']);
const MAX_IDEMPOTENCY_KEY = 64;
// The cap used when GetLimits cannot answer (a server that refuses it):
// the server's default max_inflight_per_conn.
const FALLBACK_INFLIGHT_CAP = 64;
const HEADER_BYTES = 4;
// Most items in one Batch (the server's PD_BATCH_MAX_ITEMS).
const MAX_BATCH_ITEMS = 256;
// FindPath: range cap (cells) and most goals; FindPath items per Batch and
// the waypoints each may carry (the server's limits, docs/PROTOCOL.md).
const MAX_RANGE = 128;
const MAX_GOALS = 64;
const MAX_BATCH_PATHS = 32;
const MAX_BATCH_PATH_WAYPOINTS = 512;
// sceneGrid: times it starts over when the scene changes between bands.
const SCENE_GRID_RESTARTS = 8;
// Where the schema is read from: the repository's proto/ unless
// options.protoPath says otherwise (when this file is copied elsewhere).
const DEFAULT_PROTO_PATH = path.join(__dirname, '..', '..', 'proto', 'pathd.proto');

const STYLES = { cells: 'STYLE_CELLS', corners: 'STYLE_CORNERS', smooth: 'STYLE_SMOOTH' };
const GOAL_MODES = { exact: 'GOAL_EXACT', nearest: 'GOAL_NEAREST', line: 'GOAL_LINE' };
const UPDATE_OPS = {
  block: 'UPDATE_BLOCK', pass: 'UPDATE_PASS', cost: 'UPDATE_COST', restore: 'UPDATE_RESTORE',
};
const CONNECTIVITY = { 0: 'CONNECTIVITY_DEFAULT', 8: 'CONNECTIVITY_8', 4: 'CONNECTIVITY_4' };
// How decoded answers are turned into plain objects: uint64 as Number (ids
// and counters stay far below 2^53), enums by name, oneof names in `body`,
// absent sub-messages as null.
const TO_OBJECT = { longs: Number, enums: String, bytes: Buffer, defaults: true, oneofs: true };

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

/* The integer types' ranges on the wire, for checkNumbers (64-bit: as said). */
const INTEGER_RANGES = {
  int32: [-(2 ** 31), 2 ** 31 - 1], sint32: [-(2 ** 31), 2 ** 31 - 1], sfixed32: [-(2 ** 31), 2 ** 31 - 1],
  uint32: [0, 2 ** 32 - 1], fixed32: [0, 2 ** 32 - 1],
  int64: [-(2 ** 63), 2 ** 63, '-2^63..2^63-1'], sint64: [-(2 ** 63), 2 ** 63, '-2^63..2^63-1'],
  sfixed64: [-(2 ** 63), 2 ** 63, '-2^63..2^63-1'], uint64: [0, 2 ** 64, '0..2^64-1'], fixed64: [0, 2 ** 64, '0..2^64-1'],
};

/* Refuses, before anything is sent, an integer field that protobufjs would
 * silently change on the wire: it encodes NaN, a string or undefined as 0,
 * wraps 2^32 + 1 to 1 and turns -1 in an unsigned field into another
 * number, so a typo became a request about another cell (a path from the
 * wall at (0, y), a raycast to the wrong cell, an update of the wrong cell)
 * or another limit, where the Python client raises ValueError/TypeError.
 * A cell's float coordinate is truncated before this (point(), cell()), as
 * Python's int() does; other integer options must be integers, as in
 * Python. 64-bit fields may also be a Long or a string of digits. Doubles
 * are left to the server, which names a non-finite one (INVALID_ARGUMENT). */
function checkNumbers(type, object, where) {
  for (const [key, value] of Object.entries(object)) {
    const field = type.fields[key];
    if (!field || value === null || value === undefined) continue;
    field.resolve();
    const at = where ? `${where}.${key}` : key;
    (field.repeated && Array.isArray(value) ? value : [value]).forEach((v, i) => {
      const name = field.repeated ? `${at}[${i}]` : at;
      if (field.resolvedType instanceof protobuf.Type) {
        if (v && typeof v === 'object') checkNumbers(field.resolvedType, v, name);
        return;
      }
      const range = INTEGER_RANGES[field.type];
      if (!range || (typeof v === 'object' && v !== null)) return;
      // 64-bit: a BigInt or a string of digits, exactly (protobufjs takes
      // both: Long.fromValue), checked by BigInt - '-1' in a uint64 went out
      // as 2^64-1, a 21-digit id as 0. A number must be below 2^63 / 2^64:
      // the double 2^64 (what 18446744073709551615 reads as) is clamped.
      // A string of digits in a 32-bit field is checked the same way.
      const wide = range.length === 3;
      const digits = typeof v === 'string' && /^-?\d+$/.test(v);
      const ok = digits || (wide && typeof v === 'bigint')
        ? BigInt(v) >= BigInt(range[0]) && (wide ? BigInt(v) < BigInt(range[1]) : BigInt(v) <= BigInt(range[1]))
        : Number.isInteger(v) && v >= range[0] && (wide ? v < range[1] : v <= range[1]);
      if (!ok) {
        throw new TypeError(`${name} must be an integer in ${range[2] || `${range[0]}..${range[1]}`}, got ${typeof v === 'string' ? JSON.stringify(v) : typeof v === 'bigint' ? `${v}n` : String(v)}`);
      }
    });
  }
}

class PathdError extends Error {
  /* status: the wire status name ("UNKNOWN_SCENE", "OVERLOADED", ...) or, for
   * the subclasses, "DISCONNECTED", "TIMEOUT", "PROTOCOL_ERROR". requestId is
   * the request's id; result is the answer (PathResult or object) when one came. */
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

/* The local queue of requests waiting for an in-flight slot is full
 * (options.maxQueued): nothing was sent. Back off or shed load. */
/* close() was called: a closed client stays closed (as Go's ErrClosed) and
 * a call on it sends nothing. Make a new client to talk again. */
class PathdClosed extends PathdError {
  constructor(message = 'client is closed (close() was called); make a new client', options) {
    super('CLOSED', message, options);
  }
}

class PathdQueueFull extends PathdError {
  constructor(message, options) { super('QUEUE_FULL', message, options); }
}

// Thrown inside the reader when the server breaks the protocol.
class Violation extends Error {}

/* One answered path request. waypoints are cells [[x, y]], world the centres
 * of those cells in world coordinates [[wx, wy]] (null unless the request
 * had wantWorld: the server sends them only when asked, and sceneInfo's
 * origin and cell size give them too), times the arrival times
 * (null unless speed > 0); version is the scene version the search ran on;
 * startUsed / goalUsed the cells the path really starts / ends at when
 * snapped or substituted (else null); cutoff 'BUDGET_EXCEEDED' /
 * 'DEADLINE_EXCEEDED' behind a PARTIAL from partialOnCutoff (else null);
 * goalIndex the index of the goal reached when the request gave goals
 * (else null). */
class PathResult {
  constructor(id, timed = false) {
    this.id = id;
    this.status = 'OK';
    this.message = '';
    this.cost = 0;
    this.expansions = 0;
    this.searchMicros = 0;
    this.version = 0;
    this.waypoints = [];
    this.world = null;
    this.times = timed ? [] : null;
    this.startUsed = null;
    this.goalUsed = null;
    this.cutoff = null;
    this.goalIndex = null;
  }

  /* True for OK and PARTIAL: the waypoints are usable. */
  get ok() {
    return this.status === 'OK' || this.status === 'PARTIAL';
  }

  /* The object pathctl path --json prints for this answer. */
  toJSON() {
    return {
      status: this.status,
      cost: this.cost,
      expansions: this.expansions,
      micros: this.searchMicros,
      version: this.version,
      ...(this.message ? { message: this.message } : {}),
      start_used: this.startUsed,
      goal_used: this.goalUsed,
      cutoff: this.cutoff,
      goal_index: this.goalIndex,
      waypoints: this.waypoints,
      world: this.world,
      times: this.times,
    };
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

function cell(c) {
  if (!Array.isArray(c) || c.length !== 2) throw new TypeError(`a cell is a pair [x, y], got ${JSON.stringify(c)}`);
  return { x: Math.trunc(c[0]), y: Math.trunc(c[1]) };
}

function checkScene(scene, name = 'scene') {
  if (typeof scene !== 'string' || scene === '') throw new TypeError(`${name} must be a non-empty string`);
}

function choice(table, value, what) {
  if (!Object.prototype.hasOwnProperty.call(table, value)) {
    throw new TypeError(`${what} must be one of ${Object.keys(table).join(', ')}, got ${JSON.stringify(value)}`);
  }
  return table[value];
}

const xy = (c) => (c ? [c.x, c.y] : null);
const wxy = (w) => (w ? [w.x, w.y] : [0, 0]);
// Why an answer is not OK: Response.message on a path or route that was
// searched for and not found (NO_PATH, a blocked end...), or Error.message on
// a refusal.
const errorMessage = (response) => response.message || (response.body === 'error' ? response.error.message : '');

/* ---- what each request kind sends, and how its answer is read -------------
 * An op is one call: body (the Request's oneof, as an object), assemble
 * ('path', 'route' or 'single'), finish(pending) -> the answer with its
 * status, accept (statuses a call resolves with) and value(answer) (what it
 * resolves with). */

const OK = ['OK'];
const OK_PARTIAL = ['OK', 'PARTIAL'];
const same = (answer) => answer;

function op(body, finish, { accept = OK, value = same, assemble = 'single' } = {}) {
  return { body, assemble, finish, accept, value };
}

/* finish for a one-frame answer: fields(message) -> object, for OK with that body. */
function single(body, fields) {
  return (p) => {
    const response = p.response;
    const status = statusName(response.status);
    if (status !== 'OK') {
      const message = errorMessage(response);
      return { status, ...(message ? { message } : {}), ...staleVersion(response.status, response.error) };
    }
    if (body === null) return { status };
    if (response.body !== body) throw new Violation(`answer to request ${p.id} has the wrong body`);
    return { status, ...fields(response[body]) };
  };
}

/* STALE_VERSION's answer carries the version the scene is at. */
function staleVersion(status, carrier) {
  return statusName(status) === 'STALE_VERSION' && carrier ? { version: carrier.version } : {};
}

function findPathOp(scene, start, goal, options = {}) {
  const body = { findPath: findPathMessage(scene, start, goal, options) };
  const timed = Number(body.findPath.speed) > 0;
  const goals = body.findPath.goals.length > 0;
  const { wantWorld } = body.findPath;
  return op(body, (p) => p.finishPath(timed, goals, wantWorld), { accept: OK_PARTIAL, assemble: 'path' });
}

/* A FindPath message, alone or as a batch item: goal, or options.goals
 * [[x, y]] with goal null; options.range in cells and lineOfSight;
 * options.wantWorld asks for the waypoints' world coordinates;
 * options.avoidReserved plans around the scene's reservations at their
 * times, reserving nothing (needs speed > 0; startTime in seconds is the
 * game time; a wait is its cell twice, at arrival and departure). */
function findPathMessage(scene, start, goal, options = {}) {
  const {
    world = false, unitSize = 0, connectivity = 0, style = 'cells', goalMode = 'exact', snap = false,
    partialOnCutoff = false, speed = 0, startTime = 0, avoid = [], window = null,
    maxExpansions = 0, deadlineMs = 0, range = 0, lineOfSight = false, goals = [], wantWorld = false,
    minVersion = 0, avoidReserved = false,
  } = options;
  checkScene(scene);
  if ((goal === null || goal === undefined) === (goals.length === 0)) {
    throw new TypeError(`give either goal or goals (1..${MAX_GOALS} points)`);
  }
  if (goals.length > MAX_GOALS) throw new TypeError(`at most ${MAX_GOALS} goals, got ${goals.length}`);
  if (!(range >= 0 && range <= MAX_RANGE)) throw new TypeError(`range must lie in 0..${MAX_RANGE} cells`);
  if (lineOfSight && !(range > 0)) throw new TypeError('lineOfSight needs range > 0');
  const fp = {
    scene,
    start: point(start, world),
    goals: goals.map((g) => point(g, world)),
    range: Number(range),
    lineOfSight: Boolean(lineOfSight),
    unitSize,
    connectivity: choice(CONNECTIVITY, connectivity, 'connectivity'),
    style: choice(STYLES, style, 'style'),
    goalMode: choice(GOAL_MODES, goalMode, 'goalMode'),
    snap: Boolean(snap),
    partialOnCutoff: Boolean(partialOnCutoff),
    speed: Number(speed),
    startTime: Number(startTime),
    avoid: avoid.map(cell),
    maxExpansions,
    deadlineMs,
    wantWorld: Boolean(wantWorld),
    minVersion,
    avoidReserved: Boolean(avoidReserved),
  };
  if (goals.length === 0) fp.goal = point(goal, world);
  if (window) fp.window = { min: cell(window[0]), max: cell(window[1]) };
  return fp;
}

function findRouteOp(fromScene, start, toScene, goal, options = {}) {
  const {
    world = false, unitSize = 0, style = 'cells', goalMode = 'exact', speed = 0, startTime = 0,
    maxExpansions = 0, deadlineMs = 0, wantWorld = false,
  } = options;
  checkScene(fromScene, 'fromScene');
  checkScene(toScene, 'toScene');
  const body = {
    findRoute: {
      fromScene,
      start: point(start, world),
      toScene,
      goal: point(goal, world),
      unitSize,
      style: choice(STYLES, style, 'style'),
      goalMode: choice(GOAL_MODES, goalMode, 'goalMode'),
      speed: Number(speed),
      startTime: Number(startTime),
      maxExpansions,
      deadlineMs,
      wantWorld: Boolean(wantWorld),
    },
  };
  const timed = Number(speed) > 0;
  return op(body, (p) => p.finishRoute(timed, Boolean(wantWorld)), { accept: OK_PARTIAL, assemble: 'route' });
}

function updateCellsOp(scene, { rect = null, cells = null, op: kind = 'block', cost = 0, atMs = null } = {}) {
  checkScene(scene);
  if ((rect === null) === (cells === null)) {
    throw new TypeError('give exactly one of rect [[x0, y0], [x1, y1]] and cells [[x, y], ...]');
  }
  const updateCells = { scene, op: choice(UPDATE_OPS, kind, 'op'), cost };
  if (rect !== null) updateCells.rect = { min: cell(rect[0]), max: cell(rect[1]) };
  else updateCells.cells = { cells: cells.map(cell) };
  if (atMs !== null) updateCells.atMs = atMs;   // when blocked cells cut reservations
  return op({ updateCells }, single('update', (m) => ({
    version: m.version, cells_changed: m.cellsChanged, micros: m.micros, agents_cut: m.agentsCut.map(Number),
  })));
}

/* ---- reservations (docs/PROTOCOL.md, "Reservations") ---------------------- */

const AT_GOAL = { park: 'AT_GOAL_PARK', vanish: 'AT_GOAL_VANISH' };
const ms = (t) => (Number(t) === -1 ? null : Number(t));   // -1 on the wire: no end

const timedWaypoints = (ws) => ws.map((w) => ({
  x: w.x, y: w.y, t_arrive_ms: Number(w.tArriveMs), t_leave_ms: ms(w.tLeaveMs),
}));

const reserveFields = (m) => ({
  agent: Number(m.agent),
  waypoints: timedWaypoints(m.waypoints),
  reserved_until_ms: ms(m.reservedUntilMs), cost: m.cost, expansions: Number(m.expansions),
  search_micros: Number(m.searchMicros), scene_version: Number(m.sceneVersion), was_cut: m.wasCut,
  // Agents moved out of the way (yieldAfterMs): each plan replaces that
  // agent's from its t0_ms on; the game must apply them.
  displaced: (m.displaced || []).map((d) => ({
    agent: Number(d.agent), t0_ms: Number(d.t0Ms), reserved_until_ms: ms(d.reservedUntilMs),
    waypoints: timedWaypoints(d.waypoints),
  })),
  ...(m.hasBlockingAgent ? { blocking_agent: Number(m.blockingAgent) } : {}),
});

function reservePathOp(scene, agent, start, goal, t0Ms, speed, options = {}) {
  checkScene(scene);
  const {
    unitSize = 0, windowMs = null, atGoal = 'park', maxExpansions = 0, deadlineMs = 0, minVersion = 0,
    yieldAfterMs = 0,
  } = options;
  const reservePath = {
    scene, agent, unitSize, start: { cell: cell(start) }, goal: { cell: cell(goal) }, t0Ms, speed,
    atGoal: choice(AT_GOAL, atGoal, 'atGoal'), maxExpansions, deadlineMs, minVersion, yieldAfterMs,
  };
  if (windowMs !== null) reservePath.windowMs = windowMs;
  return op({ reservePath }, (p) => {
    const response = p.response;
    if (response.body !== 'reservePath') return single(null, null)(p);
    const message = errorMessage(response);
    return { status: statusName(response.status), ...(message ? { message } : {}), ...reserveFields(response.reservePath) };
  }, { accept: OK_PARTIAL });
}

function releaseAgentOp(scene, agent, all = false) {
  checkScene(scene);
  return op({ releaseAgent: { scene, agent, all } }, single('release', (m) => ({
    released: m.released, agents_released: Number(m.agentsReleased),
  })));
}

function reservationsOp(scene, { rect = null, fromMs = 0, toMs = 0, maxEntries = 0 } = {}) {
  checkScene(scene);
  const reservations = { scene, fromMs, toMs, maxEntries };
  if (rect !== null) reservations.rect = { min: cell(rect[0]), max: cell(rect[1]) };
  return op({ reservations }, single('reservations', (m) => ({
    entries: m.entries.map((e) => ({
      agent: Number(e.agent), x: e.x, y: e.y, width: e.width, height: e.height, t0_ms: Number(e.t0Ms), t1_ms: ms(e.t1Ms),
    })),
    matching: Number(m.matching), agents: m.agents, table_entries: Number(m.tableEntries), table_bytes: Number(m.tableBytes),
  })));
}

const sceneChangeFields = (m) => ({
  version: m.version, own_bytes: m.ownBytes, scene_bytes: m.sceneBytes,
});

function createSceneOp(name, {
  map = null, format = '', cells = null, width = 0, height = 0,
  origin = [0, 0], cellSize = 0, unitSizes = [],
} = {}) {
  checkScene(name);
  if ((map === null) === (cells === null)) {
    throw new TypeError('give exactly one of map (with format) and cells (with width, height)');
  }
  const createScene = {
    name, originX: Number(origin[0]), originY: Number(origin[1]), cellSize: Number(cellSize), unitSizes,
  };
  if (map !== null) Object.assign(createScene, { map: Buffer.from(map), format });
  else Object.assign(createScene, { cells: Buffer.from(cells), width, height });
  return op({ createScene }, single('sceneChange', sceneChangeFields));
}

function createInstanceOp(name, template) {
  checkScene(name);
  checkScene(template);
  return op({ createInstance: { name, template } }, single('sceneChange', sceneChangeFields));
}

function dropSceneOp(name, { dropPortals = false } = {}) {
  checkScene(name);
  return op({ dropScene: { name, dropPortals } }, single('sceneChange', sceneChangeFields));
}

function sceneGridOp(scene, { unitSize = 0, rowStart = 0, rowCount = 0 } = {}) {
  checkScene(scene);
  return op({ sceneGrid: { scene, unitSize, rowStart, rowCount } }, single('sceneGrid', (m) => {
    if (m.rowCount < 1 || m.cells.length !== m.rowCount * m.width) {
      throw new Violation(`grid band of ${m.rowCount} rows x ${m.width} holds ${m.cells.length} bytes`);
    }
    return {
      version: m.version, width: m.width, height: m.height, row_start: m.rowStart, row_count: m.rowCount,
      cells: Buffer.from(m.cells),
    };
  }));
}

/* The movement queries: request field, message builder, answer fields. */
const unitOf = (o) => (o && o.unitSize) || 0;
const worldOf = (o) => Boolean(o && o.world);
const QUERIES = {
  raycast: ['raycast', (from, to, o) => ({ unitSize: unitOf(o), from: point(from, worldOf(o)), to: point(to, worldOf(o)) }),
    (m) => ({ clear: m.clear, hit: xy(m.hit), last_free: xy(m.lastFree), last_free_world: wxy(m.lastFreeWorld) })],
  validateMove: ['validateMove', (moves, maxSpeed, o) => ({
    unitSize: unitOf(o),
    moves: moves.map((m) => {
      if (!Array.isArray(m) || m.length !== 3) throw new TypeError(`a move is [x, y, t], got ${JSON.stringify(m)}`);
      return { point: point(m.slice(0, 2), worldOf(o)), t: Number(m[2]) };
    }),
    maxSpeed: Number(maxSpeed),
    tolerance: Number((o && o.tolerance) || 0),
  }), (m) => ({
    valid: m.valid,
    first_invalid: m.firstInvalid < 0 ? null : m.firstInvalid,
    reason: m.reason.replace(/^MOVE_/, '').toLowerCase(),
    last_valid: xy(m.lastValid),
    ...(m.lastValid ? { last_valid_world: wxy(m.lastValidWorld) } : {}),
  })],
  moveAlong: ['moveAlong', (from, delta, o) => {
    if (!Array.isArray(delta) || delta.length !== 2) {
      throw new TypeError(`a move's delta is a pair [dx, dy], got ${JSON.stringify(delta)}`);
    }
    return { unitSize: unitOf(o), from: point(from, worldOf(o)), dx: Number(delta[0]), dy: Number(delta[1]) };
  }, (m) => ({ end: xy(m.end), end_world: wxy(m.endWorld), slid: m.slid })],
  nearestWalkable: ['nearest', (at, radius, o) => ({
    unitSize: unitOf(o),
    at: point(at, worldOf(o)),
    radius,
    ...(o && o.reachableFrom ? { reachableFrom: point(o.reachableFrom, worldOf(o)) } : {}),
  }), (m) => ({ cell: xy(m.cell), distance: m.distance })],
  isReachable: ['reachable', (from, to, o) => ({ unitSize: unitOf(o), from: point(from, worldOf(o)), to: point(to, worldOf(o)) }),
    (m) => ({ reachable: m.reachable })],
  randomPoint: ['randomPoint', (around, radius, o) => ({
    unitSize: unitOf(o), around: point(around, worldOf(o)), radius: Number(radius), seed: (o && o.seed) || 0,
  }), (m) => ({ cell: xy(m.cell), seed: m.seed, candidates: m.candidates })],
  distanceToWall: ['distanceToWall', (at, o) => ({
    unitSize: unitOf(o), at: point(at, worldOf(o)), maxDistance: (o && o.maxDistance) || 0,
  }), (m) => ({ distance: m.distance, wall: xy(m.wall) })],
};

/* One item for batch(): kind is a movement call's name ('raycast',
 * 'validateMove', 'moveAlong', 'nearestWalkable', 'isReachable',
 * 'randomPoint', 'distanceToWall') or 'findPath', and the rest its
 * arguments, e.g. query('raycast', 'town', [1, 1], [9, 9], { unitSize: 2 })
 * or query('findPath', 'town', [1, 1], null, { goals: [[5, 5], [9, 2]] }).
 * A findPath item answers with PathResult.toJSON(); its deadlineMs counts
 * from the batch's arrival, as the request's alone would. */
function query(kind, scene, ...args) {
  if (kind === 'findPath') return { findPath: findPathMessage(scene, ...args) };
  const [field, build] = choice(QUERIES, kind, 'query kind');
  checkScene(scene);
  // The options object, when given, is the last argument: its minVersion
  // refuses a scene older than it (STALE_VERSION).
  const last = args.at(-1);
  const minVersion = last && typeof last === 'object' && !Array.isArray(last) ? last.minVersion || 0 : 0;
  return { [field]: { scene, minVersion, ...build(...args) } };
}

function queryFields(field, m) {
  const entry = Object.values(QUERIES).find(([name]) => name === field);
  return { version: m.version, ...entry[2](m) };
}

function queryOp(kind, scene, ...args) {
  const body = query(kind, scene, ...args);
  const field = Object.keys(body)[0];
  return op(body, single(field, (m) => queryFields(field, m)));
}

/* A PathResult from a path's waypoints and its final chunk (null when the
 * answer was an error frame): a streamed path's, or a batch item's. */
/* A frame's packed waypoints as [{ x, y, wx, wy, t }]: cells by running
 * sums over the deltas (the first is absolute); wx, wy and t are null when
 * the frame does not carry them. */
function unpackPoints(id, m) {
  if (!m) return [];
  const n = m.dx.length;
  if (m.dy.length !== n || ![0, n].includes(m.t.length) || ![0, n].includes(m.wx.length)
      || m.wy.length !== m.wx.length) {
    throw new Violation(`request ${id}: a frame's waypoint arrays differ in length`);
  }
  const out = new Array(n);
  let x = 0;
  let y = 0;
  for (let i = 0; i < n; i++) {
    x += m.dx[i];
    y += m.dy[i];
    out[i] = {
      x, y, wx: m.wx.length ? m.wx[i] : null, wy: m.wy.length ? m.wy[i] : null, t: m.t.length ? m.t[i] : null,
    };
  }
  return out;
}

function pathResult(id, status, message, timed, goals, wantWorld, waypoints, chunk, stale = {}) {
  const r = new PathResult(id, timed);
  r.status = statusName(status);
  r.message = message || '';
  r.waypoints = waypoints.map((w) => [w.x, w.y]);
  if (wantWorld) r.world = waypoints.map((w) => [w.wx, w.wy]);
  if (timed) r.times = waypoints.map((w) => w.t);
  if (chunk) {
    if (chunk.totalWaypoints && chunk.totalWaypoints !== waypoints.length) {
      throw new Violation(`request ${id}: final chunk says ${chunk.totalWaypoints} waypoints, ${waypoints.length} arrived`);
    }
    r.cost = chunk.cost;
    r.expansions = chunk.expansions;
    r.searchMicros = chunk.searchMicros;
    r.version = chunk.sceneVersion;
    r.startUsed = xy(chunk.startUsed);
    r.goalUsed = xy(chunk.goalUsed);
    r.cutoff = chunk.cutoff !== 'OK' ? chunk.cutoff : null;
    if (goals && r.ok) r.goalIndex = chunk.goalIndex;
  } else if (stale.version !== undefined) {
    r.version = stale.version;
  }
  return r;
}

function itemAnswer(item, q) {
  if (q && q.findPath) {
    const chunk = item.kind === 'path' ? item.path : null;
    return pathResult(0, item.status, item.message, Number(q.findPath.speed) > 0, q.findPath.goals.length > 0,
      Boolean(q.findPath.wantWorld), chunk ? unpackPoints(0, chunk.points) : [], chunk,
      staleVersion(item.status, item)).toJSON();
  }
  const status = statusName(item.status);
  if (status !== 'OK') {
    return { status, ...(item.message ? { message: item.message } : {}), ...staleVersion(item.status, item) };
  }
  if (!item.kind) throw new Violation('batch item without a result');
  return { status, ...queryFields(item.kind, item[item.kind]) };
}

function batchOp(items) {
  if (!Array.isArray(items) || items.length < 1 || items.length > MAX_BATCH_ITEMS) {
    throw new TypeError(`a batch holds 1..${MAX_BATCH_ITEMS} items (made by query())`);
  }
  if (items.filter((q) => q.findPath).length > MAX_BATCH_PATHS) {
    throw new TypeError(`a batch holds at most ${MAX_BATCH_PATHS} findPath items`);
  }
  return op({ batch: { items } }, single('batch', (m) => {
    if (m.items.length !== items.length) {
      throw new Violation(`batch of ${items.length} items answered with ${m.items.length}`);
    }
    return { items: m.items.map((item, i) => itemAnswer(item, items[i])) };
  }), { value: (a) => a.items });
}

const WATCH_KINDS = {
  WATCH_STARTED: 'started', SCENE_UPDATED: 'updated', SCENE_REPLACED: 'replaced',
  SCENE_INSTANCED: 'instanced', SCENE_DROPPED: 'dropped', WATCH_ENDED: 'ended', AGENTS_CUT: 'agents_cut',
  AGENTS_DISPLACED: 'agents_displaced', AGENTS_EXPIRED: 'agents_expired', AGENTS_RELEASED: 'agents_released',
};
const OP_NAMES = { UPDATE_BLOCK: 'blocked', UPDATE_PASS: 'passable', UPDATE_COST: 'cost', UPDATE_RESTORE: 'restore' };
const rect = (r) => [r.min.x, r.min.y, r.max.x, r.max.y];

/* A watch frame as the object pathctl watch --json prints. */
function watchEvent(response) {
  const e = { status: statusName(response.status), watch: response.id };
  const ev = response.body === 'watchEvent' ? response.watchEvent : null;
  if (ev) {
    Object.assign(e, {
      kind: WATCH_KINDS[ev.kind] || 'unknown', scene: ev.scene, version: ev.version,
      changed: ev.changed ? rect(ev.changed) : null,
    });
    if (ev.kind === 'SCENE_UPDATED') {
      e.cells_changed = ev.cellsChanged;
      e.ops = ev.ops.map((o) => ({
        set: OP_NAMES[o.op] || 'unknown', ...(o.op === 'UPDATE_COST' ? { cost: o.cost } : {}),
        bounds: rect(o.bounds), cells: o.cells,
      }));
    }
    if (ev.kind === 'SCENE_INSTANCED') e.instance = ev.instance;
    if (ev.kind === 'AGENTS_CUT') {
      e.agents = ev.agents.map(Number);
      e.cut_at_ms = Number(ev.cutAtMs);
    }
    if (ev.kind === 'AGENTS_DISPLACED' || ev.kind === 'AGENTS_EXPIRED' || ev.kind === 'AGENTS_RELEASED') {
      e.agents = ev.agents.map(Number);
    }
  } else {
    e.message = errorMessage(response);
  }
  e.final = response.final;
  return e;
}

function pingOp() {
  // Any value the server could not guess works; it must survive the
  // uint64 -> Number conversion, so stay below 2^53.
  const nonce = Math.floor(Math.random() * Number.MAX_SAFE_INTEGER);
  const started = process.hrtime.bigint();
  return op({ ping: { nonce } }, single('pong', (m) => ({ nonce: m.nonce })), {
    value: (a) => {
      if (a.nonce !== nonce) throw new PathdProtocolError('pong carries the wrong nonce');
      return Number(process.hrtime.bigint() - started) / 1e6;
    },
  });
}

const body = (name) => (a) => a[name];
const stripStatus = ({ status, ...rest }) => rest;

// Request kinds send(name, ...) sends without waiting.
const PIPELINED = {
  findPath: findPathOp,
  findRoute: findRouteOp,
  updateCells: updateCellsOp,
  sceneGridBand: sceneGridOp,
  batch: batchOp,
  ...Object.fromEntries(Object.keys(QUERIES).map((kind) => [kind, (...args) => queryOp(kind, ...args)])),
};

/* A sceneGrid() answer in the config's ASCII map format, one string per row,
 * as pathctl grid prints it: '#' blocked, '.' cost 1, '2'..'9' that cost,
 * '+' 10 or more. */
function gridRows(grid) {
  const symbol = (c) => (c === 0 ? '#' : c === 1 ? '.' : c <= 9 ? String(c) : '+');
  const rows = [];
  for (let y = 0; y < grid.height; y++) {
    rows.push(Array.from(grid.cells.subarray(y * grid.width, (y + 1) * grid.width), symbol).join(''));
  }
  return rows;
}

/* A request waiting for its answer: assembles its frames. */
class Pending {
  constructor(id, theOp, resolve, reject, timer) {
    Object.assign(this, { id, op: theOp, resolve, reject, timer });
    this.nextSeq = 0;
    this.path = [];
    this.legs = [];
    this.legSeq = 0;
    this.waypointCount = 0;
    this.response = null;
  }

  /* Takes one frame; returns the answer when it is complete, else undefined. */
  feed(response) {
    const { assemble } = this.op;
    if (assemble === 'path' && response.body === 'path') {
      const chunk = response.path;
      if (chunk.seq !== this.nextSeq) {
        throw new Violation(`request ${this.id}: path chunk ${chunk.seq} arrived, expected ${this.nextSeq}`);
      }
      this.nextSeq++;
      const points = this.points(chunk.points);
      this.count(points.length);
      this.path.push(...points);
    } else if (assemble === 'route' && response.body === 'routeLeg') {
      this.routeLeg(response.routeLeg);
    }
    // Single-frame answers complete on the first frame even if a server
    // forgets to set final.
    if (assemble !== 'single' && !response.final) return undefined;
    this.response = response;
    const answer = this.op.finish(this);
    Object.defineProperty(answer, 'timing', { value: { serverUs: response.serverUs, searchUs: response.searchUs } });
    return answer;
  }

  points(m) {
    return unpackPoints(this.id, m);
  }

  count(n) {
    this.waypointCount += n;
    if (this.waypointCount > MAX_PATH_WAYPOINTS) {
      throw new Violation(`request ${this.id}: answer longer than ${MAX_PATH_WAYPOINTS} waypoints`);
    }
  }

  routeLeg(leg) {
    let current = this.legs.at(-1);
    if (current && !current.end) {
      if (leg.leg !== this.legs.length - 1 || leg.seq !== this.legSeq) {
        throw new Violation(`request ${this.id}: route leg ${leg.leg} frame ${leg.seq} arrived, expected leg ${this.legs.length - 1} frame ${this.legSeq}`);
      }
    } else if (leg.leg !== this.legs.length || leg.seq !== 0) {
      throw new Violation(`request ${this.id}: route leg ${leg.leg} frame ${leg.seq} arrived, expected leg ${this.legs.length} frame 0`);
    } else {
      current = { end: false, scene: leg.scene, waypoints: [] };
      this.legs.push(current);
      this.legSeq = 0;
    }
    this.legSeq++;
    const points = this.points(leg.points);
    this.count(points.length);
    current.waypoints.push(...points);
    current.version = leg.sceneVersion;
    if (leg.legEnd) {
      if (leg.totalWaypoints && leg.totalWaypoints !== current.waypoints.length) {
        throw new Violation(`request ${this.id}: leg ${leg.leg} says ${leg.totalWaypoints} waypoints, ${current.waypoints.length} arrived`);
      }
      current.end = true;
      current.cost = leg.cost;
      const hop = leg.portal;
      current.portal = hop ? {
        name: hop.name, exit: xy(hop.exit), to_scene: hop.toScene, entry: xy(hop.entry), cost: hop.cost,
      } : null;
    }
  }

  finishPath(timed, goals = false, wantWorld = false) {
    const { response } = this;
    return pathResult(this.id, response.status, errorMessage(response), timed, goals, wantWorld, this.path,
      response.body === 'path' ? response.path : null, staleVersion(response.status, response.error));
  }

  /* The object pathctl route --json prints. */
  finishRoute(timed, wantWorld) {
    const { response } = this;
    let rr = response.routeResult;
    if (response.body !== 'routeResult') {
      if (this.legs.length) throw new Violation(`request ${this.id}: route ended without a RouteResult`);
      rr = { legs: 0, totalCost: 0, expansions: 0, micros: 0, pinned: false, goalUsed: null };
    }
    if (rr.legs !== this.legs.length || (this.legs.length && !this.legs.at(-1).end)) {
      throw new Violation(`request ${this.id}: RouteResult counts ${rr.legs} legs, ${this.legs.length} arrived`);
    }
    const message = errorMessage(response);
    return {
      status: statusName(response.status),
      total_cost: rr.totalCost,
      legs: this.legs.map((leg) => ({
        scene: leg.scene,
        cost: leg.cost,
        version: leg.version,
        waypoints: leg.waypoints.map((w) => [w.x, w.y]),
        world: wantWorld ? leg.waypoints.map((w) => [w.wx, w.wy]) : null,
        times: timed ? leg.waypoints.map((w) => w.t) : null,
        portal: leg.portal,
      })),
      expansions: rr.expansions,
      micros: rr.micros,
      pinned: rr.pinned,
      goal_used: xy(rr.goalUsed),
      ...(message ? { message } : {}),
    };
  }
}

/* In-flight slots a request takes on the server (pd__inflight_ok in
 * server/net/pd_dispatch.c): one per search, query, scene change or update,
 * one per item of a Batch, none for what the server answers on its event
 * loop (ping, stats, limits, scene lists, info and grids, watches, cancels,
 * auth, reload). */
const COUNTED = new Set(['findPath', 'findRoute', 'updateCells', 'createScene', 'createInstance', 'dropScene',
  'reservePath', 'releaseAgent', 'reservations',
  ...Object.values(QUERIES).map(([field]) => field)]);

function weightOf(requestBody) {
  const field = Object.keys(requestBody)[0];
  if (field === 'batch') return requestBody.batch.items.length;
  return COUNTED.has(field) ? 1 : 0;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const bodyName = (theOp) => Object.keys(theOp.body)[0];
/* Whether a request lost with its connection may be sent again. */
function resendable(theOp) {
  const name = bodyName(theOp);
  return READ_ONLY.has(name) || (KEYED.has(name) && Boolean(theOp.body[name].idempotencyKey));
}
const statusOf = (answer) => answer.status;
const messageOf = (answer) => answer.message || '';

class PathdClient {
  /* addr is "host:port" or "[v6addr]:port". The socket opens on the first
   * call. options.timeoutMs bounds each request; options.retryAttempts
   * (>= 1) is how many times in all a request the server answers OVERLOADED
   * is sent, and options.retryDeadlineMs how long after the first send a
   * retry may still start; options.maxInFlight lowers the connection's
   * in-flight cap below the server's, options.maxQueued bounds the local
   * queue (see "Flow control" at the top); options.protoPath locates
   * pathd.proto; options.token, for a server with auth.tokens, is sent
   * first on every new socket (auth()). */
  constructor(addr = DEFAULT_SERVER, {
    timeoutMs = DEFAULT_TIMEOUT_MS, retryAttempts = RETRY_ATTEMPTS, retryDeadlineMs = RETRY_DEADLINE_MS,
    protoPath = DEFAULT_PROTO_PATH, token = null, maxInFlight = Infinity, maxQueued = MAX_QUEUED,
    reconnect = true, maxConnectionAgeMs = MAX_CONNECTION_AGE_MS, idempotencyKeys = true,
  } = {}) {
    ({ host: this.host, port: this.port } = parseAddress(addr));
    if (!(Number.isInteger(retryAttempts) && retryAttempts >= 1)) {
      throw new TypeError('retryAttempts must be an integer >= 1');
    }
    if (!(maxInFlight >= 1)) throw new TypeError('maxInFlight must be >= 1');
    if (!(Number.isInteger(maxQueued) && maxQueued >= 0)) throw new TypeError('maxQueued must be an integer >= 0');
    this.timeoutMs = timeoutMs;
    this.retryAttempts = retryAttempts;
    this.retryDeadlineMs = retryDeadlineMs;
    this.maxInFlight = maxInFlight;
    this.maxQueued = maxQueued;
    // Flow control (see the top of the file): the connection's cap, null
    // until GetLimits answered on the current socket; the slots taken by
    // requests written and not yet answered; the requests held back.
    this._cap = null;
    this._used = 0;
    this._queue = []; // Pending, in call order
    // OVERLOADED answers this client received (each retried or returned).
    this.overloadedCount = 0;
    this._schema = loadSchema(protoPath);
    this._socket = null;
    // Ids keep increasing across reconnects, so a late answer to an old
    // request can never be mistaken for a new one.
    this._nextId = 1;
    this._pending = new Map(); // id -> Pending
    this._watches = new Set(); // ids of open watches
    this._events = []; // watch events not yet taken by watchNext()
    this._eventWaiters = []; // watchNext() calls waiting for one
    this.token = token;
    this.role = null;
    this._auth = null;   // the last Auth's answer (the role), untimed
    this._authId = 0;    // its request id
    // The timing of the answer the last call took (see the top of the file).
    this.lastTiming = { serverUs: 0, searchUs: 0 };
    // Replicas (see the top of the file).
    this.reconnect = reconnect;
    this.maxConnectionAgeMs = maxConnectionAgeMs || 0;
    this.idempotencyKeys = idempotencyKeys;
    this.reconnects = 0;    // sockets opened after the first
    this.resent = 0;        // requests sent again after a lost connection
    this.retries = {};      // status -> answers retried
    this._everConnected = false;
    this._connectedAt = 0;
    this._retiring = new Set(); // draining or aged sockets still owed answers
    this._closes = 0; // close() calls: a call never resends past one
    // The client's reconnect gate (_gateShut): while it is shut no call
    // opens a socket; each failed, lost or refused socket shuts it for a
    // jittered _gateStep, doubling. One gate for all calls, so the sockets
    // opened do not grow with the calls waiting (each call had its own
    // pause: 50 waiting calls opened 55 sockets a second).
    this._gate = null; // { at (performance.now()), timer, promise }: shut until the timer fires
    this._gateStep = RECONNECT_BACKOFF_FIRST_MS;
  }

  /* Authenticates this socket (and every later one) with token; resolves
   * with the role granted ("query", "write" or "admin"). A wrong token
   * rejects with UNAUTHENTICATED after about a second, and the server
   * closes the connection. No answer within timeoutMs rejects with
   * PathdTimeout, but the answer still counts when it comes (the role, and
   * the limits asked again: see _authenticate). */
  auth(token) {
    this.token = token;
    const gaveUp = { now: false };
    const answered = this._authUntilServed(gaveUp);
    const { timeoutMs } = this;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        gaveUp.now = true; // no more sockets for an auth() already rejected
        const err = new PathdTimeout(`no answer within ${timeoutMs} ms`, { requestId: this._authId });
        err.sent = true; // Auth takes no slot: it is never queued
        reject(err);
      }, timeoutMs);
      answered.then((role) => { clearTimeout(timer); resolve(role); },
        (err) => { clearTimeout(timer); reject(err); });
    });
  }

  /* auth()'s Auth, sent again on a new socket when the reconnect gate
   * opens, when its socket is lost or the server refuses it for now
   * (DRAINING: _refuse): Auth changes nothing, so it is always safe to
   * send again, as any query. It stops within min(retryDeadlineMs,
   * timeoutMs), or once auth() has rejected (gaveUp.now): before, it kept
   * connecting and sending Auth for the whole retry deadline after auth()
   * had timed out, its timers keeping the process alive. */
  async _authUntilServed(gaveUp) {
    const started = performance.now(); // the monotonic clock, as the gate's
    const closes = this._closes;
    if (closes) throw new PathdClosed();
    const deadlineMs = Math.min(this.retryDeadlineMs, this.timeoutMs);
    if (this.reconnect && this._socket === null && this._gate) await this._gateWait(closes); // as _call
    for (;;) {
      if (this._closes !== closes || gaveUp.now) throw new PathdDisconnected('connection closed by the client');
      const answered = this._socket ? this._authenticate() : (this._ensureConnected(), this._auth);
      try {
        return await answered;
      } catch (err) {
        const refused = err instanceof PathdDisconnected || (err instanceof PathdError && RETRYABLE.has(err.status));
        if (!refused || !this.reconnect || performance.now() + this._gatePause() - started > deadlineMs
            || this._closes !== closes || gaveUp.now) throw err;
        await this._gateWait(closes);
        if (this._closes !== closes || gaveUp.now) throw err;
      }
    }
  }

  /* Milliseconds before the reconnect gate opens (0: open), for the
   * retry deadlines and reconnectPauseMs; whether a call may open a socket
   * is this._gate alone. */
  _gatePause() {
    return this._gate ? Math.max(0, this._gate.at - performance.now()) : 0;
  }

  /* A socket failed to open, was lost or was refused (DRAINING first):
   * the gate shuts for a jittered step (half fixed, half random), doubled
   * for the next, up to RECONNECT_BACKOFF_MAX_MS. Once per step: a socket
   * opened around a shut gate (a raw send, a watch) that fails meanwhile
   * does not push it further.
   *
   * The gate opens when its timer fires, never by reading a clock: it was
   * "shut until Date.now() reaches _gateAt", but Date.now() is the wall
   * clock and the timers are libuv's monotonic whole milliseconds. A timer
   * fires up to ~1.6 ms before Date.now() says its wait is over (measured
   * on the test machine), and far more when NTP or a VM's clock sync steps
   * the wall clock back. The socket the timer let through could then be
   * refused (a draining pathd answers Auth in about a millisecond) while
   * the gate still read shut; that refusal was taken for one of the step
   * under way, so nothing shut the gate again, and the calls opened the
   * next socket at once, back to back while the wall clock lagged: a
   * draining replica hammered, the pauses' doubling skipped (the likely
   * cause of the draining test's one CI failure). */
  _gateShut() {
    if (this._gate) return;
    const pause = this._gateStep / 2 + Math.random() * (this._gateStep / 2);
    this._gateStep = Math.min(this._gateStep * 2, RECONNECT_BACKOFF_MAX_MS);
    const gate = { at: performance.now() + pause };
    gate.promise = new Promise((resolve) => {
      gate.open = resolve;
      gate.timer = setTimeout(() => {
        if (this._gate === gate) this._gate = null;
        resolve();
      }, pause);
    });
    // Keeps the process alive only while a call waits (_gateWait): a
    // script whose server went away exits after close() as before.
    gate.timer.unref();
    this._gate = gate;
  }

  /* Resolves when the gate is open: the promise every call waiting
   * shares, settled after the gate opened, so the socket a waiting call
   * opens is one whose failure shuts it again. Waits again if another gate
   * shut meanwhile (a shared promise is a gate's, not "the" gate's: a call
   * woken by an old one would open a socket inside the new pause), and
   * returns at once after a close() since `closes`. */
  async _gateWait(closes = this._closes) {
    while (this._gate && this._closes === closes) {
      this._gate.timer.ref();
      await this._gate.promise; // eslint-disable-line no-await-in-loop
    }
  }

  /* Opens the gate now (a call served, or close()): its timer no longer
   * holds the process, and the calls waiting wake at once. */
  _gateOpen() {
    const gate = this._gate;
    if (!gate) return;
    this._gate = null;
    clearTimeout(gate.timer);
    gate.open();
  }

  /* A call's final answer: one not retryable means a replica served it,
   * so the next failure pauses from the first step again. */
  _served(answer) {
    if (!RETRYABLE.has(answer.status)) {
      this._gateOpen();
      this._gateStep = RECONNECT_BACKOFF_FIRST_MS;
    }
  }

  /* Sends Auth with the kept token ahead of anything else queued after it.
   * Like GetLimits it has no timeout of its own (untimed): a late answer (a
   * server or event loop slower than timeoutMs) still sets the role and
   * lets a GetLimits refused before the token be asked again, or the
   * connection would keep the fallback cap and no role for its life. The
   * caller's wait is bounded in auth(); a lost socket rejects it. */
  _authenticate() {
    const authOp = { ...op({ auth: { token: this.token } }, single('auth', (m) => ({ role: m.role }))), untimed: true };
    const { id, promise } = this._send(authOp);
    const socket = this._socket;
    this._authId = id;
    this._auth = promise.then((answer) => {
      // A draining replica answers Auth DRAINING before it looks at the
      // token: this socket is given up and the calls waiting connect again.
      if (RETRYABLE.has(answer.status)) this._refuse(socket, 'Auth', answer);
      this.role = this._accept(authOp, answer).role;
      // GetLimits refused before this token (a server with auth.tokens):
      // the cap in use is the fallback, so read the server's now.
      if (this._capRead === false) this._readLimits();
      return this.role;
    });
    // Requests sent behind it fail on their own; only auth() reports this.
    this._auth.catch(() => {});
    return this._auth;
  }

  get connected() {
    return this._socket !== null;
  }

  /* Milliseconds before a call may open a socket again (0: it may now):
   * the reconnect backoff's pause after a failed, lost or refused socket. */
  get reconnectPauseMs() {
    return this._gatePause();
  }

  /* Requests written to the socket and not yet answered (a request that
   * timed out counts until its late answer arrives: the server still holds
   * its slot). */
  get inFlight() {
    let n = 0;
    for (const p of this._pending.values()) n += p.written ? 1 : 0;
    return n;
  }

  /* In-flight slots taken on the server, as it counts them (a Batch: one
   * per item); never above inFlightCap. */
  get inFlightSlots() {
    return this._used;
  }

  /* The connection's cap in use: Limits.max_inflight_per_conn (or the lower
   * maxInFlight option); null before GetLimits answered. */
  get inFlightCap() {
    return this._cap;
  }

  /* Requests held back in the local queue. */
  get queued() {
    return this._queue.length;
  }

  /* Closes the socket for good; requests still waiting reject with
   * PathdDisconnected, later calls with PathdClosed (the next call used to
   * open a new socket, where a closed client is expected to stay closed). */
  close() {
    this._closes++; // a call retrying now gives up instead of connecting again
    this._gateOpen(); // the calls waiting for the pause reject now, not when it ends
    for (const socket of [...this._retiring]) this._fail(socket, PathdDisconnected, 'connection closed by the client');
    this._fail(this._socket, PathdDisconnected, 'connection closed by the client');
  }

  // ---- connection -----------------------------------------------------------

  _ensureConnected() {
    if (this._socket && this.maxConnectionAgeMs && Date.now() - this._connectedAt > this.maxConnectionAgeMs) {
      this._retire(this._socket);
    }
    if (this._socket) return this._socket;
    const socket = net.connect({ host: this.host, port: this.port });
    socket.pathdBuf = Buffer.alloc(0);
    this._connectedAt = Date.now();
    if (this._everConnected) this.reconnects++;
    this._everConnected = true;
    socket.setNoDelay(true);
    let reason = 'server closed the connection';
    let established = false;
    socket.on('connect', () => { established = true; });
    socket.on('data', (data) => this._onData(socket, data));
    socket.on('error', (err) => {
      reason = established ? `connection failed: ${err.message}`
        : `cannot connect to ${this.host}:${this.port}: ${err.message}`;
    });
    socket.on('close', () => {
      if (socket === this._socket) this._gateShut(); // failed to open, or lost: not retired by us
      this._fail(socket, PathdDisconnected, reason);
    });
    this._socket = socket;
    this._cap = null;
    this._capRead = null; // GetLimits not answered yet on this socket
    this._used = 0;
    if (this.token !== null) this._authenticate();
    this._readLimits();
    return socket;
  }

  /* Asks GetLimits first thing on a new socket (behind Auth, which it may
   * need); counted requests wait in the queue until it answers. It never
   * times out: a late answer (a slow connect, or an event loop stalled past
   * timeoutMs on a loaded machine) must still set the cap, or every later
   * call would wait in the queue until its own timeout, on a socket that
   * looks healthy, for as long as it lives. The calls waiting behind it
   * keep their own timeouts; a lost socket rejects it as any request. */
  _readLimits() {
    const socket = this._socket;
    const limitsOp = { ...op({ limits: {} }, single('limits', (m) => m)), untimed: true };
    this._send(limitsOp).promise.then((answer) => {
      if (socket !== this._socket) return;
      if (RETRYABLE.has(answer.status)) {
        this._refuse(socket, 'GetLimits', answer); // draining (without a token, the first answer)
        return;
      }
      this._capRead = answer.status === 'OK';
      const cap = this._capRead ? answer.maxInflightPerConn : FALLBACK_INFLIGHT_CAP;
      this._cap = Math.max(1, Math.min(cap, this.maxInFlight));
      this._drain();
    }, () => {}); // a lost connection fails the queued requests itself
  }

  /* Drops the socket (if it is still the current one) and rejects every
   * request waiting for an answer. */
  _fail(socket, ErrorClass, message) {
    if (socket && this._retiring.delete(socket)) {
      // A replaced socket: only the requests written on it are lost.
      socket.destroy();
      this._rejectWritten(socket, ErrorClass, message);
      return;
    }
    if (socket === null || socket !== this._socket) return;
    this._socket = null;
    socket.destroy();
    // Queued requests were never sent, and fail the same way: they were
    // meant for this connection, and a caller learns of the loss at once
    // (a call then sends it again if it may; see "Replicas").
    for (const p of this._queue) {
      clearTimeout(p.timer);
      this._pending.delete(p.id);
      if (!p.timedOut) p.reject(new ErrorClass(message, { requestId: p.id }));
    }
    this._queue = [];
    this._cap = null;
    this._used = 0;
    this._rejectWritten(socket, ErrorClass, message);
    this._endWatches('DISCONNECTED', message);
    for (const waiter of this._eventWaiters.splice(0)) {
      clearTimeout(waiter.timer);
      waiter.reject(new ErrorClass(message));
    }
  }

  /* Rejects every request written on socket and not answered yet. */
  _rejectWritten(socket, ErrorClass, message) {
    for (const p of [...this._pending.values()]) {
      if (p.socket !== socket) continue;
      this._pending.delete(p.id);
      clearTimeout(p.timer);
      if (!p.timedOut) p.reject(new ErrorClass(message, { requestId: p.id }));
    }
  }

  /* Every open watch ends with a last event of this status; the caller
   * watches again (from the version it had) to go on. */
  _endWatches(status, message) {
    for (const watch of [...this._watches].sort((a, b) => a - b)) {
      this._watchEvent({ id: watch, status, final: true, message, body: null }, { status, watch, message, final: true });
    }
    this._watches.clear();
  }

  /* socket (draining, or older than maxConnectionAgeMs) takes no new
   * request: the next goes on a new socket (opened now when requests wait
   * in the queue), and socket closes once every answer owed on it arrived. */
  _retire(socket) {
    if (socket === null || socket !== this._socket) return;
    this._socket = null;
    this._retiring.add(socket);
    this._cap = null;
    this._used = 0;
    this._endWatches('DRAINING', 'the connection was replaced (draining or maxConnectionAgeMs)');
    this._closeIfDone(socket);
    if (this._queue.length) this._ensureConnected();
  }

  /* socket's Auth or GetLimits (what a new socket sends first) was
   * answered with a retryable status: a draining replica (pathd being
   * stopped, or one going down behind HAProxy) answers every request but
   * Ping DRAINING. socket takes nothing more, the reconnect gate shuts,
   * and the requests queued for it (held back until GetLimits answered)
   * reject with PathdDisconnected, err.sent false: each call connects
   * again when the gate opens (RECONNECT_BACKOFF_FIRST_MS doubling to
   * RECONNECT_BACKOFF_MAX_MS, half of it at random) within its
   * retryDeadlineMs, as when a connection is lost, so a client does not
   * hammer a draining replica; HAProxy picks another, or this one serves
   * again. (As the C, Python and Go clients.)
   * Answers owed for what was already written still arrive; then socket
   * closes. */
  _refuse(socket, what, answer) {
    if (socket === null || socket !== this._socket) return;
    const message = `${what} on the new connection was answered ${answer.status}`
      + `${messageOf(answer) ? ` (${messageOf(answer)})` : ''}`;
    this._gateShut();
    const queued = this._queue;
    this._queue = []; // emptied first, or _retire would open the next socket at once
    socket.pathdRefused = true; // the calls written on it back off too (_call)
    this._retire(socket);
    for (const p of queued) {
      clearTimeout(p.timer);
      this._pending.delete(p.id);
      const err = new PathdDisconnected(message, { requestId: p.id });
      err.sent = false;
      p.reject(err);
    }
  }

  _closeIfDone(socket) {
    if (!this._retiring.has(socket)) return;
    for (const p of this._pending.values()) if (p.socket === socket && !p.timedOut) return;
    this._retiring.delete(socket);
    socket.end();
  }

  /* theOp (an update) with its idempotencyKey: key, or a fresh random one
   * (128 bits in hex) when key is undefined and idempotencyKeys is on. */
  _keyed(theOp, key) {
    if (key === undefined && this.idempotencyKeys) key = crypto.randomBytes(16).toString('hex');
    if (key) {
      if (typeof key !== 'string' || key.length > MAX_IDEMPOTENCY_KEY || !/^[\x21-\x7e]+$/.test(key)) {
        throw new TypeError(`idempotencyKey: 1..${MAX_IDEMPOTENCY_KEY} printable ASCII characters`);
      }
      theOp.body[bodyName(theOp)].idempotencyKey = key;
    }
    return theOp;
  }

  // ---- sending --------------------------------------------------------------

  /* Sends one request; the promise settles with its answer, of any status.
   * Without theOp.finish the answer is not tracked. */
  /* One request's frame: its length prefix and the encoded Request. */
  _frame(id, body) {
    const { Request } = this._schema;
    const payload = Request.encode(Request.fromObject({ id, ...body })).finish();
    const header = Buffer.alloc(HEADER_BYTES);
    header.writeUInt32BE(payload.length);
    return Buffer.concat([header, payload]);
  }

  _send(theOp) {
    checkNumbers(this._schema.Request, theOp.body, '');
    const id = this._nextId++;
    if (this._closes) return { id, promise: Promise.reject(new PathdClosed(undefined, { requestId: id })) };
    const frame = this._frame(id, theOp.body);
    const socket = this._ensureConnected();
    if (!theOp.finish) {
      socket.write(frame);
      return { id, promise: Promise.resolve(null) };
    }
    let weight = weightOf(theOp.body);
    // A Batch above the cap could never be admitted: the server refuses it
    // whole (LIMIT_EXCEEDED) without taking a slot, so it goes at once.
    if (this._cap !== null && weight > this._cap) weight = 0;
    const mustWait = weight > 0 && (this._cap === null || this._queue.length > 0 || this._used + weight > this._cap);
    if (mustWait && this._queue.length >= this.maxQueued) {
      return {
        id,
        promise: Promise.reject(new PathdQueueFull(`${this._queue.length} requests already wait for this `
          + `connection's ${this._cap === null ? 'limits' : `in-flight cap of ${this._cap} slots`} `
          + `(maxQueued ${this.maxQueued}); nothing was sent`, { requestId: id })),
      };
    }
    const promise = new Promise((resolve, reject) => {
      const p = new Pending(id, theOp, resolve, reject, null);
      Object.assign(p, { weight, frame, written: false, timedOut: false });
      // Counted from the call, queued time included: the caller's wait.
      // A socket's own GetLimits has none (see _readLimits).
      if (!theOp.untimed) p.timer = setTimeout(() => this._timeOut(p), this.timeoutMs);
      this._pending.set(id, p);
      if (mustWait) this._queue.push(p);
      else this._write(p);
    });
    return { id, promise };
  }

  _write(p) {
    p.written = true;
    p.socket = this._socket;
    this._used += p.weight;
    const { frame } = p;
    p.frame = null;
    this._socket.write(frame);
  }

  /* Writes queued requests, in order, while they fit under the cap. */
  _drain() {
    while (this._socket && this._cap !== null && this._queue.length
           && this._used + this._queue[0].weight <= this._cap) {
      this._write(this._queue.shift());
    }
  }

  /* No answer within timeoutMs: the caller is told. A queued request is
   * dropped unsent; a written one keeps its slot (and its entry, so its
   * late answer is recognised and ignored) until that answer arrives. */
  _timeOut(p) {
    p.timedOut = true;
    if (!p.written) {
      this._queue.splice(this._queue.indexOf(p), 1);
      this._pending.delete(p.id);
    } else if (p.weight === 0) {
      this._pending.delete(p.id);
    } else if (p.socket && !p.socket.destroyed) {
      // Sent and running: without a Cancel the server searched on for an
      // answer nobody reads (up to the request's own deadline), holding
      // its slots on a busy server. Its CANCELLED answer frees them, as
      // the Go client does when a call's context ends.
      p.socket.write(this._frame(this._nextId++, { cancel: { targetId: p.id } }));
    }
    const err = new PathdTimeout(`no answer within ${this.timeoutMs} ms`, { requestId: p.id });
    err.sent = p.written;
    p.reject(err);
  }

  /* The answer to p is complete: its slots are free again. */
  _release(p) {
    clearTimeout(p.timer);
    this._pending.delete(p.id);
    if (p.socket !== this._socket) {
      this._closeIfDone(p.socket); // a replaced socket's slots count nowhere
    } else if (p.weight > 0) {
      this._used -= p.weight;
      this._drain();
    }
  }

  /* An answer a call resolves with becomes its value; any other rejects. */
  _accept(theOp, answer) {
    this.lastTiming = answer.timing;
    const status = statusOf(answer);
    if (!theOp.accept.includes(status)) {
      throw new PathdError(status, messageOf(answer), { requestId: answer.id, result: answer });
    }
    return theOp.value(answer);
  }

  /* The blocking-style round trip: send, wait, and retry OVERLOADED with
   * backoff. Resolves with the call's value. */
  async _call(theOp) {
    // The monotonic clock, as the gate's: a wall clock stepped back would
    // lengthen the retry deadline by the step.
    const started = performance.now();
    let backoff = RETRY_BACKOFF_FIRST_MS;
    const closes = this._closes;
    if (closes) throw new PathdClosed(); // not after a wait for the reconnect gate
    for (let attempt = 1; ;) {
      // A send that would open a socket while the reconnect gate is shut (a
      // socket failed, was lost or was refused a moment ago) waits for it
      // as the calls already waiting do: one socket per step however many
      // calls come. Before every send, not only the first: a retry after
      // OVERLOADED whose socket was lost during its sleep waits too.
      if (this.reconnect && this._socket === null && this._gate) {
        // The wait counts against the call's retry deadline, the first
        // send's as every resend's: never sent, so safe whatever the call.
        if (performance.now() + this._gatePause() - started > this.retryDeadlineMs) {
          const err = new PathdDisconnected(`the reconnect backoff pauses ${Math.ceil(this._gatePause())} ms more, `
            + `past retryDeadlineMs (${this.retryDeadlineMs}); nothing was sent`);
          err.sent = false;
          throw err;
        }
        await this._gateWait(closes); // eslint-disable-line no-await-in-loop
        if (this._closes !== closes) throw new PathdDisconnected('connection closed by the client');
      }
      const { id, promise } = this._send(theOp);
      const socket = this._socket;
      let answer;
      try {
        answer = await promise;
      } catch (err) {
        // Lost with its connection (or none could be opened): sent again,
        // once the client's reconnect gate opens, when that is safe.
        // (Never written, err.sent false: safe whatever the request.)
        if (!(err instanceof PathdDisconnected) || !this.reconnect || !(err.sent === false || resendable(theOp))
            || performance.now() + this._gatePause() - started > this.retryDeadlineMs || this._closes !== closes) throw err;
        this.resent++;
        await this._gateWait(closes);
        if (this._closes !== closes) throw err;
        continue;
      }
      if (answer.status === 'DRAINING' && socket && socket.pathdRefused && this.reconnect) {
        // Written at once (it takes no slot) on a socket whose Auth or
        // GetLimits then came back DRAINING (_refuse): connect again when
        // the gate opens, as the calls that were queued there do, not at
        // once on socket after socket.
        if (performance.now() + this._gatePause() - started <= this.retryDeadlineMs && this._closes === closes) {
          this.resent++;
          await this._gateWait(closes);
          if (this._closes !== closes) throw new PathdDisconnected('connection closed by the client', { requestId: id });
          continue;
        }
      }
      if (answer.status === 'OVERLOADED') this.overloadedCount++;
      // Equal jitter: at least half the step, so the backoff still grows.
      const wait = answer.status === 'DRAINING' ? 0 : backoff / 2 + Math.random() * (backoff / 2);
      if (!RETRYABLE.has(answer.status) || attempt === this.retryAttempts
          || performance.now() + wait - started > this.retryDeadlineMs) {
        if (!(answer instanceof PathResult)) Object.defineProperty(answer, 'id', { value: id });
        this._served(answer);
        return this._accept(theOp, answer);
      }
      this.retries[answer.status] = (this.retries[answer.status] || 0) + 1;
      if (answer.status === 'DRAINING') this._retire(socket);
      await sleep(wait);
      if (this._closes !== closes) throw new PathdDisconnected('connection closed by the client', { requestId: id });
      backoff = Math.min(backoff * 2, RETRY_BACKOFF_MAX_MS);
      attempt++;
    }
  }

  // ---- receiving ------------------------------------------------------------

  _onData(socket, data) {
    const live = () => socket === this._socket || this._retiring.has(socket);
    if (!live()) return;
    socket.pathdBuf = socket.pathdBuf.length ? Buffer.concat([socket.pathdBuf, data]) : data;
    try {
      while (socket.pathdBuf.length >= HEADER_BYTES && live()) {
        const length = socket.pathdBuf.readUInt32BE(0);
        // Checked before waiting for (and buffering) the frame's body.
        if (length > MAX_FRAME_BYTES) {
          throw new Violation(`server sent a ${length}-byte frame, above the ${MAX_FRAME_BYTES}-byte limit`);
        }
        if (socket.pathdBuf.length < HEADER_BYTES + length) break;
        const payload = socket.pathdBuf.subarray(HEADER_BYTES, HEADER_BYTES + length);
        socket.pathdBuf = socket.pathdBuf.subarray(HEADER_BYTES + length);
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

  _dispatch(socket, response) {
    const status = statusName(response.status);
    if (response.id === 0) {
      if (status === 'DRAINING') {
        // The replica is draining: nothing more goes on socket, the answers
        // it owes still arrive, and the next request opens a new socket.
        this._retire(socket);
        return;
      }
      // A connection-level error (frame too large, malformed, too many
      // connections): the server closes after it, so close our side too.
      if (status !== 'OK') {
        const message = errorMessage(response);
        // Lost as surely as by its close event, which comes after _fail
        // dropped it and so would not shut the gate: without this every
        // query was resent at once, a socket per round trip to a pathd at
        // max_connections (OVERLOADED with id 0) for the whole deadline.
        if (socket === this._socket) this._gateShut();
        this._fail(socket, PathdDisconnected,
          `server closed the connection after ${status}${message ? `: ${message}` : ''}`);
      }
      return;
    }
    const p = this._pending.get(response.id);
    let watching = this._watches.has(response.id);
    if (p && p.op.body.watch) {
      // A watch's first frame answers watch(); an accepted watch's frames
      // are events from then on.
      watching = status === 'OK';
      if (watching && !response.final) this._watches.add(response.id);
    }
    if (watching) this._watchEvent(response);
    if (!p) return; // the answer to a cancel, or to a request that timed out
    if (p.timedOut) {
      // A late answer: ignored, but its last frame frees the slot.
      if (response.final || p.op.assemble === 'single') this._release(p);
      return;
    }
    const answer = p.feed(response);
    if (answer === undefined) return;
    this._release(p);
    p.resolve(answer);
  }

  // ---- paths and routes -------------------------------------------------------

  /* A path from start to goal, cells [x, y] unless options.world. Options
   * (0 / unset means the server default): world, unitSize, connectivity (4
   * or 8), style ('cells', 'corners', 'smooth'), goalMode ('exact',
   * 'nearest', 'line'), snap, partialOnCutoff, speed (world units/s; > 0
   * adds times), startTime, avoid [[x, y]], window [[x0, y0], [x1, y1]],
   * maxExpansions, deadlineMs, range (cells: stop within it of the goal),
   * lineOfSight (with range), goals [[x, y]] with goal null (the nearest;
   * .goalIndex), wantWorld (the result's world; null without it).
   * Resolves with a PathResult for OK or PARTIAL;
   * rejects with a PathdError for any other answer (err.result holds it). */
  findPath(scene, start, goal, options) {
    return this._call(findPathOp(scene, start, goal, options));
  }

  /* Sends a path request without retrying: returns { id, promise } at once;
   * the promise resolves with a PathResult of any status. */
  sendFindPath(scene, start, goal, options) {
    return this._send(findPathOp(scene, start, goal, options));
  }

  /* A route across scenes through portals, as pathctl route --json prints it:
   * { status, total_cost, legs: [{ scene, cost, version, waypoints, world,
   * times, portal }], expansions, micros, pinned, goal_used }. Options:
   * world, unitSize, style, goalMode, speed, startTime, maxExpansions,
   * deadlineMs, wantWorld (each leg's world is null without it). OK and
   * PARTIAL resolve. */
  findRoute(fromScene, start, toScene, goal, options) {
    return this._call(findRouteOp(fromScene, start, toScene, goal, options));
  }

  /* Sends any request kind without retrying: name is findPath, findRoute,
   * updateCells, sceneGridBand, batch or a movement query's name, the rest
   * that call's arguments. Returns { id, promise }; the promise resolves
   * with the answer of any status. */
  send(name, ...args) {
    return this._send(choice(PIPELINED, name, 'request kind')(...args));
  }

  /* Asks the server to stop working on targetId; that request's promise then
   * settles with CANCELLED (or its normal result if it finished first). */
  cancel(targetId) {
    const p = this._pending.get(targetId);
    if (p && !p.written) {
      // Still in the local queue: never sent, so settled here as the
      // server would have, with CANCELLED.
      this._queue.splice(this._queue.indexOf(p), 1);
      clearTimeout(p.timer);
      this._pending.delete(p.id);
      p.resolve(p.feed({
        id: p.id, status: 'CANCELLED', final: true, body: 'error', error: { message: 'cancelled before it was sent' },
        message: '', serverUs: 0, searchUs: 0,
      }));
      return;
    }
    // Sent on the connection the target was written on: a retiring
    // (draining) one still runs it and owes its answer, and the id means
    // nothing on any other. With none holding it (answered, or its
    // connection lost) there is nothing to cancel, and no socket is opened
    // for it. The acknowledgement carries nothing the caller needs: not
    // tracked.
    if (!p || !p.socket || p.socket.destroyed) return;
    p.socket.write(this._frame(this._nextId++, { cancel: { targetId } }));
  }

  // ---- scenes -----------------------------------------------------------------

  /* Blocks ('block'), opens ('pass') or re-costs ('cost', with cost 1..255)
   * the cells of rect [[x0, y0], [x1, y1]] (inclusive) or of the list
   * cells [[x, y]]: { rect | cells, op, cost, atMs (the game time from
   * which blocked cells cut the scene's reservations) }. Resolves with
   * { status, version, cells_changed, micros, agents_cut }. */
  updateCells(scene, change = {}) {
    return this._call(this._keyed(updateCellsOp(scene, change), change.idempotencyKey));
  }

  // ---- reservations (docs/PROTOCOL.md, "Reservations") ------------------------

  /* Write role: plans agent (an id >= 1) from cell start at game time t0Ms
   * at speed cells/s around every other agent's reservations, and reserves
   * it. options: { unitSize, windowMs (null: 8000; 0: all the way), atGoal
   * ('park' | 'vanish'), maxExpansions, deadlineMs, minVersion,
   * yieldAfterMs (0: never; else once the agent stood this long, agents
   * standing in its way may be moved aside) }. Resolves with { status
   * ('OK' | 'PARTIAL'), agent, waypoints [{ x, y, t_arrive_ms, t_leave_ms
   * (null: no end) }], reserved_until_ms (null: no end), cost, expansions,
   * search_micros, scene_version, was_cut, displaced [{ agent, t0_ms,
   * reserved_until_ms, waypoints }]: the agents moved aside, in the order they were moved,
   * whose plans from t0_ms on the game must replace with these };
   * rejects with PathdError otherwise (START_BLOCKED: its
   * result.blocking_agent names the agent in the way). */
  reservePath(scene, agent, start, goal, t0Ms, speed, options) {
    return this._call(reservePathOp(scene, agent, start, goal, t0Ms, speed, options));
  }

  /* Write role: drops every reservation of agent; resolves with true when it had any. */
  async releaseAgent(scene, agent) {
    return (await this._call(releaseAgentOp(scene, agent))).released;
  }

  /* Write role: releases every agent of scene and forgets its game clock
   * (a game whose clock starts over calls it first); resolves with how
   * many agents were released. Watchers hear agents_released. */
  async releaseAll(scene) {
    return (await this._call(releaseAgentOp(scene, 0, true))).agents_released;
  }

  /* The reservations holding any cell of rect [[x0, y0], [x1, y1]] (null:
   * the whole scene) at some time of [fromMs, toMs) (toMs 0: no end):
   * { entries [{ agent, x, y, width, height, t0_ms, t1_ms }], matching,
   * agents, table_entries, table_bytes }. */
  reservations(scene, options) {
    return this._call(reservationsOp(scene, options));
  }

  /* Write role: a scene made at run time, from a map file's bytes
   * { map, format: 'ascii' | 'movingai' | 'tiled' | 'ldtk' } or raw cells
   * { cells, width, height } (row-major, 0 blocked, else the cost), with
   * origin [x, y], cellSize, unitSizes. Resolves with { status, version,
   * own_bytes, scene_bytes }; rejects with SCENE_EXISTS, LIMIT_EXCEEDED... */
  createScene(name, spec = {}) {
    return this._call(this._keyed(createSceneOp(name, spec), spec.idempotencyKey));
  }

  /* Write role: a scene sharing template's memory until it is updated.
   * options: { idempotencyKey } as every write call. */
  createInstance(name, template, { idempotencyKey } = {}) {
    return this._call(this._keyed(createInstanceOp(name, template), idempotencyKey));
  }

  /* Write role: stop serving a scene ({ dropPortals } to drop the portals
   * naming it too; SCENE_IN_USE otherwise). */
  dropScene(name, options = {}) {
    return this._call(this._keyed(dropSceneOp(name, options), options.idempotencyKey));
  }

  /* One band of a grid's rows: { status, version, width, height, row_start,
   * row_count, cells (Buffer, row-major, 0 blocked, else the cost) }.
   * Options unitSize, rowStart, rowCount. */
  sceneGridBand(scene, options) {
    return this._call(sceneGridOp(scene, options));
  }

  /* The whole grid (the scene's, or the unit-K grid with { unitSize }), read
   * band by band and started over when the scene changes between bands:
   * { status, version, width, height, cells }. gridRows() makes it text. */
  async sceneGrid(scene, { unitSize = 0 } = {}) {
    for (let attempt = 0; attempt < SCENE_GRID_RESTARTS; attempt++) {
      const bands = [];
      let row = 0;
      let first = null;
      for (;;) {
        let band;
        try {
          // eslint-disable-next-line no-await-in-loop
          band = await this.sceneGridBand(scene, { unitSize, rowStart: row });
        } catch (err) {
          // A later band OUT_OF_BOUNDS: the grid shrank meanwhile.
          if (err.status !== 'OUT_OF_BOUNDS' || row === 0) throw err;
          break;
        }
        if (first && band.version !== first.version) break;
        first = first || band;
        bands.push(band.cells);
        row += band.row_count;
        if (row >= band.height) {
          return {
            status: 'OK', version: band.version, width: band.width, height: band.height, cells: Buffer.concat(bands),
          };
        }
      }
    }
    throw new PathdError('INTERNAL', `scene ${scene} kept changing while its grid was read`);
  }

  /* Round trip; resolves with the measured time in milliseconds. */
  ping() {
    return this._call(pingOp());
  }

  /* The served scenes, sorted by name: [{ name, width, height, version }]. */
  scenes() {
    return this._call(op({ listScenes: {} }, single('sceneList', (m) => m), { value: (a) => a.scenes }));
  }

  /* { name, width, height, originX, originY, cellSize, unitSizes, version,
   * passableCells }; rejects with UNKNOWN_SCENE if there is no such scene. */
  sceneInfo(scene, { minVersion = 0 } = {}) {
    return this._call(op({ sceneInfo: { scene, minVersion } }, single('sceneInfo', (m) => ({ info: m })),
      { value: body('info') }));
  }

  // ---- watching scenes (docs/PROTOCOL.md, "Watching scenes") ------------------

  /* Subscribes this connection to the scenes' changes; resolves with the
   * watch's id once the server accepted it (rejects UNKNOWN_SCENE,
   * LIMIT_EXCEEDED, INVALID_ARGUMENT). Its events, first a 'started' one
   * per scene, come from watchNext(); read them promptly, or the server
   * ends the watch with WATCH_OVERFLOW. */
  async watch(scenes) {
    if (!Array.isArray(scenes) || scenes.length === 0) throw new TypeError('watch needs at least one scene');
    scenes.forEach((s) => checkScene(s));
    const watchOp = op({ watch: { scenes } }, (p) => {
      const status = statusName(p.response.status);
      return status === 'OK' ? { status } : single(null, null)(p);
    });
    const { id, promise } = this._send(watchOp);
    this._accept(watchOp, await promise);
    return id;
  }

  /* The next event of any watch on this connection, as the object pathctl
   * watch --json prints: { status ('WATCH_OVERFLOW' ends the watch),
   * watch, kind ('started', 'updated', 'replaced', 'instanced', 'dropped',
   * 'ended', 'agents_cut', 'agents_displaced', 'agents_expired', 'agents_released'), scene, version, changed
   * [x0, y0, x1, y1] or null, and for an update cells_changed and ops [{
   * set, cost, bounds, cells }], instance, for agents_cut agents
   * (ascending) and cut_at_ms (after the 'updated' of the update that cut
   * them), for agents_displaced agents (ascending: a ReservePath moved
   * them aside), for agents_expired agents (ascending: reservation_ttl_ms
   * released them) and agents_released (ReleaseAgent all released them), final }. Rejects with PathdTimeout after timeoutMs (default the
   * client's), PathdError IDLE when no watch is open and none is queued,
   * PathdDisconnected when the connection went, PathdClosed after close()
   * once the events queued (the watch's last, which close() queues) are
   * taken, as every call after close() (Go's Next: ErrClosed). */
  watchNext({ timeoutMs = this.timeoutMs } = {}) {
    if (this._events.length) return Promise.resolve(this._events.shift());
    if (this._closes) return Promise.reject(new PathdClosed());
    if (this._watches.size === 0) {
      return Promise.reject(this._socket ? new PathdError('IDLE', 'no watch is open')
        : new PathdDisconnected('not connected: the connection and its watches are gone'));
    }
    return new Promise((resolve, reject) => {
      const waiter = { resolve, reject };
      waiter.timer = setTimeout(() => {
        this._eventWaiters.splice(this._eventWaiters.indexOf(waiter), 1);
        reject(new PathdTimeout(`no watch event within ${timeoutMs} ms`));
      }, timeoutMs);
      this._eventWaiters.push(waiter);
    });
  }

  /* Ends a watch; its last event ('ended') still comes from watchNext(). */
  unwatch(watchId) {
    return this._call(op({ unwatch: { watchId } }, single(null, null)));
  }

  /* Files a watch frame: to the first waiting watchNext(), or the queue. */
  _watchEvent(response, made = null) {
    const event = made || watchEvent(response);
    if (response.final) this._watches.delete(response.id);
    const waiter = this._eventWaiters.shift();
    if (!waiter) {
      this._events.push(event);
      return;
    }
    clearTimeout(waiter.timer);
    waiter.resolve(event);
  }

  /* Server-wide counters (pathd.v1.Stats, camelCase names). */
  stats() {
    return this._call(op({ stats: {} }, single('stats', (m) => m), { value: stripStatus }));
  }

  /* The limits requests must respect (pathd.v1.Limits, camelCase names:
   * maxFrameBytes, maxInflightPerConn, maxBatchItems, ...). */
  limits() {
    return this._call(op({ limits: {} }, single('limits', (m) => m), { value: stripStatus }));
  }

  /* Admin: the server rereads its config and maps, as on SIGHUP. */
  async reload() {
    await this._call(op({ reload: {} }, single(null, null)));
  }

  // ---- movement queries -------------------------------------------------------
  // Points are cells unless options.world; every query takes options.unitSize.
  // Each resolves with the object pathctl --json prints (status, version, ...).

  /* Is the straight segment walkable? { clear, hit, last_free, last_free_world }. */
  raycast(scene, from, to, options) {
    return this._call(queryOp('raycast', scene, from, to, options));
  }

  /* Checks claimed moves [[x, y, t]] (options.tolerance): { valid,
   * first_invalid, reason, last_valid[, last_valid_world] }; reason is
   * 'valid', 'out_of_bounds', 'blocked_point', 'blocked_segment',
   * 'too_fast' or 'time_not_increasing'. */
  validateMove(scene, moves, maxSpeed, options) {
    return this._call(queryOp('validateMove', scene, moves, maxSpeed, options));
  }

  /* Moves by delta [dx, dy], sliding along walls: { end, end_world, slid }. */
  moveAlong(scene, from, delta, options) {
    return this._call(queryOp('moveAlong', scene, from, delta, options));
  }

  /* The nearest cell the unit fits on within radius cells (Euclidean between
   * centres; options.reachableFrom): { cell, distance }; NO_PATH if none. */
  nearestWalkable(scene, at, radius, options) {
    return this._call(queryOp('nearestWalkable', scene, at, radius, options));
  }

  /* Are the cells connected for the unit? { reachable }. */
  isReachable(scene, from, to, options) {
    return this._call(queryOp('isReachable', scene, from, to, options));
  }

  /* A cell drawn uniformly within walking distance radius (options.seed):
   * { cell, seed, candidates }. */
  randomPoint(scene, around, radius, options) {
    return this._call(queryOp('randomPoint', scene, around, radius, options));
  }

  /* Distance to the nearest blocked cell (options.maxDistance): { distance, wall }. */
  distanceToWall(scene, at, options) {
    return this._call(queryOp('distanceToWall', scene, at, options));
  }

  /* Up to MAX_BATCH_ITEMS queries (made by query()) in one frame; resolves
   * with their answers in order, each with its own status. */
  batch(items) {
    return this._call(batchOp(items));
  }
}

/* Calls a pool spreads over its connections: every request that is
 * answered once. Watches, cancel and auth belong to one connection and
 * stay on PathdClient. */
const POOLED = ['findPath', 'findRoute', 'updateCells', 'createScene', 'createInstance', 'dropScene',
  'reservePath', 'releaseAgent', 'releaseAll', 'reservations',
  'sceneGridBand', 'sceneGrid', 'ping', 'scenes', 'sceneInfo', 'stats', 'limits', 'reload',
  ...Object.keys(QUERIES), 'batch'];

/* N PathdClient connections to one server, with the same calls: each call
 * goes to the connection with the fewest slots taken and queued (ties in
 * turn), so a busy connection's queue does not hold back calls another
 * could send now. Each connection keeps its own cap and queue (the server's
 * cap is per connection, so N connections carry N caps' worth; the job
 * queue and the workers stay shared). Options are PathdClient's plus
 * connections (default 4). */
class PathdPool {
  constructor(addr = DEFAULT_SERVER, { connections = 4, ...options } = {}) {
    if (!(Number.isInteger(connections) && connections >= 1)) {
      throw new TypeError('connections must be an integer >= 1');
    }
    this.clients = Array.from({ length: connections }, () => new PathdClient(addr, options));
    this._turn = 0;
  }

  /* The connection a call goes to. */
  pick() {
    let best = null;
    let bestLoad = Infinity;
    const n = this.clients.length;
    for (let k = 0; k < n; k++) {
      const client = this.clients[(this._turn + k) % n];
      let load = client.inFlightSlots;
      for (const p of client._queue) load += p.weight;
      if (load < bestLoad) {
        best = client;
        bestLoad = load;
      }
    }
    this._turn = (this._turn + 1) % n;
    return best;
  }

  /* Sums over the connections. */
  get inFlightSlots() { return this.clients.reduce((n, c) => n + c.inFlightSlots, 0); }

  get queued() { return this.clients.reduce((n, c) => n + c.queued, 0); }

  get overloadedCount() { return this.clients.reduce((n, c) => n + c.overloadedCount, 0); }

  send(name, ...args) {
    return this.pick().send(name, ...args);
  }

  close() {
    for (const client of this.clients) client.close();
  }
}
for (const name of POOLED) {
  PathdPool.prototype[name] = function pooled(...args) { return this.pick()[name](...args); };
}

module.exports = {
  PathdClient,
  PathdPool,
  PathdQueueFull,
  PathdClosed,
  PathResult,
  query,
  gridRows,
  PathdError,
  PathdDisconnected,
  PathdTimeout,
  PathdProtocolError,
  DEFAULT_SERVER,
  DEFAULT_TIMEOUT_MS,
  MAX_FRAME_BYTES,
  MAX_PATH_WAYPOINTS,
  MAX_BATCH_ITEMS,
  MAX_RANGE,
  MAX_GOALS,
  MAX_BATCH_PATHS,
  MAX_BATCH_PATH_WAYPOINTS,
  RETRY_ATTEMPTS,
  RETRY_BACKOFF_FIRST_MS,
  RETRY_BACKOFF_MAX_MS,
  RETRY_DEADLINE_MS,
  MAX_QUEUED,
  RECONNECT_BACKOFF_FIRST_MS,
  RECONNECT_BACKOFF_MAX_MS,
  MAX_CONNECTION_AGE_MS,
};
