//! dq_client::admin against a real server with the module: every call's
//! reply, under RESP2 and RESP3.

use dq_client::admin;
use dq_client::State;
use redis::aio::MultiplexedConnection;

async fn connect(url: &str, resp3: bool) -> MultiplexedConnection {
    let url = if resp3 {
        format!(
            "{url}{}protocol=resp3",
            if url.contains('?') { "&" } else { "?" }
        )
    } else {
        url.to_string()
    };
    let client = redis::Client::open(url).expect("a valid URL");
    client
        .get_multiplexed_async_connection()
        .await
        .expect("connect")
}

async fn cmd(con: &mut MultiplexedConnection, args: &[&[u8]]) -> redis::Value {
    let mut c = redis::cmd(std::str::from_utf8(args[0]).unwrap());
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query_async(con).await.expect("command")
}

/// Each test its own queue names (the server may be shared).
fn name(test: &str, resp3: bool) -> Vec<u8> {
    format!("admin-{test}-{}-\u{e9}\n", if resp3 { 3 } else { 2 }).into_bytes()
}

async fn every_call(resp3: bool) {
    let server = dq_testkit::Server::start();
    let mut con = connect(&server.url(), resp3).await;
    let q = name("calls", resp3);
    let _ = admin::purge(&mut con, &q, None).await.unwrap();
    let before = admin::stats(&mut con, &q).await.unwrap();
    // The protocol really is the one asked for: records are maps in RESP3.
    let raw = cmd(&mut con, &[b"DQ.STATS", &q]).await;
    assert_eq!(matches!(raw, redis::Value::Map(_)), resp3, "{raw:?}");

    cmd(&mut con, &[b"DQ.ADD", &q, b"{\"a\":1}", b"ID", b"r1"]).await;
    cmd(
        &mut con,
        &[b"DQ.ADD", &q, b"later", b"ID", b"d1", b"DELAY", b"600000"],
    )
    .await;
    cmd(
        &mut con,
        &[
            b"DQ.ADD",
            &q,
            b"\x00\xff",
            b"ID",
            b"x\xff",
            b"PRIORITY",
            b"9",
            b"GROUP",
            b"g",
        ],
    )
    .await;
    cmd(&mut con, &[b"DQ.POP", &q]).await;
    cmd(
        &mut con,
        &[b"DQ.NACK", &q, b"x\xff", b"DEAD", b"ERROR", b"boom <b>"],
    )
    .await;

    assert!(admin::queues(&mut con).await.unwrap().contains(&q));

    // Every queue with its stats in one call: the same record as DQ.STATS.
    let all = admin::queues_with_stats(&mut con, None).await.unwrap();
    let names: Vec<&Vec<u8>> = all.iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        admin::queues(&mut con)
            .await
            .unwrap()
            .iter()
            .collect::<Vec<_>>()
    );
    // The lag grows between the two calls: compared apart.
    let without_age = |s: &dq_client::Stats| dq_client::Stats {
        oldest_ready_age_ms: s.oldest_ready_age_ms.map(|_| 0),
        ..s.clone()
    };
    let listed = all.iter().find(|(n, _)| *n == q).map(|(_, s)| s.clone());
    let alone = admin::stats(&mut con, &q).await.unwrap();
    assert_eq!(listed.as_ref().map(without_age), Some(without_age(&alone)));
    let listed_age = listed.and_then(|s| s.oldest_ready_age_ms).unwrap_or(0);
    assert!(listed_age <= alone.oldest_ready_age_ms.unwrap_or(0));
    // MATCH: the exact name (its `\n` and `é` included), a glob, nothing.
    let exact = admin::glob_escape(&q);
    let one = admin::queues_with_stats(&mut con, Some(&exact))
        .await
        .unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].0, q);
    assert_eq!((one[0].1.ready, one[0].1.dead), (1, 1));
    assert_eq!(
        admin::queues_matching(&mut con, &exact).await.unwrap(),
        vec![q.clone()]
    );
    let glob = format!("admin-calls-{}-*", if resp3 { 3 } else { 2 });
    let globbed = admin::queues_with_stats(&mut con, Some(glob.as_bytes()))
        .await
        .unwrap();
    assert!(globbed.iter().any(|(n, _)| *n == q), "{globbed:?}");
    assert!(admin::queues_with_stats(&mut con, Some(b"no-such-queue-*"))
        .await
        .unwrap()
        .is_empty());
    // The reply really is RESP3's map of maps, or RESP2's flat array.
    let raw = cmd(&mut con, &[b"DQ.QUEUES", b"MATCH", &exact, b"WITHSTATS"]).await;
    match raw {
        redis::Value::Map(ref m) => {
            assert!(resp3);
            assert!(matches!(m[0].1, redis::Value::Map(_)), "{raw:?}");
        }
        redis::Value::Array(ref a) => {
            assert!(!resp3);
            assert_eq!(a.len(), 2, "{raw:?}");
        }
        ref other => panic!("{other:?}"),
    }

    let s = admin::stats(&mut con, &q).await.unwrap();
    assert_eq!((s.delayed, s.ready, s.inflight, s.dead), (1, 1, 0, 1));
    assert_eq!(s.added - before.added, 3);
    assert_eq!(s.dead_lettered - before.dead_lettered, 1);
    assert!(s.oldest_ready_age_ms.is_some());
    assert!(s.next_due_at.is_some());

    let m = admin::get(&mut con, &q, b"x\xff").await.unwrap().unwrap();
    assert_eq!(m.id, b"x\xff");
    assert_eq!(m.state(), Some(State::Dead));
    assert_eq!(m.payload, b"\x00\xff");
    assert_eq!(m.priority, 9);
    assert_eq!(m.attempt, 1);
    assert_eq!(m.dead_reason.as_deref(), Some("permanent"));
    assert!(m.died_at.is_some());
    assert_eq!(m.group.as_deref(), Some(&b"g"[..]));
    assert_eq!(m.last_error.as_deref(), Some(&b"boom <b>"[..]));
    assert_eq!(m.lease_deadline, None);
    assert_eq!(admin::get(&mut con, &q, b"nope").await.unwrap(), None);

    let dead = admin::peek(&mut con, &q, State::Dead, 10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].last_error.as_deref(), Some(&b"boom <b>"[..]));
    let delayed = admin::peek(&mut con, &q, State::Delayed, 10).await.unwrap();
    assert_eq!(delayed[0].id, b"d1");

    // SCAN pages every message exactly once.
    let mut cursor = 0;
    let mut ids = Vec::new();
    loop {
        let (next, entries) = admin::scan_page(&mut con, &q, None, cursor, 1)
            .await
            .unwrap();
        ids.extend(entries.into_iter().map(|e| e.id));
        if next == 0 {
            break;
        }
        cursor = next;
    }
    ids.sort();
    assert_eq!(ids, vec![b"d1".to_vec(), b"r1".to_vec(), b"x\xff".to_vec()]);
    let (_, ready) = admin::scan_page(&mut con, &q, Some(State::Ready), 0, 100)
        .await
        .unwrap();
    assert_eq!(ready.len(), 1);
    assert!(admin::scan_page(&mut con, &q, None, u64::MAX, 10)
        .await
        .is_err());

    let c = admin::config(&mut con, &q).await.unwrap();
    assert_eq!(c.lease_ms_from, "module");
    assert!(c.max_attempts > 0);
    cmd(&mut con, &[b"DQ.CONFIG", &q, b"SET", b"MAXATTEMPTS", b"3"]).await;
    let c = admin::config(&mut con, &q).await.unwrap();
    assert_eq!((c.max_attempts, c.max_attempts_from.as_str()), (3, "queue"));

    // Actions answer with counts.
    assert_eq!(admin::redrive_ids(&mut con, &q, &[b"r1"]).await.unwrap(), 0);
    assert_eq!(
        admin::redrive_ids(&mut con, &q, &[b"x\xff"]).await.unwrap(),
        1
    );
    assert_eq!(
        admin::get(&mut con, &q, b"x\xff")
            .await
            .unwrap()
            .unwrap()
            .state,
        "ready"
    );
    assert_eq!(admin::redrive_all(&mut con, &q).await.unwrap(), 0);
    assert_eq!(
        admin::cancel(&mut con, &q, &[b"d1", b"nope"])
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        admin::purge(&mut con, &q, Some(State::Ready))
            .await
            .unwrap(),
        2
    );
    assert_eq!(admin::stats(&mut con, &q).await.unwrap().total(), 0);

    let info = admin::info_dq(&mut con).await.unwrap();
    assert!(info.int("timer_ticks").is_some());
    assert!(info.int("lateness_ms").is_some());
}

