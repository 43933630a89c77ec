//! `type = "nats"`: publish each item to NATS as one message. With `jetstream =
//! true` the message goes to a stream and the row is done only once the stream has
//! acknowledged it (its PubAck), with `Nats-Msg-Id` = the message id, so the
//! stream's de-duplication window keeps one message per row however often a row is
//! sent. Core NATS acknowledges nothing: the row is done once the message has left
//! for the server (flushed).
//!
//! - [`config`]: its `[action]` table — the servers, subject, message, credentials.
//! - [`client`]: the queue's one client in this process, its credentials and TLS,
//!   reconnection after a jittered backoff.
//! - [`judge`]: what a PubAck or an error means, and whose fault a failure is.
//! - `probe`: what `check` finds on the server (the stream, by its subject).
//!
//! In batch scope the batch's messages are all published, then every PubAck is
//! awaited: each item succeeds or fails on its own (a message per row).

mod client;
pub mod config;
mod judge;
mod probe;

use std::sync::Arc;
use std::time::Duration;

use async_nats::connection::State;
use async_nats::jetstream::context::PublishAckFuture;
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::{Context, ContextBuilder};
use async_nats::{Client, HeaderMap, HeaderValue};
use bytes::Bytes;
use futures::future::BoxFuture;
use tokio::sync::{Mutex, OnceCell};
use tokio::time::Instant;

use super::message::{each_or_one, render, Rendered};
use super::{Action, ActionError, Blame, External, Job, Outcome, Ready};
use crate::backoff::Backoff;
use crate::db::Item;
use client::Failed;
use config::{subject_problem, NatsAction};

/// The first wait after a failed first connection; it doubles from there, up to
/// [`client::MAX_WAIT`].
const FIRST_WAIT: Duration = Duration::from_millis(500);

/// A NATS action with its client, shared by all the queue's workers.
pub struct Nats {
    config: Arc<NatsAction>,
    /// Made when the queue first publishes (or `check` first looks).
    connected: OnceCell<Connected>,
    /// Until then: when the next attempt may be, and why the last one failed.
    first: Mutex<FirstAttempts>,
}

struct FirstAttempts {
    retry: Option<(Instant, String)>,
    backoff: Backoff,
}

/// The client, and with `jetstream = true` its JetStream context (whose
/// acknowledgements a task of its own collects).
struct Connected {
    client: Client,
    stream: Option<Context>,
}

/// One item's message, ready to publish.
struct Publish {
    subject: String,
    headers: HeaderMap,
    message: Rendered,
}

impl Nats {
    /// The action for `config`; it connects when it first publishes.
    pub fn new(config: &NatsAction) -> Result<Nats, ActionError> {
        // async-nats's rustls may find no process-wide crypto provider: ring, as
        // for MySQL and HTTP.
        let _ = rustls::crypto::ring::default_provider().install_default();
        Ok(Nats {
            config: Arc::new(config.clone()),
            connected: OnceCell::new(),
            first: Mutex::new(FirstAttempts {
                retry: None,
                backoff: Backoff::new(FIRST_WAIT, client::MAX_WAIT),
            }),
        })
    }

    /// The client, made on first use; until the first connection succeeds, one
    /// attempt at a time, each a jittered backoff after the last. `Err` says why
    /// there is none.
    async fn connected(&self) -> Result<&Connected, Outcome> {
        if let Some(connected) = self.connected.get() {
            return Ok(connected);
        }
        let mut first = self.first.lock().await;
        if let Some(connected) = self.connected.get() {
            return Ok(connected);
        }
        if let Some((retry_at, error)) = &first.retry {
            if Instant::now() < *retry_at {
                return Err(Outcome::unreached(format!("{error} (trying again soon)")));
            }
        }
        let client = match client::connect(&self.config).await {
            Ok(client) => client,
            Err(Failed::Queue(error)) => {
                return Err(Outcome {
                    blame: Blame::Queue,
                    ..Outcome::failure(error)
                })
            }
            Err(Failed::Unreachable(error)) => {
                let retry_at = Instant::now() + first.backoff.next_wait();
                first.retry = Some((retry_at, error.clone()));
                return Err(Outcome::unreached(error));
            }
        };
        let stream = self.config.jetstream.then(|| {
            ContextBuilder::new()
                .timeout(self.config.common.timeout)
                .build(client.clone())
        });
        let connected = Connected { client, stream };
        Ok(self.connected.get_or_init(|| async { connected }).await)
    }

    /// The client, while it is connected; `Err` (a downstream failure) while not.
    async fn client(&self) -> Result<&Connected, Outcome> {
        let connected = self.connected().await?;
        match connected.client.connection_state() {
            State::Connected => Ok(connected),
            _ => Err(Outcome::unreached(format!(
                "not connected to NATS at {} (connecting again)",
                self.config.servers
            ))),
        }
    }

