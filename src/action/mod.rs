//! Actions: what tableq does with one item. Each kind lives in its own folder and
//! reports an [`Outcome`]; a failure is a value, not an error.
//!
//! `sql` runs on the worker's session, inside the item's transaction (see [`sql`]).
//! `http` and `command` reach outside the database: the items of a batch run them
//! concurrently while the worker keeps its connection alive.

pub mod capture;
pub mod command;
pub mod http;
pub mod sql;

use crate::config::{ActionConfig, CommandAction};
use crate::db::{Item, OutcomeParams};

/// A queue's action, ready to run.
#[derive(Debug, Clone)]
pub enum Action {
    /// Runs in the item's transaction, on the worker's session: see [`sql::run`].
    Sql,
    /// Reaches outside the database.
    Outside(Outside),
}

/// An action that reaches outside the database: it cannot be undone, and runs
/// while the worker holds the item's lock.
#[derive(Debug, Clone)]
pub enum Outside {
    /// With its client, built once for the queue.
    Http(http::HttpDelivery),
    Command(CommandAction),
}

/// Why an action cannot be made ready: the message names the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ActionError(pub String);

impl Action {
    pub fn new(config: &ActionConfig) -> Result<Action, ActionError> {
        Ok(match config {
            ActionConfig::Sql(_) => Action::Sql,
            ActionConfig::Http(http) => {
                Action::Outside(Outside::Http(http::HttpDelivery::new(http)?))
            }
            ActionConfig::Command(command) => Action::Outside(Outside::Command(command.clone())),
        })
    }
}

impl Outside {
    /// Runs the action for `item`.
    pub async fn run(&self, item: &Item, queue: &str) -> Outcome {
        self.run_reporting(item, queue, None).await
    }

    /// Runs the action for `item`, a command reporting to `progress` (lease mode:
    /// see [`command::run_reporting`]).
    pub async fn run_reporting(
        &self,
        item: &Item,
        queue: &str,
        progress: Option<std::sync::Arc<command::Progress>>,
    ) -> Outcome {
        match self {
            Outside::Http(http) => {
                let trace = http.traces().then(|| http::trace::Trace::for_item(item));
                if let Some(trace) = &trace {
                    tracing::Span::current().record("trace_id", trace.trace_id.as_str());
                }
                let outcome = http.deliver(item, queue, trace.as_ref()).await;
                Outcome {
                    trace_id: trace.map(|t| t.trace_id),
                    ..outcome
                }
            }
            Outside::Command(command) => {
                command::run_reporting(command, item, queue, progress).await
            }
        }
    }

    /// Runs the action once for all of `items` (`scope = "batch"`): one request with
    /// a JSON array body, or one command with the array on stdin.
    pub async fn run_batch(&self, items: &[Item], queue: &str) -> Outcome {
        match self {
            Outside::Http(http) => {
                let trace = http.traces().then(|| match items {
                    [item] => http::trace::Trace::for_item(item),
                    _ => http::trace::Trace::new(),
                });
                if let Some(trace) = &trace {
                    tracing::Span::current().record("trace_id", trace.trace_id.as_str());
                }
                let outcome = http.deliver_batch(items, queue, trace.as_ref()).await;
                Outcome {
                    trace_id: trace.map(|t| t.trace_id),
                    ..outcome
                }
            }
            Outside::Command(command) => command::run_batch(command, items, queue).await,
        }
    }
}

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
}

/// Whose fault a failure looks like: the circuit breaker counts only failures
/// downstream, which say nothing about the item.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Blame {
    /// The item's own: its values, or the receiver's verdict on it.
    #[default]
    Item,
    /// Not the item's: the receiver unreachable or overloaded, a timeout, a
    /// program that cannot start.
    Downstream,
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
