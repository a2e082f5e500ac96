"""The public methods of Queue and ShardedQueue, each written once for
both flavors (see plans.py): each checks its arguments, builds its DQ.*
command and says how to read the reply; where the command goes and how the
replies of several shards are merged is the queue kind's (Queue here,
ShardedQueue in sharded.py)."""

from __future__ import annotations

import math
import time
from typing import (
    Any,
    AsyncIterator,
    Callable,
    Dict,
    Iterator,
    List,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
    Union,
)

from .args import (
    INT32_MAX,
    MAX_TIME,
    MISSED,
    OVERLAP,
    UINT32_MAX,
    UINT64_MAX,
    Duration,
    backoff_arg,
    bytes_arg,
    choice_arg,
    count_limit_arg,
    group_arg,
    group_limit_arg,
    id_arg,
    id_list,
    int_arg,
    message_options,
    ms_arg,
    order_arg,
    progress_arg,
    queue_name,
    rate_arg,
    result_arg,
    schedule_name_arg,
    state_arg,
    truncate_error,
)
from .clients import longest_block_ms, single_connection
from .errors import UnknownMessage
from .events import MAX_EVENTS, After, after_arg, read_events, reader_args
from .plans import Call, Items, Plan, Stream, all_of, command, one, stream, then
from .records import Delivery, Entry, Event, Group, JobOutcome, Schedule
from .sharding import merge_config, merge_entries, merge_schedules, merge_stats
from .replies import (
    as_bytes,
    as_int,
    as_text,
    ok,
    parse_config,
    parse_entries,
    parse_get,
    parse_groups,
    parse_scan,
    parse_schedules,
    parse_stats,
    parse_wait,
)

Id = Union[str, bytes, Delivery]
# One message's result for DQ.DONE: (id, result).
Result = Tuple[Id, Union[bytes, str]]
T = TypeVar("T")


# What the flavors' scan() and groups() return: typing.get_type_hints()
# evaluates their annotations ("Iterator[Entry]", "AsyncIterator[Group]") in
# this module.
FLAVOR_ITERATORS = (Iterator, AsyncIterator)


