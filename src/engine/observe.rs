//! One batch as the metrics see it: how long its claim took, how long its rows had
//! waited, how long they stayed locked, and — when the transaction did not commit —
//! that its items rolled back. The worker busy meanwhile.

use std::sync::Mutex;
use std::time::SystemTime;

use tokio::time::Instant;

use super::queue::QueueRuntime;
use crate::db::{DbError, Item};
use crate::telemetry::observed::Busy;

/// Watches one turn of a worker, from its claim to its commit or rollback.
pub struct BatchWatch<'a> {
    queue: &'a QueueRuntime,
    started: Instant,
    /// When the claim answered, and how many rows it locked.
    claimed: Mutex<Option<(Instant, usize)>>,
    busy: Mutex<Option<Busy<'a>>>,
}

impl<'a> BatchWatch<'a> {
    /// Starts watching as the claim is sent.
    pub fn new(queue: &'a QueueRuntime) -> Self {
        BatchWatch {
            queue,
            started: Instant::now(),
            claimed: Mutex::new(None),
            busy: Mutex::new(None),
        }
    }

    /// The claim answered with `items`: its time, each item's wait, and the worker
    /// busy if it found any.
    pub fn claimed(&self, items: &[Item]) {
        let observed = &self.queue.stats.observed;
        let now = Instant::now();
        observed.claim.observe(now - self.started);
        *lock(&self.claimed) = Some((now, items.len()));
        if items.is_empty() {
            return;
        }
        *lock(&self.busy) = Some(observed.busy());
        let since = self.queue.config.monitoring.waiting_since.as_deref();
        let (Some(since), Some(clock)) = (since, observed.backlog().clock) else {
            return;
        };
        let wall = SystemTime::now();
        for item in items {
            let Some(index) = item.columns.find(since) else {
                return;
            };
            if let Some(age) = clock.age(&item.values[index], wall) {
                observed.queue_wait.observe(age);
            }
        }
    }

    /// The transaction committed.
    pub fn committed(&self) {
        self.locked_for();
    }

    /// The transaction rolled back (or was killed): its items are waiting again.
    pub fn rolled_back(&self) {
        if let Some(items) = self.locked_for() {
            self.queue.stats.observed.record_rolled_back(items);
        }
    }

    /// The transaction was lost to `error`.
    pub fn failed(&self, error: &DbError) {
        self.queue.stats.observed.record_db_error(error.kind());
        self.rolled_back();
    }

    /// Records how long the rows stayed locked; the number of rows, if any.
    fn locked_for(&self) -> Option<usize> {
        let (claimed_at, items) = lock(&self.claimed).take().filter(|(_, n)| *n > 0)?;
        let observed = &self.queue.stats.observed;
        observed.transaction.observe(claimed_at.elapsed());
        lock(&self.busy).take();
        Some(items)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
