//! What the endpoint answered, kept as the message's result: with RETAIN on
//! the queue, a delivered call ends with DQ.DONE and `HTTP <status>`, a
//! newline and the body's first 1 KiB, which DQ.WAIT and DQ.GET give back;
//! without RETAIN the relay sends the plain DQ.ACK it always sent. The real
//! relay, a real server with the module and the test kit's Receiver.

mod support;

use dq_testkit::*;
use support::RelayProcess;

/// A relay on the envelope queue `hooks` and the fixed-URL queue `orders`
/// (to `orders_url`), allowed to call the receiver on loopback.
fn relay(server: &Server, orders_url: &str) -> RelayProcess {
    let args: Vec<String> = [
        "--redis",
        &server.url(),
        "--log-level",
        "debug",
        "--block",
        "1s",
        "--queue",
        "hooks",
        "--queue",
        &format!("orders={orders_url}"),
        "--allow-host",
        "127.0.0.1",
        "--allow-net",
        "127.0.0.0/8",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    RelayProcess::start(&args)
}

fn add_hook(con: &mut redis::Connection, id: &str, url: &str) {
    let envelope = serde_json::json!({ "url": url, "body": { "order": 42 } }).to_string();
    run(
        con,
        &[
            b"DQ.ADD",
            b"hooks",
            envelope.as_bytes(),
            b"ID",
            id.as_bytes(),
        ],
    )
    .unwrap_or_else(|e| panic!("DQ.ADD hooks {id}: {e}"));
}

/// DQ.WAIT for the message's outcome, up to a minute: `(state, value)`.
fn outcome(con: &mut redis::Connection, queue: &str, id: &str) -> (String, Option<Vec<u8>>) {
    let reply = run(
        con,
        &[
            b"DQ.WAIT",
            queue.as_bytes(),
            id.as_bytes(),
            b"BLOCK",
            b"60000",
        ],
    )
    .unwrap_or_else(|e| panic!("DQ.WAIT {queue} {id}: {e}"));
    let items = list(&reply);
    assert_eq!(
        items.len(),
        2,
        "{id}: no outcome within a minute: {reply:?}"
    );
    let value = match &items[1] {
        Value::Nil => None,
        Value::BulkString(b) => Some(b.clone()),
        other => panic!("{other:?}"),
    };
    (text(&items[0]), value)
}

fn calls(con: &mut redis::Connection, command: &str) -> u64 {
    let info = text(&cmd(con, "INFO commandstats"));
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{command}:calls=")))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[test]
fn with_retain_the_answer_is_the_result_that_wait_and_get_give_back() {
    let server = Server::start();
    let mut con = server.conn();
    cmd(&mut con, "DQ.CONFIG hooks SET RETAIN 1h");
    cmd(&mut con, "DQ.CONFIG orders SET RETAIN 10m");
    let long = "x".repeat(3000);
    let receiver = Receiver::start(move |r| match r.path.as_str() {
        "/created" => Reply::status(201).body("{\"received\":42}"),
        "/empty" => Reply::status(204),
        "/long" => Reply::status(200).body(&long),
        "/text" => Reply::status(200).body(&format!("{}é", "y".repeat(1023))),
        "/gone" => Reply::status(410).body("no such hook"),
        _ => Reply::status(200).body("fixed"),
    });
    let _relay = relay(&server, &receiver.url("/fixed"));

    add_hook(&mut con, "created", &receiver.url("/created"));
    assert_eq!(
        outcome(&mut con, "hooks", "created"),
        ("done".into(), Some(b"HTTP 201\n{\"received\":42}".to_vec()))
    );
    let got = dq_get(&mut con, "hooks", "created").expect("kept as done");
    assert_eq!(text(&got["state"]), "done");
    assert_eq!(text(&got["result"]), "HTTP 201\n{\"received\":42}");

    add_hook(&mut con, "empty", &receiver.url("/empty"));
    assert_eq!(
        outcome(&mut con, "hooks", "empty"),
        ("done".into(), Some(b"HTTP 204".to_vec()))
    );
    // The body is kept up to 1 KiB...
    add_hook(&mut con, "long", &receiver.url("/long"));
    let (state, value) = outcome(&mut con, "hooks", "long");
    assert_eq!(state, "done");
    let value = value.unwrap();
    assert_eq!(value.len(), "HTTP 200\n".len() + 1024);
    assert!(value.ends_with(&[b'x'; 1024]));
    // ...cut before a character the bound would split.
    add_hook(&mut con, "text", &receiver.url("/text"));
    let (_, value) = outcome(&mut con, "hooks", "text");
    assert_eq!(
        value.unwrap(),
        format!("HTTP 200\n{}", "y".repeat(1023)).as_bytes()
    );

    // A fixed-URL queue's too.
    run(
        &mut con,
        &[b"DQ.ADD", b"orders", b"{\"order\":7}", b"ID", b"o7"],
    )
    .unwrap();
    assert_eq!(
        outcome(&mut con, "orders", "o7"),
        ("done".into(), Some(b"HTTP 200\nfixed".to_vec()))
    );
    // A refusal is a dead letter, its answer the last error, as before.
    add_hook(&mut con, "gone", &receiver.url("/gone"));
    assert_eq!(
        outcome(&mut con, "hooks", "gone"),
        ("dead".into(), Some(b"HTTP 410: no such hook".to_vec()))
    );
    assert_eq!(
        calls(&mut con, "dq.ack"),
        0,
        "every delivered call by DQ.DONE"
    );
    assert!(calls(&mut con, "dq.done") >= 1);
    assert_eq!(int(&field(&cmd(&mut con, "DQ.STATS hooks"), "done")), 4);
}

#[test]
fn without_retain_a_delivered_call_is_a_plain_ack_and_a_retain_set_later_applies() {
    let server = Server::start();
    let mut con = server.conn();
    let receiver = Receiver::start(|_| Reply::status(200).body("thanks"));
    let relay = relay(&server, &receiver.url("/fixed"));

    add_hook(&mut con, "first", &receiver.url("/hook"));
    assert_eq!(outcome(&mut con, "hooks", "first"), ("gone".into(), None));
    assert_eq!(dq_get(&mut con, "hooks", "first"), None);
    assert!(calls(&mut con, "dq.ack") >= 1);
    assert_eq!(calls(&mut con, "dq.done"), 0, "no DQ.DONE without RETAIN");

    // The relay reads the queue's RETAIN again every few seconds: the
    // calls delivered after it sees it keep their answers.
    cmd(&mut con, "DQ.CONFIG hooks SET RETAIN 1h");
    let (mut n, mut last) = (0, None);
    let kept = wait_until(LONG, || {
        n += 1;
        let id = format!("later-{n}");
        add_hook(&mut con, &id, &receiver.url("/hook"));
        last = Some(outcome(&mut con, "hooks", &id));
        // Until the relay has read it, a call ends by ACK: done (the
        // queue's RETAIN keeps it) without a result.
        last.as_ref()
            .is_some_and(|(state, value)| state == "done" && value.is_some())
    });
    assert!(kept, "no call's answer kept after RETAIN was set: {last:?}");
    assert_eq!(last.unwrap().1, Some(b"HTTP 200\nthanks".to_vec()));
    relay.wait_for_event("results of delivered calls are kept", LONG);
}
