//! The queue as a Redis data type: how the server saves, loads, rewrites,
//! digests, measures, copies and frees a [`Queue`]. The bytes themselves
//! are `queue::codec`'s; this file only hands them to the server.
//!
//! RDB (and DUMP): one string with the header, then one string per record
//! chunk, as many as the header says records. AOF rewrite (only with
//! `aof-use-rdb-preamble no`): one `DQ.APPLY queue 0 max-attempts LOAD header
//! chunk...`
//! command, which rebuilds the value with the same loader.
//!
//! Invariant for every callback: the value pointer the server hands us was
//! made by `Box::into_raw(Box<Queue>)` (`QueueKey::create` through the
//! crate's `set_value`, `rdb_load`, `copy`) and is not used after `free`.

use std::ffi::c_void;
use std::os::raw::{c_char, c_int};
use std::ptr;

use redis_module::{native_types::RedisType, raw, RedisString};

use crate::core::queue::codec::{self, Loader, ENCODING_VERSION};
use crate::core::queue::Queue;

/// Exactly nine characters, as the server requires: `TYPE orders` says it.
pub const TYPE_NAME: &str = "dq--queue";

pub static QUEUE_TYPE: RedisType = RedisType::new(
    TYPE_NAME,
    ENCODING_VERSION,
    raw::RedisModuleTypeMethods {
        version: raw::REDISMODULE_TYPE_METHOD_VERSION as u64,
        rdb_load: Some(rdb_load),
        rdb_save: Some(rdb_save),
        aof_rewrite: Some(aof_rewrite),
        mem_usage: Some(mem_usage),
        digest: Some(digest),
        free: Some(free),
        aux_load: None,
        aux_save: None,
        aux_save_triggers: 0,
        free_effort: Some(free_effort),
        unlink: None,
        copy: None,
        defrag: None,
        mem_usage2: Some(mem_usage2),
        free_effort2: None,
        unlink2: Some(unlink),
        copy2: Some(copy),
        aux_save2: None,
    },
);

/// The value behind a pointer the server holds.
///
/// # Safety
/// `value` must come from `Box::into_raw(Box<Queue>)` and not be freed.
unsafe fn queue<'a>(value: *const c_void) -> &'a Queue {
    &*value.cast::<Queue>()
}

fn into_value(queue: Queue) -> *mut c_void {
    Box::into_raw(Box::new(queue)).cast()
}

extern "C" fn rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    // SAFETY: see the module invariant.
    let queue = unsafe { queue(value) };
    // A panic must not unwind into the server; the codec does not panic on
    // a valid queue, and a half-written value is refused on load.
    crate::server::guard::catch("rdb save", || {
        raw::save_slice(rdb, &codec::header(queue));
        codec::record_chunks(queue, |chunk| raw::save_slice(rdb, chunk));
    });
}

extern "C" fn rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    let loaded = crate::server::guard::catch("rdb load", || load(rdb, encver))
        .unwrap_or_else(|| Err(codec::CodecError("internal error while loading".into())));
    match loaded {
        Ok(queue) => into_value(queue),
        Err(e) => {
            // The server reports a failed RESTORE as bad data and stops a
            // failed startup load; the log says which key and why.
            // SAFETY: `rdb` is live for the callback; the name, when the
            // server knows it, is a string it owns for the call.
            let name = unsafe { raw::RedisModule_GetKeyNameFromIO.unwrap()(rdb) };
            let name = match name.is_null() {
                true => "?".into(),
                false => String::from_utf8_lossy(RedisString::string_as_slice(name.cast_mut()))
                    .into_owned(),
            };
            crate::server::guard::warn(None, &format!("dq: cannot load queue '{name}': {}", e.0));
            ptr::null_mut()
        }
    }
}

fn load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> Result<Queue, codec::CodecError> {
    if !codec::READABLE_VERSIONS.contains(&encver) {
        return Err(codec::CodecError(format!(
            "encoding version {encver} is unknown to this build (it reads 1 to {ENCODING_VERSION})"
        )));
    }
    let short = |_| codec::CodecError("the stored value ends early".into());
    let header = raw::load_string_buffer(rdb).map_err(short)?;
    let mut loader = Loader::new(header.as_ref())?;
    while loader.remaining() > 0 {
        let chunk = raw::load_string_buffer(rdb).map_err(short)?;
        loader.add_chunk(chunk.as_ref())?;
    }
    loader.finish()
}

extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    // SAFETY: see the module invariant.
    let queue = unsafe { queue(value) };
    crate::server::guard::catch("aof rewrite", || {
        // LOAD reads no clock and no setting; the header stays well-formed.
        let max_attempts = crate::server::settings::max_attempts().to_string();
        let mut args = vec![
            RedisString::create_from_slice(ptr::null_mut(), b"0"),
            RedisString::create_from_slice(ptr::null_mut(), max_attempts.as_bytes()),
            RedisString::create_from_slice(ptr::null_mut(), b"LOAD"),
            RedisString::create_from_slice(ptr::null_mut(), &codec::header(queue)),
        ];
        codec::record_chunks(queue, |chunk| {
            args.push(RedisString::create_from_slice(ptr::null_mut(), chunk));
        });
        let mut argv: Vec<*mut raw::RedisModuleString> = args.iter().map(|s| s.inner).collect();
        // SAFETY: "sv" takes the key string, then (array, length); the
        // server takes its own references to every string during the call.
        unsafe {
            raw::RedisModule_EmitAOF.unwrap()(
                aof,
                c"DQ.APPLY".as_ptr(),
                c"sv".as_ptr(),
                key,
                argv.as_mut_ptr(),
                argv.len(),
            );
        }
    });
}

