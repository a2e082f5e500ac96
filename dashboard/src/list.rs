//! The queue list's view: which queues (a name pattern, a state count, one
//! server), in which order, which page. All of it lives in the URL's query,
//! so every sort header, page link and the filter form (a GET) work with
//! JavaScript off, and a view can be bookmarked or reloaded by the
//! auto-refresh without losing its place.

use std::cmp::Ordering;

use dq_client::{admin, State, Stats};

use crate::render::url_part;

/// Queues on one page unless `per` says otherwise: a page of 50 rows is
/// about 100 KB whatever the number of queues.
pub const PER_PAGE: usize = 50;
/// The most `per` may ask for: 200 rows stay well under 500 KB.
pub const MAX_PER_PAGE: usize = 200;

/// A column the list can be sorted by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sort {
    Name,
    Server,
    State(State),
    Total,
    /// The age of the oldest ready message: the queue's lag.
    Oldest,
}

impl Sort {
    pub const ALL: [Sort; 8] = [
        Sort::Name,
        Sort::Server,
        Sort::State(State::Delayed),
        Sort::State(State::Ready),
        Sort::State(State::Inflight),
        Sort::State(State::Dead),
        Sort::Total,
        Sort::Oldest,
    ];

    pub fn key(self) -> &'static str {
        match self {
            Sort::Name => "name",
            Sort::Server => "server",
            Sort::State(s) => s.as_str(),
            Sort::Total => "total",
            Sort::Oldest => "oldest",
        }
    }

    fn parse(s: &str) -> Option<Sort> {
        Sort::ALL.into_iter().find(|k| k.key() == s)
    }

    /// A count is first wanted biggest first; a name from A.
    pub fn default_desc(self) -> bool {
        !matches!(self, Sort::Name | Sort::Server)
    }
}

/// "Only queues with messages": in any state, or in one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Has {
    Any,
    State(State),
}

