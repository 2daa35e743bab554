#!/usr/bin/env node
/*
 * report.js - joins one `make bench` run into a single table.
 *
 * Input: the run directory run-bench.sh fills: ours-P.json (pathd-bench
 * --json, one per pass P), yardstick-P/MAP.tsv (yardstick output, "i
 * expanded nanos plen pcost opt", one directory per pass) and peers.json
 * (peers.js). All ran on the same subset scenario files, so per-map medians
 * compare directly. For ours and the yardstick a map's figure is the median
 * over passes of the per-pass median. Ratios are "their median / our
 * median": above 1 means pathd is faster.
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

function median(v) {
  if (!v.length) return NaN;
  const s = Float64Array.from(v).sort();
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}
const geomean = v => Math.exp(v.reduce((a, x) => a + Math.log(x), 0) / v.length);

function yardstickMedian(file) {
  const rows = fs.readFileSync(file, 'utf8').trim().split('\n').slice(1).map(l => l.split('\t'));
  return { queries: rows.length, median_us: median(rows.map(r => Number(r[2]) / 1000)) };
}

/* Passes numbered 1..n, found by the files run-bench.sh writes. */
function passes(dir) {
  const n = fs.readdirSync(dir).filter(f => /^ours-\d+\.json$/.test(f)).length;
  if (!n) throw new Error(`no ours-*.json in ${dir}`);
  return Array.from({ length: n }, (_, i) => i + 1);
}

function fmt(v, digits) {
  return Number.isFinite(v) ? v.toFixed(digits) : '-';
}

