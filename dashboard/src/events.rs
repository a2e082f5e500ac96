//! A queue's event log (DQ.EVENTS, kept when `DQ.CONFIG queue SET EVENTS
//! n` asks for it): the live feed at `/q/SERVER/QUEUE/events` (newest
//! first, filtered by type, paged older by seq) and the history of one
//! message on its page. Both read through dq-client's `admin::events` and
//! its typed `Event`, `Error::Gap` and `EventKind`: no parser of their own.
//!
//! The server reads its log oldest first, after a seq; newest first is
//! two reads here: one without AFTER (COUNT 1) gives the last seq and the
//! oldest kept, then one reads the window that ends at the page's newest.

use dq_client::{admin, Error, Event, EventKind, QueueConfig};
use hyper::StatusCode;
use maud::{html, Markup};

use crate::app::App;
use crate::http::{fail, html as html_resp, redis_fail, utf8, Fail, Resp};
use crate::pages::{self, message_url, queue_url, Ctx};
use crate::render::{count, form_value, label, relative, time, url_part};

/// Events the feed reads for a page (one DQ.EVENTS), newest first.
pub const FEED_READ: usize = 1000;
/// Rows the feed shows at most: the newest of those read that pass the
/// type filter.
pub const FEED_SHOWN: usize = 100;
/// Events a message's history looks through: the newest of the log
/// (one DQ.EVENTS, COUNT's bound).
pub const HISTORY_READ: usize = dq_client::MAX_EVENTS_COUNT;

pub fn events_url(server: &str, queue: &[u8]) -> String {
    format!("{}/events", queue_url(server, queue))
}

/// What the queue's log holds now: EVENTS in force, the newest seq
/// written, the oldest kept (`None`: none kept).
struct Log {
    keeps: u64,
    last_seq: u64,
    oldest: Option<u64>,
}

impl Log {
    async fn read(
        con: &mut redis::aio::ConnectionManager,
        queue: &[u8],
        config: &QueueConfig,
    ) -> Result<Log, Fail> {
        // Without AFTER there is no GAP: the oldest kept and the last seq.
        let first = admin::events(con, queue, None, 1)
            .await
            .map_err(redis_fail)?;
        Ok(Log {
            keeps: config.events,
            last_seq: first.last_seq,
            oldest: first.events.first().map(|e| e.seq),
        })
    }

    /// Keeping none, and holding none: there is nothing to show.
    fn off(&self) -> bool {
        self.keeps == 0 && self.oldest.is_none()
    }
}

/// The events after `after` up to seq `end`, at most `count`; when the
/// server says events after `after` were trimmed (GAP, typed by
/// dq-client), the ones kept from the oldest on, and that oldest.
async fn window(
    con: &mut redis::aio::ConnectionManager,
    queue: &[u8],
    after: u64,
    end: u64,
    count: usize,
) -> Result<(Vec<Event>, Option<u64>), Fail> {
    let (page, gap) = match admin::events(con, queue, Some(after), count).await {
        Ok(page) => (page, None),
        Err(Error::Gap { oldest, .. }) => {
            let page = admin::events(con, queue, Some(oldest.saturating_sub(1)), count)
                .await
                .map_err(redis_fail)?;
            (page, Some(oldest))
        }
        Err(e) => return Err(redis_fail(e)),
    };
    let events = page.events.into_iter().filter(|e| e.seq <= end).collect();
    Ok((events, gap))
}

/// How to turn the log on: the command, and what it keeps.
fn turn_on(queue: &[u8]) -> Markup {
    html! {
        "Turn it on with "
        code { "DQ.CONFIG " (label(queue, 80)) " SET EVENTS 10000" }
        " (keeps the queue's last 10,000 events; any n up to 100,000,000)."
    }
}

fn kind_badge(kind: &EventKind) -> Markup {
    html! { span class=(format!("badge ev-{}", kind.as_str())) { (kind.as_str()) } }
}

