//! The queue value without a server: transitions, groups, fencing, and
//! long random sequences checked against the invariants after every step.

use super::codec;
use super::*;
use crate::core::policy::Settings;
use crate::core::schedule::{Missed, Overlap, Schedule, Spec, Template};

const LEASE: u64 = 30_000;

pub(super) fn request<'a>(id: &'a [u8], payload: &'a [u8], due_at: u64) -> AddRequest<'a> {
    AddRequest {
        id: Some(id),
        payload,
        due_at,
        priority: 0,
        mode: AddMode::Upsert,
        max_attempts: None,
        backoff: None,
        expire_at: None,
        group: None,
        retain_ms: None,
    }
}

fn add(q: &mut Queue, now: u64, id: &str, due_at: u64) {
    let payload = format!("p-{id}");
    q.add(now, &request(id.as_bytes(), payload.as_bytes(), due_at));
    q.check().unwrap();
}

fn add_grouped(q: &mut Queue, now: u64, id: &str, due_at: u64, group: &str) {
    let mut req = request(id.as_bytes(), b"", due_at);
    req.group = Some(group.as_bytes());
    q.add(now, &req);
    q.check().unwrap();
}

fn ids(ds: &[Delivery]) -> Vec<String> {
    ds.iter()
        .map(|d| String::from_utf8(d.id.clone()).unwrap())
        .collect()
}

fn state(q: &Queue, id: &str) -> Option<State> {
    q.get(id.as_bytes()).map(|r| r.state)
}

fn policy(max_attempts: u32) -> Policy {
    QueueConfig {
        max_attempts: Some(max_attempts),
        backoff: Some(Backoff::Fixed(1_000)),
        ..QueueConfig::default()
    }
    .resolve(&Settings::default())
}

#[test]
fn due_now_is_ready_at_once_and_later_waits_for_the_timer() {
    let mut q = Queue::new();
    add(&mut q, 100, "now", 100);
    add(&mut q, 100, "later", 200);
    assert_eq!(state(&q, "now"), Some(State::Ready));
    assert_eq!(state(&q, "later"), Some(State::Delayed));
    assert_eq!(q.next_due(), Some(200));
    assert_eq!(q.promote_due(199, 10), 0);
    assert_eq!(q.promote_due(200, 10), 1);
    assert_eq!(state(&q, "later"), Some(State::Ready));
    assert!(q.take_events().contains(Event::Ready));
    q.check().unwrap();
}

#[test]
fn pop_order_is_priority_then_due_then_fifo() {
    let mut q = Queue::new();
    for (id, due, priority) in [("a", 50, 0), ("b", 40, 0), ("c", 40, 0), ("d", 90, 5)] {
        let mut req = request(id.as_bytes(), b"", due);
        req.priority = priority;
        q.add(100, &req);
    }
    let got = q.pop(0, 10, 100 + LEASE);
    assert_eq!(ids(&got), ["d", "b", "c", "a"]);
    assert!(got.iter().all(|d| d.attempt == 1));
    assert_eq!(q.counters().get(Counter::Delivered), 4);
    q.check().unwrap();
}

#[test]
fn ack_deletes_only_what_is_in_flight() {
    let mut q = Queue::new();
    add(&mut q, 0, "a", 0);
    add(&mut q, 0, "b", 0);
    add(&mut q, 0, "c", 500);
    q.pop(0, 1, LEASE);
    assert_eq!(q.ack(1, &[b"a", b"a", b"b", b"c", b"zz"], 0), 1);
    assert_eq!(q.len(), 2);
    assert_eq!(state(&q, "a"), None);
    q.check().unwrap();
}

#[test]
fn a_lease_that_runs_out_is_a_failed_attempt() {
    let mut q = Queue::new();
    add(&mut q, 0, "a", 0);
    let p = policy(2);
    q.pop(0, 1, 100);
    assert_eq!(q.expire_leases(99, 10, &p), 0);
    assert_eq!(q.expire_leases(100, 10, &p), 1);
    assert_eq!(state(&q, "a"), Some(State::Ready));
    assert_eq!(q.pop(0, 1, 300)[0].attempt, 2);
    assert_eq!(q.expire_leases(300, 10, &p), 1);
    let r = q.get(b"a").unwrap();
    assert_eq!(r.state, State::Dead);
    assert_eq!(r.death().unwrap().reason, DeathReason::LeaseExpired);
    assert_eq!(q.counters().get(Counter::LeaseExpired), 2);
    assert_eq!(q.counters().get(Counter::DeadLettered), 1);
    q.check().unwrap();
}

