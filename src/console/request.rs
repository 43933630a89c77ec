//! What an action request asks, read from the API's JSON or a page's form: the
//! action from the path (`pause`, `resume`, `failed/retry`, `failed/discard`), the
//! rows (`keys`, `group`, `all`), a pause's `reason` and duration (`for`, as the
//! CLI's `--for`: `10m`, `2h`).

use std::collections::HashMap;
use std::time::Duration;

use serde::Deserialize;

use super::act::{Action, Rows};
use crate::config::queue::failed::Change;

/// The API's body: `{"keys": […]}`, `{"group": "…"}` or `{"all": true}`; a pause's
/// `{"reason": "…", "for": "10m"}`. Every field may be left out.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Body {
    #[serde(default)]
    keys: Vec<KeyText>,
    group: Option<String>,
    #[serde(default)]
    all: bool,
    #[serde(default)]
    reason: String,
    #[serde(rename = "for")]
    duration: Option<String>,
}

/// A key as JSON gives it: a string, or a number.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum KeyText {
    Text(String),
    Number(serde_json::Number),
}

impl KeyText {
    fn text(self) -> String {
        match self {
            KeyText::Text(text) => text,
            KeyText::Number(n) => n.to_string(),
        }
    }
}

/// The action a `POST /api/queues/{queue}/{action}` asks for; an empty body is `{}`.
pub fn json_action(action: &str, body: &[u8]) -> Result<Action, String> {
    let body: Body = match body.iter().all(u8::is_ascii_whitespace) {
        true => Body::default(),
        false => serde_json::from_slice(body).map_err(|e| {
            format!(
                "the body must be JSON: {{\"keys\": [\"…\"]}}, {{\"group\": \"…\"}}, \
                 {{\"all\": true}} or, to pause, {{\"reason\": \"…\", \"for\": \"10m\"}} ({e})"
            )
        })?,
    };
    let keys = body.keys.into_iter().map(KeyText::text).collect();
    action_of(
        action,
        keys,
        body.group,
        body.all,
        body.reason,
        body.duration,
    )
}

/// The action a page's form posts (fields `key`, `group`, `all`, `reason`, `for`).
pub fn form_action(action: &str, fields: &HashMap<String, String>) -> Result<Action, String> {
    let field = |name: &str| fields.get(name).map(|v| v.trim().to_string());
    let keys: Vec<String> = field("key")
        .map(|k| {
            k.split([',', '\n', ' '])
                .map(str::trim)
                .filter(|k| !k.is_empty())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    let group = field("group").filter(|g| !g.is_empty());
    let all = field("all").is_some_and(|v| v == "1" || v == "true");
    let duration = field("for").filter(|d| !d.is_empty());
    action_of(
        action,
        keys,
        group,
        all,
        field("reason").unwrap_or_default(),
        duration,
    )
}

fn action_of(
    action: &str,
    keys: Vec<String>,
    group: Option<String>,
    all: bool,
    reason: String,
    duration: Option<String>,
) -> Result<Action, String> {
    let change = match action {
        "pause" => {
            let duration = duration.map(|d| parse_duration(&d)).transpose()?;
            return Ok(Action::Pause { reason, duration });
        }
        "resume" => return Ok(Action::Resume),
        "failed/retry" => Change::Retry,
        "failed/discard" => Change::Discard,
        other => {
            return Err(format!(
                "no action `{other}`: the actions are pause, resume, failed/retry and \
                 failed/discard"
            ))
        }
    };
    let rows = match (keys.is_empty(), group, all) {
        (false, None, false) => Rows::Keys(keys),
        (true, Some(group), false) => Rows::Group(group),
        (true, None, true) => Rows::All,
        (true, None, false) => Rows::Keys(Vec::new()),
        _ => return Err("name the rows one way: keys, group or all".to_string()),
    };
    Ok(Action::Change { change, rows })
}

/// `10m`, `2h 30m`: a pause's duration, as `tableq pause --for` takes it.
fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text)
        .map_err(|e| format!("`for` = {text:?}: {e}; write a duration such as 30s, 10m or 2h"))
}

/// A form's fields (`application/x-www-form-urlencoded`); a repeated one, its last.
pub fn form_fields(body: &[u8]) -> HashMap<String, String> {
    form_urlencoded::parse(body).into_owned().collect()
}

/// The value of `name` in a URL's query.
pub fn query_value(query: Option<&str>, name: &str) -> Option<String> {
    form_urlencoded::parse(query?.as_bytes())
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_rows_and_a_pause_from_json_and_forms() {
        let retry = json_action("failed/retry", br#"{"keys": ["a", 7]}"#).unwrap();
        assert_eq!(
            retry,
            Action::Change {
                change: Change::Retry,
                rows: Rows::Keys(vec!["a".into(), "7".into()])
            }
        );
        let all = json_action("failed/discard", br#"{"all": true}"#).unwrap();
        assert!(matches!(
            all,
            Action::Change {
                rows: Rows::All,
                ..
            }
        ));
        let pause = json_action("pause", br#"{"reason": "deploy", "for": "10m"}"#).unwrap();
        assert_eq!(
            pause,
            Action::Pause {
                reason: "deploy".into(),
                duration: Some(Duration::from_secs(600))
            }
        );
        assert_eq!(json_action("resume", b"").unwrap(), Action::Resume);
        assert!(json_action("failed/retry", br#"{"keys": ["1"], "all": true}"#).is_err());
        assert!(json_action("pause", br#"{"for": "soon"}"#).is_err());
        assert!(json_action("explode", b"{}").is_err());
        assert!(
            json_action("failed/retry", br#"{"key": "1"}"#).is_err(),
            "unknown field"
        );
        let fields = form_fields(b"csrf=x&group=order+%23+not+found");
        assert_eq!(
            form_action("failed/retry", &fields).unwrap(),
            Action::Change {
                change: Change::Retry,
                rows: Rows::Group("order # not found".into())
            }
        );
        assert_eq!(
            query_value(Some("a=1&key=x%20y"), "key").as_deref(),
            Some("x y")
        );
    }
}
