"""Job outcomes (issue 34) on a standalone server, with dq and dq.asyncio:
a handler's result kept by DQ.DONE and given back by queue.wait(); waits
that time out, and on dead and gone messages; progress; the message's own
retention; the done state in peek, scan, purge, stats and config; one
DQ.DONE per queue per batch; bad input refused before anything is sent.
The sharded queue's are in test_cluster.py."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

import pytest
import redis
import redis.asyncio

import dq
import dq.asyncio as dqa

from conftest import await_for, now_ms, redis_url, wait_for
from test_asyncio import run_until
from test_worker import Running

HOUR_MS = 3_600_000


def calls(r: Any, command: str) -> int:
    """How many times the server ran `command` (INFO commandstats)."""
    return int(r.info("commandstats").get(f"cmdstat_{command.lower()}", {}).get("calls", 0))


class Recorder:
    """A blocking client that sends through `client` and records each command."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.sent: List[Tuple[Any, ...]] = []

    def execute_command(self, *args: Any, **options: Any) -> Any:
        self.sent.append(args)
        return self.client.execute_command(*args, **options)


# --- a handler's result, given back by wait ---------------------------------------------------


def test_a_handler_s_result_comes_back_by_wait(r, name):
    q = dq.Queue(r, name)
    q.config_set(retain_ms="1h")
    # Due in a moment: wait() below blocks until the worker has finished them.
    q.add("p", id="text", delay_ms=300)
    q.add("p", id="bytes", delay_ms=300)
    q.add("p", id="empty", delay_ms=300)
    q.add("p", id="plain", delay_ms=300)
    returns = {"text": "refund sent: 12,50 €", "bytes": b"\x00\xff", "empty": b"", "plain": None}
    settled: Dict[str, dq.Outcome] = {}

    running = Running(dq.Worker(q, lambda d: returns[d.id], concurrency=4, block_ms=200,
                                on_settled=lambda d, o: settled.__setitem__(d.id, o)))
    try:
        outcomes = {i: q.wait(i, "10s") for i in returns}
    finally:
        running.stop()
    assert outcomes == {
        "text": dq.JobOutcome("done", result="refund sent: 12,50 €".encode()),
        "bytes": dq.JobOutcome("done", result=b"\x00\xff"),
        "empty": dq.JobOutcome("done", result=b""),  # an empty result is one
        "plain": dq.JobOutcome("done", result=None),  # returning None: a plain ACK, no result
    }
    assert {i: (o.action, o.state) for i, o in settled.items()} == {
        "text": ("done", "acked"), "bytes": ("done", "acked"), "empty": ("done", "acked"), "plain": ("ack", "acked")}
    got = q.get("text")
    assert (got["state"], got["result"], got["progress"]) == ("done", "refund sent: 12,50 €".encode(), None)
    assert got["retained-until"] - got["finished-at"] == HOUR_MS
    assert q.get("plain")["result"] is None
    stats = q.stats()
    assert (stats["done"], stats["acked"], stats["inflight"]) == (4, 4, 0)


def test_without_a_retention_a_result_is_not_kept(r, name):
    # A queue without RETAIN behaves as before: DONE deletes as ACK does.
    q = dq.Queue(r, name)
    q.add("p", id="a")
    running = Running(dq.Worker(q, lambda d: "kept nowhere", block_ms=200))
    try:
        wait_for(lambda: q.stats()["acked"] == 1, what="the DONE")
    finally:
        running.stop()
    assert q.get("a") is None
    assert q.wait("a") == dq.JobOutcome("gone")
    assert q.stats()["done"] == 0


