//! What COMMAND DOCS and COMMAND INFO say about each command: summary,
//! complexity, arity, the key it touches and how, and its argument tree.
//!
//! Each command file declares its own `DOC`; `command_info.rs` hands them to
//! the server on load when it has the API for it. The tests here check that
//! every declared arity agrees with the argument tree, so the server's
//! arity check (which the API turns on) can never refuse a valid call.

/// The release that introduced the commands.
pub const SINCE: &str = "0.1.0";

/// DQ.PEEK's and DQ.PURGE's state argument.
pub const STATE: Arg = Arg::one_of(
    "state",
    &[
        Arg::pure_token("delayed", "DELAYED"),
        Arg::pure_token("ready", "READY"),
        Arg::pure_token("inflight", "INFLIGHT"),
        Arg::pure_token("dead", "DEAD"),
        Arg::pure_token("done", "DONE"),
    ],
);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The queue: the key argument.
    Key,
    String,
    Integer,
    UnixTime,
    /// A keyword alone, such as NX.
    PureToken,
    /// Exactly one of the sub-arguments.
    OneOf,
    /// All the sub-arguments, in order.
    Block,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arg {
    /// Lower-case, as COMMAND DOCS shows built-in commands.
    pub name: &'static str,
    pub kind: Kind,
    /// The keyword that introduces the value, such as `DELAY`.
    pub token: Option<&'static str>,
    pub optional: bool,
    pub multiple: bool,
    pub subargs: &'static [Arg],
}

impl Arg {
    const fn new(name: &'static str, kind: Kind) -> Arg {
        Arg {
            name,
            kind,
            token: None,
            optional: false,
            multiple: false,
            subargs: &[],
        }
    }

    pub const fn key(name: &'static str) -> Arg {
        Arg::new(name, Kind::Key)
    }

    pub const fn string(name: &'static str) -> Arg {
        Arg::new(name, Kind::String)
    }

    pub const fn integer(name: &'static str) -> Arg {
        Arg::new(name, Kind::Integer)
    }

    /// A duration (`1500`, `30s`, `5m`): COMMAND DOCS has no such type,
    /// and the text a unit makes is a string.
    pub const fn duration(name: &'static str) -> Arg {
        Arg::new(name, Kind::String)
    }

    pub const fn unix_time(name: &'static str) -> Arg {
        Arg::new(name, Kind::UnixTime)
    }

    pub const fn pure_token(name: &'static str, token: &'static str) -> Arg {
        Arg::new(name, Kind::PureToken).token(token)
    }

    pub const fn one_of(name: &'static str, subargs: &'static [Arg]) -> Arg {
        Arg {
            subargs,
            ..Arg::new(name, Kind::OneOf)
        }
    }

    pub const fn block(name: &'static str, subargs: &'static [Arg]) -> Arg {
        Arg {
            subargs,
            ..Arg::new(name, Kind::Block)
        }
    }

    pub const fn token(self, token: &'static str) -> Arg {
        Arg {
            token: Some(token),
            ..self
        }
    }

    pub const fn optional(self) -> Arg {
        Arg {
            optional: true,
            ..self
        }
    }

    pub const fn multiple(self) -> Arg {
        Arg {
            multiple: true,
            ..self
        }
    }

    /// Words this argument takes at the least, and whether it can take more.
    fn words(&self) -> (usize, bool) {
        if self.optional {
            return (0, true);
        }
        let token = usize::from(self.token.is_some() && self.kind != Kind::PureToken);
        let (least, more) = match self.kind {
            Kind::OneOf => {
                let each: Vec<(usize, bool)> = self.subargs.iter().map(Arg::words).collect();
                let least = each.iter().map(|w| w.0).min().unwrap_or(0);
                let more = each.iter().any(|w| w.1 || w.0 != least);
                (least, more)
            }
            Kind::Block => self
                .subargs
                .iter()
                .map(Arg::words)
                .fold((0, false), |(n, m), (a, b)| (n + a, m || b)),
            _ => (1, false),
        };
        (least + token, more || self.multiple)
    }
}

/// How the command uses its key, as key-spec flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyUse {
    /// Reads the queue and returns what it holds.
    Read,
    /// Adds to the queue (or replaces).
    Insert,
    /// Changes messages in place.
    Update,
    /// Reads and removes (POP: returns what it takes).
    Take,
    /// Removes messages.
    Delete,
    /// Reads or changes settings.
    Settings,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandDoc {
    pub name: &'static str,
    pub summary: &'static str,
    pub complexity: &'static str,
    /// As COMMAND INFO: the number of words including the command name,
    /// negative for "at least".
    pub arity: i32,
    /// `None` for a command without a key (DQ.QUEUES). The key, when there
    /// is one, is the first argument, or (with `numkeys`) the keys follow
    /// a count of them (DQ.MPOP).
    pub key: Option<KeyUse>,
    pub numkeys: bool,
    pub args: &'static [Arg],
}

impl CommandDoc {
    /// The arity its argument tree implies.
    pub fn implied_arity(&self) -> i32 {
        let (least, more) = Arg::block("", self.args).words();
        let words = least as i32 + 1;
        if more {
            -words
        } else {
            words
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arity_of_shapes() {
        let doc = |args: &'static [Arg]| CommandDoc {
            name: "dq.x",
            summary: "s",
            complexity: "O(1)",
            arity: 0,
            key: None,
            numkeys: false,
            args,
        };
        assert_eq!(doc(&[]).implied_arity(), 1);
        const TWO: [Arg; 2] = [Arg::key("queue"), Arg::string("id")];
        assert_eq!(doc(&TWO).implied_arity(), 3);
        const MANY: [Arg; 2] = [Arg::key("queue"), Arg::string("id").multiple()];
        assert_eq!(doc(&MANY).implied_arity(), -3);
        const OPT: [Arg; 2] = [
            Arg::key("queue"),
            Arg::integer("n").token("COUNT").optional(),
        ];
        assert_eq!(doc(&OPT).implied_arity(), -2);
        const STATES: [Arg; 2] = [Arg::pure_token("a", "A"), Arg::pure_token("b", "B")];
        const CHOICE: [Arg; 2] = [Arg::key("queue"), Arg::one_of("state", &STATES)];
        assert_eq!(doc(&CHOICE).implied_arity(), 3);
        const TOKENED: [Arg; 1] = [Arg::integer("ms").token("DELAY")];
        assert_eq!(doc(&TOKENED).implied_arity(), 3);
    }
}
