//! The instance protocol: what a client says to a running slurp over its
//! socket, and what it hears back (docs/protocol.md is the reference).
//!
//! JSON lines both ways. A request is one object with an `op` and any `id`
//! the client likes (echoed in the reply, so replies can come out of order:
//! a `wait` answers when its tasks end, others at once); `v` may name the
//! protocol version the client speaks, and a version this slurp does not
//! speak is refused. Every request gets exactly one reply, `{"id", "ok":
//! true, …}` or `{"id", "ok": false, "error": {"code", "message"}}` — a
//! malformed, oversized or unknown one too — and the instance goes on.
//! After a `watch`, the connection also carries events (`{"event": …}`).
//!
//! This module only reads and writes the messages; the driver
//! ([`crate::run`]) acts on them.

use serde::Deserialize;
use serde_json::{Value, json};

/// The protocol version this slurp speaks.
pub const VERSION: u32 = 1;

/// The longest request line taken; a longer one is answered
/// `request_too_large` and skipped to its newline.
pub const MAX_REQUEST: usize = 4 << 20;

/// What a request asks for.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Op {
    /// Who the instance is: version, run, resources, whether it is open.
    Hello {},
    /// Adds the tasks of `text` (lines of the slurp language; a whole file
    /// is fine) — or the task of each jobspec of `jobspec` (Flux RFC 25,
    /// version 1: one object, or a list taken whole or not at all) — to the
    /// instance at `scope` (`""`, the top level, by default; `sub/`
    /// for nested entry `sub`'s). `source` names the text in diagnostics;
    /// `cwd` is where its tasks run and relative paths in it start (the
    /// instance's directory by default).
    Submit {
        #[serde(default)]
        text: Option<String>,
        #[serde(default)]
        jobspec: Option<Value>,
        #[serde(default)]
        scope: Option<String>,
        #[serde(default)]
        source: Option<String>,
        #[serde(default)]
        cwd: Option<String>,
    },
    /// Answers when every task named has ended (at once if they have).
    Wait { tasks: Vec<String> },
    /// Cancels tasks: those not started end `cancelled`, running ones are
    /// stopped (SIGTERM, then SIGKILL after the grace period).
    Cancel { tasks: Vec<String> },
    /// The state of the tasks named, or of every task of `scope`.
    Status {
        #[serde(default)]
        tasks: Option<Vec<String>>,
        #[serde(default)]
        scope: Option<String>,
    },
    /// Streams every state change and start from now on as events.
    Watch {},
    /// Takes no more submissions; the run ends when its tasks have.
    Close {},
}

/// A request as read off the wire.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Echoed in the reply; `null` when the client gave none.
    pub id: Value,
    pub op: Op,
}

/// Why a request got no answer but an error.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    /// Stable, for programs: `bad_request`, `unknown_op`, `bad_version`,
    /// `request_too_large`, `invalid_workflow`, `unknown_task`,
    /// `unknown_scope`, `closed`.
    pub code: &'static str,
    pub message: String,
    /// For `invalid_workflow`: the diagnostics as a file's run would print
    /// them (text, without colour).
    pub diagnostic: Option<String>,
    /// For `bad_jobspec` of a list: which jobspec (from 0).
    pub index: Option<usize>,
}

impl Refusal {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Refusal {
            code,
            message: message.into(),
            diagnostic: None,
            index: None,
        }
    }
}

