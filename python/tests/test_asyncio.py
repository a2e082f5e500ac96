"""dq.asyncio against a real standalone server: commands, typed errors, the Worker."""

from __future__ import annotations

import asyncio
import time
from typing import Any, List

import pytest
import redis.asyncio

import dq.asyncio as dqa

from conftest import await_for, redis_url

pytestmark = pytest.mark.asyncio


async def test_add_options_get_pop_ack(ar, name):
    q = dqa.Queue(ar, name)
    assert await q.add(b"\x01bin", id="m1", delay_ms=0, priority=3, max_attempts=4, backoff="exp:1s:1m",
                       group="g", ttl_ms=90_000) == "m1"
    got = await q.get("m1")
    assert (got["payload"], got["priority"], got["max-attempts"], got["backoff"], got["group"]) == (
        b"\x01bin", 3, 4, "exp:1s:1m", "g")
    assert got["expires-at"] - got["added-at"] == 90_000
    assert await q.add("x", id="m1", nx=True) is None
    deliveries = await q.pop(count=2, lease_ms=5000)
    assert [(d.id, d.payload, d.attempt, d.queue) for d in deliveries] == [("m1", b"\x01bin", 1, name)]
    assert await q.touch(deliveries[0]) > int(time.time() * 1000)
    assert await q.ack(deliveries[0]) == 1
    assert (await q.stats())["acked"] == 1
    assert await q.pop(block_ms=50) == []
    assert name in await dqa.queues(ar)


async def test_admin_and_scan(ar, name):
    q = dqa.Queue(ar, name)
    for i in range(12):
        await q.add(f"p{i}", id=f"i{i}")
    assert [e.id for e in await q.peek("ready", count=2)] == ["i0", "i1"]
    assert sorted([e.id async for e in q.scan(count=5)]) == sorted(f"i{i}" for i in range(12))
    with pytest.raises(ValueError, match="state must be one of"):
        q.scan(state="bad")
    assert await q.cancel("i0") == 1
    await q.config_set(max_attempts=2)
    assert (await q.config())["max-attempts"] == 2
    assert await q.purge() == 11


async def test_typed_errors(ar, name):
    q = dqa.Queue(ar, name)
    await q.add("x", id="x")
    (d,) = await q.pop()
    await q.ack(d)
    with pytest.raises(dqa.StaleDelivery):
        await q.nack(d)
    with pytest.raises(dqa.UnknownMessage):
        await q.touch("x")
    await ar.set(name + ":s", "v")
    with pytest.raises(dqa.WrongType):
        await dqa.Queue(ar, name + ":s").stats()
    old = (await ar.config_get("maxmemory"))["maxmemory"]
    try:
        await ar.config_set("maxmemory", 1)
        with pytest.raises(dqa.OutOfMemory, match="^OOM"):
            await q.add("x")
    finally:
        await ar.config_set("maxmemory", old)
    with pytest.raises(TypeError, match="redis.asyncio"):
        dqa.Queue(redis.Redis.from_url(redis_url()), name)
    with pytest.raises(ValueError, match="xx needs an id"):
        await q.add("x", xx=True)


async def run_until(worker: dqa.Worker, cond: Any, what: str, timeout: float = 15.0) -> float:
    """Runs the worker until cond() holds, then stops it; how long stop took."""
    task = asyncio.ensure_future(worker.run())
    try:
        await await_for(cond, timeout=timeout, what=what)
    finally:
        began = time.monotonic()
        worker.stop()
        await asyncio.wait_for(task, 15)
    return time.monotonic() - began


