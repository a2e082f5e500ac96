"""How dq runs the plans of dq/_core on a blocking redis-py client (Redis
or RedisCluster): one call after another, a pause by sleeping; and the base
class that makes each command of dq/_core a method that does so."""

from __future__ import annotations

import inspect
import time
from typing import Any, Callable, Iterator, List

import redis.exceptions

from ._core.errors import DqError, translate
from ._core.plans import Blocking, Call, Done, Items, Plan, Stream, T, advance

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
    step = advance(stream)
    while not isinstance(step, Done):
        if isinstance(step, Items):
            yield from step.items
            step = advance(stream)
        else:
            step = _resume(client, stream, step)


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
