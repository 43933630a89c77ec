//! The suite's NATS: a JetStream stream of the test's own, taking the subjects
//! under a random prefix; each row's `route` is the last part of its subject. The
//! stream drops a message published again within its duplicate window, by its
//! `Nats-Msg-Id`.

use async_nats::jetstream::stream::{Config, DiscardPolicy};

use super::{Again, Broker, Message};
use crate::support::brokers::{Stream, NATS};
use crate::support::QueueFile;

pub struct JetStream {
    stream: Stream,
}

impl Broker for JetStream {
    const KIND: &'static str = "nats";
    const SERVER: &'static str = NATS;
    const AGAIN: Again = Again::Dropped;

    async fn destination() -> JetStream {
        JetStream {
            stream: Stream::create().await,
        }
    }

    /// A stream that refuses new messages once full (`discard = new`).
    async fn holding(messages: u32) -> JetStream {
        let stream = Stream::create_with(|config| Config {
            max_messages: messages.into(),
            discard: DiscardPolicy::New,
            ..config
        })
        .await;
        JetStream { stream }
    }

    fn route(&self) -> String {
        "created".to_string()
    }

    fn to(&self) -> String {
        format!("{}.created", self.stream.subjects)
    }

    fn aim(&self, queue: QueueFile, server: &str) -> QueueFile {
        queue
            .action_set("url", format!("nats://{server}"))
            .action_set("subject", format!("{}.{{route}}", self.stream.subjects))
            .action_set("jetstream", true)
    }

    async fn received(&mut self) -> Vec<Message> {
        let held = self.stream.messages().await;
        held.into_iter()
            .map(|m| Message {
                id: m.message_id,
                to: m.subject,
                body: m.payload,
            })
            .collect()
    }

    fn refused_as_full(error: &str) -> bool {
        error.starts_with("NATS: the stream refused the message: maximum messages exceeded")
    }

    async fn clean_up(self) {
        self.stream.delete().await;
    }
}
