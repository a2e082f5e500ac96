"""dq.asyncio.Queue and dq.asyncio.queues(): one dq queue over an asyncio
client (Redis or RedisCluster). The methods are dq/_core/queue.py's, run
by dq/asyncio/_io.py."""

from __future__ import annotations

from typing import List

from .._core import queue as core
from .._core.queue import QueueCommands
from ._io import Bound, Client, check_client, drive, ready


class Queue(Bound, QueueCommands):
    """One dq queue over an asyncio client: each method is one DQ.* command."""


async def queues(client: Client) -> List[str]:
    check_client(client)
    await ready(client)  # a cluster client knows its masters once initialized
    return await drive(client, core.queues(client))


queues.__doc__ = core.queues.__doc__
