//! A thin, safe handle over one Redis key, for the ZSET and HASH calls the
//! redis-module crate does not wrap. All `unsafe` key access lives here.
//!
//! Invariant relied on throughout: a `Key` is only used on the main thread
//! inside the callback whose `Context` opened it, and is closed (dropped)
//! before that callback returns.

use std::os::raw::{c_int, c_void};
use std::ptr;

use redis_module::{raw, Context, RedisString};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    Empty,
    Hash,
    Zset,
    Other,
}

pub struct Key {
    ctx: *mut raw::RedisModuleCtx,
    /// Null when the key was opened for reading and does not exist.
    key: *mut raw::RedisModuleKey,
}

impl Key {
    pub fn open(ctx: &Context, name: &RedisString, writable: bool) -> Key {
        let mode = if writable {
            raw::KeyMode::READ | raw::KeyMode::WRITE
        } else {
            raw::KeyMode::READ
        };
        let key = raw::open_key(ctx.ctx, name.inner, mode);
        Key { ctx: ctx.ctx, key }
    }

    pub fn kind(&self) -> KeyKind {
        if self.key.is_null() {
            return KeyKind::Empty;
        }
        // SAFETY: `self.key` is an open key handle (see the module invariant).
        let kind = unsafe { raw::RedisModule_KeyType.unwrap()(self.key) } as isize;
        match kind {
            k if k == raw::REDISMODULE_KEYTYPE_EMPTY => KeyKind::Empty,
            k if k == raw::REDISMODULE_KEYTYPE_HASH => KeyKind::Hash,
            k if k == raw::REDISMODULE_KEYTYPE_ZSET => KeyKind::Zset,
            _ => KeyKind::Other,
        }
    }

    /// Number of members or fields; 0 for a missing key.
    pub fn value_length(&self) -> u64 {
        if self.key.is_null() {
            return 0;
        }
        // SAFETY: open key handle.
        unsafe { raw::RedisModule_ValueLength.unwrap()(self.key) as u64 }
    }

    fn string(&self, bytes: &[u8]) -> RedisString {
        RedisString::create_from_slice(self.ctx, bytes)
    }

    /// Takes ownership of a string the API returned to us: freed on drop.
    /// (`RedisString::new` would retain it once more and leak it.)
    fn owned(&self, s: *mut raw::RedisModuleString) -> Option<RedisString> {
        (!s.is_null()).then(|| RedisString::from_redis_module_string(self.ctx, s))
    }

    pub fn zset_add(&mut self, score: f64, member: &RedisString) {
        let mut flags: c_int = 0;
        // SAFETY: open writable key of type zset or empty (checked by the
        // caller); `member` outlives the call.
        unsafe { raw::RedisModule_ZsetAdd.unwrap()(self.key, score, member.inner, &mut flags) };
    }

    /// Whether `member` was there.
    pub fn zset_remove(&mut self, member: &RedisString) -> bool {
        if self.key.is_null() {
            return false;
        }
        let mut deleted: c_int = 0;
        // SAFETY: as for zset_add. Removing the last member deletes the key.
        unsafe { raw::RedisModule_ZsetRem.unwrap()(self.key, member.inner, &mut deleted) };
        deleted != 0
    }

    pub fn zset_has(&self, member: &RedisString) -> bool {
        if self.key.is_null() {
            return false;
        }
        let mut score = 0.0;
        // SAFETY: open zset key (type checked on open); `member` outlives the call.
        unsafe {
            raw::RedisModule_ZsetScore.unwrap()(self.key, member.inner, &mut score)
                == raw::REDISMODULE_OK as c_int
        }
    }

