//! A TCP proxy that delays everything it forwards, to give a loopback connection the
//! latency of a real network: long enough for replies to be "in flight".

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Starts a proxy to `target` that holds each chunk for `delay`; returns its address.
pub async fn delaying_proxy(target: SocketAddr, delay: Duration) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = TcpStream::connect(target).await else {
                continue;
            };
            let (client_read, client_write) = client.into_split();
            let (server_read, server_write) = server.into_split();
            tokio::spawn(forward(client_read, server_write, delay));
            tokio::spawn(forward(server_read, client_write, delay));
        }
    });
    addr
}

async fn forward(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    delay: Duration,
) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                tokio::time::sleep(delay).await;
                if to.write_all(&buffer[..n]).await.is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown().await;
}

/// A TCP proxy that can stop forwarding without closing anything — what a stuck
/// middlebox or a frozen VM looks like to both ends — and start again; or reset
/// every connection it carries, as a crashing peer or a middlebox giving up would.
pub struct StallingProxy {
    pub addr: SocketAddr,
    mode: tokio::sync::watch::Sender<Mode>,
}

/// What the proxy does with the connections it carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Forward,
    /// Hold every byte; close nothing.
    Stall,
    /// Reset (RST) both ends of every connection, and each new one as it comes.
    Reset,
}

impl StallingProxy {
    /// Starts a proxy to `target`, forwarding.
    pub async fn start(target: SocketAddr) -> StallingProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (mode, watch) = tokio::sync::watch::channel(Mode::Forward);
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if *watch.borrow() == Mode::Reset {
                    let _ = client.set_zero_linger();
                    continue;
                }
                let Ok(server) = TcpStream::connect(target).await else {
                    continue;
                };
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                tokio::spawn(forward_unless_stalled(
                    client_read,
                    server_write,
                    watch.clone(),
                ));
                tokio::spawn(forward_unless_stalled(
                    server_read,
                    client_write,
                    watch.clone(),
                ));
            }
        });
        StallingProxy { addr, mode }
    }

    /// Stops forwarding: bytes are held, connections stay open.
    pub fn stall(&self) {
        self.mode.send_replace(Mode::Stall);
    }

    /// Resets every connection it carries (RST, not FIN), and each new one as it
    /// comes, until [`StallingProxy::resume`].
    pub fn reset(&self) {
        self.mode.send_replace(Mode::Reset);
    }

    /// Forwards again, held bytes first.
    pub fn resume(&self) {
        self.mode.send_replace(Mode::Forward);
    }
}

async fn forward_unless_stalled(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut mode: tokio::sync::watch::Receiver<Mode>,
) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        // While stalled, nothing is read either: the sender's buffers fill, as they
        // would on a dead path.
        match unstalled(&mut mode).await {
            Some(Mode::Forward) => {}
            Some(_) => return reset(from, to),
            None => break,
        }
        let n = tokio::select! {
            read = from.read(&mut buffer) => match read {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            },
            _ = mode.wait_for(|mode| *mode == Mode::Reset) => return reset(from, to),
        };
        match unstalled(&mut mode).await {
            Some(Mode::Forward) => {}
            Some(_) => return reset(from, to),
            None => break,
        }
        if to.write_all(&buffer[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

/// Waits while the proxy is stalled; the mode it then has (None: the proxy is gone).
async fn unstalled(mode: &mut tokio::sync::watch::Receiver<Mode>) -> Option<Mode> {
    let now = mode.wait_for(|mode| *mode != Mode::Stall).await.ok()?;
    Some(*now)
}

/// Drops both sockets with SO_LINGER 0, so each end gets a reset (once the other
/// direction's task has dropped its halves too: it sees the same mode).
fn reset(from: tokio::net::tcp::OwnedReadHalf, to: tokio::net::tcp::OwnedWriteHalf) {
    let _ = from.as_ref().set_zero_linger();
    let _ = to.as_ref().set_zero_linger();
}
