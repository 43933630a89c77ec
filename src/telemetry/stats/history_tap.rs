//! A queue's failed attempts on their way to the history in the database
//! (`engine::history` writes them): handed over without waiting, so a slow or
//! unwritable history never holds a worker up. A channel that is full drops the
//! attempt and counts it as a write error.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use tokio::sync::mpsc;

use crate::lock::lock;

/// One failed attempt of an item, as the worker saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedAttempt {
    /// The key as tableq prints it (`hex:…` for bytes).
    pub key: String,
    pub at: SystemTime,
    /// How long the action ran, when known.
    pub ms: Option<u64>,
    pub error: String,
    pub status: Option<i64>,
    /// The kind its handler named.
    pub kind: Option<String>,
    /// `[on_failure]` recorded it (else the row is waiting again as it was).
    pub recorded: bool,
    /// Its outcome left the row in `[failed] select`, as the transaction that
    /// wrote it saw; `None`: not asked (the history asks after the commit).
    pub gave_up: Option<bool>,
}

impl FailedAttempt {
    /// A failure recorded now, of unknown length and kind.
    pub fn new(key: String, error: &str, status: Option<i64>) -> FailedAttempt {
        FailedAttempt {
            key,
            at: SystemTime::now(),
            ms: None,
            error: error.to_string(),
            status,
            kind: None,
            recorded: true,
            gave_up: None,
        }
    }
}

/// A failed attempt of a queue, as the history's writer receives it.
#[derive(Debug, Clone)]
pub struct Kept {
    pub queue: Arc<str>,
    pub attempt: FailedAttempt,
}

/// Where a queue's failed attempts go: nowhere until the history connects it.
#[derive(Debug, Default)]
pub struct HistoryTap(Mutex<Option<Tap>>);

#[derive(Debug, Clone)]
struct Tap {
    queue: Arc<str>,
    sender: mpsc::Sender<Kept>,
    /// Attempts that could not be handed over (the channel was full or closed).
    errors: Arc<AtomicU64>,
}

impl HistoryTap {
    /// From now on, `queue`'s failed attempts go to `sender`; those it cannot take
    /// are counted in `errors`.
    pub fn connect(&self, queue: &str, sender: mpsc::Sender<Kept>, errors: Arc<AtomicU64>) {
        *lock(&self.0) = Some(Tap {
            queue: queue.into(),
            sender,
            errors,
        });
    }

    /// Whether a history takes the queue's attempts.
    pub fn connected(&self) -> bool {
        lock(&self.0)
            .as_ref()
            .is_some_and(|t| !t.sender.is_closed())
    }

    /// Hands `attempt` to the history, if one is connected, without waiting.
    pub fn keep(&self, attempt: FailedAttempt) {
        let Some(tap) = lock(&self.0).clone() else {
            return;
        };
        let kept = Kept {
            queue: tap.queue.clone(),
            attempt,
        };
        if tap.sender.try_send(kept).is_err() {
            tap.errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_channel_drops_and_counts_never_waits() {
        let tap = HistoryTap::default();
        tap.keep(FailedAttempt::new("1".into(), "nowhere yet", None));
        let (sender, mut receiver) = mpsc::channel(1);
        let errors = Arc::new(AtomicU64::new(0));
        tap.connect("emails", sender, errors.clone());
        assert!(tap.connected());
        tap.keep(FailedAttempt::new("2".into(), "kept", None));
        tap.keep(FailedAttempt::new("3".into(), "dropped", None));
        assert_eq!(errors.load(Ordering::Relaxed), 1);
        let kept = receiver.try_recv().unwrap();
        assert_eq!((&*kept.queue, kept.attempt.key.as_str()), ("emails", "2"));
        assert!(receiver.try_recv().is_err());
    }
}
