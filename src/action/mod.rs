//! Actions: what tableq does with one item (or one batch). Each kind is a folder
//! of its own, `src/action/<kind>/`: its `[action]` table as written and validated
//! (`config.rs`), and its runtime, made from the table ([`Ready`]); it reports an
//! [`Outcome`]. The kinds are those of the registry below, one line each
//! ([`kinds!`]): it declares their modules, reads `[action]` for the loader (which
//! names no kind: `crate::config` is handed [`RawAction`]), and makes
//! [`Action::new`].
//!
//! A kind runs either in the item's transaction, on the worker's session
//! ([`InTransaction`]: SQL), or outside the database ([`External`]: HTTP, a
//! command), where the items of a batch run concurrently while the worker keeps its
//! connection alive.

pub mod answer;
pub mod capture;
pub mod deadline;
pub mod message;
mod outcome;
pub mod php;
pub mod process;
pub mod progress;

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::config::action::Kinds;
use crate::config::validate::validator::Validator;
use crate::config::ActionConfig;
use crate::db::{DbError, Item, Session};
use crate::diagnostic::Severity;
use capture::Captured;
pub use outcome::{Blame, NextRun, Outcome, Rearmed, TraceNotes};
use progress::Progress;

/// The longest a kind waits for a connection to its handler (within the action's
/// timeout): a handler that does not answer the connect — a host down, packets
/// dropped, a full backlog — is unreached then, not a run that timed out.
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// A queue's action, ready to run.
#[derive(Clone)]
pub enum Action {
    /// Runs in the item's transaction, on the worker's session.
    InTransaction(Arc<dyn InTransaction>),
    /// Reaches outside the database: it cannot be undone.
    External(Arc<dyn External>),
}

/// Why an action cannot be made ready: the message names the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ActionError(pub String);

/// A kind's validated table, made ready to run: its runtime.
pub trait Ready {
    fn ready(&self) -> Result<Action, ActionError>;
}

/// The registry of kinds: from each kind's line — its `type`, its variant, its
/// folder, and the tables of its folder's `config.rs` as written and validated —
/// it declares the kind's module, the variant of [`RawAction`] that serde reads
/// from `type` (the loader's `Kinds`, handed to `crate::config`), and the arm of
/// [`Action::new`]. The validated table implements `ActionKind` (in its
/// `config.rs`: a `validate` beside it makes it, a `WRITTEN_AS` names what a queue
/// file may write meaning it) and [`Ready`] (its runtime).
macro_rules! kinds {
    ($($name:literal => $variant:ident($module:ident::{$raw:ident, $table:ident}),)*) => {
        $(pub mod $module;)*

        /// The `[action]` table as written, by its `type`.
        #[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
        #[serde(tag = "type")]
        pub enum RawAction {
            $(#[serde(rename = $name)] $variant($module::config::$raw),)*
        }

        impl Kinds for RawAction {
            const NAMES: &'static [&'static str] = &[$($name),*];

            fn meant(written: &str) -> Option<String> {
                $(let (called, written_as) = $module::config::WRITTEN_AS;
                if written_as.contains(&written) {
                    return Some(format!("{called} is `type = \"{}\"`", $name));
                })*
                None
            }

            fn validate(&self, v: &mut Validator) -> ActionConfig {
                match self {
                    $(RawAction::$variant(raw) => {
                        ActionConfig::new($name, $module::config::validate(raw, v))
                    })*
                }
            }
        }

        impl Action {
            /// The kind's runtime, made from its table.
            pub fn new(config: &ActionConfig) -> Result<Action, ActionError> {
                $(if let Some(table) = config.table::<$module::config::$table>() {
                    return table.ready();
                })*
                Err(ActionError(format!("no kind of action is `{}`", config.type_name())))
            }
        }
    };
}

kinds! {
    "sql" => Sql(sql::{RawSqlAction, SqlAction}),
    "http" => Http(http::{RawHttpAction, HttpAction}),
    "command" => Command(command::{RawCommandAction, CommandAction}),
    "amqp" => Amqp(amqp::{RawAmqpAction, AmqpAction}),
    "nats" => Nats(nats::{RawNatsAction, NatsAction}),
    "worker" => Worker(worker::{RawWorkerAction, WorkerAction}),
    "fastcgi" => Fastcgi(fastcgi::{RawFastcgiAction, FastcgiAction}),
}

