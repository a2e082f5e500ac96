//! The actions: what a POST to `/q/SERVER/QUEUE/action` may do. Each is
//! one type here that says all there is to say about it, in one place: its
//! name (the form's `op`), the fields it reads from the form (and sends
//! back through the confirmation), whether its button is red, what its
//! confirmation asks, and what it does — once.
//!
//! Every action asks first: a POST without `confirm=yes` only answers with
//! a confirmation page, whose "Yes" posts the same fields again with it.
//! Whether the POST may be made at all (--read-only, Origin, the CSRF
//! token) is settled before an action is read, in web.rs with security.rs:
//! every action changes something, so a read-only dashboard takes none.

use std::sync::Arc;
use std::time::Duration;

use dq_client::{admin, State};
use hyper::StatusCode;
use redis::aio::ConnectionManager;

use crate::app::App;
use crate::backend::Server;
use crate::discovery::{find_shards, Target};
use crate::http::{check_id, fail, html, redis_fail, refused, utf8, Fail, Resp};
use crate::pages::{self, Ctx, Pending};
use crate::render::{decode_part, form_value, label, now_ms, url_part};

/// A form's fields, as parse_form reads them.
type Form = [(String, Vec<u8>)];

/// The longest a schedule name may be (DQ.SCHEDULE refuses longer).
const MAX_SCHEDULE_NAME: usize = 1007;

/// Where an action acts: a queue, on the server that holds it.
pub struct At<'a> {
    app: &'a App,
    server: Arc<Server>,
    queue: &'a [u8],
}

impl At<'_> {
    fn con(&self) -> ConnectionManager {
        self.server.con.clone()
    }

    /// The queue's name for a sentence.
    fn name(&self) -> String {
        label(self.queue, 200)
    }

    fn queue_page(&self) -> String {
        pages::queue_url(&self.server.addr, self.queue)
    }

    fn groups_page(&self) -> String {
        pages::groups_url(&self.server.addr, self.queue)
    }

    fn message_page(&self, id: &[u8]) -> String {
        pages::message_url(&self.server.addr, self.queue, id)
    }
}

/// What the confirmation page asks, and where "Back" leads.
struct Confirmation {
    question: String,
    button: String,
    back: String,
}

/// What an action did, with the server's reply, and where "Back" leads.
struct Done {
    what: String,
    back: String,
}

