//! DQ.REDRIVE queue [COUNT n | ID id [id ...]]
//!
//! Moves dead messages back to ready with fresh attempts (the next POP
//! delivers them as attempt 1), as if added now. COUNT takes the n that
//! died first; ID names them. Without either it moves up to 10000, the
//! oldest first: repeat until it replies 0 to empty a large dead set.
//! Reply: how many moved. Ids that are not dead are left alone.

use redis_module::{Context, RedisString, RedisValue};

use crate::commands::{bytes, counted_write};
use crate::core::error::{DqError, Result};
use crate::core::limits::MAX_COUNT;
use crate::core::queue::{Queue, Redrive};
use crate::grammar::args::{check_id, is_keyword, parse_count, unknown_option};
use crate::grammar::docs::{Arg, CommandDoc, KeyUse};
use crate::server::command::{Command, Replayed};
use crate::server::reply::int;

pub const COMMAND: Command = Command {
    doc: CommandDoc {
        name: "dq.redrive",
        summary: "Moves dead messages back to ready with fresh attempts",
        complexity: "O(M log N) for M messages moved in a queue of N",
        arity: -2,
        key: Some(KeyUse::Update),
        numkeys: false,
        args: &[
            Arg::key("queue"),
            Arg::one_of(
                "which",
                &[
                    Arg::integer("count").token("COUNT"),
                    Arg::string("id").token("ID").multiple(),
                ],
            )
            .optional(),
        ],
    },
    flags: "write",
    acl: "",
    handler: redrive,
    grammar: |args| parse(args).map(drop),
    replay: Some(("REDRIVE", replay)),
};

pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<(&'a [u8], Redrive<'a>)> {
    let [queue, options @ ..] = args else {
        return Err(DqError::WrongArity("dq.redrive"));
    };
    let which = match options {
        [] => Redrive::Oldest(MAX_COUNT),
        [keyword, value] if is_keyword(keyword, "COUNT") => Redrive::Oldest(parse_count(value)?),
        [keyword] if is_keyword(keyword, "COUNT") => return Err(DqError::MissingValue("COUNT")),
        [keyword, ids @ ..] if is_keyword(keyword, "ID") => {
            if ids.is_empty() {
                return Err(DqError::MissingValue("ID"));
            }
            for id in ids {
                check_id(id)?;
            }
            Redrive::Ids(ids)
        }
        [keyword, _, rest @ ..] if is_keyword(keyword, "COUNT") => {
            return Err(match rest.first() {
                Some(next) if is_keyword(next, "ID") => DqError::ConflictingOptions("COUNT", "ID"),
                Some(next) if is_keyword(next, "COUNT") => DqError::RepeatedOption("COUNT"),
                Some(next) => unknown_option(next),
                None => DqError::WrongArity("dq.redrive"),
            });
        }
        [other, ..] => return Err(unknown_option(other)),
    };
    Ok((queue, which))
}

fn redrive(ctx: &Context, args: &[RedisString]) -> Result<RedisValue> {
    let argv = bytes(args);
    let (_, which) = parse(&argv[1..])?;
    // Deterministic as it stands: the dead are ordered by time of death
    // and then by a sequence number every server shares.
    counted_write(ctx, args, "REDRIVE", |queue, now| queue.redrive(now, which)).map(int)
}

/// Replays `REDRIVE [COUNT n | ID id...]`.
pub fn replay(queue: &mut Queue, r: &Replayed<'_>) -> Result<()> {
    let words = r.with_name();
    let (now, args) = (r.now, &words[..]);
    let (_, which) = parse(args)?;
    queue.redrive(now, which);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::args::leak_args;

    #[test]
    fn grammar() {
        assert_eq!(
            parse(leak_args(&["q"])).unwrap().1,
            Redrive::Oldest(MAX_COUNT)
        );
        assert_eq!(
            parse(leak_args(&["q", "count", "5"])).unwrap().1,
            Redrive::Oldest(5)
        );
        let (_, which) = parse(leak_args(&["q", "ID", "a", "b"])).unwrap();
        assert_eq!(which, Redrive::Ids(&[b"a", b"b"]));
        let err = |a: &[&str]| parse(leak_args(a)).unwrap_err().to_string();
        assert_eq!(
            err(&[]),
            "ERR wrong number of arguments for 'dq.redrive' command"
        );
        assert_eq!(err(&["q", "COUNT"]), "ERR COUNT needs a value");
        assert_eq!(err(&["q", "ID"]), "ERR ID needs a value");
        assert_eq!(
            err(&["q", "COUNT", "2", "ID", "a"]),
            "ERR COUNT and ID cannot be used together"
        );
        // After ID every argument is an id, even one spelled COUNT.
        let (_, which) = parse(leak_args(&["q", "ID", "a", "COUNT"])).unwrap();
        assert_eq!(which, Redrive::Ids(&[b"a", b"COUNT"]));
        assert_eq!(
            err(&["q", "COUNT", "0"]),
            "ERR COUNT must be an integer from 1 to 10000"
        );
        assert_eq!(err(&["q", "ALL"]), "ERR unknown option 'ALL'");
        assert_eq!(err(&["q", "ID", ""]), "ERR id must not be empty");
    }
}
