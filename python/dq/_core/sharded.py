"""ShardedQueue's methods, written once for both flavors: one logical
queue over N dq queues (docs/sharding.md). Each routes to a shard, or asks
every shard and merges (sharding.py has the arithmetic); the commands
themselves are the shards' Queue methods (queue.py)."""

from __future__ import annotations

import time
from typing import Any, AsyncIterator, Callable, Dict, Generic, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from .args import MAX_ID_BYTES, Duration, bytes_arg, id_arg, queue_name
from .events import read_events, reader_args, sharded_after
from .plans import Call, Merge, Plan, Stream, all_of, command, one, stream, then
from .queue import Commands, Id, Q, QueueCommands, T, pop_call, wait_plan
from .records import Delivery, Event, JobOutcome
from .replies import as_text
from .sharding import random_id, shard_names, shard_of, split_limit

Queue = QueueCommands  # the shards' methods (each shard is a Queue)

# What the flavors' events() returns: typing.get_type_hints() evaluates its
# annotation ("Iterator[Event]", "AsyncIterator[Event]") in this module.
FLAVOR_ITERATORS = (Iterator, AsyncIterator)


class ShardedCommands(Commands, Generic[Q]):
    """One logical queue over `shards` dq queues (docs/sharding.md)."""

    # The flavor's Queue: each shard is one.
    _queue_class: Callable[[Any, bytes], Q]

    def __init__(self, client: Any, name: Union[str, bytes], shards: int) -> None:
        key = queue_name(name)
        if b"{" in key or b"}" in key:
            raise ValueError(f"a sharded queue's name must not contain '{{' or '}}': {as_text(key)!r}")
        if isinstance(shards, bool) or not isinstance(shards, int):
            raise TypeError(f"shards must be an int, got {type(shards).__name__}")
        if not 1 <= shards <= 1024 or shards & (shards - 1):
            raise ValueError(f"shards must be a power of two from 1 to 1024, got {shards}")
        self._key = key
        self._name = as_text(key) or ""
        self._check_client(client)
        self.client = client
        self.shards: List[Q] = [self._queue_class(client, n) for n in shard_names(key, shards)]
        self._by_name = {q.name: q for q in self.shards}
        self._next = 0  # the shard pop() asks first

    @property
    def shard_names(self) -> List[str]:
        return [q.name for q in self.shards]

    def shard_for(self, basis: Union[str, bytes]) -> int:
        """The shard index of a group, shard key or id."""
        return shard_of(bytes_arg("basis", basis, allow_empty=False, limit=MAX_ID_BYTES), len(self.shards))

    def __repr__(self) -> str:
        return f"ShardedQueue({self.name!r}, shards={len(self.shards)})"

    # --- routing ---------------------------------------------------------------------------------

    def _basis(self, what: str, value: Any) -> Q:
        return self.shards[shard_of(bytes_arg(what, value, allow_empty=False, limit=MAX_ID_BYTES), len(self.shards))]

    def _routed(self, id: Any = None, group: Any = None, shard_key: Any = None) -> Optional[Q]:
        """The shard named by a Delivery, a group, a shard key (in that order), else None."""
        if isinstance(id, Delivery):
            shard = self._by_name.get(id.queue)
            if shard is None:
                raise ValueError(f"delivery {id.id!r} came from queue {id.queue!r}, not a shard of {self.name!r}")
            return shard
        if group is not None:
            return self._basis("group", group)
        if shard_key is not None:
            return self._basis("shard_key", shard_key)
        return None

    def _of_id(self, id: Any, group: Any, shard_key: Any) -> Q:
        """The shard of a Delivery, a group, a shard key, else of the id."""
        return self._routed(id, group, shard_key) or self.shards[shard_of(id_arg(id), len(self.shards))]

    def _of_message(self, id: Any, group: Any, shard_key: Any) -> Q:
        """The shard of a message being added: of its group, else its shard key, else its id."""
        return self._routed(None, group, shard_key) or self.shards[shard_of(id_arg(id), len(self.shards))]

    def _fan(self, call: Callable[[QueueCommands], Call[T]], merge: Callable[[List[T]], T]) -> Plan[T]:
        return then(all_of([one(call(q)) for q in self.shards]), merge)

    def _holder(self, schedule: bytes) -> QueueCommands:
        # A schedule is placed by its name as a message is by its basis.
        return self.shards[shard_of(schedule, len(self.shards))]

    def _parts(self) -> List[QueueCommands]:
        return list(self.shards)

    def _of_group(self, group: bytes) -> QueueCommands:
        # Where add() puts the group's messages: its limits and pause hold there.
        return self._basis("group", group)

    def _split(self, what: str, n: int) -> Optional[int]:
        # The whole queue's limits, split: each shard gets floor(n / shards).
        return split_limit(what, n, len(self.shards))

    def _pop(self, count: int, block_ms: Optional[int], lease_ms: Optional[int]) -> Plan[List[Delivery]]:
        pop_call(self.shards[0], count, block_ms, lease_ms)  # the arguments are checked once, now
        return self._pop_round(count, block_ms, lease_ms)

    def _pop_round(self, count: int, block_ms: Optional[int], lease_ms: Optional[int]) -> Plan[List[Delivery]]:
        """The shards in turn without blocking; with block_ms, rounds again,
        pausing 10 ms growing to 250 ms, until something comes or the time is up."""
        deadline = None if block_ms is None else time.monotonic() + block_ms / 1000
        pause = 0.01
        shards = len(self.shards)
        while True:
            got: List[Delivery] = []
            for _ in range(shards):
                shard = self.shards[self._next]
                self._next = (self._next + 1) % shards
                got += yield from one(pop_call(shard, count - len(got), None, lease_ms))
                if len(got) >= count:
                    break
            if got or deadline is None:
                return got
            left = deadline - time.monotonic() if block_ms else pause
            if block_ms and left <= 0:
                return got
            yield min(pause, left)
            pause = min(pause * 2, 0.25)

    def _ack(self, ids: Sequence[Id]) -> Plan[int]:
        # A Delivery goes to its shard; a bare id to every shard.
        per: Dict[str, List[Id]] = {}
        for i in ids:
            id_arg(i)
            routed = self._routed(i)
            for shard in [routed] if routed else self.shards:
                per.setdefault(shard.name, []).append(i)
        return then(all_of([Queue.ack.plan(self._by_name[n], *v) for n, v in per.items()]), sum)

    def _done(self, results: List[Tuple[Id, bytes]]) -> Plan[int]:
        # As _ack: a Delivery's result goes to its shard; a bare id's to
        # every shard, where only the one holding it in flight counts it.
        per: Dict[str, List[Tuple[Id, bytes]]] = {}
        for pair in results:
            routed = self._routed(pair[0])
            for shard in [routed] if routed else self.shards:
                per.setdefault(shard.name, []).append(pair)
        return then(all_of([Queue.done.plan(self._by_name[n], *v) for n, v in per.items()]), sum)

    def _redrive(self, count: Optional[int], ids: Optional[List[Id]]) -> Plan[int]:
        if ids is not None:
            return then(all_of([Queue.redrive.plan(q, ids=ids) for q in self.shards]), sum)
        return self._redrive_count(count)

    def _redrive_count(self, count: Optional[int]) -> Plan[int]:
        """Up to `count` (else all) in all, shard after shard."""
        moved = 0
        for shard in self.shards:
            if count is not None and moved >= count:
                break
            moved += yield from Queue.redrive.plan(shard, None if count is None else count - moved)
        return moved

    # --- the methods with routing arguments --------------------------------------------------------

    @command
    def add(
        self,
        payload: Union[bytes, str],
        *,
        delay_ms: Optional[Duration] = None,
        at_ms: Optional[int] = None,
        id: Optional[Union[str, bytes]] = None,
        nx: bool = False,
        xx: bool = False,
        priority: Optional[int] = None,
        max_attempts: Optional[int] = None,
        backoff: Optional[str] = None,
        group: Optional[Union[str, bytes]] = None,
        ttl_ms: Optional[Duration] = None,
        retain_ms: Optional[Duration] = None,
        shard_key: Optional[Union[str, bytes]] = None,
    ) -> Plan[Optional[str]]:
        """DQ.ADD on the shard of the group, else the shard key, else the id
        (a random 32-hex id when none is given)."""
        if xx and id is None:
            raise ValueError("xx needs an id")
        if shard_key is not None:
            bytes_arg("shard_key", shard_key, allow_empty=False, limit=MAX_ID_BYTES)
        if id is None:
            id = random_id()
        return Queue.add.plan(
            self._of_message(id, group, shard_key), payload, delay_ms=delay_ms, at_ms=at_ms, id=id, nx=nx, xx=xx,
            priority=priority, max_attempts=max_attempts, backoff=backoff, group=group, ttl_ms=ttl_ms,
            retain_ms=retain_ms,
        )

    @command
    def nack(
        self,
        id: Id,
        *,
        delay_ms: Optional[Duration] = None,
        dead: bool = False,
        attempt: Optional[int] = None,
        error: Optional[str] = None,
        group: Optional[Union[str, bytes]] = None,
        shard_key: Optional[Union[str, bytes]] = None,
    ) -> Plan[str]:
        """DQ.NACK on the delivery's shard (or the group's / shard key's / id's)."""
        shard = self._of_id(id, group, shard_key)
        return Queue.nack.plan(shard, id, delay_ms=delay_ms, dead=dead, attempt=attempt, error=error)

    @command
    def touch(
        self,
        id: Id,
        *,
        lease_ms: Optional[Duration] = None,
        attempt: Optional[int] = None,
        group: Optional[Union[str, bytes]] = None,
        shard_key: Optional[Union[str, bytes]] = None,
    ) -> Plan[int]:
        """DQ.TOUCH on the delivery's shard (or the group's / shard key's / id's)."""
        return Queue.touch.plan(self._of_id(id, group, shard_key), id, lease_ms=lease_ms, attempt=attempt)

    @command
    def progress(
        self,
        id: Id,
        value: Union[bytes, str],
        *,
        lease_ms: Optional[Duration] = None,
        attempt: Optional[int] = None,
        group: Optional[Union[str, bytes]] = None,
        shard_key: Optional[Union[str, bytes]] = None,
    ) -> Plan[int]:
        """DQ.TOUCH ... PROGRESS on the delivery's shard (or the group's / shard key's / id's)."""
        shard = self._of_id(id, group, shard_key)
        return Queue.progress.plan(shard, id, value, lease_ms=lease_ms, attempt=attempt)

    @command
    def wait(
        self,
        id: Id,
        timeout_ms: Optional[Duration] = None,
        *,
        group: Optional[Union[str, bytes]] = None,
        shard_key: Optional[Union[str, bytes]] = None,
    ) -> Plan[Optional[JobOutcome]]:
        """DQ.WAIT on the shard that holds the id: the shard of the group or
        shard key it was added with, else of the id itself (where add() put
        a message added without either). A message on another shard is
        "gone" there: give the group or shard key it was added with."""
        shard = self._of_id(id, group, shard_key)
        return wait_plan(shard, shard._own_id(id), timeout_ms)

    @stream
    def events(
        self, after: Union[Mapping[str, int], str, None] = None, *, count: int = 100, follow: bool = True
    ) -> Stream[Event]:
        """Every shard's events, merged: one reader per shard (Queue.events,
        the same `count` and `follow`), run side by side — dq: a thread
        each, dq.asyncio: a task each — each event given as it comes, in
        its shard's order; there is no order between shards. Each shard's
        log has its own seqs: `after` maps shard names (shard_names) to the
        seq to resume after, and a shard left out starts at its oldest
        event kept; None starts every shard there, "now" every shard at
        what is written from now on. Keep `positions[event.queue] =
        event.seq` and pass `after=positions` to resume. An EventGap or
        EventLogRestarted of one shard ends the reader (its `queue` names
        the shard); the other shards' events given before it are in your
        positions. A closed reader's threads end when their blocking read
        does (at most the client's socket_timeout, else 5 s)."""
        starts = sharded_after(after, self.shard_names)
        count, block = reader_args(self.client, count, follow)
        return _merged([read_events(q._key, q.name, starts[q.name], count, block) for q in self.shards])

    @command
    def get(
        self,
        id: Union[str, bytes],
        *,
        group: Optional[Union[str, bytes]] = None,
        shard_key: Optional[Union[str, bytes]] = None,
    ) -> Plan[Optional[Dict[str, Any]]]:
        """DQ.GET on the shard of the group / shard key, else on every shard."""
        routed = self._routed(None, group, shard_key)
        if routed is not None:
            return Queue.get.plan(routed, id)
        found = all_of([Queue.get.plan(q, id) for q in self.shards])
        return then(found, lambda records: next((r for r in records if r is not None), None))

    @command
    def cancel(
        self,
        *ids: Union[str, bytes],
        group: Optional[Union[str, bytes]] = None,
        shard_key: Optional[Union[str, bytes]] = None,
    ) -> Plan[int]:
        """DQ.CANCEL on the shard of the group / shard key, else on every shard."""
        routed = self._routed(None, group, shard_key)
        if routed is not None:
            return Queue.cancel.plan(routed, *ids)
        return then(all_of([Queue.cancel.plan(q, *ids) for q in self.shards]), sum)


def _merged(readers: List[Stream[Event]]) -> Stream[Event]:
    yield Merge(readers)
