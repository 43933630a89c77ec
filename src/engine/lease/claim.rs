//! The claim's transaction in lease mode: lock up to `batch` waiting rows, run
//! `[lease] sql` on each with a fresh `:lease_id`, commit. The rows are then out of
//! the select, and no lock or transaction outlives this.

use std::sync::Arc;

use tracing::warn;

use super::{new_lease_id, Lease, LeaseError};
use crate::db::{DbError, Session, SessionPool, Statements};
use crate::engine::observe::BatchWatch;
use crate::engine::queue::QueueRuntime;

/// Claims and leases up to `batch` rows for `worker`, on a pooled session.
pub async fn claim(
    queue: &QueueRuntime,
    pool: &SessionPool,
    worker: &Arc<str>,
) -> Result<Vec<Lease>, LeaseError> {
    let mut pooled = pool.get().await?;
    queue.stats.record_claim();
    let watch = BatchWatch::new(queue);
    let result = lease_rows(pooled.session(), &queue.config.name, worker, &watch).await;
    match &result {
        Ok(_) => watch.committed(),
        Err(e) => {
            watch.failed(e);
            // The transaction's state is unknown: the server rolls it back with the
            // connection.
            pooled.discard();
        }
    }
    Ok(result?)
}

async fn lease_rows(
    session: &mut Session,
    queue: &str,
    worker: &Arc<str>,
    watch: &BatchWatch<'_>,
) -> Result<Vec<Lease>, DbError> {
    let items = session.claim(queue).await?;
    watch.claimed(&items);
    let mut leases = Vec::with_capacity(items.len());
    for item in items {
        let lease = Lease {
            item,
            id: new_lease_id(),
            worker: worker.clone(),
        };
        let matched = session
            .run_counted(Statements::Lease, &lease.item, queue, &lease.params(None))
            .await?;
        if matched == 0 {
            warn!(key = %lease.item.key_text(),
                "[lease] sql matched no row: the row is not leased and is left as it is; \
                 the lease SQL must update the claimed row by its key");
            continue;
        }
        leases.push(lease);
    }
    session.commit().await?;
    Ok(leases)
}
