"""dq.asyncio.Worker: asyncio tasks — one per poller (a DQ.POP queue, or a
DQ.MPOP group), one per running handler, one heartbeat task, a flusher task
per queue that sends the ACKs of the deliveries that finished since its
last round trip in one DQ.ACK — and an asyncio FIFO permit queue."""

from __future__ import annotations

import asyncio
import inspect
import logging
import signal
import threading
from collections import deque
from typing import Any, Awaitable, Callable, Deque, Dict, List, Optional, Sequence, Set, Tuple, Union

from .._core import queue as calls, worker as decide
from .._core.errors import Permanent, Retry, StaleDelivery
from .._core.records import Delivery, Outcome
from ._io import drive, execute
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


Handler = Callable[[Delivery], Any]
OnSettled = Callable[[Delivery, Outcome], Any]


class _Acker:
    """One queue's ACKs: the deliveries that finished while the last DQ.ACK
    was on its way go in the next one, sent the moment the previous one is
    answered (or, when none is on its way, once the callbacks ready in this
    turn of the loop have run); never held back by a timer."""

    def __init__(self, part: "Queue", settled: Callable[[Delivery, Outcome], Awaitable[None]]) -> None:
        self._part = part
        self._settled = settled
        self._pending: List[Delivery] = []
        self._busy = False
        self._task: Optional["asyncio.Future[None]"] = None
        self.idle = asyncio.Event()
        self.idle.set()

    def add(self, delivery: Delivery) -> None:
        self._pending.append(delivery)
        if not self._busy:
            self._busy = True
            self.idle.clear()
            asyncio.get_running_loop().call_soon(self._start)

    def _start(self) -> None:
        self._task = asyncio.ensure_future(self._flush())

    async def _flush(self) -> None:
        part = self._part
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                count = await execute(part.client, calls.worker_ack_call(part, batch))
            except Exception as e:
                log.error("dq: DQ.ACK of %d id(s) in %s failed: %s (they come back after their lease)",
                          len(batch), part.name, e)
                outcomes = [Outcome("ack", "unsettled", None, e)] * len(batch)
            else:
                state = decide.ack_batch_state(count, len(batch))
                if state != "acked":
                    log.warning("dq: DQ.ACK of %d id(s) in %s counted %d: the rest were no longer in flight",
                                len(batch), part.name, count)
                outcomes = [Outcome("ack", state)] * len(batch)
            for d, outcome in zip(batch, outcomes):
                await self._settled(d, outcome)
        self._busy = False
        self.idle.set()


