"""The blocking Worker: one poller thread per (shard) queue, `concurrency`
handler threads, a heartbeat thread, an acker thread that sends the ACKs of
the deliveries that finished since its last round trip in one DQ.ACK per
queue, FIFO-fair permits."""

from __future__ import annotations

import _thread
import functools
import logging
import signal
import threading
import time
from collections import deque
from typing import Any, Callable, Deque, Dict, List, Optional, Sequence, Tuple, Union

from . import _commands as c
from ._commands import Delivery, Outcome
from ._sync import Queue, ShardedQueue, execute

log = logging.getLogger("dq")

Handler = Callable[[Delivery], Any]
OnSettled = Callable[[Delivery, Outcome], Any]


class _Permits:
    """A counting semaphore whose waiters are served first come, first served."""

    def __init__(self, n: int) -> None:
        self._free = n
        self._lock = threading.Lock()
        self._waiters: Deque[List[Any]] = deque()  # [lock held until granted, granted]
        self._closed = False

    def acquire(self, most: int) -> int:
        """Waits for at least one permit; returns how many it got (up to
        `most` of the free ones when nobody else waits), or 0 once closed."""
        with self._lock:
            if self._closed:
                return 0
            if self._free and not self._waiters:
                n = min(self._free, most)
                self._free -= n
                return n
            gate = _thread.allocate_lock()
            gate.acquire()
            waiter: List[Any] = [gate, 0]
            self._waiters.append(waiter)
        gate.acquire()
        with self._lock:
            return int(waiter[1])

    def try_acquire(self, most: int) -> int:
        """Up to `most` free permits without waiting (none while others wait)."""
        with self._lock:
            if self._closed or self._waiters:
                return 0
            n = min(self._free, most)
            self._free -= n
            return n

    def release(self, n: int = 1) -> None:
        with self._lock:
            for _ in range(n):
                if self._waiters and not self._closed:
                    waiter = self._waiters.popleft()
                    waiter[1] += 1
                    waiter[0].release()
                else:
                    self._free += 1

    def close(self) -> None:
        """Wakes every waiter empty-handed; later acquires return 0."""
        with self._lock:
            self._closed = True
            while self._waiters:
                self._waiters.popleft()[0].release()


class _Handlers:
    """`n` threads that run jobs in arrival order, waking no more of them
    than the jobs need. A thread that takes a job while others wait, and
    sees no other thread awake and free to take them, wakes one. So a burst
    of quick jobs is run by the threads already awake (a few wakeups for the
    lot, not one per job), and jobs that block wake thread after thread
    until each has its own."""

    def __init__(self, n: int) -> None:
        self._jobs: Deque[Callable[[], None]] = deque()
        self._lock = threading.Lock()
        self._sleeping: List[Any] = []  # each sleeping thread's gate (a held lock)
        self._free = n  # threads awake and not running a job (each starts so)
        self._closed = False
        self._threads = [threading.Thread(target=self._run, name=f"dq-handler-{i}", daemon=True) for i in range(n)]
        for t in self._threads:
            t.start()

    def submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            self._jobs.append(job)
            gate = self._wake_one()
        if gate is not None:
            gate.release()

    def _wake_one(self) -> Any:
        """A sleeping thread's gate to release when jobs wait and no awake
        thread is free to take them (the caller holds the lock)."""
        if self._jobs and self._free == 0 and self._sleeping:
            self._free += 1
            return self._sleeping.pop()
        return None

    def _run(self) -> None:
        gate = _thread.allocate_lock()
        gate.acquire()
        done = False  # a job just ended: this thread is free again
        while True:
            with self._lock:
                if done:
                    self._free += 1
                if self._jobs:
                    job: Optional[Callable[[], None]] = self._jobs.popleft()
                    self._free -= 1
                    other = self._wake_one()
                elif self._closed:
                    return
                else:
                    self._free -= 1
                    self._sleeping.append(gate)
                    job = other = None
            if other is not None:
                other.release()
            if job is None:
                done = False
                gate.acquire()  # released by a waker (who counted this thread free) or shutdown()
                continue
            try:
                job()
            except BaseException:  # noqa: B036 - a job's failure must not end the thread
                log.exception("dq: a worker job failed")
            done = True

    def shutdown(self) -> None:
        """Runs what was submitted, then ends the threads."""
        with self._lock:
            self._closed = True
            sleeping, self._sleeping = self._sleeping, []
            self._free += len(sleeping)
        for gate in sleeping:
            gate.release()
        for t in self._threads:
            t.join()


