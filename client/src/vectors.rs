//! Every case of tests/vectors/commands.json and replies.json (written by
//! scripts/client-vectors; docs/clients.md, "How the libraries are
//! tested"): the argv each call sends, what each reply becomes. No server:
//! a fake connection records the packed command and answers it with the
//! vector's reply, read by the redis crate's own RESP parser (RESP2 and
//! RESP3 alike), so each call runs as it does on a real connection.

use std::collections::VecDeque;
use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::{Cmd, Pipeline, RedisFuture, Value};
use serde_json::{json, Map, Value as Json};

use crate::admin::{self, Entry, GroupInfo, Message, QueueConfig, State, Stats};
use crate::error::Error;
use crate::outcome::{NackState, Outcome};
use crate::queue::{self, AddOptions, NackOptions};
use crate::reply::query;
use crate::schedule::{Missed, Overlap, Schedule, ScheduleInfo};
use crate::{args, commands};

fn cases(file: &str) -> Vec<Json> {
    let text = match file {
        "commands.json" => include_str!("../../tests/vectors/commands.json"),
        _ => include_str!("../../tests/vectors/replies.json"),
    };
    let doc: Json = serde_json::from_str(text).expect("the vectors are JSON");
    doc["cases"].as_array().expect("cases").clone()
}

/// A connection that sends nothing: it records each packed command, and
/// answers with the next of `replies`, else with a plausible reply.
#[derive(Default)]
struct Fake {
    sent: Vec<Vec<Vec<u8>>>,
    replies: VecDeque<Value>,
}

/// A command as it goes on the wire, read back: its arguments' bytes.
fn wire(cmd: &Cmd) -> Vec<Vec<u8>> {
    match redis::parse_redis_value(&cmd.get_packed_command()) {
        Ok(Value::Array(items)) => items
            .into_iter()
            .map(|a| match a {
                Value::BulkString(b) => b,
                other => panic!("a packed argument that is not a bulk string: {other:?}"),
            })
            .collect(),
        other => panic!("a packed command that is not an array: {other:?}"),
    }
}

impl ConnectionLike for Fake {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let argv = wire(cmd);
        let reply = self
            .replies
            .pop_front()
            .unwrap_or_else(|| match argv[0].as_slice() {
                b"DQ.ADD" => Value::BulkString(b"id".to_vec()),
                b"DQ.NACK" => Value::SimpleString("ready".into()),
                b"DQ.GET" | b"DQ.POP" | b"DQ.MPOP" | b"DQ.SCHEDULE" | b"DQ.WAIT" => Value::Nil,
                b"DQ.PEEK" | b"DQ.STATS" | b"DQ.SCHEDULES" | b"DQ.QUEUES" => Value::Array(vec![]),
                b"DQ.SCAN" | b"DQ.GROUPS" => {
                    Value::Array(vec![Value::BulkString(b"0".to_vec()), Value::Array(vec![])])
                }
                // A log that reaches past any AFTER asked: no restart.
                b"DQ.EVENTS" => Value::Array(vec![Value::Int(1_000_000), Value::Array(vec![])]),
                b"DQ.PAUSE" => Value::Okay,
                b"DQ.CONFIG" if argv.len() > 2 => Value::Okay,
                b"DQ.CONFIG" => Value::Array(vec![]),
                _ => Value::Int(1),
            });
        self.sent.push(argv);
        Box::pin(async move { Ok(reply) })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        _: &'a Pipeline,
        _: usize,
        _: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        unimplemented!("no dq call pipelines")
    }

    fn get_db(&self) -> i64 {
        0
    }
}

// --- the neutral call, in Rust ---------------------------------------------------

/// The arguments of a case, read as the Rust API takes them. A value the
/// API has no type for is a broken vector (its case says `not_in` rust).
struct A<'a>(&'a Json);

