//! Lateness by dq.ready events: how scenarios 9 and 11 time thousands of
//! queues falling due, which no consumer could block on at once.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::thread;
use std::time::Duration;

use dq_testkit::{now_ms, Server};

use crate::harness::{
    info, info_u64, now_us, realtime_priority, BenchServer, Config, Scale, GIVE_UP,
};

/// Queue `i` of these scenarios, and the topic of the client-side design
/// beside them: `ready_lateness` reads `i` back from an event's queue name.
pub fn tenant(i: usize) -> String {
    format!("tenant-{i:05}")
}

/// The keyevent channel on which db 0 announces messages becoming ready
/// (the generic class, see docs/commands.md, Keyspace notifications).
pub const READY_CHANNEL: &str = "__keyevent@0__:dq.ready";

/// Published on READY_CHANNEL by the benchmark itself to stop a
/// subscriber that gave up waiting; not a queue name of the scenario.
const END_OF_RUN: &str = "dq-bench-end-of-run";

/// Gives each queue `i` of a server its one thing due at `due_of(i)`;
/// returns how long that took.
pub type Preload<'a> = dyn Fn(&Server, &(dyn Fn(usize) -> u64 + Sync)) -> Duration + 'a;

/// What `ready_lateness` measured: each queue's dq.ready event time minus
/// its due time (µs), whether the subscriber ran at real-time priority,
/// and one line per server.
pub struct ReadyLateness {
    pub samples: Vec<i64>,
    pub realtime: bool,
    pub rounds: Vec<String>,
}

/// `n` queues (`tenant(i)`), each given one thing due at `due_of(base, i)`
/// by `preload` (a message, a schedule's run): n / 1000 falling due a
/// millisecond across one second, a few seconds ahead. One client
/// SUBSCRIBEd to dq.ready takes each queue's event time; no other client
/// talks to the server meanwhile.
pub fn ready_lateness(cfg: &Config, s: &Scale, n: usize, preload: &Preload<'_>) -> ReadyLateness {
    // Queue i falls due at base + i * 1000 / n ms: n / 1000 a millisecond.
    let due_of = |base: u64, i: usize| base + (i * 1000 / n) as u64;
    let mut samples: Vec<i64> = Vec::with_capacity(n * s.queue_rounds);
    let mut rounds = Vec::new();
    let mut all_realtime = true;
    for _ in 0..s.queue_rounds {
        // Due once the preload (and the subscription) are surely over; if
        // the preload overran, again on a fresh server with more room.
        let mut lead_ms = 2000;
        let (server, base, took) = loop {
            let server = Server::with_module(cfg);
            let base = now_ms() + lead_ms;
            let took = preload(&server, &|i| due_of(base, i));
            if now_ms() + 1000 < base {
                break (server, base, took);
            }
            lead_ms = 2 * lead_ms + 2 * took.as_millis() as u64;
        };
        let mut con = server.conn();
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("notify-keyspace-events")
            .arg("Eg")
            .query(&mut con)
            .expect("CONFIG SET notify-keyspace-events");
        let ticks_before = info_u64(&mut con, "dq", "dq_timer_ticks");
        let received = AtomicUsize::new(0);
        let subscribed = AtomicBool::new(false);
        let mut sub_con = server.conn();
        let (events, realtime) = thread::scope(|sc| {
            let subscriber = sc.spawn(|| {
                let realtime = realtime_priority();
                let mut pubsub = sub_con.as_pubsub();
                pubsub.subscribe(READY_CHANNEL).expect("SUBSCRIBE");
                subscribed.store(true, Relaxed);
                let mut events = Vec::with_capacity(n);
                while events.len() < n {
                    let msg = pubsub.get_message().expect("a dq.ready notification");
                    let at_us = now_us();
                    let name = msg.get_payload_bytes();
                    if name == END_OF_RUN.as_bytes() {
                        break;
                    }
                    let index = std::str::from_utf8(name)
                        .ok()
                        .and_then(|name| name.strip_prefix("tenant-"))
                        .and_then(|i| i.parse::<usize>().ok())
                        .unwrap_or_else(|| panic!("not a queue of the scenario: {name:?}"));
                    events.push((index, at_us));
                    received.fetch_add(1, Relaxed);
                }
                (events, realtime)
            });
            while !subscribed.load(Relaxed) && !subscriber.is_finished() {
                thread::sleep(Duration::from_millis(1));
            }
            assert!(
                now_ms() < base,
                "queues: subscribed only after the first due time"
            );
            let give_up = due_of(base, n - 1) + GIVE_UP.as_millis() as u64;
            while received.load(Relaxed) < n && !subscriber.is_finished() && now_ms() < give_up {
                thread::sleep(Duration::from_millis(10));
            }
            if received.load(Relaxed) < n && !subscriber.is_finished() {
                let _: i64 = redis::cmd("PUBLISH")
                    .arg(READY_CHANNEL)
                    .arg(END_OF_RUN)
                    .query(&mut con)
                    .expect("PUBLISH");
            }
            subscriber.join().expect("the dq.ready subscriber")
        });
        let dq = info(&mut con, "dq");
        let field = |name: &str| dq[name].parse::<u64>().expect("a numeric INFO dq field");
        assert_eq!(
            field("dq_messages_ready"),
            n as u64,
            "queues: not every message became ready"
        );
        assert_eq!(
            events.len(),
            n,
            "queues: {} dq.ready events for {n} queues",
            events.len()
        );
        let mut seen = vec![false; n];
        for &(i, at_us) in &events {
            assert!(!seen[i], "queues: two dq.ready events for {}", tenant(i));
            seen[i] = true;
            samples.push(at_us as i64 - (due_of(base, i) * 1000) as i64);
        }
        all_realtime &= realtime;
        rounds.push(format!(
            "preload {:.2} s, {} timer ticks ({} of them continuing a previous tick's work), \
             the longest {} µs, {} promoted, {} schedule runs",
            took.as_secs_f64(),
            field("dq_timer_ticks") - ticks_before,
            field("dq_ticks_continued"),
            field("dq_longest_tick_us"),
            field("dq_promoted"),
            field("dq_schedule_runs")
        ));
    }
    ReadyLateness {
        samples,
        realtime: all_realtime,
        rounds,
    }
}
