"""The event reader (DQ.EVENTS), written once for both flavors: the
arguments checked, the reply read into Events, and the loop that follows a
queue's log — resuming after the seq the caller kept, blocking again each
time a blocking read ends empty, raising EventGap and EventLogRestarted
rather than skipping. A ShardedQueue merges one such reader per shard
(sharded.py, with a plans.Merge step)."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

from .args import int_arg
from .clients import longest_block_ms, single_connection
from .errors import EventGap, EventLogRestarted
from .plans import Call, Items, Stream, one
from .records import Event
from .replies import as_bytes, as_int, as_text

# Where a reader starts: None (the oldest event kept), a seq (the events
# after it), or "now" (the events written from now on).
After = Union[int, str, None]

MAX_SEQ = 2**63 - 1  # AFTER's bound on the server
MAX_COUNT = 10_000
MAX_EVENTS = 100_000_000  # DQ.CONFIG SET EVENTS' bound
# How long one blocking read lasts when the client's reads never time out
# (else just under its socket_timeout, as queue.wait()): a ShardedQueue's
# blocking reader runs a thread per shard, which sees that its reader was
# closed only when its read ends.
UNBOUNDED_CLIENT_BLOCK_MS = 5_000


def after_arg(what: str, after: Any) -> After:
    if after is None or after == "now":
        return after  # type: ignore[no-any-return]
    if isinstance(after, str):
        raise ValueError(f"{what} must be a seq (an int from 0), None (the oldest kept) or 'now'; got {after!r}")
    return int_arg(what, after, 0, MAX_SEQ)


def reader_args(client: Any, count: Any, follow: Any) -> Tuple[int, Optional[int]]:
    """COUNT, and each blocking read's BLOCK (None: the reader does not
    follow the log, it stops at the newest event)."""
    int_arg("count", count, 1, MAX_COUNT)
    if not isinstance(follow, bool):
        raise TypeError(f"follow must be a bool, got {type(follow).__name__}")
    if not follow:
        return count, None
    if single_connection(client):
        raise ValueError("events(follow=True) blocks a connection of its own: give the queue a client with a "
                         "connection pool, not single_connection_client=True (or read what is kept: follow=False)")
    return count, longest_block_ms(client) or UNBOUNDED_CLIENT_BLOCK_MS


def parse_events(queue: str) -> Callable[[Any], Optional[Tuple[int, List[Event]]]]:
    """DQ.EVENTS' reply: nil (a blocking read's time ran out) or (last-seq, events)."""

    def parse(reply: Any) -> Optional[Tuple[int, List[Event]]]:
        if reply is None:
            return None
        last, items = reply
        return int(last), [
            Event(int(e[0]), int(e[1]), as_text(e[2]) or "", as_text(e[3]), as_int(e[4]),
                  None if e[5] is None else as_bytes(e[5]), queue)
            for e in items or []
        ]

    return parse


def read_events(key: bytes, queue: str, after: After, count: int, block: Optional[int]) -> Stream[Event]:
    """One queue's events after `after`, page by page (DQ.EVENTS ... COUNT);
    with `block`, for ever: each read waits up to `block` ms for the next
    event, and one that ends empty is sent again from the same seq, so
    nothing is missed between them. Without it, ends once the newest event
    (as of the last read) was given."""
    parse = parse_events(queue)
    if after == "now":
        # The newest seq now: the reader gives what is written after it.
        first = yield from one(Call(("DQ.EVENTS", key, b"COUNT", 1), parse))
        after = first[0] if first else 0
    position: Optional[int] = after  # type: ignore[assignment]
    while True:
        args: List[Any] = ["DQ.EVENTS", key]
        if position is not None:
            args += [b"AFTER", position]
        args += [b"COUNT", count]
        if block is not None:
            args += [b"BLOCK", block]
        try:
            reply = yield from one(Call(tuple(args), parse, blocking=block is not None))
        except EventGap as gap:
            gap.queue = queue
            raise
        if reply is None:
            continue  # the blocking read's time ran out: wait again
        last, events = reply
        if position is not None and last < position:
            raise EventLogRestarted(queue, position, last)
        if events:
            yield Items(events)
            position = events[-1].seq
        elif position is None:
            # Nothing kept (EVENTS 0, or a queue that never wrote one): the
            # next event is the first after the newest seq.
            position = last
        if block is None and position >= last:
            return


def sharded_after(after: Any, names: List[str]) -> Dict[str, After]:
    """A ShardedQueue reader's start per shard: None and "now" for every
    shard, or a mapping of shard name to seq (a shard left out starts at
    its oldest event kept)."""
    if after is None or after == "now":
        return {name: after for name in names}
    if not isinstance(after, Mapping):
        raise TypeError(
            "a ShardedQueue's events(after=...) is a mapping of shard name to seq (each shard's log has its own "
            f"seqs), None or 'now'; got {type(after).__name__}")
    unknown = [k for k in after if k not in names]
    if unknown:
        raise ValueError(f"after names {unknown[0]!r}, which is not a shard of this queue (shard_names)")
    return {name: after_arg(f"after[{name!r}]", after.get(name)) for name in names}
