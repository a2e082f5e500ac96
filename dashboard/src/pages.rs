//! The pages, as maud templates: every `(value)` below is HTML-escaped by
//! maud, and nothing is inserted with `PreEscaped` (the SVG charts of
//! charts.rs are maud markup too).

use dq_client::{Entry, GroupInfo, Message, QueueConfig, Rate, ScheduleInfo, State, Stats};
use maud::{html, Markup, DOCTYPE};

use crate::backend::{rates, recent_rate, Point};
use crate::charts::{chart, spark, Series};
use crate::groups;
use crate::list::{page_links, Has, ListQuery, Sort, MAX_PER_PAGE, PER_PAGE};
use crate::newest::Bound;
use crate::render::{self, count, label, lossy, relative, time, url_part, when, when_at, Payload};

/// What every page needs to know about the request and the dashboard.
pub struct Ctx {
    pub read_only: bool,
    /// The CSRF token for forms on this page.
    pub csrf: String,
    pub cluster: bool,
    pub now: u64,
}

/// What a "next to leave" page shows at most (the queue page's size).
pub const PEEK_SHOWN: usize = 50;

pub fn queue_url(server: &str, queue: &[u8]) -> String {
    format!("/q/{}/{}", url_part(server.as_bytes()), url_part(queue))
}

pub fn message_url(server: &str, queue: &[u8], id: &[u8]) -> String {
    format!("{}/m/{}", queue_url(server, queue), url_part(id))
}

pub fn action_url(server: &str, queue: &[u8]) -> String {
    format!("{}/action", queue_url(server, queue))
}

fn state_badge(state: &str) -> Markup {
    html! { span class=(format!("badge st-{}", state.to_ascii_lowercase())) { (state) } }
}

pub fn layout(title: &str, crumbs: &[(String, String)], refresh: bool, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · dq dashboard" }
                link rel="stylesheet" href="/static/style.css";
                script src="/static/app.js" defer {}
            }
            body data-refresh=(if refresh { "5" } else { "" }) {
                header.top {
                    a.brand href="/" { span.logo { "dq" } " dashboard" }
                    nav.crumbs {
                        @for (href, text) in crumbs {
                            span.sep { "/" }
                            a href=(href) { (text) }
                        }
                    }
                    @if refresh {
                        label.refresh id="refresh-toggle" hidden {
                            input type="checkbox" id="refresh-box" checked;
                            " auto-refresh"
                        }
                    }
                }
                main { (body) }
                footer { "dq-dashboard " (env!("CARGO_PKG_VERSION")) " · reads through DQ.QUEUES, STATS, GET, SCAN, PEEK, CONFIG, SCHEDULES, EVENTS, GROUPS · " a href="/metrics" { "/metrics" } }
            }
        }
    }
}

pub fn error_page(status: u16, title: &str, detail: &str) -> Markup {
    layout(
        title,
        &[],
        false,
        html! {
            section.card.error-card {
                h1 { (status) " · " (title) }
                p.detail { (detail) }
                p { a href="/" { "Back to all queues" } }
            }
        },
    )
}

pub struct QueueRow<'a> {
    pub server: &'a str,
    pub name: &'a [u8],
    /// Its counts, and its flow control and schedule count.
    pub stats: &'a Stats,
    pub history: Vec<Point>,
}

fn rate_cells(history: &[Point], span_ms: u64) -> (f64, f64, f64) {
    (
        recent_rate(history, span_ms, |p| p.added),
        recent_rate(history, span_ms, |p| p.acked),
        recent_rate(history, span_ms, |p| p.dead_lettered),
    )
}

fn throughput_series(history: &[Point]) -> Vec<Series<'static>> {
    let r = rates(history);
    vec![
        Series {
            label: "added/s",
            class: "s-added",
            values: r.iter().map(|x| x.0).collect(),
        },
        Series {
            label: "acked/s",
            class: "s-acked",
            values: r.iter().map(|x| x.1).collect(),
        },
        Series {
            label: "dead-lettered/s",
            class: "s-dead",
            values: r.iter().map(|x| x.2).collect(),
        },
    ]
}

fn state_series(history: &[Point]) -> Vec<Series<'static>> {
    let col = |f: fn(&Point) -> u64| history.iter().map(|p| f(p) as f64).collect();
    vec![
        Series {
            label: "delayed",
            class: "s-delayed",
            values: col(|p| p.delayed),
        },
        Series {
            label: "ready",
            class: "s-ready",
            values: col(|p| p.ready),
        },
        Series {
            label: "in flight",
            class: "s-inflight",
            values: col(|p| p.inflight),
        },
        Series {
            label: "dead",
            class: "s-dead",
            values: col(|p| p.dead),
        },
    ]
}

pub struct ServerNote {
    pub addr: String,
    pub error: Option<String>,
    pub lateness_ms: Option<u64>,
    pub ticks: Option<u64>,
    /// Its queues in this view.
    pub queues: usize,
}

/// One page of the queue list and what frames it.
pub struct ListView<'a> {
    pub query: &'a ListQuery,
    /// This page's rows, in order.
    pub rows: Vec<QueueRow<'a>>,
    /// Queues the view matches, on every page.
    pub matched: usize,
    pub page: usize,
    pub pages: usize,
    /// Messages per state (delayed, ready, inflight, dead) summed over
    /// the matched queues.
    pub sums: [u64; 4],
    /// Paused queues among the matched ones.
    pub paused: usize,
    /// The sampler's totals of every queue, for the charts.
    pub total: &'a [Point],
    pub servers: &'a [ServerNote],
    /// More than one server: a server column, sortable.
    pub many_servers: bool,
    pub window: &'a str,
    pub rate_span_ms: u64,
}

fn sort_header(q: &ListQuery, sort: Sort, text: &str, numeric: bool) -> Markup {
    let active = q.sort == sort;
    let aria = active.then_some(if q.desc { "descending" } else { "ascending" });
    let arrow = match (active, q.desc) {
        (false, _) => "",
        (true, true) => " ▼",
        (true, false) => " ▲",
    };
    html! {
        th.num[numeric].sorted[active] data-sort=(sort.key()) aria-sort=[aria] {
            a href=(q.sorted_by(sort).href()) title=(format!("sort by {text}")) { (text) (arrow) }
        }
    }
}

fn list_pager(v: &ListView, id: &str) -> Markup {
    let q = v.query;
    let first = (v.page - 1) * q.per + 1;
    let last = (first + v.rows.len()).saturating_sub(1);
    html! {
        nav.pager.list-pager id=(id) {
            span.showing { "Showing " b { (count(first as u64)) "–" (count(last as u64)) } " of " b { (count(v.matched as u64)) } " queue" (if v.matched == 1 { "" } else { "s" }) }
            @if v.pages > 1 {
                span.pages {
                    @if v.page > 1 {
                        a.prev href=(q.at_page(v.page - 1).href()) rel="prev" { "‹ prev" }
                    }
                    @for p in page_links(v.page, v.pages) {
                        @match p {
                            Some(n) if n == v.page => { span.current aria-current="page" { (n) } }
                            Some(n) => { a.page href=(q.at_page(n).href()) { (n) } }
                            None => { span.gap { "…" } }
                        }
                    }
                    @if v.page < v.pages {
                        a.next href=(q.at_page(v.page + 1).href()) rel="next" { "next ›" }
                    }
                }
            }
            span.per {
                "per page:"
                @for n in [PER_PAGE, 100, MAX_PER_PAGE] {
                    " "
                    @if n == q.per { b { (n) } } @else { a href=(q.with_per(n).href()) { (n) } }
                }
            }
        }
    }
}

fn filter_form(q: &ListQuery) -> Markup {
    let clear = q.cleared();
    let dead = q.with_has(Some(Has::State(State::Dead)));
    let has_dead = q.has == Some(Has::State(State::Dead));
    let paused = q.with_paused(!q.paused);
    html! {
        form.filters id="filters" method="get" action="/" {
            label {
                span.k { "name" }
                input type="search" name="q" id="filter-q" value=(lossy(&q.name))
                    placeholder="text, or a glob: orders-*";
            }
            label {
                span.k { "holding" }
                select name="has" id="filter-has" {
                    option value="" selected[q.has.is_none()] { "anything, or nothing" }
                    option value="any" selected[q.has == Some(Has::Any)] { "messages in any state" }
                    @for st in State::ALL {
                        option value=(st.as_str()) selected[q.has == Some(Has::State(st))] { (st.as_str()) " messages" }
                    }
                }
            }
            label {
                span.k { "at least" }
                input type="number" name="min" id="filter-min" min="1" value=(q.min);
            }
            @if q.paused {
                input type="hidden" name="paused" value="1";
            }
            @if let Some(s) = &q.server {
                input type="hidden" name="server" value=(s);
            }
            @if q.sort != Sort::Name {
                input type="hidden" name="sort" value=(q.sort.key());
            }
            @if q.desc != q.sort.default_desc() {
                input type="hidden" name="dir" value=(if q.desc { "desc" } else { "asc" });
            }
            @if q.per != PER_PAGE {
                input type="hidden" name="per" value=(q.per);
            }
            button.btn type="submit" id="filter-apply" { "Filter" }
            @if q.filtered() {
                a.btn.ghost id="filter-clear" href=(clear.href()) { "Clear" }
            }
            a.chip.active[has_dead] id="has-dead" href=(dead.href()) { "has dead letters" }
            a.chip.chip-paused.active[q.paused] id="only-paused" href=(paused.href()) { "paused" }
        }
    }
}

