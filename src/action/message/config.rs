//! What a broker message is made of, for the kinds that publish one per item
//! (`amqp`, `nats`): its body — the row as a JSON object, as the HTTP body, or
//! `body = "{column}"` for a column that already holds the payload — its headers,
//! and its id (`<queue>_<key>`, or `message_id`). Each kind keeps these keys in its
//! own table; this is what they must be.

use std::collections::BTreeMap;

use crate::config::template::Template;
use crate::config::validator::Validator;

/// A message's body, headers and id, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// `None`: the row as a JSON object.
    pub body: Option<Template>,
    pub headers: Vec<(String, Template)>,
    /// `None`: `<queue>_<key>`.
    pub message_id: Option<Template>,
}

/// The message's keys as written in a kind's table.
pub(crate) struct RawMessage<'a> {
    pub body: Option<&'a str>,
    pub headers: &'a BTreeMap<String, String>,
    pub message_id: Option<&'a str>,
}

/// Validates the message's keys; `header_name` says why a header name cannot be
/// sent, if it cannot.
pub(crate) fn validate(
    raw: RawMessage,
    v: &mut Validator,
    header_name: fn(&str) -> Option<String>,
) -> Message {
    let mut headers = Vec::new();
    for (name, value) in raw.headers {
        if let Some(why) = header_name(name) {
            v.error(&["action", "headers", name], why);
            continue;
        }
        if let Some(template) = template(v, &["action", "headers", name], value) {
            headers.push((name.clone(), template));
        }
    }
    Message {
        body: raw
            .body
            .and_then(|body| template(v, &["action", "body"], body)),
        headers,
        message_id: raw
            .message_id
            .and_then(|id| template(v, &["action", "message_id"], id)),
    }
}

/// `text` as a template, or `None` after saying why it is not one.
pub(crate) fn template(v: &mut Validator, path: &[&str], text: &str) -> Option<Template> {
    Template::parse(text, v.env)
        .map_err(|e| v.error(path, format!("`{}`: {e}", path.join("."))))
        .ok()
}

impl Message {
    /// The placeholders of the body, the headers and the message id, each with its
    /// key.
    pub fn placeholders(&self) -> Vec<(String, &str)> {
        let mut found = Vec::new();
        if let Some(body) = &self.body {
            found.extend(body.placeholders().map(|p| ("action.body".to_string(), p)));
        }
        for (name, value) in &self.headers {
            let key = format!("action.headers.{name}");
            found.extend(value.placeholders().map(|p| (key.clone(), p)));
        }
        if let Some(id) = &self.message_id {
            found.extend(
                id.placeholders()
                    .map(|p| ("action.message_id".to_string(), p)),
            );
        }
        found
    }
}
