//! Groups through the Rust client: GROUPLIMIT, GROUPRATE and ORDER through
//! `config_set` and read back by `config()`, a group's pause and resume,
//! `groups()` over every page, STATS' `groups`; a sharded queue keeps each
//! group on one shard, so it sends the group settings to every shard
//! unsplit and a group's pause to the group's shard only.

use std::collections::HashSet;
use std::time::Duration;

use dq_client::{
    admin, AddOptions, Error, EventKind, GroupInfo, Order, Queue, Server as DqServer, ShardedQueue,
};
use dq_testkit::{cmd, entries, field, int, list, now_ms, text, Server, Value};

async fn connect(server: &Server) -> dq_client::Connection {
    let dq = DqServer::single(server.url()).unwrap();
    dq.connect(Duration::from_secs(5)).await.unwrap()
}

fn in_group(group: &str, id: &str) -> AddOptions {
    AddOptions {
        group: Some(group.as_bytes().to_vec()),
        id: Some(id.as_bytes().to_vec()),
        ..AddOptions::default()
    }
}

/// The ids a POP of up to `n` delivers, waiting up to 5 s for the first.
fn pop(c: &mut redis::Connection, queue: &str, n: usize) -> Vec<String> {
    let reply = cmd(c, &format!("DQ.POP {queue} COUNT {n} BLOCK 5000"));
    entries(&reply).into_iter().map(|(id, _, _)| id).collect()
}