/// One row of a feed or a history: seq, when, type, message, attempt,
/// detail.
fn event_row(server: &str, queue: &[u8], e: &Event, now: u64, with_id: bool) -> Markup {
    html! {
        tr data-seq=(e.seq) {
            td.num.seq { "#" (e.seq) }
            td.time title=(time(e.at)) { (relative(e.at, now)) }
            td.type data-type=(e.kind.as_str()) { (kind_badge(&e.kind)) }
            @if with_id {
                td.id {
                    @match &e.id {
                        Some(id) => a href=(message_url(server, queue, id)) { (label(id, 60)) },
                        None => span.muted { "the queue" },
                    }
                }
            }
            td.num.attempt { @if let Some(a) = e.attempt { (a) } }
            td.detail { @if let Some(d) = &e.detail { code title=(label(d, 1000)) { (label(d, 90)) } } }
        }
    }
}

/// GET /q/SERVER/QUEUE/events[?type=T][&before=SEQ]: the newest events
/// first (of the newest [`FEED_READ`], those of type T, at most
/// [`FEED_SHOWN`]); `before` pages older. Auto-refreshed on the newest
/// page only: an older page stays where it was asked.
pub async fn feed(
    app: &App,
    ctx: &Ctx,
    server: &[u8],
    queue: &[u8],
    query: &[(String, Vec<u8>)],
) -> Result<Resp, Fail> {
    let server = app.server_of(server)?;
    let kind = match form_value(query, "type") {
        None => None,
        Some(t) if t.is_empty() || t == b"all" => None,
        Some(t) => {
            let t = utf8(t, "type")?;
            match t.parse::<EventKind>() {
                Ok(EventKind::Other(_)) | Err(_) => {
                    let known: Vec<&str> = EventKind::ALL.iter().map(EventKind::as_str).collect();
                    return Err(fail(
                        StatusCode::BAD_REQUEST,
                        "Bad type",
                        format!("type '{t}' is not an event type: use {}", known.join(", ")),
                    ));
                }
                Ok(k) => Some(k),
            }
        }
    };
    let before = match form_value(query, "before") {
        None => None,
        Some(b) => Some(
            utf8(b, "before")?
                .parse::<u64>()
                .ok()
                .filter(|&b| b >= 1)
                .ok_or_else(|| {
                    fail(
                        StatusCode::BAD_REQUEST,
                        "Bad page",
                        "before must be a seq (an integer from 1) that a previous page gave",
                    )
                })?,
        ),
    };
    app.existing_queue(&server, queue).await?;
    let mut con = server.con.clone();
    let config = admin::config(&mut con, queue).await.map_err(redis_fail)?;
    let log = Log::read(&mut con, queue, &config).await?;
    let mut feed = Feed {
        server: &server.addr,
        queue,
        kind: kind.clone(),
        before,
        log: &log,
        rows: Vec::new(),
        read: 0,
        lowest: None,
        gap: None,
    };
    if !log.off() && log.last_seq > 0 {
        let end = before.map_or(log.last_seq, |b| (b - 1).min(log.last_seq));
        let mut after = end.saturating_sub(FEED_READ as u64);
        if before.is_none() {
            // The newest page reads what is kept, never asks below it: a
            // log shorter than a page is no gap.
            after = after.max(log.oldest.map_or(end, |o| o - 1));
        }
        // An older page asks for its whole window: when the log has moved
        // on past it since, the server's GAP says so, and the page shows
        // what is kept.
        let (events, gap) = window(&mut con, queue, after, end, FEED_READ).await?;
        feed.read = events.len();
        feed.lowest = events.first().map(|e| e.seq);
        feed.gap = gap;
        feed.rows = events
            .into_iter()
            .rev()
            .filter(|e| kind.as_ref().is_none_or(|k| e.kind == *k))
            .take(FEED_SHOWN)
            .collect();
    }
    Ok(html_resp(StatusCode::OK, feed_page(ctx, &feed)))
}