class Commands:
    """The methods Queue and ShardedQueue share. The kind says where a
    command goes (`_fan`, `_holder`, `_parts`) and runs the commands whose
    routing is its own (`_pop`, `_ack`, `_redrive`); the flavor's base
    class, first among the bases, checks the client."""

    client: Any
    _key: bytes
    _name: str

    @staticmethod
    def _check_client(client: Any) -> None:
        raise NotImplementedError

    @property
    def name(self) -> str:
        """The queue's name."""
        return self._name

    # --- what the kind decides -----------------------------------------------------------------

    def _fan(self, call: Callable[[QueueCommands], Call[T]], merge: Callable[[List[T]], T]) -> Plan[T]:
        """The command on the queue, or on every shard with the replies merged."""
        raise NotImplementedError

    def _holder(self, schedule: bytes) -> QueueCommands:
        """The queue that holds a schedule (a ShardedQueue: shard_for(name))."""
        raise NotImplementedError

    def _parts(self) -> List[QueueCommands]:
        """The dq queues: the queue, or the shards."""
        raise NotImplementedError

    def _of_group(self, group: bytes) -> QueueCommands:
        """The queue that holds a group's messages (a ShardedQueue: the shard add() puts them on)."""
        raise NotImplementedError

    def _pop(self, count: int, block_ms: Optional[int], lease_ms: Optional[int]) -> Plan[List[Delivery]]:
        raise NotImplementedError

    def _ack(self, ids: Sequence[Id]) -> Plan[int]:
        raise NotImplementedError

    def _done(self, results: List[Tuple[Id, bytes]]) -> Plan[int]:
        raise NotImplementedError

    def _redrive(self, count: Optional[int], ids: Optional[List[Id]]) -> Plan[int]:
        raise NotImplementedError

    def _split(self, what: str, n: int) -> Optional[int]:
        """A whole-queue limit n as each shard gets it; None: not split."""
        return None

    # --- the methods ---------------------------------------------------------------------------

    @command
    def pop(
        self, count: int = 1, block_ms: Optional[Duration] = None, lease_ms: Optional[Duration] = None
    ) -> Plan[List[Delivery]]:
        """DQ.POP: up to `count` deliveries, [] when nothing was ready.
        `block_ms` and `lease_ms` are durations: int ms, a timedelta, or "30s"."""
        if block_ms is not None:
            block_ms = ms_arg("block_ms", block_ms, 0)
        if lease_ms is not None:
            lease_ms = ms_arg("lease_ms", lease_ms, 1)
        return self._pop(count, block_ms, lease_ms)

    @command
    def ack(self, *ids: Id) -> Plan[int]:
        """DQ.ACK: how many of the ids were in flight and are now finished
        (gone, or kept as done, without a result, while a retention holds)."""
        if not ids:
            raise ValueError("ack needs at least one id")
        return self._ack(ids)

    @command
    def done(self, *results: Result) -> Plan[int]:
        """DQ.DONE: as ack(), and each message keeps its result while its
        retention (RETAIN) lasts, for wait(), get() and the dashboard;
        without a retention it is gone as after an ACK. Each argument is an
        (id, result) pair, the id a str or a Delivery, the result str (sent
        as UTF-8) or bytes (b"" is a result; at most 512 MiB): done((d,
        b'{"charged": true}')). How many of the ids were in flight and are
        now finished."""
        if not results:
            raise ValueError("done needs at least one (id, result) pair")
        pairs: List[Tuple[Id, bytes]] = []
        for pair in results:
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise TypeError(f"each result must be an (id, result) pair such as ('order:1', b'ok'), got {pair!r}")
            id_arg(pair[0])
            pairs.append((pair[0], result_arg(pair[1])))
        return self._done(pairs)

    @command
    def stats(self) -> Plan[Dict[str, Any]]:
        """DQ.STATS as a dict: field names as the server gives them, values
        int or None (`rate` a str such as "100/1s"); `groups` counts the
        groups that exist now (a ShardedQueue: every shard's, summed, as
        the other counts)."""
        return self._fan(lambda q: Call(("DQ.STATS", q._key), parse_stats), merge_stats)

    @command
    def peek(self, state: str, count: int = 10) -> Plan[List[Entry]]:
        """DQ.PEEK: up to `count` entries of one state ("delayed", "ready",
        "inflight", "dead" or "done"), in the order they leave it (done:
        earliest finished first, as retention drops them)."""
        args = (state_arg(state), b"COUNT", int_arg("count", count, 1, 10000))
        return self._fan(lambda q: Call(("DQ.PEEK", q._key, *args), parse_entries), lambda p: merge_entries(p, count))

    @stream
    def scan(self, state: Optional[str] = None, count: Optional[int] = None) -> Stream[Entry]:
        """Every entry (of one state), paging with DQ.SCAN cursors (dq.asyncio: an async iterator)."""
        options: List[Any] = []
        if state is not None:
            options += [b"STATE", state_arg(state)]
        if count is not None:
            options += [b"COUNT", int_arg("count", count, 1, 10000)]
        return _scan(self._parts(), options)  # the arguments are checked now, not at the first next()

    @command
    def redrive(self, count: Optional[int] = None, ids: Optional[Sequence[Id]] = None) -> Plan[int]:
        """DQ.REDRIVE: dead messages back to ready; how many moved."""
        if count is not None and ids is not None:
            raise ValueError("count and ids cannot be used together")
        if count is not None:
            int_arg("count", count, 1, 10000)
        listed = None if ids is None else id_list(ids)
        if listed is not None:
            if not listed:
                raise ValueError("ids must not be empty")
            for i in listed:
                id_arg(i)
        return self._redrive(count, listed)

    @command
    def purge(self, state: Optional[str] = None) -> Plan[int]:
        """DQ.PURGE: how many messages were deleted (of one state, "done"
        included, else all)."""
        args = () if state is None else (state_arg(state),)
        return self._fan(lambda q: Call(("DQ.PURGE", q._key, *args), int), sum)

    @command
    def config(self) -> Plan[Dict[str, Any]]:
        """DQ.CONFIG: the values in force and where each comes from."""
        return self._fan(lambda q: Call(("DQ.CONFIG", q._key), parse_config), merge_config)

    @command
    def config_set(
        self,
        *,
        lease_ms: Union[Duration, None] = None,
        max_attempts: Union[int, str, None] = None,
        backoff: Optional[str] = None,
        rate: Union[str, int, None] = None,
        max_inflight: Union[int, str, None] = None,
        retain_ms: Union[Duration, None] = None,
        retain_max: Union[int, str, None] = None,
        events: Union[int, str, None] = None,
        group_limit: Union[int, str, None] = None,
        group_rate: Union[str, int, None] = None,
        order: Optional[str] = None,
    ) -> Plan[None]:
        """DQ.CONFIG SET; "DEFAULT" removes the queue's own value. `lease_ms`
        is a duration (int ms, a timedelta, or "30s"). `rate`
        ("100/1s": at most 100 deliveries in any second) and `max_inflight`
        (at most n in flight at once) limit the queue across all its
        consumers; 0 removes either. `retain_ms` (a duration such as "1h";
        0: not kept) keeps messages finished by ACK or DONE as done, with
        their result, that long; `retain_max` keeps at most n of them, the
        earliest finished dropped first (0: no cap). `events` keeps the
        queue's last n events for events() (0 or "DEFAULT": none). The
        groups (add(group=...)): `group_limit` (1 to 1000000; "DEFAULT":
        1) lets at most n messages of each group be out at once,
        `group_rate` ("10/1s"; 0 or "DEFAULT" removes it) at most n
        deliveries of each group in any window of that length, and `order`
        "fair" makes POP serve the groups with a ready message in turn
        ("priority", the default: by priority across groups). A
        ShardedQueue splits rate, max_inflight and retain_max: each shard
        gets floor(n / shards); `events` is per shard, each shard keeping
        its own last n (each has its own log); group_limit, group_rate and
        order go to every shard as given (a group lives on one shard)."""
        args: List[Any] = []
        if lease_ms == "DEFAULT":
            args += [b"LEASE", b"DEFAULT"]
        elif lease_ms is not None:
            args += [b"LEASE", ms_arg("lease_ms", lease_ms, 1)]
        if max_attempts == "DEFAULT":
            args += [b"MAXATTEMPTS", b"DEFAULT"]
        elif isinstance(max_attempts, str):
            raise ValueError(f"max_attempts must be an int or 'DEFAULT', got {max_attempts!r}")
        elif max_attempts is not None:
            args += [b"MAXATTEMPTS", int_arg("max_attempts", max_attempts, 1, INT32_MAX)]
        if backoff is not None:
            args += [b"BACKOFF", backoff_arg("backoff", backoff)]
        if rate is not None:
            value, parsed = rate_arg(rate)
            split = None if parsed is None else self._split("rate", parsed[0])
            if parsed is not None and split is not None:
                value = b"%d/%s" % (split, parsed[1].encode())
            args += [b"RATE", value]
        if max_inflight is not None:
            value, n = count_limit_arg("max_inflight", max_inflight, UINT32_MAX)
            split = None if n is None else self._split("max_inflight", n)
            if split is not None:
                value = b"%d" % split
            args += [b"MAXINFLIGHT", value]
        if retain_ms == "DEFAULT":
            args += [b"RETAIN", b"DEFAULT"]
        elif retain_ms is not None:
            args += [b"RETAIN", ms_arg("retain_ms", retain_ms, 0)]
        if retain_max is not None:
            value, n = count_limit_arg("retain_max", retain_max, MAX_TIME)  # the server's limit: 2^53 - 1 too
            split = None if n is None else self._split("retain_max", n)
            if split is not None:
                value = b"%d" % split
            args += [b"RETAINMAX", value]
        if events is not None:
            args += [b"EVENTS", count_limit_arg("events", events, MAX_EVENTS)[0]]
        # A group's limits hold on the one shard holding the group: not split.
        if group_limit is not None:
            args += [b"GROUPLIMIT", group_limit_arg(group_limit)]
        if group_rate is not None:
            args += [b"GROUPRATE", rate_arg(group_rate, "group_rate")[0]]
        if order is not None:
            args += [b"ORDER", order_arg(order)]
        if not args:
            raise ValueError("config_set needs at least one of lease_ms, max_attempts, backoff, rate, max_inflight, "
                             "retain_ms, retain_max, events, group_limit, group_rate, order")
        return self._fan(lambda q: Call(("DQ.CONFIG", q._key, b"SET", *args), ok), _none)

    @command
    def schedule(
        self,
        name: Union[str, bytes],
        payload: Union[bytes, str],
        *,
        every: Optional[Duration] = None,
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
        ttl_ms: Optional[Duration] = None,
    ) -> Plan[Optional[int]]:
        """DQ.SCHEDULE: creates or replaces the recurring schedule `name`,
        `every` a duration of at least 1 s ("5m", int ms, a timedelta) or `cron` a
        five-field expression (in `tz`, default UTC). Each run adds a message with id
        `name@T`, due at T, with this payload and options. Returns the next
        run time (Unix ms), or None when no run is left or `nx` found the
        schedule. On a ShardedQueue the schedule lives on shard_for(name)."""
        key = schedule_name_arg(name)
        args: List[Any] = [key, bytes_arg("payload", payload)]
        if (every is None) == (cron is None):
            raise ValueError("a schedule needs exactly one of every (a duration such as '5m', or ms) and cron")
        if every is not None:
            # At least 1 s, as the server (and the other libraries) require.
            args += [b"EVERY", ms_arg("every", every, 1000)]
        else:
            if not isinstance(cron, str):
                raise TypeError(f"cron must be a str such as '0 8 * * *', got {type(cron).__name__}")
            if not cron.strip():
                raise ValueError("cron must not be empty")
            args += [b"CRON", cron.encode()]
        if tz is not None:
            if cron is None:
                raise ValueError("tz needs cron: an interval (every) has no time zone")
            args += [b"TZ", bytes_arg("tz", tz, allow_empty=False)]
        if start is not None:
            args += [b"START", int_arg("start", start, 0, MAX_TIME)]
        if end is not None:
            args += [b"END", int_arg("end", end, 0, MAX_TIME)]
        if start is not None and end is not None and start > end:
            raise ValueError(f"start must not be after end ({start} > {end})")
        if limit is not None:
            args += [b"LIMIT", int_arg("limit", limit, 1, UINT64_MAX)]
        if missed is not None:
            args += [b"MISSED", choice_arg("missed", missed, MISSED)]
        if overlap is not None:
            args += [b"OVERLAP", choice_arg("overlap", overlap, OVERLAP)]
        if not isinstance(nx, bool):
            raise TypeError(f"nx must be a bool, got {type(nx).__name__}")
        if nx:
            args.append(b"NX")
        args += message_options(priority, max_attempts, backoff, group, ttl_ms)
        return one(Call(("DQ.SCHEDULE", self._holder(key)._key, *args), as_int))

    @command
    def unschedule(self, *names: Union[str, bytes]) -> Plan[int]:
        """DQ.UNSCHEDULE: how many of the schedules existed (their runs' messages stay)."""
        if not names:
            raise ValueError("unschedule needs at least one name")
        per: Dict[int, Tuple[QueueCommands, List[bytes]]] = {}
        for name in names:
            key = schedule_name_arg(name)
            holder = self._holder(key)
            per.setdefault(id(holder), (holder, []))[1].append(key)
        plans = [one(Call(("DQ.UNSCHEDULE", q._key, *keys), int)) for q, keys in per.values()]
        return then(all_of(plans), sum)

    @command
    def schedules(self) -> Plan[List[Schedule]]:
        """DQ.SCHEDULES: every schedule, by name (a ShardedQueue's merged)."""
        return self._fan(lambda q: Call(("DQ.SCHEDULES", q._key), parse_schedules), merge_schedules)

    @command
    def pause(self, for_ms: Optional[Duration] = None, *, group: Optional[Union[str, bytes]] = None) -> Plan[None]:
        """DQ.PAUSE: POP delivers nothing until resume(), or for `for_ms`
        (a duration: int ms, a timedelta, or "10m"). With `group`, only
        that group's messages are held (its ready ones go back to waiting,
        those in flight finish) and the rest of the queue goes on; a
        ShardedQueue pauses it on the group's shard."""
        args: Tuple[Any, ...] = () if for_ms is None else (b"FOR", ms_arg("for_ms", for_ms, 1))
        if group is not None:
            key = group_arg(group)
            return one(Call(("DQ.PAUSE", self._of_group(key)._key, *args, b"GROUP", key), ok))
        return self._fan(lambda q: Call(("DQ.PAUSE", q._key, *args), ok), _none)

    @command
    def resume(self, *, group: Optional[Union[str, bytes]] = None) -> Plan[bool]:
        """DQ.RESUME: whether the queue was paused (a ShardedQueue: any
        shard); with `group`, ends that group's pause only, and whether it
        was paused."""
        if group is not None:
            key = group_arg(group)
            return one(Call(("DQ.RESUME", self._of_group(key)._key, b"GROUP", key), _was_paused))
        return self._fan(lambda q: Call(("DQ.RESUME", q._key), _was_paused), any)

    @stream
    def groups(self, match: Optional[Union[str, bytes]] = None, count: int = 100) -> Stream[Group]:
        """Every group of the queue (those with a message waiting, ready,
        in flight or delayed for a retry, or a pause), as dq.Group values,
        paging with DQ.GROUPS cursors in name order; `match` keeps the
        names that match a glob-style pattern, `count` (1 to 10000) groups
        are looked at per page. A ShardedQueue: each shard's groups in turn
        (a group lives on one shard). dq.asyncio: an async iterator."""
        options: List[Any] = []
        if match is not None:
            options += [b"MATCH", bytes_arg("match", match)]
        options += [b"COUNT", int_arg("count", count, 1, 10000)]
        return _groups(self._parts(), options)  # the arguments are checked now, not at the first next()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def _none(results: List[None]) -> None:
    return None


