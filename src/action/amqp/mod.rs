//! `type = "amqp"`: publish each item to RabbitMQ as one persistent message and
//! wait for the broker's confirm — the transactional outbox's relay. The row is
//! done only once the broker has the message; a nack, or a mandatory message that
//! no queue is bound for, fails its row with the reason in `:error`.
//!
//! - [`config`]: its `[action]` table — the URL, exchange, routing key, message.
//! - [`link`]: the queue's one connection in this process, a channel per publisher
//!   (reused), reconnection after a jittered backoff.
//! - [`judge`]: what a confirm, a nack, a return or an error means.
//! - `probe`: what `check` finds on the broker.
//!
//! In batch scope the batch's messages are all published, then every confirm is
//! awaited: each item succeeds or fails on its own (a message per row).

pub mod config;
mod judge;
mod link;
mod probe;

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use lapin::options::BasicPublishOptions;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Channel, PublisherConfirm};

use super::message::{each_or_one, render, Rendered};
use super::{Action, ActionError, External, Job, Outcome, Ready};
use crate::db::Item;
use config::{amqp_uri, AmqpAction};
use link::Link;

/// An AMQP action with its connection, shared by all the queue's workers.
pub struct Amqp {
    config: Arc<AmqpAction>,
    link: Link,
}

/// One item's message, ready to publish.
struct Publish {
    routing_key: ShortString,
    message: Rendered,
}

impl Amqp {
    /// The action for `config`; it connects when it first publishes.
    pub fn new(config: &AmqpAction) -> Result<Amqp, ActionError> {
        // lapin's rustls is built without a default crypto provider: ring, as for
        // MySQL and HTTP.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let uri = amqp_uri(&config.url).map_err(|e| ActionError(format!("`action.url`: {e}")))?;
        let link = Link::new(uri, config.server.clone(), config.ca_pem.clone());
        Ok(Amqp {
            config: Arc::new(config.clone()),
            link,
        })
    }

    /// Publishes the job's items: one outcome for an item, or in batch scope the
    /// batch's with each item's in [`Outcome::each`].
    async fn publish(&self, job: Job<'_>) -> Outcome {
        each_or_one(self.publish_all(job.items, job.queue).await)
    }

    /// Publishes every item on one channel, then awaits every confirm.
    async fn publish_all(&self, items: &[Item], queue: &str) -> Vec<Outcome> {
        let lent = match self.link.lend().await {
            Ok(lent) => lent,
            Err(error) => return vec![Outcome::unreached(error); items.len()],
        };
        let mut sent: Vec<Result<PublisherConfirm, Outcome>> = Vec::with_capacity(items.len());
        for item in items {
            sent.push(match self.message(item, queue) {
                Ok(publish) => self.send(&lent.channel, publish).await,
                Err(error) => Err(Outcome::failure(error)),
            });
        }
        let mut outcomes = Vec::with_capacity(sent.len());
        for one in sent {
            outcomes.push(match one {
                Ok(confirm) => judge::confirmed(confirm.await),
                Err(outcome) => outcome,
            });
        }
        outcomes
    }

    async fn send(&self, channel: &Channel, publish: Publish) -> Result<PublisherConfirm, Outcome> {
        let options = BasicPublishOptions {
            mandatory: self.config.mandatory,
            immediate: false,
        };
        let properties = self.properties(&publish.message)?;
        channel
            .basic_publish(
                self.config.exchange.as_str().into(),
                publish.routing_key,
                options,
                &publish.message.body,
                properties,
            )
            .await
            .map_err(|e| judge::failed(&e))
    }

    /// The item's routing key and message; `Err` when the row cannot make one.
    fn message(&self, item: &Item, queue: &str) -> Result<Publish, String> {
        let routing_key = self
            .config
            .routing_key
            .render(&|p| item.placeholder_bytes(p, queue), &|_, v| v);
        let routing_key = String::from_utf8_lossy(&routing_key).into_owned();
        let routing_key = ShortString::try_new(routing_key)
            .map_err(|_| "the routing key is longer than 255 bytes, the most AMQP carries")?;
        Ok(Publish {
            routing_key,
            message: render(&self.config.message, item, queue)?,
        })
    }

    /// Persistent, with the message id, content type, headers and a timestamp.
    fn properties(&self, message: &Rendered) -> Result<BasicProperties, Outcome> {
        let short = |what: &str, text: &str| {
            ShortString::try_new(text).map_err(|_| {
                Outcome::failure(format!(
                    "the {what} is longer than 255 bytes, the most AMQP carries"
                ))
            })
        };
        let mut headers = FieldTable::default();
        for (name, value) in &message.headers {
            let value = AMQPValue::LongString(LongString::from(value.clone()));
            headers.insert(short("header name", name)?, value);
        }
        let mut properties = BasicProperties::default()
            .with_delivery_mode(2)
            .with_message_id(short("message id", &message.id)?)
            .with_timestamp(unix_seconds())
            .with_app_id("tableq".into());
        if let Some(content_type) = &self.config.content_type {
            properties = properties.with_content_type(short("content type", content_type)?);
        }
        if !message.headers.is_empty() {
            properties = properties.with_headers(headers);
        }
        Ok(properties)
    }
}


impl Ready for AmqpAction {
    fn ready(&self) -> Result<Action, ActionError> {
        Ok(Action::external(Amqp::new(self)?))
    }
}

impl External for Amqp {
    fn run<'a>(&'a self, job: Job<'a>) -> BoxFuture<'a, Outcome> {
        Box::pin(self.publish(job))
    }

    fn waiting_for(&self) -> Option<String> {
        Some(format!("for RabbitMQ at {} to confirm", self.link.server))
    }
}

fn unix_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
