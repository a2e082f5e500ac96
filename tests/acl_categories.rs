//! ACL categories of the DQ commands: `+@read`, `+@write` and the other
//! standard categories grant them as users expect of built-in commands, and
//! `+@dq` grants them all — where the server has the module API for it.
//! Each test asserts what docs/commands.md documents for the server it runs on,
//! which it tells by its version (INFO server), not by the environment:
//!
//! | server | RedisModule_SetCommandACLCategories | RedisModule_AddACLCategory |
//! |---|---|---|
//! | Redis 7.0 | no: no categories | no |
//! | Redis 7.2, Valkey 7.2 | yes | no: no `@dq` |
//! | Redis 7.4, 8.0; Valkey 8.0, 8.1 | yes | yes |

use dq_testkit::*;

/// What the DQ commands get from a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Categories {
    /// No categories at all: only `+@all` or a command's name grants one.
    None,
    /// The standard categories, no `@dq`.
    Standard,
    /// The standard categories and `@dq`.
    WithDq,
}

/// The server's name and (major, minor) version.
struct ServerVersion {
    valkey: bool,
    version: (u32, u32),
}

impl ServerVersion {
    fn of(c: &mut redis::Connection) -> ServerVersion {
        let info = text(&cmd(c, "INFO server"));
        let field = |name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(&format!("{name}:")))
                .map(|v| v.trim().to_string())
        };
        // Valkey also reports redis_version (7.2.4, the release it forked).
        let (valkey, version) = match field("valkey_version") {
            Some(v) => (true, v),
            None => (
                false,
                field("redis_version").expect("redis_version in INFO"),
            ),
        };
        let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        let major = parts.next().unwrap_or(0);
        let minor = parts.next().unwrap_or(0);
        ServerVersion {
            valkey,
            version: (major, minor),
        }
    }

    /// What docs/commands.md documents for this server.
    fn categories(&self) -> Categories {
        let add_category = if self.valkey { (8, 0) } else { (7, 4) };
        if self.version >= add_category {
            Categories::WithDq
        } else if self.version >= (7, 2) {
            Categories::Standard
        } else {
            Categories::None
        }
    }

    /// Whether `ACL CAT <category>` lists module commands (Redis 8.0 and
    /// Valkey 8.1 on; before, it leaves them out).
    fn acl_cat_lists_module_commands(&self) -> bool {
        self.version >= if self.valkey { (8, 1) } else { (8, 0) }
    }
}

/// The standard categories docs/commands.md promises for each command.
const EXPECTED: [(&str, &[&str]); 25] = [
    ("dq.add", &["@write", "@fast"]),
    ("dq.pop", &["@write", "@slow", "@blocking"]),
    ("dq.ack", &["@write", "@slow"]),
    ("dq.cancel", &["@write", "@slow"]),
    ("dq.nack", &["@write", "@fast"]),
    ("dq.touch", &["@write", "@fast"]),
    ("dq.redrive", &["@write", "@slow"]),
    ("dq.purge", &["@write", "@slow"]),
    ("dq.get", &["@read", "@fast"]),
    ("dq.peek", &["@read", "@slow"]),
    ("dq.stats", &["@read", "@fast"]),
    ("dq.config", &["@write", "@slow"]),
    ("dq.queues", &["@read", "@slow", "@dangerous"]),
    ("dq.scan", &["@read", "@slow"]),
    ("dq.apply", &["@write", "@slow", "@admin", "@dangerous"]),
    ("dq.mpop", &["@write", "@slow", "@blocking"]),
    ("dq.schedule", &["@write", "@slow"]),
    ("dq.unschedule", &["@write", "@slow"]),
    ("dq.schedules", &["@read", "@slow"]),
    ("dq.pause", &["@write", "@fast"]),
    ("dq.resume", &["@write", "@fast"]),
    ("dq.done", &["@write", "@slow"]),
    ("dq.wait", &["@read", "@slow", "@blocking"]),
    ("dq.events", &["@read", "@slow", "@blocking"]),
    ("dq.groups", &["@read", "@slow"]),
];

