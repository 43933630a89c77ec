//! The worker protocol, tableq's side: what one line a worker process writes on
//! stdout means. Each item gets one answer, `{"ok": true}` or `{"ok": false,
//! "error": "…"}` (with `"retry_after": "30s"` for trouble downstream, `"output"`
//! for `:output`, `"kind"` to group failures by, e.g. the exception's class), or a
//! release; `"last": true` says the process ends after this answer (a memory
//! limit reached: it is handed no other item). Or a release, `{"ok": false, "release_after": "30s"}` — not done,
//! not failed: try it again later (`[on_release]`); before it, any number of `{"progress": "…"}` lines (lease
//! mode's `:progress`). Anything else is not the protocol, and ends the process.

use serde_json::{Map, Value};

use crate::action::capture::{clip_error, OUTPUT_LIMIT};
use crate::action::outcome::Kind;
use crate::action::{Blame, Outcome};

/// The longest failure kind kept, in characters.
const KIND_CHARS: usize = 200;

/// What a line says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// The item's answer; `last`: the process ends after it (`"last": true`), and
    /// is handed no other item.
    Answer { outcome: Outcome, last: bool },
    /// How far the item has come.
    Progress(String),
}

/// A line that is not the protocol: why, for the item's `:error`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotProtocol(pub String);

/// What `line` (without its newline) says.
pub fn read(line: &[u8]) -> Result<Line, NotProtocol> {
    let not = |why: &str| NotProtocol(format!("{why}: {}", excerpt(line)));
    let Ok(Value::Object(fields)) = serde_json::from_slice::<Value>(line) else {
        return Err(not("a line that is not a JSON object"));
    };
    match (fields.get("ok"), fields.get("progress")) {
        (Some(Value::Bool(ok)), _) => {
            let last = fields.get("last") == Some(&Value::Bool(true));
            let outcome = answer(*ok, &fields).map_err(|why| not(&why))?;
            Ok(Line::Answer { outcome, last })
        }
        (Some(_), _) => Err(not("`ok` that is neither true nor false")),
        (None, Some(progress)) => Ok(Line::Progress(text(progress))),
        (None, None) => Err(not("a line with neither `ok` nor `progress`")),
    }
}

/// The outcome an answer says.
fn answer(ok: bool, fields: &Map<String, Value>) -> Result<Outcome, String> {
    let output = match fields.get("output") {
        None | Some(Value::Null) => None,
        Some(output) => {
            let mut bytes = text(output).into_bytes();
            bytes.truncate(OUTPUT_LIMIT);
            Some(bytes)
        }
    };
    if ok {
        return Ok(Outcome {
            output,
            ..Outcome::success()
        });
    }
    let release_after = duration_field(fields, "release_after")?
        .map(|s| u32::try_from(s).unwrap_or(u32::MAX));
    let error = match (fields.get("error"), release_after) {
        (None | Some(Value::Null), Some(after)) => format!("released for {after}s"),
        (None | Some(Value::Null), None) => {
            "the worker answered {\"ok\": false} without an `error`".to_string()
        }
        (Some(error), _) => text(error),
    };
    let retry_after = duration_field(fields, "retry_after")?;
    let kind = match fields.get("kind") {
        None | Some(Value::Null) => None,
        Some(kind) => Some(Box::new(Kind(text(kind).chars().take(KIND_CHARS).collect()))),
    };
    if release_after.is_some() {
        // The handler's own decision about the item: not trouble downstream.
        return Ok(Outcome {
            error: Some(clip_error(error)),
            output,
            release_after,
            kind,
            ..Outcome::default()
        });
    }
    Ok(Outcome {
        error: Some(clip_error(error)),
        output,
        retry_after: retry_after.map(|s| u32::try_from(s).unwrap_or(u32::MAX)),
        kind,
        // "Try again later" is trouble downstream, for the circuit breaker.
        blame: match retry_after {
            Some(_) => Blame::Downstream,
            None => Blame::Item,
        },
        ..Outcome::default()
    })
}

/// The field `name`, a duration in seconds, if the answer has it.
fn duration_field(fields: &Map<String, Value>, name: &str) -> Result<Option<u64>, String> {
    match fields.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => seconds(value).map(Some).ok_or_else(|| {
            format!("a `{name}` that is not a duration (\"30s\") or a number of seconds")
        }),
    }
}

