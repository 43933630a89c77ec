//! What `check` finds on RabbitMQ: that it can connect, that the exchange is there
//! (a passive declare, which creates nothing), and what the sample row's message
//! would look like. Nothing is published.

use lapin::options::ExchangeDeclareOptions;
use lapin::types::FieldTable;
use lapin::ExchangeKind;

use super::judge::describe;
use super::Amqp;
use futures::future::BoxFuture;

use crate::action::deadline;
use crate::action::{Probe, Probed};
use crate::db::Item;

impl Probe for Amqp {
    fn probe<'a>(&'a self, queue: &'a str, sample: Option<&'a Item>) -> BoxFuture<'a, Vec<Probed>> {
        let unanswered = format!("no answer from RabbitMQ at {}", self.link.server);
        let unanswered = Probed::error("url", unanswered);
        Box::pin(deadline::probe(self.config.common.timeout, look(self, queue, sample), unanswered))
    }
}

async fn look(amqp: &Amqp, queue: &str, sample: Option<&Item>) -> Vec<Probed> {
    let server = &amqp.link.server;
    let channel = match amqp.link.channel().await {
        Ok(channel) => channel,
        Err(error) => return vec![Probed::error("url", error)],
    };
    let exchange = amqp.config.exchange.as_str();
    if !exchange.is_empty() {
        let passive = ExchangeDeclareOptions {
            passive: true,
            ..ExchangeDeclareOptions::default()
        };
        let declared = channel
            .exchange_declare(
                exchange.into(),
                ExchangeKind::Direct,
                passive,
                FieldTable::default(),
            )
            .await;
        if let Err(e) = declared {
            return vec![Probed::error(
                "exchange",
                format!(
                    "the exchange {exchange:?} is not there on RabbitMQ at {server} ({}): declare \
                     it, and bind the queues that should get the messages (tableq declares \
                     nothing)",
                    describe(&e)
                ),
            )];
        }
    }
    let _ = channel.close(200, "tableq check is done".into()).await;
    let Some(item) = sample else {
        return vec![Probed::note(
            "url",
            format!(
                "RabbitMQ at {server} answers, and the exchange {exchange:?} is there; no row is \
                 waiting to show a message of"
            ),
        )];
    };
    let key = &item.columns.names[item.key_index];
    match amqp.message(item, queue) {
        Ok(publish) => vec![Probed::note(
            "routing_key",
            format!(
                "the message for the row {key} = {} would go to RabbitMQ at {server}, exchange \
                 {exchange:?} (it is there), routing key {:?}: {}{}",
                item.key_text(),
                publish.routing_key.as_str(),
                publish.message.describe(),
                amqp.config
                    .content_type
                    .as_ref()
                    .map(|t| format!(" ({t})"))
                    .unwrap_or_default()
            ),
        )],
        Err(error) => vec![Probed::warning(
            "routing_key",
            format!(
                "the row {key} = {} cannot make a message, and would fail: {error}",
                item.key_text()
            ),
        )],
    }
}
