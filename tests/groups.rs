//! GROUP: at most one message of a group is out (ready or in flight) at a
//! time, in due order, while other groups and ungrouped messages flow past.

use std::time::Duration;

use dq_testkit::*;

fn state(c: &mut redis::Connection, q: &str, id: &str) -> String {
    text(&field(&cmd(c, &format!("DQ.GET {q} {id}")), "state"))
}

fn popped_ids(v: &Value) -> Vec<String> {
    entries(v).into_iter().map(|e| e.0).collect()
}

#[test]
fn a_busy_group_lets_others_pass_and_hands_on_in_due_order() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD q x ID a1 GROUP A");
    cmd(&mut c, "DQ.ADD q x ID a2 GROUP A");
    cmd(&mut c, "DQ.ADD q x ID b1 GROUP B");
    cmd(&mut c, "DQ.ADD q x ID free");
    // Added last but due first: it goes before a2 in group A.
    cmd(
        &mut c,
        &format!("DQ.ADD q x ID a0 GROUP A AT {}", now_ms() - 60_000),
    );
    assert_eq!(
        popped_ids(&cmd(&mut c, "DQ.POP q COUNT 10")),
        ["a1", "b1", "free"]
    );
    let a2 = cmd(&mut c, "DQ.GET q a2");
    assert_eq!(text(&field(&a2, "state")), "delayed");
    assert_eq!(text(&field(&a2, "group")), "A");
    assert_eq!(text(&field(&a2, "waiting-for")), "a1");
    assert_eq!(field(&cmd(&mut c, "DQ.GET q free"), "group"), Value::Nil);
    let stats = cmd(&mut c, "DQ.STATS q");
    assert_eq!(
        (int(&field(&stats, "delayed")), int(&field(&stats, "ready"))),
        (2, 0)
    );
    let peeked: Vec<String> = entries_of_peek(&cmd(&mut c, "DQ.PEEK q DELAYED"));
    assert_eq!(peeked, ["a0", "a2"]);
    assert_eq!(cmd(&mut c, "DQ.POP q"), Value::Nil);
    assert_eq!(int(&cmd(&mut c, "DQ.ACK q a1")), 1);
    assert_eq!(popped_ids(&cmd(&mut c, "DQ.POP q COUNT 10")), ["a0"]);
    assert_eq!(int(&cmd(&mut c, "DQ.CANCEL q a0")), 1);
    assert_eq!(popped_ids(&cmd(&mut c, "DQ.POP q COUNT 10")), ["a2"]);
}

fn entries_of_peek(v: &Value) -> Vec<String> {
    let Value::Array(items) = v else {
        panic!("not a PEEK reply: {v:?}")
    };
    items
        .iter()
        .map(|e| match e {
            Value::Array(f) => text(&f[0]),
            other => panic!("not an entry: {other:?}"),
        })
        .collect()
}

#[test]
fn the_holder_keeps_its_group_through_lease_expiry_and_retries_until_it_dies() {
    let server = Server::start();
    let mut c = server.conn();
    // The POP during a1's backoff must come before the backoff ends: when it
    // came later it proves nothing, and a fresh queue tries a longer one.
    let q = in_time(100, |ms| {
        let q = format!("q{ms}");
        cmd(&mut c, &format!("DQ.ADD {q} x ID a1 GROUP A MAXATTEMPTS 3"));
        cmd(&mut c, &format!("DQ.ADD {q} x ID a2 GROUP A"));
        assert_eq!(
            popped_ids(&cmd(&mut c, &format!("DQ.POP {q} LEASE 50"))),
            ["a1"]
        );
        // The lease runs out on the timer: a1 is ready again, a2 still waits.
        assert!(wait_until(LONG, || state(&mut c, &q, "a1") == "ready"));
        assert_eq!(state(&mut c, &q, "a2"), "delayed");
        let again = entries(&cmd(&mut c, &format!("DQ.POP {q} COUNT 10")));
        assert_eq!((again.len(), again[0].0.as_str(), again[0].2), (1, "a1", 2));
        // A NACK keeps the group through the backoff.
        let before = now_ms();
        let nacked = cmd(&mut c, &format!("DQ.NACK {q} a1 DELAY {ms}"));
        let during = cmd(&mut c, &format!("DQ.POP {q}"));
        if now_ms() >= before + ms {
            return None;
        }
        assert_eq!(text(&nacked), "delayed");
        assert_eq!(during, Value::Nil);
        Some(q)
    });
    assert!(wait_until(LONG, || state(&mut c, &q, "a1") == "ready"));
    assert_eq!(
        popped_ids(&cmd(&mut c, &format!("DQ.POP {q} COUNT 10"))),
        ["a1"]
    );
    // Its last attempt fails: dead, and a2 is ready at once.
    assert_eq!(text(&cmd(&mut c, &format!("DQ.NACK {q} a1"))), "dead");
    assert_eq!(state(&mut c, &q, "a2"), "ready");
    assert_eq!(popped_ids(&cmd(&mut c, &format!("DQ.POP {q}"))), ["a2"]);
}

