//! What a command or a timer tick changed, as plain Redis commands.
//!
//! Time-dependent writes (promotion, lease expiry, POP) must reach replicas
//! and the AOF as their effects, so every write made through the key API is
//! also recorded here and replicated as ZADD / ZREM / HSET / HDEL. Writes to
//! one key keep their order; consecutive writes of the same kind to one key
//! become one command (a POP of 100 messages replicates as three commands,
//! not three hundred). Different keys are independent, so grouping by key
//! leaves the final state unchanged.

use crate::keys::Part;

#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    ZAdd { score: i64, member: Vec<u8> },
    ZRem { member: Vec<u8> },
    HSet { field: Vec<u8>, value: Vec<u8> },
    HDel { field: Vec<u8> },
    Del,
}

impl Write {
    fn command(&self) -> &'static str {
        match self {
            Write::ZAdd { .. } => "ZADD",
            Write::ZRem { .. } => "ZREM",
            Write::HSet { .. } => "HSET",
            Write::HDel { .. } => "HDEL",
            Write::Del => "DEL",
        }
    }

    fn push_args(&self, args: &mut Vec<Vec<u8>>) {
        match self {
            Write::ZAdd { score, member } => {
                args.push(score.to_string().into_bytes());
                args.push(member.clone());
            }
            Write::ZRem { member } => args.push(member.clone()),
            Write::HSet { field, value } => {
                args.push(field.clone());
                args.push(value.clone());
            }
            Write::HDel { field } => args.push(field.clone()),
            Write::Del => {}
        }
    }
}

/// One command to replicate: name, key part, and the arguments after the key.
#[derive(Debug, Clone, PartialEq)]
pub struct Command {
    pub name: &'static str,
    pub part: Part,
    pub args: Vec<Vec<u8>>,
}

#[derive(Debug, Default)]
pub struct Effects {
    writes: Vec<(Part, Vec<Write>)>,
}

impl Effects {
    pub fn record(&mut self, part: Part, write: Write) {
        match self.writes.iter_mut().find(|(p, _)| *p == part) {
            Some((_, list)) => list.push(write),
            None => self.writes.push((part, vec![write])),
        }
    }

    /// The keys written to.
    pub fn parts(&self) -> impl Iterator<Item = Part> + '_ {
        self.writes.iter().map(|(part, _)| *part)
    }

    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }

    /// The commands to replicate, per key in recording order, with runs of
    /// the same command merged.
    pub fn into_commands(self) -> Vec<Command> {
        let mut commands: Vec<Command> = Vec::new();
        for (part, writes) in self.writes {
            let mut last: Option<&'static str> = None;
            for write in writes {
                let name = write.command();
                if last != Some(name) {
                    commands.push(Command {
                        name,
                        part,
                        args: Vec::new(),
                    });
                    last = Some(name);
                }
                if let Some(command) = commands.last_mut() {
                    write.push_args(&mut command.args);
                }
            }
        }
        commands
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zadd(score: i64, m: &str) -> Write {
        Write::ZAdd {
            score,
            member: m.into(),
        }
    }

    fn zrem(m: &str) -> Write {
        Write::ZRem { member: m.into() }
    }

    #[test]
    fn runs_merge_per_key_and_keep_order() {
        let mut e = Effects::default();
        e.record(Part::Ready, zrem("a"));
        e.record(Part::Inflight, zadd(5, "a"));
        e.record(Part::Ready, zrem("b"));
        e.record(Part::Inflight, zadd(6, "b"));
        e.record(Part::Ready, zadd(-1, "c"));
        e.record(Part::Ready, zrem("d"));
        e.record(Part::Dead, Write::Del);
        e.record(Part::Dead, Write::Del);
        let got: Vec<(String, Part, Vec<String>)> = e
            .into_commands()
            .into_iter()
            .map(|c| {
                let args = c
                    .args
                    .iter()
                    .map(|a| String::from_utf8(a.clone()).unwrap())
                    .collect();
                (c.name.to_string(), c.part, args)
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
        let e = Effects::default();
        assert!(e.is_empty());
        assert!(e.into_commands().is_empty());
    }
}
