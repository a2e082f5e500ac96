"""The blocking Worker: `concurrency` + one thread per poller (a DQ.POP
queue, or a DQ.MPOP group) that each run handlers and take turns at
polling, a heartbeat thread, an acker thread that sends the ACKs of the
deliveries that finished since its last round trip in one DQ.ACK per
queue, FIFO-fair permits.

With the GIL, a threaded worker's cost is in passing control from thread
to thread: each wakeup is a context switch and a wait for the GIL. So no
thread is dedicated to polling: whichever thread finds permits free and
no job waiting polls (a handler thread that just finished the last job of
a batch polls the next one itself, with no wakeup), then runs the jobs of
its batch that no other thread is free for; a thread that takes a job
while others wait and sees no other thread free wakes one. Everything the
threads share is in one `_State` under one lock, so that settling a job,
taking the next one or deciding to poll is one lock acquisition. A burst
of quick jobs is then run much as a plain POP/handle/ACK loop would run
it, the ACKs sent alongside by the acker; jobs that block wake thread
after thread until each has its own."""

from __future__ import annotations

import _thread
import logging
import signal
import threading
import time
from collections import deque
from typing import Any, Callable, Deque, Dict, List, Optional, Sequence, Tuple, Union

from ._core import errors, queue as calls, worker as decide
from ._core.records import Delivery, Outcome
from ._io import drive, execute
from .queue import Queue
from .sharded import ShardedQueue

log = logging.getLogger("dq")

Handler = Callable[[Delivery], Any]
OnSettled = Callable[[Delivery, Outcome], Any]
Gate = Any  # a held _thread lock: its owner sleeps acquiring it again, a waker releases it

# One job: the queue it came from, the delivery, its heartbeat key, whether
# it holds a permit.
Job = Tuple[Queue, Delivery, int, bool]


def _gate() -> Gate:
    gate = _thread.allocate_lock()
    gate.acquire()
    return gate


class _Group:
    """One poller: the queues one take() serves, and whether a thread is
    polling them now (the lock's)."""

    def __init__(self, parts: List[Queue], take: Callable[[int, Optional[int]], Tuple[Queue, List[Delivery]]]) -> None:
        self.parts = parts
        self.take = take
        self.where = "+".join(p.name for p in parts)
        self.polling = False
        self.pause = 0.1  # after a failed POP, doubling up to 5 s


# A poll's outcome: the poller, the queue taken from (None: nothing taken),
# the deliveries, the permits they hold.
Polled = Tuple[_Group, Optional[Queue], List[Delivery], int]


