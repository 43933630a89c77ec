//! Lease mode: long jobs without a transaction held. A worker claims rows in a
//! short transaction that runs `[lease] sql` on each (taking it out of the select
//! under a fresh `:lease_id`), commits, and gives its connection back to the
//! queue's small pool; then it runs the action with no connection held, renewing
//! the lease every `renew_every`; then it records the outcome in a new short
//! transaction guarded by the lease (`crate::engine::turn::record::leased`). A lease lost
//! — a renewal or an outcome that matches no row — cancels the action and records
//! nothing.
//!
//! - [`mode`]: the queue's workers and each one's turn (claim, work each leased
//!   row, record).
//! - [`claim`]: the claim's transaction.
//! - [`heartbeat`]: the action, held by its renewals.
//! - [`token`]: `:lease_id`, random or the table's own reservation time.

mod claim;
mod heartbeat;
mod mode;
pub mod token;

use std::sync::Arc;

use crate::db::{DbError, ErrorKind, Item, LeaseParams, OpenError, OutcomeParams};
use crate::engine::policy::concurrency::KeyHold;
use crate::engine::worker::Ended;
pub use mode::start;

/// One claimed row and the token its lease was taken with.
#[derive(Debug)]
pub struct Lease {
    pub item: Item,
    /// `:lease_id`: fresh for each claim (random, or the claim's time).
    pub token: token::Token,
    /// `:worker`: who holds it, `host:pid:index`.
    pub worker: Arc<str>,
    /// Why its row was not read (too large): it fails without its action running.
    pub unreadable: Option<String>,
    /// Its `[concurrency]` key's slot, held for the lease's life: given back by
    /// [`Lease::end`], or when the lease is dropped, whatever ended it.
    pub key: Option<KeyHold>,
}

impl Lease {
    /// The lease is over (its outcome recorded, or it was lost or released): its
    /// key's slot is given back before the worker claims again.
    pub async fn end(self) {
        if let Some(key) = self.key {
            key.release().await;
        }
    }

    /// The statements' parameters for this lease held under `id` (its token's
    /// [`held`](token::Token::held)), with `progress` if known.
    pub fn params<'a>(&'a self, id: &'a str, progress: Option<&'a str>) -> OutcomeParams<'a> {
        OutcomeParams {
            lease: self.lease_params(id, progress),
            ..OutcomeParams::NONE
        }
    }

    pub fn lease_params<'a>(&'a self, id: &'a str, progress: Option<&'a str>) -> LeaseParams<'a> {
        LeaseParams {
            lease_id: Some(id),
            new_lease_id: None,
            worker: Some(&self.worker),
            progress,
        }
    }
}

/// Why a lease-mode step could not reach the database.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("{0}")]
    Open(#[from] OpenError),
    #[error("{0}")]
    Database(#[from] DbError),
    /// The COMMIT was sent but its answer lost: what it recorded is not known.
    #[error("no answer to the COMMIT: {0}")]
    CommitUnknown(DbError),
}

impl LeaseError {
    /// What kind of database error this is, as the metrics count it.
    pub fn kind(&self) -> ErrorKind {
        self.db_error().map_or(ErrorKind::Connect, DbError::kind)
    }

    /// The database's error, if the step reached the database.
    pub fn db_error(&self) -> Option<&DbError> {
        match self {
            LeaseError::Open(_) => None,
            LeaseError::Database(e) | LeaseError::CommitUnknown(e) => Some(e),
        }
    }
}

impl From<LeaseError> for Ended {
    fn from(error: LeaseError) -> Ended {
        match error {
            LeaseError::Open(e) => Ended::NotOpened(e),
            LeaseError::Database(e) if e.is_contention() => Ended::Contention(e),
            LeaseError::Database(e) | LeaseError::CommitUnknown(e) => Ended::Lost(e),
        }
    }
}
