//! How long a worker has been waiting for the database with no answer: set when one
//! of tableq's own calls begins, cleared by the next answer. A call cut off at its
//! deadline leaves it set — the worker is still without a database while it
//! reconnects — so a stall shows for as long as it lasts, not just for one call.

use std::sync::Mutex;
use std::time::Duration;

use crate::lock::lock;
use tokio::time::Instant;

#[derive(Debug, Default)]
pub struct Unanswered(Mutex<Option<(Instant, &'static str)>>);

impl Unanswered {
    /// A call for `what` begins; the wait started with the first call unanswered.
    pub fn begin(&self, what: &'static str) {
        let mut state = self.lock();
        match state.as_mut() {
            Some((_, waiting_for)) => *waiting_for = what,
            None => *state = Some((Instant::now(), what)),
        }
    }

    /// A call for `what` sent at `at` has had no answer, and will not: the worker has
    /// waited since then (a stall found by other means than the call's own deadline).
    pub fn stalled_since(&self, at: Instant, what: &'static str) {
        *self.lock() = Some((at, what));
    }

    /// The database answered.
    pub fn answered(&self) {
        *self.lock() = None;
    }

    /// How long the worker has waited, and for what, if longer than `limit`.
    pub fn longer_than(&self, limit: Duration) -> Option<(Duration, &'static str)> {
        let (since, what) = (*self.lock())?;
        let waited = since.elapsed();
        (waited > limit).then_some((waited, what))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(Instant, &'static str)>> {
        lock(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_lasts_from_the_first_unanswered_call_to_the_next_answer() {
        let unanswered = Unanswered::default();
        assert_eq!(unanswered.longer_than(Duration::ZERO), None);
        unanswered.begin("the claim");
        std::thread::sleep(Duration::from_millis(5));
        unanswered.begin("a connection");
        let (waited, what) = unanswered.longer_than(Duration::from_millis(1)).unwrap();
        assert!(waited >= Duration::from_millis(5));
        assert_eq!(what, "a connection");
        unanswered.answered();
        assert_eq!(unanswered.longer_than(Duration::ZERO), None);
    }
}
