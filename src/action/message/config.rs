//! What a broker message is made of, for the kinds that publish one per item
//! (`amqp`, `nats`): its body — the row as a JSON object, as the HTTP body, or
//! `body = "{column}"` for a column that already holds the payload — its headers,
//! and its id (`<queue>_<key>`, or `message_id`). Each kind keeps these keys in its
//! own table; this is what they must be.

use std::collections::BTreeMap;

use crate::config::action::kind::Common;
use crate::config::validate::validator::Validator;
use crate::config::value::template::Template;

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
pub struct RawMessage<'a> {
    pub body: Option<&'a str>,
    pub headers: &'a BTreeMap<String, String>,
    pub message_id: Option<&'a str>,
}

/// Validates the message's keys, their placeholders noted in `common`;
/// `header_name` says why a header name cannot be sent, if it cannot.
pub fn validate(
    raw: RawMessage,
    v: &mut Validator,
    common: &mut Common,
    header_name: fn(&str) -> Option<String>,
) -> Message {
    let body = raw
        .body
        .and_then(|body| common.template(v, &["action", "body"], body));
    let mut headers = Vec::new();
    for (name, value) in raw.headers {
        if let Some(why) = header_name(name) {
            v.error(&["action", "headers", name], why);
            continue;
        }
        if let Some(template) = common.template(v, &["action", "headers", name], value) {
            headers.push((name.clone(), template));
        }
    }
    let message_id = raw
        .message_id
        .and_then(|id| common.template(v, &["action", "message_id"], id));
    Message {
        body,
        headers,
        message_id,
    }
}