/// Reads one request line; the id, when one could be read, comes with a
/// refusal so the reply can name it.
pub fn parse(line: &[u8]) -> Result<Request, (Value, Refusal)> {
    let value: Value = serde_json::from_slice(line).map_err(|e| {
        (
            Value::Null,
            Refusal::new("bad_request", format!("not a JSON object: {e}")),
        )
    })?;
    let Value::Object(mut object) = value else {
        return Err((
            Value::Null,
            Refusal::new("bad_request", "a request is one JSON object per line"),
        ));
    };
    let id = object.remove("id").unwrap_or(Value::Null);
    if let Some(v) = object.remove("v")
        && v.as_u64() != Some(u64::from(VERSION))
    {
        return Err((
            id,
            Refusal::new(
                "bad_version",
                format!("protocol version {v} is not spoken here; this slurp speaks {VERSION}"),
            ),
        ));
    }
    let op_name = match object.get("op") {
        Some(Value::String(op)) => op.clone(),
        Some(_) => {
            return Err((id, Refusal::new("bad_request", "`op` must be a string")));
        }
        None => {
            return Err((id, Refusal::new("bad_request", "the request has no `op`")));
        }
    };
    match serde_json::from_value::<Op>(Value::Object(object)) {
        Ok(op) => Ok(Request { id, op }),
        Err(e) => {
            let known = [
                "hello", "submit", "wait", "cancel", "status", "watch", "close",
            ];
            let refusal = if known.contains(&op_name.as_str()) {
                Refusal::new("bad_request", format!("`{op_name}`: {e}"))
            } else {
                Refusal::new(
                    "unknown_op",
                    format!(
                        "no operation `{op_name}`; the operations are {}",
                        known.join(", ")
                    ),
                )
            };
            Err((id, refusal))
        }
    }
}

/// A successful reply: `fields` (an object) with `id` and `ok` added.
pub fn reply(id: &Value, fields: Value) -> String {
    let mut object = match fields {
        Value::Object(object) => object,
        _ => serde_json::Map::new(),
    };
    object.insert("id".into(), id.clone());
    object.insert("ok".into(), Value::Bool(true));
    let mut line = Value::Object(object).to_string();
    line.push('\n');
    line
}

/// An error reply.
pub fn refuse(id: &Value, refusal: &Refusal) -> String {
    let mut error = json!({ "code": refusal.code, "message": refusal.message });
    if let Some(diagnostic) = &refusal.diagnostic {
        error["diagnostic"] = Value::String(diagnostic.clone());
    }
    if let Some(index) = refusal.index {
        error["index"] = json!(index);
    }
    let mut line = json!({ "id": id, "ok": false, "error": error }).to_string();
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse_with_their_ids() {
        let r = parse(br#"{"id":7,"op":"submit","text":"true"}"#).unwrap();
        assert_eq!(r.id, json!(7));
        assert_eq!(
            r.op,
            Op::Submit {
                text: Some("true".into()),
                jobspec: None,
                scope: None,
                source: None,
                cwd: None
            }
        );
        let r = parse(br#"{"op":"wait","tasks":["a","b"],"v":1}"#).unwrap();
        assert_eq!(r.id, Value::Null);
        assert_eq!(
            r.op,
            Op::Wait {
                tasks: vec!["a".into(), "b".into()]
            }
        );
    }

    #[test]
    fn bad_requests_are_refused_by_code() {
        let code = |line: &[u8]| parse(line).unwrap_err().1.code;
        assert_eq!(code(b"not json"), "bad_request");
        assert_eq!(code(b"[1,2]"), "bad_request");
        assert_eq!(code(br#"{"id":1}"#), "bad_request");
        assert_eq!(code(br#"{"op":"frobnicate"}"#), "unknown_op");
        assert_eq!(code(br#"{"op":"submit","text":5}"#), "bad_request");
        assert_eq!(code(br#"{"op":"wait","tasks":"a"}"#), "bad_request");
        assert_eq!(code(br#"{"op":"close","typo":1}"#), "bad_request");
        assert_eq!(code(br#"{"op":"hello","v":2}"#), "bad_version");
        // The id is kept for the reply even when the rest is wrong.
        assert_eq!(
            parse(br#"{"id":"x","op":"nope"}"#).unwrap_err().0,
            json!("x")
        );
    }

    #[test]
    fn replies_carry_id_and_ok() {
        let line = reply(&json!(3), json!({"tasks": ["a"]}));
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v, json!({"id": 3, "ok": true, "tasks": ["a"]}));
        let line = refuse(&json!(4), &Refusal::new("closed", "no"));
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["ok"], json!(false));
        assert_eq!(v["error"]["code"], json!("closed"));
    }
}
