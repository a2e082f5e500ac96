//! The command reference (docs/commands.md) checked against the errors the
//! commands really reply, so the two cannot drift apart.
//!
//! - Every error a command's grammar gives, for a few hundred bad argument
//!   lists made from its fuzz seed (each argument dropped, replaced by bad
//!   values, repeated; every keyword of its argument tree added again; an
//!   unknown option), matches an error listed in its own section or among
//!   the errors of every command.
//! - Every error dq can reply at all (one example of each variant of the
//!   error enum, listed by an exhaustive match so that a new variant must
//!   be added here) matches an error listed somewhere in the reference.
//!
//! A listed error is a pattern: `<...>` stands for any text (a name, a
//! number, an option), and `...` for the rest of the line.

use std::collections::BTreeMap;
use std::path::Path;

use crate::commands::ALL;
use crate::core::error::{DqError, Staleness};
use crate::grammar::docs::{Arg, Kind};

/// The backticked errors of each `## DQ.X` section (by lower-case command
/// name) and, under "", those every command may reply.
fn documented() -> BTreeMap<String, Vec<String>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/commands.md");
    let text = std::fs::read_to_string(path).expect("docs/commands.md");
    let mut sections: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut current = String::new();
    let mut in_errors = false;
    let lines: Vec<&str> = text.lines().collect();
    for (i, &line) in lines.iter().enumerate() {
        if let Some(title) = line.strip_prefix("## ") {
            current = match title.split_whitespace().next() {
                Some(name) if name.starts_with("DQ.") => name.to_lowercase(),
                _ => String::new(),
            };
            in_errors = false;
            continue;
        }
        // An errors paragraph runs to the next blank line, and on through
        // a list that follows it.
        let list_follows = lines.get(i + 1).is_some_and(|next| next.starts_with("- "));
        if line.contains("**Errors") {
            in_errors = true;
        } else if line.trim().is_empty() && !list_follows {
            in_errors = false;
        }
        if in_errors {
            sections
                .entry(current.clone())
                .or_default()
                .push(line.to_string());
        }
    }
    // Join each section's lines and take the `code` spans.
    sections
        .into_iter()
        .map(|(name, lines)| {
            let joined = lines.join(" ");
            let spans = joined
                .split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_string)
                .collect();
            (name, spans)
        })
        .collect()
}

/// A piece of a listed error: literal text, or `<...>`/`...` (any text).
#[derive(Debug, PartialEq)]
enum Piece {
    Text(String),
    Any,
}

