//! What the broker's answer means, and whose fault a failure is. A confirm (ack)
//! is success; a nack, or a mandatory message returned unroutable, is the item's
//! failure; a lost connection, a timeout or flow control is downstream (the
//! circuit's business); an exchange that is not there or a refused permission is
//! the queue's (every item would fail alike). Every failure in one line.

use lapin::message::BasicReturnMessage;
use lapin::protocol::{AMQPErrorKind, AMQPSoftError};
use lapin::{Confirmation, ErrorKind};

use crate::action::{Blame, Outcome};

/// The outcome of one message's confirmation.
pub(super) fn confirmed(confirmation: lapin::Result<Confirmation>) -> Outcome {
    match confirmation {
        Ok(Confirmation::Ack(None)) => Outcome::success(),
        Ok(Confirmation::Ack(Some(returned)) | Confirmation::Nack(Some(returned))) => {
            returned_message(&returned)
        }
        Ok(Confirmation::Nack(None)) => Outcome::failure(
            "RabbitMQ refused the message (basic.nack): a queue it routes to is full and rejects \
             publishes (x-overflow = reject-publish), or the broker could not store it",
        ),
        Ok(Confirmation::NotRequested) => {
            Outcome::downstream("the channel is not in confirm mode: nothing was confirmed")
        }
        Err(e) => failed(&e),
    }
}

/// A mandatory message the broker could not route: `:status` is its reply code.
fn returned_message(returned: &BasicReturnMessage) -> Outcome {
    let delivery = &returned.delivery;
    let hint = match returned.reply_code {
        312 => ": no queue is bound for it",
        _ => "",
    };
    Outcome {
        status: Some(i64::from(returned.reply_code)),
        ..Outcome::failure(format!(
            "RabbitMQ returned the message unroutable: {} {} (exchange {:?}, routing key {:?}){hint}",
            returned.reply_code,
            returned.reply_text,
            delivery.exchange.as_str(),
            delivery.routing_key.as_str(),
        ))
    }
}

/// A publish, or its confirmation, that failed with `e`.
pub(super) fn failed(e: &lapin::Error) -> Outcome {
    let blame = match e.kind() {
        ErrorKind::ProtocolError(error) => match error.kind() {
            AMQPErrorKind::Soft(AMQPSoftError::NOTFOUND | AMQPSoftError::ACCESSREFUSED) => {
                Blame::Queue
            }
            AMQPErrorKind::Soft(
                AMQPSoftError::PRECONDITIONFAILED | AMQPSoftError::CONTENTTOOLARGE,
            ) => Blame::Item,
            _ => Blame::Downstream,
        },
        _ => Blame::Downstream,
    };
    Outcome {
        blame,
        ..Outcome::failure(format!("RabbitMQ: {}", describe(e)))
    }
}

/// One line for `e`: the broker's own words for a refusal (`NOT_FOUND - no
/// exchange 'orders' in vhost '/'`), `connection refused`, a TLS problem.
pub(super) fn describe(e: &lapin::Error) -> String {
    match e.kind() {
        ErrorKind::ProtocolError(error) => error.get_message().to_string(),
        ErrorKind::IOError(io) => match io.kind() {
            std::io::ErrorKind::ConnectionRefused => "connection refused".to_string(),
            std::io::ErrorKind::ConnectionReset => "connection reset".to_string(),
            std::io::ErrorKind::UnexpectedEof => "the connection was closed".to_string(),
            _ => io.to_string(),
        },
        ErrorKind::InvalidConnectionState(_) | ErrorKind::InvalidChannelState(..) => {
            "the connection or channel is closed".to_string()
        }
        _ => e.to_string(),
    }
}