pub fn queue_list(ctx: &Ctx, v: &ListView) -> Markup {
    let q = v.query;
    let [delayed, ready, inflight, dead] = v.sums;
    let window = v.window;
    let body = html! {
        section.summary {
            div.tile.t-delayed { span.k { "delayed" } span.v id="total-delayed" { (count(delayed)) } }
            div.tile.t-ready { span.k { "ready" } span.v id="total-ready" { (count(ready)) } }
            div.tile.t-inflight { span.k { "in flight" } span.v id="total-inflight" { (count(inflight)) } }
            div.tile.t-dead { span.k { "dead" } span.v id="total-dead" { (count(dead)) } }
            div.tile { span.k { (if q.filtered() { "queues matching" } else { "queues" }) } span.v id="total-queues" { (count(v.matched as u64)) } }
            a.tile.t-paused href=(q.with_paused(true).href()) title="show the paused queues" { span.k { "paused" } span.v id="total-paused" { (count(v.paused as u64)) } }
            div.tile { span.k { (if ctx.cluster { "masters" } else { "servers" }) } span.v { (v.servers.len()) } }
        }
        section.charts {
            (chart(&format!("Messages, all queues, last {window}"), &state_series(v.total), 520, 110, true, ""))
            (chart(&format!("Throughput per second, all queues, last {window}"), &throughput_series(v.total), 520, 110, true, "/s"))
        }
        @for s in v.servers {
            @if let Some(e) = &s.error {
                p.alert { "Server " (s.addr) " could not be read: " (e) }
            }
        }
        section.card.queue-list {
            div.list-head {
                h2 { "Queues" }
                (filter_form(q))
            }
            @if q.filtered() {
                p.muted.view-note id="view-note" {
                    "The counts above are of the queues this view matches"
                    @if let Some(s) = &q.server { " on " (s) }
                    ". "
                    a href=(q.cleared().href()) { "All queues" }
                }
            }
            @if v.matched == 0 {
                @if q.filtered() {
                    p.muted id="no-match" { "No queue matches this view." }
                } @else {
                    p.muted { "No queues yet. A queue appears with its first DQ.ADD." }
                }
            } @else {
                (list_pager(v, "pager-top"))
                table.queues id="queues" {
                    thead { tr {
                        (sort_header(q, Sort::Name, "queue", false))
                        @if v.many_servers { (sort_header(q, Sort::Server, "server", false)) }
                        (sort_header(q, Sort::State(State::Delayed), "delayed", true))
                        (sort_header(q, Sort::State(State::Ready), "ready", true))
                        (sort_header(q, Sort::State(State::Inflight), "in flight", true))
                        (sort_header(q, Sort::State(State::Dead), "dead", true))
                        th.num { "added/s" } th.num { "acked/s" } th.num { "dead/s" }
                        (sort_header(q, Sort::Oldest, "oldest ready", true))
                        th title="RATE and MAXINFLIGHT (DQ.CONFIG)" { "limits" }
                        th { "backlog" }
                    } }
                    tbody {
                        @for r in &v.rows {
                            @let (added, acked, dead) = rate_cells(&r.history, v.rate_span_ms);
                            tr data-queue=(lossy(r.name)) {
                                td.name {
                                    a href=(queue_url(r.server, r.name)) { (label(r.name, 80)) }
                                    (flow_badges(r.stats, ctx.now))
                                }
                                @if v.many_servers { td.server { (r.server) } }
                                td.num.c-delayed data-state="delayed" { (count(r.stats.delayed)) }
                                td.num.c-ready data-state="ready" { (count(r.stats.ready)) }
                                td.num.c-inflight data-state="inflight" { (count(r.stats.inflight)) }
                                td.num.c-dead.hot[r.stats.dead > 0] data-state="dead" { (count(r.stats.dead)) }
                                td.num { (render::rate(added)) }
                                td.num { (render::rate(acked)) }
                                td.num.hot[dead > 0.0] { (render::rate(dead)) }
                                td.num { (r.stats.oldest_ready_age_ms.map_or("—".to_string(), render::age)) }
                                td.limits { (limits_cell(r.stats)) }
                                td.spark { (spark(&state_series(&r.history)[..3])) }
                            }
                        }
                    }
                }
                @if v.pages > 1 { (list_pager(v, "pager")) }
            }
        }
        section.card.servers {
            h2 { (if ctx.cluster { "Cluster masters" } else { "Servers" }) }
            table { thead { tr { th { "server" } th.num { "queues listed" } th.num { "timer ticks" } th.num { "lateness" } th { "status" } } }
                tbody { @for s in v.servers { tr {
                    td { a.server-link href=(ListQuery { server: Some(s.addr.clone()), ..ListQuery::default() }.href()) { (s.addr) } }
                    td.num { (count(s.queues as u64)) }
                    td.num { (s.ticks.map_or("—".into(), count)) }
                    td.num { (s.lateness_ms.map_or("—".into(), render::age)) }
                    td { @if s.error.is_some() { span.badge.st-dead { "unreachable" } } @else { span.badge.st-ok { "ok" } } }
                } } }
            }
        }
    };
    layout("Queues", &[], true, body)
}

pub struct QueuePage<'a> {
    pub server: &'a str,
    pub name: &'a [u8],
    /// Its counts, counters and flow control (DQ.STATS).
    pub stats: &'a Stats,
    /// Its schedules; of every shard, for a shard of a sharded queue.
    pub schedules: &'a [ScheduleRow<'a>],
    /// Set when the queue is a shard of a sharded queue.
    pub sharding: Option<&'a Sharding>,
    pub config: &'a QueueConfig,
    pub history: Vec<Point>,
    pub state: Option<State>,
    pub cursor: u64,
    pub next_cursor: u64,
    /// How the tab lists its messages.
    pub order: Order,
    /// The done tab's page newest first ([`Order::Newest`]).
    pub done: Option<DoneView>,
    pub entries: &'a [Listed],
    pub window: &'a str,
    /// How many groups the queue has (DQ.STATS `groups`); None when the
    /// server does not say ([`groups::count`]).
    pub group_count: Option<u64>,
    /// Set on the groups tab (`tab=groups`), which lists groups instead
    /// of messages.
    pub groups: Option<&'a GroupsTab>,
}

/// A group and the queue holding it (a shard, for a sharded queue).
pub struct GroupRow {
    pub group: GroupInfo,
    pub server: String,
    pub queue: Vec<u8>,
}

/// The groups tab: a page of the groups read, sorted by backlog.
pub struct GroupsTab {
    /// The filter box as typed.
    pub filter: Vec<u8>,
    /// This page's groups.
    pub rows: Vec<GroupRow>,
    /// Groups read that match the filter, on every page.
    pub matched: usize,
    pub page: usize,
    pub pages: usize,
    /// Set when the reading stopped at its bound with groups left.
    pub cut: Option<Cut>,
    /// The groups are every shard's of a sharded queue.
    pub sharded: bool,
    /// Masters that could not be read (their shards' groups are missing).
    pub unreadable: Vec<(String, String)>,
}

/// Where the groups tab stopped reading.
pub struct Cut {
    /// Groups looked at per queue (per shard) at most.
    pub per_queue: usize,
    /// Queues (shards) that had more.
    pub queues_cut: usize,
}

/// How a queue page's tab lists its messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// DQ.SCAN: storage order, paged with its cursor.
    Storage,
    /// DQ.PEEK: the first of the state, in the order they will leave it
    /// (no paging).
    Next,
    /// The done tab's default: newest finished first, paged (newest.rs).
    Newest,
}

/// Where the done tab's newest first page lies among the done messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DoneView {
    /// The first row's number, from 1 (newest).
    pub first: usize,
    /// Done messages read for the page.
    pub total: usize,
    /// The pages above and below, if any.
    pub newer: Option<Bound>,
    pub older: Option<Bound>,
    /// DQ.SCAN STATE DONE calls that read them; None: one DQ.PEEK DONE.
    pub scans: Option<usize>,
}

/// A message of a queue page's list, with its state.
#[derive(Debug, PartialEq, Eq)]
pub struct Listed {
    /// `time` is the one its state gives meaning: the due time, the lease
    /// deadline or the time of death.
    pub entry: Entry,
    /// As DQ.GET spells it (a state a newer module adds too); None when
    /// the message left the queue between the page's DQ.SCAN and its
    /// DQ.GET.
    pub state: Option<String>,
    /// Its DQ.GET's `progress`, on the tabs that ask each message's DQ.GET
    /// ("all", inflight); None there too when nothing was reported.
    pub progress: Option<Vec<u8>>,
    /// Its DQ.GET's `result`, on the done tab: what DQ.DONE kept; None
    /// after a plain DQ.ACK.
    pub result: Option<Vec<u8>>,
}

impl Listed {
    /// An entry of a one-state tab: DQ.SCAN STATE or DQ.PEEK said it.
    pub fn in_state(entry: Entry, state: State) -> Listed {
        Listed {
            entry,
            state: Some(state.as_str().to_string()),
            progress: None,
            result: None,
        }
    }

    /// An entry of the "all" tab, as its DQ.GET (`now`) found it, state
    /// and time read together: a message that moved since the SCAN shows
    /// where it is, with the time of that state.
    pub fn from_get(entry: Entry, now: Option<Message>) -> Listed {
        let Some(m) = now else {
            return Listed {
                entry,
                state: None,
                progress: None,
                result: None,
            };
        };
        let time = match m.state() {
            Some(State::Delayed | State::Ready) => m.due_at,
            Some(State::Inflight) => m.lease_deadline,
            Some(State::Dead) => m.died_at,
            Some(State::Done) => m.finished_at,
            None => None,
        };
        Listed {
            entry: Entry {
                id: entry.id,
                payload: m.payload,
                attempt: m.attempt,
                time: time.unwrap_or(entry.time),
                last_error: m.last_error,
            },
            state: Some(m.state),
            progress: m.progress,
            result: m.result,
        }
    }
}

