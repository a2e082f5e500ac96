"""Schedules, pause/resume and the RATE/MAXINFLIGHT limits, on Queue and
ShardedQueue (blocking and asyncio) against a real standalone server."""

from __future__ import annotations

import pytest

import dq
import dq.asyncio as dqa

from conftest import now_ms, wait_for

HOUR = 3_600_000


def test_schedule_every_shows_every_field(any_r, name):
    q = dq.Queue(any_r, name)
    start = now_ms() + HOUR
    nxt = q.schedule("tick", b"\x00tick", every="1m", start=start, end=start + 10 * HOUR, limit=5, missed="all",
                     overlap="skip", priority=2, max_attempts=3, backoff="fixed:1s", group="g", ttl_ms=60_000)
    assert nxt == start
    (s,) = q.schedules()
    assert s == dq.Schedule(name="tick", spec="every 1m", tz="UTC", next_run=start, last_run=None, runs=0,
                            skipped=0, limit=5, start=start, end=start + 10 * HOUR, missed="all", overlap="skip",
                            payload=b"\x00tick", priority=2, max_attempts=3, backoff="fixed:1s", group="g",
                            ttl=60_000)
    assert q.stats()["schedules"] == 1


def test_schedule_cron_in_a_zone_and_nx(r, name):
    q = dq.Queue(r, name)
    nxt = q.schedule("digest", "x", cron="0 8 * * *", tz="Europe/Berlin")
    assert isinstance(nxt, int) and nxt > now_ms()
    (s,) = q.schedules()
    assert (s.spec, s.tz, s.next_run, s.missed, s.overlap, s.limit, s.end) == (
        "cron 0 8 * * *", "Europe/Berlin", nxt, "one", "allow", None, None)
    assert (s.priority, s.max_attempts, s.backoff, s.group, s.ttl) == (0, None, None, None, None)
    # NX leaves the schedule as it is, and says so with None.
    assert q.schedule("digest", "other", every=60_000, nx=True) is None
    assert [x.payload for x in q.schedules()] == [b"x"]
    # Replacing it keeps its name, with the new spec.
    q.schedule("digest", "y", every=60_000, start=now_ms() + HOUR)
    assert [(x.spec, x.payload) for x in q.schedules()] == [("every 1m", b"y")]


def test_a_schedule_runs_and_unschedule_keeps_its_messages(r, name):
    q = dq.Queue(r, name)
    q.schedule("now", "run", every="1h")  # START defaults to now: the first run is at once
    run = wait_for(lambda: q.peek("ready"), what="the first run")
    assert run[0].id.startswith("now@") and run[0].payload == b"run"
    (s,) = q.schedules()
    assert s.runs == 1 and s.last_run == int(run[0].id.split("@")[1])
    assert q.unschedule("now", "absent", "now") == 1
    assert q.schedules() == []
    assert q.stats()["ready"] == 1


def test_schedule_arguments_are_checked_before_anything_is_sent(r, name):
    q = dq.Queue(r, name)
    bad = [
        ({}, ValueError, "exactly one of every"),
        ({"every": "1m", "cron": "* * * * *"}, ValueError, "exactly one of every"),
        ({"every": "1m", "tz": "UTC"}, ValueError, "tz needs cron"),
        ({"every": True}, TypeError, "every must be a duration"),
        ({"every": 0}, ValueError, "every must be from 1"),
        ({"every": ""}, ValueError, "every must be a duration"),
        ({"cron": 5}, TypeError, "cron must be a str"),
        ({"every": "1m", "missed": "sometimes"}, ValueError, "missed must be one of skip, one, all"),
        ({"every": "1m", "overlap": "never"}, ValueError, "overlap must be one of allow, skip"),
        ({"every": "1m", "start": 10, "end": 5}, ValueError, "start must not be after end"),
        ({"every": "1m", "limit": 0}, ValueError, "limit must be from 1"),
        ({"every": "1m", "nx": 1}, TypeError, "nx must be a bool"),
        ({"every": "1m", "priority": 2**31}, ValueError, "priority must be from"),
    ]
    for options, error, text in bad:
        with pytest.raises(error, match=text):
            q.schedule("s", "p", **options)
    with pytest.raises(ValueError, match="schedule name must not be empty"):
        q.schedule("", "p", every="1m")
    with pytest.raises(ValueError, match="longer than 1007 bytes"):
        q.schedule("n" * 1008, "p", every="1m")
    with pytest.raises(ValueError, match="at least one name"):
        q.unschedule()
    with pytest.raises(ValueError, match="every must be from 1000"):
        q.schedule("s", "p", every="10ms")
    # What only the server checks comes back as its error, and changes nothing.
    with pytest.raises(dq.DqError, match="TZ must be an IANA time zone"):
        q.schedule("s", "p", cron="0 8 * * *", tz="Mars/Olympus")
    assert q.schedules() == [] and r.exists(name) == 0


