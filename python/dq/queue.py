"""Queue and ShardedQueue over a blocking redis-py client (Redis or RedisCluster)."""

from __future__ import annotations

import time
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

import redis
import redis.exceptions

from ._core import errors, queue as calls, sharding
from ._core.plans import Call, Plan
from ._core.records import Delivery, Entry, Schedule

Client = Any  # redis.Redis or redis.cluster.RedisCluster
Id = Union[str, bytes, Delivery]


def execute(client: Client, call: Call) -> Any:
    """Runs one command; payloads come back as bytes whatever decode_responses says."""
    try:
        reply = client.execute_command(*call.args, NEVER_DECODE=True)
    except redis.exceptions.ResponseError as e:
        raise errors.translate(e) from e
    return call.parse(reply)


def drive(client: Client, plan: Plan) -> Any:
    try:
        step = next(plan)
        while True:
            if isinstance(step, float):
                time.sleep(step)
                step = plan.send(None)
                continue
            results: List[Any] = []
            for call in step:
                try:
                    results.append(execute(client, call))
                except errors.DqError as e:
                    results.append(e)
            step = plan.send(results)
    except StopIteration as stop:
        return stop.value


def _check_client(client: Any) -> None:
    if not hasattr(client, "execute_command"):
        raise TypeError(f"client must be a redis-py Redis or RedisCluster, got {type(client).__name__}")
    if getattr(client, "_dq_async", False) or _is_async(client):
        raise TypeError("this is the blocking API: give an asyncio client to dq.asyncio instead")


def _is_async(client: Any) -> bool:
    import inspect

    return inspect.iscoroutinefunction(getattr(client, "execute_command", None))


