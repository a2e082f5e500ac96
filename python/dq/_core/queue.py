"""The DQ.* commands of one queue: arguments and reply of each."""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

from .args import (
    INT32_MAX,
    MAX_TIME,
    MISSED,
    OVERLAP,
    UINT32_MAX,
    UINT64_MAX,
    backoff_arg,
    bytes_arg,
    choice_arg,
    duration_arg,
    id_arg,
    id_list,
    int_arg,
    max_inflight_arg,
    message_options,
    queue_name,
    rate_arg,
    schedule_name_arg,
    state_arg,
    truncate_error,
)
from .errors import UnknownMessage
from .plans import Call, Plan, one
from .records import Delivery
from .replies import (
    as_bytes,
    ok,
    parse_config,
    parse_entries,
    parse_get,
    parse_scan,
    parse_schedules,
    parse_stats,
    as_text,
    as_int,
)


class QueueCore:
    """DQ.* calls for one queue name."""

    def __init__(self, name: Any) -> None:
        self.key = queue_name(name)
        self.name = as_text(self.key) or ""

    def add_call(
        self,
        payload: Any,
        *,
        delay_ms: Optional[int] = None,
        at_ms: Optional[int] = None,
        id: Any = None,
        nx: bool = False,
        xx: bool = False,
        priority: Optional[int] = None,
        max_attempts: Optional[int] = None,
        backoff: Optional[str] = None,
        group: Any = None,
        ttl_ms: Optional[int] = None,
    ) -> Call:
        args: List[Any] = ["DQ.ADD", self.key, bytes_arg("payload", payload)]
        if delay_ms is not None and at_ms is not None:
            raise ValueError("delay_ms and at_ms cannot be used together")
        if delay_ms is not None:
            args += [b"DELAY", int_arg("delay_ms", delay_ms, 0, MAX_TIME)]
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
        return Call(tuple(args), as_text)

    def pop_call(self, count: int = 1, block_ms: Optional[int] = None, lease_ms: Optional[int] = None) -> Call:
        args: List[Any] = ["DQ.POP", self.key, b"COUNT", int_arg("count", count, 1, 10000)]
        if block_ms is not None:
            args += [b"BLOCK", int_arg("block_ms", block_ms, 0, MAX_TIME)]
        if lease_ms is not None:
            args += [b"LEASE", int_arg("lease_ms", lease_ms, 1, MAX_TIME)]
        name = self.name

        def parse(reply: Any) -> List[Delivery]:
            return [Delivery(as_text(i[0]) or "", as_bytes(i[1]), int(i[2]), name) for i in reply or []]

        return Call(tuple(args), parse)

    def _own_id(self, value: Any) -> bytes:
        if isinstance(value, Delivery) and value.queue != self.name:
            raise ValueError(f"delivery {value.id!r} came from queue {value.queue!r}, not {self.name!r}")
        return id_arg(value)

    def ack_call(self, ids: Sequence[Any]) -> Call:
        if not ids:
            raise ValueError("ack needs at least one id")
        return Call(("DQ.ACK", self.key, *[self._own_id(i) for i in ids]), int)

    def worker_ack_call(self, deliveries: Sequence[Delivery]) -> Call:
        """DQ.ACK of deliveries this queue handed out: their ids came from
        the server, so they need no checking (a Worker sends thousands a
        second)."""
        return Call(("DQ.ACK", self.key, *[d.id.encode("utf-8", "surrogateescape") for d in deliveries]), int)

    def nack_call(
        self,
        id: Any,
        *,
        delay_ms: Optional[int] = None,
        dead: bool = False,
        attempt: Optional[int] = None,
        error: Optional[str] = None,
    ) -> Call:
        args: List[Any] = ["DQ.NACK", self.key, self._own_id(id)]
        if not isinstance(dead, bool):
            raise TypeError(f"dead must be a bool, got {type(dead).__name__}")
        if dead and delay_ms is not None:
            raise ValueError("delay_ms and dead cannot be used together")
        if delay_ms is not None:
            args += [b"DELAY", int_arg("delay_ms", delay_ms, 0, MAX_TIME)]
        if dead:
            args.append(b"DEAD")
        if attempt is None and isinstance(id, Delivery):
            attempt = id.attempt
        if attempt is not None:
            args += [b"ATTEMPT", int_arg("attempt", attempt, 1, UINT32_MAX)]
        text = truncate_error(error)
        if text is not None:
            args += [b"ERROR", text]
        shown = as_text(args[2])

        def parse(reply: Any) -> str:
            if reply is None:
                raise UnknownMessage(f"message {shown!r} is not in flight in queue {self.name!r}")
            return as_text(reply) or ""

        return Call(tuple(args), parse)

    def touch_call(self, id: Any, *, lease_ms: Optional[int] = None, attempt: Optional[int] = None) -> Call:
        args: List[Any] = ["DQ.TOUCH", self.key, self._own_id(id)]
        if lease_ms is not None:
            args += [b"LEASE", int_arg("lease_ms", lease_ms, 1, MAX_TIME)]
        if attempt is None and isinstance(id, Delivery):
            attempt = id.attempt
        if attempt is not None:
            args += [b"ATTEMPT", int_arg("attempt", attempt, 1, UINT32_MAX)]
        shown = as_text(args[2])

        def parse(reply: Any) -> int:
            if reply is None:
                raise UnknownMessage(f"message {shown!r} is not in flight in queue {self.name!r}")
            return int(reply)

        return Call(tuple(args), parse)

    def stats_call(self) -> Call:
        return Call(("DQ.STATS", self.key), parse_stats)

    def get_call(self, id: Any) -> Call:
        return Call(("DQ.GET", self.key, id_arg(id)), parse_get)

    def peek_call(self, state: str, count: int = 10) -> Call:
        return Call(
            ("DQ.PEEK", self.key, state_arg(state), b"COUNT", int_arg("count", count, 1, 10000)),
            parse_entries,
        )

    def scan_call(self, cursor: str, state: Optional[str] = None, count: Optional[int] = None) -> Call:
        args: List[Any] = ["DQ.SCAN", self.key, cursor]
        if state is not None:
            args += [b"STATE", state_arg(state)]
        if count is not None:
            args += [b"COUNT", int_arg("count", count, 1, 10000)]
        return Call(tuple(args), parse_scan)

    def redrive_call(self, count: Optional[int] = None, ids: Optional[Sequence[Any]] = None) -> Call:
        args: List[Any] = ["DQ.REDRIVE", self.key]
        if count is not None and ids is not None:
            raise ValueError("count and ids cannot be used together")
        if count is not None:
            args += [b"COUNT", int_arg("count", count, 1, 10000)]
        if ids is not None:
            ids = id_list(ids)
            if not ids:
                raise ValueError("ids must not be empty")
            args += [b"ID", *[id_arg(i) for i in ids]]
        return Call(tuple(args), int)

    def cancel_call(self, ids: Sequence[Any]) -> Call:
        if not ids:
            raise ValueError("cancel needs at least one id")
        return Call(("DQ.CANCEL", self.key, *[id_arg(i) for i in ids]), int)

    def purge_call(self, state: Optional[str] = None) -> Call:
        args: List[Any] = ["DQ.PURGE", self.key]
        if state is not None:
            args.append(state_arg(state))
        return Call(tuple(args), int)

    def config_call(self) -> Call:
        return Call(("DQ.CONFIG", self.key), parse_config)

    def config_set_call(
        self, lease_ms: Any = None, max_attempts: Any = None, backoff: Any = None, rate: Any = None,
        max_inflight: Any = None,
    ) -> Call:
        args: List[Any] = ["DQ.CONFIG", self.key, b"SET"]
        for field_name, value, low, high in (
            ("LEASE", lease_ms, 1, MAX_TIME),
            ("MAXATTEMPTS", max_attempts, 1, INT32_MAX),
        ):
            if value is None:
                continue
            if value == "DEFAULT":
                args += [field_name.encode(), b"DEFAULT"]
            else:
                what = "lease_ms" if field_name == "LEASE" else "max_attempts"
                if isinstance(value, str):
                    raise ValueError(f"{what} must be an int or 'DEFAULT', got {value!r}")
                args += [field_name.encode(), int_arg(what, value, low, high)]
        if backoff is not None:
            args += [b"BACKOFF", backoff_arg("backoff", backoff)]
        if rate is not None:
            args += [b"RATE", rate_arg(rate)[0]]
        if max_inflight is not None:
            args += [b"MAXINFLIGHT", max_inflight_arg(max_inflight)[0]]
        if len(args) == 3:
            raise ValueError("config_set needs at least one of lease_ms, max_attempts, backoff, rate, max_inflight")
        return Call(tuple(args), ok)

    def schedule_call(
        self,
        name: Any,
        payload: Any,
        *,
        every: Any = None,
        cron: Any = None,
        tz: Any = None,
        start: Any = None,
        end: Any = None,
        limit: Any = None,
        missed: Any = None,
        overlap: Any = None,
        nx: bool = False,
        priority: Any = None,
        max_attempts: Any = None,
        backoff: Any = None,
        group: Any = None,
        ttl_ms: Any = None,
    ) -> Call:
        args: List[Any] = ["DQ.SCHEDULE", self.key, schedule_name_arg(name), bytes_arg("payload", payload)]
        if (every is None) == (cron is None):
            raise ValueError("a schedule needs exactly one of every (a duration such as '5m', or ms) and cron")
        if every is not None:
            args += [b"EVERY", duration_arg("every", every)]
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
        return Call(tuple(args), as_int)

    def unschedule_call(self, names: Sequence[Any]) -> Call:
        if not names:
            raise ValueError("unschedule needs at least one name")
        return Call(("DQ.UNSCHEDULE", self.key, *[schedule_name_arg(n) for n in names]), int)

    def schedules_call(self) -> Call:
        return Call(("DQ.SCHEDULES", self.key), parse_schedules)

    def pause_call(self, for_ms: Any = None) -> Call:
        args: List[Any] = ["DQ.PAUSE", self.key]
        if for_ms is not None:
            args += [b"FOR", int_arg("for_ms", for_ms, 1, MAX_TIME)]
        return Call(tuple(args), ok)

    def resume_call(self) -> Call:
        return Call(("DQ.RESUME", self.key), lambda reply: bool(int(reply)))

    # Plans, so that Queue and ShardedQueue share one driver.
    def add(self, payload: Any, **options: Any) -> Plan:
        return one(self.add_call(payload, **options))

    def pop(self, count: int = 1, block_ms: Optional[int] = None, lease_ms: Optional[int] = None) -> Plan:
        return one(self.pop_call(count, block_ms, lease_ms))

    def ack(self, ids: Sequence[Any]) -> Plan:
        return one(self.ack_call(ids))

    def nack(self, id: Any, **options: Any) -> Plan:
        return one(self.nack_call(id, **options))

    def touch(self, id: Any, **options: Any) -> Plan:
        return one(self.touch_call(id, **options))

    def stats(self) -> Plan:
        return one(self.stats_call())

    def get(self, id: Any) -> Plan:
        return one(self.get_call(id))

    def peek(self, state: str, count: int = 10) -> Plan:
        return one(self.peek_call(state, count))

    def redrive(self, count: Optional[int] = None, ids: Optional[Sequence[Any]] = None) -> Plan:
        return one(self.redrive_call(count, ids))

    def cancel(self, ids: Sequence[Any]) -> Plan:
        return one(self.cancel_call(ids))

    def purge(self, state: Optional[str] = None) -> Plan:
        return one(self.purge_call(state))

    def config(self) -> Plan:
        return one(self.config_call())

    def config_set(self, **options: Any) -> Plan:
        return one(self.config_set_call(**options))

    def schedule(self, name: Any, payload: Any, **options: Any) -> Plan:
        return one(self.schedule_call(name, payload, **options))

    def unschedule(self, names: Sequence[Any]) -> Plan:
        return one(self.unschedule_call(names))

    def schedules(self) -> Plan:
        return one(self.schedules_call())

    def pause(self, for_ms: Any = None) -> Plan:
        return one(self.pause_call(for_ms))

    def resume(self) -> Plan:
        return one(self.resume_call())

    @property
    def parts(self) -> List["QueueCore"]:
        return [self]


def mpop_call(cores: Sequence[QueueCore], count: int = 1, block_ms: Optional[int] = None,
              lease_ms: Optional[int] = None) -> Call:
    """DQ.MPOP over the queues in this order: (the queue it took from or
    None, its deliveries)."""
    if not cores:
        raise ValueError("mpop needs at least one queue")
    args: List[Any] = ["DQ.MPOP", len(cores), *[core.key for core in cores], b"COUNT", int_arg("count", count, 1, 10000)]
    if block_ms is not None:
        args += [b"BLOCK", int_arg("block_ms", block_ms, 0, MAX_TIME)]
    if lease_ms is not None:
        args += [b"LEASE", int_arg("lease_ms", lease_ms, 1, MAX_TIME)]

    def parse(reply: Any) -> Tuple[Optional[str], List[Delivery]]:
        if not reply:
            return None, []
        name = as_text(reply[0]) or ""
        return name, [Delivery(as_text(i[0]) or "", as_bytes(i[1]), int(i[2]), name) for i in reply[1] or []]

    return Call(tuple(args), parse)



def queues_call() -> Call:
    return Call(("DQ.QUEUES",), lambda reply: [as_text(n) or "" for n in reply or []])
