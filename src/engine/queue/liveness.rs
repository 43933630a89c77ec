//! Is a queue making progress? The watchdog asks before it tells the service manager
//! that all is well. A queue makes progress when its workers claim (an idle queue's
//! watcher claims every `poll_interval`) or finish items; it is stalled when it holds
//! a database connection and has done neither for longer than its slowest healthy
//! turn could take. A queue with no connection is waiting for its database, which is
//! normal: restarting tableq would not bring the database back.

use std::time::Duration;

use tokio::time::Instant;

use crate::config::{QueueConfig, MAX_ERROR_BACKOFF};
use crate::telemetry::stats::{Counts, QueueStats};

/// Beyond the action's own deadline: outcome SQL, COMMIT, the claim itself.
const MARGIN: Duration = Duration::from_secs(10);
/// How long after an item returned to the queue a worker may still be waiting out
/// its backoff, which doubles up to a minute.
const BACKOFF_AFTER_RETURN: Duration = Duration::from_secs(300);

/// One queue's progress, as the watchdog last saw it.
#[derive(Debug)]
pub struct Progress {
    last: Counts,
    since: Instant,
    returned_at: Option<Instant>,
    /// The longest a healthy queue goes without claiming or finishing an item.
    turn: Duration,
    backoff: Duration,
    /// Said already: log a stall once, not at every look.
    pub reported: bool,
}

impl Progress {
    pub fn new(config: &QueueConfig, stats: &QueueStats) -> Progress {
        let timeout = config.action.timeout();
        // Actions in the transaction run one after another; the others concurrently.
        let actions = match config.action.in_transaction() {
            true => timeout * config.batch as u32,
            false => timeout,
        };
        Progress {
            last: stats.counts(),
            since: Instant::now(),
            returned_at: None,
            turn: config.longest_poll() + actions + MARGIN,
            backoff: config.error_backoff,
            reported: false,
        }
    }

    /// How long the queue has made no progress, if that is longer than a healthy
    /// queue ever goes; `None` while it is making progress or has no connection.
    pub fn stalled_for(&mut self, stats: &QueueStats, now: Instant) -> Option<Duration> {
        let counts = stats.counts();
        if counts != self.last {
            if counts.returned != self.last.returned {
                self.returned_at = Some(now);
            }
            self.last = counts;
            self.since = now;
        }
        let recently_returned = self
            .returned_at
            .is_some_and(|at| now.duration_since(at) < BACKOFF_AFTER_RETURN);
        let backoff = if recently_returned {
            MAX_ERROR_BACKOFF.max(self.backoff)
        } else {
            self.backoff
        };
        let quiet = now.duration_since(self.since);
        (stats.connected() > 0 && quiet > self.turn + backoff).then_some(quiet)
    }
}
