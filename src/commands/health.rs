//! `tableq health`: asks a running tableq's metrics endpoint whether it is well, for
//! a container's HEALTHCHECK or a script — no curl needed. Exit 0 on 200, else 1.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::duration::rounded;

/// GETs `/healthz` (or `/readyz` when `ready`) from `addr`; `Ok` with the body on
/// 200, else why not.
pub async fn probe(addr: SocketAddr, ready: bool, timeout: Duration) -> Result<String, String> {
    let addr = reachable(addr);
    let path = if ready { "/readyz" } else { "/healthz" };
    let exchange = async {
        let mut stream = TcpStream::connect(addr).await?;
        let request = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await?;
        let mut response = Vec::new();
        stream.take(64 * 1024).read_to_end(&mut response).await?;
        Ok::<_, std::io::Error>(String::from_utf8_lossy(&response).into_owned())
    };
    let response = match tokio::time::timeout(timeout, exchange).await {
        Ok(Ok(response)) => response,
        Ok(Err(e)) => return Err(format!("http://{addr}{path}: {e}")),
        Err(_) => {
            return Err(format!(
                "http://{addr}{path}: no answer within {}",
                rounded(timeout)
            ))
        }
    };
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head.lines().next().unwrap_or_default();
    if status.split_whitespace().nth(1) == Some("200") {
        Ok(body.trim().to_string())
    } else {
        Err(format!("http://{addr}{path}: {status}: {}", body.trim()))
    }
}

/// A listener on every interface (0.0.0.0, ::) answers on loopback.
fn reachable(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => (Ipv4Addr::LOCALHOST, addr.port()).into(),
        IpAddr::V6(ip) if ip.is_unspecified() => (Ipv6Addr::LOCALHOST, addr.port()).into(),
        _ => addr,
    }
}