fn pieces(pattern: &str) -> Vec<Piece> {
    let mut out: Vec<Piece> = Vec::new();
    let mut rest = pattern;
    while let Some(c) = rest.chars().next() {
        let any = if let Some(after) = rest.strip_prefix("...") {
            Some(after)
        } else if c == '<' {
            rest.find('>').map(|close| &rest[close + 1..])
        } else {
            None
        };
        match any {
            Some(after) => {
                out.push(Piece::Any);
                rest = after;
            }
            None => {
                match out.last_mut() {
                    Some(Piece::Text(t)) => t.push(c),
                    _ => out.push(Piece::Text(c.to_string())),
                }
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    out
}

/// Whether the whole of `error` is what `pattern` says (white space folded,
/// since the reference wraps its lines).
fn matches(pattern: &str, error: &str) -> bool {
    fn fold(s: &str) -> String {
        s.split_whitespace().collect::<Vec<_>>().join(" ")
    }
    fn at(pieces: &[Piece], text: &str) -> bool {
        match pieces.split_first() {
            None => text.is_empty(),
            Some((Piece::Text(t), rest)) => text
                .strip_prefix(t.as_str())
                .is_some_and(|after| at(rest, after)),
            Some((Piece::Any, rest)) => text
                .char_indices()
                .map(|(i, _)| i)
                .chain([text.len()])
                .any(|i| at(rest, &text[i..])),
        }
    }
    at(&pieces(&fold(pattern)), &fold(error))
}

fn documented_anywhere(docs: &BTreeMap<String, Vec<String>>, error: &str) -> bool {
    docs.values().flatten().any(|p| matches(p, error))
}

/// The keywords a command's argument tree names (COUNT, DELAY, ...).
fn tokens(args: &[Arg], out: &mut Vec<&'static str>) {
    for arg in args {
        if let Some(token) = arg.token {
            out.push(token);
        }
        if matches!(arg.kind, Kind::OneOf | Kind::Block) {
            tokens(arg.subargs, out);
        }
    }
}

const BAD_VALUES: [&str; 9] = [
    "",
    "-1",
    "0",
    "x",
    "1.5",
    "99999999999999999999",
    "5S",
    "{",
    "ALL",
];

/// Bad argument lists made from a valid one.
fn mutations(valid: &[Vec<u8>], keywords: &[&'static str]) -> Vec<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    for i in 0..valid.len() {
        let mut dropped = valid.to_vec();
        dropped.remove(i);
        out.push(dropped);
        for bad in BAD_VALUES {
            let mut replaced = valid.to_vec();
            replaced[i] = bad.as_bytes().to_vec();
            out.push(replaced);
        }
        let mut long = valid.to_vec();
        long[i] = vec![b'x'; 5000];
        out.push(long);
        let mut repeated = valid.to_vec();
        repeated.extend_from_slice(&valid[i..]);
        out.push(repeated);
    }
    for keyword in keywords {
        for value in ["1", "x", "-5"] {
            let mut more = valid.to_vec();
            more.push(keyword.as_bytes().to_vec());
            more.push(value.as_bytes().to_vec());
            out.push(more);
        }
        let mut bare = valid.to_vec();
        bare.push(keyword.as_bytes().to_vec());
        out.push(bare);
    }
    let mut unknown = valid.to_vec();
    unknown.push(b"BOGUS".to_vec());
    out.push(unknown);
    out.push(Vec::new());
    out
}

/// A valid argument list of each command: its `args` fuzz seed.
fn seed(index: usize, name: &str) -> Vec<Vec<u8>> {
    let file = name.trim_start_matches("dq.");
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/seeds/args")
        .join(format!("cmd-{file}"));
    let bytes = std::fs::read(&path).unwrap_or_else(|_| panic!("{}", path.display()));
    assert_eq!(usize::from(bytes[0]), 128 + index, "{}", path.display());
    bytes[1..].split(|&b| b == 0).map(<[u8]>::to_vec).collect()
}

#[test]
fn every_error_a_grammar_gives_is_in_the_commands_reference() {
    let docs = documented();
    let common = docs.get("").cloned().unwrap_or_default();
    let mut missing = Vec::new();
    for (index, command) in ALL.iter().enumerate() {
        let name = command.doc.name;
        let own = docs.get(name).cloned().unwrap_or_default();
        let mut keywords = Vec::new();
        tokens(command.doc.args, &mut keywords);
        let valid = seed(index, name);
        let valid_refs: Vec<&[u8]> = valid.iter().map(Vec::as_slice).collect();
        assert_eq!((command.grammar)(&valid_refs), Ok(()), "{name}: its seed");
        for args in mutations(&valid, &keywords) {
            let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            let Err(e) = (command.grammar)(&refs) else {
                continue;
            };
            let text = e.to_string();
            if !own.iter().chain(&common).any(|p| matches(p, &text))
                && !missing.iter().any(|(n, t)| *n == name && *t == text)
            {
                missing.push((name, text));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "errors not listed under their command in docs/commands.md:\n{}",
        missing
            .iter()
            .map(|(n, t)| format!("{n}: {t}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Each variant's place in the list below, by an exhaustive match: a new
/// variant does not compile until it has one (and so is listed, and so
/// documented).
fn variant(e: &DqError) -> usize {
    use DqError::*;
    match e {
        WrongArity(_) => 0,
        BadDuration { .. } => 1,
        BadValue { .. } => 2,
        UnknownOption(_) => 3,
        RepeatedOption(_) => 4,
        ConflictingOptions(..) => 5,
        MissingValue(_) => 6,
        Requires(..) => 7,
        Empty(_) => 8,
        TooLong { .. } => 9,
        TimeOverflow(_) => 10,
        BadBackoff(_) => 11,
        BadQueueSetting(_) => 12,
        UnknownField(_) => 13,
        WrongType(_) => 14,
        Corrupt { .. } => 15,
        EvictionPolicy(_) => 16,
        NotForClients => 17,
        BadApply(_) => 18,
        StaleDelivery { .. } => 19,
        BadCron(_) => 20,
        UnknownZone(_) => 21,
        OutOfOrder { .. } => 22,
        Internal => 23,
        Damaged(_) => 24,
        Gap(_) => 25,
    }
}

const VARIANTS: usize = 26;

#[test]
fn every_error_dq_replies_is_in_the_commands_reference() {
    let docs = documented();
    let stale = |why| DqError::StaleDelivery {
        id: "m".into(),
        attempt: 3,
        why,
    };
    let every = [
        DqError::WrongArity("dq.add"),
        DqError::BadDuration {
            option: "DELAY",
            what: "a duration",
        },
        DqError::BadValue {
            option: "COUNT",
            expected: "an integer from 1 to 10000",
        },
        DqError::UnknownOption("BOGUS".into()),
        DqError::RepeatedOption("COUNT"),
        DqError::ConflictingOptions("DELAY", "AT"),
        DqError::MissingValue("COUNT"),
        DqError::Requires("XX", "ID"),
        DqError::Empty("id"),
        DqError::TooLong {
            what: "id",
            max: 1024,
        },
        DqError::TimeOverflow("DELAY"),
        DqError::BadBackoff("'x': not a spec".into()),
        DqError::BadQueueSetting("backoff"),
        DqError::UnknownField("SIZE".into()),
        DqError::WrongType("k".into()),
        DqError::Corrupt {
            id: "m".into(),
            why: "checksum".into(),
        },
        DqError::EvictionPolicy("allkeys-lru".into()),
        DqError::NotForClients,
        DqError::BadApply("unknown verb 'X'".into()),
        stale(Staleness::Over {
            at: 4,
            state: "inflight",
        }),
        stale(Staleness::NotYet {
            at: 2,
            state: "inflight",
        }),
        stale(Staleness::NotYet {
            at: 0,
            state: "ready",
        }),
        stale(Staleness::Gone),
        DqError::BadCron("'x': not five fields".into()),
        DqError::UnknownZone("Mars/Olympus".into()),
        DqError::OutOfOrder {
            earlier: "START",
            later: "END",
        },
        DqError::Internal,
        DqError::Damaged("q".into()),
        DqError::Gap(42),
    ];
    let mut listed: Vec<usize> = every.iter().map(variant).collect();
    listed.sort_unstable();
    listed.dedup();
    assert_eq!(
        listed,
        (0..VARIANTS).collect::<Vec<_>>(),
        "a variant is not listed"
    );
    let mut missing = Vec::new();
    for e in every {
        let text = e.to_string();
        if !documented_anywhere(&docs, &text) {
            missing.push(text);
        }
    }
    assert!(
        missing.is_empty(),
        "errors missing from docs/commands.md:\n{}",
        missing.join("\n")
    );
}

#[test]
fn patterns_match_as_the_reference_means_them() {
    assert!(matches("ERR a\n   b", "ERR a b"));
    assert!(matches("ERR <x>...", "ERR y and more"));
    assert!(matches(
        "ERR <OPTION> needs a value",
        "ERR COUNT needs a value"
    ));
    assert!(matches(
        "STALE delivery <n> of message '<id>' is over: ...",
        "STALE delivery 1 of message 'a' is over: the message is at delivery 2 (inflight)"
    ));
    assert!(!matches(
        "ERR <OPTION> needs a value",
        "ERR COUNT needs a value now"
    ));
    assert!(!matches(
        "ERR COUNT needs a value",
        "ERR LEASE needs a value"
    ));
    assert!(matches(
        "ERR unknown option '<arg>'",
        "ERR unknown option 'x'"
    ));
}