impl Has {
    pub fn key(self) -> &'static str {
        match self {
            Has::Any => "any",
            Has::State(s) => s.as_str(),
        }
    }

    fn count(self, s: &Stats) -> u64 {
        match self {
            Has::Any => s.total(),
            Has::State(st) => s.count(st),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListQuery {
    /// The name filter as typed (`q`); empty: every name.
    pub name: Vec<u8>,
    pub has: Option<Has>,
    /// With `has`: at least this many messages (1 unless given).
    pub min: u64,
    /// Only paused queues (`paused=1`).
    pub paused: bool,
    /// Only this server's queues (`host:port`).
    pub server: Option<String>,
    pub sort: Sort,
    pub desc: bool,
    /// 1-based.
    pub page: usize,
    pub per: usize,
}

impl Default for ListQuery {
    fn default() -> ListQuery {
        ListQuery {
            name: Vec::new(),
            has: None,
            min: 1,
            paused: false,
            server: None,
            sort: Sort::Name,
            desc: false,
            page: 1,
            per: PER_PAGE,
        }
    }
}

/// A parameter the list cannot use: (title, what to give instead).
pub type BadParam = (&'static str, String);

fn text<'a>(v: &'a [u8], name: &str) -> Result<&'a str, BadParam> {
    std::str::from_utf8(v).map_err(|_| ("Bad parameter", format!("{name} is not UTF-8")))
}

fn number(v: &[u8], name: &str, lo: u64, hi: u64) -> Result<u64, BadParam> {
    text(v, name)?
        .trim()
        .parse::<u64>()
        .ok()
        .filter(|n| (lo..=hi).contains(n))
        .ok_or_else(|| {
            let range = if hi == u64::MAX {
                format!("{lo} or more")
            } else {
                format!("from {lo} to {hi}")
            };
            (
                "Bad parameter",
                format!("{name} must be a whole number {range}"),
            )
        })
}

impl ListQuery {
    /// From the page's query string. An empty value is the default (a GET
    /// form sends every field, filled or not); anything else unusable is
    /// an error that names the parameter, never a guess.
    pub fn parse(query: &[(String, Vec<u8>)]) -> Result<ListQuery, BadParam> {
        let mut q = ListQuery::default();
        let mut dir = None;
        for (key, value) in query {
            if value.is_empty() {
                continue;
            }
            match key.as_str() {
                "q" => q.name = value.clone(),
                "has" => {
                    let v = text(value, "has")?;
                    q.has = Some(if v == "any" {
                        Has::Any
                    } else {
                        Has::State(v.parse::<State>().map_err(|_| {
                            (
                                "Bad parameter",
                                "has must be any, delayed, ready, inflight or dead".to_string(),
                            )
                        })?)
                    });
                }
                "min" => q.min = number(value, "min", 1, u64::MAX)?,
                "paused" => {
                    q.paused = match value.as_slice() {
                        b"1" => true,
                        b"0" => false,
                        _ => {
                            return Err((
                                "Bad parameter",
                                "paused must be 1 (only paused queues) or 0".to_string(),
                            ))
                        }
                    }
                }
                "server" => q.server = Some(text(value, "server")?.to_string()),
                "sort" => {
                    q.sort = Sort::parse(text(value, "sort")?).ok_or_else(|| {
                        (
                            "Bad parameter",
                            format!(
                                "sort must be one of {}",
                                Sort::ALL.map(Sort::key).join(", ")
                            ),
                        )
                    })?;
                }
                "dir" => {
                    dir = Some(match value.as_slice() {
                        b"asc" => false,
                        b"desc" => true,
                        _ => return Err(("Bad parameter", "dir must be asc or desc".to_string())),
                    })
                }
                "page" => q.page = number(value, "page", 1, u32::MAX as u64)? as usize,
                "per" => q.per = number(value, "per", 1, MAX_PER_PAGE as u64)? as usize,
                // Unknown parameters are ignored, as a link from elsewhere
                // (or a newer dashboard) may carry some.
                _ => {}
            }
        }
        q.desc = dir.unwrap_or_else(|| q.sort.default_desc());
        Ok(q)
    }

    /// The DQ.QUEUES MATCH pattern of the name filter: a glob as typed
    /// when it holds `*`, `?` or `[`; otherwise the names containing the
    /// text (the search box's usual meaning).
    pub fn pattern(&self) -> Option<Vec<u8>> {
        if self.name.is_empty() {
            return None;
        }
        if self.name.iter().any(|b| matches!(b, b'*' | b'?' | b'[')) {
            return Some(self.name.clone());
        }
        let mut p = b"*".to_vec();
        p.extend(admin::glob_escape(&self.name));
        p.push(b'*');
        Some(p)
    }

    /// Whether a queue passes the state and pause filters (the name
    /// filter is the server's, through MATCH).
    pub fn keeps(&self, s: &Stats) -> bool {
        self.has.is_none_or(|h| h.count(s) >= self.min) && (!self.paused || s.paused)
    }

    /// Whether any filter narrows the list.
    pub fn filtered(&self) -> bool {
        !self.name.is_empty() || self.has.is_some() || self.paused || self.server.is_some()
    }

    /// The list's URL for this view: only what differs from the defaults.
    pub fn href(&self) -> String {
        let mut parts = Vec::new();
        if !self.name.is_empty() {
            parts.push(format!("q={}", url_part(&self.name)));
        }
        if let Some(h) = self.has {
            parts.push(format!("has={}", h.key()));
            if self.min != 1 {
                parts.push(format!("min={}", self.min));
            }
        }
        if self.paused {
            parts.push("paused=1".to_string());
        }
        if let Some(s) = &self.server {
            parts.push(format!("server={}", url_part(s.as_bytes())));
        }
        if self.sort != Sort::Name {
            parts.push(format!("sort={}", self.sort.key()));
        }
        if self.desc != self.sort.default_desc() {
            parts.push(format!("dir={}", if self.desc { "desc" } else { "asc" }));
        }
        if self.per != PER_PAGE {
            parts.push(format!("per={}", self.per));
        }
        if self.page != 1 {
            parts.push(format!("page={}", self.page));
        }
        if parts.is_empty() {
            "/".to_string()
        } else {
            format!("/?{}", parts.join("&"))
        }
    }

    pub fn at_page(&self, page: usize) -> ListQuery {
        ListQuery {
            page,
            ..self.clone()
        }
    }

    /// Sorted by `sort`: the other direction when it already is, else the
    /// column's own first direction; back to page 1 either way.
    pub fn sorted_by(&self, sort: Sort) -> ListQuery {
        let desc = if self.sort == sort {
            !self.desc
        } else {
            sort.default_desc()
        };
        ListQuery {
            sort,
            desc,
            page: 1,
            ..self.clone()
        }
    }

    /// The same order without any filter, from page 1.
    pub fn cleared(&self) -> ListQuery {
        ListQuery {
            name: Vec::new(),
            has: None,
            min: 1,
            paused: false,
            server: None,
            page: 1,
            ..self.clone()
        }
    }

    /// The same view with another state filter (at least one message),
    /// from page 1.
    pub fn with_has(&self, has: Option<Has>) -> ListQuery {
        ListQuery {
            has,
            min: 1,
            page: 1,
            ..self.clone()
        }
    }

    /// The same view with the pause filter on or off, from page 1.
    pub fn with_paused(&self, paused: bool) -> ListQuery {
        ListQuery {
            paused,
            page: 1,
            ..self.clone()
        }
    }

    pub fn with_per(&self, per: usize) -> ListQuery {
        ListQuery {
            per,
            page: 1,
            ..self.clone()
        }
    }

    /// How many pages `matched` queues make (at least one), and the page
    /// to show: the asked one, or the last when it asked past the end (a
    /// queue list shrinks between a link and its click).
    pub fn pages(&self, matched: usize) -> (usize, usize) {
        let pages = matched.div_ceil(self.per).max(1);
        (pages, self.page.min(pages))
    }
}

/// One queue of the list.
pub struct Row<'a> {
    pub server: &'a str,
    pub name: &'a [u8],
    pub stats: &'a Stats,
}

