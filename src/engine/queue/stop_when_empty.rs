//! `--stop-when-empty`, for one queue: knowing when it found itself empty —
//! nothing waiting and nothing in flight — even with many workers, some of whose
//! items may come back. Whether the process is drained is the [`Drain`]'s to say:
//! every queue empty after the last commit of any.

use std::sync::{Arc, Mutex};

use tokio::time::Instant;

use crate::engine::queue::drain::Drain;
use crate::lock::lock;

/// Shared by a queue's workers. A queue is empty when a claim found nothing, no
/// other worker was busy, and no item returned to the queue since that claim began.
#[derive(Debug)]
pub struct StopWhenEmpty {
    enabled: bool,
    state: Mutex<State>,
    drain: Arc<Drain>,
    queue: String,
}

#[derive(Debug, Default)]
struct State {
    busy: usize,
    /// Bumped whenever an item returns to the queue or a transaction is lost.
    returns: u64,
    /// Not drained before this: a row left leased (lease mode) is out of the select
    /// until its lease expires.
    not_before: Option<Instant>,
    /// Bumped at every turn of this queue that carried items to their end.
    commits: u64,
}

/// What an empty claim says about the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Emptied {
    /// Nothing waits and nothing is in flight: the process's drain is told.
    Empty,
    /// Nothing is in flight, but another worker of the queue committed while the
    /// claim ran (its rows may have fed the queue): claim again at once rather
    /// than a poll later.
    LookAgain,
    /// Other workers are busy, or items came back: idle as usual.
    NotYet,
}

/// One attempt to find rows, taken before a claim; says what the queue looked like
/// when it began. Dropping it
/// unfinished (an error, a panic) counts as items returning to the queue.
#[derive(Debug)]
pub struct Attempt<'a> {
    queue: &'a StopWhenEmpty,
    returns_at_start: u64,
    /// The process's count of commits when the claim began.
    commits_at_start: u64,
    /// This queue's count of commits when the claim began.
    queue_commits_at_start: u64,
    finished: bool,
}

impl StopWhenEmpty {
    /// `queue`'s, reporting to `drain` (only if `enabled`).
    pub fn new(enabled: bool, drain: Arc<Drain>, queue: &str) -> Self {
        StopWhenEmpty {
            enabled,
            state: Mutex::new(State::default()),
            drain,
            queue: queue.to_string(),
        }
    }

    pub fn begin(&self) -> Attempt<'_> {
        self.drain.turn_began();
        let mut state = self.lock();
        state.busy += 1;
        Attempt {
            queue: self,
            returns_at_start: state.returns,
            commits_at_start: self.drain.commits(),
            queue_commits_at_start: state.commits,
            finished: false,
        }
    }

    /// A turn carried items to their end: every queue must look again.
    pub fn committed(&self) {
        self.lock().commits += 1;
        self.drain.committed();
    }

    /// The queue stopped claiming (a loop): the process's drain does not wait for it.
    pub fn leave(&self) {
        self.drain.unregister(&self.queue);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        lock(&self.state)
    }
}

impl StopWhenEmpty {
    /// A row returned while leased comes back into the select only when its lease
    /// expires, at `at` at the latest: the queue is not drained before.
    pub fn not_before(&self, at: Instant) {
        let mut state = self.lock();
        state.not_before = state.not_before.max(Some(at));
    }
}

impl Attempt<'_> {
    /// The claim found rows; `returned` says whether any went back to the queue.
    pub fn finish(mut self, returned: bool) {
        self.end(returned);
    }

    /// The claim found nothing: whether the queue is now empty (the process's drain
    /// is told so), must look again, or not yet.
    pub fn finish_empty(mut self) -> Emptied {
        let queue = self.queue;
        self.finished = true;
        let mut state = queue.lock();
        state.busy -= 1;
        queue.drain.turn_ended();
        let leases_out = state.not_before.is_some_and(|at| Instant::now() < at);
        let alone = state.busy == 0 && state.returns == self.returns_at_start && !leases_out;
        let fed = state.commits != self.queue_commits_at_start;
        drop(state);
        match (queue.enabled && alone, fed) {
            (false, _) => Emptied::NotYet,
            (true, true) => Emptied::LookAgain,
            (true, false) => {
                queue.drain.empty(&queue.queue, self.commits_at_start);
                Emptied::Empty
            }
        }
    }

    fn end(&mut self, returned: bool) {
        if self.finished {
            return;
        }
        self.finished = true;
        let mut state = self.queue.lock();
        state.busy -= 1;
        if returned {
            state.returns += 1;
            // Back in the select: every queue must look again.
            self.queue.drain.committed();
        }
        self.queue.drain.turn_ended();
    }
}

impl Drop for Attempt<'_> {
    fn drop(&mut self) {
        self.end(true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue_in(drain: &Arc<Drain>) -> StopWhenEmpty {
        drain.register("jobs");
        StopWhenEmpty::new(true, drain.clone(), "jobs")
    }

    #[test]
    fn drained_only_when_nobody_is_busy_and_nothing_came_back() {
        let queue = queue_in(&Arc::default());
        let a = queue.begin();
        let b = queue.begin();
        assert_eq!(a.finish_empty(), Emptied::NotYet, "b is still busy");
        let a = queue.begin();
        b.finish(true); // b's item came back
        assert_eq!(
            a.finish_empty(),
            Emptied::NotYet,
            "an item returned after a's claim began"
        );
        let a = queue.begin();
        assert_eq!(a.finish_empty(), Emptied::Empty);
    }

    #[test]
    fn a_commit_during_the_last_empty_claim_means_look_again_at_once() {
        let queue = queue_in(&Arc::default());
        let a = queue.begin();
        let b = queue.begin();
        b.finish(false);
        queue.committed(); // b's batch committed while a's claim ran
        assert_eq!(a.finish_empty(), Emptied::LookAgain);
        assert_eq!(queue.begin().finish_empty(), Emptied::Empty);
    }

    #[test]
    fn a_ticket_dropped_unfinished_is_not_busy_forever() {
        let queue = queue_in(&Arc::default());
        drop(queue.begin()); // a worker that panicked mid-batch
        let a = queue.begin();
        assert_eq!(a.finish_empty(), Emptied::Empty);
    }

    #[test]
    fn a_row_left_leased_keeps_the_queue_from_draining_until_its_lease_ends() {
        let queue = queue_in(&Arc::default());
        queue.not_before(Instant::now() + std::time::Duration::from_secs(3600));
        queue.not_before(Instant::now()); // an earlier one changes nothing
        assert_eq!(
            queue.begin().finish_empty(),
            Emptied::NotYet,
            "the lease has not ended"
        );
        let fresh = queue_in(&Arc::default());
        fresh.not_before(Instant::now());
        assert_eq!(
            fresh.begin().finish_empty(),
            Emptied::Empty,
            "a lease that has ended holds nothing"
        );
    }

    #[test]
    fn never_drains_when_disabled() {
        let queue = StopWhenEmpty::new(false, Arc::default(), "jobs");
        assert_eq!(queue.begin().finish_empty(), Emptied::NotYet);
    }
}
