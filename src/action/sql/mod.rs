//! `type = "sql"`: the action's statements run in the item's own transaction, so the
//! work and the row's change commit together — exactly once by construction.

use std::time::Duration;

use tokio::time::Instant;

use super::Outcome;
use crate::db::{Database, DbError, Item, Ran, Session, Statements};

/// Runs the action's statements for `item`, stopping at the first that fails. A
/// statement's own error, or running past `timeout`, is a failed [`Outcome`]; an
/// `Err` means the transaction is lost and the item returns to the queue.
pub async fn run(
    session: &mut Session,
    item: &Item,
    queue: &str,
    timeout: Duration,
    database: &Database,
) -> Result<Outcome, DbError> {
    let deadline = Instant::now() + timeout;
    let ran = session
        .run_until(Statements::Action, item, queue, deadline, database)
        .await?;
    Ok(outcome(ran, timeout))
}

/// As [`run`], once for every item of a batch (`scope = "batch"`), `:batch` holding
/// them all; `timeout` is for the batch as a whole.
pub async fn run_batch(
    session: &mut Session,
    items: &[Item],
    queue: &str,
    timeout: Duration,
    database: &Database,
) -> Result<Outcome, DbError> {
    let deadline = Instant::now() + timeout;
    let ran = session
        .run_batch_until(Statements::Action, items, queue, deadline, database)
        .await?;
    Ok(outcome(ran, timeout))
}

fn outcome(ran: Ran, timeout: Duration) -> Outcome {
    match ran {
        Ran::Completed => Outcome::success(),
        Ran::Failed(e) => Outcome::failure(e.to_string()),
        Ran::TimedOut => Outcome::failure(format!(
            "timed out after {}",
            humantime::format_duration(timeout)
        )),
    }
}
