"""Fixtures: clients of the servers scripts/with-servers started
(DQ_REDIS_URL, DQ_CLUSTER_NODES), unique queue names, deadline polling."""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Awaitable, Callable, List

import pytest
import pytest_asyncio
import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster

# The package from this checkout, even without `pip install -e`.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ROOT = Path(__file__).resolve().parents[2]


def redis_url() -> str:
    url = os.environ.get("DQ_REDIS_URL")
    if not url:
        pytest.fail("DQ_REDIS_URL is not set: run the suite with scripts/test-python "
                    "(or scripts/with-servers --cluster -- python -m pytest python/tests)")
    return url


def cluster_nodes() -> List[redis.cluster.ClusterNode]:
    nodes = os.environ.get("DQ_CLUSTER_NODES")
    if not nodes:
        pytest.skip("DQ_CLUSTER_NODES is not set (scripts/with-servers --cluster starts a cluster)")
    out = []
    for node in nodes.split(","):
        host, port = node.rsplit(":", 1)
        out.append((host, int(port)))
    return out  # type: ignore[return-value]


@pytest.fixture
def name() -> str:
    """A queue name no other test uses."""
    return f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def r() -> Any:
    client = redis.Redis.from_url(redis_url())
    yield client
    client.close()


@pytest.fixture(params=[(2, False), (3, False), (2, True), (3, True)], ids=["resp2", "resp3", "resp2-decode", "resp3-decode"])
def any_r(request: Any) -> Any:
    """A client of each protocol, with and without decode_responses."""
    protocol, decode = request.param
    client = redis.Redis.from_url(redis_url(), protocol=protocol, decode_responses=decode)
    yield client
    client.close()


@pytest_asyncio.fixture
async def ar() -> Any:
    client = redis.asyncio.Redis.from_url(redis_url())
    yield client
    await client.aclose() if hasattr(client, "aclose") else await client.close()


@pytest.fixture
def cluster() -> Any:
    client = redis.cluster.RedisCluster(
        startup_nodes=[redis.cluster.ClusterNode(h, p) for h, p in cluster_nodes()]
    )
    yield client
    client.close()


@pytest_asyncio.fixture
async def acluster() -> Any:
    client = redis.asyncio.cluster.RedisCluster(
        startup_nodes=[redis.asyncio.cluster.ClusterNode(h, p) for h, p in cluster_nodes()]
    )
    # Not initialized here: dq.asyncio must cope with a fresh client.
    yield client
    await client.aclose() if hasattr(client, "aclose") else await client.close()


def now_ms() -> int:
    """This machine's clock in Unix ms, as the server reads it."""
    return int(time.time() * 1000)


def unblock_pops(clients: List[Any]) -> None:
    """Ends every DQ.POP blocked on these servers, as if its BLOCK had run
    out (CLIENT UNBLOCK), so that a worker stopping need not wait for it."""
    for client in clients:
        for c in client.client_list():
            if c.get("cmd") == "dq.pop" and "b" in c.get("flags", ""):
                client.client_unblock(c["id"])


def wait_for(cond: Callable[[], Any], timeout: float = 15.0, what: str = "the condition") -> Any:
    """Polls cond() until it is truthy; fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


async def await_for(cond: Callable[[], Awaitable[Any]], timeout: float = 15.0, what: str = "the condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = await cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.02)
