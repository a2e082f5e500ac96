"""dq on redis.asyncio: the same Queue, ShardedQueue, queues() and Worker
as `dq`, with coroutines, an async iterator for scan, and a Worker made of
asyncio tasks.

    import redis.asyncio as redis
    from dq.asyncio import Queue, Worker

    client = redis.Redis()
    orders = Queue(client, "orders")
    await orders.add(b"...", delay_ms=30_000)
    await Worker(orders, handle, concurrency=8).run()
"""

from .. import _core
# The names dq and dq.asyncio share (_core.__all__): errors, Delivery, Entry, Event, Group, JobOutcome,
# Outcome, Schedule.
from .._core import (
    Delivery, DqError, Entry, Event, EventGap, EventLogRestarted, Group, JobOutcome, OutOfMemory, Outcome,
    Permanent, Retry, Schedule, StaleDelivery, UnknownMessage, WrongType,
)
from .queue import Queue, queues
from .sharded import ShardedQueue
from .worker import Worker

__all__ = ["Queue", "ShardedQueue", "Worker", "queues"]
__all__ += _core.__all__
