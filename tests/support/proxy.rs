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
/// middlebox or a frozen VM looks like to both ends — and start again.
pub struct StallingProxy {
    pub addr: SocketAddr,
    stalled: tokio::sync::watch::Sender<bool>,
}

impl StallingProxy {
    /// Starts a proxy to `target`, forwarding.
    pub async fn start(target: SocketAddr) -> StallingProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stalled, watch) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
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
        StallingProxy { addr, stalled }
    }

    /// Stops forwarding: bytes are held, connections stay open.
    pub fn stall(&self) {
        self.stalled.send_replace(true);
    }

    /// Forwards again, held bytes first.
    pub fn resume(&self) {
        self.stalled.send_replace(false);
    }
}

async fn forward_unless_stalled(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut stalled: tokio::sync::watch::Receiver<bool>,
) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        // While stalled, nothing is read either: the sender's buffers fill, as they
        // would on a dead path.
        if stalled.wait_for(|stalled| !*stalled).await.is_err() {
            break;
        }
        let n = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if stalled.wait_for(|stalled| !*stalled).await.is_err() {
            break;
        }
        if to.write_all(&buffer[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}
