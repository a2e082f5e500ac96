"""Webhook retry: call a webhook; when the call fails, try again after 15s, 3m,
10m, 30m, 1h, 2h, 6h and 15h, then keep it as a dead letter until it is redriven.

    python3 webhook_retry.py producer   # queue three calls: one works, one is flaky, one's receiver is down
    python3 webhook_retry.py worker     # make the calls; Ctrl-C stops it
    python3 webhook_retry.py redrive    # show the dead letters and queue them again

REDIS_URL picks the server (default redis://127.0.0.1:6379). DQ_EXAMPLE_BACKOFF
replaces the waits (e.g. 100ms,200ms). The simulated receiver fails for URLs
containing DQ_EXAMPLE_DOWN (default "bad"; empty: nothing is down).
"""

import json
import os
import signal
import sys
import time

import redis

QUEUE = "webhooks"
BACKOFF = os.environ.get("DQ_EXAMPLE_BACKOFF", "15s,3m,10m,30m,1h,2h,6h,15h")
MAX_ATTEMPTS = len(BACKOFF.split(",")) + 1  # the first try, then one per wait
URLS = ["https://example.test/ok", "https://example.test/flaky", "https://example.test/bad"]
# RESP3, so DQ.GET's record arrives as a dict.
r = redis.Redis.from_url(
    os.environ.get("REDIS_URL", "redis://127.0.0.1:6379"), decode_responses=True, protocol=3
)


def producer():
    for url in URLS:
        hook = f"hook:{r.incr('webhooks:seq')}"
        payload = json.dumps({"url": url, "event": "order.paid"})
        options = ["ID", hook, "BACKOFF", BACKOFF, "MAXATTEMPTS", MAX_ATTEMPTS]
        r.execute_command("DQ.ADD", QUEUE, payload, *options)
        print(f"added {hook} {url}")


def call_webhook(url, attempt):
    """Stands in for an HTTP POST: None when the receiver answered 2xx, else why not."""
    down = os.environ.get("DQ_EXAMPLE_DOWN", "bad")
    if down and down in url:
        return "HTTP 503 Service Unavailable"
    if "flaky" in url and attempt < 3:
        return "timed out after 10s"
    return None


def worker():
    stopping = False

    def stop(signum, frame):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    print("worker waiting for webhooks")
    while not stopping:
        batch = r.execute_command("DQ.POP", QUEUE, "COUNT", 10, "BLOCK", 1000) or []
        for msg_id, payload, attempt in batch:
            error = call_webhook(json.loads(payload)["url"], attempt)
            if error is None:
                r.execute_command("DQ.ACK", QUEUE, msg_id)
                print(f"delivered {msg_id} attempt={attempt}")
                continue
            # No DELAY: the message's BACKOFF decides when it is due again.
            # ATTEMPT: if our lease ran out and another worker holds the
            # message now, the NACK is refused instead of failing their try.
            try:
                state = r.execute_command(
                    "DQ.NACK", QUEUE, msg_id, "ATTEMPT", attempt, "ERROR", error
                )
            except redis.ResponseError as e:
                if not str(e).startswith("STALE"):
                    raise
                print(f"too late for {msg_id} attempt={attempt}: {e}")
                continue
            if state == "dead":
                print(f"gave up {msg_id} attempt={attempt}: dead letter")
            else:
                due_at = r.execute_command("DQ.GET", QUEUE, msg_id)["due-at"]
                wait = due_at / 1000 - time.time()
                print(f"retry {msg_id} attempt={attempt} failed, next attempt in {wait:.1f}s")
    print("worker stopped")


def redrive():
    dead = r.execute_command("DQ.PEEK", QUEUE, "DEAD", "COUNT", 100)
    for msg_id, payload, attempt, _died_at, error in dead:
        reason = r.execute_command("DQ.GET", QUEUE, msg_id)["dead-reason"]
        url = json.loads(payload)["url"]
        print(f"dead {msg_id} {url} attempts={attempt} reason={reason} error={error}")
    print(f"redrove {r.execute_command('DQ.REDRIVE', QUEUE)} dead letter(s)")


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