/// The ids a POP of up to `n` delivers now, without waiting.
fn pop_now(c: &mut redis::Connection, queue: &str, n: usize) -> Vec<String> {
    let reply = cmd(c, &format!("DQ.POP {queue} COUNT {n}"));
    entries(&reply).into_iter().map(|(id, _, _)| id).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_settings_round_trip_and_a_bad_value_changes_nothing() {
    let server = Server::start();
    let q = Queue::new(connect(&server).await, "settings");

    // The defaults: one of a group at a time, no rate, priority order.
    let c = q.config().await.unwrap();
    assert_eq!(c.group_limit, 1);
    assert_eq!(c.group_rate, None);
    assert_eq!(
        (c.order.as_str(), c.order()),
        ("priority", Some(Order::Priority))
    );

    q.config_set(&[
        ("GROUPLIMIT", "3"),
        ("GROUPRATE", "10/1s"),
        ("ORDER", Order::Fair.keyword()),
    ])
    .await
    .unwrap();
    let c = q.config().await.unwrap();
    assert_eq!(c.group_limit, 3);
    assert_eq!(c.group_rate.as_deref(), Some("10/1s"));
    let rate = c.group_rate_limit().unwrap();
    assert_eq!((rate.deliveries, rate.window), (10, Duration::from_secs(1)));
    assert_eq!(c.order(), Some(Order::Fair));

    // One bad pair: refused by the server, and nothing changed.
    for pairs in [
        [("GROUPLIMIT", "5"), ("GROUPRATE", "soon")],
        [("GROUPLIMIT", "0"), ("ORDER", "PRIORITY")],
        [("GROUPLIMIT", "1000001"), ("ORDER", "PRIORITY")],
        [("ORDER", "RANDOM"), ("GROUPLIMIT", "5")],
    ] {
        let e = q.config_set(&pairs).await.unwrap_err();
        assert!(matches!(e, Error::Redis(_)), "{pairs:?}: {e:?}");
        let c = q.config().await.unwrap();
        assert_eq!(c.group_limit, 3, "{pairs:?}");
        assert_eq!(c.group_rate.as_deref(), Some("10/1s"));
        assert_eq!(c.order(), Some(Order::Fair));
    }

    // DEFAULT (and GROUPRATE 0) go back to the defaults.
    q.config_set(&[
        ("GROUPLIMIT", "DEFAULT"),
        ("GROUPRATE", "0"),
        ("ORDER", "DEFAULT"),
    ])
    .await
    .unwrap();
    let c = q.config().await.unwrap();
    assert_eq!((c.group_limit, c.group_rate.as_deref()), (1, None));
    assert_eq!(c.order(), Some(Order::Priority));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grouplimit_two_lets_two_of_a_group_out_at_once() {
    let server = Server::start();
    let mut c = server.conn();
    let q = Queue::new(connect(&server).await, "limit");
    q.config_set(&[("GROUPLIMIT", "2")]).await.unwrap();
    for i in 0..5 {
        q.add(b"x", &in_group("g", &format!("m{i}"))).await.unwrap();
    }
    assert_eq!(pop_now(&mut c, "limit", 5), ["m0", "m1"]);
    assert!(pop_now(&mut c, "limit", 5).is_empty());
    let stats = q.stats().await.unwrap();
    assert_eq!((stats.inflight, stats.delayed, stats.groups), (2, 3, 1));
    let groups = q.groups(None, 10).await.unwrap();
    assert_eq!(groups.len(), 1);
    assert_eq!(
        (groups[0].waiting, groups[0].ready, groups[0].inflight),
        (3, 0, 2)
    );
    // An ACK frees a place: the next of the group goes out.
    assert_eq!(q.ack(&[b"m0"]).await.unwrap(), 1);
    assert_eq!(pop(&mut c, "limit", 5), ["m2"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_group_is_held_while_another_flows_until_resumed() {
    let server = Server::start();
    let mut c = server.conn();
    let con = connect(&server).await;
    let q = Queue::new(con.clone(), "tenants");
    q.config_set(&[("EVENTS", "100")]).await.unwrap();
    q.add(b"x", &in_group("a", "a1")).await.unwrap();
    q.add(b"x", &in_group("b", "b1")).await.unwrap();

    q.pause_group("a", None).await.unwrap();
    assert_eq!(pop_now(&mut c, "tenants", 10), ["b1"]);
    assert!(pop_now(&mut c, "tenants", 10).is_empty());
    let groups = q.groups(None, 10).await.unwrap();
    let a = groups.iter().find(|g| g.name == b"a").unwrap();
    assert_eq!(
        (a.waiting, a.ready, a.paused, a.paused_until),
        (1, 0, true, None)
    );
    // The queue itself is not paused.
    assert!(!q.stats().await.unwrap().paused);

    assert!(q.resume_group("a").await.unwrap());
    assert!(!q.resume_group("a").await.unwrap());
    assert_eq!(pop(&mut c, "tenants", 10), ["a1"]);

    // A pause for a while shows its end; a group's pause and resume are
    // events naming the group.
    q.pause_group(b"b", Some(Duration::from_secs(600)))
        .await
        .unwrap();
    let groups = q.groups(Some("b"), 10).await.unwrap();
    assert_eq!(groups.len(), 1);
    let until = groups[0].paused_until.expect("an end");
    assert!(groups[0].paused);
    assert!(until > now_ms() + 500_000, "{until}");
    assert!(q.resume_group("b").await.unwrap());
    let page = admin::events(&mut con.clone(), b"tenants", None, 100)
        .await
        .unwrap();
    let pauses: Vec<(EventKind, Option<String>)> = page
        .events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Paused | EventKind::Resumed))
        .map(|e| (e.kind.clone(), e.detail_lossy().map(|d| d.into_owned())))
        .collect();
    let (paused, resumed) = (EventKind::Paused, EventKind::Resumed);
    let group = |g: &str| Some(g.to_owned());
    assert_eq!(
        pauses,
        [
            (paused.clone(), group("a")),
            (resumed.clone(), group("a")),
            (paused, group("b")),
            (resumed, group("b")),
        ]
    );

    // What the server refuses for its shape is refused before sending.
    for e in [
        q.pause_group("", None).await.unwrap_err(),
        q.pause_group("a", Some(Duration::ZERO)).await.unwrap_err(),
        q.resume_group(vec![b'g'; 1025]).await.unwrap_err(),
    ] {
        assert!(matches!(e, Error::Config(_)), "{e:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_lists_every_group_over_many_pages() {
    let server = Server::start();
    let mut c = server.conn();
    let q = Queue::new(connect(&server).await, "many");
    let name = |i: usize| format!("g{i:03}");
    // Group i: (i % 3) + 1 messages; GROUPLIMIT 1 holds back all but one.
    for i in 0..250 {
        for m in 0..=(i % 3) {
            q.add(b"x", &in_group(&name(i), &format!("{i}-{m}")))
                .await
                .unwrap();
        }
    }
    // Every 50th paused before any POP: nothing of theirs goes out; two
    // until resumed, three for a while; and one paused group without a
    // message exists too.
    for i in (0..250).step_by(50) {
        let for_ = (i >= 100).then_some(Duration::from_secs(600));
        q.pause_group(name(i), for_).await.unwrap();
    }
    q.pause_group("zz-empty", None).await.unwrap();
    assert_eq!(pop_now(&mut c, "many", 50).len(), 50);

    // One page looks at 7 groups: more pages follow.
    let (cursor, page) = q.groups_page("0", None, 7).await.unwrap();
    assert_ne!(cursor, "0");
    assert!(page.len() <= 7, "{}", page.len());

    let groups = q.groups(None, 7).await.unwrap();
    let names: Vec<String> = groups.iter().map(|g| g.name_lossy().into_owned()).collect();
    let mut want: Vec<String> = (0..250).map(name).collect();
    want.push("zz-empty".into());
    assert_eq!(names, want, "every group once, in name order");
    let mut inflight = 0;
    for (i, g) in groups.iter().take(250).enumerate() {
        let held = (i % 3) as u64;
        if i % 50 == 0 {
            let expect = GroupInfo {
                name: name(i).into_bytes(),
                waiting: held + 1,
                ready: 0,
                inflight: 0,
                paused: true,
                paused_until: g.paused_until,
            };
            assert_eq!(*g, expect);
            assert_eq!(g.paused_until.is_some(), i >= 100, "{g:?}");
        } else {
            assert_eq!(g.waiting, held, "{g:?}");
            assert_eq!(g.ready + g.inflight, 1, "{g:?}");
            assert!(!g.paused && g.paused_until.is_none(), "{g:?}");
            inflight += g.inflight;
        }
    }
    assert_eq!(inflight, 50);
    let empty = &groups[250];
    assert_eq!((empty.waiting, empty.ready, empty.inflight), (0, 0, 0));
    assert!(empty.paused);

    // MATCH keeps to the names that match, over the pages too.
    let matched = q.groups(Some("g1*"), 7).await.unwrap();
    assert_eq!(matched.len(), 100);
    assert!(matched.iter().all(|g| g.name.starts_with(b"g1")));
    assert!(q.groups(Some("nothing-*"), 7).await.unwrap().is_empty());
    assert!(matches!(
        q.groups(None, 0).await.unwrap_err(),
        Error::Config(_)
    ));

    let stats = q.stats().await.unwrap();
    assert_eq!(stats.groups, 251);
    assert_eq!(stats.inflight, 50);
}

fn shard_config(c: &mut redis::Connection, shard: &str, name: &str) -> Value {
    field(&cmd(c, &format!("DQ.CONFIG {shard}")), name)
}

/// The groups named `group` that DQ.GROUPS shows on `shard`, as
/// (name, paused-until).
fn shard_groups(c: &mut redis::Connection, shard: &str, group: &str) -> Vec<(String, Value)> {
    let reply = cmd(c, &format!("DQ.GROUPS {shard} 0 MATCH {group} COUNT 10000"));
    let parts = list(&reply);
    list(&parts[1])
        .iter()
        .map(|g| {
            let f = list(g);
            (text(&f[0]), f[4].clone())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_queue_keeps_each_group_on_its_shard() {
    let server = Server::start();
    let mut c = server.conn();
    let q = ShardedQueue::new(connect(&server).await, "hooks", 4).unwrap();
    let shards = q.shards().names().to_vec();

    // Group settings reach every shard unsplit; RATE beside them is split.
    q.config_set(&[
        ("GROUPLIMIT", "2"),
        ("GROUPRATE", "10/1s"),
        ("ORDER", "FAIR"),
        ("RATE", "100/1s"),
    ])
    .await
    .unwrap();
    for shard in &shards {
        assert_eq!(int(&shard_config(&mut c, shard, "group-limit")), 2);
        assert_eq!(text(&shard_config(&mut c, shard, "group-rate")), "10/1s");
        assert_eq!(text(&shard_config(&mut c, shard, "order")), "fair");
        assert_eq!(text(&shard_config(&mut c, shard, "rate")), "25/1s");
    }
    let config = q.config().await.unwrap();
    assert_eq!(config.group_limit, 2);
    assert_eq!(config.group_rate.as_deref(), Some("10/1s"));
    assert_eq!(config.order(), Some(Order::Fair));

    // 40 groups of one message, and "big" of three: GROUPLIMIT 2 holds
    // exactly, since all of big is on one shard.
    for i in 0..40 {
        let g = format!("t{i:02}");
        q.add(b"x", &in_group(&g, &format!("{g}-1"))).await.unwrap();
    }
    for m in 0..3 {
        q.add(b"x", &in_group("big", &format!("big-{m}")))
            .await
            .unwrap();
    }
    let groups = q.groups(None, 7).await.unwrap();
    let names: Vec<String> = groups.iter().map(|g| g.name_lossy().into_owned()).collect();
    let mut want: Vec<String> = (0..40).map(|i| format!("t{i:02}")).collect();
    want.insert(0, "big".into());
    assert_eq!(names, want, "every group of every shard once, by name");
    let big = &groups[0];
    assert_eq!((big.waiting, big.ready + big.inflight), (1, 2));
    let used: HashSet<&str> = want.iter().map(|g| q.group_shard(g.as_bytes())).collect();
    assert!(used.len() > 1, "the groups spread over shards");
    assert_eq!(q.stats().await.unwrap().groups, 41);

    // A group's pause and resume go to its shard only.
    let home = q.group_shard(b"big").to_owned();
    q.pause_group("big", None).await.unwrap();
    for shard in &shards {
        let seen = shard_groups(&mut c, shard, "big");
        if *shard == home {
            assert_eq!(seen, [("big".to_string(), Value::Int(-1))]);
        } else {
            assert!(seen.is_empty(), "{shard}: {seen:?}");
        }
    }
    let listed = q.groups(Some("big"), 10).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert!(listed[0].paused && listed[0].paused_until.is_none());
    assert!(!q.stats().await.unwrap().paused, "no shard is paused");
    assert!(q.resume_group("big").await.unwrap());
    assert!(!q.resume_group("big").await.unwrap());
    assert_eq!(
        shard_groups(&mut c, &home, "big"),
        [("big".to_string(), Value::Nil)]
    );
}
