//! Chaos soak: producers and consumers that randomly fail, a server killed
//! with SIGKILL at random and restarted on the same port and files
//! (`appendfsync always`), then a drain and an audit of what every client
//! saw. It fails on any loss: an ADD that got a reply must be delivered and
//! finally acknowledged.
//!
//! `DQ_SOAK_SECS` (default 8) is how long the chaos lasts; the drain comes on
//! top. `DQ_SOAK_SEED` replays a run's random choices (thread timing still
//! varies). `make soak` runs it for minutes.
//!
//! The audit orders client events with one global counter (`tick`): an
//! event whose tick is higher happened after one with a lower tick, so "the
//! POP was sent after the ACK's reply came back" is a fact, not a guess.
//! Beyond loss it checks, for every message:
//! - nothing whose ACK got a reply `1` is delivered by a POP sent after that
//!   reply (with `appendfsync always` an answered ACK is on disk);
//! - no two deliveries carry the same attempt number (an answered POP is on
//!   disk too, so a restart cannot undo it);
//! - no delivery falls within an earlier one's lease unless an ACK of that
//!   id, or that delivery's own NACK, may have run in between (one consumer
//!   at a time while a lease holds). Consumers pass `ATTEMPT` on NACK, so a
//!   NACK from a consumer whose lease ran out is refused (`STALE`) and
//!   cannot end the next holder's lease; ACK stays unfenced (DESIGN), so a
//!   late ACK may;
//! - the payload arrives intact, nothing unknown is delivered, nothing
//!   dead-letters (attempts are unlimited, so a dead message is a bug).
//!
//! A second soak runs the same workload with NACKs that do not pass
//! `ATTEMPT`, as clients did before fencing: there a late NACK does end the
//! next consumer's lease, and the report counts the deliveries that
//! overlapped a lease for that reason alone — what fencing prevents.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{sleep, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dq_testkit::{
    entries, field, int, now_ms, run, server_binary, text, wait_until, Server, Value, LONG,
};

const QUEUES: [&str; 2] = ["soak:plain", "soak:grouped"];
const PRODUCERS: u64 = 2;
const CONSUMERS: u64 = 3;
/// Producers wait while this many answered ADDs are not yet acknowledged,
/// so the drain at the end stays short.
const MAX_BACKLOG: u64 = 200;
const DRAIN_TIMEOUT: Duration = Duration::from_secs(90);

#[test]
fn chaos_soak_loses_no_acknowledged_add() {
    soak(Fencing::Attempt);
}

#[test]
fn chaos_soak_without_attempt_lets_late_nacks_end_other_leases() {
    soak(Fencing::None);
}

/// Whether consumers pass ATTEMPT on NACK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fencing {
    Attempt,
    None,
}