/// A string as it is, anything else as its JSON.
fn text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// `"30s"`, `"2m"`, or a number of seconds.
fn seconds(value: &Value) -> Option<u64> {
    match value {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => match s.trim().parse::<u64>() {
            Ok(n) => Some(n),
            Err(_) => humantime::parse_duration(s.trim()).ok().map(|d| d.as_secs()),
        },
        _ => None,
    }
}

/// The start of `line`, for a message: at most 200 characters.
pub fn excerpt(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(line);
    let text = text.trim();
    match text.char_indices().nth(200) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(line: &str) -> Outcome {
        match read(line.as_bytes()) {
            Ok(Line::Answer { outcome, .. }) => outcome,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn reads_success_and_failure_with_their_output() {
        assert_eq!(answered(r#"{"ok": true}"#), Outcome::success());
        let done = answered(r#"{"ok": true, "output": "sent"}"#);
        assert_eq!(done.output.as_deref(), Some(&b"sent"[..]));
        let failed = answered(r#"{"ok": false, "error": "mailbox full", "output": {"code": 552}}"#);
        assert_eq!(failed.error.as_deref(), Some("mailbox full"));
        assert_eq!(failed.blame, Blame::Item);
        assert_eq!(failed.output.as_deref(), Some(&br#"{"code":552}"#[..]));
        let kinded = answered(r#"{"ok": false, "error": "card 4 declined", "kind": "App\\Declined"}"#);
        assert_eq!(kinded.kind.map(|k| k.0).as_deref(), Some("App\\Declined"));
        let bare = answered(r#"{"ok": false}"#);
        assert!(bare.error.unwrap().contains("without an `error`"));
    }

    #[test]
    fn retry_after_is_trouble_downstream() {
        for line in [
            r#"{"ok": false, "error": "SMTP down", "retry_after": "30s"}"#,
            r#"{"ok": false, "error": "SMTP down", "retry_after": 30}"#,
            r#"{"ok": false, "error": "SMTP down", "retry_after": "30"}"#,
        ] {
            let outcome = answered(line);
            assert_eq!((outcome.blame, outcome.retry_after), (Blame::Downstream, Some(30)));
        }
        assert!(read(br#"{"ok": false, "retry_after": "soon"}"#).is_err());
    }

    #[test]
    fn a_release_is_the_items_own_answer_not_trouble_downstream() {
        for line in [
            r#"{"ok": false, "release_after": 30}"#,
            r#"{"ok": false, "release_after": "30s", "error": "Lock held"}"#,
        ] {
            let outcome = answered(line);
            assert_eq!(outcome.release_after, Some(30));
            assert_eq!((outcome.blame, outcome.retry_after), (Blame::Item, None));
            assert!(!outcome.succeeded());
        }
        assert_eq!(answered(r#"{"ok": false, "release_after": 0}"#).error.as_deref(), Some("released for 0s"));
        assert!(read(br#"{"ok": false, "release_after": "later"}"#).is_err());
    }

    #[test]
    fn a_last_answer_says_the_process_ends_after_it() {
        let last = |line: &str| match read(line.as_bytes()) {
            Ok(Line::Answer { last, .. }) => last,
            other => panic!("{line}: {other:?}"),
        };
        assert!(last(r#"{"ok": true, "last": true}"#));
        assert!(!last(r#"{"ok": true}"#));
        assert!(!last(r#"{"ok": false, "error": "x", "last": false}"#));
    }

    #[test]
    fn progress_and_what_is_not_the_protocol() {
        assert_eq!(read(br#"{"progress": "40%"}"#), Ok(Line::Progress("40%".into())));
        assert_eq!(read(br#"{"progress": 40}"#), Ok(Line::Progress("40".into())));
        for garbage in ["sent!", "[1]", r#"{"ok": "yes"}"#, r#"{"status": 1}"#, ""] {
            let why = read(garbage.as_bytes()).unwrap_err().0;
            assert!(why.ends_with(garbage), "{why}");
        }
        assert_eq!(excerpt(&[b'x'; 300]).chars().count(), 201);
    }
}
