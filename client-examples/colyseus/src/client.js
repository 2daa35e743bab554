'use strict';
/*
 * client.js - a player in a terminal (README.md): joins the "pathd" room,
 * claims one honest step and one through a wall, and prints what the room
 * answered. A browser game does the same with colyseus.js.
 *
 *   node src/client.js [ws://localhost:2567]
 */
const { Client } = require('colyseus.js');

async function main() {
  const client = new Client(process.argv[2] || 'ws://localhost:2567');
  const room = await client.joinOrCreate('pathd');
  const spawned = new Promise((resolve) => room.onMessage('spawn', resolve));
  const answers = [];
  room.onMessage('moved', (m) => answers.push(m));
  const { x, y } = await spawned;
  console.log(`spawned at (${x}, ${y}); ${room.state.npcs.size} NPCs in the room`);
  const started = Date.now();
  const claim = (seq, to) => room.send('move', { seq, x: to[0], y: to[1], t: (Date.now() - started) / 1000 });
  await new Promise((resolve) => setTimeout(resolve, 500));
  claim(1, [x + 0.3, y]); // 0.3 cells in 0.5 s: fine unless a wall is that close
  await new Promise((resolve) => setTimeout(resolve, 100));
  claim(2, [x > 12 ? x - 10 : x + 10, y]); // 10 cells in 0.1 s: refused, snapped back
  await new Promise((resolve) => setTimeout(resolve, 500));
  for (const m of answers) console.log(JSON.stringify(m));
  await room.leave();
}

main().catch((err) => { console.error(err); process.exit(1); });
