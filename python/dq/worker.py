"""The blocking Worker: `concurrency` + one thread per poller (a DQ.POP
queue, or a DQ.MPOP group) that each run handlers and take turns at
polling, a heartbeat thread, an acker thread that sends the ACKs of the
deliveries that finished since its last round trip in one DQ.ACK per
queue (their results in one DQ.DONE), FIFO-fair permits.

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
after thread until each has its own.

What the threads decide is dq/_core/worker.py's, shared with
dq.asyncio.Worker: the arguments, each POP turn, the heartbeat's TOUCH,
how a handler's outcome is settled and what an ACK batch's reply means."""

from __future__ import annotations

import _thread
import logging
import signal
import threading
import time
from collections import deque
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

from ._core.records import Delivery, Outcome
from ._core.worker import (
    Finished, Poller, WorkerCore, batched, batches, finish_batch, handler_failed, handler_result, settle,
)
from ._io import drive
from .queue import Queue
from .sharded import ShardedQueue

log = logging.getLogger("dq")

Gate = Any  # a held _thread lock: its owner sleeps acquiring it again, a waker releases it

# One job: the queue it came from, the delivery, its heartbeat key, whether
# it holds a permit.
Job = Tuple[Queue, Delivery, int, bool]


def _gate() -> Gate:
    gate = _thread.allocate_lock()
    gate.acquire()
    return gate


# A poll's outcome: the poller, the queue taken from (None: nothing taken),
# the deliveries, the permits they hold.
Polled = Tuple[Poller[Queue], Optional[Queue], List[Delivery], int]


