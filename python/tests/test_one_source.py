"""dq and dq.asyncio are one library: every public method is written once
(dq/_core) and each flavor binds it. Without a server: the two have the
same names, signatures and docstrings, and send the same commands, return
the same values and raise the same errors (a fake client records them)."""

from __future__ import annotations

import asyncio
import inspect
import typing
from typing import Any, Callable, Dict, List, Tuple

import pytest
import redis.exceptions

import dq
import dq.asyncio as dqa
from dq._core.plans import Call, Plan, all_of, one
from dq._io import drive


def public(cls: type) -> List[str]:
    return sorted(n for n in dir(cls) if not n.startswith("_"))


def test_both_export_the_same_names():
    assert sorted(dq.__all__) == sorted(dqa.__all__)
    for name in dq.__all__:
        sync, aio = getattr(dq, name), getattr(dqa, name)
        if name in ("Queue", "ShardedQueue", "Worker", "queues"):
            assert sync is not aio
        else:
            assert sync is aio, name  # errors and records are the same classes


@pytest.mark.parametrize("kind", ["Queue", "ShardedQueue"])
def test_each_method_has_one_signature_and_docstring(kind):
    sync, aio = getattr(dq, kind), getattr(dqa, kind)
    assert public(sync) == public(aio)
    methods = [n for n in public(sync) if inspect.isfunction(inspect.getattr_static(sync, n))]
    assert {"add", "pop", "ack", "nack", "touch", "stats", "get", "peek", "scan", "redrive", "cancel", "purge",
            "config", "config_set", "schedule", "unschedule", "schedules", "pause", "resume", "events",
            "groups"} <= set(methods)
    for name in methods:
        s, a = getattr(sync, name), getattr(aio, name)
        assert s.__doc__ and s.__doc__ == a.__doc__, name
        s_sig, a_sig = inspect.signature(s), inspect.signature(a)
        assert s_sig.parameters == a_sig.parameters, name
        assert not inspect.iscoroutinefunction(s), name
        hints_s, hints_a = typing.get_type_hints(s), typing.get_type_hints(a)
        if name in ("scan", "events", "groups"):
            item = {"scan": dq.Entry, "events": dq.Event, "groups": dq.Group}[name]
            assert not inspect.iscoroutinefunction(a)
            assert hints_s["return"] == typing.Iterator[item]
            assert hints_a["return"] == typing.AsyncIterator[item]
            assert {k: v for k, v in hints_s.items() if k != "return"} == {
                k: v for k, v in hints_a.items() if k != "return"}
        elif name != "shard_for":
            assert inspect.iscoroutinefunction(a), name
            assert hints_s == hints_a, name
    assert dq.queues.__doc__ == dqa.queues.__doc__ and dq.queues.__doc__


def test_the_workers_take_the_same_arguments():
    assert inspect.signature(dq.Worker) == inspect.signature(dqa.Worker)
    assert public(dq.Worker) == public(dqa.Worker)
    assert inspect.iscoroutinefunction(dqa.Worker.run) and not inspect.iscoroutinefunction(dq.Worker.run)


# --- the same commands ------------------------------------------------------------------------

REPLIES: Dict[bytes, Callable[[Tuple[Any, ...]], Any]] = {
    b"DQ.ADD": lambda a: a[a.index(b"ID") + 1] if b"ID" in a else b"server-id",
    b"DQ.STATS": lambda a: [b"ready", 3, b"oldest-ready-age-ms", len(a[1]), b"next-due-at", None, b"paused", 0,
                            b"paused-until", None, b"rate", b"25/1s", b"max-inflight", 5, b"throttled", 2],
    b"DQ.CONFIG": lambda a: b"OK" if len(a) > 2 else [b"lease-ms", 30000, b"rate", b"25/1s", b"paused", 1,
                                                      b"paused-until", 99, b"throttled", 1],
    b"DQ.SCHEDULES": lambda a: [[b"name", a[1] + b"-s", b"spec", b"every 5m", b"runs", 0, b"payload", b"x"]],
    b"DQ.RESUME": lambda a: 1 if a[1].endswith(b"1") else 0,
    b"DQ.PEEK": lambda a: [[a[1] + b"-e", b"p", 1, len(a[1]), None]],
    b"DQ.POP": lambda a: [[a[1] + b"-d", b"p", 1]] if a[1].endswith(b"2") else [],
    b"DQ.ACK": lambda a: len(a) - 2,
    b"DQ.UNSCHEDULE": lambda a: len(a) - 2,
    b"DQ.GET": lambda a: [b"id", a[2], b"payload", b"p", b"attempt", 1] if a[1].endswith(b"3") else None,
    b"DQ.SCAN": lambda a: [b"0", [[a[1] + b"-s", b"p", 1, 5, b"err"]]],
    b"DQ.NACK": lambda a: b"ready" if a[2] != b"gone" else None,
    b"DQ.TOUCH": lambda a: 5,
    b"DQ.QUEUES": lambda a: [b"b", b"a"],
    b"DQ.WAIT": lambda a: [b"done", a[2] + b"-r"] if b"BLOCK" in a else None,
    b"DQ.DONE": lambda a: (len(a) - 2) // 2,
    b"DQ.EVENTS": lambda a: [2, [[1, 10, b"added", b"x", None, None], [2, 11, b"progress", b"x", 1, a[1]]]],
    # Two pages: the first empty (COUNT looked at groups MATCH left out), the second ends.
    b"DQ.GROUPS": lambda a: [b"6b", []] if a[2] == "0" else [b"0", [[a[1] + b"-g", 2, 1, 0, None],
                                                                   [b"h", 0, 0, 0, -1], [b"i", 1, 0, 0, 77]]],
}


