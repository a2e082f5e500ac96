//! The module must not leak, crash or stall on what it reads back.

use dq_testkit::*;

#[test]
fn reading_and_moving_messages_does_not_leak_memory() {
    let server = Server::start();
    let mut c = server.conn();
    let payload = "x".repeat(10_000);
    cmd(&mut c, &format!("DQ.ADD q {payload} ID big"));
    // Warm up allocator caches before measuring.
    for _ in 0..100 {
        cmd(&mut c, "DQ.GET q big");
    }
    let before = used_memory(&mut c);
    for _ in 0..2000 {
        cmd(&mut c, "DQ.GET q big");
    }
    for _ in 0..500 {
        cmd(&mut c, &format!("DQ.ADD q {payload} ID m"));
        let popped = entries(&cmd(&mut c, "DQ.POP q COUNT 2"));
        let ids: Vec<&str> = popped.iter().map(|e| e.0.as_str()).collect();
        cmd(&mut c, &format!("DQ.ACK q {}", ids.join(" ")));
        cmd(&mut c, &format!("DQ.ADD q {payload} ID big"));
    }
    let grown = used_memory(&mut c) - before;
    // A leaked copy per read would be ~20 MB for the GETs alone.
    assert!(grown < 1_000_000, "used_memory grew by {grown} bytes");
}

/// Redis' CRC-64 (Jones, reflected), which ends every DUMP payload.
fn crc64(data: &[u8]) -> u64 {
    let mut crc = 0u64;
    for &byte in data {
        crc ^= u64::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0x95ac_9329_ac4b_c9b5
            } else {
                crc >> 1
            };
        }
    }
    crc
}

/// A DUMP payload with its body changed by `change`, and its CRC made
/// right again so that RESTORE hands the body to dq's loader.
fn forged(dump: &[u8], change: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let trailer = dump.len() - 10; // RDB version (2) + CRC (8)
    let mut body = dump[..trailer].to_vec();
    change(&mut body);
    body.extend_from_slice(&dump[trailer..trailer + 2]);
    let crc = crc64(&body);
    body.extend_from_slice(&crc.to_le_bytes());
    body
}

