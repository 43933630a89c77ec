//! SQL actions: the action's statements and the outcome SQL run in the batch's own
//! transaction, so an item's work and its row's change commit together.

use tokio::time::Instant;
use tracing::{debug, Instrument};

use super::settle::{settle, Undo};
use super::{item_span, stopping_at};
use crate::action::{self, Outcome};
use crate::db::{DbError, Item, Session, Statements};
use crate::engine::queue::QueueRuntime;
use crate::engine::report::{BatchReport, Fate};

/// Runs every item without savepoints. Returns false — after rolling the whole
/// transaction back — as soon as one item fails: the batch must be claimed again
/// and run [`careful`]ly.
pub async fn optimistic(
    session: &mut Session,
    queue: &QueueRuntime,
    items: &[Item],
    report: &mut BatchReport,
) -> Result<bool, DbError> {
    let name = queue.config.name.as_str();
    for (index, item) in items.iter().enumerate() {
        if stopping_at(queue, items, index, report) {
            break;
        }
        let succeeded = async {
            let outcome = run_action(session, queue, item).await?;
            if !outcome.succeeded() {
                return Ok(false);
            }
            let params = outcome.params();
            match session
                .run(Statements::OnSuccess, item, name, &params)
                .await
            {
                Ok(()) => Ok(true),
                Err(e) if e.is_statement_error() => Ok(false),
                Err(e) => Err(e),
            }
        }
        .instrument(item_span(item))
        .await?;
        if !succeeded {
            session.rollback().await?;
            debug!("an item failed; the batch is rolled back and claimed again with a savepoint per item");
            return Ok(false);
        }
        report.count(Fate::Done, || item.key_text());
    }
    Ok(true)
}

/// Runs every item in a savepoint of its own, even alone in its batch: a failed or
/// timed-out action's work (a CALL's inner statements, a statement that finished
/// as the deadline passed) is undone before `[on_failure]` runs.
pub async fn careful(
    session: &mut Session,
    queue: &QueueRuntime,
    items: &[Item],
    report: &mut BatchReport,
) -> Result<(), DbError> {
    for (index, item) in items.iter().enumerate() {
        if stopping_at(queue, items, index, report) {
            break;
        }
        let fate = async {
            session.savepoint().await?;
            let outcome = run_action(session, queue, item).await?;
            settle(session, queue, item, &outcome, Undo::Savepoint, true).await
        }
        .instrument(item_span(item))
        .await?;
        report.count(fate, || item.key_text());
    }
    Ok(())
}

async fn run_action(
    session: &mut Session,
    queue: &QueueRuntime,
    item: &Item,
) -> Result<Outcome, DbError> {
    let _admitted = queue.limits.admit().await;
    let timeout = queue.config.action.timeout();
    let started = Instant::now();
    let outcome =
        action::sql::run(session, item, &queue.config.name, timeout, &queue.database).await;
    queue.stats.observed.action.observe(started.elapsed());
    outcome
}
