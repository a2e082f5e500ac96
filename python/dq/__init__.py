"""dq: the Python client of the dq Redis module (a delay queue).

    import redis, dq
    client = redis.Redis()
    orders = dq.Queue(client, "orders")
    orders.add(b"...", delay_ms=30_000, id="order:1")
    dq.Worker(orders, handle, concurrency=4).run()

The same API on redis.asyncio is in dq.asyncio.
"""

from ._core.errors import DqError, OutOfMemory, Permanent, Retry, StaleDelivery, UnknownMessage, WrongType
from ._core.records import Delivery, Entry, Outcome, Schedule
from ._sync import Queue, ShardedQueue, queues
from ._worker import Worker

__version__ = "0.1.0"

__all__ = [
    "Delivery",
    "DqError",
    "Entry",
    "OutOfMemory",
    "Outcome",
    "Permanent",
    "Queue",
    "Retry",
    "Schedule",
    "ShardedQueue",
    "StaleDelivery",
    "UnknownMessage",
    "Worker",
    "WrongType",
    "queues",
]
