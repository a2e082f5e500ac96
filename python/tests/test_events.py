"""The event reader (issue 35) on a standalone server, with dq and
dq.asyncio: every event of an add, pop and ack reaches a following reader,
in order; a reader resumes after a seq it kept (or from now); a trimmed seq
raises EventGap with the oldest seq kept; a blocking read that ends empty
is sent again and is woken by the next event; a log that restarted under
the reader is reported; config_set(events=n) and config()'s `events`; bad
input refused before anything is sent. The sharded queue's are in
test_cluster.py."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Iterator, List, Optional, Tuple

import pytest
import redis
import redis.asyncio

import dq
import dq.asyncio as dqa

from conftest import await_for, now_ms, redis_url, wait_for
from test_outcomes import calls


class Reader:
    """Runs a blocking event reader in a thread, keeping what it gives until
    it has `n` events (then it leaves the loop, which closes the reader) or
    raises."""

    def __init__(self, events: Iterator[dq.Event], n: int) -> None:
        self.got: List[dq.Event] = []
        self.error: Optional[BaseException] = None
        self.thread = threading.Thread(target=self._run, args=(events, n), daemon=True)
        self.thread.start()

    def _run(self, events: Iterator[dq.Event], n: int) -> None:
        try:
            for event in events:
                self.got.append(event)
                if len(self.got) >= n:
                    break
        except BaseException as e:  # the test reads it
            self.error = e

    def join(self, timeout: float = 15.0) -> List[dq.Event]:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"the reader is still running; it has {self.got}"
        return self.got


def blocked_readers(r: Any) -> int:
    return sum(1 for c in r.client_list() if c.get("cmd") == "dq.events" and "b" in c.get("flags", ""))


def kinds(events: List[dq.Event]) -> List[Tuple[str, Optional[str], Optional[int], Optional[bytes]]]:
    return [(e.type, e.id, e.attempt, e.detail) for e in events]


LIFECYCLE = [
    ("added", "a", None, None), ("added", "b", None, None),
    ("delivered", "a", 1, None), ("delivered", "b", 1, None),
    ("progress", "a", 1, b"\xff40%"), ("retry", "b", 1, b"nack"), ("done", "a", 1, None),
]


def lifecycle(q: dq.Queue) -> None:
    """The changes LIFECYCLE reports."""
    q.add("x", id="a")
    q.add("x", id="b")
    a, b = q.pop(count=2, lease_ms="1h")
    q.progress(a, b"\xff40%", lease_ms="1h")
    q.nack(b, delay_ms="1h", error="boom")
    q.ack(a)


def test_every_event_of_add_pop_ack_reaches_a_following_reader_in_order(r, name):
    q = dq.Queue(r, name)
    q.config_set(events=100)
    reader = Reader(q.events(), len(LIFECYCLE))
    # It waits for the first event (nothing is kept yet), on a connection of its own.
    wait_for(lambda: blocked_readers(r) == 1, what="the blocked DQ.EVENTS")
    before = now_ms()
    lifecycle(q)
    got = reader.join()
    assert reader.error is None
    assert kinds(got) == LIFECYCLE
    assert [e.seq for e in got] == list(range(1, len(LIFECYCLE) + 1))
    assert all(e.queue == name and before <= e.at <= now_ms() for e in got)
    assert isinstance(got[0], dq.Event) and got[0] == (1, got[0].at, "added", "a", None, None, name)
    # Queue-wide events have no id; detail is the server's bytes.
    q.purge()
    (purged,) = list(q.events(after=len(LIFECYCLE), follow=False))
    assert (purged.type, purged.id, purged.attempt, purged.detail) == ("purged", None, None, b"1")


def test_a_reader_resumes_after_the_seq_it_kept(r, name):
    q = dq.Queue(r, name)
    q.config_set(events=100)
    lifecycle(q)
    # follow=False reads what is kept and ends at the newest, `count` at a time.
    before = calls(r, "dq.events")
    everything = list(q.events(follow=False, count=3))
    assert kinds(everything) == LIFECYCLE
    assert calls(r, "dq.events") - before == 3  # 3 + 3 + 1
    kept = everything[2].seq
    assert kinds(list(q.events(after=kept, follow=False))) == LIFECYCLE[3:]
    assert list(q.events(after=everything[-1].seq, follow=False)) == []
    # A following reader resumed after the newest seq gets the next event
    # only; so does one started "now".
    resumed = Reader(q.events(after=everything[-1].seq), 1)
    from_now = Reader(q.events(after="now"), 1)
    wait_for(lambda: blocked_readers(r) == 2, what="both readers blocked")
    q.cancel("b")
    for reader in (resumed, from_now):
        assert kinds(reader.join()) == [("cancelled", "b", 1, None)] and reader.got[0].seq == len(LIFECYCLE) + 1
    # A queue that keeps no events: nothing to read, and "now" starts after the newest seq.
    q.config_set(events=0)
    assert list(q.events(follow=False)) == []
    assert list(q.events(after="now", follow=False)) == []


def test_a_trimmed_seq_raises_event_gap_with_the_oldest_kept(r, name):
    q = dq.Queue(r, name)
    q.config_set(events=3)
    for i in range(6):
        q.add("x", id=f"m{i}")
    for follow in (False, True):  # a following reader is told at once too
        with pytest.raises(dq.EventGap) as caught:
            next(iter(q.events(after=1, follow=follow)))
        assert (caught.value.oldest, caught.value.queue) == (4, name)
        assert isinstance(caught.value, dq.DqError) and "GAP the oldest event kept is 4" in str(caught.value)
    # Reading on from just before the oldest kept is the caller's choice.
    assert [e.id for e in q.events(after=caught.value.oldest - 1, follow=False)] == ["m3", "m4", "m5"]
    # Without after, a reader starts at the oldest kept: no gap.
    assert [e.seq for e in q.events(follow=False)] == [4, 5, 6]


def test_a_blocking_read_that_ends_empty_is_sent_again_and_woken_by_the_next_event(name):
    # redis-py gives up a read after socket_timeout: each DQ.EVENTS BLOCK
    # lasts less (0.25 s here), and the reader sends another from the same seq.
    client = redis.Redis.from_url(redis_url(), socket_timeout=0.5)
    try:
        q = dq.Queue(client, name)
        q.config_set(events=10)
        q.add("x", id="first")
        before = calls(client, "dq.events")
        reader = Reader(q.events(after=1), 1)
        wait_for(lambda: calls(client, "dq.events") - before >= 4, what="the reader blocking again and again")
        assert reader.got == [] and reader.error is None
        # The queue's other calls go on meanwhile.
        assert q.stats()["ready"] == 1
        q.add("x", id="second")
        assert kinds(reader.join()) == [("added", "second", None, None)] and reader.got[0].seq == 2
    finally:
        client.close()


def test_a_log_that_restarted_under_the_reader_is_reported(r, name):
    q = dq.Queue(r, name)
    q.config_set(events=10)
    q.add("x", id="a")
    q.add("x", id="b")
    reader = Reader(q.events(after=2), 1)
    wait_for(lambda: blocked_readers(r) == 1, what="the blocked DQ.EVENTS")
    r.delete(name)  # the queue goes: its log with it
    assert reader.join() == []
    assert isinstance(reader.error, dq.EventLogRestarted)
    assert (reader.error.queue, reader.error.after, reader.error.last_seq) == (name, 2, 0)
    # Made again, the queue numbers from 1: a reader past it is told, and
    # reads the new log from its start.
    q.config_set(events=10)
    q.add("x", id="c")
    with pytest.raises(dq.EventLogRestarted, match="deleted and made again"):
        list(q.events(after=2, follow=False))
    assert [(e.seq, e.id) for e in q.events(after=None, follow=False)] == [(1, "c")]


def test_config_events_and_bad_reader_arguments(r, name):
    q = dq.Queue(r, name)
    q.config_set(events=5)
    assert q.config()["events"] == 5
    q.config_set(events="DEFAULT")
    assert q.config()["events"] == 0
    q.config_set(events=100_000_000)
    assert q.config()["events"] == 100_000_000
    before = calls(r, "dq.events"), calls(r, "dq.config")
    for call, error, message in [
        (lambda: q.config_set(events=-1), ValueError, "events must be from 0 to 100000000"),
        (lambda: q.config_set(events=100_000_001), ValueError, "events must be from 0"),
        (lambda: q.config_set(events="lots"), ValueError, "events must be an int or 'DEFAULT'"),
        (lambda: q.config_set(events=2.5), TypeError, "events must be an int"),
        (lambda: q.events(after=-1), ValueError, "after must be from 0"),
        (lambda: q.events(after="soon"), ValueError, "after must be a seq"),
        (lambda: q.events(after=1.5), TypeError, "after must be an int"),
        (lambda: q.events(count=0), ValueError, "count must be from 1 to 10000"),
        (lambda: q.events(count=10_001), ValueError, "count must be from 1 to 10000"),
        (lambda: q.events(follow="yes"), TypeError, "follow must be a bool"),
    ]:
        with pytest.raises(error, match=message):
            call()
    assert (calls(r, "dq.events"), calls(r, "dq.config")) == before
    # A client of one connection would be held up by a following reader; reading what is kept is fine.
    single = redis.Redis.from_url(redis_url(), single_connection_client=True)
    try:
        with pytest.raises(ValueError, match="single_connection_client"):
            dq.Queue(single, name).events()
        assert list(dq.Queue(single, name).events(follow=False)) == []
    finally:
        single.close()


# --- asyncio -------------------------------------------------------------------------------------


async def async_lifecycle(q: dqa.Queue) -> None:
    await q.add("x", id="a")
    await q.add("x", id="b")
    a, b = await q.pop(count=2, lease_ms="1h")
    await q.progress(a, b"\xff40%", lease_ms="1h")
    await q.nack(b, delay_ms="1h", error="boom")
    await q.ack(a)


@pytest.mark.asyncio
async def test_asyncio_reader_follows_resumes_and_raises_gap(r, ar, name):
    q = dqa.Queue(ar, name)
    await q.config_set(events=100)
    got: List[dq.Event] = []

    async def read() -> None:
        async for event in q.events():
            got.append(event)
            if len(got) == len(LIFECYCLE):
                break

    reading = asyncio.ensure_future(read())
    await await_for(lambda: asyncio.to_thread(blocked_readers, r), what="the blocked DQ.EVENTS")
    await async_lifecycle(q)
    await asyncio.wait_for(reading, 15)
    assert kinds(got) == LIFECYCLE and [e.seq for e in got] == list(range(1, len(LIFECYCLE) + 1))
    assert [e.id async for e in q.events(after=got[4].seq, follow=False)] == ["b", "a"]
    # Trimmed to the last 2: a reader after seq 1 is told, with the oldest kept.
    await q.config_set(events=2)
    with pytest.raises(dq.EventGap) as caught:
        async for _ in q.events(after=1):
            pass
    assert (caught.value.oldest, caught.value.queue) == (len(LIFECYCLE) - 1, name)


@pytest.mark.asyncio
async def test_asyncio_reader_blocks_again_until_the_next_event(r, name):
    client = redis.asyncio.Redis.from_url(redis_url(), socket_timeout=0.5)
    try:
        q = dqa.Queue(client, name)
        await q.config_set(events=10)
        before = calls(r, "dq.events")

        async def first() -> dq.Event:
            async for event in q.events(after="now"):
                return event
            raise AssertionError("a following reader ended")

        reading = asyncio.ensure_future(first())
        await await_for(lambda: asyncio.to_thread(lambda: calls(r, "dq.events") - before >= 5),
                        what="the reader blocking again and again")
        assert not reading.done()
        await q.add("x", id="woke")
        event = await asyncio.wait_for(reading, 15)
        assert (event.seq, event.type, event.id) == (1, "added", "woke")
    finally:
        await client.aclose()


@pytest.mark.asyncio
async def test_asyncio_reader_cancelled_ends_its_blocked_read(r, ar, name):
    q = dqa.Queue(ar, name)

    async def read() -> None:
        async for _ in q.events():
            pass

    reading = asyncio.ensure_future(read())
    await await_for(lambda: asyncio.to_thread(blocked_readers, r), what="the blocked DQ.EVENTS")
    reading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reading
    # Its connection is closed, which ends the read on the server well
    # before its BLOCK (5 s: the client has no socket_timeout) runs out.
    await await_for(lambda: asyncio.to_thread(lambda: blocked_readers(r) == 0), timeout=2.5,
                    what="no blocked DQ.EVENTS")


def test_both_flavors_time_their_blocking_reads_under_the_socket_timeout():
    # (Without one, 5 s: a sharded reader's threads see a close within that.)
    blocking = redis.Redis.from_url(redis_url(), socket_timeout=2)
    unbounded = redis.Redis.from_url(redis_url(), socket_timeout=None)
    try:
        sent: List[Any] = []
        for client, block in ((blocking, 1000), (unbounded, 5000)):
            q = dq.Queue(client, "unused")
            stream = dq.Queue.events.stream(q, after=3)  # type: ignore[attr-defined]
            sent.append(next(stream)[0].args)
            assert sent[-1] == ("DQ.EVENTS", b"unused", b"AFTER", 3, b"COUNT", 100, b"BLOCK", block)
    finally:
        blocking.close()
        unbounded.close()
