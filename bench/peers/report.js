#!/usr/bin/env node
/*
 * report.js - joins one `make bench` run into a single table.
 *
 * Input: the run directory run-bench.sh fills:
 *   ours-P.json, ours-jps-P.json  pathd-bench --warmup --json (A* and JPS), one
 *                                 per pass P: each map's queries already ran
 *                                 once untimed, so every entry is steady state;
 *   yardstick-P/MAP.tsv           yardstick output ("i expanded nanos plen pcost
 *                                 opt") on a file holding the subset twice: the
 *                                 second half of its rows is the steady-state
 *                                 copy;
 *   peers-P.json, peers-jps-P.json  peers.js, one per PathFinding.js pass and
 *                                 process (A* and JPS run in separate processes;
 *                                 an older run's single peers.json is read too).
 *                                 A finder's passes are the files that hold it.
 * All ran the same queries, so per-map medians compare directly. For every
 * tool a map's figure is the median over passes of the per-pass median.
 * Ratios are "their median / our median" (above 1 = pathd faster), or
 * "PF / yardstick" where said.
 *
 * PathFinding.js is given two ways: findPath alone, and grid clone plus
 * findPath timed as one interval (PathFinding.js writes search state into the
 * grid, so its documented per-query use clones the grid first).
 *
 * Usage: node report.js RUN_DIR
 */
'use strict';

const fs = require('fs');
const path = require('path');

/* Issue 2's bar: on the Dragon Age and StarCraft maps, our median must be at
 * least this many times lower than PathFinding.js AStarFinder's. */
const PF_ASTAR_BAR = 20;

const FAMILIES = [
  ['Dragon Age', /^(arena2|brc202d|den520d|hrt201n|lak303d|orz100d|ost003d)$/],
  ['StarCraft', /^(Aftershock|BlackLotus)$/],
  ["Baldur's Gate 512", /^AR\d+SR$/],
  ['Mazes 512', /^maze512-/],
  ['Rooms 512', /^8room_/],
  ['Random 512', /^random512-/],
  ['Street (Berlin)', /^Berlin_/],
];
const familyOf = name => (FAMILIES.find(([, re]) => re.test(name)) || ['other'])[0];

/* "PathFinding.js A*" over the yardstick per family, from the table in
 * ../shared/yardstick/README.md (median time per query, same run). */
const YARDSTICK_README_PF_ASTAR = {
  'Dragon Age': 14,
  "Baldur's Gate 512": 20,
  StarCraft: 14,
  'Mazes 512': 12,
  'Rooms 512': 9,
  'Random 512': 14,
  'Street (Berlin)': 21,
};
/* Issue 15's targets: our median over the yardstick's, per family, at most
 * this (0.8 x what the best online peer reaches; the issue's table). Mazes
 * are split by corridor width there. */
const TARGET_FAMILIES = [
  ['Dragon Age', /^(arena2|brc202d|den520d|hrt201n|lak303d|orz100d|ost003d)$/, 0.032],
  ["Baldur's Gate 512", /^AR\d+SR$/, 0.018],
  ['StarCraft', /^(Aftershock|BlackLotus)$/, 0.012],
  ['Maze 512, corridors 1 wide', /^maze512-1-/, 0.38],
  ['Maze 512, corridors 32 wide', /^maze512-32-/, 0.0016],
  ['Rooms 512', /^8room_/, 0.09],
  ['Random 512', /^random512-/, 0.45],
  ['Street (Berlin)', /^Berlin_/, 0.0068],
];

/* A family's measured ratio "reproduces" the README's when within this factor. */
const README_MATCH_FACTOR = 1.5;

function median(v) {
  if (!v.length) return NaN;
  const s = Float64Array.from(v).sort();
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}
const geomean = v => (v.length ? Math.exp(v.reduce((a, x) => a + Math.log(x), 0) / v.length) : NaN);
const finite = v => v.filter(Number.isFinite);

function fmt(v, digits) {
  return Number.isFinite(v) ? v.toFixed(digits) : '-';
}

const readJson = file => JSON.parse(fs.readFileSync(file, 'utf8'));

