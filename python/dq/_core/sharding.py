"""Sharded queues (docs/sharding.md): shard names and slots, routing, and
the merging of the shards' replies."""

from __future__ import annotations

import binascii
import functools
import os
import time
import zlib
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from .args import MAX_ID_BYTES, RATE, bytes_arg, id_arg, max_inflight_arg, queue_name, rate_arg, schedule_name_arg
from .plans import Call, Plan, gather, one
from .queue import QueueCore
from .records import Delivery
from .replies import as_text

SLOTS = 16384


def crc16(data: bytes, crc: int = 0) -> int:
    """CRC-16/XMODEM, as Redis Cluster hashes keys (binascii's crc_hqx is
    that CRC, in C)."""
    return binascii.crc_hqx(data, crc)


def key_slot(name: bytes) -> int:
    """The cluster slot of a name without hash tag (shard names have none)."""
    return crc16(name) % SLOTS


@functools.lru_cache(maxsize=64)
def shard_names(queue: bytes, shards: int) -> Tuple[bytes, ...]:
    """Every shard's name: `Q~<i>of<N>~<k>`, k the smallest that puts the
    name's slot in shard i's segment of the slot space (about N tries each,
    so 1024 shards take about a million CRCs: the prefix's CRC is computed
    once and only k's digits are added per try)."""
    width = SLOTS // shards
    out = []
    for shard in range(shards):
        low, high = shard * width, (shard + 1) * width
        prefix = queue + b"~%dof%d~" % (shard, shards)
        start = crc16(prefix)
        k = 0
        while not low <= crc16(b"%d" % k, start) % SLOTS < high:
            k += 1
        out.append(prefix + b"%d" % k)
    return tuple(out)


def shard_name(queue: bytes, shards: int, shard: int) -> bytes:
    return shard_names(queue, shards)[shard]


def shard_of(basis: bytes, shards: int) -> int:
    return zlib.crc32(basis) % shards


def random_id() -> str:
    return os.urandom(16).hex()


_STAT_MAX = {"oldest-ready-age-ms"}
_STAT_MIN = {"next-due-at"}
_FLOW = {"paused", "paused-until", "rate", "max-inflight"}


