"""dq.Worker (threads) and dq.asyncio.Worker across a lost connection and a
server restart, each on a server of the test's own (own_server), since the
test kills its clients or the server itself.

Each test runs a stream of jobs in three waves and checks at-least-once:
every job added is handled, the queue drains to empty, a job whose ACK was
confirmed ('acked') is never handled again, and stop() returns. Mid-run:

- the connections test kills every connection of the worker (CLIENT KILL
  TYPE normal) and the worker must reconnect by itself;
- the restart test kills the server (SIGKILL, AOF with appendfsync always)
  and starts it again on the same port.

Then the ACK of one job, "mark", is made to fail for certain: its handler
waits, before it returns, until the test has cut the worker off — every
connection killed and no new one let in (maxclients 1: only the test's own
connection), or the server killed — and the test lets the worker back only
once it has reported mark 'unsettled'. Mark then comes back after its
lease and is handled again."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, List, Set, Tuple

import pytest
import redis
import redis.asyncio
import redis.exceptions

import dq
import dq.asyncio as dqa

from conftest import await_for, wait_for

WAVE = 40  # jobs per wave
LEASE_MS = 2000  # short, so that mark comes back soon after its ACK failed
DRAINED = ("ready", "delayed", "inflight", "dead")


class Journal:
    """What the handlers saw and what on_settled was told, in one order, from
    any thread or task."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: List[Tuple[str, str, Any]] = []  # ("handled", id, attempt) | ("settled", id, Outcome)

    def handled(self, d: dq.Delivery) -> None:
        with self.lock:
            self.events.append(("handled", d.id, d.attempt))

    def settled(self, d: dq.Delivery, o: dq.Outcome) -> None:
        with self.lock:
            self.events.append(("settled", d.id, o))

    def _of(self, kind: str) -> List[Tuple[str, Any]]:
        with self.lock:
            return [(i, x) for k, i, x in self.events if k == kind]

    def handled_ids(self) -> Set[str]:
        return {i for i, _ in self._of("handled")}

    def attempts(self, id: str) -> List[int]:
        return [a for i, a in self._of("handled") if i == id]

    def outcomes(self, id: str) -> List[dq.Outcome]:
        return [o for i, o in self._of("settled") if i == id]

    def settled_all(self, ids: List[str]) -> bool:
        """Whether every id was settled at least once. Not necessarily
        'acked': an ACK cut off by the kill may have reached the server
        before its reply was lost ('unsettled', yet the message is gone); one
        that did not brings the message back, and the queue is not drained
        until it is handled again."""
        settled = {i for i, _ in self._of("settled")}
        return set(ids) <= settled

    def check(self, added: List[str]) -> None:
        with self.lock:
            events = list(self.events)
        assert set(added) - {i for k, i, _ in events if k == "handled"} == set(), "jobs never handled"
        confirmed: Set[str] = set()
        for kind, i, x in events:
            if kind == "handled":
                assert i not in confirmed, f"{i} was handled again after its ACK was confirmed"
                continue
            assert x.action == "ack", (i, x)
            assert x.state in ("acked", "acked-late", "unsettled"), (i, x)
            if x.state == "unsettled":
                assert x.exception is not None, (i, x)
            if x.state == "acked":
                confirmed.add(i)
        assert self.settled_all(added)


def admin_retry(asyncio: bool = False) -> Any:
    """The test's own client tries a command the restart cut off again (a
    client made from a URL does not): its connection outlives the kills and
    restarts, and the test adds jobs with it."""
    import redis.asyncio.retry
    import redis.backoff
    import redis.retry

    kind = redis.asyncio.retry.Retry if asyncio else redis.retry.Retry
    return kind(redis.backoff.ExponentialBackoff(cap=1, base=0.05), 10)


def add_wave(q: dq.Queue, prefix: str) -> List[str]:
    return [q.add(f"{prefix}{i}", id=f"{prefix}{i}") for i in range(WAVE)]


