"""How dq.asyncio runs the plans of dq/_core on a redis.asyncio client
(Redis or RedisCluster): the calls of one step at once, a pause by
asyncio.sleep; and the base class that makes each command of dq/_core a
coroutine function that does so."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, AsyncIterator, Callable, List

import redis.exceptions

from .._core.errors import DqError, translate
from .._core.plans import Async, Call, Done, Items, Plan, Stream, T, advance

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
    step = advance(stream)
    while not isinstance(step, Done):
        if isinstance(step, Items):
            for item in step.items:
                yield item
            step = advance(stream)
        else:
            step = await _resume(client, stream, step)


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