def test_pause_and_resume(r, name):
    q = dq.Queue(r, name)
    q.add("x", id="x")
    assert q.pause() is None
    assert q.pop() == []
    stats, config = q.stats(), q.config()
    assert (stats["paused"], stats["paused-until"]) == (1, None)
    assert (config["paused"], config["paused-until"]) == (1, None)
    assert q.resume() is True
    assert q.resume() is False
    assert [d.id for d in q.pop()] == ["x"]
    before = now_ms()
    q.pause(for_ms=HOUR)
    until = q.stats()["paused-until"]
    assert before + HOUR <= until <= now_ms() + HOUR
    assert q.config()["paused-until"] == until
    with pytest.raises(ValueError, match="for_ms must be from 1"):
        q.pause(for_ms=0)
    with pytest.raises(ValueError, match="for_ms must be a duration"):
        q.pause(for_ms="1 h")
    with pytest.raises(TypeError, match="for_ms must be a duration"):
        q.pause(for_ms=1.5)


def test_rate_and_max_inflight(r, name):
    q = dq.Queue(r, name)
    for i in range(5):
        q.add("x", id=f"m{i}")
    q.config_set(rate="100/1s", max_inflight=2)
    config, stats = q.config(), q.stats()
    assert (config["rate"], config["max-inflight"], stats["rate"], stats["max-inflight"]) == ("100/1s", 2, "100/1s", 2)
    got = q.pop(count=5)
    assert len(got) == 2  # MAXINFLIGHT
    assert q.stats()["throttled"] == 1 and q.config()["throttled"] == 1
    q.config_set(max_inflight=0, rate=0)
    assert (q.config()["rate"], q.config()["max-inflight"]) == (None, None)
    assert len(q.pop(count=5)) == 3
    q.config_set(rate="5000/1h", max_inflight=7)
    q.config_set(rate="DEFAULT", max_inflight="DEFAULT")
    assert (q.stats()["rate"], q.stats()["max-inflight"]) == (None, None)
    for options, error, text in [
        ({"rate": "fast"}, ValueError, "rate must be n/duration"),
        ({"rate": 5}, ValueError, "rate must be a str such as '100/1s', or 0"),
        ({"rate": 1.5}, TypeError, "rate must be a str"),
        ({"max_inflight": -1}, ValueError, "max_inflight must be from 0"),
        ({"max_inflight": "ten"}, ValueError, "max_inflight must be an int or 'DEFAULT'"),
        ({}, ValueError, "at least one of"),
    ]:
        with pytest.raises(error, match=text):
            q.config_set(**options)
    with pytest.raises(ValueError, match="rate must be n/duration"):
        q.config_set(rate="10/0s")  # the window, by the duration grammar
    with pytest.raises(dq.DqError, match="RATE"):
        q.config_set(rate="2000000/1s")  # n over the server's limit: its refusal changes nothing
    assert q.config()["rate"] is None


