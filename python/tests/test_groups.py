"""Groups (docs/commands.md, "Groups: limits, fair order, pauses"): the
settings config_set(group_limit=, group_rate=, order=) and config()'s
fields, GROUPLIMIT holding a group's deliveries, pause(group=) and
resume(group=), groups() following DQ.GROUPS' cursor to the end, stats'
`groups` and the paused/resumed events naming the group; on a standalone
server with dq and dq.asyncio, and a ShardedQueue on the cluster, where a
group lives on one shard."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable, Dict, List, Tuple

import pytest

import dq
import dq.asyncio as dqa

from conftest import await_for, now_ms, wait_for

HOUR = 3_600_000
GROUP_FIELDS = ("group-limit", "group-rate", "order")


def group_config(config: Dict[str, Any]) -> Tuple[Any, ...]:
    return tuple(config[k] for k in GROUP_FIELDS)


class Spy:
    """Counts the commands a client sends, by name (monkeypatched onto it)."""

    def __init__(self, client: Any, monkeypatch: Any) -> None:
        self.sent: List[bytes] = []
        real = client.execute_command

        def execute_command(*args: Any, **options: Any) -> Any:
            self.sent.append(args[0].encode() if isinstance(args[0], str) else args[0])
            return real(*args, **options)

        monkeypatch.setattr(client, "execute_command", execute_command)

    def count(self, command: bytes) -> int:
        return sum(1 for c in self.sent if c.upper() == command)


# --- settings -------------------------------------------------------------------------------------


def test_config_set_and_config_round_trip_the_group_fields(any_r, name):
    q = dq.Queue(any_r, name)
    q.add("x")
    assert group_config(q.config()) == (1, None, "priority")
    assert q.config_set(group_limit=3, group_rate="10/1s", order="Fair") is None
    assert group_config(q.config()) == (3, "10/1s", "fair")
    q.config_set(order="PRIORITY", group_rate="5/250ms")
    assert group_config(q.config()) == (3, "5/250ms", "priority")
    q.config_set(group_limit="DEFAULT", group_rate=0, order="fair")
    assert group_config(q.config()) == (1, None, "fair")
    q.config_set(group_limit=1_000_000, group_rate="7/1m", order="DEFAULT")
    assert group_config(q.config()) == (1_000_000, "7/1m", "priority")
    q.config_set(group_rate="DEFAULT")
    assert q.config()["group-rate"] is None
    # The other fields are as they were: the record just has three more.
    assert q.config()["lease-ms"] == 30000 and q.config()["events"] == 0


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda q: q.config_set(group_limit=0), ValueError, "group_limit must be from 1 to 1000000"),
        (lambda q: q.config_set(group_limit=1_000_001), ValueError, "group_limit must be from 1 to 1000000"),
        (lambda q: q.config_set(group_limit="5"), ValueError, "group_limit must be an int from 1 to 1000000 or"),
        (lambda q: q.config_set(group_limit=2.0), TypeError, "group_limit must be an int"),
        (lambda q: q.config_set(group_rate="10"), ValueError, "group_rate must be n/duration"),
        (lambda q: q.config_set(group_rate="10/1 s"), ValueError, "group_rate must be n/duration"),
        (lambda q: q.config_set(group_rate="10/0s"), ValueError, "group_rate must be n/duration"),
        (lambda q: q.config_set(group_rate=5), ValueError, "group_rate must be a str such as"),
        (lambda q: q.config_set(order="lifo"), ValueError, "order must be one of priority, fair"),
        (lambda q: q.config_set(order=1), TypeError, "order must be a str"),
        # One bad value sends none of the good ones.
        (lambda q: q.config_set(lease_ms=5000, group_limit=3, order="round-robin"), ValueError, "order must be"),
        (lambda q: q.pause(group=""), ValueError, "group must not be empty"),
        (lambda q: q.pause(group="g" * 1025), ValueError, "group is longer than 1024 bytes"),
        (lambda q: q.resume(group=""), ValueError, "group must not be empty"),
        (lambda q: q.groups(count=0), ValueError, "count must be from 1 to 10000"),
        (lambda q: q.groups(count=10_001), ValueError, "count must be from 1 to 10000"),
        (lambda q: q.groups(match=5), TypeError, "match must be str or bytes"),
    ],
)
def test_bad_group_arguments_raise_and_send_nothing(r, name, monkeypatch, call, error, message):
    q = dq.Queue(r, name)
    q.add("keep", id="a", group="g")
    before = q.config()
    spy = Spy(r, monkeypatch)
    with pytest.raises(error, match=message):
        call(q)
    assert spy.sent == []
    monkeypatch.undo()
    assert q.config() == before and q.get("a")["payload"] == b"keep"


# --- what they do ---------------------------------------------------------------------------------


def test_group_limit_2_lets_2_of_a_group_out_at_once(r, name):
    q = dq.Queue(r, name)
    q.config_set(group_limit=2)
    for i in range(5):
        q.add(f"p{i}", id=f"g-{i}", group="g")
    q.add("free", id="free")
    got = q.pop(count=5, lease_ms="1h")
    assert sorted(d.id for d in got) == ["free", "g-0", "g-1"]
    assert q.pop(count=5) == []
    assert q.stats()["delayed"] == 3  # the three held back count as delayed
    # A place freed: the group's earliest waiting message is ready at once.
    assert q.ack(*[d for d in got if d.id == "g-0"]) == 1
    assert [d.id for d in q.pop(count=5, lease_ms="1h")] == ["g-2"]
    assert q.pop(count=5) == []
    # Raising the limit lets more out at once.
    q.config_set(group_limit=4)
    assert sorted(d.id for d in q.pop(count=5)) == ["g-3", "g-4"]


def test_order_fair_serves_the_groups_in_turn(r, name):
    q = dq.Queue(r, name)
    q.config_set(order="fair", group_limit=10)
    for i in range(6):
        q.add("a", id=f"a-{i}", group="a", priority=5)  # priority would take all of a first
    for i in range(2):
        q.add("b", id=f"b-{i}", group="b")
    got = [d.id.split("-")[0] for d in q.pop(count=4)]
    assert sorted(got) == ["a", "a", "b", "b"]


def test_pause_group_holds_that_group_while_another_flows(r, name):
    q = dq.Queue(r, name)
    q.config_set(events=100, group_limit=10)
    for i in range(3):
        q.add("x", id=f"held-{i}", group="held")
        q.add("x", id=f"free-{i}", group="free")
    assert q.pause(group="held") is None
    assert q.stats()["paused"] == 0  # the queue itself is not paused
    got = q.pop(count=10, lease_ms="1h")
    assert sorted(d.id for d in got) == ["free-0", "free-1", "free-2"]
    assert q.pop(count=10) == []
    listed = {g.name: g for g in q.groups()}
    assert listed["held"] == dq.Group("held", 3, 0, 0, True, None)
    assert listed["free"] == dq.Group("free", 0, 0, 3, False, None)
    # More of the paused group wait too; the others' go out.
    q.add("x", id="free-3", group="free")
    assert [d.id for d in q.pop(count=10)] == ["free-3"]
    assert q.resume(group="held") is True
    assert q.resume(group="held") is False
    assert q.resume(group="never") is False
    assert sorted(d.id for d in q.pop(count=10)) == ["held-0", "held-1", "held-2"]
    # A pause FOR runs out by itself.
    q.add("x", id="later", group="held")
    q.pause("300ms", group="held")
    paused = {g.name: g for g in q.groups()}["held"]
    assert paused.paused and paused.paused_until is not None and paused.paused_until <= now_ms() + 300
    assert q.pop() == []
    assert [d.id for d in wait_for(lambda: q.pop(), what="the group's pause to run out")] == ["later"]
    # The queue's own pause and the group's are told apart in the events.
    q.pause()
    q.resume()
    pauses = [(e.type, e.detail) for e in q.events(follow=False) if e.type in ("paused", "resumed")]
    assert pauses == [("paused", b"held"), ("resumed", b"held"), ("paused", b"held"), ("paused", None),
                      ("resumed", None)]


def expected_groups(q: dq.Queue) -> Tuple[Dict[str, dq.Group], int, int]:
    """250 groups with 1 to 4 messages each (GROUPLIMIT 2), some of them in
    flight, some paused; one group with no message but a pause, one whose
    name is not UTF-8. Returns what groups() must give, by name, and the
    span of the timed pause's end."""
    q.config_set(group_limit=2)
    sizes: Dict[str, int] = {}
    for i in range(250):
        g = f"group-{i:03}"
        sizes[g] = i % 4 + 1
        for k in range(sizes[g]):
            q.add("x", id=f"{g}/{k}", group=g)
    q.add("x", id="bin", group=b"\xffbin")
    inflight: Dict[str, int] = defaultdict(int)
    for d in q.pop(count=300, lease_ms="1h"):
        inflight[d.id.split("/")[0]] += 1
    before = now_ms() + HOUR
    want: Dict[str, dq.Group] = {}
    for i, (g, n) in enumerate(sizes.items()):
        out = min(n, 2)
        if i % 10 == 0:
            q.pause(group=g)
            want[g] = dq.Group(g, n - inflight[g], 0, inflight[g], True, None)
        elif i % 10 == 5:
            q.pause(for_ms=HOUR, group=g)
            want[g] = dq.Group(g, n - inflight[g], 0, inflight[g], True, -1)  # -1: checked against the span
        else:
            want[g] = dq.Group(g, n - out, out - inflight[g], inflight[g], False, None)
    after = now_ms() + HOUR
    q.pause(group="paused-empty")
    want["paused-empty"] = dq.Group("paused-empty", 0, 0, 0, True, None)
    name = b"\xffbin".decode("utf-8", "surrogateescape")  # as ids that are not UTF-8
    want[name] = dq.Group(name, 0, 1 - inflight["bin"], inflight["bin"], False, None)
    return want, before, after


