"""Queue and ShardedQueue commands against a real standalone server (blocking API)."""

from __future__ import annotations

import time

import pytest
import redis

import dq

from conftest import wait_for
from dq._core import args as c, sharding


def test_add_every_option_shows_in_get(any_r, name):
    q = dq.Queue(any_r, name)
    before = int(time.time() * 1000)
    assert q.add(b"\x00\xffbin", id="m1", delay_ms=60_000, priority=7, max_attempts=5,
                 backoff="fixed:2s", group="g1", ttl_ms=120_000) == "m1"
    got = q.get("m1")
    assert got["id"] == "m1"
    assert got["payload"] == b"\x00\xffbin"
    assert got["state"] == "delayed"
    assert got["priority"] == 7
    assert got["max-attempts"] == 5 and got["max-attempts-from"] == "message"
    assert got["backoff"] == "fixed:2s" and got["backoff-from"] == "message"
    assert got["group"] == "g1"
    assert before + 60_000 <= got["due-at"] <= int(time.time() * 1000) + 60_000
    assert got["expires-at"] - got["added-at"] == 120_000
    assert got["attempt"] == 0 and got["lease-deadline"] is None and got["last-error"] is None

    at = int(time.time() * 1000) + 3_600_000
    assert q.add("text é", id="m2", at_ms=at) == "m2"
    assert q.get("m2")["due-at"] == at
    assert q.get("m2")["payload"] == "text é".encode()
    # NX finds the id: None, nothing changes; XX of an unknown id: None.
    assert q.add("other", id="m2", nx=True) is None
    assert q.get("m2")["payload"] == "text é".encode()
    assert q.add("x", id="nope", xx=True) is None
    assert q.get("nope") is None
    assert q.add("replaced", id="m2", xx=True) == "m2"
    assert q.get("m2")["payload"] == b"replaced"
    # Without an id the server makes one.
    made = q.add("")
    assert made and q.get(made)["payload"] == b""
    assert q.get("absent") is None
    assert q.stats()["added"] == 4  # m1, m2, m2 replaced, made


def test_pop_ack_touch_nack(any_r, name):
    q = dq.Queue(any_r, name)
    assert q.pop() == []
    q.add("a", id="a")
    q.add("b", id="b", priority=1)
    got = q.pop(count=5, lease_ms=10_000)
    assert [(d.id, d.payload, d.attempt, d.queue) for d in got] == [("b", b"b", 1, name), ("a", b"a", 1, name)]
    before = int(time.time() * 1000)
    deadline = q.touch(got[0], lease_ms=20_000)
    # 20 s after the server's now, which lies between before and after.
    assert before + 20_000 <= deadline <= int(time.time() * 1000) + 20_000
    assert q.get("b")["lease-deadline"] == deadline
    assert q.nack(got[1], delay_ms=0, error="try again") == "ready"
    assert q.get("a")["last-error"] == "try again"
    assert q.ack(got[0], "a") == 1  # "a" is ready again, not in flight
    again = q.pop(block_ms=100)
    assert [(d.id, d.attempt) for d in again] == [("a", 2)]
    assert q.nack("a", dead=True) == "dead"
    stats = q.stats()
    assert (stats["acked"], stats["nacked"], stats["dead"], stats["inflight"]) == (1, 2, 1, 0)


def test_admin_calls(r, name):
    q = dq.Queue(r, name)
    for i in range(25):
        q.add(f"p{i}", id=f"id{i}", delay_ms=(0 if i < 20 else 60_000))
    assert len(q.peek("ready", count=100)) == 20
    assert [e.id for e in q.peek("READY", count=3)] == ["id0", "id1", "id2"]
    assert sorted(e.id for e in q.scan(count=3)) == sorted(f"id{i}" for i in range(25))
    assert sorted(e.id for e in q.scan(state="delayed")) == [f"id{i}" for i in range(20, 25)]
    for d in q.pop(count=3):
        q.nack(d, dead=True, error="bad")
    dead = q.peek("dead")
    assert len(dead) == 3 and all(e.last_error == "bad" for e in dead)
    assert q.redrive(count=1) == 1
    assert q.redrive(ids=[dead[1].id, "id24"]) == 1
    assert q.redrive() == 1
    assert q.cancel("id20", "id21", "zzz") == 2
    assert q.purge("delayed") == 3
    assert q.purge() == 20
    assert q.stats()["ready"] == 0
    assert q.config()["lease-ms-from"] == "module"
    q.config_set(lease_ms=5000, max_attempts=3, backoff="fixed:1s")
    cfg = q.config()
    assert (cfg["lease-ms"], cfg["max-attempts"], cfg["backoff"]) == (5000, 3, "fixed:1s")
    q.config_set(lease_ms="DEFAULT", max_attempts="DEFAULT", backoff="DEFAULT")
    assert q.config()["max-attempts-from"] == "module"
    assert name in dq.queues(r)