class Fake:
    """A blocking client that records each command and answers it from REPLIES."""

    def __init__(self) -> None:
        self.sent: List[Tuple[Any, ...]] = []

    def execute_command(self, *args: Any, **options: Any) -> Any:
        if isinstance(args[0], str):
            args = (args[0].encode(),) + args[1:]
        self.sent.append(args)
        if args[0] == b"DQ.NACK" and args[2] == b"stale":
            raise redis.exceptions.ResponseError("STALE delivery 1 of message 'stale' is over")
        return REPLIES.get(args[0], lambda a: 1)(args)


class AsyncFake(Fake):
    async def execute_command(self, *args: Any, **options: Any) -> Any:  # type: ignore[override]
        return Fake.execute_command(self, *args, **options)


def calls(q: Any, sharded: bool) -> List[Tuple[str, Callable[[], Any]]]:
    first = q.shard_names[0] if sharded else q.name
    mine = dq.Delivery("a", b"p", 2, first)
    out = [
        ("add", lambda: q.add(b"p", id="a", group="g", delay_ms=5, priority=2, max_attempts=3, ttl_ms=9)),
        ("stats", q.stats), ("peek", lambda: q.peek("ready", count=3)),
        ("scan", lambda: q.scan(state="ready", count=5)),
        ("redrive", lambda: q.redrive(count=3)), ("redrive ids", lambda: q.redrive(ids=["a", "b"])),
        ("purge", lambda: q.purge("dead")), ("config", q.config),
        ("config_set", lambda: q.config_set(rate="100/1s", max_inflight=20, lease_ms=5000, max_attempts="DEFAULT")),
        ("schedule", lambda: q.schedule("daily", b"x", cron="0 8 * * *", tz="UTC", end=5, missed="one", nx=True)),
        ("unschedule", lambda: q.unschedule("daily", "other", "often")), ("schedules", q.schedules),
        ("pause", lambda: q.pause(for_ms=1000)), ("resume", q.resume),
        ("ack", lambda: q.ack("a", mine)), ("nack", lambda: q.nack(mine, error="e" * 5000, delay_ms=3)),
        ("nack stale", lambda: q.nack("stale", attempt=1)), ("nack gone", lambda: q.nack("gone")),
        ("touch", lambda: q.touch(mine, lease_ms=500)), ("get", lambda: q.get("a")),
        ("cancel", lambda: q.cancel("a", "b")), ("pop", lambda: q.pop(count=2, lease_ms=100)),
        ("bad add", lambda: q.add(b"x", id="i", nx=True, xx=True)), ("bad ack", lambda: q.ack()),
        ("bad peek", lambda: q.peek("soon")), ("bad scan", lambda: q.scan(state="soon")),
        ("bad redrive", lambda: q.redrive(ids="a")), ("bad config_set", lambda: q.config_set(rate="3/1s")),
        ("bad schedule", lambda: q.schedule("n", b"x", every="5m", tz="UTC")),
        ("foreign delivery", lambda: q.ack(dq.Delivery("a", b"p", 1, "elsewhere"))),
        ("add retained", lambda: q.add(b"p", id="r", retain_ms="1h")),
        ("done", lambda: q.done((mine, b"r1"), ("b", "r2"))), ("wait", lambda: q.wait("a", "2s")),
        ("wait once", lambda: q.wait("a")), ("progress", lambda: q.progress(mine, "40%", lease_ms=500)),
        ("config_set retain", lambda: q.config_set(retain_ms="1h", retain_max=8)), ("peek done", lambda: q.peek("done")),
        ("bad done", lambda: q.done("a", "r")), ("bad wait", lambda: q.wait("a", "1.5s")),
        ("bad progress", lambda: q.progress("a", b"p" * 65537)),
        ("events", lambda: q.events(follow=False, count=5)), ("bad events", lambda: q.events(count=0)),
        ("config_set events", lambda: q.config_set(events=1000)),
        ("config_set groups", lambda: q.config_set(group_limit=3, group_rate="10/1s", order="Fair")),
        ("config_set groups default", lambda: q.config_set(group_limit="DEFAULT", group_rate=0, order="DEFAULT")),
        ("bad group_limit", lambda: q.config_set(group_limit=0)),
        ("bad group_rate", lambda: q.config_set(group_rate="10")), ("bad order", lambda: q.config_set(order="lifo")),
        ("pause group", lambda: q.pause("5s", group="g")), ("resume group", lambda: q.resume(group="g")),
        ("bad pause group", lambda: q.pause(group="")),
        ("groups", lambda: q.groups(match="t*", count=7)), ("bad groups", lambda: q.groups(count=0)),
    ]
    if not sharded:  # (a ShardedQueue makes a random id)
        out.append(("add without id", lambda: q.add("p", at_ms=5, nx=True)))
    if sharded:
        out += [
            ("add by shard key", lambda: q.add(b"p", id="c", shard_key="k")),
            ("nack by group", lambda: q.nack("a", group="g")), ("get by group", lambda: q.get("a", group="g")),
            ("cancel by shard key", lambda: q.cancel("a", shard_key="k")), ("pop round", lambda: q.pop(count=5)),
        ]
    return out


