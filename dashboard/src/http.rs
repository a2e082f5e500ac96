//! Answers: an HTML page or plain text with its status, and [`Fail`], a
//! request's failure, which the router turns into an error page. Shared by
//! the router (web.rs), the pages' handlers (views.rs) and the actions
//! (ops.rs).

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{self, HeaderValue};
use hyper::{Response, StatusCode};
use maud::Markup;

pub type Resp = Response<Full<Bytes>>;

/// A request's failure, shown as a page with this status: the status, a
/// title and what went wrong.
pub struct Fail(pub StatusCode, pub String, pub String);

pub fn fail(status: StatusCode, title: &str, detail: impl Into<String>) -> Fail {
    Fail(status, title.to_string(), detail.into())
}

/// A call the server did not answer (or answered with an error): the
/// server's fault, not the request's.
pub fn redis_fail(e: dq_client::Error) -> Fail {
    fail(
        StatusCode::BAD_GATEWAY,
        "The server could not answer",
        e.to_string(),
    )
}

/// Whether the server refused a call as a bad argument (rather than not
/// answering): then it is the request's fault.
pub fn refused(e: &dq_client::Error) -> bool {
    matches!(e, dq_client::Error::Redis(r)
        if r.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError))
}

pub fn html(status: StatusCode, markup: Markup) -> Resp {
    let mut r = Response::new(Full::new(Bytes::from(markup.into_string())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    r
}

pub fn plain(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Resp {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// A parameter as text: `what` names it in the 400 when it is not UTF-8.
pub fn utf8(bytes: &[u8], what: &str) -> Result<String, Fail> {
    String::from_utf8(bytes.to_vec()).map_err(|_| {
        fail(
            StatusCode::BAD_REQUEST,
            "Bad request",
            format!("{what} is not UTF-8"),
        )
    })
}

/// A message id as DQ.ADD takes one: 1 to 1024 bytes.
pub fn check_id(id: &[u8]) -> Result<(), Fail> {
    if id.is_empty() || id.len() > 1024 {
        return Err(fail(
            StatusCode::BAD_REQUEST,
            "Bad id",
            "An id is 1 to 1024 bytes.",
        ));
    }
    Ok(())
}
