"""The errors dq raises and the two a Worker's handler raises."""

from __future__ import annotations

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
