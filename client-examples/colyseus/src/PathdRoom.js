'use strict';
/*
 * PathdRoom.js - a Colyseus 0.16 room whose movement is authoritative on
 * pathd: NPCs walk paths pathd finds (sent as Batch requests), players move
 * by messages, and every move a player claims is checked by pathd
 * (ValidateMove and Raycast in one Batch) before the room accepts it. A
 * refused move snaps the player back to its last accepted position.
 *
 * Meant to be copied into a Colyseus project: it needs the Node client
 * (client-examples/node/pathd-client.js, with protobufjs) and the same
 * Tiled map pathd serves as its scene (config/default.json: "courtyard",
 * config/scenes/courtyard.tmj, layer "walls"). The room reads the map too,
 * for what pathd does not answer: where to spawn and where NPCs should go.
 *
 * Failure policy, for a pathd restart or outage: a move that cannot be
 * checked is refused (reason "unchecked"), never waved through; NPCs whose
 * re-path fails keep walking their old path; nothing throws out of the
 * room's handlers. The client reconnects by itself on the next call.
 *
 * Room options (onCreate): pathdAddr ("host:port"; null runs the room
 * without pathd, every move accepted unchecked: the baseline of the
 * benchmark, never a game), map (.tmj path), scene (pathd's name for it),
 * npcs (count), repathMs (each NPC asks a new path this often),
 * maxSpeed (cells/s a player may move), connections (pooled to pathd).
 */
const path = require('node:path');
const { Room } = require('@colyseus/core');
const { Schema, MapSchema, Encoder, defineTypes } = require('@colyseus/schema');
const { PathdPool, query } = require('../../node/pathd-client');
const { TiledGrid } = require('./tiled');

const TICK_MS = 50; // 20 Hz
const NPC_SPEED = 2; // cells per second
const DEFAULT_MAX_SPEED = 4; // cells per second a player may move
// A claimed time may run this far ahead of the room's clock (network jitter)
// before the move is refused as "clock_ahead": timestamps are the player's,
// so a speed hack that also lies about time is caught here.
const CLOCK_SLACK_S = 0.5;
// FindPath items per Batch (the server's limit, MAX_BATCH_PATHS).
const PATHS_PER_BATCH = 32;
// How long the room waits for pathd before it refuses a move as unchecked.
const CHECK_TIMEOUT_MS = 1000;
// Moves a player may have waiting for their check; more are refused at once
// ("flooding"), so a client spamming claims cannot grow the room's memory
// or take the room's share of pathd.
const MAX_PENDING_MOVES = 8;
const DEFAULT_MAP = path.join(__dirname, '..', '..', '..', 'config', 'scenes', 'courtyard.tmj');

// The full state of 1,000 NPCs (sent to each joining player) is about 20
// KB, above @colyseus/schema's default 8 KB encode buffer, which it would
// otherwise grow with a warning on every join.
Encoder.BUFFER_SIZE = Math.max(Encoder.BUFFER_SIZE, 64 * 1024);

class Player extends Schema {}
defineTypes(Player, { x: 'float32', y: 'float32' });
// An NPC as players see it: the waypoint it walks to (world), changed only
// when it gets there or gets a new path, which clients interpolate towards
// at NPC_SPEED. Sending every NPC's position every tick would cost each
// player a patch of 1,000 moves 20 times a second.
class Npc extends Schema {}
defineTypes(Npc, { tx: 'float32', ty: 'float32' });
class RoomState extends Schema {
  constructor() {
    super();
    this.players = new MapSchema();
    this.npcs = new MapSchema();
  }
}
defineTypes(RoomState, { players: { map: Player }, npcs: { map: Npc } });

