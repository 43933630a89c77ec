//! Per-queue counters, and the minute-by-minute progress line in the log.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::info;

/// Counts of committed work, since the daemon started.
#[derive(Debug, Default)]
pub struct QueueStats {
    /// Workers holding a database session now.
    connected: AtomicUsize,
    claims: AtomicU64,
    done: AtomicU64,
    failed: AtomicU64,
    returned: AtomicU64,
}

/// A worker's database session, counted in [`QueueStats::connected`] while it lives.
#[derive(Debug)]
pub struct Connected(std::sync::Arc<QueueStats>);

impl Drop for Connected {
    fn drop(&mut self) {
        self.0.connected.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A snapshot of [`QueueStats`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Claim queries sent (empty ones included).
    pub claims: u64,
    pub done: u64,
    pub failed: u64,
    pub returned: u64,
}

impl QueueStats {
    /// Counts a worker as connected until the returned guard is dropped.
    pub fn connection(self: &std::sync::Arc<Self>) -> Connected {
        self.connected.fetch_add(1, Ordering::Relaxed);
        Connected(self.clone())
    }

    pub fn connected(&self) -> usize {
        self.connected.load(Ordering::Relaxed)
    }

    /// Records a claim query, whatever it found.
    pub fn record_claim(&self) {
        self.claims.fetch_add(1, Ordering::Relaxed);
    }

    /// Records a committed batch: its items done, failed, and returned to the queue.
    pub fn record(&self, done: usize, failed: usize, returned: usize) {
        self.done.fetch_add(done as u64, Ordering::Relaxed);
        self.failed.fetch_add(failed as u64, Ordering::Relaxed);
        self.returned.fetch_add(returned as u64, Ordering::Relaxed);
    }

    pub fn counts(&self) -> Counts {
        Counts {
            claims: self.claims.load(Ordering::Relaxed),
            done: self.done.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            returned: self.returned.load(Ordering::Relaxed),
        }
    }
}

/// Logs, every `every`, what `queue` did since the last line, until `stop`.
pub async fn report_progress(
    queue: String,
    stats: std::sync::Arc<QueueStats>,
    every: Duration,
    stop: CancellationToken,
) {
    let mut last = stats.counts();
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let now = stats.counts();
        info!(
            queue = %queue,
            done = now.done - last.done,
            failed = now.failed - last.failed,
            returned = now.returned - last.returned,
            claims = now.claims - last.claims,
            per_seconds = every.as_secs(),
            "progress"
        );
        last = now;
    }
}