class _Heartbeat(threading.Thread):
    """TOUCHes each running delivery a third of a lease after its last
    renewal; marks it lost on STALE. It looks four times per renewal period
    over the running deliveries (at most concurrency + pollers), so adding
    and removing one costs a dict operation, no wakeup."""

    def __init__(self, lease_ms: int) -> None:
        super().__init__(name="dq-heartbeat", daemon=True)
        self._lease_ms = lease_ms
        self._every = lease_ms / 3000
        self._lock = threading.Lock()
        self._items: Dict[int, List[Any]] = {}  # key -> [delivery, part, next touch]
        self._next_key = 0
        self._done = threading.Event()

    def add(self, deliveries: List[Delivery], part: Queue) -> int:
        """Adds a POP's deliveries; their keys are the one returned and the
        ones after it."""
        due = time.monotonic() + self._every
        with self._lock:
            first = self._next_key
            self._next_key += len(deliveries)
            for i, delivery in enumerate(deliveries):
                self._items[first + i] = [delivery, part, due]
        return first

    def remove(self, key: int) -> None:
        with self._lock:
            self._items.pop(key, None)

    def finish(self) -> None:
        self._done.set()

    def run(self) -> None:
        while not self._done.wait(self._every / 4):
            now = time.monotonic()
            with self._lock:
                due = [(k, item[0], item[1]) for k, item in self._items.items() if item[2] <= now]
            for key, delivery, part in due:
                self._touch(key, delivery, part)

    def _touch(self, key: int, delivery: Delivery, part: Queue) -> None:
        try:
            execute(part.client, part._core.touch_call(delivery.id, lease_ms=self._lease_ms, attempt=delivery.attempt))
        except c.StaleDelivery:
            with self._lock:
                if self._items.pop(key, None) is None:
                    return  # settled meanwhile: the STALE is our own ACK/NACK's doing
            reason = why_over(part, delivery)
            c.mark_over(delivery, reason)
            log.warning(c.OVER_LOG[reason], delivery.id, delivery.attempt, delivery.queue)
            return
        except Exception as e:  # connection trouble: try again at the next look
            log.warning("dq: TOUCH %s in %s failed: %s", delivery.id, delivery.queue, e)
            return
        with self._lock:
            item = self._items.get(key)
            if item is not None:
                item[2] = time.monotonic() + self._every


def why_over(part: Queue, delivery: Delivery) -> str:
    """Why a delivery's TOUCH was STALE (c.over_reason), by DQ.GET."""
    try:
        record = execute(part.client, part._core.get_call(delivery.id))
    except Exception as e:
        log.warning("dq: DQ.GET %s in %s failed: %s", delivery.id, delivery.queue, e)
        return "lost"
    return c.over_reason(record)


class _Acker(threading.Thread):
    """Sends the ACKs: the deliveries that finished while the last DQ.ACK was
    on its way go in the next one, one per queue, sent the moment the
    previous one is answered; never held back by a timer."""

    def __init__(self, settled: Callable[[Delivery, Outcome], None]) -> None:
        super().__init__(name="dq-acker", daemon=True)
        self._settled = settled
        self._cond = threading.Condition(threading.Lock())
        self._pending: Dict[int, Tuple[Queue, List[Delivery]]] = {}
        self._idle = False
        self._done = False

    def add(self, part: Queue, delivery: Delivery) -> None:
        with self._cond:
            entry = self._pending.get(id(part))
            if entry is None:
                self._pending[id(part)] = (part, [delivery])
            else:
                entry[1].append(delivery)
            if self._idle:
                self._cond.notify()

    def finish(self) -> None:
        """Sends what is pending, then ends."""
        with self._cond:
            self._done = True
            self._cond.notify()

    def run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._done:
                    self._idle = True
                    self._cond.wait()
                    self._idle = False
                if not self._pending:
                    return
                batches, self._pending = self._pending, {}
            for part, deliveries in batches.values():
                self._send(part, deliveries)

    def _send(self, part: Queue, deliveries: List[Delivery]) -> None:
        try:
            count = execute(part.client, part._core.ack_call([d.id for d in deliveries]))
        except Exception as e:
            log.error("dq: DQ.ACK of %d id(s) in %s failed: %s (they come back after their lease)",
                      len(deliveries), part.name, e)
            for d in deliveries:
                self._settled(d, Outcome("ack", "unsettled", None, e))
            return
        state = c.ack_batch_state(count, len(deliveries))
        if state != "acked":
            log.warning("dq: DQ.ACK of %d id(s) in %s counted %d: the rest were no longer in flight",
                        len(deliveries), part.name, count)
        outcome = Outcome("ack", state)  # frozen: one for the batch
        settled = self._settled
        for d in deliveries:
            settled(d, outcome)