def merge_flow(records: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The whole queue's flow-control fields from its shards' (as
    ShardedQueue.config_set leaves them): `paused` 1 when any shard is
    paused, `paused-until` the latest end of those pauses (None when one
    of them lasts until DQ.RESUME); `max-inflight` the shards' limits
    summed; `rate` the shards' limits summed over their common window
    (`n/d`), or — shards set apart, with different windows or some without
    a rate — the shards' rates joined with ','; None when no shard has one."""
    out: Dict[str, Any] = {}
    if not records or "paused" not in records[0]:
        return out
    paused = [r for r in records if r.get("paused")]
    out["paused"] = 1 if paused else 0
    untils = [r.get("paused-until") for r in paused]
    out["paused-until"] = None if not untils or None in untils else max(u for u in untils if u is not None)
    limits = [r.get("max-inflight") for r in records]
    out["max-inflight"] = None if all(n is None for n in limits) else sum(n or 0 for n in limits)
    rates = [r.get("rate") for r in records]
    if all(x is None for x in rates):
        out["rate"] = None
    else:
        parsed = [RATE.match(x) if x is not None else None for x in rates]
        windows = {m.group(2) for m in parsed if m is not None}
        if all(m is not None for m in parsed) and len(windows) == 1:
            out["rate"] = f"{sum(int(m.group(1)) for m in parsed if m is not None)}/{windows.pop()}"
        else:
            out["rate"] = ",".join(x or "none" for x in rates)
    return out


def merge_stats(records: Iterable[Dict[str, Any]]) -> Dict[str, Any]:
    records = list(records)
    out: Dict[str, Any] = {}
    for record in records:
        for k, v in record.items():
            if k in _FLOW:
                continue
            have = out.get(k)
            if k not in out or have is None:
                out[k] = v
            elif v is None:
                pass
            elif k in _STAT_MAX:
                out[k] = max(have, v)
            elif k in _STAT_MIN:
                out[k] = min(have, v)
            else:
                out[k] = have + v
    out.update(merge_flow(records))
    return out


def merge_config(records: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Shard 0's defaults (config_set keeps the shards alike), the whole
    queue's flow control (merge_flow) and `throttled` summed."""
    if not records:
        return {}
    flow = merge_flow(records)
    out = dict(records[0])
    for k in out:
        if k in flow:
            out[k] = flow[k]
        elif k == "throttled":
            out[k] = sum(r.get(k) or 0 for r in records)
    return out


def split_limit(what: str, n: int, shards: int) -> int:
    """A shard's part of a whole-queue limit n: floor(n / shards), so that
    the shards together never allow more than n."""
    if n < shards:
        raise ValueError(
            f"{what} {n} cannot be split over {shards} shards: each shard gets floor(n / {shards}), "
            f"which would be 0 (no limit); give at least {shards}, or 0 to remove the limit"
        )
    return n // shards


class ShardedCore:
    """The plans of a sharded queue: N QueueCores and the routing rules."""

    def __init__(self, name: Any, shards: Any) -> None:
        key = queue_name(name)
        if b"{" in key or b"}" in key:
            raise ValueError(f"a sharded queue's name must not contain '{{' or '}}': {as_text(key)!r}")
        if isinstance(shards, bool) or not isinstance(shards, int):
            raise TypeError(f"shards must be an int, got {type(shards).__name__}")
        if not 1 <= shards <= 1024 or shards & (shards - 1):
            raise ValueError(f"shards must be a power of two from 1 to 1024, got {shards}")
        self.key = key
        self.name = as_text(key) or ""
        self.shards = shards
        self.cores = [QueueCore(n) for n in shard_names(key, shards)]
        self._by_name = {c.name: c for c in self.cores}
        self._next = 0

    @property
    def parts(self) -> List[QueueCore]:
        return self.cores

    def shard_for(self, basis: Any) -> int:
        return shard_of(bytes_arg("basis", basis, allow_empty=False, limit=MAX_ID_BYTES), self.shards)

    def _routed(self, id: Any = None, group: Any = None, shard_key: Any = None) -> Optional[QueueCore]:
        """The shard named by a Delivery, a group, a shard key (in that order), else None."""
        if isinstance(id, Delivery):
            core = self._by_name.get(id.queue)
            if core is None:
                raise ValueError(f"delivery {id.id!r} came from queue {id.queue!r}, not a shard of {self.name!r}")
            return core
        if group is not None:
            return self.cores[shard_of(bytes_arg("group", group, allow_empty=False, limit=MAX_ID_BYTES), self.shards)]
        if shard_key is not None:
            return self.cores[
                shard_of(bytes_arg("shard_key", shard_key, allow_empty=False, limit=MAX_ID_BYTES), self.shards)
            ]
        return None

    def add(self, payload: Any, *, id: Any = None, group: Any = None, shard_key: Any = None, **options: Any) -> Plan:
        if options.get("xx") and id is None:
            raise ValueError("xx needs an id")
        if shard_key is not None:
            bytes_arg("shard_key", shard_key, allow_empty=False, limit=MAX_ID_BYTES)
        if id is None:
            id = random_id()
        core = self._routed(group=group, shard_key=shard_key) or self.cores[shard_of(id_arg(id), self.shards)]
        return one(core.add_call(payload, id=id, group=group, **options))

    def pop(self, count: int = 1, block_ms: Optional[int] = None, lease_ms: Optional[int] = None) -> Plan:
        # Validate once, eagerly.
        self.cores[0].pop_call(count, block_ms, lease_ms)
        return self._pop(count, block_ms, lease_ms)

    def _pop(self, count: int, block_ms: Optional[int], lease_ms: Optional[int]) -> Plan:
        deadline = None if block_ms is None else time.monotonic() + block_ms / 1000
        pause = 0.01
        while True:
            got: List[Delivery] = []
            for _ in range(self.shards):
                core = self.cores[self._next]
                self._next = (self._next + 1) % self.shards
                got += yield from one(core.pop_call(count - len(got), None, lease_ms))
                if len(got) >= count:
                    break
            if got or deadline is None:
                return got
            left = deadline - time.monotonic() if block_ms else pause
            if block_ms and left <= 0:
                return got
            yield min(pause, left)
            pause = min(pause * 2, 0.25)

    def ack(self, ids: Sequence[Any]) -> Plan:
        if not ids:
            raise ValueError("ack needs at least one id")
        per: Dict[str, List[Any]] = {}
        for i in ids:
            id_arg(i)
            routed = self._routed(i)
            for core in [routed] if routed else self.cores:
                per.setdefault(core.name, []).append(i)
        calls = [self._by_name[n].ack_call(v) for n, v in per.items()]
        return self._sum(calls)

    def _sum(self, calls: List[Call]) -> Plan:
        results = yield from gather(calls)
        return sum(results)

    def nack(self, id: Any, *, group: Any = None, shard_key: Any = None, **options: Any) -> Plan:
        core = self._routed(id, group, shard_key) or self.cores[shard_of(id_arg(id), self.shards)]
        return one(core.nack_call(id, **options))

    def touch(self, id: Any, *, group: Any = None, shard_key: Any = None, **options: Any) -> Plan:
        core = self._routed(id, group, shard_key) or self.cores[shard_of(id_arg(id), self.shards)]
        return one(core.touch_call(id, **options))

    def stats(self) -> Plan:
        return self._merge_stats()

    def _merge_stats(self) -> Plan:
        results = yield from gather([c.stats_call() for c in self.cores])
        return merge_stats(results)

    def get(self, id: Any, *, group: Any = None, shard_key: Any = None) -> Plan:
        routed = self._routed(None, group, shard_key)
        if routed is not None:
            return one(routed.get_call(id))
        return self._first([c.get_call(id) for c in self.cores])

    def _first(self, calls: List[Call]) -> Plan:
        results = yield from gather(calls)
        return next((r for r in results if r is not None), None)

    def peek(self, state: str, count: int = 10) -> Plan:
        calls = [c.peek_call(state, count) for c in self.cores]
        return self._merge_peek(calls, count)

    def _merge_peek(self, calls: List[Call], count: int) -> Plan:
        results = yield from gather(calls)
        merged = sorted((e for r in results for e in r), key=lambda e: e.time)
        return merged[:count]

    def redrive(self, count: Optional[int] = None, ids: Optional[Sequence[Any]] = None) -> Plan:
        self.cores[0].redrive_call(count, ids)  # validate
        if ids is not None:
            return self._sum([c.redrive_call(None, ids) for c in self.cores])
        return self._redrive_count(count)

    def _redrive_count(self, count: Optional[int]) -> Plan:
        moved = 0
        for core in self.cores:
            if count is not None and moved >= count:
                break
            moved += yield from one(core.redrive_call(None if count is None else count - moved))
        return moved

    def cancel(self, ids: Sequence[Any], *, group: Any = None, shard_key: Any = None) -> Plan:
        routed = self._routed(None, group, shard_key)
        if routed is not None:
            return one(routed.cancel_call(ids))
        return self._sum([c.cancel_call(ids) for c in self.cores])

    def purge(self, state: Optional[str] = None) -> Plan:
        return self._sum([c.purge_call(state) for c in self.cores])

    def config(self) -> Plan:
        return self._merge_config([c.config_call() for c in self.cores])

    def _merge_config(self, calls: List[Call]) -> Plan:
        results = yield from gather(calls)
        return merge_config(results)

    def config_set(self, *, rate: Any = None, max_inflight: Any = None, **options: Any) -> Plan:
        # The whole queue's limits, split: each shard gets floor(n / shards).
        if rate is not None:
            parsed = rate_arg(rate)[1]
            if parsed is not None:
                n, window = parsed
                rate = f"{split_limit('rate', n, self.shards)}/{window}"
        if max_inflight is not None:
            n_inflight = max_inflight_arg(max_inflight)[1]
            if n_inflight is not None:
                max_inflight = split_limit("max_inflight", n_inflight, self.shards)
        calls = [c.config_set_call(rate=rate, max_inflight=max_inflight, **options) for c in self.cores]
        return self._all_ok(calls)

    def schedule_core(self, name: Any) -> QueueCore:
        """The shard that holds schedule `name`: placed by its name as a
        message is by its basis."""
        return self.cores[shard_of(schedule_name_arg(name), self.shards)]

    def schedule(self, name: Any, payload: Any, **options: Any) -> Plan:
        return one(self.schedule_core(name).schedule_call(name, payload, **options))

    def unschedule(self, names: Sequence[Any]) -> Plan:
        if not names:
            raise ValueError("unschedule needs at least one name")
        per: Dict[str, List[Any]] = {}
        for n in names:
            per.setdefault(self.schedule_core(n).name, []).append(n)
        return self._sum([self._by_name[shard].unschedule_call(v) for shard, v in per.items()])

    def schedules(self) -> Plan:
        return self._merge_schedules([c.schedules_call() for c in self.cores])

    def _merge_schedules(self, calls: List[Call]) -> Plan:
        results = yield from gather(calls)
        return sorted((s for r in results for s in r), key=lambda s: s.name.encode("utf-8", "surrogateescape"))

    def pause(self, for_ms: Any = None) -> Plan:
        return self._all_ok([c.pause_call(for_ms) for c in self.cores])

    def resume(self) -> Plan:
        return self._any([c.resume_call() for c in self.cores])

    def _any(self, calls: List[Call]) -> Plan:
        results = yield from gather(calls)
        return any(results)

    def _all_ok(self, calls: List[Call]) -> Plan:
        yield from gather(calls)
        return None


def hash_slot(key: bytes) -> int:
    """The cluster slot of a key, hash tags included: the part between the
    first '{' and the next '}' when it is not empty."""
    left = key.find(b"{")
    if left >= 0:
        right = key.find(b"}", left + 1)
        if right > left + 1:
            key = key[left + 1 : right]
    return crc16(key) % SLOTS
