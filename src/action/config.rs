//! The `[action]` table of a queue file: one module per kind, each with its TOML
//! keys, what they must be, and what the rest of tableq asks of the kind
//! ([`ActionKind`]). The kinds' runtimes are in `crate::action`: the table is read
//! here, below the database layer, because preparing a queue needs the SQL action's
//! statements and every kind's placeholders.
//!
//! Adding a kind: a module here with its raw table, its validated table and an
//! `impl ActionKind`, one line in [`kinds!`] below, and one line in the runtime's
//! registry (`crate::action::Action::new`).

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::config::validator::Validator;
use crate::config::{QueueConfig, SecretFile};
use crate::diagnostic::Finding;
use crate::sql::statement::ParsedStatement;

use super::{amqp, command, http, nats, sql};
pub use amqp::config::AmqpAction;
pub use command::config::{find_program, CommandAction};
pub use http::config::{host_from_row, HttpAction, SigningKey};
pub use nats::config::NatsAction;
pub use sql::config::SqlAction;

/// What tableq asks of an action kind's table, whichever kind it is.
pub trait ActionKind: std::fmt::Debug {
    /// How long one action (an item's, or a batch's) may take.
    fn timeout(&self) -> Duration;

    /// True when the action runs in the item's transaction, on the worker's session
    /// (its work commits with the row's change); false when it reaches outside the
    /// database, where nothing can be undone.
    fn in_transaction(&self) -> bool {
        false
    }

    /// The SQL the action itself runs, prepared with the queue's other statements.
    fn statements(&self) -> Option<ActionStatements<'_>> {
        None
    }

    /// The `{placeholder}` names the action uses, each with the key it is under.
    fn placeholders(&self) -> Vec<(String, &str)> {
        Vec::new()
    }

    /// Whether something downstream can break: the circuit breaker is on by default.
    fn reaches_downstream(&self) -> bool {
        !self.in_transaction()
    }

    /// Whether its failures carry an exit code, so `circuit.transient_exit_codes`
    /// applies.
    fn has_exit_codes(&self) -> bool {
        false
    }

    /// Whether the action can report its progress (lease mode's `:progress`).
    fn reports_progress(&self) -> bool {
        false
    }

    /// Whether in `scope = "batch"` the action still sends each item on its own (a
    /// message per row, all of them before any answer is awaited): each is rendered
    /// from its own row, so `{column}` placeholders stay allowed.
    fn sends_each_item(&self) -> bool {
        false
    }

    /// What the kind's table holds that `scope = "batch"` cannot serve, beyond
    /// placeholders (which batch scope refuses unless the kind [sends each
    /// item](ActionKind::sends_each_item)).
    fn batch_scope_refusals(&self, _queue: &QueueConfig) -> Vec<Finding> {
        Vec::new()
    }

    /// What `check` warns about in the kind's table (it loads, but looks wrong).
    fn warnings(&self, _queue: &QueueConfig) -> Vec<Finding> {
        Vec::new()
    }

    /// The `${VARS}` the table puts into a secret: a command must not be handed them.
    fn secret_variables(&self) -> Vec<String> {
        Vec::new()
    }

    /// The files the table reads secrets from (`${file:…}`), for `check`'s warning
    /// about files others can read.
    fn secret_files(&self) -> Vec<SecretFile> {
        Vec::new()
    }

    /// What its outcomes look like, for `check`'s sample outcome parameters.
    fn samples(&self) -> Samples {
        Samples::default()
    }
}

/// The SQL an action runs itself, with the key of `[action]` that holds it.
#[derive(Debug, Clone, Copy)]
pub struct ActionStatements<'a> {
    pub key: &'static str,
    pub list: &'a [ParsedStatement],
}

/// What a kind's outcomes bind besides `:error`: `:status` on success and on
/// failure (an HTTP status, an exit code), and whether `:output` is set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Samples {
    pub success_status: Option<i64>,
    pub failure_status: Option<i64>,
    pub output: bool,
}

/// The registry of kinds: `type = "…"` → its module's raw and validated tables. Each
/// line makes a variant of [`RawAction`] (read by serde from `type`) and of
/// [`ActionConfig`], and the arms that reach the kind's [`ActionKind`] and its
/// `validate`.
macro_rules! kinds {
    ($($name:literal => $variant:ident($module:ident::$raw:ident, $config:ident),)*) => {
        /// The `[action]` table as written, by its `type`.
        #[derive(Debug, Deserialize, JsonSchema)]
        #[serde(tag = "type")]
        pub enum RawAction {
            $(#[serde(rename = $name)] $variant($module::config::$raw),)*
        }

        /// What to do with one item, validated.
        #[derive(Debug, Clone, PartialEq)]
        pub enum ActionConfig {
            $($variant($config),)*
        }

        /// Every `type`, as written in a queue file.
        pub const KINDS: &[&str] = &[$($name),*];

        impl ActionConfig {
            /// The kind's answers about itself.
            pub fn kind(&self) -> &dyn ActionKind {
                match self {
                    $(ActionConfig::$variant(action) => action,)*
                }
            }

            /// The `type` of this action, as written.
            pub fn type_name(&self) -> &'static str {
                match self {
                    $(ActionConfig::$variant(_) => $name,)*
                }
            }
        }

        /// Validates the `[action]` table of whichever kind it is.
        pub(crate) fn validate(raw: &RawAction, v: &mut Validator) -> ActionConfig {
            match raw {
                $(RawAction::$variant(raw) => ActionConfig::$variant($module::config::validate(raw, v)),)*
            }
        }
    };
}

kinds! {
    "sql" => Sql(sql::RawSqlAction, SqlAction),
    "http" => Http(http::RawHttpAction, HttpAction),
    "command" => Command(command::RawCommandAction, CommandAction),
    "amqp" => Amqp(amqp::RawAmqpAction, AmqpAction),
    "nats" => Nats(nats::RawNatsAction, NatsAction),
}

impl ActionConfig {
    /// How long one item's action may take before it counts as failed.
    pub fn timeout(&self) -> Duration {
        self.kind().timeout()
    }

    /// The `{placeholder}` names the action uses, with the key each is under.
    pub fn placeholders(&self) -> Vec<(String, &str)> {
        self.kind().placeholders()
    }

    /// True when the action runs in the item's transaction (see [`ActionKind`]).
    pub fn in_transaction(&self) -> bool {
        self.kind().in_transaction()
    }
}