#[test]
fn nack_retries_by_backoff_then_dies_and_redrive_restarts_the_budget() {
    let mut q = Queue::new();
    add(&mut q, 0, "a", 0);
    let p = policy(2);
    q.pop(0, 1, LEASE);
    let placed = q
        .nack(10, b"a", NackAction::Retry(None), None, Some(b"boom"), &p)
        .unwrap()
        .unwrap();
    assert_eq!(
        placed,
        Placed {
            state: State::Delayed,
            due_at: 1_010
        }
    );
    assert_eq!(q.get(b"a").unwrap().last_error(), Some(&b"boom"[..]));
    q.promote_due(1_010, 10);
    q.pop(0, 1, LEASE);
    let placed = q
        .nack(20, b"a", NackAction::Retry(Some(5)), None, None, &p)
        .unwrap()
        .unwrap();
    assert_eq!(placed.state, State::Dead);
    assert_eq!(q.redrive(30, Redrive::Oldest(10)), 1);
    let r = q.get(b"a").unwrap();
    assert_eq!(
        (r.state, r.attempt, r.attempts_used()),
        (State::Ready, 2, 0)
    );
    assert_eq!(
        q.pop(0, 1, LEASE)[0].attempt,
        3,
        "numbering goes on after REDRIVE"
    );
    q.check().unwrap();
}

#[test]
fn nack_dead_is_permanent_at_once() {
    let mut q = Queue::new();
    add(&mut q, 0, "a", 0);
    q.pop(0, 1, LEASE);
    let placed = q
        .nack(
            5,
            b"a",
            NackAction::Dead,
            None,
            Some(b"410 Gone"),
            &policy(16),
        )
        .unwrap()
        .unwrap();
    assert_eq!(placed.state, State::Dead);
    let r = q.get(b"a").unwrap();
    assert_eq!(
        r.death(),
        Some(Death {
            reason: DeathReason::Permanent,
            at: 5
        })
    );
    assert_eq!(r.last_error(), Some(&b"410 Gone"[..]));
    q.check().unwrap();
}

#[test]
fn attempt_fences_a_consumer_whose_lease_ran_out() {
    let mut q = Queue::new();
    add(&mut q, 0, "a", 0);
    let p = policy(16);
    q.pop(0, 1, 100); // delivery 1
    q.expire_leases(100, 10, &p);
    q.pop(0, 1, 500); // delivery 2, another consumer
    let before = codec::header(&q);
    let err = q
        .nack(200, b"a", NackAction::Retry(None), Some(1), None, &p)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "STALE delivery 1 of message 'a' is over: the message is at delivery 2 (inflight)"
    );
    let err = q.touch(b"a", 9_999, Some(9)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "STALE delivery 9 of message 'a' has not happened: the message is at delivery 2 (inflight)"
    );
    assert!(q.touch(b"a", 9_999, Some(1)).is_err());
    assert_eq!(codec::header(&q), before);
    assert_eq!(state(&q, "a"), Some(State::Inflight));
    assert_eq!(q.touch(b"a", 9_999, Some(2)).unwrap(), Some(9_999));
    assert_eq!(
        q.touch(b"gone", 1, Some(1)).unwrap_err().to_string(),
        "STALE delivery 1 of message 'gone' is over or never happened: the queue holds no \
         such message (acknowledged, cancelled, purged, or never added)"
    );
    assert_eq!(q.touch(b"gone", 1, None).unwrap(), None);
    add(&mut q, 0, "new", 0);
    assert_eq!(
        q.touch(b"new", 1, Some(1)).unwrap_err().to_string(),
        "STALE delivery 1 of message 'new' has not happened: the message was never delivered (ready)"
    );
    // Delivery 2 ends (a NACK): it is over, and the message is at it.
    q.nack(300, b"a", NackAction::Retry(Some(1_000)), Some(2), None, &p)
        .unwrap();
    assert_eq!(
        q.touch(b"a", 9_999, Some(2)).unwrap_err().to_string(),
        "STALE delivery 2 of message 'a' is over: the message is at delivery 2 (delayed)"
    );
    q.check().unwrap();
}

#[test]
fn replacing_a_message_in_flight_waits_for_its_delivery_to_end() {
    let mut q = Queue::new();
    add(&mut q, 0, "a", 0);
    q.pop(0, 1, LEASE);
    q.add(1, &request(b"a", b"newer", 0));
    let r = q.get(b"a").unwrap();
    assert_eq!((r.state, r.payload()), (State::Inflight, &b"p-a"[..]));
    assert_eq!(q.ack(2, &[b"a"], 0), 1);
    let r = q.get(b"a").unwrap();
    assert_eq!(
        (r.state, r.payload(), r.attempt),
        (State::Ready, &b"newer"[..], 1)
    );
    assert_eq!(q.pop(0, 1, LEASE)[0].attempt, 2);
    q.check().unwrap();
}

#[test]
fn nx_and_xx() {
    let mut q = Queue::new();
    let mut req = request(b"a", b"one", 0);
    req.mode = AddMode::OnlyExisting;
    assert_eq!(q.add(0, &req), None);
    req.mode = AddMode::OnlyNew;
    assert_eq!(q.add(0, &req), Some(b"a".to_vec()));
    req.payload = b"two";
    assert_eq!(q.add(0, &req), None);
    assert_eq!(q.get(b"a").unwrap().payload(), b"one");
}

