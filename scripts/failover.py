#!/usr/bin/env python3
"""Failover under load, as operators run it (issue 15). Run by scripts/failover,
which installs what this needs and stops every server this started, whatever
happens to this process.

The topology: a master and a replica (the server with the module loaded, each
from its own redis.conf in its own directory) and three Sentinels, quorum 2,
down-after-milliseconds 1000. Every process binds 127.0.0.1 on a free port.

The load: producers and consumers are threads, each with its own redis-py
Sentinel client (no retries inside redis-py: every retry is the harness's own,
through Sentinel discovery, so that what was sent is known).

- Producers send pipelined batches of 1-5 `DQ.ADD queue payload [DELAY d | AT t]
  ID id NX`, then `WAIT 1 500`, over several queues. Four in ten are
  ready at once, the others delayed by 1-2000 ms and some by 2-8 s, so that
  messages written before a kill fall due after the promotion. The id and the
  payload carry the time the message is due (the wall clock before the
  send, plus its delay), so a delivery can be checked against it.
- Consumers (two per queue) loop on `DQ.POP queue COUNT 100 BLOCK 1000 LEASE
  3000`, note each delivery, work 0-20 ms, and send one `DQ.ACK queue id`
  per message followed by `WAIT 1 500`, repeating the batch through Sentinel
  after a connection error. They abandon 2% of their deliveries without an
  ACK, as a consumer that died would, so leases run out on both sides of a
  failover.

Mid-run the master is killed with SIGKILL (once, or DQ_FAILOVER_KILLS times).
Sentinel promotes the replica; the old master is restarted from its own
configuration, so it comes back as an empty master, as after a real crash,
and Sentinel turns it into a replica of the new one. Runs of 60 s or more
also end with a switchover (DQ_FAILOVER_SWITCHOVERS): `SENTINEL FAILOVER`,
as before maintenance, which leaves the old master running until Sentinel
reconfigures it. When the load phase is over, the producers stop and the
consumers drain every queue.

What is counted (docs/operations.md, "Failover under load", says the same):

- a WAITed add: DQ.ADD replied its id and the WAIT 1 after it replied >= 1;
- a WAITed ack: DQ.ACK replied 1 and the WAIT 1 after it replied >= 1;
- lost: a WAITed add never delivered, even after draining;
- came back: a delivery of an id whose POP was sent after its WAITed ack had
  replied;
- early: a delivery received before the due time its id carries (same host
  clock, no epsilon);
- every queue served by the new master: each queue had WAITed delayed
  messages written before the kill and due after Sentinel announced the new
  master; all of them were delivered (they are not lost), so the new master's
  timer served every queue;
- abandoned, delivered again: the last delivery of a WAITed add is never an
  abandoned one that no later ACK took (its lease ran out and it came back);
- duplicates: ids delivered more than once. At least once allows them (an
  abandoned delivery, a POP or ACK the replica had not received when the
  master died); they are reported, and fail the run only when they "came
  back" as above.

Exits 0 when every check passes, 1 when one fails, 2 when the harness could
not run (a server that would not start, a failover that never happened).
"""

import argparse
import collections
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time

import redis
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry
from redis.sentinel import Sentinel

SERVICE = "dqm"
QUEUES = ["fo:orders", "fo:hooks", "fo:renders"]
CONSUMERS_PER_QUEUE = 2
PRODUCERS = 2
LEASE_MS = 3000
ABANDON = 0.02  # the share of deliveries a consumer never acknowledges
WAIT_MS = 500
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 5000
LONG_DELAY_MS = (2000, 8000)
# How long a condition may take before the harness gives up on it. These are
# deadlines for polling, not sleeps: every wait ends as soon as its condition
# holds.
START_DEADLINE = 30.0
TOPOLOGY_DEADLINE = 60.0
FAILOVER_DEADLINE = 60.0
REJOIN_DEADLINE = 90.0
# Sentinel turns a restarted old master into a replica once it has seen it
# report "master" for 8 s and the new master looks sane (its INFO at most
# 20 s old); 12 s here. On a loaded machine that can stall (one CI run
# waited 90 s): after this long the harness sends REPLICAOF itself, as the
# operator of a real deployment would, and the report says so.
SENTINEL_RECONF_DEADLINE = 40.0
DRAIN_DEADLINE = 90.0
# The load goes on at least this long after the last failover is over, so
# that messages written on the new master are checked too.
AFTER_LAST_FAILOVER = 3.0
NET_ERRORS = (RedisConnectionError, RedisTimeoutError, OSError)


class HarnessError(Exception):
    """The harness could not do what it needed (not a dq failure)."""


def file_tail(path, n=30):
    """The last n lines of a log ("" if there is none)."""
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


def wall_ms():
    return time.time_ns() // 1_000_000


def mono():
    return time.monotonic()


def log(msg):
    print(f"failover: {msg}", flush=True)


def wait_for(what, deadline_s, probe, interval=0.05):
    """Polls probe() until it returns something truthy; HarnessError after
    deadline_s seconds."""
    end = mono() + deadline_s
    last_err = None
    while True:
        try:
            got = probe()
            if got:
                return got
        except (NET_ERRORS + (ResponseError,)) as e:
            last_err = e
        if mono() > end:
            why = f" (last error: {last_err!r})" if last_err else ""
            raise HarnessError(f"timed out after {deadline_s:.0f} s waiting for {what}{why}")
        time.sleep(interval)


