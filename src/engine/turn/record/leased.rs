//! Lease mode: an outcome written in a short transaction of its own, on a session of
//! the queue's pool, committed only if its first statement — guarded by the key and
//! `:lease_id` — matched the row; else the lease was lost meanwhile, and nothing is
//! written. And `[lease] release_sql`, which puts a row whose work was cut short
//! back in the select at once instead of when its lease expires.

use std::convert::Infallible;
use std::sync::Arc;

use tracing::{info, warn};

use crate::action::Outcome;
use crate::db::{DbError, Item, OutcomeParams, Refusal, Session, SessionPool, Statements};
use crate::duration::rounded;
use crate::engine::modes::lease::{Lease, LeaseError};
use crate::engine::policy::retry::{Failure, Next, Retry};
use crate::engine::queue::QueueRuntime;
use crate::engine::turn::record::{RefusesWrites, Store, UntilTaken, Written};

/// How many times an outcome is tried while the database cannot be reached.
const RECORD_TRIES: u32 = 6;

/// Writes one lease's outcome.
pub struct LeaseStore<'a> {
    pub queue: &'a QueueRuntime,
    pub pool: &'a SessionPool,
    pub lease: &'a Lease,
    /// The action's last progress line, for `:progress`.
    pub progress: Option<&'a str>,
}

impl Store for LeaseStore<'_> {
    type Error = Infallible;

    async fn write(
        &mut self,
        which: Statements,
        set: &[(&Item, &Outcome)],
    ) -> Result<Vec<Written>, Infallible> {
        let mut written = Vec::with_capacity(set.len());
        for (_, outcome) in set {
            loop {
                let id = self.lease.token.held();
                let mut params = outcome.params();
                params.lease = self.lease.lease_params(&id, self.progress);
                let one = self.written(which, &params).await;
                // A renewal whose end was not heard may hold the row: tried next.
                let lost = matches!(one, Written::LeaseLost { .. });
                if !(lost && self.lease.token.adopt_pending()) {
                    written.push(one);
                    break;
                }
            }
        }
        Ok(written)
    }

    async fn leave(&mut self, _item: &Item) -> Result<(), Infallible> {
        release(self.queue, self.pool, self.lease, self.progress).await;
        Ok(())
    }
}

impl LeaseStore<'_> {
    async fn written(&self, which: Statements, params: &OutcomeParams<'_>) -> Written {
        let (queue, pool, lease) = (self.queue, self.pool, self.lease);
        // The outcome is known: written until the database takes it.
        let mut until_taken = UntilTaken::new(queue);
        let recorded = loop {
            let recorded = record_retrying(queue, pool, lease, which, params).await;
            if !until_taken.again(&recorded).await {
                break recorded;
            }
        };
        match recorded {
            Ok(true) => Written::Recorded,
            Ok(false) => Written::LeaseLost {
                lease_id: self.lease.token.held(),
            },
            Err(LeaseError::Database(e)) if e.is_statement_error() => {
                Written::SqlFailed(Arc::new(e))
            }
            Err(e @ LeaseError::CommitUnknown(_)) => Written::Unknown(format!(
                "{e}: if it was not recorded, the row is worked on again when its lease expires"
            )),
            Err(e) => Written::Unknown(e.to_string()),
        }
    }
}

/// [`record`], tried again while the database cannot be reached (a job of minutes
/// is worth a minute of retries) — at most [`RECORD_TRIES`] times, waiting
/// `error_backoff`, doubling, and not past the shutdown timeout. The guard keeps a
/// late try harmless: once another worker holds the row, it matches nothing.
async fn record_retrying(
    queue: &QueueRuntime,
    pool: &SessionPool,
    lease: &Lease,
    which: Statements,
    params: &OutcomeParams<'_>,
) -> Result<bool, LeaseError> {
    let mut retry = Retry::new(queue.config.error_backoff, &queue.abort);
    let attempt = || record(queue, pool, lease, which, params);
    retry
        .run(attempt, |error, failure| {
            queue.stats.observed.record_db_error(error.kind());
            next_try(queue, error, failure)
        })
        .await
}

/// Whether to write a lease's outcome again after `error`.
fn next_try(queue: &QueueRuntime, error: &LeaseError, failure: Failure) -> Next {
    match error {
        // The SQL's own error would come again, and a refusal is the caller's to
        // wait out: not worth a retry here.
        LeaseError::Database(e) if e.is_statement_error() => Next::GiveUp,
        // It may have landed: trying again could record it twice.
        LeaseError::CommitUnknown(_) => Next::GiveUp,
        _ if failure.times >= RECORD_TRIES => Next::GiveUp,
        error => {
            let cause = match error {
                LeaseError::Open(e) => e.unreachable(),
                e => e.db_error(),
            };
            let retry_in = failure.retry_in;
            if !cause.is_some_and(|e| queue.said_with_advice(e, retry_in)) {
                warn!(%error, retry_in = %rounded(retry_in), "could not record the outcome; trying again");
            }
            Next::Again
        }
    }
}

/// Runs `which` for `lease` and commits if its guard matched the row; `false`
/// (rolled back) if it did not.
async fn record(
    queue: &QueueRuntime,
    pool: &SessionPool,
    lease: &Lease,
    which: Statements,
    params: &OutcomeParams<'_>,
) -> Result<bool, LeaseError> {
    let mut pooled = pool.get().await?;
    let result = record_on(pooled.session(), &queue.config.name, lease, which, params).await;
    pooled
        .finish_after(result.as_ref().err().and_then(LeaseError::db_error))
        .await;
    result
}

async fn record_on(
    session: &mut Session,
    queue: &str,
    lease: &Lease,
    which: Statements,
    params: &OutcomeParams<'_>,
) -> Result<bool, LeaseError> {
    let matched = session
        .run_counted(which, &lease.item, queue, params)
        .await?;
    if matched == 0 {
        session.rollback().await?;
        return Ok(false);
    }
    session.commit().await.map_err(LeaseError::CommitUnknown)?;
    Ok(true)
}

/// Runs `[lease] release_sql` for `lease`, if the queue has it; without it the row
/// waits for its lease to expire.
pub async fn release(
    queue: &QueueRuntime,
    pool: &SessionPool,
    lease: &Lease,
    progress: Option<&str>,
) {
    let has_release = queue
        .config
        .lease()
        .is_some_and(|l| l.release_sql.is_some());
    if !has_release {
        let lease_id = lease.token.held();
        info!(%lease_id, "no [lease] release_sql: the row waits for its lease to expire");
        return;
    }
    let (lease_id, released) = loop {
        let lease_id = lease.token.held();
        let params = lease.params(&lease_id, progress);
        let released = record(queue, pool, lease, Statements::Release, &params).await;
        // A renewal whose end was not heard may hold the row: tried next.
        if !(matches!(released, Ok(false)) && lease.token.adopt_pending()) {
            break (lease_id, released);
        }
    };
    match released {
        Ok(true) => info!(%lease_id, "lease released: the row is waiting again"),
        Ok(false) => info!(%lease_id, "lease already lost; nothing to release"),
        Err(e) => warn!(error = %e, %lease_id,
            "could not release the lease; the row waits for it to expire"),
    }
}

impl RefusesWrites for LeaseError {
    fn refuses_writes(&self) -> Option<Refusal> {
        self.db_error().and_then(DbError::refuses_writes)
    }
}
