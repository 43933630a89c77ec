//! A queue's backlog, read without locking a row: how many rows its select returns
//! (up to a cap), and the first of them in the claim's order — one row, read the way
//! the claim reads it (its ORDER BY, its index) — for how long the oldest has waited.
//!
//! A plain read, not the claim's `FOR UPDATE SKIP LOCKED` (which `tableq count`
//! uses): rows locked by a background count would be skipped by a worker's claim
//! at that instant, which would find the queue empty and idle (or, with
//! `--stop-when-empty`, stop) while rows wait. The price: rows being worked on
//! right now are counted too.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Row, Value};

use super::error::DbError;
use super::session::Session;
use crate::config::QueueConfig;

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
}

/// Counts `queue`'s rows up to `waiting_cap` and reads the first one's
/// `waiting_since`, each answer within `database_timeout`.
pub async fn read_backlog(session: &mut Session, queue: &QueueConfig) -> Result<Backlog, DbError> {
    let cap = queue.monitoring.waiting_cap;
    let limit = queue.database_timeout;
    let select = &queue.select.positional;
    let (conn, prepared) = session.parts();
    let params = prepared.claim_params(&queue.name);
    let count = format!(
        "SELECT COUNT(*) FROM ({select}\nLIMIT {}) AS tableq_waiting",
        cap + 1
    );
    let found: Option<u64> = within(limit, conn.exec_first(count, params.clone())).await?;
    let found = found.unwrap_or(0) as usize;
    let since = queue.monitoring.waiting_since.as_deref();
    let index = since.and_then(|column| prepared.columns.find(column));
    let oldest_since = match index {
        Some(index) if found > 0 => {
            let first: Option<Row> =
                within(limit, conn.exec_first(format!("{select}\nLIMIT 1"), params)).await?;
            first.and_then(|mut row| row.take::<Value, _>(index))
        }
        _ => None,
    };
    Ok(Backlog {
        waiting: found.min(cap),
        capped: found > cap,
        oldest_since,
    })
}

async fn within<T>(
    limit: Duration,
    call: impl std::future::Future<Output = Result<T, mysql_async::Error>>,
) -> Result<T, DbError> {
    tokio::time::timeout(limit, call)
        .await
        .map_err(|_| DbError::Deadline {
            waiting_for: "the count of waiting rows",
            limit,
        })?
        .map_err(DbError::from)
}
