//! Actions that run in the batch's own transaction (SQL): an item's work and its
//! row's change commit together.

use tracing::{debug, Instrument};

use super::batch::stopping_at;
use crate::action::{InTransaction, Outcome};
use crate::db::{DbError, Item, OutcomeParams, Session, Statements};
use crate::engine::execute::Work;
use crate::engine::queue::QueueRuntime;
use crate::engine::record::item::{ItemStore, Undo};
use crate::engine::record::{item_span, record, trace};
use crate::engine::report::{BatchReport, Fate};

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
        let succeeded = succeeds(session, queue, action, Work::item(queue, item))
            .instrument(item_span(item))
            .await?;
        let Some(outcome) = succeeded else {
            return Ok(false);
        };
        report.count(Fate::Done, || item.key_text());
        trace(report, item, Some(&outcome), Fate::Done, None);
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
        report.count(Fate::Done, || item.key_text());
        trace(report, item, Some(&outcome), Fate::Done, None);
    }
    Ok(true)
}

/// Runs the action for `work`, then `[on_success]` for the same items; the
/// action's outcome if both succeeded.
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
    let name = queue.config.name.as_str();
    let written = match work.items {
        [item] if !work.batch => {
            session
                .run(Statements::OnSuccess, item, name, &OutcomeParams::NONE)
                .await
        }
        items => {
            let all: Vec<(&Item, OutcomeParams)> = items
                .iter()
                .map(|item| (item, OutcomeParams::NONE))
                .collect();
            session.run_batch(Statements::OnSuccess, &all, name).await
        }
    };
    match written {
        Ok(()) => Ok(Some(outcome)),
        Err(e) if e.is_statement_error() => Ok(None),
        Err(e) => Err(e),
    }
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