/// The list's time cell: what the time is in the message's state, and
/// the time itself in its tooltip.
fn when_cell(l: &Listed, now: u64) -> Markup {
    let t = l.entry.time;
    html! {
        @match l.state.as_deref().map(|s| (s, s.parse::<State>())) {
            Some((_, Ok(st))) => td.time title=(when_at(st, t)) { (when(st, t, now)) },
            // A state this dashboard does not know: its time, unnamed.
            Some((_, Err(_))) => td.time title=(time(t)) { (relative(t, now)) },
            None => td.time { span.muted { "—" } },
        }
    }
}

/// A schedule and the queue that holds it (another shard's, on a shard
/// of a sharded queue).
pub struct ScheduleRow<'a> {
    pub server: &'a str,
    pub queue: &'a [u8],
    pub schedule: &'a ScheduleInfo,
}

/// A sharded queue's flow control over all its shards, for a shard's page.
pub struct Sharding {
    pub base: String,
    /// This page's shard.
    pub index: u32,
    pub count: u32,
    /// Shards that exist (a master lists them).
    pub present: usize,
    pub paused: usize,
    /// The ends of the paused shards' pauses (None: until DQ.RESUME).
    pub paused_until: Vec<Option<u64>>,
    pub throttled: u64,
    /// Each RATE in force and on how many shards.
    pub rates: Vec<(String, usize)>,
    /// Each MAXINFLIGHT in force and on how many shards.
    pub max_inflights: Vec<(u64, usize)>,
    /// Masters that could not be read, and why.
    pub unreadable: Vec<(String, String)>,
}

impl Sharding {
    /// One RATE on every shard: the whole queue's, `n·count/window`.
    fn whole_rate(&self) -> Option<String> {
        match self.rates.as_slice() {
            [(rate, n)] if *n == self.count as usize => {
                let each = Rate::parse(rate)?;
                let all = Rate {
                    deliveries: each.deliveries.checked_mul(u64::from(self.count))?,
                    ..each
                };
                Some(all.to_string())
            }
            _ => None,
        }
    }

    /// One MAXINFLIGHT on every shard: the whole queue's.
    fn whole_max_inflight(&self) -> Option<u64> {
        match self.max_inflights.as_slice() {
            [(m, n)] if *n == self.count as usize => m.checked_mul(u64::from(self.count)),
            _ => None,
        }
    }
}

/// `each of the 4 shards`, `3 shards`, `1 shard`.
fn on_shards(n: usize, count: u32) -> String {
    match n {
        n if n == count as usize && n > 1 => format!("each of the {n} shards"),
        1 => "1 shard".to_string(),
        n => format!("{n} shards"),
    }
}

/// The list's markers beside a queue's name: paused, schedules.
fn flow_badges(flow: &Stats, now: u64) -> Markup {
    let until = match flow.paused_until {
        Some(t) => format!("paused until {} ({})", time(t), relative(t, now)),
        None => "paused until DQ.RESUME".to_string(),
    };
    html! {
        @if flow.paused {
            " " span.badge.st-paused title=(until) { "paused" }
        }
        @if flow.schedules > 0 {
            " " span.badge.st-sched title="recurring schedules (DQ.SCHEDULES)" {
                (flow.schedules) (if flow.schedules == 1 { " schedule" } else { " schedules" })
            }
        }
    }
}

/// RATE and MAXINFLIGHT, short, for the list.
fn limits_cell(flow: &Stats) -> Markup {
    html! {
        @if let Some(r) = &flow.rate {
            span.limit title=(rate_words(r)) { (r) }
        }
        @if let Some(m) = flow.max_inflight {
            span.limit title=(format!("at most {m} in flight at once (MAXINFLIGHT)")) { "≤" (count(m)) " in flight" }
        }
        @if flow.rate.is_none() && flow.max_inflight.is_none() {
            span.muted { "—" }
        }
    }
}

/// `at most 100 deliveries in any 1s (RATE)`.
fn rate_words(rate: &str) -> String {
    match Rate::parse(rate) {
        Some(Rate { deliveries: n, .. }) => format!(
            "at most {} deliveries in any {} (RATE)",
            count(n),
            rate.split_once('/').map_or("", |(_, w)| w)
        ),
        None => format!("RATE {rate}"),
    }
}

fn pause_state(flow: &Stats, now: u64) -> Markup {
    html! {
        @if flow.paused {
            span.badge.st-paused { "paused" }
            @match flow.paused_until {
                Some(t) => { " until " (time(t)) " " span.muted { "(" (relative(t, now)) ")" } },
                None => { " until resumed" },
            }
        } @else {
            "no"
        }
    }
}

fn flow_card(ctx: &Ctx, p: &QueuePage) -> Markup {
    let f = p.stats;
    html! {
        section.card.flow id="flow" {
            h2 { "Flow control" }
            @match p.sharding {
                None => {
                    dl {
                        dt { "paused" } dd id="paused" { (pause_state(f, ctx.now)) }
                        dt { "rate" } dd id="rate" {
                            @match &f.rate {
                                Some(r) => { code { (r) } " " span.muted { (rate_words(r)) } },
                                None => span.muted { "none" },
                            }
                        }
                        dt { "max in flight" } dd id="max-inflight" {
                            @match f.max_inflight {
                                Some(m) => { (count(m)) " " span.muted { "(" (count(p.stats.inflight)) " in flight now)" } },
                                None => span.muted { "none" },
                            }
                        }
                        dt { "throttled" } dd id="throttled" { (count(f.throttled)) " " span.muted { "POPs that delivered less because of a limit" } }
                    }
                }
                Some(sh) => {
                    p.muted.shard-note id="shard-note" {
                        "Shard " (sh.index) " of the " (sh.count) " shards of sharded queue "
                        b { (label(sh.base.as_bytes(), 80)) }
                        ": what follows is of all its shards, and pause and resume act on every one."
                    }
                    @for (addr, e) in &sh.unreadable {
                        p.alert { "Master " (addr) " could not be read: " (e) }
                    }
                    dl {
                        dt { "shards" } dd id="shards" { (sh.present) " of " (sh.count) " exist" @if sh.present < sh.count as usize { " " span.muted { "(a shard appears with its first message)" } } }
                        dt { "paused" } dd id="paused" {
                            @if sh.paused == 0 { "none of " (sh.count) } @else {
                                span.badge.st-paused { "paused" } " " (sh.paused) " of " (sh.count) " shards"
                                @if sh.paused_until.iter().any(Option::is_none) {
                                    " until resumed"
                                } @else if let Some(t) = sh.paused_until.iter().flatten().max() {
                                    " until " (time(*t)) " " span.muted { "(" (relative(*t, ctx.now)) ")" }
                                }
                            }
                        }
                        dt { "rate" } dd id="rate" {
                            @if sh.rates.is_empty() { span.muted { "none" } }
                            @for (i, (r, n)) in sh.rates.iter().enumerate() {
                                @if i > 0 { "; " }
                                code { (r) } " on " (on_shards(*n, sh.count))
                            }
                            @if let Some(all) = sh.whole_rate() { " " span.muted { "(" (all) " in all)" } }
                        }
                        dt { "max in flight" } dd id="max-inflight" {
                            @if sh.max_inflights.is_empty() { span.muted { "none" } }
                            @for (i, (m, n)) in sh.max_inflights.iter().enumerate() {
                                @if i > 0 { "; " }
                                (count(*m)) " on " (on_shards(*n, sh.count))
                            }
                            @if let Some(all) = sh.whole_max_inflight() { " " span.muted { "(" (count(all)) " in all)" } }
                        }
                        dt { "throttled" } dd id="throttled" { (count(sh.throttled)) " " span.muted { "in all shards" } }
                    }
                }
            }
            @if !ctx.read_only {
                @let (pause, resume, paused) = match p.sharding {
                    Some(sh) => (format!("Pause all {} shards", sh.count), format!("Resume all {} shards", sh.count), sh.paused > 0),
                    None => ("Pause".to_string(), "Resume".to_string(), f.paused),
                };
                div.actions.flow-actions {
                    form.action.pause-form method="post" action=(action_url(p.server, p.name)) {
                        input type="hidden" name="csrf" value=(ctx.csrf);
                        input type="hidden" name="op" value="pause";
                        label.pause-for {
                            span.k { "for" }
                            input type="text" name="for" id="pause-for" size="14"
                                placeholder="until resumed" title="empty: until resumed; or 90s, 10m, 1h 30m, 2d, or milliseconds";
                        }
                        button.btn.danger type="submit" id="pause-button" { (pause) }
                    }
                    @if paused {
                        (action_form(ctx, p.server, p.name, &[("op", b"resume")], &resume, false))
                    }
                }
                p.muted.hint { "Each asks for confirmation first." }
            }
        }
    }
}

