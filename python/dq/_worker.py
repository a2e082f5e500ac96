"""The blocking Worker: one poller thread per (shard) queue, a pool of
`concurrency` handler threads, a heartbeat thread, FIFO-fair permits."""

from __future__ import annotations

import heapq
import itertools
import logging
import signal
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
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
        self._waiters: Deque[List[Any]] = deque()  # [event, granted]
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
            waiter: List[Any] = [threading.Event(), 0]
            self._waiters.append(waiter)
        waiter[0].wait()
        with self._lock:
            return waiter[1]

    def release(self, n: int = 1) -> None:
        with self._lock:
            for _ in range(n):
                if self._waiters and not self._closed:
                    waiter = self._waiters.popleft()
                    waiter[1] += 1
                    waiter[0].set()
                else:
                    self._free += 1

    def close(self) -> None:
        """Wakes every waiter empty-handed; later acquires return 0."""
        with self._lock:
            self._closed = True
            while self._waiters:
                self._waiters.popleft()[0].set()


class _Heartbeat(threading.Thread):
    """TOUCHes every running delivery each lease/3; marks it lost on STALE."""

    def __init__(self, lease_ms: int) -> None:
        super().__init__(name="dq-heartbeat", daemon=True)
        self._lease_ms = lease_ms
        self._every = lease_ms / 3000
        self._cond = threading.Condition()
        self._due: List[Tuple[float, int]] = []  # heap of (next touch, key)
        self._items: Dict[int, Tuple[Delivery, Queue]] = {}
        self._seq = itertools.count()
        self._done = False

    def add(self, delivery: Delivery, part: Queue, now: float) -> int:
        key = next(self._seq)
        with self._cond:
            self._items[key] = (delivery, part)
            heapq.heappush(self._due, (now + self._every, key))
            self._cond.notify()
        return key

    def remove(self, key: int) -> None:
        with self._cond:
            self._items.pop(key, None)

    def finish(self) -> None:
        with self._cond:
            self._done = True
            self._cond.notify()

    def run(self) -> None:
        while True:
            with self._cond:
                while not self._done:
                    while self._due and self._due[0][1] not in self._items:
                        heapq.heappop(self._due)
                    if self._due and self._due[0][0] <= time.monotonic():
                        break
                    self._cond.wait(None if not self._due else self._due[0][0] - time.monotonic())
                if self._done:
                    return
                _, key = heapq.heappop(self._due)
                delivery, part = self._items[key]
                heapq.heappush(self._due, (time.monotonic() + self._every, key))
            try:
                execute(part.client, part._core.touch_call(delivery.id, lease_ms=self._lease_ms, attempt=delivery.attempt))
            except c.StaleDelivery:
                with self._cond:
                    if self._items.pop(key, None) is None:
                        continue  # settled meanwhile: the STALE is our own ACK/NACK's doing
                delivery.lost = True
                log.warning("dq: lost the lease of %s attempt %d in %s: another consumer may have it",
                            delivery.id, delivery.attempt, delivery.queue)
            except Exception as e:  # connection trouble: try again at the next beat
                log.warning("dq: TOUCH %s in %s failed: %s", delivery.id, delivery.queue, e)


