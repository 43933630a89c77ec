//! `type = "sql"`: the `[action]` table of an SQL action — statements run in the
//! item's transaction. Running them is `crate::action::sql`.

use std::time::Duration;

use serde::Deserialize;

use super::super::raw::Statements;
use super::super::validate::Validator;
use super::{ActionKind, ActionStatements};
use crate::sql::statement::ParsedStatement;

/// `[action] timeout` when the file does not set it.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSqlAction {
    pub sql: Statements,
    #[serde(default, with = "humantime_serde")]
    pub timeout: Option<Duration>,
}

/// `type = "sql"`: statements run in the item's transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct SqlAction {
    pub statements: Vec<ParsedStatement>,
    pub timeout: Duration,
}

/// Validates `type = "sql"`.
pub(in crate::config) fn validate(raw: &RawSqlAction, v: &mut Validator) -> SqlAction {
    SqlAction {
        statements: v.statements(&["action", "sql"], &raw.sql),
        timeout: v.positive(&["action", "timeout"], raw.timeout, DEFAULT_TIMEOUT),
    }
}

impl ActionKind for SqlAction {
    fn timeout(&self) -> Duration {
        self.timeout
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
