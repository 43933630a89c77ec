//! The queue's one connection to RabbitMQ in this process, and the channels its
//! publishers use: a channel per publisher at a time — one per worker, reused —
//! each in confirm mode. A lost connection is opened again on demand, but no sooner
//! than a jittered backoff after the last failed attempt, so that during an outage
//! every publish fails at once (the circuit breaker's business) instead of waiting.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lapin::options::ConfirmSelectOptions;
use lapin::tcp::OwnedTLSConfig;
use lapin::uri::AMQPUri;
use lapin::{Channel, Connection, ConnectionProperties};
use tokio::sync::{Semaphore, SemaphorePermit};
use tokio::time::Instant;
use tracing::{info, warn};

use super::judge::describe;
use crate::backoff::Backoff;
use crate::duration::rounded;
use crate::lock::lock;

/// The first wait after a failed connection attempt; it doubles up to [`MAX_WAIT`].
const FIRST_WAIT: Duration = Duration::from_millis(500);
/// A second at most: a broker that is away is unreached, and the queue tries it
/// every second (`engine::policy::circuit`); a longer wait here would keep it waiting after
/// the broker is back.
const MAX_WAIT: Duration = Duration::from_secs(1);

/// The most channels open at once: a publisher past it waits for one (by its
/// deadline). RabbitMQ allows 2,047 per connection by default.
pub const MAX_CHANNELS: usize = 256;

pub(super) struct Link {
    uri: AMQPUri,
    /// `amqp://host:5672`, for messages: no password.
    pub server: String,
    ca_pem: Option<String>,
    /// The connection's state, and the waits between failed attempts.
    state: tokio::sync::Mutex<(State, Backoff)>,
    /// Channels of the current connection that no publisher holds.
    idle: Mutex<Vec<Channel>>,
    channels: Semaphore,
}

enum State {
    /// Not yet asked for.
    Unopened,
    Up(Arc<Connection>),
    /// The last attempt failed (or the connection was lost): the next one waits
    /// until `retry_at`.
    Down { retry_at: Instant, error: String },
}

/// A channel lent to one publisher; it goes back to the idle ones when dropped,
/// unless it is closed.
pub(super) struct Lent<'a> {
    link: &'a Link,
    pub channel: Channel,
    _permit: SemaphorePermit<'a>,
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        if self.channel.status().connected() {
            lock(&self.link.idle).push(self.channel.clone());
        }
    }
}

impl Link {
    pub fn new(uri: AMQPUri, server: String, ca_pem: Option<String>) -> Link {
        Link {
            uri,
            server,
            ca_pem,
            state: tokio::sync::Mutex::new((State::Unopened, Backoff::new(FIRST_WAIT, MAX_WAIT))),
            idle: Mutex::new(Vec::new()),
            channels: Semaphore::new(MAX_CHANNELS),
        }
    }

    /// A channel in confirm mode for one publisher: an idle one, or a new one on
    /// the connection (opened first if need be). `Err` says why there is none — a
    /// downstream failure.
    pub async fn lend(&self) -> Result<Lent<'_>, String> {
        let permit = self
            .channels
            .acquire()
            .await
            .map_err(|_| "the queue's channels are closed".to_string())?;
        let connection = self.connection().await?;
        if connection.status().blocked() {
            return Err(format!(
                "RabbitMQ at {} is blocking publishers (flow control: a memory or disk alarm)",
                self.server
            ));
        }
        let channel = match self.idle_channel() {
            Some(channel) => channel,
            None => self.open_channel(&connection).await?,
        };
        Ok(Lent {
            link: self,
            channel,
            _permit: permit,
        })
    }

    /// A channel of its own, not in confirm mode, for `check` to look around with
    /// (a passive declare that fails closes its channel).
    pub async fn channel(&self) -> Result<Channel, String> {
        let connection = self.connection().await?;
        connection
            .create_channel()
            .await
            .map_err(|e| self.failed("cannot open a channel", &e))
    }

    fn idle_channel(&self) -> Option<Channel> {
        let mut idle = lock(&self.idle);
        while let Some(channel) = idle.pop() {
            if channel.status().connected() {
                return Some(channel);
            }
        }
        None
    }

    async fn open_channel(&self, connection: &Connection) -> Result<Channel, String> {
        let channel = connection
            .create_channel()
            .await
            .map_err(|e| self.failed("cannot open a channel", &e))?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(|e| self.failed("cannot put a channel in confirm mode", &e))?;
        Ok(channel)
    }

    /// The connection: the open one, or a new one if the backoff allows.
    async fn connection(&self) -> Result<Arc<Connection>, String> {
        let mut guard = self.state.lock().await;
        let (state, backoff) = &mut *guard;
        match &*state {
            State::Up(connection) if connection.status().connected() => {
                return Ok(connection.clone())
            }
            State::Up(_) => {
                warn!(server = %self.server, "lost the connection to RabbitMQ; connecting again");
                lock(&self.idle).clear();
                backoff.reset();
            }
            State::Down { retry_at, error } if Instant::now() < *retry_at => {
                let left = retry_at.saturating_duration_since(Instant::now());
                return Err(format!(
                    "cannot reach RabbitMQ at {}: {error} (trying again in {})",
                    self.server,
                    rounded(left)
                ));
            }
            State::Down { .. } | State::Unopened => {}
        }
        // Until this attempt succeeds, the next waits: one attempt at a time.
        *state = State::Down {
            retry_at: Instant::now() + backoff.next_wait(),
            error: "connecting".to_string(),
        };
        match self.connect().await {
            Ok(connection) => {
                info!(server = %self.server, "connected to RabbitMQ");
                let connection = Arc::new(connection);
                *state = State::Up(connection.clone());
                backoff.reset();
                Ok(connection)
            }
            Err(e) => {
                let error = describe(&e);
                if let State::Down { error: last, .. } = state {
                    *last = error.clone();
                }
                Err(format!("cannot reach RabbitMQ at {}: {error}", self.server))
            }
        }
    }

    async fn connect(&self) -> lapin::Result<Connection> {
        let properties = ConnectionProperties::default()
            .with_connection_name(concat!("tableq/", env!("CARGO_PKG_VERSION")).into());
        let tls = OwnedTLSConfig {
            identity: None,
            cert_chain: self.ca_pem.clone(),
        };
        let runtime = lapin::runtime::default_runtime()?;
        Connection::connect_uri_with_config(self.uri.clone(), properties, tls, runtime).await
    }

    /// `what` failed with `e`, in one line.
    fn failed(&self, what: &str, e: &lapin::Error) -> String {
        format!("{what} on RabbitMQ at {}: {}", self.server, describe(e))
    }
}
