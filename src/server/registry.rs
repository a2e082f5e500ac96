//! The node's one registry of queues (see `core::registry`), and which
//! queues have clients blocked on them: main thread only, like everything
//! the server calls.

use std::cell::RefCell;

use hashbrown::HashMap;

use crate::core::registry::{QueueRef, Registry};

thread_local! {
    static REGISTRY: RefCell<Registry> = RefCell::new(Registry::default());
    /// Clients blocked (DQ.POP, DQ.MPOP BLOCK) per queue. Few entries: a
    /// queue is here only while someone waits on it.
    static WAITERS: RefCell<HashMap<QueueRef, u32>> = RefCell::new(HashMap::new());
}

/// A client blocked on (`+1`) or left (`-1`) the queue.
pub fn count_waiter(queue: QueueRef, change: i32) {
    WAITERS.with(|w| {
        let mut w = w.borrow_mut();
        let n = w.entry(queue).or_insert(0);
        *n = n.saturating_add_signed(change);
        w.retain(|_, n| *n > 0);
    });
}

/// Whether clients are blocked on the queue.
pub fn has_waiters(db: i32, name: &[u8]) -> bool {
    WAITERS.with(|w| {
        let w = w.borrow();
        // Every write asks: most of the time nobody waits anywhere.
        !w.is_empty() && w.contains_key(&(db, name.to_vec()))
    })
}

/// The registry, for the length of `f` (which must not call back into it).
pub fn with<T>(f: impl FnOnce(&mut Registry) -> T) -> T {
    REGISTRY.with(|r| f(&mut r.borrow_mut()))
}
