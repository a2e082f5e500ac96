//! COMMAND DOCS, COMMAND INFO key specs and ACL key patterns for the DQ
//! commands, as Redis users inspect built-in commands.

use dq_testkit::*;

fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::Array(items) | Value::Set(items) => items.iter().map(text).collect(),
        other => panic!("not a list: {other:?}"),
    }
}

#[test]
fn every_command_has_docs_with_the_queue_as_its_key() {
    let server = Server::start();
    let mut c = server.conn();
    let mut names = strings(&cmd(&mut c, "COMMAND LIST FILTERBY MODULE dq"));
    names.sort();
    assert_eq!(
        names,
        [
            "dq.ack",
            "dq.add",
            "dq.apply",
            "dq.cancel",
            "dq.config",
            "dq.done",
            "dq.events",
            "dq.get",
            "dq.groups",
            "dq.mpop",
            "dq.nack",
            "dq.pause",
            "dq.peek",
            "dq.pop",
            "dq.purge",
            "dq.queues",
            "dq.redrive",
            "dq.resume",
            "dq.scan",
            "dq.schedule",
            "dq.schedules",
            "dq.stats",
            "dq.touch",
            "dq.unschedule",
            "dq.wait"
        ]
    );
    for name in &names {
        let docs = cmd(&mut c, &format!("COMMAND DOCS {name}"));
        let doc = field(&docs, name);
        for f in ["summary", "since", "complexity"] {
            assert!(!text(&field(&doc, f)).is_empty(), "{name} {f}");
        }
        assert_eq!(text(&field(&doc, "module")), "dq");
        if name == "dq.queues" {
            continue;
        }
        // The queue is the first argument; DQ.MPOP's come after numkeys.
        let args = list(&field(&doc, "arguments"));
        let first = &args[usize::from(name == "dq.mpop")];
        assert_eq!(text(&field(first, "name")), "queue", "{name}");
        assert_eq!(text(&field(first, "type")), "key", "{name}");
    }
    // The options of DQ.ADD, as `redis-cli` hints and client generators read them.
    let add = field(&cmd(&mut c, "COMMAND DOCS dq.add"), "dq.add");
    let tokens: Vec<String> = list(&field(&add, "arguments"))
        .iter()
        .filter_map(|a| record(a).into_iter().find(|(k, _)| k == "token"))
        .map(|(_, v)| text(&v))
        .collect();
    assert_eq!(
        tokens,
        [
            "ID",
            "PRIORITY",
            "MAXATTEMPTS",
            "BACKOFF",
            "GROUP",
            "TTL",
            "RETAIN"
        ]
    );
}

#[test]
fn key_specs_say_how_each_command_uses_the_queue() {
    let server = Server::start();
    let mut c = server.conn();
    let flags_of = |c: &mut redis::Connection, name: &str| {
        let info = list(&cmd(c, &format!("COMMAND INFO {name}")));
        let specs = list(&list(&info[0])[8]);
        strings(&field(&specs[0], "flags"))
    };
    assert_eq!(flags_of(&mut c, "dq.add"), ["RW", "insert"]);
    assert_eq!(flags_of(&mut c, "dq.pop"), ["RW", "access", "delete"]);
    assert_eq!(flags_of(&mut c, "dq.get"), ["RO", "access"]);
    assert_eq!(flags_of(&mut c, "dq.ack"), ["RW", "delete"]);
    let info = list(&cmd(&mut c, "COMMAND INFO dq.queues"));
    assert!(list(&list(&info[0])[8]).is_empty(), "DQ.QUEUES has no key");
    // Any queue name is the key, braces and all.
    for name in ["orders", "a{b}c", "}{"] {
        let keys = strings(
            &run(
                &mut c,
                &[b"COMMAND", b"GETKEYS", b"DQ.ADD", name.as_bytes(), b"x"],
            )
            .unwrap(),
        );
        assert_eq!(keys, [name]);
    }
}
