//! HTTP: routes, auth, CSRF, the handlers. GET reads; only POST to
//! `/q/SERVER/QUEUE/action` changes anything, and only after a
//! confirmation, with a valid CSRF token, from this origin, when not
//! `--read-only`.

use std::sync::{Arc, Mutex, RwLock};

use bytes::Bytes;
use dq_client::{admin, State};
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use maud::Markup;

use crate::backend::{Backend, History, ServerSnap};
use crate::list::{self, ListQuery};
use crate::pages::{self, Ctx, Pending};
use crate::render::{decode_part, form_value, now_ms, parse_form};
use crate::security::{self, Auth, Csrf};

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
                .any(|s| s.addr == server.addr && s.queues.iter().any(|(n, _)| n == queue))
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
    let page = pages::QueuePage {
        server: &server.addr,
        name: queue,
        stats: &stats,
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
    let op = utf8(form_value(&form, "op").unwrap_or(b""), "op")?;
    let id = form_value(&form, "id").map(|v| decode_part(&String::from_utf8_lossy(v)));
    let state = match form_value(&form, "state") {
        None => None,
        Some(s) => Some(
            utf8(s, "state")?
                .parse::<State>()
                .map_err(|e| fail(StatusCode::BAD_REQUEST, "Bad state", e))?,
        ),
    };
    let confirmed = form_value(&form, "confirm") == Some(b"yes");
    let qname = crate::render::label(queue, 200);
    let queue_back = pages::queue_url(&server.addr, queue);
    let need_id = |id: &Option<Vec<u8>>| -> Result<Vec<u8>, Fail> {
        let id = id.clone().ok_or_else(|| {
            fail(
                StatusCode::BAD_REQUEST,
                "Bad form",
                "This action needs an id.",
            )
        })?;
        check_id(&id)?;
        Ok(id)
    };
    let (description, button, back) = match op.as_str() {
        "redrive" => {
            let id = need_id(&id)?;
            (
                format!(
                    "Redrive dead message {} of queue {qname}: back to ready now, with a fresh attempt budget?",
                    crate::render::label(&id, 200)
                ),
                "Yes, redrive it",
                pages::message_url(&server.addr, queue, &id),
            )
        }
        "redrive-all" => (
            format!("Redrive every dead message of queue {qname} back to ready now?"),
            "Yes, redrive all",
            queue_back.clone(),
        ),
        "cancel" => {
            let id = need_id(&id)?;
            (
                format!(
                    "Cancel message {} of queue {qname}: delete it, whatever its state? This cannot be undone.",
                    crate::render::label(&id, 200)
                ),
                "Yes, cancel it",
                pages::message_url(&server.addr, queue, &id),
            )
        }
        "purge" => {
            let st = state.ok_or_else(|| {
                fail(
                    StatusCode::BAD_REQUEST,
                    "Bad form",
                    "Purge needs a state: delayed, ready, inflight or dead.",
                )
            })?;
            (
                format!(
                    "Purge queue {qname}: delete every {} message? This cannot be undone.",
                    st.as_str()
                ),
                "Yes, purge",
                queue_back.clone(),
            )
        }
        _ => {
            return Err(fail(
                StatusCode::BAD_REQUEST,
                "Unknown action",
                "The action must be redrive, redrive-all, cancel or purge.",
            ))
        }
    };
    if !queue_exists(app, &server, queue).await? {
        return Err(fail(
            StatusCode::NOT_FOUND,
            "Unknown queue",
            format!("{} has no queue named {qname}.", server.addr),
        ));
    }
    if !confirmed {
        let pending = Pending {
            server: &server.addr,
            queue,
            op: &op,
            id: id.as_deref(),
            state,
            description,
            button,
            back,
        };
        return Ok(html(StatusCode::OK, pages::confirm_page(ctx, &pending)));
    }
    let mut con = server.con.clone();
    let (what, back) = match op.as_str() {
        "redrive" => {
            let id = need_id(&id)?;
            let n = admin::redrive_ids(&mut con, queue, &[&id])
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
                pages::message_url(&server.addr, queue, &id),
            )
        }
        "redrive-all" => {
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
        "cancel" => {
            let id = need_id(&id)?;
            let n = admin::cancel(&mut con, queue, &[&id])
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
        _ => {
            let st = state
                .ok_or_else(|| fail(StatusCode::BAD_REQUEST, "Bad form", "Purge needs a state."))?;
            let n = admin::purge(&mut con, queue, Some(st))
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
    };
    tracing::info!(server = %server.addr, queue = %String::from_utf8_lossy(queue), op = %op,
        id = ?id.as_deref().map(String::from_utf8_lossy), result = %what, "action");
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
