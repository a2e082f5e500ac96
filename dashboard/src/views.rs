//! The pages' handlers (GET): each reads what its page shows — one
//! DQ.QUEUES WITHSTATS per server for the list, a few calls for a queue or
//! a message — and renders it with pages.rs. None of them changes
//! anything.

use std::sync::Arc;

use dq_client::{admin, Entry, Message, ScheduleInfo, State, Stats};
use hyper::StatusCode;

use crate::app::App;
use crate::backend::{Backend, Server};
use crate::discovery::{find_shards, ShardSet};
use crate::groups;
use crate::http::{check_id, fail, html, plain, redis_fail, refused, utf8, Fail, Resp};
use crate::list::{self, ListQuery};
use crate::newest::{Bound, Pick};
use crate::pages::{self, Ctx, Order};
use crate::render::form_value;

/// Messages a queue page shows at most.
const PAGE: usize = pages::PEEK_SHOWN;

pub async fn healthz(app: &App) -> Result<Resp, Fail> {
    let mut down = Vec::new();
    for s in app.backend.servers() {
        let mut con = s.con.clone();
        if admin::info_dq(&mut con).await.is_err() {
            down.push(s.addr.clone());
        }
    }
    if down.is_empty() {
        Ok(plain(StatusCode::OK, "text/plain; charset=utf-8", "ok\n"))
    } else {
        Ok(plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain; charset=utf-8",
            format!("unreachable: {}\n", down.join(", ")),
        ))
    }
}

/// The queue list: one DQ.QUEUES WITHSTATS per server (with MATCH for a
/// name filter) and INFO dq, then the state filter, the sort and the page
/// here; the history is looked up for the page's rows only.
pub async fn list(app: &App, ctx: &Ctx, query: &[(String, Vec<u8>)]) -> Result<Resp, Fail> {
    let view = ListQuery::parse(query)
        .map_err(|(title, detail)| fail(StatusCode::BAD_REQUEST, title, detail))?;
    let all = app.backend.servers();
    let many_servers = all.len() > 1;
    let servers = match &view.server {
        Some(name) => vec![app.server_of(name.as_bytes())?],
        None => all,
    };
    let pattern = view.pattern();
    let snaps = Backend::snapshot_matching(servers, pattern.as_deref()).await;
    let mut rows: Vec<list::Row> = snaps
        .iter()
        .flat_map(|snap| {
            snap.queues.iter().map(|(name, stats)| list::Row {
                server: &snap.addr,
                name,
                stats,
            })
        })
        .filter(|r| view.keeps(r.stats))
        .collect();
    let mut sums = [0u64; 4];
    for r in &rows {
        for (sum, st) in sums.iter_mut().zip(State::ALL) {
            *sum = sum.saturating_add(r.stats.count(st));
        }
    }
    let paused = rows.iter().filter(|r| r.stats.paused).count();
    let notes: Vec<pages::ServerNote> = snaps
        .iter()
        .map(|snap| pages::ServerNote {
            addr: snap.addr.clone(),
            error: snap.error.clone(),
            lateness_ms: snap.info.as_ref().and_then(|i| i.int("lateness_ms")),
            ticks: snap.info.as_ref().and_then(|i| i.int("timer_ticks")),
            queues: rows.iter().filter(|r| r.server == snap.addr).count(),
        })
        .collect();
    list::order(&mut rows, view.sort, view.desc);
    let matched = rows.len();
    let (pages_n, page) = view.pages(matched);
    let from = ((page - 1) * view.per).min(matched);
    let to = (from + view.per).min(matched);
    let (total, span, shown) = {
        let history = app.history.lock().ok();
        let shown: Vec<pages::QueueRow> = rows[from..to]
            .iter()
            .map(|r| pages::QueueRow {
                server: r.server,
                name: r.name,
                stats: r.stats,
                history: history
                    .as_ref()
                    .map(|h| h.queue(r.server, r.name))
                    .unwrap_or_default(),
            })
            .collect();
        let total = history.as_ref().map(|h| h.total()).unwrap_or_default();
        let span = history.as_ref().map_or(0, |h| h.rate_span_ms());
        (total, span, shown)
    };
    let v = pages::ListView {
        query: &view,
        rows: shown,
        matched,
        page,
        pages: pages_n,
        sums,
        paused,
        total: &total,
        servers: &notes,
        many_servers,
        window: &app.window,
        rate_span_ms: span,
    };
    Ok(html(StatusCode::OK, pages::queue_list(ctx, &v)))
}

