//! A queue's groups tab (docs/commands.md, "Groups: limits, fair order,
//! pauses"). The calls are dq-client's: `admin::groups_page` (DQ.GROUPS)
//! gives each [`GroupInfo`], `admin::pause_group` / `resume_group` act on
//! one group (ops.rs), and `Stats::groups` and `QueueConfig`'s
//! `group_limit`, `group_rate` and `order` are the group fields of
//! DQ.STATS and DQ.CONFIG.
//!
//! The groups tab sorts by backlog, which needs the groups first: they are
//! read with DQ.GROUPS COUNT [`READ_COUNT`], following the cursor, up to
//! [`MAX_GROUPS`] groups looked at (in name order) per page render — at
//! most ten calls — and sorted and paged here.

use dq_client::{admin, Error, GroupInfo, QueueConfig, Stats};
use redis::aio::ConnectionManager;

/// COUNT of each DQ.GROUPS call.
pub const READ_COUNT: usize = 1000;
/// The most groups a groups tab looks at (all shards of a sharded queue
/// together): beyond, the tab says it shows the first ones by name.
pub const MAX_GROUPS: usize = 10_000;
/// Groups a groups tab shows per page.
pub const PER_PAGE: usize = 50;
/// A group name is 1 to 1024 bytes (DQ.ADD GROUP).
pub const MAX_GROUP: usize = 1024;

/// What the tab sorts by: messages due and not out yet.
pub fn backlog(g: &GroupInfo) -> u64 {
    g.waiting.saturating_add(g.ready)
}

/// How many groups the queue has (DQ.STATS `groups`); None when the
/// server does not say: a module without groups reports neither that nor
/// a GROUPLIMIT (its `group_limit` reads 0; the module's is 1 or more).
pub fn count(stats: &Stats, config: &QueueConfig) -> Option<u64> {
    (config.group_limit > 0).then_some(stats.groups)
}

/// What reading a queue's groups found.
#[derive(Debug, Default)]
pub struct Read {
    pub groups: Vec<GroupInfo>,
    /// The iteration stopped at the bound with groups left to look at.
    pub cut: bool,
}

/// The groups of `queue` matching `pattern`, DQ.GROUPS COUNT
/// [`READ_COUNT`] (or less) from cursor 0 on, until the cursor ends or
/// `budget` groups were looked at.
pub async fn read(
    con: &mut ConnectionManager,
    queue: &[u8],
    pattern: Option<&[u8]>,
    budget: usize,
) -> Result<Read, Error> {
    let mut out = Read::default();
    let mut cursor = String::from("0");
    let mut looked = 0usize;
    loop {
        let count = READ_COUNT.min(budget - looked).max(1);
        let (next, mut got) = admin::groups_page(con, queue, &cursor, pattern, count).await?;
        out.groups.append(&mut got);
        looked += count;
        if next == "0" {
            return Ok(out);
        }
        if looked >= budget {
            out.cut = true;
            return Ok(out);
        }
        cursor = next;
    }
}

/// Backlog (waiting + ready) first, most first; then by name. `group`
/// gives each row's group.
pub fn sort<T>(rows: &mut [T], group: impl Fn(&T) -> &GroupInfo) {
    rows.sort_by(|a, b| {
        let (a, b) = (group(a), group(b));
        backlog(b)
            .cmp(&backlog(a))
            .then_with(|| a.name.cmp(&b.name))
    });
}

/// The MATCH pattern of the tab's filter box, as the queue list's name
/// box reads its text: with `*`, `?` or `[` it is a glob as it stands;
/// else a part of the name (`*text*`, the text's glob characters escaped).
pub fn pattern(filter: &[u8]) -> Option<Vec<u8>> {
    if filter.is_empty() {
        return None;
    }
    if filter.iter().any(|b| matches!(b, b'*' | b'?' | b'[')) {
        return Some(filter.to_vec());
    }
    let mut p = b"*".to_vec();
    p.extend(admin::glob_escape(filter));
    p.push(b'*');
    Some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_by_backlog_then_name() {
        let g = |name: &str, waiting, ready| GroupInfo {
            name: name.as_bytes().to_vec(),
            waiting,
            ready,
            inflight: 9,
            ..GroupInfo::default()
        };
        let mut all = vec![g("c", 1, 1), g("a", 0, 2), g("b", 5, 0), g("d", 0, 0)];
        sort(&mut all, |g| g);
        let names: Vec<&[u8]> = all.iter().map(|g| &g.name[..]).collect();
        assert_eq!(names, [&b"b"[..], b"a", b"c", b"d"]);
    }

    #[test]
    fn the_filter_is_a_part_of_the_name_or_a_glob() {
        assert_eq!(pattern(b""), None);
        assert_eq!(pattern(b"ten"), Some(b"*ten*".to_vec()));
        assert_eq!(pattern(b"a\\b"), Some(b"*a\\\\b*".to_vec()));
        assert_eq!(pattern(b"tenant-*"), Some(b"tenant-*".to_vec()));
        assert!(dq_glob::matches(&pattern(b"nt-1").unwrap(), b"tenant-12"));
    }

    #[test]
    fn the_group_count_is_shown_when_the_module_has_groups() {
        let stats = Stats {
            groups: 3,
            ..Stats::default()
        };
        let with = QueueConfig {
            group_limit: 1,
            ..QueueConfig::default()
        };
        assert_eq!(count(&stats, &with), Some(3));
        let none = Stats::default();
        assert_eq!(count(&none, &with), Some(0));
        // An older module: neither field.
        assert_eq!(count(&none, &QueueConfig::default()), None);
    }
}