impl A<'_> {
    fn has(&self, k: &str) -> bool {
        self.0.get(k).is_some()
    }
    fn text(&self, k: &str) -> Option<String> {
        self.0.get(k).map(|v| v.as_str().expect(k).to_owned())
    }
    fn bytes(&self, k: &str) -> Option<Vec<u8>> {
        self.text(k).map(String::into_bytes)
    }
    fn u64(&self, k: &str) -> Option<u64> {
        self.0.get(k).map(|v| v.as_u64().expect(k))
    }
    /// A duration: integer milliseconds, or text in the server's grammar
    /// (`"30s"`), read by [`crate::parse_duration`] as a user would.
    fn ms(&self, k: &str) -> Result<Option<Duration>, Error> {
        match self.0.get(k) {
            None => Ok(None),
            Some(Json::String(text)) => crate::parse_duration(text).map(Some),
            Some(v) => Ok(Some(Duration::from_millis(v.as_u64().expect(k)))),
        }
    }
    fn count(&self) -> usize {
        self.u64("count").expect("a count: Rust has no default one") as usize
    }
    fn flag(&self, k: &str) -> bool {
        self.0.get(k).is_some_and(|v| v.as_bool().expect(k))
    }
    fn list(&self, k: &str) -> Vec<Vec<u8>> {
        let items = self.0[k].as_array().expect(k);
        items
            .iter()
            .map(|v| v.as_str().expect(k).as_bytes().to_vec())
            .collect()
    }
    fn state(&self) -> Result<Option<State>, Error> {
        // The Rust way to write a state from text: State's FromStr.
        self.text("state")
            .map(|s| s.parse().map_err(Error::Config))
            .transpose()
    }
    /// A DQ.CONFIG SET value as the text pairs take it.
    fn setting(&self, k: &str) -> Option<String> {
        self.0.get(k).map(|v| match v {
            Json::String(s) => s.clone(),
            n => n.to_string(),
        })
    }
}

fn refs(list: &[Vec<u8>]) -> Vec<&[u8]> {
    list.iter().map(Vec::as_slice).collect()
}

