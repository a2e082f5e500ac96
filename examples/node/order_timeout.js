// Order timeout: cancel an order that is still unpaid 30 minutes after it was placed.
//
//   node order_timeout.js producer [N]   # place N orders (default 3); the first one gets paid
//   node order_timeout.js worker         # cancel the orders whose time ran out; Ctrl-C stops it
//
// REDIS_URL picks the server (default redis://127.0.0.1:6379), DQ_EXAMPLE_DELAY_MS
// how long an order may stay unpaid (default 1800000, 30 minutes).

const Redis = require("ioredis");

const QUEUE = "orders";
const redis = new Redis(process.env.REDIS_URL || "redis://127.0.0.1:6379");

async function producer(count) {
  const delay = Number(process.env.DQ_EXAMPLE_DELAY_MS || 30 * 60 * 1000);
  const orders = [];
  for (let i = 0; i < count; i++) {
    const order = `order:${await redis.incr("shop:order-seq")}`;
    // The order id is the message id, so paying can cancel the timeout.
    await redis.call("DQ.ADD", QUEUE, JSON.stringify({ order }), "DELAY", delay, "ID", order);
    console.log(`added ${order}, cancelled unless paid within ${delay} ms`);
    orders.push(order);
  }
  if (orders.length > 0 && (await redis.call("DQ.CANCEL", QUEUE, orders[0])) === 1) {
    console.log(`paid ${orders[0]}, its timeout is removed`);
  }
}

// Stands in for the real work: mark the order cancelled, release its stock.
async function cancelOrder(order) {}

async function worker() {
  let stopping = false;
  process.on("SIGINT", () => (stopping = true));
  process.on("SIGTERM", () => (stopping = true));
  console.log("worker waiting for orders");
  while (!stopping) {
    // BLOCK 1000 wakes the loop at least every second to see a stop request.
    const batch = (await redis.call("DQ.POP", QUEUE, "COUNT", 10, "BLOCK", 1000)) || [];
    // The batch at hand is finished even after a stop request: each
    // message is either acked here or, if we crash, redelivered after its lease.
    for (const [id, payload, attempt] of batch) {
      await cancelOrder(JSON.parse(payload).order);
      await redis.call("DQ.ACK", QUEUE, id);
      console.log(`cancelled ${id} attempt=${attempt}`);
    }
  }
  console.log("worker stopped");
}

async function main(args) {
  if (args[0] === "producer" && args.length <= 2) {
    await producer(Number(args[1] || 3));
  } else if (args[0] === "worker" && args.length === 1) {
    await worker();
  } else {
    console.error("usage: node order_timeout.js producer [N] | worker");
    process.exitCode = 2;
  }
  await redis.quit();
}

main(process.argv.slice(2)).catch((err) => {
  console.error(err);
  process.exit(1);
});
