//! What one transaction did with its items.

/// What one transaction did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct BatchReport {
    pub claimed: usize,
    /// Action succeeded and `[on_success]` committed.
    pub done: usize,
    /// Action failed and `[on_failure]` committed.
    pub failed: usize,
    /// Left as they were: waiting again (no `[on_failure]`, outcome SQL failed, or
    /// not started because the worker is stopping).
    pub returned: usize,
    /// A batch run without savepoints had an item fail: the whole transaction was
    /// rolled back, and the next claim should run with a savepoint per item.
    pub rolled_back: bool,
    /// The keys of the items done, to notice one that comes straight back.
    pub completed: Vec<String>,
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
            ..BatchReport::default()
        }
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