#[test]
fn generated_ids_are_unique_and_readable() {
    let mut q = Queue::new();
    let mut req = request(b"", b"x", 0);
    req.id = None;
    let a = q.add(42, &req).unwrap();
    let b = q.add(42, &req).unwrap();
    assert_eq!(a, b"42-1");
    assert_eq!(b, b"42-2");
    // A client that took the next generated id by hand is stepped over.
    q.add(42, &request(b"42-4", b"x", 0));
    assert_eq!(q.add(42, &req).unwrap(), b"42-5");
}

#[test]
fn ttl_dead_letters_in_any_state_but_a_newer_version_takes_over() {
    let mut q = Queue::new();
    let mut req = request(b"a", b"", 0);
    req.expire_at = Some(50);
    q.add(0, &req);
    let mut req = request(b"b", b"", 0);
    req.expire_at = Some(50);
    q.add(0, &req);
    q.pop(0, 2, LEASE);
    q.add(10, &request(b"b", b"newer", 0));
    assert_eq!(q.next_due(), Some(50));
    assert_eq!(q.expire_ttl(50, 10), 2);
    let a = q.get(b"a").unwrap();
    assert_eq!(a.death().unwrap().reason, DeathReason::Expired);
    let b = q.get(b"b").unwrap();
    assert_eq!((b.state, b.payload()), (State::Ready, &b"newer"[..]));
    assert_eq!(q.counters().get(Counter::Expired), 1);
    q.check().unwrap();
}

#[test]
fn one_message_of_a_group_out_at_a_time_in_due_order() {
    let mut q = Queue::new();
    add_grouped(&mut q, 0, "late", 20, "g");
    add_grouped(&mut q, 0, "first", 5, "g");
    add_grouped(&mut q, 0, "second", 10, "g");
    q.promote_due(30, 100);
    assert_eq!(state(&q, "first"), Some(State::Ready));
    assert_eq!(state(&q, "second"), Some(State::Waiting));
    assert_eq!(q.stats().delayed, 2);
    let got = q.pop(0, 10, LEASE);
    assert_eq!(ids(&got), ["first"]);
    // A NACK keeps the group: the retry goes first.
    q.nack(
        31,
        b"first",
        NackAction::Retry(Some(100)),
        None,
        None,
        &policy(5),
    )
    .unwrap();
    assert!(q.pop(0, 10, LEASE).is_empty());
    q.promote_due(131, 10);
    assert_eq!(ids(&q.pop(0, 10, LEASE)), ["first"]);
    q.ack(132, &[b"first"], 0);
    assert_eq!(ids(&q.pop(0, 10, LEASE)), ["second"]);
    q.cancel(133, &[b"second"]);
    assert_eq!(ids(&q.pop(0, 10, LEASE)), ["late"]);
    q.ack(134, &[b"late"], 0);
    assert!(q.is_empty());
    assert!(q.rare.is_none(), "an unused group is forgotten");
    q.check().unwrap();
}

#[test]
fn a_group_of_one_keeps_no_entry_through_its_retries() {
    let mut q = Queue::new();
    add_grouped(&mut q, 0, "only", 0, "g");
    q.promote_due(0, 10);
    let entries = |q: &Queue| q.rare.as_deref().map(|r| r.groups.with_entries().count());
    assert_eq!(entries(&q), Some(0), "a group of one is lone");
    assert_eq!(ids(&q.pop(0, 10, LEASE)), ["only"]);
    let retry = NackAction::Retry(Some(100));
    q.nack(1, b"only", retry, None, None, &policy(5)).unwrap();
    q.promote_due(101, 10);
    assert_eq!(state(&q, "only"), Some(State::Ready));
    assert_eq!(entries(&q), Some(0), "its retry's gate did not give it one");
    // A second message gives it an entry, with both counted.
    add_grouped(&mut q, 102, "next", 0, "g");
    assert_eq!(entries(&q), Some(1));
    let info = q.groups_from(b"", 10, |_| true).0;
    assert_eq!((info.len(), info[0].ready, info[0].waiting), (1, 1, 1));
    q.check().unwrap();
}

#[test]
fn purge_of_a_state_hands_freed_groups_on() {
    let mut q = Queue::new();
    add_grouped(&mut q, 0, "a", 0, "g");
    add_grouped(&mut q, 0, "b", 0, "g");
    add(&mut q, 0, "c", 99);
    assert_eq!(q.purge(1, Some(State::Ready)), 1);
    assert_eq!(state(&q, "b"), Some(State::Ready));
    assert_eq!(q.purge(1, Some(State::Delayed)), 1);
    assert_eq!(q.purge(1, None), 1);
    assert!(q.is_empty());
    assert_eq!(q.counters().get(Counter::Purged), 3);
    q.check().unwrap();
}