pub async fn queue_page(
    app: &App,
    ctx: &Ctx,
    server: &[u8],
    queue: &[u8],
    query: &[(String, Vec<u8>)],
) -> Result<Resp, Fail> {
    let server = app.server_of(server)?;
    let state = match form_value(query, "state") {
        None => None,
        Some(s) if s.is_empty() || s == b"all" => None,
        Some(s) => Some(
            utf8(s, "state")?
                .parse::<State>()
                .map_err(|e| fail(StatusCode::BAD_REQUEST, "Bad state", e))?,
        ),
    };
    let cursor = match form_value(query, "cursor") {
        None => 0,
        Some(c) => utf8(c, "cursor")?.parse::<u64>().map_err(|_| {
            fail(
                StatusCode::BAD_REQUEST,
                "Bad cursor",
                "cursor must be a non-negative integer that a previous page gave",
            )
        })?,
    };
    let order = order_of(form_value(query, "order"), state)?;
    let bound = Bound::from_query(form_value(query, "older"), form_value(query, "newer"))
        .map_err(|e| fail(StatusCode::BAD_REQUEST, "Bad page", e))?;
    if order != Order::Newest && bound != Bound::Newest {
        return Err(fail(
            StatusCode::BAD_REQUEST,
            "Bad page",
            "older and newer page the done tab's newest first order (state=done)",
        ));
    }
    if order == Order::Newest && cursor != 0 {
        return Err(fail(
            StatusCode::BAD_REQUEST,
            "Bad page",
            "cursor pages storage order (order=storage); the done tab's newest first pages \
             go by older and newer",
        ));
    }
    let on_groups = groups_tab_asked(query)?;
    app.existing_queue(&server, queue).await?;
    let mut con = server.con.clone();
    let stats = admin::stats(&mut con, queue).await.map_err(redis_fail)?;
    let config = admin::config(&mut con, queue).await.map_err(redis_fail)?;
    let shards = find_shards(app, &server, queue).await;
    let schedules = schedules_of(&server, queue, &stats, shards.as_ref()).await?;
    let groups_tab = match on_groups {
        true => Some(groups_tab(&server, queue, shards.as_ref(), query).await?),
        false => None,
    };
    let mut entries = Vec::new();
    let mut next = cursor;
    let mut done = None;
    match (order, state) {
        // The groups tab lists groups, not messages.
        _ if on_groups => next = 0,
        (Order::Newest, _) => {
            let (rows, view) = newest_done(&mut con, queue, bound, stats.done).await?;
            (entries, next, done) = (rows, 0, Some(view));
        }
        (Order::Next, Some(st)) => {
            entries = admin::peek(&mut con, queue, st, PAGE)
                .await
                .map_err(redis_fail)?;
            next = 0;
        }
        _ => {
            // A SCAN reply may hold fewer entries than asked, even none,
            // before the end: a few calls fill the page.
            for _ in 0..8 {
                let (c, mut got) =
                    admin::scan_page(&mut con, queue, state, next, PAGE - entries.len())
                        .await
                        .map_err(|e| {
                            if refused(&e) {
                                fail(StatusCode::BAD_REQUEST, "Bad cursor", e.to_string())
                            } else {
                                redis_fail(e)
                            }
                        })?;
                entries.append(&mut got);
                next = c;
                if next == 0 || entries.len() >= PAGE {
                    break;
                }
            }
        }
    }
    // The "all" tab asks each message's DQ.GET for its state, the inflight
    // tab for its progress, the done tab for its result: none is in SCAN's
    // or PEEK's entries.
    let entries = match state {
        Some(State::Inflight | State::Done) | None => with_states(&server, queue, entries).await?,
        Some(st) => entries
            .into_iter()
            .map(|e| pages::Listed::in_state(e, st))
            .collect(),
    };
    let history = app
        .history
        .lock()
        .map(|h| h.queue(&server.addr, queue))
        .unwrap_or_default();
    let schedule_rows: Vec<pages::ScheduleRow> = schedules
        .iter()
        .map(|s| pages::ScheduleRow {
            server: &s.server,
            queue: &s.queue,
            schedule: &s.schedule,
        })
        .collect();
    let sharding = shards.as_ref().map(ShardSet::view);
    let page = pages::QueuePage {
        server: &server.addr,
        name: queue,
        stats: &stats,
        schedules: &schedule_rows,
        sharding: sharding.as_ref(),
        config: &config,
        history,
        state,
        cursor,
        next_cursor: next,
        order,
        done,
        entries: &entries,
        window: &app.window,
        group_count: groups::count(&stats, &config),
        groups: groups_tab.as_ref(),
    };
    Ok(html(StatusCode::OK, pages::queue_page(ctx, &page)))
}

