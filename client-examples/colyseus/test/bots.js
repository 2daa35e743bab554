'use strict';
/*
 * bots.js - players driven by code, over colyseus.js as a browser game
 * would connect: honest walkers and three kinds of cheaters. They read the
 * Tiled map themselves (tiled.js, no pathd), so they know which claims are
 * honest and which are cheats, and tally what the room did with each.
 *
 * Every bot waits for the answer to its move before the next. Honest steps
 * go from a cell's centre to an open 4-neighbour's centre, at most 1 cell
 * per HONEST_STEP_MS (under 3 cells/s; the room allows 4). A cheater walks
 * honestly and cheats every third move:
 *   wall      into the wall cell beside it, or through it to the open cell
 *             beyond at a legal speed;
 *   speed     up to 6 open cells straight, CHEAT_GAP_MS after an accepted step;
 *   teleport  to an open cell at least 6 cells away, a step's time later.
 * A speed or teleport claim counts as a cheat only if its claimed speed,
 * from the last accepted move, is above 1.5 times the room's limit (a bot
 * whose timer fired late on a loaded machine may find none: it then walks
 * honestly instead), so what is a cheat does not depend on the machine.
 */
const { DEFAULT_MAX_SPEED } = require('../src/PathdRoom');

const HONEST_STEP_MS = 350;
const CHEAT_GAP_MS = 100;
const DIRS = [[1, 0], [-1, 0], [0, 1], [0, -1]];

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

class Bot {
  constructor(kind, room, grid, rand) {
    Object.assign(this, { kind, room, grid, rand });
    this.tally = { honest: 0, honestRejected: 0, cheats: 0, cheatsAccepted: 0, unchecked: 0, reasons: {} };
    this.seq = 0;
    this.waiters = new Map();
    this.lastAccepted = true;
    this.lastT = 0; // the claimed time of the last accepted move
    this.spawned = new Promise((resolve) => {
      room.onMessage('spawn', ({ x, y }) => {
        this.pos = [x, y];
        this.joined = Date.now();
        resolve();
      });
    });
    room.onMessage('moved', (m) => {
      const w = this.waiters.get(m.seq);
      if (w) {
        this.waiters.delete(m.seq);
        w(m);
      }
    });
  }

  cell() {
    return this.grid.cellAt(this.pos[0], this.pos[1]);
  }

  pick(list) {
    return list[Math.floor(this.rand() * list.length)];
  }

  honestTarget() {
    const [x, y] = this.cell();
    const open = DIRS.map(([dx, dy]) => [x + dx, y + dy]).filter((c) => !this.grid.blocked(c));
    return open.length ? this.grid.centre(this.pick(open)) : null;
  }

  now() {
    return (Date.now() - this.joined) / 1000;
  }

  /* Is a claim of `to` now clearly too fast? */
  tooFast(to) {
    const dt = this.now() - this.lastT;
    return Math.hypot(to[0] - this.pos[0], to[1] - this.pos[1]) / dt > 1.5 * DEFAULT_MAX_SPEED;
  }

  /* The cheat this bot would make now, or null when none fits here. */
  cheatTarget() {
    const [x, y] = this.cell();
    if (this.kind === 'wall') {
      const dirs = DIRS.filter(([dx, dy]) => this.grid.blocked([x + dx, y + dy])
        && x + dx >= 0 && y + dy >= 0 && x + dx < this.grid.width && y + dy < this.grid.height);
      if (!dirs.length) return null;
      const [dx, dy] = this.pick(dirs);
      const beyond = [x + 2 * dx, y + 2 * dy];
      // Two cells need 0.5 s at the room's 4 cells/s: wait 0.7 s.
      return this.grid.blocked(beyond) ? { to: this.grid.centre([x + dx, y + dy]), waitMs: HONEST_STEP_MS }
        : { to: this.grid.centre(beyond), waitMs: 700 };
    }
    if (this.kind === 'speed') {
      if (!this.lastAccepted) return null;
      // The longest straight run of open cells, up to 6.
      let best = null;
      for (const [dx, dy] of DIRS) {
        let k = 0;
        while (k < 6 && !this.grid.blocked([x + (k + 1) * dx, y + (k + 1) * dy])) k++;
        if (k > 0 && (!best || k > best.k)) best = { k, cell: [x + k * dx, y + k * dy] };
      }
      return best && { to: this.grid.centre(best.cell), waitMs: CHEAT_GAP_MS };
    }
    const far = this.grid.open.filter(([cx, cy]) => Math.hypot(cx - x, cy - y) >= 6);
    return { to: this.grid.centre(this.pick(far)), waitMs: HONEST_STEP_MS };
  }

  async claim(to, cheat) {
    const seq = ++this.seq;
    const answer = new Promise((resolve) => this.waiters.set(seq, resolve));
    const t = this.now();
    this.room.send('move', { seq, x: to[0], y: to[1], t });
    const m = await answer;
    this.pos = [m.x, m.y]; // accepted, or snapped back
    this.lastAccepted = m.ok;
    if (m.ok) this.lastT = t;
    if (!m.ok && m.reason === 'unchecked') {
      this.tally.unchecked++;
      return;
    }
    if (cheat) {
      this.tally.cheats++;
      if (m.ok) this.tally.cheatsAccepted++;
    } else {
      this.tally.honest++;
      if (!m.ok) this.tally.honestRejected++;
    }
    if (!m.ok) this.tally.reasons[m.reason] = (this.tally.reasons[m.reason] || 0) + 1;
  }

  /* Moves until stop() says so. */
  async run(stop) {
    await this.spawned;
    for (let n = 1; !stop(); n++) {
      const cheat = this.kind !== 'honest' && n % 3 === 0 ? this.cheatTarget() : null;
      if (cheat) {
        await sleep(cheat.waitMs);
        // Timed cheats are re-checked after the wait: a late timer can make
        // them legal, and then they are not made at all.
        if (this.kind === 'wall' || this.tooFast(cheat.to)) {
          await this.claim(cheat.to, true);
          continue;
        }
      }
      await sleep(HONEST_STEP_MS);
      const to = this.honestTarget();
      if (to) await this.claim(to, false);
    }
  }
}

/* A seeded generator (an LCG), so a run's bots can be replayed. */
function seededRandom(seed) {
  let a = seed;
  return () => {
    a = (a * 1103515245 + 12345) % 2147483648;
    return a / 2147483648;
  };
}

module.exports = { Bot, seededRandom };
