//! Waiting between retries: the first wait from the queue file, doubling to a minute.

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

    /// The wait to use now; the one after it is twice as long, up to a minute.
    pub fn next_wait(&mut self) -> Duration {
        let now = self.next;
        self.next = (self.next * 2).min(MAX_ERROR_BACKOFF.max(self.first));
        now
    }

    pub fn reset(&mut self) {
        self.next = self.first;
    }
}

/// Sleeps for `wait` unless `stop` comes first. Returns false if it was stopped.
pub async fn pause(stop: &CancellationToken, wait: Duration) -> bool {
    tokio::select! {
        _ = stop.cancelled() => false,
        _ = tokio::time::sleep(wait) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_a_minute_and_resets() {
        let mut b = Backoff::new(Duration::from_secs(20));
        assert_eq!(b.next_wait(), Duration::from_secs(20));
        assert_eq!(b.next_wait(), Duration::from_secs(40));
        assert_eq!(b.next_wait(), Duration::from_secs(60));
        assert_eq!(b.next_wait(), Duration::from_secs(60));
        b.reset();
        assert_eq!(b.next_wait(), Duration::from_secs(20));
    }
}