/// Whether the queue page's `tab` asks for the groups (else the messages).
fn groups_tab_asked(query: &[(String, Vec<u8>)]) -> Result<bool, Fail> {
    match form_value(query, "tab") {
        None | Some(b"" | b"messages") => Ok(false),
        Some(b"groups") => Ok(true),
        Some(_) => Err(fail(
            StatusCode::BAD_REQUEST,
            "Bad tab",
            "tab must be groups, or messages (the default)",
        )),
    }
}

/// The groups tab: the queue's groups (every shard's, for a shard of a
/// sharded queue: a group lives on one shard) matching the filter box,
/// read with DQ.GROUPS up to [`groups::MAX_GROUPS`] looked at, sorted by
/// backlog and paged here.
async fn groups_tab(
    server: &Arc<Server>,
    queue: &[u8],
    shards: Option<&ShardSet>,
    query: &[(String, Vec<u8>)],
) -> Result<pages::GroupsTab, Fail> {
    let filter = form_value(query, "group").unwrap_or(b"").to_vec();
    if filter.len() > 2 * groups::MAX_GROUP + 2 {
        return Err(fail(
            StatusCode::BAD_REQUEST,
            "Bad filter",
            "The group filter is at most 2050 bytes.",
        ));
    }
    let page = match form_value(query, "page") {
        None | Some(b"") => 1,
        Some(p) => utf8(p, "page")?
            .parse::<usize>()
            .ok()
            .filter(|&p| p >= 1)
            .ok_or_else(|| {
                fail(
                    StatusCode::BAD_REQUEST,
                    "Bad page",
                    "page must be a positive integer",
                )
            })?,
    };
    let pattern = groups::pattern(&filter);
    // The queues holding groups: this one, or every shard that exists.
    let (holders, unreadable) = match shards {
        None => (vec![(server.clone(), queue.to_vec())], Vec::new()),
        Some(set) => (
            set.shards
                .iter()
                .filter(|s| s.stats.is_some())
                .filter_map(|s| Some((s.server.clone()?, s.name.clone())))
                .collect::<Vec<_>>(),
            set.unreadable.clone(),
        ),
    };
    let budget = groups::MAX_GROUPS.div_ceil(holders.len().max(1)).max(1);
    let mut reads = tokio::task::JoinSet::new();
    for (s, q) in holders {
        let pattern = pattern.clone();
        reads.spawn(async move {
            let mut con = s.con.clone();
            let got = groups::read(&mut con, &q, pattern.as_deref(), budget).await;
            (s.addr.clone(), q, got)
        });
    }
    let mut rows = Vec::new();
    let mut cut = 0usize;
    while let Some(done) = reads.join_next().await {
        let (addr, q, got) = done.map_err(|e| {
            fail(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Internal error",
                e.to_string(),
            )
        })?;
        let got = got.map_err(redis_fail)?;
        cut += usize::from(got.cut);
        rows.extend(got.groups.into_iter().map(|group| pages::GroupRow {
            group,
            server: addr.clone(),
            queue: q.clone(),
        }));
    }
    groups::sort(&mut rows, |r| &r.group);
    let matched = rows.len();
    let pages_n = matched.div_ceil(groups::PER_PAGE).max(1);
    let page = page.min(pages_n);
    let from = ((page - 1) * groups::PER_PAGE).min(matched);
    let to = (from + groups::PER_PAGE).min(matched);
    let rows: Vec<pages::GroupRow> = rows.drain(from..to).collect();
    Ok(pages::GroupsTab {
        filter,
        rows,
        matched,
        page,
        pages: pages_n,
        cut: (cut > 0).then_some(pages::Cut {
            per_queue: budget,
            queues_cut: cut,
        }),
        sharded: shards.is_some(),
        unreadable,
    })
}