struct Feed<'a> {
    server: &'a str,
    queue: &'a [u8],
    kind: Option<EventKind>,
    before: Option<u64>,
    log: &'a Log,
    /// Newest first, of the type asked.
    rows: Vec<Event>,
    /// How many the page read (of any type).
    read: usize,
    /// The oldest seq the page read.
    lowest: Option<u64>,
    /// GAP: the oldest kept, when the page asked below it.
    gap: Option<u64>,
}

impl Feed<'_> {
    fn url(&self, kind: Option<&EventKind>, before: Option<u64>) -> String {
        let mut params = Vec::new();
        if let Some(k) = kind {
            params.push(format!("type={}", url_part(k.as_str().as_bytes())));
        }
        if let Some(b) = before {
            params.push(format!("before={b}"));
        }
        let base = events_url(self.server, self.queue);
        match params.is_empty() {
            true => base,
            false => format!("{base}?{}", params.join("&")),
        }
    }
}

fn feed_page(ctx: &Ctx, f: &Feed) -> Markup {
    let title = label(f.queue, 80);
    let log = f.log;
    let body = html! {
        section.titlebar {
            h1 { span.muted { "events of queue " } (title) }
            @if ctx.cluster { span.server-tag { "on " (f.server) } }
        }
        section.card.events-card {
            @if log.off() {
                p id="events-off" {
                    "This queue keeps no events (EVENTS is 0, the default)"
                    @if log.last_seq > 0 { ", and none of the " (count(log.last_seq)) " it wrote before is kept" }
                    ". " (turn_on(f.queue))
                }
            } @else {
                p.muted id="events-kept" {
                    "Keeps its last " (count(log.keeps)) " events"
                    @match log.oldest {
                        Some(o) => { "; holds #" (o) " to #" (log.last_seq) "." },
                        None => { "; none written yet." },
                    }
                }
                @if let Some(oldest) = f.gap {
                    p.error id="events-gap" {
                        "Events before #" (oldest) " are gone: the queue keeps only its last "
                        (count(log.keeps)) " events, and older ones were trimmed (DQ.EVENTS replied GAP). "
                        "The oldest kept is #" (oldest) "."
                    }
                }
                nav.tabs id="event-types" {
                    a.active[f.kind.is_none()] href=(f.url(None, f.before)) { "all" }
                    @for k in EventKind::ALL {
                        a.active[f.kind.as_ref() == Some(&k)] data-type=(k.as_str()) href=(f.url(Some(&k), f.before)) { (k.as_str()) }
                    }
                }
                @if f.rows.is_empty() {
                    p.muted id="no-events" {
                        @if f.gap.is_some() { "None of the events of this page is kept: see the newest." }
                        @else if f.read == 0 { "No events yet: they appear here as the queue changes." }
                        @else { "None of type " (f.kind.as_ref().map_or("", EventKind::as_str)) " among these " (count(f.read as u64)) "." }
                    }
                } @else {
                    table.messages.events id="events" {
                        thead { tr { th.num { "seq" } th { "when" } th { "type" } th { "message" } th.num { "attempt" } th { "detail" } } }
                        tbody {
                            @for e in &f.rows { (event_row(f.server, f.queue, e, ctx.now, true)) }
                        }
                    }
                }
                nav.pager {
                    @if f.before.is_some() {
                        a id="events-newest" href=(f.url(f.kind.as_ref(), None)) { "« newest" }
                    }
                    @if let (Some(low), Some(oldest)) = (f.lowest, log.oldest) {
                        @if low > oldest {
                            a.next id="events-older" href=(f.url(f.kind.as_ref(), Some(low))) { "older »" }
                        }
                    }
                    span.muted.hint {
                        "newest first: of the " (count(f.read as u64)) " events read"
                        @if let Some(low) = f.lowest { " (#" (low) " on)" }
                        ", the newest " (FEED_SHOWN) @if let Some(k) = &f.kind { " of type " (k.as_str()) }
                        " (DQ.EVENTS)"
                    }
                }
            }
        }
    };
    let crumbs = [
        (queue_url(f.server, f.queue), title.clone()),
        (events_url(f.server, f.queue), "events".to_string()),
    ];
    pages::layout(
        &format!("events of {title}"),
        &crumbs,
        f.before.is_none(),
        body,
    )
}