#[test]
fn scan_returns_every_message_present_throughout_once() {
    let mut q = Queue::new();
    for i in 0..5000 {
        add(&mut q, 0, &format!("m{i}"), if i % 2 == 0 { 0 } else { 99 });
    }
    let mut cursor = 0;
    let mut seen = std::collections::HashMap::new();
    let mut round = 0;
    loop {
        let (next, found) = q.scan(cursor, None, 100);
        for r in found {
            *seen.entry(r.id().to_vec()).or_insert(0) += 1;
        }
        // Churn between calls: new messages come, odd-numbered ones go.
        round += 1;
        add(&mut q, 0, &format!("new{round}"), 0);
        let gone = format!("m{}", round * 2 + 1);
        q.cancel(0, &[gone.as_bytes()]);
        if next == 0 {
            break;
        }
        cursor = next;
    }
    for i in (0..5000).step_by(2) {
        assert_eq!(seen.get(format!("m{i}").as_bytes()), Some(&1), "m{i}");
    }
    let (_, ready) = q.scan(0, Some(State::Ready), 10);
    assert!(ready.iter().all(|r| r.state == State::Ready));
    assert_eq!(q.scan(u64::MAX, None, 10), (0, vec![]));
}

/// What a replica or the AOF does with a POP (the ids it took) and a
/// tick (how much of each kind of work it did): the same state.
#[test]
fn claims_and_replayed_ticks_reach_the_masters_state() {
    let p = policy(2);
    let mut master = Queue::new();
    for i in 0..20 {
        add(&mut master, 0, &format!("m{i}"), 10 + i % 4);
    }
    add_grouped(&mut master, 0, "g1", 0, "g");
    add_grouped(&mut master, 0, "g2", 0, "g");
    let mut replica = codec::copy(&master).unwrap();
    let taken = master.pop(0, 3, 50);
    let ids: Vec<&[u8]> = taken.iter().map(|d| d.id.as_slice()).collect();
    assert_eq!(replica.claim(0, &ids, 50), taken);
    // A partial tick: only some of what is due, in the same order.
    let work = master.tick(60, 7, &p);
    assert_eq!(work.leases_expired + work.promoted, 7);
    assert_eq!(replica.replay_tick(60, &work, &p), work);
    let work = master.tick(61, 100, &p);
    assert_eq!(replica.replay_tick(61, &work, &p), work);
    assert_eq!(
        codec::sorted_digest(&replica),
        codec::sorted_digest(&master)
    );
    // A claim names only what is ready there.
    assert!(replica.claim(0, &[b"nope", b"g2"], 90).is_empty());
    replica.check().unwrap();
}

#[test]
fn stats_report_counts_and_oldest_ready() {
    let mut q = Queue::new();
    add(&mut q, 100, "a", 50);
    add(&mut q, 100, "b", 10);
    let mut req = request(b"hi", b"", 80);
    req.priority = 9;
    q.add(100, &req);
    add(&mut q, 100, "later", 500);
    let s = q.stats();
    assert_eq!((s.delayed, s.ready, s.inflight, s.dead), (1, 3, 0, 0));
    assert_eq!(s.oldest_ready_since, Some(100));
    assert_eq!(s.next_due_at, Some(500));
    assert_eq!(s.counters.get(Counter::Added), 4);
}

#[test]
fn codec_round_trips_every_kind_of_record() {
    let q = busy_queue();
    let back = codec::copy(&q).unwrap();
    back.check().unwrap();
    assert_eq!(codec::sorted_digest(&back), codec::sorted_digest(&q));
    assert_eq!(back.stats(), q.stats());
    assert_eq!(back.config(), q.config());
}

#[test]
fn codec_refuses_damaged_values_without_panicking() {
    let q = busy_queue();
    let header = codec::header(&q);
    let mut chunk = Vec::new();
    codec::record_chunks(&q, |c| chunk.extend_from_slice(c));
    // Every truncation and many single-byte changes: an error or a valid
    // queue, never a panic or a value that fails its own check.
    for cut in 0..chunk.len() {
        if let Ok(back) = codec::load(&header, [&chunk[..cut]]) {
            back.check().unwrap();
        }
    }
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    for _ in 0..20_000 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let mut bad = chunk.clone();
        let at = (seed as usize) % bad.len();
        bad[at] = (seed >> 32) as u8;
        if let Ok(back) = codec::load(&header, [bad.as_slice()]) {
            back.check().unwrap();
        }
    }
    assert!(codec::load(&header, [&[][..]]).is_err());
    assert!(codec::load(&[0xff], []).is_err());
    // A forged length does not make the loader allocate it: state,
    // group flag, attempt, base, lease, a 1-byte id, then a 4 GiB payload.
    let mut huge = vec![0u8, 0, 0, 0, 0, 1, b'a'];
    huge.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
    assert!(codec::load(&header, [huge.as_slice()]).is_err());
}

#[test]
fn invalid_combinations_are_refused_on_load() {
    // A ready message of a group that it does not hold.
    let mut q = Queue::new();
    add_grouped(&mut q, 0, "a", 0, "g");
    let header = codec::header(&q);
    let mut chunk = Vec::new();
    codec::record_chunks(&q, |c| chunk.extend_from_slice(c));
    assert_eq!(chunk[1], 1, "holds its group");
    chunk[1] = 0;
    let err = codec::load(&header, [chunk.as_slice()]).unwrap_err();
    assert!(err.0.contains("without holding group"), "{err}");
}

