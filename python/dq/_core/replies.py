"""Reply parsing: RESP2 and RESP3 replies, whatever the client's
decode_responses, into the library's values (payloads bytes, texts str)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Set, Tuple

from .errors import DqError
from .records import SCHEDULE_FIELDS, Entry, Group, JobOutcome, Schedule


def as_text(value: Any) -> Optional[str]:
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "surrogateescape")
    return str(value)


def as_bytes(value: Any) -> bytes:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    return str(value).encode("utf-8", "surrogateescape")


def as_int(value: Any) -> Optional[int]:
    return None if value is None else int(value)

def _record(reply: Any) -> Optional[Dict[str, Any]]:
    """A record reply (RESP3 map or RESP2 flat array) as a dict of raw values."""
    if reply is None:
        return None
    if isinstance(reply, dict):
        return {as_text(k): v for k, v in reply.items()}  # type: ignore[misc]
    items = list(reply)
    return {as_text(items[i]): items[i + 1] for i in range(0, len(items), 2)}  # type: ignore[misc]


# The record fields that are text; every other field of DQ.STATS and of
# DQ.CONFIG's flow-control part is an integer or nil.
_STATS_TEXT = {"rate"}
_CONFIG_TEXT = {"lease-ms-from", "max-attempts-from", "backoff", "backoff-from", "rate", "retain-ms-from",
                "group-rate", "order"}


def _number(value: Any) -> Any:
    """A field that is not text: an int (sent as an integer, or as its
    digits); a value that is no number is a field a newer module added, and
    is kept as text rather than failing the whole record."""
    if value is None or isinstance(value, int):
        return value
    try:
        return int(value)
    except ValueError:
        return as_text(value)


def _counts(reply: Any, texts: Set[str]) -> Dict[str, Any]:
    """A record of ints or nil, but for the fields in `texts` (str)."""
    record = _record(reply) or {}
    return {k: (as_text(v) if k in texts else _number(v)) for k, v in record.items()}


def parse_stats(reply: Any) -> Dict[str, Any]:
    return _counts(reply, _STATS_TEXT)


_GET_TEXT = {"id", "state", "max-attempts-from", "backoff", "backoff-from", "dead-reason", "group",
             "waiting-for", "last-error"}


# The fields that are any bytes the application chose: a result "42" stays
# b"42", not the number.
_BYTES = {"payload", "result", "progress"}


def _typed(record: Dict[str, Any], texts: Set[str]) -> Dict[str, Any]:
    """A record's raw values typed: nil None, the payload, result and
    progress bytes, the fields in `texts` str, every other field an int
    (see _number)."""
    out: Dict[str, Any] = {}
    for k, v in record.items():
        if v is None:
            out[k] = None
        elif k in _BYTES:
            out[k] = as_bytes(v)
        elif k in texts:
            out[k] = as_text(v)
        else:
            out[k] = _number(v)
    return out


def parse_get(reply: Any) -> Optional[Dict[str, Any]]:
    record = _record(reply)
    return None if record is None else _typed(record, _GET_TEXT)


def parse_config(reply: Any) -> Dict[str, Any]:
    return _counts(reply, _CONFIG_TEXT)


_SCHEDULE_TEXT = {"name", "spec", "tz", "missed", "overlap", "backoff", "group"}


def parse_schedules(reply: Any) -> List[Schedule]:
    out = []
    for item in reply or []:
        values = _typed(_record(item) or {}, _SCHEDULE_TEXT)
        # Fields a later server may add are left out, not an error.
        kwargs: Dict[str, Any] = {f: values.get(f.replace("_", "-")) for f in SCHEDULE_FIELDS}
        out.append(Schedule(**kwargs))
    return out


def _entry(item: Any) -> Entry:
    return Entry(as_text(item[0]) or "", as_bytes(item[1]), int(item[2]), int(item[3]), as_text(item[4]))


def parse_entries(reply: Any) -> List[Entry]:
    return [_entry(item) for item in reply or []]


def parse_scan(reply: Any) -> Tuple[str, List[Entry]]:
    return as_text(reply[0]) or "0", parse_entries(reply[1])


def _group(item: Any) -> Group:
    """[group, waiting, ready, inflight, paused-until]: paused-until nil
    (not paused), -1 (until DQ.RESUME) or Unix ms."""
    until = as_int(item[4])
    return Group(as_text(item[0]) or "", int(item[1]), int(item[2]), int(item[3]), until is not None,
                 None if until is None or until < 0 else until)


def parse_groups(reply: Any) -> Tuple[str, List[Group]]:
    """DQ.GROUPS' reply: (the next cursor, "0" at the end; a page of groups)."""
    return as_text(reply[0]) or "0", [_group(item) for item in reply[1] or []]


def ok(reply: Any) -> None:
    return None


def parse_wait(reply: Any) -> Optional[JobOutcome]:
    """DQ.WAIT's reply: nil (no outcome yet) or [state, value]."""
    if reply is None:
        return None
    if not isinstance(reply, (list, tuple)) or len(reply) != 2:
        raise DqError(f"DQ.WAIT replied {reply!r}, not [state, value]")
    state, value = as_text(reply[0]), reply[1]
    if state == "done":
        return JobOutcome("done", result=None if value is None else as_bytes(value))
    if state == "dead":
        return JobOutcome("dead", error=as_text(value))
    if state == "gone":
        return JobOutcome("gone")
    # A state a newer module adds: an error rather than a wrong answer.
    raise DqError(f"DQ.WAIT replied an outcome {state!r} this client does not know (done, dead, gone)")
