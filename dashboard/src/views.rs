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
use crate::http::{check_id, fail, html, plain, redis_fail, refused, utf8, Fail, Resp};
use crate::list::{self, ListQuery};
use crate::pages::{self, Ctx};
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
    let next_order =
        match form_value(query, "order") {
            None | Some(b"storage") => false,
            Some(b"next") if state.is_some() => true,
            Some(b"next") => return Err(fail(
                StatusCode::BAD_REQUEST,
                "Bad order",
                "order=next (DQ.PEEK) needs a state: add state=delayed, ready, inflight or dead",
            )),
            Some(_) => {
                return Err(fail(
                    StatusCode::BAD_REQUEST,
                    "Bad order",
                    "order must be storage (DQ.SCAN, paged) or next (DQ.PEEK, the first 50)",
                ))
            }
        };
    app.existing_queue(&server, queue).await?;
    let mut con = server.con.clone();
    let stats = admin::stats(&mut con, queue).await.map_err(redis_fail)?;
    let config = admin::config(&mut con, queue).await.map_err(redis_fail)?;
    let shards = find_shards(app, &server, queue).await;
    let schedules = schedules_of(&server, queue, &stats, shards.as_ref()).await?;
    // A SCAN reply may hold fewer entries than asked, even none, before
    // the end: a few calls fill the page.
    let mut entries = Vec::new();
    let mut next = cursor;
    if let (true, Some(st)) = (next_order, state) {
        entries = admin::peek(&mut con, queue, st, PAGE)
            .await
            .map_err(redis_fail)?;
        next = 0;
    }
    for _ in 0..8 {
        if next_order {
            break;
        }
        let (c, mut got) = admin::scan_page(&mut con, queue, state, next, PAGE - entries.len())
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
    // The "all" tab asks each message's DQ.GET for its state, the inflight
    // tab for its progress: neither is in SCAN's or PEEK's entries.
    let entries = match state {
        Some(State::Inflight) | None => with_states(&server, queue, entries).await?,
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
        next_order,
        entries: &entries,
        window: &app.window,
    };
    Ok(html(StatusCode::OK, pages::queue_page(ctx, &page)))
}

/// The entries as each one's DQ.GET finds them: the "all" tab's states
/// (DQ.SCAN without STATE does not say an entry's state) and progress,
/// the inflight tab's progress. A page's worth (50) at most, sent at once
/// on the server's multiplexed connection — one round trip's wait, not
/// 50. (A state in SCAN's entries would spare the "all" tab's.)
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
        Some(m) => Ok(html(
            StatusCode::OK,
            pages::message_page(ctx, &server.addr, queue, &m),
        )),
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