/// Small queues of every shape, for the fuzz seeds.
pub(crate) fn sample_queues() -> Vec<(&'static str, Queue)> {
    let mut plain = Queue::new();
    add(&mut plain, 0, "a", 0);
    add(&mut plain, 0, "b", 500);
    let mut groups = Queue::new();
    add_grouped(&mut groups, 0, "x", 0, "g");
    add_grouped(&mut groups, 0, "y", 0, "g");
    vec![
        ("empty", Queue::new()),
        ("plain", plain),
        ("groups", groups),
        ("every-state", busy_queue()),
        ("schedules", scheduled_queue()),
        ("events", logged_queue()),
    ]
}

/// A queue keeping its last 6 events, after more than 6 of every shape
/// (per message with and without attempt and detail, and per queue).
fn logged_queue() -> Queue {
    let mut q = Queue::new();
    q.set_config(
        0,
        QueueConfig {
            events: Some(6),
            ..QueueConfig::default()
        },
    );
    let p = q.config().resolve(&Settings::default());
    add(&mut q, 0, "a", 0);
    add(&mut q, 0, "b", 0);
    add(&mut q, 0, "later", 1_000);
    q.pop(1, 2, 70_000);
    assert!(q.set_progress(2, b"a", b"half"));
    q.nack(3, b"b", NackAction::Dead, None, Some(b"boom"), &p)
        .unwrap();
    q.pause(4, crate::core::queue::FOREVER);
    q.tick(1_000, 100, &p);
    q.check().unwrap();
    assert!(q.journal().last_seq() > 6, "some events were trimmed");
    q
}

/// A schedule of `spec` from `start`, every option at its default.
fn every(ms: u64, start: u64) -> Schedule {
    Schedule {
        spec: Spec::Every(ms),
        start,
        end: None,
        limit: None,
        missed: Missed::One,
        overlap: Overlap::Allow,
        template: Template {
            payload: b"tick".as_slice().into(),
            ..Template::default()
        },
        next_run: None,
        last_run: None,
        runs: 0,
        skipped: 0,
    }
}

/// A queue with schedules of every kind and option, some runs made.
fn scheduled_queue() -> Queue {
    let mut q = Queue::new();
    let mut cron = every(1, 0);
    cron.spec = Spec::cron(b"*/5 8-18 * * MON-FRI", Some(b"Europe/Berlin")).unwrap();
    cron.end = Some(9_000_000_000_000);
    cron.limit = Some(100);
    cron.missed = Missed::All;
    cron.overlap = Overlap::Skip;
    cron.template = Template {
        payload: b"\x00report".as_slice().into(),
        priority: -3,
        max_attempts: Some(4),
        backoff: Some(Backoff::Fixed(500)),
        group: Some(b"reports".as_slice().into()),
        ttl_ms: Some(60_000),
    };
    q.put_schedule(1_700_000_000_000, b"report", cron, false);
    q.put_schedule(0, b"poll", every(1_000, 0), false);
    q.tick(2_500, 100, &policy(3));
    q.check().unwrap();
    q
}

#[test]
fn runs_are_made_at_their_time_once_and_replay_exactly() {
    let p = policy(3);
    let mut master = Queue::new();
    assert_eq!(
        master.put_schedule(100, b"poll", every(1_000, 100), false),
        Some(Some(100))
    );
    assert_eq!(master.next_due(), Some(100));
    let mut replica = codec::copy(&master).unwrap();
    // Nothing before its time.
    assert!(master.tick(99, 100, &p).runs.is_empty());
    let work = master.tick(2_150, 100, &p);
    assert_eq!(work.runs.len(), 1);
    assert_eq!(work.runs[0].made, [100, 1_100, 2_100]);
    assert_eq!(work.runs[0].next, Some(3_100));
    assert_eq!(master.next_due(), Some(3_100));
    for at in [100, 1_100, 2_100] {
        let run = master.get(&run_id(b"poll", at)).unwrap();
        assert_eq!(
            (run.state, run.due_at, run.payload()),
            (State::Ready, at, &b"tick"[..])
        );
    }
    let s = master.schedule(b"poll").unwrap();
    assert_eq!((s.runs, s.last_run, s.skipped), (3, Some(2_100), 0));
    // The budget cuts a schedule's runs; the rest come next tick.
    let work = master.tick(5_150, 1, &p);
    assert_eq!(work.runs[0].made, [3_100]);
    assert_eq!(master.next_due(), Some(4_100));
    // A replica that replays the ticks reaches the master's state.
    let mut m2 = Queue::new();
    m2.put_schedule(100, b"poll", every(1_000, 100), false);
    for now in [2_150, 5_150, 9_000] {
        let work = m2.tick(now, 2, &p);
        replica.replay_tick(now, &work, &p);
        assert_eq!(
            codec::sorted_digest(&replica),
            codec::sorted_digest(&m2),
            "at {now}"
        );
    }
    replica.check().unwrap();
}

