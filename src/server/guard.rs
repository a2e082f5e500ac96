//! Nothing dq does may bring the server down: every entry point Redis calls
//! (commands, the timer, blocked-client, event, filter, INFO and config
//! callbacks) runs inside [`catch`], which turns a panic into a log line and,
//! for a command, an error reply. And every log line goes through [`warn`],
//! which never hands text to the server as a printf format.
//!
//! A panic is reported by dq's own panic hook ([`install_panic_hook`]),
//! never by std's default one, so that what happens does not depend on the
//! server's environment (`RUST_BACKTRACE`).
//!
//! A panic may stop a change of a queue half-way. Every queue an entry
//! point opened for writing is then checked; one that fails its own check
//! is marked damaged and refused every command (`DAMAGED`) until a reload
//! rebuilds it, so a half-changed queue is never served silently.
//!
//! Debug builds (the ones the integration tests load) have a fault switch:
//! the environment variable `DQ_FAULT` lists entry points, by the names
//! given to [`catch`], that panic on entry, and points in the middle of a
//! change (`core/fault.rs`). Release builds have no switch.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::ffi::CString;
use std::io::Write;
use std::mem::ManuallyDrop;
use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe, PanicHookInfo};
use std::ptr::{self, NonNull};
use std::sync::Once;

use redis_module::{raw, Context, RedisString, RedisValue};

use crate::core::error::DqError;
use crate::core::fault;
use crate::core::queue::Queue;

thread_local! {
    /// How many [`catch`] calls are running on this thread.
    static CATCHING: Cell<u32> = const { Cell::new(0) };
    /// Where the last panic on this thread happened ("src/x.rs:1:2"),
    /// left by the hook for [`catch`] to log.
    static LOCATION: RefCell<Option<String>> = const { RefCell::new(None) };
    /// Queues opened for writing by the entry points running now, in the
    /// order they were opened (see [`Opened`]).
    static OPEN: RefCell<Vec<Opened>> = const { RefCell::new(Vec::new()) };
    /// What a queue that passed its check after a panic is owed (see
    /// [`set_recovery`]).
    static RECOVER: Cell<Option<Recovery>> = const { Cell::new(None) };
}

/// A queue opened for writing, and where: its key's name (retained) and
/// the context of the entry point that opened it.
///
/// Invariant: the queue and the context stay valid until [`catch`] of the
/// entry point that opened the queue returns: no dq code frees a queue
/// while its entry point runs, except `QueueKey::replace`, which calls
/// [`forget`] first. The name is retained by [`opened`] and released when
/// the entry is settled.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Opened {
    queue: NonNull<Queue>,
    name: *mut raw::RedisModuleString,
    ctx: *mut raw::RedisModuleCtx,
}

/// Tells the rest of the server about a queue a panic interrupted but left
/// consistent: propagates its whole value and announces it.
pub type Recovery = fn(&Context, &RedisString, &mut Queue);

/// Sets what [`catch`] does for a queue that passes its check after a
/// panic. Once, at load.
pub fn set_recovery(recover: Recovery) {
    let _ = RECOVER.try_with(|r| r.set(Some(recover)));
}

/// Notes a queue opened for writing under `name` by the entry point
/// running with `ctx`, to be checked if a panic follows.
pub fn opened(ctx: &Context, name: &RedisString, queue: NonNull<Queue>) {
    // SAFETY: main thread; a null context retains the string until the
    // matching FreeString(NULL, ..) in `settle_opened` or `forget`.
    unsafe { raw::RedisModule_RetainString.unwrap()(ptr::null_mut(), name.inner) };
    let entry = Opened {
        queue,
        name: name.inner,
        ctx: ctx.ctx,
    };
    let _ = OPEN.try_with(|open| open.borrow_mut().push(entry));
}

fn release(name: *mut raw::RedisModuleString) {
    // SAFETY: a string `opened` retained with a null context, once.
    unsafe { raw::RedisModule_FreeString.unwrap()(ptr::null_mut(), name) };
}

