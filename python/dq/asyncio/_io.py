"""How dq.asyncio runs the plans of dq/_core on a redis.asyncio client
(Redis or RedisCluster): the calls of one step at once, a pause by
asyncio.sleep, the streams of a Merge on a task each, a call that blocks
on the server on a connection of its own that a cancellation unblocks;
and the base class that makes each command of dq/_core a coroutine
function that does so."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, AsyncGenerator, AsyncIterator, Awaitable, Callable, Dict, List, Optional, Tuple

import redis.exceptions

from .._core.clients import single_connection
from .._core.errors import DqError, translate
from .._core.plans import Async, Call, Done, Items, Merge, Plan, Stream, T, advance
from .._core.queue import is_cluster

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
        if call.blocking and _own_connections(client):
            reply = await _blocking(client, call.args)
        elif call.node is None:
            reply = await client.execute_command(*call.args, NEVER_DECODE=True)
        else:
            reply = await client.execute_command(*call.args, target_nodes=call.node, NEVER_DECODE=True)
    except redis.exceptions.ResponseError as e:
        raise translate(e) from e
    return call.parse(reply)


def _own_connections(client: Client) -> bool:
    """Whether a blocking call can go on a connection dq takes itself: from
    a standalone client's pool (not a single_connection_client's), or from
    the pool of the cluster node that holds the queue."""
    if is_cluster(client):
        return hasattr(client, "get_node_from_key")
    return not single_connection(client) and hasattr(getattr(client, "connection_pool", None), "get_connection")


_NAMED_GET: Dict[type, bool] = {}  # a pool class -> whether its get_connection wants a command name


async def _get_connection(pool: Any) -> Any:
    # redis-py before 5.3 wants a command name, which 5.3 and later deprecate.
    named = _NAMED_GET.get(type(pool))
    if named is None:
        param = inspect.signature(pool.get_connection).parameters.get("command_name")
        named = _NAMED_GET[type(pool)] = param is not None and param.default is inspect.Parameter.empty
    return await (pool.get_connection("DQ") if named else pool.get_connection())


# What sends a cluster call that failed on the node's connection to
# redis-py's routing, which follows redirects and refreshes its view of the
# cluster (the slot moved, the node is down).
_REROUTE = (redis.exceptions.AskError, redis.exceptions.TryAgainError, redis.exceptions.ClusterDownError,
            redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)


async def _blocking(client: Client, args: Tuple[Any, ...]) -> Any:
    """Runs a command that may wait on the server (BLOCK) on a connection
    dq takes from the pool itself, sent after CLIENT ID in one write: the
    id of the connection the server holds it on. Cancelled, it is over on
    the server before the cancellation goes on to the caller: the
    connection is closed (its reply, if one comes, is never read: it goes
    back to the pool clean) and CLIENT UNBLOCK ends the call on the server
    at once, rather than when the server sees the connection close, which
    may come after the caller's next command: a DQ.POP nobody waits for
    would lease a message added meanwhile."""
    node = None
    if is_cluster(client):
        try:
            node = client.get_node_from_key(args[2] if args[0] == "DQ.MPOP" else args[1])
        except redis.exceptions.RedisClusterException:
            pass  # a slot no node holds in the client's view: redis-py's routing finds out
        if node is None:
            return await client.execute_command(*args, NEVER_DECODE=True)
        conn = node.acquire_connection()
        if hasattr(node, "disconnect_if_needed"):  # redis-py 7 and later
            await node.disconnect_if_needed(conn)
    else:
        pool = client.connection_pool
        conn = await _get_connection(pool)

    async def release() -> None:
        if node is None:
            await pool.release(conn)
        elif hasattr(node, "release"):
            node.release(conn)
        else:  # redis-py before 7
            node._free.append(conn)

    ids: List[Optional[int]] = [None]

    async def attempt() -> Any:
        ids[0] = None
        await conn.send_packed_command(conn.pack_commands([("CLIENT", "ID"), args]))
        try:
            ids[0] = int(await conn.read_response())
        except redis.exceptions.ResponseError:
            pass  # CLIENT ID is not allowed (ACL): the call goes on without
        return await conn.read_response(disable_decoding=True)

    async def failed(error: Exception) -> None:
        await conn.disconnect()

    released = False
    try:
        return await conn.retry.call_with_retry(attempt, failed)
    except _REROUTE:
        if node is None:
            raise
        await conn.disconnect()
        released = True
        await release()
        return await client.execute_command(*args, NEVER_DECODE=True)
    except asyncio.CancelledError:
        released = True
        # Shielded: a second cancellation does not leave the connection out of the pool.
        await asyncio.shield(_abandon(client, node, conn, release, ids[0]))
        raise
    finally:
        if not released:
            await release()


async def _abandon(client: Client, node: Any, conn: Any, release: Callable[[], Awaitable[None]],
                   id: Optional[int]) -> None:
    """Ends a cancelled blocking call: closes its connection, returns it to
    the pool, and unblocks it on the server (from another connection)."""
    try:
        await conn.disconnect(nowait=True)
    finally:
        await release()
    if id is not None:
        try:
            if node is None:
                await client.execute_command("CLIENT", "UNBLOCK", id)
            else:
                await client.execute_command("CLIENT", "UNBLOCK", id, target_nodes=node)
        except redis.exceptions.RedisError:
            pass  # not allowed (ACL), or the server is gone: the closed connection ends the call


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
    (or an error of one stream, raised here) cancels them, which ends a
    blocking call in progress on the server (_blocking)."""
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
