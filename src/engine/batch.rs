//! One transaction of a worker: claim up to `batch` rows, run each item's action and
//! outcome SQL, commit. The rule it keeps: an item either commits with its outcome
//! SQL, or it is left as it was — waiting again.

use std::time::Duration;

use futures::future::join_all;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};
use tracing::{debug, error, info_span, warn, Instrument};

use crate::action::{self, Action};
use crate::config::{ActionConfig, QueueConfig};
use crate::db::connect::{describe_error, is_statement_error};
use crate::db::item::{bind, Item, Outcome};
use crate::db::prepared::{BoundStatement, PreparedQueue};
use crate::engine::worker::QueueRuntime;
use crate::sql::statement::{first_word, ParsedStatement};

/// How often a worker pings its connection while HTTP or command actions run: if the
/// connection is gone, so are the locks, and the actions are cancelled.
pub const PING_EVERY: Duration = Duration::from_secs(2);
/// How long such a ping may take before the connection counts as lost.
const PING_TIMEOUT: Duration = Duration::from_secs(10);

/// What one transaction did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct BatchReport {
    pub claimed: usize,
    /// Action succeeded and `[on_success]` committed.
    pub done: usize,
    /// Action failed and `[on_failure]` committed.
    pub failed: usize,
    /// Left as they were: waiting again (no `[on_failure]`, outcome SQL failed, or
    /// not started because the worker is stopping).
    pub returned: usize,
    /// A batch run without savepoints had an item fail: the whole transaction was
    /// rolled back, and the next claim should run with a savepoint per item.
    pub rolled_back: bool,
}

enum Fate {
    Done,
    Failed,
    Returned,
}

impl BatchReport {
    fn count(&mut self, fate: Fate) {
        match fate {
            Fate::Done => self.done += 1,
            Fate::Failed => self.failed += 1,
            Fate::Returned => self.returned += 1,
        }
    }
}

const SAVEPOINT: &str = "SAVEPOINT tableq_item";
const ROLLBACK_TO_SAVEPOINT: &str = "ROLLBACK TO SAVEPOINT tableq_item";

/// Claims and processes one batch on `conn`. An `Err` means the transaction is lost
/// (and with it every lock): the caller drops the connection; the rows are waiting.
///
/// `claimed` hears how many rows the claim locked, as soon as it knows: the worker
/// then hands on its watch, and wakes the others when the claim came back full.
///
/// SQL actions run optimistically: no savepoints, so an item costs one round trip
/// per statement. If any item fails, the transaction is rolled back — nothing of the
/// batch is kept — and the caller claims again with `careful` set: then every item
/// gets a savepoint, so a failure can be undone alone and recorded by `[on_failure]`.
pub async fn claim_and_process(
    conn: &mut Conn,
    prepared: &PreparedQueue,
    queue: &QueueRuntime,
    careful: bool,
    claimed: impl FnOnce(usize),
) -> Result<BatchReport, mysql_async::Error> {
    let name = queue.config.name.as_str();
    let rows: Vec<Row> = conn
        .exec(&prepared.claim.statement, prepared.claim_params(name))
        .await?;
    claimed(rows.len());
    let mut report = BatchReport {
        claimed: rows.len(),
        ..BatchReport::default()
    };
    let items: Vec<Item> = rows
        .into_iter()
        .map(|row| Item {
            columns: prepared.columns.clone(),
            values: row.unwrap(),
            key_index: prepared.key_index,
        })
        .collect();
    match &queue.config.action {
        ActionConfig::Sql(sql) if !careful => {
            for (index, item) in items.iter().enumerate() {
                if queue.stop.is_cancelled() {
                    report.returned += items.len() - index;
                    break;
                }
                let succeeded = async {
                    let outcome = action::sql::run(
                        conn,
                        &prepared.action,
                        item,
                        name,
                        sql.timeout,
                        &queue.opts,
                    )
                    .await?;
                    if !outcome.succeeded() {
                        return Ok(false);
                    }
                    match run_statements(conn, &prepared.on_success, item, name, &outcome).await {
                        Ok(()) => Ok(true),
                        Err(e) if is_statement_error(&e) => Ok(false),
                        Err(e) => Err(e),
                    }
                }
                .instrument(info_span!("item", key = %item.key_text()))
                .await?;
                if !succeeded {
                    conn.query_drop("ROLLBACK").await?;
                    debug!("an item failed; the batch is rolled back and claimed again with a savepoint per item");
                    return Ok(BatchReport {
                        claimed: report.claimed,
                        rolled_back: true,
                        ..BatchReport::default()
                    });
                }
                report.done += 1;
            }
        }
        ActionConfig::Sql(sql) => {
            // Careful: every item gets a savepoint, even alone in its batch. A failed or
            // timed-out action's work (a CALL's inner statements, a statement that
            // finished as the deadline passed) is undone before `[on_failure]` runs.
            for (index, item) in items.iter().enumerate() {
                if queue.stop.is_cancelled() {
                    // Stopping: items not yet started stay untouched and return at commit.
                    report.returned += items.len() - index;
                    break;
                }
                let span = info_span!("item", key = %item.key_text());
                let fate = async {
                    conn.query_drop(SAVEPOINT).await?;
                    let outcome = action::sql::run(
                        conn,
                        &prepared.action,
                        item,
                        name,
                        sql.timeout,
                        &queue.opts,
                    )
                    .await?;
                    settle(conn, prepared, name, item, &outcome, Undo::Savepoint, true).await
                }
                .instrument(span)
                .await?;
                report.count(fate);
            }
        }
        ActionConfig::Http(_) | ActionConfig::Command(_) => {
            let outcomes = run_outside(conn, &queue.action, &items, name).await?;
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
                let span = info_span!("item", key = %item.key_text());
                let fate = async {
                    if undo == Undo::Savepoint {
                        conn.query_drop(SAVEPOINT).await?;
                    }
                    settle(conn, prepared, name, item, outcome, undo, false).await
                }
                .instrument(span)
                .await?;
                report.count(fate);
            }
        }
    }
    conn.query_drop("COMMIT").await?;
    Ok(report)
}

