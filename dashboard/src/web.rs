//! HTTP: the routes. Every request is authenticated first (security.rs);
//! GET reads (views.rs); only POST to `/q/SERVER/QUEUE/action` changes
//! anything (ops.rs), and only when not `--read-only`, from this origin,
//! with a valid CSRF token — checked here before the action is even read
//! — and after a confirmation.

use std::sync::Arc;

use http_body_util::{BodyExt, Limited};
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, StatusCode};

use crate::app::App;
use crate::http::{fail, html, plain, Fail, Resp};
use crate::pages::{self, Ctx};
use crate::render::{decode_part, form_value, now_ms, parse_form};
use crate::security::{self, Csrf};
use crate::{ops, views};

const STYLE: &str = include_str!("../assets/style.css");
const SCRIPT: &str = include_str!("../assets/app.js");

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
        (&Method::GET, [""]) => views::list(app, &ctx, &query).await,
        (&Method::GET, ["static", "style.css"]) => {
            Ok(plain(StatusCode::OK, "text/css; charset=utf-8", STYLE))
        }
        (&Method::GET, ["static", "app.js"]) => Ok(plain(
            StatusCode::OK,
            "text/javascript; charset=utf-8",
            SCRIPT,
        )),
        (&Method::GET, ["healthz"]) => views::healthz(app).await,
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
            views::queue_page(app, &ctx, &decode_part(server), &decode_part(queue), &query).await
        }
        (&Method::GET, ["q", server, queue, "events"]) => {
            crate::events::feed(app, &ctx, &decode_part(server), &decode_part(queue), &query).await
        }
        (&Method::GET, ["q", server, queue, "m", id]) => {
            views::message_page(
                app,
                &ctx,
                &decode_part(server),
                &decode_part(queue),
                &decode_part(id),
            )
            .await
        }
        (&Method::POST, ["q", server, queue, "action"]) => {
            match checked_form(app, req, &cookie).await {
                Ok(form) => {
                    ops::perform(app, &ctx, &decode_part(server), &decode_part(queue), &form).await
                }
                Err(f) => Err(f),
            }
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

/// An action's form, once the POST may be made at all: not `--read-only`
/// (every action changes something), sent from this dashboard's own page
/// (Origin/Referer), at most 64 KiB, and carrying the CSRF token of this
/// browser's cookie. Checked before the action is read, so that a refused
/// POST learns nothing of what it asked.
async fn checked_form(
    app: &App,
    req: Request<hyper::body::Incoming>,
    cookie: &str,
) -> Result<Vec<(String, Vec<u8>)>, Fail> {
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
    Ok(form)
}
