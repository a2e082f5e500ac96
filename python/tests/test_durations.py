"""Durations in every option that takes one: int milliseconds (as ever), a
datetime.timedelta, or a str in the module's grammar ("30s", "5m", "1500";
docs/commands.md, "Arguments, replies and errors"), each sent as whole
milliseconds, and refused before sending when the server would refuse it.
The shared vectors (test_client_vectors.py) hold the str forms to the
other libraries; this file adds what only Python has (timedelta, the
Worker's and Retry's options, the asyncio flavor). No server."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any, Dict, List, Tuple

import pytest
import redis
import redis.asyncio

import dq
import dq.asyncio as dqa
from dq._core.args import parse_duration

from test_client_vectors import Fake


def sent(call: Any) -> List[Tuple[bytes, ...]]:
    client = Fake()
    call(dq.Queue(client, "q"))
    return client.sent


# (the call with a duration, its argv's duration part) for each form of 90 s.
NINETY_SECONDS = [90000, timedelta(seconds=90), "90s", "90000", "90000ms", timedelta(minutes=1.5)]


@pytest.mark.parametrize("d", NINETY_SECONDS, ids=repr)
def test_every_form_of_a_duration_sends_the_same_milliseconds(d: Any) -> None:
    calls: Dict[str, Any] = {
        "add": (lambda q: q.add(b"p", delay_ms=d, ttl_ms=d), [b"DELAY", b"90000", b"TTL", b"90000"]),
        "pop": (lambda q: q.pop(2, block_ms=d, lease_ms=d), [b"COUNT", b"2", b"BLOCK", b"90000", b"LEASE", b"90000"]),
        "nack": (lambda q: q.nack("a", delay_ms=d), [b"DELAY", b"90000"]),
        "touch": (lambda q: q.touch("a", lease_ms=d), [b"LEASE", b"90000"]),
        "config_set": (lambda q: q.config_set(lease_ms=d), [b"SET", b"LEASE", b"90000"]),
        "schedule": (lambda q: q.schedule("n", b"p", every=d, ttl_ms=d), [b"EVERY", b"90000", b"TTL", b"90000"]),
        "pause": (lambda q: q.pause(for_ms=d), [b"FOR", b"90000"]),
    }
    for op, (call, tail) in calls.items():
        (argv,) = sent(call)
        assert list(argv[-len(tail):]) == tail, (op, argv)


def test_a_timedelta_is_whole_milliseconds_rounded_down_as_rusts_duration() -> None:
    assert sent(lambda q: q.add(b"p", delay_ms=timedelta(microseconds=1999)))[0][-2:] == (b"DELAY", b"1")
    assert sent(lambda q: q.touch("a", lease_ms=timedelta(seconds=1, microseconds=500)))[0][-2:] == (
        b"LEASE", b"1000")


@pytest.mark.parametrize(
    "call, refused",
    [
        (lambda q: q.add(b"p", delay_ms="1.5s"), ValueError),
        (lambda q: q.add(b"p", delay_ms="5 s"), ValueError),
        (lambda q: q.add(b"p", delay_ms="5S"), ValueError),
        (lambda q: q.add(b"p", delay_ms="1h30m"), ValueError),
        (lambda q: q.add(b"p", delay_ms="\uff15s"), ValueError),  # a full-width 5: str.isdigit() says yes
        (lambda q: q.add(b"p", delay_ms="5s\n"), ValueError),
        (lambda q: q.add(b"p", delay_ms=timedelta(seconds=-1)), ValueError),
        (lambda q: q.add(b"p", delay_ms=1.5), TypeError),
        (lambda q: q.add(b"p", delay_ms=b"5s"), TypeError),
        (lambda q: q.add(b"p", delay_ms=True), TypeError),
        (lambda q: q.add(b"p", ttl_ms=timedelta(microseconds=999)), ValueError),  # 0 ms
        (lambda q: q.touch("a", lease_ms=timedelta(0)), ValueError),
        (lambda q: q.pop(1, lease_ms="0ms"), ValueError),
        (lambda q: q.pop(1, block_ms="-1"), ValueError),
        (lambda q: q.config_set(lease_ms="default"), ValueError),  # the word is 'DEFAULT'
        (lambda q: q.schedule("n", b"p", every=timedelta(milliseconds=999)), ValueError),
        (lambda q: q.pause(for_ms="0s"), ValueError),
        (lambda q: q.config_set(rate="100/1w"), ValueError),
        (lambda q: q.config_set(rate="100/0s"), ValueError),
        (lambda q: q.config_set(rate="100/1s "), ValueError),
    ],
)
def test_what_the_server_would_refuse_is_refused_before_sending(call: Any, refused: type) -> None:
    client = Fake()
    with pytest.raises(refused):
        call(dq.Queue(client, "q"))
    assert client.sent == []


def test_a_refusal_names_the_option_and_shows_the_grammar() -> None:
    with pytest.raises(ValueError, match=r"delay_ms must be a duration: .*'30s', '5m'.*got '1\.5s'"):
        dq.Queue(Fake(), "q").add(b"p", delay_ms="1.5s")
    with pytest.raises(ValueError, match=r"every must be from 1000 to \d+ ms, got '999ms' \(999 ms\)"):
        dq.Queue(Fake(), "q").schedule("n", b"p", every="999ms")


def test_config_set_default_and_the_rate_window() -> None:
    assert sent(lambda q: q.config_set(lease_ms="DEFAULT"))[0][-2:] == (b"LEASE", b"DEFAULT")
    assert sent(lambda q: q.config_set(rate="20/250ms"))[0][-2:] == (b"RATE", b"20/250ms")  # sent as given


def test_the_grammar_is_the_servers() -> None:
    """The same table as the module's own test (src/grammar/args.rs)."""
    for text, ms in [("0", 0), ("1500", 1500), ("250ms", 250), ("30s", 30000), ("5m", 300000), ("2h", 7200000),
                     ("7d", 604800000), ("007s", 7000), ("9007199254740991", 2**53 - 1)]:
        assert parse_duration(text) == ms, text
    for text in ["", "-1", "+1", " 1", "1 ", "1.5s", "5 s", "5S", "5sec", "s", "1e3", "0x10", "9007199254740992",
                 "104249992d", "1_000", "٣s"]:
        assert parse_duration(text) is None, text


