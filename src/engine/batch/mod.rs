//! One transaction of a worker: claim up to `batch` rows, run each item's action and
//! outcome SQL, commit. The rule it keeps: an item either commits with its outcome
//! SQL, or it is left as it was — waiting again.
//!
//! - [`in_transaction`]: SQL actions, optimistically (no savepoints) or carefully
//!   (a savepoint per item, after an optimistic batch had a failure).
//! - [`outside`]: HTTP and command actions, run concurrently while the connection
//!   is kept alive, then their outcome SQL.
//! - [`settle`]: an item's outcome SQL, and undoing it when it fails.
//! - [`set_based`]: `scope = "batch"`, each statement once for the whole batch.

mod in_transaction;
mod outside;
mod set_based;
mod settle;

use tracing::{info_span, Span};

use super::queue::QueueRuntime;
use super::report::BatchReport;
use crate::action::{Action, Outcome};
use crate::config::Scope;
use crate::db::{DbError, Item, Session};

/// Claims and processes one batch on `session`. An `Err` means the transaction is
/// lost (and with it every lock): the caller drops the session; the rows are waiting.
///
/// `claimed` hears which rows the claim locked, as soon as it knows: the worker
/// then hands on its watch, and wakes the others when the claim came back full.
///
/// SQL actions run optimistically: no savepoints, so an item costs one round trip
/// per statement. If any item fails, the transaction is rolled back — nothing of the
/// batch is kept — and the report says so: the caller claims again with `careful`
/// set, and every item gets a savepoint, so a failure can be undone alone and
/// recorded by `[on_failure]`.
pub async fn claim_and_process(
    session: &mut Session,
    queue: &QueueRuntime,
    careful: bool,
    claimed: impl FnOnce(&[Item]),
) -> Result<BatchReport, DbError> {
    let items = session.claim(&queue.config.name).await?;
    claimed(&items);
    let mut report = BatchReport::claimed(items.len());
    if let Action::Outside(action) = &queue.action {
        outside::process(session, queue, action, &items, &mut report).await?;
    } else if careful {
        in_transaction::careful(session, queue, &items, &mut report).await?;
    } else if !optimistic(session, queue, &items, &mut report).await? {
        return Ok(BatchReport {
            rolled_back: true,
            ..BatchReport::claimed(items.len())
        });
    }
    session.commit().await?;
    Ok(report)
}

/// Runs an SQL batch without savepoints, by the queue's scope; false when it was
/// rolled back, to be claimed again carefully.
async fn optimistic(
    session: &mut Session,
    queue: &QueueRuntime,
    items: &[Item],
    report: &mut BatchReport,
) -> Result<bool, DbError> {
    match queue.config.scope {
        Scope::Item => in_transaction::optimistic(session, queue, items, report).await,
        Scope::Batch => set_based::optimistic(session, queue, items, report).await,
    }
}

/// True when the worker is stopping before item `index`: the items not started
/// stay untouched and return to the queue at commit.
fn stopping_at(
    queue: &QueueRuntime,
    items: &[Item],
    index: usize,
    report: &mut BatchReport,
) -> bool {
    if !queue.stop.is_cancelled() {
        return false;
    }
    report.returned += items.len() - index;
    true
}

/// The span an item's work runs in: its key on every log line, and the trace id
/// of its HTTP delivery once it has one.
fn item_span(item: &Item) -> Span {
    info_span!("item", key = %item.key_text(), trace_id = tracing::field::Empty)
}

/// The span an item's outcome SQL runs in: its key, and the trace id its HTTP
/// delivery sent, if any.
fn outcome_span(item: &Item, outcome: &Outcome) -> Span {
    let span = item_span(item);
    if let Some(trace_id) = &outcome.trace_id {
        span.record("trace_id", trace_id.as_str());
    }
    span
}
