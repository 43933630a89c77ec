//! A queue's monitoring keys: how often its waiting rows are counted, the cap of
//! that count, and the column that says since when a row has waited.

use std::time::Duration;

use crate::config::load::raw::RawQueue;
use crate::config::validate::validator::Validator;

/// `stats_interval` when the file does not set it.
pub const DEFAULT_STATS_INTERVAL: Duration = Duration::from_secs(15);
/// `waiting_cap` when the file does not set it.
pub const DEFAULT_WAITING_CAP: usize = 10_000;
/// The largest `waiting_cap`: the count reads up to this many rows (locking none).
pub const MAX_WAITING_CAP: usize = 1_000_000;

/// What the queue's background statistics read, and how often.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Monitoring {
    /// How often one connection counts the waiting rows (and reads the oldest).
    pub stats_interval: Duration,
    /// The count stops here: a bigger backlog costs no more.
    pub waiting_cap: usize,
    /// The select's column holding when a row started waiting (a DATETIME or
    /// TIMESTAMP, or a unix time): with it, the queue's lag is measured.
    pub waiting_since: Option<String>,
    /// The select's column naming what kind of job a row is: items are counted by it.
    pub label: Option<String>,
}

impl Default for Monitoring {
    fn default() -> Self {
        Monitoring {
            stats_interval: DEFAULT_STATS_INTERVAL,
            waiting_cap: DEFAULT_WAITING_CAP,
            waiting_since: None,
            label: None,
        }
    }
}

/// Checks `stats_interval`, `waiting_cap`, `waiting_since` and `label`.
pub(crate) fn monitoring<A>(v: &mut Validator, raw: &RawQueue<A>) -> Monitoring {
    let stats_interval = v.positive(
        &["stats_interval"],
        raw.stats_interval,
        DEFAULT_STATS_INTERVAL,
    );
    let waiting_cap = match raw.waiting_cap {
        None => DEFAULT_WAITING_CAP,
        Some(cap) if (1..=MAX_WAITING_CAP as u64).contains(&cap) => cap as usize,
        Some(cap) => {
            v.error(
                &["waiting_cap"],
                format!("`waiting_cap` = {cap} is out of range: use 1 to {MAX_WAITING_CAP}"),
            );
            DEFAULT_WAITING_CAP
        }
    };
    let waiting_since = raw.waiting_since.clone();
    if waiting_since
        .as_deref()
        .is_some_and(|c| c.trim().is_empty())
    {
        v.error(
            &["waiting_since"],
            "`waiting_since` is empty: name the select's column that holds when a row started waiting, e.g. waiting_since = \"created_at\"",
        );
    }
    let label = raw.label.clone();
    if label.as_deref().is_some_and(|c| c.trim().is_empty()) {
        v.error(
            &["label"],
            "`label` is empty: name the select's column that says what kind of job a row is, e.g. label = \"job\"",
        );
    }
    Monitoring {
        stats_interval,
        waiting_cap,
        waiting_since,
        label,
    }
}
