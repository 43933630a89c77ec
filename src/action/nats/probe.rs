//! What `check` finds on NATS: that the server answers, with JetStream that a
//! stream takes the subject (the stream's info: its name and de-duplication
//! window), and what the sample row's message would look like. Nothing is
//! published.

use async_nats::jetstream::Context;

use super::Nats;
use futures::future::BoxFuture;

use crate::action::deadline;
use crate::action::{Probe, Probed};
use crate::db::Item;

impl Probe for Nats {
    fn probe<'a>(&'a self, queue: &'a str, sample: Option<&'a Item>) -> BoxFuture<'a, Vec<Probed>> {
        let unanswered = format!("cannot reach NATS at {}: no answer", self.config.servers);
        let unanswered = Probed::error("url", unanswered);
        Box::pin(deadline::probe(self.config.common.timeout, look(self, queue, sample), unanswered))
    }
}

async fn look(nats: &Nats, queue: &str, sample: Option<&Item>) -> Vec<Probed> {
    let servers = &nats.config.servers;
    let connected = match nats.connected().await {
        Ok(connected) => connected,
        Err(outcome) => return vec![Probed::error("url", outcome.error.unwrap_or_default())],
    };
    // A flush is answered once the client is connected (a PING and its PONG).
    if let Err(e) = connected.client.flush().await {
        return vec![Probed::error("url", format!("cannot reach NATS at {servers}: {e}"))];
    }
    let message = sample.map(|item| (item, nats.message(item, queue)));
    let subject = match &message {
        Some((_, Ok(publish))) => Some(publish.subject.clone()),
        _ => nats.config.subject.as_literal(),
    };
    let mut stream = String::new();
    if let (Some(context), Some(subject)) = (&connected.stream, &subject) {
        match stream_of(context, subject).await {
            Ok(found) => stream = format!(", taken by the stream {found}"),
            Err(why) => return vec![Probed::error("subject", why)],
        }
    }
    let Some((item, message)) = message else {
        return vec![Probed::note(
            "url",
            format!("NATS at {servers} answers{stream}; no row is waiting to show a message of"),
        )];
    };
    let key = &item.columns.names[item.key_index];
    match message {
        Ok(publish) => vec![Probed::note(
            "subject",
            format!(
                "the message for the row {key} = {} would go to NATS at {servers}, subject \
                 {:?}{stream}: {}",
                item.key_text(),
                publish.subject,
                publish.message.describe(),
            ),
        )],
        Err(error) => vec![Probed::warning(
            "subject",
            format!(
                "the row {key} = {} cannot make a message, and would fail: {error}",
                item.key_text()
            ),
        )],
    }
}

/// `ORDERS (de-duplicating within 2m)`: the stream that takes `subject`, or why
/// there is none.
async fn stream_of(context: &Context, subject: &str) -> Result<String, String> {
    let name = context.stream_by_subject(subject).await.map_err(|e| {
        format!(
            "no JetStream stream takes the subject {subject:?} ({e}): create one whose subjects \
             include it (tableq creates nothing)"
        )
    })?;
    let stream = context
        .get_stream(&name)
        .await
        .map_err(|e| format!("cannot read the stream {name}'s info: {e}"))?;
    let window = stream.cached_info().config.duplicate_window;
    Ok(format!(
        "{name} (de-duplicating within {})",
        humantime::format_duration(window)
    ))
}
