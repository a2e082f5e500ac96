//! Flow control through the Rust client: pause and resume, RATE and
//! MAXINFLIGHT through `config_set`, their fields in `config()` and
//! `stats()`; a sharded queue splits its limits so that they stay exact
//! for the whole queue, and refuses a limit it cannot split.

use std::time::Duration;

use dq_client::{AddOptions, Error, Queue, Server as DqServer, ShardedQueue};
use dq_testkit::{cmd, entries, field, int, text, Server, Value};

async fn connect(server: &Server) -> dq_client::Connection {
    let dq = DqServer::single(server.url()).unwrap();
    dq.connect(Duration::from_secs(5)).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_pauses_resumes_and_takes_limits() {
    let server = Server::start();
    let mut c = server.conn();
    let q = Queue::new(connect(&server).await, "flow");
    q.add(b"a", &AddOptions::default()).await.unwrap();

    // Paused until resumed: POP delivers nothing.
    q.pause(None).await.unwrap();
    let stats = q.stats().await.unwrap();
    assert!(stats.paused);
    assert_eq!(stats.paused_until, None);
    assert!(q.config().await.unwrap().paused);
    assert_eq!(cmd(&mut c, "DQ.POP flow"), Value::Nil);
    assert_eq!(q.stats().await.unwrap().throttled, 1);
    assert!(q.resume().await.unwrap());
    assert!(!q.resume().await.unwrap());
    assert!(!q.stats().await.unwrap().paused);

    // Paused for a while: until when is shown.
    q.pause(Some(Duration::from_secs(600))).await.unwrap();
    let until = q.stats().await.unwrap().paused_until.expect("an end");
    assert!(until > dq_testkit::now_ms() + 500_000, "{until}");
    assert_eq!(q.config().await.unwrap().paused_until, Some(until));
    assert!(q.resume().await.unwrap());

    // The limits go through config_set and read back from both.
    q.config_set(&[("RATE", "100/1s"), ("MaxInflight", "20")])
        .await
        .unwrap();
    let config = q.config().await.unwrap();
    assert_eq!(config.rate.as_deref(), Some("100/1s"));
    assert_eq!(config.max_inflight, Some(20));
    let stats = q.stats().await.unwrap();
    assert_eq!(stats.rate.as_deref(), Some("100/1s"));
    assert_eq!(stats.max_inflight, Some(20));
    // One bad pair changes nothing.
    let e = q
        .config_set(&[("RATE", "5/1s"), ("MAXINFLIGHT", "lots")])
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Redis(_)), "{e:?}");
    assert_eq!(q.config().await.unwrap().rate.as_deref(), Some("100/1s"));
    // 0 removes a limit.
    q.config_set(&[("RATE", "0"), ("MAXINFLIGHT", "0")])
        .await
        .unwrap();
    let config = q.config().await.unwrap();
    assert_eq!((config.rate, config.max_inflight), (None, None));

    // MAXINFLIGHT holds POP to what it allows, and counts the throttling.
    for i in 0..4 {
        cmd(&mut c, &format!("DQ.ADD flow x ID m{i}"));
    }
    q.config_set(&[("MAXINFLIGHT", "2")]).await.unwrap();
    let throttled = q.stats().await.unwrap().throttled;
    assert_eq!(entries(&cmd(&mut c, "DQ.POP flow COUNT 5")).len(), 2);
    let stats = q.stats().await.unwrap();
    assert_eq!(stats.throttled, throttled + 1);
    assert_eq!(q.config().await.unwrap().throttled, stats.throttled);
}

fn shard_field(c: &mut redis::Connection, shard: &str, name: &str) -> Value {
    field(&cmd(c, &format!("DQ.CONFIG {shard}")), name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_queue_splits_its_limits_exactly_and_pauses_every_shard() {
    let server = Server::start();
    let mut c = server.conn();
    let q = ShardedQueue::new(connect(&server).await, "split", 4).unwrap();
    let shards = q.shards().names().to_vec();

    // Each of 4 shards gets floor(n/4): together never more than n.
    q.config_set(&[("rate", "10/1s"), ("MAXINFLIGHT", "9"), ("LEASE", "5000")])
        .await
        .unwrap();
    for shard in &shards {
        assert_eq!(text(&shard_field(&mut c, shard, "rate")), "2/1s");
        assert_eq!(int(&shard_field(&mut c, shard, "max-inflight")), 2);
        assert_eq!(int(&shard_field(&mut c, shard, "lease-ms")), 5000);
    }
    // Read back as the whole queue's limits.
    let config = q.config().await.unwrap();
    assert_eq!(config.rate.as_deref(), Some("8/1s"));
    assert_eq!(config.max_inflight, Some(8));
    assert_eq!(config.lease_ms, 5000);
    let stats = q.stats().await.unwrap();
    assert_eq!(stats.rate.as_deref(), Some("8/1s"));
    assert_eq!(stats.max_inflight, Some(8));

    // Fewer than one per shard cannot be split exactly: refused before
    // anything is sent.
    for pairs in [
        [("RATE", "3/1s"), ("LEASE", "7000")],
        [("LEASE", "7000"), ("MAXINFLIGHT", "3")],
    ] {
        let e = q.config_set(&pairs).await.unwrap_err();
        assert!(
            matches!(&e, Error::Config(m) if m.contains("4 shards")),
            "{e:?}"
        );
        for shard in &shards {
            assert_eq!(text(&shard_field(&mut c, shard, "rate")), "2/1s");
            assert_eq!(int(&shard_field(&mut c, shard, "max-inflight")), 2);
            assert_eq!(int(&shard_field(&mut c, shard, "lease-ms")), 5000);
        }
    }
    // A value the server refuses stops at the first shard: nothing changed.
    let e = q.config_set(&[("RATE", "8/soon")]).await.unwrap_err();
    assert!(matches!(e, Error::Redis(_)), "{e:?}");
    assert_eq!(q.config().await.unwrap().rate.as_deref(), Some("8/1s"));

    // 0 removes the limits everywhere.
    q.config_set(&[("RATE", "0"), ("MAXINFLIGHT", "DEFAULT")])
        .await
        .unwrap();
    for shard in &shards {
        assert_eq!(shard_field(&mut c, shard, "rate"), Value::Nil);
        assert_eq!(shard_field(&mut c, shard, "max-inflight"), Value::Nil);
    }
    let config = q.config().await.unwrap();
    assert_eq!((config.rate, config.max_inflight), (None, None));

    // Pause and resume reach every shard.
    q.pause(None).await.unwrap();
    for shard in &shards {
        assert_eq!(int(&shard_field(&mut c, shard, "paused")), 1);
    }
    assert!(q.stats().await.unwrap().paused);
    assert!(q.resume().await.unwrap());
    assert!(!q.resume().await.unwrap());
    for shard in &shards {
        assert_eq!(int(&shard_field(&mut c, shard, "paused")), 0);
    }
    // One shard paused is a paused queue; resume says it was.
    cmd(&mut c, &format!("DQ.PAUSE {} FOR 600000", shards[2]));
    let stats = q.stats().await.unwrap();
    assert!(stats.paused);
    assert!(stats.paused_until.is_some());
    assert!(q.resume().await.unwrap());
}
