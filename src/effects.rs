//! What a command or a timer tick changed, as plain Redis commands.
//!
//! Time-dependent writes (promotion, lease expiry, POP) must reach replicas
//! and the AOF as their effects, so every write made through the key API is
//! also recorded here and replicated as ZADD / ZREM / HSET / HDEL. Writes to
//! one key keep their order; consecutive writes of the same kind to one key
//! become one command (a POP of 100 messages replicates as three commands,
//! not three hundred). Different keys are independent, so grouping by key
//! leaves the final state unchanged.

use std::ffi::CStr;

use crate::keys::Part;

/// One write, generic over the string type: byte vectors in unit tests,
/// the very Redis strings handed to the key API in the module, so that
/// replicating a write copies nothing.
#[derive(Debug, Clone, PartialEq)]
pub enum Write<S> {
    ZAdd { score: i64, member: S },
    ZRem { member: S },
    HSet { field: S, value: S },
    HDel { field: S },
    Del,
}

impl<S> Write<S> {
    fn command(&self) -> &'static CStr {
        match self {
            Write::ZAdd { .. } => c"ZADD",
            Write::ZRem { .. } => c"ZREM",
            Write::HSet { .. } => c"HSET",
            Write::HDel { .. } => c"HDEL",
            Write::Del => c"DEL",
        }
    }

    fn push_args(self, args: &mut Vec<S>, number: &mut impl FnMut(i64) -> S) {
        match self {
            Write::ZAdd { score, member } => {
                args.push(number(score));
                args.push(member);
            }
            Write::ZRem { member } => args.push(member),
            Write::HSet { field, value } => {
                args.push(field);
                args.push(value);
            }
            Write::HDel { field } => args.push(field),
            Write::Del => {}
        }
    }
}

/// One command to replicate: name, key part, and the arguments after the key.
#[derive(Debug, Clone, PartialEq)]
pub struct Command<S> {
    pub name: &'static CStr,
    pub part: Part,
    pub args: Vec<S>,
}

#[derive(Debug)]
pub struct Effects<S = Vec<u8>> {
    /// In recording order; grouped by key only when replicated.
    writes: Vec<(Part, Write<S>)>,
    /// Bit `Part::index` is set for each key written.
    touched: u32,
}

impl<S> Default for Effects<S> {
    fn default() -> Self {
        Effects {
            writes: Vec::new(),
            touched: 0,
        }
    }
}

impl<S> Effects<S> {
    pub fn record(&mut self, part: Part, write: Write<S>) {
        self.touched |= 1 << part.index();
        self.writes.push((part, write));
    }

    /// The keys written to.
    pub fn parts(&self) -> impl Iterator<Item = Part> + '_ {
        Part::ALL
            .into_iter()
            .filter(|part| self.touched & (1 << part.index()) != 0)
    }

    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }

    /// The commands to replicate, per key in recording order, with runs of
    /// the same command merged. `number` spells a ZADD score.
    pub fn into_commands(self, mut number: impl FnMut(i64) -> S) -> Vec<Command<S>> {
        let mut writes = self.writes;
        // Stable: each key's writes keep their order.
        writes.sort_by_key(|(part, _)| part.index());
        let mut commands: Vec<Command<S>> = Vec::new();
        for (part, write) in writes {
            let name = write.command();
            let same = commands
                .last()
                .is_some_and(|last| last.part == part && last.name == name);
            if !same {
                commands.push(Command {
                    name,
                    part,
                    args: Vec::new(),
                });
            }
            if let Some(command) = commands.last_mut() {
                write.push_args(&mut command.args, &mut number);
            }
        }
        commands
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn number(n: i64) -> Vec<u8> {
        n.to_string().into_bytes()
    }

    fn zadd(score: i64, m: &str) -> Write<Vec<u8>> {
        Write::ZAdd {
            score,
            member: m.into(),
        }
    }

    fn zrem(m: &str) -> Write<Vec<u8>> {
        Write::ZRem { member: m.into() }
    }

    #[test]
    fn runs_merge_per_key_and_keep_order() {
        let mut e: Effects = Effects::default();
        e.record(Part::Ready, zrem("a"));
        e.record(Part::Inflight, zadd(5, "a"));
        e.record(Part::Ready, zrem("b"));
        e.record(Part::Inflight, zadd(6, "b"));
        e.record(Part::Ready, zadd(-1, "c"));
        e.record(Part::Ready, zrem("d"));
        e.record(Part::Dead, Write::Del);
        e.record(Part::Dead, Write::Del);
        let got: Vec<(String, Part, Vec<String>)> = e
            .into_commands(number)
            .into_iter()
            .map(|c| {
                let args = c
                    .args
                    .iter()
                    .map(|a| String::from_utf8(a.clone()).unwrap())
                    .collect();
                (c.name.to_str().unwrap().to_string(), c.part, args)
            })
            .collect();
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            got,
            vec![
                ("ZREM".into(), Part::Ready, s(&["a", "b"])),
                ("ZADD".into(), Part::Ready, s(&["-1", "c"])),
                ("ZREM".into(), Part::Ready, s(&["d"])),
                ("ZADD".into(), Part::Inflight, s(&["5", "a", "6", "b"])),
                ("DEL".into(), Part::Dead, s(&[])),
            ]
        );
    }

    #[test]
    fn nothing_recorded_replicates_nothing() {
        let e: Effects = Effects::default();
        assert!(e.is_empty());
        assert!(e.into_commands(number).is_empty());
    }
}
