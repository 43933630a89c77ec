//! `--metrics-addr`: an HTTP endpoint for the supervisor and the monitoring system.
//!
//! - `GET /metrics`: the metrics ([`crate::telemetry::metrics`]).
//! - `GET /healthz`: 200 while the process serves (liveness).
//! - `GET /` and `GET /status.json`: the status page and its data (see [`status`]);
//!   `GET /queues/{queue}`: a queue's own page.
//! - The routes of what acts on the queues, handed in ([`Acting`]: the console's
//!   actions, sign-in and API, `crate::console`), and who looks at a page as it
//!   tells ([`Viewers`]).
//! - `GET /readyz`: 200 when every running queue has a database connection (or,
//!   with more queues than the connection budget has places, takes its turns: it
//!   claimed within its window) and no worker has waited for the database past its
//!   deadline, else 503 with the reasons (readiness).
//!
//! Reading needs no authentication: serve it on loopback or a private interface
//! (or behind a reverse proxy). Acting needs the console token. What a flood of
//! clients can cost is bounded (see [`listener`]).

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
use status::Viewer;

/// What acts on the queues through the endpoint (the console): its routes, who
/// looks at a page, and whether it can act at all (it was given a token).
pub struct Acting {
    pub routes: Router,
    pub viewers: Arc<dyn Viewers>,
    pub can_act: bool,
}

/// Who looks at a page, from the request's headers: signed in or not.
pub trait Viewers: Send + Sync {
    fn viewer(&self, headers: &HeaderMap) -> Viewer;
}

/// Binds `addr` now (so a taken port fails the start), then serves until `shutdown`,
/// with `acting`'s routes beside the status pages and the metrics. The address it
/// bound (port 0 asks for any).
pub async fn start(
    addr: SocketAddr,
    monitor: Arc<Monitor>,
    acting: Acting,
    shutdown: CancellationToken,
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    info!(addr = %bound, "metrics listening on /metrics, /healthz, /readyz; status page on / and /status.json");
    if acting.can_act {
        info!(addr = %bound, "the console acts for whoever holds its token: pause, resume, retry and discard on the status page and POST /api/queues/…");
    }
    let state = Arc::new(Endpoint {
        metrics: Metrics::new(monitor.clone()),
        viewers: acting.viewers,
        monitor,
    });
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/", get(status_page))
        .route("/status.json", get(status_json))
        .with_state(state)
        .merge(acting.routes);
    tokio::spawn(listener::serve(listener, app, shutdown));
    Ok(bound)
}

struct Endpoint {
    monitor: Arc<Monitor>,
    metrics: Metrics,
    viewers: Arc<dyn Viewers>,
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
    let viewer = endpoint.viewers.viewer(&headers);
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
