// Webhook retry, on the dq-client library (node/): call a webhook; when the
// call fails, try again after 15s, 3m, 10m, 30m, 1h, 2h, 6h and 15h, then keep
// it as a dead letter until it is redriven.
//
//   node webhook_retry.js producer   # queue three calls: one works, one is flaky, one's receiver is down
//   node webhook_retry.js worker     # make the calls; Ctrl-C stops it
//   node webhook_retry.js redrive    # show the dead letters and queue them again
//
// REDIS_URL picks the server (default redis://127.0.0.1:6379). DQ_EXAMPLE_BACKOFF
// replaces the waits (e.g. 100ms,200ms). The simulated receiver fails for URLs
// containing DQ_EXAMPLE_DOWN (default "bad"; empty: nothing is down).
// order_timeout.js does its job with plain ioredis commands.

const Redis = require("ioredis");
const dq = require("dq-client");

const BACKOFF = process.env.DQ_EXAMPLE_BACKOFF || "15s,3m,10m,30m,1h,2h,6h,15h";
const MAX_ATTEMPTS = BACKOFF.split(",").length + 1; // the first try, then one per wait
const URLS = ["https://example.test/ok", "https://example.test/flaky", "https://example.test/bad"];
const redis = new Redis(process.env.REDIS_URL || "redis://127.0.0.1:6379");
const webhooks = new dq.Queue(redis, "webhooks");

async function producer() {
  for (const url of URLS) {
    const hook = `hook:${await redis.incr("webhooks:seq")}`;
    const payload = JSON.stringify({ url, event: "order.paid" });
    await webhooks.add(payload, { id: hook, backoff: BACKOFF, maxAttempts: MAX_ATTEMPTS });
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

async function worker() {
  const handle = async (d) => {
    const error = await callWebhook(JSON.parse(d.payload).url, d.attempt);
    // No delay: the message's BACKOFF decides when it is due again. The
    // worker NACKs with ATTEMPT, so a late NACK cannot fail another's try.
    if (error !== null) throw new dq.Retry(null, error);
  };
  const report = async (d, outcome) => {
    const { id, attempt } = d;
    if (outcome.state === "acked" || outcome.state === "acked-late") {
      console.log(`delivered ${id} attempt=${attempt}`);
    } else if (outcome.state === "dead") {
      console.log(`gave up ${id} attempt=${attempt}: dead letter`);
    } else if (outcome.state === "stale" || outcome.state === "unsettled") {
      console.log(`too late for ${id} attempt=${attempt}`);
    } else {
      const wait = ((await webhooks.get(id))["due-at"] - Date.now()) / 1000;
      console.log(`retry ${id} attempt=${attempt} failed, next attempt in ${wait.toFixed(1)}s`);
    }
  };
  const w = new dq.Worker(webhooks, handle, { concurrency: 10, handleSignals: true, onSettled: report });
  console.log("worker waiting for webhooks");
  await w.run();
  console.log("worker stopped");
}

async function redrive() {
  for (const dead of await webhooks.peek("DEAD", 100)) {
    const reason = (await webhooks.get(dead.id))["dead-reason"];
    const url = JSON.parse(dead.payload).url;
    console.log(`dead ${dead.id} ${url} attempts=${dead.attempt} reason=${reason} error=${dead.lastError}`);
  }
  console.log(`redrove ${await webhooks.redrive()} dead letter(s)`);
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
