//! The claim's transaction in lease mode: lock up to `batch` waiting rows, run
//! `[lease] sql` on each with a fresh `:lease_id` (each behind a savepoint, so one
//! row's failing lease SQL does not cost the others theirs), commit. The rows are then out of
//! the select, and no lock or transaction outlives this.

use std::sync::Arc;

use crate::db::{DbError, Item, Session, SessionPool, Statements};
use crate::engine::modes::lease::token::Token;
use crate::engine::modes::lease::{Lease, LeaseError};
use crate::engine::policy::concurrency::CopyKeys;
use crate::engine::queue::QueueRuntime;
use crate::engine::turn::admit::admit;
use crate::engine::turn::report::{BatchReport, Returned};
use crate::engine::turn::Turn;
use crate::engine::worker::Ended;

/// What one claim leased.
#[derive(Debug, Default)]
pub struct Leased {
    pub leases: Vec<Lease>,
    /// Rows claimed but not leased (their lease SQL matched nothing, or failed),
    /// with why: left as they were, still waiting.
    pub skipped: Vec<(Item, Returned)>,
    /// What the claim did so far: the rows it handed back, their key at its limit.
    pub report: BatchReport,
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
    let claimed = session.claim(&queue.config.name).await?;
    let columns = session.parts().1.columns.clone();
    let mut keys = CopyKeys::new(queue, &columns);
    let admitted = admit(queue, turn, claimed, &mut keys).await?;
    let mut leased = Leased {
        leases: Vec::with_capacity(admitted.items.len() + admitted.unreadable.len()),
        skipped: Vec::new(),
        report: admitted.report,
    };
    // Every lease holds its key's slot from here: an error before the commit drops
    // them all, and each gives its slot back. A row too large to read takes no key
    // slot: its failure is recorded at once.
    let holding = admitted
        .items
        .into_iter()
        .map(|item| (keys.hold(&item), item, None));
    let unread = admitted
        .unreadable
        .into_iter()
        .map(|u| (None, u.item, Some(u.why.to_string())));
    let token = queue.config.lease().map(|l| l.token).unwrap_or_default();
    let claimed: Vec<Lease> = holding
        .chain(unread)
        .map(|(key, item, unreadable)| Lease {
            item,
            token: Token::claimed(token),
            worker: worker.clone(),
            unreadable,
            key,
        })
        .collect();
    for lease in claimed {
        match lease_one(session, queue, &lease).await? {
            None => leased.leases.push(lease),
            Some(why) => {
                leased.skipped.push((lease.item.clone(), why));
                lease.end().await;
            }
        }
    }
    session.commit().await?;
    Ok(leased)
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
    let id = lease.token.held();
    let mut params = lease.params(&id, None);
    if let Some(rearmed) = queue.claimed_rearm(&lease.item) {
        params.next_run = Some(rearmed.next_run.time());
        params.skipped = Some(u64::from(rearmed.skipped));
    }
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