#[test]
fn a_replacement_on_a_clock_behind_the_last_run_makes_no_run_again() {
    let p = policy(3);
    let mut q = Queue::new();
    q.put_schedule(0, b"poll", every(1_000, 0), false);
    assert_eq!(
        q.tick(3_050, 100, &p).runs[0].made,
        [0, 1_000, 2_000, 3_000]
    );
    // A promoted replica whose clock is behind replaces it: its next run is
    // after the last one made, not the first from its clock.
    assert_eq!(
        q.put_schedule(1_500, b"poll", every(1_000, 0), false),
        Some(Some(4_000))
    );
    assert!(q.tick(3_999, 100, &p).runs.is_empty());
    assert_eq!(q.tick(4_000, 100, &p).runs[0].made, [4_000]);
    q.check().unwrap();
}

#[test]
fn limit_end_nx_and_replacement() {
    let p = policy(3);
    let mut q = Queue::new();
    let mut s = every(1_000, 0);
    s.limit = Some(2);
    assert_eq!(q.put_schedule(0, b"twice", s, false), Some(Some(0)));
    let work = q.tick(10_000, 100, &p);
    assert_eq!(work.runs[0].made, [0, 1_000]);
    assert_eq!(work.runs[0].next, None);
    assert_eq!(q.next_due(), None);
    // NX leaves it; a replacement keeps its counts, and its LIMIT counts them.
    assert_eq!(
        q.put_schedule(10_000, b"twice", every(1_000, 0), true),
        None
    );
    let mut again = every(1_000, 0);
    again.limit = Some(3);
    assert_eq!(
        q.put_schedule(10_500, b"twice", again, false),
        Some(Some(11_000))
    );
    let kept = q.schedule(b"twice").unwrap();
    assert_eq!((kept.runs, kept.last_run), (2, Some(1_000)));
    assert_eq!(q.tick(20_000, 100, &p).runs[0].made, [11_000]);
    let mut ended = every(1_000, 0);
    ended.end = Some(2_500);
    assert_eq!(q.put_schedule(3_000, b"late", ended, false), Some(None));
    assert_eq!(q.unschedule(&[b"twice", b"late", b"twice", b"nope"]), 2);
    assert_eq!(q.schedule_count(), 0);
    // The runs made stay; nothing is left to wake the timer for.
    assert!(q.get(&run_id(b"twice", 11_000)).is_some());
    assert_eq!(q.next_due(), None);
    q.check().unwrap();
}

#[test]
fn overlap_skip_waits_for_the_previous_run_to_end() {
    let p = policy(3);
    let mut q = Queue::new();
    let mut s = every(1_000, 0);
    s.overlap = Overlap::Skip;
    q.put_schedule(0, b"job", s, false);
    assert_eq!(q.tick(0, 100, &p).runs[0].made, [0]);
    // Still ready: the next run is skipped.
    let work = q.tick(1_000, 100, &p);
    assert_eq!((work.runs[0].made.len(), work.runs[0].skipped), (0, 1));
    // In flight: skipped again; acknowledged: the next one runs.
    q.pop(0, 1, 50_000);
    assert_eq!(q.tick(2_000, 100, &p).runs[0].skipped, 1);
    q.ack(2_100, &[run_id(b"job", 0).as_slice()], 0);
    assert_eq!(q.tick(3_000, 100, &p).runs[0].made, [3_000]);
    let s = q.schedule(b"job").unwrap();
    assert_eq!((s.runs, s.skipped), (2, 2));
}

#[test]
fn a_new_master_settles_missed_runs_as_missed_says() {
    let p = policy(3);
    for (missed, made) in [
        (Missed::Skip, vec![]),
        (Missed::One, vec![9_000]),
        (
            Missed::All,
            vec![2_000, 3_000, 4_000, 5_000, 6_000, 7_000, 8_000, 9_000],
        ),
    ] {
        let mut q = Queue::new();
        let mut s = every(1_000, 0);
        s.missed = missed;
        q.put_schedule(2_000, b"job", s, false);
        // No master from 2000 until 9500.
        let runs = q.take_over(9_500);
        assert_eq!(runs[0].made, made, "{missed:?}");
        assert_eq!(runs[0].next, Some(10_000), "{missed:?}");
        assert!(q.tick(9_600, 100, &p).runs.is_empty(), "{missed:?}");
        // A replica replaying the takeover agrees.
        let mut replica = Queue::new();
        let mut s = every(1_000, 0);
        s.missed = missed;
        replica.put_schedule(2_000, b"job", s, false);
        replica.replay_runs(9_500, &runs);
        assert_eq!(
            codec::sorted_digest(&replica),
            codec::sorted_digest(&q),
            "{missed:?}"
        );
    }
}

#[test]
fn purge_keeps_schedules_and_their_runs_come_back() {
    let p = policy(3);
    let mut q = scheduled_queue();
    q.purge(3_000, None);
    assert_eq!(q.len(), 0);
    assert_eq!(q.schedule_count(), 2);
    assert_eq!(q.tick(3_000, 100, &p).runs.len(), 1, "poll goes on");
    q.check().unwrap();
}

