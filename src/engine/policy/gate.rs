//! A database that refuses writes for now — read-only during a failover, a grant
//! taken away — is a condition of the database, not of any row. At the first sign
//! (an outcome, a lease or an SQL action refused for it) the gate of that database
//! closes: no worker of any queue on it claims, so no action runs whose outcome
//! could not be written. The worker that met it keeps its outcome and writes it again
//! until it is taken (`engine::turn::record`), and opens the gate; if that worker is gone,
//! the gate lets one worker through now and then to look again.

use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::lock::lock;

/// The gate of one database, shared by every queue on it.
#[derive(Debug, Default)]
pub struct WriteGate {
    /// While writes are refused: the gate closed.
    closed: Mutex<Option<Closed>>,
    opened: Notify,
}

/// The gate closed, as writes are refused: why, when a worker may look again, and
/// how long after that the next one may.
#[derive(Debug, Clone, Copy)]
struct Closed {
    why: &'static str,
    until: Instant,
    every: Duration,
}

impl WriteGate {
    /// Writes were refused for `why` (`read-only`, `permission denied`): claims wait
    /// for `retry_in`, or until writes work again. Said when the gate closes.
    pub fn refused(&self, why: &'static str, retry_in: Duration) {
        let mut closed = lock(&self.closed);
        if closed.is_none() {
            warn!(
                why,
                "the database refuses writes ({why}): no worker claims on it until writes \
                work again, and outcomes already known are kept and written then; nothing is done \
                twice"
            );
        }
        *closed = Some(Closed {
            why,
            until: Instant::now() + retry_in,
            every: retry_in,
        });
    }

    /// A write went through: the gate opens, and the workers waiting at it claim.
    pub fn writable(&self) {
        if lock(&self.closed).take().is_some() {
            info!("the database takes writes again: the queues claim again");
        }
        self.opened.notify_waiters();
    }

    /// Why writes are refused, if they are.
    pub fn refusing(&self) -> Option<&'static str> {
        lock(&self.closed).map(|closed| closed.why)
    }

    /// Waits until this worker may claim: at once while writes work; while they are
    /// refused, until they work again, or until the refusal's time is up — then this
    /// worker goes, alone, to look (the next one waits as long again). False once
    /// `stop` is cancelled.
    pub async fn pass(&self, stop: &CancellationToken) -> bool {
        loop {
            let opened = self.opened.notified();
            tokio::pin!(opened);
            // Registered before looking, so an opening in between is not missed.
            opened.as_mut().enable();
            let until = {
                let mut closed = lock(&self.closed);
                match closed.as_mut() {
                    None => return true,
                    Some(closed) if closed.until <= Instant::now() => {
                        closed.until = Instant::now() + closed.every;
                        return true;
                    }
                    Some(closed) => closed.until,
                }
            };
            tokio::select! {
                _ = stop.cancelled() => return false,
                _ = opened => {}
                _ = tokio::time::sleep_until(until) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_refusal_holds_claims_until_writes_work_or_its_time_is_up() {
        let gate = WriteGate::default();
        let stop = CancellationToken::new();
        assert!(gate.pass(&stop).await, "open");
        gate.refused("read-only", Duration::from_secs(3600));
        assert_eq!(gate.refusing(), Some("read-only"));
        let waiting = gate.pass(&stop);
        tokio::pin!(waiting);
        assert!(
            tokio::time::timeout(Duration::from_millis(50), waiting.as_mut())
                .await
                .is_err(),
            "closed"
        );
        gate.writable();
        assert!(waiting.await, "opened");
        gate.refused("permission denied", Duration::from_millis(10));
        assert!(
            gate.pass(&stop).await,
            "one looks again when the time is up"
        );
        assert_eq!(gate.refusing(), Some("permission denied"));
    }
}
