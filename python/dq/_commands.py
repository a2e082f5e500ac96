"""The DQ.* grammar, once: argument checking, argument lists, reply parsing,
error mapping and the sharded-queue arithmetic. No I/O here.

Every public operation is a *plan*: a generator that yields either a list of
`Call`s (run them, send back their results in order, or the exception a call
raised) or a float (sleep that many seconds, send back None), and finally
returns the operation's result. `dq` drives plans with a blocking client,
`dq.asyncio` with an asyncio one, so the two share everything but the I/O.
"""

from __future__ import annotations

import binascii
import functools
import os
import re
import threading
import time
import zlib
from dataclasses import dataclass, field, fields
from typing import (
    Any,
    Callable,
    Dict,
    Generator,
    Iterable,
    List,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    Union,
)

import redis.exceptions

__all__ = [
    "DqError",
    "StaleDelivery",
    "WrongType",
    "OutOfMemory",
    "UnknownMessage",
    "Permanent",
    "Retry",
    "Delivery",
    "Entry",
    "Schedule",
]

SLOTS = 16384
STATES = ("delayed", "ready", "inflight", "dead")
MAX_ERROR_BYTES = 4096
MAX_ID_BYTES = 1024
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
UINT32_MAX = 2**32 - 1
MAX_TIME = 2**53 - 1

Bytesish = Union[str, bytes, bytearray, memoryview]


# --- errors -------------------------------------------------------------------


class DqError(redis.exceptions.ResponseError):
    """A dq command was refused by the server (the text is the server's).

    A subclass of redis-py's ResponseError, so code that catches that keeps
    working."""


class StaleDelivery(DqError):
    """NACK/TOUCH with ATTEMPT n: delivery n is over (its lease ran out, or it
    was acknowledged or failed)."""


class WrongType(DqError):
    """The key under the queue's name is not a dq queue."""


class OutOfMemory(DqError):
    """DQ.ADD refused under maxmemory, or by the eviction guard."""


class UnknownMessage(DqError):
    """NACK/TOUCH without ATTEMPT: the id is not in flight."""


class Permanent(Exception):
    """Raise from a Worker handler: the message is dead now (DQ.NACK ... DEAD),
    with this exception's message as its last error."""


class Retry(Exception):
    """Raise from a Worker handler: try again after `delay_ms` (DQ.NACK ...
    DELAY), or after the message's backoff when `delay_ms` is None. `error`
    is kept as the message's last error."""

    def __init__(self, delay_ms: Optional[int] = None, error: Optional[str] = None) -> None:
        if delay_ms is not None:
            _int_arg("Retry delay_ms", delay_ms, 0, MAX_TIME)
        if error is not None and not isinstance(error, str):
            raise TypeError(f"Retry error must be a str, got {type(error).__name__}")
        super().__init__(delay_ms, error)
        self.delay_ms = delay_ms
        self.error = error

    def __str__(self) -> str:
        return self.error or ""


def translate(exc: redis.exceptions.ResponseError) -> DqError:
    """Maps a server error to dq's typed errors (the caller chains it)."""
    if isinstance(exc, DqError):
        return exc
    text = str(exc)
    oom = getattr(redis.exceptions, "OutOfMemoryError", None)
    if oom is not None and isinstance(exc, oom):
        # redis-py drops the OOM code from the text; put it back.
        return OutOfMemory(text if text.startswith("OOM") else "OOM " + text)
    if text.startswith("STALE"):
        return StaleDelivery(text)
    if text.startswith("WRONGTYPE"):
        return WrongType(text)
    if text.startswith("OOM") or text.startswith("maxmemory-policy is") or text.startswith(
        "ERR maxmemory-policy is"
    ):
        return OutOfMemory(text)
    return DqError(text)


# --- values ---------------------------------------------------------------------


class Entry(NamedTuple):
    """One message as DQ.PEEK and DQ.SCAN show it."""

    id: str
    payload: bytes
    attempt: int
    time: int  # due time, lease deadline or time of death (Unix ms)
    last_error: Optional[str]


_EVENT_LOCK = threading.Lock()


@dataclass(eq=False)
class Delivery:
    """One delivery of a message, as DQ.POP handed it out.

    When a Worker's heartbeat learns that the delivery is over (its fenced
    DQ.TOUCH replies STALE) it sets `lost_reason` — "cancelled" when the
    message is gone (DQ.CANCEL, DQ.PURGE), "lost" when the lease ran out
    and another consumer may hold it — then `lost` (True either way), then
    the `cancelled` event: a handler doing long work checks `lost` or waits
    on `cancelled`, and gives up."""

    id: str
    payload: bytes
    attempt: int
    queue: str
    lost: bool = field(default=False)
    lost_reason: Optional[str] = field(default=None)
    # Made on first use: most deliveries never need one, and a Worker
    # handles tens of thousands a second.
    _cancelled: Optional[threading.Event] = field(default=None, init=False, repr=False)

    @property
    def cancelled(self) -> threading.Event:
        """Set when the worker learns that this delivery is over (see
        `lost_reason`): stop working on it."""
        event = self._cancelled
        if event is None:
            with _EVENT_LOCK:
                event = self._cancelled
                if event is None:
                    event = self._cancelled = threading.Event()
        return event


