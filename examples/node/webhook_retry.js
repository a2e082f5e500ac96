// Webhook retry: call a webhook; when the call fails, try again after 15s, 3m,
// 10m, 30m, 1h, 2h, 6h and 15h, then keep it as a dead letter until it is redriven.
//
//   node webhook_retry.js producer   # queue three calls: one works, one is flaky, one's receiver is down
//   node webhook_retry.js worker     # make the calls; Ctrl-C stops it
//   node webhook_retry.js redrive    # show the dead letters and queue them again
//
// REDIS_URL picks the server (default redis://127.0.0.1:6379). DQ_EXAMPLE_BACKOFF
// replaces the waits (e.g. 100ms,200ms). The simulated receiver fails for URLs
// containing DQ_EXAMPLE_DOWN (default "bad"; empty: nothing is down).

const Redis = require("ioredis");

const QUEUE = "webhooks";
const BACKOFF = process.env.DQ_EXAMPLE_BACKOFF || "15s,3m,10m,30m,1h,2h,6h,15h";
const MAX_ATTEMPTS = BACKOFF.split(",").length + 1; // the first try, then one per wait
const URLS = ["https://example.test/ok", "https://example.test/flaky", "https://example.test/bad"];
const redis = new Redis(process.env.REDIS_URL || "redis://127.0.0.1:6379");

async function producer() {
  for (const url of URLS) {
    const hook = `hook:${await redis.incr("webhooks:seq")}`;
    const payload = JSON.stringify({ url, event: "order.paid" });
    const options = ["ID", hook, "BACKOFF", BACKOFF, "MAXATTEMPTS", MAX_ATTEMPTS];
    await redis.call("DQ.ADD", QUEUE, payload, ...options);
    console.log(`added ${hook} ${url}`);
  }
}

// Stands in for an HTTP POST; true when the receiver answered 2xx.
async function callWebhook(url, attempt) {
  const down = process.env.DQ_EXAMPLE_DOWN ?? "bad";
  if (down && url.includes(down)) return false;
  if (url.includes("flaky")) return attempt >= 3;
  return true;
}

// DQ.GET replies field, value, field, value, ...
async function dqGet(id) {
  const fields = (await redis.call("DQ.GET", QUEUE, id)) || [];
  const record = {};
  for (let i = 0; i < fields.length; i += 2) record[fields[i]] = fields[i + 1];
  return record;
}

async function worker() {
  let stopping = false;
  process.on("SIGINT", () => (stopping = true));
  process.on("SIGTERM", () => (stopping = true));
  console.log("worker waiting for webhooks");
  while (!stopping) {
    const batch = (await redis.call("DQ.POP", QUEUE, "COUNT", 10, "BLOCK", 1000)) || [];
    for (const [id, payload, attempt] of batch) {
      if (await callWebhook(JSON.parse(payload).url, attempt)) {
        await redis.call("DQ.ACK", QUEUE, id);
        console.log(`delivered ${id} attempt=${attempt}`);
        continue;
      }
      // No DELAY: the message's BACKOFF decides when it is due again.
      const state = await redis.call("DQ.NACK", QUEUE, id);
      if (state === "dead") {
        console.log(`gave up ${id} attempt=${attempt}: dead letter`);
      } else if (state !== null) {
        // (null: our lease had already ended and the message is someone else's)
        const wait = ((await dqGet(id))["due-at"] - Date.now()) / 1000;
        console.log(`retry ${id} attempt=${attempt} failed, next attempt in ${wait.toFixed(1)}s`);
      }
    }
  }
  console.log("worker stopped");
}

async function redrive() {
  for (const [id, payload, attempt] of await redis.call("DQ.PEEK", QUEUE, "DEAD", "COUNT", 100)) {
    const reason = (await dqGet(id))["dead-reason"];
    console.log(`dead ${id} ${JSON.parse(payload).url} attempts=${attempt} reason=${reason}`);
  }
  console.log(`redrove ${await redis.call("DQ.REDRIVE", QUEUE)} dead letter(s)`);
}

async function main(args) {
  const actions = { producer, worker, redrive };
  if (args.length === 1 && Object.hasOwn(actions, args[0])) {
    await actions[args[0]]();
  } else {
    console.error("usage: node webhook_retry.js producer | worker | redrive");
    process.exitCode = 2;
  }
  await redis.quit();
}

main(process.argv.slice(2)).catch((err) => {
  console.error(err);
  process.exit(1);
});
