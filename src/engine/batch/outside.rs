//! HTTP and command actions: they reach outside the database, so the items of a
//! batch run them concurrently while the worker keeps its connection alive; then each
//! item's outcome SQL runs in the batch's transaction.

use std::future::Future;
use std::time::Duration;

use futures::future::join_all;
use tokio::time::Instant;
use tracing::{warn, Instrument};

use super::set_based;
use super::settle::{settle, Undo};
use super::{item_span, outcome_span};
use crate::action::{Outcome, Outside};
use crate::config::{QueueConfig, Scope};
use crate::db::{DbError, Item, Session};
use crate::engine::queue::QueueRuntime;
use crate::engine::report::{BatchReport, Fate};
use crate::sql::statement::{first_word, ParsedStatement};

/// How often a worker pings its connection while HTTP or command actions run: if the
/// connection is gone, so are the locks, and the actions are cancelled.
pub const PING_EVERY: Duration = Duration::from_secs(2);

/// Runs the batch's actions, then settles each item.
pub async fn process(
    session: &mut Session,
    queue: &QueueRuntime,
    action: &Outside,
    items: &[Item],
    report: &mut BatchReport,
) -> Result<(), DbError> {
    if queue.config.scope == Scope::Batch {
        let outcomes = set_based::run_outside(session, queue, action, items).await?;
        return set_based::settle_sets(session, queue, items, &outcomes, report).await;
    }
    let outcomes = run_actions(session, queue, action, items).await?;
    // The actions wrote nothing to the database; only outcome SQL may need
    // undoing, and one statement that fails undoes itself.
    let undo = if items.len() == 1 {
        Undo::Rollback
    } else if outcomes_are_single_statements(&queue.config) {
        Undo::Statement
    } else {
        Undo::Savepoint
    };
    for (item, outcome) in items.iter().zip(&outcomes) {
        let Some(outcome) = outcome else {
            // Not run, or failed downstream, while the circuit is open: untouched.
            report.count(Fate::Returned, String::new);
            continue;
        };
        let fate = async {
            if undo == Undo::Savepoint {
                session.savepoint().await?;
            }
            settle(session, queue, item, outcome, undo, false).await
        }
        .instrument(outcome_span(item, outcome))
        .await?;
        report.count(fate, || item.key_text());
    }
    Ok(())
}

/// Runs the actions of a batch concurrently, one per item (in batch scope, each with
/// a one-element array), pinging the session meanwhile.
///
/// An item's outcome is `None` when the circuit breaker kept it from running, or
/// its failure downstream is not to be recorded: it stays as it was claimed.
pub(super) async fn run_actions(
    session: &mut Session,
    queue: &QueueRuntime,
    action: &Outside,
    items: &[Item],
) -> Result<Vec<Option<Outcome>>, DbError> {
    let (name, scope) = (queue.config.name.as_str(), queue.config.scope);
    let actions = join_all(items.iter().map(|item| {
        async move {
            let _admitted = queue.limits.admit().await;
            let ticket = queue.circuit.admit()?;
            let started = Instant::now();
            let outcome = match scope {
                Scope::Item => action.run(item, name).await,
                Scope::Batch => action.run_batch(std::slice::from_ref(item), name).await,
            };
            queue.stats.observed.action.observe(started.elapsed());
            ticket.finished(&outcome).then_some(outcome)
        }
        .instrument(item_span(item))
    }));
    while_pinging(session, actions).await
}

/// Awaits `work` while pinging the session. If the connection is lost, the locks are
/// gone: the work is cancelled (dropping it kills commands and aborts requests) and
/// the items are left to the next claim.
pub(super) async fn while_pinging<T>(
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
pub(super) fn outcomes_are_single_statements(config: &QueueConfig) -> bool {
    let single = |statements: &[ParsedStatement]| {
        statements.len() <= 1
            && statements
                .iter()
                .all(|s| first_word(&s.text).as_deref() != Some("CALL"))
    };
    single(&config.on_success) && config.on_failure.as_deref().is_none_or(single)
}