trait Action: Sized {
    /// The form's `op`.
    const NAME: &'static str;
    /// It deletes or stops something: a red button.
    const DANGER: bool;
    /// Its fields, read from the form and checked.
    fn parse(form: &Form) -> Result<Self, Fail>;
    /// Its fields as the confirmation form sends them back (besides op,
    /// csrf and confirm), for [`Action::parse`] to read again: none unless
    /// it has some.
    fn fields(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }
    async fn confirm(&self, at: &At<'_>) -> Result<Confirmation, Fail>;
    async fn run(&self, at: &At<'_>) -> Result<Done, Fail>;
}

/// Every action's name, for the answer to one that is none of them.
const NAMES: [&str; 9] = [
    Redrive::NAME,
    RedriveAll::NAME,
    Cancel::NAME,
    Purge::NAME,
    Unschedule::NAME,
    Pause::NAME,
    Resume::NAME,
    GroupPause::NAME,
    GroupResume::NAME,
];

/// The action a (checked) POST to `/q/SERVER/QUEUE/action` names: its
/// confirmation, or, confirmed, its result.
pub async fn perform(
    app: &App,
    ctx: &Ctx,
    server: &[u8],
    queue: &[u8],
    form: &Form,
) -> Result<Resp, Fail> {
    let server = app.server_of(server)?;
    let op = utf8(form_value(form, "op").unwrap_or(b""), "op")?;
    let at = At { app, server, queue };
    match op.as_str() {
        Redrive::NAME => perform_one::<Redrive>(ctx, &at, form).await,
        RedriveAll::NAME => perform_one::<RedriveAll>(ctx, &at, form).await,
        Cancel::NAME => perform_one::<Cancel>(ctx, &at, form).await,
        Purge::NAME => perform_one::<Purge>(ctx, &at, form).await,
        Unschedule::NAME => perform_one::<Unschedule>(ctx, &at, form).await,
        Pause::NAME => perform_one::<Pause>(ctx, &at, form).await,
        Resume::NAME => perform_one::<Resume>(ctx, &at, form).await,
        GroupPause::NAME => perform_one::<GroupPause>(ctx, &at, form).await,
        GroupResume::NAME => perform_one::<GroupResume>(ctx, &at, form).await,
        _ => Err(fail(
            StatusCode::BAD_REQUEST,
            "Unknown action",
            format!("The action must be {}.", one_of(&NAMES)),
        )),
    }
}

/// `a, b or c`.
fn one_of(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => one.to_string(),
        [first @ .., last] => format!("{} or {last}", first.join(", ")),
    }
}

async fn perform_one<A: Action>(ctx: &Ctx, at: &At<'_>, form: &Form) -> Result<Resp, Fail> {
    let action = A::parse(form)?;
    let confirmed = form_value(form, "confirm") == Some(b"yes");
    at.app.existing_queue(&at.server, at.queue).await?;
    if !confirmed {
        let c = action.confirm(at).await?;
        let pending = Pending {
            server: &at.server.addr,
            queue: at.queue,
            op: A::NAME,
            fields: action.fields(),
            description: c.question,
            button: c.button,
            danger: A::DANGER,
            back: c.back,
        };
        return Ok(html(StatusCode::OK, pages::confirm_page(ctx, &pending)));
    }
    let done = action.run(at).await?;
    tracing::info!(server = %at.server.addr, queue = %String::from_utf8_lossy(at.queue),
        op = A::NAME, fields = ?action.fields(), result = %done.what, "action");
    Ok(html(
        StatusCode::OK,
        pages::done_page(&at.server.addr, at.queue, &done.what, &done.back),
    ))
}

// --- reading forms -----------------------------------------------------------

fn bad_form(detail: &str) -> Fail {
    fail(StatusCode::BAD_REQUEST, "Bad form", detail)
}

/// A field that travels percent-encoded, as in URLs: ids and schedule
/// names of any bytes survive the form.
fn encoded(form: &Form, name: &str) -> Option<Vec<u8>> {
    form_value(form, name).map(|v| decode_part(&String::from_utf8_lossy(v)))
}

/// The message an action on one message names: the form's `id`.
#[derive(Debug, PartialEq, Eq)]
struct MessageId(Vec<u8>);

impl MessageId {
    fn parse(form: &Form) -> Result<MessageId, Fail> {
        let id = encoded(form, "id").ok_or_else(|| bad_form("This action needs an id."))?;
        check_id(&id)?;
        Ok(MessageId(id))
    }

    fn fields(&self) -> Vec<(&'static str, String)> {
        vec![("id", url_part(&self.0))]
    }