def _was_paused(reply: Any) -> bool:
    return bool(int(reply))


def _groups(parts: List[QueueCommands], options: List[Any]) -> Stream[Group]:
    for part in parts:
        cursor = "0"
        while True:
            cursor, groups = yield from one(Call(("DQ.GROUPS", part._key, cursor, *options), parse_groups))
            if groups:
                yield Items(groups)
            if cursor == "0":
                break


def _scan(parts: List[QueueCommands], options: List[Any]) -> Stream[Entry]:
    for part in parts:
        cursor = "0"
        while True:
            cursor, entries = yield from one(Call(("DQ.SCAN", part._key, cursor, *options), parse_scan))
            yield Items(entries)
            if cursor == "0":
                break


class QueueCommands(Commands):
    """One dq queue: each method is one DQ.* command."""

    def __init__(self, client: Any, name: Union[str, bytes]) -> None:
        self._key = queue_name(name)
        self._name = as_text(self._key) or ""
        self._check_client(client)
        self.client = client

    def _fan(self, call: Callable[[QueueCommands], Call[T]], merge: Callable[[List[T]], T]) -> Plan[T]:
        return one(call(self))

    def _holder(self, schedule: bytes) -> QueueCommands:
        return self

    def _parts(self) -> List[QueueCommands]:
        return [self]

    def _of_group(self, group: bytes) -> QueueCommands:
        return self

    def _pop(self, count: int, block_ms: Optional[int], lease_ms: Optional[int]) -> Plan[List[Delivery]]:
        return one(pop_call(self, count, block_ms, lease_ms))

    def _ack(self, ids: Sequence[Id]) -> Plan[int]:
        return one(Call(("DQ.ACK", self._key, *[self._own_id(i) for i in ids]), int))

    def _done(self, results: List[Tuple[Id, bytes]]) -> Plan[int]:
        return one(Call(("DQ.DONE", self._key, *[x for i, r in results for x in (self._own_id(i), r)]), int))

    def _redrive(self, count: Optional[int], ids: Optional[List[Id]]) -> Plan[int]:
        args: List[Any] = ["DQ.REDRIVE", self._key]
        if count is not None:
            args += [b"COUNT", count]
        if ids is not None:
            args += [b"ID", *[id_arg(i) for i in ids]]
        return one(Call(tuple(args), int))

    def _own_id(self, value: Any) -> bytes:
        if isinstance(value, Delivery) and value.queue != self.name:
            raise ValueError(f"delivery {value.id!r} came from queue {value.queue!r}, not {self.name!r}")
        return id_arg(value)

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
    ) -> Plan[Optional[str]]:
        """DQ.ADD: the id, or None when NX found the id (in any state, done
        included) / XX did not. `delay_ms`, `ttl_ms` and `retain_ms` are
        durations: int ms, a timedelta, or "30s". `retain_ms`: how long the
        message is kept as done, with its result, once finished (0: not
        kept), over the queue's retention."""
        args: List[Any] = ["DQ.ADD", self._key, bytes_arg("payload", payload)]
        if delay_ms is not None and at_ms is not None:
            raise ValueError("delay_ms and at_ms cannot be used together")
        if delay_ms is not None:
            args += [b"DELAY", ms_arg("delay_ms", delay_ms, 0)]
        if at_ms is not None:
            args += [b"AT", int_arg("at_ms", at_ms, 0, MAX_TIME)]
        if id is not None:
            args += [b"ID", id_arg(id)]
        for flag, value in (("nx", nx), ("xx", xx)):
            if not isinstance(value, bool):
                raise TypeError(f"{flag} must be a bool, got {type(value).__name__}")
        if nx and xx:
            raise ValueError("nx and xx cannot be used together")
        if xx and id is None:
            raise ValueError("xx needs an id")
        if nx:
            args.append(b"NX")
        if xx:
            args.append(b"XX")
        args += message_options(priority, max_attempts, backoff, group, ttl_ms)
        if retain_ms is not None:
            args += [b"RETAIN", ms_arg("retain_ms", retain_ms, 0)]
        return one(Call(tuple(args), as_text))

    @command
    def nack(
        self,
        id: Id,
        *,
        delay_ms: Optional[Duration] = None,
        dead: bool = False,
        attempt: Optional[int] = None,
        error: Optional[str] = None,
    ) -> Plan[str]:
        """DQ.NACK: the new state ("delayed", "ready" or "dead"). A Delivery
        passes its own attempt. Raises StaleDelivery, or UnknownMessage
        (without attempt, when the id is not in flight)."""
        args: List[Any] = ["DQ.NACK", self._key, self._own_id(id)]
        if not isinstance(dead, bool):
            raise TypeError(f"dead must be a bool, got {type(dead).__name__}")
        if dead and delay_ms is not None:
            raise ValueError("delay_ms and dead cannot be used together")
        if delay_ms is not None:
            args += [b"DELAY", ms_arg("delay_ms", delay_ms, 0)]
        if dead:
            args.append(b"DEAD")
        args += self._attempt(id, attempt)
        text = truncate_error(error)
        if text is not None:
            args += [b"ERROR", text]
        return one(Call(tuple(args), self._in_flight(args[2], lambda reply: as_text(reply) or "")))

    @command
    def touch(self, id: Id, *, lease_ms: Optional[Duration] = None, attempt: Optional[int] = None) -> Plan[int]:
        """DQ.TOUCH: the new lease deadline (Unix ms)."""
        return self._touch(id, lease_ms, attempt, [])

    @command
    def progress(
        self, id: Id, value: Union[bytes, str], *, lease_ms: Optional[Duration] = None, attempt: Optional[int] = None
    ) -> Plan[int]:
        """DQ.TOUCH ... PROGRESS: records how far the delivery got (str or
        bytes, at most 64 KiB), shown by get() as `progress` until the next
        delivery starts (a done message keeps the last). A TOUCH, so it
        renews the lease too: by `lease_ms`, else the queue's lease (give
        the lease you popped with, so as not to shorten it). A Delivery
        passes its attempt: fenced, StaleDelivery once it is over. The new
        lease deadline (Unix ms). A Worker's handler calls
        delivery.progress(value) instead."""
        return self._touch(id, lease_ms, attempt, [b"PROGRESS", progress_arg(value)])

    def _touch(self, id: Id, lease_ms: Optional[Duration], attempt: Optional[int], extra: List[Any]) -> Plan[int]:
        args: List[Any] = ["DQ.TOUCH", self._key, self._own_id(id)]
        if lease_ms is not None:
            args += [b"LEASE", ms_arg("lease_ms", lease_ms, 1)]
        args += self._attempt(id, attempt)
        args += extra
        return one(Call(tuple(args), self._in_flight(args[2], int)))

    @command
    def wait(self, id: Id, timeout_ms: Optional[Duration] = None) -> Plan[Optional[JobOutcome]]:
        """DQ.WAIT: the message's outcome — JobOutcome "done" (its result,
        None after a plain ACK), "dead" (its last error) or "gone" (never
        added, cancelled, purged, or finished with no retention to keep it)
        — or None when it has none (it is still delayed, ready or in
        flight) after `timeout_ms`, a duration (int ms, a timedelta, or
        "30s"; None or 0: look once). The server answers the moment the
        outcome exists; a retry or a replacement is no outcome: it waits
        on. It blocks a pool connection of its own, so the client's other
        calls never wait behind it (a single_connection_client is refused);
        a wait longer than the client's socket_timeout goes as several
        shorter ones. Without a retention a finished message is "gone": set
        one (config_set(retain_ms=...), add(retain_ms=...)) to get results
        back."""
        return wait_plan(self, self._own_id(id), timeout_ms)

    @staticmethod
    def _attempt(id: Id, attempt: Optional[int]) -> List[Any]:
        """ATTEMPT n: the one given, else a Delivery's."""
        if attempt is None and isinstance(id, Delivery):
            attempt = id.attempt
        return [] if attempt is None else [b"ATTEMPT", int_arg("attempt", attempt, 1, UINT32_MAX)]

    def _in_flight(self, key: bytes, parse: Callable[[Any], T]) -> Callable[[Any], T]:
        """NACK's and TOUCH's reply: nil (the id is not in flight) raises UnknownMessage."""
        shown, name = as_text(key), self.name

        def parse_reply(reply: Any) -> T:
            if reply is None:
                raise UnknownMessage(f"message {shown!r} is not in flight in queue {name!r}")
            return parse(reply)

        return parse_reply

    @stream
    def events(self, after: After = None, *, count: int = 100, follow: bool = True) -> Stream[Event]:
        """The queue's events (DQ.EVENTS), oldest first, as dq.Event values,
        for a queue that keeps them (config_set(events=n)): those after
        `after` — a seq you kept from an earlier event (event.seq), None
        for the oldest event kept, or "now" for those written from now on.
        With `follow` (the default) it never ends: it waits for the next
        event with DQ.EVENTS ... BLOCK, on a pool connection of its own (a
        single_connection_client is refused), each read shorter than the
        client's socket_timeout and sent again from the same seq when it
        ends empty; follow=False ends at the newest event. `count` (1 to
        10000) events are read at a time. Raises dq.EventGap when `after`
        was trimmed (its `oldest` is the oldest seq kept), and
        dq.EventLogRestarted when the queue's log is not the one `after`
        came from (the queue was deleted and made again): never a silent
        skip. dq.asyncio: an async iterator."""
        start = after_arg("after", after)
        count, block = reader_args(self.client, count, follow)
        return read_events(self._key, self.name, start, count, block)  # checked now, not at the first next()

    @command
    def get(self, id: Union[str, bytes]) -> Plan[Optional[Dict[str, Any]]]:
        """DQ.GET: the message's record, or None."""
        return one(Call(("DQ.GET", self._key, id_arg(id)), parse_get))

    @command
    def cancel(self, *ids: Union[str, bytes]) -> Plan[int]:
        """DQ.CANCEL: how many of the ids existed."""
        if not ids:
            raise ValueError("cancel needs at least one id")
        return one(Call(("DQ.CANCEL", self._key, *[id_arg(i) for i in ids]), int))


