//! Publishes each command's [`CommandDoc`] to the server (COMMAND DOCS,
//! COMMAND INFO key specs, server-side arity checks) through
//! RedisModule_SetCommandInfo.
//!
//! The crate's `#[command]` macro would do this, but it demands the whole
//! Redis 7.2 API and so stops the module loading on older servers. Here the
//! two functions needed are looked up at load time: a server without them
//! gets the commands without the documentation.

use std::ffi::CString;
use std::os::raw::c_int;
use std::ptr;

use redis_module::{raw, Context};

use crate::grammar::docs::{Arg, CommandDoc, KeyUse, Kind, SINCE};
use crate::server::command::Command;

/// Registers the documentation of every command; returns whether the server
/// had the API. A command the server refuses to document is logged and
/// keeps working.
pub fn publish(ctx: &Context, commands: &[&Command]) -> bool {
    // SAFETY: the API table is filled once by RedisModule_Init, before the
    // load callback that calls this, and only read afterwards.
    let api = unsafe { (raw::RedisModule_GetCommand, raw::RedisModule_SetCommandInfo) };
    let (Some(get_command), Some(set_info)) = api else {
        ctx.log_notice("dq: this server has no RedisModule_SetCommandInfo: no COMMAND DOCS");
        return false;
    };
    for doc in commands.iter().map(|c| &c.doc) {
        let mut arena = Arena::default();
        let name = arena.text(doc.name);
        // SAFETY: called from the module's load callback, after the command
        // was created; `name` lives until the end of the iteration.
        let command = unsafe { get_command(ctx.ctx, name) };
        if command.is_null() {
            crate::server::guard::warn(Some(ctx), &format!("dq: {} is not registered", doc.name));
            continue;
        }
        let info = arena.info(doc);
        // SAFETY: every pointer in `info` points into `arena` (or is null
        // where the API allows it), alive until after the call; the server
        // copies what it keeps.
        let status = unsafe { set_info(command, &info) };
        if status != raw::REDISMODULE_OK as c_int {
            crate::server::guard::warn(
                Some(ctx),
                &format!("dq: the server refused the docs of {}", doc.name),
            );
        }
    }
    true
}

/// Owns the C strings and arrays one `RedisModuleCommandInfo` points into.
#[derive(Default)]
struct Arena {
    strings: Vec<CString>,
    /// Each inner vector's buffer stays put when the outer one grows.
    args: Vec<Vec<raw::RedisModuleCommandArg>>,
    key_specs: Vec<raw::RedisModuleCommandKeySpec>,
    version: Option<Box<raw::RedisModuleCommandInfoVersion>>,
}

impl Arena {
    /// A C copy of a static text; the docs hold no NUL bytes (a unit-tested
    /// table), and a text that did would only lose its documentation.
    fn text(&mut self, s: &str) -> *const std::os::raw::c_char {
        let Ok(c) = CString::new(s) else {
            return ptr::null();
        };
        self.strings.push(c);
        self.strings.last().map_or(ptr::null(), |c| c.as_ptr())
    }

    fn optional_text(&mut self, s: Option<&str>) -> *const std::os::raw::c_char {
        s.map_or(ptr::null(), |s| self.text(s))
    }

    fn info(&mut self, doc: &CommandDoc) -> raw::RedisModuleCommandInfo {
        let version = self
            .version
            .insert(Box::new(raw::RedisModuleCommandInfoVersion {
                version: 1,
                sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
                sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
                sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
            }));
        let version: *const raw::RedisModuleCommandInfoVersion = &**version;
        let key_specs = match doc.key {
            Some(key) => {
                let spec = key_spec(key_flags(key), doc.numkeys);
                self.key_specs = vec![spec, zeroed_key_spec()];
                self.key_specs.as_mut_ptr()
            }
            None => ptr::null_mut(),
        };
        raw::RedisModuleCommandInfo {
            version,
            summary: self.text(doc.summary),
            complexity: self.text(doc.complexity),
            since: self.text(SINCE),
            history: ptr::null_mut(),
            tips: ptr::null(),
            arity: doc.arity,
            key_specs,
            args: self.args(doc.args),
        }
    }