    /// Publishes the job's items: one outcome for an item, or in batch scope the
    /// batch's with each item's in [`Outcome::each`].
    async fn publish(&self, job: Job<'_>) -> Outcome {
        each_or_one(self.publish_all(job.items, job.queue).await)
    }

    async fn publish_all(&self, items: &[Item], queue: &str) -> Vec<Outcome> {
        let connected = match self.client().await {
            Ok(connected) => connected,
            Err(outcome) => return vec![outcome; items.len()],
        };
        let messages: Vec<Result<Publish, Outcome>> = items
            .iter()
            .map(|item| self.message(item, queue).map_err(Outcome::failure))
            .collect();
        match &connected.stream {
            Some(context) => to_stream(context, messages).await,
            None => to_subjects(&connected.client, messages).await,
        }
    }

    /// The item's subject, headers and message; `Err` when the row cannot make one.
    fn message(&self, item: &Item, queue: &str) -> Result<Publish, String> {
        let subject = self
            .config
            .subject
            .render(&|p| item.placeholder_bytes(p, queue), &|_, v| v);
        let subject = String::from_utf8(subject)
            .map_err(|_| "the subject from the row is not valid UTF-8".to_string())?;
        let malformed = subject.is_empty() || subject.split('.').any(str::is_empty);
        let why = subject_problem(&subject)
            .or_else(|| malformed.then(|| "a subject is tokens separated by single dots".into()));
        if let Some(why) = why {
            return Err(format!("cannot publish to the subject {subject:?}: {why}"));
        }
        let message = render(&self.config.message, item, queue)?;
        let mut headers = HeaderMap::new();
        for (name, value) in &message.headers {
            let value: HeaderValue = String::from_utf8_lossy(value).parse().map_err(|_| {
                format!("header `{name}` has a value that cannot be sent (a line break)")
            })?;
            headers.insert(name.as_str(), value);
        }
        let id: HeaderValue = message
            .id
            .parse()
            .map_err(|_| "the message id has a line break: it cannot be sent".to_string())?;
        // JetStream sets it from the message id; core NATS de-duplicates nothing,
        // but subscribers can.
        if !self.config.jetstream {
            headers.insert("Nats-Msg-Id", id);
        }
        Ok(Publish {
            subject,
            headers,
            message,
        })
    }
}


impl Ready for NatsAction {
    fn ready(&self) -> Result<Action, ActionError> {
        Ok(Action::external(Nats::new(self)?))
    }
}

impl External for Nats {
    fn run<'a>(&'a self, job: Job<'a>) -> BoxFuture<'a, Outcome> {
        Box::pin(self.publish(job))
    }

    fn waiting_for(&self) -> Option<String> {
        let waiting = match self.config.jetstream {
            true => "for the stream's acknowledgement",
            false => "to hand the message to the server",
        };
        Some(format!("{waiting} (NATS at {})", self.config.servers))
    }
}

/// JetStream: every message published, then every PubAck awaited.
async fn to_stream(context: &Context, messages: Vec<Result<Publish, Outcome>>) -> Vec<Outcome> {
    let mut sent: Vec<Result<PublishAckFuture, Outcome>> = Vec::with_capacity(messages.len());
    for message in messages {
        sent.push(match message {
            Ok(publish) => {
                let to_send = PublishMessage::build()
                    .payload(Bytes::from(publish.message.body))
                    .headers(publish.headers)
                    .message_id(&publish.message.id);
                context
                    .send_publish(publish.subject, to_send)
                    .await
                    .map_err(|e| judge::publish_failed(&e))
            }
            Err(outcome) => Err(outcome),
        });
    }
    let mut outcomes = Vec::with_capacity(sent.len());
    for one in sent {
        outcomes.push(match one {
            Ok(ack) => judge::acknowledged(ack.await),
            Err(outcome) => outcome,
        });
    }
    outcomes
}

/// Core NATS: every message published, then the client flushed to the server.
async fn to_subjects(client: &Client, messages: Vec<Result<Publish, Outcome>>) -> Vec<Outcome> {
    let mut outcomes = Vec::with_capacity(messages.len());
    for message in messages {
        outcomes.push(match message {
            Ok(publish) => client
                .publish_with_headers(
                    publish.subject,
                    publish.headers,
                    Bytes::from(publish.message.body),
                )
                .await
                .map_or_else(|e| judge::core_failed(&e), |()| Outcome::success()),
            Err(outcome) => outcome,
        });
    }
    if let Err(e) = client.flush().await {
        let failed = Outcome::downstream(format!("NATS: cannot flush to the server: {e}"));
        for outcome in outcomes.iter_mut().filter(|o| o.succeeded()) {
            *outcome = failed.clone();
        }
    }
    outcomes
}
