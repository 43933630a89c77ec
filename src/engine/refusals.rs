//! A database that refuses connections because it is full is worth a warning — but
//! one a minute per queue, with a count, not one per attempt.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::lock::lock;

/// How often the warning may be given.
const EVERY: Duration = Duration::from_secs(60);

#[derive(Debug, Default)]
pub struct Refusals(Mutex<State>);

#[derive(Debug, Default)]
struct State {
    /// Refusals since the last warning.
    count: u64,
    last_warned: Option<Instant>,
}

impl Refusals {
    /// Counts a refusal; the count to warn about when a warning is due.
    pub fn record(&self) -> Option<u64> {
        let mut state = lock(&self.0);
        state.count += 1;
        if state.last_warned.is_some_and(|at| at.elapsed() < EVERY) {
            return None;
        }
        state.last_warned = Some(Instant::now());
        Some(std::mem::take(&mut state.count))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warns_once_a_minute_with_the_count() {
        let refusals = Refusals::default();
        assert_eq!(refusals.record(), Some(1));
        assert_eq!(refusals.record(), None);
        assert_eq!(refusals.record(), None);
        refusals.0.lock().unwrap().last_warned = Some(Instant::now() - EVERY);
        assert_eq!(refusals.record(), Some(3));
    }
}
