//! The claim's transaction in lease mode: lock up to `batch` waiting rows, run
//! `[lease] sql` on each with a fresh `:lease_id` (each behind a savepoint, so one
//! row's failing lease SQL does not cost the others theirs), commit. The rows are then out of
//! the select, and no lock or transaction outlives this.

use std::sync::Arc;

use tracing::{error, warn};

use super::{new_lease_id, Lease, LeaseError};
use crate::db::{DbError, Session, SessionPool, Statements};
use crate::engine::observe::BatchWatch;
use crate::engine::queue::QueueRuntime;

/// What one claim came to.
#[derive(Debug, Default)]
pub struct Claimed {
    pub leases: Vec<Lease>,
    /// Rows claimed but not leased (their lease SQL matched nothing, or failed):
    /// left as they were, still waiting.
    pub skipped: usize,
}

/// Claims and leases up to `batch` rows for `worker`, on a pooled session.
pub async fn claim(
    queue: &QueueRuntime,
    pool: &SessionPool,
    worker: &Arc<str>,
) -> Result<Claimed, LeaseError> {
    let mut pooled = pool.get().await?;
    if queue.stop.is_cancelled() {
        // Stopped while waiting for a session: lease nothing.
        pooled.keep();
        return Ok(Claimed::default());
    }
    queue.stats.record_claim();
    let watch = BatchWatch::new(queue);
    let result = lease_rows(pooled.session(), queue, worker, &watch).await;
    match &result {
        Ok(_) => {
            watch.committed();
            pooled.keep();
        }
        // The transaction's state is unknown: the session is given up, and the
        // server rolls it back with the connection.
        Err(e) => watch.failed(e),
    }
    Ok(result?)
}

async fn lease_rows(
    session: &mut Session,
    queue: &QueueRuntime,
    worker: &Arc<str>,
    watch: &BatchWatch<'_>,
) -> Result<Claimed, DbError> {
    let name = queue.config.name.as_str();
    let items = session.claim(name).await?;
    watch.claimed(&items);
    let mut claimed = Claimed {
        leases: Vec::with_capacity(items.len()),
        skipped: 0,
    };
    for item in items {
        let lease = Lease {
            item,
            id: new_lease_id(),
            worker: worker.clone(),
        };
        if lease_one(session, queue, &lease).await? {
            claimed.leases.push(lease);
        } else {
            claimed.skipped += 1;
        }
    }
    session.commit().await?;
    Ok(claimed)
}

/// Runs `[lease] sql` for one claimed row, behind a savepoint: a row whose lease
/// SQL fails (its own error) or matches nothing is skipped — left as it was — and
/// the others of the claim are leased. True if the row is leased.
async fn lease_one(
    session: &mut Session,
    queue: &QueueRuntime,
    lease: &Lease,
) -> Result<bool, DbError> {
    let name = queue.config.name.as_str();
    session.savepoint().await?;
    let params = lease.params(None);
    let key = lease.item.key_text();
    match session
        .run_counted(Statements::Lease, &lease.item, name, &params)
        .await
    {
        Ok(0) => {
            // What its other statements did is undone: the row is left as it was.
            session.rollback_to_savepoint().await?;
            if queue.outcome_sql_failed.first(&key) {
                warn!(%key, "[lease] sql matched no row: the row is not leased and is left as \
                      it is; the lease SQL must update the claimed row by its key; said once \
                      per row");
            }
            Ok(false)
        }
        Ok(_) => Ok(true),
        Err(e) if e.is_statement_error() => {
            session.rollback_to_savepoint().await?;
            queue.stats.record_outcome_sql_failure();
            if queue.outcome_sql_failed.first(&key) {
                error!(error = %e, %key, "[lease] sql failed; the row is left as it was and \
                       tried again at the next claim: fix the SQL; said once per row");
            }
            Ok(false)
        }
        Err(e) => Err(e),
    }
}
