"""Argument checks: each public argument checked, and turned into the
bytes the server reads, before anything is sent. A wrong type raises
TypeError, a bad value ValueError, each naming the argument."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any, List, Optional, Tuple, Union

from .records import Delivery

STATES = ("delayed", "ready", "inflight", "dead", "done")
MAX_ERROR_BYTES = 4096
MAX_ID_BYTES = 1024
# What DQ.TOUCH ... PROGRESS takes (64 KiB) and what DQ.DONE keeps (the
# payload limit, 512 MiB): the server refuses more, a DONE with one result
# over it whole.
MAX_PROGRESS_BYTES = 65_536
MAX_RESULT_BYTES = 512 * 1024 * 1024
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
UINT32_MAX = 2**32 - 1
MAX_TIME = 2**53 - 1

Bytesish = Union[str, bytes, bytearray, memoryview]
# A duration option: int milliseconds, a timedelta, or a str in the
# server's grammar ("1500", "250ms", "30s", "5m", "2h", "7d").
Duration = Union[int, str, timedelta]

# The module's duration grammar (docs/commands.md, "Arguments, replies and
# errors"): a whole number, alone (milliseconds) or with one lower-case unit.
# [0-9], not \d: Python's \d takes other scripts' digits too.
DURATION = re.compile(r"([0-9]+)(ms|s|m|h|d)?")
UNIT_MS = {None: 1, "ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
DURATION_FORMS = (
    "int milliseconds, a datetime.timedelta, or a str: a whole number alone (ms) or with a unit "
    "ms, s, m, h or d, such as '1500', '250ms', '30s', '5m', '2h', '7d' "
    "(no fractions, signs, spaces or upper-case units)"
)


def int_arg(what: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, got {type(value).__name__}")
    if not low <= value <= high:
        raise ValueError(f"{what} must be from {low} to {high}, got {value}")
    return value


def parse_duration(text: str) -> Optional[int]:
    """A duration string in the server's grammar as milliseconds; None when
    it is not one, or is past 2^53 - 1 ms (the server's limit)."""
    m = DURATION.fullmatch(text)
    if m is None or len(m.group(1).lstrip("0")) > 16:  # 2^53 has 16 digits
        return None
    ms = int(m.group(1)) * UNIT_MS[m.group(2)]
    return ms if ms <= MAX_TIME else None


def ms_arg(what: str, value: Any, low: int, high: int = MAX_TIME) -> int:
    """A duration option as whole milliseconds from `low` to `high`: int
    ms, a timedelta (rounded down to whole ms, as Rust's Duration is) or a
    str in the server's grammar. A wrong type raises TypeError, anything
    else ValueError, naming the option and the forms it takes."""
    if isinstance(value, timedelta):
        ms = value // timedelta(milliseconds=1)
    elif isinstance(value, str):
        parsed = parse_duration(value)
        if parsed is None:
            raise ValueError(f"{what} must be a duration: {DURATION_FORMS}; got {value!r}")
        ms = parsed
    elif isinstance(value, int) and not isinstance(value, bool):
        ms = value
    else:
        raise TypeError(f"{what} must be a duration: {DURATION_FORMS}; got {type(value).__name__}")
    if not low <= ms <= high:
        shown = value if isinstance(value, int) else f"{value!r} ({ms} ms)"
        raise ValueError(f"{what} must be from {low} to {high} ms, got {shown}")
    return ms


def bytes_arg(what: str, value: Any, *, allow_empty: bool = True, limit: Optional[int] = None) -> bytes:
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
    return bytes_arg(what, value, allow_empty=False, limit=MAX_ID_BYTES)


def queue_name(name: Any) -> bytes:
    return bytes_arg("queue name", name)


def state_arg(state: Any) -> bytes:
    if not isinstance(state, str):
        raise TypeError(f"state must be a str, got {type(state).__name__}")
    if state.lower() not in STATES:
        raise ValueError(f"state must be one of delayed, ready, inflight, dead, done; got {state!r}")
    return state.upper().encode()


def backoff_arg(what: str, value: Any) -> bytes:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str such as 'exp:1s:1h', got {type(value).__name__}")
    if not value:
        raise ValueError(f"{what} must not be empty")
    return value.encode()


def group_arg(group: Any) -> bytes:
    """A group's name (GROUP g): not empty, at most 1024 bytes."""
    return bytes_arg("group", group, allow_empty=False, limit=MAX_ID_BYTES)


def message_options(priority: Any, max_attempts: Any, backoff: Any, group: Any, ttl_ms: Any) -> List[Any]:
    """The options DQ.ADD and DQ.SCHEDULE share, checked."""
    args: List[Any] = []
    if priority is not None:
        args += [b"PRIORITY", int_arg("priority", priority, INT32_MIN, INT32_MAX)]
    if max_attempts is not None:
        args += [b"MAXATTEMPTS", int_arg("max_attempts", max_attempts, 1, INT32_MAX)]
    if backoff is not None:
        args += [b"BACKOFF", backoff_arg("backoff", backoff)]
    if group is not None:
        args += [b"GROUP", group_arg(group)]
    if ttl_ms is not None:
        args += [b"TTL", ms_arg("ttl_ms", ttl_ms, 1)]
    return args


MAX_SCHEDULE_NAME_BYTES = 1007  # a run's id is `name@T`: 1024 bytes at most
MISSED = ("skip", "one", "all")
OVERLAP = ("allow", "skip")
UINT64_MAX = 2**64 - 1


def schedule_name_arg(name: Any) -> bytes:
    return bytes_arg("schedule name", name, allow_empty=False, limit=MAX_SCHEDULE_NAME_BYTES)


def choice_arg(what: str, value: Any, choices: Tuple[str, ...]) -> bytes:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, got {type(value).__name__}")
    if value.lower() not in choices:
        raise ValueError(f"{what} must be one of {', '.join(choices)}; got {value!r}")
    return value.upper().encode()


RATE = re.compile(r"([0-9]+)/(.*)", re.S)
RATE_FORMS = (
    "n/duration, such as '100/1s', '5000/1h' or '20/250ms' (the duration as in any duration option, "
    "at least 1 ms), or 0 to remove it"
)


def rate_arg(value: Any, what: str = "rate") -> Tuple[bytes, Optional[Tuple[int, str]]]:
    """RATE's (or GROUPRATE's) value and, for `n/duration`, (n, duration);
    `0` and 'DEFAULT' remove the limit (None). The window is checked with
    the duration grammar; n's range (at most 1000000) is the server's to
    check."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(f"{what} must be a str such as '100/1s' (or 0 to remove it), got {type(value).__name__}")
    if isinstance(value, int):
        if value != 0:
            raise ValueError(f"{what} must be a str such as '100/1s', or 0 to remove it; got {value}")
        return b"0", None
    if value in ("0", "DEFAULT"):
        return value.encode(), None
    m = RATE.fullmatch(value)
    window = None if m is None else parse_duration(m.group(2))
    if m is None or not window:
        raise ValueError(f"{what} must be {RATE_FORMS}; got {value!r}")
    n = int(m.group(1))
    return value.encode(), (None if n == 0 else (n, m.group(2)))


MAX_GROUP_LIMIT = 1_000_000
ORDERS = ("priority", "fair")


def group_limit_arg(value: Any) -> bytes:
    """GROUPLIMIT's value: an int from 1 to 1000000, or 'DEFAULT' (1)."""
    if value == "DEFAULT":
        return b"DEFAULT"
    if isinstance(value, str):
        raise ValueError(f"group_limit must be an int from 1 to {MAX_GROUP_LIMIT} or 'DEFAULT', got {value!r}")
    return b"%d" % int_arg("group_limit", value, 1, MAX_GROUP_LIMIT)


def order_arg(value: Any) -> bytes:
    """ORDER's value: 'priority' or 'fair' (any case), or 'DEFAULT' (priority)."""
    if value == "DEFAULT":
        return b"DEFAULT"
    return choice_arg("order", value, ORDERS)


def count_limit_arg(what: str, value: Any, high: int) -> Tuple[bytes, Optional[int]]:
    """A count limit's value (MAXINFLIGHT, RETAINMAX) and n; `0` and
    'DEFAULT' remove the limit (None)."""
    if value == "DEFAULT":
        return b"DEFAULT", None
    if isinstance(value, str):
        raise ValueError(f"{what} must be an int or 'DEFAULT', got {value!r}")
    n = int_arg(what, value, 0, high)
    return b"%d" % n, (n or None)


def result_arg(value: Any) -> bytes:
    """A result DQ.DONE keeps: str (sent as UTF-8) or bytes, empty included."""
    return bytes_arg("result", value, limit=MAX_RESULT_BYTES)


def progress_arg(value: Any) -> bytes:
    return bytes_arg("progress", value, limit=MAX_PROGRESS_BYTES)


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


def id_list(ids: Any) -> List[Any]:
    if isinstance(ids, (str, bytes, bytearray, Delivery)):
        raise TypeError("ids must be a list of ids, not a single id")
    return list(ids)