/// A queue with a message in every state and every option.
fn busy_queue() -> Queue {
    let mut q = Queue::new();
    q.set_config(
        0,
        QueueConfig {
            lease_ms: Some(5_000),
            max_attempts: Some(3),
            backoff: Some(Backoff::parse(b"15s,3m").unwrap()),
            ..QueueConfig::default()
        },
    );
    let p = q.config().resolve(&Settings::default());
    add(&mut q, 0, "delayed", 1_000);
    add(&mut q, 0, "ready", 0);
    let mut req = request(b"full", b"\x00\xffbinary", 0);
    req.priority = -7;
    req.max_attempts = Some(9);
    req.backoff = Some(Backoff::Exponential { base: 10, max: 100 });
    req.expire_at = Some(90_000);
    req.group = Some(b"g");
    q.add(0, &req);
    add_grouped(&mut q, 0, "waiting", 0, "g");
    add(&mut q, 0, "dead", 0);
    q.pop(0, 3, 70_000);
    q.nack(1, b"dead", NackAction::Dead, None, Some(b"gone"), &p)
        .unwrap();
    q.add(2, &request(b"ready", b"replaced while in flight", 0));
    add(&mut q, 3, "ready2", 0);
    q.check().unwrap();
    q
}

/// Runs a NACK or TOUCH (`call`, true when it acted) and checks that it
/// acted exactly when it named the current delivery (or none), and that
/// when refused it changed nothing.
pub(super) fn fenced(
    q: &mut Queue,
    id: &[u8],
    fence: Option<u32>,
    (seed, step): (u64, usize),
    call: impl FnOnce(&mut Queue) -> Result<bool>,
) {
    let current = match q.get(id).map(|r| (r.state, r.attempt)) {
        Some((State::Inflight, attempt)) => Some(attempt),
        _ => None,
    };
    let before = fence.map(|_| codec::sorted_digest(q));
    let result = call(q);
    match (current, fence) {
        (Some(_), None) => assert_eq!(result, Ok(true), "seed {seed} step {step}"),
        (None, None) => assert_eq!(result, Ok(false), "seed {seed} step {step}"),
        (Some(a), Some(n)) if a == n => assert_eq!(result, Ok(true), "seed {seed} step {step}"),
        (_, Some(_)) => {
            assert!(
                matches!(result, Err(DqError::StaleDelivery { .. })),
                "seed {seed} step {step}: {result:?}"
            );
            assert_eq!(
                Some(codec::sorted_digest(q)),
                before,
                "seed {seed} step {step}"
            );
        }
    }
}

/// Found by the model test: a whole-queue PURGE resumed a paused queue and
/// forgot RATE's log, letting a burst through within the window.
#[test]
fn purge_keeps_the_pause_and_the_rate_log() {
    let mut q = Queue::new();
    q.set_config(
        0,
        QueueConfig {
            rate: Some(crate::core::flow::Rate {
                limit: 1,
                window_ms: 1_000,
            }),
            ..QueueConfig::default()
        },
    );
    let t = 10_000;
    add(&mut q, t, "a", t);
    assert_eq!(q.pop(t, 1, t + LEASE).len(), 1);
    q.pause(0, FOREVER);
    q.purge(t + 10, None);
    add(&mut q, t + 10, "b", t + 10);
    assert!(q.paused_at(t + 20));
    q.resume(t + 20);
    assert_eq!(
        q.allowance(t + 20),
        0,
        "the window still holds the first delivery"
    );
    assert_eq!(q.pop(t + 1_001, 1, t + LEASE).len(), 1);
    q.check().unwrap();
}

/// Found by the model test: a delivery after the clock stepped back was
/// logged out of time order, and the queue could no longer be saved.
#[test]
fn a_clock_that_steps_back_keeps_the_rate_log_in_order() {
    let mut q = Queue::new();
    q.set_config(
        0,
        QueueConfig {
            rate: Some(crate::core::flow::Rate {
                limit: 5,
                window_ms: 1_000,
            }),
            ..QueueConfig::default()
        },
    );
    for id in ["a", "b"] {
        add(&mut q, 0, id, 0);
    }
    q.pop(5_000, 1, 9_000);
    q.pop(4_000, 1, 9_000);
    let copy = codec::copy(&q).expect("a queue whose clock stepped back saves and loads");
    assert_eq!(codec::sorted_digest(&copy), codec::sorted_digest(&q));
}

/// ORDER FAIR takes each group's first message from the middle of the
/// ready order: what reads the ready messages (counts, PEEK, the oldest
/// ready message, a switch back to ORDER PRIORITY) sees only those still
/// ready, PEEK in the order POP takes them: the groups in turn.
#[test]
fn order_fair_leaves_no_trace_of_what_it_took() {
    let mut q = Queue::new();
    let config = QueueConfig {
        fair: true,
        group_limit: Some(100),
        ..QueueConfig::default()
    };
    q.set_config(0, config.clone());
    for (i, id) in ["a1", "a2", "b1", "b2", "c1", "c2"].iter().enumerate() {
        add_grouped(&mut q, 10 + i as u64, id, 0, &id[..1]);
    }
    assert_eq!(ids(&q.pop(20, 2, LEASE)), ["a1", "b1"]);
    q.check().unwrap();
    assert_eq!(q.stats().ready, 4);
    assert_eq!(q.stats().oldest_ready_since, Some(11), "a2, added at 11");
    let ready: Vec<_> = q
        .iter_state(State::Ready)
        .map(|slot| q.messages.at(slot).id().to_vec())
        .collect();
    // a and b were served: c's turn, then theirs.
    assert_eq!(
        ready,
        [
            b"c1".to_vec(),
            b"a2".to_vec(),
            b"b2".to_vec(),
            b"c2".to_vec()
        ]
    );
    q.set_config(
        21,
        QueueConfig {
            fair: false,
            ..config
        },
    );
    q.check().unwrap();
    assert_eq!(ids(&q.pop(22, 10, LEASE)), ["a2", "b2", "c1", "c2"]);
    q.check().unwrap();
}