/// The vector's call on this library, its result in the vectors' form.
async fn call(con: &mut Fake, case: &Json) -> Result<Json, Error> {
    let a = A(&case["args"]);
    let q = case["queue"].as_str().unwrap_or_default();
    let qb = q.as_bytes();
    Ok(match case["op"].as_str().expect("op") {
        "add" => {
            let o = AddOptions {
                delay: a.ms("delay_ms")?,
                at_ms: a.u64("at_ms"),
                id: a.bytes("id"),
                nx: a.flag("nx"),
                xx: a.flag("xx"),
                priority: a
                    .0
                    .get("priority")
                    .map(|p| i32::try_from(p.as_i64().unwrap()).unwrap()),
                max_attempts: a.u64("max_attempts").map(|n| u32::try_from(n).unwrap()),
                backoff: a.text("backoff"),
                group: a.bytes("group"),
                ttl: a.ms("ttl_ms")?,
                retain: a.ms("retain_ms")?,
                shard_key: None,
            };
            let payload = a.bytes("payload").unwrap();
            text(queue::add(con, q, &payload, &o).await?)
        }
        "pop" => {
            let cmd = commands::pop(q, a.count(), a.ms("block_ms")?, a.ms("lease_ms")?);
            let popped = commands::parse_pop(query(con, &cmd).await?)?;
            Json::Array(popped.into_iter().map(|p| delivery(&p)).collect())
        }
        "mpop" => {
            let queues: Vec<String> = a
                .list("queues")
                .into_iter()
                .map(|q| String::from_utf8(q).unwrap())
                .collect();
            let cmd = commands::mpop(&queues, a.count(), a.ms("block_ms")?, a.ms("lease_ms")?);
            let (index, popped) = commands::parse_mpop(query(con, &cmd).await?, &queues)?;
            let taken = (!popped.is_empty()).then(|| queues[index].clone());
            json!({"queue": taken, "deliveries": popped.iter().map(delivery).collect::<Vec<_>>()})
        }
        "ack" => json!(queue::ack(con, q, &refs(&a.list("ids"))).await?),
        "done" => {
            let pairs: Vec<(Vec<u8>, Vec<u8>)> = a.0["results"]
                .as_array()
                .expect("results")
                .iter()
                .map(|pair| {
                    let text = |i: usize| pair[i].as_str().expect("id, result").as_bytes().to_vec();
                    (text(0), text(1))
                })
                .collect();
            let pairs: Vec<(&[u8], &[u8])> = pairs
                .iter()
                .map(|(id, r)| (id.as_slice(), r.as_slice()))
                .collect();
            json!(admin::done(con, qb, &pairs).await?)
        }
        "wait" => {
            let timeout = a.ms("timeout_ms")?.unwrap_or_default();
            match admin::wait(con, qb, &a.bytes("id").unwrap(), timeout).await? {
                None => Json::Null,
                Some(o) => json!({"state": o.state(), "value": o.value().map(lossy)}),
            }
        }
        "events" => {
            let page = admin::events(con, qb, a.u64("after"), a.count()).await?;
            let events: Vec<Json> = page
                .events
                .iter()
                .map(|e| {
                    json!({
                        "seq": e.seq, "at": e.at, "type": e.kind.as_str(), "id": e.id.as_deref().map(lossy),
                        "attempt": e.attempt, "detail": e.detail.as_deref().map(lossy),
                    })
                })
                .collect();
            json!({"last-seq": page.last_seq, "events": events})
        }
        "nack" => {
            let o = NackOptions {
                delay: a.ms("delay_ms")?,
                dead: a.flag("dead"),
                attempt: a.u64("attempt"),
                error: a.text("error"),
            };
            let state = queue::nack(con, q, &a.bytes("id").unwrap(), &o).await?;
            json!(match state {
                NackState::Delayed => "delayed",
                NackState::Ready => "ready",
                NackState::Dead => "dead",
            })
        }
        "touch" => {
            let id = a.bytes("id").unwrap();
            let progress = a.bytes("progress");
            let (lease, attempt) = (a.ms("lease_ms")?, a.u64("attempt"));
            json!(queue::touch(con, q, &id, lease, attempt, progress.as_deref()).await?)
        }
        "cancel" => json!(admin::cancel(con, qb, &refs(&a.list("ids"))).await?),
        "get" => admin::get(con, qb, &a.bytes("id").unwrap())
            .await?
            .map_or(Json::Null, |m| message(&m)),
        "peek" => {
            let state = a.state()?.expect("a state");
            entries(&admin::peek(con, qb, state, a.count()).await?)
        }
        "scan" => {
            let cursor = a.text("cursor").unwrap().parse().expect("a numeric cursor");
            let (next, got) = admin::scan_page(con, qb, a.state()?, cursor, a.count()).await?;
            json!({"cursor": next.to_string(), "entries": entries(&got)})
        }
        "redrive" => json!(match (a.u64("count"), a.has("ids")) {
            (Some(n), false) => admin::redrive_count(con, qb, n as usize).await?,
            (None, true) => admin::redrive_ids(con, qb, &refs(&a.list("ids"))).await?,
            (None, false) => admin::redrive_all(con, qb).await?,
            (Some(_), true) => unreachable!("not in Rust: one function each"),
        }),
        "purge" => json!(admin::purge(con, qb, a.state()?).await?),
        "stats" => stats(&admin::stats(con, qb).await?),
        "config" => config(&admin::config(con, qb).await?),
        "config_set" => {
            // The pairs in the order the vectors (and Python, Node.js) send them.
            let pairs: Vec<(&str, String)> = [
                ("LEASE", "lease_ms"),
                ("MAXATTEMPTS", "max_attempts"),
                ("BACKOFF", "backoff"),
                ("RATE", "rate"),
                ("MAXINFLIGHT", "max_inflight"),
                ("RETAIN", "retain_ms"),
                ("RETAINMAX", "retain_max"),
                ("EVENTS", "events"),
                ("GROUPLIMIT", "group_limit"),
                ("GROUPRATE", "group_rate"),
                ("ORDER", "order"),
            ]
            .into_iter()
            .filter_map(|(field, k)| Some((field, a.setting(k)?)))
            .collect();
            let pairs: Vec<(&str, &str)> = pairs.iter().map(|(f, v)| (*f, v.as_str())).collect();
            admin::config_set(con, qb, &pairs).await?;
            Json::Null
        }
        "schedule" => {
            // `every` is a duration written with a unit, `every_ms` one in ms.
            let every = match a.ms("every_ms")? {
                Some(every) => Some(every),
                None => a.ms("every")?,
            };
            let mut s = match (every, a.text("cron")) {
                (Some(every), None) => Schedule::every(every),
                (None, Some(cron)) => Schedule::cron(cron),
                _ => unreachable!("not in Rust: a Schedule is every or cron"),
            };
            if let Some(tz) = a.text("tz") {
                s = s.tz(tz);
            }
            if let Some(start) = a.u64("start") {
                s = s.start(start);
            }
            if let Some(end) = a.u64("end") {
                s = s.end(end);
            }
            if let Some(limit) = a.u64("limit") {
                s = s.limit(limit);
            }
            if let Some(missed) = a.text("missed") {
                s = s.missed(match missed.as_str() {
                    "skip" => Missed::Skip,
                    "one" => Missed::One,
                    "all" => Missed::All,
                    other => unreachable!("not in Rust: MISSED {other}"),
                });
            }
            if let Some(overlap) = a.text("overlap") {
                s = s.overlap(if overlap == "skip" {
                    Overlap::Skip
                } else {
                    Overlap::Allow
                });
            }
            if a.flag("nx") {
                s = s.nx();
            }
            if let Some(p) = a.0.get("priority") {
                s = s.priority(i32::try_from(p.as_i64().unwrap()).unwrap());
            }
            if let Some(n) = a.u64("max_attempts") {
                s = s.max_attempts(u32::try_from(n).unwrap());
            }
            if let Some(b) = a.text("backoff") {
                s = s.backoff(b);
            }
            if let Some(g) = a.bytes("group") {
                s = s.group(g);
            }
            if let Some(t) = a.ms("ttl_ms")? {
                s = s.ttl(t);
            }
            let (name, payload) = (a.bytes("name").unwrap(), a.bytes("payload").unwrap());
            json!(admin::schedule(con, qb, &name, &payload, &s).await?)
        }
        "unschedule" => json!(admin::unschedule(con, qb, &refs(&a.list("names"))).await?),
        "schedules" => Json::Array(
            admin::schedules(con, qb)
                .await?
                .iter()
                .map(schedule)
                .collect(),
        ),
        "pause" => {
            match a.bytes("group") {
                Some(g) => admin::pause_group(con, qb, &g, a.ms("for_ms")?).await?,
                None => admin::pause(con, qb, a.ms("for_ms")?).await?,
            }
            Json::Null
        }
        "resume" => json!(match a.bytes("group") {
            Some(g) => admin::resume_group(con, qb, &g).await?,
            None => admin::resume(con, qb).await?,
        }),
        "groups" => {
            let cursor = a.text("cursor").unwrap();
            let pattern = a.bytes("match");
            let (next, got) =
                admin::groups_page(con, qb, &cursor, pattern.as_deref(), a.count()).await?;
            json!({"cursor": next, "groups": got.iter().map(group).collect::<Vec<_>>()})
        }
        "queues" => {
            let pattern = a.bytes("match");
            if a.flag("with_stats") {
                let all = admin::queues_with_stats(con, pattern.as_deref()).await?;
                Json::Array(
                    all.iter()
                        .map(|(n, s)| json!([lossy(n), stats(s)]))
                        .collect(),
                )
            } else {
                let names = match pattern {
                    Some(p) => admin::queues_matching(con, &p).await?,
                    None => admin::queues(con).await?,
                };
                Json::Array(names.iter().map(|n| json!(lossy(n))).collect())
            }
        }
        op => panic!("an operation the vectors do not have: {op}"),
    })
}

