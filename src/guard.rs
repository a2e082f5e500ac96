//! Nothing dq does may bring the server down: every entry point Redis calls
//! (commands, the timer, blocked-client, event, filter, INFO and config
//! callbacks) runs inside [`catch`], which turns a panic into a log line and,
//! for a command, an error reply. And every log line goes through [`warn`],
//! which never hands text to the server as a printf format.
//!
//! Debug builds (the ones the integration tests load) have a fault switch:
//! the environment variable `DQ_FAULT` lists entry points, by the names
//! given to [`catch`], that panic on entry. Release builds have no switch.

use std::any::Any;
use std::ffi::CString;
use std::mem::ManuallyDrop;
use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use redis_module::{raw, Context, RedisResult, RedisString};

use crate::error::DqError;

/// Runs `f`. A panic is logged, naming `point`, and gives `None`.
pub fn catch<T>(point: &str, f: impl FnOnce() -> T) -> Option<T> {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        inject(point);
        f()
    }));
    match outcome {
        Ok(value) => Some(value),
        Err(payload) => {
            warn(
                None,
                &format!("dq: internal error in {point}: {}", panic_text(&*payload)),
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
        .unwrap_or_else(|| Err(DqError::Internal.into_redis()));
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
