//! The suite's RabbitMQ: a durable queue of the test's own, which the default
//! exchange reaches by its name (each row's `route`). Every message read from it
//! must be persistent (delivery mode 2): tableq publishes nothing a broker restart
//! loses.

use lapin::types::{AMQPValue, LongString};

use super::{Again, Broker, Message};
use crate::support::brokers::{unique, Rabbit, RABBITMQ};
use crate::support::QueueFile;

pub struct RabbitMq {
    rabbit: Rabbit,
    queue: String,
    /// What was taken from the queue so far (a consumer takes each message once).
    taken: Vec<Message>,
}

impl RabbitMq {
    /// A fresh queue with `arguments`.
    async fn declare(arguments: &[(&str, AMQPValue)]) -> RabbitMq {
        let mut rabbit = Rabbit::connect().await;
        let queue = unique("tq-suite-");
        rabbit.queue(&queue, arguments).await;
        RabbitMq {
            rabbit,
            queue,
            taken: Vec::new(),
        }
    }
}

impl Broker for RabbitMq {
    const KIND: &'static str = "amqp";
    const SERVER: &'static str = RABBITMQ;
    const AGAIN: Again = Again::Delivered;

    async fn destination() -> RabbitMq {
        RabbitMq::declare(&[]).await
    }

    /// A queue that rejects publishes once full (`x-overflow = reject-publish`).
    async fn holding(messages: u32) -> RabbitMq {
        RabbitMq::declare(&[
            ("x-max-length", AMQPValue::LongInt(messages as i32)),
            (
                "x-overflow",
                AMQPValue::LongString(LongString::from("reject-publish")),
            ),
        ])
        .await
    }

    fn route(&self) -> String {
        self.queue.clone()
    }

    fn to(&self) -> String {
        self.queue.clone()
    }

    fn aim(&self, queue: QueueFile, server: &str) -> QueueFile {
        queue
            .action_set("url", format!("amqp://guest:guest@{server}/%2f"))
            .action_set("routing_key", "{route}")
    }

    async fn received(&mut self) -> Vec<Message> {
        for got in self.rabbit.take_all(&self.queue).await {
            assert!(got.persistent, "every message is persistent: {got:?}");
            self.taken.push(Message {
                id: got.message_id,
                to: got.routing_key,
                body: got.body,
            });
        }
        self.taken.clone()
    }

    fn refused_as_full(error: &str) -> bool {
        error
            == "RabbitMQ refused the message (basic.nack): a queue it routes to is full and \
                rejects publishes (x-overflow = reject-publish), or the broker could not store it"
    }

    async fn clean_up(self) {
        self.rabbit.clean_up().await;
    }
}
