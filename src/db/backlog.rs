//! A queue's backlog, read on a short connection of its own, without locking a row:
//! how many rows its select returns (up to `waiting_cap`), the first of them in the
//! claim's order — one row, read the way the claim reads it (its ORDER BY, its index)
//! — for how long the oldest has waited, and the database's clock.
//!
//! A plain read, not the claim's `FOR UPDATE SKIP LOCKED`: rows locked by a count
//! would be skipped by a worker's claim at that instant, which would find the queue
//! empty and idle (or, with `--stop-when-empty`, stop) while rows wait — and a count
//! of a million would hold a million locks. The price: rows being worked on right
//! now are counted too. `tableq count` counts the same way ([`count_on`]).

use std::time::{Duration, SystemTime};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Params, Row, Value};

use super::clock::DbClock;
use super::connect::{Database, Kill, QUICK_TIMEOUT};
use super::deadline::within;
use super::error::DbError;
use super::error_kind::ErrorKind;
use super::failed::{positional, queue_params};
use super::schedules::{self, ScheduleRow};
use super::session::OpenError;
use crate::config::validate::names::find_column;
use crate::config::QueueConfig;
use crate::sql::statement::{string_literal, with_parameters_written_in};

/// What a count waits for, as its deadline says.
const COUNTING: &str = "the count of waiting rows";

/// What one look at the backlog found.
#[derive(Debug, Clone, PartialEq)]
pub struct Backlog {
    /// Rows the select returns, up to the cap.
    pub waiting: usize,
    /// More than the cap.
    pub capped: bool,
    /// The `waiting_since` value of the first row in the claim's order, if the
    /// queue has `waiting_since` and a row waits.
    pub oldest_since: Option<Value>,
    /// The database's clock, read at the same time.
    pub clock: DbClock,
    /// Rows `[failed] select` returns (the rows that gave up), up to the cap; `None`
    /// without `[failed]`, or when that count failed.
    pub gave_up: Option<usize>,
    /// A schedule queue's row of `tableq_schedules`; `None` for other queues, or
    /// before a copy put the row in.
    pub schedule: Option<ScheduleRow>,
}

/// Why the backlog could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BacklogError {
    #[error("{0}")]
    Connect(DbError),
    /// No session of a lease-mode queue's pool could be had.
    #[error("{0}")]
    Open(OpenError),
    #[error("{0}")]
    Read(DbError),
}

impl BacklogError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            BacklogError::Connect(_) | BacklogError::Open(_) => ErrorKind::Connect,
            BacklogError::Read(e) => e.kind(),
        }
    }
}

/// Connects, reads `queue`'s backlog and the clock, and disconnects; each step
/// within the queue's `database_timeout`.
pub async fn read_backlog(
    database: &Database,
    queue: &QueueConfig,
) -> Result<Backlog, BacklogError> {
    let limit = queue.database_timeout;
    let seat = database.seat().await;
    let (mut conn, place) = database
        .connect_seated(seat, limit)
        .await
        .map_err(BacklogError::Connect)?;
    let read = read_on(&mut conn, queue, limit).await;
    match &read {
        Err(DbError::Deadline { .. }) => {
            // The count runs on at the server unless stopped: stop it.
            let host = database.host_of(&conn);
            let _ = host.kill(conn.id(), Kill::Connection).await;
        }
        // Passed on to a queue waiting for a place, if one is.
        Ok(_) => database.give_up(conn, place).await,
        Err(_) => {
            let _ = tokio::time::timeout(QUICK_TIMEOUT, conn.disconnect()).await;
        }
    }
    read.map_err(BacklogError::Read)
}

/// Reads `queue`'s backlog and the clock on `conn`, a session of the queue's own
/// (lease mode counts on its pool, so the queue holds no connection beyond it); the
/// caller ends the read's transaction.
pub async fn read_backlog_on(conn: &mut Conn, queue: &QueueConfig) -> Result<Backlog, DbError> {
    read_on(conn, queue, queue.database_timeout).await
}

