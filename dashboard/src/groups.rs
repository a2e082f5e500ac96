//! A queue's groups (docs/commands.md, "Groups: limits, fair order,
//! pauses"): DQ.GROUPS, a group's DQ.PAUSE / DQ.RESUME, and the group
//! fields of DQ.CONFIG and DQ.STATS. dq-client has no typed call for these
//! yet, so they go as raw commands on the server's connection (as
//! backend.rs sends CLUSTER SLOTS), their replies read here; DQ.STATS and
//! DQ.CONFIG are still sent once, through dq-client's typed calls, their
//! raw replies kept for the fields those calls do not read.
//!
//! The groups tab sorts by backlog, which needs the groups first: they are
//! read with DQ.GROUPS COUNT [`READ_COUNT`], following the cursor, up to
//! [`MAX_GROUPS`] groups looked at (in name order) per page render — at
//! most ten calls — and sorted and paged here.

use std::time::Duration;

use dq_client::{admin, Error, QueueConfig, Stats};
use redis::aio::ConnectionManager;
use redis::Value;

/// COUNT of each DQ.GROUPS call.
pub const READ_COUNT: usize = 1000;
/// The most groups a groups tab looks at (all shards of a sharded queue
/// together): beyond, the tab says it shows the first ones by name.
pub const MAX_GROUPS: usize = 10_000;
/// Groups a groups tab shows per page.
pub const PER_PAGE: usize = 50;
/// A group name is 1 to 1024 bytes (DQ.ADD GROUP).
pub const MAX_GROUP: usize = 1024;

/// Whether a group is paused, and until when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Paused {
    No,
    /// Until DQ.RESUME (DQ.GROUPS' -1).
    UntilResumed,
    /// Until this Unix ms.
    Until(u64),
}

/// One entry of DQ.GROUPS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    pub name: Vec<u8>,
    /// Due messages held back (by GROUPLIMIT, GROUPRATE or its pause).
    pub waiting: u64,
    pub ready: u64,
    pub inflight: u64,
    pub paused: Paused,
}

impl Group {
    /// What the tab sorts by: messages due and not out yet.
    pub fn backlog(&self) -> u64 {
        self.waiting.saturating_add(self.ready)
    }
}

/// The group settings of DQ.CONFIG's read form.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupConfig {
    /// GROUPLIMIT; None when the server does not say (an older module).
    pub limit: Option<u64>,
    /// GROUPRATE (`10/1s`); None when none.
    pub rate: Option<String>,
    /// `priority` or `fair`; None when the server does not say.
    pub order: Option<String>,
}

fn bad(command: &'static str, detail: impl Into<String>) -> Error {
    Error::Reply {
        command,
        detail: detail.into(),
    }
}

async fn send(con: &mut ConnectionManager, c: &redis::Cmd) -> Result<Value, Error> {
    c.query_async::<Value>(con).await.map_err(Error::from)
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::VerbatimString { text, .. } => Some(text.clone()),
        _ => None,
    }
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(n) => Some(*n),
        other => text(other).and_then(|t| t.parse().ok()),
    }
}

/// A record's fields: a flat field/value array (RESP2) or a map (RESP3).
fn record(v: Value) -> Vec<(String, Value)> {
    match v {
        Value::Map(pairs) => pairs
            .into_iter()
            .filter_map(|(k, v)| Some((text(&k)?, v)))
            .collect(),
        Value::Array(items) => {
            let mut out = Vec::new();
            let mut it = items.into_iter();
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                if let Some(k) = text(&k) {
                    out.push((k, v));
                }
            }
            out
        }
        _ => Vec::new(),
    }
}

/// DQ.GROUPS' reply: the next cursor (`0` ends) and the entries.
pub fn parse_groups(v: Value) -> Result<(Vec<u8>, Vec<Group>), Error> {
    const C: &str = "DQ.GROUPS";
    let Value::Array(mut top) = v else {
        return Err(bad(C, "not an array"));
    };
    if top.len() != 2 {
        return Err(bad(C, "not a cursor and entries"));
    }
    let entries = top.pop().unwrap_or_default();
    let cursor = match top.pop() {
        Some(Value::BulkString(b)) => b,
        Some(Value::SimpleString(s)) => s.into_bytes(),
        Some(Value::Int(n)) => n.to_string().into_bytes(),
        _ => return Err(bad(C, "no cursor")),
    };
    let Value::Array(entries) = entries else {
        return Err(bad(C, "entries are not an array"));
    };
    let mut groups = Vec::with_capacity(entries.len());
    for e in entries {
        let Value::Array(f) = e else {
            return Err(bad(C, "an entry is not an array"));
        };
        let count = |i: usize| {
            f.get(i)
                .and_then(int)
                .and_then(|n| u64::try_from(n).ok())
                .ok_or_else(|| bad(C, "an entry's count is not a non-negative integer"))
        };
        let name = match f.first() {
            Some(Value::BulkString(b)) => b.clone(),
            Some(Value::SimpleString(s)) => s.clone().into_bytes(),
            _ => return Err(bad(C, "an entry has no group name")),
        };
        let paused = match f.get(4) {
            None | Some(Value::Nil) => Paused::No,
            Some(v) => match int(v) {
                Some(-1) => Paused::UntilResumed,
                Some(t) if t >= 0 => Paused::Until(t as u64),
                _ => return Err(bad(C, "an entry's paused-until is not nil, -1 or a time")),
            },
        };
        groups.push(Group {
            name,
            waiting: count(1)?,
            ready: count(2)?,
            inflight: count(3)?,
            paused,
        });
    }
    Ok((cursor, groups))
}

