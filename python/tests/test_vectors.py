"""Every entry of tests/vectors/sharding.json (docs/sharding.md)."""

from __future__ import annotations

import json

import pytest

import dq
from dq._core import sharding as c

from conftest import ROOT

VECTORS = json.loads((ROOT / "tests" / "vectors" / "sharding.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("entry", VECTORS["crc32"], ids=lambda e: e["basis"][:20])
def test_crc32_and_shard(r, entry):
    basis = entry["basis"].encode()
    assert c.shard_of(basis, 2**32) == entry["crc32"]
    for shards, want in entry["shard"].items():
        assert dq.ShardedQueue(r, "v", shards=int(shards)).shard_for(entry["basis"]) == want


@pytest.mark.parametrize("entry", VECTORS["names"], ids=lambda e: f"{e['queue']}-{e['shard']}of{e['shards']}")
def test_shard_names(r, entry):
    s = dq.ShardedQueue(r, entry["queue"], shards=entry["shards"])
    assert s.shard_names[entry["shard"]] == entry["name"]
    assert s.shards[entry["shard"]].name == entry["name"]
    assert c.key_slot(entry["name"].encode()) == entry["slot"]


def test_shard_names_slots_agree_with_the_server(cluster):
    for entry in VECTORS["names"][:40]:
        assert cluster.keyslot(entry["name"]) == entry["slot"]


@pytest.mark.parametrize("entry", VECTORS["routes"], ids=lambda e: "-".join(f"{k}={v}" for k, v in e.items()))
def test_routes_on_a_real_server(r, name, entry):
    """ShardedQueue.add puts the message in the shard the vector names."""
    s = dq.ShardedQueue(r, name, shards=entry["shards"])
    options = {k: entry[k] for k in ("id", "group", "shard_key") if k in entry}
    got = s.add("v", **options)
    assert got == entry.get("id", got)
    holders = [i for i, q in enumerate(s.shards) if q.get(got) is not None]
    assert holders == [entry["shard"]]
