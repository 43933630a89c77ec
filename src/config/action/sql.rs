//! `type = "sql"`: the `[action]` table of an SQL action — statements run in the
//! item's transaction. Running them is `crate::action::sql`.

use std::time::Duration;

use serde::Deserialize;

use super::super::raw::Statements;
use super::super::validate::Validator;
use super::DEFAULT_SQL_TIMEOUT;
use crate::sql::statement::ParsedStatement;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSqlAction {
    pub sql: Statements,
    #[serde(default, with = "humantime_serde")]
    pub timeout: Option<Duration>,
}

/// `type = "sql"`: statements run in the item's transaction.
#[derive(Debug, Clone)]
pub struct SqlAction {
    pub statements: Vec<ParsedStatement>,
    pub timeout: Duration,
}

/// Validates `type = "sql"`.
pub(in crate::config) fn validate(raw: &RawSqlAction, v: &mut Validator) -> SqlAction {
    SqlAction {
        statements: v.statements(&["action", "sql"], &raw.sql),
        timeout: v.positive(&["action", "timeout"], raw.timeout, DEFAULT_SQL_TIMEOUT),
    }
}