/// Takes a queue off the list before its value is freed.
pub fn forget(queue: NonNull<Queue>) {
    let _ = OPEN.try_with(|open| {
        open.borrow_mut().retain(|o| {
            if o.queue == queue {
                release(o.name);
            }
            o.queue != queue
        })
    });
}

/// Forgets the queues opened since `mark`; after a panic, first checks
/// each: one that fails is marked damaged, one that passes is recovered.
fn settle_opened(mark: usize, panicked: bool) {
    let opened: Vec<Opened> = OPEN
        .try_with(|open| {
            let mut open = open.borrow_mut();
            let at = mark.min(open.len());
            open.split_off(at)
        })
        .unwrap_or_default();
    if !panicked {
        opened.iter().for_each(|o| release(o.name));
        return;
    }
    let recover = RECOVER.try_with(Cell::get).ok().flatten();
    // The same queue may have been opened twice: settle it once.
    let mut settled: Vec<NonNull<Queue>> = Vec::new();
    for &o in &opened {
        if settled.contains(&o.queue) {
            continue;
        }
        settled.push(o.queue);
        let mut queue = o.queue;
        // SAFETY: the invariant of `Opened`: the queue and the context are
        // alive until this entry point's `catch` returns, which is running
        // now, and the name is retained; the panic unwound every borrow of
        // the queue.
        let (queue, ctx) = unsafe { (queue.as_mut(), Context::new(o.ctx)) };
        // SAFETY: as above; a view of the name that never frees it.
        let name = ManuallyDrop::new(RedisString::from_redis_module_string(o.ctx, o.name));
        let outcome = catch_unwind(AssertUnwindSafe(|| match queue.check() {
            Ok(()) => {
                if let Some(recover) = recover {
                    recover(&ctx, &name, queue);
                }
                None
            }
            Err(why) => Some(why),
        }));
        let why = match outcome {
            Ok(None) => continue,
            Ok(Some(why)) => why,
            Err(_) => "its check stopped".to_string(),
        };
        queue.mark_damaged();
        warn(
            None,
            &format!(
                "dq: queue '{}' failed its check after that internal error ({why}): \
                 commands on it reply DAMAGED until it is reloaded",
                crate::core::error::printable(name.as_slice())
            ),
        );
    }
    opened.iter().for_each(|o| release(o.name));
}

/// Replaces std's panic hook with [`hook`]; once, at module load.
///
/// std's default hook reads `RUST_BACKTRACE` from the server's environment
/// and, when it is set, captures and symbolizes a backtrace in the middle of
/// a panic we are about to catch. That must not decide whether the server
/// survives: on Valkey 8.1, which opens modules with `RTLD_DEEPBIND`, the
/// symbolizer hands memory that libc allocated (through the server's
/// jemalloc) to glibc's own `free()`, and the server aborts.
///
/// Replacing the hook is ours to do inside a host process: a cdylib links
/// its own copy of std and exports only its C entry points, so this hook
/// is this library's alone. It sees only panics of dq's code (and of the
/// crates dq links); the server is C, and any other Rust module has its own
/// std with its own hook, untouched.
pub fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| std::panic::set_hook(Box::new(hook)));
}

/// Records where the panic happened, for [`catch`] to log with its message.
/// A panic outside [`catch`] (which then aborts: nothing of dq unwinds into
/// the server) is written to stderr, as std's hook would, without a
/// backtrace. Allocates no more than a short string and never panics.
fn hook(info: &PanicHookInfo<'_>) {
    let location = info
        .location()
        .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
        .unwrap_or_default();
    let caught = CATCHING.try_with(Cell::get).unwrap_or(0) > 0;
    if caught {
        let _ = LOCATION.try_with(|slot| {
            if let Ok(mut slot) = slot.try_borrow_mut() {
                *slot = Some(location);
            }
        });
    } else {
        let _ = writeln!(
            std::io::stderr(),
            "dq: panic at {location}: {}",
            panic_text(info.payload())
        );
    }
}

/// Counts a running [`catch`] while alive.
struct Catching;

impl Catching {
    fn enter() -> Catching {
        let _ = CATCHING.try_with(|n| n.set(n.get().saturating_add(1)));
        Catching
    }
}