    /// The id for a sentence.
    fn name(&self) -> String {
        label(&self.0, 200)
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// What a command that counts the messages it changed did: `Redrove 1
/// message (DQ.REDRIVE replied 1).`, with `none` said when it changed none.
fn counted(verb: &str, n: u64, command: &str, none: &str) -> String {
    let none = if n == 0 { none } else { "" };
    format!(
        "{verb} {n} message{} ({command} replied {n}){none}.",
        plural(n)
    )
}

// --- the actions -------------------------------------------------------------

/// DQ.REDRIVE ID: one dead message back to ready.
#[derive(Debug, PartialEq, Eq)]
struct Redrive {
    id: MessageId,
}

impl Action for Redrive {
    const NAME: &'static str = "redrive";
    const DANGER: bool = false;

    fn parse(form: &Form) -> Result<Self, Fail> {
        let id = MessageId::parse(form)?;
        Ok(Redrive { id })
    }

    fn fields(&self) -> Vec<(&'static str, String)> {
        self.id.fields()
    }

    async fn confirm(&self, at: &At<'_>) -> Result<Confirmation, Fail> {
        let (id, queue) = (self.id.name(), at.name());
        Ok(Confirmation {
            question: format!(
                "Redrive dead message {id} of queue {queue}: back to ready now, with a fresh \
                 attempt budget?"
            ),
            button: "Yes, redrive it".to_string(),
            back: at.message_page(&self.id.0),
        })
    }

    async fn run(&self, at: &At<'_>) -> Result<Done, Fail> {
        let n = admin::redrive_ids(&mut at.con(), at.queue, &[&self.id.0]).await;
        let n = n.map_err(redis_fail)?;
        let what = counted("Redrove", n, "DQ.REDRIVE", ": it was no longer dead");
        let back = at.message_page(&self.id.0);
        Ok(Done { what, back })
    }
}

/// DQ.REDRIVE until it moves none: every dead message back to ready.
#[derive(Debug, PartialEq, Eq)]
struct RedriveAll;

impl Action for RedriveAll {
    const NAME: &'static str = "redrive-all";
    const DANGER: bool = false;

    fn parse(_: &Form) -> Result<Self, Fail> {
        Ok(RedriveAll)
    }

    async fn confirm(&self, at: &At<'_>) -> Result<Confirmation, Fail> {
        Ok(Confirmation {
            question: format!(
                "Redrive every dead message of queue {} back to ready now?",
                at.name()
            ),
            button: "Yes, redrive all".to_string(),
            back: at.queue_page(),
        })
    }

    async fn run(&self, at: &At<'_>) -> Result<Done, Fail> {
        let n = admin::redrive_all(&mut at.con(), at.queue)
            .await
            .map_err(redis_fail)?;
        Ok(Done {
            what: format!(
                "Redrove {n} message{} (DQ.REDRIVE replied {n} in all).",
                plural(n)
            ),
            back: at.queue_page(),
        })
    }
}

/// DQ.CANCEL: one message deleted, whatever its state.
#[derive(Debug, PartialEq, Eq)]
struct Cancel {
    id: MessageId,
}

impl Action for Cancel {
    const NAME: &'static str = "cancel";
    const DANGER: bool = true;

    fn parse(form: &Form) -> Result<Self, Fail> {
        let id = MessageId::parse(form)?;
        Ok(Cancel { id })
    }

    fn fields(&self) -> Vec<(&'static str, String)> {
        self.id.fields()
    }

    async fn confirm(&self, at: &At<'_>) -> Result<Confirmation, Fail> {
        let (id, queue) = (self.id.name(), at.name());
        Ok(Confirmation {
            question: format!(
                "Cancel message {id} of queue {queue}: delete it, whatever its state? This \
                 cannot be undone."
            ),
            button: "Yes, cancel it".to_string(),
            back: at.message_page(&self.id.0),
        })
    }

    /// Back to the queue, not the message: it is gone.
    async fn run(&self, at: &At<'_>) -> Result<Done, Fail> {
        let n = admin::cancel(&mut at.con(), at.queue, &[&self.id.0]).await;
        let n = n.map_err(redis_fail)?;
        let what = counted("Cancelled", n, "DQ.CANCEL", ": it was already gone");
        let back = at.queue_page();
        Ok(Done { what, back })
    }
}

/// DQ.PURGE of one state: every message in it deleted.
#[derive(Debug, PartialEq, Eq)]
struct Purge {
    state: State,
}

impl Action for Purge {
    const NAME: &'static str = "purge";
    const DANGER: bool = true;

    fn parse(form: &Form) -> Result<Self, Fail> {
        let st = form_value(form, "state").ok_or_else(|| {
            bad_form("Purge needs a state: delayed, ready, inflight, dead or done.")
        })?;
        let state = utf8(st, "state")?
            .parse::<State>()
            .map_err(|e| fail(StatusCode::BAD_REQUEST, "Bad state", e))?;
        Ok(Purge { state })
    }

    fn fields(&self) -> Vec<(&'static str, String)> {
        vec![("state", self.state.as_str().to_string())]
    }

    async fn confirm(&self, at: &At<'_>) -> Result<Confirmation, Fail> {
        Ok(Confirmation {
            question: format!(
                "Purge queue {}: delete every {} message? This cannot be undone.",
                at.name(),
                self.state
            ),
            button: "Yes, purge".to_string(),
            back: at.queue_page(),
        })
    }

    async fn run(&self, at: &At<'_>) -> Result<Done, Fail> {
        let n = admin::purge(&mut at.con(), at.queue, Some(self.state))
            .await
            .map_err(redis_fail)?;
        Ok(Done {
            what: format!(
                "Purged {n} {} message{} (DQ.PURGE replied {n}).",
                self.state,
                plural(n)
            ),
            back: at.queue_page(),
        })
    }
}

/// DQ.UNSCHEDULE of one schedule; the messages its runs made stay.
#[derive(Debug, PartialEq, Eq)]
struct Unschedule {
    name: Vec<u8>,
}

impl Action for Unschedule {
    const NAME: &'static str = "unschedule";
    const DANGER: bool = true;

    fn parse(form: &Form) -> Result<Self, Fail> {
        let name = encoded(form, "schedule")
            .filter(|n| !n.is_empty() && n.len() <= MAX_SCHEDULE_NAME)
            .ok_or_else(|| bad_form("Removing a schedule needs its name (1 to 1007 bytes)."))?;
        Ok(Unschedule { name })
    }

    fn fields(&self) -> Vec<(&'static str, String)> {
        vec![("schedule", url_part(&self.name))]
    }

    /// Names the schedule by its spec too, so that the right one is
    /// removed; 404 when the queue has none of that name.
    async fn confirm(&self, at: &At<'_>) -> Result<Confirmation, Fail> {
        let name = label(&self.name, 200);
        let known = admin::schedules(&mut at.con(), at.queue)
            .await
            .map_err(redis_fail)?
            .into_iter()
            .find(|s| s.name == self.name)
            .ok_or_else(|| {
                fail(
                    StatusCode::NOT_FOUND,
                    "Unknown schedule",
                    format!(
                        "Queue {} on {} has no schedule named {name}.",
                        at.name(),
                        at.server.addr
                    ),
                )
            })?;
        let zone = if known.spec.starts_with("cron") {
            format!(", {}", known.tz)
        } else {
            String::new()
        };
        Ok(Confirmation {
            question: format!(
                "Remove schedule {name} ({}{zone}) of queue {}? It makes no more runs; the \
                 messages its runs already made stay in the queue.",
                known.spec,
                at.name()
            ),
            button: "Yes, remove it".to_string(),
            back: at.queue_page(),
        })
    }

    async fn run(&self, at: &At<'_>) -> Result<Done, Fail> {
        let n = admin::unschedule(&mut at.con(), at.queue, &[&self.name])
            .await
            .map_err(redis_fail)?;
        let name = label(&self.name, 200);
        Ok(Done {
            what: if n == 0 {
                format!("Removed no schedule (DQ.UNSCHEDULE replied 0): {name} was already gone.")
            } else {
                format!("Removed schedule {name} (DQ.UNSCHEDULE replied {n}).")
            },
            back: at.queue_page(),
        })
    }
}

/// DQ.PAUSE [FOR]: POP delivers nothing from the queue (every shard of a
/// sharded queue) until resumed, or for a while.
#[derive(Debug, PartialEq, Eq)]
struct Pause {
    /// None: until DQ.RESUME.
    for_ms: Option<u64>,
    /// The length as typed, sent back through the confirmation.
    text: String,
}

impl Action for Pause {
    const NAME: &'static str = "pause";
    const DANGER: bool = true;

    fn parse(form: &Form) -> Result<Self, Fail> {
        let text = utf8(form_value(form, "for").unwrap_or(b""), "for")?
            .trim()
            .to_string();
        let for_ms = pause_length(&text, now_ms())
            .map_err(|e| fail(StatusCode::BAD_REQUEST, "Bad pause length", e))?;
        Ok(Pause { for_ms, text })
    }

    fn fields(&self) -> Vec<(&'static str, String)> {
        if self.text.is_empty() {
            Vec::new()
        } else {
            vec![("for", self.text.clone())]
        }
    }

    async fn confirm(&self, at: &At<'_>) -> Result<Confirmation, Fail> {
        let whole = Whole::of(at).await?;
        Ok(Confirmation {
            question: format!(
                "Pause {} {}? POP delivers nothing from {} until then; ADD, the timer, \
                 leases and schedules go on.",
                whole.words,
                pause_words(self.for_ms),
                whole.them()
            ),
            button: whole.button("pause"),
            back: at.queue_page(),
        })
    }

    async fn run(&self, at: &At<'_>) -> Result<Done, Fail> {
        let whole = Whole::of(at).await?;
        for (done, (q, s)) in whole.targets.iter().enumerate() {
            let mut con = s.con.clone();
            if let Err(e) = admin::pause(&mut con, q, self.for_ms.map(Duration::from_millis)).await
            {
                return Err(whole.failed("Paused", done, e));
            }
        }
        let until = self.for_ms.map_or(String::new(), |ms| {
            format!(
                ", until {}",
                crate::render::time(now_ms().saturating_add(ms))
            )
        });
        let each = if whole.sharded { " on each" } else { "" };
        Ok(Done {
            what: format!(
                "Paused {} {}{until} (DQ.PAUSE replied OK{each}).",
                whole.words,
                pause_words(self.for_ms)
            ),
            back: at.queue_page(),
        })
    }
}

/// DQ.RESUME: POP delivers from the queue (every shard of a sharded
/// queue) again.
#[derive(Debug, PartialEq, Eq)]
struct Resume;

impl Action for Resume {
    const NAME: &'static str = "resume";
    const DANGER: bool = false;

    fn parse(_: &Form) -> Result<Self, Fail> {
        Ok(Resume)
    }

    async fn confirm(&self, at: &At<'_>) -> Result<Confirmation, Fail> {
        let whole = Whole::of(at).await?;
        Ok(Confirmation {
            question: format!(
                "Resume {}? POP delivers from {} again at once, blocked POPs first.",
                whole.words,
                whole.them()
            ),
            button: whole.button("resume"),
            back: at.queue_page(),
        })
    }

    async fn run(&self, at: &At<'_>) -> Result<Done, Fail> {
        let whole = Whole::of(at).await?;
        let mut were_paused = 0u64;
        for (done, (q, s)) in whole.targets.iter().enumerate() {
            let mut con = s.con.clone();
            match admin::resume(&mut con, q).await {
                Ok(was) => were_paused += u64::from(was),
                Err(e) => return Err(whole.failed("Resumed", done, e)),
            }
        }
        let n = whole.targets.len() as u64;
        let what = match (whole.sharded, were_paused) {
            (true, k) => format!(
                "Resumed {}: {k} {} paused (DQ.RESUME replied 1 on {k}, 0 on {}).",
                whole.words,
                if k == 1 { "was" } else { "were" },
                n.saturating_sub(k)
            ),
            (false, 1) => format!("Resumed queue {} (DQ.RESUME replied 1).", at.name()),
            (false, _) => format!("Queue {} was not paused (DQ.RESUME replied 0).", at.name()),
        };
        Ok(Done {
            what,
            back: at.queue_page(),
        })
    }
}

/// The group an action on one group names: the form's `group`
/// (percent-encoded, as ids are), 1 to 1024 bytes as DQ.ADD GROUP takes.
#[derive(Debug, PartialEq, Eq)]
struct GroupName(Vec<u8>);

impl GroupName {
    fn parse(form: &Form) -> Result<GroupName, Fail> {
        let group = encoded(form, "group")
            .filter(|g| !g.is_empty() && g.len() <= crate::groups::MAX_GROUP)
            .ok_or_else(|| bad_form("This action needs a group (1 to 1024 bytes)."))?;
        Ok(GroupName(group))
    }

    fn fields(&self) -> Vec<(&'static str, String)> {
        vec![("group", url_part(&self.0))]
    }
}

/// Where a group's pause or resume goes: the queue itself, or, on a
/// shard of a sharded queue, the shard the client libraries route the
/// group's messages to (dq-client's `shard_of` of its name: a group lives
/// on one shard, docs/sharding.md).
struct GroupHome {
    queue: Vec<u8>,
    server: Arc<Server>,
    /// `group g of queue orders`, `group g of sharded queue jobs (on its
    /// shard jobs~1of4~7)`.
    words: String,
}

impl GroupHome {
    async fn of(at: &At<'_>, group: &GroupName) -> Result<GroupHome, Fail> {
        let g = label(&group.0, 200);
        let Some(set) = find_shards(at.app, &at.server, at.queue).await else {
            return Ok(GroupHome {
                queue: at.queue.to_vec(),
                server: at.server.clone(),
                words: format!("group {g} of queue {}", at.name()),
            });
        };
        let index = dq_client::shard_of(&group.0, set.name.count) as usize;
        let Some(shard) = set.shards.get(index) else {
            return Err(fail(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Internal error",
                format!("shard {index} of {} is not in its layout", set.name.count),
            ));
        };
        let server = shard.server.clone().ok_or_else(|| {
            fail(
                StatusCode::SERVICE_UNAVAILABLE,
                "Cluster changing",
                format!(
                    "No known master serves the slot of shard {}, which holds group {g}. \
                     Nothing was done; try again once the cluster has settled.",
                    label(&shard.name, 200)
                ),
            )
        })?;
        Ok(GroupHome {
            queue: shard.name.clone(),
            server,
            words: format!(
                "group {g} of sharded queue {} (on its shard {})",
                label(set.name.base.as_bytes(), 200),
                label(&shard.name, 200)
            ),
        })
    }

    fn failed(&self, e: dq_client::Error) -> Fail {
        if refused(&e) {
            fail(
                StatusCode::BAD_REQUEST,
                "Refused by the server",
                e.to_string(),
            )
        } else {
            redis_fail(e)
        }
    }
}

/// DQ.PAUSE ... GROUP g [FOR]: POP delivers none of the group's messages
/// until resumed, or for a while; the rest of the queue goes on.
#[derive(Debug, PartialEq, Eq)]
struct GroupPause {
    group: GroupName,
    /// None: until DQ.RESUME.
    for_ms: Option<u64>,
    /// The length as typed, sent back through the confirmation.
    text: String,
}

impl Action for GroupPause {
    const NAME: &'static str = "group-pause";
    const DANGER: bool = true;

    fn parse(form: &Form) -> Result<Self, Fail> {
        let group = GroupName::parse(form)?;
        let Pause { for_ms, text } = Pause::parse(form)?;
        Ok(GroupPause {
            group,
            for_ms,
            text,
        })
    }

    fn fields(&self) -> Vec<(&'static str, String)> {
        let mut f = self.group.fields();
        if !self.text.is_empty() {
            f.push(("for", self.text.clone()));
        }
        f
    }

    async fn confirm(&self, at: &At<'_>) -> Result<Confirmation, Fail> {
        let home = GroupHome::of(at, &self.group).await?;
        Ok(Confirmation {
            question: format!(
                "Pause {} {}? POP delivers none of its messages until then: its ready \
                 messages go back to waiting, those in flight finish as usual, and the rest of \
                 the queue goes on.",
                home.words,
                pause_words(self.for_ms)
            ),
            button: "Yes, pause it".to_string(),
            back: at.groups_page(),
        })
    }

    async fn run(&self, at: &At<'_>) -> Result<Done, Fail> {
        let home = GroupHome::of(at, &self.group).await?;
        let mut con = home.server.con.clone();
        admin::pause_group(
            &mut con,
            &home.queue,
            &self.group.0,
            self.for_ms.map(Duration::from_millis),
        )
        .await
        .map_err(|e| home.failed(e))?;
        let until = self.for_ms.map_or(String::new(), |ms| {
            format!(
                ", until {}",
                crate::render::time(now_ms().saturating_add(ms))
            )
        });
        Ok(Done {
            what: format!(
                "Paused {} {}{until} (DQ.PAUSE replied OK).",
                home.words,
                pause_words(self.for_ms)
            ),
            back: at.groups_page(),
        })
    }
}

/// DQ.RESUME ... GROUP g: POP delivers the group's messages again.
#[derive(Debug, PartialEq, Eq)]
struct GroupResume {
    group: GroupName,
}

impl Action for GroupResume {
    const NAME: &'static str = "group-resume";
    const DANGER: bool = false;

    fn parse(form: &Form) -> Result<Self, Fail> {
        Ok(GroupResume {
            group: GroupName::parse(form)?,
        })
    }

    fn fields(&self) -> Vec<(&'static str, String)> {
        self.group.fields()
    }

    async fn confirm(&self, at: &At<'_>) -> Result<Confirmation, Fail> {
        let home = GroupHome::of(at, &self.group).await?;
        Ok(Confirmation {
            question: format!(
                "Resume {}? POP delivers its messages again at once.",
                home.words
            ),
            button: "Yes, resume it".to_string(),
            back: at.groups_page(),
        })
    }

    async fn run(&self, at: &At<'_>) -> Result<Done, Fail> {
        let home = GroupHome::of(at, &self.group).await?;
        let mut con = home.server.con.clone();
        let was = admin::resume_group(&mut con, &home.queue, &self.group.0)
            .await
            .map_err(|e| home.failed(e))?;
        let what = if was {
            format!("Resumed {} (DQ.RESUME replied 1).", home.words)
        } else {
            let mut words = home.words.clone();
            words[..1].make_ascii_uppercase();
            format!("{words} was not paused (DQ.RESUME replied 0).")
        };
        Ok(Done {
            what,
            back: at.groups_page(),
        })
    }
}

/// What a pause or a resume acts on: every shard of a sharded queue, each
/// on its own master, or else the queue itself.
struct Whole {
    sharded: bool,
    targets: Vec<Target>,
    /// `queue orders`, `all 4 shards of sharded queue jobs`.
    words: String,
}

impl Whole {
    async fn of(at: &At<'_>) -> Result<Whole, Fail> {
        Ok(match find_shards(at.app, &at.server, at.queue).await {
            Some(set) => Whole {
                sharded: true,
                targets: set.targets()?,
                words: format!(
                    "all {} shards of sharded queue {}",
                    set.shards.len(),
                    label(set.name.base.as_bytes(), 200)
                ),
            },
            None => Whole {
                sharded: false,
                targets: vec![(at.queue.to_vec(), at.server.clone())],
                words: format!("queue {}", at.name()),
            },
        })
    }

    fn them(&self) -> &'static str {
        if self.sharded {
            "them"
        } else {
            "it"
        }
    }

    /// `Yes, pause all 4`, `Yes, pause it`.
    fn button(&self, verb: &str) -> String {
        if self.sharded {
            format!("Yes, {verb} all {}", self.targets.len())
        } else {
            format!("Yes, {verb} it")
        }
    }

    /// A failure on the `done`-th target: the server's own refusal is the
    /// form's fault (400); anything else a 502 that says how far it got.
    fn failed(&self, verb: &str, done: usize, e: dq_client::Error) -> Fail {
        let (status, title) = if refused(&e) {
            (StatusCode::BAD_REQUEST, "Refused by the server")
        } else {
            (StatusCode::BAD_GATEWAY, "The server could not answer")
        };
        let detail = match self.targets.get(done).or(self.targets.last()) {
            Some((queue, server)) if self.sharded => format!(
                "{verb} {done} of {} shards, then shard {} on {} answered: {e}. {}",
                self.targets.len(),
                label(queue, 200),
                server.addr,
                if done == 0 {
                    "Nothing was changed."
                } else {
                    "Do it again to reach every shard."
                }
            ),
            _ => e.to_string(),
        };
        fail(status, title, detail)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::parse_form;

    /// The form's status and title, for a failure.
    fn why<T>(r: Result<T, Fail>) -> (u16, String) {
        match r {
            Ok(_) => (200, String::new()),
            Err(Fail(status, title, _)) => (status.as_u16(), title),
        }
    }

    /// The confirmation posts an action's fields back: they read as the
    /// same action, so what is confirmed is what is done.
    fn round_trip<A: Action + PartialEq + std::fmt::Debug>(body: &str) -> A {
        let first = A::parse(&parse_form(body.as_bytes())).unwrap_or_else(|f| panic!("{}", f.2));
        let again: Vec<(String, Vec<u8>)> = first
            .fields()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.into_bytes()))
            .collect();
        let second = A::parse(&again).unwrap_or_else(|f| panic!("{}", f.2));
        assert_eq!(first, second, "{body}");
        second
    }

