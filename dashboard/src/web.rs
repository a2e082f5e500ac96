//! HTTP: routes, auth, CSRF, the handlers. GET reads; only POST to
//! `/q/SERVER/QUEUE/action` changes anything, and only after a
//! confirmation, with a valid CSRF token, from this origin, when not
//! `--read-only`.

use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use bytes::Bytes;
use dq_client::{admin, ScheduleInfo, State, Stats};
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use maud::Markup;

use crate::backend::{Backend, History, Server, ServerSnap};
use crate::list::{self, ListQuery};
use crate::pages::{self, Ctx, Pending};
use crate::render::{decode_part, form_value, now_ms, parse_form};
use crate::security::{self, Auth, Csrf};
use crate::sharded::{self, Layouts, ShardName};

const STYLE: &str = include_str!("../assets/style.css");
const SCRIPT: &str = include_str!("../assets/app.js");

/// Messages a queue page shows at most.
const PAGE: usize = pages::PEEK_SHOWN;

pub struct App {
    pub backend: Arc<Backend>,
    pub history: Arc<Mutex<History>>,
    pub latest: Arc<RwLock<Option<Arc<Vec<ServerSnap>>>>>,
    pub auth: Auth,
    pub csrf: Csrf,
    pub read_only: bool,
    /// The chart window as the pages name it, e.g. `10m`.
    pub window: String,
    /// Which queues `/metrics` gives series of their own.
    pub metrics: crate::metrics::Selection,
    /// The shard names of the sharded queues met so far.
    pub layouts: Layouts,
}

type Resp = Response<Full<Bytes>>;

/// A request's failure, shown as a page with this status.
struct Fail(StatusCode, String, String);

fn fail(status: StatusCode, title: &str, detail: impl Into<String>) -> Fail {
    Fail(status, title.to_string(), detail.into())
}

fn redis_fail(e: dq_client::Error) -> Fail {
    fail(
        StatusCode::BAD_GATEWAY,
        "The server could not answer",
        e.to_string(),
    )
}