Q = TypeVar("Q", bound=QueueCommands)


def wait_plan(queue: QueueCommands, id: bytes, timeout_ms: Optional[Duration]) -> Plan[Optional[JobOutcome]]:
    """DQ.WAIT of one queue (the arguments checked now): a look, or a
    blocking wait."""
    ms = 0 if timeout_ms is None else ms_arg("timeout_ms", timeout_ms, 0)
    if ms == 0:
        return one(Call(("DQ.WAIT", queue._key, id), parse_wait))
    if single_connection(queue.client):
        raise ValueError("wait() with a timeout blocks a connection of its own: give the queue a client with a "
                         "connection pool, not single_connection_client=True (or look once: timeout_ms=0)")
    return _wait_blocking(queue._key, id, ms, longest_block_ms(queue.client))


def _wait_blocking(key: bytes, id: bytes, ms: int, longest: Optional[int]) -> Plan[Optional[JobOutcome]]:
    """DQ.WAIT ... BLOCK for `ms` in all, as one command, or as several of
    at most `longest` ms each when a longer one would outlast the client's
    socket_timeout. Nothing is missed between them: an outcome is a state
    the next WAIT finds at once."""
    deadline = time.monotonic() + ms / 1000
    left = ms
    while True:
        block = left if longest is None else min(left, longest)
        outcome = yield from one(Call(("DQ.WAIT", key, id, b"BLOCK", block), parse_wait, blocking=True))
        # The last part's nil is the answer: the time ran out (or CLIENT UNBLOCK ended the wait).
        if outcome is not None or block == left:
            return outcome
        left = math.ceil((deadline - time.monotonic()) * 1000)
        if left <= 0:
            return None


