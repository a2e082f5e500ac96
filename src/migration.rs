//! Cluster slot migration: a queue's keys move between nodes one MIGRATE
//! batch at a time, so for a while each node holds only part of them.
//!
//! Acting on part of a queue would lose messages (an index entry whose
//! record already left looks stale and is dropped) or make MIGRATE fail
//! (a key created on the target before its turn). So while the queue's slot
//! is migrating or importing on this node, its commands answer TRYAGAIN
//! (cluster clients retry) and the timer leaves it alone, coming back
//! shortly. The queue name itself is never a key, so during a migration the
//! old owner redirects every command to the new one (ASK), and only the new
//! one has to refuse.
//!
//! Which slots are moving is read from CLUSTER NODES and cached. Only a
//! CLUSTER command run on this node can mark a slot migrating or importing,
//! so a command filter drops the cache whenever one runs; while slots are
//! moving the cache is also re-read every `REFRESH` to catch a state the
//! cluster bus cleared.

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::os::raw::c_int;
use std::time::{Duration, Instant};

use redis_module::{raw, Context, ContextFlags, RedisString, RedisValue};

use crate::keys::slot;

/// How soon the timer looks again at a queue it skipped for a migration.
pub const RETRY_MS: u64 = 20;

const REFRESH: Duration = Duration::from_millis(100);

/// Slots this node is migrating or importing, from its own line of CLUSTER
/// NODES: `[slot->-node]` (migrating) and `[slot-<-node]` (importing) after
/// the owned ranges.
pub fn moving_slots(cluster_nodes: &str) -> HashSet<u16> {
    let Some(myself) = cluster_nodes.lines().find(|line| {
        line.split(' ')
            .nth(2)
            .is_some_and(|f| f.split(',').any(|f| f == "myself"))
    }) else {
        return HashSet::new();
    };
    myself
        .split(' ')
        .skip(8)
        .filter_map(|field| field.strip_prefix('['))
        .filter_map(|field| {
            let end = field.find("->-").or_else(|| field.find("-<-"))?;
            field[..end].parse().ok()
        })
        .collect()
}

struct Moving {
    slots: HashSet<u16>,
    read_at: Instant,
}

thread_local! {
    // Main thread only; `None`: read CLUSTER NODES before trusting it.
    static MOVING: RefCell<Option<Moving>> = const { RefCell::new(None) };
    // cluster-enabled cannot change while the server runs: read at load,
    // not on every command.
    static CLUSTER: Cell<bool> = const { Cell::new(false) };
}

/// Whether `queue`'s slot is migrating or importing on this node.
pub fn is_moving(ctx: &Context, queue: &[u8]) -> bool {
    if !CLUSTER.with(Cell::get) {
        return false;
    }
    let stale = MOVING.with(|m| match &*m.borrow() {
        None => true,
        Some(m) => !m.slots.is_empty() && m.read_at.elapsed() >= REFRESH,
    });
    if stale {
        let slots = read_moving_slots(ctx);
        MOVING.with(|m| {
            *m.borrow_mut() = Some(Moving {
                slots,
                read_at: Instant::now(),
            })
        });
    }
    let slot = slot(queue);
    MOVING.with(|m| m.borrow().as_ref().is_some_and(|m| m.slots.contains(&slot)))
}

fn read_moving_slots(ctx: &Context) -> HashSet<u16> {
    let text = match ctx.call("CLUSTER", &["NODES"]) {
        Ok(RedisValue::SimpleString(s)) | Ok(RedisValue::BulkString(s)) => s,
        Ok(RedisValue::StringBuffer(b)) => String::from_utf8_lossy(&b).into_owned(),
        Ok(RedisValue::VerbatimString((_, b))) => String::from_utf8_lossy(&b).into_owned(),
        other => {
            // Unreadable: treat every queue as movable rather than risk
            // acting on half of one; the next call tries again.
            crate::guard::warn(Some(ctx), &format!("dq: CLUSTER NODES gave {other:?}"));
            return (0..crate::keys::SLOTS as u16).collect();
        }
    };
    moving_slots(&text)
}

/// Drops the cache when a CLUSTER command runs (SETSLOT, RESET, ...).
extern "C" fn on_command(fctx: *mut raw::RedisModuleCommandFilterCtx) {
    crate::guard::catch("command filter", || filter(fctx));
}

fn filter(fctx: *mut raw::RedisModuleCommandFilterCtx) {
    // SAFETY: Redis calls filters on the main thread with a live filter
    // context; argument 0 (the command name) exists for every command.
    let name = unsafe {
        let arg = raw::RedisModule_CommandFilterArgGet.unwrap()(fctx, 0);
        if arg.is_null() {
            return;
        }
        RedisString::string_as_slice(arg)
    };
    if name.eq_ignore_ascii_case(b"cluster") {
        MOVING.with(|m| *m.borrow_mut() = None);
    }
}

/// Installs the command filter; call from the module's load callback.
pub fn start(ctx: &Context) -> Result<(), String> {
    let cluster = ctx.get_flags().contains(ContextFlags::CLUSTER);
    CLUSTER.with(|c| c.set(cluster));
    // SAFETY: called from OnLoad with the module's context. NOSELF: the
    // module's own CLUSTER NODES call must not drop what it just read.
    let filter = unsafe {
        raw::RedisModule_RegisterCommandFilter.unwrap()(
            ctx.ctx,
            Some(on_command),
            raw::REDISMODULE_CMDFILTER_NOSELF as c_int,
        )
    };
    if filter.is_null() {
        return Err("could not register the command filter".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODES: &str = "\
07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@31004 slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected
67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@31002 master - 0 1426238316232 2 connected 5461-10922
292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f 127.0.0.1:30003@31003 myself,master - 0 1426238318243 3 connected 10923-16383 [93->-67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1] [1002-<-67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1]
e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@31001 master - 0 0 1 connected 0-5460 [77->-292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f]
";

    #[test]
    fn finds_this_nodes_migrating_and_importing_slots_only() {
        let slots = moving_slots(NODES);
        assert_eq!(slots, HashSet::from([93, 1002]));
    }

    #[test]
    fn a_stable_node_moves_nothing() {
        assert!(
            moving_slots("abc 127.0.0.1:1@2 myself,master - 0 0 1 connected 0-16383\n").is_empty()
        );
        assert!(moving_slots("").is_empty());
        assert!(
            moving_slots("x y master - 0 0 1 connected [5->-z]\n").is_empty(),
            "not myself"
        );
    }
}
