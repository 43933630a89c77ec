//! One transaction of a worker: claim up to `batch` rows, run each item's action and
//! outcome SQL in its own savepoint, commit. The rule it keeps: an item either
//! commits with its outcome SQL, or it is left as it was — waiting again.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, Params, Row, Value};
use tokio_util::sync::CancellationToken;
use tracing::{error, info_span, warn, Instrument};

use crate::action;
use crate::config::{ActionConfig, QueueConfig};
use crate::database::{describe_error, is_statement_error};
use crate::item::{bind, Item, Outcome};
use crate::queue_sql::{BoundStatement, PreparedQueue};

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
}

enum Fate {
    Done,
    Failed,
    Returned,
}

const SAVEPOINT: &str = "SAVEPOINT tableq_item";
const ROLLBACK_TO_SAVEPOINT: &str = "ROLLBACK TO SAVEPOINT tableq_item";

/// Claims and processes one batch on `conn`. An `Err` means the transaction is lost
/// (and with it every lock): the caller drops the connection; the rows are waiting.
pub async fn claim_and_process(
    conn: &mut Conn,
    prepared: &PreparedQueue,
    queue: &QueueConfig,
    opts: &Opts,
    stop: &CancellationToken,
) -> Result<BatchReport, mysql_async::Error> {
    let claim_params = match prepared.claim.sources.len() {
        0 => Params::Empty,
        n => Params::Positional(vec![Value::from(queue.name.as_str()); n]),
    };
    let rows: Vec<Row> = conn.exec(&prepared.claim.statement, claim_params).await?;
    let mut report = BatchReport {
        claimed: rows.len(),
        ..BatchReport::default()
    };
    // Savepoints let one item be undone without touching the others; a lone item
    // whose action is one statement needs none (the statement is atomic by itself).
    let savepoints = rows.len() > 1 || prepared.action.len() > 1;
    for (index, row) in rows.into_iter().enumerate() {
        if index > 0 && stop.is_cancelled() {
            // Stopping: items not yet started stay untouched and return at commit.
            report.returned += report.claimed - index;
            break;
        }
        let item = Item {
            columns: prepared.columns.clone(),
            values: row.unwrap(),
            key_index: prepared.key_index,
        };
        let span = info_span!("item", key = %item.key_text());
        let fate = process_item(conn, prepared, queue, opts, &item, savepoints)
            .instrument(span)
            .await?;
        match fate {
            Fate::Done => report.done += 1,
            Fate::Failed => report.failed += 1,
            Fate::Returned => report.returned += 1,
        }
    }
    conn.query_drop("COMMIT").await?;
    Ok(report)
}

async fn process_item(
    conn: &mut Conn,
    prepared: &PreparedQueue,
    queue: &QueueConfig,
    opts: &Opts,
    item: &Item,
    savepoints: bool,
) -> Result<Fate, mysql_async::Error> {
    if savepoints {
        conn.query_drop(SAVEPOINT).await?;
    }
    let outcome = match &queue.action {
        ActionConfig::Sql(sql) => {
            action::sql::run(conn, &prepared.action, item, &queue.name, sql.timeout, opts).await?
        }
    };
    settle(conn, prepared, &queue.name, item, &outcome, savepoints).await
}

/// Applies `[on_success]` or `[on_failure]` for an action's outcome.
async fn settle(
    conn: &mut Conn,
    prepared: &PreparedQueue,
    queue: &str,
    item: &Item,
    outcome: &Outcome,
    savepoints: bool,
) -> Result<Fate, mysql_async::Error> {
    if outcome.succeeded() {
        return match run_statements(conn, &prepared.on_success, item, queue, outcome).await {
            Ok(()) => Ok(Fate::Done),
            Err(e) if is_statement_error(&e) => {
                undo(conn, savepoints).await?;
                error!(error = %describe_error(&e), "[on_success] SQL failed; the item is rolled back and waiting again");
                Ok(Fate::Returned)
            }
            Err(e) => Err(e),
        };
    }
    let reason = outcome.error.as_deref().unwrap_or_default();
    if savepoints {
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
            undo(conn, savepoints).await?;
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

/// Returns the item to the state it was claimed in: back to its savepoint, or, for a
/// lone item without one, the whole transaction.
async fn undo(conn: &mut Conn, savepoints: bool) -> Result<(), mysql_async::Error> {
    conn.query_drop(if savepoints {
        ROLLBACK_TO_SAVEPOINT
    } else {
        "ROLLBACK"
    })
    .await
}