# --- processes -----------------------------------------------------------------


class Run:
    """Everything started, so that all of it is stopped, by PID."""

    def __init__(self, work):
        self.work = work
        self.procs = []
        self.ports = set()
        self.pidfile = open(os.path.join(work, "pids"), "a", buffering=1)

    def free_port(self):
        while True:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            finally:
                s.close()
            if port not in self.ports:
                return port

    def spawn(self, argv, cwd):
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=open(os.path.join(cwd, "stdout"), "ab"),
            stderr=subprocess.STDOUT,
        )
        self.pidfile.write(f"started {proc.pid}\n")
        self.procs.append(proc)
        return proc

    def reap(self, proc):
        proc.wait()
        self.pidfile.write(f"reaped {proc.pid}\n")

    def stop(self, proc, sig=signal.SIGTERM):
        if proc.poll() is None:
            try:
                proc.send_signal(sig)
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.reap(proc)

    def stop_all(self):
        for proc in self.procs:
            if proc.returncode is None:
                self.stop(proc)


class Node:
    """A server with the module, started from its own redis.conf."""

    def __init__(self, run, name, server, module):
        self.run = run
        self.name = name
        self.server = server
        self.module = module
        self.dir = os.path.join(run.work, name)
        os.makedirs(self.dir)
        self.conf = os.path.join(self.dir, "redis.conf")
        self.port = None
        self.proc = None

    def write_conf(self, port, replicaof=None):
        lines = [
            f"port {port}",
            "bind 127.0.0.1",
            "daemonize no",
            f'dir "{self.dir}"',
            f'logfile "{os.path.join(self.dir, "server.log")}"',
            'save ""',
            "appendonly no",
            "enable-debug-command local",
            # A replica that (re)joins gets its full sync at once rather than
            # after the default 5 s wait for other replicas.
            "repl-diskless-sync-delay 0",
            f"loadmodule {self.module}",
        ]
        if replicaof:
            lines.append(f"replicaof 127.0.0.1 {replicaof}")
        with open(self.conf, "w") as f:
            f.write("\n".join(lines) + "\n")

    def start(self, replicaof=None):
        """A fresh node on a free port (another one if the port was taken
        meanwhile)."""
        for _ in range(10):
            port = self.run.free_port()
            self.write_conf(port, replicaof)
            if self._launch(port):
                return
        raise HarnessError(f"{self.name}: could not start on any free port")

    def restart(self):
        """After a kill: the same redis.conf (Sentinel may have rewritten it),
        the same port, as an operator's service manager would. Returns False
        if the port is taken now."""
        return self._launch(self.port)

    def _launch(self, port):
        self.proc = self.run.spawn([self.server, self.conf], self.dir)
        self.port = port
        self.run.ports.add(port)
        end = mono() + START_DEADLINE
        while mono() < end:
            if self.proc.poll() is not None:
                self.run.reap(self.proc)
                return False
            try:
                info = redis.Redis(port=port, socket_timeout=2, retry=Retry(NoBackoff(), 0)).info("server")
                if info["process_id"] == self.proc.pid:
                    return True
                # Another process answers on this port: ours cannot bind it.
                self.run.stop(self.proc)
                return False
            except NET_ERRORS + (ResponseError,):
                time.sleep(0.05)
        self.run.stop(self.proc)
        raise HarnessError(f"{self.name} did not answer on port {port} within {START_DEADLINE:.0f} s")

    def client(self, **kw):
        return redis.Redis(port=self.port, socket_timeout=5, decode_responses=True, **kw)

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.run.reap(self.proc)

    def log_tail(self, n=30):
        return file_tail(os.path.join(self.dir, "server.log"), n)


class SentinelProc:
    def __init__(self, run, name, sentinel_bin):
        self.run = run
        self.name = name
        self.bin = sentinel_bin
        self.dir = os.path.join(run.work, name)
        os.makedirs(self.dir)
        self.conf = os.path.join(self.dir, "sentinel.conf")
        self.port = None
        self.proc = None

    def start(self, master_port):
        for _ in range(10):
            port = self.run.free_port()
            with open(self.conf, "w") as f:
                f.write(
                    "\n".join(
                        [
                            f"port {port}",
                            "bind 127.0.0.1",
                            "daemonize no",
                            f'dir "{self.dir}"',
                            f'logfile "{os.path.join(self.dir, "sentinel.log")}"',
                            f"sentinel monitor {SERVICE} 127.0.0.1 {master_port} 2",
                            f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}",
                            f"sentinel failover-timeout {SERVICE} {FAILOVER_TIMEOUT_MS}",
                            f"sentinel parallel-syncs {SERVICE} 1",
                        ]
                    )
                    + "\n"
                )
            self.proc = self.run.spawn([self.bin, self.conf], self.dir)
            self.port = port
            self.run.ports.add(port)
            end = mono() + START_DEADLINE
            while mono() < end:
                if self.proc.poll() is not None:
                    self.run.reap(self.proc)
                    break
                try:
                    info = redis.Redis(port=port, socket_timeout=2, retry=Retry(NoBackoff(), 0)).info("server")
                    if info["process_id"] == self.proc.pid:
                        return
                    self.run.stop(self.proc)
                    break
                except NET_ERRORS + (ResponseError,):
                    time.sleep(0.05)
            else:
                self.run.stop(self.proc)
                raise HarnessError(f"{self.name} did not answer within {START_DEADLINE:.0f} s")
        raise HarnessError(f"{self.name}: could not start on any free port")

    def client(self):
        return redis.Redis(port=self.port, socket_timeout=2, decode_responses=True)


