//! `type = "sql"`: the `[action]` table of an SQL action — statements run in the
//! item's transaction. Running them is `crate::action::sql`.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::config::value::duration::DurationText;
use crate::config::action::kind::{ActionKind, ActionStatements, Common};
use crate::config::value::statements::Statements;
use crate::config::validate::validator::Validator;
use crate::sql::statement::ParsedStatement;

/// `[action] timeout` when the file does not set it.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// What a queue file may write in `type` meaning this kind, and what it is called
/// then: the registry answers `type = "webhook"` with "a webhook is `type = \"http\"`".
pub const WRITTEN_AS: (&str, &[&str]) = ("", &[]);

/// type = "sql": statements run inside the item's transaction, with the row's
/// columns bound as :column and the queue's name as :queue. The work commits
/// together with the outcome SQL, so it happens exactly once.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawSqlAction {
    /// One statement, or an array of them run in order. A statement's error is a
    /// failure: its work is undone and [on_failure] runs.
    pub sql: Statements,
    /// A statement still running after this is interrupted (KILL QUERY): a failure.
    /// Default "60s".
    #[serde(default, with = "humantime_serde")]
    #[schemars(with = "Option<DurationText>")]
    pub timeout: Option<Duration>,
}

/// `type = "sql"`: statements run in the item's transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct SqlAction {
    pub common: Common,
    pub statements: Vec<ParsedStatement>,
}

/// Validates `type = "sql"`.
pub fn validate(raw: &RawSqlAction, v: &mut Validator) -> SqlAction {
    SqlAction {
        common: Common::new(v, raw.timeout, DEFAULT_TIMEOUT),
        statements: v.statements(&["action", "sql"], &raw.sql),
    }
}

impl ActionKind for SqlAction {
    fn common(&self) -> &Common {
        &self.common
    }

    fn in_transaction(&self) -> bool {
        true
    }

    fn statements(&self) -> Option<ActionStatements<'_>> {
        Some(ActionStatements {
            key: "sql",
            list: &self.statements,
        })
    }
}