#[test]
fn a_blocked_consumer_is_woken_when_the_group_is_handed_on() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD q x ID a1 GROUP A");
    cmd(&mut c, "DQ.ADD q x ID a2 GROUP A");
    assert_eq!(popped_ids(&cmd(&mut c, "DQ.POP q")), ["a1"]);
    let url = server.url();
    let waiter = std::thread::spawn(move || {
        let mut w = redis::Client::open(url).unwrap().get_connection().unwrap();
        popped_ids(&cmd(&mut w, "DQ.POP q BLOCK 60000"))
    });
    assert!(wait_until(LONG, || {
        text(&cmd(&mut c, "INFO clients")).contains("blocked_clients:1")
    }));
    cmd(&mut c, "DQ.ACK q a1");
    assert_eq!(waiter.join().unwrap(), ["a2"]);
}

/// xorshift: the same sequence on every run.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// One delivery a consumer holds.
struct Held {
    id: String,
    group: String,
    lease_deadline: u64,
}

/// Two consumers pop, ACK, NACK and abandon messages of four groups (and
/// ungrouped ones) at random. Whenever a message of a group is delivered,
/// no other delivery of that group may still hold its lease at the moment
/// of that POP. The pop time is read back exactly: the lease deadline the
/// server wrote minus the lease asked for.
#[test]
fn two_consumers_never_hold_two_messages_of_one_group() {
    let server = Server::start();
    let mut producer = server.conn();
    let mut consumers = [server.conn(), server.conn()];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut held: Vec<Vec<Held>> = vec![Vec::new(), Vec::new()];
    let mut added = 0;
    let mut grouped_deliveries = 0;
    for step in 0.. {
        // At least 3000 steps, and on until enough grouped deliveries were
        // checked and a lease ran out: how many of each a step brings
        // depends on the machine's speed (a delivery whose lease ran out
        // before its GET is not checked).
        let lease_expired =
            |c: &mut redis::Connection| int(&field(&cmd(c, "DQ.STATS q"), "lease-expired"));
        if step >= 3000 && grouped_deliveries > 150 && lease_expired(&mut producer) > 0 {
            break;
        }
        assert!(
            step < 100_000,
            "{grouped_deliveries} grouped deliveries checked and {} leases \
             expired in {step} steps",
            lease_expired(&mut producer)
        );
        match rng.below(10) {
            0..=3 => {
                let group = ["g0", "g1", "g2", "g3", "-"][rng.below(5) as usize];
                let mut line = format!("DQ.ADD q {group} ID m{step} DELAY {}", rng.below(20));
                if group != "-" {
                    line.push_str(&format!(" GROUP {group}"));
                }
                cmd(&mut producer, &line);
                added += 1;
            }
            4..=6 => {
                let who = rng.below(2) as usize;
                let lease = 30 + rng.below(120);
                let count = 1 + rng.below(3);
                let c = &mut consumers[who];
                let got = entries(&cmd(c, &format!("DQ.POP q COUNT {count} LEASE {lease}")));
                for (id, group, _) in got {
                    let record = cmd(c, &format!("DQ.GET q {id}"));
                    let Value::Int(deadline) = field(&record, "lease-deadline") else {
                        continue; // its lease already ran out: nothing to check
                    };
                    let deadline = deadline as u64;
                    let popped_at = deadline - lease;
                    if group != "-" {
                        grouped_deliveries += 1;
                        for other in held.iter().flatten() {
                            assert!(
                                other.group != group || other.lease_deadline <= popped_at,
                                "{id} of {group} delivered at {popped_at} while {} holds \
                                 the group until {}",
                                other.id,
                                other.lease_deadline
                            );
                        }
                    }
                    held[who].push(Held {
                        id,
                        group,
                        lease_deadline: deadline,
                    });
                }
            }
            7..=8 => {
                // ACK or NACK one held delivery (maybe after its lease ran
                // out: it then acts on the message, whoever holds it now).
                let who = rng.below(2) as usize;
                if held[who].is_empty() {
                    continue;
                }
                let i = rng.below(held[who].len() as u64) as usize;
                let id = held[who][i].id.clone();
                let ended = if rng.below(3) == 0 {
                    cmd(
                        &mut consumers[who],
                        &format!("DQ.NACK q {id} DELAY {}", rng.below(20)),
                    ) != Value::Nil
                } else {
                    int(&cmd(&mut consumers[who], &format!("DQ.ACK q {id}"))) == 1
                };
                if ended {
                    for list in &mut held {
                        list.retain(|h| h.id != id);
                    }
                } else {
                    held[who].remove(i);
                }
            }
            _ => {
                // A consumer walks away: its leases run out on the timer.
                let who = rng.below(2) as usize;
                held[who].clear();
                std::thread::sleep(Duration::from_millis(rng.below(40)));
            }
        }
    }
    // Nothing was lost: draining delivers every message not yet acked.
    let stats = cmd(&mut producer, "DQ.STATS q");
    let mut acked = int(&field(&stats, "acked"));
    assert!(wait_until(LONG, || {
        for (id, _, _) in entries(&cmd(&mut producer, "DQ.POP q COUNT 100 LEASE 60000")) {
            acked += int(&cmd(&mut producer, &format!("DQ.ACK q {id}")));
        }
        // An abandoned lease may still end a last attempt meanwhile.
        let dead = int(&field(&cmd(&mut producer, "DQ.STATS q"), "dead"));
        acked + dead == added
    }));
}
