//! The event reader of the Rust client against real servers: a queue's
//! events come through `Queue::events` in order with their attempts, a
//! reader resumes after the seq it kept, a trimmed seq is `Error::Gap`
//! with the oldest kept and a log that started over `EventLogRestarted`,
//! a blocked read that times out is sent again and is woken by the next
//! event, and a sharded queue's readers (one per shard, across a
//! cluster's masters) are merged, each with its own seq.

use std::collections::HashMap;
use std::time::Duration;

use dq_client::admin;
use dq_client::{
    AddOptions, Error, Event, EventKind, EventsOptions, Queue, Server as DqServer, ShardEvent,
    ShardSeqs, ShardedQueue, Stream, StreamExt,
};
use dq_testkit::{cmd, entries, text, wait_blocked, wait_until, Cluster, Server, LONG};

async fn connect(server: &Server) -> dq_client::Connection {
    DqServer::single(server.url().as_str())
        .unwrap()
        .connect(Duration::from_secs(5))
        .await
        .unwrap()
}

async fn queue(server: &Server, name: &str) -> Queue {
    Queue::new(connect(server).await, name)
}

fn id(id: &str) -> AddOptions {
    AddOptions {
        id: Some(id.as_bytes().to_vec()),
        ..AddOptions::default()
    }
}

/// The next `n` items of `stream`, failing the test after LONG.
async fn next_n<T>(stream: &mut (impl Stream<Item = T> + Unpin), n: usize) -> Vec<T> {
    let mut got = Vec::new();
    while got.len() < n {
        match tokio::time::timeout(LONG, stream.next()).await {
            Ok(Some(item)) => got.push(item),
            Ok(None) => panic!("the stream ended after {} items, not {n}", got.len()),
            Err(_) => panic!("{} items in {LONG:?}, not {n}", got.len()),
        }
    }
    got
}

/// An event's (type, id, attempt, detail), as a test sets them up.
type Kind = (String, Option<String>, Option<u64>, Option<String>);

fn kind(e: &Event) -> Kind {
    (
        e.kind.to_string(),
        e.id_lossy().map(|s| s.into_owned()),
        e.attempt,
        e.detail_lossy().map(|s| s.into_owned()),
    )
}

fn ev(t: &str, id: &str, attempt: Option<u64>, detail: Option<&str>) -> Kind {
    (
        t.to_string(),
        (!id.is_empty()).then(|| id.to_string()),
        attempt,
        detail.map(str::to_string),
    )
}

fn events(items: Vec<Result<Event, Error>>) -> Vec<Event> {
    items.into_iter().map(|r| r.unwrap()).collect()
}