def test_a_return_value_that_is_no_result_makes_the_message_dead(r, name):
    q = dq.Queue(r, name)
    q.config_set(retain_ms="1h")
    q.add("p", id="a")
    settled: List[dq.Outcome] = []
    running = Running(dq.Worker(q, lambda d: {"charged": True}, block_ms=200,
                                on_settled=lambda d, o: settled.append(o)))
    try:
        outcome = q.wait("a", "10s")
    finally:
        running.stop()
    assert outcome is not None and outcome.state == "dead"
    assert "returned dict, which is no result" in (outcome.error or "")
    assert (settled[0].action, settled[0].state) == ("dead", "dead")
    assert q.get("a")["dead-reason"] == "permanent"


# --- wait: timeouts, dead, gone, its connection ---------------------------------------------------


def test_wait_times_out_with_none(r, name):
    q = dq.Queue(r, name)
    q.add("p", id="later", delay_ms="1h")
    assert q.wait("later") is None  # look once
    assert q.wait("later", 0) is None
    began = time.monotonic()
    assert q.wait("later", 300) is None
    assert time.monotonic() - began >= 0.3
    assert q.wait("never added", "5s") == dq.JobOutcome("gone")  # at once: nothing to wait for


def test_wait_on_dead_and_gone(r, name):
    q = dq.Queue(r, name)
    q.config_set(retain_ms="1h")
    # Dead by a worker's Permanent: the last error comes back.
    q.add("p", id="410", max_attempts=5)

    def refuse(d: dq.Delivery) -> None:
        raise dq.Permanent("HTTP 410 Gone")

    running = Running(dq.Worker(q, refuse, block_ms=200))
    try:
        assert q.wait("410", "10s") == dq.JobOutcome("dead", error="HTTP 410 Gone")
    finally:
        running.stop()
    # Dead without an error.
    q.add("p", id="quiet")
    (d,) = q.pop()
    q.nack(d, dead=True)
    assert q.wait("quiet", "1s") == dq.JobOutcome("dead", error=None)
    # Gone while waited for: a CANCEL answers the waiter.
    q.add("p", id="cancelled", delay_ms="1h")
    got: List[Optional[dq.JobOutcome]] = []
    waiter = threading.Thread(target=lambda: got.append(q.wait("cancelled", "30s")))
    waiter.start()
    wait_for(lambda: any(c.get("cmd") == "dq.wait" for c in r.client_list()), what="the blocked DQ.WAIT")
    assert q.cancel("cancelled") == 1
    waiter.join(10)
    assert got == [dq.JobOutcome("gone")]


def test_wait_longer_than_the_socket_timeout(name):
    # redis-py gives up a read after socket_timeout (5 s by default): a
    # longer wait goes as several shorter DQ.WAITs, none outlasting it.
    client = redis.Redis.from_url(redis_url(), socket_timeout=0.5)
    try:
        q = dq.Queue(client, name)
        q.config_set(retain_ms="1h")
        q.add("p", id="a", delay_ms="1h")
        before = calls(client, "dq.wait")
        began = time.monotonic()
        assert q.wait("a", 1200) is None
        assert time.monotonic() - began >= 1.2
        assert calls(client, "dq.wait") - before >= 3  # 1.2 s in parts of at most 0.25 s
        # The outcome that comes during a later part is given back.
        q.add("p", id="b", delay_ms=800)
        running = Running(dq.Worker(q, lambda d: "late", block_ms=200))
        try:
            assert q.wait("b", "20s") == dq.JobOutcome("done", result=b"late")
        finally:
            running.stop()
    finally:
        client.close()


def test_wait_blocks_a_connection_of_its_own(r, name):
    q = dq.Queue(r, name)
    q.add("p", id="a", delay_ms="1h")
    got: List[Optional[dq.JobOutcome]] = []
    waiter = threading.Thread(target=lambda: got.append(q.wait("a", "60s")))
    waiter.start()
    wait_for(lambda: any(c.get("cmd") == "dq.wait" for c in r.client_list()), what="the blocked DQ.WAIT")
    # The queue's other calls go on meanwhile.
    began = time.monotonic()
    assert q.stats()["delayed"] == 1 and q.get("a")["state"] == "delayed"
    assert time.monotonic() - began < 5
    q.cancel("a")
    waiter.join(10)
    assert got == [dq.JobOutcome("gone")]
    # A client of one connection would be held up: a blocking wait is refused, a look is not.
    single = redis.Redis.from_url(redis_url(), single_connection_client=True)
    try:
        with pytest.raises(ValueError, match="single_connection_client"):
            dq.Queue(single, name).wait("a", 100)
        assert dq.Queue(single, name).wait("a") == dq.JobOutcome("gone")
    finally:
        single.close()


