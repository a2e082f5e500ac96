"""Order timeout: cancel an order that is still unpaid 30 minutes after it was placed.

    python3 order_timeout.py producer [N]   # place N orders (default 3); the first one gets paid
    python3 order_timeout.py worker         # cancel the orders whose time ran out; Ctrl-C stops it

REDIS_URL picks the server (default redis://127.0.0.1:6379), DQ_EXAMPLE_DELAY_MS
how long an order may stay unpaid (default 1800000, 30 minutes).
"""

import json
import os
import signal
import sys

import redis

QUEUE = "orders"
r = redis.Redis.from_url(
    os.environ.get("REDIS_URL", "redis://127.0.0.1:6379"), decode_responses=True
)


def producer(count):
    delay = int(os.environ.get("DQ_EXAMPLE_DELAY_MS", 30 * 60 * 1000))
    orders = []
    for _ in range(count):
        order = f"order:{r.incr('shop:order-seq')}"
        # The order id is the message id, so paying can cancel the timeout.
        r.execute_command(
            "DQ.ADD", QUEUE, json.dumps({"order": order}), "DELAY", delay, "ID", order
        )
        print(f"added {order}, cancelled unless paid within {delay} ms")
        orders.append(order)
    if orders and r.execute_command("DQ.CANCEL", QUEUE, orders[0]) == 1:
        print(f"paid {orders[0]}, its timeout is removed")


def cancel_order(order):
    """Stands in for the real work: mark the order cancelled, release its stock."""


def worker():
    stopping = False

    def stop(signum, frame):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    print("worker waiting for orders")
    while not stopping:
        # BLOCK 1000 wakes the loop at least every second to see a stop request.
        batch = r.execute_command("DQ.POP", QUEUE, "COUNT", 10, "BLOCK", 1000) or []
        # The batch at hand is finished even after a stop request: each
        # message is either acked here or, if we crash, redelivered after its lease.
        for msg_id, payload, attempt in batch:
            cancel_order(json.loads(payload)["order"])
            r.execute_command("DQ.ACK", QUEUE, msg_id)
            print(f"cancelled {msg_id} attempt={attempt}")
    print("worker stopped")


if __name__ == "__main__":
    match sys.argv[1:]:
        case ["producer"]:
            producer(3)
        case ["producer", n]:
            producer(int(n))
        case ["worker"]:
            worker()
        case _:
            sys.exit(f"usage: {sys.argv[0]} producer [N] | worker")