class _State:
    """The worker's shared state, under `lock`:

    - the jobs, run in arrival order, and the sleeping threads;
    - the permits (`concurrency` of them); a job taken without one (by a
      blocking POP among several pollers) waits for one, first come, first
      served, before any new POP takes the free ones;
    - which poller is polling, and whose turn is next;
    - the running deliveries the heartbeat renews;
    - the ACKs (and results) waiting for the acker, one list per queue."""

    def __init__(self, concurrency: int, groups: List[Poller[Queue]], share: int) -> None:
        self.lock = threading.Lock()
        self.jobs: Deque[Job] = deque()
        self.sleeping: List[Gate] = []  # each sleeping thread's gate
        self.free_threads = 0  # awake, neither running a job nor polling
        self.closed = False  # no more POPs: threads end once no job is left
        self.permits = concurrency
        self.waiters: Deque[List[Any]] = deque()  # [gate, permits granted]
        self.stopping = False
        self.groups = groups
        self.share = share  # the permits one poll takes at most (WorkerCore._share)
        self.next_group = 0
        self.polling = 0
        self.polls_over = threading.Event()  # stopping, and no thread polls
        self.beating: Dict[int, List[Any]] = {}  # key -> [delivery, queue, next touch]
        self.next_key = 0
        self.pending: Dict[int, Tuple[Queue, List[Finished]]] = {}  # id(queue) -> ACKs (DONEs) to send
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

    def _poll_turn(self) -> Tuple[Optional[Poller[Queue]], int]:
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

    def _ack(self, part: Queue, finished: Finished, wake: List[Gate]) -> None:
        """(Lock held.) Queues a delivery's ACK (DONE, with its result);
        wakes the acker if it sleeps."""
        entry = self.pending.get(id(part))
        if entry is None:
            self.pending[id(part)] = (part, [finished])
        else:
            entry[1].append(finished)
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
    renewal (WorkerCore._renew, which on STALE learns why and tells the
    handler). It looks four times per renewal period over the running
    deliveries (at most concurrency + pollers), so adding and removing one
    costs a dict operation, no wakeup."""

    def __init__(self, state: _State, worker: Worker) -> None:
        super().__init__(name="dq-heartbeat", daemon=True)
        self._state = state
        self._renew = worker._renew
        self.every = worker.lease_ms / 3000
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

        def forget() -> bool:
            with state.lock:
                return state.beating.pop(key, None) is not None

        if drive(part.client, self._renew(part, delivery, forget)) != "renewed":
            return  # a failed TOUCH is tried again at the next look
        with state.lock:
            item = state.beating.get(key)
            if item is not None:
                item[2] = time.monotonic() + self.every


class _Acker(threading.Thread):
    """Sends the ACKs: the deliveries that finished while the last DQ.ACK was
    on its way go in the next one, one per queue (those with a result in
    one DQ.DONE, sent right after), sent the moment the previous one is
    answered; never held back by a timer."""

    def __init__(self, state: _State, settled: Callable[[Delivery, Outcome], None]) -> None:
        super().__init__(name="dq-acker", daemon=True)
        self._state = state
        self._settled = settled

    def run(self) -> None:
        state = self._state
        while True:
            with state.lock:
                pending = state.pending
                if not pending:
                    if state.acker_done:
                        return
                    state.acker_idle = True
                else:
                    state.pending = {}
            if not pending:
                state.acker_gate.acquire()  # released by whoever set acker_idle back to False
                continue
            for part, finished in pending.values():
                self._send(part, finished)

    def _send(self, part: Queue, finished: List[Finished]) -> None:
        settled = self._settled
        for batch in batches(finished):
            outcome = drive(part.client, finish_batch(part, batch))  # frozen: one for the batch
            for d, _ in batch:
                settled(d, outcome)


class Worker(WorkerCore[Queue, ShardedQueue]):
    """Runs `handler(delivery)` for the messages of one or more queues.

    Returns None -> DQ.ACK (the ACKs of deliveries that finished since
    the last round trip go in one DQ.ACK per queue). Returns a result, str
    or bytes -> DQ.DONE, which keeps it while a retention (RETAIN) holds
    the message (the results of a round trip go in one DQ.DONE per queue);
    anything else is no result: dead now, saying so. Raises Permanent ->
    DQ.NACK DEAD. Raises Retry(delay_ms) -> DQ.NACK DELAY. Anything else ->
    DQ.NACK with ERROR "<ExceptionType>: <message>" (the backoff decides).
    Every NACK and TOUCH carries ATTEMPT. `on_settled(delivery, outcome)`
    (optional) is called after each delivery was settled: for a NACK in
    the handler's thread, for an ACK in the worker's acker thread (keep it
    short: the next ACKs wait for it). The handler reports its progress
    with `delivery.progress(value)`."""

    _queue_class = Queue
    _sharded_class = ShardedQueue

    def _prepare(self) -> None:
        self._reporters = {id(part): self._reporter(part) for part in self._parts}
        self._stop = threading.Event()
        self._state = _State(self.concurrency, self._pollers, self._share)
        self._started = False
        self._lock = threading.Lock()

    def stop(self) -> None:
        """Asks the worker to stop (from any thread or a signal handler): no
        new POP; running handlers finish and are settled; run() returns."""
        self._stopping = True
        self._stop.set()
        self._state.stop()

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
        heartbeat = _Heartbeat(state, self)
        heartbeat.start()
        acker = _Acker(state, self._report)
        acker.start()
        # A thread for each handler and one for each poller: when every
        # poller waits in a blocking POP, `concurrency` handlers still run.
        threads = [threading.Thread(target=self._serve, args=(heartbeat.every,), name=f"dq-worker-{i}", daemon=True)
                   for i in range(self.concurrency + len(self._pollers))]
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

    def _reporter(self, part: Queue) -> Callable[[Delivery, Any], int]:
        """Delivery.progress for the deliveries of one queue: its TOUCH,
        sent from the handler's thread."""

        def report(delivery: Delivery, value: Any) -> int:
            return drive(part.client, self._progress_plan(part, delivery, value))

        return report

    def _serve(self, every: float) -> None:
        """A worker thread: polls when a POP is due and it is free, else
        runs the next job, else sleeps; until the worker shuts down and no
        job is left. Settling the job it ran or handing over the batch it
        polled, then choosing what to do next, is one lock acquisition."""
        state = self._state
        lock, jobs = state.lock, state.jobs
        handler = self.handler
        gate = _gate()
        finished: Optional[Tuple[Job, Optional[bytes]]] = None  # a job that succeeded and its result, to settle
        polled: Optional[Polled] = None  # a poll's outcome, to hand over
        busy = False  # this thread ran a job or polled: it is free again
        while True:
            wake: List[Gate] = []
            job: Optional[Job] = None
            sleep = False
            with lock:
                if finished is not None:
                    (part, delivery, key, permitted), kept = finished
                    finished = None
                    state.beating.pop(key, None)
                    # The handler is done: its permit goes to the next POP
                    # while the ACK is on its way.
                    if permitted:
                        state._release(1, wake)
                    state._ack(part, (delivery, kept), wake)
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
                job = (part, delivery, key, permitted)
            failure: Optional[BaseException] = None
            result: Optional[bytes] = None
            try:
                returned = handler(delivery)
            except BaseException as e:  # noqa: B036 - a handler's SystemExit must not kill the thread
                handler_failed(delivery, e)
                failure = e
            else:
                if returned is not None:
                    result, failure = handler_result(delivery, returned)
            if batched(delivery, failure):
                finished = (job, result)
            else:
                self._settle_alone(part, delivery, key, permitted, failure, result)

    def _poll(self, group: Poller[Queue], n: int) -> Polled:
        """One turn of a poller holding n permits (WorkerCore._take): (the
        poller, the queue taken from, the deliveries, the permits they hold)."""
        state = self._state
        if n < state.share:
            # Handlers finishing now free their permits too: let them run,
            # then one POP asks for every free permit.
            time.sleep(0)
            n += state.take_more(state.share - n)
        if self._stop.is_set():
            return group, None, [], n
        part, batch, n, pause = drive(group.client, self._take(group, n, state.release))
        if pause:
            self._stop.wait(pause)
        if part is not None:
            reporter = self._reporters[id(part)]
            for delivery in batch:
                delivery._reporter = reporter
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
                      failure: Optional[BaseException], result: Optional[bytes]) -> None:
        """A delivery that failed or is over: its heartbeat ends, its permit
        goes back, then its NACK (or its lone late ACK or DONE, or nothing)
        from this thread."""
        state = self._state
        wake: List[Gate] = []
        with state.lock:
            state.beating.pop(key, None)
            if permitted:
                state._release(1, wake)
            state._wake_needed(wake)  # a POP may be due while this thread sends the NACK
        for g in wake:
            g.release()
        self._report(delivery, drive(part.client, settle(part, delivery, failure, result)))

