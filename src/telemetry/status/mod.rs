//! The status page: at `/`, one table of the queues — workers, the last 15 minutes
//! minute by minute, the backlog and its age, action times — and under each its last
//! failures; at `/status.json`, the same data. Read-only, from memory (no query),
//! server-rendered with no script and no outside asset: it works offline, behind a
//! proxy, under a strict Content-Security-Policy, and refreshes itself.

mod html;
mod sparkline;

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::monitor::{Monitor, QueueView};
use super::observed::{Failure, Minute};
use super::stats::QueueStats;

pub use html::{render, STYLE};

/// Everything the page shows.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    pub version: &'static str,
    /// When this was read, in seconds since the epoch.
    pub generated_at: u64,
    pub queues: Vec<QueueStatus>,
}

/// One queue's line, and its failures.
#[derive(Debug, Clone, Serialize)]
pub struct QueueStatus {
    pub name: String,
    pub running: bool,
    pub workers: usize,
    pub connected: usize,
    pub busy: usize,
    pub done: u64,
    pub failed: u64,
    pub returned: u64,
    pub rolled_back: u64,
    /// Lease mode: leases lost while their item was worked on (counted in
    /// `returned` too).
    pub leases_lost: u64,
    /// The circuit breaker: `closed` (also when it is off), `open` or `half_open`.
    pub circuit: &'static str,
    /// Waiting rows, as of the last background count (none yet: `null`).
    pub waiting: Option<usize>,
    /// More rows wait than `waiting_cap`.
    pub waiting_capped: bool,
    pub oldest_waiting_seconds: Option<f64>,
    pub action_p50_seconds: Option<f64>,
    pub action_p99_seconds: Option<f64>,
    /// The last 15 minutes, oldest first.
    pub minutes: Vec<Minute>,
    /// The last failures, newest first.
    pub failures: Vec<Failure>,
}

impl Status {
    /// Reads every queue's numbers from `monitor`.
    pub fn of(monitor: &Monitor) -> Status {
        let generated_at = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        Status {
            version: env!("CARGO_PKG_VERSION"),
            generated_at,
            queues: monitor
                .watched()
                .iter()
                .map(|(view, stats)| QueueStatus::of(view, stats))
                .collect(),
        }
    }
}

impl QueueStatus {
    fn of(view: &QueueView, stats: &Arc<QueueStats>) -> QueueStatus {
        let observed = &stats.observed;
        let backlog = observed.backlog();
        QueueStatus {
            name: view.name.clone(),
            running: view.running,
            workers: view.workers,
            connected: view.connected,
            busy: observed.busy_workers(),
            done: view.counts.done,
            failed: view.counts.failed,
            returned: view.counts.returned,
            rolled_back: observed.rolled_back(),
            leases_lost: view.counts.leases_lost,
            circuit: view.circuit.name(),
            waiting: backlog.waiting,
            waiting_capped: backlog.capped,
            oldest_waiting_seconds: backlog.oldest_seconds,
            action_p50_seconds: observed.action.quantile(0.5),
            action_p99_seconds: observed.action.quantile(0.99),
            minutes: observed.minutes(),
            failures: observed.failures(),
        }
    }
}

/// `GET /`: the page, with a Content-Security-Policy that allows its own style and
/// nothing else.
pub fn page_response(monitor: &Monitor) -> axum::response::Response {
    use axum::http::header;
    use axum::response::IntoResponse;
    let headers = [
        (header::CONTENT_TYPE, "text/html; charset=utf-8".to_string()),
        (header::CONTENT_SECURITY_POLICY, content_security_policy()),
        (header::CACHE_CONTROL, "no-store".to_string()),
    ];
    (headers, render(&Status::of(monitor))).into_response()
}

/// `GET /status.json`: the page's data.
pub fn json_response(monitor: &Monitor) -> axum::response::Response {
    use axum::http::header;
    use axum::response::IntoResponse;
    let body = serde_json::to_string_pretty(&Status::of(monitor)).unwrap_or_default();
    let headers = [
        (header::CONTENT_TYPE, "application/json"),
        (header::CACHE_CONTROL, "no-store"),
    ];
    (headers, body).into_response()
}

/// No script, no outside asset, no frame; the page's one style by its hash.
pub fn content_security_policy() -> String {
    use base64::Engine;
    use sha2::Digest;
    let hash = sha2::Sha256::digest(STYLE.as_bytes());
    let hash = base64::engine::general_purpose::STANDARD.encode(hash);
    format!(
        "default-src 'none'; style-src 'sha256-{hash}'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
}
