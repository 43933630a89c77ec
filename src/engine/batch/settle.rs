//! An item's outcome SQL — `[on_success]` or `[on_failure]` — and what happens when
//! that SQL itself fails: the item is put back as it was claimed.

use tracing::{debug, error, warn};

use crate::action::Outcome;
use crate::db::{DbError, Item, Session, Statements};
use crate::engine::queue::QueueRuntime;
use crate::engine::report::Fate;

/// How an item whose outcome SQL failed is returned to the state it was claimed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Undo {
    /// Back to the savepoint taken before it.
    Savepoint,
    /// The whole transaction: the item is alone in it.
    Rollback,
    /// Nothing: its outcome SQL is one statement, and InnoDB rolls back a statement
    /// that fails.
    Statement,
}

/// Applies `[on_success]` or `[on_failure]` for an action's outcome. `action_wrote`:
/// the action ran SQL in the item's savepoint, to be undone before `[on_failure]`.
pub async fn settle(
    session: &mut Session,
    queue: &QueueRuntime,
    item: &Item,
    outcome: &Outcome,
    undo_by: Undo,
    action_wrote: bool,
) -> Result<Fate, DbError> {
    let name = queue.config.name.as_str();
    let params = outcome.params();
    if outcome.succeeded() {
        return match session
            .run(Statements::OnSuccess, item, name, &params)
            .await
        {
            Ok(()) => Ok(Fate::Done),
            Err(e) if e.is_statement_error() => {
                undo(session, undo_by).await?;
                outcome_sql_failed(queue, item, "[on_success]", &e, "");
                Ok(Fate::Returned)
            }
            Err(e) => Err(e),
        };
    }
    let reason = outcome.error.as_deref().unwrap_or_default();
    let observed = &queue.stats.observed;
    observed.record_failure(item.key_text(), reason, outcome.status);
    if action_wrote {
        // Undo whatever the action's statements did before it failed.
        session.rollback_to_savepoint().await?;
    }
    if !session.has_on_failure() {
        warn!(error = %reason, "item failed; with no [on_failure] it is waiting again");
        return Ok(Fate::Returned);
    }
    match session
        .run(Statements::OnFailure, item, name, &params)
        .await
    {
        Ok(()) => {
            warn!(error = %reason, "item failed");
            Ok(Fate::Failed)
        }
        Err(e) if e.is_statement_error() => {
            undo(session, undo_by).await?;
            outcome_sql_failed(queue, item, "[on_failure]", &e, reason);
            Ok(Fate::Returned)
        }
        Err(e) => Err(e),
    }
}

/// Outcome SQL failed for `item`: it is back as it was claimed, and will be tried
/// again. Said in full once per key — with what to fix — and counted every time, so
/// a row that can never be recorded does not flood the log at each retry.
fn outcome_sql_failed(queue: &QueueRuntime, item: &Item, which: &str, e: &DbError, reason: &str) {
    queue.stats.record_outcome_sql_failure();
    if !queue.outcome_sql_failed.first(&item.key_text()) {
        debug!(error = %e, "{which} SQL failed again; the item is rolled back and waiting again");
        return;
    }
    error!(
        error = %e,
        action_error = %reason,
        "{which} SQL failed; the item is rolled back and waiting again, and is retried until the SQL \
         works: fix it (a column too small for :error or :output? :error holds up to 8 KiB and :output \
         up to 64 KiB: use TEXT or MEDIUMBLOB, or LEFT(:error, n)); said once per item"
    );
}

/// Returns an item to the state it was claimed in, after its outcome SQL failed.
async fn undo(session: &mut Session, undo: Undo) -> Result<(), DbError> {
    match undo {
        Undo::Savepoint => session.rollback_to_savepoint().await,
        Undo::Rollback => session.rollback().await,
        Undo::Statement => Ok(()),
    }
}
