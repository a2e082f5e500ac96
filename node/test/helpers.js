'use strict';
// What the tests share: clients for the servers scripts/with-servers started
// (DQ_REDIS_URL, DQ_CLUSTER_NODES), unique queue names and polling. The
// clients are of ioredis 5, or of the package DQ_IOREDIS names (scripts/test-node
// runs the tests again with ioredis6, ioredis 6 under another name).

const Redis = require(process.env.DQ_IOREDIS || 'ioredis');

const url = process.env.DQ_REDIS_URL;
if (!url) throw new Error('DQ_REDIS_URL is not set: run the tests with scripts/test-node');

let n = 0;
/** A queue name no other test uses. */
const unique = (what) => `${what}-${process.pid}-${Date.now()}-${n++}`;

const redis = () => new Redis(url, { maxRetriesPerRequest: 3 });

function cluster() {
  const nodes = (process.env.DQ_CLUSTER_NODES || '').split(',').filter(Boolean);
  if (nodes.length === 0) throw new Error('DQ_CLUSTER_NODES is not set: run the tests with scripts/test-node');
  return new Redis.Cluster(nodes.map((n) => ({ host: n.slice(0, n.lastIndexOf(':')), port: Number(n.slice(n.lastIndexOf(':') + 1)) })));
}

/** Polls `condition` until it holds (true) or `ms` pass (false). */
async function eventually(condition, ms = 20000) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await condition()) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return false;
}

/** A DQ.GET / DQ.STATS field as text, by plain command. */
async function field(client, command, queue, ...rest) {
  const name = rest.pop();
  const reply = await client.call(command, queue, ...rest);
  if (reply == null) return undefined;
  for (let i = 0; i < reply.length; i += 2) if (reply[i] === name) return reply[i + 1];
  return undefined;
}

module.exports = { Redis, unique, redis, cluster, eventually, field };
