//! One transaction of a worker: claim up to `batch` rows, process them by the
//! action's kind and the queue's scope, commit. An `Err` means the transaction is
//! lost (and with it every lock): the caller drops the session; the rows are waiting.
//!
//! Actions that run in the transaction run optimistically: no savepoints, so an
//! item costs one round trip per statement. If any item fails, the transaction is
//! rolled back — nothing of the batch is kept — and the claim is made again with a
//! savepoint per item, so a failure can be undone alone and recorded by
//! `[on_failure]`.

use crate::action::{Action, Outcome};
use crate::db::{DbError, Item, Session, Unreadable};
use crate::engine::modes::transaction::{external, sql};
use crate::engine::policy::concurrency::SessionKeys;
use crate::engine::queue::QueueRuntime;
use crate::engine::turn::admit::{admit, Admitted};
use crate::engine::turn::record::item::Undo;
use crate::engine::turn::record::record;
use crate::engine::turn::record::transaction::TransactionStore;
use crate::engine::turn::report::BatchReport;
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
    let claimed = session.claim(&queue.config.name).await?;
    let admitted = admit(queue, turn, claimed, &mut SessionKeys(session)).await?;
    if admitted.is_empty() {
        session.commit().await?;
        return Ok(Processed::Empty);
    }
    let Admitted {
        items,
        unreadable,
        report,
        at_limit: _at_limit,
    } = admitted;
    let processed = process(session, queue, with_savepoints, &items, &unreadable, report).await;
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
    unreadable: &[Unreadable],
    mut report: BatchReport,
) -> Result<Processed, DbError> {
    match &queue.action {
        _ if items.is_empty() => {}
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
    // After the others, so that a batch rolled back whole has recorded nothing.
    fail_unreadable(session, queue, unreadable, &mut report).await?;
    session.commit().await?;
    Ok(Processed::Committed(report))
}

/// Records each row too large to read as failed, through `[on_failure]` (with the
/// size and the limit in `:error`): its action never runs, and the queue goes on
/// past it. Without `[on_failure]` it is left waiting, as any failure would be.
async fn fail_unreadable(
    session: &mut Session,
    queue: &QueueRuntime,
    unreadable: &[Unreadable],
    report: &mut BatchReport,
) -> Result<(), DbError> {
    if unreadable.is_empty() {
        return Ok(());
    }
    let outcomes: Vec<Outcome> = unreadable
        .iter()
        .map(|u| Outcome::failure(u.why.to_string()))
        .collect();
    let entries: Vec<_> = unreadable
        .iter()
        .zip(&outcomes)
        .map(|(u, outcome)| (&u.item, Some(outcome)))
        .collect();
    let mut store = TransactionStore::new(session, queue, Undo::Savepoint, false);
    record(queue, &mut store, &entries, report).await
}
