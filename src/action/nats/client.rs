//! The queue's one NATS client in this process: its credentials (user and password
//! in the URL, `token`, or a `.creds` file), TLS (`tls://`, or `ca_file`), and a
//! jittered backoff between connection attempts — tableq's own until the first
//! connection, the client's after it (it reconnects by itself). While it is not
//! connected, a publish fails at once (downstream).

use std::time::Duration;

use async_nats::{Client, ConnectErrorKind, ConnectOptions, ServerAddr};

use super::config::NatsAction;
use crate::backoff::{doubled, jitter};

/// The longest wait between two reconnection attempts: a second, as the queue
/// tries an unreached server every second (`engine::policy::circuit`).
pub(super) const MAX_WAIT: Duration = Duration::from_secs(1);

/// Why there is no client: the queue's own (credentials that do not read or are
/// refused), or the server not reached.
pub(super) enum Failed {
    Queue(String),
    Unreachable(String),
}

/// Connects to the servers of `config`, once.
pub(super) async fn connect(config: &NatsAction) -> Result<Client, Failed> {
    let mut options = ConnectOptions::new()
        .name(concat!("tableq/", env!("CARGO_PKG_VERSION")))
        .max_reconnects(None)
        .connection_timeout(config.common.timeout.min(Duration::from_secs(10)))
        .reconnect_delay_callback(reconnect_wait);
    if let Some(token) = &config.token {
        options = options.token(token.clone());
    }
    if let Some(file) = &config.credentials_file {
        options = options.credentials_file(file).await.map_err(|e| {
            Failed::Queue(format!(
                "`action.credentials_file`: cannot read {}: {e}",
                file.display()
            ))
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
        .map_err(|_| {
            Failed::Queue(format!(
                "`action.url`: not a NATS server URL: {}",
                config.servers
            ))
        })?;
    options.connect(servers).await.map_err(|e| {
        let message = format!("cannot connect to NATS at {}: {e}", config.servers);
        match e.kind() {
            ConnectErrorKind::Authentication | ConnectErrorKind::AuthorizationViolation => {
                Failed::Queue(message)
            }
            _ => Failed::Unreachable(message),
        }
    })
}

/// The wait before reconnection attempt `attempts`: at once for the first, then
/// 100 ms doubling up to [`MAX_WAIT`], each jittered so that many processes do not
/// knock at once.
fn reconnect_wait(attempts: usize) -> Duration {
    if attempts <= 1 {
        return Duration::ZERO;
    }
    let retries = u32::try_from(attempts - 1).unwrap_or(u32::MAX);
    jitter(doubled(Duration::from_millis(100), retries, MAX_WAIT))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_grow_to_a_ceiling_with_jitter() {
        assert_eq!(reconnect_wait(1), Duration::ZERO);
        assert!(reconnect_wait(2) <= Duration::from_millis(100));
        assert!(reconnect_wait(40) <= MAX_WAIT);
        assert!(reconnect_wait(40) >= MAX_WAIT / 2);
    }
}
