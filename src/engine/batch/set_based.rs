//! `scope = "batch"`: each of the queue's statements runs once for the whole batch,
//! `:batch` holding its items as one JSON array, so a batch of 100 costs a few
//! statements instead of a hundred.
//!
//! Failure stays per item. A batch statement that fails puts the batch back on the
//! item-by-item path: for SQL actions the transaction is rolled back and the batch
//! claimed again carefully (a savepoint per item, each with a one-element `:batch`:
//! the same SQL text serves both paths). An HTTP or command action runs once for the
//! batch (a JSON array body, or stdin) and, if that fails, once per item; its
//! outcomes cannot be undone, so only an outcome set whose statement fails is
//! settled item by item, in the same transaction. An empty outcome set runs no
//! statement.

use tokio::time::Instant;
use tracing::{debug, warn, Instrument};

use super::outside::{outcomes_are_single_statements, run_actions, while_pinging};
use super::settle::{settle, Undo};
use super::{outcome_span, stopping_at};
use crate::action::{self, Blame, Outcome, Outside};
use crate::db::{DbError, Item, OutcomeParams, Session, Statements};
use crate::engine::queue::QueueRuntime;
use crate::engine::report::{BatchReport, Fate};

/// SQL actions: the action once for every item, then `[on_success]` once for every
/// item. Returns false — after rolling the whole transaction back — when either
/// fails: the batch must be claimed again and run item by item.
pub async fn optimistic(
    session: &mut Session,
    queue: &QueueRuntime,
    items: &[Item],
    report: &mut BatchReport,
) -> Result<bool, DbError> {
    if items.is_empty() || stopping_at(queue, items, 0, report) {
        return Ok(true);
    }
    let outcome = run_action(session, queue, items).await?;
    let failed = match &outcome.error {
        Some(error) => Some(error.clone()),
        None => {
            let all: Vec<(&Item, OutcomeParams)> =
                items.iter().map(|item| (item, outcome.params())).collect();
            let name = queue.config.name.as_str();
            match session.run_batch(Statements::OnSuccess, &all, name).await {
                Ok(()) => None,
                Err(e) if e.is_statement_error() => Some(e.to_string()),
                Err(e) => return Err(e),
            }
        }
    };
    if let Some(error) = failed {
        session.rollback().await?;
        debug!(%error, items = items.len(),
            "a batch statement failed; the batch is rolled back and claimed again, item by item");
        return Ok(false);
    }
    for item in items {
        report.count(Fate::Done, || item.key_text());
    }
    Ok(true)
}

/// The batch's one SQL action: counted as one action by `rate_limit` and
/// `max_in_flight`, and given the action's `timeout` as a whole.
async fn run_action(
    session: &mut Session,
    queue: &QueueRuntime,
    items: &[Item],
) -> Result<Outcome, DbError> {
    let _admitted = queue.limits.admit().await;
    let timeout = queue.config.action.timeout();
    let name = &queue.config.name;
    let started = Instant::now();
    let outcome = action::sql::run_batch(session, items, name, timeout, &queue.database).await;
    queue.stats.observed.action.observe(started.elapsed());
    outcome
}

/// HTTP and command actions: the action once for the whole batch (one request, one
/// command); if it fails for the items' sake, once per item, each with a
/// one-element array, so an item the receiver rejects does not fail the others. A
/// failure downstream (the receiver down) is every item's outcome alike: asking
/// again item by item would only knock on the same closed door.
///
/// As in item scope, `None` is an item the circuit breaker left as it was claimed.
pub async fn run_outside(
    session: &mut Session,
    queue: &QueueRuntime,
    action: &Outside,
    items: &[Item],
) -> Result<Vec<Option<Outcome>>, DbError> {
    let name = queue.config.name.as_str();
    let whole = while_pinging(session, async {
        let _admitted = queue.limits.admit().await;
        let ticket = queue.circuit.admit()?;
        let started = Instant::now();
        let outcome = action.run_batch(items, name).await;
        queue.stats.observed.action.observe(started.elapsed());
        ticket.finished(&outcome).then_some(outcome)
    })
    .await?;
    match whole {
        Some(whole) if !whole.succeeded() && whole.blame == Blame::Item && items.len() > 1 => {
            debug!(error = ?whole.error, items = items.len(), "the batch's action failed; running it item by item");
            run_actions(session, queue, action, items).await
        }
        whole => Ok(vec![whole; items.len()]),
    }
}