# --- progress ------------------------------------------------------------------------------------


def test_progress_is_fenced_and_shown_by_get(r, name):
    q = dq.Queue(r, name)
    q.add("p", id="a")
    (first,) = q.pop(lease_ms=60_000)
    deadline = q.progress(first, "étape 1/2", lease_ms=60_000)
    assert deadline >= now_ms() + 50_000
    assert q.get("a")["progress"] == "étape 1/2".encode()
    with pytest.raises(RuntimeError, match="was not handed out by a Worker"):
        first.progress("x")  # a popped delivery: queue.progress is the call
    q.nack(first, delay_ms=0)
    (second,) = q.pop()
    assert second.attempt == 2
    assert q.get("a")["progress"] is None  # a new delivery starts without
    with pytest.raises(dq.StaleDelivery):
        q.progress(first, "from the past")  # fenced by its attempt
    assert q.get("a")["progress"] is None
    q.progress(second, b"\x00 half")
    assert q.get("a")["progress"] == b"\x00 half"
    with pytest.raises(dq.UnknownMessage):
        q.progress("not in flight", "x")


def test_a_worker_s_handler_reports_progress_with_the_worker_s_lease(r, name):
    # The queue's lease is 30 s, the worker's a minute: a report renews by the
    # worker's (a TOUCH without LEASE would cut it to 30 s).
    q = dq.Queue(r, name)
    q.config_set(retain_ms="1h")
    q.add("p", id="a")
    reported = threading.Event()
    go_on = threading.Event()
    deadlines: List[int] = []

    def handle(d: dq.Delivery) -> str:
        deadlines.append(d.progress("1/2"))
        reported.set()
        go_on.wait(10)
        return "2/2 done"

    running = Running(dq.Worker(q, handle, lease_ms=60_000, block_ms=200))
    try:
        assert reported.wait(10)
        got = q.get("a")
        assert (got["state"], got["progress"]) == ("inflight", b"1/2")
        assert got["lease-deadline"] == deadlines[0] >= now_ms() + 50_000
        go_on.set()
        assert q.wait("a", "10s") == dq.JobOutcome("done", result=b"2/2 done")
    finally:
        go_on.set()
        running.stop()
    assert q.get("a")["progress"] == b"1/2"  # a done message keeps the last


# --- retention, the done state ---------------------------------------------------------------------


def test_retain_on_add(r, name):
    q = dq.Queue(r, name)  # no retention of its own
    q.add("p", id="kept", retain_ms="1h")
    q.add("p", id="not kept")
    (d1,) = q.pop()
    (d2,) = q.pop()
    assert q.done((d1, "r1"), (d2, "r2")) == 2
    got = q.get("kept")
    assert (got["state"], got["result"]) == ("done", b"r1")
    assert got["retained-until"] - got["finished-at"] == HOUR_MS
    assert q.get("not kept") is None
    # An id held as done refuses an NX add: an idempotency key for an hour.
    assert q.add("again", id="kept", nx=True) is None
    # The message's own 0 wins over the queue's retention.
    q.config_set(retain_ms="1h")
    q.add("p", id="zero", retain_ms=0)
    (d3,) = q.pop()
    assert q.ack(d3) == 1
    assert q.get("zero") is None