    /// Up to `limit` members with score <= `max`, in ZSET order.
    pub fn zset_range(&mut self, max: f64, limit: usize) -> Vec<(Vec<u8>, f64)> {
        let mut out = Vec::new();
        if self.key.is_null() || limit == 0 {
            return out;
        }
        // SAFETY: open zset key; the range is stopped before returning, and
        // each returned element is owned and freed by `owned`.
        unsafe {
            let first = raw::RedisModule_ZsetFirstInScoreRange.unwrap();
            if first(self.key, f64::NEG_INFINITY, max, 0, 0) != raw::REDISMODULE_OK as c_int {
                return out;
            }
            while out.len() < limit && raw::RedisModule_ZsetRangeEndReached.unwrap()(self.key) == 0
            {
                let mut score = 0.0;
                let element =
                    raw::RedisModule_ZsetRangeCurrentElement.unwrap()(self.key, &mut score);
                if let Some(element) = self.owned(element) {
                    out.push((element.as_slice().to_vec(), score));
                }
                if raw::RedisModule_ZsetRangeNext.unwrap()(self.key) == 0 {
                    break;
                }
            }
            raw::RedisModule_ZsetRangeStop.unwrap()(self.key);
        }
        out
    }

    /// The first member with a score above `min` (or at it, when not
    /// `exclusive`), with its score.
    pub fn zset_first_from(&mut self, min: f64, exclusive: bool) -> Option<(Vec<u8>, f64)> {
        if self.key.is_null() {
            return None;
        }
        // SAFETY: as for zset_range.
        unsafe {
            let first = raw::RedisModule_ZsetFirstInScoreRange.unwrap();
            if first(self.key, min, f64::INFINITY, exclusive.into(), 0)
                != raw::REDISMODULE_OK as c_int
            {
                return None;
            }
            self.take_range_head()
        }
    }

    /// The first element of the range just started on this key, if any;
    /// stops the range.
    ///
    /// # Safety
    /// A ZsetFirstIn*Range call on this open key must have succeeded.
    unsafe fn take_range_head(&mut self) -> Option<(Vec<u8>, f64)> {
        let mut found = None;
        if raw::RedisModule_ZsetRangeEndReached.unwrap()(self.key) == 0 {
            let mut score = 0.0;
            let element = raw::RedisModule_ZsetRangeCurrentElement.unwrap()(self.key, &mut score);
            found = self.owned(element).map(|e| (e.as_slice().to_vec(), score));
        }
        raw::RedisModule_ZsetRangeStop.unwrap()(self.key);
        found
    }

    /// The first member >= `min` in byte order, in a zset whose scores are
    /// all equal (lexicographic ranges are undefined otherwise).
    pub fn zset_first_from_lex(&mut self, min: &[u8]) -> Option<Vec<u8>> {
        if self.key.is_null() {
            return None;
        }
        let mut bound = Vec::with_capacity(min.len() + 1);
        bound.push(b'[');
        bound.extend_from_slice(min);
        let min = self.string(&bound);
        let max = self.string(b"+");
        // SAFETY: as for zset_range; the bounds outlive the range.
        unsafe {
            let first = raw::RedisModule_ZsetFirstInLexRange.unwrap();
            if first(self.key, min.inner, max.inner) != raw::REDISMODULE_OK as c_int {
                return None;
            }
            self.take_range_head().map(|(member, _)| member)
        }
    }

    /// Deletes the key, whatever it holds.
    pub fn delete(&mut self) {
        if !self.key.is_null() {
            // SAFETY: open writable key; the handle stays usable (empty).
            unsafe { raw::RedisModule_DeleteKey.unwrap()(self.key) };
        }
    }

    pub fn hash_get(&self, field: &[u8]) -> Option<Vec<u8>> {
        self.hash_get_string(field).map(|v| v.as_slice().to_vec())
    }

    /// As `hash_get`, without copying the value out of the string.
    pub fn hash_get_string(&self, field: &[u8]) -> Option<RedisString> {
        if self.key.is_null() {
            return None;
        }
        let field = self.string(field);
        let mut value: *mut raw::RedisModuleString = ptr::null_mut();
        // SAFETY: open hash key; the variadic list is (field, &value) pairs
        // terminated by NULL, as RedisModule_HashGet requires.
        unsafe {
            raw::RedisModule_HashGet.unwrap()(
                self.key,
                raw::REDISMODULE_HASH_NONE as c_int,
                field.inner,
                &mut value as *mut *mut raw::RedisModuleString,
                ptr::null_mut::<c_void>(),
            );
        }
        self.owned(value)
    }

