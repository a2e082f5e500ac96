'use strict';
// Sharded queues: shard names and routing, exactly as docs/sharding.md fixes
// them for the three client libraries (tests/vectors/sharding.json checks it).
// Both CRCs are written here: Node 18 has no zlib.crc32.

const SLOTS = 16384;
const MAX_SHARDS = 1024;

const CRC32_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

/** CRC-32/ISO-HDLC (zlib's crc32) of a Buffer. */
function crc32(buf) {
  let c = 0xffffffff;
  for (const b of buf) c = CRC32_TABLE[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** CRC-16/XMODEM, the hash of Redis Cluster slots. */
function crc16(buf) {
  let crc = 0;
  for (const b of buf) {
    crc ^= b << 8;
    for (let k = 0; k < 8; k++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

const bytes = (v) => (Buffer.isBuffer(v) ? v : Buffer.from(String(v), 'utf8'));

/** The cluster slot of a key (honouring a {hash tag}, as the server does). */
function keySlot(key) {
  let b = bytes(key);
  const open = b.indexOf(0x7b);
  if (open >= 0) {
    const close = b.indexOf(0x7d, open + 1);
    if (close > open + 1) b = b.subarray(open + 1, close);
  }
  return crc16(b) % SLOTS;
}

/** The shard a message with this basis goes to among `shards`. */
function shardOf(basis, shards) {
  return crc32(bytes(basis)) % shards;
}

/** The names of queue `name`'s `shards` shards: `name~<i>of<N>~<k>`. */
function shardNames(name, shards) {
  if (typeof name !== 'string') throw new TypeError('a sharded queue name must be a string');
  if (!Number.isInteger(shards) || shards < 1 || shards > MAX_SHARDS || (shards & (shards - 1)) !== 0) {
    throw new RangeError(`a sharded queue has a power of two of shards from 1 to ${MAX_SHARDS}, not ${shards}`);
  }
  if (/[{}]/.test(name)) {
    throw new RangeError(`sharded queue name '${name}' must not contain '{' or '}': a hash tag would put every shard in one slot`);
  }
  const width = SLOTS / shards;
  const names = [];
  for (let i = 0; i < shards; i++) {
    for (let k = 0; ; k++) {
      const candidate = `${name}~${i}of${shards}~${k}`;
      const slot = crc16(Buffer.from(candidate, 'utf8'));
      if (slot % SLOTS >= i * width && slot % SLOTS < (i + 1) * width) {
        names.push(candidate);
        break;
      }
    }
  }
  return names;
}

module.exports = { crc32, crc16, keySlot, shardOf, shardNames, MAX_SHARDS };
