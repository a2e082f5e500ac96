//! Scenario 2, lifecycle: ADD → POP → ACK against the seeds' ZSET + Lua
//! broker + LIST; its dq half is also the flow and backlog scenarios' load.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::OnceLock;
use std::thread;
use std::time::Instant;

use dq_testkit::{now_ms, Server};

use crate::clients::{broker, dq_mpop, dq_pop, Finish, TAKE_DUE};
use crate::harness::{
    best_of, busy, drive, payload, timed, BenchServer, Config, Run, Scale, BATCH, GIVE_UP,
};
use crate::report::Report;

/// dq: producers pipeline DQ.ADD (ready at once), consumers DQ.POP COUNT
/// 100 then DQ.ACK the lot. Messages fully acknowledged per second.
pub fn dq_lifecycle(server: &Server, queue: &str, s: &Scale) -> Run {
    dq_lifecycle_over(server, &[queue], s)
}

/// The lifecycle spread over `queues` (message i to queue i mod k): one
/// queue is served by DQ.POP, several by DQ.MPOP over all of them.
pub fn dq_lifecycle_over(server: &Server, queues: &[&str], s: &Scale) -> Run {
    dq_lifecycle_with(server, queues, s, Finish::Ack)
}

/// The lifecycle, each batch ended by `finish` (ACK, or DONE with a result).
pub fn dq_lifecycle_with(server: &Server, queues: &[&str], s: &Scale, finish: Finish) -> Run {
    let n = s.life_n;
    let acked = AtomicUsize::new(0);
    let finished = OnceLock::new();
    let (producers, consumers) = (server.conns(s.producers), server.conns(s.consumers));
    timed(server, n, || {
        let start = Instant::now();
        thread::scope(|sc| {
            sc.spawn(|| {
                drive(producers, n, |p, i| {
                    p.cmd("DQ.ADD")
                        .arg(queues[i % queues.len()])
                        .arg(payload(i));
                })
            });
            for mut con in consumers {
                let (acked, finished) = (&acked, &finished);
                sc.spawn(move || {
                    while acked.load(Relaxed) < n && start.elapsed() < GIVE_UP {
                        let (queue, entries) = match queues {
                            [one] => (*one, dq_pop(&mut con, one)),
                            _ => match dq_mpop(&mut con, queues) {
                                Some((at, entries)) => (queues[at], entries),
                                None => continue,
                            },
                        };
                        let ids: Vec<_> = entries.into_iter().map(|e| e.0).collect();
                        if ids.is_empty() {
                            continue;
                        }
                        let got = finish.run(&mut con, queue, &ids);
                        if acked.fetch_add(got, Relaxed) + got >= n {
                            let _ = finished.set(Instant::now());
                        }
                    }
                });
            }
        });
        let finished = finished.get();
        *finished.unwrap_or_else(|| panic!("only {acked:?} of {n} acked")) - start
    })
}

/// The seeds' design: producers ZADD the payload due now, a broker moves
/// due members to a LIST, consumers LMOVE batches into their processing
/// list and acknowledge each with LREM.
pub fn seeds_lifecycle(server: &Server, s: &Scale) -> Run {
    let n = s.life_n;
    let sha = server.load_script(TAKE_DUE);
    let done = AtomicUsize::new(0);
    let finished = OnceLock::new();
    let (producers, consumers) = (server.conns(s.producers), server.conns(s.consumers));
    let mut broker_con = server.conn();
    timed(server, n, || {
        let start = Instant::now();
        thread::scope(|sc| {
            sc.spawn(|| broker(&mut broker_con, &sha, n));
            sc.spawn(|| {
                drive(producers, n, |p, i| {
                    p.cmd("ZADD").arg("delayed").arg(now_ms()).arg(payload(i));
                })
            });
            for (c, mut con) in consumers.into_iter().enumerate() {
                let (done, finished) = (&done, &finished);
                sc.spawn(move || {
                    let processing = format!("processing:{c}");
                    let mut pipe = redis::pipe();
                    while done.load(Relaxed) < n && start.elapsed() < GIVE_UP {
                        pipe.clear();
                        for _ in 0..BATCH {
                            pipe.cmd("LMOVE")
                                .arg(&["ready", &processing, "LEFT", "RIGHT"]);
                        }
                        let replies: Vec<Option<Vec<u8>>> =
                            pipe.query(&mut con).expect("LMOVE batch");
                        let mut got: Vec<Vec<u8>> = replies.into_iter().flatten().collect();
                        if got.is_empty() {
                            // Nothing ready: wait for one as a real worker would.
                            let one: Option<Vec<u8>> = redis::cmd("BLMOVE")
                                .arg(&["ready", &processing, "LEFT", "RIGHT", "0.1"])
                                .query(&mut con)
                                .expect("BLMOVE");
                            got.extend(one);
                        }
                        if got.is_empty() {
                            continue;
                        }
                        pipe.clear();
                        for member in &got {
                            pipe.cmd("LREM").arg(&processing).arg(1).arg(member);
                        }
                        let removed: Vec<usize> = pipe.query(&mut con).expect("LREM batch");
                        let removed: usize = removed.iter().sum();
                        if done.fetch_add(removed, Relaxed) + removed >= n {
                            let _ = finished.set(Instant::now());
                        }
                    }
                });
            }
        });
        let finished = finished.get();
        *finished.unwrap_or_else(|| panic!("only {done:?} of {n} acknowledged")) - start
    })
}

pub fn lifecycle(cfg: &Config, s: &Scale, report: &mut Report) {
    let [dq, seeds] = best_of(
        s.rounds,
        [&|| dq_lifecycle(&Server::with_module(cfg), "q", s), &|| {
            seeds_lifecycle(&Server::plain(cfg), s)
        }],
    );
    let figure = "ADD→POP→ACK vs ZSET + Lua broker + LIST";
    report.versus("2 lifecycle", figure, dq, seeds, Some(1.2));
    report.detail(format!(
        "lifecycle: best of {} rounds of {} messages, {} producers and {} consumers, batches \
         of {BATCH}, everything due at once; the baseline's consumers LMOVE 100 at a time \
         (BLMOVE when the list is empty) and pipeline their LREMs, its broker runs every 1 ms \
         (at once again after a full batch of 1000); {}",
        s.rounds,
        s.life_n,
        s.producers,
        s.consumers,
        busy(&[("dq", dq), ("baseline", seeds)])
    ));
}