fn soak(fencing: Fencing) {
    let secs: u64 = env_number("DQ_SOAK_SECS").unwrap_or(8);
    let seed = env_number("DQ_SOAK_SEED").unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("clock after 1970")
            .as_nanos() as u64
    });
    println!(
        "soak: seed {seed} (replay with DQ_SOAK_SEED={seed}), {secs}s of chaos on {}, fencing {fencing:?}",
        server_binary()
    );

    let server = Server::start_with(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        // Frequent AOF rewrites, so some kills land in the middle of one.
        "--auto-aof-rewrite-min-size",
        "1mb",
    ]);
    let shared = Arc::new(Shared::new(server.url(), fencing));
    let mut admin = connect_once(&shared.url).expect("connect to the fresh server");
    for queue in QUEUES {
        // Unlimited attempts: with dying consumers and restarts a message
        // may be delivered many times, and it must never dead-letter.
        let line = format!("DQ.CONFIG {queue} SET MAXATTEMPTS 2147483647 BACKOFF fixed:20");
        expect_ok(&mut admin, &line);
    }
    drop(admin);

    let started = Instant::now();
    let mut root = Rng(seed);
    let producers: Vec<JoinHandle<()>> = (0..PRODUCERS)
        .map(|n| {
            let (shared, rng) = (shared.clone(), root.fork());
            std::thread::spawn(move || produce(n, &shared, rng))
        })
        .collect();
    let consumers: Vec<JoinHandle<()>> = (0..CONSUMERS)
        .map(|n| {
            let (shared, rng) = (shared.clone(), root.fork());
            std::thread::spawn(move || consume(n, &shared, rng))
        })
        .collect();
    let chaos = {
        let (shared, rng) = (shared.clone(), root.fork());
        std::thread::spawn(move || chaos(server, &shared, rng))
    };

    // The soak itself: the workers run until told to stop.
    let chaos_end = started + Duration::from_secs(secs);
    while Instant::now() < chaos_end && !chaos.is_finished() {
        sleep(Duration::from_millis(100));
    }
    shared.stop_producing.store(true, Ordering::SeqCst);
    shared.stop_chaos.store(true, Ordering::SeqCst);
    let producers_ok = producers.into_iter().all(|p| p.join().is_ok());
    let chaos_result = chaos.join();
    shared.draining.store(true, Ordering::SeqCst);
    let drain_started = Instant::now();

    let mut failures: Vec<String> = Vec::new();
    let mut leftover = Vec::new();
    let server = match chaos_result {
        Ok(server) => {
            leftover = drain(&shared);
            if !leftover.is_empty() {
                failures.push(format!(
                    "NOT-DRAINED: left after the drain (dead ones stay; others had {DRAIN_TIMEOUT:?}): {leftover:?}"
                ));
            }
            Some(server)
        }
        Err(_) => {
            failures.push("CHAOS: the chaos thread failed (see its panic above)".into());
            None
        }
    };
    let drained_in = drain_started.elapsed();
    if let Err(e) = late_nack_probe(&shared.url, fencing) {
        failures.push(format!("PROBE {e}"));
    }
    if shared.kills.load(Ordering::SeqCst) == 0 {
        failures.push("KILLS the server was never killed".into());
    }
    shared.finish.store(true, Ordering::SeqCst);
    let consumers_ok = consumers.into_iter().all(|c| c.join().is_ok());
    if !producers_ok || !consumers_ok {
        failures.push("THREAD: a producer or consumer thread panicked (see above)".into());
    }

    let report = audit(&shared, &mut failures);
    let elapsed = started.elapsed();
    let summary = format!(
        "soak: seed {seed}, {} on {}, fencing {fencing:?}: {report}, kills {}, \
         unexpected errors {}, drain {:.1}s, elapsed {:.1}s",
        if failures.is_empty() { "PASS" } else { "FAIL" },
        server_binary(),
        shared.kills.load(Ordering::SeqCst),
        shared.errors.lock().expect("errors lock").len(),
        drained_in.as_secs_f64(),
        elapsed.as_secs_f64(),
    );
    println!("{summary}");
    let errors = shared.errors.lock().expect("errors lock");
    failures.extend(
        errors
            .iter()
            .take(20)
            .map(|e| format!("UNEXPECTED reply: {e}")),
    );
    if !failures.is_empty() {
        if let Some(server) = &server {
            let log = server.log();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            println!("server log (last lines):");
            tail.iter().rev().for_each(|l| println!("  {l}"));
            if !leftover.is_empty() {
                println!("left in the queues: {}", describe(server, &leftover));
            }
        }
        failures.sort();
        let mut kinds: Vec<(&str, usize)> = Vec::new();
        for kind in failures
            .iter()
            .map(|f| f.split(' ').next().unwrap_or_default())
        {
            match kinds.last_mut() {
                Some((k, n)) if *k == kind => *n += 1,
                _ => kinds.push((kind, 1)),
            }
        }
        panic!(
            "{summary}\n{} problem(s) {kinds:?}:\n  {}",
            failures.len(),
            failures
                .iter()
                .take(50)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n  ")
        );
    }
}

// ---------------------------------------------------------------------------
// What the clients saw.

/// Everything the threads share: the ledger, flags, counters.
struct Shared {
    url: String,
    fencing: Fencing,
    ledger: Mutex<HashMap<String, Entry>>,
    /// Deliveries of ids no producer ever sent.
    phantoms: Mutex<Vec<String>>,
    /// Error replies other than LOADING: each one is a failure.
    errors: Mutex<Vec<String>>,
    clock: AtomicU64,
    stop_producing: AtomicBool,
    stop_chaos: AtomicBool,
    draining: AtomicBool,
    finish: AtomicBool,
    adds_answered: AtomicU64,
    acks_answered: AtomicU64,
    acks_in_doubt: AtomicU64,
    kills: AtomicU64,
    /// Ticks just before each kill and just after the restart answered.
    kill_ticks: Mutex<Vec<(u64, u64)>>,
    dies: AtomicU64,
    nacks: AtomicU64,
    slow: AtomicU64,
    ack_zero: AtomicU64,
    /// NACKs refused as STALE: their delivery was over.
    stale: AtomicU64,
}