# --- the load ------------------------------------------------------------------


def master_client(sentinel_ports, **kw):
    """A client that finds the master through Sentinel on every new
    connection, and never retries a command by itself."""
    s = Sentinel(
        [("127.0.0.1", p) for p in sentinel_ports],
        sentinel_kwargs={"socket_timeout": 1, "socket_connect_timeout": 1},
    )
    return s.master_for(
        SERVICE,
        socket_timeout=5,
        socket_connect_timeout=1,
        retry=Retry(NoBackoff(), 0),
        decode_responses=True,
        **kw,
    )


class Add:
    __slots__ = ("id", "queue", "due", "delay", "t_send", "t_done", "outcome", "waited", "addr")

    def __init__(self, mid, queue, due, delay, t_send):
        self.id = mid
        self.queue = queue
        self.due = due  # wall ms
        self.delay = delay
        self.t_send = t_send  # monotonic
        self.t_done = None
        self.outcome = None  # ok | unknown | refused
        self.waited = False
        self.addr = None


Delivery = collections.namedtuple("Delivery", "id queue attempt payload t_send t_recv wall_recv consumer abandoned port")
Ack = collections.namedtuple("Ack", "id queue reply waited t_send t_done")


class Shared:
    def __init__(self, sentinel_ports, seed, rate):
        self.sentinel_ports = sentinel_ports
        self.seed = seed
        self.rate = rate
        self.stop_producing = threading.Event()
        self.stop_consuming = threading.Event()
        self.errors = []  # unexpected exceptions in threads
        self.notes = []  # unexpected error replies


def backoff(rng):
    # Pacing of reconnection attempts, not a correctness assumption.
    time.sleep(0.02 + rng.random() * 0.03)


def producer(pi, sh, out):
    rng = random.Random(sh.seed * 1000 + pi)
    pool = master_client(sh.sentinel_ports).connection_pool
    seq = 0
    # Each producer's share of the rate, in batches of 3 on average.
    gap = 3.0 / (sh.rate / PRODUCERS)
    try:
        while not sh.stop_producing.is_set():
            # One connection for the ADDs and their WAIT: WAIT counts the
            # replicas that have this connection's last write, so a WAIT
            # sent on another connection would prove nothing. Taking it
            # connects (through Sentinel, when there was no connection or it
            # broke), and an ADD counts as sent only once a master took it.
            try:
                conn = pool.get_connection()
            except NET_ERRORS:
                backoff(rng)
                continue
            try:
                produce_batch(pi, rng, conn, seq, out)
            finally:
                pool.release(conn)
            seq += 5
            time.sleep(rng.random() * 2 * gap)
    except Exception as e:  # noqa: BLE001 - reported, fails the run
        sh.errors.append(f"producer {pi}: {e!r}")
        sh.stop_producing.set()


def produce_batch(pi, rng, conn, seq, out):
    t_ms = wall_ms()
    t_send = mono()
    batch = []
    commands = []
    for n in range(rng.randint(1, 5)):
        q = rng.choice(QUEUES)
        roll = rng.random()
        if roll < 0.4:
            delay = 0
        elif roll < 0.85:
            delay = rng.randint(1, 2000)
        else:
            delay = rng.randint(*LONG_DELAY_MS)
        due = t_ms + delay
        mid = f"p{pi}-{seq + n}-due{due}"
        if delay == 0:
            when = []
        elif rng.random() < 0.25:
            when = ["AT", due]
        else:
            when = ["DELAY", delay]
        commands.append(("DQ.ADD", q, f"{mid}@{q}", *when, "ID", mid, "NX"))
        batch.append(Add(mid, q, due, delay, t_send))
    out.extend(batch)
    try:
        conn.send_packed_command(conn.pack_commands(commands))
        for a in batch:
            try:
                rep = conn.read_response()
            except ResponseError:
                a.outcome = "refused"
                continue
            if rep != a.id:
                raise AssertionError(f"DQ.ADD {a.id} NX replied {rep!r}")
            a.outcome = "ok"
            a.t_done = mono()
            a.addr = (conn.host, conn.port)
    except NET_ERRORS:
        # The connection broke: an ADD without a reply may or may not have
        # been applied, and nothing says whether it reached the replica.
        conn.disconnect()
        for a in batch:
            a.outcome = a.outcome or "unknown"
        return
    # WAIT in its own round trip, so that t_done is when the master replied
    # to the ADD, not when WAIT gave up for want of a replica.
    try:
        conn.send_command("WAIT", 1, WAIT_MS)
        waited = conn.read_response() >= 1
    except NET_ERRORS:
        conn.disconnect()
        waited = False
    except ResponseError:
        waited = False
    for a in batch:
        a.waited = waited and a.outcome == "ok"


