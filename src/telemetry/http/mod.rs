//! `--metrics-addr`: an HTTP endpoint for the supervisor and the monitoring system.
//!
//! - `GET /metrics`: the metrics ([`crate::telemetry::metrics`]).
//! - `GET /healthz`: 200 while the process serves (liveness).
//! - `GET /` and `GET /status.json`: the status page and its data (see [`status`]);
//!   `GET /queues/{queue}`: a queue's own page.
//! - The console's actions, sign-in and API (see [`console`]): only with a token.
//! - `GET /readyz`: 200 when every running queue has a database connection (or,
//!   with more queues than the connection budget has places, takes its turns: it
//!   claimed within its window) and no worker has waited for the database past its
//!   deadline, else 503 with the reasons (readiness).
//!
//! Reading needs no authentication: serve it on loopback or a private interface
//! (or behind a reverse proxy). Acting needs the console token. What a flood of
//! clients can cost is bounded (see [`listener`]).

pub mod console;
pub mod listener;
pub mod status;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::telemetry::metrics::Metrics;
use crate::telemetry::stats::monitor::Monitor;
use console::Console;

/// Binds `addr` now (so a taken port fails the start), then serves until `shutdown`.
/// `console_token`: the token that lets the console act (`None`: it only reads).
pub async fn start(
    addr: SocketAddr,
    monitor: Arc<Monitor>,
    console_token: Option<&str>,
    shutdown: CancellationToken,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    info!(addr = %bound, "metrics listening on /metrics, /healthz, /readyz; status page on / and /status.json");
    if console_token.is_some() {
        info!(addr = %bound, "the console acts for whoever holds its token: pause, resume, retry and discard on the status page and POST /api/queues/…");
    }
    let console = Arc::new(Console::new(monitor.clone(), console_token));
    let state = Arc::new(Endpoint {
        metrics: Metrics::new(monitor.clone()),
        console: console.clone(),
        monitor,
    });
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/", get(status_page))
        .route("/status.json", get(status_json))
        .with_state(state)
        .merge(console::routes(console));
    Ok(tokio::spawn(listener::serve(listener, app, shutdown)))
}

struct Endpoint {
    monitor: Arc<Monitor>,
    metrics: Metrics,
    console: Arc<Console>,
}

async fn metrics(State(endpoint): State<Arc<Endpoint>>, headers: HeaderMap) -> impl IntoResponse {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    match endpoint.metrics.encode(accept) {
        Ok((content_type, text)) => (StatusCode::OK, [(header::CONTENT_TYPE, content_type)], text),
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "cannot encode the metrics\n".to_string(),
        ),
    }
}

async fn status_page(
    State(endpoint): State<Arc<Endpoint>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
) -> axum::response::Response {
    let viewer = endpoint.console.viewer(&headers);
    status::page_response(&endpoint.monitor, status::page_asked(uri.query()), &viewer)
}

async fn status_json(
    State(endpoint): State<Arc<Endpoint>>,
    uri: axum::http::Uri,
) -> axum::response::Response {
    status::json_response(&endpoint.monitor, status::page_asked(uri.query()))
}

async fn readyz(State(endpoint): State<Arc<Endpoint>>) -> impl IntoResponse {
    match endpoint.monitor.readiness() {
        Ok(notes) => {
            let notes: String = notes.iter().map(|note| format!("{note}\n")).collect();
            (StatusCode::OK, format!("ready\n{notes}"))
        }
        Err(reasons) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("{}\n", reasons.join("\n")),
        ),
    }
}
