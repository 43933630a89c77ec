//! Transaction mode's store: outcomes written on the worker's session, in its
//! transaction, item by item or in sets, as the queue's scope says.

use crate::action::Outcome;
use crate::db::{DbError, Item, Session, Statements};
use crate::engine::queue::QueueRuntime;
use crate::engine::turn::record::item::{ItemStore, Undo};
use crate::engine::turn::record::set::SetStore;
use crate::engine::turn::record::{Store, Written};

/// Outcomes written on a worker's session, in its transaction, by the queue's
/// scope: item by item ([`ItemStore`]), or in sets (`scope = "batch"`:
/// [`SetStore`]).
pub enum TransactionStore<'s> {
    Items(ItemStore<'s>),
    Sets(SetStore<'s>),
}

impl<'s> TransactionStore<'s> {
    /// The store for `queue`'s scope, undoing a failed write by `undo`; with
    /// `action_wrote`, the action ran SQL in each item's savepoint (item scope).
    pub fn new(
        session: &'s mut Session,
        queue: &'s QueueRuntime,
        undo: Undo,
        action_wrote: bool,
    ) -> Self {
        match queue.batch_scope() {
            true => TransactionStore::Sets(SetStore {
                session,
                queue,
                undo,
            }),
            false => TransactionStore::Items(ItemStore {
                session,
                queue,
                undo,
                action_wrote,
            }),
        }
    }
}

impl Store for TransactionStore<'_> {
    type Error = DbError;

    async fn write(
        &mut self,
        which: Statements,
        set: &[(&Item, &Outcome)],
    ) -> Result<Vec<Written>, DbError> {
        match self {
            TransactionStore::Items(store) => store.write(which, set).await,
            TransactionStore::Sets(store) => store.write(which, set).await,
        }
    }

    async fn gave_up(&mut self, item: &Item) -> Option<bool> {
        match self {
            TransactionStore::Items(store) => store.gave_up(item).await,
            TransactionStore::Sets(store) => store.gave_up(item).await,
        }
    }

    async fn leave(&mut self, item: &Item) -> Result<(), DbError> {
        match self {
            TransactionStore::Items(store) => store.leave(item).await,
            TransactionStore::Sets(store) => store.leave(item).await,
        }
    }
}
