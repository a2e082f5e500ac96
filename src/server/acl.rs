//! ACL categories of the DQ commands, so that `+@write`, `+@read` and the
//! module's own `+@dq` grant them as users expect of built-in commands.
//!
//! The server does not derive categories from a module command's flags:
//! a module must declare them (RedisModule_SetCommandACLCategories, Redis
//! 7.2 and Valkey 7.2 on) and may add its own category
//! (RedisModule_AddACLCategory, Redis 7.4 and Valkey 8.0 on). Both are
//! looked up at load time, as `command_info` does for COMMAND DOCS; Redis
//! 7.0 has neither, and there the commands stay without categories.

use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_int};

use redis_module::{raw, Context};

use crate::server::command::Command;

/// The module's category: `+@dq` grants every DQ command.
pub const MODULE_CATEGORY: &CStr = c"dq";

/// A command's standard categories: those the server's rule for its own
/// commands derives from the flags (`write` → @write, `readonly` → @read,
/// `fast` → @fast and otherwise @slow, `blocking` → @blocking), then the
/// command's own additions (`Command::acl`), for what flags cannot say:
/// - DQ.QUEUES is @dangerous, like KEYS: it walks the whole keyspace and
///   lists every queue whatever the caller's key patterns.
/// - DQ.APPLY is @admin @dangerous, like PSYNC and REPLCONF: only the
///   replication stream and the AOF may send it (a client gets an error
///   even when the ACL lets it through, and the master's link and the AOF
///   are not subject to ACL), so no application role should be granted it.
///
/// DQ.CONFIG and DQ.PURGE are plain writes on one queue, which key patterns
/// already confine: not @admin (which would force granting the server's
/// CONFIG SET, DEBUG and SHUTDOWN to whoever may purge a queue). DQ.CONFIG
/// reads or sets in one command, and categories are per command: it is
/// @write, so a `+@read` user cannot read a queue's settings either.
pub fn standard(command: &Command) -> String {
    let flags: Vec<&str> = command.flags.split(' ').collect();
    let has = |flag: &str| flags.contains(&flag);
    let mut categories = Vec::new();
    if has("write") {
        categories.push("write");
    }
    if has("readonly") {
        categories.push("read");
    }
    categories.push(if has("fast") { "fast" } else { "slow" });
    if has("blocking") {
        categories.push("blocking");
    }
    categories.extend(command.acl.split(' ').filter(|c| !c.is_empty()));
    categories.join(" ")
}

/// What the commands got from this server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// No RedisModule_SetCommandACLCategories (Redis 7.0): no categories;
    /// only `+@all` or the command's name grants a DQ command.
    None,
    /// The standard categories, without `@dq`: the server has no
    /// RedisModule_AddACLCategory (Redis 7.2, Valkey 7.2) or refused it.
    Standard,
    /// The standard categories and `@dq`.
    Module,
}

/// The server's ACL entry points, copied out of the crate's API table.
struct Api {
    get_command: unsafe extern "C" fn(
        *mut raw::RedisModuleCtx,
        *const c_char,
    ) -> *mut raw::RedisModuleCommand,
    set_categories: unsafe extern "C" fn(*mut raw::RedisModuleCommand, *const c_char) -> c_int,
    add_category: Option<unsafe extern "C" fn(*mut raw::RedisModuleCtx, *const c_char) -> c_int>,
}

impl Api {
    /// The entry points this server has, `None` without the one that sets
    /// categories.
    fn lookup() -> Option<Api> {
        // SAFETY: the API table is filled once by RedisModule_Init, before
        // the load callback that calls this, and only read afterwards; a
        // function the server lacks is left null (`None`).
        let (get_command, set_categories, add_category) = unsafe {
            (
                raw::RedisModule_GetCommand,
                raw::RedisModule_SetCommandACLCategories,
                raw::RedisModule_AddACLCategory,
            )
        };
        Some(Api {
            get_command: get_command?,
            set_categories: set_categories?,
            add_category: add_category.filter(|_| !as_if_without_add_category()),
        })
    }

