'use strict';
/*
 * bot-worker.js - runs bots (bots.js) in a worker thread, so their
 * colyseus.js clients, which decode every state patch, do not share the
 * room's event loop: a room's players are elsewhere, and the benchmark
 * should time the room, not its players. workerData: { url, roomId, map,
 * counts }. Messages: it posts 'joined' once every bot is in; 'go'
 * { seconds } starts them; when they stop it posts { tallies } and exits.
 */
const { parentPort, workerData } = require('node:worker_threads');
const { Client } = require('colyseus.js');
const { TiledGrid } = require('../src/tiled');
const { Bot, seededRandom } = require('./bots');

async function main() {
  const { url, roomId, map, counts } = workerData;
  const grid = TiledGrid.load(map);
  const client = new Client(url);
  const bots = [];
  let seed = 7;
  for (const [kind, n] of Object.entries(counts)) {
    for (let i = 0; i < n; i++) bots.push(new Bot(kind, await client.joinById(roomId), grid, seededRandom(seed++)));
  }
  const go = new Promise((resolve) => parentPort.once('message', resolve));
  parentPort.postMessage({ joined: bots.length });
  const { seconds } = await go;
  let stopping = false;
  const runs = bots.map((b) => b.run(() => stopping));
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  stopping = true;
  await Promise.all(runs);
  parentPort.postMessage({ tallies: bots.map((b) => ({ kind: b.kind, tally: b.tally })) });
  await Promise.all(bots.map((b) => b.room.leave()));
}

main().catch((err) => { throw err; });
