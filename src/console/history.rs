//! The console's memory, read back from the queue's database: a queue's history
//! over every copy, the rows that gave up (searched), one row's failed attempts,
//! and the copies — for the `/api/…` routes and the page.

use std::collections::HashMap;
use std::sync::Arc;

use axum::http::StatusCode;
use serde::Serialize;

use crate::db::failed::{self, Key, Search};
use crate::db::history::attempts;
use crate::db::history::minutes::{self, Since};
use crate::db::history::{
    copies as fleet, Attempt, Bucket, CopyStatus, HistoryConn, NO_SUCH_TABLE,
};
use crate::db::{Database, DbError};
use crate::telemetry::stats::monitor::{Monitor, Setup};

/// The most rows a page of failed rows holds.
pub const MOST_ROWS: usize = 200;
/// Keys whose last error matches a search, at most.
const MATCHING_KEYS: usize = 1000;

/// Why the history could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("no queue {0} runs in this process")]
    NoQueue(String),
    #[error("queue {0} has no [failed] table: nothing tells which rows gave up")]
    NoFailed(String),
    #[error("cannot read the history: {0}")]
    Database(#[from] DbError),
}

impl HistoryError {
    pub fn status(&self) -> StatusCode {
        match self {
            HistoryError::NoQueue(_) => StatusCode::NOT_FOUND,
            HistoryError::NoFailed(_) => StatusCode::NOT_FOUND,
            HistoryError::Database(_) => StatusCode::BAD_GATEWAY,
        }
    }
}

/// A page of the rows that gave up.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FailedPage {
    /// Each row's columns, as `[failed] select` returns them.
    pub rows: Vec<serde_json::Value>,
    /// Each row's key, as tableq prints it.
    pub keys: Vec<String>,
    /// The last recorded error of the rows that have one, by key.
    pub errors: HashMap<String, String>,
    /// The key to ask `after` for the next page; `null` on the last.
    pub next: Option<String>,
}

/// What a search of the rows that gave up asks.
#[derive(Debug, Clone, Default)]
pub struct FailedQuery {
    /// Text their columns or their last error hold.
    pub text: Option<String>,
    pub limit: usize,
    /// Rows after this key (older).
    pub after: Option<String>,
}

/// The queue's setup in this process.
pub fn setup(monitor: &Monitor, queue: &str) -> Result<Arc<Setup>, HistoryError> {
    let (_, setup) = monitor
        .running(queue)
        .ok_or_else(|| HistoryError::NoQueue(queue.to_string()))?;
    Ok(setup)
}

async fn connect(setup: &Setup) -> Result<HistoryConn, HistoryError> {
    Ok(HistoryConn::open(&setup.database, setup.config.database_timeout).await?)
}

/// `queue`'s history over every copy, bucketed for `since`. No table yet: empty.
pub async fn history(setup: &Setup, since: Since) -> Result<Vec<Bucket>, HistoryError> {
    let mut conn = connect(setup).await?;
    let now = crate::db::history::unix_seconds(std::time::SystemTime::now()) / 60;
    let read = minutes::read(&mut conn, &setup.config.name, since, now).await;
    conn.close().await;
    match read {
        Err(e) if no_table(&e) => Ok(minutes::empty(since, now)),
        read => Ok(read?),
    }
}

/// The rows that gave up that `query` finds, newest first, with their last errors.
pub async fn failed(setup: &Setup, query: &FailedQuery) -> Result<FailedPage, HistoryError> {
    let queue = &setup.config;
    let failed = queue
        .failed
        .as_ref()
        .ok_or_else(|| HistoryError::NoFailed(queue.name.clone()))?;
    let mut conn = connect(setup).await?;
    let text = query.text.as_deref().filter(|t| !t.is_empty());
    let keys = match text {
        Some(text) => attempts::keys_whose_error_holds(&mut conn, &queue.name, text, MATCHING_KEYS)
            .await
            .or_else(none_without_table)?,
        None => Vec::new(),
    };
    let after = query.after.as_deref().map(Key::from_text);
    let limit = query.limit.clamp(1, MOST_ROWS);
    let search = Search {
        text,
        keys: &keys,
        after: after.as_ref(),
        limit: limit + 1,
    };
    let mut rows = failed::search(conn.conn(), queue, failed, &search).await?;
    let next = (rows.rows.len() > limit).then(|| rows.keys[limit - 1].to_string());
    rows.rows.truncate(limit);
    rows.keys.truncate(limit);
    let keys: Vec<String> = rows.keys.iter().map(ToString::to_string).collect();
    let errors = attempts::last_errors(&mut conn, &queue.name, &keys)
        .await
        .or_else(none_without_table)?;
    conn.close().await;
    Ok(FailedPage {
        rows: rows.rows,
        keys,
        errors,
        next,
    })
}

/// The failed attempts recorded for `key`, in order.
pub async fn attempts_of(setup: &Setup, key: &str) -> Result<Vec<Attempt>, HistoryError> {
    let mut conn = connect(setup).await?;
    let found = attempts::of_key(&mut conn, &setup.config.name, key).await;
    conn.close().await;
    Ok(found.or_else(none_without_table)?)
}

/// Every copy that heartbeats on the databases of this copy's queues.
pub async fn copies(monitor: &Monitor) -> Result<Vec<CopyStatus>, HistoryError> {
    let mut databases: Vec<(String, Database, std::time::Duration)> = Vec::new();
    for view in monitor.queues() {
        let Some((_, setup)) = monitor.running(&view.name) else {
            continue;
        };
        let name = format!("{}/{}", setup.database.server(), setup.database.name());
        if !databases.iter().any(|(known, _, _)| *known == name) {
            databases.push((name, setup.database.clone(), setup.config.database_timeout));
        }
    }
    let mut all: Vec<CopyStatus> = Vec::new();
    for (_, database, timeout) in databases {
        let mut conn = HistoryConn::open(&database, timeout).await?;
        let listed = fleet::list(&mut conn).await.or_else(none_without_table);
        conn.close().await;
        for copy in listed? {
            if !all
                .iter()
                .any(|c| c.host == copy.host && c.pid == copy.pid && c.started == copy.started)
            {
                all.push(copy);
            }
        }
    }
    Ok(all)
}

fn no_table(e: &DbError) -> bool {
    e.server_code() == Some(NO_SUCH_TABLE)
}

/// Nothing, when the history's table is not there (no copy kept one yet).
fn none_without_table<T: Default>(e: DbError) -> Result<T, DbError> {
    match no_table(&e) {
        true => Ok(T::default()),
        false => Err(e),
    }
}
