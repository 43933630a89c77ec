//! What an action came to: success, or a failure with its reason and whose fault it
//! looks like. A failure is a value, not an error.

use std::sync::Arc;

use super::capture;
use crate::db::{OutcomeParams, Refusal};

/// What happened to an item's action; outcome SQL sees it as `:error`, `:status`,
/// `:output` and `:retry_after`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    pub error: Option<String>,
    pub status: Option<i64>,
    pub output: Option<Vec<u8>>,
    pub retry_after: Option<u64>,
    /// Whose fault a failure looks like.
    pub blame: Blame,
    /// The W3C trace id an HTTP action sent (`traceparent`), for the item's log lines.
    pub trace_id: Option<String>,
    /// A batch's action that sends each item on its own (a message per row) and so
    /// knows each one's fate: their outcomes, in the batch's order. `None` when the
    /// batch went as one (an HTTP request, a command). Behind a pointer, so that an
    /// outcome stays small to move about.
    pub each: Option<Arc<Vec<Outcome>>>,
}

/// Whose fault a failure looks like. Only the item's own failures are recorded
/// through `[on_failure]` as normal processing; the others say nothing about the
/// item, and slow the queue down instead (the circuit breaker counts those
/// downstream; the worker backs off).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Blame {
    /// The item's own: its values, or the receiver's verdict on it.
    #[default]
    Item,
    /// Not the item's: the receiver unreachable or overloaded, a timeout, a
    /// program that cannot start.
    Downstream,
    /// The queue's own: its SQL names a column, table or procedure that is not
    /// there, or a privilege its user lacks. Every item would fail alike until
    /// someone fixes the queue, so the item is left waiting, its attempt not spent.
    Queue,
    /// The database's, for now: it takes no writes (`read-only`, `permission
    /// denied`). The item is left waiting, and no worker claims on that database
    /// until it takes writes again.
    Database(Refusal),
}

impl Outcome {
    pub fn success() -> Self {
        Outcome::default()
    }

    pub fn failure(error: impl Into<String>) -> Self {
        Outcome {
            error: Some(capture::clip_error(error.into())),
            ..Outcome::default()
        }
    }

    /// A failure that is not the item's fault (see [`Blame::Downstream`]).
    pub fn downstream(error: impl Into<String>) -> Self {
        Outcome {
            blame: Blame::Downstream,
            ..Outcome::failure(error)
        }
    }

    pub fn succeeded(&self) -> bool {
        self.error.is_none()
    }

    /// The outcome as outcome SQL's parameters.
    pub fn params(&self) -> OutcomeParams<'_> {
        OutcomeParams {
            error: self.error.as_deref(),
            status: self.status,
            output: self.output.as_deref(),
            retry_after: self.retry_after,
            lease: Default::default(),
        }
    }
}
