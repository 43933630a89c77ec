//! The console's pages that read the history tables: a queue's page (its charts,
//! and — signed in — its failed rows with a search), a failed row's attempts
//! (`/queues/{queue}/attempts?key=K`), and the fleet (`/copies`). The data comes
//! from [`super::history`], the HTML from the status page's renderers; who may see
//! what is the handlers' to say (`console/mod.rs`): `reads` (the history's
//! aggregates: anyone, unless a read token was given) and the viewer (signed in).

use std::time::SystemTime;

use axum::http::StatusCode;
use axum::response::Response;

use super::history::{self, FailedQuery};
use super::request::query_value;
use crate::db::history::unix_seconds;
use crate::telemetry::http::status::{self, since_asked, FailedRows, PageHistory, Viewer};
use crate::telemetry::metrics::process::hostname;
use crate::telemetry::stats::monitor::{Monitor, Setup};

/// How many failed rows a page lists.
const FAILED_PER_PAGE: usize = 50;

/// What a page says where a read token keeps the history from its viewer.
const READ_TOKEN: &str = "the history is read with the console's read token: sign in to see it";

/// A queue's page, with its charts over `?since=` (when `reads`), and, for a
/// browser signed in, the failed rows (`?q=` searches, `?after=` pages on).
pub async fn queue_page(
    monitor: &Monitor,
    queue: &str,
    viewer: &Viewer,
    query: Option<&str>,
    reads: bool,
) -> Response {
    let since = since_asked(query);
    let Ok(setup) = history::setup(monitor, queue) else {
        let history = PageHistory {
            since,
            buckets: Ok(Vec::new()),
            failed: None,
        };
        return status::queue_page_response(monitor, queue, viewer, &history);
    };
    let buckets = match reads {
        true => (history::history(&setup, since).await).map_err(|e| e.to_string()),
        false => Err(READ_TOKEN.to_string()),
    };
    let failed = match (&viewer.csrf, &setup.config.failed) {
        (Some(_), Some(_)) => Some(failed_rows(&setup, query).await),
        _ => None,
    };
    let history = PageHistory {
        since,
        buckets,
        failed,
    };
    status::queue_page_response(monitor, queue, viewer, &history)
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

/// A row's failed attempts (`?key=K`), for a browser signed in; `Err` the status
/// and why when there is no such queue or no key.
pub async fn attempts_page(
    monitor: &Monitor,
    queue: &str,
    viewer: &Viewer,
    query: Option<&str>,
) -> Result<String, (StatusCode, String)> {
    let Some(key) = query_value(query, "key") else {
        return Err((StatusCode::BAD_REQUEST, "name the row: ?key=KEY".into()));
    };
    let setup =
        history::setup(monitor, queue).map_err(|e| (StatusCode::NOT_FOUND, e.to_string()))?;
    let can_change = (setup.config.failed.as_ref())
        .is_some_and(|f| !f.retry.is_empty() || !f.discard.is_empty());
    let attempts = history::attempts_of(&setup, &key)
        .await
        .map_err(|e| e.to_string());
    Ok(status::attempts_page(
        queue,
        &key,
        attempts.as_deref().map_err(String::as_str),
        viewer,
        can_change,
    ))
}

/// Every copy, by its heartbeat (when `reads`).
pub async fn fleet_page(monitor: &Monitor, viewer: &Viewer, reads: bool) -> Response {
    let copies = match reads {
        true => history::copies(monitor).await.map_err(|e| e.to_string()),
        false => Err(READ_TOKEN.to_string()),
    };
    let now = unix_seconds(SystemTime::now());
    let host = hostname();
    let page = status::fleet_page(
        copies.as_deref().map_err(String::as_str),
        (&host, std::process::id()),
        viewer,
        now,
    );
    status::html_response(StatusCode::OK, page)
}
