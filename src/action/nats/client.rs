//! The queue's one NATS client in this process: its credentials (user and password
//! in the URL, `token`, or a `.creds` file), TLS (`tls://`, or `ca_file`), and a
//! jittered backoff between reconnection attempts. The client reconnects by
//! itself; while it is not connected, a publish fails at once (downstream).

use std::time::Duration;

use async_nats::{Client, ConnectOptions, ServerAddr};

use crate::config::NatsAction;

/// The longest wait between two reconnection attempts.
const MAX_WAIT: Duration = Duration::from_secs(8);

/// Connects to the servers of `config` — or starts to: the first attempt goes on
/// in the background when the server is not there yet.
pub(super) async fn connect(config: &NatsAction) -> Result<Client, String> {
    let mut options = ConnectOptions::new()
        .name(concat!("tableq/", env!("CARGO_PKG_VERSION")))
        .retry_on_initial_connect()
        .max_reconnects(None)
        .connection_timeout(config.timeout.min(Duration::from_secs(10)))
        .reconnect_delay_callback(reconnect_wait);
    if let Some(token) = &config.token {
        options = options.token(token.clone());
    }
    if let Some(file) = &config.credentials_file {
        options = options.credentials_file(file).await.map_err(|e| {
            format!(
                "`action.credentials_file`: cannot read {}: {e}",
                file.display()
            )
        })?;
    }
    if let Some(file) = &config.ca_file {
        options = options
            .add_root_certificates(file.clone())
            .require_tls(true);
    }
    let servers = config
        .url
        .split(',')
        .map(|url| url.trim().parse::<ServerAddr>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| format!("`action.url`: not a NATS server URL: {}", config.servers))?;
    options
        .connect(servers)
        .await
        .map_err(|e| format!("cannot connect to NATS at {}: {e}", config.servers))
}

/// The wait before reconnection attempt `attempts`: at once for the first, then
/// 100 ms doubling up to [`MAX_WAIT`], each jittered by ±50% so that many processes
/// do not knock at once.
fn reconnect_wait(attempts: usize) -> Duration {
    if attempts <= 1 {
        return Duration::ZERO;
    }
    let doubled = Duration::from_millis(100).saturating_mul(1 << (attempts - 2).min(16) as u32);
    doubled.min(MAX_WAIT).mul_f64(0.5 + fastrand::f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_grow_to_a_ceiling_with_jitter() {
        assert_eq!(reconnect_wait(1), Duration::ZERO);
        assert!(reconnect_wait(2) <= Duration::from_millis(150));
        assert!(reconnect_wait(40) <= MAX_WAIT.mul_f64(1.5));
        assert!(reconnect_wait(40) >= MAX_WAIT / 2);
    }
}
