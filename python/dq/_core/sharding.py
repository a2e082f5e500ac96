"""The arithmetic of sharded queues (docs/sharding.md): cluster slots,
shard names, which shard a message goes to, how a whole-queue limit is
split and how the shards' records are merged. ShardedQueue's methods are
in sharded.py."""

from __future__ import annotations

import binascii
import functools
import os
import zlib
from typing import Any, Dict, Iterable, List, Tuple

from .args import RATE
from .records import Entry, Schedule

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
    queue's flow control (merge_flow), `throttled` summed, and `retain-max`
    the whole queue's cap: the shards' summed (config_set splits it), None
    when no shard has one. `group-limit`, `group-rate` and `order` are
    shard 0's as given, not summed: they hold per group, and a group lives
    on one shard (config_set sends them to every shard unsplit)."""
    if not records:
        return {}
    flow = merge_flow(records)
    out = dict(records[0])
    for k in out:
        if k in flow:
            out[k] = flow[k]
        elif k == "throttled":
            out[k] = sum(r.get(k) or 0 for r in records)
        elif k == "retain-max":
            caps = [r.get(k) for r in records]
            out[k] = None if all(n is None for n in caps) else sum(n or 0 for n in caps)
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


def hash_slot(key: bytes) -> int:
    """The cluster slot of a key, hash tags included: the part between the
    first '{' and the next '}' when it is not empty."""
    left = key.find(b"{")
    if left >= 0:
        right = key.find(b"}", left + 1)
        if right > left + 1:
            key = key[left + 1 : right]
    return crc16(key) % SLOTS


def merge_entries(pages: List[List[Entry]], count: int) -> List[Entry]:
    """The shards' DQ.PEEK pages as one: by time, `count` kept."""
    return sorted((e for page in pages for e in page), key=lambda e: e.time)[:count]


def merge_schedules(lists: List[List[Schedule]]) -> List[Schedule]:
    """The shards' schedules as one list, by name (its bytes)."""
    return sorted((s for r in lists for s in r), key=lambda s: s.name.encode("utf-8", "surrogateescape"))
