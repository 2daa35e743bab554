'use strict';
/*
 * Asks pathd for a path across the demo town and prints its waypoints.
 *
 *   node example.js [HOST:PORT]
 *
 * The address defaults to $PATHD_ADDR, else 127.0.0.1:7420 (`make run`).
 * Install the pinned dependency first: `npm ci` in this directory.
 */
const { PathdClient } = require('./pathd-client');

async function main() {
  const addr = process.argv[2] || process.env.PATHD_ADDR || '127.0.0.1:7420';
  const client = new PathdClient(addr);
  try {
    const path = await client.findPath('town', [1, 1], [10, 5], { style: 'corners', wantWorld: true });
    console.log(`${path.status}: cost ${path.cost}, ${path.expansions} expansions, scene version ${path.version}`);
    path.waypoints.forEach(([x, y], i) => {
      const [wx, wy] = path.world[i];
      console.log(`  cell (${x}, ${y})  world (${wx}, ${wy})`);
    });
  } finally {
    client.close();
  }
}

main().catch((err) => {
  console.error(`no path: ${err.message}`);
  process.exitCode = 1;
});
