//! Noticing a queue that loops: a row whose action succeeded and committed comes
//! straight back because `[on_success]` left it in the select. tableq remembers the
//! keys it completed within `loop_window` (bounded memory) and says so when one
//! comes back; after `loop_limit` repeats the queue stops claiming. A row that
//! `[on_success]` re-armed with `:next_run` (`[recurring]`) is not handed here: it
//! is meant to come back (`engine::turn::settle`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use crate::lock::lock;
use tokio::time::Instant;

/// How many keys are remembered at most.
const REMEMBERED: usize = 100_000;

#[derive(Debug)]
pub struct Loops {
    window: Duration,
    seen: Mutex<HashMap<String, Seen>>,
}

#[derive(Debug, Clone, Copy)]
struct Seen {
    at: Instant,
    repeats: u32,
}

impl Loops {
    /// Watches for keys completed again within `window`; a zero window watches
    /// nothing (a queue whose rows are re-armed on purpose).
    pub fn new(window: Duration) -> Loops {
        Loops {
            window,
            seen: Mutex::default(),
        }
    }

    /// Notes `keys` completed now. Returns each key completed before within the
    /// window, with how many times in a row it has come back.
    pub fn completed(&self, keys: &[String]) -> Vec<(String, u32)> {
        if self.window.is_zero() {
            return Vec::new();
        }
        let mut seen = lock(&self.seen);
        if seen.len() + keys.len() > REMEMBERED {
            seen.retain(|_, s| s.at.elapsed() < self.window);
            if seen.len() + keys.len() > REMEMBERED {
                seen.clear();
            }
        }
        let now = Instant::now();
        let mut again = Vec::new();
        for key in keys {
            let repeats = match seen.get(key) {
                Some(before) if now.duration_since(before.at) < self.window => before.repeats + 1,
                _ => 0,
            };
            seen.insert(key.clone(), Seen { at: now, repeats });
            if repeats > 0 {
                again.push((key.clone(), repeats));
            }
        }
        again
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_completed_again_within_the_window_is_a_loop() {
        let loops = Loops::new(Duration::from_secs(60));
        let keys = vec!["7".to_string(), "8".to_string()];
        assert!(loops.completed(&keys).is_empty());
        assert_eq!(loops.completed(&keys[..1]), [("7".to_string(), 1)]);
        assert_eq!(loops.completed(&keys[..1]), [("7".to_string(), 2)]);
        let off = Loops::new(Duration::ZERO);
        assert!(off.completed(&keys).is_empty() && off.completed(&keys).is_empty());
    }
}
