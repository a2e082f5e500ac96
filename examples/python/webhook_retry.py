"""Webhook retry: call a webhook; when the call fails, try again after 15s, 3m,
10m, 30m, 1h, 2h, 6h and 15h, then keep it as a dead letter until it is redriven.
Built on the dq library (python/ in this repository): a Worker runs the handler,
acknowledges what it returns from, and NACKs what raises.

    python3 webhook_retry.py producer   # queue three calls: one works, one is flaky, one's receiver is down
    python3 webhook_retry.py worker     # make the calls; Ctrl-C stops it
    python3 webhook_retry.py redrive    # show the dead letters and queue them again

REDIS_URL picks the server (default redis://127.0.0.1:6379). DQ_EXAMPLE_BACKOFF
replaces the waits (e.g. 100ms,200ms). The simulated receiver fails for URLs
containing DQ_EXAMPLE_DOWN (default "bad"; empty: nothing is down).
"""

import json
import os
import sys
import threading
import time

import redis

import dq

BACKOFF = os.environ.get("DQ_EXAMPLE_BACKOFF", "15s,3m,10m,30m,1h,2h,6h,15h")
MAX_ATTEMPTS = len(BACKOFF.split(",")) + 1  # the first try, then one per wait
URLS = ["https://example.test/ok", "https://example.test/flaky", "https://example.test/bad"]
r = redis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379"))
hooks = dq.Queue(r, "webhooks")


def producer():
    for url in URLS:
        hook = f"hook:{r.incr('webhooks:seq')}"
        payload = json.dumps({"url": url, "event": "order.paid"})
        hooks.add(payload, id=hook, backoff=BACKOFF, max_attempts=MAX_ATTEMPTS)
        print(f"added {hook} {url}")


def call_webhook(url, attempt):
    """Stands in for an HTTP POST: None when the receiver answered 2xx, else why not."""
    down = os.environ.get("DQ_EXAMPLE_DOWN", "bad")
    if down and down in url:
        return "HTTP 503 Service Unavailable"
    if "flaky" in url and attempt < 3:
        return "timed out after 10s"
    return None


def handle(delivery):
    error = call_webhook(json.loads(delivery.payload)["url"], delivery.attempt)
    if error is not None:
        # No delay: the message's BACKOFF decides when it is due again. (A
        # receiver that answers 410 Gone would be `raise dq.Permanent(...)`:
        # a dead letter at once.)
        raise dq.Retry(error=error)
    # Returning acknowledges the message.


# on_settled is called from the worker's threads, several at once: one
# lock keeps each report on a line of its own.
printing = threading.Lock()


def report(delivery, outcome):
    """Called by the worker once it settled a delivery (ACK or NACK, with ATTEMPT)."""
    with printing:
        say(delivery, outcome)


def say(delivery, outcome):
    msg_id, attempt = delivery.id, delivery.attempt
    if outcome.action == "ack":
        print(f"delivered {msg_id} attempt={attempt}")
    elif outcome.state == "dead":
        print(f"gave up {msg_id} attempt={attempt}: dead letter")
    elif outcome.state in ("delayed", "ready"):
        wait = hooks.get(msg_id)["due-at"] / 1000 - time.time()
        print(f"retry {msg_id} attempt={attempt} failed, next attempt in {wait:.1f}s")
    else:
        # "stale": our lease ran out and another worker may hold the
        # message: the NACK was refused (STALE) instead of failing their try;
        # "unsettled": the server could not be reached.
        print(f"too late for {msg_id} attempt={attempt}: {outcome.exception}")


def worker():
    # run() stops on SIGINT and SIGTERM: no new calls, the one under way
    # finishes and is settled, then it returns.
    print("worker waiting for webhooks")
    dq.Worker(hooks, handle, on_settled=report).run()
    print("worker stopped")


def redrive():
    for entry in hooks.peek("dead", count=100):
        reason = hooks.get(entry.id)["dead-reason"]
        url = json.loads(entry.payload)["url"]
        print(f"dead {entry.id} {url} attempts={entry.attempt} reason={reason} error={entry.last_error}")
    print(f"redrove {hooks.redrive()} dead letter(s)")


if __name__ == "__main__":
    match sys.argv[1:]:
        case ["producer"]:
            producer()
        case ["worker"]:
            worker()
        case ["redrive"]:
            redrive()
        case _:
            sys.exit(f"usage: {sys.argv[0]} producer | worker | redrive")
