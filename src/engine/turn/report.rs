//! What one turn did with the items it claimed.

use std::sync::Arc;
use std::time::SystemTime;

use crate::db::{DbError, Statements};
use crate::telemetry::events::LostAt;
use crate::telemetry::stats::history_tap::FailedAttempt;
use crate::telemetry::trace::spans::ItemTrace;

/// What one turn did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct BatchReport {
    pub claimed: usize,
    /// Action succeeded and `[on_success]` committed.
    pub done: usize,
    /// Action failed and `[on_failure]` committed.
    pub failed: usize,
    /// Left as they were: waiting again (see [`Returned`]).
    pub returned: usize,
    /// Failures, recorded or not, that were not the items' own: downstream, or the
    /// queue's.
    pub not_the_items: usize,
    /// Of those returned, the items whose writes the database refused (read-only,
    /// permission denied): the write gate holds the workers back meanwhile.
    pub refused: usize,
    /// Returned untouched, their `[concurrency]` key at its limit: no reason to
    /// slow down (the next claim skips that key).
    pub held_back: usize,
    /// Put back by `[on_release]` as their handler asked: normal processing, no
    /// reason to slow down.
    pub released: usize,
    /// The keys of the items done, to notice one that comes straight back.
    pub completed: Vec<String>,
    /// When the claim answered (the first claim's, for a merged report).
    pub claimed_at: Option<SystemTime>,
    /// Each item's story for its trace span, when spans are exported.
    pub traced: Vec<ItemTrace>,
    /// The failed attempts, for the history (when the copy keeps one): handed
    /// over once the turn committed.
    pub attempts: Vec<FailedAttempt>,
}

/// What became of one item.
#[derive(Debug)]
pub enum Fate {
    /// The action succeeded and `[on_success]` was written.
    Done,
    /// The action failed and `[on_failure]` was written.
    Failed,
    /// Left as it was claimed: waiting again.
    Returned(Returned),
}

/// Why an item is waiting again.
#[derive(Debug)]
pub enum Returned {
    /// The circuit breaker kept its action from running, or its failure downstream
    /// is not recorded while the circuit is open.
    CircuitOpen,
    /// Its action failed for a reason that is the queue's, not the row's.
    QueueFault,
    /// Its action failed because the database refuses writes for now.
    WritesRefused,
    /// Its action failed, and the queue has no `[on_failure]` to record it.
    NoOnFailure,
    /// Its outcome SQL (or, in lease mode, its `[lease] sql`) failed on its own error.
    SqlFailed {
        which: Statements,
        error: Arc<DbError>,
    },
    /// Its `[lease] sql` matched no row: it was not leased.
    NotLeased,
    /// `[concurrency]`: another copy or worker took the row's key to its limit
    /// between the claim's look and this one's lock: not started, waiting again.
    KeyAtLimit,
    /// Its lease was lost: nothing of it is recorded.
    LeaseLost { lease_id: String, at: LostAt },
    /// Whether its outcome was recorded is not known (the database could not be
    /// reached, or the COMMIT had no answer); why.
    NotKnown(String),
    /// Not started: the worker is stopping.
    Stopping,
    /// Cancelled: the shutdown timeout passed.
    Aborted,
    /// Its handler released it (`{"ok": false, "release_after": …}`), and
    /// `[on_release]` put it back to wait: not done, not failed.
    Released,
}

impl Returned {
    /// Why, as the item's trace span says it; `None` when its action's error says it.
    pub fn why(&self) -> Option<String> {
        Some(match self {
            Returned::CircuitOpen => "left as claimed: the circuit breaker is open".to_string(),
            Returned::QueueFault | Returned::WritesRefused | Returned::NoOnFailure => return None,
            Returned::SqlFailed { which, error } => match which {
                Statements::OnSuccess | Statements::OnFailure => {
                    format!("outcome SQL failed: {error}")
                }
                which => format!("{} failed: {error}", which.label()),
            },
            Returned::NotLeased => "[lease] sql matched no row: not leased".to_string(),
            Returned::KeyAtLimit => {
                "not started: its [concurrency] key is at its limit".to_string()
            }
            Returned::LeaseLost { .. } => "the lease was lost".to_string(),
            Returned::NotKnown(why) => why.clone(),
            Returned::Stopping => "not started: the worker is stopping".to_string(),
            Returned::Aborted => "cancelled: the shutdown timeout passed".to_string(),
            Returned::Released => "released by its handler: waiting again".to_string(),
        })
    }
}

impl BatchReport {
    /// A report for `claimed` rows, nothing done yet.
    pub fn claimed(claimed: usize) -> Self {
        BatchReport {
            claimed,
            claimed_at: Some(SystemTime::now()),
            ..BatchReport::default()
        }
    }

    /// Whether the worker should slow down before claiming again: items came
    /// straight back unrecorded, or every item failed for a reason not its own (a
    /// broken queue, an outage). Items that failed for their own sake and were
    /// recorded are normal processing.
    /// Not when the database refused writes: the closed write gate holds every
    /// worker until writes work, and lets them all claim the moment they do.
    pub fn slows_down(&self) -> bool {
        if self.refused > 0 {
            return false;
        }
        self.returned > self.held_back + self.released
            || (self.claimed > 0 && self.not_the_items >= self.claimed)
    }

    /// Adds `other`'s counts (a row of the same claim, worked on its own).
    pub fn merge(&mut self, other: BatchReport) {
        self.claimed += other.claimed;
        self.done += other.done;
        self.failed += other.failed;
        self.returned += other.returned;
        self.not_the_items += other.not_the_items;
        self.refused += other.refused;
        self.held_back += other.held_back;
        self.released += other.released;
        self.completed.extend(other.completed);
        self.claimed_at = match (self.claimed_at, other.claimed_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.traced.extend(other.traced);
        self.attempts.extend(other.attempts);
    }

    /// Counts an item's fate (`key`: the item's, for a loop's detection).
    pub fn count(&mut self, fate: &Fate, key: impl FnOnce() -> String) {
        match fate {
            Fate::Done => {
                self.done += 1;
                self.completed.push(key());
            }
            Fate::Failed => self.failed += 1,
            Fate::Returned(Returned::WritesRefused) => {
                self.returned += 1;
                self.refused += 1;
            }
            Fate::Returned(Returned::KeyAtLimit) => {
                self.returned += 1;
                self.held_back += 1;
            }
            Fate::Returned(Returned::Released) => {
                self.returned += 1;
                self.released += 1;
            }
            Fate::Returned(_) => self.returned += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_failures_not_recorded_or_not_the_items_slow_the_worker() {
        let mut recorded = BatchReport::claimed(2);
        recorded.count(&Fate::Failed, String::new);
        recorded.count(&Fate::Failed, String::new);
        assert!(
            !recorded.slows_down(),
            "recorded failures are normal processing"
        );
        let mut downstream = recorded.clone();
        downstream.not_the_items = 2;
        assert!(downstream.slows_down(), "the whole batch failed downstream");
        let mut returned = BatchReport::claimed(3);
        returned.count(&Fate::Returned(Returned::NoOnFailure), String::new);
        assert!(returned.slows_down(), "an item came straight back");
    }
}
