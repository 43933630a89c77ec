//! Waiting between retries: the first wait from the queue file, doubling to a minute,
//! each wait jittered so that workers — of one copy or of many — that failed
//! together do not all try again in the same instant.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::config::MAX_ERROR_BACKOFF;

#[derive(Debug, Clone)]
pub struct Backoff {
    first: Duration,
    next: Duration,
}

impl Backoff {
    pub fn new(first: Duration) -> Self {
        Backoff { first, next: first }
    }

    /// The wait to use now, jittered; the one after it is twice as long, up to a
    /// minute.
    pub fn next_wait(&mut self) -> Duration {
        let now = self.next;
        self.next = (self.next * 2).min(MAX_ERROR_BACKOFF.max(self.first));
        jitter(now)
    }

    pub fn reset(&mut self) {
        self.next = self.first;
    }
}

/// "Equal jitter": half of `wait`, plus a random part of the other half. The waits
/// still grow as they double, and never fall below half.
pub fn jitter(wait: Duration) -> Duration {
    let half = wait / 2;
    let random = fastrand::u64(0..=half.as_nanos().min(u64::MAX as u128) as u64);
    half + Duration::from_nanos(random)
}

/// Sleeps for `wait` unless `stop` comes first. Returns false if it was stopped.
pub async fn sleep_unless_stopped(stop: &CancellationToken, wait: Duration) -> bool {
    tokio::select! {
        _ = stop.cancelled() => false,
        _ = tokio::time::sleep(wait) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// True if `wait` is a jittered `base`: between half of it and all of it.
    fn about(wait: Duration, base: u64) -> bool {
        let base = Duration::from_secs(base);
        wait >= base / 2 && wait <= base
    }

    #[test]
    fn doubles_up_to_a_minute_and_resets() {
        let mut b = Backoff::new(Duration::from_secs(20));
        assert!(about(b.next_wait(), 20));
        assert!(about(b.next_wait(), 40));
        assert!(about(b.next_wait(), 60));
        assert!(about(b.next_wait(), 60));
        b.reset();
        assert!(about(b.next_wait(), 20));
    }

    #[test]
    fn jittered_waits_differ() {
        let waits: std::collections::BTreeSet<Duration> =
            (0..20).map(|_| jitter(Duration::from_secs(1))).collect();
        assert!(waits.len() > 10, "{waits:?}");
    }
}
