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
//! Debug builds (the ones the integration tests load) have a fault switch:
//! the environment variable `DQ_FAULT` lists entry points, by the names
//! given to [`catch`], that panic on entry. Release builds have no switch.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::ffi::CString;
use std::io::Write;
use std::mem::ManuallyDrop;
use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe, PanicHookInfo};
use std::ptr;
use std::sync::Once;

use redis_module::{raw, Context, RedisResult, RedisString};

use crate::core::error::DqError;

thread_local! {
    /// How many [`catch`] calls are running on this thread.
    static CATCHING: Cell<u32> = const { Cell::new(0) };
    /// Where the last panic on this thread happened ("src/x.rs:1:2"),
    /// left by the hook for [`catch`] to log.
    static LOCATION: RefCell<Option<String>> = const { RefCell::new(None) };
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
    let outcome = {
        let _catching = Catching::enter();
        catch_unwind(AssertUnwindSafe(|| {
            inject(point);
            f()
        }))
    };
    match outcome {
        Ok(value) => Some(value),
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
            None
        }
    }
}

/// A command's handler.
pub type Handler = fn(&Context, &[RedisString]) -> RedisResult;

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
        .unwrap_or_else(|| Err(crate::server::reply::error(DqError::Internal)));
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

#[cfg(debug_assertions)]
fn inject(point: &str) {
    use std::sync::OnceLock;
    static POINTS: OnceLock<Vec<String>> = OnceLock::new();
    let points = POINTS.get_or_init(|| {
        std::env::var("DQ_FAULT")
            .map(|list| list.split(',').map(str::to_owned).collect())
            .unwrap_or_default()
    });
    if points.iter().any(|p| p == point) {
        panic!("fault injected by DQ_FAULT");
    }
}

#[cfg(not(debug_assertions))]
fn inject(_point: &str) {}

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