    pub fn hash_exists(&self, field: &[u8]) -> bool {
        if self.key.is_null() {
            return false;
        }
        let field = self.string(field);
        let mut exists: c_int = 0;
        // SAFETY: open hash key; with HASH_EXISTS the pairs are (field,
        // &int), terminated by NULL.
        unsafe {
            raw::RedisModule_HashGet.unwrap()(
                self.key,
                raw::REDISMODULE_HASH_EXISTS as c_int,
                field.inner,
                &mut exists as *mut c_int,
                ptr::null_mut::<c_void>(),
            );
        }
        exists != 0
    }

    pub fn hash_set(&mut self, field: &RedisString, value: &RedisString) {
        // SAFETY: open writable hash key or empty; NULL-terminated pairs.
        unsafe {
            raw::RedisModule_HashSet.unwrap()(
                self.key,
                raw::REDISMODULE_HASH_NONE as c_int,
                field.inner,
                value.inner,
                ptr::null_mut::<c_void>(),
            );
        }
    }

    pub fn hash_delete(&mut self, field: &RedisString) {
        if self.key.is_null() {
            return;
        }
        // REDISMODULE_HASH_DELETE is the sentinel pointer value 1.
        let delete = ptr::without_provenance_mut::<raw::RedisModuleString>(1);
        // SAFETY: as for hash_set; deleting the last field deletes the key.
        unsafe {
            raw::RedisModule_HashSet.unwrap()(
                self.key,
                raw::REDISMODULE_HASH_NONE as c_int,
                field.inner,
                delete,
                ptr::null_mut::<c_void>(),
            );
        }
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        if !self.key.is_null() {
            raw::close_key(self.key);
        }
    }
}

/// Tells WATCH and client-side caching that `name` changed. The module
/// turns off the implicit signal on closing every writable key, so that a
/// command that changes nothing invalidates nothing.
pub fn signal_modified(ctx: &Context, name: &RedisString) {
    // SAFETY: main thread, live context and string.
    unsafe { raw::RedisModule_SignalModifiedKey.unwrap()(ctx.ctx, name.inner) };
}

/// Wakes clients blocked on `name` (DQ.POP BLOCK waits on the ready key).
pub fn signal_ready(ctx: &Context, name: &RedisString) {
    // SAFETY: main thread, live context and string.
    unsafe { raw::RedisModule_SignalKeyAsReady.unwrap()(ctx.ctx, name.inner) };
}

/// The database a context works in.
pub fn selected_db(ctx: &Context) -> i32 {
    // SAFETY: live context on the main thread.
    unsafe { raw::RedisModule_GetSelectedDb.unwrap()(ctx.ctx) }
}

/// Calls `visit` with the name of every key in the selected database and,
/// when the server could open it, its read-only handle (valid during the
/// call only).
pub fn scan_keys(ctx: &Context, mut visit: impl FnMut(&[u8], Option<*mut raw::RedisModuleKey>)) {
    type Visit<'a> = &'a mut dyn FnMut(&[u8], Option<*mut raw::RedisModuleKey>);
    extern "C" fn on_key(
        _ctx: *mut raw::RedisModuleCtx,
        name: *mut raw::RedisModuleString,
        key: *mut raw::RedisModuleKey,
        visit: *mut c_void,
    ) {
        // SAFETY: `visit` is the closure passed to RedisModule_Scan below,
        // alive for the whole scan; `name` is valid during the callback.
        let visit = unsafe { &mut *(visit as *mut Visit) };
        let key = (!key.is_null()).then_some(key);
        // No unwinding through the server's scan.
        crate::guard::catch("scan", || visit(RedisString::string_as_slice(name), key));
    }
    let mut visit: Visit = &mut visit;
    // SAFETY: main thread; the cursor is destroyed after the last call.
    unsafe {
        let cursor = raw::RedisModule_ScanCursorCreate.unwrap()();
        while raw::RedisModule_Scan.unwrap()(
            ctx.ctx,
            cursor,
            Some(on_key),
            &mut visit as *mut Visit as *mut c_void,
        ) != 0
        {}
        raw::RedisModule_ScanCursorDestroy.unwrap()(cursor);
    }
}
