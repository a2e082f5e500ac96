"""The decisions both Workers share: how a handler's outcome is settled,
what the server's replies mean, which queues one poller serves, and which
clients a worker can use."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from .args import MAX_TIME, int_arg
from .errors import Permanent, Retry
from .plans import Plan
from .queue import QueueCommands as Queue, is_cluster
from .records import Delivery
from .sharding import hash_slot


def settle_call(
    part: Queue, delivery: Delivery, failure: Optional[BaseException]
) -> Tuple[str, Optional[Plan[Any]], Optional[str]]:
    """(action, the call that settles the delivery alone, the error text sent).

    A Worker sends the ACKs of deliveries that are not lost in batches
    (ack_batch_state); a lost one's ACK goes alone, so its count is its own
    (ACK is unfenced: a late one is proof the work was done). The call is
    None when the lease was lost and the handler failed, and whatever the
    handler did when the message was cancelled: nothing is sent."""
    if failure is None:
        action, text = "ack", None
    elif isinstance(failure, Permanent):
        action, text = "dead", str(failure) or "Permanent"
    elif isinstance(failure, Retry):
        action, text = "nack", failure.error or None
    else:
        action, text = "nack", f"{type(failure).__name__}: {failure}"
    if delivery.lost_reason == "cancelled":
        return action, None, text
    if action == "ack":
        return action, Queue.ack.plan(part, delivery.id), None
    if delivery.lost:
        return action, None, text
    if action == "dead":
        return action, Queue.nack.plan(part, delivery.id, dead=True, attempt=delivery.attempt, error=text), text
    delay_ms = failure.delay_ms if isinstance(failure, Retry) else None
    return action, Queue.nack.plan(part, delivery.id, delay_ms=delay_ms, attempt=delivery.attempt, error=text), text


def mark_over(delivery: Delivery, reason: str) -> None:
    """Tells the handler its delivery is over ("cancelled" or "lost"): the
    reason first, then `lost`, then the event, so that whoever sees one
    sees the others."""
    delivery.lost_reason = reason
    delivery.lost = True
    delivery.cancelled.set()


def over_reason(record: Any) -> str:
    """Why a delivery's TOUCH was STALE, from DQ.GET of its id: "cancelled"
    when the message is gone (DQ.CANCEL, DQ.PURGE; or, rarely, another
    consumer took it after the lease ran out and acknowledged it already),
    else "lost" (the lease ran out: another consumer may hold it)."""
    return "cancelled" if record is None else "lost"


OVER_LOG = {
    "cancelled": "dq: %s attempt %d in %s was cancelled or purged while its handler ran",
    "lost": "dq: lost the lease of %s attempt %d in %s: another consumer may have it",
}


def unsent_state(delivery: Delivery) -> str:
    """The state of a delivery settle_call sends nothing for."""
    return "cancelled" if delivery.lost_reason == "cancelled" else "stale"


def settle_state(action: str, reply: Any) -> str:
    if action == "ack":
        return "acked" if reply else "acked-late"
    return str(reply)


def ack_batch_state(count: int, size: int) -> str:
    """The state of each delivery of one DQ.ACK of `size` ids that counted
    `count`: which of them were no longer in flight the reply does not say."""
    return "acked" if count == size else "acked-late"


def check_worker_args(concurrency: Any, lease_ms: Any, block_ms: Any) -> None:
    int_arg("concurrency", concurrency, 1, 10000)
    int_arg("lease_ms", lease_ms, 3, MAX_TIME)
    int_arg("block_ms", block_ms, 1, MAX_TIME)


def worker_groups(queues: Any, queue_kind: type, sharded_kind: type) -> List[List[Any]]:
    """The worker's pollers, each the single queues it polls: one DQ.MPOP
    over all of them, in the order given, when they are plain Queues on one
    client that one MPOP can serve (a standalone server, or a cluster where
    every name is in one hash slot); else one per queue, a ShardedQueue
    counting as its shards."""
    items = list(queues) if isinstance(queues, (list, tuple)) else [queues]
    if not items:
        raise ValueError("a worker needs at least one queue")
    parts: List[Any] = []
    for item in items:
        if not isinstance(item, (queue_kind, sharded_kind)):
            raise TypeError(
                f"a worker takes {queue_kind.__name__} or {sharded_kind.__name__} (or a list of them), "
                f"got {type(item).__name__}"
            )
        parts += getattr(item, "shards") if isinstance(item, sharded_kind) else [item]
    names = [q.name for q in parts]
    if len(set(names)) != len(names):
        raise ValueError("a worker was given the same queue twice")
    if len(items) > 1 and not any(isinstance(item, sharded_kind) for item in items) and mpop_serves(items):
        return [parts]
    return [[part] for part in parts]


def mpop_serves(queues: Sequence[Any]) -> bool:
    """Whether one DQ.MPOP can take from all these queues."""
    client = queues[0].client
    if any(q.client is not client for q in queues):
        return False
    if not is_cluster(client):
        return True
    return len({hash_slot(q._key) for q in queues}) == 1


def _pool_kwargs(client: Any) -> List[Dict[str, Any]]:
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


def check_pool(client: Any, needed: int, block_ms: int) -> None:
    """Refuses a client a worker cannot use: one connection for everything,
    a pool too small for its blocking POPs, a read timeout shorter than BLOCK."""
    if getattr(client, "connection", None) is not None:
        raise ValueError("a Worker needs a client with a connection pool, not single_connection_client=True")
    pool = getattr(client, "connection_pool", None)
    limit = getattr(pool, "max_connections", None) if pool is not None else None
    where = "the client's connection pool allows"
    if pool is None:
        limit = next((k["max_connections"] for k in _pool_kwargs(client) if "max_connections" in k), None)
        where = "the cluster client allows, per node,"
    if isinstance(limit, int) and limit < needed:
        raise ValueError(
            f"{where} {limit} connections; this worker needs {needed} "
            "(a blocking POP per queue, one per handler, one for the heartbeat, one for the ACKs)"
        )
    timeouts = [k["socket_timeout"] for k in _pool_kwargs(client) if isinstance(k.get("socket_timeout"), (int, float))]
    if timeouts and min(timeouts) * 1000 <= block_ms:
        raise ValueError(
            f"block_ms={block_ms} needs the client's socket_timeout to be longer than {block_ms / 1000:g} s "
            f"(it is {min(timeouts):g} s): a blocking POP would time out; lower block_ms or raise socket_timeout"
        )