#[tokio::test]
async fn every_call_resp2() {
    every_call(false).await;
}

#[tokio::test]
async fn every_call_resp3() {
    every_call(true).await;
}

/// What a dashboard reads of every queue in one call: the flow control
/// and schedule count are in DQ.QUEUES WITHSTATS' record, as in DQ.STATS';
/// and the calls that change them.
async fn flow_control_and_schedules(resp3: bool) {
    let server = dq_testkit::Server::start();
    let mut con = connect(&server.url(), resp3).await;
    let q = name("flow", resp3);
    let exact = admin::glob_escape(&q);
    let spec = dq_client::Schedule::every(std::time::Duration::from_secs(3600));
    admin::config_set(&mut con, &q, &[("RATE", "100/1s"), ("MAXINFLIGHT", "20")])
        .await
        .unwrap();
    assert!(admin::schedule(&mut con, &q, b"tick\xff", b"p", &spec)
        .await
        .unwrap()
        .is_some());
    let ten_minutes = std::time::Duration::from_secs(600);
    admin::pause(&mut con, &q, Some(ten_minutes)).await.unwrap();

    let listed = admin::queues_with_stats(&mut con, Some(&exact))
        .await
        .unwrap();
    let [(name, s)] = listed.as_slice() else {
        panic!("{listed:?}")
    };
    assert_eq!(*name, q);
    assert!(s.paused);
    assert!(s.paused_until.is_some(), "{s:?}");
    assert_eq!(s.rate.as_deref(), Some("100/1s"));
    let rate = s.rate_limit().expect("a RATE");
    assert_eq!((rate.deliveries, rate.window.as_millis()), (100, 1000));
    assert_eq!((s.max_inflight, s.schedules), (Some(20), 1));
    // The schedule's run is a ready message: its age grows between calls.
    let alone = admin::stats(&mut con, &q).await.unwrap();
    let aged = |s: &dq_client::Stats| dq_client::Stats {
        oldest_ready_age_ms: None,
        ..s.clone()
    };
    assert_eq!(aged(s), aged(&alone));

    let schedules = admin::schedules(&mut con, &q).await.unwrap();
    assert_eq!(schedules.len(), 1);
    assert_eq!(schedules[0].name, b"tick\xff");
    assert_eq!(schedules[0].spec, "every 1h");
    assert!(admin::resume(&mut con, &q).await.unwrap(), "it was paused");
    assert!(!admin::resume(&mut con, &q).await.unwrap());
    assert!(!admin::stats(&mut con, &q).await.unwrap().paused);
    assert_eq!(
        admin::unschedule(&mut con, &q, &[b"tick\xff", b"tick\xff", b"none"])
            .await
            .unwrap(),
        1
    );
    assert_eq!(admin::unschedule(&mut con, &q, &[]).await.unwrap(), 0);
    assert_eq!(admin::stats(&mut con, &q).await.unwrap().schedules, 0);
    // A pause the server refuses is its error, and changes nothing.
    let e = admin::pause(&mut con, &q, Some(std::time::Duration::MAX))
        .await
        .unwrap_err();
    assert!(matches!(e, dq_client::Error::Redis(_)), "{e:?}");
    assert!(!admin::stats(&mut con, &q).await.unwrap().paused);
}