/// A message's history: its events among the newest [`HISTORY_READ`] of
/// the queue's log, oldest first, with what the log could not say.
pub async fn history(
    con: &mut redis::aio::ConnectionManager,
    server: &str,
    queue: &[u8],
    id: &[u8],
    now: u64,
) -> Result<Markup, Fail> {
    let config = admin::config(con, queue).await.map_err(redis_fail)?;
    let log = Log::read(con, queue, &config).await?;
    let (mut events, mut gap, mut from) = (Vec::new(), None, None);
    if let Some(oldest) = log.oldest {
        let after = log
            .last_seq
            .saturating_sub(HISTORY_READ as u64)
            .max(oldest - 1);
        let (read, trimmed) = window(con, queue, after, log.last_seq, HISTORY_READ).await?;
        from = read.first().map(|e| e.seq);
        gap = trimmed;
        events = read
            .into_iter()
            .filter(|e| e.id.as_deref() == Some(id))
            .collect();
    }
    // The log reached back to its first event: nothing of this message
    // was trimmed.
    let complete = from == Some(1);
    Ok(html! {
        section.card.history-card id="history" {
            h2 { "History " span.muted { "(from the queue's event log)" } }
            @if log.off() {
                p.muted id="history-off" {
                    "The queue keeps no events, so this message has no history here. " (turn_on(queue))
                }
            } @else {
                @if events.is_empty() {
                    p.muted id="history-none" { "No event of this message is kept." }
                } @else {
                    table.messages.events id="history-events" {
                        thead { tr { th.num { "seq" } th { "when" } th { "type" } th.num { "attempt" } th { "detail" } } }
                        tbody {
                            @for e in &events { (event_row(server, queue, e, now, false)) }
                        }
                    }
                }
                @if let (Some(from), false) = (from, complete) {
                    p.muted id="history-trimmed" {
                        @if from == log.oldest.unwrap_or(from) || gap.is_some() {
                            "From #" (from) " on: the log keeps its last " (count(log.keeps))
                            " events and earlier ones were trimmed, so older events of this message may be missing."
                        } @else {
                            "From #" (from) " on: the newest " (count(HISTORY_READ as u64))
                            " of the events kept (#" (log.oldest.unwrap_or(from)) " to #" (log.last_seq)
                            "), so older events of this message may be missing."
                        }
                    }
                }
                p.muted { a id="history-feed" href=(events_url(server, queue)) { "the queue's events »" } }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> Ctx {
        Ctx {
            read_only: false,
            csrf: String::new(),
            cluster: false,
            now: 2_000,
        }
    }

    #[test]
    fn a_feed_escapes_ids_and_details_and_its_links_keep_the_type() {
        let log = Log {
            keeps: 10,
            last_seq: 7,
            oldest: Some(3),
        };
        let event = Event {
            seq: 7,
            at: 1_000,
            kind: EventKind::Progress,
            id: Some(b"<script>x</script>".to_vec()),
            attempt: Some(2),
            detail: Some(b"\"<b>half</b>".to_vec()),
        };
        let f = Feed {
            server: "h:1",
            queue: b"q/1",
            kind: Some(EventKind::Progress),
            before: None,
            log: &log,
            rows: vec![event],
            read: 5,
            lowest: Some(4),
            gap: None,
        };
        let page = feed_page(&ctx(), &f).into_string();
        assert!(!page.contains("<script>x"), "{page}");
        assert!(page.contains("&lt;script&gt;x&lt;/script&gt;"));
        assert!(page.contains("&lt;b&gt;half&lt;/b&gt;"));
        // Older than the page's oldest read (#4), of the same type.
        assert!(page.contains("href=\"/q/h%3A1/q%2F1/events?type=progress&amp;before=4\""));
        assert_eq!(
            f.url(None, Some(9)),
            "/q/h%3A1/q%2F1/events?before=9",
            "every part encoded"
        );
    }
}
