//! Recording a leased item's end: `[on_success]` or `[on_failure]` in a new short
//! transaction, committed only if its first statement — guarded by the key and
//! `:lease_id` — matched the row; else the lease was lost meanwhile, and nothing is
//! recorded. And `[lease] release_sql`, which puts a row whose work was cut short
//! back in the select at once instead of when its lease expires.

use tracing::{error, info, warn};

use super::{Lease, LeaseError};
use crate::action::Outcome;
use crate::db::{OutcomeParams, Session, SessionPool, Statements};
use crate::engine::backoff::{pause, Backoff};
use crate::engine::queue::QueueRuntime;
use crate::engine::report::Fate;

/// How many times an outcome is tried while the database cannot be reached.
const RECORD_TRIES: u32 = 6;

/// Records `outcome` for `lease`, and says what became of the item.
pub async fn settle(
    queue: &QueueRuntime,
    pool: &SessionPool,
    lease: &Lease,
    outcome: &Outcome,
    progress: Option<&str>,
) -> Fate {
    if !outcome.succeeded() {
        let reason = outcome.error.as_deref().unwrap_or_default();
        let observed = &queue.stats.observed;
        observed.record_failure(lease.item.key_text(), reason, outcome.status);
    }
    let (which, fate) = match (outcome.succeeded(), &queue.config.on_failure) {
        (true, _) => (Statements::OnSuccess, Fate::Done),
        (false, Some(_)) => (Statements::OnFailure, Fate::Failed),
        (false, None) => {
            let reason = outcome.error.as_deref().unwrap_or_default();
            warn!(error = %reason, "item failed; with no [on_failure] its lease is released (or left to expire)");
            release(queue, pool, lease, progress).await;
            return Fate::Returned;
        }
    };
    let mut params = outcome.params();
    params.lease = lease.lease_params(progress);
    match record_retrying(queue, pool, lease, which, &params).await {
        Ok(true) => {
            if fate == Fate::Failed {
                warn!(error = %outcome.error.as_deref().unwrap_or_default(), "item failed");
            }
            fate
        }
        Ok(false) => {
            queue.stats.record_lease_lost();
            warn!(lease_id = %lease.id,
                "lease lost: the outcome SQL matched no row (the lease expired and another worker \
                 took the row, or the row was changed); this worker's outcome is not recorded");
            Fate::Returned
        }
        Err(LeaseError::Database(e)) if e.is_statement_error() => {
            queue.stats.record_outcome_sql_failure();
            error!(error = %e, "outcome SQL failed; it is rolled back, and the row is worked on \
                   again when its lease expires: fix the SQL");
            Fate::Returned
        }
        Err(e @ LeaseError::CommitUnknown(_)) => {
            warn!(error = %e, "could not learn whether the outcome was recorded; if it was not, \
                  the row is worked on again when its lease expires");
            Fate::Returned
        }
        Err(e) => {
            warn!(error = %e, "could not record the outcome; the row is worked on again when its lease expires");
            Fate::Returned
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
    let mut backoff = Backoff::new(queue.config.error_backoff);
    let mut tries = 1;
    loop {
        let error = match record(queue, pool, lease, which, params).await {
            // The SQL's own error would come again: not worth a retry.
            Err(LeaseError::Database(e)) if e.is_statement_error() => {
                return Err(LeaseError::Database(e))
            }
            // It may have landed: trying again could record it twice.
            Err(e @ LeaseError::CommitUnknown(_)) => return Err(e),
            Err(e) if tries < RECORD_TRIES => e,
            done => return done,
        };
        let wait = backoff.next_wait();
        warn!(%error, retry_in = %humantime::format_duration(wait),
            "could not record the outcome; trying again");
        if !pause(&queue.abort, wait).await {
            return Err(error);
        }
        tries += 1;
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
        .lease
        .as_ref()
        .is_some_and(|l| l.release_sql.is_some());
    if !has_release {
        info!(lease_id = %lease.id, "no [lease] release_sql: the row waits for its lease to expire");
        return;
    }
    let params = lease.params(progress);
    match record(queue, pool, lease, Statements::Release, &params).await {
        Ok(true) => info!(lease_id = %lease.id, "lease released: the row is waiting again"),
        Ok(false) => info!(lease_id = %lease.id, "lease already lost; nothing to release"),
        Err(e) => warn!(error = %e, lease_id = %lease.id,
            "could not release the lease; the row waits for it to expire"),
    }
}