def check_groups(got: List[dq.Group], want: Dict[str, dq.Group], before: int, after: int) -> None:
    assert [g.name for g in got] == sorted(want, key=lambda n: n.encode("utf-8", "surrogateescape"))
    for g in got:
        w = want[g.name]
        if w.paused_until == -1:
            assert g.paused and before <= g.paused_until <= after, g
            g = g._replace(paused_until=-1)
        assert g == w


def test_groups_lists_every_group_page_by_page(r, name, monkeypatch):
    q = dq.Queue(r, name)
    assert list(q.groups()) == [] and q.stats()["groups"] == 0
    want, before, after = expected_groups(q)
    spy = Spy(r, monkeypatch)
    got = list(q.groups(count=7))
    assert all(isinstance(g, dq.Group) for g in got)
    assert spy.count(b"DQ.GROUPS") >= 252 // 7  # paging happened, and was followed to the end
    monkeypatch.undo()
    check_groups(got, want, before, after)
    assert q.stats()["groups"] == 252
    matched = list(q.groups(match="group-1*", count=10_000))
    assert [g.name for g in matched] == [f"group-{i}" for i in range(100, 200)]
    assert list(q.groups(match=b"\xff*")) == [want[b"\xffbin".decode("utf-8", "surrogateescape")]]
    # A group with nothing left and no pause is gone.
    assert q.resume(group="paused-empty") is True
    assert "paused-empty" not in {g.name for g in q.groups()} and q.stats()["groups"] == 251


