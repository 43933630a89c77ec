//! What one turn did with the items it claimed.

use std::time::SystemTime;

use crate::telemetry::trace::spans::ItemTrace;

/// What one turn did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct BatchReport {
    pub claimed: usize,
    /// Action succeeded and `[on_success]` committed.
    pub done: usize,
    /// Action failed and `[on_failure]` committed.
    pub failed: usize,
    /// Left as they were: waiting again (no `[on_failure]`, outcome SQL failed, the
    /// failure was not the item's, or not started because the worker is stopping).
    pub returned: usize,
    /// Failures, recorded or not, that were not the items' own: downstream, or the
    /// queue's.
    pub not_the_items: usize,
    /// The keys of the items done, to notice one that comes straight back.
    pub completed: Vec<String>,
    /// When the claim answered (the first claim's, for a merged report).
    pub claimed_at: Option<SystemTime>,
    /// Each item's story for its trace span, when spans are exported.
    pub traced: Vec<ItemTrace>,
}

/// What became of one item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    Done,
    Failed,
    Returned,
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
    pub fn slows_down(&self) -> bool {
        self.returned > 0 || (self.claimed > 0 && self.not_the_items >= self.claimed)
    }

    /// Adds `other`'s counts (a row of the same claim, worked on its own).
    pub fn merge(&mut self, other: BatchReport) {
        self.claimed += other.claimed;
        self.done += other.done;
        self.failed += other.failed;
        self.returned += other.returned;
        self.not_the_items += other.not_the_items;
        self.completed.extend(other.completed);
        self.claimed_at = match (self.claimed_at, other.claimed_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.traced.extend(other.traced);
    }

    /// Counts `item`'s fate.
    pub fn count(&mut self, fate: Fate, key: impl FnOnce() -> String) {
        match fate {
            Fate::Done => {
                self.done += 1;
                self.completed.push(key());
            }
            Fate::Failed => self.failed += 1,
            Fate::Returned => self.returned += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_failures_not_recorded_or_not_the_items_slow_the_worker() {
        let mut recorded = BatchReport::claimed(2);
        recorded.count(Fate::Failed, String::new);
        recorded.count(Fate::Failed, String::new);
        assert!(
            !recorded.slows_down(),
            "recorded failures are normal processing"
        );
        let mut downstream = recorded.clone();
        downstream.not_the_items = 2;
        assert!(downstream.slows_down(), "the whole batch failed downstream");
        let mut returned = BatchReport::claimed(3);
        returned.count(Fate::Returned, String::new);
        assert!(returned.slows_down(), "an item came straight back");
    }
}