class _State:
    """The worker's shared state, under `lock`:

    - the jobs, run in arrival order, and the sleeping threads;
    - the permits (`concurrency` of them); a job taken without one (by a
      blocking POP among several pollers) waits for one, first come, first
      served, before any new POP takes the free ones;
    - which poller is polling, and whose turn is next;
    - the running deliveries the heartbeat renews;
    - the ACKs waiting for the acker, one list per queue."""

    def __init__(self, concurrency: int, groups: List[_Group]) -> None:
        self.lock = threading.Lock()
        self.jobs: Deque[Job] = deque()
        self.sleeping: List[Gate] = []  # each sleeping thread's gate
        self.free_threads = 0  # awake, neither running a job nor polling
        self.closed = False  # no more POPs: threads end once no job is left
        self.permits = concurrency
        self.waiters: Deque[List[Any]] = deque()  # [gate, permits granted]
        self.stopping = False
        self.groups = groups
        # A poll takes at most its share of the free permits, so that one
        # poller blocked on an empty queue does not hold them all.
        self.share = max(1, concurrency // len(groups))
        self.next_group = 0
        self.polling = 0
        self.polls_over = threading.Event()  # stopping, and no thread polls
        self.beating: Dict[int, List[Any]] = {}  # key -> [delivery, queue, next touch]
        self.next_key = 0
        self.pending: Dict[int, Tuple[Queue, List[Delivery]]] = {}  # id(queue) -> ACKs to send
        self.acker_gate = _gate()
        self.acker_idle = False
        self.acker_done = False

    # --- permits ---------------------------------------------------------------------

    def acquire_one(self) -> bool:
        """Waits for a permit (after those who wait already); False once
        stopping."""
        with self.lock:
            if self.stopping:
                return False
            if self.permits and not self.waiters:
                self.permits -= 1
                return True
            gate = _gate()
            waiter: List[Any] = [gate, 0]
            self.waiters.append(waiter)
        gate.acquire()
        return bool(waiter[1])

    def _release(self, n: int, wake: List[Gate]) -> None:
        """(Lock held.) Gives n permits back: to the waiters first."""
        while n and self.waiters:
            waiter = self.waiters.popleft()
            waiter[1] = 1
            wake.append(waiter[0])
            n -= 1
        self.permits += n

    def release(self, n: int) -> None:
        wake: List[Gate] = []
        with self.lock:
            self._release(n, wake)
            self._wake_needed(wake)
        for gate in wake:
            gate.release()

    def take_more(self, most: int) -> int:
        """Up to `most` more free permits for a poll under way (none while
        jobs wait for one)."""
        with self.lock:
            if self.stopping or self.waiters:
                return 0
            n = min(self.permits, most)
            self.permits -= n
            return n

    # --- turns -------------------------------------------------------------------------

    def _poll_turn(self) -> Tuple[Optional[_Group], int]:
        """(Lock held.) A poller whose turn it is and the permits it takes,
        when a POP is due: not stopping, free permits that no job waits for,
        and either no job waiting for a thread or a whole share free (a job
        waiting for a thread goes first: a POP only adds more)."""
        permits = self.permits
        if self.stopping or not permits or self.waiters or (self.jobs and permits < self.share):
            return None, 0
        groups = self.groups
        count = len(groups)
        for i in range(count):
            group = groups[(self.next_group + i) % count]
            if not group.polling:
                self.next_group = (self.next_group + i + 1) % count
                n = min(permits, self.share)
                self.permits = permits - n
                group.polling = True
                self.polling += 1
                return group, n
        return None, 0

    def _wake_needed(self, wake: List[Gate]) -> None:
        """(Lock held.) Wakes a sleeping thread when there is work — a job
        waiting, or a POP due — and no awake thread is free to take it."""
        if self.free_threads == 0 and self.sleeping and (self.jobs or self._pollable()):
            self.free_threads += 1
            wake.append(self.sleeping.pop())

    def _pollable(self) -> bool:
        permits = self.permits
        if self.stopping or not permits or self.waiters or (self.jobs and permits < self.share):
            return False
        return any(not g.polling for g in self.groups)

    def stop(self) -> None:
        """No new POP; every job waiting for a permit runs without one."""
        with self.lock:
            self.stopping = True
            waiters, self.waiters = self.waiters, deque()
            if self.polling == 0:
                self.polls_over.set()
        for waiter in waiters:
            waiter[0].release()

    def shutdown(self) -> None:
        """No more POPs: the threads run what is queued, then end."""
        with self.lock:
            self.closed = True
            sleeping, self.sleeping = self.sleeping, []
            self.free_threads += len(sleeping)
        for gate in sleeping:
            gate.release()

    # --- ACKs -------------------------------------------------------------------------

    def _ack(self, part: Queue, delivery: Delivery, wake: List[Gate]) -> None:
        """(Lock held.) Queues a delivery's ACK; wakes the acker if it sleeps."""
        entry = self.pending.get(id(part))
        if entry is None:
            self.pending[id(part)] = (part, [delivery])
        else:
            entry[1].append(delivery)
        if self.acker_idle:
            self.acker_idle = False
            wake.append(self.acker_gate)

    def finish_acks(self) -> None:
        """The acker sends what is pending, then ends."""
        with self.lock:
            self.acker_done = True
            idle, self.acker_idle = self.acker_idle, False
        if idle:
            self.acker_gate.release()


class _Heartbeat(threading.Thread):
    """TOUCHes each running delivery a third of a lease after its last
    renewal; on STALE, learns why (decide.over_reason) and tells the handler. It
    looks four times per renewal period over the running deliveries (at
    most concurrency + pollers), so adding and removing one costs a dict
    operation, no wakeup."""

    def __init__(self, state: _State, lease_ms: int) -> None:
        super().__init__(name="dq-heartbeat", daemon=True)
        self._state = state
        self._lease_ms = lease_ms
        self.every = lease_ms / 3000
        self._done = threading.Event()

    def finish(self) -> None:
        self._done.set()

    def run(self) -> None:
        state = self._state
        while not self._done.wait(self.every / 4):
            now = time.monotonic()
            with state.lock:
                due = [(k, item[0], item[1]) for k, item in state.beating.items() if item[2] <= now]
            for key, delivery, part in due:
                self._touch(key, delivery, part)

    def _touch(self, key: int, delivery: Delivery, part: Queue) -> None:
        state = self._state
        try:
            drive(part.client, Queue.touch.plan(part, delivery.id, lease_ms=self._lease_ms, attempt=delivery.attempt))
        except errors.StaleDelivery:
            with state.lock:
                if state.beating.pop(key, None) is None:
                    return  # settled meanwhile: the STALE is our own ACK/NACK's doing
            reason = why_over(part, delivery)
            decide.mark_over(delivery, reason)
            log.warning(decide.OVER_LOG[reason], delivery.id, delivery.attempt, delivery.queue)
            return
        except Exception as e:  # connection trouble: try again at the next look
            log.warning("dq: TOUCH %s in %s failed: %s", delivery.id, delivery.queue, e)
            return
        with state.lock:
            item = state.beating.get(key)
            if item is not None:
                item[2] = time.monotonic() + self.every


def why_over(part: Queue, delivery: Delivery) -> str:
    """Why a delivery's TOUCH was STALE (decide.over_reason), by DQ.GET."""
    try:
        record = drive(part.client, Queue.get.plan(part, delivery.id))
    except Exception as e:
        log.warning("dq: DQ.GET %s in %s failed: %s", delivery.id, delivery.queue, e)
        return "lost"
    return decide.over_reason(record)


class _Acker(threading.Thread):
    """Sends the ACKs: the deliveries that finished while the last DQ.ACK was
    on its way go in the next one, one per queue, sent the moment the
    previous one is answered; never held back by a timer."""

    def __init__(self, state: _State, settled: Callable[[Delivery, Outcome], None]) -> None:
        super().__init__(name="dq-acker", daemon=True)
        self._state = state
        self._settled = settled

    def run(self) -> None:
        state = self._state
        while True:
            with state.lock:
                batches = state.pending
                if not batches:
                    if state.acker_done:
                        return
                    state.acker_idle = True
                else:
                    state.pending = {}
            if not batches:
                state.acker_gate.acquire()  # released by whoever set acker_idle back to False
                continue
            for part, deliveries in batches.values():
                self._send(part, deliveries)

    def _send(self, part: Queue, deliveries: List[Delivery]) -> None:
        try:
            count = execute(part.client, calls.worker_ack_call(part, deliveries))
        except Exception as e:
            log.error("dq: DQ.ACK of %d id(s) in %s failed: %s (they come back after their lease)",
                      len(deliveries), part.name, e)
            for d in deliveries:
                self._settled(d, Outcome("ack", "unsettled", None, e))
            return
        state = decide.ack_batch_state(count, len(deliveries))
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
        decide.check_worker_args(concurrency, lease_ms, block_ms)
        self._groups: List[List[Queue]] = decide.worker_groups(queues, Queue, ShardedQueue)
        self._parts: List[Queue] = [part for group in self._groups for part in group]
        for part in self._parts:
            decide.check_pool(part.client, len(self._groups) + concurrency + 2, block_ms)
        self.handler = handler
        self.concurrency = concurrency
        self.lease_ms = lease_ms
        self.block_ms = block_ms
        self.handle_signals = handle_signals
        self.on_settled = on_settled
        self._stop = threading.Event()
        self._state = _State(concurrency, [_Group(g, self._taker(g)) for g in self._groups])
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
        self._state.stop()

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
        state = self._state
        heartbeat = _Heartbeat(state, self.lease_ms)
        heartbeat.start()
        acker = _Acker(state, self._settled)
        acker.start()
        # A thread for each handler and one for each poller: when every
        # poller waits in a blocking POP, `concurrency` handlers still run.
        threads = [threading.Thread(target=self._serve, args=(heartbeat.every,), name=f"dq-worker-{i}", daemon=True)
                   for i in range(self.concurrency + len(self._groups))]
        with state.lock:
            state.free_threads = len(threads)
        log.info("dq: worker started on %d queue(s), concurrency %d", len(self._parts), self.concurrency)
        try:
            for t in threads:
                t.start()
            while not state.polls_over.wait(0.2):
                pass  # short waits let the main thread run signal handlers
        finally:
            self.stop()
            state.polls_over.wait()
            state.shutdown()
            for t in threads:
                t.join()
            state.finish_acks()
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

            def pop(count: int, block_ms: Optional[int]) -> Tuple[Queue, List[Delivery]]:
                return part, execute(part.client, calls.pop_call(part, count, block_ms, lease_ms))

            return pop
        client = group[0].client

        def mpop(count: int, block_ms: Optional[int]) -> Tuple[Queue, List[Delivery]]:
            taken, batch = execute(client, calls.mpop_call(group, count, block_ms, lease_ms))
            return taken or group[0], batch

        return mpop

    def _serve(self, every: float) -> None:
        """A worker thread: polls when a POP is due and it is free, else
        runs the next job, else sleeps; until the worker shuts down and no
        job is left. Settling the job it ran or handing over the batch it
        polled, then choosing what to do next, is one lock acquisition."""
        state = self._state
        lock, jobs = state.lock, state.jobs
        handler = self.handler
        gate = _gate()
        finished: Optional[Job] = None  # a job that succeeded, to settle
        polled: Optional[Polled] = None  # a poll's outcome, to hand over
        busy = False  # this thread ran a job or polled: it is free again
        while True:
            wake: List[Gate] = []
            job: Optional[Job] = None
            sleep = False
            with lock:
                if finished is not None:
                    part, delivery, key, permitted = finished
                    finished = None
                    state.beating.pop(key, None)
                    # The handler is done: its permit goes to the next POP
                    # while the ACK is on its way.
                    if permitted:
                        state._release(1, wake)
                    state._ack(part, delivery, wake)
                if polled is not None:
                    self._hand_over(polled, time.monotonic() + every, wake)
                    polled = None
                if busy:
                    state.free_threads += 1
                    busy = False
                group, n = state._poll_turn()
                if group is not None or jobs:
                    if group is None:
                        job = jobs.popleft()
                    state.free_threads -= 1
                    busy = True
                elif not state.closed:
                    state.free_threads -= 1
                    state.sleeping.append(gate)
                    sleep = True
                state._wake_needed(wake)
            for g in wake:
                g.release()
            if group is not None:
                polled = self._poll(group, n)
                continue
            if job is None:
                if not sleep:
                    return
                gate.acquire()  # released by a waker (who counted this thread free) or shutdown()
                continue
            part, delivery, key, permitted = job
            if not permitted:
                # Taken by a blocking POP without a permit: wait for one (none
                # once stopping: leased to us, it is handled all the same).
                permitted = state.acquire_one()
            try:
                handler(delivery)
            except BaseException as e:  # noqa: B036 - a handler's SystemExit must not kill the thread
                if not isinstance(e, (errors.Permanent, errors.Retry)):
                    log.warning("dq: handler failed on %s attempt %d in %s: %s: %s",
                                delivery.id, delivery.attempt, delivery.queue, type(e).__name__, e)
                self._settle_alone(part, delivery, key, permitted, e)
                continue
            if delivery.lost:
                self._settle_alone(part, delivery, key, permitted, None)
                continue
            finished = (part, delivery, key, permitted)

    def _poll(self, group: _Group, n: int) -> Polled:
        """One turn of a poller holding n permits: (the poller, the queue
        taken from, the deliveries, the permits they hold)."""
        state = self._state
        if n < state.share:
            # Handlers finishing now free their permits too: let them run,
            # then one POP asks for every free permit.
            time.sleep(0)
            n += state.take_more(state.share - n)
        if self._stop.is_set():
            return group, None, [], n
        try:
            # What is ready now, up to the permits held.
            part, batch = group.take(n, None)
            if not batch and not self._stop.is_set():
                # Nothing ready. The only poller keeps its permits and waits
                # for as many messages: a burst that falls due comes in one
                # reply. Among several, it gives them back (another queue
                # may have work) and waits for one message holding none;
                # that one then waits for a permit, its lease kept alive by
                # the heartbeat.
                if len(state.groups) > 1:
                    state.release(n)
                    n = 0
                part, batch = group.take(max(n, 1), self.block_ms)
        except Exception as e:
            log.error("dq: POP from %s failed: %s (retrying in %.1f s)", group.where, e, group.pause)
            self._stop.wait(group.pause)
            group.pause = min(group.pause * 2, 5.0)
            return group, None, [], n
        group.pause = 0.1
        return group, part, batch, n

    def _hand_over(self, polled: Polled, due: float, wake: List[Gate]) -> None:
        """(Lock held.) A poll's deliveries become jobs, the first n of them
        holding its permits (the rest go back); the poller's turn ends.
        Deliveries taken after a stop request are handled all the same: they
        are leased to us, and finishing them loses nothing."""
        state = self._state
        group, part, batch, n = polled
        if len(batch) < n:
            state._release(n - len(batch), wake)
        if part is not None and batch:
            key = state.next_key
            state.next_key = key + len(batch)
            beating, jobs = state.beating, state.jobs
            for i, delivery in enumerate(batch, key):
                beating[i] = [delivery, part, due]
                jobs.append((part, delivery, i, i - key < n))
        group.polling = False
        state.polling -= 1
        if state.stopping and state.polling == 0:
            state.polls_over.set()

    def _settle_alone(self, part: Queue, delivery: Delivery, key: int, permitted: bool,
                      failure: Optional[BaseException]) -> None:
        """A delivery that failed or is over: its heartbeat ends, its permit
        goes back, then its NACK (or its lone late ACK, or nothing) from
        this thread."""
        state = self._state
        wake: List[Gate] = []
        with state.lock:
            state.beating.pop(key, None)
            if permitted:
                state._release(1, wake)
            state._wake_needed(wake)  # a POP may be due while this thread sends the NACK
        for g in wake:
            g.release()
        self._settled(delivery, self._settle(part, delivery, failure))

    def _settled(self, delivery: Delivery, outcome: Outcome) -> None:
        if self.on_settled is not None:
            try:
                self.on_settled(delivery, outcome)
            except Exception:
                log.exception("dq: on_settled raised")

    def _settle(self, part: Queue, delivery: Delivery, failure: Optional[BaseException]) -> Outcome:
        action, plan, error = decide.settle_call(part, delivery, failure)
        if plan is None:
            log.warning("dq: not settling %s attempt %d in %s: %s", delivery.id, delivery.attempt, delivery.queue,
                        "it was cancelled" if delivery.lost_reason == "cancelled" else "its lease was lost")
            return Outcome(action, decide.unsent_state(delivery), error, failure)
        try:
            reply = drive(part.client, plan)
        except errors.StaleDelivery as e:
            log.warning("dq: %s", e)
            return Outcome(action, "stale", error, e)
        except Exception as e:
            log.error("dq: settling %s attempt %d in %s failed: %s (it comes back after its lease)",
                      delivery.id, delivery.attempt, delivery.queue, e)
            return Outcome(action, "unsettled", error, e)
        return Outcome(action, decide.settle_state(action, reply), error, failure)
