//! Gives big allocations back off the main thread, as the server's own
//! lazy free does for UNLINK.
//!
//! Why: a queue that empties drops its record slab and id table at once.
//! For a million messages that touched 72 MB of cold records (a drop check
//! per slot) and freed some 900 chunks and a 10 MB table: 12 ms in one
//! call, measured in the timer tick that dropped the last retained result.
//! Handed to a thread instead, the call costs a channel send. The memory
//! comes from the server's allocator, which is thread-safe (the server
//! frees big queues on its own lazy-free thread too, see `free_effort`).
//!
//! Dropping is all the thread does: nothing it receives points anywhere
//! but into itself, and the order of frees is not observable.

use std::sync::mpsc::{channel, Sender};
use std::sync::Mutex;

type Garbage = Box<dyn Send>;

static THREAD: Mutex<Option<Sender<Garbage>>> = Mutex::new(None);

/// Drops `value` on the lazy-free thread, started on first use; at once
/// when no thread can be started.
pub fn drop_later<T: Send + 'static>(value: T) {
    let Err(garbage) = send(Box::new(value)) else {
        return;
    };
    drop(garbage);
}

fn send(garbage: Garbage) -> Result<(), Garbage> {
    let Ok(mut thread) = THREAD.lock() else {
        return Err(garbage);
    };
    let sender = match thread.as_ref() {
        Some(sender) => sender,
        None => {
            let (sender, receiver) = channel::<Garbage>();
            let started = std::thread::Builder::new()
                .name("dq-lazyfree".into())
                .spawn(move || receiver.into_iter().for_each(drop));
            if started.is_err() {
                return Err(garbage);
            }
            thread.insert(sender)
        }
    };
    if let Err(failed) = sender.send(garbage) {
        // The thread is gone: the next call starts another.
        *thread = None;
        return Err(failed.0);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::sync_channel;

    /// Tells a channel when it is dropped, and on which thread.
    struct Probe(std::sync::mpsc::SyncSender<std::thread::ThreadId>);

    impl Drop for Probe {
        fn drop(&mut self) {
            let _ = self.0.send(std::thread::current().id());
        }
    }

    #[test]
    fn values_are_dropped_on_another_thread() {
        for _ in 0..3 {
            let (tell, told) = sync_channel(1);
            drop_later(Probe(tell));
            let dropped_on = told
                .recv_timeout(std::time::Duration::from_secs(10))
                .expect("dropped");
            assert_ne!(dropped_on, std::thread::current().id());
        }
    }
}
