//! The console's pages that read the history tables: a queue's page (its charts,
//! and — signed in — its failed rows with a search), a failed row's attempts
//! (`/queues/{queue}/attempts?key=K`, signed in), and the fleet (`/copies`). The
//! data comes from [`super::history`]; the HTML from the status page's renderers.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;

use super::request::query_value;
use super::{text, Console, READ_ONLY};
use crate::db::history::{Attempt, Bucket, CopyStatus};
use crate::telemetry::http::status::{self, FailedRows, PageHistory, Window};
use crate::telemetry::http::Viewers;
use crate::telemetry::metrics::process::hostname;

/// How many failed rows a page lists.
const FAILED_PER_PAGE: usize = 50;

/// `GET /queues/{queue}`: the queue's page, with its charts over `?since=`, and,
/// for a browser signed in, the failed rows (`?q=` searches, `?after=` pages on).
pub async fn queue_page(
    State(console): State<Arc<Console>>,
    Path(queue): Path<String>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let viewer = console.viewer(&headers);
    let window = Window::asked(uri.query());
    let buckets = read_history(&console, &queue, window).await;
    let failed_sql = console
        .monitor
        .running(&queue)
        .is_some_and(|(_, setup)| setup.config.failed.is_some());
    let failed = match (&viewer.csrf, failed_sql) {
        (Some(_), true) => Some(read_failed(&console, &queue, uri.query()).await),
        _ => None,
    };
    let history = PageHistory {
        window,
        buckets,
        failed,
    };
    status::queue_page_response(&console.monitor, &queue, &viewer, &history)
}

/// `GET /queues/{queue}/attempts?key=K`: a row's failed attempts, signed in.
pub async fn attempts_page(
    State(console): State<Arc<Console>>,
    Path(queue): Path<String>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    if let Err(refused) = signed_in(&console, &headers) {
        return refused;
    }
    let Some(key) = query_value(uri.query(), "key") else {
        return text(StatusCode::BAD_REQUEST, "name the row: ?key=KEY");
    };
    let Some((_, setup)) = console.monitor.running(&queue) else {
        let why = format!("no queue {queue} runs in this process");
        return text(StatusCode::NOT_FOUND, why);
    };
    let can_change = setup
        .config
        .failed
        .as_ref()
        .is_some_and(|f| !f.retry.is_empty() || !f.discard.is_empty());
    let attempts = read_attempts(&console, &queue, &key).await;
    let viewer = console.viewer(&headers);
    let page = status::attempts_page(
        &queue,
        &key,
        attempts.as_deref().map_err(String::as_str),
        &viewer,
        can_change,
    );
    status::html_response(StatusCode::OK, page)
}

/// `GET /copies`: every copy, by its heartbeat.
pub async fn fleet_page(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    let viewer = console.viewer(&headers);
    let copies = read_copies(&console).await;
    let now = crate::db::history::unix_seconds(std::time::SystemTime::now());
    let host = hostname();
    let page = status::fleet_page(
        copies.as_deref().map_err(String::as_str),
        (&host, std::process::id()),
        &viewer,
        now,
    );
    status::html_response(StatusCode::OK, page)
}

/// `Ok` for a browser signed in to the console, else the answer that says how.
fn signed_in(console: &Console, headers: &HeaderMap) -> Result<(), Response> {
    if console.token.is_none() {
        return Err(text(StatusCode::FORBIDDEN, READ_ONLY));
    }
    match console.sessions.of(headers) {
        Some(_) => Ok(()),
        None => Err(text(
            StatusCode::UNAUTHORIZED,
            "sign in first, with the console token, at /sign-in",
        )),
    }
}

/// The charts' buckets, or why there are none.
async fn read_history(
    _console: &Console,
    _queue: &str,
    _window: Window,
) -> Result<Vec<Bucket>, String> {
    Err("the history is not wired yet".into())
}

/// A page of the failed rows, as `query` (`q`, `after`) asks.
async fn read_failed(
    _console: &Console,
    _queue: &str,
    query: Option<&str>,
) -> Result<FailedRows, String> {
    let _ = (
        query_value(query, "q"),
        query_value(query, "after"),
        FAILED_PER_PAGE,
    );
    Err("the failed rows are not wired yet".into())
}

async fn read_attempts(
    _console: &Console,
    _queue: &str,
    _key: &str,
) -> Result<Vec<Attempt>, String> {
    Err("the attempts are not wired yet".into())
}

async fn read_copies(_console: &Console) -> Result<Vec<CopyStatus>, String> {
    Err("the copies are not wired yet".into())
}