@dataclass(frozen=True)
class Schedule:
    """One recurring schedule as DQ.SCHEDULES shows it; None where the
    server says nil. Times are Unix ms; `spec` reads `every 5m` or
    `cron 0 8 * * *`."""

    name: str
    spec: str
    tz: str
    next_run: Optional[int]  # None: no run is left (END passed, LIMIT reached)
    last_run: Optional[int]  # None: before the first run
    runs: int
    skipped: int  # runs skipped by OVERLAP SKIP
    limit: Optional[int]
    start: int
    end: Optional[int]
    missed: str  # "skip", "one" or "all"
    overlap: str  # "allow" or "skip"
    payload: bytes
    priority: int
    max_attempts: Optional[int]
    backoff: Optional[str]
    group: Optional[str]
    ttl: Optional[int]  # ms, counted from each run


_SCHEDULE_FIELDS = tuple(f.name for f in fields(Schedule))


@dataclass(frozen=True)
class Call:
    """One command: its arguments and how to read its reply."""

    args: Tuple[Any, ...]
    parse: Callable[[Any], Any]


def _text(value: Any) -> Optional[str]:
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "surrogateescape")
    return str(value)


def _bytes(value: Any) -> bytes:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    return str(value).encode("utf-8", "surrogateescape")


def _int(value: Any) -> Optional[int]:
    return None if value is None else int(value)


# --- argument checks ---------------------------------------------------------------