class _Base:
    _core: Any

    def __init__(self, client: Client) -> None:
        _check_client(client)
        self.client = client

    @property
    def name(self) -> str:
        """The queue's name."""
        return self._core.name

    def _run(self, plan: Plan) -> Any:
        return drive(self.client, plan)

    def pop(self, count: int = 1, block_ms: Optional[int] = None, lease_ms: Optional[int] = None) -> List[Delivery]:
        """DQ.POP: up to `count` deliveries, [] when nothing was ready."""
        return self._run(self._core.pop(count, block_ms, lease_ms))

    def ack(self, *ids: Id) -> int:
        """DQ.ACK: how many of the ids were in flight and are now gone."""
        return self._run(self._core.ack(ids))

    def stats(self) -> Dict[str, Any]:
        """DQ.STATS as a dict: field names as the server gives them, values
        int or None (`rate` a str such as "100/1s")."""
        return self._run(self._core.stats())

    def peek(self, state: str, count: int = 10) -> List[Entry]:
        """DQ.PEEK: up to `count` entries of one state, in the order they leave it."""
        return self._run(self._core.peek(state, count))

    def scan(self, state: Optional[str] = None, count: Optional[int] = None) -> Iterator[Entry]:
        """Every entry (of one state), paging with DQ.SCAN cursors."""
        for part in self._core.parts:
            part.scan_call("0", state, count)  # check the arguments now, not at the first next()
        return self._scan(state, count)

    def _scan(self, state: Optional[str], count: Optional[int]) -> Iterator[Entry]:
        for part in self._core.parts:
            cursor = "0"
            while True:
                cursor, entries = execute(self.client, part.scan_call(cursor, state, count))
                yield from entries
                if cursor == "0":
                    break

    def redrive(self, count: Optional[int] = None, ids: Optional[Sequence[Id]] = None) -> int:
        """DQ.REDRIVE: dead messages back to ready; how many moved."""
        return self._run(self._core.redrive(count, ids))

    def purge(self, state: Optional[str] = None) -> int:
        """DQ.PURGE: how many messages were deleted."""
        return self._run(self._core.purge(state))

    def config(self) -> Dict[str, Any]:
        """DQ.CONFIG: the values in force and where each comes from."""
        return self._run(self._core.config())

    def config_set(
        self,
        *,
        lease_ms: Union[int, str, None] = None,
        max_attempts: Union[int, str, None] = None,
        backoff: Optional[str] = None,
        rate: Union[str, int, None] = None,
        max_inflight: Union[int, str, None] = None,
    ) -> None:
        """DQ.CONFIG SET; "DEFAULT" removes the queue's own value. `rate`
        ("100/1s": at most 100 deliveries in any second) and `max_inflight`
        (at most n in flight at once) limit the queue across all its
        consumers; 0 removes either. A ShardedQueue splits them: each shard
        gets floor(n / shards)."""
        return self._run(self._core.config_set(lease_ms=lease_ms, max_attempts=max_attempts, backoff=backoff,
                                               rate=rate, max_inflight=max_inflight))

    def schedule(
        self,
        name: Union[str, bytes],
        payload: Union[bytes, str],
        *,
        every: Union[str, int, None] = None,
        cron: Optional[str] = None,
        tz: Optional[str] = None,
        start: Optional[int] = None,
        end: Optional[int] = None,
        limit: Optional[int] = None,
        missed: Optional[str] = None,
        overlap: Optional[str] = None,
        nx: bool = False,
        priority: Optional[int] = None,
        max_attempts: Optional[int] = None,
        backoff: Optional[str] = None,
        group: Optional[Union[str, bytes]] = None,
        ttl_ms: Optional[int] = None,
    ) -> Optional[int]:
        """DQ.SCHEDULE: creates or replaces the recurring schedule `name`,
        `every` a duration ("5m", or int ms) or `cron` a five-field
        expression (in `tz`, default UTC). Each run adds a message with id
        `name@T`, due at T, with this payload and options. Returns the next
        run time (Unix ms), or None when no run is left or `nx` found the
        schedule. On a ShardedQueue the schedule lives on shard_for(name)."""
        return self._run(
            self._core.schedule(
                name, payload, every=every, cron=cron, tz=tz, start=start, end=end, limit=limit, missed=missed,
                overlap=overlap, nx=nx, priority=priority, max_attempts=max_attempts, backoff=backoff, group=group,
                ttl_ms=ttl_ms,
            )
        )

    def unschedule(self, *names: Union[str, bytes]) -> int:
        """DQ.UNSCHEDULE: how many of the schedules existed (their runs' messages stay)."""
        return self._run(self._core.unschedule(names))

    def schedules(self) -> List[Schedule]:
        """DQ.SCHEDULES: every schedule, by name (a ShardedQueue's merged)."""
        return self._run(self._core.schedules())

    def pause(self, for_ms: Optional[int] = None) -> None:
        """DQ.PAUSE: POP delivers nothing until resume(), or for `for_ms`."""
        return self._run(self._core.pause(for_ms))

    def resume(self) -> bool:
        """DQ.RESUME: whether the queue was paused (a ShardedQueue: any shard)."""
        return self._run(self._core.resume())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class Queue(_Base):
    """One dq queue: each method is one DQ.* command."""

    def __init__(self, client: Client, name: Union[str, bytes]) -> None:
        self._core = calls.QueueCore(name)
        super().__init__(client)

    def add(
        self,
        payload: Union[bytes, str],
        *,
        delay_ms: Optional[int] = None,
        at_ms: Optional[int] = None,
        id: Optional[Union[str, bytes]] = None,
        nx: bool = False,
        xx: bool = False,
        priority: Optional[int] = None,
        max_attempts: Optional[int] = None,
        backoff: Optional[str] = None,
        group: Optional[Union[str, bytes]] = None,
        ttl_ms: Optional[int] = None,
    ) -> Optional[str]:
        """DQ.ADD: the id, or None when NX found the id / XX did not."""
        return self._run(
            self._core.add(
                payload, delay_ms=delay_ms, at_ms=at_ms, id=id, nx=nx, xx=xx, priority=priority,
                max_attempts=max_attempts, backoff=backoff, group=group, ttl_ms=ttl_ms,
            )
        )

    def nack(
        self,
        id: Id,
        *,
        delay_ms: Optional[int] = None,
        dead: bool = False,
        attempt: Optional[int] = None,
        error: Optional[str] = None,
    ) -> str:
        """DQ.NACK: the new state ("delayed", "ready" or "dead"). A Delivery
        passes its own attempt. Raises StaleDelivery, or UnknownMessage
        (without attempt, when the id is not in flight)."""
        return self._run(self._core.nack(id, delay_ms=delay_ms, dead=dead, attempt=attempt, error=error))

    def touch(self, id: Id, *, lease_ms: Optional[int] = None, attempt: Optional[int] = None) -> int:
        """DQ.TOUCH: the new lease deadline (Unix ms)."""
        return self._run(self._core.touch(id, lease_ms=lease_ms, attempt=attempt))

    def get(self, id: Union[str, bytes]) -> Optional[Dict[str, Any]]:
        """DQ.GET: the message's record, or None."""
        return self._run(self._core.get(id))

    def cancel(self, *ids: Union[str, bytes]) -> int:
        """DQ.CANCEL: how many of the ids existed."""
        return self._run(self._core.cancel(ids))