/// The Consumer's own NACK and TOUCH (fenced: they always carry ATTEMPT)
/// of a case that has an attempt: the same argv as Queue::nack and
/// Queue::touch.
fn consumer_argv(case: &Json) -> Option<Vec<Vec<u8>>> {
    let a = A(&case["args"]);
    let (q, id, attempt) = (case["queue"].as_str()?, a.bytes("id")?, a.u64("attempt")?);
    let cmd = match case["op"].as_str()? {
        "nack" => {
            let error = a.text("error").unwrap_or_default();
            let outcome = if a.flag("dead") {
                Outcome::Dead { error }
            } else {
                Outcome::Nack {
                    delay: a.ms("delay_ms").ok()?,
                    error,
                }
            };
            commands::nack(q, &id, attempt, &outcome)
        }
        "touch" => match a.bytes("progress") {
            Some(progress) => {
                commands::touch_progress(q, &id, a.ms("lease_ms").ok()??, attempt, &progress)
            }
            None => commands::touch(q, &id, a.ms("lease_ms").ok()??, attempt),
        },
        _ => return None,
    };
    Some(wire(&cmd))
}

// --- results in the vectors' form -------------------------------------------------

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn text(b: Option<Vec<u8>>) -> Json {
    b.map_or(Json::Null, |b| json!(lossy(&b)))
}

fn delivery(p: &commands::Popped) -> Json {
    json!({"id": lossy(&p.id), "payload": lossy(&p.payload), "attempt": p.attempt})
}

fn entries(all: &[Entry]) -> Json {
    let entry = |e: &Entry| {
        json!({"id": lossy(&e.id), "payload": lossy(&e.payload), "attempt": e.attempt, "time": e.time,
               "last-error": text(e.last_error.clone())})
    };
    Json::Array(all.iter().map(entry).collect())
}

