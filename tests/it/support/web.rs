//! Real HTTP servers on loopback for the webhook tests: axum (hyper) over plain TCP
//! or over TLS with a freshly made self-signed certificate, recording every request
//! and answering as the test says. Plus a server that accepts and never answers.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: Method,
    pub uri: Uri,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    pub at: Instant,
}

impl Recorded {
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("the body is JSON")
    }
}

/// What the server answers.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
    pub delay: Duration,
}

impl Reply {
    pub fn status(status: u16) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: Vec::new(),
            delay: Duration::ZERO,
        }
    }

    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Reply {
        self.body = body.into();
        self
    }

    pub fn header(mut self, name: &'static str, value: impl Into<String>) -> Reply {
        self.headers.push((name, value.into()));
        self
    }

    pub fn after(mut self, delay: Duration) -> Reply {
        self.delay = delay;
        self
    }
}

type Responder = Arc<dyn Fn(&Recorded) -> Reply + Send + Sync>;

#[derive(Clone)]
struct Shared {
    requests: Arc<Mutex<Vec<Recorded>>>,
    responder: Responder,
}

/// A running test web server.
pub struct WebServer {
    pub addr: SocketAddr,
    requests: Arc<Mutex<Vec<Recorded>>>,
    scheme: &'static str,
}

impl WebServer {
    /// Plain HTTP on 127.0.0.1, answering every request with `responder`.
    pub async fn start(
        responder: impl Fn(&Recorded) -> Reply + Send + Sync + 'static,
    ) -> WebServer {
        WebServer::start_on("127.0.0.1:0".parse().unwrap(), responder).await
    }

    /// Plain HTTP on `addr` (a port a test kept closed until now).
    pub async fn start_on(
        addr: SocketAddr,
        responder: impl Fn(&Recorded) -> Reply + Send + Sync + 'static,
    ) -> WebServer {
        let listener = TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (app, requests) = app(Arc::new(responder));
        tokio::spawn(async move { axum::serve(listener, app).await });
        WebServer {
            addr,
            requests,
            scheme: "http",
        }
    }

    /// HTTPS on 127.0.0.1 with a self-signed certificate; returns the certificate PEM
    /// so a test can trust it with `ca_file`.
    pub async fn start_tls(
        responder: impl Fn(&Recorded) -> Reply + Send + Sync + 'static,
    ) -> (WebServer, String) {
        let certified = rcgen::generate_simple_self_signed(vec![
            "127.0.0.1".to_string(),
            "localhost".to_string(),
        ])
        .expect("make a self-signed certificate");
        let cert_pem = certified.cert.pem();
        let key = rustls::pki_types::PrivateKeyDer::try_from(certified.signing_key.serialize_der())
            .unwrap();
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![certified.cert.der().clone()], key)
        .unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let tls = TlsListener {
            listener,
            acceptor: TlsAcceptor::from(Arc::new(config)),
        };
        let (app, requests) = app(Arc::new(responder));
        tokio::spawn(async move { axum::serve(tls, app).await });
        (
            WebServer {
                addr,
                requests,
                scheme: "https",
            },
            cert_pem,
        )
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("{}://{}{}", self.scheme, self.addr, path)
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

fn app(responder: Responder) -> (Router, Arc<Mutex<Vec<Recorded>>>) {
    let requests = Arc::new(Mutex::new(Vec::new()));
    let shared = Shared {
        requests: requests.clone(),
        responder,
    };
    (Router::new().fallback(handle).with_state(shared), requests)
}

async fn handle(
    State(shared): State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let recorded = Recorded {
        method,
        uri,
        headers,
        body: body.to_vec(),
        at: Instant::now(),
    };
    let reply = (shared.responder)(&recorded);
    shared.requests.lock().unwrap().push(recorded);
    tokio::time::sleep(reply.delay).await;
    let mut response = (StatusCode::from_u16(reply.status).unwrap(), reply.body).into_response();
    for (name, value) in reply.headers {
        response.headers_mut().insert(name, value.parse().unwrap());
    }
    response
}

struct TlsListener {
    listener: TcpListener,
    acceptor: TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, addr)) = self.listener.accept().await else {
                continue;
            };
            // A client that refuses our certificate fails the handshake: next.
            if let Ok(tls) = self.acceptor.accept(tcp).await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.listener.local_addr()
    }
}

/// A server that accepts connections and never says a word; returns its address.
pub async fn silent_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    addr
}

/// An address on 127.0.0.1 where nothing listens.
pub fn closed_port() -> SocketAddr {
    // Below the ephemeral range (32768+): the kernel never picks it for a client,
    // so a client cannot be connected to itself there.
    (0..1000)
        .map(|_| SocketAddr::from(([127, 0, 0, 1], fastrand::u16(20_000..32_000))))
        .find(|addr| std::net::TcpListener::bind(addr).is_ok())
        .expect("find a closed port below 32000")
}