def consumer(ci, queue, sh, deliveries, acks, counters):
    rng = random.Random(sh.seed * 1000 + 100 + ci)
    r = master_client(sh.sentinel_ports)
    try:
        while not sh.stop_consuming.is_set():
            # The POP on a connection of its own, to know which node
            # delivered.
            try:
                conn = r.connection_pool.get_connection()
            except NET_ERRORS:
                counters["pop_errors"] += 1
                backoff(rng)
                continue
            t_send = mono()
            try:
                conn.send_command("DQ.POP", queue, "COUNT", 100, "BLOCK", 1000, "LEASE", LEASE_MS)
                got = conn.read_response()
                port = conn.port
            except NET_ERRORS:
                conn.disconnect()
                counters["pop_errors"] += 1
                backoff(rng)
                continue
            except ResponseError as e:
                # UNBLOCKED when a switchover demotes the master under a
                # blocked POP; anything else is unexpected (noted, and the
                # drain fails if it goes on).
                counters["pop_refused"] += 1
                if not str(e).startswith("UNBLOCKED") and counters["pop_refused"] <= 3:
                    sh.notes.append(f"consumer {ci}: DQ.POP refused: {e}")
                backoff(rng)
                continue
            finally:
                r.connection_pool.release(conn)
            t_recv = mono()
            wall_recv = time.time_ns() / 1e6
            if not got:
                continue
            ids = []
            for mid, payload, attempt in got:
                # A few deliveries are abandoned, as by a consumer that died:
                # their lease must run out, on whichever master holds them
                # then, and they must be delivered again.
                abandoned = rng.random() < ABANDON
                deliveries.append(Delivery(mid, queue, attempt, payload, t_send, t_recv, wall_recv, ci, abandoned, port))
                if not abandoned:
                    ids.append(mid)
            # The work, 0-20 ms a batch: a kill can find messages popped and
            # not yet acknowledged.
            time.sleep(rng.random() * 0.02)
            if not ids:
                continue
            # ACK every id, then WAIT; after a connection error the whole batch
            # again, on whichever node is the master by then.
            end = mono() + 60
            while True:
                t_ack = mono()
                pipe = r.pipeline(transaction=False)
                for mid in ids:
                    pipe.execute_command("DQ.ACK", queue, mid)
                pipe.execute_command("WAIT", 1, WAIT_MS)
                try:
                    replies = pipe.execute(raise_on_error=False)
                    break
                except NET_ERRORS:
                    counters["ack_errors"] += 1
                    if mono() > end:
                        replies = None
                        break
                    backoff(rng)
            t_done = mono()
            if replies is None:
                for mid in ids:
                    acks.append(Ack(mid, queue, None, False, t_ack, t_done))
                continue
            waited = isinstance(replies[-1], int) and replies[-1] >= 1
            for mid, rep in zip(ids, replies[:-1]):
                reply = rep if isinstance(rep, int) else None
                acks.append(Ack(mid, queue, reply, waited and reply == 1, t_ack, t_done))
    except Exception as e:  # noqa: BLE001 - reported, fails the run
        sh.errors.append(f"consumer {ci} ({queue}): {e!r}")


# --- topology ------------------------------------------------------------------


def sentinel_view(sent, master, replica):
    """True when this Sentinel sees master (healthy), replica (healthy) and
    the two other Sentinels."""
    c = sent.client()
    m = c.sentinel_master(SERVICE)
    if int(m["port"]) != master.port or m["flags"] != "master":
        return False
    if int(m["num-other-sentinels"]) < 2:
        return False
    reps = c.sentinel_slaves(SERVICE)
    return any(
        int(x["port"]) == replica.port and x["flags"] == "slave" and x.get("master-link-status") == "ok"
        for x in reps
    )


def replication_ready(master, replica):
    """The replica is linked to the master and has everything it wrote."""
    mi = master.client().info("replication")
    if mi["role"] != "master":
        return False
    ri = replica.client().info("replication")
    if ri["role"] != "slave" or int(ri["master_port"]) != master.port or ri["master_link_status"] != "up":
        return False
    for k, v in mi.items():
        if k.startswith("slave") and isinstance(v, dict) and int(v["port"]) == replica.port:
            return v["state"] == "online"
    return False


def wait_topology(sentinels, nodes, deadline=TOPOLOGY_DEADLINE):
    """Waits until every Sentinel names the same node master, the other node
    is its synced replica, and every Sentinel sees that replica and the two
    other Sentinels. Returns (master, replica) as Sentinel has them, so that
    a failover nobody asked for cannot confuse the harness."""

    def whole():
        ports = set(sentinel_master_ports(sentinels))
        if len(ports) != 1:
            return None
        port = ports.pop()
        master = next((n for n in nodes if n.port == port), None)
        if master is None:
            return None
        replica = next(n for n in nodes if n is not master)
        if not replication_ready(master, replica):
            return None
        if not all(sentinel_view(s, master, replica) for s in sentinels):
            return None
        return master, replica

    return wait_for("every Sentinel to see the same master, its synced replica and each other", deadline, whole)


