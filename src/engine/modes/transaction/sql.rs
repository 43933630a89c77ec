//! Actions that run in the batch's own transaction (SQL): an item's work and its
//! row's change commit together.

use tracing::{debug, Instrument};

use crate::action::{InTransaction, Outcome};
use crate::db::{DbError, Item, Session, Statements};
use crate::engine::queue::QueueRuntime;
use crate::engine::turn::execute::Work;
use crate::engine::turn::record::item::{ItemStore, Undo};
use crate::engine::turn::record::transaction::TransactionStore;
use crate::engine::turn::record::{record, Store, Written};
use crate::engine::turn::report::{BatchReport, Fate, Returned};
use crate::engine::turn::settle::item_span;

/// Runs the batch without savepoints: in item scope the action and `[on_success]`
/// for each item, in batch scope each once for the whole batch. Returns false —
/// after rolling the whole transaction back — as soon as anything fails: the batch
/// must be claimed again and run [`with_savepoints`].
pub async fn optimistic(
    session: &mut Session,
    queue: &QueueRuntime,
    action: &dyn InTransaction,
    items: &[Item],
    report: &mut BatchReport,
) -> Result<bool, DbError> {
    let ran = if queue.batch_scope() {
        all_at_once(session, queue, action, items, report).await?
    } else {
        one_at_a_time(session, queue, action, items, report).await?
    };
    if !ran {
        session.rollback().await?;
        debug!(
            items = items.len(),
            "an item failed; the batch is rolled back and claimed again with a savepoint per item"
        );
    }
    Ok(ran)
}

/// Item scope: each item's action, then its `[on_success]`; false at the first
/// failure.
async fn one_at_a_time(
    session: &mut Session,
    queue: &QueueRuntime,
    action: &dyn InTransaction,
    items: &[Item],
    report: &mut BatchReport,
) -> Result<bool, DbError> {
    for (index, item) in items.iter().enumerate() {
        if stopping_at(queue, items, index, report) {
            break;
        }
        let succeeded = async {
            let succeeded = succeeds(session, queue, action, Work::item(queue, item)).await?;
            if let Some(outcome) = &succeeded {
                queue.settle(report, item, Fate::Done, Some(outcome));
            }
            Ok::<_, DbError>(succeeded.is_some())
        };
        if !succeeded.instrument(item_span(item)).await? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Batch scope: the action once for every item, then `[on_success]` once for every
/// item; false if either fails.
async fn all_at_once(
    session: &mut Session,
    queue: &QueueRuntime,
    action: &dyn InTransaction,
    items: &[Item],
    report: &mut BatchReport,
) -> Result<bool, DbError> {
    if stopping_at(queue, items, 0, report) {
        return Ok(true);
    }
    let Some(outcome) = succeeds(session, queue, action, Work::batch(items)).await? else {
        return Ok(false);
    };
    for item in items {
        queue.settle(report, item, Fate::Done, Some(&outcome));
    }
    Ok(true)
}

/// Runs the action for `work`, then `[on_success]` for the same items (once for
/// the batch, in batch scope), with nothing to undo on its own: any failure rolls
/// the whole batch back. The action's outcome if both succeeded.
async fn succeeds(
    session: &mut Session,
    queue: &QueueRuntime,
    action: &dyn InTransaction,
    work: Work<'_>,
) -> Result<Option<Outcome>, DbError> {
    let outcome = queue.execute_in(action, session, work).await?;
    let Some(outcome) = outcome.filter(Outcome::succeeded) else {
        return Ok(None);
    };
    let set: Vec<(&Item, &Outcome)> = work.items.iter().map(|item| (item, &outcome)).collect();
    let mut store = TransactionStore::new(session, queue, Undo::Batch, false);
    let written = store.write(Statements::OnSuccess, &set).await?;
    let all = written.iter().all(|w| matches!(w, Written::Recorded));
    Ok(all.then_some(outcome))
}

/// Runs every item in a savepoint of its own, even alone in its batch: a failed or
/// timed-out action's work (a CALL's inner statements, a statement that finished
/// as the deadline passed) is undone before `[on_failure]` runs. In batch scope each
/// item runs alone, as a one-element `:batch`.
pub async fn with_savepoints(
    session: &mut Session,
    queue: &QueueRuntime,
    action: &dyn InTransaction,
    items: &[Item],
    report: &mut BatchReport,
) -> Result<(), DbError> {
    for (index, item) in items.iter().enumerate() {
        if stopping_at(queue, items, index, report) {
            break;
        }
        async {
            session.savepoint().await?;
            let outcome = queue
                .execute_in(action, session, Work::item(queue, item))
                .await?;
            let mut store = ItemStore {
                session,
                queue,
                undo: Undo::Savepoint,
                action_wrote: true,
            };
            record(queue, &mut store, &[(item, outcome.as_ref())], report).await
        }
        .instrument(item_span(item))
        .await?;
    }
    Ok(())
}

/// True when the worker is stopping before item `index`: the items not started
/// stay untouched, settled as returned, and wait again once the batch commits.
fn stopping_at(
    queue: &QueueRuntime,
    items: &[Item],
    index: usize,
    report: &mut BatchReport,
) -> bool {
    if !queue.stop.is_cancelled() {
        return false;
    }
    for item in &items[index..] {
        let stopping = Fate::Returned(Returned::Stopping);
        queue.settle(report, item, stopping, None);
    }
    true
}
