//! The runs of a queue's action under way now, for the status page: which keys,
//! since when, and — in lease mode — the last `:progress` the job reported. A run is
//! listed while the guard [`InFlight::start`] returns lives.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::action::progress::Progress;
use crate::db::Item;
use crate::lock::lock;

/// Keys listed per run: a batch of 500 is its first few.
const KEYS_PER_RUN: usize = 5;

#[derive(Debug, Default)]
pub struct InFlight {
    next: AtomicU64,
    runs: Mutex<BTreeMap<u64, Run>>,
}

#[derive(Debug, Clone)]
struct Run {
    keys: Vec<String>,
    items: usize,
    started: SystemTime,
    progress: Option<Arc<Progress>>,
}

/// One run under way, as `/status.json` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunView {
    /// The first few keys of its items.
    pub keys: Vec<String>,
    pub items: usize,
    /// Unix time, in seconds.
    pub started_at: u64,
    /// Lease mode: the last progress line the job reported.
    pub progress: Option<String>,
}

/// Lists its run until dropped.
#[derive(Debug)]
pub struct Running<'a> {
    in_flight: &'a InFlight,
    id: u64,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        lock(&self.in_flight.runs).remove(&self.id);
    }
}

impl InFlight {
    /// A run of the action for `items` begins (`progress`: lease mode's).
    pub fn start(&self, items: &[Item], progress: Option<Arc<Progress>>) -> Running<'_> {
        let keys = items.iter().take(KEYS_PER_RUN).map(Item::key_text);
        self.start_keys(keys.collect(), items.len(), progress)
    }

    fn start_keys(
        &self,
        keys: Vec<String>,
        items: usize,
        progress: Option<Arc<Progress>>,
    ) -> Running<'_> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let run = Run {
            keys,
            items,
            started: SystemTime::now(),
            progress,
        };
        lock(&self.runs).insert(id, run);
        Running {
            in_flight: self,
            id,
        }
    }

    /// How many runs are under way.
    pub fn count(&self) -> usize {
        lock(&self.runs).len()
    }

    /// The `limit` oldest runs under way, oldest first.
    pub fn oldest(&self, limit: usize) -> Vec<RunView> {
        let runs: Vec<Run> = lock(&self.runs).values().take(limit).cloned().collect();
        // The progress file is read with the lock released.
        runs.into_iter()
            .map(|run| RunView {
                keys: run.keys,
                items: run.items,
                started_at: run
                    .started
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_secs(),
                progress: run.progress.and_then(|p| p.last()),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(keys: std::ops::RangeInclusive<u32>) -> Vec<String> {
        keys.take(KEYS_PER_RUN).map(|k| k.to_string()).collect()
    }

    #[test]
    fn a_run_is_listed_while_its_guard_lives_oldest_first() {
        let in_flight = InFlight::default();
        let first = in_flight.start_keys(keys(7..=7), 1, None);
        let second = in_flight.start_keys(keys(1..=8), 8, None);
        let runs = in_flight.oldest(10);
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[0].keys, ["7"]);
        assert_eq!(
            runs[1].keys,
            ["1", "2", "3", "4", "5"],
            "the first few keys"
        );
        assert_eq!(runs[1].items, 8);
        assert_eq!(in_flight.oldest(1).len(), 1);
        drop(first);
        assert_eq!(in_flight.oldest(10)[0].keys, ["1", "2", "3", "4", "5"]);
        drop(second);
        assert_eq!(in_flight.count(), 0);
    }
}