/// A tab's order: `storage` (DQ.SCAN, paged by cursor) or `next` (DQ.PEEK:
/// the first 50 to leave the state); the done tab's default is `newest`
/// (newest finished first, paged), which only it has.
fn order_of(order: Option<&[u8]>, state: Option<State>) -> Result<Order, Fail> {
    let bad = |detail: &str| Err(fail(StatusCode::BAD_REQUEST, "Bad order", detail));
    match (order, state) {
        (None | Some(b"newest"), Some(State::Done)) => Ok(Order::Newest),
        (None | Some(b"storage"), _) => Ok(Order::Storage),
        (Some(b"next"), Some(_)) => Ok(Order::Next),
        (Some(b"next"), None) => bad(
            "order=next (DQ.PEEK) needs a state: add state=delayed, ready, inflight, dead or done",
        ),
        (Some(b"newest"), _) => bad("order=newest is the done tab's: add state=done"),
        _ => bad(
            "order must be storage (DQ.SCAN, paged), next (DQ.PEEK, the first 50) or, on the \
             done tab, newest (newest finished first, paged)",
        ),
    }
}

/// Done messages one read brings at most: the done tab reads a queue
/// holding fewer with one DQ.PEEK DONE, and a larger one with DQ.SCAN
/// STATE DONE calls of this COUNT (each looks at about ten times as many
/// places of the queue's storage).
const DONE_READ: usize = 1000;

/// The done tab's page `bound`, newest finished first (newest.rs), from
/// every done message read once. While the queue holds fewer than
/// [`DONE_READ`], that is one DQ.PEEK DONE; beyond, the newest are not
/// among the first any PEEK gives (earliest finished first), so DQ.SCAN
/// STATE DONE from its first cursor to its last, [`DONE_READ`] a call.
/// Either way only the page's rows are kept.
async fn newest_done(
    con: &mut redis::aio::ConnectionManager,
    queue: &[u8],
    bound: Bound,
    done_now: u64,
) -> Result<(Vec<Entry>, pages::DoneView), Fail> {
    let mut pick = Pick::new(bound, PAGE);
    let peeked = if done_now < DONE_READ as u64 {
        Some(
            admin::peek(con, queue, State::Done, DONE_READ)
                .await
                .map_err(redis_fail)?,
        )
    } else {
        None
    };
    let scans = match peeked {
        // Fewer than asked: every done message (more finished meanwhile
        // would have filled it).
        Some(all) if all.len() < DONE_READ => {
            all.into_iter().for_each(|e| pick.offer(e));
            None
        }
        _ => {
            let (mut cursor, mut calls) = (0, 0);
            loop {
                let (next, got) =
                    admin::scan_page(con, queue, Some(State::Done), cursor, DONE_READ)
                        .await
                        .map_err(redis_fail)?;
                calls += 1;
                got.into_iter().for_each(|e| pick.offer(e));
                if next == 0 {
                    break;
                }
                cursor = next;
            }
            Some(calls)
        }
    };
    let page = pick.finish();
    let view = pages::DoneView {
        first: page.newer + 1,
        total: page.total,
        newer: page.newer_page,
        older: page.older_page,
        scans,
    };
    Ok((page.rows, view))
}

