"""What dq reads of a redis-py client's connection settings (sync or
asyncio, standalone or cluster): the Worker checks its pool and timeout
with them, queue.wait() how long one blocking DQ.WAIT may last."""

from __future__ import annotations

from typing import Any, Dict, List, Optional


def pool_kwargs(client: Any) -> List[Dict[str, Any]]:
    """The connection settings of a client's pools: the standalone pool's;
    on a cluster, the client's own (asyncio) and every known node's (sync)."""
    found: List[Dict[str, Any]] = []
    pool = getattr(client, "connection_pool", None)
    if pool is not None:
        found.append(getattr(pool, "connection_kwargs", None) or {})
    own = getattr(client, "connection_kwargs", None)
    if isinstance(own, dict):
        found.append(own)
    manager = getattr(client, "nodes_manager", None)
    if manager is not None:
        found.append(getattr(manager, "connection_kwargs", None) or {})
        for node in getattr(manager, "nodes_cache", {}).values():
            node_client = getattr(node, "redis_connection", None)
            node_pool = getattr(node_client, "connection_pool", None)
            if node_pool is not None:
                found.append(getattr(node_pool, "connection_kwargs", None) or {})
    return found


def socket_timeout(client: Any) -> Optional[float]:
    """The shortest read timeout (seconds) of the client's connections;
    None when they have none."""
    timeouts = [k["socket_timeout"] for k in pool_kwargs(client) if isinstance(k.get("socket_timeout"), (int, float))]
    return min(timeouts) if timeouts else None


def longest_block_ms(client: Any) -> Optional[int]:
    """How long one blocking command may wait on this client, in ms: less
    than its socket_timeout (redis-py 8 sets 5 s by default), by a second
    or half of a shorter timeout, for the server and the network; None
    when reads never time out."""
    timeout = socket_timeout(client)
    if timeout is None:
        return None
    return max(1, int((timeout - min(1.0, timeout / 2)) * 1000))


def single_connection(client: Any) -> bool:
    """Whether every command of the client goes on one connection
    (single_connection_client=True): a blocking command would hold up
    the others."""
    return (getattr(client, "connection", None) is not None
            or getattr(client, "single_connection_client", False) is True
            or getattr(client, "_single_connection_client", False) is True)
