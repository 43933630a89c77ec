//! How the copy keeps its history: the flags of `run` that shape it.

use std::time::Duration;

/// How the history is kept (`run --history on`, the default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryOptions {
    /// History and attempts older than this are trimmed (`--history-retention`).
    pub retention: Duration,
    /// How often minutes are written: a minute, on the minute. Shorter (tests:
    /// `TABLEQ_HISTORY_EVERY`) writes the minute under way too, each time.
    pub every: Duration,
    /// The console's address, shown in the fleet view.
    pub console: Option<String>,
}

impl Default for HistoryOptions {
    fn default() -> Self {
        HistoryOptions {
            retention: Duration::from_secs(7 * 24 * 3600),
            every: Duration::from_secs(60),
            console: None,
        }
    }
}
