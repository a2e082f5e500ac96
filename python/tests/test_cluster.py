"""A sharded queue on the 3-master cluster (DQ_CLUSTER_NODES), sync and asyncio."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter, defaultdict
from typing import Any, Dict, List, Tuple

import pytest
import redis
import redis.asyncio.cluster
import redis.cluster

import dq
import dq.asyncio as dqa

from conftest import await_for, cluster_nodes, unblock_pops, wait_for
from test_events import Reader

SHARDS = 8
PER_SHARD_FREE = 200  # messages without a group, per shard
PER_GROUP = 50  # one group per shard
TOTAL = SHARDS * (PER_SHARD_FREE + PER_GROUP)  # 2000, an equal backlog in every shard


def plan(s: Any) -> List[Tuple[str, Any, int]]:
    """(id, group or None, seq): 250 messages per shard, 50 of them in one group."""
    groups: Dict[int, str] = {}
    j = 0
    while len(groups) < SHARDS:
        groups.setdefault(s.shard_for(f"group-{j}"), f"group-{j}")
        j += 1
    free: Dict[int, List[str]] = defaultdict(list)
    k = 0
    while min((len(free[i]) for i in range(SHARDS)), default=0) < PER_SHARD_FREE or len(free) < SHARDS:
        shard = s.shard_for(f"m{k}")
        if len(free[shard]) < PER_SHARD_FREE:
            free[shard].append(f"m{k}")
        k += 1
    out: List[Tuple[str, Any, int]] = []
    for n in range(PER_SHARD_FREE):
        for i in range(SHARDS):
            out.append((free[i][n], None, n))
            if n < PER_GROUP:
                out.append((f"{groups[i]}-{n}", groups[i], n))
    return out


def check_placement(cluster: Any, s: Any) -> None:
    """Every shard's key is on the master that owns its slot, and the shards use all three masters."""
    owners = set()
    for shard_name in s.shard_names:
        slot = cluster.keyslot(shard_name)
        assert slot == int(cluster.execute_command("CLUSTER KEYSLOT", shard_name, target_nodes=cluster.get_random_node()))
        node = cluster.get_node_from_key(shard_name)
        owners.add(node.name)
        direct = redis.Redis(host=node.host, port=node.port)
        try:
            assert direct.exists(shard_name) == 1, f"{shard_name} is not on {node.name}, the owner of slot {slot}"
            assert direct.type(shard_name) == b"dq--queue"
        finally:
            direct.close()
    assert len(owners) == 3, owners