async def test_worker_acks_nacks_permanent(ar, name):
    q = dqa.Queue(ar, name)
    await q.add("ok", id="ok")
    await q.add("fail", id="fail", backoff="fixed:1h")
    await q.add("dead", id="dead")
    await q.add("sync", id="sync")
    outcomes = {}

    async def handler(d: dqa.Delivery) -> None:
        await asyncio.sleep(0)
        if d.id == "fail":
            raise KeyError("no such customer")
        if d.id == "dead":
            raise dqa.Permanent("malformed")

    async def on_settled(d: dqa.Delivery, o: dqa.Outcome) -> None:
        outcomes[d.id] = o

    async def settled() -> bool:
        return len(outcomes) == 4

    # A coroutine handler for three, a plain function (run in a thread) for one.
    def sync_handler(d: dqa.Delivery) -> None:
        time.sleep(0.01)

    w = dqa.Worker(q, handler, concurrency=2, block_ms=200, on_settled=on_settled)
    w2 = dqa.Worker(dqa.Queue(ar, name + "-sync"), sync_handler, block_ms=200)
    await dqa.Queue(ar, name + "-sync").add("s")
    await asyncio.gather(run_until(w, settled, "four settlements"),
                         run_until(w2, lambda: _acked(ar, name + "-sync"), "the sync handler's ack"))
    fail, dead = await q.get("fail"), await q.get("dead")
    assert (fail["state"], fail["last-error"]) == ("delayed", "KeyError: 'no such customer'")
    assert (dead["state"], dead["dead-reason"], dead["last-error"]) == ("dead", "permanent", "malformed")
    assert await q.get("ok") is None
    assert {k: o.action for k, o in outcomes.items()} == {"ok": "ack", "fail": "nack", "dead": "dead", "sync": "ack"}


async def _acked(client: Any, name: str) -> bool:
    return (await dqa.Queue(client, name).stats())["acked"] == 1


async def test_worker_heartbeat(ar, name):
    # The handler takes three leases; the heartbeat, a TOUCH every third of a
    # lease, must keep it one delivery. A machine that stalls the worker for
    # two thirds of a lease loses the lease whatever the heartbeat does: then
    # a fresh queue tries a lease four times longer. A heartbeat that does
    # not work loses every one.
    for lease_ms in (300, 1200, 4800):
        queue = f"{name}-{lease_ms}"
        q = dqa.Queue(ar, queue)
        await q.add("slow", id="slow")
        runs: List[Any] = []

        async def handler(d: dqa.Delivery) -> None:
            await asyncio.sleep(3 * lease_ms / 1000)
            runs.append((d.attempt, d.lost))

        worker = dqa.Worker(q, handler, lease_ms=lease_ms, block_ms=200)
        await run_until(worker, lambda: _acked(ar, queue), "the ack", timeout=60)
        stats = await q.stats()
        if runs == [(1, False)] and (stats["delivered"], stats["lease-expired"], stats["acked"]) == (1, 0, 1):
            return
    raise AssertionError(f"with a lease of {lease_ms} ms: runs {runs}, stats {stats}")


async def test_worker_graceful_stop(ar, name):
    q = dqa.Queue(ar, name)
    for i in range(30):
        await q.add(f"p{i}")
    finished: List[str] = []

    async def handler(d: dqa.Delivery) -> None:
        await asyncio.sleep(0.3)
        finished.append(d.id)

    at_stop: List[int] = []

    async def four_running() -> bool:
        running = (await q.stats())["inflight"] >= 4
        # Read with no await before the stop that follows a True.
        at_stop[:] = [len(finished)]
        return running

    await run_until(dqa.Worker(q, handler, concurrency=4, block_ms=500), four_running, "four handlers")
    stats = await q.stats()
    assert stats["inflight"] == 0
    assert stats["acked"] == len(finished) >= 4
    assert stats["acked"] + stats["ready"] == 30
    # After stop() only what was taken already is handled: at most one
    # handler per permit, and one message a blocked POP may bring.
    assert len(finished) <= at_stop[0] + 4 + 1, (at_stop, len(finished))


async def test_worker_arguments(ar, name):
    q = dqa.Queue(ar, name)
    with pytest.raises(ValueError, match="lease_ms must be from 3"):
        dqa.Worker(q, print, lease_ms=1)
    with pytest.raises(TypeError, match="a worker takes Queue or ShardedQueue"):
        dqa.Worker(object(), print)
    w = dqa.Worker(q, print)
    w.stop()
    await w.run()
    with pytest.raises(RuntimeError, match="already run"):
        await w.run()


