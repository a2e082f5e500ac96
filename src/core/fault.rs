//! Fault points: places where a debug build can be told to panic, so the
//! tests can show what a panic leaves behind (`tests/faults.rs`). Entry
//! points are named by the server's guard (`dq.add`, `timer`, ...); the
//! points here sit in the middle of a change of a queue (`add:record`,
//! `pop:batch`, ...), where a bug would leave it half-changed.
//!
//! The server arms them once, at load, from the `DQ_FAULT` environment
//! variable (a comma-separated list). Release builds have no points: a
//! call compiles to nothing.

#[cfg(debug_assertions)]
static ARMED: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

/// Arms the named points; only the first call counts.
#[cfg(debug_assertions)]
pub fn arm(points: Vec<String>) {
    let _ = ARMED.set(points);
}

#[cfg(not(debug_assertions))]
pub fn arm(_points: Vec<String>) {}

/// Panics when `name` is armed.
#[inline(always)]
pub fn point(name: &str) {
    #[cfg(debug_assertions)]
    if ARMED
        .get()
        .is_some_and(|armed| armed.iter().any(|p| p == name))
    {
        panic!("fault injected by DQ_FAULT");
    }
    #[cfg(not(debug_assertions))]
    let _ = name;
}