def _int_arg(what: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, got {type(value).__name__}")
    if not low <= value <= high:
        raise ValueError(f"{what} must be from {low} to {high}, got {value}")
    return value


def _bytes_arg(what: str, value: Any, *, allow_empty: bool = True, limit: Optional[int] = None) -> bytes:
    if isinstance(value, str):
        data = value.encode("utf-8", "surrogateescape")
    elif isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
    else:
        raise TypeError(f"{what} must be str or bytes, got {type(value).__name__}")
    if not allow_empty and not data:
        raise ValueError(f"{what} must not be empty")
    if limit is not None and len(data) > limit:
        raise ValueError(f"{what} is longer than {limit} bytes ({len(data)})")
    return data


def id_arg(value: Any, what: str = "id") -> bytes:
    if isinstance(value, Delivery):
        value = value.id
    return _bytes_arg(what, value, allow_empty=False, limit=MAX_ID_BYTES)


def queue_name(name: Any) -> bytes:
    return _bytes_arg("queue name", name)


def _state_arg(state: Any) -> bytes:
    if not isinstance(state, str):
        raise TypeError(f"state must be a str, got {type(state).__name__}")
    if state.lower() not in STATES:
        raise ValueError(f"state must be one of delayed, ready, inflight, dead; got {state!r}")
    return state.upper().encode()


def _backoff_arg(what: str, value: Any) -> bytes:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str such as 'exp:1s:1h', got {type(value).__name__}")
    if not value:
        raise ValueError(f"{what} must not be empty")
    return value.encode()


def _message_options(priority: Any, max_attempts: Any, backoff: Any, group: Any, ttl_ms: Any) -> List[Any]:
    """The options DQ.ADD and DQ.SCHEDULE share, checked."""
    args: List[Any] = []
    if priority is not None:
        args += [b"PRIORITY", _int_arg("priority", priority, INT32_MIN, INT32_MAX)]
    if max_attempts is not None:
        args += [b"MAXATTEMPTS", _int_arg("max_attempts", max_attempts, 1, INT32_MAX)]
    if backoff is not None:
        args += [b"BACKOFF", _backoff_arg("backoff", backoff)]
    if group is not None:
        args += [b"GROUP", _bytes_arg("group", group, allow_empty=False, limit=MAX_ID_BYTES)]
    if ttl_ms is not None:
        args += [b"TTL", _int_arg("ttl_ms", ttl_ms, 1, MAX_TIME)]
    return args


MAX_SCHEDULE_NAME_BYTES = 1007  # a run's id is `name@T`: 1024 bytes at most
MISSED = ("skip", "one", "all")
OVERLAP = ("allow", "skip")
UINT64_MAX = 2**64 - 1


def schedule_name_arg(name: Any) -> bytes:
    return _bytes_arg("schedule name", name, allow_empty=False, limit=MAX_SCHEDULE_NAME_BYTES)


def _choice_arg(what: str, value: Any, choices: Tuple[str, ...]) -> bytes:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, got {type(value).__name__}")
    if value.lower() not in choices:
        raise ValueError(f"{what} must be one of {', '.join(choices)}; got {value!r}")
    return value.upper().encode()


def _duration_arg(what: str, value: Any) -> bytes:
    """A duration as the server reads it: a str such as '5m' (the server
    checks its grammar) or int milliseconds."""
    if isinstance(value, str):
        if not value:
            raise ValueError(f"{what} must not be empty")
        return value.encode()
    return b"%d" % _int_arg(what, value, 1, MAX_TIME)


_RATE = re.compile(r"^([0-9]+)/(\S+)$")


def rate_arg(value: Any) -> Tuple[bytes, Optional[Tuple[int, str]]]:
    """RATE's value and, for `n/duration`, (n, duration); `0` and 'DEFAULT'
    remove the limit (None)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(f"rate must be a str such as '100/1s' (or 0 to remove it), got {type(value).__name__}")
    if isinstance(value, int):
        if value != 0:
            raise ValueError(f"rate must be a str such as '100/1s', or 0 to remove it; got {value}")
        return b"0", None
    if value in ("0", "DEFAULT"):
        return value.encode(), None
    m = _RATE.match(value)
    if m is None:
        raise ValueError(f"rate must be n/duration, such as '100/1s' or '5000/1h' (or 0 to remove it); got {value!r}")
    n = int(m.group(1))
    return value.encode(), (None if n == 0 else (n, m.group(2)))


def max_inflight_arg(value: Any) -> Tuple[bytes, Optional[int]]:
    """MAXINFLIGHT's value and n; `0` and 'DEFAULT' remove the limit (None)."""
    if value == "DEFAULT":
        return b"DEFAULT", None
    if isinstance(value, str):
        raise ValueError(f"max_inflight must be an int or 'DEFAULT', got {value!r}")
    n = _int_arg("max_inflight", value, 0, UINT32_MAX)
    return b"%d" % n, (n or None)


def truncate_error(text: Any) -> Optional[bytes]:
    """ERROR text for NACK: UTF-8, at most 4096 bytes cut on a character
    boundary; None (no ERROR) when empty."""
    if text is None:
        return None
    if not isinstance(text, str):
        raise TypeError(f"error must be a str, got {type(text).__name__}")
    data = text.encode("utf-8", "surrogateescape")
    if len(data) > MAX_ERROR_BYTES:
        data = data[:MAX_ERROR_BYTES]
        # Drop a partial character: continuation bytes are 0b10xxxxxx.
        end = len(data)
        while end > 0 and data[end - 1] & 0xC0 == 0x80:
            end -= 1
        if end > 0 and data[end - 1] >= 0xC0:
            lead = data[end - 1]
            need = 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
            if len(data) - (end - 1) < need:
                data = data[: end - 1]
    return data or None


# --- replies ---------------------------------------------------------------------


def _record(reply: Any) -> Optional[Dict[str, Any]]:
    """A record reply (RESP3 map or RESP2 flat array) as a dict of raw values."""
    if reply is None:
        return None
    if isinstance(reply, dict):
        return {_text(k): v for k, v in reply.items()}  # type: ignore[misc]
    items = list(reply)
    return {_text(items[i]): items[i + 1] for i in range(0, len(items), 2)}  # type: ignore[misc]


# The record fields that are text; every other field of DQ.STATS and of
# DQ.CONFIG's flow-control part is an integer or nil.
_STATS_TEXT = {"rate"}
_CONFIG_TEXT = {"lease-ms-from", "max-attempts-from", "backoff", "backoff-from", "rate"}


def parse_stats(reply: Any) -> Dict[str, Any]:
    record = _record(reply) or {}
    return {k: (_text(v) if k in _STATS_TEXT else _int(v)) for k, v in record.items()}


_GET_TEXT = {"id", "state", "max-attempts-from", "backoff", "backoff-from", "dead-reason", "group",
             "waiting-for", "last-error"}


def parse_get(reply: Any) -> Optional[Dict[str, Any]]:
    record = _record(reply)
    if record is None:
        return None
    out: Dict[str, Any] = {}
    for k, v in record.items():
        if v is None:
            out[k] = None
        elif k == "payload":
            out[k] = _bytes(v)
        elif k in _GET_TEXT:
            out[k] = _text(v)
        else:
            out[k] = int(v)
    return out


def parse_config(reply: Any) -> Dict[str, Any]:
    record = _record(reply) or {}
    return {k: (_text(v) if k in _CONFIG_TEXT else _int(v)) for k, v in record.items()}


_SCHEDULE_TEXT = {"name", "spec", "tz", "missed", "overlap", "backoff", "group"}


def parse_schedules(reply: Any) -> List[Schedule]:
    out = []
    for item in reply or []:
        record = _record(item) or {}
        values: Dict[str, Any] = {}
        for k, v in record.items():
            if v is None:
                values[k] = None
            elif k == "payload":
                values[k] = _bytes(v)
            elif k in _SCHEDULE_TEXT:
                values[k] = _text(v)
            else:
                values[k] = int(v)
        # Fields a later server may add are left out, not an error.
        kwargs: Dict[str, Any] = {f: values.get(f.replace("_", "-")) for f in _SCHEDULE_FIELDS}
        out.append(Schedule(**kwargs))
    return out


def _entry(item: Any) -> Entry:
    return Entry(_text(item[0]) or "", _bytes(item[1]), int(item[2]), int(item[3]), _text(item[4]))


def parse_entries(reply: Any) -> List[Entry]:
    return [_entry(item) for item in reply or []]


def parse_scan(reply: Any) -> Tuple[str, List[Entry]]:
    return _text(reply[0]) or "0", parse_entries(reply[1])


def _ok(reply: Any) -> None:
    return None


# --- one queue ---------------------------------------------------------------------

Plan = Generator[Union[List[Call], float], Any, Any]


def one(call: Call) -> Plan:
    results = yield [call]
    result = results[0]
    if isinstance(result, BaseException):
        raise result
    return result


def gather(calls: List[Call]) -> Plan:
    """Runs the calls (concurrently where the driver can); raises the first error."""
    results = yield calls
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results


class QueueCore:
    """DQ.* calls for one queue name."""

    def __init__(self, name: Any) -> None:
        self.key = queue_name(name)
        self.name = _text(self.key) or ""

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
        args: List[Any] = ["DQ.ADD", self.key, _bytes_arg("payload", payload)]
        if delay_ms is not None and at_ms is not None:
            raise ValueError("delay_ms and at_ms cannot be used together")
        if delay_ms is not None:
            args += [b"DELAY", _int_arg("delay_ms", delay_ms, 0, MAX_TIME)]
        if at_ms is not None:
            args += [b"AT", _int_arg("at_ms", at_ms, 0, MAX_TIME)]
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
        args += _message_options(priority, max_attempts, backoff, group, ttl_ms)
        return Call(tuple(args), _text)

    def pop_call(self, count: int = 1, block_ms: Optional[int] = None, lease_ms: Optional[int] = None) -> Call:
        args: List[Any] = ["DQ.POP", self.key, b"COUNT", _int_arg("count", count, 1, 10000)]
        if block_ms is not None:
            args += [b"BLOCK", _int_arg("block_ms", block_ms, 0, MAX_TIME)]
        if lease_ms is not None:
            args += [b"LEASE", _int_arg("lease_ms", lease_ms, 1, MAX_TIME)]
        name = self.name

        def parse(reply: Any) -> List[Delivery]:
            return [Delivery(_text(i[0]) or "", _bytes(i[1]), int(i[2]), name) for i in reply or []]

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
            args += [b"DELAY", _int_arg("delay_ms", delay_ms, 0, MAX_TIME)]
        if dead:
            args.append(b"DEAD")
        if attempt is None and isinstance(id, Delivery):
            attempt = id.attempt
        if attempt is not None:
            args += [b"ATTEMPT", _int_arg("attempt", attempt, 1, UINT32_MAX)]
        text = truncate_error(error)
        if text is not None:
            args += [b"ERROR", text]
        shown = _text(args[2])

        def parse(reply: Any) -> str:
            if reply is None:
                raise UnknownMessage(f"message {shown!r} is not in flight in queue {self.name!r}")
            return _text(reply) or ""

        return Call(tuple(args), parse)

    def touch_call(self, id: Any, *, lease_ms: Optional[int] = None, attempt: Optional[int] = None) -> Call:
        args: List[Any] = ["DQ.TOUCH", self.key, self._own_id(id)]
        if lease_ms is not None:
            args += [b"LEASE", _int_arg("lease_ms", lease_ms, 1, MAX_TIME)]
        if attempt is None and isinstance(id, Delivery):
            attempt = id.attempt
        if attempt is not None:
            args += [b"ATTEMPT", _int_arg("attempt", attempt, 1, UINT32_MAX)]
        shown = _text(args[2])

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
            ("DQ.PEEK", self.key, _state_arg(state), b"COUNT", _int_arg("count", count, 1, 10000)),
            parse_entries,
        )

    def scan_call(self, cursor: str, state: Optional[str] = None, count: Optional[int] = None) -> Call:
        args: List[Any] = ["DQ.SCAN", self.key, cursor]
        if state is not None:
            args += [b"STATE", _state_arg(state)]
        if count is not None:
            args += [b"COUNT", _int_arg("count", count, 1, 10000)]
        return Call(tuple(args), parse_scan)

    def redrive_call(self, count: Optional[int] = None, ids: Optional[Sequence[Any]] = None) -> Call:
        args: List[Any] = ["DQ.REDRIVE", self.key]
        if count is not None and ids is not None:
            raise ValueError("count and ids cannot be used together")
        if count is not None:
            args += [b"COUNT", _int_arg("count", count, 1, 10000)]
        if ids is not None:
            ids = _id_list(ids)
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
            args.append(_state_arg(state))
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
                args += [field_name.encode(), _int_arg(what, value, low, high)]
        if backoff is not None:
            args += [b"BACKOFF", _backoff_arg("backoff", backoff)]
        if rate is not None:
            args += [b"RATE", rate_arg(rate)[0]]
        if max_inflight is not None:
            args += [b"MAXINFLIGHT", max_inflight_arg(max_inflight)[0]]
        if len(args) == 3:
            raise ValueError("config_set needs at least one of lease_ms, max_attempts, backoff, rate, max_inflight")
        return Call(tuple(args), _ok)

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
        args: List[Any] = ["DQ.SCHEDULE", self.key, schedule_name_arg(name), _bytes_arg("payload", payload)]
        if (every is None) == (cron is None):
            raise ValueError("a schedule needs exactly one of every (a duration such as '5m', or ms) and cron")
        if every is not None:
            args += [b"EVERY", _duration_arg("every", every)]
        else:
            if not isinstance(cron, str):
                raise TypeError(f"cron must be a str such as '0 8 * * *', got {type(cron).__name__}")
            if not cron.strip():
                raise ValueError("cron must not be empty")
            args += [b"CRON", cron.encode()]
        if tz is not None:
            if cron is None:
                raise ValueError("tz needs cron: an interval (every) has no time zone")
            args += [b"TZ", _bytes_arg("tz", tz, allow_empty=False)]
        if start is not None:
            args += [b"START", _int_arg("start", start, 0, MAX_TIME)]
        if end is not None:
            args += [b"END", _int_arg("end", end, 0, MAX_TIME)]
        if start is not None and end is not None and start > end:
            raise ValueError(f"start must not be after end ({start} > {end})")
        if limit is not None:
            args += [b"LIMIT", _int_arg("limit", limit, 1, UINT64_MAX)]
        if missed is not None:
            args += [b"MISSED", _choice_arg("missed", missed, MISSED)]
        if overlap is not None:
            args += [b"OVERLAP", _choice_arg("overlap", overlap, OVERLAP)]
        if not isinstance(nx, bool):
            raise TypeError(f"nx must be a bool, got {type(nx).__name__}")
        if nx:
            args.append(b"NX")
        args += _message_options(priority, max_attempts, backoff, group, ttl_ms)
        return Call(tuple(args), _int)

    def unschedule_call(self, names: Sequence[Any]) -> Call:
        if not names:
            raise ValueError("unschedule needs at least one name")
        return Call(("DQ.UNSCHEDULE", self.key, *[schedule_name_arg(n) for n in names]), int)

    def schedules_call(self) -> Call:
        return Call(("DQ.SCHEDULES", self.key), parse_schedules)

    def pause_call(self, for_ms: Any = None) -> Call:
        args: List[Any] = ["DQ.PAUSE", self.key]
        if for_ms is not None:
            args += [b"FOR", _int_arg("for_ms", for_ms, 1, MAX_TIME)]
        return Call(tuple(args), _ok)

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
    args: List[Any] = ["DQ.MPOP", len(cores), *[core.key for core in cores], b"COUNT", _int_arg("count", count, 1, 10000)]
    if block_ms is not None:
        args += [b"BLOCK", _int_arg("block_ms", block_ms, 0, MAX_TIME)]
    if lease_ms is not None:
        args += [b"LEASE", _int_arg("lease_ms", lease_ms, 1, MAX_TIME)]

    def parse(reply: Any) -> Tuple[Optional[str], List[Delivery]]:
        if not reply:
            return None, []
        name = _text(reply[0]) or ""
        return name, [Delivery(_text(i[0]) or "", _bytes(i[1]), int(i[2]), name) for i in reply[1] or []]

    return Call(tuple(args), parse)


