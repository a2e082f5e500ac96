"""Fixtures: clients of the servers scripts/with-servers started
(DQ_REDIS_URL, DQ_CLUSTER_NODES), servers of a test's own (own_server: to
kill and restart), unique queue names, deadline polling."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator, List, Optional

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
        # A failure, not a skip: a run without the cluster must not pass
        # with the cluster tests untested.
        pytest.fail("DQ_CLUSTER_NODES is not set: run the suite with scripts/test-python "
                    "(or scripts/with-servers --cluster -- python -m pytest python/tests)")
    out = []
    for node in nodes.split(","):
        host, port = node.rsplit(":", 1)
        out.append((host, int(port)))
    return out  # type: ignore[return-value]


def module_path() -> Path:
    """The module a server of the test's own loads: DQ_MODULE, else the debug
    build in CARGO_TARGET_DIR (or target/), as scripts/with-servers does."""
    explicit = os.environ.get("DQ_MODULE")
    if explicit:
        return Path(explicit)
    target = Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target")
    path = (target if target.is_absolute() else ROOT / target) / "debug" / "libdq.so"
    if not path.exists():
        pytest.fail(f"{path} is missing: run `cargo build` at the root first (scripts/test-python does)")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class OwnServer:
    """A server of one test's own, which it may kill and start again: unlike
    scripts/with-servers' (shared by every test), redis-server (DQ_SERVER)
    with the module loaded, on a free loopback port, in a temporary
    directory; `args` are more `--name value` arguments (`--appendonly yes`).
    kill() is a crash (SIGKILL); start() brings it back on the same port and
    directory, so it loads what it persisted."""

    def __init__(self, *args: str) -> None:
        self.binary = os.environ.get("DQ_SERVER") or "redis-server"
        self.module = module_path()
        self.args = list(args)
        self.dir = tempfile.mkdtemp(prefix="dq-pytest-")
        self.log = Path(self.dir) / "server.log"
        self.proc: Optional[subprocess.Popen] = None  # type: ignore[type-arg]
        self.port = 0
        for _ in range(20):  # a port found free may be taken before the server binds it
            self.port = free_port()
            if self._spawn():
                return
        self.close()
        pytest.fail("20 free ports in a row were taken before the server bound them")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def _spawn(self) -> bool:
        """Starts the server on self.port and waits until it answers PING (its
        AOF loaded): False when the port was taken."""
        logged = self.log.stat().st_size if self.log.exists() else 0
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", self.dir, "--logfile", str(self.log), *self.args, "--loadmodule", str(self.module)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                text = self.log.read_text(errors="replace") if self.log.exists() else ""
                if "Address already in use" in text[logged:]:
                    return False
                pytest.fail(f"{self.binary} exited {self.proc.returncode}; its log:\n{text}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return True
            except OSError:
                pass
            time.sleep(0.02)
        self.kill()
        pytest.fail(f"{self.binary} did not answer PING on port {self.port} within 60 s")

    def kill(self) -> None:
        """Kills the server as a crash would (SIGKILL) and waits for it to end."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait()

    def start(self) -> None:
        """Starts it again on its port and directory, after kill()."""
        deadline = time.monotonic() + 60
        while not self._spawn():
            if time.monotonic() > deadline:
                pytest.fail(f"port {self.port} stayed taken for 60 s: no restart")
            time.sleep(0.05)

    def restart(self) -> None:
        self.kill()
        self.start()

    def close(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def own_server() -> Iterator[Callable[..., OwnServer]]:
    """own_server(*args) -> OwnServer; each killed, its directory removed, after the test."""
    started: List[OwnServer] = []

    def start(*args: str) -> OwnServer:
        server = OwnServer(*args)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


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
