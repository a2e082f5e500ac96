//! The relay end to end: the real binary against a real redis-server with
//! the module and a real HTTP receiver on loopback, with scripted answers.
//! States, attempts, delays and reasons are read back with DQ.GET.

mod support;

use std::io::{Read, Write};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dq_testkit::*;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use support::RelayProcess;

const SECRET: &str = "whsec-test-secret";

/// The receiver's check of X-DQ-Signature, written from docs/relay.md's
/// definition: t=<unix s>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>.
fn verify(secret: &str, header: &str, body: &[u8]) -> bool {
    let pairs: Vec<(&str, &str)> = header
        .split(',')
        .filter_map(|p| p.split_once('='))
        .collect();
    let Some(t) = pairs.iter().find(|(k, _)| *k == "t").map(|(_, v)| *v) else {
        return false;
    };
    let Ok(t_secs) = t.parse::<u64>() else {
        return false;
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    if now.abs_diff(t_secs) > 300 {
        return false;
    }
    pairs.iter().filter(|(k, _)| *k == "v1").any(|(_, v)| {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(t.as_bytes());
        mac.update(b".");
        mac.update(body);
        let expected: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        // A test: constant time does not matter here.
        expected == *v
    })
}

fn args(server: &Server, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "--redis",
        &server.url(),
        "--log-level",
        "debug",
        "--block",
        "1s",
        "--secret",
        SECRET,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// The receivers are on loopback, which the relay refuses to connect to
/// unless it is opened, as a local setup would open it. (tests/egress.rs
/// starts relays without it.)
const OPEN_LOOPBACK: [&str; 2] = ["--allow-net", "127.0.0.0/8"];

/// An envelope-queue relay on `hooks` that may call any port of 127.0.0.1.
fn relay(server: &Server, extra: &[&str]) -> RelayProcess {
    let mut all = vec!["--queue", "hooks", "--allow-host", "127.0.0.1"];
    all.extend_from_slice(&OPEN_LOOPBACK);
    all.extend_from_slice(extra);
    RelayProcess::start(&args(server, &all))
}

fn add(con: &mut redis::Connection, queue: &str, id: &str, payload: &str, opts: &[&str]) {
    let mut line: Vec<&[u8]> = vec![
        b"DQ.ADD",
        queue.as_bytes(),
        payload.as_bytes(),
        b"ID",
        id.as_bytes(),
    ];
    line.extend(opts.iter().map(|o| o.as_bytes()));
    run(con, &line).unwrap_or_else(|e| panic!("DQ.ADD {queue} {id}: {e}"));
}

fn envelope(url: &str) -> String {
    serde_json::json!({ "url": url, "body": { "event": "order.paid", "order": 42 } }).to_string()
}

/// A webhook to `url` on the relay's queue, `hooks`, as message `id`.
fn add_hook(con: &mut redis::Connection, id: &str, url: &str, opts: &[&str]) {
    add(con, "hooks", id, &envelope(url), opts);
}

fn wait_state(con: &mut redis::Connection, id: &str, state: &str) {
    let mut last = String::new();
    let ok = wait_until(LONG, || {
        last = dq_get(con, "hooks", id).map_or("(gone)".into(), |r| text(&r["state"]));
        last == state
    });
    assert!(ok, "{id} is {last}, not {state}");
}

fn wait_gone(con: &mut redis::Connection, queue: &str, id: &str) {
    assert!(
        wait_until(LONG, || dq_get(con, queue, id).is_none()),
        "{id} was not acknowledged: {:?}",
        dq_get(con, queue, id)
    );
}

fn int_field(con: &mut redis::Connection, id: &str, name: &str) -> u64 {
    dq_get_field(con, "hooks", id, name)
        .parse()
        .unwrap_or_else(|_| panic!("{name} is not an integer"))
}

#[test]
fn a_2xx_is_acknowledged_and_the_receiver_verifies_the_signature() {
    let server = Server::start();
    let receiver = Receiver::start(|_| Reply::status(204));
    let _relay = relay(&server, &[]);
    let mut con = server.conn();
    let payload = serde_json::json!({
        "url": receiver.url("/orders?source=dq"),
        "method": "put",
        "headers": { "Authorization": "Bearer abc", "X-Trace": "t-1" },
        "body": { "order": 42 },
    })
    .to_string();
    add(&mut con, "hooks", "order-42", &payload, &[]);
    wait_gone(&mut con, "hooks", "order-42");

    let requests = receiver.requests();
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    assert_eq!(r.method, "PUT");
    assert_eq!(r.path, "/orders?source=dq");
    assert_eq!(r.body, br#"{"order":42}"#);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.header("authorization"), Some("Bearer abc"));
    assert_eq!(r.header("x-trace"), Some("t-1"));
    assert_eq!(r.header("x-dq-queue"), Some("hooks"));
    assert_eq!(r.header("x-dq-id"), Some("order-42"));
    assert_eq!(r.header("x-dq-attempt"), Some("1"));
    let signature = r.header("x-dq-signature").expect("a signature header");
    assert!(verify(SECRET, signature, &r.body), "{signature}");
    assert!(!verify("another secret", signature, &r.body));
    assert!(!verify(SECRET, signature, b"{\"order\":43}"));
}

#[test]
fn a_500_is_retried_by_the_backoff_and_dies_with_its_reason_when_attempts_run_out() {
    let server = Server::start();
    let receiver = Receiver::start(|_| Reply::status(500).body("boom\nat line 3"));
    let _relay = relay(&server, &[]);
    let mut con = server.conn();
    // Three quick attempts, then dead.
    add_hook(
        &mut con,
        "quick",
        &receiver.url("/quick"),
        &["MAXATTEMPTS", "3", "BACKOFF", "fixed:50ms"],
    );
    // One attempt, then a minute's wait by the backoff.
    add_hook(
        &mut con,
        "slow",
        &receiver.url("/slow"),
        &["MAXATTEMPTS", "3", "BACKOFF", "fixed:60s"],
    );

    wait_state(&mut con, "quick", "dead");
    assert_eq!(
        dq_get_field(&mut con, "hooks", "quick", "dead-reason"),
        "nack"
    );
    assert_eq!(dq_get_field(&mut con, "hooks", "quick", "attempt"), "3");
    assert_eq!(
        dq_get_field(&mut con, "hooks", "quick", "last-error"),
        "HTTP 500: boom at line 3"
    );
    let attempts: Vec<String> = receiver
        .requests()
        .iter()
        .filter(|r| r.path == "/quick")
        .map(|r| r.header("x-dq-attempt").unwrap_or("").to_string())
        .collect();
    assert_eq!(attempts, ["1", "2", "3"]);

    let mut arrived = 0;
    assert!(wait_until(LONG, || {
        arrived = receiver
            .requests()
            .iter()
            .find(|r| r.path == "/slow")
            .map_or(0, |r| r.at_ms);
        arrived > 0 && dq_get_field(&mut con, "hooks", "slow", "state") == "delayed"
    }));
    let due = int_field(&mut con, "slow", "due-at");
    // NACKed after the call arrived and before now: due a minute after.
    assert!(
        due >= arrived + 60_000 && due <= now_ms() + 60_000,
        "due-at {due}"
    );
    assert_eq!(dq_get_field(&mut con, "hooks", "slow", "attempt"), "1");
    assert_eq!(
        dq_get_field(&mut con, "hooks", "slow", "attempts-left"),
        "2"
    );
    assert_eq!(
        dq_get_field(&mut con, "hooks", "slow", "last-error"),
        "HTTP 500: boom at line 3"
    );
}

#[test]
fn retry_after_sets_the_delay_in_seconds_or_as_a_date() {
    let server = Server::start();
    let date = SystemTime::now() + Duration::from_secs(300);
    let date_ms = date.duration_since(UNIX_EPOCH).unwrap().as_secs() * 1000;
    let http_date = httpdate::fmt_http_date(date);
    let receiver = Receiver::start(move |r| match r.path.as_str() {
        "/seconds" => Reply::status(429)
            .header("Retry-After", "120")
            .body("slow down"),
        _ => Reply::status(503).header("Retry-After", &http_date),
    });
    let _relay = relay(&server, &[]);
    let mut con = server.conn();
    for (id, path) in [("secs", "/seconds"), ("date", "/date")] {
        add_hook(&mut con, id, &receiver.url(path), &["BACKOFF", "fixed:1s"]);
    }
    for id in ["secs", "date"] {
        wait_state(&mut con, id, "delayed");
        assert_eq!(dq_get_field(&mut con, "hooks", id, "attempt"), "1");
    }
    let arrived = receiver
        .requests()
        .iter()
        .find(|r| r.path == "/seconds")
        .map(|r| r.at_ms)
        .expect("the call arrived");
    let due = int_field(&mut con, "secs", "due-at");
    assert!(
        due >= arrived + 120_000 && due <= now_ms() + 120_000,
        "due-at {due}"
    );
    assert_eq!(
        dq_get_field(&mut con, "hooks", "secs", "last-error"),
        "HTTP 429: slow down"
    );

    // Due at the date the receiver named (the date has whole seconds, the
    // delay whole milliseconds), later by no more than the time between the
    // call's arrival and now: the relay turned the date into a delay after
    // the one, the server into a due time before the other.
    let arrived = receiver
        .requests()
        .iter()
        .find(|r| r.path == "/date")
        .map(|r| r.at_ms)
        .expect("the call arrived");
    let due = int_field(&mut con, "date", "due-at");
    let since = now_ms() - arrived;
    assert!(
        due + 1 >= date_ms && due <= date_ms + since,
        "due-at {due}, date {date_ms}, the call arrived {since} ms ago"
    );
    assert_eq!(
        dq_get_field(&mut con, "hooks", "date", "last-error"),
        "HTTP 503"
    );
}

#[test]
fn a_410_is_dead_at_once() {
    let server = Server::start();
    let receiver = Receiver::start(|_| Reply::status(410).body("this hook was removed"));
    let _relay = relay(&server, &[]);
    let mut con = server.conn();
    add_hook(&mut con, "gone", &receiver.url("/h"), &["MAXATTEMPTS", "8"]);
    wait_state(&mut con, "gone", "dead");
    assert_eq!(
        dq_get_field(&mut con, "hooks", "gone", "dead-reason"),
        "permanent"
    );
    assert_eq!(dq_get_field(&mut con, "hooks", "gone", "attempt"), "1");
    assert_eq!(
        dq_get_field(&mut con, "hooks", "gone", "last-error"),
        "HTTP 410: this hook was removed"
    );
    // The dead letters show it too.
    let dead = cmd(&mut con, "DQ.PEEK hooks DEAD");
    let Value::Array(entries) = dead else {
        panic!("PEEK replied {dead:?}")
    };
    let Value::Array(entry) = &entries[0] else {
        panic!("an entry: {entries:?}")
    };
    assert_eq!(text(&entry[0]), "gone");
    assert_eq!(text(&entry[4]), "HTTP 410: this hook was removed");
    assert_eq!(receiver.count(), 1);
}

#[test]
fn a_call_past_its_timeout_is_retried() {
    let server = Server::start();
    let receiver = Receiver::start(|_| Reply::status(200).after(Duration::from_secs(30)));
    let _relay = relay(&server, &[]);
    let mut con = server.conn();
    let payload = serde_json::json!({ "url": receiver.url("/hang"), "timeout": 300 }).to_string();
    add(
        &mut con,
        "hooks",
        "hang",
        &payload,
        &["BACKOFF", "fixed:60s"],
    );
    wait_state(&mut con, "hang", "delayed");
    assert_eq!(dq_get_field(&mut con, "hooks", "hang", "attempt"), "1");
    assert_eq!(
        dq_get_field(&mut con, "hooks", "hang", "last-error"),
        "timeout after 300ms"
    );
    assert_eq!(receiver.count(), 1);
}

#[test]
fn a_refused_connection_is_retried() {
    let server = Server::start();
    let _relay = relay(&server, &[]);
    let mut con = server.conn();
    let url = format!("http://127.0.0.1:{}/down", free_port());
    add_hook(&mut con, "down", &url, &["BACKOFF", "fixed:60s"]);
    wait_state(&mut con, "down", "delayed");
    let error = dq_get_field(&mut con, "hooks", "down", "last-error");
    assert!(error.starts_with("connection failed: "), "{error}");
    assert!(error.to_lowercase().contains("refused"), "{error}");
    assert_eq!(
        dq_get_field(&mut con, "hooks", "down", "attempts-left"),
        "15"
    );
}

#[test]
fn a_url_outside_the_allow_list_is_dead_and_never_called() {
    let server = Server::start();
    let receiver = Receiver::start(|_| Reply::status(200));
    let allowed = receiver.url("/allowed/");
    let relay = RelayProcess::start(&args(
        &server,
        &[
            "--queue",
            "hooks",
            "--allow",
            &allowed,
            OPEN_LOOPBACK[0],
            OPEN_LOOPBACK[1],
        ],
    ));
    let mut con = server.conn();
    let port = receiver.port;
    let cases = [
        (
            "query",
            format!("http://127.0.0.1:{port}/other?token=SEKRIT-1"),
            format!("http://127.0.0.1:{port}/other"),
        ),
        (
            "dots",
            format!("http://user:SEKRIT-2@127.0.0.1:{port}/allowed/../admin"),
            format!("http://127.0.0.1:{port}/admin"),
        ),
        (
            "host",
            format!("http://localhost:{port}/allowed/x"),
            format!("http://localhost:{port}/allowed/x"),
        ),
        (
            "port",
            format!("http://127.0.0.1:{}/allowed/x", free_port()),
            String::new(),
        ),
    ];
    for (id, url, _) in &cases {
        add_hook(&mut con, id, url, &[]);
    }
    add_hook(&mut con, "ok", &receiver.url("/allowed/ok"), &[]);
    wait_gone(&mut con, "hooks", "ok");
    for (id, _, shown) in &cases {
        wait_state(&mut con, id, "dead");
        assert_eq!(
            dq_get_field(&mut con, "hooks", id, "dead-reason"),
            "permanent"
        );
        let error = dq_get_field(&mut con, "hooks", id, "last-error");
        assert!(error.starts_with("url not allowed: "), "{error}");
        if !shown.is_empty() {
            assert_eq!(error, format!("url not allowed: {shown}"));
        }
    }
    let paths: Vec<String> = receiver.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(paths, ["/allowed/ok"]);
    assert!(!relay.log().contains("SEKRIT"), "{}", relay.log());
}

#[test]
fn a_malformed_envelope_is_dead_with_why() {
    let server = Server::start();
    let _relay = relay(&server, &[]);
    let mut con = server.conn();
    add(&mut con, "hooks", "text", "not json", &[]);
    add(&mut con, "hooks", "nourl", r#"{"body":"x"}"#, &[]);
    add(
        &mut con,
        "hooks",
        "forged",
        r#"{"url":"http://127.0.0.1:9/","headers":{"X-DQ-Signature":"t=1,v1=00"}}"#,
        &[],
    );
    for (id, why) in [
        (
            "text",
            "bad message: the payload is not a JSON object (line 1, column 2)",
        ),
        ("nourl", "bad message: the payload has no url"),
        (
            "forged",
            "bad message: header \"X-DQ-Signature\" is set by the relay, not by a message",
        ),
    ] {
        wait_state(&mut con, id, "dead");
        assert_eq!(
            dq_get_field(&mut con, "hooks", id, "dead-reason"),
            "permanent"
        );
        assert_eq!(dq_get_field(&mut con, "hooks", id, "last-error"), why);
    }
}

#[test]
fn a_fixed_url_queue_posts_the_payload_as_the_body() {
    let server = Server::start();
    let receiver = Receiver::start(|_| Reply::status(200));
    let queue = format!("orders={}", receiver.url("/orders?shop=7"));
    // No allow-list needed: the operator named the URL.
    let _relay = RelayProcess::start(&args(
        &server,
        &["--queue", &queue, OPEN_LOOPBACK[0], OPEN_LOOPBACK[1]],
    ));
    let mut con = server.conn();
    add(
        &mut con,
        "orders",
        "order-42",
        r#"{"order":42,"status":"unpaid"}"#,
        &["DELAY", "50"],
    );
    add(&mut con, "orders", "raw", "\u{1}binary", &[]);
    wait_gone(&mut con, "orders", "order-42");
    wait_gone(&mut con, "orders", "raw");
    let requests = receiver.wait_for(2, LONG);
    let order = requests
        .iter()
        .find(|r| r.header("x-dq-id") == Some("order-42"))
        .expect("the order's call");
    assert_eq!(order.method, "POST");
    assert_eq!(order.path, "/orders?shop=7");
    assert_eq!(order.body, br#"{"order":42,"status":"unpaid"}"#);
    assert_eq!(order.header("content-type"), Some("application/json"));
    assert_eq!(order.header("x-dq-queue"), Some("orders"));
    assert!(verify(
        SECRET,
        order.header("x-dq-signature").unwrap_or(""),
        &order.body
    ));
    let raw = requests
        .iter()
        .find(|r| r.header("x-dq-id") == Some("raw"))
        .expect("the raw call");
    assert_eq!(raw.header("content-type"), Some("application/octet-stream"));
}

#[test]
fn kill_9_mid_call_redelivers_after_the_lease() {
    let server = Server::start();
    // The first delivery hangs (the relay dies during it); later ones work.
    let receiver = Receiver::start(|r| match r.header("x-dq-attempt") {
        Some("1") => Reply::status(200).after(Duration::from_secs(120)),
        _ => Reply::status(200),
    });
    let mut first = relay(&server, &["--lease", "2s"]);
    let mut con = server.conn();
    add_hook(&mut con, "job", &receiver.url("/job"), &[]);
    receiver.wait_for(1, LONG);
    first.signal(libc::SIGKILL);
    assert!(first.wait_exit(LONG).is_some());
    // Left leased: neither acknowledged nor failed (the relay NACKs with an
    // error). A machine slower than the lease may show it ready again, its
    // lease over.
    let state = dq_get_field(&mut con, "hooks", "job", "state");
    assert!(state == "inflight" || state == "ready", "{state}");
    assert_eq!(dq_get_field(&mut con, "hooks", "job", "attempt"), "1");
    assert_eq!(
        dq_get_field(&mut con, "hooks", "job", "last-error"),
        "(nil)"
    );

    let _second = relay(&server, &["--lease", "2s"]);
    wait_gone(&mut con, "hooks", "job");
    let requests = receiver.wait_for(2, LONG);
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].header("x-dq-id"), Some("job"));
    assert_eq!(requests[1].header("x-dq-attempt"), Some("2"));
}

#[test]
fn sigterm_finishes_the_calls_in_flight_and_takes_no_more() {
    // The SIGTERM must come while the call is in flight: when the relay's
    // log shows the call ended first, it proves nothing, and a fresh relay
    // tries a call four times longer.
    let mut call = Duration::from_secs(2);
    loop {
        let server = Server::start();
        let receiver = Receiver::start(move |_| Reply::status(200).after(call));
        let mut relay = relay(&server, &[]);
        let mut con = server.conn();
        add_hook(&mut con, "in-flight", &receiver.url("/a"), &[]);
        receiver.wait_for(1, LONG);
        relay.signal(libc::SIGTERM);
        relay.wait_for_event("stopping", LONG);
        add_hook(&mut con, "later", &receiver.url("/b"), &[]);

        let status = relay.wait_exit(LONG).expect("the relay exits");
        assert!(status.success(), "{status:?}; log:\n{}", relay.log());
        // The call in flight was finished and acknowledged; the later
        // message was not taken.
        assert!(dq_get(&mut con, "hooks", "in-flight").is_none());
        assert_eq!(dq_get_field(&mut con, "hooks", "later", "state"), "ready");
        assert_eq!(dq_get_field(&mut con, "hooks", "later", "attempt"), "0");
        assert_eq!(receiver.count(), 1);
        relay.wait_for_event("dq-relay stopped", LONG);
        let messages: Vec<String> = relay
            .events()
            .iter()
            .filter_map(|e| e.get("message").and_then(|m| m.as_str()).map(String::from))
            .collect();
        let at = |text: &str| messages.iter().position(|m| m.contains(text));
        let (stopping, delivered) = (at("stopping"), at("delivered"));
        assert!(delivered.is_some(), "{}", relay.log());
        if stopping < delivered {
            return;
        }
        assert!(
            call < Duration::from_secs(30),
            "every call ended before the SIGTERM; log:\n{}",
            relay.log()
        );
        call *= 4;
    }
}

#[test]
fn a_call_longer_than_the_lease_keeps_it_with_touch() {
    // The call takes two and a half leases; the relay's TOUCH every third of
    // a lease keeps it one delivery. A machine that stalls the relay for two
    // thirds of a lease loses the lease whatever the relay does: then a fresh
    // relay tries a lease four times longer. A relay that does not renew the
    // lease loses every one.
    let mut lease = Duration::from_secs(2);
    loop {
        let server = Server::start();
        let call = lease * 5 / 2;
        let receiver = Receiver::start(move |_| Reply::status(200).after(call));
        let lease_arg = format!("{}ms", lease.as_millis());
        let _relay = relay(&server, &["--lease", &lease_arg]);
        let mut con = server.conn();
        let payload =
            serde_json::json!({ "url": receiver.url("/long"), "timeout": "300s" }).to_string();
        add(&mut con, "hooks", "long", &payload, &[]);
        receiver.wait_for(1, LONG);
        let first_deadline = int_field(&mut con, "long", "lease-deadline");
        // The relay renews the lease while the call runs...
        assert!(wait_until(LONG, || {
            dq_get(&mut con, "hooks", "long").is_none_or(|r| {
                text(&r["lease-deadline"]).parse::<u64>().unwrap_or(0) > first_deadline
            })
        }));
        // ...so the message is acknowledged after one delivery, not
        // redelivered.
        wait_gone(&mut con, "hooks", "long");
        if receiver.count() == 1 {
            return;
        }
        assert!(
            lease < Duration::from_secs(8),
            "the lease of {lease:?} ran out: {} calls",
            receiver.count()
        );
        lease *= 4;
    }
}

fn http_get(addr: &str, path: &str) -> String {
    let mut stream = std::net::TcpStream::connect(addr).expect("connect to /metrics");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .expect("send the request");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .expect("read the answer");
    response
}

#[test]
fn metrics_count_deliveries_by_outcome() {
    let server = Server::start();
    let receiver = Receiver::start(|r| match r.path.as_str() {
        "/ok" => Reply::status(200),
        "/retry" => Reply::status(503),
        _ => Reply::status(404),
    });
    let relay = relay(&server, &["--metrics", "127.0.0.1:0"]);
    let event = relay.wait_for_event("metrics at", LONG);
    let addr = event["addr"]
        .as_str()
        .expect("the metrics address")
        .to_string();
    let mut con = server.conn();
    add_hook(&mut con, "ok", &receiver.url("/ok"), &[]);
    add_hook(&mut con, "missing", &receiver.url("/missing"), &[]);
    add_hook(
        &mut con,
        "retry",
        &receiver.url("/retry"),
        &["BACKOFF", "fixed:60s"],
    );
    let expected = [
        r#"dq_relay_deliveries_total{queue="hooks",outcome="delivered"} 1"#,
        r#"dq_relay_deliveries_total{queue="hooks",outcome="dead"} 1"#,
        r#"dq_relay_deliveries_total{queue="hooks",outcome="retry"} 1"#,
        r#"dq_relay_request_duration_seconds_count{queue="hooks"} 3"#,
        r#"dq_relay_in_flight{queue="hooks"} 0"#,
    ];
    let mut page = String::new();
    let ok = wait_until(LONG, || {
        page = http_get(&addr, "/metrics");
        expected.iter().all(|line| page.contains(line))
    });
    assert!(ok, "{page}");
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    assert!(
        page.contains("dq_relay_request_duration_seconds_bucket{le="),
        "{page}"
    );
    assert!(http_get(&addr, "/other").starts_with("HTTP/1.1 404"));
}

/// /metrics has the dashboard's header-read timeout (30 s): a client that
/// sends a byte of header now and then but never ends its request head is
/// closed, not kept with its socket and task for as long as it likes.
#[test]
fn metrics_closes_a_client_that_never_finishes_its_headers() {
    let server = Server::start();
    let relay = relay(&server, &["--metrics", "127.0.0.1:0"]);
    let event = relay.wait_for_event("metrics at", LONG);
    let addr = event["addr"].as_str().expect("the metrics address");
    let mut stream = std::net::TcpStream::connect(addr).expect("connect to /metrics");
    stream
        .set_read_timeout(Some(Duration::from_secs(1)))
        .expect("a read timeout");
    write!(stream, "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nX-Slow: ").expect("send");
    let started = std::time::Instant::now();
    let mut answer = Vec::new();
    let closed = loop {
        // Writes may still succeed after the close; a read of 0 bytes, or
        // a reset, is what says it happened.
        if stream.write_all(b"a").is_err() {
            break true;
        }
        let mut buf = [0u8; 256];
        match stream.read(&mut buf) {
            Ok(0) => break true,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => break true,
        }
        if started.elapsed() > Duration::from_secs(300) {
            break false;
        }
    };
    assert!(closed, "still open after 300 s");
    assert!(
        answer.is_empty(),
        "an answer to half a request: {}",
        String::from_utf8_lossy(&answer)
    );
}

#[test]
fn credentials_come_from_the_environment_and_never_reach_the_log() {
    let server = Server::builder().password("redis-SEKRIT").start();
    let receiver = Receiver::start(|_| Reply::status(200));
    let args: Vec<String> = [
        "--redis",
        &server.bare_url(),
        "--queue",
        "hooks",
        "--allow-host",
        "127.0.0.1",
        OPEN_LOOPBACK[0],
        OPEN_LOOPBACK[1],
        "--log-level",
        "debug",
        "--block",
        "1s",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut relay = RelayProcess::start_with_env(
        &args,
        &[
            ("DQ_RELAY_REDIS_PASSWORD", "redis-SEKRIT"),
            ("DQ_RELAY_SECRET", "whsec-SEKRIT"),
        ],
    );
    let mut con = server.conn();
    let payload = serde_json::json!({
        "url": format!("http://user:url-SEKRIT@127.0.0.1:{}/h?token=query-SEKRIT", receiver.port),
        "headers": { "Authorization": "Bearer header-SEKRIT" },
    })
    .to_string();
    add(&mut con, "hooks", "h", &payload, &[]);
    wait_gone(&mut con, "hooks", "h");
    let r = &receiver.requests()[0];
    assert_eq!(r.header("authorization"), Some("Bearer header-SEKRIT"));
    assert!(verify(
        "whsec-SEKRIT",
        r.header("x-dq-signature").unwrap_or(""),
        &r.body
    ));
    relay.signal(libc::SIGTERM);
    assert!(relay.wait_exit(LONG).is_some_and(|s| s.success()));
    let log = relay.log();
    assert!(log.contains("delivered"), "{log}");
    assert!(!log.contains("SEKRIT"), "{log}");
}

#[test]
fn an_envelope_queue_without_an_allow_list_is_refused() {
    let server = Server::start();
    let mut relay = RelayProcess::start(&args(&server, &["--queue", "hooks"]));
    let status = relay.wait_exit(LONG).expect("the relay exits");
    assert!(!status.success());
    assert!(relay.log().contains("allow-list"), "{}", relay.log());
}

/// The Python check of a signature in docs/relay.md, run on a request the
/// relay signed: what the documentation shows works.
#[test]
fn the_readme_python_snippet_verifies_a_signature() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/relay.md"))
        .expect("read docs/relay.md");
    let snippet = readme
        .split("```python\n")
        .skip(1)
        .filter_map(|block| block.split("```").next())
        .find(|block| block.contains("def verify_signature("))
        .expect("docs/relay.md has a python block with verify_signature")
        .to_string();

    let server = Server::start();
    let receiver = Receiver::start(|_| Reply::status(200));
    let _relay = relay(&server, &[]);
    let mut con = server.conn();
    add_hook(&mut con, "py", &receiver.url("/py"), &[]);
    let request = receiver.wait_for(1, LONG).remove(0);
    let header = request.header("x-dq-signature").unwrap_or("").to_string();

    let dir = std::env::temp_dir().join(format!("dq-relay-py-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let script = dir.join("check.py");
    std::fs::write(
        &script,
        format!(
            "{snippet}\nimport sys\nbody = open(sys.argv[3], 'rb').read()\n\
             print(verify_signature(sys.argv[1].encode(), sys.argv[2], body))\n"
        ),
    )
    .expect("write the script");
    let run = |body: &[u8]| {
        let body_file = dir.join("body");
        std::fs::write(&body_file, body).expect("write the body");
        let out = std::process::Command::new("python3")
            .arg(&script)
            .args([SECRET, &header])
            .arg(&body_file)
            .output()
            .expect("run python3");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(run(&request.body), "True");
    assert_eq!(run(b"{\"tampered\":true}"), "False");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A CA and a server certificate for 127.0.0.1, made with the openssl
/// command-line tool in `dir`.
fn make_certificates(dir: &std::path::Path) {
    let openssl = |args: &[&str]| {
        let out = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("run openssl (Debian: apt-get install openssl)");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    openssl(
        &[
            &["req", "-x509"][..],
            &ec,
            &[
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
                "-days",
                "2",
                "-subj",
                "/CN=dq relay test CA",
            ],
        ]
        .concat(),
    );
    openssl(
        &[
            &["req"][..],
            &ec,
            &[
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
                "-subj",
                "/CN=127.0.0.1",
            ],
        ]
        .concat(),
    );
    std::fs::write(dir.join("san.ext"), "subjectAltName=IP:127.0.0.1\n").expect("write san.ext");
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "san.ext",
    ]);
}

#[test]
fn the_relay_reaches_the_server_over_tls() {
    let dir = std::env::temp_dir().join(format!("dq-relay-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    make_certificates(&dir);
    let path = |f: &str| dir.join(f).to_string_lossy().into_owned();
    let tls_port = free_port().to_string();
    let server = Server::start_with(&[
        "--tls-port",
        &tls_port,
        "--tls-cert-file",
        &path("server.pem"),
        "--tls-key-file",
        &path("server.key"),
        "--tls-ca-cert-file",
        &path("ca.pem"),
        "--tls-auth-clients",
        "no",
    ]);
    let receiver = Receiver::start(|_| Reply::status(200));
    let rediss = format!("rediss://127.0.0.1:{tls_port}/");
    let args: Vec<String> = [
        "--redis",
        &rediss,
        "--redis-ca",
        &path("ca.pem"),
        "--queue",
        "hooks",
        "--allow-host",
        "127.0.0.1",
        OPEN_LOOPBACK[0],
        OPEN_LOOPBACK[1],
        "--block",
        "1s",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let relay = RelayProcess::start(&args);
    let mut con = server.conn();
    add_hook(&mut con, "tls", &receiver.url("/tls"), &[]);
    wait_gone(&mut con, "hooks", "tls");
    assert_eq!(receiver.count(), 1);
    // The relay's connections are the ones on the TLS port.
    let clients = text(&cmd(&mut con, "CLIENT LIST"));
    let on_tls = format!("laddr=127.0.0.1:{tls_port} ");
    assert!(
        clients
            .lines()
            .any(|l| l.contains(&on_tls) && l.contains("cmd=dq.")),
        "{clients}\n{}",
        relay.log()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_https_receiver_is_called_over_tls_and_an_untrusted_one_is_retried() {
    let dir = std::env::temp_dir().join(format!("dq-relay-https-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    make_certificates(&dir);
    let receiver = Receiver::start_tls(&dir.join("server.pem"), &dir.join("server.key"), |_| {
        Reply::status(200)
    });
    let server = Server::start();
    let mut con = server.conn();
    add_hook(&mut con, "trusted", &receiver.https_url("/tls"), &[]);
    add(
        &mut con,
        "untrusted",
        "x",
        &envelope(&receiver.https_url("/tls")),
        &["BACKOFF", "fixed:60s"],
    );

    // The relay trusts the test CA through the system's usual variable.
    let ca = dir.join("ca.pem").to_string_lossy().into_owned();
    let _trusting = RelayProcess::start_with_env(
        &args(
            &server,
            &[
                "--queue",
                "hooks",
                "--allow-host",
                "127.0.0.1",
                OPEN_LOOPBACK[0],
                OPEN_LOOPBACK[1],
            ],
        ),
        &[("SSL_CERT_FILE", &ca)],
    );
    wait_gone(&mut con, "hooks", "trusted");
    assert_eq!(receiver.count(), 1);
    assert!(verify(
        SECRET,
        receiver.requests()[0]
            .header("x-dq-signature")
            .unwrap_or(""),
        &receiver.requests()[0].body
    ));

    // Without the CA the certificate is refused: a transport failure.
    let _distrusting = RelayProcess::start(&args(
        &server,
        &[
            "--queue",
            "untrusted",
            "--allow-host",
            "127.0.0.1",
            OPEN_LOOPBACK[0],
            OPEN_LOOPBACK[1],
        ],
    ));
    let mut error = String::new();
    assert!(wait_until(LONG, || {
        error =
            dq_get(&mut con, "untrusted", "x").map_or(String::new(), |r| text(&r["last-error"]));
        error != "(nil)" && !error.is_empty()
    }));
    assert!(
        error.starts_with("connection failed: ") || error.starts_with("request failed: "),
        "{error}"
    );
    assert!(error.to_lowercase().contains("certificate"), "{error}");
    assert_eq!(receiver.count(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_relay_reconnects_when_the_server_restarts() {
    let mut server = Server::start();
    let receiver = Receiver::start(|_| Reply::status(200));
    let relay = relay(&server, &[]);
    let mut con = server.conn();
    add_hook(&mut con, "before", &receiver.url("/before"), &[]);
    wait_gone(&mut con, "hooks", "before");

    server.restart();
    let mut con = server.conn();
    add_hook(&mut con, "after", &receiver.url("/after"), &[]);
    wait_gone(&mut con, "hooks", "after");
    let paths: Vec<String> = receiver.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(paths, ["/before", "/after"], "{}", relay.log());
}

/// Sends `n` messages through a relay started with `limits` to a receiver
/// that answers each after 300 ms, so that calls overlap; checks that all
/// were delivered and that at most `most` were ever in progress at once.
fn calls_overlap_at_most(limits: &[&str], n: usize, most: usize) {
    let server = Server::start();
    let receiver = Receiver::start(|_| Reply::status(200).after(Duration::from_millis(300)));
    let _relay = relay(&server, limits);
    let mut con = server.conn();
    for i in 0..n {
        add_hook(&mut con, &format!("m{i}"), &receiver.url("/slow"), &[]);
    }
    for i in 0..n {
        wait_gone(&mut con, "hooks", &format!("m{i}"));
    }
    assert_eq!(receiver.count(), n);
    assert!(
        receiver.most_at_once() <= most,
        "{} at once",
        receiver.most_at_once()
    );
}

#[test]
fn calls_to_one_host_respect_the_per_host_limit() {
    calls_overlap_at_most(&["--per-host", "2", "--concurrency", "16"], 8, 2);
}

#[test]
fn calls_of_one_queue_respect_its_concurrency() {
    calls_overlap_at_most(&["--per-host", "100", "--concurrency", "3"], 9, 3);
}

/// `field` of a queue's DQ.STATS, as an integer.
fn stat(con: &mut redis::Connection, queue: &str, name: &str) -> i64 {
    int(&field(&cmd(con, &format!("DQ.STATS {queue}")), name))
}

#[test]
fn schedule_runs_are_delivered_as_recurring_webhooks() {
    let server = Server::start();
    let receiver = Receiver::start(|_| Reply::status(200));
    let _relay = relay(&server, &[]);
    let mut con = server.conn();
    let payload =
        serde_json::json!({ "url": receiver.url("/report"), "body": { "report": "hourly" } })
            .to_string();
    // Three runs a second apart, the first at once; the reply is its time.
    let first = int(&run(
        &mut con,
        &[
            b"DQ.SCHEDULE",
            b"hooks",
            b"report",
            payload.as_bytes(),
            b"EVERY",
            b"1s",
            b"LIMIT",
            b"3",
        ],
    )
    .expect("DQ.SCHEDULE"));
    let runs: Vec<String> = (0..3)
        .map(|k| format!("report@{}", first + k * 1000))
        .collect();

    let requests = receiver.wait_for(3, LONG);
    // Each run is its own message, and its id — the receiver's key to
    // deduplicate on — says which run it is. Two runs that fell due while
    // the machine was busy may arrive in either order.
    let mut ids: Vec<String> = requests
        .iter()
        .map(|r| r.header("x-dq-id").unwrap_or("(none)").to_string())
        .collect();
    ids.sort();
    assert_eq!(ids, runs);
    for r in &requests {
        assert_eq!(r.path, "/report");
        assert_eq!(r.body, br#"{"report":"hourly"}"#);
        assert_eq!(r.header("x-dq-queue"), Some("hooks"));
        assert_eq!(r.header("x-dq-attempt"), Some("1"));
        let signature = r.header("x-dq-signature").expect("a signature header");
        assert!(verify(SECRET, signature, &r.body), "{signature}");
    }
    for id in &runs {
        wait_gone(&mut con, "hooks", id);
    }
    assert_eq!(stat(&mut con, "hooks", "acked"), 3);
    // The schedule is done (LIMIT 3): nothing more will come.
    let schedule = list(&cmd(&mut con, "DQ.SCHEDULES hooks")).remove(0);
    assert_eq!(int(&field(&schedule, "runs")), 3);
    assert_eq!(field(&schedule, "next-run"), Value::Nil);
    assert_eq!(receiver.count(), 3);
}

/// Two relays on one queue, each with its own --concurrency 4: together
/// they could take 8 at once. The queue's RATE is the server's, across
/// both: of 20 messages under RATE 5/1h, exactly 5 are called.
#[test]
fn two_relays_keep_to_the_queue_rate_together() {
    let server = Server::start();
    let receiver = Receiver::start(|_| Reply::status(200));
    let mut con = server.conn();
    assert_eq!(cmd(&mut con, "DQ.CONFIG hooks SET RATE 5/1h"), Value::Okay);
    // All ready before the relays start, so that the first POP asks for
    // more than the rate lets through whatever the order of events.
    for i in 0..20 {
        add_hook(&mut con, &format!("m{i}"), &receiver.url("/rated"), &[]);
    }
    let _relays = [
        relay(&server, &["--concurrency", "4"]),
        relay(&server, &["--concurrency", "4"]),
    ];

    receiver.wait_for(5, LONG);
    let settled = wait_until(LONG, || {
        stat(&mut con, "hooks", "acked") >= 5 && stat(&mut con, "hooks", "inflight") == 0
    });
    assert!(settled, "{:?}", cmd(&mut con, "DQ.STATS hooks"));
    assert_eq!(stat(&mut con, "hooks", "acked"), 5);
    // Each POP held back by the rate is counted; two more after the five
    // were acknowledged mean the relays asked again and got nothing.
    let throttled = stat(&mut con, "hooks", "throttled");
    assert!(throttled > 0);
    assert!(wait_until(LONG, || {
        stat(&mut con, "hooks", "throttled") >= throttled + 2
    }));
    assert_eq!(stat(&mut con, "hooks", "ready"), 15);
    assert_eq!(receiver.count(), 5);
    let mut ids: Vec<String> = receiver
        .requests()
        .iter()
        .map(|r| r.header("x-dq-id").unwrap_or("(none)").to_string())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 5, "{ids:?}");
}

/// The same with MAXINFLIGHT 2: the receiver, which holds each call open
/// a while, never has more than 2 of the relays' calls at once, though
/// each relay alone may make 4.
#[test]
fn two_relays_keep_to_the_queue_maxinflight_together() {
    let server = Server::start();
    let receiver = Receiver::start(|_| Reply::status(200).after(Duration::from_millis(200)));
    let mut con = server.conn();
    assert_eq!(
        cmd(&mut con, "DQ.CONFIG hooks SET MAXINFLIGHT 2"),
        Value::Okay
    );
    for i in 0..8 {
        add_hook(&mut con, &format!("m{i}"), &receiver.url("/held"), &[]);
    }
    let _relays = [
        relay(&server, &["--concurrency", "4"]),
        relay(&server, &["--concurrency", "4"]),
    ];

    for i in 0..8 {
        wait_gone(&mut con, "hooks", &format!("m{i}"));
    }
    assert_eq!(receiver.count(), 8);
    assert!(
        receiver.most_at_once() <= 2,
        "{} at once",
        receiver.most_at_once()
    );
    // The first POP asked for 4 of the 8 ready and got 2: the server, not
    // the relays' own limits, held the rest back.
    assert!(stat(&mut con, "hooks", "throttled") > 0);
}