def pop_call(
    queue: QueueCommands, count: int, block_ms: Optional[int], lease_ms: Optional[int]
) -> Call[List[Delivery]]:
    args: List[Any] = ["DQ.POP", queue._key, *_pop_options(count, block_ms, lease_ms)]
    name = queue.name
    return Call(tuple(args), lambda reply: _deliveries(reply, name), blocking=block_ms is not None)


def mpop_call(
    queues: Sequence[Q], count: int, block_ms: Optional[int], lease_ms: Optional[int]
) -> Call[Tuple[Optional[Q], List[Delivery]]]:
    """DQ.MPOP over the queues in this order: (the queue it took from or
    None, its deliveries)."""
    by_name = {q.name: q for q in queues}
    args = ("DQ.MPOP", len(queues), *[q._key for q in queues], *_pop_options(count, block_ms, lease_ms))

    def parse(reply: Any) -> Tuple[Optional[Q], List[Delivery]]:
        if not reply:
            return None, []
        name = as_text(reply[0]) or ""
        return by_name.get(name), _deliveries(reply[1], name)

    return Call(args, parse, blocking=block_ms is not None)


def _pop_options(count: int, block_ms: Optional[int], lease_ms: Optional[int]) -> List[Any]:
    args: List[Any] = [b"COUNT", int_arg("count", count, 1, 10000)]
    if block_ms is not None:
        args += [b"BLOCK", ms_arg("block_ms", block_ms, 0)]
    if lease_ms is not None:
        args += [b"LEASE", ms_arg("lease_ms", lease_ms, 1)]
    return args