/// Runs the actions of a batch concurrently, pinging `conn` meanwhile. If the
/// connection is lost, the locks are gone: the actions are cancelled (dropping them
/// kills commands and aborts requests) and the items are left to the next claim.
async fn run_outside(
    conn: &mut Conn,
    action: &Action,
    items: &[Item],
    queue: &str,
) -> Result<Vec<Outcome>, mysql_async::Error> {
    let actions = join_all(items.iter().map(|item| {
        action
            .run_outside(item, queue)
            .instrument(info_span!("item", key = %item.key_text()))
    }));
    tokio::pin!(actions);
    loop {
        tokio::select! {
            outcomes = &mut actions => return Ok(outcomes),
            _ = tokio::time::sleep(PING_EVERY) => {}
        }
        // The ping is awaited to its end, never raced: a ping dropped between its
        // request and its reply would leave every later reply one statement late.
        // (The actions wait meanwhile; their own deadlines keep running.)
        let lost = match tokio::time::timeout(PING_TIMEOUT, conn.ping()).await {
            Ok(Ok(())) => continue,
            Ok(Err(e)) => e,
            Err(_) => mysql_async::Error::Other("the database did not answer a ping".into()),
        };
        warn!(error = %describe_error(&lost), "lost the database connection during the actions; cancelling them, the items are waiting again");
        return Err(lost);
    }
}

/// How an item whose outcome SQL failed is returned to the state it was claimed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Undo {
    /// Back to the savepoint taken before it.
    Savepoint,
    /// The whole transaction: the item is alone in it.
    Rollback,
    /// Nothing: its outcome SQL is one statement, and InnoDB rolls back a statement
    /// that fails.
    Statement,
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

/// Applies `[on_success]` or `[on_failure]` for an action's outcome. `action_wrote`:
/// the action ran SQL in the item's savepoint, to be undone before `[on_failure]`.
async fn settle(
    conn: &mut Conn,
    prepared: &PreparedQueue,
    queue: &str,
    item: &Item,
    outcome: &Outcome,
    undo_by: Undo,
    action_wrote: bool,
) -> Result<Fate, mysql_async::Error> {
    if outcome.succeeded() {
        return match run_statements(conn, &prepared.on_success, item, queue, outcome).await {
            Ok(()) => Ok(Fate::Done),
            Err(e) if is_statement_error(&e) => {
                undo(conn, undo_by).await?;
                error!(error = %describe_error(&e), "[on_success] SQL failed; the item is rolled back and waiting again");
                Ok(Fate::Returned)
            }
            Err(e) => Err(e),
        };
    }
    let reason = outcome.error.as_deref().unwrap_or_default();
    if action_wrote {
        // Undo whatever the action's statements did before it failed.
        conn.query_drop(ROLLBACK_TO_SAVEPOINT).await?;
    }
    let Some(on_failure) = &prepared.on_failure else {
        warn!(error = %reason, "item failed; with no [on_failure] it is waiting again");
        return Ok(Fate::Returned);
    };
    match run_statements(conn, on_failure, item, queue, outcome).await {
        Ok(()) => {
            warn!(error = %reason, "item failed");
            Ok(Fate::Failed)
        }
        Err(e) if is_statement_error(&e) => {
            undo(conn, undo_by).await?;
            error!(error = %reason, on_failure_error = %describe_error(&e), "item failed and [on_failure] SQL failed too; the item is rolled back and waiting again");
            Ok(Fate::Returned)
        }
        Err(e) => Err(e),
    }
}

async fn run_statements(
    conn: &mut Conn,
    statements: &[BoundStatement],
    item: &Item,
    queue: &str,
    outcome: &Outcome,
) -> Result<(), mysql_async::Error> {
    for bound in statements {
        conn.exec_drop(&bound.statement, bind(&bound.sources, item, queue, outcome))
            .await?;
    }
    Ok(())
}

/// Returns an item to the state it was claimed in, after its outcome SQL failed.
async fn undo(conn: &mut Conn, undo: Undo) -> Result<(), mysql_async::Error> {
    match undo {
        Undo::Savepoint => conn.query_drop(ROLLBACK_TO_SAVEPOINT).await,
        Undo::Rollback => conn.query_drop("ROLLBACK").await,
        Undo::Statement => Ok(()),
    }
}