/// After HTTP or command actions: `[on_success]` once for the items that succeeded,
/// `[on_failure]` once for those that failed.
pub async fn settle_sets(
    session: &mut Session,
    queue: &QueueRuntime,
    items: &[Item],
    outcomes: &[Option<Outcome>],
    report: &mut BatchReport,
) -> Result<(), DbError> {
    let mut ran = Vec::with_capacity(items.len());
    for (item, outcome) in items.iter().zip(outcomes) {
        match outcome {
            Some(outcome) => ran.push((item, outcome)),
            // Not run, or failed downstream, while the circuit is open: untouched.
            None => report.count(Fate::Returned, String::new),
        }
    }
    let (succeeded, failed): (Vec<_>, Vec<_>) = ran
        .into_iter()
        .partition(|(_, outcome)| outcome.succeeded());
    for (item, outcome) in &failed {
        let reason = outcome.error.as_deref().unwrap_or_default();
        let observed = &queue.stats.observed;
        observed.record_failure(item.key_text(), reason, outcome.status);
    }
    settle_set(session, queue, Statements::OnSuccess, &succeeded, report).await?;
    if session.has_on_failure() {
        return settle_set(session, queue, Statements::OnFailure, &failed, report).await;
    }
    for (item, outcome) in failed {
        let reason = outcome.error.as_deref().unwrap_or_default();
        let _span = outcome_span(item, outcome).entered();
        warn!(error = %reason, "item failed; with no [on_failure] it is waiting again");
        report.count(Fate::Returned, || item.key_text());
    }
    Ok(())
}

/// Runs `which` once for `set`; if it fails, undoes it and settles the set's items
/// one by one, each in a savepoint, so only the items whose SQL fails stay waiting.
async fn settle_set(
    session: &mut Session,
    queue: &QueueRuntime,
    which: Statements,
    set: &[(&Item, &Outcome)],
    report: &mut BatchReport,
) -> Result<(), DbError> {
    if set.is_empty() {
        return Ok(());
    }
    // One statement that fails undoes itself; several need a savepoint.
    let savepoint = !outcomes_are_single_statements(&queue.config);
    if savepoint {
        session.savepoint().await?;
    }
    let params: Vec<(&Item, OutcomeParams)> = set
        .iter()
        .map(|(item, outcome)| (*item, outcome.params()))
        .collect();
    match session.run_batch(which, &params, &queue.config.name).await {
        Ok(()) => {
            let fate = if which == Statements::OnSuccess {
                Fate::Done
            } else {
                Fate::Failed
            };
            for (item, outcome) in set {
                if fate == Fate::Failed {
                    let reason = outcome.error.as_deref().unwrap_or_default();
                    let _span = outcome_span(item, outcome).entered();
                    warn!(error = %reason, "item failed");
                }
                report.count(fate, || item.key_text());
            }
            Ok(())
        }
        Err(e) if e.is_statement_error() => {
            if savepoint {
                session.rollback_to_savepoint().await?;
            }
            debug!(error = %e, items = set.len(), "a batch's outcome SQL failed; settling its items one by one");
            one_by_one(session, queue, set, report).await
        }
        Err(e) => Err(e),
    }
}

/// Settles each item of `set` alone, in a savepoint of its own, with a one-element
/// `:batch`.
async fn one_by_one(
    session: &mut Session,
    queue: &QueueRuntime,
    set: &[(&Item, &Outcome)],
    report: &mut BatchReport,
) -> Result<(), DbError> {
    for (item, outcome) in set {
        let fate = async {
            session.savepoint().await?;
            settle(session, queue, item, outcome, Undo::Savepoint, false).await
        }
        .instrument(outcome_span(item, outcome))
        .await?;
        report.count(fate, || item.key_text());
    }
    Ok(())
}
