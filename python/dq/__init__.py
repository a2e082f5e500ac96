"""dq: the Python client of the dq Redis module (a delay queue).

    import redis, dq
    client = redis.Redis()
    orders = dq.Queue(client, "orders")
    orders.add(b"...", delay_ms=30_000, id="order:1")
    dq.Worker(orders, handle, concurrency=4).run()

The same API on redis.asyncio is in dq.asyncio.
"""

from . import _core
# The names dq and dq.asyncio share (_core.__all__): errors, Delivery, Entry, Event, Group, JobOutcome,
# Outcome, Schedule.
from ._core import (
    Delivery, DqError, Entry, Event, EventGap, EventLogRestarted, Group, JobOutcome, OutOfMemory, Outcome,
    Permanent, Retry, Schedule, StaleDelivery, UnknownMessage, WrongType,
)
from .queue import Queue, queues
from .sharded import ShardedQueue
from .worker import Worker

__version__ = "0.1.0"

__all__ = ["Queue", "ShardedQueue", "Worker", "queues"]
__all__ += _core.__all__