    #[test]
    fn each_action_reads_back_what_its_confirmation_sends() {
        // Ids and names are percent-encoded in the form's fields (as the
        // pages write them), and the form encodes that again.
        let id = round_trip::<Redrive>("op=redrive&id=a%252Fb%25FF%2500");
        assert_eq!(id.id.0, b"a/b\xff\x00");
        assert_eq!(round_trip::<Cancel>("id=x").id.0, b"x");
        assert_eq!(round_trip::<RedriveAll>(""), RedriveAll);
        assert_eq!(round_trip::<Purge>("state=DEAD").state, State::Dead);
        assert_eq!(
            round_trip::<Unschedule>("schedule=tick%2520tock").name,
            b"tick tock"
        );
        assert_eq!(
            round_trip::<Pause>("for=+10m+"),
            Pause {
                for_ms: Some(600_000),
                text: "10m".into()
            }
        );
        assert_eq!(
            round_trip::<Pause>("for="),
            Pause {
                for_ms: None,
                text: String::new()
            }
        );
        assert_eq!(round_trip::<Resume>(""), Resume);
        let gp = round_trip::<GroupPause>("group=t%2520%25FF&for=90s");
        assert_eq!(
            (gp.group.0.as_slice(), gp.for_ms),
            (&b"t \xff"[..], Some(90_000))
        );
        let gp = round_trip::<GroupPause>("group=t");
        assert_eq!(gp.for_ms, None);
        assert_eq!(round_trip::<GroupResume>("group=a%252Fb").group.0, b"a/b");
    }