impl Drop for Catching {
    fn drop(&mut self) {
        let _ = CATCHING.try_with(|n| n.set(n.get().saturating_sub(1)));
    }
}

/// Runs `f`. A panic is logged, naming `point` and where it happened, and
/// gives `None`.
pub fn catch<T>(point: &str, f: impl FnOnce() -> T) -> Option<T> {
    let mark = OPEN.try_with(|open| open.borrow().len()).unwrap_or(0);
    let outcome = {
        let _catching = Catching::enter();
        catch_unwind(AssertUnwindSafe(|| {
            fault::point(point);
            f()
        }))
    };
    match outcome {
        Ok(value) => {
            settle_opened(mark, false);
            Some(value)
        }
        Err(payload) => {
            let at = LOCATION
                .try_with(|slot| slot.try_borrow_mut().ok().and_then(|mut s| s.take()))
                .ok()
                .flatten()
                .map(|l| format!(" (at {l})"))
                .unwrap_or_default();
            warn(
                None,
                &format!(
                    "dq: internal error in {point}: {}{at}",
                    panic_text(&*payload)
                ),
            );
            settle_opened(mark, true);
            None
        }
    }
}

/// A command's handler: its reply, or the error the one mapping in
/// `reply.rs` turns into an error reply.
pub type Handler = fn(&Context, &[RedisString]) -> crate::core::error::Result<RedisValue>;

/// Runs a command for the server: the arguments are borrowed as they are
/// (no copy, no reference counting), and a panic answers an error.
///
/// # Safety
/// `ctx`, `argv` and `argc` must be what the server passed to a command
/// callback, which is running now.
pub unsafe fn dispatch(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
    name: &'static str,
    handler: Handler,
) -> c_int {
    let context = Context::new(ctx);
    let argc = usize::try_from(argc).unwrap_or(0);
    // Views of the server's strings that never free them.
    let args: Vec<ManuallyDrop<RedisString>> = (0..argc)
        // SAFETY: the caller's contract: `argc` valid strings, alive for the call.
        .map(|i| {
            ManuallyDrop::new(RedisString::from_redis_module_string(ctx, unsafe {
                *argv.add(i)
            }))
        })
        .collect();
    // SAFETY: ManuallyDrop<T> has T's layout (repr(transparent)); the
    // views outlive the borrow and are never dropped as strings.
    let args = unsafe {
        &*(args.as_slice() as *const [ManuallyDrop<RedisString>] as *const [RedisString])
    };
    let response = catch(name, || handler(&context, args))
        .unwrap_or(Err(DqError::Internal))
        .map_err(crate::server::reply::error);
    context.reply(response) as c_int
}

/// Logs at warning level. The text is passed as an argument of a "%s"
/// format: a queue name or id holding `%n` must stay text. (The crate's
/// logging passes the message as the format itself.)
pub fn warn(ctx: Option<&Context>, message: &str) {
    let ctx = ctx.map_or(ptr::null_mut(), |c| c.ctx);
    let text = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
    // SAFETY: main thread; both C strings outlive the call; a null context
    // is allowed and logs without the module name.
    unsafe {
        raw::RedisModule_Log.unwrap()(ctx, c"warning".as_ptr(), c"%s".as_ptr(), text.as_ptr());
    }
}

fn panic_text(payload: &(dyn Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic")
}

/// Arms the fault points `DQ_FAULT` names (debug builds; see
/// `core/fault.rs`). Once, at module load.
pub fn arm_faults() {
    if cfg!(debug_assertions) {
        let points = std::env::var("DQ_FAULT").unwrap_or_default();
        fault::arm(
            points
                .split(',')
                .filter(|p| !p.is_empty())
                .map(str::to_owned)
                .collect(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panic_text_reads_both_payload_kinds() {
        let s = catch_unwind(|| panic!("plain")).unwrap_err();
        assert_eq!(panic_text(&*s), "plain");
        let n = 7;
        let s = catch_unwind(|| panic!("formatted {n}")).unwrap_err();
        assert_eq!(panic_text(&*s), "formatted 7");
    }
}