    /// Adds `@dq`; false when the server has no such API or refuses (a
    /// category of that name exists already, or the 64 are taken).
    ///
    /// Must run in the load callback: the server accepts new categories
    /// only then.
    fn add_module_category(&self, ctx: &Context) -> bool {
        let Some(add) = self.add_category else {
            return false;
        };
        // SAFETY: called from the module's load callback with its context;
        // the name is a static NUL-terminated string the server copies.
        let status = unsafe { add(ctx.ctx, MODULE_CATEGORY.as_ptr()) };
        status == raw::REDISMODULE_OK as c_int
    }

    /// Sets the categories of command `name`, created before. Must run in
    /// the load callback, the only time the server accepts them.
    fn set(&self, ctx: &Context, name: &str, categories: &str) -> Result<(), String> {
        let c_name = CString::new(name).map_err(|e| e.to_string())?;
        let c_categories = CString::new(categories).map_err(|e| e.to_string())?;
        // SAFETY: load callback, module context; `c_name` outlives the call.
        let command = unsafe { (self.get_command)(ctx.ctx, c_name.as_ptr()) };
        if command.is_null() {
            return Err(format!("{name} is not registered"));
        }
        // SAFETY: `command` is this module's, just looked up; the server
        // parses `c_categories`, alive until after the call, and keeps bits.
        let status = unsafe { (self.set_categories)(command, c_categories.as_ptr()) };
        if status != raw::REDISMODULE_OK as c_int {
            return Err(format!(
                "the server refused the categories of {name}: {categories}"
            ));
        }
        Ok(())
    }
}

/// Debug builds: `DQ_FAULT` (see `guard`) naming `no-acl-category-api`
/// makes dq act as on a server with RedisModule_SetCommandACLCategories but
/// without RedisModule_AddACLCategory (Redis 7.2, Valkey 7.2), so the tests
/// can check what users get there on the servers at hand. Unlike guard's
/// points it panics nowhere: it hides the function, nothing more.
#[cfg(debug_assertions)]
fn as_if_without_add_category() -> bool {
    std::env::var("DQ_FAULT").is_ok_and(|v| v.split(',').any(|p| p == "no-acl-category-api"))
}

#[cfg(not(debug_assertions))]
fn as_if_without_add_category() -> bool {
    false
}

/// The categories to declare for one command: its standard ones, and `@dq`
/// when the server took it.
pub fn declared(standard: &str, with_module_category: bool) -> String {
    if with_module_category {
        // MODULE_CATEGORY is ASCII ("dq").
        format!("{standard} {}", MODULE_CATEGORY.to_string_lossy())
    } else {
        standard.to_string()
    }
}

/// Adds `@dq` and gives every command its categories, where the server
/// can. Call from the load callback, after the commands are created. A
/// command the server refuses categories to is logged and keeps working
/// without them (which grants less, never more).
pub fn publish(ctx: &Context, commands: &[&Command]) -> Support {
    let Some(api) = Api::lookup() else {
        ctx.log_notice(
            "dq: this server has no RedisModule_SetCommandACLCategories: \
             DQ commands are in no ACL category (grant them by name or +@all)",
        );
        return Support::None;
    };
    let module = api.add_module_category(ctx);
    if !module {
        ctx.log_notice("dq: no ACL category @dq on this server: only the standard categories");
    }
    for command in commands {
        let categories = declared(&standard(command), module);
        if let Err(e) = api.set(ctx, command.doc.name, &categories) {
            crate::server::guard::warn(Some(ctx), &format!("dq: {e}"));
        }
    }
    if module {
        Support::Module
    } else {
        Support::Standard
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_module_category_is_added_only_when_the_server_took_it() {
        assert_eq!(declared("read fast", true), "read fast dq");
        assert_eq!(declared("read fast", false), "read fast");
    }
}