/* Passes numbered 1..n, found by the files run-bench.sh writes. */
function passNumbers(dir, re) {
  return fs.readdirSync(dir).map(f => re.exec(f)).filter(Boolean).map(m => Number(m[1]))
    .sort((a, b) => a - b);
}

/* The yardstick's steady-state median for one pass: the second copy's rows. */
function yardstickPass(file, queries, warnings) {
  const rows = fs.readFileSync(file, 'utf8').trim().split('\n').slice(1).map(l => l.split('\t'));
  let kept = rows;
  if (rows.length === 2 * queries) kept = rows.slice(queries);
  else warnings.add(`# warning: ${file} has ${rows.length} rows, not 2 x ${queries}: all used (cold queries included)`);
  return median(kept.map(r => Number(r[2]) / 1000));
}

function main() {
  const dir = process.argv[2];
  if (!dir) {
    process.stderr.write('usage: node report.js RUN_DIR\n');
    process.exit(2);
  }
  const warnings = new Set();
  const oursPasses = passNumbers(dir, /^ours-(\d+)\.json$/);
  if (!oursPasses.length) throw new Error(`no ours-*.json in ${dir}`);
  const runs = oursPasses.map(p => ({
    ours: readJson(path.join(dir, `ours-${p}.json`)),
    yardDir: path.join(dir, `yardstick-${p}`),
    jps: fs.existsSync(path.join(dir, `ours-jps-${p}.json`))
      ? readJson(path.join(dir, `ours-jps-${p}.json`)) : null,
  }));
  const peerFiles = fs.readdirSync(dir).filter(f => /^peers(-jps)?(-\d+)?\.json$/.test(f)).sort();
  const peers = peerFiles.map(f => readJson(path.join(dir, f)));
  const peerPasses = finder => peers.filter(p => p.maps.some(m => m[finder])).length;

  const entry = (json, name) => json.maps.find(m => m.map === name);
  const oursMedian = name => median(runs.map(r => entry(r.ours, name).median_us));
  const jpsMedian = name => median(runs.filter(r => r.jps).map(r => entry(r.jps, name))
    .filter(Boolean).map(m => m.median_us));
  /* Our mismatches: the most any pass had (the search is deterministic). */
  const mismatches = name => Math.max(...runs.map(r => entry(r.ours, name).mismatches));
  const yardMedian = (name, queries) => median(runs.map(r => path.join(r.yardDir, `${name}.tsv`))
    .filter(f => fs.existsSync(f)).map(f => yardstickPass(f, queries, warnings)));
  /* PathFinding.js: median over passes of a per-pass field, and the worst mismatch count. */
  const peerStat = (name, finder, field) => median(peers.map(p => entry(p, name))
    .filter(m => m && m[finder]).map(m => m[finder][field]));
  const peerMismatches = (name, finder) => {
    const per = peers.map(p => entry(p, name)).filter(m => m && m[finder]).map(m => m[finder].mismatches);
    return per.length ? Math.max(...per) : '-';
  };
  const peerQueries = name => peers.map(p => entry(p, name)).filter(Boolean).map(m => m.queries);

  const cols = ['map', 'queries', 'ours_us', 'yard_us', 'pfA_us', 'pfA+cl_us', 'pfJPS_us',
                'pfA/ours', 'pfA+cl/ours', 'yard/ours', 'pfA/yard', 'pfA+cl/yard', 'mism o/a/j',
                'jps_us', 'pfA/jps', 'pfJPS/jps'];
  const widths = [15, 7, 9, 9, 9, 10, 9, 8, 11, 9, 8, 11, 10, 8, 8, 9];
  const line = cells => cells.map((c, i) => (i === 0 ? String(c).padEnd(widths[i])
                                                     : String(c).padStart(widths[i]))).join(' ');
  console.log(line(cols));

  const rows = [];
  for (const r of runs)
    for (const json of [r.ours, r.jps].filter(Boolean))
      if (json.warmup !== true)
        warnings.add(`# warning: a pathd-bench ${json.algo} pass ran without --warmup (cold queries included)`);
  for (const m of runs[0].ours.maps) {
    const row = {
      map: m.map, family: familyOf(m.map), queries: m.queries, ours: oursMedian(m.map),
      yard: yardMedian(m.map, m.queries),
      pfA: peerStat(m.map, 'astar', 'median_us'),
      pfAC: peerStat(m.map, 'astar', 'median_with_clone_us'),
      pfJ: peerStat(m.map, 'jps', 'median_us'),
      jps: jpsMedian(m.map),
    };
    row.pfA_ours = row.pfA / row.ours;
    row.pfAC_ours = row.pfAC / row.ours;
    row.yard_ours = row.yard / row.ours;
    row.pfA_yard = row.pfA / row.yard;
    row.pfAC_yard = row.pfAC / row.yard;
    row.pfA_jps = row.pfA / row.jps;
    row.pfAC_jps = row.pfAC / row.jps;
    row.pfJ_jps = row.pfJ / row.jps;
    rows.push(row);
    for (const q of peerQueries(m.map))
      if (q !== m.queries) warnings.add(`# warning: peers ran ${q} queries on ${m.map}, ours ${m.queries}`);
    console.log(line([m.map, m.queries, fmt(row.ours, 1), fmt(row.yard, 1), fmt(row.pfA, 1),
                      fmt(row.pfAC, 1), fmt(row.pfJ, 1), fmt(row.pfA_ours, 1), fmt(row.pfAC_ours, 1),
                      fmt(row.yard_ours, 2), fmt(row.pfA_yard, 1), fmt(row.pfAC_yard, 1),
                      `${mismatches(m.map)}/${peerMismatches(m.map, 'astar')}/${peerMismatches(m.map, 'jps')}`,
                      fmt(row.jps, 1), fmt(row.pfA_jps, 1), fmt(row.pfJ_jps, 1)]));
  }
  for (const w of warnings) console.log(w);

  const families = FAMILIES.map(([family]) => [family, rows.filter(r => r.family === family)])
    .filter(([, fr]) => fr.length);
  const geo = (fr, key) => geomean(finite(fr.map(r => r[key])));

  console.log('');
  console.log('# per family, geometric mean over its maps of the per-map ratios');
  for (const [family, fr] of families) {
    console.log(`#   ${family.padEnd(18)} maps ${String(fr.length).padStart(2)}` +
                `   pfA/ours ${fmt(geo(fr, 'pfA_ours'), 1).padStart(6)}` +
                `   pfA+cl/ours ${fmt(geo(fr, 'pfAC_ours'), 1).padStart(6)}` +
                `   yard/ours ${fmt(geo(fr, 'yard_ours'), 2)}` +
                `   pfA/jps ${fmt(geo(fr, 'pfA_jps'), 1).padStart(6)}` +
                `   pfJPS/jps ${fmt(geo(fr, 'pfJ_jps'), 1).padStart(5)}`);
  }

  console.log('');
  console.log('# PathFinding.js A* / yardstick per family beside ../shared/yardstick/README.md' +
              ' (geometric mean over the family\'s maps, [lowest-highest map])');
  const matchCount = { find: 0, clone: 0 };
  for (const [family, fr] of families) {
    const readme = YARDSTICK_README_PF_ASTAR[family];
    const span = key => {
      const v = finite(fr.map(r => r[key]));
      return v.length ? `${fmt(geomean(v), 1)} [${fmt(Math.min(...v), 1)}-${fmt(Math.max(...v), 1)}]` : '-';
    };
    let verdict = '';
    if (readme) {
      const off = key => Math.abs(Math.log(geo(fr, key) / readme));
      const close = key => off(key) <= Math.log(README_MATCH_FACTOR);
      if (close('pfA_yard')) matchCount.find++;
      if (close('pfAC_yard')) matchCount.clone++;
      const nearer = off('pfA_yard') <= off('pfAC_yard') ? 'findPath alone' : 'clone+findPath';
      verdict = `   nearer: ${nearer}`;
    }
    console.log(`#   ${family.padEnd(18)} findPath ${span('pfA_yard').padEnd(17)}` +
                ` clone+findPath ${span('pfAC_yard').padEnd(19)} README ${readme || '-'}${verdict}`);
  }
  const withReadme = families.filter(([f]) => YARDSTICK_README_PF_ASTAR[f]).length;
  console.log(`#   within ${README_MATCH_FACTOR}x of the README: findPath alone in ${matchCount.find}` +
              ` of ${withReadme} families, clone+findPath in ${matchCount.clone} of ${withReadme}`);

  console.log('');
  console.log('# issue 15 targets: ours / yardstick per family (geometric mean over the family\'s maps' +
              ' of the per-map median ratios, this run); best = the lower of A* and JPS per map');
  console.log('#   ' + 'family'.padEnd(28) + 'maps' + 'A*/yard'.padStart(10) + 'JPS/yard'.padStart(10) +
              'best/yard'.padStart(11) + 'target'.padStart(11) + '  met');
  for (const [family, re, target] of TARGET_FAMILIES) {
    const fr = rows.filter(r => re.test(r.map));
    if (!fr.length) continue;
    for (const r of fr) {
      r.ours_yard = r.ours / r.yard;
      r.jps_yard = r.jps / r.yard;
      r.best_yard = Math.min(r.ours_yard, Number.isFinite(r.jps_yard) ? r.jps_yard : Infinity);
    }
    const best = geo(fr, 'best_yard');
    console.log('#   ' + family.padEnd(28) + String(fr.length).padStart(4) +
                fmt(geo(fr, 'ours_yard'), 4).padStart(10) + fmt(geo(fr, 'jps_yard'), 4).padStart(10) +
                fmt(best, 4).padStart(11) + `<= ${target}`.padStart(11) + (best <= target ? '  yes' : '  NO'));
  }

  console.log('');
  const bar = rows.filter(r => r.family === 'Dragon Age' || r.family === 'StarCraft');
  const barLine = (key, what, label) => {
    const v = bar.filter(r => Number.isFinite(r[key]));
    if (!v.length) return;
    const worst = v.reduce((a, r) => (r[key] < a[key] ? r : a));
    const ok = v.length === bar.length && v.every(r => r[key] >= PF_ASTAR_BAR);
    console.log(`# ${label}: Dragon Age + StarCraft, ${what} >= ${PF_ASTAR_BAR} on every map:` +
                ` ${ok ? 'met' : 'NOT met'}; lowest ${fmt(worst[key], 1)} (${worst.map})`);
  };
  barLine('pfA_ours', 'PF A* findPath / ours A*', 'issue 2 bar (A*), PF findPath alone');
  barLine('pfAC_ours', 'PF A* clone+findPath / ours A*', 'issue 2 bar (A*), PF clone+findPath');
  barLine('pfA_jps', 'PF A* findPath / ours JPS', 'for reference, our JPS, PF findPath alone');
  barLine('pfAC_jps', 'PF A* clone+findPath / ours JPS', 'for reference, our JPS, PF clone+findPath');

  console.log(`# ${runs.length} passes of ours and the yardstick (ours after an untimed` +
              ` pathd-bench --warmup run of each map's queries; the yardstick on the subset run` +
              ` twice, only the second copy counts); PathFinding.js ${peerPasses('astar')} passes of A*,` +
              ` ${peerPasses('jps')} of JPS (a fresh node process each,` +
              ` ${peers.length ? peers[0].warmup : '-'} untimed warm-up queries per map)`);
  console.log(`# ours: ${runs[0].ours.timing}; yardstick: nanos column (search + path walk)` +
              (peers.length ? `; PF: ${peers[0].timing}; ${peers[0].library}, node ${peers[0].node}` : ''));
  console.log(`# ours, per pass (timed run): ` +
              `${runs.map(r => `${r.ours.passed} passed, ${r.ours.failed} failed`).join('; ')}`);
  if (runs.some(r => r.jps))
    console.log(`# jps (pathd-bench --algo jps), per pass (timed run): ` +
                `${runs.filter(r => r.jps).map(r => `${r.jps.passed} passed, ${r.jps.failed} failed`).join('; ')}`);
}

main();
