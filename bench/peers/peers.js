#!/usr/bin/env node
/*
 * peers.js - times PathFinding.js (the npm package "pathfinding") on Moving AI
 * scenario files, so `make bench` can put pathd beside a widely used peer on
 * the very same queries.
 *
 * Finders, both with PF.DiagonalMovement.OnlyWhenNoObstacles (a diagonal step
 * needs both orthogonal neighbours free: the Moving AI rule, no corner
 * cutting) and the octile heuristic:
 *   astar - PF.AStarFinder
 *   jps   - PF.JumpPointFinder
 *
 * PathFinding.js writes search state into the grid's nodes, so every query
 * needs a fresh grid; its README says to clone the grid before each findPath
 * call, and that clone is part of what a PathFinding.js query costs. Each
 * query is timed both ways from the same run: findPath alone (clone to
 * findPath's return) and clone plus findPath as one interval (before the
 * clone to findPath's return). Both are reported per map.
 * Before a map's timed queries, its first --warmup queries run untimed with
 * every finder, so the JIT has compiled the finders' hot loops and the heap
 * has grown to that map's clone size: the steady state, as for the C tools.
 * Every path is checked like pathd-bench checks ours (unit steps, free cells,
 * no corner cutting, start and goal, cost within the scenario's precision);
 * failures are counted as mismatches and reported, not hidden.
 *
 * Usage: node peers.js [--every K] [--last N] [--maps DIR] [--warmup N]
 *                      [--finders astar,jps] FILE.map.scen...
 * Prints JSON on stdout; progress and mismatches go to stderr.
 */
'use strict';

const fs = require('fs');
const path = require('path');
const PF = require('pathfinding');

const SQRT2 = Math.SQRT2;
/* Same precision rules as bench/pathd_bench.c (see pd__scen_tolerance there):
 * half a unit in the last printed digit, or in the 6th significant digit for
 * "%g" files, plus an allowance for the generators' own arithmetic. */
const G_SIGNIFICANT_DIGITS = 6;
const SCEN_GENERATOR_SQRT2 = 1.414213562;
const SCEN_G_GENERATOR_REL = Math.pow(2, -24);
const TOL_SLACK = 1e-9;
/* Queries of each map run untimed (per finder) before that map is timed. */
const DEFAULT_WARMUP = 10;
/* Mismatches described on stderr per file and finder. */
const MAX_REPORTED_MISMATCHES = 5;

function usage(out) {
  out.write('usage: node peers.js [--every K] [--last N] [--maps DIR] [--warmup N]\n' +
            '                     [--finders astar,jps] FILE.map.scen...\n');
}

function die(msg) {
  process.stderr.write('peers.js: ' + msg + '\n');
  process.exit(2);
}

function parseArgs(argv) {
  const opt = { every: 1, last: 0, maps: null, warmup: DEFAULT_WARMUP,
                finders: ['astar', 'jps'], files: [] };
  const count = (flag, v, min) => {
    if (v === undefined || !/^\d+$/.test(v) || Number(v) < min)
      die(`${flag} needs a whole number >= ${min}, got '${v === undefined ? '' : v}'`);
    return Number(v);
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--help' || a === '-h') { usage(process.stdout); process.exit(0); }
    else if (a === '--every') opt.every = count(a, argv[++i], 1);
    else if (a === '--last') opt.last = count(a, argv[++i], 1);
    else if (a === '--warmup') opt.warmup = count(a, argv[++i], 0);
    else if (a === '--maps') { opt.maps = argv[++i]; if (!opt.maps) die('--maps needs a directory'); }
    else if (a === '--finders') {
      opt.finders = (argv[++i] || '').split(',').filter(Boolean);
      if (!opt.finders.length || opt.finders.some(f => !FINDERS[f]))
        die(`--finders takes a comma list of: ${Object.keys(FINDERS).join(', ')}`);
    } else if (a.startsWith('-') && a !== '-') die(`unknown option '${a}'`);
    else opt.files.push(a);
  }
  if (!opt.files.length) { usage(process.stderr); die('no scenario files given'); }
  return opt;
}

const FINDERS = {
  astar: () => new PF.AStarFinder({
    diagonalMovement: PF.DiagonalMovement.OnlyWhenNoObstacles,
    heuristic: PF.Heuristic.octile,
  }),
  jps: () => PF.JumpPointFinder({
    diagonalMovement: PF.DiagonalMovement.OnlyWhenNoObstacles,
    heuristic: PF.Heuristic.octile,
  }),
};