def _id_list(ids: Any) -> List[Any]:
    if isinstance(ids, (str, bytes, bytearray, Delivery)):
        raise TypeError("ids must be a list of ids, not a single id")
    return list(ids)


def queues_call() -> Call:
    return Call(("DQ.QUEUES",), lambda reply: [_text(n) or "" for n in reply or []])


# --- sharded queues (docs/sharding.md) ---------------------------------------------------------


def crc16(data: bytes, crc: int = 0) -> int:
    """CRC-16/XMODEM, as Redis Cluster hashes keys (binascii's crc_hqx is
    that CRC, in C)."""
    return binascii.crc_hqx(data, crc)


def key_slot(name: bytes) -> int:
    """The cluster slot of a name without hash tag (shard names have none)."""
    return crc16(name) % SLOTS


@functools.lru_cache(maxsize=64)
def shard_names(queue: bytes, shards: int) -> Tuple[bytes, ...]:
    """Every shard's name: `Q~<i>of<N>~<k>`, k the smallest that puts the
    name's slot in shard i's segment of the slot space (about N tries each,
    so 1024 shards take about a million CRCs: the prefix's CRC is computed
    once and only k's digits are added per try)."""
    width = SLOTS // shards
    out = []
    for shard in range(shards):
        low, high = shard * width, (shard + 1) * width
        prefix = queue + b"~%dof%d~" % (shard, shards)
        start = crc16(prefix)
        k = 0
        while not low <= crc16(b"%d" % k, start) % SLOTS < high:
            k += 1
        out.append(prefix + b"%d" % k)
    return tuple(out)