/// The entries as each one's DQ.GET finds them: the "all" tab's states
/// (DQ.SCAN without STATE does not say an entry's state) and progress,
/// the inflight tab's progress, the done tab's results. A page's worth
/// (50) at most, sent at once on the server's multiplexed connection —
/// one round trip's wait, not 50. (A state in SCAN's entries would spare
/// the "all" tab's.)
async fn with_states(
    server: &Arc<Server>,
    queue: &[u8],
    entries: Vec<Entry>,
) -> Result<Vec<pages::Listed>, Fail> {
    let mut gets = tokio::task::JoinSet::new();
    for (at, e) in entries.iter().enumerate() {
        let mut con = server.con.clone();
        let (queue, id) = (queue.to_vec(), e.id.clone());
        gets.spawn(async move { (at, admin::get(&mut con, &queue, &id).await) });
    }
    let mut found: Vec<Option<Message>> = entries.iter().map(|_| None).collect();
    while let Some(done) = gets.join_next().await {
        // Only a panic of the task itself (a bug) ends a join in error.
        let (at, got) = done.map_err(|e| {
            fail(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Internal error",
                e.to_string(),
            )
        })?;
        found[at] = got.map_err(redis_fail)?;
    }
    Ok(entries
        .into_iter()
        .zip(found)
        .map(|(e, m)| pages::Listed::from_get(e, m))
        .collect())
}

/// A schedule and the queue (a shard, for a sharded queue) holding it.
struct ScheduleAt {
    server: String,
    queue: Vec<u8>,
    schedule: ScheduleInfo,
}

/// The schedules of the queue, or of every shard of a sharded queue: a
/// DQ.SCHEDULES of each queue whose DQ.STATS counts any, by name.
async fn schedules_of(
    server: &Arc<Server>,
    queue: &[u8],
    stats: &Stats,
    shards: Option<&ShardSet>,
) -> Result<Vec<ScheduleAt>, Fail> {
    let holders: Vec<(Arc<Server>, Vec<u8>)> = match shards {
        None if stats.schedules > 0 => vec![(server.clone(), queue.to_vec())],
        None => Vec::new(),
        Some(set) => set
            .shards
            .iter()
            .filter(|s| s.stats.as_ref().is_some_and(|st| st.schedules > 0))
            .filter_map(|s| Some((s.server.clone()?, s.name.clone())))
            .collect(),
    };
    let mut reads = tokio::task::JoinSet::new();
    for (s, q) in holders {
        reads.spawn(async move {
            let mut con = s.con.clone();
            let got = admin::schedules(&mut con, &q).await;
            (s.addr.clone(), q, got)
        });
    }
    let mut all = Vec::new();
    while let Some(done) = reads.join_next().await {
        let Ok((addr, q, got)) = done else { continue };
        for schedule in got.map_err(redis_fail)? {
            all.push(ScheduleAt {
                server: addr.clone(),
                queue: q.clone(),
                schedule,
            });
        }
    }
    all.sort_by(|a, b| {
        a.schedule
            .name
            .cmp(&b.schedule.name)
            .then_with(|| a.queue.cmp(&b.queue))
    });
    Ok(all)
}

pub async fn message_page(
    app: &App,
    ctx: &Ctx,
    server: &[u8],
    queue: &[u8],
    id: &[u8],
) -> Result<Resp, Fail> {
    let server = app.server_of(server)?;
    check_id(id)?;
    let mut con = server.con.clone();
    match admin::get(&mut con, queue, id).await.map_err(redis_fail)? {
        Some(m) => {
            let history =
                crate::events::history(&mut con, &server.addr, queue, id, ctx.now).await?;
            Ok(html(
                StatusCode::OK,
                pages::message_page_with(ctx, &server.addr, queue, &m, history),
            ))
        }
        None => Err(fail(
            StatusCode::NOT_FOUND,
            "Unknown message",
            format!(
                "Queue {} on {} has no message {} (acknowledged, cancelled or never added).",
                crate::render::label(queue, 200),
                server.addr,
                crate::render::label(id, 200)
            ),
        )),
    }
}