fn html(status: StatusCode, markup: Markup) -> Resp {
    let mut r = Response::new(Full::new(Bytes::from(markup.into_string())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    r
}

fn plain(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Resp {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// Headers every answer carries: no script but ours, no framing, no
/// caching of queue contents, no MIME sniffing.
fn harden(r: &mut Resp) {
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; \
             connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
}

fn header_str(req: &Request<hyper::body::Incoming>, name: header::HeaderName) -> Option<&str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

pub async fn handle(app: Arc<App>, req: Request<hyper::body::Incoming>) -> Resp {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let started = std::time::Instant::now();
    let mut resp = route(&app, req).await;
    harden(&mut resp);
    tracing::debug!(%method, path = %path, status = resp.status().as_u16(),
        ms = started.elapsed().as_millis() as u64, "request");
    resp
}

async fn route(app: &Arc<App>, req: Request<hyper::body::Incoming>) -> Resp {
    if !app.auth.allows(
        req.headers()
            .get(header::AUTHORIZATION)
            .map(|v| v.as_bytes()),
    ) {
        let mut r = plain(
            StatusCode::UNAUTHORIZED,
            "text/plain; charset=utf-8",
            "401 Unauthorized: this dashboard needs credentials (see --token / --basic-auth)\n",
        );
        let challenge = if app.auth.uses_basic() {
            "Basic realm=\"dq dashboard\", charset=\"UTF-8\""
        } else {
            "Bearer realm=\"dq dashboard\""
        };
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static(challenge),
        );
        return r;
    }

    // The CSRF cookie: the browser's own, or a new one set with this answer.
    let cookie = security::cookie(header_str(&req, header::COOKIE), security::COOKIE)
        .filter(|c| Csrf::valid_cookie(c))
        .map(str::to_string);
    let (cookie, set_cookie) = match cookie {
        Some(c) => (c, false),
        None => (Csrf::new_cookie(), true),
    };
    let ctx = Ctx {
        read_only: app.read_only,
        csrf: app.csrf.token(&cookie),
        cluster: app.backend.is_cluster(),
        now: now_ms(),
    };

    let path = req.uri().path().to_string();
    let query = parse_form(req.uri().query().unwrap_or("").as_bytes());
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let method = req.method().clone();

    let result: Result<Resp, Fail> = match (&method, segments.as_slice()) {
        (&Method::GET, [""]) => list(app, &ctx, &query).await,
        (&Method::GET, ["static", "style.css"]) => {
            Ok(plain(StatusCode::OK, "text/css; charset=utf-8", STYLE))
        }
        (&Method::GET, ["static", "app.js"]) => Ok(plain(
            StatusCode::OK,
            "text/javascript; charset=utf-8",
            SCRIPT,
        )),
        (&Method::GET, ["healthz"]) => healthz(app).await,
        (&Method::GET, ["metrics"]) => {
            // `?queue=GLOB` (repeatable): a scrape config's `params:` picks
            // the queues that get series of their own.
            let scrape: Vec<Vec<u8>> = query
                .iter()
                .filter(|(k, _)| k == "queue")
                .map(|(_, v)| v.clone())
                .collect();
            let snaps = app.backend.snapshot().await;
            Ok(plain(
                StatusCode::OK,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                crate::metrics::render(&snaps, &app.metrics, &scrape),
            ))
        }
        (&Method::GET, ["q", server, queue]) => {
            queue_page(app, &ctx, &decode_part(server), &decode_part(queue), &query).await
        }
        (&Method::GET, ["q", server, queue, "m", id]) => {
            message_page(
                app,
                &ctx,
                &decode_part(server),
                &decode_part(queue),
                &decode_part(id),
            )
            .await
        }
        (&Method::POST, ["q", server, queue, "action"]) => {
            let (server, queue) = (decode_part(server), decode_part(queue));
            action(app, &ctx, req, &cookie, &server, &queue).await
        }
        (_, ["q", _, _, "action"]) => Err(fail(
            StatusCode::METHOD_NOT_ALLOWED,
            "Method not allowed",
            "Actions are POSTs from the dashboard's own forms.",
        )),
        (&Method::GET, _) => Err(fail(
            StatusCode::NOT_FOUND,
            "Not found",
            "There is no such page.",
        )),
        _ => Err(fail(
            StatusCode::METHOD_NOT_ALLOWED,
            "Method not allowed",
            "Only GET, and POST for actions.",
        )),
    };
    let mut resp = match result {
        Ok(r) => r,
        Err(Fail(status, title, detail)) => {
            if status.is_server_error() {
                tracing::warn!(status = status.as_u16(), path = %path, error = %detail, "request failed");
            }
            html(status, pages::error_page(status.as_u16(), &title, &detail))
        }
    };
    if set_cookie {
        let value = format!(
            "{}={cookie}; Path=/; HttpOnly; SameSite=Strict",
            security::COOKIE
        );
        if let Ok(v) = HeaderValue::from_str(&value) {
            resp.headers_mut().insert(header::SET_COOKIE, v);
        }
    }
    resp
}

async fn healthz(app: &App) -> Result<Resp, Fail> {
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

fn utf8(bytes: &[u8], what: &str) -> Result<String, Fail> {
    String::from_utf8(bytes.to_vec()).map_err(|_| {
        fail(
            StatusCode::BAD_REQUEST,
            "Bad request",
            format!("{what} is not UTF-8"),
        )
    })
}

fn server_of(app: &App, server: &[u8]) -> Result<Arc<crate::backend::Server>, Fail> {
    let name = utf8(server, "the server")?;
    app.backend.server(&name).ok_or_else(|| {
        fail(
            StatusCode::NOT_FOUND,
            "Unknown server",
            format!("{name} is not a server this dashboard reads (the cluster may have changed)."),
        )
    })
}

/// Whether `queue` exists on `server`: DQ.QUEUES lists it. The sampler's
/// last list answers first; DQ.QUEUES MATCH of the exact name is asked
/// when it does not know (a one-name answer, however many queues).
async fn queue_exists(
    app: &App,
    server: &crate::backend::Server,
    queue: &[u8],
) -> Result<bool, Fail> {
    let known = app
        .latest
        .read()
        .ok()
        .and_then(|l| l.clone())
        .is_some_and(|snaps| {
            snaps
                .iter()
                .any(|s| s.addr == server.addr && s.queues.iter().any(|(q, _)| q == queue))
        });
    if known {
        return Ok(true);
    }
    let mut con = server.con.clone();
    let names = admin::queues_matching(&mut con, &admin::glob_escape(queue))
        .await
        .map_err(redis_fail)?;
    Ok(names.iter().any(|n| n == queue))
}

/// The queue list: one DQ.QUEUES WITHSTATS per server (with MATCH for a
/// name filter) and INFO dq, then the state filter, the sort and the page
/// here; the history is looked up for the page's rows only.
async fn list(app: &App, ctx: &Ctx, query: &[(String, Vec<u8>)]) -> Result<Resp, Fail> {
    let view = ListQuery::parse(query)
        .map_err(|(title, detail)| fail(StatusCode::BAD_REQUEST, title, detail))?;
    let all = app.backend.servers();
    let many_servers = all.len() > 1;
    let servers = match &view.server {
        Some(name) => vec![server_of(app, name.as_bytes())?],
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

async fn queue_page(
    app: &App,
    ctx: &Ctx,
    server: &[u8],
    queue: &[u8],
    query: &[(String, Vec<u8>)],
) -> Result<Resp, Fail> {
    let server = server_of(app, server)?;
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
    if !queue_exists(app, &server, queue).await? {
        return Err(fail(
            StatusCode::NOT_FOUND,
            "Unknown queue",
            format!(
                "{} has no queue named {}.",
                server.addr,
                crate::render::label(queue, 200)
            ),
        ));
    }
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
            .map_err(|e| match e {
                dq_client::Error::Redis(ref r)
                    if r.kind()
                        == redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError) =>
                {
                    fail(StatusCode::BAD_REQUEST, "Bad cursor", e.to_string())
                }
                e => redis_fail(e),
            })?;
        entries.append(&mut got);
        next = c;
        if next == 0 || entries.len() >= PAGE {
            break;
        }
    }
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

/// A sharded queue as its masters hold it now (see sharded.rs).
struct ShardSet {
    name: ShardName,
    shards: Vec<ShardAt>,
    /// Masters that could not be read, with why: their shards are unknown.
    unreadable: Vec<(String, String)>,
}

/// A queue (a shard) to send a command to, and the server to send it to.
type Target<'a> = (&'a [u8], Arc<Server>);

/// One shard: where it lives and what DQ.QUEUES WITHSTATS said of it.
struct ShardAt {
    name: Vec<u8>,
    /// The master that lists it; for a shard no master lists (never used
    /// yet), the one that would hold it. None: no known master serves its
    /// slot (the cluster is changing).
    server: Option<Arc<Server>>,
    /// Its DQ.STATS record; None while no master lists it.
    stats: Option<Stats>,
}

impl ShardSet {
    fn view(&self) -> pages::Sharding {
        let infos = || self.shards.iter().filter_map(|s| s.stats.as_ref());
        let mut rates: Vec<(String, usize)> = Vec::new();
        let mut max_inflights: Vec<(u64, usize)> = Vec::new();
        for info in infos() {
            if let Some(r) = &info.rate {
                match rates.iter_mut().find(|(t, _)| t == r) {
                    Some((_, n)) => *n += 1,
                    None => rates.push((r.clone(), 1)),
                }
            }
            if let Some(m) = info.max_inflight {
                match max_inflights.iter_mut().find(|(v, _)| *v == m) {
                    Some((_, n)) => *n += 1,
                    None => max_inflights.push((m, 1)),
                }
            }
        }
        pages::Sharding {
            base: self.name.base.clone(),
            index: self.name.index,
            count: self.name.count,
            present: infos().count(),
            paused: infos().filter(|i| i.paused).count(),
            paused_until: infos()
                .filter(|i| i.paused)
                .map(|i| i.paused_until)
                .collect(),
            throttled: infos().map(|i| i.throttled).sum(),
            rates,
            max_inflights,
            unreadable: self.unreadable.clone(),
        }
    }

    /// Every shard with the master to send it a command, or why not:
    /// acting on some shards only would leave the queue half paused.
    fn targets(&self) -> Result<Vec<Target<'_>>, Fail> {
        if let Some((addr, e)) = self.unreadable.first() {
            return Err(fail(
                StatusCode::BAD_GATEWAY,
                "The server could not answer",
                format!(
                    "Master {addr} could not be read ({e}), so the shards of {} it holds are \
                     unknown. Nothing was done.",
                    self.name.base
                ),
            ));
        }
        self.shards
            .iter()
            .map(|s| match &s.server {
                Some(server) => Ok((s.name.as_slice(), server.clone())),
                None => Err(fail(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "Cluster changing",
                    format!(
                        "No known master serves the slot of shard {}. Nothing was done; \
                         try again once the cluster has settled.",
                        crate::render::label(&s.name, 200)
                    ),
                )),
            })
            .collect()
    }
}

/// When `queue` is a shard of a sharded queue: every shard of it, read
/// with one DQ.QUEUES MATCH WITHSTATS per master (on the queue's own
/// server only, outside a cluster, where a sharded queue lives on one).
async fn find_shards(app: &App, server: &Arc<Server>, queue: &[u8]) -> Option<ShardSet> {
    let (name, layout) = app.layouts.shard(queue).await?;
    let cluster = app.backend.is_cluster();
    let servers = if cluster {
        app.backend.servers()
    } else {
        vec![server.clone()]
    };
    let pattern = sharded::pattern(&name.base, name.count);
    let mut reads = tokio::task::JoinSet::new();
    for s in servers {
        let pattern = pattern.clone();
        reads.spawn(async move {
            let mut con = s.con.clone();
            let got = admin::queues_with_stats(&mut con, Some(&pattern)).await;
            (s, got)
        });
    }
    let mut listed: std::collections::HashMap<Vec<u8>, (Arc<Server>, Stats)> =
        std::collections::HashMap::new();
    let mut unreadable = Vec::new();
    while let Some(done) = reads.join_next().await {
        match done {
            Ok((s, Ok(queues))) => {
                for (name, stats) in queues {
                    listed.insert(name, (s.clone(), stats));
                }
            }
            Ok((s, Err(e))) => unreadable.push((s.addr.clone(), e.to_string())),
            Err(e) => unreadable.push(("?".to_string(), e.to_string())),
        }
    }
    unreadable.sort();
    let shards = layout
        .names()
        .iter()
        .map(|n| {
            let n = n.as_bytes();
            match listed.remove(n) {
                Some((s, stats)) => ShardAt {
                    name: n.to_vec(),
                    server: Some(s),
                    stats: Some(stats),
                },
                None => ShardAt {
                    name: n.to_vec(),
                    server: if cluster {
                        app.backend.master_of_key(n)
                    } else {
                        Some(server.clone())
                    },
                    stats: None,
                },
            }
        })
        .collect();
    Some(ShardSet {
        name,
        shards,
        unreadable,
    })
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

async fn message_page(
    app: &App,
    ctx: &Ctx,
    server: &[u8],
    queue: &[u8],
    id: &[u8],
) -> Result<Resp, Fail> {
    let server = server_of(app, server)?;
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

fn check_id(id: &[u8]) -> Result<(), Fail> {
    if id.is_empty() || id.len() > 1024 {
        return Err(fail(
            StatusCode::BAD_REQUEST,
            "Bad id",
            "An id is 1 to 1024 bytes.",
        ));
    }
    Ok(())
}

/// The longest a schedule name may be (DQ.SCHEDULE refuses longer).
const MAX_SCHEDULE_NAME: usize = 1007;

/// What an action POST asks for, its fields checked.
enum Op {
    Redrive(Vec<u8>),
    RedriveAll,
    Cancel(Vec<u8>),
    Purge(State),
    Unschedule(Vec<u8>),
    /// `for_ms` None: until DQ.RESUME. `text` is the length as typed.
    Pause {
        for_ms: Option<u64>,
        text: String,
    },
    Resume,
}

impl Op {
    fn parse(form: &[(String, Vec<u8>)]) -> Result<Op, Fail> {
        let bad_form = |detail: &str| fail(StatusCode::BAD_REQUEST, "Bad form", detail);
        let op = utf8(form_value(form, "op").unwrap_or(b""), "op")?;
        // Ids and schedule names travel percent-encoded, as in URLs: any
        // bytes survive the form.
        let encoded =
            |name: &str| form_value(form, name).map(|v| decode_part(&String::from_utf8_lossy(v)));
        let id = || -> Result<Vec<u8>, Fail> {
            let id = encoded("id").ok_or_else(|| bad_form("This action needs an id."))?;
            check_id(&id)?;
            Ok(id)
        };
        Ok(match op.as_str() {
            "redrive" => Op::Redrive(id()?),
            "redrive-all" => Op::RedriveAll,
            "cancel" => Op::Cancel(id()?),
            "purge" => {
                let st = form_value(form, "state").ok_or_else(|| {
                    bad_form("Purge needs a state: delayed, ready, inflight or dead.")
                })?;
                Op::Purge(
                    utf8(st, "state")?
                        .parse::<State>()
                        .map_err(|e| fail(StatusCode::BAD_REQUEST, "Bad state", e))?,
                )
            }
            "unschedule" => {
                let name = encoded("schedule")
                    .filter(|n| !n.is_empty() && n.len() <= MAX_SCHEDULE_NAME)
                    .ok_or_else(|| {
                        bad_form("Removing a schedule needs its name (1 to 1007 bytes).")
                    })?;
                Op::Unschedule(name)
            }
            "pause" => {
                let text = utf8(form_value(form, "for").unwrap_or(b""), "for")?
                    .trim()
                    .to_string();
                let for_ms = pause_length(&text, now_ms())
                    .map_err(|e| fail(StatusCode::BAD_REQUEST, "Bad pause length", e))?;
                Op::Pause { for_ms, text }
            }
            "resume" => Op::Resume,
            _ => {
                return Err(fail(
                    StatusCode::BAD_REQUEST,
                    "Unknown action",
                    "The action must be redrive, redrive-all, cancel, purge, unschedule, \
                     pause or resume.",
                ))
            }
        })
    }

    fn key(&self) -> &'static str {
        match self {
            Op::Redrive(_) => "redrive",
            Op::RedriveAll => "redrive-all",
            Op::Cancel(_) => "cancel",
            Op::Purge(_) => "purge",
            Op::Unschedule(_) => "unschedule",
            Op::Pause { .. } => "pause",
            Op::Resume => "resume",
        }
    }

    /// The confirmation form's fields besides op, csrf and confirm.
    fn fields(&self) -> Vec<(&'static str, String)> {
        match self {
            Op::Redrive(id) | Op::Cancel(id) => vec![("id", crate::render::url_part(id))],
            Op::Purge(st) => vec![("state", st.as_str().to_string())],
            Op::Unschedule(name) => vec![("schedule", crate::render::url_part(name))],
            Op::Pause { text, .. } if !text.is_empty() => vec![("for", text.clone())],
            _ => Vec::new(),
        }
    }

    /// Whether it deletes or stops something (a red button).
    fn danger(&self) -> bool {
        !matches!(self, Op::Redrive(_) | Op::RedriveAll | Op::Resume)
    }
}

/// The length of a pause as typed: empty for until DQ.RESUME; else a
/// duration (`90s`, `10m`, `1h 30m`, `2d`) or a whole number of
/// milliseconds, as DQ.PAUSE FOR takes, from 1 ms to what the server's
/// clock can hold.
pub fn pause_length(text: &str, now: u64) -> Result<Option<u64>, String> {
    const MAX_TIME_MS: u64 = (1 << 53) - 1;
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    let ms = if text.bytes().all(|b| b.is_ascii_digit()) {
        text.parse::<u64>().ok()
    } else {
        humantime::parse_duration(text)
            .ok()
            .and_then(|d| u64::try_from(d.as_millis()).ok())
    };
    match ms {
        Some(ms) if ms >= 1 && ms <= MAX_TIME_MS.saturating_sub(now) => Ok(Some(ms)),
        Some(_) => Err(format!(
            "'{text}': a pause lasts at least 1 ms and ends before the year 287,000"
        )),
        None => Err(format!(
            "'{text}' is not a length: give a duration such as 90s, 10m, 1h 30m or 2d, a \
             number of milliseconds, or nothing to pause until resumed"
        )),
    }
}

/// A pause's length for a sentence: `until resumed`, `for 10m`.
fn pause_words(for_ms: Option<u64>) -> String {
    match for_ms {
        None => "until resumed".to_string(),
        Some(ms) => format!(
            "for {}",
            humantime::format_duration(Duration::from_millis(ms))
        ),
    }
}

/// A failure of DQ.PAUSE or DQ.RESUME on the `done`-th of `targets`: the
/// server's own refusal is the form's fault (400); anything else a 502
/// that says how far it got.
fn flow_fail(
    verb: &str,
    done: usize,
    targets: &[Target],
    sharded: bool,
    e: dq_client::Error,
) -> Fail {
    let refused = matches!(&e, dq_client::Error::Redis(r)
        if r.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError));
    let status = if refused {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::BAD_GATEWAY
    };
    let title = if refused {
        "Refused by the server"
    } else {
        "The server could not answer"
    };
    let (queue, server) = &targets[done.min(targets.len() - 1)];
    let detail = if sharded {
        format!(
            "{verb} {done} of {} shards, then shard {} on {} answered: {e}. {}",
            targets.len(),
            crate::render::label(queue, 200),
            server.addr,
            if done == 0 {
                "Nothing was changed."
            } else {
                "Do it again to reach every shard."
            }
        )
    } else {
        e.to_string()
    };
    fail(status, title, detail)
}

async fn action(
    app: &App,
    ctx: &Ctx,
    req: Request<hyper::body::Incoming>,
    cookie: &str,
    server: &[u8],
    queue: &[u8],
) -> Result<Resp, Fail> {
    if app.read_only {
        return Err(fail(
            StatusCode::FORBIDDEN,
            "Read-only",
            "This dashboard runs with --read-only: it changes nothing.",
        ));
    }
    let host = header_str(&req, header::HOST).map(str::to_string);
    let origin = header_str(&req, header::ORIGIN).map(str::to_string);
    let referer = header_str(&req, header::REFERER).map(str::to_string);
    let had_cookie = security::cookie(header_str(&req, header::COOKIE), security::COOKIE).is_some();
    if !security::same_origin(host.as_deref(), origin.as_deref(), referer.as_deref()) {
        return Err(fail(
            StatusCode::FORBIDDEN,
            "Refused",
            "This form was not sent from this dashboard (Origin/Referer).",
        ));
    }
    let body = Limited::new(req.into_body(), 64 * 1024)
        .collect()
        .await
        .map_err(|_| {
            fail(
                StatusCode::PAYLOAD_TOO_LARGE,
                "Too large",
                "A form is at most 64 KiB.",
            )
        })?
        .to_bytes();
    let form = parse_form(&body);
    if !had_cookie || !app.csrf.check(Some(cookie), form_value(&form, "csrf")) {
        return Err(fail(
            StatusCode::FORBIDDEN,
            "Refused",
            "The form's CSRF token is missing or stale: reload the page and try again.",
        ));
    }
    let server = server_of(app, server)?;
    let op = Op::parse(&form)?;
    let confirmed = form_value(&form, "confirm") == Some(b"yes");
    let qname = crate::render::label(queue, 200);
    let queue_back = pages::queue_url(&server.addr, queue);
    if !queue_exists(app, &server, queue).await? {
        return Err(fail(
            StatusCode::NOT_FOUND,
            "Unknown queue",
            format!("{} has no queue named {qname}.", server.addr),
        ));
    }
    // Pause and resume act on every shard of a sharded queue.
    let shards = match op {
        Op::Pause { .. } | Op::Resume => find_shards(app, &server, queue).await,
        _ => None,
    };
    let targets: Vec<Target> = match &shards {
        Some(set) => set.targets()?,
        None => vec![(queue, server.clone())],
    };
    let whole = match &shards {
        Some(set) => format!(
            "all {} shards of sharded queue {}",
            set.shards.len(),
            crate::render::label(set.name.base.as_bytes(), 200)
        ),
        None => format!("queue {qname}"),
    };
    let mut con = server.con.clone();
    if !confirmed {
        let (description, button, back) = match &op {
            Op::Redrive(id) => (
                format!(
                    "Redrive dead message {} of queue {qname}: back to ready now, with a fresh attempt budget?",
                    crate::render::label(id, 200)
                ),
                "Yes, redrive it".to_string(),
                pages::message_url(&server.addr, queue, id),
            ),
            Op::RedriveAll => (
                format!("Redrive every dead message of queue {qname} back to ready now?"),
                "Yes, redrive all".to_string(),
                queue_back.clone(),
            ),
            Op::Cancel(id) => (
                format!(
                    "Cancel message {} of queue {qname}: delete it, whatever its state? This cannot be undone.",
                    crate::render::label(id, 200)
                ),
                "Yes, cancel it".to_string(),
                pages::message_url(&server.addr, queue, id),
            ),
            Op::Purge(st) => (
                format!(
                    "Purge queue {qname}: delete every {} message? This cannot be undone.",
                    st.as_str()
                ),
                "Yes, purge".to_string(),
                queue_back.clone(),
            ),
            Op::Unschedule(name) => {
                let known = admin::schedules(&mut con, queue)
                    .await
                    .map_err(redis_fail)?
                    .into_iter()
                    .find(|s| s.name == *name)
                    .ok_or_else(|| {
                        fail(
                            StatusCode::NOT_FOUND,
                            "Unknown schedule",
                            format!(
                                "Queue {qname} on {} has no schedule named {}.",
                                server.addr,
                                crate::render::label(name, 200)
                            ),
                        )
                    })?;
                (
                    format!(
                        "Remove schedule {} ({}{}) of queue {qname}? It makes no more runs; the \
                         messages its runs already made stay in the queue.",
                        crate::render::label(name, 200),
                        known.spec,
                        if known.spec.starts_with("cron") {
                            format!(", {}", known.tz)
                        } else {
                            String::new()
                        }
                    ),
                    "Yes, remove it".to_string(),
                    queue_back.clone(),
                )
            }
            Op::Pause { for_ms, .. } => (
                format!(
                    "Pause {whole} {}? POP delivers nothing from {} until then; ADD, the timer, \
                     leases and schedules go on.",
                    pause_words(*for_ms),
                    if shards.is_some() { "them" } else { "it" }
                ),
                if shards.is_some() {
                    format!("Yes, pause all {}", targets.len())
                } else {
                    "Yes, pause it".to_string()
                },
                queue_back.clone(),
            ),
            Op::Resume => (
                format!(
                    "Resume {whole}? POP delivers from {} again at once, blocked POPs first.",
                    if shards.is_some() { "them" } else { "it" }
                ),
                if shards.is_some() {
                    format!("Yes, resume all {}", targets.len())
                } else {
                    "Yes, resume it".to_string()
                },
                queue_back.clone(),
            ),
        };
        let pending = Pending {
            server: &server.addr,
            queue,
            op: op.key(),
            fields: op.fields(),
            description,
            button,
            danger: op.danger(),
            back,
        };
        return Ok(html(StatusCode::OK, pages::confirm_page(ctx, &pending)));
    }
    let (what, back) = match &op {
        Op::Redrive(id) => {
            let n = admin::redrive_ids(&mut con, queue, &[id])
                .await
                .map_err(redis_fail)?;
            (
                format!(
                    "Redrove {n} message{} (DQ.REDRIVE replied {n}){}.",
                    plural(n),
                    if n == 0 {
                        ": it was no longer dead"
                    } else {
                        ""
                    }
                ),
                pages::message_url(&server.addr, queue, id),
            )
        }
        Op::RedriveAll => {
            let n = admin::redrive_all(&mut con, queue)
                .await
                .map_err(redis_fail)?;
            (
                format!(
                    "Redrove {n} message{} (DQ.REDRIVE replied {n} in all).",
                    plural(n)
                ),
                queue_back,
            )
        }
        Op::Cancel(id) => {
            let n = admin::cancel(&mut con, queue, &[id])
                .await
                .map_err(redis_fail)?;
            (
                format!(
                    "Cancelled {n} message{} (DQ.CANCEL replied {n}){}.",
                    plural(n),
                    if n == 0 { ": it was already gone" } else { "" }
                ),
                queue_back,
            )
        }
        Op::Purge(st) => {
            let n = admin::purge(&mut con, queue, Some(*st))
                .await
                .map_err(redis_fail)?;
            (
                format!(
                    "Purged {n} {} message{} (DQ.PURGE replied {n}).",
                    st.as_str(),
                    plural(n)
                ),
                queue_back,
            )
        }
        Op::Unschedule(name) => {
            let n = admin::unschedule(&mut con, queue, &[name])
                .await
                .map_err(redis_fail)?;
            let name = crate::render::label(name, 200);
            (
                if n == 0 {
                    format!(
                        "Removed no schedule (DQ.UNSCHEDULE replied 0): {name} was already gone."
                    )
                } else {
                    format!("Removed schedule {name} (DQ.UNSCHEDULE replied {n}).")
                },
                queue_back,
            )
        }
        Op::Pause { for_ms, .. } => {
            for (done, (q, s)) in targets.iter().enumerate() {
                let mut con = s.con.clone();
                let length = for_ms.map(Duration::from_millis);
                if let Err(e) = admin::pause(&mut con, q, length).await {
                    return Err(flow_fail("Paused", done, &targets, shards.is_some(), e));
                }
            }
            let until = for_ms.map_or(String::new(), |ms| {
                format!(
                    ", until {}",
                    crate::render::time(now_ms().saturating_add(ms))
                )
            });
            let each = if shards.is_some() { " on each" } else { "" };
            (
                format!(
                    "Paused {whole} {}{until} (DQ.PAUSE replied OK{each}).",
                    pause_words(*for_ms)
                ),
                queue_back,
            )
        }
        Op::Resume => {
            let mut were_paused = 0u64;
            for (done, (q, s)) in targets.iter().enumerate() {
                let mut con = s.con.clone();
                match admin::resume(&mut con, q).await {
                    Ok(was) => were_paused += u64::from(was),
                    Err(e) => {
                        return Err(flow_fail("Resumed", done, &targets, shards.is_some(), e))
                    }
                }
            }
            let n = targets.len() as u64;
            (
                match (&shards, were_paused) {
                    (Some(_), k) => format!(
                        "Resumed {whole}: {k} {} paused (DQ.RESUME replied 1 on {k}, 0 on {}).",
                        if k == 1 { "was" } else { "were" },
                        n - k
                    ),
                    (None, 1) => format!("Resumed queue {qname} (DQ.RESUME replied 1)."),
                    (None, _) => format!("Queue {qname} was not paused (DQ.RESUME replied 0)."),
                },
                queue_back,
            )
        }
    };
    tracing::info!(server = %server.addr, queue = %String::from_utf8_lossy(queue), op = op.key(),
        fields = ?op.fields(), result = %what, "action");
    Ok(html(
        StatusCode::OK,
        pages::done_page(&server.addr, queue, &what, &back),
    ))
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
