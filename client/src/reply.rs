//! Sending an admin command and reading its reply: the pieces every typed
//! call shares (admin.rs, schedule.rs), in one place so that each record
//! parser reads fields the same way and neither file imports the other's
//! helpers.
//!
//! A record is read by field name from a RESP3 map or a RESP2 flat
//! field/value array, so fields a newer module adds are ignored. Anything
//! a dq command never answers is an [`Error::Reply`] naming the command,
//! never a panic.

use redis::aio::ConnectionLike;
use redis::{Cmd, Value};

use crate::error::Error;

/// `name queue`, the start of every per-queue command.
pub(crate) fn cmd(name: &str, queue: &[u8]) -> Cmd {
    let mut c = redis::cmd(name);
    c.arg(queue);
    c
}

pub(crate) async fn query<C: ConnectionLike + ?Sized>(
    con: &mut C,
    c: &Cmd,
) -> Result<Value, Error> {
    // A connection may hand the server's refusal back as a value rather
    // than an error (redis's ConnectionManager does): it is an error here,
    // typed as every other (Error::WrongType, Error::Redis, ...).
    match con.req_packed_command(c).await? {
        Value::ServerError(e) => Err(Error::from(redis::RedisError::from(e))),
        v => Ok(v),
    }
}

pub(crate) fn bad(command: &'static str, detail: impl Into<String>) -> Error {
    Error::Reply {
        command,
        detail: detail.into(),
    }
}

/// `OK`, the reply of the commands that only change something.
pub(crate) fn ok(command: &'static str, v: Value) -> Result<(), Error> {
    match v {
        Value::Okay => Ok(()),
        Value::SimpleString(s) if s == "OK" => Ok(()),
        other => Err(bad(command, format!("expected OK, got {other:?}"))),
    }
}

pub(crate) fn bytes(command: &'static str, v: Value) -> Result<Vec<u8>, Error> {
    match v {
        Value::BulkString(b) => Ok(b),
        Value::SimpleString(s) => Ok(s.into_bytes()),
        Value::VerbatimString { text, .. } => Ok(text.into_bytes()),
        Value::Okay => Ok(b"OK".to_vec()),
        other => Err(bad(command, format!("expected a string, got {other:?}"))),
    }
}

pub(crate) fn opt_bytes(command: &'static str, v: Value) -> Result<Option<Vec<u8>>, Error> {
    match v {
        Value::Nil => Ok(None),
        v => bytes(command, v).map(Some),
    }
}

/// Text as the server sent it; bytes that are not UTF-8 become U+FFFD.
pub(crate) fn text(command: &'static str, v: &Value) -> Result<String, Error> {
    bytes(command, v.clone()).map(|b| String::from_utf8_lossy(&b).into_owned())
}

pub(crate) fn opt_text(command: &'static str, v: Value) -> Result<Option<String>, Error> {
    Ok(opt_bytes(command, v)?.map(|b| String::from_utf8_lossy(&b).into_owned()))
}

pub(crate) fn int(command: &'static str, v: &Value) -> Result<i64, Error> {
    match v {
        Value::Int(n) => Ok(*n),
        Value::BulkString(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad(command, "expected an integer")),
        Value::SimpleString(s) => s.parse().map_err(|_| bad(command, "expected an integer")),
        other => Err(bad(command, format!("expected an integer, got {other:?}"))),
    }
}

pub(crate) fn opt_int(command: &'static str, v: &Value) -> Result<Option<i64>, Error> {
    match v {
        Value::Nil => Ok(None),
        v => int(command, v).map(Some),
    }
}

pub(crate) fn uint(command: &'static str, v: &Value) -> Result<u64, Error> {
    let n = int(command, v)?;
    u64::try_from(n).map_err(|_| bad(command, format!("expected a non-negative integer, got {n}")))
}

pub(crate) fn opt_uint(command: &'static str, v: &Value) -> Result<Option<u64>, Error> {
    match v {
        Value::Nil => Ok(None),
        v => uint(command, v).map(Some),
    }
}

pub(crate) fn array(command: &'static str, v: Value) -> Result<Vec<Value>, Error> {
    match v {
        Value::Array(items) | Value::Set(items) => Ok(items),
        // An absent array (DQ.POP's nil) reads as empty.
        Value::Nil => Ok(Vec::new()),
        other => Err(bad(command, format!("expected an array, got {other:?}"))),
    }
}

/// RESP3 map or RESP2 flat array of alternating keys and values, as pairs;
/// `odd` says what a flat array of odd length lacks.
pub(crate) fn pairs(
    command: &'static str,
    v: Value,
    odd: &str,
) -> Result<Vec<(Value, Value)>, Error> {
    match v {
        Value::Map(pairs) => Ok(pairs),
        Value::Array(items) => {
            if items.len() % 2 != 0 {
                return Err(bad(command, odd));
            }
            let mut it = items.into_iter();
            let mut pairs = Vec::with_capacity(it.len() / 2);
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                pairs.push((k, v));
            }
            Ok(pairs)
        }
        other => Err(bad(command, format!("expected a record, got {other:?}"))),
    }
}

/// A record's fields as (name, value) pairs, names not yet read: see
/// [`field_name`].
pub(crate) fn fields(command: &'static str, v: Value) -> Result<Vec<(Value, Value)>, Error> {
    pairs(command, v, "a record with an odd number of elements")
}

/// A field name as bytes, without copying: DQ.QUEUES WITHSTATS has some
/// twenty of them per queue, and a node may hold many thousand queues.
pub(crate) fn field_name<'a>(command: &'static str, k: &'a Value) -> Result<&'a [u8], Error> {
    match k {
        Value::BulkString(b) => Ok(b),
        Value::SimpleString(s) => Ok(s.as_bytes()),
        Value::VerbatimString { text, .. } => Ok(text.as_bytes()),
        other => Err(bad(
            command,
            format!("expected a field name, got {other:?}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_come_as_integers_or_as_text() {
        assert_eq!(int("C", &Value::Int(-3)).unwrap(), -3);
        assert_eq!(int("C", &Value::BulkString(b"42".to_vec())).unwrap(), 42);
        assert_eq!(int("C", &Value::SimpleString("7".into())).unwrap(), 7);
        assert!(int("C", &Value::BulkString(b"x".to_vec())).is_err());
        assert!(uint("C", &Value::Int(-1)).is_err());
        assert_eq!(opt_uint("C", &Value::Nil).unwrap(), None);
        assert_eq!(opt_int("C", &Value::Int(-1)).unwrap(), Some(-1));
        let err = int("DQ.X", &Value::Nil).unwrap_err();
        assert!(err.to_string().contains("DQ.X"), "{err}");
    }

    #[test]
    fn records_are_maps_or_flat_arrays() {
        let k = |s: &str| Value::SimpleString(s.into());
        let flat = Value::Array(vec![k("a"), Value::Int(1), k("b"), Value::Nil]);
        let map = Value::Map(vec![(k("a"), Value::Int(1)), (k("b"), Value::Nil)]);
        assert_eq!(fields("C", flat).unwrap(), fields("C", map).unwrap());
        assert!(fields("C", Value::Array(vec![k("a")])).is_err());
        assert!(fields("C", Value::Int(1)).is_err());
        assert_eq!(field_name("C", &k("a")).unwrap(), b"a");
        assert!(field_name("C", &Value::Int(1)).is_err());
    }

    #[test]
    fn ok_is_ok_and_nothing_else() {
        assert!(ok("C", Value::Okay).is_ok());
        assert!(ok("C", Value::SimpleString("OK".into())).is_ok());
        assert!(ok("C", Value::Int(1)).is_err());
    }
}
