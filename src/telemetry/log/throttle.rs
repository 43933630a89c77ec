//! A line that would repeat at every attempt — the database full, unreachable, a
//! transaction lost — is said once a minute per queue, with how many times it
//! happened since, not once per attempt: a thousand queues whose database went away
//! do not write a thousand lines a second.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::lock::lock;

/// How often the warning may be given.
const EVERY: Duration = Duration::from_secs(60);

#[derive(Debug, Default)]
pub struct Throttle(Mutex<State>);

#[derive(Debug, Default)]
struct State {
    /// Throttle since the last warning.
    count: u64,
    last_warned: Option<Instant>,
}

impl Throttle {
    /// Counts one more; the count to say when a line is due.
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
        let throttle = Throttle::default();
        assert_eq!(throttle.record(), Some(1));
        assert_eq!(throttle.record(), None);
        assert_eq!(throttle.record(), None);
        throttle.0.lock().unwrap().last_warned = Some(Instant::now() - EVERY);
        assert_eq!(throttle.record(), Some(3));
    }
}