def test_the_done_state(r, name):
    q = dq.Queue(r, name)
    q.config_set(retain_ms="1h", retain_max=10)
    config = q.config()
    assert (config["retain-ms"], config["retain-ms-from"], config["retain-max"]) == (HOUR_MS, "queue", 10)
    for i in range(3):
        q.add(f"p{i}", id=f"m{i}")
    for i in range(3):
        (d,) = q.pop()
        q.done((d, "42" if i == 0 else f"r{i}"))
    assert q.get("m0")["result"] == b"42"  # bytes the application chose, not a number
    peeked = q.peek("done")
    assert [e.id for e in peeked] == ["m0", "m1", "m2"]  # earliest finished first
    assert [e.time for e in peeked] == sorted(e.time for e in peeked)
    assert sorted(e.id for e in q.scan(state="done")) == ["m0", "m1", "m2"]
    assert q.stats()["done"] == 3
    q.config_set(retain_max=2)  # lowering the cap drops the earliest at once
    stats = q.stats()
    assert (stats["done"], stats["dropped"]) == (2, 1)
    assert q.get("m0") is None
    assert q.purge("done") == 2
    q.config_set(retain_ms="DEFAULT", retain_max="DEFAULT")
    config = q.config()
    assert (config["retain-ms-from"], config["retain-max"]) == ("module", None)


# --- batches ---------------------------------------------------------------------------------------


def test_a_batch_sends_one_done_and_one_ack_per_queue(r, name):
    # Every command on this queue, as MONITOR shows it: the handlers that
    # finished together send their results in one DQ.DONE and their plain
    # ends in one DQ.ACK, not one command each.
    q = dq.Queue(r, name)
    q.config_set(retain_ms="1h")
    p = r.pipeline(transaction=False)
    for i in range(300):
        p.execute_command("DQ.ADD", name, "x", "ID", f"m{i}")
    p.execute()
    seen: List[List[str]] = []
    watching = threading.Event()

    def monitor() -> None:
        with r.monitor() as m:
            watching.set()
            for event in m.listen():
                args = event["command"].split(" ")
                if len(args) > 1 and args[1].strip('"') == name:
                    seen.append([a.strip('"') for a in args])
                if args[0].upper().strip('"') == "DQ.STATS" and len(seen) > 1:
                    return

    t = threading.Thread(target=monitor, daemon=True)
    t.start()
    assert watching.wait(10)
    settled: List[dq.Outcome] = []
    running = Running(dq.Worker(q, lambda d: f"r-{d.id}" if int(d.id[1:]) % 2 else None, concurrency=20,
                                block_ms=200, on_settled=lambda d, o: settled.append(o)))
    wait_for(lambda: len(settled) == 300, what="300 settlements")
    running.stop()
    assert q.stats()["acked"] == 300
    t.join(10)
    dones = [a for a in seen if a[0].upper() == "DQ.DONE"]
    acks = [a for a in seen if a[0].upper() == "DQ.ACK"]
    assert sum((len(a) - 2) // 2 for a in dones) == 150 and all(len(a) % 2 == 0 for a in dones)
    assert sum(len(a) - 2 for a in acks) == 150
    assert len(dones) < 150, f"{len(dones)} DQ.DONEs for 150 results"
    assert len(acks) < 150, f"{len(acks)} DQ.ACKs for 150 plain ends"
    for done in dones:  # each id with its own result
        assert all(done[i + 1] == f"r-{done[i]}" for i in range(2, len(done), 2)), done
    assert q.get("m1")["result"] == b"r-m1" and q.get("m2")["result"] is None
    assert {(o.action, o.state) for o in settled} == {("done", "acked"), ("ack", "acked")}


# --- bad input -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda q: q.done(), ValueError, "done needs at least one"),
        (lambda q: q.done("a", "r"), TypeError, "must be an \\(id, result\\) pair"),
        (lambda q: q.done(("a", "r", "x")), TypeError, "must be an \\(id, result\\) pair"),
        (lambda q: q.done(("", "r")), ValueError, "id must not be empty"),
        (lambda q: q.done(("a", 5)), TypeError, "result must be str or bytes"),
        (lambda q: q.done(("a", "r"), ("b", None)), TypeError, "result must be str or bytes"),
        (lambda q: q.wait(""), ValueError, "id must not be empty"),
        (lambda q: q.wait("a", -1), ValueError, "timeout_ms must be from 0"),
        (lambda q: q.wait("a", "1.5s"), ValueError, "timeout_ms must be a duration"),
        (lambda q: q.wait("a", 1.5), TypeError, "timeout_ms must be a duration"),
        (lambda q: q.progress("a", "p" * 65537), ValueError, "progress is longer than 65536 bytes"),
        (lambda q: q.progress("a", 40), TypeError, "progress must be str or bytes"),
        (lambda q: q.progress("a", "x", attempt=0), ValueError, "attempt must be from 1"),
        (lambda q: q.add("x", retain_ms=-1), ValueError, "retain_ms must be from 0"),
        (lambda q: q.add("x", retain_ms="1.5h"), ValueError, "retain_ms must be a duration"),
        (lambda q: q.config_set(retain_ms="soon"), ValueError, "retain_ms must be a duration"),
        (lambda q: q.config_set(retain_max=-1), ValueError, "retain_max must be from 0"),
        (lambda q: q.config_set(retain_max="ten"), ValueError, "retain_max must be an int or 'DEFAULT'"),
        (lambda q: q.peek("finished"), ValueError, "dead, done; got 'finished'"),
    ],
)
def test_bad_outcome_arguments_are_refused_before_sending(r, name, call, error, message):
    client = Recorder(r)
    with pytest.raises(error, match=message):
        call(dq.Queue(client, name))
    assert client.sent == []