    #[test]
    fn bad_forms_are_400s_that_say_what_is_wrong() {
        let form = |body: &str| parse_form(body.as_bytes());
        assert_eq!(why(Redrive::parse(&form(""))), (400, "Bad form".into()));
        assert_eq!(why(Cancel::parse(&form("id="))), (400, "Bad id".into()));
        let long = format!("id={}", "x".repeat(1025));
        assert_eq!(why(Cancel::parse(&form(&long))), (400, "Bad id".into()));
        assert_eq!(why(Purge::parse(&form(""))), (400, "Bad form".into()));
        assert_eq!(
            why(Purge::parse(&form("state=finished"))),
            (400, "Bad state".into())
        );
        assert_eq!(
            why(Purge::parse(&form("state=%FF"))),
            (400, "Bad request".into())
        );
        assert_eq!(
            why(Unschedule::parse(&form("schedule="))),
            (400, "Bad form".into())
        );
        let long = format!("schedule={}", "s".repeat(MAX_SCHEDULE_NAME + 1));
        assert_eq!(
            why(Unschedule::parse(&form(&long))),
            (400, "Bad form".into())
        );
        let longest = format!("schedule={}", "s".repeat(MAX_SCHEDULE_NAME));
        assert_eq!(why(Unschedule::parse(&form(&longest))).0, 200);
        assert_eq!(
            why(Pause::parse(&form("for=soon"))),
            (400, "Bad pause length".into())
        );
        assert_eq!(
            why(GroupPause::parse(&form("for=1m"))),
            (400, "Bad form".into())
        );
        assert_eq!(
            why(GroupPause::parse(&form("group=g&for=soon"))),
            (400, "Bad pause length".into())
        );
        let long = format!("group={}", "g".repeat(1025));
        assert_eq!(
            why(GroupResume::parse(&form(&long))),
            (400, "Bad form".into())
        );
        assert_eq!(
            why(GroupResume::parse(&form("group="))),
            (400, "Bad form".into())
        );
    }

