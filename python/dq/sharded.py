"""dq.ShardedQueue: one logical queue over several dq queues, over a
blocking client. The methods are dq/_core/sharded.py's, run by dq/_io.py."""

from __future__ import annotations

from ._core.sharded import ShardedCommands
from ._io import Bound
from .queue import Queue


class ShardedQueue(Bound, ShardedCommands[Queue]):
    """One logical queue over `shards` dq queues (docs/sharding.md)."""

    _queue_class = Queue