def check_run(s_stats: Dict[str, Any], seen: List[Tuple[str, str, int]], messages: List[Tuple[str, Any, int]],
              shard_names: List[str]) -> None:
    ids = [i for _, i, _ in seen]
    assert len(ids) == TOTAL and len(set(ids)) == TOTAL, "every message delivered exactly once"
    assert all(attempt == 1 for _, _, attempt in seen)
    assert s_stats["acked"] == TOTAL and s_stats["delivered"] == TOTAL and s_stats["inflight"] == 0
    # Each group's messages were handled in add order.
    by_id = {m[0]: m for m in messages}
    order: Dict[str, List[int]] = defaultdict(list)
    for _, i, _ in seen:
        _, group, seq = by_id[i]
        if group is not None:
            order[group].append(seq)
    assert len(order) == SHARDS
    for group, seqs in order.items():
        assert seqs == list(range(PER_GROUP)), f"{group} out of order"
    # A fair share: after half the deliveries, every shard had >= 25% of its backlog delivered.
    first_half = Counter(q for q, _, _ in seen[: TOTAL // 2])
    per_shard = TOTAL // SHARDS
    for shard_name in shard_names:
        assert first_half[shard_name] >= per_shard // 4, (shard_name, dict(first_half))


def blocked_pops(cluster: Any) -> int:
    """How many clients are blocked in DQ.POP, over every master."""
    n = 0
    for node in cluster.get_primaries():
        direct = redis.Redis(host=node.host, port=node.port)
        try:
            n += sum(1 for c in direct.client_list() if c.get("cmd") == "dq.pop" and "b" in c.get("flags", ""))
        finally:
            direct.close()
    return n


def test_sharded_queue_on_the_cluster(cluster, name):
    s = dq.ShardedQueue(cluster, name, shards=SHARDS)
    messages = plan(s)
    for msg_id, group, seq in messages:
        assert s.add(f"{seq}", id=msg_id, group=group) == msg_id
    check_placement(cluster, s)
    assert set(s.shard_names) <= set(dq.queues(cluster))
    assert s.get(messages[1][0])["group"] == messages[1][1]

    seen: List[Tuple[str, str, int]] = []
    lock = threading.Lock()

    def handler(d: dq.Delivery) -> None:
        with lock:
            seen.append((d.queue, d.id, d.attempt))

    worker = dq.Worker(s, handler, concurrency=4, block_ms=200)  # a short BLOCK: at the end, pollers of empty shards hold permits while they wait
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        wait_for(lambda: len(seen) >= TOTAL, timeout=120, what=f"{TOTAL} deliveries")
        wait_for(lambda: s.stats()["acked"] == TOTAL, what="every ack")
    finally:
        worker.stop()
        thread.join(15)
    assert not thread.is_alive()
    check_run(s.stats(), seen, messages, s.shard_names)


def unblock_cluster_pops(cluster: Any) -> None:
    """Ends the DQ.POPs blocked on every master (a stopping worker waits for them)."""
    for node in cluster.get_primaries():
        direct = redis.Redis(host=node.host, port=node.port)
        try:
            unblock_pops([direct])
        finally:
            direct.close()


# The BLOCK of the next two tests: long enough that a message taken behind
# another shard's BLOCK could not be mistaken for one taken at once, however
# slow the machine. Their clients wait that long for a reply, and the stops
# end the BLOCKs with CLIENT UNBLOCK.
LONG_BLOCK_MS = 120_000
PATIENT_S = LONG_BLOCK_MS / 1000 + 60


def test_blocking_pops_do_not_share_a_connection(cluster, name):
    patient = redis.cluster.RedisCluster(
        startup_nodes=[redis.cluster.ClusterNode(h, p) for h, p in cluster_nodes()], socket_timeout=PATIENT_S
    )
    s = dq.ShardedQueue(patient, name, shards=SHARDS)
    before = blocked_pops(cluster)
    worker = dq.Worker(s, lambda d: None, concurrency=SHARDS, block_ms=LONG_BLOCK_MS)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        # One permit each: all eight pollers wait in DQ.POP at once, each on its own connection.
        wait_for(lambda: blocked_pops(cluster) - before == SHARDS, what="8 blocked POPs")
        # A message added to any shard is taken at once, not behind another shard's BLOCK.
        s.add("x", id="wake")
        wait_for(lambda: s.stats()["acked"] == 1, timeout=60, what="the ack")
    finally:
        worker.stop()
        wait_for(lambda: (unblock_cluster_pops(cluster), not thread.is_alive())[1], what="the worker to stop")
        patient.close()


@pytest.mark.asyncio
async def test_sharded_queue_on_the_cluster_asyncio(acluster, cluster, name):
    s = dqa.ShardedQueue(acluster, name, shards=SHARDS)
    messages = plan(s)
    # Round by round (a round holds one message of each group), each round's adds at once.
    rounds: Dict[int, List[Tuple[str, Any, int]]] = defaultdict(list)
    for m in messages:
        rounds[m[2]].append(m)
    for seq in sorted(rounds):
        await asyncio.gather(*[s.add(f"{n}", id=i, group=g) for i, g, n in rounds[seq]])
    check_placement(cluster, s)
    assert set(s.shard_names) <= set(await dqa.queues(acluster))

    seen: List[Tuple[str, str, int]] = []

    async def handler(d: dqa.Delivery) -> None:
        seen.append((d.queue, d.id, d.attempt))

    worker = dqa.Worker(s, handler, concurrency=4, block_ms=200)  # a short BLOCK: at the end, pollers of empty shards hold permits while they wait
    task = asyncio.ensure_future(worker.run())
    try:
        async def done() -> bool:
            return len(seen) >= TOTAL and (await s.stats())["acked"] == TOTAL

        await await_for(done, timeout=120, what=f"{TOTAL} acked deliveries")
    finally:
        worker.stop()
        await asyncio.wait_for(task, 15)
    check_run(await s.stats(), seen, messages, s.shard_names)


@pytest.mark.asyncio
async def test_blocking_pops_do_not_share_a_connection_asyncio(cluster, name):
    patient = redis.asyncio.cluster.RedisCluster(
        startup_nodes=[redis.asyncio.cluster.ClusterNode(h, p) for h, p in cluster_nodes()], socket_timeout=PATIENT_S
    )
    s = dqa.ShardedQueue(patient, name, shards=SHARDS)
    before = blocked_pops(cluster)
    worker = dqa.Worker(s, lambda d: None, concurrency=SHARDS, block_ms=LONG_BLOCK_MS)
    task = asyncio.ensure_future(worker.run())
    try:
        async def all_blocked() -> bool:
            return await asyncio.to_thread(blocked_pops, cluster) - before == SHARDS

        await await_for(all_blocked, what="8 blocked POPs")
        await s.add("x", id="wake")

        async def acked() -> bool:
            return (await s.stats())["acked"] == 1

        await await_for(acked, timeout=60, what="the ack")
    finally:
        worker.stop()

        async def stopped() -> bool:
            await asyncio.to_thread(unblock_cluster_pops, cluster)
            return task.done()

        await await_for(stopped, what="the worker to stop")
        await task
        await patient.aclose() if hasattr(patient, "aclose") else await patient.close()


def test_sharded_schedules_on_the_cluster(cluster, name):
    s = dq.ShardedQueue(cluster, name, shards=SHARDS)
    names = [f"report-{i}" for i in range(24)]
    for n in names:
        s.schedule(n, n, cron="0 6 * * *", tz="Europe/Paris")
    # Each schedule is in the key of its name's shard, on the master that owns that shard's slot.
    for n in names:
        shard_name = s.shard_names[s.shard_for(n)]
        node = cluster.get_node_from_key(shard_name)
        direct = redis.Redis(host=node.host, port=node.port)
        try:
            held = [x.name for x in dq.Queue(direct, shard_name).schedules()]
        finally:
            direct.close()
        assert n in held, (n, shard_name)
    assert len({s.shard_for(n) for n in names}) > 1
    assert [x.name for x in s.schedules()] == sorted(names)
    assert s.unschedule(*names) == len(names)
    assert s.schedules() == []


def blocked_on(cluster: Any, command: str) -> int:
    n = 0
    for node in cluster.get_primaries():
        direct = redis.Redis(host=node.host, port=node.port)
        try:
            n += sum(1 for c in direct.client_list() if c.get("cmd") == command and "b" in c.get("flags", ""))
        finally:
            direct.close()
    return n


def test_queues_of_one_slot_share_one_mpop_on_the_cluster(cluster, name):
    # A common {tag}: one DQ.MPOP over the three, in their order.
    qs = [dq.Queue(cluster, f"{{{name}}}{p}") for p in ("urgent", "normal", "bulk")]
    for q in reversed(qs):
        for i in range(5):
            q.add("x", id=f"{q.name}-{i}")
    seen: List[str] = []
    before = blocked_on(cluster, "dq.mpop")
    worker = dq.Worker(qs, lambda d: seen.append(d.queue), concurrency=1, block_ms=200)
    assert worker.pollers == [[q.name for q in qs]]
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        wait_for(lambda: sum(q.stats()["acked"] for q in qs) == 15, what="15 acks")
        wait_for(lambda: blocked_on(cluster, "dq.mpop") - before == 1, what="one blocked DQ.MPOP")
    finally:
        worker.stop()
        thread.join(15)
    assert not thread.is_alive()
    assert seen == [q.name for q in qs for _ in range(5)]


def test_queues_of_several_slots_get_a_poller_each_on_the_cluster(cluster, name):
    qs = [dq.Queue(cluster, f"{name}-{p}") for p in ("a", "b", "c")]
    assert len({cluster.keyslot(q.name) for q in qs}) == 3
    before = blocked_on(cluster, "dq.pop")
    worker = dq.Worker(qs, lambda d: None, concurrency=3, block_ms=200)
    assert worker.pollers == [[q.name] for q in qs]
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        for q in qs:
            q.add("x")
        wait_for(lambda: sum(q.stats()["acked"] for q in qs) == 3, what="3 acks")
        wait_for(lambda: blocked_on(cluster, "dq.pop") - before == 3, what="three blocked DQ.POPs")
    finally:
        worker.stop()
        thread.join(15)
    assert not thread.is_alive()


@pytest.mark.asyncio
async def test_asyncio_mpop_and_schedules_on_the_cluster(acluster, cluster, name):
    qs = [dqa.Queue(acluster, f"{{{name}}}{p}") for p in ("a", "b")]
    for q in reversed(qs):
        await q.add("x")
    seen: List[str] = []

    async def handler(d: dqa.Delivery) -> None:
        seen.append(d.queue)

    worker = dqa.Worker(qs, handler, concurrency=1, block_ms=200)
    assert worker.pollers == [[q.name for q in qs]]
    task = asyncio.ensure_future(worker.run())
    try:
        async def acked() -> bool:
            return sum([(await q.stats())["acked"] for q in qs]) == 2

        await await_for(acked, what="2 acks")
    finally:
        worker.stop()
        await asyncio.wait_for(task, 15)
    assert seen == [q.name for q in qs]
    assert dqa.Worker([dqa.Queue(acluster, name + "-a"), dqa.Queue(acluster, name + "-b")], handler).pollers == [
        [name + "-a"], [name + "-b"]]

    s = dqa.ShardedQueue(acluster, name, shards=SHARDS)
    await s.schedule("weekly", "p", cron="@weekly")
    assert [x.name for x in await s.shards[s.shard_for("weekly")].schedules()] == ["weekly"]
    assert [x.name for x in await s.schedules()] == ["weekly"]


# --- job outcomes on a sharded queue (issue 34) --------------------------------------------------


def outcome_ids(s: Any) -> Tuple[List[str], str, str]:
    """Ids in every shard (four each), and an id whose own shard is not its group's, with that group."""
    ids: List[str] = []
    per: Counter = Counter()
    k = 0
    while min((per[i] for i in range(SHARDS)), default=0) < 4 or len(per) < SHARDS:
        shard = s.shard_for(f"o{k}")
        if per[shard] < 4:
            ids.append(f"o{k}")
            per[shard] += 1
        k += 1
    grouped = next(f"g{j}" for j in range(1000) if s.shard_for(f"g{j}") != s.shard_for("customer:7"))
    return ids, grouped, "customer:7"


def test_sharded_outcomes_on_the_cluster(cluster, name):
    s = dq.ShardedQueue(cluster, name, shards=SHARDS)
    s.config_set(retain_ms="1h", retain_max=SHARDS * 100)
    # RETAINMAX is split as MAXINFLIGHT is: the cap holds for the whole queue.
    assert {shard.config()["retain-max"] for shard in s.shards} == {100}
    assert s.config()["retain-max"] == SHARDS * 100
    ids, grouped, group = outcome_ids(s)
    for i in ids:
        s.add(i, id=i)
    s.add("in a group", id=grouped, group=group)

    def handle(d: dq.Delivery) -> str:
        d.progress(f"on {d.queue}")  # to the delivery's own shard
        return f"result of {d.payload.decode()}"

    worker = dq.Worker(s, handle, concurrency=4, block_ms=200)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        # Each wait goes to the id's shard: the one add() put it in.
        outcomes = {i: s.wait(i, "30s") for i in ids}
        assert s.wait(grouped, "30s", group=group) == dq.JobOutcome("done", result=b"result of in a group")
    finally:
        worker.stop()
        thread.join(15)
    assert not thread.is_alive()
    assert outcomes == {i: dq.JobOutcome("done", result=f"result of {i}".encode()) for i in ids}
    # Without its group, the grouped message is looked for on its id's shard, which does not hold it.
    assert s.wait(grouped) == dq.JobOutcome("gone")
    got = s.get(ids[0])
    assert (got["state"], got["result"]) == ("done", f"result of {ids[0]}".encode())
    assert got["progress"] == f"on {s.shards[s.shard_for(ids[0])].name}".encode()
    stats = s.stats()
    assert (stats["done"], stats["acked"]) == (len(ids) + 1, len(ids) + 1)
    assert len(s.peek("done", count=100)) == len(ids) + 1
    # Code that pops by itself: progress and done go to each delivery's shard.
    for i in ids[:2]:
        s.add("again", id=i)
    popped = s.pop(count=2, lease_ms=60_000)
    assert len(popped) == 2
    for d in popped:
        s.progress(d, "by hand", lease_ms=60_000)
        assert s.get(d.id)["progress"] == b"by hand"
    assert s.done((popped[0], "first"), (popped[1].id, "second")) == 2  # a Delivery, and a bare id (every shard)
    assert s.wait(popped[1].id) == dq.JobOutcome("done", result=b"second")
    assert s.purge("done") == len(ids) + 1


@pytest.mark.asyncio
async def test_sharded_outcomes_on_the_cluster_asyncio(acluster, name):
    s = dqa.ShardedQueue(acluster, name, shards=SHARDS)
    await s.config_set(retain_ms="1h", retain_max=SHARDS * 100)
    ids, grouped, group = outcome_ids(s)
    await asyncio.gather(*[s.add(i, id=i) for i in ids], s.add("g", id=grouped, group=group))

    async def handle(d: dqa.Delivery) -> str:
        await d.progress("half way")
        return f"result of {d.id}"

    worker = dqa.Worker(s, handle, concurrency=4, block_ms=200)
    task = asyncio.ensure_future(worker.run())
    try:
        outcomes = await asyncio.gather(*[s.wait(i, "30s") for i in ids], s.wait(grouped, "30s", group=group))
    finally:
        worker.stop()
        await asyncio.wait_for(task, 15)
    assert outcomes == [dqa.JobOutcome("done", result=f"result of {i}".encode()) for i in [*ids, grouped]]
    assert (await s.get(grouped, group=group))["progress"] == b"half way"
    # RETAINMAX 1 per shard: each shard keeps only its latest finished, at once.
    await s.config_set(retain_max=SHARDS)
    assert (await s.config())["retain-max"] == SHARDS
    stats = await s.stats()
    assert (stats["done"], stats["dropped"]) == (SHARDS, len(ids) + 1 - SHARDS)


# --- events (issue 35): one reader per shard, merged ---------------------------------------------


def check_shard_events(s: Any, got: List[dq.Event], ids: List[str], types: List[str]) -> None:
    """Each shard's events came in its own order, numbered from 1, and each
    id's events, of these types, from the shard that holds it."""
    per_shard: Dict[str, List[int]] = defaultdict(list)
    per_id: Dict[str, List[Tuple[str, str]]] = defaultdict(list)
    for e in got:
        per_shard[e.queue].append(e.seq)
        per_id[e.id or ""].append((e.type, e.queue))
    assert set(per_shard) == set(s.shard_names)
    assert all(seqs == list(range(1, len(seqs) + 1)) for seqs in per_shard.values()), per_shard
    assert per_id == {i: [(t, s.shards[s.shard_for(i)].name) for t in types] for i in ids}


def test_sharded_events_on_the_cluster(cluster, name):
    s = dq.ShardedQueue(cluster, name, shards=SHARDS)
    s.config_set(events=100)
    # Not split: each shard keeps its own last n (each has its own log).
    assert {shard.config()["events"] for shard in s.shards} == {100} and s.config()["events"] == 100
    ids, _, _ = outcome_ids(s)
    reader = Reader(s.events(), 3 * len(ids))
    wait_for(lambda: blocked_on(cluster, "dq.events") == SHARDS, what="a blocked DQ.EVENTS per shard")
    for i in ids:
        s.add(i, id=i)
    popped: List[dq.Delivery] = []
    while len(popped) < len(ids):
        popped += s.pop(count=len(ids), lease_ms="1h")
    assert s.ack(*popped) == len(ids)
    got = reader.join()
    assert reader.error is None
    check_shard_events(s, got, ids, ["added", "delivered", "done"])
    # Closed, the reader's threads end when their blocking reads do.
    wait_for(lambda: not any(t.name.startswith("dq-merge") for t in threading.enumerate()),
             what="the closed reader's threads ending")
    wait_for(lambda: blocked_on(cluster, "dq.events") == 0, what="no blocked DQ.EVENTS")
    # The caller keeps a seq per shard and resumes after each.
    positions = {e.queue: e.seq for e in got}
    assert list(s.events(after=positions, follow=False)) == []
    s.add("again", id=ids[0])
    holder = s.shards[s.shard_for(ids[0])].name
    (again,) = list(s.events(after=positions, follow=False))
    assert (again.queue, again.seq, again.type, again.id) == (holder, positions[holder] + 1, "added", ids[0])
    # A shard left out starts at its oldest event kept.
    assert len(list(s.events(after={k: v for k, v in positions.items() if k != holder}, follow=False))) == (
        positions[holder] + 1)
    # One shard's gap ends the reader, naming the shard and its oldest seq kept.
    s.shards[0].config_set(events=2)
    last = positions[s.shard_names[0]] + (1 if holder == s.shard_names[0] else 0)
    with pytest.raises(dq.EventGap) as caught:
        list(s.events(after={s.shard_names[0]: 1}, follow=False))
    assert (caught.value.queue, caught.value.oldest) == (s.shard_names[0], last - 1)
    # Bad positions are refused before anything is sent.
    with pytest.raises(ValueError, match="not a shard"):
        s.events(after={"elsewhere": 1})
    with pytest.raises(TypeError, match="mapping of shard name to seq"):
        s.events(after=5)
    with pytest.raises(ValueError, match=r"after\['.*'\] must be from 0"):
        s.events(after={s.shard_names[1]: -1})


@pytest.mark.asyncio
async def test_sharded_events_on_the_cluster_asyncio(acluster, cluster, name):
    s = dqa.ShardedQueue(acluster, name, shards=SHARDS)
    await s.config_set(events=100)
    ids, _, _ = outcome_ids(s)
    got: List[dq.Event] = []

    async def read() -> None:
        async for event in s.events(after="now"):
            got.append(event)

    reading = asyncio.ensure_future(read())
    await await_for(lambda: asyncio.to_thread(lambda: blocked_on(cluster, "dq.events") == SHARDS),
                    what="a blocked DQ.EVENTS per shard")
    await asyncio.gather(*[s.add(i, id=i) for i in ids])
    await await_for(lambda: asyncio.sleep(0, len(got) >= len(ids)), what="every shard's events")
    check_shard_events(s, got, ids, ["added"])
    # Cancelling the reader cancels every shard's task, which ends its read on the server.
    reading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reading
    await await_for(lambda: asyncio.to_thread(lambda: blocked_on(cluster, "dq.events") == 0), timeout=2.5,
                    what="no blocked DQ.EVENTS")
