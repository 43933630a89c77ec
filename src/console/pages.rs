//! The console's pages that read the history tables: a queue's page (its charts,
//! and — signed in — its failed rows with a search), a failed row's attempts
//! (`/queues/{queue}/attempts?key=K`, signed in), and the fleet (`/copies`). The
//! data comes from [`super::history`]; the HTML from the status page's renderers.

use std::sync::Arc;
use std::time::SystemTime;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;

use super::history::{self, FailedQuery};
use super::request::query_value;
use super::{text, Console, READ_ONLY};
use crate::db::history::unix_seconds;
use crate::telemetry::http::status::{self, since_asked, FailedRows, PageHistory};
use crate::telemetry::http::Viewers;
use crate::telemetry::metrics::process::hostname;
use crate::telemetry::stats::monitor::Setup;

/// How many failed rows a page lists.
const FAILED_PER_PAGE: usize = 50;

/// `GET /queues/{queue}`: the queue's page, with its charts over `?since=` (for
/// whoever may read the history), and, for a browser signed in, the failed rows
/// (`?q=` searches, `?after=` pages on).
pub async fn queue_page(
    State(console): State<Arc<Console>>,
    Path(queue): Path<String>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let viewer = console.viewer(&headers);
    let since = since_asked(uri.query());
    let Ok(setup) = history::setup(&console, &queue) else {
        let history = PageHistory {
            since,
            buckets: Ok(Vec::new()),
            failed: None,
        };
        return status::queue_page_response(&console.monitor, &queue, &viewer, &history);
    };
    let buckets = match may_read(&console, &headers) {
        true => (history::history(&setup, since).await).map_err(|e| e.to_string()),
        false => Err(READ_TOKEN.to_string()),
    };
    let failed = match (&viewer.csrf, &setup.config.failed) {
        (Some(_), Some(_)) => Some(failed_rows(&setup, uri.query()).await),
        _ => None,
    };
    let history = PageHistory {
        since,
        buckets,
        failed,
    };
    status::queue_page_response(&console.monitor, &queue, &viewer, &history)
}

const READ_TOKEN: &str = "the history is read with the console's read token: sign in to see it";

/// Whether the request may read the history's aggregates on a page: anyone, unless
/// tableq was given `--console-read-token-file`; then a browser signed in.
fn may_read(console: &Console, headers: &HeaderMap) -> bool {
    console.read_token.is_none() || console.signed_in(headers)
}

/// A page of the failed rows, as `query` (`q`, `after`) asks.
async fn failed_rows(setup: &Setup, query: Option<&str>) -> Result<FailedRows, String> {
    let search = query_value(query, "q").unwrap_or_default();
    let after = query_value(query, "after").filter(|a| !a.is_empty());
    let asked = FailedQuery {
        text: Some(search.clone()).filter(|s| !s.is_empty()),
        limit: FAILED_PER_PAGE,
        after: after.clone(),
    };
    let found = history::failed(setup, &asked)
        .await
        .map_err(|e| e.to_string())?;
    Ok(FailedRows {
        search,
        after,
        rows: found.rows,
        keys: found.keys,
        errors: found.errors,
        next: found.next,
    })
}

/// `GET /queues/{queue}/attempts?key=K`: a row's failed attempts, signed in.
pub async fn attempts_page(
    State(console): State<Arc<Console>>,
    Path(queue): Path<String>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    if let Some(refused) = not_signed_in(&console, &headers) {
        return refused;
    }
    let Some(key) = query_value(uri.query(), "key") else {
        return text(StatusCode::BAD_REQUEST, "name the row: ?key=KEY");
    };
    let setup = match history::setup(&console, &queue) {
        Ok(setup) => setup,
        Err(e) => return text(StatusCode::NOT_FOUND, e.to_string()),
    };
    let can_change = (setup.config.failed.as_ref())
        .is_some_and(|f| !f.retry.is_empty() || !f.discard.is_empty());
    let attempts = history::attempts_of(&setup, &key)
        .await
        .map_err(|e| e.to_string());
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

/// `GET /copies`: every copy, by its heartbeat (for whoever may read the history).
pub async fn fleet_page(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    let viewer = console.viewer(&headers);
    let copies = match may_read(&console, &headers) {
        true => history::copies(&console).await.map_err(|e| e.to_string()),
        false => Err(READ_TOKEN.to_string()),
    };
    let now = unix_seconds(SystemTime::now());
    let host = hostname();
    let page = status::fleet_page(
        copies.as_deref().map_err(String::as_str),
        (&host, std::process::id()),
        &viewer,
        now,
    );
    status::html_response(StatusCode::OK, page)
}

/// The answer to a browser not signed in to the console (how to), or `None`.
fn not_signed_in(console: &Console, headers: &HeaderMap) -> Option<Response> {
    if console.token.is_none() {
        return Some(text(StatusCode::FORBIDDEN, READ_ONLY));
    }
    (!console.signed_in(headers)).then(|| {
        text(
            StatusCode::UNAUTHORIZED,
            "sign in first, with the console token, at /sign-in",
        )
    })
}