impl Shared {
    fn new(url: String, fencing: Fencing) -> Shared {
        Shared {
            url,
            fencing,
            ledger: Mutex::new(HashMap::new()),
            phantoms: Mutex::new(Vec::new()),
            errors: Mutex::new(Vec::new()),
            clock: AtomicU64::new(1),
            stop_producing: AtomicBool::new(false),
            stop_chaos: AtomicBool::new(false),
            draining: AtomicBool::new(false),
            finish: AtomicBool::new(false),
            adds_answered: AtomicU64::new(0),
            acks_answered: AtomicU64::new(0),
            acks_in_doubt: AtomicU64::new(0),
            kills: AtomicU64::new(0),
            kill_ticks: Mutex::new(Vec::new()),
            dies: AtomicU64::new(0),
            nacks: AtomicU64::new(0),
            slow: AtomicU64::new(0),
            ack_zero: AtomicU64::new(0),
            stale: AtomicU64::new(0),
        }
    }

    /// The global order of client events.
    fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::SeqCst)
    }

    fn ledger(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.ledger.lock().expect("ledger lock")
    }

    fn unexpected(&self, what: String) {
        self.errors.lock().expect("errors lock").push(what);
    }

    fn backlog(&self) -> u64 {
        let added = self.adds_answered.load(Ordering::SeqCst);
        let gone =
            self.acks_answered.load(Ordering::SeqCst) + self.acks_in_doubt.load(Ordering::SeqCst);
        added.saturating_sub(gone)
    }
}

#[derive(Debug, Default, PartialEq)]
enum AddState {
    /// Sent; no reply came (the server died): it may or may not exist.
    #[default]
    Unknown,
    /// The server replied with the id: it must not be lost.
    Answered,
    /// The server refused it (LOADING): it does not exist.
    Refused,
}

#[derive(Debug, Default)]
struct Entry {
    queue: &'static str,
    group: Option<String>,
    add: AddState,
    deliveries: Vec<Delivery>,
    /// Tick taken after the first ACK of this id that replied 1.
    acked_at: Option<u64>,
    /// An ACK was sent and its reply lost: it may have been done.
    ack_in_doubt: bool,
}

#[derive(Debug)]
struct Delivery {
    attempt: i64,
    /// Ticks before sending the POP and after its reply.
    sent: u64,
    replied: u64,
    sent_ms: u64,
    replied_ms: u64,
    lease_ms: u64,
    /// Ticks before this consumer sent ACK or NACK for it, and after the
    /// reply (none when the reply was lost).
    released: Option<u64>,
    release_answered: Option<u64>,
    consumer: u64,
    /// What the consumer did with it, for failure reports.
    action: &'static str,
    /// Its NACK replied a new state: it failed whatever delivery was current.
    nack_acted: bool,
}

// ---------------------------------------------------------------------------
// The workers.

