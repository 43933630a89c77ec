//! The console's memory, read back from the queue's database: a queue's history
//! over every copy, the rows that gave up (searched), one row's failed attempts,
//! and the copies — as `/api/…` JSON here, and for the page.
//!
//! The aggregates (`history`, `copies`) are open like the status page, unless
//! `--console-read-token-file` was given: then they need that token or the acting
//! one. Row data (`failed`, `attempts`) needs the acting token, as `inspect` does.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use mysql_async::Conn;
use serde::Serialize;

use super::request::query_value;
use super::{check_bearer, json, json_error, Console};
use crate::db::failed::{self, Key, Search};
use crate::db::history::attempts;
use crate::db::history::minutes::{self, Since};
use crate::db::history::{copies as fleet, Attempt, Bucket, CopyStatus};
use crate::db::{Database, DbError};
use crate::telemetry::stats::monitor::Setup;

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

impl From<mysql_async::Error> for HistoryError {
    fn from(e: mysql_async::Error) -> Self {
        HistoryError::Database(DbError::from(e))
    }
}

impl HistoryError {
    fn status(&self) -> StatusCode {
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
pub fn setup(console: &Console, queue: &str) -> Result<Arc<Setup>, HistoryError> {
    let (_, setup) = console
        .monitor
        .running(queue)
        .ok_or_else(|| HistoryError::NoQueue(queue.to_string()))?;
    Ok(setup)
}

async fn connect(setup: &Setup) -> Result<Conn, HistoryError> {
    Ok(setup
        .database
        .connect_within(setup.config.database_timeout)
        .await?)
}

/// `queue`'s history over every copy, bucketed for `since`. No table yet: empty.
pub async fn history(setup: &Setup, since: Since) -> Result<Vec<Bucket>, HistoryError> {
    let mut conn = connect(setup).await?;
    let now = crate::db::history::unix_seconds(std::time::SystemTime::now()) / 60;
    let read = minutes::read(&mut conn, &setup.config.name, since, now).await;
    let _ = conn.disconnect().await;
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
    let mut rows = failed::search(&mut conn, queue, failed, &search).await?;
    let next = (rows.rows.len() > limit).then(|| rows.keys[limit - 1].to_string());
    rows.rows.truncate(limit);
    rows.keys.truncate(limit);
    let keys: Vec<String> = rows.keys.iter().map(ToString::to_string).collect();
    let errors = attempts::last_errors(&mut conn, &queue.name, &keys)
        .await
        .or_else(none_without_table)?;
    let _ = conn.disconnect().await;
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
    let _ = conn.disconnect().await;
    Ok(found.or_else(none_without_table)?)
}

/// Every copy that heartbeats on the databases of this copy's queues.
pub async fn copies(console: &Console) -> Result<Vec<CopyStatus>, HistoryError> {
    let mut databases: Vec<(String, Database, std::time::Duration)> = Vec::new();
    for view in console.monitor.queues() {
        let Some((_, setup)) = console.monitor.running(&view.name) else {
            continue;
        };
        let name = format!("{}/{}", setup.database.server(), setup.database.name());
        if !databases.iter().any(|(known, _, _)| *known == name) {
            databases.push((name, setup.database.clone(), setup.config.database_timeout));
        }
    }
    let mut all: Vec<CopyStatus> = Vec::new();
    for (_, database, timeout) in databases {
        let mut conn = database.connect_within(timeout).await?;
        let listed = fleet::list(&mut conn).await.or_else(none_without_table);
        let _ = conn.disconnect().await;
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

const ER_NO_SUCH_TABLE: u16 = 1146;

fn no_table(e: &mysql_async::Error) -> bool {
    matches!(e, mysql_async::Error::Server(e) if e.code == ER_NO_SUCH_TABLE)
}

/// Nothing, when the history's table is not there (no copy kept one yet).
fn none_without_table<T: Default>(e: mysql_async::Error) -> Result<T, mysql_async::Error> {
    match no_table(&e) {
        true => Ok(T::default()),
        false => Err(e),
    }
}

/// The history's API routes.
pub fn api_routes() -> Router<Arc<Console>> {
    Router::new()
        .route("/api/queues/{queue}/history", get(api_history))
        .route("/api/queues/{queue}/failed", get(api_failed))
        .route("/api/queues/{queue}/attempts", get(api_attempts))
        .route("/api/copies", get(api_copies))
}

/// Whether the request may read the aggregates: open without a read token.
pub async fn check_reader(console: &Console, headers: &HeaderMap) -> Result<(), Response> {
    if console.read_token.is_none() || console.signed_in(headers) {
        return Ok(());
    }
    match super::auth::bearer(headers) {
        Some(offered)
            if console
                .read_token
                .as_ref()
                .is_some_and(|t| t.matches(&offered)) =>
        {
            Ok(())
        }
        Some(_) if console.token.is_some() => check_bearer(console, headers).await,
        _ => Err(json_error(
            StatusCode::UNAUTHORIZED,
            "send the console's read token: Authorization: Bearer TOKEN",
        )),
    }
}

fn answer<T: Serialize>(field: &str, found: Result<T, HistoryError>) -> Response {
    match found {
        Ok(value) => json(StatusCode::OK, &serde_json::json!({ field: value })),
        Err(e) => json_error(e.status(), &e.to_string()),
    }
}

async fn api_history(
    State(console): State<Arc<Console>>,
    Path(queue): Path<String>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    if let Err(refused) = check_reader(&console, &headers).await {
        return refused;
    }
    let since = query_value(uri.query(), "since").unwrap_or_else(|| "1h".into());
    let Some(since) = Since::parse(&since) else {
        return json_error(StatusCode::BAD_REQUEST, "since must be 1h, 24h or 7d");
    };
    let found = match setup(&console, &queue) {
        Ok(setup) => history(&setup, since).await,
        Err(e) => Err(e),
    };
    answer("buckets", found)
}

async fn api_failed(
    State(console): State<Arc<Console>>,
    Path(queue): Path<String>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    if let Err(refused) = check_bearer(&console, &headers).await {
        return refused;
    }
    let query = FailedQuery {
        text: query_value(uri.query(), "q"),
        limit: query_value(uri.query(), "limit")
            .and_then(|l| l.parse().ok())
            .unwrap_or(50),
        after: query_value(uri.query(), "after"),
    };
    let found = match setup(&console, &queue) {
        Ok(setup) => failed(&setup, &query).await,
        Err(e) => Err(e),
    };
    match found {
        Ok(page) => json(StatusCode::OK, &page),
        Err(e) => json_error(e.status(), &e.to_string()),
    }
}

async fn api_attempts(
    State(console): State<Arc<Console>>,
    Path(queue): Path<String>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    if let Err(refused) = check_bearer(&console, &headers).await {
        return refused;
    }
    let Some(key) = query_value(uri.query(), "key") else {
        return json_error(StatusCode::BAD_REQUEST, "name the row: ?key=KEY");
    };
    let found = match setup(&console, &queue) {
        Ok(setup) => attempts_of(&setup, &key).await,
        Err(e) => Err(e),
    };
    answer("attempts", found)
}

async fn api_copies(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    if let Err(refused) = check_reader(&console, &headers).await {
        return refused;
    }
    answer("copies", copies(&console).await)
}