async def test_stop_from_another_thread(ar, name):
    import threading

    q = dqa.Queue(ar, name)
    await q.add("x")
    w = dqa.Worker(q, lambda d: None, block_ms=200)
    task = asyncio.ensure_future(w.run())
    await await_for(lambda: _acked(ar, name), what="the ack")
    threading.Thread(target=w.stop).start()
    await asyncio.wait_for(task, 5)
    assert w.stopping and (await q.stats())["inflight"] == 0


async def test_worker_takes_queues_in_order_with_one_mpop(ar, name):
    a, b = dqa.Queue(ar, name + "a"), dqa.Queue(ar, name + "b")
    for i in range(10):
        await b.add("y", id=f"b{i}")
        await a.add("x", id=f"a{i}")
    seen: List[str] = []

    async def handler(d: dqa.Delivery) -> None:
        seen.append(d.queue)

    w = dqa.Worker([a, b], handler, concurrency=1, block_ms=200)
    assert w.pollers == [[a.name, b.name]]

    async def all_acked() -> bool:
        return (await a.stats())["acked"] + (await b.stats())["acked"] == 20

    await run_until(w, all_acked, "20 acks")
    assert seen == [a.name] * 10 + [b.name] * 10
    other = redis.asyncio.Redis.from_url(redis_url())
    try:
        # Queues of two clients: a poller each.
        assert dqa.Worker([a, dqa.Queue(other, name + "c")], handler).pollers == [[a.name], [name + "c"]]
    finally:
        await other.aclose()


@pytest.mark.parametrize("how", ["cancel", "purge"])
async def test_a_cancelled_message_cancels_its_handler_task(ar, name, how):
    q = dqa.Queue(ar, name)
    await q.add("long job", id="job")
    seen: List[Any] = []
    outcomes: List[dqa.Outcome] = []

    async def handler(d: dqa.Delivery) -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            seen.append((d.cancelled.is_set(), d.lost, d.lost_reason))
            raise

    async def started() -> bool:
        return (await q.stats())["inflight"] == 1

    async def settled() -> bool:
        return bool(outcomes)

    # A lease of 3 s: the heartbeat's TOUCH comes within a second.
    w = dqa.Worker(q, handler, lease_ms=3000, block_ms=200, on_settled=lambda d, o: outcomes.append(o))
    task = asyncio.ensure_future(w.run())
    try:
        await await_for(started, what="the handler to start")
        if how == "cancel":
            assert await q.cancel("job") == 1
        else:
            assert await q.purge() == 1
        await await_for(settled, timeout=60, what="the settlement")
    finally:
        w.stop()
        await asyncio.wait_for(task, 15)
    assert seen == [(True, True, "cancelled")]
    assert (outcomes[0].action, outcomes[0].state) == ("nack", "cancelled")
    assert isinstance(outcomes[0].exception, asyncio.CancelledError)
    stats = await q.stats()
    assert (stats["acked"], stats["nacked"], stats["inflight"]) == (0, 0, 0)


async def test_a_lost_lease_cancels_the_handler_task(ar, name):
    q = dqa.Queue(ar, name)
    await q.add("x", id="x", backoff="fixed:1h")
    seen: List[Any] = []
    outcomes: List[dqa.Outcome] = []

    async def handler(d: dqa.Delivery) -> None:
        if d.attempt > 1:
            return  # the next delivery, after the lost lease, is acknowledged
        # Another consumer takes the message meanwhile: the lease is cut short.
        try:
            await q.touch(d, lease_ms=1)
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            seen.append((d.lost, d.lost_reason))
            raise

    async def settled() -> bool:
        return bool(outcomes)

    await run_until(dqa.Worker(q, handler, lease_ms=3000, block_ms=200, on_settled=lambda d, o: outcomes.append(o)),
                    settled, "the settlement", timeout=60)
    assert seen == [(True, "lost")]
    assert (outcomes[0].action, outcomes[0].state) == ("nack", "stale")
    assert (await q.stats())["nacked"] == 0 and (await q.stats())["lease-expired"] >= 1