def test_sharded_schedules_live_on_the_shard_of_their_name(r, name):
    s = dq.ShardedQueue(r, name, shards=4)
    names = [f"job-{i}" for i in range(12)]
    for n in reversed(names):
        assert s.schedule(n, n, every="1h", start=now_ms() + HOUR) is not None
    for n in names:
        held = [x.name for x in s.shards[s.shard_for(n)].schedules()]
        assert n in held
    assert len({s.shard_for(n) for n in names}) > 1
    assert [x.name for x in s.schedules()] == sorted(names)
    assert s.stats()["schedules"] == 12
    assert s.unschedule(*names[:5], "absent") == 5
    assert [x.name for x in s.schedules()] == sorted(names[5:])


def test_sharded_pause_and_limits_cover_every_shard(r, name):
    s = dq.ShardedQueue(r, name, shards=4)
    s.pause()
    assert all(shard.stats()["paused"] == 1 for shard in s.shards)
    assert (s.stats()["paused"], s.stats()["paused-until"]) == (1, None)
    assert s.resume() is True and s.resume() is False
    assert s.stats()["paused"] == 0
    s.shards[2].pause(for_ms=HOUR)
    assert s.stats()["paused"] == 1 and s.stats()["paused-until"] > now_ms()
    assert s.resume() is True

    # The whole queue's limits, split: floor(n / 4) each.
    s.config_set(rate="102/1s", max_inflight=10)
    assert [shard.config()["rate"] for shard in s.shards] == ["25/1s"] * 4
    assert [shard.config()["max-inflight"] for shard in s.shards] == [2] * 4
    config, stats = s.config(), s.stats()
    assert (config["rate"], config["max-inflight"], stats["rate"], stats["max-inflight"]) == ("100/1s", 8, "100/1s", 8)
    # Fewer than one per shard is refused, and changes nothing.
    with pytest.raises(ValueError, match="rate 3 cannot be split over 4 shards"):
        s.config_set(rate="3/1s", lease_ms=5000)
    with pytest.raises(ValueError, match="max_inflight 2 cannot be split over 4 shards"):
        s.config_set(max_inflight=2)
    assert (s.config()["rate"], s.config()["max-inflight"], s.config()["lease-ms"]) == ("100/1s", 8, 30000)
    # A shard set apart shows as the shards' list.
    s.shards[0].config_set(rate="1/1m")
    assert s.config()["rate"] == "1/1m,25/1s,25/1s,25/1s"
    s.config_set(rate=0, max_inflight="DEFAULT")
    assert all((shard.config()["rate"], shard.config()["max-inflight"]) == (None, None) for shard in s.shards)
    assert (s.stats()["rate"], s.stats()["max-inflight"]) == (None, None)


@pytest.mark.asyncio
async def test_asyncio_schedules_pause_and_limits(ar, name):
    q = dqa.Queue(ar, name)
    start = now_ms() + HOUR
    assert await q.schedule("a", "p", every=60_000, start=start) == start
    assert await q.schedule("b", "p", cron="*/5 * * * *") > now_ms()
    assert [s.name for s in await q.schedules()] == ["a", "b"]
    assert await q.unschedule("a", "b") == 2
    await q.add("x")
    await q.pause()
    assert await q.pop() == [] and (await q.stats())["paused"] == 1
    assert await q.resume() is True
    await q.config_set(rate="10/1s", max_inflight=1)
    assert ((await q.config())["rate"], (await q.stats())["max-inflight"]) == ("10/1s", 1)

    s = dqa.ShardedQueue(ar, name + "-s", shards=2)
    await s.schedule("nightly", "p", cron="0 3 * * *", tz="UTC")
    assert [x.name for x in await s.shards[s.shard_for("nightly")].schedules()] == ["nightly"]
    assert [x.name for x in await s.schedules()] == ["nightly"]
    assert await s.unschedule("nightly") == 1
    await s.config_set(max_inflight=5)
    assert (await s.config())["max-inflight"] == 4
    with pytest.raises(ValueError, match="cannot be split over 2 shards"):
        await s.config_set(rate="1/1s")
    await s.pause(for_ms=HOUR)
    assert (await s.stats())["paused"] == 1
    assert await s.resume() is True
