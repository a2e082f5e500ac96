//! Commands and their replies, on the sync client.

use std::collections::HashMap;

use crate::Value;

/// Runs one command; a server error becomes `Err` with its text.
pub fn run(con: &mut redis::Connection, args: &[&[u8]]) -> Result<Value, String> {
    let mut cmd = redis::cmd(std::str::from_utf8(args[0]).unwrap());
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query::<Value>(con).map_err(|e| {
        // "ERR DELAY must be ..." as the server wrote it.
        match (e.code(), e.detail()) {
            (Some(code), Some(detail)) => format!("{code} {detail}"),
            (Some(code), None) => code.to_string(),
            _ => e.to_string(),
        }
    })
}

/// Runs one command from a string split on spaces; panics on error. An
/// argument with a space in it (a JSON payload) goes through [`run`].
pub fn cmd(con: &mut redis::Connection, line: &str) -> Value {
    let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
    run(con, &args).unwrap_or_else(|e| panic!("{line}: {e}"))
}

/// Like `cmd`, expecting an error; returns its text.
pub fn cmd_err(con: &mut redis::Connection, line: &str) -> String {
    let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
    match run(con, &args) {
        Err(e) => e,
        Ok(v) => panic!("{line}: expected an error, got {v:?}"),
    }
}

/// A string, integer or OK reply as text; nil as redis-cli shows it,
/// `(nil)`. Panics on anything else.
pub fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Int(i) => i.to_string(),
        Value::Okay => "OK".into(),
        Value::Nil => "(nil)".into(),
        other => panic!("not a string: {other:?}"),
    }
}

pub fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        other => panic!("not an integer: {other:?}"),
    }
}

/// A record reply (RESP2 flat array or RESP3 map) as (field, value) pairs.
pub fn record(v: &Value) -> Vec<(String, Value)> {
    match v {
        Value::Array(items) => items
            .chunks(2)
            .map(|kv| (text(&kv[0]), kv[1].clone()))
            .collect(),
        Value::Map(pairs) => pairs.iter().map(|(k, v)| (text(k), v.clone())).collect(),
        other => panic!("not a record: {other:?}"),
    }
}

/// The items of an array (or set) reply.
pub fn list(v: &Value) -> Vec<Value> {
    match v {
        Value::Array(items) | Value::Set(items) => items.clone(),
        other => panic!("not a list: {other:?}"),
    }
}

/// One field of a record reply; panics when it has none of that name.
pub fn field(v: &Value, name: &str) -> Value {
    record(v)
        .into_iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no field {name} in {v:?}"))
}

/// POP entries as (id, payload, attempt).
pub fn entries(v: &Value) -> Vec<(String, String, i64)> {
    match v {
        Value::Nil => Vec::new(),
        Value::Array(items) => items
            .iter()
            .map(|e| match e {
                Value::Array(f) if f.len() == 3 => (text(&f[0]), text(&f[1]), int(&f[2])),
                other => panic!("not an entry: {other:?}"),
            })
            .collect(),
        other => panic!("not a POP reply: {other:?}"),
    }
}

/// DQ.GET as field -> value; `None` when the message is gone.
pub fn dq_get(
    con: &mut redis::Connection,
    queue: &str,
    id: &str,
) -> Option<HashMap<String, Value>> {
    let reply = run(con, &[b"DQ.GET", queue.as_bytes(), id.as_bytes()])
        .unwrap_or_else(|e| panic!("DQ.GET {queue} {id}: {e}"));
    match reply {
        Value::Nil => None,
        record @ (Value::Array(_) | Value::Map(_)) => {
            Some(crate::record(&record).into_iter().collect())
        }
        other => panic!("DQ.GET replied {other:?}"),
    }
}

/// One field of DQ.GET as text (`(nil)` for nil); panics if the message
/// is gone.
pub fn dq_get_field(con: &mut redis::Connection, queue: &str, id: &str, name: &str) -> String {
    let record = dq_get(con, queue, id).unwrap_or_else(|| panic!("{id} is gone"));
    text(
        record
            .get(name)
            .unwrap_or_else(|| panic!("no field {name}")),
    )
}

/// One numeric field of `INFO dq`.
pub fn info_field(c: &mut redis::Connection, name: &str) -> i64 {
    let info = text(&cmd(c, "INFO dq"));
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in INFO dq:\n{info}"))
}

/// `used_memory` of `INFO memory`.
pub fn used_memory(c: &mut redis::Connection) -> i64 {
    let info = text(&cmd(c, "INFO memory"));
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory in INFO")
}

/// `DEBUG DIGEST`: equal on two servers holding the same data.
pub fn digest(con: &mut redis::Connection) -> String {
    text(&cmd(con, "DEBUG DIGEST"))
}

/// DQ.STATS's counters in the order its reply gives them: the four states,
/// then the lifetime counts. The module's tests check the reply against
/// this list, and a client's parser can be fed it, so that the two agree
/// on one order.
pub const STATS_COUNTERS: [&str; 18] = [
    "delayed",
    "ready",
    "inflight",
    "dead",
    "done",
    "added",
    "delivered",
    "acked",
    "nacked",
    "retried",
    "lease-expired",
    "dead-lettered",
    "expired",
    "redriven",
    "cancelled",
    "purged",
    "throttled",
    "dropped",
];

/// The field names of a record reply (DQ.GET, DQ.STATS, DQ.CONFIG), in
/// the order the server gave them.
pub fn field_names(v: &Value) -> Vec<String> {
    record(v).into_iter().map(|f| f.0).collect()
}

/// Moves `key` of db 0 with `MIGRATE` from the server of `con` to the one
/// on loopback `port`, with a 5 s timeout; panics unless it answers OK.
pub fn migrate(con: &mut redis::Connection, key: &str, port: u16) {
    let port = port.to_string();
    let reply = run(
        con,
        &[
            b"MIGRATE",
            b"127.0.0.1",
            port.as_bytes(),
            key.as_bytes(),
            b"0",
            b"5000",
        ],
    )
    .unwrap_or_else(|e| panic!("MIGRATE {key}: {e}"));
    assert_eq!(text(&reply), "OK", "MIGRATE {key}");
}

/// Adds `n` messages to `queue` in one pipeline, the i-th with payload
/// `i`, all due at `at` (Unix ms): more than one tick can move when `n`
/// is larger than INFO dq's tick_budget.
pub fn add_due_at(con: &mut redis::Connection, queue: &str, n: i64, at: u64) {
    let mut pipe = redis::pipe();
    for i in 0..n {
        pipe.cmd("DQ.ADD")
            .arg(queue)
            .arg(i)
            .arg("AT")
            .arg(at)
            .ignore();
    }
    pipe.query::<()>(con)
        .unwrap_or_else(|e| panic!("DQ.ADD {n} messages to {queue}: {e}"));
}

/// How many clients the server has blocked (INFO clients).
pub fn blocked_clients(c: &mut redis::Connection) -> usize {
    text(&cmd(c, "INFO clients"))
        .lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("INFO clients has no blocked_clients"))
}

/// Waits until the server has exactly `n` blocked clients.
pub fn wait_blocked(c: &mut redis::Connection, n: usize) {
    let mut seen = 0;
    assert!(
        crate::wait_until(crate::LONG, || {
            seen = blocked_clients(c);
            seen == n
        }),
        "{seen} blocked clients, not {n}"
    );
}
