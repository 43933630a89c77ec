//! One transaction of a worker: claim up to `batch` rows, process them by the
//! action's kind and the queue's scope, commit. An `Err` means the transaction is
//! lost (and with it every lock): the caller drops the session; the rows are waiting.
//!
//! Actions that run in the transaction run optimistically: no savepoints, so an
//! item costs one round trip per statement. If any item fails, the transaction is
//! rolled back — nothing of the batch is kept — and the claim is made again with a
//! savepoint per item, so a failure can be undone alone and recorded by
//! `[on_failure]`.

use super::{external, sql};
use crate::action::Action;
use crate::db::Item;
use crate::db::{DbError, Session};
use crate::engine::queue::QueueRuntime;
use crate::engine::report::{BatchReport, Fate, Returned};
use crate::engine::turn::Turn;

/// What one transaction came to.
pub enum Processed {
    /// The claim found nothing.
    Empty,
    /// Processed and committed.
    Committed(BatchReport),
    /// An item failed in a batch run without savepoints: all of it was rolled back.
    RolledBack,
}

/// Claims and processes one batch on `session`; `turn` hears what the claim found
/// as soon as it is known.
pub async fn claim_and_process(
    session: &mut Session,
    queue: &QueueRuntime,
    with_savepoints: bool,
    turn: &Turn<'_>,
) -> Result<Processed, DbError> {
    let items = session.claim(&queue.config.name).await?;
    turn.claimed(&items);
    if items.is_empty() {
        session.commit().await?;
        return Ok(Processed::Empty);
    }
    let mut report = BatchReport::claimed(items.len());
    let (items, at_limit) = session.hold_keys(items).await?;
    for item in &at_limit {
        queue.settle(
            &mut report,
            item,
            Fate::Returned(Returned::KeyAtLimit),
            None,
        );
    }
    let _at_limit = queue
        .stats
        .observed
        .limited
        .at_limit(session.keys_at_limit());
    let processed = process(session, queue, with_savepoints, &items, report).await;
    // Held while the action ran and its outcome was recorded; given back once the
    // transaction ended (a lost one's session is dropped, and its locks with it).
    if processed.is_ok() {
        session.release_keys().await?;
    }
    processed
}

/// Processes the claimed `items` by the action's kind and the queue's scope, and
/// commits.
async fn process(
    session: &mut Session,
    queue: &QueueRuntime,
    with_savepoints: bool,
    items: &[Item],
    mut report: BatchReport,
) -> Result<Processed, DbError> {
    if items.is_empty() {
        session.commit().await?;
        return Ok(Processed::Committed(report));
    }
    match &queue.action {
        Action::External(action) => {
            external::process(session, queue, &**action, items, &mut report).await?
        }
        Action::InTransaction(action) if with_savepoints => {
            sql::with_savepoints(session, queue, &**action, items, &mut report).await?
        }
        Action::InTransaction(action) => {
            if !sql::optimistic(session, queue, &**action, items, &mut report).await? {
                return Ok(Processed::RolledBack);
            }
        }
    }
    session.commit().await?;
    Ok(Processed::Committed(report))
}