impl Action {
    fn in_transaction(kind: impl InTransaction + 'static) -> Action {
        Action::InTransaction(Arc::new(kind))
    }

    fn external(kind: impl External + 'static) -> Action {
        Action::External(Arc::new(kind))
    }
}

impl std::fmt::Debug for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Action::InTransaction(_) => f.write_str("Action::InTransaction"),
            Action::External(_) => f.write_str("Action::External"),
        }
    }
}

/// What one run of an action works on. Its deadline is not here: the run is
/// ended at it from outside (`engine::turn::execute`), and a kind only honours that.
pub struct Job<'a> {
    /// One item; in batch scope, the batch (or one of its items, alone).
    pub items: &'a [Item],
    /// `scope = "batch"`: the items go as one JSON array.
    pub batch: bool,
    pub queue: &'a str,
    /// Where a command reports its progress (lease mode's `:progress`).
    pub progress: Option<Arc<Progress>>,
    /// Where a kind with output keeps it as it reads it: a run cut off at its
    /// deadline still has its `:output` (what a command printed before it hung).
    pub output: Arc<Captured>,
}

impl Job<'_> {
    /// The item of an item-scope job (the first, in batch scope).
    pub fn first(&self) -> Option<&Item> {
        self.items.first()
    }
}

/// A kind that runs in the item's transaction, on the worker's session: what it
/// writes commits with the row's change, or not at all.
pub trait InTransaction: Send + Sync {
    /// Runs the action. A failure is an [`Outcome`]; an `Err` means the transaction
    /// is lost (and with it the rows' locks). Once `stop` is cancelled (the
    /// deadline has passed) it ends its work promptly and leaves the session
    /// usable; what it returns then is not used.
    fn run<'a>(
        &'a self,
        session: &'a mut Session,
        job: Job<'a>,
        stop: CancellationToken,
    ) -> BoxFuture<'a, Result<Outcome, DbError>>;
}

/// A kind that reaches outside the database.
pub trait External: Probe + Send + Sync {
    /// Runs the action, however long it takes: at the deadline the future is
    /// dropped, and dropping it cancels the action (a command's process group is
    /// killed, a request aborted).
    fn run<'a>(&'a self, job: Job<'a>) -> BoxFuture<'a, Outcome>;

    /// How many runs its handler takes at once, when the kind knows (PHP-FPM's
    /// children): a run waits in tableq for a permit, before its deadline starts,
    /// rather than in the handler's backlog, where the wait would count.
    fn slots(&self) -> Option<&Arc<Semaphore>> {
        None
    }

    /// What a run cut off at its deadline was waiting for, if the kind can say
    /// more than the time: `for RabbitMQ at … to confirm`.
    fn waiting_for(&self) -> Option<String> {
        None
    }
}

/// For `check`: looks at what an action reaches without sending anything (a
/// broker's exchange or stream is there), and says what a sample row's message would
/// look like. A kind with something to look at implements it in its `probe.rs`; a kind
/// with nothing to look at writes `impl Probe for Kind {}`.
pub trait Probe {
    /// What `sample`'s action would meet. Nothing, for a kind that has nothing to
    /// look at.
    fn probe<'a>(&'a self, queue: &'a str, sample: Option<&'a Item>) -> BoxFuture<'a, Vec<Probed>> {
        let _ = (queue, sample);
        Box::pin(async { Vec::new() })
    }
}

/// One thing an action's [`Probe::probe`] found: how bad it is, the key of
/// `[action]` it is about, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probed {
    pub severity: Severity,
    /// The key under `[action]`: `"exchange"`.
    pub key: &'static str,
    pub message: String,
}

impl Probed {
    pub fn error(key: &'static str, message: impl Into<String>) -> Probed {
        Probed {
            severity: Severity::Error,
            key,
            message: message.into(),
        }
    }

    pub fn warning(key: &'static str, message: impl Into<String>) -> Probed {
        Probed {
            severity: Severity::Warning,
            key,
            message: message.into(),
        }
    }

    pub fn note(key: &'static str, message: impl Into<String>) -> Probed {
        Probed {
            severity: Severity::Note,
            key,
            message: message.into(),
        }
    }
}