class Worker:
    """Runs `handler(delivery)` for the messages of one or more queues.

    Returns normally -> DQ.ACK. Raises Permanent -> DQ.NACK DEAD. Raises
    Retry(delay_ms) -> DQ.NACK DELAY. Anything else -> DQ.NACK with ERROR
    "<ExceptionType>: <message>" (the backoff decides). Every NACK and TOUCH
    carries ATTEMPT. `on_settled(delivery, outcome)` (optional) is called
    after each delivery was settled, in the handler's thread."""

    def __init__(
        self,
        queues: Union[Queue, ShardedQueue, Sequence[Union[Queue, ShardedQueue]]],
        handler: Handler,
        *,
        concurrency: int = 1,
        lease_ms: int = 30000,
        block_ms: int = 1000,
        on_settled: Optional[OnSettled] = None,
    ) -> None:
        if not callable(handler):
            raise TypeError(f"handler must be callable, got {type(handler).__name__}")
        if on_settled is not None and not callable(on_settled):
            raise TypeError(f"on_settled must be callable, got {type(on_settled).__name__}")
        c.check_worker_args(concurrency, lease_ms, block_ms)
        self._parts: List[Queue] = c.worker_parts(queues, (Queue, ShardedQueue))
        for part in self._parts:
            c.check_pool(part.client, len(self._parts) + concurrency + 1, block_ms)
        self.handler = handler
        self.concurrency = concurrency
        self.lease_ms = lease_ms
        self.block_ms = block_ms
        self.on_settled = on_settled
        self._stop = threading.Event()
        self._permits = _Permits(concurrency)
        # A poller takes at most its share of the free permits at once, so
        # that one poller blocked on an empty queue does not hold them all.
        self._share = max(1, concurrency // len(self._parts))
        self._started = False
        self._lock = threading.Lock()

    @property
    def queue_names(self) -> List[str]:
        """The (shard) queues this worker polls."""
        return [p.name for p in self._parts]

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
        the main thread). A worker runs once."""
        with self._lock:
            if self._started:
                raise RuntimeError("this Worker has already run; make a new one")
            self._started = True
        previous: Dict[signal.Signals, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, lambda signum, frame: self.stop())
        pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="dq-handler")
        heartbeat = _Heartbeat(self.lease_ms)
        heartbeat.start()
        pollers = [
            threading.Thread(target=self._poll, args=(part, pool, heartbeat), name=f"dq-poll-{part.name}", daemon=True)
            for part in self._parts
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
            pool.shutdown(wait=True)
            heartbeat.finish()
            heartbeat.join()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        log.info("dq: worker stopped")

    def _poll(self, part: Queue, pool: ThreadPoolExecutor, heartbeat: _Heartbeat) -> None:
        core: c.QueueCore = part._core
        pause = 0.1
        while not self._stop.is_set():
            n = self._permits.acquire(self._share)
            if n == 0:
                break
            if self._stop.is_set():
                self._permits.release(n)
                break
            try:
                # What is ready now, up to this poller's permits.
                batch = execute(part.client, core.pop_call(n, None, self.lease_ms))
                if not batch and not self._stop.is_set():
                    # Nothing ready: give the permits back (another queue may
                    # have work) and wait for one message holding none. The
                    # handler pool, `concurrency` threads, queues it until a
                    # thread is free; the heartbeat keeps its lease meanwhile.
                    self._permits.release(n)
                    n = 0
                    batch = execute(part.client, core.pop_call(1, self.block_ms, self.lease_ms))
            except Exception as e:
                self._permits.release(n)
                log.error("dq: POP from %s failed: %s (retrying in %.1f s)", part.name, e, pause)
                self._stop.wait(pause)
                pause = min(pause * 2, 5.0)
                continue
            pause = 0.1
            if len(batch) < n:
                self._permits.release(n - len(batch))
            # Deliveries taken after a stop request are handled all the same:
            # they are leased to us, and finishing them loses nothing.
            for i, delivery in enumerate(batch):
                key = heartbeat.add(delivery, part, time.monotonic())
                pool.submit(self._handle, part, delivery, heartbeat, key, i < n)

    def _handle(self, part: Queue, delivery: Delivery, heartbeat: _Heartbeat, key: int,
                permitted: bool = True) -> None:
        failure: Optional[BaseException] = None
        try:
            try:
                self.handler(delivery)
            except BaseException as e:  # noqa: B036 - a handler's SystemExit must not kill the pool thread
                failure = e
                if not isinstance(e, (c.Permanent, c.Retry)):
                    log.warning("dq: handler failed on %s attempt %d in %s: %s: %s",
                                delivery.id, delivery.attempt, delivery.queue, type(e).__name__, e)
            finally:
                heartbeat.remove(key)
            outcome = self._settle(part, delivery, failure)
            if self.on_settled is not None:
                try:
                    self.on_settled(delivery, outcome)
                except Exception:
                    log.exception("dq: on_settled raised")
        finally:
            if permitted:
                self._permits.release(1)

    def _settle(self, part: Queue, delivery: Delivery, failure: Optional[BaseException]) -> Outcome:
        action, call, error = c.settle_call(part._core, delivery, failure)
        if call is None:
            log.warning("dq: not settling %s attempt %d in %s: its lease was lost", delivery.id, delivery.attempt,
                        delivery.queue)
            return Outcome(action, None, None, failure)
        try:
            reply = execute(part.client, call)
        except c.StaleDelivery as e:
            log.warning("dq: %s", e)
            return Outcome(action, None, error, e)
        except Exception as e:
            log.error("dq: settling %s attempt %d in %s failed: %s (it comes back after its lease)",
                      delivery.id, delivery.attempt, delivery.queue, e)
            return Outcome(action, None, error, e)
        return Outcome(action, c.settle_state(action, reply), error, failure)
