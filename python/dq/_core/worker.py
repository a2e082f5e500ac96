"""What dq.Worker and dq.asyncio.Worker share: their arguments and the
queues each poller takes from, and every decision that is not about
threads or tasks — one POP turn (what to take, when to give permits back
and block), the heartbeat's TOUCH and what a STALE reply means, how a
handler's outcome is settled (its return value a result or not), and what
the replies of one DQ.ACK or DQ.DONE for a batch of deliveries mean. These are plans (plans.py): dq.Worker runs them
on its threads, dq.asyncio.Worker on its tasks."""

from __future__ import annotations

import logging
from typing import Any, Callable, Generic, List, Optional, Sequence, Tuple, Type, TypeVar, Union

from .args import Duration, int_arg, ms_arg, result_arg
from .clients import pool_kwargs, socket_timeout
from .errors import Permanent, Retry, StaleDelivery
from .plans import Plan, one
from .queue import Q, QueueCommands as Queue, is_cluster, mpop_call, pop_call, worker_finish_call
from .records import Delivery, Outcome
from .sharded import ShardedCommands
from .sharding import hash_slot

log = logging.getLogger("dq")

Handler = Callable[[Delivery], Any]
OnSettled = Callable[[Delivery, Outcome], Any]
# A delivery whose handler returned, and its result (None: a plain ACK).
Finished = Tuple[Delivery, Optional[bytes]]
S = TypeVar("S", bound=ShardedCommands[Any])


class Poller(Generic[Q]):
    """One poller: the queues one POP (one queue) or one DQ.MPOP (several,
    in their order) takes from."""

    def __init__(self, parts: List[Q], lease_ms: int) -> None:
        self.parts = parts
        self.client = parts[0].client
        self.where = "+".join(p.name for p in parts)
        self.lease_ms = lease_ms
        self.pause = 0.1  # after a failed POP, doubling up to 5 s
        self.polling = False  # dq.Worker: a thread polls it now

    def take(self, count: int, block_ms: Optional[int]) -> Plan[Tuple[Q, List[Delivery]]]:
        """(the queue taken from, its deliveries)"""
        parts = self.parts
        if len(parts) == 1:
            batch = yield from one(pop_call(parts[0], count, block_ms, self.lease_ms))
            return parts[0], batch
        taken, batch = yield from one(mpop_call(parts, count, block_ms, self.lease_ms))
        return taken or parts[0], batch


# A POP turn's outcome: the queue taken from (None: nothing taken), the
# deliveries, the permits they hold, the pause before the poller's next POP
# (0 unless the POP failed).
Polled = Tuple[Optional[Q], List[Delivery], int, float]


