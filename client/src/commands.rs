//! The dq commands the consume loop sends, and how their replies read.
//! Pure: built and parsed without a server, so tested at unit speed.

use std::time::Duration;

use redis::{Cmd, Value};

use crate::error::Error;
use crate::outcome::{NackState, Outcome};

/// The longest `ERROR` text DQ.NACK accepts.
pub const MAX_ERROR_BYTES: usize = 4096;

/// The longest `PROGRESS` value DQ.TOUCH accepts (64 KiB).
pub const MAX_PROGRESS_BYTES: usize = 65_536;

/// A PROGRESS value the server takes: at most [`MAX_PROGRESS_BYTES`].
pub(crate) fn check_progress(progress: &[u8]) -> Result<(), Error> {
    crate::args::require(progress.len() <= MAX_PROGRESS_BYTES, || {
        format!(
            "progress is at most {MAX_PROGRESS_BYTES} bytes (the server's limit), not {}",
            progress.len()
        )
    })
}

/// `text` cut to at most `max` bytes at a character boundary.
pub fn truncate_error(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Milliseconds for a command argument; a lease or block of 0 ms would
/// mean something else (forever, or an error), so shorter rounds up to 1.
fn ms(d: Duration) -> u64 {
    crate::args::ms(d).max(1)
}

/// DQ.POP; without `block` it takes only what is ready now, without
/// `lease` the queue's lease applies (the consumer always gives its own).
pub(crate) fn pop(
    queue: &str,
    count: usize,
    block: Option<Duration>,
    lease: Option<Duration>,
) -> Cmd {
    let mut cmd = redis::cmd("DQ.POP");
    cmd.arg(queue);
    pop_options(&mut cmd, count, block, lease);
    cmd
}

/// DQ.MPOP over `queues` in their order, with DQ.POP's options.
pub(crate) fn mpop(
    queues: &[String],
    count: usize,
    block: Option<Duration>,
    lease: Option<Duration>,
) -> Cmd {
    let mut cmd = redis::cmd("DQ.MPOP");
    cmd.arg(queues.len());
    for queue in queues {
        cmd.arg(queue);
    }
    pop_options(&mut cmd, count, block, lease);
    cmd
}

/// `COUNT n [BLOCK ms] [LEASE ms]`, the options DQ.POP and DQ.MPOP share.
fn pop_options(cmd: &mut Cmd, count: usize, block: Option<Duration>, lease: Option<Duration>) {
    cmd.arg("COUNT").arg(count);
    if let Some(block) = block {
        cmd.arg("BLOCK").arg(ms(block));
    }
    if let Some(lease) = lease {
        cmd.arg("LEASE").arg(ms(lease));
    }
}

/// DQ.NACK for a `Nack` or `Dead` outcome, fenced to its delivery.
pub(crate) fn nack(queue: &str, id: &[u8], attempt: u64, outcome: &Outcome) -> Cmd {
    let mut cmd = redis::cmd("DQ.NACK");
    cmd.arg(queue).arg(id);
    let error = match outcome {
        Outcome::Nack { delay, error } => {
            if let Some(delay) = delay {
                // DELAY 0 is valid here: ready again at once.
                cmd.arg("DELAY")
                    .arg(u64::try_from(delay.as_millis()).unwrap_or(u64::MAX));
            }
            error
        }
        Outcome::Dead { error } => {
            cmd.arg("DEAD");
            error
        }
        Outcome::Ack | Outcome::Done(_) => unreachable!("an ACK or DONE is not a NACK"),
    };
    cmd.arg("ATTEMPT").arg(attempt);
    // The server refuses an empty or over-long ERROR; an empty one says
    // nothing anyway.
    let error = truncate_error(error, MAX_ERROR_BYTES);
    if !error.is_empty() {
        cmd.arg("ERROR").arg(error);
    }
    cmd
}

pub(crate) fn touch(queue: &str, id: &[u8], lease: Duration, attempt: u64) -> Cmd {
    let mut cmd = redis::cmd("DQ.TOUCH");
    cmd.arg(queue)
        .arg(id)
        .arg("LEASE")
        .arg(ms(lease))
        .arg("ATTEMPT")
        .arg(attempt);
    cmd
}

/// A delivery's progress: its heartbeat's TOUCH (the worker's lease, fenced
/// by the attempt) with `PROGRESS value`.
pub(crate) fn touch_progress(
    queue: &str,
    id: &[u8],
    lease: Duration,
    attempt: u64,
    progress: &[u8],
) -> Cmd {
    let mut cmd = touch(queue, id, lease, attempt);
    cmd.arg("PROGRESS").arg(progress);
    cmd
}

/// One entry of a POP reply.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Popped {
    pub id: Vec<u8>,
    pub payload: Vec<u8>,
    pub attempt: u64,
}

fn bytes(v: Value) -> Option<Vec<u8>> {
    match v {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.into_bytes()),
        _ => None,
    }
}

