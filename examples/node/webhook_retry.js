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

// Stands in for an HTTP POST: null when the receiver answered 2xx, else why not.
async function callWebhook(url, attempt) {
  const down = process.env.DQ_EXAMPLE_DOWN ?? "bad";
  if (down && url.includes(down)) return "HTTP 503 Service Unavailable";
  if (url.includes("flaky") && attempt < 3) return "timed out after 10s";
  return null;
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
      const error = await callWebhook(JSON.parse(payload).url, attempt);
      if (error === null) {
        await redis.call("DQ.ACK", QUEUE, id);
        console.log(`delivered ${id} attempt=${attempt}`);
        continue;
      }
      // No DELAY: the message's BACKOFF decides when it is due again.
      // ATTEMPT: if our lease ran out and another worker holds the message
      // now, the NACK is refused instead of failing their try.
      let state;
      try {
        state = await redis.call("DQ.NACK", QUEUE, id, "ATTEMPT", attempt, "ERROR", error);
      } catch (e) {
        if (!String(e.message).startsWith("STALE")) throw e;
        console.log(`too late for ${id} attempt=${attempt}: ${e.message}`);
        continue;
      }
      if (state === "dead") {
        console.log(`gave up ${id} attempt=${attempt}: dead letter`);
      } else {
        const wait = ((await dqGet(id))["due-at"] - Date.now()) / 1000;
        console.log(`retry ${id} attempt=${attempt} failed, next attempt in ${wait.toFixed(1)}s`);
      }
    }
  }
  console.log("worker stopped");
}

async function redrive() {
  const dead = await redis.call("DQ.PEEK", QUEUE, "DEAD", "COUNT", 100);
  for (const [id, payload, attempt, , error] of dead) {
    const reason = (await dqGet(id))["dead-reason"];
    const url = JSON.parse(payload).url;
    console.log(`dead ${id} ${url} attempts=${attempt} reason=${reason} error=${error}`);
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
