//! Egress: the relay judges the address it connects to, not the name. The
//! real binary against a real server and a receiver on loopback; names
//! come from this machine's /etc/hosts (`vm`, `runsc` and `localhost` are
//! 127.0.0.1), so every call the relay could make stays on loopback.

mod support;

use dq_testkit::*;
use support::RelayProcess;

fn args(server: &Server, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = ["--redis", &server.url(), "--block", "1s"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// A webhook to `url` on `queue`, as message `id`, with attempts to spare:
/// a refusal must use one, not all.
fn add_hook(con: &mut redis::Connection, queue: &str, id: &str, url: &str) {
    let payload = serde_json::json!({ "url": url, "body": { "order": 42 } }).to_string();
    let line: [&[u8]; 7] = [
        b"DQ.ADD",
        queue.as_bytes(),
        payload.as_bytes(),
        b"ID",
        id.as_bytes(),
        b"MAXATTEMPTS",
        b"5",
    ];
    run(con, &line).unwrap_or_else(|e| panic!("DQ.ADD {queue} {id}: {e}"));
}

/// Waits for `id` to be a dead letter after one attempt, and returns its
/// reason.
fn dead_reason(con: &mut redis::Connection, queue: &str, id: &str) -> String {
    let mut state = String::new();
    let dead = wait_until(LONG, || {
        state = dq_get(con, queue, id).map_or("(gone)".into(), |r| text(&r["state"]));
        state == "dead"
    });
    assert!(dead, "{id} is {state}, not dead");
    assert_eq!(dq_get_field(con, queue, id, "dead-reason"), "permanent");
    assert_eq!(dq_get_field(con, queue, id, "attempt"), "1");
    dq_get_field(con, queue, id, "last-error")
}

fn wait_gone(con: &mut redis::Connection, queue: &str, id: &str) {
    assert!(
        wait_until(LONG, || dq_get(con, queue, id).is_none()),
        "{id} was not delivered: {:?}",
        dq_get(con, queue, id)
    );
}

#[test]
fn loopback_is_refused_by_address_whatever_the_allow_list_says() {
    let server = Server::start();
    let receiver = Receiver::start(|_| Reply::status(200));
    let port = receiver.port;
    let relay = RelayProcess::start(&args(&server, &["--queue", "hooks", "--allow-host", "*"]));
    let mut con = server.conn();

    // Names that resolve to loopback: refused by the address found.
    for name in ["vm", "runsc", "localhost"] {
        add_hook(&mut con, "hooks", name, &format!("http://{name}:{port}/n"));
    }
    // Addresses in the URL, in the forms that reach loopback on Linux.
    let literals = [
        ("v4", "127.0.0.1", "address 127.0.0.1 is loopback"),
        ("v4-short", "127.1", "address 127.0.0.1 is loopback"),
        ("v4-number", "2130706433", "address 127.0.0.1 is loopback"),
        ("v6", "[::1]", "address ::1 is loopback"),
        (
            "mapped",
            "[::ffff:127.0.0.1]",
            "address ::ffff:127.0.0.1 is loopback",
        ),
        ("zero", "0.0.0.0", "address 0.0.0.0 is unspecified"),
    ];
    for (id, host, _) in &literals {
        add_hook(&mut con, "hooks", id, &format!("http://{host}:{port}/a"));
    }

    for name in ["vm", "runsc", "localhost"] {
        let reason = dead_reason(&mut con, "hooks", name);
        // localhost may also be ::1: loopback either way.
        assert!(
            reason.starts_with("address ")
                && reason.ends_with(&format!(" of {name} is loopback (see --allow-net)")),
            "{name}: {reason}"
        );
    }
    assert_eq!(
        dead_reason(&mut con, "hooks", "vm"),
        "address 127.0.0.1 of vm is loopback (see --allow-net)"
    );
    for (id, _, why) in &literals {
        assert_eq!(
            dead_reason(&mut con, "hooks", id),
            format!("{why} (see --allow-net)")
        );
    }
    assert_eq!(receiver.count(), 0, "{:?}", receiver.requests());
    let log = relay.log();
    assert!(log.contains("call failed permanently"), "{log}");
    assert!(!log.contains("will retry"), "{log}");
}

#[test]
fn a_fixed_url_is_checked_by_address_too() {
    let server = Server::start();
    let receiver = Receiver::start(|_| Reply::status(200));
    let queue = format!("orders=http://vm:{}/orders", receiver.port);
    let _relay = RelayProcess::start(&args(&server, &["--queue", &queue]));
    let mut con = server.conn();
    run(&mut con, &[b"DQ.ADD", b"orders", b"{}", b"ID", b"o-1"]).expect("DQ.ADD");
    assert_eq!(
        dead_reason(&mut con, "orders", "o-1"),
        "address 127.0.0.1 of vm is loopback (see --allow-net)"
    );
    assert_eq!(receiver.count(), 0);
}

#[test]
fn allow_net_opens_one_range_and_redirects_are_still_not_followed() {
    let server = Server::start();
    let receiver = Receiver::start(|r| match r.path.as_str() {
        "/hop" => Reply::status(302).header("Location", "/inside"),
        _ => Reply::status(200),
    });
    let port = receiver.port;
    let _relay = RelayProcess::start(&args(
        &server,
        &[
            "--queue",
            "hooks",
            "--allow-host",
            "*",
            "--allow-net",
            "127.0.0.0/8",
        ],
    ));
    let mut con = server.conn();
    let delivered = [
        ("vm", format!("http://vm:{port}/vm")),
        ("runsc", format!("http://runsc:{port}/runsc")),
        ("v4", format!("http://127.0.0.1:{port}/v4")),
        // Opened with its IPv4 address: the socket reaches 127.0.0.1.
        ("mapped", format!("http://[::ffff:127.0.0.1]:{port}/mapped")),
    ];
    for (id, url) in &delivered {
        add_hook(&mut con, "hooks", id, url);
    }
    // IPv6's own loopback is another range, not opened by 127.0.0.0/8.
    add_hook(&mut con, "hooks", "v6", &format!("http://[::1]:{port}/v6"));
    add_hook(&mut con, "hooks", "hop", &format!("http://vm:{port}/hop"));

    for (id, _) in &delivered {
        wait_gone(&mut con, "hooks", id);
    }
    assert_eq!(
        dead_reason(&mut con, "hooks", "v6"),
        "address ::1 is loopback (see --allow-net)"
    );
    assert_eq!(
        dead_reason(&mut con, "hooks", "hop"),
        "HTTP 302 (redirects are not followed)"
    );
    let mut paths: Vec<String> = receiver.requests().iter().map(|r| r.path.clone()).collect();
    paths.sort();
    assert_eq!(paths, ["/hop", "/mapped", "/runsc", "/v4", "/vm"]);
}

#[test]
fn allow_net_may_come_from_the_environment() {
    let server = Server::start();
    let receiver = Receiver::start(|_| Reply::status(200));
    let _relay = RelayProcess::start_with_env(
        &args(&server, &["--queue", "hooks", "--allow-host", "vm"]),
        &[("DQ_RELAY_ALLOW_NET", "10.1.2.0/24,127.0.0.0/8")],
    );
    let mut con = server.conn();
    add_hook(
        &mut con,
        "hooks",
        "env",
        &format!("http://vm:{}/env", receiver.port),
    );
    wait_gone(&mut con, "hooks", "env");
    assert_eq!(receiver.count(), 1);
}

/// An address the operator gave that would make a dead letter of every
/// call is refused at start, with the flag that opens it.
#[test]
fn an_internal_address_in_the_configuration_stops_the_start() {
    let server = Server::start();
    let cases: [(&[&str], &str); 4] = [
        (
            &["--queue", "hooks", "--allow-host", "127.0.0.1"],
            "--allow-host 127.0.0.1: address 127.0.0.1 is loopback (see --allow-net); the relay \
             refuses to connect to it. If it should, open it: --allow-net 127.0.0.1",
        ),
        (
            &["--queue", "orders=http://[::1]:9/x?token=SEKRIT"],
            "--queue orders=http://[::1]:9/x: address ::1 is loopback",
        ),
        (
            &[
                "--queue",
                "hooks",
                "--allow",
                "http://169.254.169.254/latest/",
            ],
            "address 169.254.169.254 is link-local (cloud metadata)",
        ),
        (
            &[
                "--queue",
                "hooks",
                "--allow-host",
                "*",
                "--allow-net",
                "10.1.2.3/24",
            ],
            "did you mean 10.1.2.0/24?",
        ),
    ];
    for (extra, expected) in cases {
        let mut relay = RelayProcess::start(&args(&server, extra));
        let status = relay.wait_exit(LONG).expect("the relay exits");
        assert!(!status.success(), "{extra:?}");
        let log = relay.log();
        assert!(log.contains(expected), "{extra:?}: {log}");
        assert!(!log.contains("SEKRIT"), "{log}");
    }
}
