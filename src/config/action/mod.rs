//! The `[action]` table of a queue file, validated: one module per kind, each with
//! its TOML keys and what they must be. (The kinds' runtimes are in
//! `crate::action`: the table is read here, below the database layer, because
//! preparing a queue needs the SQL action's statements and every kind's
//! placeholders.)

pub mod command;
pub mod http;
pub mod sql;

use std::time::Duration;

use super::raw::RawAction;
use super::validate::Validator;

pub use command::{find_program, CommandAction};
pub use http::{host_from_row, HttpAction, SigningKey};
pub use sql::SqlAction;

/// `[action] timeout` for `type = "sql"` when the file does not set it.
pub const DEFAULT_SQL_TIMEOUT: Duration = Duration::from_secs(60);
/// `[action] timeout` for `type = "http"` when the file does not set it.
pub const DEFAULT_HTTP_TIMEOUT: Duration = Duration::from_secs(30);
/// `[action] timeout` for `type = "command"` when the file does not set it.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// What to do with one item.
#[derive(Debug, Clone)]
pub enum ActionConfig {
    Sql(SqlAction),
    Http(HttpAction),
    Command(CommandAction),
}

impl ActionConfig {
    /// How long one item's action may take before it counts as failed.
    pub fn timeout(&self) -> Duration {
        match self {
            ActionConfig::Sql(a) => a.timeout,
            ActionConfig::Http(a) => a.timeout,
            ActionConfig::Command(a) => a.timeout,
        }
    }

    /// The `{placeholder}` names the action uses, with the key each is under.
    pub fn placeholders(&self) -> Vec<(String, &str)> {
        let mut found = Vec::new();
        match self {
            ActionConfig::Sql(_) => {}
            ActionConfig::Http(http) => {
                found.extend(
                    http.url
                        .placeholders()
                        .map(|p| ("action.url".to_string(), p)),
                );
                for (name, value) in &http.headers {
                    found.extend(
                        value
                            .placeholders()
                            .map(|p| (format!("action.headers.{name}"), p)),
                    );
                }
                if let Some(id) = &http.message_id {
                    found.extend(
                        id.placeholders()
                            .map(|p| ("action.message_id".to_string(), p)),
                    );
                }
            }
            ActionConfig::Command(command) => {
                for (index, arg) in command.argv.iter().enumerate() {
                    found.extend(
                        arg.placeholders()
                            .map(|p| (format!("action.command.{index}"), p)),
                    );
                }
            }
        }
        found
    }
}

/// Validates the `[action]` table of whichever kind it is.
pub(super) fn validate(raw: &RawAction, v: &mut Validator) -> ActionConfig {
    match raw {
        RawAction::Sql(sql) => ActionConfig::Sql(sql::validate(sql, v)),
        RawAction::Http(http) => ActionConfig::Http(http::validate(http, v)),
        RawAction::Command(command) => ActionConfig::Command(command::validate(command, v)),
    }
}