/// What reading a queue's groups found.
#[derive(Debug, Default)]
pub struct Read {
    pub groups: Vec<Group>,
    /// The iteration stopped at the bound with groups left to look at.
    pub cut: bool,
}

/// The groups of `queue` matching `pattern`, DQ.GROUPS COUNT
/// [`READ_COUNT`] (or less) from cursor 0 on, until the cursor ends or
/// `budget` groups were looked at.
pub async fn read(
    con: &mut ConnectionManager,
    queue: &[u8],
    pattern: Option<&[u8]>,
    budget: usize,
) -> Result<Read, Error> {
    let mut out = Read::default();
    let mut cursor = b"0".to_vec();
    let mut looked = 0usize;
    loop {
        let count = READ_COUNT.min(budget - looked).max(1);
        let mut c = redis::cmd("DQ.GROUPS");
        c.arg(queue).arg(&cursor[..]);
        if let Some(p) = pattern {
            c.arg("MATCH").arg(p);
        }
        c.arg("COUNT").arg(count);
        let (next, mut got) = parse_groups(send(con, &c).await?)?;
        out.groups.append(&mut got);
        looked += count;
        if next == b"0" {
            return Ok(out);
        }
        if looked >= budget {
            out.cut = true;
            return Ok(out);
        }
        cursor = next;
    }
}

/// Backlog (waiting + ready) first, most first; then by name.
pub fn sort(groups: &mut [impl AsRef<Group>]) {
    groups.sort_by(|a, b| {
        let (a, b) = (a.as_ref(), b.as_ref());
        b.backlog()
            .cmp(&a.backlog())
            .then_with(|| a.name.cmp(&b.name))
    });
}

impl AsRef<Group> for Group {
    fn as_ref(&self) -> &Group {
        self
    }
}

/// The MATCH pattern of the tab's filter box, as the queue list's name
/// box reads its text: with `*`, `?` or `[` it is a glob as it stands;
/// else a part of the name (`*text*`, the text's glob characters escaped).
pub fn pattern(filter: &[u8]) -> Option<Vec<u8>> {
    if filter.is_empty() {
        return None;
    }
    if filter.iter().any(|b| matches!(b, b'*' | b'?' | b'[')) {
        return Some(filter.to_vec());
    }
    let mut p = b"*".to_vec();
    p.extend(admin::glob_escape(filter));
    p.push(b'*');
    Some(p)
}

/// A connection that keeps a copy of the last reply it read: so that one
/// DQ.STATS gives dq-client's typed record and the `groups` field, which
/// that record does not hold.
struct Tap {
    con: ConnectionManager,
    last: Option<Value>,
}

