'use strict';
/*
 * tiled.js - reads a Tiled JSON map (.tmj) into a walkability grid, the way
 * a game's own code would: no pathd code, so the bots' independent check of
 * every accepted move does not share a bug with the server it checks.
 *
 * Rules (those pathd applies to the courtyard, config/README.md "tiled"):
 * only the named tile layer counts; a tile whose tileset entry has the bool
 * property `blocked` true is a wall; any other tile, and no tile, is open.
 * The flip bits of a GID (the top three) are cleared before the lookup.
 * Cell (x, y) covers world [x, x + 1) x [y, y + 1) times cellSize, from
 * origin, as in the pathd scene's config.
 */
const fs = require('node:fs');

const FLIP_BITS = 0x1fffffff;

class TiledGrid {
  constructor(width, height, walls, { origin = [0, 0], cellSize = 1 } = {}) {
    Object.assign(this, { width, height, walls, origin, cellSize });
    this.open = [];
    for (let y = 0; y < height; y++) {
      for (let x = 0; x < width; x++) if (!walls[y * width + x]) this.open.push([x, y]);
    }
  }

  static load(file, { layer = 'walls', blockedProperty = 'blocked', origin, cellSize } = {}) {
    const map = JSON.parse(fs.readFileSync(file, 'utf8'));
    const blockedTiles = new Set();
    for (const ts of map.tilesets) {
      if (ts.source) throw new Error(`${file}: external tileset ${ts.source} is not read by this example`);
      for (const tile of ts.tiles || []) {
        const prop = (tile.properties || []).find((p) => p.name === blockedProperty);
        if (prop && prop.value === true) blockedTiles.add(ts.firstgid + tile.id);
      }
    }
    const layers = map.layers.filter((l) => l.type === 'tilelayer' && l.name === layer);
    if (layers.length === 0) throw new Error(`${file}: no tile layer named ${layer}`);
    const walls = new Uint8Array(map.width * map.height);
    for (const l of layers) {
      if (!Array.isArray(l.data)) throw new Error(`${file}: layer ${layer} is not saved as CSV (an array)`);
      l.data.forEach((gid, i) => { if (blockedTiles.has(gid & FLIP_BITS)) walls[i] = 1; });
    }
    return new TiledGrid(map.width, map.height, walls, { origin, cellSize });
  }

  /* The cell holding world point [wx, wy]. */
  cellAt(wx, wy) {
    return [Math.floor((wx - this.origin[0]) / this.cellSize), Math.floor((wy - this.origin[1]) / this.cellSize)];
  }

  centre([x, y]) {
    return [this.origin[0] + (x + 0.5) * this.cellSize, this.origin[1] + (y + 0.5) * this.cellSize];
  }

  blocked([x, y]) {
    return x < 0 || y < 0 || x >= this.width || y >= this.height || this.walls[y * this.width + x] === 1;
  }

  /* The first wall cell a straight move from a to b (world points) touches,
   * sampled every `step` cells (and at b), or null when every sample is
   * on open ground. */
  wallOnSegment(a, b, step = 0.02) {
    const length = Math.hypot(b[0] - a[0], b[1] - a[1]) / this.cellSize;
    const n = Math.max(1, Math.ceil(length / step));
    for (let i = 0; i <= n; i++) {
      const c = this.cellAt(a[0] + ((b[0] - a[0]) * i) / n, a[1] + ((b[1] - a[1]) * i) / n);
      if (this.blocked(c)) return c;
    }
    return null;
  }
}

module.exports = { TiledGrid };