def test_nack_error_is_cut_on_a_character_boundary(r, name):
    q = dq.Queue(r, name)
    q.add("x", id="x")
    (d,) = q.pop()
    text = "a" + "é" * 3000  # 6001 bytes; 4096 would split an é
    q.nack(d, delay_ms=0, error=text)
    kept = q.get("x")["last-error"]
    assert kept == "a" + "é" * 2047 and len(kept.encode()) == 4095
    # An empty error is sent as no ERROR.
    (d,) = q.pop(block_ms=5000)
    q.nack(d, error="")
    assert q.get("x")["last-error"] == kept


def test_truncate_error_unit():
    assert c.truncate_error("") is None
    assert c.truncate_error("ok") == b"ok"
    assert c.truncate_error("x" * 5000) == b"x" * 4096
    four = "😀" * 1025  # 4100 bytes of 4-byte characters
    assert c.truncate_error(four) == ("😀" * 1024).encode()
    assert c.truncate_error("ab" + "😀" * 1024) == ("ab" + "😀" * 1023).encode()


def test_typed_errors(r, name):
    q = dq.Queue(r, name)
    q.add("x", id="x")
    (d,) = q.pop()
    q.ack(d)
    with pytest.raises(dq.StaleDelivery, match="^STALE delivery 1 of message 'x'"):
        q.nack("x", attempt=1)
    with pytest.raises(dq.StaleDelivery):
        q.touch(d)
    with pytest.raises(dq.UnknownMessage):
        q.nack("x")
    with pytest.raises(dq.UnknownMessage):
        q.touch("x")
    r.set(name + ":str", "a string")
    with pytest.raises(dq.WrongType, match="^WRONGTYPE"):
        dq.Queue(r, name + ":str").add("x")
    with pytest.raises(dq.DqError, match="BACKOFF must be"):
        q.add("x", backoff="nonsense")
    # All are redis-py ResponseErrors too.
    assert issubclass(dq.StaleDelivery, redis.exceptions.ResponseError)


def test_out_of_memory(r, name):
    q = dq.Queue(r, name)
    old = r.config_get("maxmemory")["maxmemory"]
    old_policy = r.config_get("maxmemory-policy")["maxmemory-policy"]
    try:
        r.config_set("maxmemory-policy", "noeviction")
        r.config_set("maxmemory", 1)
        with pytest.raises(dq.OutOfMemory, match="^OOM"):
            q.add("x")
        # The eviction guard: under maxmemory with an allkeys-* policy. The
        # module re-reads the policy at most every 100 ms: poll.
        r.config_set("maxmemory", 1 << 30)
        r.config_set("maxmemory-policy", "allkeys-lru")

        def refused():
            try:
                q.add("x")
            except dq.OutOfMemory as e:
                return str(e)
            return None

        assert "maxmemory-policy is allkeys-lru" in wait_for(refused, what="the eviction guard")
    finally:
        r.config_set("maxmemory", old)
        r.config_set("maxmemory-policy", old_policy)
    assert q.add("x", id="after") == "after"


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda q: q.add(123), TypeError, "payload must be str or bytes"),
        (lambda q: q.add("x", delay_ms=-1), ValueError, "delay_ms must be from 0"),
        (lambda q: q.add("x", delay_ms=1.5), TypeError, "delay_ms must be a duration"),
        (lambda q: q.add("x", delay_ms=True), TypeError, "delay_ms must be a duration"),
        (lambda q: q.add("x", delay_ms=1, at_ms=2), ValueError, "delay_ms and at_ms cannot be used together"),
        (lambda q: q.add("x", nx=True, xx=True, id="a"), ValueError, "nx and xx cannot be used together"),
        (lambda q: q.add("x", xx=True), ValueError, "xx needs an id"),
        (lambda q: q.add("x", id=""), ValueError, "id must not be empty"),
        (lambda q: q.add("x", id="i" * 1025), ValueError, "id is longer than 1024 bytes"),
        (lambda q: q.add("x", priority=2**31), ValueError, "priority must be from"),
        (lambda q: q.add("x", max_attempts=0), ValueError, "max_attempts must be from 1"),
        (lambda q: q.add("x", backoff=5), TypeError, "backoff must be a str"),
        (lambda q: q.add("x", group=""), ValueError, "group must not be empty"),
        (lambda q: q.add("x", ttl_ms=0), ValueError, "ttl_ms must be from 1"),
        (lambda q: q.pop(count=0), ValueError, "count must be from 1 to 10000"),
        (lambda q: q.pop(block_ms=-5), ValueError, "block_ms must be from 0"),
        (lambda q: q.pop(lease_ms=0), ValueError, "lease_ms must be from 1"),
        (lambda q: q.ack(), ValueError, "ack needs at least one id"),
        (lambda q: q.ack(5), TypeError, "id must be str or bytes"),
        (lambda q: q.nack("a", dead=True, delay_ms=1), ValueError, "delay_ms and dead cannot be used together"),
        (lambda q: q.nack("a", attempt=0), ValueError, "attempt must be from 1"),
        (lambda q: q.nack("a", error=3), TypeError, "error must be a str"),
        (lambda q: q.touch("a", lease_ms=0), ValueError, "lease_ms must be from 1"),
        (lambda q: q.peek("nowhere"), ValueError, "state must be one of"),
        (lambda q: q.peek("ready", count=10001), ValueError, "count must be from 1 to 10000"),
        (lambda q: q.scan(state="x"), ValueError, "state must be one of"),
        (lambda q: q.redrive(count=1, ids=["a"]), ValueError, "count and ids cannot be used together"),
        (lambda q: q.redrive(ids="abc"), TypeError, "ids must be a list"),
        (lambda q: q.redrive(ids=[]), ValueError, "ids must not be empty"),
        (lambda q: q.cancel(), ValueError, "cancel needs at least one id"),
        (lambda q: q.purge("all"), ValueError, "state must be one of"),
        (lambda q: q.config_set(), ValueError, "config_set needs at least one"),
        (lambda q: q.config_set(lease_ms="soon"), ValueError, "lease_ms must be a duration"),
        (lambda q: q.config_set(backoff=""), ValueError, "backoff must not be empty"),
        (lambda q: q.nack(dq.Delivery("a", b"", 1, "elsewhere")), ValueError, "came from queue 'elsewhere'"),
    ],
)
def test_bad_arguments_change_nothing(r, name, call, error, message):
    q = dq.Queue(r, name)
    q.add("keep", id="a")
    before = q.stats()
    with pytest.raises(error, match=message):
        call(q)
    after = q.stats()
    del before["oldest-ready-age-ms"], after["oldest-ready-age-ms"]  # a clock, not a change
    assert after == before
    assert q.get("a")["payload"] == b"keep"