def test_groups_with_every_client_form(any_r, name):
    q = dq.Queue(any_r, name)
    q.add("x", id="a", group="tenant-é")
    q.add("x", id="b", group="tenant-é")
    q.pause(for_ms=HOUR, group="tenant-2")
    (a, b) = list(q.groups(match="tenant-*"))
    assert a == dq.Group("tenant-2", 0, 0, 0, True, a.paused_until) and a.paused_until > now_ms()
    assert b == dq.Group("tenant-é", 1, 1, 0, False, None)
    assert q.stats()["groups"] == 2


# --- asyncio --------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_asyncio_groups(ar, name):
    q = dqa.Queue(ar, name)
    assert [g async for g in q.groups()] == [] and (await q.stats())["groups"] == 0
    await q.config_set(group_limit=2, group_rate="100/1s", order="fair")
    assert group_config(await q.config()) == (2, "100/1s", "fair")
    with pytest.raises(ValueError, match="group_limit must be from 1"):
        await q.config_set(group_limit=0)
    with pytest.raises(ValueError, match="order must be one of"):
        await q.config_set(order="random")
    assert group_config(await q.config()) == (2, "100/1s", "fair")
    for i in range(5):
        await q.add("x", id=f"g-{i}", group="g")
    assert sorted(d.id for d in await q.pop(count=5, lease_ms="1h")) == ["g-0", "g-1"]
    for i in range(40):
        await q.add("x", id=f"t{i}", group=f"t{i:02}")
    await q.pause(group="t00")
    await q.pause("1h", group="t01")
    got = [g async for g in q.groups(count=7)]
    assert [g.name for g in got] == ["g"] + [f"t{i:02}" for i in range(40)]
    assert got[0] == dqa.Group("g", 3, 0, 2, False, None)
    assert got[1] == dqa.Group("t00", 1, 0, 0, True, None)
    assert got[2].paused and got[2].paused_until > now_ms() and got[2][:4] == ("t01", 1, 0, 0)
    assert got[3] == dqa.Group("t02", 0, 1, 0, False, None)
    assert (await q.stats())["groups"] == 41
    ids = {d.id for d in await q.pop(count=100)}
    assert "t0" not in ids and "t1" not in ids and len(ids) == 38
    assert await q.resume(group="t00") is True and await q.resume(group="t00") is False

    async def t0_out() -> List[Any]:
        return await q.pop()

    assert [d.id for d in await await_for(t0_out, what="t00 resumed")] == ["t0"]


