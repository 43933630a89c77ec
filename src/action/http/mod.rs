//! `type = "http"`: deliver an item to a web endpoint, the way the careful webhook
//! senders do — the row as a JSON body, a signature when there is a secret, any 2xx
//! is success, and every failure explained in one line.
//!
//! - [`config`]: its `[action]` table — the URL, headers, signing keys, TLS.
//! - [`client`]: the client a queue's deliveries share, built by the kind's rules
//!   (which `[alerts]`' webhook follows too).
//! - [`request`]: one request — its URL from the row, headers, signature, body.
//! - [`judge`]: what the answer means, and whose fault a failure is.
//! - `signing`, `ssrf` (private destinations refused); the W3C trace context a
//!   delivery sends is `crate::trace_context`'s.
//! - `probe`: what `check` tells from a sample row's URL.

pub mod client;
pub mod config;
mod judge;
mod probe;
mod request;
pub mod signing;
mod ssrf;

use std::sync::Arc;

use futures::future::BoxFuture;
use reqwest::{Client, Method};

use super::{Action, ActionError, External, Job, Outcome, Ready, TraceNotes};
use crate::db::row_json::{item_json, items_json};
use crate::db::Item;
use config::HttpAction;
use crate::trace_context::{self, Traceparent};

/// An HTTP action with its client, shared by all the queue's workers.
pub struct Http {
    config: Arc<HttpAction>,
    client: Client,
    method: Method,
    /// Private destinations are refused (the row picks the host, and no opt-out).
    guarded: bool,
}

/// One delivery: the item whose values render the URL and headers, the body, the
/// message id, and the trace context sent as `traceparent`.
struct Delivery<'a> {
    item: &'a Item,
    queue: &'a str,
    body: serde_json::Value,
    id: String,
    traceparent: Option<Traceparent>,
}

impl Http {
    pub fn new(config: &HttpAction) -> Result<Http, ActionError> {
        let built = client::build(config)?;
        Ok(Http {
            config: Arc::new(config.clone()),
            client: built.client,
            method: built.method,
            guarded: built.guarded,
        })
    }

    /// Delivers the job: one item, its row as the body; or in batch scope the rows
    /// as a JSON array, signed once, its `webhook-id` derived from the batch's keys
    /// (the same batch, the same id). Its log lines carry the trace id it sends.
    async fn deliver(&self, job: Job<'_>) -> Outcome {
        let Some(first) = job.first() else {
            return Outcome::success();
        };
        let traceparent = self.sends_traceparent().then(|| match job.items {
            [item] => Traceparent::under(item.trace_parent()),
            _ => Traceparent::new(),
        });
        if let Some(sent) = &traceparent {
            tracing::Span::current().record("trace_id", sent.trace_id.as_str());
        }
        let sent = traceparent.as_ref().map(|t| {
            Box::new(TraceNotes {
                sent: Some((t.trace_id.clone(), t.span_id.clone())),
                ran: None,
            })
        });
        let (body, id) = match job.batch {
            true => (items_json(job.items), batch_id(job.queue, job.items)),
            false => (item_json(first), self.message_id(first, job.queue)),
        };
        // Only `{queue}` placeholders exist in batch scope: any item renders them.
        let delivery = Delivery {
            item: first,
            queue: job.queue,
            body,
            id,
            traceparent,
        };
        Outcome {
            trace: sent,
            ..self.send(delivery).await
        }
    }

    /// The item's message id (`webhook-id`): `message_id` rendered, else
    /// `<queue>_<key>`.
    fn message_id(&self, item: &Item, queue: &str) -> String {
        match &self.config.message_id {
            Some(template) => String::from_utf8_lossy(
                &template.render(&|p| item.placeholder_bytes(p, queue), &|_, v| v),
            )
            .into_owned(),
            None => format!("{queue}_{}", item.key_text()),
        }
    }

    /// Whether tableq sends the trace context: unless the queue's `headers` set
    /// `traceparent` themselves.
    fn sends_traceparent(&self) -> bool {
        !self.sets_header(trace_context::COLUMN)
    }

    /// Whether the queue's `headers` set `name`.
    fn sets_header(&self, name: &str) -> bool {
        self.config
            .headers
            .iter()
            .any(|(header, _)| header.eq_ignore_ascii_case(name))
    }
}


impl Ready for HttpAction {
    fn ready(&self) -> Result<Action, ActionError> {
        Ok(Action::external(Http::new(self)?))
    }
}

impl External for Http {
    fn run<'a>(&'a self, job: Job<'a>) -> BoxFuture<'a, Outcome> {
        Box::pin(self.deliver(job))
    }
}

/// A batch's `webhook-id`: the queue, then the first 16 bytes of the SHA-256 of the
/// batch's keys in order, as hex — the same for the same batch sent again.
pub fn batch_id(queue: &str, items: &[Item]) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    for item in items {
        hash.update(item.key_text().as_bytes());
        hash.update([0]);
    }
    let digest = hash.finalize();
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("{queue}_batch_{hex}")
}
