//! `--stop-when-empty` for the whole process: it is drained when every queue's last
//! claim found nothing *after the last commit of any queue* — a queue that feeds
//! another (`a` moves rows into `b`'s select) makes `b`'s earlier empty claim stale
//! — and a count that locks nothing then confirms every queue empty (an empty claim
//! may only mean that a sibling's claim had the rows locked for a moment) — and the
//! turns under way then end with nothing committed or returned (a lease-mode job
//! runs within its turn, its row out of every select). Until then an empty queue
//! idles as usual, so rows that appear are worked.

use std::collections::BTreeMap;
use std::sync::Mutex;

use tokio::sync::Notify;

use crate::lock::lock;

#[derive(Debug, Default)]
pub struct Drain {
    state: Mutex<State>,
    changed: Notify,
}

#[derive(Debug, Default)]
struct State {
    /// Bumped at every turn of any queue that carried items to their end.
    commits: u64,
    /// Each running queue, and the count of commits when its last empty claim
    /// began (`None` before it found itself empty).
    queues: BTreeMap<String, Option<u64>>,
    /// Claims under way or carried on (a lease-mode job runs within its turn), in
    /// every queue: nothing is drained while one is.
    busy: usize,
}

impl Drain {
    /// `queue` runs in this process from now on.
    pub fn register(&self, queue: &str) {
        lock(&self.state).queues.insert(queue.to_string(), None);
        self.changed.notify_waiters();
    }

    /// `queue` no longer counts: it was removed, or stopped claiming (a loop).
    pub fn unregister(&self, queue: &str) {
        lock(&self.state).queues.remove(queue);
        self.changed.notify_waiters();
    }

    /// The count of commits now, for an empty claim beginning.
    pub fn commits(&self) -> u64 {
        lock(&self.state).commits
    }

    /// A turn carried items to their end, or returned some to their queue: every
    /// queue's earlier empty claim is stale.
    pub fn committed(&self) {
        lock(&self.state).commits += 1;
    }

    /// A turn of some queue began: something may be in flight until it ends.
    pub fn turn_began(&self) {
        lock(&self.state).busy += 1;
    }

    /// That turn ended (the drain looks again: it may have been the last one).
    pub fn turn_ended(&self) {
        let mut state = lock(&self.state);
        state.busy = state.busy.saturating_sub(1);
        drop(state);
        self.changed.notify_waiters();
    }

    /// `queue`'s claim that began when the count of commits was `at` found nothing,
    /// and nothing of the queue was in flight.
    pub fn empty(&self, queue: &str, at: u64) {
        if let Some(seen) = lock(&self.state).queues.get_mut(queue) {
            *seen = Some(at);
        }
        self.changed.notify_waiters();
    }

    /// `queue` is not empty after all (a count found rows its claim did not see): it
    /// must find itself empty again.
    pub fn reopen(&self, queue: &str) {
        if let Some(seen) = lock(&self.state).queues.get_mut(queue) {
            *seen = None;
        }
    }

    /// Waits until every queue found itself empty since the last commit; returns
    /// the count of commits then, to see whether one came since, and the queues
    /// that count (a queue that left — a loop — does not).
    pub async fn all_empty(&self) -> Quiet {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let Some(quiet) = self.quiet() {
                return quiet;
            }
            changed.await;
        }
    }

    /// Whether nothing changed since `at`: waits for the turns under way to end
    /// (a claim of an empty queue ends at once; a lease job runs within its turn, its
    /// row out of every select), then sees whether any of them, or any other turn,
    /// committed or returned a row since. A poll that keeps coming does not keep the
    /// process from ever draining: the turns it begins end, committing nothing.
    pub async fn settled(&self, at: u64) -> bool {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let state = lock(&self.state);
                if state.commits != at {
                    return false;
                }
                if state.busy == 0 {
                    return true;
                }
            }
            changed.await;
        }
    }

    /// The moment, if every queue's last empty claim began after the last commit.
    fn quiet(&self) -> Option<Quiet> {
        let state = lock(&self.state);
        let at = state.commits;
        let all_empty = state.busy == 0 && state.queues.values().all(|seen| *seen == Some(at));
        all_empty.then(|| Quiet {
            at,
            queues: state.queues.keys().cloned().collect(),
        })
    }
}

/// A moment when every queue had found itself empty.
#[derive(Debug, PartialEq, Eq)]
pub struct Quiet {
    /// The count of commits then.
    pub at: u64,
    /// The queues that were empty (every one that counts).
    pub queues: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn drained_only_when_every_queue_found_nothing_after_the_last_commit() {
        let drain = Drain::default();
        drain.register("a");
        drain.register("b");
        drain.empty("b", drain.commits());
        // `a` commits, moving rows into `b`: b's empty claim is stale.
        drain.committed();
        drain.empty("a", drain.commits());
        let waiting = drain.all_empty();
        tokio::pin!(waiting);
        assert!(
            tokio::time::timeout(Duration::from_millis(20), waiting.as_mut())
                .await
                .is_err(),
            "b must look again"
        );
        drain.empty("b", drain.commits());
        let quiet = waiting.await;
        assert_eq!(quiet.queues, ["a", "b"]);
        assert!(drain.settled(quiet.at).await);
        drain.committed();
        assert!(!drain.settled(quiet.at).await);
        drain.unregister("a"); // a loop: a no longer counts
        let pending = tokio::time::timeout(Duration::from_millis(20), drain.all_empty()).await;
        assert!(pending.is_err(), "b must look again after the commit");
        drain.empty("b", drain.commits());
        assert_eq!(drain.all_empty().await.queues, ["b"], "a left");
        drain.unregister("b");
        let quiet = drain.all_empty().await;
        assert!(quiet.queues.is_empty(), "no queue left: drained");
    }

    #[tokio::test]
    async fn a_turn_under_way_keeps_the_process_from_draining() {
        let drain = Drain::default();
        drain.register("lease");
        drain.empty("lease", drain.commits());
        drain.turn_began(); // a claim found a row: its job runs, its row out of the select
        let pending = tokio::time::timeout(Duration::from_millis(20), drain.all_empty()).await;
        assert!(pending.is_err(), "a job is in flight");
        let at = drain.commits();
        let settled = drain.settled(at);
        tokio::pin!(settled);
        let pending = tokio::time::timeout(Duration::from_millis(20), settled.as_mut()).await;
        assert!(pending.is_err(), "settled waits for the job");
        drain.committed();
        drain.turn_ended();
        assert!(!settled.await, "the job committed: look again");
        drain.empty("lease", drain.commits());
        assert!(drain.settled(drain.all_empty().await.at).await);
    }

    #[tokio::test]
    async fn a_turn_that_ends_with_nothing_done_leaves_the_process_drained() {
        let drain = Drain::default();
        drain.register("poll");
        drain.empty("poll", drain.commits());
        let at = drain.all_empty().await.at;
        drain.turn_began(); // the watcher polls again while the count runs
        let settled = drain.settled(at);
        tokio::pin!(settled);
        let pending = tokio::time::timeout(Duration::from_millis(20), settled.as_mut()).await;
        assert!(pending.is_err(), "settled waits for the poll");
        drain.turn_ended();
        assert!(settled.await, "the poll found nothing: drained");
    }
}