#[tokio::test]
async fn flow_control_and_schedules_resp2() {
    flow_control_and_schedules(false).await;
}

#[tokio::test]
async fn flow_control_and_schedules_resp3() {
    flow_control_and_schedules(true).await;
}

#[tokio::test]
async fn redrive_all_moves_more_than_one_batch() {
    let server = dq_testkit::Server::start();
    let mut con = connect(&server.url(), false).await;
    let q = name("redrive-all", false);
    let _ = admin::purge(&mut con, &q, None).await.unwrap();
    for i in 0..25 {
        let id = format!("m{i}");
        cmd(&mut con, &[b"DQ.ADD", &q, b"p", b"ID", id.as_bytes()]).await;
    }
    cmd(&mut con, &[b"DQ.POP", &q, b"COUNT", b"25"]).await;
    for i in 0..25 {
        let id = format!("m{i}");
        cmd(&mut con, &[b"DQ.NACK", &q, id.as_bytes(), b"DEAD"]).await;
    }
    assert_eq!(admin::redrive_count(&mut con, &q, 5).await.unwrap(), 5);
    assert_eq!(admin::redrive_all(&mut con, &q).await.unwrap(), 20);
    assert_eq!(admin::stats(&mut con, &q).await.unwrap().ready, 25);
    let _ = admin::purge(&mut con, &q, None).await.unwrap();
}

/// A refusal is the server's error, typed, through any connection — also
/// one (redis's ConnectionManager, under `Queue`) that hands it back as a
/// value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_typed_errors_on_every_connection() {
    let server = dq_testkit::Server::start();
    let mut con = connect(&server.url(), false).await;
    cmd(&mut con, &[b"SET", b"plain", b"x"]).await;
    let e = admin::stats(&mut con, b"plain").await.unwrap_err();
    assert!(matches!(e, dq_client::Error::WrongType(_)), "{e:?}");

    let dq = dq_client::Server::single(server.url()).unwrap();
    let shared = dq.connect(std::time::Duration::from_secs(5)).await.unwrap();
    let e = dq_client::Queue::new(shared.clone(), "plain")
        .stats()
        .await
        .unwrap_err();
    assert!(matches!(e, dq_client::Error::WrongType(_)), "{e:?}");
    let e = dq_client::Queue::new(shared, "q")
        .config_set(&[("LEASE", "soon")])
        .await
        .unwrap_err();
    assert!(
        matches!(&e, dq_client::Error::Redis(r) if r.to_string().contains("LEASE")),
        "{e:?}"
    );
}