/// POP's reply: nil, or an array of `[id, payload, attempt]`.
pub(crate) fn parse_pop(reply: Value) -> Result<Vec<Popped>, Error> {
    let bad = |detail: String| Error::Reply {
        command: "DQ.POP",
        detail,
    };
    let entries = match reply {
        Value::Nil => return Ok(Vec::new()),
        Value::Array(entries) => entries,
        other => return Err(bad(format!("{other:?}"))),
    };
    entries
        .into_iter()
        .map(|entry| {
            let Value::Array(fields) = entry else {
                return Err(bad(format!("entry {entry:?}")));
            };
            let shown = format!("entry {fields:?}");
            let mut fields = fields.into_iter();
            match (fields.next(), fields.next(), fields.next(), fields.next()) {
                (Some(id), Some(payload), Some(Value::Int(attempt)), None) => Ok(Popped {
                    id: bytes(id).ok_or_else(|| bad(shown.clone()))?,
                    payload: bytes(payload).ok_or_else(|| bad(shown.clone()))?,
                    attempt: u64::try_from(attempt).map_err(|_| bad(shown.clone()))?,
                }),
                _ => Err(bad(shown)),
            }
        })
        .collect()
}

/// MPOP's reply: nil, or `[queue, entries]` — which of `queues` (its index)
/// the entries came from.
pub(crate) fn parse_mpop(reply: Value, queues: &[String]) -> Result<(usize, Vec<Popped>), Error> {
    let bad = |detail: String| Error::Reply {
        command: "DQ.MPOP",
        detail,
    };
    let fields = match reply {
        Value::Nil => return Ok((0, Vec::new())),
        Value::Array(fields) => fields,
        other => return Err(bad(format!("{other:?}"))),
    };
    let mut fields = fields.into_iter();
    let (Some(queue), Some(entries), None) = (fields.next(), fields.next(), fields.next()) else {
        return Err(bad("expected [queue, entries]".into()));
    };
    let queue = bytes(queue).ok_or_else(|| bad("a queue name that is not a string".into()))?;
    let index = queues
        .iter()
        .position(|q| q.as_bytes() == queue.as_slice())
        .ok_or_else(|| {
            bad(format!(
                "entries of '{}', a queue it was not asked for",
                String::from_utf8_lossy(&queue)
            ))
        })?;
    let entries = parse_pop(entries).map_err(|e| match e {
        Error::Reply { detail, .. } => bad(detail),
        e => e,
    })?;
    Ok((index, entries))
}

/// NACK's reply: the new state, or nil when the id was not in flight.
pub(crate) fn parse_nack(reply: &Value) -> Result<Option<NackState>, Error> {
    let state = match reply {
        Value::Nil => return Ok(None),
        Value::SimpleString(s) => s.as_bytes(),
        Value::BulkString(b) => b.as_slice(),
        Value::Okay => b"OK",
        _ => b"",
    };
    match state {
        b"delayed" => Ok(Some(NackState::Delayed)),
        b"ready" => Ok(Some(NackState::Ready)),
        b"dead" => Ok(Some(NackState::Dead)),
        _ => Err(Error::Reply {
            command: "DQ.NACK",
            detail: format!("{reply:?}"),
        }),
    }
}