/// One call of each command on queue `q` (filled by `fill`), by name.
const CALLS: [(&str, &str); 25] = [
    ("dq.add", "DQ.ADD q x ID new"),
    ("dq.pop", "DQ.POP q"),
    ("dq.ack", "DQ.ACK q inflight"),
    ("dq.cancel", "DQ.CANCEL q ready"),
    ("dq.nack", "DQ.NACK q inflight"),
    ("dq.touch", "DQ.TOUCH q inflight"),
    ("dq.redrive", "DQ.REDRIVE q"),
    ("dq.purge", "DQ.PURGE q DELAYED"),
    ("dq.get", "DQ.GET q ready"),
    ("dq.peek", "DQ.PEEK q READY"),
    ("dq.stats", "DQ.STATS q"),
    ("dq.config", "DQ.CONFIG q"),
    ("dq.queues", "DQ.QUEUES"),
    ("dq.scan", "DQ.SCAN q 0"),
    // Refused to clients whatever the ACL says (not NOPERM when allowed).
    ("dq.apply", "DQ.APPLY q 0 1 ACK x"),
    ("dq.mpop", "DQ.MPOP 1 q"),
    ("dq.schedule", "DQ.SCHEDULE q s x EVERY 1h"),
    ("dq.unschedule", "DQ.UNSCHEDULE q none"),
    ("dq.schedules", "DQ.SCHEDULES q"),
    ("dq.pause", "DQ.PAUSE q"),
    ("dq.resume", "DQ.RESUME q"),
    ("dq.done", "DQ.DONE q inflight result"),
    ("dq.wait", "DQ.WAIT q dead"),
    ("dq.events", "DQ.EVENTS q"),
    ("dq.groups", "DQ.GROUPS q 0"),
];

fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::Array(items) | Value::Set(items) => items.iter().map(text).collect(),
        other => panic!("not a list: {other:?}"),
    }
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn all_names() -> Vec<String> {
    sorted(EXPECTED.iter().map(|(n, _)| n.to_string()).collect())
}

/// COMMAND INFO's ACL categories of `name` (the 7th field).
fn categories_of(c: &mut redis::Connection, name: &str) -> Vec<String> {
    let Value::Array(info) = cmd(c, &format!("COMMAND INFO {name}")) else {
        panic!("COMMAND INFO {name} is not a list")
    };
    let Some(Value::Array(fields)) = info.first() else {
        panic!("no COMMAND INFO for {name}")
    };
    sorted(strings(&fields[6]))
}

/// COMMAND INFO's flags of `name`.
fn flags_of(c: &mut redis::Connection, name: &str) -> Vec<String> {
    let Value::Array(info) = cmd(c, &format!("COMMAND INFO {name}")) else {
        panic!("COMMAND INFO {name} is not a list")
    };
    let Some(Value::Array(fields)) = info.first() else {
        panic!("no COMMAND INFO for {name}")
    };
    strings(&fields[2])
}

/// The categories `name` should show on a server of this kind.
fn expected(name: &str, kind: Categories) -> Vec<String> {
    let standard = EXPECTED
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, c)| *c)
        .unwrap_or_else(|| panic!("{name} is not in EXPECTED"));
    let mut want: Vec<String> = match kind {
        Categories::None => Vec::new(),
        _ => standard.iter().map(|c| c.to_string()).collect(),
    };
    if kind == Categories::WithDq {
        want.push("@dq".into());
    }
    sorted(want)
}

/// A message in each state: `dead`, `inflight`, `ready`, `delayed`.
fn fill(c: &mut redis::Connection) {
    for line in [
        "DQ.ADD q x ID dead MAXATTEMPTS 1",
        "DQ.POP q",
        "DQ.NACK q dead",
        "DQ.ADD q x ID inflight",
        "DQ.POP q LEASE 3600000",
        "DQ.ADD q x ID ready",
        "DQ.ADD q x ID delayed DELAY 3600000",
    ] {
        cmd(c, line);
    }
}

/// A server with queue `q` filled, and its kind.
fn server_with(faults: Option<&str>) -> (Server, ServerVersion) {
    let server = match faults {
        Some(points) => Server::start_with_faults(points),
        None => Server::start(),
    };
    let mut c = server.conn();
    fill(&mut c);
    let version = ServerVersion::of(&mut c);
    (server, version)
}

/// Creates user `name` with `rules` (password `pw`); `Err` is the server's
/// refusal.
fn try_user(server: &Server, name: &str, rules: &str) -> Result<(), String> {
    let mut admin = server.conn();
    let line = format!("ACL SETUSER {name} reset on >pw {rules}");
    let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
    run(&mut admin, &args).map(|_| ())
}

/// Logs in as a new user with these ACL rules.
fn user(server: &Server, name: &str, rules: &str) -> redis::Connection {
    try_user(server, name, rules).unwrap_or_else(|e| panic!("ACL SETUSER {name} {rules}: {e}"));
    let mut c = server.conn();
    cmd(&mut c, &format!("AUTH {name} pw"));
    c
}

