//! DQ.EVENTS queue [AFTER seq] [COUNT n] [BLOCK ms]
//!
//! The queue's events with seq above AFTER (default: from the oldest
//! kept), oldest first, at most COUNT (default 100, at most 10000):
//! `[last-seq, [[seq, at, type, id, attempt, detail], ...]]`, where
//! last-seq is the newest seq the queue has written (0 for a queue that
//! never wrote one, or does not exist). An AFTER older than what the queue
//! still keeps is the error `GAP the oldest event kept is N`, never a
//! silent skip.
//!
//! BLOCK waits, like XREAD, up to ms (0 = for ever) while there is nothing
//! after AFTER, and is answered the moment an event is written. It answers
//! at once whenever last-seq differs from AFTER: a last-seq below AFTER
//! means the log the reader followed is not this one (the queue was
//! deleted and made again, or replaced), which a reader must see rather
//! than wait for a seq that may never come; the reply is `[last-seq, []]`
//! then. Inside MULTI or a script it does not wait.

use redis_module::{Context, RedisString, RedisValue};

use crate::commands::bytes;
use crate::core::error::{DqError, Result};
use crate::core::queue::journal::Journal;
use crate::core::queue::Queue;
use crate::grammar::args::{parse_count, parse_duration_arg, parse_in_range, Options};
use crate::grammar::docs::{Arg, CommandDoc, KeyUse};
use crate::server::blocking::may_block;
use crate::server::command::Command;
use crate::server::key::{open_read, read};
use crate::server::reply::{int, word};
use crate::server::watch::{self, Watch};

const NAME: &str = "dq.events";

pub const COMMAND: Command = Command {
    doc: CommandDoc {
        name: NAME,
        summary: "Returns a queue's events after a seq, waiting for them if asked",
        complexity: "O(M) for M events returned",
        arity: -2,
        key: Some(KeyUse::Read),
        numkeys: false,
        args: &[
            Arg::key("queue"),
            Arg::integer("seq").token("AFTER").optional(),
            Arg::integer("count").token("COUNT").optional(),
            Arg::duration("timeout").token("BLOCK").optional(),
        ],
    },
    flags: "readonly blocking",
    acl: "",
    handler: events,
    grammar: |args| parse(args).map(drop),
    replay: None,
};

pub const DEFAULT_COUNT: usize = 100;

/// What a missing key reads: no event, last-seq 0.
static NONE: Journal = Journal::new();

/// What a read asks for.
#[derive(Debug, PartialEq, Eq)]
pub struct Read {
    pub after: Option<u64>,
    pub count: usize,
    pub block: Option<u64>,
}

/// Parses `queue [AFTER seq] [COUNT n] [BLOCK duration]`.
pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<(&'a [u8], Read)> {
    let [queue, options @ ..] = args else {
        return Err(DqError::WrongArity(NAME));
    };
    let mut read = Read {
        after: None,
        count: DEFAULT_COUNT,
        block: None,
    };
    let mut o = Options::new(options);
    while o.advance() {
        if let Some(value) = o.value("AFTER")? {
            let after = parse_in_range("AFTER", "a seq: an integer from 0", value, 0, i64::MAX)?;
            read.after = Some(after as u64);
        } else if let Some(value) = o.value("COUNT")? {
            read.count = parse_count(value)?;
        } else if let Some(value) = o.value("BLOCK")? {
            read.block = Some(parse_duration_arg("BLOCK", value)?);
        } else {
            return Err(o.unknown());
        }
    }
    Ok((queue, read))
}

/// The seq a read starts after: AFTER, or just before the oldest kept.
fn start(journal: &Journal, after: Option<u64>) -> u64 {
    after.unwrap_or_else(|| journal.oldest() - 1)
}

/// The reply to a read after `after`; `None` while a blocked reader has
/// nothing to be told yet (nothing after `after`).
fn answer(
    journal: &Journal,
    after: u64,
    count: usize,
    blocking: bool,
) -> Option<Result<RedisValue>> {
    let last = journal.last_seq();
    if blocking && last == after {
        return None;
    }
    let entries = match journal.read(after, count) {
        Ok(entries) => entries,
        Err(gap) => return Some(Err(DqError::Gap(gap.oldest))),
    };
    let entries = entries
        .map(|(seq, e)| {
            let bytes = |b: Option<&[u8]>| {
                b.map_or(RedisValue::Null, |b| RedisValue::StringBuffer(b.to_vec()))
            };
            RedisValue::Array(vec![
                int(seq),
                int(e.at),
                word(e.kind.name()),
                bytes(e.id()),
                match e.attempt {
                    0 => RedisValue::Null,
                    n => int(n.into()),
                },
                bytes(e.detail()),
            ])
        })
        .collect();
    Some(Ok(RedisValue::Array(vec![
        int(last),
        RedisValue::Array(entries),
    ])))
}

/// A reader waiting for the first event after `after`.
struct ReadAfter {
    after: u64,
    count: usize,
}

impl Watch for ReadAfter {
    fn answer(&self, queue: Option<&Queue>) -> Option<Result<RedisValue>> {
        let journal = queue.map_or(&NONE, Queue::journal);
        answer(journal, self.after, self.count, true)
    }
}

