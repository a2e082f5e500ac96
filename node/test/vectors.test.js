'use strict';
const test = require('node:test');
const assert = require('node:assert');
const path = require('node:path');
const { crc32, shardOf, shardNames, keySlot } = require('..');

const vectors = require(path.join(__dirname, '../../tests/vectors/sharding.json'));

test('CRC32 and the shard of every basis match the shared vectors', () => {
  assert.ok(vectors.crc32.length > 0);
  for (const v of vectors.crc32) {
    assert.strictEqual(crc32(Buffer.from(v.basis, 'utf8')), v.crc32, v.basis);
    for (const [n, shard] of Object.entries(v.shard)) assert.strictEqual(shardOf(v.basis, Number(n)), shard, `${v.basis} of ${n}`);
  }
});

test('shard names and their slots match the shared vectors', () => {
  assert.ok(vectors.names.length > 0);
  const cache = new Map();
  for (const v of vectors.names) {
    const key = `${v.queue}/${v.shards}`;
    if (!cache.has(key)) cache.set(key, shardNames(v.queue, v.shards));
    const name = cache.get(key)[v.shard];
    assert.strictEqual(name, v.name);
    assert.strictEqual(keySlot(name), v.slot);
  }
});

test('routes pick group, else shard key, else id', () => {
  assert.ok(vectors.routes.length > 0);
  for (const v of vectors.routes) {
    const basis = v.group ?? v.shard_key ?? v.id;
    assert.strictEqual(shardOf(basis, v.shards), v.shard, JSON.stringify(v));
  }
});

test('bad layouts are refused', () => {
  for (const n of [0, 3, 12, 2048, 1.5]) assert.throws(() => shardNames('q', n), RangeError);
  assert.throws(() => shardNames('a{b}', 2), /must not contain/);
});
