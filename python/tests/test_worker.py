"""The threaded Worker against a real standalone server."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any, List

import pytest
import redis

import dq

from conftest import now_ms, redis_url, unblock_pops, wait_for


class Running:
    """Runs a worker in a thread; .stop() stops it and waits for run() to return."""

    def __init__(self, worker: dq.Worker) -> None:
        self.worker = worker
        self.error: List[BaseException] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.worker.run()
        except BaseException as e:  # surfaced by stop()
            self.error.append(e)

    def stop(self, timeout: float = 15.0) -> float:
        began = time.monotonic()
        self.worker.stop()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "run() did not return after stop()"
        assert not self.error, self.error
        return time.monotonic() - began


def test_consume_and_ack(r, name):
    q = dq.Queue(r, name)
    seen: List[Any] = []
    settled: List[Any] = []
    for i in range(10):
        q.add(f"p{i}", id=f"m{i}")
    running = Running(dq.Worker(q, lambda d: seen.append((d.id, d.payload, d.attempt, d.queue)), concurrency=3,
                                block_ms=200, on_settled=lambda d, o: settled.append(o)))
    wait_for(lambda: q.stats()["acked"] == 10, what="10 acks")
    running.stop()
    assert sorted(seen) == sorted((f"m{i}", f"p{i}".encode(), 1, name) for i in range(10))
    assert [o.action for o in settled] == ["ack"] * 10 and {o.state for o in settled} == {"acked"}
    stats = q.stats()
    assert (stats["delivered"], stats["nacked"], stats["inflight"]) == (10, 0, 0)


def test_handler_exception_nacks_with_error(r, name):
    q = dq.Queue(r, name)
    q.add("x", id="x", backoff="fixed:1h")

    def handler(d: dq.Delivery) -> None:
        raise ValueError("the payment service said no")

    before = now_ms()
    running = Running(dq.Worker(q, handler, block_ms=200))
    got = wait_for(lambda: (g := q.get("x")) and g["state"] == "delayed" and g, what="the NACK")
    after = now_ms()
    running.stop()
    assert got["last-error"] == "ValueError: the payment service said no"
    # An hour after the NACK, which came between before and after.
    assert got["attempt"] == 1 and before + 3_600_000 <= got["due-at"] <= after + 3_600_000
    assert q.stats()["nacked"] == 1


def test_permanent_and_retry(r, name):
    q = dq.Queue(r, name)
    q.add("p", id="perm")
    q.add("r", id="retry")
    outcomes = {}

    def handler(d: dq.Delivery) -> None:
        if d.id == "perm":
            raise dq.Permanent("HTTP 410 Gone")
        raise dq.Retry(delay_ms=600_000, error="busy")

    before = now_ms()
    running = Running(dq.Worker(q, handler, concurrency=2, block_ms=200,
                                on_settled=lambda d, o: outcomes.__setitem__(d.id, o)))
    wait_for(lambda: len(outcomes) == 2, what="two settlements")
    after = now_ms()
    running.stop()
    perm = q.get("perm")
    assert (perm["state"], perm["dead-reason"], perm["last-error"]) == ("dead", "permanent", "HTTP 410 Gone")
    retry = q.get("retry")
    assert retry["state"] == "delayed" and retry["last-error"] == "busy"
    # 600 s after the NACK, which came between before and after.
    assert before + 600_000 <= retry["due-at"] <= after + 600_000
    assert (outcomes["perm"].action, outcomes["perm"].state) == ("dead", "dead")
    assert (outcomes["retry"].action, outcomes["retry"].state, outcomes["retry"].error) == ("nack", "delayed", "busy")


def test_heartbeat_keeps_a_long_handler_s_lease(r, name):
    # The handler takes three leases; the heartbeat, a TOUCH every third of a
    # lease, must keep it one delivery. A machine that stalls the worker for
    # two thirds of a lease loses the lease whatever the heartbeat does: then
    # a fresh queue tries a lease four times longer. A heartbeat that does
    # not work loses every one.
    for lease_ms in (300, 1200, 4800):
        q = dq.Queue(r, f"{name}-{lease_ms}")
        q.add("slow", id="slow")
        runs: List[Any] = []

        def handler(d: dq.Delivery) -> None:
            time.sleep(3 * lease_ms / 1000)
            runs.append((d.attempt, d.lost))

        running = Running(dq.Worker(q, handler, lease_ms=lease_ms, block_ms=200))
        wait_for(lambda: q.stats()["acked"] == 1, timeout=60, what="the ack")
        running.stop()
        stats = q.stats()
        if runs == [(1, False)] and (stats["delivered"], stats["lease-expired"], stats["acked"]) == (1, 0, 1):
            return
    raise AssertionError(f"with a lease of {lease_ms} ms: runs {runs}, stats {stats}")


def test_lost_lease_is_not_nacked(r, name):
    q = dq.Queue(r, name)
    q.add("x", id="x", backoff="fixed:1h")
    release = threading.Event()
    outcomes: List[dq.Outcome] = []
    lost: List[dq.Delivery] = []

    def handler(d: dq.Delivery) -> None:
        lost.append(d)
        # Another consumer takes the message meanwhile: the lease is cut short,
        # and again should a heartbeat have renewed it before it ran out.
        def cut() -> bool:
            try:
                q.touch(d, lease_ms=1)
            except dq.StaleDelivery:
                pass  # over already
            return d.lost

        wait_for(cut, what="the heartbeat to notice the lost lease")
        release.wait(10)
        raise RuntimeError("too late")

    running = Running(dq.Worker(q, handler, lease_ms=300, block_ms=200,
                                on_settled=lambda d, o: outcomes.append(o)))
    wait_for(lambda: q.stats()["lease-expired"] == 1, what="the lease to run out")
    release.set()
    wait_for(lambda: outcomes, what="the settlement")
    running.stop()
    assert (outcomes[0].action, outcomes[0].state) == ("nack", "stale")
    stats = q.stats()
    assert stats["nacked"] == 0 and q.get("x")["last-error"] is None
    assert lost[0].lost_reason == "lost" and lost[0].cancelled.is_set()


@pytest.mark.parametrize("how", ["cancel", "purge"])
def test_a_cancelled_message_cancels_its_handler(r, name, how):
    q = dq.Queue(r, name)
    q.add("long job", id="job")
    seen: List[Any] = []
    outcomes: List[dq.Outcome] = []

    def handler(d: dq.Delivery) -> None:
        # Long work that watches the event: it ends as soon as the worker
        # learns the message is gone.
        got = d.cancelled.wait(60)
        seen.append((got, d.lost, d.lost_reason))

    # A lease of 3 s: the heartbeat's TOUCH comes within a second, and the
    # lease is not lost to a loaded machine before the cancel.
    running = Running(dq.Worker(q, handler, lease_ms=3000, block_ms=200,
                                on_settled=lambda d, o: outcomes.append(o)))
    wait_for(lambda: q.stats()["inflight"] == 1, what="the handler to start")
    if how == "cancel":
        assert q.cancel("job") == 1
    else:
        assert q.purge() == 1
    wait_for(lambda: outcomes, timeout=60, what="the settlement")
    running.stop()
    assert seen == [(True, True, "cancelled")]
    # Nothing is sent for it: no ACK, no NACK.
    assert (outcomes[0].action, outcomes[0].state) == ("ack", "cancelled")
    stats = q.stats()
    assert (stats["acked"], stats["nacked"], stats["inflight"]) == (0, 0, 0)


def test_acks_go_in_batches(r, name):
    # Every command on this queue, as MONITOR shows it: the ACKs of handlers
    # that finished together go in one DQ.ACK, and no POP asks for more than
    # the free permits.
    q = dq.Queue(r, name)
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
                if len(args) > 1 and args[1] == name:
                    seen.append(args)
                if args[0].upper() == "DQ.STATS" and args[1] == name and len(seen) > 1:
                    return

    t = threading.Thread(target=monitor, daemon=True)
    t.start()
    watching.wait(10)
    settled: List[dq.Outcome] = []
    running = Running(dq.Worker(q, lambda d: None, concurrency=20, block_ms=200,
                                on_settled=lambda d, o: settled.append(o)))
    wait_for(lambda: len(settled) == 300, what="300 settlements")
    running.stop()
    assert {o.state for o in settled} == {"acked"}
    assert q.stats()["acked"] == 300
    t.join(10)
    acks = [a for a in seen if a[0].upper() == "DQ.ACK"]
    assert sum(len(a) - 2 for a in acks) == 300
    assert len(acks) < 300, f"{len(acks)} DQ.ACKs for 300 deliveries"
    for pop in (a for a in seen if a[0].upper() == "DQ.POP"):
        count = int(pop[pop.index('"COUNT"') + 1].strip('"')) if '"COUNT"' in pop else int(pop[pop.index("COUNT") + 1])
        assert 1 <= count <= 20, pop


def test_graceful_stop_loses_nothing(r, name):
    q = dq.Queue(r, name)
    for i in range(40):
        q.add(f"p{i}")
    started = threading.Semaphore(0)
    finished: List[str] = []
    lock = threading.Lock()

    def handler(d: dq.Delivery) -> None:
        started.release()
        time.sleep(0.3)
        with lock:
            finished.append(d.id)

    worker = dq.Worker(q, handler, concurrency=4, block_ms=500)
    running = Running(worker)
    wait_for(lambda: q.stats()["inflight"] >= 4, what="four handlers at work")
    with lock:
        at_stop = len(finished)
    running.stop()
    stats = q.stats()
    assert stats["inflight"] == 0
    assert stats["acked"] == len(finished) >= 4
    assert stats["acked"] + stats["ready"] == 40  # the rest still queued
    # After stop() only what was taken already is handled: at most one
    # handler per permit, and one message a blocked POP may bring.
    assert len(finished) <= at_stop + 4 + 1, (at_stop, len(finished))


def test_sigterm_stops_run_in_the_main_thread(r, name):
    assert threading.current_thread() is threading.main_thread()
    q = dq.Queue(r, name)
    q.add("x")
    before = signal.getsignal(signal.SIGTERM)
    worker = dq.Worker(q, lambda d: None, block_ms=200)
    timer = threading.Thread(target=lambda: (wait_for(lambda: q.stats()["acked"] == 1, what="the ack"),
                                             os.kill(os.getpid(), signal.SIGTERM)))
    timer.start()
    worker.run()  # returns on SIGTERM
    timer.join()
    assert worker.stopping
    assert signal.getsignal(signal.SIGTERM) is before  # put back
    assert q.stats()["inflight"] == 0


def test_queues_on_one_server_are_taken_in_order_by_one_mpop(r, name):
    a, b = dq.Queue(r, name + "a"), dq.Queue(r, name + "b")
    for i in range(20):
        b.add("y", id=f"b{i}", backoff="fixed:1h")
        a.add("x", id=f"a{i}")
    seen: List[str] = []
    outcomes: List[Any] = []

    def handler(d: dq.Delivery) -> None:
        seen.append(d.queue)
        if d.queue == b.name:
            raise dq.Retry(error="from b")

    # One handler: each delivery is seen in the order it was taken.
    worker = dq.Worker([a, b], handler, concurrency=1, block_ms=200, on_settled=lambda d, o: outcomes.append(o))
    assert worker.pollers == [[a.name, b.name]]
    running = Running(worker)
    wait_for(lambda: len(outcomes) == 40, what="40 settlements")
    # Idle, it waits in one DQ.MPOP over both queues.
    wait_for(lambda: blocked(r, "dq.mpop") == 1, what="the blocked DQ.MPOP")
    running.stop()
    # Strict order: b only once a is empty.
    assert seen == [a.name] * 20 + [b.name] * 20
    # Each settled in its own queue.
    assert a.stats()["acked"] == 20 and b.stats()["acked"] == 0
    assert b.get("b3")["last-error"] == "from b" and b.stats()["delayed"] == 20


def blocked(client: Any, command: str) -> int:
    return sum(1 for c in client.client_list() if c.get("cmd") == command and "b" in c.get("flags", ""))


def test_queues_of_several_clients_share_the_permits(r, name):
    # Two clients: one DQ.MPOP cannot serve both, so each queue has its own
    # poller, and they share the permits fairly.
    other = redis.Redis.from_url(redis_url())
    a, b = dq.Queue(r, name + "a"), dq.Queue(other, name + "b")
    for i in range(30):
        a.add("x")
        b.add("y")
    seen: List[str] = []

    def handler(d: dq.Delivery) -> None:
        seen.append(d.queue)
        # Held a while, so that the permits decide the turns: a poller that
        # starts late or is held up by a loaded machine still gets its turn.
        time.sleep(0.02)

    worker = dq.Worker([a, b], handler, concurrency=2, block_ms=200)
    assert worker.pollers == [[a.name], [b.name]]
    running = Running(worker)
    wait_for(lambda: len(seen) == 60, what="60 deliveries")
    wait_for(lambda: blocked(r, "dq.pop") >= 2, what="two blocked POPs")
    running.stop()
    other.close()
    assert seen[:30].count(a.name) >= 8 and seen[:30].count(b.name) >= 8


def test_a_sharded_queue_in_the_list_means_a_poller_per_queue(r, name):
    a, s = dq.Queue(r, name + "a"), dq.ShardedQueue(r, name + "s", shards=2)
    assert dq.Worker([a, s], print).pollers == [[a.name], [s.shard_names[0]], [s.shard_names[1]]]
    assert dq.Worker(a, print).pollers == [[a.name]]


def test_worker_arguments(r, name):
    q = dq.Queue(r, name)
    with pytest.raises(TypeError, match="handler must be callable"):
        dq.Worker(q, "nope")
    with pytest.raises(ValueError, match="concurrency must be from 1"):
        dq.Worker(q, print, concurrency=0)
    with pytest.raises(ValueError, match="block_ms must be from 1"):
        dq.Worker(q, print, block_ms=0)
    with pytest.raises(TypeError, match="a worker takes Queue or ShardedQueue"):
        dq.Worker("orders", print)
    with pytest.raises(ValueError, match="the same queue twice"):
        dq.Worker([q, dq.Queue(r, name)], print)
    small = redis.Redis(connection_pool=redis.BlockingConnectionPool.from_url(redis_url(), max_connections=3))
    with pytest.raises(ValueError, match="allows 3 connections; this worker needs 7"):
        dq.Worker(dq.Queue(small, name), print, concurrency=4)
    impatient = redis.Redis.from_url(redis_url(), socket_timeout=0.5)
    with pytest.raises(ValueError, match="socket_timeout to be longer than 1 s"):
        dq.Worker(dq.Queue(impatient, name), print)
    single = redis.Redis.from_url(redis_url(), single_connection_client=True)
    with pytest.raises(ValueError, match="single_connection_client"):
        dq.Worker(dq.Queue(single, name), print)
    worker = dq.Worker(q, print, block_ms=100)
    worker.stop()
    worker.run()  # stopped before it ran: returns at once
    with pytest.raises(RuntimeError, match="already run"):
        worker.run()


def test_each_poller_blocks_on_its_own_connection(r, name):
    s = dq.ShardedQueue(r, name, shards=4)

    def blocked() -> int:
        return sum(1 for c in r.client_list() if c.get("cmd") == "dq.pop" and "b" in c.get("flags", ""))

    before = blocked()
    running = Running(dq.Worker(s, lambda d: None, concurrency=4, block_ms=120_000))
    wait_for(lambda: blocked() - before == 4, what="4 POPs blocked at once")
    s.add("x", id="wake")  # taken at once by its shard's poller, not after another's BLOCK of 2 minutes
    wait_for(lambda: s.stats()["acked"] == 1, timeout=60, what="the ack")
    # The pollers' long BLOCKs are ended for the stop.
    running.worker.stop()
    wait_for(lambda: (unblock_pops([r]), not running.thread.is_alive())[1], what="the worker to stop")
    running.stop()