    #[test]
    fn the_red_buttons_are_those_that_delete_or_stop() {
        let red: Vec<&str> = [
            (Redrive::NAME, Redrive::DANGER),
            (RedriveAll::NAME, RedriveAll::DANGER),
            (Cancel::NAME, Cancel::DANGER),
            (Purge::NAME, Purge::DANGER),
            (Unschedule::NAME, Unschedule::DANGER),
            (Pause::NAME, Pause::DANGER),
            (Resume::NAME, Resume::DANGER),
            (GroupPause::NAME, GroupPause::DANGER),
            (GroupResume::NAME, GroupResume::DANGER),
        ]
        .into_iter()
        .filter(|(_, danger)| *danger)
        .map(|(name, _)| name)
        .collect();
        assert_eq!(
            red,
            ["cancel", "purge", "unschedule", "pause", "group-pause"]
        );
        assert_eq!(
            format!("The action must be {}.", one_of(&NAMES)),
            "The action must be redrive, redrive-all, cancel, purge, unschedule, pause, resume, \
             group-pause or group-resume."
        );
    }

    #[test]
    fn counts_in_words() {
        assert_eq!(
            counted("Redrove", 1, "DQ.REDRIVE", ": none"),
            "Redrove 1 message (DQ.REDRIVE replied 1)."
        );
        assert_eq!(
            counted("Cancelled", 0, "DQ.CANCEL", ": it was already gone"),
            "Cancelled 0 messages (DQ.CANCEL replied 0): it was already gone."
        );
        assert_eq!(
            counted("Redrove", 3, "DQ.REDRIVE", ": none"),
            "Redrove 3 messages (DQ.REDRIVE replied 3)."
        );
    }

    #[test]
    fn pause_lengths() {
        assert_eq!(pause_length("", 0), Ok(None));
        assert_eq!(pause_length("  ", 0), Ok(None));
        assert_eq!(pause_length("90s", 0), Ok(Some(90_000)));
        assert_eq!(pause_length("1h 30m", 0), Ok(Some(5_400_000)));
        assert_eq!(pause_length("2d", 0), Ok(Some(172_800_000)));
        assert_eq!(pause_length("250", 0), Ok(Some(250)));
        assert!(pause_length("0", 0).is_err());
        assert!(pause_length("0s", 0).is_err());
        assert!(pause_length("-5", 0).is_err());
        assert!(pause_length("soon", 0).is_err());
        // Its end must fit the server's clock.
        let max = (1u64 << 53) - 1;
        assert_eq!(pause_length("10", max - 10), Ok(Some(10)));
        assert!(pause_length("11", max - 10).is_err());
        assert_eq!(pause_words(None), "until resumed");
        assert_eq!(pause_words(Some(600_000)), "for 10m");
    }
}
