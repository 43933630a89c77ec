//! The `[action]` table, as the config layer sees it: a seam that names no kind.
//! The kinds, and the registry that lists them, are the action layer's
//! (`crate::action`): it hands the loader a type that reads the table as written,
//! by its `type` ([`Kinds`]), and validating it gives back the kind's table behind an
//! [`ActionConfig`], whose answers ([`ActionKind`], and its [`Common`]) this layer
//! and the others need to prepare and check a queue.

pub mod kind;

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;

use crate::config::action::kind::{ActionKind, Common};
use crate::config::validate::validator::Validator;

/// The kinds a queue file's `[action]` may be: the registry's table as written,
/// read by serde by its `type` (and described by the schema), which validates into
/// its kind's table.
pub(crate) trait Kinds: DeserializeOwned + JsonSchema {
    /// Every `type`, as written in a queue file, in the registry's order.
    const NAMES: &'static [&'static str];

    /// What a `type` that names no kind may have meant, in words said after the
    /// kinds there are (another name a kind goes by).
    fn meant(written: &str) -> Option<String>;

    /// The table, validated: its problems reported to `v`.
    fn validate(&self, v: &mut Validator) -> ActionConfig;
}

/// What to do with one item, validated: a kind's table, and the `type` it was
/// written as.
#[derive(Clone)]
pub struct ActionConfig {
    type_name: &'static str,
    table: Arc<dyn ActionKind>,
    /// Whether two tables of this one's kind hold the same values.
    same: fn(&dyn ActionKind, &dyn ActionKind) -> bool,
}

impl ActionConfig {
    /// The table of the kind written `type = type_name`.
    pub fn new<T: ActionKind + PartialEq>(type_name: &'static str, table: T) -> ActionConfig {
        ActionConfig {
            type_name,
            table: Arc::new(table),
            same: same_table::<T>,
        }
    }

    /// The kind's table itself, when it is a `T`: for its runtime.
    pub fn table<T: ActionKind>(&self) -> Option<&T> {
        let table: &dyn Any = &*self.table;
        table.downcast_ref()
    }

    /// The kind's answers about itself.
    pub fn kind(&self) -> &dyn ActionKind {
        &*self.table
    }

    /// What every kind has: the timeout, secrets and placeholders.
    pub fn common(&self) -> &Common {
        self.table.common()
    }

    /// The `type` of this action, as written.
    pub fn type_name(&self) -> &'static str {
        self.type_name
    }

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

/// Whether `a` and `b` are both `T`s, and equal.
fn same_table<T: ActionKind + PartialEq>(a: &dyn ActionKind, b: &dyn ActionKind) -> bool {
    let (a, b): (&dyn Any, &dyn Any) = (a, b);
    a.downcast_ref::<T>()
        .zip(b.downcast_ref::<T>())
        .is_some_and(|(a, b)| a == b)
}

impl PartialEq for ActionConfig {
    fn eq(&self, other: &ActionConfig) -> bool {
        self.type_name == other.type_name && (self.same)(&*self.table, &*other.table)
    }
}

impl std::fmt::Debug for ActionConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.table.fmt(f)
    }
}
