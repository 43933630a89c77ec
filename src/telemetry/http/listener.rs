//! Serving the metrics endpoint to whoever can reach it, at a bounded cost: a client
//! gets a few seconds to send its request headers and a connection a bounded life,
//! and at most [`MAX_CONNECTIONS`] are open at once — past that, the oldest is closed
//! to make room, so a flood of slow clients cannot keep the orchestrator's `/healthz`
//! out, nor grow memory without end. Every answer says `X-Content-Type-Options:
//! nosniff`, so a browser takes each for what its Content-Type says and nothing else.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::lock::lock;
use axum::http::{header, HeaderValue};
use axum::response::Response;
use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// Connections served at once; a new one closes the oldest past this.
pub const MAX_CONNECTIONS: usize = 256;
/// How long a client may take to send its request headers.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest a connection lives, requests and keep-alive included.
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(30);
/// How long to wait before accepting again when accepting failed (out of file
/// descriptors, say).
const ACCEPT_PAUSE: Duration = Duration::from_millis(50);

/// The address a request came from (the reverse proxy's, behind one), for the
/// console's log lines.
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub SocketAddr);

/// Serves `app` on `listener` until `shutdown`.
pub async fn serve(listener: TcpListener, app: Router, shutdown: CancellationToken) {
    let app = app.layer(axum::middleware::map_response(nosniff));
    let open = Open::default();
    loop {
        let (stream, peer) = tokio::select! {
            _ = shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(_) => {
                    tokio::time::sleep(ACCEPT_PAUSE).await;
                    continue;
                }
            },
        };
        let (id, closed) = open.admit(&shutdown);
        // Who asked, for the console's log lines.
        let app = app.clone().layer(axum::Extension(Peer(peer)));
        tokio::spawn(serve_one(stream, app, closed, open.clone(), id));
    }
}

async fn nosniff(mut response: Response) -> Response {
    response.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

async fn serve_one(stream: TcpStream, app: Router, closed: CancellationToken, open: Open, id: u64) {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    let connection = http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app));
    tokio::select! {
        _ = connection => {}
        _ = closed.cancelled() => {}
        _ = tokio::time::sleep(CONNECTION_LIFETIME) => {}
    }
    open.release(id);
}

/// The open connections, oldest first, each with the token that closes it.
#[derive(Clone, Default)]
struct Open(Arc<Mutex<OpenState>>);

#[derive(Default)]
struct OpenState {
    next_id: u64,
    connections: VecDeque<(u64, CancellationToken)>,
}

impl Open {
    /// Makes room for one more connection, closing the oldest if full.
    fn admit(&self, shutdown: &CancellationToken) -> (u64, CancellationToken) {
        let mut state = self.lock();
        if state.connections.len() >= MAX_CONNECTIONS {
            if let Some((_, oldest)) = state.connections.pop_front() {
                oldest.cancel();
            }
        }
        let id = state.next_id;
        state.next_id += 1;
        let closed = shutdown.child_token();
        state.connections.push_back((id, closed.clone()));
        (id, closed)
    }

    fn release(&self, id: u64) {
        self.lock().connections.retain(|(open, _)| *open != id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, OpenState> {
        lock(&self.0)
    }
}
