//! What NATS's answer means, and whose fault a failure is. A PubAck is success —
//! also one that says the stream holds the message already (a duplicate within its
//! window: sent before, by an attempt whose row was not marked). The stream's own
//! refusal (full, with `discard = new`; a message too large) is the item's failure;
//! no stream for the subject is the queue's (every item would fail alike); a
//! timeout or a lost connection is downstream (the circuit's business).

use std::error::Error as _;

use async_nats::jetstream;
use async_nats::jetstream::context::{PublishError, PublishErrorKind};
use async_nats::jetstream::publish::PublishAck;

use crate::action::{Blame, Outcome};

/// The outcome of one message's PubAck.
pub(super) fn acknowledged(ack: Result<PublishAck, PublishError>) -> Outcome {
    match ack {
        Ok(_) => Outcome::success(),
        Err(e) => publish_failed(&e),
    }
}

/// A JetStream publish, or its acknowledgement, that failed with `e`.
pub(super) fn publish_failed(e: &PublishError) -> Outcome {
    let refusal = e
        .source()
        .and_then(|source| source.downcast_ref::<jetstream::Error>());
    let (blame, error) = match (e.kind(), refusal) {
        (PublishErrorKind::StreamNotFound, _) => (
            Blame::Queue,
            "no JetStream stream takes this subject (the server had no responder for it): \
             create one whose subjects include it"
                .to_string(),
        ),
        (PublishErrorKind::MaxPayloadExceeded, _) => (Blame::Item, e.to_string()),
        (_, Some(refusal)) => (
            Blame::Item,
            format!("the stream refused the message: {refusal}"),
        ),
        (PublishErrorKind::TimedOut, _) => (
            Blame::Downstream,
            "no acknowledgement from the stream in time".to_string(),
        ),
        _ => (Blame::Downstream, e.to_string()),
    };
    Outcome {
        blame,
        ..Outcome::failure(format!("NATS: {error}"))
    }
}

/// A core NATS publish that failed with `e`: the client could not take it.
pub(super) fn core_failed(e: &async_nats::PublishError) -> Outcome {
    use async_nats::client::PublishErrorKind::{InvalidSubject, MaxPayloadExceeded};
    match e.kind() {
        MaxPayloadExceeded | InvalidSubject => Outcome::failure(format!("NATS: {e}")),
        _ => Outcome::downstream(format!("NATS: {e}")),
    }
}
