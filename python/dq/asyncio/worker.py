"""dq.asyncio.Worker: asyncio tasks — one per poller (a DQ.POP queue, or a
DQ.MPOP group), one per running handler, one heartbeat task, a flusher task
per queue that sends the ACKs of the deliveries that finished since its
last round trip in one DQ.ACK (their results in one DQ.DONE, at the same
time) — and an asyncio FIFO permit queue.

What the tasks decide is dq/_core/worker.py's, shared with dq.Worker: the
arguments, each POP turn, the heartbeat's TOUCH, how a handler's outcome
is settled and what an ACK batch's reply means."""

from __future__ import annotations

import asyncio
import inspect
import logging
import signal
import threading
from collections import deque
from typing import Any, Awaitable, Callable, Deque, Dict, List, Optional, Set, Tuple

from .._core.records import Delivery, Outcome
from .._core.worker import (
    Finished, Poller, WorkerCore, batched, batches, finish_batch, handler_failed, handler_result, settle,
)
from ._io import drive
from .queue import Queue
from .sharded import ShardedQueue

log = logging.getLogger("dq")


class _Permits:
    """An asyncio semaphore whose waiters are served first come, first served."""

    def __init__(self, n: int) -> None:
        self._free = n
        self._waiters: Deque["asyncio.Future[int]"] = deque()
        self._closed = False

    async def acquire(self, most: int) -> int:
        """At least one permit (up to `most` of the free ones when nobody
        waits), or 0 once closed."""
        if self._closed:
            return 0
        if self._free and not self._waiters:
            n = min(self._free, most)
            self._free -= n
            return n
        fut: "asyncio.Future[int]" = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release(fut.result())
            raise

    def try_acquire(self, most: int) -> int:
        """Up to `most` free permits without waiting (none while others wait)."""
        if self._closed or any(not w.done() for w in self._waiters):
            return 0
        n = min(self._free, most)
        self._free -= n
        return n

    def release(self, n: int = 1) -> None:
        for _ in range(n):
            while self._waiters and self._waiters[0].done():
                self._waiters.popleft()
            if self._waiters and not self._closed:
                self._waiters.popleft().set_result(1)
            else:
                self._free += 1

    def close(self) -> None:
        self._closed = True
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(0)


class _Acker:
    """One queue's ACKs: the deliveries that finished while the last DQ.ACK
    was on its way go in the next one (those with a result in one DQ.DONE,
    sent alongside), sent the moment the previous one is answered (or, when
    none is on its way, once the callbacks ready in this turn of the loop
    have run); never held back by a timer."""

    def __init__(self, part: "Queue", settled: Callable[[Delivery, Outcome], Awaitable[None]]) -> None:
        self._part = part
        self._settled = settled
        self._pending: List[Finished] = []
        self._busy = False
        self._task: Optional["asyncio.Future[None]"] = None
        self.idle = asyncio.Event()
        self.idle.set()

    def add(self, delivery: Delivery, result: Optional[bytes]) -> None:
        self._pending.append((delivery, result))
        if not self._busy:
            self._busy = True
            self.idle.clear()
            asyncio.get_running_loop().call_soon(self._start)

    def _start(self) -> None:
        self._task = asyncio.ensure_future(self._flush())

    async def _flush(self) -> None:
        part = self._part
        while self._pending:
            finished, self._pending = self._pending, []
            groups = batches(finished)
            # The DQ.ACK and the DQ.DONE of one round go out together; each has its own outcome.
            outcomes = await asyncio.gather(*[drive(part.client, finish_batch(part, b)) for b in groups])
            for batch, outcome in zip(groups, outcomes):
                for d, _ in batch:
                    await self._settled(d, outcome)
        self._busy = False
        self.idle.set()