fn events(ctx: &Context, args: &[RedisString]) -> Result<RedisValue> {
    let argv = bytes(args);
    let (_, r) = parse(&argv[1..])?;
    let name = &args[1];
    let key = open_read(ctx, name);
    let journal = read(&key, name)?.map_or(&NONE, Queue::journal);
    let after = start(journal, r.after);
    // Inside MULTI or a script a read does not wait: it answers as without BLOCK.
    let timeout = r.block.filter(|_| may_block(ctx));
    if let Some(reply) = answer(journal, after, r.count, timeout.is_some()) {
        return reply;
    }
    // `answer` keeps only a blocking read waiting.
    let timeout = timeout.unwrap_or_default();
    let watch = ReadAfter {
        after,
        count: r.count,
    };
    watch::block(ctx, name, timeout, Box::new(watch));
    Ok(RedisValue::NoReply)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::queue::journal::{Entry, Kind};
    use crate::grammar::args::leak_args;

    #[test]
    fn grammar() {
        assert_eq!(
            parse(leak_args(&["q"])).unwrap().1,
            Read {
                after: None,
                count: 100,
                block: None
            }
        );
        assert_eq!(
            parse(leak_args(&["q", "after", "7", "COUNT", "3", "BLOCK", "5s"]))
                .unwrap()
                .1,
            Read {
                after: Some(7),
                count: 3,
                block: Some(5_000)
            }
        );
        let err = |a: &[&str]| parse(leak_args(a)).unwrap_err().to_string();
        assert_eq!(
            err(&[]),
            "ERR wrong number of arguments for 'dq.events' command"
        );
        assert_eq!(
            err(&["q", "AFTER", "-1"]),
            "ERR AFTER must be a seq: an integer from 0"
        );
        assert_eq!(
            err(&["q", "AFTER", "x"]),
            "ERR AFTER must be a seq: an integer from 0"
        );
        assert_eq!(
            err(&["q", "COUNT", "0"]),
            "ERR COUNT must be an integer from 1 to 10000"
        );
        assert_eq!(
            err(&["q", "COUNT", "10001"]),
            "ERR COUNT must be an integer from 1 to 10000"
        );
        assert!(err(&["q", "BLOCK", "-1"]).starts_with("ERR BLOCK must be a duration"));
        assert_eq!(err(&["q", "AFTER"]), "ERR AFTER needs a value");
        assert_eq!(err(&["q", "SINCE", "1"]), "ERR unknown option 'SINCE'");
    }

    fn journal(max: u64, n: u64) -> Journal {
        let mut j = Journal::new();
        j.set_max(max);
        for i in 0..n {
            j.push(Entry::new(
                i,
                Kind::Added,
                format!("m{i}").as_bytes(),
                0,
                None,
            ));
        }
        j
    }

    fn seqs(reply: RedisValue) -> (i64, Vec<i64>) {
        let RedisValue::Array(parts) = reply else {
            panic!("{reply:?}")
        };
        let (RedisValue::Integer(last), RedisValue::Array(entries)) = (&parts[0], &parts[1]) else {
            panic!("{parts:?}")
        };
        let seqs = entries
            .iter()
            .map(|e| match e {
                RedisValue::Array(f) => match f[0] {
                    RedisValue::Integer(s) => s,
                    _ => panic!("{f:?}"),
                },
                _ => panic!("{e:?}"),
            })
            .collect();
        (*last, seqs)
    }

    #[test]
    fn reads_after_a_seq_and_reports_a_gap() {
        let j = journal(3, 5);
        assert_eq!(start(&j, None), 2);
        assert_eq!(
            seqs(answer(&j, 2, 100, false).unwrap().unwrap()),
            (5, vec![3, 4, 5])
        );
        assert_eq!(
            seqs(answer(&j, 3, 1, false).unwrap().unwrap()),
            (5, vec![4])
        );
        assert_eq!(
            seqs(answer(&j, 5, 100, false).unwrap().unwrap()),
            (5, vec![])
        );
        // Past the newest: nothing, and last-seq says where the log is.
        assert_eq!(
            seqs(answer(&j, 9, 100, false).unwrap().unwrap()),
            (5, vec![])
        );
        assert_eq!(
            answer(&j, 1, 100, false).unwrap().unwrap_err().to_string(),
            "GAP the oldest event kept is 3"
        );
    }

    #[test]
    fn a_blocked_read_waits_only_while_nothing_follows_after() {
        let j = journal(3, 5);
        assert!(answer(&j, 5, 100, true).is_none());
        assert_eq!(
            seqs(answer(&j, 4, 100, true).unwrap().unwrap()),
            (5, vec![5])
        );
        // A log behind the reader's AFTER (deleted, made again): told at once.
        assert_eq!(
            seqs(answer(&j, 9, 100, true).unwrap().unwrap()),
            (5, vec![])
        );
        // A reader that fell behind by more than is kept: the gap at once.
        assert!(answer(&j, 1, 100, true).unwrap().is_err());
        let none = Journal::new();
        assert!(answer(&none, 0, 100, true).is_none());
        assert_eq!(
            seqs(answer(&none, 4, 100, true).unwrap().unwrap()),
            (0, vec![])
        );
    }
}
