"""How dq.asyncio runs the plans of dq/_core on a redis.asyncio client
(Redis or RedisCluster): the calls of one step at once, a pause by
asyncio.sleep, the streams of a Merge on a task each; and the base class that makes each command of dq/_core a
coroutine function that does so."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, AsyncGenerator, AsyncIterator, Callable, List

import redis.exceptions

from .._core.errors import DqError, translate
from .._core.plans import Async, Call, Done, Items, Merge, Plan, Stream, T, advance

Client = Any  # redis.asyncio.Redis or redis.asyncio.cluster.RedisCluster


async def ready(client: Client) -> None:
    # redis-py's asyncio RedisCluster initializes itself on first use; with
    # several first commands at once (a sharded queue's calls go out
    # together) redis 8.1.0 was seen to break a connection while it was being
    # set up. So a cluster client is initialized, once, before any dq call.
    if getattr(client, "_initialize", False) and hasattr(client, "get_primaries"):
        await client.initialize()


async def execute(client: Client, call: Call[T]) -> T:
    """Runs one command; payloads come back as bytes whatever decode_responses says."""
    await ready(client)
    try:
        if call.node is None:
            reply = await client.execute_command(*call.args, NEVER_DECODE=True)
        else:
            reply = await client.execute_command(*call.args, target_nodes=call.node, NEVER_DECODE=True)
    except redis.exceptions.ResponseError as e:
        raise translate(e) from e
    return call.parse(reply)


async def _result(client: Client, call: Call[Any]) -> Any:
    try:
        return await execute(client, call)
    except DqError as e:
        return e


async def _resume(client: Client, plan: Any, step: Any) -> Any:
    """Runs a plan's step and resumes the plan with what came of it: its next step."""
    if isinstance(step, float):
        await asyncio.sleep(step)
        return advance(plan)
    try:
        if len(step) == 1:
            results: List[Any] = [await _result(client, step[0])]
        else:
            # The calls of one step go out together (to their nodes, on a cluster).
            results = list(await asyncio.gather(*[_result(client, call) for call in step]))
    except Exception as e:  # the connection's
        return advance(plan, error=e)
    return advance(plan, results)


async def drive(client: Client, plan: Plan[T]) -> T:
    """Runs a plan to its end: its result."""
    step = advance(plan)
    while not isinstance(step, Done):
        step = await _resume(client, plan, step)
    return step.value  # type: ignore[no-any-return]


async def iterate(client: Client, stream: Stream[T]) -> AsyncIterator[T]:
    """Runs a stream as its consumer asks for items."""
    pages = _pages(client, stream)
    try:
        async for page in pages:
            for item in page:
                yield item
    finally:
        await pages.aclose()  # a Merge's tasks are cancelled now, not when the generator is collected


async def _pages(client: Client, stream: Stream[T]) -> AsyncGenerator[List[T], None]:
    """A stream's items, as it hands them out."""
    step = advance(stream)
    while not isinstance(step, Done):
        if isinstance(step, Items):
            yield step.items
            step = advance(stream)
        elif isinstance(step, Merge):
            merged = _merge(client, step.streams)
            try:
                async for page in merged:
                    yield page
            finally:
                await merged.aclose()
            step = advance(stream)
        else:
            step = await _resume(client, stream, step)


_ENDED = object()  # a merged stream's task says its stream ended


async def _merge(client: Client, streams: List[Stream[T]]) -> AsyncGenerator[List[T], None]:
    """Runs streams side by side, each on a task of its own, their pages
    handed over as they come through a queue of at most one page per
    stream: a task waits while its consumer is behind. Closing the consumer
    (or an error of one stream, raised here) cancels them, which closes the
    connection of a blocking call in progress and so ends it on the server."""
    pages: asyncio.Queue[Any] = asyncio.Queue(maxsize=len(streams))

    async def run(stream: Stream[T]) -> None:
        try:
            async for page in _pages(client, stream):
                await pages.put(page)
            await pages.put(_ENDED)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # the consumer raises it
            await pages.put(e)

    tasks = [asyncio.ensure_future(run(stream)) for stream in streams]
    try:
        running = len(tasks)
        while running:
            got = await pages.get()
            if got is _ENDED:
                running -= 1
            elif isinstance(got, BaseException):
                raise got
            else:
                yield got
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def check_client(client: Any) -> None:
    if not inspect.iscoroutinefunction(getattr(client, "execute_command", None)):
        raise TypeError(
            f"client must be a redis.asyncio Redis or RedisCluster, got {type(client).__name__} "
            "(use dq, not dq.asyncio, with a blocking client)"
        )


def _method(plan: Callable[..., Plan[Any]]) -> Callable[..., Any]:
    async def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return await drive(self.client, plan(self, *args, **kwargs))

    return method


def _iterator(stream: Callable[..., Stream[Any]]) -> Callable[..., AsyncIterator[Any]]:
    def method(self: Any, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        return iterate(self.client, stream(self, *args, **kwargs))

    return method


class Bound(Async):
    """The base of dq.asyncio's Queue and ShardedQueue: their commands are
    coroutine functions on an asyncio client."""

    client: Client
    _check_client = staticmethod(check_client)
    _method = staticmethod(_method)
    _iterator = staticmethod(_iterator)