/// How many DQ.EVENTS the server has run (INFO commandstats).
fn events_calls(c: &mut redis::Connection) -> u64 {
    text(&cmd(c, "INFO commandstats"))
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_dq.events:calls="))
        .and_then(|rest| rest.split(',').next()?.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_change_comes_in_order_with_its_attempt_and_a_reader_resumes_after_its_seq() {
    let server = Server::start();
    let mut c = server.conn();
    let jobs = queue(&server, "jobs").await;
    jobs.config_set(&[("EVENTS", "100"), ("RETAIN", "1h")])
        .await
        .unwrap();
    assert_eq!(jobs.config().await.unwrap().events, 100);
    // The reader starts before anything happens: it blocks, and each
    // change wakes it (its BLOCK outlasts the test: no read is sent again
    // before the event).
    let options = EventsOptions {
        block: LONG * 10,
        ..EventsOptions::default()
    };
    let mut reader = Box::pin(jobs.events_with(None, options).unwrap());
    let first = tokio::spawn(async move {
        let got = next_n(&mut reader, 1).await;
        (got, reader)
    });
    wait_blocked(&mut c, 1);
    jobs.add(b"x", &id("a")).await.unwrap();
    let (got, mut reader) = first.await.unwrap();
    let mut seen = events(got);
    jobs.add(b"x", &id("b")).await.unwrap();
    assert_eq!(
        entries(&cmd(&mut c, "DQ.POP jobs COUNT 2 LEASE 1h")).len(),
        2
    );
    assert_eq!(jobs.ack(&[b"a"]).await.unwrap(), 1);
    cmd(&mut c, "DQ.NACK jobs b DELAY 0 ERROR boom");
    assert_eq!(entries(&cmd(&mut c, "DQ.POP jobs LEASE 1h")).len(), 1);
    jobs.progress(b"b", b"half", None, Some(2)).await.unwrap();
    assert_eq!(jobs.done(&[(b"b", b"result")]).await.unwrap(), 1);
    seen.extend(events(next_n(&mut reader, 7).await));
    assert_eq!(
        seen.iter().map(kind).collect::<Vec<_>>(),
        vec![
            ev("added", "a", None, None),
            ev("added", "b", None, None),
            ev("delivered", "a", Some(1), None),
            ev("delivered", "b", Some(1), None),
            ev("done", "a", Some(1), None),
            ev("retry", "b", Some(1), Some("nack")),
            ev("delivered", "b", Some(2), None),
            ev("progress", "b", Some(2), Some("half")),
        ]
    );
    assert_eq!(
        seen.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=8).collect::<Vec<_>>()
    );
    assert_eq!(seen[0].kind, EventKind::Added);
    // One more is still to come to this reader; a new one resumes after
    // the seq it kept (as a program restarted would) and gets the same.
    let next = events(next_n(&mut reader, 1).await);
    assert_eq!(kind(&next[0]), ev("done", "b", Some(2), None));
    drop(reader);
    let mut resumed = Box::pin(jobs.events(Some(6)));
    let again = events(next_n(&mut resumed, 3).await);
    assert_eq!(
        again.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![7, 8, 9]
    );
    assert_eq!(again[2], next[0]);
    assert_eq!(jobs.last_event_seq().await.unwrap(), 9);
    // One read, for code that reads by itself.
    let page = admin::events(&mut connect(&server).await, b"jobs", Some(7), 1)
        .await
        .unwrap();
    assert_eq!(page.last_seq, 9);
    assert_eq!(page.events, vec![again[1].clone()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trimmed_seq_is_gap_with_the_oldest_kept_and_a_restarted_log_is_said() {
    let server = Server::start();
    let mut c = server.conn();
    let jobs = queue(&server, "jobs").await;
    jobs.config_set(&[("EVENTS", "5")]).await.unwrap();
    for i in 0..10 {
        jobs.add(b"x", &id(&format!("m{i}"))).await.unwrap();
    }
    // The reader is told, and its stream ends: never a silent skip.
    let mut reader = Box::pin(jobs.events(Some(2)));
    match next_n(&mut reader, 1).await.pop().unwrap() {
        Err(Error::Gap { queue, oldest }) => assert_eq!((queue.as_str(), oldest), ("jobs", 6)),
        other => panic!("{other:?}"),
    }
    assert!(reader.next().await.is_none());
    let mut con = connect(&server).await;
    assert!(matches!(
        admin::events(&mut con, b"jobs", Some(0), 10).await,
        Err(Error::Gap { oldest: 6, .. })
    ));
    // Going on with what is kept: from oldest - 1.
    let mut reader = Box::pin(jobs.events(Some(5)));
    let kept = events(next_n(&mut reader, 5).await);
    assert_eq!(
        kept.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![6, 7, 8, 9, 10]
    );
    assert_eq!(kept[0].id_lossy().as_deref(), Some("m5"));
    // From the oldest kept (None) there is no gap to report.
    let mut reader = Box::pin(jobs.events(None));
    assert_eq!(events(next_n(&mut reader, 5).await), kept);

    // The queue deleted under a blocked reader: its log started over.
    let mut reader = Box::pin(jobs.events(Some(10)));
    let waiting = tokio::spawn(async move { next_n(&mut reader, 1).await });
    wait_blocked(&mut c, 1);
    cmd(&mut c, "DEL jobs");
    match waiting.await.unwrap().pop().unwrap() {
        Err(Error::EventLogRestarted {
            queue,
            after,
            last_seq,
        }) => assert_eq!((queue.as_str(), after, last_seq), ("jobs", 10, 0)),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        admin::events(&mut con, b"jobs", Some(3), 10).await,
        Err(Error::EventLogRestarted { last_seq: 0, .. })
    ));
    // A count the server refuses is refused before anything is sent.
    let bad = EventsOptions {
        count: 0,
        ..EventsOptions::default()
    };
    assert!(matches!(jobs.events_with(None, bad), Err(Error::Config(_))));
    assert!(matches!(
        admin::events(&mut con, b"jobs", None, 10_001).await,
        Err(Error::Config(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_read_that_times_out_is_sent_again_and_woken_by_the_next_event() {
    let server = Server::start();
    let mut c = server.conn();
    let jobs = queue(&server, "jobs").await;
    jobs.config_set(&[("EVENTS", "10")]).await.unwrap();
    let options = EventsOptions {
        block: Duration::from_millis(20),
        ..EventsOptions::default()
    };
    let mut reader = Box::pin(jobs.events_with(None, options).unwrap());
    let waiting = tokio::spawn(async move { next_n(&mut reader, 1).await });
    // Several BLOCK 20 reads have timed out (nil) and been sent again...
    let before = events_calls(&mut c);
    assert!(wait_until(LONG, || events_calls(&mut c) >= before + 5));
    assert!(!waiting.is_finished());
    // ...and the one blocked now is answered by the next event.
    wait_blocked(&mut c, 1);
    jobs.add(b"x", &id("late")).await.unwrap();
    let got = events(waiting.await.unwrap());
    assert_eq!(kind(&got[0]), ev("added", "late", None, None));
    assert_eq!(got[0].seq, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_queues_readers_are_merged_each_with_its_own_seq() {
    let cluster = Cluster::start(3);
    let server = DqServer::cluster(cluster.nodes.iter().map(|n| n.url())).unwrap();
    let con = server.connect(Duration::from_secs(5)).await.unwrap();
    let jobs = ShardedQueue::new(con, "renders", 4).unwrap();
    jobs.config_set(&[("EVENTS", "100")]).await.unwrap();
    assert!(matches!(
        jobs.events(&ShardSeqs::oldest(3)),
        Err(Error::Config(_))
    ));
    let mut position = ShardSeqs::oldest(4);
    let mut reader = Box::pin(jobs.events(&position).unwrap());
    let ids: Vec<String> = (0..24).map(|i| format!("job-{i}")).collect();
    for i in &ids {
        jobs.add(b"x", &id(i)).await.unwrap();
    }
    let got: Vec<ShardEvent> = next_n(&mut reader, ids.len())
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    // Each id once, from the shard it was added to, and each shard's
    // events in their own order: 1, 2, 3, ...
    let mut per_shard: HashMap<usize, Vec<u64>> = HashMap::new();
    let mut seen_ids = Vec::new();
    for e in &got {
        assert_eq!(e.event.kind, EventKind::Added);
        let event_id = e.event.id_lossy().unwrap().into_owned();
        assert_eq!(
            jobs.shards().names()[e.shard],
            jobs.shards().route(event_id.as_bytes())
        );
        per_shard.entry(e.shard).or_default().push(e.event.seq);
        seen_ids.push(event_id);
        position.seen(e);
    }
    seen_ids.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(seen_ids, want);
    assert!(per_shard.len() > 1, "the ids spread over shards");
    for seqs in per_shard.values() {
        assert_eq!(*seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    }
    for (shard, seq) in position.seqs().iter().enumerate() {
        let n = per_shard.get(&shard).map_or(0, Vec::len) as u64;
        assert_eq!(*seq, (n > 0).then_some(n));
    }
    // A reader resumed from the kept position gets only what came after.
    drop(reader);
    let mut reader = Box::pin(jobs.events(&position).unwrap());
    jobs.add(b"x", &id("after")).await.unwrap();
    let next = next_n(&mut reader, 1).await.pop().unwrap().unwrap();
    assert_eq!(next.event.id_lossy().as_deref(), Some("after"));
    let shard = next.shard;
    assert_eq!(
        next.event.seq,
        per_shard.get(&shard).map_or(0, Vec::len) as u64 + 1
    );
}
