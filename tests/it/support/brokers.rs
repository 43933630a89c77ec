//! The message brokers this machine runs — RabbitMQ on 127.0.0.1:5672 (guest/guest)
//! and NATS with JetStream on 127.0.0.1:4222 — as the amqp and nats tests use them:
//! names of a test's own (a random suffix), so tests run in parallel and never see
//! each other's messages, and everything a test declares deleted when it ends (and
//! expiring by itself on the broker, should a test die before).

use std::collections::BTreeMap;
use std::time::Duration;

use async_nats::jetstream;
use lapin::options::{
    BasicGetOptions, ExchangeDeclareOptions, ExchangeDeleteOptions, QueueBindOptions,
    QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{Channel, Connection, ConnectionProperties, ExchangeKind};

pub const RABBITMQ_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";
pub const RABBITMQ: &str = "127.0.0.1:5672";
pub const NATS_URL: &str = "nats://127.0.0.1:4222";
pub const NATS: &str = "127.0.0.1:4222";

/// What a broker declared for a test lives at most this long.
const EXPIRES: Duration = Duration::from_secs(15 * 60);

/// `prefix` and a random suffix: a name no other test (or earlier run) uses.
pub fn unique(prefix: &str) -> String {
    let suffix: String = (0..10).map(|_| fastrand::lowercase()).collect();
    format!("{prefix}{suffix}")
}

/// A connection to RabbitMQ for one test, and the queues and exchanges it made.
pub struct Rabbit {
    connection: Connection,
    pub channel: Channel,
    queues: Vec<String>,
    exchanges: Vec<String>,
}

/// One message as a consumer got it.
#[derive(Debug, Clone)]
pub struct Got {
    pub message_id: Option<String>,
    pub content_type: Option<String>,
    pub persistent: bool,
    pub routing_key: String,
    pub body: Vec<u8>,
}

impl Rabbit {
    pub async fn connect() -> Rabbit {
        let connection = Connection::connect(RABBITMQ_URL, ConnectionProperties::default())
            .await
            .expect("connect to RabbitMQ on 127.0.0.1:5672 (guest/guest)");
        let channel = connection.create_channel().await.expect("open a channel");
        Rabbit {
            connection,
            channel,
            queues: Vec::new(),
            exchanges: Vec::new(),
        }
    }

    /// Declares a durable queue `name` (with `arguments`, as `x-max-length`), which
    /// the broker deletes by itself after a while unused.
    pub async fn queue(&mut self, name: &str, arguments: &[(&str, AMQPValue)]) {
        let mut table = BTreeMap::new();
        table.insert(
            "x-expires".into(),
            AMQPValue::LongUInt(EXPIRES.as_millis() as u32),
        );
        for (key, value) in arguments {
            table.insert((*key).into(), value.clone());
        }
        let options = QueueDeclareOptions {
            durable: true,
            ..QueueDeclareOptions::default()
        };
        self.channel
            .queue_declare(name.into(), options, FieldTable::from(table))
            .await
            .expect("declare a queue");
        self.queues.push(name.to_string());
    }

    /// Declares a direct exchange `name` (deleted with its last binding).
    pub async fn exchange(&mut self, name: &str) {
        let options = ExchangeDeclareOptions {
            auto_delete: true,
            ..ExchangeDeclareOptions::default()
        };
        self.channel
            .exchange_declare(
                name.into(),
                ExchangeKind::Direct,
                options,
                FieldTable::default(),
            )
            .await
            .expect("declare an exchange");
        self.exchanges.push(name.to_string());
    }

    pub async fn bind(&self, queue: &str, exchange: &str, routing_key: &str) {
        self.channel
            .queue_bind(
                queue.into(),
                exchange.into(),
                routing_key.into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .expect("bind a queue");
    }

    /// Takes every message `queue` holds now, as a consumer gets them.
    pub async fn take_all(&self, queue: &str) -> Vec<Got> {
        let mut all = Vec::new();
        let options = BasicGetOptions { no_ack: true };
        while let Some(got) = self
            .channel
            .basic_get(queue.into(), options)
            .await
            .expect("get a message")
        {
            let delivery = got.delivery;
            let properties = &delivery.properties;
            all.push(Got {
                message_id: properties.message_id().as_ref().map(|s| s.to_string()),
                content_type: properties.content_type().as_ref().map(|s| s.to_string()),
                persistent: *properties.delivery_mode() == Some(2),
                routing_key: delivery.routing_key.to_string(),
                body: delivery.data,
            });
        }
        all
    }

    /// Deletes what the test declared.
    pub async fn clean_up(self) {
        for queue in &self.queues {
            let _ = self
                .channel
                .queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
                .await;
        }
        for exchange in &self.exchanges {
            let _ = self
                .channel
                .exchange_delete(exchange.as_str().into(), ExchangeDeleteOptions::default())
                .await;
        }
        let _ = self.connection.close(200, "done".into()).await;
    }
}

/// A JetStream stream of one test's own, on subjects `<prefix>.>`.
pub struct Stream {
    pub context: jetstream::Context,
    pub name: String,
    /// The stream takes every subject under `<subjects>.`.
    pub subjects: String,
}

/// One message the stream holds.
#[derive(Debug, Clone)]
pub struct Stored {
    pub subject: String,
    pub message_id: Option<String>,
    pub payload: Vec<u8>,
}

impl Stream {
    /// A fresh stream (in memory, expiring its messages after a while) that takes
    /// the subjects under a random prefix, de-duplicating within two minutes.
    pub async fn create() -> Stream {
        Stream::create_with(|config| config).await
    }

    /// A fresh stream as [`Stream::create`] makes it, its config changed by `change`
    /// (limits, a discard policy).
    pub async fn create_with(
        change: impl FnOnce(jetstream::stream::Config) -> jetstream::stream::Config,
    ) -> Stream {
        let client = async_nats::connect(NATS_URL)
            .await
            .expect("connect to NATS on 127.0.0.1:4222");
        let context = jetstream::new(client);
        let name = unique("TQ_").to_uppercase();
        let subjects = unique("tq.");
        let config = jetstream::stream::Config {
            name: name.clone(),
            subjects: vec![format!("{subjects}.>")],
            storage: jetstream::stream::StorageType::Memory,
            max_age: EXPIRES,
            duplicate_window: Duration::from_secs(120),
            ..Default::default()
        };
        context
            .create_stream(change(config))
            .await
            .expect("create a JetStream stream (is the server started with -js?)");
        Stream {
            context,
            name,
            subjects,
        }
    }

    /// Every message the stream holds, read by sequence number.
    pub async fn messages(&self) -> Vec<Stored> {
        let mut stream = self
            .context
            .get_stream(&self.name)
            .await
            .expect("the stream");
        let state = stream
            .info()
            .await
            .expect("the stream's info")
            .state
            .clone();
        let mut all = Vec::new();
        if state.messages == 0 {
            return all;
        }
        for sequence in state.first_sequence..=state.last_sequence {
            let Ok(message) = stream.get_raw_message(sequence).await else {
                continue;
            };
            all.push(Stored {
                subject: message.subject.to_string(),
                message_id: message
                    .headers
                    .get("Nats-Msg-Id")
                    .map(|v| v.as_str().to_string()),
                payload: message.payload.to_vec(),
            });
        }
        all
    }

    pub async fn delete(self) {
        let _ = self.context.delete_stream(&self.name).await;
    }
}

/// How often each message id occurs.
pub fn tally<'a>(ids: impl IntoIterator<Item = Option<&'a str>>) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for id in ids {
        *counts.entry(id.unwrap_or("").to_string()).or_insert(0) += 1;
    }
    counts
}