def q_names(sharded: bool) -> List[str]:
    """The dq queues of record()'s queue."""
    return list(dq.ShardedQueue(Fake(), "sq", shards=4).shard_names) if sharded else ["q"]


def outcome(value: Any) -> Any:
    if isinstance(value, list):
        return [outcome(v) for v in value]
    if isinstance(value, dq.Delivery):
        return (value.id, value.payload, value.attempt, value.queue)
    return value


def record(flavor: Any, sharded: bool) -> List[Tuple[str, Any, Any]]:
    """What each call of calls() sent and returned (or raised)."""
    fake = AsyncFake() if flavor is dqa else Fake()
    q = flavor.ShardedQueue(fake, "sq", shards=4) if sharded else flavor.Queue(fake, "q")

    async def run() -> List[Tuple[str, Any, Any]]:
        out = []
        for what, call in calls(q, sharded) + [("queues", lambda: flavor.queues(fake))]:
            fake.sent.clear()
            try:
                result = call()
                if what in ("scan", "events", "groups"):
                    result = [e async for e in result] if flavor is dqa else list(result)
                    if what == "events":
                        # A ShardedQueue's readers run side by side: no order between shards.
                        result.sort()
                        fake.sent.sort()
                elif inspect.isawaitable(result):
                    result = await result
                result = outcome(result)
            except Exception as e:
                result = (type(e), str(e))
            out.append((what, list(fake.sent), result))
        return out

    return asyncio.run(run())


