//! `scope = "batch"`: outcomes written once for all the items with the same
//! outcome — `[on_success]` once for those that succeeded, `[on_failure]` once for
//! those that failed, `:batch` holding them as one JSON array. A set whose statement
//! fails is undone and written item by item, each alone (a one-element `:batch`), so
//! only the items whose SQL fails stay waiting — unless the batch runs
//! optimistically, when the whole batch is rolled back instead. An empty set runs no
//! statement.

use std::sync::Arc;

use tracing::debug;

use crate::action::Outcome;
use crate::db::{DbError, Item, OutcomeParams, Session, Statements};
use crate::engine::queue::QueueRuntime;
use crate::engine::turn::record::item::{ItemStore, Undo};
use crate::engine::turn::record::{Store, Written};

/// Writes outcome sets on the worker's session, in its transaction.
pub struct SetStore<'s> {
    pub session: &'s mut Session,
    pub queue: &'s QueueRuntime,
    /// How a set whose SQL fails is undone: back to a savepoint taken before it;
    /// not at all when its SQL is one statement (a failed one undoes itself), or
    /// when the batch runs optimistically (its failure rolls the batch back whole,
    /// and no item is written alone).
    pub undo: Undo,
}

impl Store for SetStore<'_> {
    type Error = DbError;

    async fn gave_up(&mut self, item: &Item) -> Option<bool> {
        let (conn, _) = self.session.parts();
        crate::db::failed::gave_up(conn, &self.queue.config, item.key())
            .await
            .ok()
    }

    async fn write(
        &mut self,
        which: Statements,
        set: &[(&Item, &Outcome)],
    ) -> Result<Vec<Written>, DbError> {
        if set.is_empty() {
            return Ok(Vec::new());
        }
        let savepoint = self.undo == Undo::Savepoint;
        if savepoint {
            self.session.savepoint().await?;
        }
        let params: Vec<(&Item, OutcomeParams)> = set
            .iter()
            .map(|(item, outcome)| (*item, outcome.params()))
            .collect();
        let name = self.queue.config.name.as_str();
        match self.session.run_batch(which, &params, name).await {
            Ok(()) => return Ok(set.iter().map(|_| Written::Recorded).collect()),
            Err(e) if e.is_statement_error() && self.undo == Undo::Batch => {
                let e = Arc::new(e);
                return Ok(set.iter().map(|_| Written::SqlFailed(e.clone())).collect());
            }
            Err(e) if e.is_statement_error() => {
                debug!(error = %e, items = set.len(), "a batch's outcome SQL failed; writing its items one by one");
            }
            Err(e) => return Err(e),
        }
        if savepoint {
            self.session.rollback_to_savepoint().await?;
        }
        let mut one_by_one = ItemStore {
            session: self.session,
            queue: self.queue,
            undo: Undo::Savepoint,
            action_wrote: false,
        };
        one_by_one.write(which, set).await
    }

    async fn leave(&mut self, _item: &Item) -> Result<(), DbError> {
        // Actions outside the database wrote nothing here to undo.
        Ok(())
    }
}