class ShardedQueue(_Base):
    """One logical queue over `shards` dq queues (docs/sharding.md)."""

    def __init__(self, client: Client, name: Union[str, bytes], shards: int) -> None:
        self._core = sharding.ShardedCore(name, shards)
        super().__init__(client)
        self.shards: List[Queue] = [Queue(client, core.key) for core in self._core.cores]

    @property
    def shard_names(self) -> List[str]:
        return [core.name for core in self._core.cores]

    def shard_for(self, basis: Union[str, bytes]) -> int:
        """The shard index of a group, shard key or id."""
        return self._core.shard_for(basis)

    def add(
        self,
        payload: Union[bytes, str],
        *,
        delay_ms: Optional[int] = None,
        at_ms: Optional[int] = None,
        id: Optional[Union[str, bytes]] = None,
        nx: bool = False,
        xx: bool = False,
        priority: Optional[int] = None,
        max_attempts: Optional[int] = None,
        backoff: Optional[str] = None,
        group: Optional[Union[str, bytes]] = None,
        ttl_ms: Optional[int] = None,
        shard_key: Optional[Union[str, bytes]] = None,
    ) -> Optional[str]:
        """DQ.ADD on the shard of the group, else the shard key, else the id
        (a random 32-hex id when none is given)."""
        return self._run(
            self._core.add(
                payload, delay_ms=delay_ms, at_ms=at_ms, id=id, nx=nx, xx=xx, priority=priority,
                max_attempts=max_attempts, backoff=backoff, group=group, ttl_ms=ttl_ms, shard_key=shard_key,
            )
        )

    def nack(
        self,
        id: Id,
        *,
        delay_ms: Optional[int] = None,
        dead: bool = False,
        attempt: Optional[int] = None,
        error: Optional[str] = None,
        group: Optional[Union[str, bytes]] = None,
        shard_key: Optional[Union[str, bytes]] = None,
    ) -> str:
        """DQ.NACK on the delivery's shard (or the group's / shard key's / id's)."""
        return self._run(
            self._core.nack(id, delay_ms=delay_ms, dead=dead, attempt=attempt, error=error, group=group,
                            shard_key=shard_key)
        )

    def touch(
        self,
        id: Id,
        *,
        lease_ms: Optional[int] = None,
        attempt: Optional[int] = None,
        group: Optional[Union[str, bytes]] = None,
        shard_key: Optional[Union[str, bytes]] = None,
    ) -> int:
        """DQ.TOUCH on the delivery's shard (or the group's / shard key's / id's)."""
        return self._run(self._core.touch(id, lease_ms=lease_ms, attempt=attempt, group=group, shard_key=shard_key))

    def get(
        self,
        id: Union[str, bytes],
        *,
        group: Optional[Union[str, bytes]] = None,
        shard_key: Optional[Union[str, bytes]] = None,
    ) -> Optional[Dict[str, Any]]:
        """DQ.GET on the shard of the group / shard key, else on every shard."""
        return self._run(self._core.get(id, group=group, shard_key=shard_key))

    def cancel(
        self,
        *ids: Union[str, bytes],
        group: Optional[Union[str, bytes]] = None,
        shard_key: Optional[Union[str, bytes]] = None,
    ) -> int:
        """DQ.CANCEL on the shard of the group / shard key, else on every shard."""
        return self._run(self._core.cancel(ids, group=group, shard_key=shard_key))

    def __repr__(self) -> str:
        return f"ShardedQueue({self.name!r}, shards={self._core.shards})"


def queues(client: Client) -> List[str]:
    """DQ.QUEUES; on a cluster, every master's, merged and sorted by bytes."""
    _check_client(client)
    call = calls.queues_call()
    if hasattr(client, "get_primaries"):
        names: List[str] = []
        for node in client.get_primaries():
            try:
                reply = client.execute_command(*call.args, target_nodes=node, NEVER_DECODE=True)
            except redis.exceptions.ResponseError as e:
                raise errors.translate(e) from e
            names += call.parse(reply)
        return sorted(set(names), key=lambda n: n.encode("utf-8", "surrogateescape"))
    return execute(client, call)
