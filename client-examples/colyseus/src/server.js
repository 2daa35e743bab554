'use strict';
/*
 * server.js - the Colyseus server a developer starts (README.md): one room
 * type, "pathd", served over WebSockets. pathd must be running with the
 * courtyard scene (the repository's config/default.json does).
 *
 *   PATHD_ADDR=127.0.0.1:7420 PORT=2567 NPCS=100 node src/server.js
 */
const { Server } = require('@colyseus/core');
const { WebSocketTransport } = require('@colyseus/ws-transport');
const { PathdRoom } = require('./PathdRoom');

const port = Number(process.env.PORT || 2567);
const gameServer = new Server({ transport: new WebSocketTransport() });
gameServer.define('pathd', PathdRoom, {
  pathdAddr: process.env.PATHD_ADDR || '127.0.0.1:7420',
  npcs: Number(process.env.NPCS || 100),
});
gameServer.listen(port).then(() => {
  console.log(`Colyseus listening on ws://localhost:${port}, room "pathd"`);
});
