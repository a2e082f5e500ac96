//! Scenario 3, lateness: delivery time − due time under a steady load
//! (its samples also make lateness.svg).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use dq_testkit::{now_ms, Server};
use redis::Value;

use crate::clients::{dq_ack, dq_pop};
use crate::harness::{now_us, payload, rate, tag_of, BenchServer, Config, Scale, BATCH, GIVE_UP};
use crate::report::{ms, per_sec, percentile, Report};

/// A steady 10k msg/s due 100 ms after they are added, four blocking
/// consumers; lateness = when a consumer got the message − its due time.
pub fn lateness(cfg: &Config, s: &Scale, report: &mut Report) {
    const PER_MS: usize = 10;
    const LEAD_MS: u64 = 100;
    let server = Server::with_module(cfg);
    let ms_total = s.late_secs * 1000;
    let n = ms_total as usize * PER_MS;
    let received = AtomicUsize::new(0);
    let samples = Mutex::new(Vec::with_capacity(n));
    let behind_ms = AtomicU64::new(0);
    let (mut producer, consumers) = (server.conn(), server.conns(4));
    let start = Instant::now();
    let sending = thread::scope(|sc| {
        let producer = sc.spawn(|| {
            let first = now_ms() + 1;
            let mut pipe = redis::pipe();
            for send_at in first..first + ms_total {
                while now_ms() < send_at {
                    thread::sleep(Duration::from_micros(100));
                }
                // Due LEAD_MS after the ADD really goes out: a producer that
                // fell behind (a busy machine) must not make dq look late.
                let sent = now_ms();
                behind_ms.fetch_max(sent - send_at, Relaxed);
                let due = sent + LEAD_MS;
                pipe.clear();
                for _ in 0..PER_MS {
                    pipe.cmd("DQ.ADD")
                        .arg("q")
                        .arg(payload(due as usize))
                        .arg("AT")
                        .arg(due);
                }
                pipe.query::<Vec<Value>>(&mut producer)
                    .expect("DQ.ADD batch");
            }
            start.elapsed()
        });
        for mut con in consumers {
            let (received, samples) = (&received, &samples);
            sc.spawn(move || {
                let mut mine = Vec::new();
                while received.load(Relaxed) < n && start.elapsed() < GIVE_UP {
                    let batch = dq_pop(&mut con, "q");
                    let got_us = now_us() as i64;
                    mine.extend(
                        batch
                            .iter()
                            .map(|(_, p)| got_us - (tag_of(p) * 1000) as i64),
                    );
                    let ids: Vec<_> = batch.into_iter().map(|e| e.0).collect();
                    if !ids.is_empty() {
                        received.fetch_add(ids.len(), Relaxed);
                        dq_ack(&mut con, "q", &ids);
                    }
                }
                samples.lock().expect("samples").extend(mine);
            });
        }
        producer.join().expect("the producer")
    });
    let mut samples = samples.into_inner().expect("samples");
    assert_eq!(samples.len(), n, "lateness: messages went missing");
    samples.sort_unstable();
    let scenario = "3 lateness";
    let p = |q: f64| percentile(&samples, q);
    let figure = "p50 at 10k msg/s, blocking consumers";
    report.figure(scenario, figure, ms(p(0.5)), None);
    report.figure(
        scenario,
        "p99",
        ms(p(0.99)),
        Some(("≤ 2 ms", p(0.99) <= 2000.0)),
    );
    report.figure(scenario, "p999", ms(p(0.999)), None);
    report.figure(
        scenario,
        "max",
        ms(p(1.0)),
        Some(("≤ 10 ms", p(1.0) <= 10_000.0)),
    );
    let ticks = server.info_u64("dq", "dq_timer_ticks");
    let longest = server.info_u64("dq", "dq_longest_tick_us");
    report.detail(format!(
        "lateness: {n} messages over {} s, {PER_MS} per ms due {LEAD_MS} ms after their ADD \
         (AT), 4 consumers DQ.POP COUNT {BATCH} BLOCK; {ticks} timer ticks, the longest \
         {longest} µs; the producer sent at {} (at most {} ms behind its schedule)",
        s.late_secs,
        per_sec(rate(n, sending)),
        behind_ms.load(Relaxed)
    ));
    report.lateness_us = samples;
}
