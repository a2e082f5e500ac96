"""The Worker against a plain loop (DQ.POP COUNT n, the handlers, one DQ.ACK
per batch), on the same server in the same run (make bench), for the
blocking API (dq.Worker) and for asyncio (dq.asyncio.Worker):

- throughput: N jobs due at once (50,000; quick: 10,000), concurrency 50, a
  handler that does nothing: jobs per second from the first POP to the last
  ACK (for a Worker: to its last settlement, as node/bench/worker.js times
  it; the stop() after it is not timed, since a POP blocked when the last job
  settled only ends within block_ms).
- lateness: M jobs falling due evenly over one second (10,000; quick: 2,000)
  while the consumer waits: how long after its due time each job's handler
  starts, p50 and p99.

Rounds alternate loop and Worker (5; quick: 1) and the median is kept.
Prints a table and writes target/bench/worker-python.md. Run by
scripts/bench-clients under scripts/with-servers (DQ_REDIS_URL).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

import redis
import redis.asyncio

import dq
import dq.asyncio as dqa

URL = os.environ.get("DQ_REDIS_URL") or sys.exit("DQ_REDIS_URL is not set: run it with scripts/bench-clients")
QUICK = bool(os.environ.get("DQ_BENCH_QUICK"))
JOBS = 10_000 if QUICK else 50_000
SPREAD_JOBS = 2_000 if QUICK else 10_000
ROUNDS = 1 if QUICK else 5
CONCURRENCY = 50
OUT = Path(os.environ.get("DQ_BENCH_OUT") or Path(__file__).resolve().parents[2] / "target" / "bench")

_seq = 0


def qname(what: str) -> str:
    global _seq
    _seq += 1
    return f"bench-{what}-{os.getpid()}-{_seq}"


def fill(client: redis.Redis, name: str, n: int, due: Callable[[int], int] | None = None) -> None:
    for i in range(0, n, 1000):
        p = client.pipeline(transaction=False)
        for k in range(i, min(n, i + 1000)):
            if due is None:
                p.execute_command("DQ.ADD", name, f"job {k}", "ID", f"j{k}")
            else:
                p.execute_command("DQ.ADD", name, f"due {due(k)}", "AT", due(k), "ID", f"j{k}")
        p.execute()


def now_ms() -> float:
    return time.time() * 1000


# --- the blocking API ------------------------------------------------------------


def sync_loop(client: redis.Redis, name: str, n: int, handler: Callable[[dq.Delivery], None]) -> float:
    """Returns when (perf_counter) the last ACK was answered."""
    q = dq.Queue(client, name)
    done = 0
    while done < n:
        batch = q.pop(CONCURRENCY, block_ms=1000, lease_ms=30000)
        if not batch:
            continue
        for d in batch:
            handler(d)
        q.ack(*[d.id for d in batch])
        done += len(batch)
    return time.perf_counter()


def sync_worker(client: redis.Redis, name: str, n: int, handler: Callable[[dq.Delivery], None]) -> float:
    """Returns when (perf_counter) the last delivery was settled."""
    done = 0
    end = 0.0
    lock = threading.Lock()
    finished = threading.Event()

    def settled(_d: dq.Delivery, _o: dq.Outcome) -> None:
        nonlocal done, end
        with lock:
            done += 1
            if done == n:
                end = time.perf_counter()
                finished.set()

    worker = dq.Worker(dq.Queue(client, name), handler, concurrency=CONCURRENCY, block_ms=1000, on_settled=settled)
    t = threading.Thread(target=worker.run)
    t.start()
    finished.wait()
    # Not timed: a POP blocked when the last job settled ends within block_ms.
    worker.stop()
    t.join()
    return end


def sync_round(way: str) -> Dict[str, float]:
    consume = sync_loop if way == "loop" else sync_worker
    client = redis.Redis.from_url(URL)
    name = qname(f"tp-{way}")
    fill(client, name, JOBS)
    start = time.perf_counter()
    rate = JOBS / (consume(client, name, JOBS, lambda d: None) - start)
    stats = dq.Queue(client, name).stats()
    assert stats["acked"] == JOBS and stats["inflight"] == 0, stats
    client.delete(name)

    name = qname(f"late-{way}")
    late: List[float] = []
    first = int(now_ms()) + 1500 + SPREAD_JOBS // 10

    def due(k: int) -> int:
        return first + k * 1000 // SPREAD_JOBS

    def handler(d: dq.Delivery) -> None:
        late.append(now_ms() - int(d.payload.split()[1]))

    t = threading.Thread(target=consume, args=(client, name, SPREAD_JOBS, handler))
    t.start()
    fill(client, name, SPREAD_JOBS, due)
    assert now_ms() < first, "adding took longer than the head start"
    t.join()
    client.delete(name)
    client.close()
    return {"rate": rate, **percentiles(late)}


# --- asyncio ---------------------------------------------------------------------


async def async_loop(client: Any, name: str, n: int, handler: Callable[[dq.Delivery], Any]) -> float:
    """Returns when (perf_counter) the last ACK was answered."""
    q = dqa.Queue(client, name)
    done = 0
    while done < n:
        batch = await q.pop(CONCURRENCY, block_ms=1000, lease_ms=30000)
        if not batch:
            continue
        await asyncio.gather(*[handler(d) for d in batch])
        await q.ack(*[d.id for d in batch])
        done += len(batch)
    return time.perf_counter()


async def async_worker(client: Any, name: str, n: int, handler: Callable[[dq.Delivery], Any]) -> float:
    """Returns when (perf_counter) the last delivery was settled."""
    done = 0
    end = 0.0
    finished = asyncio.Event()

    def settled(_d: dq.Delivery, _o: dq.Outcome) -> None:
        nonlocal done, end
        done += 1
        if done == n:
            end = time.perf_counter()
            finished.set()

    worker = dqa.Worker(dqa.Queue(client, name), handler, concurrency=CONCURRENCY, block_ms=1000, on_settled=settled)
    run = asyncio.ensure_future(worker.run())
    await finished.wait()
    # Not timed, as for the blocking Worker.
    worker.stop()
    await run
    return end


async def async_round(way: str) -> Dict[str, float]:
    consume = async_loop if way == "loop" else async_worker
    sync_client = redis.Redis.from_url(URL)
    client = redis.asyncio.Redis.from_url(URL)

    async def nothing(_d: dq.Delivery) -> None:
        pass

    name = qname(f"atp-{way}")
    fill(sync_client, name, JOBS)
    start = time.perf_counter()
    rate = JOBS / (await consume(client, name, JOBS, nothing) - start)
    stats = dq.Queue(sync_client, name).stats()
    assert stats["acked"] == JOBS and stats["inflight"] == 0, stats
    sync_client.delete(name)

    name = qname(f"alate-{way}")
    late: List[float] = []
    first = int(now_ms()) + 1500 + SPREAD_JOBS // 10

    def due(k: int) -> int:
        return first + k * 1000 // SPREAD_JOBS

    async def handler(d: dq.Delivery) -> None:
        late.append(now_ms() - int(d.payload.split()[1]))

    run = asyncio.ensure_future(consume(client, name, SPREAD_JOBS, handler))
    await asyncio.to_thread(fill, sync_client, name, SPREAD_JOBS, due)
    assert now_ms() < first, "adding took longer than the head start"
    await run
    sync_client.delete(name)
    sync_client.close()
    await client.aclose()
    return {"rate": rate, **percentiles(late)}


def percentiles(late: List[float]) -> Dict[str, float]:
    late.sort()
    at = lambda p: late[min(len(late) - 1, int(p / 100 * len(late)))]  # noqa: E731
    return {"p50": at(50), "p99": at(99)}


def main() -> None:
    results: Dict[str, Dict[str, List[Dict[str, float]]]] = {
        "blocking": {"loop": [], "worker": []},
        "asyncio": {"loop": [], "worker": []},
    }
    for _ in range(ROUNDS):
        for way in ("loop", "worker"):
            results["blocking"][way].append(sync_round(way))
        for way in ("loop", "worker"):
            results["asyncio"][way].append(asyncio.run(async_round(way)))

    def med(api: str, way: str, key: str) -> float:
        return statistics.median(r[key] for r in results[api][way])

    lines = [
        f"# Python: Worker against a plain loop (redis-py {redis.__version__}, Python {sys.version.split()[0]})",
        "",
        f"{JOBS} jobs due at once (throughput); {SPREAD_JOBS} jobs due over one second "
        f"(lateness: handler start - due time). Median of {ROUNDS} round(s).",
        "",
        "| API | consumer | jobs/s | lateness p50 ms | lateness p99 ms |",
        "|---|---|---|---|---|",
    ]
    ratios = []
    for api, worker in (("blocking", "dq.Worker"), ("asyncio", "dq.asyncio.Worker")):
        for way in ("loop", "worker"):
            label = "plain loop (POP COUNT 50, one ACK per batch)" if way == "loop" else f"{worker}, concurrency 50"
            lines.append(
                f"| {api} | {label} | {med(api, way, 'rate'):.0f} | {med(api, way, 'p50'):.1f} | {med(api, way, 'p99'):.1f} |"
            )
        tp = med(api, "worker", "rate") / med(api, "loop", "rate")
        late = med(api, "worker", "p99") / max(1.0, med(api, "loop", "p99"))
        ratios.append(f"{api}: throughput {tp:.2f}x, lateness p99 {late:.2f}x")
    lines += ["", "Worker/loop: " + "; ".join(ratios) + " (the aim: throughput at least 0.8x, p99 at most 2x).", ""]
    text = "\n".join(lines)
    print(text)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "worker-python.md").write_text(text)


if __name__ == "__main__":
    main()