/// The commands of CALLS this connection's user may run: a call refused
/// with NOPERM is not allowed; any other reply or error is.
fn allowed(c: &mut redis::Connection) -> Vec<String> {
    let mut names: Vec<String> = CALLS
        .iter()
        .filter(|(_, line)| {
            let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
            !matches!(run(c, &args), Err(e) if e.starts_with("NOPERM"))
        })
        .map(|(name, _)| name.to_string())
        .collect();
    names.sort();
    names
}

/// The commands whose expected categories include `category`.
fn in_category(category: &str) -> Vec<String> {
    sorted(
        EXPECTED
            .iter()
            .filter(|(_, c)| c.contains(&category))
            .map(|(n, _)| n.to_string())
            .collect(),
    )
}

#[test]
fn command_info_shows_each_commands_categories() {
    let (server, version) = server_with(None);
    let kind = version.categories();
    let mut c = server.conn();
    let mut wrong = Vec::new();
    for (name, _) in EXPECTED {
        let got = categories_of(&mut c, name);
        let want = expected(name, kind);
        if got != want {
            wrong.push(format!("{name}: {got:?}, want {want:?} ({kind:?})"));
        }
        if kind == Categories::None {
            continue;
        }
        // The categories say what the flags say, as for built-in commands.
        let flags = flags_of(&mut c, name);
        let has_flag = |f: &str| flags.iter().any(|g| g == f);
        let has_cat = |cat: &str| got.iter().any(|g| g == cat);
        for (flag, cat) in [
            ("write", "@write"),
            ("readonly", "@read"),
            ("fast", "@fast"),
            ("blocking", "@blocking"),
        ] {
            if has_flag(flag) != has_cat(cat) {
                wrong.push(format!("{name}: flags {flags:?} but categories {got:?}"));
            }
        }
        if has_cat("@fast") == has_cat("@slow") {
            wrong.push(format!("{name}: neither or both of @fast and @slow"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));

    // Listing a category's commands.
    let filtered = run(
        &mut c,
        &[b"COMMAND", b"LIST", b"FILTERBY", b"ACLCAT", b"dq"],
    );
    let acl_cat_dq = run(&mut c, &[b"ACL", b"CAT", b"dq"]);
    let acl_cat_write = sorted(strings(&cmd(&mut c, "ACL CAT write")))
        .into_iter()
        .filter(|n| n.starts_with("dq."))
        .collect::<Vec<_>>();
    let categories = strings(&cmd(&mut c, "ACL CAT"));
    if kind == Categories::WithDq {
        assert!(categories.iter().any(|n| n == "dq"), "{categories:?}");
        let listed = sorted(strings(&filtered.expect("FILTERBY ACLCAT dq")));
        assert_eq!(listed, all_names());
        let listed = sorted(strings(&acl_cat_dq.expect("ACL CAT dq")));
        if version.acl_cat_lists_module_commands() {
            assert_eq!(listed, all_names());
        } else {
            assert!(listed.is_empty(), "ACL CAT dq: {listed:?}");
        }
    } else {
        assert!(!categories.iter().any(|n| n == "dq"), "{categories:?}");
        let err = acl_cat_dq.expect_err("ACL CAT dq without @dq");
        assert!(err.contains("Unknown category"), "{err}");
    }
    let want_write = if kind != Categories::None && version.acl_cat_lists_module_commands() {
        in_category("@write")
    } else {
        Vec::new()
    };
    assert_eq!(acl_cat_write, want_write, "ACL CAT write");
}

#[test]
fn at_dq_grants_every_dq_command_and_nothing_else() {
    let (server, version) = server_with(None);
    if version.categories() != Categories::WithDq {
        // No such category: the server refuses the rule.
        let err = try_user(&server, "ops", "~* +@dq").expect_err("+@dq without @dq");
        assert!(err.contains("+@dq"), "{err}");
        return;
    }
    let mut ops = user(&server, "ops", "~* +@dq");
    assert_eq!(allowed(&mut ops), all_names());
    for line in ["GET k", "SET k v", "PING"] {
        let err = cmd_err(&mut ops, line);
        assert!(err.starts_with("NOPERM"), "{line}: {err}");
    }
    // And taking @dq away leaves the rest of +@all.
    let mut others = user(&server, "others", "~* +@all -@dq");
    assert!(allowed(&mut others).is_empty());
    cmd(&mut others, "SET k v");
}

#[test]
fn read_grants_the_reads_and_write_the_writes() {
    let (server, version) = server_with(None);
    let kind = version.categories();
    let mut reader = user(&server, "reader", "~* +@read");
    let mut writer = user(&server, "writer", "~* +@write");
    if kind == Categories::None {
        // Module commands are in no category: flags do not put them in any.
        assert!(allowed(&mut reader).is_empty());
        assert!(allowed(&mut writer).is_empty());
        let mut all = user(&server, "all", "~* +@all");
        assert_eq!(allowed(&mut all), all_names());
        let mut named = user(&server, "named", "~* +dq.get +dq.add");
        assert_eq!(allowed(&mut named), ["dq.add", "dq.get"]);
        return;
    }
    let reads = in_category("@read");
    assert_eq!(
        reads,
        [
            "dq.events",
            "dq.get",
            "dq.groups",
            "dq.peek",
            "dq.queues",
            "dq.scan",
            "dq.schedules",
            "dq.stats",
            "dq.wait"
        ]
    );
    assert_eq!(allowed(&mut reader), reads);
    let err = cmd_err(&mut reader, "DQ.ADD q x");
    assert!(err.starts_with("NOPERM"), "{err}");
    // The internal DQ.APPLY is a write, never granted by +@read.
    assert!(cmd_err(&mut reader, "DQ.APPLY q 0 1 ACK x").starts_with("NOPERM"));
    assert_eq!(allowed(&mut writer), in_category("@write"));
    assert!(cmd_err(&mut writer, "DQ.GET q ready").starts_with("NOPERM"));
    // DQ.APPLY granted is still refused to a client.
    let err = cmd_err(&mut writer, "DQ.APPLY q 0 1 ACK x");
    assert!(!err.starts_with("NOPERM"), "{err}");

    // The other standard categories subtract as expected.
    let mut safe = user(&server, "safe", "~* +@all -@dangerous");
    let mut want = all_names();
    want.retain(|n| n != "dq.queues" && n != "dq.apply");
    assert_eq!(allowed(&mut safe), want);
    let mut no_wait = user(&server, "nowait", "~* +@write -@blocking");
    let mut want = in_category("@write");
    want.retain(|n| n != "dq.pop" && n != "dq.mpop");
    assert_eq!(allowed(&mut no_wait), want);
    let mut fast = user(&server, "fast", "~* +@fast");
    assert_eq!(
        allowed(&mut fast),
        [
            "dq.add",
            "dq.get",
            "dq.nack",
            "dq.pause",
            "dq.resume",
            "dq.stats",
            "dq.touch"
        ]
    );
}

#[test]
fn users_in_the_configuration_may_use_at_dq_where_it_exists() {
    // The server loads configured users after its modules, so a `user`
    // line can name @dq; where there is no @dq it stops the server.
    let probe = Server::start();
    let kind = ServerVersion::of(&mut probe.conn()).categories();
    drop(probe);
    let started = Server::try_start(&["--user", "worker", "on", ">pw", "~*", "+@dq"], &[]);
    match (kind, started) {
        (Categories::WithDq, Ok(server)) => {
            let mut c = server.conn();
            cmd(&mut c, "AUTH worker pw");
            cmd(&mut c, "DQ.ADD q x");
            assert_eq!(entries(&cmd(&mut c, "DQ.POP q")).len(), 1);
            assert!(cmd_err(&mut c, "GET k").starts_with("NOPERM"));
        }
        (Categories::WithDq, Err(log)) => panic!("a +@dq user stopped the server:\n{log}"),
        (_, Ok(_)) => panic!("a +@dq user was accepted by a server without @dq"),
        (_, Err(log)) => assert!(log.contains("dq"), "{log}"),
    }
}

#[test]
fn without_the_module_category_the_commands_keep_the_standard_ones() {
    // The debug build's switch hides RedisModule_AddACLCategory, as on a
    // server with only RedisModule_SetCommandACLCategories (Redis 7.2,
    // Valkey 7.2): see src/server/acl.rs.
    let (server, version) = server_with(Some("no-acl-category-api"));
    let kind = match version.categories() {
        Categories::WithDq => Categories::Standard,
        other => other,
    };
    let mut c = server.conn();
    for (name, _) in EXPECTED {
        assert_eq!(categories_of(&mut c, name), expected(name, kind), "{name}");
    }
    if kind == Categories::None {
        return;
    }
    assert!(try_user(&server, "ops", "~* +@dq").is_err());
    let mut writer = user(&server, "writer", "~* +@write");
    assert_eq!(allowed(&mut writer), in_category("@write"));
    let mut reader = user(&server, "reader", "~* +@read");
    assert_eq!(allowed(&mut reader), in_category("@read"));
}