fn message(m: &Message) -> Json {
    json!({
        "id": lossy(&m.id), "state": m.state, "payload": lossy(&m.payload), "priority": m.priority,
        "attempt": m.attempt, "due-at": m.due_at, "lease-deadline": m.lease_deadline, "added-at": m.added_at,
        "replacement-pending": u8::from(m.replacement_pending), "max-attempts": m.max_attempts,
        "max-attempts-from": m.max_attempts_from, "backoff": m.backoff, "backoff-from": m.backoff_from,
        "dead-reason": m.dead_reason, "died-at": m.died_at, "expires-at": m.expires_at,
        "group": text(m.group.clone()), "waiting-for": text(m.waiting_for.clone()),
        "attempts-left": m.attempts_left, "last-error": text(m.last_error.clone()),
        "result": text(m.result.clone()), "finished-at": m.finished_at, "retained-until": m.retained_until,
        "progress": text(m.progress.clone()),
    })
}

fn stats(s: &Stats) -> Json {
    let mut out: Map<String, Json> = State::ALL
        .iter()
        .map(|st| (st.as_str().to_owned(), json!(s.count(*st))))
        .chain(
            s.counters()
                .iter()
                .map(|(k, v)| ((*k).to_owned(), json!(v))),
        )
        .collect();
    out.extend([
        (
            "oldest-ready-age-ms".to_owned(),
            json!(s.oldest_ready_age_ms),
        ),
        ("next-due-at".to_owned(), json!(s.next_due_at)),
        ("schedules".to_owned(), json!(s.schedules)),
        ("groups".to_owned(), json!(s.groups)),
        ("paused".to_owned(), json!(u8::from(s.paused))),
        ("paused-until".to_owned(), json!(s.paused_until)),
        ("rate".to_owned(), json!(s.rate)),
        ("max-inflight".to_owned(), json!(s.max_inflight)),
    ]);
    Json::Object(out)
}

fn config(c: &QueueConfig) -> Json {
    json!({
        "lease-ms": c.lease_ms, "lease-ms-from": c.lease_ms_from, "max-attempts": c.max_attempts,
        "max-attempts-from": c.max_attempts_from, "backoff": c.backoff, "backoff-from": c.backoff_from,
        "rate": c.rate, "max-inflight": c.max_inflight, "paused": u8::from(c.paused),
        "paused-until": c.paused_until, "throttled": c.throttled, "retain-ms": c.retain_ms,
        "retain-ms-from": c.retain_ms_from, "retain-max": c.retain_max, "events": c.events,
        "group-limit": c.group_limit, "group-rate": c.group_rate, "order": c.order,
    })
}

fn group(g: &GroupInfo) -> Json {
    json!({
        "name": g.name_lossy(), "waiting": g.waiting, "ready": g.ready, "inflight": g.inflight,
        "paused": g.paused, "paused-until": g.paused_until,
    })
}

fn schedule(s: &ScheduleInfo) -> Json {
    json!({
        "name": lossy(&s.name), "spec": s.spec, "tz": s.tz, "next-run": s.next_run, "last-run": s.last_run,
        "runs": s.runs, "skipped": s.skipped, "limit": s.limit, "start": s.start, "end": s.end,
        "missed": s.missed, "overlap": s.overlap, "payload": lossy(&s.payload), "priority": s.priority,
        "max-attempts": s.max_attempts, "backoff": s.backoff, "group": text(s.group.clone()),
        "ttl": s.ttl.map(args::ms),
    })
}

/// Where `got` lacks what `want` says (a record may hold more fields).
fn mismatch(want: &Json, got: &Json, at: &str) -> Option<String> {
    match (want, got) {
        (Json::Object(w), Json::Object(g)) => w.iter().find_map(|(k, v)| match g.get(k) {
            Some(x) => mismatch(v, x, &format!("{at}.{k}")),
            None => Some(format!("{at}: no {k} in {got}")),
        }),
        (Json::Array(w), Json::Array(g)) if w.len() == g.len() => w
            .iter()
            .zip(g)
            .enumerate()
            .find_map(|(i, (v, x))| mismatch(v, x, &format!("{at}[{i}]"))),
        _ if want == got => None,
        _ => Some(format!("{at}: {got}, not {want}")),
    }
}