async fn read_on(
    conn: &mut Conn,
    queue: &QueueConfig,
    limit: Duration,
) -> Result<Backlog, DbError> {
    let cap = queue.monitoring.waiting_cap;
    let select = &queue.select.positional;
    let params = select_params(queue);
    // The count and the clock in one statement: the count is the very statement
    // `tableq count --print-sql` prints (there with `:queue` written in).
    let count = format!(
        "SELECT ({}), NOW(6), UNIX_TIMESTAMP(NOW(6))",
        count_statement(select, cap)
    );
    let here = SystemTime::now();
    let row: Option<(u64, Value, Value)> =
        within(COUNTING, limit, conn.exec_first(count, params.clone())).await?;
    let (found, now, unix) = row.unwrap_or((0, Value::NULL, Value::NULL));
    let found = found as usize;
    let oldest_since = match &queue.monitoring.waiting_since {
        Some(since) if found > 0 => {
            let first = conn.exec_first::<Row, _, _>(format!("{select}\nLIMIT 1"), params);
            within(COUNTING, limit, first)
                .await?
                .and_then(|row| column(row, since))
        }
        _ => None,
    };
    Ok(Backlog {
        waiting: found.min(cap),
        capped: found > cap,
        oldest_since,
        clock: DbClock::from_values(&now, &unix, here),
        gave_up: gave_up(conn, queue, limit).await?,
        schedule: schedule(conn, queue, limit).await?,
    })
}

/// A schedule queue's row, read with the count: `/metrics` and the status page
/// show it without a query of their own.
async fn schedule(
    conn: &mut Conn,
    queue: &QueueConfig,
    limit: Duration,
) -> Result<Option<ScheduleRow>, DbError> {
    let Some(schedule) = &queue.schedule else {
        return Ok(None);
    };
    let rows = within(COUNTING, limit, schedules::read(conn, &[&queue.name])).await?;
    let kept = schedules::keep(conn, &queue.name, schedule, !rows.is_empty());
    within(COUNTING, limit, kept).await?;
    Ok(rows.into_iter().next())
}

/// How many rows `[failed] select` returns, up to `waiting_cap`, read the same way.
/// Its own SQL error leaves the figure out rather than the whole backlog; a deadline
/// or a lost connection fails the read (and so the count is killed on the server).
async fn gave_up(
    conn: &mut Conn,
    queue: &QueueConfig,
    limit: Duration,
) -> Result<Option<usize>, DbError> {
    let Some(failed) = &queue.failed else {
        return Ok(None);
    };
    let cap = queue.monitoring.waiting_cap;
    let count = count_statement(&failed.select.positional, cap);
    let params = positional(queue_params(&failed.select, &queue.name));
    match within(COUNTING, limit, conn.exec_first::<u64, _, _>(count, params)).await {
        Ok(found) => Ok(Some((found.unwrap_or(0) as usize).min(cap))),
        Err(e) if e.is_statement_error() => Ok(None),
        Err(e) => Err(e),
    }
}

/// Counts the rows `queue`'s select returns on `conn`, up to `cap` and one more (to
/// tell "more than the cap"), with the background count's plain read: no row is
/// locked, so no worker skips one meanwhile. For `tableq count`.
pub async fn count_on(conn: &mut Conn, queue: &QueueConfig, cap: usize) -> Result<usize, DbError> {
    let count = count_statement(&queue.select.positional, cap);
    let found: Option<u64> = within(
        COUNTING,
        queue.database_timeout,
        conn.exec_first(count, select_params(queue)),
    )
    .await?;
    Ok(found.unwrap_or(0) as usize)
}

/// The select's parameters: its only parameter can be `:queue`.
fn select_params(queue: &QueueConfig) -> Params {
    match queue.select.params.len() {
        0 => Params::Empty,
        n => Params::Positional(vec![Value::from(queue.name.as_str()); n]),
    }
}

/// The statement that counts the rows `select` returns, up to `cap` and one more (to
/// tell "more than the cap"): one number. The background count runs it.
fn count_statement(select: &str, cap: usize) -> String {
    format!(
        "SELECT COUNT(*) FROM ({select}\nLIMIT {}) AS tableq_waiting",
        cap + 1
    )
}

/// `queue`'s count statement as a client that binds no parameters runs it, `:queue`
/// written in as a string: for KEDA's MySQL scaler (`tableq count --print-sql`).
/// Its number is the `tableq_waiting` gauge's, less `waiting_cap`'s cut (it shows
/// `waiting_cap + 1` for "more").
pub fn printable_count_statement(queue: &QueueConfig) -> String {
    // Queue names are letters, digits, `_` and `-` (the loader's rule): always a literal.
    let name = string_literal(&queue.name).unwrap_or_else(|| "''".to_string());
    let select = with_parameters_written_in(&queue.select.text, &|_| name.clone());
    count_statement(&select, queue.monitoring.waiting_cap)
}

/// The value of `row`'s column `name`, by the loader's rule for names.
fn column(mut row: Row, name: &str) -> Option<Value> {
    let names: Vec<String> = row
        .columns_ref()
        .iter()
        .map(|c| c.name_str().into_owned())
        .collect();
    row.take::<Value, _>(find_column(&names, name)?)
}