class Worker(WorkerCore[Queue, ShardedQueue]):
    """Runs `handler(delivery)` for the messages of one or more queues, on
    asyncio tasks. A coroutine function handler is awaited; a plain
    function runs in a thread (asyncio.to_thread) so it cannot block the
    loop. Settles as dq.Worker does (the ACKs of deliveries that finished
    since the last round trip in one DQ.ACK per queue, their results in
    one DQ.DONE). `on_settled(delivery, outcome)` may be a function or a
    coroutine function. A handler reports its progress with
    `await delivery.progress(value)` (a plain function: without await)."""

    _queue_class = Queue
    _sharded_class = ShardedQueue

    def _prepare(self) -> None:
        handler = self.handler
        self._async_handler = inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
            getattr(handler, "__call__", None)
        )
        self._permits = _Permits(self.concurrency)
        self._tasks: Set["asyncio.Task[None]"] = set()
        self._started = False
        self._wake: Optional[asyncio.Event] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        # The running deliveries the heartbeat renews: id(delivery) -> [delivery, part, next touch].
        self._beating: Dict[int, List[Any]] = {}
        self._ackers = {id(part): _Acker(part, self._settled) for part in self._parts}
        self._reporters = {id(part): self._reporter(part) for part in self._parts}
        self._touches: Set["asyncio.Future[None]"] = set()

    def _reporter(self, part: Queue) -> Callable[[Delivery, Any], Any]:
        """Delivery.progress for the deliveries of one queue: on the loop, a
        coroutine of its TOUCH (a coroutine handler awaits it); in a
        plain-function handler's thread, the TOUCH sent on the loop and
        waited for."""

        async def send(delivery: Delivery, value: Any) -> int:
            return await drive(part.client, self._progress_plan(part, delivery, value))

        def report(delivery: Delivery, value: Any) -> Any:
            loop = self._loop
            try:
                running: Optional[asyncio.AbstractEventLoop] = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if loop is None or running is loop:
                return send(delivery, value)
            return asyncio.run_coroutine_threadsafe(send(delivery, value), loop).result()

        return report

    def stop(self) -> None:
        """Asks the worker to stop, from the worker's loop or any other thread:
        no new POP; running handlers finish and are settled; run() returns."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                current = asyncio.get_running_loop()
            except RuntimeError:
                current = None
            if current is not loop:
                self._stopping = True
                loop.call_soon_threadsafe(self._stop_now)
                return
        self._stop_now()

    def _stop_now(self) -> None:
        self._stopping = True
        self._permits.close()
        if self._wake is not None:
            self._wake.set()

    async def run(self) -> None:
        """Polls and handles until stop() (or SIGTERM/SIGINT when run in the
        main thread with handle_signals). A worker runs once."""
        if self._started:
            raise RuntimeError("this Worker has already run; make a new one")
        self._started = True
        self._wake = asyncio.Event()
        if self._stopping:
            self._wake.set()
        loop = self._loop = asyncio.get_running_loop()
        installed: Dict[signal.Signals, Any] = {}
        if self.handle_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                try:
                    previous = signal.getsignal(sig)
                    loop.add_signal_handler(sig, self._stop_now)
                    installed[sig] = previous
                except (NotImplementedError, RuntimeError, ValueError):
                    pass  # no signal support on this loop
        log.info("dq: worker started on %d queue(s), concurrency %d", len(self._parts), self.concurrency)
        heartbeat = asyncio.ensure_future(self._heartbeat())
        try:
            await asyncio.gather(*[self._poll(poller) for poller in self._pollers])
            while self._tasks:
                await asyncio.gather(*list(self._tasks), return_exceptions=True)
            for acker in self._ackers.values():
                await acker.idle.wait()
        finally:
            self._stop_now()
            heartbeat.cancel()
            try:
                await heartbeat
            except asyncio.CancelledError:
                pass
            for sig, previous in installed.items():
                loop.remove_signal_handler(sig)
                if previous is not None:
                    signal.signal(sig, previous)
        log.info("dq: worker stopped")

    async def _pause(self, seconds: float) -> None:
        assert self._wake is not None
        try:
            await asyncio.wait_for(self._wake.wait(), seconds)
        except asyncio.TimeoutError:
            pass

    async def _poll(self, poller: Poller[Queue]) -> None:
        """A poller's task: takes permits, then a POP turn (WorkerCore._take)
        with them, and starts a task per delivery; until stopped."""
        while not self._stopping:
            n = await self._permits.acquire(self._share)
            if n == 0:
                break
            if n < self._share:
                # Handlers finishing in this turn free their permits too:
                # one POP asks for every free permit.
                await asyncio.sleep(0)
                n += self._permits.try_acquire(self._share - n)
            if self._stopping:
                self._permits.release(n)
                break
            part, batch, n, pause = await drive(poller.client, self._take(poller, n, self._permits.release))
            if len(batch) < n:
                self._permits.release(n - len(batch))
            if part is None:  # the POP failed
                await self._pause(pause)
                continue
            reporter = self._reporters[id(part)]
            # Deliveries taken after a stop request are handled all the same.
            for i, delivery in enumerate(batch):
                delivery._reporter = reporter
                task = asyncio.ensure_future(self._handle(part, delivery, permitted=i < n))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def _heartbeat(self) -> None:
        """TOUCHes each running delivery a third of a lease after its last
        renewal, looking four times per renewal period over the running
        ones; marks a delivery lost on STALE."""
        every = self.lease_ms / 3000
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(every / 4)
            now = loop.time()
            for key, item in list(self._beating.items()):
                if item[2] <= now:
                    item[2] = float("inf")  # one TOUCH at a time
                    touch = asyncio.ensure_future(self._touch(key, item, every))
                    self._touches.add(touch)
                    touch.add_done_callback(self._touches.discard)

    async def _touch(self, key: int, item: List[Any], every: float) -> None:
        delivery, part = item[0], item[1]
        forget = lambda: self._beating.pop(key, None) is not None  # noqa: E731
        renewed = await drive(part.client, self._renew(part, delivery, forget))
        if renewed == "settled":
            return
        if renewed == "over":
            # A coroutine handler is cancelled where it waits (item[4]: it
            # runs now). A function in a thread cannot be: it has the event.
            task = item[3]
            if item[4] and not task.done():
                item[5] = True
                task.cancel()
            return
        item[2] = asyncio.get_running_loop().time() + every

    async def _handle(self, part: Queue, delivery: Delivery, permitted: bool = True) -> None:
        key = id(delivery)
        # [delivery, part, next touch, this task, a coroutine handler runs, the heartbeat cancelled it]
        item = [delivery, part, asyncio.get_running_loop().time() + self.lease_ms / 3000, asyncio.current_task(),
                False, False]
        self._beating[key] = item
        failure: Optional[BaseException] = None
        returned: Any = None
        try:
            if not permitted:
                # Taken by a blocking POP without a permit: wait for one
                # (0 once stopping: leased to us, it is handled anyway).
                permitted = await self._permits.acquire(1) > 0
            if delivery.lost:
                # Over while it waited for a permit: not started at all.
                failure = asyncio.CancelledError()
            elif self._async_handler:
                returned, failure = await self._run_cancellable(item, self.handler(delivery))
            else:
                returned = await asyncio.to_thread(self.handler, delivery)
                if inspect.isawaitable(returned):
                    returned, failure = await self._run_cancellable(item, returned)
        except Exception as e:
            failure = e
            handler_failed(delivery, e)
        finally:
            self._beating.pop(key, None)
            # The handler is done: its permit goes to the next POP while the
            # ACK or NACK is on its way.
            if permitted:
                self._permits.release(1)
        result: Optional[bytes] = None
        if failure is None and returned is not None:
            result, failure = handler_result(delivery, returned)
        if batched(delivery, failure):
            self._ackers[id(part)].add(delivery, result)
            return
        await self._settled(delivery, await drive(part.client, settle(part, delivery, failure, result)))

    async def _run_cancellable(
        self, item: List[Any], handler: Awaitable[Any]
    ) -> Tuple[Any, Optional[BaseException]]:
        """Awaits a handler that the heartbeat may cancel (when its delivery
        is over): (what it returned, None), or (None, that cancellation);
        any other cancellation goes on."""
        item[4] = True
        try:
            returned = await handler
        except asyncio.CancelledError as e:
            if not item[5]:
                raise
            return None, e
        finally:
            item[4] = False
            if item[5]:
                uncancel = getattr(item[3], "uncancel", None)  # Python 3.11+
                if uncancel is not None:
                    uncancel()
        return returned, None

    async def _settled(self, delivery: Delivery, outcome: Outcome) -> None:
        result = self._report(delivery, outcome)
        if inspect.isawaitable(result):
            try:
                await result
            except Exception:
                log.exception("dq: on_settled raised")