function main() {
  const dir = process.argv[2];
  if (!dir) {
    process.stderr.write('usage: node report.js RUN_DIR\n');
    process.exit(2);
  }
  const runs = passes(dir).map(p => ({
    ours: JSON.parse(fs.readFileSync(path.join(dir, `ours-${p}.json`), 'utf8')),
    yardDir: path.join(dir, `yardstick-${p}`),
    jps: fs.existsSync(path.join(dir, `ours-jps-${p}.json`))
      ? JSON.parse(fs.readFileSync(path.join(dir, `ours-jps-${p}.json`), 'utf8')) : null,
  }));
  const jpsMedian = name => {
    const per = runs.filter(r => r.jps).map(r => r.jps.maps.find(m => m.map === name))
      .filter(Boolean).map(m => m.median_us);
    return per.length ? median(per) : NaN;
  };
  const ours = runs[0].ours;
  const peers = JSON.parse(fs.readFileSync(path.join(dir, 'peers.json'), 'utf8'));
  const peerByMap = new Map(peers.maps.map(m => [m.map, m]));
  const oursMedian = name => median(runs.map(r => r.ours.maps.find(m => m.map === name).median_us));
  /* Our mismatches: the most any pass had (the search is deterministic). */
  const mismatches = name => Math.max(...runs.map(r => r.ours.maps.find(m => m.map === name).mismatches));
  const yardMedian = name => {
    const per = runs.map(r => path.join(r.yardDir, `${name}.tsv`)).filter(f => fs.existsSync(f))
      .map(yardstickMedian);
    return per.length ? { queries: per[0].queries, median_us: median(per.map(y => y.median_us)) } : null;
  };

  const cols = ['map', 'queries', 'ours_us', 'yard_us', 'pf_astar_us', 'pf_jps_us',
                'pf_astar/ours', 'yard/ours', '+clone/ours', 'mismatch o/a/j',
                'jps_us', 'pf_astar/jps', 'pf_jps/jps'];
  const widths = [16, 7, 10, 10, 12, 11, 13, 9, 11, 14, 9, 12, 10];
  const line = cells => cells.map((c, i) => (i === 0 ? String(c).padEnd(widths[i])
                                                     : String(c).padStart(widths[i]))).join(' ');
  console.log(line(cols));

  const rows = [];
  for (const m of ours.maps) {
    const y = yardMedian(m.map);
    const p = peerByMap.get(m.map);
    const pa = p && p.astar ? p.astar : null, pj = p && p.jps ? p.jps : null;
    const row = {
      map: m.map, family: familyOf(m.map), queries: m.queries, ours: oursMedian(m.map),
      yard: y ? y.median_us : NaN, pfA: pa ? pa.median_us : NaN, pfJ: pj ? pj.median_us : NaN,
    };
    row.ratioA = row.pfA / row.ours;
    row.ratioY = row.yard / row.ours;
    row.ratioClone = (pa ? pa.median_with_clone_us : NaN) / row.ours;
    row.jps = jpsMedian(m.map);
    row.ratioAJ = row.pfA / row.jps;
    row.ratioJJ = row.pfJ / row.jps;
    rows.push(row);
    if (y && y.queries !== m.queries) console.log(`# warning: yardstick ran ${y.queries} queries on ${m.map}`);
    if (p && p.queries !== m.queries) console.log(`# warning: peers ran ${p.queries} queries on ${m.map}`);
    console.log(line([m.map, m.queries, fmt(row.ours, 1), fmt(row.yard, 1), fmt(row.pfA, 1),
                      fmt(row.pfJ, 1), fmt(row.ratioA, 1), fmt(row.ratioY, 2), fmt(row.ratioClone, 1),
                      `${mismatches(m.map)}/${pa ? pa.mismatches : '-'}/${pj ? pj.mismatches : '-'}`,
                      fmt(row.jps, 1), fmt(row.ratioAJ, 1), fmt(row.ratioJJ, 1)]));
  }

  console.log('');
  console.log('# per family, geometric mean over its maps of the per-map median ratios');
  for (const [family] of FAMILIES) {
    const fr = rows.filter(r => r.family === family && Number.isFinite(r.ratioA));
    if (!fr.length) continue;
    const fj = fr.filter(r => Number.isFinite(r.ratioAJ));
    console.log(`#   ${family.padEnd(18)} PF-A*/ours ${fmt(geomean(fr.map(r => r.ratioA)), 1).padStart(7)}` +
                `   yardstick/ours ${fmt(geomean(fr.filter(r => Number.isFinite(r.ratioY)).map(r => r.ratioY)), 2)}` +
                (fj.length ? `   PF-A*/jps ${fmt(geomean(fj.map(r => r.ratioAJ)), 1)}` +
                             `   PF-JPS/jps ${fmt(geomean(fj.map(r => r.ratioJJ)), 1)}` : ''));
  }
  const bar = rows.filter(r => r.family === 'Dragon Age' || r.family === 'StarCraft');
  if (bar.length) {
    const worst = bar.reduce((a, r) => (r.ratioA < a.ratioA ? r : a));
    const ok = bar.every(r => r.ratioA >= PF_ASTAR_BAR);
    console.log(`# Dragon Age + StarCraft: lowest PF-A*/ours (A*) ratio ${fmt(worst.ratioA, 1)} (${worst.map});` +
                ` bar >= ${PF_ASTAR_BAR}: ${ok ? 'met' : 'NOT met'}`);
    const bj = bar.filter(r => Number.isFinite(r.ratioAJ));
    if (bj.length) {
      const worstJ = bj.reduce((a, r) => (r.ratioAJ < a.ratioAJ ? r : a));
      console.log(`# Dragon Age + StarCraft: lowest PF-A*/jps ratio ${fmt(worstJ.ratioAJ, 1)} (${worstJ.map});` +
                  ` >= ${PF_ASTAR_BAR}: ${bj.every(r => r.ratioAJ >= PF_ASTAR_BAR) ? 'yes' : 'no'}`);
    }
  }
  console.log('# +clone/ours: PF A* per query including the grid clone every PathFinding.js' +
              ' query needs (median of the sums) over ours; the bar uses pf_astar/ours');
  console.log(`# ${runs.length} passes of ours and the yardstick, 1 of PathFinding.js`);
  console.log(`# ours: ${ours.timing}; yardstick: nanos column (search + path walk);` +
              ` PF: ${peers.timing}; ${peers.library}, node ${peers.node}`);
  console.log(`# ours, per pass: ${runs.map(r => `${r.ours.passed} passed, ${r.ours.failed} failed`).join('; ')}`);
  if (runs.some(r => r.jps))
    console.log(`# jps (pathd-bench --algo jps), per pass: ` +
                `${runs.filter(r => r.jps).map(r => `${r.jps.passed} passed, ${r.jps.failed} failed`).join('; ')}`);
}

main();
