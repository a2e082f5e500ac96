//! Time-dependent writes reach a replica as their effects: after the same
//! workload a replica holds exactly the master's data.

mod support;

use std::time::Duration;

use support::*;

#[test]
fn a_replica_ends_with_the_masters_exact_state() {
    // No delay before the first full sync: the default waits 5 s for more replicas.
    let master = Server::start_with(&["--repl-diskless-sync-delay", "0"]);
    let port = master.port.to_string();
    let replica = Server::start_with(&["--replicaof", "127.0.0.1", &port]);
    let mut r = replica.conn();
    assert!(wait_until(Duration::from_secs(10), || {
        text(&cmd(&mut r, "INFO replication")).contains("master_link_status:up")
    }));

    let mut m = master.conn();
    cmd(&mut m, "DQ.ADD q a ID a");
    cmd(&mut m, "DQ.ADD q b ID b DELAY 150"); // promoted by the timer
    cmd(&mut m, "DQ.ADD q c ID c");
    cmd(&mut m, "DQ.ADD q d ID d PRIORITY 2");
    cmd(&mut m, "DQ.ADD q e"); // generated id
    cmd(&mut m, "DQ.POP q COUNT 2 LEASE 100"); // d and a: leases expire on the master's timer
    cmd(&mut m, "DQ.CANCEL q c");
    cmd(&mut m, "SELECT 2");
    cmd(&mut m, "DQ.ADD q other-db DELAY 50");
    cmd(&mut m, "SELECT 0");
    assert!(wait_until(Duration::from_secs(5), || {
        let s = cmd(&mut m, "DQ.STATS q");
        int(&field(&s, "lease-expired")) == 2 && int(&field(&s, "delayed")) == 0
    }));
    let popped = entries(&cmd(&mut m, "DQ.POP q COUNT 10"));
    assert_eq!(popped.len(), 4);
    cmd(&mut m, &format!("DQ.ACK q {}", popped[0].0));
    // Groups: a lease that runs out keeps the group; ACK hands it on.
    cmd(&mut m, "DQ.ADD gq x ID g1 GROUP g");
    cmd(&mut m, "DQ.ADD gq x ID g2 GROUP g");
    cmd(&mut m, "DQ.ADD gq x ID g3 GROUP g");
    cmd(&mut m, "DQ.POP gq LEASE 50");
    assert!(wait_until(Duration::from_secs(5), || {
        int(&field(&cmd(&mut m, "DQ.STATS gq"), "lease-expired")) == 1
    }));
    assert_eq!(entries(&cmd(&mut m, "DQ.POP gq COUNT 9"))[0].0, "g1");
    cmd(&mut m, "DQ.ACK gq g1");

    assert_eq!(int(&cmd(&mut m, "WAIT 1 5000")), 1);
    assert!(
        wait_until(Duration::from_secs(5), || digest(&mut m) == digest(&mut r)),
        "replica digest differs from the master's"
    );

    // The replica serves reads and refuses writes.
    assert_eq!(int(&field(&cmd(&mut r, "DQ.STATS q"), "inflight")), 3);
    assert!(cmd_err(&mut r, "DQ.ADD q x").starts_with("READONLY"));
    assert!(cmd_err(&mut r, "DQ.POP q").starts_with("READONLY"));
}