/// Sorts by `sort`, then by name and server ascending, so that ties keep
/// one order from page to page.
pub fn order(rows: &mut [Row], sort: Sort, desc: bool) {
    let key = |r: &Row| -> Option<u64> {
        match sort {
            Sort::Name | Sort::Server => None,
            Sort::State(st) => Some(r.stats.count(st)),
            Sort::Total => Some(r.stats.total()),
            // Nothing ready sorts below any age.
            Sort::Oldest => Some(
                r.stats
                    .oldest_ready_age_ms
                    .map_or(0, |a| a.saturating_add(1)),
            ),
        }
    };
    rows.sort_unstable_by(|a, b| {
        let first = match sort {
            Sort::Server => a.server.cmp(b.server),
            _ => key(a).cmp(&key(b)),
        };
        let first = if desc { first.reverse() } else { first };
        let by_name = || {
            let o = a.name.cmp(b.name).then_with(|| a.server.cmp(b.server));
            if desc && sort == Sort::Name {
                o.reverse()
            } else {
                o
            }
        };
        match first {
            Ordering::Equal => by_name(),
            o => o,
        }
    });
}

/// The page numbers a pager links to: the first, the last, and a few
/// around the current one; `None` marks a gap.
pub fn page_links(current: usize, pages: usize) -> Vec<Option<usize>> {
    let mut out = Vec::new();
    let mut last = 0;
    for p in 1..=pages {
        let near = p.abs_diff(current) <= 2;
        if p == 1 || p == pages || near {
            if last != 0 && p > last + 1 {
                out.push(None);
            }
            out.push(Some(p));
            last = p;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::parse_form;

    fn parse(q: &str) -> Result<ListQuery, BadParam> {
        ListQuery::parse(&parse_form(q.as_bytes()))
    }

    #[test]
    fn defaults_and_round_trips() {
        let q = parse("").unwrap();
        assert_eq!(q, ListQuery::default());
        assert_eq!(q.href(), "/");
        // An empty form field is the default, not an error.
        assert_eq!(
            parse("q=&has=&min=&sort=&dir=&page=&per=").unwrap(),
            ListQuery::default()
        );
        for href in [
            "/?q=orders%2A&has=dead&min=5&server=127.0.0.1%3A6379&sort=ready&dir=asc&per=100&page=3",
            "/?has=any&paused=1",
            "/?paused=1&sort=dead",
            "/?has=any",
            "/?dir=desc",
            "/?sort=dead",
            "/?q=a%20b%FF",
        ] {
            let q = parse(&href[2..]).unwrap();
            assert_eq!(q.href(), href);
        }
        let q = parse("q=a+b&has=DEAD&sort=oldest").unwrap();
        assert_eq!(q.name, b"a b");
        assert_eq!(q.has, Some(Has::State(State::Dead)));
        assert!(q.desc, "a count sorts biggest first unless told");
    }

    #[test]
    fn bad_parameters_are_named() {
        for (query, word) in [
            ("sort=colour", "sort"),
            ("dir=up", "dir"),
            ("page=0", "page"),
            ("page=-1", "page"),
            ("page=x", "page"),
            ("per=0", "per"),
            ("per=201", "per"),
            ("min=0", "min"),
            ("has=gone", "has"),
            ("server=%FF", "server"),
            ("paused=yes", "paused"),
        ] {
            let (title, detail) = parse(query).unwrap_err();
            assert_eq!(title, "Bad parameter");
            assert!(detail.starts_with(word), "{query}: {detail}");
        }
        assert!(
            parse("colour=blue").is_ok(),
            "unknown parameters are ignored"
        );
    }

    #[test]
    fn a_name_is_a_glob_or_a_substring() {
        let q = |name: &[u8]| ListQuery {
            name: name.to_vec(),
            ..ListQuery::default()
        };
        assert_eq!(q(b"").pattern(), None);
        assert_eq!(q(b"orders-*").pattern(), Some(b"orders-*".to_vec()));
        assert_eq!(q(b"tenant-[0-9]").pattern(), Some(b"tenant-[0-9]".to_vec()));
        assert_eq!(q(b"mail").pattern(), Some(b"*mail*".to_vec()));
        assert_eq!(q(b"a\\b]").pattern(), Some(b"*a\\\\b\\]*".to_vec()));
        let p = q(b"a\\b]").pattern().unwrap();
        assert!(dq_glob::matches(&p, b"x-a\\b]-y"));
        assert!(!dq_glob::matches(&p, b"ab"));
    }

    #[test]
    fn filters_sorts_and_pages() {
        let stats = |ready: u64, dead: u64, age: Option<u64>| Stats {
            ready,
            dead,
            oldest_ready_age_ms: age,
            ..Stats::default()
        };
        let all = [
            ("b", "s1", stats(5, 0, Some(10))),
            ("a", "s2", stats(5, 2, None)),
            ("c", "s1", stats(1, 1, Some(99))),
            ("a", "s1", stats(0, 0, None)),
        ];
        let rows = || -> Vec<Row> {
            all.iter()
                .map(|(n, s, st)| Row {
                    server: s,
                    name: n.as_bytes(),
                    stats: st,
                })
                .collect()
        };
        let names = |rows: &[Row]| -> Vec<String> {
            rows.iter()
                .map(|r| format!("{}@{}", String::from_utf8_lossy(r.name), r.server))
                .collect()
        };
        let mut r = rows();
        order(&mut r, Sort::Name, false);
        assert_eq!(names(&r), ["a@s1", "a@s2", "b@s1", "c@s1"]);
        order(&mut r, Sort::Name, true);
        assert_eq!(names(&r), ["c@s1", "b@s1", "a@s2", "a@s1"]);
        // Ties on the count: by name, ascending, whatever the direction.
        order(&mut r, Sort::State(State::Ready), true);
        assert_eq!(names(&r), ["a@s2", "b@s1", "c@s1", "a@s1"]);
        order(&mut r, Sort::State(State::Ready), false);
        assert_eq!(names(&r), ["a@s1", "c@s1", "a@s2", "b@s1"]);
        order(&mut r, Sort::Oldest, true);
        assert_eq!(names(&r), ["c@s1", "b@s1", "a@s1", "a@s2"]);
        order(&mut r, Sort::Server, false);
        assert_eq!(names(&r), ["a@s1", "b@s1", "c@s1", "a@s2"]);
        order(&mut r, Sort::Total, true);
        assert_eq!(names(&r)[0], "a@s2");

        let q = parse("has=dead").unwrap();
        let kept: Vec<Row> = rows().into_iter().filter(|r| q.keeps(r.stats)).collect();
        assert_eq!(names(&kept), ["a@s2", "c@s1"]);
        let q = parse("has=dead&min=2").unwrap();
        assert_eq!(rows().iter().filter(|r| q.keeps(r.stats)).count(), 1);
        let q = parse("has=any").unwrap();
        assert_eq!(rows().iter().filter(|r| q.keeps(r.stats)).count(), 3);
        // The pause filter keeps paused queues only, with the state filter.
        let paused = |s: &Stats| Stats {
            paused: true,
            ..s.clone()
        };
        let q = parse("paused=1").unwrap();
        assert!(q.filtered());
        assert!(!q.keeps(&all[0].2));
        assert!(q.keeps(&paused(&all[0].2)));
        let q = parse("paused=1&has=dead").unwrap();
        assert!(!q.keeps(&paused(&all[0].2)), "b has no dead letter");
        assert!(q.keeps(&paused(&all[1].2)));
        assert!(!parse("paused=0").unwrap().paused);

        let q = parse("per=2&page=9").unwrap();
        assert_eq!(q.pages(5), (3, 3), "past the end: the last page");
        assert_eq!(q.pages(0), (1, 1));
        assert_eq!(parse("").unwrap().pages(10_000), (200, 1));
    }

    #[test]
    fn links_keep_the_view() {
        let q = parse("q=ord&has=dead&sort=ready&page=4").unwrap();
        assert_eq!(q.at_page(5).href(), "/?q=ord&has=dead&sort=ready&page=5");
        // The same column again: the other direction, from page 1.
        assert_eq!(
            q.sorted_by(Sort::State(State::Ready)).href(),
            "/?q=ord&has=dead&sort=ready&dir=asc"
        );
        assert_eq!(q.sorted_by(Sort::Name).href(), "/?q=ord&has=dead");
        assert_eq!(q.cleared().href(), "/?sort=ready");
        let many = parse("has=dead&min=5&server=h%3A1").unwrap();
        assert_eq!(
            many.with_has(Some(Has::Any)).href(),
            "/?has=any&server=h%3A1"
        );
        assert_eq!(many.with_has(None).href(), "/?server=h%3A1");
        assert_eq!(
            many.with_paused(true).href(),
            "/?has=dead&min=5&paused=1&server=h%3A1"
        );
        assert_eq!(
            parse("paused=1&page=3").unwrap().cleared().href(),
            "/",
            "clearing drops the pause filter"
        );
        assert_eq!(
            q.with_per(100).href(),
            "/?q=ord&has=dead&sort=ready&per=100"
        );
        assert!(q.filtered());
        assert!(!parse("sort=dead").unwrap().filtered());
    }

    #[test]
    fn pager_numbers() {
        let shown = |c, p| {
            page_links(c, p)
                .iter()
                .map(|x| x.map_or("…".to_string(), |n| n.to_string()))
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(shown(1, 1), "1");
        assert_eq!(shown(1, 200), "1 2 3 … 200");
        assert_eq!(shown(50, 200), "1 … 48 49 50 51 52 … 200");
        assert_eq!(shown(4, 6), "1 2 3 4 5 6");
    }
}
