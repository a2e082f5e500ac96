//! The node's one registry of queues (see `core::registry`): main thread
//! only, like everything the server calls.

use std::cell::RefCell;

use crate::core::registry::Registry;

thread_local! {
    static REGISTRY: RefCell<Registry> = RefCell::new(Registry::default());
}

/// The registry, for the length of `f` (which must not call back into it).
pub fn with<T>(f: impl FnOnce(&mut Registry) -> T) -> T {
    REGISTRY.with(|r| f(&mut r.borrow_mut()))
}