def _deliveries(reply: Any, queue: str) -> List[Delivery]:
    return [Delivery(as_text(i[0]) or "", as_bytes(i[1]), int(i[2]), queue) for i in reply or []]


def worker_finish_call(queue: QueueCommands, batch: Sequence[Tuple[Delivery, Optional[bytes]]]) -> Call[int]:
    """DQ.ACK of deliveries this queue handed out, or DQ.DONE of them with
    their results when the first has one (the worker batches them apart):
    their ids came from the server and the results were checked as the
    handlers returned them, so they need no checking (a Worker sends
    thousands a second)."""
    if batch[0][1] is None:
        return Call(("DQ.ACK", queue._key, *[d.id.encode("utf-8", "surrogateescape") for d, _ in batch]), int)
    pairs = [x for d, r in batch for x in (d.id.encode("utf-8", "surrogateescape"), r)]
    return Call(("DQ.DONE", queue._key, *pairs), int)


def is_cluster(client: Any) -> bool:
    return hasattr(client, "get_primaries")


def queues(client: Any) -> Plan[List[str]]:
    """DQ.QUEUES; on a cluster, every master's, merged and sorted by bytes."""
    if not is_cluster(client):
        return one(Call(("DQ.QUEUES",), _names))
    plans = [one(Call(("DQ.QUEUES",), _names, node)) for node in client.get_primaries()]
    return then(all_of(plans), lambda lists: sorted({n for names in lists for n in names}, key=_utf8))


def _names(reply: Any) -> List[str]:
    return [as_text(n) or "" for n in reply or []]


def _utf8(name: str) -> bytes:
    return name.encode("utf-8", "surrogateescape")