/// The queue's defaults (DQ.CONFIG), each with where it comes from, and
/// what it keeps of finished messages. Shown, not set: settings are
/// DQ.CONFIG's (or a library's `config_set`, which splits RETAINMAX over
/// a sharded queue's shards), as RATE and MAXINFLIGHT are.
fn settings_card(p: &QueuePage) -> Markup {
    let c = p.config;
    html! {
        section.card.settings id="settings" {
            h2 { "Settings" }
            dl {
                dt { "lease" } dd { (render::age(c.lease_ms)) " " span.from { (c.lease_ms_from) } }
                dt { "max attempts" } dd { (c.max_attempts) " " span.from { (c.max_attempts_from) } }
                dt { "backoff" } dd { code { (c.backoff) } " " span.from { (c.backoff_from) } }
                dt title="how long a message finished by ACK or DONE is kept as done (RETAIN)" { "retain" }
                dd id="retain" {
                    @if c.retain_ms == 0 { "not kept" } @else { (render::age(c.retain_ms)) }
                    " " span.from { (c.retain_ms_from) }
                }
                dt title="at most this many done messages; the earliest finished are dropped first (RETAINMAX)" { "retain max" }
                dd id="retain-max" {
                    @match c.retain_max {
                        Some(n) => { "at most " (count(n)) " done" },
                        None => "no cap",
                    }
                    @if p.sharding.is_some() { " " span.from { "this shard's" } }
                }
                dt title="how many of its last events the queue keeps for DQ.EVENTS (EVENTS)" { "events" }
                dd id="events-setting" {
                    @if c.events == 0 { "none kept" } @else { "the last " (count(c.events)) }
                    " " a href=(crate::events::events_url(p.server, p.name)) { "feed" }
                }
                dt title="at most this many messages of each group ready or in flight at once (GROUPLIMIT)" { "group limit" }
                dd id="group-limit" {
                    // 0: a module without groups.
                    @match c.group_limit {
                        0 => span.muted { "not reported" },
                        n => { (count(u64::from(n))) " per group" },
                    }
                }
                dt title="each group at most n deliveries in any window of this length (GROUPRATE)" { "group rate" }
                dd id="group-rate" {
                    @match &c.group_rate {
                        Some(r) => { code { (r) } " " span.muted { (group_rate_words(r, c.group_rate_limit())) } },
                        None => span.muted { "none" },
                    }
                }
                dt title="the order POP takes ready messages in (ORDER)" { "order" }
                dd id="order" {
                    @match c.order.as_str() {
                        "fair" => { "fair " span.muted { "(the groups in turn)" } },
                        "priority" => { "priority " span.muted { "(priority, then due, across groups)" } },
                        // Empty: a module without groups.
                        "" => span.muted { "not reported" },
                        o => (o),
                    }
                }
                @if p.sharding.is_some() {
                    dd.from { "group settings: this shard's" }
                }
            }
        }
    }
}

fn limit_end(s: &ScheduleInfo, now: u64) -> Markup {
    html! {
        @if let Some(l) = s.limit { (count(s.runs)) " of " (count(l)) " runs" }
        @if s.limit.is_some() && s.end.is_some() { br; }
        @if let Some(e) = s.end { span title=(time(e)) { (if e > now { "ends " } else { "ended " }) (relative(e, now)) } }
        @if s.limit.is_none() && s.end.is_none() { span.muted { "—" } }
    }
}

