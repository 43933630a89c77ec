//! Outcomes written in the batch's transaction, item by item: each item's outcome
//! SQL is undone alone when it fails — back to a savepoint taken before it, or, for
//! an item alone in its transaction, the whole transaction, or nothing at all for
//! one statement that fails (InnoDB rolls a failed statement back by itself) or
//! for a batch run optimistically (rolled back whole when any of it fails).

use std::sync::Arc;

use crate::action::Outcome;
use crate::db::{failed, DbError, Item, Session, Statements};
use crate::engine::queue::QueueRuntime;
use crate::engine::turn::record::{Store, UntilTaken, Written};

/// How an item whose outcome SQL failed is returned to the state it was claimed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Undo {
    /// Back to a savepoint taken before it.
    Savepoint,
    /// The whole transaction: the item is alone in it.
    Rollback,
    /// Nothing: its outcome SQL is one statement, which undoes itself when it fails.
    Statement,
    /// Nothing here: the batch runs optimistically, with no savepoints, and is
    /// rolled back whole when any of it fails.
    Batch,
}

/// Writes outcomes on the worker's session, in its transaction.
pub struct ItemStore<'s> {
    pub session: &'s mut Session,
    pub queue: &'s QueueRuntime,
    pub undo: Undo,
    /// The action ran SQL in the item's savepoint (taken before the action): it is
    /// undone before `[on_failure]`, or when the item is left as it was.
    pub action_wrote: bool,
}

impl ItemStore<'_> {
    async fn write_one(
        &mut self,
        which: Statements,
        item: &Item,
        outcome: &Outcome,
    ) -> Result<Written, DbError> {
        let session = &mut *self.session;
        if self.action_wrote && which == Statements::OnFailure {
            // Undo whatever the action's statements did before it failed.
            session.rollback_to_savepoint().await?;
        } else if self.undo == Undo::Savepoint && !self.action_wrote {
            session.savepoint().await?;
        }
        let name = self.queue.config.name.as_str();
        let params = outcome.params();
        // The outcome is known and the row still locked: written until the database
        // takes it, rather than the action done again.
        let mut until_taken = UntilTaken::new(self.queue);
        let written = loop {
            let written = session.run(which, item, name, &params).await;
            if !until_taken.again(&written).await {
                break written;
            }
        };
        match written {
            Ok(()) => Ok(Written::Recorded),
            Err(e) if e.is_statement_error() => {
                match self.undo {
                    Undo::Savepoint => session.rollback_to_savepoint().await?,
                    Undo::Rollback => session.rollback().await?,
                    Undo::Statement | Undo::Batch => {}
                }
                Ok(Written::SqlFailed(Arc::new(e)))
            }
            Err(e) => Err(e),
        }
    }
}

impl Store for ItemStore<'_> {
    type Error = DbError;

    async fn gave_up(&mut self, item: &Item) -> Option<bool> {
        let (conn, _) = self.session.parts();
        failed::gave_up(conn, &self.queue.config, item.key())
            .await
            .ok()
    }

    async fn write(
        &mut self,
        which: Statements,
        set: &[(&Item, &Outcome)],
    ) -> Result<Vec<Written>, DbError> {
        let mut written = Vec::with_capacity(set.len());
        for (item, outcome) in set {
            written.push(self.write_one(which, item, outcome).await?);
        }
        Ok(written)
    }

    async fn leave(&mut self, _item: &Item) -> Result<(), DbError> {
        if self.action_wrote {
            self.session.rollback_to_savepoint().await?;
        }
        Ok(())
    }
}
