//! `mode = "lease"`: long jobs without a transaction held. A worker claims rows in a
//! short transaction that runs `[lease] sql` on each (taking it out of the select
//! under a fresh `:lease_id`), commits, and gives its connection back to the
//! queue's small pool; then it runs the action with no connection held, renewing
//! the lease every `renew_every`; then it records the outcome in a new short
//! transaction guarded by the lease. A lease lost — a renewal or an outcome that
//! matches no row — cancels the action and records nothing.
//!
//! - [`worker`]: one worker's loop (claim, work, idle).
//! - [`claim`]: the claim's transaction.
//! - [`heartbeat`]: the action, held by its renewals.
//! - [`outcome`]: `[on_success]`/`[on_failure]` under the lease, and `release_sql`.

mod claim;
mod heartbeat;
mod outcome;
mod worker;

use std::sync::Arc;

use tokio_util::task::TaskTracker;

use super::queue::QueueRuntime;
use super::restart::restart_on_panic;
use super::stats_refresher::{refresh_stats, CountOn};
use crate::db::{
    DbError, ErrorKind, Item, LeaseParams, OpenError, OutcomeParams, Session, SessionPool,
};

/// One claimed row and the token its lease was taken with.
#[derive(Debug)]
pub struct Lease {
    pub item: Item,
    /// `:lease_id`: fresh and random for each claim.
    pub id: String,
    /// `:worker`: who holds it, `host:pid:index`.
    pub worker: Arc<str>,
}

impl Lease {
    /// The statements' parameters for this lease, with `progress` if known.
    fn params<'a>(&'a self, progress: Option<&'a str>) -> OutcomeParams<'a> {
        OutcomeParams {
            lease: self.lease_params(progress),
            ..OutcomeParams::NONE
        }
    }

    fn lease_params<'a>(&'a self, progress: Option<&'a str>) -> LeaseParams<'a> {
        LeaseParams {
            lease_id: Some(&self.id),
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

/// Starts a lease-mode queue's workers and its backlog count, sharing a pool of
/// `[lease] connections` sessions, the first of them `first`, the session the queue
/// was validated with. Once they have all stopped, the pool's idle sessions are
/// closed politely.
pub fn start(queue: Arc<QueueRuntime>, tracker: &TaskTracker, first: Session) {
    let pool = Arc::new(SessionPool::new(
        &queue.config,
        &queue.database,
        queue.config.connections(),
        first,
    ));
    let users = TaskTracker::new();
    for index in 0..queue.config.workers {
        users.spawn(supervise(queue.clone(), pool.clone(), index));
    }
    users.spawn(refresh_stats(queue, CountOn::Pool(pool.clone())));
    users.close();
    tracker.spawn(async move {
        users.wait().await;
        pool.close().await;
    });
}

/// Runs worker `index`, and runs it again if it panics (a bug in tableq): the leases
/// it held expire, and their rows come back.
async fn supervise(queue: Arc<QueueRuntime>, pool: Arc<SessionPool>, index: usize) {
    let left = "its leases expire and their rows come back";
    restart_on_panic(&queue, index, left, || {
        worker::run(queue.clone(), pool.clone(), index)
    })
    .await;
}

/// A fresh `:lease_id`: 128 random bits as hex.
fn new_lease_id() -> String {
    format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..))
}

/// `:worker` for worker `index` of this process: `host:pid:index`.
fn worker_name(index: usize) -> Arc<str> {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".to_string());
    Arc::from(format!("{host}:{}:{index}", std::process::id()))
}