/* Precision facts about the printed text of an optimal length. */
function scanLength(text) {
  const m = /^\+?(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/.exec(text);
  if (!m || (m[1] + (m[2] || '')).length === 0) return null;
  const intPart = m[1], frac = m[2] || '', exp = m[3] ? Number(m[3]) : 0;
  const digits = intPart + frac;
  const firstNonZero = digits.search(/[1-9]/);
  const sig = firstNonZero < 0 ? 0 : digits.length - firstNonZero;
  return {
    unit: exp - frac.length,
    sig,
    isZero: firstNonZero < 0,
    lead: firstNonZero < 0 ? 0 : intPart.length - 1 - firstNonZero + exp,
  };
}

function parseScen(file) {
  let text;
  try { text = fs.readFileSync(file, 'latin1'); } catch (e) { die(`cannot read ${file}: ${e.message}`); }
  const lines = text.split('\n');
  const qs = [];
  let haveVersion = false;
  lines.forEach((raw, idx) => {
    const fields = raw.replace(/\r$/, '').trim().split(/[ \t]+/).filter(Boolean);
    if (!fields.length) return;
    const where = `${file}:${idx + 1}`;
    if (!haveVersion) {
      if (fields.length !== 2 || fields[0] !== 'version' || !['1', '1.0'].includes(fields[1]))
        die(`${where}: expected 'version 1' as the first line`);
      haveVersion = true;
      return;
    }
    if (fields.length !== 9) die(`${where}: expected 9 fields, got ${fields.length}`);
    const ints = [0, 2, 3, 4, 5, 6, 7].map(i => fields[i]);
    if (!ints.every(v => /^-?\d+$/.test(v))) die(`${where}: non-integer field`);
    const [, w, h, sx, sy, gx, gy] = ints.map(Number);
    const scan = scanLength(fields[8]);
    if (!scan) die(`${where}: optimal_length '${fields[8]}' is not a decimal number`);
    if ([sx, gx].some(v => v < 0 || v >= w) || [sy, gy].some(v => v < 0 || v >= h))
      die(`${where}: start or goal outside the ${w}x${h} map`);
    qs.push({ line: idx + 1, map: path.basename(fields[1]), w, h, sx, sy, gx, gy,
              optimal: Number(fields[8]), scan });
  });
  if (!haveVersion) die(`${file}: empty file (expected 'version 1')`);
  const gStyle = qs.reduce((m, q) => Math.max(m, q.scan.sig), 0) === G_SIGNIFICANT_DIGITS;
  for (const q of qs) {
    let tol = 0.5 * Math.pow(10, q.scan.unit);
    let generator;
    if (gStyle) {
      const gTol = q.scan.isZero ? 0 : 0.5 * Math.pow(10, q.scan.lead - (G_SIGNIFICANT_DIGITS - 1));
      tol = Math.min(tol, gTol);
      generator = q.optimal * SCEN_G_GENERATOR_REL;
    } else {
      generator = q.optimal * (1 - SCEN_GENERATOR_SQRT2 / SQRT2);
    }
    q.tolerance = tol + generator + TOL_SLACK;
  }
  return qs;
}

function findMap(opt, scenFile, name) {
  const dir = path.dirname(scenFile);
  const tried = [];
  if (opt.maps) tried.push(path.join(opt.maps, name));
  tried.push(path.join(dir, name), path.join(dir, '..', 'maps', name));
  for (const p of tried) if (fs.existsSync(p)) return p;
  die(`map ${name} (for ${scenFile}) not found; looked in: ${tried.join(', ')}`);
}

/* Moving AI .map -> { width, height, free(x, y), grid: PF.Grid }. */
function loadMap(file) {
  const lines = fs.readFileSync(file, 'latin1').split('\n').map(l => l.replace(/\r$/, ''));
  let width = -1, height = -1, i = 0;
  for (; i < lines.length; i++) {
    const f = lines[i].trim().split(/\s+/);
    if (f[0] === 'map') { i++; break; }
    if (f[0] === 'height') height = Number(f[1]);
    else if (f[0] === 'width') width = Number(f[1]);
  }
  if (!(width > 0 && height > 0)) die(`${file}: bad header`);
  const rows = lines.slice(i, i + height);
  if (rows.length !== height || rows.some(r => r.length < width)) die(`${file}: short map`);
  const passable = c => c === '.' || c === 'G' || c === 'S';
  const matrix = rows.map(r => Array.from(r.slice(0, width), c => (passable(c) ? 0 : 1)));
  const free = (x, y) => x >= 0 && y >= 0 && x < width && y < height && matrix[y][x] === 0;
  return { width, height, free, grid: new PF.Grid(width, height, matrix) };
}

/* Returns [reason or null, cost]. */
function checkPath(map, q, p) {
  if (!p.length) return ['no path found', 0];
  const [x0, y0] = p[0], [xn, yn] = p[p.length - 1];
  if (x0 !== q.sx || y0 !== q.sy) return ['path does not begin at the start', 0];
  if (xn !== q.gx || yn !== q.gy) return ['path does not end at the goal', 0];
  let cost = 0;
  for (let i = 0; i < p.length; i++) {
    const [x, y] = p[i];
    if (!map.free(x, y)) return ['path visits a blocked cell', cost];
    if (i === 0) continue;
    const dx = x - p[i - 1][0], dy = y - p[i - 1][1];
    if (Math.abs(dx) > 1 || Math.abs(dy) > 1 || (dx === 0 && dy === 0))
      return ['path has a step that is not to a neighbouring cell', cost];
    if (dx && dy) {
      if (!map.free(p[i - 1][0] + dx, p[i - 1][1]) || !map.free(p[i - 1][0], p[i - 1][1] + dy))
        return ['path cuts a corner', cost];
      cost += SQRT2;
    } else {
      cost += 1;
    }
  }
  if (!(Math.abs(cost - q.optimal) <= q.tolerance)) return ['cost differs from the optimal length', cost];
  return [null, cost];
}

function median(v) {
  if (!v.length) return 0;
  const s = Float64Array.from(v).sort();
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}
const mean = v => (v.length ? v.reduce((a, b) => a + b, 0) / v.length : 0);
const micros = (t0, t1) => Number(t1 - t0) / 1000;

function selectQueries(opt, qs) {
  const first = opt.last > 0 && opt.last < qs.length ? qs.length - opt.last : 0;
  const out = [];
  for (let i = first; i < qs.length; i += opt.every) out.push(qs[i]);
  return out;
}

function runQuery(finder, map, q) {
  const t0 = process.hrtime.bigint();
  const grid = map.grid.clone();
  const t1 = process.hrtime.bigint();
  const p = finder.findPath(q.sx, q.sy, q.gx, q.gy, grid);
  const t2 = process.hrtime.bigint();
  return { cloneUs: micros(t0, t1), findUs: micros(t1, t2), withCloneUs: micros(t0, t2), path: p };
}

function main() {
  const opt = parseArgs(process.argv.slice(2));
  const finders = Object.fromEntries(opt.finders.map(f => [f, FINDERS[f]()]));
  const version = require('pathfinding/package.json').version;
  const results = new Map();

  for (const file of opt.files) {
    const qs = selectQueries(opt, parseScen(file));
    let map = null, mapName = '';
    const reported = Object.fromEntries(opt.finders.map(f => [f, 0]));
    for (const q of qs) {
      if (!map || mapName !== q.map) {
        map = loadMap(findMap(opt, file, q.map));
        mapName = q.map;
        /* The warm-up queries: this map's first ones (they must fit it). */
        for (const f of opt.finders)
          for (const wq of qs.filter(o => o.map === q.map).slice(0, opt.warmup))
            if (map.width === wq.w && map.height === wq.h) runQuery(finders[f], map, wq);
      }
      if (map.width !== q.w || map.height !== q.h)
        die(`${file}:${q.line}: scenario says ${q.map} is ${q.w}x${q.h}, the map is ${map.width}x${map.height}`);
      const key = q.map.replace(/\.map$/, '');
      if (!results.has(key)) {
        results.set(key, { queries: 0, finders: Object.fromEntries(
          opt.finders.map(f => [f, { find: [], clone: [], withClone: [], mismatches: 0 }])) });
      }
      const r = results.get(key);
      r.queries++;
      for (const f of opt.finders) {
        const run = runQuery(finders[f], map, q);
        const s = r.finders[f];
        s.find.push(run.findUs);
        s.clone.push(run.cloneUs);
        s.withClone.push(run.withCloneUs);
        const [reason, cost] = checkPath(map, q, run.path);
        if (reason) {
          s.mismatches++;
          if (reported[f]++ < MAX_REPORTED_MISMATCHES)
            process.stderr.write(`peers.js: ${f} mismatch: ${file}:${q.line} (${q.sx},${q.sy})->` +
                                 `(${q.gx},${q.gy}): ${reason} [cost ${cost.toFixed(8)}, ` +
                                 `optimal ${q.optimal}]\n`);
        }
      }
    }
    process.stderr.write(`peers.js: ${path.basename(file)}: ${qs.length} queries\n`);
  }

  const out = {
    tool: 'peers.js',
    library: `pathfinding@${version}`,
    node: process.version,
    timing: 'process.hrtime around findPath (median_us), and around grid clone + findPath ' +
            'as one interval (median_with_clone_us)',
    every: opt.every, last: opt.last, warmup: opt.warmup,
    maps: [...results].map(([name, r]) => {
      const entry = { map: name, queries: r.queries };
      for (const [f, s] of Object.entries(r.finders)) {
        entry[f] = {
          median_us: +median(s.find).toFixed(3),
          mean_us: +mean(s.find).toFixed(3),
          median_clone_us: +median(s.clone).toFixed(3),
          median_with_clone_us: +median(s.withClone).toFixed(3),
          mean_with_clone_us: +mean(s.withClone).toFixed(3),
          mismatches: s.mismatches,
        };
      }
      return entry;
    }),
  };
  process.stdout.write(JSON.stringify(out, null, 2) + '\n');
}

main();