def kill_clients(admin: Any) -> int:
    """Kills every connection but the admin's own: how many."""
    return int(admin.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"))


def drained(stats: Any) -> bool:
    return all(stats[k] == 0 for k in DRAINED)


def check_mark(journal: Journal) -> None:
    """Mark's first ACK could not reach the server: reported 'unsettled',
    with the connection's error; it came back after its lease, was handled
    again and acked."""
    first = journal.outcomes("mark")[0]
    assert (first.action, first.state) == ("ack", "unsettled"), first
    assert isinstance(first.exception, redis.exceptions.ConnectionError), repr(first.exception)
    assert journal.attempts("mark")[:2] == [1, 2]


class Running:
    """Runs a worker in a thread."""

    def __init__(self, worker: dq.Worker) -> None:
        self.worker = worker
        self.error: List[BaseException] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.worker.run()
        except BaseException as e:  # noqa: B036 - reported by joined()
            self.error.append(e)

    def joined(self, timeout: float) -> None:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "run() did not return after stop()"
        assert not self.error, self.error


# --- dq.Worker (threads) -------------------------------------------------------------


def run_sync(server: Any, name: str, cut_off: Any, let_back: Any) -> None:
    """The scenario on threads; `cut_off(admin)` and `let_back(admin)` are
    what the test does mid-run (the first time, then around mark's ACK)."""
    admin = redis.Redis.from_url(server.url, retry=admin_retry())  # used by this thread alone: one connection
    aq = dq.Queue(admin, name)
    client = redis.Redis.from_url(server.url)
    journal = Journal()
    at_mark, cut = threading.Event(), threading.Event()

    def handler(d: dq.Delivery) -> None:
        journal.handled(d)
        if d.id == "mark" and d.attempt == 1:
            # The worker is cut off before this returns: its ACK cannot be sent.
            at_mark.set()
            cut.wait(60)
        time.sleep(0.002)

    added = add_wave(aq, "a")
    running = Running(dq.Worker(dq.Queue(client, name), handler, concurrency=4, lease_ms=LEASE_MS, block_ms=200,
                                on_settled=journal.settled))
    try:
        wait_for(lambda: len(journal.handled_ids()) >= 10, what="10 jobs handled")
        cut_off(admin, False)
        let_back(admin)
        added += add_wave(aq, "b")
        wait_for(lambda: journal.handled_ids() >= set(added), timeout=60, what="the jobs added before and after")
        added.append(aq.add("m", id="mark"))
        assert at_mark.wait(60), "mark was not handled"
        cut_off(admin, True)
        cut.set()
        wait_for(lambda: journal.outcomes("mark"), timeout=60, what="mark's settlement")
        let_back(admin)
        added += add_wave(aq, "c")
        wait_for(lambda: drained(aq.stats()) and journal.settled_all(added), timeout=60, what="the queue to drain")
    finally:
        cut.set()
        running.worker.stop()
    running.joined(60)
    journal.check(added)
    check_mark(journal)
    assert drained(aq.stats())
    client.close()
    admin.close()


def test_worker_reconnects_after_its_connections_are_killed(own_server, name):
    server = own_server()
    maxclients: List[Any] = []

    def cut_off(admin: Any, door_closed: bool) -> None:
        if door_closed:
            maxclients.append(admin.config_get("maxclients")["maxclients"])
            admin.config_set("maxclients", 1)
        assert kill_clients(admin) >= 1, "the worker had no connection to kill"

    def let_back(admin: Any) -> None:
        if maxclients:
            admin.config_set("maxclients", maxclients.pop())

    run_sync(server, name, cut_off, let_back)


def test_worker_rides_out_a_server_restart(own_server, name):
    server = own_server("--appendonly", "yes", "--appendfsync", "always")

    def cut_off(admin: Any, stays_down: bool) -> None:
        server.kill()
        if not stays_down:
            server.start()

    def let_back(admin: Any) -> None:
        if server.proc is not None and server.proc.poll() is not None:
            server.start()

    run_sync(server, name, cut_off, let_back)


# --- dq.asyncio.Worker ---------------------------------------------------------------


async def run_async(server: Any, name: str, cut_off: Any, let_back: Any) -> None:
    """The scenario on asyncio tasks (see run_sync)."""
    admin = redis.asyncio.Redis.from_url(server.url, retry=admin_retry(asyncio=True))  # this task's alone: one connection
    aq = dqa.Queue(admin, name)
    client = redis.asyncio.Redis.from_url(server.url)
    journal = Journal()
    at_mark, cut = asyncio.Event(), asyncio.Event()

    async def handler(d: dqa.Delivery) -> None:
        journal.handled(d)
        if d.id == "mark" and d.attempt == 1:
            at_mark.set()
            await asyncio.wait_for(cut.wait(), 60)
        await asyncio.sleep(0.002)

    async def wave(prefix: str) -> List[str]:
        return [await aq.add(f"{prefix}{i}", id=f"{prefix}{i}") for i in range(WAVE)]

    async def holds(cond: Any) -> bool:
        return bool(cond())

    added = await wave("a")
    worker = dqa.Worker(dqa.Queue(client, name), handler, concurrency=4, lease_ms=LEASE_MS, block_ms=200,
                        on_settled=journal.settled)
    task = asyncio.ensure_future(worker.run())
    try:
        await await_for(lambda: holds(lambda: len(journal.handled_ids()) >= 10), what="10 jobs handled")
        await cut_off(admin, False)
        await let_back(admin)
        added += await wave("b")
        await await_for(lambda: holds(lambda: journal.handled_ids() >= set(added)), timeout=60,
                        what="the jobs added before and after")
        added.append(await aq.add("m", id="mark"))
        await asyncio.wait_for(at_mark.wait(), 60)
        await cut_off(admin, True)
        cut.set()
        await await_for(lambda: holds(lambda: journal.outcomes("mark")), timeout=60, what="mark's settlement")
        await let_back(admin)
        added += await wave("c")

        async def done() -> bool:
            return drained(await aq.stats()) and journal.settled_all(added)

        await await_for(done, timeout=60, what="the queue to drain")
    finally:
        cut.set()
        worker.stop()
    await asyncio.wait_for(task, 60)  # stop() returns
    journal.check(added)
    check_mark(journal)
    assert drained(await aq.stats())
    await client.aclose()
    await admin.aclose()


@pytest.mark.asyncio
async def test_asyncio_worker_reconnects_after_its_connections_are_killed(own_server, name):
    server = own_server()
    maxclients: List[Any] = []

    async def cut_off(admin: Any, door_closed: bool) -> None:
        if door_closed:
            maxclients.append((await admin.config_get("maxclients"))["maxclients"])
            await admin.config_set("maxclients", 1)
        killed = await admin.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        assert int(killed) >= 1, "the worker had no connection to kill"

    async def let_back(admin: Any) -> None:
        if maxclients:
            await admin.config_set("maxclients", maxclients.pop())

    await run_async(server, name, cut_off, let_back)


@pytest.mark.asyncio
async def test_asyncio_worker_rides_out_a_server_restart(own_server, name):
    server = own_server("--appendonly", "yes", "--appendfsync", "always")

    async def cut_off(admin: Any, stays_down: bool) -> None:
        server.kill()
        if not stays_down:
            await asyncio.to_thread(server.start)

    async def let_back(admin: Any) -> None:
        if server.proc is not None and server.proc.poll() is not None:
            await asyncio.to_thread(server.start)

    await run_async(server, name, cut_off, let_back)