def test_bad_constructors(r):
    with pytest.raises(TypeError, match="queue name must be str or bytes"):
        dq.Queue(r, 5)
    with pytest.raises(TypeError, match="client must be a redis-py"):
        dq.Queue(object(), "q")
    with pytest.raises(ValueError, match="must not contain"):
        dq.ShardedQueue(r, "a{b}", shards=4)
    for bad in (0, 3, 2048):
        with pytest.raises(ValueError, match="power of two from 1 to 1024"):
            dq.ShardedQueue(r, "q", shards=bad)
    with pytest.raises(TypeError, match="shards must be an int"):
        dq.ShardedQueue(r, "q", shards="8")
    with pytest.raises(ValueError, match="Retry delay_ms must be a duration"):
        dq.Retry("soon")


def test_sharded_queue_admin(r, name):
    s = dq.ShardedQueue(r, name, shards=4)
    ids = [s.add(f"p{i}", delay_ms=(0 if i < 30 else 60_000 + i)) for i in range(40)]
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)
    for i in ids:
        assert s.shards[s.shard_for(i)].get(i) is not None
    assert s.add("g", id="grouped", group="user:42", delay_ms=120_000) == "grouped"
    assert s.shards[s.shard_for("user:42")].get("grouped")["group"] == "user:42"
    assert s.get("grouped")["id"] == "grouped"
    assert s.get("grouped", group="user:42")["id"] == "grouped"
    stats = s.stats()
    assert (stats["added"], stats["ready"], stats["delayed"]) == (41, 30, 11)
    per = [q.stats() for q in s.shards]
    assert stats["next-due-at"] == min(p["next-due-at"] for p in per if p["next-due-at"] is not None)
    assert stats["oldest-ready-age-ms"] is not None  # the max over shards: see test_merge_stats
    peeked = s.peek("delayed", count=4)
    assert len(peeked) == 4 and [e.time for e in peeked] == sorted(e.time for e in s.peek("delayed", count=100))[:4]
    assert len(list(s.scan())) == 41
    # pop takes from the shards in turn; ack/nack go to the delivery's shard.
    got = s.pop(count=5)
    assert len(got) == 5 and all(d.queue in s.shard_names for d in got)
    assert s.nack(got[0], dead=True, error="no") == "dead"
    assert s.ack(*got[1:]) == 4
    assert s.redrive() == 1
    assert s.cancel("grouped") == 1
    s.config_set(max_attempts=4)
    assert all(q.config()["max-attempts"] == 4 for q in s.shards) and s.config()["max-attempts"] == 4
    assert s.purge() == 36
    assert set(s.shard_names) <= set(dq.queues(r))
    assert s.pop(block_ms=50) == []


def test_merge_stats():
    a = {"ready": 1, "acked": 2, "oldest-ready-age-ms": 5, "next-due-at": None}
    b = {"ready": 3, "acked": 0, "oldest-ready-age-ms": 9, "next-due-at": 100}
    z = {"ready": 0, "acked": 0, "oldest-ready-age-ms": None, "next-due-at": 50}
    assert sharding.merge_stats([a, b, z]) == {"ready": 4, "acked": 2, "oldest-ready-age-ms": 9, "next-due-at": 50}
    none = {"ready": 0, "acked": 0, "oldest-ready-age-ms": None, "next-due-at": None}
    assert sharding.merge_stats([none, none]) == none
