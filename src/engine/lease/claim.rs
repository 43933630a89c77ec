//! The claim's transaction in lease mode: lock up to `batch` waiting rows, run
//! `[lease] sql` on each with a fresh `:lease_id` (each behind a savepoint, so one
//! row's failing lease SQL does not cost the others theirs), commit. The rows are then out of
//! the select, and no lock or transaction outlives this.

use std::sync::Arc;

use super::{Lease, LeaseError};
use crate::db::{Claimed, DbError, Item, Session, SessionPool, Statements};
use crate::engine::queue::QueueRuntime;
use crate::engine::report::Returned;
use crate::engine::turn::Turn;
use crate::engine::worker::Ended;

/// What one claim leased.
#[derive(Debug, Default)]
pub struct Leased {
    pub leases: Vec<Lease>,
    /// Rows claimed but not leased (their lease SQL matched nothing, or failed),
    /// with why: left as they were, still waiting.
    pub skipped: Vec<(Item, Returned)>,
}

/// Claims and leases up to `batch` rows for `worker`, on a pooled session; what
/// the turn came to instead when nothing was claimed: told to stop, or the queue
/// paused, while waiting for a session (nothing is leased then), or the claim failed.
pub async fn claim(
    queue: &QueueRuntime,
    pool: &SessionPool,
    worker: &Arc<str>,
    turn: &Turn<'_>,
) -> Result<Leased, Ended> {
    let mut pooled = pool.get().await.map_err(LeaseError::from)?;
    if queue.stop.is_cancelled() {
        pooled.keep();
        return Err(Ended::Stopped);
    }
    if !turn.claiming() {
        pooled.keep();
        return Err(Ended::Paused);
    }
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
    result.map_err(|e| LeaseError::from(e).into())
}

async fn lease_rows(
    session: &mut Session,
    queue: &QueueRuntime,
    worker: &Arc<str>,
    turn: &Turn<'_>,
) -> Result<Leased, DbError> {
    let name = queue.config.name.as_str();
    let Claimed { items, unreadable } = session.claim(name).await?;
    turn.claimed(&items);
    let mut claimed = Leased {
        leases: Vec::with_capacity(items.len() + unreadable.len()),
        skipped: Vec::new(),
    };
    let (items, at_limit) = hold_keys(queue, session, items).await;
    for item in at_limit {
        claimed.skipped.push((item, Returned::KeyAtLimit));
    }
    let unread = unreadable
        .into_iter()
        .map(|u| (u.item, Some(u.why.to_string())));
    for (item, unreadable) in items.into_iter().map(|item| (item, None)).chain(unread) {
        let lease = Lease {
            item,
            id: new_lease_id(),
            worker: worker.clone(),
            unreadable,
        };
        match lease_one(session, queue, &lease).await {
            Ok(None) => claimed.leases.push(lease),
            Ok(Some(why)) => {
                release_key(queue, &lease.item).await;
                claimed.skipped.push((lease.item, why));
            }
            Err(e) => {
                release_key(queue, &lease.item).await;
                for lease in &claimed.leases {
                    release_key(queue, &lease.item).await;
                }
                return Err(e);
            }
        }
    }
    session.commit().await?;
    Ok(claimed)
}

/// `[concurrency]` in lease mode: a slot of each claimed row's key, taken on the
/// copy's own connection so that it is held for the lease's life: the rows it got
/// one for, and those whose key is at its limit (or that could not be asked: they
/// wait).
async fn hold_keys(
    queue: &QueueRuntime,
    session: &mut Session,
    items: Vec<Item>,
) -> (Vec<Item>, Vec<Item>) {
    let Some(copies) = queue
        .limits
        .shared()
        .filter(|_| queue.config.concurrency.is_some())
    else {
        return (items, Vec::new());
    };
    let columns = session.parts().1.columns.clone();
    let taken = copies
        .take_keys(&queue.config, &columns, &queue.database, &items)
        .await;
    let got = taken.unwrap_or_else(|_| vec![false; items.len()]);
    let (held, at_limit): (Vec<_>, Vec<_>) = items.into_iter().zip(got).partition(|(_, g)| *g);
    let items = |pairs: Vec<(Item, bool)>| pairs.into_iter().map(|(item, _)| item).collect();
    (items(held), items(at_limit))
}

/// Gives back a leased row's `[concurrency]` key slot: its outcome is recorded, its
/// lease lost or released, or it was not leased after all.
pub async fn release_key(queue: &QueueRuntime, item: &Item) {
    if let Some(copies) = queue
        .limits
        .shared()
        .filter(|_| queue.config.concurrency.is_some())
    {
        copies.release_key(item).await;
    }
}

/// Runs `[lease] sql` for one claimed row, behind a savepoint: a row whose lease
/// SQL fails (its own error) or matches nothing is skipped — left as it was — and
/// the others of the claim are leased. Why it was skipped, if it was.
async fn lease_one(
    session: &mut Session,
    queue: &QueueRuntime,
    lease: &Lease,
) -> Result<Option<Returned>, DbError> {
    let name = queue.config.name.as_str();
    session.savepoint().await?;
    let params = lease.params(None);
    match session
        .run_counted(Statements::Lease, &lease.item, name, &params)
        .await
    {
        Ok(0) => {
            // What its other statements did is undone: the row is left as it was.
            session.rollback_to_savepoint().await?;
            Ok(Some(Returned::NotLeased))
        }
        Ok(_) => Ok(None),
        // The database takes no writes now: nothing is leased, and the claim ends.
        Err(e) if e.refuses_writes().is_some() => Err(e),
        Err(e) if e.is_statement_error() => {
            session.rollback_to_savepoint().await?;
            let which = Statements::Lease;
            let error = Arc::new(e);
            Ok(Some(Returned::SqlFailed { which, error }))
        }
        Err(e) => Err(e),
    }
}

/// A fresh `:lease_id`: 128 random bits as hex.
fn new_lease_id() -> String {
    format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..))
}