/* A seeded generator (mulberry32), so a run's NPC goals can be replayed. */
function random(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

class PathdRoom extends Room {
  onCreate(options = {}) {
    const {
      pathdAddr = '127.0.0.1:7420', map = DEFAULT_MAP, scene = 'courtyard', npcs = 100, repathMs = 1000,
      maxSpeed = DEFAULT_MAX_SPEED, connections = 2, seed = 1,
    } = options;
    this.autoDispose = false;
    this.scene = scene;
    this.maxSpeed = maxSpeed;
    this.repathMs = repathMs;
    this.grid = TiledGrid.load(map);
    this.rand = random(seed);
    // retryDeadlineMs: a check's reconnects and resends (the client's
    // replica handling) end within the time the room gives it.
    this.pathd = pathdAddr
      ? new PathdPool(pathdAddr, { connections, timeoutMs: CHECK_TIMEOUT_MS, retryDeadlineMs: CHECK_TIMEOUT_MS })
      : null;
    this.setState(new RoomState());
    this.resetStats();
    this.acceptedMoves = []; // [from, to, dt]: world points, for the independent check
    this.npcs = [];
    const now = Date.now();
    for (let i = 0; i < npcs; i++) {
      const [x, y] = this.grid.centre(this.randomOpenCell());
      const npc = {
        id: `npc${i}`, x, y, path: null, idx: 0, pathAt: now, asking: false,
        // Staggered over the interval, so re-paths spread over every tick.
        nextRepath: now + Math.floor((i * repathMs) / npcs),
      };
      this.npcs.push(npc);
      this.state.npcs.set(npc.id, Object.assign(new Npc(), { tx: x, ty: y }));
    }
    this.lastTick = null;
    this.setSimulationInterval((dt) => this.tick(dt), TICK_MS);
    this.onMessage('move', (client, claim) => this.onMove(client, claim));
  }

  /* Holds NPC re-paths back (paused true) and resolves once no request
   * of the room's is in flight or queued at pathd: a benchmark's counters
   * then agree with pathd's exactly. */
  async quiesce(paused = true) {
    this.paused = paused;
    while (this.pathd && (this.pathd.inFlightSlots > 0 || this.pathd.queued > 0)) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  /* What the benchmark and the tests read: counters, round trips, ticks;
   * zeroed when a measured run starts. */
  resetStats() {
    const now = Date.now();
    for (const npc of this.npcs || []) npc.pathAt = Math.max(npc.pathAt, now);
    this.stats = {
      batches: 0, batchItems: 0, batchOk: 0, batchFailed: 0, ticks: 0, overloaded: 0, batchRttMs: [], batchServerMs: [],
      moves: 0, checks: 0, accepted: 0, rejected: 0, unchecked: 0, reasons: {},
      // Requests (frames + batch items) that timed out before they left the
      // client's queue: pathd never got them (a loaded room).
      unsent: 0,
      tickMs: [], tickGapMs: [], npcPathless: 0,
    };
    this.lastTick = null;
  }

  randomOpenCell() {
    const { open } = this.grid;
    return open[Math.floor(this.rand() * open.length)];
  }

  onJoin(client) {
    const [x, y] = this.grid.centre(this.randomOpenCell());
    this.state.players.set(client.sessionId, Object.assign(new Player(), { x, y }));
    // The last accepted position and claimed time, and the promise chain
    // that checks this player's moves one at a time, in order.
    client.userData = {
      last: [x, y, 0], joinedAt: Date.now(), checking: Promise.resolve(), pending: 0,
    };
    client.send('spawn', { x, y });
  }

  onLeave(client) {
    this.state.players.delete(client.sessionId);
  }

  async onDispose() {
    if (this.pathd) this.pathd.close();
  }

  // ---- NPCs -------------------------------------------------------------------

  tick(dt) {
    const started = performance.now();
    if (this.lastTick !== null) this.stats.tickGapMs.push(started - this.lastTick);
    this.lastTick = started;
    this.stats.ticks++;
    const now = Date.now();
    const due = [];
    for (const npc of this.npcs) {
      this.walk(npc, dt / 1000);
      if (now >= npc.nextRepath && !npc.asking) {
        due.push(npc);
        npc.nextRepath = now + this.repathMs;
      }
      if (now - npc.pathAt > this.stats.npcPathless) this.stats.npcPathless = now - npc.pathAt;
    }
    if (this.paused) return this.stats.tickMs.push(performance.now() - started);
    for (let i = 0; i < due.length; i += PATHS_PER_BATCH) this.repath(due.slice(i, i + PATHS_PER_BATCH), now);
    this.stats.tickMs.push(performance.now() - started);
  }

  walk(npc, seconds) {
    let budget = NPC_SPEED * seconds * this.grid.cellSize;
    while (npc.path && npc.idx < npc.path.length && budget > 0) {
      const [tx, ty] = npc.path[npc.idx];
      const d = Math.hypot(tx - npc.x, ty - npc.y);
      if (d <= budget) {
        npc.x = tx;
        npc.y = ty;
        npc.idx++;
        budget -= d;
      } else {
        npc.x += ((tx - npc.x) * budget) / d;
        npc.y += ((ty - npc.y) * budget) / d;
        budget = 0;
      }
    }
    const [tx, ty] = npc.path && npc.idx < npc.path.length ? npc.path[npc.idx] : [npc.x, npc.y];
    const shown = this.state.npcs.get(npc.id);
    // Schema sends a field only when its value changes.
    if (shown.tx !== Math.fround(tx)) shown.tx = tx;
    if (shown.ty !== Math.fround(ty)) shown.ty = ty;
  }

  /* One Batch of FindPath items for these NPCs, from the cell each stands
   * in to a random open cell. A failed batch (pathd down, timeout) leaves
   * every NPC on its old path; a failed item leaves that NPC on its own. */
  repath(npcs, now) {
    if (!this.pathd) {
      // Baseline room: straight to the goal, no pathd.
      for (const npc of npcs) {
        npc.path = [this.grid.centre(this.randomOpenCell())];
        npc.idx = 0;
        npc.pathAt = now;
      }
      return;
    }
    const items = npcs.map((npc) => query('findPath', this.scene, this.grid.cellAt(npc.x, npc.y),
      this.randomOpenCell(), { wantWorld: true }));
    npcs.forEach((npc) => { npc.asking = true; });
    const sent = performance.now();
    this.stats.batches++;
    this.stats.batchItems += items.length;
    this.pathd.send('batch', items).promise.then((answer) => {
      this.stats.batchRttMs.push(performance.now() - sent);
      // pathd's own time for it (Response.server_us): the rest of the round
      // trip is the network and this process's event loop.
      this.stats.batchServerMs.push(answer.timing.serverUs / 1000);
      if (answer.status !== 'OK') {
        if (answer.status === 'OVERLOADED') this.stats.overloaded++;
        this.stats.batchFailed++;
        return;
      }
      this.stats.batchOk++;
      answer.items.forEach((item, i) => {
        if (item.status === 'OVERLOADED') this.stats.overloaded++;
        if (item.status !== 'OK' || item.world.length === 0) return;
        npcs[i].path = item.world;
        npcs[i].idx = 0;
        npcs[i].pathAt = Date.now();
      });
    }, (err) => {
      this.stats.batchFailed++;
      if (err.sent === false) this.stats.unsent += 1 + items.length;
    }).finally(() => {
      npcs.forEach((npc) => { npc.asking = false; });
    });
  }

  // ---- players ------------------------------------------------------------------

  /* A claimed move { x, y, t, seq }: world position, the player's time in
   * seconds since joining. Checked after the player's previous move. */
  onMove(client, claim) {
    const user = client.userData;
    if (!user) return;
    if (user.pending >= MAX_PENDING_MOVES) {
      this.stats.moves++;
      this.refuse(client, claim, 'flooding');
      return;
    }
    user.pending++;
    user.checking = user.checking.then(() => this.check(client, claim)).catch((err) => {
      // Never let a check's failure escape into Colyseus: refuse instead.
      this.refuse(client, claim, `unchecked: ${err.message}`);
    }).finally(() => { user.pending--; });
  }

  async check(client, claim) {
    const user = client.userData;
    this.stats.moves++;
    const ok = claim && [claim.x, claim.y, claim.t].every((v) => typeof v === 'number' && Number.isFinite(v));
    if (!ok) return this.refuse(client, claim, 'malformed');
    const [lx, ly, lt] = user.last;
    if (claim.t > (Date.now() - user.joinedAt) / 1000 + CLOCK_SLACK_S) return this.refuse(client, claim, 'clock_ahead');
    if (!this.pathd) return this.accept(client, claim);
    let answers;
    this.stats.checks++;
    try {
      answers = await this.pathd.batch([
        query('validateMove', this.scene, [[lx, ly, lt], [claim.x, claim.y, claim.t]], this.maxSpeed, { world: true }),
        query('raycast', this.scene, [lx, ly], [claim.x, claim.y], { world: true }),
      ]);
    } catch (err) {
      this.stats.unchecked++;
      if (err.sent === false) this.stats.unsent += 3;
      return this.refuse(client, claim, 'unchecked');
    }
    const [valid, ray] = answers;
    if (valid.status !== 'OK' || ray.status !== 'OK') {
      return this.refuse(client, claim, valid.status !== 'OK' ? valid.status : ray.status);
    }
    if (!valid.valid) return this.refuse(client, claim, valid.reason);
    if (!ray.clear) return this.refuse(client, claim, 'wall');
    return this.accept(client, claim);
  }

  accept(client, claim) {
    const user = client.userData;
    this.stats.accepted++;
    this.acceptedMoves.push([[user.last[0], user.last[1]], [claim.x, claim.y], claim.t - user.last[2]]);
    user.last = [claim.x, claim.y, claim.t];
    const p = this.state.players.get(client.sessionId);
    if (p) Object.assign(p, { x: claim.x, y: claim.y });
    client.send('moved', { seq: claim.seq, ok: true, x: claim.x, y: claim.y });
  }

  /* Snaps the player back to its last accepted position. */
  refuse(client, claim, reason) {
    const user = client.userData;
    this.stats.rejected++;
    this.stats.reasons[reason] = (this.stats.reasons[reason] || 0) + 1;
    const [x, y] = user.last;
    const p = this.state.players.get(client.sessionId);
    if (p) Object.assign(p, { x, y });
    client.send('moved', { seq: claim && claim.seq, ok: false, reason, x, y });
  }
}

module.exports = { PathdRoom, TICK_MS, DEFAULT_MAX_SPEED, DEFAULT_MAP };
