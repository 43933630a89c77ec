//! Actions that reach outside the database (HTTP, a command): the items of a batch
//! run them concurrently while the worker keeps its connection alive; then their
//! outcome SQL runs in the batch's transaction.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use tracing::{debug, warn, Instrument};

use crate::action::{Blame, External, Outcome};
use crate::config::QueueConfig;
use crate::db::{DbError, Item, Session};
use crate::engine::queue::QueueRuntime;
use crate::engine::turn::execute::Work;
use crate::engine::turn::record::item::Undo;
use crate::engine::turn::record::record;
use crate::engine::turn::record::transaction::TransactionStore;
use crate::engine::turn::report::BatchReport;
use crate::engine::turn::settle::item_span;
use crate::sql::statement::{first_word, ParsedStatement};

/// How often a worker pings its connection while actions run: if the connection is
/// gone, so are the locks, and the actions are cancelled.
pub const PING_EVERY: Duration = Duration::from_secs(2);

/// Runs the batch's actions, then records each item's outcome.
pub async fn process(
    session: &mut Session,
    queue: &QueueRuntime,
    action: &dyn External,
    items: &[Item],
    report: &mut BatchReport,
) -> Result<(), DbError> {
    let single_statements = outcomes_are_single_statements(&queue.config);
    let batch = queue.batch_scope();
    let outcomes = match batch {
        true => while_pinging(session, run_as_batch(queue, action, items)).await?,
        false => while_pinging(session, run_each(queue, action, items)).await?,
    };
    // The actions wrote nothing to the database; only outcome SQL may need
    // undoing, and one statement that fails undoes itself.
    let undo = match (items.len(), single_statements) {
        (1, _) if !batch => Undo::Rollback,
        (_, true) => Undo::Statement,
        (_, false) => Undo::Savepoint,
    };
    let entries: Vec<_> = items
        .iter()
        .zip(outcomes.iter().map(Option::as_ref))
        .collect();
    let mut store = TransactionStore::new(session, queue, undo, false);
    record(queue, &mut store, &entries, report).await
}

/// Runs the action once per item, concurrently (in batch scope, each with a
/// one-element array). An item's outcome is `None` when the circuit breaker kept it
/// from running, or its failure downstream is not to be recorded.
async fn run_each(
    queue: &QueueRuntime,
    action: &dyn External,
    items: &[Item],
) -> Vec<Option<Outcome>> {
    join_all(items.iter().map(|item| {
        queue
            .execute(action, Work::item(queue, item), None)
            .instrument(item_span(item))
    }))
    .await
}

/// `scope = "batch"`: the action once for the whole batch (one request, one
/// command); if it fails for the items' sake, once per item, so an item the
/// receiver rejects does not fail the others. A failure downstream (the receiver
/// down) is every item's outcome alike: asking again item by item would only knock
/// on the same closed door. A kind that sends each item of the batch on its own (a
/// message per row) says how each one went: those outcomes stand, and nothing is
/// sent again.
async fn run_as_batch(
    queue: &QueueRuntime,
    action: &dyn External,
    items: &[Item],
) -> Vec<Option<Outcome>> {
    let whole = queue.execute(action, Work::batch(items), None).await;
    match whole {
        Some(Outcome {
            each: Some(each), ..
        }) if each.len() == items.len() => {
            let each = Arc::unwrap_or_clone(each);
            each.into_iter().map(Some).collect()
        }
        Some(whole) if !whole.succeeded() && whole.blame == Blame::Item && items.len() > 1 => {
            let error = whole.error.as_deref().unwrap_or_default();
            debug!(%error, items = items.len(), "the batch's action failed; running it item by item");
            run_each(queue, action, items).await
        }
        whole => vec![whole; items.len()],
    }
}

/// Awaits `work` while pinging the session. If the connection is lost, the locks are
/// gone: the work is cancelled (dropping it kills commands and aborts requests) and
/// the items are left to the next claim.
async fn while_pinging<T>(
    session: &mut Session,
    work: impl Future<Output = T>,
) -> Result<T, DbError> {
    tokio::pin!(work);
    loop {
        tokio::select! {
            done = &mut work => return Ok(done),
            _ = tokio::time::sleep(PING_EVERY) => {}
        }
        // The actions wait while the ping runs; their own deadlines keep running.
        if let Err(lost) = session.ping().await {
            warn!(error = %lost, "lost the database connection during the actions; cancelling them, the items are waiting again");
            return Err(lost);
        }
    }
}

/// True when `[on_success]` and `[on_failure]` are one statement each, and not a
/// `CALL` (whose inner statements survive its failure).
fn outcomes_are_single_statements(config: &QueueConfig) -> bool {
    let single = |statements: &[ParsedStatement]| {
        statements.len() <= 1
            && statements
                .iter()
                .all(|s| first_word(&s.text).as_deref() != Some("CALL"))
    };
    single(&config.on_success) && config.on_failure.as_deref().is_none_or(single)
}
