"""dq.Queue and dq.queues(): one dq queue over a blocking client (Redis or
RedisCluster). The methods are dq/_core/queue.py's, run by dq/_io.py."""

from __future__ import annotations

from typing import List

from ._core import queue as core
from ._core.queue import QueueCommands
from ._io import Bound, Client, check_client, drive


class Queue(Bound, QueueCommands):
    """One dq queue: each method is one DQ.* command."""


def queues(client: Client) -> List[str]:
    check_client(client)
    return drive(client, core.queues(client))


queues.__doc__ = core.queues.__doc__