    /// A NULL-terminated array of `args`, or null when there are none.
    fn args(&mut self, args: &[Arg]) -> *mut raw::RedisModuleCommandArg {
        if args.is_empty() {
            return ptr::null_mut();
        }
        let mut out: Vec<raw::RedisModuleCommandArg> = Vec::with_capacity(args.len() + 1);
        for arg in args {
            let mut flags = raw::REDISMODULE_CMD_ARG_NONE;
            if arg.optional {
                flags |= raw::REDISMODULE_CMD_ARG_OPTIONAL;
            }
            if arg.multiple {
                flags |= raw::REDISMODULE_CMD_ARG_MULTIPLE;
            }
            out.push(raw::RedisModuleCommandArg {
                name: self.text(arg.name),
                type_: arg_type(arg.kind),
                // The key argument is described by key spec 0.
                key_spec_index: if arg.kind == Kind::Key { 0 } else { -1 },
                token: self.optional_text(arg.token),
                summary: ptr::null(),
                since: ptr::null(),
                flags: flags as c_int,
                deprecated_since: ptr::null(),
                subargs: self.args(arg.subargs),
                display_text: ptr::null(),
            });
        }
        // SAFETY: an all-zero RedisModuleCommandArg (null pointers, zero
        // numbers) is the array terminator the API expects.
        out.push(unsafe { std::mem::zeroed() });
        self.args.push(out);
        self.args
            .last_mut()
            .map_or(ptr::null_mut(), |v| v.as_mut_ptr())
    }
}

fn arg_type(kind: Kind) -> raw::RedisModuleCommandArgType {
    match kind {
        Kind::Key => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
        Kind::String => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
        Kind::Integer => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
        Kind::UnixTime => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_UNIX_TIME,
        Kind::PureToken => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
        Kind::OneOf => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF,
        Kind::Block => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK,
    }
}

/// The key spec of a command's keys, found from argument 1: the queue
/// alone there, or (`numkeys`) keys counted by that argument and
/// following it (`numkeys key [key ...]`).
fn key_spec(flags: u64, numkeys: bool) -> raw::RedisModuleCommandKeySpec {
    let mut spec = zeroed_key_spec();
    spec.flags = flags;
    spec.begin_search_type = raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
    spec.bs.index.pos = 1;
    if numkeys {
        spec.find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_KEYNUM;
        spec.fk.keynum.keynumidx = 0;
        spec.fk.keynum.firstkey = 1;
        spec.fk.keynum.keystep = 1;
    } else {
        spec.find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
        spec.fk.range.lastkey = 0;
        spec.fk.range.keystep = 1;
        spec.fk.range.limit = 0;
    }
    spec
}

fn zeroed_key_spec() -> raw::RedisModuleCommandKeySpec {
    // SAFETY: all-zero is a valid key spec (null notes, no flags) and, with
    // begin_search_type 0 (INVALID), the array terminator.
    unsafe { std::mem::zeroed() }
}

/// A key's `REDISMODULE_CMD_KEY_*` flags, as its command uses it.
fn key_flags(key: KeyUse) -> u64 {
    let bits = match key {
        KeyUse::Read => raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS,
        KeyUse::Insert => raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_INSERT,
        KeyUse::Update => raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_UPDATE,
        KeyUse::Take => {
            raw::REDISMODULE_CMD_KEY_RW
                | raw::REDISMODULE_CMD_KEY_ACCESS
                | raw::REDISMODULE_CMD_KEY_DELETE
        }
        KeyUse::Delete => raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_DELETE,
        KeyUse::Settings => {
            raw::REDISMODULE_CMD_KEY_RW
                | raw::REDISMODULE_CMD_KEY_ACCESS
                | raw::REDISMODULE_CMD_KEY_UPDATE
        }
    };
    bits.into()
}
