//! A broker message made from one row, for the kinds that publish one per item
//! (`amqp`, `nats`): its id (`<queue>_<key>`, like `webhook-id`, or `message_id`),
//! its body (the row as JSON, or `body` rendered) and its headers; and a batch's
//! outcome made of its messages' outcomes.
//!
//! - [`config`]: the message's keys (`body`, `headers`, `message_id`), which each
//!   kind keeps in its own table.

pub mod config;

use std::sync::Arc;

use super::{Blame, Outcome};
use crate::db::row_json::item_json;
use crate::db::Item;
use config::Message;

/// One item's message, ready for a kind to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub id: String,
    pub body: Vec<u8>,
    pub headers: Vec<(String, Vec<u8>)>,
}

/// Renders `message` for `item`: placeholders take the row's values as they are.
/// `Err` says why the row cannot make a message (the item's failure).
pub fn render(message: &Message, item: &Item, queue: &str) -> Result<Rendered, String> {
    let value = |name: &str| item.placeholder_bytes(name, queue);
    let id = match &message.message_id {
        Some(template) => String::from_utf8_lossy(&template.render(&value, &|_, v| v)).into_owned(),
        None => format!("{queue}_{}", item.key_text()),
    };
    let body = match &message.body {
        Some(template) => template.render(&value, &|_, v| v),
        None => serde_json::to_vec(&item_json(item))
            .map_err(|e| format!("cannot encode the row as JSON: {e}"))?,
    };
    let headers = message
        .headers
        .iter()
        .map(|(name, template)| (name.clone(), template.render(&value, &|_, v| v)))
        .collect();
    Ok(Rendered { id, body, headers })
}

impl Rendered {
    /// `message id "email_1", headers x-tenant = "7", a 120-byte body`: what
    /// `check` says of a sample message.
    pub fn describe(&self) -> String {
        let headers: Vec<String> = self
            .headers
            .iter()
            .map(|(name, value)| format!("{name} = {:?}", String::from_utf8_lossy(value)))
            .collect();
        let headers = match headers.is_empty() {
            true => "no headers".to_string(),
            false => format!("headers {}", headers.join(", ")),
        };
        format!(
            "message id {:?}, {headers}, a {}-byte body",
            self.id,
            self.body.len()
        )
    }
}

/// One item's outcome; or a batch's: every item's in `each`, and the whole a
/// failure when any failed (downstream if any failed downstream, so the circuit
/// counts an outage once).
pub fn each_or_one(mut outcomes: Vec<Outcome>) -> Outcome {
    if outcomes.len() == 1 {
        return outcomes.remove(0);
    }
    let failed: Vec<&Outcome> = outcomes.iter().filter(|o| !o.succeeded()).collect();
    let Some(first) = failed.first() else {
        return Outcome {
            each: Some(Arc::new(outcomes)),
            ..Outcome::success()
        };
    };
    let blame = failed
        .iter()
        .map(|o| o.blame)
        .find(|b| *b == Blame::Downstream)
        .unwrap_or(first.blame);
    let error = format!(
        "{} of {} messages failed; the first: {}",
        failed.len(),
        outcomes.len(),
        first.error.as_deref().unwrap_or_default()
    );
    Outcome {
        blame,
        each: Some(Arc::new(outcomes)),
        ..Outcome::failure(error)
    }
}
