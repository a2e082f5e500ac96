"""The errors dq raises and the two a Worker's handler raises."""

from __future__ import annotations

import re
from typing import Optional

import redis.exceptions

from .args import Duration, ms_arg


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


class EventGap(DqError):
    """DQ.EVENTS AFTER a seq the queue no longer keeps (reply `GAP the oldest
    event kept is N`): the events between were trimmed. `oldest` is N, the
    oldest seq kept (one past the newest when none is kept); `queue` the
    queue (the shard, for a ShardedQueue) whose reader fell behind. Read on
    with after=oldest - 1, or rebuild your view from scan()."""

    def __init__(self, text: str, oldest: int, queue: Optional[str] = None) -> None:
        super().__init__(text)
        self.oldest = oldest
        self.queue = queue


class EventLogRestarted(Exception):
    """An event reader's queue answered with a last seq below the reader's
    position: the log it followed is gone (the queue was deleted and made
    again, or replaced by RESTORE), so its seqs start again and `after`
    means nothing in the new one. `queue` is the queue (the shard), `after`
    the reader's position, `last_seq` the new log's newest seq. Read the
    new log from its oldest kept event with after=None (or 0). Not a server
    error: the reader tells it from DQ.EVENTS' reply."""

    def __init__(self, queue: str, after: int, last_seq: int) -> None:
        super().__init__(
            f"the event log of queue {queue!r} restarted: its newest seq is {last_seq}, below the reader's {after} "
            "(the queue was deleted and made again, or replaced)"
        )
        self.queue = queue
        self.after = after
        self.last_seq = last_seq


class Permanent(Exception):
    """Raise from a Worker handler: the message is dead now (DQ.NACK ... DEAD),
    with this exception's message as its last error."""


class Retry(Exception):
    """Raise from a Worker handler: try again after `delay_ms` (DQ.NACK ...
    DELAY), or after the message's backoff when `delay_ms` is None. `error`
    is kept as the message's last error. `delay_ms` is a duration (int ms,
    a timedelta, or a str such as "30s"), kept as int ms."""

    def __init__(self, delay_ms: Optional[Duration] = None, error: Optional[str] = None) -> None:
        if delay_ms is not None:
            delay_ms = ms_arg("Retry delay_ms", delay_ms, 0)
        if error is not None and not isinstance(error, str):
            raise TypeError(f"Retry error must be a str, got {type(error).__name__}")
        super().__init__(delay_ms, error)
        self.delay_ms = delay_ms
        self.error = error

    def __str__(self) -> str:
        return self.error or ""


_GAP = re.compile(r"GAP the oldest event kept is ([0-9]+)")


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
    gap = _GAP.match(text)
    if gap:
        return EventGap(text, int(gap.group(1)))
    if text.startswith("OOM") or text.startswith("maxmemory-policy is") or text.startswith(
        "ERR maxmemory-policy is"
    ):
        return OutOfMemory(text)
    return DqError(text)