@pytest.mark.parametrize("sharded", [False, True], ids=["queue", "sharded"])
def test_both_flavors_send_the_same_commands_and_return_the_same(sharded):
    sync, aio = record(dq, sharded), record(dqa, sharded)
    for s, a in zip(sync, aio):
        assert s == a
    assert len(sync) == len(aio)
    by_name = {what: (sent, result) for what, sent, result in sync}
    if sharded:
        # The whole queue's limits, split over 4 shards; one command per shard.
        sent, _ = by_name["config_set"]
        assert [args[3:] for args in sent] == [
            (b"LEASE", 5000, b"MAXATTEMPTS", b"DEFAULT", b"RATE", b"25/1s", b"MAXINFLIGHT", b"5")] * 4
        assert by_name["stats"][1]["rate"] == "100/1s" and by_name["config"][1]["throttled"] == 4
        assert by_name["bad config_set"][1][0] is ValueError
        assert by_name["redrive"][1] == 3 and [args[3] for args in by_name["redrive"][0]] == [3, 2, 1]
        assert [args[3:] for args in by_name["config_set retain"][0]] == [
            (b"RETAIN", 3600000, b"RETAINMAX", b"2")] * 4
    else:
        assert by_name["add"][0] == [(b"DQ.ADD", b"q", b"p", b"DELAY", 5, b"ID", b"a", b"PRIORITY", 2,
                                      b"MAXATTEMPTS", 3, b"GROUP", b"g", b"TTL", 9)]
        assert by_name["nack"][0][0][-1] == b"e" * 4096
        assert by_name["done"] == ([(b"DQ.DONE", b"q", b"a", b"r1", b"b", b"r2")], 2)
        assert by_name["wait"] == ([(b"DQ.WAIT", b"q", b"a", b"BLOCK", 2000)], dq.JobOutcome("done", result=b"a-r"))
        assert by_name["progress"][0] == [(b"DQ.TOUCH", b"q", b"a", b"LEASE", 500, b"ATTEMPT", 2, b"PROGRESS", b"40%")]
    # Each shard's log read from its oldest event, the reply read into Events; EVENTS is not split.
    parts = [s.encode() for s in q_names(sharded)]
    assert by_name["events"] == (
        [(b"DQ.EVENTS", p, b"COUNT", 5) for p in parts],
        sorted(e for p in parts for e in [dq.Event(1, 10, "added", "x", None, None, p.decode()),
                                          dq.Event(2, 11, "progress", "x", 1, p, p.decode())]))
    assert [args[2:] for args in by_name["config_set events"][0]] == [(b"SET", b"EVENTS", b"1000")] * len(parts)
    assert by_name["nack stale"][1][0] is dq.StaleDelivery
    assert by_name["nack gone"][1][0] is dq.UnknownMessage
    for bad in ("bad done", "bad wait", "bad progress", "bad events"):
        assert by_name[bad][0] == [] and by_name[bad][1][0] in (TypeError, ValueError), bad
    assert by_name["queues"] == ([(b"DQ.QUEUES",)], ["b", "a"])  # a server's own order
    # The group settings go to every part as given (a group lives on one shard: never split).
    assert [args[2:] for args in by_name["config_set groups"][0]] == [
        (b"SET", b"GROUPLIMIT", b"3", b"GROUPRATE", b"10/1s", b"ORDER", b"FAIR")] * len(parts)
    assert [args[2:] for args in by_name["config_set groups default"][0]] == [
        (b"SET", b"GROUPLIMIT", b"DEFAULT", b"GROUPRATE", b"0", b"ORDER", b"DEFAULT")] * len(parts)
    for bad in ("bad group_limit", "bad group_rate", "bad order", "bad pause group", "bad groups"):
        assert by_name[bad][0] == [] and by_name[bad][1][0] is ValueError, bad
    # A group's pause goes to the one part holding the group: the shard add() puts it on.
    holder = q_names(sharded)[dq.ShardedQueue(Fake(), "sq", shards=4).shard_for("g") if sharded else 0].encode()
    assert by_name["pause group"] == ([(b"DQ.PAUSE", holder, b"FOR", 5000, b"GROUP", b"g")], None)
    # (The fake's RESUME replies 1 on a part whose name ends in 1.)
    assert by_name["resume group"] == ([(b"DQ.RESUME", holder, b"GROUP", b"g")], holder.endswith(b"1"))
    # Every part's groups in turn, each followed to cursor 0.
    assert by_name["groups"] == (
        [(b"DQ.GROUPS", p, c, b"MATCH", b"t*", b"COUNT", 7) for p in parts for c in ("0", "6b")],
        [g for p in parts for g in [dq.Group(p.decode() + "-g", 2, 1, 0, False, None),
                                    dq.Group("h", 0, 0, 0, True, None), dq.Group("i", 1, 0, 0, True, 77)]])


# --- plans ---------------------------------------------------------------------------------------


class Broken(Fake):
    def execute_command(self, *args: Any, **options: Any) -> Any:
        if args[0] == "BREAK":
            raise redis.exceptions.ConnectionError("gone")
        return super().execute_command(*args, **options)


def test_a_connection_error_is_thrown_into_the_plan():
    def plan() -> Plan[str]:
        try:
            yield from one(Call(("BREAK",), str))
        except redis.exceptions.ConnectionError as e:
            return f"caught {e}"
        return "not raised"

    assert drive(Broken(), plan()) == "caught gone"
    with pytest.raises(redis.exceptions.ConnectionError):
        drive(Broken(), one(Call(("BREAK",), str)))


def test_all_of_sends_each_round_together_and_raises_the_first_error_after_it():
    fake = Fake()

    def two(name: bytes) -> Plan[int]:
        first = yield from one(Call((b"DQ.ACK", name, b"x"), int))
        second = yield from one(Call((b"DQ.ACK", name, b"x", b"y"), int))
        return first + second

    assert drive(fake, all_of([two(b"a"), two(b"b")])) == [3, 3]
    assert [args[1:] for args in fake.sent] == [(b"a", b"x"), (b"b", b"x"), (b"a", b"x", b"y"), (b"b", b"x", b"y")]
    fake.sent.clear()
    stale = [one(Call((b"DQ.NACK", b"q", b"stale"), str)), one(Call((b"DQ.ACK", b"q", b"x"), int))]
    with pytest.raises(dq.StaleDelivery):
        drive(fake, all_of(stale))
    assert len(fake.sent) == 2  # the ACK went out all the same
