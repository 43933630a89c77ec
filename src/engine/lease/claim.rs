//! The claim's transaction in lease mode: lock up to `batch` waiting rows, run
//! `[lease] sql` on each with a fresh `:lease_id` (each behind a savepoint, so one
//! row's failing lease SQL does not cost the others theirs), commit. The rows are then out of
//! the select, and no lock or transaction outlives this.

use std::sync::Arc;

use tracing::warn;

use super::{Lease, LeaseError};
use crate::db::{DbError, Session, SessionPool, Statements};
use crate::engine::queue::QueueRuntime;
use crate::engine::record::sql_failed;
use crate::engine::turn::Turn;

/// What one claim leased.
#[derive(Debug, Default)]
pub struct Leased {
    pub leases: Vec<Lease>,
    /// Rows claimed but not leased (their lease SQL matched nothing, or failed):
    /// left as they were, still waiting.
    pub skipped: usize,
}

/// Claims and leases up to `batch` rows for `worker`, on a pooled session; `None`
/// when told to stop while waiting for a session (nothing is leased then).
pub async fn claim(
    queue: &QueueRuntime,
    pool: &SessionPool,
    worker: &Arc<str>,
    turn: &Turn<'_>,
) -> Result<Option<Leased>, LeaseError> {
    let mut pooled = pool.get().await?;
    if queue.stop.is_cancelled() {
        pooled.keep();
        return Ok(None);
    }
    turn.claiming();
    let result = lease_rows(pooled.session(), queue, worker, turn).await;
    match &result {
        Ok(_) => {
            turn.committed();
            pooled.keep();
        }
        // The transaction's state is unknown: the session is given up, and the
        // server rolls it back with the connection.
        Err(e) => turn.failed(e),
    }
    Ok(Some(result?))
}

async fn lease_rows(
    session: &mut Session,
    queue: &QueueRuntime,
    worker: &Arc<str>,
    turn: &Turn<'_>,
) -> Result<Leased, DbError> {
    let name = queue.config.name.as_str();
    let items = session.claim(name).await?;
    turn.claimed(&items);
    let mut claimed = Leased {
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
        // The database takes no writes now: nothing is leased, and the claim ends.
        Err(e) if e.refuses_writes().is_some() => Err(e),
        Err(e) if e.is_statement_error() => {
            session.rollback_to_savepoint().await?;
            sql_failed(queue, &lease.item, Statements::Lease, &e, None);
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// A fresh `:lease_id`: 128 random bits as hex.
fn new_lease_id() -> String {
    format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..))
}
