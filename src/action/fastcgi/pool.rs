//! The connections a queue keeps to its FastCGI server. A run takes an idle one
//! (the most recently used) or opens one, and gives it back once its answer was
//! read whole; so there are never more than the queue runs at once. A connection
//! cut off mid-request (the deadline dropped its run) is dropped with it.
//!
//! PHP-FPM gives a kept connection a child of its own until the connection closes,
//! so one idle for [`IDLE`] is closed: a queue with nothing to do does not hold
//! children the web application needs.

use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::FutureExt;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::{TcpStream, UnixStream};
use tokio::time::Instant;

use super::config::Address;
use crate::action::deadline::within;
use crate::action::CONNECT_TIMEOUT;
use crate::lock::lock;

/// How long a connection may stay idle before it is closed.
pub const IDLE: Duration = Duration::from_secs(5);

/// A connection to the server, by socket or TCP.
pub enum Conn {
    Unix(UnixStream),
    Tcp(TcpStream),
}

/// Opens a connection to `address`, within [`CONNECT_TIMEOUT`] (a `TimedOut`
/// error past it).
pub async fn connect(address: &Address) -> std::io::Result<Conn> {
    let opening = async {
        match address {
            Address::Unix(path) => UnixStream::connect(path).await.map(Conn::Unix),
            Address::Tcp { host, port } => {
                let stream = TcpStream::connect((host.as_str(), *port)).await?;
                stream.set_nodelay(true)?;
                Ok(Conn::Tcp(stream))
            }
        }
    };
    let late = || std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer to the connect");
    within(CONNECT_TIMEOUT, opening)
        .await
        .unwrap_or_else(|_| Err(late()))
}

/// The idle connections of one queue's action, newest last.
#[derive(Default)]
pub struct Pool {
    idle: Mutex<Vec<(Instant, Conn)>>,
}

impl Pool {
    /// A pool whose idle connections are closed after [`IDLE`] by a task of the
    /// runtime, if there is one, which ends with the pool.
    pub fn new() -> Arc<Pool> {
        let pool = Arc::new(Pool::default());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(close_idle(Arc::downgrade(&pool)));
        }
        pool
    }

    /// The most recently used idle connection that the server still holds open,
    /// if any (one it closed while idle — FPM stopped, a child recycled — is
    /// dropped: a request sent on it would be lost unsent).
    pub fn take(&self) -> Option<Conn> {
        let mut idle = lock(&self.idle);
        while let Some((_, mut conn)) = idle.pop() {
            if conn.is_open() {
                return Some(conn);
            }
        }
        None
    }

    /// Keeps `conn` for the next run.
    pub fn give_back(&self, conn: Conn) {
        lock(&self.idle).push((Instant::now(), conn));
    }

    /// Closes the connections idle for longer than [`IDLE`].
    fn close_stale(&self) {
        let cutoff = Instant::now() - IDLE;
        lock(&self.idle).retain(|(since, _)| *since > cutoff);
    }
}

async fn close_idle(pool: Weak<Pool>) {
    let mut tick = tokio::time::interval(IDLE / 5);
    loop {
        tick.tick().await;
        match pool.upgrade() {
            Some(pool) => pool.close_stale(),
            None => return,
        }
    }
}

impl Conn {
    /// Whether the server still holds the connection open: nothing to read on it
    /// now (an end, or bytes nobody asked for, mean it is done with).
    fn is_open(&mut self) -> bool {
        let mut byte = [0u8; 1];
        self.read(&mut byte).now_or_never().is_none()
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Conn::Unix(s) => Pin::new(s).poll_read(cx, buf),
            Conn::Tcp(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Conn::Unix(s) => Pin::new(s).poll_write(cx, buf),
            Conn::Tcp(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Conn::Unix(s) => Pin::new(s).poll_flush(cx),
            Conn::Tcp(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Conn::Unix(s) => Pin::new(s).poll_shutdown(cx),
            Conn::Tcp(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}
