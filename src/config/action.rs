//! The `[action]` table of a queue file, and the registry of kinds: each kind is a
//! folder of its own, `src/action/<kind>/`, whose `config.rs` holds its table as
//! written and validated (in this layer, as `config::kinds::<kind>`: preparing a
//! queue needs the SQL action's
//! statements and every kind's placeholders), and whose other files hold its
//! runtime. One line in [`kinds!`] registers a kind, for the loader here and for
//! the runtimes in `crate::action`.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use super::kind::{ActionKind, Common};
use super::validator::Validator;

/// The registry of kinds, one line each: its `type`, its variant, and the tables of
/// its folder's `config.rs` as written and validated (the validated one embeds
/// [`Common`] as `common` and implements [`ActionKind`]; a `validate` beside them
/// makes it). `kinds!(then)` hands the
/// lines to the macro `then`: [`tables!`] below makes this layer's enums of them,
/// `crate::action` its modules and `Action::new`.
macro_rules! kinds {
    ($then:ident) => {
        $then! {
            "sql" => Sql(sql::{RawSqlAction, SqlAction}),
            "http" => Http(http::{RawHttpAction, HttpAction}),
            "command" => Command(command::{RawCommandAction, CommandAction}),
            "amqp" => Amqp(amqp::{RawAmqpAction, AmqpAction}),
            "nats" => Nats(nats::{RawNatsAction, NatsAction}),
            "worker" => Worker(worker::{RawWorkerAction, WorkerAction}),
            "fastcgi" => Fastcgi(fastcgi::{RawFastcgiAction, FastcgiAction}),
        }
    };
}
pub(crate) use kinds;

/// The loader's side of the registry: a variant of [`RawAction`] (read by serde
/// from `type`) and of [`ActionConfig`] per kind, and the arms that reach the
/// kind's [`ActionKind`], its [`Common`] and its `validate`.
macro_rules! tables {
    ($($name:literal => $variant:ident($module:ident::{$raw:ident, $config:ident}),)*) => {
        /// The `[action]` table as written, by its `type`.
        #[derive(Debug, Deserialize, JsonSchema)]
        #[serde(tag = "type")]
        pub enum RawAction {
            $(#[serde(rename = $name)] $variant(crate::config::kinds::$module::$raw),)*
        }

        /// What to do with one item, validated.
        #[derive(Debug, Clone, PartialEq)]
        pub enum ActionConfig {
            $($variant(crate::config::kinds::$module::$config),)*
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

            /// What every kind has: the timeout, secrets and placeholders.
            pub fn common(&self) -> &Common {
                match self {
                    $(ActionConfig::$variant(action) => &action.common,)*
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
        pub(super) fn validate(raw: &RawAction, v: &mut Validator) -> ActionConfig {
            match raw {
                $(RawAction::$variant(raw) => {
                    ActionConfig::$variant(crate::config::kinds::$module::validate(raw, v))
                })*
            }
        }
    };
}

kinds!(tables);

impl ActionConfig {
    /// How long one item's action may take before it counts as failed.
    pub fn timeout(&self) -> Duration {
        self.common().timeout
    }

    /// The `{placeholder}` names the action uses, with the key each is under.
    pub fn placeholders(&self) -> &[(String, String)] {
        &self.common().placeholders
    }

    /// True when the action runs in the item's transaction (see [`ActionKind`]).
    pub fn in_transaction(&self) -> bool {
        self.kind().in_transaction()
    }
}