class WorkerCore(Generic[Q, S]):
    """The part of a Worker that is the same on threads and on tasks. The
    flavor's Worker sets `_queue_class` and `_sharded_class` (what it takes)."""

    _queue_class: Type[Q]
    _sharded_class: Type[S]

    def __init__(
        self,
        queues: Union[Q, S, Sequence[Union[Q, S]]],
        handler: Handler,
        *,
        concurrency: int = 1,
        lease_ms: Duration = 30000,
        block_ms: Duration = 1000,
        handle_signals: bool = True,
        on_settled: Optional[OnSettled] = None,
    ) -> None:
        if not callable(handler):
            raise TypeError(f"handler must be callable, got {type(handler).__name__}")
        if on_settled is not None and not callable(on_settled):
            raise TypeError(f"on_settled must be callable, got {type(on_settled).__name__}")
        if not isinstance(handle_signals, bool):
            raise TypeError(f"handle_signals must be a bool, got {type(handle_signals).__name__}")
        lease_ms, block_ms = check_worker_args(concurrency, lease_ms, block_ms)
        groups: List[List[Q]] = worker_groups(queues, self._queue_class, self._sharded_class)
        self._parts = [part for group in groups for part in group]
        for part in self._parts:
            check_pool(part.client, len(groups) + concurrency + 2, block_ms)
        self._pollers = [Poller(group, lease_ms) for group in groups]
        self.handler = handler
        self.concurrency = concurrency
        self.lease_ms = lease_ms
        self.block_ms = block_ms
        self.handle_signals = handle_signals
        self.on_settled = on_settled
        # A POP takes at most its poller's share of the free permits, so that
        # one poller blocked on an empty queue does not hold them all.
        self._share = max(1, concurrency // len(groups))
        self._stopping = False
        self._prepare()

    def _prepare(self) -> None:
        """The flavor's own state (threads' or tasks')."""

    @property
    def queue_names(self) -> List[str]:
        """The (shard) queues this worker polls."""
        return [p.name for p in self._parts]

    @property
    def pollers(self) -> List[List[str]]:
        """The queues each poller takes from: one list of several names when
        one DQ.MPOP serves them all (in that order), else one per queue."""
        return [[p.name for p in poller.parts] for poller in self._pollers]

    @property
    def stopping(self) -> bool:
        """Whether stop() was called."""
        return self._stopping

    def _take(self, poller: Poller[Q], n: int, release: Callable[[int], None]) -> Plan[Polled[Q]]:
        """One POP turn of a poller holding n permits: what is ready now, up
        to n. When nothing is, the only poller keeps its permits and waits
        for as many messages (a burst that falls due comes in one reply);
        one among several gives them back (`release`: another queue may
        have work) and waits for one message holding none, which then waits
        for a permit, its lease kept alive by the heartbeat."""
        try:
            part, batch = yield from poller.take(n, None)
            if not batch and not self._stopping:
                if len(self._pollers) > 1:
                    release(n)
                    n = 0
                part, batch = yield from poller.take(max(n, 1), self.block_ms)
        except Exception as e:
            pause = poller.pause
            log.error("dq: POP from %s failed: %s (retrying in %.1f s)", poller.where, e, pause)
            poller.pause = min(pause * 2, 5.0)
            return None, [], n, pause
        poller.pause = 0.1
        return part, batch, n, 0.0

    def _renew(self, part: Q, delivery: Delivery, forget: Callable[[], bool]) -> Plan[str]:
        """The heartbeat's TOUCH of a running delivery: "renewed", or
        "failed" (logged; try again). On STALE, `forget()` takes the delivery
        off the heartbeat — False when it was settled meanwhile, its own
        ACK or NACK being why ("settled") — DQ.GET says why it is over, and
        the handler is told (mark_over): "over"."""
        try:
            yield from Queue.touch.plan(part, delivery.id, lease_ms=self.lease_ms, attempt=delivery.attempt)
        except StaleDelivery:
            if not forget():
                return "settled"
            try:
                reason = over_reason((yield from Queue.get.plan(part, delivery.id)))
            except Exception as e:
                log.warning("dq: DQ.GET %s in %s failed: %s", delivery.id, delivery.queue, e)
                reason = "lost"
            mark_over(delivery, reason)
            log.warning(OVER_LOG[reason], delivery.id, delivery.attempt, delivery.queue)
            return "over"
        except Exception as e:  # connection trouble
            log.warning("dq: TOUCH %s in %s failed: %s", delivery.id, delivery.queue, e)
            return "failed"
        return "renewed"

    def _progress_plan(self, part: Q, delivery: Delivery, value: Any) -> Plan[int]:
        """A handler's progress report (Delivery.progress): the heartbeat's
        TOUCH — the worker's lease, so a report never shortens it, fenced
        by the delivery's attempt — with PROGRESS value."""
        return Queue.progress.plan(part, delivery, value, lease_ms=self.lease_ms, attempt=delivery.attempt)

    def _report(self, delivery: Delivery, outcome: Outcome) -> Any:
        """Calls on_settled, if given (what it raises is logged): what it returned."""
        if self.on_settled is None:
            return None
        try:
            return self.on_settled(delivery, outcome)
        except Exception:
            log.exception("dq: on_settled raised")
            return None


def handler_failed(delivery: Delivery, failure: BaseException) -> None:
    """Logs what a handler raised, but for Permanent and Retry (asked for)."""
    if not isinstance(failure, (Permanent, Retry)):
        log.warning("dq: handler failed on %s attempt %d in %s: %s: %s",
                    delivery.id, delivery.attempt, delivery.queue, type(failure).__name__, failure)


def handler_result(delivery: Delivery, value: Any) -> Tuple[Optional[bytes], Optional[BaseException]]:
    """(result, failure) of a handler that returned `value`: None is a
    plain ACK (no result, as before results existed), str (sent as UTF-8)
    or bytes a result for DQ.DONE. Anything else, or a result over 512 MiB
    (the server would refuse the whole DQ.DONE of its batch), cannot be
    kept: the message is dead now (Permanent) with that reason, rather than
    retried — the work is done, and doing it again returns the same — or
    finished without the result the handler meant it to keep."""
    if value is None:
        return None, None
    if isinstance(value, (bytes, bytearray, memoryview, str)):
        try:
            return result_arg(value), None
        except ValueError as e:
            why = f"the handler's {e}"
    else:
        why = (f"the handler returned {type(value).__name__}, which is no result: return str or bytes "
               "(kept by DQ.DONE), or None (a plain DQ.ACK)")
    log.warning("dq: %s attempt %d in %s: %s; it is dead now", delivery.id, delivery.attempt, delivery.queue, why)
    return None, Permanent(why)


def batched(delivery: Delivery, failure: Optional[BaseException]) -> bool:
    """Whether a delivery whose handler is done is finished in its queue's
    next DQ.ACK or DQ.DONE (finish_batch): its handler returned and the
    delivery is not over. Any other is settled alone (settle)."""
    return failure is None and not delivery.lost


def settle(
    part: Queue, delivery: Delivery, failure: Optional[BaseException], result: Optional[bytes] = None
) -> Plan[Outcome]:
    """Settles one delivery alone: its NACK, its lone ACK (DONE, with a
    result) when it was over, or nothing when it was cancelled or over and
    failed."""
    action, plan, error = settle_call(part, delivery, failure, result)
    if plan is None:
        log.warning("dq: not settling %s attempt %d in %s: %s", delivery.id, delivery.attempt, delivery.queue,
                    "it was cancelled" if delivery.lost_reason == "cancelled" else "its lease was lost")
        return Outcome(action, unsent_state(delivery), error, failure)
    try:
        reply = yield from plan
    except StaleDelivery as e:
        log.warning("dq: %s", e)
        return Outcome(action, "stale", error, e)
    except Exception as e:
        log.error("dq: settling %s attempt %d in %s failed: %s (it comes back after its lease)",
                  delivery.id, delivery.attempt, delivery.queue, e)
        return Outcome(action, "unsettled", error, e)
    return Outcome(action, settle_state(action, reply), error, failure)


def batches(finished: List[Finished]) -> List[List[Finished]]:
    """The deliveries of one queue that finished while its last command was
    on its way, as the commands that finish them: the plain ones (one
    DQ.ACK), those with a result (one DQ.DONE of id result pairs); one of
    the two or both. A plain ACK keeps no result, not an empty one."""
    acks = [f for f in finished if f[1] is None]
    dones = [f for f in finished if f[1] is not None]
    return [b for b in (acks, dones) if b]


def finish_batch(part: Queue, batch: List[Finished]) -> Plan[Outcome]:
    """One DQ.ACK (or DQ.DONE, for results) of one queue's batch (batches):
    one outcome for them all."""
    action = "ack" if batch[0][1] is None else "done"
    command = "DQ.ACK" if action == "ack" else "DQ.DONE"
    try:
        count = yield from one(worker_finish_call(part, batch))
    except Exception as e:
        log.error("dq: %s of %d id(s) in %s failed: %s (they come back after their lease)",
                  command, len(batch), part.name, e)
        return Outcome(action, "unsettled", None, e)
    state = ack_batch_state(count, len(batch))
    if state != "acked":
        log.warning("dq: %s of %d id(s) in %s counted %d: the rest were no longer in flight",
                    command, len(batch), part.name, count)
    return Outcome(action, state)


def settle_call(
    part: Queue, delivery: Delivery, failure: Optional[BaseException], result: Optional[bytes] = None
) -> Tuple[str, Optional[Plan[Any]], Optional[str]]:
    """(action, the call that settles the delivery alone, the error text sent).

    A Worker sends the ACKs (DONEs) of deliveries that are not lost in
    batches (finish_batch); a lost one's ACK goes alone, so its count is its
    own (ACK is unfenced: a late one is proof the work was done). The call
    is None when the lease was lost and the handler failed, and whatever the
    handler did when the message was cancelled: nothing is sent."""
    if failure is None:
        action, text = ("ack" if result is None else "done"), None
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
    if action == "done":
        assert result is not None
        return action, Queue.done.plan(part, (delivery.id, result)), None
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
    if action in ("ack", "done"):
        return "acked" if reply else "acked-late"
    return str(reply)


def ack_batch_state(count: int, size: int) -> str:
    """The state of each delivery of one DQ.ACK (DQ.DONE) of `size` ids that counted
    `count`: which of them were no longer in flight the reply does not say."""
    return "acked" if count == size else "acked-late"


def check_worker_args(concurrency: Any, lease_ms: Any, block_ms: Any) -> Tuple[int, int]:
    """The lease and the block as whole ms (each a duration: int ms, a
    timedelta, or a str such as "30s")."""
    int_arg("concurrency", concurrency, 1, 10000)
    return ms_arg("lease_ms", lease_ms, 3), ms_arg("block_ms", block_ms, 1)


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


def check_pool(client: Any, needed: int, block_ms: int) -> None:
    """Refuses a client a worker cannot use: one connection for everything,
    a pool too small for its blocking POPs, a read timeout shorter than BLOCK."""
    if getattr(client, "connection", None) is not None:
        raise ValueError("a Worker needs a client with a connection pool, not single_connection_client=True")
    pool = getattr(client, "connection_pool", None)
    limit = getattr(pool, "max_connections", None) if pool is not None else None
    where = "the client's connection pool allows"
    if pool is None:
        limit = next((k["max_connections"] for k in pool_kwargs(client) if "max_connections" in k), None)
        where = "the cluster client allows, per node,"
    if isinstance(limit, int) and limit < needed:
        raise ValueError(
            f"{where} {limit} connections; this worker needs {needed} "
            "(a blocking POP per queue, one per handler, one for the heartbeat, one for the ACKs)"
        )
    timeout = socket_timeout(client)
    if timeout is not None and timeout * 1000 <= block_ms:
        raise ValueError(
            f"block_ms={block_ms} needs the client's socket_timeout to be longer than {block_ms / 1000:g} s "
            f"(it is {timeout:g} s): a blocking POP would time out; lower block_ms or raise socket_timeout"
        )
