"""The values the library hands out: Entry, Delivery, Schedule, Outcome,
JobOutcome, Event, Group."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, fields
from typing import Any, Callable, NamedTuple, Optional


class Entry(NamedTuple):
    """One message as DQ.PEEK and DQ.SCAN show it."""

    id: str
    payload: bytes
    attempt: int
    time: int  # due time, lease deadline, time of death or when it finished (Unix ms)
    last_error: Optional[str]


class Event(NamedTuple):
    """One event of a queue's log, as DQ.EVENTS gives it (docs/semantics.md,
    "Events"): `seq` numbers the queue's events from 1; `at` is when it
    happened (Unix ms); `type` one of added, replaced, ready, delivered,
    done, retry, dead, cancelled, redriven, progress, dropped, purged,
    paused, resumed; `id` the message's (None for purged, paused,
    resumed); `attempt` its deliveries so far where one applies; `detail`
    the bytes the server gives (a retry's or death's reason, a progress
    value, how many were purged, the group's name for a paused or resumed
    of one group: pause(group=...), resume(group=...)), else None (a
    paused or resumed of the whole queue). `queue` is the queue whose log
    it is: a ShardedQueue's reader gives the shard's name, the key of the
    position to keep for it."""

    seq: int
    at: int
    type: str
    id: Optional[str]
    attempt: Optional[int]
    detail: Optional[bytes]
    queue: str


class Group(NamedTuple):
    """One group of a queue as DQ.GROUPS shows it (queue.groups()):
    `waiting` counts its due messages held back (by GROUPLIMIT, GROUPRATE
    or its pause), `ready` and `inflight` its messages in those states;
    `paused` whether DQ.PAUSE ... GROUP holds it, and `paused_until` until
    when (Unix ms; None when not paused or paused until resume())."""

    name: str
    waiting: int
    ready: int
    inflight: int
    paused: bool
    paused_until: Optional[int]


_EVENT_LOCK = threading.Lock()


@dataclass(eq=False)
class Delivery:
    """One delivery of a message, as DQ.POP handed it out.

    When a Worker's heartbeat learns that the delivery is over (its fenced
    DQ.TOUCH replies STALE) it sets `lost_reason` — "cancelled" when the
    message is gone (DQ.CANCEL, DQ.PURGE), "lost" when the lease ran out
    and another consumer may hold it — then `lost` (True either way), then
    the `cancelled` event: a handler doing long work checks `lost` or waits
    on `cancelled`, and gives up.

    A Worker's handler reports how far it got with `progress(value)`."""

    id: str
    payload: bytes
    attempt: int
    queue: str
    lost: bool = field(default=False)
    lost_reason: Optional[str] = field(default=None)
    # Made on first use: most deliveries never need one, and a Worker
    # handles tens of thousands a second.
    _cancelled: Optional[threading.Event] = field(default=None, init=False, repr=False)
    # Set by the Worker that handed the delivery out: sends its progress
    # (one per queue, not per delivery: a Worker hands out thousands a second).
    _reporter: Optional[Callable[[Delivery, Any], Any]] = field(default=None, init=False, repr=False)

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

    def progress(self, value: Any) -> Any:
        """Records how far the handler got (str or bytes, at most 64 KiB):
        `DQ.TOUCH queue id LEASE lease_ms ATTEMPT n PROGRESS value`, with
        the worker's lease (so it never shortens it) and fenced by this
        delivery's attempt: StaleDelivery once the delivery is over. DQ.GET
        shows it as `progress` until the next delivery of the message
        starts. Returns the new lease deadline (Unix ms); in a
        dq.asyncio.Worker, an awaitable of it when called on the loop (a
        coroutine handler awaits it), the deadline itself from a
        plain-function handler's thread. Only a Worker's deliveries can:
        code that pops by itself calls queue.progress(delivery, value)."""
        reporter = self._reporter
        if reporter is None:
            raise RuntimeError(
                f"delivery {self.id!r} was not handed out by a Worker: report its progress with "
                f"queue.progress(delivery, value, lease_ms=...) on its queue {self.queue!r}"
            )
        return reporter(self, value)


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


SCHEDULE_FIELDS = tuple(f.name for f in fields(Schedule))


@dataclass(frozen=True)
class Outcome:
    """How the worker settled a delivery, given to Worker(on_settled=...);
    docs/client-vocabulary.md has the same words for the three libraries.

    action: what the handler asked for, what the worker sends: "ack" (it
    returned None), "done" (it returned a result: str or bytes, sent by
    DQ.DONE), "nack" (it raised, or raised Retry: a retry is scheduled, or
    the message dies if its attempts are used up) or "dead" (Permanent, or
    a return value that is no result).
    state: what the server made of it: "acked" (for "done" too); "acked-late"
    (the DQ.ACK or DQ.DONE of its batch counted fewer: a message of that
    batch was no longer in flight); the NACK's new state ("delayed", "ready", "dead"); "stale" (the
    delivery was over, its lease lost: nothing changed); "unsettled" (the
    call failed, `exception` says why: the message comes back after its
    lease).
    error: the ERROR text sent with the NACK, if any."""

    action: str
    state: str
    error: Optional[str] = None
    exception: Optional[BaseException] = None


@dataclass(frozen=True)
class JobOutcome:
    """What became of a message, as DQ.WAIT tells it (queue.wait()).

    state: "done" (finished by a Worker's result, DQ.DONE or DQ.ACK, and
    kept by its retention), "dead" (its last attempt failed, NACK DEAD, its
    lease ran out on the last attempt, its TTL), or "gone" (the queue does
    not hold the id: never added, cancelled, purged, or finished with no
    retention to keep it, or past it).
    result: a done message's result (bytes; b"" is a result), None after a
    plain ACK and for the other states.
    error: a dead message's last error, None when it has none and for the
    other states."""

    state: str
    result: Optional[bytes] = None
    error: Optional[str] = None
