//! Actions: what tableq does with one item. Each kind lives in its own module and
//! reports an [`Outcome`]; a failure is a value, not an error.
//!
//! `sql` runs on the worker's connection, inside the item's transaction (see
//! [`sql`]). `http` and `command` reach outside the database: the items of a batch
//! run them concurrently while the worker keeps its connection alive.

pub mod capture;
pub mod command;
pub mod http;
pub mod sql;

use crate::config::{ActionConfig, CommandAction};
use crate::db::item::{Item, Outcome};

/// A queue's action, ready to run: for HTTP, with its client built once.
#[derive(Debug, Clone)]
pub enum Action {
    Sql,
    Http(http::HttpDelivery),
    Command(CommandAction),
}

impl Action {
    pub fn new(config: &ActionConfig) -> Result<Action, String> {
        Ok(match config {
            ActionConfig::Sql(_) => Action::Sql,
            ActionConfig::Http(http) => Action::Http(http::HttpDelivery::new(http)?),
            ActionConfig::Command(command) => Action::Command(command.clone()),
        })
    }

    /// Runs an action that reaches outside the database (`http`, `command`).
    pub async fn run_outside(&self, item: &Item, queue: &str) -> Outcome {
        match self {
            Action::Sql => Outcome::failure("an SQL action runs inside the transaction"),
            Action::Http(http) => http.deliver(item, queue).await,
            Action::Command(command) => command::run(command, item, queue).await,
        }
    }
}