def test_a_sharded_queue_splits_retain_max_and_refuses_what_it_cannot_split(r, name):
    s = dq.ShardedQueue(Recorder(r), name, shards=4)
    with pytest.raises(ValueError, match="retain_max 3 cannot be split over 4 shards"):
        s.config_set(retain_max=3)
    assert s.client.sent == []
    s.config_set(retain_max=10, retain_ms="1h")
    assert {c[3:] for c in s.client.sent} == {(b"RETAIN", HOUR_MS, b"RETAINMAX", b"2")}
    config = s.config()
    assert (config["retain-max"], config["retain-ms"]) == (8, HOUR_MS)  # the whole queue's: 2 on each of 4


# --- dq.asyncio ------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_asyncio_results_progress_and_wait(ar, name):
    q = dqa.Queue(ar, name)
    await q.config_set(retain_ms="1h")
    await q.add("p", id="coro", delay_ms=200)
    await q.add("p", id="plain", delay_ms=200)
    seen: Dict[str, Any] = {}

    async def handle(d: dqa.Delivery) -> Optional[str]:
        if d.id == "plain":
            return None
        seen[d.id] = await d.progress("half way")
        seen[d.id + " record"] = await q.get(d.id)
        return f"{d.id}: done"

    def thread_handle(d: dqa.Delivery) -> bytes:
        # A plain function runs in a thread: progress() sends on the worker's loop and waits.
        seen[d.id] = d.progress(b"from a thread")
        return b"thread: done"

    settled: Dict[str, dqa.Outcome] = {}
    coro_worker = dqa.Worker(q, handle, concurrency=2, lease_ms=60_000, block_ms=200,
                             on_settled=lambda d, o: settled.__setitem__(d.id, o))
    other = dqa.Queue(ar, name + "-t")
    await other.config_set(retain_ms="1h")
    await other.add("p", id="thread")
    thread_worker = dqa.Worker(other, thread_handle, lease_ms=60_000, block_ms=200)

    async def waited() -> List[Optional[dqa.JobOutcome]]:
        return list(await asyncio.gather(q.wait("coro", "10s"), q.wait("plain", "10s"),
                                         other.wait("thread", "10s")))

    results: List[Any] = []

    async def all_waited() -> bool:
        return bool(results)

    async def wait_then_keep() -> None:
        results.append(await waited())

    waiting = asyncio.ensure_future(wait_then_keep())
    await asyncio.gather(run_until(coro_worker, all_waited, "the waits"),
                         run_until(thread_worker, all_waited, "the waits"))
    await waiting
    assert results[0] == [dqa.JobOutcome("done", result=b"coro: done"), dqa.JobOutcome("done", result=None),
                          dqa.JobOutcome("done", result=b"thread: done")]
    assert seen["coro"] >= now_ms() + 50_000 and seen["thread"] >= now_ms() + 50_000  # the worker's lease
    assert (seen["coro record"]["state"], seen["coro record"]["progress"]) == ("inflight", b"half way")
    assert (await other.get("thread"))["progress"] == b"from a thread"
    assert {i: o.action for i, o in settled.items()} == {"coro": "done", "plain": "ack"}