/// What the server allocates around a module value besides the key's name
/// and dict entry (which MEMORY USAGE adds itself): the value's object
/// header and its type-and-pointer pair, 16 bytes each.
const VALUE_WRAPPER: usize = 32;

/// What one queue with a name of `name_len` bytes costs beyond its value:
/// the wrapper, and its entry in the module's registry of queues.
fn per_queue_bytes(name_len: usize) -> usize {
    VALUE_WRAPPER + crate::core::registry::Registry::bytes_per_queue(name_len)
}

/// For a server that does not give the key's name (mem_usage2 is used
/// where it exists: Redis 7.0 and later, every Valkey).
extern "C" fn mem_usage(value: *const c_void) -> usize {
    // SAFETY: see the module invariant.
    let queue = unsafe { queue(value) };
    crate::server::guard::catch("memory usage", || queue.mem_usage() + per_queue_bytes(16))
        .unwrap_or(0)
}

/// MEMORY USAGE: the value, and what the queue costs the server and the
/// module besides, so that thousands of small queues add up to what
/// used_memory says they take.
extern "C" fn mem_usage2(
    ctx: *mut raw::RedisModuleKeyOptCtx,
    value: *const c_void,
    _sample_size: usize,
) -> usize {
    // SAFETY: see the module invariant; the server passes a live context
    // whose key name (when it has one) lives for the call.
    let (queue, name_len) = unsafe {
        let name = raw::RedisModule_GetKeyNameFromOptCtx.map_or(ptr::null(), |f| f(ctx));
        let mut len = 16;
        if !name.is_null() {
            raw::RedisModule_StringPtrLen.unwrap()(name, &mut len);
        }
        (queue(value), len)
    };
    crate::server::guard::catch("memory usage", || {
        queue.mem_usage() + per_queue_bytes(name_len)
    })
    .unwrap_or(0)
}

extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    // SAFETY: see the module invariant.
    let queue = unsafe { queue(value) };
    crate::server::guard::catch("digest", || {
        codec::digest_items(queue, |item| {
            // SAFETY: `md` is live for the callback; the buffer for the call.
            unsafe {
                raw::RedisModule_DigestAddStringBuffer.unwrap()(
                    md,
                    item.as_ptr().cast::<c_char>().cast_mut(),
                    item.len(),
                );
                raw::RedisModule_DigestEndSequence.unwrap()(md);
            }
        });
    });
}

/// Dropping a queue touches every record: above the server's threshold
/// (64) the server frees it on its lazy-free thread, so UNLINK and FLUSHALL
/// ASYNC of a big queue do not pause the main thread. Dropping only frees
/// Rust memory through the allocator, which is thread-safe; nothing else
/// points into the value.
extern "C" fn free_effort(_key: *mut raw::RedisModuleString, value: *const c_void) -> usize {
    // SAFETY: see the module invariant. (0 would mean "unknown, free it
    // on the thread": an empty queue is freed at once instead.)
    unsafe { queue(value) }.len().max(1)
}

extern "C" fn free(value: *mut c_void) {
    if !value.is_null() {
        // SAFETY: see the module invariant; the server frees a value once.
        drop(unsafe { Box::from_raw(value.cast::<Queue>()) });
    }
}

/// The key leaves the keyspace: DEL, UNLINK, RENAME away, and also an
/// overwrite by another command (SET, RESTORE REPLACE...), which sends no
/// `del` event of its own. The value is still there; only its waiters are
/// told it is gone.
extern "C" fn unlink(ctx: *mut raw::RedisModuleKeyOptCtx, _value: *const c_void) {
    crate::server::guard::catch("unlink", || {
        // SAFETY: the server passes a live option context for the call; the
        // name it returns is a string it owns for the call.
        let (db, name) = unsafe {
            (
                raw::RedisModule_GetDbIdFromOptCtx.unwrap()(ctx),
                raw::RedisModule_GetKeyNameFromOptCtx.unwrap()(ctx),
            )
        };
        if !name.is_null() {
            let name = RedisString::string_as_slice(name.cast_mut());
            crate::server::watch::unlinked(db, name);
        }
    });
}

extern "C" fn copy(ctx: *mut raw::RedisModuleKeyOptCtx, value: *const c_void) -> *mut c_void {
    // SAFETY: see the module invariant.
    let queue = unsafe { queue(value) };
    // SAFETY: the server passes a live option context for the call; the
    // name it returns is a string it owns for the call.
    let (from_db, to) = unsafe {
        (
            raw::RedisModule_GetDbIdFromOptCtx.unwrap()(ctx),
            raw::RedisModule_GetToKeyNameFromOptCtx.unwrap()(ctx),
        )
    };
    if !to.is_null() {
        let to = RedisString::string_as_slice(to.cast_mut());
        crate::server::keyspace::copying(from_db, to);
    }
    // Through the codec: one path that is already checked to rebuild an
    // equal value.
    match crate::server::guard::catch("copy", || codec::copy(queue)) {
        Some(Ok(copy)) => into_value(copy),
        _ => ptr::null_mut(),
    }
}