#[test]
fn damaged_dump_payloads_are_refused_whole_and_the_server_lives() {
    assert_eq!(crc64(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "DQ.ADD q a ID d1 DELAY 60000 TTL 90000");
    cmd(&mut c, "DQ.ADD q b ID g1 GROUP g PRIORITY 3");
    cmd(
        &mut c,
        "DQ.ADD q c ID g2 GROUP g MAXATTEMPTS 2 BACKOFF 1s,5s",
    );
    cmd(&mut c, "DQ.POP q");
    cmd(&mut c, "DQ.ADD q d ID x MAXATTEMPTS 1");
    cmd(&mut c, "DQ.POP q");
    cmd(&mut c, "DQ.NACK q x");
    let Value::BulkString(dump) = cmd(&mut c, "DUMP q") else {
        panic!("DUMP")
    };
    // The payload as it is restores to an equal queue.
    run(&mut c, &[b"RESTORE", b"copy", b"0", &dump]).unwrap();
    let digest_of = |c: &mut redis::Connection, k: &str| cmd(c, &format!("DEBUG DIGEST-VALUE {k}"));
    assert_eq!(digest_of(&mut c, "copy"), digest_of(&mut c, "q"));
    let (mut refused, mut loaded) = (0, 0);
    // RESTORE's answer to a value the type's loader refuses, and nothing
    // else: a payload that got past the checksum must not reach another
    // error path, or be half-loaded.
    let mut try_restore = |c: &mut redis::Connection, payload: Vec<u8>| {
        match run(c, &[b"RESTORE", b"t", b"0", &payload, b"REPLACE"]) {
            Ok(_) => {
                // Whatever loaded is a working queue.
                loaded += 1;
                cmd(c, "DQ.STATS t");
                cmd(c, "DQ.SCAN t 0 COUNT 100");
                cmd(c, "DQ.POP t COUNT 10");
                cmd(c, "DEL t");
            }
            Err(e) => {
                refused += 1;
                assert_eq!(e, "ERR Bad data format");
                assert_eq!(int(&cmd(c, "EXISTS t")), 0, "half-loaded");
            }
        }
    };
    // Every truncation of the body, and every byte of it changed: refused,
    // or a queue that works. (RESTORE reads a value's bytes on into the
    // payload's version and checksum, so a body cut by a byte or two can
    // read as the same body with its last bytes changed.)
    for cut in 1..dump.len() - 10 {
        try_restore(&mut c, forged(&dump, |b| b.truncate(cut)));
    }
    for at in 1..dump.len() - 10 {
        try_restore(&mut c, forged(&dump, |b| b[at] ^= 0xff));
        try_restore(&mut c, forged(&dump, |b| b[at] = b[at].wrapping_add(1)));
    }
    assert!(refused > dump.len(), "{refused} refused, {loaded} loaded");
    assert_eq!(text(&cmd(&mut c, "PING")), "PONG");
    assert_eq!(int(&field(&cmd(&mut c, "DQ.STATS q"), "dead")), 1);
}

#[test]
fn a_command_that_changes_nothing_does_not_break_watch() {
    let server = Server::start();
    let mut c = server.conn();
    let mut other = server.conn();
    cmd(&mut c, "DQ.ADD q x ID m DELAY 60000");
    cmd(&mut c, "WATCH q");
    cmd(&mut other, "DQ.POP q"); // nothing ready: no write
    cmd(&mut other, "DQ.ACK q m"); // not in flight: no write
    cmd(&mut other, "DQ.PURGE q DEAD"); // nothing dead: no write
    cmd(&mut c, "MULTI");
    cmd(&mut c, "PING");
    assert_ne!(cmd(&mut c, "EXEC"), Value::Nil, "EXEC aborted");
    // A real change does invalidate it.
    cmd(&mut c, "WATCH q");
    cmd(&mut other, "DQ.CANCEL q m");
    cmd(&mut c, "MULTI");
    cmd(&mut c, "PING");
    assert_eq!(cmd(&mut c, "EXEC"), Value::Nil);
}

#[test]
fn config_get_of_the_backoff_setting_does_not_leak() {
    let server = Server::start();
    let mut c = server.conn();
    cmd(&mut c, "CONFIG SET dq.backoff 15s,3m,10m,30m,1h,2h,6h,15h");
    for _ in 0..200 {
        cmd(&mut c, "CONFIG GET dq.backoff");
    }
    let before = used_memory(&mut c);
    let mut pipe = redis::pipe();
    for _ in 0..20_000 {
        pipe.cmd("CONFIG").arg("GET").arg("dq.backoff").ignore();
    }
    let () = pipe.query(&mut c).unwrap();
    let grown = used_memory(&mut c) - before;
    // A leaked string per GET would be well over 1 MB here.
    assert!(grown < 300_000, "used_memory grew by {grown} bytes");
    let Value::Array(got) = cmd(&mut c, "CONFIG GET dq.backoff") else {
        panic!()
    };
    assert_eq!(text(&got[1]), "15s,3m,10m,30m,1h,2h,6h,15h");
}

#[test]
fn names_holding_printf_directives_are_logged_as_text() {
    // The crate's logging passes the message as a printf format: a name
    // such as this one in a log line crashed the server.
    let server = Server::start();
    let mut c = server.conn();
    let name = "%s%s%s%s%s%s%s%s%s%s%s%s%s%s%n%n";
    cmd(&mut c, "DQ.ADD q x");
    let Value::BulkString(dump) = cmd(&mut c, "DUMP q") else {
        panic!("DUMP")
    };
    let broken = forged(&dump, |b| b.truncate(b.len() - 3));
    let err = run(&mut c, &[b"RESTORE", name.as_bytes(), b"0", &broken]).unwrap_err();
    assert!(err.contains("Bad data format"), "{err}");
    assert_eq!(text(&cmd(&mut c, "PING")), "PONG");
    assert!(
        server
            .log()
            .contains(&format!("cannot load queue '{name}'")),
        "{}",
        server.log()
    );
}