class Worker:
    """Runs `handler(delivery)` for the messages of one or more queues, on
    asyncio tasks. A coroutine function handler is awaited; a plain
    function runs in a thread (asyncio.to_thread) so it cannot block the
    loop. Settles as dq.Worker does (the ACKs of deliveries that finished
    since the last round trip in one DQ.ACK per queue). `on_settled(delivery,
    outcome)` may be a function or a coroutine function."""

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
        decide.check_worker_args(concurrency, lease_ms, block_ms)
        self._groups: List[List[Queue]] = decide.worker_groups(queues, Queue, ShardedQueue)
        self._parts: List[Queue] = [part for group in self._groups for part in group]
        for part in self._parts:
            decide.check_pool(part.client, len(self._groups) + concurrency + 2, block_ms)
        self.handler = handler
        self._async_handler = inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
            getattr(handler, "__call__", None)
        )
        self.concurrency = concurrency
        self.lease_ms = lease_ms
        self.block_ms = block_ms
        self.handle_signals = handle_signals
        self.on_settled = on_settled
        self._stopping = False
        self._permits = _Permits(concurrency)
        self._share = max(1, concurrency // len(self._groups))  # see dq.Worker
        self._tasks: Set["asyncio.Task[None]"] = set()
        self._started = False
        self._wake: Optional[asyncio.Event] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        # The running deliveries the heartbeat renews: id(delivery) -> [delivery, part, next touch].
        self._beating: Dict[int, List[Any]] = {}
        self._ackers = {id(part): _Acker(part, self._settled) for part in self._parts}
        self._touches: Set["asyncio.Future[None]"] = set()

    @property
    def queue_names(self) -> List[str]:
        return [p.name for p in self._parts]

    @property
    def pollers(self) -> List[List[str]]:
        """The queues each poller takes from (see dq.Worker.pollers)."""
        return [[p.name for p in group] for group in self._groups]

    @property
    def stopping(self) -> bool:
        return self._stopping

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
            await asyncio.gather(*[self._poll(group) for group in self._groups])
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

    def _taker(self, group: List[Queue]) -> Callable[[int, Optional[int]], Awaitable[Tuple[Queue, List[Delivery]]]]:
        """take(count, block_ms) -> (the queue taken from, its deliveries):
        DQ.POP for one queue, DQ.MPOP (in the group's order) for several."""
        lease_ms = self.lease_ms
        if len(group) == 1:
            part = group[0]

            async def pop(count: int, block_ms: Optional[int]) -> Tuple[Queue, List[Delivery]]:
                return part, await execute(part.client, calls.pop_call(part, count, block_ms, lease_ms))

            return pop
        client = group[0].client

        async def mpop(count: int, block_ms: Optional[int]) -> Tuple[Queue, List[Delivery]]:
            taken, batch = await execute(client, calls.mpop_call(group, count, block_ms, lease_ms))
            return taken or group[0], batch

        return mpop

    async def _poll(self, group: List[Queue]) -> None:
        take = self._taker(group)
        where = "+".join(p.name for p in group)
        pause = 0.1
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
            try:
                # What is ready now, up to this poller's permits.
                part, batch = await take(n, None)
                if not batch and not self._stopping:
                    # Nothing ready. The only poller keeps its permits and
                    # waits for as many messages: a burst that falls due
                    # comes in one reply. Among several, it gives them back
                    # (another queue may have work) and waits for one message
                    # holding none; that one then waits for a permit, its
                    # lease kept alive by the heartbeat.
                    if len(self._groups) > 1:
                        self._permits.release(n)
                        n = 0
                    part, batch = await take(max(n, 1), self.block_ms)
            except Exception as e:
                self._permits.release(n)
                log.error("dq: POP from %s failed: %s (retrying in %.1f s)", where, e, pause)
                await self._pause(pause)
                pause = min(pause * 2, 5.0)
                continue
            pause = 0.1
            if len(batch) < n:
                self._permits.release(n - len(batch))
            # Deliveries taken after a stop request are handled all the same.
            for i, delivery in enumerate(batch):
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
        try:
            await drive(part.client, Queue.touch.plan(part, delivery.id, lease_ms=self.lease_ms,
                                                      attempt=delivery.attempt))
        except StaleDelivery:
            if self._beating.pop(key, None) is None:
                return  # settled meanwhile: the STALE is our own ACK/NACK's doing
            try:
                reason = decide.over_reason(await drive(part.client, Queue.get.plan(part, delivery.id)))
            except Exception as e:
                log.warning("dq: DQ.GET %s in %s failed: %s", delivery.id, delivery.queue, e)
                reason = "lost"
            decide.mark_over(delivery, reason)
            log.warning(decide.OVER_LOG[reason], delivery.id, delivery.attempt, delivery.queue)
            # A coroutine handler is cancelled where it waits (item[4]: it
            # runs now). A function in a thread cannot be: it has the event.
            task = item[3]
            if item[4] and not task.done():
                item[5] = True
                task.cancel()
            return
        except Exception as e:
            log.warning("dq: TOUCH %s in %s failed: %s", delivery.id, delivery.queue, e)
        item[2] = asyncio.get_running_loop().time() + every

    async def _handle(self, part: Queue, delivery: Delivery, permitted: bool = True) -> None:
        key = id(delivery)
        # [delivery, part, next touch, this task, a coroutine handler runs, the heartbeat cancelled it]
        item = [delivery, part, asyncio.get_running_loop().time() + self.lease_ms / 3000, asyncio.current_task(),
                False, False]
        self._beating[key] = item
        failure: Optional[BaseException] = None
        try:
            if not permitted:
                # Taken by a blocking POP without a permit: wait for one
                # (0 once stopping: leased to us, it is handled anyway).
                permitted = await self._permits.acquire(1) > 0
            if delivery.lost:
                # Over while it waited for a permit: not started at all.
                failure = asyncio.CancelledError()
            elif self._async_handler:
                failure = await self._run_cancellable(item, self.handler(delivery))
            else:
                result = await asyncio.to_thread(self.handler, delivery)
                if inspect.isawaitable(result):
                    failure = await self._run_cancellable(item, result)
        except Exception as e:
            failure = e
            if not isinstance(e, (Permanent, Retry)):
                log.warning("dq: handler failed on %s attempt %d in %s: %s: %s",
                            delivery.id, delivery.attempt, delivery.queue, type(e).__name__, e)
        finally:
            self._beating.pop(key, None)
            # The handler is done: its permit goes to the next POP while the
            # ACK or NACK is on its way.
            if permitted:
                self._permits.release(1)
        if failure is None and not delivery.lost:
            self._ackers[id(part)].add(delivery)
            return
        await self._settled(delivery, await self._settle(part, delivery, failure))

    async def _run_cancellable(self, item: List[Any], handler: Awaitable[Any]) -> Optional[BaseException]:
        """Awaits a handler that the heartbeat may cancel (when its delivery
        is over); that cancellation is returned as its failure, any other
        goes on."""
        item[4] = True
        try:
            await handler
        except asyncio.CancelledError as e:
            if not item[5]:
                raise
            return e
        finally:
            item[4] = False
            if item[5]:
                uncancel = getattr(item[3], "uncancel", None)  # Python 3.11+
                if uncancel is not None:
                    uncancel()
        return None

    async def _settled(self, delivery: Delivery, outcome: Outcome) -> None:
        if self.on_settled is None:
            return
        try:
            result = self.on_settled(delivery, outcome)
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("dq: on_settled raised")

    async def _settle(self, part: Queue, delivery: Delivery, failure: Optional[BaseException]) -> Outcome:
        action, plan, error = decide.settle_call(part, delivery, failure)
        if plan is None:
            log.warning("dq: not settling %s attempt %d in %s: %s", delivery.id, delivery.attempt, delivery.queue,
                        "it was cancelled" if delivery.lost_reason == "cancelled" else "its lease was lost")
            return Outcome(action, decide.unsent_state(delivery), error, failure)
        try:
            reply = await drive(part.client, plan)
        except StaleDelivery as e:
            log.warning("dq: %s", e)
            return Outcome(action, "stale", error, e)
        except Exception as e:
            log.error("dq: settling %s attempt %d in %s failed: %s (it comes back after its lease)",
                      delivery.id, delivery.attempt, delivery.queue, e)
            return Outcome(action, "unsettled", error, e)
        return Outcome(action, decide.settle_state(action, reply), error, failure)
