//! An item's outcome SQL — `[on_success]` or `[on_failure]` — and what happens when
//! that SQL itself fails: the item is put back as it was claimed.

use tracing::{error, warn};

use crate::action::Outcome;
use crate::db::{DbError, Item, Session, Statements};
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
    queue: &str,
    item: &Item,
    outcome: &Outcome,
    undo_by: Undo,
    action_wrote: bool,
) -> Result<Fate, DbError> {
    if outcome.succeeded() {
        return match session
            .run(Statements::OnSuccess, item, queue, &outcome.params())
            .await
        {
            Ok(()) => Ok(Fate::Done),
            Err(e) if e.is_statement_error() => {
                undo(session, undo_by).await?;
                error!(error = %e, "[on_success] SQL failed; the item is rolled back and waiting again");
                Ok(Fate::Returned)
            }
            Err(e) => Err(e),
        };
    }
    let reason = outcome.error.as_deref().unwrap_or_default();
    if action_wrote {
        // Undo whatever the action's statements did before it failed.
        session.rollback_to_savepoint().await?;
    }
    if !session.has_on_failure() {
        warn!(error = %reason, "item failed; with no [on_failure] it is waiting again");
        return Ok(Fate::Returned);
    }
    match session
        .run(Statements::OnFailure, item, queue, &outcome.params())
        .await
    {
        Ok(()) => {
            warn!(error = %reason, "item failed");
            Ok(Fate::Failed)
        }
        Err(e) if e.is_statement_error() => {
            undo(session, undo_by).await?;
            error!(error = %reason, on_failure_error = %e, "item failed and [on_failure] SQL failed too; the item is rolled back and waiting again");
            Ok(Fate::Returned)
        }
        Err(e) => Err(e),
    }
}

/// Returns an item to the state it was claimed in, after its outcome SQL failed.
async fn undo(session: &mut Session, undo: Undo) -> Result<(), DbError> {
    match undo {
        Undo::Savepoint => session.rollback_to_savepoint().await,
        Undo::Rollback => session.rollback().await,
        Undo::Statement => Ok(()),
    }
}