/// Whether a command failed because the delivery it names is over.
pub(crate) fn is_stale(e: &redis::RedisError) -> bool {
    e.code() == Some("STALE")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::sent as args;

    #[test]
    fn pop_names_count_block_and_lease_in_ms() {
        let cmd = pop(
            "q",
            16,
            Some(Duration::from_secs(5)),
            Some(Duration::from_micros(10)),
        );
        assert_eq!(
            args(&cmd),
            ["DQ.POP", "q", "COUNT", "16", "BLOCK", "5000", "LEASE", "1"]
        );
        let cmd = pop("q", 2, None, Some(Duration::from_secs(30)));
        assert_eq!(args(&cmd), ["DQ.POP", "q", "COUNT", "2", "LEASE", "30000"]);
    }

    #[test]
    fn mpop_names_its_queues_in_order() {
        let queues = ["{j}urgent".to_string(), "{j}bulk".to_string()];
        let cmd = mpop(
            &queues,
            8,
            Some(Duration::from_secs(2)),
            Some(Duration::from_secs(30)),
        );
        assert_eq!(
            args(&cmd),
            [
                "DQ.MPOP",
                "2",
                "{j}urgent",
                "{j}bulk",
                "COUNT",
                "8",
                "BLOCK",
                "2000",
                "LEASE",
                "30000"
            ]
        );
        let cmd = mpop(&queues, 1, None, Some(Duration::from_millis(5)));
        assert_eq!(
            args(&cmd),
            [
                "DQ.MPOP",
                "2",
                "{j}urgent",
                "{j}bulk",
                "COUNT",
                "1",
                "LEASE",
                "5"
            ]
        );
    }

    #[test]
    fn mpop_replies_parse() {
        let queues = ["a".to_string(), "b".to_string()];
        let (index, entries) = parse_mpop(Value::Nil, &queues).unwrap();
        assert_eq!((index, entries.len()), (0, 0));
        let entry = Value::Array(vec![
            Value::BulkString(b"id".to_vec()),
            Value::BulkString(b"p".to_vec()),
            Value::Int(3),
        ]);
        let reply = Value::Array(vec![
            Value::BulkString(b"b".to_vec()),
            Value::Array(vec![entry.clone()]),
        ]);
        let (index, entries) = parse_mpop(reply, &queues).unwrap();
        assert_eq!(index, 1);
        assert_eq!(
            entries,
            vec![Popped {
                id: b"id".to_vec(),
                payload: b"p".to_vec(),
                attempt: 3
            }]
        );
        for bad in [
            Value::Int(1),
            Value::Array(vec![Value::BulkString(b"a".to_vec())]),
            // A queue it was not asked for.
            Value::Array(vec![
                Value::BulkString(b"c".to_vec()),
                Value::Array(vec![entry.clone()]),
            ]),
            Value::Array(vec![
                Value::BulkString(b"a".to_vec()),
                Value::Array(vec![Value::Int(1)]),
            ]),
        ] {
            let e = parse_mpop(bad, &queues).unwrap_err();
            assert!(e.to_string().contains("DQ.MPOP"), "{e}");
        }
    }

    #[test]
    fn nack_is_fenced_and_carries_delay_dead_and_error() {
        let retry = Outcome::Nack {
            delay: Some(Duration::from_millis(1500)),
            error: "HTTP 503".into(),
        };
        assert_eq!(
            args(&nack("q", b"id", 3, &retry)),
            ["DQ.NACK", "q", "id", "DELAY", "1500", "ATTEMPT", "3", "ERROR", "HTTP 503"]
        );
        let backoff = Outcome::Nack {
            delay: None,
            error: String::new(),
        };
        assert_eq!(
            args(&nack("q", b"id", 1, &backoff)),
            ["DQ.NACK", "q", "id", "ATTEMPT", "1"]
        );
        let dead = Outcome::Dead {
            error: "HTTP 410".into(),
        };
        assert_eq!(
            args(&nack("q", b"id", 2, &dead)),
            ["DQ.NACK", "q", "id", "DEAD", "ATTEMPT", "2", "ERROR", "HTTP 410"]
        );
    }

    #[test]
    fn nack_error_is_cut_to_what_the_server_accepts() {
        let long = "é".repeat(3000); // 6000 bytes, two per character
        let cmd = nack(
            "q",
            b"id",
            1,
            &Outcome::Dead {
                error: long.clone(),
            },
        );
        let error = args(&cmd).pop().unwrap_or_default();
        assert_eq!(error.len(), MAX_ERROR_BYTES);
        assert!(long.starts_with(&error));
        assert_eq!(truncate_error("abc", 2), "ab");
        assert_eq!(truncate_error("aé", 2), "a");
    }

    #[test]
    fn touch_is_fenced() {
        assert_eq!(
            args(&touch("q", b"id", Duration::from_secs(30), 4)),
            ["DQ.TOUCH", "q", "id", "LEASE", "30000", "ATTEMPT", "4"]
        );
        assert_eq!(
            args(&touch_progress(
                "q",
                b"id",
                Duration::from_secs(30),
                4,
                b"3/4"
            )),
            ["DQ.TOUCH", "q", "id", "LEASE", "30000", "ATTEMPT", "4", "PROGRESS", "3/4"]
        );
        assert!(check_progress(&[b'p'; MAX_PROGRESS_BYTES]).is_ok());
        let e = check_progress(&[b'p'; MAX_PROGRESS_BYTES + 1]).unwrap_err();
        assert!(e.to_string().contains("65536"), "{e}");
    }

    #[test]
    fn pop_replies_parse() {
        assert_eq!(parse_pop(Value::Nil).unwrap(), Vec::new());
        let reply = Value::Array(vec![Value::Array(vec![
            Value::BulkString(b"a".to_vec()),
            Value::BulkString(b"{}".to_vec()),
            Value::Int(2),
        ])]);
        assert_eq!(
            parse_pop(reply).unwrap(),
            vec![Popped {
                id: b"a".to_vec(),
                payload: b"{}".to_vec(),
                attempt: 2
            }]
        );
        for bad in [
            Value::Int(1),
            Value::Array(vec![Value::Int(1)]),
            Value::Array(vec![Value::Array(vec![
                Value::BulkString(b"a".to_vec()),
                Value::BulkString(b"p".to_vec()),
            ])]),
            Value::Array(vec![Value::Array(vec![
                Value::BulkString(b"a".to_vec()),
                Value::BulkString(b"p".to_vec()),
                Value::Int(-1),
            ])]),
        ] {
            assert!(parse_pop(bad).is_err());
        }
    }

    #[test]
    fn nack_replies_parse() {
        assert_eq!(
            parse_nack(&Value::SimpleString("dead".into())).unwrap(),
            Some(NackState::Dead)
        );
        assert_eq!(
            parse_nack(&Value::SimpleString("delayed".into())).unwrap(),
            Some(NackState::Delayed)
        );
        assert_eq!(parse_nack(&Value::Nil).unwrap(), None);
        assert!(parse_nack(&Value::Int(1)).is_err());
    }
}