def shard_name(queue: bytes, shards: int, shard: int) -> bytes:
    return shard_names(queue, shards)[shard]


def shard_of(basis: bytes, shards: int) -> int:
    return zlib.crc32(basis) % shards


def random_id() -> str:
    return os.urandom(16).hex()


_STAT_MAX = {"oldest-ready-age-ms"}
_STAT_MIN = {"next-due-at"}
_FLOW = {"paused", "paused-until", "rate", "max-inflight"}


def merge_flow(records: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The whole queue's flow-control fields from its shards' (as
    ShardedQueue.config_set leaves them): `paused` 1 when any shard is
    paused, `paused-until` the latest end of those pauses (None when one
    of them lasts until DQ.RESUME); `max-inflight` the shards' limits
    summed; `rate` the shards' limits summed over their common window
    (`n/d`), or — shards set apart, with different windows or some without
    a rate — the shards' rates joined with ','; None when no shard has one."""
    out: Dict[str, Any] = {}
    if not records or "paused" not in records[0]:
        return out
    paused = [r for r in records if r.get("paused")]
    out["paused"] = 1 if paused else 0
    untils = [r.get("paused-until") for r in paused]
    out["paused-until"] = None if not untils or None in untils else max(u for u in untils if u is not None)
    limits = [r.get("max-inflight") for r in records]
    out["max-inflight"] = None if all(n is None for n in limits) else sum(n or 0 for n in limits)
    rates = [r.get("rate") for r in records]
    if all(x is None for x in rates):
        out["rate"] = None
    else:
        parsed = [_RATE.match(x) if x is not None else None for x in rates]
        windows = {m.group(2) for m in parsed if m is not None}
        if all(m is not None for m in parsed) and len(windows) == 1:
            out["rate"] = f"{sum(int(m.group(1)) for m in parsed if m is not None)}/{windows.pop()}"
        else:
            out["rate"] = ",".join(x or "none" for x in rates)
    return out


def merge_stats(records: Iterable[Dict[str, Any]]) -> Dict[str, Any]:
    records = list(records)
    out: Dict[str, Any] = {}
    for record in records:
        for k, v in record.items():
            if k in _FLOW:
                continue
            have = out.get(k)
            if k not in out or have is None:
                out[k] = v
            elif v is None:
                pass
            elif k in _STAT_MAX:
                out[k] = max(have, v)
            elif k in _STAT_MIN:
                out[k] = min(have, v)
            else:
                out[k] = have + v
    out.update(merge_flow(records))
    return out


def merge_config(records: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Shard 0's defaults (config_set keeps the shards alike), the whole
    queue's flow control (merge_flow) and `throttled` summed."""
    if not records:
        return {}
    flow = merge_flow(records)
    out = dict(records[0])
    for k in out:
        if k in flow:
            out[k] = flow[k]
        elif k == "throttled":
            out[k] = sum(r.get(k) or 0 for r in records)
    return out


def split_limit(what: str, n: int, shards: int) -> int:
    """A shard's part of a whole-queue limit n: floor(n / shards), so that
    the shards together never allow more than n."""
    if n < shards:
        raise ValueError(
            f"{what} {n} cannot be split over {shards} shards: each shard gets floor(n / {shards}), "
            f"which would be 0 (no limit); give at least {shards}, or 0 to remove the limit"
        )
    return n // shards


class ShardedCore:
    """The plans of a sharded queue: N QueueCores and the routing rules."""

    def __init__(self, name: Any, shards: Any) -> None:
        key = queue_name(name)
        if b"{" in key or b"}" in key:
            raise ValueError(f"a sharded queue's name must not contain '{{' or '}}': {_text(key)!r}")
        if isinstance(shards, bool) or not isinstance(shards, int):
            raise TypeError(f"shards must be an int, got {type(shards).__name__}")
        if not 1 <= shards <= 1024 or shards & (shards - 1):
            raise ValueError(f"shards must be a power of two from 1 to 1024, got {shards}")
        self.key = key
        self.name = _text(key) or ""
        self.shards = shards
        self.cores = [QueueCore(n) for n in shard_names(key, shards)]
        self._by_name = {c.name: c for c in self.cores}
        self._next = 0

    @property
    def parts(self) -> List[QueueCore]:
        return self.cores

    def shard_for(self, basis: Any) -> int:
        return shard_of(_bytes_arg("basis", basis, allow_empty=False, limit=MAX_ID_BYTES), self.shards)

    def _routed(self, id: Any = None, group: Any = None, shard_key: Any = None) -> Optional[QueueCore]:
        """The shard named by a Delivery, a group, a shard key (in that order), else None."""
        if isinstance(id, Delivery):
            core = self._by_name.get(id.queue)
            if core is None:
                raise ValueError(f"delivery {id.id!r} came from queue {id.queue!r}, not a shard of {self.name!r}")
            return core
        if group is not None:
            return self.cores[shard_of(_bytes_arg("group", group, allow_empty=False, limit=MAX_ID_BYTES), self.shards)]
        if shard_key is not None:
            return self.cores[
                shard_of(_bytes_arg("shard_key", shard_key, allow_empty=False, limit=MAX_ID_BYTES), self.shards)
            ]
        return None

    def add(self, payload: Any, *, id: Any = None, group: Any = None, shard_key: Any = None, **options: Any) -> Plan:
        if options.get("xx") and id is None:
            raise ValueError("xx needs an id")
        if shard_key is not None:
            _bytes_arg("shard_key", shard_key, allow_empty=False, limit=MAX_ID_BYTES)
        if id is None:
            id = random_id()
        core = self._routed(group=group, shard_key=shard_key) or self.cores[shard_of(id_arg(id), self.shards)]
        return one(core.add_call(payload, id=id, group=group, **options))

    def pop(self, count: int = 1, block_ms: Optional[int] = None, lease_ms: Optional[int] = None) -> Plan:
        # Validate once, eagerly.
        self.cores[0].pop_call(count, block_ms, lease_ms)
        return self._pop(count, block_ms, lease_ms)

    def _pop(self, count: int, block_ms: Optional[int], lease_ms: Optional[int]) -> Plan:
        deadline = None if block_ms is None else time.monotonic() + block_ms / 1000
        pause = 0.01
        while True:
            got: List[Delivery] = []
            for _ in range(self.shards):
                core = self.cores[self._next]
                self._next = (self._next + 1) % self.shards
                got += yield from one(core.pop_call(count - len(got), None, lease_ms))
                if len(got) >= count:
                    break
            if got or deadline is None:
                return got
            left = deadline - time.monotonic() if block_ms else pause
            if block_ms and left <= 0:
                return got
            yield min(pause, left)
            pause = min(pause * 2, 0.25)

    def ack(self, ids: Sequence[Any]) -> Plan:
        if not ids:
            raise ValueError("ack needs at least one id")
        per: Dict[str, List[Any]] = {}
        for i in ids:
            id_arg(i)
            routed = self._routed(i)
            for core in [routed] if routed else self.cores:
                per.setdefault(core.name, []).append(i)
        calls = [self._by_name[n].ack_call(v) for n, v in per.items()]
        return self._sum(calls)

    def _sum(self, calls: List[Call]) -> Plan:
        results = yield from gather(calls)
        return sum(results)

    def nack(self, id: Any, *, group: Any = None, shard_key: Any = None, **options: Any) -> Plan:
        core = self._routed(id, group, shard_key) or self.cores[shard_of(id_arg(id), self.shards)]
        return one(core.nack_call(id, **options))

    def touch(self, id: Any, *, group: Any = None, shard_key: Any = None, **options: Any) -> Plan:
        core = self._routed(id, group, shard_key) or self.cores[shard_of(id_arg(id), self.shards)]
        return one(core.touch_call(id, **options))

    def stats(self) -> Plan:
        return self._merge_stats()

    def _merge_stats(self) -> Plan:
        results = yield from gather([c.stats_call() for c in self.cores])
        return merge_stats(results)

    def get(self, id: Any, *, group: Any = None, shard_key: Any = None) -> Plan:
        routed = self._routed(None, group, shard_key)
        if routed is not None:
            return one(routed.get_call(id))
        return self._first([c.get_call(id) for c in self.cores])

    def _first(self, calls: List[Call]) -> Plan:
        results = yield from gather(calls)
        return next((r for r in results if r is not None), None)

    def peek(self, state: str, count: int = 10) -> Plan:
        calls = [c.peek_call(state, count) for c in self.cores]
        return self._merge_peek(calls, count)

    def _merge_peek(self, calls: List[Call], count: int) -> Plan:
        results = yield from gather(calls)
        merged = sorted((e for r in results for e in r), key=lambda e: e.time)
        return merged[:count]

    def redrive(self, count: Optional[int] = None, ids: Optional[Sequence[Any]] = None) -> Plan:
        self.cores[0].redrive_call(count, ids)  # validate
        if ids is not None:
            return self._sum([c.redrive_call(None, ids) for c in self.cores])
        return self._redrive_count(count)

    def _redrive_count(self, count: Optional[int]) -> Plan:
        moved = 0
        for core in self.cores:
            if count is not None and moved >= count:
                break
            moved += yield from one(core.redrive_call(None if count is None else count - moved))
        return moved

    def cancel(self, ids: Sequence[Any], *, group: Any = None, shard_key: Any = None) -> Plan:
        routed = self._routed(None, group, shard_key)
        if routed is not None:
            return one(routed.cancel_call(ids))
        return self._sum([c.cancel_call(ids) for c in self.cores])

    def purge(self, state: Optional[str] = None) -> Plan:
        return self._sum([c.purge_call(state) for c in self.cores])

    def config(self) -> Plan:
        return self._merge_config([c.config_call() for c in self.cores])

    def _merge_config(self, calls: List[Call]) -> Plan:
        results = yield from gather(calls)
        return merge_config(results)

    def config_set(self, *, rate: Any = None, max_inflight: Any = None, **options: Any) -> Plan:
        # The whole queue's limits, split: each shard gets floor(n / shards).
        if rate is not None:
            parsed = rate_arg(rate)[1]
            if parsed is not None:
                n, window = parsed
                rate = f"{split_limit('rate', n, self.shards)}/{window}"
        if max_inflight is not None:
            n_inflight = max_inflight_arg(max_inflight)[1]
            if n_inflight is not None:
                max_inflight = split_limit("max_inflight", n_inflight, self.shards)
        calls = [c.config_set_call(rate=rate, max_inflight=max_inflight, **options) for c in self.cores]
        return self._all_ok(calls)

    def schedule_core(self, name: Any) -> QueueCore:
        """The shard that holds schedule `name`: placed by its name as a
        message is by its basis."""
        return self.cores[shard_of(schedule_name_arg(name), self.shards)]

    def schedule(self, name: Any, payload: Any, **options: Any) -> Plan:
        return one(self.schedule_core(name).schedule_call(name, payload, **options))

    def unschedule(self, names: Sequence[Any]) -> Plan:
        if not names:
            raise ValueError("unschedule needs at least one name")
        per: Dict[str, List[Any]] = {}
        for n in names:
            per.setdefault(self.schedule_core(n).name, []).append(n)
        return self._sum([self._by_name[shard].unschedule_call(v) for shard, v in per.items()])

    def schedules(self) -> Plan:
        return self._merge_schedules([c.schedules_call() for c in self.cores])

    def _merge_schedules(self, calls: List[Call]) -> Plan:
        results = yield from gather(calls)
        return sorted((s for r in results for s in r), key=lambda s: s.name.encode("utf-8", "surrogateescape"))

    def pause(self, for_ms: Any = None) -> Plan:
        return self._all_ok([c.pause_call(for_ms) for c in self.cores])

    def resume(self) -> Plan:
        return self._any([c.resume_call() for c in self.cores])

    def _any(self, calls: List[Call]) -> Plan:
        results = yield from gather(calls)
        return any(results)

    def _all_ok(self, calls: List[Call]) -> Plan:
        yield from gather(calls)
        return None


# --- the worker's decisions ----------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """How the worker settled a delivery, given to Worker(on_settled=...);
    docs/client-vocabulary.md has the same words for the three libraries.

    action: what the handler asked for, what the worker sends: "ack" (it
    returned), "nack" (it raised, or raised Retry: a retry is scheduled, or
    the message dies if its attempts are used up) or "dead" (Permanent).
    state: what the server made of it: "acked"; "acked-late" (the DQ.ACK of
    its batch counted fewer: a message of that batch was no longer in
    flight); the NACK's new state ("delayed", "ready", "dead"); "stale" (the
    delivery was over, its lease lost: nothing changed); "unsettled" (the
    call failed, `exception` says why: the message comes back after its
    lease).
    error: the ERROR text sent with the NACK, if any."""

    action: str
    state: str
    error: Optional[str] = None
    exception: Optional[BaseException] = None


def settle_call(core: QueueCore, delivery: Delivery, failure: Optional[BaseException]) -> Tuple[str, Optional[Call], Optional[str]]:
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
        return action, core.ack_call([delivery.id]), None
    if delivery.lost:
        return action, None, text
    if action == "dead":
        return action, core.nack_call(delivery.id, dead=True, attempt=delivery.attempt, error=text), text
    delay_ms = failure.delay_ms if isinstance(failure, Retry) else None
    return action, core.nack_call(delivery.id, delay_ms=delay_ms, attempt=delivery.attempt, error=text), text


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
    _int_arg("concurrency", concurrency, 1, 10000)
    _int_arg("lease_ms", lease_ms, 3, MAX_TIME)
    _int_arg("block_ms", block_ms, 1, MAX_TIME)


def hash_slot(key: bytes) -> int:
    """The cluster slot of a key, hash tags included: the part between the
    first '{' and the next '}' when it is not empty."""
    left = key.find(b"{")
    if left >= 0:
        right = key.find(b"}", left + 1)
        if right > left + 1:
            key = key[left + 1 : right]
    return crc16(key) % SLOTS


def is_cluster(client: Any) -> bool:
    return hasattr(client, "get_primaries")


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
    return len({hash_slot(q._core.key) for q in queues}) == 1


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