@pytest.mark.asyncio
async def test_asyncio_wait_timeout_dead_gone_and_other_calls_meanwhile(ar, name):
    q = dqa.Queue(ar, name)
    await q.config_set(retain_ms="1h")
    await q.add("p", id="later", delay_ms="1h")
    assert await q.wait("later") is None
    began = time.monotonic()
    assert await q.wait("later", 250) is None
    assert time.monotonic() - began >= 0.25
    # While a wait blocks, the client's other calls go on.
    waiting = asyncio.ensure_future(q.wait("later", "60s"))
    await await_for(lambda: _blocked_wait(ar), what="the blocked DQ.WAIT")
    assert (await q.stats())["delayed"] == 1
    assert await q.cancel("later") == 1
    assert await asyncio.wait_for(waiting, 10) == dqa.JobOutcome("gone")
    await q.add("p", id="dead")
    (d,) = await q.pop()
    await q.nack(d, dead=True, error="HTTP 410")
    assert await q.wait("dead", "1s") == dqa.JobOutcome("dead", error="HTTP 410")
    await q.add("p", id="done")
    (d,) = await q.pop()
    assert await q.done((d, "ok")) == 1
    assert await q.wait("done", 100) == dqa.JobOutcome("done", result=b"ok")
    with pytest.raises(ValueError, match="id must not be empty"):
        await q.wait("", 100)


async def _blocked_wait(client: Any) -> bool:
    return any(c.get("cmd") == "dq.wait" for c in await client.client_list())


@pytest.mark.asyncio
async def test_asyncio_batches_send_one_done_per_queue(r, ar, name):
    q = dqa.Queue(ar, name)
    await q.config_set(retain_ms="1h")
    p = r.pipeline(transaction=False)
    for i in range(200):
        p.execute_command("DQ.ADD", name, "x", "ID", f"m{i}")
    p.execute()
    dones, acks = calls(r, "dq.done"), calls(r, "dq.ack")
    settled: List[dqa.Outcome] = []

    async def handle(d: dqa.Delivery) -> Optional[str]:
        await asyncio.sleep(0)
        return f"r-{d.id}" if int(d.id[1:]) % 2 else None

    async def all_settled() -> bool:
        return len(settled) == 200

    await run_until(dqa.Worker(q, handle, concurrency=20, block_ms=200, on_settled=lambda d, o: settled.append(o)),
                    all_settled, "200 settlements")
    stats = await q.stats()
    assert (stats["acked"], stats["done"]) == (200, 200)
    assert calls(r, "dq.done") - dones < 100, "a DQ.DONE per result"
    assert calls(r, "dq.ack") - acks < 100, "a DQ.ACK per plain end"
    assert (await q.get("m7"))["result"] == b"r-m7" and (await q.get("m8"))["result"] is None
    assert {o.action for o in settled} == {"done", "ack"} and {o.state for o in settled} == {"acked"}
