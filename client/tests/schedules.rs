//! Recurring schedules through the Rust client: DQ.SCHEDULE with every
//! option, DQ.SCHEDULES read back, NX, refusals that change nothing,
//! DQ.UNSCHEDULE; on a cluster, a sharded queue's schedule lives on the
//! one shard its name routes to.

use std::collections::HashSet;
use std::time::Duration;

use dq_client::{Error, Missed, Overlap, Queue, Schedule, Server as DqServer, ShardedQueue};
use dq_testkit::{cmd, list, now_ms, Cluster, Server, LONG};

async fn queue(server: &Server, name: &str) -> Queue {
    let dq = DqServer::single(server.url()).unwrap();
    Queue::new(dq.connect(Duration::from_secs(5)).await.unwrap(), name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_are_made_listed_and_removed() {
    let server = Server::start();
    let q = queue(&server, "reports").await;

    // EVERY: the first run is due at once; the reply is its time.
    let before = now_ms();
    let first_run = q
        .schedule(
            "hourly",
            b"{\"report\":1}",
            &Schedule::every(Duration::from_secs(3600))
                .missed(Missed::Skip)
                .overlap(Overlap::Skip)
                .priority(5)
                .max_attempts(3)
                .backoff("fixed:10s")
                .group("reports")
                .ttl(Duration::from_secs(60)),
        )
        .await
        .unwrap()
        .expect("a next run");
    assert!(
        first_run >= before && first_run <= now_ms(),
        "first run {first_run}"
    );

    // CRON in a zone, bounded by START, END and LIMIT.
    let start = now_ms() + 86_400_000;
    let end = start + 30 * 86_400_000;
    let digest = Schedule::cron("0 8 * * MON-FRI")
        .tz("Europe/Berlin")
        .start(start)
        .end(end)
        .limit(10);
    let next = q.schedule("digest", b"d", &digest).await.unwrap();
    assert!(next.is_some_and(|t| t >= start && t <= end), "{next:?}");

    // The server's timer makes the first run.
    let deadline = tokio::time::Instant::now() + LONG;
    let listed = loop {
        let listed = q.schedules().await.unwrap();
        if listed.iter().any(|s| s.runs == 1) {
            break listed;
        }
        assert!(tokio::time::Instant::now() < deadline, "no run made");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let names: Vec<&[u8]> = listed.iter().map(|s| s.name.as_slice()).collect();
    assert_eq!(names, [&b"digest"[..], b"hourly"]);
    let (d, h) = (&listed[0], &listed[1]);
    assert_eq!(d.spec, "cron 0 8 * * MON-FRI");
    assert_eq!(d.tz, "Europe/Berlin");
    assert_eq!(
        (d.start, d.end, d.limit),
        (Some(start), Some(end), Some(10))
    );
    assert_eq!((d.runs, d.last_run), (0, None));
    assert_eq!((d.missed.as_str(), d.overlap.as_str()), ("one", "allow"));
    assert_eq!(d.payload, b"d");
    assert_eq!(h.spec, "every 1h");
    assert_eq!(h.tz, "UTC");
    assert_eq!(h.runs, 1);
    assert_eq!(h.last_run, Some(first_run));
    assert_eq!(h.next_run, Some(first_run + 3_600_000));
    assert_eq!((h.missed.as_str(), h.overlap.as_str()), ("skip", "skip"));
    assert_eq!(h.payload, b"{\"report\":1}");
    assert_eq!((h.priority, h.max_attempts), (Some(5), Some(3)));
    assert_eq!(h.backoff.as_deref(), Some("fixed:10s"));
    assert_eq!(h.group.as_deref(), Some(&b"reports"[..]));
    assert_eq!(h.ttl, Some(Duration::from_secs(60)));
    assert_eq!(h.end, None);
    assert_eq!(q.stats().await.unwrap().schedules, 2);

    // The run made at once is an ordinary message, id name@T.
    let run_id = format!("hourly@{}", h.last_run.unwrap());
    let run = q.get(run_id.as_bytes()).await.unwrap().expect("the run");
    assert_eq!(run.payload, b"{\"report\":1}");
    assert_eq!(run.priority, 5);

    // NX leaves an existing schedule untouched and replies None.
    let other = Schedule::every(Duration::from_secs(60)).nx();
    assert_eq!(q.schedule("hourly", b"x", &other).await.unwrap(), None);
    assert_eq!(q.schedules().await.unwrap()[1].spec, "every 1h");

    // A refusal is the server's error, and changes nothing.
    for bad in [
        Schedule::cron("0 8 * *"),
        Schedule::cron("0 8 * * *").tz("Mars/Olympus"),
    ] {
        let e = q.schedule("hourly", b"x", &bad).await.unwrap_err();
        assert!(matches!(e, Error::Redis(_)), "{bad:?}: {e:?}");
    }
    // What the server would refuse for its shape is refused before it is
    // sent, as Python and Node.js refuse it (tests/vectors/commands.json).
    for bad in [
        Schedule::every(Duration::from_millis(500)),
        Schedule::every(Duration::from_secs(60)).tz("UTC"),
    ] {
        let e = q.schedule("hourly", b"x", &bad).await.unwrap_err();
        assert!(matches!(e, Error::Config(_)), "{bad:?}: {e:?}");
    }
    assert_eq!(q.schedules().await.unwrap(), listed);

    // UNSCHEDULE counts what existed; the runs' messages stay.
    assert_eq!(q.unschedule::<&str>(&[]).await.unwrap(), 0);
    assert_eq!(
        q.unschedule(&["hourly", "nosuch", "hourly"]).await.unwrap(),
        1
    );
    assert_eq!(q.schedules().await.unwrap().len(), 1);
    assert!(q.get(run_id.as_bytes()).await.unwrap().is_some());
    assert!(Queue::new(q_con(&server).await, "none")
        .schedules()
        .await
        .unwrap()
        .is_empty());
}

async fn q_con(server: &Server) -> dq_client::Connection {
    let dq = DqServer::single(server.url()).unwrap();
    dq.connect(Duration::from_secs(5)).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_queue_keeps_each_schedule_on_the_shard_of_its_name() {
    let cluster = Cluster::start(3);
    let server = DqServer::cluster(cluster.nodes.iter().map(|n| n.url())).unwrap();
    let con = server.connect(Duration::from_secs(5)).await.unwrap();
    let queue = ShardedQueue::new(con, "crons", 8).unwrap();

    let names: Vec<String> = (0..24).map(|i| format!("job-{i}")).collect();
    let start = now_ms() + 3_600_000;
    for name in &names {
        let spec = Schedule::every(Duration::from_secs(60)).start(start);
        let next = queue.schedule(name, name.as_bytes(), &spec).await.unwrap();
        assert_eq!(next, Some(start));
    }
    // Each schedule is on its name's shard, and only there.
    let mut shards_used = HashSet::new();
    for shard in queue.shards().names() {
        let node = &cluster.nodes[cluster.owner(shard.as_bytes())];
        let listed = list(&cmd(&mut node.conn(), &format!("DQ.SCHEDULES {shard}")));
        let expected: Vec<&String> = names
            .iter()
            .filter(|n| queue.schedule_shard(n.as_bytes()) == shard)
            .collect();
        assert_eq!(listed.len(), expected.len(), "shard {shard}");
        if !expected.is_empty() {
            shards_used.insert(shard.clone());
        }
    }
    assert!(shards_used.len() > 1, "every schedule on one shard");
    // The placement is the message routing of every dq library.
    for name in &names {
        assert_eq!(
            queue.schedule_shard(name.as_bytes()),
            queue.shards().route(name.as_bytes())
        );
    }

    // Listed together, sorted by name.
    let listed = queue.schedules().await.unwrap();
    let mut sorted: Vec<Vec<u8>> = names.iter().map(|n| n.clone().into_bytes()).collect();
    sorted.sort();
    assert_eq!(
        listed.iter().map(|s| s.name.clone()).collect::<Vec<_>>(),
        sorted
    );
    assert_eq!(queue.stats().await.unwrap().schedules, 24);

    // Removed where they are.
    let gone = queue
        .unschedule(&["job-0", "job-1", "job-2", "nosuch", "job-0"])
        .await
        .unwrap();
    assert_eq!(gone, 3);
    assert_eq!(queue.schedules().await.unwrap().len(), 21);
}