def sentinel_master_ports(sentinels):
    ports = []
    for s in sentinels:
        try:
            ports.append(int(s.client().sentinel_get_master_addr_by_name(SERVICE)[1]))
        except NET_ERRORS + (ResponseError, TypeError):
            ports.append(None)
    return ports


def failover(run, sentinels, master, replica, rec):
    """A kill: kills master with SIGKILL, waits for Sentinel to promote
    replica, restarts master from its own configuration and waits until it
    is a synced replica of the new master. A switchover: asks Sentinel for
    a failover (SENTINEL FAILOVER, what an operator runs before maintenance)
    and waits until the old master, still running, is a synced replica of
    the new one. Fills rec with the times."""
    rec["old_port"] = master.port
    rec["new_port"] = replica.port
    rec["t_kill"] = mono()
    rec["wall_kill"] = wall_ms()
    if rec["kind"] == "kill":
        master.kill9()
        log(f"killed the master {master.name} (port {master.port}) with SIGKILL")
    else:
        # Refused (INPROG, NOGOODSLAVE) only while Sentinel's view is not
        # settled yet: asked again until it accepts.
        ask = sentinels[0].client()
        reply = wait_for("Sentinel to accept SENTINEL FAILOVER", FAILOVER_DEADLINE,
                         lambda: ask.execute_command("SENTINEL", "FAILOVER", SERVICE), interval=0.2)
        log(f"SENTINEL FAILOVER {SERVICE}: {reply} (master {master.name}, port {master.port})")

    def switched():
        ports = sentinel_master_ports(sentinels)
        if "t_first_switch" not in rec and replica.port in ports:
            rec["t_first_switch"] = mono()
            rec["wall_first_switch"] = wall_ms()
        return all(p == replica.port for p in ports)

    wait_for("Sentinel to promote the replica", FAILOVER_DEADLINE, switched, interval=0.02)
    rec["t_switch"] = mono()
    role = replica.client().execute_command("ROLE")
    if role[0] != "master":
        raise HarnessError(f"Sentinel names {replica.name} the master but it says {role[0]}")
    log(f"Sentinel promoted {replica.name} (port {replica.port}) {rec['t_switch'] - rec['t_kill']:.2f} s after the {rec['kind']}")

    if rec["kind"] == "switchover":
        # The old master keeps running, and keeps its clients' connections,
        # until Sentinel reconfigures it.
        wait_for(f"{master.name} to be a synced replica", REJOIN_DEADLINE, lambda: replication_ready(replica, master))
        rec["t_rejoined"] = mono()
        log(f"{master.name} is a synced replica {rec['t_rejoined'] - rec['t_kill']:.1f} s after the switchover")
        return

    # The old master comes back from its own redis.conf: a master with no
    # data (no persistence), which Sentinel must turn into a replica.
    if master.restart():
        log(f"restarted {master.name} on its port {master.port}; waiting for Sentinel to make it a replica")
        rec["rejoin"] = "Sentinel reconfigured it"
        try:
            wait_for(f"Sentinel to make {master.name} a replica", SENTINEL_RECONF_DEADLINE,
                     lambda: master.client().info("replication")["role"] == "slave")
        except HarnessError:
            master.client().execute_command("REPLICAOF", "127.0.0.1", replica.port)
            rec["rejoin"] = f"Sentinel had not reconfigured it in {SENTINEL_RECONF_DEADLINE:.0f} s: REPLICAOF sent"
            log(f"Sentinel had not reconfigured {master.name} in {SENTINEL_RECONF_DEADLINE:.0f} s; "
                "sent REPLICAOF as an operator would")
    else:
        # Its port was taken meanwhile: start it elsewhere, as a replica.
        master.start(replicaof=replica.port)
        rec["rejoin"] = f"port taken, restarted as a replica on {master.port}"
        log(f"{master.name}'s port was taken: restarted on {master.port} as a replica")
    # Synced is enough for WAIT; the next kill also waits for every Sentinel
    # to see it as a healthy replica.
    wait_for(f"{master.name} to be a synced replica", REJOIN_DEADLINE, lambda: replication_ready(replica, master))
    rec["t_rejoined"] = mono()
    log(f"{master.name} is a synced replica {rec['t_rejoined'] - rec['t_kill']:.1f} s after the kill")


# --- checks --------------------------------------------------------------------


def stats(client, queue):
    flat = client.execute_command("DQ.STATS", queue)
    if isinstance(flat, dict):
        return flat
    return dict(zip(flat[0::2], flat[1::2]))


