//! A command's one declaration, and everything the server is told from it.
//!
//! Each command file under `commands/` declares one [`Command`]: its name,
//! documentation and argument tree ([`CommandDoc`]), its server flags, what
//! ACL categories it adds to those its flags imply, its handler, its pure
//! grammar (fuzzed), and the `DQ.APPLY` verb it propagates with the function
//! that replays it. `commands::ALL` lists them; registration, ACL
//! categories, COMMAND DOCS and the replay of `DQ.APPLY` all read that list,
//! so a command is added by writing its file and one line of the list.

use std::os::raw::c_int;
use std::sync::OnceLock;

use redis_module::{raw, Context};

use crate::core::error::Result;
use crate::core::policy::{Policy, Settings};
use crate::core::queue::Queue;
use crate::grammar::docs::CommandDoc;
use crate::server::guard;
use crate::server::settings;

/// Runs the command for a client: opens the key, calls the queue,
/// propagates, announces, and returns the reply or the error.
pub use crate::server::guard::Handler;

/// Checks the arguments after the command name the way the handler does
/// before it touches anything; pure, so it is fuzzed and unit-tested.
pub type Grammar = fn(&[&[u8]]) -> Result<()>;

/// Replays what the command propagated, on a replica or from the AOF.
pub type Replay = fn(&mut Queue, &Replayed<'_>) -> Result<()>;

/// What `DQ.APPLY queue now max-attempts VERB args...` hands a replay.
#[derive(Debug, Clone, Copy)]
pub struct Replayed<'a> {
    /// The master's clock when the write ran.
    pub now: u64,
    /// The master's `dq.max-attempts`.
    pub max_attempts: u32,
    /// The queue's name.
    pub name: &'a [u8],
    /// The verb's arguments.
    pub args: &'a [&'a [u8]],
}

impl<'a> Replayed<'a> {
    /// The queue's name, then the arguments: the command grammars start so.
    pub fn with_name(&self) -> Vec<&'a [u8]> {
        std::iter::once(self.name)
            .chain(self.args.iter().copied())
            .collect()
    }

    /// The policy in force, with the master's `dq.max-attempts`: the
    /// decisions NACK and a tick make depend on it, not on this server's.
    pub fn policy(&self, queue: &Queue) -> Policy {
        queue.config().resolve(&Settings {
            max_attempts: self.max_attempts,
            ..settings::current()
        })
    }
}

/// One command, declared once.
pub struct Command {
    /// Name, summary, complexity, arity, key and argument tree.
    pub doc: CommandDoc,
    /// The server's command flags (`write deny-oom fast`, ...).
    pub flags: &'static str,
    /// ACL categories beyond those the flags imply (see `acl.rs`).
    pub acl: &'static str,
    pub handler: Handler,
    pub grammar: Grammar,
    /// The `DQ.APPLY` verb this command propagates, and its replay;
    /// `None` for a command that writes nothing or propagates another's
    /// verb (DQ.MPOP propagates DQ.POP's `CLAIM`).
    pub replay: Option<(&'static str, Replay)>,
}

impl Command {
    /// First key, last key and step, as RedisModule_CreateCommand takes
    /// them: the queue is the first argument; a command with `numkeys`
    /// finds its keys itself (`getkeys-api`) and one without a key has 0s.
    pub fn key_range(&self) -> (c_int, c_int, c_int) {
        match (self.doc.key, self.doc.numkeys) {
            (Some(_), false) => (1, 1, 1),
            _ => (0, 0, 0),
        }
    }
}

/// The replay of `verb` among `commands`, matched without regard to case.
pub fn replay_of(commands: &[&Command], verb: &[u8]) -> Option<Replay> {
    commands.iter().find_map(|c| match c.replay {
        Some((name, replay)) if name.as_bytes().eq_ignore_ascii_case(verb) => Some(replay),
        _ => None,
    })
}

/// The commands registered, for the callbacks below.
static REGISTERED: OnceLock<&'static [&'static Command]> = OnceLock::new();

type Callback =
    extern "C" fn(*mut raw::RedisModuleCtx, *mut *mut raw::RedisModuleString, c_int) -> c_int;

/// The server calls a plain C function per command, with no user data:
/// callback `I` runs the `I`th command registered.
extern "C" fn run<const I: usize>(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    let Some(command) = REGISTERED.get().and_then(|all| all.get(I)) else {
        return raw::REDISMODULE_ERR as c_int;
    };
    // SAFETY: exactly what the server passed this callback.
    unsafe { guard::dispatch(ctx, argv, argc, command.doc.name, command.handler) }
}

macro_rules! callbacks {
    ($($i:literal)*) => { [$(run::<$i> as Callback),*] };
}

/// One callback per command there can be.
const CALLBACKS: [Callback; 40] = callbacks!(
    0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19
    20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39
);

/// Creates every command. Call once, from the load callback.
pub fn register(
    ctx: &Context,
    commands: &'static [&'static Command],
) -> std::result::Result<(), String> {
    if commands.len() > CALLBACKS.len() {
        return Err(format!(
            "{} commands, callbacks for {}",
            commands.len(),
            CALLBACKS.len()
        ));
    }
    if REGISTERED.set(commands).is_err() {
        return Err("the commands are registered already".into());
    }
    for (command, callback) in commands.iter().zip(CALLBACKS) {
        let name = std::ffi::CString::new(command.doc.name).map_err(|e| e.to_string())?;
        let flags = std::ffi::CString::new(command.flags).map_err(|e| e.to_string())?;
        let (first, last, step) = command.key_range();
        // SAFETY: OnLoad; the server copies both C strings, alive until
        // after the call.
        let status = unsafe {
            raw::RedisModule_CreateCommand.unwrap()(
                ctx.ctx,
                name.as_ptr(),
                Some(callback),
                flags.as_ptr(),
                first,
                last,
                step,
            )
        };
        if status != raw::REDISMODULE_OK as c_int {
            return Err(format!("could not create command {}", command.doc.name));
        }
    }
    Ok(())
}