fn schedules_card(ctx: &Ctx, p: &QueuePage) -> Markup {
    let sharded = p.sharding.is_some();
    html! {
        section.card.schedules-card id="schedules" {
            h2 { "Schedules " span.muted { "(" (p.schedules.len()) ")" } }
            @if p.schedules.is_empty() {
                p.muted id="no-schedules" {
                    @if sharded { "No shard of this queue has a schedule." } @else { "No schedules: DQ.SCHEDULE makes one." }
                }
            } @else {
                table.schedules id="schedule-table" {
                    thead { tr {
                        th { "name" } th { "spec" } th { "zone" } th { "next run" } th { "last run" }
                        th.num { "runs" } th.num { "skipped" } th { "limit / end" }
                        @if sharded { th { "shard" } }
                        @if !ctx.read_only { th {} }
                    } }
                    tbody {
                        @for row in p.schedules {
                            @let s = row.schedule;
                            tr data-schedule=(lossy(&s.name)) {
                                td.sched-name { code title=(format!("payload: {}", label(&s.payload, 200))) { (label(&s.name, 60)) } }
                                td.spec { code { (s.spec) } }
                                td.tz { (s.tz) }
                                td.time.next-run title=(s.next_run.map(time).unwrap_or_default()) {
                                    @match s.next_run { Some(t) => (relative(t, ctx.now)), None => span.muted { "none left" } }
                                }
                                td.time.last-run title=(s.last_run.map(time).unwrap_or_default()) {
                                    @match s.last_run { Some(t) => (relative(t, ctx.now)), None => span.muted { "never" } }
                                }
                                td.num.runs { (count(s.runs)) }
                                td.num.skipped { (count(s.skipped)) }
                                td.limit-end { (limit_end(s, ctx.now)) }
                                @if sharded {
                                    td.shard { a href=(queue_url(row.server, row.queue)) { (label(row.queue, 40)) } }
                                }
                                @if !ctx.read_only {
                                    td { (action_form(ctx, row.server, row.queue, &[("op", b"unschedule"), ("schedule", &s.name)], "Remove", true)) }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn action_form(
    ctx: &Ctx,
    server: &str,
    queue: &[u8],
    fields: &[(&str, &[u8])],
    button: &str,
    danger: bool,
) -> Markup {
    html! {
        form.action method="post" action=(action_url(server, queue)) {
            input type="hidden" name="csrf" value=(ctx.csrf);
            @for (k, v) in fields {
                input type="hidden" name=(k) value=(url_part(v));
            }
            button type="submit" class=(if danger { "btn danger" } else { "btn" }) { (button) }
        }
    }
}

/// A queue page's groups tab.
pub fn groups_url(server: &str, queue: &[u8]) -> String {
    format!("{}?tab=groups", queue_url(server, queue))
}

/// A page of the groups tab, with its filter.
pub fn groups_page_url(server: &str, queue: &[u8], filter: &[u8], page: usize) -> String {
    let mut url = groups_url(server, queue);
    if !filter.is_empty() {
        url.push_str(&format!("&group={}", url_part(filter)));
    }
    if page > 1 {
        url.push_str(&format!("&page={page}"));
    }
    url
}

/// `at most 10 deliveries per group in any 1s (GROUPRATE)`.
fn group_rate_words(rate: &str, read: Option<Rate>) -> String {
    match read {
        Some(Rate { deliveries: n, .. }) => format!(
            "at most {} deliveries per group in any {} (GROUPRATE)",
            count(n),
            rate.split_once('/').map_or("", |(_, w)| w)
        ),
        None => format!("GROUPRATE {rate}"),
    }
}

fn group_paused(g: &GroupInfo, now: u64) -> Markup {
    html! {
        @match (g.paused, g.paused_until) {
            (false, _) => span.muted { "no" },
            (true, None) => { span.badge.st-paused { "paused" } " until resumed" },
            (true, Some(t)) => { span.badge.st-paused { "paused" } " until " (time(t)) " " span.muted { "(" (relative(t, now)) ")" } },
        }
    }
}

/// The groups tab's body: the filter, the groups sorted by backlog with
/// their pause and resume (unless read-only), and the pages.
fn groups_view(ctx: &Ctx, p: &QueuePage, g: &GroupsTab) -> Markup {
    let at_page = |n: usize| groups_page_url(p.server, p.name, &g.filter, n);
    let first = (g.page - 1) * groups::PER_PAGE + 1;
    let last = (first + g.rows.len()).saturating_sub(1);
    html! {
        section.groups id="groups" {
            form.filters id="group-filter" method="get" action=(queue_url(p.server, p.name)) {
                input type="hidden" name="tab" value="groups";
                label {
                    span.k { "group" }
                    input type="search" name="group" id="group-filter-box" value=(lossy(&g.filter))
                        placeholder="text, or a glob: tenant-*"
                        title="a part of the name; with * ? or [ a glob, as DQ.GROUPS MATCH takes";
                }
                button.btn type="submit" id="group-filter-apply" { "Filter" }
                @if !g.filter.is_empty() {
                    a.btn.ghost id="group-filter-clear" href=(groups_url(p.server, p.name)) { "Clear" }
                }
            }
            @if let Some(sh) = p.sharding.filter(|_| g.sharded) {
                p.muted.shard-note id="groups-shard-note" {
                    "The groups of every shard of sharded queue " b { (label(sh.base.as_bytes(), 80)) }
                    ": a group lives on one shard (the libraries route its messages by its name), and "
                    "pausing or resuming a group acts on that shard."
                }
            }
            @for (addr, e) in &g.unreadable {
                p.alert { "Master " (addr) " could not be read, so its shards' groups are missing: " (e) }
            }
            @if let Some(c) = &g.cut {
                p.alert id="groups-cut" {
                    @if g.sharded {
                        "Showing the first " (count(c.per_queue as u64)) " groups by name of each shard: "
                        (c.queues_cut) " shard" (if c.queues_cut == 1 { " has" } else { "s have" }) " more, not read"
                    } @else {
                        "Showing the first " (count(c.per_queue as u64)) " groups by name: the queue has more, not read"
                    }
                    " (this tab looks at " (count(groups::MAX_GROUPS as u64)) " groups at most), so the order by backlog and the pages are of those."
                    @if !g.filter.is_empty() { " The filter keeps those of them that match." }
                }
            }
            @if g.rows.is_empty() {
                p.muted id="no-groups" {
                    @if g.filter.is_empty() {
                        "No groups: a group appears with its first message added with GROUP (or its pause), and goes when it has nothing left."
                    } @else {
                        "No group matches the filter."
                    }
                }
            } @else {
                table.messages.groups id="group-table" {
                    thead { tr {
                        th { "group" }
                        th.num title="due messages held back by GROUPLIMIT, GROUPRATE or the group's pause" { "waiting" }
                        th.num { "ready" }
                        th.num { "in flight" }
                        th { "paused" }
                        @if g.sharded { th { "shard" } }
                        @if !ctx.read_only { th {} }
                    } }
                    tbody {
                        @for row in &g.rows {
                            @let gr = &row.group;
                            tr data-group=(lossy(&gr.name)) {
                                td.group-name { code { (label(&gr.name, 80)) } }
                                td.num.waiting { (count(gr.waiting)) }
                                td.num.ready { (count(gr.ready)) }
                                td.num.inflight { (count(gr.inflight)) }
                                td.paused { (group_paused(gr, ctx.now)) }
                                @if g.sharded {
                                    td.shard { a href=(queue_url(&row.server, &row.queue)) { (label(&row.queue, 40)) } }
                                }
                                @if !ctx.read_only {
                                    td.group-actions {
                                        div.actions {
                                            form.action.pause-form.group-pause-form method="post" action=(action_url(p.server, p.name)) {
                                                input type="hidden" name="csrf" value=(ctx.csrf);
                                                input type="hidden" name="op" value="group-pause";
                                                input type="hidden" name="group" value=(url_part(&gr.name));
                                                input.group-pause-for type="text" name="for" size="10"
                                                    placeholder="until resumed" title="empty: until resumed; or 90s, 10m, 1h 30m, 2d, or milliseconds";
                                                button.btn.danger type="submit" { "Pause" }
                                            }
                                            @if gr.paused {
                                                (action_form(ctx, p.server, p.name, &[("op", b"group-resume"), ("group", &gr.name)], "Resume", false))
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            nav.pager.list-pager id="group-pager" {
                span.showing {
                    @if g.matched == 0 { "0 groups" } @else {
                        "Showing " b { (count(first as u64)) "–" (count(last as u64)) } " of " b { (count(g.matched as u64)) } " group" (if g.matched == 1 { "" } else { "s" })
                    }
                }
                @if g.pages > 1 {
                    span.pages {
                        @if g.page > 1 {
                            a.prev href=(at_page(g.page - 1)) rel="prev" { "‹ prev" }
                        }
                        @for n in page_links(g.page, g.pages) {
                            @match n {
                                Some(n) if n == g.page => { span.current aria-current="page" { (n) } }
                                Some(n) => { a.page href=(at_page(n)) { (n) } }
                                None => { span.gap { "…" } }
                            }
                        }
                        @if g.page < g.pages {
                            a.next href=(at_page(g.page + 1)) rel="next" { "next ›" }
                        }
                    }
                }
                span.muted.hint { "by backlog (waiting + ready), most first; read with DQ.GROUPS" }
            }
        }
    }
}

pub fn queue_page(ctx: &Ctx, p: &QueuePage) -> Markup {
    let title = label(p.name, 80);
    let tab = |st: Option<State>| -> String {
        let base = queue_url(p.server, p.name);
        match st {
            Some(s) => format!("{base}?state={}", s.as_str()),
            None => base,
        }
    };
    // The "all" tab is the one list of several states: it names each
    // message's; a one-state tab names its state once, in the tab.
    let mixed = p.state.is_none();
    // Progress is reported by running deliveries: the tabs that can hold
    // them show it (their entries come with each message's DQ.GET).
    let progress = mixed || p.state == Some(State::Inflight);
    let body = html! {
        section.titlebar {
            h1 { span.muted { "queue " } (title) }
            @if ctx.cluster { span.server-tag { "on " (p.server) } }
            a.events-link id="events-link" href=(crate::events::events_url(p.server, p.name)) { "events" }
        }
        section.summary {
            @for st in State::ALL {
                a class=(format!("tile t-{}", st.as_str())) href=(tab(Some(st))) {
                    span.k { (st.as_str()) }
                    span.v id=(format!("count-{}", st.as_str())) { (count(p.stats.count(st))) }
                }
            }
            div.tile { span.k { "oldest ready" } span.v { (p.stats.oldest_ready_age_ms.map_or("—".to_string(), render::age)) } }
            div.tile { span.k { "next due" } span.v.small { (p.stats.next_due_at.map_or("—".to_string(), |t| relative(t, ctx.now))) } }
            @if let Some(n) = p.group_count {
                a.tile href=(groups_url(p.server, p.name)) title=(if p.sharding.is_some() { "groups of this shard (DQ.STATS groups)" } else { "groups (DQ.STATS groups)" }) {
                    span.k { "groups" }
                    span.v id="count-groups" { (count(n)) }
                }
            }
        }
        section.charts {
            (chart(&format!("Messages, last {}", p.window), &state_series(&p.history), 520, 110, true, ""))
            (chart(&format!("Throughput per second, last {}", p.window), &throughput_series(&p.history), 520, 110, true, "/s"))
        }
        div.columns {
            (settings_card(p))
            section.card.counters {
                h2 { "Lifetime counters" }
                dl.grid {
                    @for (k, v) in p.stats.counters() {
                        dt { (k) } dd { (count(v)) }
                    }
                }
            }
            (flow_card(ctx, p))
            @if !ctx.read_only {
                section.card.actions-card {
                    h2 { "Actions" }
                    p.muted { "Each asks for confirmation first." }
                    div.actions {
                        @if p.stats.dead > 0 {
                            (action_form(ctx, p.server, p.name, &[("op", b"redrive-all")], &format!("Redrive all {} dead", count(p.stats.dead)), false))
                        }
                        @for st in State::ALL {
                            @if p.stats.count(st) > 0 {
                                (action_form(ctx, p.server, p.name, &[("op", b"purge"), ("state", st.as_str().as_bytes())], &format!("Purge {}", st.as_str()), true))
                            }
                        }
                    }
                }
            }
        }
        (schedules_card(ctx, p))
        section.card {
            nav.tabs {
                a.active[p.state.is_none() && p.groups.is_none()] href=(tab(None)) { "all" }
                @for st in State::ALL {
                    a.active[p.state == Some(st) && p.groups.is_none()] id=(format!("tab-{}", st.as_str())) href=(tab(Some(st))) { (st.as_str()) " " span.n { (count(p.stats.count(st))) } }
                }
                a.active[p.groups.is_some()] id="tab-groups" href=(groups_url(p.server, p.name)) {
                    "groups"
                    @if let Some(n) = p.group_count { " " span.n { (count(n)) } }
                }
            }
            @if let Some(g) = p.groups {
                (groups_view(ctx, p, g))
            } @else {
            @if let Some(st) = p.state {
                nav.order {
                    span.muted { "order: " }
                    @if st == State::Done {
                        a.active[p.order == Order::Newest] id="order-newest" href=(tab(Some(st))) { "newest first (paged)" }
                        a.active[p.order == Order::Storage] id="order-storage" href=(format!("{}&order=storage", tab(Some(st)))) { "storage (all, paged)" }
                        a.active[p.order == Order::Next] id="order-next" href=(format!("{}&order=next", tab(Some(st)))) { "next to be dropped (first 50)" }
                    } @else {
                        a.active[p.order == Order::Storage] href=(tab(Some(st))) { "storage (all, paged)" }
                        a.active[p.order == Order::Next] href=(format!("{}&order=next", tab(Some(st)))) { "next to leave (first 50)" }
                    }
                }
            }
            @if p.entries.is_empty() {
                p.muted { "No messages on this page." }
            } @else if p.state == Some(State::Done) {
                (done_table(p, ctx.now))
            } @else {
                table.messages id="messages" {
                    thead { tr {
                        th { "id" }
                        @if mixed { th { "state" } }
                        th { "payload" } th.num { "attempt" } th { "when" }
                        @if progress { th { "progress" } }
                        th { "last error" }
                    } }
                    tbody {
                        @for l in p.entries {
                            @let e = &l.entry;
                            tr {
                                td.id { a href=(message_url(p.server, p.name, &e.id)) { (label(&e.id, 60)) } }
                                @if mixed {
                                    @match &l.state {
                                        Some(st) => td.state data-state=(st) { (state_badge(st)) },
                                        None => td.state data-state="gone" {
                                            span.badge title="acknowledged, cancelled or expired since this page listed it" { "gone" }
                                        },
                                    }
                                }
                                td.payload { code { (label(&e.payload, 90)) } }
                                td.num { (e.attempt) }
                                (when_cell(l, ctx.now))
                                @if progress {
                                    td.progress { @if let Some(v) = &l.progress { code title=(label(v, 1000)) { (label(v, 60)) } } }
                                }
                                td.err { @if let Some(err) = &e.last_error { (label(err, 80)) } }
                            }
                        }
                    }
                }
            }
            @match (p.order, &p.done) {
                (Order::Next, _) => {
                    nav.pager { span.muted.hint {
                        "the first " (PEEK_SHOWN)
                        (if p.state == Some(State::Done) { " in the order they will be dropped, the earliest finished first (DQ.PEEK)" } else { " in the order they will leave this state (DQ.PEEK)" })
                    } }
                },
                (Order::Newest, Some(d)) => { (done_pager(p, d)) },
                _ => {
                    @let storage = if p.state == Some(State::Done) { format!("{}&order=storage", tab(p.state)) } else { tab(p.state) };
                    nav.pager {
                        @if p.cursor != 0 {
                            a href=(storage) { "« first page" }
                        }
                        @if p.next_cursor != 0 {
                            @let sep = if p.state.is_some() { "&" } else { "?" };
                            a.next href=(format!("{storage}{sep}cursor={}", p.next_cursor)) { "next page »" }
                        } @else {
                            span.muted { "end of the queue" }
                        }
                        span.muted.hint { "paged with DQ.SCAN, in storage order" }
                    }
                },
            }
            }
        }
    };
    // A done tab read with DQ.SCAN read every done message: not again
    // every 5 s.
    let refresh = p.done.as_ref().is_none_or(|d| d.scans.is_none());
    layout(
        &title,
        &[(queue_url(p.server, p.name), title.clone())],
        refresh,
        body,
    )
}

/// A done message's result, short: the text, `(empty)`, or none after a
/// plain ACK; a message no longer done since it was listed (cancelled,
/// dropped, added again) says where it is.
fn result_cell(l: &Listed) -> Markup {
    html! {
        @match (l.state.as_deref(), &l.result) {
            (None, _) => span.badge title="dropped, cancelled or purged since this page listed it" { "gone" },
            (Some("done"), None) => span.muted title="finished by a plain DQ.ACK: no result" { "none (ACK)" },
            (Some("done"), Some(r)) if r.is_empty() => span.muted title="DQ.DONE kept an empty result" { "(empty)" },
            (Some("done"), Some(r)) => code title=(label(r, 1000)) { (label(r, 90)) },
            (Some(other), _) => (state_badge(other)),
        }
    }
}

/// The done tab's table: each finished message's result, attempts and
/// when it finished.
fn done_table(p: &QueuePage, now: u64) -> Markup {
    html! {
        table.messages.done-list id="messages" {
            thead { tr {
                th { "id" } th { "result" } th.num title="the attempt that finished it" { "attempts" } th { "finished" } th { "payload" }
            } }
            tbody {
                @for l in p.entries {
                    @let e = &l.entry;
                    tr {
                        td.id { a href=(message_url(p.server, p.name, &e.id)) { (label(&e.id, 60)) } }
                        td.outcome { (result_cell(l)) }
                        td.num.attempts { (e.attempt) }
                        (when_cell(l, now))
                        td.payload { code { (label(&e.payload, 60)) } }
                    }
                }
            }
        }
    }
}

/// The done tab's links to the newer and older pages, and where this one
/// lies.
fn done_pager(p: &QueuePage, d: &DoneView) -> Markup {
    let at = |b: &Bound| {
        let base = format!("{}?state=done", queue_url(p.server, p.name));
        match b.to_query() {
            Some((field, value)) => format!("{base}&{field}={}", url_part(&value)),
            None => base,
        }
    };
    let last = d.first + p.entries.len() - 1;
    html! {
        nav.pager.done-pager id="done-pager" {
            @if let Some(b) = &d.newer {
                a.prev href=(at(b)) rel="prev" { "‹ newer" }
            }
            span id="done-showing" {
                @if p.entries.is_empty() {
                    @if d.total > 0 { "none here now; " } (count(d.total as u64)) " done"
                } @else { (count(d.first as u64)) "–" (count(last as u64)) " of " (count(d.total as u64)) " done, newest first" }
            }
            @if let Some(b) = &d.older {
                a.next href=(at(b)) rel="next" { "older ›" }
            }
            span.muted.hint id="done-read" {
                @match d.scans {
                    None => "read with one DQ.PEEK DONE",
                    Some(n) => { "read with " (count(n as u64)) " DQ.SCAN STATE DONE " (if n == 1 { "call" } else { "calls" }) " (not reloaded every 5 s)" },
                }
            }
        }
    }
}

fn opt_time(t: Option<u64>, now: u64) -> Markup {
    html! {
        @match t {
            Some(t) => { (relative(t, now)) " " span.muted { "(" (time(t)) ")" } },
            None => span.muted { "—" },
        }
    }
}

pub fn payload_view(bytes: &[u8]) -> Markup {
    bytes_view(bytes, "payload", "payload")
}

/// Bytes shown as a payload is — JSON re-indented, text, or a hex dump —
/// in a `pre` with the id `id` (`<id>-hex` for the dump): the payload,
/// and a done message's result, which is any bytes too.
fn bytes_view(bytes: &[u8], id: &str, what: &str) -> Markup {
    let truncated = bytes.len() > render::PAYLOAD_SHOWN;
    html! {
        @match render::payload(bytes) {
            Payload::Empty => p.muted id=(id) { "(empty " (what) ")" },
            Payload::Json(text) => { span.kind { "JSON" } pre.payload.json id=(id) { (text) } },
            Payload::Text(text) => { span.kind { "text" } pre.payload id=(id) { (text) } },
            Payload::Binary { hex, text } => {
                span.kind { "binary: hex dump and the text with bad UTF-8 replaced" }
                pre.payload.hex id=(format!("{id}-hex")) { (hex) }
                pre.payload id=(id) { (text) }
            },
        }
        @if truncated {
            p.muted { "Showing the first " (count(render::PAYLOAD_SHOWN as u64)) " of " (count(bytes.len() as u64)) " bytes." }
        }
    }
}

/// The page without a history, as the unit tests render it (the server's
/// page always reads one).
#[cfg(test)]
pub fn message_page(ctx: &Ctx, server: &str, queue: &[u8], m: &Message) -> Markup {
    message_page_with(ctx, server, queue, m, html! {})
}

/// The message's page with `history`, its events from the queue's log
/// (events.rs), after its payload.
pub fn message_page_with(
    ctx: &Ctx,
    server: &str,
    queue: &[u8],
    m: &Message,
    history: Markup,
) -> Markup {
    let qname = label(queue, 80);
    let id = label(&m.id, 80);
    let body = html! {
        section.titlebar {
            h1 { span.muted { "message " } span id="message-id" { (id) } }
            span id="message-state" { (state_badge(&m.state)) }
        }
        div.columns {
            section.card.details {
                h2 { "Delivery" }
                dl {
                    dt { "state" } dd { (m.state) }
                    dt { "attempt" } dd id="attempt" { (m.attempt) }
                    dt { "attempts left" } dd { (m.attempts_left.map_or("—".to_string(), |n| n.to_string())) " of " (m.max_attempts.map_or("—".to_string(), |n| n.to_string())) " " span.from { (m.max_attempts_from.clone().unwrap_or_default()) } }
                    dt { "priority" } dd { (m.priority) }
                    dt { "due" } dd { (opt_time(m.due_at, ctx.now)) }
                    dt { "lease deadline" } dd { (opt_time(m.lease_deadline, ctx.now)) }
                    dt { "added" } dd { (opt_time(m.added_at, ctx.now)) }
                    dt { "expires (TTL)" } dd { (opt_time(m.expires_at, ctx.now)) }
                    dt { "group" } dd { @match &m.group { Some(g) => code { (lossy(g)) }, None => span.muted { "—" } } }
                    @if let Some(w) = &m.waiting_for {
                        dt { "waiting for" } dd { a href=(message_url(server, queue, w)) { (label(w, 80)) } }
                    }
                    dt { "backoff" } dd { code { (m.backoff.clone().unwrap_or_default()) } " " span.from { (m.backoff_from.clone().unwrap_or_default()) } }
                    @if m.replacement_pending {
                        dt { "replacement" } dd { "a newer version waits for this delivery to end" }
                    }
                    dt title="what the delivery last reported with DQ.TOUCH ... PROGRESS" { "progress" }
                    dd id="progress" { @match &m.progress { Some(v) => code { (label(v, 1000)) }, None => span.muted { "—" } } }
                    @if m.finished_at.is_some() {
                        dt { "finished" } dd id="finished-at" { (opt_time(m.finished_at, ctx.now)) }
                        dt title="when its retention runs out and it is dropped" { "kept until" } dd id="retained-until" { (opt_time(m.retained_until, ctx.now)) }
                    }
                }
            }
            section.card.failure {
                h2 { "Failure" }
                dl {
                    dt { "dead reason" } dd id="dead-reason" { @match &m.dead_reason { Some(r) => span.badge.st-dead { (r) }, None => span.muted { "—" } } }
                    dt { "died" } dd { (opt_time(m.died_at, ctx.now)) }
                }
                h3 { "Last error" }
                @match &m.last_error {
                    Some(e) => pre.error id="last-error" { (lossy(e)) },
                    None => p.muted id="last-error" { "none" },
                }
            }
            @if !ctx.read_only {
                section.card.actions-card {
                    h2 { "Actions" }
                    div.actions {
                        @if m.state == "dead" {
                            (action_form(ctx, server, queue, &[("op", b"redrive"), ("id", &m.id)], "Redrive", false))
                        }
                        (action_form(ctx, server, queue, &[("op", b"cancel"), ("id", &m.id)], "Cancel message", true))
                    }
                }
            }
        }
        @if m.state() == Some(State::Done) {
            section.card.result-card id="result-card" {
                @match &m.result {
                    Some(r) => {
                        h2 { "Result " span.muted { "(" (count(r.len() as u64)) " bytes, kept by DQ.DONE)" } }
                        (bytes_view(r, "result-value", "result"))
                    },
                    None => {
                        h2 { "Result" }
                        p.muted id="result-value" { "none: a plain DQ.ACK finished it" }
                    },
                }
            }
        }
        section.card {
            h2 { "Payload " span.muted { "(" (count(m.payload.len() as u64)) " bytes)" } }
            (payload_view(&m.payload))
        }
        (history)
    };
    layout(
        &format!("{id} in {qname}"),
        &[
            (queue_url(server, queue), qname.clone()),
            (message_url(server, queue, &m.id), id.clone()),
        ],
        false,
        body,
    )
}

/// What an action will do, before it is done.
pub struct Pending<'a> {
    pub server: &'a str,
    pub queue: &'a [u8],
    pub op: &'a str,
    /// The form's other fields (id, state, schedule, for), as they travel.
    pub fields: Vec<(&'static str, String)>,
    pub description: String,
    pub button: String,
    /// It deletes or stops something: a red button.
    pub danger: bool,
    pub back: String,
}

pub fn confirm_page(ctx: &Ctx, p: &Pending) -> Markup {
    let qname = label(p.queue, 80);
    let body = html! {
        section.card.confirm {
            h1 { "Confirm" }
            p.question id="question" { (p.description) }
            form method="post" action=(action_url(p.server, p.queue)) {
                input type="hidden" name="csrf" value=(ctx.csrf);
                input type="hidden" name="op" value=(p.op);
                @for (k, v) in &p.fields { input type="hidden" name=(k) value=(v); }
                input type="hidden" name="confirm" value="yes";
                div.actions {
                    button.btn.danger[p.danger].primary type="submit" id="confirm" { (p.button) }
                    a.btn.ghost href=(p.back) { "Back, do nothing" }
                }
            }
        }
    };
    layout(
        "Confirm",
        &[(queue_url(p.server, p.queue), qname)],
        false,
        body,
    )
}

pub fn done_page(server: &str, queue: &[u8], what: &str, back: &str) -> Markup {
    let qname = label(queue, 80);
    let body = html! {
        section.card.done {
            h1 { "Done" }
            p.result id="result" { (what) }
            p { a.btn href=(back) { "Back" } " " a.btn.ghost href=(queue_url(server, queue)) { "Queue " (qname) } }
        }
    };
    layout(
        "Done",
        &[(queue_url(server, queue), qname.clone())],
        false,
        body,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::newest::Key;

    fn ctx() -> Ctx {
        Ctx {
            read_only: false,
            csrf: "tok".into(),
            cluster: false,
            now: 0,
        }
    }

    /// Queue `q` on `h:1`, the "all" tab in storage order, with nothing
    /// listed: each test sets what it looks at.
    fn queue<'a>(stats: &'a Stats, config: &'a QueueConfig) -> QueuePage<'a> {
        QueuePage {
            server: "h:1",
            name: b"q",
            stats,
            schedules: &[],
            sharding: None,
            config,
            history: Vec::new(),
            state: None,
            cursor: 0,
            next_cursor: 0,
            order: Order::Storage,
            done: None,
            entries: &[],
            window: "10m",
            group_count: None,
            groups: None,
        }
    }

    #[test]
    fn a_script_payload_id_and_error_are_escaped() {
        let m = Message {
            id: b"<img src=x onerror=alert(1)>".to_vec(),
            state: "dead".into(),
            payload: b"<script>window.__pwned=1</script>".to_vec(),
            last_error: Some(b"</pre><script>x()</script>".to_vec()),
            dead_reason: Some("permanent".into()),
            ..Message::default()
        };
        let html = message_page(&ctx(), "h:1", b"<q>", &m).into_string();
        assert!(!html.contains("<script>window"));
        assert!(html.contains("&lt;script&gt;window.__pwned=1&lt;/script&gt;"));
        assert!(!html.contains("<img src=x"));
        assert!(!html.contains("</pre><script>x()"));
        assert!(html.contains("&lt;q&gt;"));
        // The id in a form and a URL is percent-encoded.
        assert!(html.contains("%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E"));
    }

    #[test]
    fn read_only_pages_have_no_forms() {
        let m = Message {
            id: b"a".to_vec(),
            state: "dead".into(),
            ..Message::default()
        };
        let mut c = ctx();
        assert!(message_page(&c, "h:1", b"q", &m)
            .into_string()
            .contains("<form"));
        c.read_only = true;
        assert!(!message_page(&c, "h:1", b"q", &m)
            .into_string()
            .contains("<form"));
    }

    #[test]
    fn the_groups_tab_escapes_names_and_has_no_forms_when_read_only() {
        let stats = Stats::default();
        let config = QueueConfig {
            group_limit: 3,
            group_rate: Some("10/1s".into()),
            order: "fair".into(),
            ..QueueConfig::default()
        };
        let tab = GroupsTab {
            filter: b"<f>".to_vec(),
            rows: vec![GroupRow {
                group: GroupInfo {
                    name: b"<script>g()</script>".to_vec(),
                    waiting: 2,
                    ready: 1,
                    inflight: 0,
                    paused: true,
                    paused_until: None,
                },
                server: "h:1".into(),
                queue: b"q".to_vec(),
            }],
            matched: 1,
            page: 1,
            pages: 1,
            cut: Some(Cut {
                per_queue: 10_000,
                queues_cut: 1,
            }),
            sharded: false,
            unreadable: Vec::new(),
        };
        let html = |c: &Ctx| {
            let page = QueuePage {
                group_count: Some(1),
                groups: Some(&tab),
                ..queue(&stats, &config)
            };
            queue_page(c, &page).into_string()
        };
        let page = html(&ctx());
        assert!(!page.contains("<script>g()"));
        assert!(page.contains("&lt;script&gt;g()&lt;/script&gt;"));
        assert!(page.contains(r#"name="group" value="%3Cscript%3Eg%28%29%3C%2Fscript%3E""#));
        assert!(page.contains(r#"value="&lt;f&gt;""#));
        assert!(page.contains("Showing the first 10,000 groups by name"));
        assert!(
            page.contains(r#"<dd id="group-limit">3 per group</dd>"#),
            "{page}"
        );
        assert!(page.contains(r#"id="count-groups">1<"#));
        assert!(page.contains("group-pause"));
        let mut ro = ctx();
        ro.read_only = true;
        let page = html(&ro);
        assert!(!page.contains(r#"method="post""#));
        assert!(!page.contains("group-pause"));
        assert!(page.contains(r#"id="group-table""#));
    }

    #[test]
    fn a_sharded_queues_limits_add_up_when_every_shard_has_the_same() {
        let mut sh = Sharding {
            base: "jobs".into(),
            index: 0,
            count: 4,
            present: 4,
            paused: 0,
            paused_until: Vec::new(),
            throttled: 0,
            rates: vec![("25/1s".into(), 4)],
            max_inflights: vec![(5, 4)],
            unreadable: Vec::new(),
        };
        assert_eq!(sh.whole_rate().as_deref(), Some("100/1s"));
        assert_eq!(sh.whole_max_inflight(), Some(20));
        assert_eq!(on_shards(4, 4), "each of the 4 shards");
        assert_eq!(on_shards(1, 4), "1 shard");
        assert_eq!(on_shards(3, 4), "3 shards");
        // Shards that differ, or lack the limit: no sum claimed.
        sh.rates = vec![("25/1s".into(), 3), ("10/1s".into(), 1)];
        sh.max_inflights = vec![(5, 3)];
        assert_eq!(sh.whole_rate(), None);
        assert_eq!(sh.whole_max_inflight(), None);
    }

    #[test]
    fn an_all_tab_entry_takes_its_state_and_time_from_its_get() {
        let scanned = Entry {
            id: b"m".to_vec(),
            payload: b"p".to_vec(),
            attempt: 1,
            time: 5,
            last_error: None,
        };
        let got = |state: &str| Message {
            id: b"m".to_vec(),
            state: state.into(),
            payload: b"p".to_vec(),
            attempt: 2,
            due_at: Some(10),
            lease_deadline: Some(20),
            died_at: Some(30),
            last_error: Some(b"e".to_vec()),
            ..Message::default()
        };
        for (state, time) in [
            ("delayed", 10),
            ("ready", 10),
            ("inflight", 20),
            ("dead", 30),
        ] {
            let l = Listed::from_get(scanned.clone(), Some(got(state)));
            assert_eq!(l.state.as_deref(), Some(state));
            assert_eq!((l.entry.time, l.entry.attempt), (time, 2), "{state}");
            assert_eq!(l.entry.last_error.as_deref(), Some(&b"e"[..]));
        }
        // Done: when it finished, and the last progress reported.
        let done = Message {
            finished_at: Some(40),
            progress: Some(b"4/4".to_vec()),
            ..got("done")
        };
        let l = Listed::from_get(scanned.clone(), Some(done));
        assert_eq!((l.state.as_deref(), l.entry.time), (Some("done"), 40));
        assert_eq!(l.progress.as_deref(), Some(&b"4/4"[..]));
        // A state a newer module adds: SCAN's time, shown unnamed.
        let l = Listed::from_get(scanned.clone(), Some(got("archived")));
        assert_eq!((l.state.as_deref(), l.entry.time), (Some("archived"), 5));
        // Gone since the SCAN.
        let l = Listed::from_get(scanned.clone(), None);
        assert_eq!((l.state, l.entry), (None, scanned));
    }

    #[test]
    fn only_the_all_tab_has_a_state_column_and_states_are_escaped() {
        let stats = Stats::default();
        let config = QueueConfig::default();
        let entry = |id: &[u8]| Entry {
            id: id.to_vec(),
            time: 60_000,
            ..Entry::default()
        };
        let entries = vec![
            Listed::in_state(entry(b"d"), State::Dead),
            Listed {
                entry: entry(b"odd"),
                state: Some("<b>new</b>".into()),
                progress: None,
                result: None,
            },
            Listed {
                entry: entry(b"g"),
                state: None,
                progress: None,
                result: None,
            },
            Listed {
                entry: entry(b"running"),
                state: Some("inflight".into()),
                progress: Some(b"<i>40%</i>".to_vec()),
                result: None,
            },
        ];
        let mut page = QueuePage {
            entries: &entries,
            ..queue(&stats, &config)
        };
        let ctx = Ctx {
            now: 120_000,
            ..ctx()
        };
        let html = queue_page(&ctx, &page).into_string();
        assert!(html.contains("<th>state</th>"), "{html}");
        assert!(html.contains(r#"<td class="state" data-state="dead">"#));
        assert!(html.contains(">died 1m 0s ago<"), "{html}");
        assert!(html.contains(r#"title="died at 1970-01-01 00:01:00 UTC""#));
        assert!(html.contains("&lt;b&gt;new&lt;/b&gt;") && !html.contains("<b>new"));
        assert!(html.contains(r#"data-state="gone""#));
        // A running delivery's progress, escaped.
        assert!(html.contains("<th>progress</th>"));
        assert!(
            html.contains("<code title=\"&lt;i&gt;40%&lt;/i&gt;\">&lt;i&gt;40%&lt;/i&gt;</code>"),
            "{html}"
        );
        page.state = Some(State::Inflight);
        assert!(queue_page(&ctx, &page)
            .into_string()
            .contains("<th>progress</th>"));
        page.state = Some(State::Dead);
        let html = queue_page(&ctx, &page).into_string();
        assert!(!html.contains("<th>state</th>") && !html.contains(r#"class="state""#));
        assert!(html.contains(">died 1m 0s ago<"));
        assert!(
            !html.contains("<th>progress</th>"),
            "only where deliveries run"
        );
    }

    #[test]
    fn a_done_messages_page_shows_its_result_and_when_it_finished() {
        let m = Message {
            id: b"pay-42".to_vec(),
            state: "done".into(),
            result: Some(br#"{"charged":true}"#.to_vec()),
            finished_at: Some(1_000),
            retained_until: Some(3_601_000),
            progress: Some(b"4/4".to_vec()),
            ..Message::default()
        };
        let ctx = Ctx {
            now: 61_000,
            ..ctx()
        };
        let html = message_page(&ctx, "h:1", b"q", &m).into_string();
        assert!(
            html.contains("<pre class=\"payload json\" id=\"result-value\">{\n  &quot;charged&quot;: true\n}</pre>"),
            "{html}"
        );
        assert!(html.contains("(16 bytes, kept by DQ.DONE)"));
        assert!(html.contains(r#"<dd id="finished-at">1m 0s ago <span class="muted">(1970-01-01 00:00:01 UTC)</span>"#), "{html}");
        assert!(html.contains(r#"<dd id="retained-until">in 59m 0s <span class="muted">(1970-01-01 01:00:01 UTC)</span>"#), "{html}");
        assert!(html.contains(r#"<dd id="progress"><code>4/4</code>"#));
        // Finished by a plain ACK: no result, and it says so.
        let acked = Message { result: None, ..m };
        let html = message_page(&ctx, "h:1", b"q", &acked).into_string();
        assert!(html.contains(
            r#"<p class="muted" id="result-value">none: a plain DQ.ACK finished it</p>"#
        ));
        // An empty result is a result.
        let empty = Message {
            result: Some(Vec::new()),
            ..acked.clone()
        };
        let html = message_page(&ctx, "h:1", b"q", &empty).into_string();
        assert!(
            html.contains(r#"<p class="muted" id="result-value">(empty result)</p>"#),
            "{html}"
        );
        // Running: its progress, no result and no finish.
        let running = Message {
            state: "inflight".into(),
            finished_at: None,
            retained_until: None,
            ..acked
        };
        let html = message_page(&ctx, "h:1", b"q", &running).into_string();
        assert!(!html.contains("result-card") && !html.contains("finished-at"));
        assert!(html.contains(r#"<dd id="progress"><code>4/4</code>"#));
    }

    #[test]
    fn the_settings_show_what_the_queue_keeps_of_finished_messages() {
        let stats = Stats::default();
        let mut config = QueueConfig {
            retain_ms: 0,
            retain_ms_from: "module".into(),
            ..QueueConfig::default()
        };
        let html = |config: &QueueConfig, sharding: Option<&Sharding>| {
            let page = QueuePage {
                sharding,
                ..queue(&stats, config)
            };
            queue_page(&ctx(), &page).into_string()
        };
        let page = html(&config, None);
        assert!(
            page.contains(r#"<dd id="retain">not kept <span class="from">module</span></dd>"#),
            "{page}"
        );
        assert!(
            page.contains(r#"<dd id="retain-max">no cap</dd>"#),
            "{page}"
        );
        config.retain_ms = 7 * 86_400_000;
        config.retain_ms_from = "queue".into();
        config.retain_max = Some(10_000);
        let page = html(&config, None);
        assert!(page.contains(r#"<dd id="retain">7d 0h <span class="from">queue</span></dd>"#));
        assert!(page.contains(r#"<dd id="retain-max">at most 10,000 done</dd>"#));
        // A shard's cap is its own share of the sharded queue's.
        let sharding = Sharding {
            base: "jobs".into(),
            index: 0,
            count: 2,
            present: 2,
            paused: 0,
            paused_until: Vec::new(),
            throttled: 0,
            rates: Vec::new(),
            max_inflights: Vec::new(),
            unreadable: Vec::new(),
        };
        let page = html(&config, Some(&sharding));
        assert!(page.contains(r#"<dd id="retain-max">at most 10,000 done <span class="from">this shard's</span></dd>"#), "{page}");
    }

    #[test]
    fn the_done_tab_shows_results_and_links_to_the_pages_around_it() {
        let stats = Stats {
            done: 120,
            ..Stats::default()
        };
        let config = QueueConfig::default();
        let done = |id: &[u8], result: Option<&[u8]>| Listed {
            entry: Entry {
                id: id.to_vec(),
                payload: b"p".to_vec(),
                attempt: 2,
                time: 60_000,
                ..Entry::default()
            },
            state: Some("done".into()),
            progress: None,
            result: result.map(<[u8]>::to_vec),
        };
        let entries = vec![
            done(b"with", Some(b"<b>charged</b>")),
            done(b"acked", None),
            done(b"empty", Some(b"")),
            Listed {
                state: None,
                ..done(b"dropped", None)
            },
            Listed {
                state: Some("ready".into()),
                ..done(b"again", None)
            },
        ];
        let key = |id: &[u8]| Key {
            finished: 60_000,
            id: id.to_vec(),
        };
        let mut page = QueuePage {
            state: Some(State::Done),
            order: Order::Newest,
            done: Some(DoneView {
                first: 51,
                total: 120,
                newer: Some(Bound::Newer(key(b"with"))),
                older: Some(Bound::Older(key(b"a:b&c"))),
                scans: None,
            }),
            entries: &entries,
            ..queue(&stats, &config)
        };
        let ctx = Ctx {
            now: 120_000,
            ..ctx()
        };
        let html = queue_page(&ctx, &page).into_string();
        assert!(html.contains("<th>result</th>") && html.contains("<th>finished</th>"));
        assert!(html.contains(
            r#"<code title="&lt;b&gt;charged&lt;/b&gt;">&lt;b&gt;charged&lt;/b&gt;</code>"#
        ));
        assert!(!html.contains("<b>charged"));
        assert!(html.contains(">none (ACK)<") && html.contains(">(empty)<"));
        assert!(
            html.contains(">gone<")
                && html.contains(r#"<span class="badge st-ready">ready</span>"#)
        );
        assert!(html.contains(r#"<td class="num attempts">2</td>"#));
        assert!(html.contains(r#"<td class="time" title="finished at 1970-01-01 00:01:00 UTC">finished 1m 0s ago</td>"#));
        // The keys travel percent-encoded, whatever the id holds.
        assert!(
            html.contains(r#"href="/q/h%3A1/q?state=done&amp;newer=60000%3Awith""#),
            "{html}"
        );
        assert!(
            html.contains(r#"href="/q/h%3A1/q?state=done&amp;older=60000%3Aa%3Ab%26c""#),
            "{html}"
        );
        assert!(html.contains(r#"<span id="done-showing">51–55 of 120 done, newest first</span>"#));
        assert!(
            html.contains("read with one DQ.PEEK DONE") && html.contains(r#"data-refresh="5""#)
        );
        assert!(html.contains(r#"<a class="active" id="order-newest""#));
        // Read with DQ.SCAN: said, and the page does not reload itself.
        page.done = Some(DoneView {
            newer: Some(Bound::Newest),
            older: None,
            scans: Some(3),
            ..page.done.clone().unwrap()
        });
        let html = queue_page(&ctx, &page).into_string();
        assert!(
            html.contains("read with 3 DQ.SCAN STATE DONE calls")
                && html.contains(r#"data-refresh="""#)
        );
        assert!(
            html.contains(r#"<a class="prev" href="/q/h%3A1/q?state=done" rel="prev">"#),
            "{html}"
        );
        assert!(!html.contains("older ›"));
        // The done tab in storage order pages on with the order in its links.
        page.order = Order::Storage;
        page.done = None;
        page.next_cursor = 17;
        let html = queue_page(&ctx, &page).into_string();
        assert!(
            html.contains(r#"href="/q/h%3A1/q?state=done&amp;order=storage&amp;cursor=17""#),
            "{html}"
        );
        assert!(html.contains("<th>result</th>"));
    }

    #[test]
    fn urls_encode_every_part() {
        assert_eq!(
            queue_url("127.0.0.1:6379", b"a/b"),
            "/q/127.0.0.1%3A6379/a%2Fb"
        );
        assert_eq!(message_url("h:1", b"q", b"?#"), "/q/h%3A1/q/m/%3F%23");
    }
}
