//! Saying a thing once per key: a failure that repeats for the same row at every
//! retry is logged in full the first time, and quietly after that.

use std::collections::HashSet;
use std::sync::Mutex;

use crate::lock::lock;

/// How many keys are remembered before the memory starts again (bounded memory).
const REMEMBERED: usize = 10_000;

#[derive(Debug, Default)]
pub struct OncePerKey(Mutex<HashSet<String>>);

impl OncePerKey {
    /// True the first time `key` is seen (since the memory last started again).
    pub fn first(&self, key: &str) -> bool {
        let mut seen = lock(&self.0);
        if seen.contains(key) {
            return false;
        }
        if seen.len() >= REMEMBERED {
            seen.clear();
        }
        seen.insert(key.to_string());
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn says_it_once_per_key() {
        let once = OncePerKey::default();
        assert!(once.first("7"));
        assert!(!once.first("7"));
        assert!(once.first("8"));
    }
}