impl redis::aio::ConnectionLike for Tap {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a redis::Cmd) -> redis::RedisFuture<'a, Value> {
        Box::pin(async move {
            let v = self.con.req_packed_command(cmd).await?;
            self.last = Some(v.clone());
            Ok(v)
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<Value>> {
        self.con.req_packed_commands(pipeline, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.con.get_db()
    }
}

/// DQ.CONFIG (the read form), once: the queue's record and its group
/// fields, which that record does not hold.
pub async fn config(
    con: &ConnectionManager,
    queue: &[u8],
) -> Result<(QueueConfig, GroupConfig), Error> {
    let mut tap = Tap {
        con: con.clone(),
        last: None,
    };
    let config = admin::config(&mut tap, queue).await?;
    let mut groups = GroupConfig::default();
    for (k, v) in tap.last.map(record).unwrap_or_default() {
        match k.as_str() {
            "group-limit" => groups.limit = int(&v).and_then(|n| u64::try_from(n).ok()),
            "group-rate" => groups.rate = text(&v),
            "order" => groups.order = text(&v),
            _ => {}
        }
    }
    Ok((config, groups))
}

/// DQ.STATS, once: the queue's record and its `groups` (how many groups
/// it has; None when the server does not say, an older module).
pub async fn stats(con: &ConnectionManager, queue: &[u8]) -> Result<(Stats, Option<u64>), Error> {
    let mut tap = Tap {
        con: con.clone(),
        last: None,
    };
    let stats = admin::stats(&mut tap, queue).await?;
    let groups = tap
        .last
        .map(record)
        .unwrap_or_default()
        .into_iter()
        .find(|(k, _)| k == "groups")
        .and_then(|(_, v)| int(&v))
        .and_then(|n| u64::try_from(n).ok());
    Ok((stats, groups))
}

/// DQ.PAUSE queue [FOR ms] GROUP g.
pub async fn pause(
    con: &mut ConnectionManager,
    queue: &[u8],
    group: &[u8],
    for_: Option<Duration>,
) -> Result<(), Error> {
    let mut c = redis::cmd("DQ.PAUSE");
    c.arg(queue);
    if let Some(d) = for_ {
        c.arg("FOR")
            .arg(u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    }
    c.arg("GROUP").arg(group);
    match send(con, &c).await? {
        Value::Okay => Ok(()),
        Value::SimpleString(s) if s == "OK" => Ok(()),
        other => Err(bad("DQ.PAUSE", format!("{other:?}"))),
    }
}

/// DQ.RESUME queue GROUP g: whether the group was paused.
pub async fn resume(
    con: &mut ConnectionManager,
    queue: &[u8],
    group: &[u8],
) -> Result<bool, Error> {
    let mut c = redis::cmd("DQ.RESUME");
    c.arg(queue).arg("GROUP").arg(group);
    match send(con, &c).await? {
        Value::Int(n) => Ok(n != 0),
        other => Err(bad("DQ.RESUME", format!("{other:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn a_groups_reply_reads() {
        let reply = Value::Array(vec![
            bulk("74"),
            Value::Array(vec![
                Value::Array(vec![
                    bulk("t1"),
                    Value::Int(12),
                    Value::Int(0),
                    Value::Int(5),
                    Value::Nil,
                ]),
                Value::Array(vec![
                    bulk("t2"),
                    Value::Int(0),
                    Value::Int(1),
                    Value::Int(0),
                    Value::Int(-1),
                ]),
                Value::Array(vec![
                    bulk("t3"),
                    Value::Int(0),
                    Value::Int(0),
                    Value::Int(0),
                    Value::Int(1_767_225_600_000),
                ]),
            ]),
        ]);
        let (cursor, groups) = parse_groups(reply).unwrap();
        assert_eq!(cursor, b"74");
        assert_eq!(groups.len(), 3);
        assert_eq!(
            groups[0],
            Group {
                name: b"t1".to_vec(),
                waiting: 12,
                ready: 0,
                inflight: 5,
                paused: Paused::No
            }
        );
        assert_eq!(groups[1].paused, Paused::UntilResumed);
        assert_eq!(groups[2].paused, Paused::Until(1_767_225_600_000));
        assert!(parse_groups(Value::Array(vec![bulk("0")])).is_err());
        assert!(parse_groups(Value::Array(vec![
            bulk("0"),
            Value::Array(vec![Value::Array(vec![bulk("g"), Value::Int(-3)])])
        ]))
        .is_err());
    }

    #[test]
    fn sorted_by_backlog_then_name() {
        let g = |name: &str, waiting, ready| Group {
            name: name.as_bytes().to_vec(),
            waiting,
            ready,
            inflight: 9,
            paused: Paused::No,
        };
        let mut all = vec![g("c", 1, 1), g("a", 0, 2), g("b", 5, 0), g("d", 0, 0)];
        sort(&mut all);
        let names: Vec<&[u8]> = all.iter().map(|g| &g.name[..]).collect();
        assert_eq!(names, [&b"b"[..], b"a", b"c", b"d"]);
    }

    #[test]
    fn the_filter_is_a_part_of_the_name_or_a_glob() {
        assert_eq!(pattern(b""), None);
        assert_eq!(pattern(b"ten"), Some(b"*ten*".to_vec()));
        assert_eq!(pattern(b"a\\b"), Some(b"*a\\\\b*".to_vec()));
        assert_eq!(pattern(b"tenant-*"), Some(b"tenant-*".to_vec()));
        assert!(dq_glob::matches(&pattern(b"nt-1").unwrap(), b"tenant-12"));
    }

    #[test]
    fn records_read_under_either_protocol() {
        let flat = Value::Array(vec![bulk("groups"), Value::Int(3)]);
        let map = Value::Map(vec![(bulk("groups"), Value::Int(3))]);
        for v in [flat, map] {
            let r = record(v);
            assert_eq!(r.len(), 1);
            assert_eq!(int(&r[0].1), Some(3));
        }
    }
}