def test_a_sharded_queues_pop_takes_a_duration_for_its_rounds() -> None:
    """ShardedQueue.pop(block_ms=...) rounds over the shards until the
    block is up: the duration is read once, before the first round."""
    client = Fake()
    sharded = dq.ShardedQueue(client, "jobs", shards=2)
    assert sharded.pop(1, block_ms="1ms", lease_ms="30s") == []
    assert client.sent and all(argv[2:] == (b"COUNT", b"1", b"LEASE", b"30000") for argv in client.sent)
    with pytest.raises(ValueError):
        sharded.pop(1, block_ms="soon")


def test_retry_takes_a_duration_and_keeps_milliseconds() -> None:
    assert dq.Retry("5s").delay_ms == 5000
    assert dq.Retry(delay_ms=timedelta(minutes=2), error="HTTP 503").delay_ms == 120000
    assert dq.Retry(250).delay_ms == 250
    assert dq.Retry().delay_ms is None
    with pytest.raises(ValueError, match="Retry delay_ms"):
        dq.Retry("1.5s")


def test_a_workers_lease_and_block_take_a_duration() -> None:
    client = redis.Redis(socket_timeout=10)  # never connects: nothing is sent
    worker = dq.Worker(dq.Queue(client, "q"), lambda d: None, lease_ms="45s", block_ms=timedelta(seconds=2))
    assert (worker.lease_ms, worker.block_ms) == (45000, 2000)
    with pytest.raises(ValueError, match="lease_ms"):
        dq.Worker(dq.Queue(client, "q"), lambda d: None, lease_ms="2ms")  # at least 3 ms: a heartbeat each third
    with pytest.raises(ValueError, match="block_ms"):
        dq.Worker(dq.Queue(client, "q"), lambda d: None, block_ms="10s")  # not shorter than socket_timeout
    client.close()


def test_the_asyncio_flavor_takes_the_same_forms() -> None:
    async def main() -> None:
        client = redis.asyncio.Redis(socket_timeout=10)
        worker = dqa.Worker(dqa.Queue(client, "q"), lambda d: None, lease_ms="1m", block_ms="500ms")
        assert (worker.lease_ms, worker.block_ms) == (60000, 500)
        with pytest.raises(ValueError):
            await dqa.Queue(client, "q").add(b"p", delay_ms="soon")
        await client.aclose()

    asyncio.run(main())
