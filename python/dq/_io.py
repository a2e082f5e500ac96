"""How dq runs the plans of dq/_core on a blocking redis-py client (Redis
or RedisCluster): one call after another, a pause by sleeping, the streams
of a Merge on a thread each; and the base class that makes each command of
dq/_core a method that does so."""

from __future__ import annotations

import inspect
import queue
import threading
import time
from typing import Any, Callable, Iterator, List, Optional

import redis.exceptions

from ._core.errors import DqError, translate
from ._core.plans import Blocking, Call, Done, Items, Merge, Plan, Stream, T, advance

Client = Any  # redis.Redis or redis.cluster.RedisCluster


def execute(client: Client, call: Call[T]) -> T:
    """Runs one command; payloads come back as bytes whatever decode_responses says."""
    try:
        if call.node is None:
            reply = client.execute_command(*call.args, NEVER_DECODE=True)
        else:
            reply = client.execute_command(*call.args, target_nodes=call.node, NEVER_DECODE=True)
    except redis.exceptions.ResponseError as e:
        raise translate(e) from e
    return call.parse(reply)


def _resume(client: Client, plan: Any, step: Any) -> Any:
    """Runs a plan's step and resumes the plan with what came of it: its next step."""
    if isinstance(step, float):
        time.sleep(step)
        return advance(plan)
    results: List[Any] = []
    try:
        for call in step:
            try:
                results.append(execute(client, call))
            except DqError as e:
                results.append(e)
    except Exception as e:  # the connection's: the calls after it are not sent
        return advance(plan, error=e)
    return advance(plan, results)


def drive(client: Client, plan: Plan[T]) -> T:
    """Runs a plan to its end: its result."""
    step = advance(plan)
    while not isinstance(step, Done):
        step = _resume(client, plan, step)
    return step.value  # type: ignore[no-any-return]


def iterate(client: Client, stream: Stream[T]) -> Iterator[T]:
    """Runs a stream as its consumer asks for items."""
    for page in _pages(client, stream):
        yield from page


def _pages(client: Client, stream: Stream[T], stop: Optional[threading.Event] = None) -> Iterator[List[T]]:
    """A stream's items, as it hands them out; it ends early, before its
    next call, once `stop` is set."""
    step = advance(stream)
    while not isinstance(step, Done):
        if stop is not None and stop.is_set():
            return
        if isinstance(step, Items):
            yield step.items
            step = advance(stream)
        elif isinstance(step, Merge):
            yield from _merge(client, step.streams)
            step = advance(stream)
        else:
            step = _resume(client, stream, step)


_ENDED = object()  # a merged stream's thread says its stream ended


def _merge(client: Client, streams: List[Stream[T]]) -> Iterator[List[T]]:
    """Runs streams side by side, each on a daemon thread of its own (a
    blocking call of one holds up no other), their pages handed over as
    they come through a queue of at most one page per stream: a thread
    waits while its consumer is behind. Closing the consumer (or an error
    of one stream, raised here) stops them: each thread ends when its call
    in progress returns (a blocking read that ends empty is sent again
    without a page in between: `stop` is seen between calls)."""
    pages: queue.Queue[Any] = queue.Queue(maxsize=len(streams))
    stop = threading.Event()

    def give(item: Any) -> bool:
        # Checked before each put: after `stop`, a thread puts at most the
        # one it was putting, and the consumer's drain left room for it.
        if stop.is_set():
            return False
        pages.put(item)
        return True

    def run(stream: Stream[T]) -> None:
        try:
            for page in _pages(client, stream, stop):
                if not give(page):
                    return
            give(_ENDED)
        except BaseException as e:  # the consumer raises it
            give(e)

    for i, stream in enumerate(streams):
        threading.Thread(target=run, args=(stream,), name=f"dq-merge-{i}", daemon=True).start()
    try:
        running = len(streams)
        while running:
            got = pages.get()
            if got is _ENDED:
                running -= 1
            elif isinstance(got, BaseException):
                raise got
            else:
                yield got
    finally:
        stop.set()
        # A thread waiting to put a page gets the room to, then sees `stop`.
        while True:
            try:
                pages.get_nowait()
            except queue.Empty:
                break


def check_client(client: Any) -> None:
    if not hasattr(client, "execute_command"):
        raise TypeError(f"client must be a redis-py Redis or RedisCluster, got {type(client).__name__}")
    if getattr(client, "_dq_async", False) or inspect.iscoroutinefunction(getattr(client, "execute_command", None)):
        raise TypeError("this is the blocking API: give an asyncio client to dq.asyncio instead")


def _method(plan: Callable[..., Plan[Any]]) -> Callable[..., Any]:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return drive(self.client, plan(self, *args, **kwargs))

    return method


def _iterator(stream: Callable[..., Stream[Any]]) -> Callable[..., Iterator[Any]]:
    def method(self: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
        return iterate(self.client, stream(self, *args, **kwargs))

    return method


class Bound(Blocking):
    """The base of dq's Queue and ShardedQueue: their commands run on a
    blocking client."""

    client: Client
    _check_client = staticmethod(check_client)
    _method = staticmethod(_method)
    _iterator = staticmethod(_iterator)