fn produce(producer: u64, shared: &Shared, mut rng: Rng) {
    let mut conn: Option<redis::Connection> = None;
    for n in 0.. {
        while shared.backlog() > MAX_BACKLOG && !shared.stop_producing.load(Ordering::SeqCst) {
            sleep(Duration::from_millis(5));
        }
        if shared.stop_producing.load(Ordering::SeqCst) {
            return;
        }
        let Some(c) = connection(&mut conn, &shared.url, &shared.stop_producing) else {
            return;
        };
        let grouped = rng.chance(50);
        let queue = QUEUES[usize::from(grouped)];
        let id = format!("p{producer}-{n}");
        let payload = payload_of(&id);
        let mut args = vec![
            "DQ.ADD".to_string(),
            queue.into(),
            payload,
            "ID".into(),
            id.clone(),
        ];
        if rng.chance(30) {
            args.extend(["DELAY".into(), rng.below(300).to_string()]);
        }
        if rng.chance(30) {
            args.extend(["PRIORITY".into(), (rng.below(5) as i64 - 2).to_string()]);
        }
        let group = grouped.then(|| format!("g{}", rng.below(8)));
        if let Some(g) = &group {
            args.extend(["GROUP".into(), g.clone()]);
        }
        let entry = Entry {
            queue,
            group,
            ..Entry::default()
        };
        shared.ledger().insert(id.clone(), entry);
        let outcome = call(c, &args);
        let mut ledger = shared.ledger();
        let entry = ledger.get_mut(&id).expect("registered above");
        match outcome {
            Outcome::Reply(Value::BulkString(reply)) if reply == id.as_bytes() => {
                entry.add = AddState::Answered;
                shared.adds_answered.fetch_add(1, Ordering::SeqCst);
            }
            Outcome::Reply(other) => shared.unexpected(format!("DQ.ADD {id}: {other:?}")),
            Outcome::Loading => entry.add = AddState::Refused,
            Outcome::Error(e) => {
                entry.add = AddState::Refused;
                shared.unexpected(format!("DQ.ADD {id}: {e}"));
            }
            Outcome::Lost => conn = None,
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Action {
    Ack,
    Nack,
    /// Drop the connection without ACK: the lease must expire.
    Die,
}

fn consume(consumer: u64, shared: &Shared, mut rng: Rng) {
    let mut conn: Option<redis::Connection> = None;
    while !shared.finish.load(Ordering::SeqCst) {
        let draining = shared.draining.load(Ordering::SeqCst);
        let Some(c) = connection(&mut conn, &shared.url, &shared.finish) else {
            return;
        };
        let queue = QUEUES[rng.below(2) as usize];
        let lease_ms = 200 + rng.below(301);
        let count = 1 + rng.below(4);
        let line = format!("DQ.POP {queue} COUNT {count} BLOCK 100 LEASE {lease_ms}");
        let args: Vec<String> = line.split(' ').map(String::from).collect();
        let (sent_ms, sent) = (now_ms(), shared.tick());
        let outcome = call(c, &args);
        let (replied, replied_ms) = (shared.tick(), now_ms());
        let batch = match outcome {
            Outcome::Reply(v) => entries(&v),
            Outcome::Loading => {
                sleep(Duration::from_millis(5));
                continue;
            }
            Outcome::Error(e) => {
                shared.unexpected(format!("{line}: {e}"));
                continue;
            }
            Outcome::Lost => {
                conn = None;
                continue;
            }
        };
        for (id, payload, attempt) in batch {
            let delivery = Delivery {
                attempt,
                sent,
                replied,
                sent_ms,
                replied_ms,
                lease_ms,
                released: None,
                release_answered: None,
                consumer,
                action: "abandoned",
                nack_acted: false,
            };
            let index = {
                let mut ledger = shared.ledger();
                let Some(entry) = ledger.get_mut(&id) else {
                    shared.phantoms.lock().expect("phantoms").push(id);
                    continue;
                };
                entry.deliveries.push(delivery);
                entry.deliveries.len() - 1
            };
            if payload != payload_of(&id) {
                shared.unexpected(format!("{id} delivered with payload {payload:?}"));
            }
            let Some(c) = conn.as_mut() else {
                // An earlier message of this batch took the connection down:
                // the rest are abandoned with it, leased.
                continue;
            };
            let action = match rng.below(100) {
                _ if draining => Action::Ack,
                0..=71 => Action::Ack,
                72..=85 => Action::Nack,
                _ => Action::Die,
            };
            let slow = action != Action::Die && !draining && rng.chance(3);
            let name = match action {
                Action::Ack if slow => "slow-ack",
                Action::Ack => "ack",
                Action::Nack => "nack",
                Action::Die => "die",
            };
            update(shared, &id, |e| e.deliveries[index].action = name);
            if action == Action::Die {
                shared.dies.fetch_add(1, Ordering::SeqCst);
                conn = None;
                continue;
            }
            if slow {
                // A consumer slower than its lease: another may take the
                // message meanwhile; this ACK then removes it under them,
                // and this NACK (unless fenced) fails their delivery.
                shared.slow.fetch_add(1, Ordering::SeqCst);
                sleep(Duration::from_millis(lease_ms + 50));
            }
            let mut args = vec![String::new(), queue.to_string(), id.clone()];
            if action == Action::Ack {
                args[0] = "DQ.ACK".into();
            } else {
                args[0] = "DQ.NACK".into();
                shared.nacks.fetch_add(1, Ordering::SeqCst);
                if rng.chance(50) {
                    args.extend(["DELAY".into(), rng.below(100).to_string()]);
                }
                if shared.fencing == Fencing::Attempt {
                    args.extend(["ATTEMPT".into(), attempt.to_string()]);
                }
            }
            let released = shared.tick();
            update(shared, &id, |e| {
                e.deliveries[index].released = Some(released)
            });
            let outcome = call(c, &args);
            if !matches!(outcome, Outcome::Lost) {
                let answered = shared.tick();
                update(shared, &id, |e| {
                    e.deliveries[index].release_answered = Some(answered)
                });
            }
            match outcome {
                Outcome::Reply(Value::Int(1)) if action == Action::Ack => {
                    let at = shared.tick();
                    shared.acks_answered.fetch_add(1, Ordering::SeqCst);
                    // The first answered ACK: any delivery after it is a resurrection.
                    update(shared, &id, |e| {
                        e.acked_at.get_or_insert(at);
                    });
                }
                Outcome::Reply(Value::Int(0)) if action == Action::Ack => {
                    // Not in flight any more: its lease ended (it comes
                    // back), or a later holder's ACK came first.
                    shared.ack_zero.fetch_add(1, Ordering::SeqCst);
                }
                Outcome::Reply(Value::Nil) if action == Action::Nack => {}
                Outcome::Reply(_) if action == Action::Nack => {
                    update(shared, &id, |e| e.deliveries[index].nack_acted = true);
                }
                Outcome::Reply(other) => {
                    shared.unexpected(format!("{}: {other:?}", args.join(" ")));
                }
                Outcome::Loading => {}
                // A fenced NACK of a delivery that is over: nothing done.
                Outcome::Error(e)
                    if shared.fencing == Fencing::Attempt && e.starts_with("STALE ") =>
                {
                    shared.stale.fetch_add(1, Ordering::SeqCst);
                }
                Outcome::Error(e) => shared.unexpected(format!("{}: {e}", args.join(" "))),
                Outcome::Lost => {
                    if action == Action::Ack {
                        shared.acks_in_doubt.fetch_add(1, Ordering::SeqCst);
                        update(shared, &id, |e| e.ack_in_doubt = true);
                    }
                    conn = None;
                }
            }
        }
    }
}

fn update(shared: &Shared, id: &str, f: impl FnOnce(&mut Entry)) {
    f(shared
        .ledger()
        .get_mut(id)
        .expect("a delivered id is in the ledger"));
}

/// Kills the server at random moments and starts it again on the same port
/// and files; hands the server back when told to stop.
fn chaos(mut server: Server, shared: &Shared, mut rng: Rng) -> Server {
    loop {
        let until = Instant::now() + Duration::from_millis(100 + rng.below(1900));
        while Instant::now() < until {
            // At least one kill, however slow the machine: a soak that
            // killed nothing proved nothing about restarts.
            if shared.stop_chaos.load(Ordering::SeqCst) && shared.kills.load(Ordering::SeqCst) > 0 {
                return server;
            }
            sleep(Duration::from_millis(10));
        }
        let before = shared.tick();
        server.restart();
        let after = shared.tick();
        shared.kills.fetch_add(1, Ordering::SeqCst);
        shared
            .kill_ticks
            .lock()
            .expect("kill ticks")
            .push((before, after));
    }
}

/// The hazard fencing removes, shown once on purpose (the random run may
/// or may not meet it): consumer A's lease runs out, B gets delivery 2,
/// then A's late NACK arrives. With ATTEMPT it is refused as STALE and B's
/// delivery holds; without, it fails B's delivery.
fn late_nack_probe(url: &str, fencing: Fencing) -> Result<(), String> {
    let mut c = connect_once(url).ok_or("no connection")?;
    let mut run = |line: &str| {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        run(&mut c, &args)
    };
    run("DQ.ADD soak:probe x ID p").map_err(|e| e.to_string())?;
    let first = run("DQ.POP soak:probe LEASE 50").map_err(|e| e.to_string())?;
    if entries(&first).first().map(|e| e.2) != Some(1) {
        return Err(format!("A's POP: {first:?}"));
    }
    let mut second = None;
    wait_until(LONG, || {
        second = run("DQ.POP soak:probe LEASE 60000")
            .ok()
            .filter(|v| *v != Value::Nil);
        second.is_some()
    });
    let second = second.ok_or("B never got delivery 2")?;
    if entries(&second).first().map(|e| e.2) != Some(2) {
        return Err(format!("B's POP: {second:?}"));
    }
    let late = match fencing {
        Fencing::Attempt => run("DQ.NACK soak:probe p ATTEMPT 1"),
        Fencing::None => run("DQ.NACK soak:probe p"),
    };
    let state = run("DQ.GET soak:probe p").map(|v| text(&field(&v, "state")));
    match (fencing, late, state) {
        (Fencing::Attempt, Err(e), Ok(state))
            if e.starts_with("STALE delivery 1 of message 'p' is over") && state == "inflight" =>
        {
            Ok(())
        }
        (Fencing::None, Ok(_), Ok(state)) if state != "inflight" => Ok(()),
        (_, late, state) => Err(format!(
            "fencing {fencing:?}: the late NACK gave {late:?}, B's delivery is {state:?}"
        )),
    }
}

/// Lets the consumers (now ACKing everything) empty the queues; returns the
/// non-zero counts left when the deadline passes.
fn drain(shared: &Shared) -> Vec<(String, i64)> {
    let mut left = Vec::new();
    let mut admin: Option<redis::Connection> = None;
    wait_until(DRAIN_TIMEOUT, || {
        left.clear();
        if admin.is_none() {
            admin = connect_once(&shared.url);
        }
        let Some(c) = admin.as_mut() else {
            return false;
        };
        for queue in QUEUES {
            let args = ["DQ.STATS".to_string(), queue.to_string()];
            let Outcome::Reply(stats) = call(c, &args) else {
                left.push((format!("{queue}: no reply to DQ.STATS"), -1));
                admin = None;
                return false;
            };
            for state in ["delayed", "ready", "inflight", "dead"] {
                let n = int(&field(&stats, state));
                if n != 0 {
                    left.push((format!("{queue} {state}"), n));
                }
            }
        }
        // Dead messages do not drain: waiting would only hide them.
        left.is_empty() || left.iter().all(|(what, _)| what.ends_with(" dead"))
    });
    left
}

/// Checks the ledger; pushes each problem to `failures`, returns the counts.
fn audit(shared: &Shared, failures: &mut Vec<String>) -> String {
    let ledger = shared.ledger();
    let kills = shared.kill_ticks.lock().expect("kill ticks").clone();
    let (mut answered, mut unknown, mut deliveries, mut duplicates, mut in_doubt) = (0, 0, 0, 0, 0);
    let (mut stale_overlaps, mut late_nacks) = (0, 0);
    for (id, entry) in ledger.iter() {
        deliveries += entry.deliveries.len();
        duplicates += entry.deliveries.len().saturating_sub(1);
        match entry.add {
            AddState::Answered => answered += 1,
            AddState::Unknown => unknown += 1,
            AddState::Refused => {
                if !entry.deliveries.is_empty() {
                    failures.push(format!(
                        "PHANTOM {id}: its ADD was refused, yet it was delivered"
                    ));
                }
            }
        }
        if entry.add == AddState::Answered && entry.acked_at.is_none() {
            if entry.ack_in_doubt {
                // Gone from the drained queue, and only its ACK (whose reply
                // was cut off by a kill) can have removed it.
                in_doubt += 1;
            } else {
                failures.push(format!(
                    "LOST {id}: its ADD was answered but it was never acknowledged; deliveries {:?}",
                    entry.deliveries
                ));
            }
        }
        if let Some(acked_at) = entry.acked_at {
            for d in entry.deliveries.iter().filter(|d| d.sent > acked_at) {
                failures.push(format!(
                    "ACKED-CAME-BACK {id}: delivered again (attempt {}) by a POP sent after its ACK was answered",
                    d.attempt
                ));
            }
        }
        let mut attempts: Vec<i64> = entry.deliveries.iter().map(|d| d.attempt).collect();
        attempts.sort_unstable();
        if attempts.windows(2).any(|w| w[0] == w[1]) || attempts.first().is_some_and(|&a| a < 1) {
            failures.push(format!(
                "REPEATED-ATTEMPT {id}: attempt numbers repeat (an answered POP was undone): {attempts:?}"
            ));
        }
        // A NACK that acted while a later delivery of the id was surely out
        // (served before the NACK was sent, not released before its reply)
        // failed that delivery, not its own.
        for d in entry.deliveries.iter().filter(|d| d.nack_acted) {
            let (Some(sent), Some(answered)) = (d.released, d.release_answered) else {
                continue;
            };
            let hit = entry.deliveries.iter().any(|b| {
                b.attempt > d.attempt && b.replied < sent && b.released.is_none_or(|r| r > answered)
            });
            if hit && shared.fencing == Fencing::Attempt {
                failures.push(format!(
                    "LATE-NACK {id}: the NACK of attempt {} acted on a later delivery; {}",
                    d.attempt,
                    history(entry, &kills)
                ));
            }
            late_nacks += usize::from(hit);
        }
        for a in &entry.deliveries {
            for b in entry.deliveries.iter().filter(|b| b.sent > a.replied) {
                // The server leased `a` at or after a.sent_ms and served `b`
                // at or before b.replied_ms: both on this machine's clock.
                let lease_held = b.replied_ms < a.sent_ms + a.lease_ms;
                // What may have run between the two POPs (a POP that blocks
                // is served any time before its reply).
                let between = |d: &&Delivery| {
                    d.released.is_some_and(|r| r < b.replied)
                        && d.release_answered.is_none_or(|r| r > a.sent)
                };
                // An ACK (any holder's: unfenced) or a's own NACK ends a's
                // lease.
                let released = entry
                    .deliveries
                    .iter()
                    .filter(between)
                    .any(|d| d.action != "nack" || d.attempt == a.attempt);
                // A late NACK of an earlier delivery ends it only when the
                // consumer did not pass ATTEMPT.
                let stale_nack = entry
                    .deliveries
                    .iter()
                    .filter(between)
                    .any(|d| d.action == "nack" && d.attempt != a.attempt);
                if lease_held && !released && stale_nack && shared.fencing == Fencing::None {
                    stale_overlaps += 1;
                } else if lease_held && !released {
                    failures.push(format!(
                        "LEASE-OVERLAP {id}: attempt {} delivered while attempt {}'s lease of {} ms held ({} ms after it); {}",
                        b.attempt,
                        a.attempt,
                        a.lease_ms,
                        b.replied_ms.saturating_sub(a.sent_ms),
                        history(entry, &kills),
                    ));
                }
            }
        }
    }
    let phantoms = shared.phantoms.lock().expect("phantoms");
    for id in phantoms.iter().take(10) {
        failures.push(format!("PHANTOM {id}: delivered but never sent"));
    }
    format!(
        "answered ADDs {answered} (+{unknown} cut off by a kill), deliveries {deliveries}, \
         duplicates {duplicates}, consumer deaths {}, NACKs {}, slow consumers {}, \
         ACKs replying 0 {}, ACKs in doubt {in_doubt}, NACKs refused as STALE {}, \
         late NACKs that failed a later delivery {late_nacks}, \
         deliveries inside a lease a late NACK ended {stale_overlaps}",
        shared.dies.load(Ordering::SeqCst),
        shared.nacks.load(Ordering::SeqCst),
        shared.slow.load(Ordering::SeqCst),
        shared.ack_zero.load(Ordering::SeqCst),
        shared.stale.load(Ordering::SeqCst),
    )
}

/// One message's story, for a failure report: its deliveries (times in ms
/// from the first POP sent, ticks in brackets) and the kills among them.
fn history(entry: &Entry, kills: &[(u64, u64)]) -> String {
    let Some(first) = entry.deliveries.first() else {
        return format!("{} {:?}: never delivered", entry.queue, entry.group);
    };
    let (t0, start) = (first.sent_ms, first.sent);
    let mut out = format!("{} group {:?}:", entry.queue, entry.group);
    for d in &entry.deliveries {
        out.push_str(&format!(
            " | attempt {} to c{} POP [{}..{}] +{}..+{} ms, lease {}, {} [{:?}..{:?}]",
            d.attempt,
            d.consumer,
            d.sent,
            d.replied,
            d.sent_ms - t0,
            d.replied_ms - t0,
            d.lease_ms,
            d.action,
            d.released,
            d.release_answered,
        ));
    }
    let last = entry
        .deliveries
        .iter()
        .map(|d| d.replied)
        .max()
        .unwrap_or(start);
    let among: Vec<_> = kills
        .iter()
        .filter(|(before, _)| (start..=last).contains(before))
        .collect();
    out.push_str(&format!(" | kills [before, after]: {among:?}"));
    out
}

// ---------------------------------------------------------------------------
// Talking to a server that may vanish at any moment.

enum Outcome {
    Reply(Value),
    /// The server is loading its AOF: nothing was done.
    Loading,
    /// Any other error reply, as "CODE detail".
    Error(String),
    /// No reply: the connection broke, the command may or may not have run.
    Lost,
}

fn call(c: &mut redis::Connection, args: &[String]) -> Outcome {
    let mut cmd = redis::cmd(&args[0]);
    for arg in &args[1..] {
        cmd.arg(arg.as_str());
    }
    match cmd.query::<Value>(c) {
        Ok(v) => Outcome::Reply(v),
        Err(e) if e.code() == Some("LOADING") => Outcome::Loading,
        Err(e) => match (e.code(), e.detail()) {
            (Some(code), detail) => Outcome::Error(format!("{code} {}", detail.unwrap_or(""))),
            (None, _) => Outcome::Lost,
        },
    }
}

fn connect_once(url: &str) -> Option<redis::Connection> {
    let c = redis::Client::open(url)
        .and_then(|client| client.get_connection_with_timeout(Duration::from_secs(1)))
        .ok()?;
    // A server killed mid-reply must not hang a client forever.
    c.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    c.set_write_timeout(Some(Duration::from_secs(5))).ok()?;
    Some(c)
}

/// The open connection, or a new one once the server is back; `None` once
/// `stop` is set.
fn connection<'a>(
    slot: &'a mut Option<redis::Connection>,
    url: &str,
    stop: &AtomicBool,
) -> Option<&'a mut redis::Connection> {
    while slot.is_none() {
        if stop.load(Ordering::SeqCst) {
            return None;
        }
        *slot = connect_once(url);
        if slot.is_none() {
            sleep(Duration::from_millis(10));
        }
    }
    slot.as_mut()
}

fn expect_ok(c: &mut redis::Connection, line: &str) {
    let args: Vec<String> = line.split(' ').map(String::from).collect();
    match call(c, &args) {
        Outcome::Reply(Value::Okay) => {}
        Outcome::Reply(v) => panic!("{line}: {v:?}"),
        Outcome::Loading | Outcome::Lost => panic!("{line}: no answer"),
        Outcome::Error(e) => panic!("{line}: {e}"),
    }
}

/// Payloads differ in length and content per id, so a mix-up shows.
fn payload_of(id: &str) -> String {
    let filler = id.bytes().fold(0usize, |h, b| {
        h.wrapping_mul(31).wrapping_add(usize::from(b))
    }) % 200;
    format!("payload-of-{id}-{}", "x".repeat(filler))
}

/// What is left in the queues, for a failure report.
fn describe(server: &Server, left: &[(String, i64)]) -> String {
    let Some(mut c) = connect_once(&server.url()) else {
        return "(no connection)".into();
    };
    let mut out = format!("{left:?}");
    for queue in QUEUES {
        for state in ["DELAYED", "READY", "INFLIGHT", "DEAD"] {
            let args = ["DQ.PEEK", queue, state, "COUNT", "5"].map(String::from);
            if let Outcome::Reply(v) = call(&mut c, &args) {
                out.push_str(&format!("\n  {queue} {state}: {v:?}"));
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------

fn env_number(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    Some(
        value
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value} is not a whole number")),
    )
}

/// splitmix64: small, seedable, good enough to pick actions.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// An independent stream for one thread.
    fn fork(&mut self) -> Rng {
        Rng(self.next())
    }
}
