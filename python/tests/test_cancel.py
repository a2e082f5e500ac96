"""dq.asyncio: a blocking call (DQ.POP / DQ.MPOP / DQ.WAIT / DQ.EVENTS with
BLOCK) whose task is cancelled, against a real standalone server and a
cluster. Once the
cancellation reaches the caller the call is over on the server too: no
client of ours is left blocked there, a message added afterwards is not
leased by the call nobody waits for any more, and the pool's connections
answer their own commands."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, Awaitable, Callable, Dict, List

import pytest
import pytest_asyncio
import redis.asyncio
import redis.asyncio.cluster
import redis.exceptions

import dq.asyncio as dqa

from conftest import await_for, cluster_nodes, redis_url

pytestmark = pytest.mark.asyncio


def _client(kind: str, **kwargs: Any) -> Any:
    if kind == "cluster":
        nodes = [redis.asyncio.cluster.ClusterNode(h, p) for h, p in cluster_nodes()]
        return redis.asyncio.cluster.RedisCluster(startup_nodes=nodes, **kwargs)
    return redis.asyncio.Redis.from_url(redis_url(), **kwargs)


@pytest_asyncio.fixture(params=["standalone", "cluster"])
async def named(request: Any) -> Any:
    """An asyncio client whose every connection carries a name of its own,
    so the server's CLIENT LIST tells its connections from the others';
    and a client of the same servers to look with."""
    label = f"dq-cancel-{uuid.uuid4().hex[:8]}"
    client = _client(request.param, client_name=label)
    other = _client(request.param)
    yield client, label, other
    await client.aclose()
    await other.aclose()


async def blocked(r: Any, label: str) -> List[Dict[str, Any]]:
    """The connections named `label` that the servers hold blocked."""
    if hasattr(r, "get_primaries"):
        got = await r.client_list(target_nodes=r.get_primaries())
        # Every node's list, merged (as dicts per node in some redis-py versions).
        listed = [c for clients in got.values() for c in clients] if isinstance(got, dict) else got
    else:
        listed = await r.client_list()
    return [c for c in listed if c.get("name") == label and "b" in c.get("flags", "")]


async def cancel_when_blocked(r: Any, label: str, call: Awaitable[Any]) -> None:
    """Runs `call`, waits until the server holds it blocked, cancels its
    task and waits for the cancellation to reach the caller."""
    task = asyncio.ensure_future(call)

    async def parked() -> bool:
        assert not task.done(), f"the call ended before it blocked: {task.result()!r}"
        return bool(await blocked(r, label))

    await await_for(parked, what="the call to block on the server")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def answers_its_own(client: Any) -> None:
    """Each of the pool's connections reads the reply of its own command."""
    values = [f"echo-{i}".encode() for i in range(8)]
    if hasattr(client, "get_primaries"):
        for node in client.get_primaries():
            got = await asyncio.gather(*[client.execute_command("ECHO", v, target_nodes=node) for v in values])
            assert got == values
    else:
        assert await asyncio.gather(*[client.echo(v) for v in values]) == values


async def test_a_cancelled_blocking_pop_takes_nothing_added_after(named, name):
    # The race: the cancelled POP's connection is closed by then, but the
    # server may read the next ADD before it sees the close, and lease the
    # message to the POP nobody waits for. Rounds, for a race that is lost
    # only now and then.
    client, label, ar = named
    taken = []
    for i in range(100):
        q = dqa.Queue(client, f"{name}-{i}")
        await cancel_when_blocked(ar, label, q.pop(block_ms=60_000, lease_ms=600_000))
        await dqa.Queue(ar, q.name).add("x", id="m")
        stats = await dqa.Queue(ar, q.name).stats()
        if (stats["ready"], stats["inflight"]) != (1, 0):
            taken.append((i, stats["ready"], stats["inflight"]))
    assert taken == [], f"cancelled POPs leased a message added after they were cancelled: {taken}"
    await answers_its_own(client)


Starter = Callable[[dqa.Queue], Awaitable[Any]]


async def _events(q: dqa.Queue) -> None:
    async for _ in q.events("now"):
        pass


CALLS: Dict[str, Starter] = {
    "pop": lambda q: q.pop(block_ms=60_000),
    "pop-timeout-0": lambda q: q.pop(block_ms=0),
    "wait": lambda q: q.wait("later", timeout_ms=60_000),
    "events": _events,
}


@pytest.mark.parametrize("how", sorted(CALLS))
async def test_a_cancelled_blocking_call_is_over_on_the_server(named, name, how):
    client, label, ar = named
    q = dqa.Queue(client, name)
    await q.config_set(events=100)
    await q.add("x", id="later", delay_ms=3_600_000)
    for _ in range(10):
        await cancel_when_blocked(ar, label, CALLS[how](q))
        # At once, not eventually: the server ended the call before the
        # cancellation reached us.
        assert await blocked(ar, label) == []
        await answers_its_own(client)
    assert (await q.stats())["inflight"] == 0


async def test_a_timed_out_wait_for_ends_the_pop_on_the_server(named, name):
    client, label, ar = named
    q = dqa.Queue(client, name)
    for _ in range(5):
        # wait_for's timeout, or, when the event loop stalled past the
        # connection's own read timeout too (a loaded machine), redis-py's
        # TimeoutError for the same read: either way the call is over.
        with pytest.raises((asyncio.TimeoutError, redis.exceptions.TimeoutError)):
            await asyncio.wait_for(q.pop(block_ms=60_000, lease_ms=600_000), 0.2)
        assert await blocked(ar, label) == []
        await dqa.Queue(ar, name).add("x", id="m")
        stats = await q.stats()
        assert (stats["ready"], stats["inflight"]) == (1, 0)
        assert await q.cancel("m") == 1
    await answers_its_own(client)


async def test_a_cancelled_worker_leaves_no_pop_behind(named, name):
    client, label, ar = named
    q = dqa.Queue(client, name)
    worker = dqa.Worker(q, lambda d: None, block_ms=2_000, handle_signals=False)
    await cancel_when_blocked(ar, label, worker.run())
    assert await blocked(ar, label) == []
    await dqa.Queue(ar, name).add("x", id="m")
    stats = await q.stats()
    assert (stats["ready"], stats["inflight"]) == (1, 0)