/// The vocabulary's name of an error (docs/client-vocabulary.md).
fn error_name(e: &Error) -> &'static str {
    match e {
        Error::StaleDelivery(_) => "StaleDelivery",
        Error::UnknownMessage { .. } => "UnknownMessage",
        Error::WrongType(_) => "WrongType",
        Error::OutOfMemory(_) => "OutOfMemory",
        Error::Redis(_) => "DqError",
        Error::Reply { .. } => "Reply",
        Error::Config(_) => "Config",
        Error::Gap { .. } => "Gap",
        Error::EventLogRestarted { .. } => "EventLogRestarted",
    }
}

fn mine(case: &Json) -> bool {
    case["not_in"].get("rust").is_none()
}

fn run<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime")
        .block_on(f)
}

#[test]
fn every_call_sends_its_argv_or_is_refused_before_sending() {
    let all = cases("commands.json");
    let mut failed = Vec::new();
    for case in all.iter().filter(|c| mine(c)) {
        let name = case["name"].as_str().unwrap();
        let mut con = Fake::default();
        let result = run(call(&mut con, case));
        if case["refused"].as_bool() == Some(true) {
            match result {
                Err(Error::Config(_)) if con.sent.is_empty() => {}
                other => failed.push(format!(
                    "{name}: not refused: {other:?}, sent {:?}",
                    con.sent
                )),
            }
            continue;
        }
        let want: Vec<Vec<u8>> = case["argv"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().as_bytes().to_vec())
            .collect();
        if let Err(e) = result {
            failed.push(format!("{name}: {e}"));
        } else if con.sent != [want.clone()] {
            let sent: Vec<Vec<String>> = con
                .sent
                .iter()
                .map(|c| c.iter().map(|a| lossy(a)).collect())
                .collect();
            failed.push(format!("{name}: sent {sent:?}"));
        }
        if let Some(argv) = consumer_argv(case) {
            if argv != want {
                failed.push(format!(
                    "{name}: the Consumer sends {:?}",
                    argv.iter().map(|a| lossy(a)).collect::<Vec<_>>()
                ));
            }
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} cases:\n{}",
        failed.len(),
        all.len(),
        failed.join("\n")
    );
}

#[test]
fn every_reply_reads_as_it_says() {
    let all = cases("replies.json");
    let mut failed = Vec::new();
    for case in all.iter().filter(|c| mine(c)) {
        let name = case["name"].as_str().unwrap();
        let resp = case["resp"].as_str().unwrap().as_bytes();
        let reply = redis::parse_redis_value(resp).expect("RESP the redis crate reads");
        let mut con = Fake {
            replies: VecDeque::from([reply]),
            ..Fake::default()
        };
        let result = run(call(&mut con, case));
        match (result, case.get("raises")) {
            (Ok(got), None) => {
                if let Some(m) = mismatch(&case["result"], &got, "result") {
                    failed.push(format!("{name}: {m}"));
                }
            }
            (Err(e), Some(raises)) => {
                let says = case["says"].as_str().unwrap();
                if error_name(&e) != raises || !e.to_string().contains(says) {
                    failed.push(format!(
                        "{name}: {} {e}, not {raises} saying {says}",
                        error_name(&e)
                    ));
                }
            }
            (Ok(got), Some(raises)) => failed.push(format!("{name}: {got}, not {raises}")),
            (Err(e), None) => failed.push(format!("{name}: {} {e}", error_name(&e))),
        }
        if !con.replies.is_empty() {
            failed.push(format!("{name}: the reply was not read"));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} cases:\n{}",
        failed.len(),
        all.len(),
        failed.join("\n")
    );
}

#[test]
fn the_vectors_cover_every_operation_and_form() {
    let ops: std::collections::BTreeSet<String> = cases("commands.json")
        .iter()
        .map(|c| c["op"].as_str().unwrap().to_owned())
        .collect();
    for op in [
        "add",
        "pop",
        "mpop",
        "ack",
        "nack",
        "touch",
        "cancel",
        "get",
        "peek",
        "scan",
        "redrive",
        "purge",
        "stats",
        "config",
        "config_set",
        "schedule",
        "unschedule",
        "schedules",
        "pause",
        "resume",
        "queues",
        "done",
        "wait",
        "events",
        "groups",
    ] {
        assert!(ops.contains(op), "{op}");
    }
    let rust: usize = cases("commands.json").iter().filter(|c| mine(c)).count();
    assert!(rust > 100, "{rust} command cases for Rust");
}