/// Under ORDER FAIR the lines are the only ready index: the ready
/// messages, their counts and the oldest of them are what ORDER
/// PRIORITY's one index says of the same messages, through POPs that take
/// from every line and a switch back and forth; and PEEK lists them in
/// the order the next POP takes them.
#[test]
fn order_fair_lines_read_as_one_ready_index() {
    let config = |fair| QueueConfig {
        fair,
        group_limit: Some(1000),
        ..QueueConfig::default()
    };
    let mut fair = Queue::new();
    let mut plain = Queue::new();
    fair.set_config(0, config(true));
    plain.set_config(0, config(false));
    // Three priorities, due times out of order, seven groups and
    // ungrouped messages; each added at a later time than it is due for
    // some, so that the oldest ready message is not the first in order.
    let mut x: u64 = 7;
    for i in 0..300u64 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let id = format!("m{i}");
        let mut req = request(id.as_bytes(), b"", (x >> 33) % 50);
        req.priority = ((x >> 20) % 3) as i32 - 1;
        let group = format!("g{}", (x >> 40) % 8);
        if !group.ends_with('7') {
            req.group = Some(group.as_bytes());
        }
        for q in [&mut fair, &mut plain] {
            q.add(60 + i % 40, &req);
        }
    }
    let ready = |q: &Queue| -> Vec<Slot> { q.iter_state(State::Ready).collect() };
    let same = |fair: &Queue, plain: &Queue| {
        fair.check().unwrap();
        assert!(fair.ready.len() == 0, "no ready index beside the lines");
        assert_eq!(fair.counts(), plain.counts());
        assert_eq!(
            fair.stats().oldest_ready_since,
            plain.stats().oldest_ready_since
        );
        let ids = |q: &Queue| -> Vec<Vec<u8>> {
            let mut ids: Vec<Vec<u8>> = ready(q)
                .into_iter()
                .map(|slot| q.messages.at(slot).id().to_vec())
                .collect();
            ids.sort();
            ids
        };
        assert_eq!(ids(fair), ids(plain));
    };
    same(&fair, &plain);
    // FAIR takes from every line, what PEEK said, in its order; PRIORITY
    // then takes the same messages.
    let peek = |q: &Queue, n| -> Vec<Vec<u8>> {
        q.peek(State::Ready, n)
            .iter()
            .map(|r| r.id().to_vec())
            .collect()
    };
    let peeked = peek(&fair, 40);
    let taken: Vec<Vec<u8>> = fair.pop(100, 40, LEASE).into_iter().map(|d| d.id).collect();
    assert_eq!(taken, peeked);
    let ids: Vec<&[u8]> = taken.iter().map(Vec::as_slice).collect();
    plain.claim(100, &ids, LEASE);
    same(&fair, &plain);
    // Back to PRIORITY and to FAIR again: nothing lost or doubled.
    fair.set_config(101, config(false));
    fair.check().unwrap();
    assert_eq!(ready(&fair).len(), ready(&plain).len());
    fair.set_config(102, config(true));
    same(&fair, &plain);
    fair.ack(103, &ids, 0);
    plain.ack(103, &ids, 0);
    same(&fair, &plain);
    // The whole drain, as PEEK foretold it (the turn started afresh by
    // the switch, in ready order).
    let peeked = peek(&fair, 1000);
    assert_eq!(peeked.len(), 260);
    let taken: Vec<Vec<u8>> = fair
        .pop(104, 1000, LEASE)
        .into_iter()
        .map(|d| d.id)
        .collect();
    assert_eq!(taken, peeked);
    fair.check().unwrap();
}

/// A PURGE that deletes nothing is not propagated, so it must change
/// nothing: rebuilding the value had settled a group pause that had ended
/// (and restarted ORDER FAIR's turn) on the master alone, and its replica
/// kept the pause (the model test found it: its digests differed).
#[test]
fn a_purge_of_nothing_changes_nothing() {
    let mut q = Queue::new();
    q.pause_group(0, b"g", 100);
    let before = codec::sorted_digest(&q);
    assert_eq!(q.purge(200, None), 0, "past the pause's end");
    assert_eq!(q.purge(200, Some(State::Ready)), 0);
    assert_eq!(codec::sorted_digest(&q), before);
    q.check().unwrap();
}