# --- a ShardedQueue on the cluster: a group lives on one shard -----------------------------------


def shard_groups(s: Any) -> List[List[str]]:
    return [[g.name for g in shard.groups()] for shard in s.shards]


def test_sharded_groups_on_the_cluster(cluster, name):
    s = dq.ShardedQueue(cluster, name, shards=8)
    # Unsplit on every shard (rate would be split: 8/1s -> 1/1s each).
    s.config_set(group_limit=3, group_rate="8/1s", order="fair")
    assert [group_config(q.config()) for q in s.shards] == [(3, "8/1s", "fair")] * 8
    assert group_config(s.config()) == (3, "8/1s", "fair")
    s.config_set(group_rate=0, group_limit=2)
    assert [group_config(q.config()) for q in s.shards] == [(2, None, "fair")] * 8
    with pytest.raises(ValueError, match="group_limit must be from 1"):
        s.config_set(group_limit=1_000_001)

    for i in range(60):
        for k in range(i % 3 + 1):
            s.add("x", id=f"g{i}-{k}", group=f"g{i:02}")
    got = list(s.groups(count=7))
    assert sorted(g.name for g in got) == [f"g{i:02}" for i in range(60)]
    for g in got:
        n = int(g.name[1:]) % 3 + 1
        assert (g.waiting, g.ready, g.inflight, g.paused) == (n - min(n, 2), min(n, 2), 0, False), g
    # Each shard lists the groups it holds: those add() routes to it.
    for i, names in enumerate(shard_groups(s)):
        assert names == sorted(f"g{j:02}" for j in range(60) if s.shard_for(f"g{j:02}") == i)
    assert s.stats()["groups"] == 60 and sum(q.stats()["groups"] for q in s.shards) == 60

    # A group's pause reaches its shard only: a paused group exists even with no message.
    s.pause(group="empty-tenant")
    home = s.shard_for("empty-tenant")
    assert [("empty-tenant" in names) for names in shard_groups(s)] == [i == home for i in range(8)]
    assert s.stats()["paused"] == 0
    # and holds that group while the others flow.
    s.pause(group="g02")
    ids = set()
    while True:
        more = s.pop(count=200, lease_ms="1h")
        if not more:
            break
        ids.update(d.id for d in more)
    assert not any(i.startswith("g2-") for i in ids)
    assert len(ids) == sum(min(i % 3 + 1, 2) for i in range(60) if i != 2)
    assert {g.name: g for g in s.groups()}["g02"][1:] == (3, 0, 0, True, None)
    assert s.resume(group="g02") is True and s.resume(group="g02") is False
    assert sorted(d.id for d in s.pop(count=200)) == ["g2-0", "g2-1"]
    assert s.resume(group="empty-tenant") is True
    assert all("empty-tenant" not in names for names in shard_groups(s))


@pytest.mark.asyncio
async def test_sharded_groups_on_the_cluster_asyncio(acluster, name):
    s = dqa.ShardedQueue(acluster, name, shards=4)
    await s.config_set(group_limit=5, group_rate="4/1s", order="FAIR")
    assert [group_config(await q.config()) for q in s.shards] == [(5, "4/1s", "fair")] * 4
    assert group_config(await s.config()) == (5, "4/1s", "fair")
    for i in range(30):
        await s.add("x", id=f"a{i}", group=f"t{i:02}")
    assert sorted([g.name async for g in s.groups(count=3)]) == [f"t{i:02}" for i in range(30)]
    assert (await s.stats())["groups"] == 30
    await s.pause(group="absent")
    home = s.shard_for("absent")
    listed = [[g.name async for g in q.groups(match="absent")] for q in s.shards]
    assert listed == [["absent"] if i == home else [] for i in range(4)]
    assert await s.resume(group="absent") is True
    assert await s.resume(group="absent") is False
    assert [g async for g in s.groups(match="absent")] == []