class Worker:
    """Runs `handler(delivery)` for the messages of one or more queues.

    Returns normally -> DQ.ACK (the ACKs of deliveries that finished since
    the last round trip go in one DQ.ACK per queue). Raises Permanent ->
    DQ.NACK DEAD. Raises Retry(delay_ms) -> DQ.NACK DELAY. Anything else ->
    DQ.NACK with ERROR "<ExceptionType>: <message>" (the backoff decides).
    Every NACK and TOUCH carries ATTEMPT. `on_settled(delivery, outcome)`
    (optional) is called after each delivery was settled: for a NACK in
    the handler's thread, for an ACK in the worker's acker thread (keep it
    short: the next ACKs wait for it)."""

    def __init__(
        self,
        queues: Union[Queue, ShardedQueue, Sequence[Union[Queue, ShardedQueue]]],
        handler: Handler,
        *,
        concurrency: int = 1,
        lease_ms: int = 30000,
        block_ms: int = 1000,
        handle_signals: bool = True,
        on_settled: Optional[OnSettled] = None,
    ) -> None:
        if not callable(handler):
            raise TypeError(f"handler must be callable, got {type(handler).__name__}")
        if on_settled is not None and not callable(on_settled):
            raise TypeError(f"on_settled must be callable, got {type(on_settled).__name__}")
        if not isinstance(handle_signals, bool):
            raise TypeError(f"handle_signals must be a bool, got {type(handle_signals).__name__}")
        c.check_worker_args(concurrency, lease_ms, block_ms)
        self._groups: List[List[Queue]] = c.worker_groups(queues, Queue, ShardedQueue)
        self._parts: List[Queue] = [part for group in self._groups for part in group]
        for part in self._parts:
            c.check_pool(part.client, len(self._groups) + concurrency + 2, block_ms)
        self.handler = handler
        self.concurrency = concurrency
        self.lease_ms = lease_ms
        self.block_ms = block_ms
        self.handle_signals = handle_signals
        self.on_settled = on_settled
        self._stop = threading.Event()
        self._permits = _Permits(concurrency)
        # A poller takes at most its share of the free permits at once, so
        # that one poller blocked on an empty queue does not hold them all.
        self._share = max(1, concurrency // len(self._groups))
        self._started = False
        self._lock = threading.Lock()

    @property
    def queue_names(self) -> List[str]:
        """The (shard) queues this worker polls."""
        return [p.name for p in self._parts]

    @property
    def pollers(self) -> List[List[str]]:
        """The queues each poller takes from: one list of several names when
        one DQ.MPOP serves them all (in that order), else one per queue."""
        return [[p.name for p in group] for group in self._groups]

    def stop(self) -> None:
        """Asks the worker to stop (from any thread or a signal handler): no
        new POP; running handlers finish and are settled; run() returns."""
        self._stop.set()
        self._permits.close()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def run(self) -> None:
        """Polls and handles until stop() (or SIGTERM/SIGINT, when called in
        the main thread with handle_signals). A worker runs once."""
        with self._lock:
            if self._started:
                raise RuntimeError("this Worker has already run; make a new one")
            self._started = True
        previous: Dict[signal.Signals, Any] = {}
        if self.handle_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, lambda signum, frame: self.stop())
        handlers = _Handlers(self.concurrency)
        heartbeat = _Heartbeat(self.lease_ms)
        heartbeat.start()
        acker = _Acker(self._settled)
        acker.start()
        pollers = [
            threading.Thread(target=self._poll, args=(group, handlers, heartbeat, acker),
                             name=f"dq-poll-{'+'.join(part.name for part in group)}", daemon=True)
            for group in self._groups
        ]
        log.info("dq: worker started on %d queue(s), concurrency %d", len(pollers), self.concurrency)
        try:
            for t in pollers:
                t.start()
            for t in pollers:
                while t.is_alive():
                    t.join(0.2)  # short joins let the main thread run signal handlers
        finally:
            self.stop()
            handlers.shutdown()
            acker.finish()
            acker.join()
            heartbeat.finish()
            heartbeat.join()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        log.info("dq: worker stopped")

    def _taker(self, group: List[Queue]) -> Callable[[int, Optional[int]], Tuple[Queue, List[Delivery]]]:
        """take(count, block_ms) -> (the queue taken from, its deliveries):
        DQ.POP for one queue, DQ.MPOP (in the group's order) for several."""
        lease_ms = self.lease_ms
        if len(group) == 1:
            part = group[0]
            core: c.QueueCore = part._core

            def pop(count: int, block_ms: Optional[int]) -> Tuple[Queue, List[Delivery]]:
                return part, execute(part.client, core.pop_call(count, block_ms, lease_ms))

            return pop
        client = group[0].client
        cores = [p._core for p in group]
        by_name = {p.name: p for p in group}

        def mpop(count: int, block_ms: Optional[int]) -> Tuple[Queue, List[Delivery]]:
            name, batch = execute(client, c.mpop_call(cores, count, block_ms, lease_ms))
            return (by_name[name] if name is not None else group[0]), batch

        return mpop

    def _poll(self, group: List[Queue], handlers: _Handlers, heartbeat: _Heartbeat, acker: _Acker) -> None:
        take = self._taker(group)
        where = "+".join(p.name for p in group)
        pause = 0.1
        while not self._stop.is_set():
            n = self._permits.acquire(self._share)
            if n == 0:
                break
            if n < self._share:
                # Handlers finishing now free their permits too: let them
                # run, then one POP asks for every free permit.
                time.sleep(0)
                n += self._permits.try_acquire(self._share - n)
            if self._stop.is_set():
                self._permits.release(n)
                break
            try:
                # What is ready now, up to this poller's permits.
                part, batch = take(n, None)
                if not batch and not self._stop.is_set():
                    # Nothing ready. The only poller keeps its permits and
                    # waits for as many messages: a burst that falls due
                    # comes in one reply. Among several, it gives them back
                    # (another queue may have work) and waits for one message
                    # holding none; that one then waits for a permit, its
                    # lease kept alive by the heartbeat.
                    if len(self._groups) > 1:
                        self._permits.release(n)
                        n = 0
                    part, batch = take(max(n, 1), self.block_ms)
            except Exception as e:
                self._permits.release(n)
                log.error("dq: POP from %s failed: %s (retrying in %.1f s)", where, e, pause)
                self._stop.wait(pause)
                pause = min(pause * 2, 5.0)
                continue
            pause = 0.1
            if len(batch) < n:
                self._permits.release(n - len(batch))
            # Deliveries taken after a stop request are handled all the same:
            # they are leased to us, and finishing them loses nothing.
            first = heartbeat.add(batch, part)
            handle, submit = self._handle, handlers.submit
            for i, delivery in enumerate(batch):
                submit(functools.partial(handle, part, delivery, heartbeat, acker, first + i, i < n))

    def _handle(self, part: Queue, delivery: Delivery, heartbeat: _Heartbeat, acker: _Acker, key: int,
                permitted: bool) -> None:
        if not permitted:
            # Taken by a blocking POP without a permit: wait for one (0 once
            # stopping: leased to us, it is handled all the same).
            permitted = self._permits.acquire(1) > 0
        failure: Optional[BaseException] = None
        try:
            self.handler(delivery)
        except BaseException as e:  # noqa: B036 - a handler's SystemExit must not kill the thread
            failure = e
            if not isinstance(e, (c.Permanent, c.Retry)):
                log.warning("dq: handler failed on %s attempt %d in %s: %s: %s",
                            delivery.id, delivery.attempt, delivery.queue, type(e).__name__, e)
        finally:
            heartbeat.remove(key)
            # The handler is done: its permit goes to the next POP while the
            # ACK or NACK is on its way.
            if permitted:
                self._permits.release(1)
        if failure is None and not delivery.lost:
            acker.add(part, delivery)
        else:
            self._settled(delivery, self._settle(part, delivery, failure))

    def _settled(self, delivery: Delivery, outcome: Outcome) -> None:
        if self.on_settled is not None:
            try:
                self.on_settled(delivery, outcome)
            except Exception:
                log.exception("dq: on_settled raised")

    def _settle(self, part: Queue, delivery: Delivery, failure: Optional[BaseException]) -> Outcome:
        action, call, error = c.settle_call(part._core, delivery, failure)
        if call is None:
            log.warning("dq: not settling %s attempt %d in %s: %s", delivery.id, delivery.attempt, delivery.queue,
                        "it was cancelled" if delivery.lost_reason == "cancelled" else "its lease was lost")
            return Outcome(action, c.unsent_state(delivery), error, failure)
        try:
            reply = execute(part.client, call)
        except c.StaleDelivery as e:
            log.warning("dq: %s", e)
            return Outcome(action, "stale", error, e)
        except Exception as e:
            log.error("dq: settling %s attempt %d in %s failed: %s (it comes back after its lease)",
                      delivery.id, delivery.attempt, delivery.queue, e)
            return Outcome(action, "unsettled", error, e)
        return Outcome(action, c.settle_state(action, reply), error, failure)
