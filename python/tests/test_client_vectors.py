"""Every case of tests/vectors/commands.json and replies.json (written by
scripts/client-vectors; docs/clients.md, "How the libraries are tested"):
the argv each call sends, what each reply becomes. No server: a fake
client records what the library sends and answers it with the vector's
reply, decoded by redis-py's own RESP2 or RESP3 parser as a connection
decodes it."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import socket
from types import SimpleNamespace
from typing import Any, Dict, List, Tuple

import pytest
import redis.exceptions
from redis._parsers import _RESP2Parser, _RESP3Parser
from redis.connection import Encoder

import dq
from dq._core.plans import advance
from dq._core.queue import mpop_call
from dq._io import execute

from conftest import ROOT

VECTORS = ROOT / "tests" / "vectors"
COMMANDS = json.loads((VECTORS / "commands.json").read_text(encoding="utf-8"))["cases"]
REPLIES = json.loads((VECTORS / "replies.json").read_text(encoding="utf-8"))["cases"]


def mine(cases: List[Dict[str, Any]]) -> List[Any]:
    return [pytest.param(c, id=c["name"], marks=pytest.mark.skip(reason=c["not_in"]["python"]))
            if "python" in c.get("not_in", {}) else pytest.param(c, id=c["name"]) for c in cases]


def decode(resp: bytes, protocol: int, decode_responses: bool, never_decode: bool) -> Any:
    """A reply as redis-py delivers it: its parser reading the bytes from a
    socket, as a connection with these settings does."""
    ours, theirs = socket.socketpair()
    try:
        theirs.sendall(resp)
        theirs.close()
        parser = (_RESP3Parser if protocol == 3 else _RESP2Parser)(socket_read_size=65536)
        parser.on_connect(SimpleNamespace(_sock=ours, socket_timeout=5,
                                          encoder=Encoder("utf-8", "strict", decode_responses)))
        try:
            return parser.read_response(disable_decoding=never_decode)
        finally:
            parser.on_disconnect()
    finally:
        ours.close()


# Plausible replies to the command cases, as delivered (their parsing is replies.json's).
CANNED: Dict[bytes, Any] = {
    b"DQ.ADD": b"id", b"DQ.NACK": b"ready", b"DQ.TOUCH": 1, b"DQ.GET": None, b"DQ.PEEK": [],
    b"DQ.SCAN": [b"0", []], b"DQ.STATS": [], b"DQ.CONFIG": b"OK", b"DQ.SCHEDULES": [], b"DQ.PAUSE": b"OK",
    b"DQ.QUEUES": [], b"DQ.POP": None, b"DQ.MPOP": None, b"DQ.WAIT": None, b"DQ.GROUPS": [b"0", []],
}


class Fake:
    """A blocking client: records each command; answers with the next of
    `replies` (RESP bytes, decoded as redis-py does), else a canned reply."""

    def __init__(self, replies: Tuple[bytes, ...] = (), protocol: int = 2, decode_responses: bool = False) -> None:
        self.sent: List[Tuple[Any, ...]] = []
        self.replies = list(replies)
        self.protocol, self.decode_responses = protocol, decode_responses

    def execute_command(self, *args: Any, **options: Any) -> Any:
        encoder = Encoder("utf-8", "strict", False)
        self.sent.append(tuple(encoder.encode(a) for a in args))  # as redis-py writes them
        if not self.replies:
            return CANNED.get(self.sent[-1][0], 0)
        reply = decode(self.replies.pop(0), self.protocol, self.decode_responses, "NEVER_DECODE" in options)
        if isinstance(reply, redis.exceptions.ResponseError):
            raise reply  # as redis-py's connection raises an error reply
        return reply


def call(client: Fake, case: Dict[str, Any]) -> Any:
    """The vector's neutral call on this library: the names are Python's
    own (every_ms and every are both `every`)."""
    op, a = case["op"], dict(case["args"])
    if op == "queues":
        return dq.queues(client)
    if op == "mpop":
        queues = [dq.Queue(client, n) for n in a["queues"]]
        taken, deliveries = execute(client, mpop_call(queues, a["count"], a.get("block_ms"), a.get("lease_ms")))
        return {"queue": taken and taken.name, "deliveries": deliveries}
    q = dq.Queue(client, case["queue"])
    if op == "add":
        return q.add(a.pop("payload"), **a)
    if op in ("ack", "cancel"):
        return getattr(q, op)(*a["ids"])
    if op == "done":
        return q.done(*[tuple(pair) for pair in a["results"]])
    if op == "touch" and "progress" in a:
        return q.progress(a.pop("id"), a.pop("progress"), **a)
    if op in ("nack", "touch", "get", "wait"):
        return getattr(q, op)(a.pop("id"), **a)
    if op == "scan":
        return scan_page(client, q, a.pop("cursor"), a)
    if op == "groups":
        return groups_page(client, q, a.pop("cursor"), a)
    if op == "schedule":
        if "every_ms" in a:
            a["every"] = a.pop("every_ms")
        return q.schedule(a.pop("name"), a.pop("payload"), **a)
    if op == "unschedule":
        return q.unschedule(*a["names"])
    return getattr(q, op)(**a)


def scan_page(client: Fake, q: dq.Queue, cursor: str, options: Dict[str, Any]) -> Dict[str, Any]:
    """One page of Queue.scan's stream: the one at `cursor` (an earlier
    page, answered by hand, names it)."""
    stream = dq.Queue.scan.stream(q, **options)  # type: ignore[attr-defined]
    step = advance(stream)
    if cursor != "0":
        advance(stream, [(cursor, [])])  # the first page: no entries, then `cursor`
        step = advance(stream)
    (page,) = step
    got, entries = execute(client, page)
    return {"cursor": got, "entries": entries}


def groups_page(client: Fake, q: dq.Queue, cursor: str, options: Dict[str, Any]) -> Dict[str, Any]:
    """One DQ.GROUPS page of Queue.groups' stream: the one at `cursor` (an
    earlier page, answered by hand with no groups, names it)."""
    stream = dq.Queue.groups.stream(q, **options)  # type: ignore[attr-defined]
    step = advance(stream)
    if cursor != "0":
        step = advance(stream, [(cursor, [])])  # a page of no groups yields nothing: the next step is the page
    (page,) = step
    got, groups = execute(client, page)
    return {"cursor": got, "groups": groups}


def normal(v: Any) -> Any:
    """A result in the vectors' form: server field names, text and bytes as str."""
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, dq.Entry):
        return {"id": v.id, "payload": v.payload.decode(), "attempt": v.attempt, "time": v.time,
                "last-error": v.last_error}
    if isinstance(v, dq.Delivery):
        return {"id": v.id, "payload": v.payload.decode(), "attempt": v.attempt}
    if isinstance(v, dq.JobOutcome):
        return {"state": v.state, "value": normal(v.result if v.state == "done" else v.error)}
    if isinstance(v, dq.Group):  # a NamedTuple: before tuples
        return {k.replace("_", "-"): normal(x) for k, x in v._asdict().items()}
    if isinstance(v, dq.Schedule):
        return {k.replace("_", "-"): normal(x) for k, x in vars(v).items()}
    if isinstance(v, dict):
        return {k: normal(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [normal(x) for x in v]
    return v


def matches(want: Any, got: Any, at: str = "result") -> None:
    """`got` has what `want` says: a record may hold more fields."""
    if isinstance(want, dict):
        assert isinstance(got, dict), f"{at}: {got!r}"
        for k, w in want.items():
            assert k in got, f"{at}: no {k!r} in {got!r}"
            matches(w, got[k], f"{at}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), f"{at}: {got!r}"
        for i, (w, g) in enumerate(zip(want, got)):
            matches(w, g, f"{at}[{i}]")
    else:
        assert got == want and type(got) is type(want), f"{at}: {got!r}, not {want!r}"


@pytest.mark.parametrize("case", mine(COMMANDS))
def test_command(case: Dict[str, Any]) -> None:
    client = Fake()
    if case.get("refused"):
        with pytest.raises((TypeError, ValueError)):
            call(client, case)
        assert client.sent == []
    else:
        call(client, case)
        assert client.sent == [tuple(a.encode() for a in case["argv"])]


@pytest.mark.parametrize("decode_responses", [False, True], ids=["bytes", "decoded"])
@pytest.mark.parametrize("case", mine(REPLIES))
def test_reply(case: Dict[str, Any], decode_responses: bool) -> None:
    client = Fake((case["resp"].encode(),), case["protocol"], decode_responses)
    if "raises" in case:
        with pytest.raises(dq.DqError) as raised:
            call(client, case)
        assert type(raised.value).__name__ == case["raises"], raised.value
        assert case["says"] in str(raised.value)
    else:
        matches(case["result"], normal(call(client, case)))
    assert client.replies == []


def test_the_replies_bytes_are_their_typed_form() -> None:
    """`resp` is `reply` as a server writes it (a hand edit of one without the other fails here)."""

    def resp(t: Any, protocol: int) -> str:
        if t is None:
            return "_\r\n" if protocol == 3 else "$-1\r\n"
        ((kind, v),) = t.items()
        if kind == "bulk":
            return f"${len(v.encode())}\r\n{v}\r\n"
        if kind in ("array", "map"):
            items = [x for pair in v for x in pair] if kind == "map" else v
            return f"{'%' if kind == 'map' else '*'}{len(v)}\r\n" + "".join(resp(x, protocol) for x in items)
        return {"int": ":", "simple": "+", "error": "-"}[kind] + f"{v}\r\n"

    for case in REPLIES:
        assert resp(case["reply"], case["protocol"]) == case["resp"], case["name"]


def test_every_operation_and_form_is_covered() -> None:
    ops = {c["op"] for c in COMMANDS}
    assert ops >= {"add", "pop", "mpop", "ack", "done", "nack", "touch", "wait", "cancel", "get", "peek", "scan",
                   "redrive", "purge", "stats", "config", "config_set", "schedule", "unschedule", "schedules",
                   "pause", "resume", "queues", "groups"}
    forms = {(c["protocol"], c["words"]) for c in REPLIES if c["op"] == "get" and "words" in c}
    assert forms == {(2, "simple"), (2, "bulk"), (3, "simple"), (3, "bulk")}


def test_the_vector_files_are_what_scripts_client_vectors_writes() -> None:
    """The files are generated: a hand edit of one fails here (run scripts/client-vectors)."""
    loader = importlib.machinery.SourceFileLoader("client_vectors", str(ROOT / "scripts" / "client-vectors"))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    generator = importlib.util.module_from_spec(spec)
    loader.exec_module(generator)
    for name, text in generator.documents().items():
        assert (VECTORS / name).read_text(encoding="utf-8") == text, f"{name}: run scripts/client-vectors"