def pct(values, p):
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", required=True)
    ap.add_argument("--secs", type=int, default=20)
    ap.add_argument("--module", required=True)
    ap.add_argument("--server", default="redis-server")
    ap.add_argument("--sentinel", default="redis-sentinel")
    args = ap.parse_args()

    secs = max(args.secs, 6)
    kills = int(os.environ.get("DQ_FAILOVER_KILLS") or max(1, secs // 30))
    switchovers = int(os.environ.get("DQ_FAILOVER_SWITCHOVERS") or (1 if secs >= 60 else 0))
    events = ["kill"] * kills + ["switchover"] * switchovers
    seed = int(os.environ.get("DQ_FAILOVER_SEED") or random.randrange(1, 10**9))
    rate = int(os.environ.get("DQ_FAILOVER_RATE") or 800)

    # SIGTERM (from scripts/failover's trap) ends this like Ctrl-C: the
    # finally below stops the servers.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    run = Run(args.work)
    try:
        return run_all(run, args, secs, events, seed, rate)
    except HarnessError as e:
        log(f"HARNESS ERROR: {e}")
        # CI keeps only what is printed: the logs say whether Sentinel or
        # a sync stalled.
        for name in sorted(os.listdir(run.work)):
            for f in ("server.log", "sentinel.log"):
                tail = file_tail(os.path.join(run.work, name, f), 25)
                if tail:
                    log(f"{name}/{f}, last 25 lines:\n{tail}")
        return 2
    finally:
        run.stop_all()


def run_all(run, args, secs, events, seed, rate):
    a = Node(run, "node-a", args.server, args.module)
    b = Node(run, "node-b", args.server, args.module)
    a.start()
    b.start(replicaof=a.port)
    sentinels = [SentinelProc(run, f"sentinel-{i}", args.sentinel) for i in (1, 2, 3)]
    for s in sentinels:
        s.start(a.port)
    ver = a.client().info("server")
    log(
        f"{os.path.basename(args.server)} {ver.get('valkey_version') or ver.get('redis_version', '?')}: master {a.port}, replica {b.port}, "
        f"sentinels {', '.join(str(s.port) for s in sentinels)}; module {args.module}"
    )
    log(f"load {secs} s, {events.count('kill')} kill(s) and {events.count('switchover')} switchover(s), ~{rate} adds/s, seed {seed} (DQ_FAILOVER_SEED={seed} repeats the choices)")
    wait_topology(sentinels, [a, b])

    sh = Shared([s.port for s in sentinels], seed, rate)
    adds_by = [[] for _ in range(PRODUCERS)]
    deliveries_by = []
    acks_by = []
    counters = collections.Counter()
    threads = []
    ci = 0
    for q in QUEUES:
        for _ in range(CONSUMERS_PER_QUEUE):
            d, k = [], []
            deliveries_by.append(d)
            acks_by.append(k)
            threads.append(threading.Thread(target=consumer, args=(ci, q, sh, d, k, counters), daemon=True))
            ci += 1
    producers = [
        threading.Thread(target=producer, args=(pi, sh, adds_by[pi]), daemon=True) for pi in range(PRODUCERS)
    ]
    t_start = mono()
    for t in threads + producers:
        t.start()

    failovers = []
    try:
        for k, kind in enumerate(events):
            # A third into each share of the load: time before the kill for
            # delayed messages to pile up, and after it for the new master.
            at = t_start + secs * (k + 1 / 3) / len(events)
            while mono() < at and not sh.errors:
                time.sleep(0.05)
            if sh.errors:
                break
            # The next kill only once the pair and the Sentinels are whole.
            master, replica = wait_topology(sentinels, [a, b])
            rec = {"kind": kind}
            failovers.append(rec)
            failover(run, sentinels, master, replica, rec)
        end = max(t_start + secs, (failovers[-1]["t_rejoined"] if failovers else 0) + AFTER_LAST_FAILOVER)
        while mono() < end and not sh.errors:
            time.sleep(0.05)
    finally:
        sh.stop_producing.set()
        for t in producers:
            t.join(timeout=30)
    t_load_end = mono()
    log(f"load over after {t_load_end - t_start:.1f} s; draining")

    adds = [x for part in adds_by for x in part]
    waited_ids = {x.id for x in adds if x.waited}
    ctl = master_client(sh.sentinel_ports)
    drain_note = None

    def drained():
        delivered = set()
        for part in deliveries_by:
            delivered.update(d.id for d in part[:])
        if not waited_ids <= delivered:
            return False
        for q in QUEUES:
            st = stats(ctl, q)
            if int(st["delayed"]) or int(st["ready"]) or int(st["inflight"]):
                return False
        return True

    try:
        wait_for("every WAITed add to be delivered and every queue to drain", DRAIN_DEADLINE, drained, 0.2)
    except HarnessError as e:
        drain_note = str(e)
    t_drained = mono()
    sh.stop_consuming.set()
    for t in threads:
        t.join(timeout=30)
    final_stats = {q: stats(ctl, q) for q in QUEUES}

    # The replica holds exactly what the master holds.
    digest_note = None
    master, replica = a, b
    try:
        master, replica = wait_topology(sentinels, [a, b])
        mc, rc = master.client(), replica.client()

        def same_digest():
            if mc.info("replication")["master_repl_offset"] != rc.info("replication")["slave_repl_offset"]:
                return False
            return mc.execute_command("DEBUG", "DIGEST") == rc.execute_command("DEBUG", "DIGEST")

        wait_for("the replica's DEBUG DIGEST to equal the master's", 30, same_digest, 0.1)
    except HarnessError as e:
        digest_note = str(e)

    # Every failover Sentinel made, asked for or not, raised the epoch.
    epochs = max(int(s.client().sentinel_master(SERVICE).get("config-epoch", 0)) for s in sentinels)
    if epochs != len(failovers):
        sh.notes.append(f"Sentinel made {epochs} failover(s), {len(failovers)} were asked for")
    for note in sh.notes:
        log(note)
    return report(
        secs, seed, t_start, t_load_end, t_drained, adds, deliveries_by, acks_by, counters,
        failovers, final_stats, drain_note, digest_note, sh.errors, master, replica,
    )


def report(secs, seed, t_start, t_load_end, t_drained, adds, deliveries_by, acks_by, counters,
           failovers, final_stats, drain_note, digest_note, errors, master, replica):
    deliveries = sorted((d for part in deliveries_by for d in part), key=lambda d: d.t_recv)
    acks = [k for part in acks_by for k in part]
    by_id = {x.id: x for x in adds}
    delivered = collections.defaultdict(list)
    for d in deliveries:
        delivered[d.id].append(d)

    ok = [x for x in adds if x.outcome == "ok"]
    waited = [x for x in ok if x.waited]
    unknown = [x for x in adds if x.outcome == "unknown"]
    refused = [x for x in adds if x.outcome == "refused"]
    lost = [x for x in waited if x.id not in delivered]
    strangers = [d for d in deliveries if d.id not in by_id]
    corrupt = [d for d in deliveries if d.id in by_id and (d.payload != f"{d.id}@{d.queue}" or by_id[d.id].queue != d.queue)]
    early = [d for d in deliveries if d.id in by_id and d.wall_recv < by_id[d.id].due]
    dup_ids = [i for i, ds in delivered.items() if len(ds) > 1]
    dup_deliveries = sum(len(delivered[i]) - 1 for i in dup_ids)
    acked_waited = {}
    for k in acks:
        if k.waited and k.id not in acked_waited:
            acked_waited[k.id] = k.t_done
    acked_unwaited = {k.id for k in acks if k.reply == 1 and not k.waited} - set(acked_waited)
    came_back = [d for d in deliveries if d.id in acked_waited and d.t_send > acked_waited[d.id]]
    came_back_unwaited = {
        d.id for d in deliveries
        if d.id in acked_unwaited and any(k.id == d.id and k.reply == 1 and d.t_send > k.t_done for k in acks)
    } if acked_unwaited else set()

    # Abandoned deliveries of WAITed adds: the lease ran out and the message
    # was delivered again (or a late ACK of an earlier delivery took it).
    acked_at = collections.defaultdict(list)
    for k in acks:
        if k.reply == 1:
            acked_at[k.id].append(k.t_done)
    abandoned = [d for d in deliveries if d.abandoned]
    waited_ids = {x.id for x in waited}
    stranded = [
        d for d in abandoned
        if d.id in waited_ids and delivered[d.id][-1] is d and not any(t > d.t_send for t in acked_at[d.id])
    ]
    # Repeated (id, attempt) pairs: a POP the replica had not received.
    repeated = sum(
        1 for ds in delivered.values() for prev, cur in zip(ds, ds[1:]) if cur.attempt <= prev.attempt
    )

    # Every queue served by the new master's timer: WAITed delayed messages
    # written before a kill and due only after Sentinel named the new master.
    served = []
    for n, f in enumerate(failovers):
        kill_t = f["t_kill"]
        switch_wall = f.get("wall_first_switch", f["wall_kill"])
        switch_t = f.get("t_first_switch", f["t_switch"])
        f["lease_carried"] = sum(
            1 for d in abandoned if d.t_recv < kill_t and any(
                e.t_send > switch_t for e in delivered[d.id] if e.t_send > d.t_recv)
        )
        per_q = {}
        for q in QUEUES:
            carried = [x for x in waited if x.queue == q and x.delay > 0 and x.t_send < kill_t and x.due > switch_wall]
            # Delivered by the new master: after a switchover the old one may
            # deliver it too, until Sentinel has made it a replica.
            by_new = {
                x.id: [d for d in delivered[x.id] if d.port == f["new_port"] and d.t_send >= kill_t] for x in carried
            }
            got = [x for x in carried if by_new[x.id]]
            late = [by_new[x.id][0].wall_recv - x.due for x in got]
            per_q[q] = (len(carried), len(got), max(late) if late else None)
        served.append(per_q)

    # How late delayed messages were delivered, first deliveries only (this
    # includes the failovers and the consumers' own waits, WAIT among them).
    lateness = [delivered[x.id][0].wall_recv - x.due for x in ok if x.delay > 0 and x.id in delivered]

    # Recovery: from the kill (or the SENTINEL FAILOVER) to the first ADD
    # sent after it that the new master answered.
    for f in failovers:
        on_new = [x for x in ok if x.t_send >= f["t_kill"] and x.addr and x.addr[1] == f["new_port"]]
        f["first_ok"] = min((x.t_done for x in on_new), default=None)
        f["first_waited"] = min((x.t_done for x in on_new if x.waited), default=None)
        # A switchover leaves the old master running: what it took after
        # Sentinel named the new one, until it was a replica, is lost.
        switch_t = f.get("t_first_switch", f["t_switch"])
        stale = [x for x in ok if x.addr and x.addr[1] == f["old_port"] and switch_t <= x.t_send < f["t_rejoined"]]
        f["stale"] = (len(stale), sum(1 for x in stale if x.waited))

    # --- the table ---
    def ms(t0, t1):
        return "n/a" if t0 is None or t1 is None else f"{(t1 - t0) * 1000:.0f} ms"

    rows = [
        ("load phase / drain", f"{t_load_end - t_start:.1f} s / {t_drained - t_load_end:.1f} s"),
        ("adds sent", len(adds)),
        ("  replied with the id", len(ok)),
        ("  WAITed (>= 1 replica)", len(waited)),
        ("  connection broke (outcome unknown)", f"{len(unknown)} ({sum(1 for x in unknown if x.id in delivered)} of them delivered)"),
        ("  refused with an error", len(refused)),
        ("deliveries", len(deliveries)),
        ("  distinct ids delivered", len(delivered)),
        ("lost (WAITed, never delivered)", len(lost)),
        ("duplicates (ids / extra deliveries)", f"{len(dup_ids)} / {dup_deliveries}"),
        ("  abandoned by the consumer (no ACK)", len(abandoned)),
        ("  (id, attempt) delivered twice", repeated),
        ("acks replied 1", sum(1 for k in acks if k.reply == 1)),
        ("  WAITed acks", len(acked_waited)),
        ("came back after a WAITed ack", len(came_back)),
        ("came back after an ack not WAITed", len(came_back_unwaited)),
        ("early deliveries", len(early)),
        ("delayed: delivered after due p50 / p99 / max",
         " / ".join("n/a" if v is None else f"{v:.0f} ms" for v in (pct(lateness, 50), pct(lateness, 99), max(lateness, default=None)))),
        ("connection errors (POP / ACK)", f"{counters['pop_errors']} / {counters['ack_errors']}"),
        ("POPs refused with an error", counters["pop_refused"]),
    ]
    for n, f in enumerate(failovers, 1):
        ev = f"{f['kind']} {n}"
        rows.append((f"{ev}: Sentinel announced", ms(f["t_kill"], f.get("t_first_switch"))))
        rows.append((f"{ev}: first ADD on new master", ms(f["t_kill"], f["first_ok"])))
        rows.append((f"{ev}: first WAITed ADD", ms(f["t_kill"], f["first_waited"])))
        rows.append((f"{ev}: old master a replica again", ms(f["t_kill"], f["t_rejoined"])))
        if f["kind"] == "switchover":
            rows.append((f"{ev}: ADDs the old master took after (WAITed)", f"{f['stale'][0]} ({f['stale'][1]})"))
        rows.append((f"{ev}: leases from the old master redelivered", f["lease_carried"]))
        for q, (carried, got, late) in served[n - 1].items():
            worst = "n/a" if late is None else f"{late:.0f} ms"
            rows.append((f"{ev}: {q} due after promotion", f"{got}/{carried} delivered, latest {worst} after due"))
    width = max(len(r[0]) for r in rows)
    print()
    print(f"{'figure':<{width}}  value")
    print(f"{'-' * width}  {'-' * 40}")
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    print()

    # --- the checks ---
    checks = []

    def check(name, good, detail=""):
        checks.append(good)
        print(f"{'PASS' if good else 'FAIL'} {name}{': ' + detail if detail and not good else ''}")

    check("no thread failed", not errors, "; ".join(errors))
    check("the queues drained", drain_note is None, drain_note or "")
    check("every WAITed add was delivered", not lost,
          f"{len(lost)} lost, e.g. " + ", ".join(x.id for x in lost[:5]))
    check("nothing delivered after its WAITed ack", not came_back,
          "; ".join(f"{d.id} attempt {d.attempt}" for d in came_back[:5]))
    check("every abandoned delivery was delivered again", not stranded,
          f"{len(stranded)}, e.g. " + ", ".join(f"{d.id} attempt {d.attempt}" for d in stranded[:5]))
    check("no delivery before its due time", not early,
          "; ".join(f"{d.id} {by_id[d.id].due - d.wall_recv:.1f} ms early" for d in early[:5]))
    check("every delivery is a message that was added, intact", not strangers and not corrupt,
          f"{len(strangers)} unknown ids, {len(corrupt)} altered payloads")
    check(f"{len(failovers)} failover(s) happened", len(failovers) >= 1)
    for n, per_q in enumerate(served, 1):
        f = failovers[n - 1]
        ev = f"{f['kind']} {n}"
        thin = [q for q, (carried, got, _) in per_q.items() if carried == 0]
        short = [q for q, (carried, got, _) in per_q.items() if got < carried]
        check(f"{ev}: the new master's timer served every queue", not thin and not short,
              (f"no message carried over into {thin}; " if thin else "") + (f"undelivered in {short}" if short else ""))
        check(f"{ev}: producers wrote to the new master", f["first_ok"] is not None,
              f"no ADD after it was answered by port {f['new_port']}")
    leftover = {q: {k: st[k] for k in ("delayed", "ready", "inflight", "dead")} for q, st in final_stats.items()
                if any(int(st[k]) for k in ("delayed", "ready", "inflight", "dead"))}
    check("every queue is empty at the end (no dead letters)", not leftover, str(leftover))
    check("the replica's DEBUG DIGEST equals the master's", digest_note is None, digest_note or "")

    passed = sum(checks)
    failed = len(checks) - passed
    print(f"failover: {passed} passed, {failed} failed")
    if failed:
        log(f"seed {seed}; master {master.name} log tail:\n{master.log_tail()}")
        log(f"replica {replica.name} log tail:\n{replica.log_tail()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
